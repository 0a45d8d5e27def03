//! IAM roles for service accounts (IRSA): when a cluster has it, where its public
//! service-account issuer lives, and what the masters and the IAM roles make of it.
//!
//! A cluster has IRSA when its AWSCluster carries [`ANNOTATION`] or its Release is 19 or
//! newer (reference §5.6). Its issuer is published in its own bucket ([`bucket`], the
//! original's `<account>-g8s-<id>-oidc-pod-identity-v2`) and named by the ConfigMap
//! `<id>-irsa-cloudfront` ([`configmap_name`]): key `domain` (required) is the issuer's host, and
//! path where it has one; `domainAlias` (optional) a second, predictable name of the same issuer.
//! The issuer URLs are `https://<domainAlias>` (first: it signs new tokens) then
//! `https://<domain>` ([`Issuer::urls`]); the masters' API servers accept both, and their own
//! `https://api.<base>`, and the audience `sts.amazonaws.com` (`.com.cn` in China) beside their own.
//!
//! Every role trusted through IRSA ([`TRUSTED_SERVICE_ACCOUNTS`]) trusts each issuer's IAM
//! OIDC provider for `sts:AssumeRoleWithWebIdentity`, for the service accounts the original
//! named (`<issuer>:sub`) and for the STS audience only (`<issuer>:aud`).

use serde_json::{Value, json};

/// The AWSCluster annotation that turns IRSA on (any value the original accepted: empty or
/// `true`).
pub const ANNOTATION: &str = "alpha.aws.giantswarm.io/iam-roles-for-service-accounts";
/// The first Release major whose clusters have IRSA without the annotation.
pub const ALWAYS_FROM_MAJOR: u64 = 19;
/// The ConfigMap key of the issuer's host.
pub const DOMAIN_KEY: &str = "domain";
/// The ConfigMap key of the issuer's alias.
pub const DOMAIN_ALIAS_KEY: &str = "domainAlias";

/// `<id>-irsa-cloudfront`: the ConfigMap naming the cluster's issuer.
pub fn configmap_name(cluster_id: &str) -> String {
    format!("{cluster_id}-irsa-cloudfront")
}

/// `<account>-g8s-<id>-oidc-pod-identity-v2`: the bucket the issuer's documents are served from.
pub fn bucket(tenant_account_id: &str, cluster_id: &str) -> String {
    format!("{tenant_account_id}-g8s-{cluster_id}-oidc-pod-identity-v2")
}

/// `amazonaws.com`, or `amazonaws.com.cn` in the China regions.
pub fn aws_domain(region: &str) -> &'static str {
    if region.starts_with("cn-") { "amazonaws.com.cn" } else { "amazonaws.com" }
}

/// The STS audience of the cluster's tokens: `sts.amazonaws.com[.cn]`.
pub fn sts_audience(region: &str) -> String {
    format!("sts.{}", aws_domain(region))
}

/// The issuer host of a bucket served by S3 itself: `s3.<region>.amazonaws.com[.cn]/<bucket>`.
pub fn s3_issuer_host(region: &str, bucket: &str) -> String {
    format!("s3.{region}.{}/{bucket}", aws_domain(region))
}

/// Whether a cluster has IRSA, from its annotation's value (`None`: absent) and its Release's
/// major version; the problem and the fix when the annotation's value is not one the original
/// understood as "on".
pub fn enabled(annotation: Option<&str>, release_major: u64) -> Result<bool, String> {
    match annotation.map(str::trim) {
        None => Ok(release_major >= ALWAYS_FROM_MAJOR),
        Some("" | "true") => Ok(true),
        Some(other) => Err(format!(
            "annotation {ANNOTATION} is {other:?}: its presence turns IAM roles for service accounts on; \
             set it to \"true\", or remove it to leave them off (Releases {ALWAYS_FROM_MAJOR} and newer have them on \
             without it)"
        )),
    }
}

/// A cluster's service-account issuer, as its ConfigMap names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issuer {
    /// The issuer's host, and path where it has one (`d1234.cloudfront.net`,
    /// `s3.eu-west-1.amazonaws.com/<bucket>`), without `https://`.
    pub domain: String,
    /// A second name of the same issuer (`irsa.<base domain>`), signing when set.
    pub alias: Option<String>,
}

fn host(value: &str) -> String {
    value.trim().trim_start_matches("https://").trim_end_matches('/').to_string()
}

impl Issuer {
    /// The issuer of a ConfigMap's data; what is wrong and the fix when `domain` is missing or
    /// empty.
    pub fn from_data(configmap: &str, data: &std::collections::BTreeMap<String, String>) -> Result<Self, String> {
        let domain = data.get(DOMAIN_KEY).map(|d| host(d)).unwrap_or_default();
        if domain.is_empty() {
            return Err(format!(
                "ConfigMap {configmap} has no {DOMAIN_KEY:?}: it must name the service-account issuer's host \
                 (the operator writes it when it publishes the issuer; delete the ConfigMap to have it written again)"
            ));
        }
        let alias = data.get(DOMAIN_ALIAS_KEY).map(|a| host(a)).filter(|a| !a.is_empty());
        Ok(Self { domain, alias })
    }

    /// Every name of the issuer, the signing one first: the alias, then the domain.
    pub fn hosts(&self) -> Vec<&str> {
        self.alias.iter().map(String::as_str).chain([self.domain.as_str()]).collect()
    }

    /// The issuer URLs, `https://<host>`, the signing one first.
    pub fn urls(&self) -> Vec<String> {
        self.hosts().iter().map(|h| format!("https://{h}")).collect()
    }
}

/// The ARN of the IAM OIDC provider of issuer `host` in `account_id`:
/// `arn:<partition>:iam::<account>:oidc-provider/<host>`, as IAM derives it from the URL.
pub fn provider_arn(partition: &str, account_id: &str, host: &str) -> String {
    format!("arn:{partition}:iam::{account_id}:oidc-provider/{host}")
}

/// The roles of TCCPN trusted through IRSA, by logical id, with the service accounts each
/// trusts (`system:serviceaccount:<namespace>:<name>`, `*` wildcards), as the original's.
pub const TRUSTED_SERVICE_ACCOUNTS: [(&str, &str); 2] = [
    (crate::stacks::tccpn::ALB_CONTROLLER_ROLE, "system:serviceaccount:*:aws-load-balancer-controller*"),
    (crate::stacks::tccpn::ROUTE53_MANAGER_ROLE, "system:serviceaccount:*:*external-dns*"),
];

/// The trust statements of a role for `service_accounts` of `issuer`'s IAM OIDC providers (one
/// per host) in the stack's account: `sts:AssumeRoleWithWebIdentity` for tokens whose `sub`
/// matches and whose `aud` is the STS audience.
pub fn trust_statements(issuer: &Issuer, partition: &str, region: &str, service_accounts: &str) -> Vec<Value> {
    issuer
        .hosts()
        .into_iter()
        .map(|host| {
            json!({
                "Effect": "Allow",
                "Principal": {
                    "Federated": crate::cfn::sub(&format!("arn:{partition}:iam::${{AWS::AccountId}}:oidc-provider/{host}")),
                },
                "Action": "sts:AssumeRoleWithWebIdentity",
                "Condition": {
                    "StringLike": { format!("{host}:sub"): service_accounts },
                    "StringEquals": { format!("{host}:aud"): sts_audience(region) },
                },
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[test]
    fn the_annotation_or_release_19_turns_irsa_on_and_a_value_meaning_off_is_refused() {
        assert_eq!(enabled(None, 18), Ok(false));
        assert_eq!(enabled(None, 19), Ok(true));
        assert_eq!(enabled(Some(""), 18), Ok(true));
        assert_eq!(enabled(Some("true"), 17), Ok(true));
        let err = enabled(Some("false"), 18).expect_err("ambiguous");
        assert!(err.contains(ANNOTATION) && err.contains("remove it"), "{err}");
    }

    #[test]
    fn the_issuer_comes_from_the_configmap_the_alias_signing_first() {
        let data = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
        };
        let issuer = Issuer::from_data(
            "org-a/x1-irsa-cloudfront",
            &data(&[("domain", "d1a2.cloudfront.net"), ("domainAlias", "irsa.x1.example.com")]),
        )
        .expect("issuer");
        assert_eq!(issuer.urls(), ["https://irsa.x1.example.com", "https://d1a2.cloudfront.net"]);
        let s3 = Issuer::from_data("c", &data(&[("domain", "https://s3.eu-west-1.amazonaws.com/b/")])).expect("issuer");
        assert_eq!(s3.urls(), ["https://s3.eu-west-1.amazonaws.com/b"]);
        let err = Issuer::from_data("org-a/x1-irsa-cloudfront", &data(&[("domain", " ")])).expect_err("empty");
        assert!(err.starts_with("ConfigMap org-a/x1-irsa-cloudfront has no \"domain\""), "{err}");
    }

    #[test]
    fn each_issuer_host_is_trusted_for_its_service_accounts_and_the_sts_audience_only() {
        let issuer =
            Issuer { domain: "s3.cn-north-1.amazonaws.com.cn/1-g8s-x1-oidc-pod-identity-v2".into(), alias: None };
        let trust = trust_statements(&issuer, "aws-cn", "cn-north-1", "system:serviceaccount:*:*external-dns*");
        assert_eq!(trust.len(), 1);
        let host = "s3.cn-north-1.amazonaws.com.cn/1-g8s-x1-oidc-pod-identity-v2";
        assert_eq!(
            trust[0]["Principal"]["Federated"],
            json!({"Fn::Sub": format!("arn:aws-cn:iam::${{AWS::AccountId}}:oidc-provider/{host}")})
        );
        assert_eq!(trust[0]["Condition"]["StringEquals"][format!("{host}:aud")], "sts.amazonaws.com.cn");
        assert_eq!(
            trust[0]["Condition"]["StringLike"][format!("{host}:sub")],
            "system:serviceaccount:*:*external-dns*"
        );
    }
}

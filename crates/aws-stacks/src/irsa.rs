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
//! Outside China, from Release 18 on ([`cloudfront`]), the issuer is a CloudFront distribution in
//! front of the bucket, as irsa-operator set it up: the distribution reads the bucket through an
//! origin access control, so the bucket grants `s3:GetObject` to that distribution only
//! ([`IssuerReader`]) and blocks every public access; its domain `<id>.cloudfront.net` is the
//! issuer. In China (no CloudFront there) and for earlier Releases the bucket is served by S3
//! itself, readable by anyone.
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
/// The ConfigMap key of the issuer's CloudFront distribution's ARN.
pub const ARN_KEY: &str = "arn";
/// The ConfigMap key of the issuer's CloudFront distribution's id.
pub const DISTRIBUTION_ID_KEY: &str = "distributionId";
/// The ConfigMap key of the origin access identity through which the original's distributions
/// read the bucket.
pub const ORIGIN_ACCESS_IDENTITY_KEY: &str = "originAccessIdentityId";
/// The ConfigMap key of the origin access control through which the operator's distributions
/// read the bucket.
pub const ORIGIN_ACCESS_CONTROL_KEY: &str = "originAccessControlId";
/// The first Release major whose issuer is served by CloudFront (outside China).
pub const CLOUDFRONT_FROM_MAJOR: u64 = 18;
/// The thumbprint given to the IAM OIDC providers of the issuers: the SHA-1 (hex) of the root
/// certificate at the top of the chains S3 and CloudFront serve, Starfield Services Root
/// Certificate Authority - G2 (the certificate cross-signed by Starfield Class 2), the value AWS
/// shows for providers on S3 and CloudFront hosts. IAM checks issuers on these hosts against its
/// own library of trusted root CAs and ignores the thumbprint; it is given for the API versions
/// and tools that still read it.
pub const ISSUER_THUMBPRINT: &str = "9e99a48a9960b14926bb7f3b02e22da2b0ab7280";

/// Whether the issuer of a cluster in `region` at Release `release_major` is served by
/// CloudFront: outside China from Release 18 on, as the original decided.
pub fn cloudfront(region: &str, release_major: u64) -> bool {
    !region.starts_with("cn-") && release_major >= CLOUDFRONT_FROM_MAJOR
}

/// The comment of the operator's CloudFront distribution of cluster `cluster_id`'s issuer.
pub fn distribution_comment(cluster_id: &str) -> String {
    format!("Service-account issuer of cluster {cluster_id}")
}

/// Whether `comment` is that of cluster `cluster_id`'s issuer distribution: the operator's, or
/// irsa-operator's (`Created by irsa-operator for cluster <id>`).
pub fn is_distribution_comment(comment: &str, cluster_id: &str) -> bool {
    comment == distribution_comment(cluster_id)
        || comment == format!("Created by irsa-operator for cluster {cluster_id}")
}

/// The name of the origin access control of cluster `cluster_id`'s issuer distribution.
pub fn origin_access_control_name(cluster_id: &str) -> String {
    format!("{cluster_id}-service-account-issuer")
}

/// The bucket's regional S3 domain, the distribution's origin: `<bucket>.s3.<region>.amazonaws.com[.cn]`.
pub fn s3_origin_domain(region: &str, bucket: &str) -> String {
    format!("{bucket}.s3.{region}.{}", aws_domain(region))
}

/// Who reads the issuer's bucket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IssuerReader {
    /// Anyone, served by S3 itself (China, Releases before 18, an issuer someone named by hand).
    Anyone,
    /// The CloudFront distribution of this ARN, through its origin access control.
    Distribution {
        /// `arn:aws:cloudfront::<account>:distribution/<id>`.
        arn: String,
    },
    /// A CloudFront origin access identity (the original's distributions): its id.
    OriginAccessIdentity {
        /// The identity's id (`E2IB68Y7SJQAKJ`).
        id: String,
    },
}

impl IssuerReader {
    /// The reader a ConfigMap names: the origin access identity where it names one (the
    /// original's), the distribution where it names its ARN, else anyone.
    pub fn from_data(data: &std::collections::BTreeMap<String, String>) -> Self {
        let get = |k: &str| data.get(k).map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
        if let Some(id) = get(ORIGIN_ACCESS_IDENTITY_KEY) {
            return Self::OriginAccessIdentity { id };
        }
        match get(ARN_KEY) {
            Some(arn) if arn.contains(":distribution/") => Self::Distribution { arn },
            _ => Self::Anyone,
        }
    }
}

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
    fn cloudfront_serves_the_issuer_from_release_18_outside_china() {
        assert!(cloudfront("eu-central-1", 18));
        assert!(cloudfront("us-east-1", 20));
        assert!(!cloudfront("eu-central-1", 17));
        assert!(!cloudfront("cn-north-1", 20));
        assert_eq!(s3_origin_domain("cn-north-1", "b"), "b.s3.cn-north-1.amazonaws.com.cn");
        assert!(is_distribution_comment("Created by irsa-operator for cluster x1", "x1"));
        assert!(is_distribution_comment(&distribution_comment("x1"), "x1"));
        assert!(!is_distribution_comment(&distribution_comment("x1"), "x12"));
    }

    #[test]
    fn the_reader_of_the_bucket_is_the_distribution_the_configmap_names() {
        let data = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
        };
        let arn = "arn:aws:cloudfront::1:distribution/E1";
        assert_eq!(IssuerReader::from_data(&data(&[("domain", "d.cloudfront.net")])), IssuerReader::Anyone);
        assert_eq!(
            IssuerReader::from_data(&data(&[("domain", "d.cloudfront.net"), ("arn", arn)])),
            IssuerReader::Distribution { arn: arn.into() }
        );
        assert_eq!(
            IssuerReader::from_data(&data(&[("arn", arn), ("originAccessIdentityId", "E2IB")])),
            IssuerReader::OriginAccessIdentity { id: "E2IB".into() }
        );
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

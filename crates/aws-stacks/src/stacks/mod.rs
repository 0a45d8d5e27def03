//! The six CloudFormation stacks of a tenant cluster, one module each, as pure functions from a
//! typed [`Params`](tccp::Params) struct to a [`Template`](crate::cfn::Template).
//!
//! | module | stack | account | reference |
//! |---|---|---|---|
//! | [`tccpi`] | `cluster-<id>-tccpi` | management | §5.3 |
//! | [`tccp`] | `cluster-<id>-tccp` | tenant | §5.2, §5.4 |
//! | [`tccpf`] | `cluster-<id>-tccpf` | management | §5.5 |
//! | [`tccpn`] | `cluster-<id>-tccpn` | tenant | §5.6 |
//! | [`tcnp`] | `cluster-<id>-tcnp-<md>` | tenant | §5.7 |
//! | [`tcnpf`] | `cluster-<id>-tcnpf-<md>` | management | §5.8 |
//!
//! The three stacks of a legacy `AWSConfig` cluster (§11) are built from these parts in
//! [`legacy`].
//!
//! Inputs that come from other stacks (subnet IDs, security groups, the peering) are passed in
//! as plain strings, read by the operator from the producing stack's outputs, because a
//! CloudFormation reference cannot cross accounts and upstream uses no exports.
//!
//! The templates stay inside what both CloudFormation and the moto emulator handle (see the
//! module docs of each stack): availability zones are literals (no `Fn::GetAZs`), CIDRs are
//! computed by the operator (no `Fn::Cidr`), the KMS key and bucket are created through their
//! own APIs, IAM policies are inline, and no `GetAtt` reads an attribute the emulator lacks.

use std::collections::BTreeMap;

use base64::Engine as _;
use serde_json::json;

use crate::names::{self, StackKind};

pub mod legacy;
pub mod tccp;
pub mod tccpf;
pub mod tccpi;
pub mod tccpn;
pub mod tcnp;
pub mod tcnpf;

/// Inputs shared by every stack of a cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Common {
    /// The cluster ID, e.g. `al9qy`.
    pub cluster_id: String,
    /// The UID of the AWSCluster, for the `giantswarm.io/cluster-uid` tag of every stack (none
    /// when empty, as in `aws-operator render` of an object never stored).
    pub cluster_uid: String,
    /// The installation (management cluster) name, for the `giantswarm.io/installation` tag.
    pub installation: String,
    /// The organization label of the cluster, for the `giantswarm.io/organization` tag.
    pub organization: String,
    /// The operator version rendering the stack; written to the `OperatorVersion` output, which
    /// change detection compares with the CR's version label (§5.9).
    pub operator_version: String,
    /// The release version of the cluster; written to the `ReleaseVersion` output.
    pub release_version: String,
    /// The AWS region, e.g. `eu-central-1`.
    pub region: String,
    /// The AWS partition: `aws`, or `aws-cn` in China.
    pub partition: String,
    /// The installation's base domain; the tenant zone is `<id>.k8s.<base_domain>`.
    pub base_domain: String,
    /// Whether hosted zones and DNS records are managed.
    pub route53_enabled: bool,
    /// Cloud tags: labels of the CAPI Cluster with prefix `tag.provider.giantswarm.io/`, prefix
    /// already stripped. Added to the TCCP, TCCPN and TCNP stack tags.
    pub cloud_tags: BTreeMap<String, String>,
}

impl Common {
    /// `<id>.k8s.<base_domain>`, the tenant cluster's DNS zone.
    pub fn tenant_domain(&self) -> String {
        names::tenant_base_domain(&self.cluster_id, &self.base_domain)
    }

    /// The EC2 service principal of the partition (`ec2.amazonaws.com[.cn]`).
    pub(crate) fn ec2_principal(&self) -> String {
        if self.partition == "aws-cn" { "ec2.amazonaws.com.cn".into() } else { "ec2.amazonaws.com".into() }
    }

    /// `arn:<partition>:<service>:<region>:<this account>:<resource>`, the account filled in by
    /// CloudFormation: the ARN pattern of the cluster's own region and account.
    pub(crate) fn arn(&self, service: &str, resource: &str) -> serde_json::Value {
        crate::cfn::sub(&format!("arn:{}:{service}:{}:${{AWS::AccountId}}:{resource}", self.partition, self.region))
    }

    /// An IAM condition: every resource the request touches carries the cluster's tag
    /// `giantswarm.io/cluster: <id>` (set on each stack, and propagated to instances at launch).
    pub(crate) fn tagged_with_cluster(&self) -> serde_json::Value {
        json!({ "StringEquals": { format!("aws:ResourceTag/{}", names::tags::CLUSTER): self.cluster_id } })
    }

    /// `arn:<partition>:s3:::<rest>`.
    pub(crate) fn s3_arn(&self, rest: &str) -> String {
        format!("arn:{}:s3:::{rest}", self.partition)
    }
}

/// What a node's instance role needs to pull images from ECR (masters and workers alike): a
/// registry token, then the layers of any repository, as images may come from other accounts.
pub(crate) fn ecr_pull(common: &Common) -> [serde_json::Value; 2] {
    [
        // "Actions defined by Amazon Elastic Container Registry" (Service Authorization
        // Reference): GetAuthorizationToken has no resource type, only `*`.
        crate::cfn::allow(&["ecr:GetAuthorizationToken"], json!("*")),
        crate::cfn::allow(ECR_PULL_ACTIONS, json!(format!("arn:{}:ecr:*:*:repository/*", common.partition))),
    ]
}

/// What a pull reads from a repository (the kubelet and containerd list or describe nothing).
const ECR_PULL_ACTIONS: &[&str] =
    &["ecr:BatchCheckLayerAvailability", "ecr:GetDownloadUrlForLayer", "ecr:BatchGetImage"];

/// A route table of the management cluster's VPC, target of the TCCPF and TCNPF routes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpRouteTable {
    /// The route table ID, `rtb-…`; it names the route's logical ID, so it must be stable.
    pub id: String,
    /// Its `Name` tag, for descriptions only.
    pub name: String,
}

/// Routes from every management route table to every `(az, cidr)` subnet through the peering,
/// named by `route_id(az, table)`; or, without any, a placeholder resource, as a template needs
/// one. TCCPF (the cluster's private subnets) and TCNPF (a pool's) are made of these.
pub(crate) fn add_peering_routes<'a>(
    t: &mut crate::cfn::Template,
    subnets: impl IntoIterator<Item = (&'a str, &'a str)>,
    route_tables: &[CpRouteTable],
    peering_connection_id: &str,
    route_id: impl Fn(&str, &CpRouteTable) -> String,
) {
    for (az, cidr) in subnets {
        for rt in route_tables {
            t.add(
                route_id(az, rt),
                crate::cfn::Resource::new(
                    "AWS::EC2::Route",
                    json!({
                        "RouteTableId": rt.id,
                        "DestinationCidrBlock": cidr,
                        "VpcPeeringConnectionId": peering_connection_id,
                    }),
                ),
            );
        }
    }
    if t.resources.is_empty() {
        tccpf::add_placeholder(t);
    }
}

/// The tags of a stack (§5.1). CloudFormation copies stack tags onto every resource it creates
/// (EC2 instances included, through their auto scaling groups), and the operator finds resources
/// again by them.
///
/// `owner` is the control-plane ID for [`StackKind::Tccpn`] and the node-pool ID for
/// [`StackKind::Tcnp`]; other kinds ignore it. Cloud tags are added for TCCP, TCCPN and TCNP;
/// a cloud tag can not override one of the operator's own keys.
pub fn stack_tags(common: &Common, kind: StackKind, owner: Option<&str>) -> Vec<(String, String)> {
    let mut out = vec![
        (names::tags::kubernetes_cluster(&common.cluster_id), "owned".to_owned()),
        (names::tags::CLUSTER.to_owned(), common.cluster_id.clone()),
        (names::tags::INSTALLATION.to_owned(), common.installation.clone()),
        (names::tags::ORGANIZATION.to_owned(), common.organization.clone()),
        (names::tags::STACK.to_owned(), kind.as_str().to_owned()),
    ];
    if !common.cluster_uid.is_empty() {
        out.push((names::tags::CLUSTER_UID.to_owned(), common.cluster_uid.clone()));
    }
    match (kind, owner) {
        (StackKind::Tccpn, Some(cp)) => out.push((names::tags::CONTROL_PLANE.to_owned(), cp.to_owned())),
        (StackKind::Tcnp, Some(md)) => out.push((names::tags::MACHINE_DEPLOYMENT.to_owned(), md.to_owned())),
        _ => {}
    }
    if matches!(kind, StackKind::Tccp | StackKind::Tccpn | StackKind::Tcnp) {
        for (k, v) in &common.cloud_tags {
            if !out.iter().any(|(existing, _)| existing == k) {
                out.push((k.clone(), v.clone()));
            }
        }
    }
    out
}

/// Launch-template user data: base64 of a minimal Ignition 3.3.0 config that merges the full
/// node config from `s3://<bucket>/<key>`.
///
/// The node config itself is too large for user data (16 KiB) and holds encrypted secrets, so
/// only this pointer lives in the launch template; the instance profile grants `s3:GetObject`
/// on the bucket. Because the key contains the operator version, a new operator version changes
/// the user data and hence the launch template, which is what rolls the nodes (§6.3).
pub fn user_data(bucket: &str, key: &str) -> String {
    let config = json!({
        "ignition": {
            "version": "3.3.0",
            "config": { "merge": [ { "source": format!("s3://{bucket}/{key}") } ] }
        }
    });
    base64::engine::general_purpose::STANDARD.encode(config.to_string())
}

/// The `HttpTokens` of a launch template's metadata options, from the object's annotation
/// `alpha.aws.giantswarm.io/metadata-v2`: `required` (IMDSv2 only) unless the annotation says
/// exactly `optional`, the explicit opt-out that lets IMDSv1 requests through. Any other value
/// keeps the safe default. Every launch template pairs it with a hop limit of 2, so pods that
/// need the metadata service reach it through the node's network namespace.
pub fn imds_http_tokens(annotation: Option<&str>) -> &'static str {
    match annotation.map(str::trim) {
        Some("optional") => "optional",
        _ => "required",
    }
}

/// The per-AZ suffix of logical IDs and output keys: `eu-central-1a` → `EuCentral1a`.
pub(crate) fn az_suffix(az: &str) -> String {
    names::logical_id(&[az])
}

/// The common `Outputs` every versioned stack carries.
pub(crate) fn version_outputs(template: &mut crate::cfn::Template, common: &Common) {
    template.output(
        "OperatorVersion",
        json!(common.operator_version),
        Some("Operator version that rendered the stack"),
    );
    template.output("ReleaseVersion", json!(common.release_version), Some("Release version of the cluster"));
}

/// A stack output the operator needs is absent, e.g. because the stack was left in
/// `ROLLBACK_COMPLETE` after a failed create (§5.1).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("stack output {0:?} is missing")]
pub struct MissingOutput(pub String);

/// Looks up a required output.
pub(crate) fn required(outputs: &BTreeMap<String, String>, key: &str) -> Result<String, MissingOutput> {
    outputs.get(key).cloned().ok_or_else(|| MissingOutput(key.to_owned()))
}

#[cfg(test)]
pub(crate) mod testdata {
    //! Parameters for the §14.1/§14.2 example cluster, shared by the stack tests.
    use super::*;

    pub fn common() -> Common {
        Common {
            cluster_id: "al9qy".into(),
            cluster_uid: "3f1c2a9e-uid-of-al9qy".into(),
            installation: "gauss".into(),
            organization: "acme".into(),
            operator_version: "16.1.1".into(),
            release_version: "18.2.0".into(),
            region: "eu-central-1".into(),
            partition: "aws".into(),
            base_domain: "gauss.eu-central-1.aws.gigantic.io".into(),
            route53_enabled: true,
            cloud_tags: BTreeMap::from([("cost-center".to_owned(), "blue".to_owned())]),
        }
    }

    pub fn cp_route_tables() -> Vec<CpRouteTable> {
        vec![
            CpRouteTable { id: "rtb-0aaa".into(), name: "gauss_private_0".into() },
            CpRouteTable { id: "rtb-0bbb".into(), name: "gauss_private_1".into() },
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn imdsv2_is_the_default_and_v1_only_an_explicit_opt_out() {
        assert_eq!(imds_http_tokens(None), "required");
        assert_eq!(imds_http_tokens(Some("required")), "required");
        assert_eq!(imds_http_tokens(Some("optional")), "optional");
        assert_eq!(imds_http_tokens(Some(" optional ")), "optional");
        assert_eq!(imds_http_tokens(Some("")), "required");
        assert_eq!(imds_http_tokens(Some("yes")), "required");
    }

    #[test]
    fn stack_tags_follow_section_5_1() {
        let c = testdata::common();
        let tags: BTreeMap<_, _> = stack_tags(&c, StackKind::Tccpn, Some("a2wax")).into_iter().collect();
        assert_eq!(tags["kubernetes.io/cluster/al9qy"], "owned");
        assert_eq!(tags["giantswarm.io/cluster"], "al9qy");
        assert_eq!(tags["giantswarm.io/installation"], "gauss");
        assert_eq!(tags["giantswarm.io/organization"], "acme");
        assert_eq!(tags["giantswarm.io/stack"], "tccpn");
        assert_eq!(tags["giantswarm.io/control-plane"], "a2wax");
        assert_eq!(tags["giantswarm.io/cluster-uid"], "3f1c2a9e-uid-of-al9qy");
        assert_eq!(tags["cost-center"], "blue");
        assert!(!tags.contains_key("giantswarm.io/machine-deployment"));

        let np: BTreeMap<_, _> = stack_tags(&c, StackKind::Tcnp, Some("g3j50")).into_iter().collect();
        assert_eq!(np["giantswarm.io/machine-deployment"], "g3j50");
        assert_eq!(np["giantswarm.io/stack"], "tcnp");
        assert!(!np.contains_key("giantswarm.io/control-plane"));
    }

    #[test]
    fn management_account_stacks_carry_no_cloud_tags() {
        let c = testdata::common();
        for kind in [StackKind::Tccpi, StackKind::Tccpf, StackKind::Tcnpf] {
            let tags = stack_tags(&c, kind, Some("g3j50"));
            assert_eq!(tags.len(), 6, "{kind}: {tags:?}");
            assert!(tags.iter().all(|(k, _)| k != "cost-center"));
        }
    }

    #[test]
    fn cloud_tags_cannot_override_operator_tags() {
        let mut c = testdata::common();
        c.cloud_tags.insert("giantswarm.io/cluster".into(), "evil".into());
        let tags = stack_tags(&c, StackKind::Tccp, None);
        let values: Vec<_> =
            tags.iter().filter(|(k, _)| k == "giantswarm.io/cluster").map(|(_, v)| v.as_str()).collect();
        assert_eq!(values, vec!["al9qy"]);
    }

    #[test]
    fn user_data_points_ignition_at_the_s3_object() {
        let encoded = user_data("123456789012-g8s-al9qy", "version/16.1.1/cloudconfig/v_6_1_0/cluster-al9qy-tccpn-0");
        let decoded = base64::engine::general_purpose::STANDARD.decode(encoded).expect("valid base64");
        let config: serde_json::Value = serde_json::from_slice(&decoded).expect("valid JSON");
        assert_eq!(config["ignition"]["version"], "3.3.0");
        assert_eq!(
            config["ignition"]["config"]["merge"][0]["source"],
            "s3://123456789012-g8s-al9qy/version/16.1.1/cloudconfig/v_6_1_0/cluster-al9qy-tccpn-0"
        );
    }

    #[test]
    fn missing_output_names_the_key() {
        let err = required(&BTreeMap::new(), "VPCID").unwrap_err();
        assert_eq!(err.to_string(), "stack output \"VPCID\" is missing");
    }
}

//! The names aws-operator gives to what it creates, in one place.
//!
//! Every name here is observable in AWS or Kubernetes and is part of the operator's contract:
//! existing clusters are found again by these names after a restart or an upgrade, so changing
//! one orphans resources. They follow the upstream operator (reference §5, §7.2, §14.1).

/// The version of the node-config layout, part of every node-config object key. Upstream
/// hard-codes `v_6_1_0`; it is kept so that object paths read the same.
pub const CLOUD_CONFIG_VERSION: &str = "v_6_1_0";

/// The six kinds of CloudFormation stack, in creation order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StackKind {
    /// Initializer, management-cluster account: the VPC peering role.
    Tccpi,
    /// Tenant cluster control plane, tenant account: network, load balancers, security groups.
    Tccp,
    /// Finalizer, management-cluster account: routes from the management VPC to the tenant.
    Tccpf,
    /// Control-plane nodes, tenant account: masters, etcd volumes and interfaces.
    Tccpn,
    /// One node pool, tenant account.
    Tcnp,
    /// One node pool's finalizer, management-cluster account: routes to the pool's subnets.
    Tcnpf,
}

/// The AWS account a stack lives in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Account {
    /// The account of the management cluster.
    ControlPlane,
    /// The workload cluster's own account.
    Tenant,
}

impl StackKind {
    /// Every kind, in creation order.
    pub const ALL: [StackKind; 6] =
        [StackKind::Tccpi, StackKind::Tccp, StackKind::Tccpf, StackKind::Tccpn, StackKind::Tcnp, StackKind::Tcnpf];

    /// The short name, used in stack names and in the `giantswarm.io/stack` tag.
    pub fn as_str(self) -> &'static str {
        match self {
            StackKind::Tccpi => "tccpi",
            StackKind::Tccp => "tccp",
            StackKind::Tccpf => "tccpf",
            StackKind::Tccpn => "tccpn",
            StackKind::Tcnp => "tcnp",
            StackKind::Tcnpf => "tcnpf",
        }
    }

    /// The account the stack is created in.
    pub fn account(self) -> Account {
        match self {
            StackKind::Tccpi | StackKind::Tccpf | StackKind::Tcnpf => Account::ControlPlane,
            StackKind::Tccp | StackKind::Tccpn | StackKind::Tcnp => Account::Tenant,
        }
    }

    /// Whether the stack is one per node pool rather than one per cluster.
    pub fn per_node_pool(self) -> bool {
        matches!(self, StackKind::Tcnp | StackKind::Tcnpf)
    }
}

impl std::fmt::Display for StackKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `cluster-<id>-<kind>` for per-cluster stacks, `cluster-<id>-<kind>-<mdID>` for node pools.
///
/// # Panics
///
/// Never; a node-pool kind without a pool id gives the per-cluster form, which callers avoid by
/// construction ([`StackKind::per_node_pool`]).
pub fn stack_name(cluster_id: &str, kind: StackKind, node_pool: Option<&str>) -> String {
    match node_pool {
        Some(md) if kind.per_node_pool() => format!("cluster-{cluster_id}-{kind}-{md}"),
        _ => format!("cluster-{cluster_id}-{kind}"),
    }
}

/// The cluster bucket for node configs: `<tenantAccountID>-g8s-<clusterID>`.
pub fn bucket(tenant_account_id: &str, cluster_id: &str) -> String {
    format!("{tenant_account_id}-g8s-{cluster_id}")
}

/// The bucket receiving the cluster bucket's access logs.
pub fn access_log_bucket(tenant_account_id: &str, cluster_id: &str) -> String {
    format!("{}-access-logs", bucket(tenant_account_id, cluster_id))
}

/// The key prefix of the load balancers' access logs in the access-log bucket (the config
/// bucket's own server access logs go under `<bucket>/`).
pub const ELB_ACCESS_LOG_PREFIX: &str = "elb";

/// Who delivers Classic Load Balancer access logs in `region`, as a bucket policy's `Principal`
/// (Elastic Load Balancing User Guide, "Enable access logs for your Classic Load Balancer"):
/// Elastic Load Balancing's account of the region for the regions opened before August 2022,
/// the service principal `logdelivery.elasticloadbalancing.amazonaws.com` for the later ones.
pub fn elb_log_delivery_principal(region: &str) -> serde_json::Value {
    let account = match region {
        "us-east-1" => "127311923021",
        "us-east-2" => "033677994240",
        "us-west-1" => "027434742980",
        "us-west-2" => "797873946194",
        "af-south-1" => "098369216593",
        "ap-east-1" => "754344448648",
        "ap-southeast-3" => "589379963580",
        "ap-south-1" => "718504428378",
        "ap-northeast-3" => "383597477331",
        "ap-northeast-2" => "600734575887",
        "ap-southeast-1" => "114774131450",
        "ap-southeast-2" => "783225319266",
        "ap-northeast-1" => "582318560864",
        "ca-central-1" => "985666609251",
        "eu-central-1" => "054676820928",
        "eu-west-1" => "156460612806",
        "eu-west-2" => "652711504416",
        "eu-south-1" => "635631232127",
        "eu-west-3" => "009996457667",
        "eu-north-1" => "897822967062",
        "me-south-1" => "076674570225",
        "sa-east-1" => "507241528517",
        "us-gov-west-1" => "048591011584",
        "us-gov-east-1" => "190560391635",
        "cn-north-1" => "638102146993",
        "cn-northwest-1" => "037604701340",
        _ => return serde_json::json!({ "Service": "logdelivery.elasticloadbalancing.amazonaws.com" }),
    };
    serde_json::json!({ "AWS": format!("arn:{}:iam::{account}:root", partition(region)) })
}

/// The KMS alias of the cluster key: `alias/<clusterID>`.
pub fn kms_alias(cluster_id: &str) -> String {
    format!("alias/{cluster_id}")
}

/// Object key of a master's node config: `version/<op>/cloudconfig/v_6_1_0/cluster-<id>-tccpn-<n>`.
pub fn master_config_key(operator_version: &str, cluster_id: &str, master_id: u8) -> String {
    format!("version/{operator_version}/cloudconfig/{CLOUD_CONFIG_VERSION}/cluster-{cluster_id}-tccpn-{master_id}")
}

/// Object key of a node pool's node config:
/// `version/<op>/cloudconfig/v_6_1_0/cluster-<id>-tcnp-<mdID>`.
pub fn node_pool_config_key(operator_version: &str, cluster_id: &str, md_id: &str) -> String {
    format!("version/{operator_version}/cloudconfig/{CLOUD_CONFIG_VERSION}/cluster-{cluster_id}-tcnp-{md_id}")
}

/// The `Name` tag of master `master_id`'s etcd network interface: `<id>-master<n>-eni`. TCCPN
/// creates it; the master's node config finds it by this tag at boot and attaches it.
pub fn master_eni(cluster_id: &str, master_id: u8) -> String {
    format!("{cluster_id}-master{master_id}-eni")
}

/// The `Name` tag of master `master_id`'s etcd data volume: `<id>-master<n>-etcd`. TCCPN creates
/// it; the master's node config finds it by this tag at boot and attaches it.
pub fn master_etcd_volume(cluster_id: &str, master_id: u8) -> String {
    format!("{cluster_id}-master{master_id}-etcd")
}

/// The AWS partition of a region, the second field of every ARN there: `aws-cn` for the China
/// regions (`cn-…`), `aws-us-gov` for GovCloud (`us-gov-…`), else `aws`.
pub fn partition(region: &str) -> &'static str {
    if region.starts_with("cn-") {
        "aws-cn"
    } else if region.starts_with("us-gov-") {
        "aws-us-gov"
    } else {
        "aws"
    }
}

/// The tenant cluster's base domain: `<id>.k8s.<domain>`.
pub fn tenant_base_domain(cluster_id: &str, domain: &str) -> String {
    format!("{cluster_id}.k8s.{domain}")
}

/// The Kubernetes API host of a tenant cluster: `api.<id>.k8s.<domain>`.
pub fn api_host(cluster_id: &str, domain: &str) -> String {
    format!("api.{}", tenant_base_domain(cluster_id, domain))
}

/// The etcd host of a tenant cluster: `etcd.<id>.k8s.<domain>`.
pub fn etcd_host(cluster_id: &str, domain: &str) -> String {
    format!("etcd.{}", tenant_base_domain(cluster_id, domain))
}

/// The classic ELB names of a cluster: public API, internal API, etcd.
pub fn load_balancers(cluster_id: &str) -> [String; 3] {
    [format!("{cluster_id}-api"), format!("{cluster_id}-api-internal"), format!("{cluster_id}-etcd")]
}

/// The IAM role in the management account that lets the tenant account accept the VPC peering.
pub fn peer_access_role(cluster_id: &str) -> String {
    format!("{cluster_id}-vpc-peer-access")
}

/// A CloudFormation logical ID built from parts: the parts are joined with `-`, every character
/// that is not an ASCII letter or digit is dropped, and the character after a dropped one is
/// upper-cased (`PrivateSubnet-eu-central-1a` → `PrivateSubnetEuCentral1a`), as upstream does.
pub fn logical_id(parts: &[&str]) -> String {
    let joined = parts.join("-");
    let mut out = String::with_capacity(joined.len());
    let mut upper_next = false;
    for c in joined.chars() {
        if c.is_ascii_alphanumeric() {
            if upper_next {
                out.push(c.to_ascii_uppercase());
            } else {
                out.push(c);
            }
            upper_next = false;
        } else {
            upper_next = true;
        }
    }
    if let Some(first) = out.get(0..1) {
        let upper = first.to_ascii_uppercase();
        out.replace_range(0..1, &upper);
    }
    out
}

/// Tag keys shared by the operator and the templates.
pub mod tags {
    /// The cluster id.
    pub const CLUSTER: &str = "giantswarm.io/cluster";
    /// The UID of the AWSCluster that owns a stack: a stack that carries another is not deleted
    /// for this cluster (`apis::cluster_id`).
    pub const CLUSTER_UID: &str = "giantswarm.io/cluster-uid";
    /// The installation (management cluster) name.
    pub const INSTALLATION: &str = "giantswarm.io/installation";
    /// The organization owning the cluster.
    pub const ORGANIZATION: &str = "giantswarm.io/organization";
    /// Which of the six stacks a resource came from.
    pub const STACK: &str = "giantswarm.io/stack";
    /// The control plane id (TCCPN only).
    pub const CONTROL_PLANE: &str = "giantswarm.io/control-plane";
    /// The node pool id (TCNP only).
    pub const MACHINE_DEPLOYMENT: &str = "giantswarm.io/machine-deployment";
    /// The release a node was booted from.
    pub const RELEASE: &str = "giantswarm.io/release";

    /// `kubernetes.io/cluster/<id>`, value `owned`: the Kubernetes cloud provider's ownership tag.
    pub fn kubernetes_cluster(cluster_id: &str) -> String {
        format!("kubernetes.io/cluster/{cluster_id}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_the_upstream_examples() {
        // Reference §14.1: cluster al9qy, node pool g3j50, account 123456789012, operator 16.1.1.
        assert_eq!(stack_name("al9qy", StackKind::Tccp, None), "cluster-al9qy-tccp");
        assert_eq!(stack_name("al9qy", StackKind::Tccpi, None), "cluster-al9qy-tccpi");
        assert_eq!(stack_name("al9qy", StackKind::Tcnp, Some("g3j50")), "cluster-al9qy-tcnp-g3j50");
        assert_eq!(stack_name("al9qy", StackKind::Tcnpf, Some("g3j50")), "cluster-al9qy-tcnpf-g3j50");
        assert_eq!(bucket("123456789012", "al9qy"), "123456789012-g8s-al9qy");
        assert_eq!(access_log_bucket("123456789012", "al9qy"), "123456789012-g8s-al9qy-access-logs");
        assert_eq!(
            elb_log_delivery_principal("eu-central-1"),
            serde_json::json!({ "AWS": "arn:aws:iam::054676820928:root" })
        );
        assert_eq!(
            elb_log_delivery_principal("cn-north-1"),
            serde_json::json!({ "AWS": "arn:aws-cn:iam::638102146993:root" })
        );
        assert_eq!(
            elb_log_delivery_principal("eu-central-2"),
            serde_json::json!({ "Service": "logdelivery.elasticloadbalancing.amazonaws.com" })
        );
        assert_eq!(kms_alias("al9qy"), "alias/al9qy");
        assert_eq!(master_config_key("16.1.1", "al9qy", 0), "version/16.1.1/cloudconfig/v_6_1_0/cluster-al9qy-tccpn-0");
        assert_eq!(
            node_pool_config_key("16.1.1", "al9qy", "g3j50"),
            "version/16.1.1/cloudconfig/v_6_1_0/cluster-al9qy-tcnp-g3j50"
        );
        assert_eq!(
            api_host("al9qy", "gauss.eu-central-1.aws.gigantic.io"),
            "api.al9qy.k8s.gauss.eu-central-1.aws.gigantic.io"
        );
        assert_eq!(peer_access_role("al9qy"), "al9qy-vpc-peer-access");
    }

    #[test]
    fn partitions_follow_the_region() {
        assert_eq!(partition("eu-central-1"), "aws");
        assert_eq!(partition("cn-north-1"), "aws-cn");
        assert_eq!(partition("cn-northwest-1"), "aws-cn");
        assert_eq!(partition("us-gov-west-1"), "aws-us-gov");
        assert_eq!(partition("us-east-1"), "aws");
    }

    #[test]
    fn logical_ids_are_sanitised_like_upstream() {
        assert_eq!(logical_id(&["PrivateSubnet", "eu-central-1a"]), "PrivateSubnetEuCentral1a");
        assert_eq!(
            logical_id(&["VPCPeeringRoute", "eu-central-1b", "gauss_private_0"]),
            "VPCPeeringRouteEuCentral1bGaussPrivate0"
        );
        assert_eq!(logical_id(&["nat"]), "Nat");
        assert_eq!(logical_id(&[]), "");
    }

    #[test]
    fn accounts_follow_the_stack_table() {
        use StackKind::*;
        let cp: Vec<_> = StackKind::ALL.into_iter().filter(|k| k.account() == Account::ControlPlane).collect();
        assert_eq!(cp, vec![Tccpi, Tccpf, Tcnpf]);
        assert!(Tcnp.per_node_pool() && Tcnpf.per_node_pool() && !Tccpn.per_node_pool());
    }
}

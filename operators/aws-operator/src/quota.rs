//! Quota preflight: whether one more cluster fits in its accounts' limits, before its first
//! stack is created.
//!
//! Pure: what one cluster needs ([`needs`], from its control planes and node pools) against the
//! headroom AWS reports for each account ([`Headroom`], read by [`crate::aws::quota`]) gives
//! the [`Shortfall`]s, each naming the quota, the account, the limit, what is used, what the
//! cluster needs and the fix. A cluster that would not fit waits (`Ready=False`
//! `QuotaExceeded`) and creates nothing.
//!
//! Checked are CloudFormation stacks (`DescribeAccountLimits` `StackLimit` against the account's
//! stacks), Auto Scaling groups (`DescribeAccountLimits` `MaxNumberOfAutoScalingGroups` against
//! `NumberOfAutoScalingGroups`), and the tenant network TCCP creates: VPCs per region (Service
//! Quotas `vpc` `L-F678F1CE` against `DescribeVpcs`), Elastic IPs (EC2
//! `DescribeAccountAttributes` `vpc-max-elastic-ips` against `DescribeAddresses`) and NAT
//! gateways per zone (Service Quotas `vpc` `L-FE5A380F` against `DescribeNatGateways`).

use std::collections::BTreeMap;
use std::fmt;

use std::collections::BTreeSet;

use apis::aws::{AWSControlPlane, AWSMachineDeployment};

/// The `Ready` reason of a cluster that would not fit in its accounts' limits.
pub const QUOTA_EXCEEDED: &str = "QuotaExceeded";

/// The Service Quotas code of "VPCs per Region" (service `vpc`).
pub const VPCS_PER_REGION: &str = "L-F678F1CE";
/// The Service Quotas code of "NAT gateways per Availability Zone" (service `vpc`).
pub const NAT_GATEWAYS_PER_ZONE: &str = "L-FE5A380F";

/// A limit of an AWS account in a region.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Quota {
    /// CloudFormation stacks (`StackLimit`; Service Quotas "Stack count").
    Stacks,
    /// Auto Scaling groups (`MaxNumberOfAutoScalingGroups`; Service Quotas "Auto Scaling groups
    /// per region").
    AutoScalingGroups,
    /// VPCs (Service Quotas [`VPCS_PER_REGION`]).
    Vpcs,
    /// Elastic IP addresses (EC2 account attribute `vpc-max-elastic-ips`; Service Quotas
    /// "EC2-VPC Elastic IPs").
    ElasticIps,
    /// NAT gateways in one availability zone (Service Quotas [`NAT_GATEWAYS_PER_ZONE`]).
    NatGateways(String),
}

impl Quota {
    /// The limit's name as AWS answers it.
    pub fn limit_name(&self) -> String {
        match self {
            Quota::Stacks => "CloudFormation StackLimit".into(),
            Quota::AutoScalingGroups => "Auto Scaling MaxNumberOfAutoScalingGroups".into(),
            Quota::Vpcs => format!("VPCs per Region (vpc {VPCS_PER_REGION})"),
            Quota::ElasticIps => "EC2 vpc-max-elastic-ips".into(),
            Quota::NatGateways(zone) => {
                format!("NAT gateways per Availability Zone (vpc {NAT_GATEWAYS_PER_ZONE}) in {zone}")
            }
        }
    }

    /// The Service Quotas service in which an increase is requested.
    fn service(&self) -> &'static str {
        match self {
            Quota::Stacks => "AWS CloudFormation, quota \"Stack count\"",
            Quota::AutoScalingGroups => "Amazon EC2 Auto Scaling, quota \"Auto Scaling groups per region\"",
            Quota::Vpcs => "Amazon Virtual Private Cloud (Amazon VPC), quota \"VPCs per Region\"",
            Quota::ElasticIps => "Amazon Elastic Compute Cloud (Amazon EC2), quota \"EC2-VPC Elastic IPs\"",
            Quota::NatGateways(_) => {
                "Amazon Virtual Private Cloud (Amazon VPC), quota \"NAT gateways per Availability Zone\""
            }
        }
    }

    /// Whether the quota is one of the tenant network's (TCCP's VPC, Elastic IPs and NAT
    /// gateways).
    pub fn is_network(&self) -> bool {
        matches!(self, Quota::Vpcs | Quota::ElasticIps | Quota::NatGateways(_))
    }

    /// What may be freed instead.
    fn what_to_free(&self) -> &'static str {
        match self {
            Quota::Stacks => "delete unused stacks",
            Quota::AutoScalingGroups => "delete unused Auto Scaling groups",
            Quota::Vpcs => "delete unused VPCs",
            Quota::ElasticIps => "release unused Elastic IP addresses",
            Quota::NatGateways(_) => "delete unused NAT gateways in that zone, or use another zone",
        }
    }
}

/// What an account allows and uses of one quota, as AWS reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Headroom {
    /// The quota.
    pub quota: Quota,
    /// The account id.
    pub account: String,
    /// The limit.
    pub limit: u64,
    /// What is in use.
    pub used: u64,
}

/// How much of one quota of one account a cluster needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Need {
    /// The quota.
    pub quota: Quota,
    /// The account id.
    pub account: String,
    /// The count the cluster adds.
    pub count: u64,
}

/// A quota a cluster would exceed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shortfall {
    /// The quota.
    pub quota: Quota,
    /// The account id.
    pub account: String,
    /// The limit.
    pub limit: u64,
    /// What is in use.
    pub used: u64,
    /// What the cluster needs.
    pub need: u64,
}

impl fmt::Display for Shortfall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let headroom = self.limit.saturating_sub(self.used);
        write!(
            f,
            "{} of account {} is {} with {} in use: headroom {headroom}, the cluster needs {}; request an increase in \
             Service Quotas ({}) or {}",
            self.quota.limit_name(),
            self.account,
            self.limit,
            self.used,
            self.need,
            self.quota.service(),
            self.quota.what_to_free(),
        )
    }
}

/// The availability zones of a cluster's network (TCCP): those `deployed` already, those its
/// control planes list and those its node pools not being deleted list, in `region`, sorted.
pub fn cluster_zones(
    region: &str,
    deployed: &[String],
    control_planes: &[AWSControlPlane],
    node_pools: &[AWSMachineDeployment],
) -> Vec<String> {
    let mut zones: BTreeSet<String> = deployed.iter().cloned().collect();
    for cp in control_planes {
        zones.extend(cp.spec.availability_zones.iter().cloned());
    }
    for md in node_pools.iter().filter(|md| md.metadata.deletion_timestamp.is_none()) {
        zones.extend(md.spec.provider.availability_zones.iter().cloned());
    }
    zones.into_iter().filter(|zone| zone.starts_with(region)).collect()
}

/// What one cluster adds to its accounts when created: in the tenant account the TCCP stack
/// with its VPC and, in each of its `zones` ([`cluster_zones`]), a NAT gateway with its Elastic
/// IP, one TCCPN stack and its masters' Auto Scaling groups per control plane, and one TCNP stack
/// with one group per node pool; in the management account the TCCPI and TCCPF stacks and one
/// TCNPF stack per node pool. Node pools being deleted are not counted. When both accounts are
/// the same, their needs add up.
pub fn needs(
    tenant: &str,
    management: &str,
    zones: &[String],
    control_planes: &[AWSControlPlane],
    node_pools: &[AWSMachineDeployment],
) -> Vec<Need> {
    let masters: u64 =
        control_planes.iter().map(|cp| u64::try_from(cp.spec.master_replicas().max(1)).unwrap_or(1)).sum();
    let pools = node_pools.iter().filter(|md| md.metadata.deletion_timestamp.is_none()).count() as u64;
    let planes = control_planes.len() as u64;
    let mut total: BTreeMap<(Quota, &str), u64> = BTreeMap::new();
    *total.entry((Quota::Stacks, tenant)).or_default() += 1 + planes + pools;
    *total.entry((Quota::Stacks, management)).or_default() += 2 + pools;
    *total.entry((Quota::AutoScalingGroups, tenant)).or_default() += masters + pools;
    if !zones.is_empty() {
        *total.entry((Quota::Vpcs, tenant)).or_default() += 1;
        *total.entry((Quota::ElasticIps, tenant)).or_default() += zones.len() as u64;
        for zone in zones {
            *total.entry((Quota::NatGateways(zone.clone()), tenant)).or_default() += 1;
        }
    }
    total
        .into_iter()
        .map(|((quota, account), count)| Need { quota, account: account.to_string(), count })
        .filter(|n| n.count > 0)
        .collect()
}

/// Whether `needs` fit in `headroom`; else every quota they exceed. A need whose quota AWS did
/// not report is not checked.
pub fn check(needs: &[Need], headroom: &[Headroom]) -> Result<(), Vec<Shortfall>> {
    let shortfalls: Vec<Shortfall> = needs
        .iter()
        .filter_map(|need| {
            let room = headroom.iter().find(|h| h.quota == need.quota && h.account == need.account)?;
            (room.used.saturating_add(need.count) > room.limit).then(|| Shortfall {
                quota: need.quota.clone(),
                account: need.account.clone(),
                limit: room.limit,
                used: room.used,
                need: need.count,
            })
        })
        .collect();
    if shortfalls.is_empty() { Ok(()) } else { Err(shortfalls) }
}

/// The `Ready` message of a cluster that does not fit.
pub fn message(shortfalls: &[Shortfall]) -> String {
    let each: Vec<String> = shortfalls.iter().map(ToString::to_string).collect();
    format!(
        "the cluster does not fit in its accounts' limits and nothing is created; it is checked again until it fits: {}",
        each.join("; ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn control_plane(zones: &[&str], replicas: Option<i32>) -> AWSControlPlane {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "infrastructure.giantswarm.io/v1alpha3", "kind": "AWSControlPlane",
            "metadata": {"name": "cpq01", "namespace": "org-quota"},
            "spec": {"availabilityZones": zones, "instanceType": "m5.xlarge", "replicas": replicas}
        }))
        .unwrap_or_else(|e| panic!("{e}"))
    }

    fn node_pool(name: &str, deleting: bool) -> AWSMachineDeployment {
        let mut md: AWSMachineDeployment = serde_json::from_value(serde_json::json!({
            "apiVersion": "infrastructure.giantswarm.io/v1alpha3", "kind": "AWSMachineDeployment",
            "metadata": {"name": name, "namespace": "org-quota"},
            "spec": {
                "nodePool": {"description": "q", "machine": {"dockerVolumeSizeGB": 100, "kubeletVolumeSizeGB": 100},
                             "scaling": {"min": 1, "max": 3}},
                "provider": {"availabilityZones": ["eu-west-1a"], "worker": {"instanceType": "m5.xlarge"}}
            }
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        if deleting {
            md.metadata.deletion_timestamp =
                Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::UNIX_EPOCH));
        }
        md
    }

    fn need(quota: Quota, account: &str, count: u64) -> Need {
        Need { quota, account: account.into(), count }
    }

    fn room(quota: Quota, account: &str, limit: u64, used: u64) -> Headroom {
        Headroom { quota, account: account.into(), limit, used }
    }

    #[test]
    fn a_cluster_needs_its_stacks_in_each_account_and_a_group_per_master_and_pool() {
        let cps = [control_plane(&["eu-west-1a", "eu-west-1b", "eu-west-1c"], None)];
        let pools = [node_pool("np001", false), node_pool("np002", false), node_pool("np003", true)];
        assert_eq!(
            needs("111122223333", "444455556666", &[], &cps, &pools),
            vec![
                need(Quota::Stacks, "111122223333", 4),
                need(Quota::Stacks, "444455556666", 4),
                need(Quota::AutoScalingGroups, "111122223333", 5),
            ]
        );
        // One account for both: the stacks add up.
        let one = [control_plane(&["eu-west-1a"], None)];
        assert_eq!(
            needs("777788889999", "777788889999", &[], &one, &[]),
            vec![need(Quota::Stacks, "777788889999", 4), need(Quota::AutoScalingGroups, "777788889999", 1)]
        );
        // Before its control plane exists a cluster still needs its own three stacks.
        assert_eq!(
            needs("111122223333", "444455556666", &[], &[], &[]),
            vec![need(Quota::Stacks, "111122223333", 1), need(Quota::Stacks, "444455556666", 2)]
        );
    }

    #[test]
    fn a_cluster_needs_one_vpc_and_a_nat_gateway_with_its_elastic_ip_in_each_of_its_zones() {
        let cps = [control_plane(&["eu-west-1a"], None)];
        // The pool's zone eu-west-1a is the control plane's; eu-west-1c is only the deleted pool's,
        // and us-east-1a is of another region.
        let mut pools = vec![node_pool("np001", false), node_pool("np002", true)];
        pools[1].spec.provider.availability_zones = vec!["eu-west-1c".into(), "us-east-1a".into()];
        let mut other = node_pool("np003", false);
        other.spec.provider.availability_zones = vec!["eu-west-1b".into(), "us-east-1a".into()];
        pools.push(other);
        let zones = cluster_zones("eu-west-1", &[], &cps, &pools);
        assert_eq!(zones, ["eu-west-1a", "eu-west-1b"]);
        // A zone the network has already stays one.
        assert_eq!(cluster_zones("eu-west-1", &["eu-west-1c".into()], &cps, &[]), ["eu-west-1a", "eu-west-1c"]);
        let all = needs("111122223333", "444455556666", &zones, &cps, &pools);
        let network: Vec<&Need> = all.iter().filter(|n| n.quota.is_network()).collect();
        assert_eq!(
            network,
            [
                &need(Quota::Vpcs, "111122223333", 1),
                &need(Quota::ElasticIps, "111122223333", 2),
                &need(Quota::NatGateways("eu-west-1a".into()), "111122223333", 1),
                &need(Quota::NatGateways("eu-west-1b".into()), "111122223333", 1),
            ]
        );
        // The network is the tenant account's alone.
        assert!(all.iter().filter(|n| n.account == "444455556666").all(|n| n.quota == Quota::Stacks));
        // Per zone: a full zone is named, one with room is not.
        let headroom = [
            room(Quota::Vpcs, "111122223333", 5, 4),
            room(Quota::ElasticIps, "111122223333", 5, 4),
            room(Quota::NatGateways("eu-west-1a".into()), "111122223333", 5, 4),
            room(Quota::NatGateways("eu-west-1b".into()), "111122223333", 5, 5),
        ];
        let shortfalls = check(&all, &headroom).err().unwrap_or_default();
        let text = message(&shortfalls);
        assert_eq!(shortfalls.len(), 2, "{text}");
        assert!(
            text.contains(
                "EC2 vpc-max-elastic-ips of account 111122223333 is 5 with 4 in use: headroom 1, the cluster needs 2"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "NAT gateways per Availability Zone (vpc L-FE5A380F) in eu-west-1b of account 111122223333 is 5 with 5 \
                 in use: headroom 0, the cluster needs 1"
            ),
            "{text}"
        );
        assert!(text.contains("release unused Elastic IP addresses"), "{text}");
        assert!(!text.contains("eu-west-1a"), "{text}");
    }

    #[test]
    fn a_cluster_fits_up_to_the_limit_and_not_one_over() {
        let needs = [need(Quota::Stacks, "111122223333", 3), need(Quota::AutoScalingGroups, "111122223333", 2)];
        let exact = [room(Quota::Stacks, "111122223333", 10, 7), room(Quota::AutoScalingGroups, "111122223333", 2, 0)];
        assert_eq!(check(&needs, &exact), Ok(()));

        let over = [room(Quota::Stacks, "111122223333", 10, 8), room(Quota::AutoScalingGroups, "111122223333", 2, 1)];
        let shortfalls = check(&needs, &over).err().unwrap_or_default();
        assert_eq!(
            shortfalls,
            vec![
                Shortfall { quota: Quota::Stacks, account: "111122223333".into(), limit: 10, used: 8, need: 3 },
                Shortfall {
                    quota: Quota::AutoScalingGroups,
                    account: "111122223333".into(),
                    limit: 2,
                    used: 1,
                    need: 2
                },
            ]
        );
        let text = message(&shortfalls);
        assert!(
            text.contains(
                "CloudFormation StackLimit of account 111122223333 is 10 with 8 in use: headroom 2, the cluster needs 3"
            ),
            "{text}"
        );
        assert!(text.contains("request an increase in Service Quotas"), "{text}");
        assert!(text.contains("delete unused Auto Scaling groups"), "{text}");
    }

    #[test]
    fn each_account_is_held_to_its_own_limits() {
        let needs = [need(Quota::Stacks, "111122223333", 1), need(Quota::Stacks, "444455556666", 2)];
        let headroom = [room(Quota::Stacks, "111122223333", 1, 1), room(Quota::Stacks, "444455556666", 2000, 0)];
        let shortfalls = check(&needs, &headroom).err().unwrap_or_default();
        assert_eq!(shortfalls.len(), 1);
        assert_eq!(shortfalls[0].account, "111122223333");
        // Used beyond the limit (lowered after the fact) reports no negative headroom.
        let full = [room(Quota::Stacks, "111122223333", 1, 5)];
        let text = message(&check(&needs[..1], &full).err().unwrap_or_default());
        assert!(text.contains("headroom 0"), "{text}");
        // A quota AWS did not report is not held against the cluster.
        assert_eq!(check(&needs, &[]), Ok(()));
    }
}

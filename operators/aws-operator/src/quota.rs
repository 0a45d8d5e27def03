//! Quota preflight: whether one more cluster fits in its accounts' limits, before its first
//! stack is created.
//!
//! Pure: what one cluster needs ([`needs`], from its control planes and node pools) against the
//! headroom AWS reports for each account ([`Headroom`], read by [`crate::aws::quota`]) gives
//! the [`Shortfall`]s, each naming the quota, the account, the limit, what is used, what the
//! cluster needs and the fix. A cluster that would not fit waits (`Ready=False`
//! `QuotaExceeded`) and creates nothing.
//!
//! Checked are the limits AWS answers through the API clients the operator already has:
//! CloudFormation stacks (`DescribeAccountLimits` `StackLimit` against the account's stacks) and
//! Auto Scaling groups (`DescribeAccountLimits` `MaxNumberOfAutoScalingGroups` against
//! `NumberOfAutoScalingGroups`).

use std::collections::BTreeMap;
use std::fmt;

use apis::aws::{AWSControlPlane, AWSMachineDeployment};

/// The `Ready` reason of a cluster that would not fit in its accounts' limits.
pub const QUOTA_EXCEEDED: &str = "QuotaExceeded";

/// A limit of an AWS account in a region.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Quota {
    /// CloudFormation stacks (`StackLimit`; Service Quotas "Stack count").
    Stacks,
    /// Auto Scaling groups (`MaxNumberOfAutoScalingGroups`; Service Quotas "Auto Scaling groups
    /// per region").
    AutoScalingGroups,
}

impl Quota {
    /// The limit's name as AWS's `DescribeAccountLimits` answers it.
    pub fn limit_name(self) -> &'static str {
        match self {
            Quota::Stacks => "CloudFormation StackLimit",
            Quota::AutoScalingGroups => "Auto Scaling MaxNumberOfAutoScalingGroups",
        }
    }

    /// The Service Quotas service in which an increase is requested.
    fn service(self) -> &'static str {
        match self {
            Quota::Stacks => "AWS CloudFormation, quota \"Stack count\"",
            Quota::AutoScalingGroups => "Amazon EC2 Auto Scaling, quota \"Auto Scaling groups per region\"",
        }
    }

    /// What may be freed instead.
    fn what_to_free(self) -> &'static str {
        match self {
            Quota::Stacks => "delete unused stacks",
            Quota::AutoScalingGroups => "delete unused Auto Scaling groups",
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

/// What one cluster adds to its accounts when created: in the tenant account the TCCP stack,
/// one TCCPN stack and its masters' Auto Scaling groups per control plane, and one TCNP stack
/// with one group per node pool; in the management account the TCCPI and TCCPF stacks and one
/// TCNPF stack per node pool. Node pools being deleted are not counted. When both accounts are
/// the same, their needs add up.
pub fn needs(
    tenant: &str,
    management: &str,
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
                quota: need.quota,
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
            needs("111122223333", "444455556666", &cps, &pools),
            vec![
                need(Quota::Stacks, "111122223333", 4),
                need(Quota::Stacks, "444455556666", 4),
                need(Quota::AutoScalingGroups, "111122223333", 5),
            ]
        );
        // One account for both: the stacks add up.
        let one = [control_plane(&["eu-west-1a"], None)];
        assert_eq!(
            needs("777788889999", "777788889999", &one, &[]),
            vec![need(Quota::Stacks, "777788889999", 4), need(Quota::AutoScalingGroups, "777788889999", 1)]
        );
        // Before its control plane exists a cluster still needs its own three stacks.
        assert_eq!(
            needs("111122223333", "444455556666", &[], &[]),
            vec![need(Quota::Stacks, "111122223333", 1), need(Quota::Stacks, "444455556666", 2)]
        );
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

//! Step 4, `quota`: before the cluster's first stack, whether it fits in its accounts' limits
//! ([`crate::quota`]). A cluster that does not fit waits with `Ready=False` `QuotaExceeded` and a
//! Warning event naming each quota, its headroom, the need and the fix, creates nothing, and is
//! checked again on every later reconcile. Once the cluster has a stack the check is skipped:
//! what is under way is never stopped halfway by a limit reached since. The one exception is the
//! tenant network (VPC, Elastic IPs, NAT gateways per zone), which needs the cluster's zones:
//! a cluster whose control plane and node pools came after its first stacks has it checked
//! before its network stack (TCCP), and only it.

use kube::ResourceExt;
use operatorkit::{Outcome, Resource, resource};

use apis::aws::AWSCluster;
use aws_stacks::names::{self, StackKind};

use super::ClusterState;
use crate::controllers;
use crate::quota::{self, QUOTA_EXCEEDED};

/// The quota preflight.
#[derive(Debug)]
pub struct QuotaPreflight;

impl Resource<AWSCluster, ClusterState> for QuotaPreflight {
    fn name(&self) -> &str {
        "quota"
    }

    async fn ensure_created(&self, state: &mut ClusterState, obj: &AWSCluster) -> resource::Result<Outcome> {
        let shared = state.shared.clone();
        let (ns, id) = (obj.namespace().unwrap_or_default(), obj.name_any());
        let tccp = names::stack_name(&id, StackKind::Tccp, None);
        if state.status.stacks.iter().any(|s| s.name == tccp) {
            return Ok(Outcome::proceed());
        }
        // The first stack, TCCPI, may exist with the status not saying so (a crash between
        // creating it and writing the status); so may TCCP.
        let (tenant, cp) = state.accounts()?;
        let first = names::stack_name(&id, StackKind::Tccpi, None);
        let under_way = !state.status.stacks.is_empty()
            || shared.stacks.get(&cp.cache_key(), cp.cfn.as_ref(), &first).await?.is_some();
        if under_way && shared.stacks.get(&tenant.cache_key(), tenant.cfn.as_ref(), &tccp).await?.is_some() {
            return Ok(Outcome::proceed());
        }
        let control_planes = controllers::lookup::control_planes(&shared, &ns, &id).await?;
        let node_pools = controllers::lookup::node_pools(&shared, &ns, &id).await?;
        let (tenant, cp) = state.accounts()?;
        let zones = quota::cluster_zones(&obj.spec.provider.region, &[], &control_planes, &node_pools);
        let mut needs = quota::needs(&tenant.account_id, &cp.account_id, &zones, &control_planes, &node_pools);
        if under_way {
            needs.retain(|n| n.quota.is_network());
        }
        let wanted = |account: &str| {
            let mut quotas: Vec<_> = needs.iter().filter(|n| n.account == account).map(|n| n.quota.clone()).collect();
            quotas.dedup();
            quotas
        };
        let mut headroom = crate::aws::quota::headroom(tenant, &shared.stacks, &wanted(&tenant.account_id)).await?;
        if cp.account_id != tenant.account_id {
            headroom.extend(crate::aws::quota::headroom(cp, &shared.stacks, &wanted(&cp.account_id)).await?);
        }
        match quota::check(&needs, &headroom) {
            Ok(()) => Ok(Outcome::proceed()),
            Err(shortfalls) => {
                let message = quota::message(&shortfalls);
                shared.warning(obj, QUOTA_EXCEEDED, message.clone()).await;
                state.failure = Some((QUOTA_EXCEEDED, message.clone()));
                state.wait(obj, message).await
            }
        }
    }

    async fn ensure_deleted(&self, _: &mut ClusterState, _: &AWSCluster) -> resource::Result<Outcome> {
        Ok(Outcome::proceed())
    }
}

//! Step 4, `quota`: before the cluster's first stack, whether it fits in its accounts' limits
//! ([`crate::quota`]). A cluster that does not fit waits with `Ready=False` `QuotaExceeded` and a
//! Warning event naming each quota, its headroom, the need and the fix, creates nothing, and is
//! checked again on every later reconcile. Once the cluster has a stack the check is skipped:
//! what is under way is never stopped halfway by a limit reached since.

use kube::ResourceExt;
use operatorkit::{Outcome, Resource, resource};

use apis::aws::AWSCluster;
use aws_stacks::names::{self, StackKind};

use super::ClusterState;
use crate::controllers;
use crate::quota::{self, QUOTA_EXCEEDED, Quota};

/// The quota preflight.
#[derive(Debug)]
pub struct QuotaPreflight;

impl Resource<AWSCluster, ClusterState> for QuotaPreflight {
    fn name(&self) -> &str {
        "quota"
    }

    async fn ensure_created(&self, state: &mut ClusterState, obj: &AWSCluster) -> resource::Result<Outcome> {
        if !state.status.stacks.is_empty() {
            return Ok(Outcome::proceed());
        }
        let shared = state.shared.clone();
        let (ns, id) = (obj.namespace().unwrap_or_default(), obj.name_any());
        // The first stack, TCCPI, may exist with the status not saying so (a crash between
        // creating it and writing the status).
        let (_, cp) = state.accounts()?;
        let first = names::stack_name(&id, StackKind::Tccpi, None);
        if shared.stacks.get(&cp.cache_key(), cp.cfn.as_ref(), &first).await?.is_some() {
            return Ok(Outcome::proceed());
        }
        let control_planes = controllers::lookup::control_planes(&shared, &ns, &id).await?;
        let node_pools = controllers::lookup::node_pools(&shared, &ns, &id).await?;
        let (tenant, cp) = state.accounts()?;
        let needs = quota::needs(&tenant.account_id, &cp.account_id, &control_planes, &node_pools);
        let mut headroom =
            crate::aws::quota::headroom(tenant, &shared.stacks, &[Quota::Stacks, Quota::AutoScalingGroups]).await?;
        if cp.account_id != tenant.account_id {
            headroom.extend(crate::aws::quota::headroom(cp, &shared.stacks, &[Quota::Stacks]).await?);
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

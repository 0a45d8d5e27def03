//! Max-age replacement of a node pool's instances (`spec.nodePool.maxNodeAge`): the oldest
//! instance past the age is terminated in its group, which launches a replacement (its desired
//! capacity kept) while the terminating lifecycle hook and the drainers drain the old node
//! first. One instance at a time per pool, only while the pool's stack is current (never during
//! a roll), inside the cluster's maintenance window and within the rollout limits.
//!
//! The choice is `node_lifecycle::maintenance::max_age_step`; an instance this process sent
//! away is remembered ([`crate::context::Memo::max_age_replaced`]) and never counted as due
//! again while a listing still shows it.

use std::sync::Arc;
use std::time::Duration;

use apis::aws::{AWSCluster, AWSMachineDeployment};
use jiff::Timestamp;
use node_lifecycle::maintenance::{AgedNode, MaintenanceError, MaxAgeStep, Schedule};
use operatorkit::ResourceError;

use crate::aws::AccountClients;
use crate::aws::autoscaling::{self, Termination};
use crate::context::Shared;

/// What the max-age step leaves for the pool's reconcile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MaxAge {
    /// No replacement in flight: the pool's rollout slots may be given back; look again after
    /// this long (when the oldest instance comes due, or the window opens).
    Idle(Duration),
    /// A replacement is in flight (or waits for a slot): keep the slots, look again after this
    /// long.
    InFlight(Duration),
}

/// Run one max-age step for pool `obj` of `cluster`, whose Auto Scaling group is `group`.
pub async fn step(
    shared: &Arc<Shared>,
    tenant: &AccountClients,
    cluster: &AWSCluster,
    obj: &AWSMachineDeployment,
    group: &str,
    max_age: Duration,
    schedule: &Result<Option<Schedule>, Vec<MaintenanceError>>,
) -> Result<MaxAge, ResourceError> {
    let poll = shared.config.poll;
    // Without a reason to look earlier, look again at 30 poll intervals (5 minutes by default).
    let idle = poll * 30;
    let now = shared.clock.now();
    let listed = autoscaling::group_instances(tenant, group).await?;
    let key = format!("{}/{group}", tenant.cache_key());
    let replaced = {
        let mut memo = shared.memo.lock();
        let sent = memo.max_age_replaced.entry(key.clone()).or_default();
        sent.retain(|id| listed.iter().any(|(i, _, _)| i == id));
        sent.clone()
    };
    let nodes: Vec<AgedNode> = listed
        .iter()
        .filter_map(|(id, state, launched)| {
            Some(AgedNode {
                id: id.clone(),
                launched: Timestamp::from_second(*launched).ok()?,
                in_service: state == "InService",
            })
        })
        .collect();
    let (id, age) = match node_lifecycle::maintenance::max_age_step(&nodes, &replaced, max_age, now) {
        MaxAgeStep::Idle { due } => {
            let until = due.map_or(idle, |d| node_lifecycle::maintenance::wait_until(now, d));
            return Ok(MaxAge::Idle(until.min(idle)));
        }
        MaxAgeStep::Busy(_) => return Ok(MaxAge::InFlight(poll)),
        MaxAgeStep::Replace { id, age } => (id, age),
    };
    let what = format!("max-age replacement in node pool {}", obj.metadata.name.as_deref().unwrap_or_default());
    match crate::maintenance::gate(cluster, schedule, &what, now, idle) {
        crate::maintenance::Gate::Go => {}
        crate::maintenance::Gate::Wait { retry_after, .. } => return Ok(MaxAge::Idle(retry_after)),
        crate::maintenance::Gate::Invalid(_) => return Ok(MaxAge::Idle(idle)),
    }
    if let Some(why) = crate::rollout::acquire(shared, cluster, obj).await? {
        tracing::debug!(%group, %why, "max-age replacement waits for a rollout slot");
        return Ok(MaxAge::InFlight(poll));
    }
    match autoscaling::terminate_in_group(tenant, &id).await? {
        Termination::Gone => return Ok(MaxAge::InFlight(poll)),
        Termination::Started { .. } => {}
    }
    shared.memo.lock().max_age_replaced.entry(key).or_default().insert(id.clone());
    shared.max_age_replacements.inc();
    tracing::info!(%group, instance = %id, "terminating an instance past its node pool's max age");
    let note = format!(
        "terminated instance {id} in group {group}, keeping its desired capacity: launched {} ago, past spec.nodePool.maxNodeAge {}",
        node_lifecycle::maintenance::format_duration(age),
        node_lifecycle::maintenance::format_duration(max_age)
    );
    shared.event(obj, "MaxAgeReplacement", note).await;
    Ok(MaxAge::InFlight(poll))
}

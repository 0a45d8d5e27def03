//! When the pool's TCNP update runs: what kind of change it is (by the templates' own diff),
//! masters first, the maintenance window, the rollout slots; and the cluster autoscaler's tag,
//! off while the pool rolls. The decisions are the pure [`crate::upgrade`] and
//! [`crate::maintenance`]; this module reads what they decide from and carries their answers out.

use std::time::Duration;

use apis::aws::{AWSCluster, AWSMachineDeployment};
use aws_stacks::names::{self, StackKind};
use aws_stacks::state::StackView;
use kube::ResourceExt;
use node_lifecycle::maintenance::{MaintenanceError, Schedule};
use operatorkit::ResourceError;

use crate::aws::AccountClients;
use crate::context::Shared;
use crate::controllers;
use crate::upgrade;

/// How the pool's update goes this reconcile.
#[derive(Debug)]
pub(super) struct Roll {
    /// The decision.
    pub decision: upgrade::Decision,
    /// The `Ready` reason while it holds.
    pub hold_reason: &'static str,
    /// When to look again while it holds.
    pub hold_retry: Duration,
}

/// Whether the pool's `change` may roll now: masters first (§5.7.1), then — for a stack not in
/// the middle of an operation (`observed`), unless the update waits for approval anyway
/// (`approval_holds`) — the maintenance window and a rollout slot.
#[allow(clippy::too_many_arguments)]
pub(super) async fn decide(
    shared: &std::sync::Arc<Shared>,
    tenant: &AccountClients,
    cluster: &AWSCluster,
    obj: &AWSMachineDeployment,
    observed: Option<&StackView>,
    change: upgrade::Change,
    schedule: &Result<Option<Schedule>, Vec<MaintenanceError>>,
    approval_holds: bool,
) -> Result<Roll, ResourceError> {
    let poll = shared.config.poll;
    // Masters first (§5.7.1): an update that replaces instances waits for the masters.
    let decision = match (observed, change) {
        (Some(view), upgrade::Change::Update) => {
            let masters = masters_of(shared, tenant, cluster, view).await?;
            upgrade::decide(change, &shared.config.version, &masters)
        }
        _ => upgrade::decide(change, &shared.config.version, &upgrade::Masters::none()),
    };
    let (mut hold_reason, mut hold_retry) = (upgrade::WAITING_FOR_MASTERS, poll);
    // A stack being updated goes on: a roll started in a window is not stopped when it
    // closes (CloudFormation cannot pause it).
    let settled = observed.is_some_and(|v| v.status.is_usable());
    let decision = match (decision, settled) {
        (upgrade::Decision::Roll, true) => {
            let what = format!("the rolling update of node pool {}", obj.name_any());
            match crate::maintenance::gate(cluster, schedule, &what, shared.clock.now(), poll) {
                crate::maintenance::Gate::Go => upgrade::Decision::Roll,
                crate::maintenance::Gate::Wait { message, retry_after } => {
                    (hold_reason, hold_retry) = (crate::maintenance::WAITING_FOR_WINDOW, retry_after);
                    let before = obj.status.as_ref().map_or(&[][..], |s| s.conditions.as_slice());
                    controllers::announce_maintenance_wait(shared, obj, before, &message).await;
                    upgrade::Decision::Hold(message)
                }
                crate::maintenance::Gate::Invalid(message) => {
                    hold_reason = crate::maintenance::INVALID_MAINTENANCE;
                    upgrade::Decision::Hold(message)
                }
            }
        }
        (decision, _) => decision,
    };
    // Rollout limits (`crate::rollout`), for a roll that may start now; an update waiting for
    // approval takes no slot (a slot is not held for a person).
    let decision = match (decision, settled) {
        (upgrade::Decision::Roll, true) if !approval_holds => {
            match crate::rollout::acquire(shared, cluster, obj).await? {
                None => upgrade::Decision::Roll,
                Some(why) => {
                    hold_reason = crate::rollout::WAITING_FOR_SLOT;
                    upgrade::Decision::Hold(why)
                }
            }
        }
        (decision, _) => decision,
    };
    Ok(Roll { decision, hold_reason, hold_retry })
}

/// What the pool's update waits for on the masters' side: TCCPN, and — while the pool runs
/// another operator version (`view`'s `OperatorVersion`) — the workload cluster's master nodes.
async fn masters_of(
    shared: &Shared,
    tenant: &AccountClients,
    cluster: &AWSCluster,
    view: &StackView,
) -> Result<upgrade::Masters, ResourceError> {
    let id = cluster.name_any();
    let tccpn = shared
        .stacks
        .get(&tenant.cache_key(), tenant.cfn.as_ref(), &names::stack_name(&id, StackKind::Tccpn, None))
        .await?;
    let ns = cluster.namespace().unwrap_or_default();
    // The master count as the control plane controller decides it (`crate::capi`).
    let replicas = match controllers::lookup::control_planes(shared, &ns, &id).await?.first() {
        Some(cp) => {
            let g8s = crate::capi::g8s_control_plane_of(&shared.client, &shared.capi, cp, &id).await?;
            crate::capi::master_replicas(cp, g8s.as_ref()).0 as usize
        }
        None => 1,
    };
    let nodes =
        if upgrade::nodes_needed(&shared.config.version, view.outputs.get("OperatorVersion").map(String::as_str)) {
            Some(controllers::lookup::workload_nodes(shared, cluster).await.map(|nodes| upgrade::master_nodes(&nodes)))
        } else {
            None
        };
    Ok(upgrade::Masters {
        stack_usable: tccpn.as_ref().is_some_and(|v| v.status.is_usable()),
        stack_version: tccpn.and_then(|v| v.outputs.get("OperatorVersion").cloned()),
        replicas,
        nodes,
    })
}

/// Whether updating the pool's stack `stack` from its deployed template (hash `deployed`) to
/// `desired` (hash `desired_hash`) replaces instances, by the templates' own diff
/// ([`crate::approval::template_diff`]: the group's rolling update, through its launch
/// template's version or its own properties). A deployed template that cannot be read counts
/// as rolling: the update then waits as any other would.
pub(super) async fn update_rolls(
    shared: &Shared,
    tenant: &AccountClients,
    stack: &str,
    deployed: &str,
    desired_hash: &str,
    desired: &aws_stacks::cfn::Template,
) -> bool {
    let key = format!("{}/{stack}", tenant.cache_key());
    if let Some((d, h, rolls)) = shared.memo.lock().update_rolls.get(&key)
        && d == deployed
        && h == desired_hash
    {
        return *rolls;
    }
    let deployed_template = match crate::stack_ops::deployed_template(shared, tenant, StackKind::Tcnp, stack).await {
        Ok(Some(template)) => template,
        Ok(None) => return true,
        Err(e) => {
            tracing::warn!(stack, error = %e, "the deployed template could not be read; the update counts as rolling");
            return true;
        }
    };
    let rolls =
        crate::approval::template_diff(&deployed_template, &desired.to_value()).iter().any(|c| c.replaces_instances);
    shared.memo.lock().update_rolls.insert(key, (deployed.to_string(), desired_hash.to_string(), rolls));
    rolls
}

/// Put the cluster autoscaler's tag on `group` or take it off, once per change this process
/// makes, with an event.
pub(super) async fn autoscaler(
    shared: &Shared,
    tenant: &AccountClients,
    obj: &AWSMachineDeployment,
    group: &str,
    enabled: bool,
) -> Result<(), ResourceError> {
    let key = format!("{}/{group}", tenant.cache_key());
    if shared.memo.lock().autoscaler.get(&key) == Some(&enabled) {
        return Ok(());
    }
    crate::aws::ec2::set_autoscaler_enabled(tenant, group, enabled).await?;
    let before = shared.memo.lock().autoscaler.insert(key, enabled);
    let tag = upgrade::AUTOSCALER_ENABLED_TAG;
    match (enabled, before) {
        (false, _) => {
            shared
                .event(obj, "AutoscalingPaused", format!("tag {tag} removed from group {group} for the rolling update"))
                .await;
        }
        // Back after a roll this process paused it; a first write after a start is silent.
        (true, Some(false)) => {
            shared.event(obj, "AutoscalingResumed", format!("tag {tag} put back on group {group}")).await;
        }
        (true, _) => {}
    }
    Ok(())
}

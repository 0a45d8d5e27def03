//! Step 7, `status`: the cluster's conditions, stack entries, lifecycle, endpoint and VPC.

use std::collections::BTreeMap;

use apis::aws::{AWSCluster, ControlPlaneEndpoint, StackStatus as StatusEntry};
use apis::cluster_status::ClusterCondition;
use aws_stacks::names;
use kube::ResourceExt;
use operatorkit::{Outcome, Resource, ResourceError, resource};

use super::ClusterState;
use crate::controllers;
use crate::controllers::status::READY;

/// The `Ready` reason while the cluster's own stacks are ready and its control plane or node
/// pools are not.
const WAITING_FOR_NODES: &str = "WaitingForNodes";

/// Writes the status: conditions, stacks, endpoint.
#[derive(Debug)]
pub struct Status;

impl Resource<AWSCluster, ClusterState> for Status {
    fn name(&self) -> &str {
        "status"
    }

    async fn ensure_created(&self, state: &mut ClusterState, obj: &AWSCluster) -> resource::Result<Outcome> {
        write_cluster_status(state, obj).await?;
        // The Cluster API `Cluster` says where the API server is, as the original wrote it,
        // once the cluster's stacks (and with them its DNS records) are there.
        if let (Some(capi), Some(endpoint)) = (&state.capi, &state.status.control_plane_endpoint)
            && crate::capi::write_control_plane_endpoint(
                &state.shared.client,
                &state.shared.capi,
                capi,
                &endpoint.host,
                endpoint.port,
            )
            .await?
        {
            let note = format!(
                "spec.controlPlaneEndpoint of {} set to {}:{}",
                controllers::status::describe(capi),
                endpoint.host,
                endpoint.port
            );
            state.shared.event(obj, "ControlPlaneEndpointWritten", note).await;
        }
        // Waiting only for the control plane and node pools needs no polling: every change of
        // theirs requeues the cluster (the controller watches them). Anything else of its own
        // that is not ready yet is looked at again after the poll interval.
        // A lifecycle `Updating` set after the fact is closed by the next reconcile.
        let ready = &state.status.conditions.iter().find(|c| c.type_ == READY);
        let updating = state.status.cluster.has_condition(ClusterCondition::Updating);
        match ready {
            Some(c) if (c.status == "True" && !updating) || c.reason == WAITING_FOR_NODES => Ok(Outcome::proceed()),
            _ => Ok(Outcome::proceed().requeue_after(state.shared.config.poll)),
        }
    }

    async fn ensure_deleted(&self, _: &mut ClusterState, _: &AWSCluster) -> resource::Result<Outcome> {
        Ok(Outcome::proceed())
    }
}

/// Whether a recorded stack status is an update under way (requested, in progress, or rolled
/// back and waiting to be tried again).
fn update_under_way(entry: &StatusEntry) -> bool {
    entry.status == crate::stack_ops::UPDATE_REQUESTED
        || (entry.status.starts_with("UPDATE_") && entry.status.ends_with("_IN_PROGRESS"))
        || (entry.status == "UPDATE_ROLLBACK_COMPLETE" && entry.attempts.is_some())
}

/// Advance the Giant Swarm lifecycle of a cluster that is `ready` (or not) from the stack
/// entries of the cluster, its control plane and its node pools, and return the condition set,
/// if any.
///
/// `Creating` until the first time the cluster is ready, then `Created`. After that, any stack
/// update, whether caused by a new operator version or by a change of the spec (a node pool
/// scaled, a zone added), sets `Updating`, and the cluster being ready again with no update
/// under way sets `Updated` and records the operator version. An update that began and ended
/// between two looks at the cluster (its stack `UPDATE_COMPLETE` after the last lifecycle
/// change) still sets `Updating`, closed on the next reconcile.
pub fn advance_lifecycle<'a>(
    lifecycle: &mut apis::cluster_status::StatusCluster,
    ready: bool,
    stacks: impl IntoIterator<Item = &'a StatusEntry>,
    version: &str,
    now: jiff::Timestamp,
) -> Option<ClusterCondition> {
    if lifecycle.conditions.is_empty() {
        lifecycle.set_condition(ClusterCondition::Creating, now);
        return Some(ClusterCondition::Creating);
    }
    if !lifecycle.has_condition(ClusterCondition::Created) {
        if ready {
            lifecycle.set_condition(ClusterCondition::Created, now);
            lifecycle.add_version(version, now);
            return Some(ClusterCondition::Created);
        }
        return None;
    }
    let last_change = [ClusterCondition::Created, ClusterCondition::Updating, ClusterCondition::Updated]
        .into_iter()
        .filter_map(|c| lifecycle.condition(c).map(|c| c.last_transition_time.0))
        .max();
    let (mut under_way, mut completed_since) = (false, false);
    for entry in stacks {
        under_way |= update_under_way(entry);
        completed_since |= entry.status == "UPDATE_COMPLETE"
            && entry.last_transition_time.as_ref().is_some_and(|t| last_change.is_none_or(|l| t.0 > l));
    }
    if lifecycle.has_condition(ClusterCondition::Updating) {
        if ready && !under_way {
            lifecycle.set_condition(ClusterCondition::Updated, now);
            lifecycle.add_version(version, now);
            return Some(ClusterCondition::Updated);
        }
        return None;
    }
    if under_way || completed_since {
        lifecycle.set_condition(ClusterCondition::Updating, now);
        return Some(ClusterCondition::Updating);
    }
    None
}

/// Compute and write the cluster status. Also called when a resource stopped the reconcile to
/// wait, so progress is visible.
pub async fn write_cluster_status(state: &mut ClusterState, obj: &AWSCluster) -> Result<(), ResourceError> {
    let shared = state.shared.clone();
    let id = obj.name_any();
    let now = jiff::Timestamp::now();
    let mut status = state.status.clone();
    status.control_plane_endpoint =
        Some(ControlPlaneEndpoint { host: names::api_host(&id, &obj.spec.cluster.dns.domain), port: 443 });
    // Keeps the entries of stacks this reconcile did not reach.
    controllers::stack_entries::merge_stacks(&mut status.stacks, &state.stacks);
    // The whole cluster is created when its own stacks and those of its control plane and node
    // pools are usable.
    let ns = obj.namespace().unwrap_or_default();
    let cps = controllers::lookup::control_planes(&shared, &ns, &id).await?;
    let mds = controllers::lookup::node_pools(&shared, &ns, &id).await?;
    let children_ready = !cps.is_empty()
        && cps.iter().all(|c| {
            c.status.as_ref().is_some_and(|s| operatorkit::conditions::is_status_condition_true(&s.conditions, READY))
        })
        && mds.iter().all(|m| {
            m.status.as_ref().is_some_and(|s| operatorkit::conditions::is_status_condition_true(&s.conditions, READY))
        });
    let own_ready = state.waiting.is_none()
        && status.stacks.len() >= 3
        && status.stacks.iter().all(|s| crate::stack_ops::usable(&s.status));
    let updating = status.stacks.iter().any(update_under_way);
    let (ready, reason, message) = if own_ready && children_ready {
        (true, "ClusterReady", "every stack of the cluster, its control plane and its node pools is ready".to_string())
    } else if let Some((reason, message)) = &state.failure {
        (false, *reason, message.clone())
    } else if own_ready {
        (
            false,
            WAITING_FOR_NODES,
            "the cluster network is ready; waiting for the control plane and node pools".to_string(),
        )
    } else if updating {
        (false, "StacksUpdating", state.waiting.clone().unwrap_or_else(|| "stacks are updating".into()))
    } else {
        (false, "StacksCreating", state.waiting.clone().unwrap_or_else(|| "stacks are being created".into()))
    };
    controllers::status::set_condition(&mut status.conditions, READY, ready, reason, message, obj.metadata.generation);
    crate::approval::set_update_pending(&mut status.conditions, obj, &status.stacks);
    let ignored = note_ignored_fields(&mut status.conditions, obj, &crate::capi::ignored_fields(state.capi.as_ref()));
    let overridden = crate::capi::note_overridden(&mut status.conditions, &state.overridden, obj.metadata.generation);
    // The Giant Swarm lifecycle conditions.
    let lifecycle = &mut status.cluster;
    lifecycle.id.clone_from(&id);
    if let Some(cidr) = &status.provider.network.cidr {
        lifecycle.network.cidr.clone_from(cidr);
    }
    let children_stacks = cps
        .iter()
        .filter_map(|c| c.status.as_ref())
        .flat_map(|s| &s.stacks)
        .chain(mds.iter().filter_map(|m| m.status.as_ref()).flat_map(|s| &s.stacks));
    let changed =
        advance_lifecycle(lifecycle, ready, status.stacks.iter().chain(children_stacks), &shared.config.version, now);
    // Published before the status is written, so a reader who sees the condition finds the event.
    if let Some(note) = ignored {
        shared.event(obj, FIELDS_IGNORED, note).await;
    }
    if let Some(note) = overridden {
        shared.warning(obj, crate::capi::OVERRIDDEN, note).await;
    }
    controllers::status::write_status(&shared.client, obj, obj.status.as_ref(), &status).await?;
    if let Some(condition) = changed {
        shared.event(obj, &condition.event_reason(), condition.event_note(&id)).await;
    }
    state.status = status;
    Ok(())
}

/// The condition type (and event reason) that names the deprecated fields a cluster sets.
pub const FIELDS_IGNORED: &str = "FieldsIgnored";

/// Set `FieldsIgnored=True` naming the deprecated fields the cluster sets and those of its
/// Cluster API `Cluster` accepted without effect (`capi_ignored`), or drop the condition when
/// there are none. Returns the note for a Normal event when the condition is new or names
/// other fields than before, so the event is published once per change, not on every reconcile.
pub fn note_ignored_fields(
    conditions: &mut Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition>,
    obj: &AWSCluster,
    capi_ignored: &[(String, &'static str)],
) -> Option<String> {
    let mut ignored: Vec<(String, &str)> = obj.ignored_fields().into_iter().map(|(f, w)| (f.to_string(), w)).collect();
    ignored.extend(capi_ignored.iter().cloned());
    if ignored.is_empty() {
        conditions.retain(|c| c.type_ != FIELDS_IGNORED);
        return None;
    }
    let message = ignored
        .iter()
        .map(|(field, why)| format!("{field} has no effect: {why}; remove it when convenient"))
        .collect::<Vec<_>>()
        .join("; ");
    let changed = controllers::status::set_condition(
        conditions,
        FIELDS_IGNORED,
        true,
        "DeprecatedField",
        message.clone(),
        obj.metadata.generation,
    );
    changed.then_some(message)
}

/// Stack name → status of a cluster's own stacks, for tests and the CLI.
pub fn stack_states(obj: &AWSCluster) -> BTreeMap<String, String> {
    obj.status
        .as_ref()
        .map(|s| s.stacks.iter().map(|e| (e.name.clone(), e.status.clone())).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use apis::aws::StackAccount;
    use apis::cluster_status::StatusCluster;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;

    fn t(secs: i64) -> jiff::Timestamp {
        jiff::Timestamp::from_second(1_800_000_000 + secs).unwrap_or_default()
    }

    fn stack(name: &str, status: &str, at: i64) -> StatusEntry {
        StatusEntry {
            name: name.into(),
            kind: "tcnp".into(),
            account: StackAccount::Tenant,
            status: status.into(),
            reason: None,
            last_transition_time: Some(Time(t(at))),
            attempts: None,
            pending_update: None,
            applied_plan: None,
        }
    }

    fn latest(l: &StatusCluster) -> Vec<&str> {
        l.conditions.iter().map(|c| c.type_.as_str()).collect()
    }

    #[test]
    fn a_deprecated_field_is_named_once_and_forgotten_once_removed() {
        let mut obj: AWSCluster = serde_json::from_value(serde_json::json!({
            "apiVersion": "infrastructure.giantswarm.io/v1alpha3", "kind": "AWSCluster",
            "metadata": {"name": "al9qy", "namespace": "default", "generation": 1},
            "spec": {
                "cluster": {"dns": {"domain": "example.com"}},
                "provider": {
                    "credentialSecret": {"name": "credential-al9qy", "namespace": "giantswarm"},
                    "pods": {"cidrBlock": "10.2.0.0/16", "externalSNAT": true},
                    "region": "eu-central-1"
                }
            }
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        let mut conditions = Vec::new();
        let note = note_ignored_fields(&mut conditions, &obj, &[]).unwrap_or_default();
        assert!(note.contains("spec.provider.pods.externalSNAT has no effect"), "{note}");
        assert!(conditions.iter().any(|c| c.type_ == FIELDS_IGNORED && c.status == "True" && c.message == note));
        assert_eq!(note_ignored_fields(&mut conditions, &obj, &[]), None, "the event is published once");
        if let Some(pods) = obj.spec.provider.pods.as_mut() {
            pods.external_snat = None;
        }
        assert_eq!(note_ignored_fields(&mut conditions, &obj, &[]), None);
        assert!(conditions.is_empty(), "the condition goes with the field: {conditions:?}");
    }

    #[test]
    fn every_stack_update_is_updating_then_updated() {
        let mut l = StatusCluster::default();
        let created = [stack("tccp", "CREATE_COMPLETE", 5)];
        assert_eq!(advance_lifecycle(&mut l, false, &created, "16.2.0", t(0)), Some(ClusterCondition::Creating));
        assert_eq!(advance_lifecycle(&mut l, false, &created, "16.2.0", t(5)), None);
        assert_eq!(advance_lifecycle(&mut l, true, &created, "16.2.0", t(10)), Some(ClusterCondition::Created));
        assert_eq!(l.latest_version(), Some("16.2.0"));
        assert_eq!(advance_lifecycle(&mut l, true, &created, "16.2.0", t(20)), None, "nothing changed");

        // A node pool's stack is updated (no version change): Updating while it runs, Updated
        // once the cluster is ready again.
        let updating = [created[0].clone(), stack("tcnp-np1", crate::stack_ops::UPDATE_REQUESTED, 30)];
        assert_eq!(advance_lifecycle(&mut l, false, &updating, "16.2.0", t(30)), Some(ClusterCondition::Updating));
        let in_progress = [created[0].clone(), stack("tcnp-np1", "UPDATE_IN_PROGRESS", 35)];
        assert_eq!(advance_lifecycle(&mut l, true, &in_progress, "16.2.0", t(35)), None, "still under way");
        let done = [created[0].clone(), stack("tcnp-np1", "UPDATE_COMPLETE", 40)];
        assert_eq!(advance_lifecycle(&mut l, false, &done, "16.2.0", t(40)), None, "not ready yet");
        assert_eq!(advance_lifecycle(&mut l, true, &done, "16.2.0", t(45)), Some(ClusterCondition::Updated));
        assert_eq!(latest(&l), ["Updated", "Created"]);
        assert_eq!(advance_lifecycle(&mut l, true, &done, "16.2.0", t(50)), None, "the same update counts once");

        // An update that began and ended between two looks still shows, then closes.
        let unseen = [created[0].clone(), stack("tcnp-np1", "UPDATE_COMPLETE", 60)];
        assert_eq!(advance_lifecycle(&mut l, true, &unseen, "16.2.0", t(61)), Some(ClusterCondition::Updating));
        assert_eq!(advance_lifecycle(&mut l, true, &unseen, "16.2.0", t(62)), Some(ClusterCondition::Updated));

        // A new operator version updates the stacks: its version is recorded when done.
        let upgrade = [stack("tccp", "UPDATE_IN_PROGRESS", 70)];
        assert_eq!(advance_lifecycle(&mut l, false, &upgrade, "16.3.0", t(70)), Some(ClusterCondition::Updating));
        let upgraded = [stack("tccp", "UPDATE_COMPLETE", 80)];
        assert_eq!(advance_lifecycle(&mut l, true, &upgraded, "16.3.0", t(81)), Some(ClusterCondition::Updated));
        assert_eq!(l.latest_version(), Some("16.3.0"));

        // A rolled-back update being retried is still an update under way.
        let mut failed = stack("tccp", "UPDATE_ROLLBACK_COMPLETE", 90);
        failed.attempts = Some(1);
        assert_eq!(advance_lifecycle(&mut l, false, &[failed], "16.3.0", t(90)), Some(ClusterCondition::Updating));
    }
}

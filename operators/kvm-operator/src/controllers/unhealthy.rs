//! The unhealthy-node terminator (`kvm-operator-unhealthy-nodes-terminator`), watching
//! KVMConfigs: it deletes the node pod of a workload-cluster (WC) node that has been NotReady
//! longer than `--unhealthy-node-threshold-seconds`; the node's Deployment starts a new pod
//! (a new VM), and the drainer's finalizer drains the old node first (reference §11).
//!
//! Opt-in, as in the original: per cluster with the KVMConfig annotation
//! [`TERMINATE_UNHEALTHY_ANNOTATION`] (any value but `false`), or for every cluster with
//! `--terminate-unhealthy-nodes`.
//!
//! The circuit breaker ([`node_lifecycle::unhealthy::plan`], shared with aws-operator): at
//! most one master and at most
//! `max(1, round(10 %))` of the cluster's nodes per run, the longest NotReady first, and no
//! other replacement within `--unhealthy-node-cooldown-seconds` of the last one. The time of
//! the last replacement is kept in the KVMConfig's annotation [`LAST_TERMINATION_ANNOTATION`],
//! so a restart of the operator does not lift the cooldown. Nodes held back get a Warning
//! event `UnhealthyNodesHeld` naming them; each replacement a Normal event
//! `UnhealthyNodeTerminated`.
//!
//! A cluster that sets `spec.cluster.maintenance.unhealthyNodeTerminationInWindow` has its
//! unhealthy nodes replaced only inside its maintenance windows (a Normal event
//! `WaitingForMaintenanceWindow` names the next one); by default a broken node is replaced at
//! once.
//!
//! Fixed by design (§11.3, §14.8): the threshold is a NotReady duration, not a count of
//! reconciles; a node whose pod is gone or already terminating is skipped, not an error for the
//! whole run; an unreachable WC skips the run (a NotReady node in an unreachable cluster
//! cannot be told from a network problem) instead of failing it. The controller requeues
//! itself for the moment the next node would cross the threshold or the cooldown would end,
//! so the threshold is kept to the second without polling.

use std::collections::BTreeSet;
use std::sync::Arc;

use apis::kvm::KVMConfig;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::{Api, Resource as _, ResourceExt};
use kvm_objects::cluster::Role as KvmRole;
use kvm_objects::names;
use kvm_objects::nodes::{pod_roles, role_of};
use node_lifecycle::disruption::{self, Gate};
use node_lifecycle::unhealthy::{self, NodeHealth, Role, plan};
use operatorkit::{Outcome, Resource, ResourceSet, resource};
use semver::VersionReq;

use super::{Nodes, RoleLabel};

/// The controller's name (and finalizer suffix).
pub const CONTROLLER: &str = crate::config::TERMINATOR_CONTROLLER;
/// KVMConfig annotation: replace this cluster's unhealthy nodes (any value but `false`).
pub const TERMINATE_UNHEALTHY_ANNOTATION: &str = "node.giantswarm.io/terminate-unhealthy";
/// KVMConfig annotation written by the terminator: when it last replaced a node (RFC 3339).
pub const LAST_TERMINATION_ANNOTATION: &str = "kvm-operator.giantswarm.io/last-unhealthy-node-termination";

/// The resource set `name` for the Releases `requirement` matches.
pub fn resource_set(nodes: Arc<Nodes>, name: String, requirement: VersionReq) -> ResourceSet<KVMConfig> {
    ResourceSet::builder(name, requirement, move |_: Arc<KVMConfig>, _| {
        let nodes = nodes.clone();
        async move { Ok(nodes) }
    })
    .resource(TerminateUnhealthyNodes)
    .build()
}

/// Whether the terminator acts on `config`: the flag, or the annotation.
pub fn enabled(all: bool, config: &KVMConfig) -> bool {
    all || config.annotations().get(TERMINATE_UNHEALTHY_ANNOTATION).is_some_and(|v| !v.eq_ignore_ascii_case("false"))
}

/// Replaces the node pods of nodes NotReady too long.
#[derive(Debug)]
pub struct TerminateUnhealthyNodes;

impl Resource<KVMConfig, Arc<Nodes>> for TerminateUnhealthyNodes {
    fn name(&self) -> &str {
        "terminate-unhealthy-nodes"
    }

    async fn ensure_created(&self, nodes: &mut Arc<Nodes>, config: &KVMConfig) -> resource::Result<Outcome> {
        if !enabled(nodes.settings.terminate_unhealthy, config) {
            return Ok(Outcome::proceed());
        }
        let cluster = nodes.cluster_ref(config);
        let Some((_, wc_nodes)) = nodes.workload_nodes(&cluster).await? else {
            return Ok(Outcome::proceed());
        };
        let namespace = names::namespace(&cluster.id);
        let pods_api = Api::<Pod>::namespaced(nodes.shared.client.clone(), &namespace);
        let pods = pods_api.list(&ListParams::default().labels(&super::pod_selector())).await?.items;
        // A node whose pod is already going is being replaced: neither a candidate nor a node
        // that counts towards the cap twice.
        let terminating: BTreeSet<String> = pods
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_some())
            .filter_map(|p| p.metadata.name.clone())
            .collect();
        let live_pods: Vec<Pod> = pods.into_iter().filter(|p| p.metadata.deletion_timestamp.is_none()).collect();
        let live_nodes: Vec<Node> = wc_nodes
            .into_iter()
            .filter(|n| !terminating.contains(n.metadata.name.as_deref().unwrap_or_default()))
            .collect();
        let now = Timestamp::now();
        let observed = health(&live_nodes, &live_pods, now);
        let last = unhealthy::since_last_termination(
            config.annotations().get(LAST_TERMINATION_ANNOTATION).map(String::as_str),
            now,
        );
        let limits = nodes.settings.limits;
        let planned = plan(&observed, limits, last);
        let events = &nodes.events.terminator;
        let subject = config.object_ref(&());
        // A cluster that opted in (`spec.cluster.maintenance.unhealthyNodeTerminationInWindow`)
        // has its unhealthy nodes replaced only inside its maintenance window.
        let maintenance = config.spec.cluster.maintenance.as_ref();
        if !planned.terminate.is_empty()
            && maintenance.and_then(|m| m.unhealthy_node_termination_in_window) == Some(true)
        {
            let settings = crate::controllers::cluster::maintenance::Settings::of(config);
            let what = format!("replacing the unhealthy nodes {}", planned.terminate.join(", "));
            let whose = crate::controllers::cluster::maintenance::whose(config);
            let poll = nodes.shared.poll;
            match disruption::gate(&whose, &settings.schedule, &what, nodes.shared.clock.now(), poll) {
                Gate::Go => {}
                Gate::Wait { message, retry_after } => {
                    events.normal(&subject, "DeletePod", disruption::WAITING_FOR_WINDOW, message).await;
                    return Ok(Outcome::proceed().requeue_after(retry_after));
                }
                Gate::Invalid(message) => {
                    events.warning(&subject, "DeletePod", disruption::INVALID_MAINTENANCE, message).await;
                    return Ok(Outcome::proceed().requeue_after(poll));
                }
            }
        }
        let mut terminated = 0;
        for name in &planned.terminate {
            match pods_api.delete(name, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => continue,
                Err(e) => return Err(e.into()),
            }
            terminated += 1;
            let role = observed.iter().find(|h| &h.name == name).map(|h| h.role.as_str()).unwrap_or_default();
            nodes.metrics.unhealthy_nodes_terminated.get_or_create(&RoleLabel { role: role.into() }).inc();
            tracing::info!(cluster = %cluster.id, pod = %name, "replacing the node pod of an unhealthy node");
            events
                .normal(
                    &subject,
                    "DeletePod",
                    "UnhealthyNodeTerminated",
                    format!(
                        "deleted node pod {namespace}/{name}: its workload-cluster node has been unhealthy (NotReady or disk full) for more than {}s; its Deployment starts a new one",
                        limits.threshold.as_secs()
                    ),
                )
                .await;
        }
        if terminated > 0 {
            let patch =
                serde_json::json!({ "metadata": { "annotations": { LAST_TERMINATION_ANNOTATION: now.to_string() } } });
            Api::<KVMConfig>::namespaced(nodes.shared.client.clone(), &config.namespace().unwrap_or_default())
                .patch(&config.name_any(), &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
        }
        if !planned.held.is_empty() {
            nodes.metrics.unhealthy_nodes_held.inc_by(planned.held.len() as u64);
            let why = unhealthy::held_reason(observed.len(), limits, last);
            events
                .warning(
                    &subject,
                    "DeletePod",
                    "UnhealthyNodesHeld",
                    format!("unhealthy for too long but not replaced yet, {why}: {}", planned.held.join(", ")),
                )
                .await;
        }
        Ok(match unhealthy::next_look(&observed, limits, last, terminated > 0) {
            Some(wait) => Outcome::proceed().requeue_after(wait),
            None => Outcome::proceed(),
        })
    }

    async fn ensure_deleted(&self, _: &mut Arc<Nodes>, _: &KVMConfig) -> resource::Result<Outcome> {
        Ok(Outcome::proceed())
    }
}

/// What the terminator observes of a cluster at `now`: every WC node with a role, its NotReady
/// time and whether a node pod of its name exists (what there is to replace). Nodes of neither
/// role (not kvm-operator's) are left out: they are not this operator's to replace, and they do
/// not count towards the 10 % cap.
pub fn health(nodes: &[Node], pods: &[Pod], now: Timestamp) -> Vec<NodeHealth> {
    let roles = pod_roles(pods);
    let mut observed: Vec<NodeHealth> = nodes
        .iter()
        .filter(|n| n.metadata.deletion_timestamp.is_none())
        .filter_map(|n| {
            let name = n.metadata.name.clone()?;
            let role = match role_of(&name, &roles)? {
                KvmRole::Master => Role::Master,
                KvmRole::Worker => Role::Worker,
            };
            Some(NodeHealth {
                not_ready_for: unhealthy::unhealthy_for(n, now),
                replaceable: roles.contains_key(&name),
                name,
                role,
            })
        })
        .collect();
    observed.sort_by(|a, b| a.name.cmp(&b.name));
    observed
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::time::Duration;

    fn node(name: &str, ready: &str) -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": name, "creationTimestamp": "2026-03-01T11:00:00Z"},
            "status": {"conditions": [{"type": "Ready", "status": ready, "lastTransitionTime": "2026-03-01T11:40:00Z"}]}
        }))
        .expect("node")
    }

    fn pod(name: &str, role: &str) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": name, "namespace": "q7m2x", "labels": {"app": role}}}))
            .expect("pod")
    }

    #[test]
    fn health_pairs_nodes_with_pods_by_name() {
        let now: Timestamp = "2026-03-01T12:00:00Z".parse().expect("time");
        let nodes = [
            node("master-m1-a-b", "True"),
            node("worker-w1-a-b", "False"),
            node("worker-w2-gone-x", "False"),
            node("ip-10-0-0-1", "False"),
        ];
        let pods = [pod("master-m1-a-b", "master"), pod("worker-w1-a-b", "worker")];
        let observed = health(&nodes, &pods, now);
        let names: Vec<_> = observed.iter().map(|h| (h.name.as_str(), h.role, h.replaceable)).collect();
        assert_eq!(
            names,
            [
                ("master-m1-a-b", Role::Master, true),
                ("worker-w1-a-b", Role::Worker, true),
                ("worker-w2-gone-x", Role::Worker, false)
            ]
        );
        assert_eq!(observed[0].not_ready_for, None);
        assert_eq!(observed[1].not_ready_for, Some(Duration::from_secs(20 * 60)));
    }
}

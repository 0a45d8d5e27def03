//! The unhealthy-node terminator (`aws-operator-unhealthy-node-terminator`, reference §4.5,
//! §8.3), watching AWSClusters: it terminates the EC2 instance of a workload-cluster (WC) node
//! that has been NotReady longer than `--unhealthy-node-threshold-seconds`, in its Auto Scaling
//! group and without decrementing the group's desired capacity, so the group launches a
//! replacement. The group's terminating lifecycle hook still holds the instance until the
//! drainers had its node drained ([`crate::drainers`]).
//!
//! On by default, as in the original: a cluster opts out with the AWSCluster annotation
//! [`TERMINATE_UNHEALTHY_ANNOTATION`]` = "false"`; with `--terminate-unhealthy-nodes=false`
//! only clusters annotated with another value take part.
//!
//! The trigger is a NotReady *duration*, read from the node's `Ready` condition, not the
//! original's count of ticks (6 reconciles, each bumping a per-node annotation): ticks fired
//! after anything from a few minutes to half an hour, depending on how often the AWSCluster
//! happened to change, and cost a write to every unhealthy node on every run. The duration is
//! the same on every cluster, needs no writes into the WC, and survives restarts.
//!
//! The circuit breaker is the one kvm-operator uses ([`node_lifecycle::unhealthy::plan`]): at
//! most one master and at most `max(1, round(10 %))` of the cluster's nodes per run, the longest
//! NotReady first, and no other termination within `--unhealthy-node-cooldown-seconds` of the
//! last one, whose time is kept in the AWSCluster's annotation [`LAST_TERMINATION_ANNOTATION`]
//! so a restart does not lift the cooldown, and in the process's memo, so a run that starts
//! before the annotation reached the cache does not either. Each termination gets a Normal event
//! `UnhealthyNodeTerminated`; nodes held back a Warning `UnhealthyNodesHeld`; NotReady nodes
//! whose `spec.providerID` names no instance a Warning `UnhealthyNodeWithoutInstance` (skipped,
//! never a failed run).
//!
//! Fixed by design: an unreachable WC skips the run (a NotReady node there cannot be told from a
//! network problem); an instance that is no longer in service in a group (already terminating,
//! or gone) is skipped and does not count towards the cap; the controller requeues itself for
//! the moment the next node crosses the threshold or the cooldown ends, besides its resync
//! (`--unhealthy-node-resync-seconds`, 3 min).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use apis::aws::AWSCluster;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Node, ObjectReference};
use kube::api::{Patch, PatchParams};
use kube::runtime::events::EventType;
use kube::{Api, ResourceExt};
use node_lifecycle::ClusterRef;
use node_lifecycle::unhealthy::{self, NodeHealth, Plan, Role};
use operatorkit::{Outcome, Resource, ResourceSet, resource};
use semver::VersionReq;

use crate::aws::autoscaling::{self, Termination};
use crate::context::{RoleLabels, Shared};
use crate::controllers::{self, lookup};

/// The controller's name (and finalizer suffix).
pub const CONTROLLER: &str = "aws-operator-unhealthy-node-terminator";
/// AWSCluster annotation: `"false"` opts the cluster out; another value opts it in when
/// `--terminate-unhealthy-nodes=false`.
pub const TERMINATE_UNHEALTHY_ANNOTATION: &str = "alpha.node.giantswarm.io/terminate-unhealthy";
/// AWSCluster annotation written by the terminator: when it last terminated an instance
/// (RFC 3339).
pub const LAST_TERMINATION_ANNOTATION: &str = "aws-operator.giantswarm.io/last-unhealthy-node-termination";
/// The lifecycle state of an instance the terminator may terminate.
const IN_SERVICE: &str = "InService";

/// The resource set `name` for the Releases `requirement` matches.
pub fn resource_set(shared: Arc<Shared>, name: String, requirement: VersionReq) -> ResourceSet<AWSCluster> {
    controllers::resource_set(shared, name, requirement, |shared, _| shared).resource(TerminateUnhealthyNodes).build()
}

/// Whether the terminator acts on `cluster`: its annotation when set (`"false"` opts out, any
/// other value in), else `all_clusters` (`--terminate-unhealthy-nodes`).
pub fn enabled(all_clusters: bool, cluster: &AWSCluster) -> bool {
    match cluster.annotations().get(TERMINATE_UNHEALTHY_ANNOTATION) {
        Some(value) => !value.trim().eq_ignore_ascii_case("false"),
        None => all_clusters,
    }
}

/// The EC2 instance id of a node's `spec.providerID`, `aws:///<zone>/<instance id>`; `None` for
/// anything else (another provider, a node not registered by the AWS cloud provider).
pub fn instance_id(provider_id: &str) -> Option<&str> {
    let path = provider_id.strip_prefix("aws://")?;
    let id = path.rsplit('/').next()?;
    let valid =
        id.strip_prefix("i-").is_some_and(|hex| !hex.is_empty() && hex.chars().all(|c| c.is_ascii_alphanumeric()));
    valid.then_some(id)
}

/// What the terminator observes of a WC at one instant.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Observed {
    /// Every node not being deleted: role, NotReady time, and whether it names an instance.
    pub health: Vec<NodeHealth>,
    /// The instance id of each node that names one, by node name.
    pub instances: BTreeMap<String, String>,
}

impl Observed {
    /// Observe `nodes` at `now`: the role by the well-known labels
    /// ([`node_lifecycle::unhealthy::Role::of_labels`]), the instance from `spec.providerID`.
    pub fn new(nodes: &[Node], now: Timestamp) -> Self {
        let mut observed = Self::default();
        for node in nodes.iter().filter(|n| n.metadata.deletion_timestamp.is_none()) {
            let Some(name) = node.metadata.name.clone() else { continue };
            let instance = node.spec.as_ref().and_then(|s| s.provider_id.as_deref()).and_then(instance_id);
            if let Some(id) = instance {
                observed.instances.insert(name.clone(), id.to_string());
            }
            observed.health.push(NodeHealth {
                role: node.metadata.labels.as_ref().map(Role::of_labels).unwrap_or(Role::Worker),
                not_ready_for: unhealthy::unhealthy_for(node, now),
                replaceable: instance.is_some(),
                name,
            });
        }
        observed.health.sort_by(|a, b| a.name.cmp(&b.name));
        observed
    }

    /// The instances of the nodes `plan` would terminate or hold: those whose state in their
    /// group decides the plan.
    pub fn candidates(&self, plan: &Plan) -> Vec<String> {
        plan.terminate.iter().chain(&plan.held).filter_map(|n| self.instances.get(n).cloned()).collect()
    }

    /// Without the nodes whose instance (one of `asked`) is not in service in a group (`states`,
    /// as Auto Scaling answered): already terminating, or gone. They are on their way out
    /// already, so they are neither terminated again nor counted towards the cap.
    pub fn in_service(mut self, asked: &[String], states: &BTreeMap<String, String>) -> Self {
        let leaving: BTreeSet<&str> = asked
            .iter()
            .filter(|id| states.get(id.as_str()).is_none_or(|s| s != IN_SERVICE))
            .map(String::as_str)
            .collect();
        let gone: BTreeSet<String> = self
            .instances
            .iter()
            .filter(|(_, id)| leaving.contains(id.as_str()))
            .map(|(node, _)| node.clone())
            .collect();
        self.health.retain(|h| !gone.contains(&h.name));
        self.instances.retain(|node, _| !gone.contains(node));
        self
    }

    /// The role of node `name`.
    fn role(&self, name: &str) -> Role {
        self.health.iter().find(|h| h.name == name).map_or(Role::Worker, |h| h.role)
    }
}

/// How to reach the workload cluster of `cluster`: its credentials are where the other
/// controllers read its certificates (`--certificates-namespace`, else the AWSCluster's
/// namespace), its API host is `api.<id>.<base domain>`.
pub fn cluster_ref(shared: &Shared, cluster: &AWSCluster) -> ClusterRef {
    let id = cluster.name_any();
    let namespace = cluster.namespace().unwrap_or_default();
    let certs = crate::node_config::certificates_namespace(shared, &namespace).to_string();
    let api = aws_stacks::names::api_host(&id, &cluster.spec.cluster.dns.domain);
    ClusterRef::new(certs, id, api)
}

/// A reference to WC node `name`, for an event's related object: the recorder tells events
/// apart by it, so each terminated node gets its own event.
fn node_ref(name: &str) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Node".into()),
        name: Some(name.into()),
        ..Default::default()
    }
}

/// Terminates the instances of nodes NotReady too long.
#[derive(Debug)]
pub struct TerminateUnhealthyNodes;

impl Resource<AWSCluster, Arc<Shared>> for TerminateUnhealthyNodes {
    fn name(&self) -> &str {
        "terminate-unhealthy-nodes"
    }

    async fn ensure_created(&self, shared: &mut Arc<Shared>, cluster: &AWSCluster) -> resource::Result<Outcome> {
        let settings = &shared.config.unhealthy;
        if !enabled(settings.all_clusters, cluster) || cluster.metadata.deletion_timestamp.is_some() {
            return Ok(Outcome::proceed());
        }
        let wc = cluster_ref(shared, cluster);
        let Some((_, nodes)) = shared.workload_clients.reachable_nodes(&wc).await? else {
            return Ok(Outcome::proceed());
        };
        let limits = settings.limits;
        let now = Timestamp::now();
        let key = format!("{}/{}", cluster.namespace().unwrap_or_default(), cluster.name_any());
        let remembered = shared.memo.lock().unhealthy_terminations.get(&key).map(ToString::to_string);
        // The later of the annotation and this process's memory of its own last termination.
        let last = [cluster.annotations().get(LAST_TERMINATION_ANNOTATION).cloned(), remembered]
            .iter()
            .filter_map(|at| unhealthy::since_last_termination(at.as_deref(), now))
            .min();
        let mut observed = Observed::new(&nodes, now);
        let mut planned = unhealthy::plan(&observed.health, limits, last);

        if !planned.unreplaceable.is_empty() {
            shared.unhealthy.unreplaceable.inc_by(planned.unreplaceable.len() as u64);
            let note = format!(
                "unhealthy (NotReady or disk full) for more than {}s but not replaced: spec.providerID names no EC2 instance (aws:///<zone>/<instance id>): {}",
                limits.threshold.as_secs(),
                planned.unreplaceable.join(", ")
            );
            let related = node_ref(&planned.unreplaceable[0]);
            shared
                .publish(
                    cluster,
                    EventType::Warning,
                    "UnhealthyNodeWithoutInstance",
                    "TerminateInstance",
                    Some(related),
                    note,
                )
                .await;
        }

        let candidates = observed.candidates(&planned);
        // A cluster that opted in (`spec.cluster.maintenance.unhealthyNodeTerminationInWindow`)
        // has its unhealthy nodes replaced only inside its maintenance window.
        let in_window = cluster.spec.cluster.maintenance.as_ref().and_then(|m| m.unhealthy_node_termination_in_window);
        if !candidates.is_empty() && in_window == Some(true) {
            let schedule = crate::maintenance::schedule(cluster, None);
            let what = format!("terminating the unhealthy nodes' instances {}", candidates.join(", "));
            let (type_, reason, note, after) =
                match crate::maintenance::gate(cluster, &schedule, &what, shared.clock.now(), settings.resync) {
                    crate::maintenance::Gate::Go => (None, "", String::new(), settings.resync),
                    crate::maintenance::Gate::Wait { message, retry_after } => {
                        (Some(EventType::Normal), crate::maintenance::WAITING_FOR_WINDOW, message, retry_after)
                    }
                    crate::maintenance::Gate::Invalid(message) => {
                        (Some(EventType::Warning), crate::maintenance::INVALID_MAINTENANCE, message, settings.resync)
                    }
                };
            if let Some(type_) = type_ {
                shared.publish(cluster, type_, reason, "TerminateInstance", None, note).await;
                return Ok(Outcome::proceed().requeue_after(after));
            }
        }
        if !candidates.is_empty() {
            // Only now, with nodes due, is AWS asked: which of their instances are still in
            // service (a terminated node stays NotReady in the WC until it is removed).
            let role = lookup::tenant_role(shared, cluster).await?;
            let tenant = shared.aws.tenant(&role, &cluster.spec.provider.region).await?;
            let states = autoscaling::group_states(&tenant, &candidates).await?;
            observed = observed.in_service(&candidates, &states);
            planned = unhealthy::plan(&observed.health, limits, last);
            let mut terminated = 0;
            for name in &planned.terminate {
                let Some(instance) = observed.instances.get(name) else { continue };
                let group = match autoscaling::terminate_in_group(&tenant, instance).await? {
                    Termination::Started { group } => group,
                    Termination::Gone => {
                        tracing::debug!(cluster = %wc.id, node = %name, %instance, "instance left its group meanwhile");
                        continue;
                    }
                };
                terminated += 1;
                let role = observed.role(name);
                shared.unhealthy.terminated.get_or_create(&RoleLabels { role: role.as_str().into() }).inc();
                tracing::info!(cluster = %wc.id, node = %name, %instance, %group, "terminating the instance of an unhealthy node");
                let note = format!(
                    "terminated instance {instance} in group {group}, keeping its desired capacity: {role} node {name} has been unhealthy (NotReady or disk full) for more than {}s",
                    limits.threshold.as_secs()
                );
                shared
                    .publish(
                        cluster,
                        EventType::Normal,
                        "UnhealthyNodeTerminated",
                        "TerminateInstance",
                        Some(node_ref(name)),
                        note,
                    )
                    .await;
            }
            if terminated > 0 {
                shared.memo.lock().unhealthy_terminations.insert(key, now);
                let patch = serde_json::json!({
                    "metadata": { "annotations": { LAST_TERMINATION_ANNOTATION: now.to_string() } }
                });
                Api::<AWSCluster>::namespaced(shared.client.clone(), &cluster.namespace().unwrap_or_default())
                    .patch(&cluster.name_any(), &PatchParams::default(), &Patch::Merge(&patch))
                    .await?;
            }
            if !planned.held.is_empty() {
                shared.unhealthy.held.inc_by(planned.held.len() as u64);
                let why = unhealthy::held_reason(observed.health.len(), limits, last);
                let note = format!("unhealthy for too long but not replaced yet, {why}: {}", planned.held.join(", "));
                let related = node_ref(&planned.held[0]);
                shared
                    .publish(
                        cluster,
                        EventType::Warning,
                        "UnhealthyNodesHeld",
                        "TerminateInstance",
                        Some(related),
                        note,
                    )
                    .await;
            }
            return Ok(requeue(&observed, limits, last, terminated > 0));
        }
        Ok(requeue(&observed, limits, last, false))
    }

    async fn ensure_deleted(&self, _: &mut Arc<Shared>, _: &AWSCluster) -> resource::Result<Outcome> {
        Ok(Outcome::proceed())
    }
}

/// Look again when the next node is due ([`unhealthy::next_look`]), else at the resync.
fn requeue(
    observed: &Observed,
    limits: unhealthy::Limits,
    last: Option<std::time::Duration>,
    just_terminated: bool,
) -> Outcome {
    match unhealthy::next_look(&observed.health, limits, last, just_terminated) {
        Some(wait) => Outcome::proceed().requeue_after(wait),
        None => Outcome::proceed(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::time::Duration;

    fn now() -> Timestamp {
        "2026-03-01T12:00:00Z".parse().expect("time")
    }

    /// A node NotReady since `since` (`None`: Ready), with `provider_id` and `labels`.
    fn node(name: &str, provider_id: Option<&str>, since: Option<&str>, labels: serde_json::Value) -> Node {
        let condition = match since {
            Some(t) => json!({"type": "Ready", "status": "False", "lastTransitionTime": t}),
            None => json!({"type": "Ready", "status": "True", "lastTransitionTime": "2026-03-01T10:00:00Z"}),
        };
        serde_json::from_value(json!({
            "metadata": {"name": name, "labels": labels, "creationTimestamp": "2026-03-01T09:00:00Z"},
            "spec": {"providerID": provider_id},
            "status": {"conditions": [condition]}
        }))
        .expect("node")
    }

    fn cluster(annotations: serde_json::Value) -> AWSCluster {
        serde_json::from_value(json!({
            "apiVersion": "infrastructure.giantswarm.io/v1alpha3", "kind": "AWSCluster",
            "metadata": {"name": "q7m2x", "namespace": "org-acme", "annotations": annotations},
            "spec": {
                "cluster": {"description": "t", "dns": {"domain": "k8s.example.com"}},
                "provider": {"credentialSecret": {"name": "c", "namespace": "giantswarm"}, "region": "eu-central-1"}
            }
        }))
        .expect("cluster")
    }

    #[test]
    fn the_instance_id_comes_from_the_provider_id() {
        assert_eq!(instance_id("aws:///eu-central-1a/i-0a1b2c3d4e5f60718"), Some("i-0a1b2c3d4e5f60718"));
        assert_eq!(instance_id("aws://eu-central-1a/i-0abc"), Some("i-0abc"));
        for bad in [
            "",
            "aws:///eu-central-1a/",
            "aws:///eu-central-1a/i-",
            "kvm://1234",
            "gce://p/z/i-0abc",
            "aws:///z/i-0a/b",
        ] {
            assert_eq!(instance_id(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn on_unless_the_cluster_opts_out() {
        assert!(enabled(true, &cluster(json!({}))));
        assert!(!enabled(true, &cluster(json!({TERMINATE_UNHEALTHY_ANNOTATION: "false"}))));
        assert!(!enabled(true, &cluster(json!({TERMINATE_UNHEALTHY_ANNOTATION: " False "}))));
        assert!(enabled(true, &cluster(json!({TERMINATE_UNHEALTHY_ANNOTATION: "true"}))));
        // Off by flag: only clusters that opt in.
        assert!(!enabled(false, &cluster(json!({}))));
        assert!(enabled(false, &cluster(json!({TERMINATE_UNHEALTHY_ANNOTATION: "true"}))));
        assert!(!enabled(false, &cluster(json!({TERMINATE_UNHEALTHY_ANNOTATION: "false"}))));
    }

    #[test]
    fn nodes_are_observed_with_role_time_and_instance() {
        let nodes = [
            node(
                "ip-10-1-0-10.eu-central-1.compute.internal",
                Some("aws:///eu-central-1a/i-0master"),
                Some("2026-03-01T11:00:00Z"),
                json!({"node-role.kubernetes.io/control-plane": ""}),
            ),
            node("ip-10-1-1-20.eu-central-1.compute.internal", Some("aws:///eu-central-1a/i-0worker"), None, json!({})),
            node("ip-10-1-1-30.eu-central-1.compute.internal", None, Some("2026-03-01T11:30:00Z"), json!({})),
        ];
        let observed = Observed::new(&nodes, now());
        let seen: Vec<_> = observed
            .health
            .iter()
            .map(|h| (h.role, h.not_ready_for.map(|d| d.as_secs() / 60), h.replaceable))
            .collect();
        assert_eq!(seen, [(Role::Master, Some(60), true), (Role::Worker, None, true), (Role::Worker, Some(30), false)]);
        assert_eq!(observed.instances.values().collect::<Vec<_>>(), ["i-0master", "i-0worker"]);
    }

    #[test]
    fn a_ready_node_whose_disk_is_full_is_observed_unhealthy() {
        let mut full = node("ip-10-1-1-40.eu-central-1.compute.internal", Some("aws:///z/i-0full"), None, json!({}));
        let disk_full: k8s_openapi::api::core::v1::NodeCondition = serde_json::from_value(
            json!({"type": "DiskFullContainerd", "status": "True", "lastTransitionTime": "2026-03-01T11:15:00Z"}),
        )
        .expect("condition");
        full.status.as_mut().and_then(|s| s.conditions.as_mut()).expect("conditions").push(disk_full);
        let observed = Observed::new(&[full], now());
        assert_eq!(observed.health[0].not_ready_for, Some(Duration::from_secs(45 * 60)));
        let limits = unhealthy::Limits { threshold: Duration::from_secs(15 * 60), cooldown: Duration::from_secs(600) };
        assert_eq!(
            unhealthy::plan(&observed.health, limits, None).terminate,
            ["ip-10-1-1-40.eu-central-1.compute.internal"]
        );
    }

    #[test]
    fn instances_already_leaving_are_neither_terminated_again_nor_counted() {
        let limits = unhealthy::Limits { threshold: Duration::from_secs(60), cooldown: Duration::from_secs(600) };
        let nodes = [
            node("a", Some("aws:///z/i-0aaa"), Some("2026-03-01T11:00:00Z"), json!({})),
            node("b", Some("aws:///z/i-0bbb"), Some("2026-03-01T11:30:00Z"), json!({})),
            node("c", Some("aws:///z/i-0ccc"), None, json!({})),
        ];
        let observed = Observed::new(&nodes, now());
        let first = unhealthy::plan(&observed.health, limits, None);
        assert_eq!((first.terminate.clone(), first.held.clone()), (vec!["a".to_string()], vec!["b".to_string()]));
        let asked = observed.candidates(&first);
        assert_eq!(asked, ["i-0aaa", "i-0bbb"]);
        // a's instance waits in its hook after an earlier termination: b is next.
        let states = BTreeMap::from([
            ("i-0aaa".to_string(), "Terminating:Wait".to_string()),
            ("i-0bbb".to_string(), IN_SERVICE.to_string()),
        ]);
        let refined = observed.clone().in_service(&asked, &states);
        assert_eq!(unhealthy::plan(&refined.health, limits, None).terminate, ["b"]);
        assert_eq!(refined.health.len(), 2, "a no longer counts");
        // Neither instance known to Auto Scaling any more: nothing to terminate.
        let gone = observed.in_service(&asked, &BTreeMap::new());
        assert_eq!(unhealthy::plan(&gone.health, limits, None), Plan::default());
    }
}

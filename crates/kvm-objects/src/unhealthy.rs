//! Replacing workload-cluster nodes that stay NotReady (reference §11): which node pods to
//! delete in one run, with a circuit breaker.
//!
//! The breaker of the original, kept: at most one master per run, and at most
//! `max(1, round(10 % of all nodes))` nodes per run. Fixed by design:
//! - the threshold is a duration of NotReady, read from the node's `Ready` condition, not a
//!   count of reconciliations (6 ticks fired after anything from a few minutes to half an hour,
//!   depending on how often the object changed; reviewers flagged it in PR #1106);
//! - the pause between terminations ([`Limits::cooldown`]) is enforced; the library defined it
//!   and never applied it, and resetting every tick was the only brake;
//! - a NotReady node without a node pod of the same name is reported and skipped instead of
//!   failing the whole run (§14.8); the deleter removes such nodes;
//! - the longest NotReady nodes go first, then by name, so the choice is deterministic.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Node;

use crate::cluster::Role;

/// The thresholds of the planner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// How long a node must have been NotReady to be replaced.
    pub threshold: Duration,
    /// How long after a replacement no other node is replaced.
    pub cooldown: Duration,
}

impl Default for Limits {
    /// 15 min NotReady (about the middle of the original's effective range), 10 min between
    /// terminations (the original library's `PauseBetweenTermination`).
    fn default() -> Self {
        Self { threshold: Duration::from_secs(15 * 60), cooldown: Duration::from_secs(10 * 60) }
    }
}

/// What is observed of one workload-cluster node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeHealth {
    /// The node name (= its node pod's name).
    pub name: String,
    /// Master or worker.
    pub role: Role,
    /// How long it has been NotReady; `None` while Ready.
    pub not_ready_for: Option<Duration>,
    /// Whether a node pod of the same name exists in the cluster's namespace.
    pub has_pod: bool,
}

/// The plan of one run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Delete these node pods (their Deployments replace them; the drain runs as usual).
    pub terminate: Vec<String>,
    /// NotReady long enough, but held back by the circuit breaker or the cooldown.
    pub held: Vec<String>,
    /// NotReady long enough, but without a node pod: nothing to replace.
    pub without_pod: Vec<String>,
}

/// How long `node` has been NotReady at `now`: since its `Ready` condition's last transition
/// when that is not `True`, since the node's creation when it never reported readiness.
pub fn not_ready_for(node: &Node, now: Timestamp) -> Option<Duration> {
    let ready =
        node.status.as_ref().and_then(|s| s.conditions.as_ref()).and_then(|c| c.iter().find(|c| c.type_ == "Ready"));
    let since = match ready {
        Some(c) if c.status == "True" => return None,
        Some(c) => c.last_transition_time.as_ref().map(|t| t.0),
        None => None,
    }
    .or_else(|| node.metadata.creation_timestamp.as_ref().map(|t| t.0))?;
    let elapsed = now.duration_since(since);
    Some(Duration::try_from(elapsed).unwrap_or_default())
}

/// The maximum number of nodes replaced in one run for a cluster of `nodes` nodes.
pub fn max_per_run(nodes: usize) -> usize {
    ((nodes as f64) * 0.1).round().max(1.0) as usize
}

/// Plan one run over every node of a workload cluster. `since_last_termination` is the time
/// since this cluster's last replacement, if any.
pub fn plan(nodes: &[NodeHealth], limits: Limits, since_last_termination: Option<Duration>) -> Plan {
    let mut candidates: Vec<&NodeHealth> =
        nodes.iter().filter(|n| n.not_ready_for.is_some_and(|d| d >= limits.threshold)).collect();
    candidates.sort_by(|a, b| b.not_ready_for.cmp(&a.not_ready_for).then_with(|| a.name.cmp(&b.name)));
    let mut plan = Plan::default();
    let cooling = since_last_termination.is_some_and(|d| d < limits.cooldown);
    let cap = max_per_run(nodes.len());
    let mut master_taken = false;
    for node in candidates {
        if !node.has_pod {
            plan.without_pod.push(node.name.clone());
        } else if cooling || plan.terminate.len() >= cap || (node.role == Role::Master && master_taken) {
            plan.held.push(node.name.clone());
        } else {
            master_taken |= node.role == Role::Master;
            plan.terminate.push(node.name.clone());
        }
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const MIN: u64 = 60;

    fn node(name: &str, role: Role, not_ready_min: Option<u64>) -> NodeHealth {
        NodeHealth {
            name: name.into(),
            role,
            not_ready_for: not_ready_min.map(|m| Duration::from_secs(m * MIN)),
            has_pod: true,
        }
    }

    /// 3 masters and 5 workers, all Ready.
    fn cluster() -> Vec<NodeHealth> {
        let mut nodes: Vec<_> = (1..=3).map(|i| node(&format!("master-m{i}-a-b"), Role::Master, None)).collect();
        nodes.extend((1..=5).map(|i| node(&format!("worker-w{i}-a-b"), Role::Worker, None)));
        nodes
    }

    #[test]
    fn a_node_notready_long_enough_is_replaced() {
        let mut nodes = cluster();
        nodes[4].not_ready_for = Some(Duration::from_secs(14 * MIN));
        assert_eq!(plan(&nodes, Limits::default(), None), Plan::default(), "not yet");
        nodes[4].not_ready_for = Some(Duration::from_secs(15 * MIN));
        assert_eq!(plan(&nodes, Limits::default(), None).terminate, ["worker-w2-a-b"]);
        // Within the cooldown of the last replacement: held.
        let cooling = plan(&nodes, Limits::default(), Some(Duration::from_secs(4 * MIN)));
        assert_eq!((cooling.terminate.len(), cooling.held.clone()), (0, vec!["worker-w2-a-b".to_string()]));
        assert_eq!(plan(&nodes, Limits::default(), Some(Duration::from_secs(11 * MIN))).terminate, ["worker-w2-a-b"]);
    }

    #[test]
    fn the_circuit_breaker_holds_when_many_fail_at_once() {
        let mut nodes = cluster();
        for (i, minutes) in [(3, 40), (5, 90), (6, 20)] {
            nodes[i].not_ready_for = Some(Duration::from_secs(minutes * MIN));
        }
        // 8 nodes: round(0.8) = 1 per run; the longest NotReady goes first.
        let p = plan(&nodes, Limits::default(), None);
        assert_eq!(p.terminate, ["worker-w3-a-b"]);
        assert_eq!(p.held, ["worker-w1-a-b", "worker-w4-a-b"]);
        assert_eq!((max_per_run(5), max_per_run(14), max_per_run(15), max_per_run(40)), (1, 1, 2, 4));
    }

    #[test]
    fn at_most_one_master_per_run() {
        let mut nodes = cluster();
        for master in &mut nodes[..3] {
            master.not_ready_for = Some(Duration::from_secs(60 * MIN));
        }
        nodes.extend((6..=20).map(|i| node(&format!("worker-w{i}-a-b"), Role::Worker, None)));
        // 23 nodes: two per run, but only one master.
        let p = plan(&nodes, Limits::default(), None);
        assert_eq!(p.terminate, ["master-m1-a-b"]);
        assert_eq!(p.held, ["master-m2-a-b", "master-m3-a-b"]);
    }

    #[test]
    fn a_node_without_a_pod_is_reported_not_fatal() {
        let mut nodes = cluster();
        nodes[7].not_ready_for = Some(Duration::from_secs(50 * MIN));
        nodes[7].has_pod = false;
        nodes[6].not_ready_for = Some(Duration::from_secs(30 * MIN));
        let p = plan(&nodes, Limits::default(), None);
        assert_eq!(
            (p.terminate, p.without_pod),
            (vec!["worker-w4-a-b".to_string()], vec!["worker-w5-a-b".to_string()])
        );
    }

    #[test]
    fn notready_time_comes_from_the_ready_condition() {
        let now: Timestamp = "2026-03-01T12:00:00Z".parse().expect("time");
        let node = |conditions: serde_json::Value| -> Node {
            serde_json::from_value(json!({
                "metadata": {"name": "worker-w1-a-b", "creationTimestamp": "2026-03-01T11:00:00Z"},
                "status": {"conditions": conditions}
            }))
            .expect("node")
        };
        let ready = node(json!([{"type": "Ready", "status": "True", "lastTransitionTime": "2026-03-01T11:30:00Z"}]));
        assert_eq!(not_ready_for(&ready, now), None);
        let unknown =
            node(json!([{"type": "Ready", "status": "Unknown", "lastTransitionTime": "2026-03-01T11:42:00Z"}]));
        assert_eq!(not_ready_for(&unknown, now), Some(Duration::from_secs(18 * MIN)));
        let never = node(json!([]));
        assert_eq!(not_ready_for(&never, now), Some(Duration::from_secs(60 * MIN)), "since creation");
    }
}

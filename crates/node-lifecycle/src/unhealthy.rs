//! Replacing workload-cluster nodes that stay NotReady (or whose disk stays full,
//! [`DISK_FULL_CONDITIONS`]): which nodes to replace in one run,
//! behind a circuit breaker, and when to look again. Pure; both operators apply the plan their
//! own way (kvm-operator deletes the node pod, aws-operator terminates the instance in its Auto
//! Scaling group), so both share one breaker.
//!
//! The breaker of the originals, kept: at most one master per run, and at most
//! `max(1, round(10 % of all nodes))` nodes per run. Fixed by design:
//! - the threshold is a duration of NotReady, read from the node's `Ready` condition, not a
//!   count of reconciliations (6 ticks fired after anything from a few minutes to half an hour,
//!   depending on how often the object changed);
//! - the pause between terminations ([`Limits::cooldown`]) is enforced; the original library
//!   defined it and never applied it, and resetting every tick was the only brake;
//! - a NotReady node the operator cannot replace (no node pod, no instance id) is reported and
//!   skipped instead of failing the whole run;
//! - the longest NotReady nodes go first, then by name, so the choice is deterministic.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Node;

/// The labels that make a node a master (control-plane) node, with the value they need (`None`:
/// any value).
pub const MASTER_LABELS: [(&str, Option<&str>); 3] = [
    ("node-role.kubernetes.io/control-plane", None),
    ("node-role.kubernetes.io/master", None),
    ("kubernetes.io/role", Some("master")),
];

/// A node's role, for the breaker's one-master rule and the metrics' `role` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    /// A control-plane node.
    Master,
    /// Any other node.
    Worker,
}

impl Role {
    /// `master` or `worker`.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Master => "master",
            Role::Worker => "worker",
        }
    }

    /// The role of a node by its labels ([`MASTER_LABELS`]): master when one of them is set,
    /// worker otherwise.
    pub fn of_labels(labels: &BTreeMap<String, String>) -> Self {
        let master = MASTER_LABELS
            .iter()
            .any(|(key, value)| labels.get(*key).is_some_and(|v| value.is_none_or(|want| v == want)));
        if master { Role::Master } else { Role::Worker }
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The thresholds of the planner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// How long a node must have been NotReady to be replaced.
    pub threshold: Duration,
    /// How long after a replacement no other node is replaced.
    pub cooldown: Duration,
}

impl Limits {
    /// A threshold and a cooldown of so many seconds, as the operators' flags
    /// `--unhealthy-node-threshold-seconds` and `--unhealthy-node-cooldown-seconds` give them.
    pub fn from_secs(threshold: u64, cooldown: u64) -> Self {
        Self { threshold: Duration::from_secs(threshold), cooldown: Duration::from_secs(cooldown) }
    }
}

impl Default for Limits {
    /// 15 min NotReady (about the middle of the originals' effective range: 6 ticks at a
    /// 3-minute resync), 10 min between terminations (the original library's
    /// `PauseBetweenTermination`).
    fn default() -> Self {
        Self { threshold: Duration::from_secs(15 * 60), cooldown: Duration::from_secs(10 * 60) }
    }
}

/// What is observed of one workload-cluster node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeHealth {
    /// The node name.
    pub name: String,
    /// Master or worker.
    pub role: Role,
    /// How long it has been unhealthy, NotReady or with a full disk ([`unhealthy_for`]);
    /// `None` while healthy.
    pub not_ready_for: Option<Duration>,
    /// Whether the operator has something to replace it by: a node pod of the same name
    /// (kvm-operator), an instance id from its `spec.providerID` (aws-operator).
    pub replaceable: bool,
}

/// The plan of one run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Replace these nodes.
    pub terminate: Vec<String>,
    /// NotReady long enough, but held back by the circuit breaker or the cooldown.
    pub held: Vec<String>,
    /// NotReady long enough, but not replaceable ([`NodeHealth::replaceable`]).
    pub unreplaceable: Vec<String>,
}

/// The node conditions that make a node as unhealthy as NotReady while they are `True`: a full
/// disk under the kubelet, containerd or `/var/log` (set by node-problem-detector's custom
/// plugin, as the originals' nodes did). A node whose disk is full keeps reporting `Ready` while
/// it can start nothing.
pub const DISK_FULL_CONDITIONS: [&str; 3] = ["DiskFullKubelet", "DiskFullContainerd", "DiskFullVarLog"];

/// How long `node` has been NotReady at `now`: since its `Ready` condition's last transition
/// when that is not `True`, since the node's creation when it never reported readiness.
pub fn not_ready_for(node: &Node, now: Timestamp) -> Option<Duration> {
    let ready = conditions(node).find(|c| c.type_ == "Ready");
    let since = match ready {
        Some(c) if c.status == "True" => return None,
        Some(c) => c.last_transition_time.as_ref().map(|t| t.0),
        None => None,
    }
    .or_else(|| node.metadata.creation_timestamp.as_ref().map(|t| t.0))?;
    Some(elapsed(since, now))
}

/// How long `node` has been unhealthy at `now`: the longer of its NotReady time
/// ([`not_ready_for`]) and the time any of [`DISK_FULL_CONDITIONS`] has been `True` (since that
/// condition's last transition; since the node's creation without one). `None`: healthy.
pub fn unhealthy_for(node: &Node, now: Timestamp) -> Option<Duration> {
    let disk_full = conditions(node)
        .filter(|c| c.status == "True" && DISK_FULL_CONDITIONS.contains(&c.type_.as_str()))
        .filter_map(|c| {
            let since = c.last_transition_time.as_ref().map(|t| t.0);
            since.or_else(|| node.metadata.creation_timestamp.as_ref().map(|t| t.0))
        })
        .map(|since| elapsed(since, now))
        .max();
    not_ready_for(node, now).max(disk_full)
}

fn conditions(node: &Node) -> impl Iterator<Item = &k8s_openapi::api::core::v1::NodeCondition> {
    node.status.as_ref().and_then(|s| s.conditions.as_ref()).into_iter().flatten()
}

fn elapsed(since: Timestamp, now: Timestamp) -> Duration {
    Duration::try_from(now.duration_since(since)).unwrap_or_default()
}

/// The maximum number of nodes replaced in one run for a cluster of `nodes` nodes.
pub fn max_per_run(nodes: usize) -> usize {
    ((nodes as f64) * 0.1).round().max(1.0) as usize
}

/// The time since the last replacement, from the RFC 3339 instant an operator keeps (in an
/// annotation, so that a restart does not lift the cooldown); `None` when there is none or it
/// does not parse.
pub fn since_last_termination(last: Option<&str>, now: Timestamp) -> Option<Duration> {
    let at = last?.parse::<Timestamp>().ok()?;
    Some(Duration::try_from(now.duration_since(at)).unwrap_or_default())
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
        if !node.replaceable {
            plan.unreplaceable.push(node.name.clone());
        } else if cooling || plan.terminate.len() >= cap || (node.role == Role::Master && master_taken) {
            plan.held.push(node.name.clone());
        } else {
            master_taken |= node.role == Role::Master;
            plan.terminate.push(node.name.clone());
        }
    }
    plan
}

/// Why `plan` held nodes back, for the event that names them.
pub fn held_reason(nodes: usize, limits: Limits, since_last_termination: Option<Duration>) -> String {
    if since_last_termination.is_some_and(|d| d < limits.cooldown) {
        format!("the last replacement was less than {}s ago", limits.cooldown.as_secs())
    } else {
        format!(
            "at most one master and at most {} of the cluster's {nodes} nodes are replaced per run",
            max_per_run(nodes)
        )
    }
}

/// When to look again: when the next replaceable NotReady node crosses the threshold, or when
/// the cooldown ends while nodes wait; `None` when no node is NotReady (the resync suffices).
/// Keeps the threshold to the second without polling.
pub fn next_look(
    observed: &[NodeHealth],
    limits: Limits,
    since_last_termination: Option<Duration>,
    just_terminated: bool,
) -> Option<Duration> {
    let cooldown_left = if just_terminated {
        Some(limits.cooldown)
    } else {
        since_last_termination.and_then(|d| limits.cooldown.checked_sub(d))
    };
    observed
        .iter()
        .filter(|h| h.replaceable)
        .filter_map(|h| h.not_ready_for)
        .map(|not_ready| limits.threshold.saturating_sub(not_ready).max(cooldown_left.unwrap_or_default()))
        .min()
        .map(|wait| wait.max(Duration::from_secs(1)))
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
            replaceable: true,
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
        assert_eq!(
            held_reason(nodes.len(), Limits::default(), None),
            "at most one master and at most 1 of the cluster's 8 nodes are replaced per run"
        );
        assert_eq!(
            held_reason(nodes.len(), Limits::default(), Some(Duration::from_secs(MIN))),
            "the last replacement was less than 600s ago"
        );
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
    fn an_unreplaceable_node_is_reported_not_fatal() {
        let mut nodes = cluster();
        nodes[7].not_ready_for = Some(Duration::from_secs(50 * MIN));
        nodes[7].replaceable = false;
        nodes[6].not_ready_for = Some(Duration::from_secs(30 * MIN));
        let p = plan(&nodes, Limits::default(), None);
        assert_eq!(
            (p.terminate, p.unreplaceable),
            (vec!["worker-w4-a-b".to_string()], vec!["worker-w5-a-b".to_string()])
        );
    }

    /// A worker created at 11:00 with `conditions`.
    fn node_with(conditions: serde_json::Value) -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": "worker-w1-a-b", "creationTimestamp": "2026-03-01T11:00:00Z"},
            "status": {"conditions": conditions}
        }))
        .expect("node")
    }

    #[test]
    fn notready_time_comes_from_the_ready_condition() {
        let now: Timestamp = "2026-03-01T12:00:00Z".parse().expect("time");
        let ready =
            node_with(json!([{"type": "Ready", "status": "True", "lastTransitionTime": "2026-03-01T11:30:00Z"}]));
        assert_eq!(not_ready_for(&ready, now), None);
        let unknown =
            node_with(json!([{"type": "Ready", "status": "Unknown", "lastTransitionTime": "2026-03-01T11:42:00Z"}]));
        assert_eq!(not_ready_for(&unknown, now), Some(Duration::from_secs(18 * MIN)));
        let never = node_with(json!([]));
        assert_eq!(not_ready_for(&never, now), Some(Duration::from_secs(60 * MIN)), "since creation");
    }

    #[test]
    fn a_full_disk_counts_as_unhealthy_for_as_long_as_it_is_full() {
        let now: Timestamp = "2026-03-01T12:00:00Z".parse().expect("time");
        let ready = json!({"type": "Ready", "status": "True", "lastTransitionTime": "2026-03-01T11:30:00Z"});
        let healthy = node_with(json!([ready, {"type": "DiskFullKubelet", "status": "False"}]));
        assert_eq!(unhealthy_for(&healthy, now), None);
        for condition in DISK_FULL_CONDITIONS {
            let full = node_with(
                json!([ready, {"type": condition, "status": "True", "lastTransitionTime": "2026-03-01T11:40:00Z"}]),
            );
            assert_eq!(not_ready_for(&full, now), None, "{condition}: still Ready");
            assert_eq!(unhealthy_for(&full, now), Some(Duration::from_secs(20 * MIN)), "{condition}");
        }
        // Another condition a node-problem-detector sets is not a reason to replace the node.
        let other = node_with(
            json!([ready, {"type": "KernelDeadlock", "status": "True", "lastTransitionTime": "2026-03-01T11:00:00Z"}]),
        );
        assert_eq!(unhealthy_for(&other, now), None);
        // NotReady for longer than the disk has been full: the longer time counts.
        let both = node_with(json!([
            {"type": "Ready", "status": "False", "lastTransitionTime": "2026-03-01T11:10:00Z"},
            {"type": "DiskFullVarLog", "status": "True", "lastTransitionTime": "2026-03-01T11:50:00Z"}
        ]));
        assert_eq!(unhealthy_for(&both, now), Some(Duration::from_secs(50 * MIN)));
    }

    #[test]
    fn the_last_termination_is_read_from_its_instant() {
        let now: Timestamp = "2026-03-01T12:00:00Z".parse().expect("time");
        assert_eq!(since_last_termination(Some("2026-03-01T11:55:00Z"), now), Some(Duration::from_secs(5 * MIN)));
        assert_eq!(since_last_termination(Some("yesterday"), now), None, "unparsable: no cooldown");
        assert_eq!(since_last_termination(None, now), None);
    }

    #[test]
    fn roles_come_from_the_well_known_labels() {
        let labels = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
        };
        assert_eq!(Role::of_labels(&labels(&[("node-role.kubernetes.io/control-plane", "")])), Role::Master);
        assert_eq!(Role::of_labels(&labels(&[("node-role.kubernetes.io/master", "")])), Role::Master);
        assert_eq!(Role::of_labels(&labels(&[("kubernetes.io/role", "master")])), Role::Master);
        assert_eq!(Role::of_labels(&labels(&[("kubernetes.io/role", "worker")])), Role::Worker);
        assert_eq!(Role::of_labels(&labels(&[("node-role.kubernetes.io/worker", "")])), Role::Worker);
        assert_eq!(Role::Master.to_string(), "master");
    }

    #[test]
    fn the_next_look_is_when_a_node_crosses_the_threshold_or_the_cooldown_ends() {
        let limits = Limits::default();
        let mut nodes = cluster();
        assert_eq!(next_look(&nodes, limits, None, false), None, "all Ready");
        nodes[4].not_ready_for = Some(Duration::from_secs(10 * MIN));
        assert_eq!(next_look(&nodes, limits, None, false), Some(Duration::from_secs(5 * MIN)));
        // A replacement 8 minutes ago: 2 more minutes of cooldown; the node is due in 5.
        assert_eq!(
            next_look(&nodes, limits, Some(Duration::from_secs(8 * MIN)), false),
            Some(Duration::from_secs(5 * MIN))
        );
        nodes[4].not_ready_for = Some(Duration::from_secs(20 * MIN));
        assert_eq!(
            next_look(&nodes, limits, Some(Duration::from_secs(8 * MIN)), false),
            Some(Duration::from_secs(2 * MIN))
        );
        assert_eq!(next_look(&nodes, limits, None, true), Some(limits.cooldown), "just replaced one");
        assert_eq!(next_look(&nodes, limits, None, false), Some(Duration::from_secs(1)), "due now: soon, not at once");
        nodes[4].replaceable = false;
        assert_eq!(next_look(&nodes, limits, None, false), None, "nothing replaceable waits");
    }
}

//! The workload-cluster side of the node pods, as pure functions: what a WC node's readiness
//! makes of its pod's condition [`names::NODE_READY_CONDITION`] (the node watcher), which WC
//! nodes are left over from pods that are gone (the deleter), and the role of a WC node
//! (the unhealthy-node terminator's observation, `node_lifecycle::unhealthy::NodeHealth`, is
//! built from it in kvm-operator).
//!
//! A node pod and its WC node share a name (the VM's host name is the pod name), so every
//! pairing here is by name, within one cluster.
//!
//! Fixed by design (reference §4.5, §14.7): the condition is written only when its status or
//! reason changes, and its transition time moves only with its status, so a steady node costs
//! no write however often it is looked at.

use std::collections::{BTreeMap, BTreeSet};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Node, Pod, PodCondition};
use serde_json::{Value, json};

use crate::cluster::Role;
use crate::names;

/// The reason of the condition while the WC node is being deleted (or is gone).
pub const NODE_DELETED: &str = "NodeDeleted";
/// The reason of the condition when the WC node does not report readiness.
pub const NO_READY_CONDITION: &str = "NodeReadyUnknown";

/// The desired state of a pod's [`names::NODE_READY_CONDITION`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeReadyCondition {
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// A PascalCase reason.
    pub reason: String,
    /// A sentence for people.
    pub message: String,
}

/// The node's `Ready` condition, if it reports one.
fn ready_condition(node: &Node) -> Option<&k8s_openapi::api::core::v1::NodeCondition> {
    node.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == "Ready")
}

/// Whether the WC node reports `Ready=True` and is not being deleted.
pub fn is_ready(node: &Node) -> bool {
    node.metadata.deletion_timestamp.is_none() && ready_condition(node).is_some_and(|c| c.status == "True")
}

/// The condition a node pod gets from its WC node: the node's `Ready` status (`True`, `False`,
/// anything else `Unknown`) with its reason and message; `False`/[`NODE_DELETED`] for a node
/// being deleted, or gone (`node` is `None`).
pub fn node_ready_condition(node: Option<&Node>) -> NodeReadyCondition {
    let Some(node) = node.filter(|n| n.metadata.deletion_timestamp.is_none()) else {
        return NodeReadyCondition {
            status: "False".into(),
            reason: NODE_DELETED.into(),
            message: "node deleted in workload cluster".into(),
        };
    };
    match ready_condition(node) {
        Some(c) => NodeReadyCondition {
            status: match c.status.as_str() {
                "True" => "True",
                "False" => "False",
                _ => "Unknown",
            }
            .into(),
            reason: c.reason.clone().filter(|r| !r.is_empty()).unwrap_or_else(|| format!("NodeReady{}", c.status)),
            message: c.message.clone().unwrap_or_default(),
        },
        None => NodeReadyCondition {
            status: "Unknown".into(),
            reason: NO_READY_CONDITION.into(),
            message: "the workload-cluster node reports no Ready condition yet".into(),
        },
    }
}

/// The pod's current [`names::NODE_READY_CONDITION`], if any.
pub fn current_condition(pod: &Pod) -> Option<&PodCondition> {
    pod.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == names::NODE_READY_CONDITION)
}

/// The strategic-merge patch of the pod's status that sets `desired`, or `None` when the pod
/// already has it (same status and reason; a changed message alone is not worth a write). The
/// transition time is `now` when the status changes, else the current one.
pub fn condition_patch(pod: &Pod, desired: &NodeReadyCondition, now: Timestamp) -> Option<Value> {
    let current = current_condition(pod);
    if let Some(c) = current
        && c.status == desired.status
        && c.reason.as_deref() == Some(desired.reason.as_str())
    {
        return None;
    }
    let transition = match current {
        Some(c) if c.status == desired.status => {
            c.last_transition_time.as_ref().map_or_else(|| now.to_string(), |t| t.0.to_string())
        }
        _ => now.to_string(),
    };
    Some(json!({ "status": { "conditions": [{
        "type": names::NODE_READY_CONDITION,
        "status": desired.status,
        "reason": desired.reason,
        "message": desired.message,
        "lastProbeTime": null,
        "lastTransitionTime": transition,
    }] } }))
}

/// The WC nodes the deleter removes: NotReady (or being deleted is left to whoever deletes it)
/// and without a node pod of the same name. Each rollout gives a node a new pod name, hence a
/// new WC node; the old node would otherwise stay NotReady forever. Sorted by name.
pub fn orphans<'a>(nodes: &'a [Node], pod_names: &BTreeSet<String>) -> Vec<&'a str> {
    let mut orphans: Vec<&str> = nodes
        .iter()
        .filter(|n| n.metadata.deletion_timestamp.is_none() && !is_ready(n))
        .filter_map(|n| n.metadata.name.as_deref())
        .filter(|name| !pod_names.contains(*name))
        .collect();
    orphans.sort_unstable();
    orphans
}

/// The role of a WC node: its pod's `app` label when it has a pod, else its name's prefix
/// (`master-…`, `worker-…`); `None` for a node that is neither.
pub fn role_of(name: &str, pod_roles: &BTreeMap<String, Role>) -> Option<Role> {
    pod_roles.get(name).copied().or_else(|| Role::parse(name.split('-').next().unwrap_or_default()))
}

/// The role of each node pod, by pod name (`app` label, else the service annotation).
pub fn pod_roles(pods: &[Pod]) -> BTreeMap<String, Role> {
    pods.iter()
        .filter_map(|p| {
            let name = p.metadata.name.clone()?;
            let role = p
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(names::keys::APP))
                .or_else(|| p.metadata.annotations.as_ref().and_then(|a| a.get(names::keys::SERVICE)))
                .and_then(|r| Role::parse(r))?;
            Some((name, role))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, ready: &str, deleting: bool) -> Node {
        let mut value = json!({
            "metadata": {"name": name, "creationTimestamp": "2026-03-01T11:00:00Z"},
            "status": {"conditions": [{"type": "Ready", "status": ready, "reason": "KubeletReady",
                                        "message": "kubelet is posting ready status",
                                        "lastTransitionTime": "2026-03-01T11:40:00Z"}]}
        });
        if deleting {
            value["metadata"]["deletionTimestamp"] = json!("2026-03-01T11:59:00Z");
        }
        serde_json::from_value(value).expect("node")
    }

    fn pod(name: &str, role: &str, condition: Option<(&str, &str)>) -> Pod {
        let conditions: Vec<Value> = condition
            .map(|(status, reason)| {
                json!({"type": names::NODE_READY_CONDITION, "status": status, "reason": reason,
                       "lastTransitionTime": "2026-03-01T10:00:00Z"})
            })
            .into_iter()
            .chain([json!({"type": "Ready", "status": "True"})])
            .collect();
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "q7m2x", "labels": {"app": role}},
            "status": {"conditions": conditions}
        }))
        .expect("pod")
    }

    fn now() -> Timestamp {
        "2026-03-01T12:00:00Z".parse().expect("time")
    }

    #[test]
    fn the_condition_mirrors_the_node() {
        let ready = node_ready_condition(Some(&node("worker-w1-a-b", "True", false)));
        assert_eq!((ready.status.as_str(), ready.reason.as_str()), ("True", "KubeletReady"));
        assert_eq!(node_ready_condition(Some(&node("worker-w1-a-b", "False", false))).status, "False");
        assert_eq!(node_ready_condition(Some(&node("worker-w1-a-b", "Bogus", false))).status, "Unknown");
        let deleting = node_ready_condition(Some(&node("worker-w1-a-b", "True", true)));
        assert_eq!((deleting.status.as_str(), deleting.reason.as_str()), ("False", NODE_DELETED));
        assert_eq!(node_ready_condition(None).reason, NODE_DELETED);
        let silent: Node = serde_json::from_value(json!({"metadata": {"name": "worker-w9-a-b"}})).expect("node");
        assert_eq!(node_ready_condition(Some(&silent)).status, "Unknown");
    }

    #[test]
    fn the_condition_is_written_only_when_it_changes() {
        let ready = node_ready_condition(Some(&node("worker-w1-a-b", "True", false)));
        // Missing: written, transition now.
        let patch = condition_patch(&pod("worker-w1-a-b", "worker", None), &ready, now()).expect("a write");
        let written = &patch["status"]["conditions"][0];
        assert_eq!(written["type"], names::NODE_READY_CONDITION);
        assert_eq!(
            (written["status"].as_str(), written["lastTransitionTime"].as_str()),
            (Some("True"), Some("2026-03-01T12:00:00Z"))
        );
        // Same status and reason: nothing to write.
        assert_eq!(
            condition_patch(&pod("worker-w1-a-b", "worker", Some(("True", "KubeletReady"))), &ready, now()),
            None
        );
        // Status flips: written with a new transition time.
        let not_ready = node_ready_condition(Some(&node("worker-w1-a-b", "False", false)));
        let patch = condition_patch(&pod("worker-w1-a-b", "worker", Some(("True", "KubeletReady"))), &not_ready, now())
            .expect("a write");
        assert_eq!(patch["status"]["conditions"][0]["lastTransitionTime"], "2026-03-01T12:00:00Z");
        // Reason alone changes: written, the transition time kept.
        let patch =
            condition_patch(&pod("worker-w1-a-b", "worker", Some(("True", "Other"))), &ready, now()).expect("a write");
        assert_eq!(patch["status"]["conditions"][0]["lastTransitionTime"], "2026-03-01T10:00:00Z");
    }

    #[test]
    fn orphans_are_notready_nodes_without_a_pod() {
        let nodes = [
            node("worker-w1-old-aaaaa", "False", false),
            node("worker-w1-new-bbbbb", "False", false),
            node("worker-w2-old-ccccc", "True", false),
            node("worker-w3-old-ddddd", "Unknown", true),
        ];
        let pods: BTreeSet<String> = ["worker-w1-new-bbbbb".to_string()].into();
        assert_eq!(orphans(&nodes, &pods), ["worker-w1-old-aaaaa"], "Ready, with a pod, or already deleting: kept");
    }
}

//! Rolling updates of the node Deployments (reference §9): which single Deployment to replace
//! next, if any.
//!
//! The rules of the original, kept: one Deployment per decision; nothing while any node is not
//! fully back; masters before workers; no worker while a workload-cluster master is not
//! schedulable (a worker drain then could not move its pods, PR #976); no update while the
//! workload cluster cannot be read. Fixed by design:
//! - [`is_deployment_modified`] also compares the pod-template digest
//!   ([`crate::names::keys::SPEC_HASH`]), so spec changes roll the nodes (§9.1, §14.5);
//! - a Deployment counts as available only when its status describes its current generation
//!   and shows all *desired* replicas ready, available and updated; the original compared the
//!   status counters with each other only, so a Deployment that had not started yet (all zero)
//!   or whose status was stale right after an update passed the gate;
//! - masters go first by role, not because `master-…` sorts before `worker-…` in API list
//!   order;
//! - a single unavailable node that itself needs the update is updated instead of blocking the
//!   cluster forever: a worker whose VM never registers never becomes Ready, and the original
//!   then never rolled anything again (§14.9);
//! - masters tainted `node-role.kubernetes.io/control-plane:NoSchedule` (today's key) are
//!   schedulable, like the legacy `node-role.kubernetes.io/master` key.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Node;

use crate::cluster::Role;
use crate::names::keys;

/// The taint keys that mark a master as a control-plane node, not as unschedulable.
pub const CONTROL_PLANE_TAINTS: [&str; 2] = ["node-role.kubernetes.io/master", "node-role.kubernetes.io/control-plane"];

/// Why nothing is updated now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WaitReason {
    /// The workload cluster's nodes could not be read.
    WorkloadClusterUnreachable,
    /// These Deployments are not fully available.
    NotAllAvailable(Vec<String>),
    /// Only workers need the update, and these workload-cluster masters are not schedulable.
    MastersUnschedulable(Vec<String>),
}

/// The rolling decision of one reconciliation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RollingDecision {
    /// Every Deployment matches its desired state.
    UpToDate,
    /// Replace this Deployment with its desired state.
    Update(String),
    /// Update nothing now.
    Wait(WaitReason),
}

/// Whether `current` must be replaced by `desired`: the release version, the operator version
/// or the pod-template digest differ, or one of them is missing on either side.
pub fn is_deployment_modified(current: &Deployment, desired: &Deployment) -> bool {
    let annotation = |d: &Deployment, key: &str| {
        d.metadata.annotations.as_ref().and_then(|a| a.get(key)).cloned().unwrap_or_default()
    };
    [keys::RELEASE_VERSION, keys::VERSION_BUNDLE_VERSION, keys::SPEC_HASH].iter().any(|key| {
        let (c, d) = (annotation(current, key), annotation(desired, key));
        c.is_empty() || d.is_empty() || c != d
    })
}

/// Whether a Deployment's status shows its current generation with every desired replica
/// ready, available and updated.
pub fn is_available(deployment: &Deployment) -> bool {
    let want = deployment.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    let Some(status) = deployment.status.as_ref() else { return false };
    let current_generation = match (deployment.metadata.generation, status.observed_generation) {
        (Some(generation), Some(observed)) => observed >= generation,
        (Some(_), None) => false,
        (None, _) => true,
    };
    current_generation
        && status.replicas == Some(want)
        && status.ready_replicas == Some(want)
        && status.available_replicas == Some(want)
        && status.updated_replicas == Some(want)
}

/// Whether a workload-cluster master node is unschedulable: cordoned, tainted `NoSchedule` by
/// anything but the control-plane role, or tainted `NoExecute`.
pub fn master_unschedulable(node: &Node) -> bool {
    let Some(spec) = node.spec.as_ref() else { return false };
    spec.unschedulable == Some(true)
        || spec.taints.iter().flatten().any(|t| {
            t.effect == "NoExecute" || (t.effect == "NoSchedule" && !CONTROL_PLANE_TAINTS.contains(&t.key.as_str()))
        })
}

/// Whether a workload-cluster Node is a master: labelled `role=master` (the kubelet labels of
/// kvm-operator's node configs), or carrying a control-plane role label.
pub fn is_master_node(node: &Node) -> bool {
    let labels = node.metadata.labels.as_ref();
    labels.and_then(|l| l.get("role")).is_some_and(|r| r == Role::Master.as_str())
        || CONTROL_PLANE_TAINTS.iter().any(|key| labels.is_some_and(|l| l.contains_key(*key)))
}

/// The masters among a workload cluster's Nodes, for [`next_update`].
pub fn master_nodes(nodes: &[Node]) -> Vec<Node> {
    nodes.iter().filter(|n| is_master_node(n)).cloned().collect()
}

/// What to do about the node Deployments of nodes that were removed from the spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScaleDown {
    /// No Deployment without a desired counterpart.
    Nothing,
    /// Delete this one (foreground: it goes once its pod went, after its drain).
    Delete(String),
    /// One is being deleted already: the next waits, so nodes leave one at a time.
    Wait(String),
}

/// The next step of scale-down: `current` are the cluster's node Deployments, `desired` its
/// desired ones. One node leaves at a time, in name order: a Deployment being deleted holds
/// the next, so at most one node is drained at once and the workloads keep room to move.
pub fn next_removal(current: &[Deployment], desired: &[Deployment]) -> ScaleDown {
    let wanted = |name: &str| desired.iter().any(|d| d.metadata.name.as_deref() == Some(name));
    let mut removed: Vec<&Deployment> = current.iter().filter(|c| !wanted(&name_of(c))).collect();
    removed.sort_by_key(|d| name_of(d));
    if let Some(going) = removed.iter().find(|d| d.metadata.deletion_timestamp.is_some()) {
        return ScaleDown::Wait(name_of(going));
    }
    removed.first().map_or(ScaleDown::Nothing, |d| ScaleDown::Delete(name_of(d)))
}

fn role_of(deployment: &Deployment) -> Role {
    deployment
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(keys::APP))
        .and_then(|r| Role::parse(r))
        .unwrap_or(Role::Worker)
}

fn name_of(deployment: &Deployment) -> String {
    deployment.metadata.name.clone().unwrap_or_default()
}

/// The next update: `current` and `desired` are the cluster's node Deployments; `wc_masters`
/// the workload cluster's master Nodes, `None` when they could not be read.
pub fn next_update(current: &[Deployment], desired: &[Deployment], wc_masters: Option<&[Node]>) -> RollingDecision {
    let desired_of = |name: &str| desired.iter().find(|d| d.metadata.name.as_deref() == Some(name));
    let mut modified: Vec<&Deployment> =
        current.iter().filter(|c| desired_of(&name_of(c)).is_some_and(|d| is_deployment_modified(c, d))).collect();
    if modified.is_empty() {
        return RollingDecision::UpToDate;
    }
    let Some(wc_masters) = wc_masters else {
        return RollingDecision::Wait(WaitReason::WorkloadClusterUnreachable);
    };
    modified.sort_by_key(|d| (role_of(d), name_of(d)));
    let unschedulable: Vec<String> =
        wc_masters.iter().filter(|n| master_unschedulable(n)).filter_map(|n| n.metadata.name.clone()).collect();
    let may_update = |d: &Deployment| role_of(d) == Role::Master || unschedulable.is_empty();

    let mut unavailable: Vec<String> = current.iter().filter(|d| !is_available(d)).map(name_of).collect();
    unavailable.sort();
    if !unavailable.is_empty() {
        // The one broken node that needs the update anyway: replacing it cannot make things worse.
        if let [only] = unavailable.as_slice()
            && let Some(broken) = modified.iter().find(|d| &name_of(d) == only)
            && may_update(broken)
        {
            return RollingDecision::Update(only.clone());
        }
        return RollingDecision::Wait(WaitReason::NotAllAvailable(unavailable));
    }
    match modified.into_iter().find(|d| may_update(d)) {
        Some(next) => RollingDecision::Update(name_of(next)),
        None => RollingDecision::Wait(WaitReason::MastersUnschedulable(unschedulable)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::fixtures;
    use crate::deployment::deployment;
    use serde_json::json;

    /// The desired Deployments and a current copy of each, available, for `release`.
    fn world(release: &str) -> (Vec<Deployment>, Vec<Deployment>) {
        let mut cluster = fixtures::cluster();
        let desired: Vec<Deployment> = cluster.nodes.iter().map(|n| deployment(&cluster, n)).collect();
        cluster.release_version = release.into();
        let current = cluster.nodes.iter().map(|n| available(deployment(&cluster, n))).collect();
        (current, desired)
    }

    fn available(mut d: Deployment) -> Deployment {
        d.metadata.generation = Some(3);
        d.status = Some(
            serde_json::from_value(json!({
                "observedGeneration": 3, "replicas": 1, "readyReplicas": 1, "availableReplicas": 1, "updatedReplicas": 1
            }))
            .expect("status"),
        );
        d
    }

    fn master_node(name: &str, taint: Option<(&str, &str)>, cordoned: bool) -> Node {
        let taints: Vec<_> = taint.iter().map(|(k, e)| json!({"key": k, "effect": e})).collect();
        serde_json::from_value(
            json!({"metadata": {"name": name}, "spec": {"unschedulable": cordoned, "taints": taints}}),
        )
        .expect("node")
    }

    fn set(current: &mut [Deployment], name: &str, change: impl Fn(&mut Deployment)) {
        change(current.iter_mut().find(|d| d.metadata.name.as_deref() == Some(name)).expect("deployment"));
    }

    #[test]
    fn masters_first_one_at_a_time_then_workers() {
        let (mut current, desired) = world("20.0.0");
        let masters =
            [master_node("master-ma1-x", Some(("node-role.kubernetes.io/control-plane", "NoSchedule")), false)];
        let mut order = Vec::new();
        // Shuffle the list order: masters still come first.
        current.reverse();
        loop {
            match next_update(&current, &desired, Some(&masters)) {
                RollingDecision::Update(name) => {
                    let replacement =
                        desired.iter().find(|d| d.metadata.name.as_deref() == Some(&name)).expect("desired");
                    set(&mut current, &name, |d| *d = available(replacement.clone()));
                    order.push(name);
                }
                RollingDecision::UpToDate => break,
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(order, ["master-ma1", "master-ma2", "master-ma3", "worker-wk1", "worker-wk2"]);
    }

    #[test]
    fn nothing_moves_while_a_node_is_not_back() {
        let (mut current, desired) = world("20.0.0");
        let masters = [master_node("master-ma1-x", None, false)];
        // master-ma1 was just updated: its status still describes the previous generation.
        let replacement = desired[0].clone();
        set(&mut current, "master-ma1", |d| {
            *d = available(replacement.clone());
            d.metadata.generation = Some(4);
        });
        assert_eq!(
            next_update(&current, &desired, Some(&masters)),
            RollingDecision::Wait(WaitReason::NotAllAvailable(vec!["master-ma1".into()])),
            "the stale status of master-ma1 must hold master-ma2"
        );
        set(&mut current, "master-ma1", |d| d.metadata.generation = Some(3));
        assert_eq!(next_update(&current, &desired, Some(&masters)), RollingDecision::Update("master-ma2".into()));
        let (mut current, _) = world("20.1.0");
        set(&mut current, "worker-wk2", |d| d.status = None);
        assert_eq!(next_update(&current, &desired, Some(&masters)), RollingDecision::UpToDate, "nothing to update");
        assert_eq!(next_update(&current, &desired, None), RollingDecision::UpToDate);
    }

    #[test]
    fn a_single_broken_node_that_needs_the_update_gets_it() {
        let (mut current, desired) = world("20.0.0");
        let masters = [master_node("master-ma1-x", None, false)];
        // wk2's VM never registered: its pod is never Ready. The original waited forever.
        set(&mut current, "worker-wk2", |d| {
            if let Some(s) = d.status.as_mut() {
                s.ready_replicas = Some(0);
                s.available_replicas = Some(0);
            }
        });
        assert_eq!(next_update(&current, &desired, Some(&masters)), RollingDecision::Update("worker-wk2".into()));
        // Two broken nodes: hold.
        set(&mut current, "worker-wk1", |d| d.status = None);
        assert!(
            matches!(next_update(&current, &desired, Some(&masters)), RollingDecision::Wait(WaitReason::NotAllAvailable(v)) if v.len() == 2)
        );
    }

    #[test]
    fn workers_wait_for_schedulable_masters_and_for_the_workload_cluster() {
        let (mut current, desired) = world("20.0.0");
        for name in ["master-ma1", "master-ma2", "master-ma3"] {
            let replacement = desired.iter().find(|d| d.metadata.name.as_deref() == Some(name)).expect("desired");
            set(&mut current, name, |d| *d = available(replacement.clone()));
        }
        for (node, held) in [
            (master_node("master-ma2-y", None, true), true),
            (master_node("master-ma2-y", Some(("node.kubernetes.io/not-ready", "NoExecute")), false), true),
            (master_node("master-ma2-y", Some(("example.com/maintenance", "NoSchedule")), false), true),
            (master_node("master-ma2-y", Some(("node-role.kubernetes.io/master", "NoSchedule")), false), false),
            (master_node("master-ma2-y", Some(("example.com/soft", "PreferNoSchedule")), false), false),
        ] {
            let decision = next_update(&current, &desired, Some(std::slice::from_ref(&node)));
            if held {
                assert_eq!(
                    decision,
                    RollingDecision::Wait(WaitReason::MastersUnschedulable(vec!["master-ma2-y".into()]))
                );
            } else {
                assert_eq!(decision, RollingDecision::Update("worker-wk1".into()));
            }
        }
        assert_eq!(
            next_update(&current, &desired, None),
            RollingDecision::Wait(WaitReason::WorkloadClusterUnreachable)
        );
    }

    #[test]
    fn masters_are_found_by_their_role_label() {
        let node = |labels: serde_json::Value| -> Node {
            serde_json::from_value(json!({"metadata": {"name": "n", "labels": labels}})).expect("node")
        };
        let nodes = [
            node(json!({"role": "master"})),
            node(json!({"node-role.kubernetes.io/control-plane": ""})),
            node(json!({"role": "worker"})),
            node(json!({})),
        ];
        let found: Vec<bool> = nodes.iter().map(is_master_node).collect();
        assert_eq!(found, [true, true, false, false]);
        assert_eq!(master_nodes(&nodes).len(), 2);
    }

    #[test]
    fn removed_nodes_leave_one_at_a_time() {
        let (current, mut desired) = world("20.1.0");
        assert_eq!(next_removal(&current, &desired), ScaleDown::Nothing);
        // wk1 and wk2 are removed from the spec: wk1 goes first, wk2 waits until it is gone.
        desired.retain(|d| role_of(d) == Role::Master);
        assert_eq!(next_removal(&current, &desired), ScaleDown::Delete("worker-wk1".into()));
        let mut going = current.clone();
        set(&mut going, "worker-wk1", |d| {
            d.metadata.deletion_timestamp =
                Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::UNIX_EPOCH))
        });
        assert_eq!(next_removal(&going, &desired), ScaleDown::Wait("worker-wk1".into()));
        going.retain(|d| d.metadata.name.as_deref() != Some("worker-wk1"));
        assert_eq!(next_removal(&going, &desired), ScaleDown::Delete("worker-wk2".into()));
        // Removal is not rolling: it does not touch what is desired.
        assert_eq!(next_update(&going, &desired, Some(&[])), RollingDecision::UpToDate);
    }

    #[test]
    fn modified_means_a_version_or_the_spec_changed() {
        let (current, desired) = world("20.1.0");
        assert!(!is_deployment_modified(&current[0], &desired[0]));
        let mut spec_changed = current[0].clone();
        spec_changed.metadata.annotations.as_mut().map(|a| a.insert(keys::SPEC_HASH.into(), "0".into()));
        assert!(is_deployment_modified(&spec_changed, &desired[0]));
        let mut legacy = current[0].clone();
        legacy.metadata.annotations.as_mut().map(|a| a.remove(keys::SPEC_HASH));
        assert!(is_deployment_modified(&legacy, &desired[0]), "a Deployment of the Go operator rolls once");
        let mut operator = current[0].clone();
        operator.metadata.annotations.as_mut().map(|a| a.insert(keys::VERSION_BUNDLE_VERSION.into(), "3.18.6".into()));
        assert!(is_deployment_modified(&operator, &desired[0]));
        // Deployments without a desired counterpart are left to scale-down.
        let (mut current, desired) = world("20.1.0");
        let mut extra = current[4].clone();
        extra.metadata.name = Some("worker-old".into());
        extra.metadata.annotations = None;
        current.push(extra);
        assert_eq!(next_update(&current, &desired, Some(&[])), RollingDecision::UpToDate);
    }
}

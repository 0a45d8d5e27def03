//! The ReplicaSet controller (`pkg/controller/replicaset`).
//!
//! * Active pods (not terminal, not being deleted) controlled by the ReplicaSet are counted
//!   against `spec.replicas`; missing ones are created from the template
//!   (`generateName: <rs>-`, the template's labels, annotations and finalizers, a controller
//!   owner reference), surplus ones deleted in `ActivePodsWithRanks` order: unscheduled
//!   before scheduled, Pending before Running, unready before ready, pods on crowded nodes
//!   first, recently ready before long ready, newer before older.
//! * A ReplicaSet being deleted creates and deletes nothing.
//! * Status: `replicas`, `fullyLabeledReplicas`, `readyReplicas`, `availableReplicas` (Ready
//!   for `minReadySeconds`) and `observedGeneration`; written only when it changes. A pod
//!   that will become available later brings the ReplicaSet back then.
//!
//! Pods that match the selector without a controller are not adopted.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetStatus};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use super::runtime::{Runtime, Work};
use crate::api::Part;
use crate::api::eviction::{is_pod_ready, pod_phase};
use crate::store::ObjKey;

const MANAGER: &str = "kube-controller-manager";
/// At most this many pods are created or deleted per sync (`BurstReplicas`).
const BURST: usize = 500;

/// When the Ready condition last turned True.
fn ready_since(pod: &Pod) -> Option<jiff::Timestamp> {
    let conditions = pod.status.as_ref()?.conditions.as_ref()?;
    let ready = conditions.iter().find(|c| c.type_ == "Ready" && c.status == "True")?;
    Some(ready.last_transition_time.as_ref().map(|t| t.0).unwrap_or(jiff::Timestamp::UNIX_EPOCH))
}

/// `podutil.IsPodAvailable`: Ready for at least `min_ready_seconds`; otherwise, when it will be.
pub(super) fn availability(pod: &Pod, min_ready_seconds: i32, now: jiff::Timestamp) -> (bool, Option<jiff::Timestamp>) {
    if !is_pod_ready(pod) {
        return (false, None);
    }
    if min_ready_seconds <= 0 {
        return (true, None);
    }
    let since = ready_since(pod).unwrap_or(now);
    let at = since.checked_add(jiff::SignedDuration::from_secs(i64::from(min_ready_seconds))).unwrap_or(since);
    if at <= now { (true, None) } else { (false, Some(at)) }
}

/// Whether a pod still counts for its ReplicaSet (`controller.FilterActivePods`).
pub(super) fn is_active(pod: &Pod) -> bool {
    !matches!(pod_phase(pod), "Succeeded" | "Failed") && pod.metadata.deletion_timestamp.is_none()
}

fn phase_rank(pod: &Pod) -> u8 {
    match pod_phase(pod) {
        "Pending" => 0,
        "Unknown" => 1,
        "Running" => 2,
        _ => 3,
    }
}

/// `ActivePodsWithRanks.Less`: the pods to delete first come first. `crowding` is the number of
/// this ReplicaSet's active pods on the pod's node.
fn deletion_order(a: &Pod, b: &Pod, crowding: &BTreeMap<String, usize>) -> Ordering {
    let node = |p: &Pod| p.spec.as_ref().and_then(|s| s.node_name.clone()).unwrap_or_default();
    let (na, nb) = (node(a), node(b));
    // Unassigned < assigned.
    (!na.is_empty())
        .cmp(&!nb.is_empty())
        // Pending < Unknown < Running.
        .then(phase_rank(a).cmp(&phase_rank(b)))
        // Not ready < ready.
        .then(is_pod_ready(a).cmp(&is_pod_ready(b)))
        // More pods of this ReplicaSet on the same node go first.
        .then_with(|| crowding.get(&nb).copied().unwrap_or(0).cmp(&crowding.get(&na).copied().unwrap_or(0)))
        // Ready for less time goes first.
        .then_with(|| match (ready_since(a), ready_since(b)) {
            (Some(x), Some(y)) => y.cmp(&x),
            _ => Ordering::Equal,
        })
        // Newer goes first.
        .then_with(|| {
            let created = |p: &Pod| p.metadata.creation_timestamp.as_ref().map(|t| t.0);
            created(b).cmp(&created(a))
        })
}

/// The pod a ReplicaSet creates (`controller.GetPodFromTemplate`).
fn pod_from_template(rs: &ReplicaSet) -> Pod {
    let template = rs.spec.as_ref().and_then(|s| s.template.clone()).unwrap_or_default();
    let meta = template.metadata.unwrap_or_default();
    let name = rs.metadata.name.clone().unwrap_or_default();
    Pod {
        metadata: ObjectMeta {
            generate_name: Some(format!("{name}-")),
            namespace: rs.metadata.namespace.clone(),
            labels: meta.labels,
            annotations: meta.annotations,
            finalizers: meta.finalizers,
            owner_references: Some(vec![OwnerReference {
                api_version: "apps/v1".into(),
                kind: "ReplicaSet".into(),
                name,
                uid: rs.metadata.uid.clone().unwrap_or_default(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..ObjectMeta::default()
        },
        spec: template.spec,
        status: None,
    }
}

/// `calculateStatus` of the ReplicaSet controller, and when a pod becomes available.
fn status_of(rs: &ReplicaSet, pods: &[Arc<Pod>], now: jiff::Timestamp) -> (ReplicaSetStatus, Option<jiff::Timestamp>) {
    let min_ready = rs.spec.as_ref().and_then(|s| s.min_ready_seconds).unwrap_or(0);
    let template_labels = rs
        .spec
        .as_ref()
        .and_then(|s| s.template.as_ref())
        .and_then(|t| t.metadata.as_ref())
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    let count = |n: usize| i32::try_from(n).unwrap_or(i32::MAX);
    let mut next = None;
    let mut available = 0;
    for pod in pods {
        let (yes, at) = availability(pod, min_ready, now);
        if yes {
            available += 1;
        }
        if let Some(at) = at {
            next = Some(next.map_or(at, |n: jiff::Timestamp| n.min(at)));
        }
    }
    let fully_labeled = pods
        .iter()
        .filter(|p| {
            let labels = p.metadata.labels.clone().unwrap_or_default();
            template_labels.iter().all(|(k, v)| labels.get(k) == Some(v))
        })
        .count();
    let old = rs.status.clone().unwrap_or_default();
    let status = ReplicaSetStatus {
        replicas: count(pods.len()),
        fully_labeled_replicas: Some(count(fully_labeled)),
        ready_replicas: Some(count(pods.iter().filter(|p| is_pod_ready(p)).count())),
        available_replicas: Some(available),
        observed_generation: rs.metadata.generation,
        conditions: old.conditions,
        terminating_replicas: None,
    };
    (status, next)
}

impl Runtime {
    /// Converge one ReplicaSet.
    pub(super) fn sync_replicaset(&mut self, key: &ObjKey) {
        let Some(rs) = self.cache.replicasets.get(key).cloned() else { return };
        let Some(uid) = rs.metadata.uid.clone() else { return };
        let pods: Vec<Arc<Pod>> = self
            .cache
            .pods_by_controller
            .get(&uid)
            .filter_map(|k| self.cache.pods.get(k).cloned())
            .filter(|p| is_active(p))
            .collect();
        if rs.metadata.deletion_timestamp.is_none() && !self.manage_replicas(key, &rs, &pods) {
            return;
        }
        let (status, next) = status_of(&rs, &pods, self.api.clock.now());
        if let Some(at) = next {
            self.at(at, Work::ReplicaSet(key.clone()));
        }
        if rs.status.as_ref() == Some(&status) {
            return;
        }
        let def = self.defs.replicasets.clone();
        let result = self
            .update::<ReplicaSet>(&def, key, Some(&uid), Part::Status, MANAGER, |r| r.status = Some(status.clone()));
        if let Err(e) = result
            && e.code != 404
        {
            self.retry(Work::ReplicaSet(key.clone()), &e);
        }
    }

    /// Create or delete pods towards `spec.replicas`; false if a write failed.
    fn manage_replicas(&mut self, key: &ObjKey, rs: &ReplicaSet, pods: &[Arc<Pod>]) -> bool {
        let wanted = usize::try_from(rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)).unwrap_or(0);
        let pods_def = self.defs.pods.clone();
        if pods.len() < wanted {
            let pod = pod_from_template(rs);
            for _ in 0..(wanted - pods.len()).min(BURST) {
                if let Err(e) = self.create(&pods_def, &key.0, &pod, MANAGER) {
                    // A terminating namespace refuses creates; the namespace controller wins.
                    self.retry(Work::ReplicaSet(key.clone()), &e);
                    return false;
                }
            }
        } else if pods.len() > wanted {
            let mut crowding: BTreeMap<String, usize> = BTreeMap::new();
            for pod in pods {
                if let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.clone()) {
                    *crowding.entry(node).or_default() += 1;
                }
            }
            let mut order: Vec<&Arc<Pod>> = pods.iter().collect();
            order.sort_by(|a, b| deletion_order(a, b, &crowding));
            for pod in order.into_iter().take((pods.len() - wanted).min(BURST)) {
                let pod_key = (key.0.clone(), pod.metadata.name.clone().unwrap_or_default());
                if let Err(e) = self.delete(&pods_def, &pod_key, pod.metadata.uid.as_deref(), None) {
                    self.retry(Work::ReplicaSet(key.clone()), &e);
                    return false;
                }
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn pod(v: Value) -> Pod {
        serde_json::from_value(v).unwrap()
    }

    fn ts(s: i64) -> jiff::Timestamp {
        jiff::Timestamp::from_second(s).unwrap()
    }

    #[test]
    fn deletion_prefers_unscheduled_pending_and_unready_pods() {
        let ready = |name: &str, since: &str| {
            pod(
                json!({"metadata": {"name": name, "creationTimestamp": "2024-01-01T00:00:00Z"}, "spec": {"containers": [], "nodeName": "n1"},
                "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": since}]}}),
            )
        };
        let unscheduled = pod(json!({"metadata": {"name": "u"}, "spec": {"containers": []}}));
        let pending = pod(
            json!({"metadata": {"name": "p"}, "spec": {"containers": [], "nodeName": "n1"}, "status": {"phase": "Pending"}}),
        );
        let unready = pod(
            json!({"metadata": {"name": "r"}, "spec": {"containers": [], "nodeName": "n1"}, "status": {"phase": "Running"}}),
        );
        let old = ready("old", "2024-01-01T00:00:00Z");
        let young = ready("young", "2024-01-02T00:00:00Z");
        let mut pods = [&old, &young, &unready, &pending, &unscheduled];
        let crowding = BTreeMap::new();
        pods.sort_by(|a, b| deletion_order(a, b, &crowding));
        let names: Vec<_> = pods.iter().map(|p| p.metadata.name.as_deref().unwrap()).collect();
        assert_eq!(names, ["u", "p", "r", "young", "old"]);
    }

    #[test]
    fn availability_waits_for_min_ready_seconds() {
        let p = pod(
            json!({"metadata": {"name": "a"}, "status": {"conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "1970-01-01T00:01:40Z"}]}}),
        );
        assert_eq!(availability(&p, 0, ts(100)), (true, None));
        assert_eq!(availability(&p, 10, ts(105)), (false, Some(ts(110))));
        assert_eq!(availability(&p, 10, ts(110)), (true, None));
    }

    #[test]
    fn pods_come_from_the_template_with_a_controller_reference() {
        let rs: ReplicaSet = serde_json::from_value(json!({
            "metadata": {"name": "web-abc", "namespace": "ns", "uid": "u1"},
            "spec": {"selector": {}, "template": {"metadata": {"labels": {"app": "web"}, "finalizers": ["x/y"]}, "spec": {"containers": [{"name": "c"}]}}},
        }))
        .unwrap();
        let p = pod_from_template(&rs);
        assert_eq!(p.metadata.generate_name.as_deref(), Some("web-abc-"));
        assert_eq!(p.metadata.finalizers, Some(vec!["x/y".to_string()]));
        let owner = &p.metadata.owner_references.unwrap()[0];
        assert_eq!((owner.kind.as_str(), owner.uid.as_str(), owner.controller), ("ReplicaSet", "u1", Some(true)));
    }
}

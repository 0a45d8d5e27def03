//! What the drainer's pod finalizer does next for a node pod that is being deleted (reference
//! §8), as a pure function of what it observes, and the DrainerConfig it asks for.
//!
//! The original held the pod until node-operator said `Drained` or `Timeout`, or until no
//! container ran. It got stuck when the KVMConfig was gone (§14.10: the drainer errored
//! forever), when pods lacked annotations (PR #1151), and its effective window was whatever
//! the VM's own shutdown deferral left (§8.3). Here every path ends:
//!
//! - the cluster being deleted, or its KVMConfig gone: release at once (no draining during
//!   cluster deletion, PR #1103);
//! - the pod already drained: release. The operator marks every pod it lets go as drained
//!   (`endpoint.kvm.giantswarm.io/drained: True`: the drain phase is over, however it ended),
//!   so a delete path that runs again ends here, quietly;
//! - the DrainerConfig says `Drained` or `Timeout`: finish (mark the pod drained, delete the
//!   DrainerConfig, release);
//! - the DrainerConfig is older than its timeout plus [`OVERDUE_SLACK`] without an answer (the
//!   drain executor is not running, say): release, so no pod is held forever;
//! - otherwise ask for a drain (no DrainerConfig yet) or wait for it.
//!
//! The drain's timeout is the pod's grace period ([`drain_timeout`]; 600 s for node pods, the
//! window the VM's shutdown is given). One departure: the original also finished when no
//! container of the pod ran any more, which made its effective window about 2 minutes (§8.3),
//! so nodes with slow evictions went undrained; here the drain's own timeout ends it.
//!
//! Whether the workload cluster can be reached and still has the node is checked by the
//! operator before it asks (I/O); an unreachable cluster or a missing node releases the pod
//! with an event saying so.

use std::time::Duration;

use apis::drainer::{DrainerConfig, DrainerConfigStatus, TIMEOUT_ANNOTATION};
use serde_json::json;

/// What the operator knows of the pod's cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClusterState {
    /// The KVMConfig exists and is not being deleted.
    Running,
    /// The KVMConfig is being deleted.
    Deleting,
    /// No KVMConfig has the pod's cluster id.
    Missing,
}

/// Why a pod is let go without (further) draining.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Release {
    /// The cluster is being deleted: its nodes go with it, no draining.
    ClusterDeleting,
    /// No KVMConfig names the cluster any more.
    ClusterMissing,
    /// The pod is already drained (annotation `endpoint.kvm.giantswarm.io/drained`).
    AlreadyDrained,
    /// The drain got no answer within its timeout plus [`OVERDUE_SLACK`].
    DrainOverdue,
}

impl Release {
    /// A PascalCase reason for events and metrics.
    pub fn reason(self) -> &'static str {
        match self {
            Release::ClusterDeleting => "DrainSkippedClusterDeleting",
            Release::ClusterMissing => "DrainSkippedClusterMissing",
            Release::AlreadyDrained => "AlreadyDrained",
            Release::DrainOverdue => "DrainOverdue",
        }
    }
}

/// The next step for a node pod being deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Let the pod go (deleting any DrainerConfig left).
    Release(Release),
    /// The drain ended: `timed_out` if it ended by its timeout. Mark the pod drained, delete
    /// the DrainerConfig, let the pod go.
    Finish {
        /// Whether the drain ended by its timeout.
        timed_out: bool,
    },
    /// No DrainerConfig yet: check the workload cluster and ask for a drain.
    Request,
    /// A drain is in progress: keep the pod.
    Wait,
}

/// What is observed of one node pod being deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Observed<'a> {
    /// The pod's cluster.
    pub cluster: ClusterState,
    /// The pod carries `endpoint.kvm.giantswarm.io/drained: true`.
    pub drained: bool,
    /// The DrainerConfig of the pod, if it exists: its status.
    pub drainer_config: Option<&'a DrainerConfigStatus>,
    /// The DrainerConfig exists for longer than its timeout plus [`OVERDUE_SLACK`]
    /// ([`overdue`]).
    pub overdue: bool,
}

/// The next step (see the module docs for the order of the rules).
pub fn step(observed: &Observed<'_>) -> Step {
    // First, so that a delete path run again (the finalizer's removal lost a race) ends quietly.
    if observed.drained {
        return Step::Release(Release::AlreadyDrained);
    }
    match observed.cluster {
        ClusterState::Deleting => return Step::Release(Release::ClusterDeleting),
        ClusterState::Missing => return Step::Release(Release::ClusterMissing),
        ClusterState::Running => {}
    }
    if let Some(status) = observed.drainer_config
        && (status.is_drained() || status.timed_out())
    {
        return Step::Finish { timed_out: !status.is_drained() };
    }
    if observed.overdue {
        return Step::Release(Release::DrainOverdue);
    }
    if observed.drainer_config.is_some() { Step::Wait } else { Step::Request }
}

/// The shortest drain timeout asked for: a drain shorter than this cannot evict much.
pub const MIN_DRAIN_TIMEOUT: Duration = Duration::from_secs(30);
/// The drain timeout of a pod without a grace period: the node pods' 600 s.
pub const DEFAULT_DRAIN_TIMEOUT: Duration = Duration::from_secs(600);
/// How long past its timeout a drain that got no answer still holds the pod.
pub const OVERDUE_SLACK: Duration = Duration::from_secs(60);

/// The timeout of the drain of `pod`'s node: its grace period, at least [`MIN_DRAIN_TIMEOUT`].
pub fn drain_timeout(pod: &k8s_openapi::api::core::v1::Pod) -> Duration {
    let grace = pod.spec.as_ref().and_then(|s| s.termination_grace_period_seconds);
    grace.map_or(DEFAULT_DRAIN_TIMEOUT, |g| Duration::from_secs(g.max(0).unsigned_abs())).max(MIN_DRAIN_TIMEOUT)
}

/// Whether a drain asked for at `requested` with `timeout` is overdue at `now`.
pub fn overdue(requested: jiff::Timestamp, timeout: Duration, now: jiff::Timestamp) -> bool {
    let age = Duration::try_from(now.duration_since(requested)).unwrap_or_default();
    age > timeout + OVERDUE_SLACK
}

/// What a DrainerConfig for a node pod names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DrainRequest<'a> {
    /// The pod (and WC node) name: the DrainerConfig's name too.
    pub node: &'a str,
    /// The namespace of the cluster's credentials Secrets: the executor finds the workload
    /// cluster's kubeconfig there.
    pub namespace: &'a str,
    /// The cluster id.
    pub cluster_id: &'a str,
    /// The workload cluster's API host.
    pub api_endpoint: &'a str,
    /// The operator's version: the executor of that version acts on it.
    pub operator_version: &'a str,
    /// How long the drain may take ([`drain_timeout`]).
    pub timeout: Duration,
}

/// The DrainerConfig `<pod name>` asking the drain executor of this operator version to drain
/// the WC node of the same name, with its timeout.
pub fn drainer_config(request: &DrainRequest<'_>) -> DrainerConfig {
    let timeout = request.timeout.max(MIN_DRAIN_TIMEOUT).as_secs();
    serde_json::from_value(json!({
        "apiVersion": "core.giantswarm.io/v1alpha1",
        "kind": "DrainerConfig",
        "metadata": {
            "name": request.node,
            "namespace": request.namespace,
            "labels": {
                apis::labels::CLUSTER: request.cluster_id,
                apis::labels::MANAGED_BY: crate::names::OPERATOR,
                apis::labels::KVM_OPERATOR_VERSION: request.operator_version,
            },
            "annotations": { TIMEOUT_ANNOTATION: format!("{timeout}s") },
        },
        "spec": {
            "guest": {
                "cluster": { "id": request.cluster_id, "api": { "endpoint": request.api_endpoint } },
                "node": { "name": request.node },
            },
            "versionBundle": { "version": request.operator_version },
        },
    }))
    .expect("the DrainerConfig JSON has the DrainerConfig shape")
}

#[cfg(test)]
mod tests {
    use super::*;
    use apis::drainer::{CONDITION_DRAINED, CONDITION_TIMEOUT, DrainerConfigStatusCondition};
    use jiff::Timestamp;

    fn status(conditions: &[&str]) -> DrainerConfigStatus {
        let now: Timestamp = "2026-03-01T12:00:00Z".parse().expect("time");
        DrainerConfigStatus {
            conditions: conditions.iter().map(|c| DrainerConfigStatusCondition::holds(c, now)).collect(),
            ..Default::default()
        }
    }

    fn observed(dc: Option<&DrainerConfigStatus>) -> Observed<'_> {
        Observed { cluster: ClusterState::Running, drained: false, drainer_config: dc, overdue: false }
    }

    #[test]
    fn a_pod_is_held_until_its_node_is_drained() {
        assert_eq!(step(&observed(None)), Step::Request);
        let draining = status(&[]);
        assert_eq!(step(&observed(Some(&draining))), Step::Wait);
        let drained = status(&[CONDITION_DRAINED]);
        assert_eq!(step(&observed(Some(&drained))), Step::Finish { timed_out: false });
        let timed_out = status(&[CONDITION_TIMEOUT]);
        assert_eq!(step(&observed(Some(&timed_out))), Step::Finish { timed_out: true });
    }

    #[test]
    fn no_draining_during_cluster_deletion_or_without_a_cluster() {
        let draining = status(&[]);
        for (cluster, release) in
            [(ClusterState::Deleting, Release::ClusterDeleting), (ClusterState::Missing, Release::ClusterMissing)]
        {
            let o = Observed { cluster, ..observed(Some(&draining)) };
            assert_eq!(step(&o), Step::Release(release));
        }
        assert_eq!(step(&Observed { drained: true, ..observed(None) }), Step::Release(Release::AlreadyDrained));
    }

    #[test]
    fn never_held_past_the_drains_timeout() {
        let draining = status(&[]);
        let late = Observed { overdue: true, ..observed(Some(&draining)) };
        assert_eq!(step(&late), Step::Release(Release::DrainOverdue));
        // A drain that ended still finishes properly, late or not.
        let drained = status(&[CONDITION_DRAINED]);
        assert_eq!(step(&Observed { overdue: true, ..observed(Some(&drained)) }), Step::Finish { timed_out: false });
        let t = |s: &str| -> Timestamp { s.parse().expect("time") };
        let timeout = Duration::from_secs(600);
        assert!(!overdue(t("2026-03-01T12:00:00Z"), timeout, t("2026-03-01T12:11:00Z")));
        assert!(overdue(t("2026-03-01T12:00:00Z"), timeout, t("2026-03-01T12:11:01Z")));
    }

    #[test]
    fn the_timeout_is_the_pods_grace_period() {
        let pod = |grace: Option<i64>| -> k8s_openapi::api::core::v1::Pod {
            serde_json::from_value(json!({"spec": {"containers": [], "terminationGracePeriodSeconds": grace}}))
                .expect("pod")
        };
        assert_eq!(drain_timeout(&pod(Some(600))), Duration::from_secs(600));
        assert_eq!(drain_timeout(&pod(None)), DEFAULT_DRAIN_TIMEOUT);
        assert_eq!(drain_timeout(&pod(Some(1))), MIN_DRAIN_TIMEOUT);
    }

    #[test]
    fn the_drainer_config_names_the_node_and_this_version() {
        let dc = drainer_config(&DrainRequest {
            node: "worker-w1-5d8f-abcde",
            namespace: "org-acme",
            cluster_id: "q7m2x",
            api_endpoint: "api.q7m2x.example.com",
            operator_version: "4.0.0",
            timeout: Duration::from_secs(7),
        });
        assert_eq!(dc.metadata.name.as_deref(), Some("worker-w1-5d8f-abcde"));
        assert_eq!(dc.metadata.namespace.as_deref(), Some("org-acme"));
        let labels = dc.metadata.labels.clone().unwrap_or_default();
        assert_eq!(labels.get(apis::labels::KVM_OPERATOR_VERSION).map(String::as_str), Some("4.0.0"));
        assert_eq!(dc.spec.guest.node.name, "worker-w1-5d8f-abcde");
        assert_eq!(
            (dc.spec.guest.cluster.id.as_str(), dc.spec.guest.cluster.api.endpoint.as_str()),
            ("q7m2x", "api.q7m2x.example.com")
        );
        let annotations = dc.metadata.annotations.clone().unwrap_or_default();
        assert_eq!(annotations.get(TIMEOUT_ANNOTATION).map(String::as_str), Some("30s"), "at least the minimum");
    }
}

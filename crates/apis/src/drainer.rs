//! The `DrainerConfig` custom resource (`core.giantswarm.io/v1alpha1`, namespaced).
//!
//! A DrainerConfig asks node-operator to drain one workload-cluster node: aws-operator's drainer
//! controllers create one per instance that an autoscaling group is about to terminate (named
//! after the node, e.g. `ip-10-1-1-37.eu-central-1.compute.internal`, in the cluster's
//! namespace), wait for node-operator to set the `Drained` or `Timeout` condition, complete the
//! lifecycle hook and delete the object. The JSON shape follows `giantswarm/apiextensions`
//! (`pkg/apis/core/v1alpha1/drainer_types.go`).

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::go::null_as_default;

/// The condition type node-operator sets when the node is drained.
pub const CONDITION_DRAINED: &str = "Drained";
/// The condition type node-operator sets when draining took too long; the node goes anyway.
pub const CONDITION_TIMEOUT: &str = "Timeout";
/// The `status` of a condition that holds.
pub const STATUS_TRUE: &str = "True";

/// The node to drain and how to reach its cluster.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[kube(
    group = "core.giantswarm.io",
    version = "v1alpha1",
    kind = "DrainerConfig",
    plural = "drainerconfigs",
    namespaced,
    status = "DrainerConfigStatus",
    category = "giantswarm",
    doc = "A request to drain one node of a workload cluster before its instance goes.",
    printcolumn = r#"{"name":"Cluster","type":"string","jsonPath":".spec.guest.cluster.id","description":"The workload cluster"}"#,
    printcolumn = r#"{"name":"Node","type":"string","jsonPath":".spec.guest.node.name","description":"The node to drain"}"#,
    printcolumn = r#"{"name":"Drained","type":"string","jsonPath":".status.conditions[?(@.type==\"Drained\")].status","description":"Whether the node is drained"}"#,
    printcolumn = r#"{"name":"Timeout","type":"string","jsonPath":".status.conditions[?(@.type==\"Timeout\")].status","description":"Whether draining timed out"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct DrainerConfigSpec {
    /// The workload cluster and node.
    pub guest: DrainerConfigSpecGuest,
    /// The version of the operator that asked for the drain.
    pub version_bundle: DrainerConfigSpecVersionBundle,
}

/// `spec.guest`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DrainerConfigSpecGuest {
    /// The workload cluster.
    pub cluster: DrainerConfigSpecGuestCluster,
    /// The node.
    pub node: DrainerConfigSpecGuestNode,
}

/// `spec.guest.cluster`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DrainerConfigSpecGuestCluster {
    /// How to reach the workload cluster's API server.
    pub api: DrainerConfigSpecGuestClusterAPI,
    /// The cluster id, e.g. `al9qy`.
    #[schemars(length(min = 1))]
    pub id: String,
}

/// `spec.guest.cluster.api`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DrainerConfigSpecGuestClusterAPI {
    /// The API server's host name, e.g. `api.al9qy.k8s.gauss.eu-central-1.aws.gigantic.io`.
    #[schemars(length(min = 1))]
    pub endpoint: String,
}

/// `spec.guest.node`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DrainerConfigSpecGuestNode {
    /// The node name, e.g. `ip-10-1-1-37.eu-central-1.compute.internal`.
    #[schemars(length(min = 1))]
    pub name: String,
}

/// `spec.versionBundle`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DrainerConfigSpecVersionBundle {
    /// The operator version, e.g. `16.2.0`.
    pub version: String,
}

/// The condition the drain executor keeps while it works: `True` while draining progresses,
/// `False` with a reason (`WorkloadClusterUnreachable`, `KubeconfigInvalid`, `DuplicateDrain`, …)
/// while it cannot, and `False` with reason `Finished` once `Drained` or `Timeout` is set.
pub const CONDITION_DRAINING: &str = "Draining";
/// The `status` of a condition that does not hold.
pub const STATUS_FALSE: &str = "False";
/// Annotation on a DrainerConfig: the drain timeout as a duration (`90s`, `10m`, `1h`),
/// replacing the default of 60 minutes for this drain.
pub const TIMEOUT_ANNOTATION: &str = "drainer.giantswarm.io/timeout";

/// The observed state of a `DrainerConfig`, written by the drain executor (node-operator wrote
/// only `conditions`; the other fields are this project's progress record, so that a drain
/// survives restarts without any waiting inside a worker).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DrainerConfigStatus {
    /// `Drained` or `Timeout` once draining ended; `Draining` while it runs.
    #[serde(default, deserialize_with = "null_as_default")]
    pub conditions: Vec<DrainerConfigStatusCondition>,
    /// Whether the drain executor cordoned the node.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cordoned: bool,
    /// How many pods were evicted so far.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub evicted_pods: u32,
    /// Pods whose eviction was accepted, until no pod with their UID exists.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub terminating_pods: Vec<DrainPod>,
    /// Pods whose eviction was refused (a PodDisruptionBudget, a server error) and when they
    /// are tried again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocked_pods: Vec<BlockedPod>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// A workload-cluster pod, identified by UID.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DrainPod {
    /// The pod's namespace.
    pub namespace: String,
    /// The pod's name.
    pub name: String,
    /// The pod's UID: a new pod of the same name is another pod.
    pub uid: String,
}

/// A pod whose eviction was refused.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BlockedPod {
    /// The pod.
    #[serde(flatten)]
    pub pod: DrainPod,
    /// Why the eviction was refused, e.g. the PodDisruptionBudget's message.
    pub reason: String,
    /// Refused attempts so far.
    pub attempts: u32,
    /// Not tried again before this time.
    pub retry_at: Time,
}

/// One condition of a `DrainerConfigStatus`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DrainerConfigStatusCondition {
    /// When the condition was last confirmed.
    pub last_heartbeat_time: Time,
    /// When the condition was set.
    pub last_transition_time: Time,
    /// `True` when the condition holds.
    pub status: String,
    /// `Drained`, `Timeout` or `Draining`.
    #[serde(rename = "type")]
    pub type_: String,
    /// A CamelCase reason for the condition's last transition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// A human-readable message: what happened and, for problems, what to do.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl DrainerConfigStatusCondition {
    /// A condition of `type_` that holds, set at `now`.
    pub fn holds(type_: &str, now: Timestamp) -> Self {
        Self {
            last_heartbeat_time: Time(now),
            last_transition_time: Time(now),
            status: STATUS_TRUE.to_string(),
            type_: type_.to_string(),
            reason: None,
            message: None,
        }
    }
}

impl DrainerConfigStatus {
    /// Whether a condition of `type_` holds.
    pub fn has_condition(&self, type_: &str) -> bool {
        self.conditions.iter().any(|c| c.type_ == type_ && c.status == STATUS_TRUE)
    }

    /// Whether the node is drained (upstream `HasDrainedCondition`).
    pub fn is_drained(&self) -> bool {
        self.has_condition(CONDITION_DRAINED)
    }

    /// Whether draining timed out (upstream `HasTimeoutCondition`).
    pub fn timed_out(&self) -> bool {
        self.has_condition(CONDITION_TIMEOUT)
    }

    /// The condition of `type_`, if present.
    pub fn condition(&self, type_: &str) -> Option<&DrainerConfigStatusCondition> {
        self.conditions.iter().find(|c| c.type_ == type_)
    }
}

impl DrainerConfig {
    /// Whether draining ended, drained or timed out: either way the instance may go.
    pub fn is_finished(&self) -> bool {
        self.status.as_ref().is_some_and(|s| s.is_drained() || s.timed_out())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::CustomResourceExt;
    use serde_json::json;

    #[test]
    fn reads_node_operator_status_and_tells_when_draining_ended() {
        let mut dc: DrainerConfig = serde_json::from_value(json!({
            "apiVersion": "core.giantswarm.io/v1alpha1", "kind": "DrainerConfig",
            "metadata": {"name": "ip-10-1-1-37.eu-central-1.compute.internal", "namespace": "al9qy"},
            "spec": {
                "guest": {"cluster": {"api": {"endpoint": "api.al9qy.k8s.example.com"}, "id": "al9qy"},
                          "node": {"name": "ip-10-1-1-37.eu-central-1.compute.internal"}},
                "versionBundle": {"version": "16.2.0"}
            },
            "status": {"conditions": null}
        }))
        .unwrap();
        assert!(!dc.is_finished());
        assert_eq!(dc.spec.guest.cluster.id, "al9qy");

        let status = dc.status.get_or_insert_with(Default::default);
        status.conditions.push(DrainerConfigStatusCondition {
            status: "False".into(),
            ..DrainerConfigStatusCondition::holds(CONDITION_DRAINED, Timestamp::UNIX_EPOCH)
        });
        assert!(!dc.is_finished(), "a False condition does not end draining");

        let status = dc.status.get_or_insert_with(Default::default);
        status.conditions.push(DrainerConfigStatusCondition::holds(CONDITION_TIMEOUT, Timestamp::UNIX_EPOCH));
        assert!(dc.is_finished());
        assert!(dc.status.as_ref().is_some_and(|s| s.timed_out() && !s.is_drained()));
    }

    #[test]
    fn crd_is_namespaced_with_status() {
        let crd = DrainerConfig::crd();
        assert_eq!(crd.metadata.name.as_deref(), Some("drainerconfigs.core.giantswarm.io"));
        assert_eq!(crd.spec.scope, "Namespaced");
        assert!(crd.spec.versions[0].subresources.as_ref().and_then(|s| s.status.as_ref()).is_some());
    }
}

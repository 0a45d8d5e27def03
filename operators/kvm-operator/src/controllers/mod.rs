//! The controllers, one module each, and what they share.
//!
//! | module | what it holds |
//! | --- | --- |
//! | [`cluster`] | KVMConfig: inputs, node indexes, the objects of the cluster in the management cluster, status, ordered teardown |
//! | [`drainer`] | node pods: the `master` and `worker` Endpoints, and the pod finalizer that holds a node pod until its workload-cluster node is drained |
//! | [`node_watcher`] | one watch per workload cluster mirroring each node's `Ready` into its node pod's condition (the worker readiness gate) |
//! | [`deleter`] | KVMConfig: removes workload-cluster nodes that are NotReady and have no node pod, and keeps the cluster's node watcher running |
//! | [`unhealthy`] | KVMConfig: replaces the node pods of nodes NotReady too long, behind a circuit breaker (opt-in) |
//!
//! The status lifecycle (`Ready`, status writes, rejected input) is [`operatorkit::status`],
//! shared with aws-operator. The controllers that reach into workload clusters share a
//! [`Nodes`] context: one cache of workload-cluster clients ([`node_lifecycle::WorkloadClients`],
//! the drain executor's), the node watchers and the metrics.

use std::sync::Arc;

use apis::kvm::KVMConfig;
use k8s_openapi::api::core::v1::Node;
use kube::api::ListParams;
use kube::{Api, ResourceExt};
use kvm_objects::names;
use node_lifecycle::{ClusterRef, WorkloadClient, WorkloadClients, WorkloadClusterError};
use operatorkit::Events;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::config::NodeSettings;
use crate::context::Shared;

pub mod cluster;
pub mod deleter;
pub mod drainer;
pub mod node_watcher;
pub mod unhealthy;

/// What the controllers acting on workload-cluster nodes share.
#[derive(Debug)]
pub struct Nodes {
    /// The management-cluster client and the operator's settings.
    pub shared: Arc<Shared>,
    /// The node controllers' settings.
    pub settings: NodeSettings,
    /// The node controllers' metrics.
    pub metrics: NodeMetrics,
    /// The per-cluster node watchers.
    pub watchers: node_watcher::NodeWatchers,
    /// The events of each controller, long-lived so that repeats become one event's series.
    pub events: NodeEvents,
    /// One lock per cluster namespace around computing and writing its Endpoints: the pods of
    /// one cluster reconcile concurrently, and each would otherwise write the same Endpoints
    /// from its own reading and lose to the others with a conflict.
    pub endpoints_locks: parking_lot::Mutex<std::collections::HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

/// The event publishers of the node controllers, one per reporting controller.
#[derive(Debug)]
pub struct NodeEvents {
    /// The drainer's.
    pub drainer: Events,
    /// The deleter's.
    pub deleter: Events,
    /// The unhealthy-node terminator's.
    pub terminator: Events,
    /// The node watchers'.
    pub watcher: Events,
}

impl Nodes {
    /// The shared context of the node controllers; they reach workload clusters through
    /// `shared`'s clients, the one cache of the process.
    pub fn new(shared: Arc<Shared>, settings: NodeSettings, metrics: NodeMetrics) -> Self {
        let client = shared.client.clone();
        let events = NodeEvents {
            drainer: Events::new(client.clone(), crate::config::DRAINER_CONTROLLER),
            deleter: Events::new(client.clone(), crate::config::DELETER_CONTROLLER),
            terminator: Events::new(client.clone(), crate::config::TERMINATOR_CONTROLLER),
            watcher: Events::new(client, node_watcher::REPORTER),
        };
        Self {
            shared,
            settings,
            metrics,
            watchers: node_watcher::NodeWatchers::default(),
            events,
            endpoints_locks: parking_lot::Mutex::default(),
        }
    }

    /// Workload-cluster clients, one cached per cluster: the process's one cache, `shared`'s.
    pub fn clients(&self) -> &WorkloadClients {
        &self.shared.workload_clients
    }

    /// The lock of the Endpoints of the cluster in `namespace`.
    pub fn endpoints_lock(&self, namespace: &str) -> Arc<tokio::sync::Mutex<()>> {
        self.endpoints_locks.lock().entry(namespace.to_string()).or_default().clone()
    }

    /// How to reach the workload cluster of `config` ([`cluster_ref`]).
    pub fn cluster_ref(&self, config: &KVMConfig) -> ClusterRef {
        cluster_ref(self.shared.certificates_namespace.as_deref(), config)
    }
}

impl Nodes {
    /// The workload cluster's client and its Nodes, or `None` when the cluster cannot be
    /// reached yet ([`WorkloadClients::reachable_nodes`]).
    pub async fn workload_nodes(
        &self,
        cluster: &ClusterRef,
    ) -> Result<Option<(WorkloadClient, Vec<Node>)>, WorkloadClusterError> {
        self.clients().reachable_nodes(cluster).await
    }
}

/// The workload cluster of `obj`, as node-lifecycle finds its clients: its Secrets are where
/// its certificates are (`certificates_namespace`, else the KVMConfig's namespace), its API is
/// `spec.cluster.kubernetes.api` ([`api_address`]). Every controller that reaches the workload
/// cluster builds its reference here.
pub fn cluster_ref(certificates_namespace: Option<&str>, obj: &KVMConfig) -> ClusterRef {
    let namespace = certificates_namespace.map(str::to_string).unwrap_or_else(|| obj.namespace().unwrap_or_default());
    let api = &obj.spec.cluster.kubernetes.api;
    ClusterRef::new(namespace, obj.spec.cluster.id.clone(), api_address(&api.domain, api.secure_port))
}

/// `domain`, with `:port` unless the port is 443 (or unset).
pub fn api_address(domain: &str, port: i64) -> String {
    match port {
        443 | 0 => domain.to_string(),
        port => format!("{domain}:{port}"),
    }
}

/// The label selecting the node pods the drainer, the deleter, the terminator and the node watchers read.
pub fn pod_selector() -> String {
    format!("{}={}", names::keys::POD_WATCHER, names::OPERATOR)
}

/// The KVMConfig whose `spec.cluster.id` is `id`, in any namespace. Node pods live in namespace
/// `<id>` and do not say where their KVMConfig is (the original assumed `default`, §14.10).
/// When several name the id (another organisation's refused one, say), it is the one holding
/// the claim: the UID the namespace `<id>` carries ([`apis::cluster_id`]).
pub async fn config_of_cluster(client: &kube::Client, id: &str) -> Result<Option<KVMConfig>, kube::Error> {
    let configs = Api::<KVMConfig>::all(client.clone()).list(&ListParams::default()).await?;
    let mut named: Vec<KVMConfig> = configs.items.into_iter().filter(|c| c.spec.cluster.id == id).collect();
    if named.len() <= 1 {
        return Ok(named.pop());
    }
    let namespace = Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone()).get_opt(id).await?;
    let holder = namespace.and_then(|ns| ns.labels().get(apis::labels::CLUSTER_UID).cloned());
    Ok(named.into_iter().find(|c| holder.is_some() && c.metadata.uid == holder))
}

/// The `result` label of the node controllers' counters.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabel {
    /// What happened, e.g. `drained`, `timeout`, `cluster_deleting`.
    pub result: String,
}

/// The `role` label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RoleLabel {
    /// `master` or `worker`.
    pub role: String,
}

/// The node controllers' metrics (prefix `kvm_operator_`).
#[derive(Clone, Debug, Default)]
pub struct NodeMetrics {
    /// Node watchers running.
    pub node_watchers: Gauge,
    /// Node watchers started (a steady cluster starts one, once).
    pub node_watcher_starts: Counter,
    /// Writes of the node-ready pod condition.
    pub node_condition_writes: Counter,
    /// Node pods let go by the drainer's finalizer, by result.
    pub pod_drains: Family<ResultLabel, Counter>,
    /// Workload-cluster nodes the deleter removed.
    pub orphan_nodes_deleted: Counter,
    /// Node pods the unhealthy-node terminator deleted, by role.
    pub unhealthy_nodes_terminated: Family<RoleLabel, Counter>,
    /// Unhealthy nodes the circuit breaker or the cooldown held back, per run.
    pub unhealthy_nodes_held: Counter,
}

impl NodeMetrics {
    /// The metrics, registered in `registry`.
    pub fn new(registry: &mut Registry) -> Self {
        let m = Self::default();
        let r = registry.sub_registry_with_prefix("kvm_operator");
        operatorkit::metrics::register(
            r,
            "node_watchers",
            "Workload-cluster node watchers running",
            m.node_watchers.clone(),
        );
        operatorkit::metrics::register(
            r,
            "node_watcher_starts",
            "Workload-cluster node watchers started",
            m.node_watcher_starts.clone(),
        );
        operatorkit::metrics::register(
            r,
            "node_condition_writes",
            "Writes of the workload-cluster-node-ready condition of node pods",
            m.node_condition_writes.clone(),
        );
        operatorkit::metrics::register(
            r,
            "pod_drains",
            "Node pods let go by the drainer's finalizer, by result",
            m.pod_drains.clone(),
        );
        operatorkit::metrics::register(
            r,
            "orphan_nodes_deleted",
            "Workload-cluster nodes deleted because they were NotReady without a node pod",
            m.orphan_nodes_deleted.clone(),
        );
        operatorkit::metrics::register(
            r,
            "unhealthy_nodes_terminated",
            "Node pods deleted because their workload-cluster node stayed NotReady, by role",
            m.unhealthy_nodes_terminated.clone(),
        );
        operatorkit::metrics::register(
            r,
            "unhealthy_nodes_held",
            "Unhealthy nodes held back by the circuit breaker or the cooldown, counted per run",
            m.unhealthy_nodes_held.clone(),
        );
        m
    }

    /// Count a node pod let go with `result`.
    pub fn pod_drain(&self, result: &str) {
        self.pod_drains.get_or_create(&ResultLabel { result: result.into() }).inc();
    }

    /// Node pods let go with `result` so far.
    pub fn pod_drains(&self, result: &str) -> u64 {
        self.pod_drains.get_or_create(&ResultLabel { result: result.into() }).get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIXTURE: &str = include_str!("../../../../crates/apis/tests/fixtures/kvmconfig-qz7lt.yaml");

    fn config(secure_port: i64) -> KVMConfig {
        let mut value: serde_json::Value = serde_saphyr::from_str(FIXTURE).expect("fixture parses");
        value["spec"]["cluster"]["kubernetes"]["api"]["securePort"] = serde_json::json!(secure_port);
        value["metadata"]["namespace"] = serde_json::json!("org-gollum");
        serde_json::from_value(value).expect("a KVMConfig")
    }

    #[test]
    fn the_reference_carries_the_api_port_unless_it_is_443() {
        let on_8443 = cluster_ref(None, &config(8443));
        assert_eq!(on_8443.api_endpoint, "api.qz7lt.k8s.gollum.example.net:8443");
        assert_eq!((on_8443.namespace.as_str(), on_8443.id.as_str()), ("org-gollum", "qz7lt"));
        assert_eq!(cluster_ref(Some("certs"), &config(443)).api_endpoint, "api.qz7lt.k8s.gollum.example.net");
        assert_eq!(cluster_ref(Some("certs"), &config(443)).namespace, "certs");
    }
}

//! Step 3, `workload-cluster`: the workload cluster's Nodes, read through node-lifecycle's
//! [`WorkloadClients`](node_lifecycle::clients::WorkloadClients) (Secret `<id>-kubeconfig`, or
//! the cluster's cert-operator `api` certificate, in the namespace of its certificates).
//!
//! They feed the rolling decision (no worker is replaced while a master is not schedulable) and
//! the status (the nodes and the versions they run). A workload cluster that cannot be read —
//! not up yet, down, or its credentials not there yet — is a state to wait in, not an error:
//! the reconcile goes on with no Nodes, which holds every update and leaves the recorded nodes
//! as they are. Only the reading is done here; nothing is written to the workload cluster.

use apis::kvm::KVMConfig;
use k8s_openapi::api::core::v1::Node;
use kube::api::ListParams;
use kube::{Api, ResourceExt};
use kvm_objects::cluster::Cluster;
use node_lifecycle::clients::{ClusterRef, WorkloadClusterError};
use operatorkit::{Outcome, Resource, resource};

use super::ClusterState;
use crate::context::Shared;

/// The workload cluster of `obj`, as node-lifecycle finds its clients: its Secrets are where
/// its certificates are (`certificates_namespace`, else the KVMConfig's namespace), its API is
/// `spec.cluster.kubernetes.api` ([`api_address`]). Every controller that reaches the workload
/// cluster builds its reference here.
pub fn cluster_ref(certificates_namespace: Option<&str>, obj: &KVMConfig) -> ClusterRef {
    let namespace = certificates_namespace.map(str::to_string).unwrap_or_else(|| obj.namespace().unwrap_or_default());
    let api = &obj.spec.cluster.kubernetes.api;
    ClusterRef::new(namespace, obj.spec.cluster.id.clone(), api_address(&api.domain, api.secure_port))
}

/// The cluster's API server as the management cluster reaches it.
pub fn api_endpoint(cluster: &Cluster) -> String {
    api_address(&cluster.api_domain, i64::from(cluster.api_port))
}

/// `domain`, with `:port` unless the port is 443 (or unset).
pub fn api_address(domain: &str, port: i64) -> String {
    match port {
        443 | 0 => domain.to_string(),
        port => format!("{domain}:{port}"),
    }
}

/// Every Node of the workload cluster.
pub async fn nodes(shared: &Shared, cluster: &ClusterRef) -> Result<Vec<Node>, WorkloadClusterError> {
    let wc = shared.workload_clients.client_for(cluster).await?;
    let nodes = Api::<Node>::all(wc.client()).list(&ListParams::default()).await.map_err(|e| wc.error(e))?;
    Ok(nodes.items)
}

/// Step 3.
#[derive(Debug)]
pub struct WorkloadNodes;

impl Resource<KVMConfig, ClusterState> for WorkloadNodes {
    fn name(&self) -> &str {
        "workload-cluster"
    }

    async fn ensure_created(&self, state: &mut ClusterState, obj: &KVMConfig) -> resource::Result<Outcome> {
        let shared = state.shared.clone();
        state.cluster()?;
        let target = cluster_ref(shared.certificates_namespace.as_deref(), obj);
        match nodes(&shared, &target).await {
            Ok(nodes) => state.wc_nodes = Some(nodes),
            Err(error) => {
                if error.is_not_ready() {
                    tracing::debug!(cluster = %target.id, %error, "workload cluster not reachable yet");
                } else {
                    tracing::warn!(cluster = %target.id, %error, "workload cluster cannot be read");
                }
                state.wc_problem = Some(error.to_string());
            }
        }
        Ok(Outcome::proceed())
    }

    async fn ensure_deleted(&self, state: &mut ClusterState, obj: &KVMConfig) -> resource::Result<Outcome> {
        // A deleted cluster needs no client any more. Its Secrets may be gone already, so the
        // reference is built from the object alone.
        state.shared.workload_clients.forget(&cluster_ref(state.shared.certificates_namespace.as_deref(), obj));
        state.shared.applied.forget(&super::cache_key(obj));
        Ok(Outcome::proceed())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIXTURE: &str = include_str!("../../../../../crates/apis/tests/fixtures/kvmconfig-qz7lt.yaml");

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

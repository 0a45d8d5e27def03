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
use kube::Api;
use kube::api::ListParams;
use kvm_objects::cluster::Cluster;
use node_lifecycle::clients::{ClusterRef, WorkloadClusterError};
use operatorkit::{Outcome, Resource, resource};

use super::ClusterState;
use crate::context::Shared;
use crate::controllers::{api_address, cluster_ref};

/// The cluster's API server as the management cluster reaches it.
pub fn api_endpoint(cluster: &Cluster) -> String {
    api_address(&cluster.api_domain, i64::from(cluster.api_port))
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

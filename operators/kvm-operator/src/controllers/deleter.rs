//! The deleter controller (`kvm-operator-deleter-controller`), watching KVMConfigs with a short
//! resync (`--deleter-resync-seconds`, 2 min as in the original): it removes workload-cluster
//! (WC) Nodes that are NotReady and have no node pod of the same name (reference §4.2).
//!
//! Why: a node pod's name is its WC node's name, and every rollout makes a new pod, so a new
//! node; the old Node would otherwise stay NotReady in the WC forever. A Ready node is never
//! deleted (its VM still runs, whatever the pods say), and neither is a node with a pod.
//!
//! Resources, in order:
//! 1. `node-watcher` ([`node_watcher::Watch`]): the cluster's node watcher runs while its
//!    KVMConfig exists. It lives here because the original's lived in the cluster controller's
//!    handler list, and both need the same things: a KVMConfig and a WC client.
//! 2. `nodes` ([`OrphanNodes`]): one LIST of WC nodes and one LIST of node pods per run; one
//!    DELETE per orphan, with a Normal event `OrphanNodeDeleted` on the KVMConfig.
//!
//! A WC that cannot be reached yet (no credentials, nothing answering) skips the run quietly,
//! as in the original: that is the normal state of a cluster being created. A WC that refuses
//! the operator's credentials is an error (a Warning event from operatorkit and a retry).

use std::collections::BTreeSet;
use std::sync::Arc;

use apis::kvm::KVMConfig;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{DeleteParams, ListParams};
use kube::{Api, Resource as _};
use kvm_objects::names;
use kvm_objects::nodes::orphans;
use operatorkit::{Outcome, Resource, ResourceSet, resource};
use semver::VersionReq;

use super::{Nodes, node_watcher};

/// The controller's name (and finalizer suffix).
pub const CONTROLLER: &str = crate::config::DELETER_CONTROLLER;

/// The resource set `name` for the Releases `requirement` matches.
pub fn resource_set(nodes: Arc<Nodes>, name: String, requirement: VersionReq) -> ResourceSet<KVMConfig> {
    ResourceSet::builder(name, requirement, move |_: Arc<KVMConfig>, _| {
        let nodes = nodes.clone();
        async move { Ok(nodes) }
    })
    .resource(node_watcher::Watch)
    .resource(OrphanNodes)
    .build()
}

/// Deletes NotReady WC nodes without a node pod.
#[derive(Debug)]
pub struct OrphanNodes;

impl Resource<KVMConfig, Arc<Nodes>> for OrphanNodes {
    fn name(&self) -> &str {
        "nodes"
    }

    async fn ensure_created(&self, nodes: &mut Arc<Nodes>, config: &KVMConfig) -> resource::Result<Outcome> {
        let cluster = nodes.cluster_ref(config);
        let Some((wc, wc_nodes)) = nodes.workload_nodes(&cluster).await? else {
            return Ok(Outcome::proceed());
        };
        let pods = Api::<Pod>::namespaced(nodes.shared.client.clone(), &names::namespace(&cluster.id))
            .list(&ListParams::default().labels(&super::pod_selector()))
            .await?;
        let pod_names: BTreeSet<String> = pods.items.iter().filter_map(|p| p.metadata.name.clone()).collect();
        let events = &nodes.events.deleter;
        for name in orphans(&wc_nodes, &pod_names) {
            match Api::<Node>::all(wc.client()).delete(name, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => continue,
                Err(e) => return Err(wc.error(e).into()),
            }
            nodes.metrics.orphan_nodes_deleted.inc();
            tracing::info!(cluster = %cluster.id, node = name, "deleted a NotReady workload-cluster node without a node pod");
            events
                .normal(
                    &config.object_ref(&()),
                    "DeleteNode",
                    "OrphanNodeDeleted",
                    format!(
                        "deleted node {name} of workload cluster {}: NotReady, and no node pod {}/{name} exists",
                        cluster.id,
                        names::namespace(&cluster.id)
                    ),
                )
                .await;
        }
        Ok(Outcome::proceed())
    }

    async fn ensure_deleted(&self, _: &mut Arc<Nodes>, _: &KVMConfig) -> resource::Result<Outcome> {
        Ok(Outcome::proceed())
    }
}

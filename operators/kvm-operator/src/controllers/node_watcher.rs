//! The per-cluster node watcher: one watch on the Nodes of each workload cluster (WC), mirroring
//! every node's `Ready` into the pod condition
//! `kvm-operator.giantswarm.io/workload-cluster-node-ready` of the node pod of the same name
//! (reference §4.5).
//!
//! Why: worker pods carry a readiness gate on that condition, so a worker pod is Ready only
//! while its VM is healthy *and* its WC node is Ready, and the drainer's Endpoints
//! ([`kvm_objects::endpoints`]) read the same condition: a worker whose node goes NotReady
//! stops receiving traffic at once (§15, PRs #1132 and #1151). The condition is a pod *status*
//! change, which the drainer sees through its watch of node pods' status.
//!
//! How it differs from the original, by design:
//! - the watcher is restarted only when what it watches changes (the cluster's API host or the
//!   namespace of its credentials) or its cluster goes; it is never rebuilt for being quiet,
//!   so a cluster without workers, or whose nodes have not registered, keeps one watcher
//!   (§14.7; the original rebuilt it on every reconcile after 10 min without node events);
//! - a rotated kubeconfig takes effect without a restart: when the watch fails, the client is
//!   resolved again ([`node_lifecycle::WorkloadClients`] drops a client whose Secret changed);
//! - the condition is written only when its status or reason changes
//!   ([`kvm_objects::nodes::condition_patch`]), and a full comparison of every node pod runs on
//!   each new node pod (the drainer nudges the watcher) and every `watcher_resync`, so a pod
//!   created after its node registered is not missed.
//!
//! The watchers are kept by [`NodeWatchers`]; the deleter controller's `node-watcher` resource
//! ([`Watch`]) starts a cluster's watcher on each reconcile of its KVMConfig and stops it when
//! the KVMConfig is deleted.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use apis::kvm::KVMConfig;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, ObjectReference, Pod};
use kube::api::{ListParams, Patch, PatchParams};
use kube::runtime::watcher::{self, Event};
use kube::{Api, Resource as _};
use kvm_objects::names;
use kvm_objects::nodes::{NodeReadyCondition, condition_patch, node_ready_condition};
use node_lifecycle::ClusterRef;
use operatorkit::{Outcome, Resource, resource};
use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::Nodes;

/// The reporting controller of the watchers' events.
pub const REPORTER: &str = "kvm-operator-node-watcher";

struct Entry {
    cluster: ClusterRef,
    stop: CancellationToken,
    nudge: Arc<Notify>,
}

/// The running node watchers, one per cluster id.
#[derive(Default)]
pub struct NodeWatchers {
    entries: Mutex<HashMap<String, Entry>>,
}

impl std::fmt::Debug for NodeWatchers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeWatchers").field("running", &self.entries.lock().len()).finish()
    }
}

impl NodeWatchers {
    /// Make sure the watcher of `cluster` runs: start it if there is none, restart it if the
    /// running one watches another API host or credentials namespace. `config` is where its
    /// events go. Returns whether a watcher was started.
    pub fn ensure(&self, nodes: &Arc<Nodes>, cluster: ClusterRef, config: ObjectReference) -> bool {
        let mut entries = self.entries.lock();
        if let Some(entry) = entries.get(&cluster.id) {
            if entry.cluster == cluster {
                return false;
            }
            entry.stop.cancel();
        }
        let stop = CancellationToken::new();
        let nudge = Arc::new(Notify::new());
        entries
            .insert(cluster.id.clone(), Entry { cluster: cluster.clone(), stop: stop.clone(), nudge: nudge.clone() });
        nodes.metrics.node_watchers.set(entries.len() as i64);
        nodes.metrics.node_watcher_starts.inc();
        let task = WatchTask { nodes: nodes.clone(), cluster, config, stop, nudge };
        tokio::spawn(task.run());
        true
    }

    /// Stop the watcher of cluster `id`, if any.
    pub fn stop(&self, nodes: &Nodes, id: &str) {
        let mut entries = self.entries.lock();
        if let Some(entry) = entries.remove(id) {
            entry.stop.cancel();
        }
        nodes.metrics.node_watchers.set(entries.len() as i64);
    }

    /// Stop every watcher (shutdown).
    pub fn stop_all(&self) {
        for (_, entry) in self.entries.lock().drain() {
            entry.stop.cancel();
        }
    }

    /// Ask the watcher of cluster `id` to compare every node pod with its node now.
    pub fn nudge(&self, id: &str) {
        if let Some(entry) = self.entries.lock().get(id) {
            entry.nudge.notify_one();
        }
    }

    /// The ids of the clusters with a running watcher, sorted.
    pub fn running(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.entries.lock().keys().cloned().collect();
        ids.sort();
        ids
    }
}

struct WatchTask {
    nodes: Arc<Nodes>,
    cluster: ClusterRef,
    config: ObjectReference,
    stop: CancellationToken,
    nudge: Arc<Notify>,
}

impl WatchTask {
    async fn run(self) {
        let events = &self.nodes.events.watcher;
        let mut warned = false;
        tracing::info!(cluster = %self.cluster.id, "workload-cluster node watcher started");
        while !self.stop.is_cancelled() {
            let problem = match self.nodes.clients().client_for(&self.cluster).await {
                Ok(wc) => match self.watch(&wc.client()).await {
                    Ok(()) => return,
                    Err((e, synced)) => {
                        // A watch that worked for a while ends an outage: the next one is reported.
                        warned &= !synced;
                        match wc.error(e) {
                            // A cluster that is not up yet, or not answering, is waited for, as
                            // the cluster controller waits for it: no Warning.
                            error if error.is_not_ready() => {
                                tracing::debug!(cluster = %self.cluster.id, %error, "workload cluster not answering");
                                String::new()
                            }
                            error => error.to_string(),
                        }
                    }
                },
                Err(e) if e.is_not_ready() => {
                    tracing::debug!(cluster = %self.cluster.id, error = %e, "workload cluster not reachable yet");
                    String::new()
                }
                Err(e) => e.to_string(),
            };
            if !problem.is_empty() && !warned {
                // Once per outage, not per retry.
                warned = true;
                events
                    .warning(
                        &self.config,
                        "WatchNodes",
                        "NodeWatchFailed",
                        format!("watching the nodes of workload cluster {}: {problem}; retrying", self.cluster.id),
                    )
                    .await;
            }
            tokio::select! {
                () = self.stop.cancelled() => {}
                () = tokio::time::sleep(self.nodes.settings.watcher_retry) => {}
            }
        }
        tracing::info!(cluster = %self.cluster.id, "workload-cluster node watcher stopped");
    }

    /// Watch until stopped (`Ok`) or the watch fails (`Err`, with whether it had listed the
    /// nodes first: the caller resolves the client again and retries).
    async fn watch(&self, wc: &kube::Client) -> Result<(), (kube::Error, bool)> {
        let api: Api<Node> = Api::all(wc.clone());
        let stream = watcher::watcher(api, watcher::Config::default());
        let mut stream = std::pin::pin!(stream);
        // Each node's readiness, all the mirror needs: not the whole Node (its images,
        // managedFields and addresses are most of it), one per node of every workload cluster.
        let mut known: BTreeMap<String, NodeReadyCondition> = BTreeMap::new();
        let mut listing: BTreeMap<String, NodeReadyCondition> = BTreeMap::new();
        let mut synced = false;
        let mut resync = tokio::time::interval(self.nodes.settings.watcher_resync);
        resync.tick().await;
        loop {
            tokio::select! {
                () = self.stop.cancelled() => return Ok(()),
                () = self.nudge.notified(), if synced => self.compare_all(&known).await,
                _ = resync.tick(), if synced => self.compare_all(&known).await,
                event = stream.next() => match event {
                    None => return Err((kube::Error::Service("the node watch ended".into()), synced)),
                    Some(Err(watcher::Error::WatchError(status))) => return Err((kube::Error::Api(status), synced)),
                    Some(Err(
                        watcher::Error::InitialListFailed(e)
                        | watcher::Error::WatchStartFailed(e)
                        | watcher::Error::WatchFailed(e),
                    )) => return Err((e, synced)),
                    Some(Err(e)) => return Err((kube::Error::Service(e.to_string().into()), synced)),
                    Some(Ok(Event::Init)) => listing.clear(),
                    Some(Ok(Event::InitApply(node))) => {
                        listing.insert(node.metadata.name.clone().unwrap_or_default(), node_ready_condition(Some(&node)));
                    }
                    Some(Ok(Event::InitDone)) => {
                        known = std::mem::take(&mut listing);
                        synced = true;
                        self.compare_all(&known).await;
                    }
                    Some(Ok(Event::Apply(node))) => {
                        let name = node.metadata.name.clone().unwrap_or_default();
                        let ready = node_ready_condition(Some(&node));
                        self.mirror(&name, &ready).await;
                        known.insert(name, ready);
                    }
                    Some(Ok(Event::Delete(node))) => {
                        let name = node.metadata.name.clone().unwrap_or_default();
                        known.remove(&name);
                        self.mirror(&name, &node_ready_condition(None)).await;
                    }
                },
            }
        }
    }

    fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.nodes.shared.client.clone(), &names::namespace(&self.cluster.id))
    }

    /// Mirror the readiness `ready` of node `name` into its node pod, if there is one.
    async fn mirror(&self, name: &str, ready: &NodeReadyCondition) {
        match self.pods().get_opt(name).await {
            Ok(Some(pod)) => self.write(&pod, ready).await,
            Ok(None) => {}
            Err(error) => tracing::warn!(%error, pod = name, cluster = %self.cluster.id, "cannot read a node pod"),
        }
    }

    /// Compare every node pod of the cluster with its node (one LIST of pods).
    async fn compare_all(&self, known: &BTreeMap<String, NodeReadyCondition>) {
        let pods = match self.pods().list(&ListParams::default().labels(&super::pod_selector())).await {
            Ok(pods) => pods.items,
            Err(error) => {
                tracing::warn!(%error, cluster = %self.cluster.id, "cannot list the node pods");
                return;
            }
        };
        for pod in &pods {
            let name = pod.metadata.name.clone().unwrap_or_default();
            match known.get(&name) {
                Some(ready) => self.write(pod, ready).await,
                // A node that is gone makes the condition False; a pod whose node has not
                // registered yet has none to mirror.
                None if kvm_objects::nodes::current_condition(pod).is_some() => {
                    self.write(pod, &node_ready_condition(None)).await
                }
                None => {}
            }
        }
    }

    /// Write the pod's condition `desired` if it changed.
    async fn write(&self, pod: &Pod, desired: &NodeReadyCondition) {
        let Some(patch) = condition_patch(pod, desired, jiff::Timestamp::now()) else { return };
        let name = pod.metadata.name.clone().unwrap_or_default();
        match self.pods().patch_status(&name, &PatchParams::default(), &Patch::Strategic(&patch)).await {
            Ok(_) => {
                self.nodes.metrics.node_condition_writes.inc();
                tracing::debug!(pod = %name, status = %desired.status, reason = %desired.reason, "node-ready condition written");
            }
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(error) => tracing::warn!(%error, pod = %name, "cannot write the node-ready condition"),
        }
    }
}

/// The deleter controller's first resource: the cluster's node watcher runs while its
/// KVMConfig exists, and stops when it is deleted.
#[derive(Debug)]
pub struct Watch;

impl Resource<KVMConfig, Arc<Nodes>> for Watch {
    fn name(&self) -> &str {
        "node-watcher"
    }

    async fn ensure_created(&self, nodes: &mut Arc<Nodes>, config: &KVMConfig) -> resource::Result<Outcome> {
        let cluster = nodes.cluster_ref(config);
        let id = cluster.id.clone();
        if nodes.watchers.ensure(nodes, cluster, config.object_ref(&())) {
            nodes
                .events
                .watcher
                .normal(
                    &config.object_ref(&()),
                    "WatchNodes",
                    "NodeWatcherStarted",
                    format!("watching the nodes of workload cluster {id} to mirror their readiness into the node pods"),
                )
                .await;
        }
        Ok(Outcome::proceed())
    }

    async fn ensure_deleted(&self, nodes: &mut Arc<Nodes>, config: &KVMConfig) -> resource::Result<Outcome> {
        nodes.watchers.stop(nodes, &config.spec.cluster.id);
        Ok(Outcome::proceed())
    }
}

//! The simulation task: caches fed from the store's event logs, one work queue, timers, and
//! the dispatch from changes to the work they cause.
//!
//! Work is processed one item at a time, and the caches catch up with the store before each
//! item, so every controller sees the effects of the writes made before it (including its
//! own) and needs no expectations bookkeeping. The task sleeps when there is nothing to do
//! until the store reports a change, a timer is due, or a control asks for something.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Endpoints, Node, Pod, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::sync::{Notify, mpsc, oneshot};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::cache::{Change, Index, Informer};
use super::{Command, Shared};
use crate::api::eviction::{controller_of, pod_phase};
use crate::api::{Api, DeleteOptions, Mutation, Part, WriteOptions};
use crate::error::ApiError;
use crate::registry::ResourceDef;
use crate::store::ObjKey;

/// One unit of work.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) enum Work {
    Deployment(ObjKey),
    ReplicaSet(ObjKey),
    Job(ObjKey),
    Schedule(ObjKey),
    Kubelet(ObjKey),
    Node(String),
    Endpoints(ObjKey),
    Budget(ObjKey),
    RenewLeases,
    NodeHeartbeat,
}

/// A FIFO queue that holds each item at most once.
#[derive(Debug, Default)]
struct Queue {
    order: VecDeque<Work>,
    queued: HashSet<Work>,
}

impl Queue {
    fn push(&mut self, work: Work) {
        if self.queued.insert(work.clone()) {
            self.order.push_back(work);
        }
    }

    fn pop(&mut self) -> Option<Work> {
        let work = self.order.pop_front()?;
        self.queued.remove(&work);
        Some(work)
    }
}

/// The served definitions the simulation reads and writes.
#[derive(Debug)]
pub(super) struct Defs {
    pub pods: Arc<ResourceDef>,
    pub nodes: Arc<ResourceDef>,
    pub deployments: Arc<ResourceDef>,
    pub replicasets: Arc<ResourceDef>,
    pub services: Arc<ResourceDef>,
    pub endpoints: Arc<ResourceDef>,
    pub leases: Arc<ResourceDef>,
    pub jobs: Arc<ResourceDef>,
}

impl Defs {
    pub fn of(api: &Api) -> Option<Defs> {
        let get = |group: &str, version: &str, plural: &str| api.registry.get(group, version, plural);
        Some(Defs {
            pods: get("", "v1", "pods")?,
            nodes: get("", "v1", "nodes")?,
            deployments: get("apps", "v1", "deployments")?,
            replicasets: get("apps", "v1", "replicasets")?,
            services: get("", "v1", "services")?,
            endpoints: get("", "v1", "endpoints")?,
            leases: get("coordination.k8s.io", "v1", "leases")?,
            jobs: get("batch", "v1", "jobs")?,
        })
    }
}

/// The caches and their indexes.
#[derive(Debug)]
pub(super) struct Cache {
    pub pods: Informer<Pod>,
    pub nodes: Informer<Node>,
    pub deployments: Informer<Deployment>,
    pub replicasets: Informer<ReplicaSet>,
    pub services: Informer<Service>,
    pub endpoints: Informer<Endpoints>,
    pub budgets: Informer<PodDisruptionBudget>,
    pub jobs: Informer<Job>,
    /// Pods by `spec.nodeName`.
    pub pods_by_node: Index,
    /// Pods by the uid of their controller.
    pub pods_by_controller: Index,
    /// ReplicaSets by the uid of their controller.
    pub replicasets_by_controller: Index,
}

/// The simulation task's state.
#[derive(Debug)]
pub(super) struct Runtime {
    pub shared: Arc<Shared>,
    pub api: Arc<Api>,
    pub defs: Defs,
    pub cache: Cache,
    queue: Queue,
    timers: BinaryHeap<Reverse<(Instant, u64, Work)>>,
    timer_seq: u64,
    /// The earliest pending timer of each work item: later ones are not added, since the work
    /// re-arms what it still needs when it runs.
    armed: HashMap<Work, Instant>,
    /// Pods the scheduler could not place; retried when nodes or pods change.
    pub unschedulable: BTreeSet<ObjKey>,
    /// When the kubelet started each pod it runs, by pod uid.
    pub started: HashMap<String, jiff::Timestamp>,
    /// Finished pods that their Job's status counts, by pod uid.
    pub counted: HashSet<String>,
}

/// How long a failed write waits before it is retried.
const RETRY_AFTER: Duration = Duration::from_secs(1);
/// Work items between two yields to the runtime, so that request handling is not starved.
const YIELD_EVERY: usize = 32;

/// Run until `stop` fires.
pub(super) async fn run(shared: Arc<Shared>, mut commands: mpsc::UnboundedReceiver<Command>, stop: CancellationToken) {
    let api = shared.api.clone();
    let Some(defs) = Defs::of(&api) else {
        tracing::error!("the simulation needs the built-in workload kinds; it does not run");
        return;
    };
    let budgets_storage = match api.registry.get("policy", "v1", "poddisruptionbudgets") {
        Some(def) => def.storage.clone(),
        None => return,
    };
    let cache = Cache {
        pods: Informer::new(defs.pods.storage.clone()),
        nodes: Informer::new(defs.nodes.storage.clone()),
        deployments: Informer::new(defs.deployments.storage.clone()),
        replicasets: Informer::new(defs.replicasets.storage.clone()),
        services: Informer::new(defs.services.storage.clone()),
        endpoints: Informer::new(defs.endpoints.storage.clone()),
        budgets: Informer::new(budgets_storage),
        jobs: Informer::new(defs.jobs.storage.clone()),
        pods_by_node: Index::default(),
        pods_by_controller: Index::default(),
        replicasets_by_controller: Index::default(),
    };
    let wake = Arc::new(Notify::new());
    for storage in [
        cache.pods.storage(),
        cache.nodes.storage(),
        cache.deployments.storage(),
        cache.replicasets.storage(),
        cache.services.storage(),
        cache.endpoints.storage(),
        cache.budgets.storage(),
        cache.jobs.storage(),
    ] {
        spawn_waker(&api, storage, wake.clone(), stop.clone());
    }
    let mut rt = Runtime {
        shared: shared.clone(),
        api,
        defs,
        cache,
        queue: Queue::default(),
        timers: BinaryHeap::new(),
        timer_seq: 0,
        armed: HashMap::new(),
        unschedulable: BTreeSet::new(),
        started: HashMap::new(),
        counted: HashSet::new(),
    };
    rt.after(shared.config.lease_renew_interval, Work::RenewLeases);
    rt.after(shared.config.node_status_interval, Work::NodeHeartbeat);

    let mut waiting: Vec<oneshot::Sender<()>> = Vec::new();
    let mut done = 0usize;
    loop {
        if stop.is_cancelled() {
            return;
        }
        // Commands first: whatever a control wrote before sending one is then in the store
        // when the caches catch up below.
        while let Ok(command) = commands.try_recv() {
            rt.command(command, &mut waiting);
        }
        rt.catch_up();
        rt.fire_timers();
        if let Some(work) = rt.queue.pop() {
            rt.process(work);
            done += 1;
            if done.is_multiple_of(YIELD_EVERY) {
                tokio::task::yield_now().await;
            }
            continue;
        }
        for waiter in waiting.drain(..) {
            let _ = waiter.send(());
        }
        let next = rt.timers.peek().map(|Reverse((at, _, _))| *at);
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = wake.notified() => {}
            command = commands.recv() => match command {
                Some(command) => rt.command(command, &mut waiting),
                None => return,
            },
            _ = sleep_until(next) => {}
        }
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Forward the store's change notifications of one resource to `wake`.
fn spawn_waker(api: &Api, storage: &str, wake: Arc<Notify>, stop: CancellationToken) {
    let Ok(start) = api.store.watch_from(storage, api.store.current_rv()) else { return };
    let mut notify = start.notify;
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                changed = notify.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    wake.notify_one();
                }
            }
        }
    });
}

impl Runtime {
    fn command(&mut self, command: Command, waiting: &mut Vec<oneshot::Sender<()>>) {
        match command {
            Command::SyncPod(key) => self.queue.push(Work::Kubelet(key)),
            Command::SyncNode(name) => self.queue.push(Work::Node(name)),
            Command::SyncAllPods => {
                let keys: Vec<ObjKey> = self.cache.pods.iter().map(|(k, _)| k.clone()).collect();
                for key in keys {
                    self.queue.push(Work::Kubelet(key));
                }
            }
            Command::Idle(waiter) => waiting.push(waiter),
        }
    }

    /// Queue `work` to run after `delay`.
    pub fn after(&mut self, delay: Duration, work: Work) {
        let at = Instant::now() + delay;
        if self.armed.get(&work).is_some_and(|armed| *armed <= at) {
            return;
        }
        self.armed.insert(work.clone(), at);
        self.timer_seq += 1;
        self.timers.push(Reverse((at, self.timer_seq, work)));
    }

    /// Queue `work` to run at server time `at` (now, if that has passed).
    pub fn at(&mut self, at: jiff::Timestamp, work: Work) {
        let delay = at.duration_since(self.api.clock.now());
        let delay = Duration::try_from(delay).unwrap_or(Duration::ZERO);
        self.after(delay, work);
    }

    /// Retry `work` after a failed write.
    pub fn retry(&mut self, work: Work, error: &ApiError) {
        tracing::debug!(?work, %error, "simulation write failed; retrying");
        self.after(RETRY_AFTER, work);
    }

    fn fire_timers(&mut self) {
        let now = Instant::now();
        while let Some(Reverse((at, _, _))) = self.timers.peek() {
            if *at > now {
                break;
            }
            if let Some(Reverse((at, _, work))) = self.timers.pop() {
                if self.armed.get(&work) == Some(&at) {
                    self.armed.remove(&work);
                }
                self.queue.push(work);
            }
        }
    }

    fn process(&mut self, work: Work) {
        match work {
            Work::Deployment(key) => self.sync_deployment(&key),
            Work::ReplicaSet(key) => self.sync_replicaset(&key),
            Work::Job(key) => self.sync_job(&key),
            Work::Schedule(key) => self.schedule(&key),
            Work::Kubelet(key) => self.sync_pod(&key),
            Work::Node(name) => self.sync_node(&name),
            Work::Endpoints(key) => self.sync_endpoints(&key),
            Work::Budget(key) => self.sync_budget(&key),
            Work::RenewLeases => {
                self.renew_leases();
                self.after(self.shared.config.lease_renew_interval, Work::RenewLeases);
            }
            Work::NodeHeartbeat => {
                self.node_heartbeats();
                self.after(self.shared.config.node_status_interval, Work::NodeHeartbeat);
            }
        }
    }

    /// Bring every cache up to date with the store and queue the work the changes cause.
    fn catch_up(&mut self) {
        let store = self.api.store.clone();
        let mut pods = Vec::new();
        self.cache.pods.poll(&store, &mut pods);
        for change in pods {
            self.on_pod(change);
        }
        let mut nodes = Vec::new();
        self.cache.nodes.poll(&store, &mut nodes);
        for change in nodes {
            self.on_node(change);
        }
        let mut replicasets = Vec::new();
        self.cache.replicasets.poll(&store, &mut replicasets);
        for change in replicasets {
            self.on_replicaset(change);
        }
        let mut deployments = Vec::new();
        self.cache.deployments.poll(&store, &mut deployments);
        for change in deployments {
            self.queue.push(Work::Deployment(change.key.clone()));
            self.budgets_in(&change.key.0);
        }
        let mut services = Vec::new();
        self.cache.services.poll(&store, &mut services);
        for change in services {
            self.queue.push(Work::Endpoints(change.key));
        }
        let mut endpoints = Vec::new();
        self.cache.endpoints.poll(&store, &mut endpoints);
        for change in endpoints {
            // Repair Endpoints that someone else changed or deleted.
            if self.cache.services.get(&change.key).is_some() {
                self.queue.push(Work::Endpoints(change.key));
            }
        }
        let mut jobs = Vec::new();
        self.cache.jobs.poll(&store, &mut jobs);
        for change in jobs {
            self.queue.push(Work::Job(change.key));
        }
        let mut budgets = Vec::new();
        self.cache.budgets.poll(&store, &mut budgets);
        for change in budgets {
            self.queue.push(Work::Budget(change.key));
        }
    }

    fn on_pod(&mut self, change: Change<Pod>) {
        let Change { key, old, new } = change;
        let node_of = |p: &Option<Arc<Pod>>| {
            p.as_ref().and_then(|p| p.spec.as_ref()?.node_name.clone()).filter(|n| !n.is_empty())
        };
        let controller_uid = |p: &Option<Arc<Pod>>| {
            p.as_ref().and_then(|p| controller_of(p.metadata.owner_references.as_ref())).map(|o| o.uid.clone())
        };
        let (old_node, new_node) = (node_of(&old), node_of(&new));
        self.cache.pods_by_node.update(&key, old_node.as_deref(), new_node.as_deref());
        let (old_owner, new_owner) = (controller_uid(&old), controller_uid(&new));
        self.cache.pods_by_controller.update(&key, old_owner.as_deref(), new_owner.as_deref());

        // A pod that is gone or finished may be what a Recreate rollout waits for.
        let finished = new.as_ref().is_none_or(|p| matches!(pod_phase(p), "Succeeded" | "Failed"));
        for pod in [&old, &new].into_iter().flatten() {
            if let Some(owner) = controller_of(pod.metadata.owner_references.as_ref())
                && owner.kind == "ReplicaSet"
            {
                let rs_key = (key.0.clone(), owner.name.clone());
                if finished
                    && let Some(rs) = self.cache.replicasets.get(&rs_key)
                    && let Some(deployment) = controller_of(rs.metadata.owner_references.as_ref())
                    && deployment.kind == "Deployment"
                {
                    self.queue.push(Work::Deployment((key.0.clone(), deployment.name.clone())));
                }
                self.queue.push(Work::ReplicaSet(rs_key));
            }
            if let Some(owner) = controller_of(pod.metadata.owner_references.as_ref())
                && owner.kind == "Job"
            {
                self.queue.push(Work::Job((key.0.clone(), owner.name.clone())));
            }
        }
        match &new {
            Some(pod) if new_node.is_none() => {
                if pod.metadata.deletion_timestamp.is_none() {
                    self.queue.push(Work::Schedule(key.clone()));
                }
            }
            Some(_) => self.queue.push(Work::Kubelet(key.clone())),
            None => {
                self.unschedulable.remove(&key);
                if let Some(uid) = old.as_ref().and_then(|p| p.metadata.uid.as_deref()) {
                    self.shared.control.lock().pod_ready.remove(uid);
                    self.started.remove(uid);
                    self.counted.remove(uid);
                }
            }
        }
        // A pod that appears on, leaves or changes labels on a node can make room for, or
        // satisfy the affinity of, a pod that did not fit.
        let placement_changed = old_node != new_node
            || (new_node.is_some()
                && old.as_ref().map(|p| &p.metadata.labels) != new.as_ref().map(|p| &p.metadata.labels));
        if placement_changed {
            self.retry_unschedulable();
        }
        self.endpoints_for_pod(&key.0, old.as_deref(), new.as_deref());
        self.budgets_in(&key.0);
    }

    fn on_node(&mut self, change: Change<Node>) {
        let Change { key, old, new } = change;
        self.queue.push(Work::Node(key.1.clone()));
        let relevant = |n: &Option<Arc<Node>>| {
            n.as_ref().map(|n| {
                let ready = n
                    .status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
                    .map(|c| c.status.clone());
                let allocatable = n.status.as_ref().and_then(|s| s.allocatable.clone());
                (n.metadata.labels.clone(), n.spec.clone(), allocatable, ready)
            })
        };
        let (before, after) = (relevant(&old), relevant(&new));
        if before != after {
            // Heartbeats change nothing here; labels, taints, cordon, capacity and readiness do.
            self.retry_unschedulable();
            let pods: Vec<ObjKey> = self.cache.pods_by_node.get(&key.1).cloned().collect();
            for pod in pods {
                self.queue.push(Work::Kubelet(pod));
            }
        }
    }

    fn on_replicaset(&mut self, change: Change<ReplicaSet>) {
        let Change { key, old, new } = change;
        fn controller(r: &Option<Arc<ReplicaSet>>) -> Option<&OwnerReference> {
            r.as_ref().and_then(|r| controller_of(r.metadata.owner_references.as_ref()))
        }
        let (old_owner, new_owner) = (controller(&old), controller(&new));
        self.cache.replicasets_by_controller.update(
            &key,
            old_owner.map(|o| o.uid.as_str()),
            new_owner.map(|o| o.uid.as_str()),
        );
        for owner in [old_owner, new_owner].into_iter().flatten() {
            if owner.kind == "Deployment" {
                self.queue.push(Work::Deployment((key.0.clone(), owner.name.clone())));
            }
        }
        self.queue.push(Work::ReplicaSet(key.clone()));
        self.budgets_in(&key.0);
    }

    /// Queue every pod the scheduler gave up on.
    pub fn retry_unschedulable(&mut self) {
        for key in std::mem::take(&mut self.unschedulable) {
            self.queue.push(Work::Schedule(key));
        }
    }

    /// Queue the budgets of a namespace: a pod or a controller of it changed.
    fn budgets_in(&mut self, namespace: &str) {
        let keys: Vec<ObjKey> = self.cache.budgets.in_namespace(namespace).map(|(k, _)| k.clone()).collect();
        for key in keys {
            self.queue.push(Work::Budget(key));
        }
    }

    /// Queue the Services whose selector matches the pod before or after the change.
    fn endpoints_for_pod(&mut self, namespace: &str, old: Option<&Pod>, new: Option<&Pod>) {
        let keys: Vec<ObjKey> = self
            .cache
            .services
            .in_namespace(namespace)
            .filter(|(_, svc)| {
                [old, new].into_iter().flatten().any(|p| super::endpoints::selects(svc, p.metadata.labels.as_ref()))
            })
            .map(|(k, _)| k.clone())
            .collect();
        for key in keys {
            self.queue.push(Work::Endpoints(key));
        }
    }

    /// Server time as `metav1.Time` (whole seconds, as it serialises).
    pub fn now(&self) -> Time {
        let now = self.api.clock.now();
        Time(jiff::Timestamp::from_second(now.as_second()).unwrap_or(now))
    }

    // Writes. Every write goes through the API, as an HTTP client's would.

    /// Create an object.
    pub fn create<T: Serialize>(
        &self,
        def: &ResourceDef,
        namespace: &str,
        obj: &T,
        manager: &str,
    ) -> Result<Value, ApiError> {
        let body = serde_json::to_value(obj).map_err(|e| ApiError::internal(e.to_string()))?;
        Ok(self.api.create(def, namespace, body, &options(manager))?.object)
    }

    /// Read the current object of `uid`, change it with `change`, and write `part` of it.
    /// Nothing is written when `change` leaves the object as it was.
    #[allow(clippy::too_many_arguments)]
    pub fn update<T: Serialize + DeserializeOwned>(
        &self,
        def: &ResourceDef,
        key: &ObjKey,
        uid: Option<&str>,
        part: Part,
        manager: &str,
        mut change: impl FnMut(&mut T),
    ) -> Result<Value, ApiError> {
        let (namespace, name) = (key.0.as_str(), key.1.as_str());
        let outcome = self.api.guaranteed_update(def, namespace, name, part, &options(manager), false, |current| {
            let Some(current) = current else { return Err(ApiError::not_found(def, name)) };
            if uid.is_some() && current.pointer("/metadata/uid").and_then(Value::as_str) != uid {
                return Err(ApiError::not_found(def, name));
            }
            let mut typed = T::deserialize(current).map_err(|e| ApiError::internal(e.to_string()))?;
            change(&mut typed);
            let value = serde_json::to_value(&typed).map_err(|e| ApiError::internal(e.to_string()))?;
            Ok(Mutation { value, applied: false, precondition: None })
        })?;
        Ok(outcome.object)
    }

    /// Delete an object of `uid`; `grace` overrides the pod's grace period.
    pub fn delete(
        &self,
        def: &ResourceDef,
        key: &ObjKey,
        uid: Option<&str>,
        grace: Option<i64>,
    ) -> Result<(), ApiError> {
        let opts = DeleteOptions {
            precondition_uid: uid.map(str::to_string),
            grace_period_seconds: grace,
            ..DeleteOptions::default()
        };
        match self.api.delete(def, &key.0, &key.1, &opts) {
            Ok(_) => Ok(()),
            Err(e) if e.code == 404 => Ok(()),
            Err(e) => Err(e),
        }
    }
}

fn options(manager: &str) -> WriteOptions {
    WriteOptions { manager: manager.to_string(), ..WriteOptions::default() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_holds_each_item_once_in_fifo_order() {
        let mut q = Queue::default();
        let k = |n: &str| ("ns".to_string(), n.to_string());
        q.push(Work::Kubelet(k("a")));
        q.push(Work::Schedule(k("b")));
        q.push(Work::Kubelet(k("a")));
        assert_eq!(q.pop(), Some(Work::Kubelet(k("a"))));
        q.push(Work::Kubelet(k("a")));
        assert_eq!(q.pop(), Some(Work::Schedule(k("b"))));
        assert_eq!(q.pop(), Some(Work::Kubelet(k("a"))));
        assert_eq!(q.pop(), None);
    }
}

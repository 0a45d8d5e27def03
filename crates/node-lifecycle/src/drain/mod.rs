//! The drain executor: an operatorkit controller for `DrainerConfig` that keeps node-operator's
//! contract, so that a platform needs no node-operator.
//!
//! # The contract
//!
//! A DrainerConfig names a workload cluster and a node. The executor cordons the node, evicts its
//! pods through `policy/v1` Eviction (DaemonSet-owned and mirror pods stay; workloads go before
//! `kube-system`), and sets `Drained=True` once no evictable pod is left, or `Timeout=True` once
//! the timeout passes (60 minutes, or the DrainerConfig's `drainer.giantswarm.io/timeout`
//! annotation). A node that does not exist is `Drained` at once, with a message saying so. A
//! timed-out node stays cordoned; its blocked pods are named in the condition's message.
//!
//! # Never waiting inside a worker
//!
//! One reconcile does one step: read the node's pods (one LIST), evict up to the per-node limit
//! in parallel, record what happened in the DrainerConfig's status (`terminatingPods`,
//! `blockedPods` with their next attempt, `evictedPods`) and requeue: soon while pods
//! terminate, at the next retry time while a disruption budget refuses. Evictions refused with
//! 429 or 5xx back off per pod ([`plan::Backoff`]). A pod is gone when no pod with its UID is
//! left. The plan is a pure function of the recorded status and the observed pods
//! ([`plan::plan`]); the status written last is also kept in memory, so a cache that lags
//! behind the executor's own status write cannot repeat a step.
//!
//! # Bounds
//!
//! Evictions run at most [`DrainerSettings::per_node`] at once per node and
//! [`DrainerSettings::per_operator`] at once per process (permits are taken without waiting;
//! a drain that gets none requeues). kube-runtime never reconciles one object twice at once.
//!
//! # Faults
//!
//! A workload cluster whose credentials are missing, malformed or point where nothing answers
//! gives `Draining=False` with the reason and a message naming the cluster and the Secret, a
//! Warning event when that reason first appears, and a retry after
//! [`DrainerSettings::retry`]; the timeout still runs. Two DrainerConfigs for one node make one
//! drain: the oldest drains, the others wait with reason `DuplicateDrain` and copy its result.
//! A DrainerConfig deleted before its drain ended uncordons the node if this executor cordoned
//! it for that DrainerConfig (the node's `drainer.giantswarm.io/cordoned-by` annotation records
//! who did, so a cordon that cannot be undone keeps its reason), forgets its progress, and
//! drops the cluster's client once no DrainerConfig needs it. No task outlives a reconcile.

pub mod plan;

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use apis::drainer::{
    CONDITION_DRAINED, CONDITION_DRAINING, CONDITION_TIMEOUT, DrainPod, DrainerConfig, DrainerConfigStatus,
    DrainerConfigStatusCondition, STATUS_FALSE, STATUS_TRUE, TIMEOUT_ANNOTATION,
};
use futures::future::join_all;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, EvictParams, ListParams, Patch, PatchParams};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::reflector::Store;
use kube::{Client, Resource as _, ResourceExt};
use operatorkit::{
    BuildError, Controller, Leadership, Metrics, Outcome, Readiness, Resource, ResourceSet, Routing, resource,
};
use parking_lot::Mutex;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use semver::{Version, VersionReq};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::clients::{ClientOptions, ClusterRef, WorkloadClient, WorkloadClients, WorkloadClusterError};
use plan::{Backoff, EvictionResult, Limits, NodePod};

/// The node annotation naming the DrainerConfig (`<namespace>/<name>`) the node was cordoned for.
pub const CORDONED_BY_ANNOTATION: &str = "drainer.giantswarm.io/cordoned-by";
/// node-operator's default drain timeout (PR #293).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60 * 60);

/// How the drain executor runs.
#[derive(Clone, Debug)]
pub struct DrainerSettings {
    /// The operator running the executor (`aws-operator`): it names the controller
    /// (`<operator>-drainer`) and its finalizer, and DrainerConfigs are selected by the label
    /// `<operator>.giantswarm.io/version=<version>`.
    pub operator: String,
    /// This operator's version.
    pub version: Version,
    /// The timeout of DrainerConfigs without the timeout annotation.
    pub timeout: Duration,
    /// Evictions at once per node.
    pub per_node: usize,
    /// Evictions at once per process.
    pub per_operator: usize,
    /// How soon to look again while pods terminate.
    pub poll: Duration,
    /// Backoff of refused evictions.
    pub backoff: Backoff,
    /// How soon to retry when the workload cluster cannot be reached.
    pub retry: Duration,
    /// DrainerConfigs reconciled at once.
    pub concurrency: u16,
    /// Workload-cluster client timeouts and certificate.
    pub clients: ClientOptions,
}

impl DrainerSettings {
    /// Defaults for `operator` at `version`.
    pub fn new(operator: impl Into<String>, version: Version) -> Self {
        let operator = operator.into();
        Self {
            operator: operator.clone(),
            version,
            timeout: DEFAULT_TIMEOUT,
            per_node: 5,
            per_operator: 100,
            poll: Duration::from_secs(1),
            backoff: Backoff::default(),
            retry: Duration::from_secs(10),
            concurrency: 16,
            clients: ClientOptions::for_operator(&operator),
        }
    }
}

/// The executor's metrics (prefix `node_lifecycle_`).
#[derive(Clone, Debug)]
pub struct DrainMetrics {
    in_progress: Gauge,
    duration: Family<ResultLabel, Histogram>,
    evictions: Family<ResultLabel, Counter>,
}

/// The `result` label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabel {
    /// `drained` / `timeout` for drains; `evicted`, `gone`, `disruption_budget`, `error`,
    /// `refused` for evictions.
    pub result: String,
}

impl DrainMetrics {
    /// Register the metrics in `registry`.
    pub fn new(registry: &mut Registry) -> Self {
        let m = Self {
            in_progress: Gauge::default(),
            duration: Family::new_with_constructor(|| {
                Histogram::new([1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0])
            }),
            evictions: Family::default(),
        };
        let r = registry.sub_registry_with_prefix("node_lifecycle");
        operatorkit::metrics::register(
            r,
            "drains_in_progress",
            "Drains this process is running",
            m.in_progress.clone(),
        );
        operatorkit::metrics::register(
            r,
            "drain_duration_seconds",
            "From a DrainerConfig's creation to Drained or Timeout, by result",
            m.duration.clone(),
        );
        operatorkit::metrics::register(r, "evictions", "Eviction requests by result", m.evictions.clone());
        m
    }

    /// Evictions so far with `result`.
    pub fn evictions(&self, result: &str) -> u64 {
        self.evictions.get_or_create(&ResultLabel { result: result.into() }).get()
    }

    /// Drains in progress.
    pub fn in_progress(&self) -> i64 {
        self.in_progress.get()
    }
}

/// The executor, ready to run. Build it with [`Drainer::builder`].
#[derive(Debug)]
pub struct Drainer {
    controller: Controller<DrainerConfig>,
    clients: WorkloadClients,
    inner: Arc<Inner>,
}

/// Configures a [`Drainer`].
pub struct DrainerBuilder<'a> {
    client: Client,
    settings: DrainerSettings,
    registry: &'a mut Registry,
    metrics: Option<Metrics>,
    readiness: Option<Readiness>,
    leadership: Option<Leadership>,
    clients: Option<WorkloadClients>,
}

impl std::fmt::Debug for DrainerBuilder<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DrainerBuilder").field("settings", &self.settings).finish_non_exhaustive()
    }
}

impl DrainerBuilder<'_> {
    /// Report operatorkit's controller metrics too.
    pub fn metrics(mut self, metrics: &Metrics) -> Self {
        self.metrics = Some(metrics.clone());
        self
    }

    /// Report readiness once the DrainerConfig cache is filled.
    pub fn readiness(mut self, readiness: &Readiness) -> Self {
        self.readiness = Some(readiness.clone());
        self
    }

    /// Drain only while this replica leads.
    pub fn leadership(mut self, leadership: Leadership) -> Self {
        self.leadership = Some(leadership);
        self
    }

    /// Reach workload clusters through `clients`, a cache the operator's own controllers use
    /// too, so that a process holds one client per workload cluster. [`Drainer::run`] keeps it
    /// current. Without it the executor has a cache of its own, with [`DrainerSettings::clients`].
    pub fn clients(mut self, clients: WorkloadClients) -> Self {
        self.clients = Some(clients);
        self
    }

    /// Build the controller.
    pub fn build(self) -> Result<Drainer, BuildError> {
        let s = &self.settings;
        let clients = self.clients.unwrap_or_else(|| WorkloadClients::new(self.client.clone(), s.clients.clone()));
        let name = format!("{}-drainer", s.operator);
        let inner = Arc::new(Inner {
            mc: self.client.clone(),
            // Cordons, evictions and deletions are fenced per request by the executor's
            // leadership, not only checked once per step.
            clients: match &self.leadership {
                Some(l) => clients.gated_by(l.clone()),
                None => clients.clone(),
            },
            metrics: DrainMetrics::new(self.registry),
            recorder: Recorder::new(self.client.clone(), Reporter { controller: name.clone(), instance: None }),
            store: OnceLock::new(),
            progress: Mutex::new(HashMap::new()),
            permits: Arc::new(Semaphore::new(s.per_operator.max(1))),
            settings: s.clone(),
        });
        let requirement = VersionReq::parse(&format!("={}", s.version)).map_err(|_| BuildError::NoResourceSets)?;
        let set = ResourceSet::<DrainerConfig>::with_default_state::<()>(format!("v{}", s.version), requirement)
            .resource(Drain { inner: inner.clone() })
            .build();
        let mut builder = Controller::<DrainerConfig>::builder(self.client, name)
            .operator(s.operator.clone())
            .routing(Routing::Legacy { version: s.version.clone() })
            .resource_set(set)
            .concurrency(s.concurrency);
        if let Some(m) = &self.metrics {
            builder = builder.metrics(m);
        }
        if let Some(r) = &self.readiness {
            builder = builder.readiness(r);
        }
        if let Some(l) = self.leadership {
            builder = builder.leadership(l);
        }
        let controller = builder.build()?;
        let _ = inner.store.set(controller.store());
        Ok(Drainer { controller, clients, inner })
    }
}

impl Drainer {
    /// Start configuring the executor on the management-cluster client `client`, registering
    /// its metrics in `registry`.
    pub fn builder(client: Client, settings: DrainerSettings, registry: &mut Registry) -> DrainerBuilder<'_> {
        DrainerBuilder { client, settings, registry, metrics: None, readiness: None, leadership: None, clients: None }
    }

    /// The workload-cluster clients the executor uses (shareable with other controllers).
    pub fn clients(&self) -> &WorkloadClients {
        &self.clients
    }

    /// The executor's metrics.
    pub fn metrics(&self) -> DrainMetrics {
        self.inner.metrics.clone()
    }

    /// Run the controller and the Secret watch that keeps clients current until `shutdown`.
    pub async fn run(self, shutdown: CancellationToken) {
        let Drainer { controller, clients, inner: _ } = self;
        tokio::join!(controller.run(shutdown.clone()), clients.run(shutdown));
    }
}

struct Inner {
    mc: Client,
    clients: WorkloadClients,
    metrics: DrainMetrics,
    recorder: Recorder,
    store: OnceLock<Store<DrainerConfig>>,
    /// The status last written per DrainerConfig UID, and when this process began its drain.
    progress: Mutex<HashMap<String, (DrainerConfigStatus, Instant)>>,
    permits: Arc<Semaphore>,
    settings: DrainerSettings,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inner").field("settings", &self.settings).finish_non_exhaustive()
    }
}

/// The operatorkit resource that drains.
struct Drain {
    inner: Arc<Inner>,
}

impl Resource<DrainerConfig, ()> for Drain {
    fn name(&self) -> &str {
        "drain"
    }

    async fn ensure_created(&self, _: &mut (), dc: &DrainerConfig) -> resource::Result<Outcome> {
        self.inner.drain(dc).await
    }

    async fn ensure_deleted(&self, _: &mut (), dc: &DrainerConfig) -> resource::Result<Outcome> {
        self.inner.stop(dc).await;
        Ok(Outcome::proceed())
    }
}

fn cluster_of(dc: &DrainerConfig) -> ClusterRef {
    ClusterRef::new(
        dc.namespace().unwrap_or_default(),
        dc.spec.guest.cluster.id.clone(),
        dc.spec.guest.cluster.api.endpoint.clone(),
    )
}

/// Set condition `type_` to `status`/`reason`/`message`; true if anything changed. The
/// transition time moves only when the status does.
fn set_condition(
    s: &mut DrainerConfigStatus,
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    now: Timestamp,
) -> bool {
    let wanted = DrainerConfigStatusCondition {
        status: status.into(),
        reason: Some(reason.into()),
        message: Some(message.into()),
        ..DrainerConfigStatusCondition::holds(type_, now)
    };
    match s.conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(c) if c.status == wanted.status && c.reason == wanted.reason && c.message == wanted.message => false,
        Some(c) => {
            if c.status != wanted.status {
                c.last_transition_time = Time(now);
            }
            c.last_heartbeat_time = Time(now);
            c.status = wanted.status;
            c.reason = wanted.reason;
            c.message = wanted.message;
            true
        }
        None => {
            s.conditions.push(wanted);
            true
        }
    }
}

impl Inner {
    fn current_status(&self, dc: &DrainerConfig) -> DrainerConfigStatus {
        let uid = dc.uid().unwrap_or_default();
        if let Some((status, _)) = self.progress.lock().get(&uid) {
            return status.clone();
        }
        dc.status.clone().unwrap_or_default()
    }

    fn track(&self, dc: &DrainerConfig, status: &DrainerConfigStatus) {
        let mut progress = self.progress.lock();
        let entry = progress.entry(dc.uid().unwrap_or_default()).or_insert_with(|| (status.clone(), Instant::now()));
        entry.0 = status.clone();
        self.metrics
            .in_progress
            .set(progress.values().filter(|(s, _)| !(s.is_drained() || s.timed_out())).count() as i64);
    }

    async fn event(&self, dc: &DrainerConfig, type_: EventType, reason: &str, note: String) {
        let event = Event { type_, reason: reason.into(), note: Some(note), action: "Drain".into(), secondary: None };
        if let Err(error) = self.recorder.publish(&event, &dc.object_ref(&())).await {
            tracing::warn!(%error, reason, "cannot publish an event");
        }
    }

    /// Write `status` if it differs from what the object (or the last write) holds.
    async fn write(
        &self,
        dc: &DrainerConfig,
        before: &DrainerConfigStatus,
        status: &DrainerConfigStatus,
    ) -> resource::Result<()> {
        if before == status {
            self.track(dc, status);
            return Ok(());
        }
        let mut value =
            serde_json::to_value(status).map_err(|e| operatorkit::ResourceError::new("StatusEncoding", e))?;
        // A merge patch keeps keys it does not mention: empty lists and zero counts are omitted
        // by the type, so they are cleared explicitly.
        if let Some(map) = value.as_object_mut() {
            for key in ["cordoned", "evictedPods", "terminatingPods", "blockedPods"] {
                map.entry(key).or_insert(serde_json::Value::Null);
            }
        }
        let api: Api<DrainerConfig> = Api::namespaced(self.mc.clone(), &dc.namespace().unwrap_or_default());
        match api
            .patch_status(
                &dc.name_any(),
                &PatchParams::default(),
                &Patch::Merge(serde_json::json!({ "status": value })),
            )
            .await
        {
            Ok(_) => {
                self.track(dc, status);
                Ok(())
            }
            // Deleted meanwhile: nothing to record.
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => {
                // The object's status is the truth again.
                self.progress.lock().remove(&dc.uid().unwrap_or_default());
                Err(e.into())
            }
        }
    }

    /// End the drain with `type_` (`Drained` or `Timeout`).
    async fn finish(
        &self,
        dc: &DrainerConfig,
        before: &DrainerConfigStatus,
        mut status: DrainerConfigStatus,
        type_: &str,
        reason: &str,
        message: String,
    ) -> resource::Result<Outcome> {
        let now = Timestamp::now();
        set_condition(&mut status, type_, STATUS_TRUE, reason, &message, now);
        set_condition(&mut status, CONDITION_DRAINING, STATUS_FALSE, "Finished", &message, now);
        self.write(dc, before, &status).await?;
        let result = if type_ == CONDITION_DRAINED { "drained" } else { "timeout" };
        let created = dc.meta().creation_timestamp.as_ref().map(|t| t.0).unwrap_or(now);
        let elapsed = now.duration_since(created).as_secs_f64().max(0.0);
        self.metrics.duration.get_or_create(&ResultLabel { result: result.into() }).observe(elapsed);
        let (event_type, event_reason) = if type_ == CONDITION_DRAINED {
            (EventType::Normal, "Drained")
        } else {
            (EventType::Warning, "DrainTimeout")
        };
        tracing::info!(drainerconfig = %dc.name_any(), node = %dc.spec.guest.node.name, result, "drain finished");
        self.event(dc, event_type, event_reason, message).await;
        Ok(Outcome::proceed())
    }

    /// The DrainerConfig that drains the node of `dc`: the oldest one not being deleted.
    fn primary(&self, dc: &DrainerConfig) -> Option<Arc<DrainerConfig>> {
        let store = self.store.get()?;
        let ns = dc.namespace();
        store
            .state()
            .into_iter()
            .filter(|o| {
                o.namespace() == ns
                    && o.spec.guest.cluster.id == dc.spec.guest.cluster.id
                    && o.spec.guest.node.name == dc.spec.guest.node.name
                    && o.meta().deletion_timestamp.is_none()
            })
            .min_by(|a, b| {
                (a.meta().creation_timestamp.as_ref().map(|t| t.0), a.name_any())
                    .cmp(&(b.meta().creation_timestamp.as_ref().map(|t| t.0), b.name_any()))
            })
    }

    fn timeout(&self, dc: &DrainerConfig) -> Result<Duration, String> {
        match dc.annotations().get(TIMEOUT_ANNOTATION) {
            None => Ok(self.settings.timeout),
            Some(value) => plan::parse_timeout(value).map_err(|e| {
                format!(
                    "annotation {TIMEOUT_ANNOTATION} of DrainerConfig {}/{}: {e}; the default of {}s applies",
                    dc.namespace().unwrap_or_default(),
                    dc.name_any(),
                    self.settings.timeout.as_secs()
                )
            }),
        }
    }

    async fn drain(&self, dc: &DrainerConfig) -> resource::Result<Outcome> {
        let before = self.current_status(dc);
        if before.is_drained() || before.timed_out() {
            self.track(dc, &before);
            return Ok(Outcome::proceed());
        }
        let mut status = before.clone();
        let now = Timestamp::now();
        let node = dc.spec.guest.node.name.clone();
        let cluster = cluster_of(dc);

        if let Some(primary) = self.primary(dc).filter(|p| p.uid() != dc.uid()) {
            let primary_status = self.current_status(&primary);
            let copied = [CONDITION_DRAINED, CONDITION_TIMEOUT].into_iter().find(|t| primary_status.has_condition(t));
            let message = format!(
                "node {node} of cluster {} is drained by the older DrainerConfig {}",
                cluster.id,
                primary.name_any()
            );
            if let Some(type_) = copied {
                return self.finish(dc, &before, status, type_, "DuplicateDrain", message).await;
            }
            set_condition(&mut status, CONDITION_DRAINING, STATUS_FALSE, "DuplicateDrain", &message, now);
            self.write(dc, &before, &status).await?;
            return Ok(Outcome::proceed().requeue_after(self.settings.poll.max(Duration::from_secs(2))));
        }

        let timeout = match self.timeout(dc) {
            Ok(t) => t,
            Err(message) => {
                if set_condition(&mut status, "TimeoutValid", STATUS_FALSE, "InvalidTimeout", &message, now) {
                    self.event(dc, EventType::Warning, "InvalidTimeout", message).await;
                }
                self.settings.timeout
            }
        };
        let created = dc.meta().creation_timestamp.as_ref().map(|t| t.0).unwrap_or(now);
        let deadline = created.checked_add(timeout).unwrap_or(created);
        if now >= deadline {
            let message = format!(
                "node {node} of cluster {} was not drained within {}s; it stays cordoned; {}",
                cluster.id,
                timeout.as_secs(),
                plan::describe_blocked(&status)
            );
            return self.finish(dc, &before, status, CONDITION_TIMEOUT, "DrainTimeout", message).await;
        }
        let until_deadline = Duration::try_from(deadline.duration_since(now)).unwrap_or(Duration::ZERO);

        let wc = match self.clients.client_for(&cluster).await {
            Ok(wc) => wc,
            Err(e) => return self.cluster_problem(dc, &before, status, e, until_deadline).await,
        };
        match self.step(dc, &wc, &before, status.clone(), now).await {
            Ok(outcome) => Ok(outcome.requeue().map_or(outcome, |r| outcome.requeue_after(r.min(until_deadline)))),
            Err(Problem::Cluster(e)) => self.cluster_problem(dc, &before, status, e, until_deadline).await,
            Err(Problem::Other(e)) => Err(e),
        }
    }

    /// One step of an unfinished drain with a client.
    async fn step(
        &self,
        dc: &DrainerConfig,
        wc: &WorkloadClient,
        before: &DrainerConfigStatus,
        mut status: DrainerConfigStatus,
        now: Timestamp,
    ) -> Result<Outcome, Problem> {
        let node = dc.spec.guest.node.name.clone();
        let cluster = wc.cluster().id.clone();
        let nodes: Api<Node> = Api::all(wc.client());
        if !status.cordoned {
            let Some(found) = nodes.get_opt(&node).await.map_err(|e| Problem::Cluster(wc.error(e)))? else {
                let message =
                    format!("node {node} does not exist in workload cluster {cluster}; there is nothing to drain");
                return Ok(self.finish(dc, before, status, CONDITION_DRAINED, "NodeNotFound", message).await?);
            };
            let owner = format!("{}/{}", dc.namespace().unwrap_or_default(), dc.name_any());
            let cordoned = found.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false);
            if !cordoned {
                let patch = serde_json::json!({
                    "metadata": {"annotations": {CORDONED_BY_ANNOTATION: owner}},
                    "spec": {"unschedulable": true},
                });
                match nodes.patch(&node, &PatchParams::default(), &Patch::Merge(patch)).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(s)) if s.code == 404 => {
                        let message = format!(
                            "node {node} does not exist in workload cluster {cluster}; there is nothing to drain"
                        );
                        return Ok(self.finish(dc, before, status, CONDITION_DRAINED, "NodeNotFound", message).await?);
                    }
                    Err(e) => return Err(Problem::Cluster(wc.error(e))),
                }
                self.event(dc, EventType::Normal, "Cordoned", format!("node {node} of cluster {cluster} cordoned"))
                    .await;
            }
            status.cordoned = true;
        }

        let pods: Api<Pod> = Api::all(wc.client());
        let listed = pods
            .list(&ListParams::default().fields(&format!("spec.nodeName={node}")))
            .await
            .map_err(|e| Problem::Cluster(wc.error(e)))?;
        let on_node = NodePod::evictable(&listed.items);
        let limits = Limits { per_node: self.settings.per_node.max(1), poll: self.settings.poll };
        let mut next = plan::plan(&status, &on_node, now, limits);
        if next.done {
            status.terminating_pods.clear();
            status.blocked_pods.clear();
            let message = format!("node {node} of cluster {cluster} is drained: {} pods evicted", status.evicted_pods);
            return Ok(self.finish(dc, before, status, CONDITION_DRAINED, "Drained", message).await?);
        }

        // Per-process bound, taken without waiting.
        let wanted = next.evict.len();
        let granted = wanted.min(self.permits.available_permits());
        let permit = if granted > 0 { self.permits.clone().try_acquire_many_owned(granted as u32).ok() } else { None };
        let granted = permit.as_ref().map_or(0, |p| p.num_permits());
        next.evict.truncate(granted);
        if granted < wanted {
            next.requeue = next.requeue.min(Duration::from_millis(200));
        }
        let results = join_all(next.evict.iter().map(|p| self.evict(wc, p))).await;
        drop(permit);
        for (_, r) in &results {
            self.metrics.evictions.get_or_create(&ResultLabel { result: r.label().into() }).inc();
        }
        plan::record(&mut status, &next, &results, now, self.settings.backoff);
        let message = format!(
            "node {node} of cluster {cluster}: {} pods evicted, {} terminating, {} blocked",
            status.evicted_pods,
            status.terminating_pods.len(),
            status.blocked_pods.len()
        );
        set_condition(&mut status, CONDITION_DRAINING, STATUS_TRUE, "Evicting", &message, now);
        self.write(dc, before, &status).await?;
        // Pods whose eviction was accepted just now are awaited at the poll interval.
        let requeue = if results.iter().any(|(_, r)| *r == EvictionResult::Evicted) {
            next.requeue.min(self.settings.poll)
        } else {
            next.requeue
        };
        Ok(Outcome::proceed().requeue_after(requeue))
    }

    async fn evict(&self, wc: &WorkloadClient, pod: &DrainPod) -> (DrainPod, EvictionResult) {
        let api: Api<Pod> = Api::namespaced(wc.client(), &pod.namespace);
        let result = match api.evict(&pod.name, &EvictParams::default()).await {
            Ok(_) => EvictionResult::Evicted,
            Err(kube::Error::Api(s)) if s.code == 404 => EvictionResult::Gone,
            Err(kube::Error::Api(s)) => {
                let message =
                    s.details.as_ref().and_then(|d| d.causes.first()).map(|c| c.message.clone()).unwrap_or(s.message);
                EvictionResult::Refused { code: s.code, message }
            }
            Err(e) => EvictionResult::Refused { code: 0, message: wc.error(e).to_string() },
        };
        tracing::debug!(pod = %pod.name, namespace = %pod.namespace, result = result.label(), "eviction");
        (pod.clone(), result)
    }

    /// The workload cluster cannot be used: say so in a condition (and an event when the
    /// reason is new) and retry later.
    async fn cluster_problem(
        &self,
        dc: &DrainerConfig,
        before: &DrainerConfigStatus,
        mut status: DrainerConfigStatus,
        error: WorkloadClusterError,
        until_deadline: Duration,
    ) -> resource::Result<Outcome> {
        let reason = error.reason();
        let message = error.to_string();
        let new_reason = status.condition(CONDITION_DRAINING).and_then(|c| c.reason.as_deref()) != Some(reason);
        set_condition(&mut status, CONDITION_DRAINING, STATUS_FALSE, reason, &message, Timestamp::now());
        self.write(dc, before, &status).await?;
        if new_reason {
            let level = if error.is_not_ready() { tracing::Level::INFO } else { tracing::Level::WARN };
            if level == tracing::Level::WARN {
                tracing::warn!(drainerconfig = %dc.name_any(), reason, %message, "cannot drain");
            } else {
                tracing::info!(drainerconfig = %dc.name_any(), reason, %message, "cannot drain yet");
            }
            self.event(dc, EventType::Warning, reason, message).await;
        }
        Ok(Outcome::proceed().requeue_after(self.settings.retry.min(until_deadline).max(Duration::from_millis(50))))
    }

    /// The DrainerConfig is being deleted: stop, undo an unfinished cordon, forget everything.
    async fn stop(&self, dc: &DrainerConfig) {
        let uid = dc.uid().unwrap_or_default();
        let status = self.current_status(dc);
        {
            let mut progress = self.progress.lock();
            progress.remove(&uid);
            self.metrics
                .in_progress
                .set(progress.values().filter(|(s, _)| !(s.is_drained() || s.timed_out())).count() as i64);
        }
        let cluster = cluster_of(dc);
        let others_need_cluster = self.store.get().is_some_and(|store| {
            store.state().iter().any(|o| {
                o.uid() != dc.uid()
                    && o.meta().deletion_timestamp.is_none()
                    && o.namespace() == dc.namespace()
                    && o.spec.guest.cluster.id == cluster.id
            })
        });
        if status.cordoned && !(status.is_drained() || status.timed_out()) {
            self.uncordon(dc, &cluster).await;
        }
        if !others_need_cluster {
            self.clients.forget(&cluster);
        }
    }

    /// Undo the cordon of a drain that was cancelled, if this DrainerConfig made it.
    async fn uncordon(&self, dc: &DrainerConfig, cluster: &ClusterRef) {
        let node = dc.spec.guest.node.name.clone();
        let owner = format!("{}/{}", dc.namespace().unwrap_or_default(), dc.name_any());
        let result: Result<bool, String> = async {
            let wc = self.clients.client_for(cluster).await.map_err(|e| e.to_string())?;
            let nodes: Api<Node> = Api::all(wc.client());
            let Some(found) = nodes.get_opt(&node).await.map_err(|e| wc.error(e).to_string())? else {
                return Ok(false);
            };
            if found.annotations().get(CORDONED_BY_ANNOTATION) != Some(&owner) {
                return Ok(false);
            }
            let patch = serde_json::json!({
                "metadata": {"annotations": {CORDONED_BY_ANNOTATION: null}},
                "spec": {"unschedulable": null},
            });
            nodes
                .patch(&node, &PatchParams::default(), &Patch::Merge(patch))
                .await
                .map_err(|e| wc.error(e).to_string())?;
            Ok(true)
        }
        .await;
        match result {
            Ok(true) => {
                tracing::info!(drainerconfig = %owner, %node, "drain cancelled; node uncordoned");
                self.event(
                    dc,
                    EventType::Normal,
                    "Uncordoned",
                    format!("drain cancelled: node {node} of cluster {} uncordoned", cluster.id),
                )
                .await;
            }
            Ok(false) => {}
            Err(message) => {
                tracing::warn!(drainerconfig = %owner, %node, %message, "drain cancelled; cannot uncordon the node");
                self.event(
                    dc,
                    EventType::Warning,
                    "UncordonFailed",
                    format!("drain cancelled, but node {node} stays cordoned (annotation {CORDONED_BY_ANNOTATION}={owner}): {message}"),
                )
                .await;
            }
        }
    }
}

enum Problem {
    Cluster(WorkloadClusterError),
    Other(operatorkit::ResourceError),
}

impl From<operatorkit::ResourceError> for Problem {
    fn from(e: operatorkit::ResourceError) -> Self {
        Problem::Other(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_move_their_transition_time_only_on_status_changes() {
        let mut s = DrainerConfigStatus::default();
        let t0 = Timestamp::from_second(1_800_000_000).unwrap();
        let t1 = Timestamp::from_second(1_800_000_100).unwrap();
        assert!(set_condition(&mut s, CONDITION_DRAINING, STATUS_TRUE, "Evicting", "a", t0));
        assert!(!set_condition(&mut s, CONDITION_DRAINING, STATUS_TRUE, "Evicting", "a", t1), "unchanged: no write");
        assert!(set_condition(&mut s, CONDITION_DRAINING, STATUS_TRUE, "Evicting", "b", t1));
        assert_eq!(s.conditions[0].last_transition_time.0, t0);
        assert!(set_condition(&mut s, CONDITION_DRAINING, STATUS_FALSE, "WorkloadClusterUnreachable", "c", t1));
        assert_eq!(s.conditions[0].last_transition_time.0, t1);
        assert_eq!(s.conditions.len(), 1);
    }
}

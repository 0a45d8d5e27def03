//! The controller: kube-runtime's [`Controller`](kube::runtime::Controller) driving resource sets.
//!
//! # What one reconcile does
//!
//! 1. The object comes from the reflector cache (no GET per reconcile). A standby replica (see
//!    leader election below) stops here.
//! 2. Paused objects (see [`crate::predicate`]) are skipped, deletion included.
//! 3. A deleting object that does not carry this controller's finalizer, or whose finalizer this
//!    process removed moments ago (the cache may lag), is left alone: the delete logic runs only
//!    while the finalizer is present, so at least once per object and normally exactly once.
//! 4. The [`Router`] picks the resource set. No set: another operator version owns the object,
//!    nothing is written (logged once per object at info level, so that an object no running
//!    version handles can be found). Unroutable: a Warning event and the status hook, nothing else. Both
//!    hold for deleting objects too: the finalizer stays until the object is routable again (the
//!    Release is restored, or another operator version finishes the deletion), because deleting
//!    cloud resources with the logic of a guessed version is worse than waiting.
//! 5. The set's state is initialised; on the update path the finalizer is added (a
//!    resourceVersion-guarded JSON patch) and the reconcile continues with the patched object.
//! 6. The resources run in order, each after a leadership check.
//! 7. Delete path: unless a resource kept the finalizer or cancelled the reconciliation, the
//!    finalizer is removed with a guarded patch.
//! 8. Success requeues after the shortest requested duration, or the resync period (5 min by
//!    default). A failure becomes a Warning event (reason = error kind), a count in
//!    `operatorkit_controller_errors_total`, an error log, and a requeue with per-object
//!    exponential backoff. A guarded finalizer patch that loses a race (409/422) requeues at
//!    once instead, as the cache has usually caught up by then.
//!
//! # Watches
//!
//! The watched kind is filtered server-side by the configured label selector (and, in legacy
//! mode, `<operator>.giantswarm.io/version=<own version>`), then by the change predicate of
//! [`crate::predicate`]. In release mode the controller also caches all Releases; a Release
//! whose spec changes (or that appears late, or is deleted) requeues every cached object whose
//! `release.giantswarm.io/version` label names it, or, for objects without that label routed by
//! a version of their own ([`ControllerBuilder::version_source`]), whose component version is
//! theirs. [`ControllerBuilder::watches`] adds watches
//! on related kinds (a cluster's node pools, say) whose every change requeues the objects a
//! mapping function names, so a parent follows its children without polling them.
//!
//! # Concurrency, shutdown, leadership
//!
//! kube-runtime never runs two reconciles of one object at once; [`ControllerBuilder::concurrency`]
//! bounds the total. Reconciles take their turns first come, first served: kube-runtime's own
//! bound picks the next of its waiting objects in hash order, so under saturation an object that
//! requeues itself often could be picked again and again while others waited without end. Here
//! the reconciles take `concurrency` turns from a fair semaphore, in the order they asked, and
//! operatorkit keeps the objects due in one FIFO queue. At most twice `concurrency` objects are
//! handed to kube-runtime at once (working, or waiting for a turn); a request to reconcile (a
//! watch event, a related object, a Release) joins the queue when that many are, or when others
//! wait already. So does a reconcile that becomes due in kube-runtime itself (a requeue), which
//! then ends at once without working. Each reconcile that ends hands the head of the queue to
//! kube-runtime. So an object that becomes due waits behind the ones due before it, and no more
//! than `concurrency` of them work at once. Waiting in the queue costs an entry, not a
//! reconcile in kube-runtime: kube-runtime polls every reconcile it runs each time one of them
//! wakes, so thousands of waiting reconciles (a controller starting over thousands of objects)
//! would cost time quadratic in their number, and memory for each. A reconcile still waiting
//! for its turn when shutdown begins ends without working.
//! An object still queued when shutdown begins is not reconciled. The controller stops on the
//! shutdown signal after the reconciles already running finish. All replicas watch (their caches
//! stay warm), only the leader reconciles, and every write path re-checks
//! [`Leadership::is_leader`] so a replica that lost the lease stops writing at once. Resources
//! that write many times should write through [`Leadership::gate`]d clients (and check
//! [`Leadership::check`] before other writes, such as cloud calls), so that the check happens at
//! each request. A reconcile that fails after this replica lost the lease ends as
//! [`ReconcileError::LeadershipLost`]: no error event, no failure metric, no backoff. When a
//! replica becomes leader it reconciles every cached object.
//!
//! # Sharding
//!
//! With [`ControllerBuilder::sharding`] every replica works at once, each on its own share of
//! the objects (see [`crate::sharding`]): the watch (and the related watches) select only
//! objects labelled with this replica's shard, the shard Lease replaces the leader Lease as the
//! fence, an object the sharder asks to drain is handed over (its labels removed) instead of
//! reconciled, and after taking its shard Lease back a replica re-lists before it reconciles.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use apis::labels;
use apis::release::Release;
use futures::future::BoxFuture;
use futures::{FutureExt, Stream, StreamExt, TryStreamExt, stream};
use kube::api::Api;
use kube::runtime::controller::{Action, Config as RuntimeConfig};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher::{self, Event};
use kube::runtime::{Controller as RuntimeController, WatchStreamExt};
use kube::{Client, Resource};
use parking_lot::Mutex;
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::error::{BuildError, ReconcileError};
use crate::events::Events;
use crate::finalizer::{self, finalizer_name, has_finalizer};
use crate::leader::Leadership;
use crate::metrics::{Metrics, ObjectTimes};
use crate::outcome::shortest;
use crate::predicate::{change_hash_ignoring, default_pause_annotations, paused_by};
use crate::resource_set::{ReconcileMeta, ResourceSet, SetEnd, WritePaths};
use crate::router::{ObjectVersion, Route, Router, Routing};
use crate::server::{Readiness, ReadyFlag};
use crate::sharding::ranges::{self, RangeView, RunningHashes, ShardSelectingClient};
use crate::sharding::{KindHandle, Ownership, ShardedKind, Sharding, ShardingMode};
use crate::status::StatusHook;

/// The default resync period: every object is reconciled at least this often.
pub const DEFAULT_RESYNC: Duration = Duration::from_secs(5 * 60);
/// How long a reconcile waits for the Release cache to sync before requeueing.
const RELEASE_CACHE_WAIT: Duration = Duration::from_secs(5);
/// How soon an object is retried when it was refused because a renewal of the lease was late.
const RENEWAL_OVERDUE_RETRY: Duration = Duration::from_secs(1);
/// The default bound on concurrent reconciles.
pub const DEFAULT_CONCURRENCY: u16 = 4;

/// What the watched kind must offer.
pub trait Watched: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static {}
impl<K> Watched for K where K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static {}

/// Per-object exponential backoff after failures: `initial × 2^(n-1)`, at most `max`.
///
/// The defaults (5 ms, 1000 s) are those of controller-runtime's per-item rate limiter: a
/// transient failure retries almost at once, a persistent one settles at one attempt every
/// 16 minutes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ErrorBackoff {
    /// The delay after the first failure.
    pub initial: Duration,
    /// The longest delay.
    pub max: Duration,
}

impl Default for ErrorBackoff {
    fn default() -> Self {
        Self { initial: Duration::from_millis(5), max: Duration::from_secs(1000) }
    }
}

impl ErrorBackoff {
    /// The delay after `failures` consecutive failures (≥ 1).
    pub fn delay(&self, failures: u32) -> Duration {
        if self.initial.is_zero() {
            return Duration::ZERO;
        }
        let mut delay = self.initial;
        for _ in 1..failures {
            if delay >= self.max {
                break;
            }
            delay = delay.saturating_mul(2);
        }
        delay.min(self.max)
    }
}

/// Configures a [`Controller`].
pub struct ControllerBuilder<K: Watched> {
    client: Client,
    name: String,
    operator: String,
    routing: Routing,
    sets: Vec<ResourceSet<K>>,
    api: Option<Api<K>>,
    selector: Option<String>,
    concurrency: u16,
    resync: Duration,
    pause: BTreeMap<String, String>,
    leadership: Leadership,
    metrics: Option<Metrics>,
    readiness: Option<Readiness>,
    status_hook: Option<Arc<dyn StatusHook<K>>>,
    backoff: ErrorBackoff,
    instance: Option<String>,
    related: Vec<RelatedWatch<K>>,
    sharding: Option<Sharding>,
    trim: Option<fn(&mut K)>,
    version_source: Option<fn(&K) -> Option<ObjectVersion>>,
}

/// A watch on another kind whose changes name objects of `K` to reconcile.
struct RelatedWatch<K: Watched> {
    /// Starts the watch with this configuration (the shard selector when sharded).
    start: Box<dyn FnOnce(watcher::Config) -> stream::BoxStream<'static, ObjectRef<K>> + Send>,
    /// The kind, for the sharder to assign.
    kind: Arc<dyn ShardedKind>,
}

impl<K: Watched> Debug for ControllerBuilder<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControllerBuilder")
            .field("name", &self.name)
            .field("operator", &self.operator)
            .field("routing", &self.routing)
            .field("sets", &self.sets)
            .field("selector", &self.selector)
            .field("concurrency", &self.concurrency)
            .field("resync", &self.resync)
            .field("related", &self.related.len())
            .finish_non_exhaustive()
    }
}

impl<K: Watched> ControllerBuilder<K> {
    /// Also reconcile objects of `K` when an object of kind `C` changes (is created, updated,
    /// including its status, or deleted): `map` names the objects to reconcile, for example the
    /// cluster a node pool belongs to by its label. An object named that does not exist is
    /// skipped. The related objects are watched, not cached.
    pub fn watches<C, F>(self, api: Api<C>, map: F) -> Self
    where
        C: Watched,
        F: Fn(&C) -> Vec<ObjectRef<K>> + Send + Sync + 'static,
    {
        self.watches_selected(api, None, map)
    }

    /// [`watches`](Self::watches) for the objects of `C` that match the label `selector` only:
    /// the watch selects them on the API server, and when sharded the sharder assigns only
    /// those (a related kind such as Pods must not have every pod of the cluster labelled).
    pub fn watches_selected<C, F>(mut self, api: Api<C>, selector: Option<String>, map: F) -> Self
    where
        C: Watched,
        F: Fn(&C) -> Vec<ObjectRef<K>> + Send + Sync + 'static,
    {
        let kind: Arc<dyn ShardedKind> = Arc::new(KindHandle::new(api.clone(), selector.clone()));
        let start = Box::new(move |mut config: watcher::Config| {
            if let Some(own) = &selector {
                config.label_selector = Some(match config.label_selector.take() {
                    Some(shard) => format!("{own},{shard}"),
                    None => own.clone(),
                });
            }
            watcher::watcher(api, config)
                .default_backoff()
                .touched_objects()
                // Watch errors are retried by the backoff; only objects reach the mapper.
                .filter_map(|result| std::future::ready(result.ok()))
                .flat_map(move |obj: C| stream::iter(map(&obj)))
                .boxed()
        });
        self.related.push(RelatedWatch { start, kind });
        self
    }

    /// Shard the objects over the replicas instead of leaving them all to the leader (see
    /// [`crate::sharding`]): watch only this replica's objects (the kinds of
    /// [`watches`](Self::watches) too, which the sharder then assigns alongside), fence writes
    /// with the shard Lease, and hand drained objects over. Replaces
    /// [`leadership`](Self::leadership). Build every sharded controller before
    /// [`Sharding::run`] starts.
    pub fn sharding(mut self, sharding: &Sharding) -> Self {
        self.sharding = Some(sharding.clone());
        self
    }

    /// The operator (Release component) whose version selects the resource set, e.g.
    /// `aws-operator`. Required.
    pub fn operator(mut self, component: impl Into<String>) -> Self {
        self.operator = component.into();
        self
    }

    /// Where an object without the `release.giantswarm.io/version` label names the operator
    /// version that runs it (release mode only): such an object is routed by that version, and
    /// its Release is the one giving this operator's component that version
    /// ([`crate::router`]'s module docs). Without a source, such an object is unroutable.
    pub fn version_source(mut self, source: fn(&K) -> Option<ObjectVersion>) -> Self {
        self.version_source = Some(source);
        self
    }

    /// Release routing (the default) or legacy label routing.
    pub fn routing(mut self, routing: Routing) -> Self {
        self.routing = routing;
        self
    }

    /// Add a resource set. Sets must not overlap.
    pub fn resource_set(mut self, set: ResourceSet<K>) -> Self {
        self.sets.push(set);
        self
    }

    /// Watch through this API (e.g. `Api::namespaced` to restrict the controller to one
    /// namespace). Default: all namespaces.
    pub fn api(mut self, api: Api<K>) -> Self {
        self.api = Some(api);
        self
    }

    /// Watch only objects matching this label selector (applied by the API server).
    pub fn label_selector(mut self, selector: impl Into<String>) -> Self {
        self.selector = Some(selector.into());
        self
    }

    /// Drop from each object, before it is cached, what no resource of the controller reads
    /// (for example a Pod's `spec` when only its metadata and status are used). The cache is
    /// the controller's largest hold on memory: one copy of every watched object. The objects
    /// handed to the resources are the trimmed ones. `managedFields` are always dropped.
    pub fn trim_cached(mut self, trim: fn(&mut K)) -> Self {
        self.trim = Some(trim);
        self
    }

    /// At most `n` reconciles at once (0 = unbounded). Default 4.
    pub fn concurrency(mut self, n: u16) -> Self {
        self.concurrency = n;
        self
    }

    /// Reconcile every object at least this often. Default 5 minutes.
    pub fn resync(mut self, every: Duration) -> Self {
        self.resync = every;
        self
    }

    /// Also pause objects annotated `key: value` (besides the two defaults).
    pub fn pause_annotation(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.pause.insert(key.into(), value.into());
        self
    }

    /// Reconcile only while this replica leads. Default: always.
    pub fn leadership(mut self, leadership: Leadership) -> Self {
        self.leadership = leadership;
        self
    }

    /// The operator-wide settings: [`concurrency`](Self::concurrency),
    /// [`resync`](Self::resync), [`leadership`](Self::leadership) and, when set,
    /// [`sharding`](Self::sharding).
    pub fn run_settings(self, settings: &RunSettings) -> Self {
        let builder =
            self.concurrency(settings.concurrency).resync(settings.resync).leadership(settings.leadership.clone());
        match &settings.sharding {
            Some(sharding) => builder.sharding(sharding),
            None => builder,
        }
    }

    /// Record metrics here.
    pub fn metrics(mut self, metrics: &Metrics) -> Self {
        self.metrics = Some(metrics.clone());
        self
    }

    /// Register the controller's caches as readiness checks.
    pub fn readiness(mut self, readiness: &Readiness) -> Self {
        self.readiness = Some(readiness.clone());
        self
    }

    /// Report routing problems in the object's status through `hook`.
    pub fn status_hook(mut self, hook: impl StatusHook<K> + 'static) -> Self {
        self.status_hook = Some(Arc::new(hook));
        self
    }

    /// The per-object backoff after failures.
    pub fn error_backoff(mut self, backoff: ErrorBackoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// The `reportingInstance` of events (usually the pod name). Default: the host name.
    pub fn reporting_instance(mut self, instance: impl Into<String>) -> Self {
        self.instance = Some(instance.into());
        self
    }

    /// Check the configuration and build the controller.
    pub fn build(self) -> Result<Controller<K>, BuildError> {
        if !valid_name(&self.name) {
            return Err(BuildError::InvalidName(self.name));
        }
        for set in &self.sets {
            if set.resource_names().is_empty() {
                return Err(BuildError::EmptyResourceSet(set.name().to_string()));
            }
        }
        let router = Router::new(
            self.operator,
            self.routing,
            self.sets.iter().map(|s| (s.name().to_string(), s.requirement().clone())),
        )?;
        let selector = match (self.selector, router.legacy_selector()) {
            (Some(a), Some(b)) => Some(format!("{a},{b}")),
            (a, b) => a.or(b),
        };
        let mut api = self.api.unwrap_or_else(|| Api::all(self.client.clone()));
        let mut leadership = self.leadership;
        let mut related_config = watcher::Config::default();
        let mut namespace_field = None;
        let mut range_gate = None;
        let watch_selector = match &self.sharding {
            Some(sharding) if sharding.config().mode == ShardingMode::NamespaceRanges => {
                // The watch carries the replica's current shardSelector: an all-namespaces Api
                // on a client that adds it, narrowed to the configured namespace by a field.
                leadership = sharding.held();
                let view = sharding.ranges().view.subscribe();
                namespace_field = api.namespace().map(|ns| format!("metadata.namespace={ns}"));
                api = Api::all_with(ShardSelectingClient::client(self.client.clone(), view.clone()), &());
                let running = Arc::new(Mutex::new(Vec::new()));
                sharding.ranges().running.lock().push(running.clone());
                range_gate = Some((view, running));
                selector
            }
            Some(sharding) => {
                sharding.register_kind(Arc::new(KindHandle::new(api.clone(), selector.clone())));
                for related in &self.related {
                    sharding.register_kind(related.kind.clone());
                }
                leadership = sharding.held();
                related_config = related_config.labels(&sharding.selector());
                Some(match &selector {
                    Some(s) => format!("{s},{}", sharding.selector()),
                    None => sharding.selector(),
                })
            }
            None => selector,
        };
        let mut watch = watcher::Config::default();
        if let Some(selector) = &watch_selector {
            watch = watch.labels(selector);
        }
        if let Some(field) = &namespace_field {
            watch = watch.fields(field);
        }
        let writer = reflector::store::Writer::<K>::default();
        let objects = writer.as_reader();
        let release = match router.routing() {
            Routing::Release => {
                let writer = reflector::store::Writer::<Release>::default();
                Some((Api::<Release>::all(self.client.clone()), writer))
            }
            Routing::Legacy { .. } => None,
        };
        let releases = release.as_ref().map(|(_, w)| w.as_reader());
        let name: Arc<str> = self.name.clone().into();
        if let Some(metrics) = &self.metrics {
            let store = objects.clone();
            metrics.add_timestamp_source(&name, &K::kind(&()), Box::new(move || object_times(&store)));
        }
        let readiness = self.readiness.map(|r| {
            let objects = r.register(format!("controller/{name}/objects"));
            let releases = releases.as_ref().map(|_| r.register(format!("controller/{name}/releases")));
            (objects, releases)
        });
        let (grant_tx, grants) = futures::channel::mpsc::unbounded();
        let shared = Shared {
            finalizer: finalizer_name(&name),
            warnings: Events::with_instance(self.client.clone(), &name, self.instance),
            client: self.client,
            name,
            router,
            version_source: self.version_source,
            sets: self.sets,
            objects,
            releases_ready: tokio::sync::watch::channel(releases.is_none()).0,
            releases,
            pause: self.pause,
            resync: self.resync,
            leadership,
            sharding: self.sharding.map(|sharding| ShardGate {
                sharding,
                acquired: AtomicU64::new(0),
                listed: AtomicU64::new(0),
                ranges: range_gate,
            }),
            metrics: self.metrics,
            status_hook: self.status_hook,
            backoff: self.backoff,
            failures: Mutex::new(HashMap::new()),
            finalized: Mutex::new(HashMap::new()),
            pending: Mutex::new(HashSet::new()),
            own_writes: Arc::new(Mutex::new(HashMap::new())),
            left_to_others: Mutex::new(HashSet::new()),
            loops: AtomicU64::new(0),
            turns: (self.concurrency > 0).then(|| Turns::new(self.concurrency.into(), grant_tx)),
            stopping: CancellationToken::new(),
        };
        Ok(Controller {
            shared: Arc::new(shared),
            api,
            watch,
            writer,
            release,
            concurrency: self.concurrency,
            readiness,
            related: self.related.into_iter().map(|r| (r.start)(related_config.clone())).collect(),
            trim: self.trim,
            grants,
        })
    }
}

/// Controller names form finalizers `operatorkit.giantswarm.io/<name>`, whose name part is a
/// Kubernetes qualified name: at most 63 characters.
fn valid_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    !name.is_empty()
        && name.len() <= 63
        && bytes.iter().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-' || *b == b'.')
        && bytes.first().is_some_and(u8::is_ascii_alphanumeric)
        && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
}

fn object_times<K: Watched>(store: &Store<K>) -> Vec<ObjectTimes> {
    let seconds = |t: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time| t.0.as_millisecond() as f64 / 1000.0;
    store
        .state()
        .iter()
        .map(|obj| {
            let meta = obj.meta();
            ObjectTimes {
                name: meta.name.clone().unwrap_or_default(),
                namespace: meta.namespace.clone().unwrap_or_default(),
                created: meta.creation_timestamp.as_ref().map(seconds),
                deleted: meta.deletion_timestamp.as_ref().map(seconds),
            }
        })
        .collect()
}

/// A controller for objects of kind `K`. Build it with [`Controller::builder`], start it with
/// [`Controller::run`].
pub struct Controller<K: Watched> {
    shared: Arc<Shared<K>>,
    api: Api<K>,
    watch: watcher::Config,
    writer: reflector::store::Writer<K>,
    release: Option<(Api<Release>, reflector::store::Writer<Release>)>,
    concurrency: u16,
    readiness: Option<(ReadyFlag, Option<ReadyFlag>)>,
    related: Vec<stream::BoxStream<'static, ObjectRef<K>>>,
    trim: Option<fn(&mut K)>,
    /// The objects whose turn came while they waited in the queue of turns.
    grants: futures::channel::mpsc::UnboundedReceiver<ObjectRef<K>>,
}

impl<K: Watched> Debug for Controller<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Controller")
            .field("name", &self.shared.name)
            .field("finalizer", &self.shared.finalizer)
            .field("router", &self.shared.router)
            .field("concurrency", &self.concurrency)
            .finish_non_exhaustive()
    }
}

impl<K: Watched> Controller<K> {
    /// Start configuring a controller called `name` (unique per purpose cluster-wide; it names
    /// the finalizer, the event reporter and the `controller` label of logs and metrics).
    pub fn builder(client: Client, name: impl Into<String>) -> ControllerBuilder<K> {
        ControllerBuilder {
            client,
            name: name.into(),
            operator: String::new(),
            routing: Routing::Release,
            sets: Vec::new(),
            api: None,
            selector: None,
            concurrency: DEFAULT_CONCURRENCY,
            resync: DEFAULT_RESYNC,
            pause: default_pause_annotations(),
            leadership: Leadership::always(),
            metrics: None,
            readiness: None,
            status_hook: None,
            backoff: ErrorBackoff::default(),
            instance: None,
            related: Vec::new(),
            sharding: None,
            trim: None,
            version_source: None,
        }
    }

    /// The controller's name.
    pub fn name(&self) -> &str {
        &self.shared.name
    }

    /// The controller's finalizer.
    pub fn finalizer(&self) -> &str {
        &self.shared.finalizer
    }

    /// The cache of watched objects (filled while the controller runs).
    pub fn store(&self) -> Store<K> {
        self.shared.objects.clone()
    }

    /// The cache of Releases (release mode only).
    pub fn release_store(&self) -> Option<Store<Release>> {
        self.shared.releases.clone()
    }

    /// Run until `shutdown` is cancelled, then let the reconciles already running finish.
    pub async fn run(self, shutdown: CancellationToken) {
        self.run_until(async move { shutdown.cancelled().await }).await;
    }

    /// Run until `shutdown` resolves, then let the reconciles already running finish.
    pub async fn run_until(self, shutdown: impl Future<Output = ()> + Send + 'static) {
        let Controller { shared, api, watch, writer, release, concurrency, readiness, related, trim, grants } = self;
        // Every controller's series exist from its start, at 0, so that a dashboard or an alert
        // tells "idle" from "not running".
        if let Some(m) = &shared.metrics {
            m.set_queue_depth(&shared.name, 0);
            let _ = m.in_flight(&shared.name);
        }
        // kube-runtime wants a Sync shutdown future; a oneshot receiver is one whatever the
        // caller's future is.
        let (stop_tx, stop_rx) = futures::channel::oneshot::channel::<()>();
        let stopping = shared.stopping.clone();
        let stop_seen = stopping.clone();
        let stop_task = tokio::spawn(async move {
            shutdown.await;
            stop_seen.cancel();
            let _ = stop_tx.send(());
        });
        // Whether the object cache finished its initial list. kube-runtime holds its runner
        // until then, and stops polling the watch once shutdown begins: a shutdown that comes
        // before the first list completes would otherwise wait forever for a cache that can no
        // longer fill. Until the flag is set no reconcile has started, so nothing is cut short.
        let listed = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let listed_flag = listed.clone();

        let (objects_flag, releases_flag) = match readiness {
            Some((objects, releases)) => (Some(objects), releases),
            None => (None, None),
        };
        // Readiness is observed on the watch streams, after the reflector applied the event:
        // `Store::wait_until_ready` wakes only one of several concurrent waiters, and the
        // kube-runtime applier is already one.
        let marking = shared.clone();
        let own_finalizer = shared.finalizer.clone();
        let (relisted_tx, relisted_rx) = futures::channel::mpsc::unbounded::<()>();
        let epochs = shared.clone();
        let raw = match &shared.sharding {
            Some(gate) => {
                let view = gate.ranges.as_ref().map(|(view, _)| view.clone());
                sharded_watch(api, watch, gate.sharding.held(), view, shared.clone()).boxed()
            }
            None => watcher::watcher(api, watch).default_backoff().boxed(),
        };
        let objects = raw
            // managedFields are often the largest part of an object and no resource needs
            // them: dropping them before the cache roughly halves its memory.
            .modify(move |obj: &mut K| {
                obj.meta_mut().managed_fields = None;
                if let Some(trim) = trim {
                    trim(obj);
                }
            })
            .reflect(writer)
            .inspect_ok(move |event| {
                if matches!(event, Event::InitDone) {
                    if let Some(gate) = &epochs.sharding {
                        // The cache now reflects the shard as it is since the Lease was taken.
                        let epoch = gate.acquired.load(Ordering::SeqCst);
                        gate.listed.store(epoch, Ordering::SeqCst);
                        if epoch > 1 {
                            let _ = relisted_tx.unbounded_send(());
                        }
                    }
                    listed_flag.store(true, std::sync::atomic::Ordering::SeqCst);
                    if let Some(flag) = &objects_flag {
                        flag.set(true);
                    }
                }
            })
            .flat_map({
                let mut changes = Changes::<K>::new(own_finalizer, shared.own_writes.clone());
                move |event| stream::iter(changes.on(event))
            })
            .inspect_ok(move |obj: &K| marking.mark_pending([ObjectRef::from_obj(obj)]))
            .try_filter({
                let shared = shared.clone();
                move |obj: &K| std::future::ready(shared.admit(&ObjectRef::from_obj(obj)))
            });
        // The bound is the FIFO queue of turns in `reconcile` (see the module docs), which
        // kube-runtime's own bound is not. kube-runtime's bound leaves room beside the objects
        // handed to it (twice the turns) for reconciles that only join the queue, so that
        // kube-runtime's bound never holds up the turns.
        let mut controller = RuntimeController::for_stream(objects, shared.objects.clone())
            .with_config(RuntimeConfig::default().concurrency(concurrency.saturating_mul(3)))
            // The head of the queue of turns, when a place in kube-runtime passes to it.
            .reconcile_on(grants);

        if let Some((release_api, release_writer)) = release {
            let ready = shared.clone();
            let events = watcher::watcher(release_api, watcher::Config::default())
                .default_backoff()
                .reflect(release_writer)
                .inspect_ok(move |event| {
                    if matches!(event, Event::InitDone) {
                        ready.releases_ready.send_replace(true);
                        if let Some(flag) = &releases_flag {
                            flag.set(true);
                        }
                    }
                });
            let mapper = shared.clone();
            controller = controller.watches_stream(release_changes(events), move |release: Release| {
                let mut refs = mapper.objects_of_release(&release);
                refs.retain(|oref| mapper.admit(oref));
                refs
            });
        }
        for watch in related {
            let marking = shared.clone();
            // Only objects in the cache are queued: a name that maps to nothing is dropped here
            // rather than counted as pending forever.
            let known = watch.filter(move |oref| {
                let exists = marking.objects.get(oref).is_some();
                if exists {
                    marking.mark_pending([oref.clone()]);
                }
                std::future::ready(exists && marking.admit(oref))
            });
            controller = controller.reconcile_on(known);
        }
        let bulk = shared.clone();
        // Everything cached is reconciled when this replica becomes the leader, or, sharded,
        // when it re-listed its share after taking its shard Lease back.
        let everything = match &shared.sharding {
            Some(_) => relisted_rx.boxed(),
            None => leadership_gained(shared.leadership.clone()).boxed(),
        };
        controller = controller
            .reconcile_on(everything.flat_map(move |()| {
                let mut refs: Vec<_> = bulk.objects.state().iter().map(|o| ObjectRef::from_obj(&**o)).collect();
                bulk.mark_pending(refs.iter().cloned());
                refs.retain(|oref| bulk.admit(oref));
                stream::iter(refs)
            }))
            .graceful_shutdown_on(stop_rx.map(|_| ()));

        tracing::info!(controller = %shared.name, finalizer = %shared.finalizer, "controller starting");
        let running = controller.run(reconcile::<K>, error_policy::<K>, shared.clone()).for_each(|result| async move {
            match result {
                Ok(_) | Err(kube::runtime::controller::Error::ReconcilerFailed(..)) => {}
                Err(kube::runtime::controller::Error::ObjectNotFound(object)) => {
                    tracing::trace!(%object, "object gone before its reconcile");
                }
                Err(error) => tracing::warn!(%error, "controller stream error"),
            }
        });
        let stopped_before_listing = async move {
            stopping.cancelled().await;
            if listed.load(std::sync::atomic::Ordering::SeqCst) {
                // Reconciles may be running: let kube-runtime's graceful shutdown finish them.
                std::future::pending::<()>().await;
            }
        };
        tokio::select! {
            () = running => {}
            () = stopped_before_listing => {
                tracing::debug!(controller = %shared.name, "stopped before the first list completed");
            }
        }
        stop_task.abort();
        tracing::info!(controller = %shared.name, "controller stopped");
    }
}

/// The watch of a sharded controller: one watch per term of the shard Lease, each started
/// after the Lease was taken and ended when it is lost. Each term starts with a full list, so
/// the cache forgets objects moved away while the Lease was lost; reconciles wait for it
/// ([`ShardGate::fresh`]).
fn sharded_watch<K: Watched>(
    api: Api<K>,
    config: watcher::Config,
    held: Leadership,
    view: Option<tokio::sync::watch::Receiver<RangeView>>,
    shared: Arc<Shared<K>>,
) -> impl Stream<Item = Result<Event<K>, watcher::Error>> + Send + 'static {
    stream::unfold((held, view), move |(mut held, mut view)| {
        let (api, config, shared) = (api.clone(), config.clone(), shared.clone());
        async move {
            held.acquired().await;
            // Namespace-range mode: a term also needs an adopted range, and ends when it changes.
            let owned = match &mut view {
                Some(view) => {
                    let owned = view.wait_for(|v| v.owned.is_some()).await.ok().and_then(|v| v.owned);
                    if owned.is_none() {
                        std::future::pending::<()>().await;
                    }
                    owned
                }
                None => None,
            };
            if let Some(gate) = &shared.sharding {
                let epoch = gate.acquired.fetch_add(1, Ordering::SeqCst) + 1;
                tracing::info!(controller = %shared.name, shard = %gate.sharding.shard(), term = epoch, range = ?owned, "shard Lease held; listing this shard's objects");
            }
            let mut lost = held.clone();
            let mut moved = view.clone();
            let ended = async move {
                let range_changed = async {
                    match &mut moved {
                        Some(view) => {
                            let _ = view.wait_for(|v| v.owned != owned).await;
                        }
                        None => std::future::pending::<()>().await,
                    }
                };
                tokio::select! {
                    () = lost.lost() => {}
                    () = range_changed => {}
                }
            };
            let term = watcher::watcher(api, config).default_backoff().take_until(ended);
            Some((term, (held, view)))
        }
    })
    .flatten()
}

/// The change predicate on the watch: an applied object passes if its
/// [`change_hash_ignoring`] differs from the last one seen. Unlike kube-runtime's
/// `predicate_filter`, it forgets objects that leave the watch (deleted, or no longer selected,
/// or gone in a re-list): an object that comes back unchanged, as a sharded object returning to
/// a shard it had before does, is a change for this cache.
///
/// The version the controller's own finalizer patch wrote is not a change either: the reconcile
/// that wrote it went on with that version. For kinds with a generation the hash already ignores
/// the patch; for kinds without one (ConfigMaps, Secrets) the new resourceVersion would make
/// the patch's echo a second reconcile of every new object, so the hash of the written version
/// is recorded in [`OwnWrites`] and its watch event passes only if it differs.
struct Changes<K: Watched> {
    own_finalizer: String,
    hashes: HashMap<ObjectRef<K>, u64>,
    /// Objects seen since a re-list began.
    relisted: Option<HashSet<ObjectRef<K>>>,
    own_writes: OwnWrites<K>,
}

/// The change hashes of the versions this controller's own finalizer patches wrote, until their
/// watch event arrives (or the object leaves the watch).
type OwnWrites<K> = Arc<Mutex<HashMap<ObjectRef<K>, u64>>>;

impl<K: Watched> Changes<K> {
    fn new(own_finalizer: String, own_writes: OwnWrites<K>) -> Self {
        Self { own_finalizer, hashes: HashMap::new(), relisted: None, own_writes }
    }

    fn on(&mut self, event: Result<Event<K>, watcher::Error>) -> Vec<Result<K, watcher::Error>> {
        match event {
            Err(error) => vec![Err(error)],
            Ok(Event::Init) => {
                self.relisted = Some(HashSet::new());
                Vec::new()
            }
            Ok(Event::InitDone) => {
                if let Some(seen) = self.relisted.take() {
                    self.hashes.retain(|oref, _| seen.contains(oref));
                    self.own_writes.lock().retain(|oref, _| seen.contains(oref));
                }
                Vec::new()
            }
            Ok(Event::Delete(obj)) => {
                let oref = ObjectRef::from_obj(&obj);
                self.own_writes.lock().remove(&oref);
                self.hashes.remove(&oref);
                Vec::new()
            }
            Ok(Event::Apply(obj) | Event::InitApply(obj)) => {
                let oref = ObjectRef::from_obj(&obj);
                if let Some(seen) = &mut self.relisted {
                    seen.insert(oref.clone());
                }
                // Whatever this event is, a recorded own write of this object is answered by it:
                // the echo itself, or a newer version (the echo then never comes).
                let own_write = self.own_writes.lock().remove(&oref);
                let changed = match change_hash_ignoring(&obj, Some(&self.own_finalizer)) {
                    Some(hash) => self.hashes.insert(oref, hash) != Some(hash) && own_write != Some(hash),
                    None => true,
                };
                if changed {
                    vec![Ok(obj)]
                } else {
                    tracing::trace!(object = ?obj.meta().name, "unchanged; not reconciling");
                    Vec::new()
                }
            }
        }
    }
}

/// Emits once each time this replica becomes the leader (not at start if it already leads: the
/// initial list reconciles everything then).
fn leadership_gained(leadership: Leadership) -> impl Stream<Item = ()> + Send + 'static {
    let leads = leadership.is_leader();
    stream::unfold((leadership, leads), |(mut leadership, leads)| async move {
        if leads {
            leadership.lost().await;
        }
        leadership.acquired().await;
        Some(((), (leadership, true)))
    })
}

/// Reduces the Release watch to the changes that matter for routing: a Release that appears,
/// changes its spec (generation) or goes away. The initial list triggers nothing (the objects'
/// own initial list reconciles them); a re-list after a watch gap reports what changed in it.
fn release_changes(
    events: impl Stream<Item = Result<Event<Release>, watcher::Error>> + Send + 'static,
) -> impl Stream<Item = Result<Release, watcher::Error>> + Send + 'static {
    let mut filter = ReleaseChanges::default();
    events.flat_map(move |event| {
        let out: Vec<Result<Release, watcher::Error>> = match event {
            Ok(event) => filter.on(event).into_iter().map(Ok).collect(),
            Err(error) => vec![Err(error)],
        };
        stream::iter(out)
    })
}

#[derive(Default)]
struct ReleaseChanges {
    known: HashMap<String, (Option<i64>, Release)>,
    synced: bool,
    relisted: Option<HashSet<String>>,
}

impl ReleaseChanges {
    /// Remember `release`; true if it is new or its spec changed.
    fn record(&mut self, release: &Release) -> bool {
        let name = release.metadata.name.clone().unwrap_or_default();
        // Without a generation every write counts as a change.
        let generation = release.metadata.generation;
        let changed = match self.known.get(&name) {
            Some((known, _)) => generation.is_none() || *known != generation,
            None => true,
        };
        self.known.insert(name, (generation, release.clone()));
        changed
    }

    fn on(&mut self, event: Event<Release>) -> Vec<Release> {
        match event {
            Event::Init => {
                self.relisted = Some(HashSet::new());
                Vec::new()
            }
            Event::InitApply(release) => {
                if let Some(seen) = &mut self.relisted {
                    seen.insert(release.metadata.name.clone().unwrap_or_default());
                }
                let changed = self.record(&release);
                if self.synced && changed { vec![release] } else { Vec::new() }
            }
            Event::InitDone => {
                let seen = self.relisted.take().unwrap_or_default();
                let gone: Vec<String> = self.known.keys().filter(|n| !seen.contains(*n)).cloned().collect();
                let was_synced = std::mem::replace(&mut self.synced, true);
                let removed: Vec<Release> = gone.iter().filter_map(|n| self.known.remove(n)).map(|(_, r)| r).collect();
                if was_synced { removed } else { Vec::new() }
            }
            Event::Apply(release) => {
                if self.record(&release) {
                    vec![release]
                } else {
                    Vec::new()
                }
            }
            Event::Delete(release) => {
                self.known.remove(release.metadata.name.as_deref().unwrap_or_default());
                vec![release]
            }
        }
    }
}

/// State shared by every reconcile of one controller.
struct Shared<K: Watched> {
    name: Arc<str>,
    finalizer: String,
    client: Client,
    router: Router,
    /// Reads the version an object without the release label names itself.
    version_source: Option<fn(&K) -> Option<ObjectVersion>>,
    sets: Vec<ResourceSet<K>>,
    objects: Store<K>,
    releases: Option<Store<Release>>,
    /// Whether the Release cache has synced (always true in legacy mode).
    releases_ready: tokio::sync::watch::Sender<bool>,
    pause: BTreeMap<String, String>,
    resync: Duration,
    leadership: Leadership,
    sharding: Option<ShardGate>,
    metrics: Option<Metrics>,
    warnings: Events,
    status_hook: Option<Arc<dyn StatusHook<K>>>,
    backoff: ErrorBackoff,
    /// Consecutive failures (and stale-cache conflicts) per object, for the backoff.
    failures: Mutex<HashMap<ObjectRef<K>, u32>>,
    /// UIDs whose finalizer this process removed, and when: a stale cache entry must not run
    /// the deletion again (operatorkit #268). Entries expire after three resync periods.
    finalized: Mutex<HashMap<String, Instant>>,
    /// Objects with a reconcile request that has not started: the queue depth.
    pending: Mutex<HashSet<ObjectRef<K>>>,
    /// The versions the finalizer patches wrote, for the change filter to recognise their echo.
    own_writes: OwnWrites<K>,
    /// Objects routed to another operator version, logged once at info when they became so.
    left_to_others: Mutex<HashSet<ObjectRef<K>>>,
    loops: AtomicU64,
    /// The turns of `concurrency` reconciles at once, handed out first come, first served
    /// (`None`: unbounded).
    turns: Option<Turns<K>>,
    /// Cancelled when shutdown begins: reconciles still waiting for a turn end without working.
    stopping: CancellationToken,
}

/// How long a place set aside in kube-runtime is kept for an object. The object is triggered at
/// once and normally arrives within milliseconds; one deleted in between never arrives, and its
/// place is given back after this.
const GRANT_TTL: Duration = Duration::from_secs(30);

/// The FIFO queue of turns (see the module docs). Of the objects due, at most `2 × limit` are
/// handed to kube-runtime at once (they wait for one of the `limit` turns there, on a fair
/// semaphore, which wakes the next at once when a turn ends); the others wait in the queue,
/// which costs an entry each. Handing an object over takes a trigger through kube-runtime's
/// scheduler, which is not immediate: the `limit` objects waiting in kube-runtime keep every
/// turn busy meanwhile.
struct Turns<K: Watched> {
    /// Objects handed to kube-runtime at once: working or waiting for a turn.
    window: usize,
    /// The turns: reconciles that work at once, first come, first served.
    permits: Arc<tokio::sync::Semaphore>,
    state: Mutex<TurnState<K>>,
    /// Triggers the head of the queue when a place in kube-runtime passes to it.
    grants: futures::channel::mpsc::UnboundedSender<ObjectRef<K>>,
}

struct TurnState<K: Watched> {
    /// Objects handed to kube-runtime, the ones a place was set aside for included.
    inside: usize,
    /// Objects waiting for a place, in the order they became due, each once (one allocation
    /// for both collections).
    waiting: VecDeque<Arc<ObjectRef<K>>>,
    queued: HashSet<Arc<ObjectRef<K>>>,
    /// Objects a place was set aside for, and when.
    granted: HashMap<ObjectRef<K>, Instant>,
}

/// A reconcile's place in kube-runtime; passed on to the head of the queue (or given back)
/// when dropped, however the reconcile ends.
struct Place<K: Watched> {
    shared: Arc<Shared<K>>,
}

impl<K: Watched> Drop for Place<K> {
    fn drop(&mut self) {
        if let Some(turns) = &self.shared.turns {
            turns.pass_on(&self.shared.objects);
        }
    }
}

impl<K: Watched> Turns<K> {
    fn new(limit: usize, grants: futures::channel::mpsc::UnboundedSender<ObjectRef<K>>) -> Self {
        let state = TurnState { inside: 0, waiting: VecDeque::new(), queued: HashSet::new(), granted: HashMap::new() };
        Self {
            window: limit.saturating_mul(2),
            permits: Arc::new(tokio::sync::Semaphore::new(limit)),
            state: Mutex::new(state),
            grants,
        }
    }

    /// A request to reconcile `oref` (a watch event, a related object, a Release): whether to
    /// pass it on to kube-runtime now. It passes, with a place set aside for it, when there is
    /// room and nobody waits; otherwise `oref` joins the queue (once) and is triggered when its
    /// place comes. So a burst of requests (the initial list of thousands of objects) waits in
    /// the queue, not in kube-runtime.
    fn admit(&self, oref: &ObjectRef<K>) -> bool {
        let mut state = self.state.lock();
        if state.granted.contains_key(oref) {
            return true;
        }
        state.expire_grants();
        if state.inside < self.window && state.waiting.is_empty() {
            state.inside += 1;
            state.granted.insert(key(oref), Instant::now());
            return true;
        }
        state.enqueue(oref);
        false
    }

    /// Take a place for `oref` as its reconcile starts: the one set aside for it, or a free one
    /// if nobody waits (kube-runtime's own requeues come here without [`admit`](Self::admit)).
    /// Otherwise `oref` joins the queue (once) and `false` is returned.
    fn take(&self, oref: &ObjectRef<K>) -> bool {
        let mut state = self.state.lock();
        if state.granted.remove(oref).is_some() {
            return true;
        }
        state.expire_grants();
        if state.inside < self.window && state.waiting.is_empty() {
            state.inside += 1;
            return true;
        }
        state.enqueue(oref);
        false
    }

    /// A reconcile ends: its place passes to the first object of the queue that still exists,
    /// or is given back.
    fn pass_on(&self, objects: &Store<K>) {
        let mut state = self.state.lock();
        while let Some(next) = state.waiting.pop_front() {
            state.queued.remove(&next);
            if objects.get(&next).is_some() && self.grants.unbounded_send(ObjectRef::clone(&next)).is_ok() {
                state.granted.insert(ObjectRef::clone(&next), Instant::now());
                return;
            }
        }
        state.inside = state.inside.saturating_sub(1);
    }
}

impl<K: Watched> TurnState<K> {
    /// Turns set aside for objects that never came (deleted meanwhile) are given back.
    fn expire_grants(&mut self) {
        let before = self.granted.len();
        self.granted.retain(|_, at| at.elapsed() < GRANT_TTL);
        self.inside -= before - self.granted.len();
    }

    fn enqueue(&mut self, oref: &ObjectRef<K>) {
        if !self.queued.contains(oref) {
            let key = Arc::new(key(oref));
            self.queued.insert(key.clone());
            self.waiting.push_back(key);
        }
    }
}

/// `oref` without its resourceVersion and UID, which identify nothing here (equality and hash
/// ignore them) and would cost two strings per object waiting.
fn key<K: Watched>(oref: &ObjectRef<K>) -> ObjectRef<K> {
    let key = ObjectRef::new(&oref.name);
    match &oref.namespace {
        Some(namespace) => key.within(namespace),
        None => key,
    }
}

/// A sharded controller's view of its shard.
struct ShardGate {
    sharding: Sharding,
    /// Terms of the shard Lease so far (1 = the first).
    acquired: AtomicU64,
    /// The term whose list the cache last completed.
    listed: AtomicU64,
    /// Namespace-range mode: the replica's ranges, and the hashes of the reconciles running.
    ranges: Option<(tokio::sync::watch::Receiver<RangeView>, RunningHashes)>,
}

/// Marks a reconcile of a namespace hash as running (namespace-range mode) until dropped.
struct RunningHash {
    running: RunningHashes,
    hash: u128,
}

impl Drop for RunningHash {
    fn drop(&mut self) {
        let mut running = self.running.lock();
        if let Some(i) = running.iter().position(|h| *h == self.hash) {
            running.swap_remove(i);
        }
    }
}

impl ShardGate {
    /// Whether the cache was listed in the current term of the shard Lease.
    fn fresh(&self) -> bool {
        let acquired = self.acquired.load(Ordering::SeqCst);
        acquired > 0 && self.listed.load(Ordering::SeqCst) == acquired
    }
}

impl<K: Watched> Shared<K> {
    /// Let go of an object the sharder moves elsewhere: remove its shard and drain labels,
    /// guarded by the cached resourceVersion. No reconcile of it runs here any more (the
    /// runtime never runs two of one object at once, so none is running now).
    async fn hand_over(&self, obj: &K, oref: &ObjectRef<K>, gate: &ShardGate) -> Result<Action, ReconcileError> {
        self.may_write()?;
        let patch = gate.sharding.acknowledge_patch(obj.meta());
        match finalizer::json_patch::<K>(&self.client, obj.meta(), &patch).await {
            Ok(_) => {
                tracing::info!(object = %oref, shard = %gate.sharding.shard(), "handed the object over to another shard");
                Ok(Action::await_change())
            }
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(Action::await_change()),
            Err(error) if finalizer::is_stale(&error) => {
                tracing::debug!(%error, "the cached object was stale when handing it over; requeueing");
                Ok(self.conflict_requeue(oref))
            }
            Err(source) => Err(ReconcileError::ShardHandover {
                shard_label: gate.sharding.config().shard_label(),
                drain_label: gate.sharding.config().drain_label(),
                source,
            }),
        }
    }

    /// Whether a request to reconcile `oref` goes to kube-runtime now, or waits in the queue of
    /// turns ([`Turns::admit`]).
    fn admit(&self, oref: &ObjectRef<K>) -> bool {
        self.turns.as_ref().is_none_or(|turns| turns.admit(oref))
    }

    fn mark_pending(&self, refs: impl IntoIterator<Item = ObjectRef<K>>) {
        self.update_pending(|pending| pending.extend(refs.into_iter().map(|oref| key(&oref))));
    }

    fn started(&self, oref: &ObjectRef<K>) {
        self.update_pending(|pending| {
            pending.remove(oref);
        });
    }

    fn update_pending(&self, change: impl FnOnce(&mut HashSet<ObjectRef<K>>)) {
        let depth = {
            let mut pending = self.pending.lock();
            change(&mut pending);
            pending.len()
        };
        if let Some(m) = &self.metrics {
            m.set_queue_depth(&self.name, depth);
        }
    }

    /// The cached objects that run `release`: those whose label names it, and those without
    /// the label whose own version is the Release's version of this operator's component.
    fn objects_of_release(&self, release: &Release) -> Vec<ObjectRef<K>> {
        let version = release.metadata.name.as_deref().unwrap_or_default().trim_start_matches('v');
        let parse = |v: &str| semver::Version::parse(v.trim().trim_start_matches('v')).ok();
        let component = release.component_version(self.router.component()).and_then(parse);
        let refs: Vec<_> = self
            .objects
            .state()
            .iter()
            .filter(|o| {
                match o
                    .meta()
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(labels::RELEASE_VERSION))
                    .filter(|v| !v.trim().is_empty())
                {
                    Some(v) => v.trim().trim_start_matches('v') == version,
                    None => match (self.version_source, &component) {
                        (Some(source), Some(component)) => {
                            source(o).and_then(|own| parse(&own.version)).is_some_and(|v| v == *component)
                        }
                        _ => false,
                    },
                }
            })
            .map(|o| ObjectRef::from_obj(&**o))
            .collect();
        if !refs.is_empty() {
            tracing::debug!(controller = %self.name, release = version, objects = refs.len(), "Release changed; requeueing its objects");
        }
        self.mark_pending(refs.iter().cloned());
        refs
    }

    fn record_failure(&self, oref: &ObjectRef<K>) -> u32 {
        let mut failures = self.failures.lock();
        // Objects deleted while failing never succeed again; forget them here rather than let
        // the map grow with churn. The map only holds failing objects, so this stays cheap.
        failures.retain(|failed, _| failed == oref || self.objects.get(failed).is_some());
        let n = failures.entry(oref.clone()).or_insert(0);
        *n = n.saturating_add(1);
        *n
    }

    fn clear_failures(&self, oref: &ObjectRef<K>) {
        self.failures.lock().remove(oref);
    }

    /// The requeue after a stale-cache conflict: at once the first time, then backing off so a
    /// cache that does not catch up cannot cause a hot loop.
    fn conflict_requeue(&self, oref: &ObjectRef<K>) -> Action {
        let n = self.record_failure(oref);
        Action::requeue(if n <= 1 { Duration::ZERO } else { self.backoff.delay(n - 1) })
    }

    fn recently_finalized(&self, uid: Option<&str>) -> bool {
        let Some(uid) = uid else { return false };
        let ttl = self.resync.saturating_mul(3);
        self.finalized.lock().get(uid).is_some_and(|at| at.elapsed() < ttl)
    }

    fn remember_finalized(&self, uid: Option<&str>) {
        let Some(uid) = uid else { return };
        let ttl = self.resync.saturating_mul(3);
        let mut finalized = self.finalized.lock();
        finalized.retain(|_, at| at.elapsed() < ttl);
        finalized.insert(uid.to_string(), Instant::now());
    }

    fn may_write(&self) -> Result<(), ReconcileError> {
        if self.leadership.is_leader() { Ok(()) } else { Err(ReconcileError::LeadershipLost) }
    }

    async fn reconcile(&self, obj: Arc<K>, oref: &ObjectRef<K>, loop_id: u64) -> Result<Action, ReconcileError> {
        let meta = obj.meta();
        let deleting = meta.deletion_timestamp.is_some();
        if let Some((annotation, value)) = paused_by(meta.annotations.as_ref(), &self.pause) {
            tracing::debug!(annotation, value, "object is paused; not reconciling");
            return Ok(Action::requeue(self.resync));
        }
        if deleting {
            if !has_finalizer(meta, &self.finalizer) {
                tracing::debug!("object is being deleted and does not carry our finalizer; nothing to do");
                return Ok(Action::await_change());
            }
            if self.recently_finalized(meta.uid.as_deref()) {
                tracing::debug!("finalizer already removed by this controller; the cache has not caught up yet");
                return Ok(Action::await_change());
            }
        }

        let empty = BTreeMap::new();
        let object_labels = meta.labels.as_ref().unwrap_or(&empty);
        let own_version = self.version_source.and_then(|source| source(&obj));
        let route = match &self.releases {
            Some(releases) => self.router.route_object(object_labels, own_version.as_ref(), releases),
            None => self.router.route_object(object_labels, own_version.as_ref(), &()),
        };
        let (set_index, version, release, from) = match route {
            Route::Matched { set, version, release, from } => (set, version, release, from),
            Route::NoMatch { version, release } => {
                let version = version.as_ref().map(|v| v.to_string());
                if self.left_to_others.lock().insert(oref.clone()) {
                    // Once per object (again after it was ours for a while): with several
                    // versions side by side this is normal, but an object that no running
                    // version reconciles must be findable in the logs.
                    tracing::info!(
                        operator = %self.router.component(),
                        version,
                        release,
                        "leaving the object to the operator version its Release names; no resource set of this process handles it"
                    );
                } else {
                    tracing::debug!(version, release, "another version of the operator owns the object");
                }
                if let Some(m) = &self.metrics {
                    m.no_resource_set(&self.name);
                }
                return Ok(Action::requeue(self.resync));
            }
            Route::Unroutable(problem) => {
                tracing::warn!(reason = problem.reason(), problem = %problem, "cannot route the object to a resource set");
                if let Some(m) = &self.metrics {
                    m.unroutable(&self.name, problem.reason());
                }
                if self.leadership.is_leader() {
                    Box::pin(self.warnings.warn(&*obj, "Route", problem.reason(), &problem.to_string())).await;
                    if let Some(hook) = &self.status_hook
                        && let Err(error) = hook.unroutable(&obj, &problem).await
                    {
                        tracing::warn!(%error, "the status hook failed to record the routing problem");
                    }
                }
                return Ok(Action::requeue(self.resync));
            }
        };

        let set = &self.sets[set_index];
        self.left_to_others.lock().remove(oref);
        if let Some(hook) = &self.status_hook {
            self.may_write()?;
            match hook.routed(&obj, set.name(), &version, &from).await {
                Ok(()) => {}
                // The hook writes against the cached resourceVersion on purpose: another writer
                // got there first, and the next reconcile writes the condition again.
                Err(error) if error.kind() == "Conflict" => {
                    tracing::debug!(%error, "the object changed before the routing condition was written");
                }
                Err(error) => tracing::warn!(%error, "the status hook failed to clear a routing problem"),
            }
        }
        let meta_info = ReconcileMeta {
            controller: self.name.clone(),
            set: set.name().into(),
            loop_id,
            version: Some(version),
            release,
            deleting,
        };
        let started = Instant::now();
        let end = set
            .runner()
            .run(obj.clone(), meta_info, self)
            .instrument(tracing::debug_span!("set", set = set.name()))
            .await?;
        let requeue = match end {
            SetEnd::Stale => {
                tracing::debug!("the cached object was stale when adding the finalizer; requeueing");
                return Ok(self.conflict_requeue(oref));
            }
            SetEnd::Ran { requeue, keep_finalizer } => {
                if deleting {
                    if keep_finalizer {
                        tracing::debug!("finalizer kept; the deletion will run again");
                    } else {
                        self.may_write()?;
                        if let Some(action) = Box::pin(self.remove_finalizer(&obj)).await? {
                            return Ok(action);
                        }
                    }
                }
                requeue
            }
        };
        self.clear_failures(oref);
        if let Some(m) = &self.metrics {
            m.reconcile_succeeded(&self.name, if deleting { "delete" } else { "update" }, started.elapsed());
        }
        Ok(Action::requeue(shortest(requeue, Some(self.resync)).unwrap_or(self.resync)))
    }

    /// Remove the finalizer; `Some(action)` when the reconcile must end with that action
    /// instead of succeeding normally.
    async fn remove_finalizer(&self, obj: &K) -> Result<Option<Action>, ReconcileError> {
        let meta = obj.meta();
        let Some(patch) = finalizer::remove_patch(meta, &self.finalizer) else {
            return Ok(None);
        };
        match finalizer::json_patch::<K>(&self.client, meta, &patch).await {
            Ok(_) => {
                tracing::debug!(finalizer = %self.finalizer, "finalizer removed");
                self.remember_finalized(meta.uid.as_deref());
                Ok(None)
            }
            Err(kube::Error::Api(status)) if status.code == 404 => {
                self.remember_finalized(meta.uid.as_deref());
                Ok(None)
            }
            Err(error) if finalizer::is_stale(&error) => {
                tracing::debug!(%error, "the cached object was stale when removing the finalizer; requeueing");
                Ok(Some(self.conflict_requeue(&ObjectRef::from_obj(obj))))
            }
            Err(source) => {
                Err(ReconcileError::Finalizer { action: "remove", finalizer: self.finalizer.clone(), source })
            }
        }
    }
}

impl<K: Watched> WritePaths<K> for Shared<K> {
    fn may_write(&self) -> Result<(), ReconcileError> {
        Shared::may_write(self)
    }

    fn ensure_finalizer<'a>(&'a self, obj: Arc<K>) -> BoxFuture<'a, Result<Option<Arc<K>>, ReconcileError>> {
        Box::pin(async move {
            let Some(patch) = finalizer::add_patch_body(obj.meta(), &self.finalizer) else {
                return Ok(Some(obj));
            };
            self.may_write()?;
            match finalizer::send_patch_body::<K>(&self.client, obj.meta(), None, finalizer::JSON_PATCH, patch).await {
                Ok(updated) => {
                    tracing::debug!(finalizer = %self.finalizer, "finalizer added");
                    // The reconcile goes on with this version: its watch event is no change.
                    if let Some(hash) = change_hash_ignoring(&updated, Some(&self.finalizer)) {
                        self.own_writes.lock().insert(ObjectRef::from_obj(&updated), hash);
                    }
                    Ok(Some(Arc::new(updated)))
                }
                Err(error) if finalizer::is_stale(&error) => {
                    tracing::debug!(%error, "finalizer patch lost against a newer version of the object");
                    Ok(None)
                }
                Err(source) => {
                    Err(ReconcileError::Finalizer { action: "add", finalizer: self.finalizer.clone(), source })
                }
            }
        })
    }
}

/// Decrements the in-flight gauge however the reconcile ends (including cancellation).
struct InFlight(Option<prometheus_client::metrics::gauge::Gauge>);

impl Drop for InFlight {
    fn drop(&mut self) {
        if let Some(g) = &self.0 {
            g.dec();
        }
    }
}

/// Take a place and then a turn, first come, first served, and reconcile; or join the queue of
/// turns and end at once (the object is triggered again when its place comes). The reconcile's
/// own future is allocated once the turn is taken.
async fn reconcile<K: Watched>(obj: Arc<K>, shared: Arc<Shared<K>>) -> Result<Action, ReconcileError> {
    let _turn = match &shared.turns {
        Some(turns) => {
            if !turns.take(&ObjectRef::from_obj(&*obj)) {
                return Ok(Action::await_change());
            }
            let place = Place { shared: shared.clone() };
            let turn = tokio::select! {
                biased;
                () = shared.stopping.cancelled() => return Ok(Action::await_change()),
                turn = turns.permits.clone().acquire_owned() => turn.expect("the turns are never closed"),
            };
            Some((turn, place))
        }
        None => None,
    };
    Box::pin(reconcile_turn(obj, shared)).await
}

async fn reconcile_turn<K: Watched>(obj: Arc<K>, shared: Arc<Shared<K>>) -> Result<Action, ReconcileError> {
    let oref = ObjectRef::from_obj(&*obj);
    shared.started(&oref);
    let _in_flight = InFlight(shared.metrics.as_ref().map(|m| {
        let g = m.in_flight(&shared.name);
        g.inc();
        g
    }));
    if !shared.leadership.is_leader() {
        tracing::debug!(object = %oref, overdue = shared.leadership.overdue(), "not leading; not reconciling");
        if shared.leadership.overdue() {
            // A renewal is late: if it lands, nothing else would bring this object back.
            return Ok(Action::requeue(RENEWAL_OVERDUE_RETRY));
        }
        // Standby: keep the cache warm, write nothing. Becoming leader reconciles everything.
        return Ok(Action::await_change());
    }
    if let Some(gate) = &shared.sharding {
        if !gate.fresh() {
            // Re-listing after the shard Lease was taken back: the cache may still hold objects
            // that moved away meanwhile. The list's end reconciles everything.
            tracing::debug!(object = %oref, "re-listing this shard's objects; not reconciling yet");
            return Ok(Action::await_change());
        }
        if let Some((view, running)) = &gate.ranges {
            // Registered before the range is checked, so that a coordinator that narrows the
            // range and then looks for running reconciles cannot miss this one.
            let hash = ranges::hash(obj.meta().namespace.as_deref().unwrap_or_default());
            running.lock().push(hash);
            let marker = RunningHash { running: running.clone(), hash };
            let allowed = view.borrow().allowed;
            if !allowed.is_some_and(|(start, end)| start <= hash && hash < end) {
                tracing::debug!(object = %oref, "outside this shard's hash range; leaving it");
                return Ok(Action::await_change());
            }
            return reconcile_owned(obj, oref, shared, Some(marker)).await;
        }
        match gate.sharding.ownership(obj.meta()) {
            Ownership::Mine => {}
            Ownership::NotMine => {
                tracing::debug!(object = %oref, "the cached object belongs to another shard; leaving it");
                return Ok(Action::await_change());
            }
            Ownership::Draining => return Box::pin(shared.hand_over(&obj, &oref, gate)).await,
        }
    }
    reconcile_owned(obj, oref, shared, None).await
}

/// The reconcile of an object this replica may work on now. `_running` marks it as running
/// until the end (namespace-range sharding).
async fn reconcile_owned<K: Watched>(
    obj: Arc<K>,
    oref: ObjectRef<K>,
    shared: Arc<Shared<K>>,
    _running: Option<RunningHash>,
) -> Result<Action, ReconcileError> {
    if !*shared.releases_ready.borrow() {
        // Routing against an incomplete Release cache would report Releases as missing, so the
        // first reconciles wait for it (bounded: a missing CRD must not hold a worker forever).
        let mut ready = shared.releases_ready.subscribe();
        if tokio::time::timeout(RELEASE_CACHE_WAIT, ready.wait_for(|r| *r)).await.is_err() {
            tracing::debug!(object = %oref, "the Release cache has not synced yet; requeueing");
            return Ok(Action::requeue(RELEASE_CACHE_WAIT));
        }
    }
    let loop_id = shared.loops.fetch_add(1, Ordering::Relaxed) + 1;
    let meta = obj.meta();
    let object = ObjectName(meta);
    let span = tracing::info_span!(
        "reconcile",
        controller = %shared.name,
        "loop" = loop_id,
        object = %object,
        version = meta.resource_version.as_deref().unwrap_or_default(),
        event = if meta.deletion_timestamp.is_some() { "delete" } else { "update" },
    );
    let result = match shared.reconcile(obj.clone(), &oref, loop_id).instrument(span.clone()).await {
        // A replica that lost the lease mid-reconcile has its writes refused (gated clients) or
        // cut short; whatever failed is the new leader's to redo, not an error of this object.
        Err(error) if !matches!(error, ReconcileError::LeadershipLost) && !shared.leadership.is_leader() => {
            let _enter = span.enter();
            tracing::debug!(%error, "the reconcile failed after leadership was lost");
            Err(ReconcileError::LeadershipLost)
        }
        result => result,
    };
    if let Err(error) = &result {
        let _enter = span.enter();
        match error {
            ReconcileError::LeadershipLost => {
                tracing::info!("leadership lost; reconcile stopped before its next write")
            }
            error => {
                if let Some(m) = &shared.metrics {
                    m.reconcile_failed(&shared.name);
                }
                tracing::error!(kind = %error.kind(), error = %error, "failed to reconcile");
                if shared.leadership.is_leader() {
                    let action = if obj.meta().deletion_timestamp.is_some() { "Delete" } else { "Update" };
                    let (kind, message) = (error.kind(), error.to_string());
                    Box::pin(shared.warnings.warn(&*obj, action, &kind, &message)).await;
                    if let Some(hook) = &shared.status_hook {
                        // This failure is counted by the error policy right after.
                        let consecutive = shared.failures.lock().get(&oref).copied().unwrap_or(0).saturating_add(1);
                        if let Err(error) = hook.failed(&obj, &kind, &message, consecutive).await {
                            tracing::warn!(%error, "the status hook failed to record the failure");
                        }
                    }
                }
            }
        }
    }
    result
}

/// `namespace/name` (or `name`) for logs, formatted only when a log is written.
struct ObjectName<'a>(&'a k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta);

impl std::fmt::Display for ObjectName<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = self.0.name.as_deref().unwrap_or_default();
        match &self.0.namespace {
            Some(ns) => write!(f, "{ns}/{name}"),
            None => f.write_str(name),
        }
    }
}

fn error_policy<K: Watched>(obj: Arc<K>, error: &ReconcileError, shared: Arc<Shared<K>>) -> Action {
    match error {
        // A late renewal may still land: try again soon.
        ReconcileError::LeadershipLost if shared.leadership.overdue() => Action::requeue(RENEWAL_OVERDUE_RETRY),
        // The new leader reconciles everything; this replica waits until it leads again.
        ReconcileError::LeadershipLost => Action::await_change(),
        _ => {
            let failures = shared.record_failure(&ObjectRef::from_obj(&*obj));
            Action::requeue(shared.backoff.delay(failures))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_maximum() {
        let b = ErrorBackoff { initial: Duration::from_millis(10), max: Duration::from_secs(1) };
        assert_eq!(b.delay(1), Duration::from_millis(10));
        assert_eq!(b.delay(2), Duration::from_millis(20));
        assert_eq!(b.delay(5), Duration::from_millis(160));
        assert_eq!(b.delay(8), Duration::from_secs(1));
        assert_eq!(b.delay(u32::MAX), Duration::from_secs(1));
        assert_eq!(ErrorBackoff::default().delay(100), Duration::from_secs(1000));
    }

    #[test]
    fn names_must_fit_a_finalizer() {
        assert!(valid_name("aws-operator-cluster-controller"));
        assert!(valid_name("kvm-operator.drainer"));
        for bad in ["", "Upper", "-lead", "trail-", "has space", &"x".repeat(64)] {
            assert!(!valid_name(bad), "{bad:?}");
        }
    }

    fn release(name: &str, generation: i64) -> Release {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "release.giantswarm.io/v1alpha1", "kind": "Release",
            "metadata": {"name": name, "generation": generation},
            "spec": {"components": [{"name": "x", "version": "1.0.0"}], "date": "2026-01-01T00:00:00Z", "state": "active"}
        }))
        .unwrap()
    }

    fn names(releases: Vec<Release>) -> Vec<String> {
        releases.into_iter().map(|r| r.metadata.name.unwrap_or_default()).collect()
    }

    fn config_map(name: &str, rv: &str, finalizers: &[&str], data: &str) -> k8s_openapi::api::core::v1::ConfigMap {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": "ns", "resourceVersion": rv, "finalizers": finalizers},
            "data": {"k": data}
        }))
        .unwrap()
    }

    #[test]
    fn the_own_finalizer_patch_does_not_echo_for_kinds_without_generation() {
        use k8s_openapi::api::core::v1::ConfigMap;
        let own = "operatorkit.giantswarm.io/c";
        let writes: OwnWrites<ConfigMap> = Arc::default();
        let mut changes = Changes::<ConfigMap>::new(own.into(), writes.clone());
        let passed = |out: Vec<Result<ConfigMap, watcher::Error>>| out.into_iter().filter(Result::is_ok).count();
        assert_eq!(passed(changes.on(Ok(Event::Apply(config_map("a", "1", &[], "x"))))), 1);
        assert_eq!(passed(changes.on(Ok(Event::Apply(config_map("b", "2", &[], "x"))))), 1);
        // The finalizer patches wrote version 3 of a and 4 of b; a's echo is no change.
        for (name, rv) in [("a", "3"), ("b", "4")] {
            let written = config_map(name, rv, &[own], "x");
            let hash = change_hash_ignoring(&written, Some(own)).unwrap();
            writes.lock().insert(ObjectRef::from_obj(&written), hash);
        }
        assert_eq!(passed(changes.on(Ok(Event::Apply(config_map("a", "3", &[own], "x"))))), 0);
        // Someone changed b before its echo arrived: that version is a change.
        assert_eq!(passed(changes.on(Ok(Event::Apply(config_map("b", "5", &[own], "y"))))), 1);
        assert!(writes.lock().is_empty(), "each recorded write is answered by the next event of its object");
        // Without a recorded write, a new version is a change as before.
        assert_eq!(passed(changes.on(Ok(Event::Apply(config_map("a", "6", &[own], "z"))))), 1);
    }

    #[test]
    fn turns_pass_first_come_first_served_to_objects_that_still_exist() {
        use k8s_openapi::api::core::v1::ConfigMap;
        let (tx, mut granted) = futures::channel::mpsc::unbounded();
        let turns = Turns::<ConfigMap>::new(1, tx);
        let mut writer = reflector::store::Writer::<ConfigMap>::default();
        let store = writer.as_reader();
        let [a, b, c, d] = ["a", "b", "c", "d"].map(|name| config_map(name, "1", &[], "x"));
        // c is not cached (deleted meanwhile).
        for obj in [&a, &b, &d] {
            writer.apply_watcher_event(&Event::Apply(obj.clone()));
        }
        let [a, b, c, d] = [&a, &b, &c, &d].map(ObjectRef::from_obj);
        assert!(turns.admit(&a), "a request passes to kube-runtime with a place set aside for it");
        assert!(turns.admit(&b), "one turn: two objects in kube-runtime, one working, one waiting");
        assert!(!turns.admit(&c), "kube-runtime holds two: c waits in the queue");
        assert!(!turns.take(&d), "a requeue due in kube-runtime waits in the queue too");
        assert!(!turns.admit(&c), "c waits once");
        assert!(turns.take(&a), "a takes the place set aside for it");
        assert!(turns.take(&b));
        // a ends; c is gone, so its place passes to d.
        turns.pass_on(&store);
        assert_eq!(granted.try_recv().ok(), Some(d.clone()));
        assert!(granted.try_recv().is_err(), "one object handed over per place");
        assert!(!turns.take(&a), "a new request of a waits behind d");
        assert!(turns.take(&d), "d takes the place passed to it");
        turns.pass_on(&store);
        assert_eq!(granted.try_recv().ok(), Some(a.clone()));
        assert!(turns.take(&a));
        // Nobody waits: the places are given back and the next request takes one at once.
        turns.pass_on(&store);
        turns.pass_on(&store);
        assert!(granted.try_recv().is_err());
        assert!(turns.admit(&b));
        assert!(turns.take(&b));
        assert!(turns.take(&c), "two places: one was still free");
        assert!(!turns.take(&d), "and no third");
    }

    #[test]
    fn release_changes_skip_the_initial_list_and_status_writes() {
        let mut f = ReleaseChanges::default();
        assert!(f.on(Event::Init).is_empty());
        assert!(f.on(Event::InitApply(release("v1.0.0", 1))).is_empty());
        assert!(f.on(Event::InitApply(release("v2.0.0", 1))).is_empty());
        assert!(f.on(Event::InitDone).is_empty());
        assert!(f.on(Event::Apply(release("v1.0.0", 1))).is_empty(), "same generation: a status write");
        assert_eq!(names(f.on(Event::Apply(release("v1.0.0", 2)))), ["v1.0.0"]);
        assert_eq!(names(f.on(Event::Apply(release("v3.0.0", 1)))), ["v3.0.0"]);
        assert_eq!(names(f.on(Event::Delete(release("v3.0.0", 1)))), ["v3.0.0"]);
        // A re-list after a gap reports what changed during it: v1 changed, v2 went away.
        assert!(f.on(Event::Init).is_empty());
        assert_eq!(names(f.on(Event::InitApply(release("v1.0.0", 3)))), ["v1.0.0"]);
        assert_eq!(names(f.on(Event::InitDone)), ["v2.0.0"]);
    }
}

/// The settings every controller of an operator runs with.
#[derive(Clone, Debug)]
pub struct RunSettings {
    /// Parallel reconciles per controller.
    pub concurrency: u16,
    /// Resync period.
    pub resync: Duration,
    /// Whether this replica leads ([`Leadership::always`] without leader election). The same
    /// leadership must gate every client the operator writes through.
    pub leadership: Leadership,
    /// This replica's shard, when the replicas share the objects instead of leaving them to
    /// the leader ([`crate::replicas`]); sharded controllers use its fence instead of
    /// `leadership`.
    pub sharding: Option<Sharding>,
}

impl Default for RunSettings {
    fn default() -> Self {
        Self { concurrency: 8, resync: Duration::from_secs(300), leadership: Leadership::always(), sharding: None }
    }
}

//! The sharder: on the leader, assigns every object of the registered kinds to a live shard.
//!
//! It caches the shard Leases of its ring and the *metadata* of the registered kinds (never
//! whole objects), and on every change and every retry period compares each object's shard
//! label with the shard the ring names for its key ([`decide`], pure). The writes are guarded
//! JSON patches of labels, sent through a client gated by the leader Lease, so a sharder that
//! lost the leader Lease writes nothing more. Its state is the labels and Leases themselves:
//! the next leader continues where this one stopped.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{StreamExt, stream};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use kube::api::Api;
use kube::core::PartialObjectMeta;
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher::{self, Event};
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::ring::Ring;
use super::{KeyFn, MoveLabels, ShardLabels, ShardingConfig, ShardingMetrics, guard, label, label_path};
use crate::controller::Watched;
use crate::events::Events;
use crate::leader::{Leadership, Observed};

/// How many label writes the sharder sends at once.
const WRITE_CONCURRENCY: usize = 16;

/// A kind whose objects the sharder assigns.
pub(crate) trait ShardedKind: Send + Sync {
    /// The kind's name, for logs and metrics.
    fn kind(&self) -> String;
    /// What the sharder caches for it: the kind, the namespace and the label selector. Two
    /// registrations with one identity are one cache.
    fn identity(&self) -> String;
    /// Start a fresh metadata cache; the stream drives it and yields `true` once listed.
    fn start(&self) -> BoxStream<'static, bool>;
    /// The cached objects' metadata.
    fn objects(&self) -> Vec<ObjectMeta>;
    /// Send a JSON patch to the object.
    fn patch(&self, client: Client, meta: ObjectMeta, patch: Value) -> BoxFuture<'static, Result<(), kube::Error>>;
    /// A reference for events.
    fn object_ref(&self, meta: &ObjectMeta) -> ObjectReference;
}

/// [`ShardedKind`] for a kube kind `K`, watched through `api` with an optional selector.
pub(crate) struct KindHandle<K: Watched> {
    api: Api<K>,
    selector: Option<String>,
    store: Mutex<Option<Store<PartialObjectMeta<K>>>>,
}

impl<K: Watched> KindHandle<K> {
    pub(crate) fn new(api: Api<K>, selector: Option<String>) -> Self {
        Self { api, selector, store: Mutex::new(None) }
    }
}

impl<K: Watched> ShardedKind for KindHandle<K> {
    fn kind(&self) -> String {
        K::kind(&()).to_string()
    }

    fn identity(&self) -> String {
        format!(
            "{}|{}|{}",
            K::kind(&()),
            self.api.namespace().unwrap_or_default(),
            self.selector.as_deref().unwrap_or_default()
        )
    }

    fn start(&self) -> BoxStream<'static, bool> {
        let writer = reflector::store::Writer::<PartialObjectMeta<K>>::default();
        *self.store.lock() = Some(writer.as_reader());
        let mut config = watcher::Config::default();
        if let Some(selector) = &self.selector {
            config = config.labels(selector);
        }
        // Metadata only: the sharder never needs more, and its cache stays small. The
        // metadata API is reached through an all-namespaces Api narrowed by a field selector,
        // which works for every kind and scope.
        if let Some(namespace) = self.api.namespace() {
            config = config.fields(&format!("metadata.namespace={namespace}"));
        }
        let api = Api::<PartialObjectMeta<K>>::all_with(self.api.clone().into(), &());
        watcher::watcher(api, config)
            .default_backoff()
            .modify(|obj: &mut PartialObjectMeta<K>| obj.metadata.managed_fields = None)
            .reflect(writer)
            .filter_map(|event| std::future::ready(event.ok().map(|e| matches!(e, Event::InitDone))))
            .boxed()
    }

    fn objects(&self) -> Vec<ObjectMeta> {
        match &*self.store.lock() {
            Some(store) => store.state().iter().map(|o| o.metadata.clone()).collect(),
            None => Vec::new(),
        }
    }

    fn patch(&self, client: Client, meta: ObjectMeta, patch: Value) -> BoxFuture<'static, Result<(), kube::Error>> {
        Box::pin(async move {
            crate::finalizer::send_patch::<K>(&client, &meta, None, "application/json-patch+json", &patch).await?;
            Ok(())
        })
    }

    fn object_ref(&self, meta: &ObjectMeta) -> ObjectReference {
        ObjectReference {
            api_version: Some(K::api_version(&()).to_string()),
            kind: Some(K::kind(&()).to_string()),
            name: meta.name.clone(),
            namespace: meta.namespace.clone(),
            uid: meta.uid.clone(),
            resource_version: meta.resource_version.clone(),
            field_path: None,
        }
    }
}

/// What the sharder does with one object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Nothing: assigned where it belongs, waiting for a drain, or no shard is live.
    Keep,
    /// Unassigned (new, or released by its old shard): label it with this shard.
    Assign(String),
    /// Its live shard must let go first: add the drain label.
    Drain,
    /// Asked to drain, but the ring changed back: remove the drain label.
    Undrain,
    /// Its shard is not live (`unknown`: no Lease of the ring has that name): relabel at once.
    Move { from: String, to: String, unknown: bool },
}

/// The pure assignment rule. `current` is the shard label, `draining` whether the drain label
/// is set, `desired` the ring's choice for the key.
pub(crate) fn decide(
    current: Option<&str>,
    draining: bool,
    desired: Option<&str>,
    live: impl Fn(&str) -> bool,
    known: impl Fn(&str) -> bool,
) -> Decision {
    let Some(desired) = desired else { return Decision::Keep };
    match current.filter(|c| !c.is_empty()) {
        None => Decision::Assign(desired.to_string()),
        Some(current) if current == desired => {
            if draining {
                Decision::Undrain
            } else {
                Decision::Keep
            }
        }
        Some(current) if !live(current) => {
            Decision::Move { from: current.to_string(), to: desired.to_string(), unknown: !known(current) }
        }
        Some(_) if draining => Decision::Keep,
        Some(_) => Decision::Drain,
    }
}

/// The guarded patch that carries out `decision` (none for [`Decision::Keep`]).
pub(crate) fn patch_for(config: &ShardingConfig, meta: &ObjectMeta, decision: &Decision) -> Option<Value> {
    let shard = config.shard_label();
    let drain = config.drain_label();
    let drained = label(meta, &drain).is_some();
    let mut ops = guard(meta);
    match decision {
        Decision::Keep => return None,
        Decision::Assign(to) | Decision::Move { to, .. } => {
            if meta.labels.is_none() {
                ops.push(json!({"op": "add", "path": "/metadata/labels", "value": {shard: to}}));
            } else {
                ops.push(json!({"op": "add", "path": label_path(&shard), "value": to}));
            }
            if drained {
                ops.push(json!({"op": "remove", "path": label_path(&drain)}));
            }
        }
        Decision::Drain => ops.push(json!({"op": "add", "path": label_path(&drain), "value": "true"})),
        Decision::Undrain => ops.push(json!({"op": "remove", "path": label_path(&drain)})),
    }
    Some(Value::Array(ops))
}

/// Aborts a task when dropped.
pub(crate) struct AbortOnDrop(pub(crate) tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The shard Lease cache that outlives the sharder's terms.
#[derive(Clone, Copy)]
struct LeaseCache<'a> {
    leases: &'a Store<Lease>,
    api: &'a Api<Lease>,
    changed: &'a Notify,
    synced: &'a AtomicBool,
}

/// The sharder of one replica; it works only while the replica leads.
pub(crate) struct Sharder {
    config: ShardingConfig,
    client: Client,
    key: KeyFn,
    kinds: Vec<Arc<dyn ShardedKind>>,
    metrics: ShardingMetrics,
}

/// What one term as sharder remembers between passes.
#[derive(Default)]
struct Term {
    /// Objects being moved: uid → (old shard, when the move was decided).
    moving: HashMap<String, (String, Instant)>,
    /// uid → the resourceVersion a write was last sent for; not retried until the cache moves on.
    attempted: HashMap<String, String>,
}

/// The shard Leases of a ring as this replica observes them, and which shards are live.
#[derive(Default)]
pub(crate) struct Membership {
    /// Shard Leases as observed (kept after deletion until they expire).
    leases: HashMap<String, Observed>,
    /// Shards confirmed dead by a fresh read, with the resourceVersion read.
    confirmed_dead: HashMap<String, Option<String>>,
}

impl Membership {
    /// Record the Leases as cached: the expiry clock of each restarts when its record changed.
    pub(crate) fn observe(&mut self, leases: &Store<Lease>) {
        for lease in leases.state() {
            let name = lease.metadata.name.clone().unwrap_or_default();
            let spec = lease.spec.clone().unwrap_or_default();
            let rv = lease.metadata.resource_version.clone();
            match self.leases.get_mut(&name) {
                Some(observed) => observed.update(spec, rv),
                None => {
                    self.leases.insert(name, Observed::new(spec, rv));
                }
            }
        }
    }

    /// Whether a Lease of this name was seen.
    pub(crate) fn knows(&self, shard: &str) -> bool {
        self.leases.contains_key(shard)
    }

    /// Record the Leases as cached, confirm expiries with a fresh read, and return the live
    /// shards: held, and changed within their lease duration as seen from here.
    pub(crate) async fn refresh(
        &mut self,
        config: &ShardingConfig,
        leases: &Store<Lease>,
        api: &Api<Lease>,
    ) -> BTreeSet<String> {
        self.observe(leases);
        let now = Instant::now();
        // A shard is declared dead only after a fresh read agrees: a watch that lags must not
        // make a live shard look expired.
        let expired: Vec<String> = self
            .leases
            .iter()
            .filter(|(_, o)| !o.holder().is_empty() && !o.is_valid(now))
            .filter(|(name, o)| self.confirmed_dead.get(*name) != Some(&o.resource_version))
            .map(|(name, _)| name.clone())
            .collect();
        for name in expired {
            match api.get_opt(&name).await {
                Ok(Some(lease)) => {
                    let spec = lease.spec.unwrap_or_default();
                    if let Some(observed) = self.leases.get_mut(&name) {
                        observed.update(spec, lease.metadata.resource_version);
                        if !observed.is_valid(Instant::now()) {
                            tracing::info!(ring = %config.ring, shard = %name, "shard Lease expired; the shard leaves the ring");
                            self.confirmed_dead.insert(name, observed.resource_version.clone());
                        }
                    }
                }
                Ok(None) => {
                    let rv = self.leases.get(&name).and_then(|o| o.resource_version.clone());
                    self.confirmed_dead.insert(name, rv);
                }
                Err(error) => tracing::warn!(shard = %name, %error, "cannot read a shard Lease; keeping it live"),
            }
        }
        // Leases long gone and long expired are forgotten.
        let forget = config.lease_duration.saturating_mul(10);
        let listed: HashSet<String> = leases.state().iter().filter_map(|l| l.metadata.name.clone()).collect();
        self.leases.retain(|name, o| listed.contains(name) || o.changed_at.elapsed() < forget);
        let now = Instant::now();
        self.leases
            .iter()
            .filter(|(_, o)| !o.holder().is_empty() && o.is_valid(now))
            .map(|(name, _)| name.clone())
            .collect()
    }
}

impl Sharder {
    pub(crate) fn new(
        config: ShardingConfig,
        client: Client,
        key: KeyFn,
        kinds: Vec<Arc<dyn ShardedKind>>,
        metrics: ShardingMetrics,
    ) -> Self {
        Self { config, client, key, kinds, metrics }
    }

    /// Work as sharder whenever `leadership` leads, until `shutdown`.
    pub(crate) async fn run(self, mut leadership: Leadership, shutdown: CancellationToken) {
        // The shard Leases are watched on every replica, leader or not: a replica that becomes
        // the sharder then already knows how long each Lease has gone without a renewal, and
        // moves the objects of a replica that died with the old sharder after one lease
        // duration, not two.
        let api: Api<Lease> = Api::namespaced(self.client.clone(), &self.config.namespace);
        let writer = reflector::store::Writer::<Lease>::default();
        let leases = writer.as_reader();
        let lease_changed = Arc::new(Notify::new());
        let lease_synced = Arc::new(AtomicBool::new(false));
        let lease_config = watcher::Config::default().labels(&format!("{}={}", super::RING_LABEL, self.config.ring));
        let lease_events = watcher::watcher(api.clone(), lease_config).default_backoff().reflect(writer);
        let (notify, flag) = (lease_changed.clone(), lease_synced.clone());
        let _leases = AbortOnDrop(tokio::spawn(async move {
            let mut lease_events = std::pin::pin!(lease_events);
            while let Some(event) = lease_events.next().await {
                if matches!(event, Ok(Event::InitDone)) {
                    flag.store(true, Ordering::SeqCst);
                }
                notify.notify_one();
            }
        }));
        let mut members = Membership::default();
        loop {
            if !leadership.is_leader() {
                tokio::select! {
                    biased;
                    () = shutdown.cancelled() => return,
                    () = leadership.acquired() => {}
                    () = lease_changed.notified() => {}
                    () = tokio::time::sleep(self.config.retry_period) => {}
                }
                if lease_synced.load(Ordering::SeqCst) {
                    members.observe(&leases);
                }
                if !leadership.is_leader() {
                    continue;
                }
            }
            tracing::info!(ring = %self.config.ring, kinds = self.kinds.len(), "sharder starting");
            let mut lost = leadership.clone();
            let shared = LeaseCache { leases: &leases, api: &api, changed: &lease_changed, synced: &lease_synced };
            tokio::select! {
                biased;
                () = shutdown.cancelled() => return,
                () = lost.lost() => {}
                () = self.term(leadership.clone(), shared, &mut members) => {}
            }
            tracing::info!(ring = %self.config.ring, "sharder stopped: leadership lost");
        }
    }

    /// One term as sharder: fresh caches of the kinds, then passes on every change and retry
    /// period.
    async fn term(&self, leadership: Leadership, leases: LeaseCache<'_>, members: &mut Membership) {
        let client = leadership.gate(self.client.clone());
        let events = Events::with_instance(client.clone(), "operatorkit-sharder", Some(self.config.shard.clone()));
        let changed = Arc::new(Notify::new());
        let synced: Vec<Arc<AtomicBool>> = (0..self.kinds.len()).map(|_| Arc::new(AtomicBool::new(false))).collect();
        let mut streams: Vec<BoxStream<'static, (usize, bool)>> = Vec::new();
        for (i, kind) in self.kinds.iter().enumerate() {
            streams.push(kind.start().map(move |d| (i, d)).boxed());
        }
        let notify = changed.clone();
        let flags = synced.clone();
        let _driver = AbortOnDrop(tokio::spawn(async move {
            let mut merged = stream::select_all(streams);
            while let Some((index, done)) = merged.next().await {
                if done {
                    flags[index].store(true, Ordering::SeqCst);
                }
                notify.notify_one();
            }
        }));

        let mut term = Term::default();
        loop {
            tokio::select! {
                () = changed.notified() => {}
                () = leases.changed.notified() => {}
                () = tokio::time::sleep(self.config.retry_period) => {}
            }
            // Deciding on a partial list of Leases would take live shards for unknown ones.
            if !leases.synced.load(Ordering::SeqCst) || !synced.iter().all(|s| s.load(Ordering::SeqCst)) {
                continue;
            }
            self.pass(&mut term, members, &client, &events, leases.leases, leases.api).await;
        }
    }

    /// Observe the Leases, build the ring, and correct every object that needs it.
    async fn pass(
        &self,
        term: &mut Term,
        members: &mut Membership,
        client: &Client,
        events: &Events,
        leases: &Store<Lease>,
        api: &Api<Lease>,
    ) {
        let live = members.refresh(&self.config, leases, api).await;
        let live_set: HashSet<&str> = live.iter().map(String::as_str).collect();
        let ring = Ring::new(live_set.iter().copied(), self.config.virtual_nodes);
        let shard_label = self.config.shard_label();
        let drain_label = self.config.drain_label();

        let mut work = Vec::new();
        let mut counts: BTreeMap<(String, String), i64> = BTreeMap::new();
        let mut present = HashSet::new();
        for kind in &self.kinds {
            let kind_name = kind.kind();
            for meta in kind.objects() {
                let uid = meta.uid.clone().unwrap_or_default();
                present.insert(uid.clone());
                let current = label(&meta, &shard_label);
                if let Some(current) = current {
                    *counts.entry((current.to_string(), kind_name.clone())).or_insert(0) += 1;
                }
                let draining = label(&meta, &drain_label).is_some();
                let key = (self.key)(&meta);
                let decision =
                    decide(current, draining, ring.shard_for(&key), |s| live_set.contains(s), |s| members.knows(s));
                if decision == Decision::Keep {
                    continue;
                }
                let rv = meta.resource_version.clone().unwrap_or_default();
                if term.attempted.get(&uid) == Some(&rv) {
                    continue;
                }
                work.push((kind.clone(), kind_name.clone(), meta, decision));
            }
        }
        term.attempted.retain(|uid, _| present.contains(uid));
        term.moving.retain(|uid, _| present.contains(uid));
        self.metrics.objects.clear();
        for ((shard, kind), n) in counts {
            self.metrics.objects.get_or_create(&ShardLabels { ring: self.config.ring.clone(), shard, kind }).set(n);
        }

        // The writes go out WRITE_CONCURRENCY at a time and each result is handled as it
        // arrives: a pass that assigns every object of a large ring holds its work list, not
        // every request and response at once.
        type Written = (String, String, ObjectMeta, Decision, Result<(), kube::Error>);
        let (config, writer) = (self.config.clone(), client.clone());
        let mut results = stream::iter(work)
            .map(move |(kind, kind_name, meta, decision)| -> BoxFuture<'static, Written> {
                let patch = patch_for(&config, &meta, &decision);
                let client = writer.clone();
                Box::pin(async move {
                    let result = match patch {
                        Some(patch) => kind.patch(client, meta.clone(), patch).await,
                        None => Ok(()),
                    };
                    (kind_name, meta.uid.clone().unwrap_or_default(), meta, decision, result)
                })
            })
            .buffer_unordered(WRITE_CONCURRENCY)
            .boxed();

        while let Some((kind_name, uid, meta, decision, result)) = results.next().await {
            self.metrics.assignment_requests.inc();
            term.attempted.insert(uid.clone(), meta.resource_version.clone().unwrap_or_default());
            if let Err(error) = result {
                if !matches!(&error, kube::Error::Api(s) if s.code == 409 || s.code == 422 || s.code == 404) {
                    tracing::warn!(kind = %kind_name, object = ?meta.name, %error, "cannot write a shard assignment");
                    term.attempted.remove(&uid);
                }
                continue;
            }
            let object = self.kinds.iter().find(|k| k.kind() == kind_name).map(|k| k.object_ref(&meta));
            match decision {
                Decision::Drain => {
                    let from = label(&meta, &shard_label).unwrap_or_default().to_string();
                    term.moving.entry(uid).or_insert((from, Instant::now()));
                }
                Decision::Undrain => {
                    term.moving.remove(&uid);
                }
                Decision::Assign(to) => {
                    if let Some((from, since)) = term.moving.remove(&uid) {
                        self.moved(&kind_name, "drained", since);
                        if let Some(object) = &object {
                            let note = format!("moved from shard {from} to shard {to} after {from} let go of it");
                            events.normal(object, "Shard", "ShardMoved", note).await;
                        }
                    }
                }
                Decision::Move { from, to, unknown } => {
                    let since = term.moving.remove(&uid).map_or_else(Instant::now, |(_, since)| since);
                    if let Some(object) = &object {
                        if unknown {
                            self.moved(&kind_name, "unknown", since);
                            let note = format!(
                                "the label {shard_label} named {from:?}, which is no shard of ring {}; assigned to shard {to}",
                                self.config.ring
                            );
                            events.warning(object, "Shard", "ShardLabelCorrected", note).await;
                        } else {
                            self.moved(&kind_name, "expired", since);
                            let note = format!("moved from shard {from}, whose Lease expired, to shard {to}");
                            events.normal(object, "Shard", "ShardMoved", note).await;
                        }
                    }
                }
                Decision::Keep => {}
            }
        }
    }

    fn moved(&self, kind: &str, reason: &'static str, since: Instant) {
        self.metrics
            .moves
            .get_or_create(&MoveLabels { ring: self.config.ring.clone(), kind: kind.to_string(), reason })
            .inc();
        self.metrics.move_wait.observe(since.elapsed().as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn live(s: &str) -> bool {
        s == "a" || s == "b"
    }

    fn known(s: &str) -> bool {
        live(s) || s == "dead"
    }

    #[test]
    fn unassigned_objects_go_where_the_ring_says() {
        assert_eq!(decide(None, false, Some("a"), live, known), Decision::Assign("a".into()));
        assert_eq!(decide(Some(""), true, Some("b"), live, known), Decision::Assign("b".into()));
        assert_eq!(decide(None, false, None, live, known), Decision::Keep, "no live shard: wait");
    }

    #[test]
    fn a_live_shard_is_drained_before_its_object_moves() {
        assert_eq!(decide(Some("a"), false, Some("b"), live, known), Decision::Drain);
        assert_eq!(decide(Some("a"), true, Some("b"), live, known), Decision::Keep, "waiting for the acknowledgement");
        assert_eq!(decide(Some("a"), true, Some("a"), live, known), Decision::Undrain, "the ring changed back");
        assert_eq!(decide(Some("a"), false, Some("a"), live, known), Decision::Keep);
    }

    #[test]
    fn dead_and_unknown_shards_lose_their_objects_at_once() {
        assert_eq!(
            decide(Some("dead"), false, Some("a"), live, known),
            Decision::Move { from: "dead".into(), to: "a".into(), unknown: false }
        );
        assert_eq!(
            decide(Some("typo"), true, Some("b"), live, known),
            Decision::Move { from: "typo".into(), to: "b".into(), unknown: true }
        );
    }

    fn meta(labels: Option<&[(&str, &str)]>) -> ObjectMeta {
        ObjectMeta {
            name: Some("c1".into()),
            resource_version: Some("42".into()),
            labels: labels.map(|l| l.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn patches_are_guarded_and_touch_only_the_two_labels() {
        let c = ShardingConfig { shard: "a".into(), ..ShardingConfig::new("ns", "r") };
        let assign = patch_for(&c, &meta(None), &Decision::Assign("a".into()));
        assert_eq!(
            assign,
            Some(json!([
                {"op": "test", "path": "/metadata/resourceVersion", "value": "42"},
                {"op": "add", "path": "/metadata/labels", "value": {"shard.operatorkit.giantswarm.io/r": "a"}}
            ]))
        );
        let drained =
            meta(Some(&[("shard.operatorkit.giantswarm.io/r", "x"), ("drain.operatorkit.giantswarm.io/r", "true")]));
        let moved = patch_for(&c, &drained, &Decision::Move { from: "x".into(), to: "b".into(), unknown: true });
        assert_eq!(
            moved,
            Some(json!([
                {"op": "test", "path": "/metadata/resourceVersion", "value": "42"},
                {"op": "add", "path": "/metadata/labels/shard.operatorkit.giantswarm.io~1r", "value": "b"},
                {"op": "remove", "path": "/metadata/labels/drain.operatorkit.giantswarm.io~1r"}
            ]))
        );
        let drain = patch_for(&c, &meta(Some(&[("shard.operatorkit.giantswarm.io/r", "x")])), &Decision::Drain);
        assert_eq!(
            drain,
            Some(json!([
                {"op": "test", "path": "/metadata/resourceVersion", "value": "42"},
                {"op": "add", "path": "/metadata/labels/drain.operatorkit.giantswarm.io~1r", "value": "true"}
            ]))
        );
        assert_eq!(patch_for(&c, &drained, &Decision::Keep), None);
    }
}

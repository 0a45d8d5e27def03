//! Active-active sharding: the objects of a management cluster spread over several replicas.
//!
//! With leader election one replica does all the work. With sharding every replica works, each
//! on its own share of the clusters, while the guarantee stays the same: **no two replicas ever
//! reconcile one object at the same time**. The design is that of the Kubernetes controller
//! sharding project (shard Leases, a sharder, label-selected watches, a drain handshake), built
//! into operatorkit so that one builder call turns it on:
//!
//! * **Membership.** Each replica holds its own shard Lease, named after the shard (its pod),
//!   labelled `operatorkit.giantswarm.io/ring=<ring>`, through the same [`LeaderElector`] that
//!   leader election uses; only that replica competes for it. The shard is *live* while the
//!   Lease is held and renewed. [`Sharding::held`] is the replica's fence: it turns false when
//!   a renewal misses the renew deadline, and every write of a sharded controller checks it, so
//!   a replica cut off from the API server stops writing before anyone may take its objects.
//! * **Assignment.** The sharder runs on the replica that holds the ordinary leader Lease. It
//!   places the live shards on a consistent-hash [`Ring`] and labels every object of the
//!   registered kinds `shard.operatorkit.giantswarm.io/<ring>=<shard>`, hashing the object's
//!   *key* (by default its `giantswarm.io/cluster` label), so that the objects of one cluster
//!   share a shard. Each replica watches only objects labelled with its shard: the filter runs
//!   on the API server and the cache holds only the replica's share.
//! * **Moving.** When the ring changes, an object whose shard is still live is not relabelled
//!   at once: the sharder adds `drain.operatorkit.giantswarm.io/<ring>=true`; the old shard
//!   finishes any reconcile of it, then acknowledges by removing both labels; the sharder then
//!   assigns the new shard. An object whose shard is no longer live (its Lease expired, as seen
//!   on the sharder's own clock, or was released) or is unknown (a hand-edited label) moves at
//!   once; an unknown label gets a Warning event, every move a Normal event.
//! * **Rejoining.** A replica that lost its shard Lease and takes it again first re-lists its
//!   objects (its cache may hold objects moved away meanwhile) and reconciles only then.
//!
//! The state lives in labels and Leases only, so a new sharder continues where the last one
//! stopped. Every write is guarded by the object's resourceVersion.
//!
//! # What it does not promise
//!
//! * A label changed by hand from one *live* shard to another is not fenced: the old shard may
//!   finish a reconcile that started before its watch saw the change. Remove the label instead
//!   (the sharder reassigns the object) or let the sharder correct it.
//! * Objects without a key are keyed by their own `namespace/name`.
//! * Liveness is judged like leader election's: from the moment the sharder *observed* the last
//!   renewal, with a fresh read of the Lease before a shard is declared dead. Clocks of
//!   different machines are never compared, but each must run at the normal rate.
//!
//! ```no_run
//! # async fn demo(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use operatorkit::leader::{LeaderElectionConfig, LeaderElector};
//! use operatorkit::sharding::{Sharding, ShardingConfig, cluster_key};
//! use operatorkit::{Controller, ResourceSet};
//! use tokio_util::sync::CancellationToken;
//!
//! let sharding = Sharding::new(client.clone(), ShardingConfig::new("giantswarm", "kvm-operator"), cluster_key())?;
//! # let set: ResourceSet<ConfigMap> = todo!();
//! let controller = Controller::<ConfigMap>::builder(client.clone(), "cluster-controller")
//!     .operator("kvm-operator")
//!     .sharding(&sharding) // the one call: selected watches, fencing, drain acknowledgement
//!     .resource_set(set)
//!     .build()?;
//! // The sharder role goes with the ordinary leader Lease.
//! let elector = LeaderElector::new(client, LeaderElectionConfig::new("giantswarm", "kvm-operator"))?;
//! let shutdown = CancellationToken::new();
//! tokio::spawn(sharding.clone().run(elector.leadership(), shutdown.clone()));
//! tokio::spawn(elector.run(shutdown.clone()));
//! controller.run(shutdown).await;
//! # Ok(()) }
//! ```

pub mod ranges;
pub mod ring;
mod sharder;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use parking_lot::Mutex;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::leader::{self, LeaderElectionConfig, LeaderElector, Leadership};
use crate::server::{Readiness, ReadyFlag};

pub use ring::{DEFAULT_VIRTUAL_NODES, Ring, fnv1a64};
pub(crate) use sharder::{KindHandle, ShardedKind};

/// The label of shard Leases that names their ring.
pub const RING_LABEL: &str = "operatorkit.giantswarm.io/ring";
/// The prefix of the shard label; the ring's name follows.
pub const SHARD_LABEL_PREFIX: &str = "shard.operatorkit.giantswarm.io/";
/// The prefix of the drain label; the ring's name follows.
pub const DRAIN_LABEL_PREFIX: &str = "drain.operatorkit.giantswarm.io/";
/// The label that names an object's cluster: the default key.
pub const CLUSTER_LABEL: &str = "giantswarm.io/cluster";

/// How objects are spread over the shards.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ShardingMode {
    /// A sharder labels each object with its shard (by the key, e.g. the cluster), and each
    /// replica's watches select their label. Works on every API server, for any grouping of
    /// objects; moves take a drain handshake of three writes per object.
    #[default]
    Labels,
    /// Each shard owns a slice of the hash space of `metadata.namespace`, and its watches carry
    /// KEP-5866's `shardSelector`: no labels, no writes to move objects, but it needs
    /// Kubernetes 1.36 or later with the `ShardedListAndWatch` feature gate, and it fits only
    /// kinds where a namespace holds the objects of one group (one cluster per namespace). See
    /// [`ranges`].
    NamespaceRanges,
}

impl ShardingMode {
    /// The mode's name on a command line: `labels` or `namespace-ranges`.
    pub fn as_str(self) -> &'static str {
        match self {
            ShardingMode::Labels => "labels",
            ShardingMode::NamespaceRanges => "namespace-ranges",
        }
    }
}

impl std::fmt::Display for ShardingMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for ShardingMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "labels" => Ok(ShardingMode::Labels),
            "namespace-ranges" => Ok(ShardingMode::NamespaceRanges),
            other => Err(format!("unknown sharding mode {other:?}: use \"labels\" or \"namespace-ranges\"")),
        }
    }
}

/// Which ring this replica joins, as which shard, and how fast shards come and go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShardingConfig {
    /// Namespace of the shard Leases (the operator's own).
    pub namespace: String,
    /// The ring: every replica of one operator (version) uses the same name. A label name
    /// (at most 63 characters of `[a-z0-9.-]`).
    pub ring: String,
    /// This replica's shard, and the name of its Lease: unique among the replicas (default:
    /// the pod name). A label value.
    pub shard: String,
    /// The identity written to the shard Lease's `holderIdentity`.
    pub identity: String,
    /// How long after the sharder last saw a shard Lease renewed it takes the shard's objects
    /// away. The default is leader election's, 15 s.
    pub lease_duration: Duration,
    /// How long a replica keeps working without a successful renewal; shorter than the lease
    /// duration.
    pub renew_deadline: Duration,
    /// How often shard Leases are renewed and the sharder looks for expired ones.
    pub retry_period: Duration,
    /// Points per shard on the ring.
    pub virtual_nodes: u32,
    /// Release the shard Lease on shutdown, so the sharder moves the replica's objects at once
    /// instead of after the lease duration. Stop the sharded controllers first.
    pub release_on_cancel: bool,
    /// Labels (the default) or namespace hash ranges.
    pub mode: ShardingMode,
}

impl ShardingConfig {
    /// Leader election's defaults (15 s, 10 s, 2 s), 100 virtual nodes and release on
    /// shutdown, for the shard named after this pod (`POD_NAME`, else `HOSTNAME`).
    pub fn new(namespace: impl Into<String>, ring: impl Into<String>) -> Self {
        let identity = leader::default_identity();
        let shard = identity.rsplit_once('_').map(|(base, _)| base.to_string()).unwrap_or_else(|| identity.clone());
        Self {
            namespace: namespace.into(),
            ring: ring.into(),
            shard,
            identity,
            lease_duration: leader::DEFAULT_LEASE_DURATION,
            renew_deadline: leader::DEFAULT_RENEW_DEADLINE,
            retry_period: leader::DEFAULT_RETRY_PERIOD,
            virtual_nodes: DEFAULT_VIRTUAL_NODES,
            release_on_cancel: true,
            mode: ShardingMode::Labels,
        }
    }

    /// The label that assigns an object to a shard of this ring.
    pub fn shard_label(&self) -> String {
        format!("{SHARD_LABEL_PREFIX}{}", self.ring)
    }

    /// The label that asks a shard of this ring to let go of an object.
    pub fn drain_label(&self) -> String {
        format!("{DRAIN_LABEL_PREFIX}{}", self.ring)
    }

    fn election(&self) -> LeaderElectionConfig {
        LeaderElectionConfig {
            identity: self.identity.clone(),
            lease_duration: self.lease_duration,
            renew_deadline: self.renew_deadline,
            retry_period: self.retry_period,
            release_on_cancel: self.release_on_cancel,
            ..LeaderElectionConfig::new(self.namespace.clone(), self.shard.clone())
        }
    }

    fn validate(&self) -> Result<(), Error> {
        if !valid_label_name(&self.ring) {
            return Err(Error::InvalidRing(self.ring.clone()));
        }
        if !valid_label_name(&self.shard) {
            return Err(Error::InvalidShard(self.shard.clone()));
        }
        Ok(())
    }
}

/// `[a-z0-9]([a-z0-9.-]*[a-z0-9])?`, at most 63 characters: a valid label value, label name
/// and Lease name at once.
fn valid_label_name(s: &str) -> bool {
    let b = s.as_bytes();
    !s.is_empty()
        && s.len() <= 63
        && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-' || *c == b'.')
        && b.first().is_some_and(u8::is_ascii_alphanumeric)
        && b.last().is_some_and(u8::is_ascii_alphanumeric)
}

/// Errors of sharding.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The ring name cannot be part of a label name.
    #[error(
        "the sharding ring name {0:?} is not valid: use at most 63 lower-case letters, digits, '-' and '.', starting and ending with a letter or digit"
    )]
    InvalidRing(String),
    /// The shard name cannot be a label value and Lease name.
    #[error(
        "the shard name {0:?} is not valid: use at most 63 lower-case letters, digits, '-' and '.' (set POD_NAME or ShardingConfig::shard)"
    )]
    InvalidShard(String),
    /// The Lease durations are invalid (see [`leader::Error`]).
    #[error("invalid shard Lease settings: {0}")]
    Lease(#[from] leader::Error),
    /// [`Sharding::run`] was called twice.
    #[error("this replica's sharding already runs")]
    AlreadyRunning,
}

impl Error {
    /// A short, stable label for metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::InvalidRing(_) | Error::InvalidShard(_) => "invalid_config",
            Error::Lease(e) => e.metric_label(),
            Error::AlreadyRunning => "already_running",
        }
    }
}

/// The key that keeps objects together: objects with equal keys always share a shard.
pub type KeyFn = Arc<dyn Fn(&ObjectMeta) -> String + Send + Sync>;

/// The default key: the object's `giantswarm.io/cluster` label, else its own
/// `namespace/name`.
pub fn cluster_key() -> KeyFn {
    label_key(CLUSTER_LABEL)
}

/// Key objects by the label `label`, else by their own `namespace/name`.
pub fn label_key(label: &str) -> KeyFn {
    let label = label.to_string();
    Arc::new(move |meta: &ObjectMeta| {
        meta.labels.as_ref().and_then(|l| l.get(&label)).filter(|v| !v.is_empty()).cloned().unwrap_or_else(|| {
            format!("{}/{}", meta.namespace.as_deref().unwrap_or_default(), meta.name.as_deref().unwrap_or_default())
        })
    })
}

/// Labels `{ring, shard, kind}` of the objects-per-shard gauge.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ShardLabels {
    pub ring: String,
    pub shard: String,
    pub kind: String,
}

/// Labels `{ring, kind, reason}` of the moves counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct MoveLabels {
    pub ring: String,
    pub kind: String,
    pub reason: &'static str,
}

/// Labels `{ring, shard}`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct RingShardLabels {
    pub ring: String,
    pub shard: String,
}

/// The sharding metrics of one replica.
#[derive(Clone, Debug)]
pub(crate) struct ShardingMetrics {
    pub objects: Family<ShardLabels, Gauge>,
    pub moves: Family<MoveLabels, Counter>,
    pub move_wait: Histogram,
    pub assignment_requests: Counter,
    pub renewals: Family<RingShardLabels, Counter>,
    pub held: Family<RingShardLabels, Gauge>,
}

impl Default for ShardingMetrics {
    fn default() -> Self {
        Self {
            objects: Family::default(),
            moves: Family::default(),
            move_wait: Histogram::new(exponential_buckets(0.05, 2.0, 14)),
            assignment_requests: Counter::default(),
            renewals: Family::default(),
            held: Family::default(),
        }
    }
}

/// What one replica needs for sharding: its shard Lease, its fence, the kinds its sharded
/// controllers registered, and (while it leads) the sharder. Cheap to clone.
#[derive(Clone)]
pub struct Sharding {
    inner: Arc<Inner>,
}

struct Inner {
    config: ShardingConfig,
    client: Client,
    key: KeyFn,
    held: Leadership,
    elector: Mutex<Option<LeaderElector>>,
    renewals: Counter,
    kinds: Mutex<Vec<Arc<dyn ShardedKind>>>,
    ranges: ranges::Ranges,
    annotations: Arc<Mutex<BTreeMap<String, String>>>,
    metrics: ShardingMetrics,
    ready: Mutex<Option<ReadyFlag>>,
}

impl std::fmt::Debug for Sharding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sharding")
            .field("ring", &self.inner.config.ring)
            .field("shard", &self.inner.config.shard)
            .field("held", &self.inner.held.is_leader())
            .finish_non_exhaustive()
    }
}

impl Sharding {
    /// Sharding for this replica: `key` names the group (cluster) of each object. Fails if
    /// the names or Lease durations are invalid.
    pub fn new(client: Client, config: ShardingConfig, key: KeyFn) -> Result<Self, Error> {
        config.validate()?;
        let labels = BTreeMap::from([(RING_LABEL.to_string(), config.ring.clone())]);
        let elector = LeaderElector::new(client.clone(), config.election())?.with_lease_labels(labels);
        let held = elector.leadership();
        let renewals = elector.renewal_counter();
        let annotations = elector.lease_annotations();
        Ok(Self {
            inner: Arc::new(Inner {
                config,
                client,
                key,
                held,
                elector: Mutex::new(Some(elector)),
                renewals,
                kinds: Mutex::new(Vec::new()),
                ranges: ranges::Ranges::new(),
                annotations,
                metrics: ShardingMetrics::default(),
                ready: Mutex::new(None),
            }),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &ShardingConfig {
        &self.inner.config
    }

    /// This replica's shard.
    pub fn shard(&self) -> &str {
        &self.inner.config.shard
    }

    /// The label selector of this replica's objects: `shard.operatorkit.giantswarm.io/<ring>=<shard>`.
    pub fn selector(&self) -> String {
        format!("{}={}", self.inner.config.shard_label(), self.inner.config.shard)
    }

    /// The fence: true while this replica holds its shard Lease within the renew deadline.
    /// Gate every client a sharded controller writes through with it
    /// ([`Leadership::gate`]); sharded controllers check it before each write themselves.
    pub fn held(&self) -> Leadership {
        self.inner.held.clone()
    }

    /// Register the sharding metrics with `registry` (prefix `operatorkit_sharding_`):
    /// `objects{ring,shard,kind}` (on the sharder), `moves_total{ring,kind,reason}`,
    /// `move_wait_seconds` (drain start to reassignment), `assignment_requests_total` (label
    /// writes of the sharder), `lease_renewals_total{ring,shard}` and `lease_held{ring,shard}`.
    pub fn register_metrics(&self, registry: &mut Registry) {
        let m = &self.inner.metrics;
        let r = registry.sub_registry_with_prefix("operatorkit_sharding");
        crate::metrics::register(
            r,
            "objects",
            "Objects assigned to each shard, as the sharder sees them.",
            m.objects.clone(),
        );
        crate::metrics::register(r, "moves", "Objects moved from one shard to another, by reason.", m.moves.clone());
        crate::metrics::register(
            r,
            "move_wait_seconds",
            "Time from the decision to move an object to its reassignment.",
            m.move_wait.clone(),
        );
        crate::metrics::register(
            r,
            "assignment_requests",
            "Label writes the sharder sent to assign, drain and move objects.",
            m.assignment_requests.clone(),
        );
        crate::metrics::register(
            r,
            "lease_renewals",
            "Successful acquisitions and renewals of this shard's Lease.",
            m.renewals.clone(),
        );
        crate::metrics::register(
            r,
            "lease_held",
            "Whether this replica holds its shard Lease (1) or not (0).",
            m.held.clone(),
        );
        let labels = self.ring_shard_labels();
        m.held.get_or_create(&labels).set(0);
        let _ = m.renewals.get_or_create(&labels);
    }

    /// Register the readiness check `sharding/<ring>`: ready while this shard holds its Lease,
    /// that is while it is in the ring.
    pub fn readiness(&self, readiness: &Readiness) {
        let flag = readiness.register(format!("sharding/{}", self.inner.config.ring));
        flag.set(self.inner.held.is_leader());
        *self.inner.ready.lock() = Some(flag);
    }

    /// Hold this replica's shard Lease until `shutdown`, and run the sharder while
    /// `leadership` leads (label mode; in namespace-range mode, keep this replica's range in
    /// step with the ring instead, and `leadership` is not used). Build the sharded controllers first: the sharder assigns the kinds
    /// they registered. On shutdown the Lease is released if configured, so stop the sharded
    /// controllers before.
    pub async fn run(self, leadership: Leadership, shutdown: CancellationToken) -> Result<(), Error> {
        let elector = self.inner.elector.lock().take().ok_or(Error::AlreadyRunning)?;
        let kinds = self.inner.kinds.lock().clone();
        tracing::info!(
            ring = %self.inner.config.ring,
            shard = %self.inner.config.shard,
            kinds = kinds.len(),
            "joining the sharding ring"
        );
        let status = self.clone();
        let observe = tokio::spawn(async move { status.follow_lease().await });
        let sharding = match self.inner.config.mode {
            ShardingMode::Labels => {
                let sharder = sharder::Sharder::new(
                    self.inner.config.clone(),
                    self.inner.client.clone(),
                    self.inner.key.clone(),
                    kinds,
                    self.inner.metrics.clone(),
                );
                tokio::spawn(sharder.run(leadership, shutdown.clone()))
            }
            ShardingMode::NamespaceRanges => tokio::spawn(ranges::coordinate(
                self.inner.config.clone(),
                self.inner.client.clone(),
                self.inner.held.clone(),
                self.inner.ranges.clone(),
                self.inner.annotations.clone(),
            )),
        };
        // Dropping `run` (a killed task) must stop these too.
        let _sharding = sharder::AbortOnDrop(sharding);
        let _observe = sharder::AbortOnDrop(observe);
        let result = elector.run(shutdown).await;
        self.publish_held(false);
        result.map_err(Error::from)
    }

    /// Mirror the shard Lease into readiness and metrics.
    async fn follow_lease(self) {
        let mut held = self.inner.held.clone();
        let counter = self.inner.renewals.clone();
        let exported = self.inner.metrics.renewals.get_or_create(&self.ring_shard_labels()).clone();
        let mut last = 0;
        loop {
            self.publish_held(held.is_leader());
            // Renewals are counted by the elector; copy the count at every change or second.
            let now = counter.get();
            if now > last {
                exported.inc_by(now - last);
                last = now;
            }
            tokio::select! {
                () = async { if held.is_leader() { held.lost().await } else { held.acquired().await } } => {}
                () = tokio::time::sleep(Duration::from_secs(1)) => {}
            }
        }
    }

    fn publish_held(&self, held: bool) {
        if let Some(flag) = &*self.inner.ready.lock() {
            flag.set(held);
        }
        self.inner.metrics.held.get_or_create(&self.ring_shard_labels()).set(i64::from(held));
    }

    fn ring_shard_labels(&self) -> RingShardLabels {
        RingShardLabels { ring: self.inner.config.ring.clone(), shard: self.inner.config.shard.clone() }
    }

    /// The range state of the namespace-range mode.
    pub(crate) fn ranges(&self) -> &ranges::Ranges {
        &self.inner.ranges
    }

    /// Register a kind for the sharder to assign.
    pub(crate) fn register_kind(&self, kind: Arc<dyn ShardedKind>) {
        // Several controllers of one operator watch the same kind (a cluster controller, its
        // deleter, its terminator): the sharder keeps one cache of it.
        let mut kinds = self.inner.kinds.lock();
        if !kinds.iter().any(|k| k.identity() == kind.identity()) {
            kinds.push(kind);
        }
    }

    /// What a replica must do with a cached object of its watch.
    pub(crate) fn ownership(&self, meta: &ObjectMeta) -> Ownership {
        ownership(&self.inner.config, meta)
    }

    /// The guarded JSON patch with which this replica lets go of a drained object: both labels
    /// removed.
    pub(crate) fn acknowledge_patch(&self, meta: &ObjectMeta) -> Value {
        let config = &self.inner.config;
        let mut ops = guard(meta);
        ops.push(json!({"op": "test", "path": label_path(&config.shard_label()), "value": config.shard}));
        ops.push(json!({"op": "remove", "path": label_path(&config.shard_label())}));
        if label(meta, &config.drain_label()).is_some() {
            ops.push(json!({"op": "remove", "path": label_path(&config.drain_label())}));
        }
        Value::Array(ops)
    }
}

/// What a replica does with a cached object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ownership {
    /// Assigned to this shard: reconcile.
    Mine,
    /// Assigned to this shard and asked to let go: acknowledge, do not reconcile.
    Draining,
    /// Not (or no longer) this shard's: a stale cache entry; leave it alone.
    NotMine,
}

fn ownership(config: &ShardingConfig, meta: &ObjectMeta) -> Ownership {
    if label(meta, &config.shard_label()) != Some(config.shard.as_str()) {
        Ownership::NotMine
    } else if label(meta, &config.drain_label()).is_some() {
        Ownership::Draining
    } else {
        Ownership::Mine
    }
}

fn label<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.labels.as_ref().and_then(|l| l.get(key)).map(String::as_str)
}

/// `/metadata/labels/<key>`, escaped for JSON pointer (`/` is `~1`).
fn label_path(key: &str) -> String {
    format!("/metadata/labels/{}", key.replace('~', "~0").replace('/', "~1"))
}

/// The resourceVersion test that makes a patch fail (409/422) on a stale object.
fn guard(meta: &ObjectMeta) -> Vec<Value> {
    match &meta.resource_version {
        Some(rv) => vec![json!({"op": "test", "path": "/metadata/resourceVersion", "value": rv})],
        None => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> ShardingConfig {
        ShardingConfig { shard: "operator-1".into(), ..ShardingConfig::new("giantswarm", "kvm-operator") }
    }

    fn meta(labels: &[(&str, &str)]) -> ObjectMeta {
        ObjectMeta {
            name: Some("c1".into()),
            namespace: Some("org-a".into()),
            resource_version: Some("7".into()),
            labels: Some(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn names_must_fit_labels_and_leases() {
        assert!(config().validate().is_ok());
        let bad = ShardingConfig { ring: "Kvm_Operator".into(), ..config() };
        assert!(matches!(bad.validate(), Err(Error::InvalidRing(_))));
        let bad = ShardingConfig { shard: "x".repeat(64), ..config() };
        assert!(matches!(bad.validate(), Err(Error::InvalidShard(_))));
        assert_eq!(config().shard_label(), "shard.operatorkit.giantswarm.io/kvm-operator");
        assert_eq!(config().drain_label(), "drain.operatorkit.giantswarm.io/kvm-operator");
    }

    #[test]
    fn ownership_follows_the_labels() {
        let c = config();
        assert_eq!(ownership(&c, &meta(&[])), Ownership::NotMine);
        assert_eq!(
            ownership(&c, &meta(&[("shard.operatorkit.giantswarm.io/kvm-operator", "operator-2")])),
            Ownership::NotMine
        );
        assert_eq!(
            ownership(&c, &meta(&[("shard.operatorkit.giantswarm.io/kvm-operator", "operator-1")])),
            Ownership::Mine
        );
        assert_eq!(
            ownership(
                &c,
                &meta(&[
                    ("shard.operatorkit.giantswarm.io/kvm-operator", "operator-1"),
                    ("drain.operatorkit.giantswarm.io/kvm-operator", "true")
                ])
            ),
            Ownership::Draining
        );
    }

    #[test]
    fn keys_default_to_the_cluster_label_then_the_object() {
        let key = cluster_key();
        assert_eq!(key(&meta(&[("giantswarm.io/cluster", "a1b2c")])), "a1b2c");
        assert_eq!(key(&meta(&[])), "org-a/c1");
    }

    #[test]
    fn label_paths_are_escaped_json_pointers() {
        assert_eq!(
            label_path("shard.operatorkit.giantswarm.io/r"),
            "/metadata/labels/shard.operatorkit.giantswarm.io~1r"
        );
    }
}

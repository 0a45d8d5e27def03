//! Leader election on a `coordination.k8s.io/v1` Lease.
//!
//! [`Leadership`] is the read side that controllers consult before every write: a replica that
//! is not (or no longer) the leader keeps its caches warm but writes nothing. [`LeaderElector`]
//! is the write side: it competes for a Lease and flips the [`Leadership`] of this replica.
//!
//! # Semantics
//!
//! The algorithm is client-go's (`k8s.io/client-go/tools/leaderelection/leaderelection.go`,
//! `tryAcquireOrRenew`), so Go and Rust replicas can share a lease:
//!
//! - A candidate takes the lease when it is absent, when its holder is empty (released), when it
//!   names this candidate already, or when it has expired. Expiry is judged **by the local clock
//!   only**: a candidate remembers the instant at which it last saw the lease *change* and
//!   considers it expired `leaseDurationSeconds` after that instant. `renewTime` is written for
//!   people and other tools but never compared with the local clock, so clock skew between
//!   machines cannot make two replicas lead at once.
//! - Every write is an update that carries the `metadata.resourceVersion` of the lease as read
//!   (or a create, when it is absent). Of two candidates racing for the same lease, the second
//!   gets `409 Conflict` and stays a candidate.
//! - The record written is `holderIdentity`, `leaseDurationSeconds`, `acquireTime` (kept while the
//!   holder stays the same), `renewTime` and `leaseTransitions` (incremented whenever the holder
//!   changes). `preferredHolder` and `strategy` are kept as found.
//! - The leader renews every retry period. Renewals first try an update with the resourceVersion
//!   of its own last write (one request), then fall back to reading the lease.
//!
//! # Stepping down
//!
//! A leader that cannot renew steps down at once, without waiting for anyone to take over. The
//! renew deadline is counted from the moment the last *successful* renewal was sent, which is
//! stricter than client-go (which counts it from the start of each renewal round, up to one retry
//! period later). Another candidate starts its expiry clock no earlier than when it reads that
//! renewal, that is after it was sent; since the renew deadline is shorter than the lease
//! duration, this replica has stopped leading before any other can start. Requests are bounded by
//! the deadline, so a request that hangs cannot keep a replica leading. A leader that reads a
//! lease held by someone else (the lease was taken by force) steps down at once too.
//!
//! Unlike client-go, where losing the lease conventionally ends the process, the elector goes
//! back to being a candidate: [`LeaderElector::run`] only returns on shutdown. Dropping the
//! elector (aborting the task that runs it) ends leadership too, since nothing renews any more.
//!
//! # Shutdown
//!
//! On shutdown the replica stops leading first. With
//! [`release_on_cancel`](LeaderElectionConfig::release_on_cancel) it then writes the lease with an
//! empty holder and a lease duration of one second (client-go's `ReleaseOnCancel`), so a standby
//! takes over at its next retry instead of waiting for the lease to expire. This is off by
//! default: a write already in flight when leadership ends could still land after the standby
//! has started.
//!
//! ```no_run
//! # async fn demo(client: kube::Client) -> Result<(), operatorkit::leader::Error> {
//! use operatorkit::leader::{LeaderElectionConfig, LeaderElector};
//! use tokio_util::sync::CancellationToken;
//!
//! let config = LeaderElectionConfig { release_on_cancel: true, ..LeaderElectionConfig::new("giantswarm", "aws-operator") };
//! let elector = LeaderElector::new(client, config)?;
//! let leadership = elector.leadership(); // hand clones to the controllers
//! let shutdown = CancellationToken::new();
//! let election = tokio::spawn(elector.run(shutdown.clone()));
//! # drop(leadership);
//! // ... on SIGTERM:
//! shutdown.cancel();
//! # let _ = election.await;
//! # Ok(()) }
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams};
use parking_lot::Mutex;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tokio::sync::watch;
use tokio::time::{Instant, sleep_until, timeout, timeout_at};
use tokio_util::sync::CancellationToken;

/// Whether this replica currently holds the lease. Cheap to clone; every clone sees changes at
/// once.
///
/// A leadership that comes from a [`LeaderElector`] also knows the renew deadline of the last
/// renewal, and stops answering "leader" when it passes even if the elector's task has not run
/// yet to step down (a busy or starved runtime): fencing does not depend on scheduling.
#[derive(Clone, Debug)]
pub struct Leadership {
    rx: watch::Receiver<bool>,
    /// The instant until which the last renewal lets this replica lead (elector-made only).
    valid_until: Option<Arc<Mutex<Option<Instant>>>>,
}

impl Leadership {
    /// A replica that is always the leader: the default when leader election is off.
    pub fn always() -> Self {
        // The sender is dropped at once; the receiver keeps the last value forever.
        let (_tx, rx) = watch::channel(true);
        Self { rx, valid_until: None }
    }

    /// Wrap the receiving end of a leadership channel (`true` = leader).
    pub fn from_receiver(rx: watch::Receiver<bool>) -> Self {
        Self { rx, valid_until: None }
    }

    /// Whether this replica may write now.
    pub fn is_leader(&self) -> bool {
        *self.rx.borrow()
            && self.valid_until.as_ref().is_none_or(|until| until.lock().is_some_and(|d| Instant::now() < d))
    }

    /// Whether the renew deadline passed while the elector has not (yet) stepped down: a
    /// renewal is late. Either it still lands and this replica leads on, or the elector steps
    /// down. Work refused meanwhile must be retried, not dropped.
    pub(crate) fn overdue(&self) -> bool {
        *self.rx.borrow() && !self.is_leader()
    }

    /// Wait until this replica is the leader. Returns at once if it already is. If the
    /// elector stops while this replica is not the leader, this never returns.
    pub async fn acquired(&mut self) {
        if self.rx.wait_for(|leader| *leader).await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    /// Wait until this replica loses leadership. If the elector stops while this replica leads
    /// (the `always` case), this never returns.
    pub async fn lost(&mut self) {
        if self.rx.wait_for(|leader| !*leader).await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    /// `Ok` while this replica leads, else [`NotLeader`]. Make this check immediately before a
    /// write that does not go through a [gated client](Self::gate), for example in an AWS SDK
    /// interceptor, so that the write is refused on a replica that lost the lease mid-reconcile.
    pub fn check(&self) -> Result<(), NotLeader> {
        if self.is_leader() { Ok(()) } else { Err(NotLeader) }
    }

    /// A client that sends writes (`POST`, `PUT`, `PATCH`, `DELETE`) only while this replica
    /// leads, and refuses them with [`NotLeader`] (as `kube::Error::Service`) otherwise. Reads
    /// and watches always pass, so a standby keeps its caches warm.
    ///
    /// The controller checks leadership before each resource; a resource may write many times
    /// and wait in between, and the lease can be lost meanwhile. Handing resources a gated
    /// client moves the check to the moment each request is sent, so a replica that lost the
    /// lease makes no further write, whatever the resource is doing. The elector itself must use
    /// the ungated client, or it could never take the lease.
    pub fn gate(&self, client: kube::Client) -> kube::Client {
        let namespace = client.default_namespace().to_string();
        kube::Client::new(GatedClient { inner: client, leadership: self.clone() }, namespace)
    }
}

/// A write refused because this replica does not hold the leader election lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("this replica does not hold the leader election lease: write refused")]
pub struct NotLeader;

/// The service behind [`Leadership::gate`].
#[derive(Clone)]
struct GatedClient {
    inner: kube::Client,
    leadership: Leadership,
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl tower_service::Service<http::Request<kube::client::Body>> for GatedClient {
    type Response = http::Response<kube::client::Body>;
    type Error = BoxError;
    type Future = futures::future::BoxFuture<'static, Result<Self::Response, BoxError>>;

    fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), BoxError>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<kube::client::Body>) -> Self::Future {
        let write = matches!(
            *request.method(),
            http::Method::POST | http::Method::PUT | http::Method::PATCH | http::Method::DELETE
        );
        // Checked when the request is dispatched, not when it was built.
        let refused = write && !self.leadership.is_leader();
        let inner = self.inner.clone();
        Box::pin(async move {
            if refused {
                tracing::debug!(method = %request.method(), uri = %request.uri(), "write refused: not the leader");
                return Err(Box::new(NotLeader) as BoxError);
            }
            inner.send(request).await.map_err(|e| Box::new(e) as BoxError)
        })
    }
}

/// client-go's `LeaseDuration` default.
pub const DEFAULT_LEASE_DURATION: Duration = Duration::from_secs(15);
/// client-go's `RenewDeadline` default.
pub const DEFAULT_RENEW_DEADLINE: Duration = Duration::from_secs(10);
/// client-go's `RetryPeriod` default.
pub const DEFAULT_RETRY_PERIOD: Duration = Duration::from_secs(2);

/// client-go's `JitterFactor`: a candidate waits between one and 2.2 retry periods between
/// attempts, so candidates started together do not keep colliding.
const JITTER_FACTOR: f64 = 1.2;

/// The lease duration written when the lease is released, as client-go does.
const RELEASED_LEASE_SECONDS: i32 = 1;

/// Which lease to compete for, as whom, and how fast.
///
/// Build it with [`LeaderElectionConfig::new`] and override fields with struct update syntax:
///
/// ```
/// use std::time::Duration;
/// use operatorkit::leader::LeaderElectionConfig;
///
/// let config = LeaderElectionConfig {
///     lease_duration: Duration::from_secs(30),
///     renew_deadline: Duration::from_secs(20),
///     ..LeaderElectionConfig::new("giantswarm", "kvm-operator")
/// };
/// assert_eq!(config.retry_period, Duration::from_secs(2));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaderElectionConfig {
    /// Namespace of the Lease.
    pub lease_namespace: String,
    /// Name of the Lease. Every replica of one operator (version) must use the same name.
    pub lease_name: String,
    /// This candidate's identity, written to `holderIdentity`. It must be unique among the
    /// candidates: two replicas with one identity would both consider themselves the holder.
    pub identity: String,
    /// How long other candidates wait after they last saw the lease change before they take it.
    /// Written to `leaseDurationSeconds` in whole seconds (rounded down).
    pub lease_duration: Duration,
    /// How long the leader keeps leading without a successful renewal. Shorter than the lease
    /// duration, so the leader stops before anyone else may start.
    pub renew_deadline: Duration,
    /// How often the leader renews and candidates retry.
    pub retry_period: Duration,
    /// Release the lease on shutdown so a standby takes over at once (client-go
    /// `ReleaseOnCancel`). Only safe when the replica's writes have stopped by then.
    pub release_on_cancel: bool,
}

impl LeaderElectionConfig {
    /// The client-go defaults (15 s lease, 10 s renew deadline, 2 s retry period, no release on
    /// cancel) for the lease `namespace/name`, with [`default_identity`].
    pub fn new(lease_namespace: impl Into<String>, lease_name: impl Into<String>) -> Self {
        Self {
            lease_namespace: lease_namespace.into(),
            lease_name: lease_name.into(),
            identity: default_identity(),
            lease_duration: DEFAULT_LEASE_DURATION,
            renew_deadline: DEFAULT_RENEW_DEADLINE,
            retry_period: DEFAULT_RETRY_PERIOD,
            release_on_cancel: false,
        }
    }

    /// The lease duration as written to the lease: whole seconds, rounded down.
    fn lease_seconds(&self) -> i32 {
        i32::try_from(self.lease_duration.as_secs()).unwrap_or(i32::MAX)
    }

    /// The checks of client-go's `NewLeaderElector`, made against the lease duration as it is
    /// written (whole seconds), since that is what the other candidates wait for.
    fn validate(&self) -> Result<(), Error> {
        if self.lease_namespace.is_empty() || self.lease_name.is_empty() {
            return Err(Error::EmptyLeaseName);
        }
        if self.identity.is_empty() {
            return Err(Error::EmptyIdentity);
        }
        if self.lease_seconds() < 1 {
            return Err(Error::LeaseDurationTooShort { lease_duration: self.lease_duration });
        }
        if self.retry_period.is_zero() {
            return Err(Error::ZeroRetryPeriod);
        }
        let written = Duration::from_secs(self.lease_duration.as_secs());
        if self.renew_deadline >= written {
            return Err(Error::RenewDeadlineNotShorterThanLease {
                renew_deadline: self.renew_deadline,
                lease_duration: written,
            });
        }
        if self.renew_deadline.as_secs_f64() <= JITTER_FACTOR * self.retry_period.as_secs_f64() {
            return Err(Error::RenewDeadlineTooShort {
                renew_deadline: self.renew_deadline,
                retry_period: self.retry_period,
            });
        }
        Ok(())
    }
}

/// An identity unique to this process: the pod name (`POD_NAME`, else `HOSTNAME`, which
/// Kubernetes sets to the pod name, else `/etc/hostname`), an underscore and a random suffix.
///
/// The suffix matters: a restarted pod keeps its name, and must not mistake the lease its
/// predecessor held for its own while the predecessor may still be running.
pub fn default_identity() -> String {
    let base = ["POD_NAME", "HOSTNAME"]
        .iter()
        .find_map(|var| std::env::var(var).ok().map(|v| v.trim().to_string()).filter(|v| !v.is_empty()))
        .or_else(|| {
            std::fs::read_to_string("/etc/hostname").ok().map(|v| v.trim().to_string()).filter(|v| !v.is_empty())
        })
        .unwrap_or_else(|| "operatorkit".to_string());
    format!("{base}_{:016x}", random_u64())
}

/// Errors of leader election.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The lease namespace or name is empty.
    #[error("the lease namespace and name must not be empty")]
    EmptyLeaseName,
    /// The candidate identity is empty.
    #[error("the leader election identity must not be empty")]
    EmptyIdentity,
    /// The lease duration is shorter than one second, the unit of `leaseDurationSeconds`.
    #[error("the lease duration must be at least one second, got {lease_duration:?}")]
    LeaseDurationTooShort {
        /// The configured lease duration.
        lease_duration: Duration,
    },
    /// The retry period is zero.
    #[error("the leader election retry period must be longer than zero")]
    ZeroRetryPeriod,
    /// The renew deadline is not shorter than the lease duration, so a leader could still lead
    /// after another candidate has taken over.
    #[error(
        "the renew deadline ({renew_deadline:?}) must be shorter than the lease duration in whole seconds ({lease_duration:?})"
    )]
    RenewDeadlineNotShorterThanLease {
        /// The configured renew deadline.
        renew_deadline: Duration,
        /// The lease duration as written to the lease.
        lease_duration: Duration,
    },
    /// The renew deadline leaves no room for a jittered retry.
    #[error("the renew deadline ({renew_deadline:?}) must be longer than 1.2 × the retry period ({retry_period:?})")]
    RenewDeadlineTooShort {
        /// The configured renew deadline.
        renew_deadline: Duration,
        /// The configured retry period.
        retry_period: Duration,
    },
    /// Releasing the lease on shutdown failed; it expires after its lease duration instead.
    #[error("cannot release the lease {lease}: {source}")]
    Release {
        /// `namespace/name` of the lease.
        lease: String,
        /// The API error.
        #[source]
        source: Box<kube::Error>,
    },
    /// Releasing the lease on shutdown took longer than the renew deadline; it expires after
    /// its lease duration instead.
    #[error("releasing the lease {lease} did not finish within {after:?}")]
    ReleaseTimedOut {
        /// `namespace/name` of the lease.
        lease: String,
        /// How long the release was given.
        after: Duration,
    },
}

impl Error {
    /// A short, stable label for metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::EmptyLeaseName
            | Error::EmptyIdentity
            | Error::LeaseDurationTooShort { .. }
            | Error::ZeroRetryPeriod
            | Error::RenewDeadlineNotShorterThanLease { .. }
            | Error::RenewDeadlineTooShort { .. } => "invalid_config",
            Error::Release { .. } => "release_failed",
            Error::ReleaseTimedOut { .. } => "release_timeout",
        }
    }
}

/// A lease as this process last saw it. The sharder judges shard Leases with it too, by the
/// same rule: expiry counts from the last *observed change*, on the local clock.
#[derive(Debug, Clone)]
pub(crate) struct Observed {
    pub(crate) spec: LeaseSpec,
    pub(crate) resource_version: Option<String>,
    /// When the spec was last seen to change, on the local monotonic clock: the start of the
    /// lease duration for everyone but the holder.
    pub(crate) changed_at: Instant,
}

impl Observed {
    /// First sight of `spec`, now.
    pub(crate) fn new(spec: LeaseSpec, resource_version: Option<String>) -> Self {
        Self { spec, resource_version, changed_at: Instant::now() }
    }

    /// Record `spec` as read again: the expiry clock restarts only if it changed.
    pub(crate) fn update(&mut self, spec: LeaseSpec, resource_version: Option<String>) {
        if self.spec != spec {
            self.spec = spec;
            self.changed_at = Instant::now();
        }
        self.resource_version = resource_version;
    }

    pub(crate) fn holder(&self) -> &str {
        self.spec.holder_identity.as_deref().unwrap_or("")
    }

    /// Whether the holder's lease still runs, as seen from here (client-go `isLeaseValid`).
    pub(crate) fn is_valid(&self, now: Instant) -> bool {
        let seconds = u64::try_from(self.spec.lease_duration_seconds.unwrap_or(0)).unwrap_or(0);
        self.changed_at + Duration::from_secs(seconds) > now
    }
}

/// The outcome of one attempt to acquire or renew.
#[derive(Debug)]
enum Attempt {
    /// This candidate holds the lease; the write proving it was sent at `sent`.
    Held { sent: Instant },
    /// Another candidate holds a lease that has not expired as seen from here.
    HeldByOther { holder: String },
}

/// Why a leader stopped leading.
#[derive(Debug)]
enum Stopped {
    Shutdown,
    DeadlinePassed,
    TakenBy(String),
}

/// Label set of the leader election metrics: the lease name, as client-go labels them.
type LeaseLabels = Vec<(String, String)>;

/// Competes for a Lease and publishes whether this replica holds it.
pub struct LeaderElector {
    api: Api<Lease>,
    config: LeaderElectionConfig,
    leader: watch::Sender<bool>,
    /// The renew deadline of the last renewal, shared with every [`Leadership`].
    valid_until: Arc<Mutex<Option<Instant>>>,
    /// Labels written on the Lease (a shard Lease's ring, say).
    lease_labels: BTreeMap<String, String>,
    /// Annotations written with every renewal; others may change them while the elector runs.
    lease_annotations: Arc<Mutex<BTreeMap<String, String>>>,
    /// Successful acquisitions and renewals.
    renewals: Counter,
    observed: Option<Observed>,
    /// Whether this candidate's own last write made it the holder; the renewal fast path uses
    /// the resourceVersion of that write without reading first.
    holding: bool,
    status_metric: Family<LeaseLabels, Gauge>,
    metric_labels: LeaseLabels,
}

impl fmt::Debug for LeaderElector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeaderElector")
            .field("lease", &self.lease_key())
            .field("identity", &self.config.identity)
            .field("leader", &*self.leader.borrow())
            .finish_non_exhaustive()
    }
}

impl Drop for LeaderElector {
    /// A dropped elector (its `run` future dropped or its task aborted) renews nothing, so this
    /// replica must not go on writing as leader.
    fn drop(&mut self) {
        self.set_leader(false);
    }
}

impl LeaderElector {
    /// An elector for `config`, not yet running. Fails if the durations cannot guarantee that
    /// two replicas never lead at once.
    pub fn new(client: kube::Client, config: LeaderElectionConfig) -> Result<Self, Error> {
        config.validate()?;
        let api = Api::namespaced(client, &config.lease_namespace);
        let (leader, _) = watch::channel(false);
        let status_metric = Family::<LeaseLabels, Gauge>::default();
        let metric_labels = vec![("name".to_string(), config.lease_name.clone())];
        // Export 0 from the start, so a dashboard can tell a standby from a missing replica.
        status_metric.get_or_create(&metric_labels).set(0);
        Ok(Self {
            api,
            config,
            leader,
            valid_until: Arc::new(Mutex::new(None)),
            lease_labels: BTreeMap::new(),
            lease_annotations: Arc::new(Mutex::new(BTreeMap::new())),
            renewals: Counter::default(),
            observed: None,
            holding: false,
            status_metric,
            metric_labels,
        })
    }

    /// Also write these labels on the Lease (kept as found otherwise), so that leases of one
    /// kind can be listed by label: the shard Leases of one ring, for example.
    pub fn with_lease_labels(mut self, labels: BTreeMap<String, String>) -> Self {
        self.lease_labels = labels;
        self
    }

    /// The read side for controllers: follows this elector from now on.
    pub fn leadership(&self) -> Leadership {
        Leadership { rx: self.leader.subscribe(), valid_until: Some(self.valid_until.clone()) }
    }

    /// Annotations to write on the Lease with every renewal from now on (removing one here
    /// leaves it on the Lease).
    pub(crate) fn lease_annotations(&self) -> Arc<Mutex<BTreeMap<String, String>>> {
        self.lease_annotations.clone()
    }

    /// Counts every successful acquisition and renewal of the lease.
    pub(crate) fn renewal_counter(&self) -> Counter {
        self.renewals.clone()
    }

    /// This candidate's identity.
    pub fn identity(&self) -> &str {
        &self.config.identity
    }

    /// Register `leader_election_master_status{name="<lease>"}` (client-go's metric: 1 while this
    /// replica leads, else 0) with `registry`.
    pub fn register_metrics(&self, registry: &mut Registry) {
        registry.register(
            "leader_election_master_status",
            "Whether this replica holds the leader election lease (1) or not (0)",
            self.status_metric.clone(),
        );
    }

    /// Compete for the lease until `shutdown` is cancelled; lead while holding it, go back to
    /// being a candidate after losing it. Returns only on shutdown, with an error only when the
    /// lease could not be released (it then expires by itself).
    pub async fn run(mut self, shutdown: CancellationToken) -> Result<(), Error> {
        tracing::info!(lease = %self.lease_key(), identity = %self.config.identity, "starting leader election");
        loop {
            let Some(deadline) = self.acquire(&shutdown).await else {
                return self.shut_down().await;
            };
            *self.valid_until.lock() = Some(deadline);
            self.set_leader(true);
            tracing::info!(lease = %self.lease_key(), identity = %self.config.identity, "became leader");
            match self.lead(&shutdown, deadline).await {
                Stopped::Shutdown => return self.shut_down().await,
                Stopped::DeadlinePassed => {
                    self.step_down();
                    tracing::warn!(
                        lease = %self.lease_key(),
                        identity = %self.config.identity,
                        renew_deadline = ?self.config.renew_deadline,
                        "stopped leading: the lease could not be renewed within the renew deadline"
                    );
                }
                Stopped::TakenBy(holder) => {
                    self.step_down();
                    tracing::warn!(
                        lease = %self.lease_key(),
                        identity = %self.config.identity,
                        holder = %holder,
                        "stopped leading: another candidate holds the lease"
                    );
                }
            }
        }
    }

    /// Try until this candidate holds the lease. Returns the deadline of the first renewal, or
    /// `None` on shutdown.
    async fn acquire(&mut self, shutdown: &CancellationToken) -> Option<Instant> {
        loop {
            let attempt = tokio::select! {
                biased;
                () = shutdown.cancelled() => return None,
                attempt = timeout(self.config.renew_deadline, self.try_acquire_or_renew()) => attempt,
            };
            match attempt {
                Ok(Ok(Attempt::Held { sent })) => {
                    let deadline = sent + self.config.renew_deadline;
                    if Instant::now() < deadline {
                        return Some(deadline);
                    }
                    // The write took so long that others may soon consider it expired; lead
                    // only after a timely renewal.
                    tracing::debug!(lease = %self.lease_key(), "acquired the lease too late to lead safely; renewing");
                }
                Ok(Ok(Attempt::HeldByOther { holder })) => {
                    tracing::debug!(lease = %self.lease_key(), holder = %holder, "the lease is held by another candidate");
                }
                Ok(Err(error)) => {
                    tracing::warn!(lease = %self.lease_key(), error = %error, "cannot acquire the lease");
                }
                Err(_) => {
                    tracing::warn!(lease = %self.lease_key(), after = ?self.config.renew_deadline, "acquiring the lease timed out");
                }
            }
            let wake = Instant::now() + jittered(self.config.retry_period);
            tokio::select! {
                biased;
                () = shutdown.cancelled() => return None,
                () = sleep_until(wake) => {}
            }
        }
    }

    /// Renew every retry period until a renewal misses `deadline`, the lease is taken, or
    /// shutdown.
    async fn lead(&mut self, shutdown: &CancellationToken, mut deadline: Instant) -> Stopped {
        loop {
            let wake = (Instant::now() + self.config.retry_period).min(deadline);
            tokio::select! {
                biased;
                () = shutdown.cancelled() => return Stopped::Shutdown,
                () = sleep_until(wake) => {}
            }
            // Retry until one renewal succeeds; no request may outlive the deadline.
            loop {
                if Instant::now() >= deadline {
                    return Stopped::DeadlinePassed;
                }
                let attempt = tokio::select! {
                    biased;
                    () = shutdown.cancelled() => return Stopped::Shutdown,
                    attempt = timeout_at(deadline, self.try_acquire_or_renew()) => attempt,
                };
                match attempt {
                    Ok(Ok(Attempt::Held { sent })) => {
                        deadline = sent + self.config.renew_deadline;
                        *self.valid_until.lock() = Some(deadline);
                        tracing::trace!(lease = %self.lease_key(), "renewed the lease");
                        break;
                    }
                    Ok(Ok(Attempt::HeldByOther { holder })) => return Stopped::TakenBy(holder),
                    Ok(Err(error)) => {
                        tracing::warn!(lease = %self.lease_key(), error = %error, "cannot renew the lease; retrying");
                    }
                    Err(_) => return Stopped::DeadlinePassed,
                }
                let wake = (Instant::now() + self.config.retry_period).min(deadline);
                tokio::select! {
                    biased;
                    () = shutdown.cancelled() => return Stopped::Shutdown,
                    () = sleep_until(wake) => {}
                }
            }
        }
    }

    /// client-go's `tryAcquireOrRenew`: one optimistic renewal when holding, else read the
    /// lease, and write it if it is absent, free, ours or expired.
    async fn try_acquire_or_renew(&mut self) -> Result<Attempt, kube::Error> {
        if self.holding
            && let Some(observed) = &self.observed
            && observed.holder() == self.config.identity
            && observed.resource_version.is_some()
        {
            let lease = self.lease_object(observed.resource_version.clone(), None, self.renewed(&observed.spec));
            let sent = Instant::now();
            match self.api.replace(&self.config.lease_name, &PostParams::default(), &lease).await {
                Ok(written) => {
                    self.observe_own_write(written);
                    return Ok(Attempt::Held { sent });
                }
                Err(error) => {
                    tracing::debug!(lease = %self.lease_key(), error = %error, "optimistic renewal failed; reading the lease");
                }
            }
        }

        let Some(current) = self.api.get_opt(&self.config.lease_name).await? else {
            let lease = self.lease_object(None, None, self.taken_over(&LeaseSpec::default(), false));
            let sent = Instant::now();
            let created = self.api.create(&PostParams::default(), &lease).await?;
            self.observe_own_write(created);
            return Ok(Attempt::Held { sent });
        };

        let observed = self.observe_read(&current);
        let holder = observed.holder().to_string();
        let valid = observed.is_valid(Instant::now());
        let observed_spec = observed.spec.clone();
        let mine = holder == self.config.identity;
        if !holder.is_empty() && !mine && valid {
            self.holding = false;
            return Ok(Attempt::HeldByOther { holder });
        }
        let spec = if mine { self.renewed(&observed_spec) } else { self.taken_over(&observed_spec, true) };
        let lease = self.lease_object(current.metadata.resource_version.clone(), Some(current.metadata), spec);
        let sent = Instant::now();
        let written = self.api.replace(&self.config.lease_name, &PostParams::default(), &lease).await?;
        if !mine {
            tracing::debug!(lease = %self.lease_key(), previous = %holder, "took over the lease");
        }
        self.observe_own_write(written);
        Ok(Attempt::Held { sent })
    }

    /// The record of a renewal: same holder, acquire time and transitions; new renew time.
    fn renewed(&self, spec: &LeaseSpec) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(self.config.identity.clone()),
            lease_duration_seconds: Some(self.config.lease_seconds()),
            renew_time: Some(MicroTime(Timestamp::now())),
            acquire_time: spec.acquire_time.clone().or_else(|| Some(MicroTime(Timestamp::now()))),
            lease_transitions: Some(spec.lease_transitions.unwrap_or(0)),
            preferred_holder: spec.preferred_holder.clone(),
            strategy: spec.strategy.clone(),
        }
    }

    /// The record of a change of holder (or of the first holder, `existed == false`).
    fn taken_over(&self, spec: &LeaseSpec, existed: bool) -> LeaseSpec {
        let now = Timestamp::now();
        let transitions = spec.lease_transitions.unwrap_or(0);
        LeaseSpec {
            holder_identity: Some(self.config.identity.clone()),
            lease_duration_seconds: Some(self.config.lease_seconds()),
            renew_time: Some(MicroTime(now)),
            acquire_time: Some(MicroTime(now)),
            lease_transitions: Some(if existed { transitions.saturating_add(1) } else { transitions }),
            preferred_holder: spec.preferred_holder.clone(),
            strategy: spec.strategy.clone(),
        }
    }

    /// A Lease to write. `metadata` is the lease as read (labels, annotations and owners are
    /// kept); `resource_version` guards the write.
    fn lease_object(&self, resource_version: Option<String>, metadata: Option<ObjectMeta>, spec: LeaseSpec) -> Lease {
        let mut metadata = metadata.unwrap_or_default();
        if !self.lease_labels.is_empty() {
            let labels = metadata.labels.get_or_insert_with(BTreeMap::new);
            labels.extend(self.lease_labels.clone());
        }
        let annotations = self.lease_annotations.lock().clone();
        if !annotations.is_empty() {
            metadata.annotations.get_or_insert_with(BTreeMap::new).extend(annotations);
        }
        metadata.name = Some(self.config.lease_name.clone());
        metadata.namespace = Some(self.config.lease_namespace.clone());
        metadata.resource_version = resource_version;
        // Left out, the server keeps the field managers as they are.
        metadata.managed_fields = None;
        Lease { metadata, spec: Some(spec) }
    }

    /// Record a lease as read. The expiry clock restarts only when the record changed, exactly
    /// as client-go compares the raw record.
    fn observe_read(&mut self, lease: &Lease) -> &Observed {
        let spec = lease.spec.clone().unwrap_or_default();
        let resource_version = lease.metadata.resource_version.clone();
        let observed = match self.observed.take() {
            Some(mut unchanged) if unchanged.spec == spec => {
                unchanged.resource_version = resource_version;
                unchanged
            }
            previous => {
                let holder = spec.holder_identity.as_deref().unwrap_or("");
                let new_holder = previous.as_ref().is_none_or(|p| p.holder() != holder);
                if new_holder && !holder.is_empty() && holder != self.config.identity {
                    tracing::info!(lease = %lease_key(&self.config), leader = %holder, "observed a new leader");
                }
                Observed { spec, resource_version, changed_at: Instant::now() }
            }
        };
        self.observed.insert(observed)
    }

    /// Record a lease as this candidate wrote it (the server's copy, so that later reads of the
    /// same record compare equal).
    fn observe_own_write(&mut self, lease: Lease) {
        self.renewals.inc();
        self.observed = Some(Observed {
            spec: lease.spec.unwrap_or_default(),
            resource_version: lease.metadata.resource_version,
            changed_at: Instant::now(),
        });
        self.holding = true;
    }

    fn set_leader(&self, leader: bool) {
        self.leader.send_if_modified(|current| {
            let changed = *current != leader;
            *current = leader;
            changed
        });
        self.status_metric.get_or_create(&self.metric_labels).set(i64::from(leader));
    }

    fn step_down(&mut self) {
        *self.valid_until.lock() = None;
        self.set_leader(false);
        self.holding = false;
    }

    /// Stop leading, then release the lease if configured.
    async fn shut_down(mut self) -> Result<(), Error> {
        let was_leader = *self.leader.borrow();
        self.step_down();
        if was_leader {
            tracing::info!(lease = %self.lease_key(), identity = %self.config.identity, "stopped leading: shutting down");
        }
        if !self.config.release_on_cancel {
            return Ok(());
        }
        let after = self.config.renew_deadline;
        match timeout(after, self.release()).await {
            Ok(Ok(released)) => {
                if released {
                    tracing::info!(lease = %self.lease_key(), "released the lease");
                }
                Ok(())
            }
            Ok(Err(source)) => Err(Error::Release { lease: self.lease_key(), source: Box::new(source) }),
            Err(_) => Err(Error::ReleaseTimedOut { lease: self.lease_key(), after }),
        }
    }

    /// client-go's `release`: if the lease still names this candidate, write it with an empty
    /// holder and a one-second duration, guarded by its resourceVersion. Returns whether it did.
    async fn release(&self) -> Result<bool, kube::Error> {
        let Some(current) = self.api.get_opt(&self.config.lease_name).await? else {
            return Ok(false);
        };
        let spec = current.spec.clone().unwrap_or_default();
        if spec.holder_identity.as_deref() != Some(self.config.identity.as_str()) {
            return Ok(false);
        }
        let now = Timestamp::now();
        let released = LeaseSpec {
            holder_identity: Some(String::new()),
            lease_duration_seconds: Some(RELEASED_LEASE_SECONDS),
            renew_time: Some(MicroTime(now)),
            acquire_time: Some(MicroTime(now)),
            lease_transitions: spec.lease_transitions,
            preferred_holder: spec.preferred_holder,
            strategy: spec.strategy,
        };
        let lease = self.lease_object(current.metadata.resource_version.clone(), Some(current.metadata), released);
        self.api.replace(&self.config.lease_name, &PostParams::default(), &lease).await?;
        Ok(true)
    }

    fn lease_key(&self) -> String {
        lease_key(&self.config)
    }
}

fn lease_key(config: &LeaderElectionConfig) -> String {
    format!("{}/{}", config.lease_namespace, config.lease_name)
}

/// `period` stretched by a random factor in [1, 1 + JITTER_FACTOR) (client-go `wait.Jitter`).
fn jittered(period: Duration) -> Duration {
    // 53 random bits make a uniformly distributed f64 in [0, 1).
    let fraction = (random_u64() >> 11) as f64 / (1u64 << 53) as f64;
    period.mul_f64(1.0 + JITTER_FACTOR * fraction)
}

/// 64 random bits from the standard library: each `RandomState` is keyed from the operating
/// system's generator (and differs from the previous one), which is enough for jitter and
/// identity suffixes.
fn random_u64() -> u64 {
    let mut hasher = std::hash::RandomState::new().build_hasher();
    hasher.write_u32(std::process::id());
    hasher.finish()
}

/// The Lease the replicas of one operator version compete for: `<component>-<version>`, made a
/// valid Lease name (semver's `+` and upper case are not allowed in one).
///
/// One Lease per version, because versions of an operator run side by side and each reconciles
/// only the clusters of its own Releases: the replicas of one version elect a leader among
/// themselves, without stopping another version's.
pub fn lease_name(component: &str, version: &str) -> String {
    let version: String = version
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '.' || c == '-' { c } else { '-' })
        .collect();
    format!("{component}-{version}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> LeaderElectionConfig {
        LeaderElectionConfig {
            identity: "replica-a".into(),
            lease_duration: Duration::from_secs(2),
            renew_deadline: Duration::from_millis(1500),
            retry_period: Duration::from_millis(200),
            ..LeaderElectionConfig::new("default", "lock")
        }
    }

    #[test]
    fn defaults_are_client_go_defaults() {
        let c = LeaderElectionConfig::new("ns", "lock");
        assert_eq!(c.lease_duration, Duration::from_secs(15));
        assert_eq!(c.renew_deadline, Duration::from_secs(10));
        assert_eq!(c.retry_period, Duration::from_secs(2));
        assert!(!c.release_on_cancel);
        assert_eq!(c.validate().ok(), Some(()));
    }

    #[test]
    fn short_durations_used_by_tests_are_valid() {
        assert_eq!(config().validate().ok(), Some(()));
    }

    #[test]
    fn default_identities_are_unique_and_suffixed() {
        let a = default_identity();
        let b = default_identity();
        assert_ne!(a, b);
        let (base, suffix) = a.rsplit_once('_').unwrap_or_default();
        assert!(!base.is_empty());
        assert_eq!(suffix.len(), 16);
        assert!(suffix.chars().all(|c| c.is_ascii_hexdigit()));
    }

    #[test]
    fn empty_names_and_identity_are_rejected() {
        let c = LeaderElectionConfig { lease_name: String::new(), ..config() };
        assert!(matches!(c.validate(), Err(Error::EmptyLeaseName)));
        let c = LeaderElectionConfig { lease_namespace: String::new(), ..config() };
        assert!(matches!(c.validate(), Err(Error::EmptyLeaseName)));
        let c = LeaderElectionConfig { identity: String::new(), ..config() };
        assert!(matches!(c.validate(), Err(Error::EmptyIdentity)));
    }

    #[test]
    fn renew_deadline_must_be_shorter_than_the_written_lease() {
        let c = LeaderElectionConfig { renew_deadline: Duration::from_secs(2), ..config() };
        assert!(matches!(c.validate(), Err(Error::RenewDeadlineNotShorterThanLease { .. })));
        // 2.9 s is written as 2 s: a 2.5 s deadline would outlive it for the other candidates.
        let c = LeaderElectionConfig {
            lease_duration: Duration::from_millis(2900),
            renew_deadline: Duration::from_millis(2500),
            ..config()
        };
        let err = c.validate().err();
        assert!(matches!(
            err,
            Some(Error::RenewDeadlineNotShorterThanLease { lease_duration, .. }) if lease_duration == Duration::from_secs(2)
        ));
    }

    #[test]
    fn renew_deadline_must_leave_room_for_jittered_retries() {
        let c = LeaderElectionConfig { retry_period: Duration::from_millis(1250), ..config() };
        assert!(matches!(c.validate(), Err(Error::RenewDeadlineTooShort { .. })));
        let c = LeaderElectionConfig { retry_period: Duration::ZERO, ..config() };
        assert!(matches!(c.validate(), Err(Error::ZeroRetryPeriod)));
    }

    #[test]
    fn sub_second_leases_are_rejected() {
        let c = LeaderElectionConfig {
            lease_duration: Duration::from_millis(900),
            renew_deadline: Duration::from_millis(500),
            retry_period: Duration::from_millis(100),
            ..config()
        };
        assert!(matches!(c.validate(), Err(Error::LeaseDurationTooShort { .. })));
    }

    #[test]
    fn error_messages_name_the_values_and_labels_are_stable() {
        let c = LeaderElectionConfig { renew_deadline: Duration::from_secs(3), ..config() };
        let err = c.validate().err().map(|e| (e.to_string(), e.metric_label()));
        assert_eq!(
            err,
            Some((
                "the renew deadline (3s) must be shorter than the lease duration in whole seconds (2s)".to_string(),
                "invalid_config"
            ))
        );
    }

    #[test]
    fn jitter_stays_within_client_go_bounds() {
        let period = Duration::from_millis(200);
        let samples: Vec<Duration> = (0..200).map(|_| jittered(period)).collect();
        assert!(samples.iter().all(|d| *d >= period && *d < period.mul_f64(1.0 + JITTER_FACTOR)));
        // Not constant: candidates started together must spread out.
        assert!(samples.iter().any(|d| *d != samples[0]));
    }

    #[test]
    fn lease_validity_counts_from_the_local_observation() {
        let now = Instant::now();
        let observed = Observed {
            spec: LeaseSpec {
                holder_identity: Some("other".into()),
                lease_duration_seconds: Some(2),
                // A renew time far in the past must not matter: only the local clock counts.
                renew_time: Some(MicroTime(Timestamp::UNIX_EPOCH)),
                ..LeaseSpec::default()
            },
            resource_version: Some("1".into()),
            changed_at: now,
        };
        assert!(observed.is_valid(now + Duration::from_millis(1999)));
        assert!(!observed.is_valid(now + Duration::from_secs(2)));
        let no_duration = Observed { spec: LeaseSpec::default(), resource_version: None, changed_at: now };
        assert!(!no_duration.is_valid(now));
    }

    #[test]
    fn one_lease_per_version_with_a_valid_name() {
        assert_eq!(lease_name("aws-operator", "16.2.0"), "aws-operator-16.2.0");
        assert_eq!(lease_name("aws-operator", "16.2.0-Beta.1+build.7"), "aws-operator-16.2.0-beta.1-build.7");
        assert_ne!(lease_name("kvm-operator", "4.0.0"), lease_name("kvm-operator", "4.1.0"));
    }
}

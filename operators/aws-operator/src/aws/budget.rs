//! The AWS request budget's edge: one [`RequestBudget`] per process, whose buckets (per
//! account, region and [`Kind`]) every request waits for at the HTTP client, retries included;
//! and the membership that tells it how many replicas share each budget.
//!
//! * **At the edge.** [`RequestBudget::http_client`] wraps the SDK's HTTP client of one account
//!   and region. Each attempt the SDK sends (the first and every retry of its adaptive retry)
//!   passes through it and first takes a token of its kind ([`crate::budget::classify`]). A
//!   request that cannot have a token waits; the call's operation timeout bounds the wait.
//! * **Members.** Each replica that may send to AWS (it holds its shard, leads, or runs alone)
//!   holds a member Lease of its own in the operator's namespace, labelled
//!   `aws-operator.giantswarm.io/request-budget=<scope>`, through operatorkit's
//!   [`LeaderElector`] (the same mechanism as shard membership, one candidate per Lease).
//!   The scope is the same for every version of the operator, so replicas of versions side by
//!   side share one budget. Every replica lists the member Leases each retry period; its share is
//!   the budget divided by the live ones ([`crate::budget::Members`]). A replica that dies stops
//!   renewing its Lease; within one lease duration the others count it out and their shares
//!   grow back to the whole budget. A replica that stops sending (lost its shard or the lead)
//!   releases its Lease at once.
//! * **Drift detection** takes [`Kind::Detection`] tokens of the same budget before it starts
//!   a detection, and its calls take read tokens like every other.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpClient, SharedHttpConnector,
};
use aws_smithy_runtime_api::client::orchestrator::HttpRequest;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, DeleteParams, ListParams, Preconditions};
use operatorkit::leader::{LeaderElectionConfig, LeaderElector, Leadership};
use parking_lot::Mutex;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use tokio_util::sync::CancellationToken;

use crate::budget::{Kind, Limit, MemberLease, Members, TokenBucket, classify};
use crate::config::BudgetSettings;

/// The label of the member Leases; its value is the budget's scope.
pub const MEMBER_LABEL: &str = "aws-operator.giantswarm.io/request-budget";

/// The scope every version of the operator shares.
pub const DEFAULT_SCOPE: &str = "aws-operator";

/// Member Leases not renewed for this long are deleted by whichever replica sees them (pods
/// that went away without releasing theirs), unless configured otherwise.
pub const STALE_AFTER: Duration = Duration::from_secs(3600);

/// The labels of the budget's counters.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BudgetLabels {
    /// The AWS account id.
    pub account: String,
    /// The region.
    pub region: String,
    /// `read`, `write` or `detection`.
    pub kind: String,
}

/// The budget's metrics.
#[derive(Clone, Debug, Default)]
pub struct BudgetMetrics {
    /// `aws_operator_request_budget_tokens_total`: tokens taken.
    pub tokens: Family<BudgetLabels, Counter>,
    /// `aws_operator_request_budget_wait_seconds_total`: time requests waited for a token.
    pub wait_seconds: Family<BudgetLabels, Counter<f64, std::sync::atomic::AtomicU64>>,
    /// `aws_operator_request_budget_replicas`: the replicas sharing the budget, as last seen.
    pub replicas: Gauge,
}

/// An account, a region and a kind.
type BucketKey = (String, String, Kind);

struct Inner {
    read: Option<Limit>,
    write: Option<Limit>,
    detection: Limit,
    members: AtomicUsize,
    /// Per account, region and kind: the bucket and the number of members it is sized for.
    buckets: Mutex<HashMap<BucketKey, (TokenBucket, usize)>>,
    metrics: BudgetMetrics,
}

/// The request budget of this process: a handle, clones share it.
#[derive(Clone)]
pub struct RequestBudget {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for RequestBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestBudget")
            .field("read", &self.inner.read)
            .field("write", &self.inner.write)
            .field("detection", &self.inner.detection)
            .field("members", &self.members())
            .finish()
    }
}

impl RequestBudget {
    /// The budget of `settings`, shared by one member (this replica) until
    /// [`Self::run_membership`] counts the others.
    pub fn new(settings: &BudgetSettings) -> Self {
        let limit = |per_second: f64| (per_second > 0.0).then(|| Limit::new(per_second, settings.burst));
        Self {
            inner: Arc::new(Inner {
                read: limit(settings.read_per_second),
                write: limit(settings.write_per_second),
                detection: Limit::per_minute(settings.detections_per_minute),
                members: AtomicUsize::new(1),
                buckets: Mutex::default(),
                metrics: BudgetMetrics::default(),
            }),
        }
    }

    /// Register the metrics in `registry`.
    pub fn register_metrics(&self, registry: &mut Registry) {
        let m = &self.inner.metrics;
        operatorkit::metrics::register(
            registry,
            "aws_operator_request_budget_tokens",
            "AWS request budget tokens taken by this replica, by account, region and kind (read, write, detection)",
            m.tokens.clone(),
        );
        operatorkit::metrics::register(
            registry,
            "aws_operator_request_budget_wait_seconds",
            "Time this replica's AWS requests waited for a budget token, by account, region and kind",
            m.wait_seconds.clone(),
        );
        operatorkit::metrics::register(
            registry,
            "aws_operator_request_budget_replicas",
            "Replicas sharing each AWS account's request budget, as this replica last counted them",
            m.replicas.clone(),
        );
        m.replicas.set(self.members() as i64);
    }

    /// The metrics.
    pub fn metrics(&self) -> &BudgetMetrics {
        &self.inner.metrics
    }

    /// How many replicas share the budget, as last counted.
    pub fn members(&self) -> usize {
        self.inner.members.load(Ordering::Relaxed)
    }

    /// Share the budget among `members` replicas from now on.
    pub fn set_members(&self, members: usize) {
        let members = members.max(1);
        if self.inner.members.swap(members, Ordering::Relaxed) != members {
            tracing::info!(replicas = members, "AWS request budget shared by {members} replica(s)");
        }
        self.inner.metrics.replicas.set(members as i64);
    }

    /// The whole operator's limit of `kind`; `None`: unlimited.
    pub fn limit(&self, kind: Kind) -> Option<Limit> {
        match kind {
            Kind::Read => self.inner.read,
            Kind::Write => self.inner.write,
            Kind::Detection => Some(self.inner.detection),
        }
    }

    /// Take a token of `kind` in `account` and `region` at `now` (counted), or say how long
    /// until this replica's share has one.
    pub fn try_take(&self, account: &str, region: &str, kind: Kind, now: Instant) -> Result<(), Duration> {
        let Some(limit) = self.limit(kind) else { return Ok(()) };
        let members = self.members();
        let mut buckets = self.inner.buckets.lock();
        let (bucket, sized_for) = buckets
            .entry((account.to_string(), region.to_string(), kind))
            .or_insert_with(|| (TokenBucket::new(limit.share(members), now), members));
        if *sized_for != members {
            bucket.set_limit(limit.share(members), now);
            *sized_for = members;
        }
        bucket.take(now)?;
        drop(buckets);
        self.inner.metrics.tokens.get_or_create(&labels(account, region, kind)).inc();
        Ok(())
    }

    /// Wait for a token of `kind` in `account` and `region`, counting the wait.
    pub async fn take(&self, account: &str, region: &str, kind: Kind) {
        let start = Instant::now();
        loop {
            match self.try_take(account, region, kind, Instant::now()) {
                Ok(()) => break,
                // Look again at least every second: the share may have grown meanwhile.
                Err(wait) => tokio::time::sleep(wait.min(Duration::from_secs(1))).await,
            }
        }
        let waited = start.elapsed().as_secs_f64();
        if waited > 0.0 {
            self.inner.metrics.wait_seconds.get_or_create(&labels(account, region, kind)).inc_by(waited);
        }
    }

    /// Tokens of `kind` taken in `account` and `region`.
    pub fn tokens(&self, account: &str, region: &str, kind: Kind) -> u64 {
        self.inner.metrics.tokens.get_or_create(&labels(account, region, kind)).get()
    }

    /// `inner` with every request it sends to `account` in `region` waiting for its token first.
    pub fn http_client(&self, inner: SharedHttpClient, account: &str, region: &str) -> SharedHttpClient {
        SharedHttpClient::new(BudgetedClient {
            inner,
            budget: self.clone(),
            account: account.into(),
            region: region.into(),
        })
    }

    /// Hold this replica's member Lease while `writes` holds (the replica may send to AWS), and
    /// count the live members every retry period, until `shutdown`. The Lease is released when
    /// `writes` is lost and on shutdown.
    pub async fn run_membership(
        self,
        client: kube::Client,
        config: MembershipConfig,
        writes: Leadership,
        shutdown: CancellationToken,
    ) {
        let join = hold_member_lease(client.clone(), config.clone(), writes, shutdown.clone());
        let count = self.count_members(client, config, shutdown);
        tokio::join!(join, count);
    }

    async fn count_members(&self, client: kube::Client, config: MembershipConfig, shutdown: CancellationToken) {
        let api: Api<Lease> = Api::namespaced(client, &config.namespace);
        let selector = ListParams::default().labels(&format!("{MEMBER_LABEL}={}", config.scope));
        let mut members = Members::default();
        loop {
            match api.list(&selector).await {
                Ok(list) => {
                    let now = Instant::now();
                    let leases: Vec<MemberLease> = list.items.iter().filter_map(member_lease).collect();
                    members.observe(&leases, now);
                    self.set_members(members.count(&config.lease_name, now, config.lease_duration));
                    for (name, version) in members.stale(now, config.stale_after) {
                        let params = DeleteParams {
                            preconditions: Some(Preconditions { resource_version: Some(version), uid: None }),
                            ..DeleteParams::default()
                        };
                        if name != config.lease_name && api.delete(&name, &params).await.is_ok() {
                            tracing::info!(lease = %name, "deleted a request budget member Lease unrenewed for long");
                        }
                    }
                }
                Err(e) => tracing::warn!(error = %e, "listing the AWS request budget's member Leases"),
            }
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(config.retry_period) => {}
            }
        }
    }
}

fn labels(account: &str, region: &str, kind: Kind) -> BudgetLabels {
    BudgetLabels { account: account.to_string(), region: region.to_string(), kind: kind.as_str().to_string() }
}

fn member_lease(lease: &Lease) -> Option<MemberLease> {
    let holder = lease.spec.as_ref().and_then(|s| s.holder_identity.as_deref()).unwrap_or_default();
    Some(MemberLease {
        name: lease.metadata.name.clone()?,
        held: !holder.is_empty(),
        marker: lease.metadata.resource_version.clone()?,
    })
}

async fn hold_member_lease(
    client: kube::Client,
    config: MembershipConfig,
    mut writes: Leadership,
    shutdown: CancellationToken,
) {
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = writes.acquired() => {}
        }
        let election = LeaderElectionConfig {
            identity: config.identity.clone(),
            lease_duration: config.lease_duration,
            renew_deadline: config.renew_deadline,
            retry_period: config.retry_period,
            release_on_cancel: true,
            ..LeaderElectionConfig::new(config.namespace.clone(), config.lease_name.clone())
        };
        let elector = match LeaderElector::new(client.clone(), election) {
            Ok(e) => e.with_lease_labels(BTreeMap::from([(MEMBER_LABEL.to_string(), config.scope.clone())])),
            Err(e) => return tracing::error!(error = %e, "the AWS request budget's member Lease"),
        };
        let stop = shutdown.child_token();
        let holding = tokio::spawn(elector.run(stop.clone()));
        tokio::select! {
            () = shutdown.cancelled() => {}
            () = writes.lost() => {}
        }
        stop.cancel();
        let _ = holding.await;
    }
}

/// Where this replica's member Lease lives and how it is renewed.
#[derive(Clone, Debug)]
pub struct MembershipConfig {
    /// The operator's namespace.
    pub namespace: String,
    /// This replica's member Lease ([`crate::budget::member_lease_name`] of its pod).
    pub lease_name: String,
    /// Written as the Lease's holder.
    pub identity: String,
    /// The value of [`MEMBER_LABEL`]: replicas with one scope share one budget.
    pub scope: String,
    /// A member whose Lease did not change for this long is dead.
    pub lease_duration: Duration,
    /// How long a renewal may take before the replica counts itself out.
    pub renew_deadline: Duration,
    /// How often the Lease is renewed and the members counted.
    pub retry_period: Duration,
    /// Member Leases not renewed for this long are deleted ([`STALE_AFTER`]).
    pub stale_after: Duration,
}

impl MembershipConfig {
    /// The member Lease `aws-operator-budget-<pod>` of the replica `identity`
    /// ([`operatorkit::leader::default_identity`]: the pod name, `_`, a random suffix) in
    /// `namespace`, with client-go's lease timing.
    pub fn new(namespace: impl Into<String>, identity: impl Into<String>) -> Self {
        let identity = identity.into();
        let pod = identity.rsplit_once('_').map_or(identity.as_str(), |(pod, _)| pod);
        Self {
            namespace: namespace.into(),
            lease_name: crate::budget::member_lease_name("aws-operator-budget", pod),
            identity: identity.clone(),
            scope: DEFAULT_SCOPE.to_string(),
            lease_duration: operatorkit::leader::DEFAULT_LEASE_DURATION,
            renew_deadline: operatorkit::leader::DEFAULT_RENEW_DEADLINE,
            retry_period: operatorkit::leader::DEFAULT_RETRY_PERIOD,
            stale_after: STALE_AFTER,
        }
    }
}

impl MembershipConfig {
    /// A member is dead once its Lease did not change for `lease_duration`; renewals keep
    /// client-go's proportions (15 s lease, 10 s renew deadline, 2 s retry period).
    pub fn lease_duration(mut self, lease_duration: Duration) -> Self {
        let lease_duration = lease_duration.max(Duration::from_secs(3));
        self.lease_duration = lease_duration;
        self.renew_deadline = lease_duration * 2 / 3;
        self.retry_period = lease_duration.div_f64(7.5);
        self
    }
}

/// The SDK HTTP client of one account and region, behind the budget.
#[derive(Clone, Debug)]
struct BudgetedClient {
    inner: SharedHttpClient,
    budget: RequestBudget,
    account: Arc<str>,
    region: Arc<str>,
}

impl HttpClient for BudgetedClient {
    fn http_connector(&self, settings: &HttpConnectorSettings, components: &RuntimeComponents) -> SharedHttpConnector {
        SharedHttpConnector::new(BudgetedConnector {
            inner: self.inner.http_connector(settings, components),
            budget: self.budget.clone(),
            account: self.account.clone(),
            region: self.region.clone(),
        })
    }

    fn connector_metadata(&self) -> Option<aws_smithy_runtime_api::client::connector_metadata::ConnectorMetadata> {
        self.inner.connector_metadata()
    }
}

#[derive(Debug)]
struct BudgetedConnector {
    inner: SharedHttpConnector,
    budget: RequestBudget,
    account: Arc<str>,
    region: Arc<str>,
}

impl HttpConnector for BudgetedConnector {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        let kind = classify(request.method(), request.headers().get("x-amz-target"), request.body().bytes());
        let (inner, budget, account, region) =
            (self.inner.clone(), self.budget.clone(), self.account.clone(), self.region.clone());
        HttpConnectorFuture::new(async move {
            budget.take(&account, &region, kind).await;
            inner.call(request).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(read: f64, write: f64) -> BudgetSettings {
        BudgetSettings {
            read_per_second: read,
            write_per_second: write,
            burst: Duration::from_secs(1),
            ..BudgetSettings::default()
        }
    }

    #[test]
    fn reads_and_writes_have_buckets_of_their_own_per_account_and_region() {
        let budget = RequestBudget::new(&settings(2.0, 1.0));
        let now = Instant::now();
        assert!(budget.try_take("111", "eu-west-1", Kind::Read, now).is_ok());
        assert!(budget.try_take("111", "eu-west-1", Kind::Read, now).is_ok());
        assert!(budget.try_take("111", "eu-west-1", Kind::Read, now).is_err());
        // Reads exhausted; a write still has its token, and so does another account or region.
        assert!(budget.try_take("111", "eu-west-1", Kind::Write, now).is_ok());
        assert!(budget.try_take("111", "eu-west-1", Kind::Write, now).is_err());
        assert!(budget.try_take("222", "eu-west-1", Kind::Read, now).is_ok());
        assert!(budget.try_take("111", "us-east-1", Kind::Read, now).is_ok());
    }

    #[test]
    fn the_share_follows_the_members() {
        let budget = RequestBudget::new(&settings(10.0, 0.0));
        let t0 = Instant::now();
        budget.set_members(2);
        let taken = (0..20).filter(|_| budget.try_take("111", "r", Kind::Read, t0).is_ok()).count();
        assert_eq!(taken, 5, "half of a burst of 10");
        // The other replica is gone a second later: what was earned until then at half the
        // rate is kept, from then on the bucket fills at the whole rate, up to the whole burst.
        budget.set_members(1);
        let t1 = t0 + Duration::from_secs(1);
        let taken = (0..20).filter(|_| budget.try_take("111", "r", Kind::Read, t1).is_ok()).count();
        assert_eq!(taken, 5, "a second at half the rate");
        let t2 = t1 + Duration::from_secs(2);
        let taken = (0..20).filter(|_| budget.try_take("111", "r", Kind::Read, t2).is_ok()).count();
        assert_eq!(taken, 10, "the whole burst once alone");
        // 0 is unlimited.
        assert!((0..1000).all(|_| budget.try_take("111", "r", Kind::Write, t1).is_ok()));
    }

    #[test]
    fn member_leases_are_named_after_the_pod() {
        let config = MembershipConfig::new("giantswarm", "aws-operator-5f7c9-x2x4z_00ff00ff00ff00ff");
        assert_eq!(config.lease_name, "aws-operator-budget-aws-operator-5f7c9-x2x4z");
        assert_eq!(config.identity, "aws-operator-5f7c9-x2x4z_00ff00ff00ff00ff");
        let config = config.lease_duration(Duration::from_secs(15));
        assert_eq!((config.renew_deadline, config.retry_period), (Duration::from_secs(10), Duration::from_secs(2)));
    }
}

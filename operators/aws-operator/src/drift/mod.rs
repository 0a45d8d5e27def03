//! Drift detection's state and calls: the detections' share of the AWS request budget, the metrics,
//! the detections running per cluster and the last result per cluster, all behind the handle
//! [`DriftState`] that the drift detector ([`crate::controllers::drift`]) is built with; and the
//! remediation calls ([`remediate`]) that carry out what [`findings::remedy`] decides.
//!
//! What a detection found and how it is recorded is pure and lives in [`findings`].

pub mod findings;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use apis::aws::{DriftStatus, StackDrift};
use parking_lot::Mutex;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::aws::AccountClients;
use crate::aws::budget::RequestBudget;
use crate::aws::drift as calls;
use crate::budget::Kind;
use crate::config::{BudgetSettings, DriftSettings};
use findings::{Fix, ResourceReport, StackRef};

// --- metrics -------------------------------------------------------------------------------------

/// The `stack_kind` label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    /// `tccp`, `tcnp`, ….
    pub stack_kind: String,
}

/// The labels of the detections counter.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DetectionLabels {
    /// `tccp`, `tcnp`, ….
    pub stack_kind: String,
    /// `in_sync`, `drifted`, `failed` or `skipped` (mid-operation, or refused).
    pub result: String,
}

/// The drift detector's metrics.
#[derive(Clone, Debug, Default)]
pub struct DriftMetrics {
    /// `aws_operator_drifted_resources`.
    pub drifted: Family<KindLabels, Gauge>,
    /// `aws_operator_drift_detections_total`.
    pub detections: Family<DetectionLabels, Counter>,
}

impl DriftMetrics {
    /// Detections of stacks of `kind` that ended with `result`.
    pub fn detections(&self, kind: &str, result: &str) -> u64 {
        self.detections.get_or_create(&DetectionLabels { stack_kind: kind.into(), result: result.into() }).get()
    }

    /// Count a detection of a stack of `kind` that ended with `result`.
    pub fn detected(&self, kind: &str, result: &str) {
        self.detections.get_or_create(&DetectionLabels { stack_kind: kind.into(), result: result.into() }).inc();
    }

    /// Drifted resources in stacks of `kind`, over every cluster.
    pub fn drifted(&self, kind: &str) -> i64 {
        self.drifted.get_or_create(&KindLabels { stack_kind: kind.into() }).get()
    }
}

// --- one round of detection ----------------------------------------------------------------------

/// One round of detection over a cluster's stacks.
#[derive(Debug)]
pub struct Run {
    /// Stacks not done yet, with their detection once started.
    pub pending: Vec<(StackRef, Option<String>)>,
    /// Stacks done: their record when drifted.
    pub done: Vec<(StackRef, Option<StackDrift>)>,
    /// Stacks not checked this round (busy, refused, failed).
    pub skipped: Vec<StackRef>,
    /// Started right after a remediation: its end removes the annotation.
    pub after_remediation: bool,
}

impl Run {
    /// A round over `stacks`, none started yet.
    pub fn new(stacks: Vec<StackRef>, after_remediation: bool) -> Self {
        Self {
            pending: stacks.into_iter().map(|s| (s, None)).collect(),
            done: Vec::new(),
            skipped: Vec::new(),
            after_remediation,
        }
    }
}

// --- the handle ----------------------------------------------------------------------------------

/// What drift detection keeps between reconciles: the metrics, the rate budget, the detections
/// running per cluster, and the last result per cluster (the status write may reach the cache
/// after the next reconcile started). A handle: clones share the state. Clusters are keyed
/// `<namespace>/<name>`.
#[derive(Debug, Clone)]
pub struct DriftState {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    metrics: DriftMetrics,
    budget: RequestBudget,
    runs: Mutex<HashMap<String, Run>>,
    last: Mutex<HashMap<String, DriftStatus>>,
    counts: Mutex<HashMap<String, BTreeMap<String, u32>>>,
}

impl DriftState {
    /// Register the metrics; `settings.per_account_per_minute` detections per account and
    /// region, for this process alone.
    pub fn new(registry: &mut Registry, settings: &DriftSettings) -> Self {
        Self::sharing(registry, RequestBudget::new(&BudgetSettings::detections_only(settings.per_account_per_minute)))
    }

    /// Register the metrics; detections take [`Kind::Detection`] tokens of `budget`, the AWS
    /// request budget the replicas share (its rate is `--drift-detections-per-account-per-minute`).
    pub fn sharing(registry: &mut Registry, budget: RequestBudget) -> Self {
        let metrics = DriftMetrics::default();
        operatorkit::metrics::register(
            registry,
            "aws_operator_drifted_resources",
            "Resources of the clusters' CloudFormation stacks found changed or deleted outside CloudFormation at the last drift detection, by stack kind",
            metrics.drifted.clone(),
        );
        operatorkit::metrics::register(
            registry,
            "aws_operator_drift_detections",
            "Stack drift detections by stack kind and result (in_sync, drifted, failed, skipped)",
            metrics.detections.clone(),
        );
        let inner = Inner { metrics, budget, runs: Mutex::default(), last: Mutex::default(), counts: Mutex::default() };
        Self { inner: Arc::new(inner) }
    }

    /// The metrics.
    pub fn metrics(&self) -> &DriftMetrics {
        &self.inner.metrics
    }

    /// Take a detection from the budget of `account` in `region` at `now`, or say how long until
    /// this replica's share has one.
    pub fn take_budget(&self, account: &str, region: &str, now: Instant) -> Result<(), Duration> {
        self.inner.budget.try_take(account, region, Kind::Detection, now)
    }

    /// The round running for `cluster`, taken out while a reconcile advances it.
    pub fn take_run(&self, cluster: &str) -> Option<Run> {
        self.inner.runs.lock().remove(cluster)
    }

    /// Keep `run` for `cluster`'s next reconcile.
    pub fn keep_run(&self, cluster: &str, run: Run) {
        self.inner.runs.lock().insert(cluster.to_string(), run);
    }

    /// The last result this process recorded for `cluster`.
    pub fn last(&self, cluster: &str) -> Option<DriftStatus> {
        self.inner.last.lock().get(cluster).cloned()
    }

    /// Remember `drift` as `cluster`'s last result.
    pub fn remember(&self, cluster: &str, drift: DriftStatus) {
        self.inner.last.lock().insert(cluster.to_string(), drift);
    }

    /// Forget `cluster` (deleted): its round, its last result, its drifted resources.
    pub fn forget(&self, cluster: &str) {
        self.inner.runs.lock().remove(cluster);
        self.inner.last.lock().remove(cluster);
        self.count(cluster, None);
    }

    /// Set the drifted-resources gauge from `cluster`'s latest counts per kind.
    pub fn count(&self, cluster: &str, per_kind: Option<BTreeMap<String, u32>>) {
        let mut counts = self.inner.counts.lock();
        let mut kinds: Vec<String> = counts.values().flat_map(|c| c.keys().cloned()).collect();
        match per_kind {
            Some(c) => {
                kinds.extend(c.keys().cloned());
                counts.insert(cluster.to_string(), c);
            }
            None => {
                counts.remove(cluster);
            }
        }
        for kind in kinds {
            let total: u32 = counts.values().filter_map(|c| c.get(&kind)).sum();
            self.inner.metrics.drifted.get_or_create(&KindLabels { stack_kind: kind }).set(i64::from(total));
        }
    }
}

// --- remediation ---------------------------------------------------------------------------------

/// What one remediation did.
#[derive(Debug, Default)]
pub struct Remediation {
    /// `<stack> <logical id>` of each resource put back.
    pub fixed: Vec<String>,
    /// What was not put back, and why.
    pub left: Vec<String>,
}

/// Put back the drifted resources of stack `stack` that can be put back through their service
/// ([`findings::remedy`]).
pub async fn remediate(aws: &AccountClients, stack: &str, reports: &[ResourceReport], out: &mut Remediation) {
    for r in reports {
        let what = format!("{stack} {}", r.logical_id);
        match apply(aws, findings::remedy(r)).await {
            Ok(true) => out.fixed.push(what),
            Ok(false) => {
                out.left.push(format!("{what} ({} {}): not remediated by the operator", r.resource_type, r.status))
            }
            Err(e) => out.left.push(format!("{what}: {e}")),
        }
    }
}

/// Make `remedy`'s calls in order, up to the first that fails.
async fn apply(aws: &AccountClients, remedy: findings::Remedy) -> Result<bool, String> {
    for fix in remedy.fixes {
        match fix {
            Fix::Rule { group, rule, egress, authorize, path } => {
                let permission = calls::ip_permission(&rule).ok_or_else(|| {
                    if path.is_empty() {
                        "the template's rule is not a rule".to_string()
                    } else {
                        format!("{path}: not a rule")
                    }
                })?;
                calls::set_rule(aws, &group, permission, egress, authorize).await.map_err(|e| e.to_string())?;
            }
            Fix::Route { expected, replace } => calls::put_route(aws, &expected, replace).await?,
            Fix::GroupSizes { group, min, max, desired } => {
                calls::set_group_sizes(aws, &group, min, max, desired).await.map_err(|e| e.to_string())?;
            }
        }
    }
    remedy.then
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detections_take_from_their_own_budget_per_account() {
        let mut registry = Registry::default();
        let state =
            DriftState::new(&mut registry, &DriftSettings { per_account_per_minute: 2, ..DriftSettings::default() });
        let start = Instant::now();
        assert!(state.take_budget("111", "eu-central-1", start).is_ok());
        assert!(state.take_budget("111", "eu-central-1", start).is_ok());
        let wait = state.take_budget("111", "eu-central-1", start).expect_err("two a minute");
        assert!((29..=30).contains(&wait.as_secs()), "{wait:?}");
        // Another account has its own bucket.
        assert!(state.take_budget("222", "eu-central-1", start).is_ok());
    }

    #[test]
    fn the_gauge_sums_clusters_per_kind_and_forgets_deleted_ones() {
        let mut registry = Registry::default();
        let state = DriftState::new(&mut registry, &DriftSettings::default());
        state.count("a/x", Some(BTreeMap::from([("tccp".into(), 2), ("tcnp".into(), 1)])));
        state.count("a/y", Some(BTreeMap::from([("tccp".into(), 3)])));
        assert_eq!((state.metrics().drifted("tccp"), state.metrics().drifted("tcnp")), (5, 1));
        state.count("a/x", Some(BTreeMap::from([("tccp".into(), 0)])));
        assert_eq!((state.metrics().drifted("tccp"), state.metrics().drifted("tcnp")), (3, 0));
        state.count("a/y", None);
        assert_eq!(state.metrics().drifted("tccp"), 0);
    }
}

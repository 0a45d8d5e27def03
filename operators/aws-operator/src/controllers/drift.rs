//! The drift detector (`aws-operator-drift-detector`), watching AWSClusters: it tells a platform
//! team when someone changed a cluster's CloudFormation stacks by hand (a security-group rule
//! opened in the console, a route deleted, a node pool's group resized), and on request puts
//! those resources back.
//!
//! Every `--drift-detection-interval-seconds` (hourly by default; 0 turns the detector off) it
//! runs CloudFormation's drift detection on each stack of the cluster: TCCPI, TCCP and TCCPF from
//! the AWSCluster's status, TCCPN from its control plane's, TCNP and TCNPF from each node pool's.
//! A stack in the middle of an operation (`*_IN_PROGRESS`) is skipped: its resources are
//! changing on purpose. Detection runs asynchronously at AWS: the detector starts it
//! (`DetectStackDrift`) and requeues itself to ask again, never waiting inside a reconcile. The
//! starts draw on a token bucket per AWS account and region, shared by every cluster of the
//! account (`--drift-detections-per-account-per-minute`), so that a management cluster with a
//! hundred clusters in one account does not use up the account's CloudFormation API rate.
//!
//! What it finds goes into `status.drift` (the drifted stacks, their drifted resources with
//! logical and physical ids, and the property differences: path, expected, actual, type),
//! bounded in size, with values that could hold secrets redacted ([`record`]); into the
//! condition `Drifted` (`True`, reason `StacksDrifted`, the message naming the count; `False`,
//! reason `InSync`); into a Warning event `StackDrifted` when what drifted changes (a Normal
//! `DriftResolved` when it is gone); and into the metrics `aws_operator_drifted_resources`
//! (per stack kind) and `aws_operator_drift_detections_total` (per stack kind and result).
//!
//! Remediation is asked for with the annotation [`REMEDIATE_ANNOTATION`]` = "true"` on the
//! AWSCluster. It cannot be an `UpdateStack`: CloudFormation compares a new template with the
//! deployed *template*, so re-applying the same one is "No updates are to be performed" and
//! leaves the drift. The expected values are written back through each service's API instead
//! ([`crate::aws::drift`]): a rule added by hand to a security group is revoked, one removed is
//! authorised again (inline or standalone `AWS::EC2::SecurityGroupIngress`), a deleted or
//! redirected route is created or replaced, an Auto Scaling group's MinSize, MaxSize and
//! DesiredCapacity are set back. Anything else (a deleted group, a changed launch template) is
//! reported in a Warning event `DriftNotRemediated` and left alone: recreating such resources
//! is a stack operation, not a patch. After remediating the detector detects again and removes
//! the annotation; what is still drifted then is reported.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use apis::aws::{
    AWSCluster, DriftStatus, PropertyDrift, ResourceDrift, StackAccount, StackDrift, StackStatus as StackEntry,
};
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::api::{Patch, PatchParams};
use kube::runtime::events::EventType;
use kube::{Api, ResourceExt};
use operatorkit::{Outcome, Resource, ResourceSet, resource};
use parking_lot::Mutex;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use semver::VersionReq;
use serde_json::Value;

use crate::aws::AccountClients;
use crate::aws::drift::{self, Detection, ResourceReport, Started};
use crate::context::Shared;
use crate::controllers::status::set_condition;
use crate::controllers::{self, lookup};

/// The controller's name.
pub const CONTROLLER: &str = "aws-operator-drift-detector";
/// AWSCluster annotation: `"true"` asks the detector to put drifted resources back.
pub const REMEDIATE_ANNOTATION: &str = "aws-operator.giantswarm.io/remediate-drift";
/// The condition type.
pub const DRIFTED: &str = "Drifted";
/// Drifted resources listed per stack in the status; the rest are counted.
pub const MAX_RESOURCES: usize = 10;
/// Property differences listed per resource in the status; the rest are counted.
pub const MAX_DIFFERENCES: usize = 10;
/// Characters kept of a property value in the status.
pub const MAX_VALUE_CHARS: usize = 256;
/// What a redacted value reads.
pub const REDACTED: &str = "(redacted)";

/// The resource set `name` for the Releases `requirement` matches.
pub fn resource_set(shared: Arc<Shared>, name: String, requirement: VersionReq) -> ResourceSet<AWSCluster> {
    controllers::resource_set(shared, name, requirement, |shared, _| shared).resource(DetectDrift).build()
}

// --- the rate budget -----------------------------------------------------------------------------

/// A token bucket: `per_minute` tokens a minute, at most `per_minute` saved up.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    capacity: f64,
    per_second: f64,
    tokens: f64,
    at: Instant,
}

impl TokenBucket {
    /// A full bucket at `now`.
    pub fn new(per_minute: u32, now: Instant) -> Self {
        let capacity = f64::from(per_minute.max(1));
        Self { capacity, per_second: capacity / 60.0, tokens: capacity, at: now }
    }

    /// Take a token at `now`, or say how long until one is there.
    pub fn take(&mut self, now: Instant) -> Result<(), Duration> {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.per_second).min(self.capacity);
        self.at = now.max(self.at);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - self.tokens) / self.per_second))
        }
    }
}

/// One [`TokenBucket`] per AWS account and region, shared by the clusters of the account.
#[derive(Debug)]
pub struct RateBudget {
    per_minute: u32,
    buckets: Mutex<HashMap<String, TokenBucket>>,
}

impl RateBudget {
    /// `per_minute` detections per account and region.
    pub fn new(per_minute: u32) -> Self {
        Self { per_minute, buckets: Mutex::default() }
    }

    /// Take a token of `account` (an [`AccountClients::cache_key`]) at `now`.
    pub fn take(&self, account: &str, now: Instant) -> Result<(), Duration> {
        let mut buckets = self.buckets.lock();
        buckets.entry(account.to_string()).or_insert_with(|| TokenBucket::new(self.per_minute, now)).take(now)
    }
}

// --- metrics and shared state ----------------------------------------------------------------------

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

    /// Drifted resources in stacks of `kind`, over every cluster.
    pub fn drifted(&self, kind: &str) -> i64 {
        self.drifted.get_or_create(&KindLabels { stack_kind: kind.into() }).get()
    }
}

/// What the detector keeps between reconciles: the metrics, the rate budget, the detections
/// running per cluster, and the last result per cluster (the status write may reach the cache
/// after the next reconcile started).
#[derive(Debug)]
pub struct DriftState {
    /// Metrics.
    pub metrics: DriftMetrics,
    /// The per-account budget of `DetectStackDrift` calls.
    pub budget: RateBudget,
    runs: Mutex<HashMap<String, Run>>,
    last: Mutex<HashMap<String, DriftStatus>>,
    counts: Mutex<HashMap<String, BTreeMap<String, u32>>>,
}

impl DriftState {
    /// Register the metrics; `per_minute` detections per account and region.
    pub fn new(registry: &mut Registry, per_minute: u32) -> Self {
        let metrics = DriftMetrics::default();
        registry.register(
            "aws_operator_drifted_resources",
            "Resources of the clusters' CloudFormation stacks found changed or deleted outside CloudFormation at the last drift detection, by stack kind",
            metrics.drifted.clone(),
        );
        registry.register(
            "aws_operator_drift_detections",
            "Stack drift detections by stack kind and result (in_sync, drifted, failed, skipped)",
            metrics.detections.clone(),
        );
        Self {
            metrics,
            budget: RateBudget::new(per_minute),
            runs: Mutex::default(),
            last: Mutex::default(),
            counts: Mutex::default(),
        }
    }

    /// Set the drifted-resources gauge from `cluster`'s latest counts per kind.
    fn count(&self, cluster: &str, per_kind: Option<BTreeMap<String, u32>>) {
        let mut counts = self.counts.lock();
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
            self.metrics.drifted.get_or_create(&KindLabels { stack_kind: kind }).set(i64::from(total));
        }
    }
}

// --- the pure middle ---------------------------------------------------------------------------------

/// A stack of a cluster, as its owner's status records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StackRef {
    /// The stack name.
    pub name: String,
    /// `tccp`, `tcnp`, ….
    pub kind: String,
    /// The account it lives in.
    pub account: StackAccount,
    /// In the middle of an operation: not checked this time.
    pub busy: bool,
}

/// The stacks of a cluster from the stack entries of its AWSCluster, control plane and node
/// pools: each once, without the deleted ones.
pub fn stacks_of<'a>(entries: impl IntoIterator<Item = &'a StackEntry>) -> Vec<StackRef> {
    let mut out: Vec<StackRef> = Vec::new();
    for e in entries {
        if e.status.starts_with("DELETE_") || out.iter().any(|s| s.name == e.name) {
            continue;
        }
        out.push(StackRef {
            name: e.name.clone(),
            kind: e.kind.clone(),
            account: e.account,
            busy: e.status.ends_with("_IN_PROGRESS"),
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// Whether a property name names something that may hold a secret: user data (the node
/// configs, with their keys before Ignition fetches the rest), and anything called a password,
/// a secret, a token or a private key.
pub fn sensitive(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    ["userdata", "ignition", "password", "secret", "token", "privatekey", "private_key"].iter().any(|s| key.contains(s))
}

/// A property value as recorded: JSON with the values of [`sensitive`] keys redacted, at most
/// [`MAX_VALUE_CHARS`] characters.
pub fn recorded_value(text: &str) -> String {
    fn scrub(value: &mut Value) {
        match value {
            Value::Object(map) => {
                for (key, v) in map.iter_mut() {
                    if sensitive(key) {
                        *v = Value::String(REDACTED.into());
                    } else {
                        scrub(v);
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(scrub),
            _ => {}
        }
    }
    let text = match serde_json::from_str::<Value>(text) {
        Ok(mut v @ (Value::Object(_) | Value::Array(_))) => {
            scrub(&mut v);
            v.to_string()
        }
        _ => text.to_string(),
    };
    if text.chars().count() <= MAX_VALUE_CHARS {
        return text;
    }
    let mut short: String = text.chars().take(MAX_VALUE_CHARS - 1).collect();
    short.push('…');
    short
}

/// One stack's drift as the status records it: at most [`MAX_RESOURCES`] resources with at most
/// [`MAX_DIFFERENCES`] differences each; no properties (they may hold secrets, and the
/// differences say what matters); differences of [`sensitive`] properties redacted.
pub fn record(stack: &StackRef, detection_id: &str, drifted: u32, reports: &[ResourceReport]) -> StackDrift {
    let mut reports: Vec<&ResourceReport> = reports.iter().collect();
    reports.sort_by(|a, b| a.logical_id.cmp(&b.logical_id));
    let resources = reports
        .iter()
        .take(MAX_RESOURCES)
        .map(|r| {
            let differences = r
                .differences
                .iter()
                .take(MAX_DIFFERENCES)
                .map(|d| {
                    let secret = d.path.split('/').any(sensitive);
                    let value = |v: &str| if secret { REDACTED.to_string() } else { recorded_value(v) };
                    PropertyDrift {
                        path: d.path.clone(),
                        expected: value(&d.expected),
                        actual: value(&d.actual),
                        difference_type: d.kind.clone(),
                    }
                })
                .collect();
            ResourceDrift {
                logical_id: r.logical_id.clone(),
                resource_type: r.resource_type.clone(),
                physical_id: r.physical_id.clone().filter(|p| !p.is_empty()),
                status: r.status.clone(),
                differences,
                omitted_differences: u32::try_from(r.differences.len().saturating_sub(MAX_DIFFERENCES)).unwrap_or(0),
            }
        })
        .collect();
    StackDrift {
        name: stack.name.clone(),
        kind: stack.kind.clone(),
        detection_id: detection_id.to_string(),
        drifted_resources: drifted.max(u32::try_from(reports.len()).unwrap_or(u32::MAX)),
        resources,
        omitted_resources: u32::try_from(reports.len().saturating_sub(MAX_RESOURCES)).unwrap_or(0),
    }
}

/// The `Drifted` condition of a result: status, reason, message.
pub fn condition(drift: &DriftStatus) -> (bool, &'static str, String) {
    let resources: u32 = drift.stacks.iter().map(|s| s.drifted_resources).sum();
    if drift.stacks.is_empty() {
        return (false, "InSync", "every stack checked matches its template".into());
    }
    let stacks: Vec<String> = drift.stacks.iter().map(|s| format!("{} ({})", s.name, s.drifted_resources)).collect();
    let plural = if resources == 1 { "" } else { "s" };
    (
        true,
        "StacksDrifted",
        format!(
            "{resources} resource{plural} changed outside CloudFormation in {}; see status.drift, and annotate {REMEDIATE_ANNOTATION}=true to put them back",
            stacks.join(", ")
        ),
    )
}

/// What drifted, for telling two results apart: stack, resource, status and differences.
fn fingerprint(drift: &DriftStatus) -> Vec<(String, String, String, Vec<PropertyDrift>)> {
    drift
        .stacks
        .iter()
        .flat_map(|s| {
            s.resources.iter().map(|r| (s.name.clone(), r.logical_id.clone(), r.status.clone(), r.differences.clone()))
        })
        .collect()
}

/// A short list of what drifted, for events.
fn describe(drift: &DriftStatus) -> String {
    let mut parts = Vec::new();
    for s in &drift.stacks {
        for r in &s.resources {
            let what = r.differences.iter().map(|d| format!("{} {}", d.difference_type, d.path)).collect::<Vec<_>>();
            let id = r.physical_id.as_deref().map(|p| format!(" {p}")).unwrap_or_default();
            let detail = if what.is_empty() { String::new() } else { format!(": {}", what.join(", ")) };
            parts.push(format!("{} {} ({}{id}) {}{detail}", s.name, r.logical_id, r.resource_type, r.status));
        }
    }
    parts.join("; ")
}

// --- remediation -------------------------------------------------------------------------------------

/// What one remediation did.
#[derive(Debug, Default)]
struct Remediation {
    fixed: Vec<String>,
    left: Vec<String>,
}

/// Put back the drifted resources of one stack that can be put back through their service.
async fn remediate_stack(aws: &AccountClients, stack: &str, reports: &[ResourceReport], out: &mut Remediation) {
    for r in reports {
        let what = format!("{stack} {}", r.logical_id);
        let result = remediate_resource(aws, r).await;
        match result {
            Ok(true) => out.fixed.push(what),
            Ok(false) => {
                out.left.push(format!("{what} ({} {}): not remediated by the operator", r.resource_type, r.status))
            }
            Err(e) => out.left.push(format!("{what}: {e}")),
        }
    }
}

/// `Ok(false)`: a drift the operator does not put back.
async fn remediate_resource(aws: &AccountClients, r: &ResourceReport) -> Result<bool, String> {
    let expected = &r.expected;
    match (r.resource_type.as_str(), r.status.as_str()) {
        ("AWS::EC2::SecurityGroup", "MODIFIED") => {
            let group = r.physical_id.as_deref().ok_or("the group has no physical id")?;
            let mut all = true;
            for d in &r.differences {
                let egress = d.path.starts_with("/SecurityGroupEgress/");
                if !egress && !d.path.starts_with("/SecurityGroupIngress/") {
                    all = false;
                    continue;
                }
                let (value, authorize) = match d.kind.as_str() {
                    "ADD" => (&d.actual, false),
                    "REMOVE" => (&d.expected, true),
                    _ => {
                        all = false;
                        continue;
                    }
                };
                let rule: Value = serde_json::from_str(value).map_err(|e| format!("{}: {e}", d.path))?;
                let permission = drift::ip_permission(&rule).ok_or_else(|| format!("{}: not a rule", d.path))?;
                drift::set_rule(aws, group, permission, egress, authorize).await.map_err(|e| e.to_string())?;
            }
            Ok(all)
        }
        ("AWS::EC2::SecurityGroupIngress", "DELETED") => {
            let group = expected.get("GroupId").and_then(Value::as_str).ok_or("the rule names no GroupId")?;
            let permission = drift::ip_permission(expected).ok_or("the template's rule is not a rule")?;
            drift::set_rule(aws, group, permission, false, true).await.map_err(|e| e.to_string())?;
            Ok(true)
        }
        ("AWS::EC2::Route", "DELETED" | "MODIFIED") => {
            drift::put_route(aws, expected, r.status == "MODIFIED").await?;
            Ok(true)
        }
        ("AWS::AutoScaling::AutoScalingGroup", "MODIFIED") => {
            let name = r.physical_id.as_deref().ok_or("the group has no physical id")?;
            let size = |key: &str| {
                let changed = r.differences.iter().any(|d| d.path == format!("/{key}"));
                let value = expected.get(key).and_then(|v| v.as_i64().or_else(|| v.as_str()?.parse().ok()));
                if changed { value.and_then(|v| i32::try_from(v).ok()) } else { None }
            };
            let sizes = [size("MinSize"), size("MaxSize"), size("DesiredCapacity")];
            if sizes.iter().any(Option::is_some) {
                drift::set_group_sizes(aws, name, sizes[0], sizes[1], sizes[2]).await.map_err(|e| e.to_string())?;
            }
            Ok(r.differences.iter().all(|d| ["/MinSize", "/MaxSize", "/DesiredCapacity"].contains(&d.path.as_str())))
        }
        _ => Ok(false),
    }
}

// --- the reconcile -----------------------------------------------------------------------------------

/// One round of detection over a cluster's stacks.
#[derive(Debug)]
struct Run {
    /// Stacks not done yet, with their detection once started.
    pending: Vec<(StackRef, Option<String>)>,
    /// Stacks done: their record when drifted, their drifted-resource count.
    done: Vec<(StackRef, Option<StackDrift>)>,
    /// Stacks not checked this round (busy, refused, failed).
    skipped: Vec<StackRef>,
    /// Started right after a remediation: its end removes the annotation.
    after_remediation: bool,
}

impl Run {
    fn new(stacks: Vec<StackRef>, after_remediation: bool) -> Self {
        Self {
            pending: stacks.into_iter().map(|s| (s, None)).collect(),
            done: Vec::new(),
            skipped: Vec::new(),
            after_remediation,
        }
    }
}

/// Whether `cluster` asks for remediation.
pub fn remediation_requested(cluster: &AWSCluster) -> bool {
    cluster.annotations().get(REMEDIATE_ANNOTATION).is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
}

/// Runs drift detection on a cluster's stacks and records what it finds.
#[derive(Debug)]
pub struct DetectDrift;

impl Resource<AWSCluster, Arc<Shared>> for DetectDrift {
    fn name(&self) -> &str {
        "detect-drift"
    }

    async fn ensure_created(&self, shared: &mut Arc<Shared>, cluster: &AWSCluster) -> resource::Result<Outcome> {
        let settings = shared.config.drift.clone();
        if !settings.enabled() || cluster.metadata.deletion_timestamp.is_some() {
            return Ok(Outcome::proceed());
        }
        let key = format!("{}/{}", cluster.namespace().unwrap_or_default(), cluster.name_any());
        let recorded = latest(shared, cluster, &key);
        let remediate = remediation_requested(cluster);
        let run = shared.drift.runs.lock().remove(&key);
        let mut run = match run {
            Some(run) => run,
            None => {
                let since = recorded
                    .as_ref()
                    .and_then(|d| d.last_detection_time.as_ref())
                    .map(|t| Timestamp::now().duration_since(t.0).unsigned_abs());
                let due = since.is_none_or(|s| s >= settings.interval);
                let drifted = recorded.as_ref().is_some_and(|d| !d.stacks.is_empty());
                if remediate && drifted {
                    let (tenant, cp) = lookup::clients(shared, cluster).await?;
                    let stacks = cluster_stacks(shared, cluster).await?;
                    let mut done = Remediation::default();
                    for stack in recorded.as_ref().map(|d| d.stacks.as_slice()).unwrap_or_default() {
                        let which =
                            stacks.iter().find(|s| s.name == stack.name).map_or(StackAccount::Tenant, |s| s.account);
                        let aws = account(&tenant, &cp, which);
                        let reports = drift::drifted_resources(aws, &stack.name).await?;
                        remediate_stack(aws, &stack.name, &reports, &mut done).await;
                    }
                    report_remediation(shared, cluster, &done).await;
                    Run::new(stacks, true)
                } else if remediate || due {
                    Run::new(cluster_stacks(shared, cluster).await?, false)
                } else {
                    let stored = cluster.status.as_ref().and_then(|s| s.drift.as_ref());
                    match &recorded {
                        // Another writer of the status put back an older result.
                        Some(newer) if stored != Some(newer) => write(shared, cluster, newer).await?,
                        _ => ensure_condition(shared, cluster, recorded.as_ref()).await?,
                    }
                    let left = since.map_or(settings.interval, |s| settings.interval.saturating_sub(s));
                    return Ok(Outcome::proceed().requeue_after(left.max(Duration::from_secs(1))));
                }
            }
        };

        let (tenant, cp) = lookup::clients(shared, cluster).await?;
        let mut wait = settings.poll;
        let now = Instant::now();
        let mut still = Vec::new();
        let mut out_of_budget = false;
        for (stack, detection) in std::mem::take(&mut run.pending) {
            let aws = account(&tenant, &cp, stack.account);
            let metrics = &shared.drift.metrics;
            let count = |result: &str| {
                metrics
                    .detections
                    .get_or_create(&DetectionLabels { stack_kind: stack.kind.clone(), result: result.into() })
                    .inc();
            };
            let Some(id) = detection else {
                if stack.busy {
                    count("skipped");
                    run.skipped.push(stack);
                    continue;
                }
                if out_of_budget {
                    still.push((stack, None));
                    continue;
                }
                if let Err(until) = shared.drift.budget.take(&aws.cache_key(), now) {
                    out_of_budget = true;
                    wait = wait.min(until.max(Duration::from_millis(100)));
                    still.push((stack, None));
                    continue;
                }
                match drift::start(aws, &stack.name).await {
                    Ok(Started::Detection(id)) => still.push((stack, Some(id))),
                    Ok(Started::Refused(why)) => {
                        tracing::debug!(stack = %stack.name, %why, "drift detection refused");
                        count("skipped");
                        run.skipped.push(stack);
                    }
                    Err(e) => {
                        // Keep what was started; try this one again on the next reconcile.
                        still.push((stack, None));
                        run.pending = still;
                        shared.drift.runs.lock().insert(key, run);
                        return Err(e.into());
                    }
                }
                continue;
            };
            match drift::status(aws, &id).await {
                Ok(Detection::InProgress) => still.push((stack, Some(id))),
                Ok(Detection::Complete { drifted }) => {
                    let reports =
                        if drifted > 0 { drift::drifted_resources(aws, &stack.name).await } else { Ok(Vec::new()) };
                    match reports {
                        Ok(reports) if !reports.is_empty() || drifted > 0 => {
                            count("drifted");
                            let entry = record(&stack, &id, drifted, &reports);
                            run.done.push((stack, Some(entry)));
                        }
                        Ok(_) => {
                            count("in_sync");
                            run.done.push((stack, None));
                        }
                        Err(e) => {
                            still.push((stack, Some(id)));
                            run.pending = still;
                            shared.drift.runs.lock().insert(key, run);
                            return Err(e.into());
                        }
                    }
                }
                Ok(Detection::Failed(why)) => {
                    tracing::warn!(stack = %stack.name, %why, "drift detection failed");
                    count("failed");
                    run.skipped.push(stack);
                }
                Err(e) => {
                    still.push((stack, Some(id)));
                    run.pending = still;
                    shared.drift.runs.lock().insert(key, run);
                    return Err(e.into());
                }
            }
        }
        if !still.is_empty() {
            run.pending = still;
            shared.drift.runs.lock().insert(key, run);
            return Ok(Outcome::proceed().requeue_after(wait));
        }
        if run.done.is_empty() {
            // Nothing could be checked (no stack yet, or every one mid-operation, as while the
            // cluster is being created): no result to record; the same round starts again soon,
            // with the stacks' states read again.
            let again = Run::new(cluster_stacks(shared, cluster).await?, run.after_remediation);
            shared.drift.runs.lock().insert(key, again);
            return Ok(Outcome::proceed().requeue_after(settings.poll));
        }
        finish(shared, cluster, &key, recorded, run).await?;
        Ok(Outcome::proceed().requeue_after(settings.interval))
    }

    async fn ensure_deleted(&self, shared: &mut Arc<Shared>, cluster: &AWSCluster) -> resource::Result<Outcome> {
        let key = format!("{}/{}", cluster.namespace().unwrap_or_default(), cluster.name_any());
        shared.drift.runs.lock().remove(&key);
        shared.drift.last.lock().remove(&key);
        shared.drift.count(&key, None);
        Ok(Outcome::proceed())
    }
}

/// The newer of the status's drift and this process's last result.
fn latest(shared: &Shared, cluster: &AWSCluster, key: &str) -> Option<DriftStatus> {
    let stored = cluster.status.as_ref().and_then(|s| s.drift.clone());
    let remembered = shared.drift.last.lock().get(key).cloned();
    let at = |d: &Option<DriftStatus>| d.as_ref().and_then(|d| d.last_detection_time.as_ref().map(|t| t.0));
    if at(&remembered) > at(&stored) { remembered } else { stored }
}

fn account<'a>(tenant: &'a AccountClients, cp: &'a AccountClients, which: StackAccount) -> &'a AccountClients {
    match which {
        StackAccount::Tenant => tenant,
        StackAccount::ControlPlane => cp,
    }
}

/// The stacks of `cluster` (see [`stacks_of`]).
async fn cluster_stacks(shared: &Shared, cluster: &AWSCluster) -> Result<Vec<StackRef>, kube::Error> {
    let namespace = cluster.namespace().unwrap_or_default();
    let id = cluster.name_any();
    let cps = lookup::control_planes(shared, &namespace, &id).await?;
    let pools = lookup::node_pools(shared, &namespace, &id).await?;
    let own = cluster.status.as_ref().map(|s| s.stacks.as_slice()).unwrap_or_default();
    let cp_entries = cps.iter().filter_map(|c| c.status.as_ref()).flat_map(|s| s.stacks.iter());
    let pool_entries = pools.iter().filter_map(|p| p.status.as_ref()).flat_map(|s| s.stacks.iter());
    Ok(stacks_of(own.iter().chain(cp_entries).chain(pool_entries)))
}

async fn report_remediation(shared: &Shared, cluster: &AWSCluster, done: &Remediation) {
    if !done.fixed.is_empty() {
        let note = format!("put back as their templates say: {}", done.fixed.join(", "));
        shared.event(cluster, "DriftRemediated", note).await;
    }
    if !done.left.is_empty() {
        shared.warning(cluster, "DriftNotRemediated", done.left.join("; ")).await;
    }
}

/// Record the end of a run: status, condition, events, metrics, the annotation.
async fn finish(
    shared: &Shared,
    cluster: &AWSCluster,
    key: &str,
    before: Option<DriftStatus>,
    run: Run,
) -> Result<(), kube::Error> {
    // A stack not checked this time keeps what the last detection found.
    let mut stacks: Vec<StackDrift> = run.done.iter().filter_map(|(_, d)| d.clone()).collect();
    for skipped in &run.skipped {
        if let Some(old) = before.as_ref().and_then(|b| b.stacks.iter().find(|s| s.name == skipped.name)) {
            stacks.push(old.clone());
        }
    }
    stacks.sort_by(|a, b| a.name.cmp(&b.name));
    let drift = DriftStatus { last_detection_time: Some(Time(Timestamp::now())), stacks };
    // Metrics and events first, the status last: whoever sees the status sees a finished run.
    let mut per_kind: BTreeMap<String, u32> = BTreeMap::new();
    for (stack, _) in &run.done {
        per_kind.entry(stack.kind.clone()).or_default();
    }
    for s in &drift.stacks {
        *per_kind.entry(s.kind.clone()).or_default() += s.drifted_resources;
    }
    shared.drift.count(key, Some(per_kind));

    // One event per stack whose drift changed, naming the stack as its related object: the
    // recorder would fold the events of two stacks into one otherwise.
    let was = before.clone().unwrap_or_default();
    for stack in &drift.stacks {
        let earlier = was.stacks.iter().find(|s| s.name == stack.name);
        let one = |s: &StackDrift| fingerprint(&DriftStatus { last_detection_time: None, stacks: vec![s.clone()] });
        if earlier.map(one) != Some(one(stack)) {
            let alone = DriftStatus { last_detection_time: None, stacks: vec![stack.clone()] };
            let (_, _, message) = condition(&alone);
            let note = format!("{message}: {}", describe(&alone));
            let related = Some(crate::stack_ops::stack_reference(&stack.name));
            shared.publish(cluster, EventType::Warning, "StackDrifted", "DetectStackDrift", related, note).await;
        }
    }
    if drift.stacks.is_empty() && !was.stacks.is_empty() {
        shared.event(cluster, "DriftResolved", "every stack checked matches its template again".into()).await;
    }
    write(shared, cluster, &drift).await?;
    shared.drift.last.lock().insert(key.to_string(), drift.clone());
    if remediation_requested(cluster) && (run.after_remediation || drift.stacks.is_empty()) {
        if run.after_remediation && !drift.stacks.is_empty() {
            shared
                .warning(
                    cluster,
                    "DriftNotRemediated",
                    format!("still drifted after remediation: {}", describe(&drift)),
                )
                .await;
        }
        let patch = serde_json::json!({"metadata": {"annotations": {REMEDIATE_ANNOTATION: null}}});
        Api::<AWSCluster>::namespaced(shared.client.clone(), &cluster.namespace().unwrap_or_default())
            .patch(&cluster.name_any(), &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
    }
    Ok(())
}

/// The conditions of `cluster` with `Drifted` as `drift` says; `None` when unchanged.
fn conditions_with(cluster: &AWSCluster, drift: &DriftStatus) -> Option<Vec<Condition>> {
    let mut conditions = cluster.status.as_ref().map(|s| s.conditions.clone()).unwrap_or_default();
    let (status, reason, message) = condition(drift);
    set_condition(&mut conditions, DRIFTED, status, reason, message, cluster.metadata.generation).then_some(conditions)
}

/// Write `drift` and its condition into the status (only these two fields).
async fn write(shared: &Shared, cluster: &AWSCluster, drift: &DriftStatus) -> Result<(), kube::Error> {
    let mut status = serde_json::json!({ "drift": drift });
    if let Some(conditions) = conditions_with(cluster, drift) {
        status["conditions"] = serde_json::to_value(conditions).unwrap_or_default();
    }
    Api::<AWSCluster>::namespaced(shared.client.clone(), &cluster.namespace().unwrap_or_default())
        .patch_status(
            &cluster.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&serde_json::json!({ "status": status })),
        )
        .await?;
    Ok(())
}

/// Put the `Drifted` condition back if another writer of the status dropped it.
async fn ensure_condition(
    shared: &Shared,
    cluster: &AWSCluster,
    drift: Option<&DriftStatus>,
) -> Result<(), kube::Error> {
    let Some(drift) = drift else { return Ok(()) };
    let Some(conditions) = conditions_with(cluster, drift) else { return Ok(()) };
    let patch = serde_json::json!({ "status": { "conditions": conditions } });
    Api::<AWSCluster>::namespaced(shared.client.clone(), &cluster.namespace().unwrap_or_default())
        .patch_status(&cluster.name_any(), &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aws::drift::Difference;

    fn entry(name: &str, kind: &str, status: &str, account: StackAccount) -> StackEntry {
        StackEntry {
            name: name.into(),
            kind: kind.into(),
            account,
            status: status.into(),
            reason: None,
            last_transition_time: None,
            attempts: None,
            pending_update: None,
            applied_plan: None,
        }
    }

    fn stack(name: &str, kind: &str) -> StackRef {
        StackRef { name: name.into(), kind: kind.into(), account: StackAccount::Tenant, busy: false }
    }

    fn report(logical: &str, status: &str, differences: Vec<Difference>) -> ResourceReport {
        ResourceReport {
            logical_id: logical.into(),
            resource_type: "AWS::EC2::SecurityGroup".into(),
            physical_id: Some(format!("sg-{logical}")),
            status: status.into(),
            expected: Value::Null,
            differences,
        }
    }

    fn difference(path: &str, expected: &str, actual: &str, kind: &str) -> Difference {
        Difference { path: path.into(), expected: expected.into(), actual: actual.into(), kind: kind.into() }
    }

    #[test]
    fn the_stacks_of_a_cluster_are_listed_once_without_deleted_ones_and_busy_ones_marked() {
        let entries = [
            entry("cluster-q7m2x-tccp", "tccp", "UPDATE_COMPLETE", StackAccount::Tenant),
            entry("cluster-q7m2x-tccpf", "tccpf", "CREATE_COMPLETE", StackAccount::ControlPlane),
            entry("cluster-q7m2x-tcnp-p4kz1", "tcnp", "UPDATE_IN_PROGRESS", StackAccount::Tenant),
            entry("cluster-q7m2x-tcnp-old01", "tcnp", "DELETE_COMPLETE", StackAccount::Tenant),
            entry("cluster-q7m2x-tccp", "tccp", "UPDATE_COMPLETE", StackAccount::Tenant),
        ];
        let stacks = stacks_of(&entries);
        let seen: Vec<_> = stacks.iter().map(|s| (s.name.as_str(), s.account, s.busy)).collect();
        assert_eq!(
            seen,
            [
                ("cluster-q7m2x-tccp", StackAccount::Tenant, false),
                ("cluster-q7m2x-tccpf", StackAccount::ControlPlane, false),
                ("cluster-q7m2x-tcnp-p4kz1", StackAccount::Tenant, true),
            ]
        );
    }

    #[test]
    fn a_drifted_rule_is_recorded_with_its_difference() {
        let rule = r#"{"CidrIp":"203.0.113.0/24","FromPort":22,"IpProtocol":"tcp","ToPort":22}"#;
        let reports = [report(
            "MasterSecurityGroup",
            "MODIFIED",
            vec![difference("/SecurityGroupIngress/3", "null", rule, "ADD")],
        )];
        let got = record(&stack("cluster-q7m2x-tccp", "tccp"), "d-1", 1, &reports);
        assert_eq!(
            (got.name.as_str(), got.kind.as_str(), got.detection_id.as_str()),
            ("cluster-q7m2x-tccp", "tccp", "d-1")
        );
        assert_eq!(got.drifted_resources, 1);
        let r = &got.resources[0];
        assert_eq!(
            (r.logical_id.as_str(), r.physical_id.as_deref(), r.status.as_str()),
            ("MasterSecurityGroup", Some("sg-MasterSecurityGroup"), "MODIFIED")
        );
        assert_eq!(
            r.differences,
            [PropertyDrift {
                path: "/SecurityGroupIngress/3".into(),
                expected: "null".into(),
                actual: rule.into(),
                difference_type: "ADD".into()
            }]
        );
        let status = DriftStatus { last_detection_time: None, stacks: vec![got] };
        let (drifted, reason, message) = condition(&status);
        assert!(drifted);
        assert_eq!(reason, "StacksDrifted");
        assert!(
            message.starts_with("1 resource changed outside CloudFormation in cluster-q7m2x-tccp (1)"),
            "{message}"
        );
        assert_eq!(
            condition(&DriftStatus::default()),
            (false, "InSync", "every stack checked matches its template".into())
        );
    }

    #[test]
    fn secrets_never_reach_the_status() {
        let template = r#"{"ImageId":"ami-1","UserData":"c2VjcmV0IGtleQ==","TagSpecifications":[{"Tags":[{"Key":"a","Value":"b"}]}],"Nested":{"DbPassword":"hunter2"}}"#;
        let reports = [report(
            "LaunchTemplate",
            "MODIFIED",
            vec![
                difference("/LaunchTemplateData/UserData", "c2VjcmV0IGtleQ==", "b3RoZXIgc2VjcmV0", "NOT_EQUAL"),
                difference("/LaunchTemplateData", template, "null", "REMOVE"),
            ],
        )];
        let got = record(&stack("cluster-q7m2x-tcnp-p4kz1", "tcnp"), "d-2", 1, &reports);
        let text = serde_json::to_string(&got).expect("serialisable");
        for secret in ["c2VjcmV0IGtleQ==", "b3RoZXIgc2VjcmV0", "hunter2"] {
            assert!(!text.contains(secret), "{secret} leaked: {text}");
        }
        let d = &got.resources[0].differences;
        assert_eq!((d[0].expected.as_str(), d[0].actual.as_str()), (REDACTED, REDACTED));
        assert!(d[1].expected.contains("ami-1"), "the rest is kept: {}", d[1].expected);
    }

    #[test]
    fn the_record_is_bounded() {
        let many: Vec<Difference> = (0..25)
            .map(|i| difference(&format!("/SecurityGroupIngress/{i}"), "null", &"x".repeat(1000), "ADD"))
            .collect();
        let reports: Vec<ResourceReport> =
            (0..15).map(|i| report(&format!("Group{i:02}"), "MODIFIED", many.clone())).collect();
        let got = record(&stack("cluster-q7m2x-tccp", "tccp"), "d-3", 15, &reports);
        assert_eq!((got.resources.len(), got.omitted_resources, got.drifted_resources), (MAX_RESOURCES, 5, 15));
        let r = &got.resources[0];
        assert_eq!((r.differences.len(), r.omitted_differences), (MAX_DIFFERENCES, 15));
        assert_eq!(r.differences[0].actual.chars().count(), MAX_VALUE_CHARS);
        assert!(r.differences[0].actual.ends_with('…'));
    }

    #[test]
    fn the_budget_refills_per_account_and_says_how_long_to_wait() {
        let start = Instant::now();
        let budget = RateBudget::new(2);
        assert!(budget.take("111/eu-central-1", start).is_ok());
        assert!(budget.take("111/eu-central-1", start).is_ok());
        let wait = budget.take("111/eu-central-1", start).expect_err("two a minute");
        assert!((29..=30).contains(&wait.as_secs()), "{wait:?}");
        // Another account has its own bucket.
        assert!(budget.take("222/eu-central-1", start).is_ok());
        // Half a minute later one token is back, and only one.
        let later = start + Duration::from_secs(30);
        assert!(budget.take("111/eu-central-1", later).is_ok());
        assert!(budget.take("111/eu-central-1", later).is_err());
        // Saved up at most the capacity.
        let much_later = start + Duration::from_secs(3600);
        assert!(budget.take("111/eu-central-1", much_later).is_ok());
        assert!(budget.take("111/eu-central-1", much_later).is_ok());
        assert!(budget.take("111/eu-central-1", much_later).is_err());
    }

    #[test]
    fn the_gauge_sums_clusters_per_kind_and_forgets_deleted_ones() {
        let mut registry = Registry::default();
        let state = DriftState::new(&mut registry, 10);
        state.count("a/x", Some(BTreeMap::from([("tccp".into(), 2), ("tcnp".into(), 1)])));
        state.count("a/y", Some(BTreeMap::from([("tccp".into(), 3)])));
        assert_eq!((state.metrics.drifted("tccp"), state.metrics.drifted("tcnp")), (5, 1));
        state.count("a/x", Some(BTreeMap::from([("tccp".into(), 0)])));
        assert_eq!((state.metrics.drifted("tccp"), state.metrics.drifted("tcnp")), (3, 0));
        state.count("a/y", None);
        assert_eq!(state.metrics.drifted("tccp"), 0);
    }

    #[test]
    fn remediation_is_asked_for_with_true_only() {
        let cluster = |value: Option<&str>| {
            let mut c: AWSCluster = serde_json::from_value(serde_json::json!({
                "apiVersion": "infrastructure.giantswarm.io/v1alpha3", "kind": "AWSCluster",
                "metadata": {"name": "q7m2x", "namespace": "org-acme"},
                "spec": {
                    "cluster": {"description": "t", "dns": {"domain": "k8s.example.com"}},
                    "provider": {"credentialSecret": {"name": "c", "namespace": "giantswarm"}, "region": "eu-central-1"}
                }
            }))
            .expect("cluster");
            if let Some(v) = value {
                c.annotations_mut().insert(REMEDIATE_ANNOTATION.into(), v.into());
            }
            c
        };
        assert!(remediation_requested(&cluster(Some("true"))));
        assert!(remediation_requested(&cluster(Some(" True "))));
        assert!(!remediation_requested(&cluster(Some("false"))));
        assert!(!remediation_requested(&cluster(None)));
    }
}

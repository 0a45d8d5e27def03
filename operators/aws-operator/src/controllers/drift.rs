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
//! bounded in size, with values that could hold secrets redacted ([`findings::record`]); into the
//! condition `Drifted` (`True`, reason `StacksDrifted`, the message naming the count; `False`,
//! reason `InSync`); into a Warning event `StackDrifted` when what drifted changes (a Normal
//! `DriftResolved` when it is gone); and into the metrics `aws_operator_drifted_resources`
//! (per stack kind) and `aws_operator_drift_detections_total` (per stack kind and result).
//!
//! Remediation is asked for with the annotation [`findings::REMEDIATE_ANNOTATION`]` = "true"` on the
//! AWSCluster. It cannot be an `UpdateStack`: CloudFormation compares a new template with the
//! deployed *template*, so re-applying the same one is "No updates are to be performed" and
//! leaves the drift. The expected values are written back through each service's API instead
//! ([`findings::remedy`] decides, [`crate::drift::remediate`] calls): a rule added by hand to a security group is revoked, one removed is
//! authorised again (inline or standalone `AWS::EC2::SecurityGroupIngress`), a deleted or
//! redirected route is created or replaced, an Auto Scaling group's MinSize, MaxSize and
//! DesiredCapacity are set back. Anything else (a deleted group, a changed launch template) is
//! reported in a Warning event `DriftNotRemediated` and left alone: recreating such resources
//! is a stack operation, not a patch. After remediating the detector detects again and removes
//! the annotation; what is still drifted then is reported.

//!
//! The controller reads top-down: the round of detections running for the cluster, or a new one
//! when one is due or asked for (dereference); one step of each stack's detection, within the
//! budget (apply); the result recorded (status). What a detection found becomes a record in the
//! pure [`findings`]; the budget, the metrics and the rounds between reconciles are the drift
//! subsystem's ([`crate::drift::DriftState`]), which the controller is built with.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use apis::aws::{AWSCluster, DriftStatus, StackAccount, StackDrift};
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::api::{Patch, PatchParams};
use kube::runtime::events::EventType;
use kube::{Api, ResourceExt};
use operatorkit::{Outcome, Resource, ResourceSet, resource};
use semver::VersionReq;

use crate::aws::drift::{self as calls, Detection, Started};
use crate::aws::{AccountClients, AwsError};
use crate::context::Shared;
use crate::controllers::status::set_condition;
use crate::controllers::{self, lookup};
use crate::drift::findings::{self, DRIFTED, REMEDIATE_ANNOTATION, StackRef, remediation_requested};
use crate::drift::{DriftState, Remediation, Run};

/// The controller's name.
pub const CONTROLLER: &str = "aws-operator-drift-detector";

/// The resource set `name` for the Releases `requirement` matches, detecting with `state`.
pub fn resource_set(
    shared: Arc<Shared>,
    state: DriftState,
    name: String,
    requirement: VersionReq,
) -> ResourceSet<AWSCluster> {
    controllers::resource_set(shared, name, requirement, |shared, _| shared).resource(DetectDrift { state }).build()
}

/// Runs drift detection on a cluster's stacks and records what it finds.
#[derive(Debug)]
pub struct DetectDrift {
    state: DriftState,
}

/// How a reconcile without a running round goes on.
enum Start {
    /// A round over these stacks.
    Round(Run),
    /// No round is due: look again after this long.
    NotDue(Duration),
}

impl Resource<AWSCluster, Arc<Shared>> for DetectDrift {
    fn name(&self) -> &str {
        "detect-drift"
    }

    async fn ensure_created(&self, shared: &mut Arc<Shared>, cluster: &AWSCluster) -> resource::Result<Outcome> {
        let settings = shared.config.drift.clone();
        if !settings.enabled() || cluster.metadata.deletion_timestamp.is_some() {
            return Ok(Outcome::proceed());
        }
        // Dereference: the round running for the cluster, or a new one.
        let key = cluster_key(cluster);
        let recorded = self.latest(cluster, &key);
        let mut run = match self.state.take_run(&key) {
            Some(run) => run,
            None => match self.start(shared, cluster, recorded.as_ref()).await? {
                Start::Round(run) => run,
                Start::NotDue(left) => {
                    restore_status(shared, cluster, recorded.as_ref()).await?;
                    return Ok(Outcome::proceed().requeue_after(left.max(Duration::from_secs(1))));
                }
            },
        };

        // Apply: one step of each stack's detection.
        let (tenant, cp) = lookup::clients(shared, cluster).await?;
        let wait = match self.advance(&tenant, &cp, &mut run, settings.poll).await {
            Ok(wait) => wait,
            Err(e) => {
                self.state.keep_run(&key, run);
                return Err(e.into());
            }
        };
        if !run.pending.is_empty() {
            self.state.keep_run(&key, run);
            return Ok(Outcome::proceed().requeue_after(wait));
        }
        if run.done.is_empty() {
            // Nothing could be checked (no stack yet, or every one mid-operation, as while the
            // cluster is being created): no result to record; the same round starts again soon,
            // with the stacks' states read again.
            let again = Run::new(cluster_stacks(shared, cluster).await?, run.after_remediation);
            self.state.keep_run(&key, again);
            return Ok(Outcome::proceed().requeue_after(settings.poll));
        }

        // Status: the result.
        self.finish(shared, cluster, &key, recorded, run).await?;
        Ok(Outcome::proceed().requeue_after(settings.interval))
    }

    async fn ensure_deleted(&self, _shared: &mut Arc<Shared>, cluster: &AWSCluster) -> resource::Result<Outcome> {
        self.state.forget(&cluster_key(cluster));
        Ok(Outcome::proceed())
    }
}

impl DetectDrift {
    /// The newer of the status's drift and this process's last result.
    fn latest(&self, cluster: &AWSCluster, key: &str) -> Option<DriftStatus> {
        let stored = cluster.status.as_ref().and_then(|s| s.drift.clone());
        let remembered = self.state.last(key);
        let at = |d: &Option<DriftStatus>| d.as_ref().and_then(|d| d.last_detection_time.as_ref().map(|t| t.0));
        if at(&remembered) > at(&stored) { remembered } else { stored }
    }

    /// A new round when one is due or remediation is asked for; a requested remediation of a
    /// drifted cluster is done first, and the round after it checks what it did.
    async fn start(
        &self,
        shared: &Shared,
        cluster: &AWSCluster,
        recorded: Option<&DriftStatus>,
    ) -> resource::Result<Start> {
        let interval = shared.config.drift.interval;
        let since = recorded
            .and_then(|d| d.last_detection_time.as_ref())
            .map(|t| Timestamp::now().duration_since(t.0).unsigned_abs());
        let due = since.is_none_or(|s| s >= interval);
        let drifted = recorded.is_some_and(|d| !d.stacks.is_empty());
        let remediate = remediation_requested(cluster);
        if remediate && drifted {
            let (tenant, cp) = lookup::clients(shared, cluster).await?;
            let stacks = cluster_stacks(shared, cluster).await?;
            let mut done = Remediation::default();
            for stack in recorded.map(|d| d.stacks.as_slice()).unwrap_or_default() {
                let which = stacks.iter().find(|s| s.name == stack.name).map_or(StackAccount::Tenant, |s| s.account);
                let aws = account(&tenant, &cp, which);
                let reports = calls::drifted_resources(aws, &stack.name).await?;
                crate::drift::remediate(aws, &stack.name, &reports, &mut done).await;
            }
            report_remediation(shared, cluster, &done).await;
            Ok(Start::Round(Run::new(stacks, true)))
        } else if remediate || due {
            Ok(Start::Round(Run::new(cluster_stacks(shared, cluster).await?, false)))
        } else {
            Ok(Start::NotDue(since.map_or(interval, |s| interval.saturating_sub(s))))
        }
    }

    /// One step of each pending stack's detection: start it within the account's budget, or ask
    /// how it went. Returns how long to wait before asking again. On an error the stacks started
    /// so far stay pending, with the failed one.
    async fn advance(
        &self,
        tenant: &AccountClients,
        cp: &AccountClients,
        run: &mut Run,
        poll: Duration,
    ) -> Result<Duration, AwsError> {
        let mut wait = poll;
        let now = Instant::now();
        let mut still = Vec::new();
        let mut out_of_budget = false;
        let metrics = self.state.metrics();
        for (stack, detection) in std::mem::take(&mut run.pending) {
            let aws = account(tenant, cp, stack.account);
            let Some(id) = detection else {
                if stack.busy {
                    metrics.detected(&stack.kind, "skipped");
                    run.skipped.push(stack);
                    continue;
                }
                if out_of_budget {
                    still.push((stack, None));
                    continue;
                }
                if let Err(until) = self.state.take_budget(&aws.account_id, &aws.region, now) {
                    out_of_budget = true;
                    wait = wait.min(until.max(Duration::from_millis(100)));
                    still.push((stack, None));
                    continue;
                }
                match calls::start(aws, &stack.name).await {
                    Ok(Started::Detection(id)) => still.push((stack, Some(id))),
                    Ok(Started::Refused(why)) => {
                        tracing::debug!(stack = %stack.name, %why, "drift detection refused");
                        metrics.detected(&stack.kind, "skipped");
                        run.skipped.push(stack);
                    }
                    Err(e) => {
                        // Keep what was started; try this one again on the next reconcile.
                        still.push((stack, None));
                        run.pending = still;
                        return Err(e);
                    }
                }
                continue;
            };
            let reports = match calls::status(aws, &id).await {
                Ok(Detection::InProgress) => {
                    still.push((stack, Some(id)));
                    continue;
                }
                Ok(Detection::Failed(why)) => {
                    tracing::warn!(stack = %stack.name, %why, "drift detection failed");
                    metrics.detected(&stack.kind, "failed");
                    run.skipped.push(stack);
                    continue;
                }
                Ok(Detection::Complete { drifted }) => {
                    let reports =
                        if drifted > 0 { calls::drifted_resources(aws, &stack.name).await } else { Ok(Vec::new()) };
                    reports.map(|reports| (drifted, reports))
                }
                Err(e) => Err(e),
            };
            match reports {
                Ok((drifted, reports)) if !reports.is_empty() || drifted > 0 => {
                    metrics.detected(&stack.kind, "drifted");
                    let entry = findings::record(&stack, &id, drifted, &reports);
                    run.done.push((stack, Some(entry)));
                }
                Ok(_) => {
                    metrics.detected(&stack.kind, "in_sync");
                    run.done.push((stack, None));
                }
                Err(e) => {
                    still.push((stack, Some(id)));
                    run.pending = still;
                    return Err(e);
                }
            }
        }
        run.pending = still;
        Ok(wait)
    }

    /// Record the end of a round: status, condition, events, metrics, the annotation.
    async fn finish(
        &self,
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
        // Metrics and events first, the status last: whoever sees the status sees a finished round.
        let mut per_kind: BTreeMap<String, u32> = BTreeMap::new();
        for (stack, _) in &run.done {
            per_kind.entry(stack.kind.clone()).or_default();
        }
        for s in &drift.stacks {
            *per_kind.entry(s.kind.clone()).or_default() += s.drifted_resources;
        }
        self.state.count(key, Some(per_kind));
        announce(shared, cluster, before.as_ref(), &drift).await;
        write(shared, cluster, &drift).await?;
        self.state.remember(key, drift.clone());
        if remediation_requested(cluster) && (run.after_remediation || drift.stacks.is_empty()) {
            if run.after_remediation && !drift.stacks.is_empty() {
                let note = format!("still drifted after remediation: {}", findings::summary(&drift));
                shared.warning(cluster, "DriftNotRemediated", note).await;
            }
            let patch = serde_json::json!({"metadata": {"annotations": {REMEDIATE_ANNOTATION: null}}});
            Api::<AWSCluster>::namespaced(shared.client.clone(), &cluster.namespace().unwrap_or_default())
                .patch(&cluster.name_any(), &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
        }
        Ok(())
    }
}

/// The key of `cluster` in the drift state: `<namespace>/<name>`.
fn cluster_key(cluster: &AWSCluster) -> String {
    format!("{}/{}", cluster.namespace().unwrap_or_default(), cluster.name_any())
}

fn account<'a>(tenant: &'a AccountClients, cp: &'a AccountClients, which: StackAccount) -> &'a AccountClients {
    match which {
        StackAccount::Tenant => tenant,
        StackAccount::ControlPlane => cp,
    }
}

/// The stacks of `cluster` (see [`findings::stacks_of`]).
async fn cluster_stacks(shared: &Shared, cluster: &AWSCluster) -> Result<Vec<StackRef>, kube::Error> {
    let namespace = cluster.namespace().unwrap_or_default();
    let id = cluster.name_any();
    let cps = lookup::control_planes(shared, &namespace, &id).await?;
    let pools = lookup::node_pools(shared, &namespace, &id).await?;
    let own = cluster.status.as_ref().map(|s| s.stacks.as_slice()).unwrap_or_default();
    let cp_entries = cps.iter().filter_map(|c| c.status.as_ref()).flat_map(|s| s.stacks.iter());
    let pool_entries = pools.iter().filter_map(|p| p.status.as_ref()).flat_map(|s| s.stacks.iter());
    Ok(findings::stacks_of(own.iter().chain(cp_entries).chain(pool_entries)))
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

/// One Warning event per stack whose drift changed since `before`, naming the stack as its
/// related object (the recorder would fold the events of two stacks into one otherwise); a
/// Normal event when every drift is gone.
async fn announce(shared: &Shared, cluster: &AWSCluster, before: Option<&DriftStatus>, drift: &DriftStatus) {
    let was = before.cloned().unwrap_or_default();
    for stack in &drift.stacks {
        let earlier = was.stacks.iter().find(|s| s.name == stack.name);
        let one = |s: &StackDrift| findings::fingerprint(&findings::alone(s));
        if earlier.map(one) != Some(one(stack)) {
            let alone = findings::alone(stack);
            let (_, _, message) = findings::condition(&alone);
            let note = format!("{message}: {}", findings::summary(&alone));
            let related = Some(crate::stack_ops::stack_reference(&stack.name));
            shared.publish(cluster, EventType::Warning, "StackDrifted", "DetectStackDrift", related, note).await;
        }
    }
    if drift.stacks.is_empty() && !was.stacks.is_empty() {
        shared.event(cluster, "DriftResolved", "every stack checked matches its template again".into()).await;
    }
}

/// Between rounds: put the result back if another writer of the status put back an older one,
/// and the `Drifted` condition if one dropped it.
async fn restore_status(
    shared: &Shared,
    cluster: &AWSCluster,
    recorded: Option<&DriftStatus>,
) -> Result<(), kube::Error> {
    let stored = cluster.status.as_ref().and_then(|s| s.drift.as_ref());
    match recorded {
        Some(newer) if stored != Some(newer) => write(shared, cluster, newer).await,
        _ => ensure_condition(shared, cluster, recorded).await,
    }
}

/// The conditions of `cluster` with `Drifted` as `drift` says; `None` when unchanged.
fn conditions_with(cluster: &AWSCluster, drift: &DriftStatus) -> Option<Vec<Condition>> {
    let mut conditions = cluster.status.as_ref().map(|s| s.conditions.clone()).unwrap_or_default();
    let (status, reason, message) = findings::condition(drift);
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

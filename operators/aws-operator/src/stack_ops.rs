//! Carries out the stack state machine's steps ([`aws_stacks::state::plan_ensure`],
//! [`aws_stacks::state::plan_delete`]) against one account: every call is timed and counted
//! per stack kind and operation, every status change the operator observes becomes one Kubernetes
//! event on the owning object, and every write invalidates the account's `DescribeStacks` cache.
//!
//! Failures the operator repairs by itself (an update rolled back, a create rolled back, a delete
//! that failed) are retried with a backoff of 30 s doubling per attempt, capped at 10 minutes
//! ([`aws_stacks::state::retry_backoff`]). The attempt count and the time of the last failure
//! live in the stack's status entry, so a restarted operator keeps the pace instead of retrying
//! at once.
//!
//! Every event about a stack names it as the event's related object (kind `Stack`): the event
//! recorder folds repeats by type, reason, action, object and related object, so the events of
//! two stacks never fold into one, and the action (the CloudFormation call, or the status
//! observed) keeps two different steps of one stack apart.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use apis::aws::{StackAccount, StackStatus as StatusEntry};
use aws_stacks::cfn::Template;
use aws_stacks::names::{Account, StackKind};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::runtime::events::EventType;
use operatorkit::ResourceError;

use crate::aws::AccountClients;
use aws_stacks::state::{
    DeleteStep, EnsureStep, StackStatus, StackView, TEMPLATE_HASH_OUTPUT, plan_delete, plan_ensure, retry_backoff,
};

use crate::approval;
use crate::aws::cloudformation::{CfnError, StackRequest};
use crate::context::{Shared, StackOpLabels};
pub use crate::stack_update::{Gate, UpdateWhen};
use crate::stack_update::{Route, Update};

/// A stack the operator wants.
#[derive(Debug, Clone)]
pub struct DesiredStack {
    /// The kind.
    pub kind: StackKind,
    /// The stack name.
    pub name: String,
    /// The rendered template, without its hash output.
    pub template: Template,
    /// Stack tags.
    pub tags: Vec<(String, String)>,
    /// When an existing stack may be updated.
    pub update: UpdateWhen,
    /// The hash to compare and record instead of the template's own, for templates that
    /// depend on live state which must not by itself cause an update (a node pool's current
    /// desired capacity, the create-only ordering of masters).
    pub canonical_hash: Option<String>,
}

/// Where a stack stands after one reconcile.
#[derive(Debug, Clone)]
pub enum Progress {
    /// Usable and current: its outputs can be read.
    Ready(StackView),
    /// Being created, updated or recreated: look again after the poll interval.
    Pending,
    /// An operation failed and is retried after `retry_after`; `Ready=False` with `reason` and
    /// `message`, which name the stack and CloudFormation's reason.
    Retrying {
        /// The condition reason (`StackUpdateFailed`, `StackCreateFailed`).
        reason: &'static str,
        /// What failed and when it is tried again.
        message: String,
        /// How long until the next attempt.
        retry_after: Duration,
    },
    /// An update waits for approval ([`crate::approval`]): the stack is usable with its
    /// deployed template; `message` says what the update would do and how to approve it.
    AwaitingApproval {
        /// The summary and the approval command.
        message: String,
    },
}

/// The status recorded for a stack the operator has just asked CloudFormation to change, until
/// it observes the stack's own status.
pub const CREATE_REQUESTED: &str = "CREATE_REQUESTED";
/// See [`CREATE_REQUESTED`].
pub const UPDATE_REQUESTED: &str = "UPDATE_REQUESTED";
/// See [`CREATE_REQUESTED`].
pub const DELETE_REQUESTED: &str = "DELETE_REQUESTED";

/// The status entry recorded for a stack in the owning object's status. The transition time
/// moves only when the status changes.
pub fn status_entry(
    kind: StackKind,
    name: &str,
    status: &str,
    reason: Option<String>,
    previous: Option<&StatusEntry>,
    attempts: Option<u32>,
) -> StatusEntry {
    let changed = previous.is_none_or(|p| p.status != status);
    StatusEntry {
        name: name.to_string(),
        kind: kind.as_str().to_string(),
        account: match kind.account() {
            Account::Tenant => StackAccount::Tenant,
            Account::ControlPlane => StackAccount::ControlPlane,
        },
        status: status.to_string(),
        reason,
        last_transition_time: if changed {
            Some(Time(jiff::Timestamp::now()))
        } else {
            previous.and_then(|p| p.last_transition_time.clone())
        },
        attempts: attempts.filter(|a| *a > 0),
        pending_update: None,
        applied_plan: previous.and_then(|p| p.applied_plan.clone()),
    }
}

/// Where a failure the operator retries stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pace {
    /// How many times it failed, this time included.
    pub attempts: u32,
    /// Whether this reconcile is the first to see this failure.
    pub first_seen: bool,
    /// When the next attempt is due (whole seconds, as the status records times).
    pub due: jiff::Timestamp,
    /// How long to wait before the next attempt; `None` when it is due.
    pub wait: Option<Duration>,
}

/// Pace a retried failure: the stack is observed in `failed_status`; `recorded` is its status
/// entry as last written. The failure counts once, when the entry did not show it yet; the next
/// attempt is due [`retry_backoff`] after the entry's transition into it.
pub fn pace(recorded: Option<&StatusEntry>, failed_status: &str, now: jiff::Timestamp) -> Pace {
    let before = recorded.and_then(|r| r.attempts).unwrap_or(0);
    let seen = recorded.filter(|r| r.status == failed_status);
    let attempts = if seen.is_some() { before.max(1) } else { before + 1 };
    let since = seen.and_then(|r| r.last_transition_time.as_ref()).map_or(now, |t| t.0);
    let since = jiff::Timestamp::from_second(since.as_second()).unwrap_or(since);
    let backoff = jiff::SignedDuration::try_from(retry_backoff(attempts - 1)).unwrap_or_default();
    let due = since.checked_add(backoff).unwrap_or(since);
    let wait = Duration::try_from(now.duration_until(due)).ok().filter(|w| !w.is_zero());
    // The first sighting always waits: the failure has just been reported.
    let wait = if seen.is_none() { Some(wait.unwrap_or(Duration::from_secs(1))) } else { wait };
    Pace { attempts, first_seen: seen.is_none(), due, wait }
}

fn event_reason(status: &str) -> &'static str {
    if status.ends_with("_IN_PROGRESS") {
        "CFInProgress"
    } else if status.ends_with("FAILED") || status == "ROLLBACK_COMPLETE" || status == "UPDATE_ROLLBACK_COMPLETE" {
        "CFFailed"
    } else if status == "DELETED" || status == "DELETE_COMPLETE" {
        "CFDeleted"
    } else {
        "CFCompleted"
    }
}

/// The related object of every event about stack `name` (stack names are unique per
/// installation: they hold the cluster id).
pub fn stack_reference(name: &str) -> ObjectReference {
    ObjectReference {
        api_version: Some("cloudformation.amazonaws.com/v1".into()),
        kind: Some("Stack".into()),
        name: Some(name.to_string()),
        ..ObjectReference::default()
    }
}

/// Stack `name`'s deployed template (`GetTemplate`, counted as an operation on a `kind`
/// stack), parsed; `None` when the stack does not exist or its body is not JSON.
pub async fn deployed_template(
    shared: &Shared,
    aws: &AccountClients,
    kind: StackKind,
    name: &str,
) -> Result<Option<serde_json::Value>, CfnError> {
    let body = timed(shared, kind, "get_template", aws.cfn.template(name)).await?;
    Ok(body.and_then(|b| serde_json::from_str(&b).ok()))
}

async fn timed<T>(
    shared: &Shared,
    kind: StackKind,
    operation: &str,
    call: impl Future<Output = Result<T, CfnError>>,
) -> Result<T, CfnError> {
    let start = Instant::now();
    let out = call.await;
    let labels = StackOpLabels {
        stack: kind.as_str().to_string(),
        operation: operation.to_string(),
        result: if out.is_ok() { "success" } else { "error" }.to_string(),
    };
    shared.metrics.operations.get_or_create(&labels).inc();
    shared.metrics.duration.get_or_create(&labels).observe(start.elapsed().as_secs_f64());
    out
}

/// One stack and the object it belongs to, for events.
struct Subject<'a, K> {
    shared: &'a Shared,
    aws: &'a AccountClients,
    obj: &'a K,
    name: &'a str,
}

impl<K: kube::Resource<DynamicType = ()>> Subject<'_, K> {
    async fn event(&self, type_: EventType, reason: &str, action: &str, note: String) {
        let related = stack_reference(self.name);
        self.shared.publish(self.obj, type_, reason, action, Some(related), note).await;
    }

    /// Emit one Normal event (and count one transition) when the observed status differs from the one
    /// recorded in the object's status and from the last one this process announced, so that
    /// a status write the cache has not shown yet does not announce the same change twice.
    async fn note_transition(&self, kind: StackKind, observed: &str, recorded: Option<&StatusEntry>) {
        let before = recorded.map(|r| r.status.as_str());
        if before == Some(observed) {
            return;
        }
        let key = format!("{}/{}", self.aws.cache_key(), self.name);
        {
            let mut memo = self.shared.memo.lock();
            if memo.stack_status.get(&key).is_some_and(|s| s == observed) {
                return;
            }
            memo.stack_status.insert(key, observed.to_string());
        }
        let labels = StackOpLabels {
            stack: kind.as_str().to_string(),
            operation: observed.to_string(),
            result: "observed".into(),
        };
        self.shared.metrics.transitions.get_or_create(&labels).inc();
        let name = self.name;
        let note = match before {
            Some(b) => format!("stack {name}: {b} → {observed}"),
            None => format!("stack {name}: {observed}"),
        };
        // A transition is narrated as Normal, failures included: the step that acts on a failed
        // stack (a paced retry, a recreate, a continued rollback, or the error that stops the
        // object) is the one Warning, so a failure is not announced twice.
        self.event(EventType::Normal, event_reason(observed), observed, note).await;
    }
}

/// CloudFormation's reason for a failure: the observed one, else the one recorded while the
/// stack rolled back (the reason of `*_ROLLBACK_IN_PROGRESS` names the failed resources; the
/// final status often has none).
fn failure_reason(observed: Option<&StackView>, recorded: Option<&StatusEntry>) -> String {
    observed
        .and_then(|v| v.status_reason.clone())
        .filter(|r| !r.is_empty())
        .or_else(|| recorded.and_then(|r| r.reason.clone()).filter(|r| !r.is_empty()))
        .unwrap_or_else(|| "CloudFormation gave no reason".into())
}

/// The stack must exist and match `desired`. Runs at most one write.
///
/// `bucket` is the cluster bucket in the stack's own account, used for templates over
/// 51,200 bytes; `None` for stacks in the management account (theirs are small).
pub async fn ensure<K>(
    shared: &Shared,
    aws: &AccountClients,
    obj: &K,
    desired: DesiredStack,
    bucket: Option<&str>,
    recorded: Option<&StatusEntry>,
) -> Result<(Progress, StatusEntry), ResourceError>
where
    K: kube::Resource<DynamicType = ()>,
{
    ensure_gated(shared, aws, obj, desired, bucket, recorded, None).await
}

/// [`ensure`], with an update of an existing stack passed through the approval `gate`
/// ([`crate::approval`]): held as a change set until approved, then run by executing that
/// change set. Creates never wait.
pub async fn ensure_gated<K>(
    shared: &Shared,
    aws: &AccountClients,
    obj: &K,
    desired: DesiredStack,
    bucket: Option<&str>,
    recorded: Option<&StatusEntry>,
    gate: Option<&Gate>,
) -> Result<(Progress, StatusEntry), ResourceError>
where
    K: kube::Resource<DynamicType = ()>,
{
    let DesiredStack { kind, name, mut template, tags, update, canonical_hash } = desired;
    let subject = Subject { shared, aws, obj, name: &name };
    // Tags are part of the change: a new cloud tag updates the stack like a template change.
    let hash = aws_stacks::cfn::stack_hash(&canonical_hash.unwrap_or_else(|| template.hash()), &tags);
    template.output(
        TEMPLATE_HASH_OUTPUT,
        serde_json::Value::String(hash.clone()),
        Some("sha256 of this template without this output, and of the stack tags"),
    );
    let observed =
        timed(shared, kind, "describe", shared.stacks.get(&aws.cache_key(), aws.cfn.as_ref(), &name)).await?;
    if let Some(view) = &observed {
        subject.note_transition(kind, view.status.as_str(), recorded).await;
    }
    // What kind of update this is and whether it may run ([`crate::stack_update`]); an update
    // the gate holds or has approved is planned even while it may not run yet.
    let policy = Update::decide(gate, update, &name, &hash);
    let step = plan_ensure(observed.as_ref(), &hash, policy.may_update());
    let request = || async {
        let body = template.to_json();
        let limit = shared.config.template_body_limit;
        let (template_body, template_url) = if body.len() > limit {
            let Some(bucket) = bucket else {
                return Err(ResourceError::msg(
                    "TemplateTooLarge",
                    format!("the template of stack {name} is {} bytes, over the {limit} CloudFormation accepts inline, and no bucket can hold it", body.len()),
                )
                .permanent());
            };
            let key = format!("cloudformation/{name}/{hash}.json");
            crate::aws::s3::put_object(aws, bucket, &key, body.into_bytes(), &hash, "application/json").await?;
            (None, Some(template_url(&aws.region, bucket, &key)))
        } else {
            (Some(body), None)
        };
        Ok(StackRequest {
            name: name.clone(),
            template_body,
            template_url,
            tags: tags.iter().cloned().collect::<BTreeMap<_, _>>(),
            named_iam: !matches!(kind, StackKind::Tcnpf | StackKind::Tccpf),
            termination_protection: true,
        })
    };
    let current = observed.as_ref().map(|v| v.status.as_str().to_string());
    let reason = observed.as_ref().and_then(|v| v.status_reason.clone());
    let mut attempts = recorded.and_then(|r| r.attempts);
    let entry = |status: &str, reason: Option<String>, attempts: Option<u32>| {
        status_entry(kind, &name, status, reason, recorded, attempts)
    };
    let now = jiff::Timestamp::now();
    // A rolled-back update is reported once and updated again when its backoff is over.
    let step = match step {
        EnsureStep::RetryRolledBackUpdate { deployed } => {
            let status = "UPDATE_ROLLBACK_COMPLETE";
            let why = failure_reason(observed.as_ref(), recorded);
            let pace = pace(recorded, status, now);
            let message = format!(
                "the update of stack {name} failed and was rolled back: {why}; attempt {} failed, next attempt at {}",
                pace.attempts, pace.due
            );
            if pace.first_seen {
                subject.event(EventType::Warning, "CFUpdateFailed", "UpdateStack", message.clone()).await;
            }
            if let Some(wait) = pace.wait {
                let retrying = Progress::Retrying { reason: "StackUpdateFailed", message, retry_after: wait };
                return Ok((retrying, entry(status, Some(why), Some(pace.attempts))));
            }
            attempts = Some(pace.attempts);
            EnsureStep::Update { deployed }
        }
        step => step,
    };
    // A change set held for approval that will not run is deleted, not left behind.
    if !policy.keeps_change_set(matches!(step, EnsureStep::Update { .. }))
        && let Some(old) = recorded.and_then(|r| r.pending_update.as_ref())
    {
        timed(shared, kind, "delete_change_set", aws.cfn.delete_change_set(&name, &old.change_set)).await?;
    }
    Ok(match step {
        EnsureStep::Ready => {
            let Some(view) = observed else {
                return Err(ResourceError::msg(
                    "Internal",
                    format!("stack {name} planned ready without being observed"),
                ));
            };
            // Usable and current: whatever failed before is over.
            (Progress::Ready(view), entry(view_status(&current), reason, None))
        }
        EnsureStep::Wait { status } => (Progress::Pending, entry(&status, reason, attempts)),
        EnsureStep::Create => {
            let req = request().await?;
            match timed(shared, kind, "create", aws.cfn.create(&req)).await {
                Ok(()) | Err(CfnError::AlreadyExists(_)) => {}
                Err(e) => return Err(e.into()),
            }
            aws_invalidate(shared, aws, &name);
            let note = format!("creating stack {name} in account {}", aws.account_id);
            subject.event(EventType::Normal, "CFCreateRequested", "CreateStack", note).await;
            (Progress::Pending, entry(CREATE_REQUESTED, None, attempts))
        }
        EnsureStep::Update { deployed } => {
            match (policy.route(observed.is_some()), &observed, gate) {
                (Route::KeepApproved, Some(view), _) => {
                    // Approved, and held by something else: the change set waits as it is.
                    let mut entry = entry(view_status(&current), reason, attempts);
                    entry.pending_update = recorded.and_then(|r| r.pending_update.clone());
                    return Ok((Progress::Ready(view.clone()), entry));
                }
                (Route::ChangeSet, _, Some(gate)) => {
                    let req = request().await?;
                    let plan = approval::plan_hash(&name, &hash);
                    let current = view_status(&current).to_string();
                    let gated = Gated { subject: &subject, kind, gate, recorded, plan, hash: &hash, current, attempts };
                    return gated.run(policy.action, &req, &template).await;
                }
                _ => {}
            }
            let req = request().await?;
            match timed(shared, kind, "update", aws.cfn.update(&req)).await {
                Ok(()) | Err(CfnError::NoUpdates(_)) => {}
                Err(e) => return Err(e.into()),
            }
            aws_invalidate(shared, aws, &name);
            let note = format!(
                "updating stack {name}: template {} → {}",
                deployed.as_deref().map_or("(no hash)", |d| &d[..d.len().min(12)]),
                &hash[..12]
            );
            subject.event(EventType::Normal, "CFUpdateRequested", "UpdateStack", note).await;
            (Progress::Pending, entry(UPDATE_REQUESTED, None, attempts))
        }
        EnsureStep::RetryRolledBackUpdate { .. } => {
            return Err(ResourceError::msg("Internal", format!("stack {name}: a retried update was not paced")));
        }
        EnsureStep::DeleteFailedCreate { .. } => {
            let status = "ROLLBACK_COMPLETE";
            let why = failure_reason(observed.as_ref(), recorded);
            let pace = pace(recorded, status, now);
            if pace.first_seen {
                let note = format!(
                    "stack {name} failed to create ({why}); attempt {} failed, deleting it to create it again at {}",
                    pace.attempts, pace.due
                );
                subject.event(EventType::Warning, "CFCreateFailed", "CreateStack", note).await;
            }
            match pace.wait {
                Some(wait) => (
                    Progress::Retrying {
                        reason: "StackCreateFailed",
                        message: format!(
                            "stack {name} failed to create: {why}; attempt {} failed, creating it again at {}",
                            pace.attempts, pace.due
                        ),
                        retry_after: wait,
                    },
                    entry(status, Some(why), Some(pace.attempts)),
                ),
                None => {
                    if observed.as_ref().is_some_and(|v| v.termination_protection) {
                        timed(shared, kind, "lift_protection", aws.cfn.set_termination_protection(&name, false))
                            .await?;
                    }
                    timed(shared, kind, "delete", aws.cfn.delete(&name)).await?;
                    aws_invalidate(shared, aws, &name);
                    let note = format!("stack {name} failed to create ({why}); deleting it to create it again");
                    subject.event(EventType::Warning, "CFRecreate", "DeleteStack", note).await;
                    (Progress::Pending, entry(DELETE_REQUESTED, Some(why), Some(pace.attempts)))
                }
            }
        }
        EnsureStep::ContinueRollback => {
            timed(shared, kind, "continue_rollback", aws.cfn.continue_update_rollback(&name)).await?;
            aws_invalidate(shared, aws, &name);
            let note = format!("stack {name} is UPDATE_ROLLBACK_FAILED; continuing the rollback");
            subject.event(EventType::Warning, "CFContinueRollback", "ContinueUpdateRollback", note).await;
            (Progress::Pending, entry(view_status(&current), reason, attempts))
        }
        EnsureStep::Failed { status, reason } => {
            return Err(ResourceError::msg(
                "StackFailed",
                format!(
                    "stack {name} is {status}: {}; the operator cannot repair this state, delete the stack or the object",
                    reason.as_deref().unwrap_or("no reason given")
                ),
            ));
        }
    })
}

/// One gated update: the stack, its plan, and what the status entry should carry.
struct Gated<'a, K> {
    subject: &'a Subject<'a, K>,
    kind: StackKind,
    gate: &'a Gate,
    recorded: Option<&'a StatusEntry>,
    plan: String,
    /// The desired stack hash.
    hash: &'a str,
    /// The stack's observed status, kept in the entry while the update waits.
    current: String,
    attempts: Option<u32>,
}

impl<K: kube::Resource<DynamicType = ()>> Gated<'_, K> {
    /// Hold the update as a change set, or execute the approved one.
    ///
    /// The approved update runs as `ExecuteChangeSet` rather than `UpdateStack`: what runs is
    /// exactly the change set whose summary was approved, and CloudFormation refuses it once
    /// the stack changed under it (the change set is then no longer `AVAILABLE`, and a new one
    /// is made for the same desired template). The change set carries the same template, tags
    /// and capabilities an `UpdateStack` would.
    async fn run(
        &self,
        action: approval::Action,
        req: &StackRequest,
        template: &Template,
    ) -> Result<(Progress, StatusEntry), ResourceError> {
        let Subject { shared, aws, name, .. } = *self.subject;
        let kind = self.kind;
        let change_set = approval::change_set_name(name, &self.plan);
        // A change set of an earlier plan is no longer what would run.
        if let Some(old) = self.recorded.and_then(|r| r.pending_update.as_ref())
            && old.change_set != change_set
        {
            timed(shared, kind, "delete_change_set", aws.cfn.delete_change_set(name, &old.change_set)).await?;
        }
        let mut view =
            timed(shared, kind, "describe_change_set", aws.cfn.describe_change_set(name, &change_set)).await?;
        if let Some(v) = &view
            && !v.computing()
            && !v.executable()
        {
            // Failed, obsolete or already executed: make it again for the same template.
            timed(shared, kind, "delete_change_set", aws.cfn.delete_change_set(name, &change_set)).await?;
            view = None;
        }
        let view = match view {
            Some(v) => v,
            None => {
                timed(shared, kind, "create_change_set", aws.cfn.create_change_set(req, &change_set)).await?;
                let made =
                    timed(shared, kind, "describe_change_set", aws.cfn.describe_change_set(name, &change_set)).await?;
                match made {
                    Some(v) if v.status == "FAILED" => {
                        return Err(ResourceError::msg(
                            "ChangeSetFailed",
                            format!(
                                "the change set {change_set} of stack {name} failed: {}",
                                v.status_reason.as_deref().unwrap_or("CloudFormation gave no reason")
                            ),
                        ));
                    }
                    Some(v) => v,
                    None => {
                        return Err(ResourceError::msg(
                            "ChangeSetMissing",
                            format!("the change set {change_set} of stack {name} was created but cannot be found"),
                        ));
                    }
                }
            }
        };
        let previous = self.recorded.and_then(|r| r.pending_update.clone());
        let mut action = action;
        let summary = if view.computing() {
            // CloudFormation is still computing it: keep what was recorded, if it is this plan.
            previous.clone().filter(|p| p.plan_hash == self.plan).unwrap_or_else(|| apis::aws::PendingUpdate {
                plan_hash: self.plan.clone(),
                change_set: change_set.clone(),
                ..Default::default()
            })
        } else {
            let deployed = deployed_template(shared, aws, kind, name).await?.unwrap_or_default();
            let own = approval::template_diff(&deployed, &template.to_value());
            if view.changes.is_empty() && own.is_empty() {
                // Nothing but outputs changes: the setting says whether that waits.
                if self.gate.outputs_only_runs(name, self.hash) {
                    action = approval::Action::Execute;
                }
            }
            approval::summarize(&self.plan, &change_set, &view.changes, &own)
        };
        let note_key = format!("{}/{name}", aws.cache_key());
        if matches!(action, approval::Action::Execute) && view.executable() {
            timed(shared, kind, "execute_change_set", aws.cfn.execute_change_set(name, &change_set)).await?;
            aws_invalidate(shared, aws, name);
            shared.memo.lock().approval_notes.remove(&note_key);
            let why = if self.gate.approved(name, self.hash) {
                format!("plan {} approved", self.plan)
            } else {
                format!("plan {} changes no resource", self.plan)
            };
            let note = format!(
                "updating stack {name}: {why}, executing change set {change_set} ({})",
                approval::describe(name, &summary)
            );
            self.subject.event(EventType::Normal, "CFUpdateRequested", "ExecuteChangeSet", note).await;
            let mut entry = status_entry(kind, name, UPDATE_REQUESTED, None, self.recorded, self.attempts);
            if self.gate.approved(name, self.hash) {
                entry.applied_plan = Some(self.plan.clone());
            }
            return Ok((Progress::Pending, entry));
        }
        if matches!(action, approval::Action::Execute) {
            // Approved, and CloudFormation is still computing the change set: run it next time.
            let mut entry = status_entry(kind, name, &self.current, None, self.recorded, self.attempts);
            entry.pending_update = Some(summary);
            return Ok((Progress::Pending, entry));
        }
        let command = self.gate.approve_command(&self.plan);
        let line = approval::describe(name, &summary);
        let announced =
            previous.as_ref().is_some_and(|p| p.plan_hash == self.plan && p.added + p.modified + p.removed > 0);
        if !announced && !view.computing() {
            let note = format!("{line}; plan {}; approve with: {command}", self.plan);
            self.subject.event(EventType::Normal, "UpdatePending", "CreateChangeSet", note).await;
        }
        let problem = match &action {
            approval::Action::Hold(approval::Hold::Stale { approved }) => Some((
                "StaleApproval",
                format!(
                    "the approved plan {approved} is not the pending plan {} of stack {name}: nothing runs; approve with: {command}",
                    self.plan
                ),
            )),
            approval::Action::Hold(approval::Hold::Malformed { value }) => {
                Some(("InvalidApproval", approval::malformed_message(value, Some(&command))))
            }
            _ => None,
        };
        if let Some((reason, note)) = &problem {
            let first = shared.memo.lock().approval_notes.insert(note_key, note.clone()).as_deref() != Some(note);
            if first {
                self.subject.event(EventType::Warning, reason, "ApproveUpdate", note.clone()).await;
            }
        }
        let mut message = match &problem {
            Some((_, note)) => format!("{line}; {note}"),
            None => format!("{line}; waiting for approval of plan {}: {command}", self.plan),
        };
        if let Some(problem) = &self.gate.setting_problem {
            message = format!("{message}; {problem}");
        }
        let mut entry = status_entry(kind, name, &self.current, None, self.recorded, self.attempts);
        entry.pending_update = Some(summary);
        Ok((Progress::AwaitingApproval { message }, entry))
    }
}

fn view_status(current: &Option<String>) -> &str {
    current.as_deref().unwrap_or(CREATE_REQUESTED)
}

fn aws_invalidate(shared: &Shared, aws: &AccountClients, name: &str) {
    shared.stacks.invalidate(&aws.cache_key(), name);
}

/// The S3 URL CloudFormation fetches an uploaded template from. CloudFormation reads it itself,
/// so it is always the public virtual-hosted form of the bucket's region, whatever endpoint this
/// process talks to (bucket names are `<account>-g8s-<id>`: no dots, valid as a host label).
fn template_url(region: &str, bucket: &str, key: &str) -> String {
    let suffix = if region.starts_with("cn-") { "amazonaws.com.cn" } else { "amazonaws.com" };
    format!("https://{bucket}.s3.{region}.{suffix}/{key}")
}

/// Where a deletion stands.
#[derive(Debug, Clone)]
pub enum Deletion {
    /// The stack is gone.
    Gone,
    /// Deletion is under way.
    Pending,
    /// The last delete failed; it is retried after `retry_after`.
    Failed {
        /// What failed, naming the resources.
        message: String,
        /// When to try again.
        retry_after: Duration,
    },
}

impl Deletion {
    /// What a teardown does next: `None` goes on (the stack is gone); otherwise the outcome to
    /// stop with, keeping the finalizer and looking again after `poll` (under way) or the retry
    /// delay (failed), and the failure to record in the stack's entry.
    pub fn stop(self, poll: Duration) -> (Option<operatorkit::Outcome>, Option<String>) {
        let keep = |after| operatorkit::Outcome::cancel_reconciliation().keep_finalizer().requeue_after(after);
        match self {
            Deletion::Gone => (None, None),
            Deletion::Pending => (Some(keep(poll)), None),
            Deletion::Failed { message, retry_after } => (Some(keep(retry_after)), Some(message)),
        }
    }
}

/// The stack must be gone: lift termination protection, delete, wait; a failed delete is
/// reported naming the resources that failed and retried with backoff. Returns the stack's
/// status entry to record (`DELETE_COMPLETE` once gone).
pub async fn delete<K>(
    shared: &Shared,
    aws: &AccountClients,
    obj: &K,
    kind: StackKind,
    name: &str,
    recorded: Option<&StatusEntry>,
    owner_uid: &str,
) -> Result<(Deletion, StatusEntry), ResourceError>
where
    K: kube::Resource<DynamicType = ()>,
{
    let subject = Subject { shared, aws, obj, name };
    let observed = timed(shared, kind, "describe", shared.stacks.get(&aws.cache_key(), aws.cfn.as_ref(), name)).await?;
    if let Some(view) = &observed {
        subject.note_transition(kind, view.status.as_str(), recorded).await;
    }
    let step = plan_delete(observed.as_ref());
    let attempts = recorded.and_then(|r| r.attempts);
    let current = observed.as_ref().map(|v| v.status.as_str().to_string());
    let reason = observed.as_ref().and_then(|v| v.status_reason.clone());
    let entry = |status: &str, reason: Option<String>, attempts: Option<u32>| {
        status_entry(kind, name, status, reason, recorded, attempts)
    };
    // A stack that carries another cluster's UID is not this cluster's to delete: it is left
    // alone, and for this cluster it is as good as gone.
    if let Some(view) = observed.as_ref().filter(|v| !aws_stacks::state::owned_by(v, owner_uid)) {
        let holder = view.tags.get(aws_stacks::names::tags::CLUSTER_UID).cloned().unwrap_or_default();
        let why = format!(
            "stack {name} carries tag {}={holder}, not this cluster's UID: another cluster's, left alone",
            aws_stacks::names::tags::CLUSTER_UID
        );
        if recorded.is_none_or(|r| r.reason.as_deref() != Some(why.as_str())) {
            subject.event(EventType::Warning, "CFDeleteRefused", "DeleteStack", why.clone()).await;
        }
        return Ok((Deletion::Gone, entry(view.status.as_str(), Some(why), None)));
    }
    Ok(match step {
        DeleteStep::Gone => {
            let announced = recorded.is_some_and(|r| r.status != "DELETE_COMPLETE");
            if observed.is_some() || announced {
                let note = format!("stack {name} is deleted");
                subject.event(EventType::Normal, "CFDeleted", "DELETE_COMPLETE", note).await;
            }
            (Deletion::Gone, entry("DELETE_COMPLETE", None, None))
        }
        DeleteStep::Wait { status } => (Deletion::Pending, entry(&status, reason, attempts)),
        DeleteStep::LiftProtection => {
            timed(shared, kind, "lift_protection", aws.cfn.set_termination_protection(name, false)).await?;
            aws_invalidate(shared, aws, name);
            let note = format!("termination protection of stack {name} lifted");
            subject.event(EventType::Normal, "CFDelete", "UpdateTerminationProtection", note).await;
            (Deletion::Pending, entry(view_status(&current), reason, attempts))
        }
        DeleteStep::Delete => {
            match timed(shared, kind, "delete", aws.cfn.delete(name)).await {
                Ok(()) | Err(CfnError::NotFound(_)) => {}
                Err(e) => {
                    aws_invalidate(shared, aws, name);
                    return Err(e.into());
                }
            }
            aws_invalidate(shared, aws, name);
            let note = format!("deleting stack {name} in account {}", aws.account_id);
            subject.event(EventType::Normal, "CFDeleteRequested", "DeleteStack", note).await;
            (Deletion::Pending, entry(DELETE_REQUESTED, None, attempts))
        }
        DeleteStep::RetryFailedDelete { reason } => {
            let status = "DELETE_FAILED";
            let pace = pace(recorded, status, jiff::Timestamp::now());
            // The failed resources are looked up once per failure and kept in the entry.
            let names = if pace.first_seen {
                let failed =
                    timed(shared, kind, "describe_resources", aws.cfn.failed_resources(name)).await.unwrap_or_default();
                if failed.is_empty() {
                    reason.clone().unwrap_or_else(|| "no reason given".into())
                } else {
                    failed.iter().map(|(id, why)| format!("{id} ({why})")).collect::<Vec<_>>().join(", ")
                }
            } else {
                failure_reason(None, recorded)
            };
            let message = format!("deleting stack {name} failed: {names}");
            if pace.first_seen {
                let note = format!("{message}; attempt {} failed, deleting again at {}", pace.attempts, pace.due);
                subject.event(EventType::Warning, "CFDeleteFailed", "DeleteStack", note).await;
            }
            match pace.wait {
                Some(wait) => (
                    Deletion::Failed {
                        message: format!("{message}; attempt {} failed, deleting again at {}", pace.attempts, pace.due),
                        retry_after: wait,
                    },
                    entry(status, Some(names), Some(pace.attempts)),
                ),
                None => {
                    timed(shared, kind, "delete", aws.cfn.delete(name)).await?;
                    aws_invalidate(shared, aws, name);
                    let note = format!("deleting stack {name} again (attempt {})", pace.attempts + 1);
                    subject.event(EventType::Normal, "CFDeleteRequested", "DeleteStack", note).await;
                    (Deletion::Pending, entry(DELETE_REQUESTED, Some(names), Some(pace.attempts)))
                }
            }
        }
        DeleteStep::ContinueRollback => {
            timed(shared, kind, "continue_rollback", aws.cfn.continue_update_rollback(name)).await?;
            aws_invalidate(shared, aws, name);
            let note = format!("stack {name} is UPDATE_ROLLBACK_FAILED; continuing the rollback before deleting it");
            subject.event(EventType::Warning, "CFContinueRollback", "ContinueUpdateRollback", note).await;
            (Deletion::Pending, entry(view_status(&current), reason, attempts))
        }
    })
}

/// Whether a stack status string counts as settled and usable.
pub fn usable(status: &str) -> bool {
    StackStatus::parse(status).is_usable()
}

#[cfg(test)]
mod tests {
    use super::template_url;

    #[test]
    fn template_urls_are_virtual_hosted_in_the_bucket_region_and_partition() {
        assert_eq!(
            template_url("eu-central-1", "123456789012-g8s-a1b2c", "cloudformation/cluster-a1b2c-tccp/ab.json"),
            "https://123456789012-g8s-a1b2c.s3.eu-central-1.amazonaws.com/cloudformation/cluster-a1b2c-tccp/ab.json"
        );
        assert_eq!(template_url("cn-north-1", "b", "k"), "https://b.s3.cn-north-1.amazonaws.com.cn/k");
    }
}

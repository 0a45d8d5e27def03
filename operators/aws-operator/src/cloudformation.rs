//! The operator's view of CloudFormation: a small trait with one implementation on the AWS SDK
//! and one in-memory fake, the stack state machine deciding what to do with a stack, and a
//! per-account cache of `DescribeStacks`.
//!
//! # State machine
//!
//! [`plan_ensure`] and [`plan_delete`] are pure: given the observed stack (or its absence) and
//! what the operator wants, they return one [`EnsureStep`] / [`DeleteStep`]. The resources
//! execute the step and requeue; no call ever waits for a stack to settle, so a slow stack never
//! blocks a worker (upstream blocked in SDK waiters for up to an hour, reference §13 item 1).
//!
//! | observed | ensure | delete |
//! | --- | --- | --- |
//! | missing | create | done |
//! | `*_IN_PROGRESS` | wait (requeue) | wait (requeue) |
//! | `CREATE_COMPLETE`, `UPDATE_COMPLETE`, `IMPORT_*_COMPLETE` | update if the template hash differs, else ready | lift termination protection, delete |
//! | `UPDATE_ROLLBACK_COMPLETE` | ready if the template hash matches; else our update failed: update again after a backoff | lift termination protection, delete |
//! | `ROLLBACK_COMPLETE` (a failed create) | delete after a backoff, then create again | delete |
//! | `UPDATE_ROLLBACK_FAILED` | continue the update rollback | continue the rollback, then delete |
//! | `CREATE_FAILED`, `ROLLBACK_FAILED`, `DELETE_FAILED`, `IMPORT_ROLLBACK_FAILED` | failed: needs the delete path or a human | delete again after a backoff, naming the failed resources |
//!
//! Change detection compares the hash of the desired template with the `TemplateHash` output of
//! the deployed one: any difference in the rendered template (and therefore in any input that
//! reaches it) updates the stack, not only a version bump (upstream compared a handful of
//! outputs, reference §5.9).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use parking_lot::Mutex;

/// The output every stack carries: the sha256 of its own template without this output.
pub const TEMPLATE_HASH_OUTPUT: &str = "TemplateHash";

/// A stack status, parsed from CloudFormation's string.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum StackStatus {
    /// `CREATE_IN_PROGRESS`, `UPDATE_IN_PROGRESS`, `ROLLBACK_IN_PROGRESS`, … — any status that
    /// ends in `_IN_PROGRESS`.
    InProgress(String),
    /// `CREATE_COMPLETE`.
    CreateComplete,
    /// `UPDATE_COMPLETE`.
    UpdateComplete,
    /// `UPDATE_ROLLBACK_COMPLETE`: an update failed and was rolled back; the stack works with
    /// its previous template.
    UpdateRollbackComplete,
    /// `ROLLBACK_COMPLETE`: the create failed and was rolled back; the stack holds nothing and
    /// can only be deleted.
    RollbackComplete,
    /// `UPDATE_ROLLBACK_FAILED`: needs `ContinueUpdateRollback`.
    UpdateRollbackFailed,
    /// `DELETE_FAILED`.
    DeleteFailed,
    /// `DELETE_COMPLETE` (only visible by stack id).
    DeleteComplete,
    /// `CREATE_FAILED`, `ROLLBACK_FAILED`, `IMPORT_ROLLBACK_FAILED`, or anything unknown.
    Failed(String),
    /// `IMPORT_COMPLETE`, `IMPORT_ROLLBACK_COMPLETE`: usable.
    ImportComplete(String),
}

impl StackStatus {
    /// Parse CloudFormation's status string.
    pub fn parse(s: &str) -> StackStatus {
        match s {
            "CREATE_COMPLETE" => StackStatus::CreateComplete,
            "UPDATE_COMPLETE" => StackStatus::UpdateComplete,
            "UPDATE_ROLLBACK_COMPLETE" => StackStatus::UpdateRollbackComplete,
            "ROLLBACK_COMPLETE" => StackStatus::RollbackComplete,
            "UPDATE_ROLLBACK_FAILED" => StackStatus::UpdateRollbackFailed,
            "DELETE_FAILED" => StackStatus::DeleteFailed,
            "DELETE_COMPLETE" => StackStatus::DeleteComplete,
            "IMPORT_COMPLETE" | "IMPORT_ROLLBACK_COMPLETE" => StackStatus::ImportComplete(s.to_string()),
            s if s.ends_with("_IN_PROGRESS") => StackStatus::InProgress(s.to_string()),
            s => StackStatus::Failed(s.to_string()),
        }
    }

    /// The CloudFormation spelling.
    pub fn as_str(&self) -> &str {
        match self {
            StackStatus::InProgress(s) | StackStatus::Failed(s) | StackStatus::ImportComplete(s) => s,
            StackStatus::CreateComplete => "CREATE_COMPLETE",
            StackStatus::UpdateComplete => "UPDATE_COMPLETE",
            StackStatus::UpdateRollbackComplete => "UPDATE_ROLLBACK_COMPLETE",
            StackStatus::RollbackComplete => "ROLLBACK_COMPLETE",
            StackStatus::UpdateRollbackFailed => "UPDATE_ROLLBACK_FAILED",
            StackStatus::DeleteFailed => "DELETE_FAILED",
            StackStatus::DeleteComplete => "DELETE_COMPLETE",
        }
    }

    /// Whether the stack's outputs describe working resources (upstream's "outputs accessible"
    /// list, reference §5.1).
    pub fn is_usable(&self) -> bool {
        matches!(
            self,
            StackStatus::CreateComplete
                | StackStatus::UpdateComplete
                | StackStatus::UpdateRollbackComplete
                | StackStatus::ImportComplete(_)
        )
    }
}

impl fmt::Display for StackStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A stack as `DescribeStacks` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StackView {
    /// The stack name.
    pub name: String,
    /// The stack id (ARN).
    pub id: String,
    /// The status.
    pub status: StackStatus,
    /// CloudFormation's reason for the status, if any.
    pub status_reason: Option<String>,
    /// Output key → value.
    pub outputs: BTreeMap<String, String>,
    /// Stack tags.
    pub tags: BTreeMap<String, String>,
    /// Whether termination protection is on.
    pub termination_protection: bool,
}

impl StackView {
    /// The hash of the deployed template, from its `TemplateHash` output.
    pub fn template_hash(&self) -> Option<&str> {
        self.outputs.get(TEMPLATE_HASH_OUTPUT).map(String::as_str)
    }
}

/// What the operator asks CloudFormation to create or update.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StackRequest {
    /// The stack name.
    pub name: String,
    /// The template body, or `None` when it is passed by [`StackRequest::template_url`].
    pub template_body: Option<String>,
    /// The template's URL in the cluster bucket (templates over 51,200 bytes).
    pub template_url: Option<String>,
    /// Stack tags.
    pub tags: BTreeMap<String, String>,
    /// Whether the template creates named IAM resources.
    pub named_iam: bool,
    /// Whether termination protection is turned on at create.
    pub termination_protection: bool,
}

/// An error from CloudFormation, classified by what the state machine needs to know.
#[derive(Debug, thiserror::Error)]
pub enum CfnError {
    /// The stack does not exist.
    #[error("stack {0} does not exist")]
    NotFound(String),
    /// The stack already exists (a create raced with another, or a retried create).
    #[error("stack {0} already exists")]
    AlreadyExists(String),
    /// An update found nothing to change.
    #[error("stack {0}: no updates are to be performed")]
    NoUpdates(String),
    /// Any other API error: code and message as AWS sent them.
    #[error("CloudFormation {operation} {stack}: {code}: {message}")]
    Api {
        /// The operation.
        operation: &'static str,
        /// The stack.
        stack: String,
        /// The AWS error code.
        code: String,
        /// The AWS message.
        message: String,
    },
    /// Transport or client failure.
    #[error("CloudFormation {operation}: {message}")]
    Transport {
        /// The operation.
        operation: &'static str,
        /// What failed.
        message: String,
    },
}

impl operatorkit::ErrorKind for CfnError {
    fn kind(&self) -> std::borrow::Cow<'static, str> {
        std::borrow::Cow::Borrowed(match self {
            CfnError::NotFound(_) => "StackNotFound",
            CfnError::AlreadyExists(_) => "StackAlreadyExists",
            CfnError::NoUpdates(_) => "StackUnchanged",
            CfnError::Api { .. } => "CloudFormationError",
            CfnError::Transport { .. } => "CloudFormationUnreachable",
        })
    }
}

/// The CloudFormation calls the operator makes. One value talks to one account in one region.
pub trait CloudFormation: Send + Sync {
    /// Every stack of the account and region (one paginated `DescribeStacks`).
    fn describe_all(&self) -> BoxFuture<'_, Result<Vec<StackView>, CfnError>>;
    /// One stack by name; `Ok(None)` when it does not exist.
    fn describe(&self, name: &str) -> BoxFuture<'_, Result<Option<StackView>, CfnError>>;
    /// `CreateStack`.
    fn create<'a>(&'a self, request: &'a StackRequest) -> BoxFuture<'a, Result<(), CfnError>>;
    /// `UpdateStack`.
    fn update<'a>(&'a self, request: &'a StackRequest) -> BoxFuture<'a, Result<(), CfnError>>;
    /// `UpdateTerminationProtection`.
    fn set_termination_protection<'a>(&'a self, name: &'a str, on: bool) -> BoxFuture<'a, Result<(), CfnError>>;
    /// `DeleteStack`.
    fn delete<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<(), CfnError>>;
    /// `ContinueUpdateRollback`.
    fn continue_update_rollback<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<(), CfnError>>;
    /// The logical ids of resources whose deletion failed, with their reasons
    /// (`DescribeStackResources`).
    fn failed_resources<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Vec<(String, String)>, CfnError>>;
}

/// What to do with a stack that should exist.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EnsureStep {
    /// It does not exist: create it.
    Create,
    /// It is transitioning: look again later.
    Wait {
        /// The status seen.
        status: String,
    },
    /// It is usable but its template differs from the desired one: update it.
    Update {
        /// The deployed hash (`None` when the stack has no `TemplateHash` output).
        deployed: Option<String>,
    },
    /// An update failed and was rolled back (`UPDATE_ROLLBACK_COMPLETE`), and the template still
    /// differs: report the failure and update again after a backoff.
    RetryRolledBackUpdate {
        /// The deployed hash.
        deployed: Option<String>,
    },
    /// It is usable and current.
    Ready,
    /// A create failed and was rolled back: delete it so that it can be created again.
    DeleteFailedCreate {
        /// CloudFormation's reason for the failure.
        reason: Option<String>,
    },
    /// An update rollback failed: continue it.
    ContinueRollback,
    /// The stack is in a state the operator cannot repair on its own.
    Failed {
        /// The status.
        status: String,
        /// CloudFormation's reason.
        reason: Option<String>,
    },
}

/// Decide what to do with a stack that should exist with template hash `desired_hash`.
/// `may_update` is false where an update must wait (for example node pools while masters roll)
/// or is never done (TCCPI, TCNPF).
pub fn plan_ensure(observed: Option<&StackView>, desired_hash: &str, may_update: bool) -> EnsureStep {
    let Some(stack) = observed else {
        return EnsureStep::Create;
    };
    match &stack.status {
        StackStatus::InProgress(s) => EnsureStep::Wait { status: s.clone() },
        StackStatus::DeleteComplete => EnsureStep::Create,
        StackStatus::RollbackComplete => EnsureStep::DeleteFailedCreate { reason: stack.status_reason.clone() },
        StackStatus::UpdateRollbackFailed => EnsureStep::ContinueRollback,
        StackStatus::DeleteFailed | StackStatus::Failed(_) => {
            EnsureStep::Failed { status: stack.status.as_str().to_string(), reason: stack.status_reason.clone() }
        }
        status if status.is_usable() => {
            let deployed = stack.template_hash().map(str::to_string);
            if stack.template_hash() == Some(desired_hash) || !may_update {
                EnsureStep::Ready
            } else if *status == StackStatus::UpdateRollbackComplete {
                EnsureStep::RetryRolledBackUpdate { deployed }
            } else {
                EnsureStep::Update { deployed }
            }
        }
        _ => EnsureStep::Wait { status: stack.status.as_str().to_string() },
    }
}

/// What to do with a stack that should be gone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeleteStep {
    /// It is gone.
    Gone,
    /// It is transitioning: look again later.
    Wait {
        /// The status seen.
        status: String,
    },
    /// Termination protection is on: lift it first.
    LiftProtection,
    /// Delete it.
    Delete,
    /// A previous delete failed: delete again (after backoff), naming what failed.
    RetryFailedDelete {
        /// CloudFormation's reason.
        reason: Option<String>,
    },
    /// An update rollback failed: continue it before the stack can be deleted.
    ContinueRollback,
}

/// Decide what to do with a stack that should be deleted.
pub fn plan_delete(observed: Option<&StackView>) -> DeleteStep {
    let Some(stack) = observed else {
        return DeleteStep::Gone;
    };
    match &stack.status {
        StackStatus::DeleteComplete => DeleteStep::Gone,
        StackStatus::InProgress(s) => DeleteStep::Wait { status: s.clone() },
        StackStatus::UpdateRollbackFailed => DeleteStep::ContinueRollback,
        _ if stack.termination_protection => DeleteStep::LiftProtection,
        StackStatus::DeleteFailed => DeleteStep::RetryFailedDelete { reason: stack.status_reason.clone() },
        _ => DeleteStep::Delete,
    }
}

/// The requeue interval while a stack transitions.
pub const TRANSITION_POLL: Duration = Duration::from_secs(10);

/// Backoff between attempts at a failure the operator repairs by itself (a rolled-back update,
/// a rolled-back create, a failed delete): 30 s doubling per attempt, capped at 10 minutes.
/// `attempt` counts from 0.
pub fn retry_backoff(attempt: u32) -> Duration {
    let secs = 30u64.saturating_mul(1u64 << attempt.min(5));
    Duration::from_secs(secs.min(600))
}

/// A per-account cache of `DescribeStacks`: all stacks of an account and region are read with one
/// paginated call and shared by every cluster in that account until the listing expires after
/// [`StackCache::idle_ttl`], so idle clusters cost one listing per account per idle period
/// instead of one `DescribeStacks` per stack per resync.
///
/// What changes is read alone, by name: a stack written since it was read
/// ([`StackCache::invalidate`]), and a transitioning stack whose view is older than
/// [`StackCache::busy_ttl`]. Creating N clusters in one account therefore costs calls linear in
/// N; forgetting the whole listing on every write made the next read of every cluster list all
/// N clusters' stacks again, N² pages in all.
#[derive(Debug)]
pub struct StackCache {
    idle_ttl: Duration,
    busy_ttl: Duration,
    entries: Mutex<HashMap<String, Arc<tokio::sync::Mutex<Entry>>>>,
}

#[derive(Debug, Default)]
struct Entry {
    listed: Option<Instant>,
    /// Each stack with the time it was read.
    stacks: HashMap<String, (StackView, Instant)>,
    /// Stacks written since they were last read.
    stale: HashSet<String>,
}

impl StackCache {
    /// A cache whose listings live `idle_ttl`, and whose views of transitioning stacks live
    /// `busy_ttl`.
    pub fn new(idle_ttl: Duration, busy_ttl: Duration) -> Self {
        Self { idle_ttl, busy_ttl, entries: Mutex::new(HashMap::new()) }
    }

    /// The expiry of an account's listing.
    pub fn idle_ttl(&self) -> Duration {
        self.idle_ttl
    }

    /// The expiry of a transitioning stack's view.
    pub fn busy_ttl(&self) -> Duration {
        self.busy_ttl
    }

    fn entry(&self, account: &str) -> Arc<tokio::sync::Mutex<Entry>> {
        self.entries.lock().entry(account.to_string()).or_default().clone()
    }

    /// The stack `name` of `account` (a key naming account and region): from the account's
    /// listing, listed again through `cfn` when missing or expired; a stack written since it
    /// was read, or transitioning and read longer than [`StackCache::busy_ttl`] ago, is
    /// described alone. Concurrent callers for one account share one listing.
    pub async fn get(
        &self,
        account: &str,
        cfn: &dyn CloudFormation,
        name: &str,
    ) -> Result<Option<StackView>, CfnError> {
        let entry = self.entry(account);
        let mut e = entry.lock().await;
        let listed = e.listed.is_some_and(|t| t.elapsed() < self.idle_ttl);
        if !listed {
            let stacks = cfn.describe_all().await?;
            let now = Instant::now();
            e.stacks = stacks.into_iter().map(|s| (s.name.clone(), (s, now))).collect();
            e.listed = Some(now);
            e.stale.clear();
        } else {
            let moving = e.stacks.get(name).is_some_and(|(view, read)| {
                matches!(view.status, StackStatus::InProgress(_)) && read.elapsed() >= self.busy_ttl
            });
            if e.stale.contains(name) || moving {
                match cfn.describe(name).await? {
                    Some(view) => e.stacks.insert(name.to_string(), (view, Instant::now())),
                    None => e.stacks.remove(name),
                };
                e.stale.remove(name);
            }
        }
        Ok(e.stacks.get(name).map(|(view, _)| view.clone()))
    }

    /// Mark stack `name` of `account` stale: its next read describes it. Called after every
    /// write to it.
    pub fn invalidate(&self, account: &str, name: &str) {
        let entry = self.entry(account);
        // A reader holds the lock only across one call; mark without waiting when possible,
        // and otherwise after it.
        if let Ok(mut e) = entry.try_lock() {
            e.stale.insert(name.to_string());
            return;
        }
        let name = name.to_string();
        tokio::spawn(async move {
            entry.lock().await.stale.insert(name);
        });
    }
}

/// How many stacks one page of the fake's listing holds (each page counts as one
/// `DescribeStacks` call).
pub const FAKE_PAGE_SIZE: usize = 100;

/// An in-memory CloudFormation for tests of the state machine and of resources: it keeps stacks
/// in a map, lets a test force any status (including the ones moto cannot produce), and counts
/// calls (a listing counts one call per page of [`FAKE_PAGE_SIZE`] stacks).
#[derive(Debug, Default)]
pub struct FakeCloudFormation {
    state: Mutex<FakeState>,
}

#[derive(Debug, Default)]
struct FakeState {
    stacks: BTreeMap<String, (StackView, StackRequest)>,
    calls: BTreeMap<&'static str, usize>,
    fail_next: Vec<(&'static str, CfnErrorSpec)>,
    failed_resources: BTreeMap<String, Vec<(String, String)>>,
    /// Outputs and request before the last update, for [`FakeCloudFormation::roll_back`].
    before_update: BTreeMap<String, (BTreeMap<String, String>, StackRequest)>,
    hold_deletes: bool,
}

/// An error a [`FakeCloudFormation`] returns for the next call of an operation.
#[derive(Clone, Debug)]
pub struct CfnErrorSpec {
    /// The AWS error code.
    pub code: String,
    /// The message.
    pub message: String,
}

impl FakeCloudFormation {
    /// An empty fake.
    pub fn new() -> Self {
        Self::default()
    }

    /// Force a stack's status (and reason).
    pub fn set_status(&self, name: &str, status: &str, reason: Option<&str>) {
        if let Some((view, _)) = self.state.lock().stacks.get_mut(name) {
            view.status = StackStatus::parse(status);
            view.status_reason = reason.map(str::to_string);
        }
    }

    /// Undo the last update of `name` as CloudFormation's rollback does: the outputs and
    /// template of before come back (set the status with [`FakeCloudFormation::set_status`]).
    pub fn roll_back(&self, name: &str) {
        let mut s = self.state.lock();
        if let Some((outputs, request)) = s.before_update.remove(name)
            && let Some((view, req)) = s.stacks.get_mut(name)
        {
            view.outputs = outputs;
            *req = request;
        }
    }

    /// While `on`, a delete leaves the stack in `DELETE_IN_PROGRESS` instead of removing it,
    /// so that a test can fail it with [`FakeCloudFormation::set_status`].
    pub fn hold_deletes(&self, on: bool) {
        self.state.lock().hold_deletes = on;
    }

    /// Record resources whose deletion failed.
    pub fn set_failed_resources(&self, name: &str, resources: Vec<(String, String)>) {
        self.state.lock().failed_resources.insert(name.to_string(), resources);
    }

    /// Make the next call of `operation` fail.
    pub fn fail_next(&self, operation: &'static str, code: &str, message: &str) {
        self.state.lock().fail_next.push((operation, CfnErrorSpec { code: code.into(), message: message.into() }));
    }

    /// How many times `operation` was called.
    pub fn calls(&self, operation: &str) -> usize {
        self.state.lock().calls.get(operation).copied().unwrap_or(0)
    }

    /// The stack as stored.
    pub fn stack(&self, name: &str) -> Option<StackView> {
        self.state.lock().stacks.get(name).map(|(v, _)| v.clone())
    }

    /// The last request that created or updated `name`.
    pub fn request(&self, name: &str) -> Option<StackRequest> {
        self.state.lock().stacks.get(name).map(|(_, r)| r.clone())
    }

    fn begin(&self, operation: &'static str, stack: &str) -> Result<(), CfnError> {
        let mut s = self.state.lock();
        *s.calls.entry(operation).or_default() += 1;
        if let Some(i) = s.fail_next.iter().position(|(op, _)| *op == operation) {
            let (_, spec) = s.fail_next.remove(i);
            return Err(CfnError::Api { operation, stack: stack.to_string(), code: spec.code, message: spec.message });
        }
        Ok(())
    }

    fn outputs_of(request: &StackRequest) -> BTreeMap<String, String> {
        // The fake reads literal output values from the template, which is what the operator's
        // own templates use for their version and hash outputs.
        let body = request.template_body.as_deref().unwrap_or("{}");
        let mut out = BTreeMap::new();
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(body)
            && let Some(outputs) = v.get("Outputs").and_then(|o| o.as_object())
        {
            for (k, o) in outputs {
                if let Some(s) = o.get("Value").and_then(|v| v.as_str()) {
                    out.insert(k.clone(), s.to_string());
                }
            }
        }
        out
    }
}

impl CloudFormation for FakeCloudFormation {
    fn describe_all(&self) -> BoxFuture<'_, Result<Vec<StackView>, CfnError>> {
        Box::pin(async move {
            // One call per page of [`FAKE_PAGE_SIZE`] stacks, as a paginated listing costs.
            let pages = self.state.lock().stacks.len().div_ceil(FAKE_PAGE_SIZE).max(1);
            for _ in 0..pages {
                self.begin("DescribeStacks", "")?;
            }
            Ok(self.state.lock().stacks.values().map(|(v, _)| v.clone()).collect())
        })
    }

    fn describe(&self, name: &str) -> BoxFuture<'_, Result<Option<StackView>, CfnError>> {
        let name = name.to_string();
        Box::pin(async move {
            self.begin("DescribeStacks", &name)?;
            Ok(self.stack(&name))
        })
    }

    fn create<'a>(&'a self, request: &'a StackRequest) -> BoxFuture<'a, Result<(), CfnError>> {
        Box::pin(async move {
            self.begin("CreateStack", &request.name)?;
            let mut s = self.state.lock();
            if s.stacks.contains_key(&request.name) {
                return Err(CfnError::AlreadyExists(request.name.clone()));
            }
            let view = StackView {
                name: request.name.clone(),
                id: format!("arn:aws:cloudformation:fake:000000000000:stack/{}/1", request.name),
                status: StackStatus::CreateComplete,
                status_reason: None,
                outputs: Self::outputs_of(request),
                tags: request.tags.clone(),
                termination_protection: request.termination_protection,
            };
            s.stacks.insert(request.name.clone(), (view, request.clone()));
            Ok(())
        })
    }

    fn update<'a>(&'a self, request: &'a StackRequest) -> BoxFuture<'a, Result<(), CfnError>> {
        Box::pin(async move {
            self.begin("UpdateStack", &request.name)?;
            let mut s = self.state.lock();
            let Some((view, req)) = s.stacks.get_mut(&request.name) else {
                return Err(CfnError::NotFound(request.name.clone()));
            };
            if req.template_body == request.template_body && req.tags == request.tags {
                return Err(CfnError::NoUpdates(request.name.clone()));
            }
            let before = (view.outputs.clone(), req.clone());
            view.status = StackStatus::UpdateComplete;
            view.outputs = Self::outputs_of(request);
            view.tags = request.tags.clone();
            *req = request.clone();
            s.before_update.insert(request.name.clone(), before);
            Ok(())
        })
    }

    fn set_termination_protection<'a>(&'a self, name: &'a str, on: bool) -> BoxFuture<'a, Result<(), CfnError>> {
        Box::pin(async move {
            self.begin("UpdateTerminationProtection", name)?;
            match self.state.lock().stacks.get_mut(name) {
                Some((view, _)) => {
                    view.termination_protection = on;
                    Ok(())
                }
                None => Err(CfnError::NotFound(name.to_string())),
            }
        })
    }

    fn delete<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<(), CfnError>> {
        Box::pin(async move {
            self.begin("DeleteStack", name)?;
            let mut s = self.state.lock();
            if let Some((view, _)) = s.stacks.get(name)
                && view.termination_protection
            {
                return Err(CfnError::Api {
                    operation: "DeleteStack",
                    stack: name.to_string(),
                    code: "ValidationError".into(),
                    message: format!("Stack [{name}] cannot be deleted while TerminationProtection is enabled"),
                });
            }
            if s.hold_deletes {
                if let Some((view, _)) = s.stacks.get_mut(name) {
                    view.status = StackStatus::InProgress("DELETE_IN_PROGRESS".into());
                }
            } else {
                s.stacks.remove(name);
            }
            Ok(())
        })
    }

    fn continue_update_rollback<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<(), CfnError>> {
        Box::pin(async move {
            self.begin("ContinueUpdateRollback", name)?;
            match self.state.lock().stacks.get_mut(name) {
                Some((view, _)) => {
                    view.status = StackStatus::UpdateRollbackComplete;
                    Ok(())
                }
                None => Err(CfnError::NotFound(name.to_string())),
            }
        })
    }

    fn failed_resources<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Vec<(String, String)>, CfnError>> {
        Box::pin(async move {
            self.begin("DescribeStackResources", name)?;
            Ok(self.state.lock().failed_resources.get(name).cloned().unwrap_or_default())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(status: &str, hash: Option<&str>, protected: bool) -> StackView {
        StackView {
            name: "cluster-a1b2c-tccp".into(),
            id: "id".into(),
            status: StackStatus::parse(status),
            status_reason: Some("because".into()),
            outputs: hash
                .map(|h| BTreeMap::from([(TEMPLATE_HASH_OUTPUT.to_string(), h.to_string())]))
                .unwrap_or_default(),
            tags: BTreeMap::new(),
            termination_protection: protected,
        }
    }

    #[test]
    fn ensure_covers_every_status() {
        assert_eq!(plan_ensure(None, "h", true), EnsureStep::Create);
        for s in [
            "CREATE_IN_PROGRESS",
            "UPDATE_IN_PROGRESS",
            "UPDATE_COMPLETE_CLEANUP_IN_PROGRESS",
            "ROLLBACK_IN_PROGRESS",
            "DELETE_IN_PROGRESS",
            "UPDATE_ROLLBACK_IN_PROGRESS",
            "REVIEW_IN_PROGRESS",
        ] {
            assert_eq!(
                plan_ensure(Some(&view(s, Some("h"), true)), "h", true),
                EnsureStep::Wait { status: s.into() },
                "{s}"
            );
        }
        for s in ["CREATE_COMPLETE", "UPDATE_COMPLETE", "UPDATE_ROLLBACK_COMPLETE", "IMPORT_COMPLETE"] {
            assert_eq!(plan_ensure(Some(&view(s, Some("h"), true)), "h", true), EnsureStep::Ready, "{s}");
            let update = if s == "UPDATE_ROLLBACK_COMPLETE" {
                // Our last update failed: retried after a backoff, not at once.
                EnsureStep::RetryRolledBackUpdate { deployed: Some("old".into()) }
            } else {
                EnsureStep::Update { deployed: Some("old".into()) }
            };
            assert_eq!(plan_ensure(Some(&view(s, Some("old"), true)), "h", true), update, "{s}");
            assert_eq!(plan_ensure(Some(&view(s, Some("old"), true)), "h", false), EnsureStep::Ready, "{s}");
        }
        // A stack without the hash output (made by an older operator) is updated.
        assert_eq!(
            plan_ensure(Some(&view("CREATE_COMPLETE", None, true)), "h", true),
            EnsureStep::Update { deployed: None }
        );
        assert_eq!(
            plan_ensure(Some(&view("ROLLBACK_COMPLETE", None, true)), "h", true),
            EnsureStep::DeleteFailedCreate { reason: Some("because".into()) }
        );
        assert_eq!(
            plan_ensure(Some(&view("UPDATE_ROLLBACK_FAILED", Some("h"), true)), "h", true),
            EnsureStep::ContinueRollback
        );
        for s in ["CREATE_FAILED", "ROLLBACK_FAILED", "DELETE_FAILED", "IMPORT_ROLLBACK_FAILED"] {
            assert_eq!(
                plan_ensure(Some(&view(s, Some("h"), true)), "h", true),
                EnsureStep::Failed { status: s.into(), reason: Some("because".into()) },
                "{s}"
            );
        }
        assert_eq!(plan_ensure(Some(&view("DELETE_COMPLETE", None, false)), "h", true), EnsureStep::Create);
    }

    #[test]
    fn delete_lifts_protection_first_and_retries_failures() {
        assert_eq!(plan_delete(None), DeleteStep::Gone);
        assert_eq!(plan_delete(Some(&view("CREATE_COMPLETE", None, true))), DeleteStep::LiftProtection);
        assert_eq!(plan_delete(Some(&view("CREATE_COMPLETE", None, false))), DeleteStep::Delete);
        assert_eq!(plan_delete(Some(&view("ROLLBACK_COMPLETE", None, false))), DeleteStep::Delete);
        assert_eq!(
            plan_delete(Some(&view("DELETE_IN_PROGRESS", None, false))),
            DeleteStep::Wait { status: "DELETE_IN_PROGRESS".into() }
        );
        assert_eq!(
            plan_delete(Some(&view("DELETE_FAILED", None, false))),
            DeleteStep::RetryFailedDelete { reason: Some("because".into()) }
        );
        assert_eq!(plan_delete(Some(&view("DELETE_FAILED", None, true))), DeleteStep::LiftProtection);
        assert_eq!(plan_delete(Some(&view("UPDATE_ROLLBACK_FAILED", None, true))), DeleteStep::ContinueRollback);
        assert_eq!(plan_delete(Some(&view("DELETE_COMPLETE", None, false))), DeleteStep::Gone);
    }

    #[test]
    fn backoff_doubles_and_caps() {
        assert_eq!(retry_backoff(0), Duration::from_secs(30));
        assert_eq!(retry_backoff(1), Duration::from_secs(60));
        assert_eq!(retry_backoff(4), Duration::from_secs(480));
        assert_eq!(retry_backoff(5), Duration::from_secs(600));
        assert_eq!(retry_backoff(40), Duration::from_secs(600));
    }

    /// A request for an empty stack called `name`.
    fn request(name: &str, termination_protection: bool) -> StackRequest {
        StackRequest {
            name: name.into(),
            template_body: Some("{}".into()),
            template_url: None,
            tags: BTreeMap::new(),
            named_iam: false,
            termination_protection,
        }
    }

    #[tokio::test]
    async fn the_cache_lists_an_account_once_and_describes_only_what_was_written() {
        let fake = FakeCloudFormation::new();
        fake.create(&request("s1", true)).await.unwrap();
        fake.create(&request("s2", true)).await.unwrap();
        let cache = StackCache::new(Duration::from_secs(600), Duration::from_secs(5));
        for _ in 0..10 {
            assert!(cache.get("acct/eu-central-1", &fake, "s1").await.unwrap().is_some());
            assert!(cache.get("acct/eu-central-1", &fake, "s3").await.unwrap().is_none());
        }
        assert_eq!(fake.calls("DescribeStacks"), 1);
        // A write to s3 makes s3 alone stale: one describe of s3, the listing stays.
        fake.create(&request("s3", true)).await.unwrap();
        cache.invalidate("acct/eu-central-1", "s3");
        assert!(cache.get("acct/eu-central-1", &fake, "s1").await.unwrap().is_some());
        assert_eq!(fake.calls("DescribeStacks"), 1, "s1 was not written: served from the listing");
        assert!(cache.get("acct/eu-central-1", &fake, "s3").await.unwrap().is_some());
        assert_eq!(fake.calls("DescribeStacks"), 2);
        assert!(cache.get("acct/eu-central-1", &fake, "s3").await.unwrap().is_some());
        assert_eq!(fake.calls("DescribeStacks"), 2, "described once per write");
        // A deleted stack is forgotten.
        fake.set_termination_protection("s2", false).await.unwrap();
        fake.delete("s2").await.unwrap();
        cache.invalidate("acct/eu-central-1", "s2");
        assert!(cache.get("acct/eu-central-1", &fake, "s2").await.unwrap().is_none());
        // Another account is listed separately.
        cache.get("other/eu-central-1", &fake, "s1").await.unwrap();
        assert_eq!(fake.calls("DescribeStacks"), 4);
    }

    #[tokio::test]
    async fn creating_many_stacks_in_one_account_costs_calls_linear_in_their_number() {
        // `n` clusters of three stacks in one account, created round by round as concurrent
        // reconciles do: each reads its next stack, creates it and reads it back.
        let calls = |n: usize| async move {
            let fake = FakeCloudFormation::new();
            let cache = StackCache::new(Duration::from_secs(600), Duration::from_secs(5));
            for kind in ["tccpi", "tccp", "tccpf"] {
                for i in 0..n {
                    let name = format!("cluster-{i}-{kind}");
                    assert!(cache.get("acct", &fake, &name).await.unwrap().is_none());
                    fake.create(&request(&name, true)).await.unwrap();
                    cache.invalidate("acct", &name);
                    assert!(cache.get("acct", &fake, &name).await.unwrap().is_some());
                }
            }
            fake.calls("DescribeStacks")
        };
        let (ten, hundred) = (calls(10).await, calls(100).await);
        assert_eq!(ten, 1 + 30, "one listing, then one describe per write");
        assert_eq!(hundred, 1 + 300);
    }

    #[tokio::test]
    async fn a_transitioning_stack_is_read_again_after_the_busy_lifetime() {
        let fake = FakeCloudFormation::new();
        fake.create(&request("s1", false)).await.unwrap();
        fake.create(&request("s2", false)).await.unwrap();
        fake.set_status("s1", "CREATE_IN_PROGRESS", None);
        let cache = StackCache::new(Duration::from_secs(600), Duration::ZERO);
        cache.get("a", &fake, "s1").await.unwrap();
        fake.set_status("s1", "CREATE_COMPLETE", None);
        let seen = cache.get("a", &fake, "s1").await.unwrap().unwrap();
        assert_eq!(seen.status, StackStatus::CreateComplete);
        assert_eq!(fake.calls("DescribeStacks"), 2);
        // Settled stacks are served from the listing.
        cache.get("a", &fake, "s1").await.unwrap();
        cache.get("a", &fake, "s2").await.unwrap();
        assert_eq!(fake.calls("DescribeStacks"), 2);
    }
}

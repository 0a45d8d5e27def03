//! The operator's view of CloudFormation: a small trait with one implementation on the AWS SDK
//! and one in-memory fake, and a per-account cache of `DescribeStacks`.
//!
//! The state machine itself is pure and lives in [`aws_stacks::state`]; [`super::stacks`]
//! carries out its steps through this trait.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_sdk_cloudformation::error::ProvideErrorMetadata;
use aws_sdk_cloudformation::types::{Capability, Tag};
use aws_smithy_types::error::display::DisplayErrorContext;
use aws_stacks::state::{StackStatus, StackView};
use futures::future::BoxFuture;
use parking_lot::Mutex;

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
    /// The deployed template's body (`GetTemplate`); `Ok(None)` when the stack does not exist.
    fn template<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Option<String>, CfnError>>;
    /// `CreateChangeSet` of type `UPDATE` (named explicitly: moto defaults to `CREATE`) named
    /// `change_set`, for updating the stack to `request`.
    fn create_change_set<'a>(
        &'a self,
        request: &'a StackRequest,
        change_set: &'a str,
    ) -> BoxFuture<'a, Result<(), CfnError>>;
    /// `DescribeChangeSet` (every page); `Ok(None)` when it does not exist.
    fn describe_change_set<'a>(
        &'a self,
        stack: &'a str,
        change_set: &'a str,
    ) -> BoxFuture<'a, Result<Option<ChangeSetView>, CfnError>>;
    /// `ExecuteChangeSet`.
    fn execute_change_set<'a>(&'a self, stack: &'a str, change_set: &'a str) -> BoxFuture<'a, Result<(), CfnError>>;
    /// `DeleteChangeSet`; a change set that does not exist is not an error.
    fn delete_change_set<'a>(&'a self, stack: &'a str, change_set: &'a str) -> BoxFuture<'a, Result<(), CfnError>>;
    /// The names of the change sets of `stack` (`ListChangeSets`, every page).
    fn change_sets<'a>(&'a self, stack: &'a str) -> BoxFuture<'a, Result<Vec<String>, CfnError>>;
}

/// A change set as `DescribeChangeSet` shows it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChangeSetView {
    /// `CREATE_PENDING`, `CREATE_IN_PROGRESS`, `CREATE_COMPLETE`, `FAILED`, …
    pub status: String,
    /// `AVAILABLE`, `UNAVAILABLE`, `EXECUTE_IN_PROGRESS`, `EXECUTE_COMPLETE`, `OBSOLETE`, …
    pub execution_status: String,
    /// Why it failed, when it did.
    pub status_reason: Option<String>,
    /// The resource changes.
    pub changes: Vec<crate::approval::ChangeSetChange>,
}

impl ChangeSetView {
    /// Whether CloudFormation is still computing it.
    pub fn computing(&self) -> bool {
        matches!(self.status.as_str(), "CREATE_PENDING" | "CREATE_IN_PROGRESS")
    }

    /// Whether it can be executed.
    pub fn executable(&self) -> bool {
        self.status == "CREATE_COMPLETE" && self.execution_status == "AVAILABLE"
    }
}

/// [`CloudFormation`] on the AWS SDK.
#[derive(Debug, Clone)]
pub struct SdkCloudFormation {
    client: aws_sdk_cloudformation::Client,
}

impl SdkCloudFormation {
    /// CloudFormation through `client`, which carries the account's credentials and region.
    pub fn new(client: aws_sdk_cloudformation::Client) -> Self {
        Self { client }
    }
}

fn cfn_error<E, R>(operation: &'static str, stack: &str, err: aws_sdk_cloudformation::error::SdkError<E, R>) -> CfnError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    match err.as_service_error() {
        Some(e) => {
            let code = e.code().unwrap_or("Unknown").to_string();
            let message = e.message().unwrap_or_default().to_string();
            if message.contains("does not exist") {
                CfnError::NotFound(stack.to_string())
            } else if code == "AlreadyExistsException" {
                CfnError::AlreadyExists(stack.to_string())
            } else if message.contains("No updates are to be performed") {
                CfnError::NoUpdates(stack.to_string())
            } else {
                CfnError::Api { operation, stack: stack.to_string(), code, message }
            }
        }
        None => CfnError::Transport { operation, message: DisplayErrorContext(&err).to_string() },
    }
}

fn view_of(s: &aws_sdk_cloudformation::types::Stack) -> StackView {
    StackView {
        name: s.stack_name().unwrap_or_default().to_string(),
        id: s.stack_id().unwrap_or_default().to_string(),
        status: StackStatus::parse(s.stack_status().map(|s| s.as_str()).unwrap_or("UNKNOWN")),
        status_reason: s.stack_status_reason().map(str::to_string),
        outputs: s
            .outputs()
            .iter()
            .filter_map(|o| Some((o.output_key()?.to_string(), o.output_value().unwrap_or_default().to_string())))
            .collect(),
        tags: s.tags().iter().filter_map(|t| Some((t.key()?.to_string(), t.value()?.to_string()))).collect(),
        termination_protection: s.enable_termination_protection().unwrap_or(false),
    }
}

fn tags_of(tags: &BTreeMap<String, String>) -> Vec<Tag> {
    tags.iter().map(|(k, v)| Tag::builder().key(k).value(v).build()).collect()
}

impl CloudFormation for SdkCloudFormation {
    fn describe_all(&self) -> BoxFuture<'_, Result<Vec<StackView>, CfnError>> {
        Box::pin(async move {
            let pages = self
                .client
                .describe_stacks()
                .into_paginator()
                .send()
                .try_collect()
                .await
                .map_err(|e| cfn_error("DescribeStacks", "", e))?;
            Ok(pages.iter().flat_map(|p| p.stacks()).map(view_of).collect())
        })
    }

    fn describe(&self, name: &str) -> BoxFuture<'_, Result<Option<StackView>, CfnError>> {
        let name = name.to_string();
        Box::pin(async move {
            match self.client.describe_stacks().stack_name(&name).send().await {
                Ok(out) => Ok(out.stacks().first().map(view_of)),
                Err(e) => match cfn_error("DescribeStacks", &name, e) {
                    CfnError::NotFound(_) => Ok(None),
                    e => Err(e),
                },
            }
        })
    }

    fn create<'a>(&'a self, r: &'a StackRequest) -> BoxFuture<'a, Result<(), CfnError>> {
        Box::pin(async move {
            let mut call = self
                .client
                .create_stack()
                .stack_name(&r.name)
                .set_template_body(r.template_body.clone())
                .set_template_url(r.template_url.clone())
                .set_tags(Some(tags_of(&r.tags)))
                .enable_termination_protection(r.termination_protection);
            if r.named_iam {
                call = call.capabilities(Capability::CapabilityNamedIam);
            }
            call.send().await.map(|_| ()).map_err(|e| cfn_error("CreateStack", &r.name, e))
        })
    }

    fn update<'a>(&'a self, r: &'a StackRequest) -> BoxFuture<'a, Result<(), CfnError>> {
        Box::pin(async move {
            let mut call = self
                .client
                .update_stack()
                .stack_name(&r.name)
                .set_template_body(r.template_body.clone())
                .set_template_url(r.template_url.clone())
                .set_tags(Some(tags_of(&r.tags)));
            if r.named_iam {
                call = call.capabilities(Capability::CapabilityNamedIam);
            }
            call.send().await.map(|_| ()).map_err(|e| cfn_error("UpdateStack", &r.name, e))
        })
    }

    fn set_termination_protection<'a>(&'a self, name: &'a str, on: bool) -> BoxFuture<'a, Result<(), CfnError>> {
        Box::pin(async move {
            self.client
                .update_termination_protection()
                .stack_name(name)
                .enable_termination_protection(on)
                .send()
                .await
                .map(|_| ())
                .map_err(|e| cfn_error("UpdateTerminationProtection", name, e))
        })
    }

    fn delete<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<(), CfnError>> {
        Box::pin(async move {
            self.client
                .delete_stack()
                .stack_name(name)
                .send()
                .await
                .map(|_| ())
                .map_err(|e| cfn_error("DeleteStack", name, e))
        })
    }

    fn continue_update_rollback<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<(), CfnError>> {
        Box::pin(async move {
            self.client
                .continue_update_rollback()
                .stack_name(name)
                .send()
                .await
                .map(|_| ())
                .map_err(|e| cfn_error("ContinueUpdateRollback", name, e))
        })
    }

    fn failed_resources<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Vec<(String, String)>, CfnError>> {
        Box::pin(async move {
            let out = self
                .client
                .describe_stack_resources()
                .stack_name(name)
                .send()
                .await
                .map_err(|e| cfn_error("DescribeStackResources", name, e))?;
            Ok(out
                .stack_resources()
                .iter()
                .filter(|r| r.resource_status().is_some_and(|s| s.as_str() == "DELETE_FAILED"))
                .map(|r| {
                    (
                        r.logical_resource_id().unwrap_or("?").to_string(),
                        r.resource_status_reason().unwrap_or_default().to_string(),
                    )
                })
                .collect())
        })
    }

    fn template<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Option<String>, CfnError>> {
        Box::pin(async move {
            match self.client.get_template().stack_name(name).send().await {
                Ok(out) => Ok(out.template_body().map(str::to_string)),
                Err(e) => match cfn_error("GetTemplate", name, e) {
                    CfnError::NotFound(_) => Ok(None),
                    e => Err(e),
                },
            }
        })
    }

    fn create_change_set<'a>(
        &'a self,
        r: &'a StackRequest,
        change_set: &'a str,
    ) -> BoxFuture<'a, Result<(), CfnError>> {
        Box::pin(async move {
            let mut call = self
                .client
                .create_change_set()
                .stack_name(&r.name)
                .change_set_name(change_set)
                .change_set_type(aws_sdk_cloudformation::types::ChangeSetType::Update)
                .set_template_body(r.template_body.clone())
                .set_template_url(r.template_url.clone())
                .set_tags(Some(tags_of(&r.tags)));
            if r.named_iam {
                call = call.capabilities(Capability::CapabilityNamedIam);
            }
            call.send().await.map(|_| ()).map_err(|e| cfn_error("CreateChangeSet", &r.name, e))
        })
    }

    fn describe_change_set<'a>(
        &'a self,
        stack: &'a str,
        change_set: &'a str,
    ) -> BoxFuture<'a, Result<Option<ChangeSetView>, CfnError>> {
        Box::pin(async move {
            let pages = match self
                .client
                .describe_change_set()
                .stack_name(stack)
                .change_set_name(change_set)
                .include_property_values(true)
                .into_paginator()
                .send()
                .try_collect()
                .await
            {
                Ok(pages) => pages,
                Err(e) => {
                    return match cfn_error("DescribeChangeSet", stack, e) {
                        CfnError::NotFound(_) => Ok(None),
                        e => Err(e),
                    };
                }
            };
            // The status is on every page; the changes are spread over them.
            Ok(pages.first().map(|first| ChangeSetView {
                status: first.status().map(|s| s.as_str().to_string()).unwrap_or_default(),
                execution_status: first.execution_status().map(|s| s.as_str().to_string()).unwrap_or_default(),
                status_reason: first.status_reason().map(str::to_string),
                changes: pages.iter().flat_map(|p| p.changes()).filter_map(change_of).collect(),
            }))
        })
    }

    fn execute_change_set<'a>(&'a self, stack: &'a str, change_set: &'a str) -> BoxFuture<'a, Result<(), CfnError>> {
        Box::pin(async move {
            self.client
                .execute_change_set()
                .stack_name(stack)
                .change_set_name(change_set)
                .send()
                .await
                .map(|_| ())
                .map_err(|e| cfn_error("ExecuteChangeSet", stack, e))
        })
    }

    fn change_sets<'a>(&'a self, stack: &'a str) -> BoxFuture<'a, Result<Vec<String>, CfnError>> {
        Box::pin(async move {
            let pages =
                match self.client.list_change_sets().stack_name(stack).into_paginator().send().try_collect().await {
                    Ok(pages) => pages,
                    Err(e) => {
                        return match cfn_error("ListChangeSets", stack, e) {
                            CfnError::NotFound(_) => Ok(Vec::new()),
                            e => Err(e),
                        };
                    }
                };
            // Filtered here too: an emulator may list other stacks' change sets.
            Ok(pages
                .iter()
                .flat_map(|p| p.summaries())
                .filter(|c| c.stack_name().is_none_or(|n| n == stack))
                .filter_map(|c| c.change_set_name().map(str::to_string))
                .collect())
        })
    }

    fn delete_change_set<'a>(&'a self, stack: &'a str, change_set: &'a str) -> BoxFuture<'a, Result<(), CfnError>> {
        Box::pin(async move {
            match self.client.delete_change_set().stack_name(stack).change_set_name(change_set).send().await {
                Ok(_) => Ok(()),
                Err(e) => match cfn_error("DeleteChangeSet", stack, e) {
                    CfnError::NotFound(_) => Ok(()),
                    e => Err(e),
                },
            }
        })
    }
}

fn change_of(c: &aws_sdk_cloudformation::types::Change) -> Option<crate::approval::ChangeSetChange> {
    let r = c.resource_change()?;
    Some(crate::approval::ChangeSetChange {
        action: r.action().map(|a| a.as_str().to_string()).unwrap_or_default(),
        logical_id: r.logical_resource_id().unwrap_or_default().to_string(),
        resource_type: r.resource_type().unwrap_or_default().to_string(),
        replacement: r.replacement().map(|x| x.as_str().to_string()),
        paths: r
            .details()
            .iter()
            .filter_map(|d| {
                let t = d.target()?;
                // `Properties.<path>` as the template diff writes it: the property path
                // (`/LaunchTemplateData/ImageId`, with IncludePropertyValues) or else its name.
                let attribute = t.attribute().map(|a| a.as_str().to_string()).unwrap_or_default();
                let raw = t.path().or(t.name()).unwrap_or_default().trim_start_matches('/');
                // The path may or may not start with the attribute (`/Properties/…`).
                let raw = raw.strip_prefix(&format!("{attribute}/")).unwrap_or(raw);
                let path = raw.replace('/', ".");
                Some(if path.is_empty() { attribute } else { format!("{attribute}.{path}") })
            })
            .collect(),
    })
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
    /// Change sets by (stack, name): the request they would apply and how they look.
    change_sets: BTreeMap<(String, String), (StackRequest, ChangeSetView)>,
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

    fn template<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Option<String>, CfnError>> {
        Box::pin(async move {
            self.begin("GetTemplate", name)?;
            Ok(self.state.lock().stacks.get(name).map(|(_, r)| r.template_body.clone().unwrap_or_default()))
        })
    }

    fn create_change_set<'a>(
        &'a self,
        r: &'a StackRequest,
        change_set: &'a str,
    ) -> BoxFuture<'a, Result<(), CfnError>> {
        Box::pin(async move {
            self.begin("CreateChangeSet", &r.name)?;
            let mut s = self.state.lock();
            let Some((_, deployed)) = s.stacks.get(&r.name) else {
                return Err(CfnError::NotFound(r.name.clone()));
            };
            let parse = |b: &Option<String>| {
                serde_json::from_str::<serde_json::Value>(b.as_deref().unwrap_or("{}")).unwrap_or_default()
            };
            // The fake's own account of the change: the template diff, without CloudFormation's
            // replacement verdicts.
            let changes = crate::approval::template_diff(&parse(&deployed.template_body), &parse(&r.template_body))
                .into_iter()
                .map(|c| crate::approval::ChangeSetChange {
                    action: format!("{:?}", c.action),
                    logical_id: c.logical_id,
                    resource_type: c.resource_type,
                    replacement: None,
                    paths: c.paths,
                })
                .collect();
            let view = ChangeSetView {
                status: "CREATE_COMPLETE".into(),
                execution_status: "AVAILABLE".into(),
                status_reason: None,
                changes,
            };
            s.change_sets.insert((r.name.clone(), change_set.to_string()), (r.clone(), view));
            Ok(())
        })
    }

    fn describe_change_set<'a>(
        &'a self,
        stack: &'a str,
        change_set: &'a str,
    ) -> BoxFuture<'a, Result<Option<ChangeSetView>, CfnError>> {
        Box::pin(async move {
            self.begin("DescribeChangeSet", stack)?;
            Ok(self.state.lock().change_sets.get(&(stack.to_string(), change_set.to_string())).map(|(_, v)| v.clone()))
        })
    }

    fn execute_change_set<'a>(&'a self, stack: &'a str, change_set: &'a str) -> BoxFuture<'a, Result<(), CfnError>> {
        Box::pin(async move {
            self.begin("ExecuteChangeSet", stack)?;
            let request = {
                let mut s = self.state.lock();
                let Some((request, _)) = s.change_sets.get(&(stack.to_string(), change_set.to_string())).cloned()
                else {
                    return Err(CfnError::NotFound(stack.to_string()));
                };
                // As CloudFormation: executing one change set removes the stack's others.
                s.change_sets.retain(|(st, _), _| st != stack);
                request
            };
            self.update(&request).await
        })
    }

    fn change_sets<'a>(&'a self, stack: &'a str) -> BoxFuture<'a, Result<Vec<String>, CfnError>> {
        Box::pin(async move {
            self.begin("ListChangeSets", stack)?;
            Ok(self.state.lock().change_sets.keys().filter(|(s, _)| s == stack).map(|(_, n)| n.clone()).collect())
        })
    }

    fn delete_change_set<'a>(&'a self, stack: &'a str, change_set: &'a str) -> BoxFuture<'a, Result<(), CfnError>> {
        Box::pin(async move {
            self.begin("DeleteChangeSet", stack)?;
            self.state.lock().change_sets.remove(&(stack.to_string(), change_set.to_string()));
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_described_change_keeps_cloudformations_replacement_and_property_paths() {
        use aws_sdk_cloudformation::types::{
            Change, ChangeAction, ChangeSource, ChangeType, Replacement, RequiresRecreation, ResourceAttribute,
            ResourceChange, ResourceChangeDetail, ResourceTargetDefinition,
        };
        let detail = |attribute, name: &str, path: Option<&str>| {
            let mut target = ResourceTargetDefinition::builder()
                .attribute(attribute)
                .name(name)
                .requires_recreation(RequiresRecreation::Always);
            if let Some(p) = path {
                target = target.path(p);
            }
            ResourceChangeDetail::builder()
                .target(target.build())
                .change_source(ChangeSource::DirectModification)
                .build()
        };
        let change = Change::builder()
            .r#type(ChangeType::Resource)
            .resource_change(
                ResourceChange::builder()
                    .action(ChangeAction::Modify)
                    .logical_resource_id("Group")
                    .resource_type("AWS::EC2::SecurityGroup")
                    .replacement(Replacement::True)
                    .details(detail(ResourceAttribute::Properties, "GroupDescription", None))
                    .details(detail(
                        ResourceAttribute::Properties,
                        "LaunchTemplateData",
                        Some("/LaunchTemplateData/ImageId"),
                    ))
                    .details(detail(
                        ResourceAttribute::Properties,
                        "SecurityGroupIngress",
                        Some("/Properties/SecurityGroupIngress/0/FromPort"),
                    ))
                    .details(detail(ResourceAttribute::Tags, "Tags", None))
                    .build(),
            )
            .build();
        let c = change_of(&change).expect("a resource change");
        assert_eq!((c.action.as_str(), c.logical_id.as_str()), ("Modify", "Group"));
        assert_eq!(c.replacement.as_deref(), Some("True"));
        assert_eq!(
            c.paths,
            [
                "Properties.GroupDescription",
                "Properties.LaunchTemplateData.ImageId",
                "Properties.SecurityGroupIngress.0.FromPort",
                "Tags.Tags"
            ]
        );
        // A change of another type (a hook invocation) is not a resource change.
        assert!(change_of(&Change::builder().r#type(ChangeType::Resource).build()).is_none());
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

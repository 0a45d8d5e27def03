//! The operator's view of CloudFormation: a small trait with one implementation on the AWS SDK
//! and one in-memory fake, and a per-account cache of `DescribeStacks`.
//!
//! The state machine itself is pure and lives in [`aws_stacks::state`]; [`crate::stack_ops`]
//! carries out its steps through this trait.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use aws_stacks::state::{StackStatus, StackView};
use futures::future::BoxFuture;
use parking_lot::Mutex;

mod fake;
mod sdk;

pub use fake::{CfnErrorSpec, FAKE_PAGE_SIZE, FakeCloudFormation};
pub use sdk::SdkCloudFormation;

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
        if !self.list_if_expired(&mut e, cfn).await? {
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

    /// How many stacks `account` holds that count against its `StackLimit` (every one not
    /// deleted), from its listing (listed again when expired). A stack this process wrote since
    /// it was read counts whatever became of it (a deleted one errs high); one created by
    /// another process shows from the next listing, at most [`StackCache::idle_ttl`] later.
    pub async fn count(&self, account: &str, cfn: &dyn CloudFormation) -> Result<usize, CfnError> {
        let entry = self.entry(account);
        let mut e = entry.lock().await;
        self.list_if_expired(&mut e, cfn).await?;
        let live = e
            .stacks
            .iter()
            .filter(|(name, (view, _))| view.status != StackStatus::DeleteComplete && !e.stale.contains(name.as_str()));
        Ok(live.count() + e.stale.len())
    }

    /// Lists the account again when its listing is missing or expired; whether it did.
    async fn list_if_expired(&self, e: &mut Entry, cfn: &dyn CloudFormation) -> Result<bool, CfnError> {
        if e.listed.is_some_and(|t| t.elapsed() < self.idle_ttl) {
            return Ok(false);
        }
        let stacks = cfn.describe_all().await?;
        let now = Instant::now();
        e.stacks = stacks.into_iter().map(|s| (s.name.clone(), (s, now))).collect();
        e.listed = Some(now);
        e.stale.clear();
        Ok(true)
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

#[cfg(test)]
mod tests {
    use super::sdk::change_of;
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
    async fn the_stack_count_comes_from_the_listing_and_counts_stacks_written_since() {
        let fake = FakeCloudFormation::new();
        fake.create(&request("s1", false)).await.unwrap();
        fake.create(&request("s2", false)).await.unwrap();
        let cache = StackCache::new(Duration::from_secs(600), Duration::from_secs(5));
        assert_eq!(cache.count("acct/eu-central-1", &fake).await.unwrap(), 2);
        assert_eq!(cache.get("acct/eu-central-1", &fake, "s1").await.unwrap().map(|v| v.name).as_deref(), Some("s1"));
        assert_eq!(fake.calls("DescribeStacks"), 1, "one listing serves the count and the reads");
        // Written since the listing: a new stack counts, a rewritten one counts once.
        fake.create(&request("s3", false)).await.unwrap();
        cache.invalidate("acct/eu-central-1", "s3");
        cache.invalidate("acct/eu-central-1", "s1");
        assert_eq!(cache.count("acct/eu-central-1", &fake).await.unwrap(), 3);
        fake.set_status("s2", "DELETE_COMPLETE", None);
        let expired = StackCache::new(Duration::ZERO, Duration::from_secs(5));
        assert_eq!(expired.count("acct/eu-central-1", &fake).await.unwrap(), 2, "a deleted stack does not count");
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

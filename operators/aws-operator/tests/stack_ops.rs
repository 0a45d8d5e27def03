//! The stack operations against the in-memory CloudFormation, driven by its fault knobs: every
//! recovery path (a create rolled back, an update rolled back, a rollback that failed, a delete
//! that failed, an API error), the backoff between attempts and its count kept in the status
//! entry, and the events each step publishes (one per transition, one per stack).
//!
//! testenv stands in for the management cluster, which receives the events; no AWS call leaves
//! the process.

use std::sync::Arc;
use std::time::Duration;

use apis::aws::StackStatus as StatusEntry;
use aws_operator::aws::cloudformation::{CloudFormation as _, FakeCloudFormation};
use aws_operator::aws::{AccountClients, AwsFactory, AwsSettings};
use aws_operator::config::{AmiMap, OperatorConfig};
use aws_operator::context::Shared;
use aws_operator::stack_ops::{self, Deletion, DesiredStack, Progress, UpdateWhen};
use aws_stacks::cfn::Template;
use aws_stacks::names::StackKind;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Api;
use kube::api::{ListParams, PostParams};
use testenv::TestEnv;

const NS: &str = "org-stacks";
const REGION: &str = "eu-central-1";

struct Bench {
    _env: TestEnv,
    client: kube::Client,
    shared: Arc<Shared>,
    fake: Arc<FakeCloudFormation>,
    aws: AccountClients,
    owner: ConfigMap,
}

impl Bench {
    async fn start() -> anyhow::Result<Bench> {
        let env = TestEnv::start().await?;
        let client = env.client();
        let ns: Namespace = serde_json::from_value(serde_json::json!({"metadata": {"name": NS}}))?;
        Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &ns).await?;
        let owner: ConfigMap =
            serde_json::from_value(serde_json::json!({"metadata": {"name": "owner", "namespace": NS}}))?;
        let owner = Api::<ConfigMap>::namespaced(client.clone(), NS).create(&PostParams::default(), &owner).await?;
        // Nothing below calls AWS: the factory only provides configuration for the clients the
        // stack operations never use.
        let settings = AwsSettings {
            default_region: REGION.into(),
            endpoint_url: Some("http://127.0.0.1:9".into()),
            credentials: Some(aws_credential_types::Credentials::new("AKIATEST", "secret", None, None, "test")),
            ..AwsSettings::default()
        };
        let factory = AwsFactory::new(settings).await?;
        let fake = Arc::new(FakeCloudFormation::new());
        let aws = factory.with_cloudformation("123456789012", REGION, fake.clone());
        let mut registry = prometheus_client::registry::Registry::default();
        let shared = Shared::new(client.clone(), factory, OperatorConfig::default(), AmiMap::default(), &mut registry);
        Ok(Bench { _env: env, client, shared, fake, aws, owner })
    }

    async fn ensure(
        &self,
        name: &str,
        version: &str,
        recorded: Option<&StatusEntry>,
    ) -> anyhow::Result<(Progress, StatusEntry)> {
        Ok(stack_ops::ensure(&self.shared, &self.aws, &self.owner, desired(name, version), None, recorded).await?)
    }

    async fn delete(&self, name: &str, recorded: Option<&StatusEntry>) -> anyhow::Result<(Deletion, StatusEntry)> {
        self.delete_for(name, recorded, OWNER_UID).await
    }

    /// Delete `name` for the cluster whose AWSCluster has UID `owner_uid`.
    async fn delete_for(
        &self,
        name: &str,
        recorded: Option<&StatusEntry>,
        owner_uid: &str,
    ) -> anyhow::Result<(Deletion, StatusEntry)> {
        Ok(stack_ops::delete(&self.shared, &self.aws, &self.owner, StackKind::Tccp, name, recorded, owner_uid).await?)
    }

    /// The events on the owner, as (type, reason, related stack, note, count).
    async fn events(&self) -> anyhow::Result<Vec<(String, String, String, String, i32)>> {
        let events: Api<Event> = Api::namespaced(self.client.clone(), NS);
        Ok(events
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .map(|e| {
                (
                    e.type_.unwrap_or_default(),
                    e.reason.unwrap_or_default(),
                    e.related.and_then(|r| r.name).unwrap_or_default(),
                    e.note.unwrap_or_default(),
                    e.series.map_or(1, |s| s.count),
                )
            })
            .collect())
    }

    /// Force a status, as CloudFormation would reach it on its own, and forget the cached
    /// listing (as its expiry would).
    fn set_status(&self, name: &str, status: &str, reason: Option<&str>) {
        self.fake.set_status(name, status, reason);
        self.shared.stacks.invalidate(&self.aws.cache_key(), name);
    }

    fn roll_back(&self, name: &str) {
        self.fake.roll_back(name);
        self.shared.stacks.invalidate(&self.aws.cache_key(), name);
    }

    async fn events_with(&self, reason: &str) -> anyhow::Result<Vec<(String, String, String, String, i32)>> {
        Ok(self.events().await?.into_iter().filter(|e| e.1 == reason).collect())
    }
}

/// A stack whose template differs by `version`.
fn desired(name: &str, version: &str) -> DesiredStack {
    let mut template = Template::new("test stack");
    template.output("OperatorVersion", serde_json::Value::String(version.into()), None);
    DesiredStack {
        kind: StackKind::Tccp,
        name: name.into(),
        template,
        tags: vec![
            ("giantswarm.io/cluster".into(), "a1b2c".into()),
            ("giantswarm.io/cluster-uid".into(), OWNER_UID.into()),
        ],
        update: UpdateWhen::Now,
        canonical_hash: None,
    }
}

/// The UID of the AWSCluster the bench's stacks belong to.
const OWNER_UID: &str = "uid-of-a1b2c";

/// The entry as if it had been recorded `secs` seconds ago.
fn aged(entry: &StatusEntry, secs: i64) -> StatusEntry {
    let mut e = entry.clone();
    let t = jiff::Timestamp::now() - jiff::SignedDuration::from_secs(secs);
    e.last_transition_time = Some(Time(t));
    e
}

fn retrying(p: &Progress) -> Option<(&'static str, String, Duration)> {
    match p {
        Progress::Retrying { reason, message, retry_after } => Some((reason, message.clone(), *retry_after)),
        _ => None,
    }
}

#[tokio::test]
async fn each_stack_gets_its_own_events_and_each_transition_one_event() -> anyhow::Result<()> {
    let b = Bench::start().await?;
    let (first, second) = ("cluster-a1b2c-tccpi", "cluster-a1b2c-tccp");
    // Two creates in a row: two events, one per stack, each with its own note.
    let (_, e1) = b.ensure(first, "1", None).await?;
    let (_, e2) = b.ensure(second, "1", None).await?;
    let created = b.events_with("CFCreateRequested").await?;
    assert_eq!(created.len(), 2, "one CFCreateRequested per stack: {created:?}");
    for stack in [first, second] {
        let e =
            created.iter().find(|e| e.2 == stack).unwrap_or_else(|| panic!("no event related to {stack}: {created:?}"));
        assert!(e.3.contains(stack), "{e:?}");
        assert_eq!(e.4, 1, "{e:?}");
    }

    // The stacks complete: one transition event each, with the recorded status kept as the
    // caller writes it.
    let (p1, e1) = b.ensure(first, "1", Some(&e1)).await?;
    let (p2, e2) = b.ensure(second, "1", Some(&e2)).await?;
    assert!(matches!(p1, Progress::Ready(_)) && matches!(p2, Progress::Ready(_)));
    assert_eq!((e1.status.as_str(), e2.status.as_str()), ("CREATE_COMPLETE", "CREATE_COMPLETE"));
    // Polling again, also with a status the cache has not caught up with (the entry of before
    // the transition), announces nothing more.
    for _ in 0..3 {
        b.ensure(first, "1", Some(&e1)).await?;
        b.ensure(second, "1", None).await?;
    }
    let completed = b.events_with("CFCompleted").await?;
    assert_eq!(completed.len(), 2, "one CFCompleted per stack: {completed:?}");
    assert!(completed.iter().all(|e| e.4 == 1), "no repeats: {completed:?}");
    assert!(completed.iter().any(|e| e.2 == first && e.3.contains("CREATE_REQUESTED → CREATE_COMPLETE")));
    assert!(completed.iter().any(|e| e.2 == second && e.3.contains(second)));
    Ok(())
}

#[tokio::test]
async fn a_rolled_back_update_is_reported_and_retried_with_backoff() -> anyhow::Result<()> {
    let b = Bench::start().await?;
    let name = "cluster-r0llb-tccp";
    let (_, entry) = b.ensure(name, "1", None).await?;
    let (_, entry) = b.ensure(name, "1", Some(&entry)).await?;
    assert_eq!(entry.status, "CREATE_COMPLETE");

    // Version 2 is requested; CloudFormation fails it and rolls back to version 1.
    let (p, entry) = b.ensure(name, "2", Some(&entry)).await?;
    assert!(matches!(p, Progress::Pending));
    assert_eq!(entry.status, stack_ops::UPDATE_REQUESTED);
    assert_eq!(b.fake.calls("UpdateStack"), 1);
    b.set_status(name, "UPDATE_ROLLBACK_IN_PROGRESS", Some("The following resource(s) failed to update: [VPC]."));
    let (_, entry) = b.ensure(name, "2", Some(&entry)).await?;
    b.roll_back(name);
    b.set_status(name, "UPDATE_ROLLBACK_COMPLETE", None);

    let (p, failed) = b.ensure(name, "2", Some(&entry)).await?;
    let (reason, message, wait) = retrying(&p).expect("a failed update is not a success");
    assert_eq!(reason, "StackUpdateFailed");
    assert!(message.contains(name) && message.contains("failed to update: [VPC]"), "{message}");
    assert!(wait > Duration::ZERO && wait <= Duration::from_secs(30), "{wait:?}");
    assert_eq!((failed.status.as_str(), failed.attempts), ("UPDATE_ROLLBACK_COMPLETE", Some(1)));
    let warnings = b.events_with("CFUpdateFailed").await?;
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert_eq!(warnings[0].0, "Warning");
    assert!(warnings[0].3.contains("[VPC]"), "{warnings:?}");
    let transitions = b.events_with("CFFailed").await?;
    assert!(
        !transitions.is_empty() && transitions.iter().all(|e| e.0 == "Normal"),
        "the failure's one Warning is CFUpdateFailed; its transition is narrated: {transitions:?}"
    );
    assert_eq!(b.fake.calls("UpdateStack"), 1, "no update before the backoff elapsed");

    // Polled again before the backoff elapsed (a restarted operator reads the same entry from
    // the status): still waiting, no second warning, no update.
    let (p, again) = b.ensure(name, "2", Some(&failed)).await?;
    assert!(retrying(&p).is_some());
    assert_eq!(again.attempts, Some(1));
    assert_eq!(b.fake.calls("UpdateStack"), 1);
    assert_eq!(b.events_with("CFUpdateFailed").await?.len(), 1);

    // After the backoff: updated again, the attempt count kept.
    let (p, retried) = b.ensure(name, "2", Some(&aged(&failed, 31))).await?;
    assert!(matches!(p, Progress::Pending));
    assert_eq!((retried.status.as_str(), retried.attempts), (stack_ops::UPDATE_REQUESTED, Some(1)));
    assert_eq!(b.fake.calls("UpdateStack"), 2);

    // It fails again: the second attempt waits twice as long.
    b.roll_back(name);
    b.set_status(name, "UPDATE_ROLLBACK_COMPLETE", Some("Resource handler returned message: throttled"));
    let (p, failed) = b.ensure(name, "2", Some(&retried)).await?;
    let (_, _, wait) = retrying(&p).expect("second failure");
    assert_eq!(failed.attempts, Some(2));
    assert!(wait > Duration::from_secs(30) && wait <= Duration::from_secs(60), "{wait:?}");
    let (p, _) = b.ensure(name, "2", Some(&aged(&failed, 45))).await?;
    assert!(retrying(&p).is_some(), "45 s is within the second backoff");
    assert_eq!(b.fake.calls("UpdateStack"), 2);

    // The third attempt succeeds: ready, and the count is gone.
    let (_, retried) = b.ensure(name, "2", Some(&aged(&failed, 61))).await?;
    assert_eq!(b.fake.calls("UpdateStack"), 3);
    let (p, done) = b.ensure(name, "2", Some(&retried)).await?;
    assert!(matches!(p, Progress::Ready(_)));
    assert_eq!((done.status.as_str(), done.attempts), ("UPDATE_COMPLETE", None));
    Ok(())
}

#[tokio::test]
async fn a_rolled_back_create_is_deleted_and_created_again_with_backoff() -> anyhow::Result<()> {
    let b = Bench::start().await?;
    let name = "cluster-rbc01-tccp";
    let (_, entry) = b.ensure(name, "1", None).await?;
    b.set_status(name, "ROLLBACK_COMPLETE", Some("The following resource(s) failed to create: [NATGateway]."));
    let (p, failed) = b.ensure(name, "1", Some(&entry)).await?;
    let (reason, message, _) = retrying(&p).expect("a failed create is reported");
    assert_eq!(reason, "StackCreateFailed");
    assert!(message.contains("[NATGateway]") && message.contains(name), "{message}");
    assert_eq!(failed.attempts, Some(1));
    assert_eq!(b.fake.calls("DeleteStack"), 0, "not deleted before the backoff");
    assert_eq!(b.events_with("CFCreateFailed").await?.len(), 1);

    // After the backoff: protection lifted, deleted, then created again.
    let (p, deleting) = b.ensure(name, "1", Some(&aged(&failed, 31))).await?;
    assert!(matches!(p, Progress::Pending));
    assert_eq!((deleting.status.as_str(), deleting.attempts), (stack_ops::DELETE_REQUESTED, Some(1)));
    assert_eq!((b.fake.calls("UpdateTerminationProtection"), b.fake.calls("DeleteStack")), (1, 1));
    assert!(b.fake.stack(name).is_none());
    assert_eq!(b.events_with("CFRecreate").await?.len(), 1);
    let (_, creating) = b.ensure(name, "1", Some(&deleting)).await?;
    assert_eq!((creating.status.as_str(), creating.attempts), (stack_ops::CREATE_REQUESTED, Some(1)));
    assert_eq!(b.fake.calls("CreateStack"), 2);

    // The second create fails too: counted as attempt 2.
    b.set_status(name, "ROLLBACK_COMPLETE", None);
    let (p, failed) = b.ensure(name, "1", Some(&creating)).await?;
    let (_, message, wait) = retrying(&p).expect("second failure");
    assert_eq!(failed.attempts, Some(2));
    assert!(message.contains("CloudFormation gave no reason"), "{message}");
    assert!(wait > Duration::from_secs(30), "{wait:?}");

    // A create that is refused is an error, and the next reconcile creates again.
    let (_, deleting) = b.ensure(name, "1", Some(&aged(&failed, 61))).await?;
    b.fake.fail_next("CreateStack", "LimitExceededException", "too many stacks");
    let err = b.ensure(name, "1", Some(&deleting)).await.expect_err("the create fails");
    assert!(err.to_string().contains("LimitExceededException"), "{err}");
    let (_, creating) = b.ensure(name, "1", Some(&deleting)).await?;
    let (p, done) = b.ensure(name, "1", Some(&creating)).await?;
    assert!(matches!(p, Progress::Ready(_)));
    assert_eq!((done.status.as_str(), done.attempts), ("CREATE_COMPLETE", None));
    Ok(())
}

#[tokio::test]
async fn a_failed_rollback_is_continued() -> anyhow::Result<()> {
    let b = Bench::start().await?;
    let name = "cluster-urf01-tccp";
    let (_, entry) = b.ensure(name, "1", None).await?;
    b.set_status(name, "UPDATE_ROLLBACK_FAILED", Some("Subnet in use"));
    let (p, entry) = b.ensure(name, "2", Some(&entry)).await?;
    assert!(matches!(p, Progress::Pending));
    assert_eq!(b.fake.calls("ContinueUpdateRollback"), 1);
    assert_eq!(b.events_with("CFContinueRollback").await?.len(), 1);
    // The rolled-back stack runs the old template: our update failed.
    let (p, _) = b.ensure(name, "2", Some(&entry)).await?;
    assert_eq!(retrying(&p).map(|r| r.0), Some("StackUpdateFailed"));
    Ok(())
}

#[tokio::test]
async fn a_failed_delete_names_the_resources_and_is_retried_with_backoff() -> anyhow::Result<()> {
    let b = Bench::start().await?;
    let name = "cluster-df001-tccp";
    let (_, entry) = b.ensure(name, "1", None).await?;
    let (_, entry) = b.ensure(name, "1", Some(&entry)).await?;

    // Protected: lifted first, then deleted.
    let (d, entry) = b.delete(name, Some(&entry)).await?;
    assert!(matches!(d, Deletion::Pending));
    assert_eq!(b.fake.calls("UpdateTerminationProtection"), 1);
    // The delete is refused once (throttled): an error, retried by the next reconcile.
    b.fake.fail_next("DeleteStack", "Throttling", "Rate exceeded");
    let err = b.delete(name, Some(&entry)).await.expect_err("throttled");
    assert!(err.to_string().contains("Throttling"), "{err}");
    assert!(b.fake.stack(name).is_some());

    // CloudFormation cannot delete a subnet: DELETE_FAILED.
    b.fake.hold_deletes(true);
    let (d, entry) = b.delete(name, Some(&entry)).await?;
    assert!(matches!(d, Deletion::Pending));
    assert_eq!(entry.status, stack_ops::DELETE_REQUESTED);
    b.set_status(name, "DELETE_FAILED", Some("The following resource(s) failed to delete: [PrivateSubnet]."));
    b.fake.set_failed_resources(name, vec![("PrivateSubnet".into(), "has dependencies and cannot be deleted".into())]);
    let deletes = b.fake.calls("DeleteStack");
    let (d, failed) = b.delete(name, Some(&entry)).await?;
    let Deletion::Failed { message, retry_after } = d else { panic!("want Failed, got {d:?}") };
    assert!(
        message.contains("PrivateSubnet (has dependencies and cannot be deleted)") && message.contains(name),
        "{message}"
    );
    assert!(retry_after > Duration::ZERO && retry_after <= Duration::from_secs(30), "{retry_after:?}");
    assert_eq!((failed.status.as_str(), failed.attempts), ("DELETE_FAILED", Some(1)));
    assert_eq!(b.fake.calls("DeleteStack"), deletes, "not deleted again before the backoff");
    let warnings = b.events_with("CFDeleteFailed").await?;
    assert_eq!(warnings.len(), 1, "{warnings:?}");

    // Within the backoff (also after a restart): the same message, no lookups, no delete.
    let lookups = b.fake.calls("DescribeStackResources");
    let (d, again) = b.delete(name, Some(&failed)).await?;
    let Deletion::Failed { message: again_message, .. } = d else { panic!("want Failed") };
    assert_eq!(again_message, message, "a stable message keeps the condition from changing on every look");
    assert_eq!(again, failed);
    assert_eq!((b.fake.calls("DeleteStack"), b.fake.calls("DescribeStackResources")), (deletes, lookups));

    // After it: deleted again; this time it goes.
    b.fake.hold_deletes(false);
    let (d, entry) = b.delete(name, Some(&aged(&failed, 31))).await?;
    assert!(matches!(d, Deletion::Pending));
    assert_eq!(entry.attempts, Some(1));
    let (d, gone) = b.delete(name, Some(&entry)).await?;
    assert!(matches!(d, Deletion::Gone));
    assert_eq!((gone.status.as_str(), gone.attempts), ("DELETE_COMPLETE", None));
    assert_eq!(b.events_with("CFDeleted").await?.len(), 1);
    Ok(())
}

/// A stack with one security group whose description (a property CloudFormation replaces the
/// group for) follows `version`.
fn with_group(name: &str, version: &str) -> DesiredStack {
    let mut d = desired(name, version);
    let props = serde_json::json!({"GroupDescription": format!("group {version}")});
    d.template.add("Group", aws_stacks::cfn::Resource::new("AWS::EC2::SecurityGroup", props));
    d
}

/// The gate of a cluster annotated `update-approval: <setting>`, for the bench's owner, with
/// `approved` as the owner's approval.
fn gate(b: &Bench, setting: &str, approved: Option<&str>) -> anyhow::Result<stack_ops::Gate> {
    use aws_operator::approval::{self, UPDATE_APPROVAL};
    let cluster: apis::aws::AWSCluster = serde_json::from_value(serde_json::json!({
        "apiVersion": "infrastructure.giantswarm.io/v1alpha3", "kind": "AWSCluster",
        "metadata": {"name": "a1b2c", "namespace": NS, "annotations": {UPDATE_APPROVAL: setting}},
        "spec": {"cluster": {"description": "x", "dns": {"domain": "example.com"}},
                 "provider": {"credentialSecret": {"name": "c", "namespace": "giantswarm"}, "region": REGION}}
    }))?;
    let mut gate = stack_ops::Gate::new(&cluster, &b.owner, &[], approval::UpdateKind::Other);
    gate.approval = approved.map_or(approval::Approval::None, |a| {
        approval::approval(&[(approval::APPROVED_PLAN.to_string(), a.to_string())].into_iter().collect())
    });
    Ok(gate)
}

/// `stack_ops::ensure_gated` of `desired` on the bench, behind `gate`.
async fn ensure_gated(
    b: &Bench,
    desired: DesiredStack,
    recorded: Option<StatusEntry>,
    gate: stack_ops::Gate,
) -> anyhow::Result<(Progress, StatusEntry)> {
    Ok(stack_ops::ensure_gated(&b.shared, &b.aws, &b.owner, desired, None, recorded.as_ref(), Some(&gate)).await?)
}

#[tokio::test]
async fn a_gated_update_waits_as_a_change_set_and_the_approved_plan_runs_it() -> anyhow::Result<()> {
    let b = Bench::start().await?;
    let ensure = |d, recorded: Option<StatusEntry>, gate| ensure_gated(&b, d, recorded, gate);
    // Creates never wait.
    let (p, e) = ensure(with_group("gated", "1"), None, gate(&b, "strict", None)?).await?;
    assert!(matches!(p, Progress::Pending), "{p:?}");
    let (p, e) = ensure(with_group("gated", "1"), Some(e), gate(&b, "strict", None)?).await?;
    assert!(matches!(p, Progress::Ready(_)), "{p:?}");

    // An update waits as a change set, with its summary; looking again reuses it.
    let (p, e) = ensure(with_group("gated", "2"), Some(e), gate(&b, "required", None)?).await?;
    let Progress::AwaitingApproval { message } = p else { anyhow::bail!("not held: {p:?}") };
    let pending = e.pending_update.clone().expect("a pending update");
    assert_eq!((pending.added, pending.modified, pending.removed), (0, 1, 0), "{pending:?}");
    assert_eq!(pending.replacements.len(), 1, "{pending:?}");
    assert_eq!(
        (pending.replacements[0].logical_id.as_str(), pending.replacements[0].replacement.as_str()),
        ("Group", "True")
    );
    assert!(message.contains(&pending.plan_hash), "{message}");
    assert_eq!(e.status, "CREATE_COMPLETE", "the stack is untouched");
    let (p, e) = ensure(with_group("gated", "2"), Some(e), gate(&b, "required", None)?).await?;
    assert!(matches!(p, Progress::AwaitingApproval { .. }));
    assert_eq!((b.fake.calls("CreateChangeSet"), b.fake.calls("UpdateStack")), (1, 0));

    // A stale approval runs nothing and is warned about once.
    for _ in 0..2 {
        let (p, _) =
            ensure(with_group("gated", "2"), Some(e.clone()), gate(&b, "required", Some("0123456789abcdef"))?).await?;
        assert!(matches!(p, Progress::AwaitingApproval { .. }));
    }
    assert_eq!(b.events_with("StaleApproval").await?.len(), 1);
    assert_eq!((b.fake.calls("ExecuteChangeSet"), b.fake.calls("UpdateStack")), (0, 0));

    // The approved plan runs as its change set.
    let (p, e) = ensure(with_group("gated", "2"), Some(e), gate(&b, "required", Some(&pending.plan_hash))?).await?;
    assert!(matches!(p, Progress::Pending), "{p:?}");
    assert_eq!((b.fake.calls("ExecuteChangeSet"), b.fake.calls("UpdateStack")), (1, 1), "executed as one update");
    assert_eq!(e.status, stack_ops::UPDATE_REQUESTED);
    assert_eq!(e.applied_plan.as_deref(), Some(pending.plan_hash.as_str()));
    assert!(e.pending_update.is_none());
    let (p, _) = ensure(with_group("gated", "2"), Some(e), gate(&b, "required", Some(&pending.plan_hash))?).await?;
    assert!(matches!(p, Progress::Ready(_)), "current again: {p:?}");
    assert_eq!(b.events_with("UpdatePending").await?.len(), 1);

    // A held update whose gate is turned off runs as a plain update, and its change set goes.
    let (_, e) = ensure(with_group("gated", "3"), None, gate(&b, "required", None)?).await?;
    let held = e.pending_update.clone().expect("held");
    assert_eq!(b.fake.change_sets("gated").await?, std::slice::from_ref(&held.change_set));
    let (p, e) = ensure(with_group("gated", "3"), Some(e), gate(&b, "off", None)?).await?;
    assert!(matches!(p, Progress::Pending), "{p:?}");
    assert_eq!(e.status, stack_ops::UPDATE_REQUESTED);
    assert!(b.fake.change_sets("gated").await?.is_empty(), "the held change set is deleted");
    assert_eq!(b.fake.calls("UpdateStack"), 2);
    Ok(())
}

#[tokio::test]
async fn an_update_held_by_something_else_is_planned_ahead_and_its_approved_plan_runs_when_it_may() -> anyhow::Result<()>
{
    let b = Bench::start().await?;
    let ensure = |d, recorded: Option<StatusEntry>, gate| ensure_gated(&b, d, recorded, gate);
    let at = |version: &str, update: UpdateWhen| DesiredStack { update, ..with_group("ahead", version) };
    let (_, e) = ensure(at("1", UpdateWhen::Now), None, gate(&b, "required", None)?).await?;
    let (p, e) = ensure(at("1", UpdateWhen::Now), Some(e), gate(&b, "required", None)?).await?;
    assert!(matches!(p, Progress::Ready(_)), "{p:?}");

    // Held elsewhere (a closed window, say) and not gated: nothing is planned or run.
    let (p, _) = ensure(at("2", UpdateWhen::Later), Some(e.clone()), gate(&b, "off", None)?).await?;
    assert!(matches!(p, Progress::Ready(_)), "{p:?}");
    assert_eq!((b.fake.calls("CreateChangeSet"), b.fake.calls("UpdateStack")), (0, 0));
    // Never updated: not planned either, gate or not.
    let (p, _) = ensure(at("2", UpdateWhen::Never), Some(e.clone()), gate(&b, "strict", None)?).await?;
    assert!(matches!(p, Progress::Ready(_)), "{p:?}");
    assert_eq!(b.fake.calls("CreateChangeSet"), 0);

    // Held elsewhere and gated: the plan is made and can be approved ahead.
    let (p, e) = ensure(at("2", UpdateWhen::Later), Some(e), gate(&b, "required", None)?).await?;
    assert!(matches!(p, Progress::AwaitingApproval { .. }), "{p:?}");
    let pending = e.pending_update.clone().expect("the plan");
    assert_eq!(b.fake.calls("CreateChangeSet"), 1);
    // Approved while still held: nothing runs, the change set and the plan stay.
    let approved = || gate(&b, "required", Some(&pending.plan_hash));
    let (p, e) = ensure(at("2", UpdateWhen::Later), Some(e), approved()?).await?;
    assert!(matches!(p, Progress::Ready(_)), "{p:?}");
    assert_eq!(e.pending_update.as_ref().map(|p| p.plan_hash.as_str()), Some(pending.plan_hash.as_str()));
    assert_eq!(b.fake.change_sets("ahead").await?, std::slice::from_ref(&pending.change_set));
    assert_eq!((b.fake.calls("ExecuteChangeSet"), b.fake.calls("UpdateStack")), (0, 0));
    // Once it may: the approved change set runs, and nothing else.
    let (p, e) = ensure(at("2", UpdateWhen::Now), Some(e), approved()?).await?;
    assert!(matches!(p, Progress::Pending), "{p:?}");
    assert_eq!(b.fake.calls("ExecuteChangeSet"), 1);
    assert_eq!(b.fake.calls("CreateChangeSet"), 1, "the plan approved is the plan run");
    assert_eq!(e.applied_plan.as_deref(), Some(pending.plan_hash.as_str()));
    Ok(())
}

#[tokio::test]
async fn a_stack_carrying_another_clusters_uid_is_not_deleted() -> anyhow::Result<()> {
    let b = Bench::start().await?;
    let name = "cluster-a1b2c-tccp";
    let (_, entry) = b.ensure(name, "1", None).await?;
    let (_, entry) = b.ensure(name, "1", Some(&entry)).await?;
    // Another AWSCluster with the same id deletes nothing of it: not even the protection.
    let (d, refused) = b.delete_for(name, Some(&entry), "uid-of-another").await?;
    assert!(matches!(d, Deletion::Gone), "as good as gone for the other cluster");
    assert!(refused.reason.as_deref().is_some_and(|r| r.contains("another cluster's")), "{refused:?}");
    assert_eq!((b.fake.calls("UpdateTerminationProtection"), b.fake.calls("DeleteStack")), (0, 0));
    assert!(b.fake.stack(name).is_some());
    assert_eq!(b.events_with("CFDeleteRefused").await?.len(), 1);
    // Nor one whose owner is unknown.
    b.delete_for(name, Some(&entry), "").await?;
    assert_eq!(b.fake.calls("DeleteStack"), 0);
    // Its own cluster deletes it.
    let (d, _) = b.delete(name, Some(&entry)).await?;
    assert!(matches!(d, Deletion::Pending));
    assert_eq!(b.fake.calls("UpdateTerminationProtection"), 1);
    Ok(())
}

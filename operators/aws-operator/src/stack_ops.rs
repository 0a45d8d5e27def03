//! Carries out the stack state machine's steps ([`crate::cloudformation::plan_ensure`],
//! [`crate::cloudformation::plan_delete`]) against one account: every call is timed and counted
//! per stack kind and operation, every status change the operator observes becomes a Kubernetes
//! event on the owning object, and every write invalidates the account's `DescribeStacks` cache.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use apis::aws::{StackAccount, StackStatus as StatusEntry};
use aws_stacks::cfn::Template;
use aws_stacks::names::{Account, StackKind};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use operatorkit::ResourceError;

use crate::aws::AccountClients;
use crate::cloudformation::{
    CfnError, DeleteStep, EnsureStep, StackRequest, StackStatus, StackView, TEMPLATE_HASH_OUTPUT, delete_retry_backoff,
    plan_delete, plan_ensure,
};
use crate::context::{Shared, StackOpLabels};

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
    /// Whether an existing stack may be updated now.
    pub may_update: bool,
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
}

/// The status entry recorded for a stack in the owning object's status.
pub fn status_entry(
    kind: StackKind,
    name: &str,
    status: &str,
    reason: Option<String>,
    previous: Option<&StatusEntry>,
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
    }
}

fn event_reason(status: &str) -> &'static str {
    if status.ends_with("_IN_PROGRESS") {
        "CFInProgress"
    } else if status.ends_with("FAILED") || status == "ROLLBACK_COMPLETE" {
        "CFFailed"
    } else if status == "DELETED" || status == "DELETE_COMPLETE" {
        "CFDeleted"
    } else {
        "CFCompleted"
    }
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

/// Emit an event when the observed status differs from the recorded one.
async fn note_transition<K>(
    shared: &Shared,
    obj: &K,
    kind: StackKind,
    name: &str,
    observed: &str,
    recorded: Option<&StatusEntry>,
) where
    K: kube::Resource<DynamicType = ()>,
{
    let before = recorded.map(|r| r.status.as_str());
    if before == Some(observed) {
        return;
    }
    let labels =
        StackOpLabels { stack: kind.as_str().to_string(), operation: observed.to_string(), result: "observed".into() };
    shared.metrics.transitions.get_or_create(&labels).inc();
    let note = match before {
        Some(b) => format!("stack {name}: {b} → {observed}"),
        None => format!("stack {name}: {observed}"),
    };
    shared.event(obj, event_reason(observed), note).await;
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
    let DesiredStack { kind, name, mut template, tags, may_update, canonical_hash } = desired;
    let hash = canonical_hash.unwrap_or_else(|| template.hash());
    template.output(
        TEMPLATE_HASH_OUTPUT,
        serde_json::Value::String(hash.clone()),
        Some("sha256 of this template without this output"),
    );
    let observed =
        timed(shared, kind, "describe", shared.stacks.get(&aws.cache_key(), aws.cfn.as_ref(), &name)).await?;
    if let Some(view) = &observed {
        note_transition(shared, obj, kind, &name, view.status.as_str(), recorded).await;
    }
    let step = plan_ensure(observed.as_ref(), &hash, may_update);
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
            crate::services::put_object(aws, bucket, &key, body.into_bytes(), &hash, "application/json").await?;
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
    let progress = match step {
        EnsureStep::Ready => {
            let Some(view) = observed else {
                return Err(ResourceError::msg(
                    "Internal",
                    format!("stack {name} planned ready without being observed"),
                ));
            };
            Progress::Ready(view)
        }
        EnsureStep::Wait { .. } => Progress::Pending,
        EnsureStep::Create => {
            let req = request().await?;
            match timed(shared, kind, "create", aws.cfn.create(&req)).await {
                Ok(()) | Err(CfnError::AlreadyExists(_)) => {}
                Err(e) => return Err(e.into()),
            }
            aws_invalidate(shared, aws);
            shared
                .event(obj, "CFCreateRequested", format!("creating stack {name} in account {}", aws.account_id))
                .await;
            Progress::Pending
        }
        EnsureStep::Update { deployed } => {
            let req = request().await?;
            match timed(shared, kind, "update", aws.cfn.update(&req)).await {
                Ok(()) | Err(CfnError::NoUpdates(_)) => {}
                Err(e) => return Err(e.into()),
            }
            aws_invalidate(shared, aws);
            shared
                .event(
                    obj,
                    "CFUpdateRequested",
                    format!(
                        "updating stack {name}: template {} → {}",
                        deployed.as_deref().map_or("(no hash)", |d| &d[..d.len().min(12)]),
                        &hash[..12]
                    ),
                )
                .await;
            Progress::Pending
        }
        EnsureStep::DeleteFailedCreate { reason } => {
            if observed.as_ref().is_some_and(|v| v.termination_protection) {
                timed(shared, kind, "lift_protection", aws.cfn.set_termination_protection(&name, false)).await?;
            }
            timed(shared, kind, "delete", aws.cfn.delete(&name)).await?;
            aws_invalidate(shared, aws);
            shared
                .warning(
                    obj,
                    "CFRecreate",
                    format!(
                        "stack {name} failed to create ({}); deleting it to create it again",
                        reason.as_deref().unwrap_or("no reason given")
                    ),
                )
                .await;
            Progress::Pending
        }
        EnsureStep::ContinueRollback => {
            timed(shared, kind, "continue_rollback", aws.cfn.continue_update_rollback(&name)).await?;
            aws_invalidate(shared, aws);
            shared
                .warning(
                    obj,
                    "CFContinueRollback",
                    format!("stack {name} is UPDATE_ROLLBACK_FAILED; continuing the rollback"),
                )
                .await;
            Progress::Pending
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
    };
    let entry = status_entry(kind, &name, current.as_deref().unwrap_or("CREATE_REQUESTED"), reason, recorded);
    Ok((progress, entry))
}

fn aws_invalidate(shared: &Shared, aws: &AccountClients) {
    shared.stacks.invalidate(&aws.cache_key());
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

/// The stack must be gone: lift termination protection, delete, wait; a failed delete is retried
/// with backoff and reported naming the resources that failed.
pub async fn delete<K>(
    shared: &Shared,
    aws: &AccountClients,
    obj: &K,
    kind: StackKind,
    name: &str,
) -> Result<Deletion, ResourceError>
where
    K: kube::Resource<DynamicType = ()>,
{
    let observed = timed(shared, kind, "describe", shared.stacks.get(&aws.cache_key(), aws.cfn.as_ref(), name)).await?;
    let step = plan_delete(observed.as_ref());
    let memo_key = format!("{}/{name}", aws.cache_key());
    match step {
        DeleteStep::Gone => {
            if shared.memo.lock().delete_attempts.remove(&memo_key).is_some() || observed.is_some() {
                shared.event(obj, "CFDeleted", format!("stack {name} is deleted")).await;
            }
            Ok(Deletion::Gone)
        }
        DeleteStep::Wait { .. } => Ok(Deletion::Pending),
        DeleteStep::LiftProtection => {
            timed(shared, kind, "lift_protection", aws.cfn.set_termination_protection(name, false)).await?;
            aws_invalidate(shared, aws);
            shared.event(obj, "CFDelete", format!("termination protection of stack {name} lifted")).await;
            Ok(Deletion::Pending)
        }
        DeleteStep::Delete => {
            shared.memo.lock().delete_attempts.entry(memo_key).or_insert(0);
            match timed(shared, kind, "delete", aws.cfn.delete(name)).await {
                Ok(()) | Err(CfnError::NotFound(_)) => {}
                Err(e) => {
                    aws_invalidate(shared, aws);
                    return Err(e.into());
                }
            }
            aws_invalidate(shared, aws);
            shared
                .event(obj, "CFDeleteRequested", format!("deleting stack {name} in account {}", aws.account_id))
                .await;
            Ok(Deletion::Pending)
        }
        DeleteStep::RetryFailedDelete { reason } => {
            let failed =
                timed(shared, kind, "describe_resources", aws.cfn.failed_resources(name)).await.unwrap_or_default();
            let names = if failed.is_empty() {
                reason.clone().unwrap_or_else(|| "no reason given".into())
            } else {
                failed.iter().map(|(id, why)| format!("{id} ({why})")).collect::<Vec<_>>().join(", ")
            };
            let message = format!("deleting stack {name} failed: {names}");
            let attempt = {
                let mut memo = shared.memo.lock();
                let a = memo.delete_attempts.entry(memo_key).or_insert(0);
                *a += 1;
                *a
            };
            shared.warning(obj, "CFDeleteFailed", message.clone()).await;
            timed(shared, kind, "delete", aws.cfn.delete(name)).await?;
            aws_invalidate(shared, aws);
            Ok(Deletion::Failed { message, retry_after: delete_retry_backoff(attempt.saturating_sub(1)) })
        }
        DeleteStep::ContinueRollback => {
            timed(shared, kind, "continue_rollback", aws.cfn.continue_update_rollback(name)).await?;
            aws_invalidate(shared, aws);
            Ok(Deletion::Pending)
        }
    }
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

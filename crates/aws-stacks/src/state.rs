//! The CloudFormation stack state machine: what to do with a stack, given how it is observed and
//! what is wanted. Pure: no call is made here; the operator carries the steps out and requeues.
//!
//! [`plan_ensure`] and [`plan_delete`]: given the observed stack (or its absence) and
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

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

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

/// Whether a stack may be deleted for the cluster whose AWSCluster has UID `owner_uid`: it
/// carries that UID in tag `giantswarm.io/cluster-uid`, or no such tag (an earlier version
/// created it; the caller holds the claim of the cluster id). A stack with another UID is
/// another cluster's, and so is a tagged one when the owner's UID is unknown (empty).
pub fn owned_by(stack: &StackView, owner_uid: &str) -> bool {
    stack.tags.get(crate::names::tags::CLUSTER_UID).is_none_or(|uid| !owner_uid.is_empty() && uid == owner_uid)
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

/// Backoff between attempts at a failure the operator repairs by itself (a rolled-back update,
/// a rolled-back create, a failed delete): 30 s doubling per attempt, capped at 10 minutes.
/// `attempt` counts from 0.
pub fn retry_backoff(attempt: u32) -> Duration {
    let secs = 30u64.saturating_mul(1u64 << attempt.min(5));
    Duration::from_secs(secs.min(600))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stack_is_deleted_only_for_the_cluster_whose_uid_it_carries() {
        let mut stack = StackView {
            name: "cluster-al9qy-tccp".into(),
            id: "arn:aws:cloudformation:eu-central-1:1:stack/cluster-al9qy-tccp/1".into(),
            status: StackStatus::parse("CREATE_COMPLETE"),
            status_reason: None,
            outputs: BTreeMap::new(),
            tags: BTreeMap::from([(crate::names::tags::CLUSTER.to_string(), "al9qy".to_string())]),
            termination_protection: false,
        };
        assert!(owned_by(&stack, "uid-a"), "an earlier version's stack, without the tag");
        assert!(owned_by(&stack, ""));
        stack.tags.insert(crate::names::tags::CLUSTER_UID.to_string(), "uid-a".to_string());
        assert!(owned_by(&stack, "uid-a"));
        assert!(!owned_by(&stack, "uid-b"), "another cluster's");
        assert!(!owned_by(&stack, ""), "unknown owner, tagged stack");
    }

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
}

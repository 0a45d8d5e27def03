//! The stacks a control plane, node pool or cluster records in its status, and the deletion of
//! the stacks of a control plane or node pool whose AWSCluster is gone.

use apis::aws::{RecordedAccount, StackStatus};
use operatorkit::ResourceError;

use super::lookup::clients_of_role;
use super::status::{NamespacedObject, READY, WithConditions, mark_not_ready, set_condition, write_status};
use crate::context::Shared;

/// A status with stack entries besides its conditions.
pub trait WithStacks: WithConditions {
    /// The stack entries.
    fn stacks_mut(&mut self) -> &mut Vec<StackStatus>;
}

/// Merge one reconcile's stack entries into the recorded ones, by name.
pub fn merge_stacks(recorded: &mut Vec<StackStatus>, seen: &[StackStatus]) {
    for s in seen {
        match recorded.iter_mut().find(|r| r.name == s.name) {
            Some(r) => *r = s.clone(),
            None => recorded.push(s.clone()),
        }
    }
    recorded.sort_by(|a, b| a.name.cmp(&b.name));
}

/// The stacks a status lists that are not known to be deleted.
pub fn recorded_stacks(entries: Option<&[StackStatus]>) -> Vec<String> {
    entries.unwrap_or_default().iter().filter(|e| e.status != "DELETE_COMPLETE").map(|e| e.name.clone()).collect()
}

/// Record a stack entry of the delete path in `status` and write it; while a delete failed,
/// also `Ready=False` (reason `StackDeleteFailed`) with `failed` as the message.
pub async fn record_deletion<K, St>(
    shared: &Shared,
    obj: &K,
    current: Option<&St>,
    status: &mut St,
    entry: StackStatus,
    failed: Option<String>,
) -> Result<(), kube::Error>
where
    K: NamespacedObject,
    St: WithStacks,
{
    merge_stacks(status.stacks_mut(), &[entry]);
    if let Some(message) = failed {
        set_condition(status.conditions_mut(), READY, false, "StackDeleteFailed", message, obj.meta().generation);
    }
    write_status(&shared.client, obj, current, status).await
}

/// A status that records where its object's stacks live ([`RecordedAccount`]).
pub trait WithAccount: WithStacks {
    /// The recorded account.
    fn account(&self) -> Option<&RecordedAccount>;
    /// The recorded account, to set it.
    fn account_mut(&mut self) -> &mut Option<RecordedAccount>;
}

/// Record in the status of a control plane or node pool where its stacks live (role and region
/// of its AWSCluster, and that cluster's UID), before it creates any, so that it can still find
/// and delete them if its AWSCluster disappears. Only the status is used for this: a tenant who
/// may edit the object may set its annotations and labels, but not its status.
pub async fn remember_account<K, St>(
    shared: &Shared,
    obj: &K,
    current: Option<&St>,
    status: &mut St,
    account: RecordedAccount,
) -> Result<(), kube::Error>
where
    K: NamespacedObject,
    St: WithAccount,
{
    if status.account() == Some(&account) {
        return Ok(());
    }
    *status.account_mut() = Some(account);
    write_status(&shared.client, obj, current, status).await
}

/// In which account a stack of a control plane or node pool lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Account {
    /// The tenant account.
    Tenant,
    /// The management-cluster account.
    ControlPlane,
}

/// The `Ready` reason of a control plane or node pool whose AWSCluster is gone while stacks it
/// lists have no recorded account: nothing the object itself carries proves where they are.
pub const ACCOUNT_UNPROVEN: &str = "AccountUnproven";

/// Delete the stacks of a control plane or node pool whose AWSCluster is gone, in order,
/// releasing the instances their groups hold on terminating hooks
/// ([`crate::drainers::release_orphaned`]). They are looked up in the account it recorded ([`remember_account`]) by name and tags (cluster
/// id and stack kind), so nothing but its own stacks is touched. Returns `proceed` once none is
/// left, and an outcome that keeps the finalizer while any exists.
///
/// The account is the one recorded in `status.account`, never one named by an annotation: a
/// tenant may create an object labelled with another cluster's id, but cannot give it a status.
/// Without a recorded account the object never created anything, unless its status lists stacks
/// (an object of an older version): then the finalizer stays, with `Ready=False`
/// ([`ACCOUNT_UNPROVEN`]) saying how to go on, since dropping it would leak what those stacks
/// hold.
pub async fn delete_orphaned_stacks<K, St>(
    shared: &Shared,
    obj: &K,
    current: Option<&St>,
    cluster_id: &str,
    stacks: &[(Account, aws_stacks::names::StackKind, String)],
    recorded_stacks: &[String],
) -> Result<operatorkit::Outcome, ResourceError>
where
    K: NamespacedObject,
    St: WithAccount,
{
    let keep = || operatorkit::Outcome::cancel_reconciliation().keep_finalizer().requeue_after(shared.config.poll);
    let Some(account) = current.and_then(|c| c.account()).cloned() else {
        if recorded_stacks.is_empty() {
            return Ok(operatorkit::Outcome::proceed());
        }
        let message = format!(
            "AWSCluster {cluster_id} is gone and no account is recorded in status.account for stacks {}: restore the AWSCluster (and its credential Secret) so that aws-operator records the account and deletes them, or delete them by hand and then remove the finalizers",
            recorded_stacks.join(", ")
        );
        mark_not_ready(&shared.client, obj, current, ACCOUNT_UNPROVEN, message).await?;
        return Ok(keep());
    };
    let (tenant, cp) = clients_of_role(shared, &account.tenant_role_arn, &account.region).await?;
    // One status across the stacks: a stack found gone keeps its entry's update when the next
    // stack's deletion writes the status again.
    let mut status = current.cloned().unwrap_or_default();
    let mut written = current.cloned();
    let owner_uid = account.cluster_uid.clone();
    for (account, kind, name) in stacks {
        let aws = match account {
            Account::Tenant => &tenant,
            Account::ControlPlane => &cp,
        };
        let tags = aws_stacks::names::tags::CLUSTER;
        let ours = aws.cfn.describe_all().await?.into_iter().any(|v| {
            &v.name == name
                && v.tags.get(tags).map(String::as_str) == Some(cluster_id)
                && v.tags.get(aws_stacks::names::tags::STACK).map(String::as_str) == Some(kind.as_str())
                && aws_stacks::state::owned_by(&v, &owner_uid)
        });
        if !ours {
            continue;
        }
        // Its groups' instances waiting on their terminating hook go at once: nothing can
        // drain them without the cluster.
        if matches!(kind, aws_stacks::names::StackKind::Tccpn | aws_stacks::names::StackKind::Tcnp) {
            crate::drainers::release_orphaned(shared, aws, obj, cluster_id, name).await?;
        }
        let recorded = status.stacks_mut().iter().find(|e| &e.name == name).cloned();
        let (deletion, entry) =
            crate::stack_ops::delete(shared, aws, obj, *kind, name, recorded.as_ref(), &owner_uid).await?;
        let (out, failed) = deletion.stop(shared.config.poll);
        record_deletion(shared, obj, written.as_ref(), &mut status, entry, failed).await?;
        written = Some(status.clone());
        if let Some(out) = out {
            return Ok(out);
        }
    }
    Ok(operatorkit::Outcome::proceed())
}

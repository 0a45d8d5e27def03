//! The drainers: Auto Scaling terminating lifecycle hooks meet DrainerConfigs.
//!
//! A control-plane, node-pool or legacy worker group whose instance is about to go holds it in
//! `Terminating:Wait` (the hooks of reference §6.4). The drainers create a DrainerConfig for the
//! instance's workload-cluster node, let the drain executor ([`node_lifecycle::drain`]) drain
//! it, and complete the lifecycle action once it is drained or timed out, so that pods leave a
//! node before its instance does (reference §6.5).
//!
//! The decision is pure ([`plan`]); the controllers read and apply it.

pub mod plan;

use std::time::Duration;

use apis::drainer::DrainerConfig;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, Resource, ResourceExt};
use operatorkit::ResourceError;

use crate::aws::{AccountClients, AwsError, api_error};
use crate::context::Shared;
use plan::{CompletionReason, GroupInstance, LifecycleState, Owner};

/// The lifecycle action result the drainers send: the instance may go.
const CONTINUE: &str = "CONTINUE";
/// Whether `err` says the instance no longer waits on the hook (completed before, or gone):
/// the completion is then done.
fn already_completed(err: &AwsError) -> bool {
    err.code() == "ValidationError"
}

/// One drainer pass for `owner`'s groups (those whose name starts with `group_prefix`, e.g.
/// `cluster-al9qy-tcnp-g3j50-`): reads, plans ([`plan::plan`]) and applies; returns how many
/// instances still wait, for which the caller keeps its finalizer and looks again at the poll
/// interval.
///
/// `steady` says the owner's stack is not changing and its cluster is not being deleted. A
/// steady owner that was settled at its last pass (no instance waiting, no DrainerConfig) reads
/// the account's shared listing if it is younger than `--drainer-poll-seconds`: an account of
/// steady clusters is then listed once per drainer poll, not once per owner's poll, and an
/// instance that starts to wait there is seen within two drainer polls. Any other owner wants a
/// listing younger than `--drainer-active-poll-seconds`.
///
/// `obj` receives the events: Normal for each completed lifecycle action, Warning for each drain
/// that timed out.
pub async fn pass<K>(
    shared: &Shared,
    tenant: &AccountClients,
    obj: &K,
    owner: &Owner,
    group_prefix: &str,
    deleting: bool,
    steady: bool,
) -> Result<usize, ResourceError>
where
    K: Resource<DynamicType = ()>,
{
    let account = tenant.cache_key();
    let owner_key = format!("{}/{}", owner.namespace, owner.selector());
    let settled = shared.instances.is_settled(&account, &owner_key).await;
    let max_age = if steady && settled { shared.config.drainer_poll } else { shared.config.drainer_active_poll };
    let instances: Vec<GroupInstance> = shared
        .instances
        .instances(tenant, max_age)
        .await?
        .into_iter()
        .filter(|i| i.group.starts_with(group_prefix))
        .collect();
    let any_waiting = instances.iter().any(|i| i.state == LifecycleState::TerminatingWait);
    if !any_waiting && settled {
        return Ok(0);
    }
    let api: Api<DrainerConfig> = Api::namespaced(shared.client.clone(), &owner.namespace);
    let existing = api.list(&ListParams::default().labels(&owner.selector())).await?.items;

    let mut dns = shared.instances.dns(tenant).await;
    let mut decided = plan::plan(owner, &instances, &dns, &existing, deleting);
    if !decided.describe.is_empty() {
        shared.instances.describe(tenant, &decided.describe).await?;
        dns = shared.instances.dns(tenant).await;
        decided = plan::plan(owner, &instances, &dns, &existing, deleting);
    }

    for name in &decided.delete {
        match api.delete(name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(e.into()),
        }
    }
    for dc in &decided.create {
        match api.create(&PostParams::default(), dc).await {
            Ok(_) => {
                let instance = dc.labels().get(plan::INSTANCE_LABEL).cloned().unwrap_or_default();
                shared
                    .event(
                        obj,
                        "DrainerConfigCreated",
                        format!("draining node {} of instance {instance}", dc.name_any()),
                    )
                    .await;
            }
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(e.into()),
        }
    }
    for c in &decided.complete {
        let done = tenant
            .autoscaling
            .complete_lifecycle_action()
            .auto_scaling_group_name(&c.group)
            .lifecycle_hook_name(&c.hook)
            .instance_id(&c.instance_id)
            .lifecycle_action_result(CONTINUE)
            .send()
            .await
            .map_err(|e| api_error("AutoScaling", "CompleteLifecycleAction", e));
        match done {
            Ok(_) => {}
            Err(e) if already_completed(&e) => {
                tracing::debug!(instance = %c.instance_id, error = %e, "the instance no longer waits on its hook");
                continue;
            }
            Err(e) => return Err(e.into()),
        }
        let node = c.node.as_deref().unwrap_or("(none)");
        let note = match c.reason {
            CompletionReason::Drained => format!("instance {} may go: node {node} is drained", c.instance_id),
            CompletionReason::DrainTimeout => {
                format!("instance {} goes although draining node {node} timed out", c.instance_id)
            }
            CompletionReason::ClusterDeleting => {
                format!("instance {} goes without draining: the cluster is being deleted", c.instance_id)
            }
            CompletionReason::NoNode => format!("instance {} goes: it has no node to drain", c.instance_id),
        };
        if c.reason.is_warning() {
            shared.warning(obj, c.reason.event_reason(), note).await;
        } else {
            shared.event(obj, c.reason.event_reason(), note).await;
        }
    }
    if !decided.complete.is_empty() {
        shared.instances.invalidate(&account);
    }
    let now_settled = decided.waiting == 0 && existing.len() == decided.delete.len() && decided.create.is_empty();
    shared.instances.set_settled(&account, &owner_key, now_settled).await;
    Ok(decided.waiting)
}

/// Release the waiting instances of a control plane or node pool whose AWSCluster is gone, at
/// once and without a drain (the workload cluster's address went with the cluster), while its
/// stack `stack` is deleted: otherwise each instance would wait out its hook's timeout (an hour
/// for a pool) before CloudFormation could delete its group. Returns how many still wait.
pub async fn release_orphaned<K>(
    shared: &Shared,
    tenant: &AccountClients,
    obj: &K,
    cluster_id: &str,
    stack: &str,
) -> Result<usize, ResourceError>
where
    K: Resource<DynamicType = ()>,
{
    use aws_stacks::stacks::{tccpn, tcnp};
    let name = obj.meta().name.clone().unwrap_or_default();
    let (kind, hook, hook_timeout) = if stack.ends_with("-tccpn") {
        (plan::OwnerKind::ControlPlane(name), tccpn::TERMINATING_HOOK, tccpn::TERMINATING_HOOK_TIMEOUT)
    } else {
        (plan::OwnerKind::NodePool(name), tcnp::TERMINATING_HOOK, tcnp::TERMINATING_HOOK_TIMEOUT)
    };
    let owner = Owner {
        cluster_id: cluster_id.to_string(),
        namespace: obj.meta().namespace.clone().unwrap_or_default(),
        api_endpoint: String::new(),
        kind,
        operator_version: shared.config.version.clone(),
        hook: hook.to_string(),
        drain_timeout: plan::drain_timeout(shared.config.drain_timeout, Duration::from_secs(hook_timeout)),
    };
    pass(shared, tenant, obj, &owner, &format!("{stack}-"), true, false).await
}

/// The drainers' step of a controller, shared by the control-plane and node-pool controllers:
/// one [`pass`] for `owner`'s groups of `cluster`, as an outcome. While instances wait, or the
/// owner's stack is changing (a rolling update or a delete holds instances next), or the
/// cluster is being deleted, the object is looked at again at the active poll interval
/// (`--drainer-active-poll-seconds`) and, on the delete path, keeps its finalizer; otherwise at
/// the drainer poll interval, since nothing in Kubernetes tells of an instance that starts to
/// wait. A DrainerConfig that drained requeues its owner (a watch of the controllers), so the
/// completion follows the drain at once.
/// A failing pass (AWS refusing, the management cluster unreachable) becomes a Warning event and
/// a retry at the active poll interval, so that it never holds up the object's stacks.
pub async fn step<K>(
    shared: &Shared,
    tenant: &AccountClients,
    cluster: &apis::aws::AWSCluster,
    obj: &K,
    kind: plan::OwnerKind,
    hook: &str,
    deleting_obj: bool,
) -> operatorkit::Outcome
where
    K: Resource<DynamicType = ()>,
{
    use aws_stacks::names::{self, StackKind};
    use aws_stacks::stacks::{tccpn, tcnp};
    let id = cluster.name_any();
    let (hook_timeout, stack) = match &kind {
        plan::OwnerKind::ControlPlane(_) => {
            (tccpn::TERMINATING_HOOK_TIMEOUT, names::stack_name(&id, StackKind::Tccpn, None))
        }
        plan::OwnerKind::NodePool(md) => {
            (tcnp::TERMINATING_HOOK_TIMEOUT, names::stack_name(&id, StackKind::Tcnp, Some(md)))
        }
        plan::OwnerKind::LegacyCluster => {
            let stack = aws_stacks::stacks::legacy::LegacyStack::GuestMain;
            (tcnp::TERMINATING_HOOK_TIMEOUT, aws_stacks::stacks::legacy::stack_name(&id, stack))
        }
    };
    let owner = Owner {
        cluster_id: id.clone(),
        namespace: obj.meta().namespace.clone().unwrap_or_default(),
        api_endpoint: names::api_host(&id, &cluster.spec.cluster.dns.domain),
        kind,
        operator_version: shared.config.version.clone(),
        hook: hook.to_string(),
        drain_timeout: plan::drain_timeout(shared.config.drain_timeout, Duration::from_secs(hook_timeout)),
    };
    let deleting = cluster.metadata.deletion_timestamp.is_some();
    owner_step(shared, tenant, obj, &owner, &stack, &format!("{stack}-"), deleting, deleting_obj).await
}

/// [`step`] for an `owner` already built: one [`pass`] over the groups of `stack` whose names
/// start with `group_prefix`, as an outcome. `deleting` says the owner's cluster is being
/// deleted (nothing is drained then), `deleting_obj` that `obj` is, so it keeps its finalizer
/// while instances wait.
#[allow(clippy::too_many_arguments)]
pub async fn owner_step<K>(
    shared: &Shared,
    tenant: &AccountClients,
    obj: &K,
    owner: &Owner,
    stack: &str,
    group_prefix: &str,
    deleting: bool,
    deleting_obj: bool,
) -> operatorkit::Outcome
where
    K: Resource<DynamicType = ()>,
{
    let again = operatorkit::Outcome::proceed().requeue_after(shared.config.drainer_active_poll);
    // A stack that is changing (a rolling update, a delete) is about to hold instances: look
    // at the active pace until it settles. The stack view comes from the shared cache.
    let changing = shared
        .stacks
        .get(&tenant.cache_key(), tenant.cfn.as_ref(), stack)
        .await
        .ok()
        .flatten()
        .is_some_and(|v| v.status.as_str().ends_with("_IN_PROGRESS"));
    match pass(shared, tenant, obj, owner, group_prefix, deleting, !changing && !deleting).await {
        Ok(0) if changing || deleting => again,
        Ok(0) => operatorkit::Outcome::proceed().requeue_after(shared.config.drainer_poll),
        Ok(waiting) => {
            tracing::debug!(%stack, waiting, "instances wait in Terminating:Wait");
            if deleting_obj { again.keep_finalizer() } else { again }
        }
        Err(e) => {
            shared.warning(obj, "DrainersFailed", format!("drainers of {stack}: {e}")).await;
            if deleting_obj { again.keep_finalizer() } else { again }
        }
    }
}

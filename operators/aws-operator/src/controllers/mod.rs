//! The five controllers, one module each, and the helpers they share.
//!
//! Each controller module reads top-down: its per-reconcile state, then its resources in the
//! order they run — dereference (read the object's Release, cluster, credentials), validate
//! (bad input stops here, before AWS is touched), build (pure: templates and parameters from
//! `aws_stacks`), apply (through [`crate::aws`]), status — and last the deletion path.
//!
//! | module | what it holds |
//! | --- | --- |
//! | [`cluster`] | AWSCluster: key, buckets, CIDR, TCCPI / TCCP / TCCPF, zone delegation, `master` Service, status, teardown |
//! | [`control_plane`] | AWSControlPlane: the masters' node configs and TCCPN |
//! | [`node_pool`] | AWSMachineDeployment: the pool's CIDR, node config, TCNP and TCNPF |
//! | [`drift`] | AWSCluster: CloudFormation drift detection of the cluster's stacks, `Drifted`, and remediation on request |
//! | [`unhealthy`] | AWSCluster: terminates the instances of workload-cluster nodes NotReady too long, behind the circuit breaker shared with kvm-operator |
//! | [`legacy`] | AWSConfig, a legacy cluster: key, buckets, node configs, `host-setup` / `guest-main` / `host-main`, status, teardown |
//! | [`max_age`] | AWSMachineDeployment: replaces instances past `spec.nodePool.maxNodeAge`, one at a time, in the window and within the rollout limits |
//! | [`lookup`] | dereference and validate: invalid input, the Release, the tenant role and clients, a cluster's children, template inputs and tags |
//! | [`status`] | `operatorkit::status`, the status lifecycle both operators share (`Ready`, status writes, rejected input, the status hook), under its name here; its traits are implemented for this operator's kinds in `apis::status` |
//! | [`stack_entries`] | the stack entries of a status, and the stacks of a control plane or node pool whose cluster is gone |

pub mod cluster;
pub mod control_plane;
pub mod drift;
pub mod legacy;
pub mod lookup;
pub mod max_age;
pub mod node_pool;
pub mod stack_entries;
pub mod unhealthy;
pub use operatorkit::status;

use std::sync::Arc;

use apis::aws::{AWSClusterStatus, AWSControlPlaneStatus, AWSMachineDeploymentStatus, RecordedAccount, StackStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use operatorkit::{ResourceSet, ResourceSetBuilder};
use semver::VersionReq;

use crate::context::Shared;

/// The finalizer this operator puts on the Secrets a cluster uses
/// ([`operatorkit::held_secrets`]), until the cluster's teardown is complete.
/// The maintenance settings' condition ([`crate::maintenance::set_settings_condition`]) on `obj`'s
/// new `conditions`, with the Warning event of a new `False` condition.
/// Detach every managed policy attached to role `role` of a stack about to be deleted (the
/// original's `cleanuptccpniamroles` and `cleanuptcnpiamroles`): the stacks attach none, so each
/// is someone else's, and IAM refuses to delete a role with a policy attached, which would fail
/// the stack's deletion. Each detachment is a Normal event `PolicyDetached` on `obj`; the policy
/// itself is left alone.
pub async fn detach_foreign_policies<K>(
    shared: &Shared,
    aws: &crate::aws::AccountClients,
    obj: &K,
    role: &str,
) -> Result<(), operatorkit::ResourceError>
where
    K: kube::Resource<DynamicType = ()>,
{
    for arn in crate::aws::iam::attached_policies(aws, role).await? {
        crate::aws::iam::detach_policy(aws, role, &arn).await?;
        let note = format!(
            "detached IAM policy {arn} from role {role}: the role's stack is being deleted, and IAM refuses to delete a role with a policy attached"
        );
        shared.event(obj, "PolicyDetached", note).await;
    }
    Ok(())
}

pub async fn record_maintenance_settings<K>(
    shared: &Shared,
    obj: &K,
    conditions: &mut Vec<Condition>,
    before: &[Condition],
    settings: &Result<(), String>,
) where
    K: kube::Resource<DynamicType = ()>,
{
    let generation = obj.meta().generation;
    if let Some(message) = crate::maintenance::set_settings_condition(conditions, before, settings, generation) {
        shared.warning(obj, crate::maintenance::INVALID_MAINTENANCE, message).await;
    }
}

/// Announce with a Normal event that `obj`'s disruptive work waits for the maintenance window
/// (`message`), once: when the wait starts ([`crate::maintenance::wait_starts`]).
pub async fn announce_maintenance_wait<K>(shared: &Shared, obj: &K, before: &[Condition], message: &str)
where
    K: kube::Resource<DynamicType = ()>,
{
    if crate::maintenance::wait_starts(before) {
        shared.event(obj, crate::maintenance::WAITING_FOR_WINDOW, message.to_string()).await;
    }
}

/// The start of a controller's resource set `name` for the Releases `requirement` matches: each
/// reconcile's state is `state(shared, object)`. The controller adds its resources in order.
pub fn resource_set<K, S>(
    shared: Arc<Shared>,
    name: String,
    requirement: VersionReq,
    state: fn(Arc<Shared>, &K) -> S,
) -> ResourceSetBuilder<K, S>
where
    K: Send + Sync + 'static,
    S: Send + 'static,
{
    ResourceSet::builder(name, requirement, move |obj: Arc<K>, _| {
        let shared = shared.clone();
        async move { Ok(state(shared, &obj)) }
    })
}

/// Where this operator's kinds keep their stack entries ([`stack_entries::WithStacks`]); their
/// conditions and status are `apis::status`'s.
macro_rules! kinds {
    ($($status:ty),*) => {$(
        impl stack_entries::WithStacks for $status {
            fn stacks_mut(&mut self) -> &mut Vec<StackStatus> {
                &mut self.stacks
            }
        }
    )*};
}

kinds!(AWSClusterStatus, AWSControlPlaneStatus, AWSMachineDeploymentStatus, apis::aws_config::AWSConfigStatus);

/// The kinds that record where their stacks live ([`stack_entries::WithAccount`]).
macro_rules! accounts {
    ($($status:ty),*) => {$(
        impl stack_entries::WithAccount for $status {
            fn account(&self) -> Option<&RecordedAccount> {
                self.account.as_ref()
            }
            fn account_mut(&mut self) -> &mut Option<RecordedAccount> {
                &mut self.account
            }
        }
    )*};
}

accounts!(AWSControlPlaneStatus, AWSMachineDeploymentStatus);

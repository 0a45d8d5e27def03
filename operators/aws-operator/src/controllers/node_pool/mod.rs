//! The AWSMachineDeployment controller: the node-pool CIDR, the pool's node config, the
//! TCNP (tenant) and TCNPF (management account) stacks, and the drainers of the pool's group
//! ([`crate::drainers`]).
//!
//! Pool updates that replace instances wait for the masters, and the cluster autoscaler steps
//! aside while the pool rolls ([`crate::upgrade`], reference §5.7.1); scaling is never held.
//! Deletion removes TCNP, then TCNPF.
//!
//! | module | what it holds |
//! | --- | --- |
//! | here | the per-reconcile state, the status, and the resources in the order they run: [`Inputs`] (dereference and validate), [`Drainers`], [`Ipam`] |
//! | `pool` | [`Pool`]: the node config, TCNP and TCNPF, top-down |
//! | `roll` | when TCNP's update runs: masters first, the window, the rollout slots, the autoscaler |
//! | [`build`] | pure: what the stacks are rendered from ([`PoolStacks`], shared with `aws-operator render`), the status's messages |

pub mod build;
mod pool;
mod roll;

use std::sync::Arc;

use apis::aws::{AWSCluster, AWSMachineDeployment, AWSMachineDeploymentStatus, StackStatus as StatusEntry};
use apis::labels;
use apis::release::Release;
use aws_stacks::names::{self, StackKind};
use aws_stacks::stacks::tcnp;
use kube::ResourceExt;
use operatorkit::{Outcome, Resource, ResourceError, ResourceSet, resource};
use semver::VersionReq;

pub use build::{PoolStacks, pool_flatcar};
pub use pool::Pool;

use crate::aws::AccountClients;
use crate::context::Shared;
use crate::controllers;
use crate::controllers::status::READY;

/// The controller's name (and finalizer suffix).
pub const CONTROLLER: &str = "aws-operator-machine-deployment-controller";

/// The resource set `name` for the Releases `requirement` matches: the steps in the order they
/// run.
pub fn resource_set(shared: Arc<Shared>, name: String, requirement: VersionReq) -> ResourceSet<AWSMachineDeployment> {
    controllers::resource_set(shared, name, requirement, PoolState::new)
        .resource(Inputs)
        .resource(Drainers)
        .resource(Ipam)
        .resource(Pool)
        .build()
}

/// What the resources of one AWSMachineDeployment reconcile share.
#[derive(Debug)]
pub struct PoolState {
    shared: Arc<Shared>,
    cluster: Option<AWSCluster>,
    release: Option<Release>,
    tenant: Option<Arc<AccountClients>>,
    cp: Option<Arc<AccountClients>>,
    status: AWSMachineDeploymentStatus,
    stacks: Vec<StatusEntry>,
    /// The pool's Auto Scaling group, once TCNP names it.
    group: Option<String>,
    waiting: Option<String>,
    /// The `Ready` reason of a failure being retried; `waiting` holds its message.
    failure: Option<&'static str>,
    ready: bool,
    /// What is wrong with the rolling-update annotations, once the pool's stack was built
    /// (the [`ROLLING_UPDATE`] condition); `None` before.
    rolling_update: Option<Vec<String>>,
    /// Whether the cluster's maintenance settings and the pool's max age can be used (the
    /// [`crate::maintenance::SETTINGS`] condition); `None`: not looked at, or not set.
    maintenance: Option<Result<(), String>>,
    /// The workers' settings from the Cluster API objects ([`crate::capi::tuning`]).
    tuning: aws_stacks::ignition::NodeTuning,
}

/// The condition saying whether the rolling-update annotations
/// (`alpha.aws.giantswarm.io/update-max-batch-size`, `…/update-pause-time`) apply: `False`
/// with reason `InvalidAnnotation` names each ignored annotation, whose default applies.
pub const ROLLING_UPDATE: &str = "RollingUpdateSettings";

impl PoolState {
    /// A fresh state for `obj`.
    pub fn new(shared: Arc<Shared>, obj: &AWSMachineDeployment) -> Self {
        Self {
            shared,
            cluster: None,
            release: None,
            tenant: None,
            cp: None,
            status: obj.status.clone().unwrap_or_default(),
            stacks: Vec::new(),
            group: None,
            waiting: None,
            failure: None,
            ready: false,
            rolling_update: None,
            maintenance: None,
            tuning: Default::default(),
        }
    }
}

async fn write_status(state: &mut PoolState, obj: &AWSMachineDeployment) -> Result<(), ResourceError> {
    let mut status = state.status.clone();
    controllers::stack_entries::merge_stacks(&mut status.stacks, &state.stacks);
    let (ok, reason, message) = match (&state.waiting, state.ready) {
        (_, true) => (true, "StacksReady", "the node pool's stacks are ready".to_string()),
        (Some(w), _) => (false, state.failure.unwrap_or("Waiting"), w.clone()),
        (None, false) => (false, "StacksCreating", "the node pool's stacks are being created".to_string()),
    };
    controllers::status::set_condition(&mut status.conditions, READY, ok, reason, message, obj.metadata.generation);
    crate::approval::set_update_pending(&mut status.conditions, obj, &status.stacks);
    if let Some(problems) = &state.rolling_update {
        let (ok, reason, message) = if problems.is_empty() {
            (true, "Valid", "the rolling-update annotations, if any, apply".to_string())
        } else {
            (false, "InvalidAnnotation", problems.join("; "))
        };
        let changed = controllers::status::set_condition(
            &mut status.conditions,
            ROLLING_UPDATE,
            ok,
            reason,
            message.clone(),
            obj.metadata.generation,
        );
        let was_false = obj.status.as_ref().is_some_and(|s| {
            s.conditions.iter().any(|c| c.type_ == ROLLING_UPDATE && c.status == "False" && c.message == message)
        });
        if changed && !ok && !was_false {
            state.shared.warning(obj, "InvalidAnnotation", message).await;
        }
    }
    if let Some(settings) = &state.maintenance {
        let before = obj.status.as_ref().map_or(&[][..], |s| s.conditions.as_slice());
        controllers::record_maintenance_settings(&state.shared, obj, &mut status.conditions, before, settings).await;
    }
    controllers::status::write_status(&state.shared.client, obj, obj.status.as_ref(), &status).await?;
    state.status = status;
    Ok(())
}

/// Record invalid input in the status; the returned error becomes the Warning event.
async fn reject(state: &mut PoolState, obj: &AWSMachineDeployment, err: ResourceError) -> ResourceError {
    let (status, err) = controllers::status::reject(&state.shared.client, obj, obj.status.as_ref(), err).await;
    state.status = status;
    err
}

/// Finds the cluster, validates, resolves the Release and both accounts.
#[derive(Debug)]
pub struct Inputs;

impl Resource<AWSMachineDeployment, PoolState> for Inputs {
    fn name(&self) -> &str {
        "inputs"
    }

    async fn ensure_created(&self, state: &mut PoolState, obj: &AWSMachineDeployment) -> resource::Result<Outcome> {
        let shared = state.shared.clone();
        let checked = async {
            let Some(cluster) = controllers::lookup::cluster_of(&shared, obj).await? else {
                return Ok(None);
            };
            if let Err(errors) = obj.validate(&cluster.spec.provider.region) {
                return Err(operatorkit::error::field_errors(obj, errors).into());
            }
            // Nothing is built for a cluster that does not hold its id (yet).
            if controllers::lookup::claim_held(&shared, obj, &cluster).await?.is_none() {
                return Ok(None);
            }
            let capi = crate::capi::cluster_of(&shared.client, &shared.capi, &cluster).await?;
            let (ns, id) = (obj.namespace().unwrap_or_default(), cluster.name_any());
            let mds =
                crate::capi::machine_deployments_of(&shared.client, &shared.capi, &ns, &id, &obj.name_any()).await?;
            let release = controllers::lookup::release_of(&shared, obj).await?;
            let role = controllers::lookup::tenant_role(&shared, &cluster).await?;
            let region = &cluster.spec.provider.region;
            let (tenant, cp) = controllers::lookup::clients_of_role(&shared, &role, region).await?;
            Ok::<_, ResourceError>(Some((cluster, release, tenant, cp, role, capi, mds)))
        }
        .await;
        match checked {
            Ok(Some((cluster, release, tenant, cp, role, capi, mds))) => {
                let account = controllers::lookup::recorded_account(&cluster, role);
                let current = obj.status.as_ref();
                controllers::stack_entries::remember_account(&shared, obj, current, &mut state.status, account).await?;
                // Built with the Cluster API objects' values where the own are unset; the
                // AWSCluster names what its own fields override.
                let (cluster, _) = crate::capi::effective_cluster(&cluster, capi.as_ref());
                state.tuning = crate::capi::tuning(capi.as_ref(), &mds);
                state.cluster = Some(cluster);
                state.release = Some(release);
                state.tenant = Some(tenant);
                state.cp = Some(cp);
                Ok(Outcome::proceed())
            }
            Ok(None) => {
                state.waiting = Some("waiting for the AWSCluster named by label giantswarm.io/cluster".into());
                write_status(state, obj).await?;
                Ok(Outcome::cancel_reconciliation().requeue_after(state.shared.config.poll))
            }
            Err(e) if !e.is_retryable() => Err(reject(state, obj, e).await),
            Err(e) => Err(e),
        }
    }

    async fn ensure_deleted(&self, state: &mut PoolState, obj: &AWSMachineDeployment) -> resource::Result<Outcome> {
        let shared = state.shared.clone();
        let Some(cluster) = controllers::lookup::cluster_of(&shared, obj).await? else {
            // The cluster went first (its finalizer removed by hand, say): TCNP and TCNPF may
            // still exist.
            let id = controllers::lookup::cluster_id(obj)?;
            let md = obj.name_any();
            let stacks = [
                (
                    controllers::stack_entries::Account::Tenant,
                    StackKind::Tcnp,
                    names::stack_name(&id, StackKind::Tcnp, Some(&md)),
                ),
                (
                    controllers::stack_entries::Account::ControlPlane,
                    StackKind::Tcnpf,
                    names::stack_name(&id, StackKind::Tcnpf, Some(&md)),
                ),
            ];
            let recorded =
                controllers::stack_entries::recorded_stacks(obj.status.as_ref().map(|s| s.stacks.as_slice()));
            return controllers::stack_entries::delete_orphaned_stacks(
                &shared,
                obj,
                obj.status.as_ref(),
                &id,
                &stacks,
                &recorded,
            )
            .await;
        };
        // A cluster that does not hold its id built nothing through this object: its stacks,
        // if any, are another cluster's.
        match controllers::lookup::claim_held(&shared, obj, &cluster).await {
            Ok(Some(())) => {}
            Err(e) if e.is_retryable() => return Err(e),
            Ok(None) | Err(_) => return Ok(Outcome::proceed()),
        }
        let (tenant, cp) = controllers::lookup::clients(&shared, &cluster).await?;
        state.tenant = Some(tenant);
        state.cp = Some(cp);
        state.cluster = Some(cluster);
        Ok(Outcome::proceed())
    }
}

/// Allocates the pool CIDR into annotation `machine-deployment.giantswarm.io/subnet`.
#[derive(Debug)]
pub struct Ipam;

impl Resource<AWSMachineDeployment, PoolState> for Ipam {
    fn name(&self) -> &str {
        "ipam"
    }

    async fn ensure_created(&self, state: &mut PoolState, obj: &AWSMachineDeployment) -> resource::Result<Outcome> {
        let shared = state.shared.clone();
        let (Some(cluster), Some(tenant)) = (state.cluster.clone(), state.tenant.clone()) else {
            return Err(ResourceError::msg("Internal", "inputs were not resolved"));
        };
        if let Some(subnet) = obj.annotations().get(labels::MACHINE_DEPLOYMENT_SUBNET) {
            // A range set by hand (or by us) is checked until the pool's stack exists: after
            // that, the range is in use and a later overlap is the other object's problem.
            let tcnp = names::stack_name(&cluster.name_any(), StackKind::Tcnp, Some(&obj.name_any()));
            let created = obj.status.as_ref().is_some_and(|s| s.stacks.iter().any(|e| e.name == tcnp));
            if !created && let Err(e) = crate::ipam::check_node_pool_subnet(&shared, obj, subnet).await {
                return Err(if e.is_retryable() { e } else { reject(state, obj, e).await });
            }
            return Ok(Outcome::proceed());
        }
        // One order, the one `aws-operator render` shows: the cluster's CIDR first, then its
        // pools in name order.
        if cluster.cidr().is_none() {
            state.waiting = Some(format!("waiting for AWSCluster {} to get its CIDR", cluster.name_any()));
            return Ok(Outcome::cancel_reconciliation().requeue_after(shared.config.poll));
        }
        let name = obj.name_any();
        let ns = obj.namespace().unwrap_or_default();
        let earlier: Vec<String> = controllers::lookup::node_pools(&shared, &ns, &cluster.name_any())
            .await?
            .into_iter()
            .filter(|p| {
                // A pool with an invalid spec never gets a range; it holds nobody up.
                p.name_any() < name
                    && p.metadata.deletion_timestamp.is_none()
                    && !p.annotations().contains_key(labels::MACHINE_DEPLOYMENT_SUBNET)
                    && p.validate(&cluster.spec.provider.region).is_ok()
            })
            .map(|p| p.name_any())
            .collect();
        if !earlier.is_empty() {
            state.waiting = Some(format!(
                "waiting for node pools {} to get their CIDRs first (a cluster's pools are allocated in name order)",
                earlier.join(", ")
            ));
            return Ok(Outcome::cancel_reconciliation().requeue_after(shared.config.poll));
        }
        let range = crate::ipam::range_for_cluster(&shared, &cluster).await?;
        let mask = crate::ipam::mask_of(obj, shared.config.subnet_mask_bits);
        let owner = crate::ipam::Owner::NodePool(obj);
        match crate::ipam::allocate(&shared, &tenant, owner, range, mask).await? {
            crate::ipam::Allocation::Busy => {
                state.waiting = Some("waiting for the IPAM lock".into());
                return Ok(Outcome::cancel_reconciliation().requeue_after(shared.config.poll));
            }
            crate::ipam::Allocation::Existing(_) => {}
            crate::ipam::Allocation::Allocated(cidr) => {
                shared.event(obj, "CIDRAllocated", format!("node pool CIDR {cidr} allocated from {range}")).await;
            }
        }
        // The annotation change triggers the next reconcile with the CIDR in place.
        Ok(Outcome::cancel_reconciliation().requeue_after(std::time::Duration::from_secs(1)))
    }

    async fn ensure_deleted(&self, _: &mut PoolState, _: &AWSMachineDeployment) -> resource::Result<Outcome> {
        Ok(Outcome::proceed())
    }
}

/// Drains the pool's instances its group is about to terminate ([`crate::drainers`]); first, so
/// that a stack update or deletion in progress does not hold it up.
#[derive(Debug)]
pub struct Drainers;

impl Drainers {
    async fn step(state: &PoolState, obj: &AWSMachineDeployment, deleting: bool) -> Outcome {
        let (Some(cluster), Some(tenant)) = (&state.cluster, &state.tenant) else {
            return Outcome::proceed();
        };
        let kind = crate::drainers::plan::OwnerKind::NodePool(obj.name_any());
        crate::drainers::step(&state.shared, tenant, cluster, obj, kind, tcnp::TERMINATING_HOOK, deleting).await
    }
}

impl Resource<AWSMachineDeployment, PoolState> for Drainers {
    fn name(&self) -> &str {
        "drainers"
    }

    async fn ensure_created(&self, state: &mut PoolState, obj: &AWSMachineDeployment) -> resource::Result<Outcome> {
        Ok(Self::step(state, obj, false).await)
    }

    async fn ensure_deleted(&self, state: &mut PoolState, obj: &AWSMachineDeployment) -> resource::Result<Outcome> {
        Ok(Self::step(state, obj, true).await)
    }
}

//! The AWSMachineDeployment controller: the node-pool CIDR, the pool's node config, the
//! TCNP (tenant) and TCNPF (management account) stacks, and the drainers of the pool's group
//! ([`crate::drainers`]).
//!
//! Pool updates that replace instances wait for the masters, and the cluster autoscaler steps
//! aside while the pool rolls ([`crate::upgrade`], reference §5.7.1); scaling is never held.
//! Deletion removes TCNP, then TCNPF.

use std::collections::BTreeMap;
use std::sync::Arc;

use apis::aws::{AWSCluster, AWSMachineDeployment, AWSMachineDeploymentStatus, StackStatus as StatusEntry};
use apis::labels;
use apis::release::Release;
use aws_stacks::ignition::Role;
use aws_stacks::ipam::{self, Ipv4Net};
use aws_stacks::names::{self, StackKind};
use aws_stacks::stacks::{self, tccp, tcnp, tcnpf};
use aws_stacks::state::StackView;
use kube::ResourceExt;
use operatorkit::{Outcome, Resource, ResourceError, ResourceSet, resource};
use semver::VersionReq;

use crate::aws::AccountClients;
use crate::context::Shared;
use crate::controllers;
use crate::controllers::status::READY;
use crate::stack_ops::{Deletion, DesiredStack, Progress, UpdateWhen};
use crate::upgrade;

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
            waiting: None,
            failure: None,
            ready: false,
            rolling_update: None,
            maintenance: None,
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
            let release = controllers::lookup::release_of(&shared, obj).await?;
            let role = controllers::lookup::tenant_role(&shared, &cluster).await?;
            let region = &cluster.spec.provider.region;
            let (tenant, cp) = controllers::lookup::clients_of_role(&shared, &role, region).await?;
            Ok::<_, ResourceError>(Some((cluster, release, tenant, cp, role)))
        }
        .await;
        match checked {
            Ok(Some((cluster, release, tenant, cp, role))) => {
                let account = controllers::lookup::recorded_account(&cluster, role);
                let current = obj.status.as_ref();
                controllers::stack_entries::remember_account(&shared, obj, current, &mut state.status, account).await?;
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

/// The pool's node config and stacks.
#[derive(Debug)]
pub struct Pool;

impl Resource<AWSMachineDeployment, PoolState> for Pool {
    fn name(&self) -> &str {
        "pool"
    }

    async fn ensure_created(&self, state: &mut PoolState, obj: &AWSMachineDeployment) -> resource::Result<Outcome> {
        let shared = state.shared.clone();
        let (Some(cluster), Some(release), Some(tenant), Some(cp)) =
            (state.cluster.clone(), state.release.clone(), state.tenant.clone(), state.cp.clone())
        else {
            return Err(ResourceError::msg("Internal", "inputs were not resolved"));
        };
        let id = cluster.name_any();
        let md = obj.name_any();
        let region = cluster.spec.provider.region.clone();
        let poll = shared.config.poll;
        macro_rules! wait {
            ($($why:tt)*) => {{
                state.waiting = Some(format!($($why)*));
                write_status(state, obj).await?;
                return Ok(Outcome::cancel_reconciliation().requeue_after(poll));
            }};
        }
        macro_rules! not_ready {
            ($name:expr, $progress:expr) => {{
                match $progress {
                    Progress::Retrying { reason, message, retry_after } => {
                        state.failure = Some(reason);
                        state.waiting = Some(message);
                        write_status(state, obj).await?;
                        return Ok(Outcome::cancel_reconciliation().requeue_after(retry_after));
                    }
                    Progress::AwaitingApproval { message } => {
                        state.failure = Some(crate::approval::UPDATE_PENDING);
                        wait!("{message}")
                    }
                    Progress::Ready(_) | Progress::Pending => wait!("stack {} is not ready", $name),
                }
            }};
        }
        let Some(pool_cidr) = obj.annotations().get(labels::MACHINE_DEPLOYMENT_SUBNET).cloned() else {
            wait!("waiting for the node pool CIDR");
        };
        let pool_net: Ipv4Net = pool_cidr.parse().map_err(|e| {
            ResourceError::msg(
                "InvalidAnnotation",
                format!(
                    "{}: annotation {}: {e}",
                    controllers::status::describe(obj),
                    labels::MACHINE_DEPLOYMENT_SUBNET
                ),
            )
            .permanent()
        })?;
        let Some(cluster_cidr) = cluster.status.as_ref().and_then(|s| s.provider.network.cidr.clone()) else {
            wait!("waiting for the cluster CIDR");
        };
        let tccp_name = names::stack_name(&id, StackKind::Tccp, None);
        let Some(tccp_view) = shared.stacks.get(&tenant.cache_key(), tenant.cfn.as_ref(), &tccp_name).await? else {
            wait!("waiting for stack {tccp_name}");
        };
        if !tccp_view.status.is_usable() {
            wait!("waiting for stack {tccp_name} ({})", tccp_view.status);
        }
        let azs: Vec<String> = tccp_view
            .outputs
            .get("AvailabilityZones")
            .map(|s| s.split(',').filter(|a| !a.is_empty()).map(str::to_string).collect())
            .unwrap_or_default();
        let outputs = tccp::Outputs::from_outputs(&tccp_view.outputs, &azs)
            .map_err(|e| ResourceError::msg("MissingOutput", format!("stack {tccp_name}: {e}")))?;
        if let Some(missing) = obj.spec.provider.availability_zones.iter().find(|az| outputs.az(az).is_none()) {
            wait!("waiting for stack {tccp_name} to cover zone {missing} (the cluster adds it on its next reconcile)");
        }
        let Some(key_arn) = controllers::lookup::cluster_key(&shared, &tenant, &id).await? else {
            wait!("waiting for the key {}", names::kms_alias(&id));
        };
        let bucket = names::bucket(&tenant.account_id, &id);
        let ami = shared.amis.lookup(pool_flatcar(obj, &release), &region)?;

        // The node config.
        let cluster_ns = cluster.namespace().unwrap_or_default();
        let certs_ns = crate::node_config::certificates_namespace(&shared, &cluster_ns);
        let certs = crate::node_config::certificates(&shared, certs_ns, &id).await?;
        let secrets = match crate::node_config::secrets_for(false, &certs) {
            Ok(s) => s,
            Err(missing) => wait!(
                "waiting for certificate Secrets in namespace {certs_ns} labelled giantswarm.io/cluster={id},giantswarm.io/certificate=<name>: missing {}",
                missing.join(", ")
            ),
        };
        let node_labels = BTreeMap::from([
            ("giantswarm.io/provider".to_string(), "aws".to_string()),
            (labels::AWS_OPERATOR_VERSION.to_string(), shared.config.version.clone()),
            (labels::MACHINE_DEPLOYMENT.to_string(), md.clone()),
        ]);
        let input = crate::node_config::input(
            &shared.config.registry,
            &release,
            &cluster,
            Role::Worker { md_id: md.clone() },
            node_labels,
            secrets,
        );
        let config =
            match crate::node_config::build(&controllers::status::describe(obj), &format!("worker-{md}"), &input) {
                Ok(config) => config,
                Err(e) => return Err(reject(state, obj, e).await),
            };
        let key = names::node_pool_config_key(&shared.config.version, &id, &md);
        if crate::node_config::upload(&shared, &tenant, &key_arn, &bucket, &key, &config).await? {
            shared.event(obj, "NodeConfigUploaded", format!("s3://{bucket}/{key}")).await;
        }

        // TCNP.
        let common = controllers::lookup::common(&shared.config, &cluster, &release);
        let layout = ipam::node_pool_layout(pool_net, &obj.spec.provider.availability_zones).map_err(|e| {
            ResourceError::msg("InvalidSpec", format!("{}: {e}", controllers::status::describe(obj))).permanent()
        })?;
        let (_, cp_cidr, cp_tables) = crate::controllers::cluster::stacks::control_plane_network(&shared, &cp).await?;
        let name = names::stack_name(&id, StackKind::Tcnp, Some(&md));
        let recorded = |n: &str| obj.status.as_ref().and_then(|s| s.stacks.iter().find(|e| e.name == n).cloned());
        let observed = shared.stacks.get(&tenant.cache_key(), tenant.cfn.as_ref(), &name).await?;
        let cp_tables: Vec<stacks::CpRouteTable> =
            cp_tables.iter().map(|(id, n)| stacks::CpRouteTable { id: id.clone(), name: n.clone() }).collect();
        let (peers, peers_pending) = peer_security_groups(&shared, &tenant, obj, &id).await?;
        let inputs = PoolStacks {
            cluster: &cluster,
            pool: obj,
            common: &common,
            layout: &layout,
            pool_cidr: &pool_cidr,
            outputs: &outputs,
            cluster_cidr: &cluster_cidr,
            cp_cidr: &cp_cidr,
            cp_tables: &cp_tables,
            ami: &ami,
            bucket: &bucket,
            key_arn: &key_arn,
            peer_security_groups: &peers,
            alike: &shared.config.alike_instances,
        };
        let (batch, pause) = inputs.rolling_update_annotations();
        state.rolling_update = Some(
            tcnp::annotation_problems(batch.as_deref(), pause.as_deref())
                .into_iter()
                .map(|p| {
                    let on = if obj.annotations().contains_key(p.annotation) { "AWSMachineDeployment" } else { "AWSCluster" };
                    format!(
                        "{}: annotation {}={:?} (on the {on}) is ignored and the default applies: {}; fix the value or remove the annotation",
                        controllers::status::describe(obj),
                        p.annotation,
                        p.value,
                        p.problem
                    )
                })
                .collect(),
        );
        // The hash ignores the live desired capacity (an autoscaled pool must not be updated
        // because it scaled); the template sent keeps it.
        let canonical = tcnp::render(&inputs.tcnp(0)).hash();
        let tags = stacks::stack_tags(&common, StackKind::Tcnp, Some(&md));
        let unchanged = aws_stacks::cfn::stack_hash(&canonical, &tags);
        let deployed = observed.as_ref().and_then(|v| v.template_hash().map(str::to_string));
        let group = observed.as_ref().and_then(|v| v.outputs.get("AutoScalingGroupName").cloned());
        // The group's live size, read only when the stack differs: it sizes the rolling update
        // and tells a scaling-only change from one that replaces instances.
        let live = match (&group, deployed.as_deref() != Some(unchanged.as_str())) {
            (Some(group), true) => crate::aws::ec2::asg_capacity(&tenant, group).await?,
            _ => None,
        };
        let live_desired = live.map_or(0, |(d, _, _)| d.max(0) as u32);
        let at_live_size = live.map(|(_, min, max)| {
            let sized = inputs.tcnp_sized(0, min.max(0) as u32, max.max(0) as u32);
            aws_stacks::cfn::stack_hash(&tcnp::render(&sized).hash(), &tags)
        });
        let change = upgrade::change(deployed.as_deref(), &unchanged, at_live_size.as_deref());
        let params = inputs.tcnp(live_desired);
        let template = tcnp::render(&params);
        // An update that replaces no instance (a new peer pool's rule, a tag) is not disruptive:
        // it waits neither for the masters nor for a window or a rollout slot.
        let change = match (change, &observed, deployed.as_deref()) {
            (upgrade::Change::Update, Some(view), Some(deployed)) if view.status.is_usable() => {
                if update_rolls(&shared, &tenant, &name, deployed, &unchanged, &template).await {
                    upgrade::Change::Update
                } else {
                    upgrade::Change::InPlace
                }
            }
            (change, ..) => change,
        };
        // Masters first (§5.7.1): an update that replaces instances waits for the masters.
        let decision = match (&observed, change) {
            (Some(view), upgrade::Change::Update) => {
                let masters = masters_of(&shared, &tenant, &cluster, view).await?;
                upgrade::decide(change, &shared.config.version, &masters)
            }
            _ => upgrade::decide(change, &shared.config.version, &upgrade::Masters::none()),
        };
        // Maintenance windows (`crate::maintenance`): an update of an existing stack that
        // replaces instances waits for one; scaling and a new pool do not.
        let pause = params.rolling_update.pause();
        let schedule = crate::maintenance::schedule(&cluster, pause);
        let max_age = obj
            .spec
            .node_pool
            .max_node_age
            .as_deref()
            .map(|raw| node_lifecycle::maintenance::parse_max_age("spec.nodePool.maxNodeAge", raw));
        let had_condition =
            obj.status.as_ref().is_some_and(|s| s.conditions.iter().any(|c| c.type_ == crate::maintenance::SETTINGS));
        if cluster.spec.cluster.maintenance.is_some() || max_age.is_some() || had_condition {
            let mut problems = Vec::new();
            if let Err(errors) = &schedule {
                let whose = format!("AWSCluster {}/{}", cluster.namespace().unwrap_or_default(), id);
                problems.push(crate::maintenance::problems_message(&whose, errors));
            }
            if let Some(Err(e)) = &max_age {
                problems.push(format!(
                    "{}: {e}; nodes are not replaced for their age until this is fixed",
                    controllers::status::describe(obj)
                ));
            }
            state.maintenance = Some(if problems.is_empty() { Ok(()) } else { Err(problems.join("; ")) });
        }
        let (mut hold_reason, mut hold_retry) = (upgrade::WAITING_FOR_MASTERS, poll);
        // A stack being updated goes on: a roll started in a window is not stopped when it
        // closes (CloudFormation cannot pause it).
        let settled = observed.as_ref().is_some_and(|v| v.status.is_usable());
        let decision = match (decision, settled) {
            (upgrade::Decision::Roll, true) => {
                let what = format!("the rolling update of node pool {md}");
                match crate::maintenance::gate(&cluster, &schedule, &what, shared.clock.now(), poll) {
                    crate::maintenance::Gate::Go => upgrade::Decision::Roll,
                    crate::maintenance::Gate::Wait { message, retry_after } => {
                        (hold_reason, hold_retry) = (crate::maintenance::WAITING_FOR_WINDOW, retry_after);
                        let before = obj.status.as_ref().map_or(&[][..], |s| s.conditions.as_slice());
                        controllers::announce_maintenance_wait(&shared, obj, before, &message).await;
                        upgrade::Decision::Hold(message)
                    }
                    crate::maintenance::Gate::Invalid(message) => {
                        hold_reason = crate::maintenance::INVALID_MAINTENANCE;
                        upgrade::Decision::Hold(message)
                    }
                }
            }
            (decision, _) => decision,
        };
        // The approval gate (`crate::approval`): an update waiting for approval is held as a
        // change set, takes no rollout slot (a slot is not held for a person), and leaves the
        // autoscaler alone until it runs.
        let entries = obj.status.as_ref().map(|s| s.stacks.clone()).unwrap_or_default();
        let kind = match change {
            upgrade::Change::ScalingOnly => crate::approval::UpdateKind::ScalingOnly,
            _ => crate::approval::UpdateKind::Other,
        };
        let gate = crate::stack_ops::Gate::new(&cluster, obj, &entries, kind);
        let approval_holds = gate.holds(&name, &unchanged);
        // Rollout limits (`crate::rollout`), for a roll that may start now.
        let decision = match (decision, settled) {
            (upgrade::Decision::Roll, true) if !approval_holds => {
                match crate::rollout::acquire(&shared, &cluster, obj).await? {
                    None => upgrade::Decision::Roll,
                    Some(why) => {
                        hold_reason = crate::rollout::WAITING_FOR_SLOT;
                        upgrade::Decision::Hold(why)
                    }
                }
            }
            (decision, _) => decision,
        };
        if let (upgrade::Decision::Roll, Some(group)) = (&decision, &group)
            && !approval_holds
        {
            autoscaler(&shared, &tenant, obj, group, false).await?;
        }
        let desired = DesiredStack {
            kind: StackKind::Tcnp,
            name: name.clone(),
            template,
            tags,
            update: match decision {
                upgrade::Decision::Roll | upgrade::Decision::InPlace => UpdateWhen::Now,
                upgrade::Decision::Current | upgrade::Decision::Hold(_) => UpdateWhen::Later,
            },
            canonical_hash: Some(canonical),
        };
        let (progress, entry) = crate::stack_ops::ensure_gated(
            &shared,
            &tenant,
            obj,
            desired,
            Some(&bucket),
            recorded(&name).as_ref(),
            Some(&gate),
        )
        .await?;
        state.stacks.push(entry);
        // A plan awaiting approval while something else holds the roll (the masters, a window)
        // is in `UpdatePending`; `Ready` names what else it waits for, below.
        let planned_ahead =
            matches!(progress, Progress::AwaitingApproval { .. }) && matches!(decision, upgrade::Decision::Hold(_));
        if !matches!(progress, Progress::Ready(_)) && !planned_ahead {
            not_ready!(name, progress);
        }
        // Current again: the autoscaler may act on the group, and the pool's rollout slots are
        // free.
        if let (upgrade::Decision::Current, Some(group)) = (&decision, &group) {
            autoscaler(&shared, &tenant, obj, group, true).await?;
        }
        // Max age (`controllers::max_age`), while the pool is current; its slots are given back
        // once no replacement, roll or max-age, is in flight.
        let mut max_age_requeue = None;
        if decision == upgrade::Decision::Current {
            let mut in_flight = false;
            if let (Some(Ok(age)), Some(group)) = (&max_age, &group) {
                match controllers::max_age::step(&shared, &tenant, &cluster, obj, group, *age, &schedule).await? {
                    controllers::max_age::MaxAge::Idle(after) => max_age_requeue = Some(after),
                    controllers::max_age::MaxAge::InFlight(after) => {
                        (in_flight, max_age_requeue) = (true, Some(after));
                    }
                }
            }
            if !in_flight {
                crate::rollout::release(&shared, &cluster, obj).await?;
            }
        }

        // TCNPF: routes from the management VPC to the pool's subnets; never updated.
        let name = names::stack_name(&id, StackKind::Tcnpf, Some(&md));
        let params = inputs.tcnpf();
        let desired = DesiredStack {
            kind: StackKind::Tcnpf,
            name: name.clone(),
            template: tcnpf::render(&params),
            tags: stacks::stack_tags(&common, StackKind::Tcnpf, None),
            update: UpdateWhen::Never,
            canonical_hash: None,
        };
        let (progress, entry) =
            crate::stack_ops::ensure(&shared, &cp, obj, desired, None, recorded(&name).as_ref()).await?;
        state.stacks.push(entry);
        if !matches!(progress, Progress::Ready(_)) {
            not_ready!(name, progress);
        }
        if let upgrade::Decision::Hold(why) = decision {
            // Nothing else wakes the pool when the masters are done: look again at the poll
            // interval.
            state.failure = Some(hold_reason);
            state.waiting = Some(why);
            write_status(state, obj).await?;
            return Ok(Outcome::cancel_reconciliation().requeue_after(hold_retry));
        }
        state.ready = true;
        state.waiting = None;
        write_status(state, obj).await?;
        // A sibling pool whose group is not known yet (its stack is still being created) is
        // admitted once it is: nothing else would wake this pool when that stack completes.
        if peers_pending {
            tracing::debug!(pool = %md, "looking again at the poll interval for sibling pools");
            return Ok(Outcome::proceed().requeue_after(shared.config.poll));
        }
        if let Some(after) = max_age_requeue {
            return Ok(Outcome::proceed().requeue_after(after));
        }
        Ok(Outcome::proceed())
    }

    async fn ensure_deleted(&self, state: &mut PoolState, obj: &AWSMachineDeployment) -> resource::Result<Outcome> {
        let shared = state.shared.clone();
        let (Some(cluster), Some(tenant), Some(cp)) = (state.cluster.clone(), state.tenant.clone(), state.cp.clone())
        else {
            return Ok(Outcome::proceed());
        };
        let id = cluster.name_any();
        let md = obj.name_any();
        // AWS refuses to delete a security group another group's rule names: the other pools
        // drop their rules for this one first (they leave a pool being deleted out).
        let tcnp = names::stack_name(&id, StackKind::Tcnp, Some(&md));
        let own_group = shared
            .stacks
            .get(&tenant.cache_key(), tenant.cfn.as_ref(), &tcnp)
            .await?
            .and_then(|v| v.outputs.get("SecurityGroupID").cloned());
        if let Some(group) = own_group {
            let holders = pools_admitting(&shared, &tenant, obj, &id, &group).await?;
            if !holders.is_empty() {
                tracing::debug!(pool = %md, ?holders, "waiting for the other pools to drop their rules for this pool");
                return Ok(Outcome::cancel_reconciliation().keep_finalizer().requeue_after(shared.config.poll));
            }
        }
        let mut status = obj.status.clone().unwrap_or_default();
        let cluster_uid = cluster.uid().unwrap_or_default();
        for (aws, kind) in [(&tenant, StackKind::Tcnp), (&cp, StackKind::Tcnpf)] {
            let name = names::stack_name(&id, kind, Some(&md));
            let recorded = status.stacks.iter().find(|e| e.name == name).cloned();
            let (deletion, entry) =
                crate::stack_ops::delete(&shared, aws, obj, kind, &name, recorded.as_ref(), &cluster_uid).await?;
            let (out, failed) = match deletion {
                Deletion::Gone => (None, None),
                Deletion::Pending => {
                    (Some(Outcome::cancel_reconciliation().keep_finalizer().requeue_after(shared.config.poll)), None)
                }
                Deletion::Failed { message, retry_after } => {
                    (Some(Outcome::cancel_reconciliation().keep_finalizer().requeue_after(retry_after)), Some(message))
                }
            };
            controllers::stack_entries::record_deletion(&shared, obj, obj.status.as_ref(), &mut status, entry, failed)
                .await?;
            if let Some(out) = out {
                return Ok(out);
            }
        }
        crate::rollout::release(&shared, &cluster, obj).await?;
        shared.event(obj, "MachineDeploymentDeleted", format!("node pool {md}: stacks deleted")).await;
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

/// The cluster's other node pools that are not being deleted (one LIST).
async fn live_siblings(
    shared: &Shared,
    obj: &AWSMachineDeployment,
    cluster_id: &str,
) -> Result<Vec<AWSMachineDeployment>, ResourceError> {
    Ok(controllers::lookup::node_pools(shared, &obj.namespace().unwrap_or_default(), cluster_id)
        .await?
        .into_iter()
        .filter(|other| other.uid() != obj.uid() && other.metadata.deletion_timestamp.is_none())
        .collect())
}

/// The TCNP stacks of `siblings` that exist (from the shared stack listing, no extra AWS call).
async fn sibling_stacks(
    shared: &Shared,
    tenant: &AccountClients,
    siblings: &[AWSMachineDeployment],
    cluster_id: &str,
) -> Result<Vec<(String, aws_stacks::state::StackView)>, ResourceError> {
    let mut out = Vec::new();
    for other in siblings {
        let name = names::stack_name(cluster_id, StackKind::Tcnp, Some(&other.name_any()));
        if let Some(view) = shared.stacks.get(&tenant.cache_key(), tenant.cfn.as_ref(), &name).await? {
            out.push((other.name_any(), view));
        }
    }
    Ok(out)
}

/// The security groups of the cluster's other live node pools, sorted: each pool's group admits
/// them all, as upstream's TCNP does (`NodePoolToNodePoolRule<group>`). And whether the group of
/// a live sibling with a range is not known yet (no stack, or no `SecurityGroupID` output yet).
async fn peer_security_groups(
    shared: &Shared,
    tenant: &AccountClients,
    obj: &AWSMachineDeployment,
    cluster_id: &str,
) -> Result<(Vec<String>, bool), ResourceError> {
    let siblings = live_siblings(shared, obj, cluster_id).await?;
    // A sibling without a range has no stack coming yet; getting one changes the object, which
    // wakes this pool through the watch.
    let with_range =
        siblings.iter().filter(|p| p.annotations().contains_key(labels::MACHINE_DEPLOYMENT_SUBNET)).count();
    let mut groups: Vec<String> = sibling_stacks(shared, tenant, &siblings, cluster_id)
        .await?
        .into_iter()
        .filter_map(|(_, view)| view.outputs.get("SecurityGroupID").cloned())
        .collect();
    let pending = groups.len() < with_range;
    groups.sort();
    groups.dedup();
    Ok((groups, pending))
}

/// The other live pools whose stacks still admit `group`.
async fn pools_admitting(
    shared: &Shared,
    tenant: &AccountClients,
    obj: &AWSMachineDeployment,
    cluster_id: &str,
    group: &str,
) -> Result<Vec<String>, ResourceError> {
    let siblings = live_siblings(shared, obj, cluster_id).await?;
    Ok(sibling_stacks(shared, tenant, &siblings, cluster_id)
        .await?
        .into_iter()
        .filter(|(_, view)| {
            tcnp::Outputs::from_outputs(&view.outputs).is_ok_and(|o| o.peer_security_groups.iter().any(|g| g == group))
        })
        .map(|(name, _)| name)
        .collect())
}

/// What the pool's update waits for on the masters' side: TCCPN, and — while the pool runs
/// another operator version (`view`'s `OperatorVersion`) — the workload cluster's master nodes.
async fn masters_of(
    shared: &Shared,
    tenant: &AccountClients,
    cluster: &AWSCluster,
    view: &StackView,
) -> Result<upgrade::Masters, ResourceError> {
    let id = cluster.name_any();
    let tccpn = shared
        .stacks
        .get(&tenant.cache_key(), tenant.cfn.as_ref(), &names::stack_name(&id, StackKind::Tccpn, None))
        .await?;
    let ns = cluster.namespace().unwrap_or_default();
    let replicas = controllers::lookup::control_planes(shared, &ns, &id)
        .await?
        .first()
        .map_or(1, |cp| cp.spec.master_replicas() as usize);
    let nodes =
        if upgrade::nodes_needed(&shared.config.version, view.outputs.get("OperatorVersion").map(String::as_str)) {
            Some(controllers::lookup::workload_nodes(shared, cluster).await.map(|nodes| upgrade::master_nodes(&nodes)))
        } else {
            None
        };
    Ok(upgrade::Masters {
        stack_usable: tccpn.as_ref().is_some_and(|v| v.status.is_usable()),
        stack_version: tccpn.and_then(|v| v.outputs.get("OperatorVersion").cloned()),
        replicas,
        nodes,
    })
}

/// Whether updating the pool's stack `stack` from its deployed template (hash `deployed`) to
/// `desired` (hash `desired_hash`) replaces instances, by the templates' own diff
/// ([`crate::approval::template_diff`]: the group's rolling update, through its launch
/// template's version or its own properties). A deployed template that cannot be read counts
/// as rolling: the update then waits as any other would.
async fn update_rolls(
    shared: &Shared,
    tenant: &AccountClients,
    stack: &str,
    deployed: &str,
    desired_hash: &str,
    desired: &aws_stacks::cfn::Template,
) -> bool {
    let key = format!("{}/{stack}", tenant.cache_key());
    if let Some((d, h, rolls)) = shared.memo.lock().update_rolls.get(&key)
        && d == deployed
        && h == desired_hash
    {
        return *rolls;
    }
    let deployed_template = match crate::stack_ops::deployed_template(shared, tenant, StackKind::Tcnp, stack).await {
        Ok(Some(template)) => template,
        Ok(None) => return true,
        Err(e) => {
            tracing::warn!(stack, error = %e, "the deployed template could not be read; the update counts as rolling");
            return true;
        }
    };
    let rolls =
        crate::approval::template_diff(&deployed_template, &desired.to_value()).iter().any(|c| c.replaces_instances);
    shared.memo.lock().update_rolls.insert(key, (deployed.to_string(), desired_hash.to_string(), rolls));
    rolls
}

/// Put the cluster autoscaler's tag on `group` or take it off, once per change this process
/// makes, with an event.
async fn autoscaler(
    shared: &Shared,
    tenant: &AccountClients,
    obj: &AWSMachineDeployment,
    group: &str,
    enabled: bool,
) -> Result<(), ResourceError> {
    let key = format!("{}/{group}", tenant.cache_key());
    if shared.memo.lock().autoscaler.get(&key) == Some(&enabled) {
        return Ok(());
    }
    crate::aws::ec2::set_autoscaler_enabled(tenant, group, enabled).await?;
    let before = shared.memo.lock().autoscaler.insert(key, enabled);
    let tag = upgrade::AUTOSCALER_ENABLED_TAG;
    match (enabled, before) {
        (false, _) => {
            shared
                .event(obj, "AutoscalingPaused", format!("tag {tag} removed from group {group} for the rolling update"))
                .await;
        }
        // Back after a roll this process paused it; a first write after a start is silent.
        (true, Some(false)) => {
            shared.event(obj, "AutoscalingResumed", format!("tag {tag} put back on group {group}")).await;
        }
        (true, _) => {}
    }
    Ok(())
}

/// The Flatcar version a node pool runs: its `FLATCAR_RELEASE_VERSION` annotation when that is
/// newer than its Release's `containerlinux`, else the Release's.
pub fn pool_flatcar<'a>(pool: &'a AWSMachineDeployment, release: &'a Release) -> &'a str {
    let release_flatcar = release.component_version("containerlinux").unwrap_or_default();
    pool.annotations()
        .get(labels::FLATCAR_RELEASE_VERSION)
        .filter(|v| newer(v, release_flatcar))
        .map_or(release_flatcar, String::as_str)
}

/// What a node pool's two stacks are rendered from: the controller fills it from AWS and the
/// cluster's stacks, `aws-operator render` from the CR files; both render through it.
#[derive(Debug, Clone, Copy)]
pub struct PoolStacks<'a> {
    pub cluster: &'a AWSCluster,
    pub pool: &'a AWSMachineDeployment,
    pub common: &'a stacks::Common,
    /// The pool's per-zone subnets (`ipam::node_pool_layout`).
    pub layout: &'a [(String, Ipv4Net)],
    pub pool_cidr: &'a str,
    /// The cluster's TCCP outputs.
    pub outputs: &'a tccp::Outputs,
    pub cluster_cidr: &'a str,
    /// The management VPC's CIDR and the route tables that route into the pool.
    pub cp_cidr: &'a str,
    pub cp_tables: &'a [stacks::CpRouteTable],
    pub ami: &'a str,
    pub bucket: &'a str,
    pub key_arn: &'a str,
    /// The security groups of the cluster's other node pools, which this pool's group admits.
    pub peer_security_groups: &'a [String],
    /// The operator's alike instance types (`--alike-instances`).
    pub alike: &'a crate::config::AlikeInstances,
}

impl PoolStacks<'_> {
    /// TCNP's parameters, with the Auto Scaling group's live desired capacity (0 for a new
    /// group; it only shapes the rolling update, never the template hash).
    pub fn tcnp(&self, current_desired: u32) -> tcnp::Params {
        let scaling = &self.pool.spec.node_pool.scaling;
        self.tcnp_sized(current_desired, scaling.min.max(0) as u32, scaling.max.max(0) as u32)
    }

    /// The rolling-update annotations, the pool's own before the cluster's.
    pub fn rolling_update_annotations(&self) -> (Option<String>, Option<String>) {
        let annotation =
            |key: &str| self.pool.annotations().get(key).or_else(|| self.cluster.annotations().get(key)).cloned();
        (annotation(labels::AWS_UPDATE_MAX_BATCH_SIZE), annotation(labels::AWS_UPDATE_PAUSE_TIME))
    }

    /// [`PoolStacks::tcnp`] with the group's minimum and maximum given instead of the spec's:
    /// the template the pool would have at another size, which tells a scaling-only change.
    pub fn tcnp_sized(&self, current_desired: u32, min: u32, max: u32) -> tcnp::Params {
        let obj = self.pool;
        let (batch, pause) = self.rolling_update_annotations();
        let dist = obj.spec.provider.instance_distribution.clone().unwrap_or_default();
        let machine = &obj.spec.node_pool.machine;
        let outputs = self.outputs;
        tcnp::Params {
            common: self.common.clone(),
            node_pool_id: obj.name_any(),
            pool_cidr: self.pool_cidr.to_string(),
            azs: self
                .layout
                .iter()
                .filter_map(|(az, net)| {
                    Some(tcnp::TcnpAz {
                        name: az.clone(),
                        subnet_cidr: net.to_string(),
                        nat_gateway_id: outputs.az(az)?.nat_gateway_id.clone(),
                    })
                })
                .collect(),
            vpc_id: outputs.vpc_id.clone(),
            vpc_cidr: self.cluster_cidr.to_string(),
            peering_connection_id: outputs.vpc_peering_connection_id.clone(),
            cp_vpc_cidr: self.cp_cidr.to_string(),
            tccp_security_groups: tcnp::TccpSecurityGroups {
                master: outputs.master_security_group_id.clone(),
                api_internal_elb: outputs.api_internal_elb_security_group_id.clone(),
                aws_cni: None,
            },
            other_pool_security_groups: self.peer_security_groups.to_vec(),
            instance: tcnp::NodeInstance {
                image_id: self.ami.to_string(),
                instance_type: obj.spec.provider.worker.instance_type.clone(),
                docker_volume_gb: machine.docker_volume_size_gb.max(1) as u32,
                kubelet_volume_gb: machine.kubelet_volume_size_gb.max(1) as u32,
                // Both were checked with the object (`validate`); the defaults stand in for
                // values that check refused.
                log_volume_gb: obj.log_volume_gb().unwrap_or(apis::aws::DEFAULT_LOG_VOLUME_GB),
                containerd_volume_gb: obj.containerd_volume_gb().unwrap_or(machine.docker_volume_size_gb.max(1) as u32),
                imds_http_tokens: stacks::imds_http_tokens(
                    obj.annotations().get(labels::AWS_METADATA_V2).map(String::as_str),
                )
                .into(),
            },
            min_size: min,
            max_size: max,
            rolling_update: tcnp::rolling_update(min, max, current_desired, batch.as_deref(), pause.as_deref()),
            distribution: tcnp::InstanceDistribution {
                on_demand_base_capacity: dist.on_demand_base_capacity.max(0) as u32,
                on_demand_percentage_above_base_capacity: dist
                    .on_demand_percentage_above_base_capacity
                    .unwrap_or(100)
                    .clamp(0, 100) as u32,
                overrides: if obj.spec.provider.worker.use_alike_instance_types {
                    self.alike.overrides(&obj.spec.provider.worker.instance_type)
                } else {
                    Vec::new()
                },
            },
            internal_elb_subnets: false,
            cilium_eni: false,
            bucket: self.bucket.to_string(),
            kms_key_arn: self.key_arn.to_string(),
        }
    }

    /// TCNPF's parameters: routes from the management VPC to the pool's subnets.
    pub fn tcnpf(&self) -> tcnpf::Params {
        tcnpf::Params {
            common: self.common.clone(),
            node_pool_id: self.pool.name_any(),
            peering_connection_id: self.outputs.vpc_peering_connection_id.clone(),
            route_tables: self.cp_tables.to_vec(),
            subnets: self
                .layout
                .iter()
                .map(|(az, net)| tcnpf::PoolSubnet { az: az.clone(), cidr: net.to_string() })
                .collect(),
        }
    }
}

/// Whether version `a` is semver-greater than `b` (unparsable versions never are).
fn newer(a: &str, b: &str) -> bool {
    match (semver::Version::parse(a), semver::Version::parse(b)) {
        (Ok(a), Ok(b)) => a > b,
        _ => false,
    }
}

//! The pool's node config and its two stacks, top-down: what they are built from
//! ([`ground`]), the node config, TCNP (built, its roll decided, applied), TCNPF, the status.

use std::collections::BTreeMap;
use std::sync::Arc;

use apis::aws::{AWSCluster, AWSMachineDeployment};
use apis::labels;
use apis::release::Release;
use aws_stacks::ignition::Role;
use aws_stacks::ipam::{self, Ipv4Net};
use aws_stacks::names::{self, StackKind};
use aws_stacks::stacks::{self, tccp, tcnp, tcnpf};
use kube::ResourceExt;
use operatorkit::{Outcome, Resource, ResourceError, resource};

use super::build::{self, PoolStacks};
use super::{PoolState, reject, roll, write_status};
use crate::aws::AccountClients;
use crate::context::Shared;
use crate::controllers;
use crate::stack_ops::{DesiredStack, Progress, UpdateWhen};
use crate::upgrade;

/// The pool's node config and stacks.
#[derive(Debug)]
pub struct Pool;

/// What the pool's stacks are built from, once all of it is there.
struct Ground {
    cluster: AWSCluster,
    release: Release,
    tenant: Arc<AccountClients>,
    cp: Arc<AccountClients>,
    id: String,
    md: String,
    pool_cidr: String,
    pool_net: Ipv4Net,
    cluster_cidr: String,
    outputs: tccp::Outputs,
    key_arn: String,
    bucket: String,
    ami: String,
}

/// What the pool's stacks are built from besides [`Ground`]: the management network and the
/// sibling pools' security groups.
struct Surroundings {
    common: stacks::Common,
    layout: Vec<(String, Ipv4Net)>,
    cp_cidr: String,
    cp_tables: Vec<stacks::CpRouteTable>,
    peers: Vec<String>,
    /// A live sibling's group is not known yet.
    peers_pending: bool,
    /// Cilium runs in ENI mode ([`PoolStacks::cilium_eni`]).
    cilium_eni: bool,
}

impl Surroundings {
    fn stacks<'a>(&'a self, shared: &'a Shared, g: &'a Ground, obj: &'a AWSMachineDeployment) -> PoolStacks<'a> {
        PoolStacks {
            cluster: &g.cluster,
            pool: obj,
            common: &self.common,
            layout: &self.layout,
            pool_cidr: &g.pool_cidr,
            outputs: &g.outputs,
            cluster_cidr: &g.cluster_cidr,
            cp_cidr: &self.cp_cidr,
            cp_tables: &self.cp_tables,
            ami: &g.ami,
            bucket: &g.bucket,
            key_arn: &g.key_arn,
            peer_security_groups: &self.peers,
            alike: &shared.config.alike_instances,
            cilium_eni: self.cilium_eni,
        }
    }
}

/// How a step ended: go on with its result, or end the reconcile with this outcome.
enum Step<T> {
    Next(T),
    Stop(Outcome),
}

/// Record that the pool waits for `why`, and look again at the poll interval.
async fn wait(state: &mut PoolState, obj: &AWSMachineDeployment, why: String) -> resource::Result<Outcome> {
    state.waiting = Some(why);
    write_status(state, obj).await?;
    Ok(Outcome::cancel_reconciliation().requeue_after(state.shared.config.poll))
}

/// Record why stack `name` is not ready (`progress`), and when to look again.
async fn not_ready(
    state: &mut PoolState,
    obj: &AWSMachineDeployment,
    name: &str,
    progress: Progress,
) -> resource::Result<Outcome> {
    match progress {
        Progress::Retrying { reason, message, retry_after } => {
            state.failure = Some(reason);
            state.waiting = Some(message);
            write_status(state, obj).await?;
            Ok(Outcome::cancel_reconciliation().requeue_after(retry_after))
        }
        Progress::AwaitingApproval { message } => {
            state.failure = Some(crate::approval::UPDATE_PENDING);
            wait(state, obj, message).await
        }
        Progress::Ready(_) | Progress::Pending => wait(state, obj, format!("stack {name} is not ready")).await,
    }
}

impl Resource<AWSMachineDeployment, PoolState> for Pool {
    fn name(&self) -> &str {
        "pool"
    }

    async fn ensure_created(&self, state: &mut PoolState, obj: &AWSMachineDeployment) -> resource::Result<Outcome> {
        let shared = state.shared.clone();
        // Dereference: the pool's range, the cluster's network and TCCP, the key, the AMI.
        let g = match ground(state, obj).await? {
            Ok(g) => g,
            Err(why) => return wait(state, obj, why).await,
        };
        // Build and apply: the node config, then TCNP, then TCNPF.
        if let Some(why) = node_config(state, obj, &g).await? {
            return wait(state, obj, why).await;
        }
        let around = surroundings(state, obj, &g).await?;
        let (decision, hold_reason, hold_retry, max_age_requeue) = match ensure_tcnp(state, obj, &g, &around).await? {
            Step::Next(next) => next,
            Step::Stop(outcome) => return Ok(outcome),
        };
        let name = names::stack_name(&g.id, StackKind::Tcnpf, Some(&g.md));
        let (progress, entry) = ensure_tcnpf(&shared, obj, &g, &around, &name).await?;
        state.stacks.push(entry);
        if !matches!(progress, Progress::Ready(_)) {
            return not_ready(state, obj, &name, progress).await;
        }

        // Status.
        if let upgrade::Decision::Hold(why) = decision {
            // Nothing else wakes the pool when the masters are done: look again at the poll
            // interval.
            state.failure = Some(hold_reason);
            state.waiting = Some(why);
            write_status(state, obj).await?;
            return Ok(Outcome::cancel_reconciliation().requeue_after(hold_retry));
        }
        // The running workers, for `status.provider.worker` (written only when it changed):
        // looked at when the pool has none yet or its stack changed in this reconcile, so that a
        // steady pool costs no EC2 call.
        let settled = matches!(decision, upgrade::Decision::Current)
            && obj.status.as_ref().and_then(|s| s.provider.as_ref()).is_some_and(|p| p.worker.is_some());
        if let (Some(group), false) = (state.group.clone(), settled) {
            let instances = crate::aws::ec2::group_instances(&g.tenant, &group).await?;
            let worker = build::worker_status(&instances);
            state.status.provider.get_or_insert_with(Default::default).worker = Some(worker);
        }
        state.ready = true;
        state.waiting = None;
        write_status(state, obj).await?;
        // A sibling pool whose group is not known yet (its stack is still being created) is
        // admitted once it is: nothing else would wake this pool when that stack completes.
        if around.peers_pending {
            tracing::debug!(pool = %g.md, "looking again at the poll interval for sibling pools");
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
        controllers::detach_foreign_policies(&shared, &tenant, obj, &tcnp::role_name(&id, &md)).await?;
        let mut status = obj.status.clone().unwrap_or_default();
        let cluster_uid = cluster.uid().unwrap_or_default();
        for (aws, kind) in [(&tenant, StackKind::Tcnp), (&cp, StackKind::Tcnpf)] {
            let name = names::stack_name(&id, kind, Some(&md));
            let recorded = status.stacks.iter().find(|e| e.name == name).cloned();
            let (deletion, entry) =
                crate::stack_ops::delete(&shared, aws, obj, kind, &name, recorded.as_ref(), &cluster_uid).await?;
            let (out, failed) = deletion.stop(shared.config.poll);
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

/// What the pool's stacks are built from; `Ok(Err(why))` while something is not there yet.
async fn ground(state: &PoolState, obj: &AWSMachineDeployment) -> Result<Result<Ground, String>, ResourceError> {
    let shared = &state.shared;
    let (Some(cluster), Some(release), Some(tenant), Some(cp)) =
        (state.cluster.clone(), state.release.clone(), state.tenant.clone(), state.cp.clone())
    else {
        return Err(ResourceError::msg("Internal", "inputs were not resolved"));
    };
    let id = cluster.name_any();
    let md = obj.name_any();
    let Some(pool_cidr) = obj.annotations().get(labels::MACHINE_DEPLOYMENT_SUBNET).cloned() else {
        return Ok(Err("waiting for the node pool CIDR".into()));
    };
    let pool_net: Ipv4Net = pool_cidr.parse().map_err(|e| {
        ResourceError::msg(
            "InvalidAnnotation",
            format!("{}: annotation {}: {e}", controllers::status::describe(obj), labels::MACHINE_DEPLOYMENT_SUBNET),
        )
        .permanent()
    })?;
    let Some(cluster_cidr) = cluster.status.as_ref().and_then(|s| s.provider.network.cidr.clone()) else {
        return Ok(Err("waiting for the cluster CIDR".into()));
    };
    let tccp_name = names::stack_name(&id, StackKind::Tccp, None);
    let Some(tccp_view) = shared.stacks.get(&tenant.cache_key(), tenant.cfn.as_ref(), &tccp_name).await? else {
        return Ok(Err(format!("waiting for stack {tccp_name}")));
    };
    if !tccp_view.status.is_usable() {
        return Ok(Err(format!("waiting for stack {tccp_name} ({})", tccp_view.status)));
    }
    let azs: Vec<String> = tccp_view
        .outputs
        .get("AvailabilityZones")
        .map(|s| s.split(',').filter(|a| !a.is_empty()).map(str::to_string).collect())
        .unwrap_or_default();
    let outputs = tccp::Outputs::from_outputs(&tccp_view.outputs, &azs)
        .map_err(|e| ResourceError::msg("MissingOutput", format!("stack {tccp_name}: {e}")))?;
    if let Some(missing) = obj.spec.provider.availability_zones.iter().find(|az| outputs.az(az).is_none()) {
        return Ok(Err(format!(
            "waiting for stack {tccp_name} to cover zone {missing} (the cluster adds it on its next reconcile)"
        )));
    }
    let Some(key_arn) = controllers::lookup::cluster_key(shared, &tenant, &id).await? else {
        return Ok(Err(format!("waiting for the key {}", names::kms_alias(&id))));
    };
    let bucket = names::bucket(&tenant.account_id, &id);
    let ami = shared.amis.lookup(build::pool_flatcar(obj, &release), &cluster.spec.provider.region)?;
    Ok(Ok(Ground {
        cluster,
        release,
        tenant,
        cp,
        id,
        md,
        pool_cidr,
        pool_net,
        cluster_cidr,
        outputs,
        key_arn,
        bucket,
        ami,
    }))
}

/// Build the pool's node config and upload it when it changed; `Some(why)` while the
/// certificates are not there yet.
async fn node_config(
    state: &mut PoolState,
    obj: &AWSMachineDeployment,
    g: &Ground,
) -> Result<Option<String>, ResourceError> {
    let shared = state.shared.clone();
    let (id, md) = (&g.id, &g.md);
    let cluster_ns = g.cluster.namespace().unwrap_or_default();
    let certs_ns = crate::node_config::certificates_namespace(&shared, &cluster_ns);
    let certs = crate::node_config::certificates(&shared, certs_ns, id).await?;
    let secrets = match crate::node_config::secrets_for(false, &certs) {
        Ok(s) => s,
        Err(missing) => {
            return Ok(Some(format!(
                "waiting for certificate Secrets in namespace {certs_ns} labelled giantswarm.io/cluster={id},giantswarm.io/certificate=<name>: missing {}",
                missing.join(", ")
            )));
        }
    };
    let node_labels = BTreeMap::from([
        ("giantswarm.io/provider".to_string(), "aws".to_string()),
        (labels::AWS_OPERATOR_VERSION.to_string(), shared.config.version.clone()),
        (labels::MACHINE_DEPLOYMENT.to_string(), md.clone()),
    ]);
    let mut input = crate::node_config::input(
        &shared.config.registry,
        &shared.config.service_cidr,
        &g.release,
        &g.cluster,
        Role::Worker { md_id: md.clone() },
        node_labels,
        secrets,
    );
    input.tuning = state.tuning.clone();
    input.extras = shared.config.node_extras.clone();
    let config = match crate::node_config::build(&controllers::status::describe(obj), &format!("worker-{md}"), &input) {
        Ok(config) => config,
        Err(e) => return Err(reject(state, obj, e).await),
    };
    let key = names::node_pool_config_key(&shared.config.version, id, md);
    if crate::node_config::upload(&shared, &g.tenant, &g.key_arn, &g.bucket, &key, &config).await? {
        shared.event(obj, "NodeConfigUploaded", format!("s3://{}/{key}", g.bucket)).await;
    }
    Ok(None)
}

/// The management network and the sibling pools' groups the pool's stacks name.
async fn surroundings(
    state: &PoolState,
    obj: &AWSMachineDeployment,
    g: &Ground,
) -> Result<Surroundings, ResourceError> {
    let shared = &state.shared;
    let common = controllers::lookup::common(&shared.config, &g.cluster, &g.release);
    let layout = ipam::node_pool_layout(g.pool_net, &obj.spec.provider.availability_zones).map_err(|e| {
        ResourceError::msg("InvalidSpec", format!("{}: {e}", controllers::status::describe(obj))).permanent()
    })?;
    let (_, cp_cidr, cp_tables) = crate::controllers::cluster::stacks::control_plane_network(shared, &g.cp).await?;
    let cp_tables = cp_tables.iter().map(|(id, n)| stacks::CpRouteTable { id: id.clone(), name: n.clone() }).collect();
    let (peers, peers_pending) = peer_security_groups(shared, &g.tenant, obj, &g.id).await?;
    let cilium_eni = state.tuning.cilium_eni;
    Ok(Surroundings { common, layout, cp_cidr, cp_tables, peers, peers_pending, cilium_eni })
}

/// TCNP: built, its update's kind and timing decided ([`roll`]), applied through the approval
/// gate, the autoscaler stepped aside while it rolls, and — while the pool is current — its
/// instances replaced for their age. Returns the decision, what a hold waits for and when to
/// look again, and when max age wants to look again.
async fn ensure_tcnp(
    state: &mut PoolState,
    obj: &AWSMachineDeployment,
    g: &Ground,
    around: &Surroundings,
) -> Result<Step<(upgrade::Decision, &'static str, std::time::Duration, Option<std::time::Duration>)>, ResourceError> {
    let shared = state.shared.clone();
    let (cluster, tenant) = (&g.cluster, &g.tenant);
    let inputs = around.stacks(&shared, g, obj);
    let name = names::stack_name(&g.id, StackKind::Tcnp, Some(&g.md));
    let recorded = obj.status.as_ref().and_then(|s| s.stacks.iter().find(|e| e.name == name).cloned());
    let observed = shared.stacks.get(&tenant.cache_key(), tenant.cfn.as_ref(), &name).await?;
    let (batch, pause) = inputs.rolling_update_annotations();
    state.rolling_update = Some(build::rolling_update_problems(obj, batch.as_deref(), pause.as_deref()));

    // Build: the template, and what kind of change it is from the deployed one. The hash
    // ignores the live desired capacity (an autoscaled pool must not be updated because it
    // scaled); the template sent keeps it.
    let canonical = tcnp::render(&inputs.tcnp(0)).hash();
    let tags = stacks::stack_tags(&around.common, StackKind::Tcnp, Some(&g.md));
    let unchanged = aws_stacks::cfn::stack_hash(&canonical, &tags);
    let deployed = observed.as_ref().and_then(|v| v.template_hash().map(str::to_string));
    let group = observed.as_ref().and_then(|v| v.outputs.get("AutoScalingGroupName").cloned());
    state.group = group.clone();
    // The group's live size, read only when the stack differs: it sizes the rolling update
    // and tells a scaling-only change from one that replaces instances.
    let live = match (&group, deployed.as_deref() != Some(unchanged.as_str())) {
        (Some(group), true) => crate::aws::ec2::asg_capacity(tenant, group).await?,
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
            if roll::update_rolls(&shared, tenant, &name, deployed, &unchanged, &template).await {
                upgrade::Change::Update
            } else {
                upgrade::Change::InPlace
            }
        }
        (change, ..) => change,
    };

    // Validate: the maintenance settings (an update of an existing stack that replaces
    // instances waits for a window; scaling and a new pool do not) and the pool's max age.
    let schedule = crate::maintenance::schedule(cluster, params.rolling_update.pause());
    let max_age = build::max_age(obj);
    if let Some(settings) = build::maintenance_settings(cluster, obj, &schedule, &max_age) {
        state.maintenance = Some(settings);
    }
    // The approval gate (`crate::approval`): an update waiting for approval is held as a
    // change set, takes no rollout slot, and leaves the autoscaler alone until it runs.
    let entries = obj.status.as_ref().map(|s| s.stacks.clone()).unwrap_or_default();
    let kind = match change {
        upgrade::Change::ScalingOnly => crate::approval::UpdateKind::ScalingOnly,
        _ => crate::approval::UpdateKind::Other,
    };
    let gate = crate::stack_ops::Gate::new(cluster, obj, &entries, kind);
    let approval_holds = gate.holds(&name, &unchanged);
    let roll::Roll { decision, hold_reason, hold_retry } =
        roll::decide(&shared, tenant, cluster, obj, observed.as_ref(), change, &schedule, approval_holds).await?;

    // Apply.
    if let (upgrade::Decision::Roll, Some(group)) = (&decision, &group)
        && !approval_holds
    {
        roll::autoscaler(&shared, tenant, obj, group, false).await?;
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
    let (progress, entry) =
        crate::stack_ops::ensure_gated(&shared, tenant, obj, desired, Some(&g.bucket), recorded.as_ref(), Some(&gate))
            .await?;
    state.stacks.push(entry);
    // A plan awaiting approval while something else holds the roll (the masters, a window)
    // is in `UpdatePending`; `Ready` names what else it waits for.
    let planned_ahead =
        matches!(progress, Progress::AwaitingApproval { .. }) && matches!(decision, upgrade::Decision::Hold(_));
    if !matches!(progress, Progress::Ready(_)) && !planned_ahead {
        return Ok(Step::Stop(not_ready(state, obj, &name, progress).await?));
    }
    // Current again: the autoscaler may act on the group, and the pool's rollout slots are
    // free.
    if let (upgrade::Decision::Current, Some(group)) = (&decision, &group) {
        roll::autoscaler(&shared, tenant, obj, group, true).await?;
    }
    // Max age (`controllers::max_age`), while the pool is current; its slots are given back
    // once no replacement, roll or max-age, is in flight.
    let mut max_age_requeue = None;
    if decision == upgrade::Decision::Current {
        let mut in_flight = false;
        if let (Some(Ok(age)), Some(group)) = (&max_age, &group) {
            match controllers::max_age::step(&shared, tenant, cluster, obj, group, *age, &schedule).await? {
                controllers::max_age::MaxAge::Idle(after) => max_age_requeue = Some(after),
                controllers::max_age::MaxAge::InFlight(after) => {
                    (in_flight, max_age_requeue) = (true, Some(after));
                }
            }
        }
        if !in_flight {
            crate::rollout::release(&shared, cluster, obj).await?;
        }
    }
    Ok(Step::Next((decision, hold_reason, hold_retry, max_age_requeue)))
}

/// TCNPF: routes from the management VPC to the pool's subnets; never updated.
async fn ensure_tcnpf(
    shared: &Arc<Shared>,
    obj: &AWSMachineDeployment,
    g: &Ground,
    around: &Surroundings,
    name: &str,
) -> Result<(Progress, apis::aws::StackStatus), ResourceError> {
    let params = around.stacks(shared, g, obj).tcnpf();
    let desired = DesiredStack {
        kind: StackKind::Tcnpf,
        name: name.to_string(),
        template: tcnpf::render(&params),
        tags: stacks::stack_tags(&around.common, StackKind::Tcnpf, None),
        update: UpdateWhen::Never,
        canonical_hash: None,
    };
    let recorded = obj.status.as_ref().and_then(|s| s.stacks.iter().find(|e| e.name == name).cloned());
    crate::stack_ops::ensure(shared, &g.cp, obj, desired, None, recorded.as_ref()).await
}

// --- the sibling pools -----------------------------------------------------------------------------

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
pub(super) async fn peer_security_groups(
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
pub(super) async fn pools_admitting(
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

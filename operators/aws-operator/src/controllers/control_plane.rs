//! The AWSControlPlane controller: the masters' node configs and the TCCPN stack, and the
//! drainers of the masters' groups ([`crate::drainers`]).
//!
//! The master count is `spec.replicas` of the AWSControlPlane (1 or 3); when absent,
//! `spec.replicas` of its `G8sControlPlane` where the management cluster has one
//! ([`crate::capi::master_replicas`]); else 3 if three zones are listed, and 1 otherwise. The
//! masters' etcd quota and controller-manager settings come from the cluster's Cluster API
//! `Cluster` ([`crate::capi::tuning`]).
//!
//! Deletion holds the finalizer while node pools of the cluster exist (node pools go first), then
//! deletes TCCPN and waits until it is gone.

use std::collections::BTreeMap;
use std::sync::Arc;

use apis::aws::{AWSCluster, AWSControlPlane, AWSControlPlaneStatus, StackStatus as StatusEntry};
use apis::release::Release;
use aws_stacks::ignition::{self, InitialClusterState, Role};
use aws_stacks::names::{self, StackKind};
use aws_stacks::stacks::{self, tccp, tccpn};
use kube::ResourceExt;
use operatorkit::{Outcome, Resource, ResourceError, ResourceSet, resource};
use semver::VersionReq;

use crate::aws::AccountClients;
use crate::context::Shared;
use crate::controllers;
use crate::controllers::status::READY;
use crate::stack_ops::{Deletion, DesiredStack, Progress, UpdateWhen};

/// The controller's name (and finalizer suffix).
pub const CONTROLLER: &str = "aws-operator-control-plane-controller";

/// The resource set `name` for the Releases `requirement` matches: the steps in the order they
/// run.
pub fn resource_set(shared: Arc<Shared>, name: String, requirement: VersionReq) -> ResourceSet<AWSControlPlane> {
    controllers::resource_set(shared, name, requirement, ControlPlaneState::new)
        .resource(Inputs)
        .resource(Drainers)
        .resource(Masters)
        .build()
}

/// What the resources of one AWSControlPlane reconcile share.
#[derive(Debug)]
pub struct ControlPlaneState {
    shared: Arc<Shared>,
    cluster: Option<AWSCluster>,
    release: Option<Release>,
    tenant: Option<Arc<AccountClients>>,
    status: AWSControlPlaneStatus,
    stacks: Vec<StatusEntry>,
    waiting: Option<String>,
    /// The `Ready` reason of a failure being retried; `waiting` holds its message.
    failure: Option<&'static str>,
    ready: bool,
    /// Whether the cluster's maintenance settings can be used (the
    /// [`crate::maintenance::SETTINGS`] condition); `None`: not looked at, or not set.
    maintenance: Option<Result<(), String>>,
    /// The master count ([`crate::capi::master_replicas`]).
    replicas: i32,
    /// Where the master count is set ([`crate::capi::master_replicas_field`]).
    replicas_field: String,
    /// The masters' settings from the Cluster API `Cluster`.
    tuning: ignition::NodeTuning,
    /// The CAPI objects' values the own fields override; `None`: not looked at.
    overridden: Option<Vec<crate::capi::Overridden>>,
}

impl ControlPlaneState {
    /// A fresh state for `obj`.
    pub fn new(shared: Arc<Shared>, obj: &AWSControlPlane) -> Self {
        Self {
            shared,
            cluster: None,
            release: None,
            tenant: None,
            status: obj.status.clone().unwrap_or_default(),
            stacks: Vec::new(),
            waiting: None,
            failure: None,
            ready: false,
            maintenance: None,
            replicas: obj.spec.master_replicas(),
            replicas_field: "spec.replicas".into(),
            tuning: Default::default(),
            overridden: None,
        }
    }
}

/// Write the status; on the create path also when a resource stopped early.
pub async fn write_status(state: &mut ControlPlaneState, obj: &AWSControlPlane) -> Result<(), ResourceError> {
    let mut status = state.status.clone();
    controllers::stack_entries::merge_stacks(&mut status.stacks, &state.stacks);
    let (ok, reason, message) = match (&state.waiting, state.ready) {
        (_, true) => (true, "StackReady", "the masters' stack is ready".to_string()),
        (Some(w), _) => (false, state.failure.unwrap_or("Waiting"), w.clone()),
        (None, false) => (false, "StacksCreating", "the masters' stack is being created".to_string()),
    };
    controllers::status::set_condition(&mut status.conditions, READY, ok, reason, message, obj.metadata.generation);
    if let Some(settings) = &state.maintenance {
        let before = obj.status.as_ref().map_or(&[][..], |s| s.conditions.as_slice());
        controllers::record_maintenance_settings(&state.shared, obj, &mut status.conditions, before, settings).await;
    }
    crate::approval::set_update_pending(&mut status.conditions, obj, &status.stacks);
    if let Some(overridden) = &state.overridden
        && let Some(note) = crate::capi::note_overridden(&mut status.conditions, overridden, obj.metadata.generation)
    {
        state.shared.warning(obj, crate::capi::OVERRIDDEN, note).await;
    }
    controllers::status::write_status(&state.shared.client, obj, obj.status.as_ref(), &status).await?;
    state.status = status;
    Ok(())
}

/// Record invalid input in the status; the returned error becomes the Warning event.
async fn reject(state: &mut ControlPlaneState, obj: &AWSControlPlane, err: ResourceError) -> ResourceError {
    let (status, err) = controllers::status::reject(&state.shared.client, obj, obj.status.as_ref(), err).await;
    state.status = status;
    err
}

/// Finds the cluster, validates, resolves the Release and the tenant account.
#[derive(Debug)]
pub struct Inputs;

impl Resource<AWSControlPlane, ControlPlaneState> for Inputs {
    fn name(&self) -> &str {
        "inputs"
    }

    async fn ensure_created(&self, state: &mut ControlPlaneState, obj: &AWSControlPlane) -> resource::Result<Outcome> {
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
            let g8s = crate::capi::g8s_control_plane_of(&shared.client, &shared.capi, obj, &cluster.name_any()).await?;
            let release = controllers::lookup::release_of(&shared, obj).await?;
            let role = controllers::lookup::tenant_role(&shared, &cluster).await?;
            let tenant = shared.aws.tenant(&role, &cluster.spec.provider.region).await?;
            Ok::<_, ResourceError>(Some((cluster, release, tenant, role, capi, g8s)))
        }
        .await;
        match checked {
            Ok(Some((cluster, release, tenant, role, capi, g8s))) => {
                let account = controllers::lookup::recorded_account(&cluster, role);
                let current = obj.status.as_ref();
                controllers::stack_entries::remember_account(&shared, obj, current, &mut state.status, account).await?;
                // Built with the Cluster API objects' values where the own are unset.
                let (cluster, mut overridden) = crate::capi::effective_cluster(&cluster, capi.as_ref());
                let (replicas, replicas_overridden) = crate::capi::master_replicas(obj, g8s.as_ref());
                overridden.extend(replicas_overridden);
                state.replicas = replicas;
                state.replicas_field = crate::capi::master_replicas_field(obj, g8s.as_ref());
                state.tuning = crate::capi::tuning(capi.as_ref(), &[]);
                state.overridden = Some(overridden);
                state.cluster = Some(cluster);
                state.release = Some(release);
                state.tenant = Some(tenant);
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

    async fn ensure_deleted(&self, state: &mut ControlPlaneState, obj: &AWSControlPlane) -> resource::Result<Outcome> {
        let shared = state.shared.clone();
        let Some(cluster) = controllers::lookup::cluster_of(&shared, obj).await? else {
            // The cluster went first (its finalizer removed by hand, say): TCCPN may still
            // exist in the tenant account.
            let id = controllers::lookup::cluster_id(obj)?;
            let name = names::stack_name(&id, StackKind::Tccpn, None);
            let stacks = [(controllers::stack_entries::Account::Tenant, StackKind::Tccpn, name)];
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
        let role = controllers::lookup::tenant_role(&shared, &cluster).await?;
        state.tenant = Some(shared.aws.tenant(&role, &cluster.spec.provider.region).await?);
        state.cluster = Some(cluster);
        Ok(Outcome::proceed())
    }
}

/// The masters' node configs and the TCCPN stack.
#[derive(Debug)]
pub struct Masters;

impl Resource<AWSControlPlane, ControlPlaneState> for Masters {
    fn name(&self) -> &str {
        "masters"
    }

    async fn ensure_created(&self, state: &mut ControlPlaneState, obj: &AWSControlPlane) -> resource::Result<Outcome> {
        let shared = state.shared.clone();
        let (Some(cluster), Some(release), Some(tenant)) =
            (state.cluster.clone(), state.release.clone(), state.tenant.clone())
        else {
            return Err(ResourceError::msg("Internal", "inputs were not resolved"));
        };
        let id = cluster.name_any();
        let region = cluster.spec.provider.region.clone();
        let wait = |state: &mut ControlPlaneState, why: String| {
            state.waiting = Some(why);
            Outcome::cancel_reconciliation().requeue_after(shared.config.poll)
        };
        // Prerequisites from the cluster: its network stack, its key, its bucket.
        let tccp_name = names::stack_name(&id, StackKind::Tccp, None);
        let Some(tccp_view) = shared.stacks.get(&tenant.cache_key(), tenant.cfn.as_ref(), &tccp_name).await? else {
            let out = wait(state, format!("waiting for stack {tccp_name}"));
            write_status(state, obj).await?;
            return Ok(out);
        };
        if !tccp_view.status.is_usable() {
            let out = wait(state, format!("waiting for stack {tccp_name} ({})", tccp_view.status));
            write_status(state, obj).await?;
            return Ok(out);
        }
        let azs: Vec<String> = tccp_view
            .outputs
            .get("AvailabilityZones")
            .map(|s| s.split(',').filter(|a| !a.is_empty()).map(str::to_string).collect())
            .unwrap_or_default();
        let outputs = tccp::Outputs::from_outputs(&tccp_view.outputs, &azs)
            .map_err(|e| ResourceError::msg("MissingOutput", format!("stack {tccp_name}: {e}")))?;
        if let Some(missing) = obj.spec.availability_zones.iter().find(|az| outputs.az(az).is_none()) {
            let out = wait(state, format!("waiting for stack {tccp_name} to cover zone {missing}"));
            write_status(state, obj).await?;
            return Ok(out);
        }
        let Some(key_arn) = controllers::lookup::cluster_key(&shared, &tenant, &id).await? else {
            let out = wait(state, format!("waiting for the key {}", names::kms_alias(&id)));
            write_status(state, obj).await?;
            return Ok(out);
        };
        let bucket = names::bucket(&tenant.account_id, &id);
        let flatcar = release.component_version("containerlinux").unwrap_or_default();
        let ami = shared.amis.lookup(flatcar, &region)?;

        // Node configs, one per master.
        let replicas = state.replicas as u32;
        let subnets: Vec<(String, String)> = obj
            .spec
            .availability_zones
            .iter()
            .filter_map(|az| outputs.az(az).map(|o| (az.clone(), o.private_subnet_id.clone())))
            .collect();
        let masters = masters_of(obj, replicas, &subnets).map_err(|e| {
            ResourceError::msg("InvalidSpec", format!("{}: {e}", controllers::status::describe(obj))).permanent()
        })?;
        let etcd_volume = etcd_volume(obj).map_err(|e| {
            ResourceError::msg("InvalidSpec", format!("{}: {e}", controllers::status::describe(obj))).permanent()
        })?;
        let cluster_ns = cluster.namespace().unwrap_or_default();
        let certs_ns = crate::node_config::certificates_namespace(&shared, &cluster_ns);
        let certs = crate::node_config::certificates(&shared, certs_ns, &id).await?;
        let mut secrets = match crate::node_config::secrets_for(true, &certs) {
            Ok(s) => s,
            Err(missing) => {
                let out = wait(
                    state,
                    format!(
                        "waiting for certificate Secrets in namespace {certs_ns} labelled giantswarm.io/cluster={id},giantswarm.io/certificate=<name>: missing {}",
                        missing.join(", ")
                    ),
                );
                write_status(state, obj).await?;
                return Ok(out);
            }
        };
        // The API server's --encryption-provider-config points at this file: without it, the
        // API server would not start.
        match crate::node_config::encryption_config(&shared, certs_ns, &id).await? {
            Some(config) => secrets.push(config),
            None => {
                let out = wait(
                    state,
                    format!(
                        "waiting for Secret {certs_ns}/{} with key {} (the API server's encryption-provider config)",
                        crate::node_config::encryption_config_secret(&id),
                        crate::node_config::ENCRYPTION_CONFIG_KEY
                    ),
                );
                write_status(state, obj).await?;
                return Ok(out);
            }
        }
        // IAM roles for service accounts: the issuer the cluster published, and its key pair.
        let irsa = match crate::controllers::cluster::irsa::master_inputs(&shared, &cluster, &release, certs_ns).await?
        {
            crate::controllers::cluster::irsa::MasterInputs::Off => None,
            crate::controllers::cluster::irsa::MasterInputs::Waiting(why) => {
                let out = wait(state, why);
                write_status(state, obj).await?;
                return Ok(out);
            }
            crate::controllers::cluster::irsa::MasterInputs::Ready { issuer, node, secrets: keys } => {
                secrets.extend(keys);
                Some((issuer, node))
            }
        };
        let created = cluster
            .status
            .as_ref()
            .is_some_and(|s| s.cluster.has_condition(apis::cluster_status::ClusterCondition::Created));
        let domain = &cluster.spec.cluster.dns.domain;
        let base = names::tenant_base_domain(&id, domain);
        // Every master's config is built and verified before any is uploaded.
        let mut configs = Vec::with_capacity(masters.len());
        for m in &masters {
            let labels = BTreeMap::from([
                ("giantswarm.io/provider".to_string(), "aws".to_string()),
                (apis::labels::AWS_OPERATOR_VERSION.to_string(), shared.config.version.clone()),
                (apis::labels::CONTROL_PLANE.to_string(), obj.name_any()),
                ("giantswarm.io/master-id".to_string(), m.id.to_string()),
            ]);
            let role = Role::Master {
                id: m.id,
                etcd_name: ignition::etcd_name(m.id),
                etcd_initial_cluster: ignition::etcd_initial_cluster(&base, replicas as u8),
                initial_cluster_state: if created { InitialClusterState::Existing } else { InitialClusterState::New },
            };
            let mut input = crate::node_config::input(
                &shared.config.registry,
                &shared.config.service_cidr,
                &release,
                &cluster,
                role,
                labels,
                secrets.clone(),
            );
            input.tuning = state.tuning.clone();
            input.extras = shared.config.node_extras.clone();
            input.irsa = irsa.as_ref().map(|(_, node)| node.clone());
            let node = format!("master-{}", m.id);
            let config = match crate::node_config::build(&controllers::status::describe(obj), &node, &input) {
                Ok(config) => config,
                Err(e) => return Err(reject(state, obj, e).await),
            };
            configs.push((names::master_config_key(&shared.config.version, &id, m.id), config));
        }
        for (key, config) in &configs {
            if crate::node_config::upload(&shared, &tenant, &key_arn, &bucket, key, config).await? {
                shared.event(obj, "NodeConfigUploaded", format!("s3://{bucket}/{key}")).await;
            }
        }

        // The stack.
        let common = controllers::lookup::common(&shared.config, &cluster, &release);
        let name = names::stack_name(&id, StackKind::Tccpn, None);
        let recorded = obj.status.as_ref().and_then(|s| s.stacks.iter().find(|e| e.name == name).cloned());
        let observed = shared.stacks.get(&tenant.cache_key(), tenant.cfn.as_ref(), &name).await?;
        let exists = observed.is_some();
        let params = |is_update: bool| tccpn::Params {
            common: common.clone(),
            masters: masters.clone(),
            instance_type: obj.spec.instance_type.clone(),
            image_id: ami.clone(),
            imds_http_tokens: stacks::imds_http_tokens(
                obj.annotations().get(apis::labels::AWS_METADATA_V2).map(String::as_str),
            )
            .into(),
            master_security_group_id: outputs.master_security_group_id.clone(),
            bucket: bucket.clone(),
            kms_key_arn: key_arn.clone(),
            hosted_zone_id: outputs.hosted_zone_id.clone(),
            internal_hosted_zone_id: outputs.internal_hosted_zone_id.clone(),
            etcd_volume,
            is_update,
            irsa: irsa.as_ref().map(|(issuer, _)| issuer.clone()),
        };
        // Masters roll one after the other only on updates; the hash is that of the update
        // form, so the first update after a create is not caused by the ordering alone.
        let canonical = tccpn::render(&params(true)).hash();
        let desired = DesiredStack {
            kind: StackKind::Tccpn,
            name: name.clone(),
            template: tccpn::render(&params(exists)),
            tags: stacks::stack_tags(&common, StackKind::Tccpn, Some(&obj.name_any())),
            update: UpdateWhen::Now,
            canonical_hash: Some(canonical),
        };
        let hash = desired_hash(&desired);
        // The deployed stack, when it differs from the desired one.
        let changing = observed.as_ref().filter(|v| v.template_hash() != Some(hash.as_str()));
        // An edit that would replace or remove an etcd member's volume or interface is refused
        // before anything is deployed, whether or not the API server's rules let it in (an
        // object from before those rules, or one written around them).
        if changing.is_some()
            && let Some(deployed) =
                crate::stack_ops::deployed_template(&shared, &tenant, StackKind::Tccpn, &name).await?
        {
            let replaced = tccpn::etcd_replacements(&deployed, &desired.template);
            if !replaced.is_empty() {
                let err = ResourceError::msg(
                    ETCD_REPLACEMENT_REFUSED,
                    etcd_refusal(obj, &state.replicas_field, &name, &replaced),
                )
                .permanent();
                return Err(reject(state, obj, err).await);
            }
        }
        // An upgrade replaces HA masters through their terminating hook, which drains each
        // through the workload cluster: while it cannot be reached, the roll waits.
        let held = match changing {
            Some(view)
                if replicas > 1
                    && crate::upgrade::nodes_needed(
                        &shared.config.version,
                        view.outputs.get("OperatorVersion").map(String::as_str),
                    ) =>
            {
                controllers::lookup::workload_nodes(&shared, &cluster).await.err()
            }
            _ => None,
        };
        // Maintenance windows (`crate::maintenance`): an update of the settled stack replaces
        // the masters and waits for one; a first creation does not.
        let pause = std::time::Duration::from_secs(tccpn::MASTER_PAUSE_SECONDS);
        let schedule = crate::maintenance::schedule(&cluster, Some(pause));
        let had_condition =
            obj.status.as_ref().is_some_and(|s| s.conditions.iter().any(|c| c.type_ == crate::maintenance::SETTINGS));
        if cluster.spec.cluster.maintenance.is_some() || had_condition {
            let whose = format!("AWSCluster {}/{id}", cluster.namespace().unwrap_or_default());
            state.maintenance =
                Some(schedule.as_ref().map(|_| ()).map_err(|e| crate::maintenance::problems_message(&whose, e)));
        }
        let settled_and_changing = changing.is_some_and(|v| v.status.is_usable());
        let window = if settled_and_changing {
            let what = format!("the masters' rolling update of cluster {id}");
            crate::maintenance::gate(&cluster, &schedule, &what, shared.clock.now(), shared.config.poll)
        } else {
            crate::maintenance::Gate::Go
        };
        // The approval gate (`crate::approval`): an update waiting for approval is held as a
        // change set, and takes no rollout slot (a slot is not held for a person).
        let entries = obj.status.as_ref().map(|s| s.stacks.clone()).unwrap_or_default();
        let gate = crate::stack_ops::Gate::new(&cluster, obj, &entries, crate::approval::UpdateKind::Other);
        let approval_holds = gate.holds(&name, &hash);
        // Rollout limits (`crate::rollout`): the cluster's slot for the masters' roll.
        let slot_wait =
            if settled_and_changing && window == crate::maintenance::Gate::Go && held.is_none() && !approval_holds {
                crate::rollout::acquire(&shared, &cluster, obj).await?
            } else {
                None
            };
        let desired = DesiredStack {
            update: if held.is_none() && window == crate::maintenance::Gate::Go && slot_wait.is_none() {
                UpdateWhen::Now
            } else {
                UpdateWhen::Later
            },
            ..desired
        };
        let (progress, entry) = crate::stack_ops::ensure_gated(
            &shared,
            &tenant,
            obj,
            desired,
            Some(&bucket),
            recorded.as_ref(),
            Some(&gate),
        )
        .await?;
        state.stacks.push(entry);
        if let Some(why) = held {
            state.failure = Some(WORKLOAD_CLUSTER_UNREACHABLE);
            let out = wait(state, format!("the masters' upgrade waits: {why}"));
            write_status(state, obj).await?;
            return Ok(out);
        }
        match window {
            crate::maintenance::Gate::Go => {}
            crate::maintenance::Gate::Wait { message, retry_after } => {
                let reason = crate::maintenance::WAITING_FOR_WINDOW;
                let before = obj.status.as_ref().map_or(&[][..], |s| s.conditions.as_slice());
                controllers::announce_maintenance_wait(&shared, obj, before, &message).await;
                state.failure = Some(reason);
                state.waiting = Some(message);
                write_status(state, obj).await?;
                return Ok(Outcome::cancel_reconciliation().requeue_after(retry_after));
            }
            crate::maintenance::Gate::Invalid(message) => {
                state.failure = Some(crate::maintenance::INVALID_MAINTENANCE);
                let out = wait(state, message);
                write_status(state, obj).await?;
                return Ok(out);
            }
        }
        if let Some(why) = slot_wait {
            state.failure = Some(crate::rollout::WAITING_FOR_SLOT);
            let out = wait(state, why);
            write_status(state, obj).await?;
            return Ok(out);
        }
        match progress {
            Progress::Ready(_) => {
                if !settled_and_changing {
                    crate::rollout::release(&shared, &cluster, obj).await?;
                }
                state.ready = true;
                write_status(state, obj).await?;
                if created {
                    Ok(Outcome::proceed())
                } else {
                    // Nothing watches the cluster's `Created` condition from here: look again
                    // until it is set, so that a master replaced after that joins etcd with
                    // `initial-cluster-state=existing` instead of founding a new cluster.
                    Ok(Outcome::proceed().requeue_after(shared.config.poll))
                }
            }
            Progress::AwaitingApproval { message } => {
                state.failure = Some(crate::approval::UPDATE_PENDING);
                let out = wait(state, message);
                write_status(state, obj).await?;
                Ok(out)
            }
            Progress::Pending => {
                let out = wait(state, format!("stack {name} is not ready"));
                write_status(state, obj).await?;
                Ok(out)
            }
            Progress::Retrying { reason, message, retry_after } => {
                state.failure = Some(reason);
                state.waiting = Some(message);
                write_status(state, obj).await?;
                Ok(Outcome::cancel_reconciliation().requeue_after(retry_after))
            }
        }
    }

    async fn ensure_deleted(&self, state: &mut ControlPlaneState, obj: &AWSControlPlane) -> resource::Result<Outcome> {
        let shared = state.shared.clone();
        let (Some(cluster), Some(tenant)) = (state.cluster.clone(), state.tenant.clone()) else {
            return Ok(Outcome::proceed());
        };
        let id = cluster.name_any();
        let keep = |why: &str| {
            tracing::debug!(why, "keeping the control plane finalizer");
            Outcome::cancel_reconciliation().keep_finalizer().requeue_after(shared.config.poll)
        };
        let pools = controllers::lookup::node_pools(&shared, &obj.namespace().unwrap_or_default(), &id).await?;
        if !pools.is_empty() {
            return Ok(keep("node pools first"));
        }
        let name = names::stack_name(&id, StackKind::Tccpn, None);
        controllers::detach_foreign_policies(&shared, &tenant, obj, &tccpn::role_name(&id)).await?;
        let cluster_uid = cluster.uid().unwrap_or_default();
        let mut status = obj.status.clone().unwrap_or_default();
        let recorded = status.stacks.iter().find(|e| e.name == name).cloned();
        let (deletion, entry) =
            crate::stack_ops::delete(&shared, &tenant, obj, StackKind::Tccpn, &name, recorded.as_ref(), &cluster_uid)
                .await?;
        let (out, failed) = match deletion {
            Deletion::Gone => {
                crate::rollout::release(&shared, &cluster, obj).await?;
                (Outcome::proceed(), None)
            }
            Deletion::Pending => (keep("deleting"), None),
            Deletion::Failed { message, retry_after } => {
                (Outcome::cancel_reconciliation().keep_finalizer().requeue_after(retry_after), Some(message))
            }
        };
        controllers::stack_entries::record_deletion(&shared, obj, obj.status.as_ref(), &mut status, entry, failed)
            .await?;
        Ok(out)
    }
}

/// The `Ready` reason of a control plane whose masters' upgrade waits for the workload cluster.
pub const WORKLOAD_CLUSTER_UNREACHABLE: &str = "WorkloadClusterUnreachable";

/// The `Ready` reason of a control plane whose spec would replace or remove a master's etcd
/// volume or interface; the stack is left as it is.
pub const ETCD_REPLACEMENT_REFUSED: &str = "EtcdReplacementRefused";

/// What a person reads when an edit would replace etcd members: the fields, what would happen,
/// and the supported path.
fn etcd_refusal(
    obj: &AWSControlPlane,
    replicas_field: &str,
    stack: &str,
    replaced: &[tccpn::EtcdReplacement],
) -> String {
    let what: Vec<String> = replaced.iter().map(ToString::to_string).collect();
    format!(
        "{}: spec.availabilityZones or {replicas_field} changed in a way that would replace or delete masters' \
         etcd data in stack {stack} ({}); nothing was deployed. Set spec.availabilityZones and {replicas_field} \
         back to what is deployed. A running control plane may only go from one master to three ({replicas_field} \
         3, the first zone kept first in spec.availabilityZones); moving masters to other zones or removing \
         masters needs a new cluster restored from an etcd backup",
        controllers::status::describe(obj),
        what.join(", ")
    )
}

/// The hash `ensure` compares with the deployed stack's.
fn desired_hash(desired: &DesiredStack) -> String {
    let canonical = desired.canonical_hash.clone().unwrap_or_else(|| desired.template.hash());
    aws_stacks::cfn::stack_hash(&canonical, &desired.tags)
}

/// Drains the masters their groups are about to terminate ([`crate::drainers`]); first, so that
/// a rolling update or deletion in progress does not hold it up.
#[derive(Debug)]
pub struct Drainers;

impl Drainers {
    async fn step(state: &ControlPlaneState, obj: &AWSControlPlane, deleting: bool) -> Outcome {
        let (Some(cluster), Some(tenant)) = (&state.cluster, &state.tenant) else {
            return Outcome::proceed();
        };
        let kind = crate::drainers::plan::OwnerKind::ControlPlane(obj.name_any());
        let hook = aws_stacks::stacks::tccpn::TERMINATING_HOOK;
        crate::drainers::step(&state.shared, tenant, cluster, obj, kind, hook, deleting).await
    }
}

impl Resource<AWSControlPlane, ControlPlaneState> for Drainers {
    fn name(&self) -> &str {
        "drainers"
    }

    async fn ensure_created(&self, state: &mut ControlPlaneState, obj: &AWSControlPlane) -> resource::Result<Outcome> {
        Ok(Self::step(state, obj, false).await)
    }

    async fn ensure_deleted(&self, state: &mut ControlPlaneState, obj: &AWSControlPlane) -> resource::Result<Outcome> {
        Ok(Self::step(state, obj, true).await)
    }
}

/// The masters of `obj` over `subnets` (`(zone, private subnet id)`), with the etcd volume of a
/// single master created from the snapshot the annotation
/// `aws-operator.giantswarm.io/etcd-snapshot-id` names; or what is wrong and the fix.
pub fn masters_of(
    obj: &AWSControlPlane,
    replicas: u32,
    subnets: &[(String, String)],
) -> Result<Vec<tccpn::Master>, String> {
    let mut masters = tccpn::masters(replicas, subnets).map_err(|e| e.to_string())?;
    let Some(snapshot) = obj.annotations().get(apis::labels::ETCD_SNAPSHOT_ID) else {
        return Ok(masters);
    };
    let key = apis::labels::ETCD_SNAPSHOT_ID;
    let valid =
        snapshot.strip_prefix("snap-").is_some_and(|h| !h.is_empty() && h.chars().all(|c| c.is_ascii_hexdigit()));
    if !valid {
        return Err(format!("annotation {key} is {snapshot:?}: set it to an EBS snapshot id (snap-…) or remove it"));
    }
    match masters.as_mut_slice() {
        [only] => only.etcd_snapshot_id = Some(snapshot.clone()),
        _ => {
            return Err(format!(
                "annotation {key} restores the etcd volume of one master, and spec.replicas is {replicas}: set spec.replicas to 1"
            ));
        }
    }
    Ok(masters)
}

/// The masters' etcd volume performance the control plane's annotations ask for
/// (`alpha.aws.giantswarm.io/ebs-volume-iops`, `…/ebs-volume-throughput`), or what is wrong with
/// them and the fix.
pub fn etcd_volume(obj: &AWSControlPlane) -> Result<tccpn::EtcdVolumePerformance, String> {
    let annotation = |key: &str| obj.annotations().get(key).map(String::as_str);
    tccpn::EtcdVolumePerformance::from_annotations(
        annotation(apis::labels::AWS_EBS_VOLUME_IOPS),
        annotation(apis::labels::AWS_EBS_VOLUME_THROUGHPUT),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn control_plane(replicas: i32, snapshot: Option<&str>) -> AWSControlPlane {
        let mut annotations = serde_json::Map::new();
        if let Some(s) = snapshot {
            annotations.insert(apis::labels::ETCD_SNAPSHOT_ID.into(), s.into());
        }
        serde_json::from_value(serde_json::json!({
            "apiVersion": "infrastructure.giantswarm.io/v1alpha3", "kind": "AWSControlPlane",
            "metadata": {"name": "q8v2k", "namespace": "org-initech", "annotations": annotations},
            "spec": {"availabilityZones": ["eu-west-1b"], "instanceType": "m5.xlarge", "replicas": replicas}
        }))
        .expect("an AWSControlPlane")
    }

    #[test]
    fn the_snapshot_annotation_seeds_the_one_masters_etcd_volume_or_names_the_fix() {
        let subnets = [("eu-west-1b".to_string(), "subnet-0c1d".to_string())];
        let plain = masters_of(&control_plane(1, None), 1, &subnets).expect("masters");
        assert_eq!(plain[0].etcd_snapshot_id, None);
        let restored = masters_of(&control_plane(1, Some("snap-0a1b2c3d")), 1, &subnets).expect("masters");
        assert_eq!(restored[0].etcd_snapshot_id.as_deref(), Some("snap-0a1b2c3d"));
        let err = masters_of(&control_plane(1, Some("vol-0a1b")), 1, &subnets).expect_err("not a snapshot");
        assert!(err.contains(apis::labels::ETCD_SNAPSHOT_ID) && err.contains("snap-…"), "{err}");
        let err = masters_of(&control_plane(3, Some("snap-0a1b2c3d")), 3, &subnets).expect_err("three masters");
        assert!(err.contains("set spec.replicas to 1"), "{err}");
    }
}

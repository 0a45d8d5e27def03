//! The three stacks of a legacy cluster, created in order (`host-setup` in the management
//! account, `guest-main` in the cluster's, `host-main` in the management account) and deleted in
//! reverse order, through the node-pools stack state machine ([`crate::stack_ops`]).

use apis::aws_config::AWSConfig;
use aws_stacks::names;
use aws_stacks::stacks::legacy::{self, LegacyStack, guest_main, host_main, host_setup, inputs};
use aws_stacks::stacks::{CpRouteTable, tccpf};
use kube::ResourceExt;
use operatorkit::{Outcome, Resource, ResourceError, held_secrets, resource};

use super::{LegacyState, reject};
use crate::controllers::cluster::leftovers::{Cleanup, clean_up_cluster};
use crate::controllers::{self, status::READY};
use crate::stack_ops::{Deletion, DesiredStack, Gate, Progress, UpdateWhen};

/// `host-setup`, `guest-main` and `host-main`.
#[derive(Debug)]
pub struct Stacks;

/// The template of `stack` refused: a bad input the validation let through.
fn invalid(obj: &AWSConfig, errors: Vec<apis::validation::FieldError>) -> ResourceError {
    operatorkit::error::field_errors(obj, errors).into()
}

impl Resource<AWSConfig, LegacyState> for Stacks {
    fn name(&self) -> &str {
        "stacks"
    }

    async fn ensure_created(&self, state: &mut LegacyState, obj: &AWSConfig) -> resource::Result<Outcome> {
        let shared = state.shared.clone();
        let id = obj.cluster_id().to_string();
        let (tenant, cp) = state.accounts()?;
        let mut inst = state.installation(obj)?;
        let common = inputs::common(obj, &inst);
        let recorded = |name: &str| obj.status.as_ref().and_then(|s| s.stacks.iter().find(|e| e.name == name).cloned());
        // The approval gate of the node-pools clusters (`crate::approval`): with the object's
        // `update-approval` annotation, an update of guest-main or host-main waits as a change
        // set until the object is annotated with its plan hash. Creates never wait.
        let entries = obj.status.as_ref().map(|s| s.stacks.clone()).unwrap_or_default();
        let gate = Gate::new(obj, obj, &entries, crate::approval::UpdateKind::Other);
        let desired = |stack: LegacyStack, template, update| DesiredStack {
            kind: stack.counterpart(),
            name: legacy::stack_name(&id, stack),
            template,
            tags: legacy::legacy_stack_tags(&common, stack),
            update,
            canonical_hash: None,
        };

        // host-setup: the peering role in the management account; never updated.
        let params = match inputs::host_setup_params(obj, &inst) {
            Ok(p) => p,
            Err(errors) => return Err(reject(state, obj, invalid(obj, errors)).await),
        };
        let stack = desired(LegacyStack::HostSetup, host_setup::render(&params), UpdateWhen::Never);
        let name = stack.name.clone();
        let (progress, entry) =
            crate::stack_ops::ensure(&shared, &cp, obj, stack, None, recorded(&name).as_ref()).await?;
        state.stacks.push(entry);
        let Progress::Ready(view) = progress else {
            return state.stack_not_ready(obj, &name, progress).await;
        };
        let Some(peer_role) = view.outputs.get("PeerRoleARN").cloned() else {
            return Err(ResourceError::msg("MissingOutput", format!("stack {name} has no PeerRoleARN output")));
        };
        inst.peer_role_arn = peer_role;

        // guest-main: everything of the cluster in its account. Over CloudFormation's inline
        // limit, the template goes through the cluster bucket. The hash ignores the workers'
        // live size, so the group scaling by itself causes no update; an update for another
        // reason keeps the size the cluster-autoscaler chose, inside the object's bounds.
        let name = legacy::stack_name(&id, LegacyStack::GuestMain);
        let build = |live: Option<u32>| match inputs::guest_main_params(obj, &inst, live) {
            Ok(params) => guest_main::render(&params).map(|template| (params, template)).map_err(|e| {
                ResourceError::msg("InvalidSpec", format!("{}: {e}", controllers::status::describe(obj))).permanent()
            }),
            Err(errors) => Err(invalid(obj, errors)),
        };
        let (mut params, mut template) = match build(None) {
            Ok(built) => built,
            Err(e) if !e.is_retryable() => return Err(reject(state, obj, e).await),
            Err(e) => return Err(e),
        };
        let canonical = template.hash();
        let tags = legacy::legacy_stack_tags(&common, LegacyStack::GuestMain);
        let observed = shared.stacks.get(&tenant.cache_key(), tenant.cfn.as_ref(), &name).await?;
        let deployed = observed.as_ref().and_then(|v| v.template_hash().map(str::to_string));
        let group = observed.as_ref().and_then(|v| v.outputs.get("WorkerASGName").cloned());
        if let Some(group) = group.filter(|_| deployed != Some(aws_stacks::cfn::stack_hash(&canonical, &tags)))
            && let Some((live, _, _)) = crate::aws::ec2::asg_capacity(&tenant, &group).await?
        {
            (params, template) = build(Some(u32::try_from(live).unwrap_or(0)))?;
        }
        let stack = DesiredStack {
            kind: LegacyStack::GuestMain.counterpart(),
            name: name.clone(),
            template,
            tags,
            update: UpdateWhen::Now,
            canonical_hash: Some(canonical),
        };
        let bucket = names::bucket(&tenant.account_id, &id);
        let (progress, entry) = crate::stack_ops::ensure_gated(
            &shared,
            &tenant,
            obj,
            stack,
            Some(&bucket),
            recorded(&name).as_ref(),
            Some(&gate),
        )
        .await?;
        state.stacks.push(entry);
        let Progress::Ready(guest) = progress else {
            return state.stack_not_ready(obj, &name, progress).await;
        };
        state.status.aws.auto_scaling_group.name = guest.outputs.get("WorkerASGName").cloned().unwrap_or_default();
        let Some(peering) = guest.outputs.get("VPCPeeringConnectionID").cloned() else {
            return Err(ResourceError::msg(
                "MissingOutput",
                format!("stack {name} has no VPCPeeringConnectionID output"),
            ));
        };

        // host-main: routes from the route tables `spec.aws.vpc.routeTableNames` names, and the
        // delegation of the cluster zone from the installation's zone.
        let (vpc, _) = state.management_vpc.clone().unwrap_or_default();
        let tables =
            crate::aws::ec2::control_plane_route_tables(&cp, &vpc, &obj.spec.aws.vpc.route_table_names).await?;
        let delegation =
            match guest.outputs.get("HostedZoneID").filter(|z| !z.is_empty() && shared.config.route53_enabled) {
                None => None,
                Some(zone) => match shared.intermediate_zone(&cp, &common.base_domain).await? {
                    Some(parent_zone_id) => Some(host_main::Delegation {
                        parent_zone_id,
                        name_servers: shared.zone_name_servers(&tenant, zone).await?,
                    }),
                    None => {
                        // Announced once per process and cluster.
                        let key = format!("{}/{id}", cp.cache_key());
                        let skipped = crate::context::Delegated::Skipped(std::time::Instant::now());
                        let first = shared.memo.lock().delegations.insert(key, skipped).is_none();
                        if first {
                            let note = format!(
                                "the management account {} has no hosted zone {}: zone {} is not delegated",
                                cp.account_id,
                                common.base_domain,
                                common.tenant_domain()
                            );
                            shared.event(obj, "DelegationSkipped", note).await;
                        }
                        None
                    }
                },
            };
        let template = host_main::render(&host_main::Params {
            common: common.clone(),
            peering_connection_id: peering,
            route_tables: tables.into_iter().map(|(id, name)| CpRouteTable { id, name }).collect(),
            private_subnets: params
                .zones
                .iter()
                .map(|z| tccpf::PrivateSubnet { az: z.name.clone(), cidr: z.private_cidr.clone() })
                .collect(),
            delegation,
        });
        let stack = desired(LegacyStack::HostMain, template, UpdateWhen::Now);
        let name = stack.name.clone();
        let (progress, entry) =
            crate::stack_ops::ensure_gated(&shared, &cp, obj, stack, None, recorded(&name).as_ref(), Some(&gate))
                .await?;
        state.stacks.push(entry);
        if !matches!(progress, Progress::Ready(_)) {
            return state.stack_not_ready(obj, &name, progress).await;
        }
        Ok(Outcome::proceed())
    }

    async fn ensure_deleted(&self, _: &mut LegacyState, _: &AWSConfig) -> resource::Result<Outcome> {
        Ok(Outcome::proceed())
    }
}

/// The `Ready` reason of a legacy cluster whose teardown is complete and whose Secrets are
/// released (the node-pools cluster's).
pub use crate::controllers::cluster::teardown::TEARDOWN_COMPLETE;

/// Whether the cluster's teardown completed.
pub(super) fn torn_down(obj: &AWSConfig) -> bool {
    obj.metadata.deletion_timestamp.is_some()
        && obj
            .status
            .as_ref()
            .is_some_and(|s| s.conditions.iter().any(|c| c.type_ == READY && c.reason == TEARDOWN_COMPLETE))
}

/// Ordered deletion: `host-main`, the leftovers, `guest-main`, `host-setup`, the buckets, the
/// key, the claim, the Secrets.
#[derive(Debug)]
pub struct Teardown;

impl Resource<AWSConfig, LegacyState> for Teardown {
    fn name(&self) -> &str {
        "teardown"
    }

    async fn ensure_created(&self, _: &mut LegacyState, _: &AWSConfig) -> resource::Result<Outcome> {
        Ok(Outcome::proceed())
    }

    async fn ensure_deleted(&self, state: &mut LegacyState, obj: &AWSConfig) -> resource::Result<Outcome> {
        let shared = state.shared.clone();
        if state.not_owned {
            return Ok(Outcome::proceed());
        }
        if state.torn_down {
            release_secrets(&shared, obj).await?;
            return Ok(Outcome::proceed());
        }
        let id = obj.cluster_id().to_string();
        let (tenant, cp) = state.accounts()?;
        let keep = |why: String| {
            tracing::debug!(cluster = %id, "{why}");
            Outcome::cancel_reconciliation().keep_finalizer().requeue_after(shared.config.poll)
        };
        let mut status = obj.status.clone().unwrap_or_default();
        operatorkit::conditions::mark_cluster_deleting(&mut status.cluster, jiff::Timestamp::now());
        let generation = obj.metadata.generation;
        controllers::status::set_condition(
            &mut status.conditions,
            READY,
            false,
            "Deleting",
            "the cluster is being deleted",
            generation,
        );
        let uid = obj.uid().unwrap_or_default();
        // The routes into the cluster and the delegation go first: nothing in the management
        // account points at the cluster while its network goes.
        let order = [(&cp, LegacyStack::HostMain), (&tenant, LegacyStack::GuestMain), (&cp, LegacyStack::HostSetup)];
        for (aws, stack) in order {
            let name = legacy::stack_name(&id, stack);
            if stack == LegacyStack::GuestMain {
                // What the cluster created outside its stacks keeps guest-main from being deleted.
                let guest = shared.stacks.get(&tenant.cache_key(), tenant.cfn.as_ref(), &name).await?;
                let zone = inputs::zone(obj);
                let cleanup =
                    clean_up_cluster(&shared, &tenant, obj, &id, &zone, None, guest.as_ref(), &guest_main::OWN_RECORDS)
                        .await?;
                if let Cleanup::Pending { reason, message } = cleanup {
                    controllers::status::set_condition(
                        &mut status.conditions,
                        READY,
                        false,
                        reason,
                        message.clone(),
                        generation,
                    );
                    controllers::status::write_status(&shared.client, obj, obj.status.as_ref(), &status).await?;
                    return Ok(keep(message));
                }
            }
            let recorded = status.stacks.iter().find(|e| e.name == name).cloned();
            let kind = stack.counterpart();
            let (deletion, entry) =
                crate::stack_ops::delete(&shared, aws, obj, kind, &name, recorded.as_ref(), &uid).await?;
            if matches!(deletion, Deletion::Pending) {
                tracing::debug!(cluster = %id, "deleting stack {name}");
            }
            let (out, failed) = deletion.stop(shared.config.poll);
            controllers::stack_entries::record_deletion(&shared, obj, obj.status.as_ref(), &mut status, entry, failed)
                .await?;
            if let Some(out) = out {
                return Ok(out);
            }
        }
        if !crate::aws::s3::delete_buckets(&tenant, &id).await? {
            return Ok(keep("emptying the cluster bucket".into()));
        }
        crate::aws::kms::schedule_key_deletion(&tenant, &id).await?;
        shared.memo.lock().forget_cluster(&tenant.cache_key(), &names::bucket(&tenant.account_id, &id), &id);
        node_lifecycle::claims::release(&shared.client, &super::owner(obj)).await?;
        // Recorded before the Secrets go, so that a later reconcile finishes without them.
        controllers::status::set_condition(
            &mut status.conditions,
            READY,
            false,
            TEARDOWN_COMPLETE,
            "every AWS resource of the cluster is deleted or scheduled for deletion; releasing its Secrets",
            generation,
        );
        controllers::status::write_status(&shared.client, obj, obj.status.as_ref(), &status).await?;
        release_secrets(&shared, obj).await?;
        let note = format!("cluster {id}: stacks, buckets and key are gone or scheduled for deletion");
        shared.event(obj, "ClusterDeleted", note).await;
        Ok(Outcome::proceed())
    }
}

/// Release the credential Secret (unless another legacy cluster uses it) and the cluster's own
/// Secrets.
async fn release_secrets(shared: &crate::context::Shared, obj: &AWSConfig) -> Result<(), ResourceError> {
    let cs = &obj.spec.aws.credential_secret;
    let configs: kube::Api<AWSConfig> = kube::Api::all(shared.client.clone());
    let shared_with_others = configs.list(&Default::default()).await?.items.iter().any(|c| {
        c.metadata.uid != obj.metadata.uid
            && c.spec.aws.credential_secret.name == cs.name
            && c.spec.aws.credential_secret.namespace == cs.namespace
    });
    let clusters: kube::Api<apis::aws::AWSCluster> = kube::Api::all(shared.client.clone());
    let used_by_cluster = clusters.list(&Default::default()).await?.items.iter().any(|c| {
        c.spec.provider.credential_secret.name == cs.name && c.spec.provider.credential_secret.namespace == cs.namespace
    });
    if !shared_with_others && !used_by_cluster {
        held_secrets::release(&shared.client, &cs.namespace, &cs.name, crate::context::SECRET_FINALIZER).await?;
    }
    let ns = obj.namespace().unwrap_or_default();
    crate::controllers::cluster::teardown::release_cluster_secrets(shared, &ns, obj.cluster_id()).await
}

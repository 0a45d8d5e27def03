//! Deletion, `teardown`: the children first, then the zone delegation, what the cluster left
//! outside its stacks ([`super::leftovers`]), the stacks, the buckets, the key and the namespace;
//! the Secrets the cluster held are released last.

use apis::aws::{AWSCluster, AWSClusterStatus, AWSControlPlane, AWSMachineDeployment};
use aws_stacks::names::{self, StackKind};
use kube::api::DeleteParams;
use kube::{Api, ResourceExt};
use operatorkit::{Outcome, Resource, ResourceError, held_secrets, resource};

use super::ClusterState;
use super::delegation::remove_delegation;
use super::leftovers::{Cleanup, clean_up};
use crate::context::Shared;
use crate::controllers;
use crate::controllers::status::READY;
use crate::stack_ops::Deletion;

/// Ordered deletion.
#[derive(Debug)]
pub struct Teardown;

impl Resource<AWSCluster, ClusterState> for Teardown {
    fn name(&self) -> &str {
        "teardown"
    }

    async fn ensure_created(&self, _: &mut ClusterState, _: &AWSCluster) -> resource::Result<Outcome> {
        Ok(Outcome::proceed())
    }

    async fn ensure_deleted(&self, state: &mut ClusterState, obj: &AWSCluster) -> resource::Result<Outcome> {
        let shared = state.shared.clone();
        if state.not_owned {
            return Ok(Outcome::proceed());
        }
        if state.torn_down {
            release_secrets(&shared, obj).await?;
            return Ok(Outcome::proceed());
        }
        let id = obj.name_any();
        let ns = obj.namespace().unwrap_or_default();
        let (tenant, cp) = state.accounts()?;
        let (tenant, cp) = (tenant.clone(), cp.clone());
        let keep = |state: &mut ClusterState, why: String| {
            state.waiting = Some(why);
            Outcome::cancel_reconciliation().keep_finalizer().requeue_after(shared.config.poll)
        };
        let mut status = deleting_status(obj);
        // Node pools and the control plane go first. Deleting the AWSCluster deletes them:
        // explicitly, not through owner references, since Kubernetes' default (background)
        // deletion would wait for the cluster to be gone before deleting them, while the
        // cluster's teardown waits for them.
        let mds = controllers::lookup::node_pools(&shared, &ns, &id).await?;
        let cps = controllers::lookup::control_planes(&shared, &ns, &id).await?;
        if !mds.is_empty() || !cps.is_empty() {
            delete_children(&shared, obj, &mds, &cps).await?;
            controllers::status::write_status(&shared.client, obj, obj.status.as_ref(), &status).await?;
            return Ok(keep(
                state,
                format!("waiting for {} node pools and {} control planes to be deleted", mds.len(), cps.len()),
            ));
        }
        if shared.config.route53_enabled {
            remove_delegation(&shared, &cp, obj).await?;
        }
        // What the cluster created outside its stacks keeps TCCP from being deleted.
        let tccp_name = names::stack_name(&id, StackKind::Tccp, None);
        let tccp = shared.stacks.get(&tenant.cache_key(), tenant.cfn.as_ref(), &tccp_name).await?;
        if let Cleanup::Pending { reason, message } = clean_up(&shared, &tenant, obj, tccp.as_ref()).await? {
            controllers::status::set_condition(
                &mut status.conditions,
                READY,
                false,
                reason,
                message.clone(),
                obj.metadata.generation,
            );
            controllers::status::write_status(&shared.client, obj, obj.status.as_ref(), &status).await?;
            return Ok(keep(state, message));
        }
        // Tenant stacks before management-account stacks; only those carrying this cluster's UID
        // (or none, an earlier version's) are deleted.
        let uid = obj.uid().unwrap_or_default();
        for (aws, kind) in [(&tenant, StackKind::Tccp), (&cp, StackKind::Tccpf), (&cp, StackKind::Tccpi)] {
            let name = names::stack_name(&id, kind, None);
            let recorded = status.stacks.iter().find(|e| e.name == name).cloned();
            let (deletion, entry) =
                crate::stack_ops::delete(&shared, aws, obj, kind, &name, recorded.as_ref(), &uid).await?;
            let (out, failed) = match deletion {
                Deletion::Gone => (None, None),
                Deletion::Pending => (Some(keep(state, format!("deleting stack {name}"))), None),
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
        if !crate::aws::s3::delete_buckets(&tenant, &id).await? {
            return Ok(keep(state, "emptying the cluster bucket".into()));
        }
        if let Some(what) = super::irsa::forget(&shared, obj, &tenant).await? {
            return Ok(keep(state, what));
        }
        crate::aws::kms::schedule_key_deletion(&tenant, &id).await?;
        // A cluster re-created with the same id in this process starts from nothing: its new
        // bucket gets every node config again.
        shared.memo.lock().forget_cluster(&tenant.cache_key(), &names::bucket(&tenant.account_id, &id), &id);
        // The claim of the id goes last, and only if it is this cluster's.
        node_lifecycle::claims::release(&shared.client, &controllers::lookup::owner(obj)).await?;
        // Recorded before the Secrets go, so that a later reconcile (the finalizer removal lost a
        // race, or the process stopped here) finishes without them.
        controllers::status::set_condition(
            &mut status.conditions,
            controllers::status::READY,
            false,
            TEARDOWN_COMPLETE,
            "every AWS resource of the cluster is deleted or scheduled for deletion; releasing its Secrets",
            obj.metadata.generation,
        );
        controllers::status::write_status(&shared.client, obj, obj.status.as_ref(), &status).await?;
        release_secrets(&shared, obj).await?;
        shared
            .event(
                obj,
                "ClusterDeleted",
                format!("cluster {id}: stacks, buckets and key are gone or scheduled for deletion"),
            )
            .await;
        Ok(Outcome::proceed())
    }
}

/// The `Ready` reason of a cluster whose teardown is complete and whose Secrets are released.
pub const TEARDOWN_COMPLETE: &str = "TeardownComplete";

/// Whether the cluster's teardown completed (see [`TEARDOWN_COMPLETE`]).
pub(super) fn torn_down(obj: &AWSCluster) -> bool {
    obj.metadata.deletion_timestamp.is_some()
        && obj.status.as_ref().is_some_and(|s| {
            s.conditions.iter().any(|c| c.type_ == controllers::status::READY && c.reason == TEARDOWN_COMPLETE)
        })
}

/// Delete the cluster's control planes and node pools that are not being deleted yet.
async fn delete_children(
    shared: &Shared,
    obj: &AWSCluster,
    mds: &[AWSMachineDeployment],
    cps: &[AWSControlPlane],
) -> Result<(), ResourceError> {
    let ns = obj.namespace().unwrap_or_default();
    let deleted = |r: Result<_, kube::Error>| match r {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e),
    };
    let mut names = Vec::new();
    let md_api: Api<AWSMachineDeployment> = Api::namespaced(shared.client.clone(), &ns);
    for md in mds.iter().filter(|m| m.metadata.deletion_timestamp.is_none()) {
        deleted(md_api.delete(&md.name_any(), &DeleteParams::default()).await.map(drop))?;
        names.push(format!("AWSMachineDeployment {}", md.name_any()));
    }
    let cp_api: Api<AWSControlPlane> = Api::namespaced(shared.client.clone(), &ns);
    for cp in cps.iter().filter(|c| c.metadata.deletion_timestamp.is_none()) {
        deleted(cp_api.delete(&cp.name_any(), &DeleteParams::default()).await.map(drop))?;
        names.push(format!("AWSControlPlane {}", cp.name_any()));
    }
    if !names.is_empty() {
        shared.event(obj, "DeletingChildren", format!("deleting {} with the cluster", names.join(", "))).await;
    }
    Ok(())
}

/// Release the credential Secret (unless another cluster uses it), the certificate Secrets, the
/// encryption-provider config Secret and the service-account issuer's key pair
/// (`<id>-service-account-v2`).
async fn release_secrets(shared: &Shared, obj: &AWSCluster) -> Result<(), ResourceError> {
    let cs = &obj.spec.provider.credential_secret;
    let clusters: Api<AWSCluster> = Api::all(shared.client.clone());
    let shared_with_others = clusters.list(&Default::default()).await?.items.iter().any(|c| {
        c.metadata.uid != obj.metadata.uid
            && c.spec.provider.credential_secret.name == cs.name
            && c.spec.provider.credential_secret.namespace == cs.namespace
    });
    if !shared_with_others {
        held_secrets::release(&shared.client, &cs.namespace, &cs.name, crate::context::SECRET_FINALIZER).await?;
    }
    release_cluster_secrets(shared, &obj.namespace().unwrap_or_default(), &obj.name_any()).await
}

/// Release the certificate Secrets of cluster `id` (of either kind, in `namespace`), its
/// encryption-provider config Secret and its service-account issuer's key pair.
pub(crate) async fn release_cluster_secrets(shared: &Shared, namespace: &str, id: &str) -> Result<(), ResourceError> {
    let certs_ns = crate::node_config::certificates_namespace(shared, namespace);
    for secret in crate::node_config::certificate_secrets(shared, certs_ns, id).await? {
        held_secrets::release(&shared.client, certs_ns, &secret.name_any(), crate::context::SECRET_FINALIZER).await?;
    }
    let encryption = crate::node_config::encryption_config_secret(id);
    held_secrets::release(&shared.client, certs_ns, &encryption, crate::context::SECRET_FINALIZER).await?;
    let issuer_keys = pki::service_account_v2::secret_name(id);
    held_secrets::release(&shared.client, certs_ns, &issuer_keys, crate::context::SECRET_FINALIZER).await?;
    Ok(())
}

/// The status of a cluster being deleted: lifecycle `Deleting`, `Ready=False` (reason
/// `Deleting`). Written with the first stack entry, or alone while the children go first.
fn deleting_status(obj: &AWSCluster) -> AWSClusterStatus {
    let mut status = obj.status.clone().unwrap_or_default();
    let now = jiff::Timestamp::now();
    operatorkit::conditions::mark_cluster_deleting(&mut status.cluster, now);
    controllers::status::set_condition(
        &mut status.conditions,
        READY,
        false,
        "Deleting",
        "the cluster is being deleted",
        obj.metadata.generation,
    );
    status
}

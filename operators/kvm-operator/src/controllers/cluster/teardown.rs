//! Deletion, `teardown` (reference §10, with the leak fixed): `Deleting` in the status; the node
//! Deployments (foreground); once no pod is left in the namespace, the PVCs, Services and
//! Ingresses and the two ClusterRoleBindings, which are cluster-scoped and which the original
//! left behind; last the namespace, waited for until it is gone. The finalizer is held until all
//! of it is gone. Nothing here needs the Release or the Secrets, so a cluster whose inputs are
//! gone can still be deleted.
//!
//! Only what the KVMConfig owns is deleted ([`apis::cluster_id`]): nothing when another object
//! holds its id (or its id is not one), the namespace only while it carries the KVMConfig's UID,
//! the bindings only when they carry it (or are an earlier version's while the claim is held).

use apis::cluster_status::ClusterCondition;
use apis::kvm::KVMConfig;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, PersistentVolumeClaim, Pod, Service};
use k8s_openapi::api::networking::v1::Ingress;
use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleBinding};
use kube::api::{DeleteParams, ListParams, Preconditions};
use kube::{Api, Resource as _, ResourceExt};
use node_lifecycle::claims::Claim;
use operatorkit::status::write_status;
use operatorkit::{Outcome, Resource, resource};
use serde::de::DeserializeOwned;

use super::{ClusterState, managed_selector};

/// Delete `name` through `api`; a missing object is deleted already.
async fn delete<K>(api: &Api<K>, name: &str, params: &DeleteParams) -> Result<(), kube::Error>
where
    K: kube::Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    match api.delete(name, params).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

/// Delete the ClusterRoleBindings `<id>` and `<id>-psp` that are `owner`'s: carrying its UID, or
/// an earlier version's for this id while `owner` holds the claim (`claim_held`).
async fn delete_bindings(
    client: &kube::Client,
    owner: &apis::cluster_id::Owner,
    claim_held: bool,
) -> Result<(), kube::Error> {
    let bindings = Api::<ClusterRoleBinding>::all(client.clone());
    for name in kvm_objects::names::cluster_role_bindings(&owner.id) {
        let Some(binding) = bindings.get_opt(&name).await? else { continue };
        let meta = &binding.metadata;
        if !apis::cluster_id::may_delete(meta.labels.as_ref(), meta.annotations.as_ref(), owner, claim_held) {
            tracing::warn!(cluster = %owner.id, binding = %name, "ClusterRoleBinding is not this cluster's: left alone");
            continue;
        }
        let params = DeleteParams {
            preconditions: Some(Preconditions { uid: meta.uid.clone(), resource_version: None }),
            ..DeleteParams::default()
        };
        match bindings.delete(&name, &params).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The cluster id of a KVMConfig being deleted: `spec.cluster.id`.
fn cluster_id(obj: &KVMConfig) -> String {
    obj.spec.cluster.id.clone()
}

/// Ordered deletion.
#[derive(Debug)]
pub struct Teardown;

impl Resource<KVMConfig, ClusterState> for Teardown {
    fn name(&self) -> &str {
        "teardown"
    }

    async fn ensure_created(&self, _: &mut ClusterState, _: &KVMConfig) -> resource::Result<Outcome> {
        Ok(Outcome::proceed())
    }

    async fn ensure_deleted(&self, state: &mut ClusterState, obj: &KVMConfig) -> resource::Result<Outcome> {
        let shared = state.shared.clone();
        let client = &shared.client;
        let id = cluster_id(obj);
        let ns = kvm_objects::names::namespace(&id);
        let keep = || Outcome::cancel_reconciliation().keep_finalizer().requeue_after(shared.poll);

        shared.deployment_versions.forget(&id);
        let mut status = state.status.clone();
        let deleting = apis::cluster_status::mark_cluster_deleting(&mut status.cluster, jiff::Timestamp::now());
        write_status(client, obj, obj.status.as_ref(), &status).await?;
        state.status = status;
        if deleting {
            let condition = ClusterCondition::Deleting;
            shared
                .events
                .normal(&obj.object_ref(&()), "Delete", &condition.event_reason(), condition.event_note(&id))
                .await;
        }

        // A cluster that goes away gives its rollout slot back (if it held one).
        super::maintenance::done(&shared, obj).await?;
        // Only what this KVMConfig owns is deleted.
        let owner = super::owner(obj);
        let claim = match apis::cluster_id::check("spec.cluster.id", &id) {
            Ok(()) => node_lifecycle::claims::claim(client, &owner, &Default::default(), false).await?,
            Err(e) => Claim::InUse { holder: e.to_string() },
        };
        match &claim {
            Claim::Held => {}
            Claim::Free if owner.reconciled_before => {
                // The namespace, deleted last, is gone: only the bindings may be left (a
                // teardown interrupted), and only those carrying this KVMConfig's UID go.
                delete_bindings(client, &owner, false).await?;
                shared.events.normal(&obj.object_ref(&()), "Delete", "ClusterDeleted", deleted_note(&id)).await;
                return Ok(Outcome::proceed());
            }
            Claim::Free | Claim::InUse { .. } => {
                let why = match claim {
                    Claim::InUse { holder } => format!("cluster id {id} is held by {holder}"),
                    _ => "it holds no claim of its id and its status shows nothing was built".to_string(),
                };
                let note = format!("nothing of cluster {id} is deleted: {why}");
                shared.events.normal(&obj.object_ref(&()), "Delete", "NothingDeleted", note).await;
                return Ok(Outcome::proceed());
            }
        }
        // The claim is held, so the namespace is this cluster's. Inside it the operator's rights
        // come from its RoleBinding there, which goes with the namespace: once the namespace is
        // terminating, nothing inside it is touched any more (a request would be refused, not
        // answered 404).
        let namespaces = Api::<Namespace>::all(client.clone());
        if let Some(namespace) = namespaces.get_opt(&ns).await?
            && namespace.metadata.deletion_timestamp.is_none()
        {
            // The operator's RoleBinding is the first thing built in the namespace: without it
            // (the cluster claimed its id and stopped at a later check) nothing is inside.
            let built = match &shared.config.access {
                Some(access) => {
                    let name = &access.cluster_role;
                    Api::<RoleBinding>::namespaced(client.clone(), &ns).get_opt(name).await?.is_some()
                }
                None => true,
            };
            if built && !delete_contents(client, &ns, &id).await? {
                return Ok(keep());
            }
            // The node pods that used the bindings are gone; the bindings go while the claim is
            // held, so that an earlier version's (without the UID) go too.
            delete_bindings(client, &owner, true).await?;
            // Last, the namespace: the claim of the id.
            node_lifecycle::claims::release(client, &owner).await?;
        }
        // Waited for until it is gone; the bindings left (if any) then go in the branch above
        // that finds the claim free.
        Ok(keep())
    }
}

/// Delete the cluster's objects in its namespace: the node Deployments (foreground), and once
/// their pods are gone the PVCs, Services and Ingresses. `false` while node pods are left.
async fn delete_contents(client: &kube::Client, ns: &str, id: &str) -> Result<bool, kube::Error> {
    let managed = ListParams::default().labels(&managed_selector(id));
    let deployments = Api::<Deployment>::namespaced(client.clone(), ns);
    let current = deployments.list(&managed).await?.items;
    for deployment in &current {
        delete(&deployments, &deployment.name_any(), &DeleteParams::foreground()).await?;
    }
    let pods = Api::<Pod>::namespaced(client.clone(), ns).list(&ListParams::default()).await?.items;
    if !current.is_empty() || !pods.is_empty() {
        tracing::info!(cluster = %id, deployments = current.len(), pods = pods.len(), "waiting for the node pods to go");
        return Ok(false);
    }
    let pvcs = Api::<PersistentVolumeClaim>::namespaced(client.clone(), ns);
    for pvc in pvcs.list(&managed).await?.items {
        delete(&pvcs, &pvc.name_any(), &DeleteParams::default()).await?;
    }
    for name in [kvm_objects::names::MASTER_SERVICE, kvm_objects::names::WORKER_SERVICE] {
        delete(&Api::<Service>::namespaced(client.clone(), ns), name, &DeleteParams::default()).await?;
    }
    for name in [kvm_objects::names::API_INGRESS, kvm_objects::names::ETCD_INGRESS] {
        delete(&Api::<Ingress>::namespaced(client.clone(), ns), name, &DeleteParams::default()).await?;
    }
    Ok(true)
}

/// The note of the `ClusterDeleted` event.
fn deleted_note(id: &str) -> String {
    format!("cluster {id}: node Deployments, namespace, Services, Ingresses, PVCs and bindings are gone")
}

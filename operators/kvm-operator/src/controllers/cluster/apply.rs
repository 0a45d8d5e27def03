//! Step 4, `objects`: every object of the cluster in the management cluster, by server-side
//! apply with the field manager [`FIELD_MANAGER`].
//!
//! An object is written only when its desired state changed: each carries the digest of the
//! desired state it was last applied from ([`APPLIED_DIGEST`]), and an object whose digest
//! matches is left alone, so a steady cluster costs reads and no writes. The digest covers the
//! whole desired object; for node Secrets it is a SHA-256 of content that includes key
//! material, which reveals nothing of it. The objects other than Deployments are not even read
//! back while the digest of all of them is the one applied less than a resync ago
//! ([`crate::context::AppliedCache`]): a cluster that waits for its nodes costs one LIST of its
//! Deployments per poll.
//!
//! Deployments, by the decisions of [`kvm_objects::rolling`]:
//! - missing ones are created at once (scale-up);
//! - those of nodes removed from the spec are deleted, one at a time, with foreground
//!   propagation (the node pod's finalizer drains its workload-cluster node first); the PVCs of
//!   a removed node are deleted once its Deployment is gone
//!   ([`kvm_objects::deployment::removable_pvcs`]);
//! - changed ones are replaced one at a time, masters first, only while every node is back, and
//!   workers only while every workload-cluster master is schedulable
//!   ([`kvm_objects::rolling::next_update`], fed the masters of step 3).

use std::fmt::Debug;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, PersistentVolumeClaim, Pod, Secret, Service, ServiceAccount};
use k8s_openapi::api::networking::v1::Ingress;
use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleBinding};
use kube::Resource as _;
use kube::api::DeleteParams;
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use kvm_objects::deployment::removable_pvcs;
use kvm_objects::rolling::{RollingDecision, ScaleDown, WaitReason, master_nodes, next_removal, next_update};
use node_lifecycle::maintenance::{MaxAgeStep, format_duration};
use serde::Serialize;
use serde::de::DeserializeOwned;
use sha2::{Digest, Sha256};

use super::maintenance::{self, MAX_AGE_FIELD};
use super::{ClusterState, cache_key, managed_selector};
use crate::plan::build;
use apis::kvm::KVMConfig;
use operatorkit::{Outcome, Resource, resource};

/// The field manager of every object this operator applies.
pub const FIELD_MANAGER: &str = "kvm-operator";
/// The annotation holding the digest of the desired state an object was last applied from.
pub const APPLIED_DIGEST: &str = "kvm-operator.giantswarm.io/applied-digest";

/// The refusal of a cluster whose ClusterRoleBinding name is taken by one that is not its own:
/// one that carries another UID, or none and no cluster label of this id.
async fn foreign_binding(
    client: &kube::Client,
    obj: &KVMConfig,
    bindings: &[ClusterRoleBinding],
) -> Result<Option<operatorkit::error::InvalidInput>, kube::Error> {
    let owner = super::owner(obj);
    let api = Api::<ClusterRoleBinding>::all(client.clone());
    for binding in bindings {
        let name = binding.name_any();
        let Some(current) = api.get_opt(&name).await? else { continue };
        let meta = &current.metadata;
        if !apis::cluster_id::may_delete(meta.labels.as_ref(), meta.annotations.as_ref(), &owner, true) {
            return Ok(Some(operatorkit::error::InvalidInput {
                object: operatorkit::status::describe(obj),
                reason: node_lifecycle::claims::CLUSTER_ID_IN_USE,
                message: format!(
                    "ClusterRoleBinding {name} exists and is not this cluster's (it carries neither this KVMConfig's UID \
                     in label {} nor, from an earlier version, label {}={}): cluster id {} (spec.cluster.id) is in use; \
                     nothing is created for it: delete this KVMConfig and create it with another id",
                    apis::labels::CLUSTER_UID,
                    apis::labels::CLUSTER,
                    owner.id,
                    owner.id
                ),
            }));
        }
    }
    Ok(None)
}

/// The digest of a desired object.
pub fn digest(object: &impl Serialize) -> String {
    let json = serde_json::to_vec(object).unwrap_or_default();
    Sha256::digest(&json).iter().map(|b| format!("{b:02x}")).collect()
}

/// Apply `desired` through `api` unless the stored object was applied from the same desired
/// state; `true` when it was written.
pub async fn apply<K>(api: &Api<K>, desired: &K) -> Result<bool, kube::Error>
where
    K: kube::Resource<DynamicType = ()> + Serialize + DeserializeOwned + Clone + Debug,
{
    let digest = digest(desired);
    let name = desired.meta().name.clone().unwrap_or_default();
    if let Some(current) = api.get_opt(&name).await?
        && current.annotations().get(APPLIED_DIGEST) == Some(&digest)
    {
        return Ok(false);
    }
    let mut object = desired.clone();
    object.meta_mut().annotations.get_or_insert_with(Default::default).insert(APPLIED_DIGEST.into(), digest);
    // The apply body needs apiVersion and kind, which typed objects built from JSON carry.
    let mut body = serde_json::to_value(&object).map_err(kube::Error::SerdeError)?;
    body["apiVersion"] = K::api_version(&()).into();
    body["kind"] = K::kind(&()).into();
    api.patch(&name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&body)).await?;
    Ok(true)
}

/// Step 4.
#[derive(Debug)]
pub struct Objects;

/// Why the cluster is not converged, for `Ready`'s message.
fn describe_wait(reason: &WaitReason, wc_problem: Option<&str>) -> String {
    match reason {
        WaitReason::WorkloadClusterUnreachable => format!(
            "node Deployments to update wait for the workload cluster: {}",
            wc_problem.unwrap_or("its nodes could not be read")
        ),
        WaitReason::NotAllAvailable(names) => {
            format!("an update waits until every node Deployment is available: {}", names.join(", "))
        }
        WaitReason::MastersUnschedulable(names) => {
            format!("worker updates wait until these workload-cluster masters are schedulable: {}", names.join(", "))
        }
    }
}

impl Resource<KVMConfig, ClusterState> for Objects {
    fn name(&self) -> &str {
        "objects"
    }

    async fn ensure_created(&self, state: &mut ClusterState, obj: &KVMConfig) -> resource::Result<Outcome> {
        let shared = state.shared.clone();
        let cluster = state.cluster()?;
        // The inputs were checked (certificates, key) and every node has its index, so what is
        // left is a config the inputs cannot make valid (a path from a mount tag, say) or one
        // that fails the checks every node config passes: nothing is applied, and the nodes
        // already running keep their configs.
        let mut objects = match build(cluster, &state.status.kvm.node_indexes, &state.secrets, &shared.config) {
            Ok(objects) => objects,
            Err(e) => {
                let invalid = crate::plan::refusal(operatorkit::status::describe(obj), &e);
                let (status, e) =
                    operatorkit::status::reject(&shared.client, obj, obj.status.as_ref(), invalid.into()).await;
                state.status = status;
                return Err(e);
            }
        };
        objects.pvcs.extend(state.host_volume_pvcs.iter().cloned());
        let client = &shared.client;
        let ns = kvm_objects::names::namespace(&cluster.id);
        let key = cache_key(obj);
        let around = digest(&(
            &objects.namespace,
            &objects.service_account,
            &objects.bindings,
            &objects.node_secrets,
            &objects.pvcs,
            &objects.services,
            &objects.ingresses,
        ));
        let trusted = shared.applied.fresh(&key, &around);
        let pvcs = Api::<PersistentVolumeClaim>::namespaced(client.clone(), &ns);
        let deployments = Api::<Deployment>::namespaced(client.clone(), &ns);
        let managed = ListParams::default().labels(&managed_selector(&cluster.id));
        // Checked before anything is written: a node config that moved etcd would be
        // written too.
        let current = deployments.list(&managed).await?.items;
        shared.deployment_versions.record(&cluster.id, &current);
        if let Some(holder) = kvm_objects::deployment::etcd_member_moved(cluster, &current) {
            let first = cluster.etcd_master().map(|n| n.id.clone()).unwrap_or_default();
            return Err(operatorkit::error::InvalidInput {
                object: operatorkit::status::describe(obj),
                reason: "EtcdMasterMoved",
                message: format!(
                    "spec.cluster.masters[0] is {first}, but master {holder} holds the cluster's etcd data; put {holder} first in spec.cluster.masters again (the first master runs etcd)"
                ),
            }
            .into());
        }
        if !trusted {
            // A ClusterRoleBinding named like this cluster's that is not this cluster's (the
            // management cluster's own, say) is neither changed nor, later, deleted.
            if let Some(foreign) = foreign_binding(client, obj, &objects.bindings).await? {
                let (status, e) = operatorkit::status::reject(client, obj, obj.status.as_ref(), foreign.into()).await;
                state.status = status;
                return Err(e);
            }
            apply(&Api::<Namespace>::all(client.clone()), &objects.namespace).await?;
            // The operator's own rights in the namespace come first: everything after needs them.
            if let Some(binding) = &objects.operator_binding {
                apply(&Api::<RoleBinding>::namespaced(client.clone(), &ns), binding).await?;
            }
            apply(&Api::<ServiceAccount>::namespaced(client.clone(), &ns), &objects.service_account).await?;
            for binding in &objects.bindings {
                apply(&Api::<ClusterRoleBinding>::all(client.clone()), binding).await?;
            }
            let secrets = Api::<Secret>::namespaced(client.clone(), &ns);
            for secret in &objects.node_secrets {
                apply(&secrets, secret).await?;
            }
            let current = pvcs.list(&managed).await?.items;
            for pvc in &objects.pvcs {
                // A PVC's spec is immutable once bound: created, never changed.
                if !current.iter().any(|c| c.name_any() == pvc.name_any()) {
                    apply(&pvcs, pvc).await?;
                }
            }
        }

        let mut created = Vec::new();
        for desired in &objects.deployments {
            if !current.iter().any(|c| c.name_any() == desired.name_any()) {
                apply(&deployments, desired).await?;
                created.push(desired.name_any());
            }
        }
        let removal = match next_removal(&current, &objects.deployments) {
            ScaleDown::Nothing => None,
            ScaleDown::Delete(name) => {
                tracing::info!(cluster = %cluster.id, deployment = %name, "deleting the Deployment of a removed node");
                match deployments.delete(&name, &DeleteParams::foreground()).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(s)) if s.code == 404 => {}
                    Err(e) => return Err(e.into()),
                }
                Some(name)
            }
            ScaleDown::Wait(name) => Some(name),
        };
        if !trusted {
            let current_pvcs = pvcs.list(&managed).await?.items;
            for name in removable_pvcs(cluster, &current_pvcs, &current) {
                tracing::info!(cluster = %cluster.id, pvc = %name, "deleting the PVC of a removed node");
                match pvcs.delete(&name, &DeleteParams::default()).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(s)) if s.code == 404 => {}
                    Err(e) => return Err(e.into()),
                }
            }
        }
        let masters = state.wc_nodes.as_deref().map(master_nodes);
        let waiting = if let Some(name) = &removal {
            Some(format!("removing the Deployment of a node no longer in the spec: {name}"))
        } else if !created.is_empty() {
            // New nodes are not back yet, which the rolling gate would not see in this list.
            Some(format!("creating node Deployments: {}", created.join(", ")))
        } else {
            match next_update(&current, &objects.deployments, masters.as_deref()) {
                RollingDecision::UpToDate => None,
                RollingDecision::Update(name) => {
                    let what = format!("the replacement of node Deployment {name}");
                    match maintenance::may_disrupt(&shared, obj, state.maintenance()?, &what).await? {
                        Some(hold) => {
                            let message = hold.message.clone();
                            state.hold = Some(hold);
                            Some(message)
                        }
                        None => {
                            if let Some(desired) = objects.deployments.iter().find(|d| d.name_any() == name) {
                                tracing::info!(cluster = %cluster.id, deployment = %name, "replacing a node Deployment");
                                apply(&deployments, desired).await?;
                            }
                            Some(format!("updating node Deployment {name}"))
                        }
                    }
                }
                RollingDecision::Wait(reason) => Some(describe_wait(&reason, state.wc_problem.as_deref())),
            }
        };
        let unavailable: Vec<String> = objects
            .deployments
            .iter()
            .filter(|d| {
                current
                    .iter()
                    .find(|c| c.name_any() == d.name_any())
                    .is_none_or(|c| !kvm_objects::rolling::is_available(c))
            })
            .map(ResourceExt::name_any)
            .collect();

        if !trusted {
            let services = Api::<Service>::namespaced(client.clone(), &ns);
            for service in &objects.services {
                apply(&services, service).await?;
            }
            let ingresses = Api::<Ingress>::namespaced(client.clone(), &ns);
            for ingress in &objects.ingresses {
                apply(&ingresses, ingress).await?;
            }
        }
        if removal.is_some() {
            // The PVCs of the node on its way out are deleted once its Deployment is gone: read
            // everything again until then.
            shared.applied.forget(&key);
        } else if !trusted {
            shared.applied.record(&key, around);
        }
        // Last, an unreadable workload cluster: the status cannot know its nodes.
        state.waiting = waiting
            .or_else(|| {
                (!unavailable.is_empty())
                    .then(|| format!("waiting for node Deployments to be available: {}", unavailable.join(", ")))
            })
            .or_else(|| state.wc_problem.as_ref().map(|p| format!("waiting for the workload cluster: {p}")));
        // Every node is current and back: replace a node past its age, or give the rollout
        // slot back.
        if state.waiting.is_none() {
            state.waiting = replace_aged_node(state, obj, &ns).await?;
        }
        Ok(Outcome::proceed())
    }

    async fn ensure_deleted(&self, _: &mut ClusterState, _: &KVMConfig) -> resource::Result<Outcome> {
        Ok(Outcome::proceed())
    }
}

/// With every node current and back: the next node past `spec.cluster.maxNodeAge`, oldest
/// first, one at a time, inside the maintenance windows and the rollout limit, replaced by
/// deleting its node pod (the drainer's finalizer drains the workload-cluster node first, and
/// its Deployment starts a new VM). `Some` says what the cluster waits for; `None` when nothing
/// is due, and then the cluster's rollout slot is given back.
async fn replace_aged_node(
    state: &mut ClusterState,
    obj: &KVMConfig,
    ns: &str,
) -> Result<Option<String>, operatorkit::ResourceError> {
    let shared = state.shared.clone();
    let Ok(Some(max_age)) = state.maintenance()?.max_age else {
        maintenance::done(&shared, obj).await?;
        return Ok(None);
    };
    let pods_api = Api::<Pod>::namespaced(shared.client.clone(), ns);
    let pods = pods_api.list(&ListParams::default().labels(&crate::controllers::pod_selector())).await?.items;
    let now = shared.clock.now();
    match maintenance::next_replacement(&pods, max_age, now) {
        MaxAgeStep::Idle { due } => {
            maintenance::done(&shared, obj).await?;
            state.look_again = due.map(|due| node_lifecycle::maintenance::wait_until(now, due));
            Ok(None)
        }
        MaxAgeStep::Busy(pod) => Ok(Some(format!("replacing node pod {pod}, older than {MAX_AGE_FIELD}"))),
        MaxAgeStep::Replace { id, age } => {
            let what =
                format!("the replacement of node pod {id}, {} old (older than {MAX_AGE_FIELD})", format_duration(age));
            if let Some(hold) = maintenance::may_disrupt(&shared, obj, state.maintenance()?, &what).await? {
                let message = hold.message.clone();
                state.hold = Some(hold);
                return Ok(Some(message));
            }
            match pods_api.delete(&id, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(e.into()),
            }
            tracing::info!(pod = %id, age = %format_duration(age), "replacing a node past its max age");
            let note = format!(
                "deleted node pod {ns}/{id}, {} old, older than {MAX_AGE_FIELD} ({}): its node is drained first and its Deployment starts a new one",
                format_duration(age),
                format_duration(max_age)
            );
            shared.max_age_replacements.inc();
            shared.events.normal(&obj.object_ref(&()), "DeletePod", "MaxAgeReplacement", note).await;
            Ok(Some(format!("replacing node pod {id}, older than {MAX_AGE_FIELD}")))
        }
    }
}

//! Step 3, `objects`: every object of the cluster in the management cluster, by server-side
//! apply with the field manager [`FIELD_MANAGER`].
//!
//! An object is written only when its desired state changed: each carries the digest of the
//! desired state it was last applied from ([`APPLIED_DIGEST`]), and an object whose digest
//! matches is left alone, so a steady cluster costs reads and no writes. The digest covers the
//! whole desired object; for node Secrets it is a SHA-256 of content that includes key
//! material, which reveals nothing of it.
//!
//! Deployments: missing ones are created at once; existing ones that differ are replaced one at a
//! time, masters first, as [`kvm_objects::rolling::next_update`] decides.

use std::fmt::Debug;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, PersistentVolumeClaim, Secret, Service, ServiceAccount};
use k8s_openapi::api::networking::v1::Ingress;
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use kvm_objects::rolling::{RollingDecision, next_update};
use serde::Serialize;
use serde::de::DeserializeOwned;
use sha2::{Digest, Sha256};

use super::{ClusterState, managed_selector};
use crate::plan::build;
use apis::kvm::KVMConfig;
use operatorkit::{Outcome, Resource, resource};

/// The field manager of every object this operator applies.
pub const FIELD_MANAGER: &str = "kvm-operator";
/// The annotation holding the digest of the desired state an object was last applied from.
pub const APPLIED_DIGEST: &str = "kvm-operator.giantswarm.io/applied-digest";

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

/// Step 3.
#[derive(Debug)]
pub struct Objects;

impl Resource<KVMConfig, ClusterState> for Objects {
    fn name(&self) -> &str {
        "objects"
    }

    async fn ensure_created(&self, state: &mut ClusterState, obj: &KVMConfig) -> resource::Result<Outcome> {
        let shared = state.shared.clone();
        let cluster = state.cluster()?;
        // The inputs were checked (certificates, key) and every node has its index, so what is
        // left is a config the inputs cannot make valid (a path from a mount tag, say).
        let objects = build(cluster, &state.status.kvm.node_indexes, &state.secrets, &shared.config).map_err(|e| {
            operatorkit::error::InvalidInput {
                object: operatorkit::status::describe(obj),
                reason: "InvalidNodeConfig",
                message: e.to_string(),
            }
        })?;
        let client = &shared.client;
        let ns = kvm_objects::names::namespace(&cluster.id);
        apply(&Api::<Namespace>::all(client.clone()), &objects.namespace).await?;
        apply(&Api::<ServiceAccount>::namespaced(client.clone(), &ns), &objects.service_account).await?;
        for binding in &objects.bindings {
            apply(&Api::<ClusterRoleBinding>::all(client.clone()), binding).await?;
        }
        let secrets = Api::<Secret>::namespaced(client.clone(), &ns);
        for secret in &objects.node_secrets {
            apply(&secrets, secret).await?;
        }
        let pvcs = Api::<PersistentVolumeClaim>::namespaced(client.clone(), &ns);
        for pvc in &objects.pvcs {
            // A PVC's spec is immutable once bound: created, never changed.
            if pvcs.get_opt(&pvc.name_any()).await?.is_none() {
                apply(&pvcs, pvc).await?;
            }
        }

        let deployments = Api::<Deployment>::namespaced(client.clone(), &ns);
        let current = deployments.list(&ListParams::default().labels(&managed_selector(&cluster.id))).await?.items;
        for desired in &objects.deployments {
            if !current.iter().any(|c| c.name_any() == desired.name_any()) {
                apply(&deployments, desired).await?;
            }
        }
        // The workload cluster's masters are not read yet: `None` holds workers that need an
        // update until it is, while masters roll.
        let waiting = match next_update(&current, &objects.deployments, None) {
            RollingDecision::UpToDate => None,
            RollingDecision::Update(name) => {
                if let Some(desired) = objects.deployments.iter().find(|d| d.name_any() == name) {
                    apply(&deployments, desired).await?;
                }
                Some(format!("updating node Deployment {name}"))
            }
            RollingDecision::Wait(why) => Some(format!("node Deployments wait: {why:?}")),
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

        let services = Api::<Service>::namespaced(client.clone(), &ns);
        for service in &objects.services {
            apply(&services, service).await?;
        }
        let ingresses = Api::<Ingress>::namespaced(client.clone(), &ns);
        for ingress in &objects.ingresses {
            apply(&ingresses, ingress).await?;
        }
        state.waiting = waiting.or_else(|| {
            (!unavailable.is_empty())
                .then(|| format!("waiting for node Deployments to be available: {}", unavailable.join(", ")))
        });
        Ok(Outcome::proceed())
    }

    async fn ensure_deleted(&self, _: &mut ClusterState, _: &KVMConfig) -> resource::Result<Outcome> {
        Ok(Outcome::proceed())
    }
}

//! The claim of a cluster id: the namespace `<id>`, created by the operator for exactly one
//! cluster object of the installation (AWSCluster or KVMConfig, in any namespace), labelled with
//! its UID (rules: [`apis::cluster_id`]).
//!
//! A namespace name is unique in a cluster, so of two objects claiming one id the API server
//! lets exactly one create it; the other reads whose it is and is refused with
//! [`CLUSTER_ID_IN_USE`]. An earlier version's namespace is adopted by labelling it, with a
//! patch that carries its `resourceVersion`, so that of two adopters one wins. The claim goes
//! with the namespace, which only its holder deletes ([`release`]).

use apis::cluster_id::{ClaimState, Owner, claim_state};
use apis::labels;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::{Api, ResourceExt};
use operatorkit::error::InvalidInput;

/// The `Ready` reason of a cluster whose id another cluster object holds.
pub const CLUSTER_ID_IN_USE: &str = "ClusterIDInUse";
/// The `Ready` reason of a cluster whose id has not the format of one.
pub const INVALID_CLUSTER_ID: &str = "InvalidClusterID";

/// What [`claim`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Claim {
    /// `owner` holds the id (it created, already held or adopted the namespace).
    Held,
    /// No namespace `<id>`, and `create` was false.
    Free,
    /// Another object holds it, or it cannot be proven `owner`'s.
    InUse {
        /// Who holds it.
        holder: String,
    },
}

/// Claim `owner`'s id: create the namespace `<id>` with `owner`'s labels and `extra_labels` when
/// there is none and `create` is set, adopt an earlier version's when `owner` may.
pub async fn claim(
    client: &kube::Client,
    owner: &Owner,
    extra_labels: &std::collections::BTreeMap<String, String>,
    create: bool,
) -> Result<Claim, kube::Error> {
    let api: Api<Namespace> = Api::all(client.clone());
    // Two rounds: a lost race (409) is decided by reading the winner.
    for _ in 0..2 {
        let current = api.get_opt(&owner.id).await?;
        match claim_state(current.as_ref().map(|n| &n.metadata), owner) {
            ClaimState::Held => return Ok(Claim::Held),
            ClaimState::InUse { holder } => return Ok(Claim::InUse { holder }),
            ClaimState::Free if !create => return Ok(Claim::Free),
            ClaimState::Free => {
                let mut ns = Namespace::default();
                ns.metadata.name = Some(owner.id.clone());
                ns.metadata.labels = Some(extra_labels.clone().into_iter().chain(owner.labels()).collect());
                ns.metadata.annotations =
                    Some([(labels::CLUSTER_OWNER.to_string(), owner.describe())].into_iter().collect());
                match api.create(&PostParams::default(), &ns).await {
                    Ok(_) => return Ok(Claim::Held),
                    Err(kube::Error::Api(s)) if s.code == 409 => continue,
                    Err(e) => return Err(e),
                }
            }
            ClaimState::Adoptable => {
                let Some(ns) = current else { continue };
                // The patch carries the resourceVersion read above: a concurrent adopter makes
                // it fail, and the next round reads who won.
                let patch = serde_json::json!({"metadata": {
                    "resourceVersion": ns.resource_version(),
                    "labels": owner.labels(),
                    "annotations": {labels::CLUSTER_OWNER: owner.describe()},
                }});
                match api.patch(&owner.id, &PatchParams::default(), &Patch::Merge(&patch)).await {
                    Ok(_) => {
                        tracing::info!(cluster = %owner.id, owner = %owner.describe(), "adopted the namespace of an earlier version");
                        return Ok(Claim::Held);
                    }
                    Err(kube::Error::Api(s)) if s.code == 409 => continue,
                    Err(e) => return Err(e),
                }
            }
        }
    }
    let holder = "another object, concurrently".to_string();
    Ok(Claim::InUse { holder })
}

/// Delete the namespace `<id>` if, and only if, it is `owner`'s claim: `true` once it is gone
/// or is not `owner`'s (nothing of `owner`'s is left to delete there).
pub async fn release(client: &kube::Client, owner: &Owner) -> Result<bool, kube::Error> {
    let api: Api<Namespace> = Api::all(client.clone());
    let Some(ns) = api.get_opt(&owner.id).await? else { return Ok(true) };
    if claim_state(Some(&ns.metadata), owner) != ClaimState::Held {
        tracing::warn!(cluster = %owner.id, owner = %owner.describe(), "namespace {} is not this cluster's: left alone", owner.id);
        return Ok(true);
    }
    if ns.metadata.deletion_timestamp.is_some() {
        return Ok(false);
    }
    // The UID precondition: a namespace re-created under the same name in between is not
    // deleted.
    let params = DeleteParams {
        preconditions: Some(Preconditions { uid: ns.metadata.uid.clone(), resource_version: None }),
        ..DeleteParams::default()
    };
    match api.delete(&owner.id, &params).await {
        Ok(_) => Ok(false),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
        Err(e) => Err(e),
    }
}

/// The refusal of a cluster whose id `holder` holds: `Ready=False` [`CLUSTER_ID_IN_USE`].
pub fn in_use(object: String, owner: &Owner, field: &str, holder: &str) -> InvalidInput {
    InvalidInput {
        object,
        reason: CLUSTER_ID_IN_USE,
        message: format!(
            "cluster id {} ({field}) is in use by {holder}: nothing is created for this object; a cluster id names the \
             namespace {} and the cluster's cloud resources, so it is unique in the installation: delete this object \
             and create it with another id",
            owner.id, owner.id
        ),
    }
}

/// The refusal of a cluster whose id has not the format of one: `Ready=False`
/// [`INVALID_CLUSTER_ID`].
pub fn invalid(object: String, error: &apis::validation::FieldError) -> InvalidInput {
    InvalidInput { object, reason: INVALID_CLUSTER_ID, message: error.to_string() }
}

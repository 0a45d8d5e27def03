//! Secrets held by a finalizer while a cluster uses them.
//!
//! A cluster's credential Secret and its certificate Secrets are needed until the cluster is
//! gone: without the credentials nothing the cluster owns can be deleted.
//! `kubectl delete -f cluster.yaml` deletes the objects of a file in order, often the Secret
//! first, which would stall the teardown for good. So an operator puts its finalizer (for
//! example `aws-operator.giantswarm.io/secret-in-use`) on every Secret a cluster uses while it
//! creates the cluster, and takes it off when the cluster's teardown is complete. A Secret deleted meanwhile stays readable (it only has a
//! `deletionTimestamp`) and goes when released.
//!
//! One finalizer for every user, not one per cluster: several clusters may share a credential
//! Secret, so a Secret is released only when no other user is left ([`release`] takes the
//! answer). Kubernetes refuses new finalizers on an object being deleted, so [`hold`] leaves a
//! deleting Secret as it is.
//!
//! Nothing here is specific to a provider: the functions take a client, the Secret's name and
//! the finalizer, which each operator names.

use crate::finalizer::{add_patch, is_stale, json_patch, remove_patch};
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use kube::{Client, ResourceExt};

/// How often a guarded patch is retried after losing against a concurrent change.
const ATTEMPTS: usize = 3;

/// Put `finalizer` on the Secret `namespace/name` unless it is there, or the Secret is absent
/// or being deleted. Returns whether the Secret is held now.
pub async fn hold(client: &Client, namespace: &str, name: &str, finalizer: &str) -> Result<bool, kube::Error> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    for _ in 0..ATTEMPTS {
        let Some(secret) = api.get_metadata_opt(name).await? else { return Ok(false) };
        if secret.metadata.deletion_timestamp.is_some() {
            return Ok(secret.finalizers().iter().any(|f| f == finalizer));
        }
        let Some(patch) = add_patch(&secret.metadata, finalizer) else { return Ok(true) };
        match json_patch::<Secret>(client, &secret.metadata, &patch).await {
            Ok(_) => {
                tracing::debug!(secret = %format!("{namespace}/{name}"), "holding the Secret");
                return Ok(true);
            }
            Err(e) if is_stale(&e) => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(false)
}

/// Hold every Secret of `secrets` (already read; no further read unless a patch races).
pub async fn hold_all(client: &Client, secrets: &[Secret], finalizer: &str) -> Result<(), kube::Error> {
    for secret in secrets {
        let held = secret.finalizers().iter().any(|f| f == finalizer);
        if !held && secret.metadata.deletion_timestamp.is_none() {
            hold(client, &secret.namespace().unwrap_or_default(), &secret.name_any(), finalizer).await?;
        }
    }
    Ok(())
}

/// Take `finalizer` off the Secret `namespace/name` (absent: nothing to do).
pub async fn release(client: &Client, namespace: &str, name: &str, finalizer: &str) -> Result<(), kube::Error> {
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    for _ in 0..ATTEMPTS {
        let Some(secret) = api.get_metadata_opt(name).await? else { return Ok(()) };
        let Some(patch) = remove_patch(&secret.metadata, finalizer) else { return Ok(()) };
        match json_patch::<Secret>(client, &secret.metadata, &patch).await {
            Ok(_) => {
                tracing::debug!(secret = %format!("{namespace}/{name}"), "released the Secret");
                return Ok(());
            }
            Err(kube::Error::Api(s)) if s.code == 404 => return Ok(()),
            Err(e) if is_stale(&e) => continue,
            Err(e) => return Err(e),
        }
    }
    Err(kube::Error::Service(format!("releasing Secret {namespace}/{name}: it kept changing").into()))
}

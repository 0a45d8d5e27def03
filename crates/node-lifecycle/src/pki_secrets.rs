//! A cluster's PKI and encryption key in the management cluster: the edge of
//! [`pki::ensure::plan`], shared by both operators.
//!
//! [`ensure`] reads the cluster's Secrets, plans, and writes: creates (never overwriting) what is
//! missing, CAs first, and replaces only certificates it issued itself, each by a merge patch
//! carrying the `resourceVersion` it read. A conflict (another replica, or a run this one interrupted, wrote
//! first) reads and plans again. A process stopped at any point therefore leaves at most one CA
//! of each kind and one encryption key, which the next call reads instead of generating again.

use std::time::SystemTime;

use k8s_openapi::api::core::v1::Secret;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use pki::ensure::{EncryptionFormat, EnsureRequest, ForeignProblem, plan};
use pki::secret::{CLUSTER_LABEL, encryption_provider_config_secret_name};

/// Why the Secrets could not be brought to a complete PKI. No variant carries key material.
#[derive(Debug, thiserror::Error)]
pub enum PkiSecretsError {
    /// Reading or writing a Secret failed.
    #[error("the certificate Secrets of cluster {cluster} in namespace {namespace}: {source}")]
    Kube {
        /// The cluster id.
        cluster: String,
        /// The namespace of its Secrets.
        namespace: String,
        /// The API error.
        source: kube::Error,
    },
    /// A CA Secret is unreadable, or the cluster's names cannot go into a certificate.
    #[error("cluster {cluster}: {source}")]
    Pki {
        /// The cluster id.
        cluster: String,
        /// What is wrong.
        source: pki::PkiError,
    },
    /// Other writers kept winning the race.
    #[error("cluster {cluster}: its certificate Secrets kept changing while they were written; trying again later")]
    Contended {
        /// The cluster id.
        cluster: String,
    },
}

/// What [`ensure`] did and found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ensured {
    /// The Secrets it created.
    pub created: Vec<String>,
    /// The Secrets it replaced (renewed certificates).
    pub replaced: Vec<String>,
    /// Certificates someone else wrote that fail their checks (left as they are).
    pub foreign_problems: Vec<ForeignProblem>,
    /// Certificates missing from a cluster that brings its own.
    pub missing: Vec<String>,
    /// The earliest renewal of a certificate issued here.
    pub next_renewal: Option<SystemTime>,
}

const ATTEMPTS: usize = 5;

fn conflict(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 409)
}

/// Bring the Secrets of `request.names.cluster_id` in `request.namespace` to a complete PKI and
/// encryption key, as [`pki::ensure::plan`] decides.
pub async fn ensure(client: &Client, request: &EnsureRequest<'_>) -> Result<Ensured, PkiSecretsError> {
    let cluster = request.names.cluster_id.clone();
    let namespace = request.namespace.to_string();
    let kube_error = |source| PkiSecretsError::Kube { cluster: cluster.clone(), namespace: namespace.clone(), source };
    let api: Api<Secret> = Api::namespaced(client.clone(), request.namespace);
    let mut ensured = Ensured::default();
    'attempts: for _ in 0..ATTEMPTS {
        let selector = format!("{CLUSTER_LABEL}={cluster}");
        let mut existing = api.list(&ListParams::default().labels(&selector)).await.map_err(kube_error)?.items;
        // aws-operator's encryption config is found by name: its writers need not label it.
        if request.encryption == EncryptionFormat::ProviderConfig {
            let name = encryption_provider_config_secret_name(&cluster);
            if !existing.iter().any(|s| s.metadata.name.as_deref() == Some(name.as_str()))
                && let Some(secret) = api.get_opt(&name).await.map_err(kube_error)?
            {
                existing.push(secret);
            }
        }
        let plan =
            plan(&existing, request).map_err(|source| PkiSecretsError::Pki { cluster: cluster.clone(), source })?;
        ensured.foreign_problems = plan.foreign_problems.clone();
        ensured.missing = plan.missing.clone();
        ensured.next_renewal = plan.next_renewal;
        for secret in &plan.create {
            let name = secret.metadata.name.clone().unwrap_or_default();
            match api.create(&PostParams::default(), secret).await {
                Ok(_) => ensured.created.push(name),
                Err(e) if conflict(&e) => continue 'attempts,
                Err(e) => return Err(kube_error(e)),
            }
        }
        for secret in &plan.replace {
            let name = secret.metadata.name.clone().unwrap_or_default();
            // A merge patch carrying the resourceVersion it read: the same optimistic concurrency as
            // an update, within the operators' `patch` permission.
            match api.patch(&name, &PatchParams::default(), &Patch::Merge(secret)).await {
                Ok(_) => ensured.replaced.push(name),
                Err(e) if conflict(&e) => continue 'attempts,
                Err(e) => return Err(kube_error(e)),
            }
        }
        // Written: read again, to confirm and to learn the next renewal.
        if plan.is_empty() {
            return Ok(ensured);
        }
    }
    Err(PkiSecretsError::Contended { cluster })
}

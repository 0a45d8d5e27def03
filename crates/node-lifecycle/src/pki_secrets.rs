//! A cluster's PKI and encryption key in the management cluster: the edge of
//! [`pki::ensure::plan`], shared by both operators.
//!
//! [`ensure`] reads the cluster's Secrets, plans, and writes: creates (never overwriting) what is
//! missing, CAs first, and replaces only certificates it issued itself, each by a merge patch
//! carrying the `resourceVersion` it read. A conflict (another replica, or a run this one interrupted, wrote
//! first) reads and plans again. A process stopped at any point therefore leaves at most one CA
//! of each kind and one encryption key, which the next call reads instead of generating again.
//!
//! [`reconcile`] is the step both operators run before they need a cluster's certificates: it
//! calls [`ensure`] and turns what it found into what a reconcile reports, the same in both:
//! `Ready=False` with reason [`CERTIFICATE_INVALID`] (and a Warning event) when a Secret someone
//! else wrote fails its checks, a Normal event [`CERTIFICATES_ISSUED`] or
//! [`CERTIFICATES_RENEWED`] naming the Secrets written, and a requeue at the next renewal. No
//! message carries key material: only Secret names, keys and the checks' findings.

use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::Secret;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use pki::ensure::{EncryptionFormat, EnsureRequest, ForeignProblem, plan};
use pki::secret::{CLUSTER_LABEL, encryption_provider_config_secret_name};

/// The `Ready` reason (and Warning event reason) of a cluster whose certificate Secret someone
/// else wrote fails its checks, or whose CA Secret is unreadable. Nothing is replaced.
pub const CERTIFICATE_INVALID: &str = "CertificateInvalid";
/// The Warning event reason of a failure to read or write the certificate Secrets (retried).
pub const CERTIFICATE_ISSUE_FAILED: &str = "CertificateIssueFailed";
/// The Normal event reason when Secrets were issued (CAs, certificates, encryption key).
pub const CERTIFICATES_ISSUED: &str = "CertificatesIssued";
/// The Normal event reason when certificates were issued again (renewal).
pub const CERTIFICATES_RENEWED: &str = "CertificatesRenewed";

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

impl Ensured {
    /// The message of `Ready=False` [`CERTIFICATE_INVALID`]: each Secret in `namespace` that
    /// someone else wrote and that fails its checks, with the key and the fix; `None` when every
    /// one passes.
    pub fn invalid(&self, namespace: &str) -> Option<String> {
        if self.foreign_problems.is_empty() {
            return None;
        }
        let each: Vec<String> = self
            .foreign_problems
            .iter()
            .map(|p| format!("Secret {namespace}/{} (certificate {}): {}", p.secret, p.certificate, p.problem))
            .collect();
        Some(format!(
            "{}; the operator does not replace a Secret it did not issue: fix it, or delete it and every other certificate Secret of the cluster to have the operator issue them all",
            each.join("; ")
        ))
    }

    /// The Normal events for what was written: `(reason, note)`, naming the Secrets only.
    pub fn events(&self) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        if !self.created.is_empty() {
            out.push((CERTIFICATES_ISSUED, format!("issued Secrets {}", self.created.join(", "))));
        }
        if !self.replaced.is_empty() {
            out.push((
                CERTIFICATES_RENEWED,
                format!("renewed the certificates in Secrets {}", self.replaced.join(", ")),
            ));
        }
        out
    }

    /// How long after `now` the next certificate issued here is due for renewal (zero when it
    /// is due already); `None` when none was issued here.
    pub fn renew_in(&self, now: SystemTime) -> Option<Duration> {
        self.next_renewal.map(|at| at.duration_since(now).unwrap_or(Duration::ZERO))
    }
}

/// [`ensure`] as a reconcile step: the Secrets brought to a complete PKI, or the error to report.
/// An unreadable CA Secret, names that cannot go into a certificate, and a Secret someone else
/// wrote that fails its checks ([`Ensured::invalid`]) are [`CERTIFICATE_INVALID`] and permanent
/// (bad input: the reconcile marks the object `Ready=False` and sends a Warning event); API
/// errors and contention are [`CERTIFICATE_ISSUE_FAILED`] and retried. The caller sends
/// [`Ensured::events`] and requeues after [`Ensured::renew_in`].
pub async fn reconcile(client: &Client, request: &EnsureRequest<'_>) -> Result<Ensured, operatorkit::ResourceError> {
    let ensured = ensure(client, request).await.map_err(|e| match e {
        PkiSecretsError::Pki { .. } => operatorkit::ResourceError::msg(
            CERTIFICATE_INVALID,
            format!("Secrets in namespace {}: {e}", request.namespace),
        )
        .permanent(),
        other => operatorkit::ResourceError::msg(CERTIFICATE_ISSUE_FAILED, other.to_string()),
    })?;
    match ensured.invalid(request.namespace) {
        Some(message) => Err(operatorkit::ResourceError::msg(CERTIFICATE_INVALID, message).permanent()),
        None => Ok(ensured),
    }
}

/// Rounds of list, plan and write before [`PkiSecretsError::Contended`]. A round ends early only
/// on a conflict, and every conflict means another writer stored one of the cluster's Secrets
/// (at most a dozen), so a writer that keeps losing to a replica still finishes within this
/// many rounds.
const ATTEMPTS: usize = 16;

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
        // So is the IRSA signing key (the original's Secret carries no label): never overwritten.
        if request.service_account_v2 {
            let name = pki::service_account_v2::secret_name(&cluster);
            if !existing.iter().any(|s| s.metadata.name.as_deref() == Some(name.as_str()))
                && let Some(secret) = api.get_opt(&name).await.map_err(kube_error)?
            {
                existing.push(secret);
            }
        }
        // So is a kubeconfig Secret (Cluster API's carry no such label): never overwritten.
        if request.kubeconfig_server.is_some() {
            let name = pki::kubeconfig::secret_name(&cluster);
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

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use pki::CertificateProblem;
    use pki::ensure::ForeignProblem;

    use super::{CERTIFICATES_ISSUED, CERTIFICATES_RENEWED, Ensured};

    #[test]
    fn a_failing_foreign_certificate_names_the_secret_the_key_and_the_fix() {
        let ensured = Ensured {
            foreign_problems: vec![ForeignProblem {
                secret: "q7x2m-api".into(),
                certificate: "api".into(),
                problem: CertificateProblem::KeyMismatch,
            }],
            ..Ensured::default()
        };
        let message = ensured.invalid("org-umbra").expect("invalid");
        assert!(message.starts_with("Secret org-umbra/q7x2m-api (certificate api): key \"key\""), "{message}");
        assert!(message.contains("store the certificate with its own key"), "{message}");
        assert!(message.contains("does not replace a Secret it did not issue"), "{message}");
        assert_eq!(Ensured::default().invalid("org-umbra"), None, "nothing to report");
    }

    #[test]
    fn events_name_what_was_written_and_nothing_else() {
        let ensured = Ensured {
            created: vec!["q7x2m-cluster-ca".into(), "q7x2m-api".into()],
            replaced: vec!["q7x2m-worker".into()],
            ..Ensured::default()
        };
        assert_eq!(
            ensured.events(),
            [
                (CERTIFICATES_ISSUED, "issued Secrets q7x2m-cluster-ca, q7x2m-api".to_string()),
                (CERTIFICATES_RENEWED, "renewed the certificates in Secrets q7x2m-worker".to_string()),
            ]
        );
        assert!(Ensured::default().events().is_empty(), "an unchanged PKI sends no event");
    }

    #[test]
    fn the_next_renewal_is_the_requeue() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_772_323_200);
        let due_in = |at| Ensured { next_renewal: at, ..Ensured::default() }.renew_in(now);
        assert_eq!(due_in(Some(now + Duration::from_secs(3600))), Some(Duration::from_secs(3600)));
        assert_eq!(due_in(Some(now - Duration::from_secs(5))), Some(Duration::ZERO), "overdue: at once");
        assert_eq!(due_in(None), None, "nothing issued here: no renewal requeue");
    }
}

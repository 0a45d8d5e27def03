//! What an operator writes so that a cluster has its PKI and encryption key: a pure decision over
//! the cluster's Secrets as they are.
//!
//! - A Secret someone else wrote (no [`ISSUED_BY_LABEL`](crate::secret::ISSUED_BY_LABEL)) is
//!   never written: it is checked, and its problems are reported for the cluster's status.
//! - A cluster with any certificate someone else wrote brings its own PKI: no certificate or CA
//!   is issued for it (certificates of two CAs would not trust each other), and the missing ones
//!   are reported ([`EnsurePlan::missing`]).
//! - A missing certificate is issued; one issued here is issued again when it is due for
//!   renewal, when it no longer passes its checks (the cluster's names changed), or when its CA
//!   is no longer the cluster's (the CA Secret was replaced), so that all the leaves of a CA
//!   always come from the same CA.
//! - A CA is generated only when its Secret is absent; one that exists is read, and an unreadable
//!   one is an error, never replaced.
//! - The encryption key is generated only when its Secret is absent, and never replaced: a new
//!   key would make every Secret already in etcd unreadable.
//! - So is the service-account signing key of IAM roles for service accounts, when asked for
//!   ([`EnsureRequest::service_account_v2`]): a new key would invalidate every token in use.
//!
//! The writes are ordered: CAs first, then certificates, then the encryption key. Applied with
//! create (never overwrite) for [`EnsurePlan::create`] and an update carrying the read
//! `resourceVersion` for [`EnsurePlan::replace`], a process stopped at any point leaves either
//! no CA or exactly one, and the next run reads it instead of generating another.

use std::time::SystemTime;

use k8s_openapi::api::core::v1::Secret;

use crate::check::{CertificateFiles, CertificateProblem, check};
use crate::issue::{Authority, CertificateAuthority, IssueOptions, LeafProfile, leaf_profiles};
use crate::kubeconfig;
use crate::renewal::{Renewal, RenewalPolicy, renewal};
use crate::secret::{
    self, AUTHORITY_LABEL, CERTIFICATE_LABEL, CLUSTER_LABEL, RANDOMKEY_LABEL, authority_from_secret, certificate_files,
    issued_here,
};
use crate::{ClusterNames, EncryptionKey, PkiError, service_account_v2};

/// Which encryption-key Secret the operator reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EncryptionFormat {
    /// aws-operator: `<id>-encryption-provider-config`, the whole `EncryptionConfiguration`.
    ProviderConfig,
    /// kvm-operator: the randomkey Secret `<id>-encryption` (found by its label).
    RandomKey,
}

/// What to plan for.
#[derive(Debug, Clone)]
pub struct EnsureRequest<'a> {
    /// The namespace of the cluster's certificate Secrets.
    pub namespace: &'a str,
    /// The cluster's names.
    pub names: &'a ClusterNames,
    /// The encryption-key Secret's format.
    pub encryption: EncryptionFormat,
    /// The time and serials of any issuance; `options.now` is also the time of the checks.
    pub options: IssueOptions,
    /// When certificates issued here are renewed.
    pub renewal: RenewalPolicy,
    /// The workload cluster's API server URL for the management cluster's kubeconfig
    /// (`<id>-kubeconfig`, [`kubeconfig`]); none issues no kubeconfig.
    pub kubeconfig_server: Option<String>,
    /// Whether the cluster signs its service-account tokens for IAM roles for service accounts:
    /// the key pair `<id>-service-account-v2` ([`crate::service_account_v2`]) is generated when
    /// its Secret is absent, and never replaced.
    pub service_account_v2: bool,
}

/// A certificate Secret written by someone else that fails its checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForeignProblem {
    /// The Secret's name.
    pub secret: String,
    /// The certificate's name.
    pub certificate: String,
    /// What is wrong.
    pub problem: CertificateProblem,
}

/// The writes that bring a cluster's Secrets to a complete PKI. A `Secret`'s `Debug` prints its
/// data: never log a plan.
#[derive(Clone, Default)]
pub struct EnsurePlan {
    /// Secrets to create, in order (CAs first). A conflict means another run created it: plan
    /// again from what is there.
    pub create: Vec<Secret>,
    /// Secrets issued here to replace (renewed certificates), each with the `resourceVersion` it
    /// was read with.
    pub replace: Vec<Secret>,
    /// Certificates someone else wrote that fail their checks; they are left as they are.
    pub foreign_problems: Vec<ForeignProblem>,
    /// Certificates that are missing from a cluster that brings its own: the operator waits for
    /// them.
    pub missing: Vec<String>,
    /// The earliest moment a certificate issued here becomes due for renewal.
    pub next_renewal: Option<SystemTime>,
}

impl std::fmt::Debug for EnsurePlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names = |s: &[Secret]| s.iter().filter_map(|s| s.metadata.name.clone()).collect::<Vec<_>>();
        f.debug_struct("EnsurePlan")
            .field("create", &names(&self.create))
            .field("replace", &names(&self.replace))
            .field("foreign_problems", &self.foreign_problems)
            .field("missing", &self.missing)
            .field("next_renewal", &self.next_renewal)
            .finish()
    }
}

impl EnsurePlan {
    /// Nothing to write.
    pub fn is_empty(&self) -> bool {
        self.create.is_empty() && self.replace.is_empty()
    }
}

fn label<'a>(secret: &'a Secret, key: &str) -> Option<&'a str> {
    secret.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

/// When a certificate issued here that is still current (its CA is the cluster's, it passes
/// its checks, it is not due) is due for renewal; `None` when it must be issued again.
fn current(
    files: Option<&CertificateFiles>,
    ca: &CertificateAuthority,
    profile: &LeafProfile,
    request: &EnsureRequest<'_>,
) -> Option<SystemTime> {
    let files = files?;
    if files.ca != ca.certificate_pem() {
        return None;
    }
    let info = check(files, profile, request.options.now).ok()?;
    match renewal(&info, request.options.now, &request.renewal) {
        Renewal::NotYet { renew_at } => Some(renew_at),
        Renewal::Due | Renewal::Expired => None,
    }
}

/// The plan for the cluster `request.names.cluster_id`, given `existing`: the Secrets of its
/// certificates' namespace (those of other clusters are ignored).
pub fn plan(existing: &[Secret], request: &EnsureRequest<'_>) -> Result<EnsurePlan, PkiError> {
    let cluster_id = request.names.cluster_id.as_str();
    let namespace = request.namespace;
    let now = request.options.now;
    let ours: Vec<&Secret> = existing.iter().filter(|s| label(s, CLUSTER_LABEL) == Some(cluster_id)).collect();
    let by_name = |name: &str| existing.iter().find(|s| s.metadata.name.as_deref() == Some(name));
    let mut plan = EnsurePlan::default();

    // The CAs as they are; generated lazily, only when a leaf needs one that has no Secret.
    let mut authorities: Vec<(Authority, Option<CertificateAuthority>)> = Vec::new();
    for authority in [Authority::Cluster, Authority::Etcd] {
        let name = secret::authority_secret_name(cluster_id, authority);
        let found = by_name(&name)
            .or_else(|| ours.iter().copied().find(|s| label(s, AUTHORITY_LABEL) == Some(authority.as_str())));
        let ca = found.map(|s| authority_from_secret(s, authority)).transpose()?;
        authorities.push((authority, ca));
    }
    let mut serial = 0u64;
    let mut authority = |which: Authority, plan: &mut EnsurePlan| -> Result<CertificateAuthority, PkiError> {
        let slot = authorities.iter_mut().find(|(a, _)| *a == which).expect("both authorities are listed");
        if let Some(ca) = &slot.1 {
            return Ok(ca.clone());
        }
        let ca = CertificateAuthority::generate(which, cluster_id, &request.options, serial)?;
        serial += 1;
        plan.create.push(secret::authority_secret(namespace, cluster_id, &ca));
        slot.1 = Some(ca.clone());
        Ok(ca)
    };

    let brings_its_own = ours.iter().any(|s| label(s, CERTIFICATE_LABEL).is_some() && !issued_here(s));
    let mut leaves_to_create = Vec::new();
    for (index, profile) in leaf_profiles(request.names)?.into_iter().enumerate() {
        let leaf_serial = 100 + index as u64;
        let found = ours.iter().copied().find(|s| label(s, CERTIFICATE_LABEL) == Some(profile.name.as_str()));
        if found.is_none() && brings_its_own {
            plan.missing.push(profile.name.clone());
            continue;
        }
        let Some(found) = found else {
            let ca = authority(profile.authority, &mut plan)?;
            leaves_to_create.push(secret::certificate_secret(
                namespace,
                cluster_id,
                &ca.issue(&profile, &request.options, leaf_serial)?,
            ));
            continue;
        };
        let files = certificate_files(found);
        if !issued_here(found) {
            let result = match &files {
                Some(files) => check(files, &profile, now).map(drop),
                None => Err(CertificateProblem::Unreadable { field: "crt" }),
            };
            if let Err(problem) = result {
                plan.foreign_problems.push(ForeignProblem {
                    secret: found.metadata.name.clone().unwrap_or_default(),
                    certificate: profile.name.clone(),
                    problem,
                });
            }
            continue;
        }
        let ca = authority(profile.authority, &mut plan)?;
        match current(files.as_ref(), &ca, &profile, request) {
            Some(renew_at) => {
                plan.next_renewal = Some(plan.next_renewal.map_or(renew_at, |t| t.min(renew_at)));
            }
            None => {
                let mut renewed = secret::certificate_secret(
                    namespace,
                    cluster_id,
                    &ca.issue(&profile, &request.options, leaf_serial)?,
                );
                renewed.metadata.name = found.metadata.name.clone();
                renewed.metadata.resource_version = found.metadata.resource_version.clone();
                plan.replace.push(renewed);
            }
        }
    }

    // The management cluster's kubeconfig, on the cluster CA: only for a PKI issued here.
    if let Some(server) = request.kubeconfig_server.as_deref()
        && !brings_its_own
    {
        let found = by_name(&kubeconfig::secret_name(cluster_id));
        // One someone else wrote (Cluster API's, a person's) is used as it is.
        if found.is_none_or(issued_here) {
            let profile = kubeconfig::profile();
            let ca = authority(Authority::Cluster, &mut plan)?;
            let read = found.and_then(kubeconfig::read).filter(|(written, _)| written == server);
            match (found, current(read.as_ref().map(|(_, files)| files), &ca, &profile, request)) {
                (Some(_), Some(renew_at)) => {
                    plan.next_renewal = Some(plan.next_renewal.map_or(renew_at, |t| t.min(renew_at)));
                }
                (found, _) => {
                    let serial = 100 + crate::CERTIFICATES.len() as u64;
                    let cert = ca.issue(&profile, &request.options, serial)?;
                    let mut secret = kubeconfig::kubeconfig_secret(namespace, cluster_id, server, &cert);
                    match found {
                        Some(found) => {
                            secret.metadata.resource_version = found.metadata.resource_version.clone();
                            plan.replace.push(secret);
                        }
                        None => leaves_to_create.push(secret),
                    }
                }
            }
        }
    }
    plan.create.extend(leaves_to_create);

    let has_key = match request.encryption {
        EncryptionFormat::ProviderConfig => {
            by_name(&secret::encryption_provider_config_secret_name(cluster_id)).is_some()
        }
        EncryptionFormat::RandomKey => {
            ours.iter().any(|s| label(s, RANDOMKEY_LABEL) == Some(secret::ENCRYPTION_KEY))
                || by_name(&secret::randomkey_secret_name(cluster_id)).is_some()
        }
    };
    // The IRSA signing key, whoever wrote it (the original's Secret carries no label): generated
    // only when absent, never replaced, since a new key invalidates every token in use.
    if request.service_account_v2 && by_name(&service_account_v2::secret_name(cluster_id)).is_none() {
        let pair = service_account_v2::SigningKeyPair::generate()?;
        plan.create.push(service_account_v2::secret(namespace, cluster_id, &pair));
    }
    if !has_key {
        let key = EncryptionKey::generate()?;
        plan.create.push(match request.encryption {
            EncryptionFormat::ProviderConfig => secret::encryption_provider_config_secret(namespace, cluster_id, &key),
            EncryptionFormat::RandomKey => secret::randomkey_secret(namespace, cluster_id, &key),
        });
    }
    Ok(plan)
}

//! The Secrets that carry a cluster's PKI, in the format its readers already know.
//!
//! Certificates are stored as cert-operator stores them: Secret `<cluster id>-<cert>`, labelled
//! `giantswarm.io/cluster=<cluster id>` and `giantswarm.io/certificate=<cert>`, with the keys
//! `ca`, `crt` and `key` (PEM). Both operators find them by those labels, so a cluster whose
//! Secrets cert-operator (or anyone else) writes works the same.
//!
//! What this crate issues carries one more label, [`ISSUED_BY_LABEL`]`=`[`ISSUED_BY`]: an
//! operator replaces only Secrets that carry it, never one written by someone else.
//!
//! The CAs' keys, which cert-operator kept in Vault, are Secrets `<cluster id>-cluster-ca` and
//! `<cluster id>-etcd-ca` (keys `crt` and `key`, label [`AUTHORITY_LABEL`]). The encryption key
//! is written in both formats the operators read: aws-operator's
//! `<cluster id>-encryption-provider-config` (key `encryption`: the whole
//! `EncryptionConfiguration`) and kvm-operator's randomkey Secret `<cluster id>-encryption`
//! (label `giantswarm.io/randomkey=encryption`, key `encryption`: the key alone).
//!
//! A `Secret`'s `Debug` prints its data: never log one.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::check::CertificateFiles;
use crate::issue::{Authority, CertificateAuthority, ClusterPki, IssuedCertificate, PrivateKey};
use crate::{EncryptionKey, PkiError, encryption_configuration};

/// The cluster label.
pub const CLUSTER_LABEL: &str = "giantswarm.io/cluster";
/// cert-operator's certificate label; its value is the certificate's name.
pub const CERTIFICATE_LABEL: &str = "giantswarm.io/certificate";
/// The label of a CA Secret; its value is `cluster` or `etcd`.
pub const AUTHORITY_LABEL: &str = "giantswarm.io/certificate-authority";
/// The randomkeys label; kvm-operator's encryption key has the value `encryption`.
pub const RANDOMKEY_LABEL: &str = "giantswarm.io/randomkey";
/// The label that marks a Secret this crate's issuer wrote.
pub const ISSUED_BY_LABEL: &str = "pki.giantswarm.io/issued-by";
/// The value of [`ISSUED_BY_LABEL`].
pub const ISSUED_BY: &str = "cluster-operators";
/// The Secret key of the encryption key or configuration.
pub const ENCRYPTION_KEY: &str = "encryption";

/// `<cluster id>-<cert>`.
pub fn certificate_secret_name(cluster_id: &str, cert: &str) -> String {
    format!("{cluster_id}-{cert}")
}

/// `<cluster id>-cluster-ca` or `<cluster id>-etcd-ca`.
pub fn authority_secret_name(cluster_id: &str, authority: Authority) -> String {
    format!("{cluster_id}-{}-ca", authority.as_str())
}

/// `<cluster id>-encryption-provider-config` (aws-operator's).
pub fn encryption_provider_config_secret_name(cluster_id: &str) -> String {
    format!("{cluster_id}-encryption-provider-config")
}

/// `<cluster id>-encryption` (kvm-operator's randomkey Secret).
pub fn randomkey_secret_name(cluster_id: &str) -> String {
    format!("{cluster_id}-encryption")
}

fn secret(namespace: &str, name: String, labels: &[(&str, &str)], data: &[(&str, &[u8])]) -> Secret {
    labelled_secret(namespace, name, labels, data)
}

/// An `Opaque` Secret with these labels and data.
pub(crate) fn labelled_secret(
    namespace: &str,
    name: String,
    labels: &[(&str, &str)],
    data: &[(&str, &[u8])],
) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: Some(namespace.to_string()),
            labels: Some(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()),
            ..ObjectMeta::default()
        },
        type_: Some("Opaque".into()),
        data: Some(data.iter().map(|(k, v)| (k.to_string(), ByteString(v.to_vec()))).collect()),
        ..Secret::default()
    }
}

/// The cert-operator Secret of `cert`.
pub fn certificate_secret(namespace: &str, cluster_id: &str, cert: &IssuedCertificate) -> Secret {
    secret(
        namespace,
        certificate_secret_name(cluster_id, &cert.name),
        &[(CLUSTER_LABEL, cluster_id), (CERTIFICATE_LABEL, &cert.name), (ISSUED_BY_LABEL, ISSUED_BY)],
        &[("ca", cert.ca_pem.as_bytes()), ("crt", cert.crt_pem.as_bytes()), ("key", cert.key.expose_pem().as_bytes())],
    )
}

/// The Secret of a CA (keys `crt` and `key`).
pub fn authority_secret(namespace: &str, cluster_id: &str, ca: &CertificateAuthority) -> Secret {
    secret(
        namespace,
        authority_secret_name(cluster_id, ca.authority()),
        &[(CLUSTER_LABEL, cluster_id), (AUTHORITY_LABEL, ca.authority().as_str()), (ISSUED_BY_LABEL, ISSUED_BY)],
        &[("crt", ca.certificate_pem().as_bytes()), ("key", ca.private_key().expose_pem().as_bytes())],
    )
}

/// aws-operator's `<cluster id>-encryption-provider-config`: the `EncryptionConfiguration`.
pub fn encryption_provider_config_secret(namespace: &str, cluster_id: &str, key: &EncryptionKey) -> Secret {
    secret(
        namespace,
        encryption_provider_config_secret_name(cluster_id),
        &[(CLUSTER_LABEL, cluster_id), (ISSUED_BY_LABEL, ISSUED_BY)],
        &[(ENCRYPTION_KEY, encryption_configuration(key).as_bytes())],
    )
}

/// kvm-operator's randomkey Secret `<cluster id>-encryption`: the key alone.
pub fn randomkey_secret(namespace: &str, cluster_id: &str, key: &EncryptionKey) -> Secret {
    secret(
        namespace,
        randomkey_secret_name(cluster_id),
        &[(CLUSTER_LABEL, cluster_id), (RANDOMKEY_LABEL, ENCRYPTION_KEY), (ISSUED_BY_LABEL, ISSUED_BY)],
        &[(ENCRYPTION_KEY, key.expose_base64().as_bytes())],
    )
}

/// Whether this crate's issuer wrote `secret` (and an operator may replace it).
pub fn issued_here(secret: &Secret) -> bool {
    secret.metadata.labels.as_ref().and_then(|l| l.get(ISSUED_BY_LABEL)).map(String::as_str) == Some(ISSUED_BY)
}

fn text(data: &BTreeMap<String, ByteString>, key: &str) -> Option<String> {
    data.get(key).and_then(|b| String::from_utf8(b.0.clone()).ok()).filter(|s| !s.trim().is_empty())
}

/// The `ca`, `crt` and `key` of a certificate Secret; `None` when one is missing or empty.
pub fn certificate_files(secret: &Secret) -> Option<CertificateFiles> {
    let data = secret.data.as_ref()?;
    Some(CertificateFiles {
        ca: text(data, "ca")?,
        crt: text(data, "crt")?,
        key: PrivateKey::from_pem(text(data, "key")?),
    })
}

/// The CA of a CA Secret, checked ([`CertificateAuthority::from_pem`]).
pub fn authority_from_secret(secret: &Secret, authority: Authority) -> Result<CertificateAuthority, PkiError> {
    let data = secret.data.clone().unwrap_or_default();
    let unreadable = |field| PkiError::Authority {
        authority: authority.as_str(),
        problem: crate::CertificateProblem::Unreadable { field },
    };
    let crt = text(&data, "crt").ok_or_else(|| unreadable("crt"))?;
    let key = text(&data, "key").ok_or(PkiError::Authority {
        authority: authority.as_str(),
        problem: crate::CertificateProblem::UnreadableKey,
    })?;
    CertificateAuthority::from_pem(authority, &crt, &key)
}

impl ClusterPki {
    /// Every Secret of this PKI in `namespace`: the two CAs, then the certificates.
    pub fn secrets(&self, namespace: &str, cluster_id: &str) -> Vec<Secret> {
        let mut secrets = vec![
            authority_secret(namespace, cluster_id, &self.cluster_ca),
            authority_secret(namespace, cluster_id, &self.etcd_ca),
        ];
        secrets.extend(self.certificates.iter().map(|c| certificate_secret(namespace, cluster_id, c)));
        secrets
    }
}

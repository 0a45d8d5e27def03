//! Checking a certificate someone else wrote (cert-operator, a platform team, an earlier run):
//! it parses, its key is its key, its CA signed it, it is valid now, and it carries the names and
//! usages its role needs. Each problem names the Secret key (`ca`, `crt`, `key`) and the fix,
//! never key material.

use std::fmt;
use std::time::SystemTime;

use ring::signature::KeyPair as _;
use x509_parser::prelude::X509Certificate;

use crate::issue::{LeafProfile, PrivateKey};
use crate::renewal::{CertificateInfo, certificate_der, info_of, parse};

/// A certificate as cert-operator stores it: Secret keys `ca`, `crt` and `key`.
#[derive(Clone, PartialEq, Eq)]
pub struct CertificateFiles {
    /// The CA certificate, PEM.
    pub ca: String,
    /// The certificate, PEM.
    pub crt: String,
    /// The private key, PEM.
    pub key: PrivateKey,
}

impl fmt::Debug for CertificateFiles {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CertificateFiles").field("crt_bytes", &self.crt.len()).field("key", &self.key).finish()
    }
}

/// What is wrong with a certificate. The message says which Secret key and what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CertificateProblem {
    /// A key of the Secret holds no PEM certificate that parses.
    #[error("key {field:?} holds no readable PEM certificate: write the PEM certificate there")]
    Unreadable {
        /// `ca` or `crt`.
        field: &'static str,
    },
    /// The private key does not parse.
    #[error(
        "key \"key\" holds no readable PEM private key (PKCS#8, PKCS#1 or SEC1): write the certificate's private key there"
    )]
    UnreadableKey,
    /// The private key is not the certificate's.
    #[error("key \"key\" does not belong to the certificate in \"crt\": store the certificate with its own key")]
    KeyMismatch,
    /// The certificate was not signed by the CA in `ca`.
    #[error(
        "the certificate in \"crt\" was not issued by the CA in \"ca\": store the issuing CA's certificate in \"ca\""
    )]
    NotIssuedByCa,
    /// `ca` is not a CA certificate.
    #[error(
        "the certificate in \"ca\" is not a CA certificate (basic constraints CA:TRUE): store the issuing CA there"
    )]
    NotACa,
    /// Past its end of validity.
    #[error(
        "the certificate in \"crt\" expired at {not_after} (seconds since 1970): issue a new one, or delete the Secret to have the operator issue it"
    )]
    Expired {
        /// Its end of validity, seconds since 1970.
        not_after: u64,
    },
    /// Before its start of validity.
    #[error(
        "the certificate in \"crt\" is valid only from {not_before} (seconds since 1970): check the issuer's clock"
    )]
    NotYetValid {
        /// Its start of validity, seconds since 1970.
        not_before: u64,
    },
    /// A name the node configs use is missing.
    #[error(
        "the certificate in \"crt\" lacks the subject alternative name {name}: issue it with every name the cluster uses"
    )]
    MissingName {
        /// The DNS name or IP address.
        name: String,
    },
    /// A usage its role needs is missing.
    #[error("the certificate in \"crt\" lacks the extended key usage {usage}: issue it for {usage}")]
    MissingUsage {
        /// `serverAuth` or `clientAuth`.
        usage: &'static str,
    },
}

fn seconds(time: SystemTime) -> u64 {
    time.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// The raw public key of a PEM private key (the subject public key's bit string): `None` for a
/// SEC1 EC key, which `ring` cannot read (its match with the certificate is then not checked).
fn public_key_of(key_pem: &str) -> Result<Option<Vec<u8>>, CertificateProblem> {
    let (_, block) =
        x509_parser::pem::parse_x509_pem(key_pem.as_bytes()).map_err(|_| CertificateProblem::UnreadableKey)?;
    match block.label.as_str() {
        "PRIVATE KEY" => rcgen::KeyPair::try_from(block.contents.as_slice())
            .map(|k| Some(k.public_key_raw().to_vec()))
            .map_err(|_| CertificateProblem::UnreadableKey),
        "RSA PRIVATE KEY" => ring::rsa::KeyPair::from_der(&block.contents)
            .map(|k| Some(k.public_key().as_ref().to_vec()))
            .map_err(|_| CertificateProblem::UnreadableKey),
        "EC PRIVATE KEY" => Ok(None),
        _ => Err(CertificateProblem::UnreadableKey),
    }
}

fn key_matches(cert: &X509Certificate<'_>, key_pem: &str) -> Result<(), CertificateProblem> {
    match public_key_of(key_pem)? {
        Some(public) if public.as_slice() != cert.public_key().subject_public_key.data.as_ref() => {
            Err(CertificateProblem::KeyMismatch)
        }
        _ => Ok(()),
    }
}

/// A CA certificate and its key, as read back from the operator's own CA Secret.
pub fn check_authority(cert_pem: &str, key_pem: &str) -> Result<(), CertificateProblem> {
    let der = certificate_der(cert_pem, "crt")?;
    let cert = parse(&der, "crt")?;
    if !cert.is_ca() {
        return Err(CertificateProblem::NotACa);
    }
    key_matches(&cert, key_pem)
}

/// Check `files` against the role `profile` at `now`; the certificate's details when it passes.
pub fn check(
    files: &CertificateFiles,
    profile: &LeafProfile,
    now: SystemTime,
) -> Result<CertificateInfo, CertificateProblem> {
    let ca_der = certificate_der(&files.ca, "ca")?;
    let ca = parse(&ca_der, "ca")?;
    let crt_der = certificate_der(&files.crt, "crt")?;
    let crt = parse(&crt_der, "crt")?;
    key_matches(&crt, files.key.expose_pem())?;
    if !ca.is_ca() {
        return Err(CertificateProblem::NotACa);
    }
    if crt.verify_signature(Some(ca.public_key())).is_err() {
        return Err(CertificateProblem::NotIssuedByCa);
    }
    let info = info_of(&crt, "crt")?;
    if now >= info.not_after {
        return Err(CertificateProblem::Expired { not_after: seconds(info.not_after) });
    }
    if now < info.not_before {
        return Err(CertificateProblem::NotYetValid { not_before: seconds(info.not_before) });
    }
    for name in &profile.dns_names {
        if !info.dns_names.iter().any(|n| n.eq_ignore_ascii_case(name)) {
            return Err(CertificateProblem::MissingName { name: name.clone() });
        }
    }
    for ip in &profile.ip_addresses {
        if !info.ip_addresses.contains(ip) {
            return Err(CertificateProblem::MissingName { name: ip.to_string() });
        }
    }
    if profile.usage.server() && !info.server_auth {
        return Err(CertificateProblem::MissingUsage { usage: "serverAuth" });
    }
    if profile.usage.client() && !info.client_auth {
        return Err(CertificateProblem::MissingUsage { usage: "clientAuth" });
    }
    Ok(info)
}

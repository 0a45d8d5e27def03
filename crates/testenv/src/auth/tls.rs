//! TLS serving: a CA generated when the server starts, a serving certificate it signs for
//! `127.0.0.1`, `localhost` and the in-cluster names of the API server, and the rustls
//! acceptor. The CA goes into the kubeconfig (`certificate-authority-data`) and into the
//! in-cluster `ca.crt`, so clients verify the server as they would a real cluster's.

use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose, SanType};

/// Certificates that cannot be made.
#[derive(Debug, thiserror::Error)]
#[error("cannot set up TLS serving: {0}")]
pub struct TlsError(String);

fn err(e: impl std::fmt::Display) -> TlsError {
    TlsError(e.to_string())
}

/// The names the serving certificate is valid for, as kube-apiserver's own serving
/// certificate lists them.
const SERVING_NAMES: &[&str] = &[
    "localhost",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
];

/// The CA and the acceptor of a TLS-serving test server.
#[derive(Clone)]
pub struct Tls {
    ca_pem: String,
    ca_der: Vec<u8>,
    acceptor: tokio_rustls::TlsAcceptor,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls").field("ca", &"<generated>").finish()
    }
}

impl Tls {
    /// Generate a CA and a serving certificate for loopback.
    pub fn generate() -> Result<Tls, TlsError> {
        let ca_key = KeyPair::generate().map_err(err)?;
        let mut ca_params = CertificateParams::default();
        ca_params.distinguished_name.push(DnType::CommonName, "testenv-ca");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.key_usages =
            vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
        let ca_cert = ca_params.self_signed(&ca_key).map_err(err)?;
        let issuer = rcgen::Issuer::from_params(&ca_params, &ca_key);

        let key = KeyPair::generate().map_err(err)?;
        let mut params =
            CertificateParams::new(SERVING_NAMES.iter().map(|s| s.to_string()).collect::<Vec<_>>()).map_err(err)?;
        params.subject_alt_names.push(SanType::IpAddress(std::net::IpAddr::from([127, 0, 0, 1])));
        params.distinguished_name.push(DnType::CommonName, "kube-apiserver");
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
        let cert = params.signed_by(&key, &issuer).map_err(err)?;

        let chain = vec![cert.der().clone(), ca_cert.der().clone()];
        let private = rustls::pki_types::PrivateKeyDer::try_from(key.serialize_der()).map_err(err)?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(err)?
            .with_no_client_auth()
            .with_single_cert(chain, private)
            .map_err(err)?;
        // The server speaks HTTP/1.1 only; Go clients offer h2 first and settle on this.
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Tls {
            ca_pem: ca_cert.pem(),
            ca_der: ca_cert.der().to_vec(),
            acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(config)),
        })
    }

    /// The CA certificate, PEM.
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    /// The CA certificate, DER.
    pub fn ca_der(&self) -> &[u8] {
        &self.ca_der
    }

    /// The acceptor for incoming connections.
    pub fn acceptor(&self) -> &tokio_rustls::TlsAcceptor {
        &self.acceptor
    }
}

//! TLS serving: a CA generated when the server starts, a serving certificate it signs for
//! `127.0.0.1`, `localhost` and the in-cluster names of the API server, and the rustls
//! acceptor. The CA goes into the kubeconfig (`certificate-authority-data`) and into the
//! in-cluster `ca.crt`, so clients verify the server as they would a real cluster's. A test may
//! hand in the serving certificate instead ([`ServingCertificate`]): a cluster's own API server
//! certificate, so that clients configured for that cluster reach the test server unchanged.
//!
//! With client CAs (kube-apiserver's `--client-ca-file`), the server requests a client
//! certificate in the handshake but does not require one, as kube-apiserver does
//! (`tls.RequestClientCert`): the handshake checks only that the client holds the key of the
//! certificate it presents. Whether the certificate chains to a client CA is the
//! authenticator's question ([`Tls::verify_client`]), so an untrusted certificate gets kube-apiserver's
//! `401 Unauthorized` rather than a failed handshake.

use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose, SanType};
use rustls::DistinguishedName;
use rustls::client::danger::HandshakeSignatureValid;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};

use super::UserInfo;

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

/// A serving certificate handed in, PEM: the CA that clients trust, the certificate (valid for
/// `127.0.0.1`) and its private key.
#[derive(Clone)]
pub struct ServingCertificate {
    /// The CA clients verify the server with.
    pub ca_pem: String,
    /// The serving certificate.
    pub cert_pem: String,
    /// Its private key. Never printed.
    pub key_pem: String,
}

impl std::fmt::Debug for ServingCertificate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServingCertificate").field("key_pem", &"***").finish_non_exhaustive()
    }
}

/// What a connection's client certificate says about its user, as kube-apiserver's x509
/// authenticator decides.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ClientCertificate {
    /// No certificate (or no client CA, or a certificate without a common name, which
    /// kube-apiserver's x509 authenticator passes over).
    #[default]
    Absent,
    /// A certificate of a client CA for client authentication: the user its subject names.
    Verified(Arc<UserInfo>),
    /// A certificate that does not chain to a client CA, has expired or is not for client
    /// authentication: refused unless a valid token authenticates the request.
    Invalid,
}

/// The CA and the acceptor of a TLS-serving test server.
#[derive(Clone)]
pub struct Tls {
    ca_pem: String,
    ca_der: Vec<u8>,
    acceptor: tokio_rustls::TlsAcceptor,
    client_verifier: Option<Arc<dyn ClientCertVerifier>>,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls").field("ca", &"<generated>").finish()
    }
}

impl Tls {
    /// Serve with `serving` (else a generated CA and serving certificate for loopback), and
    /// request client certificates of `client_cas` (PEM, each one or more certificates) when
    /// there are any.
    pub fn new(serving: Option<&ServingCertificate>, client_cas: &[String]) -> Result<Tls, TlsError> {
        let (ca_pem, chain, key) = match serving {
            Some(s) => {
                let chain = CertificateDer::pem_slice_iter(s.cert_pem.as_bytes())
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| err(format!("the serving certificate: {e}")))?;
                let key = PrivateKeyDer::from_pem_slice(s.key_pem.as_bytes())
                    .map_err(|_| err("the serving certificate's key is not a PEM private key"))?;
                (s.ca_pem.clone(), chain, key)
            }
            None => Self::generate()?,
        };
        let ca_der = CertificateDer::pem_slice_iter(ca_pem.as_bytes())
            .next()
            .ok_or_else(|| err("the serving CA holds no certificate"))?
            .map_err(|e| err(format!("the serving CA: {e}")))?
            .to_vec();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let client_verifier = if client_cas.is_empty() {
            None
        } else {
            let mut roots = rustls::RootCertStore::empty();
            for pem in client_cas {
                for cert in CertificateDer::pem_slice_iter(pem.as_bytes()) {
                    roots.add(cert.map_err(|e| err(format!("a client CA: {e}")))?).map_err(err)?;
                }
            }
            let verifier =
                rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                    .allow_unauthenticated()
                    .build()
                    .map_err(err)?;
            Some(verifier)
        };
        let builder =
            rustls::ServerConfig::builder_with_provider(provider).with_safe_default_protocol_versions().map_err(err)?;
        let builder = match &client_verifier {
            Some(v) => builder.with_client_cert_verifier(Arc::new(RequestClientCert(v.clone()))),
            None => builder.with_no_client_auth(),
        };
        let mut config = builder.with_single_cert(chain, key).map_err(err)?;
        // The server speaks HTTP/1.1 only; Go clients offer h2 first and settle on this.
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Tls { ca_pem, ca_der, acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(config)), client_verifier })
    }

    /// A generated CA (PEM), and a serving certificate chain and key it signs for loopback.
    #[allow(clippy::type_complexity)]
    fn generate() -> Result<(String, Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), TlsError> {
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
        let private = PrivateKeyDer::try_from(key.serialize_der()).map_err(err)?;
        Ok((ca_cert.pem(), chain, private))
    }

    /// The user of a connection whose client presented `chain` (leaf first), as kube-apiserver's
    /// x509 authenticator maps it: a certificate of a client CA for client authentication is
    /// user = the subject's common name, groups = its organizations (and
    /// `system:authenticated`), with the certificate's SHA-256 as its credential id.
    pub fn verify_client(&self, chain: Option<&[CertificateDer<'_>]>) -> ClientCertificate {
        let (Some(verifier), Some((leaf, intermediates))) =
            (&self.client_verifier, chain.and_then(|c| c.split_first()))
        else {
            return ClientCertificate::Absent;
        };
        let Ok((_, cert)) = x509_parser::parse_x509_certificate(leaf) else { return ClientCertificate::Invalid };
        let subject = cert.subject();
        let Some(name) = subject.iter_common_name().next().and_then(|cn| cn.as_str().ok()).filter(|n| !n.is_empty())
        else {
            return ClientCertificate::Absent;
        };
        if verifier.verify_client_cert(leaf, intermediates, UnixTime::now()).is_err() {
            return ClientCertificate::Invalid;
        }
        let groups: Vec<&str> = subject.iter_organization().filter_map(|o| o.as_str().ok()).collect();
        let mut user = UserInfo::new(name, &groups);
        let digest = ring::digest::digest(&ring::digest::SHA256, leaf);
        let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
        user.extra.insert("authentication.kubernetes.io/credential-id".into(), vec![format!("X509SHA256={hex}")]);
        ClientCertificate::Verified(Arc::new(user))
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

/// kube-apiserver's `tls.RequestClientCert`: ask for a client certificate (naming the client
/// CAs, so that clients pick the right one), take whatever is presented, and check only the
/// client's proof that it holds the certificate's key. [`Tls::verify_client`] decides on the
/// certificate itself.
#[derive(Debug)]
struct RequestClientCert(Arc<dyn ClientCertVerifier>);

impl ClientCertVerifier for RequestClientCert {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.0.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

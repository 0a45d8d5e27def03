//! Fixtures and a TLS handshake between rustls peers, in memory.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use pki::{ClusterNames, IssueOptions, Lifetimes, Serials};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, ClientConnection, RootCertStore, ServerConfig, ServerConnection};

/// A cluster as aws-operator names it (ids and domains deliberately unlike kvm's).
pub fn aws_names() -> ClusterNames {
    ClusterNames {
        cluster_id: "al9qy".into(),
        api_domain: "api.al9qy.k8s.gauss.eu-central-1.aws.gigantic.io".into(),
        internal_api_domain: Some("internal-api.al9qy.k8s.gauss.eu-central-1.aws.gigantic.io".into()),
        etcd_domain: "etcd.al9qy.k8s.gauss.eu-central-1.aws.gigantic.io".into(),
        etcd_member_domains: vec![
            "etcd0.al9qy.k8s.gauss.eu-central-1.aws.gigantic.io".into(),
            "etcd1.al9qy.k8s.gauss.eu-central-1.aws.gigantic.io".into(),
        ],
        cluster_domain: "cluster.local".into(),
        service_cidr: "172.31.0.0/16".into(),
    }
}

/// 2026-03-01T00:00:00Z.
pub const NOW_SECS: u64 = 1_772_323_200;

pub mod node;

pub fn now() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(NOW_SECS)
}

/// Issue at [`now`] with serials from 100 and the default lifetimes.
pub fn fixed_options() -> IssueOptions {
    IssueOptions { now: now(), lifetimes: Lifetimes::default(), serials: Serials::Sequential { first: 100 } }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn certs(pem: &str) -> Vec<CertificateDer<'static>> {
    CertificateDer::pem_slice_iter(pem.as_bytes()).collect::<Result<_, _>>().expect("PEM certificates")
}

fn key(pem: &str) -> PrivateKeyDer<'static> {
    PrivateKeyDer::from_pem_slice(pem.as_bytes()).expect("PEM key")
}

fn roots(ca_pem: &str) -> Arc<RootCertStore> {
    let mut roots = RootCertStore::empty();
    for cert in certs(ca_pem) {
        roots.add(cert).expect("CA certificate");
    }
    Arc::new(roots)
}

/// A TLS server presenting `crt`/`key`; with `client_ca`, it requires a client certificate
/// that CA issued.
pub struct Server<'a> {
    pub crt: &'a str,
    pub key: &'a str,
    pub client_ca: Option<&'a str>,
}

/// A TLS client trusting `ca`, connecting to `name`, presenting `identity` if any.
pub struct Client<'a> {
    pub ca: &'a str,
    pub name: &'a str,
    pub identity: Option<(&'a str, &'a str)>,
}

/// A full TLS 1.2/1.3 handshake between the two, in memory; the first error either side
/// raises.
pub fn handshake(server: &Server<'_>, client: &Client<'_>) -> Result<(), rustls::Error> {
    let server_builder = ServerConfig::builder_with_provider(provider()).with_safe_default_protocol_versions()?;
    let server_builder = match server.client_ca {
        Some(ca) => server_builder.with_client_cert_verifier(
            WebPkiClientVerifier::builder_with_provider(roots(ca), provider()).build().expect("verifier"),
        ),
        None => server_builder.with_no_client_auth(),
    };
    let server_config = server_builder.with_single_cert(certs(server.crt), key(server.key))?;

    let client_builder = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots(client.ca));
    let client_config = match client.identity {
        Some((crt, k)) => client_builder.with_client_auth_cert(certs(crt), key(k))?,
        None => client_builder.with_no_client_auth(),
    };
    let name = ServerName::try_from(client.name.to_string()).expect("server name");
    let mut c = ClientConnection::new(Arc::new(client_config), name)?;
    let mut s = ServerConnection::new(Arc::new(server_config))?;
    for _ in 0..20 {
        let mut moved = false;
        let mut buf = Vec::new();
        while c.wants_write() {
            c.write_tls(&mut buf).expect("client write");
        }
        if !buf.is_empty() {
            moved = true;
            s.read_tls(&mut buf.as_slice()).expect("server read");
            s.process_new_packets()?;
        }
        let mut buf = Vec::new();
        while s.wants_write() {
            s.write_tls(&mut buf).expect("server write");
        }
        if !buf.is_empty() {
            moved = true;
            c.read_tls(&mut buf.as_slice()).expect("client read");
            c.process_new_packets()?;
        }
        if !c.is_handshaking() && !s.is_handshaking() && !moved {
            return Ok(());
        }
    }
    panic!("the handshake did not finish");
}

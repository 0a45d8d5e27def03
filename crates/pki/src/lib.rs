//! The per-cluster PKI of a workload cluster: what cert-operator and Vault used to provide, as
//! pure functions.
//!
//! - Two certificate authorities per cluster: the **cluster CA** (the API server, kubelets and
//!   every Kubernetes client) and a separate **etcd CA** (etcd's server, peer and client
//!   certificates), so that a certificate trusted by the API server is never trusted by etcd.
//! - The leaf certificates the node configs of both operators name ([`CERTIFICATES`]), each with
//!   the names and key usages of its role ([`leaf_profiles`]): `api`, `etcd`, `worker`,
//!   `calico-etcd-client` and `service-account` (whose key pair signs and verifies service-account
//!   tokens).
//! - The API server's encryption key ([`EncryptionKey`]) and its `EncryptionConfiguration`.
//! - The Secrets that carry them, in cert-operator's format (`<id>-<cert>`, labels
//!   `giantswarm.io/cluster` and `giantswarm.io/certificate`, keys `ca`, `crt`, `key`), so that
//!   every reader stays as it is and clusters whose Secrets cert-operator writes keep working
//!   ([`secret`]).
//! - Renewal as a decision ([`renewal`]) and validation of a Secret someone else wrote ([`check`]).
//! - The management cluster's kubeconfig `<id>-kubeconfig` ([`kubeconfig`]), on a client
//!   certificate of the cluster CA for the narrow identity the masters bind
//!   ([`ignition::access`]).
//! - The service-account issuer of IAM roles for service accounts ([`service_account_v2`]): the
//!   signing key pair `<id>-service-account-v2`, and the OpenID Connect discovery document and
//!   JWKS its public key is published with.
//! - What an operator writes for a cluster, given its Secrets as they are ([`ensure::plan`]):
//!   only what is missing or due, never a Secret someone else wrote, never a second CA or key.
//!
//! Nothing here reads a clock, the network or a file: the time and the serial numbers come in
//! as [`IssueOptions`], so that tests get the same certificate fields on every run. Only the key
//! pairs and the encryption key come from the operating system's random source (through `ring`).
//!
//! Private keys are held in [`PrivateKey`] and [`EncryptionKey`], whose `Debug` prints `***`;
//! no error message of this crate carries key material.
//!
//! ```
//! use std::time::SystemTime;
//! let names = pki::ClusterNames {
//!     cluster_id: "al9qy".into(),
//!     api_domain: "api.al9qy.k8s.example.com".into(),
//!     internal_api_domain: Some("internal-api.al9qy.k8s.example.com".into()),
//!     etcd_domain: "etcd.al9qy.k8s.example.com".into(),
//!     etcd_member_domains: vec!["etcd0.al9qy.k8s.example.com".into()],
//!     cluster_domain: "cluster.local".into(),
//!     service_cidr: "172.31.0.0/16".into(),
//! };
//! let pki = pki::issue_cluster_pki(&names, &pki::IssueOptions::at(SystemTime::now()))?;
//! let secrets = pki.secrets("org-umbra", &names.cluster_id);
//! assert_eq!(secrets.len(), pki::CERTIFICATES.len() + 2); // five certificates and two CAs
//! # Ok::<(), pki::PkiError>(())
//! ```

#![forbid(unsafe_code)]

mod check;
mod encryption;
pub mod ensure;
mod issue;
pub mod kubeconfig;
mod names;
mod renewal;
pub mod secret;
pub mod service_account_v2;

pub use check::{CertificateFiles, CertificateProblem, check, check_authority};
pub use encryption::{EncryptionKey, encryption_configuration};
pub use issue::{
    Authority, CertificateAuthority, ClusterPki, IssueOptions, IssuedCertificate, LeafProfile, Lifetimes, PrivateKey,
    Serials, Usage, issue_cluster_pki, leaf_profiles,
};
pub use names::ClusterNames;
pub use renewal::{CertificateInfo, Renewal, RenewalPolicy, inspect, renewal};

/// The API server's serving certificate, also the control plane's client certificate.
pub const API: &str = "api";
/// etcd's server and peer certificate, also the API server's etcd client certificate.
pub const ETCD: &str = "etcd";
/// kubelet's and kube-proxy's certificate (client, and kubelet's serving certificate).
pub const WORKER: &str = "worker";
/// Calico's etcd client certificate.
pub const CALICO_ETCD_CLIENT: &str = "calico-etcd-client";
/// The service-account token signing key pair, as a certificate of the cluster CA.
pub const SERVICE_ACCOUNT: &str = "service-account";
/// Every leaf certificate of a cluster, by its cert-operator name.
pub const CERTIFICATES: [&str; 5] = [API, CALICO_ETCD_CLIENT, ETCD, SERVICE_ACCOUNT, WORKER];

/// Why a PKI cannot be issued or read. No variant carries key material.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PkiError {
    /// The Service CIDR does not parse, so the API server's Service address is unknown.
    #[error("the Service CIDR {cidr:?} is not an IP network: {reason}")]
    ServiceCidr {
        /// The CIDR given.
        cidr: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A name that must go into a certificate is empty or not a DNS name.
    #[error("{field} {value:?} cannot go into a certificate: {reason}")]
    Name {
        /// The field of [`ClusterNames`].
        field: &'static str,
        /// Its value.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The cryptographic library refused to generate or sign.
    #[error("issuing {what}: {reason}")]
    Issue {
        /// What was being issued.
        what: String,
        /// The library's reason (never key material).
        reason: String,
    },
    /// A CA certificate or key read back from a Secret is unusable.
    #[error("the {authority} CA: {problem}")]
    Authority {
        /// `cluster` or `etcd`.
        authority: &'static str,
        /// What is wrong.
        problem: CertificateProblem,
    },
    /// The operating system's random source failed.
    #[error("the random source failed")]
    Random,
}

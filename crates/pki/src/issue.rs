//! Issuing: the two CAs and the leaf certificates, with ECDSA P-256 keys.
//!
//! ECDSA rather than RSA: `ring` signs with RSA keys but cannot generate them, and every
//! consumer here (etcd, kube-apiserver's serving, client and service-account keys, kubelet,
//! calico) accepts P-256 keys in PKCS#8 PEM (`PRIVATE KEY`).

use std::fmt;
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, SystemTime};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType, SerialNumber,
};
use time::OffsetDateTime;

use crate::check::{CertificateProblem, check_authority};
use crate::{API, CALICO_ETCD_CLIENT, ClusterNames, ETCD, PkiError, SERVICE_ACCOUNT, WORKER};

/// A private key in PEM (PKCS#8 for the keys issued here). `Debug` prints `***`.
#[derive(Clone, PartialEq, Eq)]
pub struct PrivateKey(String);

impl PrivateKey {
    /// Wrap a PEM private key.
    pub fn from_pem(pem: impl Into<String>) -> Self {
        Self(pem.into())
    }

    /// The PEM text. For writing it to a Secret or a file only; never log it.
    pub fn expose_pem(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for PrivateKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PrivateKey(***)")
    }
}

/// Which CA signs a certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Authority {
    /// The cluster CA: the API server, kubelets, Kubernetes clients, service accounts.
    Cluster,
    /// The etcd CA: etcd's server, peer and client certificates.
    Etcd,
}

impl Authority {
    /// `cluster` or `etcd`.
    pub fn as_str(self) -> &'static str {
        match self {
            Authority::Cluster => "cluster",
            Authority::Etcd => "etcd",
        }
    }
}

/// What a certificate may be used for: its extended key usages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Usage {
    /// TLS server only.
    Server,
    /// TLS client only.
    Client,
    /// Both, for a component that serves and also calls others with the same certificate.
    ServerAndClient,
}

impl Usage {
    /// Whether a TLS server may present it.
    pub fn server(self) -> bool {
        matches!(self, Usage::Server | Usage::ServerAndClient)
    }

    /// Whether a TLS client may present it.
    pub fn client(self) -> bool {
        matches!(self, Usage::Client | Usage::ServerAndClient)
    }
}

/// One leaf certificate: its name, issuer, usages, subject and alternative names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeafProfile {
    /// The cert-operator name ([`CERTIFICATES`](crate::CERTIFICATES)).
    pub name: String,
    /// The CA that signs it.
    pub authority: Authority,
    /// Server, client or both.
    pub usage: Usage,
    /// The subject's common name (a Kubernetes client's user name).
    pub common_name: String,
    /// The subject's organizations (a Kubernetes client's groups).
    pub organizations: Vec<String>,
    /// DNS subject alternative names.
    pub dns_names: Vec<String>,
    /// IP subject alternative names.
    pub ip_addresses: Vec<IpAddr>,
}

const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// The leaf certificates of a cluster, in [`CERTIFICATES`](crate::CERTIFICATES) order:
///
/// | name | CA | usage | subject | names |
/// | --- | --- | --- | --- | --- |
/// | `api` | cluster | server and client | CN api domain, O `system:masters` | API domains, `kubernetes`, `kubernetes.default`, `kubernetes.default.svc`, `kubernetes.default.svc.<cluster domain>`, `localhost`, the first Service address, `127.0.0.1` |
/// | `calico-etcd-client` | etcd | client | CN `calico-etcd-client` | none |
/// | `etcd` | etcd | server and client | CN etcd domain | etcd domain, member domains, `localhost`, `127.0.0.1` |
/// | `service-account` | cluster | client | CN `service-account` | none |
/// | `worker` | cluster | server and client | CN `worker.<cluster id>`, O `system:nodes` | `localhost`, `127.0.0.1` |
///
/// `api` is both because the controller manager and the scheduler, and the API server towards
/// kubelets, present it as their client certificate; `etcd` because the API server presents it
/// to etcd (`--etcd-certfile`) and the members to each other; `worker` because kubelet serves
/// with it and kubelet and kube-proxy present it to the API server.
pub fn leaf_profiles(names: &ClusterNames) -> Result<Vec<LeafProfile>, PkiError> {
    names.validate()?;
    let service_ip = names.api_service_ip()?;
    let leaf = |name: &str, authority, usage, common_name: String, organizations: &[&str]| LeafProfile {
        name: name.to_string(),
        authority,
        usage,
        common_name,
        organizations: organizations.iter().map(|o| o.to_string()).collect(),
        dns_names: Vec::new(),
        ip_addresses: Vec::new(),
    };
    Ok(vec![
        LeafProfile {
            dns_names: names.api_dns_names(),
            ip_addresses: vec![service_ip, LOOPBACK],
            ..leaf(API, Authority::Cluster, Usage::ServerAndClient, names.api_domain.clone(), &["system:masters"])
        },
        leaf(CALICO_ETCD_CLIENT, Authority::Etcd, Usage::Client, CALICO_ETCD_CLIENT.into(), &[]),
        LeafProfile {
            dns_names: names.etcd_dns_names(),
            ip_addresses: vec![LOOPBACK],
            ..leaf(ETCD, Authority::Etcd, Usage::ServerAndClient, names.etcd_domain.clone(), &[])
        },
        leaf(SERVICE_ACCOUNT, Authority::Cluster, Usage::Client, SERVICE_ACCOUNT.into(), &[]),
        LeafProfile {
            dns_names: vec!["localhost".into()],
            ip_addresses: vec![LOOPBACK],
            ..leaf(
                WORKER,
                Authority::Cluster,
                Usage::ServerAndClient,
                format!("worker.{}", names.cluster_id),
                &["system:nodes"],
            )
        },
    ])
}

/// How long certificates are valid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lifetimes {
    /// A CA's lifetime; default ten years.
    pub ca: Duration,
    /// A leaf's lifetime; default one year.
    pub leaf: Duration,
}

const DAY: Duration = Duration::from_secs(24 * 3600);

impl Default for Lifetimes {
    fn default() -> Self {
        Self { ca: DAY * 3650, leaf: DAY * 365 }
    }
}

/// Where serial numbers come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Serials {
    /// 16 random bytes each (RFC 5280 allows 20; the top bit is cleared to keep them positive).
    Random,
    /// `first`, `first + 1`, … in issuing order, for tests that compare certificates.
    Sequential {
        /// The first serial number.
        first: u64,
    },
}

/// The time and serial numbers of an issuance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IssueOptions {
    /// The moment of issuance; certificates are valid from five minutes before it, for clocks
    /// that run behind.
    pub now: SystemTime,
    /// The lifetimes.
    pub lifetimes: Lifetimes,
    /// The serial numbers.
    pub serials: Serials,
}

/// How far back `not_before` goes from the moment of issuance.
pub(crate) const BACKDATE: Duration = Duration::from_secs(300);

impl IssueOptions {
    /// Issue at `now` with the default lifetimes and random serial numbers.
    pub fn at(now: SystemTime) -> Self {
        Self { now, lifetimes: Lifetimes::default(), serials: Serials::Random }
    }

    fn serial(&self, index: u64) -> Result<SerialNumber, PkiError> {
        match self.serials {
            Serials::Sequential { first } => Ok(SerialNumber::from(first.wrapping_add(index))),
            Serials::Random => {
                let mut bytes = [0u8; 16];
                ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes)
                    .map_err(|_| PkiError::Random)?;
                bytes[0] &= 0x7f;
                bytes[0] |= 0x01; // never a leading zero byte, so the DER length is fixed
                Ok(SerialNumber::from_slice(&bytes))
            }
        }
    }

    fn validity(&self, lifetime: Duration, what: &str) -> Result<(OffsetDateTime, OffsetDateTime), PkiError> {
        let start = self.now.checked_sub(BACKDATE).ok_or_else(|| issue_error(what, "the time is before 1970"))?;
        let end = self.now.checked_add(lifetime).ok_or_else(|| issue_error(what, "the lifetime is too long"))?;
        Ok((OffsetDateTime::from(start), OffsetDateTime::from(end)))
    }
}

fn issue_error(what: &str, reason: impl fmt::Display) -> PkiError {
    PkiError::Issue { what: what.to_string(), reason: reason.to_string() }
}

/// A CA: its certificate and private key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertificateAuthority {
    authority: Authority,
    cert_pem: String,
    key: PrivateKey,
}

impl CertificateAuthority {
    /// A new self-signed CA for `cluster_id`, CN `<cluster id> <cluster|etcd> CA`, valid for
    /// [`Lifetimes::ca`], allowed to sign certificates only (path length 0).
    pub fn generate(
        authority: Authority,
        cluster_id: &str,
        options: &IssueOptions,
        serial: u64,
    ) -> Result<Self, PkiError> {
        let what = format!("the {} CA", authority.as_str());
        let key = KeyPair::generate().map_err(|e| issue_error(&what, e))?;
        let mut params = CertificateParams::default();
        params.distinguished_name = DistinguishedName::new();
        params.distinguished_name.push(DnType::CommonName, format!("{cluster_id} {} CA", authority.as_str()));
        params.distinguished_name.push(DnType::OrganizationName, "giantswarm.io");
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages =
            vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
        (params.not_before, params.not_after) = options.validity(options.lifetimes.ca, &what)?;
        params.serial_number = Some(options.serial(serial)?);
        let cert = params.self_signed(&key).map_err(|e| issue_error(&what, e))?;
        Ok(Self { authority, cert_pem: cert.pem(), key: PrivateKey(key.serialize_pem()) })
    }

    /// A CA read back from its Secret: the certificate must be a CA certificate and the key
    /// its key.
    pub fn from_pem(authority: Authority, cert_pem: &str, key_pem: &str) -> Result<Self, PkiError> {
        check_authority(cert_pem, key_pem)
            .map_err(|problem| PkiError::Authority { authority: authority.as_str(), problem })?;
        Ok(Self { authority, cert_pem: cert_pem.to_string(), key: PrivateKey(key_pem.to_string()) })
    }

    /// Which CA this is.
    pub fn authority(&self) -> Authority {
        self.authority
    }

    /// The CA certificate, PEM: what clients and servers trust.
    pub fn certificate_pem(&self) -> &str {
        &self.cert_pem
    }

    /// The CA's private key.
    pub fn private_key(&self) -> &PrivateKey {
        &self.key
    }

    /// Issue the leaf `profile` (which must name this CA) with a new key pair, valid for
    /// [`Lifetimes::leaf`].
    pub fn issue(
        &self,
        profile: &LeafProfile,
        options: &IssueOptions,
        serial: u64,
    ) -> Result<IssuedCertificate, PkiError> {
        let what = format!("certificate {}", profile.name);
        if profile.authority != self.authority {
            return Err(issue_error(
                &what,
                format!("it belongs to the {} CA, not the {} CA", profile.authority.as_str(), self.authority.as_str()),
            ));
        }
        let ca_key = KeyPair::from_pem(self.key.expose_pem()).map_err(|_| PkiError::Authority {
            authority: self.authority.as_str(),
            problem: CertificateProblem::UnreadableKey,
        })?;
        let issuer = Issuer::from_ca_cert_pem(&self.cert_pem, ca_key).map_err(|_| PkiError::Authority {
            authority: self.authority.as_str(),
            problem: CertificateProblem::Unreadable { field: "crt" },
        })?;

        let key = KeyPair::generate().map_err(|e| issue_error(&what, e))?;
        let mut params = CertificateParams::default();
        params.distinguished_name = DistinguishedName::new();
        params.distinguished_name.push(DnType::CommonName, profile.common_name.clone());
        for organization in &profile.organizations {
            params.distinguished_name.push(DnType::OrganizationName, organization.clone());
        }
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        if profile.usage.server() {
            params.extended_key_usages.push(ExtendedKeyUsagePurpose::ServerAuth);
        }
        if profile.usage.client() {
            params.extended_key_usages.push(ExtendedKeyUsagePurpose::ClientAuth);
        }
        for name in &profile.dns_names {
            let name = name.clone().try_into().map_err(|e| issue_error(&what, e))?;
            params.subject_alt_names.push(SanType::DnsName(name));
        }
        params.subject_alt_names.extend(profile.ip_addresses.iter().copied().map(SanType::IpAddress));
        params.use_authority_key_identifier_extension = true;
        (params.not_before, params.not_after) = options.validity(options.lifetimes.leaf, &what)?;
        params.serial_number = Some(options.serial(serial)?);
        let cert = params.signed_by(&key, &issuer).map_err(|e| issue_error(&what, e))?;
        Ok(IssuedCertificate {
            name: profile.name.clone(),
            ca_pem: self.cert_pem.clone(),
            crt_pem: cert.pem(),
            key: PrivateKey(key.serialize_pem()),
        })
    }
}

/// A leaf certificate as cert-operator stores it: the CA, the certificate and its key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuedCertificate {
    /// The cert-operator name.
    pub name: String,
    /// The issuing CA's certificate, PEM (key `ca`).
    pub ca_pem: String,
    /// The certificate, PEM (key `crt`).
    pub crt_pem: String,
    /// Its private key, PEM (key `key`).
    pub key: PrivateKey,
}

/// A cluster's whole PKI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterPki {
    /// The cluster CA.
    pub cluster_ca: CertificateAuthority,
    /// The etcd CA.
    pub etcd_ca: CertificateAuthority,
    /// The leaf certificates, in [`CERTIFICATES`](crate::CERTIFICATES) order.
    pub certificates: Vec<IssuedCertificate>,
}

impl ClusterPki {
    /// The leaf certificate `name`.
    pub fn certificate(&self, name: &str) -> Option<&IssuedCertificate> {
        self.certificates.iter().find(|c| c.name == name)
    }

    /// The CA of `authority`.
    pub fn authority(&self, authority: Authority) -> &CertificateAuthority {
        match authority {
            Authority::Cluster => &self.cluster_ca,
            Authority::Etcd => &self.etcd_ca,
        }
    }
}

/// Issue a cluster's two CAs and every leaf of [`leaf_profiles`]. With
/// [`Serials::Sequential`], the cluster CA takes the first serial, the etcd CA the second and
/// the leaves the following ones in order.
pub fn issue_cluster_pki(names: &ClusterNames, options: &IssueOptions) -> Result<ClusterPki, PkiError> {
    let profiles = leaf_profiles(names)?;
    let cluster_ca = CertificateAuthority::generate(Authority::Cluster, &names.cluster_id, options, 0)?;
    let etcd_ca = CertificateAuthority::generate(Authority::Etcd, &names.cluster_id, options, 1)?;
    let mut pki = ClusterPki { cluster_ca, etcd_ca, certificates: Vec::with_capacity(profiles.len()) };
    for (index, profile) in profiles.iter().enumerate() {
        let issued = pki.authority(profile.authority).issue(profile, options, 2 + index as u64)?;
        pki.certificates.push(issued);
    }
    Ok(pki)
}

//! Reading a certificate back (with `x509-parser`, independent of the issuer) and deciding when
//! to renew it.

use std::net::IpAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use x509_parser::extensions::GeneralName;
use x509_parser::prelude::{FromDer, X509Certificate};

use crate::check::CertificateProblem;

/// What the renewal decision and the checks need from a certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertificateInfo {
    /// The subject's common name, if any.
    pub common_name: Option<String>,
    /// The subject's organizations.
    pub organizations: Vec<String>,
    /// Start of validity.
    pub not_before: SystemTime,
    /// End of validity.
    pub not_after: SystemTime,
    /// DNS subject alternative names.
    pub dns_names: Vec<String>,
    /// IP subject alternative names.
    pub ip_addresses: Vec<IpAddr>,
    /// A CA certificate (basic constraints `CA:TRUE`).
    pub is_ca: bool,
    /// Extended key usage `serverAuth` (or no extended key usage at all, which allows any).
    pub server_auth: bool,
    /// Extended key usage `clientAuth` (or no extended key usage at all, which allows any).
    pub client_auth: bool,
    /// The serial number, lower-case hex.
    pub serial: String,
}

/// The DER of the first `CERTIFICATE` block of `pem`.
pub(crate) fn certificate_der(pem: &str, field: &'static str) -> Result<Vec<u8>, CertificateProblem> {
    let (_, block) =
        x509_parser::pem::parse_x509_pem(pem.as_bytes()).map_err(|_| CertificateProblem::Unreadable { field })?;
    if block.label != "CERTIFICATE" {
        return Err(CertificateProblem::Unreadable { field });
    }
    Ok(block.contents)
}

pub(crate) fn parse<'a>(der: &'a [u8], field: &'static str) -> Result<X509Certificate<'a>, CertificateProblem> {
    X509Certificate::from_der(der).map(|(_, cert)| cert).map_err(|_| CertificateProblem::Unreadable { field })
}

fn system_time(timestamp: i64) -> SystemTime {
    if timestamp >= 0 {
        UNIX_EPOCH + Duration::from_secs(timestamp as u64)
    } else {
        UNIX_EPOCH - Duration::from_secs(timestamp.unsigned_abs())
    }
}

pub(crate) fn info_of(cert: &X509Certificate<'_>, field: &'static str) -> Result<CertificateInfo, CertificateProblem> {
    let unreadable = || CertificateProblem::Unreadable { field };
    let mut dns_names = Vec::new();
    let mut ip_addresses = Vec::new();
    if let Some(san) = cert.subject_alternative_name().map_err(|_| unreadable())? {
        for name in &san.value.general_names {
            match name {
                GeneralName::DNSName(dns) => dns_names.push(dns.to_string()),
                GeneralName::IPAddress(bytes) => match bytes.len() {
                    4 => ip_addresses.push(IpAddr::from(<[u8; 4]>::try_from(*bytes).map_err(|_| unreadable())?)),
                    16 => ip_addresses.push(IpAddr::from(<[u8; 16]>::try_from(*bytes).map_err(|_| unreadable())?)),
                    _ => return Err(unreadable()),
                },
                _ => {}
            }
        }
    }
    let (server_auth, client_auth) = match cert.extended_key_usage().map_err(|_| unreadable())? {
        Some(eku) => (eku.value.any || eku.value.server_auth, eku.value.any || eku.value.client_auth),
        None => (true, true),
    };
    let subject = cert.subject();
    Ok(CertificateInfo {
        common_name: subject.iter_common_name().next().and_then(|cn| cn.as_str().ok()).map(str::to_string),
        organizations: subject.iter_organization().filter_map(|o| o.as_str().ok()).map(str::to_string).collect(),
        not_before: system_time(cert.validity().not_before.timestamp()),
        not_after: system_time(cert.validity().not_after.timestamp()),
        dns_names,
        ip_addresses,
        is_ca: cert.is_ca(),
        server_auth,
        client_auth,
        serial: cert.raw_serial().iter().map(|b| format!("{b:02x}")).collect(),
    })
}

/// Read a PEM certificate.
pub fn inspect(crt_pem: &str) -> Result<CertificateInfo, CertificateProblem> {
    let der = certificate_der(crt_pem, "crt")?;
    info_of(&parse(&der, "crt")?, "crt")
}

/// When a leaf is renewed: once `numerator / denominator` of its lifetime has passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RenewalPolicy {
    /// The share's numerator.
    pub numerator: u32,
    /// The share's denominator (not 0).
    pub denominator: u32,
}

impl Default for RenewalPolicy {
    /// Renew at two thirds of the lifetime: a one-year certificate four months before it expires.
    fn default() -> Self {
        Self { numerator: 2, denominator: 3 }
    }
}

impl RenewalPolicy {
    /// The moment a certificate valid from `not_before` to `not_after` is due.
    pub fn renew_at(&self, not_before: SystemTime, not_after: SystemTime) -> SystemTime {
        let lifetime = not_after.duration_since(not_before).unwrap_or_default();
        let denominator = self.denominator.max(1);
        let numerator = self.numerator.min(denominator);
        let share = lifetime.as_secs_f64() * f64::from(numerator) / f64::from(denominator);
        not_before + Duration::from_secs_f64(share)
    }
}

/// Whether a certificate needs renewing now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Renewal {
    /// Not yet: look again at `renew_at`.
    NotYet {
        /// When it becomes due.
        renew_at: SystemTime,
    },
    /// The share of its lifetime has passed: issue a new one now.
    Due,
    /// Past its end: issue a new one now; until the nodes have it, its users fail.
    Expired,
}

/// The renewal decision for `info` at `now`.
pub fn renewal(info: &CertificateInfo, now: SystemTime, policy: &RenewalPolicy) -> Renewal {
    if now >= info.not_after {
        return Renewal::Expired;
    }
    let renew_at = policy.renew_at(info.not_before, info.not_after);
    if now >= renew_at { Renewal::Due } else { Renewal::NotYet { renew_at } }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(not_before: u64, not_after: u64) -> CertificateInfo {
        CertificateInfo {
            common_name: None,
            organizations: Vec::new(),
            not_before: UNIX_EPOCH + Duration::from_secs(not_before),
            not_after: UNIX_EPOCH + Duration::from_secs(not_after),
            dns_names: Vec::new(),
            ip_addresses: Vec::new(),
            is_ca: false,
            server_auth: true,
            client_auth: true,
            serial: String::new(),
        }
    }

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    #[test]
    fn a_certificate_is_renewed_at_two_thirds_of_its_lifetime_by_default() {
        let cert = info(3_000, 3_900);
        let policy = RenewalPolicy::default();
        assert_eq!(renewal(&cert, at(3_000), &policy), Renewal::NotYet { renew_at: at(3_600) });
        assert_eq!(renewal(&cert, at(3_599), &policy), Renewal::NotYet { renew_at: at(3_600) });
        assert_eq!(renewal(&cert, at(3_600), &policy), Renewal::Due);
        assert_eq!(renewal(&cert, at(3_899), &policy), Renewal::Due);
        assert_eq!(renewal(&cert, at(3_900), &policy), Renewal::Expired);
    }

    #[test]
    fn the_share_is_configurable() {
        let cert = info(0, 1_000);
        let half = RenewalPolicy { numerator: 1, denominator: 2 };
        assert_eq!(renewal(&cert, at(499), &half), Renewal::NotYet { renew_at: at(500) });
        assert_eq!(renewal(&cert, at(500), &half), Renewal::Due);
        // A share above one is held at one: due only when expired.
        let beyond = RenewalPolicy { numerator: 5, denominator: 4 };
        assert_eq!(renewal(&cert, at(999), &beyond), Renewal::NotYet { renew_at: at(1_000) });
        assert_eq!(renewal(&cert, at(1_000), &beyond), Renewal::Expired);
    }
}

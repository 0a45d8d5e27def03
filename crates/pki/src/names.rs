//! The names a cluster's certificates are issued for.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::PkiError;

/// Everything about a cluster that goes into its certificates' names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterNames {
    /// The workload cluster id (the certificates' Secrets are `<id>-<cert>`).
    pub cluster_id: String,
    /// The public API host, e.g. `api.<id>.k8s.<domain>`.
    pub api_domain: String,
    /// The API host inside the cluster's network (AWS: `internal-api.<id>.k8s.<domain>`); none
    /// where the provider has no such name.
    pub internal_api_domain: Option<String>,
    /// The etcd host the API servers use, e.g. `etcd.<id>.k8s.<domain>`.
    pub etcd_domain: String,
    /// The names etcd members advertise to their peers and clients (AWS:
    /// `etcd<n>.<id>.k8s.<domain>`); empty where the members use loopback only.
    pub etcd_member_domains: Vec<String>,
    /// The cluster's DNS domain, usually `cluster.local`.
    pub cluster_domain: String,
    /// The Service CIDR; its first address is the `kubernetes` Service's.
    pub service_cidr: String,
}

impl ClusterNames {
    /// The address of the `kubernetes` Service: the first address of the Service CIDR.
    pub fn api_service_ip(&self) -> Result<IpAddr, PkiError> {
        first_address(&self.service_cidr)
    }

    /// The DNS names of the API server's certificate: the API domains, then the in-cluster
    /// names of the `kubernetes` Service, then `localhost`.
    pub fn api_dns_names(&self) -> Vec<String> {
        let mut names = vec![self.api_domain.clone()];
        names.extend(self.internal_api_domain.iter().cloned());
        names.extend([
            "kubernetes".to_string(),
            "kubernetes.default".to_string(),
            "kubernetes.default.svc".to_string(),
            format!("kubernetes.default.svc.{}", self.cluster_domain),
            "localhost".to_string(),
        ]);
        names
    }

    /// The DNS names of etcd's certificate: the etcd domain, each member's, then `localhost`.
    pub fn etcd_dns_names(&self) -> Vec<String> {
        let mut names = vec![self.etcd_domain.clone()];
        names.extend(self.etcd_member_domains.iter().cloned());
        names.push("localhost".to_string());
        names
    }

    /// Every name is a usable DNS name and the Service CIDR parses.
    pub(crate) fn validate(&self) -> Result<(), PkiError> {
        let mut fields: Vec<(&'static str, &str)> = vec![
            ("cluster_id", &self.cluster_id),
            ("api_domain", &self.api_domain),
            ("etcd_domain", &self.etcd_domain),
            ("cluster_domain", &self.cluster_domain),
        ];
        if let Some(internal) = &self.internal_api_domain {
            fields.push(("internal_api_domain", internal));
        }
        for member in &self.etcd_member_domains {
            fields.push(("etcd_member_domains", member));
        }
        for (field, value) in fields {
            if let Err(reason) = dns_name(value) {
                return Err(PkiError::Name { field, value: value.to_string(), reason });
            }
        }
        self.api_service_ip().map(drop)
    }
}

/// A DNS name of letters, digits, `-` and `.`, in labels of 1–63 characters.
fn dns_name(value: &str) -> Result<(), String> {
    if value.is_empty() || value.len() > 253 {
        return Err("a DNS name has 1 to 253 characters".into());
    }
    for label in value.split('.') {
        if label.is_empty() || label.len() > 63 {
            return Err("every label between dots has 1 to 63 characters".into());
        }
        if !label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') || label.starts_with('-') {
            return Err("only letters, digits and '-' (not first) are allowed".into());
        }
    }
    Ok(())
}

/// The first usable address of `cidr` (the network address plus one), IPv4 or IPv6.
fn first_address(cidr: &str) -> Result<IpAddr, PkiError> {
    let bad = |reason: &str| PkiError::ServiceCidr { cidr: cidr.to_string(), reason: reason.to_string() };
    let (address, prefix) = cidr.split_once('/').ok_or_else(|| bad("expected <address>/<prefix length>"))?;
    let address: IpAddr = address.parse().map_err(|_| bad("the address does not parse"))?;
    let prefix: u32 = prefix.parse().map_err(|_| bad("the prefix length is not a number"))?;
    match address {
        IpAddr::V4(v4) => {
            if prefix > 30 {
                return Err(bad("an IPv4 Service CIDR needs a prefix length of at most 30"));
            }
            let mask = u32::MAX.checked_shl(32 - prefix).unwrap_or(0);
            Ok(IpAddr::V4(Ipv4Addr::from((u32::from(v4) & mask) + 1)))
        }
        IpAddr::V6(v6) => {
            if prefix > 126 {
                return Err(bad("an IPv6 Service CIDR needs a prefix length of at most 126"));
            }
            let mask = u128::MAX.checked_shl(128 - prefix).unwrap_or(0);
            Ok(IpAddr::V6(Ipv6Addr::from((u128::from(v6) & mask) + 1)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_api_service_address_is_the_first_of_the_service_range() {
        for (cidr, first) in [
            ("172.31.0.0/16", "172.31.0.1"),
            ("10.96.0.0/12", "10.96.0.1"),
            ("10.96.5.7/12", "10.96.0.1"),
            ("192.168.10.0/24", "192.168.10.1"),
            ("0.0.0.0/0", "0.0.0.1"),
            ("fd00:10:96::/112", "fd00:10:96::1"),
        ] {
            assert_eq!(first_address(cidr).expect(cidr).to_string(), first, "{cidr}");
        }
        for cidr in ["172.31.0.0", "172.31.0.0/x", "300.1.1.1/16", "10.0.0.0/31", ""] {
            assert!(matches!(first_address(cidr), Err(PkiError::ServiceCidr { .. })), "{cidr}");
        }
    }

    #[test]
    fn names_that_cannot_be_certificate_names_are_refused() {
        for bad in ["", "api..example.com", "api.exa mple.com", "-api.example.com", "api/x"] {
            assert!(dns_name(bad).is_err(), "{bad:?}");
        }
        for good in ["api.al9qy.k8s.example.com", "kubernetes", "etcd-0.x1"] {
            assert!(dns_name(good).is_ok(), "{good}");
        }
    }
}

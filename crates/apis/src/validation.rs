//! What every kind's `validate` shares: [`FieldError`], the IPv4 CIDR pattern of the schemas and
//! the CIDR check the pattern cannot make.
//!
//! A schema answers bad input with a 422 before anything is stored; a `validate` function checks
//! what needs more than one field or more than a pattern, and returns every problem at once,
//! each naming the field, the value and the fix.

use std::fmt;
use std::net::Ipv4Addr;

/// An IPv4 CIDR block: four octets of 0–255 and a prefix length of 0–32, e.g. `10.1.0.0/16`.
/// Whether the host bits are zero is checked by the `validate` functions, not the pattern.
pub const CIDR_PATTERN: &str = r"^((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])/(3[0-2]|[12]?[0-9])$";

/// A problem with one field that a schema cannot express, with a message that says how to fix it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    /// The field path, e.g. `spec.provider.availabilityZones[1]`.
    pub field: String,
    /// The offending value, as written.
    pub value: String,
    /// What is wrong and how to fix it.
    pub message: String,
}

impl FieldError {
    pub(crate) fn new(field: impl Into<String>, value: impl fmt::Display, message: impl Into<String>) -> Self {
        Self { field: field.into(), value: value.to_string(), message: message.into() }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: invalid value {:?}: {}", self.field, self.value, self.message)
    }
}

impl std::error::Error for FieldError {}

/// `Ok` when nothing was found, else every problem.
pub(crate) fn into_result(errors: Vec<FieldError>) -> Result<(), Vec<FieldError>> {
    if errors.is_empty() { Ok(()) } else { Err(errors) }
}

/// Parse an IPv4 CIDR block into its address and prefix length.
pub(crate) fn parse_cidr(cidr: &str) -> Option<(Ipv4Addr, u32)> {
    let (addr, prefix) = cidr.split_once('/')?;
    let addr: Ipv4Addr = addr.parse().ok()?;
    let prefix: u32 = prefix.parse().ok().filter(|p| *p <= 32)?;
    Some((addr, prefix))
}

/// Check that a CIDR block parses and has no host bits set; the schema checks only the syntax,
/// and a block like `10.1.0.1/16` is ambiguous (AWS rejects it for VPC CIDRs).
pub(crate) fn check_cidr(field: &str, cidr: &str, errors: &mut Vec<FieldError>) {
    let Some((addr, prefix)) = parse_cidr(cidr) else {
        errors.push(FieldError::new(field, cidr, "must be an IPv4 CIDR block such as 10.1.0.0/16"));
        return;
    };
    let addr = u32::from(addr);
    let network_mask = u32::MAX.checked_shl(32 - prefix).unwrap_or(0);
    if addr & !network_mask != 0 {
        let network = Ipv4Addr::from(addr & network_mask);
        errors.push(FieldError::new(
            field,
            cidr,
            format!("host bits are set; use the network address {network}/{prefix}"),
        ));
    }
}

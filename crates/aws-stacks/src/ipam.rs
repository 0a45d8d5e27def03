//! IPv4 address management: which CIDR block a cluster or node pool gets, and how a cluster's
//! block is laid out over its availability zones. Pure functions; the operator gathers the
//! reserved blocks (reference §7.6) and persists the result.
//!
//! # Allocation ([`free`])
//!
//! Follows `giantswarm/ipam`'s `Free`: the result is the lowest block of the requested size,
//! aligned to its own size, inside the range and overlapping no reserved block. Reserved blocks
//! outside the range are ignored; ones that only partly overlap it still count. Unlike upstream,
//! the search skips over each reserved block in one step instead of trying every candidate, so
//! it costs O(r log r) for r reserved blocks whatever the range size.
//!
//! # Layouts
//!
//! - [`tccp_layout`] (upstream `tccpazs`, at most [`MAX_AZS`] zones): the cluster CIDR is split
//!   into four equal blocks; availability zones, sorted by name, take the blocks in order, and
//!   each block is halved into a public (first half) and a private (second half) subnet. The pod
//!   CIDR, when given, is split into four too, one AWS-CNI subnet per zone.
//!   [`tccp_layout_preserving`] keeps zones that already have subnets where they are, so adding
//!   a zone never moves an existing one.
//! - [`node_pool_layout`] (upstream `tcnpazs`): the node pool's CIDR is split by the next power
//!   of two at least the number of zones, and the sorted zones take the blocks in order.
//!
//! With the defaults (range `10.1.0.0/16`, /24 clusters, pod CIDR `10.2.0.0/16`), a cluster in
//! `eu-central-1a` and `eu-central-1b` gets `10.1.0.0/24`, with public `10.1.0.0/27` and private
//! `10.1.0.32/27` in 1a, public `10.1.0.64/27` and private `10.1.0.96/27` in 1b, and AWS-CNI
//! subnets `10.2.0.0/18` and `10.2.64.0/18`:
//!
//! ```
//! use aws_stacks::ipam::{Ipv4Net, free, tccp_layout};
//!
//! let range: Ipv4Net = "10.1.0.0/16".parse()?;
//! let cluster = free(range, 24, &[])?;
//! assert_eq!(cluster.to_string(), "10.1.0.0/24");
//!
//! let zones = ["eu-central-1b".to_string(), "eu-central-1a".to_string()];
//! let layout = tccp_layout(cluster, Some("10.2.0.0/16".parse()?), &zones)?;
//! assert_eq!(layout[0].name, "eu-central-1a");
//! assert_eq!(layout[0].private.to_string(), "10.1.0.32/27");
//! assert_eq!(layout[1].aws_cni.map(|n| n.to_string()).as_deref(), Some("10.2.64.0/18"));
//! # Ok::<(), aws_stacks::ipam::IpamError>(())
//! ```

use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The most availability zones a cluster's network spans: its CIDR is split into four blocks.
pub const MAX_AZS: usize = 4;

/// What can go wrong in address management. Messages name the blocks involved and say what to
/// change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IpamError {
    /// The text is not an IPv4 CIDR block.
    #[error("invalid CIDR block {input:?}: {reason}; write it as a.b.c.d/prefix, e.g. 10.1.0.0/16")]
    InvalidCidr {
        /// The text given.
        input: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The address has bits set below the prefix, so the block is ambiguous.
    #[error("CIDR block {input} has host bits set; use the network address {network}")]
    HostBitsSet {
        /// The text given.
        input: String,
        /// The block with the host bits cleared.
        network: Ipv4Net,
    },
    /// A prefix length above 32.
    #[error("prefix length /{prefix} is out of range; IPv4 prefixes are 0 to 32")]
    InvalidPrefix {
        /// The prefix length given.
        prefix: u8,
    },
    /// The requested block is larger than the range it should come from.
    #[error("cannot allocate a /{prefix} from {range}: the block is larger than the range; request a longer prefix")]
    PrefixTooShort {
        /// The range.
        range: Ipv4Net,
        /// The requested prefix length.
        prefix: u8,
    },
    /// Every block of the requested size in the range is taken.
    #[error("no free /{prefix} left in {range}; release unused blocks or allocate from a larger range")]
    Exhausted {
        /// The range.
        range: Ipv4Net,
        /// The requested prefix length.
        prefix: u8,
    },
    /// A split into a number of parts that is not a power of two, or into blocks beyond /32.
    #[error("cannot split {net} into {parts} parts: the count must be a power of two and the parts at most /32")]
    InvalidSplit {
        /// The block to split.
        net: Ipv4Net,
        /// The number of parts asked for.
        parts: u32,
    },
    /// More availability zones than a cluster's network can span.
    #[error("{count} availability zones requested, but a cluster spans at most {max}; use fewer zones")]
    TooManyZones {
        /// How many distinct zones were requested (existing ones included).
        count: usize,
        /// The limit, [`MAX_AZS`].
        max: usize,
    },
    /// A layout was requested for no availability zone.
    #[error("no availability zone given; list at least one")]
    NoZones,
}

/// An IPv4 CIDR block whose host bits are zero, e.g. `10.1.0.0/16`.
///
/// Ordered by address, then by prefix length (a larger block first). Serialized as its string
/// form.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Ipv4Net {
    addr: u32,
    prefix: u8,
}

/// The network mask of a prefix length (at most 32).
fn mask(prefix: u8) -> u32 {
    u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0)
}

impl Ipv4Net {
    /// The block at `addr` of `prefix` bits. Fails when `prefix` exceeds 32 or host bits are set.
    pub fn new(addr: Ipv4Addr, prefix: u8) -> Result<Self, IpamError> {
        if prefix > 32 {
            return Err(IpamError::InvalidPrefix { prefix });
        }
        let bits = u32::from(addr);
        if bits & !mask(prefix) != 0 {
            let network = Ipv4Net { addr: bits & mask(prefix), prefix };
            return Err(IpamError::HostBitsSet { input: format!("{addr}/{prefix}"), network });
        }
        Ok(Ipv4Net { addr: bits, prefix })
    }

    /// The network address.
    pub fn network(&self) -> Ipv4Addr {
        Ipv4Addr::from(self.addr)
    }

    /// The prefix length.
    pub fn prefix(&self) -> u8 {
        self.prefix
    }

    /// How many addresses the block holds (2^32 for `0.0.0.0/0`, hence `u64`).
    pub fn size(&self) -> u64 {
        1u64 << (32 - u32::from(self.prefix))
    }

    /// The first address as a number.
    fn start(&self) -> u64 {
        u64::from(self.addr)
    }

    /// One past the last address as a number.
    fn end(&self) -> u64 {
        self.start() + self.size()
    }

    /// Whether `other` lies entirely inside this block.
    pub fn contains(&self, other: &Ipv4Net) -> bool {
        self.start() <= other.start() && other.end() <= self.end()
    }

    /// Whether `addr` lies inside this block.
    pub fn contains_addr(&self, addr: Ipv4Addr) -> bool {
        u32::from(addr) & mask(self.prefix) == self.addr
    }

    /// Whether the two blocks share an address. Aligned blocks either nest or are disjoint, so
    /// this is "one contains the other".
    pub fn overlaps(&self, other: &Ipv4Net) -> bool {
        self.start() < other.end() && other.start() < self.end()
    }

    /// Split into `parts` equal blocks, lowest first. `parts` must be a power of two and the
    /// parts no smaller than /32.
    pub fn split(&self, parts: u32) -> Result<Vec<Ipv4Net>, IpamError> {
        let invalid = IpamError::InvalidSplit { net: *self, parts };
        if !parts.is_power_of_two() {
            return Err(invalid);
        }
        let extra_bits = parts.trailing_zeros() as u8;
        let prefix = self.prefix + extra_bits;
        if prefix > 32 {
            return Err(invalid);
        }
        let step = 1u64 << (32 - u32::from(prefix));
        (0..u64::from(parts))
            .map(|i| {
                // In range by construction: the parts tile this block.
                let addr = u32::try_from(self.start() + i * step).map_err(|_| invalid.clone())?;
                Ok(Ipv4Net { addr, prefix })
            })
            .collect()
    }

    /// The lower and upper half.
    pub fn halves(&self) -> Result<(Ipv4Net, Ipv4Net), IpamError> {
        match self.split(2)?.as_slice() {
            [low, high] => Ok((*low, *high)),
            _ => Err(IpamError::InvalidSplit { net: *self, parts: 2 }),
        }
    }
}

impl fmt::Display for Ipv4Net {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network(), self.prefix)
    }
}

impl fmt::Debug for Ipv4Net {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl FromStr for Ipv4Net {
    type Err = IpamError;

    fn from_str(input: &str) -> Result<Self, Self::Err> {
        let invalid = |reason| IpamError::InvalidCidr { input: input.to_string(), reason };
        let (addr, prefix) = input.split_once('/').ok_or_else(|| invalid("the /prefix is missing"))?;
        let addr: Ipv4Addr = addr.parse().map_err(|_| invalid("the address is not an IPv4 address"))?;
        // Only plain decimal digits: `u8::from_str` would accept a leading `+`.
        if prefix.is_empty() || prefix.len() > 2 || !prefix.bytes().all(|b| b.is_ascii_digit()) {
            return Err(invalid("the prefix length is not a number from 0 to 32"));
        }
        let prefix: u8 = prefix.parse().map_err(|_| invalid("the prefix length is not a number from 0 to 32"))?;
        if prefix > 32 {
            return Err(invalid("the prefix length is not a number from 0 to 32"));
        }
        Ipv4Net::new(addr, prefix).map_err(|e| match e {
            IpamError::HostBitsSet { network, .. } => IpamError::HostBitsSet { input: input.to_string(), network },
            other => other,
        })
    }
}

impl Serialize for Ipv4Net {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Ipv4Net {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// The lowest block of `/prefix`, aligned to its size, inside `range` and overlapping none of
/// `reserved`. Reserved blocks outside the range are ignored.
///
/// Errors: [`IpamError::InvalidPrefix`] above 32, [`IpamError::PrefixTooShort`] when the block
/// would be larger than the range, [`IpamError::Exhausted`] when no such block is free.
pub fn free(range: Ipv4Net, prefix: u8, reserved: &[Ipv4Net]) -> Result<Ipv4Net, IpamError> {
    if prefix > 32 {
        return Err(IpamError::InvalidPrefix { prefix });
    }
    if prefix < range.prefix {
        return Err(IpamError::PrefixTooShort { range, prefix });
    }
    let block = 1u64 << (32 - u32::from(prefix));
    let mut taken: Vec<(u64, u64)> =
        reserved.iter().filter(|r| r.overlaps(&range)).map(|r| (r.start(), r.end())).collect();
    taken.sort_unstable();

    // The range starts aligned to `block` (its own size is a multiple of it), and so does every
    // candidate. Walking the reserved blocks by start: a candidate that ends before the next
    // reserved block starts is free, as every later one starts later still; one that overlaps
    // moves to the first aligned address past that block.
    let mut candidate = range.start();
    for (start, end) in taken {
        if candidate + block <= start {
            break;
        }
        if end > candidate {
            candidate = end.div_ceil(block) * block;
        }
    }
    if candidate + block > range.end() {
        return Err(IpamError::Exhausted { range, prefix });
    }
    let addr = u32::try_from(candidate).map_err(|_| IpamError::Exhausted { range, prefix })?;
    Ok(Ipv4Net { addr, prefix })
}

/// The subnets of one availability zone in the cluster's (TCCP) network.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TccpAz {
    /// The zone name, e.g. `eu-central-1a`.
    pub name: String,
    /// The public subnet: load balancers and NAT gateway.
    pub public: Ipv4Net,
    /// The private subnet: masters.
    pub private: Ipv4Net,
    /// The AWS-CNI pod subnet in the secondary VPC CIDR, when the cluster has a pod CIDR.
    pub aws_cni: Option<Ipv4Net>,
}

/// Sorted, de-duplicated zone names.
fn sorted_zones(azs: &[String]) -> Vec<&str> {
    let mut zones: Vec<&str> = azs.iter().map(String::as_str).collect();
    zones.sort_unstable();
    zones.dedup();
    zones
}

/// The cluster network's layout for a new cluster: see the [module docs](self). Duplicate zone
/// names count once; the result is sorted by zone name.
pub fn tccp_layout(cluster_cidr: Ipv4Net, pod_cidr: Option<Ipv4Net>, azs: &[String]) -> Result<Vec<TccpAz>, IpamError> {
    tccp_layout_preserving(cluster_cidr, pod_cidr, azs, &[])
}

/// The cluster network's layout when some zones already have subnets (`existing`, as read back
/// from the network): those keep their subnets and their quarter of the cluster CIDR, and the
/// new zones of `azs`, sorted by name, take the free quarters lowest first. Existing zones not
/// in `azs` are kept, since their subnets cannot go while they are in use. An existing zone
/// without an AWS-CNI subnet gets the pod CIDR quarter matching its cluster CIDR quarter.
///
/// Errors when the zones together exceed [`MAX_AZS`], or when none is given at all.
pub fn tccp_layout_preserving(
    cluster_cidr: Ipv4Net,
    pod_cidr: Option<Ipv4Net>,
    azs: &[String],
    existing: &[TccpAz],
) -> Result<Vec<TccpAz>, IpamError> {
    let quarters = cluster_cidr.split(MAX_AZS as u32)?;
    let pod_quarters = pod_cidr.map(|p| p.split(MAX_AZS as u32)).transpose()?;
    let quarter_of = |az: &TccpAz| quarters.iter().position(|q| q.contains(&az.public));

    let mut used = [false; MAX_AZS];
    let mut layout: Vec<TccpAz> = Vec::new();
    for az in existing {
        if layout.iter().any(|l| l.name == az.name) {
            continue;
        }
        let index = quarter_of(az);
        if let Some(i) = index {
            used[i] = true;
        }
        let aws_cni = az.aws_cni.or_else(|| Some(pod_quarters.as_ref()?[index?]));
        layout.push(TccpAz { aws_cni, ..az.clone() });
    }

    let new_zones: Vec<&str> = sorted_zones(azs).into_iter().filter(|z| !layout.iter().any(|l| l.name == *z)).collect();
    let count = layout.len() + new_zones.len();
    if count > MAX_AZS {
        return Err(IpamError::TooManyZones { count, max: MAX_AZS });
    }
    if count == 0 {
        return Err(IpamError::NoZones);
    }

    let mut free_quarters = (0..MAX_AZS).filter(|i| !used[*i]);
    for zone in new_zones {
        // An existing zone outside the cluster CIDR uses no quarter, so one may be missing here.
        let i = free_quarters.next().ok_or(IpamError::TooManyZones { count, max: MAX_AZS })?;
        let (public, private) = quarters[i].halves()?;
        let aws_cni = pod_quarters.as_ref().map(|p| p[i]);
        layout.push(TccpAz { name: zone.to_string(), public, private, aws_cni });
    }
    layout.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(layout)
}

/// A node pool's subnets: `pool_cidr` split by the next power of two at least the number of
/// zones, the sorted zones taking the blocks in order (three zones use three of four quarters).
/// Duplicate zone names count once.
pub fn node_pool_layout(pool_cidr: Ipv4Net, azs: &[String]) -> Result<Vec<(String, Ipv4Net)>, IpamError> {
    let zones = sorted_zones(azs);
    if zones.is_empty() {
        return Err(IpamError::NoZones);
    }
    let parts = u32::try_from(zones.len())
        .ok()
        .and_then(u32::checked_next_power_of_two)
        .ok_or(IpamError::InvalidSplit { net: pool_cidr, parts: u32::MAX })?;
    let blocks = pool_cidr.split(parts)?;
    Ok(zones.into_iter().zip(blocks).map(|(zone, block)| (zone.to_string(), block)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(s: &str) -> Ipv4Net {
        s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    fn nets(list: &[&str]) -> Vec<Ipv4Net> {
        list.iter().map(|s| net(s)).collect()
    }

    fn zones(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    // --- Ipv4Net ------------------------------------------------------------------------------

    #[test]
    fn parses_and_prints() {
        for s in ["10.1.0.0/16", "0.0.0.0/0", "255.255.255.255/32", "192.168.4.0/22"] {
            assert_eq!(net(s).to_string(), s);
        }
        assert_eq!(net("10.1.0.0/16").network(), Ipv4Addr::new(10, 1, 0, 0));
        assert_eq!(net("10.1.0.0/16").prefix(), 16);
        assert_eq!(net("0.0.0.0/0").size(), 1 << 32);
    }

    #[test]
    fn rejects_host_bits_naming_the_network() {
        let err = "10.1.0.1/16".parse::<Ipv4Net>().unwrap_err();
        assert_eq!(err, IpamError::HostBitsSet { input: "10.1.0.1/16".into(), network: net("10.1.0.0/16") });
        assert_eq!(err.to_string(), "CIDR block 10.1.0.1/16 has host bits set; use the network address 10.1.0.0/16");
    }

    #[test]
    fn rejects_malformed_text() {
        for s in [
            "10.1.0.0",
            "10.1.0/16",
            "10.1.0.0/33",
            "10.1.0.0/",
            "10.1.0.0/+8",
            "10.1.0.0/016",
            "a/8",
            "256.0.0.0/8",
            " 10.0.0.0/8",
        ] {
            let err = s.parse::<Ipv4Net>().unwrap_err();
            assert!(matches!(err, IpamError::InvalidCidr { .. }), "{s}: {err}");
            assert!(err.to_string().contains(s), "{err}");
        }
        assert_eq!(Ipv4Net::new(Ipv4Addr::UNSPECIFIED, 33), Err(IpamError::InvalidPrefix { prefix: 33 }));
    }

    #[test]
    fn contains_and_overlaps() {
        let big = net("10.1.0.0/16");
        assert!(big.contains(&net("10.1.2.0/24")));
        assert!(big.contains(&big));
        assert!(!net("10.1.2.0/24").contains(&big));
        assert!(!big.contains(&net("10.2.0.0/24")));
        assert!(big.overlaps(&net("10.1.255.0/24")));
        assert!(net("10.1.255.0/24").overlaps(&big));
        assert!(!big.overlaps(&net("10.2.0.0/16")));
        assert!(!net("10.1.0.0/25").overlaps(&net("10.1.0.128/25")));
        assert!(net("0.0.0.0/0").overlaps(&net("255.255.255.255/32")));
        assert!(big.contains_addr(Ipv4Addr::new(10, 1, 200, 7)));
        assert!(!big.contains_addr(Ipv4Addr::new(10, 2, 0, 0)));
    }

    #[test]
    fn splits_into_powers_of_two() {
        assert_eq!(
            net("10.1.0.0/24").split(4),
            Ok(nets(&["10.1.0.0/26", "10.1.0.64/26", "10.1.0.128/26", "10.1.0.192/26"]))
        );
        assert_eq!(net("10.1.0.0/24").split(1), Ok(nets(&["10.1.0.0/24"])));
        assert_eq!(net("10.1.0.0/24").halves(), Ok((net("10.1.0.0/25"), net("10.1.0.128/25"))));
        assert_eq!(net("255.255.255.254/31").halves(), Ok((net("255.255.255.254/32"), net("255.255.255.255/32"))));
        assert_eq!(net("0.0.0.0/0").split(2).map(|v| v.len()), Ok(2));
        assert_eq!(net("10.1.0.0/24").split(3), Err(IpamError::InvalidSplit { net: net("10.1.0.0/24"), parts: 3 }));
        assert!(net("10.1.0.0/24").split(0).is_err());
        assert!(net("10.1.0.0/32").halves().is_err());
    }

    #[test]
    fn serializes_as_a_string() {
        let n = net("10.1.0.0/24");
        assert_eq!(serde_json::to_value(n).ok(), Some(serde_json::json!("10.1.0.0/24")));
        assert_eq!(serde_json::from_value::<Ipv4Net>(serde_json::json!("10.1.0.0/24")).ok(), Some(n));
        let err = serde_json::from_value::<Ipv4Net>(serde_json::json!("10.1.0.5/24")).unwrap_err();
        assert!(err.to_string().contains("use the network address 10.1.0.0/24"), "{err}");
    }

    // --- free ---------------------------------------------------------------------------------

    #[test]
    fn first_cluster_then_node_pool_as_in_the_worked_example() {
        let range = net("10.1.0.0/16");
        let cluster = free(range, 24, &[]);
        assert_eq!(cluster, Ok(net("10.1.0.0/24")));
        assert_eq!(free(range, 24, &nets(&["10.1.0.0/24"])), Ok(net("10.1.1.0/24")));
    }

    #[test]
    fn results_are_aligned_to_their_size() {
        // A /28 taken at the start: the next /24 is the next /24 boundary, not 10.1.0.16.
        assert_eq!(free(net("10.1.0.0/16"), 24, &nets(&["10.1.0.0/28"])), Ok(net("10.1.1.0/24")));
        // A /25 in the middle of the second /24 blocks the whole /24.
        assert_eq!(free(net("10.1.0.0/16"), 24, &nets(&["10.1.0.0/24", "10.1.1.128/25"])), Ok(net("10.1.2.0/24")));
        // Smaller blocks fill gaps below bigger ones.
        assert_eq!(free(net("10.1.0.0/16"), 26, &nets(&["10.1.0.0/26", "10.1.1.0/24"])), Ok(net("10.1.0.64/26")));
    }

    #[test]
    fn reserved_blocks_outside_the_range_are_ignored() {
        let range = net("10.1.0.0/16");
        let outside = nets(&["10.0.0.0/16", "10.2.0.0/24", "192.168.0.0/24", "10.0.255.0/24"]);
        assert_eq!(free(range, 24, &outside), Ok(net("10.1.0.0/24")));
        // A reserved block that contains the whole range overlaps it, so nothing is free.
        assert_eq!(free(range, 24, &nets(&["10.0.0.0/8"])), Err(IpamError::Exhausted { range, prefix: 24 }));
    }

    #[test]
    fn overlapping_and_unsorted_reserved_blocks() {
        let range = net("10.1.0.0/16");
        let reserved = nets(&["10.1.2.0/24", "10.1.0.0/23", "10.1.0.0/24", "10.1.1.0/25", "10.1.0.0/23"]);
        assert_eq!(free(range, 24, &reserved), Ok(net("10.1.3.0/24")));
        assert_eq!(free(range, 22, &reserved), Ok(net("10.1.4.0/22")));
    }

    #[test]
    fn exhaustion_and_bad_prefixes() {
        let range = net("10.1.0.0/22");
        let all = nets(&["10.1.0.0/24", "10.1.1.0/24", "10.1.2.0/24", "10.1.3.0/24"]);
        let err = free(range, 24, &all).unwrap_err();
        assert_eq!(err, IpamError::Exhausted { range, prefix: 24 });
        assert_eq!(
            err.to_string(),
            "no free /24 left in 10.1.0.0/22; release unused blocks or allocate from a larger range"
        );
        // The last block is still found.
        assert_eq!(free(range, 24, &all[..3]), Ok(net("10.1.3.0/24")));
        // A /23 does not fit when one /24 of each half is taken.
        assert!(free(range, 23, &nets(&["10.1.0.0/24", "10.1.2.0/24"])).is_err());
        assert_eq!(free(range, 21, &[]), Err(IpamError::PrefixTooShort { range, prefix: 21 }));
        assert_eq!(free(range, 33, &[]), Err(IpamError::InvalidPrefix { prefix: 33 }));
        assert_eq!(free(range, 22, &[]), Ok(range));
        // The very top of the address space.
        let top = net("255.255.255.0/24");
        assert_eq!(free(top, 25, &nets(&["255.255.255.0/25"])), Ok(net("255.255.255.128/25")));
        assert!(free(top, 24, &[top]).is_err());
    }

    /// A small deterministic generator, so the property loop needs no extra crate and a failure
    /// reproduces.
    struct XorShift(u64);

    impl XorShift {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    #[test]
    fn free_never_overlaps_reserved_and_is_the_lowest() {
        let range = net("10.1.0.0/20");
        let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
        for round in 0..500 {
            let reserved: Vec<Ipv4Net> = (0..rng.below(12))
                .map(|_| {
                    let prefix = 18 + rng.below(11) as u8; // /18 … /28, some larger than the range
                    let addr = (u32::from(Ipv4Addr::new(10, 0, 240, 0)) + rng.below(1 << 13) as u32 * 4) & mask(prefix);
                    Ipv4Net { addr, prefix }
                })
                .collect();
            let prefix = 22 + rng.below(5) as u8;
            // Brute force: every aligned candidate in order.
            let expected = range
                .split(1 << (prefix - range.prefix))
                .unwrap_or_default()
                .into_iter()
                .find(|c| !reserved.iter().any(|r| r.overlaps(c)));
            match free(range, prefix, &reserved) {
                Ok(got) => {
                    assert!(range.contains(&got), "round {round}: {got} outside {range}");
                    assert!(!reserved.iter().any(|r| r.overlaps(&got)), "round {round}: {got} overlaps {reserved:?}");
                    assert_eq!(Some(got), expected, "round {round}: reserved {reserved:?}, /{prefix}");
                }
                Err(e) => assert_eq!(expected, None, "round {round}: {e} with reserved {reserved:?}"),
            }
        }
    }

    // --- layouts ------------------------------------------------------------------------------

    #[test]
    fn tccp_layout_of_the_worked_example() {
        let layout =
            tccp_layout(net("10.1.0.0/24"), Some(net("10.2.0.0/16")), &zones(&["eu-central-1b", "eu-central-1a"]));
        assert_eq!(
            layout,
            Ok(vec![
                TccpAz {
                    name: "eu-central-1a".into(),
                    public: net("10.1.0.0/27"),
                    private: net("10.1.0.32/27"),
                    aws_cni: Some(net("10.2.0.0/18")),
                },
                TccpAz {
                    name: "eu-central-1b".into(),
                    public: net("10.1.0.64/27"),
                    private: net("10.1.0.96/27"),
                    aws_cni: Some(net("10.2.64.0/18")),
                },
            ])
        );
        assert_eq!(
            node_pool_layout(net("10.1.1.0/24"), &zones(&["eu-central-1a", "eu-central-1b"])),
            Ok(vec![
                ("eu-central-1a".to_string(), net("10.1.1.0/25")),
                ("eu-central-1b".to_string(), net("10.1.1.128/25"))
            ])
        );
    }

    #[test]
    fn tccp_layout_for_one_to_five_zones() {
        let all = ["eu-central-1d", "eu-central-1c", "eu-central-1b", "eu-central-1a", "eu-central-1e"];
        for n in 1..=4 {
            let azs = zones(&all[4 - n..4]);
            let layout = tccp_layout(net("10.1.0.0/24"), None, &azs).unwrap_or_default();
            assert_eq!(layout.len(), n);
            for (i, az) in layout.iter().enumerate() {
                assert_eq!(az.name, format!("eu-central-1{}", char::from(b'a' + i as u8)));
                let quarter = net("10.1.0.0/24").split(4).unwrap_or_default()[i];
                assert_eq!(Ok((az.public, az.private)), quarter.halves());
                assert_eq!(az.aws_cni, None);
            }
        }
        assert_eq!(
            tccp_layout(net("10.1.0.0/24"), None, &zones(&all)),
            Err(IpamError::TooManyZones { count: 5, max: 4 })
        );
        assert_eq!(tccp_layout(net("10.1.0.0/24"), None, &[]), Err(IpamError::NoZones));
        // Duplicates count once.
        assert_eq!(
            tccp_layout(net("10.1.0.0/24"), None, &zones(&["eu-central-1a", "eu-central-1a"])).map(|l| l.len()),
            Ok(1)
        );
    }

    #[test]
    fn adding_a_zone_keeps_existing_zones_in_place() {
        let cluster = net("10.1.0.0/24");
        let pods = Some(net("10.2.0.0/16"));
        let before = tccp_layout(cluster, pods, &zones(&["eu-central-1b"])).unwrap_or_default();
        assert_eq!(before[0].public, net("10.1.0.0/27"));
        // Without the existing subnets, 1a would take 1b's quarter.
        let after = tccp_layout_preserving(cluster, pods, &zones(&["eu-central-1a", "eu-central-1b"]), &before);
        assert_eq!(
            after.map(|l| l.into_iter().map(|az| (az.name, az.public, az.aws_cni)).collect::<Vec<_>>()),
            Ok(vec![
                ("eu-central-1a".to_string(), net("10.1.0.64/27"), Some(net("10.2.64.0/18"))),
                ("eu-central-1b".to_string(), net("10.1.0.0/27"), Some(net("10.2.0.0/18"))),
            ])
        );
        // Existing zones count towards the limit, even when no longer requested.
        let four = tccp_layout(cluster, None, &zones(&["a1", "b1", "c1", "d1"])).unwrap_or_default();
        assert_eq!(
            tccp_layout_preserving(cluster, None, &zones(&["e1"]), &four),
            Err(IpamError::TooManyZones { count: 5, max: 4 })
        );
        assert_eq!(tccp_layout_preserving(cluster, None, &[], &four).map(|l| l.len()), Ok(4));
    }

    #[test]
    fn node_pool_layout_splits_by_the_next_power_of_two() {
        let pool = net("10.1.1.0/24");
        let one = node_pool_layout(pool, &zones(&["eu-central-1a"]));
        assert_eq!(one, Ok(vec![("eu-central-1a".to_string(), pool)]));
        let three = node_pool_layout(pool, &zones(&["eu-central-1c", "eu-central-1a", "eu-central-1b"]));
        assert_eq!(
            three,
            Ok(vec![
                ("eu-central-1a".to_string(), net("10.1.1.0/26")),
                ("eu-central-1b".to_string(), net("10.1.1.64/26")),
                ("eu-central-1c".to_string(), net("10.1.1.128/26")),
            ])
        );
        let five = node_pool_layout(pool, &zones(&["a", "b", "c", "d", "e"])).unwrap_or_default();
        assert_eq!(five.len(), 5);
        assert!(five.iter().all(|(_, n)| n.prefix() == 27));
        assert_eq!(node_pool_layout(pool, &[]), Err(IpamError::NoZones));
        // A /32 cannot be split for two zones.
        assert!(node_pool_layout(net("10.1.1.1/32"), &zones(&["a", "b"])).is_err());
    }
}

//! The consistent-hash ring that maps a key (a cluster id) to a shard.
//!
//! Pure and deterministic: every replica that knows the same live shards computes the same
//! assignment, and a new sharder continues exactly where the old one stopped. Each shard is
//! placed on the ring at [`Ring::virtual_nodes`] points, so that shares stay even with few
//! shards, and a change of membership moves only the keys between the changed points: adding a
//! shard moves keys only *to* it, removing one moves only *its* keys.

use std::collections::BTreeSet;

/// The default number of points per shard. With 100 points, each of 3 shards holds its third
/// within a few per cent (see the tests).
pub const DEFAULT_VIRTUAL_NODES: u32 = 100;

/// 64-bit FNV-1a of `bytes`: the hash Kubernetes' sharded lists and watches use too (KEP-5866).
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in bytes {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// FNV-1a followed by a 64-bit finaliser (murmur3's `fmix64`). FNV-1a alone spreads keys that
/// differ in their last characters (`shard-a#1`, `shard-a#2`) over a narrow band of the ring;
/// the finaliser makes every output bit depend on every input bit.
fn point(bytes: &[u8]) -> u64 {
    let mut h = fnv1a64(bytes);
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^= h >> 33;
    h
}

/// A consistent-hash ring over a set of shard names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ring {
    /// (point, shard index), sorted by point.
    points: Vec<(u64, usize)>,
    shards: Vec<String>,
    virtual_nodes: u32,
}

impl Ring {
    /// A ring over `shards` (duplicates count once) with `virtual_nodes` points per shard
    /// (at least one).
    pub fn new<I, S>(shards: I, virtual_nodes: u32) -> Ring
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let shards: Vec<String> = shards.into_iter().map(Into::into).collect::<BTreeSet<_>>().into_iter().collect();
        let virtual_nodes = virtual_nodes.max(1);
        let mut points = Vec::with_capacity(shards.len() * virtual_nodes as usize);
        for (index, shard) in shards.iter().enumerate() {
            for n in 0..virtual_nodes {
                points.push((point(format!("{shard}#{n}").as_bytes()), index));
            }
        }
        // Ties (vanishingly rare) are broken by shard name, so every replica agrees.
        points.sort_unstable();
        Ring { points, shards, virtual_nodes }
    }

    /// The shard that owns `key`: the first point at or after the key's hash, wrapping around.
    /// `None` when the ring is empty.
    pub fn shard_for(&self, key: &str) -> Option<&str> {
        if self.points.is_empty() {
            return None;
        }
        let h = point(key.as_bytes());
        let at = self.points.partition_point(|(p, _)| *p < h);
        let (_, index) = self.points[at % self.points.len()];
        Some(&self.shards[index])
    }

    /// The shards on the ring, sorted.
    pub fn shards(&self) -> &[String] {
        &self.shards
    }

    /// Whether `shard` is on the ring.
    pub fn contains(&self, shard: &str) -> bool {
        self.shards.binary_search_by(|s| s.as_str().cmp(shard)).is_ok()
    }

    /// Points per shard.
    pub fn virtual_nodes(&self) -> u32 {
        self.virtual_nodes
    }

    /// Whether no shard is live.
    pub fn is_empty(&self) -> bool {
        self.shards.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn keys(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("cluster-{i:05}")).collect()
    }

    fn shares(ring: &Ring, keys: &[String]) -> BTreeMap<String, usize> {
        let mut out = BTreeMap::new();
        for key in keys {
            *out.entry(ring.shard_for(key).unwrap_or_default().to_string()).or_insert(0) += 1;
        }
        out
    }

    #[test]
    fn fnv1a_matches_the_reference_vectors() {
        // From the FNV reference (draft-eastlake-fnv): "" and "a", and "foobar".
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn an_empty_ring_assigns_nothing() {
        assert_eq!(Ring::new(Vec::<String>::new(), 100).shard_for("x"), None);
    }

    #[test]
    fn assignment_is_deterministic_and_ignores_order_and_duplicates() {
        let a = Ring::new(["r-0", "r-1", "r-2"], 100);
        let b = Ring::new(["r-2", "r-0", "r-1", "r-0"], 100);
        assert_eq!(a, b);
        for key in keys(200) {
            assert_eq!(a.shard_for(&key), b.shard_for(&key));
        }
    }

    #[test]
    fn shares_are_balanced_with_virtual_nodes() {
        let keys = keys(30_000);
        for n in [2usize, 3, 4, 5] {
            let ring = Ring::new((0..n).map(|i| format!("operator-{i}")), DEFAULT_VIRTUAL_NODES);
            let shares = shares(&ring, &keys);
            assert_eq!(shares.len(), n);
            let fair = keys.len() as f64 / n as f64;
            for (shard, count) in &shares {
                let deviation = (*count as f64 - fair).abs() / fair;
                assert!(deviation < 0.2, "{n} shards: {shard} holds {count} keys, {deviation:.3} off its fair {fair}");
            }
        }
        // One point per shard is what the virtual nodes fix: far worse balance.
        let ring = Ring::new((0..4).map(|i| format!("operator-{i}")), 1);
        let shares = shares(&ring, &keys);
        let max = *shares.values().max().unwrap_or(&0) as f64;
        assert!(max / (keys.len() as f64 / 4.0) > 1.3, "one point per shard should be visibly uneven: {shares:?}");
    }

    #[test]
    fn adding_a_shard_moves_only_keys_to_it_and_about_their_fair_share() {
        let keys = keys(30_000);
        let before = Ring::new(["operator-0", "operator-1", "operator-2"], DEFAULT_VIRTUAL_NODES);
        let after = Ring::new(["operator-0", "operator-1", "operator-2", "operator-3"], DEFAULT_VIRTUAL_NODES);
        let mut moved = 0;
        for key in &keys {
            let (old, new) = (before.shard_for(key), after.shard_for(key));
            if old != new {
                assert_eq!(new, Some("operator-3"), "{key} moved between two old shards");
                moved += 1;
            }
        }
        let fraction = moved as f64 / keys.len() as f64;
        assert!((0.2..0.3).contains(&fraction), "moved {fraction:.3} of the keys; the minimum is 0.25");
    }

    #[test]
    fn removing_a_shard_moves_only_its_keys() {
        let keys = keys(30_000);
        let before = Ring::new(["operator-0", "operator-1", "operator-2", "operator-3"], DEFAULT_VIRTUAL_NODES);
        let after = Ring::new(["operator-0", "operator-1", "operator-3"], DEFAULT_VIRTUAL_NODES);
        for key in &keys {
            let (old, new) = (before.shard_for(key), after.shard_for(key));
            if old != Some("operator-2") {
                assert_eq!(old, new, "{key} moved although its shard stayed");
            }
        }
    }
}

//! Server-side sharded list and watch (KEP-5866, alpha in Kubernetes 1.36 behind the
//! `ShardedListAndWatch` feature gate).
//!
//! The `shardSelector` list option is a small CEL expression: one or more
//! `shardRange(<field>, '<hexStart>', '<hexEnd>')` terms joined by `||`. The field is
//! `object.metadata.uid` or `object.metadata.namespace`; the server hashes its value with 64-bit
//! FNV-1a and keeps objects whose hash `h` lies in `hexStart <= h < hexEnd`. The bounds are
//! `0x`-prefixed hexadecimal literals in quotes; the full range is `[0x0, 0x10000000000000000)`.
//! The selector applies to lists and to watch streams (an object whose hash is outside the range
//! is never sent), and a list answered with it echoes it in `metadata.shardInfo.selector`.
//!
//! With the feature gate off, kube-apiserver drops the field, as a server older than 1.36 does
//! with the unknown query parameter: the full collection is served, without `shardInfo`. A
//! client tells the two apart by that echo. testenv behaves the same way
//! ([`crate::TestEnvBuilder::sharded_list_and_watch`]).

/// The exclusive upper bound of the hash space, 2^64.
const HASH_SPACE_END: u128 = 1 << 64;

/// The fields a shard range may hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShardField {
    /// `object.metadata.uid`.
    Uid,
    /// `object.metadata.namespace` (empty for cluster-scoped objects).
    Namespace,
}

/// One `shardRange(field, start, end)` term.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShardRange {
    /// The hashed field.
    pub field: ShardField,
    /// Inclusive lower bound.
    pub start: u128,
    /// Exclusive upper bound (at most 2^64).
    pub end: u128,
}

/// A parsed `shardSelector`: an object matches if any range does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShardSelector {
    /// The selector as sent, echoed in `shardInfo`.
    pub source: String,
    /// The ranges, joined by `||`.
    pub ranges: Vec<ShardRange>,
}

/// 64-bit FNV-1a, the hash of KEP-5866.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in bytes {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

impl ShardSelector {
    /// Parse a `shardSelector`. The error says what is wrong, for a 400 answer.
    pub fn parse(source: &str) -> Result<ShardSelector, String> {
        let mut ranges = Vec::new();
        for term in source.split("||") {
            ranges.push(parse_range(term.trim())?);
        }
        Ok(ShardSelector { source: source.to_string(), ranges })
    }

    /// Whether an object with this uid and namespace is selected.
    pub fn matches(&self, uid: &str, namespace: &str) -> bool {
        self.ranges.iter().any(|r| {
            let value = match r.field {
                ShardField::Uid => uid,
                ShardField::Namespace => namespace,
            };
            let h = u128::from(fnv1a64(value.as_bytes()));
            r.start <= h && h < r.end
        })
    }
}

fn parse_range(term: &str) -> Result<ShardRange, String> {
    let inner = term
        .strip_prefix("shardRange")
        .map(str::trim_start)
        .and_then(|t| t.strip_prefix('('))
        .and_then(|t| t.strip_suffix(')'))
        .ok_or_else(|| {
            format!("expected shardRange(<field>, '<hexStart>', '<hexEnd>') terms joined by ||, got {term:?}")
        })?;
    let args: Vec<&str> = inner.split(',').map(str::trim).collect();
    let [field, start, end] = args.as_slice() else {
        return Err(format!("shardRange takes 3 arguments (field, hexStart, hexEnd), got {}", args.len()));
    };
    let field = match *field {
        "object.metadata.uid" => ShardField::Uid,
        "object.metadata.namespace" => ShardField::Namespace,
        other => {
            return Err(format!(
                "unsupported shardRange field {other:?}: supported fields are object.metadata.uid and object.metadata.namespace"
            ));
        }
    };
    let start = parse_bound(start)?;
    let end = parse_bound(end)?;
    if start >= HASH_SPACE_END {
        return Err(format!("hexStart {start:#x} is outside the 64-bit hash space"));
    }
    if end > HASH_SPACE_END {
        return Err(format!("hexEnd {end:#x} is larger than 0x10000000000000000"));
    }
    if start >= end {
        return Err(format!("hexStart {start:#x} must be smaller than hexEnd {end:#x}"));
    }
    Ok(ShardRange { field, start, end })
}

/// A quoted `0x` hexadecimal literal.
fn parse_bound(arg: &str) -> Result<u128, String> {
    let unquoted = arg
        .strip_prefix('\'')
        .and_then(|a| a.strip_suffix('\''))
        .or_else(|| arg.strip_prefix('"').and_then(|a| a.strip_suffix('"')))
        .ok_or_else(|| format!("range bounds are quoted string literals such as '0x8000000000000000', got {arg}"))?;
    let digits = unquoted.strip_prefix("0x").ok_or_else(|| format!("range bounds start with 0x, got {unquoted:?}"))?;
    if digits.is_empty() || digits.len() > 17 || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!("range bound {unquoted:?} is not a hexadecimal number of at most 17 digits"));
    }
    u128::from_str_radix(digits, 16).map_err(|e| format!("range bound {unquoted:?}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_examples_parse() {
        let two = ShardSelector::parse("shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')")
            .expect("valid");
        assert_eq!(two.ranges, [ShardRange { field: ShardField::Uid, start: 0, end: 1 << 63 }]);
        let both = ShardSelector::parse(
            "shardRange(object.metadata.uid, '0x0', '0x8000000000000000') || shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')",
        )
        .expect("valid");
        assert_eq!(both.ranges.len(), 2);
        assert_eq!(both.ranges[1].end, 1 << 64);
        let ns =
            ShardSelector::parse("shardRange(object.metadata.namespace,'0xc000000000000000','0x10000000000000000')")
                .expect("valid");
        assert_eq!(ns.ranges[0].field, ShardField::Namespace);
    }

    #[test]
    fn ranges_are_half_open_over_fnv1a() {
        // FNV-1a("a") = 0xaf63dc4c8601ec8c.
        let at = |start: &str, end: &str| {
            ShardSelector::parse(&format!("shardRange(object.metadata.namespace, '{start}', '{end}')"))
                .expect("valid")
                .matches("uid", "a")
        };
        assert!(at("0xaf63dc4c8601ec8c", "0xaf63dc4c8601ec8d"), "the start is inclusive");
        assert!(!at("0x0", "0xaf63dc4c8601ec8c"), "the end is exclusive");
        assert!(at("0x0", "0x10000000000000000"));
    }

    #[test]
    fn four_quarters_select_every_object_exactly_once() {
        let quarters: Vec<ShardSelector> = (0u128..4)
            .map(|i| {
                let (start, end) = (i << 62, (i + 1) << 62);
                ShardSelector::parse(&format!("shardRange(object.metadata.uid, '{start:#x}', '{end:#x}')"))
                    .expect("valid")
            })
            .collect();
        let mut counts = [0usize; 4];
        // UIDs are random (version 4), as the API server makes them; a fixed-seed generator
        // keeps the test deterministic.
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        for _ in 0..1000 {
            let (a, b) = (next(), next());
            let uid = format!(
                "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
                a >> 32,
                (a >> 16) & 0xffff,
                a & 0xfff,
                (b >> 48) & 0xfff,
                b & 0xffff_ffff_ffff
            );
            let hits: Vec<usize> = (0..4).filter(|q| quarters[*q].matches(&uid, "")).collect();
            assert_eq!(hits.len(), 1, "{uid}");
            counts[hits[0]] += 1;
        }
        assert!(counts.iter().all(|c| *c > 150), "roughly even: {counts:?}");
    }

    #[test]
    fn malformed_selectors_are_refused_with_the_reason() {
        for (bad, why) in [
            ("shardRange(object.metadata.name, '0x0', '0x1')", "unsupported shardRange field"),
            ("shardRange(object.metadata.uid, 0x0, '0x1')", "quoted"),
            ("shardRange(object.metadata.uid, '0', '0x1')", "start with 0x"),
            ("shardRange(object.metadata.uid, '0x1', '0x1')", "smaller than"),
            ("shardRange(object.metadata.uid, '0x0', '0x10000000000000001')", "larger than"),
            ("shardRange(object.metadata.uid, '0x0')", "3 arguments"),
            ("range(object.metadata.uid, '0x0', '0x1')", "expected shardRange"),
            ("shardRange(object.metadata.uid, '0x0', '0x1') ||", "expected shardRange"),
        ] {
            let err = ShardSelector::parse(bad).err().unwrap_or_default();
            assert!(err.contains(why), "{bad}: {err}");
        }
    }
}

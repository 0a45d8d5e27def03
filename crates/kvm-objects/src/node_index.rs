//! Node indexes (reference §4.1.2): every node id gets a positive integer, stored in
//! `status.kvm.nodeIndexes`, that names its iSCSI initiator
//! ([`crate::names::iscsi_initiator`]).
//!
//! [`allocate`] is a pure function of the stored map and the desired node ids:
//! - an id keeps its index for as long as it is desired (stable across rollouts);
//! - a new id gets the lowest free index from 1, holes first;
//! - the index of a removed id is freed, but not reused in the same pass: the removed node's VM
//!   may still be running with that initiator name, so its index counts as taken until the next
//!   pass (as the original did);
//! - no index is ever given twice. A stored map that already has a duplicate or a non-positive
//!   index (edited by hand, or written by an older version) is repaired: the first id in name
//!   order keeps a duplicated index, the others get new ones. The original trusted the map.

use std::collections::{BTreeMap, BTreeSet};

/// The result of [`allocate`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allocation {
    /// The map to store: exactly the desired ids.
    pub indexes: BTreeMap<String, i64>,
    /// Whether it differs from the stored map (only then is a status write needed).
    pub changed: bool,
}

/// Allocate indexes for `desired` node ids given the `stored` map.
pub fn allocate<S: AsRef<str>>(stored: &BTreeMap<String, i64>, desired: &[S]) -> Allocation {
    let desired: BTreeSet<&str> = desired.iter().map(AsRef::as_ref).collect();
    let mut taken: BTreeSet<i64> = BTreeSet::new();
    let mut indexes = BTreeMap::new();
    // Desired ids with a valid, unique stored index keep it (name order decides duplicates).
    for (id, index) in stored {
        if desired.contains(id.as_str()) && *index >= 1 && taken.insert(*index) {
            indexes.insert(id.clone(), *index);
        }
    }
    // Indexes of removed ids stay taken for this pass.
    for (id, index) in stored {
        if !desired.contains(id.as_str()) && *index >= 1 {
            taken.insert(*index);
        }
    }
    let mut next = 1;
    for id in &desired {
        if indexes.contains_key(*id) {
            continue;
        }
        while taken.contains(&next) {
            next += 1;
        }
        taken.insert(next);
        indexes.insert((*id).to_string(), next);
    }
    let changed = &indexes != stored;
    Allocation { indexes, changed }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(entries: &[(&str, i64)]) -> BTreeMap<String, i64> {
        entries.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    #[test]
    fn first_allocation_counts_from_one() {
        let a = allocate(&BTreeMap::new(), &["ma1", "wk2", "wk1"]);
        assert_eq!(a.indexes, map(&[("ma1", 1), ("wk1", 2), ("wk2", 3)]));
        assert!(a.changed);
        let again = allocate(&a.indexes, &["wk1", "ma1", "wk2"]);
        assert_eq!(again.indexes, a.indexes);
        assert!(!again.changed, "a steady cluster writes nothing");
    }

    #[test]
    fn a_freed_index_is_reused_from_the_next_pass() {
        let stored = map(&[("ma1", 1), ("wk1", 2), ("wk2", 3), ("wk3", 4)]);
        // wk2 removed and wk9 added in one step: wk9 may not take 3 while wk2's VM may still run.
        let first = allocate(&stored, &["ma1", "wk1", "wk3", "wk9"]);
        assert_eq!(first.indexes, map(&[("ma1", 1), ("wk1", 2), ("wk3", 4), ("wk9", 5)]));
        // Next pass, another node: the hole 3 is reused before 6.
        let second = allocate(&first.indexes, &["ma1", "wk1", "wk3", "wk9", "wka"]);
        assert_eq!(second.indexes["wka"], 3);
        // Scale down 5 → 3 and back up: stable ids keep theirs, new ones fill the lowest holes.
        let down = allocate(&second.indexes, &["ma1", "wk1", "wka"]);
        assert_eq!(down.indexes, map(&[("ma1", 1), ("wk1", 2), ("wka", 3)]));
        let up = allocate(&down.indexes, &["ma1", "wk1", "wka", "wkb", "wkc"]);
        assert_eq!(up.indexes, map(&[("ma1", 1), ("wk1", 2), ("wka", 3), ("wkb", 4), ("wkc", 5)]));
    }

    #[test]
    fn a_damaged_map_is_repaired_without_duplicates() {
        let stored = map(&[("wk1", 2), ("wk2", 2), ("wk3", 0), ("wk4", -7)]);
        let a = allocate(&stored, &["wk1", "wk2", "wk3", "wk4"]);
        assert_eq!(a.indexes["wk1"], 2, "the first in name order keeps a duplicated index");
        let values: BTreeSet<i64> = a.indexes.values().copied().collect();
        assert_eq!(values.len(), 4, "{:?}", a.indexes);
        assert!(values.iter().all(|i| *i >= 1));
        assert!(a.changed);
    }

    #[test]
    fn never_a_duplicate_over_many_random_steps() {
        // A deterministic pseudo-random walk of scale-ups, scale-downs and replacements.
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut random = move |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        };
        let mut stored = BTreeMap::new();
        let mut ids: Vec<String> = vec!["m0".into()];
        let mut counter = 0;
        for _ in 0..500 {
            match random(3) {
                0 => {
                    counter += 1;
                    ids.push(format!("w{counter}"));
                }
                1 if ids.len() > 1 => {
                    let i = 1 + random(ids.len() as u64 - 1) as usize;
                    ids.remove(i);
                }
                _ => {}
            }
            let previous = stored.clone();
            let a = allocate(&stored, &ids);
            let values: BTreeSet<i64> = a.indexes.values().copied().collect();
            assert_eq!(values.len(), a.indexes.len(), "duplicate in {:?}", a.indexes);
            assert_eq!(a.indexes.len(), ids.len());
            for (id, index) in &previous {
                if let Some(now) = a.indexes.get(id) {
                    assert_eq!(now, index, "{id} changed its index");
                }
            }
            stored = a.indexes;
        }
    }
}

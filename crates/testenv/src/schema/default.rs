//! Defaulting (KEP-575), as apiextensions' `schema/defaulting` does it.
//!
//! kube-apiserver applies schema defaults when it decodes a custom resource: on request bodies
//! (after pruning) and on every read from storage, so a default added to a CRD shows up on old
//! objects without being persisted until their next write. The rules:
//!
//! - a property with a `default` that is missing gets a copy of the default; defaults are
//!   applied top-down, so defaults inside a defaulted object apply too;
//! - an explicit `null` on a non-nullable property with a default is replaced by the default;
//!   on a non-nullable property without a default it is removed
//!   (`PruneNonNullableNullsWithoutDefaults`); `nullable: true` keeps it;
//! - list items and `additionalProperties` values are defaulted by their schema, and a `null`
//!   item or value that is not nullable becomes the item schema's default.

use serde_json::Value;

use super::node::{MAX_DEPTH, Node};
use super::prune::prune_nulls;

/// Apply `root`'s defaults to `obj`; returns whether anything changed.
pub(crate) fn apply_defaults(root: &Node, obj: &mut Value) -> bool {
    let pruned = prune_nulls(obj, Some(root), 0);
    let defaulted = default(obj, root, 0);
    pruned || defaulted
}

/// apiextensions' `Default`.
fn default(x: &mut Value, s: &Node, depth: usize) -> bool {
    if depth > MAX_DEPTH {
        return false;
    }
    let mut changed = false;
    match x {
        Value::Object(map) => {
            for (k, prop) in &s.properties {
                let Some(d) = &prop.default else { continue };
                let needs_default = match map.get(k) {
                    None => true,
                    Some(Value::Null) => !prop.nullable,
                    Some(_) => false,
                };
                if needs_default {
                    map.insert(k.clone(), d.clone());
                    changed = true;
                }
            }
            for (k, v) in map.iter_mut() {
                if let Some(prop) = s.properties.get(k) {
                    changed |= default(v, prop, depth + 1);
                } else if let Some(ap) = s.additional_schema() {
                    if v.is_null() && !ap.nullable {
                        // Upstream then recurses into the old (null) value, i.e. the freshly
                        // copied default is not defaulted further.
                        if let Some(d) = &ap.default {
                            *v = d.clone();
                            changed = true;
                        }
                    } else {
                        changed |= default(v, ap, depth + 1);
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = s.items.as_deref() {
                for v in items.iter_mut() {
                    if v.is_null() && !item_schema.nullable {
                        if let Some(d) = &item_schema.default {
                            *v = d.clone();
                            changed = true;
                        }
                    } else {
                        changed |= default(v, item_schema, depth + 1);
                    }
                }
            }
        }
        _ => {}
    }
    changed
}

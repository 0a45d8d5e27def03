//! Pruning, as apiextensions' `schema/pruning`, `defaulting.PruneNonNullableNullsWithoutDefaults`
//! and `schema/objectmeta.Coerce` do it when kube-apiserver decodes a custom resource.
//!
//! 1. Fields the schema does not declare are removed, unless a node says
//!    `x-kubernetes-preserve-unknown-fields: true` (then only its declared fields are pruned
//!    further down). `apiVersion`, `kind` and `metadata` of the resource root and of every
//!    `x-kubernetes-embedded-resource` object are never pruned here. The removed paths are
//!    returned sorted (`spec.foo`, `spec.items[0].bar`).
//! 2. `null` values of non-nullable fields without a default are removed.
//! 3. `metadata` of the root and of embedded resources is coerced to `ObjectMeta` (see
//!    [`super::objectmeta`]); unknown metadata fields are appended to the removed paths
//!    (`metadata.foo`, `spec.template.metadata.foo`), after the schema-pruned ones.
//!
//! An `additionalProperties: true` (or `false`) without a schema keeps the keys but prunes
//! everything inside their values, as upstream does.

use serde_json::{Map, Value};

use super::field_error::{FieldError, FieldPath};
use super::node::{MAX_DEPTH, Node};
use super::objectmeta;

/// Fields of the resource root (and of embedded resources) that pruning leaves to the
/// `ObjectMeta`/`TypeMeta` handling.
const META_FIELDS: [&str; 3] = ["apiVersion", "kind", "metadata"];

/// Prune `obj` (a whole resource) against `root`. Malformed `apiVersion`/`kind`/`metadata` are
/// dropped when `drop_malformed`, else the first one is returned as an error.
pub(crate) fn prune(root: &Node, obj: &mut Value, drop_malformed: bool) -> Result<Vec<String>, FieldError> {
    let mut pruner = Pruner::default();
    pruner.prune(obj, Some(root), true, "", 0);
    let mut unknown = pruner.unknown;
    unknown.sort();
    prune_nulls(obj, Some(root), 0);
    let mut meta_unknown = Vec::new();
    coerce_meta(obj, Some(root), true, &FieldPath::root(), drop_malformed, &mut meta_unknown, 0)?;
    meta_unknown.sort();
    unknown.extend(meta_unknown);
    Ok(unknown)
}

/// Prune a value against a node that is not a resource root (used to check that defaults
/// carry no unknown fields). Returns whether any field was removed.
pub(crate) fn prune_value(node: &Node, value: &mut Value) -> bool {
    let mut pruner = Pruner::default();
    pruner.prune(value, Some(node), false, "", 0);
    !pruner.unknown.is_empty()
}

#[derive(Default)]
struct Pruner {
    unknown: Vec<String>,
}

fn append_key(path: &str, key: &str) -> String {
    if path.is_empty() { key.to_string() } else { format!("{path}.{key}") }
}

fn append_index(path: &str, index: usize) -> String {
    format!("{path}[{index}]")
}

impl Pruner {
    fn record(&mut self, path: &str, key: &str) {
        self.unknown.push(append_key(path, key));
    }

    /// `prune` of apiextensions' pruning algorithm. `root` marks the resource root, which is
    /// treated as an embedded resource.
    fn prune(&mut self, x: &mut Value, s: Option<&Node>, root: bool, path: &str, depth: usize) {
        if depth > MAX_DEPTH {
            return;
        }
        if let Some(s) = s
            && s.preserve_unknown_fields
        {
            self.skip_prune(x, s, root, path, depth);
            return;
        }
        match x {
            Value::Object(map) => {
                let Some(s) = s else {
                    for k in map.keys() {
                        self.unknown.push(append_key(path, k));
                    }
                    map.clear();
                    return;
                };
                let embedded = root || s.embedded_resource;
                let keys: Vec<String> = map.keys().cloned().collect();
                for k in keys {
                    if embedded && META_FIELDS.contains(&k.as_str()) {
                        continue;
                    }
                    match s.field_schema(&k) {
                        Some(sub) => {
                            if let Some(v) = map.get_mut(&k) {
                                self.prune(v, sub, false, &append_key(path, &k), depth + 1);
                            }
                        }
                        None => {
                            if !META_FIELDS.contains(&k.as_str()) || !path.is_empty() {
                                self.record(path, &k);
                            }
                            map.remove(&k);
                        }
                    }
                }
            }
            Value::Array(items) => {
                let item_schema = s.and_then(|s| s.items.as_deref());
                for (i, v) in items.iter_mut().enumerate() {
                    self.prune(v, item_schema, false, &append_index(path, i), depth + 1);
                }
            }
            _ => {}
        }
    }

    /// `skipPrune`: below `x-kubernetes-preserve-unknown-fields`, keep unknown fields but keep
    /// pruning inside the declared ones.
    fn skip_prune(&mut self, x: &mut Value, s: &Node, root: bool, path: &str, depth: usize) {
        if depth > MAX_DEPTH {
            return;
        }
        match x {
            Value::Object(map) => {
                let embedded = root || s.embedded_resource;
                for (k, v) in map.iter_mut() {
                    if embedded && META_FIELDS.contains(&k.as_str()) {
                        continue;
                    }
                    if let Some(sub) = s.field_schema(k) {
                        self.prune(v, sub, false, &append_key(path, k), depth + 1);
                    }
                }
            }
            Value::Array(items) => {
                if let Some(item_schema) = s.items.as_deref() {
                    for (i, v) in items.iter_mut().enumerate() {
                        self.skip_prune(v, item_schema, false, &append_index(path, i), depth + 1);
                    }
                }
            }
            _ => {}
        }
    }
}

/// `PruneNonNullableNullsWithoutDefaults`: remove `null`s the schema neither allows nor can
/// default. Returns whether anything was removed.
pub(crate) fn prune_nulls(x: &mut Value, s: Option<&Node>, depth: usize) -> bool {
    if depth > MAX_DEPTH {
        return false;
    }
    let mut changed = false;
    match x {
        Value::Object(map) => {
            let keys: Vec<String> = map.keys().cloned().collect();
            for k in keys {
                let schema = s.and_then(|s| s.field_schema(&k)).flatten();
                let remove = matches!((map.get(&k), schema),
                    (Some(Value::Null), Some(sub)) if !sub.nullable && sub.default.is_none());
                if remove {
                    map.remove(&k);
                    changed = true;
                } else if let Some(v) = map.get_mut(&k) {
                    changed |= prune_nulls(v, schema, depth + 1);
                }
            }
        }
        Value::Array(items) => {
            let item_schema = s.and_then(|s| s.items.as_deref());
            for v in items.iter_mut() {
                changed |= prune_nulls(v, item_schema, depth + 1);
            }
        }
        _ => {}
    }
    changed
}

/// `objectmeta.CoerceWithOptions`: fix up TypeMeta and ObjectMeta of the root and of embedded
/// resources.
fn coerce_meta(
    x: &mut Value,
    s: Option<&Node>,
    root: bool,
    path: &FieldPath,
    drop_malformed: bool,
    unknown: &mut Vec<String>,
    depth: usize,
) -> Result<(), FieldError> {
    let Some(s) = s else { return Ok(()) };
    if depth > MAX_DEPTH {
        return Ok(());
    }
    match x {
        Value::Object(map) => {
            if root || s.embedded_resource {
                coerce_type_and_object_meta(map, path, drop_malformed, unknown)?;
            }
            for (k, v) in map.iter_mut() {
                if let Some(prop) = s.properties.get(k) {
                    coerce_meta(v, Some(prop), false, &path.child(k), drop_malformed, unknown, depth + 1)?;
                } else if let Some(ap) = s.additional_schema() {
                    coerce_meta(v, Some(ap), false, &path.key(k), drop_malformed, unknown, depth + 1)?;
                }
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter_mut().enumerate() {
                coerce_meta(v, s.items.as_deref(), false, &path.index(i), drop_malformed, unknown, depth + 1)?;
            }
        }
        _ => {}
    }
    Ok(())
}

fn coerce_type_and_object_meta(
    map: &mut Map<String, Value>,
    path: &FieldPath,
    drop_malformed: bool,
    unknown: &mut Vec<String>,
) -> Result<(), FieldError> {
    for key in ["apiVersion", "kind"] {
        match map.get(key) {
            None | Some(Value::String(_)) => {}
            Some(_) if drop_malformed => {
                map.remove(key);
            }
            Some(other) => {
                return Err(FieldError::invalid(path.child(key).as_field(), other.clone(), "must be a string"));
            }
        }
    }
    let Some(meta) = map.get("metadata") else {
        return Ok(());
    };
    let meta_path = path.child("metadata");
    match objectmeta::coerce(meta, drop_malformed) {
        Ok(coerced) => {
            let prefix = meta_path.as_field();
            unknown.extend(coerced.unknown.into_iter().map(|u| format!("{prefix}.{u}")));
            if let Some(m) = coerced.meta {
                map.insert("metadata".to_string(), m);
            }
            Ok(())
        }
        Err(msg) => Err(FieldError::invalid(meta_path.as_field(), meta.clone(), msg)),
    }
}

//! The merge [`Shape`] of a custom resource, derived from its structural schema.
//!
//! Server-side apply on custom resources follows the schema's merge markers, as
//! kube-apiserver's CRD type converter does:
//!
//! - an object with `properties` is a struct tracked field by field; an `additionalProperties`
//!   schema describes its other keys (a map); `x-kubernetes-map-type: atomic` makes it atomic;
//! - an array is atomic unless `x-kubernetes-list-type` says `set` or `map` (keyed by
//!   `x-kubernetes-list-map-keys`, merged by the first key);
//! - scalars (and `x-kubernetes-int-or-string`) are atomic;
//! - `x-kubernetes-preserve-unknown-fields` content without declared properties is untyped.
//!
//! The root `metadata` always gets `ObjectMeta`'s shape (labels and annotations are maps,
//! finalizers a set, owner references a list keyed by `uid`), whatever the schema declares,
//! because kube-apiserver coerces it to `ObjectMeta`; the `metadata` of embedded resources too.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::shape::{ListKind, Shape};

use super::node::{Additional, MAX_DEPTH, Node};

/// The shape of a whole custom resource.
pub(crate) fn resource_shape(root: &Node) -> Shape {
    let mut shape = node_shape(root, 0);
    add_type_and_object_meta(&mut shape);
    shape
}

fn add_type_and_object_meta(shape: &mut Shape) {
    match shape {
        Shape::Struct { fields, .. } => {
            fields.insert("apiVersion".to_string(), Arc::new(Shape::Atomic));
            fields.insert("kind".to_string(), Arc::new(Shape::Atomic));
            fields.insert("metadata".to_string(), Arc::new(object_meta_shape()));
        }
        // A resource whose schema is only `x-kubernetes-preserve-unknown-fields`.
        other => {
            *other = Shape::Struct {
                fields: BTreeMap::from([
                    ("apiVersion".to_string(), Arc::new(Shape::Atomic)),
                    ("kind".to_string(), Arc::new(Shape::Atomic)),
                    ("metadata".to_string(), Arc::new(object_meta_shape())),
                ]),
                other: Some(Arc::new(Shape::Untyped)),
            };
        }
    }
}

fn node_shape(node: &Node, depth: usize) -> Shape {
    if depth > MAX_DEPTH {
        return Shape::Untyped;
    }
    if node.int_or_string {
        return Shape::Atomic;
    }
    let mut shape = match node.type_.as_deref() {
        Some("object") => object_shape(node, depth),
        Some("array") => {
            let item = node.items.as_deref().map_or(Shape::Untyped, |i| node_shape(i, depth + 1));
            let kind = match node.list_type.as_deref() {
                Some("set") => ListKind::Set,
                Some("map") => match node.list_map_keys.first() {
                    Some(first) => ListKind::Map { keys: node.list_map_keys.clone(), merge_key: first.clone() },
                    None => ListKind::Atomic,
                },
                _ => ListKind::Atomic,
            };
            Shape::List { item: Arc::new(item), kind }
        }
        Some(_) => Shape::Atomic,
        // Only `x-kubernetes-preserve-unknown-fields` (or an embedded resource) may omit the type.
        None if !node.properties.is_empty() || node.additional_schema().is_some() => object_shape(node, depth),
        None => Shape::Untyped,
    };
    if node.embedded_resource {
        add_type_and_object_meta(&mut shape);
    }
    shape
}

fn object_shape(node: &Node, depth: usize) -> Shape {
    if node.map_type.as_deref() == Some("atomic") {
        return Shape::Atomic;
    }
    if node.properties.is_empty() && node.additional.is_none() && node.preserve_unknown_fields {
        return Shape::Untyped;
    }
    let fields = node.properties.iter().map(|(k, p)| (k.clone(), Arc::new(node_shape(p, depth + 1)))).collect();
    let other = match &node.additional {
        Some(Additional::Schema(s)) => Some(Arc::new(node_shape(s, depth + 1))),
        Some(Additional::Allows(true)) => Some(Arc::new(Shape::Untyped)),
        Some(Additional::Allows(false)) | None => node.preserve_unknown_fields.then(|| Arc::new(Shape::Untyped)),
    };
    Shape::Struct { fields, other }
}

/// `metav1.ObjectMeta`'s merge shape (`+listType` markers of the Go type).
pub(crate) fn object_meta_shape() -> Shape {
    let owner_reference = Shape::structure([
        ("apiVersion", Shape::Atomic),
        ("kind", Shape::Atomic),
        ("name", Shape::Atomic),
        ("uid", Shape::Atomic),
        ("controller", Shape::Atomic),
        ("blockOwnerDeletion", Shape::Atomic),
    ]);
    let managed_fields_entry = Shape::structure([
        ("manager", Shape::Atomic),
        ("operation", Shape::Atomic),
        ("apiVersion", Shape::Atomic),
        ("time", Shape::Atomic),
        ("fieldsType", Shape::Atomic),
        ("fieldsV1", Shape::Untyped),
        ("subresource", Shape::Atomic),
    ]);
    Shape::structure([
        ("name", Shape::Atomic),
        ("generateName", Shape::Atomic),
        ("namespace", Shape::Atomic),
        ("selfLink", Shape::Atomic),
        ("uid", Shape::Atomic),
        ("resourceVersion", Shape::Atomic),
        ("generation", Shape::Atomic),
        ("creationTimestamp", Shape::Atomic),
        ("deletionTimestamp", Shape::Atomic),
        ("deletionGracePeriodSeconds", Shape::Atomic),
        ("labels", Shape::map_of(Shape::Atomic)),
        ("annotations", Shape::map_of(Shape::Atomic)),
        ("ownerReferences", Shape::list_map(owner_reference, &["uid"])),
        ("finalizers", Shape::set()),
        ("managedFields", Shape::atomic_list(managed_fields_entry)),
    ])
}

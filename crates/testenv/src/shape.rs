//! Structural description of object types.
//!
//! Strategic merge patch and server-side apply both need to know, for every path in an
//! object, whether a list is merged by key, merged as a set or replaced as a whole, and
//! whether a map is tracked field by field or replaced atomically. For custom resources that
//! knowledge comes from the CRD's structural schema (`x-kubernetes-list-type`,
//! `x-kubernetes-list-map-keys`, `x-kubernetes-map-type`); for built-in kinds it comes from the
//! markers on the upstream Go types (`patchMergeKey`, `patchStrategy`, `+listType`), which
//! [`crate::builtin_shapes`] transcribes.

use std::collections::BTreeMap;
use std::sync::Arc;

/// The shape of a value at some path of an object.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum Shape {
    /// Nothing is known: objects are treated field by field, lists atomically. This is what
    /// `x-kubernetes-preserve-unknown-fields` content and undeclared fields get.
    #[default]
    Untyped,
    /// A scalar, or a map or list declared atomic: it is owned and replaced as a whole.
    Atomic,
    /// An object whose fields are tracked and merged one by one.
    Struct {
        /// Declared properties.
        fields: BTreeMap<String, Arc<Shape>>,
        /// The shape of undeclared keys (`additionalProperties`), if any are allowed.
        other: Option<Arc<Shape>>,
    },
    /// A list.
    List {
        /// The shape of every item.
        item: Arc<Shape>,
        /// How the list is merged and owned.
        kind: ListKind,
    },
}

/// How a list is merged (strategic merge patch) and owned (server-side apply).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ListKind {
    /// Replaced as a whole (`x-kubernetes-list-type: atomic`, no `patchStrategy`).
    Atomic,
    /// A set of scalars (`x-kubernetes-list-type: set`, `patchStrategy: merge` on scalars).
    Set,
    /// A list of objects identified by key fields (`x-kubernetes-list-type: map`).
    Map {
        /// `x-kubernetes-list-map-keys`: the fields that identify an item for apply.
        keys: Vec<String>,
        /// `patchMergeKey`: the field strategic merge patch merges by. Usually `keys[0]`.
        merge_key: String,
    },
}

impl Shape {
    /// The shape of field `name` of a struct (or of an untyped object).
    pub fn field(&self, name: &str) -> &Shape {
        static UNTYPED: Shape = Shape::Untyped;
        match self {
            Shape::Struct { fields, other } => match fields.get(name) {
                Some(s) => s,
                None => other.as_deref().unwrap_or(&UNTYPED),
            },
            _ => &UNTYPED,
        }
    }

    /// The shape of the items of a list.
    pub fn item(&self) -> &Shape {
        static UNTYPED: Shape = Shape::Untyped;
        match self {
            Shape::List { item, .. } => item,
            _ => &UNTYPED,
        }
    }

    /// The list kind, atomic for anything that is not a declared list.
    pub fn list_kind(&self) -> &ListKind {
        static ATOMIC: ListKind = ListKind::Atomic;
        match self {
            Shape::List { kind, .. } => kind,
            _ => &ATOMIC,
        }
    }

    /// Convenience constructor for a struct shape.
    pub fn structure<I, K>(fields: I) -> Shape
    where
        I: IntoIterator<Item = (K, Shape)>,
        K: Into<String>,
    {
        Shape::Struct { fields: fields.into_iter().map(|(k, v)| (k.into(), Arc::new(v))).collect(), other: None }
    }

    /// Convenience constructor for a map with values of one shape (`additionalProperties`).
    pub fn map_of(value: Shape) -> Shape {
        Shape::Struct { fields: BTreeMap::new(), other: Some(Arc::new(value)) }
    }

    /// Convenience constructor for a keyed list.
    pub fn list_map(item: Shape, keys: &[&str]) -> Shape {
        Shape::List {
            item: Arc::new(item),
            kind: ListKind::Map { keys: keys.iter().map(|k| k.to_string()).collect(), merge_key: keys[0].to_string() },
        }
    }

    /// Convenience constructor for a set of scalars.
    pub fn set() -> Shape {
        Shape::List { item: Arc::new(Shape::Atomic), kind: ListKind::Set }
    }

    /// Convenience constructor for an atomic list.
    pub fn atomic_list(item: Shape) -> Shape {
        Shape::List { item: Arc::new(item), kind: ListKind::Atomic }
    }
}

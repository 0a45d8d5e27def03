//! Sets of field paths and their `fieldsV1` encoding.
//!
//! This is the Rust counterpart of structured-merge-diff's `fieldpath` package: a [`FieldSet`]
//! is a trie of [`PathElement`]s whose nodes may themselves be *members* of the set. The wire
//! encoding (`metadata.managedFields[].fieldsV1`) is the one kube-apiserver writes:
//!
//! ```json
//! {"f:metadata":{"f:labels":{".":{},"f:app":{}}},
//!  "f:spec":{"f:containers":{"k:{\"name\":\"nginx\"}":{".":{},"f:image":{},"f:name":{}}}}}
//! ```
//!
//! * `f:<name>` is a field of a struct or a key of a map,
//! * `k:<json>` a list item identified by its key fields (a JSON object, keys sorted, no spaces),
//! * `v:<json>` an item of a set-typed list,
//! * `i:<index>` a list item identified by position (only ever read back, never produced here),
//! * `.` inside a node marks that node as a member when it also has children; a node with no
//!   children is always a member and is written as `{}`.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use super::MAX_DEPTH;

/// One step of a [`FieldPath`].
///
/// The derived order (fields, then keys, then values, then indices) is structured-merge-diff's
/// `PathElement.Compare`, which decides the order paths are listed in (and so the order of
/// conflicts in an error message). Keys and values are held as canonical JSON text (object keys
/// sorted, no spaces) so that they are totally ordered and compare by value.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PathElement {
    /// A struct field or map key (`f:<name>`).
    Field(String),
    /// A list-map item, as the canonical JSON object of its key fields (`k:<json>`).
    Key(String),
    /// A set item, as its canonical JSON (`v:<json>`).
    Value(String),
    /// A list item by position (`i:<index>`).
    Index(usize),
}

impl PathElement {
    /// The element for a field or map key.
    pub fn field(name: impl Into<String>) -> Self {
        PathElement::Field(name.into())
    }

    /// The element for a list-map item with the given key fields.
    pub fn key(fields: &Map<String, Value>) -> Self {
        PathElement::Key(canonical_json(&Value::Object(fields.clone())))
    }

    /// The element for a set item.
    pub fn value(value: &Value) -> Self {
        PathElement::Value(canonical_json(value))
    }

    /// The `fieldsV1` key for this element (`f:spec`, `k:{"name":"a"}`, ...).
    pub fn encode(&self) -> String {
        match self {
            PathElement::Field(name) => format!("f:{name}"),
            PathElement::Key(json) => format!("k:{json}"),
            PathElement::Value(json) => format!("v:{json}"),
            PathElement::Index(i) => format!("i:{i}"),
        }
    }

    /// Parses a `fieldsV1` key. JSON payloads are re-serialised canonically so that elements
    /// written by other servers (or by hand) compare equal to the ones computed from objects.
    pub fn decode(encoded: &str) -> Result<Self, String> {
        let (prefix, rest) =
            encoded.split_once(':').ok_or_else(|| format!("invalid path element {encoded:?}: missing type prefix"))?;
        match prefix {
            "f" => Ok(PathElement::Field(rest.to_string())),
            "k" => {
                let parsed: Value =
                    serde_json::from_str(rest).map_err(|e| format!("invalid key in path element {encoded:?}: {e}"))?;
                match parsed {
                    Value::Object(fields) if !fields.is_empty() => Ok(PathElement::key(&fields)),
                    _ => Err(format!("invalid key in path element {encoded:?}: expected a non-empty JSON object")),
                }
            }
            "v" => {
                let parsed: Value = serde_json::from_str(rest)
                    .map_err(|e| format!("invalid value in path element {encoded:?}: {e}"))?;
                Ok(PathElement::value(&parsed))
            }
            "i" => rest
                .parse::<usize>()
                .map(PathElement::Index)
                .map_err(|_| format!("invalid index in path element {encoded:?}")),
            _ => Err(format!("invalid path element {encoded:?}: unknown type prefix {prefix:?}")),
        }
    }
}

/// Renders an element the way structured-merge-diff's `PathElement.String` does:
/// `.name`, `[k1=v1,k2="v2"]`, `[="v"]`, `[3]`.
impl fmt::Display for PathElement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PathElement::Field(name) => write!(f, ".{name}"),
            PathElement::Key(json) => match serde_json::from_str::<Map<String, Value>>(json) {
                Ok(fields) => {
                    let parts: Vec<String> = fields.iter().map(|(k, v)| format!("{k}={}", canonical_json(v))).collect();
                    write!(f, "[{}]", parts.join(","))
                }
                Err(_) => write!(f, "[{json}]"),
            },
            PathElement::Value(json) => write!(f, "[={json}]"),
            PathElement::Index(i) => write!(f, "[{i}]"),
        }
    }
}

/// A path from the root of an object to one of its nodes.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FieldPath(pub Vec<PathElement>);

impl FieldPath {
    /// The elements of the path.
    pub fn elements(&self) -> &[PathElement] {
        &self.0
    }
}

/// Kube's path format, as used in conflict messages: `.spec.containers[name="nginx"].image`.
impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for element in &self.0 {
            write!(f, "{element}")?;
        }
        Ok(())
    }
}

/// A set of field paths, stored as a trie.
///
/// Invariant: no child set is empty, so structural equality is set equality.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldSet {
    members: BTreeSet<PathElement>,
    children: BTreeMap<PathElement, FieldSet>,
}

impl FieldSet {
    /// The empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether the set has no paths.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty() && self.children.is_empty()
    }

    /// Number of paths in the set.
    pub fn len(&self) -> usize {
        self.members.len() + self.children.values().map(FieldSet::len).sum::<usize>()
    }

    /// Adds a path. The empty path (the root) is never a member and is ignored.
    pub fn insert(&mut self, path: &[PathElement]) {
        let Some((last, parents)) = path.split_last() else {
            return;
        };
        let mut node = self;
        for element in parents {
            node = node.children.entry(element.clone()).or_default();
        }
        node.members.insert(last.clone());
    }

    /// Removes `path` itself (paths below it stay). Returns whether it was a member.
    pub fn remove(&mut self, path: &[PathElement]) -> bool {
        let Some((first, rest)) = path.split_first() else {
            return false;
        };
        if rest.is_empty() {
            return self.members.remove(first);
        }
        let Some(child) = self.children.get_mut(first) else {
            return false;
        };
        let removed = child.remove(rest);
        if child.is_empty() {
            self.children.remove(first);
        }
        removed
    }

    /// Whether `path` itself is a member.
    pub fn contains(&self, path: &[PathElement]) -> bool {
        let Some((last, parents)) = path.split_last() else {
            return false;
        };
        self.descend(parents).is_some_and(|node| node.members.contains(last))
    }

    /// Whether `path` or any path below it is a member.
    pub fn contains_prefix(&self, path: &[PathElement]) -> bool {
        let Some((last, parents)) = path.split_last() else {
            return !self.is_empty();
        };
        self.descend(parents).is_some_and(|node| node.members.contains(last) || node.children.contains_key(last))
    }

    /// The sub-trie at `path` (the set of paths relative to it), if any.
    fn descend(&self, path: &[PathElement]) -> Option<&FieldSet> {
        let mut node = self;
        for element in path {
            node = node.children.get(element)?;
        }
        Some(node)
    }

    /// Removes `path` and every path below it.
    pub fn remove_prefix(&mut self, path: &[PathElement]) {
        let Some((first, rest)) = path.split_first() else {
            *self = FieldSet::new();
            return;
        };
        if rest.is_empty() {
            self.members.remove(first);
            self.children.remove(first);
            return;
        }
        if let Some(child) = self.children.get_mut(first) {
            child.remove_prefix(rest);
            if child.is_empty() {
                self.children.remove(first);
            }
        }
    }

    /// Paths in either set.
    pub fn union(&self, other: &FieldSet) -> FieldSet {
        let mut out = self.clone();
        out.members.extend(other.members.iter().cloned());
        for (element, child) in &other.children {
            let merged = match out.children.get(element) {
                Some(mine) => mine.union(child),
                None => child.clone(),
            };
            out.children.insert(element.clone(), merged);
        }
        out
    }

    /// Paths in `self` but not in `other`.
    pub fn difference(&self, other: &FieldSet) -> FieldSet {
        let members = self.members.difference(&other.members).cloned().collect();
        let mut children = BTreeMap::new();
        for (element, child) in &self.children {
            let rest = match other.children.get(element) {
                Some(theirs) => child.difference(theirs),
                None => child.clone(),
            };
            if !rest.is_empty() {
                children.insert(element.clone(), rest);
            }
        }
        FieldSet { members, children }
    }

    /// Paths in both sets.
    pub fn intersection(&self, other: &FieldSet) -> FieldSet {
        let members = self.members.intersection(&other.members).cloned().collect();
        let mut children = BTreeMap::new();
        for (element, child) in &self.children {
            if let Some(theirs) = other.children.get(element) {
                let common = child.intersection(theirs);
                if !common.is_empty() {
                    children.insert(element.clone(), common);
                }
            }
        }
        FieldSet { members, children }
    }

    /// Every path of the set, in structured-merge-diff's iteration order: at each node its
    /// members first, then the paths below each child.
    pub fn paths(&self) -> Vec<FieldPath> {
        let mut out = Vec::with_capacity(self.len());
        let mut prefix = Vec::new();
        self.collect_paths(&mut prefix, &mut out);
        out
    }

    fn collect_paths(&self, prefix: &mut Vec<PathElement>, out: &mut Vec<FieldPath>) {
        for member in &self.members {
            let mut path = prefix.clone();
            path.push(member.clone());
            out.push(FieldPath(path));
        }
        for (element, child) in &self.children {
            prefix.push(element.clone());
            child.collect_paths(prefix, out);
            prefix.pop();
        }
    }

    /// The `fieldsV1` JSON encoding of the set.
    pub fn to_fields_v1(&self) -> Value {
        let mut out = Map::new();
        for member in &self.members {
            if !self.children.contains_key(member) {
                out.insert(member.encode(), Value::Object(Map::new()));
            }
        }
        for (element, child) in &self.children {
            let mut encoded = match child.to_fields_v1() {
                Value::Object(map) => map,
                _ => Map::new(),
            };
            if self.members.contains(element) {
                encoded.insert(".".to_string(), Value::Object(Map::new()));
            }
            out.insert(element.encode(), Value::Object(encoded));
        }
        Value::Object(out)
    }

    /// Parses a `fieldsV1` value. `null` is the empty set; anything that is not a trie of
    /// objects with well-formed keys, or that nests deeper than the server accepts, is an
    /// error.
    pub fn from_fields_v1(value: &Value) -> Result<FieldSet, String> {
        match value {
            Value::Null => Ok(FieldSet::new()),
            Value::Object(map) => {
                if super::typed::depth_exceeds(value, MAX_DEPTH) {
                    return Err(format!("fieldsV1 is nested deeper than {MAX_DEPTH} levels"));
                }
                Self::parse_node(map)
            }
            _ => Err("fieldsV1 must be a JSON object".to_string()),
        }
    }

    fn parse_node(map: &Map<String, Value>) -> Result<FieldSet, String> {
        let mut set = FieldSet::new();
        for (key, child) in map {
            if key == "." {
                // Membership of this node is recorded by the parent.
                continue;
            }
            let element = PathElement::decode(key)?;
            let Value::Object(child_map) = child else {
                return Err(format!("fieldsV1 entry {key:?} must be a JSON object"));
            };
            if child_map.is_empty() || child_map.contains_key(".") {
                set.members.insert(element.clone());
            }
            let sub = Self::parse_node(child_map)?;
            if !sub.is_empty() {
                set.children.insert(element, sub);
            }
        }
        Ok(set)
    }
}

impl Serialize for FieldSet {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.to_fields_v1().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for FieldSet {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        FieldSet::from_fields_v1(&value).map_err(serde::de::Error::custom)
    }
}

/// Compact JSON with object keys sorted: the form `k:` and `v:` elements use.
///
/// `serde_json::Map` is ordered by key in this build (no `preserve_order`), so plain
/// serialisation is already canonical; sorting is re-done explicitly anyway so the output
/// does not depend on that feature being off.
pub(crate) fn canonical_json(value: &Value) -> String {
    fn sorted(value: &Value) -> Value {
        match value {
            Value::Object(map) => {
                let ordered: BTreeMap<&String, Value> = map.iter().map(|(k, v)| (k, sorted(v))).collect();
                Value::Object(ordered.into_iter().map(|(k, v)| (k.clone(), v)).collect())
            }
            Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    match value {
        Value::Object(_) | Value::Array(_) => sorted(value).to_string(),
        scalar => scalar.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn f(name: &str) -> PathElement {
        PathElement::field(name)
    }

    fn key(json: Value) -> PathElement {
        match json {
            Value::Object(map) => PathElement::key(&map),
            _ => unreachable!("test keys are objects"),
        }
    }

    #[test]
    fn test_fields_v1_round_trip_of_kube_encoding() {
        let encoded = json!({
            "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
            "f:spec": {"f:containers": {"k:{\"name\":\"nginx\"}": {".": {}, "f:image": {}, "f:name": {}}}}
        });
        let set = FieldSet::from_fields_v1(&encoded).unwrap();
        assert_eq!(set.to_fields_v1(), encoded);
        assert!(set.contains(&[f("metadata"), f("labels")]));
        assert!(set.contains(&[f("metadata"), f("labels"), f("app")]));
        assert!(!set.contains(&[f("metadata")]));
        assert!(!set.contains(&[f("spec"), f("containers")]));
        assert!(set.contains(&[f("spec"), f("containers"), key(json!({"name": "nginx"}))]));
    }

    #[test]
    fn test_key_elements_are_canonicalised_on_decode() {
        let encoded = json!({"k:{ \"protocol\": \"TCP\", \"containerPort\": 80 }": {}});
        let set = FieldSet::from_fields_v1(&encoded).unwrap();
        assert_eq!(set.to_fields_v1(), json!({"k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {}}));
    }

    #[test]
    fn test_set_items_and_indices_round_trip() {
        let encoded = json!({"f:finalizers": {".": {}, "v:\"a\"": {}, "v:\"b\"": {}}, "f:x": {"i:3": {}}});
        let set = FieldSet::from_fields_v1(&encoded).unwrap();
        assert_eq!(set.to_fields_v1(), encoded);
        assert_eq!(set.len(), 4);
    }

    #[test]
    fn test_null_fields_v1_is_empty_set() {
        assert!(FieldSet::from_fields_v1(&Value::Null).unwrap().is_empty());
    }

    #[test]
    fn test_malformed_fields_v1_is_rejected() {
        assert!(FieldSet::from_fields_v1(&json!([])).is_err());
        assert!(FieldSet::from_fields_v1(&json!({"f:a": 1})).is_err());
        assert!(FieldSet::from_fields_v1(&json!({"x:a": {}})).is_err());
        assert!(FieldSet::from_fields_v1(&json!({"noprefix": {}})).is_err());
        assert!(FieldSet::from_fields_v1(&json!({"k:[1]": {}})).is_err());
        assert!(FieldSet::from_fields_v1(&json!({"k:{}": {}})).is_err());
        assert!(FieldSet::from_fields_v1(&json!({"k:{bad": {}})).is_err());
        assert!(FieldSet::from_fields_v1(&json!({"i:-1": {}})).is_err());
    }

    #[test]
    fn test_deeply_nested_fields_v1_is_rejected_not_overflowed() {
        let mut v = json!({});
        for _ in 0..300 {
            v = json!({ "f:a": v });
        }
        let err = FieldSet::from_fields_v1(&v).unwrap_err();
        assert!(err.contains("deeper"), "{err}");
    }

    #[test]
    fn test_path_display_uses_kube_format() {
        let p = FieldPath(vec![f("spec"), f("containers"), key(json!({"name": "nginx"})), f("image")]);
        assert_eq!(p.to_string(), ".spec.containers[name=\"nginx\"].image");
        let p = FieldPath(vec![f("spec"), f("ports"), key(json!({"protocol": "TCP", "port": 80}))]);
        assert_eq!(p.to_string(), ".spec.ports[port=80,protocol=\"TCP\"]");
        let p = FieldPath(vec![f("metadata"), f("finalizers"), PathElement::value(&json!("a"))]);
        assert_eq!(p.to_string(), ".metadata.finalizers[=\"a\"]");
        assert_eq!(FieldPath(vec![f("x"), PathElement::Index(2)]).to_string(), ".x[2]");
    }

    #[test]
    fn test_union_difference_intersection() {
        let mut a = FieldSet::new();
        a.insert(&[f("spec"), f("a")]);
        a.insert(&[f("spec"), f("b")]);
        let mut b = FieldSet::new();
        b.insert(&[f("spec"), f("b")]);
        b.insert(&[f("spec"), f("c")]);

        let u = a.union(&b);
        assert_eq!(u.len(), 3);
        let d = a.difference(&b);
        assert_eq!(d.paths(), vec![FieldPath(vec![f("spec"), f("a")])]);
        let i = a.intersection(&b);
        assert_eq!(i.paths(), vec![FieldPath(vec![f("spec"), f("b")])]);
        assert!(a.difference(&a).is_empty());
        assert_eq!(a.difference(&a), FieldSet::new(), "no empty children are left behind");
    }

    #[test]
    fn test_member_with_children_survives_difference_of_children() {
        let mut a = FieldSet::new();
        a.insert(&[f("labels")]);
        a.insert(&[f("labels"), f("x")]);
        let mut b = FieldSet::new();
        b.insert(&[f("labels"), f("x")]);
        let d = a.difference(&b);
        assert!(d.contains(&[f("labels")]));
        assert_eq!(d.to_fields_v1(), json!({"f:labels": {}}));
    }

    #[test]
    fn test_contains_prefix_and_remove_prefix() {
        let mut a = FieldSet::new();
        a.insert(&[f("metadata"), f("managedFields")]);
        a.insert(&[f("metadata"), f("labels"), f("x")]);
        assert!(a.contains_prefix(&[f("metadata")]));
        assert!(a.contains_prefix(&[f("metadata"), f("labels")]));
        assert!(!a.contains_prefix(&[f("spec")]));
        a.remove_prefix(&[f("metadata"), f("managedFields")]);
        assert!(!a.contains_prefix(&[f("metadata"), f("managedFields")]));
        a.remove_prefix(&[f("metadata"), f("labels")]);
        assert!(a.is_empty());
    }

    #[test]
    fn test_paths_list_members_before_children() {
        let mut a = FieldSet::new();
        a.insert(&[f("spec"), f("z")]);
        a.insert(&[f("spec"), f("a"), f("b")]);
        a.insert(&[f("apiVersion")]);
        let rendered: Vec<String> = a.paths().iter().map(ToString::to_string).collect();
        assert_eq!(rendered, vec![".apiVersion", ".spec.z", ".spec.a.b"]);
    }

    #[test]
    fn test_serde_uses_fields_v1() {
        let mut a = FieldSet::new();
        a.insert(&[f("spec"), f("x")]);
        assert_eq!(serde_json::to_value(&a).unwrap(), json!({"f:spec": {"f:x": {}}}));
        let back: FieldSet = serde_json::from_value(json!({"f:spec": {"f:x": {}}})).unwrap();
        assert_eq!(back, a);
    }
}

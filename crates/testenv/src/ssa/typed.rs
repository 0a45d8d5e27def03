//! Shape-driven walks over JSON values: field sets, merge, comparison and removal.
//!
//! These follow structured-merge-diff's `typed` package (`tofieldset.go`, `merge.go`,
//! `compare.go`, `remove.go`), with [`Shape`] in place of its schema:
//!
//! * a value is a *leaf* when its shape is atomic (scalars, atomic lists and maps, untyped
//!   arrays) or when it does not have the container type its shape expects;
//! * objects are walked field by field (structs, `additionalProperties` maps, untyped objects);
//! * `set` lists are walked by item value and `map` lists by the item's key fields.
//!
//! All walks recurse once per nesting level of the value; callers reject values nested deeper
//! than [`super::MAX_DEPTH`] before calling them (see [`depth_exceeds`]).

use std::collections::{BTreeSet, HashMap, HashSet};

use serde_json::{Map, Value};

use super::fieldset::{FieldPath, FieldSet, PathElement};
use crate::shape::{ListKind, Shape};

/// Whether `value` has more than `max` levels of nested objects and arrays (a scalar or an
/// empty container at the top is one level). Iterative, so it is safe on any input.
pub(crate) fn depth_exceeds(value: &Value, max: usize) -> bool {
    let mut stack = vec![(value, 1usize)];
    while let Some((v, depth)) = stack.pop() {
        if depth > max {
            return true;
        }
        let children: Box<dyn Iterator<Item = &Value>> = match v {
            Value::Object(map) => Box::new(map.values()),
            Value::Array(items) => Box::new(items.iter()),
            _ => continue,
        };
        for child in children {
            if child.is_object() || child.is_array() {
                stack.push((child, depth + 1));
            }
        }
    }
    false
}

/// How a value is walked, given its shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Node<'s> {
    /// Owned and compared as a whole.
    Leaf,
    /// Walked field by field.
    Map,
    /// Walked item by item (set or list-map).
    List(&'s ListKind),
}

fn classify<'s>(shape: &'s Shape, value: &Value) -> Node<'s> {
    match shape {
        Shape::Atomic => Node::Leaf,
        Shape::Untyped | Shape::Struct { .. } => {
            if value.is_object() {
                Node::Map
            } else {
                Node::Leaf
            }
        }
        Shape::List { kind, .. } => match kind {
            ListKind::Atomic => Node::Leaf,
            ListKind::Set | ListKind::Map { .. } => {
                if value.is_array() {
                    Node::List(kind)
                } else {
                    Node::Leaf
                }
            }
        },
    }
}

/// Whether `key` is a declared property of a struct. Undeclared keys (map entries, untyped
/// content) are members of a field set themselves, as structured-merge-diff records them.
fn is_declared(shape: &Shape, key: &str) -> bool {
    matches!(shape, Shape::Struct { fields, .. } if fields.contains_key(key))
}

/// Default values of list-map key fields, used when an item omits them. structured-merge-diff
/// takes these from the schema's `default`; the only defaulted key among the built-in types is
/// `protocol` (`TCP`) on container, service and endpoint ports, and CRDs copying those
/// conventions default it the same way.
fn default_key_value(key: &str) -> Option<Value> {
    (key == "protocol").then(|| Value::String("TCP".to_string()))
}

/// The path element identifying `item` in a list of the given kind.
///
/// `Ok(None)` means the item cannot be identified and is not tracked (only when `strict` is
/// off: live objects may hold items a client would not be allowed to apply).
pub(crate) fn item_element(kind: &ListKind, item: &Value, strict: bool) -> Result<Option<PathElement>, String> {
    match kind {
        ListKind::Atomic => Ok(None),
        ListKind::Set => Ok(Some(PathElement::value(item))),
        ListKind::Map { keys, .. } => {
            let Value::Object(object) = item else {
                return if strict {
                    Err("associative list with keys has an element that is not a map".to_string())
                } else {
                    Ok(None)
                };
            };
            let mut fields = Map::new();
            for key in keys {
                match object.get(key) {
                    Some(v) if !v.is_null() => {
                        fields.insert(key.clone(), v.clone());
                    }
                    _ => {
                        if let Some(default) = default_key_value(key) {
                            fields.insert(key.clone(), default);
                        } else if strict {
                            return Err(format!(
                                "associative list with keys has an element that omits key field \
                                 {key:?} (and doesn't have default value)"
                            ));
                        }
                    }
                }
            }
            if fields.is_empty() {
                return Ok(None);
            }
            Ok(Some(PathElement::key(&fields)))
        }
    }
}

/// The set of fields `value` specifies: every leaf, every list item, every map entry that is
/// not a declared struct field, and every field whose value is `null` or `{}`.
///
/// With `strict`, list-map items without their key fields and duplicated items are errors
/// (as they are for an applied configuration); otherwise they are skipped.
pub(crate) fn field_set(value: &Value, shape: &Shape, strict: bool) -> Result<FieldSet, String> {
    let mut set = FieldSet::new();
    let mut path = Vec::new();
    walk_field_set(value, shape, &mut path, &mut set, strict)?;
    Ok(set)
}

fn walk_field_set(
    value: &Value,
    shape: &Shape,
    path: &mut Vec<PathElement>,
    set: &mut FieldSet,
    strict: bool,
) -> Result<(), String> {
    match (classify(shape, value), value) {
        (Node::Map, Value::Object(object)) => {
            for (key, child) in object {
                path.push(PathElement::Field(key.clone()));
                walk_field_set(child, shape.field(key), path, set, strict)?;
                let empty_map = matches!(child, Value::Object(m) if m.is_empty());
                if child.is_null() || empty_map || !is_declared(shape, key) {
                    set.insert(path);
                }
                path.pop();
            }
        }
        (Node::List(kind), Value::Array(items)) => {
            let mut seen = HashSet::new();
            for (index, item) in items.iter().enumerate() {
                let element = item_element(kind, item, strict)
                    .map_err(|e| format!("{}: element {index}: {e}", FieldPath(path.clone())))?;
                let Some(element) = element else { continue };
                if !seen.insert(element.clone()) {
                    if strict {
                        return Err(format!("{}: duplicate entries for key {element}", FieldPath(path.clone())));
                    }
                    continue;
                }
                path.push(element);
                walk_field_set(item, shape.item(), path, set, strict)?;
                set.insert(path);
                path.pop();
            }
        }
        _ => set.insert(path),
    }
    Ok(())
}

/// Merges an applied configuration into a live value, as structured-merge-diff's
/// `TypedValue.Merge` does: objects field by field, keyed lists item by item, everything else
/// replaced by the configuration's value. A `null` field in the configuration removes the
/// field (the applier still owns it, see [`field_set`]).
pub(crate) fn merge(lhs: Option<&Value>, rhs: &Value, shape: &Shape) -> Value {
    match (classify(shape, rhs), rhs) {
        (Node::Map, Value::Object(config)) => {
            let mut out = match lhs {
                Some(Value::Object(live)) => live.clone(),
                _ => Map::new(),
            };
            for (key, value) in config {
                if value.is_null() {
                    out.remove(key);
                    continue;
                }
                let merged = merge(out.get(key), value, shape.field(key));
                out.insert(key.clone(), merged);
            }
            Value::Object(out)
        }
        (Node::List(kind), Value::Array(config)) => match lhs {
            Some(Value::Array(live)) => Value::Array(merge_lists(live, config, kind, shape.item())),
            _ => Value::Array(config.iter().map(|item| merge(None, item, shape.item())).collect()),
        },
        _ => rhs.clone(),
    }
}

/// Merges two keyed lists the way structured-merge-diff orders them: items only in the live
/// list keep their place, items of the configuration appear in the configuration's order, and
/// an item in both is merged where the configuration puts it.
///
/// Live items sharing a key (which the API allows for some lists, e.g. `env`) are kept as
/// they are unless the configuration names that key; then the first one is merged with the
/// configuration's item and the other copies are dropped.
fn merge_lists(live: &[Value], config: &[Value], kind: &ListKind, item_shape: &Shape) -> Vec<Value> {
    let lhs: Vec<Option<PathElement>> = live.iter().map(|v| item_element(kind, v, false).ok().flatten()).collect();
    let rhs: Vec<Option<PathElement>> = config.iter().map(|v| item_element(kind, v, false).ok().flatten()).collect();

    let mut lhs_first: HashMap<&PathElement, usize> = HashMap::new();
    for (i, element) in lhs.iter().enumerate() {
        if let Some(element) = element {
            lhs_first.entry(element).or_insert(i);
        }
    }
    let rhs_keys: HashSet<&PathElement> = rhs.iter().flatten().collect();
    let mut shared_seen = HashSet::new();
    let shared: Vec<&PathElement> =
        rhs.iter().flatten().filter(|e| lhs_first.contains_key(*e) && shared_seen.insert(*e)).collect();
    let mut shared = shared.into_iter();
    let mut next_shared = shared.next();

    let in_rhs = |e: &Option<PathElement>| e.as_ref().is_some_and(|e| rhs_keys.contains(e));
    let is_first = |i: usize| lhs[i].as_ref().and_then(|e| lhs_first.get(e)) == Some(&i);

    // `lhs` and `rhs` are parallel to `live` and `config`, and every index used below is
    // checked against their lengths first.
    let mut out = Vec::with_capacity(live.len().max(config.len()));
    let (mut li, mut ri) = (0, 0);
    while li < live.len() || ri < config.len() {
        if li < live.len() && ri < config.len() && in_rhs(&lhs[li]) && is_first(li) {
            if lhs[li] == rhs[ri] {
                out.push(merge(Some(&live[li]), &config[ri], item_shape));
                li += 1;
                ri += 1;
                next_shared = shared.next();
                continue;
            }
            if next_shared.is_some() && next_shared != lhs[li].as_ref() {
                // A shared item the configuration places later: emit it when we get there.
                li += 1;
                continue;
            }
        }
        if li < live.len() {
            if !in_rhs(&lhs[li]) {
                out.push(live[li].clone());
                li += 1;
                continue;
            }
            if !is_first(li) {
                // A duplicate of a key the configuration names: replaced by the merged item.
                li += 1;
                continue;
            }
        }
        if ri < config.len() {
            let counterpart = rhs[ri].as_ref().and_then(|e| lhs_first.get(e)).map(|&i| &live[i]);
            out.push(merge(counterpart, &config[ri], item_shape));
            if next_shared.is_some() && next_shared == rhs[ri].as_ref() {
                next_shared = shared.next();
            }
            ri += 1;
            continue;
        }
        // Only a live item that was already emitted through the configuration is left.
        li += 1;
    }
    out
}

/// The difference between two values, as structured-merge-diff's `TypedValue.Compare`
/// reports it: leaves added, removed or changed, plus containers (objects, list items)
/// that appeared or disappeared as a whole.
#[derive(Debug, Default)]
pub(crate) struct Comparison {
    /// Paths present only in the new value.
    pub added: FieldSet,
    /// Leaves present in both values with different contents.
    pub modified: FieldSet,
    /// Paths present only in the old value.
    pub removed: FieldSet,
}

impl Comparison {
    /// Applies `strip` (which removes paths) to all three sets.
    pub fn filter(&mut self, strip: impl Fn(&mut FieldSet)) {
        strip(&mut self.added);
        strip(&mut self.modified);
        strip(&mut self.removed);
    }
}

/// Compares `lhs` (old) with `rhs` (new).
pub(crate) fn compare(lhs: &Value, rhs: &Value, shape: &Shape) -> Comparison {
    let mut out = Comparison::default();
    let mut path = Vec::new();
    compare_node(Some(lhs), Some(rhs), shape, &mut path, &mut out);
    out
}

fn compare_leaf(lhs: Option<&Value>, rhs: Option<&Value>, path: &[PathElement], out: &mut Comparison) {
    match (lhs, rhs) {
        (None, Some(_)) => out.added.insert(path),
        (Some(_), None) => out.removed.insert(path),
        (Some(a), Some(b)) if a != b => out.modified.insert(path),
        _ => {}
    }
}

fn compare_container(lhs: Option<&Value>, rhs: Option<&Value>, path: &[PathElement], out: &mut Comparison) {
    match (lhs, rhs) {
        (None, Some(_)) => out.added.insert(path),
        (Some(_), None) => out.removed.insert(path),
        _ => {}
    }
}

fn compare_node(
    lhs: Option<&Value>,
    rhs: Option<&Value>,
    shape: &Shape,
    path: &mut Vec<PathElement>,
    out: &mut Comparison,
) {
    let node = match (lhs.map(|v| classify(shape, v)), rhs.map(|v| classify(shape, v))) {
        (Some(a), Some(b)) if a != b => {
            // The value changed type (say, a string became an object): the old content is
            // removed, the new one added, and the node itself modified.
            let mut tmp = Comparison::default();
            compare_node(lhs, None, shape, path, &mut tmp);
            compare_node(None, rhs, shape, path, &mut tmp);
            tmp.added.remove(path);
            tmp.removed.remove(path);
            out.added = out.added.union(&tmp.added);
            out.removed = out.removed.union(&tmp.removed);
            out.modified.insert(path);
            return;
        }
        (Some(a), _) => a,
        (None, Some(b)) => b,
        (None, None) => return,
    };
    match node {
        Node::Leaf => compare_leaf(lhs, rhs, path, out),
        Node::Map => {
            let l = lhs.and_then(Value::as_object);
            let r = rhs.and_then(Value::as_object);
            // Empty (or absent) on both sides: a leaf, which keeps `{}` distinct from absent.
            if l.is_none_or(Map::is_empty) && r.is_none_or(Map::is_empty) {
                compare_leaf(lhs, rhs, path, out);
                return;
            }
            let keys: BTreeSet<&String> = l.into_iter().chain(r).flat_map(Map::keys).collect();
            for key in keys {
                path.push(PathElement::Field(key.clone()));
                compare_node(l.and_then(|m| m.get(key)), r.and_then(|m| m.get(key)), shape.field(key), path, out);
                path.pop();
            }
            compare_container(lhs, rhs, path, out);
        }
        Node::List(kind) => {
            let l = lhs.and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
            let r = rhs.and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
            if l.is_empty() && r.is_empty() {
                compare_leaf(lhs, rhs, path, out);
                return;
            }
            let index = |items: &[Value]| {
                let mut order = Vec::new();
                let mut by_element: HashMap<PathElement, usize> = HashMap::new();
                for (i, item) in items.iter().enumerate() {
                    if let Ok(Some(e)) = item_element(kind, item, false)
                        && !by_element.contains_key(&e)
                    {
                        by_element.insert(e.clone(), i);
                        order.push(e);
                    }
                }
                (order, by_element)
            };
            let (l_order, l_index) = index(l);
            let (r_order, r_index) = index(r);
            let mut seen = HashSet::new();
            for element in l_order.iter().chain(r_order.iter()) {
                if !seen.insert(element) {
                    continue;
                }
                path.push(element.clone());
                compare_node(
                    l_index.get(element).and_then(|&i| l.get(i)),
                    r_index.get(element).and_then(|&i| r.get(i)),
                    shape.item(),
                    path,
                    out,
                );
                path.pop();
            }
            compare_container(lhs, rhs, path, out);
        }
    }
}

/// Whether list item `item` (at `index`) is the one `element` names.
fn item_matches(kind: &ListKind, index: usize, item: &Value, element: &PathElement) -> bool {
    match element {
        PathElement::Index(i) => *i == index,
        PathElement::Field(_) => false,
        PathElement::Key(_) | PathElement::Value(_) => {
            item_element(kind, item, false).ok().flatten().as_ref() == Some(element)
        }
    }
}

/// The value at `path`, if present.
pub(crate) fn get_at<'v>(value: &'v Value, path: &[PathElement], shape: &Shape) -> Option<&'v Value> {
    let Some((first, rest)) = path.split_first() else {
        return Some(value);
    };
    match (first, value) {
        (PathElement::Field(name), Value::Object(object)) => get_at(object.get(name)?, rest, shape.field(name)),
        (PathElement::Field(_), _) => None,
        (element, Value::Array(items)) => {
            let kind = shape.list_kind();
            let item = items
                .iter()
                .enumerate()
                .find(|(i, item)| item_matches(kind, *i, item, element))
                .map(|(_, item)| item)?;
            get_at(item, rest, shape.item())
        }
        _ => None,
    }
}

/// Removes the node at `path` from `value` (every matching item, for list items). Returns
/// whether anything was removed. The key fields of a list-map item are never removed on
/// their own: they are the item's identity and go only with the item.
pub(crate) fn remove_at(value: &mut Value, path: &[PathElement], shape: &Shape) -> bool {
    let Some((first, rest)) = path.split_first() else {
        return false;
    };
    match (first, value) {
        (PathElement::Field(name), Value::Object(object)) => {
            if rest.is_empty() {
                return object.remove(name).is_some();
            }
            match object.get_mut(name) {
                Some(child) => remove_at(child, rest, shape.field(name)),
                None => false,
            }
        }
        (PathElement::Field(_), _) => false,
        (element, Value::Array(items)) => {
            let kind = shape.list_kind();
            if rest.is_empty() {
                let before = items.len();
                let mut index = 0;
                items.retain(|item| {
                    let keep = !item_matches(kind, index, item, element);
                    index += 1;
                    keep
                });
                return items.len() != before;
            }
            if let (ListKind::Map { keys, .. }, [PathElement::Field(field)]) = (kind, rest)
                && keys.contains(field)
            {
                return false;
            }
            let mut removed = false;
            for (i, item) in items.iter_mut().enumerate() {
                if item_matches(kind, i, item, element) {
                    removed |= remove_at(item, rest, shape.item());
                }
            }
            removed
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn containers_shape() -> Shape {
        Shape::structure([(
            "spec",
            Shape::structure([(
                "containers",
                Shape::list_map(
                    Shape::structure([("ports", Shape::list_map(Shape::Untyped, &["containerPort", "protocol"]))]),
                    &["name"],
                ),
            )]),
        )])
    }

    fn finalizer_shape() -> Shape {
        Shape::structure([("metadata", Shape::structure([("finalizers", Shape::set())]))])
    }

    #[test]
    fn test_depth_limit_counts_nesting() {
        assert!(!depth_exceeds(&json!({"a": {"b": 1}}), 2));
        assert!(depth_exceeds(&json!({"a": {"b": {}}}), 2));
        assert!(!depth_exceeds(&json!(1), 1));
    }

    #[test]
    fn test_field_set_marks_list_items_and_undeclared_keys_as_members() {
        let shape = containers_shape();
        let set =
            field_set(&json!({"spec": {"containers": [{"name": "a", "image": "x"}]}, "extra": {"k": 1}}), &shape, true)
                .unwrap();
        assert_eq!(
            set.to_fields_v1(),
            json!({
                "f:extra": {".": {}, "f:k": {}},
                "f:spec": {"f:containers": {"k:{\"name\":\"a\"}": {".": {}, "f:image": {}, "f:name": {}}}}
            })
        );
    }

    #[test]
    fn test_field_set_null_and_empty_object_are_members() {
        let shape = Shape::structure([("spec", Shape::structure([("a", Shape::Untyped)]))]);
        let set = field_set(&json!({"spec": {"a": null, "b": {}}}), &shape, true).unwrap();
        assert_eq!(set.to_fields_v1(), json!({"f:spec": {"f:a": {}, "f:b": {}}}));
        let set = field_set(&json!({"spec": {}}), &shape, true).unwrap();
        assert_eq!(set.to_fields_v1(), json!({"f:spec": {}}));
    }

    #[test]
    fn test_field_set_defaults_protocol_key() {
        let shape = containers_shape();
        let set = field_set(
            &json!({"spec": {"containers": [{"name": "a", "ports": [{"containerPort": 80}]}]}}),
            &shape,
            true,
        )
        .unwrap();
        let rendered: Vec<String> = set.paths().iter().map(ToString::to_string).collect();
        assert!(
            rendered.contains(&".spec.containers[name=\"a\"].ports[containerPort=80,protocol=\"TCP\"]".to_string()),
            "{rendered:?}"
        );
    }

    #[test]
    fn test_strict_field_set_rejects_missing_key_and_duplicates() {
        let shape = containers_shape();
        let err = field_set(&json!({"spec": {"containers": [{"image": "x"}]}}), &shape, true).unwrap_err();
        assert_eq!(
            err,
            ".spec.containers: element 0: associative list with keys has an element that omits \
             key field \"name\" (and doesn't have default value)"
        );
        let err =
            field_set(&json!({"spec": {"containers": [{"name": "a"}, {"name": "a"}]}}), &shape, true).unwrap_err();
        assert_eq!(err, ".spec.containers: duplicate entries for key [name=\"a\"]");
        let err = field_set(&json!({"spec": {"containers": ["x"]}}), &shape, true).unwrap_err();
        assert!(err.contains("not a map"), "{err}");
        // Live objects are tolerated: the unidentifiable item is just not tracked.
        let set = field_set(&json!({"spec": {"containers": [{"image": "x"}]}}), &shape, false).unwrap();
        assert!(set.is_empty());
    }

    #[test]
    fn test_set_items_are_value_elements() {
        let set = field_set(&json!({"metadata": {"finalizers": ["a", "b"]}}), &finalizer_shape(), true).unwrap();
        assert_eq!(set.to_fields_v1(), json!({"f:metadata": {"f:finalizers": {"v:\"a\"": {}, "v:\"b\"": {}}}}));
    }

    #[test]
    fn test_merge_keyed_list_merges_items_by_key() {
        let shape = containers_shape();
        let live = json!({"spec": {"containers": [
            {"name": "a", "image": "1", "tty": true},
            {"name": "b", "image": "1"}
        ]}});
        let config = json!({"spec": {"containers": [{"name": "a", "image": "2"}]}});
        let merged = merge(Some(&live), &config, &shape);
        assert_eq!(
            merged,
            json!({"spec": {"containers": [
                {"name": "a", "image": "2", "tty": true},
                {"name": "b", "image": "1"}
            ]}})
        );
    }

    #[test]
    fn test_merge_list_order_follows_structured_merge_diff() {
        let shape = containers_shape();
        let item = |n: &str| json!({"name": n});
        let live = json!({"spec": {"containers": [item("x"), item("a"), item("y"), item("b")]}});
        let config = json!({"spec": {"containers": [item("b"), item("n"), item("a")]}});
        let merged = merge(Some(&live), &config, &shape);
        let names: Vec<&str> =
            merged["spec"]["containers"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
        assert_eq!(names, vec!["x", "y", "b", "n", "a"]);
    }

    #[test]
    fn test_merge_swapped_items_terminates_in_config_order() {
        let shape = containers_shape();
        let live = json!({"spec": {"containers": [{"name": "a"}, {"name": "b"}]}});
        let config = json!({"spec": {"containers": [{"name": "b"}, {"name": "a"}]}});
        let merged = merge(Some(&live), &config, &shape);
        assert_eq!(merged, config);
    }

    #[test]
    fn test_merge_keeps_live_duplicates_not_named_by_config() {
        let shape = containers_shape();
        let live = json!({"spec": {"containers": [{"name": "d", "v": 1}, {"name": "d", "v": 2}, {"name": "e"}]}});
        let config = json!({"spec": {"containers": [{"name": "e", "v": 3}]}});
        let merged = merge(Some(&live), &config, &shape);
        assert_eq!(
            merged,
            json!({"spec": {"containers": [{"name": "d", "v": 1}, {"name": "d", "v": 2}, {"name": "e", "v": 3}]}})
        );
        let config = json!({"spec": {"containers": [{"name": "d", "v": 9}]}});
        let merged = merge(Some(&live), &config, &shape);
        assert_eq!(merged, json!({"spec": {"containers": [{"name": "d", "v": 9}, {"name": "e"}]}}));
    }

    #[test]
    fn test_merge_set_is_union() {
        let shape = finalizer_shape();
        let live = json!({"metadata": {"finalizers": ["a", "b"]}});
        let config = json!({"metadata": {"finalizers": ["c", "a"]}});
        let merged = merge(Some(&live), &config, &shape);
        assert_eq!(merged, json!({"metadata": {"finalizers": ["c", "a", "b"]}}));
    }

    #[test]
    fn test_merge_atomic_and_untyped_lists_are_replaced() {
        let shape = Shape::Untyped;
        let merged = merge(Some(&json!({"l": [1, 2], "k": 1})), &json!({"l": [3]}), &shape);
        assert_eq!(merged, json!({"l": [3], "k": 1}));
    }

    #[test]
    fn test_merge_null_removes_field() {
        let merged = merge(Some(&json!({"a": 1, "b": 2})), &json!({"a": null, "c": {"d": null}}), &Shape::Untyped);
        assert_eq!(merged, json!({"b": 2, "c": {}}));
    }

    #[test]
    fn test_compare_reports_added_modified_removed() {
        let shape = containers_shape();
        let old = json!({"spec": {"containers": [{"name": "a", "image": "1"}, {"name": "b"}]}, "x": 1});
        let new = json!({"spec": {"containers": [{"name": "a", "image": "2"}, {"name": "c"}]}, "y": {"z": 1}});
        let c = compare(&old, &new, &shape);
        let show = |s: &FieldSet| s.paths().iter().map(ToString::to_string).collect::<Vec<_>>();
        assert_eq!(show(&c.modified), vec![".spec.containers[name=\"a\"].image"]);
        assert_eq!(
            show(&c.added),
            vec![".y", ".spec.containers[name=\"c\"]", ".spec.containers[name=\"c\"].name", ".y.z"]
        );
        assert_eq!(show(&c.removed), vec![".x", ".spec.containers[name=\"b\"]", ".spec.containers[name=\"b\"].name"]);
    }

    #[test]
    fn test_compare_type_change_is_modification() {
        let c = compare(&json!({"a": "s"}), &json!({"a": {"b": 1}}), &Shape::Untyped);
        assert!(c.modified.contains(&[PathElement::field("a")]));
        assert!(c.added.contains(&[PathElement::field("a"), PathElement::field("b")]));
        assert!(!c.added.contains(&[PathElement::field("a")]));
        assert!(c.removed.is_empty());
    }

    #[test]
    fn test_compare_equal_values_is_empty() {
        let v = json!({"a": [1, {"b": null}], "c": {}});
        let c = compare(&v, &v, &Shape::Untyped);
        assert!(c.added.is_empty() && c.modified.is_empty() && c.removed.is_empty());
    }

    #[test]
    fn test_remove_at_removes_items_fields_and_keeps_keys() {
        let shape = containers_shape();
        let mut v = json!({"spec": {"containers": [{"name": "a", "image": "1"}, {"name": "b"}]}});
        let a = match json!({"name": "a"}) {
            Value::Object(m) => PathElement::key(&m),
            _ => unreachable!(),
        };
        let base = [PathElement::field("spec"), PathElement::field("containers")];
        let mut name_path = base.to_vec();
        name_path.extend([a.clone(), PathElement::field("name")]);
        assert!(!remove_at(&mut v, &name_path, &shape), "key fields stay with their item");
        let mut image_path = base.to_vec();
        image_path.extend([a.clone(), PathElement::field("image")]);
        assert!(remove_at(&mut v, &image_path, &shape));
        assert_eq!(
            get_at(&v, &[base.as_slice(), std::slice::from_ref(&a)].concat(), &shape),
            Some(&json!({"name": "a"}))
        );
        let mut item_path = base.to_vec();
        item_path.push(a);
        assert!(remove_at(&mut v, &item_path, &shape));
        assert_eq!(v, json!({"spec": {"containers": [{"name": "b"}]}}));
        assert!(!remove_at(&mut v, &[PathElement::field("nope"), PathElement::field("x")], &shape));
    }

    #[test]
    fn test_remove_set_item() {
        let shape = finalizer_shape();
        let mut v = json!({"metadata": {"finalizers": ["a", "b"]}});
        let path = [PathElement::field("metadata"), PathElement::field("finalizers"), PathElement::value(&json!("a"))];
        assert!(remove_at(&mut v, &path, &shape));
        assert_eq!(v, json!({"metadata": {"finalizers": ["b"]}}));
    }
}

//! Strategic merge patch (`application/strategic-merge-patch+json`) for built-in kinds.
//!
//! This follows the apply half of `k8s.io/apimachinery/pkg/util/strategicpatch` (`patch.go`,
//! `StrategicMergeMapPatch` with `MergeParallelList` and `IgnoreUnmatchedNulls`, as
//! kube-apiserver calls it), with the `patchStrategy` / `patchMergeKey` struct tags it reads
//! replaced by a [`Shape`]:
//!
//! * Objects merge key by key, recursively, whatever their shape (strategic merge patch has no
//!   notion of atomic maps or structs); `null` deletes a key; a value of a different type, or a
//!   scalar, replaces the old one.
//! * Lists merge according to [`Shape::list_kind`]:
//!   - [`ListKind::Atomic`] (and every list of an untyped or unknown field) is replaced by the
//!     patch list;
//!   - [`ListKind::Set`] (`patchStrategy: merge` on scalars, e.g. `metadata.finalizers`) becomes
//!     the union of both lists without duplicates;
//!   - [`ListKind::Map`] (`patchMergeKey`, e.g. containers by `name`, `ownerReferences` by `uid`)
//!     merges a patch item into the existing item with the same merge-key value, recursively
//!     with [`Shape::item`], and adds the others. A patch item `{"<key>": v, "$patch": "delete"}`
//!     removes every item with that key; an item `{"$patch": "replace"}` makes the list exactly
//!     the other patch items.
//! * Order of merged lists, as upstream's `normalizeElementOrder`: the items named in the patch
//!   come in patch order, the items only on the server keep their server order, and the two
//!   runs are interleaved by server position (an item is placed before a patch item only if
//!   both are on the server and it came first there). So new items land *before* the existing
//!   ones they are not interleaved with: `["a"]` patched with `["b"]` gives `["b", "a"]`, as on
//!   a real cluster.
//! * Directives, none of which ever appears in the result:
//!   - `"$patch": "replace"` in an object replaces it with the rest of the patch object;
//!     `"$patch": "delete"` empties it (upstream answers `{}`, not an absent key); any other
//!     `$patch` value is [`PatchError::Invalid`];
//!   - `"$retainKeys": [...]` clears every key of the object not listed, before merging (every
//!     non-null key of the patch object must be listed);
//!   - `"$deleteFromPrimitiveList/<field>": [...]` removes those values from the list `<field>`
//!     (applied after the other changes to that object);
//!   - `"$setElementOrder/<field>": [...]` orders the merged list `<field>`: the items it names
//!     (scalars, or objects by merge key) come in its order, interleaved with the unnamed
//!     server-only items as above. The patch list must name its items in the same relative
//!     order, or the patch is [`PatchError::Invalid`].
//! * Values that land where the object had nothing are cleaned the way upstream's
//!   `discardNullValuesFromPatch` and `removeDirectives` clean them: nulls are dropped, and any
//!   object carrying a `$patch` directive is dropped with it.
//!
//! Where upstream errors out with a Go error that kube-apiserver turns into a 500 (mixed element
//! types, a missing merge key, an unknown `$patch`), this returns [`PatchError::Invalid`]; where
//! upstream returns one of the `mergepatch.ErrBadPatchFormat*` errors (400), this returns
//! [`PatchError::Malformed`].

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

use super::{PatchError, check_document_depth, check_patch_depth, json_type, remove_key};
use crate::shape::{ListKind, Shape};

/// `$patch`: `replace` or `delete` the object it is in, or a list item / the whole list.
const DIRECTIVE_MARKER: &str = "$patch";
/// `$retainKeys`: the keys of an object that survive the patch.
const RETAIN_KEYS: &str = "$retainKeys";
/// `$deleteFromPrimitiveList/<field>`: values to remove from a list of scalars.
const DELETE_FROM_PRIMITIVE_LIST: &str = "$deleteFromPrimitiveList";
/// `$setElementOrder/<field>`: the order of a merged list.
const SET_ELEMENT_ORDER: &str = "$setElementOrder";

/// Applies a strategic merge patch to `doc`, a built-in object, whose structure is `shape`.
/// `patch` is the decoded request body; `doc` is not modified.
///
/// A patch that is not a JSON object, or whose directives are not of the right form, is
/// [`PatchError::Malformed`]; one that cannot be applied to this object is
/// [`PatchError::Invalid`]. See the module documentation for the semantics.
pub fn apply_strategic_merge_patch(doc: &Value, patch: &Value, shape: &Shape) -> Result<Value, PatchError> {
    check_patch_depth(patch)?;
    let Value::Object(patch) = patch else {
        return Err(PatchError::Malformed(format!(
            "a strategic merge patch must be a JSON object, not {}",
            json_type(patch)
        )));
    };
    check_document_depth(doc)?;
    let Value::Object(original) = doc else {
        return Err(PatchError::Invalid(format!(
            "a strategic merge patch applies to a JSON object, not {}",
            json_type(doc)
        )));
    };
    merge_map(original.clone(), patch, shape, "").map(Value::Object)
}

/// Whether a key of a patch object is one of the directives, which never reach the result.
fn is_directive_key(key: &str) -> bool {
    key == DIRECTIVE_MARKER
        || key == RETAIN_KEYS
        || key.starts_with(DELETE_FROM_PRIMITIVE_LIST)
        || key.starts_with(SET_ELEMENT_ORDER)
}

/// The field a `<prefix>/<field>` directive key is about, as upstream's `extractKey`.
fn directive_field<'k>(key: &'k str, prefix: &str) -> Option<&'k str> {
    let (head, field) = key.split_once('/')?;
    (head == prefix).then_some(field)
}

/// The JSON path of `field` inside the object at `path`, for error messages.
fn child_path(path: &str, field: &str) -> String {
    if path.is_empty() { field.to_string() } else { format!("{path}.{field}") }
}

fn at(path: &str, message: impl std::fmt::Display) -> String {
    if path.is_empty() { message.to_string() } else { format!("{path}: {message}") }
}

/// Upstream's `mergeMap`: merges `patch` into `original`, whose shape is `shape`.
fn merge_map(
    mut original: Map<String, Value>,
    patch: &Map<String, Value>,
    shape: &Shape,
    path: &str,
) -> Result<Map<String, Value>, PatchError> {
    if let Some(directive) = patch.get(DIRECTIVE_MARKER) {
        return match directive.as_str() {
            Some("replace") => Ok(clean_object(patch)),
            Some("delete") => Ok(Map::new()),
            _ => Err(PatchError::Invalid(at(
                path,
                format!("unknown patch type: {directive} in map (expected \"replace\" or \"delete\")"),
            ))),
        };
    }

    if let Some(retain) = patch.get(RETAIN_KEYS) {
        apply_retain_keys(&mut original, patch, retain, path)?;
    }

    let ordered = apply_set_element_orders(&mut original, patch, shape, path)?;

    let mut deletions: Vec<(&str, &[Value])> = Vec::new();
    for (key, value) in patch {
        if key.starts_with(DELETE_FROM_PRIMITIVE_LIST) {
            let malformed = || PatchError::Malformed(at(path, "invalid patch format of primitive list"));
            let field = directive_field(key, DELETE_FROM_PRIMITIVE_LIST).ok_or_else(malformed)?;
            let Value::Array(values) = value else {
                return Err(malformed());
            };
            deletions.push((field, values));
            continue;
        }
        if is_directive_key(key) || ordered.contains(key.as_str()) {
            continue;
        }
        merge_field(&mut original, key, value, shape.field(key), path)?;
    }

    // After the additions, as the parallel deletion list describes the final list.
    for (field, values) in deletions {
        if let Some(Value::Array(items)) = original.get_mut(field) {
            let doomed: HashSet<String> = values.iter().map(identity).collect();
            items.retain(|item| !doomed.contains(&identity(item)));
        }
    }
    Ok(original)
}

/// Merges the patch value of one field into `original`.
fn merge_field(
    original: &mut Map<String, Value>,
    key: &str,
    value: &Value,
    shape: &Shape,
    path: &str,
) -> Result<(), PatchError> {
    if value.is_null() {
        remove_key(original, key);
        return Ok(());
    }
    let merged = match (original.get_mut(key), value) {
        (Some(Value::Object(existing)), Value::Object(patch)) => {
            Some(Value::Object(merge_map(std::mem::take(existing), patch, shape, &child_path(path, key))?))
        }
        (Some(Value::Array(existing)), Value::Array(patch)) => {
            Some(Value::Array(merge_list(std::mem::take(existing), patch, shape, &child_path(path, key))?))
        }
        // Absent, of another type, or a scalar: the cleaned patch value replaces it.
        _ => clean_value(value),
    };
    match merged {
        Some(merged) => {
            original.insert(key.to_string(), merged);
        }
        None => {
            remove_key(original, key);
        }
    }
    Ok(())
}

/// Upstream's `applyRetainKeysDirective`.
fn apply_retain_keys(
    original: &mut Map<String, Value>,
    patch: &Map<String, Value>,
    retain: &Value,
    path: &str,
) -> Result<(), PatchError> {
    let Value::Array(retain) = retain else {
        return Err(PatchError::Malformed(at(path, "invalid patch format of retainKeys")));
    };
    let keep: HashSet<&str> = retain.iter().filter_map(Value::as_str).collect();
    for (key, value) in patch {
        let exempt = value.is_null()
            || key == RETAIN_KEYS
            || key.starts_with(DELETE_FROM_PRIMITIVE_LIST)
            || key.starts_with(SET_ELEMENT_ORDER);
        if !exempt && !keep.contains(key.as_str()) {
            return Err(PatchError::Malformed(at(
                path,
                format!("invalid patch format of retainKeys: {key:?} is patched but not listed in $retainKeys"),
            )));
        }
    }
    original.retain(|key, _| keep.contains(key.as_str()));
    Ok(())
}

/// Upstream's `mergePatchIntoOriginal`: merges every list that has a `$setElementOrder` and puts
/// it in order. Returns the fields it merged, which the caller must not merge again.
fn apply_set_element_orders<'p>(
    original: &mut Map<String, Value>,
    patch: &'p Map<String, Value>,
    shape: &Shape,
    path: &str,
) -> Result<HashSet<&'p str>, PatchError> {
    let mut merged_fields = HashSet::new();
    for (key, order) in patch {
        if !key.starts_with(SET_ELEMENT_ORDER) {
            continue;
        }
        let malformed = || PatchError::Malformed(at(path, "invalid patch format of setElementOrder list"));
        let field = directive_field(key, SET_ELEMENT_ORDER).ok_or_else(malformed)?;
        let Value::Array(order) = order else {
            return Err(malformed());
        };
        let field_path = child_path(path, field);
        let field_shape = shape.field(field);
        let identify = Identify::for_list(field_shape);

        let patch_list = match patch.get(field) {
            None => None,
            Some(Value::Array(items)) => Some(items.as_slice()),
            // The field is being deleted; there is nothing left to order.
            Some(Value::Null) => continue,
            Some(other) => {
                return Err(PatchError::Invalid(at(
                    &field_path,
                    format!("expected a list in the patch, got {}", json_type(other)),
                )));
            }
        };
        let original_list = match original.get_mut(field) {
            None => None,
            Some(Value::Array(items)) => Some(std::mem::take(items)),
            Some(other) => {
                return Err(PatchError::Invalid(at(
                    &field_path,
                    format!("$setElementOrder applies to a list, but the object has {}", json_type(other)),
                )));
            }
        };
        validate_against_order(patch_list.unwrap_or_default(), order, &identify, &field_path)?;

        let server_order = match &original_list {
            Some(items) => positions(items, &identify, &field_path)?,
            None => HashMap::new(),
        };
        let merged = match (original_list, patch_list) {
            (Some(items), None) => items,
            (None, Some(patch_items)) => clean_list(patch_items),
            (Some(items), Some(patch_items)) => merge_list(items, patch_items, field_shape, &field_path)?,
            (None, None) => continue,
        };
        let order_positions = positions(order, &identify, &field_path)?;
        let merged = merged
            .into_iter()
            .map(|item| Ok((identify.of(&item, &field_path)?, item)))
            .collect::<Result<Vec<_>, PatchError>>()?;
        original.insert(field.to_string(), Value::Array(normalize_order(merged, &order_positions, &server_order)));
        merged_fields.insert(field);
    }
    Ok(merged_fields)
}

/// Upstream's `validatePatchWithSetOrderList`: the patch list must name its items in the order
/// of the `$setElementOrder` list (deletions and other directive items aside).
fn validate_against_order(
    patch_list: &[Value],
    order: &[Value],
    identify: &Identify<'_>,
    path: &str,
) -> Result<(), PatchError> {
    if order.is_empty() {
        return Ok(());
    }
    let mut order_ids = order.iter().map(|item| identify.of(item, path));
    'items: for item in patch_list {
        if is_directive_item(item) {
            continue;
        }
        let id = identify.of(item, path)?;
        for order_id in order_ids.by_ref() {
            if order_id? == id {
                continue 'items;
            }
        }
        return Err(PatchError::Invalid(at(
            path,
            format!("the order in the patch list doesn't match the {SET_ELEMENT_ORDER} list"),
        )));
    }
    Ok(())
}

fn is_directive_item(item: &Value) -> bool {
    matches!(item, Value::Object(fields) if fields.contains_key(DIRECTIVE_MARKER))
}

/// Upstream's `mergeSliceHandler` / `mergeSlice` for a list present on both sides.
fn merge_list(original: Vec<Value>, patch: &[Value], shape: &Shape, path: &str) -> Result<Vec<Value>, PatchError> {
    match shape.list_kind() {
        ListKind::Atomic => Ok(clean_list(patch)),
        ListKind::Set => merge_set(original, patch, path),
        ListKind::Map { merge_key, .. } => merge_keyed(original, patch, merge_key, shape.item(), path),
    }
}

/// A list of scalars with `patchStrategy: merge`: the union, without duplicates.
fn merge_set(original: Vec<Value>, patch: &[Value], path: &str) -> Result<Vec<Value>, PatchError> {
    if original.is_empty() && patch.is_empty() {
        return Ok(original);
    }
    if check_element_types(&original, patch, path)? == Some(ElementType::Object) {
        return Err(PatchError::Invalid(at(path, "cannot merge lists of objects without a merge key")));
    }
    let server_order = positions(&original, &Identify::ByValue, path)?;
    let patch_order = positions(patch, &Identify::ByValue, path)?;
    let mut seen = HashSet::new();
    let merged = original
        .into_iter()
        .chain(patch.iter().cloned())
        .filter_map(|item| {
            let id = identity(&item);
            seen.insert(id.clone()).then_some((id, item))
        })
        .collect();
    Ok(normalize_order(merged, &patch_order, &server_order))
}

/// A list of objects with a `patchMergeKey`.
fn merge_keyed(
    original: Vec<Value>,
    patch: &[Value],
    merge_key: &str,
    item_shape: &Shape,
    path: &str,
) -> Result<Vec<Value>, PatchError> {
    if original.is_empty() && patch.is_empty() {
        return Ok(original);
    }
    match check_element_types(&original, patch, path)? {
        Some(ElementType::Object) | None => {}
        Some(_) => {
            return Err(PatchError::Invalid(at(
                path,
                format!("the list is merged by {merge_key:?}, but its items are not objects"),
            )));
        }
    }
    let identify = Identify::ByMergeKey(merge_key);

    // Upstream's `mergeSliceWithSpecialElements`: deletions and `replace` first.
    let mut original = original;
    let mut plain: Vec<&Map<String, Value>> = Vec::with_capacity(patch.len());
    let mut doomed = HashSet::new();
    let mut replace = false;
    for item in patch {
        let Value::Object(fields) = item else {
            continue; // Ruled out by check_element_types.
        };
        let Some(directive) = fields.get(DIRECTIVE_MARKER) else {
            plain.push(fields);
            continue;
        };
        match directive.as_str() {
            Some("delete") => {
                doomed.insert(identify.of(item, path)?);
            }
            Some("replace") => replace = true,
            Some("merge") => {
                return Err(PatchError::Invalid(at(path, "merging lists cannot yet be specified in the patch")));
            }
            _ => {
                return Err(PatchError::Invalid(at(
                    path,
                    format!("unknown patch type: {directive} in list item (expected \"delete\" or \"replace\")"),
                )));
            }
        }
    }
    if !doomed.is_empty() {
        original.retain(|existing| identify.of(existing, path).map_or(true, |id| !doomed.contains(&id)));
    }
    if replace {
        let items: Vec<Value> = plain.into_iter().map(|fields| Value::Object(clean_object(fields))).collect();
        for item in &items {
            identify.of(item, path)?;
        }
        return Ok(items);
    }

    // Upstream's `mergeSliceWithoutSpecialElements`, then the ordering of `mergeSlice`.
    let server_order = positions(&original, &identify, path)?;
    let mut merged = original
        .into_iter()
        .map(|item| Ok((identify.of(&item, path)?, item)))
        .collect::<Result<Vec<_>, PatchError>>()?;
    let mut index = server_order.clone();
    let mut patch_order = HashMap::new();
    for (position, fields) in plain.into_iter().enumerate() {
        let id = merge_key_identity(fields, merge_key, path)?;
        patch_order.entry(id.clone()).or_insert(position);
        let existing = index.get(&id).and_then(|&pos| merged.get_mut(pos));
        match existing {
            Some((_, Value::Object(existing))) => {
                let item_path = format!("{path}[{merge_key}={}]", fields.get(merge_key).unwrap_or(&Value::Null));
                *existing = merge_map(std::mem::take(existing), fields, item_shape, &item_path)?;
            }
            _ => {
                index.insert(id.clone(), merged.len());
                merged.push((id, Value::Object(clean_object(fields))));
            }
        }
    }
    Ok(normalize_order(merged, &patch_order, &server_order))
}

/// Upstream's `normalizeElementOrder` after partitioning the merged items into those named by
/// `patch_order` and the server-only ones: each run is sorted (stably) by its own order, then
/// the runs are interleaved by server position (`mergeSortedSlice`).
fn normalize_order(
    merged: Vec<(String, Value)>,
    patch_order: &HashMap<String, usize>,
    server_order: &HashMap<String, usize>,
) -> Vec<Value> {
    let (mut from_patch, mut server_only): (Vec<_>, Vec<_>) =
        merged.into_iter().partition(|(id, _)| patch_order.contains_key(id));
    from_patch.sort_by_key(|(id, _)| patch_order.get(id).copied().unwrap_or(usize::MAX));
    server_only.sort_by_key(|(id, _)| server_order.get(id).copied().unwrap_or(usize::MAX));

    let mut result = Vec::with_capacity(from_patch.len() + server_only.len());
    let mut left = server_only.into_iter().peekable();
    let mut right = from_patch.into_iter().peekable();
    while let (Some((l, _)), Some((r, _))) = (left.peek(), right.peek()) {
        let server_first = matches!(
            (server_order.get(l), server_order.get(r)),
            (Some(li), Some(ri)) if li < ri
        );
        let next = if server_first { left.next() } else { right.next() };
        result.extend(next.map(|(_, item)| item));
    }
    result.extend(left.map(|(_, item)| item));
    result.extend(right.map(|(_, item)| item));
    result
}

/// How the items of a list are told apart: by merge key for keyed lists, by value otherwise.
enum Identify<'s> {
    ByMergeKey(&'s str),
    ByValue,
}

impl<'s> Identify<'s> {
    fn for_list(shape: &'s Shape) -> Identify<'s> {
        match shape.list_kind() {
            ListKind::Map { merge_key, .. } => Identify::ByMergeKey(merge_key),
            _ => Identify::ByValue,
        }
    }

    fn of(&self, item: &Value, path: &str) -> Result<String, PatchError> {
        match self {
            Identify::ByValue => Ok(identity(item)),
            Identify::ByMergeKey(merge_key) => match item {
                Value::Object(fields) => merge_key_identity(fields, merge_key, path),
                other => Err(PatchError::Invalid(at(
                    path,
                    format!("expected an object with merge key {merge_key:?}, got {}", json_type(other)),
                ))),
            },
        }
    }
}

fn merge_key_identity(fields: &Map<String, Value>, merge_key: &str, path: &str) -> Result<String, PatchError> {
    match fields.get(merge_key) {
        Some(value) if !value.is_null() => Ok(identity(value)),
        _ => {
            Err(PatchError::Invalid(at(path, format!("an item does not contain the declared merge key {merge_key:?}"))))
        }
    }
}

/// The first position of every item of `items`, by identity.
fn positions(items: &[Value], identify: &Identify<'_>, path: &str) -> Result<HashMap<String, usize>, PatchError> {
    let mut positions = HashMap::with_capacity(items.len());
    for (position, item) in items.iter().enumerate() {
        positions.entry(identify.of(item, path)?).or_insert(position);
    }
    Ok(positions)
}

/// A canonical text of a JSON value, equal for equal values whatever the key order of objects.
/// Numbers keep their written form, so `80` and `80.0` differ, as the int64 and float64 they
/// decode to in Go do for upstream.
fn identity(value: &Value) -> String {
    match value {
        Value::Object(fields) => {
            let mut entries: Vec<(&String, &Value)> = fields.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            let inner: Vec<String> =
                entries.into_iter().map(|(k, v)| format!("{}:{}", Value::String(k.clone()), identity(v))).collect();
            format!("{{{}}}", inner.join(","))
        }
        Value::Array(items) => format!("[{}]", items.iter().map(identity).collect::<Vec<_>>().join(",")),
        other => other.to_string(),
    }
}

/// The JSON type of list items, which upstream requires to be the same throughout a merged list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ElementType {
    Null,
    Bool,
    Number,
    String,
    Object,
}

/// Upstream's `sliceElementType`: all items of both lists must have one type, and not be lists.
/// Returns that type, `None` for two empty lists.
fn check_element_types(original: &[Value], patch: &[Value], path: &str) -> Result<Option<ElementType>, PatchError> {
    let mut seen = None;
    for item in original.iter().chain(patch) {
        let this = match item {
            Value::Null => ElementType::Null,
            Value::Bool(_) => ElementType::Bool,
            Value::Number(_) => ElementType::Number,
            Value::String(_) => ElementType::String,
            Value::Object(_) => ElementType::Object,
            Value::Array(_) => {
                return Err(PatchError::Invalid(at(path, "lists of lists are not supported")));
            }
        };
        match seen {
            None => seen = Some(this),
            Some(previous) if previous != this => {
                return Err(PatchError::Invalid(at(path, "list element types are not identical")));
            }
            Some(_) => {}
        }
    }
    Ok(seen)
}

/// A patch value that lands where the object had nothing, cleaned as upstream's
/// `discardNullValuesFromPatch` + `removeDirectives` do: `None` if it is an object carrying
/// `$patch` (it is dropped), otherwise the value without null members or directive keys.
fn clean_value(value: &Value) -> Option<Value> {
    match value {
        Value::Object(fields) if fields.contains_key(DIRECTIVE_MARKER) => None,
        Value::Object(fields) => Some(Value::Object(clean_object(fields))),
        Value::Array(items) => Some(Value::Array(clean_list(items))),
        scalar => Some(scalar.clone()),
    }
}

/// The members of a patch object that are neither null nor directives, cleaned.
fn clean_object(fields: &Map<String, Value>) -> Map<String, Value> {
    fields
        .iter()
        .filter(|(key, value)| !value.is_null() && !is_directive_key(key))
        .filter_map(|(key, value)| clean_value(value).map(|value| (key.clone(), value)))
        .collect()
}

/// A patch list, cleaned item by item; null items are kept, as upstream keeps them.
fn clean_list(items: &[Value]) -> Vec<Value> {
    items.iter().filter_map(clean_value).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::patch::MAX_NESTING_DEPTH;
    use serde_json::json;

    /// A pod-like shape transcribing the upstream markers that matter here.
    fn pod_shape() -> Shape {
        let env_var = Shape::structure([("name", Shape::Atomic), ("value", Shape::Atomic)]);
        let port = Shape::structure([("containerPort", Shape::Atomic), ("protocol", Shape::Atomic)]);
        let container = Shape::structure([
            ("name", Shape::Atomic),
            ("image", Shape::Atomic),
            ("args", Shape::atomic_list(Shape::Atomic)),
            ("env", Shape::list_map(env_var, &["name"])),
            ("ports", Shape::list_map(port, &["containerPort", "protocol"])),
        ]);
        let owner_reference =
            Shape::structure([("uid", Shape::Atomic), ("name", Shape::Atomic), ("controller", Shape::Atomic)]);
        let metadata = Shape::structure([
            ("labels", Shape::map_of(Shape::Atomic)),
            ("annotations", Shape::map_of(Shape::Atomic)),
            ("finalizers", Shape::set()),
            ("ownerReferences", Shape::list_map(owner_reference, &["uid"])),
        ]);
        let volume = Shape::structure([("name", Shape::Atomic)]);
        let spec = Shape::structure([
            ("containers", Shape::list_map(container.clone(), &["name"])),
            ("initContainers", Shape::list_map(container, &["name"])),
            ("volumes", Shape::list_map(volume, &["name"])),
            ("nodeSelector", Shape::map_of(Shape::Atomic)),
        ]);
        Shape::structure([("metadata", metadata), ("spec", spec)])
    }

    fn smp(doc: Value, patch: Value) -> Result<Value, PatchError> {
        apply_strategic_merge_patch(&doc, &patch, &pod_shape())
    }

    fn patched(doc: Value, patch: Value) -> Value {
        match smp(doc, patch) {
            Ok(result) => result,
            Err(error) => panic!("strategic merge patch failed: {error:?}"),
        }
    }

    fn invalid_message(result: Result<Value, PatchError>) -> String {
        match result {
            Err(PatchError::Invalid(message)) => message,
            other => panic!("expected Invalid, got {other:?}"),
        }
    }

    fn malformed_message(result: Result<Value, PatchError>) -> String {
        match result {
            Err(PatchError::Malformed(message)) => message,
            other => panic!("expected Malformed, got {other:?}"),
        }
    }

    fn containers(names_and_images: &[(&str, &str)]) -> Value {
        Value::Array(names_and_images.iter().map(|(n, i)| json!({"name": n, "image": i})).collect())
    }

    // Maps.

    #[test]
    fn maps_merge_recursively_and_null_deletes_a_key() {
        let doc = json!({"metadata": {"name": "p", "labels": {"a": "1", "b": "2"}}});
        let result = patched(doc, json!({"metadata": {"labels": {"a": null, "c": "3"}}}));
        assert_eq!(result, json!({"metadata": {"name": "p", "labels": {"b": "2", "c": "3"}}}));
    }

    #[test]
    fn scalar_and_type_changes_replace() {
        let doc = json!({"spec": {"x": {"y": 1}, "z": 1}});
        let result = patched(doc, json!({"spec": {"x": 2, "z": {"w": 1}}}));
        assert_eq!(result, json!({"spec": {"x": 2, "z": {"w": 1}}}));
    }

    #[test]
    fn nulls_for_absent_keys_are_ignored() {
        let doc = json!({"metadata": {"name": "p"}});
        assert_eq!(patched(doc.clone(), json!({"metadata": {"labels": null}})), doc);
    }

    #[test]
    fn new_values_lose_their_nulls() {
        let result = patched(json!({}), json!({"spec": {"nodeSelector": {"a": "1", "b": null}}}));
        assert_eq!(result, json!({"spec": {"nodeSelector": {"a": "1"}}}));
    }

    #[test]
    fn dollar_keys_that_are_not_directives_are_ordinary_fields() {
        // CustomResourceDefinition schemas carry `$ref` and `$schema`.
        let doc = json!({"spec": {"schema": {"type": "object"}}});
        let result = patched(doc, json!({"spec": {"schema": {"$ref": "#/x"}}}));
        assert_eq!(result, json!({"spec": {"schema": {"type": "object", "$ref": "#/x"}}}));
    }

    // Sets: metadata.finalizers.

    #[test]
    fn finalizers_merge_as_a_set_not_a_replacement() {
        let doc = json!({"metadata": {"finalizers": ["a", "b"]}});
        let result = patched(doc, json!({"metadata": {"finalizers": ["b", "c"]}}));
        assert_eq!(result, json!({"metadata": {"finalizers": ["a", "b", "c"]}}));
    }

    #[test]
    fn set_merge_puts_new_values_before_existing_ones_as_upstream_does() {
        let doc = json!({"metadata": {"finalizers": ["a"]}});
        let result = patched(doc, json!({"metadata": {"finalizers": ["b"]}}));
        assert_eq!(result, json!({"metadata": {"finalizers": ["b", "a"]}}));
    }

    #[test]
    fn set_merge_follows_the_patch_order_for_values_it_names() {
        // Upstream test case "preserve the order from the patch in a merging int list".
        let doc = json!({"metadata": {"finalizers": [1, 2, 3]}});
        let result = patched(doc.clone(), json!({"metadata": {"finalizers": [3, 1, 2]}}));
        assert_eq!(result, json!({"metadata": {"finalizers": [3, 1, 2]}}));
        let result = patched(doc, json!({"metadata": {"finalizers": [3, 1]}}));
        assert_eq!(result, json!({"metadata": {"finalizers": [2, 3, 1]}}));
    }

    #[test]
    fn set_merge_removes_duplicates() {
        let doc = json!({"metadata": {"finalizers": ["a", "a", "b"]}});
        let result = patched(doc, json!({"metadata": {"finalizers": ["b", "c", "c"]}}));
        assert_eq!(result, json!({"metadata": {"finalizers": ["a", "b", "c"]}}));
    }

    #[test]
    fn set_is_created_when_absent() {
        let result = patched(json!({"metadata": {}}), json!({"metadata": {"finalizers": ["x"]}}));
        assert_eq!(result, json!({"metadata": {"finalizers": ["x"]}}));
    }

    #[test]
    fn set_of_objects_cannot_be_merged() {
        let doc = json!({"metadata": {"finalizers": [{"a": 1}]}});
        let result = smp(doc, json!({"metadata": {"finalizers": [{"b": 1}]}}));
        assert!(matches!(result, Err(PatchError::Invalid(_))));
    }

    #[test]
    fn delete_from_primitive_list_removes_values() {
        let doc = json!({"metadata": {"finalizers": ["a", "b", "c"]}});
        let result = patched(doc, json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["b", "x"]}}));
        assert_eq!(result, json!({"metadata": {"finalizers": ["a", "c"]}}));
    }

    #[test]
    fn delete_from_primitive_list_applies_after_additions() {
        let doc = json!({"metadata": {"finalizers": ["a", "b"]}});
        let patch = json!({"metadata": {"finalizers": ["c"], "$deleteFromPrimitiveList/finalizers": ["a"]}});
        assert_eq!(patched(doc, patch), json!({"metadata": {"finalizers": ["c", "b"]}}));
    }

    #[test]
    fn delete_from_primitive_list_of_an_absent_list_is_a_no_op() {
        let doc = json!({"metadata": {"name": "p"}});
        assert_eq!(patched(doc.clone(), json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}})), doc);
    }

    #[test]
    fn delete_from_primitive_list_must_be_a_list_with_a_field() {
        let doc = json!({"metadata": {"finalizers": ["a"]}});
        let message =
            malformed_message(smp(doc.clone(), json!({"metadata": {"$deleteFromPrimitiveList/finalizers": "a"}})));
        assert_eq!(message, "metadata: invalid patch format of primitive list");
        malformed_message(smp(doc, json!({"metadata": {"$deleteFromPrimitiveList": ["a"]}})));
    }

    // Keyed lists: containers, env, ownerReferences.

    #[test]
    fn containers_merge_by_name() {
        let doc = json!({"spec": {"containers": [
            {"name": "app", "image": "app:1", "args": ["--x"]},
            {"name": "sidecar", "image": "sc:1"}
        ]}});
        let result = patched(doc, json!({"spec": {"containers": [{"name": "app", "image": "app:2"}]}}));
        assert_eq!(
            result,
            json!({"spec": {"containers": [
                {"name": "app", "image": "app:2", "args": ["--x"]},
                {"name": "sidecar", "image": "sc:1"}
            ]}})
        );
    }

    #[test]
    fn new_container_is_added_before_the_existing_ones_as_upstream_does() {
        let doc = json!({"spec": {"containers": containers(&[("app", "app:1")])}});
        let result = patched(doc, json!({"spec": {"containers": [{"name": "sidecar", "image": "sc:1"}]}}));
        assert_eq!(result, json!({"spec": {"containers": containers(&[("sidecar", "sc:1"), ("app", "app:1")])}}));
    }

    #[test]
    fn keyed_merge_follows_the_patch_order() {
        // Upstream test cases "preserve the order from the patch in a merging list" 1 and 2.
        let doc = json!({"spec": {"containers": [
            {"name": "1"}, {"name": "2", "image": "b"}, {"name": "3"}
        ]}});
        let result = patched(
            doc.clone(),
            json!({"spec": {"containers": [
                {"name": "3", "image": "c"}, {"name": "1", "image": "a"}, {"name": "2", "args": ["x"]}
            ]}}),
        );
        assert_eq!(
            result,
            json!({"spec": {"containers": [
                {"name": "3", "image": "c"}, {"name": "1", "image": "a"}, {"name": "2", "image": "b", "args": ["x"]}
            ]}})
        );
        let result =
            patched(doc, json!({"spec": {"containers": [{"name": "3", "image": "c"}, {"name": "1", "image": "a"}]}}));
        assert_eq!(
            result,
            json!({"spec": {"containers": [
                {"name": "2", "image": "b"}, {"name": "3", "image": "c"}, {"name": "1", "image": "a"}
            ]}})
        );
    }

    #[test]
    fn env_merges_by_name_inside_a_container() {
        let doc = json!({"spec": {"containers": [{"name": "app", "env": [
            {"name": "A", "value": "1"}, {"name": "B", "value": "2"}
        ]}]}});
        let patch = json!({"spec": {"containers": [{"name": "app", "env": [
            {"name": "B", "value": "20"}, {"name": "A", "$patch": "delete"}
        ]}]}});
        assert_eq!(
            patched(doc, patch),
            json!({"spec": {"containers": [{"name": "app", "env": [{"name": "B", "value": "20"}]}]}})
        );
    }

    #[test]
    fn delete_directive_removes_every_item_with_the_key() {
        // Upstream test case "delete all duplicate entries in a merging list".
        let doc = json!({"spec": {"volumes": [
            {"name": "1"}, {"name": "1"}, {"name": "2", "x": "a"}, {"name": "3"}, {"name": "3"}
        ]}});
        let patch = json!({"spec": {"volumes": [
            {"name": "1", "$patch": "delete"}, {"name": "3", "$patch": "delete"}
        ]}});
        assert_eq!(patched(doc, patch), json!({"spec": {"volumes": [{"name": "2", "x": "a"}]}}));
    }

    #[test]
    fn delete_directive_of_an_absent_item_is_a_no_op() {
        let doc = json!({"spec": {"volumes": [{"name": "a"}]}});
        let patch = json!({"spec": {"volumes": [{"name": "z", "$patch": "delete"}]}});
        assert_eq!(patched(doc.clone(), patch), doc);
    }

    #[test]
    fn delete_directive_on_an_absent_list_adds_nothing() {
        let doc = json!({"spec": {}});
        let patch = json!({"spec": {"volumes": [{"name": "z", "$patch": "delete"}, {"name": "y"}]}});
        assert_eq!(patched(doc, patch), json!({"spec": {"volumes": [{"name": "y"}]}}));
    }

    #[test]
    fn delete_directive_without_the_merge_key_is_invalid() {
        let doc = json!({"spec": {"volumes": [{"name": "a"}]}});
        let message = invalid_message(smp(doc, json!({"spec": {"volumes": [{"$patch": "delete"}]}})));
        assert_eq!(message, "spec.volumes: an item does not contain the declared merge key \"name\"");
    }

    #[test]
    fn patch_item_without_the_merge_key_is_invalid() {
        let doc = json!({"spec": {"containers": [{"name": "a"}]}});
        let result = smp(doc, json!({"spec": {"containers": [{"image": "x"}]}}));
        assert!(matches!(result, Err(PatchError::Invalid(_))));
    }

    #[test]
    fn replace_directive_in_a_list_keeps_only_the_other_patch_items() {
        let doc = json!({"spec": {"containers": containers(&[("a", "a:1"), ("b", "b:1")])}});
        let patch = json!({"spec": {"containers": [{"name": "c", "image": "c:1"}, {"$patch": "replace"}]}});
        assert_eq!(patched(doc, patch), json!({"spec": {"containers": containers(&[("c", "c:1")])}}));
    }

    #[test]
    fn replace_directive_alone_empties_the_list() {
        // Upstream test case "delete all items from merging list".
        let doc = json!({"spec": {"volumes": [{"name": "1"}, {"name": "2"}]}});
        assert_eq!(
            patched(doc, json!({"spec": {"volumes": [{"$patch": "replace"}]}})),
            json!({"spec": {"volumes": []}})
        );
    }

    #[test]
    fn merge_directive_in_a_list_is_invalid() {
        let doc = json!({"spec": {"volumes": [{"name": "1"}]}});
        let message = invalid_message(smp(doc, json!({"spec": {"volumes": [{"$patch": "merge"}]}})));
        assert_eq!(message, "spec.volumes: merging lists cannot yet be specified in the patch");
    }

    #[test]
    fn unknown_directive_in_a_list_is_invalid() {
        let doc = json!({"spec": {"volumes": [{"name": "1"}]}});
        let result = smp(doc, json!({"spec": {"volumes": [{"name": "1", "$patch": "remove"}]}}));
        assert!(matches!(result, Err(PatchError::Invalid(_))));
    }

    #[test]
    fn owner_references_merge_by_uid() {
        let doc = json!({"metadata": {"ownerReferences": [
            {"uid": "u1", "name": "a"}, {"uid": "u2", "name": "b"}
        ]}});
        let patch = json!({"metadata": {"ownerReferences": [
            {"uid": "u2", "controller": true}, {"uid": "u1", "$patch": "delete"}
        ]}});
        assert_eq!(
            patched(doc, patch),
            json!({"metadata": {"ownerReferences": [{"uid": "u2", "name": "b", "controller": true}]}})
        );
    }

    #[test]
    fn list_keyed_by_a_number_distinguishes_numbers() {
        let doc = json!({"spec": {"containers": [{"name": "a", "ports": [
            {"containerPort": 80, "protocol": "TCP"}, {"containerPort": 443}
        ]}]}});
        let patch =
            json!({"spec": {"containers": [{"name": "a", "ports": [{"containerPort": 80, "protocol": "UDP"}]}]}});
        assert_eq!(
            patched(doc, patch),
            json!({"spec": {"containers": [{"name": "a", "ports": [
                {"containerPort": 80, "protocol": "UDP"}, {"containerPort": 443}
            ]}]}})
        );
    }

    #[test]
    fn new_keyed_items_lose_their_nulls_and_directive_objects() {
        let doc = json!({"spec": {"containers": [{"name": "a"}]}});
        let patch = json!({"spec": {"containers": [
            {"name": "b", "image": null, "env": [{"name": "X", "$patch": "delete"}, {"name": "Y"}]}
        ]}});
        assert_eq!(
            patched(doc, patch),
            json!({"spec": {"containers": [{"name": "b", "env": [{"name": "Y"}]}, {"name": "a"}]}})
        );
    }

    #[test]
    fn keyed_list_items_must_be_objects() {
        let doc = json!({"spec": {"volumes": [{"name": "a"}]}});
        assert!(matches!(smp(doc, json!({"spec": {"volumes": ["a"]}})), Err(PatchError::Invalid(_))));
        let doc = json!({"spec": {"volumes": ["a"]}});
        assert!(matches!(smp(doc, json!({"spec": {"volumes": ["b"]}})), Err(PatchError::Invalid(_))));
    }

    #[test]
    fn mixed_element_types_are_invalid() {
        let doc = json!({"metadata": {"finalizers": ["a"]}});
        let message = invalid_message(smp(doc, json!({"metadata": {"finalizers": [1]}})));
        assert_eq!(message, "metadata.finalizers: list element types are not identical");
    }

    #[test]
    fn lists_of_lists_are_invalid() {
        let doc = json!({"metadata": {"finalizers": [["a"]]}});
        let message = invalid_message(smp(doc, json!({"metadata": {"finalizers": [["b"]]}})));
        assert_eq!(message, "metadata.finalizers: lists of lists are not supported");
    }

    #[test]
    fn merging_two_empty_keyed_lists_gives_an_empty_list() {
        let doc = json!({"spec": {"volumes": []}});
        assert_eq!(patched(doc, json!({"spec": {"volumes": []}})), json!({"spec": {"volumes": []}}));
    }

    // Atomic and untyped lists.

    #[test]
    fn atomic_list_is_replaced() {
        let doc = json!({"spec": {"containers": [{"name": "a", "args": ["1", "2"]}]}});
        let patch = json!({"spec": {"containers": [{"name": "a", "args": ["3"]}]}});
        assert_eq!(patched(doc, patch), json!({"spec": {"containers": [{"name": "a", "args": ["3"]}]}}));
    }

    #[test]
    fn untyped_list_is_replaced() {
        let doc = json!({"spec": {"tolerations": [{"key": "a"}]}});
        let patch = json!({"spec": {"tolerations": [{"key": "b"}]}});
        assert_eq!(patched(doc, patch), json!({"spec": {"tolerations": [{"key": "b"}]}}));
    }

    // $patch in maps.

    #[test]
    fn replace_directive_in_a_map_replaces_it() {
        let doc = json!({"metadata": {"labels": {"a": "1", "b": "2"}}});
        let patch = json!({"metadata": {"labels": {"$patch": "replace", "c": "3"}}});
        assert_eq!(patched(doc, patch), json!({"metadata": {"labels": {"c": "3"}}}));
    }

    #[test]
    fn replace_directive_at_the_top_replaces_the_whole_object() {
        // Upstream test cases "delete all keys from map" and "add key and delete all keys from map".
        let doc = json!({"name": 1, "value": 1});
        assert_eq!(patched(doc.clone(), json!({"$patch": "replace"})), json!({}));
        assert_eq!(patched(doc, json!({"other": "a", "$patch": "replace"})), json!({"other": "a"}));
    }

    #[test]
    fn delete_directive_in_a_map_empties_it() {
        // Upstream test case "delete map from nested map": the result is `{}`.
        let doc = json!({"spec": {"nodeSelector": {"a": "1", "b": "2"}, "x": 1}});
        let patch = json!({"spec": {"nodeSelector": {"$patch": "delete"}}});
        assert_eq!(patched(doc, patch), json!({"spec": {"nodeSelector": {}, "x": 1}}));
    }

    #[test]
    fn directive_map_for_an_absent_key_adds_nothing() {
        let doc = json!({"spec": {"x": 1}});
        let patch = json!({"spec": {"nodeSelector": {"$patch": "delete"}, "other": {"$patch": "replace", "a": 1}}});
        assert_eq!(patched(doc.clone(), patch), doc);
    }

    #[test]
    fn unknown_directive_in_a_map_is_invalid() {
        let doc = json!({"spec": {"nodeSelector": {"a": "1"}}});
        let message = invalid_message(smp(doc, json!({"spec": {"nodeSelector": {"$patch": "merge"}}})));
        assert_eq!(
            message,
            "spec.nodeSelector: unknown patch type: \"merge\" in map (expected \"replace\" or \"delete\")"
        );
    }

    // $retainKeys.

    #[test]
    fn retain_keys_clears_unlisted_keys_before_merging() {
        let doc = json!({"spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}}});
        let patch = json!({"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}});
        assert_eq!(patched(doc, patch), json!({"spec": {"strategy": {"type": "Recreate"}}}));
    }

    #[test]
    fn retain_keys_allows_nulls_for_unlisted_keys() {
        let doc = json!({"spec": {"volume": {"name": "v", "hostPath": {"path": "/x"}, "emptyDir": {}}}});
        let patch = json!({"spec": {"volume": {"$retainKeys": ["name", "hostPath"], "emptyDir": null, "hostPath": {"path": "/y"}}}});
        assert_eq!(patched(doc, patch), json!({"spec": {"volume": {"name": "v", "hostPath": {"path": "/y"}}}}));
    }

    #[test]
    fn retain_keys_must_list_every_patched_key() {
        let doc = json!({"spec": {"strategy": {"type": "A"}}});
        let patch = json!({"spec": {"strategy": {"$retainKeys": ["type"], "rollingUpdate": {}}}});
        assert!(malformed_message(smp(doc, patch)).starts_with("spec.strategy: invalid patch format of retainKeys"));
    }

    #[test]
    fn retain_keys_must_be_a_list() {
        let doc = json!({"spec": {"strategy": {"type": "A"}}});
        let patch = json!({"spec": {"strategy": {"$retainKeys": "type"}}});
        assert_eq!(malformed_message(smp(doc, patch)), "spec.strategy: invalid patch format of retainKeys");
    }

    // $setElementOrder.

    #[test]
    fn set_element_order_orders_a_set() {
        // Upstream test case "$setElementOrder contains item that is not present in the int list".
        let doc = json!({"metadata": {"finalizers": [1, 3]}});
        let patch = json!({"metadata": {"$setElementOrder/finalizers": [3, 2, 1]}});
        assert_eq!(patched(doc, patch), json!({"metadata": {"finalizers": [3, 1]}}));
    }

    #[test]
    fn set_element_order_orders_a_keyed_list_and_merges_it() {
        // Upstream test case "$setElementOrder contains item that is not present in the list to be merged".
        let doc = json!({"spec": {"containers": [{"name": "1"}, {"name": "3"}]}});
        let patch = json!({"spec": {
            "$setElementOrder/containers": [{"name": "3"}, {"name": "2"}, {"name": "1"}],
            "containers": [{"name": "3", "image": "3"}, {"name": "1", "image": "1"}]
        }});
        assert_eq!(
            patched(doc, patch),
            json!({"spec": {"containers": [{"name": "3", "image": "3"}, {"name": "1", "image": "1"}]}})
        );
    }

    #[test]
    fn set_element_order_interleaves_unnamed_server_items_by_server_position() {
        let doc = json!({"metadata": {"finalizers": ["a", "x", "b"]}});
        let patch = json!({"metadata": {"$setElementOrder/finalizers": ["b", "a"]}});
        assert_eq!(patched(doc, patch), json!({"metadata": {"finalizers": ["x", "b", "a"]}}));
    }

    #[test]
    fn set_element_order_with_deletions_as_kubectl_sends_them() {
        let doc = json!({"metadata": {"finalizers": ["a", "c"]}});
        let patch = json!({"metadata": {
            "$setElementOrder/finalizers": ["a", "b"],
            "finalizers": ["b"],
            "$deleteFromPrimitiveList/finalizers": ["c"]
        }});
        assert_eq!(patched(doc, patch), json!({"metadata": {"finalizers": ["a", "b"]}}));
    }

    #[test]
    fn set_element_order_for_a_new_list_takes_the_patch_list_in_order() {
        let doc = json!({"spec": {}});
        let patch = json!({"spec": {
            "$setElementOrder/volumes": [{"name": "b"}, {"name": "a"}],
            "volumes": [{"name": "b"}, {"name": "a"}]
        }});
        assert_eq!(patched(doc, patch), json!({"spec": {"volumes": [{"name": "b"}, {"name": "a"}]}}));
    }

    #[test]
    fn set_element_order_that_contradicts_the_patch_list_is_invalid() {
        // Upstream test case "should check if order in $setElementOrder and patch list match".
        let doc = json!({"spec": {"containers": [{"name": "1"}, {"name": "3"}, {"name": "2"}]}});
        let patch = json!({"spec": {
            "$setElementOrder/containers": [{"name": "1"}, {"name": "2"}, {"name": "3"}],
            "containers": [{"name": "3", "image": "3"}, {"name": "1", "image": "1"}]
        }});
        let message = invalid_message(smp(doc, patch));
        assert!(message.contains("doesn't match"), "{message}");
    }

    #[test]
    fn set_element_order_must_be_a_list_under_a_field() {
        let doc = json!({"metadata": {"finalizers": ["a"]}});
        malformed_message(smp(doc.clone(), json!({"metadata": {"$setElementOrder/finalizers": "a"}})));
        let message = malformed_message(smp(doc, json!({"metadata": {"$setElementOrder": ["a"]}})));
        assert_eq!(message, "metadata: invalid patch format of setElementOrder list");
    }

    #[test]
    fn set_element_order_entries_of_a_keyed_list_need_the_merge_key() {
        let doc = json!({"spec": {"volumes": [{"name": "a"}]}});
        let result = smp(doc, json!({"spec": {"$setElementOrder/volumes": [{"x": 1}]}}));
        assert!(matches!(result, Err(PatchError::Invalid(_))));
    }

    #[test]
    fn directive_keys_never_reach_the_result() {
        let doc = json!({"metadata": {"finalizers": ["a"]}, "spec": {"containers": [{"name": "c"}]}});
        let patch = json!({
            "metadata": {"$setElementOrder/finalizers": ["a"], "$deleteFromPrimitiveList/finalizers": ["z"]},
            "spec": {
                "containers": [{"name": "c", "env": [{"name": "E", "$retainKeys": ["name"]}]}],
                "new": {"$retainKeys": ["a"], "$setElementOrder/x": [], "a": 1}
            }
        });
        let result = patched(doc, patch);
        assert_eq!(
            result,
            json!({
                "metadata": {"finalizers": ["a"]},
                "spec": {"containers": [{"name": "c", "env": [{"name": "E"}]}], "new": {"a": 1}}
            })
        );
    }

    // Whole-patch checks.

    #[test]
    fn patch_that_is_not_an_object_is_malformed() {
        for patch in [json!([]), json!("x"), json!(null), json!(1)] {
            let message = malformed_message(smp(json!({}), patch));
            assert!(message.starts_with("a strategic merge patch must be a JSON object"), "{message}");
        }
    }

    #[test]
    fn empty_patch_changes_nothing() {
        let doc = json!({"metadata": {"finalizers": ["a"]}, "spec": {"containers": [{"name": "c"}]}});
        assert_eq!(patched(doc.clone(), json!({})), doc);
    }

    #[test]
    fn input_document_is_left_untouched_on_error() {
        let doc = json!({"metadata": {"labels": {"a": "1"}}, "spec": {"volumes": [{"name": "a"}]}});
        let patch = json!({"metadata": {"labels": {"a": "2"}}, "spec": {"volumes": [{"$patch": "bogus"}]}});
        assert!(smp(doc.clone(), patch).is_err());
        assert_eq!(doc, json!({"metadata": {"labels": {"a": "1"}}, "spec": {"volumes": [{"name": "a"}]}}));
    }

    #[test]
    fn too_deep_patch_is_malformed() {
        let mut deep = json!(1);
        for _ in 0..=MAX_NESTING_DEPTH {
            deep = json!({"a": deep});
        }
        assert!(matches!(smp(json!({}), deep), Err(PatchError::Malformed(_))));
    }

    #[test]
    fn untyped_shape_merges_like_merge_patch_for_maps_and_lists() {
        let doc = json!({"data": {"a": "1"}, "items": [1, 2]});
        let patch = json!({"data": {"b": "2"}, "items": [3]});
        let result = apply_strategic_merge_patch(&doc, &patch, &Shape::Untyped);
        assert_eq!(result, Ok(json!({"data": {"a": "1", "b": "2"}, "items": [3]})));
    }
}

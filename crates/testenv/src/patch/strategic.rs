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
pub fn apply_strategic_merge_patch(
    doc: &Value,
    patch: &Value,
    shape: &Shape,
) -> Result<Value, PatchError> {
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
    if path.is_empty() {
        field.to_string()
    } else {
        format!("{path}.{field}")
    }
}

fn at(path: &str, message: impl std::fmt::Display) -> String {
    if path.is_empty() {
        message.to_string()
    } else {
        format!("{path}: {message}")
    }
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
                format!(
                    "unknown patch type: {directive} in map (expected \"replace\" or \"delete\")"
                ),
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
            let malformed =
                || PatchError::Malformed(at(path, "invalid patch format of primitive list"));
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
        (Some(Value::Object(existing)), Value::Object(patch)) => Some(Value::Object(merge_map(
            std::mem::take(existing),
            patch,
            shape,
            &child_path(path, key),
        )?)),
        (Some(Value::Array(existing)), Value::Array(patch)) => Some(Value::Array(merge_list(
            std::mem::take(existing),
            patch,
            shape,
            &child_path(path, key),
        )?)),
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
        return Err(PatchError::Malformed(at(
            path,
            "invalid patch format of retainKeys",
        )));
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
                format!(
                    "invalid patch format of retainKeys: {key:?} is patched but not listed in $retainKeys"
                ),
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
        let malformed =
            || PatchError::Malformed(at(path, "invalid patch format of setElementOrder list"));
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
                    format!(
                        "$setElementOrder applies to a list, but the object has {}",
                        json_type(other)
                    ),
                )));
            }
        };
        validate_against_order(
            patch_list.unwrap_or_default(),
            order,
            &identify,
            &field_path,
        )?;

        let server_order = match &original_list {
            Some(items) => positions(items, &identify, &field_path)?,
            None => HashMap::new(),
        };
        let merged = match (original_list, patch_list) {
            (Some(items), None) => items,
            (None, Some(patch_items)) => clean_list(patch_items),
            (Some(items), Some(patch_items)) => {
                merge_list(items, patch_items, field_shape, &field_path)?
            }
            (None, None) => continue,
        };
        let order_positions = positions(order, &identify, &field_path)?;
        let merged = merged
            .into_iter()
            .map(|item| Ok((identify.of(&item, &field_path)?, item)))
            .collect::<Result<Vec<_>, PatchError>>()?;
        original.insert(
            field.to_string(),
            Value::Array(normalize_order(merged, &order_positions, &server_order)),
        );
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
fn merge_list(
    original: Vec<Value>,
    patch: &[Value],
    shape: &Shape,
    path: &str,
) -> Result<Vec<Value>, PatchError> {
    match shape.list_kind() {
        ListKind::Atomic => Ok(clean_list(patch)),
        ListKind::Set => merge_set(original, patch, path),
        ListKind::Map { merge_key, .. } => {
            merge_keyed(original, patch, merge_key, shape.item(), path)
        }
    }
}

/// A list of scalars with `patchStrategy: merge`: the union, without duplicates.
fn merge_set(original: Vec<Value>, patch: &[Value], path: &str) -> Result<Vec<Value>, PatchError> {
    if original.is_empty() && patch.is_empty() {
        return Ok(original);
    }
    if check_element_types(&original, patch, path)? == Some(ElementType::Object) {
        return Err(PatchError::Invalid(at(
            path,
            "cannot merge lists of objects without a merge key",
        )));
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
                let doomed = identify.of(item, path)?;
                original
                    .retain(|existing| identify.of(existing, path).ok().as_ref() != Some(&doomed));
            }
            Some("replace") => replace = true,
            Some("merge") => {
                return Err(PatchError::Invalid(at(
                    path,
                    "merging lists cannot yet be specified in the patch",
                )));
            }
            _ => {
                return Err(PatchError::Invalid(at(
                    path,
                    format!(
                        "unknown patch type: {directive} in list item (expected \"delete\" or \"replace\")"
                    ),
                )));
            }
        }
    }
    if replace {
        let items: Vec<Value> = plain
            .into_iter()
            .map(|fields| Value::Object(clean_object(fields)))
            .collect();
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
                let item_path = format!(
                    "{path}[{merge_key}={}]",
                    fields.get(merge_key).unwrap_or(&Value::Null)
                );
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
    let (mut from_patch, mut server_only): (Vec<_>, Vec<_>) = merged
        .into_iter()
        .partition(|(id, _)| patch_order.contains_key(id));
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
        let next = if server_first {
            left.next()
        } else {
            right.next()
        };
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
                    format!(
                        "expected an object with merge key {merge_key:?}, got {}",
                        json_type(other)
                    ),
                ))),
            },
        }
    }
}

fn merge_key_identity(
    fields: &Map<String, Value>,
    merge_key: &str,
    path: &str,
) -> Result<String, PatchError> {
    match fields.get(merge_key) {
        Some(value) if !value.is_null() => Ok(identity(value)),
        _ => Err(PatchError::Invalid(at(
            path,
            format!("an item does not contain the declared merge key {merge_key:?}"),
        ))),
    }
}

/// The first position of every item of `items`, by identity.
fn positions(
    items: &[Value],
    identify: &Identify<'_>,
    path: &str,
) -> Result<HashMap<String, usize>, PatchError> {
    let mut positions = HashMap::with_capacity(items.len());
    for (position, item) in items.iter().enumerate() {
        positions
            .entry(identify.of(item, path)?)
            .or_insert(position);
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
            let inner: Vec<String> = entries
                .into_iter()
                .map(|(k, v)| format!("{}:{}", Value::String(k.clone()), identity(v)))
                .collect();
            format!("{{{}}}", inner.join(","))
        }
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(identity).collect::<Vec<_>>().join(",")
        ),
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
fn check_element_types(
    original: &[Value],
    patch: &[Value],
    path: &str,
) -> Result<Option<ElementType>, PatchError> {
    let mut seen = None;
    for item in original.iter().chain(patch) {
        let this = match item {
            Value::Null => ElementType::Null,
            Value::Bool(_) => ElementType::Bool,
            Value::Number(_) => ElementType::Number,
            Value::String(_) => ElementType::String,
            Value::Object(_) => ElementType::Object,
            Value::Array(_) => {
                return Err(PatchError::Invalid(at(
                    path,
                    "lists of lists are not supported",
                )));
            }
        };
        match seen {
            None => seen = Some(this),
            Some(previous) if previous != this => {
                return Err(PatchError::Invalid(at(
                    path,
                    "list element types are not identical",
                )));
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

//! JSON merge patch (RFC 7386, `application/merge-patch+json`).
//!
//! The algorithm of RFC 7386 §2, which kube-apiserver applies through `evanphx/json-patch`'s
//! `MergePatch`:
//!
//! * a patch that is an object is merged key by key into the target (a target that is not an
//!   object is first replaced by `{}`); `null` deletes the key, any other value is merged
//!   recursively into the target's value for that key;
//! * a patch that is anything else (an array, a scalar, `null`) replaces the target. Arrays are
//!   therefore always replaced whole; merge patch has no way to edit a list.
//!
//! A consequence worth knowing: nulls inside an object that is added where the target had
//! nothing are dropped (they are merged into an empty object), while nulls inside arrays are kept.
//! Whether the result is still a valid Kubernetes object (a non-object patch makes it a scalar or
//! an array) is for the caller to check.

use serde_json::{Map, Value};

use super::{PatchError, check_document_depth, check_patch_depth, remove_key};

/// Applies a JSON merge patch (RFC 7386) to `doc` and returns the result; `doc` is not modified.
///
/// Fails only on documents nested deeper than [`super::MAX_NESTING_DEPTH`]: every JSON value is
/// a valid merge patch.
pub fn apply_merge_patch(doc: &Value, patch: &Value) -> Result<Value, PatchError> {
    check_patch_depth(patch)?;
    let Value::Object(patch) = patch else {
        // Replacing the whole document needs no look at it.
        return Ok(patch.clone());
    };
    check_document_depth(doc)?;
    let target = match doc {
        Value::Object(fields) => fields.clone(),
        _ => Map::new(),
    };
    Ok(Value::Object(merge_object(target, patch)))
}

/// RFC 7386 `MergePatch(Target, Patch)` for an object patch. Recursion is bounded by the depth of
/// the patch, which the caller has checked.
fn merge_object(mut target: Map<String, Value>, patch: &Map<String, Value>) -> Map<String, Value> {
    for (key, value) in patch {
        match value {
            Value::Null => {
                remove_key(&mut target, key);
            }
            Value::Object(patch_fields) => {
                let existing = match target.get_mut(key).map(std::mem::take) {
                    Some(Value::Object(fields)) => fields,
                    _ => Map::new(),
                };
                target.insert(
                    key.clone(),
                    Value::Object(merge_object(existing, patch_fields)),
                );
            }
            other => {
                target.insert(key.clone(), other.clone());
            }
        }
    }
    target
}

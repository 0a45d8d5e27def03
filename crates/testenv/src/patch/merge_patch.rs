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
                target.insert(key.clone(), Value::Object(merge_object(existing, patch_fields)));
            }
            other => {
                target.insert(key.clone(), other.clone());
            }
        }
    }
    target
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::patch::MAX_NESTING_DEPTH;
    use serde_json::json;

    fn merge(doc: Value, patch: Value) -> Value {
        match apply_merge_patch(&doc, &patch) {
            Ok(result) => result,
            Err(error) => panic!("merge patch failed: {error}"),
        }
    }

    /// RFC 7386 appendix A, every row.
    #[test]
    fn rfc_appendix_a_examples() {
        let cases = [
            (json!({"a": "b"}), json!({"a": "c"}), json!({"a": "c"})),
            (json!({"a": "b"}), json!({"b": "c"}), json!({"a": "b", "b": "c"})),
            (json!({"a": "b"}), json!({"a": null}), json!({})),
            (json!({"a": "b", "b": "c"}), json!({"a": null}), json!({"b": "c"})),
            (json!({"a": ["b"]}), json!({"a": "c"}), json!({"a": "c"})),
            (json!({"a": "c"}), json!({"a": ["b"]}), json!({"a": ["b"]})),
            (json!({"a": {"b": "c"}}), json!({"a": {"b": "d", "c": null}}), json!({"a": {"b": "d"}})),
            (json!({"a": [{"b": "c"}]}), json!({"a": [1]}), json!({"a": [1]})),
            (json!(["a", "b"]), json!(["c", "d"]), json!(["c", "d"])),
            (json!({"a": "b"}), json!(["c"]), json!(["c"])),
            (json!({"a": "foo"}), json!(null), json!(null)),
            (json!({"a": "foo"}), json!("bar"), json!("bar")),
            (json!({"e": null}), json!({"a": 1}), json!({"e": null, "a": 1})),
            (json!([1, 2]), json!({"a": "b", "c": null}), json!({"a": "b"})),
            (json!({}), json!({"a": {"bb": {"ccc": null}}}), json!({"a": {"bb": {}}})),
        ];
        for (doc, patch, expected) in cases {
            assert_eq!(merge(doc.clone(), patch.clone()), expected, "doc {doc} patch {patch}");
        }
    }

    /// The worked example of RFC 7386 section 3.
    #[test]
    fn rfc_section_3_example() {
        let doc = json!({
            "title": "Goodbye!",
            "author": {"givenName": "John", "familyName": "Doe"},
            "tags": ["example", "sample"],
            "content": "This will be unchanged"
        });
        let patch = json!({
            "title": "Hello!",
            "phoneNumber": "+01-123-456-7890",
            "author": {"familyName": null},
            "tags": ["example"]
        });
        assert_eq!(
            merge(doc, patch),
            json!({
                "title": "Hello!",
                "author": {"givenName": "John"},
                "tags": ["example"],
                "content": "This will be unchanged",
                "phoneNumber": "+01-123-456-7890"
            })
        );
    }

    #[test]
    fn labels_merge_and_null_removes_one() {
        let doc = json!({"metadata": {"name": "x", "labels": {"a": "1", "b": "2"}}});
        let patch = json!({"metadata": {"labels": {"a": null, "c": "3"}}});
        assert_eq!(merge(doc, patch), json!({"metadata": {"name": "x", "labels": {"b": "2", "c": "3"}}}));
    }

    #[test]
    fn finalizers_are_replaced_not_merged() {
        let doc = json!({"metadata": {"finalizers": ["a", "b"]}});
        let patch = json!({"metadata": {"finalizers": ["c"]}});
        assert_eq!(merge(doc, patch), json!({"metadata": {"finalizers": ["c"]}}));
    }

    #[test]
    fn nulls_inside_arrays_are_kept() {
        let patch = json!({"a": [null, {"b": null}]});
        assert_eq!(merge(json!({}), patch), json!({"a": [null, {"b": null}]}));
    }

    #[test]
    fn deleting_a_missing_key_is_a_no_op() {
        assert_eq!(merge(json!({"a": 1}), json!({"b": null})), json!({"a": 1}));
    }

    #[test]
    fn object_replaces_a_scalar_and_drops_its_nulls() {
        assert_eq!(merge(json!({"a": 1}), json!({"a": {"b": 1, "c": null}})), json!({"a": {"b": 1}}));
    }

    #[test]
    fn empty_patch_object_changes_nothing() {
        let doc = json!({"a": {"b": [1, 2]}});
        assert_eq!(merge(doc.clone(), json!({})), doc);
    }

    #[test]
    fn input_document_is_left_untouched() {
        let doc = json!({"a": {"b": 1}});
        let _ = apply_merge_patch(&doc, &json!({"a": {"b": null}}));
        assert_eq!(doc, json!({"a": {"b": 1}}));
    }

    #[test]
    fn too_deep_patch_is_malformed() {
        let mut deep = json!(1);
        for _ in 0..=MAX_NESTING_DEPTH {
            deep = json!({"a": deep});
        }
        assert!(matches!(apply_merge_patch(&json!({}), &deep), Err(PatchError::Malformed(_))));
    }

    #[test]
    fn too_deep_document_is_invalid() {
        let mut deep = json!(1);
        for _ in 0..=MAX_NESTING_DEPTH {
            deep = json!({"a": deep});
        }
        assert!(matches!(apply_merge_patch(&deep, &json!({"b": 1})), Err(PatchError::Invalid(_))));
    }
}

//! The three non-apply PATCH content types of kube-apiserver, as pure functions on JSON values.
//!
//! | Content-Type                           | function                          | follows                                   |
//! |----------------------------------------|-----------------------------------|-------------------------------------------|
//! | `application/json-patch+json`          | [`apply_json_patch`]              | RFC 6902 as `evanphx/json-patch` applies it |
//! | `application/merge-patch+json`         | [`apply_merge_patch`]             | RFC 7386                                  |
//! | `application/strategic-merge-patch+json` | [`apply_strategic_merge_patch`] | `k8s.io/apimachinery/pkg/util/strategicpatch` |
//!
//! Server-side apply (`application/apply-patch+yaml`) lives in [`crate::ssa`].
//!
//! Every function takes the current object and the decoded patch body and returns the patched
//! object, or a [`PatchError`] that says which HTTP status the handler should answer with:
//! [`PatchError::Malformed`] for a patch document that is not of the right form (400
//! BadRequest), [`PatchError::Invalid`] for a well-formed patch that cannot be applied to this
//! object (422 Invalid; kube-apiserver answers a failed JSON-patch `test` with
//! `NewGenericServerResponse(422, ...)`). Nothing here knows about resource versions, field
//! managers or which kinds accept which patch type (strategic merge patch on a custom resource
//! is a 415 decided by the caller).
//!
//! All functions are total: they never panic on any input, and they refuse documents nested
//! deeper than [`MAX_NESTING_DEPTH`] levels instead of recursing without bound.

mod json_patch;
mod merge_patch;
mod strategic;

use serde_json::Value;

pub use json_patch::apply_json_patch;
pub use merge_patch::apply_merge_patch;
pub use strategic::apply_strategic_merge_patch;

/// Why a patch could not be applied; the caller maps it to an HTTP Status.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum PatchError {
    /// The patch document itself is not decodable or not of the right form -> 400 BadRequest.
    #[error("{0}")]
    Malformed(String),
    /// The patch is well-formed but cannot be applied to this object (failed `test`, missing path,
    /// bad directive...) -> 422 Invalid.
    #[error("{0}")]
    Invalid(String),
}

/// The largest number of operations a JSON patch may hold, as kube-apiserver's
/// `maxJSONPatchOperations` (a guard against CVE-2019-1002100-style patches that are cheap to
/// send and expensive to apply).
pub const MAX_JSON_PATCH_OPERATIONS: usize = 10_000;

/// The deepest nesting of arrays and objects accepted in a patch, in the object being patched
/// and in a patched result. Every container counts one level: `{}` is 1 deep, `{"a": []}` is 2.
///
/// Real objects are nowhere near this deep; the limit exists so that recursion over
/// client-supplied JSON is bounded and cannot overflow the stack.
pub const MAX_NESTING_DEPTH: usize = 256;

/// The nesting depth of `value` (0 for a scalar, 1 for a flat array or object), computed
/// without recursion so that it is safe on arbitrarily deep input.
pub(crate) fn nesting_depth(value: &Value) -> usize {
    let mut deepest = 0;
    let mut stack: Vec<(&Value, usize)> = vec![(value, 1)];
    while let Some((value, depth)) = stack.pop() {
        match value {
            Value::Array(items) => {
                deepest = deepest.max(depth);
                stack.extend(items.iter().filter(|v| is_container(v)).map(|v| (v, depth + 1)));
            }
            Value::Object(fields) => {
                deepest = deepest.max(depth);
                stack.extend(fields.values().filter(|v| is_container(v)).map(|v| (v, depth + 1)));
            }
            _ => {}
        }
    }
    deepest
}

fn is_container(value: &Value) -> bool {
    matches!(value, Value::Array(_) | Value::Object(_))
}

/// Rejects a patch document nested deeper than [`MAX_NESTING_DEPTH`].
pub(crate) fn check_patch_depth(patch: &Value) -> Result<(), PatchError> {
    let depth = nesting_depth(patch);
    if depth > MAX_NESTING_DEPTH {
        return Err(PatchError::Malformed(format!(
            "the patch is nested {depth} levels deep, more than the {MAX_NESTING_DEPTH} allowed"
        )));
    }
    Ok(())
}

/// Rejects an object to patch nested deeper than [`MAX_NESTING_DEPTH`]. Stored objects never
/// are, but the functions here must stay total whatever they are given.
pub(crate) fn check_document_depth(doc: &Value) -> Result<(), PatchError> {
    let depth = nesting_depth(doc);
    if depth > MAX_NESTING_DEPTH {
        return Err(PatchError::Invalid(format!(
            "the object to patch is nested {depth} levels deep, more than the {MAX_NESTING_DEPTH} allowed"
        )));
    }
    Ok(())
}

/// The JSON type of `value` with an article, for error messages ("an object", "null").
pub(crate) fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Removes `key` from `map` and returns its value, keeping the order of the other keys even
/// when serde_json's `preserve_order` feature is on (where `Map::remove` swaps entries).
pub(crate) fn remove_key(map: &mut serde_json::Map<String, Value>, key: &str) -> Option<Value> {
    let value = std::mem::take(map.get_mut(key)?);
    map.retain(|k, _| k != key);
    Some(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shape::Shape;
    use serde_json::json;

    fn nested(levels: usize) -> Value {
        let mut value = json!(1);
        for _ in 0..levels {
            value = json!([value]);
        }
        value
    }

    #[test]
    fn scalars_have_no_depth_and_containers_count_one_level_each() {
        assert_eq!(nesting_depth(&json!("x")), 0);
        assert_eq!(nesting_depth(&json!({})), 1);
        assert_eq!(nesting_depth(&json!({"a": [1, {"b": {}}], "c": 1})), 4);
    }

    #[test]
    fn patch_at_the_depth_limit_is_accepted_and_one_deeper_is_malformed() {
        assert_eq!(check_patch_depth(&nested(MAX_NESTING_DEPTH)), Ok(()));
        assert!(matches!(check_patch_depth(&nested(MAX_NESTING_DEPTH + 1)), Err(PatchError::Malformed(_))));
    }

    #[test]
    fn too_deep_document_is_invalid_not_malformed() {
        assert!(matches!(check_document_depth(&nested(MAX_NESTING_DEPTH + 1)), Err(PatchError::Invalid(_))));
    }

    /// A small deterministic generator of JSON values biased towards the words the patch
    /// functions react to, so that arbitrary combinations of directives, pointers and list
    /// shapes are exercised.
    struct Arbitrary(u64);

    impl Arbitrary {
        fn next(&mut self) -> u64 {
            // xorshift64*
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }

        fn pick<'a>(&mut self, words: &[&'a str]) -> &'a str {
            let index = (self.next() % words.len() as u64) as usize;
            words.get(index).copied().unwrap_or_default()
        }

        fn value(&mut self, depth: usize) -> Value {
            const WORDS: &[&str] = &[
                "a", "b", "name", "delete", "replace", "merge", "add", "remove", "move", "copy", "test", "/a", "/a/0",
                "/a/-", "/b/a", "", "/", "/a/01", "~", "x",
            ];
            const KEYS: &[&str] = &[
                "a",
                "b",
                "name",
                "op",
                "path",
                "from",
                "value",
                "$patch",
                "$retainKeys",
                "$setElementOrder/a",
                "$setElementOrder/name",
                "$deleteFromPrimitiveList/a",
                "$setElementOrder",
                "$ref",
            ];
            let choice = if depth == 0 { self.next() % 6 } else { self.next() % 9 };
            match choice {
                0 => Value::Null,
                1 => Value::Bool(self.next().is_multiple_of(2)),
                2 => json!((self.next() % 5) as i64 - 1),
                3 => json!(1.5),
                4 | 5 => Value::String(self.pick(WORDS).to_string()),
                6 | 7 => {
                    let len = self.next() % 4;
                    let mut fields = serde_json::Map::new();
                    for _ in 0..len {
                        let key = self.pick(KEYS).to_string();
                        fields.insert(key, self.value(depth - 1));
                    }
                    Value::Object(fields)
                }
                _ => {
                    let len = self.next() % 4;
                    Value::Array((0..len).map(|_| self.value(depth - 1)).collect())
                }
            }
        }
    }

    #[test]
    fn arbitrary_inputs_never_panic() {
        let item = Shape::structure([("name", Shape::Atomic), ("a", Shape::set())]);
        let shapes = [
            Shape::Untyped,
            Shape::structure([("a", Shape::set()), ("b", Shape::list_map(item.clone(), &["name"]))]),
            Shape::structure([("a", Shape::list_map(item, &["name"])), ("b", Shape::map_of(Shape::set()))]),
        ];
        let mut arbitrary = Arbitrary(0x9e37_79b9_7f4a_7c15);
        for round in 0..5000u32 {
            let doc = arbitrary.value(4);
            let patch = arbitrary.value(4);
            let _ = apply_merge_patch(&doc, &patch);
            for shape in &shapes {
                let _ = apply_strategic_merge_patch(&doc, &patch, shape);
            }
            // JSON patches: an array of operation-like objects most of the time.
            let ops = if round.is_multiple_of(4) {
                patch
            } else {
                let len = arbitrary.next() % 4;
                Value::Array(
                    (0..len)
                        .map(|_| {
                            let mut op = serde_json::Map::new();
                            op.insert(
                                "op".into(),
                                json!(arbitrary.pick(&["add", "remove", "replace", "move", "copy", "test"])),
                            );
                            op.insert(
                                "path".into(),
                                json!(arbitrary.pick(&["", "/a", "/a/0", "/a/-", "/b/a", "/a/1", "/a/a"])),
                            );
                            op.insert("from".into(), json!(arbitrary.pick(&["", "/a", "/a/0", "/b"])));
                            op.insert("value".into(), arbitrary.value(2));
                            Value::Object(op)
                        })
                        .collect(),
                )
            };
            let _ = apply_json_patch(&doc, &ops);
        }
    }

    #[test]
    fn remove_key_returns_the_value_and_keeps_the_rest() {
        let mut map = json!({"a": 1, "b": 2, "c": 3}).as_object().cloned().unwrap_or_default();
        assert_eq!(remove_key(&mut map, "b"), Some(json!(2)));
        assert_eq!(remove_key(&mut map, "b"), None);
        assert_eq!(Value::Object(map), json!({"a": 1, "c": 3}));
    }
}

//! JSON patch (RFC 6902, `application/json-patch+json`).
//!
//! kube-apiserver applies JSON patches with `github.com/evanphx/json-patch` (`patchObj.Apply`
//! in `k8s.io/apiserver/pkg/endpoints/handlers/patch.go`), and clients depend on where that
//! library is more lenient than a strict reading of the RFC. The semantics here are:
//!
//! * `test` of a path whose parent exists but which is itself absent, with `"value": null`,
//!   passes. kube-runtime's finalizer helper adds the first finalizer with
//!   `[{"op":"test","path":"/metadata/finalizers","value":null},{"op":"add",...}]`, so a strict
//!   implementation would leave the operator unable to ever add its finalizer.
//! * `test` compares JSON values structurally; numbers compare by value (`1` equals `1.0`),
//!   object key order never matters.
//! * `add` / `remove` / `replace` / `move` / `copy` / `test` with RFC 6901 pointers (`~0`, `~1`);
//!   the empty pointer `""` is the whole document; `/-` appends to an array for `add`, `move`
//!   and `copy`; an array index is a non-negative decimal without leading zeros, within bounds
//!   (`add` also accepts the length, which appends). The negative indices evanphx accepts as an
//!   extension are refused.
//! * `add` needs the parent to exist; `remove` and `replace` need the target to exist.
//! * The patch is atomic: it is applied to a copy, and the first failing operation discards the
//!   copy, so the caller never sees a partial result.
//!
//! The whole patch is decoded before any operation runs, so a patch that is not of the right form
//! is reported as [`PatchError::Malformed`] (400) even when an earlier operation would have
//! failed: not an array, an operation that is not an object, a missing or non-string `op` or
//! `path`, an unknown `op`, a missing `value` (add, replace, test) or `from` (move, copy), a
//! pointer that is not RFC 6901, more than [`MAX_JSON_PATCH_OPERATIONS`] operations. An
//! operation that cannot be applied to this object is [`PatchError::Invalid`] (422), with a
//! message in evanphx's words naming the operation and the path, e.g.
//! `add operation does not apply: doc is missing path: "/a/b"` or
//! `testing value /spec/x failed: test failed`.

use serde_json::{Map, Value};

use super::{
    MAX_JSON_PATCH_OPERATIONS, MAX_NESTING_DEPTH, PatchError, check_document_depth, check_patch_depth, json_type,
    nesting_depth, remove_key,
};

/// How many JSON values (every scalar, array and object counts one) the `copy` operations of one
/// patch may duplicate in total. Without a bound, a few hundred `copy` operations that each copy
/// the whole document into itself grow it exponentially; evanphx offers the same guard as
/// `AccumulatedCopySizeLimit`. A real object holds far fewer values than this.
const MAX_COPIED_VALUES: usize = 1 << 20;

/// Applies a JSON patch (RFC 6902) to `doc` with the semantics kube-apiserver gets from
/// `evanphx/json-patch`: see the module documentation. `patch` is the decoded request body.
///
/// Returns the patched document; `doc` itself is never modified, whatever the outcome.
pub fn apply_json_patch(doc: &Value, patch: &Value) -> Result<Value, PatchError> {
    check_patch_depth(patch)?;
    let operations = decode(patch)?;
    check_document_depth(doc)?;

    let mut result = doc.clone();
    let mut copied = 0;
    for operation in &operations {
        operation.apply(&mut result, &mut copied)?;
    }
    Ok(result)
}

/// The six RFC 6902 operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum OpKind {
    Add,
    Remove,
    Replace,
    Move,
    Copy,
    Test,
}

impl OpKind {
    fn parse(name: &str) -> Option<OpKind> {
        Some(match name {
            "add" => OpKind::Add,
            "remove" => OpKind::Remove,
            "replace" => OpKind::Replace,
            "move" => OpKind::Move,
            "copy" => OpKind::Copy,
            "test" => OpKind::Test,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            OpKind::Add => "add",
            OpKind::Remove => "remove",
            OpKind::Replace => "replace",
            OpKind::Move => "move",
            OpKind::Copy => "copy",
            OpKind::Test => "test",
        }
    }

    fn needs_value(self) -> bool {
        matches!(self, OpKind::Add | OpKind::Replace | OpKind::Test)
    }

    fn needs_from(self) -> bool {
        matches!(self, OpKind::Move | OpKind::Copy)
    }
}

/// A decoded RFC 6901 JSON pointer.
#[derive(Debug)]
struct Pointer {
    /// The pointer as the client wrote it, for error messages.
    raw: String,
    /// The unescaped reference tokens; empty for the whole document.
    tokens: Vec<String>,
}

impl Pointer {
    /// Parses an RFC 6901 pointer: empty, or `/`-separated tokens in which `~` only appears as
    /// the escapes `~0` (`~`) and `~1` (`/`).
    fn parse(raw: &str) -> Result<Pointer, String> {
        if raw.is_empty() {
            return Ok(Pointer { raw: String::new(), tokens: Vec::new() });
        }
        let Some(rest) = raw.strip_prefix('/') else {
            return Err(format!("invalid JSON pointer {raw:?}: it must be empty or start with \"/\""));
        };
        let tokens = rest
            .split('/')
            .map(|token| {
                unescape(token).ok_or_else(|| format!("invalid JSON pointer {raw:?}: \"~\" must be followed by 0 or 1"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Pointer { raw: raw.to_string(), tokens })
    }

    /// The tokens leading to the parent of the target, and the last token; `None` for the whole
    /// document.
    fn split_last(&self) -> Option<(&[String], &str)> {
        let (last, parent) = self.tokens.split_last()?;
        Some((parent, last.as_str()))
    }
}

/// Undoes RFC 6901 escaping; `None` for a `~` not followed by `0` or `1`.
fn unescape(token: &str) -> Option<String> {
    if !token.contains('~') {
        return Some(token.to_string());
    }
    let mut out = String::with_capacity(token.len());
    let mut chars = token.chars();
    while let Some(c) = chars.next() {
        if c == '~' {
            match chars.next() {
                Some('0') => out.push('~'),
                Some('1') => out.push('/'),
                _ => return None,
            }
        } else {
            out.push(c);
        }
    }
    Some(out)
}

/// One decoded operation, borrowing its value from the patch document.
#[derive(Debug)]
struct Operation<'p> {
    kind: OpKind,
    path: Pointer,
    from: Option<Pointer>,
    value: Option<&'p Value>,
}

/// Decodes and validates the whole patch before anything is applied.
fn decode(patch: &Value) -> Result<Vec<Operation<'_>>, PatchError> {
    let Value::Array(items) = patch else {
        return Err(PatchError::Malformed(format!(
            "a JSON patch must be an array of operations, not {}",
            json_type(patch)
        )));
    };
    if items.len() > MAX_JSON_PATCH_OPERATIONS {
        // kube-apiserver's own wording for this limit.
        return Err(PatchError::Malformed(format!(
            "The allowed maximum operations in a JSON patch is {MAX_JSON_PATCH_OPERATIONS}, got {}",
            items.len()
        )));
    }
    items.iter().enumerate().map(|(index, item)| decode_operation(index, item)).collect()
}

fn decode_operation(index: usize, item: &Value) -> Result<Operation<'_>, PatchError> {
    let malformed = |message: String| PatchError::Malformed(format!("operation {index}: {message}"));
    let Value::Object(fields) = item else {
        return Err(malformed(format!("an operation must be an object, not {}", json_type(item))));
    };
    let kind = match fields.get("op") {
        None => return Err(malformed("missing \"op\"".to_string())),
        Some(Value::String(name)) => OpKind::parse(name).ok_or_else(|| {
            malformed(format!("unknown op {name:?}: expected add, remove, replace, move, copy or test"))
        })?,
        Some(other) => {
            return Err(malformed(format!("\"op\" must be a string, not {}", json_type(other))));
        }
    };
    let pointer = |member: &str| -> Result<Option<Pointer>, PatchError> {
        match fields.get(member) {
            None => Ok(None),
            Some(Value::String(raw)) => Pointer::parse(raw)
                .map(Some)
                .map_err(|message| malformed(format!("{} {member:?}: {message}", kind.name()))),
            Some(other) => {
                Err(malformed(format!("{} {member:?} must be a string, not {}", kind.name(), json_type(other))))
            }
        }
    };
    let Some(path) = pointer("path")? else {
        return Err(malformed(format!("{} operation is missing \"path\"", kind.name())));
    };
    let from = if kind.needs_from() {
        let Some(from) = pointer("from")? else {
            return Err(malformed(format!("{} operation is missing \"from\"", kind.name())));
        };
        Some(from)
    } else {
        None
    };
    // `"value": null` is a value; only an absent member is missing.
    let value = fields.get("value");
    if kind.needs_value() && value.is_none() {
        return Err(malformed(format!("{} operation is missing \"value\"", kind.name())));
    }
    Ok(Operation { kind, path, from, value })
}

impl Operation<'_> {
    fn apply(&self, doc: &mut Value, copied: &mut usize) -> Result<(), PatchError> {
        let value = || self.value.cloned().unwrap_or(Value::Null);
        match self.kind {
            OpKind::Add => add(doc, &self.path, value()),
            OpKind::Remove => remove(doc, &self.path, OpKind::Remove).map(drop),
            OpKind::Replace => replace(doc, &self.path, value()),
            OpKind::Test => test(doc, &self.path, self.value.unwrap_or(&Value::Null)),
            OpKind::Move => match &self.from {
                Some(from) => move_value(doc, from, &self.path),
                None => Ok(()),
            },
            OpKind::Copy => match &self.from {
                Some(from) => copy_value(doc, from, &self.path, copied),
                None => Ok(()),
            },
        }
    }
}

fn missing_path(op: OpKind, path: &Pointer) -> PatchError {
    PatchError::Invalid(format!("{} operation does not apply: doc is missing path: {:?}", op.name(), path.raw))
}

fn missing_from(op: OpKind, from: &Pointer) -> PatchError {
    PatchError::Invalid(format!("{} operation does not apply: doc is missing from path: {:?}", op.name(), from.raw))
}

fn invalid_index(op: OpKind, path: &Pointer, token: &str) -> PatchError {
    PatchError::Invalid(format!(
        "{} operation does not apply: invalid array index {token:?} in path {:?}",
        op.name(),
        path.raw
    ))
}

/// Parses an array index token: `0` or a decimal without leading zeros.
fn parse_index(token: &str) -> Option<usize> {
    let well_formed =
        token == "0" || (!token.is_empty() && !token.starts_with('0') && token.bytes().all(|b| b.is_ascii_digit()));
    if well_formed { token.parse().ok() } else { None }
}

/// The value at `tokens`, if there is one.
fn resolve<'d>(doc: &'d Value, tokens: &[String]) -> Option<&'d Value> {
    tokens.iter().try_fold(doc, |node, token| match node {
        Value::Object(fields) => fields.get(token),
        Value::Array(items) => items.get(parse_index(token)?),
        _ => None,
    })
}

/// The value at `tokens`, mutably, if there is one.
fn resolve_mut<'d>(doc: &'d mut Value, tokens: &[String]) -> Option<&'d mut Value> {
    tokens.iter().try_fold(doc, |node, token| match node {
        Value::Object(fields) => fields.get_mut(token),
        Value::Array(items) => items.get_mut(parse_index(token)?),
        _ => None,
    })
}

/// Refuses to place `value` where the document would become deeper than the limit, so the
/// document stays within [`MAX_NESTING_DEPTH`] after every operation.
fn check_result_depth(op: OpKind, path: &Pointer, value: &Value) -> Result<(), PatchError> {
    if path.tokens.len() + nesting_depth(value) > MAX_NESTING_DEPTH {
        return Err(PatchError::Invalid(format!(
            "{} operation does not apply: the document would be nested more than {MAX_NESTING_DEPTH} levels deep at {:?}",
            op.name(),
            path.raw
        )));
    }
    Ok(())
}

/// `add`.
fn add(doc: &mut Value, path: &Pointer, value: Value) -> Result<(), PatchError> {
    check_result_depth(OpKind::Add, path, &value)?;
    insert(doc, path, value, OpKind::Add)
}

/// Places `value` at `path` as `add` does, once the depth of the result has been checked. Also
/// the second half of `move` and `copy`, reported under their name.
fn insert(doc: &mut Value, path: &Pointer, value: Value, op: OpKind) -> Result<(), PatchError> {
    let Some((parent_tokens, last)) = path.split_last() else {
        *doc = value;
        return Ok(());
    };
    match resolve_mut(doc, parent_tokens) {
        Some(Value::Object(fields)) => {
            fields.insert(last.to_string(), value);
            Ok(())
        }
        Some(Value::Array(items)) => {
            if last == "-" {
                items.push(value);
                return Ok(());
            }
            match parse_index(last) {
                Some(index) if index <= items.len() => {
                    items.insert(index, value);
                    Ok(())
                }
                _ => Err(invalid_index(op, path, last)),
            }
        }
        _ => Err(missing_path(op, path)),
    }
}

/// `remove` (also the first half of `move`); returns the removed value.
fn remove(doc: &mut Value, path: &Pointer, op: OpKind) -> Result<Value, PatchError> {
    let Some((parent_tokens, last)) = path.split_last() else {
        return Err(PatchError::Invalid(format!(
            "{} operation does not apply: the whole document cannot be removed",
            op.name()
        )));
    };
    match resolve_mut(doc, parent_tokens) {
        Some(Value::Object(fields)) => remove_key(fields, last).ok_or_else(|| missing_path(op, path)),
        Some(Value::Array(items)) => match parse_index(last) {
            Some(index) if index < items.len() => Ok(items.remove(index)),
            Some(_) => Err(missing_path(op, path)),
            None => Err(invalid_index(op, path, last)),
        },
        _ => Err(missing_path(op, path)),
    }
}

fn replace(doc: &mut Value, path: &Pointer, value: Value) -> Result<(), PatchError> {
    check_result_depth(OpKind::Replace, path, &value)?;
    let target = resolve_mut(doc, &path.tokens).ok_or_else(|| missing_path(OpKind::Replace, path))?;
    *target = value;
    Ok(())
}

fn move_value(doc: &mut Value, from: &Pointer, path: &Pointer) -> Result<(), PatchError> {
    if from.tokens == path.tokens {
        // RFC 6902 §4.4: a no-op, but the location must exist.
        return resolve(doc, &from.tokens).map(drop).ok_or_else(|| missing_from(OpKind::Move, from));
    }
    if path.tokens.starts_with(&from.tokens) {
        return Err(PatchError::Invalid(format!(
            "move operation does not apply: cannot move {:?} into its own child {:?}",
            from.raw, path.raw
        )));
    }
    let value = remove(doc, from, OpKind::Move).map_err(|_| missing_from(OpKind::Move, from))?;
    if path.tokens.len() > from.tokens.len() {
        // A value moved no deeper than it was cannot break the depth limit, so only moves
        // deeper pay for measuring it.
        check_result_depth(OpKind::Move, path, &value)?;
    }
    insert(doc, path, value, OpKind::Move)
}

fn copy_value(doc: &mut Value, from: &Pointer, path: &Pointer, copied: &mut usize) -> Result<(), PatchError> {
    let source = resolve(doc, &from.tokens).ok_or_else(|| missing_from(OpKind::Copy, from))?;
    *copied = copied.saturating_add(count_values(source));
    if *copied > MAX_COPIED_VALUES {
        return Err(PatchError::Invalid(format!(
            "copy operation does not apply: the copy operations of this patch duplicate {} values, more than the {MAX_COPIED_VALUES} allowed",
            copied
        )));
    }
    // Checked before cloning so that an over-deep copy costs nothing.
    check_result_depth(OpKind::Copy, path, source)?;
    let value = source.clone();
    insert(doc, path, value, OpKind::Copy)
}

/// The number of JSON values in `value`, itself included.
fn count_values(value: &Value) -> usize {
    let mut count = 0usize;
    let mut stack = vec![value];
    while let Some(value) = stack.pop() {
        count = count.saturating_add(1);
        match value {
            Value::Array(items) => stack.extend(items.iter()),
            Value::Object(fields) => stack.extend(fields.values()),
            _ => {}
        }
    }
    count
}

fn test(doc: &Value, path: &Pointer, expected: &Value) -> Result<(), PatchError> {
    let failed = || PatchError::Invalid(format!("testing value {} failed: test failed", path.raw));
    let Some((parent_tokens, last)) = path.split_last() else {
        return if json_equal(doc, expected) { Ok(()) } else { Err(failed()) };
    };
    let (actual, parent_is_object) = match resolve(doc, parent_tokens) {
        Some(Value::Object(fields)) => (fields.get(last), true),
        Some(Value::Array(items)) => match parse_index(last) {
            Some(index) => (items.get(index), false),
            None => return Err(invalid_index(OpKind::Test, path, last)),
        },
        _ => {
            return Err(PatchError::Invalid(format!("test operation does not apply: is missing path: {}", path.raw)));
        }
    };
    match actual {
        Some(actual) if json_equal(actual, expected) => Ok(()),
        // evanphx: a member absent from an existing object tests equal to null. This is what
        // lets kube-runtime guard the first finalizer with `test /metadata/finalizers null`.
        None if parent_is_object && expected.is_null() => Ok(()),
        _ => Err(failed()),
    }
}

/// Structural JSON equality in which numbers compare by value (`1 == 1.0`), as RFC 6902 §4.6
/// asks of `test`. Recursion is bounded because the documents compared never exceed
/// [`MAX_NESTING_DEPTH`].
fn json_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => numbers_equal(x, y),
        (Value::Array(xs), Value::Array(ys)) => {
            xs.len() == ys.len() && xs.iter().zip(ys).all(|(x, y)| json_equal(x, y))
        }
        (Value::Object(xs), Value::Object(ys)) => objects_equal(xs, ys),
        _ => a == b,
    }
}

fn objects_equal(xs: &Map<String, Value>, ys: &Map<String, Value>) -> bool {
    xs.len() == ys.len() && xs.iter().all(|(k, x)| ys.get(k).is_some_and(|y| json_equal(x, y)))
}

fn numbers_equal(x: &serde_json::Number, y: &serde_json::Number) -> bool {
    let as_integer = |n: &serde_json::Number| n.as_i64().map(i128::from).or_else(|| n.as_u64().map(i128::from));
    match (as_integer(x), as_integer(y)) {
        (Some(x), Some(y)) => x == y,
        _ => match (x.as_f64(), y.as_f64()) {
            (Some(x), Some(y)) => x == y,
            _ => false,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn apply(doc: Value, patch: Value) -> Result<Value, PatchError> {
        apply_json_patch(&doc, &patch)
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

    // RFC 6902 appendix A.

    #[test]
    fn rfc_a1_add_object_member() {
        let result = apply(json!({"foo": "bar"}), json!([{"op": "add", "path": "/baz", "value": "qux"}]));
        assert_eq!(result, Ok(json!({"baz": "qux", "foo": "bar"})));
    }

    #[test]
    fn rfc_a2_add_array_element() {
        let result = apply(json!({"foo": ["bar", "baz"]}), json!([{"op": "add", "path": "/foo/1", "value": "qux"}]));
        assert_eq!(result, Ok(json!({"foo": ["bar", "qux", "baz"]})));
    }

    #[test]
    fn rfc_a3_remove_object_member() {
        let result = apply(json!({"baz": "qux", "foo": "bar"}), json!([{"op": "remove", "path": "/baz"}]));
        assert_eq!(result, Ok(json!({"foo": "bar"})));
    }

    #[test]
    fn rfc_a4_remove_array_element() {
        let result = apply(json!({"foo": ["bar", "qux", "baz"]}), json!([{"op": "remove", "path": "/foo/1"}]));
        assert_eq!(result, Ok(json!({"foo": ["bar", "baz"]})));
    }

    #[test]
    fn rfc_a5_replace_value() {
        let result =
            apply(json!({"baz": "qux", "foo": "bar"}), json!([{"op": "replace", "path": "/baz", "value": "boo"}]));
        assert_eq!(result, Ok(json!({"baz": "boo", "foo": "bar"})));
    }

    #[test]
    fn rfc_a6_move_value() {
        let result = apply(
            json!({"foo": {"bar": "baz", "waldo": "fred"}, "qux": {"corge": "grault"}}),
            json!([{"op": "move", "from": "/foo/waldo", "path": "/qux/thud"}]),
        );
        assert_eq!(result, Ok(json!({"foo": {"bar": "baz"}, "qux": {"corge": "grault", "thud": "fred"}})));
    }

    #[test]
    fn rfc_a7_move_array_element() {
        let result = apply(
            json!({"foo": ["all", "grass", "cows", "eat"]}),
            json!([{"op": "move", "from": "/foo/1", "path": "/foo/3"}]),
        );
        assert_eq!(result, Ok(json!({"foo": ["all", "cows", "eat", "grass"]})));
    }

    #[test]
    fn rfc_a8_test_success_leaves_document_unchanged() {
        let doc = json!({"baz": "qux", "foo": ["a", 2, "c"]});
        let result = apply(
            doc.clone(),
            json!([
                {"op": "test", "path": "/baz", "value": "qux"},
                {"op": "test", "path": "/foo/1", "value": 2}
            ]),
        );
        assert_eq!(result, Ok(doc));
    }

    #[test]
    fn rfc_a9_test_failure_is_invalid_and_names_the_path() {
        let message =
            invalid_message(apply(json!({"baz": "qux"}), json!([{"op": "test", "path": "/baz", "value": "bar"}])));
        assert_eq!(message, "testing value /baz failed: test failed");
    }

    #[test]
    fn rfc_a10_add_nested_member_object() {
        let result =
            apply(json!({"foo": "bar"}), json!([{"op": "add", "path": "/child", "value": {"grandchild": {}}}]));
        assert_eq!(result, Ok(json!({"foo": "bar", "child": {"grandchild": {}}})));
    }

    #[test]
    fn rfc_a11_unrecognized_members_are_ignored() {
        let result = apply(json!({"foo": "bar"}), json!([{"op": "add", "path": "/baz", "value": "qux", "xyz": 123}]));
        assert_eq!(result, Ok(json!({"foo": "bar", "baz": "qux"})));
    }

    #[test]
    fn rfc_a12_add_to_nonexistent_target_fails() {
        let message =
            invalid_message(apply(json!({"foo": "bar"}), json!([{"op": "add", "path": "/baz/bat", "value": "qux"}])));
        assert_eq!(message, "add operation does not apply: doc is missing path: \"/baz/bat\"");
    }

    #[test]
    fn rfc_a14_escapes_are_decoded_in_order() {
        let doc = json!({"/": 9, "~1": 10});
        assert_eq!(apply(doc.clone(), json!([{"op": "test", "path": "/~01", "value": 10}])), Ok(doc));
    }

    #[test]
    fn rfc_a15_strings_and_numbers_differ() {
        let result = apply(json!({"/": 9, "~1": 10}), json!([{"op": "test", "path": "/~01", "value": "10"}]));
        assert!(matches!(result, Err(PatchError::Invalid(_))));
    }

    #[test]
    fn rfc_a16_add_array_value_with_dash() {
        let result = apply(json!({"foo": ["bar"]}), json!([{"op": "add", "path": "/foo/-", "value": ["abc", "def"]}]));
        assert_eq!(result, Ok(json!({"foo": ["bar", ["abc", "def"]]})));
    }

    // F6: the finalizer sequences kube-runtime sends.

    #[test]
    fn first_finalizer_with_test_null_on_absent_finalizers_passes() {
        let doc = json!({"metadata": {"name": "x"}});
        let result = apply(
            doc,
            json!([
                {"op": "test", "path": "/metadata/finalizers", "value": null},
                {"op": "add", "path": "/metadata/finalizers", "value": ["example.com/cleanup"]}
            ]),
        );
        assert_eq!(result, Ok(json!({"metadata": {"name": "x", "finalizers": ["example.com/cleanup"]}})));
    }

    #[test]
    fn first_finalizer_sequence_fails_when_someone_added_finalizers_meanwhile() {
        let doc = json!({"metadata": {"finalizers": ["other"]}});
        let message = invalid_message(apply(
            doc,
            json!([
                {"op": "test", "path": "/metadata/finalizers", "value": null},
                {"op": "add", "path": "/metadata/finalizers", "value": ["mine"]}
            ]),
        ));
        assert_eq!(message, "testing value /metadata/finalizers failed: test failed");
    }

    #[test]
    fn next_finalizer_tests_the_whole_array_and_appends() {
        let doc = json!({"metadata": {"finalizers": ["a"]}});
        let result = apply(
            doc,
            json!([
                {"op": "test", "path": "/metadata/finalizers", "value": ["a"]},
                {"op": "add", "path": "/metadata/finalizers/-", "value": "b"}
            ]),
        );
        assert_eq!(result, Ok(json!({"metadata": {"finalizers": ["a", "b"]}})));
    }

    #[test]
    fn next_finalizer_fails_on_a_stale_finalizer_list() {
        let doc = json!({"metadata": {"finalizers": ["a", "c"]}});
        let result = apply(
            doc,
            json!([
                {"op": "test", "path": "/metadata/finalizers", "value": ["a"]},
                {"op": "add", "path": "/metadata/finalizers/-", "value": "b"}
            ]),
        );
        assert!(matches!(result, Err(PatchError::Invalid(_))));
    }

    #[test]
    fn finalizer_removal_tests_the_index_then_removes_it() {
        let doc = json!({"metadata": {"finalizers": ["a", "mine", "c"]}});
        let result = apply(
            doc,
            json!([
                {"op": "test", "path": "/metadata/finalizers/1", "value": "mine"},
                {"op": "remove", "path": "/metadata/finalizers/1"}
            ]),
        );
        assert_eq!(result, Ok(json!({"metadata": {"finalizers": ["a", "c"]}})));
    }

    #[test]
    fn finalizer_removal_refuses_to_remove_someone_elses_finalizer() {
        let doc = json!({"metadata": {"finalizers": ["other", "mine"]}});
        let message = invalid_message(apply(
            doc,
            json!([
                {"op": "test", "path": "/metadata/finalizers/0", "value": "mine"},
                {"op": "remove", "path": "/metadata/finalizers/0"}
            ]),
        ));
        assert_eq!(message, "testing value /metadata/finalizers/0 failed: test failed");
    }

    #[test]
    fn finalizer_removal_of_an_index_that_is_gone_fails() {
        let doc = json!({"metadata": {"finalizers": ["a"]}});
        let result = apply(
            doc,
            json!([
                {"op": "test", "path": "/metadata/finalizers/1", "value": "mine"},
                {"op": "remove", "path": "/metadata/finalizers/1"}
            ]),
        );
        assert!(matches!(result, Err(PatchError::Invalid(_))));
    }

    // test

    #[test]
    fn test_on_missing_path_with_null_passes() {
        let doc = json!({"spec": {}});
        assert_eq!(apply(doc.clone(), json!([{"op": "test", "path": "/spec/x", "value": null}])), Ok(doc));
    }

    #[test]
    fn test_on_explicit_null_with_null_passes() {
        let doc = json!({"spec": {"x": null}});
        assert_eq!(apply(doc.clone(), json!([{"op": "test", "path": "/spec/x", "value": null}])), Ok(doc));
    }

    #[test]
    fn test_on_missing_path_with_a_value_fails() {
        let message =
            invalid_message(apply(json!({"spec": {}}), json!([{"op": "test", "path": "/spec/x", "value": 1}])));
        assert_eq!(message, "testing value /spec/x failed: test failed");
    }

    #[test]
    fn test_with_null_fails_when_the_parent_is_missing() {
        let message = invalid_message(apply(json!({}), json!([{"op": "test", "path": "/spec/x", "value": null}])));
        assert_eq!(message, "test operation does not apply: is missing path: /spec/x");
    }

    #[test]
    fn test_with_null_fails_on_an_array_index_out_of_range() {
        let result = apply(json!({"a": [1]}), json!([{"op": "test", "path": "/a/1", "value": null}]));
        assert!(matches!(result, Err(PatchError::Invalid(_))));
    }

    #[test]
    fn test_with_null_fails_on_an_existing_value() {
        let result = apply(json!({"a": []}), json!([{"op": "test", "path": "/a", "value": null}]));
        assert!(matches!(result, Err(PatchError::Invalid(_))));
    }

    #[test]
    fn test_compares_numbers_by_value() {
        let doc = json!({"a": 1, "b": 2.5, "c": 18446744073709551615u64, "d": -3});
        let patch = json!([
            {"op": "test", "path": "/a", "value": 1.0},
            {"op": "test", "path": "/b", "value": 2.5},
            {"op": "test", "path": "/c", "value": 18446744073709551615u64},
            {"op": "test", "path": "/d", "value": -3.0}
        ]);
        assert_eq!(apply(doc.clone(), patch), Ok(doc));
        assert!(apply(json!({"a": 1}), json!([{"op": "test", "path": "/a", "value": 2}])).is_err());
    }

    #[test]
    fn test_compares_objects_structurally() {
        let doc = json!({"a": {"x": [1, {"y": true}], "z": null}});
        let same = json!([{"op": "test", "path": "/a", "value": {"z": null, "x": [1.0, {"y": true}]}}]);
        assert_eq!(apply(doc.clone(), same), Ok(doc.clone()));
        let extra_key = json!([{"op": "test", "path": "/a", "value": {"z": null, "x": [1, {"y": true}], "w": 1}}]);
        assert!(apply(doc.clone(), extra_key).is_err());
        let missing_key = json!([{"op": "test", "path": "/a", "value": {"x": [1, {"y": true}]}}]);
        assert!(apply(doc.clone(), missing_key).is_err());
        let reordered = json!([{"op": "test", "path": "/a/x", "value": [{"y": true}, 1]}]);
        assert!(apply(doc, reordered).is_err());
    }

    #[test]
    fn test_of_the_whole_document_uses_the_empty_path() {
        let doc = json!({"a": 1});
        assert_eq!(apply(doc.clone(), json!([{"op": "test", "path": "", "value": {"a": 1}}])), Ok(doc.clone()));
        assert!(apply(doc, json!([{"op": "test", "path": "", "value": {}}])).is_err());
    }

    // add

    #[test]
    fn add_replaces_an_existing_member() {
        let result = apply(json!({"a": 1}), json!([{"op": "add", "path": "/a", "value": 2}]));
        assert_eq!(result, Ok(json!({"a": 2})));
    }

    #[test]
    fn add_accepts_an_explicit_null_value() {
        let result = apply(json!({}), json!([{"op": "add", "path": "/a", "value": null}]));
        assert_eq!(result, Ok(json!({"a": null})));
    }

    #[test]
    fn add_at_index_equal_to_length_appends() {
        let result = apply(json!({"a": [1, 2]}), json!([{"op": "add", "path": "/a/2", "value": 3}]));
        assert_eq!(result, Ok(json!({"a": [1, 2, 3]})));
    }

    #[test]
    fn add_past_the_end_of_an_array_fails() {
        let message = invalid_message(apply(json!({"a": [1, 2]}), json!([{"op": "add", "path": "/a/3", "value": 3}])));
        assert_eq!(message, "add operation does not apply: invalid array index \"3\" in path \"/a/3\"");
    }

    #[test]
    fn array_indices_with_leading_zeros_signs_or_letters_are_refused() {
        for index in ["01", "-1", "+1", "1e0", "x", ""] {
            let patch = json!([{"op": "add", "path": format!("/a/{index}"), "value": 0}]);
            assert!(
                matches!(apply(json!({"a": [1, 2]}), patch), Err(PatchError::Invalid(_))),
                "index {index:?} was accepted"
            );
        }
    }

    #[test]
    fn add_into_a_scalar_fails() {
        let result = apply(json!({"a": 1}), json!([{"op": "add", "path": "/a/b", "value": 2}]));
        assert!(matches!(result, Err(PatchError::Invalid(_))));
    }

    #[test]
    fn add_with_empty_path_replaces_the_whole_document() {
        let result = apply(json!({"a": 1}), json!([{"op": "add", "path": "", "value": {"b": 2}}]));
        assert_eq!(result, Ok(json!({"b": 2})));
    }

    #[test]
    fn escaped_tokens_address_keys_with_slashes_and_tildes() {
        let result = apply(
            json!({"metadata": {"annotations": {}}}),
            json!([
                {"op": "add", "path": "/metadata/annotations/example.com~1owner", "value": "me"},
                {"op": "add", "path": "/metadata/annotations/a~0b", "value": "t"}
            ]),
        );
        assert_eq!(result, Ok(json!({"metadata": {"annotations": {"example.com/owner": "me", "a~b": "t"}}})));
    }

    #[test]
    fn empty_token_is_a_key_named_empty() {
        let result = apply(json!({}), json!([{"op": "add", "path": "/", "value": 1}]));
        assert_eq!(result, Ok(json!({"": 1})));
    }

    // remove / replace

    #[test]
    fn remove_of_a_missing_key_fails() {
        let message = invalid_message(apply(json!({"a": {}}), json!([{"op": "remove", "path": "/a/b"}])));
        assert_eq!(message, "remove operation does not apply: doc is missing path: \"/a/b\"");
    }

    #[test]
    fn remove_of_an_index_out_of_range_fails() {
        let result = apply(json!({"a": [1]}), json!([{"op": "remove", "path": "/a/1"}]));
        assert!(matches!(result, Err(PatchError::Invalid(_))));
    }

    #[test]
    fn remove_with_dash_fails() {
        let result = apply(json!({"a": [1]}), json!([{"op": "remove", "path": "/a/-"}]));
        assert!(matches!(result, Err(PatchError::Invalid(_))));
    }

    #[test]
    fn remove_of_the_whole_document_fails() {
        let result = apply(json!({"a": 1}), json!([{"op": "remove", "path": ""}]));
        assert!(matches!(result, Err(PatchError::Invalid(_))));
    }

    #[test]
    fn replace_of_a_missing_key_fails() {
        let message = invalid_message(apply(json!({"a": 1}), json!([{"op": "replace", "path": "/b", "value": 2}])));
        assert_eq!(message, "replace operation does not apply: doc is missing path: \"/b\"");
    }

    #[test]
    fn replace_of_an_index_out_of_range_fails() {
        let result = apply(json!({"a": [1]}), json!([{"op": "replace", "path": "/a/1", "value": 2}]));
        assert!(matches!(result, Err(PatchError::Invalid(_))));
    }

    #[test]
    fn replace_of_an_array_element() {
        let result = apply(json!({"a": [1, 2]}), json!([{"op": "replace", "path": "/a/1", "value": 3}]));
        assert_eq!(result, Ok(json!({"a": [1, 3]})));
    }

    #[test]
    fn replace_with_empty_path_replaces_the_whole_document() {
        let result = apply(json!({"a": 1}), json!([{"op": "replace", "path": "", "value": [1]}]));
        assert_eq!(result, Ok(json!([1])));
    }

    // move / copy

    #[test]
    fn move_from_a_missing_path_fails() {
        let message = invalid_message(apply(json!({}), json!([{"op": "move", "from": "/a", "path": "/b"}])));
        assert_eq!(message, "move operation does not apply: doc is missing from path: \"/a\"");
    }

    #[test]
    fn move_into_its_own_child_fails() {
        let result = apply(json!({"a": {"b": {}}}), json!([{"op": "move", "from": "/a", "path": "/a/b/c"}]));
        assert!(matches!(result, Err(PatchError::Invalid(_))));
    }

    #[test]
    fn move_to_the_same_path_is_a_no_op() {
        let doc = json!({"a": {"b": 1}});
        assert_eq!(apply(doc.clone(), json!([{"op": "move", "from": "/a", "path": "/a"}])), Ok(doc));
    }

    #[test]
    fn move_to_a_missing_parent_fails() {
        let result = apply(json!({"a": 1}), json!([{"op": "move", "from": "/a", "path": "/b/c"}]));
        assert!(matches!(result, Err(PatchError::Invalid(_))));
    }

    #[test]
    fn copy_duplicates_a_subtree() {
        let result = apply(
            json!({"spec": {"template": {"labels": {"app": "x"}}}, "metadata": {}}),
            json!([{"op": "copy", "from": "/spec/template/labels", "path": "/metadata/labels"}]),
        );
        assert_eq!(
            result,
            Ok(json!({"spec": {"template": {"labels": {"app": "x"}}}, "metadata": {"labels": {"app": "x"}}}))
        );
    }

    #[test]
    fn copy_appends_to_an_array_with_dash() {
        let result = apply(json!({"a": [1], "b": 2}), json!([{"op": "copy", "from": "/b", "path": "/a/-"}]));
        assert_eq!(result, Ok(json!({"a": [1, 2], "b": 2})));
    }

    #[test]
    fn copy_from_a_missing_path_fails() {
        let message = invalid_message(apply(json!({}), json!([{"op": "copy", "from": "/a", "path": "/b"}])));
        assert_eq!(message, "copy operation does not apply: doc is missing from path: \"/a\"");
    }

    #[test]
    fn copies_that_double_the_document_are_stopped() {
        // Each operation copies the whole document into a new member of itself.
        let ops: Vec<Value> = (0..64).map(|i| json!({"op": "copy", "from": "", "path": format!("/copy{i}")})).collect();
        let doc = json!({"x": [1, 2, 3, 4, 5, 6, 7, 8], "y": [1, 2, 3, 4, 5, 6, 7, 8]});
        let message = invalid_message(apply(doc, Value::Array(ops)));
        assert!(message.contains("more than the 1048576 allowed"), "{message}");
    }

    #[test]
    fn values_cannot_be_nested_past_the_depth_limit() {
        // A patch within the limit, placing a deep value deep inside the document.
        let mut deep = json!(1);
        for _ in 0..250 {
            deep = json!([deep]);
        }
        let mut doc = json!({});
        for _ in 0..10 {
            doc = json!({"a": doc});
        }
        let path = "/a".repeat(10) + "/b";
        let message = invalid_message(apply(doc.clone(), json!([{"op": "add", "path": path, "value": deep}])));
        assert!(message.contains("nested more than 256 levels deep"), "{message}");
        let shallower = json!([{"op": "add", "path": "/a/b", "value": deep}]);
        assert!(apply(doc, shallower).is_ok());
    }

    #[test]
    fn moves_cannot_nest_past_the_depth_limit() {
        let mut deep = json!(1);
        for _ in 0..250 {
            deep = json!([deep]);
        }
        let mut doc = json!({"deep": deep});
        for _ in 0..5 {
            doc = json!({"a": doc});
        }
        let to = "/a".repeat(5) + "/x/y/z/w/v/u";
        let patch = json!([
            {"op": "add", "path": "/a/a/a/a/a/x", "value": {"y": {"z": {"w": {"v": {}}}}}},
            {"op": "move", "from": "/a/a/a/a/a/deep", "path": to}
        ]);
        let message = invalid_message(apply(doc, patch));
        assert!(message.contains("would be nested more than 256 levels deep"), "{message}");
    }

    // atomicity

    #[test]
    fn patch_is_atomic_when_a_later_operation_fails() {
        let doc = json!({"metadata": {"finalizers": ["a"]}, "spec": {"x": 1}});
        let result = apply(
            doc.clone(),
            json!([
                {"op": "replace", "path": "/spec/x", "value": 2},
                {"op": "add", "path": "/metadata/finalizers/-", "value": "b"},
                {"op": "remove", "path": "/spec/missing"}
            ]),
        );
        assert!(matches!(result, Err(PatchError::Invalid(_))));
        assert_eq!(doc, json!({"metadata": {"finalizers": ["a"]}, "spec": {"x": 1}}));
    }

    #[test]
    fn later_operations_see_the_effect_of_earlier_ones() {
        let result = apply(
            json!({}),
            json!([
                {"op": "add", "path": "/a", "value": {}},
                {"op": "add", "path": "/a/b", "value": [1]},
                {"op": "test", "path": "/a", "value": {"b": [1]}},
                {"op": "move", "from": "/a/b", "path": "/c"},
                {"op": "remove", "path": "/a"}
            ]),
        );
        assert_eq!(result, Ok(json!({"c": [1]})));
    }

    #[test]
    fn empty_patch_returns_the_document() {
        let doc = json!({"a": 1});
        assert_eq!(apply(doc.clone(), json!([])), Ok(doc));
    }

    // malformed patches

    #[test]
    fn patch_that_is_not_an_array_is_malformed() {
        let message = malformed_message(apply(json!({}), json!({"op": "add", "path": "/a", "value": 1})));
        assert_eq!(message, "a JSON patch must be an array of operations, not an object");
    }

    #[test]
    fn operation_that_is_not_an_object_is_malformed() {
        let message = malformed_message(apply(json!({}), json!(["add"])));
        assert_eq!(message, "operation 0: an operation must be an object, not a string");
    }

    #[test]
    fn missing_or_unknown_op_is_malformed() {
        assert_eq!(
            malformed_message(apply(json!({}), json!([{"path": "/a", "value": 1}]))),
            "operation 0: missing \"op\""
        );
        assert!(
            malformed_message(apply(json!({}), json!([{"op": "merge", "path": "/a", "value": 1}])))
                .starts_with("operation 0: unknown op \"merge\"")
        );
        malformed_message(apply(json!({}), json!([{"op": 1, "path": "/a", "value": 1}])));
    }

    #[test]
    fn missing_or_non_string_path_is_malformed() {
        assert_eq!(
            malformed_message(apply(json!({}), json!([{"op": "add", "value": 1}]))),
            "operation 0: add operation is missing \"path\""
        );
        malformed_message(apply(json!({}), json!([{"op": "add", "path": 1, "value": 1}])));
    }

    #[test]
    fn missing_value_is_malformed_for_add_replace_and_test() {
        for op in ["add", "replace", "test"] {
            let message = malformed_message(apply(json!({"a": 1}), json!([{"op": op, "path": "/a"}])));
            assert_eq!(message, format!("operation 0: {op} operation is missing \"value\""));
        }
    }

    #[test]
    fn remove_needs_no_value() {
        assert_eq!(apply(json!({"a": 1}), json!([{"op": "remove", "path": "/a"}])), Ok(json!({})));
    }

    #[test]
    fn missing_from_is_malformed_for_move_and_copy() {
        for op in ["move", "copy"] {
            let message = malformed_message(apply(json!({"a": 1}), json!([{"op": op, "path": "/b"}])));
            assert_eq!(message, format!("operation 0: {op} operation is missing \"from\""));
        }
    }

    #[test]
    fn pointers_that_are_not_rfc_6901_are_malformed() {
        for path in ["a/b", "/a~", "/a~2"] {
            let patch = json!([{"op": "add", "path": path, "value": 1}]);
            malformed_message(apply(json!({}), patch));
        }
        malformed_message(apply(json!({}), json!([{"op": "copy", "from": "x", "path": "/b"}])));
    }

    #[test]
    fn malformed_operation_is_reported_even_after_one_that_would_fail() {
        let result =
            apply(json!({}), json!([{"op": "remove", "path": "/missing"}, {"op": "frobnicate", "path": "/a"}]));
        assert!(matches!(result, Err(PatchError::Malformed(_))));
    }

    #[test]
    fn more_operations_than_the_limit_is_malformed_and_names_the_limit() {
        let ops = vec![json!({"op": "test", "path": "", "value": {}}); MAX_JSON_PATCH_OPERATIONS + 1];
        let message = malformed_message(apply(json!({}), Value::Array(ops)));
        assert_eq!(message, "The allowed maximum operations in a JSON patch is 10000, got 10001");
    }

    #[test]
    fn exactly_the_limit_of_operations_is_accepted() {
        let ops = vec![json!({"op": "test", "path": "", "value": {}}); MAX_JSON_PATCH_OPERATIONS];
        assert_eq!(apply(json!({}), Value::Array(ops)), Ok(json!({})));
    }

    #[test]
    fn too_deep_patch_is_malformed() {
        let mut deep = json!(1);
        for _ in 0..=MAX_NESTING_DEPTH {
            deep = json!([deep]);
        }
        malformed_message(apply(json!({}), deep));
    }
}

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
    MAX_JSON_PATCH_OPERATIONS, MAX_NESTING_DEPTH, PatchError, check_document_depth,
    check_patch_depth, json_type, nesting_depth, remove_key,
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
            return Ok(Pointer {
                raw: String::new(),
                tokens: Vec::new(),
            });
        }
        let Some(rest) = raw.strip_prefix('/') else {
            return Err(format!(
                "invalid JSON pointer {raw:?}: it must be empty or start with \"/\""
            ));
        };
        let tokens = rest
            .split('/')
            .map(|token| {
                unescape(token).ok_or_else(|| {
                    format!("invalid JSON pointer {raw:?}: \"~\" must be followed by 0 or 1")
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Pointer {
            raw: raw.to_string(),
            tokens,
        })
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
    items
        .iter()
        .enumerate()
        .map(|(index, item)| decode_operation(index, item))
        .collect()
}

fn decode_operation(index: usize, item: &Value) -> Result<Operation<'_>, PatchError> {
    let malformed =
        |message: String| PatchError::Malformed(format!("operation {index}: {message}"));
    let Value::Object(fields) = item else {
        return Err(malformed(format!(
            "an operation must be an object, not {}",
            json_type(item)
        )));
    };
    let kind = match fields.get("op") {
        None => return Err(malformed("missing \"op\"".to_string())),
        Some(Value::String(name)) => OpKind::parse(name).ok_or_else(|| {
            malformed(format!(
                "unknown op {name:?}: expected add, remove, replace, move, copy or test"
            ))
        })?,
        Some(other) => {
            return Err(malformed(format!(
                "\"op\" must be a string, not {}",
                json_type(other)
            )));
        }
    };
    let pointer = |member: &str| -> Result<Option<Pointer>, PatchError> {
        match fields.get(member) {
            None => Ok(None),
            Some(Value::String(raw)) => Pointer::parse(raw)
                .map(Some)
                .map_err(|message| malformed(format!("{} {member:?}: {message}", kind.name()))),
            Some(other) => Err(malformed(format!(
                "{} {member:?} must be a string, not {}",
                kind.name(),
                json_type(other)
            ))),
        }
    };
    let Some(path) = pointer("path")? else {
        return Err(malformed(format!(
            "{} operation is missing \"path\"",
            kind.name()
        )));
    };
    let from = if kind.needs_from() {
        let Some(from) = pointer("from")? else {
            return Err(malformed(format!(
                "{} operation is missing \"from\"",
                kind.name()
            )));
        };
        Some(from)
    } else {
        None
    };
    // `"value": null` is a value; only an absent member is missing.
    let value = fields.get("value");
    if kind.needs_value() && value.is_none() {
        return Err(malformed(format!(
            "{} operation is missing \"value\"",
            kind.name()
        )));
    }
    Ok(Operation {
        kind,
        path,
        from,
        value,
    })
}

impl Operation<'_> {
    fn apply(&self, doc: &mut Value, copied: &mut usize) -> Result<(), PatchError> {
        let value = || self.value.cloned().unwrap_or(Value::Null);
        match self.kind {
            OpKind::Add => add(doc, &self.path, value(), OpKind::Add),
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
    PatchError::Invalid(format!(
        "{} operation does not apply: doc is missing path: {:?}",
        op.name(),
        path.raw
    ))
}

fn missing_from(op: OpKind, from: &Pointer) -> PatchError {
    PatchError::Invalid(format!(
        "{} operation does not apply: doc is missing from path: {:?}",
        op.name(),
        from.raw
    ))
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
    let well_formed = token == "0"
        || (!token.is_empty()
            && !token.starts_with('0')
            && token.bytes().all(|b| b.is_ascii_digit()));
    if well_formed {
        token.parse().ok()
    } else {
        None
    }
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

/// `add` (also the second half of `move` and `copy`, reported under their name).
fn add(doc: &mut Value, path: &Pointer, value: Value, op: OpKind) -> Result<(), PatchError> {
    check_result_depth(op, path, &value)?;
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
        Some(Value::Object(fields)) => {
            remove_key(fields, last).ok_or_else(|| missing_path(op, path))
        }
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
    let target =
        resolve_mut(doc, &path.tokens).ok_or_else(|| missing_path(OpKind::Replace, path))?;
    *target = value;
    Ok(())
}

fn move_value(doc: &mut Value, from: &Pointer, path: &Pointer) -> Result<(), PatchError> {
    if from.tokens == path.tokens {
        // RFC 6902 §4.4: a no-op, but the location must exist.
        return resolve(doc, &from.tokens)
            .map(drop)
            .ok_or_else(|| missing_from(OpKind::Move, from));
    }
    if path.tokens.starts_with(&from.tokens) {
        return Err(PatchError::Invalid(format!(
            "move operation does not apply: cannot move {:?} into its own child {:?}",
            from.raw, path.raw
        )));
    }
    let value = remove(doc, from, OpKind::Move).map_err(|_| missing_from(OpKind::Move, from))?;
    add(doc, path, value, OpKind::Move)
}

fn copy_value(
    doc: &mut Value,
    from: &Pointer,
    path: &Pointer,
    copied: &mut usize,
) -> Result<(), PatchError> {
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
    add(doc, path, value, OpKind::Copy)
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
        return if json_equal(doc, expected) {
            Ok(())
        } else {
            Err(failed())
        };
    };
    let (actual, parent_is_object) = match resolve(doc, parent_tokens) {
        Some(Value::Object(fields)) => (fields.get(last), true),
        Some(Value::Array(items)) => match parse_index(last) {
            Some(index) => (items.get(index), false),
            None => return Err(invalid_index(OpKind::Test, path, last)),
        },
        _ => {
            return Err(PatchError::Invalid(format!(
                "test operation does not apply: is missing path: {}",
                path.raw
            )));
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
    xs.len() == ys.len()
        && xs
            .iter()
            .all(|(k, x)| ys.get(k).is_some_and(|y| json_equal(x, y)))
}

fn numbers_equal(x: &serde_json::Number, y: &serde_json::Number) -> bool {
    let as_integer = |n: &serde_json::Number| {
        n.as_i64()
            .map(i128::from)
            .or_else(|| n.as_u64().map(i128::from))
    };
    match (as_integer(x), as_integer(y)) {
        (Some(x), Some(y)) => x == y,
        _ => match (x.as_f64(), y.as_f64()) {
            (Some(x), Some(y)) => x == y,
            _ => false,
        },
    }
}

//! Field-level validation errors, as `k8s.io/apimachinery/pkg/util/validation/field` models them.
//!
//! A [`FieldError`] names the offending field (`spec.replicas`, `metadata.labels[app]`), the kind
//! of problem, the offending value and a detail. [`FieldError::message`] prints it exactly like
//! Go's `(*field.Error).Error()`, [`FieldError::body`] like `ErrorBody()` (the `message` of a
//! `StatusCause`), and [`FieldError::reason`] gives the cause's `reason`. [`aggregate_message`]
//! joins several errors the way `ErrorList.ToAggregate().Error()` does for the `message` of a
//! 422 `Invalid` status.
//!
//! Values are rendered as apimachinery renders them: numbers and booleans bare, strings quoted
//! with Go's `%q`, everything else as (Go-flavoured) JSON.

use serde_json::Value;

use super::gofmt;

/// The kind of a [`FieldError`] (`field.ErrorType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FieldErrorKind {
    /// A value was looked up and not found (`FieldValueNotFound`).
    NotFound,
    /// A required value is missing (`FieldValueRequired`).
    Required,
    /// A value that must be unique is repeated (`FieldValueDuplicate`).
    Duplicate,
    /// A value is malformed or out of range (`FieldValueInvalid`).
    Invalid,
    /// A value is not one of an enumerated set (`FieldValueNotSupported`).
    NotSupported,
    /// A value may not be set, or not in this context (`FieldValueForbidden`).
    Forbidden,
    /// A string is too long (`FieldValueTooLong`).
    TooLong,
    /// A list or map has too many entries (`FieldValueTooMany`).
    TooMany,
    /// The server failed while validating (`InternalError`).
    Internal,
    /// A value has the wrong type (`FieldValueTypeInvalid`).
    TypeInvalid,
}

impl FieldErrorKind {
    /// The `StatusCause.reason` of this kind.
    pub fn reason(self) -> &'static str {
        match self {
            FieldErrorKind::NotFound => "FieldValueNotFound",
            FieldErrorKind::Required => "FieldValueRequired",
            FieldErrorKind::Duplicate => "FieldValueDuplicate",
            FieldErrorKind::Invalid => "FieldValueInvalid",
            FieldErrorKind::NotSupported => "FieldValueNotSupported",
            FieldErrorKind::Forbidden => "FieldValueForbidden",
            FieldErrorKind::TooLong => "FieldValueTooLong",
            FieldErrorKind::TooMany => "FieldValueTooMany",
            FieldErrorKind::Internal => "InternalError",
            FieldErrorKind::TypeInvalid => "FieldValueTypeInvalid",
        }
    }

    /// The human-readable label that starts the error body (`ErrorType.String()`).
    pub fn label(self) -> &'static str {
        match self {
            FieldErrorKind::NotFound => "Not found",
            FieldErrorKind::Required => "Required value",
            FieldErrorKind::Duplicate => "Duplicate value",
            FieldErrorKind::Invalid | FieldErrorKind::TypeInvalid => "Invalid value",
            FieldErrorKind::NotSupported => "Unsupported value",
            FieldErrorKind::Forbidden => "Forbidden",
            FieldErrorKind::TooLong => "Too long",
            FieldErrorKind::TooMany => "Too many",
            FieldErrorKind::Internal => "Internal error",
        }
    }

    /// Kinds whose body never shows the value.
    fn omits_value(self) -> bool {
        matches!(
            self,
            FieldErrorKind::Required | FieldErrorKind::Forbidden | FieldErrorKind::TooLong | FieldErrorKind::Internal
        )
    }
}

/// One field-level validation error (`field.Error`).
#[derive(Clone, Debug, PartialEq)]
pub struct FieldError {
    /// What is wrong.
    pub kind: FieldErrorKind,
    /// The field path, e.g. `spec.template.spec.containers[0].name` or `metadata.labels[app]`.
    pub field: String,
    /// Free-form detail appended to the message; empty for none.
    pub detail: String,
    /// The offending value; `None` when it is not shown (apimachinery's `omitValue`).
    pub bad_value: Option<Value>,
}

impl FieldError {
    /// A generic error for any value.
    pub fn new(
        kind: FieldErrorKind,
        field: impl Into<String>,
        bad_value: Option<Value>,
        detail: impl Into<String>,
    ) -> Self {
        FieldError { kind, field: field.into(), detail: detail.into(), bad_value }
    }

    /// `field.Invalid`: the value is malformed or out of range.
    pub fn invalid(field: impl Into<String>, value: impl Into<Value>, detail: impl Into<String>) -> Self {
        Self::new(FieldErrorKind::Invalid, field, Some(value.into()), detail)
    }

    /// `field.TypeInvalid`: the value has the wrong type.
    pub fn type_invalid(field: impl Into<String>, value: impl Into<Value>, detail: impl Into<String>) -> Self {
        Self::new(FieldErrorKind::TypeInvalid, field, Some(value.into()), detail)
    }

    /// `field.Required`: a required value is missing.
    pub fn required(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(FieldErrorKind::Required, field, None, detail)
    }

    /// `field.Forbidden`: the field may not be set here.
    pub fn forbidden(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(FieldErrorKind::Forbidden, field, None, detail)
    }

    /// `field.NotFound`: a referenced value does not exist.
    pub fn not_found(field: impl Into<String>, value: impl Into<Value>) -> Self {
        Self::new(FieldErrorKind::NotFound, field, Some(value.into()), "")
    }

    /// `field.NotSupported`: the value is not one of `allowed`; the detail lists them quoted,
    /// `supported values: "a", "b"`.
    pub fn not_supported<S: AsRef<str>>(field: impl Into<String>, value: impl Into<Value>, allowed: &[S]) -> Self {
        let detail = if allowed.is_empty() {
            String::new()
        } else {
            let quoted: Vec<String> = allowed.iter().map(|a| gofmt::quote(a.as_ref())).collect();
            format!("supported values: {}", quoted.join(", "))
        };
        Self::new(FieldErrorKind::NotSupported, field, Some(value.into()), detail)
    }

    /// `field.TooLong`: a string is longer than `max_length` (negative when unknown). The value
    /// itself is never printed.
    pub fn too_long(field: impl Into<String>, max_length: i64) -> Self {
        let detail = if max_length >= 0 {
            let unit = if max_length == 1 { "byte" } else { "bytes" };
            format!("may not be more than {max_length} {unit}")
        } else {
            "value is too long".to_string()
        };
        Self::new(FieldErrorKind::TooLong, field, None, detail)
    }

    /// `field.TooMany`: a list or map holds `actual` entries where at most `max` are allowed
    /// (either may be negative when unknown).
    pub fn too_many(field: impl Into<String>, actual: i64, max: i64) -> Self {
        let detail = if max >= 0 {
            let unit = if max == 1 { "item" } else { "items" };
            format!("must have at most {max} {unit}")
        } else {
            "has too many items".to_string()
        };
        let bad_value = (actual >= 0).then(|| Value::from(actual));
        Self::new(FieldErrorKind::TooMany, field, bad_value, detail)
    }

    /// `field.Duplicate`: the value repeats one that must be unique.
    pub fn duplicate(field: impl Into<String>, value: impl Into<Value>) -> Self {
        Self::new(FieldErrorKind::Duplicate, field, Some(value.into()), "")
    }

    /// `field.InternalError`.
    pub fn internal(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(FieldErrorKind::Internal, field, None, detail)
    }

    /// The `StatusCause.reason`, e.g. `FieldValueInvalid`.
    pub fn reason(&self) -> &'static str {
        self.kind.reason()
    }

    /// The message without the field (`ErrorBody()`), used as a `StatusCause.message`:
    /// `Invalid value: "x": must be ...`.
    pub fn body(&self) -> String {
        let mut s = self.kind.label().to_string();
        if !self.kind.omits_value()
            && let Some(v) = &self.bad_value
        {
            s.push_str(": ");
            s.push_str(&render_value(v));
        }
        if !self.detail.is_empty() {
            s.push_str(": ");
            s.push_str(&self.detail);
        }
        s
    }

    /// The full message as `field.Error.Error()` prints it, e.g.
    /// `spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string"`.
    pub fn message(&self) -> String {
        format!("{}: {}", self.field, self.body())
    }

    /// This error with its field moved under `prefix` (`prefix.field`), for errors computed
    /// relative to a sub-object.
    pub fn prefixed(mut self, prefix: &str) -> Self {
        if !prefix.is_empty() {
            self.field = if self.field.is_empty() || self.field == "<nil>" {
                prefix.to_string()
            } else if self.field.starts_with('[') {
                format!("{prefix}{}", self.field)
            } else {
                format!("{prefix}.{}", self.field)
            };
        }
        self
    }
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message())
    }
}

impl std::error::Error for FieldError {}

/// A value as `ErrorBody` prints it: simple types bare, strings `%q`, the rest JSON.
fn render_value(v: &Value) -> String {
    match v {
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => gofmt::number_v(n),
        Value::String(s) => gofmt::quote(s),
        Value::Null | Value::Array(_) | Value::Object(_) => gofmt::json(v),
    }
}

/// The text of `ErrorList.ToAggregate().Error()`: duplicates dropped, one message bare, several
/// as `[a, b]`; empty for no errors. kube-apiserver's 422 message is
/// `<Kind>.<group> "<name>" is invalid: <aggregate>`.
pub fn aggregate_message(errors: &[FieldError]) -> String {
    let mut seen: Vec<String> = Vec::new();
    for e in errors {
        let m = e.message();
        if !seen.contains(&m) {
            seen.push(m);
        }
    }
    match seen.len() {
        0 => String::new(),
        1 => seen.remove(0),
        _ => format!("[{}]", seen.join(", ")),
    }
}

/// A field path built like `field.Path`: `child` joins with dots, `key` and `index` append
/// `[..]`. The empty path stands for Go's nil path.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldPath(String);

impl FieldPath {
    /// A path starting at `name`.
    pub fn new(name: &str) -> Self {
        FieldPath(name.to_string())
    }

    /// The nil path.
    pub fn root() -> Self {
        FieldPath(String::new())
    }

    /// `path.name` (or `name` from the nil path).
    pub fn child(&self, name: &str) -> Self {
        if self.0.is_empty() { FieldPath(name.to_string()) } else { FieldPath(format!("{}.{name}", self.0)) }
    }

    /// `path[key]`.
    pub fn key(&self, key: &str) -> Self {
        FieldPath(format!("{}[{key}]", self.0))
    }

    /// `path[index]`.
    pub fn index(&self, index: usize) -> Self {
        FieldPath(format!("{}[{index}]", self.0))
    }

    /// Whether this is the nil path.
    pub fn is_root(&self) -> bool {
        self.0.is_empty()
    }

    /// The path as `(*field.Path).String()` prints it: `<nil>` for the nil path.
    pub fn as_field(&self) -> String {
        if self.0.is_empty() { "<nil>".to_string() } else { self.0.clone() }
    }
}

impl std::fmt::Display for FieldPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.as_field())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn test_invalid_message_quotes_strings() {
        let e = FieldError::type_invalid(
            "spec.replicas",
            "string",
            "spec.replicas in body must be of type integer: \"string\"",
        );
        assert_eq!(
            e.message(),
            r#"spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string""#
        );
        assert_eq!(e.reason(), "FieldValueTypeInvalid");
    }

    #[test]
    fn test_required_message_has_no_value() {
        let e = FieldError::required("spec.name", "");
        assert_eq!(e.message(), "spec.name: Required value");
        assert_eq!(e.reason(), "FieldValueRequired");
        let e = FieldError::required("metadata.name", "name or generateName is required");
        assert_eq!(e.message(), "metadata.name: Required value: name or generateName is required");
    }

    #[test]
    fn test_not_supported_lists_quoted_values() {
        let e = FieldError::not_supported("spec.mode", "x", &["a", "b"]);
        assert_eq!(e.message(), r#"spec.mode: Unsupported value: "x": supported values: "a", "b""#);
        assert_eq!(e.reason(), "FieldValueNotSupported");
    }

    #[test]
    fn test_numbers_print_bare_and_floats_go_style() {
        assert_eq!(FieldError::invalid("a", 11, "d").message(), "a: Invalid value: 11: d");
        assert_eq!(FieldError::invalid("a", 1.5, "d").message(), "a: Invalid value: 1.5: d");
        assert_eq!(FieldError::invalid("a", 5.0, "d").message(), "a: Invalid value: 5: d");
        assert_eq!(FieldError::invalid("a", true, "d").message(), "a: Invalid value: true: d");
    }

    #[test]
    fn test_complex_values_print_as_json() {
        let e = FieldError::duplicate("spec.ports[1]", json!({"port": 80}));
        assert_eq!(e.message(), r#"spec.ports[1]: Duplicate value: {"port":80}"#);
        let e = FieldError::invalid("x", Value::Null, "");
        assert_eq!(e.message(), "x: Invalid value: null");
    }

    #[test]
    fn test_too_long_and_too_many_details() {
        assert_eq!(
            FieldError::too_long("metadata.annotations", 262144).message(),
            "metadata.annotations: Too long: may not be more than 262144 bytes"
        );
        assert_eq!(FieldError::too_long("a", 1).message(), "a: Too long: may not be more than 1 byte");
        assert_eq!(
            FieldError::too_many("spec.items", 4, 3).message(),
            "spec.items: Too many: 4: must have at most 3 items"
        );
        assert_eq!(
            FieldError::too_many("spec.items", -1, 1).message(),
            "spec.items: Too many: must have at most 1 item"
        );
    }

    #[test]
    fn test_forbidden_omits_value() {
        let mut e = FieldError::forbidden("spec.x", "may not be set");
        e.bad_value = Some(json!("ignored"));
        assert_eq!(e.message(), "spec.x: Forbidden: may not be set");
        assert_eq!(e.body(), "Forbidden: may not be set");
    }

    #[test]
    fn test_aggregate_dedups_and_brackets() {
        let a = FieldError::required("a", "");
        let b = FieldError::required("b", "");
        assert_eq!(aggregate_message(&[]), "");
        assert_eq!(aggregate_message(std::slice::from_ref(&a)), "a: Required value");
        assert_eq!(aggregate_message(&[a.clone(), a.clone()]), "a: Required value");
        assert_eq!(aggregate_message(&[a, b]), "[a: Required value, b: Required value]");
    }

    #[test]
    fn test_field_path_builds_like_go() {
        let p = FieldPath::root();
        assert_eq!(p.as_field(), "<nil>");
        let p = p.child("spec").child("ports").index(2).child("name");
        assert_eq!(p.as_field(), "spec.ports[2].name");
        assert_eq!(FieldPath::new("metadata").child("labels").key("app").as_field(), "metadata.labels[app]");
        assert_eq!(FieldPath::root().index(0).as_field(), "[0]");
    }

    #[test]
    fn test_prefixed_moves_field_under_prefix() {
        let e = FieldError::required("type", "").prefixed("spec.versions[0].schema.openAPIV3Schema");
        assert_eq!(e.field, "spec.versions[0].schema.openAPIV3Schema.type");
        let e = FieldError::required("[0]", "").prefixed("x");
        assert_eq!(e.field, "x[0]");
    }
}

//! Validation of custom resources, as kube-apiserver's CRD strategy does it.
//!
//! Three passes, in upstream's order:
//!
//! 1. **OpenAPI schema validation**, a port of `k8s.io/kube-openapi/pkg/validation/validate`
//!    (`SchemaValidator` with its type, string, format, number, slice, enum and object
//!    validators and the `allOf`/`anyOf`/`oneOf`/`not` junctors), followed by apiextensions'
//!    conversion of its results to field errors (`kubeOpenAPIResultToFieldErrors`). Messages
//!    are kube-openapi's (`spec.replicas in body must be of type integer: "string"`), and so
//!    are its quirks, deliberately:
//!    - a number is an integer if it was written without fraction or exponent, or is a float
//!      with an integral value; `minimum`/`maximum`/`multipleOf` are truncated to integers
//!      when the value is an integer;
//!    - a `null` only passes `type` when `nullable`, and never passes `enum`;
//!    - of the failed branches of `anyOf`/`oneOf` only the errors of the one that matched
//!      most are reported, next to `"spec.x" must validate at least one schema (anyOf)`;
//!      the junctor messages have the field `<nil>`, as upstream prints them;
//!    - `minProperties`/`maxProperties` failures skip the rest of that object;
//!    - only the first of `maxLength`, `minLength`, `pattern` failures of a string is reported;
//!    - errors with the same message are reported once.
//!
//!    Properties are visited in name order (upstream: Go map order, i.e. random).
//! 2. **Embedded resources** (`schema/objectmeta.Validate`): inside an
//!    `x-kubernetes-embedded-resource` object, `apiVersion` and `kind` are required strings,
//!    `apiVersion` a group/version and `kind` a DNS-1035 label up to case, and `metadata`
//!    must decode as `ObjectMeta`. (The `ObjectMeta` field validation of embedded metadata,
//!    names and labels, is not done here.)
//! 3. **List types** (`schema/listtype`): items of `x-kubernetes-list-type: set` lists and the
//!    keys of `map` lists must be unique (`Duplicate value`), and `map` list items objects.
//!
//! `x-kubernetes-validations` (CEL) rules are evaluated after these passes (`super::cel`).

use std::collections::HashMap;

use serde_json::{Map, Number, Value};

use super::field_error::{FieldError, FieldPath};
use super::format;
use super::gofmt;
use super::node::{Additional, MAX_DEPTH, Node};
use super::objectmeta;

/// Validate a whole resource against its root schema.
pub(crate) fn validate(root: &Node, obj: &Value) -> Vec<FieldError> {
    let mut errors = openapi_field_errors(root, obj, &FieldPath::root());
    embedded_errors(root, obj, &FieldPath::root(), &mut errors, 0);
    list_type_errors(root, obj, &FieldPath::root(), &mut errors, 0);
    errors
}

/// kube-openapi validation of `value` against `node`, converted to field errors under `base`
/// (the nil path for a resource; `….default` when checking a default).
pub(crate) fn openapi_field_errors(node: &Node, value: &Value, base: &FieldPath) -> Vec<FieldError> {
    let result = validate_schema(node, value, "", 0);
    result.errors.into_iter().map(|e| e.into_field_error(base)).collect()
}

// ---------------------------------------------------------------------------------------------
// kube-openapi results
// ---------------------------------------------------------------------------------------------

/// The error codes apiextensions distinguishes when converting results.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Code {
    Required,
    Enum,
    TooLong,
    MaxItems,
    TooManyProperties,
    InvalidType,
    Other,
}

/// One kube-openapi error: a `*errors.Validation` (with a name) or a plain composite message.
#[derive(Clone, Debug)]
enum OpenApiError {
    Validation {
        code: Code,
        /// The dotted path (`spec.replicas`, `.spec` for a root required field).
        name: String,
        value: Option<Value>,
        /// The limit for TooLong/MaxItems/TooManyProperties.
        valid: Option<i64>,
        /// The allowed values for Enum.
        values: Vec<Value>,
        message: String,
    },
    Composite(String),
}

impl OpenApiError {
    fn message(&self) -> &str {
        match self {
            OpenApiError::Validation { message, .. } | OpenApiError::Composite(message) => message,
        }
    }

    fn new(code: Code, name: &str, value: Option<Value>, message: String) -> Self {
        OpenApiError::Validation { code, name: name.to_string(), value, valid: None, values: Vec::new(), message }
    }

    /// `kubeOpenAPIResultToFieldErrors`.
    fn into_field_error(self, base: &FieldPath) -> FieldError {
        match self {
            OpenApiError::Composite(message) => FieldError::invalid(base.as_field(), "", message),
            OpenApiError::Validation { code, name, value, valid, values, message } => {
                let field = if name.is_empty() || name == "." {
                    base.as_field()
                } else {
                    base.child(name.strip_prefix('.').unwrap_or(&name)).as_field()
                };
                let value_or_empty = value.clone().unwrap_or_else(|| Value::String(String::new()));
                match code {
                    Code::Required => FieldError::required(field, ""),
                    Code::Enum => {
                        let allowed: Vec<String> = values
                            .iter()
                            .map(|v| match v {
                                Value::String(s) => s.clone(),
                                other => gofmt::json(other),
                            })
                            .collect();
                        FieldError::not_supported(field, value.unwrap_or(Value::Null), &allowed)
                    }
                    Code::TooLong => FieldError::too_long(field, valid.unwrap_or(-1)),
                    Code::MaxItems | Code::TooManyProperties => {
                        let actual = value.as_ref().and_then(Value::as_i64).unwrap_or(-1);
                        FieldError::too_many(field, actual, valid.unwrap_or(-1))
                    }
                    Code::InvalidType => FieldError::type_invalid(field, value_or_empty, message),
                    Code::Other => FieldError::invalid(field, value_or_empty, message),
                }
            }
        }
    }
}

/// A kube-openapi `Result`: errors (deduplicated by message) and the match count that decides
/// which failed `anyOf`/`oneOf` branch is reported.
#[derive(Debug, Default)]
struct Res {
    errors: Vec<OpenApiError>,
    matches: u64,
}

impl Res {
    fn error(e: OpenApiError) -> Res {
        Res { errors: vec![e], matches: 0 }
    }

    fn add(&mut self, e: OpenApiError) {
        if !self.errors.iter().any(|x| x.message() == e.message()) {
            self.errors.push(e);
        }
    }

    fn merge(&mut self, other: Res) {
        for e in other.errors {
            self.add(e);
        }
        self.matches += other.matches;
    }

    fn is_valid(&self) -> bool {
        self.errors.is_empty()
    }
}

/// The JSON kind of a value, with numbers split the way Go decodes them.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Null,
    Bool,
    Int(i64),
    Float(f64),
    String,
    Array,
    Object,
}

fn kind_of(v: &Value) -> Kind {
    match v {
        Value::Null => Kind::Null,
        Value::Bool(_) => Kind::Bool,
        Value::Number(n) => match n.as_i64() {
            Some(i) => Kind::Int(i),
            None => Kind::Float(n.as_f64().unwrap_or(0.0)),
        },
        Value::String(_) => Kind::String,
        Value::Array(_) => Kind::Array,
        Value::Object(_) => Kind::Object,
    }
}

/// `"<name> in body <tail>"`, the shape of kube-openapi's messages.
fn in_body(name: &str, tail: &str) -> String {
    format!("{name} in body {tail}")
}

/// `errors.InvalidType` with a string value (the only kind used here).
fn invalid_type(name: &str, type_name: &str, value: &str) -> OpenApiError {
    OpenApiError::new(
        Code::InvalidType,
        name,
        Some(Value::String(value.to_string())),
        in_body(name, &format!("must be of type {type_name}: {}", gofmt::quote(value))),
    )
}

// ---------------------------------------------------------------------------------------------
// SchemaValidator
// ---------------------------------------------------------------------------------------------

/// `SchemaValidator.Validate`.
fn validate_schema(s: &Node, data: &Value, path: &str, depth: usize) -> Res {
    if depth > MAX_DEPTH {
        return Res::error(OpenApiError::new(
            Code::Other,
            path,
            None,
            in_body(path, &format!("must not be nested more than {MAX_DEPTH} levels deep")),
        ));
    }
    let mut result = Res::default();
    let kind = kind_of(data);
    if kind == Kind::Null {
        result.merge(type_validator(s, kind, path));
        result.merge(common_validator(s, data, path));
        return result;
    }
    let run = |result: &mut Res, r: Res| {
        result.merge(r);
        result.matches += 1;
    };
    if !s.types().is_empty() || s.format.is_some() {
        run(&mut result, type_validator(s, kind, path));
    }
    run(&mut result, schema_props_validator(s, data, path, depth));
    if let Value::String(text) = data {
        run(&mut result, string_validator(s, text, path));
        if let Some(f) = &s.format {
            run(&mut result, format_validator(f, text, path));
        }
    }
    if let Value::Number(n) = data {
        run(&mut result, number_validator(s, n, kind, path));
    }
    if let Value::Array(items) = data {
        run(&mut result, slice_validator(s, items, path, depth));
    }
    run(&mut result, common_validator(s, data, path));
    if let Value::Object(map) = data {
        run(&mut result, object_validator(s, map, path, depth));
    }
    result.matches += 1;
    result
}

/// `typeValidator.Validate`.
fn type_validator(s: &Node, kind: Kind, path: &str) -> Res {
    let types = s.types();
    let format = s.format.as_deref();
    if kind == Kind::Null {
        if !types.is_empty() && !types.contains(&"null") && !s.nullable {
            return Res::error(invalid_type(path, &types.join(","), "null"));
        }
        return Res { errors: Vec::new(), matches: 1 };
    }
    let (sch_type, data_format) = match kind {
        Kind::Bool => ("boolean", ""),
        Kind::String => ("string", ""),
        Kind::Int(_) => ("integer", "int64"),
        Kind::Float(_) => ("number", "double"),
        Kind::Array => ("array", ""),
        Kind::Object | Kind::Null => ("object", ""),
    };
    let is_float_int = matches!(kind, Kind::Float(f) if gofmt::is_json_integer(f)) && types.contains(&"integer");
    let is_int_float = matches!(kind, Kind::Int(_)) && types.contains(&"number");
    let stringish = matches!(kind, Kind::String | Kind::Array);
    if let Some(format) = format
        && !stringish
        && !(types.contains(&sch_type) || format == data_format || is_float_int || is_int_float)
    {
        return Res::error(invalid_type(path, format, data_format));
    }
    // A formatted non-numeric type accepts strings and (as []byte) arrays without more checks.
    if !(types.contains(&"number") || types.contains(&"integer")) && format.is_some() && stringish {
        return Res { errors: Vec::new(), matches: 1 };
    }
    if !(types.contains(&sch_type) || is_float_int || is_int_float) {
        return Res::error(invalid_type(path, &types.join(","), sch_type));
    }
    Res { errors: Vec::new(), matches: 1 }
}

/// `schemaPropsValidator.Validate`: the junctors.
fn schema_props_validator(s: &Node, data: &Value, path: &str, depth: usize) -> Res {
    let mut main = Res::default();
    let quoted = gofmt::quote(path);

    if !s.any_of.is_empty() {
        let mut best: Option<Res> = None;
        let mut first_success: Option<Res> = None;
        for sub in &s.any_of {
            let r = validate_schema(sub, data, path, depth + 1);
            if r.is_valid() {
                best = None;
                first_success = Some(r);
                break;
            }
            if best.as_ref().is_none_or(|b| r.matches > b.matches) {
                best = Some(r);
            }
        }
        if first_success.is_none() {
            main.add(OpenApiError::Composite(format!("{quoted} must validate at least one schema (anyOf)")));
        }
        if let Some(b) = best {
            main.merge(b);
        } else if let Some(f) = first_success {
            main.merge(f);
        }
    }

    if !s.one_of.is_empty() {
        let mut best: Option<Res> = None;
        let mut first_success: Option<Res> = None;
        let mut validated = 0usize;
        for sub in &s.one_of {
            let r = validate_schema(sub, data, path, depth + 1);
            if r.is_valid() {
                validated += 1;
                best = None;
                if first_success.is_none() {
                    first_success = Some(r);
                }
                continue;
            }
            if validated == 0 && best.as_ref().is_none_or(|b| r.matches > b.matches) {
                best = Some(r);
            }
        }
        if validated != 1 {
            let detail = if validated == 0 {
                "Found none valid".to_string()
            } else {
                format!("Found {validated} valid alternatives")
            };
            main.add(OpenApiError::Composite(format!(
                "{quoted} must validate one and only one schema (oneOf). {detail}"
            )));
            if let Some(b) = best {
                main.merge(b);
            }
        } else if let Some(f) = first_success {
            main.merge(f);
        }
    }

    if !s.all_of.is_empty() {
        let mut validated = 0usize;
        for sub in &s.all_of {
            let r = validate_schema(sub, data, path, depth + 1);
            if r.is_valid() {
                validated += 1;
            }
            main.merge(r);
        }
        if validated != s.all_of.len() {
            let detail = if validated == 0 { ". None validated" } else { "" };
            main.add(OpenApiError::Composite(format!("{quoted} must validate all the schemas (allOf){detail}")));
        }
    }

    if let Some(not) = &s.not
        && validate_schema(not, data, path, depth + 1).is_valid()
    {
        main.add(OpenApiError::Composite(format!("{quoted} must not validate the schema (not)")));
    }

    main.matches += 1;
    main
}

/// `stringValidator.Validate`: the first failing of maxLength, minLength, pattern.
fn string_validator(s: &Node, data: &str, path: &str) -> Res {
    // Lengths count code points (Go's utf8.RuneCount).
    let len = data.chars().count() as i64;
    let value = Some(Value::String(data.to_string()));
    if let Some(max) = s.max_length
        && len > max
    {
        return Res::error(OpenApiError::Validation {
            code: Code::TooLong,
            name: path.to_string(),
            value,
            valid: Some(max),
            values: Vec::new(),
            message: in_body(path, &format!("should be at most {max} chars long")),
        });
    }
    if let Some(min) = s.min_length
        && len < min
    {
        return Res::error(OpenApiError::new(
            Code::Other,
            path,
            value,
            in_body(path, &format!("should be at least {min} chars long")),
        ));
    }
    if let Some(p) = &s.pattern
        && let Some(re) = &p.regex
        && !re.is_match(data)
    {
        return Res::error(OpenApiError::new(
            Code::Other,
            path,
            value,
            in_body(path, &format!("should match '{}'", p.source)),
        ));
    }
    Res::default()
}

/// `formatValidator.Validate`.
fn format_validator(format: &str, data: &str, path: &str) -> Res {
    if format::is_valid(format, data) { Res::default() } else { Res::error(invalid_type(path, format, data)) }
}

/// `numberValidator.Validate`: multipleOf, minimum, maximum, in that order.
fn number_validator(s: &Node, n: &Number, kind: Kind, path: &str) -> Res {
    let mut res = Res::default();
    let value = Some(Value::Number(n.clone()));
    let err = |message: String| OpenApiError::new(Code::Other, path, value.clone(), message);

    if let Some(factor) = s.multiple_of {
        match kind {
            Kind::Int(data) => {
                // Upstream truncates the factor to the value's integer type.
                let factor = factor as i64;
                if factor <= 0 {
                    res.add(OpenApiError::new(
                        Code::Other,
                        path,
                        Some(Value::from(factor)),
                        format!("factor MultipleOf declared for {path} must be positive: {factor}"),
                    ));
                } else if data.checked_rem(factor).unwrap_or(0) != 0 {
                    res.add(err(in_body(path, &format!("should be a multiple of {factor}"))));
                }
            }
            _ => {
                let data = n.as_f64().unwrap_or(0.0);
                if factor <= 0.0 {
                    res.add(OpenApiError::new(
                        Code::Other,
                        path,
                        Some(Number::from_f64(factor).map_or(Value::Null, Value::Number)),
                        format!("factor MultipleOf declared for {path} must be positive: {}", gofmt::float_v(factor)),
                    ));
                } else {
                    let mult = if factor < 1.0 { 1.0 / factor * data } else { data / factor };
                    if !gofmt::is_json_integer(mult) {
                        res.add(err(in_body(path, &format!("should be a multiple of {}", gofmt::float_v(factor)))));
                    }
                }
            }
        }
    }

    let bound = |limit: f64, exclusive: bool, upper: bool| -> Option<OpenApiError> {
        let (word, fails, shown) = match kind {
            Kind::Int(data) => {
                let limit = limit as i64;
                let fails = if upper {
                    (!exclusive && data > limit) || (exclusive && data >= limit)
                } else {
                    (!exclusive && data < limit) || (exclusive && data <= limit)
                };
                (upper, fails, limit.to_string())
            }
            _ => {
                let data = n.as_f64().unwrap_or(0.0);
                let fails = if upper {
                    (!exclusive && data > limit) || (exclusive && data >= limit)
                } else {
                    (!exclusive && data < limit) || (exclusive && data <= limit)
                };
                (upper, fails, gofmt::float_v(limit))
            }
        };
        if !fails {
            return None;
        }
        let relation = match (word, exclusive) {
            (true, false) => "less than or equal to",
            (true, true) => "less than",
            (false, false) => "greater than or equal to",
            (false, true) => "greater than",
        };
        Some(err(in_body(path, &format!("should be {relation} {shown}"))))
    };
    if let Some(min) = s.minimum
        && let Some(e) = bound(min, s.exclusive_minimum, false)
    {
        res.add(e);
    }
    if let Some(max) = s.maximum
        && let Some(e) = bound(max, s.exclusive_maximum, true)
    {
        res.add(e);
    }
    res.matches += 1;
    res
}

/// `schemaSliceValidator.Validate`: items first, then minItems, maxItems, uniqueItems.
fn slice_validator(s: &Node, items: &[Value], path: &str, depth: usize) -> Res {
    let mut res = Res::default();
    if let Some(item_schema) = s.items.as_deref() {
        for (i, v) in items.iter().enumerate() {
            res.merge(validate_schema(item_schema, v, &format!("{path}[{i}]"), depth + 1));
        }
    }
    let size = items.len() as i64;
    if let Some(min) = s.min_items
        && size < min
    {
        res.add(OpenApiError::new(
            Code::Other,
            path,
            Some(Value::from(size)),
            in_body(path, &format!("should have at least {min} items")),
        ));
    }
    if let Some(max) = s.max_items
        && size > max
    {
        res.add(OpenApiError::Validation {
            code: Code::MaxItems,
            name: path.to_string(),
            value: Some(Value::from(size)),
            valid: Some(max),
            values: Vec::new(),
            message: in_body(path, &format!("should have at most {max} items")),
        });
    }
    if s.unique_items && has_duplicates(items) {
        res.add(OpenApiError::new(Code::Other, path, None, in_body(path, "shouldn't contain duplicates")));
    }
    res.matches += 1;
    res
}

fn has_duplicates(items: &[Value]) -> bool {
    let mut seen = std::collections::HashSet::new();
    items.iter().any(|v| !seen.insert(identity_key(v)))
}

/// `basicCommonValidator.Validate`: `enum`, with Go's reflect conversions (an integer matches
/// an equal float, a float matches an integer enum value after truncation, an integer matches a
/// one-character string enum value by code point).
fn common_validator(s: &Node, data: &Value, path: &str) -> Res {
    if s.enum_.is_empty() {
        return Res::default();
    }
    if s.enum_.iter().any(|e| enum_matches(e, data)) {
        return Res::default();
    }
    Res::error(OpenApiError::Validation {
        code: Code::Enum,
        name: path.to_string(),
        value: Some(data.clone()),
        valid: None,
        values: s.enum_.clone(),
        message: in_body(path, &format!("should be one of {}", gofmt::json(&Value::Array(s.enum_.clone())))),
    })
}

fn enum_matches(allowed: &Value, data: &Value) -> bool {
    match (allowed, kind_of(data)) {
        (_, Kind::Null) | (Value::Null, _) => false,
        (Value::Number(a), Kind::Int(d)) => match a.as_i64() {
            Some(a) => a == d,
            None => a.as_f64() == Some(d as f64),
        },
        (Value::Number(a), Kind::Float(d)) => match a.as_i64() {
            // float64 -> int64 conversion truncates.
            Some(a) => d.is_finite() && a == d.trunc() as i64,
            None => a.as_f64() == Some(d),
        },
        (Value::String(a), Kind::Int(d)) => {
            let c = u32::try_from(d).ok().and_then(char::from_u32).unwrap_or('\u{fffd}');
            a.chars().eq(std::iter::once(c))
        }
        (a, _) => a == data,
    }
}

/// `objectValidator.Validate`.
fn object_validator(s: &Node, map: &Map<String, Value>, path: &str, depth: usize) -> Res {
    let num_keys = map.len() as i64;
    if let Some(min) = s.min_properties
        && num_keys < min
    {
        return Res::error(OpenApiError::new(
            Code::Other,
            path,
            Some(Value::from(num_keys)),
            in_body(path, &format!("should have at least {min} properties")),
        ));
    }
    if let Some(max) = s.max_properties
        && num_keys > max
    {
        return Res::error(OpenApiError::Validation {
            code: Code::TooManyProperties,
            name: path.to_string(),
            value: Some(Value::from(num_keys)),
            valid: Some(max),
            values: Vec::new(),
            message: in_body(path, &format!("should have at most {max} properties")),
        });
    }
    let mut res = Res::default();
    match &s.additional {
        Some(Additional::Allows(false)) => {
            for k in map.keys() {
                if !s.properties.contains_key(k) {
                    res.add(OpenApiError::new(
                        Code::Other,
                        path,
                        Some(Value::String(k.clone())),
                        format!("{path}.{k} in body is a forbidden property"),
                    ));
                }
            }
        }
        Some(Additional::Schema(ap)) => {
            for (k, v) in map {
                if !s.properties.contains_key(k) {
                    res.merge(validate_schema(ap, v, &format!("{path}.{k}"), depth + 1));
                }
            }
        }
        Some(Additional::Allows(true)) | None => {}
    }
    for (name, prop) in &s.properties {
        if let Some(v) = map.get(name) {
            let child = if path.is_empty() { name.clone() } else { format!("{path}.{name}") };
            res.merge(validate_schema(prop, v, &child, depth + 1));
        }
    }
    for k in &s.required {
        if !map.contains_key(k) {
            let name = format!("{path}.{k}");
            let message = in_body(&name, "is required");
            res.add(OpenApiError::new(Code::Required, &name, None, message));
        }
    }
    res
}

// ---------------------------------------------------------------------------------------------
// Embedded resources
// ---------------------------------------------------------------------------------------------

fn embedded_errors(s: &Node, x: &Value, path: &FieldPath, errors: &mut Vec<FieldError>, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    match x {
        Value::Object(map) => {
            if s.embedded_resource {
                validate_embedded_resource(map, path, errors);
            }
            for (k, v) in map {
                if let Some(prop) = s.properties.get(k) {
                    embedded_errors(prop, v, &path.child(k), errors, depth + 1);
                } else if let Some(ap) = s.additional_schema() {
                    embedded_errors(ap, v, &path.key(k), errors, depth + 1);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = s.items.as_deref() {
                for (i, v) in items.iter().enumerate() {
                    embedded_errors(item_schema, v, &path.index(i), errors, depth + 1);
                }
            }
        }
        _ => {}
    }
}

/// `validateEmbeddedResource`.
fn validate_embedded_resource(map: &Map<String, Value>, path: &FieldPath, errors: &mut Vec<FieldError>) {
    for key in ["apiVersion", "kind"] {
        if !map.contains_key(key) {
            errors.push(FieldError::required(path.child(key).as_field(), "must not be empty"));
        }
    }
    if let Some(v) = map.get("apiVersion") {
        let field = path.child("apiVersion").as_field();
        match v {
            Value::String(s) if s.is_empty() => errors.push(FieldError::invalid(field, "", "must not be empty")),
            Value::String(s) if s.matches('/').count() > 1 => {
                errors.push(FieldError::invalid(field, s.as_str(), format!("unexpected GroupVersion string: {s}")));
            }
            Value::String(_) => {}
            other => errors.push(FieldError::invalid(field, other.clone(), "must be a string")),
        }
    }
    if let Some(v) = map.get("kind") {
        let field = path.child("kind").as_field();
        match v {
            Value::String(s) if s.is_empty() => errors.push(FieldError::invalid(field, "", "must not be empty")),
            Value::String(s) => {
                let problems = dns1035_label_errors(&s.to_lowercase());
                if !problems.is_empty() {
                    errors.push(FieldError::invalid(
                        field,
                        s.as_str(),
                        format!("may have mixed case, but should otherwise match: {}", problems.join(",")),
                    ));
                }
            }
            other => errors.push(FieldError::invalid(field, other.clone(), "must be a string")),
        }
    }
    if let Some(meta) = map.get("metadata")
        && let Err(msg) = objectmeta::coerce(meta, false)
    {
        errors.push(FieldError::invalid(path.child("metadata").as_field(), meta.clone(), msg));
    }
}

/// apimachinery's `IsDNS1035Label`.
fn dns1035_label_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push("must be no more than 63 characters".to_string());
    }
    let b = value.as_bytes();
    let shape_ok = b.first().is_some_and(u8::is_ascii_lowercase)
        && b.last().is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-');
    if !shape_ok {
        errs.push(
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an \
             alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', \
             regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
                .to_string(),
        );
    }
    errs
}

// ---------------------------------------------------------------------------------------------
// List types
// ---------------------------------------------------------------------------------------------

/// `ValidateListSetsAndMaps` over any value.
pub(crate) fn list_type_errors(s: &Node, x: &Value, path: &FieldPath, errors: &mut Vec<FieldError>, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    match x {
        Value::Object(map) => {
            if let Some(ap) = s.additional_schema() {
                for (k, v) in map {
                    list_type_errors(ap, v, &path.key(k), errors, depth + 1);
                }
            }
            for (k, v) in map {
                if let Some(prop) = s.properties.get(k) {
                    list_type_errors(prop, v, &path.child(k), errors, depth + 1);
                }
            }
        }
        Value::Array(items) => {
            match s.list_type.as_deref() {
                Some("set") => {
                    for i in non_unique(&items.iter().map(identity_key).collect::<Vec<_>>()) {
                        if let Some(item) = items.get(i) {
                            errors.push(FieldError::duplicate(path.index(i).as_field(), item.clone()));
                        }
                    }
                }
                Some("map") => validate_list_map(s, items, path, errors),
                _ => {}
            }
            if let Some(item_schema) = s.items.as_deref() {
                for (i, v) in items.iter().enumerate() {
                    list_type_errors(item_schema, v, &path.index(i), errors, depth + 1);
                }
            }
        }
        _ => {}
    }
}

/// A key telling values apart the way Go's `map[interface{}]` (scalars) and their JSON
/// encoding (objects and arrays) do: `1` and `1.0` differ.
fn identity_key(v: &Value) -> String {
    match v {
        Value::Null => "null".to_string(),
        Value::Bool(b) => format!("b:{b}"),
        Value::Number(n) => match n.as_i64() {
            Some(i) => format!("i:{i}"),
            None => format!("f:{}", gofmt::float_json(n.as_f64().unwrap_or(0.0))),
        },
        Value::String(s) => format!("s:{s}"),
        Value::Array(_) | Value::Object(_) => format!("c:{}", gofmt::json(v)),
    }
}

/// `validateListSet`: for each value seen more than once, the index of its second occurrence.
fn non_unique(keys: &[String]) -> Vec<usize> {
    let mut seen: HashMap<&str, usize> = HashMap::with_capacity(keys.len());
    let mut out = Vec::new();
    if keys.len() <= 1 {
        return out;
    }
    for (i, k) in keys.iter().enumerate() {
        let times = seen.entry(k.as_str()).or_insert(0);
        *times += 1;
        if *times == 2 {
            out.push(i);
        }
    }
    out
}

/// `validateListMap`.
fn validate_list_map(s: &Node, items: &[Value], path: &FieldPath, errors: &mut Vec<FieldError>) {
    for (i, x) in items.iter().enumerate() {
        if !matches!(x, Value::Null | Value::Object(_)) {
            errors.push(FieldError::invalid(
                path.index(i).as_field(),
                x.clone(),
                "must be an object for an array of list-type map",
            ));
            return;
        }
    }
    if items.len() <= 1 {
        return;
    }
    // The key of each item: the values of its key fields that are present.
    let key_maps: Vec<Map<String, Value>> = items
        .iter()
        .map(|x| {
            let mut key = Map::new();
            if let Value::Object(m) = x {
                for k in &s.list_map_keys {
                    if let Some(v) = m.get(k) {
                        key.insert(k.clone(), v.clone());
                    }
                }
            }
            key
        })
        .collect();
    let identities: Vec<String> = if s.list_map_keys.len() == 1 {
        // A missing single key is "unspecified", distinct from every value (including null).
        key_maps.iter().map(|m| m.values().next().map_or_else(|| "unspecified".to_string(), identity_key)).collect()
    } else {
        key_maps.iter().map(|m| identity_key(&Value::Object(m.clone()))).collect()
    };
    for i in non_unique(&identities) {
        if let Some(key) = key_maps.get(i) {
            errors.push(FieldError::duplicate(path.index(i).as_field(), Value::Object(key.clone())));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaProps;
    use serde_json::json;

    /// A node built without the CRD compile checks, to reach validator paths that real CRDs
    /// cannot (kube-apiserver rejects `uniqueItems`, for one).
    fn node(v: Value) -> Node {
        let props: JSONSchemaProps = serde_json::from_value(v).unwrap();
        let mut errs = Vec::new();
        let n = Node::build(&props, &FieldPath::root(), 0, &mut errs);
        assert!(errs.is_empty());
        n
    }

    fn check(schema: Value, data: Value) -> Vec<String> {
        openapi_field_errors(&node(schema), &data, &FieldPath::root()).iter().map(FieldError::message).collect()
    }

    #[test]
    fn test_unique_items_message() {
        let s = json!({"type": "object", "properties": {"l": {"type": "array", "uniqueItems": true, "items": {}}}});
        assert_eq!(
            check(s.clone(), json!({"l": [1, 2, 1]})),
            [r#"l: Invalid value: "": l in body shouldn't contain duplicates"#]
        );
        assert!(check(s, json!({"l": [1, 1.0]})).is_empty(), "1 and 1.0 are different values to Go");
    }

    #[test]
    fn test_any_of_reports_the_branch_that_matched_most() {
        // The object branch applies more validators to an object than the string branch.
        let s = json!({"properties": {"v": {"anyOf": [
            {"type": "string"},
            {"type": "object", "required": ["a"], "properties": {"b": {"type": "integer"}}}
        ]}}});
        assert_eq!(
            check(s, json!({"v": {"b": 1}})),
            [r#"<nil>: Invalid value: "": "v" must validate at least one schema (anyOf)"#, "v.a: Required value"]
        );
    }

    #[test]
    fn test_any_of_ties_keep_the_first_failure() {
        let s = json!({"properties": {"v": {"anyOf": [{"minimum": 10}, {"maximum": 0}]}}});
        assert_eq!(
            check(s, json!({"v": 5})),
            [
                r#"<nil>: Invalid value: "": "v" must validate at least one schema (anyOf)"#,
                "v: Invalid value: 5: v in body should be greater than or equal to 10",
            ]
        );
    }

    #[test]
    fn test_multiple_of_must_be_positive() {
        assert_eq!(
            check(json!({"properties": {"n": {"multipleOf": 0}}}), json!({"n": 4})),
            ["n: Invalid value: 0: factor MultipleOf declared for n must be positive: 0"]
        );
    }

    #[test]
    fn test_integer_bounds_are_truncated_like_go() {
        // int64(10.9) == 10
        assert_eq!(
            check(json!({"properties": {"n": {"maximum": 10.9}}}), json!({"n": 11})),
            ["n: Invalid value: 11: n in body should be less than or equal to 10"]
        );
        assert!(check(json!({"properties": {"n": {"maximum": 10.9}}}), json!({"n": 10.5})).is_empty());
    }

    #[test]
    fn test_enum_uses_go_conversions() {
        let s = json!({"properties": {"n": {"enum": [5]}}});
        assert!(check(s.clone(), json!({"n": 5})).is_empty());
        assert!(check(s, json!({"n": 5.7})).is_empty(), "float64 -> int64 truncates");
        let s = json!({"properties": {"n": {"enum": [5.5]}}});
        assert_eq!(check(s, json!({"n": 5})), [r#"n: Unsupported value: 5: supported values: "5.5""#]);
        let s = json!({"properties": {"o": {"enum": [{"a": 1}]}}});
        assert!(check(s.clone(), json!({"o": {"a": 1}})).is_empty());
        assert_eq!(
            check(s, json!({"o": {"a": 2}})),
            [r#"o: Unsupported value: {"a":2}: supported values: "{\"a\":1}""#]
        );
    }

    #[test]
    fn test_format_on_a_non_string_reports_the_format() {
        assert_eq!(
            check(json!({"properties": {"t": {"type": "string", "format": "date-time"}}}), json!({"t": 5})),
            [r#"t: Invalid value: "int64": t in body must be of type date-time: "int64""#]
        );
    }

    #[test]
    fn test_root_errors_have_the_nil_field() {
        assert_eq!(
            check(json!({"type": "object"}), json!([])),
            [r#"<nil>: Invalid value: "array":  in body must be of type object: "array""#]
        );
    }

    #[test]
    fn test_errors_are_deduplicated_by_message() {
        let s = json!({"properties": {"n": {"allOf": [{"maximum": 1}, {"maximum": 1}]}}});
        assert_eq!(
            check(s, json!({"n": 2})),
            [
                "n: Invalid value: 2: n in body should be less than or equal to 1",
                r#"<nil>: Invalid value: "": "n" must validate all the schemas (allOf). None validated"#,
            ]
        );
    }

    #[test]
    fn test_deep_schema_recursion_is_bounded() {
        let mut schema = json!({"type": "integer"});
        for _ in 0..(MAX_DEPTH + 10) {
            schema = json!({"type": "array", "items": schema});
        }
        let props: JSONSchemaProps = serde_json::from_value(schema).expect("schema");
        let mut errs = Vec::new();
        let _ = Node::build(&props, &FieldPath::root(), 0, &mut errs);
        assert!(!errs.is_empty());
    }
}

//! Coercion of `metadata` to `ObjectMeta`, as apiextensions' `schema/objectmeta` does it.
//!
//! kube-apiserver decodes the `metadata` of a custom resource (and of every
//! `x-kubernetes-embedded-resource` inside it) into Go's `metav1.ObjectMeta` and writes it back,
//! whatever the CRD schema says about `metadata`. The round trip:
//!
//! - drops unknown fields (reported as `metadata.foo`, `metadata.ownerReferences[0].bar`);
//! - drops empty values of `omitempty` fields (`labels: {}`, `finalizers: []`, `name: ""`,
//!   `generation: 0`, nulls), and a zero `creationTimestamp`;
//! - normalises timestamps to RFC 3339 seconds in UTC (`2024-01-02T03:04:05Z`);
//! - turns `null` entries of string maps and lists into `""`, as Go's decoder does;
//! - fills the four required fields of each owner reference (`apiVersion`, `kind`, `name`,
//!   `uid`) with `""` when missing.
//!
//! A field of the wrong type is either an error (request decoding) or dropped on its own
//! (`DropMalformedFields`, used when reading storage). Error texts follow Go's `encoding/json`
//! (`json: cannot unmarshal number into Go struct field ObjectMeta.name of type string`); time
//! parse errors are worded differently from Go's.

use serde_json::{Map, Value};

use super::format::days_in_month;

/// The outcome of coercing one `metadata` value.
pub(crate) struct Coerced {
    /// The normalised metadata, `None` when it was left alone (not an object, in drop mode).
    pub meta: Option<Value>,
    /// Unknown fields, relative to `metadata` (`foo`, `ownerReferences[0].bar`).
    pub unknown: Vec<String>,
}

/// Coerce a `metadata` value. With `drop_malformed`, fields of the wrong type are dropped one
/// by one; without it the first one is returned as an error (Go's message).
pub(crate) fn coerce(meta: &Value, drop_malformed: bool) -> Result<Coerced, String> {
    let fields = match meta {
        Value::Null => {
            return Ok(Coerced { meta: Some(Value::Object(Map::new())), unknown: Vec::new() });
        }
        Value::Object(fields) => fields,
        other => {
            if drop_malformed {
                return Ok(Coerced { meta: None, unknown: Vec::new() });
            }
            return Err(format!("json: cannot unmarshal {} into Go value of type v1.ObjectMeta", json_type(other)));
        }
    };
    let mut unknown = Vec::new();
    let mut out = Map::new();
    // Written in ObjectMeta's field order.
    for &(name, kind) in OBJECT_META_FIELDS {
        let Some(v) = fields.get(name) else { continue };
        match kind.coerce(name, v, &mut unknown) {
            Ok(Some(v)) => {
                out.insert(name.to_string(), v);
            }
            Ok(None) => {}
            // DropMalformedFields: Go decodes field by field and skips the ones that fail.
            Err(_) if drop_malformed => {}
            Err(e) => return Err(e),
        }
    }
    for k in fields.keys() {
        if !OBJECT_META_FIELDS.iter().any(|(name, _)| name == k) {
            unknown.push(k.clone());
        }
    }
    unknown.sort();
    Ok(Coerced { meta: Some(Value::Object(out)), unknown })
}

/// Go's name for the JSON type of a value in decoding errors.
fn json_type(v: &Value) -> String {
    match v {
        Value::Null => "null".to_string(),
        Value::Bool(_) => "bool".to_string(),
        Value::Number(n) => format!("number {n}"),
        Value::String(_) => "string".to_string(),
        Value::Array(_) => "array".to_string(),
        Value::Object(_) => "object".to_string(),
    }
}

fn mismatch(v: &Value, field: &str, go_type: &str) -> String {
    let t = match v {
        // Go names the literal only when a number does not fit a numeric field.
        Value::Number(_) if !go_type.starts_with("int") => "number".to_string(),
        other => json_type(other),
    };
    format!("json: cannot unmarshal {t} into Go struct field ObjectMeta.{field} of type {go_type}")
}

#[derive(Clone, Copy)]
enum Kind {
    /// `string` with `omitempty`.
    Str,
    /// `int64` with `omitempty` (zero dropped).
    Int,
    /// `*int64` (zero kept).
    IntPtr,
    /// `metav1.Time` / `*metav1.Time` (zero dropped).
    Time,
    /// `map[string]string`.
    StrMap,
    /// `[]string`.
    StrList,
    /// `[]OwnerReference`.
    OwnerRefs,
    /// `[]ManagedFieldsEntry`.
    ManagedFields,
}

const OBJECT_META_FIELDS: &[(&str, Kind)] = &[
    ("name", Kind::Str),
    ("generateName", Kind::Str),
    ("namespace", Kind::Str),
    ("selfLink", Kind::Str),
    ("uid", Kind::Str),
    ("resourceVersion", Kind::Str),
    ("generation", Kind::Int),
    ("creationTimestamp", Kind::Time),
    ("deletionTimestamp", Kind::Time),
    ("deletionGracePeriodSeconds", Kind::IntPtr),
    ("labels", Kind::StrMap),
    ("annotations", Kind::StrMap),
    ("ownerReferences", Kind::OwnerRefs),
    ("finalizers", Kind::StrList),
    ("managedFields", Kind::ManagedFields),
];

impl Kind {
    fn coerce(self, field: &str, v: &Value, unknown: &mut Vec<String>) -> Result<Option<Value>, String> {
        match self {
            Kind::Str => string(field, v, true),
            Kind::Int | Kind::IntPtr => match v {
                Value::Null => Ok(None),
                Value::Number(n) => match n.as_i64() {
                    Some(0) if matches!(self, Kind::Int) => Ok(None),
                    Some(i) => Ok(Some(Value::from(i))),
                    None => Err(mismatch(v, field, "int64")),
                },
                other => Err(mismatch(other, field, "int64")),
            },
            Kind::Time => time(v),
            Kind::StrMap => match v {
                Value::Null => Ok(None),
                Value::Object(m) => {
                    let mut out = Map::new();
                    for (k, item) in m {
                        match item {
                            Value::String(s) => out.insert(k.clone(), Value::String(s.clone())),
                            Value::Null => out.insert(k.clone(), Value::String(String::new())),
                            other => return Err(mismatch(other, field, "string")),
                        };
                    }
                    Ok((!out.is_empty()).then_some(Value::Object(out)))
                }
                other => Err(mismatch(other, field, "map[string]string")),
            },
            Kind::StrList => match v {
                Value::Null => Ok(None),
                Value::Array(items) => {
                    let mut out = Vec::with_capacity(items.len());
                    for item in items {
                        match item {
                            Value::String(s) => out.push(Value::String(s.clone())),
                            Value::Null => out.push(Value::String(String::new())),
                            other => return Err(mismatch(other, field, "string")),
                        }
                    }
                    Ok((!out.is_empty()).then_some(Value::Array(out)))
                }
                other => Err(mismatch(other, field, "[]string")),
            },
            Kind::OwnerRefs => list_of_structs(field, v, unknown, owner_reference, "[]v1.OwnerReference"),
            Kind::ManagedFields => list_of_structs(field, v, unknown, managed_fields_entry, "[]v1.ManagedFieldsEntry"),
        }
    }
}

/// A `string` field; `omitempty` drops `""` (and `null`, which decodes to `""`).
fn string(field: &str, v: &Value, omit_empty: bool) -> Result<Option<Value>, String> {
    match v {
        Value::Null if omit_empty => Ok(None),
        Value::Null => Ok(Some(Value::String(String::new()))),
        Value::String(s) if s.is_empty() && omit_empty => Ok(None),
        Value::String(s) => Ok(Some(Value::String(s.clone()))),
        other => Err(mismatch(other, field, "string")),
    }
}

fn time(v: &Value) -> Result<Option<Value>, String> {
    match v {
        Value::Null => Ok(None),
        Value::String(s) => match normalize_rfc3339(s) {
            Some(t) if t == ZERO_TIME => Ok(None),
            Some(t) => Ok(Some(Value::String(t))),
            None => Err(format!("parsing time {s:?} as \"2006-01-02T15:04:05Z07:00\": not an RFC 3339 time")),
        },
        other => Err(format!("json: cannot unmarshal {} into Go value of type string", json_type(other))),
    }
}

type StructCoercer = fn(&Map<String, Value>, &str, &mut Vec<String>) -> Result<Value, String>;

fn list_of_structs(
    field: &str,
    v: &Value,
    unknown: &mut Vec<String>,
    item: StructCoercer,
    go_type: &str,
) -> Result<Option<Value>, String> {
    match v {
        Value::Null => Ok(None),
        Value::Array(items) => {
            let empty = Map::new();
            let mut out = Vec::with_capacity(items.len());
            for (i, entry) in items.iter().enumerate() {
                let prefix = format!("{field}[{i}]");
                let fields = match entry {
                    Value::Object(m) => m,
                    Value::Null => &empty,
                    other => return Err(mismatch(other, field, go_type.trim_start_matches("[]"))),
                };
                out.push(item(fields, &prefix, unknown)?);
            }
            Ok((!out.is_empty()).then_some(Value::Array(out)))
        }
        other => Err(mismatch(other, field, go_type)),
    }
}

fn record_unknown(fields: &Map<String, Value>, known: &[&str], prefix: &str, unknown: &mut Vec<String>) {
    for k in fields.keys() {
        if !known.contains(&k.as_str()) {
            unknown.push(format!("{prefix}.{k}"));
        }
    }
}

fn owner_reference(fields: &Map<String, Value>, prefix: &str, unknown: &mut Vec<String>) -> Result<Value, String> {
    const KNOWN: &[&str] = &["apiVersion", "kind", "name", "uid", "controller", "blockOwnerDeletion"];
    record_unknown(fields, KNOWN, prefix, unknown);
    let mut out = Map::new();
    for key in ["apiVersion", "kind", "name", "uid"] {
        let v = string(&format!("ownerReferences.{key}"), fields.get(key).unwrap_or(&Value::Null), false)?;
        out.insert(key.to_string(), v.unwrap_or_else(|| Value::String(String::new())));
    }
    for key in ["controller", "blockOwnerDeletion"] {
        match fields.get(key) {
            None | Some(Value::Null) => {}
            Some(Value::Bool(b)) => {
                out.insert(key.to_string(), Value::Bool(*b));
            }
            Some(other) => return Err(mismatch(other, &format!("ownerReferences.{key}"), "bool")),
        }
    }
    Ok(Value::Object(out))
}

fn managed_fields_entry(fields: &Map<String, Value>, prefix: &str, unknown: &mut Vec<String>) -> Result<Value, String> {
    const KNOWN: &[&str] = &["manager", "operation", "apiVersion", "time", "fieldsType", "fieldsV1", "subresource"];
    record_unknown(fields, KNOWN, prefix, unknown);
    let mut out = Map::new();
    for &key in KNOWN {
        let Some(v) = fields.get(key) else { continue };
        let coerced = match key {
            "time" => time(v)?,
            // FieldsV1 keeps any non-null JSON verbatim.
            "fieldsV1" => (!v.is_null()).then(|| v.clone()),
            _ => string(&format!("managedFields.{key}"), v, true)?,
        };
        if let Some(c) = coerced {
            out.insert(key.to_string(), c);
        }
    }
    Ok(Value::Object(out))
}

/// `metav1.Time`'s zero value as it would be printed.
const ZERO_TIME: &str = "0001-01-01T00:00:00Z";

/// Parse an RFC 3339 timestamp (`2006-01-02T15:04:05[.frac](Z|±hh:mm)`) and print it the way
/// `metav1.Time` marshals: UTC, whole seconds.
pub(crate) fn normalize_rfc3339(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let digits = |r: std::ops::Range<usize>| -> Option<i64> {
        let part = b.get(r)?;
        if !part.iter().all(u8::is_ascii_digit) {
            return None;
        }
        std::str::from_utf8(part).ok()?.parse().ok()
    };
    let sep = |i: usize, c: u8| b.get(i) == Some(&c);
    if !(sep(4, b'-') && sep(7, b'-') && sep(10, b'T') && sep(13, b':') && sep(16, b':')) {
        return None;
    }
    let (year, month, day) = (digits(0..4)?, digits(5..7)?, digits(8..10)?);
    let (hour, minute, second) = (digits(11..13)?, digits(14..16)?, digits(17..19)?);
    if !(1..=12).contains(&month)
        || day < 1
        || day > i64::from(days_in_month(year as u32, month as u32))
        || hour > 23
        || minute > 59
        || second > 59
    {
        return None;
    }
    let mut rest = b.get(19..)?;
    if let Some(frac) = rest.strip_prefix(b".") {
        let n = frac.iter().take_while(|c| c.is_ascii_digit()).count();
        if n == 0 {
            return None;
        }
        rest = frac.get(n..)?;
    }
    let offset_minutes = match rest {
        b"Z" => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            let all = [h1, h2, m1, m2];
            if !all.iter().all(|c| c.is_ascii_digit()) {
                return None;
            }
            let h = i64::from((h1 - b'0') * 10 + (h2 - b'0'));
            let m = i64::from((m1 - b'0') * 10 + (m2 - b'0'));
            if h > 24 || m > 59 {
                return None;
            }
            if *sign == b'-' { -(h * 60 + m) } else { h * 60 + m }
        }
        _ => return None,
    };
    let local = days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second;
    let utc = local - offset_minutes * 60;
    let (days, secs) = (utc.div_euclid(86_400), utc.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    let year = if y < 0 { format!("-{:04}", -y) } else { format!("{y:04}") };
    Some(format!("{year}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", secs / 3600, secs % 3600 / 60, secs % 60))
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn coerce_ok(v: Value) -> (Value, Vec<String>) {
        let c = coerce(&v, false).unwrap();
        (c.meta.unwrap(), c.unknown)
    }

    #[test]
    fn test_unknown_fields_are_dropped_and_reported() {
        let (meta, unknown) = coerce_ok(json!({"name": "a", "foo": 1, "labels": {"x": "y"}}));
        assert_eq!(meta, json!({"name": "a", "labels": {"x": "y"}}));
        assert_eq!(unknown, ["foo"]);
    }

    #[test]
    fn test_empty_values_are_omitted() {
        let (meta, _) = coerce_ok(json!({
            "name": "", "labels": {}, "finalizers": [], "generation": 0,
            "annotations": null, "ownerReferences": [], "deletionGracePeriodSeconds": 0
        }));
        assert_eq!(meta, json!({"deletionGracePeriodSeconds": 0}));
    }

    #[test]
    fn test_timestamps_are_normalised_to_utc_seconds() {
        let (meta, _) = coerce_ok(json!({"creationTimestamp": "2024-01-02T03:04:05.999+01:30"}));
        assert_eq!(meta, json!({"creationTimestamp": "2024-01-02T01:34:05Z"}));
        let (meta, _) = coerce_ok(json!({"creationTimestamp": "0001-01-01T00:00:00Z"}));
        assert_eq!(meta, json!({}));
    }

    #[test]
    fn test_owner_references_get_required_fields_and_report_unknown() {
        let (meta, unknown) = coerce_ok(json!({"ownerReferences": [{"uid": "u", "controller": true, "x": 1}]}));
        assert_eq!(
            meta,
            json!({"ownerReferences": [{"apiVersion": "", "kind": "", "name": "", "uid": "u", "controller": true}]})
        );
        assert_eq!(unknown, ["ownerReferences[0].x"]);
    }

    #[test]
    fn test_null_metadata_becomes_empty() {
        let (meta, _) = coerce_ok(Value::Null);
        assert_eq!(meta, json!({}));
    }

    #[test]
    fn test_malformed_field_is_an_error_or_dropped() {
        let v = json!({"name": "a", "labels": "oops"});
        assert_eq!(
            coerce(&v, false).err().unwrap(),
            "json: cannot unmarshal string into Go struct field ObjectMeta.labels of type map[string]string"
        );
        let c = coerce(&v, true).unwrap();
        assert_eq!(c.meta.unwrap(), json!({"name": "a"}));
        let v = json!({"generation": 1.5});
        assert_eq!(
            coerce(&v, false).err().unwrap(),
            "json: cannot unmarshal number 1.5 into Go struct field ObjectMeta.generation of type int64"
        );
    }

    #[test]
    fn test_non_object_metadata() {
        assert!(coerce(&json!("x"), false).is_err());
        assert!(coerce(&json!("x"), true).unwrap().meta.is_none());
    }

    #[test]
    fn test_rfc3339_parser_rejects_bad_times() {
        assert_eq!(normalize_rfc3339("2024-02-29T23:59:59Z").as_deref(), Some("2024-02-29T23:59:59Z"));
        assert_eq!(normalize_rfc3339("2024-01-01T00:30:00+01:00").as_deref(), Some("2023-12-31T23:30:00Z"));
        assert!(normalize_rfc3339("2023-02-29T00:00:00Z").is_none());
        assert!(normalize_rfc3339("2024-01-01T00:00:00").is_none());
        assert!(normalize_rfc3339("2024-01-01 00:00:00Z").is_none());
        assert!(normalize_rfc3339("").is_none());
    }
}

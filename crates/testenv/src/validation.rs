//! Object name and metadata validation.
//!
//! These are the checks kube-apiserver applies to every object's `metadata` on create
//! (`ValidateObjectMetaAccessor` in `k8s.io/apimachinery/pkg/api/validation/objectmeta.go`),
//! with the same field paths, error kinds and messages, so that clients see the same 422
//! Invalid causes:
//!
//! * `name` (or, when set, `generateName` as a prefix) by the resource's [`NameRule`];
//!   CRs and most built-ins use RFC 1123 subdomains, Namespaces RFC 1123 labels, Services
//!   RFC 1035 labels. An empty `name` is `metadata.name: Required value: name or
//!   generateName is required`: call this **after** generating the name from
//!   `generateName`, as the apiserver does.
//! * `namespace`: required and an RFC 1123 label for namespaced resources, forbidden for
//!   cluster-scoped ones (clear it before validating, as the apiserver does).
//! * `labels` (qualified-name keys, label values), `annotations` (qualified-name keys,
//!   case-insensitive; total size of keys and values at most 256 KiB), `finalizers`
//!   (qualified names; `orphan` and `foregroundDeletion` exclusive), `ownerReferences`
//!   (`apiVersion`, `kind`, `name`, `uid` required; at most one `controller: true`; v1
//!   Events cannot own objects), `generation` non-negative.
//!
//! The generic registry store additionally validates every name as a path segment (no
//! `/`, `%`, `.` or `..`) **after** the type-specific validation and only when that passed
//! (`rest.BeforeCreate`); callers reproduce that by running [`validate_object_meta`] with
//! [`NameRule::PathSegment`] when the first run returned nothing.
//!
//! Updates: [`validate_finalizers_on_update`] forbids adding finalizers to an object that
//! is being deleted (`ValidateNoNewFinalizers`). [`normalize_object_meta`] and
//! [`dedup_owner_references`] reproduce what the ObjectMeta round trip and the registry do
//! to submitted metadata (empty collections dropped, duplicate owner references removed
//! with a warning).
//!
//! Input that is not even shaped like ObjectMeta (a label value that is a number, say)
//! would fail JSON decoding upstream; here it is reported as an invalid value of the field.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::schema::FieldError;

pub use crate::selector::syntax::{
    is_dns1035_label, is_dns1123_label, is_dns1123_subdomain, is_qualified_name, is_valid_label_value,
};
use crate::selector::{SelectorIssueKind, go_quote, label_selector_issues};

/// The limit on the summed length of all annotation keys and values (`TotalAnnotationSizeLimitB`).
pub const TOTAL_ANNOTATION_SIZE_LIMIT_B: usize = 256 * 1024;

/// `metav1.FinalizerOrphanDependents`.
const FINALIZER_ORPHAN: &str = "orphan";
/// `metav1.FinalizerDeleteDependents`.
const FINALIZER_FOREGROUND: &str = "foregroundDeletion";

/// How a resource's object names are validated (the `ValidateNameFunc` of its strategy).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameRule {
    /// `NameIsDNSSubdomain`: custom resources and most built-ins.
    Dns1123Subdomain,
    /// `NameIsDNSLabel`: Namespaces and a few others.
    Dns1123Label,
    /// `NameIsDNS1035Label`: Services.
    Dns1035Label,
    /// `path.ValidatePathSegmentName`: only what is unsafe in a URL path segment.
    PathSegment,
}

impl NameRule {
    /// The problems with `name`; with `prefix` it is a `generateName`, which may end in
    /// a dash because random characters are appended.
    pub fn validate(self, name: &str, prefix: bool) -> Vec<String> {
        let masked;
        let name = if prefix && self != NameRule::PathSegment {
            masked = mask_trailing_dash(name);
            masked.as_str()
        } else {
            name
        };
        match self {
            NameRule::Dns1123Subdomain => is_dns1123_subdomain(name),
            NameRule::Dns1123Label => is_dns1123_label(name),
            NameRule::Dns1035Label => is_dns1035_label(name),
            NameRule::PathSegment if prefix => is_valid_path_segment_prefix(name),
            NameRule::PathSegment => is_valid_path_segment_name(name),
        }
    }
}

/// `maskTrailingDash`: replaces a trailing dash so that a prefix validates like a full
/// name. Upstream drops the last **two** bytes before appending `a`; that is reproduced.
fn mask_trailing_dash(name: &str) -> String {
    if name.len() > 1 && name.ends_with('-') {
        let mut end = name.len() - 2;
        while !name.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}a", name.get(..end).unwrap_or(""))
    } else {
        name.to_owned()
    }
}

/// `path.IsValidPathSegmentName`: not `.` or `..`, no `/` or `%`.
pub fn is_valid_path_segment_name(name: &str) -> Vec<String> {
    for illegal in [".", ".."] {
        if name == illegal {
            return vec![format!("may not be '{illegal}'")];
        }
    }
    is_valid_path_segment_prefix(name)
}

/// `path.IsValidPathSegmentPrefix`: no `/` or `%`.
pub fn is_valid_path_segment_prefix(name: &str) -> Vec<String> {
    ["/", "%"]
        .iter()
        .filter(|illegal| name.contains(**illegal))
        .map(|illegal| format!("may not contain '{illegal}'"))
        .collect()
}

/// Reads an optional string field, reporting a non-string value.
fn string_field<'a>(meta: &'a Value, key: &str, errs: &mut Vec<FieldError>) -> &'a str {
    match meta.get(key) {
        None | Some(Value::Null) => "",
        Some(Value::String(s)) => s,
        Some(other) => {
            errs.push(FieldError::invalid(format!("metadata.{key}"), other.clone(), "must be a string"));
            ""
        }
    }
}

/// Validates an object's `metadata` on create (`ValidateObjectMetaAccessor`).
///
/// `namespaced` says whether the resource is namespaced; `name_rule` is the resource's
/// name validation. Errors are in upstream order and carry `metadata.*` paths.
pub fn validate_object_meta(meta: &Value, namespaced: bool, name_rule: NameRule) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if !meta.is_object() {
        errs.push(FieldError::invalid("metadata", meta.clone(), "must be an object"));
        return errs;
    }

    let generate_name = string_field(meta, "generateName", &mut errs);
    if !generate_name.is_empty() {
        for msg in name_rule.validate(generate_name, true) {
            errs.push(FieldError::invalid("metadata.generateName", generate_name, msg));
        }
    }
    let name = string_field(meta, "name", &mut errs);
    if name.is_empty() {
        errs.push(FieldError::required("metadata.name", "name or generateName is required"));
    } else {
        for msg in name_rule.validate(name, false) {
            errs.push(FieldError::invalid("metadata.name", name, msg));
        }
    }

    let namespace = string_field(meta, "namespace", &mut errs);
    if namespaced {
        if namespace.is_empty() {
            errs.push(FieldError::required("metadata.namespace", ""));
        } else {
            for msg in is_dns1123_label(namespace) {
                errs.push(FieldError::invalid("metadata.namespace", namespace, msg));
            }
        }
    } else if !namespace.is_empty() {
        errs.push(FieldError::forbidden("metadata.namespace", "not allowed on this type"));
    }

    if let Some(generation) = meta.get("generation").filter(|g| !g.is_null()) {
        match generation.as_i64() {
            Some(g) if g >= 0 => {}
            Some(_) => errs.push(FieldError::invalid(
                "metadata.generation",
                generation.clone(),
                "must be greater than or equal to 0",
            )),
            None if generation.as_u64().is_some() => {}
            None => errs.push(FieldError::invalid("metadata.generation", generation.clone(), "must be an integer")),
        }
    }

    errs.extend(validate_labels(meta.get("labels").unwrap_or(&Value::Null), "metadata.labels"));
    errs.extend(validate_annotations(meta.get("annotations").unwrap_or(&Value::Null), "metadata.annotations"));
    errs.extend(validate_owner_references(
        meta.get("ownerReferences").unwrap_or(&Value::Null),
        "metadata.ownerReferences",
    ));
    errs.extend(validate_finalizers(meta.get("finalizers").unwrap_or(&Value::Null), "metadata.finalizers"));
    errs
}

/// The entries of a string map in key order; a non-object (other than null) is reported.
fn string_map<'a>(v: &'a Value, field: &str, errs: &mut Vec<FieldError>) -> BTreeMap<&'a str, &'a Value> {
    match v {
        Value::Null => BTreeMap::new(),
        Value::Object(m) => m.iter().map(|(k, v)| (k.as_str(), v)).collect(),
        other => {
            errs.push(FieldError::invalid(field, other.clone(), "must be a map of strings"));
            BTreeMap::new()
        }
    }
}

/// `ValidateLabels`: every key a qualified name, every value a label value. Errors are
/// reported on the map's path (not per key), as upstream does.
pub fn validate_labels(labels: &Value, field: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (k, v) in string_map(labels, field, &mut errs) {
        for msg in is_qualified_name(k) {
            errs.push(FieldError::invalid(field, k, msg));
        }
        match v.as_str() {
            Some(value) => {
                for msg in is_valid_label_value(value) {
                    errs.push(FieldError::invalid(field, value, msg));
                }
            }
            None => errs.push(FieldError::invalid(field, v.clone(), "must be a string")),
        }
    }
    errs
}

/// `ValidateAnnotations`: keys are qualified names compared in lower case, and keys plus
/// values may total at most [`TOTAL_ANNOTATION_SIZE_LIMIT_B`] bytes.
pub fn validate_annotations(annotations: &Value, field: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let mut total: usize = 0;
    for (k, v) in string_map(annotations, field, &mut errs) {
        for msg in is_qualified_name(&k.to_lowercase()) {
            errs.push(FieldError::invalid(field, k, msg));
        }
        match v.as_str() {
            Some(value) => total = total.saturating_add(k.len()).saturating_add(value.len()),
            None => errs.push(FieldError::invalid(field, v.clone(), "must be a string")),
        }
    }
    if total > TOTAL_ANNOTATION_SIZE_LIMIT_B {
        errs.push(FieldError::too_long(field, TOTAL_ANNOTATION_SIZE_LIMIT_B as i64));
    }
    errs
}

/// `schema.ParseGroupVersion` then `FromAPIVersionAndKind`: the version part of an
/// `apiVersion`, empty when it does not parse.
fn version_of(api_version: &str) -> (&str, &str) {
    if api_version.is_empty() || api_version == "/" {
        return ("", "");
    }
    match api_version.matches('/').count() {
        0 => ("", api_version),
        1 => api_version.split_once('/').unwrap_or(("", "")),
        _ => ("", ""),
    }
}

/// `ValidateOwnerReferences`. Errors on individual references use the list's path
/// without an index, exactly as upstream reports them.
pub fn validate_owner_references(refs: &Value, field: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let items = match refs {
        Value::Null => return errs,
        Value::Array(items) => items,
        other => {
            errs.push(FieldError::invalid(field, other.clone(), "must be a list"));
            return errs;
        }
    };
    let mut first_controller: Option<String> = None;
    for r in items {
        let text = |key: &str| r.get(key).and_then(Value::as_str).unwrap_or("");
        let (group, version) = version_of(text("apiVersion"));
        if version.is_empty() {
            errs.push(FieldError::invalid(
                format!("{field}.apiVersion"),
                text("apiVersion"),
                "version must not be empty",
            ));
        }
        if text("kind").is_empty() {
            errs.push(FieldError::invalid(format!("{field}.kind"), text("kind"), "kind must not be empty"));
        }
        if text("name").is_empty() {
            errs.push(FieldError::invalid(format!("{field}.name"), text("name"), "name must not be empty"));
        }
        if text("uid").is_empty() {
            errs.push(FieldError::invalid(format!("{field}.uid"), text("uid"), "uid must not be empty"));
        }
        // BannedOwners: core v1 Events may not own anything.
        if group.is_empty() && version == "v1" && text("kind") == "Event" {
            errs.push(FieldError::invalid(field, r.clone(), "/v1, Kind=Event is disallowed from being an owner"));
        }
        if r.get("controller").and_then(Value::as_bool) == Some(true) {
            let current = format!("{}/{}", text("kind"), text("name"));
            match &first_controller {
                Some(first) => errs.push(FieldError::invalid(
                    field,
                    refs.clone(),
                    format!(
                        "Only one reference can have Controller set to true. Found \"true\" in references for {first} and {current}"
                    ),
                )),
                None => first_controller = Some(current),
            }
        }
    }
    errs
}

/// `ValidateFinalizers`: qualified names, and not both `orphan` and `foregroundDeletion`.
pub fn validate_finalizers(finalizers: &Value, field: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let items = match finalizers {
        Value::Null => return errs,
        Value::Array(items) => items,
        other => {
            errs.push(FieldError::invalid(field, other.clone(), "must be a list of strings"));
            return errs;
        }
    };
    let mut orphan = false;
    let mut foreground = false;
    for f in items {
        let Some(name) = f.as_str() else {
            errs.push(FieldError::invalid(field, f.clone(), "must be a string"));
            continue;
        };
        for msg in is_qualified_name(name) {
            errs.push(FieldError::invalid(field, name, msg));
        }
        orphan |= name == FINALIZER_ORPHAN;
        foreground |= name == FINALIZER_FOREGROUND;
    }
    if orphan && foreground {
        errs.push(FieldError::invalid(
            field,
            finalizers.clone(),
            format!("finalizer {FINALIZER_ORPHAN} and {FINALIZER_FOREGROUND} cannot be both set"),
        ));
    }
    errs
}

/// `ValidateNoNewFinalizers`, applied on update when the object is being deleted: a
/// finalizer in `new` that is not in `old` is forbidden.
pub fn validate_finalizers_on_update(old: &[String], new: &[String], deleting: bool) -> Option<FieldError> {
    if !deleting {
        return None;
    }
    let old: BTreeSet<&str> = old.iter().map(String::as_str).collect();
    let extra: BTreeSet<&str> = new.iter().map(String::as_str).filter(|f| !old.contains(f)).collect();
    if extra.is_empty() {
        return None;
    }
    let quoted: Vec<String> = extra.iter().map(|f| go_quote(f)).collect();
    Some(FieldError::forbidden(
        "metadata.finalizers",
        format!(
            "no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
            quoted.join(", ")
        ),
    ))
}

/// `ValidateLabelSelector` on a `metav1.LabelSelector` found at `field` (for example
/// `spec.selector`).
pub fn validate_label_selector(selector: &Value, field: &str) -> Vec<FieldError> {
    if selector.is_null() {
        return Vec::new();
    }
    if !selector.is_object() {
        return vec![FieldError::invalid(field, selector.clone(), "must be an object")];
    }
    label_selector_issues(selector)
        .into_iter()
        .map(|issue| {
            let path = format!("{field}.{}", issue.field);
            match issue.kind {
                SelectorIssueKind::Required => FieldError::required(path, issue.detail),
                SelectorIssueKind::Forbidden => FieldError::forbidden(path, issue.detail),
                SelectorIssueKind::Invalid => {
                    FieldError::invalid(path, issue.bad_value.unwrap_or(Value::Null), issue.detail)
                }
            }
        })
        .collect()
}

/// Removes exact duplicate owner references (same uid and same content), as the
/// registry does on create and update, and returns the warning kube-apiserver sends.
pub fn dedup_owner_references(meta: &mut Value) -> Option<String> {
    let refs = meta.get_mut("ownerReferences")?.as_array_mut()?;
    let mut kept: Vec<Value> = Vec::with_capacity(refs.len());
    let mut seen: BTreeSet<String> = BTreeSet::new();
    let mut duplicates: Vec<String> = Vec::new();
    for r in refs.drain(..) {
        let uid = r.get("uid").and_then(Value::as_str).unwrap_or("").to_owned();
        if seen.insert(uid.clone()) || !kept.contains(&r) {
            kept.push(r);
        } else {
            duplicates.push(uid);
        }
    }
    *refs = kept;
    if duplicates.is_empty() {
        return None;
    }
    Some(format!(
        ".metadata.ownerReferences contains duplicate entries; API server dedups owner references in 1.20+, and may reject such requests as early as 1.24; please fix your requests. Duplicate UIDs: [{}]",
        duplicates.join(", ")
    ))
}

/// What a round trip through `metav1.ObjectMeta` does to submitted metadata: `null`
/// fields, empty `labels`/`annotations`, empty `finalizers`/`ownerReferences`/
/// `managedFields`, empty strings and a zero `generation` are omitted.
pub fn normalize_object_meta(meta: &mut Value) {
    let Some(map) = meta.as_object_mut() else {
        return;
    };
    map.retain(|key, value| match value {
        Value::Null => false,
        Value::Object(m) if key == "labels" || key == "annotations" => !m.is_empty(),
        Value::Array(a) if matches!(key.as_str(), "finalizers" | "ownerReferences" | "managedFields") => !a.is_empty(),
        Value::String(s)
            if matches!(
                key.as_str(),
                "name" | "generateName" | "namespace" | "selfLink" | "uid" | "resourceVersion"
            ) =>
        {
            !s.is_empty()
        }
        Value::Number(n) if key == "generation" => n.as_i64() != Some(0),
        _ => true,
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::FieldErrorKind;
    use serde_json::json;

    /// Renders an error as Go's `field.Error.Error()` does.
    fn render(e: &FieldError) -> String {
        e.message()
    }

    fn messages(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(render).collect()
    }

    const SUBDOMAIN_MSG: &str = r"a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
    const NAME_PART_MSG: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

    fn meta(extra: Value) -> Value {
        let mut m = json!({"name": "a", "namespace": "ns"});
        if let (Some(base), Some(add)) = (m.as_object_mut(), extra.as_object()) {
            for (k, v) in add {
                base.insert(k.clone(), v.clone());
            }
        }
        m
    }

    #[test]
    fn test_reexported_syntax_checks() {
        assert_eq!(is_dns1123_subdomain("Bad_Name"), [SUBDOMAIN_MSG]);
        assert!(is_dns1123_label("ok").is_empty());
        assert!(is_dns1035_label("svc").is_empty());
        assert!(is_qualified_name("example.com/x").is_empty());
        assert!(is_valid_label_value("v").is_empty());
    }

    #[test]
    fn test_valid_metadata_has_no_errors() {
        let m = meta(json!({
            "labels": {"app": "web", "example.com/tier": ""},
            "annotations": {"Example.COM/Note": "anything goes here: {}"},
            "finalizers": ["example.com/cleanup"],
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "d", "uid": "u1", "controller": true}],
            "generation": 1
        }));
        assert!(validate_object_meta(&m, true, NameRule::Dns1123Subdomain).is_empty());
    }

    #[test]
    fn test_missing_name_requires_name_or_generate_name() {
        let errs = validate_object_meta(&json!({"namespace": "ns"}), true, NameRule::Dns1123Subdomain);
        assert_eq!(messages(&errs), ["metadata.name: Required value: name or generateName is required"]);
        assert_eq!(errs[0].kind, FieldErrorKind::Required);
    }

    #[test]
    fn test_invalid_name_reports_subdomain_message() {
        let errs =
            validate_object_meta(&json!({"name": "Foo_Bar", "namespace": "ns"}), true, NameRule::Dns1123Subdomain);
        assert_eq!(messages(&errs), [format!("metadata.name: Invalid value: \"Foo_Bar\": {SUBDOMAIN_MSG}")]);
        assert_eq!(errs[0].bad_value, Some(json!("Foo_Bar")));
    }

    #[test]
    fn test_generate_name_may_end_with_dash() {
        let m = json!({"generateName": "web-", "name": "web-x7k2p", "namespace": "ns"});
        assert!(validate_object_meta(&m, true, NameRule::Dns1123Subdomain).is_empty());
        let m = json!({"generateName": "Web-", "name": "web-x7k2p", "namespace": "ns"});
        assert_eq!(
            messages(&validate_object_meta(&m, true, NameRule::Dns1123Subdomain)),
            [format!("metadata.generateName: Invalid value: \"Web-\": {SUBDOMAIN_MSG}")]
        );
    }

    #[test]
    fn test_name_rules() {
        assert_eq!(NameRule::Dns1123Label.validate("a.b", false), ["must not contain dots"]);
        assert!(NameRule::Dns1123Label.validate("ab-", true).is_empty());
        assert!(!NameRule::Dns1035Label.validate("1svc", false).is_empty());
        assert!(NameRule::Dns1035Label.validate("svc-", true).is_empty());
        assert!(NameRule::PathSegment.validate("Any_Thing:1", false).is_empty());
        assert_eq!(NameRule::PathSegment.validate("..", false), ["may not be '..'"]);
        assert_eq!(NameRule::PathSegment.validate(".", false), ["may not be '.'"]);
        assert_eq!(NameRule::PathSegment.validate("a/b%c", false), ["may not contain '/'", "may not contain '%'"]);
        assert!(NameRule::PathSegment.validate("..", true).is_empty());
        assert_eq!(NameRule::PathSegment.validate("a/", true), ["may not contain '/'"]);
    }

    #[test]
    fn test_mask_trailing_dash_mirrors_upstream() {
        assert_eq!(mask_trailing_dash("abc-"), "aba");
        assert_eq!(mask_trailing_dash("-"), "-");
        assert_eq!(mask_trailing_dash("abc"), "abc");
        assert_eq!(mask_trailing_dash("aé-"), "aa");
    }

    #[test]
    fn test_namespace_rules() {
        let errs = validate_object_meta(&json!({"name": "a"}), true, NameRule::Dns1123Subdomain);
        assert_eq!(messages(&errs), ["metadata.namespace: Required value"]);
        let errs = validate_object_meta(&json!({"name": "a", "namespace": "a.b"}), true, NameRule::Dns1123Subdomain);
        assert_eq!(messages(&errs), ["metadata.namespace: Invalid value: \"a.b\": must not contain dots"]);
        let errs = validate_object_meta(&json!({"name": "a", "namespace": "ns"}), false, NameRule::Dns1123Subdomain);
        assert_eq!(messages(&errs), ["metadata.namespace: Forbidden: not allowed on this type"]);
        assert!(validate_object_meta(&json!({"name": "a"}), false, NameRule::Dns1123Subdomain).is_empty());
    }

    #[test]
    fn test_negative_generation() {
        let errs = validate_object_meta(&meta(json!({"generation": -1})), true, NameRule::Dns1123Subdomain);
        assert_eq!(messages(&errs), ["metadata.generation: Invalid value: -1: must be greater than or equal to 0"]);
    }

    #[test]
    fn test_label_key_and_value_errors() {
        let errs = validate_object_meta(
            &meta(json!({"labels": {"a b": "ok", "k": "bad value"}})),
            true,
            NameRule::Dns1123Subdomain,
        );
        assert_eq!(
            messages(&errs),
            [
                format!("metadata.labels: Invalid value: \"a b\": {NAME_PART_MSG}"),
                "metadata.labels: Invalid value: \"bad value\": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')".to_owned(),
            ]
        );
    }

    #[test]
    fn test_labels_of_wrong_shape() {
        assert_eq!(
            messages(&validate_labels(&json!(["a"]), "metadata.labels")),
            ["metadata.labels: Invalid value: [\"a\"]: must be a map of strings"]
        );
        assert_eq!(
            messages(&validate_labels(&json!({"a": 1}), "metadata.labels")),
            ["metadata.labels: Invalid value: 1: must be a string"]
        );
    }

    #[test]
    fn test_annotation_keys_are_case_insensitive_but_must_be_qualified() {
        assert!(validate_annotations(&json!({"Example.com/Key": "v"}), "metadata.annotations").is_empty());
        assert_eq!(
            messages(&validate_annotations(&json!({"a b": "v"}), "metadata.annotations")),
            [format!("metadata.annotations: Invalid value: \"a b\": {NAME_PART_MSG}")]
        );
    }

    #[test]
    fn test_annotations_too_long() {
        let big = "x".repeat(TOTAL_ANNOTATION_SIZE_LIMIT_B);
        let errs = validate_object_meta(&meta(json!({"annotations": {"k": big}})), true, NameRule::Dns1123Subdomain);
        assert_eq!(messages(&errs), ["metadata.annotations: Too long: may not be more than 262144 bytes"]);
        assert_eq!(errs[0].kind, FieldErrorKind::TooLong);
        let fits = "x".repeat(TOTAL_ANNOTATION_SIZE_LIMIT_B - 1);
        assert!(validate_annotations(&json!({"k": fits}), "metadata.annotations").is_empty());
    }

    #[test]
    fn test_owner_reference_required_fields() {
        let errs = validate_owner_references(&json!([{"controller": false}]), "metadata.ownerReferences");
        assert_eq!(
            messages(&errs),
            [
                "metadata.ownerReferences.apiVersion: Invalid value: \"\": version must not be empty",
                "metadata.ownerReferences.kind: Invalid value: \"\": kind must not be empty",
                "metadata.ownerReferences.name: Invalid value: \"\": name must not be empty",
                "metadata.ownerReferences.uid: Invalid value: \"\": uid must not be empty",
            ]
        );
        let errs = validate_owner_references(
            &json!([{"apiVersion": "apps/", "kind": "K", "name": "n", "uid": "u"}]),
            "metadata.ownerReferences",
        );
        assert_eq!(
            messages(&errs),
            ["metadata.ownerReferences.apiVersion: Invalid value: \"apps/\": version must not be empty"]
        );
        let errs = validate_owner_references(
            &json!([{"apiVersion": "a/b/c", "kind": "K", "name": "n", "uid": "u"}]),
            "metadata.ownerReferences",
        );
        assert_eq!(errs.len(), 1);
    }

    #[test]
    fn test_only_one_controller_owner() {
        let refs = json!([
            {"apiVersion": "v1", "kind": "Foo", "name": "a", "uid": "1", "controller": true},
            {"apiVersion": "v1", "kind": "Bar", "name": "b", "uid": "2", "controller": true}
        ]);
        let errs = validate_object_meta(&meta(json!({"ownerReferences": refs})), true, NameRule::Dns1123Subdomain);
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].field, "metadata.ownerReferences");
        assert_eq!(
            errs[0].detail,
            "Only one reference can have Controller set to true. Found \"true\" in references for Foo/a and Bar/b"
        );
        assert_eq!(errs[0].bad_value, Some(refs));
    }

    #[test]
    fn test_event_cannot_be_owner() {
        let r = json!({"apiVersion": "v1", "kind": "Event", "name": "e", "uid": "1"});
        let errs = validate_owner_references(&json!([r.clone()]), "metadata.ownerReferences");
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].detail, "/v1, Kind=Event is disallowed from being an owner");
        assert_eq!(errs[0].bad_value, Some(r));
        let ok = json!([{"apiVersion": "events.k8s.io/v1", "kind": "Event", "name": "e", "uid": "1"}]);
        assert!(validate_owner_references(&ok, "metadata.ownerReferences").is_empty());
    }

    #[test]
    fn test_finalizer_names_and_conflict() {
        let errs = validate_object_meta(
            &meta(json!({"finalizers": ["a/b/c", "kubernetes", "example.com/x"]})),
            true,
            NameRule::Dns1123Subdomain,
        );
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].field, "metadata.finalizers");
        assert_eq!(errs[0].bad_value, Some(json!("a/b/c")));
        let errs = validate_finalizers(&json!(["orphan", "foregroundDeletion"]), "metadata.finalizers");
        assert_eq!(
            messages(&errs),
            [
                "metadata.finalizers: Invalid value: [\"orphan\",\"foregroundDeletion\"]: finalizer orphan and foregroundDeletion cannot be both set"
            ]
        );
        assert_eq!(
            messages(&validate_finalizers(&json!([1]), "metadata.finalizers")),
            ["metadata.finalizers: Invalid value: 1: must be a string"]
        );
    }

    #[test]
    fn test_no_new_finalizers_while_deleting() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let e = validate_finalizers_on_update(&s(&["a"]), &s(&["a", "x"]), true).unwrap();
        assert_eq!(
            render(&e),
            "metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{\"x\"}"
        );
        let e = validate_finalizers_on_update(&s(&[]), &s(&["b", "a"]), true).unwrap();
        assert_eq!(
            e.detail,
            "no new finalizers can be added if the object is being deleted, found new finalizers []string{\"a\", \"b\"}"
        );
    }

    #[test]
    fn test_finalizers_may_change_when_not_deleting_or_only_removed() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert!(validate_finalizers_on_update(&s(&["a"]), &s(&["a", "x"]), false).is_none());
        assert!(validate_finalizers_on_update(&s(&["a", "b"]), &s(&["b"]), true).is_none());
        assert!(validate_finalizers_on_update(&s(&["a"]), &s(&["a", "a"]), true).is_none());
    }

    #[test]
    fn test_validate_label_selector_paths() {
        let errs = validate_label_selector(
            &json!({"matchLabels": {"a": "b c"}, "matchExpressions": [{"key": "k", "operator": "In"}]}),
            "spec.selector",
        );
        assert_eq!(errs.len(), 2);
        assert_eq!(errs[0].field, "spec.selector.matchLabels");
        assert_eq!(errs[0].kind, FieldErrorKind::Invalid);
        assert_eq!(
            render(&errs[1]),
            "spec.selector.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'"
        );
        assert!(validate_label_selector(&json!(null), "spec.selector").is_empty());
        assert!(validate_label_selector(&json!({}), "spec.selector").is_empty());
        assert_eq!(validate_label_selector(&json!(1), "spec.selector").len(), 1);
    }

    #[test]
    fn test_dedup_owner_references_drops_exact_duplicates_and_warns() {
        let a = json!({"apiVersion": "v1", "kind": "A", "name": "a", "uid": "u1"});
        let a2 = json!({"apiVersion": "v1", "kind": "A", "name": "renamed", "uid": "u1"});
        let mut m = json!({"ownerReferences": [a.clone(), a.clone(), a2.clone(), a.clone()]});
        let warning = dedup_owner_references(&mut m).unwrap();
        assert_eq!(m["ownerReferences"], json!([a, a2]));
        assert_eq!(
            warning,
            ".metadata.ownerReferences contains duplicate entries; API server dedups owner references in 1.20+, and may reject such requests as early as 1.24; please fix your requests. Duplicate UIDs: [u1, u1]"
        );
        let mut clean = json!({"ownerReferences": [{"uid": "x"}]});
        assert!(dedup_owner_references(&mut clean).is_none());
        assert!(dedup_owner_references(&mut json!({})).is_none());
    }

    #[test]
    fn test_normalize_object_meta_drops_empty_fields() {
        let mut m = json!({
            "name": "a", "namespace": "", "labels": {}, "annotations": {"k": "v"}, "finalizers": [],
            "ownerReferences": [], "managedFields": [], "generation": 0, "deletionTimestamp": null, "uid": "u"
        });
        normalize_object_meta(&mut m);
        assert_eq!(m, json!({"name": "a", "annotations": {"k": "v"}, "uid": "u"}));
        let mut kept = json!({"generation": 2, "finalizers": ["f"], "labels": {"a": "b"}});
        normalize_object_meta(&mut kept);
        assert_eq!(kept, json!({"generation": 2, "finalizers": ["f"], "labels": {"a": "b"}}));
    }

    #[test]
    fn test_metadata_of_wrong_shape() {
        let errs = validate_object_meta(&json!("x"), true, NameRule::Dns1123Subdomain);
        assert_eq!(messages(&errs), ["metadata: Invalid value: \"x\": must be an object"]);
        let errs = validate_object_meta(&json!({"name": 5, "namespace": "ns"}), true, NameRule::Dns1123Subdomain);
        assert_eq!(
            messages(&errs),
            [
                "metadata.name: Invalid value: 5: must be a string",
                "metadata.name: Required value: name or generateName is required"
            ]
        );
    }
}

//! Compile-time checks of a CRD version's `openAPIV3Schema`, as apiextensions' CRD validation
//! runs them on create and update (with the options of a `v1` CRD: structural schema
//! required, valid types required, defaults allowed and required to be pruned, atomic set
//! items, map-list keys required or defaulted).
//!
//! The errors come in upstream's order and wording:
//!
//! 1. the structural-schema invariants (`schema.ValidateStructural`: non-empty `type` except
//!    for int-or-string and preserve-unknown-fields nodes, `items` for arrays, no
//!    `additionalProperties` at the root, restricted root `metadata`, nothing but value
//!    validations inside `allOf`/`anyOf`/`oneOf`/`not`, every property they mention also
//!    specified outside of them, compiling `pattern`s), sorted by message as upstream sorts
//!    them; or, when those pass, the checks of the `default`s (they must validate against their
//!    schema and carry no unknown fields);
//! 2. the OpenAPI checks (`ValidateCustomResourceDefinitionOpenAPISchema`: supported types, no
//!    `$ref`/`definitions`/`dependencies`/`patternProperties`/`additionalItems`/`id`, no
//!    `uniqueItems`, `properties` and `additionalProperties` mutually exclusive, no defaults
//!    in the root `metadata`/`apiVersion`/`kind`, the list- and map-type extensions, the
//!    static parts of `x-kubernetes-validations` and that their CEL compiles);
//! 3. only if nothing else failed, why the schema could not be made structural at all.
//!
//! CEL rules are not type-checked, and the status-subresource restrictions on the root schema are
//! left to the caller, which knows the subresources.

use std::collections::{BTreeMap, HashSet};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool, JSONSchemaPropsOrStringArray,
};
use serde_json::Value;

use super::field_error::{FieldError, FieldPath};
use super::node::{MAX_DEPTH, Node};
use super::{prune, validate};

const META_FIELDS: [&str; 3] = ["metadata", "kind", "apiVersion"];
const OPENAPI_V3_TYPES: [&str; 6] = ["array", "boolean", "integer", "number", "object", "string"];

/// Compile `props`, the schema found at `base` in the CRD.
pub(crate) fn compile(props: &JSONSchemaProps, base: &FieldPath) -> Result<Node, Vec<FieldError>> {
    let mut build_errors = Vec::new();
    let node = Node::build(props, base, 0, &mut build_errors);

    let mut openapi = Vec::new();
    if props.nullable == Some(true) {
        openapi.push(FieldError::forbidden(base.child("nullable").as_field(), "nullable cannot be true at the root"));
    }
    check_openapi(props, base, &Ssv::root(), true, &mut openapi, 0);

    let mut errors = Vec::new();
    let mut init_errors = Vec::new();
    match structural_init_error(props, 0) {
        Some(msg) => init_errors.push(FieldError::invalid(base.as_field(), "", msg)),
        None => {
            let mut structural = build_errors;
            check_structural(&node, Level::Root, base, &mut structural);
            check_completeness(&node, base, &mut structural);
            structural.sort_by_cached_key(FieldError::message);
            if structural.is_empty() {
                check_defaults(&node, base, &mut errors, 0);
            } else {
                errors.extend(structural);
            }
        }
    }
    errors.extend(openapi);
    if errors.is_empty() {
        errors.extend(init_errors);
    }
    if errors.is_empty() { Ok(node) } else { Err(errors) }
}

// ---------------------------------------------------------------------------------------------
// OpenAPI checks (ValidateCustomResourceDefinitionOpenAPISchema + specStandardValidatorV3)
// ---------------------------------------------------------------------------------------------

/// `specStandardValidatorV3`'s context.
#[derive(Clone)]
struct Ssv {
    allow_defaults: bool,
    disallow_defaults_reason: String,
    inside_resource_meta: bool,
}

impl Ssv {
    fn root() -> Self {
        Ssv { allow_defaults: true, disallow_defaults_reason: String::new(), inside_resource_meta: false }
    }

    fn with_forbidden_defaults(&self, reason: String) -> Self {
        Ssv { allow_defaults: false, disallow_defaults_reason: reason, ..self.clone() }
    }

    fn with_inside_resource_meta(&self) -> Self {
        Ssv { inside_resource_meta: true, ..self.clone() }
    }

    fn validate(&self, s: &JSONSchemaProps, path: &FieldPath, errs: &mut Vec<FieldError>) {
        let field = |name: &str| path.child(name).as_field();
        let type_ = s.type_.as_deref().unwrap_or("");
        if !type_.is_empty() && !OPENAPI_V3_TYPES.contains(&type_) {
            errs.push(FieldError::not_supported(field("type"), type_, &OPENAPI_V3_TYPES));
        }
        if s.default.is_some() && !self.allow_defaults {
            let mut detail = "must not be set".to_string();
            if !self.disallow_defaults_reason.is_empty() {
                detail.push(' ');
                detail.push_str(&self.disallow_defaults_reason);
            }
            errs.push(FieldError::forbidden(field("default"), detail));
        }
        if s.id.as_deref().is_some_and(|id| !id.is_empty()) {
            errs.push(FieldError::forbidden(field("id"), "id is not supported"));
        }
        if s.additional_items.is_some() {
            errs.push(FieldError::forbidden(field("additionalItems"), "additionalItems is not supported"));
        }
        if s.pattern_properties.as_ref().is_some_and(|p| !p.is_empty()) {
            errs.push(FieldError::forbidden(field("patternProperties"), "patternProperties is not supported"));
        }
        if s.definitions.as_ref().is_some_and(|d| !d.is_empty()) {
            errs.push(FieldError::forbidden(field("definitions"), "definitions is not supported"));
        }
        if s.dependencies.is_some() {
            errs.push(FieldError::forbidden(field("dependencies"), "dependencies is not supported"));
        }
        if s.ref_path.is_some() {
            errs.push(FieldError::forbidden(field("$ref"), "$ref is not supported"));
        }
        if type_ == "null" {
            errs.push(FieldError::forbidden(
                field("type"),
                "type cannot be set to null, use nullable as an alternative",
            ));
        }
        if matches!(&s.items, Some(JSONSchemaPropsOrArray::Schemas(list)) if !list.is_empty()) {
            errs.push(FieldError::forbidden(field("items"), "items must be a schema object and not an array"));
        }
        if self.inside_resource_meta && s.x_kubernetes_embedded_resource == Some(true) {
            errs.push(FieldError::forbidden(
                field("x-kubernetes-embedded-resource"),
                "must not be used inside of resource meta",
            ));
        }
    }
}

fn check_openapi(
    s: &JSONSchemaProps,
    path: &FieldPath,
    ssv: &Ssv,
    is_root: bool,
    errs: &mut Vec<FieldError>,
    depth: usize,
) {
    if depth > MAX_DEPTH {
        return;
    }
    let field = |name: &str| path.child(name).as_field();
    let recurse = |sub: &JSONSchemaProps, p: FieldPath, ssv: &Ssv, errs: &mut Vec<FieldError>| {
        check_openapi(sub, &p, ssv, false, errs, depth + 1);
    };
    ssv.validate(s, path, errs);

    if s.unique_items == Some(true) {
        errs.push(FieldError::forbidden(
            field("uniqueItems"),
            "uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
        ));
    }

    let properties = s.properties.as_ref();
    if let Some(ap) = &s.additional_properties {
        // Properties are for structs, additionalProperties for maps: mixing them contradicts
        // the API conventions on unknown fields.
        let non_trivial = !matches!(ap, JSONSchemaPropsOrBool::Bool(true));
        if properties.is_some_and(|p| !p.is_empty()) && non_trivial {
            errs.push(FieldError::forbidden(
                field("additionalProperties"),
                "additionalProperties and properties are mutual exclusive",
            ));
        }
        let sub = if ssv.inside_resource_meta {
            // Pruning without an actual value would be ambiguous.
            ssv.with_forbidden_defaults("inside additionalProperties applying to object metadata".to_string())
        } else {
            ssv.clone()
        };
        if let JSONSchemaPropsOrBool::Schema(schema) = ap {
            recurse(schema, path.child("additionalProperties"), &sub, errs);
        }
    }

    for (name, prop) in properties.into_iter().flatten() {
        let mut sub = ssv.clone();
        if (is_root || s.x_kubernetes_embedded_resource == Some(true)) && META_FIELDS.contains(&name.as_str()) {
            sub = sub.with_inside_resource_meta();
            if is_root {
                sub = sub.with_forbidden_defaults(format!("in top-level {name}"));
            }
        }
        recurse(prop, path.child("properties").key(name), &sub, errs);
    }

    if let Some(not) = &s.not {
        recurse(not, path.child("not"), ssv, errs);
    }
    for (name, list) in [("allOf", &s.all_of), ("oneOf", &s.one_of), ("anyOf", &s.any_of)] {
        for (i, sub) in list.iter().flatten().enumerate() {
            recurse(sub, path.child(name).index(i), ssv, errs);
        }
    }
    for (name, sub) in s.definitions.iter().flatten() {
        recurse(sub, path.child("definitions").key(name), ssv, errs);
    }
    match &s.items {
        Some(JSONSchemaPropsOrArray::Schema(item)) => recurse(item, path.child("items"), ssv, errs),
        Some(JSONSchemaPropsOrArray::Schemas(list)) => {
            for (i, item) in list.iter().enumerate() {
                recurse(item, path.child("items").index(i), ssv, errs);
            }
        }
        None => {}
    }
    for (name, dep) in s.dependencies.iter().flatten() {
        if let JSONSchemaPropsOrStringArray::Schema(sub) = dep {
            recurse(sub, path.child("dependencies").key(name), ssv, errs);
        }
    }

    if s.x_kubernetes_preserve_unknown_fields == Some(false) {
        errs.push(FieldError::invalid(
            field("x-kubernetes-preserve-unknown-fields"),
            false,
            "must be true or undefined",
        ));
    }

    check_map_and_list_types(s, path, errs);
    check_validation_rules(s, path, errs);
}

fn check_map_and_list_types(s: &JSONSchemaProps, path: &FieldPath, errs: &mut Vec<FieldError>) {
    let field = |name: &str| path.child(name).as_field();
    let type_ = s.type_.as_deref().unwrap_or("");
    let type_error = |detail: &str| {
        if type_.is_empty() {
            FieldError::required(field("type"), detail)
        } else {
            FieldError::invalid(field("type"), type_, detail)
        }
    };

    if let Some(map_type) = &s.x_kubernetes_map_type {
        if type_ != "object" {
            errs.push(type_error("must be object if x-kubernetes-map-type is specified"));
        }
        if map_type != "atomic" && map_type != "granular" {
            errs.push(FieldError::not_supported(
                field("x-kubernetes-map-type"),
                map_type.as_str(),
                &["atomic", "granular"],
            ));
        }
    }

    let list_type = s.x_kubernetes_list_type.as_deref();
    let item = match &s.items {
        Some(JSONSchemaPropsOrArray::Schema(item)) => Some(item.as_ref()),
        _ => None,
    };
    if list_type.is_some() && type_ != "array" {
        errs.push(type_error("must be array if x-kubernetes-list-type is specified"));
    } else if list_type == Some("set")
        && let Some(item) = item
    {
        match item.type_.as_deref() {
            Some("array") => {
                if let Some(lt) = item.x_kubernetes_list_type.as_deref().filter(|lt| *lt != "atomic") {
                    errs.push(FieldError::invalid(
                        path.child("items").child("x-kubernetes-list-type").as_field(),
                        lt,
                        "must be atomic as item of a list with x-kubernetes-list-type=set",
                    ));
                }
            }
            Some("object") if item.x_kubernetes_map_type.as_deref() != Some("atomic") => {
                // Upstream reports the item's list type (usually unset) as the value.
                let value = item.x_kubernetes_list_type.clone().map_or(Value::Null, Value::String);
                errs.push(FieldError::invalid(
                    path.child("items").child("x-kubernetes-map-type").as_field(),
                    value,
                    "must be atomic as item of a list with x-kubernetes-list-type=set",
                ));
            }
            _ => {}
        }
    }
    if let Some(lt) = list_type
        && !["atomic", "set", "map"].contains(&lt)
    {
        errs.push(FieldError::not_supported(field("x-kubernetes-list-type"), lt, &["atomic", "set", "map"]));
    }

    let keys = s.x_kubernetes_list_map_keys.as_deref().unwrap_or_default();
    if !keys.is_empty() {
        match list_type {
            None => errs.push(FieldError::required(
                field("x-kubernetes-list-type"),
                "must be map if x-kubernetes-list-map-keys is non-empty",
            )),
            Some("map") => {}
            Some(other) => errs.push(FieldError::invalid(
                field("x-kubernetes-list-type"),
                other,
                "must be map if x-kubernetes-list-map-keys is non-empty",
            )),
        }
    }

    if list_type == Some("map") {
        if keys.is_empty() {
            errs.push(FieldError::required(
                field("x-kubernetes-list-map-keys"),
                "must not be empty if x-kubernetes-list-type is map",
            ));
        }
        match &s.items {
            None => {
                errs.push(FieldError::required(field("items"), "must have a schema if x-kubernetes-list-type is map"))
            }
            Some(items @ JSONSchemaPropsOrArray::Schemas(_)) => errs.push(FieldError::invalid(
                field("items"),
                serde_json::to_value(items).unwrap_or(Value::Null),
                "must only have a single schema if x-kubernetes-list-type is map",
            )),
            Some(JSONSchemaPropsOrArray::Schema(item)) => {
                let item_type = item.type_.as_deref().unwrap_or("");
                if item_type != "object" {
                    errs.push(FieldError::invalid(
                        path.child("items").child("type").as_field(),
                        item_type,
                        "must be object if parent array's x-kubernetes-list-type is map",
                    ));
                } else {
                    let mut seen = HashSet::new();
                    let keys_value = Value::from(keys.to_vec());
                    for k in keys {
                        match item.properties.as_ref().and_then(|p| p.get(k)) {
                            Some(prop) => {
                                if matches!(prop.type_.as_deref(), Some("array" | "object")) {
                                    // Upstream reports the item's type as the value.
                                    errs.push(FieldError::invalid(
                                        path.child("items").child("properties").key(k).child("type").as_field(),
                                        item_type,
                                        "must be a scalar type if parent array's x-kubernetes-list-type is map",
                                    ));
                                }
                            }
                            None => errs.push(FieldError::invalid(
                                field("x-kubernetes-list-map-keys"),
                                keys_value.clone(),
                                "entries must all be names of item properties",
                            )),
                        }
                        if !seen.insert(k.as_str()) {
                            errs.push(FieldError::invalid(
                                field("x-kubernetes-list-map-keys"),
                                keys_value.clone(),
                                "must not contain duplicate entries",
                            ));
                        }
                    }
                }
            }
        }
    }

    // validateMapListKeysMapSet
    if let (Some(item), Some(lt @ ("set" | "map"))) = (item, list_type) {
        if item.nullable == Some(true) {
            errs.push(FieldError::forbidden(
                path.child("items").child("nullable").as_field(),
                format!("cannot be nullable when x-kubernetes-list-type is {lt}"),
            ));
        }
        if lt == "map" {
            let required = item.required.as_deref().unwrap_or_default();
            for k in keys {
                let Some(prop) = item.properties.as_ref().and_then(|p| p.get(k)) else {
                    continue;
                };
                let prop_path = path.child("items").child("properties").key(k);
                if !required.contains(k) && prop.default.is_none() {
                    errs.push(FieldError::required(
                        prop_path.child("default").as_field(),
                        "this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property",
                    ));
                }
                if prop.nullable == Some(true) {
                    errs.push(FieldError::forbidden(
                        prop_path.child("nullable").as_field(),
                        "this property is in x-kubernetes-list-map-keys, so it cannot be nullable",
                    ));
                }
            }
        }
    }
}

/// The checks of `x-kubernetes-validations` rules at CRD creation: their shape, and that their
/// CEL compiles.
fn check_validation_rules(s: &JSONSchemaProps, path: &FieldPath, errs: &mut Vec<FieldError>) {
    const REASONS: [&str; 4] =
        ["FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid", "FieldValueRequired"];
    let has_newlines = |t: &str| t.contains(['\n', '\r']);
    for (i, rule) in s.x_kubernetes_validations.iter().flatten().enumerate() {
        let p = path.child("x-kubernetes-validations").index(i);
        let trimmed_rule = rule.rule.trim();
        let message = rule.message.as_deref().unwrap_or("");
        let trimmed_msg = message.trim();
        if trimmed_rule.is_empty() {
            errs.push(FieldError::required(p.child("rule").as_field(), "rule is not specified"));
        } else if !message.is_empty() && trimmed_msg.is_empty() {
            errs.push(FieldError::invalid(
                p.child("message").as_field(),
                message,
                "message must be non-empty if specified",
            ));
        } else if has_newlines(trimmed_msg) {
            errs.push(FieldError::invalid(
                p.child("message").as_field(),
                message,
                "message must not contain line breaks",
            ));
        } else if has_newlines(trimmed_rule) && trimmed_msg.is_empty() {
            errs.push(FieldError::required(
                p.child("message").as_field(),
                "message must be specified if rule contains line breaks",
            ));
        }
        if !trimmed_rule.is_empty()
            && let Some(why) = super::cel::compile_error(&rule.rule)
        {
            errs.push(FieldError::invalid(p.child("rule").as_field(), rule.rule.as_str(), why));
        }
        let expr = rule.message_expression.as_deref().unwrap_or("");
        if !expr.is_empty() && expr.trim().is_empty() {
            errs.push(FieldError::required(
                p.child("messageExpression").as_field(),
                "messageExpression must be non-empty if specified",
            ));
        }
        if let Some(reason) = &rule.reason
            && !REASONS.contains(&reason.as_str())
        {
            errs.push(FieldError::not_supported(p.child("reason").as_field(), reason.as_str(), &REASONS));
        }
        let field_path = rule.field_path.as_deref().unwrap_or("");
        if !field_path.is_empty() && field_path.trim().is_empty() {
            errs.push(FieldError::invalid(
                p.child("fieldPath").as_field(),
                field_path,
                "fieldPath must be non-empty if specified",
            ));
        }
        if has_newlines(field_path) {
            errs.push(FieldError::invalid(
                p.child("fieldPath").as_field(),
                field_path,
                "fieldPath must not contain line breaks",
            ));
        }
    }
}

/// Why `NewStructural` would fail, if it would.
fn structural_init_error(s: &JSONSchemaProps, depth: usize) -> Option<String> {
    if depth > MAX_DEPTH {
        return None;
    }
    if s.id.as_deref().is_some_and(|id| !id.is_empty()) {
        return Some("id is unsupported".to_string());
    }
    if s.schema.as_deref().is_some_and(|x| !x.is_empty()) {
        return Some("$schema is unsupported".to_string());
    }
    if s.ref_path.as_deref().is_some_and(|x| !x.is_empty()) {
        return Some("$ref is unsupported".to_string());
    }
    if s.definitions.as_ref().is_some_and(|d| !d.is_empty()) {
        return Some("definitions is unsupported".to_string());
    }
    if s.additional_items.is_some() {
        return Some("additionalItems cannot be set".to_string());
    }
    if s.pattern_properties.as_ref().is_some_and(|p| !p.is_empty()) {
        return Some("patternProperties is unsupported".to_string());
    }
    if s.dependencies.as_ref().is_some_and(|d| !d.is_empty()) {
        return Some("dependencies is unsupported".to_string());
    }
    let mut children: Vec<&JSONSchemaProps> = Vec::new();
    match &s.items {
        Some(JSONSchemaPropsOrArray::Schemas(list)) if !list.is_empty() => {
            return Some("items must be a schema object and not an array".to_string());
        }
        Some(JSONSchemaPropsOrArray::Schema(item)) => children.push(item),
        _ => {}
    }
    if let Some(JSONSchemaPropsOrBool::Schema(ap)) = &s.additional_properties {
        children.push(ap);
    }
    children.extend(s.properties.iter().flat_map(BTreeMap::values));
    children.extend(s.all_of.iter().flatten());
    children.extend(s.any_of.iter().flatten());
    children.extend(s.one_of.iter().flatten());
    children.extend(s.not.as_deref());
    children.into_iter().find_map(|c| structural_init_error(c, depth + 1))
}

// ---------------------------------------------------------------------------------------------
// Structural invariants (schema.ValidateStructural)
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
    Root,
    Item,
    Field,
}

fn check_structural(s: &Node, lvl: Level, path: &FieldPath, errs: &mut Vec<FieldError>) {
    let field = |name: &str| path.child(name).as_field();
    let type_ = s.type_.as_deref().unwrap_or("");

    if type_ == "array" && s.items.is_none() {
        errs.push(FieldError::required(field("items"), "must be specified"));
    }
    if let Some(items) = &s.items {
        check_structural(items, Level::Item, &path.child("items"), errs);
    }
    for (k, p) in &s.properties {
        check_structural(p, Level::Field, &path.child("properties").key(k), errs);
    }
    if let Some(ap) = &s.additional {
        if lvl == Level::Root {
            errs.push(FieldError::forbidden(field("additionalProperties"), "must not be used at the root"));
        }
        if let super::node::Additional::Schema(ap) = ap {
            check_structural(ap, Level::Field, &path.child("additionalProperties"), errs);
        }
    }

    if s.int_or_string && s.preserve_unknown_fields {
        errs.push(FieldError::invalid(
            field("x-kubernetes-preserve-unknown-fields"),
            true,
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    if s.int_or_string && s.embedded_resource {
        errs.push(FieldError::invalid(
            field("x-kubernetes-embedded-resource"),
            true,
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }

    let skip_any_of = is_int_or_string_any_of(&s.any_of);
    let skip_first_all_of_any_of = s.all_of.first().is_some_and(|first| is_int_or_string_any_of(&first.any_of));
    check_value_validation(s, skip_any_of, skip_first_all_of_any_of, lvl, path, errs);

    let check_metadata = lvl == Level::Root || s.embedded_resource;
    if s.embedded_resource && type_ != "object" {
        let detail = "must be object if x-kubernetes-embedded-resource is true";
        errs.push(if type_.is_empty() {
            FieldError::required(field("type"), detail)
        } else {
            FieldError::invalid(field("type"), type_, detail)
        });
    } else if type_.is_empty() && !s.int_or_string && !s.preserve_unknown_fields {
        let detail = match lvl {
            Level::Root => "must not be empty at the root",
            Level::Item => "must not be empty for specified array items",
            Level::Field => "must not be empty for specified object fields",
        };
        errs.push(FieldError::required(field("type"), detail));
    }
    if s.embedded_resource && s.additional.is_some() {
        errs.push(FieldError::forbidden(
            field("additionalProperties"),
            "must not be used if x-kubernetes-embedded-resource is set",
        ));
    }
    if lvl == Level::Root && !type_.is_empty() && type_ != "object" {
        errs.push(FieldError::invalid(field("type"), type_, "must be object at the root"));
    }
    for key in ["kind", "apiVersion"] {
        if let Some(p) = s.properties.get(key)
            && check_metadata
            && p.type_.as_deref() != Some("string")
        {
            errs.push(FieldError::invalid(
                path.child("properties").key(key).child("type").as_field(),
                p.type_.clone().unwrap_or_default(),
                "must be string",
            ));
        }
    }
    if let Some(meta) = s.properties.get("metadata") {
        check_metadata_invariants(meta, check_metadata, lvl, &path.child("properties").key("metadata"), errs);
    }
    if s.embedded_resource && !s.preserve_unknown_fields && s.properties.is_empty() {
        errs.push(FieldError::required(
            field("properties"),
            "must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields",
        ));
    }
}

fn check_metadata_invariants(s: &Node, check_metadata: bool, lvl: Level, path: &FieldPath, errs: &mut Vec<FieldError>) {
    if check_metadata && s.type_.as_deref() != Some("object") {
        errs.push(FieldError::invalid(
            path.child("type").as_field(),
            s.type_.clone().unwrap_or_default(),
            "must be object",
        ));
    }
    if lvl == Level::Root {
        // Only `name` and `generateName` may be restricted; type and default are ignored.
        let has_name = s.properties.contains_key("name");
        let has_generate_name = s.properties.contains_key("generateName");
        let only_names = (has_name && has_generate_name && s.properties.len() == 2)
            || ((has_name || has_generate_name) && s.properties.len() == 1);
        let other_properties = !s.properties.is_empty() && !only_names;
        if other_properties || has_anything_but_type_and_default(s) {
            errs.push(FieldError::forbidden(
                path.as_field(),
                "must not specify anything other than name and generateName, but metadata is implicitly specified",
            ));
        }
    }
}

/// Whether a node sets anything besides `type`, `default` and `properties`.
fn has_anything_but_type_and_default(s: &Node) -> bool {
    s.int_or_string
        || s.nullable
        || s.format.is_some()
        || s.has_title
        || s.has_description
        || s.additional.is_some()
        || s.items.is_some()
        || s.preserve_unknown_fields
        || s.embedded_resource
        || s.list_type.is_some()
        || !s.list_map_keys.is_empty()
        || s.map_type.is_some()
        || !s.validations.is_empty()
        || has_value_validations(s)
}

fn has_value_validations(s: &Node) -> bool {
    s.maximum.is_some()
        || s.exclusive_maximum
        || s.minimum.is_some()
        || s.exclusive_minimum
        || s.multiple_of.is_some()
        || s.max_length.is_some()
        || s.min_length.is_some()
        || s.pattern.is_some()
        || s.max_items.is_some()
        || s.min_items.is_some()
        || s.unique_items
        || s.max_properties.is_some()
        || s.min_properties.is_some()
        || !s.enum_.is_empty()
        || !s.required.is_empty()
        || !s.all_of.is_empty()
        || !s.any_of.is_empty()
        || !s.one_of.is_empty()
        || s.not.is_some()
}

/// The int-or-string idiom `anyOf: [{type: integer}, {type: string}]`.
fn is_int_or_string_any_of(any_of: &[Node]) -> bool {
    let only_type = |n: &Node, t: &str| {
        n.type_.as_deref() == Some(t)
            && n.default.is_none()
            && n.properties.is_empty()
            && !has_anything_but_type_and_default(n)
    };
    matches!(any_of, [a, b] if only_type(a, "integer") && only_type(b, "string"))
}

fn check_value_validation(
    v: &Node,
    skip_any_of: bool,
    skip_first_all_of_any_of: bool,
    lvl: Level,
    path: &FieldPath,
    errs: &mut Vec<FieldError>,
) {
    if !skip_any_of {
        for (i, n) in v.any_of.iter().enumerate() {
            check_nested(n, false, false, lvl, &path.child("anyOf").index(i), errs);
        }
    }
    for (i, n) in v.all_of.iter().enumerate() {
        let skip = skip_first_all_of_any_of && i == 0;
        check_nested(n, skip, false, lvl, &path.child("allOf").index(i), errs);
    }
    for (i, n) in v.one_of.iter().enumerate() {
        check_nested(n, false, false, lvl, &path.child("oneOf").index(i), errs);
    }
    if let Some(not) = &v.not {
        check_nested(not, false, false, lvl, &path.child("not"), errs);
    }
}

/// `validateNestedValueValidation`: inside junctors only value validations are allowed.
fn check_nested(
    v: &Node,
    skip_any_of: bool,
    skip_all_of_any_of: bool,
    lvl: Level,
    path: &FieldPath,
    errs: &mut Vec<FieldError>,
) {
    let field = |name: &str| path.child(name).as_field();
    check_value_validation(v, skip_any_of, skip_all_of_any_of, lvl, path, errs);
    if let Some(items) = &v.items {
        check_nested(items, false, false, lvl, &path.child("items"), errs);
    }
    for (k, p) in &v.properties {
        check_nested(p, false, false, Level::Field, &path.child("properties").key(k), errs);
    }
    let forbid =
        |errs: &mut Vec<FieldError>, name: &str, detail: &str| errs.push(FieldError::forbidden(field(name), detail));
    if v.type_.is_some() {
        forbid(errs, "type", "must be empty to be structural");
    }
    if v.additional.is_some() {
        forbid(errs, "additionalProperties", "must be undefined to be structural");
    }
    if v.default.is_some() {
        forbid(errs, "default", "must be undefined to be structural");
    }
    if v.has_title {
        forbid(errs, "title", "must be empty to be structural");
    }
    if v.has_description {
        forbid(errs, "description", "must be empty to be structural");
    }
    if v.nullable {
        forbid(errs, "nullable", "must be false to be structural");
    }
    if v.preserve_unknown_fields {
        forbid(errs, "x-kubernetes-preserve-unknown-fields", "must be false to be structural");
    }
    if v.embedded_resource {
        forbid(errs, "x-kubernetes-embedded-resource", "must be false to be structural");
    }
    if v.int_or_string {
        forbid(errs, "x-kubernetes-int-or-string", "must be false to be structural");
    }
    if !v.list_map_keys.is_empty() {
        forbid(errs, "x-kubernetes-list-map-keys", "must be empty to be structural");
    }
    if v.list_type.is_some() {
        forbid(errs, "x-kubernetes-list-type", "must be undefined to be structural");
    }
    if v.map_type.is_some() {
        forbid(errs, "x-kubernetes-map-type", "must be undefined to be structural");
    }
    if !v.validations.is_empty() {
        forbid(errs, "x-kubernetes-validations", "must be empty to be structural");
    }
    if v.properties.contains_key("metadata") {
        errs.push(FieldError::forbidden(
            path.child("properties").key("metadata").as_field(),
            "must not be specified in a nested context",
        ));
    }
}

/// `validateStructuralCompleteness`: what the root's junctors mention must exist outside them.
fn check_completeness(root: &Node, path: &FieldPath, errs: &mut Vec<FieldError>) {
    completeness_of_junctors(root, root, path, path, errs);
}

fn completeness_of_junctors(v: &Node, s: &Node, s_path: &FieldPath, v_path: &FieldPath, errs: &mut Vec<FieldError>) {
    if let Some(not) = &v.not {
        completeness_nested(not, Some(s), s_path, &v_path.child("not"), errs);
    }
    for (name, list) in [("allOf", &v.all_of), ("anyOf", &v.any_of), ("oneOf", &v.one_of)] {
        for (i, n) in list.iter().enumerate() {
            completeness_nested(n, Some(s), s_path, &v_path.child(name).index(i), errs);
        }
    }
}

fn completeness_nested(v: &Node, s: Option<&Node>, s_path: &FieldPath, v_path: &FieldPath, errs: &mut Vec<FieldError>) {
    let Some(s) = s else {
        errs.push(FieldError::required(s_path.as_field(), format!("because it is defined in {v_path}")));
        return;
    };
    completeness_of_junctors(v, s, s_path, v_path, errs);
    if let Some(items) = &v.items {
        completeness_nested(items, s.items.as_deref(), &s_path.child("items"), &v_path.child("items"), errs);
    }
    for (k, vf) in &v.properties {
        let sp = s_path.child("properties").key(k);
        let vp = v_path.child("properties").key(k);
        match s.properties.get(k) {
            Some(sf) => completeness_nested(vf, Some(sf), &sp, &vp, errs),
            None => errs.push(FieldError::required(sp.as_field(), format!("because it is defined in {vp}"))),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Defaults (defaulting.ValidateDefaults)
// ---------------------------------------------------------------------------------------------

/// Check every `default` of the structural part of the schema: it must validate against its
/// own node and must not carry fields that pruning would remove.
fn check_defaults(s: &Node, path: &FieldPath, errs: &mut Vec<FieldError>, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    if let Some(default) = &s.default {
        let default_path = path.child("default");
        let schema_errors = validate::openapi_field_errors(s, default, &default_path);
        if !schema_errors.is_empty() {
            errs.extend(schema_errors);
        } else {
            let mut list_errors = Vec::new();
            validate::list_type_errors(s, default, &default_path, &mut list_errors, 0);
            errs.extend(list_errors);
        }
        if prune::prune_value(s, &mut default.clone()) {
            errs.push(FieldError::invalid(default_path.as_field(), default.clone(), "must not have unknown fields"));
        }
    }
    // additionalProperties is not followed, as upstream does not.
    if let Some(items) = &s.items {
        check_defaults(items, &path.child("items"), errs, depth + 1);
    }
    for (k, p) in &s.properties {
        check_defaults(p, &path.child("properties").key(k), errs, depth + 1);
    }
}

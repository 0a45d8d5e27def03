//! Behaviour tests of the public API: what a client of the server would see.

use serde_json::{Value, json};

use super::*;
use crate::shape::ListKind;

fn schema(v: Value) -> StructuralSchema {
    let props: JSONSchemaProps = serde_json::from_value(v).expect("schema JSON");
    match StructuralSchema::compile(&props) {
        Ok(s) => s,
        Err(errs) => panic!("schema does not compile: {}", aggregate_message(&errs)),
    }
}

fn compile_errors(v: Value) -> Vec<String> {
    let props: JSONSchemaProps = serde_json::from_value(v).expect("schema JSON");
    match StructuralSchema::compile_at(&props, "spec.versions[0].schema.openAPIV3Schema") {
        Ok(_) => Vec::new(),
        Err(errs) => errs.iter().map(FieldError::message).collect(),
    }
}

fn messages(errs: &[FieldError]) -> Vec<String> {
    errs.iter().map(FieldError::message).collect()
}

/// A root schema with `spec` holding the given properties.
fn with_spec(props: Value) -> StructuralSchema {
    schema(json!({"type": "object", "properties": {"spec": {"type": "object", "properties": props}}}))
}

fn validate_spec(props: Value, spec: Value) -> Vec<String> {
    messages(&with_spec(props).validate(&json!({"apiVersion": "example.com/v1", "kind": "Foo", "spec": spec})))
}

// ---------------------------------------------------------------------------------------------
// Pruning
// ---------------------------------------------------------------------------------------------

#[test]
fn test_prune_removes_undeclared_nested_fields_and_reports_sorted_paths() {
    let s = with_spec(json!({
        "replicas": {"type": "integer"},
        "template": {"type": "object", "properties": {"name": {"type": "string"}}}
    }));
    let mut obj = json!({
        "apiVersion": "example.com/v1", "kind": "Foo", "metadata": {"name": "a"},
        "spec": {"replicas": 1, "foo": true, "template": {"name": "x", "bar": 1}},
        "status": {"ready": true}
    });
    assert_eq!(s.prune(&mut obj), ["spec.foo", "spec.template.bar", "status"]);
    assert_eq!(
        obj,
        json!({"apiVersion": "example.com/v1", "kind": "Foo", "metadata": {"name": "a"},
               "spec": {"replicas": 1, "template": {"name": "x"}}})
    );
}

#[test]
fn test_prune_keeps_root_type_meta_even_when_schema_omits_it() {
    let s = with_spec(json!({}));
    let mut obj = json!({"apiVersion": "v", "kind": "K", "metadata": {"name": "n"}});
    assert!(s.prune(&mut obj).is_empty());
    assert_eq!(obj, json!({"apiVersion": "v", "kind": "K", "metadata": {"name": "n"}}));
}

#[test]
fn test_prune_paths_carry_list_indices() {
    let s = with_spec(json!({
        "items": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}}}
    }));
    let mut obj = json!({"spec": {"items": [{"name": "a"}, {"name": "b", "extra": 1}]}});
    assert_eq!(s.prune(&mut obj), ["spec.items[1].extra"]);
    assert_eq!(obj, json!({"spec": {"items": [{"name": "a"}, {"name": "b"}]}}));
}

#[test]
fn test_preserve_unknown_fields_keeps_unknown_but_prunes_declared_subtrees() {
    let s = with_spec(json!({
        "config": {
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": true,
            "properties": {"nested": {"type": "object", "properties": {"a": {"type": "string"}}}}
        }
    }));
    let mut obj = json!({"spec": {"config": {"free": {"deep": [1, {"x": 2}]}, "nested": {"a": "k", "junk": 1}}}});
    assert_eq!(s.prune(&mut obj), ["spec.config.nested.junk"]);
    assert_eq!(obj, json!({"spec": {"config": {"free": {"deep": [1, {"x": 2}]}, "nested": {"a": "k"}}}}));
}

#[test]
fn test_preserve_unknown_fields_without_type_keeps_any_json() {
    let s = with_spec(json!({"raw": {"x-kubernetes-preserve-unknown-fields": true}}));
    let mut obj = json!({"spec": {"raw": [{"a": 1}, "b", null]}});
    assert!(s.prune(&mut obj).is_empty());
    assert_eq!(obj, json!({"spec": {"raw": [{"a": 1}, "b", null]}}));
    assert!(s.validate(&obj).is_empty());
}

#[test]
fn test_preserve_unknown_fields_at_root_keeps_everything() {
    let s = schema(json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}));
    let mut obj = json!({"spec": {"anything": 1}, "status": {"x": [1]}});
    assert!(s.prune(&mut obj).is_empty());
    assert_eq!(obj, json!({"spec": {"anything": 1}, "status": {"x": [1]}}));
}

#[test]
fn test_embedded_resource_keeps_type_meta_and_coerces_its_metadata() {
    let s = with_spec(json!({
        "template": {
            "type": "object",
            "x-kubernetes-embedded-resource": true,
            "properties": {"spec": {"type": "object", "properties": {"a": {"type": "string"}}}}
        }
    }));
    let mut obj = json!({"spec": {"template": {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "foo": 1, "labels": {}},
        "spec": {"a": "x", "b": "y"}
    }}});
    assert_eq!(s.prune(&mut obj), ["spec.template.spec.b", "spec.template.metadata.foo"]);
    assert_eq!(
        obj,
        json!({"spec": {"template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"a": "x"}}}})
    );
}

#[test]
fn test_root_metadata_is_coerced_to_object_meta() {
    let s = with_spec(json!({}));
    let mut obj = json!({"metadata": {
        "name": "a", "foo": "bar", "finalizers": [], "labels": {"app": "x"},
        "creationTimestamp": "2024-05-06T07:08:09.123+02:00"
    }});
    assert_eq!(s.prune(&mut obj), ["metadata.foo"]);
    assert_eq!(
        obj,
        json!({"metadata": {"name": "a", "labels": {"app": "x"}, "creationTimestamp": "2024-05-06T05:08:09Z"}})
    );
}

#[test]
fn test_root_metadata_schema_does_not_restrict_object_meta_fields() {
    let s = schema(json!({
        "type": "object",
        "properties": {"metadata": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 5}}}}
    }));
    let mut obj = json!({"metadata": {"name": "a", "namespace": "ns", "labels": {"x": "y"}}});
    assert!(s.prune(&mut obj).is_empty());
    assert_eq!(obj, json!({"metadata": {"name": "a", "namespace": "ns", "labels": {"x": "y"}}}));
}

#[test]
fn test_int_or_string_keeps_scalars_and_empties_objects() {
    let s = with_spec(json!({"port": {"x-kubernetes-int-or-string": true}}));
    let mut obj = json!({"spec": {"port": 8080}});
    assert!(s.prune(&mut obj).is_empty());
    let mut obj = json!({"spec": {"port": "http"}});
    assert!(s.prune(&mut obj).is_empty());
    assert_eq!(obj, json!({"spec": {"port": "http"}}));
    let mut obj = json!({"spec": {"port": {"a": 1}}});
    assert_eq!(s.prune(&mut obj), ["spec.port.a"]);
    assert_eq!(obj, json!({"spec": {"port": {}}}));
}

#[test]
fn test_additional_properties_schema_prunes_map_values() {
    let s = with_spec(json!({
        "map": {"type": "object", "additionalProperties": {"type": "object", "properties": {"x": {"type": "string"}}}}
    }));
    let mut obj = json!({"spec": {"map": {"a": {"x": "1", "y": "2"}, "b": {}}}});
    assert_eq!(s.prune(&mut obj), ["spec.map.a.y"]);
    assert_eq!(obj, json!({"spec": {"map": {"a": {"x": "1"}, "b": {}}}}));
}

#[test]
fn test_prune_drops_non_nullable_nulls_without_default() {
    let s = with_spec(json!({
        "a": {"type": "string"},
        "b": {"type": "string", "nullable": true},
        "c": {"type": "string", "default": "d"}
    }));
    let mut obj = json!({"spec": {"a": null, "b": null, "c": null}});
    assert!(s.prune(&mut obj).is_empty());
    assert_eq!(obj, json!({"spec": {"b": null, "c": null}}));
}

#[test]
fn test_prune_checked_rejects_malformed_metadata_that_prune_drops() {
    let s = with_spec(json!({}));
    let mut obj = json!({"metadata": {"name": "a", "labels": "oops"}});
    let err = s.prune_checked(&mut obj).unwrap_err();
    assert_eq!(err.field, "metadata");
    assert_eq!(err.reason(), "FieldValueInvalid");
    assert!(
        err.message().ends_with(
            "json: cannot unmarshal string into Go struct field ObjectMeta.labels of type map[string]string"
        ),
        "{}",
        err.message()
    );
    let mut obj = json!({"metadata": {"name": "a", "labels": "oops"}});
    assert!(s.prune(&mut obj).is_empty());
    assert_eq!(obj, json!({"metadata": {"name": "a"}}));
}

#[test]
fn test_prune_checked_rejects_non_string_kind() {
    let s = with_spec(json!({}));
    let mut obj = json!({"kind": 5});
    let err = s.prune_checked(&mut obj).unwrap_err();
    assert_eq!(err.message(), "kind: Invalid value: 5: must be a string");
    let mut obj = json!({"kind": 5, "apiVersion": "v1"});
    assert!(s.prune(&mut obj).is_empty());
    assert_eq!(obj, json!({"apiVersion": "v1"}));
}

#[test]
fn test_prune_and_defaults_survive_very_deep_values() {
    let s = with_spec(json!({"free": {"type": "object", "additionalProperties": true}}));
    let mut deep = json!(1);
    for _ in 0..1000 {
        deep = Value::Array(vec![deep]);
    }
    let mut obj = json!({"spec": {"free": {"k": deep}}});
    assert!(s.prune(&mut obj).is_empty());
    s.apply_defaults(&mut obj);
    assert!(s.validate(&obj).is_empty());
}

// ---------------------------------------------------------------------------------------------
// Defaulting
// ---------------------------------------------------------------------------------------------

#[test]
fn test_defaults_fill_missing_properties_recursively() {
    let s = with_spec(json!({
        "replicas": {"type": "integer", "default": 1},
        "strategy": {
            "type": "object",
            "default": {},
            "properties": {"type": {"type": "string", "default": "Rolling"}}
        }
    }));
    let mut obj = json!({"spec": {}});
    assert!(s.apply_defaults(&mut obj));
    assert_eq!(obj, json!({"spec": {"replicas": 1, "strategy": {"type": "Rolling"}}}));
}

#[test]
fn test_defaults_do_not_override_values() {
    let s = with_spec(json!({"replicas": {"type": "integer", "default": 1}}));
    let mut obj = json!({"spec": {"replicas": 3}});
    assert!(!s.apply_defaults(&mut obj));
    assert_eq!(obj, json!({"spec": {"replicas": 3}}));
}

#[test]
fn test_defaults_do_not_create_missing_parents() {
    let s = with_spec(json!({"replicas": {"type": "integer", "default": 1}}));
    let mut obj = json!({"apiVersion": "v"});
    assert!(!s.apply_defaults(&mut obj));
    assert_eq!(obj, json!({"apiVersion": "v"}));
}

#[test]
fn test_null_handling_follows_nullable() {
    let s = with_spec(json!({
        "withDefault": {"type": "string", "default": "d"},
        "nullableWithDefault": {"type": "string", "nullable": true, "default": "d"},
        "noDefault": {"type": "string"}
    }));
    let mut obj = json!({"spec": {"withDefault": null, "nullableWithDefault": null, "noDefault": null}});
    assert!(s.apply_defaults(&mut obj));
    assert_eq!(obj, json!({"spec": {"withDefault": "d", "nullableWithDefault": null}}));
}

#[test]
fn test_defaults_apply_inside_list_items() {
    let s = with_spec(json!({
        "ports": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"port": {"type": "integer"}, "protocol": {"type": "string", "default": "TCP"}}
            }
        }
    }));
    let mut obj = json!({"spec": {"ports": [{"port": 80}, {"port": 53, "protocol": "UDP"}]}});
    assert!(s.apply_defaults(&mut obj));
    assert_eq!(obj, json!({"spec": {"ports": [{"port": 80, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}]}}));
}

#[test]
fn test_null_list_items_become_the_item_default() {
    let s = with_spec(json!({"names": {"type": "array", "items": {"type": "string", "default": "x"}}}));
    let mut obj = json!({"spec": {"names": ["a", null]}});
    assert!(s.apply_defaults(&mut obj));
    assert_eq!(obj, json!({"spec": {"names": ["a", "x"]}}));
}

#[test]
fn test_defaults_apply_inside_additional_properties_values() {
    let s = with_spec(json!({
        "limits": {
            "type": "object",
            "additionalProperties": {"type": "object", "properties": {"max": {"type": "integer", "default": 10}}}
        }
    }));
    let mut obj = json!({"spec": {"limits": {"cpu": {}, "mem": {"max": 2}}}});
    assert!(s.apply_defaults(&mut obj));
    assert_eq!(obj, json!({"spec": {"limits": {"cpu": {"max": 10}, "mem": {"max": 2}}}}));
}

// ---------------------------------------------------------------------------------------------
// Validation: one test per keyword, with kube-apiserver's exact message
// ---------------------------------------------------------------------------------------------

#[test]
fn test_type_mismatch_message_and_reason() {
    let s = with_spec(json!({"replicas": {"type": "integer"}}));
    let errs = s.validate(&json!({"spec": {"replicas": "3"}}));
    assert_eq!(
        messages(&errs),
        [r#"spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string""#]
    );
    assert_eq!(errs[0].reason(), "FieldValueTypeInvalid");
    assert_eq!(errs[0].field, "spec.replicas");
}

#[test]
fn test_type_names_of_every_json_kind() {
    let props = json!({"o": {"type": "object"}, "a": {"type": "array", "items": {"type": "string"}},
                       "b": {"type": "boolean"}, "n": {"type": "number"}, "s": {"type": "string"}});
    assert_eq!(
        validate_spec(props.clone(), json!({"o": [], "a": {}, "b": 1, "n": "1", "s": 1.5})),
        [
            r#"spec.a: Invalid value: "object": spec.a in body must be of type array: "object""#,
            r#"spec.b: Invalid value: "integer": spec.b in body must be of type boolean: "integer""#,
            r#"spec.n: Invalid value: "string": spec.n in body must be of type number: "string""#,
            r#"spec.o: Invalid value: "array": spec.o in body must be of type object: "array""#,
            r#"spec.s: Invalid value: "number": spec.s in body must be of type string: "number""#,
        ]
    );
    assert!(validate_spec(props, json!({"o": {}, "a": ["x"], "b": false, "n": 1, "s": "x"})).is_empty());
}

#[test]
fn test_integer_accepts_integral_floats_and_rejects_fractions() {
    let props = json!({"i": {"type": "integer"}});
    assert!(validate_spec(props.clone(), json!({"i": 5.0})).is_empty());
    assert_eq!(
        validate_spec(props, json!({"i": 5.5})),
        [r#"spec.i: Invalid value: "number": spec.i in body must be of type integer: "number""#]
    );
}

#[test]
fn test_null_requires_nullable() {
    let props = json!({"a": {"type": "string"}, "b": {"type": "string", "nullable": true}});
    assert_eq!(
        validate_spec(props, json!({"a": null, "b": null})),
        [r#"spec.a: Invalid value: "null": spec.a in body must be of type string: "null""#]
    );
}

#[test]
fn test_required_fields() {
    let s = schema(json!({
        "type": "object",
        "required": ["spec"],
        "properties": {"spec": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}}
    }));
    let errs = s.validate(&json!({}));
    assert_eq!(messages(&errs), ["spec: Required value"]);
    assert_eq!(errs[0].reason(), "FieldValueRequired");
    assert_eq!(messages(&s.validate(&json!({"spec": {}}))), ["spec.name: Required value"]);
}

#[test]
fn test_enum_reports_supported_values() {
    let errs =
        with_spec(json!({"mode": {"type": "string", "enum": ["a", "b"]}})).validate(&json!({"spec": {"mode": "x"}}));
    assert_eq!(messages(&errs), [r#"spec.mode: Unsupported value: "x": supported values: "a", "b""#]);
    assert_eq!(errs[0].reason(), "FieldValueNotSupported");
    assert_eq!(
        validate_spec(json!({"n": {"type": "integer", "enum": [1, 2]}}), json!({"n": 3})),
        [r#"spec.n: Unsupported value: 3: supported values: "1", "2""#]
    );
    assert!(validate_spec(json!({"n": {"type": "integer", "enum": [1, 2]}}), json!({"n": 2})).is_empty());
}

#[test]
fn test_enum_rejects_null_even_when_nullable() {
    assert_eq!(
        validate_spec(json!({"m": {"type": "string", "nullable": true, "enum": ["a"]}}), json!({"m": null})),
        [r#"spec.m: Unsupported value: null: supported values: "a""#]
    );
}

#[test]
fn test_maximum_and_minimum() {
    let props = json!({
        "max": {"type": "integer", "maximum": 10},
        "xmax": {"type": "integer", "maximum": 10, "exclusiveMaximum": true},
        "min": {"type": "integer", "minimum": 1},
        "xmin": {"type": "number", "minimum": 0, "exclusiveMinimum": true}
    });
    assert_eq!(
        validate_spec(props.clone(), json!({"max": 11, "xmax": 10, "min": 0, "xmin": 0})),
        [
            "spec.max: Invalid value: 11: spec.max in body should be less than or equal to 10",
            "spec.min: Invalid value: 0: spec.min in body should be greater than or equal to 1",
            "spec.xmax: Invalid value: 10: spec.xmax in body should be less than 10",
            "spec.xmin: Invalid value: 0: spec.xmin in body should be greater than 0",
        ]
    );
    assert!(validate_spec(props, json!({"max": 10, "xmax": 9, "min": 1, "xmin": 0.5})).is_empty());
}

#[test]
fn test_float_bounds_print_like_go() {
    assert_eq!(
        validate_spec(json!({"f": {"type": "number", "maximum": 2.5}}), json!({"f": 3.75})),
        ["spec.f: Invalid value: 3.75: spec.f in body should be less than or equal to 2.5"]
    );
}

#[test]
fn test_multiple_of() {
    let props = json!({"n": {"type": "integer", "multipleOf": 5}, "f": {"type": "number", "multipleOf": 0.1}});
    assert_eq!(
        validate_spec(props.clone(), json!({"n": 7, "f": 0.3})),
        ["spec.n: Invalid value: 7: spec.n in body should be a multiple of 5"]
    );
    assert_eq!(
        validate_spec(props, json!({"n": 10, "f": 0.25})),
        ["spec.f: Invalid value: 0.25: spec.f in body should be a multiple of 0.1"]
    );
}

#[test]
fn test_max_length_counts_code_points() {
    let props = json!({"name": {"type": "string", "maxLength": 3}});
    assert!(validate_spec(props.clone(), json!({"name": "héé"})).is_empty());
    let errs = with_spec(props).validate(&json!({"spec": {"name": "abcd"}}));
    assert_eq!(messages(&errs), ["spec.name: Too long: may not be more than 3 bytes"]);
    assert_eq!(errs[0].reason(), "FieldValueTooLong");
}

#[test]
fn test_min_length_and_pattern() {
    let props = json!({"name": {"type": "string", "minLength": 3, "pattern": "^[a-z]+$"}});
    assert_eq!(
        validate_spec(props.clone(), json!({"name": "ab"})),
        [r#"spec.name: Invalid value: "ab": spec.name in body should be at least 3 chars long"#]
    );
    assert_eq!(
        validate_spec(props.clone(), json!({"name": "ABC"})),
        [r#"spec.name: Invalid value: "ABC": spec.name in body should match '^[a-z]+$'"#]
    );
    assert!(validate_spec(props, json!({"name": "abc"})).is_empty());
}

#[test]
fn test_formats() {
    let props = json!({
        "t": {"type": "string", "format": "date-time"},
        "u": {"type": "string", "format": "uuid"},
        "x": {"type": "string", "format": "no-such-format"},
        "i": {"type": "integer", "format": "int32"}
    });
    assert_eq!(
        validate_spec(props.clone(), json!({"t": "yesterday", "u": "nope", "x": "?", "i": 99999999999i64})),
        [
            r#"spec.t: Invalid value: "yesterday": spec.t in body must be of type date-time: "yesterday""#,
            r#"spec.u: Invalid value: "nope": spec.u in body must be of type uuid: "nope""#,
        ]
    );
    assert!(
        validate_spec(props, json!({"t": "2024-01-01T00:00:00Z", "u": "123e4567-e89b-12d3-a456-426614174000"}))
            .is_empty()
    );
}

#[test]
fn test_min_and_max_items() {
    let props = json!({"l": {"type": "array", "minItems": 2, "maxItems": 3, "items": {"type": "string"}}});
    assert_eq!(
        validate_spec(props.clone(), json!({"l": ["a"]})),
        ["spec.l: Invalid value: 1: spec.l in body should have at least 2 items"]
    );
    let errs = with_spec(props).validate(&json!({"spec": {"l": ["a", "b", "c", "d"]}}));
    assert_eq!(messages(&errs), ["spec.l: Too many: 4: must have at most 3 items"]);
    assert_eq!(errs[0].reason(), "FieldValueTooMany");
}

#[test]
fn test_min_and_max_properties() {
    let props = json!({"m": {"type": "object", "minProperties": 2, "maxProperties": 2,
                             "additionalProperties": {"type": "string"}}});
    assert_eq!(
        validate_spec(props.clone(), json!({"m": {"a": "1"}})),
        ["spec.m: Invalid value: 1: spec.m in body should have at least 2 properties"]
    );
    assert_eq!(
        validate_spec(props, json!({"m": {"a": "1", "b": "2", "c": 3}})),
        ["spec.m: Too many: 3: must have at most 2 items"],
        "the rest of the object is not validated"
    );
}

#[test]
fn test_additional_properties_schema_validates_values() {
    assert_eq!(
        validate_spec(
            json!({"labels": {"type": "object", "additionalProperties": {"type": "string"}}}),
            json!({"labels": {"a": "x", "b": 1}})
        ),
        [r#"spec.labels.b: Invalid value: "integer": spec.labels.b in body must be of type string: "integer""#]
    );
}

#[test]
fn test_additional_properties_false_forbids_unknown_keys() {
    let s = with_spec(json!({
        "strict": {"type": "object", "additionalProperties": false, "x-kubernetes-preserve-unknown-fields": true}
    }));
    assert_eq!(
        messages(&s.validate(&json!({"spec": {"strict": {"extra": 1}}}))),
        [r#"spec.strict: Invalid value: "extra": spec.strict.extra in body is a forbidden property"#]
    );
}

#[test]
fn test_all_of_reports_branch_errors_and_summary() {
    let props = json!({"n": {"type": "integer", "allOf": [{"minimum": 1}, {"maximum": 5}]}});
    assert_eq!(
        validate_spec(props.clone(), json!({"n": 9})),
        [
            "spec.n: Invalid value: 9: spec.n in body should be less than or equal to 5",
            r#"<nil>: Invalid value: "": "spec.n" must validate all the schemas (allOf)"#,
        ]
    );
    assert!(validate_spec(props, json!({"n": 3})).is_empty());
}

#[test]
fn test_any_of_reports_summary_with_field_nil() {
    let props = json!({"n": {"type": "integer", "anyOf": [{"minimum": 10}, {"maximum": 0}]}});
    let errs = with_spec(props.clone()).validate(&json!({"spec": {"n": 5}}));
    assert_eq!(
        messages(&errs),
        [
            r#"<nil>: Invalid value: "": "spec.n" must validate at least one schema (anyOf)"#,
            "spec.n: Invalid value: 5: spec.n in body should be greater than or equal to 10",
        ]
    );
    assert_eq!(errs[0].field, "<nil>");
    assert!(validate_spec(props, json!({"n": -1})).is_empty());
}

#[test]
fn test_one_of_counts_valid_alternatives() {
    let props = json!({"n": {"type": "integer", "oneOf": [{"minimum": 5}, {"maximum": 10}]}});
    assert_eq!(
        validate_spec(props.clone(), json!({"n": 7})),
        [
            r#"<nil>: Invalid value: "": "spec.n" must validate one and only one schema (oneOf). Found 2 valid alternatives"#
        ]
    );
    assert!(validate_spec(props, json!({"n": 11})).is_empty());
    let props = json!({"n": {"type": "integer", "oneOf": [{"minimum": 5}, {"minimum": 6}]}});
    assert_eq!(
        validate_spec(props, json!({"n": 1})),
        [
            r#"<nil>: Invalid value: "": "spec.n" must validate one and only one schema (oneOf). Found none valid"#,
            "spec.n: Invalid value: 1: spec.n in body should be greater than or equal to 5",
        ]
    );
}

#[test]
fn test_not() {
    let props = json!({"s": {"type": "string", "not": {"enum": ["forbidden"]}}});
    assert_eq!(
        validate_spec(props.clone(), json!({"s": "forbidden"})),
        [r#"<nil>: Invalid value: "": "spec.s" must not validate the schema (not)"#]
    );
    assert!(validate_spec(props, json!({"s": "fine"})).is_empty());
}

#[test]
fn test_int_or_string() {
    let props = json!({"port": {"x-kubernetes-int-or-string": true,
                                "anyOf": [{"type": "integer"}, {"type": "string"}]}});
    assert!(validate_spec(props.clone(), json!({"port": 80})).is_empty());
    assert!(validate_spec(props.clone(), json!({"port": "http"})).is_empty());
    let errs = validate_spec(props, json!({"port": true}));
    assert_eq!(
        errs[0],
        r#"spec.port: Invalid value: "boolean": spec.port in body must be of type integer,string: "boolean""#
    );
    assert!(errs.iter().any(|e| e.contains("must validate at least one schema (anyOf)")), "{errs:?}");
}

#[test]
fn test_list_type_set_reports_second_occurrences() {
    let props = json!({"tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}}});
    let errs = with_spec(props.clone()).validate(&json!({"spec": {"tags": ["a", "b", "a", "a", "b"]}}));
    assert_eq!(messages(&errs), [r#"spec.tags[2]: Duplicate value: "a""#, r#"spec.tags[4]: Duplicate value: "b""#]);
    assert_eq!(errs[0].reason(), "FieldValueDuplicate");
    assert!(validate_spec(props, json!({"tags": ["a", "b"]})).is_empty());
}

#[test]
fn test_list_type_map_reports_duplicate_keys() {
    let props = json!({"ports": {
        "type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["port"],
        "items": {"type": "object", "required": ["port"],
                  "properties": {"port": {"type": "integer"}, "name": {"type": "string"}}}
    }});
    assert_eq!(
        validate_spec(props.clone(), json!({"ports": [{"port": 80, "name": "a"}, {"port": 80, "name": "b"}]})),
        [r#"spec.ports[1]: Duplicate value: {"port":80}"#]
    );
    assert_eq!(validate_spec(props, json!({"ports": [{"name": "a"}]})), ["spec.ports[0].port: Required value"]);
}

#[test]
fn test_list_type_map_with_several_keys() {
    let props = json!({"ports": {
        "type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["port", "protocol"],
        "items": {"type": "object", "required": ["port", "protocol"],
                  "properties": {"port": {"type": "integer"}, "protocol": {"type": "string"}}}
    }});
    let spec = json!({"ports": [
        {"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}
    ]});
    assert_eq!(validate_spec(props, spec), [r#"spec.ports[2]: Duplicate value: {"port":53,"protocol":"UDP"}"#]);
}

#[test]
fn test_embedded_resource_needs_api_version_and_kind() {
    let props = json!({"template": {"type": "object", "x-kubernetes-embedded-resource": true,
                                    "x-kubernetes-preserve-unknown-fields": true}});
    assert_eq!(
        validate_spec(props.clone(), json!({"template": {"metadata": {}}})),
        [
            "spec.template.apiVersion: Required value: must not be empty",
            "spec.template.kind: Required value: must not be empty"
        ]
    );
    assert_eq!(
        validate_spec(props.clone(), json!({"template": {"apiVersion": "a/b/c", "kind": "My_Kind"}})),
        [
            r#"spec.template.apiVersion: Invalid value: "a/b/c": unexpected GroupVersion string: a/b/c"#,
            "spec.template.kind: Invalid value: \"My_Kind\": may have mixed case, but should otherwise match: a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')",
        ]
    );
    assert!(validate_spec(props, json!({"template": {"apiVersion": "apps/v1", "kind": "Deployment"}})).is_empty());
}

#[test]
fn test_root_metadata_name_constraints_come_from_schema() {
    let s = schema(json!({
        "type": "object",
        "properties": {"metadata": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 5}}}}
    }));
    assert_eq!(
        messages(&s.validate(&json!({"metadata": {"name": "too-long-name"}}))),
        ["metadata.name: Too long: may not be more than 5 bytes"]
    );
}

#[test]
fn test_errors_inside_list_items_carry_indices() {
    let props = json!({"items": {"type": "array", "items": {
        "type": "object", "required": ["name"], "properties": {"name": {"type": "string"}, "size": {"type": "integer"}}
    }}});
    assert_eq!(
        validate_spec(props, json!({"items": [{"name": "a"}, {"size": "big"}]})),
        [
            r#"spec.items[1].size: Invalid value: "string": spec.items[1].size in body must be of type integer: "string""#,
            "spec.items[1].name: Required value",
        ]
    );
}

#[test]
fn test_a_kube_derive_style_object_validates_clean() {
    let s = schema(json!({
        "description": "Auto-generated derived type for FooSpec via `CustomResource`",
        "properties": {
            "spec": {
                "properties": {
                    "name": {"type": "string"},
                    "info": {"nullable": true, "type": "string"},
                    "replicas": {"format": "int32", "type": "integer", "minimum": 0},
                    "labels": {"additionalProperties": {"type": "string"}, "type": "object"}
                },
                "required": ["name"],
                "type": "object"
            },
            "status": {"nullable": true, "properties": {"ready": {"type": "boolean"}}, "type": "object"}
        },
        "required": ["spec"],
        "title": "Foo",
        "type": "object"
    }));
    let mut obj = json!({
        "apiVersion": "example.com/v1", "kind": "Foo",
        "metadata": {"name": "f", "namespace": "default"},
        "spec": {"name": "n", "info": null, "replicas": 2, "labels": {"a": "b"}},
        "status": null
    });
    assert!(s.prune(&mut obj).is_empty());
    s.apply_defaults(&mut obj);
    assert!(s.validate(&obj).is_empty(), "{:?}", messages(&s.validate(&obj)));
}

#[test]
fn test_validation_never_panics_on_wrong_shapes() {
    let s = with_spec(json!({
        "a": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["k"],
              "items": {"type": "object", "required": ["k"], "properties": {"k": {"type": "string"}}}},
        "m": {"type": "object", "additionalProperties": {"type": "integer"}}
    }));
    for spec in
        [json!(null), json!(1), json!("x"), json!([1]), json!({"a": {"k": 1}, "m": [1]}), json!({"a": [1, "x", null]})]
    {
        let _ = s.validate(&json!({"spec": spec}));
    }
    assert_eq!(
        validate_spec(
            json!({"a": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["k"],
                         "items": {"type": "object", "required": ["k"], "properties": {"k": {"type": "string"}}}}}),
            json!({"a": [{"k": "x"}, 5]})
        ),
        [
            r#"spec.a[1]: Invalid value: "integer": spec.a[1] in body must be of type object: "integer""#,
            "spec.a[1]: Invalid value: 5: must be an object for an array of list-type map",
        ]
    );
}

// ---------------------------------------------------------------------------------------------
// Compile errors
// ---------------------------------------------------------------------------------------------

const BASE: &str = "spec.versions[0].schema.openAPIV3Schema";

#[test]
fn test_compile_reports_missing_types() {
    assert_eq!(
        compile_errors(json!({"type": "object", "properties": {"spec": {"properties": {}}}})),
        [format!("{BASE}.properties[spec].type: Required value: must not be empty for specified object fields")]
    );
    assert_eq!(compile_errors(json!({})), [format!("{BASE}.type: Required value: must not be empty at the root")]);
    assert_eq!(
        compile_errors(json!({"type": "object", "properties": {"l": {"type": "array", "items": {}}}})),
        [format!("{BASE}.properties[l].items.type: Required value: must not be empty for specified array items")]
    );
}

#[test]
fn test_compile_uses_openapi_root_path_by_default() {
    let props: JSONSchemaProps = serde_json::from_value(json!({})).unwrap();
    let errs = StructuralSchema::compile(&props).unwrap_err();
    assert_eq!(messages(&errs), ["openAPIV3Schema.type: Required value: must not be empty at the root"]);
}

#[test]
fn test_compile_requires_items_for_arrays() {
    assert_eq!(
        compile_errors(json!({"type": "object", "properties": {"l": {"type": "array"}}})),
        [format!("{BASE}.properties[l].items: Required value: must be specified")]
    );
}

#[test]
fn test_compile_rejects_bad_pattern() {
    let errs = compile_errors(json!({"type": "object", "properties": {"n": {"type": "string", "pattern": "("}}}));
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(
        errs[0].starts_with(&format!(
            r#"{BASE}.properties[n].pattern: Invalid value: "(": must be a valid regular expression, but isn't: "#
        )),
        "{}",
        errs[0]
    );
}

#[test]
fn test_compile_accepts_untyped_preserve_and_int_or_string_nodes() {
    assert!(
        compile_errors(json!({"type": "object", "properties": {
            "raw": {"x-kubernetes-preserve-unknown-fields": true},
            "port": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]}
        }}))
        .is_empty()
    );
}

#[test]
fn test_compile_rejects_unknown_type_names_and_null_type() {
    assert_eq!(
        compile_errors(json!({"type": "object", "properties": {"a": {"type": "strng"}}})),
        [format!(
            r#"{BASE}.properties[a].type: Unsupported value: "strng": supported values: "array", "boolean", "integer", "number", "object", "string""#
        )]
    );
}

#[test]
fn test_compile_rejects_unsupported_keywords() {
    assert_eq!(
        compile_errors(
            json!({"type": "object", "properties": {"a": {"type": "array", "uniqueItems": true, "items": {"type": "string"}}}})
        ),
        [format!(
            "{BASE}.properties[a].uniqueItems: Forbidden: uniqueItems cannot be set to true since the runtime complexity becomes quadratic"
        )]
    );
    assert_eq!(
        compile_errors(json!({"type": "object", "properties": {"a": {"type": "object",
            "properties": {"x": {"type": "string"}}, "additionalProperties": {"type": "string"}}}})),
        [format!(
            "{BASE}.properties[a].additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive"
        )]
    );
    assert_eq!(
        compile_errors(json!({"type": "object", "additionalProperties": {"type": "string"}})),
        [format!("{BASE}.additionalProperties: Forbidden: must not be used at the root")]
    );
}

#[test]
fn test_compile_checks_list_map_extensions() {
    assert_eq!(
        compile_errors(json!({"type": "object", "properties": {"l": {"type": "array", "x-kubernetes-list-type": "map",
            "items": {"type": "object", "properties": {"k": {"type": "string"}}}}}})),
        [format!(
            "{BASE}.properties[l].x-kubernetes-list-map-keys: Required value: must not be empty if x-kubernetes-list-type is map"
        )]
    );
    assert_eq!(
        compile_errors(json!({"type": "object", "properties": {"l": {"type": "array", "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["k"], "items": {"type": "object", "properties": {"k": {"type": "string"}}}}}})),
        [format!(
            "{BASE}.properties[l].items.properties[k].default: Required value: this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property"
        )]
    );
    assert_eq!(
        compile_errors(json!({"type": "object", "properties": {"l": {"type": "array", "x-kubernetes-list-type": "bag",
            "items": {"type": "string"}}}})),
        [format!(
            r#"{BASE}.properties[l].x-kubernetes-list-type: Unsupported value: "bag": supported values: "atomic", "set", "map""#
        )]
    );
}

#[test]
fn test_compile_validates_defaults_against_their_schema() {
    assert_eq!(
        compile_errors(json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "replicas": {"type": "integer", "default": "one"}}}}})),
        [format!(
            r#"{BASE}.properties[spec].properties[replicas].default: Invalid value: "string":  in body must be of type integer: "string""#
        )]
    );
    assert_eq!(
        compile_errors(json!({"type": "object", "properties": {"spec": {"type": "object", "default": {"x": 1},
            "properties": {"y": {"type": "integer"}}}}})),
        [format!(r#"{BASE}.properties[spec].default: Invalid value: {{"x":1}}: must not have unknown fields"#)]
    );
}

#[test]
fn test_compile_restricts_root_metadata() {
    assert_eq!(
        compile_errors(json!({"type": "object", "properties": {"metadata": {"type": "object",
            "properties": {"labels": {"type": "object"}}}}})),
        [format!(
            "{BASE}.properties[metadata]: Forbidden: must not specify anything other than name and generateName, but metadata is implicitly specified"
        )]
    );
    assert_eq!(
        compile_errors(json!({"type": "object", "properties": {"metadata": {"type": "object", "default": {}}}})),
        [format!("{BASE}.properties[metadata].default: Forbidden: must not be set in top-level metadata")]
    );
    assert!(
        compile_errors(json!({"type": "object", "properties": {"metadata": {"type": "object",
        "properties": {"name": {"type": "string", "maxLength": 20}}}}}))
        .is_empty()
    );
}

#[test]
fn test_compile_keeps_junctors_value_only() {
    assert_eq!(
        compile_errors(json!({"type": "object", "properties": {"a": {"type": "string"}},
            "anyOf": [{"properties": {"a": {"type": "string"}}}]})),
        [format!("{BASE}.anyOf[0].properties[a].type: Forbidden: must be empty to be structural")]
    );
    assert_eq!(
        compile_errors(json!({"type": "object", "properties": {"a": {"type": "string"}},
            "allOf": [{"properties": {"b": {"minLength": 1}}}]})),
        [format!("{BASE}.properties[b]: Required value: because it is defined in {BASE}.allOf[0].properties[b]")]
    );
}

#[test]
fn test_compile_rejects_ref_and_validation_rules_without_rule() {
    let errs = compile_errors(json!({"type": "object", "properties": {"a": {"$ref": "#/x"}}}));
    assert!(errs.contains(&format!("{BASE}.properties[a].$ref: Forbidden: $ref is not supported")), "{errs:?}");
    assert_eq!(
        compile_errors(json!({"type": "object", "x-kubernetes-validations": [{"rule": " "}]})),
        [format!("{BASE}.x-kubernetes-validations[0].rule: Required value: rule is not specified")]
    );
    assert!(compile_errors(json!({"type": "object", "x-kubernetes-validations": [{"rule": "self.x > 0"}]})).is_empty());
}

#[test]
fn test_compile_sorts_structural_errors_by_message() {
    let errs = compile_errors(json!({"type": "object", "properties": {"b": {}, "a": {}}}));
    assert_eq!(
        errs,
        [
            format!("{BASE}.properties[a].type: Required value: must not be empty for specified object fields"),
            format!("{BASE}.properties[b].type: Required value: must not be empty for specified object fields"),
        ]
    );
}

// ---------------------------------------------------------------------------------------------
// Shape
// ---------------------------------------------------------------------------------------------

#[test]
fn test_shape_follows_schema_markers() {
    let s = with_spec(json!({
        "name": {"type": "string"},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "selector": {"type": "object", "x-kubernetes-map-type": "atomic", "properties": {"a": {"type": "string"}}},
        "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
        "args": {"type": "array", "items": {"type": "string"}},
        "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["port", "protocol"],
                  "items": {"type": "object", "required": ["port", "protocol"],
                            "properties": {"port": {"type": "integer"}, "protocol": {"type": "string"}}}},
        "raw": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
        "port": {"x-kubernetes-int-or-string": true}
    }));
    let shape = s.shape();
    let spec = shape.field("spec");
    assert_eq!(spec.field("name"), &Shape::Atomic);
    assert_eq!(spec.field("labels"), &Shape::map_of(Shape::Atomic));
    assert_eq!(spec.field("selector"), &Shape::Atomic);
    assert_eq!(spec.field("tags"), &Shape::set());
    assert_eq!(spec.field("args"), &Shape::atomic_list(Shape::Atomic));
    assert_eq!(
        spec.field("ports").list_kind(),
        &ListKind::Map { keys: vec!["port".to_string(), "protocol".to_string()], merge_key: "port".to_string() }
    );
    assert_eq!(spec.field("ports").item().field("port"), &Shape::Atomic);
    assert_eq!(spec.field("raw"), &Shape::Untyped);
    assert_eq!(spec.field("port"), &Shape::Atomic);
}

#[test]
fn test_shape_gives_root_and_embedded_metadata_the_object_meta_shape() {
    let s = with_spec(json!({
        "template": {"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true}
    }));
    let shape = s.shape();
    for meta in [shape.field("metadata"), shape.field("spec").field("template").field("metadata")] {
        assert_eq!(meta.field("labels"), &Shape::map_of(Shape::Atomic));
        assert_eq!(meta.field("annotations"), &Shape::map_of(Shape::Atomic));
        assert_eq!(meta.field("finalizers"), &Shape::set());
        assert_eq!(
            meta.field("ownerReferences").list_kind(),
            &ListKind::Map { keys: vec!["uid".to_string()], merge_key: "uid".to_string() }
        );
    }
    assert_eq!(shape.field("apiVersion"), &Shape::Atomic);
    assert_eq!(shape.field("kind"), &Shape::Atomic);
}

#[test]
fn test_schema_is_cheap_to_clone_and_shares_shape() {
    let s = with_spec(json!({}));
    let t = s.clone();
    assert!(Arc::ptr_eq(&s.shape(), &t.shape()));
}

// ---------------------------------------------------------------------------------------------
// CEL rules
// ---------------------------------------------------------------------------------------------

#[test]
fn cel_rules_run_on_create_and_transition_rules_on_update_only() {
    let s = schema(json!({"type": "object", "properties": {"spec": {
        "type": "object",
        "x-kubernetes-validations": [
            {"rule": "self.size >= oldSelf.size", "message": "size cannot go down", "fieldPath": ".size", "reason": "FieldValueForbidden"},
            {"rule": "self.names.all(n, n != 'root')", "message": "root is reserved"}
        ],
        "properties": {"size": {"type": "integer"}, "names": {"type": "array", "items": {"type": "string"}}}
    }}}));
    let obj = |size: i64, names: Value| json!({"apiVersion": "example.com/v1", "kind": "Foo", "spec": {"size": size, "names": names}});
    // On create, the transition rule is skipped; the other one runs.
    assert!(messages(&s.validate_with_rules(&obj(1, json!(["a"])), None)).is_empty());
    assert_eq!(
        messages(&s.validate_with_rules(&obj(1, json!(["root"])), None)),
        [r#"spec: Invalid value: "object": root is reserved"#]
    );
    // On update, both run against the old object.
    let old = obj(3, json!(["a"]));
    assert!(messages(&s.validate_with_rules(&obj(4, json!(["a"])), Some(&old))).is_empty());
    assert_eq!(
        messages(&s.validate_with_rules(&obj(2, json!(["a"])), Some(&old))),
        ["spec.size: Forbidden: size cannot go down"]
    );
    // Ratcheting: an unchanged spec is not checked again, even if a rule now rejects it.
    let stale = obj(1, json!(["root"]));
    assert!(messages(&s.validate_with_rules(&stale, Some(&stale))).is_empty());
}

#[test]
fn cel_rules_that_do_not_compile_refuse_the_crd() {
    let errs = compile_errors(json!({"type": "object", "x-kubernetes-validations": [{"rule": "self.x >"}]}));
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(
        errs[0].contains("x-kubernetes-validations[0].rule: Invalid value: \"self.x >\": compilation failed"),
        "{errs:?}"
    );
}

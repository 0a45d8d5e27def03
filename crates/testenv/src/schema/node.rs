//! The compiled form of one `JSONSchemaProps` node.
//!
//! [`Node`] keeps what pruning, defaulting, validation and the merge shape need, in a form that
//! is cheap to walk: properties in a sorted map, `pattern` as a compiled regex, the
//! `x-kubernetes-*` extensions as plain fields. Value-validation junctors (`allOf`, `anyOf`,
//! `oneOf`, `not`) hold full nodes too, because kube-openapi validates them as full schemas.
//!
//! Formats are stored after apiextensions' `StripUnsupportedFormatsPostProcess`: a format the
//! CRD validator does not support (for example `int32`, `int64`, `float`, `double`) is dropped,
//! exactly as kube-apiserver drops it, so it neither validates nor affects type checks.

use std::collections::BTreeMap;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};
use regex::Regex;
use serde_json::Value;

use super::field_error::{FieldError, FieldPath};

/// How deep schemas and objects may nest before they are rejected instead of walked.
pub(crate) const MAX_DEPTH: usize = 256;

/// Formats kube-apiserver validates for CRDs (apiextensions `supportedVersionedFormats`), in
/// go-openapi's normalised spelling (dashes removed).
const SUPPORTED_FORMATS: &[&str] = &[
    "bsonobjectid",
    "uri",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "cidr",
    "mac",
    "uuid",
    "uuid3",
    "uuid4",
    "uuid5",
    "isbn",
    "isbn10",
    "isbn13",
    "creditcard",
    "ssn",
    "hexcolor",
    "rgbcolor",
    "byte",
    "password",
    "date",
    "duration",
    "datetime",
];

/// `additionalProperties`: a boolean or a schema.
#[derive(Debug)]
pub(crate) enum Additional {
    /// `additionalProperties: true|false`.
    Allows(bool),
    /// `additionalProperties: {...}`.
    Schema(Box<Node>),
}

/// A compiled `pattern`.
#[derive(Debug)]
pub(crate) struct Pattern {
    /// The pattern as written in the schema (used in messages).
    pub source: String,
    /// The compiled expression; `None` if it did not compile (the schema is then rejected).
    pub regex: Option<Regex>,
}

/// One compiled schema node.
#[derive(Debug, Default)]
pub(crate) struct Node {
    /// `type`, `None` when empty.
    pub type_: Option<String>,
    /// `x-kubernetes-int-or-string`.
    pub int_or_string: bool,
    /// `nullable`.
    pub nullable: bool,
    /// `format` after stripping formats CRDs do not support.
    pub format: Option<String>,
    /// `default`.
    pub default: Option<Value>,
    /// `title` and `description` are only kept to tell whether they were set.
    pub has_title: bool,
    /// See `has_title`.
    pub has_description: bool,

    /// `properties`.
    pub properties: BTreeMap<String, Node>,
    /// `additionalProperties`.
    pub additional: Option<Additional>,
    /// `items` (single-schema form; the array form is rejected at compile time).
    pub items: Option<Box<Node>>,

    /// `x-kubernetes-preserve-unknown-fields: true`.
    pub preserve_unknown_fields: bool,
    /// `x-kubernetes-embedded-resource: true`.
    pub embedded_resource: bool,
    /// `x-kubernetes-list-type`.
    pub list_type: Option<String>,
    /// `x-kubernetes-list-map-keys`.
    pub list_map_keys: Vec<String>,
    /// `x-kubernetes-map-type`.
    pub map_type: Option<String>,
    /// `x-kubernetes-validations`, compiled ([`super::cel`]).
    pub validations: Vec<super::cel::Rule>,

    /// `maximum`.
    pub maximum: Option<f64>,
    /// `exclusiveMaximum`.
    pub exclusive_maximum: bool,
    /// `minimum`.
    pub minimum: Option<f64>,
    /// `exclusiveMinimum`.
    pub exclusive_minimum: bool,
    /// `multipleOf`.
    pub multiple_of: Option<f64>,
    /// `maxLength`.
    pub max_length: Option<i64>,
    /// `minLength`.
    pub min_length: Option<i64>,
    /// `pattern`.
    pub pattern: Option<Pattern>,
    /// `maxItems`.
    pub max_items: Option<i64>,
    /// `minItems`.
    pub min_items: Option<i64>,
    /// `uniqueItems`.
    pub unique_items: bool,
    /// `maxProperties`.
    pub max_properties: Option<i64>,
    /// `minProperties`.
    pub min_properties: Option<i64>,
    /// `enum`; empty when not set.
    pub enum_: Vec<Value>,
    /// `required`.
    pub required: Vec<String>,
    /// `allOf`.
    pub all_of: Vec<Node>,
    /// `anyOf`.
    pub any_of: Vec<Node>,
    /// `oneOf`.
    pub one_of: Vec<Node>,
    /// `not`.
    pub not: Option<Box<Node>>,
}

impl Node {
    /// The types the value must have, as kube-openapi sees them: `x-kubernetes-int-or-string`
    /// turns into `integer,string`.
    pub fn types(&self) -> Vec<&str> {
        if self.int_or_string { vec!["integer", "string"] } else { self.type_.as_deref().into_iter().collect() }
    }

    /// The schema of the values of undeclared keys, if additionalProperties is a schema.
    pub fn additional_schema(&self) -> Option<&Node> {
        match &self.additional {
            Some(Additional::Schema(s)) => Some(s),
            _ => None,
        }
    }

    /// The schema that applies to field `key` for pruning and defaulting: a declared property,
    /// else the additionalProperties schema. The outer `Option` tells whether the field is
    /// covered at all (`additionalProperties: true` covers it with no schema).
    pub fn field_schema(&self, key: &str) -> Option<Option<&Node>> {
        if let Some(p) = self.properties.get(key) {
            Some(Some(p))
        } else {
            match &self.additional {
                Some(Additional::Schema(s)) => Some(Some(s)),
                Some(Additional::Allows(_)) => Some(None),
                None => None,
            }
        }
    }

    /// Build a node from its `JSONSchemaProps`, recording pattern compile errors (and nesting
    /// beyond [`MAX_DEPTH`]) at their paths. `path` is the field path of `props` in the CRD.
    pub fn build(props: &JSONSchemaProps, path: &FieldPath, depth: usize, errors: &mut Vec<FieldError>) -> Node {
        if depth > MAX_DEPTH {
            errors.push(FieldError::forbidden(
                path.as_field(),
                format!("must not be nested more than {MAX_DEPTH} levels deep"),
            ));
            return Node::default();
        }
        let child =
            |p: &JSONSchemaProps, sub: FieldPath, errors: &mut Vec<FieldError>| Node::build(p, &sub, depth + 1, errors);
        let pattern = props.pattern.as_ref().filter(|p| !p.is_empty()).map(|source| {
            let regex = match compile_pattern(source) {
                Ok(r) => Some(r),
                Err(e) => {
                    errors.push(FieldError::invalid(
                        path.child("pattern").as_field(),
                        source.as_str(),
                        format!("must be a valid regular expression, but isn't: {e}"),
                    ));
                    None
                }
            };
            Pattern { source: source.clone(), regex }
        });
        let properties = props
            .properties
            .iter()
            .flatten()
            .map(|(k, p)| (k.clone(), child(p, path.child("properties").key(k), errors)))
            .collect();
        let additional = props.additional_properties.as_ref().map(|a| match a {
            JSONSchemaPropsOrBool::Bool(b) => Additional::Allows(*b),
            JSONSchemaPropsOrBool::Schema(s) => {
                Additional::Schema(Box::new(child(s, path.child("additionalProperties"), errors)))
            }
        });
        let items = match &props.items {
            Some(JSONSchemaPropsOrArray::Schema(s)) => Some(Box::new(child(s, path.child("items"), errors))),
            // The array form is rejected by the compile checks; nothing to build.
            Some(JSONSchemaPropsOrArray::Schemas(_)) | None => None,
        };
        let junctor = |list: &Option<Vec<JSONSchemaProps>>, name: &str, errors: &mut Vec<FieldError>| {
            list.iter()
                .flatten()
                .enumerate()
                .map(|(i, p)| child(p, path.child(name).index(i), errors))
                .collect::<Vec<_>>()
        };
        let all_of = junctor(&props.all_of, "allOf", errors);
        let any_of = junctor(&props.any_of, "anyOf", errors);
        let one_of = junctor(&props.one_of, "oneOf", errors);
        let not = props.not.as_ref().map(|n| Box::new(child(n, path.child("not"), errors)));

        Node {
            type_: props.type_.clone().filter(|t| !t.is_empty()),
            int_or_string: props.x_kubernetes_int_or_string == Some(true),
            nullable: props.nullable == Some(true),
            format: props.format.as_deref().filter(|f| is_supported_format(f)).map(str::to_string),
            default: props.default.as_ref().map(|d| d.0.clone()),
            has_title: props.title.as_deref().is_some_and(|t| !t.is_empty()),
            has_description: props.description.as_deref().is_some_and(|t| !t.is_empty()),
            properties,
            additional,
            items,
            preserve_unknown_fields: props.x_kubernetes_preserve_unknown_fields == Some(true),
            embedded_resource: props.x_kubernetes_embedded_resource == Some(true),
            list_type: props.x_kubernetes_list_type.clone(),
            list_map_keys: props.x_kubernetes_list_map_keys.clone().unwrap_or_default(),
            map_type: props.x_kubernetes_map_type.clone(),
            validations: super::cel::rules(props.x_kubernetes_validations.as_ref()),
            maximum: props.maximum,
            exclusive_maximum: props.exclusive_maximum == Some(true),
            minimum: props.minimum,
            exclusive_minimum: props.exclusive_minimum == Some(true),
            multiple_of: props.multiple_of,
            max_length: props.max_length,
            min_length: props.min_length,
            pattern,
            max_items: props.max_items,
            min_items: props.min_items,
            unique_items: props.unique_items == Some(true),
            max_properties: props.max_properties,
            min_properties: props.min_properties,
            enum_: props.enum_.iter().flatten().map(|v| v.0.clone()).collect(),
            required: props.required.clone().unwrap_or_default(),
            all_of,
            any_of,
            one_of,
            not,
        }
    }
}

/// Whether CRD validation keeps `format` (go-openapi normalises names by removing dashes, so
/// `date-time` is `datetime`).
pub(crate) fn is_supported_format(format: &str) -> bool {
    let normalized = format.replace('-', "");
    SUPPORTED_FORMATS.contains(&normalized.as_str())
}

/// Compile a schema `pattern` with Go `regexp` (RE2) semantics as far as the `regex` crate
/// allows.
///
/// kube-apiserver compiles patterns with Go's `regexp`, whose Perl classes are ASCII-only while
/// the `regex` crate's are Unicode-aware; `\d`, `\w`, `\s` (and their negations) are therefore
/// rewritten to their ASCII sets and `\b`/`\B` to ASCII word boundaries. Remaining deviations:
/// octal escapes (`\123`) and `\Q..\E` quoting, which Go accepts, are rejected here; repetition
/// counts above 1000, which Go rejects, are accepted here.
pub(crate) fn compile_pattern(pattern: &str) -> Result<Regex, regex::Error> {
    regex::RegexBuilder::new(&translate_pattern(pattern))
        // A bound on the compiled program keeps hostile patterns from costing much memory.
        .size_limit(1 << 20)
        .build()
}

fn translate_pattern(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len() + 8);
    let mut chars = pattern.chars().peekable();
    // Whether we are inside `[...]`. Perl classes become bracketed classes, which the regex
    // crate accepts both outside a class and nested inside one.
    let mut in_class = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('d') => out.push_str("[0-9]"),
                Some('D') => out.push_str("[^0-9]"),
                Some('w') => out.push_str("[0-9A-Za-z_]"),
                Some('W') => out.push_str("[^0-9A-Za-z_]"),
                Some('s') => out.push_str("[\\t\\n\\f\\r ]"),
                Some('S') => out.push_str("[^\\t\\n\\f\\r ]"),
                Some('b') if !in_class => out.push_str("(?-u:\\b)"),
                Some('B') if !in_class => out.push_str("(?-u:\\B)"),
                Some(other) => {
                    out.push('\\');
                    out.push(other);
                }
                None => out.push('\\'),
            },
            // Inside a class, `[:name:]` is a POSIX class in both dialects; any other `[` is a
            // literal in Go but would open a nested class here.
            '[' if in_class => {
                if chars.peek() == Some(&':') {
                    out.push('[');
                    for c in chars.by_ref() {
                        out.push(c);
                        if c == ']' {
                            break;
                        }
                    }
                } else {
                    out.push_str("\\[");
                }
            }
            '[' => {
                in_class = true;
                out.push('[');
                // A `]` right after `[` or `[^` is a literal in both dialects.
                if chars.peek() == Some(&'^') {
                    out.push('^');
                    chars.next();
                }
                if chars.peek() == Some(&']') {
                    out.push_str("\\]");
                    chars.next();
                }
            }
            ']' if in_class => {
                in_class = false;
                out.push(']');
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_perl_classes_are_ascii_only_like_go() {
        let r = compile_pattern(r"^\d+$").unwrap();
        assert!(r.is_match("123"));
        assert!(!r.is_match("١٢٣"), "Arabic-Indic digits are not \\d in Go");
        let r = compile_pattern(r"^[\w-]+$").unwrap();
        assert!(r.is_match("a_b-c"));
        assert!(!r.is_match("é"));
        let r = compile_pattern(r"^\S+\s\S+$").unwrap();
        assert!(r.is_match("a b"));
        let r = compile_pattern(r"\bfoo\b").unwrap();
        assert!(r.is_match("a foo b"));
    }

    #[test]
    fn test_literal_bracket_first_in_class() {
        let r = compile_pattern(r"^[]a]+$").unwrap();
        assert!(r.is_match("]a]"));
        let r = compile_pattern(r"^[^]a]+$").unwrap();
        assert!(r.is_match("bc"));
        assert!(!r.is_match("]"));
    }

    #[test]
    fn test_bracket_inside_class_is_literal_like_go() {
        let r = compile_pattern(r"^[a[]+$").unwrap();
        assert!(r.is_match("a[a"));
        let r = compile_pattern(r"^[[:alpha:]_]+$").unwrap();
        assert!(r.is_match("ab_c"));
        assert!(!r.is_match("a1"));
    }

    #[test]
    fn test_invalid_pattern_is_an_error() {
        assert!(compile_pattern("(").is_err());
        assert!(compile_pattern("+").is_err());
    }

    #[test]
    fn test_unsupported_formats_are_stripped() {
        assert!(is_supported_format("date-time"));
        assert!(is_supported_format("byte"));
        assert!(!is_supported_format("int32"));
        assert!(!is_supported_format("int-or-string"));
    }
}

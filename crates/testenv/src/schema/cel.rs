//! `x-kubernetes-validations`: the CEL rules of a CRD schema, evaluated as kube-apiserver's
//! `apiextensions-apiserver/pkg/apiserver/schema/cel` validator does.
//!
//! - Each rule runs with `self` bound to the value at its schema node, and a *transition rule*
//!   (one that names `oldSelf`) with `oldSelf` bound to the old object's value at the same place.
//!   Transition rules run only on updates, where the old value can be correlated: object
//!   properties and `additionalProperties` by name, `map` list items by their keys; items of
//!   other lists have no old value.
//! - A value equal to its old value is not checked again (kube-apiserver's validation
//!   ratcheting), so a rule added to a CRD does not block status writes of older objects.
//! - A rule that is false gives `Invalid value: "<type>": <message>` at the node's path (or at
//!   `fieldPath` under it), or the kind its `reason` names; one that fails to evaluate gives
//!   `rule evaluation error`. Rules that do not compile are refused with the CRD
//!   ([`compile_error`]).
//!
//! Not modelled: cost budgets, `messageExpression`, the type checking CEL does at CRD
//! creation (a rule naming an unknown field fails when it runs instead).

use std::collections::HashMap;
use std::sync::Arc;

use cel_interpreter::{Context, Program, Value as Cel};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::ValidationRule;
use serde_json::Value;

use super::field_error::{FieldError, FieldErrorKind, FieldPath};
use super::node::{Additional, MAX_DEPTH, Node};

/// One compiled rule.
pub(crate) struct Rule {
    program: Option<Arc<Program>>,
    rule: String,
    message: String,
    field_path: Option<String>,
    reason: Option<String>,
    transition: bool,
}

impl std::fmt::Debug for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rule").field("rule", &self.rule).field("transition", &self.transition).finish()
    }
}

/// Whether a rule names `oldSelf` (as an identifier, not inside a longer name).
fn names_old_self(rule: &str) -> bool {
    rule.match_indices("oldSelf").any(|(i, m)| {
        let before = rule[..i].chars().next_back();
        let after = rule[i + m.len()..].chars().next();
        let ident = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
        !ident(before) && !ident(after)
    })
}

/// The rules of a schema node, compiled.
pub(crate) fn rules(rules: Option<&Vec<ValidationRule>>) -> Vec<Rule> {
    rules
        .into_iter()
        .flatten()
        .map(|r| Rule {
            program: compile(&r.rule).ok().map(Arc::new),
            rule: r.rule.clone(),
            message: r.message.clone().unwrap_or_default(),
            field_path: r.field_path.clone().filter(|p| !p.trim().is_empty()),
            reason: r.reason.clone(),
            transition: names_old_self(&r.rule),
        })
        .collect()
}

/// Compile a rule. The parser panics on some malformed input instead of returning an error:
/// that counts as a compilation error too, so a bad rule cannot take the server down.
fn compile(rule: &str) -> Result<Program, String> {
    match std::panic::catch_unwind(|| Program::compile(rule)) {
        Ok(Ok(program)) => Ok(program),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("syntax error".to_string()),
    }
}

/// Why a rule would be refused at CRD creation, if it would: it does not compile.
pub(crate) fn compile_error(rule: &str) -> Option<String> {
    compile(rule).err().map(|e| format!("compilation failed: {e}"))
}

/// Evaluate every rule of `root` over `obj`, with `old` the object before an update.
pub(crate) fn validate(root: &Node, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut errors = Vec::new();
    walk(root, obj, old, &FieldPath::root(), &mut errors, 0);
    errors
}

fn walk(node: &Node, value: &Value, old: Option<&Value>, path: &FieldPath, errors: &mut Vec<FieldError>, depth: usize) {
    if depth > MAX_DEPTH || old == Some(value) {
        return;
    }
    for rule in &node.validations {
        if rule.transition && old.is_none() {
            continue;
        }
        check(rule, value, old, path, errors);
    }
    match value {
        Value::Object(map) => {
            let old_map = old.and_then(Value::as_object);
            for (name, child) in map {
                let schema = match node.properties.get(name) {
                    Some(s) => Some(s),
                    None => match &node.additional {
                        Some(Additional::Schema(s)) => Some(s.as_ref()),
                        _ => None,
                    },
                };
                let Some(schema) = schema else { continue };
                let child_path = if node.properties.contains_key(name) { path.child(name) } else { path.key(name) };
                let old_child = old_map.and_then(|m| m.get(name));
                walk(schema, child, old_child, &child_path, errors, depth + 1);
            }
        }
        Value::Array(items) => {
            let Some(schema) = &node.items else { return };
            let old_items = old.and_then(Value::as_array);
            for (i, item) in items.iter().enumerate() {
                let old_item = if node.list_type.as_deref() == Some("map") && !node.list_map_keys.is_empty() {
                    let key = |v: &Value| node.list_map_keys.iter().map(|k| v.get(k).cloned()).collect::<Vec<_>>();
                    old_items.and_then(|o| o.iter().find(|o| key(o) == key(item)))
                } else {
                    None
                };
                walk(schema, item, old_item, &path.index(i), errors, depth + 1);
            }
        }
        _ => {}
    }
}

fn check(rule: &Rule, value: &Value, old: Option<&Value>, path: &FieldPath, errors: &mut Vec<FieldError>) {
    let Some(program) = &rule.program else { return };
    let mut context = Context::default();
    context.add_variable_from_value("self", to_cel(value));
    if let Some(old) = old {
        context.add_variable_from_value("oldSelf", to_cel(old));
    }
    let at = match &rule.field_path {
        Some(p) => p.trim_start_matches('.').split('.').filter(|s| !s.is_empty()).fold(path.clone(), |p, s| p.child(s)),
        None => path.clone(),
    };
    match program.execute(&context) {
        Ok(Cel::Bool(true)) => {}
        Ok(Cel::Bool(false)) => {
            let message =
                if rule.message.is_empty() { format!("failed rule: {}", rule.rule) } else { rule.message.clone() };
            let kind = match rule.reason.as_deref() {
                Some("FieldValueForbidden") => FieldErrorKind::Forbidden,
                Some("FieldValueRequired") => FieldErrorKind::Required,
                Some("FieldValueDuplicate") => FieldErrorKind::Duplicate,
                _ => FieldErrorKind::Invalid,
            };
            let bad_value = (kind == FieldErrorKind::Invalid).then(|| Value::String(type_name(value).into()));
            errors.push(FieldError::new(kind, at.as_field(), bad_value, message));
        }
        Ok(other) => errors.push(FieldError::invalid(
            at.as_field(),
            type_name(value),
            format!("rule evaluation error: rule {:?} gave {other:?}, not a bool", rule.rule),
        )),
        Err(e) => {
            errors.push(FieldError::invalid(at.as_field(), type_name(value), format!("rule evaluation error: {e}")))
        }
    }
}

/// The OpenAPI type name kube-apiserver shows as the bad value.
fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// A JSON value as CEL sees it: integers are `int`, other numbers `double`.
fn to_cel(value: &Value) -> Cel {
    match value {
        Value::Null => Cel::Null,
        Value::Bool(b) => Cel::Bool(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => Cel::Int(i),
            None => n.as_u64().map(Cel::UInt).unwrap_or_else(|| Cel::Float(n.as_f64().unwrap_or_default())),
        },
        Value::String(s) => Cel::String(Arc::new(s.clone())),
        Value::Array(items) => Cel::List(Arc::new(items.iter().map(to_cel).collect())),
        Value::Object(map) => {
            let entries: HashMap<String, Cel> = map.iter().map(|(k, v)| (k.clone(), to_cel(v))).collect();
            Cel::from(entries)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn old_self_is_found_as_an_identifier_only() {
        assert!(names_old_self("self.x == oldSelf.x"));
        assert!(names_old_self("oldSelf"));
        assert!(!names_old_self("self.oldSelfish > 0"));
        assert!(!names_old_self("self.x > 0"));
    }

    #[test]
    fn rules_that_do_not_compile_are_named() {
        assert!(compile_error("self.x > 0").is_none());
        assert!(compile_error("self.x >").is_some());
    }
}

//! `POST pods/<name>/binding`: assign a pod to a node, as kube-scheduler does.
//!
//! Follows `BindingREST` in `pkg/registry/core/pod/storage/storage.go`: one guaranteed update
//! that sets `spec.nodeName`, merges the binding's annotations and sets the `PodScheduled`
//! condition to `True` (clearing the `Unschedulable` reason and message the scheduler may have
//! written). A pod that is being deleted, already bound, or gated cannot be bound; those
//! refusals are 409 Conflicts on `pods/binding`.

use serde_json::{Map, Value, json};

use super::{Api, Mutation, Part, WriteOptions, meta_str};
use crate::error::ApiError;
use crate::registry::ResourceDef;
use crate::schema::FieldError;

impl Api {
    /// Bind pod `name` to the node named by `binding.target.name`.
    ///
    /// `binding` is a core/v1 `Binding` as JSON. Its `metadata.uid` and
    /// `metadata.resourceVersion`, when set, are preconditions on the pod.
    pub fn bind(
        &self,
        def: &ResourceDef,
        namespace: &str,
        name: &str,
        binding: &Value,
        opts: &WriteOptions,
    ) -> Result<(), ApiError> {
        if let Some(n) = meta_str(binding, "name").filter(|n| !n.is_empty())
            && n != name
        {
            return Err(ApiError::bad_request("name in URL does not match name in Binding object"));
        }
        let node = binding.pointer("/target/name").and_then(Value::as_str).unwrap_or("").to_string();
        if node.is_empty() {
            return Err(ApiError::invalid_kind("", "Binding", name, &[FieldError::required("target.name", "")]));
        }
        let uid = meta_str(binding, "uid").filter(|s| !s.is_empty()).map(str::to_string);
        let precondition = meta_str(binding, "resourceVersion").filter(|s| !s.is_empty()).map(str::to_string);
        let annotations = binding.pointer("/metadata/annotations").and_then(Value::as_object).cloned();
        let now = self.clock.now_rfc3339();
        self.guaranteed_update(def, namespace, name, Part::Whole, opts, false, |current| {
            let Some(current) = current else { return Err(ApiError::not_found(def, name)) };
            if let Some(uid) = &uid
                && meta_str(current, "uid") != Some(uid.as_str())
            {
                return Err(binding_conflict(
                    name,
                    &format!(
                        "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                        meta_str(current, "uid").unwrap_or("")
                    ),
                ));
            }
            if current.pointer("/metadata/deletionTimestamp").is_some_and(|t| !t.is_null()) {
                return Err(binding_conflict(
                    name,
                    &format!("pod {name} is being deleted, cannot be assigned to a host"),
                ));
            }
            if let Some(existing) = current.pointer("/spec/nodeName").and_then(Value::as_str).filter(|s| !s.is_empty())
            {
                return Err(binding_conflict(name, &format!("pod {name} is already assigned to node \"{existing}\"")));
            }
            if current.pointer("/spec/schedulingGates").and_then(Value::as_array).is_some_and(|g| !g.is_empty()) {
                return Err(binding_conflict(name, &format!("pod {name} has non-empty .spec.schedulingGates")));
            }
            let mut value = current.clone();
            super::set_path(&mut value, &["spec", "nodeName"], Some(json!(node)));
            if let Some(extra) = &annotations {
                let mut merged =
                    value.pointer("/metadata/annotations").and_then(Value::as_object).cloned().unwrap_or_default();
                merged.extend(extra.iter().map(|(k, v)| (k.clone(), v.clone())));
                super::set_path(&mut value, &["metadata", "annotations"], Some(Value::Object(merged)));
            }
            set_scheduled(&mut value, &now);
            // Storage-level update: managedFields stay as they are (`applied`).
            Ok(Mutation { value, applied: true, precondition: precondition.clone() })
        })?;
        Ok(())
    }
}

/// `podutil.UpdatePodCondition(status, {Type: PodScheduled, Status: True})`: the condition is
/// replaced, keeping its transition time when its status does not change.
fn set_scheduled(pod: &mut Value, now: &str) {
    let mut conditions: Vec<Value> =
        pod.pointer("/status/conditions").and_then(Value::as_array).cloned().unwrap_or_default();
    let position = conditions.iter().position(|c| c.get("type").and_then(Value::as_str) == Some("PodScheduled"));
    let mut condition = Map::new();
    condition.insert("type".into(), json!("PodScheduled"));
    condition.insert("status".into(), json!("True"));
    match position {
        Some(i) => {
            let kept = conditions[i].get("status").and_then(Value::as_str) == Some("True");
            let since = conditions[i].get("lastTransitionTime").filter(|_| kept).cloned().unwrap_or_else(|| json!(now));
            condition.insert("lastTransitionTime".into(), since);
            conditions[i] = Value::Object(condition);
        }
        None => {
            condition.insert("lastTransitionTime".into(), json!(now));
            conditions.push(Value::Object(condition));
        }
    }
    super::set_path(pod, &["status", "conditions"], Some(Value::Array(conditions)));
}

/// `errors.NewConflict(pods/binding, name, err)`.
fn binding_conflict(name: &str, why: &str) -> ApiError {
    ApiError {
        code: 409,
        reason: "Conflict",
        message: format!("Operation cannot be fulfilled on pods/binding \"{name}\": {why}"),
        details: Some(json!({"name": name, "kind": "pods/binding"})),
    }
}

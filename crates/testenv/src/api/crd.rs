//! CustomResourceDefinitions: validation, defaulting and status of the CRD itself (J1–J3), and
//! turning an established CRD into served resources (J8, J9).
//!
//! Where kube-apiserver runs separate controllers (naming, establishing) that write the CRD
//! status shortly after it is created, this server computes the status as part of the write, so
//! a CRD is Established in the response to its create: clients that wait for the condition see
//! it at once, and clients that do not wait never race.

use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaProps;
use serde_json::{Value, json};

use super::Api;
use crate::error::ApiError;
use crate::registry::{Custom, Flavor, NameUse, ResourceDef, ScaleSpec};
use crate::schema::{FieldError, StructuralSchema};
use crate::shape::Shape;

impl Api {
    /// Validate and default a CRD and compute its status.
    pub(crate) fn prepare_crd(&self, crd: &mut Value, old: Option<&Value>) -> Result<(), ApiError> {
        let name = crd.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("").to_string();
        let mut errors = Vec::new();
        let group = crd.pointer("/spec/group").and_then(Value::as_str).unwrap_or("").to_string();
        let plural = crd.pointer("/spec/names/plural").and_then(Value::as_str).unwrap_or("").to_string();
        let kind = crd.pointer("/spec/names/kind").and_then(Value::as_str).unwrap_or("").to_string();
        if group.is_empty() {
            errors.push(FieldError::required("spec.group", ""));
        } else if !group.contains('.') {
            errors.push(FieldError::invalid("spec.group", json!(group), "should be a domain with at least one dot"));
        }
        if plural.is_empty() {
            errors.push(FieldError::required("spec.names.plural", ""));
        }
        if kind.is_empty() {
            errors.push(FieldError::required("spec.names.kind", ""));
        }
        if !group.is_empty() && !plural.is_empty() && name != format!("{plural}.{group}") {
            errors.push(FieldError::invalid(
                "metadata.name",
                json!(name),
                "must be spec.names.plural+\".\"+spec.group",
            ));
        }
        match crd.pointer("/spec/scope").and_then(Value::as_str) {
            Some("Namespaced" | "Cluster") => {}
            Some(other) => {
                errors.push(FieldError::not_supported("spec.scope", json!(other), &["Cluster", "Namespaced"]))
            }
            None => errors.push(FieldError::required("spec.scope", "")),
        }
        let versions = crd.pointer("/spec/versions").and_then(Value::as_array).cloned().unwrap_or_default();
        if versions.is_empty() {
            errors
                .push(FieldError::required("spec.versions", "must have exactly one version marked as storage version"));
        }
        let storage: Vec<&Value> =
            versions.iter().filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true)).collect();
        if !versions.is_empty() && storage.len() != 1 {
            errors.push(FieldError::invalid(
                "spec.versions",
                json!(versions.iter().filter_map(|v| v.get("name")).collect::<Vec<_>>()),
                "must have exactly one version marked as storage version",
            ));
        }
        if !versions.is_empty() && !versions.iter().any(|v| v.get("served").and_then(Value::as_bool) == Some(true)) {
            errors.push(FieldError::invalid("spec.versions", json!(null), "must have at least one served version"));
        }
        let mut seen = BTreeSet::new();
        for (i, v) in versions.iter().enumerate() {
            let vname = v.get("name").and_then(Value::as_str).unwrap_or("");
            if vname.is_empty() {
                errors.push(FieldError::required(format!("spec.versions[{i}].name"), ""));
            } else if !seen.insert(vname.to_string()) {
                errors.push(FieldError::invalid(format!("spec.versions[{i}].name"), json!(vname), "must be unique"));
            }
            match v.pointer("/schema/openAPIV3Schema") {
                None => errors.push(FieldError::required(
                    format!("spec.versions[{i}].schema.openAPIV3Schema"),
                    "schemas are required",
                )),
                Some(s) => match serde_json::from_value::<JSONSchemaProps>(s.clone()) {
                    Err(e) => errors.push(FieldError::invalid(
                        format!("spec.versions[{i}].schema.openAPIV3Schema"),
                        json!(null),
                        e.to_string(),
                    )),
                    Ok(props) => {
                        if let Err(errs) =
                            StructuralSchema::compile_at(&props, &format!("spec.versions[{i}].schema.openAPIV3Schema"))
                        {
                            errors.extend(errs);
                        }
                    }
                },
            }
        }
        if !errors.is_empty() {
            return Err(ApiError::invalid_kind("apiextensions.k8s.io", "CustomResourceDefinition", &name, &errors));
        }
        // Defaults (SetDefaults_CustomResourceDefinition).
        if let Some(names) = crd.pointer_mut("/spec/names").and_then(Value::as_object_mut) {
            names.entry("singular").or_insert_with(|| json!(kind.to_lowercase()));
            names.entry("listKind").or_insert_with(|| json!(format!("{kind}List")));
        }
        if let Some(spec) = crd.get_mut("spec").and_then(Value::as_object_mut) {
            spec.entry("conversion").or_insert_with(|| json!({"strategy": "None"}));
        }
        self.crd_status(crd, old, &group, &name);
        Ok(())
    }

    /// Names acceptance and establishment (the naming and establishing controllers).
    fn crd_status(&self, crd: &mut Value, old: Option<&Value>, group: &str, name: &str) {
        let now = self.clock.now_rfc3339();
        let names = crd.pointer("/spec/names").cloned().unwrap_or_else(|| json!({}));
        let taken = self.registry.names_in_group(group, name);
        let is_taken = |n: &str, uses: &[NameUse]| taken.iter().any(|(t, u)| t == n && uses.contains(u));
        let s = |k: &str| names.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        let resource_names = [NameUse::Plural, NameUse::Singular, NameUse::ShortName];
        let conflict = if is_taken(&s("plural"), &resource_names) {
            Some(("PluralConflict", format!("\"{}\" is already in use", s("plural"))))
        } else if is_taken(&s("singular"), &resource_names) {
            Some(("SingularConflict", format!("\"{}\" is already in use", s("singular"))))
        } else if let Some(short) = names
            .get("shortNames")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .find(|sn| is_taken(sn, &resource_names))
        {
            Some(("ShortNamesConflict", format!("\"{short}\" is already in use")))
        } else if is_taken(&s("kind"), &[NameUse::Kind]) {
            Some(("KindConflict", format!("\"{}\" is already in use", s("kind"))))
        } else if is_taken(&s("listKind"), &[NameUse::ListKind]) {
            Some(("ListKindConflict", format!("\"{}\" is already in use", s("listKind"))))
        } else {
            None
        };
        let old_status = old.and_then(|o| o.get("status"));
        let old_conditions =
            old_status.and_then(|s| s.get("conditions")).and_then(Value::as_array).cloned().unwrap_or_default();
        let condition = |ty: &str, status: &str, reason: &str, message: &str| {
            // lastTransitionTime changes only when the status does.
            let previous = old_conditions.iter().find(|c| c.get("type").and_then(Value::as_str) == Some(ty));
            let ltt = match previous {
                Some(p) if p.get("status").and_then(Value::as_str) == Some(status) => {
                    p.get("lastTransitionTime").cloned().unwrap_or_else(|| json!(now))
                }
                _ => json!(now),
            };
            json!({"type": ty, "status": status, "lastTransitionTime": ltt, "reason": reason, "message": message})
        };
        let mut conditions = Vec::new();
        let accepted_names = match &conflict {
            None => {
                conditions.push(condition("NamesAccepted", "True", "NoConflicts", "no conflicts found"));
                conditions.push(condition(
                    "Established",
                    "True",
                    "InitialNamesAccepted",
                    "the initial names have been accepted",
                ));
                names.clone()
            }
            Some((reason, message)) => {
                conditions.push(condition("NamesAccepted", "False", reason, message));
                conditions.push(condition("Established", "False", "NotAccepted", "not all names are accepted"));
                old_status
                    .and_then(|s| s.get("acceptedNames"))
                    .cloned()
                    .unwrap_or_else(|| json!({"plural": "", "kind": ""}))
            }
        };
        for c in &old_conditions {
            if c.get("type").and_then(Value::as_str) == Some("Terminating") {
                conditions.push(c.clone());
            }
        }
        let mut stored: Vec<Value> =
            old_status.and_then(|s| s.get("storedVersions")).and_then(Value::as_array).cloned().unwrap_or_default();
        if let Some(sv) = crd
            .pointer("/spec/versions")
            .and_then(Value::as_array)
            .and_then(|vs| vs.iter().find(|v| v.get("storage").and_then(Value::as_bool) == Some(true)))
            .and_then(|v| v.get("name"))
            && !stored.contains(sv)
        {
            stored.push(sv.clone());
        }
        if let Some(obj) = crd.as_object_mut() {
            obj.insert(
                "status".into(),
                json!({"acceptedNames": accepted_names, "conditions": conditions, "storedVersions": stored}),
            );
        }
    }

    /// Serve (or stop serving) the resources of a stored CRD.
    pub(crate) fn sync_crd(&self, crd: &Value) {
        let name = crd.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("").to_string();
        let established = crd.pointer("/status/conditions").and_then(Value::as_array).is_some_and(|cs| {
            cs.iter().any(|c| c.get("type") == Some(&json!("Established")) && c.get("status") == Some(&json!("True")))
        });
        if !established {
            self.registry.remove_crd(&name);
            return;
        }
        let terminating = crd.pointer("/metadata/deletionTimestamp").is_some_and(|v| !v.is_null());
        let group = crd.pointer("/spec/group").and_then(Value::as_str).unwrap_or("").to_string();
        let names = crd.pointer("/status/acceptedNames").cloned().unwrap_or_else(|| json!({}));
        let s = |k: &str| names.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        let list = |k: &str| -> Vec<String> {
            names
                .get(k)
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(|x| x.as_str().map(str::to_string)).collect())
                .unwrap_or_default()
        };
        let namespaced = crd.pointer("/spec/scope").and_then(Value::as_str) == Some("Namespaced");
        let versions = crd.pointer("/spec/versions").and_then(Value::as_array).cloned().unwrap_or_default();
        let storage_version = versions
            .iter()
            .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
            .and_then(|v| v.get("name"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let mut defs = Vec::new();
        for v in versions.iter().filter(|v| v.get("served").and_then(Value::as_bool) == Some(true)) {
            let version = v.get("name").and_then(Value::as_str).unwrap_or("").to_string();
            let schema = v
                .pointer("/schema/openAPIV3Schema")
                .and_then(|s| serde_json::from_value::<JSONSchemaProps>(s.clone()).ok())
                .and_then(|p| StructuralSchema::compile(&p).ok());
            let has_defaults = v.pointer("/schema/openAPIV3Schema").is_some_and(contains_default);
            // Objects remember the schema they were defaulted with; a changed schema re-defaults
            // them on read (J5), an unrelated CRD change does not.
            let epoch = schema_epoch(v.pointer("/schema/openAPIV3Schema"));
            let shape = schema.as_ref().map(|s| s.shape()).unwrap_or_else(|| Arc::new(Shape::Untyped));
            let columns = crate::table::crd_columns(
                v.get("additionalPrinterColumns").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]),
            );
            let scale = v.pointer("/subresources/scale").map(|sc| ScaleSpec {
                spec_replicas_path: sc
                    .get("specReplicasPath")
                    .and_then(Value::as_str)
                    .unwrap_or(".spec.replicas")
                    .to_string(),
                status_replicas_path: sc
                    .get("statusReplicasPath")
                    .and_then(Value::as_str)
                    .unwrap_or(".status.replicas")
                    .to_string(),
                label_selector_path: sc.get("labelSelectorPath").and_then(Value::as_str).map(str::to_string),
            });
            let deprecated = v.get("deprecated").and_then(Value::as_bool) == Some(true);
            let deprecation_warning = deprecated.then(|| {
                v.get("deprecationWarning")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .unwrap_or_else(|| format!("{group}/{version} {} is deprecated", s("kind")))
            });
            let selectable_fields = v
                .get("selectableFields")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|f| f.get("jsonPath").and_then(Value::as_str))
                        .map(|p| p.trim_start_matches('.').to_string())
                        .collect()
                })
                .unwrap_or_default();
            defs.push(ResourceDef {
                group: group.clone(),
                version: version.clone(),
                plural: s("plural"),
                singular: s("singular"),
                kind: s("kind"),
                list_kind: s("listKind"),
                namespaced,
                short_names: list("shortNames"),
                categories: list("categories"),
                storage: format!("{}.{}", s("plural"), group).into(),
                status: v.pointer("/subresources/status").is_some(),
                scale,
                extra_subresources: vec![],
                shape,
                flavor: Flavor::Custom(Custom {
                    crd_name: name.clone(),
                    schema,
                    columns,
                    epoch,
                    terminating,
                    deprecation_warning,
                    selectable_fields,
                    storage_version: storage_version.clone(),
                    has_defaults,
                }),
            });
        }
        self.registry.set_crd(&name, defs);
    }
}

fn schema_epoch(schema: Option<&Value>) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    schema.map(Value::to_string).unwrap_or_default().hash(&mut h);
    h.finish()
}

fn contains_default(v: &Value) -> bool {
    match v {
        Value::Object(m) => m.contains_key("default") || m.values().any(contains_default),
        Value::Array(a) => a.iter().any(contains_default),
        _ => false,
    }
}

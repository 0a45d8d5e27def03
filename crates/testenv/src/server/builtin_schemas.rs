//! OpenAPI schemas of the built-in kinds, generated from k8s-openapi's `schemars` support, for
//! `/openapi/v3` and `/openapi/v2` (checklist K4).
//!
//! The schemas carry kube-apiserver's names (`io.k8s.api.apps.v1.Deployment`), descriptions and
//! `x-kubernetes-group-version-kind`, which is how `kubectl explain` finds them. kubectl's
//! client-side apply computes its strategic merge patch from the same schemas
//! (`x-kubernetes-patch-strategy`, `x-kubernetes-patch-merge-key`), and k8s-openapi does not
//! carry those; they are added here from the shapes that strategic merge patch and server-side
//! apply already use ([`crate::builtin_shapes`]), plus the two `retainKeys` strategies, so that
//! kubectl merges lists exactly as the server does.

use std::collections::{BTreeSet, HashMap};
use std::sync::LazyLock;

use k8s_openapi::api::{
    apps::v1 as apps, authentication::v1 as authentication, authorization::v1 as authorization,
    autoscaling::v2 as autoscaling, batch::v1 as batch, coordination::v1 as coordination, core::v1 as core,
    events::v1 as events, networking::v1 as networking, policy::v1 as policy, rbac::v1 as rbac,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiext;
use schemars::generate::{SchemaGenerator, SchemaSettings};
use serde_json::{Map, Value, json};

use crate::shape::{ListKind, Shape};

type SchemaFn = fn(&mut SchemaGenerator) -> schemars::Schema;

fn of<T: schemars::JsonSchema>(generator: &mut SchemaGenerator) -> schemars::Schema {
    generator.subschema_for::<T>()
}

/// The Rust type of every built-in kind the registry serves, by group, version and kind.
const TYPES: &[(&str, &str, &str, SchemaFn)] = &[
    ("", "v1", "Namespace", of::<core::Namespace>),
    ("", "v1", "ConfigMap", of::<core::ConfigMap>),
    ("", "v1", "Secret", of::<core::Secret>),
    ("", "v1", "Pod", of::<core::Pod>),
    ("", "v1", "Node", of::<core::Node>),
    ("", "v1", "Service", of::<core::Service>),
    ("", "v1", "Endpoints", of::<core::Endpoints>),
    ("", "v1", "Event", of::<core::Event>),
    ("", "v1", "ServiceAccount", of::<core::ServiceAccount>),
    ("", "v1", "PersistentVolumeClaim", of::<core::PersistentVolumeClaim>),
    ("", "v1", "PersistentVolume", of::<core::PersistentVolume>),
    ("apps", "v1", "Deployment", of::<apps::Deployment>),
    ("apps", "v1", "ReplicaSet", of::<apps::ReplicaSet>),
    ("apps", "v1", "StatefulSet", of::<apps::StatefulSet>),
    ("apps", "v1", "DaemonSet", of::<apps::DaemonSet>),
    ("batch", "v1", "Job", of::<batch::Job>),
    ("autoscaling", "v2", "HorizontalPodAutoscaler", of::<autoscaling::HorizontalPodAutoscaler>),
    ("networking.k8s.io", "v1", "Ingress", of::<networking::Ingress>),
    ("networking.k8s.io", "v1", "NetworkPolicy", of::<networking::NetworkPolicy>),
    ("rbac.authorization.k8s.io", "v1", "ClusterRole", of::<rbac::ClusterRole>),
    ("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", of::<rbac::ClusterRoleBinding>),
    ("rbac.authorization.k8s.io", "v1", "Role", of::<rbac::Role>),
    ("rbac.authorization.k8s.io", "v1", "RoleBinding", of::<rbac::RoleBinding>),
    ("coordination.k8s.io", "v1", "Lease", of::<coordination::Lease>),
    ("policy", "v1", "PodDisruptionBudget", of::<policy::PodDisruptionBudget>),
    ("events.k8s.io", "v1", "Event", of::<events::Event>),
    ("apiextensions.k8s.io", "v1", "CustomResourceDefinition", of::<apiext::CustomResourceDefinition>),
    ("authorization.k8s.io", "v1", "SelfSubjectAccessReview", of::<authorization::SelfSubjectAccessReview>),
    ("authorization.k8s.io", "v1", "SelfSubjectRulesReview", of::<authorization::SelfSubjectRulesReview>),
    ("authorization.k8s.io", "v1", "SubjectAccessReview", of::<authorization::SubjectAccessReview>),
    ("authorization.k8s.io", "v1", "LocalSubjectAccessReview", of::<authorization::LocalSubjectAccessReview>),
    ("authentication.k8s.io", "v1", "SelfSubjectReview", of::<authentication::SelfSubjectReview>),
    ("authentication.k8s.io", "v1", "TokenReview", of::<authentication::TokenReview>),
];

/// Fields whose strategic merge patch strategy includes `retainKeys` (upstream struct tags).
const RETAIN_KEYS: &[(&str, &str)] =
    &[("io.k8s.api.apps.v1.DeploymentSpec", "strategy"), ("io.k8s.api.core.v1.PodSpec", "volumes")];

/// The generated schemas: every definition, and the name of each kind's.
#[derive(Debug)]
pub(super) struct Schemas {
    definitions: Map<String, Value>,
    names: HashMap<(String, String, String), String>,
}

/// The OpenAPI v3 form (`#/components/schemas/...` references).
pub(super) static V3: LazyLock<Schemas> = LazyLock::new(build);

fn build() -> Schemas {
    let mut generator = SchemaSettings::openapi3().into_generator();
    let mut names = HashMap::new();
    for (group, version, kind, schema) in TYPES {
        let reference = schema(&mut generator);
        let name = reference
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| r.rsplit('/').next())
            .unwrap_or_default()
            .to_string();
        names.insert((group.to_string(), version.to_string(), kind.to_string()), name);
    }
    let mut definitions = generator.take_definitions(true);
    for ((group, version, kind), name) in &names {
        if let Some(schema) = definitions.get_mut(name).and_then(Value::as_object_mut) {
            schema.insert(
                "x-kubernetes-group-version-kind".into(),
                json!([{"group": group, "version": version, "kind": kind}]),
            );
        }
        let shape = crate::builtin_shapes::builtin_shape(group, kind);
        annotate(&mut definitions, name, &shape, 0);
    }
    for (name, field) in RETAIN_KEYS {
        if let Some(property) = property_mut(&mut definitions, name, field) {
            let strategy = match property.get("x-kubernetes-patch-strategy").and_then(Value::as_str) {
                Some("merge") => "merge,retainKeys",
                _ => "retainKeys",
            };
            property.insert("x-kubernetes-patch-strategy".into(), json!(strategy));
        }
    }
    Schemas { definitions, names }
}

fn property_mut<'a>(
    definitions: &'a mut Map<String, Value>,
    name: &str,
    field: &str,
) -> Option<&'a mut Map<String, Value>> {
    definitions.get_mut(name)?.get_mut("properties")?.get_mut(field)?.as_object_mut()
}

/// The definition a schema refers to (`$ref`, or a single-element `allOf` around one).
fn referenced(schema: &Value) -> Option<String> {
    let reference =
        schema.get("$ref").or_else(|| schema.get("allOf")?.as_array()?.first()?.get("$ref")).and_then(Value::as_str)?;
    Some(reference.rsplit('/').next()?.to_string())
}

/// Add the list and patch extensions `shape` declares to definition `name` and what it refers
/// to. Definitions are shared between kinds (PodSpec); what any kind declares is kept.
fn annotate(definitions: &mut Map<String, Value>, name: &str, shape: &Shape, depth: usize) {
    let Shape::Struct { fields, .. } = shape else { return };
    if depth > 32 {
        return;
    }
    for (field, sub) in fields {
        let Some(property) = property_mut(definitions, name, field) else { continue };
        let mut next: Vec<(String, Shape)> = Vec::new();
        match sub.as_ref() {
            Shape::List { item, kind } => {
                match kind {
                    ListKind::Map { keys, merge_key } => {
                        property.insert("x-kubernetes-list-type".into(), json!("map"));
                        property.insert("x-kubernetes-list-map-keys".into(), json!(keys));
                        property.insert("x-kubernetes-patch-strategy".into(), json!("merge"));
                        property.insert("x-kubernetes-patch-merge-key".into(), json!(merge_key));
                    }
                    ListKind::Set => {
                        property.insert("x-kubernetes-list-type".into(), json!("set"));
                        property.insert("x-kubernetes-patch-strategy".into(), json!("merge"));
                    }
                    ListKind::Atomic => {
                        property.insert("x-kubernetes-list-type".into(), json!("atomic"));
                    }
                }
                if let Some(target) = property.get("items").and_then(referenced) {
                    next.push((target, item.as_ref().clone()));
                }
            }
            Shape::Struct { other: Some(value), fields } if fields.is_empty() => {
                if let Some(target) = property.get("additionalProperties").and_then(referenced) {
                    next.push((target, value.as_ref().clone()));
                }
            }
            Shape::Struct { .. } => {
                if let Some(target) = referenced(&Value::Object(property.clone())) {
                    next.push((target, sub.as_ref().clone()));
                }
            }
            Shape::Untyped | Shape::Atomic => {}
        }
        for (target, shape) in next {
            annotate(definitions, &target, &shape, depth + 1);
        }
    }
}

impl Schemas {
    /// The schema name of a built-in kind.
    pub fn name(&self, group: &str, version: &str, kind: &str) -> Option<&str> {
        self.names.get(&(group.to_string(), version.to_string(), kind.to_string())).map(String::as_str)
    }

    /// The definitions `roots` need: themselves and everything they refer to.
    pub fn closure<'a>(&self, roots: impl IntoIterator<Item = &'a str>) -> Map<String, Value> {
        let mut seen: BTreeSet<String> = BTreeSet::new();
        let mut todo: Vec<String> = roots.into_iter().map(str::to_string).collect();
        while let Some(name) = todo.pop() {
            if !seen.insert(name.clone()) {
                continue;
            }
            if let Some(schema) = self.definitions.get(&name) {
                collect_refs(schema, &mut todo);
            }
        }
        seen.into_iter().filter_map(|n| self.definitions.get(&n).map(|s| (n, s.clone()))).collect()
    }
}

fn collect_refs(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            if let Some(r) = map.get("$ref").and_then(Value::as_str)
                && let Some(name) = r.rsplit('/').next()
            {
                out.push(name.to_string());
            }
            for v in map.values() {
                collect_refs(v, out);
            }
        }
        Value::Array(list) => list.iter().for_each(|v| collect_refs(v, out)),
        _ => {}
    }
}

/// Rewrite `#/components/schemas/` references to Swagger 2.0's `#/definitions/`.
pub(super) fn to_swagger(value: &mut Value) {
    match value {
        Value::Object(map) => {
            if let Some(Value::String(r)) = map.get_mut("$ref")
                && let Some(name) = r.strip_prefix("#/components/schemas/")
            {
                *r = format!("#/definitions/{name}");
            }
            map.values_mut().for_each(to_swagger);
        }
        Value::Array(list) => list.iter_mut().for_each(to_swagger),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Registry;

    #[test]
    fn every_served_builtin_kind_has_a_schema_with_its_gvk() {
        for def in Registry::new().all() {
            let name = V3
                .name(&def.group, &def.version, &def.kind)
                .unwrap_or_else(|| panic!("no schema for {} {}", def.api_version(), def.kind));
            let schema = &V3.definitions[name];
            assert_eq!(schema["x-kubernetes-group-version-kind"][0]["kind"], def.kind, "{name} names its kind");
        }
        assert_eq!(V3.name("apps", "v1", "Deployment"), Some("io.k8s.api.apps.v1.Deployment"));
    }

    #[test]
    fn keyed_lists_carry_the_patch_extensions() {
        let pod_spec = &V3.definitions["io.k8s.api.core.v1.PodSpec"]["properties"];
        assert_eq!(pod_spec["containers"]["x-kubernetes-patch-merge-key"], "name");
        assert_eq!(pod_spec["containers"]["x-kubernetes-patch-strategy"], "merge");
        assert_eq!(pod_spec["volumes"]["x-kubernetes-patch-strategy"], "merge,retainKeys");
        let container = &V3.definitions["io.k8s.api.core.v1.Container"]["properties"];
        assert_eq!(container["env"]["x-kubernetes-patch-merge-key"], "name");
        let strategy = &V3.definitions["io.k8s.api.apps.v1.DeploymentSpec"]["properties"]["strategy"];
        assert_eq!(strategy["x-kubernetes-patch-strategy"], "retainKeys");
        assert!(strategy["allOf"][0]["$ref"].as_str().unwrap().ends_with("io.k8s.api.apps.v1.DeploymentStrategy"));
    }

    #[test]
    fn the_closure_holds_what_a_kind_refers_to() {
        let deployment = V3.closure(["io.k8s.api.apps.v1.Deployment"]);
        assert!(deployment.contains_key("io.k8s.api.core.v1.PodSpec"));
        assert!(deployment.contains_key("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"));
        assert!(!deployment.contains_key("io.k8s.api.core.v1.Node"));
    }
}

//! OpenAPI v3 (checklist K4, K5).
//!
//! kubectl's default `--validate=strict` needs, for every group/version it writes to, a document
//! whose paths carry `x-kubernetes-group-version-kind` and a `fieldValidation` parameter: it then
//! leaves validation to the server. Custom resources also get their schemas under
//! `components.schemas`, so `kubectl explain` works for them.
//!
//! Built-in kinds deliberately get paths but no schemas: kubectl computes the strategic merge
//! patch of a client-side apply from the schema's `x-kubernetes-patch-merge-key` extensions when
//! a schema is present, and from its compiled-in types otherwise; the latter is exactly right,
//! whereas a schema without those extensions would make it replace keyed lists wholesale.
//! `/openapi/v2` answers 404, which kubectl tolerates when v3 is served.

use std::collections::BTreeMap;

use http::Response;
use serde_json::{Map, Value, json};

use super::{Body, ServerState, respond_value};
use crate::error::ApiError;
use crate::registry::{Flavor, ResourceDef};

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() { format!("api/{version}") } else { format!("apis/{group}/{version}") }
}

fn hash_of(state: &ServerState, group: &str, version: &str) -> String {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (state.api.registry.generation(), group, version).hash(&mut h);
    format!("{:016X}{:016X}", h.finish(), h.finish().rotate_left(17))
}

/// The patch media types kube-apiserver accepts, in the order its OpenAPI lists them.
const PATCH_MEDIA_TYPES: &[&str] = &[
    "application/apply-patch+yaml",
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
];

/// `/openapi/v3`.
pub(super) fn root(state: &ServerState) -> Response<Body> {
    let mut gvs: BTreeMap<String, (String, String)> = BTreeMap::new();
    for def in state.api.registry.all() {
        gvs.insert(gv_path(&def.group, &def.version), (def.group.clone(), def.version.clone()));
    }
    let paths: Map<String, Value> = gvs
        .into_iter()
        .map(|(path, (g, v))| {
            let url = format!("/openapi/v3/{path}?hash={}", hash_of(state, &g, &v));
            (path, json!({"serverRelativeURL": url}))
        })
        .collect();
    respond_value(200, &json!({"paths": paths}), &[])
}

/// `/openapi/v3/<api/v1 | apis/g/v>`.
pub(super) fn group_version(state: &ServerState, group: &str, version: &str) -> Result<Response<Body>, ApiError> {
    let defs: Vec<_> =
        state.api.registry.all().into_iter().filter(|d| d.group == group && d.version == version).collect();
    if defs.is_empty() {
        return Err(ApiError::unknown_path());
    }
    let mut paths = Map::new();
    let mut schemas = Map::new();
    for def in &defs {
        let gvk = json!({"group": def.group, "version": def.version, "kind": def.kind});
        let prefix = format!("/{}", gv_path(&def.group, &def.version));
        let (collection, item) = if def.namespaced {
            (
                format!("{prefix}/namespaces/{{namespace}}/{}", def.plural),
                format!("{prefix}/namespaces/{{namespace}}/{}/{{name}}", def.plural),
            )
        } else {
            (format!("{prefix}/{}", def.plural), format!("{prefix}/{}/{{name}}", def.plural))
        };
        let schema_ref = schema_name(def);
        let body_ref = json!({"$ref": format!("#/components/schemas/{schema_ref}")});
        let has_schema = matches!(def.flavor, Flavor::Custom(_));
        let body_schema = if has_schema { body_ref.clone() } else { json!({"type": "object"}) };
        let write_params = json!([
            {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
            {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
            {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
        ]);
        let op = |action: &str, params: Value, body: Option<Value>| {
            let mut o = json!({
                "operationId": format!("{action}{}", def.kind),
                "parameters": params,
                "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": body_schema.clone()}}}},
                "x-kubernetes-action": action,
                "x-kubernetes-group-version-kind": gvk.clone(),
            });
            if let (Some(b), Some(obj)) = (body, o.as_object_mut()) {
                obj.insert("requestBody".into(), b);
            }
            o
        };
        let json_body = json!({"content": {"application/json": {"schema": body_schema.clone()}}, "required": true});
        // kubectl's client-side apply sends a strategic merge patch exactly when the PATCH
        // operation lists that media type, so it is listed for built-in kinds only; custom
        // resources accept JSON, merge and apply patches, as kube-apiserver documents them.
        let mut patch_types = Map::new();
        for media_type in PATCH_MEDIA_TYPES {
            if has_schema && *media_type == "application/strategic-merge-patch+json" {
                continue;
            }
            patch_types.insert((*media_type).into(), json!({"schema": {"type": "object"}}));
        }
        let patch_body = json!({"content": patch_types, "required": true});
        let mut patch_params = write_params.clone();
        if let Some(a) = patch_params.as_array_mut() {
            a.push(json!({"name": "force", "in": "query", "schema": {"type": "boolean", "uniqueItems": true}}));
        }
        paths.insert(
            collection,
            json!({
                "get": op("list", json!([]), None),
                "post": op("post", write_params.clone(), Some(json_body.clone())),
                "delete": op("deletecollection", json!([]), None),
            }),
        );
        paths.insert(
            item,
            json!({
                "get": op("get", json!([]), None),
                "put": op("put", write_params.clone(), Some(json_body)),
                "patch": op("patch", patch_params, Some(patch_body)),
                "delete": op("delete", json!([]), None),
            }),
        );
        if let Flavor::Custom(_) = &def.flavor
            && let Some(schema) = crd_schema(state, def)
        {
            schemas.insert(schema_ref, schema);
        }
    }
    if !schemas.is_empty() {
        schemas.insert("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta".into(), object_meta_schema());
    }
    Ok(respond_value(
        200,
        &json!({
            "openapi": "3.0.0",
            "info": {"title": "Kubernetes", "version": state.config.git_version},
            "paths": paths,
            "components": {"schemas": schemas},
        }),
        &[],
    ))
}

/// The OpenAPI name kube gives a kind: the group reversed, then version and kind
/// (`com.example.v1.Foo`, `io.k8s.api.core.v1.ConfigMap`).
fn schema_name(def: &ResourceDef) -> String {
    if def.group.is_empty() {
        return format!("io.k8s.api.core.{}.{}", def.version, def.kind);
    }
    if !def.is_custom() {
        let short = def.group.split('.').next().unwrap_or(&def.group);
        return format!("io.k8s.api.{short}.{}.{}", def.version, def.kind);
    }
    let reversed: Vec<&str> = def.group.split('.').rev().collect();
    format!("{}.{}.{}", reversed.join("."), def.version, def.kind)
}

fn crd_schema(state: &ServerState, def: &ResourceDef) -> Option<Value> {
    let Flavor::Custom(c) = &def.flavor else { return None };
    let crd_def = state.api.registry.get("apiextensions.k8s.io", "v1", "customresourcedefinitions")?;
    let crd = state.api.get(&crd_def, "", &c.crd_name).ok()?;
    let version = crd
        .pointer("/spec/versions")?
        .as_array()?
        .iter()
        .find(|v| v.get("name").and_then(Value::as_str) == Some(def.version.as_str()))?;
    let mut schema = version.pointer("/schema/openAPIV3Schema").cloned().unwrap_or_else(|| json!({"type": "object"}));
    let obj = schema.as_object_mut()?;
    let props = obj.entry("properties").or_insert_with(|| json!({}));
    if let Some(props) = props.as_object_mut() {
        props.insert("apiVersion".into(), json!({"type": "string", "description": "APIVersion defines the versioned schema of this representation of an object."}));
        props.insert("kind".into(), json!({"type": "string", "description": "Kind is a string value representing the REST resource this object represents."}));
        props.insert(
            "metadata".into(),
            json!({"allOf": [{"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}], "description": "Standard object's metadata."}),
        );
    }
    obj.insert(
        "x-kubernetes-group-version-kind".into(),
        json!([{"group": def.group, "version": def.version, "kind": def.kind}]),
    );
    Some(schema)
}

fn object_meta_schema() -> Value {
    let string_map = json!({"type": "object", "additionalProperties": {"type": "string"}});
    json!({
        "type": "object",
        "description": "ObjectMeta is metadata that all persisted resources must have, which includes all objects users must create.",
        "properties": {
            "name": {"type": "string"},
            "generateName": {"type": "string"},
            "namespace": {"type": "string"},
            "uid": {"type": "string"},
            "resourceVersion": {"type": "string"},
            "generation": {"type": "integer", "format": "int64"},
            "creationTimestamp": {"type": "string", "format": "date-time"},
            "deletionTimestamp": {"type": "string", "format": "date-time"},
            "deletionGracePeriodSeconds": {"type": "integer", "format": "int64"},
            "labels": string_map.clone(),
            "annotations": string_map,
            "finalizers": {"type": "array", "items": {"type": "string"}},
            "ownerReferences": {"type": "array", "items": {"type": "object"}},
            "managedFields": {"type": "array", "items": {"type": "object"}},
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Registry;

    #[test]
    fn schema_names_follow_kube() {
        let reg = Registry::new();
        assert_eq!(schema_name(&reg.get("", "v1", "configmaps").unwrap()), "io.k8s.api.core.v1.ConfigMap");
        assert_eq!(schema_name(&reg.get("apps", "v1", "deployments").unwrap()), "io.k8s.api.apps.v1.Deployment");
    }
}

//! OpenAPI v3 and v2 (checklist K4, K5).
//!
//! kubectl's default `--validate=strict` needs, for every group/version it writes to, a document
//! whose paths carry `x-kubernetes-group-version-kind` and a `fieldValidation` parameter: it then
//! leaves validation to the server. Every kind also gets its schema under `components.schemas`,
//! so `kubectl explain` works: custom resources from their CRD, built-in kinds from
//! k8s-openapi ([`super::builtin_schemas`]).
//!
//! kubectl's client-side apply computes the strategic merge patch of a built-in kind from that
//! schema (because its PATCH operation lists the strategic merge patch media type, as
//! kube-apiserver's does); the built-in schemas therefore carry the patch extensions
//! (`x-kubernetes-patch-merge-key`, `x-kubernetes-patch-strategy`) that the server's own
//! strategic merge patch follows. Custom resources accept JSON, merge and apply patches only.
//!
//! `/openapi/v2` holds definitions as JSON only (see [`v2`]).

use std::collections::BTreeMap;

use http::Response;
use serde_json::{Map, Value, json};

use super::{Body, ServerState, respond_value};
use crate::error::ApiError;
use crate::registry::{Flavor, ResourceDef};

/// The protobuf form of `/openapi/v2` that client-go asks for.
const V2_PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";
/// The same, as kube-openapi names it in its answers (Go's `mime` refuses the `@`).
const V2_PROTOBUF_ANSWER: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

/// `/openapi/v2`: the Swagger 2.0 document. As JSON it holds the definitions of every served
/// kind. client-go asks for the protobuf form only, to validate manifests of kinds whose
/// group/version does not declare server-side field validation in OpenAPI v3 (kinds that are not
/// served, above all); that form is a document without definitions, so clients skip their own
/// validation and go on to report `no matches for kind`, as against kube-apiserver.
pub(super) fn v2(state: &ServerState, accept: Option<&str>) -> Result<Response<Body>, ApiError> {
    let wanted = accept
        .unwrap_or("application/json")
        .split(',')
        .map(|t| t.split(';').next().unwrap_or("").trim())
        .find(|t| matches!(*t, "application/json" | "*/*" | "application/*" | "") || *t == V2_PROTOBUF);
    match wanted {
        Some(V2_PROTOBUF | V2_PROTOBUF_ANSWER) => {
            // openapi_v2.Document { swagger = 1 }.
            let mut doc = vec![0x0a, 3];
            doc.extend_from_slice(b"2.0");
            return Ok(super::respond(200, bytes::Bytes::from(doc), V2_PROTOBUF_ANSWER, &[]));
        }
        Some(_) => {}
        None => {
            return Err(ApiError {
                code: 406,
                reason: "NotAcceptable",
                message: format!(
                    "only the following media types are accepted: application/json, {V2_PROTOBUF} (not {})",
                    accept.unwrap_or("")
                ),
                details: None,
            });
        }
    }
    let mut roots = Vec::new();
    let mut definitions = Map::new();
    for def in state.api.registry.all() {
        if def.is_custom() {
            if let Some(schema) = crd_schema(state, &def) {
                definitions.insert(schema_name(&def), schema);
                definitions.insert("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta".into(), object_meta_schema());
            }
        } else if let Some(name) = super::builtin_schemas::V3.name(&def.group, &def.version, &def.kind) {
            roots.push(name.to_string());
        }
    }
    definitions.extend(super::builtin_schemas::V3.closure(roots.iter().map(String::as_str)));
    let mut doc = json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": state.config.git_version},
        "paths": {},
        "definitions": definitions,
    });
    super::builtin_schemas::to_swagger(&mut doc);
    Ok(respond_value(200, &doc, &[]))
}

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
    let mut builtin_roots: Vec<&str> = Vec::new();
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
        let builtin_schema =
            if def.is_custom() { None } else { super::builtin_schemas::V3.name(&def.group, &def.version, &def.kind) };
        let schema_ref = builtin_schema.map(str::to_string).unwrap_or_else(|| schema_name(def));
        let body_ref = json!({"$ref": format!("#/components/schemas/{schema_ref}")});
        let has_schema = def.is_custom() || builtin_schema.is_some();
        let body_schema = if has_schema { body_ref.clone() } else { json!({"type": "object"}) };
        builtin_roots.extend(builtin_schema);
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
            if def.is_custom() && *media_type == "application/strategic-merge-patch+json" {
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
    schemas.extend(super::builtin_schemas::V3.closure(builtin_roots));
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

//! Discovery: legacy (`/api`, `/apis`, `/apis/<g>`, `/apis/<g>/<v>`) and aggregated
//! (`apidiscovery.k8s.io/v2`) documents (checklist K2, K3, K6), computed from the registry on
//! every request so that they change as soon as a CRD does.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::sync::Arc;

use http::Response;
use serde_json::{Value, json};

use super::params::parse_accept;
use super::{Body, ServerState, respond, respond_value};
use crate::error::ApiError;
use crate::registry::ResourceDef;

/// Order versions as kube does: GA before beta before alpha, higher numbers first, then
/// anything that does not follow the pattern, alphabetically.
pub(crate) fn version_priority(a: &str, b: &str) -> Ordering {
    fn parse(v: &str) -> Option<(u32, u8, u32)> {
        let rest = v.strip_prefix('v')?;
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        let major: u32 = digits.parse().ok()?;
        let tail = &rest[digits.len()..];
        if tail.is_empty() {
            return Some((major, 2, 0));
        }
        for (prefix, rank) in [("beta", 1u8), ("alpha", 0u8)] {
            if let Some(n) = tail.strip_prefix(prefix) {
                return Some((major, rank, n.parse().ok()?));
            }
        }
        None
    }
    match (parse(a), parse(b)) {
        (Some((ma, ra, na)), Some((mb, rb, nb))) => rb.cmp(&ra).then(mb.cmp(&ma)).then(nb.cmp(&na)),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => a.cmp(b),
    }
}

/// Group → versions (sorted by priority) → resources.
fn groups(state: &ServerState) -> BTreeMap<String, BTreeMap<String, Vec<Arc<ResourceDef>>>> {
    let mut out: BTreeMap<String, BTreeMap<String, Vec<Arc<ResourceDef>>>> = BTreeMap::new();
    for def in state.api.registry.all() {
        out.entry(def.group.clone()).or_default().entry(def.version.clone()).or_default().push(def);
    }
    out
}

fn sorted_versions(versions: &BTreeMap<String, Vec<Arc<ResourceDef>>>) -> Vec<String> {
    let mut v: Vec<String> = versions.keys().cloned().collect();
    v.sort_by(|a, b| version_priority(a, b));
    v
}

fn wants_aggregated(accept: Option<&str>) -> Option<&'static str> {
    let accept = accept?;
    for mt in parse_accept(accept) {
        if mt.essence == "application/json"
            && mt.param("as") == Some("APIGroupDiscoveryList")
            && mt.param("g") == Some("apidiscovery.k8s.io")
        {
            match mt.param("v") {
                Some("v2") => return Some("v2"),
                Some("v2beta1") => return Some("v2beta1"),
                _ => {}
            }
        }
    }
    None
}

/// `/api`.
pub(super) fn api_versions(state: &ServerState, accept: Option<&str>) -> Response<Body> {
    if let Some(v) = wants_aggregated(accept) {
        return aggregated(state, true, v);
    }
    respond_value(
        200,
        &json!({
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": state.addr.to_string()}],
        }),
        &[],
    )
}

/// `/apis`.
pub(super) fn api_groups(state: &ServerState, accept: Option<&str>) -> Response<Body> {
    if let Some(v) = wants_aggregated(accept) {
        return aggregated(state, false, v);
    }
    let groups: Vec<Value> =
        groups(state).iter().filter(|(g, _)| !g.is_empty()).map(|(g, versions)| group_doc(g, versions)).collect();
    respond_value(200, &json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}), &[])
}

fn group_doc(group: &str, versions: &BTreeMap<String, Vec<Arc<ResourceDef>>>) -> Value {
    let sorted = sorted_versions(versions);
    let list: Vec<Value> =
        sorted.iter().map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v})).collect();
    let preferred =
        sorted.first().map(|v| json!({"groupVersion": format!("{group}/{v}"), "version": v})).unwrap_or(Value::Null);
    json!({"name": group, "versions": list, "preferredVersion": preferred})
}

/// `/apis/<group>`.
pub(super) fn api_group(state: &ServerState, group: &str) -> Result<Response<Body>, ApiError> {
    let all = groups(state);
    let versions = all.get(group).filter(|_| !group.is_empty()).ok_or_else(ApiError::unknown_path)?;
    let mut doc = group_doc(group, versions);
    if let Some(obj) = doc.as_object_mut() {
        obj.insert("kind".into(), json!("APIGroup"));
        obj.insert("apiVersion".into(), json!("v1"));
    }
    Ok(respond_value(200, &doc, &[]))
}

fn subresources(def: &ResourceDef) -> Vec<(&'static str, Vec<&'static str>)> {
    let mut out = Vec::new();
    if def.status {
        out.push(("status", vec!["get", "patch", "update"]));
    }
    if def.scale.is_some() {
        out.push(("scale", vec!["get", "patch", "update"]));
    }
    for s in &def.extra_subresources {
        match *s {
            "finalize" => out.push(("finalize", vec!["update"])),
            "log" => out.push(("log", vec!["get"])),
            other => out.push((other, vec!["create"])),
        }
    }
    out
}

/// `/api/v1` and `/apis/<group>/<version>`.
pub(super) fn api_resources(state: &ServerState, group: &str, version: &str) -> Result<Response<Body>, ApiError> {
    let all = groups(state);
    let defs = all.get(group).and_then(|v| v.get(version)).ok_or_else(ApiError::unknown_path)?;
    let mut resources = Vec::new();
    for def in defs {
        let mut entry = json!({
            "name": def.plural,
            "singularName": def.singular,
            "namespaced": def.namespaced,
            "kind": def.kind,
            "verbs": def.verbs(),
        });
        if let Some(obj) = entry.as_object_mut() {
            if !def.short_names.is_empty() {
                obj.insert("shortNames".into(), json!(def.short_names));
            }
            if !def.categories.is_empty() {
                obj.insert("categories".into(), json!(def.categories));
            }
            obj.insert("storageVersionHash".into(), json!(storage_hash(def)));
        }
        resources.push(entry);
        for (sub, verbs) in subresources(def) {
            let (kind, grp, ver) = match sub {
                "scale" => ("Scale", "autoscaling", "v1"),
                "eviction" => ("Eviction", "policy", "v1"),
                "binding" => ("Binding", "", "v1"),
                "token" => ("TokenRequest", "authentication.k8s.io", "v1"),
                _ => (def.kind.as_str(), def.group.as_str(), def.version.as_str()),
            };
            let mut e = json!({
                "name": format!("{}/{sub}", def.plural),
                "singularName": "",
                "namespaced": def.namespaced,
                "kind": kind,
                "verbs": verbs,
            });
            if (grp, ver) != (def.group.as_str(), def.version.as_str())
                && let Some(obj) = e.as_object_mut()
            {
                obj.insert("group".into(), json!(grp));
                obj.insert("version".into(), json!(ver));
            }
            resources.push(e);
        }
    }
    let gv = if group.is_empty() { version.to_string() } else { format!("{group}/{version}") };
    Ok(respond_value(
        200,
        &json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}),
        &[],
    ))
}

fn storage_hash(def: &ResourceDef) -> String {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (&def.group, &def.version, &def.kind).hash(&mut h);
    let bytes = h.finish().to_be_bytes();
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)[..11].to_string()
}

/// Aggregated discovery (KEP-3352) for `/api` (core) or `/apis` (groups).
fn aggregated(state: &ServerState, core: bool, version: &str) -> Response<Body> {
    let items: Vec<Value> = groups(state)
        .iter()
        .filter(|(g, _)| g.is_empty() == core)
        .map(|(g, versions)| {
            let vs: Vec<Value> = sorted_versions(versions)
                .iter()
                .map(|v| {
                    let resources: Vec<Value> = versions
                        .get(v)
                        .map(|defs| defs.iter().map(|d| aggregated_resource(d)).collect())
                        .unwrap_or_default();
                    json!({"version": v, "resources": resources, "freshness": "Current"})
                })
                .collect();
            json!({"metadata": {"name": g, "creationTimestamp": null}, "versions": vs})
        })
        .collect();
    let doc = json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": format!("apidiscovery.k8s.io/{version}"),
        "metadata": {},
        "items": items,
    });
    let ct = format!("application/json;g=apidiscovery.k8s.io;v={version};as=APIGroupDiscoveryList");
    respond(200, bytes::Bytes::from(doc.to_string()), &ct, &[])
}

fn aggregated_resource(def: &ResourceDef) -> Value {
    let subs: Vec<Value> = subresources(def)
        .into_iter()
        .map(|(sub, verbs)| {
            let rk = match sub {
                "scale" => json!({"group": "autoscaling", "version": "v1", "kind": "Scale"}),
                "eviction" => json!({"group": "policy", "version": "v1", "kind": "Eviction"}),
                "binding" => json!({"group": "", "version": "v1", "kind": "Binding"}),
                "token" => json!({"group": "authentication.k8s.io", "version": "v1", "kind": "TokenRequest"}),
                _ => json!({"group": def.group, "version": def.version, "kind": def.kind}),
            };
            json!({"subresource": sub, "responseKind": rk, "verbs": verbs})
        })
        .collect();
    let mut r = json!({
        "resource": def.plural,
        "responseKind": {"group": def.group, "version": def.version, "kind": def.kind},
        "scope": if def.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": def.singular,
        "verbs": def.verbs(),
    });
    if let Some(obj) = r.as_object_mut() {
        if !def.short_names.is_empty() {
            obj.insert("shortNames".into(), json!(def.short_names));
        }
        if !def.categories.is_empty() {
            obj.insert("categories".into(), json!(def.categories));
        }
        if !subs.is_empty() {
            obj.insert("subresources".into(), Value::Array(subs));
        }
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kube_version_ordering() {
        let mut v = vec!["v1alpha1", "v1beta1", "v2", "v1", "foo", "v1beta2", "v10"];
        v.sort_by(|a, b| version_priority(a, b));
        assert_eq!(v, ["v10", "v2", "v1", "v1beta2", "v1beta1", "v1alpha1", "foo"]);
    }
}

//! Checklist section I: server-side apply and managedFields.

mod common;

use common::*;
use http::Method;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

const LEASES: &str = "/apis/coordination.k8s.io/v1/namespaces/default/leases";

fn managed(o: &Value) -> Vec<Value> {
    o["metadata"]["managedFields"].as_array().cloned().unwrap_or_default()
}

/// The managedFields entry of `manager` (and `subresource`), failing if absent.
#[track_caller]
fn entry(o: &Value, manager: &str, subresource: Option<&str>) -> Value {
    managed(o)
        .into_iter()
        .find(|e| e["manager"] == manager && e.get("subresource").and_then(Value::as_str) == subresource)
        .unwrap_or_else(|| panic!("no managedFields entry for {manager} ({subresource:?}) in {o}"))
}

fn has_entry(o: &Value, manager: &str) -> bool {
    managed(o).iter().any(|e| e["manager"] == manager)
}

fn is_rfc3339_seconds(s: &str) -> bool {
    s.len() == 20 && s.ends_with('Z') && s.as_bytes()[10] == b'T'
}

#[tokio::test]
async fn i1_apply_needs_a_valid_field_manager() {
    let (_env, http) = start_with_foo().await;
    let body = foo("f", json!({}));
    let s = assert_reason(&http.apply(&format!("{FOOS}/f"), "", &body).await, 422, "Invalid");
    assert_eq!(s["details"]["kind"], "PatchOptions");
    assert_eq!(s["details"]["causes"][0]["field"], "fieldManager");
    let long = "m".repeat(129);
    let s =
        assert_reason(&http.apply(&format!("{FOOS}/f"), &format!("fieldManager={long}"), &body).await, 422, "Invalid");
    assert_eq!(s["details"]["kind"], "PatchOptions");
    assert_eq!(s["details"]["causes"][0]["field"], "fieldManager");
    let s = assert_reason(&http.apply(&format!("{FOOS}/f"), "fieldManager=bad%01manager", &body).await, 422, "Invalid");
    assert_eq!(s["details"]["causes"][0]["field"], "fieldManager");
    let ok = "m".repeat(128);
    http.apply(&format!("{FOOS}/f"), &format!("fieldManager={ok}"), &body).await.expect(201);
}

#[tokio::test]
async fn i1_apply_body_needs_api_version_kind_and_the_url_name() {
    let (_env, http) = start_with_foo().await;
    let path = format!("{FOOS}/f");
    let r = http.apply(&path, "fieldManager=m", &json!({"kind": "Foo", "metadata": {"name": "f"}})).await;
    assert_status(
        &r,
        400,
        "BadRequest",
        "Incorrect version specified in apply patch. Specified patch version: , expected: example.com/v1",
    );
    let r = http
        .apply(
            &path,
            "fieldManager=m",
            &json!({"apiVersion": "example.com/v2", "kind": "Foo", "metadata": {"name": "f"}}),
        )
        .await;
    assert_status(
        &r,
        400,
        "BadRequest",
        "Incorrect version specified in apply patch. Specified patch version: example.com/v2, expected: example.com/v1",
    );
    let r = http
        .apply(
            &path,
            "fieldManager=m",
            &json!({"apiVersion": "example.com/v1", "kind": "Bar", "metadata": {"name": "f"}}),
        )
        .await;
    assert_reason(&r, 400, "BadRequest");
    let r = http.apply(&path, "fieldManager=m", &foo("g", json!({}))).await;
    assert_reason(&r, 400, "BadRequest");
    http.get(&path).await.expect(404);
}

#[tokio::test]
async fn i2_every_write_records_managed_fields() {
    let (_env, http) = start_with_foo().await;
    // POST with an explicit manager: an Update entry.
    let r = http.post(&format!("{CMS}?fieldManager=creator"), &cm("a", json!({"k": "v"}))).await;
    r.expect(201);
    let o = r.json();
    let e = entry(&o, "creator", None);
    assert_eq!(e["operation"], "Update");
    assert_eq!(e["apiVersion"], "v1");
    assert_eq!(e["fieldsType"], "FieldsV1");
    assert_eq!(e["fieldsV1"], json!({"f:data": {".": {}, "f:k": {}}}));
    assert!(is_rfc3339_seconds(e["time"].as_str().unwrap_or("")), "{e}");
    // Apply: an Apply entry owning exactly what was applied.
    let r = http.apply(&format!("{FOOS}/f"), "fieldManager=applier", &foo("f", json!({"x": "1"}))).await;
    r.expect(201);
    let e = entry(&r.json(), "applier", None);
    assert_eq!(e["operation"], "Apply");
    assert_eq!(e["apiVersion"], "example.com/v1");
    assert_eq!(e["fieldsV1"], json!({"f:spec": {"f:x": {}}}));
    // A status write records the subresource.
    let r = http.merge(&format!("{FOOS}/f/status?fieldManager=statuser"), &json!({"status": {"ready": true}})).await;
    r.expect(200);
    let e = entry(&r.json(), "statuser", Some("status"));
    assert_eq!(e["operation"], "Update");
    assert_eq!(e["fieldsV1"], json!({"f:status": {".": {}, "f:ready": {}}}));
}

#[tokio::test]
async fn i2_without_field_manager_the_user_agent_product_is_the_manager() {
    let (_env, http) = start().await;
    let r = http
        .send(
            Method::POST,
            CMS,
            &[("content-type", "application/json"), ("user-agent", "kubectl/v1.32.4 (linux/amd64) kubernetes/abc")],
            Some(cm("a", json!({"k": "v"})).to_string().into_bytes()),
        )
        .await;
    r.expect(201);
    assert_eq!(entry(&r.json(), "kubectl", None)["operation"], "Update");
}

#[tokio::test]
async fn i3_applying_a_field_owned_by_another_manager_conflicts_unless_forced() {
    let (_env, http) = start_with_foo().await;
    let path = format!("{FOOS}/f");
    http.apply(&path, "fieldManager=a", &foo("f", json!({"x": "1"}))).await.expect(201);
    // Same value: shared ownership, no conflict.
    let r = http.apply(&path, "fieldManager=b", &foo("f", json!({"x": "1"}))).await;
    r.expect(200);
    let o = r.json();
    assert_eq!(entry(&o, "a", None)["fieldsV1"], json!({"f:spec": {"f:x": {}}}));
    assert_eq!(entry(&o, "b", None)["fieldsV1"], json!({"f:spec": {"f:x": {}}}));
    // Different value: conflict with both owners.
    let r = http.apply(&path, "fieldManager=c", &foo("f", json!({"x": "2"}))).await;
    let s = assert_reason(&r, 409, "Conflict");
    assert_eq!(s["details"]["causes"].as_array().map(Vec::len), Some(2), "{s}");
    assert_eq!(http.get(&path).await.json()["spec"]["x"], "1");
    // Forced: the applier takes the field, the others lose it.
    let r = http.apply(&path, "fieldManager=c&force=true", &foo("f", json!({"x": "2"}))).await;
    r.expect(200);
    let o = r.json();
    assert_eq!(o["spec"]["x"], "2");
    assert_eq!(entry(&o, "c", None)["fieldsV1"], json!({"f:spec": {"f:x": {}}}));
    assert!(!has_entry(&o, "a") && !has_entry(&o, "b"), "managers without fields are dropped: {o}");
}

#[tokio::test]
async fn i3_conflicts_with_update_managers_too() {
    let (_env, http) = start().await;
    http.post(&format!("{CMS}?fieldManager=editor"), &cm("a", json!({"k": "v"}))).await.expect(201);
    let r = http.apply(&format!("{CMS}/a"), "fieldManager=applier", &cm("a", json!({"k": "w"}))).await;
    assert_reason(&r, 409, "Conflict");
    http.apply(&format!("{CMS}/a"), "fieldManager=applier", &cm("a", json!({"k": "v"}))).await.expect(200);
}

#[tokio::test]
async fn i3_lease_mutual_exclusion_through_apply_without_force() {
    let (env, _http) = start().await;
    let leases: Api<Lease> = Api::namespaced(env.client(), "default");
    let lease = |holder: &str| json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "lock"}, "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15}});
    leases.patch("lock", &PatchParams::apply("candidate-a"), &Patch::Apply(lease("a"))).await.expect("a acquires");
    match leases.patch("lock", &PatchParams::apply("candidate-b"), &Patch::Apply(lease("b"))).await {
        Err(kube::Error::Api(s)) => {
            assert_eq!(s.code, 409);
            assert_eq!(s.reason, "Conflict");
        }
        other => panic!("b must not take the lease: {other:?}"),
    }
    let l = leases.get("lock").await.expect("get");
    assert_eq!(l.spec.and_then(|s| s.holder_identity).as_deref(), Some("a"));
    // With force, b takes over.
    let l = leases
        .patch("lock", &PatchParams::apply("candidate-b").force(), &Patch::Apply(lease("b")))
        .await
        .expect("forced");
    assert_eq!(l.spec.and_then(|s| s.holder_identity).as_deref(), Some("b"));
}

#[tokio::test]
async fn i4_fields_dropped_from_an_apply_are_removed_unless_co_owned() {
    let (_env, http) = start_with_foo().await;
    let path = format!("{FOOS}/f");
    http.apply(&path, "fieldManager=a", &foo("f", json!({"x": "1", "color": "red", "replicas": 2}))).await.expect(201);
    http.apply(&path, "fieldManager=b", &foo("f", json!({"color": "red"}))).await.expect(200);
    let r = http.apply(&path, "fieldManager=a", &foo("f", json!({"replicas": 2}))).await;
    r.expect(200);
    let spec = r.json()["spec"].clone();
    assert!(spec.get("x").is_none(), "solely owned and dropped: removed: {spec}");
    assert_eq!(spec["color"], "red", "co-owned: kept");
    assert_eq!(spec["replicas"], 2);
}

#[tokio::test]
async fn i4_fields_set_by_updates_survive_applies() {
    let (_env, http) = start_with_foo().await;
    let path = format!("{FOOS}/f");
    http.apply(&path, "fieldManager=a", &foo("f", json!({"x": "1"}))).await.expect(201);
    http.merge(&format!("{path}?fieldManager=editor"), &json!({"spec": {"color": "blue"}})).await.expect(200);
    let r = http.apply(&path, "fieldManager=a", &foo("f", json!({"x": "2"}))).await;
    r.expect(200);
    assert_eq!(r.json()["spec"], json!({"x": "2", "color": "blue"}));
}

#[tokio::test]
async fn i5_apply_creates_and_its_resource_version_is_a_precondition() {
    let (_env, http) = start().await;
    let body = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l"}, "spec": {"holderIdentity": "a"}});
    let r = http.apply(&format!("{LEASES}/l"), "fieldManager=kubert", &body).await;
    r.expect(201);
    let created = r.json();
    // kubert acquire: apply with the observed resourceVersion.
    let mut next = body.clone();
    next["metadata"]["resourceVersion"] = json!(rv_str(&created));
    next["spec"]["holderIdentity"] = json!("b");
    let r = http.apply(&format!("{LEASES}/l"), "fieldManager=kubert&force=true", &next).await;
    r.expect(200);
    assert_eq!(r.json()["spec"]["holderIdentity"], "b");
    // The same RV again is stale now.
    next["spec"]["holderIdentity"] = json!("c");
    assert_reason(&http.apply(&format!("{LEASES}/l"), "fieldManager=kubert&force=true", &next).await, 409, "Conflict");
    // A resourceVersion on an object that does not exist cannot hold.
    let mut ghost = body.clone();
    ghost["metadata"]["name"] = json!("ghost");
    ghost["metadata"]["resourceVersion"] = json!("1");
    let r = http.apply(&format!("{LEASES}/ghost"), "fieldManager=kubert", &ghost).await;
    assert!(r.status >= 400, "a precondition on a missing object fails: {}", r.text());
    http.get(&format!("{LEASES}/ghost")).await.expect(404);
}

#[tokio::test]
async fn i6_apply_to_status_changes_only_status_and_records_the_subresource() {
    let (_env, http) = start_with_foo().await;
    create_foo(&http, "f", json!({"x": "1"})).await;
    let body = json!({"apiVersion": "example.com/v1", "kind": "Foo", "metadata": {"name": "f", "labels": {"a": "b"}}, "spec": {"x": "ignored"}, "status": {"ready": true}});
    let r = http.apply(&format!("{FOOS}/f/status"), "fieldManager=ctl", &body).await;
    r.expect(200);
    let o = r.json();
    assert_eq!(o["status"], json!({"ready": true}));
    assert_eq!(o["spec"]["x"], "1");
    assert!(o["metadata"].get("labels").is_none(), "{o}");
    let e = entry(&o, "ctl", Some("status"));
    assert_eq!(e["operation"], "Apply");
    assert_eq!(e["fieldsV1"], json!({"f:status": {"f:ready": {}}}));
}

#[tokio::test]
async fn i7_lists_merge_according_to_the_schema() {
    let (_env, http) = start_with_foo().await;
    let path = format!("{FOOS}/f");
    // Sets: union of what each manager applies.
    http.apply(&path, "fieldManager=a", &foo("f", json!({"tags": ["x"], "entries": [{"name": "a", "value": "1"}]})))
        .await
        .expect(201);
    let r = http
        .apply(&path, "fieldManager=b", &foo("f", json!({"tags": ["y"], "entries": [{"name": "b", "value": "2"}]})))
        .await;
    r.expect(200);
    let spec = r.json()["spec"].clone();
    let mut tags: Vec<String> = serde_json::from_value(spec["tags"].clone()).unwrap();
    tags.sort();
    assert_eq!(tags, ["x", "y"]);
    // Maps keyed by name: merged by key.
    let mut names: Vec<String> =
        spec["entries"].as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap().to_string()).collect();
    names.sort();
    assert_eq!(names, ["a", "b"]);
    let e = entry(&r.json(), "b", None);
    assert_eq!(e["fieldsV1"]["f:spec"]["f:tags"], json!({"v:\"y\"": {}}));
    assert!(e["fieldsV1"]["f:spec"]["f:entries"].get("k:{\"name\":\"b\"}").is_some(), "{e}");
    // Atomic lists: one owner for the whole list.
    http.apply(
        &path,
        "fieldManager=a",
        &foo("f", json!({"tags": ["x"], "entries": [{"name": "a", "value": "1"}], "list": ["1"]})),
    )
    .await
    .expect(200);
    let r = http
        .apply(
            &path,
            "fieldManager=b",
            &foo("f", json!({"tags": ["y"], "entries": [{"name": "b", "value": "2"}], "list": ["2"]})),
        )
        .await;
    let s = assert_reason(&r, 409, "Conflict");
    assert!(s["details"]["causes"].as_array().unwrap().iter().any(|c| c["field"] == ".spec.list"), "{s}");
}

#[tokio::test]
async fn i7_status_conditions_keyed_by_type_are_shared_between_managers() {
    let (_env, http) = start_with_foo().await;
    create_foo(&http, "f", json!({})).await;
    let cond = |t: &str| json!({"apiVersion": "example.com/v1", "kind": "Foo", "metadata": {"name": "f"}, "status": {"conditions": [{"type": t, "status": "True"}]}});
    http.apply(&format!("{FOOS}/f/status"), "fieldManager=a", &cond("Ready")).await.expect(200);
    let r = http.apply(&format!("{FOOS}/f/status"), "fieldManager=b", &cond("Synced")).await;
    r.expect(200);
    let types: Vec<String> = r.json()["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["type"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(types.len(), 2, "{types:?}");
    assert!(types.contains(&"Ready".to_string()) && types.contains(&"Synced".to_string()));
}

#[tokio::test]
async fn i8_managed_fields_single_empty_entry_resets_and_empty_list_keeps() {
    let (_env, http) = start().await;
    http.post(&format!("{CMS}?fieldManager=creator"), &cm("a", json!({"k": "v"}))).await.expect(201);
    let r = http
        .merge(
            &format!("{CMS}/a?fieldManager=editor"),
            &json!({"metadata": {"managedFields": []}, "data": {"k2": "v"}}),
        )
        .await;
    r.expect(200);
    assert!(has_entry(&r.json(), "creator") && has_entry(&r.json(), "editor"), "[] keeps ownership: {}", r.text());
    let r = http.merge(&format!("{CMS}/a?fieldManager=editor"), &json!({"metadata": {"managedFields": [{}]}})).await;
    r.expect(200);
    assert!(r.json()["metadata"].get("managedFields").is_none(), "[{{}}] strips managedFields: {}", r.text());
}

#[tokio::test]
async fn i9_kubectl_server_side_apply_requests() {
    let (_env, http) = start_with_foo().await;
    let path = format!("{FOOS}/f");
    let body = foo("f", json!({"x": "1"}));
    http.apply(&path, "fieldManager=kubectl&fieldValidation=Strict&force=false", &body).await.expect(201);
    let r = http.apply(&path, "fieldManager=kubectl&fieldValidation=Strict&force=false", &body).await;
    r.expect(200);
    assert_eq!(entry(&r.json(), "kubectl", None)["operation"], "Apply");
    // Client-side to server-side migration: a JSON patch rewriting managedFields.
    let current = http.get(&path).await.json();
    let mf = current["metadata"]["managedFields"].clone();
    let r = http
        .json_patch(
            &format!("{path}?fieldManager=kubectl"),
            &json!([{"op": "replace", "path": "/metadata/managedFields", "value": mf}]),
        )
        .await;
    r.expect(200);
}

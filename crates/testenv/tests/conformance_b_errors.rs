//! Checklist section B: error bodies (Status), with the exact texts apimachinery and the
//! apiserver write, and client classification through kube-rs.

mod common;

use common::*;
use http::Method;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use serde_json::json;

#[tokio::test]
async fn b1_not_found_status_is_exact_for_core_resources() {
    let (_env, http) = start().await;
    let r = http.get(&format!("{CMS}/x")).await;
    assert_eq!(r.status, 404);
    assert_eq!(
        r.json(),
        json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "configmaps \"x\" not found", "reason": "NotFound",
            "details": {"name": "x", "kind": "configmaps"}, "code": 404
        })
    );
}

#[tokio::test]
async fn b1_not_found_status_is_exact_for_custom_resources() {
    let (_env, http) = start_with_foo().await;
    let r = http.get(&format!("{FOOS}/x")).await;
    assert_eq!(r.status, 404);
    assert_eq!(
        r.json(),
        json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "foos.example.com \"x\" not found", "reason": "NotFound",
            "details": {"name": "x", "group": "example.com", "kind": "foos"}, "code": 404
        })
    );
    // Grouped built-ins name the group too.
    let r = http.get("/apis/apps/v1/namespaces/default/deployments/d").await;
    let s = assert_status(&r, 404, "NotFound", "deployments.apps \"d\" not found");
    assert_eq!(s["details"], json!({"name": "d", "group": "apps", "kind": "deployments"}));
}

#[tokio::test]
async fn b1_invalid_details_name_the_kind_and_carry_causes() {
    let (_env, http) = start_with_foo().await;
    let r = http.post(FOOS, &json!({"apiVersion": "example.com/v1", "kind": "Foo", "metadata": {}, "spec": {}})).await;
    let s = assert_status(
        &r,
        422,
        "Invalid",
        "Foo.example.com \"\" is invalid: metadata.name: Required value: name or generateName is required",
    );
    assert_eq!(
        s["details"],
        json!({
            "group": "example.com", "kind": "Foo",
            "causes": [{"reason": "FieldValueRequired", "message": "Required value: name or generateName is required", "field": "metadata.name"}]
        })
    );
}

#[tokio::test]
async fn b2_unknown_path_is_404_with_empty_details() {
    let (_env, http) = start().await;
    for path in
        ["/nope", "/api/v2", "/apis/example.com/v1/namespaces/default/foos", "/api/v1/namespaces/default/widgets/w"]
    {
        let r = http.get(path).await;
        assert_eq!(r.status, 404, "{path}");
        assert_eq!(
            r.json(),
            json!({
                "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "the server could not find the requested resource", "reason": "NotFound",
                "details": {}, "code": 404
            }),
            "{path}"
        );
    }
}

#[tokio::test]
async fn b2_duplicate_create_is_409_already_exists() {
    let (_env, http) = start_with_foo().await;
    create_cm(&http, "a", json!({})).await;
    let s = assert_status(
        &http.post(CMS, &cm("a", json!({}))).await,
        409,
        "AlreadyExists",
        "configmaps \"a\" already exists",
    );
    assert_eq!(s["details"], json!({"name": "a", "kind": "configmaps"}));
    create_foo(&http, "f", json!({})).await;
    let s = assert_status(
        &http.post(FOOS, &foo("f", json!({}))).await,
        409,
        "AlreadyExists",
        "foos.example.com \"f\" already exists",
    );
    assert_eq!(s["details"], json!({"name": "f", "group": "example.com", "kind": "foos"}));
}

#[tokio::test]
async fn b2_duplicate_create_of_a_terminating_object_says_it_is_being_deleted() {
    let (_env, http) = start_with_foo().await;
    let mut f = foo("f", json!({}));
    f["metadata"]["finalizers"] = json!(["example.com/hold"]);
    http.post(FOOS, &f).await.expect(201);
    http.delete(&format!("{FOOS}/f")).await.expect(200);
    assert_status(
        &http.post(FOOS, &foo("f", json!({}))).await,
        409,
        "AlreadyExists",
        "object is being deleted: foos.example.com \"f\" already exists",
    );
}

#[tokio::test]
async fn b2_stale_resource_version_is_409_conflict_on_put_patch_and_apply() {
    let (_env, http) = start_with_foo().await;
    let old = create_foo(&http, "f", json!({"x": "1"})).await;
    http.merge(&format!("{FOOS}/f"), &json!({"spec": {"x": "2"}})).await.expect(200);
    let msg = "Operation cannot be fulfilled on foos.example.com \"f\": the object has been modified; please apply your changes to the latest version and try again";
    let s = assert_status(&http.put(&format!("{FOOS}/f"), &old).await, 409, "Conflict", msg);
    assert_eq!(s["details"], json!({"name": "f", "group": "example.com", "kind": "foos"}));
    let stale = json!({"metadata": {"resourceVersion": rv_str(&old)}, "spec": {"x": "3"}});
    assert_status(&http.merge(&format!("{FOOS}/f"), &stale).await, 409, "Conflict", msg);
    let mut applied = foo("f", json!({"x": "4"}));
    applied["metadata"]["resourceVersion"] = json!(rv_str(&old));
    assert_status(&http.apply(&format!("{FOOS}/f"), "fieldManager=m", &applied).await, 409, "Conflict", msg);
    // Core resources name the plural alone.
    let cm_old = create_cm(&http, "c", json!({})).await;
    http.merge(&format!("{CMS}/c"), &json!({"data": {"a": "b"}})).await.expect(200);
    assert_status(
        &http.put(&format!("{CMS}/c"), &cm_old).await,
        409,
        "Conflict",
        "Operation cannot be fulfilled on configmaps \"c\": the object has been modified; please apply your changes to the latest version and try again",
    );
}

#[tokio::test]
async fn b2_apply_conflict_with_an_apply_manager_names_it_and_the_field() {
    let (_env, http) = start_with_foo().await;
    http.apply(&format!("{FOOS}/f"), "fieldManager=mgr", &foo("f", json!({"x": "a"}))).await.expect(201);
    let r = http.apply(&format!("{FOOS}/f"), "fieldManager=other", &foo("f", json!({"x": "b"}))).await;
    let s = assert_status(&r, 409, "Conflict", "Apply failed with 1 conflict: conflict with \"mgr\": .spec.x");
    assert_eq!(
        s["details"],
        json!({"causes": [{"reason": "FieldManagerConflict", "message": "conflict with \"mgr\"", "field": ".spec.x"}]})
    );
}

#[tokio::test]
async fn b2_apply_conflict_with_an_update_manager_names_its_version() {
    let (_env, http) = start_with_foo().await;
    http.post(&format!("{FOOS}?fieldManager=mgr"), &foo("f", json!({"x": "a"}))).await.expect(201);
    let r = http.apply(&format!("{FOOS}/f"), "fieldManager=other", &foo("f", json!({"x": "b"}))).await;
    let s = assert_reason(&r, 409, "Conflict");
    let msg = s["message"].as_str().unwrap_or_default();
    // The manager identifier never carries the time (BuildManagerIdentifier), so no
    // "at <time>" suffix is printed.
    assert_eq!(msg, "Apply failed with 1 conflict: conflict with \"mgr\" using example.com/v1: .spec.x");
    let cause = &s["details"]["causes"][0];
    assert_eq!(cause["reason"], "FieldManagerConflict");
    assert_eq!(cause["field"], ".spec.x");
    assert_eq!(cause["message"], "conflict with \"mgr\" using example.com/v1");
    assert!(s["details"].get("name").is_none() && s["details"].get("kind").is_none(), "{s}");
}

#[tokio::test]
async fn b2_bad_list_options_are_422_listoptions_in_meta_k8s_io() {
    let (_env, http) = start().await;
    let r = http.get(&format!("{CMS}?resourceVersionMatch=NotOlderThan")).await;
    let s = assert_status(
        &r,
        422,
        "Invalid",
        "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided",
    );
    assert_eq!(s["details"]["kind"], "ListOptions");
    assert_eq!(s["details"]["group"], "meta.k8s.io");
    assert!(s["details"].get("name").is_none_or(|n| n == ""), "{s}");
    assert_eq!(s["details"]["causes"][0]["field"], "resourceVersionMatch");
    assert_eq!(s["details"]["causes"][0]["reason"], "FieldValueForbidden");
}

#[tokio::test]
async fn b2_bad_patch_options_are_422_patchoptions() {
    let (_env, http) = start_with_foo().await;
    create_foo(&http, "f", json!({})).await;
    let r = http.apply(&format!("{FOOS}/f"), "force=true", &foo("f", json!({}))).await;
    let s = assert_status(
        &r,
        422,
        "Invalid",
        "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
    );
    assert_eq!(s["details"]["kind"], "PatchOptions");
    assert_eq!(s["details"]["group"], "meta.k8s.io");
}

#[tokio::test]
async fn b2_malformed_body_is_400_bad_request() {
    let (_env, http) = start().await;
    let r = http.send(Method::POST, CMS, &[("content-type", "application/json")], Some(b"{not json".to_vec())).await;
    assert_reason(&r, 400, "BadRequest");
    let r = http.send(Method::POST, CMS, &[("content-type", "application/json")], Some(b"[1,2]".to_vec())).await;
    assert_reason(&r, 400, "BadRequest");
}

#[tokio::test]
async fn b2_name_on_url_mismatch_is_400() {
    let (_env, http) = start().await;
    let a = create_cm(&http, "a", json!({})).await;
    let mut b = a.clone();
    b["metadata"]["name"] = json!("b");
    assert_status(
        &http.put(&format!("{CMS}/a"), &b).await,
        400,
        "BadRequest",
        "the name of the object (b) does not match the name on the URL (a)",
    );
}

#[tokio::test]
async fn b2_namespace_mismatch_is_400() {
    let (_env, http) = start().await;
    let mut body = cm("a", json!({}));
    body["metadata"]["namespace"] = json!("kube-system");
    assert_status(
        &http.post(CMS, &body).await,
        400,
        "BadRequest",
        "the namespace of the provided object does not match the namespace sent on the request",
    );
}

#[tokio::test]
async fn b2_bad_label_selector_is_400() {
    let (_env, http) = start().await;
    let r = http.get(&format!("{CMS}?labelSelector=a%20b%20c")).await;
    assert_reason(&r, 400, "BadRequest");
    let r = http.get(&format!("{CMS}?labelSelector=in%20(")).await;
    assert_reason(&r, 400, "BadRequest");
}

#[tokio::test]
async fn b2_failed_json_patch_operation_is_422_with_the_generic_message() {
    let (_env, http) = start().await;
    create_cm(&http, "a", json!({"k": "v"})).await;
    let r = http.json_patch(&format!("{CMS}/a"), &json!([{"op": "test", "path": "/data/k", "value": "other"}])).await;
    assert_status(&r, 422, "Invalid", "the server rejected our request due to an error in our request");
    let r = http.json_patch(&format!("{CMS}/a"), &json!([{"op": "remove", "path": "/data/missing"}])).await;
    assert_status(&r, 422, "Invalid", "the server rejected our request due to an error in our request");
}

#[tokio::test]
async fn b2_strategic_merge_patch_on_a_custom_resource_is_415() {
    let (_env, http) = start_with_foo().await;
    create_foo(&http, "f", json!({})).await;
    let r =
        http.patch(&format!("{FOOS}/f"), "application/strategic-merge-patch+json", &json!({"spec": {"x": "1"}})).await;
    assert_status(
        &r,
        415,
        "UnsupportedMediaType",
        "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
    );
}

#[tokio::test]
async fn b2_unknown_patch_content_type_is_415() {
    let (_env, http) = start().await;
    create_cm(&http, "a", json!({})).await;
    for ct in ["application/json", "text/plain", "application/yaml"] {
        let r = http.patch(&format!("{CMS}/a"), ct, &json!({"data": {"a": "b"}})).await;
        assert_reason(&r, 415, "UnsupportedMediaType");
    }
}

#[tokio::test]
async fn b2_unsupported_verb_is_405_method_not_allowed() {
    let (_env, http) = start_with_foo().await;
    let r = http.send(Method::OPTIONS, FOOS, &[], None).await;
    let s = assert_reason(&r, 405, "MethodNotAllowed");
    let msg = s["message"].as_str().unwrap_or_default();
    assert!(msg.ends_with("is not supported on resources of kind \"foos.example.com\""), "{msg}");
    assert_eq!(s["details"], json!({"group": "example.com", "kind": "foos"}));
}

#[tokio::test]
async fn b2_expired_list_resource_version_is_410_expired() {
    let (env, http) = start().await;
    let a = create_cm(&http, "a", json!({})).await;
    create_cm(&http, "b", json!({})).await;
    env.handle().compact();
    let r = http.get(&format!("{CMS}?resourceVersion={}&resourceVersionMatch=Exact", rv(&a))).await;
    assert_status(&r, 410, "Expired", "The resourceVersion for the provided list is too old.");
}

#[tokio::test]
async fn b2_create_in_a_terminating_namespace_is_403_namespace_terminating() {
    let env = testenv::TestEnv::builder().namespace_controller(false).start().await.expect("start");
    let http = Http::new(&env);
    http.post("/api/v1/namespaces", &json!({"metadata": {"name": "doomed"}})).await.expect(201);
    http.delete("/api/v1/namespaces/doomed").await.expect(200);
    let r = http.post("/api/v1/namespaces/doomed/configmaps", &cm("x", json!({}))).await;
    let s = assert_status(
        &r,
        403,
        "Forbidden",
        "configmaps \"x\" is forbidden: unable to create new content in namespace doomed because it is being terminated",
    );
    assert_eq!(s["details"]["name"], "x");
    assert_eq!(s["details"]["kind"], "configmaps");
    assert_eq!(
        s["details"]["causes"],
        json!([{"reason": "NamespaceTerminating", "message": "namespace doomed is being terminated", "field": "metadata.namespace"}])
    );
}

#[tokio::test]
async fn b2_resource_version_newer_than_the_server_is_504_too_large() {
    let (env, http) = start().await;
    let future = env.handle().resource_version() + 1000;
    let r = http.get(&format!("{CMS}?resourceVersion={future}")).await;
    let current = env.handle().resource_version();
    let s = assert_status(&r, 504, "Timeout", &format!("Too large resource version: {future}, current: {current}"));
    assert_eq!(s["details"]["causes"][0]["reason"], "ResourceVersionTooLarge");
    assert_eq!(s["details"]["retryAfterSeconds"], 1);
}

#[tokio::test]
async fn b3_kube_rs_classifies_not_found_already_exists_and_conflict() {
    let (env, _http) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    match api.get("missing").await {
        Err(kube::Error::Api(s)) => {
            assert!(s.is_not_found(), "{s:?}");
            assert_eq!(s.code, 404);
        }
        other => panic!("expected NotFound, got {other:?}"),
    }
    assert!(api.get_opt("missing").await.expect("get_opt").is_none());
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("a".into());
    let created = api.create(&PostParams::default(), &cm).await.expect("create");
    match api.create(&PostParams::default(), &cm).await {
        Err(kube::Error::Api(s)) => assert!(s.is_already_exists(), "{s:?}"),
        other => panic!("expected AlreadyExists, got {other:?}"),
    }
    let mut changed = created.clone();
    changed.data = Some([("k".to_string(), "v".to_string())].into());
    api.replace("a", &PostParams::default(), &changed).await.expect("replace");
    match api.replace("a", &PostParams::default(), &changed).await {
        Err(kube::Error::Api(s)) => {
            assert!(s.is_conflict(), "{s:?}");
            assert_eq!(s.code, 409);
        }
        other => panic!("expected Conflict, got {other:?}"),
    }
}

#[tokio::test]
async fn b3_kube_rs_sees_invalid_with_reason_and_code() {
    let (env, http) = start_with_foo().await;
    create_foo(&http, "f", json!({})).await;
    let api: Api<Foo> = Api::namespaced(env.client(), "default");
    let mut f = api.get("f").await.expect("get");
    f.metadata.resource_version = None;
    match api.replace("f", &PostParams::default(), &f).await {
        Err(kube::Error::Api(s)) => {
            assert!(s.is_invalid(), "{s:?}");
            assert_eq!(s.code, 422);
        }
        other => panic!("expected Invalid, got {other:?}"),
    }
}

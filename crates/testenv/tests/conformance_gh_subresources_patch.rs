//! Checklist sections G and H: status and scale subresources, metadata.generation, and the
//! four patch types.

mod common;

use common::*;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

const DEPLOYS: &str = "/apis/apps/v1/namespaces/default/deployments";
const BARS: &str = "/apis/example.com/v1/namespaces/default/bars";
const LEASES: &str = "/apis/coordination.k8s.io/v1/namespaces/default/leases";

fn deployment(name: &str, replicas: i64) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "main", "image": "nginx"}]}}
        }
    })
}

fn generation(o: &Value) -> i64 {
    o["metadata"]["generation"].as_i64().unwrap_or_else(|| panic!("no generation in {o}"))
}

#[tokio::test]
async fn g1_create_drops_status_when_status_is_a_subresource() {
    let (_env, http) = start_with_foo().await;
    install_crd(&http, &bar_crd()).await;
    let mut f = foo("f", json!({"x": "1"}));
    f["status"] = json!({"ready": true});
    let r = http.post(FOOS, &f).await;
    r.expect(201);
    assert!(r.json().get("status").is_none(), "{}", r.text());
    // Without the subresource, status is ordinary content.
    let r = http.post(BARS, &json!({"apiVersion": "example.com/v1", "kind": "Bar", "metadata": {"name": "b"}, "spec": {}, "status": {"phase": "Up"}})).await;
    r.expect(201);
    assert_eq!(r.json()["status"]["phase"], "Up");
}

#[tokio::test]
async fn g1_main_resource_writes_keep_the_stored_status() {
    let (_env, http) = start_with_foo().await;
    create_foo(&http, "f", json!({"x": "1"})).await;
    http.merge(&format!("{FOOS}/f/status"), &json!({"status": {"ready": true}})).await.expect(200);
    // PUT with another status.
    let mut cur = http.get(&format!("{FOOS}/f")).await.json();
    cur["status"] = json!({"ready": false, "replicas": 9});
    cur["spec"]["x"] = json!("2");
    let r = http.put(&format!("{FOOS}/f"), &cur).await;
    r.expect(200);
    assert_eq!(r.json()["status"], json!({"ready": true}));
    assert_eq!(r.json()["spec"]["x"], "2");
    // Merge patch.
    let r = http.merge(&format!("{FOOS}/f"), &json!({"spec": {"x": "3"}, "status": {"ready": false}})).await;
    r.expect(200);
    assert_eq!(r.json()["status"], json!({"ready": true}));
    // JSON patch removing status.
    let r = http.json_patch(&format!("{FOOS}/f"), &json!([{"op": "remove", "path": "/status"}])).await;
    r.expect(200);
    assert_eq!(r.json()["status"], json!({"ready": true}));
    // Apply.
    let mut applied = foo("f", json!({"x": "4"}));
    applied["status"] = json!({"ready": false});
    let r = http.apply(&format!("{FOOS}/f"), "fieldManager=m&force=true", &applied).await;
    r.expect(200);
    assert_eq!(r.json()["status"], json!({"ready": true}));
    assert_eq!(http.get(&format!("{FOOS}/f")).await.json()["status"], json!({"ready": true}));
}

#[tokio::test]
async fn g1_status_writes_change_only_status() {
    let (_env, http) = start_with_foo().await;
    let created = create_foo(&http, "f", json!({"x": "1"})).await;
    // PUT /status carrying spec, labels and finalizers changes: only status is taken.
    let mut body = created.clone();
    body["spec"]["x"] = json!("changed");
    body["metadata"]["labels"] = json!({"a": "b"});
    body["metadata"]["finalizers"] = json!(["example.com/x"]);
    body["status"] = json!({"ready": true, "replicas": 1});
    let r = http.put(&format!("{FOOS}/f/status"), &body).await;
    r.expect(200);
    let o = r.json();
    assert_eq!(o["status"], json!({"ready": true, "replicas": 1}));
    assert_eq!(o["spec"]["x"], "1");
    assert!(o["metadata"].get("labels").is_none(), "{o}");
    assert!(o["metadata"].get("finalizers").is_none(), "{o}");
    // Merge patch on /status.
    let r = http
        .merge(
            &format!("{FOOS}/f/status"),
            &json!({"metadata": {"labels": {"c": "d"}}, "spec": {"x": "again"}, "status": {"replicas": 2}}),
        )
        .await;
    r.expect(200);
    let o = r.json();
    assert_eq!(o["status"], json!({"ready": true, "replicas": 2}));
    assert_eq!(o["spec"]["x"], "1");
    assert!(o["metadata"].get("labels").is_none(), "{o}");
}

#[tokio::test]
async fn g1_status_put_needs_the_current_resource_version() {
    let (_env, http) = start_with_foo().await;
    let created = create_foo(&http, "f", json!({})).await;
    http.merge(&format!("{FOOS}/f"), &json!({"spec": {"x": "1"}})).await.expect(200);
    let mut stale = created.clone();
    stale["status"] = json!({"ready": true});
    assert_reason(&http.put(&format!("{FOOS}/f/status"), &stale).await, 409, "Conflict");
}

#[tokio::test]
async fn g1_kube_rs_status_methods() {
    let (env, http) = start_with_foo().await;
    create_foo(&http, "f", json!({"x": "1"})).await;
    let api: Api<Foo> = Api::namespaced(env.client(), "default");
    let patched = api
        .patch_status("f", &PatchParams::default(), &Patch::Merge(json!({"status": {"ready": true}})))
        .await
        .expect("patch_status");
    assert_eq!(patched.status.as_ref().and_then(|s| s.ready), Some(true));
    let mut got = api.get_status("f").await.expect("get_status");
    assert_eq!(got.spec.x.as_deref(), Some("1"), "/status returns the whole object");
    got.status = Some(FooStatus { replicas: Some(3), ..FooStatus::default() });
    let replaced = api.replace_status("f", &PostParams::default(), &got).await.expect("replace_status");
    assert_eq!(replaced.status.and_then(|s| s.replicas), Some(3));
}

#[tokio::test]
async fn g2_generation_follows_spec_changes_only() {
    let (_env, http) = start_with_foo().await;
    let f = create_foo(&http, "f", json!({"x": "1"})).await;
    assert_eq!(generation(&f), 1);
    let r = http.merge(&format!("{FOOS}/f"), &json!({"spec": {"x": "2"}})).await.json();
    assert_eq!(generation(&r), 2);
    let r = http
        .merge(&format!("{FOOS}/f"), &json!({"metadata": {"labels": {"a": "b"}, "annotations": {"c": "d"}}}))
        .await
        .json();
    assert_eq!(generation(&r), 2, "metadata-only edits keep generation");
    let r = http.merge(&format!("{FOOS}/f/status"), &json!({"status": {"ready": true}})).await.json();
    assert_eq!(generation(&r), 2, "status writes keep generation");
    let r = http.merge(&format!("{FOOS}/f"), &json!({"spec": {"x": "2"}})).await.json();
    assert_eq!(generation(&r), 2, "no-ops keep generation");
    let r = http
        .json_patch(&format!("{FOOS}/f"), &json!([{"op": "add", "path": "/spec/tags", "value": ["t"]}]))
        .await
        .json();
    assert_eq!(generation(&r), 3);
    // A client cannot set it.
    let r = http.merge(&format!("{FOOS}/f"), &json!({"metadata": {"generation": 42}})).await.json();
    assert_eq!(generation(&r), 3);
}

#[tokio::test]
async fn g2_without_a_status_subresource_status_edits_bump_generation() {
    let (_env, http) = start().await;
    install_crd(&http, &bar_crd()).await;
    let b = http
        .post(
            BARS,
            &json!({"apiVersion": "example.com/v1", "kind": "Bar", "metadata": {"name": "b"}, "spec": {"x": "1"}}),
        )
        .await
        .json();
    assert_eq!(generation(&b), 1);
    let r = http.merge(&format!("{BARS}/b"), &json!({"status": {"phase": "Up"}})).await.json();
    assert_eq!(generation(&r), 2);
    assert_eq!(r["status"]["phase"], "Up");
}

#[tokio::test]
async fn g2_kube_runtime_generation_predicate_sees_spec_changes_only() {
    let (env, http) = start_with_foo().await;
    create_foo(&http, "f", json!({"x": "1"})).await;
    let api: Api<Foo> = Api::namespaced(env.client(), "default");
    let g1 = kube::runtime::predicates::generation(&api.get("f").await.unwrap());
    api.patch_status("f", &PatchParams::default(), &Patch::Merge(json!({"status": {"replicas": 1}}))).await.unwrap();
    let g2 = kube::runtime::predicates::generation(&api.get("f").await.unwrap());
    api.patch("f", &PatchParams::default(), &Patch::Merge(json!({"spec": {"x": "2"}}))).await.unwrap();
    let g3 = kube::runtime::predicates::generation(&api.get("f").await.unwrap());
    assert_eq!(g1, g2);
    assert_ne!(g2, g3);
}

#[tokio::test]
async fn g3_get_status_returns_the_whole_object_and_missing_subresources_are_404() {
    let (_env, http) = start_with_foo().await;
    install_crd(&http, &bar_crd()).await;
    create_foo(&http, "f", json!({"x": "1"})).await;
    let s = http.get(&format!("{FOOS}/f/status")).await;
    s.expect(200);
    assert_eq!(s.json(), http.get(&format!("{FOOS}/f")).await.json());
    http.post(BARS, &json!({"apiVersion": "example.com/v1", "kind": "Bar", "metadata": {"name": "b"}, "spec": {}}))
        .await
        .expect(201);
    for path in [format!("{BARS}/b/status"), format!("{BARS}/b/scale"), format!("{FOOS}/f/bogus")] {
        assert_status(&http.get(&path).await, 404, "NotFound", "the server could not find the requested resource");
    }
    assert_reason(&http.merge(&format!("{BARS}/b/status"), &json!({"status": {"phase": "x"}})).await, 404, "NotFound");
    assert_reason(&http.get(&format!("{FOOS}/missing/status")).await, 404, "NotFound");
}

#[tokio::test]
async fn g4_builtin_status_subresource_and_generation() {
    let (_env, http) = start().await;
    let mut d = deployment("d", 1);
    d["status"] = json!({"replicas": 5});
    let created = http.post(DEPLOYS, &d).await;
    created.expect(201);
    let created = created.json();
    assert!(created["status"].get("replicas").is_none(), "create drops status: {created}");
    assert_eq!(generation(&created), 1);
    // Status through /status only.
    let r = http
        .merge(
            &format!("{DEPLOYS}/d/status"),
            &json!({"status": {"replicas": 1, "observedGeneration": 1}, "spec": {"replicas": 7}}),
        )
        .await;
    r.expect(200);
    assert_eq!(r.json()["status"]["replicas"], 1);
    assert_eq!(r.json()["spec"]["replicas"], 1);
    assert_eq!(generation(&r.json()), 1);
    let r = http.merge(&format!("{DEPLOYS}/d"), &json!({"status": {"replicas": 9}})).await;
    assert_eq!(r.json()["status"]["replicas"], 1);
    // Spec bumps generation, metadata does not.
    let r = http.merge(&format!("{DEPLOYS}/d"), &json!({"spec": {"replicas": 3}})).await.json();
    assert_eq!(generation(&r), 2);
    let r = http.merge(&format!("{DEPLOYS}/d"), &json!({"metadata": {"labels": {"x": "y"}}})).await.json();
    assert_eq!(generation(&r), 2);
    // Kinds without generation never get one.
    let c = create_cm(&http, "c", json!({})).await;
    assert!(c["metadata"].get("generation").is_none());
    let c = http.merge(&format!("{CMS}/c"), &json!({"data": {"a": "b"}})).await.json();
    assert!(c["metadata"].get("generation").is_none());
}

#[tokio::test]
async fn g5_scale_subresource_of_a_custom_resource() {
    let (_env, http) = start_with_foo().await;
    let f = create_foo(&http, "f", json!({"replicas": 2})).await;
    http.merge(&format!("{FOOS}/f/status"), &json!({"status": {"replicas": 1, "selector": "app=f"}})).await.expect(200);
    let s = http.get(&format!("{FOOS}/f/scale")).await;
    s.expect(200);
    let s = s.json();
    assert_eq!(s["kind"], "Scale");
    assert_eq!(s["apiVersion"], "autoscaling/v1");
    assert_eq!(s["metadata"]["name"], "f");
    assert_eq!(s["metadata"]["namespace"], "default");
    assert_eq!(s["metadata"]["uid"], f["metadata"]["uid"]);
    assert_eq!(s["spec"], json!({"replicas": 2}));
    assert_eq!(s["status"], json!({"replicas": 1, "selector": "app=f"}));
    // Writes change spec.replicas only.
    let mut put = s.clone();
    put["spec"]["replicas"] = json!(5);
    put["status"]["replicas"] = json!(99);
    let r = http.put(&format!("{FOOS}/f/scale"), &put).await;
    r.expect(200);
    assert_eq!(r.json()["spec"]["replicas"], 5);
    let obj = http.get(&format!("{FOOS}/f")).await.json();
    assert_eq!(obj["spec"]["replicas"], 5);
    assert_eq!(obj["status"]["replicas"], 1);
    let r = http.merge(&format!("{FOOS}/f/scale"), &json!({"spec": {"replicas": 7}})).await;
    r.expect(200);
    assert_eq!(http.get(&format!("{FOOS}/f")).await.json()["spec"]["replicas"], 7);
    // A stale resourceVersion in the Scale conflicts.
    assert_reason(&http.put(&format!("{FOOS}/f/scale"), &put).await, 409, "Conflict");
}

#[tokio::test]
async fn g5_kube_rs_scale_methods_on_deployments() {
    let (env, http) = start().await;
    http.post(DEPLOYS, &deployment("d", 1)).await.expect(201);
    let api: Api<Deployment> = Api::namespaced(env.client(), "default");
    let s = api.get_scale("d").await.expect("get_scale");
    assert_eq!(s.spec.and_then(|s| s.replicas), Some(1));
    let s = api
        .patch_scale("d", &PatchParams::default(), &Patch::Merge(json!({"spec": {"replicas": 4}})))
        .await
        .expect("patch_scale");
    assert_eq!(s.spec.and_then(|s| s.replicas), Some(4));
    let d = api.get("d").await.expect("get");
    assert_eq!(d.spec.and_then(|s| s.replicas), Some(4));
    assert_eq!(d.metadata.generation, Some(2));
}

#[tokio::test]
async fn h1_merge_patch_follows_rfc_7386() {
    let (_env, http) = start_with_foo().await;
    let mut f =
        foo("f", json!({"x": "1", "color": "red", "tags": ["a", "b"], "settings": {"deep": {"k": "v", "other": 1}}}));
    f["metadata"]["labels"] = json!({"keep": "1", "drop": "2"});
    http.post(FOOS, &f).await.expect(201);
    let r = http
        .merge(
            &format!("{FOOS}/f"),
            &json!({"metadata": {"labels": {"drop": null, "add": "3"}}, "spec": {"color": null, "tags": ["c"], "settings": {"deep": {"k": "w"}}}}),
        )
        .await;
    r.expect(200);
    let o = r.json();
    assert_eq!(o["metadata"]["labels"], json!({"keep": "1", "add": "3"}));
    assert_eq!(o["spec"], json!({"x": "1", "tags": ["c"], "settings": {"deep": {"k": "w", "other": 1}}}));
}

#[tokio::test]
async fn h1_merge_patch_resource_version_is_a_precondition() {
    let (env, http) = start().await;
    let leases: Api<Lease> = Api::namespaced(env.client(), "default");
    let created = http
        .post(
            LEASES,
            &json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l"}, "spec": {}}),
        )
        .await
        .json();
    // kube-leader-election style: merge patch with the last seen RV and a field manager.
    let body = json!({"metadata": {"resourceVersion": rv_str(&created)}, "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15}});
    let r = http.merge(&format!("{LEASES}/l?fieldManager=leader-a"), &body).await;
    r.expect(200);
    let stale = json!({"metadata": {"resourceVersion": rv_str(&created)}, "spec": {"holderIdentity": "b"}});
    assert_reason(&http.merge(&format!("{LEASES}/l?fieldManager=leader-b"), &stale).await, 409, "Conflict");
    let l = leases.get("l").await.expect("get");
    assert_eq!(l.spec.and_then(|s| s.holder_identity).as_deref(), Some("a"));
}

#[tokio::test]
async fn h2_json_patch_operations() {
    let (_env, http) = start_with_foo().await;
    create_foo(&http, "f", json!({"x": "1", "tags": ["a"], "settings": {"from": "v"}})).await;
    let ops = json!([
        {"op": "add", "path": "/spec/tags/-", "value": "b"},
        {"op": "add", "path": "/spec/tags/0", "value": "first"},
        {"op": "replace", "path": "/spec/x", "value": "2"},
        {"op": "copy", "from": "/spec/x", "path": "/spec/color"},
        {"op": "move", "from": "/spec/settings/from", "path": "/spec/settings/to"},
        {"op": "test", "path": "/spec/settings/to", "value": "v"},
        {"op": "remove", "path": "/spec/tags/1"}
    ]);
    let r = http.json_patch(&format!("{FOOS}/f"), &ops).await;
    r.expect(200);
    assert_eq!(r.json()["spec"], json!({"x": "2", "color": "2", "tags": ["first", "b"], "settings": {"to": "v"}}));
}

#[tokio::test]
async fn h2_undecodable_json_patch_is_400() {
    let (_env, http) = start().await;
    create_cm(&http, "a", json!({})).await;
    for body in [json!({"op": "add"}), json!([{"op": "frobnicate", "path": "/data"}]), json!([{"path": "/data"}])] {
        let r = http.json_patch(&format!("{CMS}/a"), &body).await;
        assert_reason(&r, 400, "BadRequest");
    }
    let r = http
        .send(
            http::Method::PATCH,
            &format!("{CMS}/a"),
            &[("content-type", "application/json-patch+json")],
            Some(b"[{".to_vec()),
        )
        .await;
    assert_reason(&r, 400, "BadRequest");
}

#[tokio::test]
async fn h2_json_patch_with_more_than_10000_operations_is_rejected() {
    let (_env, http) = start().await;
    create_cm(&http, "a", json!({})).await;
    let ops: Vec<Value> = (0..10_001).map(|_| json!({"op": "test", "path": "/kind", "value": "ConfigMap"})).collect();
    let r = http.json_patch(&format!("{CMS}/a"), &Value::Array(ops)).await;
    let s = assert_reason(&r, 413, "RequestEntityTooLarge");
    assert!(
        s["message"].as_str().unwrap().contains("The allowed maximum operations in a JSON patch is 10000, got 10001"),
        "{s}"
    );
    let ops: Vec<Value> = (0..10_000).map(|_| json!({"op": "test", "path": "/kind", "value": "ConfigMap"})).collect();
    http.json_patch(&format!("{CMS}/a"), &Value::Array(ops)).await.expect(200);
}

#[tokio::test]
async fn h3_apply_patch_accepts_json_and_yaml_bodies() {
    let (env, http) = start_with_foo().await;
    let api: Api<Foo> = Api::namespaced(env.client(), "default");
    let body = Foo::new("f", FooSpec { x: Some("1".into()), ..FooSpec::default() });
    let created = api.patch("f", &PatchParams::apply("ctl"), &Patch::Apply(&body)).await.expect("apply JSON");
    assert_eq!(created.spec.x.as_deref(), Some("1"));
    let yaml = "apiVersion: example.com/v1\nkind: Foo\nmetadata:\n  name: g\nspec:\n  x: \"2\"\n";
    let r = http
        .send(
            http::Method::PATCH,
            &format!("{FOOS}/g?fieldManager=ctl"),
            &[("content-type", "application/apply-patch+yaml")],
            Some(yaml.as_bytes().to_vec()),
        )
        .await;
    r.expect(201);
    assert_eq!(r.json()["spec"]["x"], "2");
}

#[tokio::test]
async fn h4_strategic_merge_patch_merges_lists_by_key() {
    let (_env, http) = start().await;
    let mut d = deployment("d", 1);
    d["spec"]["template"]["spec"]["containers"] = json!([
        {"name": "main", "image": "nginx", "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}], "ports": [{"containerPort": 80}]},
        {"name": "side", "image": "busybox"}
    ]);
    http.post(DEPLOYS, &d).await.expect(201);
    let patch = json!({"spec": {"template": {"spec": {"containers": [
        {"name": "main", "image": "nginx:2", "env": [{"name": "B", "value": "3"}, {"name": "C", "value": "4"}], "ports": [{"containerPort": 443}]}
    ]}}}});
    let r = http.patch(&format!("{DEPLOYS}/d"), "application/strategic-merge-patch+json", &patch).await;
    r.expect(200);
    let containers = r.json()["spec"]["template"]["spec"]["containers"].clone();
    let names: Vec<&str> = containers.as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["main", "side"], "containers merge by name");
    let main = &containers[0];
    assert_eq!(main["image"], "nginx:2");
    let env: Vec<(String, String)> = main["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["name"].as_str().unwrap().into(), e["value"].as_str().unwrap().into()))
        .collect();
    assert_eq!(env, [("A".into(), "1".into()), ("B".into(), "3".into()), ("C".into(), "4".into())]);
    let ports: Vec<i64> =
        main["ports"].as_array().unwrap().iter().map(|p| p["containerPort"].as_i64().unwrap()).collect();
    // apimachinery's strategic merge puts items the patch adds before the ones only the
    // server has (as `kubectl patch` shows when adding a container).
    assert_eq!(ports, [443, 80], "ports merge by containerPort");
}

#[tokio::test]
async fn h4_strategic_merge_patch_finalizers_are_a_set_and_owner_references_merge_by_uid() {
    let (_env, http) = start().await;
    // Real owners: the garbage collector deletes dependents whose owners do not exist.
    let o1 = create_cm(&http, "o1", json!({})).await["metadata"]["uid"].clone();
    let o2 = create_cm(&http, "o2", json!({})).await["metadata"]["uid"].clone();
    let mut body = cm("a", json!({}));
    body["metadata"]["finalizers"] = json!(["x"]);
    body["metadata"]["ownerReferences"] = json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "o1", "uid": o1}]);
    http.post(CMS, &body).await.expect(201);
    let patch = json!({"metadata": {
        "finalizers": ["y", "x"],
        "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "o2", "uid": o2}]
    }});
    let r = http.patch(&format!("{CMS}/a"), "application/strategic-merge-patch+json", &patch).await;
    r.expect(200);
    let md = r.json()["metadata"].clone();
    let mut fins: Vec<String> = serde_json::from_value(md["finalizers"].clone()).unwrap();
    fins.sort();
    assert_eq!(fins, ["x", "y"], "finalizers merge as a set");
    let owners: Vec<&str> =
        md["ownerReferences"].as_array().unwrap().iter().map(|o| o["name"].as_str().unwrap()).collect();
    assert_eq!(owners.len(), 2, "{owners:?}");
    // $deleteFromPrimitiveList removes one.
    let r = http
        .patch(
            &format!("{CMS}/a"),
            "application/strategic-merge-patch+json",
            &json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["x"]}}),
        )
        .await;
    r.expect(200);
    assert_eq!(r.json()["metadata"]["finalizers"], json!(["y"]));
}

#[tokio::test]
async fn h4_strategic_merge_patch_directives() {
    let (_env, http) = start().await;
    let mut d = deployment("d", 1);
    d["spec"]["template"]["spec"]["containers"] =
        json!([{"name": "a", "image": "i"}, {"name": "b", "image": "i"}, {"name": "c", "image": "i"}]);
    http.post(DEPLOYS, &d).await.expect(201);
    let path = format!("{DEPLOYS}/d");
    let smp = "application/strategic-merge-patch+json";
    // $patch: delete on a list element.
    let r = http
        .patch(
            &path,
            smp,
            &json!({"spec": {"template": {"spec": {"containers": [{"name": "b", "$patch": "delete"}]}}}}),
        )
        .await;
    r.expect(200);
    let names = |o: &Value| -> Vec<String> {
        o["spec"]["template"]["spec"]["containers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(names(&r.json()), ["a", "c"]);
    // $setElementOrder.
    let r = http
        .patch(&path, smp, &json!({"spec": {"template": {"spec": {"$setElementOrder/containers": [{"name": "c"}, {"name": "a"}], "containers": [{"name": "a", "image": "j"}]}}}}))
        .await;
    r.expect(200);
    assert_eq!(names(&r.json()), ["c", "a"]);
    // $patch: replace on a list.
    let r = http
        .patch(&path, smp, &json!({"spec": {"template": {"spec": {"containers": [{"name": "z", "image": "i"}, {"$patch": "replace"}]}}}}))
        .await;
    r.expect(200);
    assert_eq!(names(&r.json()), ["z"]);
}

#[tokio::test]
async fn h4_strategic_merge_patch_on_leases_deletes_fields_with_null() {
    let (_env, http) = start().await;
    http.post(LEASES, &json!({"metadata": {"name": "l"}, "spec": {"holderIdentity": "a", "leaseDurationSeconds": 10, "leaseTransitions": 1}})).await.expect(201);
    let r = http
        .patch(
            &format!("{LEASES}/l"),
            "application/strategic-merge-patch+json",
            &json!({"spec": {"holderIdentity": null, "leaseTransitions": 2}}),
        )
        .await;
    r.expect(200);
    assert_eq!(r.json()["spec"], json!({"leaseDurationSeconds": 10, "leaseTransitions": 2}));
}

#[tokio::test]
async fn h5_patch_of_a_missing_object_is_404_except_apply_which_creates() {
    let (_env, http) = start_with_foo().await;
    let missing = format!("{FOOS}/missing");
    assert_status(
        &http.merge(&missing, &json!({"spec": {}})).await,
        404,
        "NotFound",
        "foos.example.com \"missing\" not found",
    );
    assert_status(
        &http.json_patch(&missing, &json!([])).await,
        404,
        "NotFound",
        "foos.example.com \"missing\" not found",
    );
    assert_status(
        &http.patch(&format!("{CMS}/missing"), "application/strategic-merge-patch+json", &json!({})).await,
        404,
        "NotFound",
        "configmaps \"missing\" not found",
    );
    http.apply(&missing, "fieldManager=m", &foo("missing", json!({}))).await.expect(201);
}

#[tokio::test]
async fn h6_force_on_a_non_apply_patch_is_422() {
    let (_env, http) = start().await;
    create_cm(&http, "a", json!({})).await;
    let r = http.patch(&format!("{CMS}/a?force=true"), "application/merge-patch+json", &json!({})).await;
    let s = assert_status(
        &r,
        422,
        "Invalid",
        "PatchOptions.meta.k8s.io \"\" is invalid: force: Forbidden: may not be specified for non-apply patch",
    );
    assert_eq!(s["details"]["causes"][0]["field"], "force");
}

#[tokio::test]
async fn h6_patches_cannot_rename_or_re_identify_the_object() {
    let (_env, http) = start().await;
    let a = create_cm(&http, "a", json!({})).await;
    let r = http.merge(&format!("{CMS}/a"), &json!({"metadata": {"name": "b"}})).await;
    assert_status(&r, 400, "BadRequest", "the name of the object (b) does not match the name on the URL (a)");
    let r =
        http.merge(&format!("{CMS}/a"), &json!({"metadata": {"uid": "33333333-3333-3333-3333-333333333333"}})).await;
    assert!(r.status == 409 || r.status == 422, "a patched uid is refused: {}", r.text());
    assert_eq!(http.get(&format!("{CMS}/a")).await.json()["metadata"]["uid"], a["metadata"]["uid"]);
    // Apply that would create an object with a given uid conflicts.
    let mut body = cm("new", json!({}));
    body["metadata"]["uid"] = json!("33333333-3333-3333-3333-333333333333");
    let r = http.apply(&format!("{CMS}/new"), "fieldManager=m", &body).await;
    assert_reason(&r, 409, "Conflict");
    http.get(&format!("{CMS}/new")).await.expect(404);
}

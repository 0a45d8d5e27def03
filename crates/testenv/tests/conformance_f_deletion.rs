//! Checklist section F: deletion, finalizers, propagation policies, preconditions, the garbage
//! collector, graceful pod deletion and namespace termination.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, Preconditions};
use kube::runtime::controller::Action;
use kube::runtime::finalizer::{Event as FinalizerEvent, finalizer};
use serde_json::{Value, json};

/// How long the suite waits for the garbage collector and namespace controller.
const CONTROLLER_WAIT: Duration = Duration::from_secs(10);

async fn gone(http: &Http, path: &str) -> bool {
    http.get(path).await.status == 404
}

async fn wait_gone(http: &Http, path: &str) {
    let p = path.to_string();
    eventually(CONTROLLER_WAIT, &format!("{p} to be deleted"), || {
        let http = http.clone();
        let p = p.clone();
        async move { gone(&http, &p).await.then_some(()) }
    })
    .await
}

fn owner_ref(owner: &Value, block: bool) -> Value {
    json!({
        "apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"], "controller": true, "blockOwnerDeletion": block
    })
}

async fn dependent(http: &Http, name: &str, owner: &Value, block: bool) -> Value {
    let mut body = cm(name, json!({}));
    body["metadata"]["ownerReferences"] = json!([owner_ref(owner, block)]);
    let r = http.post(CMS, &body).await;
    r.expect(201);
    r.json()
}

async fn held_foo(http: &Http, name: &str, finalizers: Value) -> Value {
    let mut f = foo(name, json!({"x": "1"}));
    f["metadata"]["finalizers"] = finalizers;
    let r = http.post(FOOS, &f).await;
    r.expect(201);
    r.json()
}

#[tokio::test]
async fn f1_delete_without_finalizers_removes_the_object_with_one_deleted_event_and_a_success_status() {
    let (_env, http) = start_with_foo().await;
    let f = create_foo(&http, "f", json!({})).await;
    let mut w = http.watch(&format!("{FOOS}?watch=true&resourceVersion={}", rv(&f))).await;
    let r = http.delete(&format!("{FOOS}/f")).await;
    r.expect(200);
    assert_eq!(
        r.json(),
        json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
            "details": {"name": "f", "group": "example.com", "kind": "foos", "uid": f["metadata"]["uid"]}
        })
    );
    assert_eq!(w.next().await["type"], "DELETED");
    w.expect_quiet().await;
    http.get(&format!("{FOOS}/f")).await.expect(404);
}

#[tokio::test]
async fn f1_core_kinds_without_returned_objects_answer_a_status_without_group() {
    let (_env, http) = start().await;
    let a = create_cm(&http, "a", json!({})).await;
    let r = http.delete(&format!("{CMS}/a")).await;
    r.expect(200);
    assert_eq!(
        r.json(),
        json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
            "details": {"name": "a", "kind": "configmaps", "uid": a["metadata"]["uid"]}
        })
    );
}

#[tokio::test]
async fn f1_kinds_that_return_the_deleted_object_answer_it() {
    let (_env, http) = start().await;
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}});
    let created = http.post("/api/v1/namespaces/default/pods", &pod).await.json();
    let r = http.delete("/api/v1/namespaces/default/pods/p").await;
    r.expect(200);
    let body = r.json();
    assert_eq!(body["kind"], "Pod");
    assert_eq!(body["metadata"]["uid"], created["metadata"]["uid"]);
    http.get("/api/v1/namespaces/default/pods/p").await.expect(404);
    let sa = http.post("/api/v1/namespaces/default/serviceaccounts", &json!({"metadata": {"name": "sa"}})).await.json();
    let r = http.delete("/api/v1/namespaces/default/serviceaccounts/sa").await;
    assert_eq!(r.json()["kind"], "ServiceAccount");
    assert_eq!(r.json()["metadata"]["uid"], sa["metadata"]["uid"]);
}

#[tokio::test]
async fn f1_kube_rs_delete_and_finalize_waits_for_the_object_to_go() {
    let (env, http) = start_with_foo().await;
    create_foo(&http, "plain", json!({})).await;
    held_foo(&http, "held", json!(["example.com/hold"])).await;
    let api: Api<Foo> = Api::namespaced(env.client(), "default");
    within(
        "delete_and_finalize",
        kube::runtime::wait::delete::delete_and_finalize(api.clone(), "plain", &DeleteParams::default()),
    )
    .await
    .expect("deleted");
    // With a finalizer: waits until another actor removes it.
    let waiter = tokio::spawn({
        let api = api.clone();
        async move { kube::runtime::wait::delete::delete_and_finalize(api, "held", &DeleteParams::default()).await }
    });
    eventually(WAIT, "the held object to be marked", || {
        let http = http.clone();
        async move {
            http.get(&format!("{FOOS}/held")).await.json()["metadata"]["deletionTimestamp"].is_string().then_some(())
        }
    })
    .await;
    assert!(!waiter.is_finished());
    http.json_patch(&format!("{FOOS}/held"), &json!([{"op": "remove", "path": "/metadata/finalizers"}]))
        .await
        .expect(200);
    within("delete_and_finalize to return", waiter).await.expect("join").expect("deleted");
}

#[tokio::test]
async fn f2_delete_with_finalizers_marks_the_object_with_one_modified_event() {
    let (env, http) = start_with_foo().await;
    let f = held_foo(&http, "f", json!(["example.com/hold"])).await;
    assert_eq!(f["metadata"]["generation"], 1);
    let mut w = http.watch(&format!("{FOOS}?watch=true&resourceVersion={}", rv(&f))).await;
    let before = jiff::Timestamp::now();
    let r = http.delete(&format!("{FOOS}/f")).await;
    r.expect(200);
    let o = r.json();
    assert_eq!(o["kind"], "Foo", "the object, not a Status: {o}");
    let md = &o["metadata"];
    let ts: jiff::Timestamp = md["deletionTimestamp"].as_str().expect("deletionTimestamp").parse().expect("RFC 3339");
    assert!((ts.as_second() - before.as_second()).abs() <= 2, "deletionTimestamp is now: {ts}");
    assert_eq!(md["deletionGracePeriodSeconds"], 0);
    assert_eq!(md["generation"], 2, "markAsDeleting bumps generation");
    assert_eq!(md["finalizers"], json!(["example.com/hold"]));
    assert!(rv(&o) > rv(&f));
    assert_eq!(rv(&o), env.handle().resource_version());
    let ev = w.next().await;
    assert_eq!(ev["type"], "MODIFIED");
    assert_eq!(ev["object"]["metadata"]["deletionTimestamp"], md["deletionTimestamp"]);
    w.expect_quiet().await;
}

#[tokio::test]
async fn f3_no_new_finalizers_may_be_added_while_deleting() {
    let (_env, http) = start_with_foo().await;
    held_foo(&http, "f", json!(["example.com/hold"])).await;
    http.delete(&format!("{FOOS}/f")).await.expect(200);
    let r = http.merge(&format!("{FOOS}/f"), &json!({"metadata": {"finalizers": ["example.com/hold", "x"]}})).await;
    let s = assert_status(
        &r,
        422,
        "Invalid",
        "Foo.example.com \"f\" is invalid: metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{\"x\"}",
    );
    assert_eq!(s["details"]["causes"][0]["reason"], "FieldValueForbidden");
    assert_eq!(s["details"]["causes"][0]["field"], "metadata.finalizers");
    // Other edits are allowed.
    let r = http.merge(&format!("{FOOS}/f"), &json!({"metadata": {"labels": {"a": "b"}}, "spec": {"x": "2"}})).await;
    r.expect(200);
    assert_eq!(r.json()["spec"]["x"], "2");
    assert_eq!(r.json()["metadata"]["finalizers"], json!(["example.com/hold"]));
}

#[tokio::test]
async fn f4_emptying_the_finalizers_of_a_deleting_object_removes_it_with_exactly_one_deleted_event() {
    let (env, http) = start_with_foo().await;
    held_foo(&http, "f", json!(["example.com/a", "example.com/b"])).await;
    let marked = http.delete(&format!("{FOOS}/f")).await.json();
    let mut w = http.watch(&format!("{FOOS}?watch=true&resourceVersion={}", rv(&marked))).await;
    // Removing one of two: MODIFIED, object stays.
    http.json_patch(&format!("{FOOS}/f"), &json!([{"op": "test", "path": "/metadata/finalizers/0", "value": "example.com/a"}, {"op": "remove", "path": "/metadata/finalizers/0"}]))
        .await
        .expect(200);
    let ev = w.next().await;
    assert_eq!(ev["type"], "MODIFIED");
    assert_eq!(ev["object"]["metadata"]["finalizers"], json!(["example.com/b"]));
    // Removing the last through PUT: the object goes; one DELETED, no MODIFIED.
    let mut cur = http.get(&format!("{FOOS}/f")).await.json();
    cur["metadata"]["finalizers"] = json!([]);
    let r = http.put(&format!("{FOOS}/f"), &cur).await;
    r.expect(200);
    let resp = r.json();
    assert_eq!(resp["metadata"]["name"], "f");
    assert!(resp["metadata"].get("finalizers").is_none_or(|f| f == &json!([])), "the submitted object: {resp}");
    let ev = w.next().await;
    assert_eq!(ev["type"], "DELETED");
    assert_eq!(ev["object"]["metadata"]["finalizers"], json!(["example.com/b"]), "the last stored state");
    assert_eq!(rv(&ev["object"]), env.handle().resource_version());
    w.expect_quiet().await;
    http.get(&format!("{FOOS}/f")).await.expect(404);
}

#[tokio::test]
async fn f4_merge_patch_removing_the_last_finalizer_removes_a_core_object() {
    let (_env, http) = start().await;
    let mut body = cm("a", json!({}));
    body["metadata"]["finalizers"] = json!(["example.com/hold"]);
    http.post(CMS, &body).await.expect(201);
    let marked = http.delete(&format!("{CMS}/a")).await.json();
    let mut w = http.watch(&format!("{CMS}?watch=true&resourceVersion={}", rv(&marked))).await;
    http.merge(&format!("{CMS}/a"), &json!({"metadata": {"finalizers": null}})).await.expect(200);
    assert_eq!(w.next().await["type"], "DELETED");
    w.expect_quiet().await;
    http.get(&format!("{CMS}/a")).await.expect(404);
}

#[tokio::test]
async fn f5_deleting_an_object_that_is_already_being_deleted_changes_nothing() {
    let (env, http) = start_with_foo().await;
    held_foo(&http, "f", json!(["example.com/hold"])).await;
    let marked = http.delete(&format!("{FOOS}/f")).await.json();
    let global = env.handle().resource_version();
    let mut w = http.watch(&format!("{FOOS}?watch=true&resourceVersion={global}")).await;
    for options in [json!({}), json!({"propagationPolicy": "Foreground"}), json!({"gracePeriodSeconds": 0})] {
        let r = http.delete_with(&format!("{FOOS}/f"), &options).await;
        r.expect(200);
        assert_eq!(r.json(), marked, "{options}");
    }
    assert_eq!(env.handle().resource_version(), global);
    w.expect_quiet().await;
}

#[tokio::test]
async fn f5_deleting_a_missing_object_is_404() {
    let (_env, http) = start_with_foo().await;
    assert_status(&http.delete(&format!("{FOOS}/nope")).await, 404, "NotFound", "foos.example.com \"nope\" not found");
    assert_status(&http.delete(&format!("{CMS}/nope")).await, 404, "NotFound", "configmaps \"nope\" not found");
}

#[tokio::test]
async fn f6_kube_runtime_finalizer_patches_test_null_add_and_remove() {
    let (env, http) = start_with_foo().await;
    create_foo(&http, "f", json!({})).await;
    // The first finalizer: `test /metadata/finalizers null` passes on an absent field.
    let r = http
        .json_patch(&format!("{FOOS}/f"), &json!([{"op": "test", "path": "/metadata/finalizers", "value": null}, {"op": "add", "path": "/metadata/finalizers", "value": ["a"]}]))
        .await;
    r.expect(200);
    assert_eq!(r.json()["metadata"]["finalizers"], json!(["a"]));
    // A later one: test the whole array, append.
    let r = http
        .json_patch(&format!("{FOOS}/f"), &json!([{"op": "test", "path": "/metadata/finalizers", "value": ["a"]}, {"op": "add", "path": "/metadata/finalizers/-", "value": "b"}]))
        .await;
    r.expect(200);
    assert_eq!(r.json()["metadata"]["finalizers"], json!(["a", "b"]));
    // test + remove by index.
    let r = http
        .json_patch(&format!("{FOOS}/f"), &json!([{"op": "test", "path": "/metadata/finalizers/0", "value": "a"}, {"op": "remove", "path": "/metadata/finalizers/0"}]))
        .await;
    r.expect(200);
    assert_eq!(r.json()["metadata"]["finalizers"], json!(["b"]));
    // A stale test fails the whole patch: nothing of it is applied.
    let before = http.get(&format!("{FOOS}/f")).await.json();
    let r = http
        .json_patch(
            &format!("{FOOS}/f"),
            &json!([{"op": "add", "path": "/metadata/labels", "value": {"x": "y"}}, {"op": "test", "path": "/metadata/finalizers", "value": ["a", "b"]}, {"op": "add", "path": "/metadata/finalizers/-", "value": "c"}]),
        )
        .await;
    assert_status(&r, 422, "Invalid", "the server rejected our request due to an error in our request");
    assert_eq!(http.get(&format!("{FOOS}/f")).await.json(), before);
    // `test null` fails once finalizers exist.
    let r = http
        .json_patch(&format!("{FOOS}/f"), &json!([{"op": "test", "path": "/metadata/finalizers", "value": null}, {"op": "add", "path": "/metadata/finalizers", "value": ["z"]}]))
        .await;
    assert_reason(&r, 422, "Invalid");
    let _ = env;
}

/// The error type of reconcile closures that cannot fail.
#[derive(Debug)]
enum Never {}

impl std::fmt::Display for Never {
    fn fmt(&self, _: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {}
    }
}

impl std::error::Error for Never {}

#[tokio::test]
async fn f6_kube_runtime_finalizer_helper_adds_runs_cleanup_and_removes() {
    let (env, http) = start_with_foo().await;
    create_foo(&http, "f", json!({})).await;
    let api: Api<Foo> = Api::namespaced(env.client(), "default");
    let name = "example.com/cleanup";
    // 1: no finalizer yet: the helper adds it.
    let obj = Arc::new(api.get("f").await.expect("get"));
    within("finalizer add", finalizer(&api, name, obj, |_| async { Ok::<_, Never>(Action::await_change()) }))
        .await
        .expect("finalizer added");
    let obj = api.get("f").await.expect("get");
    assert_eq!(obj.metadata.finalizers.as_deref(), Some(&[name.to_string()][..]));
    // 2: a reconcile with the finalizer present is an Apply.
    let applied = std::sync::atomic::AtomicBool::new(false);
    within(
        "finalizer apply",
        finalizer(&api, name, Arc::new(obj), |ev| {
            assert!(matches!(ev, FinalizerEvent::Apply(_)));
            applied.store(true, std::sync::atomic::Ordering::SeqCst);
            async { Ok::<_, Never>(Action::await_change()) }
        }),
    )
    .await
    .expect("apply");
    assert!(applied.load(std::sync::atomic::Ordering::SeqCst));
    // 3: deletion: Cleanup runs, the finalizer is removed, the object goes.
    http.delete(&format!("{FOOS}/f")).await.expect(200);
    let obj = Arc::new(api.get("f").await.expect("still there while finalizing"));
    within(
        "finalizer cleanup",
        finalizer(&api, name, obj, |ev| {
            assert!(matches!(ev, FinalizerEvent::Cleanup(_)));
            async { Ok::<_, Never>(Action::await_change()) }
        }),
    )
    .await
    .expect("cleanup");
    assert!(api.get_opt("f").await.expect("get").is_none());
}

#[tokio::test]
async fn f7_propagation_policy_adds_the_matching_finalizer() {
    let (_env, http) = start_with_foo().await;
    for (name, options, expected) in [
        ("fg", json!({"propagationPolicy": "Foreground"}), Some("foregroundDeletion")),
        ("or", json!({"propagationPolicy": "Orphan"}), Some("orphan")),
        ("od", json!({"orphanDependents": true}), Some("orphan")),
        ("bg", json!({"propagationPolicy": "Background"}), None),
        ("default", json!({}), None),
    ] {
        held_foo(&http, name, json!(["example.com/hold"])).await;
        let r = http.delete_with(&format!("{FOOS}/{name}"), &options).await;
        r.expect(200);
        let fins: Vec<String> = serde_json::from_value(r.json()["metadata"]["finalizers"].clone()).unwrap();
        match expected {
            Some(f) => assert!(fins.contains(&f.to_string()), "{name}: {fins:?}"),
            None => assert_eq!(fins, ["example.com/hold"], "{name}"),
        }
    }
}

#[tokio::test]
async fn f7_bad_propagation_policy_is_422() {
    let (_env, http) = start().await;
    create_cm(&http, "a", json!({})).await;
    let s = assert_reason(
        &http.delete_with(&format!("{CMS}/a"), &json!({"propagationPolicy": "Sideways"})).await,
        422,
        "Invalid",
    );
    assert_eq!(s["details"]["kind"], "DeleteOptions");
    assert_eq!(s["details"]["causes"][0]["reason"], "FieldValueNotSupported");
    assert_eq!(s["details"]["causes"][0]["field"], "propagationPolicy");
    let s = assert_reason(
        &http.delete_with(&format!("{CMS}/a"), &json!({"propagationPolicy": "Orphan", "orphanDependents": true})).await,
        422,
        "Invalid",
    );
    assert_eq!(s["details"]["kind"], "DeleteOptions");
    http.get(&format!("{CMS}/a")).await.expect(200);
}

#[tokio::test]
async fn f7_options_cannot_change_finalizers_once_deletion_started() {
    let (_env, http) = start_with_foo().await;
    held_foo(&http, "f", json!(["example.com/hold"])).await;
    http.delete(&format!("{FOOS}/f")).await.expect(200);
    let r = http.delete_with(&format!("{FOOS}/f"), &json!({"propagationPolicy": "Orphan"})).await;
    r.expect(200);
    assert_eq!(r.json()["metadata"]["finalizers"], json!(["example.com/hold"]));
}

#[tokio::test]
async fn f8_delete_preconditions_conflict_on_uid_and_resource_version() {
    let (env, http) = start().await;
    let a = create_cm(&http, "a", json!({})).await;
    let uid = a["metadata"]["uid"].as_str().unwrap().to_string();
    let wrong = "00000000-0000-0000-0000-000000000000";
    let r = http.delete_with(&format!("{CMS}/a"), &json!({"preconditions": {"uid": wrong}})).await;
    assert_status(
        &r,
        409,
        "Conflict",
        &format!(
            "Operation cannot be fulfilled on ConfigMap \"a\": the UID in the precondition ({wrong}) does not match the UID in record ({uid}). The object might have been deleted and then recreated"
        ),
    );
    let r = http.delete_with(&format!("{CMS}/a"), &json!({"preconditions": {"resourceVersion": "1"}})).await;
    assert_status(
        &r,
        409,
        "Conflict",
        &format!(
            "Operation cannot be fulfilled on ConfigMap \"a\": the ResourceVersion in the precondition (1) does not match the ResourceVersion in record ({}). The object might have been modified",
            rv(&a)
        ),
    );
    http.get(&format!("{CMS}/a")).await.expect(200);
    // Matching preconditions delete; kube-rs sends them the same way.
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let dp =
        DeleteParams::default().preconditions(Preconditions { uid: Some(uid), resource_version: Some(rv_str(&a)) });
    api.delete("a", &dp).await.expect("delete with matching preconditions");
    http.get(&format!("{CMS}/a")).await.expect(404);
}

#[tokio::test]
async fn f9_background_garbage_collection_deletes_dependents_of_a_deleted_owner() {
    let (_env, http) = start().await;
    let owner = create_cm(&http, "owner", json!({})).await;
    dependent(&http, "dep1", &owner, false).await;
    dependent(&http, "dep2", &owner, true).await;
    let unrelated = create_cm(&http, "unrelated", json!({})).await;
    let r = http.delete(&format!("{CMS}/owner")).await;
    r.expect(200);
    assert_eq!(r.json()["kind"], "Status", "background deletion removes the owner at once");
    wait_gone(&http, &format!("{CMS}/dep1")).await;
    wait_gone(&http, &format!("{CMS}/dep2")).await;
    assert_eq!(http.get(&format!("{CMS}/unrelated")).await.json()["metadata"]["uid"], unrelated["metadata"]["uid"]);
}

#[tokio::test]
async fn f9_dependents_whose_owners_never_existed_are_collected() {
    let (_env, http) = start().await;
    let ghost = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ghost", "uid": "99999999-9999-9999-9999-999999999999"}});
    dependent(&http, "orphaned", &ghost, false).await;
    wait_gone(&http, &format!("{CMS}/orphaned")).await;
}

#[tokio::test]
async fn f9_foreground_deletion_removes_blocking_dependents_first() {
    let (_env, http) = start().await;
    let owner = create_cm(&http, "owner", json!({})).await;
    let mut dep = cm("dep", json!({}));
    dep["metadata"]["ownerReferences"] = json!([owner_ref(&owner, true)]);
    dep["metadata"]["finalizers"] = json!(["example.com/hold"]);
    http.post(CMS, &dep).await.expect(201);
    let r = http.delete_with(&format!("{CMS}/owner"), &json!({"propagationPolicy": "Foreground"})).await;
    r.expect(200);
    assert!(r.json()["metadata"]["finalizers"].as_array().unwrap().contains(&json!("foregroundDeletion")));
    // The dependent is being deleted, held by its finalizer; the owner waits for it.
    eventually(CONTROLLER_WAIT, "the dependent to be marked", || {
        let http = http.clone();
        async move {
            http.get(&format!("{CMS}/dep")).await.json()["metadata"]["deletionTimestamp"].is_string().then_some(())
        }
    })
    .await;
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let o = http.get(&format!("{CMS}/owner")).await;
    o.expect(200);
    assert!(o.json()["metadata"]["deletionTimestamp"].is_string());
    // Release the dependent: then the owner goes.
    http.merge(&format!("{CMS}/dep"), &json!({"metadata": {"finalizers": null}})).await.expect(200);
    wait_gone(&http, &format!("{CMS}/dep")).await;
    wait_gone(&http, &format!("{CMS}/owner")).await;
}

#[tokio::test]
async fn f9_orphan_deletion_keeps_dependents_and_strips_their_owner_references() {
    let (_env, http) = start().await;
    let owner = create_cm(&http, "owner", json!({})).await;
    dependent(&http, "dep", &owner, true).await;
    let r = http.delete_with(&format!("{CMS}/owner"), &json!({"propagationPolicy": "Orphan"})).await;
    r.expect(200);
    wait_gone(&http, &format!("{CMS}/owner")).await;
    let dep = http.get(&format!("{CMS}/dep")).await;
    dep.expect(200);
    assert!(dep.json()["metadata"].get("ownerReferences").is_none(), "{}", dep.text());
}

#[tokio::test]
async fn f9_namespaced_dependents_of_owners_in_other_namespaces_are_collected() {
    let (_env, http) = start().await;
    let owner = http.post("/api/v1/namespaces/kube-public/configmaps", &cm("owner", json!({}))).await.json();
    dependent(&http, "dep", &owner, false).await;
    wait_gone(&http, &format!("{CMS}/dep")).await;
    http.get("/api/v1/namespaces/kube-public/configmaps/owner").await.expect(200);
}

#[tokio::test]
async fn f9_garbage_collector_can_be_switched_off() {
    let env = testenv::TestEnv::builder().garbage_collector(false).start().await.expect("start");
    let http = Http::new(&env);
    let owner = create_cm(&http, "owner", json!({})).await;
    dependent(&http, "dep", &owner, false).await;
    http.delete(&format!("{CMS}/owner")).await.expect(200);
    tokio::time::sleep(Duration::from_millis(2500)).await;
    http.get(&format!("{CMS}/dep")).await.expect(200);
}

#[tokio::test]
async fn f10_grace_period_is_ignored_for_kinds_without_graceful_deletion() {
    let (_env, http) = start().await;
    create_cm(&http, "a", json!({})).await;
    http.delete_with(&format!("{CMS}/a"), &json!({"gracePeriodSeconds": 30})).await.expect(200);
    http.get(&format!("{CMS}/a")).await.expect(404);
}

#[tokio::test]
async fn f10_unscheduled_pods_delete_at_once_and_scheduled_pods_wait_for_their_grace_period() {
    let (_env, http) = start().await;
    let pods = "/api/v1/namespaces/default/pods";
    let spec = json!({"containers": [{"name": "c", "image": "i"}]});
    http.post(pods, &json!({"metadata": {"name": "unscheduled"}, "spec": spec})).await.expect(201);
    http.delete(&format!("{pods}/unscheduled")).await.expect(200);
    http.get(&format!("{pods}/unscheduled")).await.expect(404);
    let mut scheduled = spec.clone();
    scheduled["nodeName"] = json!("node-1");
    http.post(pods, &json!({"metadata": {"name": "running"}, "spec": scheduled})).await.expect(201);
    let before = jiff::Timestamp::now();
    let r = http.delete_with(&format!("{pods}/running"), &json!({"gracePeriodSeconds": 2})).await;
    r.expect(200);
    let md = r.json()["metadata"].clone();
    assert_eq!(md["deletionGracePeriodSeconds"], 2);
    let ts: jiff::Timestamp = md["deletionTimestamp"].as_str().unwrap().parse().unwrap();
    assert!((ts.as_second() - before.as_second() - 2).abs() <= 1, "deletionTimestamp = now + grace: {ts}");
    http.get(&format!("{pods}/running")).await.expect(200);
    wait_gone(&http, &format!("{pods}/running")).await;
}

#[tokio::test]
async fn f11_deleting_a_namespace_terminates_it_and_the_controller_empties_and_removes_it() {
    let (_env, http) = start_with_foo().await;
    http.post("/api/v1/namespaces", &json!({"metadata": {"name": "doomed"}})).await.expect(201);
    http.post("/api/v1/namespaces/doomed/configmaps", &cm("a", json!({}))).await.expect(201);
    http.post("/apis/example.com/v1/namespaces/doomed/foos", &foo("f", json!({}))).await.expect(201);
    let r = http.delete("/api/v1/namespaces/doomed").await;
    r.expect(200);
    let ns = r.json();
    assert_eq!(ns["kind"], "Namespace");
    assert_eq!(ns["status"]["phase"], "Terminating");
    assert!(ns["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(ns["spec"]["finalizers"], json!(["kubernetes"]));
    wait_gone(&http, "/api/v1/namespaces/doomed").await;
    // Its content is gone too (a recreated namespace starts empty).
    http.post("/api/v1/namespaces", &json!({"metadata": {"name": "doomed"}})).await.expect(201);
    assert_eq!(http.get("/api/v1/namespaces/doomed/configmaps").await.json()["items"], json!([]));
    assert_eq!(http.get("/apis/example.com/v1/namespaces/doomed/foos").await.json()["items"], json!([]));
}

#[tokio::test]
async fn f11_without_the_namespace_controller_a_deleted_namespace_stays_terminating() {
    let env = testenv::TestEnv::builder().namespace_controller(false).start().await.expect("start");
    let http = Http::new(&env);
    http.post("/api/v1/namespaces", &json!({"metadata": {"name": "stuck"}})).await.expect(201);
    http.delete("/api/v1/namespaces/stuck").await.expect(200);
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let ns = http.get("/api/v1/namespaces/stuck").await.json();
    assert_eq!(ns["status"]["phase"], "Terminating");
}

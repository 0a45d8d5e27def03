//! Checklist section C: object writes and metadata (resourceVersion, identity, generateName,
//! namespaces, optimistic concurrency, no-op writes, normalisation, field validation, dry run).

mod common;

use std::time::Duration;

use common::*;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

fn is_rfc3339_seconds(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 20
        && b[4] == b'-'
        && b[7] == b'-'
        && b[10] == b'T'
        && b[13] == b':'
        && b[16] == b':'
        && b[19] == b'Z'
        && [0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18].iter().all(|i| b[*i].is_ascii_digit())
}

fn is_uuid(s: &str) -> bool {
    let parts: Vec<&str> = s.split('-').collect();
    parts.iter().map(|p| p.len()).collect::<Vec<_>>() == [8, 4, 4, 4, 12]
        && parts.iter().all(|p| p.chars().all(|c| c.is_ascii_hexdigit()))
}

#[tokio::test]
async fn c1_one_monotonic_resource_version_across_all_resources_and_write_kinds() {
    let (env, http) = start_with_foo().await;
    let mut w = http.watch(&format!("{FOOS}?watch=true&resourceVersion={}", env.handle().resource_version())).await;
    let mut seen = vec![env.handle().resource_version()];
    let a = create_cm(&http, "a", json!({})).await;
    seen.push(rv(&a));
    let f = create_foo(&http, "f", json!({})).await;
    seen.push(rv(&f));
    let r = http.merge(&format!("{CMS}/a"), &json!({"data": {"k": "v"}})).await;
    seen.push(rv(&r.json()));
    let r = http.merge(&format!("{FOOS}/f/status"), &json!({"status": {"ready": true}})).await;
    seen.push(rv(&r.json()));
    let r = http.merge(&format!("{FOOS}/f"), &json!({"metadata": {"finalizers": ["example.com/hold"]}})).await;
    seen.push(rv(&r.json()));
    let r = http.delete(&format!("{FOOS}/f")).await;
    seen.push(rv(&r.json()));
    // The finalizer-triggered removal takes the next RV too.
    http.json_patch(&format!("{FOOS}/f"), &json!([{"op": "remove", "path": "/metadata/finalizers"}])).await.expect(200);
    let mut last = None;
    for _ in 0..6 {
        let ev = w.next().await;
        if ev["type"] == "DELETED" {
            last = Some(rv(&ev["object"]));
            break;
        }
    }
    seen.push(last.expect("a DELETED event"));
    assert!(seen.windows(2).all(|p| p[0] < p[1]), "resourceVersions must strictly increase: {seen:?}");
    assert_eq!(*seen.last().unwrap(), env.handle().resource_version());
    // Decimal strings on the wire.
    assert!(a["metadata"]["resourceVersion"].as_str().unwrap().chars().all(|c| c.is_ascii_digit()));
}

#[tokio::test]
async fn c2_create_fills_uid_creation_timestamp_resource_version_and_namespace() {
    let (_env, http) = start_with_foo().await;
    for (path, body) in [(CMS, cm("a", json!({}))), (FOOS, foo("f", json!({})))] {
        let r = http.post(path, &body).await;
        r.expect(201);
        let o = r.json();
        let md = &o["metadata"];
        assert!(is_uuid(md["uid"].as_str().unwrap_or("")), "{o}");
        assert!(is_rfc3339_seconds(md["creationTimestamp"].as_str().unwrap_or("")), "{o}");
        assert!(rv(&o) > 0);
        assert_eq!(md["namespace"], "default");
    }
}

#[tokio::test]
async fn c2_create_wipes_client_supplied_uid_and_timestamps() {
    let (_env, http) = start().await;
    let mut body = cm("a", json!({}));
    body["metadata"]["uid"] = json!("11111111-1111-1111-1111-111111111111");
    body["metadata"]["creationTimestamp"] = json!("2000-01-01T00:00:00Z");
    body["metadata"]["deletionTimestamp"] = json!("2000-01-01T00:00:00Z");
    body["metadata"]["deletionGracePeriodSeconds"] = json!(30);
    let r = http.post(CMS, &body).await;
    r.expect(201);
    let md = r.json()["metadata"].clone();
    assert_ne!(md["uid"], "11111111-1111-1111-1111-111111111111");
    assert_ne!(md["creationTimestamp"], "2000-01-01T00:00:00Z");
    assert!(md.get("deletionTimestamp").is_none(), "{md}");
    assert!(md.get("deletionGracePeriodSeconds").is_none(), "{md}");
    let got = http.get(&format!("{CMS}/a")).await.json();
    assert_eq!(got["metadata"], md);
}

#[tokio::test]
async fn c2_create_with_a_resource_version_is_a_500_without_reason() {
    let (_env, http) = start().await;
    let mut body = cm("a", json!({}));
    body["metadata"]["resourceVersion"] = json!("5");
    assert_status(&http.post(CMS, &body).await, 500, "", "resourceVersion should not be set on objects to be created");
    http.get(&format!("{CMS}/a")).await.expect(404);
}

#[tokio::test]
async fn c3_generate_name_appends_five_characters_of_the_kube_alphabet() {
    let (_env, http) = start_with_foo().await;
    let mut names = std::collections::BTreeSet::new();
    for _ in 0..20 {
        let r = http.post(FOOS, &json!({"apiVersion": "example.com/v1", "kind": "Foo", "metadata": {"generateName": "job-"}, "spec": {}})).await;
        r.expect(201);
        let o = r.json();
        let name = o["metadata"]["name"].as_str().unwrap().to_string();
        let suffix = name.strip_prefix("job-").unwrap_or_else(|| panic!("{name}"));
        assert_eq!(suffix.len(), 5, "{name}");
        assert!(suffix.chars().all(|c| "bcdfghjklmnpqrstvwxz2456789".contains(c)), "{name}");
        assert_eq!(o["metadata"]["generateName"], "job-");
        http.get(&format!("{FOOS}/{name}")).await.expect(200);
        names.insert(name);
    }
    assert_eq!(names.len(), 20, "generated names must be unique");
}

#[tokio::test]
async fn c3_explicit_name_wins_over_generate_name() {
    let (_env, http) = start().await;
    let mut body = cm("exact", json!({}));
    body["metadata"]["generateName"] = json!("gen-");
    let r = http.post(CMS, &body).await;
    r.expect(201);
    assert_eq!(r.json()["metadata"]["name"], "exact");
}

#[tokio::test]
async fn c3_neither_name_nor_generate_name_is_422() {
    let (_env, http) = start().await;
    let r = http.post(CMS, &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}})).await;
    let s = assert_status(
        &r,
        422,
        "Invalid",
        "ConfigMap \"\" is invalid: metadata.name: Required value: name or generateName is required",
    );
    assert_eq!(s["details"]["kind"], "ConfigMap");
    assert_eq!(s["details"]["causes"][0]["reason"], "FieldValueRequired");
    assert_eq!(s["details"]["causes"][0]["field"], "metadata.name");
}

#[tokio::test]
async fn c4_namespace_comes_from_the_url_and_must_match_the_body() {
    let (_env, http) = start().await;
    // Absent: filled from the URL.
    let r = http.post("/api/v1/namespaces/kube-public/configmaps", &cm("a", json!({}))).await;
    r.expect(201);
    assert_eq!(r.json()["metadata"]["namespace"], "kube-public");
    // Same as the URL: fine.
    let mut body = cm("b", json!({}));
    body["metadata"]["namespace"] = json!("default");
    http.post(CMS, &body).await.expect(201);
    // Different: 400, on create and on update.
    body["metadata"]["namespace"] = json!("kube-system");
    body["metadata"]["name"] = json!("c");
    assert_status(
        &http.post(CMS, &body).await,
        400,
        "BadRequest",
        "the namespace of the provided object does not match the namespace sent on the request",
    );
    let mut b = http.get(&format!("{CMS}/b")).await.json();
    b["metadata"]["namespace"] = json!("kube-system");
    assert_status(
        &http.put(&format!("{CMS}/b"), &b).await,
        400,
        "BadRequest",
        "the namespace of the provided object does not match the namespace sent on the request",
    );
}

#[tokio::test]
async fn c4_cluster_scoped_objects_have_no_namespace() {
    let (_env, http) = start().await;
    let r = http
        .post("/apis/rbac.authorization.k8s.io/v1/clusterroles", &json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "r", "namespace": "default"}}))
        .await;
    r.expect(201);
    assert!(r.json()["metadata"].get("namespace").is_none(), "{}", r.text());
    let r = http.post("/api/v1/namespaces", &json!({"metadata": {"name": "n1", "namespace": "default"}})).await;
    r.expect(201);
    assert!(r.json()["metadata"].get("namespace").is_none(), "{}", r.text());
}

#[tokio::test]
async fn c4_put_and_patch_cannot_rename_the_object() {
    let (_env, http) = start_with_foo().await;
    let f = create_foo(&http, "f", json!({})).await;
    let mut g = f.clone();
    g["metadata"]["name"] = json!("g");
    assert_status(
        &http.put(&format!("{FOOS}/f"), &g).await,
        400,
        "BadRequest",
        "the name of the object (g) does not match the name on the URL (f)",
    );
    let r = http.merge(&format!("{FOOS}/f"), &json!({"metadata": {"name": "g"}})).await;
    assert_status(&r, 400, "BadRequest", "the name of the object (g) does not match the name on the URL (f)");
    let r = http
        .json_patch(&format!("{FOOS}/f"), &json!([{"op": "replace", "path": "/metadata/name", "value": "g"}]))
        .await;
    assert_reason(&r, 400, "BadRequest");
    http.get(&format!("{FOOS}/g")).await.expect(404);
}

#[tokio::test]
async fn c5_every_returned_object_carries_api_version_and_kind() {
    let (env, http) = start_with_foo().await;
    let from = env.handle().resource_version();
    let mut w = http.watch(&format!("{FOOS}?watch=true&resourceVersion={from}")).await;
    let mut wc = http.watch(&format!("{CMS}?watch=true&resourceVersion={from}")).await;
    // Bodies without TypeMeta for the built-in (allowed), full TypeMeta for the CR (required).
    let created_cm = http.post(CMS, &json!({"metadata": {"name": "a"}})).await.json();
    let created_foo = create_foo(&http, "f", json!({"x": "1"})).await;
    let patched = http.merge(&format!("{FOOS}/f"), &json!({"spec": {"x": "2"}})).await.json();
    let status = http.merge(&format!("{FOOS}/f/status"), &json!({"status": {"ready": true}})).await.json();
    let got = http.get(&format!("{FOOS}/f")).await.json();
    let got_status = http.get(&format!("{FOOS}/f/status")).await.json();
    let listed = http.get(FOOS).await.json();
    let all = http.get("/apis/example.com/v1/foos").await.json();
    for o in [
        &created_foo,
        &patched,
        &status,
        &got,
        &got_status,
        &listed["items"][0],
        &all["items"][0],
        &w.next().await["object"],
    ] {
        assert_eq!(o["apiVersion"], "example.com/v1", "{o}");
        assert_eq!(o["kind"], "Foo", "{o}");
        assert!(o.get("spec").is_some(), "custom resources keep spec: {o}");
    }
    let cm_listed = http.get(CMS).await.json();
    for o in
        [&created_cm, &http.get(&format!("{CMS}/a")).await.json(), &cm_listed["items"][0], &wc.next().await["object"]]
    {
        assert_eq!(o["apiVersion"], "v1", "{o}");
        assert_eq!(o["kind"], "ConfigMap", "{o}");
    }
    // kube-derive types decode what the server returns.
    let foos: Api<Foo> = Api::namespaced(env.client(), "default");
    let list = foos.list(&ListParams::default()).await.expect("typed list");
    assert_eq!(list.items[0].spec.x.as_deref(), Some("2"));
    let one = foos.get("f").await.expect("typed get");
    assert_eq!(one.status.and_then(|s| s.ready), Some(true));
}

#[tokio::test]
async fn c5_custom_resource_without_spec_in_the_body_still_decodes_with_kube_derive() {
    let (env, http) = start_with_foo().await;
    http.post(
        FOOS,
        &json!({"apiVersion": "example.com/v1", "kind": "Foo", "metadata": {"name": "nospec"}, "spec": {}}),
    )
    .await
    .expect(201);
    let foos: Api<Foo> = Api::namespaced(env.client(), "default");
    let f = foos.get("nospec").await.expect("a Foo with an empty spec decodes");
    assert_eq!(f.spec, FooSpec::default());
}

#[tokio::test]
async fn c6_put_with_a_stale_resource_version_is_409() {
    let (_env, http) = start().await;
    let a = create_cm(&http, "a", json!({"k": "1"})).await;
    let mut b = a.clone();
    b["data"]["k"] = json!("2");
    let updated = http.put(&format!("{CMS}/a"), &b).await;
    updated.expect(200);
    assert!(rv(&updated.json()) > rv(&a));
    let mut c = a.clone();
    c["data"]["k"] = json!("3");
    assert_reason(&http.put(&format!("{CMS}/a"), &c).await, 409, "Conflict");
    assert_eq!(http.get(&format!("{CMS}/a")).await.json()["data"]["k"], "2");
}

#[tokio::test]
async fn c6_custom_resource_put_requires_a_resource_version() {
    let (_env, http) = start_with_foo().await;
    let mut f = create_foo(&http, "f", json!({"x": "1"})).await;
    f["metadata"].as_object_mut().unwrap().remove("resourceVersion");
    f["spec"]["x"] = json!("2");
    let r = http.put(&format!("{FOOS}/f"), &f).await;
    let s = assert_status(
        &r,
        422,
        "Invalid",
        "Foo.example.com \"f\" is invalid: metadata.resourceVersion: Invalid value: 0x0: must be specified for an update",
    );
    assert_eq!(s["details"]["causes"][0]["field"], "metadata.resourceVersion");
    assert_eq!(s["details"]["causes"][0]["reason"], "FieldValueInvalid");
}

#[tokio::test]
async fn c6_custom_resource_put_on_a_missing_object_is_404() {
    let (_env, http) = start_with_foo().await;
    let mut body = foo("ghost", json!({}));
    body["metadata"]["resourceVersion"] = json!("1");
    assert_status(
        &http.put(&format!("{FOOS}/ghost"), &body).await,
        404,
        "NotFound",
        "foos.example.com \"ghost\" not found",
    );
}

#[tokio::test]
async fn c6_builtin_put_without_resource_version_is_unconditional() {
    let (env, http) = start().await;
    create_cm(&http, "a", json!({"k": "1"})).await;
    http.merge(&format!("{CMS}/a"), &json!({"data": {"k": "2"}})).await.expect(200);
    let r = http.put(&format!("{CMS}/a"), &cm("a", json!({"k": "3"}))).await;
    r.expect(200);
    assert_eq!(r.json()["data"]["k"], "3");
    // Leases too, through kube-rs.
    let leases: Api<Lease> = Api::namespaced(env.client(), "default");
    let mut lease = Lease::default();
    lease.metadata.name = Some("l".into());
    leases.create(&PostParams::default(), &lease).await.expect("create lease");
    lease.spec = Some(k8s_openapi::api::coordination::v1::LeaseSpec {
        holder_identity: Some("me".into()),
        ..Default::default()
    });
    let replaced = leases.replace("l", &PostParams::default(), &lease).await.expect("unconditional replace");
    assert_eq!(replaced.spec.and_then(|s| s.holder_identity).as_deref(), Some("me"));
}

#[tokio::test]
async fn c7_update_keeps_creation_timestamp_and_generation_server_owned() {
    let (_env, http) = start_with_foo().await;
    let f = create_foo(&http, "f", json!({"x": "1"})).await;
    let mut g = f.clone();
    g["metadata"]["creationTimestamp"] = json!("2000-01-01T00:00:00Z");
    g["metadata"]["generation"] = json!(42);
    g["metadata"]["labels"] = json!({"a": "b"});
    let r = http.put(&format!("{FOOS}/f"), &g).await;
    r.expect(200);
    let o = r.json();
    assert_eq!(o["metadata"]["creationTimestamp"], f["metadata"]["creationTimestamp"]);
    assert_eq!(o["metadata"]["generation"], 1, "metadata-only edit keeps generation");
    assert_eq!(o["metadata"]["uid"], f["metadata"]["uid"]);
    // A PUT without uid keeps the stored one.
    let mut h = o.clone();
    h["metadata"].as_object_mut().unwrap().remove("uid");
    let r = http.put(&format!("{FOOS}/f"), &h).await;
    r.expect(200);
    assert_eq!(r.json()["metadata"]["uid"], f["metadata"]["uid"]);
}

#[tokio::test]
async fn c7_update_cannot_change_the_uid() {
    let (_env, http) = start().await;
    let mut a = create_cm(&http, "a", json!({})).await;
    a["metadata"]["uid"] = json!("22222222-2222-2222-2222-222222222222");
    let r = http.put(&format!("{CMS}/a"), &a).await;
    let s = assert_reason(&r, 422, "Invalid");
    assert_eq!(s["details"]["causes"][0]["field"], "metadata.uid");
    let msg = s["message"].as_str().unwrap();
    assert!(msg.starts_with("ConfigMap \"a\" is invalid: metadata.uid: Invalid value: \"22222222-2222-2222-2222-222222222222\": field is immutable"), "{msg}");
}

#[tokio::test]
async fn c7_update_cannot_set_deletion_timestamp() {
    let (_env, http) = start().await;
    let a = create_cm(&http, "a", json!({})).await;
    let mut b = a.clone();
    b["metadata"]["deletionTimestamp"] = json!("2030-01-01T00:00:00Z");
    let s = assert_reason(&http.put(&format!("{CMS}/a"), &b).await, 422, "Invalid");
    assert_eq!(s["details"]["causes"][0]["field"], "metadata.deletionTimestamp");
    assert!(s["message"].as_str().unwrap().ends_with("field is immutable"), "{s}");
    let r = http.merge(&format!("{CMS}/a"), &json!({"metadata": {"deletionTimestamp": "2030-01-01T00:00:00Z"}})).await;
    assert_reason(&r, 422, "Invalid");
    assert!(http.get(&format!("{CMS}/a")).await.json()["metadata"].get("deletionTimestamp").is_none());
}

#[tokio::test]
async fn c7_update_cannot_set_deletion_grace_period_seconds() {
    let (_env, http) = start().await;
    let a = create_cm(&http, "a", json!({})).await;
    let mut c = a.clone();
    c["metadata"]["deletionGracePeriodSeconds"] = json!(5);
    let s = assert_reason(&http.put(&format!("{CMS}/a"), &c).await, 422, "Invalid");
    assert_eq!(s["details"]["causes"][0]["field"], "metadata.deletionGracePeriodSeconds");
    assert!(s["message"].as_str().unwrap().ends_with("field is immutable"), "{s}");
    assert!(http.get(&format!("{CMS}/a")).await.json()["metadata"].get("deletionGracePeriodSeconds").is_none());
}

#[tokio::test]
async fn c7_update_cannot_change_deletion_timestamp_once_set() {
    let (_env, http) = start().await;
    let mut body = cm("a", json!({}));
    body["metadata"]["finalizers"] = json!(["example.com/hold"]);
    http.post(CMS, &body).await.expect(201);
    let deleting = http.delete(&format!("{CMS}/a")).await.json();
    let ts = deleting["metadata"]["deletionTimestamp"].clone();
    assert!(ts.is_string());
    // Changing it is ignored or rejected; it never takes effect.
    let r = http.merge(&format!("{CMS}/a"), &json!({"metadata": {"deletionTimestamp": "2030-01-01T00:00:00Z"}})).await;
    assert!(r.status == 200 || r.status == 422, "{}", r.text());
    assert_eq!(http.get(&format!("{CMS}/a")).await.json()["metadata"]["deletionTimestamp"], ts);
    // Removing it is ignored or rejected too.
    let mut cur = http.get(&format!("{CMS}/a")).await.json();
    cur["metadata"].as_object_mut().unwrap().remove("deletionTimestamp");
    let r = http.put(&format!("{CMS}/a"), &cur).await;
    assert!(r.status == 200 || r.status == 422, "{}", r.text());
    assert_eq!(http.get(&format!("{CMS}/a")).await.json()["metadata"]["deletionTimestamp"], ts);
}

/// Check that `resp` answered a write that changed nothing: 200 with the stored object, the
/// object's and the server's resourceVersion unchanged, no watch event.
/// `global` is the server's resourceVersion before the write.
async fn assert_noop(
    env: &testenv::TestEnv,
    http: &Http,
    path: &str,
    w: &mut Watch,
    resp: Resp,
    before: &Value,
    global: u64,
) {
    resp.expect(200);
    let o = resp.json();
    assert_eq!(rv(&o), rv(before), "a no-op write keeps the resourceVersion: {o}");
    assert_eq!(env.handle().resource_version(), global, "a no-op write takes no resourceVersion");
    assert_eq!(http.get(path).await.json(), *before);
    w.expect_quiet().await;
}

#[tokio::test]
async fn c8_noop_update_keeps_rv_and_emits_no_event() {
    let (env, http) = start_with_foo().await;
    create_cm(&http, "a", json!({"k": "v"})).await;
    create_foo(&http, "f", json!({"x": "1"})).await;
    let f = http.merge(&format!("{FOOS}/f/status"), &json!({"status": {"ready": true}})).await.json();
    let mut w = http.watch(&format!("/api/v1/configmaps?watch=true&resourceVersion={}", rv(&f))).await;
    let mut wf = http.watch(&format!("{FOOS}?watch=true&resourceVersion={}", rv(&f))).await;
    let a = http.get(&format!("{CMS}/a")).await.json();
    let global = env.handle().resource_version();
    let cm_path = format!("{CMS}/a");
    let foo_path = format!("{FOOS}/f");
    // PUT of the current object.
    assert_noop(&env, &http, &cm_path, &mut w, http.put(&cm_path, &a).await, &a, global).await;
    // Merge patches that change nothing.
    assert_noop(&env, &http, &cm_path, &mut w, http.merge(&cm_path, &json!({})).await, &a, global).await;
    assert_noop(&env, &http, &cm_path, &mut w, http.merge(&cm_path, &json!({"data": {"k": "v"}})).await, &a, global)
        .await;
    // A JSON patch that only tests.
    assert_noop(
        &env,
        &http,
        &cm_path,
        &mut w,
        http.json_patch(&cm_path, &json!([{"op": "test", "path": "/data/k", "value": "v"}])).await,
        &a,
        global,
    )
    .await;
    // Custom resources: main resource and status.
    assert_noop(&env, &http, &foo_path, &mut wf, http.merge(&foo_path, &json!({"spec": {"x": "1"}})).await, &f, global)
        .await;
    assert_noop(
        &env,
        &http,
        &foo_path,
        &mut wf,
        http.merge(&format!("{foo_path}/status"), &json!({"status": {"ready": true}})).await,
        &f,
        global,
    )
    .await;
    assert_noop(&env, &http, &foo_path, &mut wf, http.put(&foo_path, &f).await, &f, global).await;
    assert_noop(&env, &http, &foo_path, &mut wf, http.put(&format!("{foo_path}/status"), &f).await, &f, global).await;
}

#[tokio::test]
async fn c8_repeated_identical_apply_is_a_noop_even_when_time_passes() {
    let (env, http) = start_with_foo().await;
    let path = format!("{FOOS}/f");
    let body = foo("f", json!({"x": "1"}));
    let first = http.apply(&path, "fieldManager=ctl", &body).await;
    first.expect(201);
    let first = http.get(&path).await.json();
    let mut w = http.watch(&format!("{FOOS}?watch=true&resourceVersion={}", rv(&first))).await;
    env.handle().advance_clock(Duration::from_secs(120));
    let global = env.handle().resource_version();
    let again = http.apply(&path, "fieldManager=ctl", &body).await;
    assert_noop(&env, &http, &path, &mut w, again, &first, global).await;
    // Status applies, too.
    let st =
        json!({"apiVersion": "example.com/v1", "kind": "Foo", "metadata": {"name": "f"}, "status": {"ready": true}});
    http.apply(&format!("{path}/status"), "fieldManager=ctl", &st).await.expect(200);
    let cur = http.get(&path).await.json();
    w.next().await;
    env.handle().advance_clock(Duration::from_secs(120));
    let global = env.handle().resource_version();
    let again = http.apply(&format!("{path}/status"), "fieldManager=ctl", &st).await;
    assert_noop(&env, &http, &path, &mut w, again, &cur, global).await;
}

#[tokio::test]
async fn c8_noop_through_kube_rs_patch_status_returns_the_current_object() {
    let (env, http) = start_with_foo().await;
    create_foo(&http, "f", json!({})).await;
    let foos: Api<Foo> = Api::namespaced(env.client(), "default");
    let pp = PatchParams::default();
    let patch = Patch::Merge(json!({"status": {"replicas": 2}}));
    let first = foos.patch_status("f", &pp, &patch).await.expect("status patch");
    let second = foos.patch_status("f", &pp, &patch).await.expect("same status patch");
    assert_eq!(first.metadata.resource_version, second.metadata.resource_version);
    assert_eq!(second.status.and_then(|s| s.replicas), Some(2));
}

#[tokio::test]
async fn c9_empty_metadata_collections_are_omitted() {
    let (_env, http) = start_with_foo().await;
    let mut body = foo("f", json!({}));
    body["metadata"]["finalizers"] = json!([]);
    body["metadata"]["labels"] = json!({});
    body["metadata"]["annotations"] = json!({});
    body["metadata"]["ownerReferences"] = json!([]);
    let r = http.post(FOOS, &body).await;
    r.expect(201);
    let md = r.json()["metadata"].clone();
    for k in ["finalizers", "labels", "annotations", "ownerReferences"] {
        assert!(md.get(k).is_none(), "{k} should be omitted: {md}");
    }
    // Removing the last finalizer leaves the field absent, not [].
    http.merge(&format!("{FOOS}/f"), &json!({"metadata": {"finalizers": ["example.com/a"]}})).await.expect(200);
    let r = http.json_patch(&format!("{FOOS}/f"), &json!([{"op": "remove", "path": "/metadata/finalizers/0"}])).await;
    r.expect(200);
    assert!(r.json()["metadata"].get("finalizers").is_none(), "{}", r.text());
    assert!(http.get(&format!("{FOOS}/f")).await.json()["metadata"].get("finalizers").is_none());
    // Same for built-ins.
    let mut body = cm("a", json!({}));
    body["metadata"]["labels"] = json!({});
    body["metadata"]["finalizers"] = json!([]);
    let r = http.post(CMS, &body).await;
    r.expect(201);
    assert!(
        r.json()["metadata"].get("labels").is_none() && r.json()["metadata"].get("finalizers").is_none(),
        "{}",
        r.text()
    );
}

#[tokio::test]
async fn c9_owner_references_are_kept_and_duplicates_deduplicated_with_a_warning() {
    let (_env, http) = start().await;
    let owner = create_cm(&http, "owner", json!({})).await;
    let uid = owner["metadata"]["uid"].as_str().unwrap().to_string();
    let reference = json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": uid, "controller": true, "blockOwnerDeletion": true});
    let mut body = cm("dep", json!({}));
    body["metadata"]["ownerReferences"] = json!([reference, reference]);
    let r = http.post(CMS, &body).await;
    r.expect(201);
    assert_eq!(r.json()["metadata"]["ownerReferences"], json!([reference]));
    let warnings = r.header_all("warning");
    assert!(warnings.iter().any(|w| w.contains("duplicate") && w.contains(&uid)), "{warnings:?}");
}

#[tokio::test]
async fn c9_owner_references_need_all_fields_and_at_most_one_controller() {
    let (_env, http) = start().await;
    let mut body = cm("dep", json!({}));
    body["metadata"]["ownerReferences"] = json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "o"}]);
    let s = assert_reason(&http.post(CMS, &body).await, 422, "Invalid");
    assert!(
        s["details"]["causes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["field"].as_str().unwrap_or("").starts_with("metadata.ownerReferences")),
        "{s}"
    );
    body["metadata"]["ownerReferences"] = json!([
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "o1", "uid": "11111111-1111-1111-1111-111111111111", "controller": true},
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "o2", "uid": "22222222-2222-2222-2222-222222222222", "controller": true}
    ]);
    let s = assert_reason(&http.post(CMS, &body).await, 422, "Invalid");
    assert!(s["message"].as_str().unwrap().contains("Only one reference can have Controller set to true"), "{s}");
}

#[tokio::test]
async fn c10_strict_field_validation_rejects_unknown_fields_with_400() {
    let (_env, http) = start_with_foo().await;
    let mut body = cm("a", json!({}));
    body["bogus"] = json!(1);
    let r = http.post(&format!("{CMS}?fieldValidation=Strict"), &body).await;
    assert_status(
        &r,
        400,
        "BadRequest",
        "ConfigMap in version \"v1\" cannot be handled as a ConfigMap: strict decoding error: unknown field \"bogus\"",
    );
    let mut f = foo("f", json!({"foo": 1}));
    f["spec"]["foo"] = json!(1);
    let r = http.post(&format!("{FOOS}?fieldValidation=Strict"), &f).await;
    assert_status(
        &r,
        400,
        "BadRequest",
        "Foo in version \"v1\" cannot be handled as a Foo: strict decoding error: unknown field \"spec.foo\"",
    );
    http.get(&format!("{FOOS}/f")).await.expect(404);
}

#[tokio::test]
async fn c10_strict_field_validation_rejects_duplicate_fields() {
    let (_env, http) = start().await;
    let body =
        br#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"k":"1"},"data":{"k":"2"}}"#.to_vec();
    let r = http
        .send(
            http::Method::POST,
            &format!("{CMS}?fieldValidation=Strict"),
            &[("content-type", "application/json")],
            Some(body),
        )
        .await;
    let s = assert_reason(&r, 400, "BadRequest");
    assert!(s["message"].as_str().unwrap().contains("duplicate field \"data\""), "{s}");
}

#[tokio::test]
async fn c10_warn_is_the_default_and_drops_unknown_fields_with_a_warning() {
    let (_env, http) = start_with_foo().await;
    let mut body = cm("a", json!({}));
    body["bogus"] = json!(1);
    let r = http.post(CMS, &body).await;
    r.expect(201);
    assert!(r.json().get("bogus").is_none());
    assert!(
        r.header_all("warning").iter().any(|w| w.contains("unknown field \\\"bogus\\\"")),
        "{:?}",
        r.header_all("warning")
    );
    let r = http.post(FOOS, &foo("f", json!({"foo": 1}))).await;
    r.expect(201);
    assert!(r.json()["spec"].get("foo").is_none(), "unknown CR fields are pruned: {}", r.text());
    assert!(
        r.header_all("warning").iter().any(|w| w.contains("unknown field \\\"spec.foo\\\"")),
        "{:?}",
        r.header_all("warning")
    );
}

#[tokio::test]
async fn c10_ignore_drops_unknown_fields_silently() {
    let (_env, http) = start_with_foo().await;
    let mut body = cm("a", json!({}));
    body["bogus"] = json!(1);
    let r = http.post(&format!("{CMS}?fieldValidation=Ignore"), &body).await;
    r.expect(201);
    assert!(r.json().get("bogus").is_none());
    assert!(r.header_all("warning").is_empty(), "{:?}", r.header_all("warning"));
    let r = http.post(&format!("{FOOS}?fieldValidation=Ignore"), &foo("f", json!({"foo": 1}))).await;
    r.expect(201);
    assert!(r.json()["spec"].get("foo").is_none(), "{}", r.text());
    assert!(r.header_all("warning").is_empty());
}

#[tokio::test]
async fn c10_strict_applies_to_put_and_patch_too() {
    let (_env, http) = start().await;
    let a = create_cm(&http, "a", json!({}));
    let mut a = a.await;
    a["bogus"] = json!(1);
    assert_reason(&http.put(&format!("{CMS}/a?fieldValidation=Strict"), &a).await, 400, "BadRequest");
    let r = http
        .patch(&format!("{CMS}/a?fieldValidation=Strict"), "application/merge-patch+json", &json!({"bogus": 1}))
        .await;
    assert_reason(&r, 400, "BadRequest");
}

#[tokio::test]
async fn c11_dry_run_persists_nothing_and_emits_no_event() {
    let (env, http) = start().await;
    let existing = create_cm(&http, "existing", json!({"k": "v"})).await;
    let before = env.handle().resource_version();
    let mut w = http.watch(&format!("{CMS}?watch=true&resourceVersion={before}")).await;
    // Create.
    let r = http.post(&format!("{CMS}?dryRun=All"), &cm("a", json!({}))).await;
    r.expect(201);
    assert_eq!(r.json()["metadata"]["name"], "a");
    http.get(&format!("{CMS}/a")).await.expect(404);
    // Update, patch.
    let mut e = existing.clone();
    e["data"]["k"] = json!("changed");
    let r = http.put(&format!("{CMS}/existing?dryRun=All"), &e).await;
    r.expect(200);
    assert_eq!(r.json()["data"]["k"], "changed");
    let r = http.merge(&format!("{CMS}/existing?dryRun=All"), &json!({"data": {"k": "patched"}})).await;
    r.expect(200);
    assert_eq!(r.json()["data"]["k"], "patched");
    // Delete (query and body).
    http.delete(&format!("{CMS}/existing?dryRun=All")).await.expect(200);
    http.delete_with(&format!("{CMS}/existing"), &json!({"dryRun": ["All"]})).await.expect(200);
    assert_eq!(http.get(&format!("{CMS}/existing")).await.json(), existing);
    assert_eq!(env.handle().resource_version(), before);
    w.expect_quiet().await;
}

#[tokio::test]
async fn c11_dry_run_still_validates() {
    let (_env, http) = start().await;
    create_cm(&http, "a", json!({})).await;
    assert_reason(&http.post(&format!("{CMS}?dryRun=All"), &cm("a", json!({}))).await, 409, "AlreadyExists");
    let mut bad = cm("b", json!({}));
    bad["metadata"]["namespace"] = json!("kube-system");
    assert_reason(&http.post(&format!("{CMS}?dryRun=All"), &bad).await, 400, "BadRequest");
}

#[tokio::test]
async fn c11_dry_run_values_other_than_all_are_422() {
    let (_env, http) = start().await;
    let s = assert_reason(&http.post(&format!("{CMS}?dryRun=Some"), &cm("a", json!({}))).await, 422, "Invalid");
    assert_eq!(s["details"]["kind"], "CreateOptions");
    assert_eq!(s["details"]["group"], "meta.k8s.io");
    assert_eq!(s["details"]["causes"][0]["field"], "dryRun");
    http.get(&format!("{CMS}/a")).await.expect(404);
    create_cm(&http, "a", json!({})).await;
    let s = assert_reason(&http.merge(&format!("{CMS}/a?dryRun=x"), &json!({})).await, 422, "Invalid");
    assert_eq!(s["details"]["kind"], "PatchOptions");
}

#[tokio::test]
async fn c12_create_in_a_missing_namespace_is_404_namespace_not_found() {
    let (_env, http) = start_with_foo().await;
    let r = http.post("/api/v1/namespaces/nope/configmaps", &cm("a", json!({}))).await;
    let s = assert_status(&r, 404, "NotFound", "namespaces \"nope\" not found");
    assert_eq!(s["details"], json!({"name": "nope", "kind": "namespaces"}));
    let r = http.post("/apis/example.com/v1/namespaces/nope/foos", &foo("f", json!({}))).await;
    assert_status(&r, 404, "NotFound", "namespaces \"nope\" not found");
}

#[tokio::test]
async fn c13_object_names_must_be_dns1123_subdomains() {
    let (_env, http) = start_with_foo().await;
    let r = http.post(CMS, &cm("Bad_Name", json!({}))).await;
    let s = assert_status(
        &r,
        422,
        "Invalid",
        "ConfigMap \"Bad_Name\" is invalid: metadata.name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
    );
    assert_eq!(s["details"]["causes"][0]["field"], "metadata.name");
    assert_eq!(s["details"]["causes"][0]["reason"], "FieldValueInvalid");
    assert_reason(&http.post(FOOS, &foo("UPPER", json!({}))).await, 422, "Invalid");
    assert_reason(&http.post(FOOS, &foo(&"a".repeat(254), json!({}))).await, 422, "Invalid");
    // Dots are fine in subdomains.
    http.post(FOOS, &foo("a.b-c", json!({}))).await.expect(201);
    // Namespaces are DNS-1123 labels: no dots.
    assert_reason(&http.post("/api/v1/namespaces", &json!({"metadata": {"name": "a.b"}})).await, 422, "Invalid");
}

#[tokio::test]
async fn c13_label_keys_values_and_annotation_size_are_validated() {
    let (_env, http) = start().await;
    let mut body = cm("a", json!({}));
    body["metadata"]["labels"] = json!({"bad key!": "v"});
    let s = assert_reason(&http.post(CMS, &body).await, 422, "Invalid");
    assert!(s["details"]["causes"][0]["field"].as_str().unwrap_or("").starts_with("metadata.labels"), "{s}");
    body["metadata"]["labels"] = json!({"ok": "bad value!"});
    assert_reason(&http.post(CMS, &body).await, 422, "Invalid");
    body["metadata"]["labels"] = json!({"example.com/ok": "fine-value_1.2"});
    body["metadata"]["annotations"] = json!({"big": "x".repeat(256 * 1024 + 1)});
    let s = assert_reason(&http.post(CMS, &body).await, 422, "Invalid");
    assert_eq!(s["details"]["causes"][0]["field"], "metadata.annotations");
    body["metadata"]["annotations"] = json!({"small": "x"});
    http.post(CMS, &body).await.expect(201);
}

#[tokio::test]
async fn c8_controller_that_rewrites_identical_status_does_not_hot_loop() {
    use futures::StreamExt;
    use kube::runtime::controller::{Action, Controller};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[derive(Debug)]
    struct Failed(kube::Error);
    impl std::fmt::Display for Failed {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "{}", self.0)
        }
    }
    impl std::error::Error for Failed {}

    let (env, http) = start_with_foo().await;
    create_foo(&http, "f", json!({"replicas": 1})).await;
    let api: Api<Foo> = Api::namespaced(env.client(), "default");
    let reconciles = Arc::new(AtomicUsize::new(0));
    let ctx = Arc::new((api.clone(), reconciles.clone()));
    // Every reconcile writes the same status, as many controllers do.
    let controller = Controller::new(api, kube::runtime::watcher::Config::default())
        .run(
            |obj: Arc<Foo>, ctx: Arc<(Api<Foo>, Arc<AtomicUsize>)>| async move {
                ctx.1.fetch_add(1, Ordering::SeqCst);
                let status = json!({"status": {"replicas": obj.spec.replicas, "ready": true}});
                ctx.0
                    .patch_status(
                        "f",
                        &PatchParams { field_manager: Some("foo-ctl".into()), ..PatchParams::default() },
                        &Patch::Merge(status),
                    )
                    .await
                    .map_err(Failed)?;
                Ok::<_, Failed>(Action::await_change())
            },
            |_, _, _| Action::await_change(),
            ctx,
        )
        .for_each(|_| async {});
    let task = tokio::spawn(controller);
    eventually(WAIT, "the first reconcile", || {
        let n = reconciles.load(Ordering::SeqCst);
        async move { (n >= 1).then_some(()) }
    })
    .await;
    // Counting reconciles over a quiet period is the point here: with no-op writes free, the
    // first status change causes one more reconcile and then nothing.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let n = reconciles.load(Ordering::SeqCst);
    assert!(n <= 2, "the controller hot-loops on its own no-op status writes: {n} reconciles");
    // A spec change still triggers it.
    http.merge(&format!("{FOOS}/f"), &json!({"spec": {"replicas": 2}})).await.expect(200);
    eventually(WAIT, "a reconcile of the spec change", || {
        let http = http.clone();
        async move { (http.get(&format!("{FOOS}/f")).await.json()["status"]["replicas"] == 2).then_some(()) }
    })
    .await;
    task.abort();
}

//! Checklist section D: lists, resourceVersion semantics, pagination, selectors and
//! DeleteCollection.

mod common;

use common::*;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams};
use serde_json::{Value, json};

fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .unwrap_or_else(|| panic!("no items in {list}"))
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

fn keys(list: &Value) -> Vec<(String, String)> {
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["metadata"]["namespace"].as_str().unwrap_or("").to_string(),
                i["metadata"]["name"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

async fn labelled(http: &Http, name: &str, labels: Value) {
    let mut body = cm(name, json!({}));
    body["metadata"]["labels"] = labels;
    http.post(CMS, &body).await.expect(201);
}

async fn select(http: &Http, selector: &str) -> Vec<String> {
    let q: String = form_urlencoded_encode(selector);
    let r = http.get(&format!("{CMS}?labelSelector={q}")).await;
    r.expect(200);
    let mut n = names(&r.json());
    n.sort();
    n
}

fn form_urlencoded_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            other => format!("%{other:02X}"),
        })
        .collect()
}

#[tokio::test]
async fn d1_list_shape_with_items_always_present() {
    let (_env, http) = start_with_foo().await;
    // Empty lists still carry `items: []`.
    for (path, kind, api_version) in [(CMS, "ConfigMapList", "v1"), (FOOS, "FooList", "example.com/v1")] {
        let r = http.get(path).await;
        r.expect(200);
        assert!(r.text().contains("\"items\":[]"), "{}", r.text());
        let body = r.json();
        assert_eq!(body["kind"], kind);
        assert_eq!(body["apiVersion"], api_version);
        assert!(body["metadata"]["resourceVersion"].as_str().is_some_and(|s| !s.is_empty()), "{body}");
    }
    create_foo(&http, "f", json!({})).await;
    let body = http.get(FOOS).await.json();
    assert_eq!(names(&body), ["f"]);
    assert!(body["metadata"].get("continue").is_none_or(|c| c == ""), "{body}");
}

#[tokio::test]
async fn d2_list_resource_version_is_a_snapshot_a_watch_can_resume_from() {
    let (env, http) = start().await;
    for i in 0..3 {
        create_cm(&http, &format!("cm-{i}"), json!({})).await;
    }
    // Unrelated writes elsewhere move the global RV.
    http.post("/api/v1/namespaces", &json!({"metadata": {"name": "other"}})).await.expect(201);
    let list = http.get(CMS).await.json();
    let list_rv = rv(&list);
    for item in list["items"].as_array().unwrap() {
        assert!(rv(item) <= list_rv, "{item} newer than the list {list_rv}");
    }
    assert_eq!(list_rv, env.handle().resource_version());
    create_cm(&http, "after", json!({})).await;
    let events = http.watch_lines(&format!("{CMS}?watch=true&resourceVersion={list_rv}"), 2, QUIET).await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["type"], "ADDED");
    assert_eq!(events[0]["object"]["metadata"]["name"], "after");
}

#[tokio::test]
async fn d3_pages_are_ordered_by_namespace_and_name_and_share_one_snapshot() {
    let (env, http) = start().await;
    http.post("/api/v1/namespaces", &json!({"metadata": {"name": "a-ns"}})).await.expect(201);
    http.post("/api/v1/namespaces", &json!({"metadata": {"name": "z-ns"}})).await.expect(201);
    for (ns, name) in [
        ("z-ns", "b"),
        ("default", "c"),
        ("a-ns", "z"),
        ("default", "a"),
        ("z-ns", "a"),
        ("a-ns", "b"),
        ("default", "b"),
    ] {
        http.post(&format!("/api/v1/namespaces/{ns}/configmaps"), &cm(name, json!({}))).await.expect(201);
    }
    let p1 = http.get("/api/v1/configmaps?limit=3").await.json();
    let first_rv = rv_str(&p1);
    let token = p1["metadata"]["continue"].as_str().expect("a continue token").to_string();
    assert!(!token.is_empty());
    assert_eq!(keys(&p1), [("a-ns".into(), "b".into()), ("a-ns".into(), "z".into()), ("default".into(), "a".into())]);
    if let Some(n) = p1["metadata"].get("remainingItemCount") {
        assert_eq!(n, 4);
    }
    // Changes after the first page are not visible on later pages.
    http.post("/api/v1/namespaces/z-ns/configmaps", &cm("zz", json!({}))).await.expect(201);
    http.delete("/api/v1/namespaces/default/configmaps/c").await.expect(200);
    assert!(env.handle().resource_version() > first_rv.parse().unwrap());
    let p2 = http.get(&format!("/api/v1/configmaps?limit=3&continue={token}")).await.json();
    assert_eq!(rv_str(&p2), first_rv, "every page reports the first page's resourceVersion");
    assert_eq!(
        keys(&p2),
        [("default".into(), "b".into()), ("default".into(), "c".into()), ("z-ns".into(), "a".into())]
    );
    let token = p2["metadata"]["continue"].as_str().expect("more pages").to_string();
    let p3 = http.get(&format!("/api/v1/configmaps?limit=3&continue={token}")).await.json();
    assert_eq!(rv_str(&p3), first_rv);
    assert_eq!(keys(&p3), [("z-ns".into(), "b".into())]);
    assert!(p3["metadata"].get("continue").is_none_or(|c| c == ""), "last page: {p3}");
    assert!(p3["metadata"].get("remainingItemCount").is_none_or(|n| n == 0), "{p3}");
}

#[tokio::test]
async fn d3_no_limit_or_limit_zero_returns_everything() {
    let (_env, http) = start().await;
    for i in 0..12 {
        create_cm(&http, &format!("cm-{i:02}"), json!({})).await;
    }
    for q in ["", "?limit=0", "?limit=500"] {
        let list = http.get(&format!("{CMS}{q}")).await.json();
        assert_eq!(names(&list).len(), 12, "{q}");
        assert!(list["metadata"].get("continue").is_none_or(|c| c == ""), "{q}: {list}");
    }
}

#[tokio::test]
async fn d3_kube_rs_pages_through_continue_tokens() {
    let (env, http) = start().await;
    for i in 0..10 {
        create_cm(&http, &format!("cm-{i:02}"), json!({})).await;
    }
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let mut all = Vec::new();
    let mut lp = ListParams::default().limit(4);
    let mut pages = 0;
    loop {
        let page = api.list(&lp).await.expect("page");
        pages += 1;
        assert!(page.items.len() <= 4);
        assert!(page.metadata.resource_version.as_deref().is_some_and(|s| !s.is_empty()));
        all.extend(page.items.into_iter().filter_map(|c| c.metadata.name));
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => lp = lp.continue_token(&token),
            None => break,
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(all, (0..10).map(|i| format!("cm-{i:02}")).collect::<Vec<_>>());
}

#[tokio::test]
async fn d4_label_selector_equality_and_set_operators() {
    let (_env, http) = start().await;
    labelled(&http, "a", json!({"app": "web", "tier": "front"})).await;
    labelled(&http, "b", json!({"app": "db", "tier": "back"})).await;
    labelled(&http, "c", json!({"app": "cache"})).await;
    labelled(&http, "d", json!({})).await;
    assert_eq!(select(&http, "app=web").await, ["a"]);
    assert_eq!(select(&http, "app==web").await, ["a"]);
    assert_eq!(select(&http, "app!=web").await, ["b", "c", "d"], "!= matches objects without the key");
    assert_eq!(select(&http, "app in (web,db)").await, ["a", "b"]);
    assert_eq!(select(&http, "app notin (web,db)").await, ["c", "d"], "notin matches objects without the key");
    assert_eq!(select(&http, "tier").await, ["a", "b"]);
    assert_eq!(select(&http, "!tier").await, ["c", "d"]);
    assert_eq!(select(&http, "app,!tier").await, ["c"]);
    assert_eq!(select(&http, "app=web,tier=front").await, ["a"]);
    assert_eq!(select(&http, "app=web,tier=back").await, Vec::<String>::new());
}

#[tokio::test]
async fn d4_label_selector_numeric_comparisons() {
    let (_env, http) = start().await;
    labelled(&http, "one", json!({"n": "1"})).await;
    labelled(&http, "five", json!({"n": "5"})).await;
    labelled(&http, "ten", json!({"n": "10"})).await;
    labelled(&http, "none", json!({})).await;
    assert_eq!(select(&http, "n>4").await, ["five", "ten"]);
    assert_eq!(select(&http, "n<5").await, ["one"]);
}

#[tokio::test]
async fn d4_label_selector_parse_error_is_400() {
    let (_env, http) = start().await;
    for bad in ["app=(x", "a b", "in (", "n>x", "=v"] {
        let r = http.get(&format!("{CMS}?labelSelector={}", form_urlencoded_encode(bad))).await;
        assert_reason(&r, 400, "BadRequest");
    }
}

#[tokio::test]
async fn d4_kube_rs_label_selector() {
    let (env, http) = start().await;
    labelled(&http, "a", json!({"app": "web"})).await;
    labelled(&http, "b", json!({"app": "db"})).await;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let list = api.list(&ListParams::default().labels("app=db")).await.expect("list");
    assert_eq!(list.items.into_iter().filter_map(|c| c.metadata.name).collect::<Vec<_>>(), ["b"]);
}

#[tokio::test]
async fn d5_metadata_name_and_namespace_field_selectors_on_builtins_and_custom_resources() {
    let (_env, http) = start_with_foo().await;
    http.post("/api/v1/namespaces", &json!({"metadata": {"name": "other"}})).await.expect(201);
    for name in ["a", "b", "c"] {
        create_cm(&http, name, json!({})).await;
        create_foo(&http, name, json!({})).await;
    }
    http.post("/api/v1/namespaces/other/configmaps", &cm("a", json!({}))).await.expect(201);
    http.post("/apis/example.com/v1/namespaces/other/foos", &foo("a", json!({}))).await.expect(201);
    for (collection, all) in [(CMS, "/api/v1/configmaps"), (FOOS, "/apis/example.com/v1/foos")] {
        assert_eq!(names(&http.get(&format!("{collection}?fieldSelector=metadata.name%3Da")).await.json()), ["a"]);
        assert_eq!(names(&http.get(&format!("{collection}?fieldSelector=metadata.name%3D%3Db")).await.json()), ["b"]);
        assert_eq!(
            names(&http.get(&format!("{collection}?fieldSelector=metadata.name!%3Da")).await.json()),
            ["b", "c"]
        );
        assert_eq!(
            names(&http.get(&format!("{collection}?fieldSelector=metadata.name!%3Da,metadata.name!%3Db")).await.json()),
            ["c"]
        );
        let across = http.get(&format!("{all}?fieldSelector=metadata.name%3Da")).await.json();
        assert_eq!(keys(&across), [("default".into(), "a".into()), ("other".into(), "a".into())]);
        let only_other = http.get(&format!("{all}?fieldSelector=metadata.namespace%3Dother")).await.json();
        assert_eq!(keys(&only_other), [("other".into(), "a".into())]);
        let both = http.get(&format!("{all}?fieldSelector=metadata.namespace%3Dother,metadata.name%3Db")).await.json();
        assert!(keys(&both).is_empty(), "{both}");
    }
}

#[tokio::test]
async fn d5_unsupported_field_selectors_are_400() {
    let (_env, http) = start_with_foo().await;
    let r = http.get(&format!("{FOOS}?fieldSelector=spec.x%3Dy")).await;
    assert_status(&r, 400, "BadRequest", "field label not supported: spec.x");
    let r = http.get(&format!("{CMS}?fieldSelector=data.k%3Dv")).await;
    assert_status(
        &r,
        400,
        "BadRequest",
        "\"data.k\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\"",
    );
    // Watches reject them too.
    let r = http.get(&format!("{FOOS}?watch=true&fieldSelector=spec.x%3Dy")).await;
    assert_status(&r, 400, "BadRequest", "field label not supported: spec.x");
}

#[tokio::test]
async fn d5_type_specific_field_selectors_of_builtins() {
    let (_env, http) = start().await;
    // Events by involvedObject (kubectl describe) and type.
    for (name, obj, ty) in [("e1", "x", "Normal"), ("e2", "y", "Warning")] {
        let ev = json!({
            "apiVersion": "v1", "kind": "Event", "metadata": {"name": name},
            "involvedObject": {"kind": "Foo", "name": obj, "namespace": "default", "uid": format!("uid-{obj}")},
            "reason": "Test", "message": "m", "type": ty
        });
        http.post("/api/v1/namespaces/default/events", &ev).await.expect(201);
    }
    let q = "involvedObject.uid%3Duid-x,involvedObject.name%3Dx,involvedObject.namespace%3Ddefault,involvedObject.kind%3DFoo";
    assert_eq!(
        names(&http.get(&format!("/api/v1/namespaces/default/events?fieldSelector={q}&limit=500")).await.json()),
        ["e1"]
    );
    assert_eq!(names(&http.get("/api/v1/namespaces/default/events?fieldSelector=type%3DWarning").await.json()), ["e2"]);
    // Pods by node and phase.
    for (name, node) in [("p1", Some("n1")), ("p2", None)] {
        let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "i"}]}});
        if let Some(n) = node {
            pod["spec"]["nodeName"] = json!(n);
        }
        http.post("/api/v1/namespaces/default/pods", &pod).await.expect(201);
    }
    assert_eq!(
        names(&http.get("/api/v1/namespaces/default/pods?fieldSelector=spec.nodeName%3Dn1").await.json()),
        ["p1"]
    );
    assert_eq!(names(&http.get("/api/v1/namespaces/default/pods?fieldSelector=spec.nodeName%3D").await.json()), ["p2"]);
    assert_eq!(
        names(&http.get("/api/v1/namespaces/default/pods?fieldSelector=status.phase%3DPending").await.json()).len(),
        2
    );
    // Secrets by type.
    http.post(
        "/api/v1/namespaces/default/secrets",
        &json!({"metadata": {"name": "s1"}, "type": "kubernetes.io/tls", "data": {"tls.crt": "", "tls.key": ""}}),
    )
    .await
    .expect(201);
    http.post("/api/v1/namespaces/default/secrets", &json!({"metadata": {"name": "s2"}})).await.expect(201);
    assert_eq!(names(&http.get("/api/v1/namespaces/default/secrets?fieldSelector=type%3DOpaque").await.json()), ["s2"]);
}

#[tokio::test]
async fn d5_selectable_fields_of_custom_resources() {
    let (_env, http) = start_with_foo().await;
    create_foo(&http, "r", json!({"color": "red"})).await;
    create_foo(&http, "b", json!({"color": "blue"})).await;
    assert_eq!(names(&http.get(&format!("{FOOS}?fieldSelector=spec.color%3Dred")).await.json()), ["r"]);
    assert_eq!(names(&http.get(&format!("{FOOS}?fieldSelector=spec.color!%3Dred")).await.json()), ["b"]);
}

#[tokio::test]
async fn d6_list_resource_version_semantics() {
    let (env, http) = start().await;
    let a = create_cm(&http, "a", json!({})).await;
    let at = rv(&a);
    create_cm(&http, "b", json!({})).await;
    let current = env.handle().resource_version();
    // Unset: most recent.
    let l = http.get(CMS).await.json();
    assert_eq!(names(&l), ["a", "b"]);
    assert_eq!(rv(&l), current);
    // "0": any; serving the latest state is fine, at least what exists.
    let l = http.get(&format!("{CMS}?resourceVersion=0")).await.json();
    assert_eq!(names(&l), ["a", "b"]);
    // X without limit: not older than X.
    let l = http.get(&format!("{CMS}?resourceVersion={at}")).await.json();
    assert_eq!(names(&l), ["a", "b"]);
    assert!(rv(&l) >= at);
    let l = http.get(&format!("{CMS}?resourceVersion={at}&resourceVersionMatch=NotOlderThan")).await.json();
    assert_eq!(names(&l), ["a", "b"]);
    // Exact: the snapshot at X.
    let l = http.get(&format!("{CMS}?resourceVersion={at}&resourceVersionMatch=Exact")).await.json();
    assert_eq!(names(&l), ["a"]);
    assert_eq!(rv(&l), at);
    // X with a limit: exact too.
    let l = http.get(&format!("{CMS}?resourceVersion={at}&limit=10")).await.json();
    assert_eq!(names(&l), ["a"]);
    assert_eq!(rv(&l), at);
    // kube-rs `any_semantic` lists with resourceVersion=0 and NotOlderThan.
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let l = api.list(&ListParams::default().match_any()).await.expect("list any");
    assert_eq!(l.items.len(), 2);
}

#[tokio::test]
async fn d6_exact_list_of_a_compacted_resource_version_is_410() {
    let (env, http) = start().await;
    let a = create_cm(&http, "a", json!({})).await;
    create_cm(&http, "b", json!({})).await;
    env.handle().compact();
    let r = http.get(&format!("{CMS}?resourceVersion={}&limit=1", rv(&a))).await;
    assert_status(&r, 410, "Expired", "The resourceVersion for the provided list is too old.");
}

#[tokio::test]
async fn d6_continue_with_a_resource_version_is_400() {
    let (_env, http) = start().await;
    for i in 0..3 {
        create_cm(&http, &format!("c{i}"), json!({})).await;
    }
    let p1 = http.get(&format!("{CMS}?limit=1")).await.json();
    let token = p1["metadata"]["continue"].as_str().unwrap();
    let r = http.get(&format!("{CMS}?limit=1&continue={token}&resourceVersion={}", rv(&p1))).await;
    assert_status(&r, 400, "BadRequest", "specifying resource version is not allowed when using continue");
    // resourceVersion=0 with continue is tolerated.
    http.get(&format!("{CMS}?limit=1&continue={token}&resourceVersion=0")).await.expect(200);
}

#[tokio::test]
async fn d6_list_options_validation_is_422_listoptions() {
    let (_env, http) = start().await;
    create_cm(&http, "a", json!({})).await;
    create_cm(&http, "b", json!({})).await;
    let p1 = http.get(&format!("{CMS}?limit=1")).await.json();
    let token = p1["metadata"]["continue"].as_str().unwrap().to_string();
    for (q, field) in [
        ("resourceVersionMatch=Exact".to_string(), "resourceVersionMatch"),
        ("resourceVersion=1&resourceVersionMatch=Sometime".to_string(), "resourceVersionMatch"),
        ("resourceVersion=0&resourceVersionMatch=Exact".to_string(), "resourceVersionMatch"),
        (format!("continue={token}&resourceVersionMatch=NotOlderThan&resourceVersion=0"), "resourceVersionMatch"),
        ("sendInitialEvents=true".to_string(), "sendInitialEvents"),
    ] {
        let r = http.get(&format!("{CMS}?{q}")).await;
        let s = assert_reason(&r, 422, "Invalid");
        assert_eq!(s["details"]["kind"], "ListOptions", "{q}");
        assert_eq!(s["details"]["group"], "meta.k8s.io", "{q}");
        let causes = s["details"]["causes"].as_array().unwrap();
        assert!(causes.iter().any(|c| c["field"] == field), "{q}: {s}");
    }
}

#[tokio::test]
async fn d7_expired_continue_token_is_410() {
    let (env, http) = start().await;
    for i in 0..3 {
        create_cm(&http, &format!("c{i}"), json!({})).await;
    }
    let p1 = http.get(&format!("{CMS}?limit=1")).await.json();
    let token = p1["metadata"]["continue"].as_str().unwrap().to_string();
    create_cm(&http, "later", json!({})).await;
    env.handle().compact();
    let r = http.get(&format!("{CMS}?limit=1&continue={token}")).await;
    let s = assert_reason(&r, 410, "Expired");
    assert!(
        s["message"]
            .as_str()
            .unwrap()
            .starts_with("The provided continue parameter is too old to display a consistent list result."),
        "{s}"
    );
}

#[tokio::test]
async fn d7_malformed_continue_token_is_400() {
    let (_env, http) = start().await;
    assert_reason(&http.get(&format!("{CMS}?limit=1&continue=not-a-token")).await, 400, "BadRequest");
}

#[tokio::test]
async fn d8_get_with_resource_version_serves_the_latest_or_504_for_the_future() {
    let (env, http) = start().await;
    let a = create_cm(&http, "a", json!({"k": "1"})).await;
    http.merge(&format!("{CMS}/a"), &json!({"data": {"k": "2"}})).await.expect(200);
    for q in ["resourceVersion=0".to_string(), format!("resourceVersion={}", rv(&a))] {
        let r = http.get(&format!("{CMS}/a?{q}")).await;
        r.expect(200);
        assert_eq!(r.json()["data"]["k"], "2", "{q}");
    }
    let future = env.handle().resource_version() + 100;
    let r = http.get(&format!("{CMS}/a?resourceVersion={future}")).await;
    let s = assert_reason(&r, 504, "Timeout");
    assert_eq!(s["details"]["causes"][0]["reason"], "ResourceVersionTooLarge");
}

#[tokio::test]
async fn d9_delete_collection_deletes_the_namespace_and_answers_a_list() {
    let (_env, http) = start_with_foo().await;
    http.post("/api/v1/namespaces", &json!({"metadata": {"name": "other"}})).await.expect(201);
    for n in ["a", "b"] {
        create_foo(&http, n, json!({})).await;
    }
    let mut held = foo("held", json!({}));
    held["metadata"]["finalizers"] = json!(["example.com/hold"]);
    http.post(FOOS, &held).await.expect(201);
    http.post("/apis/example.com/v1/namespaces/other/foos", &foo("keep", json!({}))).await.expect(201);
    let r = http.delete(FOOS).await;
    r.expect(200);
    let body = r.json();
    assert_eq!(body["kind"], "FooList");
    assert_eq!(body["apiVersion"], "example.com/v1");
    let mut deleted = names(&body);
    deleted.sort();
    assert_eq!(deleted, ["a", "b", "held"]);
    // Finalizers are honoured: the held object is only marked.
    let left = http.get(FOOS).await.json();
    assert_eq!(names(&left), ["held"]);
    assert!(left["items"][0]["metadata"]["deletionTimestamp"].is_string());
    // Other namespaces are untouched.
    http.get("/apis/example.com/v1/namespaces/other/foos/keep").await.expect(200);
}

#[tokio::test]
async fn d9_delete_collection_with_selectors() {
    let (_env, http) = start().await;
    labelled(&http, "a", json!({"app": "x"})).await;
    labelled(&http, "b", json!({"app": "y"})).await;
    labelled(&http, "c", json!({"app": "x"})).await;
    let r = http.delete(&format!("{CMS}?labelSelector=app%3Dx")).await;
    r.expect(200);
    let mut deleted = names(&r.json());
    deleted.sort();
    assert_eq!(deleted, ["a", "c"]);
    assert_eq!(names(&http.get(CMS).await.json()), ["b"]);
    labelled(&http, "d", json!({})).await;
    let r = http.delete(&format!("{CMS}?fieldSelector=metadata.name%3Dd")).await;
    assert_eq!(names(&r.json()), ["d"]);
    assert_eq!(names(&http.get(CMS).await.json()), ["b"]);
}

#[tokio::test]
async fn d9_kube_rs_delete_collection_returns_the_list() {
    let (env, http) = start().await;
    create_cm(&http, "a", json!({})).await;
    create_cm(&http, "b", json!({})).await;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let out = api
        .delete_collection(&DeleteParams::default(), &ListParams::default().fields("metadata.name=a"))
        .await
        .expect("deletecollection");
    let list = out.left().expect("a list of deleted objects");
    assert_eq!(list.items.into_iter().filter_map(|c| c.metadata.name).collect::<Vec<_>>(), ["a"]);
    assert!(api.get_opt("a").await.expect("get").is_none());
    assert!(api.get_opt("b").await.expect("get").is_some());
}

//! Checklist section A: transport, routing and content negotiation, checked on the wire.

mod common;

use std::time::Duration;

use common::*;
use http::Method;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[tokio::test]
async fn a1_kubeconfig_points_at_plain_http_loopback_and_kube_rs_connects() {
    let (env, _http) = start().await;
    assert!(env.base_url().starts_with("http://127.0.0.1:"), "{}", env.base_url());
    let text = std::fs::read_to_string(env.kubeconfig_path()).expect("the kubeconfig exists");
    assert!(text.contains(&format!("server: {}", env.base_url())), "{text}");
    let kubeconfig = kube::config::Kubeconfig::read_from(env.kubeconfig_path()).expect("a valid kubeconfig");
    let config =
        kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await.expect("a usable kubeconfig");
    let client = kube::Client::try_from(config).expect("a client");
    let namespaces: Api<Namespace> = Api::all(client);
    let list = within("list namespaces", namespaces.list(&ListParams::default())).await.expect("list over plain HTTP");
    assert!(list.items.iter().any(|n| n.metadata.name.as_deref() == Some("default")));
}

#[tokio::test]
async fn a1_authorization_headers_are_accepted_and_ignored() {
    let (_env, http) = start().await;
    for auth in ["Bearer not-a-real-token", "Basic dXNlcjpwYXNz", "garbage"] {
        let r = http.send(Method::GET, "/api/v1/namespaces/default", &[("authorization", auth)], None).await;
        r.expect(200);
        assert_eq!(r.json()["metadata"]["name"], "default");
    }
}

#[tokio::test]
async fn a1_http11_keep_alive_serves_several_requests_on_one_connection() {
    let (env, _http) = start().await;
    let mut sock = tokio::net::TcpStream::connect(env.handle().addr()).await.expect("connect");
    let req = "GET /api/v1/namespaces/default HTTP/1.1\r\nHost: x\r\n\r\n";
    let mut seen = 0;
    let mut buf = Vec::new();
    for _ in 0..3 {
        sock.write_all(req.as_bytes()).await.expect("write");
        // Read until one more complete response has arrived.
        within("a keep-alive response", async {
            loop {
                let mut chunk = [0u8; 4096];
                let n = sock.read(&mut chunk).await.expect("read");
                assert!(n > 0, "the server closed a keep-alive connection");
                buf.extend_from_slice(&chunk[..n]);
                let text = String::from_utf8_lossy(&buf);
                if text.matches("HTTP/1.1 200").count() > seen && text.matches("\"name\":\"default\"").count() > seen {
                    seen += 1;
                    break;
                }
            }
        })
        .await;
    }
    assert_eq!(seen, 3);
}

#[tokio::test]
async fn a2_collection_object_and_all_namespaces_routes_of_core_resources() {
    let (_env, http) = start().await;
    http.post("/api/v1/namespaces", &json!({"metadata": {"name": "other"}})).await.expect(201);
    http.post(CMS, &cm("a", json!({"k": "1"}))).await.expect(201);
    http.post("/api/v1/namespaces/other/configmaps", &cm("b", json!({}))).await.expect(201);
    // Collection in a namespace.
    let list = http.get(CMS).await;
    list.expect(200);
    let names: Vec<String> = list.json()["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    assert!(names.contains(&"a".to_string()) && !names.contains(&"b".to_string()), "{names:?}");
    // All namespaces.
    let all = http.get("/api/v1/configmaps").await;
    all.expect(200);
    let all = all.json();
    let keys: Vec<(String, String)> = all["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            (
                i["metadata"]["namespace"].as_str().unwrap().to_string(),
                i["metadata"]["name"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert!(keys.contains(&("default".into(), "a".into())) && keys.contains(&("other".into(), "b".into())), "{keys:?}");
    // Object verbs.
    let a = http.get(&format!("{CMS}/a")).await;
    a.expect(200);
    let mut a = a.json();
    a["data"]["k"] = json!("2");
    http.put(&format!("{CMS}/a"), &a).await.expect(200);
    http.merge(&format!("{CMS}/a"), &json!({"data": {"k": "3"}})).await.expect(200);
    http.delete(&format!("{CMS}/a")).await.expect(200);
    http.get(&format!("{CMS}/a")).await.expect(404);
}

#[tokio::test]
async fn a2_collection_object_subresource_and_all_namespaces_routes_of_custom_resources() {
    let (_env, http) = start_with_foo().await;
    create_foo(&http, "a", json!({"replicas": 1})).await;
    http.get(FOOS).await.expect(200);
    http.get("/apis/example.com/v1/foos").await.expect(200);
    http.get(&format!("{FOOS}/a")).await.expect(200);
    http.get(&format!("{FOOS}/a/status")).await.expect(200);
    http.get(&format!("{FOOS}/a/scale")).await.expect(200);
    http.merge(&format!("{FOOS}/a/status"), &json!({"status": {"replicas": 1}})).await.expect(200);
    http.merge(&format!("{FOOS}/a"), &json!({"spec": {"x": "y"}})).await.expect(200);
    http.delete(&format!("{FOOS}/a")).await.expect(200);
}

#[tokio::test]
async fn a2_namespaced_resource_on_a_cluster_path_is_404_except_list_and_watch() {
    let (_env, http) = start_with_foo().await;
    create_cm(&http, "a", json!({})).await;
    create_foo(&http, "a", json!({})).await;
    for path in ["/api/v1/configmaps/a", "/apis/example.com/v1/foos/a"] {
        assert_status(&http.get(path).await, 404, "NotFound", "the server could not find the requested resource");
        assert_status(&http.delete(path).await, 404, "NotFound", "the server could not find the requested resource");
        assert_status(
            &http.merge(path, &json!({})).await,
            404,
            "NotFound",
            "the server could not find the requested resource",
        );
    }
    let r = http.post("/api/v1/configmaps", &cm("b", json!({}))).await;
    assert_status(&r, 404, "NotFound", "the server could not find the requested resource");
    let r = http.post("/apis/example.com/v1/foos", &foo("b", json!({}))).await;
    assert_status(&r, 404, "NotFound", "the server could not find the requested resource");
    // List and watch across namespaces are fine.
    http.get("/api/v1/configmaps").await.expect(200);
    let w = http.watch("/apis/example.com/v1/foos?watch=true").await;
    assert_eq!(w.status, 200);
}

#[tokio::test]
async fn a2_cluster_scoped_resource_under_a_namespace_is_404() {
    let (_env, http) = start().await;
    install_crd(&http, &cluster_foo_crd()).await;
    http.post(
        "/apis/example.com/v1/clusterfoos",
        &json!({"apiVersion": "example.com/v1", "kind": "ClusterFoo", "metadata": {"name": "c"}, "spec": {}}),
    )
    .await
    .expect(201);
    http.get("/apis/example.com/v1/clusterfoos/c").await.expect(200);
    for path in [
        "/apis/example.com/v1/namespaces/default/clusterfoos/c",
        "/apis/example.com/v1/namespaces/default/clusterfoos",
        "/apis/rbac.authorization.k8s.io/v1/namespaces/default/clusterroles",
        "/api/v1/namespaces/default/nodes",
    ] {
        assert_status(&http.get(path).await, 404, "NotFound", "the server could not find the requested resource");
    }
}

#[tokio::test]
async fn a2_unknown_subresource_and_unknown_resource_are_404() {
    let (_env, http) = start_with_foo().await;
    create_cm(&http, "a", json!({})).await;
    for path in [
        "/api/v1/namespaces/default/configmaps/a/status",
        "/api/v1/namespaces/default/configmaps/a/bogus",
        "/api/v1/namespaces/default/widgets",
        "/apis/example.com/v2/namespaces/default/foos",
        "/apis/nothing.example.org/v1/things",
    ] {
        assert_status(&http.get(path).await, 404, "NotFound", "the server could not find the requested resource");
    }
}

#[tokio::test]
async fn a3_empty_query_and_trailing_question_mark_are_tolerated() {
    let (_env, http) = start().await;
    http.post(&format!("{CMS}?"), &cm("a", json!({}))).await.expect(201);
    http.get(&format!("{CMS}?")).await.expect(200);
    http.get(&format!("{CMS}/a?")).await.expect(200);
    http.merge(&format!("{CMS}/a?"), &json!({"data": {"x": "y"}})).await.expect(200);
    http.delete(&format!("{CMS}/a?")).await.expect(200);
}

#[tokio::test]
async fn a3_unknown_query_parameters_are_ignored() {
    let (_env, http) = start().await;
    http.post(&format!("{CMS}?timeout=32s&pretty=true&bogus=1"), &cm("a", json!({}))).await.expect(201);
    http.get(&format!("{CMS}?timeout=32s&limit=500&includeObject=Object&whatever=")).await.expect(200);
    http.get(&format!("{CMS}/a?timeout=5s&pretty=1")).await.expect(200);
    http.get("/api?timeout=32s").await.expect(200);
    http.get("/version?timeout=5s").await.expect(200);
}

#[tokio::test]
async fn a4_every_json_response_is_application_json() {
    let (_env, http) = start().await;
    let created = http.post(CMS, &cm("a", json!({}))).await;
    let got = http.get(&format!("{CMS}/a")).await;
    let listed = http.get(CMS).await;
    let missing = http.get(&format!("{CMS}/nope")).await;
    let unknown = http.get("/api/v1/namespaces/default/widgets").await;
    let discovery = http.get("/api/v1").await;
    for r in [&created, &got, &listed, &missing, &unknown, &discovery] {
        assert!(
            r.content_type().starts_with("application/json"),
            "content type {:?} for {}",
            r.content_type(),
            r.text()
        );
        r.json();
    }
    let w = http.watch(&format!("{CMS}?watch=true")).await;
    assert_eq!(w.content_type(), "application/json");
}

#[tokio::test]
async fn a4_status_codes_per_verb() {
    let (_env, http) = start_with_foo().await;
    // POST 201, GET 200, PUT 200, PATCH 200, DELETE 200.
    let created = http.post(CMS, &cm("a", json!({}))).await;
    created.expect(201);
    http.get(&format!("{CMS}/a")).await.expect(200);
    http.put(&format!("{CMS}/a"), &created.json()).await.expect(200);
    http.merge(&format!("{CMS}/a"), &json!({"data": {"a": "b"}})).await.expect(200);
    http.delete(&format!("{CMS}/a")).await.expect(200);
    // PUT that creates (kinds with AllowCreateOnUpdate, e.g. services): 201.
    let svc =
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {"ports": [{"port": 80}]}});
    http.put("/api/v1/namespaces/default/services/s", &svc).await.expect(201);
    // Apply that creates: 201; a second apply: 200.
    let body = foo("f", json!({"x": "1"}));
    http.apply(&format!("{FOOS}/f"), "fieldManager=m", &body).await.expect(201);
    http.apply(&format!("{FOOS}/f"), "fieldManager=m", &body).await.expect(200);
}

#[tokio::test]
async fn a4_delete_pending_with_orphan_dependents_false_is_202_otherwise_200() {
    let (_env, http) = start().await;
    let mut a = cm("a", json!({}));
    a["metadata"]["finalizers"] = json!(["example.com/hold"]);
    http.post(CMS, &a).await.expect(201);
    let mut b = a.clone();
    b["metadata"]["name"] = json!("b");
    http.post(CMS, &b).await.expect(201);
    let r = http.delete_with(&format!("{CMS}/a"), &json!({"orphanDependents": false})).await;
    r.expect(202);
    assert!(r.json()["metadata"]["deletionTimestamp"].is_string(), "{}", r.text());
    let r = http.delete(&format!("{CMS}/b")).await;
    r.expect(200);
    assert!(r.json()["metadata"]["deletionTimestamp"].is_string(), "{}", r.text());
}

#[tokio::test]
async fn a5_json_bodies_with_charset_parameter_are_accepted() {
    let (_env, http) = start().await;
    let ct = [("content-type", "application/json; charset=utf-8")];
    let r = http.send(Method::POST, CMS, &ct, Some(cm("a", json!({"k": "v"})).to_string().into_bytes())).await;
    r.expect(201);
    let r = http.send(Method::PUT, &format!("{CMS}/a"), &ct, Some(r.json().to_string().into_bytes())).await;
    r.expect(200);
    let r = http
        .patch(&format!("{CMS}/a"), "application/merge-patch+json; charset=utf-8", &json!({"data": {"k": "w"}}))
        .await;
    r.expect(200);
    assert_eq!(r.json()["data"]["k"], "w");
}

#[tokio::test]
async fn a5_delete_options_body_without_kind_and_api_version_is_honoured() {
    let (_env, http) = start().await;
    let mut a = cm("a", json!({}));
    a["metadata"]["finalizers"] = json!(["example.com/hold"]);
    http.post(CMS, &a).await.expect(201);
    // kube-rs sends DeleteOptions without TypeMeta.
    let r = http.delete_with(&format!("{CMS}/a"), &json!({"propagationPolicy": "Orphan"})).await;
    r.expect(200);
    let fins = r.json()["metadata"]["finalizers"].clone();
    assert!(fins.as_array().unwrap().contains(&json!("orphan")), "{fins}");
    // An empty options object is fine too.
    create_cm(&http, "b", json!({})).await;
    http.delete_with(&format!("{CMS}/b"), &json!({})).await.expect(200);
    // And a full DeleteOptions with TypeMeta.
    create_cm(&http, "c", json!({})).await;
    http.delete_with(
        &format!("{CMS}/c"),
        &json!({"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Background"}),
    )
    .await
    .expect(200);
}

#[tokio::test]
async fn a5_delete_options_as_query_parameters_when_the_body_is_empty() {
    let (_env, http) = start().await;
    let mut a = cm("a", json!({}));
    a["metadata"]["finalizers"] = json!(["example.com/hold"]);
    http.post(CMS, &a).await.expect(201);
    let r = http.delete(&format!("{CMS}/a?propagationPolicy=Orphan")).await;
    r.expect(200);
    let fins = r.json()["metadata"]["finalizers"].clone();
    assert!(fins.as_array().unwrap().contains(&json!("orphan")), "{fins}");
    // dryRun as a query parameter persists nothing.
    create_cm(&http, "b", json!({})).await;
    http.delete(&format!("{CMS}/b?dryRun=All")).await.expect(200);
    http.get(&format!("{CMS}/b")).await.expect(200);
}

#[tokio::test]
async fn a6_protobuf_first_accept_is_answered_with_json() {
    let (_env, http) = start().await;
    create_cm(&http, "a", json!({})).await;
    for accept in [
        "application/vnd.kubernetes.protobuf,application/json",
        "application/vnd.kubernetes.protobuf, */*",
        "*/*",
        "application/json, */*",
    ] {
        let r = http.get_accept(CMS, accept).await;
        r.expect(200);
        assert!(r.content_type().starts_with("application/json"), "{accept}: {}", r.content_type());
        assert_eq!(r.json()["kind"], "ConfigMapList");
        let r = http.get_accept(&format!("{CMS}/a"), accept).await;
        r.expect(200);
        assert_eq!(r.json()["kind"], "ConfigMap");
    }
}

#[tokio::test]
async fn a6_nothing_acceptable_is_406() {
    let (_env, http) = start_with_foo().await;
    let r = http.get_accept(CMS, "text/html").await;
    assert_reason(&r, 406, "NotAcceptable");
    // Custom resources have no protobuf form.
    let r = http.get_accept(FOOS, "application/vnd.kubernetes.protobuf").await;
    assert_reason(&r, 406, "NotAcceptable");
}

#[tokio::test]
async fn a6_protobuf_and_cbor_request_bodies_of_unsupported_kinds_are_415() {
    let (_env, http) = start_with_foo().await;
    // runtime.Unknown envelope naming batch/v1 Job, empty raw.
    let type_meta = [&[0x0a, 8][..], b"batch/v1", &[0x12, 3], b"Job"].concat();
    let unknown = [&[0x0a, type_meta.len() as u8][..], &type_meta, &[0x12, 0]].concat();
    let body = [b"k8s\0".as_slice(), &unknown].concat();
    let r = http
        .send(
            Method::POST,
            "/apis/batch/v1/namespaces/default/jobs",
            &[("content-type", "application/vnd.kubernetes.protobuf")],
            Some(body),
        )
        .await;
    assert_reason(&r, 415, "UnsupportedMediaType");
    let r = http.send(Method::POST, FOOS, &[("content-type", "application/cbor")], Some(vec![0xa0])).await;
    assert_reason(&r, 415, "UnsupportedMediaType");
}

#[tokio::test]
async fn a7_partial_object_metadata_accept_is_echoed_in_content_type() {
    let (_env, http) = start().await;
    create_cm(&http, "a", json!({"secret": "payload"})).await;
    let r = http
        .get_accept(
            &format!("{CMS}/a"),
            "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json",
        )
        .await;
    r.expect(200);
    let ct = r.content_type().replace(' ', "");
    assert!(ct.contains("as=PartialObjectMetadata") && ct.contains("g=meta.k8s.io") && ct.contains("v=v1"), "{ct}");
    let body = r.json();
    assert_eq!(body["kind"], "PartialObjectMetadata");
    assert_eq!(body["apiVersion"], "meta.k8s.io/v1");
    assert!(body.get("data").is_none(), "{body}");
    let r =
        http.get_accept(CMS, "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json").await;
    r.expect(200);
    let ct = r.content_type().replace(' ', "");
    assert!(ct.contains("as=PartialObjectMetadataList"), "{ct}");
    assert_eq!(r.json()["kind"], "PartialObjectMetadataList");
}

#[tokio::test]
async fn a7_table_accept_is_echoed_in_content_type() {
    let (_env, http) = start().await;
    create_cm(&http, "a", json!({})).await;
    let accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
    let r = http.get_accept(CMS, accept).await;
    r.expect(200);
    let ct = r.content_type().replace(' ', "");
    assert!(ct.contains("as=Table") && ct.contains("v=v1") && ct.contains("g=meta.k8s.io"), "{ct}");
    let body = r.json();
    assert_eq!(body["kind"], "Table", "{body}");
    assert_eq!(body["apiVersion"], "meta.k8s.io/v1", "{body}");
    // v1beta1 only: the v1beta1 Table.
    let r = http.get_accept(CMS, "application/json;as=Table;v=v1beta1;g=meta.k8s.io").await;
    r.expect(200);
    assert!(r.content_type().replace(' ', "").contains("v=v1beta1"), "{}", r.content_type());
    assert_eq!(r.json()["apiVersion"], "meta.k8s.io/v1beta1", "{}", r.text());
}

#[tokio::test]
async fn a7_aggregated_discovery_accept_is_echoed_in_content_type() {
    let (_env, http) = start().await;
    let accept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
    for path in ["/api", "/apis"] {
        let r = http.get_accept(path, accept).await;
        r.expect(200);
        let ct = r.content_type().replace(' ', "");
        assert!(
            ct.contains("as=APIGroupDiscoveryList") && ct.contains("g=apidiscovery.k8s.io") && ct.contains("v=v2"),
            "{path}: {ct}"
        );
        assert_eq!(r.json()["kind"], "APIGroupDiscoveryList");
    }
    // Without the aggregated media type: the legacy documents.
    assert_eq!(http.get("/api").await.json()["kind"], "APIVersions");
    assert_eq!(http.get("/apis").await.json()["kind"], "APIGroupList");
}

#[tokio::test]
async fn a8_two_hundred_concurrent_watches_all_see_a_change() {
    let (env, http) = start().await;
    let from = env.handle().resource_version();
    let mut watches = Vec::new();
    for _ in 0..200 {
        let w = http.watch(&format!("{CMS}?watch=true&resourceVersion={from}")).await;
        assert_eq!(w.status, 200);
        watches.push(w);
    }
    create_cm(&http, "a", json!({})).await;
    let results = futures::future::join_all(watches.iter_mut().map(|w| async move { w.next().await })).await;
    for ev in results {
        assert_eq!(ev["type"], "ADDED");
        assert_eq!(ev["object"]["metadata"]["name"], "a");
    }
}

#[tokio::test]
async fn a8_a_stalled_watch_reader_blocks_neither_writers_nor_other_watchers() {
    let (env, http) = start().await;
    let from = env.handle().resource_version();
    // A watcher that never reads its socket.
    let mut stalled = tokio::net::TcpStream::connect(env.handle().addr()).await.expect("connect");
    stalled
        .write_all(format!("GET {CMS}?watch=true&resourceVersion={from} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
        .await
        .expect("write");
    let mut reader = http.watch(&format!("{CMS}?watch=true&resourceVersion={from}")).await;
    let big = "x".repeat(16 * 1024);
    let n = 200;
    // ~3 MiB of events: far more than socket buffers and any per-watch queue.
    let started = std::time::Instant::now();
    for i in 0..n {
        create_cm(&http, &format!("cm-{i:03}"), json!({"big": big})).await;
    }
    assert!(started.elapsed() < Duration::from_secs(20), "writes were slowed down to {:?}", started.elapsed());
    for i in 0..n {
        let ev = reader.next().await;
        assert_eq!(ev["type"], "ADDED");
        assert_eq!(ev["object"]["metadata"]["name"], format!("cm-{i:03}"));
    }
    drop(stalled);
}

#[tokio::test]
async fn a9_health_endpoints_answer_ok() {
    let (_env, http) = start().await;
    for path in ["/healthz", "/livez", "/readyz"] {
        let r = http.get(path).await;
        r.expect(200);
        assert_eq!(r.text(), "ok", "{path}");
    }
}

#[tokio::test]
async fn a9_field_validation_warn_answers_with_a_warning_header() {
    let (_env, http) = start().await;
    let mut body = cm("a", json!({}));
    body["bogus"] = json!(1);
    let r = http.post(&format!("{CMS}?fieldValidation=Warn"), &body).await;
    r.expect(201);
    let warnings = r.header_all("warning");
    assert!(
        warnings.iter().any(|w| w.starts_with("299 - \"") && w.contains("unknown field \\\"bogus\\\"")),
        "{warnings:?}"
    );
}

/// Helper check that the JSON helpers reject non-JSON.
#[tokio::test]
async fn a4_health_is_the_only_non_json_response() {
    let (_env, http) = start().await;
    let r = http.get("/version").await;
    assert!(r.content_type().starts_with("application/json"));
    let v: Value = r.json();
    assert!(v.is_object());
}

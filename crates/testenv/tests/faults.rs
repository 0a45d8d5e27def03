//! The test controls of `TestEnv`: fault injection, request counters, compaction and history
//! retention, the clock, closing watches, stopping, and the builder options.

mod common;

use std::time::Duration;

use common::*;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use serde_json::json;
use testenv::{RequestMatch, TestEnv, Verb};

#[tokio::test]
async fn injected_failures_answer_the_status_kube_apiserver_would() {
    let (env, http) = start().await;
    create_cm(&http, "a", json!({})).await;
    let faults = env.handle().faults();
    for (code, reason) in [
        (500, "InternalError"),
        (409, "Conflict"),
        (429, "TooManyRequests"),
        (503, "ServiceUnavailable"),
        (404, "NotFound"),
    ] {
        faults.fail_next(RequestMatch::new(Verb::Get, "configmaps"), 1, code);
        let s = assert_reason(&http.get(&format!("{CMS}/a")).await, code, reason);
        assert_eq!(s["status"], "Failure");
        http.get(&format!("{CMS}/a")).await.expect(200);
    }
}

#[tokio::test]
async fn injected_failures_are_consumed_and_only_hit_matching_requests() {
    let (env, http) = start().await;
    create_cm(&http, "a", json!({})).await;
    create_cm(&http, "b", json!({})).await;
    let faults = env.handle().faults();
    faults.fail_next(RequestMatch::new(Verb::Update, "configmaps").named("a").in_namespace("default"), 2, 500);
    // Other verbs, names and resources pass.
    http.get(&format!("{CMS}/a")).await.expect(200);
    http.merge(&format!("{CMS}/b"), &json!({"data": {"x": "1"}})).await.expect(200);
    http.post("/api/v1/namespaces/default/secrets", &json!({"metadata": {"name": "s"}})).await.expect(201);
    let a = http.get(&format!("{CMS}/a")).await.json();
    assert_eq!(http.put(&format!("{CMS}/a"), &a).await.status, 500);
    assert_eq!(http.put(&format!("{CMS}/a"), &a).await.status, 500);
    http.put(&format!("{CMS}/a"), &a).await.expect(200);
    // Failed requests change nothing.
    assert_eq!(rv(&http.get(&format!("{CMS}/a")).await.json()), rv(&a));
}

#[tokio::test]
async fn injected_failures_reach_kube_rs_as_api_errors() {
    let (env, _http) = start().await;
    env.handle().faults().fail_next(RequestMatch::new(Verb::Create, "configmaps"), 1, 409);
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("a".into());
    match api.create(&PostParams::default(), &cm).await {
        Err(kube::Error::Api(s)) => assert!(s.is_conflict(), "{s:?}"),
        other => panic!("expected the injected conflict, got {other:?}"),
    }
    api.create(&PostParams::default(), &cm).await.expect("the retry succeeds");
}

#[tokio::test]
async fn clear_removes_pending_faults() {
    let (env, http) = start().await;
    env.handle().faults().fail_next(RequestMatch::resource("configmaps"), 10, 500);
    env.handle().faults().delay(RequestMatch::resource("configmaps"), Duration::from_secs(30), None);
    env.handle().faults().clear();
    http.get(CMS).await.expect(200);
}

#[tokio::test]
async fn delays_slow_down_matching_requests_only() {
    let (env, http) = start().await;
    env.handle().faults().delay(RequestMatch::new(Verb::List, "configmaps"), Duration::from_millis(1000), Some(1));
    let t = std::time::Instant::now();
    http.get("/api/v1/namespaces/default/secrets").await.expect(200);
    assert!(t.elapsed() < Duration::from_millis(800));
    let t = std::time::Instant::now();
    http.get(CMS).await.expect(200);
    assert!(t.elapsed() >= Duration::from_millis(1000), "{:?}", t.elapsed());
    let t = std::time::Instant::now();
    http.get(CMS).await.expect(200);
    assert!(t.elapsed() < Duration::from_millis(800), "the delay was used up");
}

#[tokio::test]
async fn close_watches_ends_matching_watches_cleanly() {
    let (env, http) = start_with_foo().await;
    let from = env.handle().resource_version();
    let mut cms = http.watch(&format!("{CMS}?watch=true&resourceVersion={from}")).await;
    let mut foos = http.watch(&format!("{FOOS}?watch=true&resourceVersion={from}")).await;
    within("watches to register", async {
        while env.handle().faults().open_watches() < 2 {
            tokio::task::yield_now().await;
        }
    })
    .await;
    assert_eq!(env.handle().faults().open_watches(), 2);
    assert_eq!(env.handle().close_watches(Some("foos.example.com")), 1);
    assert!(foos.expect_end(WAIT).await.is_empty(), "no ERROR on a clean close");
    cms.expect_quiet().await;
    assert_eq!(env.handle().close_watches(None), 1);
    assert!(cms.expect_end(WAIT).await.is_empty());
    assert_eq!(env.handle().faults().open_watches(), 0);
}

#[tokio::test]
async fn request_counters_count_per_verb_and_resource() {
    let (env, http) = start_with_foo().await;
    env.handle().reset_requests();
    let before = env.handle().requests();
    assert_eq!(before.total(), 0);
    create_cm(&http, "a", json!({})).await;
    create_cm(&http, "b", json!({})).await;
    http.get(&format!("{CMS}/a")).await.expect(200);
    http.get(CMS).await.expect(200);
    create_foo(&http, "f", json!({})).await;
    http.merge(&format!("{FOOS}/f/status"), &json!({"status": {"ready": true}})).await.expect(200);
    http.delete(&format!("{CMS}/a")).await.expect(200);
    http.get("/api/v1").await.expect(200);
    let _w = http.watch(&format!("{CMS}?watch=true&resourceVersion={}", env.handle().resource_version())).await;
    let counts = env.handle().requests();
    assert_eq!(counts.get(Verb::Create, "configmaps"), 2);
    assert_eq!(counts.get(Verb::Get, "configmaps"), 1);
    assert_eq!(counts.get(Verb::List, "configmaps"), 1);
    assert_eq!(counts.get(Verb::Delete, "configmaps"), 1);
    assert_eq!(counts.get(Verb::Watch, "configmaps"), 1);
    assert_eq!(counts.get(Verb::Create, "foos.example.com"), 1);
    assert_eq!(counts.get(Verb::Patch, "foos.example.com/status"), 1);
    assert_eq!(counts.verb(Verb::Create), 3);
    assert_eq!(counts.writes(), 5);
    assert!(counts.other >= 1, "discovery is counted apart");
    let since = counts.since(&before);
    assert_eq!(since.get(Verb::Create, "configmaps"), 2);
    env.handle().reset_requests();
    assert_eq!(env.handle().requests().total(), 0);
}

#[tokio::test]
async fn resource_version_and_compact_hooks() {
    let (env, http) = start().await;
    let a = create_cm(&http, "a", json!({})).await;
    assert_eq!(env.handle().resource_version(), rv(&a));
    create_cm(&http, "b", json!({})).await;
    let point = env.handle().compact();
    assert_eq!(point, env.handle().resource_version());
    // Older RVs are gone, the compaction point itself still works.
    let events = http.watch_lines(&format!("{CMS}?watch=true&resourceVersion={}", rv(&a)), 1, WAIT).await;
    assert_eq!(events[0]["type"], "ERROR");
    assert_eq!(events[0]["object"]["code"], 410);
    let mut w = http.watch(&format!("{CMS}?watch=true&resourceVersion={point}")).await;
    create_cm(&http, "c", json!({})).await;
    assert_eq!(w.next().await["object"]["metadata"]["name"], "c");
}

#[tokio::test]
async fn history_is_bounded_by_event_count() {
    let env = TestEnv::builder().history(Duration::from_secs(3600), 5).start().await.expect("start");
    let http = Http::new(&env);
    let first = create_cm(&http, "first", json!({})).await;
    for i in 0..10 {
        create_cm(&http, &format!("cm-{i}"), json!({})).await;
    }
    let events = http.watch_lines(&format!("{CMS}?watch=true&resourceVersion={}", rv(&first)), 1, WAIT).await;
    assert_eq!(events[0]["type"], "ERROR");
    assert_eq!(events[0]["object"]["reason"], "Expired");
    // Recent history is still there.
    let recent = env.handle().resource_version() - 2;
    let events = http.watch_lines(&format!("{CMS}?watch=true&resourceVersion={recent}"), 2, WAIT).await;
    assert_eq!(events.len(), 2);
    assert!(events.iter().all(|e| e["type"] == "ADDED"));
}

#[tokio::test]
async fn history_is_bounded_by_age() {
    let env = TestEnv::builder().history(Duration::from_millis(200), 100_000).start().await.expect("start");
    let http = Http::new(&env);
    let first = create_cm(&http, "first", json!({})).await;
    // Age is the point of this test: let the first event grow old, then write again.
    tokio::time::sleep(Duration::from_millis(400)).await;
    create_cm(&http, "later", json!({})).await;
    // The first event is gone: a watch that needs it (from just before it) is expired.
    let events = http.watch_lines(&format!("{CMS}?watch=true&resourceVersion={}", rv(&first) - 1), 1, WAIT).await;
    assert_eq!(events[0]["type"], "ERROR", "{events:?}");
    assert_eq!(events[0]["object"]["code"], 410);
}

#[tokio::test]
async fn advance_clock_moves_server_timestamps() {
    let (env, http) = start().await;
    env.handle().advance_clock(Duration::from_secs(3600));
    let a = create_cm(&http, "a", json!({})).await;
    let created: jiff::Timestamp = a["metadata"]["creationTimestamp"].as_str().unwrap().parse().unwrap();
    let expected = jiff::Timestamp::now().as_second() + 3600;
    assert!((created.as_second() - expected).abs() <= 2, "{created}");
}

#[tokio::test]
async fn stop_ends_serving_and_open_watches() {
    let (env, http) = start().await;
    let mut w = http.watch(&format!("{CMS}?watch=true&resourceVersion={}", env.handle().resource_version())).await;
    let handle = env.handle().clone();
    env.stop();
    within("stopped", handle.stopped()).await;
    w.expect_end(WAIT).await;
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<http_body_util::Empty<bytes::Bytes>>();
    let uri: http::Uri = format!("{}/api", env.base_url()).parse().unwrap();
    let res = within("a request to a stopped server", client.get(uri)).await;
    assert!(res.is_err(), "the server must not answer after stop");
}

#[tokio::test]
async fn builder_port_and_kubeconfig_path() {
    let probe = std::net::TcpListener::bind("127.0.0.1:0").expect("probe");
    let port = probe.local_addr().unwrap().port();
    drop(probe);
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("kubeconfig.yaml");
    {
        let env = TestEnv::builder().port(port).kubeconfig(&path).start().await.expect("start");
        assert_eq!(env.base_url(), format!("http://127.0.0.1:{port}"));
        assert_eq!(env.kubeconfig_path(), path.as_path());
        let text = std::fs::read_to_string(&path).expect("kubeconfig written");
        assert!(text.contains(&format!("server: http://127.0.0.1:{port}")), "{text}");
        Http::new(&env).get("/api").await.expect(200);
    }
    assert!(path.exists(), "a chosen kubeconfig path is kept after drop");
}

#[tokio::test]
async fn default_kubeconfig_is_removed_on_drop() {
    let env = TestEnv::start().await.expect("start");
    let path = env.kubeconfig_path().to_path_buf();
    assert!(path.exists());
    drop(env);
    assert!(!path.exists());
}

#[tokio::test]
async fn direct_api_writes_behave_like_http_writes() {
    let (env, http) = start().await;
    let mut w = http.watch(&format!("{CMS}?watch=true&resourceVersion={}", env.handle().resource_version())).await;
    let api = env.handle().api();
    let def = api.registry.get("", "v1", "configmaps").expect("configmaps served");
    let opts = testenv::api::WriteOptions { manager: "sim".into(), ..Default::default() };
    let out = api.create(&def, "default", cm("direct", json!({"k": "v"})), &opts).expect("direct create");
    assert!(out.created);
    let ev = w.next().await;
    assert_eq!(ev["type"], "ADDED");
    assert_eq!(ev["object"]["metadata"]["name"], "direct");
    assert_eq!(http.get(&format!("{CMS}/direct")).await.json()["data"]["k"], "v");
}

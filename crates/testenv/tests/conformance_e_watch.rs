//! Checklist section E: watches, on the wire (framing, start semantics, replay, expiry,
//! bookmarks, streaming lists) and through kube-rs' watcher.

mod common;

use std::time::Duration;

use common::*;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PartialObjectMeta, WatchEvent, WatchParams};
use kube::runtime::watcher::{self, Event};
use serde_json::{Value, json};
use testenv::{RequestMatch, Verb};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Read from a raw socket until `done` says the buffer is complete.
async fn read_until(sock: &mut tokio::net::TcpStream, buf: &mut Vec<u8>, done: impl Fn(&[u8]) -> bool) {
    within("raw socket data", async {
        while !done(buf) {
            let mut chunk = [0u8; 8192];
            let n = sock.read(&mut chunk).await.expect("read");
            assert!(n > 0, "connection closed; got {}", String::from_utf8_lossy(buf));
            buf.extend_from_slice(&chunk[..n]);
        }
    })
    .await;
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Decode as many complete chunks of a chunked body as `body` holds.
fn dechunk(mut body: &[u8]) -> (Vec<Vec<u8>>, bool) {
    let mut chunks = Vec::new();
    loop {
        let Some(eol) = find(body, b"\r\n") else {
            return (chunks, false);
        };
        let size =
            usize::from_str_radix(std::str::from_utf8(&body[..eol]).unwrap().split(';').next().unwrap().trim(), 16)
                .expect("a chunk size");
        if size == 0 {
            return (chunks, true);
        }
        if body.len() < eol + 2 + size + 2 {
            return (chunks, false);
        }
        chunks.push(body[eol + 2..eol + 2 + size].to_vec());
        body = &body[eol + 2 + size + 2..];
    }
}

type Events<K> = futures::stream::BoxStream<'static, Result<Event<K>, watcher::Error>>;

/// The next event of a kube-rs watcher stream, failing the test on error, end or timeout.
async fn next<K>(stream: &mut Events<K>) -> Event<K> {
    within("a watcher event", stream.try_next()).await.expect("watcher stream ok").expect("watcher stream open")
}

fn types(events: &[Value]) -> Vec<String> {
    events.iter().map(|e| e["type"].as_str().unwrap_or("?").to_string()).collect()
}

fn event_names(events: &[Value]) -> Vec<(String, String)> {
    events
        .iter()
        .map(|e| {
            (
                e["type"].as_str().unwrap_or("?").to_string(),
                e["object"]["metadata"]["name"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

#[tokio::test]
async fn e1_watch_headers_are_flushed_before_any_event_and_the_body_is_chunked_json_lines() {
    let (env, http) = start().await;
    let from = env.handle().resource_version();
    let mut sock = tokio::net::TcpStream::connect(env.handle().addr()).await.expect("connect");
    sock.write_all(format!("GET {CMS}?watch=true&resourceVersion={from} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
        .await
        .expect("write");
    let mut buf = Vec::new();
    // Nothing has happened yet, and the head must still arrive.
    read_until(&mut sock, &mut buf, |b| find(b, b"\r\n\r\n").is_some()).await;
    let head_end = find(&buf, b"\r\n\r\n").unwrap();
    let head = String::from_utf8_lossy(&buf[..head_end]).to_lowercase();
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(head.contains("content-type: application/json"), "{head}");
    assert!(head.contains("transfer-encoding: chunked"), "{head}");
    let mut body = buf[head_end + 4..].to_vec();
    create_cm(&http, "a", json!({"k": "v"})).await;
    http.merge(&format!("{CMS}/a"), &json!({"data": {"k": "w"}})).await.expect(200);
    http.delete(&format!("{CMS}/a")).await.expect(200);
    let mut lines: Vec<String> = Vec::new();
    within("three watch lines", async {
        loop {
            let (chunks, _) = dechunk(&body);
            let data: Vec<u8> = chunks.concat();
            let text = String::from_utf8(data).expect("UTF-8");
            if text.matches('\n').count() >= 3 {
                assert!(text.ends_with('\n'), "each event is newline-terminated: {text:?}");
                lines = text.lines().map(str::to_string).collect();
                break;
            }
            let mut chunk = [0u8; 8192];
            let n = sock.read(&mut chunk).await.expect("read");
            assert!(n > 0);
            body.extend_from_slice(&chunk[..n]);
        }
    })
    .await;
    let events: Vec<Value> =
        lines.iter().map(|l| serde_json::from_str(l).expect("one JSON document per line")).collect();
    assert_eq!(types(&events), ["ADDED", "MODIFIED", "DELETED"]);
    for (line, ev) in lines.iter().zip(&events) {
        assert!(!line.starts_with(' ') && !line.contains(": ") && !line.contains("\t"), "not pretty-printed: {line}");
        assert_eq!(ev.as_object().unwrap().len(), 2, "{line}");
        assert_eq!(ev["object"]["kind"], "ConfigMap");
    }
}

#[tokio::test]
async fn e1_watch_parameter_accepts_true_and_1() {
    let (env, http) = start().await;
    let from = env.handle().resource_version();
    for q in ["watch=true", "watch=1"] {
        let w = http.watch(&format!("{CMS}?{q}&resourceVersion={from}")).await;
        assert_eq!(w.status, 200, "{q}");
        assert_eq!(w.content_type(), "application/json");
    }
    let mut w1 = http.watch(&format!("{CMS}?watch=1&resourceVersion={from}")).await;
    create_cm(&http, "a", json!({})).await;
    assert_eq!(w1.next().await["type"], "ADDED");
}

#[tokio::test]
async fn e2_watch_without_resource_version_starts_with_synthetic_added_events() {
    let (_env, http) = start().await;
    create_cm(&http, "a", json!({})).await;
    create_cm(&http, "b", json!({})).await;
    let mut existing = vec!["a".to_string(), "b".to_string()];
    for q in ["", "&resourceVersion=", "&resourceVersion=0"] {
        let mut w = http.watch(&format!("{CMS}?watch=true{q}")).await;
        let mut got = Vec::new();
        for _ in 0..existing.len() {
            let ev = w.next_change().await;
            assert_eq!(ev["type"], "ADDED", "{q}: {ev}");
            got.push(ev["object"]["metadata"]["name"].as_str().unwrap().to_string());
        }
        got.sort();
        assert_eq!(got, existing, "{q}");
        w.expect_quiet().await;
        let c = create_cm(&http, &format!("c{}", q.len()), json!({})).await;
        existing.push(c["metadata"]["name"].as_str().unwrap().to_string());
        existing.sort();
        let ev = w.next_change().await;
        assert_eq!(ev["type"], "ADDED");
        assert_eq!(ev["object"]["metadata"]["name"], c["metadata"]["name"]);
    }
}

#[tokio::test]
async fn e2_watch_from_a_resource_version_replays_every_later_change_once_in_order() {
    let (_env, http) = start().await;
    let a = create_cm(&http, "a", json!({"v": "1"})).await;
    let from = rv(&a);
    http.merge(&format!("{CMS}/a"), &json!({"data": {"v": "2"}})).await.expect(200);
    create_cm(&http, "b", json!({})).await;
    http.post("/api/v1/namespaces", &json!({"metadata": {"name": "elsewhere"}})).await.expect(201);
    http.delete(&format!("{CMS}/a")).await.expect(200);
    let mut w = http.watch(&format!("{CMS}?watch=true&resourceVersion={from}")).await;
    let events = vec![w.next().await, w.next().await, w.next().await];
    assert_eq!(
        event_names(&events),
        [("MODIFIED".into(), "a".into()), ("ADDED".into(), "b".into()), ("DELETED".into(), "a".into())]
    );
    assert_eq!(events[0]["object"]["data"]["v"], "2");
    let rvs: Vec<u64> = events.iter().map(|e| rv(&e["object"])).collect();
    assert!(rvs[0] > from && rvs.windows(2).all(|p| p[0] < p[1]), "{rvs:?}");
    w.expect_quiet().await;
}

#[tokio::test]
async fn e2_idle_watch_from_the_current_resource_version_stays_open_silently() {
    let (env, http) = start().await;
    create_cm(&http, "a", json!({})).await;
    let mut w = http.watch(&format!("{CMS}?watch=true&resourceVersion={}", env.handle().resource_version())).await;
    assert_eq!(w.status, 200);
    w.expect_quiet().await;
    w.expect_quiet().await;
}

#[tokio::test]
async fn e2_single_object_watch_from_rv_0_starts_with_its_synthetic_added() {
    let (_env, http) = start_with_foo().await;
    create_foo(&http, "a", json!({})).await;
    create_foo(&http, "b", json!({})).await;
    // kubectl get foo a -w
    let mut w = http.watch(&format!("{FOOS}?fieldSelector=metadata.name%3Da&resourceVersion=0&watch=true")).await;
    let ev = w.next().await;
    assert_eq!(event_names(&[ev]), [("ADDED".into(), "a".into())]);
    w.expect_quiet().await;
    http.merge(&format!("{FOOS}/b"), &json!({"spec": {"x": "1"}})).await.expect(200);
    http.merge(&format!("{FOOS}/a"), &json!({"spec": {"x": "1"}})).await.expect(200);
    let ev = w.next().await;
    assert_eq!(event_names(&[ev]), [("MODIFIED".into(), "a".into())]);
}

#[tokio::test]
async fn e3_deleted_event_carries_the_last_state_with_the_deletion_resource_version() {
    let (env, http) = start_with_foo().await;
    let mut f = foo("f", json!({"x": "1"}));
    f["metadata"]["finalizers"] = json!(["example.com/hold"]);
    let created = http.post(FOOS, &f).await.json();
    let mut w = http.watch(&format!("{FOOS}?watch=true&resourceVersion={}", rv(&created))).await;
    http.delete(&format!("{FOOS}/f")).await.expect(200);
    let marked = w.next().await;
    assert_eq!(marked["type"], "MODIFIED");
    assert!(marked["object"]["metadata"]["deletionTimestamp"].is_string());
    // Removing the finalizer removes the object: exactly one DELETED, no MODIFIED first.
    http.json_patch(&format!("{FOOS}/f"), &json!([{"op": "remove", "path": "/metadata/finalizers/0"}]))
        .await
        .expect(200);
    let deleted = w.next().await;
    assert_eq!(deleted["type"], "DELETED");
    let obj = &deleted["object"];
    assert_eq!(obj["metadata"]["finalizers"], json!(["example.com/hold"]), "the last stored state: {obj}");
    assert_eq!(obj["metadata"]["deletionTimestamp"], marked["object"]["metadata"]["deletionTimestamp"]);
    assert_eq!(obj["spec"]["x"], "1");
    assert!(rv(obj) > rv(&marked["object"]));
    assert_eq!(rv(obj), env.handle().resource_version());
    w.expect_quiet().await;
    // A plain delete: the object as stored, with the deletion's RV.
    let g = create_foo(&http, "g", json!({"x": "2"})).await;
    let ev = w.next().await;
    assert_eq!(ev["type"], "ADDED");
    http.delete(&format!("{FOOS}/g")).await.expect(200);
    let ev = w.next().await;
    assert_eq!(ev["type"], "DELETED");
    assert_eq!(ev["object"]["spec"]["x"], "2");
    assert_eq!(ev["object"]["metadata"]["uid"], g["metadata"]["uid"]);
    assert!(rv(&ev["object"]) > rv(&g));
    assert_eq!(rv(&ev["object"]), env.handle().resource_version());
}

#[tokio::test]
async fn e4_label_selector_transitions_become_added_and_deleted() {
    let (_env, http) = start().await;
    let mut a = cm("a", json!({"v": "0"}));
    a["metadata"]["labels"] = json!({"app": "y"});
    let created = http.post(CMS, &a).await.json();
    let mut w = http.watch(&format!("{CMS}?watch=true&labelSelector=app%3Dx&resourceVersion={}", rv(&created))).await;
    // Entering the selection: ADDED with the new state.
    let entered = http
        .merge(&format!("{CMS}/a"), &json!({"metadata": {"labels": {"app": "x"}}, "data": {"v": "1"}}))
        .await
        .json();
    let ev = w.next().await;
    assert_eq!(ev["type"], "ADDED");
    assert_eq!(ev["object"]["data"]["v"], "1");
    assert_eq!(rv(&ev["object"]), rv(&entered));
    // Staying in: MODIFIED.
    http.merge(&format!("{CMS}/a"), &json!({"data": {"v": "2"}})).await.expect(200);
    let ev = w.next().await;
    assert_eq!(ev["type"], "MODIFIED");
    // Leaving: DELETED with the previous state and the leaving update's RV.
    let left = http
        .merge(&format!("{CMS}/a"), &json!({"metadata": {"labels": {"app": "z"}}, "data": {"v": "3"}}))
        .await
        .json();
    let ev = w.next().await;
    assert_eq!(ev["type"], "DELETED");
    assert_eq!(ev["object"]["metadata"]["labels"]["app"], "x");
    assert_eq!(ev["object"]["data"]["v"], "2");
    assert_eq!(rv(&ev["object"]), rv(&left));
    // Outside the selection: nothing.
    http.merge(&format!("{CMS}/a"), &json!({"data": {"v": "4"}})).await.expect(200);
    w.expect_quiet().await;
}

#[tokio::test]
async fn e4_field_selector_transitions_of_selectable_fields() {
    let (_env, http) = start_with_foo().await;
    let f = create_foo(&http, "f", json!({"color": "blue"})).await;
    let mut w =
        http.watch(&format!("{FOOS}?watch=true&fieldSelector=spec.color%3Dred&resourceVersion={}", rv(&f))).await;
    http.merge(&format!("{FOOS}/f"), &json!({"spec": {"color": "red"}})).await.expect(200);
    assert_eq!(w.next().await["type"], "ADDED");
    http.merge(&format!("{FOOS}/f"), &json!({"spec": {"color": "green"}})).await.expect(200);
    let ev = w.next().await;
    assert_eq!(ev["type"], "DELETED");
    assert_eq!(ev["object"]["spec"]["color"], "red");
}

#[tokio::test]
async fn e5_watch_from_compacted_rv_gets_410_error_event_in_200_stream() {
    let (env, http) = start().await;
    let a = create_cm(&http, "a", json!({})).await;
    create_cm(&http, "b", json!({})).await;
    // Everything up to `oldest` is compacted; a watch may start at `oldest`, not before.
    let oldest = env.handle().compact();
    let from = rv(&a);
    let mut w = http.watch(&format!("{CMS}?watch=true&resourceVersion={from}")).await;
    assert_eq!(w.status, 200, "never an HTTP 410 for a watch");
    assert_eq!(w.content_type(), "application/json");
    let ev = w.next().await;
    assert_eq!(ev["type"], "ERROR");
    let status = &ev["object"];
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["apiVersion"], "v1");
    assert_eq!(status["metadata"], json!({}));
    assert_eq!(status["status"], "Failure");
    assert_eq!(status["reason"], "Expired");
    assert_eq!(status["code"], 410);
    // The watch cache reports the oldest resourceVersion a watch may still start from.
    assert_eq!(status["message"], format!("too old resource version: {from} ({oldest})"));
    assert!(w.expect_end(WAIT).await.is_empty(), "the stream ends after the ERROR");
}

#[tokio::test]
async fn e5_kube_rs_watcher_relists_after_an_expired_rewatch() {
    let (env, http) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let mut stream = watcher::watcher(api, watcher::Config::default()).boxed();
    assert!(matches!(next(&mut stream).await, Event::Init));
    assert!(matches!(next(&mut stream).await, Event::InitDone));
    create_cm(&http, "a", json!({})).await;
    assert!(matches!(next(&mut stream).await, Event::Apply(c) if c.metadata.name.as_deref() == Some("a")));
    // Cut the watch and hold the re-watch back while history moves on and is compacted, so
    // that the re-watch from the last seen RV is too old.
    env.handle().faults().delay(RequestMatch::new(Verb::Watch, "configmaps"), Duration::from_millis(1500), Some(1));
    assert_eq!(env.handle().close_watches(Some("configmaps")), 1);
    create_cm(&http, "b", json!({})).await;
    env.handle().compact();
    let mut expired = false;
    let mut seen = Vec::new();
    loop {
        match within("the watcher to re-list", stream.next()).await.expect("the watcher stream stays open") {
            Err(watcher::Error::WatchError(s)) if s.code == 410 => expired = true,
            Err(e) => panic!("unexpected watcher error {e:?}"),
            Ok(Event::Init) => seen.push("Init".to_string()),
            Ok(Event::InitApply(c)) => seen.push(format!("InitApply {}", c.metadata.name.unwrap_or_default())),
            Ok(Event::InitDone) => break,
            Ok(other) => panic!("unexpected {other:?} before the re-list"),
        }
    }
    assert!(expired, "the re-watch got an in-stream 410");
    assert_eq!(seen, ["Init", "InitApply a", "InitApply b"]);
    create_cm(&http, "c", json!({})).await;
    assert!(matches!(next(&mut stream).await, Event::Apply(c) if c.metadata.name.as_deref() == Some("c")));
}

#[tokio::test]
async fn e6_rewatch_from_the_last_seen_rv_after_a_clean_close_misses_nothing() {
    let (env, http) = start().await;
    let a = create_cm(&http, "a", json!({})).await;
    let mut w = http.watch(&format!("{CMS}?watch=true&resourceVersion={}", rv(&a))).await;
    let b = create_cm(&http, "b", json!({})).await;
    let last = rv(&w.next().await["object"]);
    assert_eq!(last, rv(&b));
    assert_eq!(env.handle().close_watches(Some("configmaps")), 1);
    assert!(w.expect_end(WAIT).await.is_empty(), "a clean close carries no ERROR");
    // Changes while disconnected.
    create_cm(&http, "c", json!({})).await;
    http.delete(&format!("{CMS}/a")).await.expect(200);
    let mut w = http.watch(&format!("{CMS}?watch=true&resourceVersion={last}")).await;
    let events = vec![w.next().await, w.next().await];
    assert_eq!(event_names(&events), [("ADDED".into(), "c".into()), ("DELETED".into(), "a".into())]);
    w.expect_quiet().await;
}

#[tokio::test]
async fn e6_history_survives_many_unrelated_writes() {
    let (_env, http) = start().await;
    let a = create_cm(&http, "a", json!({})).await;
    for i in 0..300 {
        http.post("/api/v1/namespaces/default/secrets", &json!({"metadata": {"name": format!("s{i}")}}))
            .await
            .expect(201);
    }
    create_cm(&http, "b", json!({})).await;
    let mut w = http.watch(&format!("{CMS}?watch=true&resourceVersion={}", rv(&a))).await;
    let ev = w.next().await;
    assert_eq!(event_names(&[ev]), [("ADDED".into(), "b".into())]);
}

#[tokio::test]
async fn e7_timeout_seconds_ends_the_stream_cleanly() {
    let (env, http) = start().await;
    let started = std::time::Instant::now();
    let mut w = http
        .watch(&format!("{CMS}?watch=true&timeoutSeconds=1&resourceVersion={}", env.handle().resource_version()))
        .await;
    let rest = w.expect_end(Duration::from_secs(5)).await;
    assert!(rest.iter().all(|e| e["type"] == "BOOKMARK"), "no ERROR at timeout: {rest:?}");
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(900) && took < Duration::from_secs(4), "{took:?}");
}

#[tokio::test]
async fn e7_kube_rs_watch_with_timeout_ends_and_raw_watch_without_timeout_stays_open() {
    let (env, http) = start().await;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let rv_now = env.handle().resource_version().to_string();
    let stream = api.watch(&WatchParams::default().timeout(1), &rv_now).await.expect("watch");
    let events: Vec<_> = within("the watch to end", stream.collect::<Vec<_>>()).await;
    assert!(events.iter().all(|e| matches!(e, Ok(WatchEvent::Bookmark(_)))), "{events:?}");
    let mut w = http.watch(&format!("{CMS}?watch=true&resourceVersion={rv_now}")).await;
    w.expect_quiet().await;
}

#[tokio::test]
async fn e8_send_initial_events_streams_the_state_then_an_end_bookmark_then_changes() {
    let (env, http) = start().await;
    create_cm(&http, "a", json!({})).await;
    create_cm(&http, "b", json!({})).await;
    let snapshot = env.handle().resource_version();
    let mut existing = vec!["a".to_string(), "b".to_string()];
    for (i, rv_param) in ["", "&resourceVersion=0", &format!("&resourceVersion={snapshot}")].into_iter().enumerate() {
        let mut w = http
            .watch(&format!("{CMS}?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true{rv_param}"))
            .await;
        assert_eq!(w.status, 200, "{rv_param}");
        let mut got = Vec::new();
        for _ in 0..existing.len() {
            let ev = w.next().await;
            assert_eq!(ev["type"], "ADDED", "{rv_param}: {ev}");
            got.push(ev["object"]["metadata"]["name"].as_str().unwrap().to_string());
        }
        got.sort();
        assert_eq!(got, existing, "{rv_param}");
        let bookmark = w.next().await;
        assert_eq!(bookmark["type"], "BOOKMARK", "{rv_param}: {bookmark}");
        assert_eq!(bookmark["object"]["kind"], "ConfigMap");
        assert_eq!(bookmark["object"]["apiVersion"], "v1");
        assert_eq!(bookmark["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"], "true");
        assert_eq!(rv(&bookmark["object"]), env.handle().resource_version(), "{rv_param}");
        let c = create_cm(&http, &format!("c{i}"), json!({})).await;
        existing.push(c["metadata"]["name"].as_str().unwrap().to_string());
        existing.sort();
        let ev = w.next_change().await;
        assert_eq!(ev["type"], "ADDED");
        assert_eq!(ev["object"]["metadata"]["name"], c["metadata"]["name"]);
    }
}

#[tokio::test]
async fn e8_send_initial_events_with_an_empty_collection_still_ends_with_the_bookmark() {
    let (env, http) = start_with_foo().await;
    let mut w = http
        .watch(&format!(
            "{FOOS}?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"
        ))
        .await;
    let bookmark = w.next().await;
    assert_eq!(bookmark["type"], "BOOKMARK");
    assert_eq!(bookmark["object"]["kind"], "Foo");
    assert_eq!(bookmark["object"]["apiVersion"], "example.com/v1");
    assert_eq!(bookmark["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"], "true");
    assert_eq!(rv(&bookmark["object"]), env.handle().resource_version());
}

#[tokio::test]
async fn e8_watch_list_option_validation_is_422() {
    let (_env, http) = start().await;
    for (q, field) in [
        ("watch=true&sendInitialEvents=true&allowWatchBookmarks=true", "resourceVersionMatch"),
        ("watch=true&resourceVersionMatch=NotOlderThan", "resourceVersionMatch"),
        (
            "watch=true&sendInitialEvents=true&resourceVersionMatch=Exact&allowWatchBookmarks=true",
            "resourceVersionMatch",
        ),
        ("watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan", "allowWatchBookmarks"),
    ] {
        let r = http.get(&format!("{CMS}?{q}")).await;
        let s = assert_reason(&r, 422, "Invalid");
        assert_eq!(s["details"]["kind"], "ListOptions", "{q}");
        assert!(s["details"]["causes"].as_array().unwrap().iter().any(|c| c["field"] == field), "{q}: {s}");
    }
}

#[tokio::test]
async fn e8_kube_rs_streaming_lists_watcher_completes_its_initial_list() {
    let (env, http) = start().await;
    create_cm(&http, "a", json!({})).await;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let mut stream = watcher::watcher(api, watcher::Config::default().streaming_lists()).boxed();
    let mut seen = Vec::new();
    loop {
        match within("streaming list", stream.try_next()).await.expect("ok").expect("open") {
            Event::Init => seen.push("Init".to_string()),
            Event::InitApply(c) => seen.push(format!("InitApply {}", c.metadata.name.unwrap_or_default())),
            Event::InitDone => break,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(seen, ["Init", "InitApply a"]);
    create_cm(&http, "b", json!({})).await;
    match within("live event", stream.try_next()).await.expect("ok").expect("open") {
        Event::Apply(c) => assert_eq!(c.metadata.name.as_deref(), Some("b")),
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test]
async fn e9_bookmarks_carry_kind_api_version_and_a_current_resource_version() {
    let env = testenv::TestEnv::builder().bookmark_interval(Duration::from_millis(200)).start().await.expect("start");
    let http = Http::new(&env);
    install_foo(&http).await;
    let f = create_foo(&http, "f", json!({})).await;
    let mut w = http.watch(&format!("{FOOS}?watch=true&allowWatchBookmarks=true&resourceVersion={}", rv(&f))).await;
    let g = create_foo(&http, "g", json!({})).await;
    let ev = w.next_change().await;
    assert_eq!(ev["type"], "ADDED");
    // Other resources move the global RV; a bookmark may report it.
    create_cm(&http, "unrelated", json!({})).await;
    let bookmark = w.next().await;
    assert_eq!(bookmark["type"], "BOOKMARK", "{bookmark}");
    let obj = &bookmark["object"];
    assert_eq!(obj["kind"], "Foo");
    assert_eq!(obj["apiVersion"], "example.com/v1");
    assert!(rv(obj) >= rv(&g), "{obj}");
    assert!(rv(obj) <= env.handle().resource_version());
    // kube-rs decodes them.
    let api: Api<Foo> = Api::namespaced(env.client(), "default");
    let mut stream = api.watch(&WatchParams::default(), &rv_str(&g)).await.expect("watch").boxed();
    let ev = within("a bookmark", stream.try_next()).await.expect("decodes").expect("open");
    match ev {
        WatchEvent::Bookmark(b) => {
            assert!(b.metadata.resource_version.parse::<u64>().unwrap() >= rv(&g))
        }
        other => panic!("expected a bookmark, got {other:?}"),
    }
}

#[tokio::test]
async fn e9_resuming_from_a_bookmark_resource_version_misses_nothing() {
    let env = testenv::TestEnv::builder().bookmark_interval(Duration::from_millis(100)).start().await.expect("start");
    let http = Http::new(&env);
    let a = create_cm(&http, "a", json!({})).await;
    let mut w = http.watch(&format!("{CMS}?watch=true&allowWatchBookmarks=true&resourceVersion={}", rv(&a))).await;
    http.post("/api/v1/namespaces", &json!({"metadata": {"name": "other"}})).await.expect(201);
    let bookmark = w.next().await;
    assert_eq!(bookmark["type"], "BOOKMARK");
    let resume = rv(&bookmark["object"]);
    drop(w);
    create_cm(&http, "b", json!({})).await;
    let mut w = http.watch(&format!("{CMS}?watch=true&allowWatchBookmarks=true&resourceVersion={resume}")).await;
    let ev = w.next_change().await;
    assert_eq!(event_names(&[ev]), [("ADDED".into(), "b".into())]);
}

#[tokio::test]
async fn e10_e13_watch_from_a_future_resource_version_ends_with_a_504_error_event() {
    let (env, http) = start().await;
    let future = env.handle().resource_version() + 1000;
    let mut w = http.watch(&format!("{CMS}?watch=true&resourceVersion={future}")).await;
    assert_eq!(w.status, 200);
    let ev = w.next().await;
    assert_eq!(ev["type"], "ERROR");
    let s = &ev["object"];
    assert_eq!(s["kind"], "Status");
    assert_eq!(s["code"], 504);
    assert_eq!(s["reason"], "Timeout");
    assert_eq!(s["details"]["causes"][0]["reason"], "ResourceVersionTooLarge");
    assert!(
        s["message"].as_str().unwrap().starts_with(&format!("Too large resource version: {future}, current: ")),
        "{s}"
    );
    assert!(w.expect_end(WAIT).await.is_empty(), "the stream closes after a non-410 ERROR");
}

#[tokio::test]
async fn e10_e13_watch_from_a_resource_version_reached_shortly_after_succeeds() {
    let (env, http) = start().await;
    let next = env.handle().resource_version() + 1;
    let mut w = http.watch(&format!("{CMS}?watch=true&resourceVersion={next}")).await;
    create_cm(&http, "a", json!({})).await;
    create_cm(&http, "b", json!({})).await;
    let ev = w.next().await;
    assert_eq!(event_names(&[ev]), [("ADDED".into(), "b".into())], "changes after the requested RV only");
}

#[tokio::test]
async fn e11_partial_object_metadata_watch_sends_metadata_only_objects() {
    let env = testenv::TestEnv::builder().bookmark_interval(Duration::from_millis(200)).start().await.expect("start");
    let http = Http::new(&env);
    let a = create_cm(&http, "a", json!({"secret": "payload"})).await;
    let accept = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json";
    let mut w = http
        .watch_with(
            &format!("{CMS}?watch=true&allowWatchBookmarks=true&resourceVersion={}", rv(&a)),
            &[("accept", accept)],
        )
        .await;
    assert!(w.content_type().contains("as=PartialObjectMetadata"), "{}", w.content_type());
    create_cm(&http, "b", json!({"secret": "payload"})).await;
    let ev = w.next_change().await;
    assert_eq!(ev["type"], "ADDED");
    assert_eq!(ev["object"]["kind"], "PartialObjectMetadata");
    assert_eq!(ev["object"]["apiVersion"], "meta.k8s.io/v1");
    assert_eq!(ev["object"]["metadata"]["name"], "b");
    assert!(ev["object"].get("data").is_none());
    let bm = w.next().await;
    assert_eq!(bm["type"], "BOOKMARK");
    assert_eq!(bm["object"]["kind"], "PartialObjectMetadata");
    // kube-rs metadata_watcher.
    let api: Api<PartialObjectMeta<ConfigMap>> = Api::namespaced(env.client(), "default");
    let mut stream = watcher::watcher(api, watcher::Config::default()).boxed();
    let mut names = Vec::new();
    loop {
        match within("metadata watcher", stream.try_next()).await.expect("ok").expect("open") {
            Event::InitApply(m) => names.push(m.metadata.name.unwrap_or_default()),
            Event::InitDone => break,
            _ => {}
        }
    }
    names.sort();
    assert_eq!(names, ["a", "b"]);
}

#[tokio::test]
async fn e11_table_watch_sends_column_definitions_on_the_first_event_only() {
    let (env, http) = start().await;
    let accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";
    let mut w = http
        .watch_with(
            &format!("{CMS}?watch=true&resourceVersion={}", env.handle().resource_version()),
            &[("accept", accept)],
        )
        .await;
    create_cm(&http, "a", json!({})).await;
    create_cm(&http, "b", json!({})).await;
    let first = w.next().await;
    let second = w.next().await;
    assert_eq!(first["object"]["kind"], "Table", "{first}");
    assert_eq!(first["object"]["rows"].as_array().map(Vec::len), Some(1));
    assert!(first["object"]["columnDefinitions"].as_array().is_some_and(|c| !c.is_empty()), "{first}");
    assert_eq!(second["object"]["kind"], "Table");
    assert!(second["object"]["columnDefinitions"].as_array().is_none_or(Vec::is_empty), "{second}");
    assert_eq!(second["object"]["rows"][0]["object"]["metadata"]["name"], "b");
}

#[tokio::test]
async fn e12_deleting_the_crd_closes_watches_of_its_resources() {
    let (_env, http) = start_with_foo().await;
    let f = create_foo(&http, "f", json!({})).await;
    let mut w = http.watch(&format!("{FOOS}?watch=true&resourceVersion={}", rv(&f))).await;
    http.delete(&format!("{CRDS}/foos.example.com")).await.expect(200);
    // The custom resources are deleted first (J9), then the watch ends.
    let rest = w.expect_end(WAIT).await;
    assert!(rest.iter().all(|e| e["type"] == "DELETED" || e["type"] == "MODIFIED"), "{rest:?}");
}

#[tokio::test]
async fn e12_unserving_a_version_closes_its_watches() {
    let (_env, http) = start().await;
    install_crd(&http, &multi_version_crd()).await;
    let mut w1 = http.watch("/apis/example.com/v1beta1/namespaces/default/widgets?watch=true").await;
    let mut w2 = http.watch("/apis/example.com/v1/namespaces/default/widgets?watch=true").await;
    assert_eq!(w1.status, 200);
    let mut crd = http.get(&format!("{CRDS}/widgets.example.com")).await.json();
    crd["spec"]["versions"][1]["served"] = json!(false);
    http.put(&format!("{CRDS}/widgets.example.com"), &crd).await.expect(200);
    assert!(w1.expect_end(WAIT).await.is_empty());
    w2.expect_quiet().await;
}

fn multi_version_crd() -> Value {
    let schema = json!({"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object", "properties": {"x": {"type": "string"}}}}}});
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [
                {"name": "v1", "served": true, "storage": true, "schema": schema},
                {"name": "v1beta1", "served": true, "storage": false, "schema": schema}
            ]
        }
    })
}

#[tokio::test]
async fn e14_legacy_single_object_watch_and_watch_prefix() {
    let (env, http) = start().await;
    let from = env.handle().resource_version();
    let mut single = http.watch(&format!("{CMS}/a?watch=true&resourceVersion={from}")).await;
    let mut prefixed = http.watch(&format!("/api/v1/watch/namespaces/default/configmaps?resourceVersion={from}")).await;
    let mut prefixed_all = http.watch(&format!("/api/v1/watch/configmaps?resourceVersion={from}")).await;
    assert_eq!((single.status, prefixed.status, prefixed_all.status), (200, 200, 200));
    create_cm(&http, "b", json!({})).await;
    create_cm(&http, "a", json!({})).await;
    assert_eq!(event_names(&[single.next().await]), [("ADDED".into(), "a".into())]);
    assert_eq!(
        event_names(&[prefixed.next().await, prefixed.next().await]),
        [("ADDED".into(), "b".into()), ("ADDED".into(), "a".into())]
    );
    assert_eq!(prefixed_all.next().await["object"]["metadata"]["name"], "b");
}

#[tokio::test]
async fn e2_kube_rs_watcher_lists_then_follows_changes() {
    let (env, http) = start().await;
    create_cm(&http, "a", json!({})).await;
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let mut stream = watcher::watcher(api, watcher::Config::default()).boxed();
    assert!(matches!(next(&mut stream).await, Event::Init));
    assert!(matches!(next(&mut stream).await, Event::InitApply(c) if c.metadata.name.as_deref() == Some("a")));
    assert!(matches!(next(&mut stream).await, Event::InitDone));
    create_cm(&http, "b", json!({})).await;
    assert!(matches!(next(&mut stream).await, Event::Apply(c) if c.metadata.name.as_deref() == Some("b")));
    http.delete(&format!("{CMS}/a")).await.expect(200);
    assert!(matches!(next(&mut stream).await, Event::Delete(c) if c.metadata.name.as_deref() == Some("a")));
    // A server-side close is followed by a transparent re-watch.
    env.handle().close_watches(None);
    create_cm(&http, "c", json!({})).await;
    assert!(matches!(next(&mut stream).await, Event::Apply(c) if c.metadata.name.as_deref() == Some("c")));
}

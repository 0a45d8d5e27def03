//! KEP-5866 server-side sharded list and watch: `shardSelector` with `shardRange()` terms over
//! the 64-bit FNV-1a hash of `object.metadata.uid` or `object.metadata.namespace`, applied to
//! lists (echoed in `metadata.shardInfo`) and watch streams; ignored, as by an older server, when
//! the feature gate is off.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::*;
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::WatchEvent;
use serde_json::{Value, json};
use testenv::TestEnv;
use testenv::shard::fnv1a64;

const ALL_CMS: &str = "/api/v1/configmaps";

fn quarter(field: &str, i: u128) -> String {
    format!("shardRange(object.metadata.{field}, '{:#x}', '{:#x}')", i << 62, (i + 1) << 62)
}

fn encoded(selector: &str) -> String {
    form_urlencoded::byte_serialize(selector.as_bytes()).collect()
}

async fn create_in(http: &Http, namespace: &str, name: &str) {
    if http.get(&format!("/api/v1/namespaces/{namespace}")).await.status == 404 {
        http.post("/api/v1/namespaces", &json!({"metadata": {"name": namespace}})).await.expect(201);
    }
    http.post(&format!("/api/v1/namespaces/{namespace}/configmaps"), &json!({"metadata": {"name": name}}))
        .await
        .expect(201);
}

fn names(list: &Value) -> BTreeSet<String> {
    list["items"]
        .as_array()
        .map(|items| items.iter().filter_map(|i| i["metadata"]["name"].as_str().map(str::to_string)).collect())
        .unwrap_or_default()
}

#[tokio::test]
async fn uid_quarters_partition_a_list_and_echo_their_selector() {
    let env = TestEnv::builder().sharded_list_and_watch(true).start().await.expect("testenv starts");
    let http = Http::new(&env);
    for i in 0..40 {
        create_in(&http, "default", &format!("cm-{i:02}")).await;
    }
    let mut seen = BTreeSet::new();
    let mut sizes = Vec::new();
    for i in 0..4 {
        let selector = quarter("uid", i);
        let list = http.get(&format!("{ALL_CMS}?shardSelector={}", encoded(&selector))).await.expect(200).json();
        assert_eq!(list["metadata"]["shardInfo"]["selector"], json!(selector), "the selector is echoed");
        for item in list["items"].as_array().into_iter().flatten() {
            let uid = item["metadata"]["uid"].as_str().unwrap_or_default();
            let hash = u128::from(fnv1a64(uid.as_bytes()));
            assert!((i << 62..(i + 1) << 62).contains(&hash), "{uid} hashes outside quarter {i}");
            assert!(seen.insert(uid.to_string()), "{uid} is in two quarters");
        }
        sizes.push(names(&list).len());
    }
    assert_eq!(seen.len(), 40, "every object is in one quarter: {sizes:?}");
    // Two ranges joined by || select their union.
    let halves = format!("{} || {}", quarter("uid", 0), quarter("uid", 1));
    let list = http.get(&format!("{ALL_CMS}?shardSelector={}", encoded(&halves))).await.expect(200).json();
    assert_eq!(names(&list).len(), sizes[0] + sizes[1]);
    // A plain list has no shardInfo.
    let plain = http.get(ALL_CMS).await.expect(200).json();
    assert!(plain["metadata"].get("shardInfo").is_none());
}

#[tokio::test]
async fn pages_of_a_sharded_list_count_only_selected_objects() {
    let env = TestEnv::builder().sharded_list_and_watch(true).start().await.expect("testenv starts");
    let http = Http::new(&env);
    for i in 0..40 {
        create_in(&http, "default", &format!("cm-{i:02}")).await;
    }
    let selector = encoded(&quarter("uid", 2));
    let whole = names(&http.get(&format!("{ALL_CMS}?shardSelector={selector}")).await.expect(200).json());
    let mut paged = BTreeSet::new();
    let mut token = String::new();
    loop {
        let cont = if token.is_empty() { String::new() } else { format!("&continue={token}") };
        let page = http.get(&format!("{ALL_CMS}?shardSelector={selector}&limit=3{cont}")).await.expect(200).json();
        assert!(names(&page).len() <= 3);
        paged.extend(names(&page));
        match page["metadata"]["continue"].as_str() {
            Some(t) if !t.is_empty() => token = t.to_string(),
            _ => break,
        }
    }
    assert_eq!(paged, whole);
}

#[tokio::test]
async fn a_namespace_sharded_watch_carries_only_its_namespaces() {
    let env = TestEnv::builder().sharded_list_and_watch(true).start().await.expect("testenv starts");
    let http = Http::new(&env);
    let namespaces: Vec<String> = (0..12).map(|i| format!("cluster-{i}")).collect();
    let lower_half = |ns: &str| fnv1a64(ns.as_bytes()) < 1 << 63;
    assert!(namespaces.iter().any(|n| lower_half(n)) && namespaces.iter().any(|n| !lower_half(n)));
    for ns in &namespaces {
        create_in(&http, ns, "before").await;
    }
    let selector = "shardRange(object.metadata.namespace, '0x0', '0x8000000000000000')";
    let uri = format!("{ALL_CMS}?watch=true&shardSelector={}", encoded(selector));
    let request = http::Request::get(uri).body(Vec::new()).expect("a request");
    let mut events = Box::pin(env.client().request_events::<ConfigMap>(request).await.expect("the watch starts"));
    for ns in &namespaces {
        create_in(&http, ns, "after").await;
    }
    let expected: BTreeSet<(String, String)> = namespaces
        .iter()
        .filter(|n| lower_half(n))
        .flat_map(|n| [(n.clone(), "before".to_string()), (n.clone(), "after".to_string())])
        .collect();
    let mut received = BTreeSet::new();
    while received.len() < expected.len() {
        let event = tokio::time::timeout(Duration::from_secs(10), events.next())
            .await
            .expect("an event within 10 s")
            .expect("the stream goes on")
            .expect("a watch event");
        if let WatchEvent::Added(cm) = event {
            let key = (cm.metadata.namespace.unwrap_or_default(), cm.metadata.name.unwrap_or_default());
            assert!(lower_half(&key.0), "{key:?} is outside the watched range");
            received.insert(key);
        }
    }
    assert_eq!(received, expected);
    // Nothing else arrives: a change outside the range is not sent.
    let outside = namespaces.iter().find(|n| !lower_half(n)).cloned().unwrap_or_default();
    create_in(&http, &outside, "later").await;
    let inside = namespaces.iter().find(|n| lower_half(n)).cloned().unwrap_or_default();
    create_in(&http, &inside, "later").await;
    let next = tokio::time::timeout(Duration::from_secs(10), events.next()).await.expect("an event");
    match next {
        Some(Ok(WatchEvent::Added(cm))) => assert_eq!(cm.metadata.namespace.as_deref(), Some(inside.as_str())),
        other => panic!("expected the object in {inside}, got {other:?}"),
    }
}

#[tokio::test]
async fn malformed_selectors_are_bad_requests() {
    let env = TestEnv::builder().sharded_list_and_watch(true).start().await.expect("testenv starts");
    let http = Http::new(&env);
    for bad in [
        "shardRange(object.metadata.name, '0x0', '0x8000000000000000')",
        "shardRange(object.metadata.uid, '0x8', '0x1')",
        "object.metadata.uid in ('a')",
    ] {
        let resp = http.get(&format!("{ALL_CMS}?shardSelector={}", encoded(bad))).await;
        let status = assert_reason(&resp, 400, "BadRequest");
        assert!(status["message"].as_str().unwrap_or_default().contains("invalid shardSelector"), "{status}");
        let resp = http.get(&format!("{ALL_CMS}?watch=true&shardSelector={}", encoded(bad))).await;
        assert_eq!(resp.status, 400, "watch with {bad}");
    }
}

#[tokio::test]
async fn with_the_feature_off_the_selector_is_ignored_like_an_older_server_does() {
    let env = TestEnv::start().await.expect("testenv starts");
    let http = Http::new(&env);
    for i in 0..8 {
        create_in(&http, "default", &format!("cm-{i}")).await;
    }
    let selector = encoded(&quarter("uid", 0));
    let list = http.get(&format!("{ALL_CMS}?shardSelector={selector}")).await.expect(200).json();
    assert_eq!(names(&list).len(), 8, "the full collection");
    assert!(list["metadata"].get("shardInfo").is_none(), "no echo: the client can tell it was not sharded");
    let bad = encoded("not a selector");
    http.get(&format!("{ALL_CMS}?shardSelector={bad}")).await.expect(200);
}

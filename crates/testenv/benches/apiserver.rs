//! Benchmark of the API server (`make bench`): 10,000 ConfigMaps created over HTTP by 10
//! concurrent clients while 10 watchers follow them.
//!
//! The server runs as its own process (`testenv serve`), so the RSS reported is the server's
//! alone. Each ConfigMap carries the time its create was sent; every watcher measures, for
//! every event, the time from that send to the event's arrival.
//!
//! Reported: writes per second, watch event latency p50/p99 (over all watchers), the server's
//! resident and peak resident memory, the size of the stored JSON, and the memory target
//! (2 × stored JSON + 50 MiB).
//!
//! With `--auth` (`cargo bench -p testenv --bench apiserver -- --auth`) the server runs with
//! authentication and RBAC, and writers and watchers present a ServiceAccount token from
//! TokenRequest that a RoleBinding authorizes, so every request is authenticated and
//! authorized as in a production cluster.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};
use support::{post_as, start_server, status_kib};

const OBJECTS: usize = 10_000;
const WRITERS: usize = 10;
const WATCHERS: usize = 10;
const PAYLOAD: usize = 512;
const ADMIN_TOKEN: &str = "bench-admin-token";

/// As the administrator: a ServiceAccount, a Role to write and watch ConfigMaps in `bench`
/// and its binding; then the account's token from TokenRequest.
async fn bench_token(client: &Client<HttpConnector, Full<Bytes>>, base: &str) -> String {
    let admin = Some(ADMIN_TOKEN);
    let ns = format!("{base}/api/v1/namespaces/bench");
    let rbac = format!("{base}/apis/rbac.authorization.k8s.io/v1/namespaces/bench");
    post_as(client, &format!("{ns}/serviceaccounts"), &json!({"metadata": {"name": "writer"}}), admin).await;
    let role = json!({"metadata": {"name": "writer"}, "rules": [
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create", "list", "watch"]}]});
    post_as(client, &format!("{rbac}/roles"), &role, admin).await;
    let binding = json!({"metadata": {"name": "writer"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "writer"},
        "subjects": [{"kind": "ServiceAccount", "name": "writer"}]});
    post_as(client, &format!("{rbac}/rolebindings"), &binding, admin).await;
    let tr = post_as(client, &format!("{ns}/serviceaccounts/writer/token"), &json!({}), admin).await;
    tr["status"]["token"].as_str().expect("a token").to_string()
}

fn now_nanos() -> u128 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0)
}

/// Resident and peak resident memory of a process, in KiB.
fn rss_kib(pid: u32) -> (u64, u64) {
    (status_kib(pid, "VmRSS:"), status_kib(pid, "VmHWM:"))
}

fn percentile(sorted: &[u128], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)] as f64 / 1e6
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let auth = std::env::args().any(|a| a == "--auth");
    let server = if auth { start_server(&["--rbac", "--admin-token", ADMIN_TOKEN]) } else { start_server(&[]) };
    let base = server.url.clone();
    let client: Client<HttpConnector, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let ns_path = format!("{base}/api/v1/namespaces/bench/configmaps");
    let admin = auth.then_some(ADMIN_TOKEN);
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bench"}});
    post_as(&client, &format!("{base}/api/v1/namespaces"), &ns, admin).await;
    let token: Option<Arc<str>> = if auth { Some(bench_token(&client, &base).await.into()) } else { None };

    // Watchers: each counts events and records latencies until it has seen every object.
    let ready = Arc::new(tokio::sync::Barrier::new(WATCHERS + 1));
    let mut watchers = Vec::new();
    for _ in 0..WATCHERS {
        let url = format!("{ns_path}?watch=true&resourceVersion=1&timeoutSeconds=600");
        let ready = ready.clone();
        let token = token.clone();
        watchers.push(tokio::spawn(async move {
            let client: Client<HttpConnector, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
            let mut req = http::Request::get(url);
            if let Some(t) = &token {
                req = req.header("authorization", format!("Bearer {t}"));
            }
            let resp = client.request(req.body(Full::new(Bytes::new())).expect("request")).await.expect("watch");
            assert!(resp.status().is_success(), "watch: {}", resp.status());
            ready.wait().await;
            let mut body = resp.into_body();
            let mut buf = Vec::<u8>::new();
            let mut latencies = Vec::with_capacity(OBJECTS);
            while latencies.len() < OBJECTS {
                let Some(frame) = body.frame().await else { break };
                let Ok(frame) = frame else { break };
                let Ok(data) = frame.into_data() else { continue };
                let arrived = now_nanos();
                buf.extend_from_slice(&data);
                while let Some(pos) = buf.iter().position(|b| *b == b'\n') {
                    let line: Vec<u8> = buf.drain(..=pos).collect();
                    let Ok(event) = serde_json::from_slice::<Value>(&line) else { continue };
                    if event["type"] != "ADDED" {
                        continue;
                    }
                    if let Some(sent) = event["object"]["data"]["sent"].as_str().and_then(|s| s.parse::<u128>().ok()) {
                        latencies.push(arrived.saturating_sub(sent));
                    }
                }
            }
            latencies
        }));
    }
    ready.wait().await;

    let payload = "x".repeat(PAYLOAD);
    let started = Instant::now();
    let mut writers = Vec::new();
    for w in 0..WRITERS {
        let client = client.clone();
        let path = ns_path.clone();
        let payload = payload.clone();
        let token = token.clone();
        writers.push(tokio::spawn(async move {
            for i in (w..OBJECTS).step_by(WRITERS) {
                let body = json!({
                    "apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": format!("cm-{i:05}"), "labels": {"bench": "apiserver", "writer": w.to_string()}},
                    "data": {"payload": payload, "sent": now_nanos().to_string()},
                });
                post_as(&client, &path, &body, token.as_deref()).await;
            }
        }));
    }
    for w in writers {
        w.await.expect("writer");
    }
    let write_secs = started.elapsed().as_secs_f64();
    let mut all = Vec::new();
    for w in watchers {
        let l = tokio::time::timeout(Duration::from_secs(120), w).await.expect("watchers finish").expect("watcher");
        assert_eq!(l.len(), OBJECTS, "every watcher sees every object");
        all.extend(l);
    }
    all.sort_unstable();
    let (rss, hwm) = rss_kib(server.child.id());
    let mut list_req = http::Request::get(ns_path.as_str());
    if let Some(t) = admin {
        list_req = list_req.header("authorization", format!("Bearer {t}"));
    }
    let list = client
        .request(list_req.body(Full::new(Bytes::new())).expect("request"))
        .await
        .expect("list")
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    let stored = list.len() as u64;
    let target_kib = 2 * stored / 1024 + 50 * 1024;

    let mode = if auth { ", authentication + RBAC" } else { "" };
    println!(
        "testenv API server benchmark ({OBJECTS} ConfigMaps of ~{PAYLOAD} B, {WRITERS} writers, {WATCHERS} watchers{mode})"
    );
    println!("  writes/s                  {:>10.0}   (target >= 5000)", OBJECTS as f64 / write_secs);
    println!("  watch latency p50         {:>10.2} ms", percentile(&all, 0.50));
    println!("  watch latency p99         {:>10.2} ms   (target <= 50)", percentile(&all, 0.99));
    println!("  watch latency max         {:>10.2} ms", percentile(&all, 1.0));
    println!("  stored JSON               {:>10.1} MiB", stored as f64 / 1048576.0);
    println!(
        "  server RSS                {:>10.1} MiB   (target <= {:.1} MiB = 2 x stored + 50)",
        rss as f64 / 1024.0,
        target_kib as f64 / 1024.0
    );
    println!("  server peak RSS           {:>10.1} MiB", hwm as f64 / 1024.0);
}

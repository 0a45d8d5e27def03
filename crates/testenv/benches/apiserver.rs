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

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};
use support::{post, start_server, status_kib};

const OBJECTS: usize = 10_000;
const WRITERS: usize = 10;
const WATCHERS: usize = 10;
const PAYLOAD: usize = 512;

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
    let server = start_server(&[]);
    let base = server.url.clone();
    let client: Client<HttpConnector, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let ns_path = format!("{base}/api/v1/namespaces/bench/configmaps");
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bench"}});
    post(&client, &format!("{base}/api/v1/namespaces"), &ns).await;

    // Watchers: each counts events and records latencies until it has seen every object.
    let ready = Arc::new(tokio::sync::Barrier::new(WATCHERS + 1));
    let mut watchers = Vec::new();
    for _ in 0..WATCHERS {
        let url = format!("{ns_path}?watch=true&resourceVersion=1&timeoutSeconds=600");
        let ready = ready.clone();
        watchers.push(tokio::spawn(async move {
            let client: Client<HttpConnector, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
            let resp = client.get(url.parse().expect("url")).await.expect("watch");
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
        writers.push(tokio::spawn(async move {
            for i in (w..OBJECTS).step_by(WRITERS) {
                let body = json!({
                    "apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": format!("cm-{i:05}"), "labels": {"bench": "apiserver", "writer": w.to_string()}},
                    "data": {"payload": payload, "sent": now_nanos().to_string()},
                });
                post(&client, &path, &body).await;
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
    let list = client
        .get(ns_path.parse().expect("url"))
        .await
        .expect("list")
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    let stored = list.len() as u64;
    let target_kib = 2 * stored / 1024 + 50 * 1024;

    println!(
        "testenv API server benchmark ({OBJECTS} ConfigMaps of ~{PAYLOAD} B, {WRITERS} writers, {WATCHERS} watchers)"
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

//! Benchmark of the cluster simulation (`make bench`): 1,000 Deployments of one replica each
//! on 100 simulated nodes, created over HTTP by 10 concurrent clients.
//!
//! The server runs as its own process (`testenv serve --nodes 100`), so the resource figures
//! are the server's alone. A watch on the Deployments records when each reports its replica
//! Ready and available.
//!
//! Reported: the time to create the Deployments, the time until all are Ready (from the first
//! create), the server's CPU time and the writes (resourceVersions) until then, the server's
//! resident and peak memory, and the idle cost afterwards: writes and CPU time per second while
//! nothing changes (Lease renewals only).

mod support;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use http_body_util::BodyExt;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};
use support::{HttpClient, post, start_server, status_kib};

const DEPLOYMENTS: usize = 1_000;
const NODES: usize = 100;
const WRITERS: usize = 10;
const IDLE: Duration = Duration::from_secs(10);
/// `USER_HZ`, the unit of `/proc/<pid>/stat` CPU times on Linux.
const TICKS_PER_SECOND: f64 = 100.0;

/// User plus system CPU time of a process, in clock ticks (`/proc/<pid>/stat` fields 14, 15).
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The command name may contain spaces; fields are counted after its closing parenthesis.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |i: usize| fields.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    field(11) + field(12)
}

async fn get_json(client: &HttpClient, url: &str) -> Value {
    let resp = client.get(url.parse().expect("url")).await.expect("GET");
    let body = resp.into_body().collect().await.expect("body").to_bytes();
    serde_json::from_slice(&body).expect("JSON")
}

async fn resource_version(client: &HttpClient, base: &str) -> u64 {
    let list = get_json(client, &format!("{base}/api/v1/namespaces?limit=1")).await;
    list["metadata"]["resourceVersion"].as_str().and_then(|s| s.parse().ok()).expect("a resourceVersion")
}

fn deployment(i: usize) -> Value {
    let name = format!("app-{i:04}");
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "app", "image": "nginx:1.27", "ports": [{"containerPort": 8080}]}]},
            },
        },
    })
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let server = start_server(&["--nodes", &NODES.to_string()]);
    let base = server.url.clone();
    let pid = server.child.id();
    let client: HttpClient = Client::builder(TokioExecutor::new()).build_http();
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bench"}});
    post(&client, &format!("{base}/api/v1/namespaces"), &ns).await;
    let deployments = format!("{base}/apis/apps/v1/namespaces/bench/deployments");

    // Follow the Deployments until each reports its replica Ready and available.
    let rv = resource_version(&client, &base).await;
    let watch_url = format!("{deployments}?watch=true&resourceVersion={rv}&timeoutSeconds=900");
    let resp = client.get(watch_url.parse().expect("url")).await.expect("watch");
    let watcher = tokio::spawn(async move {
        let mut body = resp.into_body();
        let mut buf = Vec::<u8>::new();
        let mut ready = HashSet::new();
        while ready.len() < DEPLOYMENTS {
            let Some(Ok(frame)) = body.frame().await else { break };
            let Ok(data) = frame.into_data() else { continue };
            buf.extend_from_slice(&data);
            while let Some(pos) = buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = buf.drain(..=pos).collect();
                let Ok(event) = serde_json::from_slice::<Value>(&line) else { continue };
                let status = &event["object"]["status"];
                if status["readyReplicas"] == 1
                    && status["availableReplicas"] == 1
                    && let Some(name) = event["object"]["metadata"]["name"].as_str()
                {
                    ready.insert(name.to_string());
                }
            }
        }
        (ready.len(), Instant::now())
    });

    let cpu_start = cpu_ticks(pid);
    let started = Instant::now();
    let mut writers = Vec::new();
    for w in 0..WRITERS {
        let client = client.clone();
        let url = deployments.clone();
        writers.push(tokio::spawn(async move {
            for i in (w..DEPLOYMENTS).step_by(WRITERS) {
                post(&client, &url, &deployment(i)).await;
            }
        }));
    }
    for w in writers {
        w.await.expect("writer");
    }
    let created = started.elapsed();
    let (ready, at) =
        tokio::time::timeout(Duration::from_secs(900), watcher).await.expect("all Ready in time").expect("watcher");
    assert_eq!(ready, DEPLOYMENTS, "every Deployment becomes Ready");
    let all_ready = at.duration_since(started);
    let cpu_busy = (cpu_ticks(pid) - cpu_start) as f64 / TICKS_PER_SECOND;
    let writes = resource_version(&client, &base).await - rv;
    let rss = status_kib(pid, "VmRSS:");
    let hwm = status_kib(pid, "VmHWM:");

    let pods = get_json(&client, &format!("{base}/api/v1/namespaces/bench/pods")).await;
    let items = pods["items"].as_array().cloned().unwrap_or_default();
    let nodes: HashSet<&str> = items.iter().filter_map(|p| p["spec"]["nodeName"].as_str()).collect();
    let ips: HashSet<&str> = items.iter().filter_map(|p| p["status"]["podIP"].as_str()).collect();
    assert_eq!(items.len(), DEPLOYMENTS);
    assert_eq!(ips.len(), DEPLOYMENTS, "pod IPs are unique");

    // Idle: nothing changes, only Leases are renewed.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (rv0, cpu0) = (resource_version(&client, &base).await, cpu_ticks(pid));
    tokio::time::sleep(IDLE).await;
    let (rv1, cpu1) = (resource_version(&client, &base).await, cpu_ticks(pid));
    let idle_writes = (rv1 - rv0) as f64 / IDLE.as_secs_f64();
    let idle_cpu = (cpu1 - cpu0) as f64 / TICKS_PER_SECOND / IDLE.as_secs_f64() * 100.0;

    println!(
        "testenv cluster simulation benchmark ({DEPLOYMENTS} Deployments x 1 replica, {NODES} nodes, {WRITERS} writers)"
    );
    println!(
        "  create all Deployments    {:>10.2} s   ({:.0} creates/s)",
        created.as_secs_f64(),
        DEPLOYMENTS as f64 / created.as_secs_f64()
    );
    println!("  all Ready after           {:>10.2} s   (from the first create)", all_ready.as_secs_f64());
    println!("  server CPU until Ready    {:>10.2} s", cpu_busy);
    println!(
        "  writes until Ready        {:>10}     ({:.1} per Deployment, its creation included)",
        writes,
        writes as f64 / DEPLOYMENTS as f64
    );
    println!("  nodes used                {:>10}", nodes.len());
    println!("  server RSS                {:>10.1} MiB", rss as f64 / 1024.0);
    println!("  server peak RSS           {:>10.1} MiB", hwm as f64 / 1024.0);
    println!("  idle writes               {:>10.1} /s   (Lease renewals: {NODES} nodes every 10 s)", idle_writes);
    println!("  idle CPU                  {:>10.1} %   of one core", idle_cpu);
}

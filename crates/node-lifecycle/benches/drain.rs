//! Benchmark of the drain executor (`make bench`, `cargo bench -p node-lifecycle`): 100
//! workload-cluster nodes with 20 pods each (20 Deployments of 100 replicas, each under a
//! PodDisruptionBudget of maxUnavailable 10 %), all drained at once, in simulation.
//!
//! The parent process runs both testenvs: the management cluster (DrainerConfigs, the
//! kubeconfig Secret) and the simulated workload cluster (100 nodes to drain, then 25 spare
//! nodes that take the replacement pods). The executor runs in a child process (this binary
//! re-executed with `NODE_LIFECYCLE_BENCH_MC=<url>`), so its peak RSS is its own.
//!
//! Printed:
//! * the time from creating the 100 DrainerConfigs until all are `Drained`;
//! * the executor's peak RSS (VmHWM of the child);
//! * API requests per evicted pod beyond the eviction itself: every request the executor made
//!   to either cluster (the server's counters, less the benchmark's own), minus the accepted
//!   evictions, divided by the evicted pods; refused evictions (429) are shown separately and
//!   counted as extra requests;
//! * the time from a DrainerConfig's creation to its node's cordon (seen by a watch on the
//!   workload cluster's nodes): the executor's reaction, in the step that sends the node's first
//!   evictions;
//! * the time from a DrainerConfig's creation to its node's first accepted eviction (seen by a
//!   watch on the workload cluster's pods), p50 and p99; a disruption budget that refuses
//!   delays it.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use apis::drainer::DrainerConfig;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams, PostParams};
use kube::runtime::watcher;
use kube::{CustomResourceExt, ResourceExt};
use node_lifecycle::drain::plan::Backoff;
use node_lifecycle::drain::{Drainer, DrainerSettings};
use parking_lot::Mutex;
use prometheus_client::registry::Registry;
use testenv::{NodeSpec, SimConfig, TestEnv, Verb};
use tokio::process::Command;
use tokio_util::sync::CancellationToken;
use workload_sim::{Machine, Workload, WorkloadCluster};

const MC_ENV: &str = "NODE_LIFECYCLE_BENCH_MC";
const NODES_ENV: &str = "NODE_LIFECYCLE_BENCH_NODES";
const OPERATOR: &str = "bench-operator";
const CLUSTER: &str = "bench1";
const DEPLOYMENTS: usize = 20;
const SPARE_NODES: usize = 25;

fn main() {
    // `cargo bench` passes `--bench`; other arguments (filters) are ignored.
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("a runtime");
    let result = match std::env::var(MC_ENV) {
        Ok(url) => runtime.block_on(operator(url)),
        Err(_) => runtime.block_on(parent()),
    };
    if let Err(e) = result {
        eprintln!("node-lifecycle bench failed: {e:#}");
        std::process::exit(1);
    }
}

fn settings() -> DrainerSettings {
    let mut s = DrainerSettings::new(OPERATOR, semver::Version::new(1, 0, 0));
    s.poll = Duration::from_millis(500);
    s.backoff = Backoff { initial: Duration::from_millis(500), max: Duration::from_secs(5) };
    s.concurrency = 16;
    s
}

/// The child: the drain executor alone, until its stdin closes.
async fn operator(url: String) -> anyhow::Result<()> {
    // Warnings (failed reconciles, refused writes) go to stderr, shown with the figures.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .try_init();
    let client = kube::Client::try_from(kube::Config::new(url.parse()?))?;
    let mut registry = Registry::default();
    let drainer = Drainer::builder(client, settings(), &mut registry).build()?;
    let shutdown = CancellationToken::new();
    let stop = shutdown.clone();
    std::thread::spawn(move || {
        // Until the parent closes stdin.
        for line in std::io::stdin().lines() {
            if line.is_err() {
                break;
            }
        }
        stop.cancel();
    });
    drainer.run(shutdown).await;
    Ok(())
}

fn vm_hwm_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

async fn parent() -> anyhow::Result<()> {
    let nodes: usize = std::env::var(NODES_ENV).ok().and_then(|v| v.parse().ok()).unwrap_or(100);
    let replicas = nodes as i32;
    println!(
        "node-lifecycle drain benchmark: {nodes} nodes x {DEPLOYMENTS} pods, PDB maxUnavailable 10%, all drained at once"
    );

    // The workload cluster: the nodes to drain, the workloads, then the spare nodes.
    let sim = SimConfig::default().lease_renew_interval(Duration::from_secs(60));
    let wc = WorkloadCluster::start_with(sim).await?;
    let names: Vec<String> = (1..=nodes).map(|i| format!("wc-node-{i:03}")).collect();
    for name in &names {
        wc.add_machine(&Machine::new(name)).await?;
    }
    let setup = Instant::now();
    for d in 0..DEPLOYMENTS {
        let w = Workload::new("apps", format!("app-{d:02}"), replicas).max_unavailable("10%").grace_seconds(0);
        wc.deploy(&w).await?;
    }
    for d in 0..DEPLOYMENTS {
        wc.wait_ready("apps", &format!("app-{d:02}"), nodes).await?;
    }
    for i in 1..=SPARE_NODES {
        wc.sim().add_node(NodeSpec::new(format!("spare-{i:02}")).capacity("64", "256Gi", 200))?;
    }
    wc.sim().wait_idle().await?;
    println!("  setup: {} pods Ready in {:.1} s", nodes * DEPLOYMENTS, setup.elapsed().as_secs_f64());

    // The management cluster.
    let mc = TestEnv::start().await?;
    let client = mc.client();
    Api::<CustomResourceDefinition>::all(client.clone()).create(&PostParams::default(), &DrainerConfig::crd()).await?;
    let ns: Namespace = serde_json::from_value(serde_json::json!({"metadata": {"name": CLUSTER}}))?;
    Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &ns).await?;
    Api::<Secret>::namespaced(client.clone(), CLUSTER)
        .create(&PostParams::default(), &wc.kubeconfig_secret(CLUSTER, CLUSTER))
        .await?;
    let dcs: Api<DrainerConfig> = Api::namespaced(client.clone(), CLUSTER);
    while dcs.list(&ListParams::default()).await.is_err() {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // The executor, in its own process; give it a moment to list and watch.
    let mut child = Command::new(std::env::current_exe()?)
        .env(MC_ENV, mc.base_url())
        .env("RUST_LOG", "warn")
        .stdin(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let pid = child.id().unwrap_or_default();
    tokio::time::sleep(Duration::from_secs(2)).await;

    // First eviction per node: a pod of that node deleting or deleted.
    let first: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let seen = first.clone();
    let pods: Api<Pod> = Api::namespaced(wc.client(), "apps");
    let watch = tokio::spawn(async move {
        let mut events = std::pin::pin!(watcher(pods, watcher::Config::default()));
        while let Some(event) = events.next().await {
            let pod = match event {
                Ok(watcher::Event::Apply(p)) if p.metadata.deletion_timestamp.is_some() => p,
                Ok(watcher::Event::Delete(p)) => p,
                _ => continue,
            };
            if let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.clone()) {
                seen.lock().entry(node).or_insert_with(Instant::now);
            }
        }
    });
    // The executor's reaction per node: its cordon, made in the same step as its first
    // eviction requests (which a disruption budget may refuse, and a watch cannot see).
    let cordons: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let seen = cordons.clone();
    let node_api: Api<Node> = Api::all(wc.client());
    let node_watch = tokio::spawn(async move {
        let mut events = std::pin::pin!(watcher(node_api, watcher::Config::default()));
        while let Some(event) = events.next().await {
            if let Ok(watcher::Event::Apply(n)) = event
                && n.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false)
            {
                seen.lock().entry(n.name_any()).or_insert_with(Instant::now);
            }
        }
    });
    tokio::time::sleep(Duration::from_millis(500)).await;

    wc.env().handle().reset_requests();
    mc.handle().reset_requests();
    let start = Instant::now();
    let mut created: HashMap<String, Instant> = HashMap::new();
    let creates = names.iter().map(|name| {
        let dcs = dcs.clone();
        let dc: DrainerConfig = serde_json::from_value(serde_json::json!({
            "apiVersion": "core.giantswarm.io/v1alpha1", "kind": "DrainerConfig",
            "metadata": {"name": name, "namespace": CLUSTER,
                         "labels": {format!("{OPERATOR}.giantswarm.io/version"): "1.0.0"}},
            "spec": {"guest": {"cluster": {"api": {"endpoint": "api.bench1.example.com"}, "id": CLUSTER},
                               "node": {"name": name}},
                     "versionBundle": {"version": "1.0.0"}}
        }))
        .expect("a valid DrainerConfig");
        async move {
            let at = Instant::now();
            dcs.create(&PostParams::default(), &dc).await.map(|_| (dc.name_any(), at))
        }
    });
    for result in futures::future::join_all(creates).await {
        let (name, at) = result?;
        created.insert(name, at);
    }

    let mut polls = 0u64;
    let deadline = Instant::now() + Duration::from_secs(1800);
    let drained_after = loop {
        polls += 1;
        let list = dcs.list(&ListParams::default()).await?;
        let finished = list.items.iter().filter(|d| d.is_finished()).count();
        if finished == nodes {
            let timeouts = list.items.iter().filter(|d| d.status.as_ref().is_some_and(|s| s.timed_out())).count();
            if timeouts > 0 {
                println!("  warning: {timeouts} drains timed out");
            }
            break start.elapsed();
        }
        if Instant::now() > deadline {
            anyhow::bail!("only {finished} of {nodes} drains finished within 30 minutes");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let peak_kib = vm_hwm_kib(pid);
    let wc_counts = wc.env().handle().requests();
    let mc_counts = mc.handle().requests();
    drop(child.stdin.take());
    let _ = tokio::time::timeout(Duration::from_secs(10), child.wait()).await;
    let _ = child.kill().await;
    watch.abort();
    node_watch.abort();

    let evicted: u64 = dcs
        .list(&ListParams::default())
        .await?
        .items
        .iter()
        .filter_map(|d| d.status.as_ref())
        .map(|s| u64::from(s.evicted_pods))
        .sum();
    let evictions = wc_counts.get(Verb::Create, "pods/eviction");
    // The benchmark's own requests: the DrainerConfig creations and status polls (MC).
    let own_mc = nodes as u64 + polls;
    let executor_mc = mc_counts.total().saturating_sub(own_mc);
    // The benchmark's pod watch listed before the counters were reset; only its watch
    // requests (re-established after server-side timeouts) are its own.
    let executor_wc = wc_counts.total().saturating_sub(wc_counts.get(Verb::Watch, "pods"));
    let refused = evictions.saturating_sub(evicted);
    let beyond = (executor_mc + executor_wc).saturating_sub(evicted) as f64 / evicted.max(1) as f64;

    let since_creation = |seen: &HashMap<String, Instant>| {
        let mut out: Vec<Duration> =
            created.iter().filter_map(|(node, at)| seen.get(node).map(|f| f.saturating_duration_since(*at))).collect();
        out.sort();
        out
    };
    let latencies = since_creation(&first.lock());
    let reactions = since_creation(&cordons.lock());
    println!("  all {nodes} drains Drained after: {:.2} s", drained_after.as_secs_f64());
    match peak_kib {
        Some(kib) => println!("  executor peak RSS: {:.1} MiB", kib as f64 / 1024.0),
        None => println!("  executor peak RSS: unavailable (no /proc)"),
    }
    println!(
        "  API requests per evicted pod beyond the eviction: {beyond:.2} (target <= 3): {evicted} evicted, {refused} evictions refused (429), management cluster {executor_mc}, workload cluster {executor_wc}"
    );
    let mut breakdown: Vec<String> = wc_counts.by_resource.iter().map(|((v, r), n)| format!("{v} {r}: {n}")).collect();
    breakdown.extend(mc_counts.by_resource.iter().map(|((v, r), n)| format!("MC {v} {r}: {n}")));
    println!("    requests: {}", breakdown.join(", "));
    let deciles: Vec<String> =
        (1..=10).map(|d| format!("{:.1}", percentile(&reactions, d as f64 / 10.0).as_secs_f64())).collect();
    println!("    cordon deciles (s): {}", deciles.join(" "));
    println!(
        "  DrainerConfig creation to cordon, the step that sends the first evictions: p50 {:.0} ms, p99 {:.0} ms ({} nodes observed)",
        percentile(&reactions, 0.5).as_secs_f64() * 1000.0,
        percentile(&reactions, 0.99).as_secs_f64() * 1000.0,
        reactions.len()
    );
    println!(
        "  DrainerConfig creation to first accepted eviction: p50 {:.0} ms, p99 {:.0} ms (target p50 <= 100 ms; {} nodes observed)",
        percentile(&latencies, 0.5).as_secs_f64() * 1000.0,
        percentile(&latencies, 0.99).as_secs_f64() * 1000.0,
        latencies.len()
    );
    Ok(())
}

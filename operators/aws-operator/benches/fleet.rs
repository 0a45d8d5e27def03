//! `cargo bench -p aws-operator --bench fleet`: many clusters (one master and one node pool
//! each) over several tenant accounts, reconciled by sharded replicas of the operator
//! (`aws-operator daemon --sharding true`), against one moto.
//!
//! Each replica is its own process with its own pod name (so its own shard Lease) and its own
//! access key (so moto's request log tells which replica sent each call), and they share one
//! testenv and one moto. The clusters go round-robin to the tenant accounts, so they share each
//! account's AWS request budget (`crate::aws::budget`) across the replicas. As in the `clusters`
//! benchmark, a loopback proxy in front of moto counts the AWS calls and the time moto took to
//! answer each, and the operator's periods (resync, stack listing expiry, Endpoints refresh, the
//! drainers' steady poll) are shortened [`support::TIME_SCALE`] times, the idle window with them
//! (20 simulated minutes, longer than every period). Prints, beside the previously published figures:
//! - the time from the first create until every AWSCluster is Ready;
//! - AWS calls per cluster until then;
//! - idle AWS calls per cluster per hour;
//! - each replica's peak RSS (`VmHWM`), clusters held, AWS calls sent and time its calls waited
//!   for the request budget;
//! - Kubernetes writes per idle resync (testenv's request counters over the idle window), the
//!   replicas' Lease renewals apart: those are what keeps a replica a member, not the clusters'.
//!
//! `BENCH_FLEET_CLUSTERS` (default 1,000), `BENCH_FLEET_ACCOUNTS` (10) and
//! `BENCH_FLEET_REPLICAS` (4) change the counts; `BENCH_FLEET_DEADLINE_SECONDS` (2,400) bounds
//! the creation. When the deadline passes first, the benchmark stops all the same and prints how
//! many clusters were Ready, how the count grew, and what the last minute looked like: AWS calls
//! per second, moto's mean answer time, moto's and the replicas' CPU use (moto serves from one
//! Python process, so about one core is all it can use) and the load of the machine; the idle
//! figures are then not measured.
//!
//! Figures (only these points were measured; nothing is extrapolated from them), on a shared
//! two-core machine; `docs/aws-operator.md`, "Benchmark", has every run and what limited it:
//!
//! | clusters / accounts / replicas | build | all Ready | AWS calls per cluster | idle AWS calls per cluster per hour | peak RSS per replica | Kubernetes writes per idle resync |
//! |---|---|---|---|---|---|---|
//! | 20 / 2 / 2 | dev | 92.4 s | 126.2 | 22.65 (drainer poll not shortened) | 75.7, 79.5 MiB | 57.8 |
//! | 100 / 10 / 4 | dev | 231.2 s | 140.4 | 28.98 (drainer poll not shortened) | 92.0 to 94.3 MiB | 271.5 |
//! | 10 / 2 / 2 | dev | 46.1 s | 123.8 | 17.10 | 74.9, 77.4 MiB | 0 |
//! | 300 / 10 / 4 | release | 499.8 s | 125.3 | 7.64 | 92.7 to 95.1 MiB | 0 |
//! | 1,000 / 10 / 4 | release | 275 Ready at the deadline, 2,701 s (moto at 0.9 cores) | 106.9 | not measured | 150.2 to 167.3 MiB | not measured |
//!
//! The idle calls are paid per replica and tenant account (the drainers' and the stacks'
//! listings, the masters' addresses), none per cluster, so their share per cluster falls as the
//! accounts fill. Of each replica's resident set, about 42 MiB (release) are the binary's own
//! pages.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use apis::aws::AWSCluster;
use kube::Api;
use kube::api::ListParams;
use operatorkit::sharding::SHARD_LABEL_PREFIX;
use testenv::metrics::RequestCounts;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

mod support;

use support::*;

/// Figures published before, to print beside this run's.
struct Previous {
    what: &'static str,
    clusters: usize,
    ready_seconds: f64,
    calls_per_cluster: f64,
    idle_calls_per_cluster_hour: f64,
    rss_mib: f64,
    writes_per_resync: Option<f64>,
}

/// The one-process figures of the `clusters` benchmark (`docs/aws-operator.md`, "Benchmark").
const PREVIOUS: &[Previous] = &[Previous {
    what: "1 process, 1 account (clusters bench)",
    clusters: 100,
    ready_seconds: 98.0,
    calls_per_cluster: 72.7,
    idle_calls_per_cluster_hour: 10.65,
    rss_mib: 56.2,
    writes_per_resync: None,
}];

/// The goals of the fleet: per replica, and per cluster.
const GOAL_RSS_MIB: f64 = 64.0;
const GOAL_IDLE_CALLS: f64 = 12.0;

/// One operator replica.
struct Replica {
    name: String,
    key: String,
    metrics_port: u16,
    child: tokio::process::Child,
    pid: u32,
}

/// A free loopback port for a replica's metrics server.
fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// The sum of a counter family on a replica's `/metrics`.
async fn scrape_sum(port: u16, family: &str) -> Option<f64> {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.ok()?;
    let request = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut body = String::new();
    stream.read_to_string(&mut body).await.ok()?;
    Some(
        body.lines()
            .filter(|l| l.starts_with(family) && l[family.len()..].starts_with(['{', ' ']))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum(),
    )
}

/// CPU use between two readings, in cores.
fn cores(before: Option<f64>, after: Option<f64>, wall: Duration) -> f64 {
    match (before, after) {
        (Some(b), Some(a)) if wall > Duration::ZERO => (a - b) / wall.as_secs_f64(),
        _ => f64::NAN,
    }
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// A reading of everything that moves during creation, to compare over a period.
struct Reading {
    at: Instant,
    ready: usize,
    calls: (u64, u64, u64),
    moto_cpu: Option<f64>,
    replicas_cpu: Option<f64>,
}

impl Reading {
    fn take(ready: usize, calls: &Calls, moto: u32, replicas: &[Replica]) -> Reading {
        let replicas_cpu = replicas.iter().map(|r| cpu_seconds(r.pid)).sum::<Option<f64>>();
        Reading { at: Instant::now(), ready, calls: calls.snapshot(), moto_cpu: cpu_seconds(moto), replicas_cpu }
    }

    /// What happened since `earlier`, as a line.
    fn since(&self, earlier: &Reading) -> String {
        let wall = self.at - earlier.at;
        let calls = self.calls.0 - earlier.calls.0;
        let answered = self.calls.1 - earlier.calls.1;
        let latency = (self.calls.2 - earlier.calls.2) as f64 / 1000.0 / answered.max(1) as f64;
        format!(
            "{:.1} AWS calls/s, moto answers in {latency:.0} ms on average, moto {:.2} cores, replicas {:.2} cores, {} more Ready, load {}",
            calls as f64 / wall.as_secs_f64().max(0.001),
            cores(earlier.moto_cpu, self.moto_cpu, wall),
            cores(earlier.replicas_cpu, self.replicas_cpu, wall),
            self.ready.saturating_sub(earlier.ready),
            load_average()
        )
    }
}

/// Writes among `counts`: those of the replicas' Leases, and all others by verb and resource.
fn writes(counts: &RequestCounts) -> (u64, BTreeMap<String, u64>) {
    let mut leases = 0;
    let mut others = BTreeMap::new();
    for ((verb, resource), n) in &counts.by_resource {
        if !verb.is_write() || *n == 0 {
            continue;
        }
        if resource == "leases.coordination.k8s.io" {
            leases += n;
        } else {
            *others.entry(format!("{} {resource}", verb.as_str())).or_default() += n;
        }
    }
    (leases, others)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let clusters = env_count("BENCH_FLEET_CLUSTERS", 1000);
    let accounts = env_count("BENCH_FLEET_ACCOUNTS", 10).max(1);
    let replica_count = env_count("BENCH_FLEET_REPLICAS", 4).max(1);
    let deadline = Duration::from_secs(env_count("BENCH_FLEET_DEADLINE_SECONDS", 2400) as u64);
    anyhow::ensure!(clusters <= 9999, "BENCH_FLEET_CLUSTERS: at most 9,999 (cluster IDs are f0000 to f9999)");

    let Backends { moto, calls, endpoint, env, client, cp_account } = Backends::start().await?;
    let tenant_accounts: Vec<String> = (0..accounts).map(|_| motoenv::fresh_account_id()).collect();
    let installation = "bench";
    management_vpc(&moto, &cp_account, installation).await?;
    apply_basics(&client).await?;
    let ami = ami_file()?;

    let mut replicas = Vec::new();
    for i in 0..replica_count {
        let name = format!("aws-operator-fleet-{i}");
        let key = format!("AKIAFLEET{i:04}");
        let metrics_port = free_port()?;
        let child = daemon(&env, installation, &cp_account, &endpoint, ami.path())
            .args(["--listen", &format!("127.0.0.1:{metrics_port}"), "--sharding", "true"])
            .env("POD_NAME", &name)
            .env("AWS_ACCESS_KEY_ID", &key)
            .spawn()?;
        let pid = child.id().unwrap_or_default();
        replicas.push(Replica { name, key, metrics_port, child, pid });
    }

    let aws_clusters: Api<AWSCluster> = Api::namespaced(client.clone(), NAMESPACE);
    let start = Instant::now();
    for i in 0..clusters {
        create_cluster(&client, &format!("f{i:04}"), &tenant_accounts[i % accounts]).await?;
    }
    eprintln!(
        "  {:>5.0} s: {clusters} clusters created in {accounts} accounts, {replica_count} replicas",
        start.elapsed().as_secs_f64()
    );

    // Creation, until every cluster is Ready or the deadline.
    let mut readings: Vec<Reading> = vec![Reading::take(0, &calls, moto.pid(), &replicas)];
    let mut last_print = Instant::now();
    let mut exited = Vec::new();
    let (ready, created) = loop {
        let list = aws_clusters.list(&ListParams::default()).await?;
        let ready = list.items.iter().filter(|c| is_ready(c)).count();
        if ready == clusters {
            break (ready, start.elapsed());
        }
        if last_print.elapsed() >= Duration::from_secs(30) {
            last_print = Instant::now();
            let now = Reading::take(ready, &calls, moto.pid(), &replicas);
            let line = now.since(readings.last().expect("a reading"));
            eprintln!(
                "  {:>5.0} s: {ready} of {clusters} Ready, {} AWS calls; last 30 s: {line}",
                start.elapsed().as_secs_f64(),
                calls.all.load(std::sync::atomic::Ordering::Relaxed)
            );
            readings.push(now);
        }
        for r in &mut replicas {
            if !exited.contains(&r.name)
                && let Some(status) = r.child.try_wait()?
            {
                eprintln!("  replica {} exited with {status}", r.name);
                exited.push(r.name.clone());
            }
        }
        if start.elapsed() > deadline || exited.len() == replicas.len() {
            break (ready, start.elapsed());
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    };
    let all_ready = ready == clusters;
    let calls_during_creation = calls.all.load(std::sync::atomic::Ordering::Relaxed);
    let describe_during_creation = calls.describe_stacks.load(std::sync::atomic::Ordering::Relaxed);

    // Idle: let requeues drain for one resync, then count AWS calls and Kubernetes writes over
    // the idle window.
    let window = Duration::from_secs(IDLE_WINDOW_SECONDS / TIME_SCALE);
    let idle = if all_ready {
        tokio::time::sleep(Duration::from_secs(RESYNC_SECONDS / TIME_SCALE)).await;
        let before = calls.all.load(std::sync::atomic::Ordering::Relaxed);
        let requests_before = env.handle().requests();
        let from = epoch_seconds();
        tokio::time::sleep(window).await;
        let idle_calls = calls.all.load(std::sync::atomic::Ordering::Relaxed) - before;
        Some((idle_calls, env.handle().requests().since(&requests_before), (from, epoch_seconds())))
    } else {
        None
    };

    // Per replica: clusters held (the shard label of each AWSCluster), calls sent (moto's log,
    // by the long-term key behind each call), time waited for the budget, peak RSS.
    let list = aws_clusters.list(&ListParams::default()).await?;
    let mut held: BTreeMap<String, usize> = BTreeMap::new();
    for c in &list.items {
        let shard = c
            .metadata
            .labels
            .iter()
            .flatten()
            .find(|(k, _)| k.starts_with(SHARD_LABEL_PREFIX))
            .map_or_else(|| "(none)".to_string(), |(_, v)| v.clone());
        *held.entry(shard).or_default() += 1;
    }
    let log = tokio::task::block_in_place(|| moto.request_log())?;
    let mut sent: BTreeMap<&str, u64> = BTreeMap::new();
    let mut throttled = 0;
    for r in &log {
        *sent.entry(r.principal.as_str()).or_default() += 1;
        throttled += u64::from(r.throttled);
    }

    let per_cluster = |n: u64| n as f64 / clusters.max(1) as f64;
    println!(
        "aws-operator fleet: {clusters} clusters (1 master, 1 node pool each) in {accounts} tenant accounts, {replica_count} sharded replicas, against one moto:"
    );
    let previous = PREVIOUS.iter().min_by_key(|p| p.clusters.abs_diff(clusters)).expect("a previous figure");
    println!("  {:<34} {:>16}   previously: {}, {} clusters", "", "this run", previous.what, previous.clusters);
    if all_ready {
        println!("  {:<34} {:>14.1} s   {:.1} s", "all Ready after", created.as_secs_f64(), previous.ready_seconds);
    } else {
        println!(
            "  {:<34} {:>16}   {:.1} s",
            "all Ready after",
            format!("{ready} of {clusters} in {:.0} s", created.as_secs_f64()),
            previous.ready_seconds
        );
    }
    println!(
        "  {:<34} {:>16.1}   {:.1}   ({calls_during_creation} calls, {describe_during_creation} DescribeStacks{})",
        "AWS calls per cluster until then",
        per_cluster(calls_during_creation),
        previous.calls_per_cluster,
        if all_ready {
            String::new()
        } else {
            format!("; per Ready cluster {:.1}", calls_during_creation as f64 / ready.max(1) as f64)
        }
    );
    match &idle {
        Some((idle_calls, requests, (from, to))) => {
            let hours = simulated_hours(window);
            let (lease_writes, others) = writes(requests);
            let resyncs = (IDLE_WINDOW_SECONDS / RESYNC_SECONDS) as f64;
            let other_writes: u64 = others.values().sum();
            println!(
                "  {:<34} {:>16.2}   {:.2}   (goal <= {GOAL_IDLE_CALLS}; {idle_calls} calls in {} s = {} min simulated, periods shortened {TIME_SCALE}x)",
                "idle AWS calls per cluster per hour",
                per_cluster(*idle_calls) / hours,
                previous.idle_calls_per_cluster_hour,
                window.as_secs(),
                IDLE_WINDOW_SECONDS / 60
            );
            println!(
                "  {:<34} {}",
                "idle AWS calls by action",
                per_cluster_hour(&calls_by_action(&log, *from, *to), clusters, window)
            );
            println!(
                "  {:<34} {:>16.1}   {}   (goal 0; {other_writes} in {resyncs} resyncs{})",
                "Kubernetes writes per idle resync",
                other_writes as f64 / resyncs,
                previous.writes_per_resync.map_or("-".to_string(), |w| format!("{w:.1}")),
                if others.is_empty() { String::new() } else { format!(": {others:?}") }
            );
            let repeated = repeated_events(&client, *from).await?;
            if !repeated.is_empty() {
                println!("  {:<34} {repeated:?}", "events repeated while idle");
            }
            println!(
                "  {:<34} {:>16.1}   (the replicas' shard, leader and budget Leases: {lease_writes} in {} s)",
                "Lease renewals per second",
                lease_writes as f64 / window.as_secs_f64(),
                window.as_secs()
            );
        }
        None => println!("  idle figures                       not measured: not every cluster became Ready"),
    }
    for r in &replicas {
        let rss = peak_rss_mib(r.pid).unwrap_or(f64::NAN);
        let waited = scrape_sum(r.metrics_port, "aws_operator_request_budget_wait_seconds_total").await;
        println!(
            "  {:<34} {:>12.1} MiB   {:.1} MiB   (goal <= {GOAL_RSS_MIB} MiB; now {}; {} clusters held, {} AWS calls sent, {} s waited for the budget{})",
            format!("peak RSS of {}", r.name),
            rss,
            previous.rss_mib,
            rss_split_mib(r.pid)
                .map_or("?".to_string(), |(anon, file)| format!("{anon:.1} MiB anonymous, {file:.1} MiB of files")),
            held.get(&r.name).copied().unwrap_or(0),
            sent.get(r.key.as_str()).copied().unwrap_or(0),
            waited.map_or("?".to_string(), |w| format!("{w:.1}")),
            if exited.contains(&r.name) { "; exited" } else { "" }
        );
    }
    let unheld: usize = held.iter().filter(|(s, _)| !replicas.iter().any(|r| &&r.name == s)).map(|(_, n)| n).sum();
    if unheld > 0 {
        println!("  AWSClusters in no replica's shard  {unheld} ({held:?})");
    }
    println!("  AWS calls refused as throttled     {throttled}");
    if !all_ready {
        println!("  how the Ready count grew (every 30 s): {:?}", readings.iter().map(|r| r.ready).collect::<Vec<_>>());
        let now = Reading::take(ready, &calls, moto.pid(), &replicas);
        let minute_ago =
            readings.iter().rev().find(|r| now.at - r.at >= Duration::from_secs(60)).unwrap_or(&readings[0]);
        println!("  the last {:.0} s: {}", (now.at - minute_ago.at).as_secs_f64(), now.since(minute_ago));
    }
    for r in &mut replicas {
        let _ = r.child.kill().await;
    }
    Ok(())
}

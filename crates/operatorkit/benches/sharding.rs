//! Benchmark of label sharding (`make bench`): 3,000 objects on 1, 2 and 4 replicas.
//!
//! Every party is its own process, started by re-executing this binary, so that each replica's
//! peak RSS is its own:
//!
//! * `OPERATORKIT_SHARDING_BENCH_SERVE=1`: the API server (testenv). It prints its URL, then
//!   obeys `create <n>` (objects created in-process) and `patches` (PATCH requests on
//!   ConfigMaps so far) on stdin.
//! * `OPERATORKIT_SHARDING_BENCH_REPLICA=<name>` with `OPERATORKIT_SHARDING_BENCH_URL`: one
//!   replica with the default Lease settings (15 s lease, 10 s renew deadline, 2 s retry): a
//!   leader elector for the sharder, its shard Lease, and one sharded controller whose resource
//!   prints `done <object>` when an object arrives at this replica.
//! * no variable: the parent, which prints the figures.
//!
//! Reported per replica count: the time until every object was reconciled once (from the start
//! of the replicas, so it includes electing the sharder and assigning every object), each
//! replica's peak RSS (`VmHWM`) and its share of the objects; with two or more replicas, the
//! time from a SIGKILL of one replica until every object it held was reconciled by another, and
//! the PATCH requests spent per moved object, for that kill (a direct relabel) and for adding
//! a replica (the drain handshake).

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use kube::api::{Api, PostParams};
use operatorkit::leader::{LeaderElectionConfig, LeaderElector};
use operatorkit::sharding::{Sharding, ShardingConfig, label_key};
use operatorkit::{Controller, Outcome, Resource, ResourceSet, Routing, resource};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

const SERVE_ENV: &str = "OPERATORKIT_SHARDING_BENCH_SERVE";
const REPLICA_ENV: &str = "OPERATORKIT_SHARDING_BENCH_REPLICA";
const URL_ENV: &str = "OPERATORKIT_SHARDING_BENCH_URL";
/// Overrides the object count, for quick runs of the benchmark's logic.
const OBJECTS_ENV: &str = "OPERATORKIT_SHARDING_BENCH_OBJECTS";
const DEFAULT_OBJECTS: usize = 3_000;
const NS: &str = "default";
const OPERATOR: &str = "bench-operator";
const VERSION_LABEL: &str = "bench-operator.giantswarm.io/version";
const CLUSTER: &str = "giantswarm.io/cluster";
const RING: &str = "bench";

fn objects() -> usize {
    std::env::var(OBJECTS_ENV).ok().and_then(|v| v.parse().ok()).unwrap_or(DEFAULT_OBJECTS)
}

fn main() {
    let Ok(runtime) = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() else {
        eprintln!("cannot start a tokio runtime");
        std::process::exit(1);
    };
    if std::env::var_os(SERVE_ENV).is_some() {
        runtime.block_on(serve());
    } else if let Ok(name) = std::env::var(REPLICA_ENV) {
        runtime.block_on(replica(&name));
    } else {
        runtime.block_on(orchestrate());
    }
}

// ------------------------------------------------------------------------------------------
// The API server process.

async fn serve() {
    let env = testenv::TestEnv::builder().start().await.expect("testenv starts");
    let client = env.client();
    println!("serving {}", env.base_url());
    let (tx, mut commands) = mpsc::unbounded_channel::<String>();
    std::thread::spawn(move || {
        for line in std::io::BufRead::lines(std::io::stdin().lock()).map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    while let Some(line) = commands.recv().await {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["create", n] => {
                create_objects(&client, n.parse().expect("a count")).await;
                println!("created");
            }
            ["patches"] => {
                println!("patches {}", env.handle().requests().get(testenv::Verb::Patch, "configmaps"));
            }
            _ => println!("unknown command"),
        }
    }
}

async fn create_objects(client: &Client, n: usize) {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    futures::stream::iter(0..n)
        .map(|i| {
            let api = api.clone();
            let cm: ConfigMap = serde_json::from_value(serde_json::json!({
                "metadata": {
                    "name": format!("object-{i:05}"),
                    "labels": {VERSION_LABEL: "1.0.0", CLUSTER: format!("cluster-{:05}", i / 2)}
                },
                "data": {"spec": "x".repeat(256)}
            }))
            .expect("a ConfigMap");
            async move { api.create(&PostParams::default(), &cm).await.expect("create") }
        })
        .buffer_unordered(32)
        .for_each(|_| async {})
        .await;
}

// ------------------------------------------------------------------------------------------
// A replica process.

/// Reports each object when it arrives at this replica: at its first reconcile here, and at
/// the first one after it came back (a move always changes its resourceVersion, a resync does
/// not).
struct FirstReconcile {
    seen: parking_lot::Mutex<HashMap<String, String>>,
}

impl Resource<ConfigMap, ()> for FirstReconcile {
    fn name(&self) -> &str {
        "first-reconcile"
    }

    async fn ensure_created(&self, _: &mut (), obj: &ConfigMap) -> resource::Result<Outcome> {
        let name = obj.metadata.name.clone().unwrap_or_default();
        let version = obj.metadata.resource_version.clone().unwrap_or_default();
        if self.seen.lock().insert(name.clone(), version.clone()).as_ref() != Some(&version) {
            println!("done {name}");
        }
        Ok(Outcome::proceed())
    }

    async fn ensure_deleted(&self, _: &mut (), _: &ConfigMap) -> resource::Result<Outcome> {
        Ok(Outcome::proceed())
    }
}

async fn replica(name: &str) {
    let url = std::env::var(URL_ENV).expect("the server URL");
    let mut config = kube::Config::new(url.parse().expect("the server URL"));
    config.default_namespace = NS.into();
    let client = Client::try_from(config).expect("a client");
    let sharding_config =
        ShardingConfig { shard: name.to_string(), identity: format!("{name}_bench"), ..ShardingConfig::new(NS, RING) };
    let sharding = Sharding::new(client.clone(), sharding_config, label_key(CLUSTER)).expect("sharding settings");
    let set = ResourceSet::with_default_state("v1", semver::VersionReq::parse("^1").expect("a requirement"))
        .resource(FirstReconcile { seen: parking_lot::Mutex::new(HashMap::new()) })
        .build();
    let controller = Controller::<ConfigMap>::builder(client.clone(), "sharding-bench")
        .operator(OPERATOR)
        .routing(Routing::Legacy { version: semver::Version::new(1, 0, 0) })
        .api(Api::namespaced(client.clone(), NS))
        .concurrency(16)
        .sharding(&sharding)
        .resource_set(set)
        .build()
        .expect("the controller builds");
    let election =
        LeaderElectionConfig { identity: format!("{name}_bench"), ..LeaderElectionConfig::new(NS, "bench-leader") };
    let elector = LeaderElector::new(client, election).expect("an elector");
    let shutdown = CancellationToken::new();
    tokio::spawn(sharding.run(elector.leadership(), shutdown.clone()));
    tokio::spawn(elector.run(shutdown.clone()));
    controller.run(shutdown).await;
}

// ------------------------------------------------------------------------------------------
// The parent.

/// A child process; its stdout lines arrive on `lines`, tagged with its name.
struct Proc {
    child: Child,
    stdin: ChildStdin,
}

fn spawn(envs: &[(&str, String)], tag: String, lines: mpsc::UnboundedSender<(String, String)>) -> Proc {
    let exe = std::env::current_exe().expect("the bench binary's path");
    let mut command = Command::new(exe);
    for (k, v) in envs {
        command.env(k, v);
    }
    let mut child = command
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("a benchmark process starts");
    let stdin = child.stdin.take().expect("stdin");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout")).lines();
    tokio::spawn(async move {
        while let Ok(Some(line)) = stdout.next_line().await {
            if lines.send((tag.clone(), line)).is_err() {
                break;
            }
        }
    });
    Proc { child, stdin }
}

/// Peak resident memory of a process, in KiB.
fn hwm_kib(pid: Option<u32>) -> u64 {
    let status = pid.and_then(|p| std::fs::read_to_string(format!("/proc/{p}/status")).ok()).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

struct Server {
    proc: Proc,
    replies: mpsc::UnboundedReceiver<(String, String)>,
    url: String,
}

impl Server {
    async fn start() -> Server {
        let (tx, mut replies) = mpsc::unbounded_channel();
        let proc = spawn(&[(SERVE_ENV, "1".into())], "server".into(), tx);
        let first = replies.recv().await.expect("the server starts").1;
        let url = first.trim_start_matches("serving ").to_string();
        Server { proc, replies, url }
    }

    async fn command(&mut self, command: &str) -> String {
        self.proc.stdin.write_all(format!("{command}\n").as_bytes()).await.expect("write to the server");
        self.proc.stdin.flush().await.expect("flush");
        self.replies.recv().await.expect("a reply").1
    }

    async fn patches(&mut self) -> u64 {
        self.command("patches").await.split_whitespace().nth(1).and_then(|n| n.parse().ok()).unwrap_or(0)
    }
}

/// Which replica reconciled which object first (the latest report wins).
struct Progress {
    lines: mpsc::UnboundedReceiver<(String, String)>,
    tx: mpsc::UnboundedSender<(String, String)>,
    owner: HashMap<String, String>,
}

impl Progress {
    /// Read reports until `done` holds or `limit` passes; false on timeout.
    async fn until(&mut self, limit: Duration, mut done: impl FnMut(&HashMap<String, String>) -> bool) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        while !done(&self.owner) {
            match tokio::time::timeout_at(deadline, self.lines.recv()).await {
                Ok(Some((replica, line))) => {
                    if let Some(object) = line.strip_prefix("done ") {
                        self.owner.insert(object.to_string(), replica);
                    }
                }
                _ => return false,
            }
        }
        true
    }
}

async fn orchestrate() {
    let n = objects();
    println!("label sharding, {n} objects, default Lease settings (15 s / 10 s / 2 s)");
    println!(
        "| replicas | all reconciled once | peak RSS per replica (MiB) | objects per replica | rebalance after SIGKILL | PATCHes per move: kill / scale-out |"
    );
    println!("| --- | --- | --- | --- | --- | --- |");
    for replicas in [1usize, 2, 4] {
        let mut server = Server::start().await;
        server.command(&format!("create {n}")).await;
        let (tx, lines) = mpsc::unbounded_channel();
        let mut progress = Progress { lines, tx: tx.clone(), owner: HashMap::new() };
        let started = Instant::now();
        let mut procs: Vec<(String, Proc)> = (0..replicas)
            .map(|i| {
                let name = format!("replica-{i}");
                let envs = [(REPLICA_ENV, name.clone()), (URL_ENV, server.url.clone())];
                let proc = spawn(&envs, name.clone(), tx.clone());
                (name, proc)
            })
            .collect();
        let all = progress.until(Duration::from_secs(600), |owner| owner.len() >= n).await;
        let reconciled = started.elapsed();
        // Let the caches settle, then read each replica's peak.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let _ = progress.until(Duration::from_millis(500), |_| false).await;
        let peaks: Vec<String> =
            procs.iter().map(|(_, p)| format!("{:.1}", hwm_kib(p.child.id()) as f64 / 1024.0)).collect();
        let shares: Vec<String> =
            procs.iter().map(|(name, _)| progress.owner.values().filter(|o| *o == name).count().to_string()).collect();
        let (mut rebalance, mut per_move) = ("-".to_string(), "-".to_string());
        if replicas >= 2 {
            // SIGKILL the last replica (never the first: it usually holds the sharder role, and
            // a new sharder waits one more lease duration before it trusts what it sees).
            let (victim, mut proc) = procs.pop().expect("a replica");
            let held: HashSet<String> =
                progress.owner.iter().filter(|(_, o)| **o == victim).map(|(k, _)| k.clone()).collect();
            let before = server.patches().await;
            let killed = Instant::now();
            let _ = proc.child.start_kill();
            let moved = progress
                .until(Duration::from_secs(120), |owner| {
                    held.iter().all(|o| owner.get(o).is_some_and(|r| *r != victim))
                })
                .await;
            rebalance = if moved { format!("{:.1} s", killed.elapsed().as_secs_f64()) } else { "timeout".into() };
            tokio::time::sleep(Duration::from_secs(1)).await;
            let kill_patches = server.patches().await.saturating_sub(before);
            // Scale out by one: the drain handshake moves the new shard's share.
            let before = server.patches().await;
            let name = "replica-new".to_string();
            let envs = [(REPLICA_ENV, name.clone()), (URL_ENV, server.url.clone())];
            procs.push((name.clone(), spawn(&envs, name.clone(), progress.tx.clone())));
            let target = n / replicas;
            let _ = progress
                .until(Duration::from_secs(120), |owner| {
                    owner.values().filter(|o| **o == name).count() >= target * 8 / 10
                })
                .await;
            // Wait until the moves stop.
            let mut last = progress.owner.values().filter(|o| **o == name).count();
            loop {
                let _ = progress.until(Duration::from_secs(3), |_| false).await;
                let now = progress.owner.values().filter(|o| **o == name).count();
                if now == last {
                    break;
                }
                last = now;
            }
            let scale_patches = server.patches().await.saturating_sub(before);
            per_move = format!(
                "{:.2} ({kill_patches}/{}) / {:.2} ({scale_patches}/{last})",
                kill_patches as f64 / held.len().max(1) as f64,
                held.len(),
                scale_patches as f64 / last.max(1) as f64
            );
        }
        println!(
            "| {replicas} | {} | {} | {} | {rebalance} | {per_move} |",
            if all { format!("{:.1} s", reconciled.as_secs_f64()) } else { "timeout".into() },
            peaks.join(" / "),
            shares.join(" / "),
        );
        drop(procs);
        drop(server);
    }
}

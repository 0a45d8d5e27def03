//! Benchmark of the operatorkit controller (`make bench`): 10,000 objects through a resource set
//! of 5 resources, each doing one cached read, compared with a plain kube-runtime `Controller`
//! doing the same work (the same reads, and a finalizer through kube-runtime's `finalizer`
//! helper), with the same concurrency and resync.
//!
//! Every party is its own process, started by re-executing this binary:
//!
//! * `OPERATORKIT_BENCH_SERVE=1`: the API server (testenv). It prints its URL, then obeys
//!   commands on stdin: `create <label> <n>` creates the objects in-process (so creating them
//!   costs the controllers nothing), `counts` prints its request counters.
//! * `OPERATORKIT_BENCH_RUN=operatorkit|plain` with `OPERATORKIT_BENCH_URL`: one controller.
//!   It prints `reconciled` once every object was reconciled, waits for `idle` on stdin, then
//!   reports `idle-start` / `idle-end` around an idle resync (the parent reads the server's
//!   counters at both) and a final `result` line.
//! * no variable: the parent, which orchestrates and prints the table.
//!
//! So each controller's RSS is its own, unaffected by the server, by object creation or by the
//! other controller, and neither controller runs in a process the other one warmed up.
//!
//! The two controllers of a round run at the same time, against the same API server, each on
//! its own N objects. On a small shared machine the load from other work comes and goes within
//! seconds: run one after the other, the two controllers met different load, and the ratio of
//! one round moved between 0.62 and 1.16 (five rounds). Run together, both meet the same load
//! and the same server, and the ratio of a round stays within a few percent. The parent runs
//! `OPERATORKIT_BENCH_ROUNDS` rounds (default 5), each on a fresh API server holding only that
//! round's 2 × N objects, alternating which controller starts first. The idle resyncs are
//! measured one after the other (the other controller still runs during the first one, so a
//! request it made would be counted there: zero in both windows means zero for both). It
//! prints every round, then the medians beside the previously published figures. Besides
//! wall-clock throughput it reports each controller's CPU time (user + system) until every
//! object was reconciled once, per 1,000 objects: the work a controller costs.
//!
//! Reported for both: reconciles per second (objects / time until every object has been
//! reconciled once: finalizer added and resources run), p50/p99 of the duration of every
//! reconcile (including the ones that only add the finalizer), RSS after the idle resync and its
//! peak, and the API requests and writes during one idle resync of all objects.
//!
//! Last published (crates/operatorkit/README.md, load average 7 to 8): 1,471 against 1,456
//! reconciles per second, a median ratio of 1.01 (rounds 0.96 to 1.01), 146 against 129 ms of
//! CPU per 1,000 objects, peak RSS 55.7 against 86.4 MiB. The commit before (load average 4):
//! ratio 0.98, 305 against 122 ms, 72.5 against 86.5 MiB; published before that:
//! 0.96, 57.5 against 86.7 MiB (and 0.89 when the controllers ran one after the other).

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, OnceLock};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use kube::runtime::controller::{Action, Config as RuntimeConfig};
use kube::runtime::finalizer::{Event as FinalizerEvent, finalizer};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{Controller as RuntimeController, watcher};
use kube::{Client, CustomResourceExt};
use operatorkit::{Controller, Outcome, Resource, ResourceSet, resource};
use parking_lot::Mutex;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio_util::sync::CancellationToken;

const SERVE_ENV: &str = "OPERATORKIT_BENCH_SERVE";
const RUN_ENV: &str = "OPERATORKIT_BENCH_RUN";
const URL_ENV: &str = "OPERATORKIT_BENCH_URL";
/// Overrides the object count, for quick runs of the benchmark's logic.
const OBJECTS_ENV: &str = "OPERATORKIT_BENCH_OBJECTS";
/// Overrides the number of rounds (one run of each controller per round).
const ROUNDS_ENV: &str = "OPERATORKIT_BENCH_ROUNDS";
const DEFAULT_ROUNDS: usize = 5;
const DEFAULT_OBJECTS: usize = 10_000;
const RESOURCES: usize = 5;
const CONCURRENCY: u16 = 16;
const RESYNC: Duration = Duration::from_secs(30);
const NS: &str = "default";
const OPERATOR: &str = "bench-operator";

static OBJECTS: LazyLock<usize> =
    LazyLock::new(|| std::env::var(OBJECTS_ENV).ok().and_then(|v| v.parse().ok()).unwrap_or(DEFAULT_OBJECTS));

fn main() {
    let Ok(runtime) = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() else {
        eprintln!("cannot start a tokio runtime");
        std::process::exit(1);
    };
    if std::env::var_os(SERVE_ENV).is_some() {
        runtime.block_on(serve());
    } else if let Ok(variant) = std::env::var(RUN_ENV) {
        runtime.block_on(run_variant(&variant));
    } else {
        runtime.block_on(orchestrate());
    }
}

// ------------------------------------------------------------------------------------------
// The API server process.

async fn serve() {
    let env =
        testenv::TestEnv::builder().history(Duration::from_secs(900), 1_000_000).start().await.expect("testenv starts");
    let client = env.client();
    println!("serving {}", env.base_url());
    // Commands arrive on stdin, read by a plain thread (the workspace's tokio has no io-std).
    let (tx, mut commands) = tokio::sync::mpsc::unbounded_channel::<String>();
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
            ["create", label, n] => {
                create_objects(&client, label, n.parse().expect("a count")).await;
                println!("created");
            }
            ["counts"] => {
                let c = env.handle().requests();
                println!("counts {} {}", c.total(), c.writes());
            }
            _ => println!("unknown command"),
        }
    }
}

async fn create_objects(client: &Client, label: &str, n: usize) {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    futures::stream::iter(0..n)
        .map(|i| {
            let api = api.clone();
            let cm: ConfigMap = serde_json::from_value(serde_json::json!({
                "metadata": {
                    "name": format!("{label}-{i:05}"),
                    "labels": {"bench": label, "release.giantswarm.io/version": "1.0.0"}
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
// The parent.

/// A child process spoken to line by line.
struct Peer {
    child: Child,
    stdin: ChildStdin,
    stdout: Lines<BufReader<ChildStdout>>,
}

impl Peer {
    fn start(envs: &[(&str, String)]) -> Peer {
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
        let stdout = BufReader::new(child.stdout.take().expect("stdout")).lines();
        Peer { child, stdin, stdout }
    }

    async fn line(&mut self) -> String {
        self.stdout.next_line().await.expect("read from a benchmark process").expect("a line")
    }

    async fn command(&mut self, command: &str) -> String {
        self.stdin.write_all(format!("{command}\n").as_bytes()).await.expect("write to the server");
        self.stdin.flush().await.expect("flush");
        self.line().await
    }

    /// (total requests, writes) served so far.
    async fn counts(&mut self) -> (u64, u64) {
        let reply = self.command("counts").await;
        let n: Vec<u64> = reply.split_whitespace().skip(1).filter_map(|w| w.parse().ok()).collect();
        (n[0], n[1])
    }
}

/// What one controller process reported.
#[derive(Clone, Debug, Default)]
struct Report {
    per_second: f64,
    /// CPU time (user + system) of the controller process until every object was reconciled
    /// once, per 1,000 objects, in milliseconds.
    cpu_ms_per_1000: f64,
    p50_ms: f64,
    p99_ms: f64,
    rss_kib: u64,
    hwm_kib: u64,
    idle_requests: u64,
    idle_writes: u64,
}

/// Start the controller `variant` in its own process; it reports once every object was
/// reconciled, then waits for [`idle_and_result`] to let it measure its idle resync.
fn start_runner(url: &str, variant: &str) -> Peer {
    Peer::start(&[(RUN_ENV, variant.to_string()), (URL_ENV, url.to_string())])
}

/// Wait until `runner` reconciled every object once.
async fn reconciled(runner: &mut Peer, variant: &str) {
    loop {
        let line = runner.line().await;
        if line == "reconciled" {
            return;
        }
        eprintln!("{variant}: {line}");
    }
}

/// Let `runner` measure one idle resync (the server's counters read at its start and end), and
/// read its figures.
async fn idle_and_result(server: &mut Peer, mut runner: Peer, variant: &str) -> Report {
    runner.stdin.write_all(b"idle\n").await.expect("write to a controller");
    runner.stdin.flush().await.expect("flush");
    let mut report = Report::default();
    let mut before = (0, 0);
    loop {
        let line = runner.line().await;
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["idle-start"] => before = server.counts().await,
            ["idle-end"] => {
                let after = server.counts().await;
                report.idle_requests = after.0 - before.0;
                report.idle_writes = after.1 - before.1;
            }
            ["result", per_second, cpu, p50, p99, rss, hwm] => {
                report.per_second = per_second.parse().unwrap_or(0.0);
                report.cpu_ms_per_1000 = cpu.parse().unwrap_or(0.0);
                report.p50_ms = p50.parse().unwrap_or(0.0);
                report.p99_ms = p99.parse().unwrap_or(0.0);
                report.rss_kib = rss.parse().unwrap_or(0);
                report.hwm_kib = hwm.parse().unwrap_or(0);
                break;
            }
            _ => eprintln!("{variant}: {line}"),
        }
    }
    let _ = runner.child.wait().await;
    report
}

/// The figures last published (crates/operatorkit/README.md), printed beside the new ones.
struct Previous {
    operatorkit: f64,
    plain: f64,
    operatorkit_rss_mib: f64,
    plain_rss_mib: f64,
}

const PREVIOUS: Previous =
    Previous { operatorkit: 1_471.0, plain: 1_456.0, operatorkit_rss_mib: 55.7, plain_rss_mib: 86.4 };

/// One round: a fresh API server, the objects of both controllers, one run of each.
async fn round(first: &str, second: &str) -> Vec<(String, Report)> {
    let mut server = Peer::start(&[(SERVE_ENV, "1".to_string())]);
    let url = server.line().await.trim_start_matches("serving ").to_string();
    let client = client(&url);
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &apis::release::Release::crd()).await.expect("the Release CRD");
    let release: apis::release::Release = serde_json::from_value(serde_json::json!({
        "apiVersion": "release.giantswarm.io/v1alpha1", "kind": "Release", "metadata": {"name": "v1.0.0"},
        "spec": {"components": [{"name": OPERATOR, "version": "1.0.0"}], "date": "2026-01-01T00:00:00Z", "state": "active"}
    }))
    .expect("a Release");
    Api::<apis::release::Release>::all(client).create(&PostParams::default(), &release).await.expect("the Release");
    // Both controllers' objects exist before either runs, so each lists from a server of the
    // same size.
    for variant in [first, second] {
        server.command(&format!("create {variant} {}", *OBJECTS)).await;
    }
    // Both controllers run at the same time, against the same server, under the same load
    // from the rest of the machine: load that comes and goes during a round slows both.
    let mut runners = Vec::new();
    for variant in [first, second] {
        runners.push((variant, start_runner(&url, variant)));
    }
    for (variant, runner) in &mut runners {
        reconciled(runner, variant).await;
    }
    // Then one idle resync each, one after the other.
    let mut reports = Vec::new();
    for (variant, runner) in runners {
        reports.push((variant.to_string(), idle_and_result(&mut server, runner, variant).await));
    }
    drop(server.stdin);
    let _ = server.child.kill().await;
    reports
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => 0.0,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

async fn orchestrate() {
    let rounds: usize =
        std::env::var(ROUNDS_ENV).ok().and_then(|v| v.parse().ok()).filter(|n| *n > 0).unwrap_or(DEFAULT_ROUNDS);
    println!(
        "operatorkit controller benchmark ({} ConfigMaps each, {RESOURCES} resources each doing one cached read, concurrency {CONCURRENCY}, resync {}s, {rounds} rounds; both controllers at once on one API server, each in its own process)",
        *OBJECTS,
        RESYNC.as_secs()
    );
    println!("  round  started      operatorkit/s  plain/s  ratio  CPU ms/1000 (okit, plain)  RSS MiB (okit, plain)");
    let (mut okit, mut plain) = (Vec::new(), Vec::new());
    for i in 0..rounds {
        // Alternate the order, so that neither controller always runs on a warmer server.
        let (first, second) = if i % 2 == 0 { ("operatorkit", "plain") } else { ("plain", "operatorkit") };
        let mut reports = round(first, second).await;
        reports.sort_by(|a, b| a.0.cmp(&b.0));
        let (o, p) = (reports[0].1.clone(), reports[1].1.clone());
        println!(
            "  {:>5}  {first:<11}  {:>13.0}  {:>7.0}  {:>5.2}  {:>11.1} {:>11.1}     {:>9.1} {:>9.1}",
            i + 1,
            o.per_second,
            p.per_second,
            o.per_second / p.per_second,
            o.cpu_ms_per_1000,
            p.cpu_ms_per_1000,
            mib(o.hwm_kib),
            mib(p.hwm_kib)
        );
        okit.push(o);
        plain.push(p);
    }
    let m = |reports: &[Report], f: fn(&Report) -> f64| median(reports.iter().map(f).collect());
    let ratios: Vec<f64> = okit.iter().zip(&plain).map(|(o, p)| o.per_second / p.per_second).collect();
    let (ratio_min, ratio_max) =
        ratios.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), r| (lo.min(*r), hi.max(*r)));
    let rate = |r: &Report| r.per_second;
    let cpu = |r: &Report| r.cpu_ms_per_1000;
    let p50 = |r: &Report| r.p50_ms;
    let p99 = |r: &Report| r.p99_ms;
    let rss = |r: &Report| mib(r.rss_kib);
    let hwm = |r: &Report| mib(r.hwm_kib);
    let idle_requests = |r: &Report| r.idle_requests as f64;
    let idle_writes = |r: &Report| r.idle_writes as f64;
    println!("  medians over {rounds} rounds         operatorkit   plain kube-runtime   previously (okit / plain)");
    println!(
        "  reconciles/s                  {:>11.0}   {:>18.0}   {:>8.0} / {:.0}",
        m(&okit, rate),
        m(&plain, rate),
        PREVIOUS.operatorkit,
        PREVIOUS.plain
    );
    println!("  CPU ms per 1,000 objects      {:>11.1}   {:>18.1}", m(&okit, cpu), m(&plain, cpu));
    println!("  reconcile p50                 {:>8.2} ms   {:>15.2} ms", m(&okit, p50), m(&plain, p50));
    println!("  reconcile p99                 {:>8.2} ms   {:>15.2} ms", m(&okit, p99), m(&plain, p99));
    println!("  controller RSS                {:>7.1} MiB   {:>14.1} MiB", m(&okit, rss), m(&plain, rss));
    println!(
        "  controller peak RSS           {:>7.1} MiB   {:>14.1} MiB   {:>8.1} / {:.1} MiB",
        m(&okit, hwm),
        m(&plain, hwm),
        PREVIOUS.operatorkit_rss_mib,
        PREVIOUS.plain_rss_mib
    );
    println!("  API requests per idle resync  {:>11.0}   {:>18.0}", m(&okit, idle_requests), m(&plain, idle_requests));
    println!("  API writes per idle resync    {:>11.0}   {:>18.0}", m(&okit, idle_writes), m(&plain, idle_writes));
    println!(
        "  throughput ratio (median)     {:>11.2}   (per round {ratio_min:.2} to {ratio_max:.2}; target >= 1.0; previously {:.2})",
        median(ratios),
        PREVIOUS.operatorkit / PREVIOUS.plain
    );
    println!("  CPU ratio (median, lower is cheaper) {:>4.2}", m(&okit, cpu) / m(&plain, cpu).max(f64::MIN_POSITIVE));
    println!("  targets: RSS <= 64 MiB, 0 writes per idle resync");
}

fn client(url: &str) -> Client {
    let mut config = kube::Config::new(url.parse().expect("the server URL"));
    config.default_namespace = NS.into();
    Client::try_from(config).expect("a client")
}

// ------------------------------------------------------------------------------------------
// A controller process.

/// What the benchmark observes of one controller.
#[derive(Default)]
struct Observed {
    reconciled: Mutex<HashSet<String>>,
    /// Reconciles that ran the resources.
    pipelines: AtomicU64,
    latencies: Mutex<Vec<Duration>>,
}

impl Observed {
    fn latency(&self, took: Duration) {
        self.latencies.lock().push(took);
    }

    fn done(&self, name: &str) {
        self.pipelines.fetch_add(1, Ordering::Relaxed);
        self.reconciled.lock().insert(name.to_string());
    }

    fn distinct(&self) -> usize {
        self.reconciled.lock().len()
    }

    fn percentile(&self, p: f64) -> f64 {
        let mut l = self.latencies.lock().clone();
        l.sort_unstable();
        if l.is_empty() {
            return 0.0;
        }
        let i = ((l.len() as f64 - 1.0) * p).round() as usize;
        l[i.min(l.len() - 1)].as_secs_f64() * 1000.0
    }
}

/// The per-reconcile state of the operatorkit set.
struct State {
    started: Instant,
    store: Store<ConfigMap>,
}

/// One cached read; the last resource records the reconcile.
struct CachedRead {
    name: String,
    last: Option<Arc<Observed>>,
}

impl Resource<ConfigMap, State> for CachedRead {
    fn name(&self) -> &str {
        &self.name
    }

    async fn ensure_created(&self, state: &mut State, obj: &ConfigMap) -> resource::Result<Outcome> {
        std::hint::black_box(state.store.get(&ObjectRef::from_obj(obj)));
        if let Some(observed) = &self.last {
            observed.latency(state.started.elapsed());
            observed.done(obj.metadata.name.as_deref().unwrap_or_default());
        }
        Ok(Outcome::proceed())
    }

    async fn ensure_deleted(&self, _: &mut State, _: &ConfigMap) -> resource::Result<Outcome> {
        Ok(Outcome::proceed())
    }
}

fn rss_kib() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// The CPU time (user + system) this process has used so far, in seconds.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The fields after the command name (which is in parentheses and may hold spaces):
    // utime and stime are the 14th and 15th fields of the line, in clock ticks.
    let after = stat.rsplit_once(')').map(|(_, rest)| rest).unwrap_or_default();
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // Clock ticks are USER_HZ, 100 on Linux.
    (ticks(11) + ticks(12)) / 100.0
}

async fn wait_until(what: &str, limit: Duration, check: impl Fn() -> bool) {
    let deadline = Instant::now() + limit;
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Wait until `counter` has not moved for `quiet`.
async fn quiescent(counter: &AtomicU64, quiet: Duration) {
    let mut last = counter.load(Ordering::Relaxed);
    let mut since = Instant::now();
    while since.elapsed() < quiet {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let now = counter.load(Ordering::Relaxed);
        if now != last {
            last = now;
            since = Instant::now();
        }
    }
}

/// Start the controller `variant` over the objects labelled with its name; returns its
/// observations and a handle that stops it.
fn start_variant(
    client: &Client,
    variant: &str,
    observed: &Arc<Observed>,
) -> (CancellationToken, tokio::task::JoinHandle<()>) {
    let shutdown = CancellationToken::new();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), NS);
    let selector = format!("bench={variant}");
    let task = if variant == "operatorkit" {
        let store_cell: Arc<OnceLock<Store<ConfigMap>>> = Arc::new(OnceLock::new());
        let cell = store_cell.clone();
        let mut set = ResourceSet::builder("v1", semver::VersionReq::parse("^1").expect("req"), move |_, _| {
            let store = cell.get().cloned();
            async move {
                let store = store.ok_or_else(|| operatorkit::ResourceError::msg("NotReady", "store not set"))?;
                Ok(State { started: Instant::now(), store })
            }
        });
        for i in 0..RESOURCES {
            let last = (i == RESOURCES - 1).then(|| observed.clone());
            set = set.resource(CachedRead { name: format!("read-{i}"), last });
        }
        let controller = Controller::<ConfigMap>::builder(client.clone(), "bench-controller")
            .operator(OPERATOR)
            .api(api)
            .label_selector(selector)
            .resource_set(set.build())
            .concurrency(CONCURRENCY)
            .resync(RESYNC)
            .build()
            .expect("the controller builds");
        let _ = store_cell.set(controller.store());
        tokio::spawn(controller.run(shutdown.clone()))
    } else {
        const FINALIZER: &str = "bench.example.com/plain";
        struct Ctx {
            api: Api<ConfigMap>,
            store: Store<ConfigMap>,
            observed: Arc<Observed>,
        }
        let controller = RuntimeController::new(api.clone(), watcher::Config::default().labels(&selector))
            .with_config(RuntimeConfig::default().concurrency(CONCURRENCY));
        let ctx = Arc::new(Ctx { api, store: controller.store(), observed: observed.clone() });
        let stop = shutdown.clone();
        tokio::spawn(
            controller
                .graceful_shutdown_on(async move { stop.cancelled().await })
                .run(
                    |obj: Arc<ConfigMap>, ctx: Arc<Ctx>| async move {
                        // Every reconcile is timed, the one that only adds the finalizer
                        // included, as operatorkit's are.
                        let start = Instant::now();
                        let result = finalizer(&ctx.api, FINALIZER, obj, |event| async {
                            match event {
                                FinalizerEvent::Apply(cm) => {
                                    for _ in 0..RESOURCES {
                                        std::hint::black_box(ctx.store.get(&ObjectRef::from_obj(&*cm)));
                                    }
                                    ctx.observed.done(cm.metadata.name.as_deref().unwrap_or_default());
                                    Ok::<_, std::convert::Infallible>(Action::requeue(RESYNC))
                                }
                                FinalizerEvent::Cleanup(_) => Ok(Action::await_change()),
                            }
                        })
                        .await;
                        ctx.observed.latency(start.elapsed());
                        result
                    },
                    |_, _, _| Action::requeue(Duration::from_millis(5)),
                    ctx,
                )
                .for_each(|_| async {}),
        )
    };
    (shutdown, task)
}

async fn run_variant(variant: &str) {
    let url = std::env::var(URL_ENV).expect("the server URL");
    let client = client(&url);
    let observed = Arc::new(Observed::default());
    let started = Instant::now();
    let (shutdown, task) = start_variant(&client, variant, &observed);
    wait_until("every object reconciled", Duration::from_secs(600), || observed.distinct() >= *OBJECTS).await;
    let per_second = *OBJECTS as f64 / started.elapsed().as_secs_f64();
    let cpu_ms_per_1000 = cpu_seconds() * 1000.0 / (*OBJECTS as f64 / 1000.0);
    let (p50, p99) = (observed.percentile(0.50), observed.percentile(0.99));

    println!("reconciled");
    // The parent says when to measure the idle resync (the other controller's, if any, is
    // measured first).
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = std::io::BufRead::read_line(&mut std::io::stdin().lock(), &mut line);
        let _ = tx.send(());
    });
    let _ = rx.await;
    // Idle resync: nothing changes; every object is reconciled once more from the cache.
    quiescent(&observed.pipelines, Duration::from_secs(2)).await;
    println!("idle-start");
    let pipelines = observed.pipelines.load(Ordering::Relaxed);
    wait_until("a full idle resync", RESYNC * 4, || {
        observed.pipelines.load(Ordering::Relaxed) >= pipelines + *OBJECTS as u64
    })
    .await;
    quiescent(&observed.pipelines, Duration::from_secs(2)).await;
    println!("idle-end");
    let (rss, hwm) = rss_kib();
    shutdown.cancel();
    let _ = task.await;
    println!("result {per_second} {cpu_ms_per_1000} {p50} {p99} {rss} {hwm}");
}

//! kvm-operator's benchmark: the `kvm-operator daemon` binary against a simulated management
//! cluster (testenv, nodes labelled `role=master`/`role=worker`, pods Running and Ready at once)
//! and one simulated workload cluster per cluster (HTTPS with its own CA, as in production),
//! whose Nodes follow the node pods (`workload_sim::pods::NodePods`, which also plays the sidecar
//! publishing the VM IP).
//!
//! It prints:
//! 1. one cluster of 13 nodes (3 masters, 10 workers): the time from creating its KVMConfig until
//!    the `master` and `worker` Endpoints hold every VM IP as ready;
//! 2. `BENCH_CLUSTERS` clusters (default 50) of 5 nodes (1 master, 4 workers): the time until all
//!    are `Created`, the operator's peak RSS, and its RSS once idle;
//! 3. the operator's Kubernetes writes during two idle resyncs once everything is created,
//!    Lease renewals aside (leader election renews by design).
//!
//! Each figure is printed beside the one last recorded in `docs/kvm-operator.md`. Last recorded
//! (50 clusters, load average 8 to 10): peak RSS 61.2 MiB and idle 61.1 MiB, against 68.9 and
//! 68.3 MiB for the previous commit's operator in the same conditions (69.8 and 69.7 MiB recorded
//! before that); all `Created` after 47.1 s (31.9 s; 124.7 s), 13 nodes ready after 1.09 s.
//!
//! Run with `make bench` or `cargo bench -p kvm-operator --bench clusters`.
//! `BENCH_DAEMON_WRAPPER` runs the operator under a command, e.g. a heap profiler:
//! `BENCH_DAEMON_WRAPPER="heaptrack -o /tmp/kvm-operator"`; the memory figures are still the
//! operator's own process (its RSS then includes the profiler's bookkeeping).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use apis::cluster_status::ClusterCondition;
use apis::kvm::KVMConfig;
use k8s_openapi::api::core::v1::{Endpoints, Namespace, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::PostParams;
use kube::{Api, ResourceExt};
use kvm_objects::names::{self, keys};
use testenv::TestEnv;
use tokio_util::sync::CancellationToken;
use workload_sim::WorkloadCluster;
use workload_sim::pods::{self, NodePods};

const NS: &str = "org-bench";
const RESYNC_SECONDS: u64 = 5;
/// How often the stand-ins of the many clusters' node pods look at their pods, and how often
/// the benchmark looks at the clusters. Each look is a LIST against the simulated management
/// cluster, which runs in this process beside the simulated workload clusters: every 100 ms
/// for 50 clusters, the stand-ins alone made 500 LISTs a second of node pods, and on two busy
/// cores the simulation slowed every request of the operator (158 s to all `Created`, against
/// 56 s at one look a second, under the same load).
const FLEET_PERIOD: Duration = Duration::from_secs(1);

fn example(name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/examples").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The example KVMConfig as cluster `id` with `masters` and `workers` nodes.
fn kvm_config(id: &str, masters: usize, workers: usize) -> anyhow::Result<KVMConfig> {
    let text = example("kvm-cluster.yaml").replace("x7k2p", id).replace("org-acme", NS);
    let doc = text
        .split("\n---")
        .map(serde_saphyr::from_str::<serde_json::Value>)
        .filter_map(Result::ok)
        .find(|d| d["kind"] == "KVMConfig")
        .context("the example has a KVMConfig")?;
    let mut config: KVMConfig = serde_json::from_value(doc)?;
    let cluster = &mut config.spec.cluster;
    let kvm = &mut config.spec.kvm;
    let (master_shape, worker_shape) = (kvm.masters[0].clone(), kvm.workers[0].clone());
    cluster.masters = (1..=masters).map(|i| apis::kvm::ClusterNode { id: format!("m{i}{id}") }).collect();
    cluster.workers = (1..=workers).map(|i| apis::kvm::ClusterNode { id: format!("w{i}{id}") }).collect();
    kvm.masters = vec![master_shape; masters];
    kvm.workers = vec![worker_shape; workers];
    Ok(config)
}

/// A cluster: its workload cluster and the node-pod stand-ins.
struct Cluster {
    id: String,
    _wc: Arc<WorkloadCluster>,
}

async fn start_cluster(
    client: &kube::Client,
    id: &str,
    index: usize,
    masters: usize,
    workers: usize,
    period: Duration,
    stop: &CancellationToken,
) -> anyhow::Result<Cluster> {
    // The cluster's certificates and encryption key the operator issues.
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    // HTTPS with the cluster's own CA in its kubeconfig, as in production: a client of a
    // plain-HTTP cluster would load the platform's whole trust store instead.
    let wc = Arc::new(WorkloadCluster::start_tls().await?);
    secrets.create(&PostParams::default(), &wc.kubeconfig_secret(NS, id)).await?;
    let selector = format!("{}={}", keys::POD_WATCHER, names::OPERATOR);
    let pods = NodePods::new(client.clone(), id, selector, keys::VM_IP)
        .ip_prefix(format!("10.{}", 100 + index))
        .label_from_pod("role", keys::APP)
        .label_from_pod(apis::labels::RELEASE_VERSION, apis::labels::RELEASE_VERSION)
        .label_from_pod(apis::labels::KVM_OPERATOR_VERSION, apis::labels::KVM_OPERATOR_VERSION)
        .label("giantswarm.io/provider", "kvm");
    let token = stop.clone();
    pods.spawn(wc.clone(), period, async move { token.cancelled().await });
    let configs: Api<KVMConfig> = Api::namespaced(client.clone(), NS);
    configs.create(&PostParams::default(), &kvm_config(id, masters, workers)?).await?;
    Ok(Cluster { id: id.to_string(), _wc: wc })
}

/// The distinct ready IPs of `endpoints` (the `master` Endpoints list the etcd master twice: in
/// the API subset and in the etcd one).
fn ready_addresses(endpoints: Option<Endpoints>) -> usize {
    endpoints.map_or(0, |e| kvm_objects::endpoints::ready_ips(&e).len())
}

/// The operator's process: `spawned` itself, or, when `spawned` is a wrapper (a profiler's
/// script), its child running `exe`.
fn operator_pid(spawned: u32, exe: &std::path::Path) -> Option<u32> {
    let runs_exe = |pid: u32| std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|e| e == exe);
    if runs_exe(spawned) {
        return Some(spawned);
    }
    std::fs::read_dir("/proc").ok()?.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok()).find(|pid| {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // `pid (comm) state ppid ...`; comm may hold spaces, so read after its `)`.
        let parent = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok());
        parent == Some(spawned) && runs_exe(*pid)
    })
}

fn peak_rss_mib(pid: u32) -> Option<f64> {
    status_mib(pid, "VmHWM:")
}

/// The CPU time process `pid` has used (user and system), from `/proc/<pid>/stat` (in clock
/// ticks of 1/100 s, Linux's `USER_HZ`).
fn cpu_seconds(pid: &str) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let mut fields = stat.rsplit_once(')')?.1.split_whitespace();
    // After `comm`: state is field 3; utime and stime are fields 14 and 15.
    let utime: f64 = fields.nth(11)?.parse().ok()?;
    let stime: f64 = fields.next()?.parse().ok()?;
    Some((utime + stime) / 100.0)
}

/// A memory figure of `/proc/<pid>/status` (`VmHWM:` peak, `VmRSS:` now), in MiB.
fn status_mib(pid: u32, field: &str) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

/// Poll `done` every `every` until it holds, at most `limit`.
async fn wait<F, Fut>(what: &str, every: Duration, limit: Duration, mut done: F) -> anyhow::Result<Duration>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<bool>>,
{
    let start = Instant::now();
    loop {
        if done().await.unwrap_or(false) {
            return Ok(start.elapsed());
        }
        if start.elapsed() > limit {
            anyhow::bail!("{what}: not done after {} s", limit.as_secs());
        }
        tokio::time::sleep(every).await;
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let clusters: usize = std::env::var("BENCH_CLUSTERS").ok().and_then(|v| v.parse().ok()).unwrap_or(50);
    let sim = pods::hosts(3, 10, "2000", "4Ti", 500);
    let mc = TestEnv::builder().simulation(sim).start().await?;
    let client = mc.client();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in apis::all_crds() {
        crds.create(&PostParams::default(), &crd).await?;
    }
    for ns in ["giantswarm", NS] {
        let ns: Namespace = serde_json::from_value(serde_json::json!({"metadata": {"name": ns}}))?;
        Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &ns).await?;
    }
    let release = example("kvm-release-v20.1.0.yaml");
    let release: apis::release::Release = serde_saphyr::from_str(&release)?;
    Api::<apis::release::Release>::all(client.clone()).create(&PostParams::default(), &release).await?;

    let exe = std::path::Path::new(env!("CARGO_BIN_EXE_kvm-operator"));
    let wrapper = std::env::var("BENCH_DAEMON_WRAPPER").unwrap_or_default();
    let mut command = match wrapper.split_whitespace().collect::<Vec<_>>().split_first() {
        Some((program, args)) => {
            let mut c = tokio::process::Command::new(program);
            c.args(args).arg(exe);
            c
        }
        None => tokio::process::Command::new(exe),
    };
    let mut daemon = command
        .args(["daemon", "--listen", "127.0.0.1:0", "--dns-servers", "10.61.0.53"])
        .args(["--leader-election-namespace", "giantswarm", "--poll-seconds", "1"])
        .args(["--resync-seconds", &RESYNC_SECONDS.to_string(), "--concurrency", "8"])
        .env("KUBECONFIG", mc.kubeconfig_path())
        .env("RUST_LOG", "warn")
        .kill_on_drop(true)
        .spawn()?;
    let spawned = daemon.id().unwrap_or_default();
    let stop = CancellationToken::new();

    // 1. One cluster of 13 nodes, until every VM IP is a ready address.
    let start = Instant::now();
    let big = start_cluster(&client, "b13nd", 0, 3, 10, Duration::from_millis(100), &stop).await?;
    let endpoints: Api<Endpoints> = Api::namespaced(client.clone(), &big.id);
    wait("13 ready addresses", Duration::from_millis(20), Duration::from_secs(300), || async {
        let masters = ready_addresses(endpoints.get_opt(names::MASTER_SERVICE).await?);
        let workers = ready_addresses(endpoints.get_opt(names::WORKER_SERVICE).await?);
        Ok(masters == 3 && workers == 10)
    })
    .await?;
    let thirteen = start.elapsed();
    let pid = operator_pid(spawned, exe).context("the operator's process")?;

    // 2. Many clusters of 5 nodes, until all are Created.
    let configs: Api<KVMConfig> = Api::namespaced(client.clone(), NS);
    let start = Instant::now();
    let mut started = Vec::new();
    for i in 0..clusters {
        started.push(start_cluster(&client, &format!("c{i:04}"), i + 1, 1, 4, FLEET_PERIOD, &stop).await?);
    }
    let ids: Vec<String> = started.iter().map(|c| c.id.clone()).collect();
    let mut last = Instant::now();
    wait(&format!("{clusters} clusters Created"), FLEET_PERIOD, Duration::from_secs(1800), || {
        let configs = configs.clone();
        let ids = ids.clone();
        let report = last.elapsed() > Duration::from_secs(30);
        if report {
            last = Instant::now();
        }
        let elapsed = start.elapsed();
        async move {
            let list = configs.list(&Default::default()).await?.items;
            let created: BTreeMap<String, bool> = list
                .iter()
                .map(|c| {
                    let done = c.status.as_ref().is_some_and(|s| s.cluster.has_condition(ClusterCondition::Created));
                    (c.metadata.name.clone().unwrap_or_default(), done)
                })
                .collect();
            let n = ids.iter().filter(|id| created.get(*id).copied().unwrap_or(false)).count();
            if report {
                eprintln!("  {:>5.0} s: {n} of {} Created", elapsed.as_secs_f64(), ids.len());
                // What the first clusters not Created yet wait for, in their own words.
                for config in list.iter().filter(|c| ids.contains(&c.name_any()) && !created[&c.name_any()]).take(3) {
                    let ready = config.status.as_ref().and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"));
                    let why =
                        ready.map_or("no Ready condition".to_string(), |c| format!("{}: {}", c.reason, c.message));
                    eprintln!("         {}: {why}", config.name_any());
                }
            }
            Ok(n == ids.len())
        }
    })
    .await?;
    let all_created = start.elapsed();
    if let Some(status) = daemon.try_wait()? {
        anyhow::bail!("the operator exited with {status}");
    }
    let rss = peak_rss_mib(pid).unwrap_or(f64::NAN);

    // 3. Idle: let requeues settle for one resync, then count writes over two.
    tokio::time::sleep(Duration::from_secs(RESYNC_SECONDS)).await;
    mc.handle().reset_requests();
    tokio::time::sleep(Duration::from_secs(2 * RESYNC_SECONDS)).await;
    let counts = mc.handle().requests();
    let writes: Vec<(String, u64)> = counts
        .by_resource
        .iter()
        .filter(|((verb, resource), n)| verb.is_write() && **n > 0 && !resource.starts_with("leases"))
        .map(|((verb, resource), n)| (format!("{verb:?} {resource}"), *n))
        .collect();
    let total: u64 = writes.iter().map(|(_, n)| n).sum();
    let idle_rss = status_mib(pid, "VmRSS:").unwrap_or(f64::NAN);
    let operator_cpu = cpu_seconds(&pid.to_string()).unwrap_or(f64::NAN);
    let simulation_cpu = cpu_seconds("self").unwrap_or(f64::NAN);

    // The figures last recorded in docs/kvm-operator.md, with 50 clusters.
    let before = |figure: &str| if clusters == 50 { format!("  (before: {figure})") } else { String::new() };
    println!("kvm-operator against a simulated management cluster (immediate readiness):");
    println!(
        "  13 nodes (3 masters, 10 workers) to all Endpoints ready   {:.2} s{}",
        thirteen.as_secs_f64(),
        before("1.09 s")
    );
    println!(
        "  {clusters} clusters of 5 nodes, all Created after          {:.1} s{}",
        all_created.as_secs_f64(),
        before("47.1 s")
    );
    println!("  operator peak RSS                                         {rss:.1} MiB{}", before("61.2 MiB"));
    println!("  operator RSS once idle                                    {idle_rss:.1} MiB{}", before("61.1 MiB"));
    println!(
        "  Kubernetes writes in two idle resyncs ({} s), leases aside  {total}{}{}",
        2 * RESYNC_SECONDS,
        if writes.is_empty() { String::new() } else { format!(" {writes:?}") },
        before("0")
    );
    println!(
        "  CPU time over the run: the operator {operator_cpu:.1} s, the simulated clusters and this driver {simulation_cpu:.1} s"
    );
    stop.cancel();
    let _ = daemon.kill().await;
    Ok(())
}

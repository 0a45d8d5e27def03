//! Benchmark of an operator's memory with 100 clusters' Secrets (`make bench`,
//! `cargo bench -p node-lifecycle --bench pki_cache`).
//!
//! The parent process runs the management cluster (testenv) with 100 cluster namespaces. The
//! operator's side runs in a child process (this binary re-executed with
//! `PKI_CACHE_BENCH_MC=<url>`), so its RSS is its own: what both operators keep of Secrets,
//! the watch of every Secret's metadata and one workload-cluster client per cluster
//! (`node_lifecycle::clients::WorkloadClients`).
//!
//! Two runs, each with a management cluster and an operator process of its own:
//! * before: every cluster's five certificates and encryption key written by someone else, as
//!   cert-operator did; the operator watches them and builds each cluster's client from its
//!   `api` certificate;
//! * after: no Secrets; the operator issues every cluster's PKI itself
//!   (`pki_secrets::ensure`: two CAs, five certificates, the management kubeconfig and the
//!   encryption key), watches them and builds each client from the issued kubeconfig.
//!
//! Printed, from the operator process's `/proc/self/status`: its RSS once idle (the watch
//! synced), its RSS with the Secrets watched and the clients cached, and its peak (VmHWM); and
//! the time to issue and store all clusters' PKI.
//!
//! `BENCH_CLUSTERS` changes the cluster count.

use std::time::{Duration, Instant, SystemTime};

use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::Api;
use kube::api::PostParams;
use node_lifecycle::clients::{ClientOptions, ClusterRef, WorkloadClients};
use node_lifecycle::pki_secrets::ensure;
use pki::ensure::{EncryptionFormat, EnsureRequest};
use tokio_util::sync::CancellationToken;

const MC_ENV: &str = "PKI_CACHE_BENCH_MC";

fn clusters() -> usize {
    std::env::var("BENCH_CLUSTERS").ok().and_then(|v| v.parse().ok()).unwrap_or(100)
}

fn id(n: usize) -> String {
    format!("c{n:04}")
}

fn names(id: &str) -> pki::ClusterNames {
    pki::ClusterNames {
        cluster_id: id.to_string(),
        api_domain: format!("api.{id}.k8s.example.com"),
        internal_api_domain: Some(format!("internal-api.{id}.k8s.example.com")),
        etcd_domain: format!("etcd.{id}.k8s.example.com"),
        etcd_member_domains: (0..=3).map(|m| format!("etcd{m}.{id}.k8s.example.com")).collect(),
        cluster_domain: "cluster.local".into(),
        service_cidr: "172.31.0.0/16".into(),
    }
}

fn status_kib() -> (u64, u64) {
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

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    match (std::env::var(MC_ENV), std::env::var(PHASE_ENV)) {
        (Ok(url), Ok(phase)) => runtime.block_on(operator(&url, &phase)),
        _ => runtime.block_on(parent()),
    }
}

const PHASE_ENV: &str = "PKI_CACHE_BENCH_PHASE";

/// A management cluster with `clusters()` namespaces; with `external`, each holds a cluster's
/// certificates and encryption key as cert-operator wrote them before the operators issued
/// them (no kubeconfig: the operators used the `api` certificate).
async fn management_cluster(external: bool) -> testenv::TestEnv {
    let env = testenv::TestEnv::start().await.expect("testenv starts");
    let namespaces: Api<Namespace> = Api::all(env.client());
    for n in 0..clusters() {
        let id = id(n);
        let ns: Namespace = serde_json::from_value(serde_json::json!({"metadata": {"name": id}})).expect("namespace");
        namespaces.create(&PostParams::default(), &ns).await.expect("namespace created");
        if external {
            let secrets: Api<Secret> = Api::namespaced(env.client(), &id);
            let issued = pki::issue_cluster_pki(&names(&id), &pki::IssueOptions::at(SystemTime::now())).expect("pki");
            let key = pki::EncryptionKey::generate().expect("key");
            let mut all = issued.secrets(&id, &id)[2..].to_vec();
            all.push(pki::secret::encryption_provider_config_secret(&id, &id, &key));
            for mut secret in all {
                secret.metadata.labels.as_mut().expect("labels").remove(pki::secret::ISSUED_BY_LABEL);
                secrets.create(&PostParams::default(), &secret).await.expect("Secret created");
            }
        }
    }
    env
}

async fn run_phase(env: &testenv::TestEnv, phase: &str) {
    let exe = std::env::current_exe().expect("this benchmark's path");
    let output = tokio::process::Command::new(exe)
        .env(MC_ENV, env.base_url())
        .env(PHASE_ENV, phase)
        .stderr(std::process::Stdio::inherit())
        .output()
        .await
        .expect("the operator's side runs");
    assert!(output.status.success(), "the operator's side failed");
    print!("{}", String::from_utf8_lossy(&output.stdout));
}

async fn parent() {
    println!("pki cache: {} clusters; the operator's side in a process of its own", clusters());
    let before = management_cluster(true).await;
    run_phase(&before, "before").await;
    drop(before);
    let after = management_cluster(false).await;
    run_phase(&after, "after").await;
}

/// The operator's side: the Secret watch and clients as both operators run them; in phase
/// `after`, it issues every cluster's PKI first.
async fn operator(url: &str, phase: &str) {
    let config = kube::Config::new(url.parse().expect("a URL"));
    let mc = kube::Client::try_from(config).expect("client");
    let clients = WorkloadClients::new(mc.clone(), ClientOptions::default());
    let shutdown = CancellationToken::new();
    let watch = tokio::spawn(clients.clone().run(shutdown.clone()));
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (idle, _) = status_kib();

    let count = clusters();
    let issuing = phase == "after";
    let started = Instant::now();
    if issuing {
        for n in 0..count {
            let (id, names) = (id(n), names(&id(n)));
            let request = EnsureRequest {
                namespace: &id,
                names: &names,
                encryption: EncryptionFormat::ProviderConfig,
                options: pki::IssueOptions::at(SystemTime::now()),
                renewal: pki::RenewalPolicy::default(),
                kubeconfig_server: Some(format!("https://{}", names.api_domain)),
                service_account_v2: false,
            };
            let ensured = ensure(&mc, &request).await.expect("issued");
            assert_eq!(ensured.created.len(), 9, "every Secret of {id}");
        }
    }
    let issued = started.elapsed();
    for n in 0..count {
        let id = id(n);
        let cluster = ClusterRef::new(id.clone(), id.clone(), format!("api.{id}.k8s.example.com"));
        let client = clients.client_for(&cluster).await.expect("a client from the cluster's Secrets");
        let from = if issuing { format!("{id}-kubeconfig") } else { format!("{id}-api") };
        assert_eq!(client.secret(), from);
    }
    assert_eq!(clients.cached(), count);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (rss, peak) = status_kib();
    shutdown.cancel();
    let _ = watch.await;

    if issuing {
        println!(
            "  after:  the operator issues 9 Secrets per cluster (2 CAs, 5 certificates, kubeconfig, key): {:.2} s, {:.1} ms per cluster",
            issued.as_secs_f64(),
            issued.as_secs_f64() * 1000.0 / count as f64
        );
    } else {
        println!("  before: 6 Secrets per cluster written by cert-operator (5 certificates, key), none issued");
    }
    println!(
        "          RSS idle {:.1} MiB, with {} Secrets watched and {count} clients cached {:.1} MiB (peak {:.1} MiB)",
        mib(idle),
        count * if issuing { 9 } else { 6 },
        mib(rss),
        mib(peak)
    );
}

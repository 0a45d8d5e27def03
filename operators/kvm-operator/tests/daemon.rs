//! The daemon binary as a pod runs it, against testenv: it becomes ready (`/readyz`), serves
//! `/metrics` (with the original's `statusresource_*` series) and `/version`, holds the Lease of
//! its version, and the kubelet's SIGTERM stops it cleanly and
//! hands the Lease over at once (empty holder) instead of leaving it to expire. With
//! `--sharding` it also joins its version's ring and assigns clusters to its shard.

use std::time::Duration;

use apis::kvm::KVMConfig;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::PostParams;
use kube::{Api, ResourceExt};
use testenv::TestEnv;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

mod support;

/// A plain HTTP/1.0 GET on loopback: the status code and the body.
async fn get(port: u16, path: &str) -> anyhow::Result<(u16, String)> {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    stream.write_all(format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").as_bytes()).await?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await?;
    let code = response.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = response.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    Ok((code, body))
}

async fn eventually<T, F, Fut>(seconds: u64, what: &str, mut check: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Option<T>>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(seconds);
    loop {
        if let Ok(Some(value)) = check().await {
            return Ok(value);
        }
        if tokio::time::Instant::now() > deadline {
            anyhow::bail!("timed out waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A management cluster with the CRDs and the `giantswarm` namespace.
async fn management() -> anyhow::Result<TestEnv> {
    let env = TestEnv::start().await?;
    let client = env.client();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in apis::all_crds() {
        crds.create(&PostParams::default(), &crd).await?;
    }
    let ns: Namespace = serde_json::from_value(serde_json::json!({"metadata": {"name": "giantswarm"}}))?;
    Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &ns).await?;
    Ok(env)
}

/// Start `kvm-operator daemon` with `args` and `envs` on a free loopback port: the process and
/// its port.
///
/// Another test's server may take the port between the probe and the daemon's bind (the daemon
/// then exits, and that server may answer /readyz): a daemon that exits is started again on
/// another port, and the port counts as the daemon's only once its /metrics names the cluster
/// controller.
async fn start_daemon(
    env: &TestEnv,
    args: &[&str],
    envs: &[(&str, &str)],
) -> anyhow::Result<(tokio::process::Child, u16)> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let mut daemon = tokio::process::Command::new(env!("CARGO_BIN_EXE_kvm-operator"))
            .args(["daemon", "--listen", &format!("127.0.0.1:{port}"), "--dns-servers", "10.61.0.53"])
            .args(["--leader-election-namespace", "giantswarm"])
            .args(args)
            .envs(envs.iter().copied())
            .env("KUBECONFIG", env.kubeconfig_path())
            .env("RUST_LOG", "warn")
            .kill_on_drop(true)
            .spawn()?;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        let ours = loop {
            if daemon.try_wait()?.is_some() {
                break false;
            }
            let last = match get(port, "/metrics").await {
                Ok((200, metrics)) if metrics.contains("kvm-operator-cluster-controller") => break true,
                Ok((code, body)) => format!("{code}: {}", body.chars().take(300).collect::<String>()),
                Err(e) => e.to_string(),
            };
            anyhow::ensure!(
                tokio::time::Instant::now() < deadline,
                "port {port}: /metrics did not name the cluster controller in 60 s; last answer {last}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        if ours {
            return Ok((daemon, port));
        }
        anyhow::ensure!(attempt < 5, "the daemon exited at start {attempt} times");
    }
}

/// Send SIGTERM and wait for a clean exit.
async fn terminate(mut daemon: tokio::process::Child) -> anyhow::Result<()> {
    let pid = daemon.id().expect("the daemon is running");
    let kill = std::process::Command::new("kill").args(["-TERM", &pid.to_string()]).status()?;
    assert!(kill.success(), "kill -TERM {pid}: {kill:?}");
    let exited = tokio::time::timeout(Duration::from_secs(20), daemon.wait())
        .await
        .map_err(|_| anyhow::anyhow!("the daemon was still running 20 s after SIGTERM"))??;
    assert!(exited.success(), "the daemon exits cleanly on SIGTERM: {exited:?}");
    Ok(())
}

fn holder(lease: Option<Lease>) -> Option<String> {
    lease.and_then(|l| l.spec?.holder_identity).filter(|h| !h.is_empty())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_becomes_ready_and_sigterm_stops_it_and_releases_its_lease() -> anyhow::Result<()> {
    let env = management().await?;
    let client = env.client();
    let (daemon, port) = start_daemon(&env, &[], &[]).await?;

    eventually(60, "/readyz to answer 200", || async { Ok((get(port, "/readyz").await?.0 == 200).then_some(())) })
        .await?;
    let (code, healthz) = get(port, "/healthz").await?;
    assert_eq!(code, 200, "{healthz}");
    // `/version`, as the original served its version bundle there.
    let (code, version) = get(port, "/version").await?;
    assert_eq!(code, 200, "{version}");
    let version: serde_json::Value = serde_json::from_str(&version)?;
    assert_eq!(version, serde_json::json!({"name": "kvm-operator", "version": env!("CARGO_PKG_VERSION")}));
    // A controller's series appear once it has started; readiness comes with the first list.
    eventually(60, "the cluster controller's metrics", || async {
        let (code, metrics) = get(port, "/metrics").await?;
        Ok((code == 200 && metrics.contains("kvm-operator-cluster-controller")).then_some(()))
    })
    .await?;

    // The original's status metrics, from the cluster controller's cache: a cluster's current
    // lifecycle status and how long its creation took.
    let mut config = support::kvm_config();
    config.metadata.namespace = Some("default".into());
    let configs: Api<KVMConfig> = Api::namespaced(client.clone(), "default");
    let created = configs.create(&PostParams::default(), &config).await?;
    let id = created.name_any();
    let born = created.metadata.creation_timestamp.clone().expect("creation time").0;
    let at = born.checked_add(jiff::SignedDuration::from_secs(300))?;
    configs
        .patch_status(
            &id,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(serde_json::json!({"status": {"cluster": {"conditions": [
                {"type": "Created", "status": "True", "lastTransitionTime": at.to_string()}
            ]}}})),
        )
        .await?;
    let metrics = eventually(60, "the status metrics of the cluster", || async {
        let (_, metrics) = get(port, "/metrics").await?;
        Ok(metrics
            .contains(&format!("statusresource_cluster_status{{cluster_id=\"{id}\",status=\"Created\"}} 1"))
            .then_some(metrics))
    })
    .await?;
    assert!(
        metrics.contains(&format!("statusresource_cluster_creation_seconds{{cluster_id=\"{id}\"}} 300")),
        "{metrics}"
    );

    let leases: Api<Lease> = Api::namespaced(client.clone(), "giantswarm");
    let name = kvm_operator::daemon::lease_name(env!("CARGO_PKG_VERSION"));
    assert_eq!(name, "kvm-operator-4.0.0");
    eventually(60, "the daemon to hold its Lease", || async { Ok(holder(leases.get_opt(&name).await?)) }).await?;

    terminate(daemon).await?;
    let lease = leases.get(&name).await?;
    assert_eq!(holder(Some(lease.clone())), None, "the Lease is released: {:?}", lease.spec);
    Ok(())
}

/// `--sharding`: the daemon holds a shard Lease named after its pod in its version's ring, is
/// ready once its shard is in the ring, assigns (as the leader) a KVMConfig to its shard, and
/// releases both Leases on SIGTERM.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sharded_daemon_joins_its_ring_assigns_clusters_and_leaves_on_sigterm() -> anyhow::Result<()> {
    let env = management().await?;
    let client = env.client();
    let (daemon, port) =
        start_daemon(&env, &["--sharding", "true"], &[("POD_NAME", "kvm-operator-7d9f-x2k4p")]).await?;
    eventually(60, "/readyz to answer 200", || async { Ok((get(port, "/readyz").await?.0 == 200).then_some(())) })
        .await?;
    let (_, readyz) = get(port, "/readyz").await?;
    let ring = kvm_operator::daemon::lease_name(env!("CARGO_PKG_VERSION"));
    assert!(readyz.contains(&format!("sharding/{ring}")), "the shard is a readiness check: {readyz}");

    let leases: Api<Lease> = Api::namespaced(client.clone(), "giantswarm");
    let shard = "kvm-operator-7d9f-x2k4p";
    eventually(60, "the shard Lease to be held", || async { Ok(holder(leases.get_opt(shard).await?)) }).await?;
    let lease = leases.get(shard).await?;
    assert_eq!(lease.labels().get("operatorkit.giantswarm.io/ring"), Some(&ring), "the shard Lease names its ring");
    eventually(60, "the leader Lease to be held", || async { Ok(holder(leases.get_opt(&ring).await?)) }).await?;

    // A pod that is not a node pod: the drainer's related watch selects node pods only, so
    // the sharder must leave it alone.
    let other: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "unrelated", "namespace": "default", "labels": {"app": "unrelated"}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}
    }))?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.create(&PostParams::default(), &other).await?;
    let mut config = support::kvm_config();
    config.metadata.namespace = Some("default".into());
    let configs: Api<KVMConfig> = Api::namespaced(client.clone(), "default");
    configs.create(&PostParams::default(), &config).await?;
    let label = format!("shard.operatorkit.giantswarm.io/{ring}");
    let name = config.name_any();
    eventually(60, "the KVMConfig to be assigned to the shard", || async {
        Ok(configs.get(&name).await?.labels().get(&label).filter(|s| *s == shard).map(|_| ()))
    })
    .await?;

    assert_eq!(pods.get("unrelated").await?.labels().get(&label), None, "a pod that is not a node pod is not assigned");
    terminate(daemon).await?;
    assert_eq!(holder(leases.get_opt(shard).await?), None, "the shard Lease is released");
    assert_eq!(holder(leases.get_opt(&ring).await?), None, "the leader Lease is released");
    Ok(())
}

/// Every query of the chart's Grafana dashboard names a metric this daemon serves on `/metrics`
/// (with sharding on, so that the shard panels' metrics are there too): a renamed or removed
/// metric fails here instead of leaving an empty panel.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_charts_dashboard_queries_only_metrics_the_daemon_serves() -> anyhow::Result<()> {
    let env = management().await?;
    let (daemon, port) =
        start_daemon(&env, &["--sharding", "true"], &[("POD_NAME", "kvm-operator-7d9f-d4sh1")]).await?;
    let (code, metrics) = get(port, "/metrics").await?;
    assert_eq!(code, 200, "{metrics}");
    let problems = packaging::dashboards::problems("kvm-operator", &metrics)?;
    assert!(problems.is_empty(), "the dashboard reads metrics the daemon does not serve:\n{}", problems.join("\n"));
    terminate(daemon).await?;
    Ok(())
}

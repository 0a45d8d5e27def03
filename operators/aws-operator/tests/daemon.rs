//! The daemon binary as a pod runs it: the kubelet's SIGTERM stops it cleanly, and it hands its
//! leader Lease over at once (empty holder) instead of leaving it to expire; and it runs the drain
//! executor, so that a DrainerConfig of its version drains a workload-cluster node with no
//! node-operator; and its S3 flags reach the cluster's buckets.

mod support;

use std::time::Duration;

use apis::drainer::{CONDITION_DRAINED, DrainerConfig};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Secret};
use kube::Api;
use kube::api::PostParams;
use support::*;
use workload_sim::{Machine, Workload, WorkloadCluster};

/// The daemon binary against the fixture's testenv and moto.
fn daemon(f: &Fixture, ami: &std::path::Path) -> anyhow::Result<tokio::process::Child> {
    daemon_with(f, ami, "127.0.0.1:0", &[], &[])
}

/// The daemon binary listening on `listen`, with `args` and `envs` besides the fixture's.
fn daemon_with(
    f: &Fixture,
    ami: &std::path::Path,
    listen: &str,
    args: &[&str],
    envs: &[(&str, &str)],
) -> anyhow::Result<tokio::process::Child> {
    Ok(tokio::process::Command::new(env!("CARGO_BIN_EXE_aws-operator"))
        .args(["daemon", "--listen", listen, "--installation", &f.installation, "--region", REGION])
        .args(["--control-plane-role-arn", &format!("arn:aws:iam::{}:role/aws-operator", f.cp_account)])
        .args(["--aws-endpoint-url", &f.moto.endpoint(), "--ami-file"])
        .arg(ami)
        .args(["--leader-election-namespace", "giantswarm"])
        .args(args)
        .envs(envs.iter().copied())
        .env("KUBECONFIG", f.env.kubeconfig_path())
        .env("AWS_ACCESS_KEY_ID", "AKIASHUTDOWN")
        .env("AWS_SECRET_ACCESS_KEY", "secret")
        .env("RUST_LOG", "warn")
        .kill_on_drop(true)
        .spawn()?)
}

fn ami_file() -> anyhow::Result<tempfile::NamedTempFile> {
    let ami = tempfile::NamedTempFile::new()?;
    std::fs::write(ami.path(), format!(r#"{{"{FLATCAR}": {{"{REGION}": "ami-0a1b2c3d4e5f60001"}}}}"#))?;
    Ok(ami)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_the_daemon_and_releases_its_lease() -> anyhow::Result<()> {
    let f = Fixture::start().await?;
    f.apply_basics().await?;
    let ami = ami_file()?;
    let mut daemon = daemon(&f, ami.path())?;

    let leases: Api<Lease> = Api::namespaced(f.client.clone(), "giantswarm");
    let name = aws_operator::daemon::lease_name(VERSION);
    let holder = |lease: Option<Lease>| lease.and_then(|l| l.spec?.holder_identity).filter(|h| !h.is_empty());
    eventually(60, "the daemon to hold its Lease", || async { Ok(holder(leases.get_opt(&name).await?)) }).await?;

    let pid = daemon.id().expect("the daemon is running");
    let kill = std::process::Command::new("kill").args(["-TERM", &pid.to_string()]).status()?;
    assert!(kill.success(), "kill -TERM {pid}: {kill:?}");
    let exited = tokio::time::timeout(Duration::from_secs(20), daemon.wait())
        .await
        .map_err(|_| anyhow::anyhow!("the daemon was still running 20 s after SIGTERM"))??;
    assert!(exited.success(), "the daemon exits cleanly on SIGTERM: {exited:?}");
    let lease = leases.get(&name).await?;
    assert_eq!(holder(Some(lease.clone())), None, "the Lease is released: {:?}", lease.spec);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_drains_the_nodes_its_drainer_configs_name() -> anyhow::Result<()> {
    let f = Fixture::start().await?;
    f.apply_basics().await?;
    let wc = WorkloadCluster::start().await?;
    wc.add_machine(&Machine::new("wc-node-1")).await?;
    let workload = Workload::new("web", "web", 3).max_unavailable(1);
    wc.deploy(&workload).await?;
    wc.wait_ready("web", "web", 3).await?;
    wc.add_machine(&Machine::new("wc-node-2")).await?;
    let id = "drn01";
    wc.install_kubeconfig(&Api::<Secret>::namespaced(f.client.clone(), NS), NS, id).await?;
    let ami = ami_file()?;
    let _daemon = daemon(&f, ami.path())?;

    let dc: DrainerConfig = serde_json::from_value(serde_json::json!({
        "apiVersion": "core.giantswarm.io/v1alpha1", "kind": "DrainerConfig",
        "metadata": {"name": "wc-node-1", "namespace": NS,
                     "labels": {"aws-operator.giantswarm.io/version": VERSION, apis::labels::CLUSTER: id}},
        "spec": {"guest": {"cluster": {"api": {"endpoint": format!("api.{id}.k8s.example.com")}, "id": id},
                           "node": {"name": "wc-node-1"}},
                 "versionBundle": {"version": VERSION}}
    }))?;
    let dcs: Api<DrainerConfig> = Api::namespaced(f.client.clone(), NS);
    dcs.create(&PostParams::default(), &dc).await?;
    let drained = eventually(90, "the DrainerConfig to be Drained", || async {
        Ok(dcs.get("wc-node-1").await?.status.filter(|s| s.has_condition(CONDITION_DRAINED)))
    })
    .await?;
    assert_eq!(drained.evicted_pods, 3, "{drained:?}");
    let node = Api::<Node>::all(wc.client()).get("wc-node-1").await?;
    assert_eq!(node.spec.and_then(|s| s.unschedulable), Some(true), "the drained node is cordoned");
    assert!(wc.pods_on("wc-node-1").await?.is_empty(), "no workload pod is left on the node");
    Ok(())
}

/// Every query of the chart's Grafana dashboard names a metric this daemon serves on `/metrics`
/// (with sharding on, so that the shard panels' metrics are there too): a renamed or removed
/// metric fails here instead of leaving an empty panel.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_charts_dashboard_queries_only_metrics_the_daemon_serves() -> anyhow::Result<()> {
    let f = Fixture::start().await?;
    f.apply_basics().await?;
    let ami = ami_file()?;
    // Another test's server may take the port between the probe and the daemon's bind: the
    // metrics count only when they name this operator's controllers.
    let metrics = 'started: {
        for _ in 0..5 {
            let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
            let listen = format!("127.0.0.1:{port}");
            let envs = [("POD_NAME", "aws-operator-7d9f-d4sh1")];
            let mut daemon = daemon_with(&f, ami.path(), &listen, &["--sharding", "true"], &envs)?;
            let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
            while daemon.try_wait()?.is_none() {
                let body = get(port, "/metrics").await.unwrap_or_default();
                if body.contains(aws_operator::controllers::cluster::CONTROLLER) {
                    // `/version`, as the original served its version at `/`.
                    let version: serde_json::Value = serde_json::from_str(&get(port, "/version").await?)?;
                    let _ = daemon.start_kill();
                    assert_eq!(version, serde_json::json!({"name": "aws-operator", "version": VERSION}));
                    break 'started body;
                }
                anyhow::ensure!(tokio::time::Instant::now() < deadline, "no metrics on {listen} in 60 s");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
        anyhow::bail!("the daemon did not start on a free port in 5 tries");
    };
    let problems = packaging::dashboards::problems("aws-operator", &metrics)?;
    assert!(problems.is_empty(), "the dashboard reads metrics the daemon does not serve:\n{}", problems.join("\n"));
    Ok(())
}

/// A plain HTTP/1.0 GET on loopback: the body.
async fn get(port: u16, path: &str) -> anyhow::Result<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    stream.write_all(format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").as_bytes()).await?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await?;
    Ok(response.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default())
}

/// `--s3-bucket-tagging=false` leaves the cluster's buckets untagged (for regions where S3 refuses
/// bucket tagging), `--access-log-expiration-days` sets the access logs' expiry, and a daemon
/// started with another value moves the existing bucket to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bucket_settings_reach_the_cluster_buckets() -> anyhow::Result<()> {
    let f = Fixture::start().await?;
    f.apply_basics().await?;
    let id = "bkt01";
    f.credential_secret(id).await?;
    f.cluster(id).await?;
    let tenant = f.tenant_clients().await?;
    let bucket = aws_stacks::names::bucket(&tenant.account_id, id);
    let logs = aws_stacks::names::access_log_bucket(&tenant.account_id, id);
    let expiry = |bucket: String| {
        let tenant = tenant.clone();
        async move {
            let Ok(out) = tenant.s3.get_bucket_lifecycle_configuration().bucket(&bucket).send().await else {
                return Ok::<_, anyhow::Error>(None);
            };
            Ok(out
                .rules()
                .iter()
                .find(|r| r.id() == Some("ExpirationLogs"))
                .and_then(|r| r.expiration())
                .and_then(|e| e.days()))
        }
    };
    let ami = ami_file()?;
    let mut first = daemon_with(
        &f,
        ami.path(),
        "127.0.0.1:0",
        &["--s3-bucket-tagging=false", "--access-log-expiration-days=30"],
        &[],
    )?;
    let days = eventually(120, "the access-log bucket's expiry", || async {
        let logged =
            tenant.s3.get_bucket_logging().bucket(&bucket).send().await.ok().and_then(|l| l.logging_enabled().cloned());
        Ok(match logged {
            Some(_) => expiry(logs.clone()).await?,
            None => None,
        })
    })
    .await?;
    assert_eq!(days, 30);
    for name in [&bucket, &logs] {
        let tagging = tenant.s3.get_bucket_tagging().bucket(name).send().await;
        let code = tagging.as_ref().err().and_then(|e| e.as_service_error()).and_then(|e| e.meta().code());
        assert_eq!(code, Some("NoSuchTagSet"), "bucket {name} is not tagged: {tagging:?}");
    }
    first.kill().await?;

    let _second = daemon_with(&f, ami.path(), "127.0.0.1:0", &["--access-log-expiration-days=90"], &[])?;
    eventually(120, "the expiry to follow the new setting", || async {
        Ok((expiry(logs.clone()).await? == Some(90)).then_some(()))
    })
    .await?;
    Ok(())
}

/// The daemon holds its member Lease of the AWS request budget and sends each account no more
/// than its flags allow: reads and writes counted apart in moto's request log, over every
/// five-second window of a cluster's creation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_keeps_each_account_within_its_request_budget() -> anyhow::Result<()> {
    const READS: f64 = 4.0;
    const WRITES: f64 = 2.0;
    let f = Fixture::start().await?;
    f.apply_basics().await?;
    let id = "bud01";
    f.credential_secret(id).await?;
    f.cluster(id).await?;
    let ami = ami_file()?;
    let started = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_secs_f64();
    let _daemon = daemon_with(
        &f,
        ami.path(),
        "127.0.0.1:0",
        &[
            &format!("--aws-read-requests-per-second={READS}"),
            &format!("--aws-write-requests-per-second={WRITES}"),
            "--aws-request-burst-seconds=1",
        ],
        &[],
    )?;
    let leases: Api<Lease> = Api::namespaced(f.client.clone(), "giantswarm");
    let selector = kube::api::ListParams::default().labels("aws-operator.giantswarm.io/request-budget=aws-operator");
    let member = eventually(60, "the daemon's member Lease", || async {
        Ok(leases
            .list(&selector)
            .await?
            .items
            .into_iter()
            .find(|l| l.spec.as_ref().and_then(|s| s.holder_identity.as_deref()).is_some_and(|h| !h.is_empty())))
    })
    .await?;
    assert!(kube::ResourceExt::name_any(&member).starts_with("aws-operator-budget-"), "{member:?}");
    // Let the cluster's creation run a while under the budget.
    tokio::time::sleep(Duration::from_secs(25)).await;
    let log: Vec<motoenv::LoggedRequest> =
        f.moto.request_log()?.into_iter().filter(|r| r.principal == "AKIASHUTDOWN" && r.service != "sts").collect();
    let writes = log.iter().filter(|r| r.is_write()).count();
    assert!(
        writes >= 5,
        "the cluster's creation made {writes} writes: {:?}",
        log.iter().map(|r| &r.action).collect::<Vec<_>>()
    );
    let end = log.iter().map(|r| r.time).fold(started, f64::max);
    let window = 5.0;
    let mut busiest = (0, 0);
    for account in [&f.cp_account, &f.tenant_account] {
        let mut from = started;
        while from < end {
            let within = |write: bool| {
                log.iter()
                    .filter(|r| {
                        &r.account == account && r.is_write() == write && r.time >= from && r.time < from + window
                    })
                    .count()
            };
            let (reads, writes) = (within(false), within(true));
            busiest = (busiest.0.max(reads), busiest.1.max(writes));
            // The rate over the window, one burst saved up before it, and one for its edges.
            assert!(reads as f64 <= READS * (window + 2.0), "{account}: {reads} reads in {window} s from {from}");
            assert!(writes as f64 <= WRITES * (window + 2.0), "{account}: {writes} writes in {window} s from {from}");
            from += 0.5;
        }
    }
    eprintln!(
        "busiest {window} s window of an account: {} reads, {} writes (budget {READS}/s, {WRITES}/s)",
        busiest.0, busiest.1
    );
    Ok(())
}

//! `make bench`: 100 clusters with one master and one node pool each, against moto.
//!
//! The operator runs as its own process (`aws-operator daemon`), so its peak RSS is its own
//! (`VmHWM`). AWS calls are counted by a loopback proxy in front of moto: moto closes every
//! connection after one response, so one accepted connection is one call, and the proxy reads
//! each request to count `DescribeStacks` apart. Prints:
//! - the time from the first create until every AWSCluster is Ready (all stacks of the cluster,
//!   its control plane and node pool usable);
//! - `DescribeStacks` calls until then (target: linear in the cluster count);
//! - the operator's peak RSS;
//! - idle AWS calls per cluster per hour. The operator's periods (resync, stack listing expiry,
//!   Endpoints refresh) are all shortened by [`TIME_SCALE`], and the idle window with them: it
//!   lasts 20 minutes of simulated time, longer than every period, so that every cache expires
//!   in it at least once.
//!
//! `BENCH_CLUSTERS` changes the cluster count. `BENCH_LEGACY_CLUSTERS` (default 0) adds that many
//! legacy clusters (`AWSConfig`, the apis fixture `awsconfig-p3x7d.yaml` with a VPC block of its
//! own, in a cluster account of their own) reconciled by the same process; the time is then until
//! every AWSCluster is Ready and every AWSConfig is `Created`, and the AWS calls until then are
//! also given per kind of cluster, from moto's request log by account (the management account's
//! calls, for both kinds, apart).
//!
//! With 20 node-pools and 20 legacy clusters (`BENCH_CLUSTERS=20 BENCH_LEGACY_CLUSTERS=20`), built
//! in the `dev` profile (`cargo bench --profile dev`) on a shared two-core machine (load average
//! 8.6 to 12.6): all Ready and `Created` after 136 s, about 92 AWS calls per cluster (100 per
//! node-pools cluster and 66 per legacy cluster in their own accounts, about 380 in the
//! management account), peak RSS 82 MiB; the 20 node-pools clusters alone, 79.5 MiB. Details in
//! `docs/legacy-clusters.md`, "Figures".

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use apis::aws::AWSCluster;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::{ListParams, PostParams};
use tokio::io::{AsyncReadExt, AsyncWriteExt, copy_bidirectional};
use tokio::net::{TcpListener, TcpStream};

/// The legacy cluster fixture, shared with the tests.
#[path = "../tests/support/legacy/config.rs"]
mod legacy_config;

const REGION: &str = "eu-central-1";
const FLATCAR: &str = "4230.2.4";
/// The operator's periods and the idle window are this many times shorter than in production.
const TIME_SCALE: u64 = 10;
/// Production periods, in seconds: resync, stack listing expiry, master Endpoints refresh.
const RESYNC_SECONDS: u64 = 300;
const LISTING_TTL_SECONDS: u64 = 600;
const ENDPOINTS_REFRESH_SECONDS: u64 = 900;
/// The idle window in simulated seconds: longer than every period above.
const IDLE_WINDOW_SECONDS: u64 = 1200;

fn create<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> T {
    serde_json::from_value(v).expect("bench object")
}

/// AWS calls seen by the proxy.
#[derive(Default)]
struct Calls {
    all: AtomicU64,
    describe_stacks: AtomicU64,
}

/// Read the request's head and as much of its body as `Content-Length` announces (requests
/// here are small), so that its action can be told.
async fn read_request(inbound: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        let n = inbound.read(&mut chunk).await?;
        if n == 0 {
            return Ok(buf);
        }
        buf.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&buf);
        if let Some(end) = text.find("\r\n\r\n") {
            let length = text[..end]
                .lines()
                .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().to_string()))
                .and_then(|v| v.parse::<usize>().ok())
                .unwrap_or(0);
            if buf.len() >= end + 4 + length || buf.len() > 256 * 1024 {
                return Ok(buf);
            }
        }
    }
}

/// Whether a request is CloudFormation's `DescribeStacks` (query protocol: the action is a form
/// field of the body; JSON protocols name it in `X-Amz-Target`).
fn is_describe_stacks(request: &[u8]) -> bool {
    let text = String::from_utf8_lossy(request);
    text.contains("Action=DescribeStacks&")
        || text.ends_with("Action=DescribeStacks")
        || text.contains(".DescribeStacks\r\n")
}

/// A TCP proxy to moto that counts calls.
async fn counting_proxy(upstream: u16, calls: Arc<Calls>) -> std::io::Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            calls.all.fetch_add(1, Ordering::Relaxed);
            let calls = calls.clone();
            tokio::spawn(async move {
                let Ok(request) = read_request(&mut inbound).await else { return };
                if is_describe_stacks(&request) {
                    calls.describe_stacks.fetch_add(1, Ordering::Relaxed);
                }
                if let Ok(mut out) = TcpStream::connect(("127.0.0.1", upstream)).await
                    && out.write_all(&request).await.is_ok()
                {
                    let _ = copy_bidirectional(&mut inbound, &mut out).await;
                }
            });
        }
    });
    Ok(port)
}

fn peak_rss_mib(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let clusters: usize = std::env::var("BENCH_CLUSTERS").ok().and_then(|v| v.parse().ok()).unwrap_or(100);
    let legacy: usize = std::env::var("BENCH_LEGACY_CLUSTERS").ok().and_then(|v| v.parse().ok()).unwrap_or(0);
    anyhow::ensure!(legacy <= 100, "BENCH_LEGACY_CLUSTERS: at most 100 (each has a VPC block 10.<100+i>.0.0/16)");
    let moto = tokio::task::spawn_blocking(motoenv::MotoServer::start).await??;
    let calls = Arc::new(Calls::default());
    let proxy = counting_proxy(moto.port(), calls.clone()).await?;
    let endpoint = format!("http://127.0.0.1:{proxy}");
    let env = testenv::TestEnv::start().await?;
    let client = env.client();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in apis::all_crds() {
        crds.create(&PostParams::default(), &crd).await?;
    }
    let cp_account = motoenv::fresh_account_id();
    let tenant_account = motoenv::fresh_account_id();
    let legacy_account = motoenv::fresh_account_id();
    let installation = "bench";

    // The management VPC, through the operator's own client code.
    let settings = aws_operator::aws::AwsSettings {
        default_region: REGION.into(),
        endpoint_url: Some(moto.endpoint()),
        ca_bundle: None,
        control_plane_role_arn: Some(format!("arn:aws:iam::{cp_account}:role/aws-operator")),
        credentials: Some(aws_credential_types::Credentials::new("AKIABENCH", "secret", None, None, "bench")),
        operation_timeout: None,
        tenant_external_id: None,
    };
    let factory = aws_operator::aws::AwsFactory::new(settings).await?;
    let cp = factory.control_plane(REGION).await?;
    let vpc = cp.ec2.create_vpc().cidr_block("10.0.0.0/16").send().await?;
    let vpc_id = vpc.vpc().and_then(|v| v.vpc_id()).unwrap_or_default().to_string();
    cp.ec2
        .create_tags()
        .resources(&vpc_id)
        .tags(aws_sdk_ec2::types::Tag::builder().key("Name").value(installation).build())
        .send()
        .await?;
    let table = cp.ec2.create_route_table().vpc_id(&vpc_id).send().await?;
    if legacy > 0 {
        // The route table the legacy clusters' `spec.aws.vpc.routeTableNames` names.
        let table = table.route_table().and_then(|t| t.route_table_id()).unwrap_or_default().to_string();
        let name = aws_sdk_ec2::types::Tag::builder().key("Name").value(format!("{installation}_private_0")).build();
        cp.ec2.create_tags().resources(&table).tags(name).send().await?;
    }

    // Namespaces, Release, credentials, clusters (the operator issues their certificates).
    let nss: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    for ns in ["giantswarm", "org-bench"] {
        nss.create(&PostParams::default(), &create(serde_json::json!({"metadata": {"name": ns}}))).await?;
    }
    let version = env!("CARGO_PKG_VERSION");
    let releases: Api<apis::release::Release> = Api::all(client.clone());
    releases
        .create(
            &PostParams::default(),
            &create(serde_json::json!({
                "apiVersion": "release.giantswarm.io/v1alpha1", "kind": "Release", "metadata": {"name": "v20.0.0"},
                "spec": {"state": "active", "date": "2026-10-01T12:00:00Z", "components": [
                    {"name": "kubernetes", "version": "1.34.2"}, {"name": "etcd", "version": "3.5.21"},
                    {"name": "containerlinux", "version": FLATCAR}, {"name": "aws-operator", "version": version}]}
            })),
        )
        .await?;
    let ami = tempfile::NamedTempFile::new()?;
    std::fs::write(ami.path(), format!(r#"{{"{FLATCAR}": {{"{REGION}": "ami-0a1b2c3d4e5f60001"}}}}"#))?;

    let mut daemon = tokio::process::Command::new(env!("CARGO_BIN_EXE_aws-operator"))
        .args(["daemon", "--listen", "127.0.0.1:0", "--installation", installation, "--region", REGION])
        .args(["--control-plane-role-arn", &format!("arn:aws:iam::{cp_account}:role/aws-operator")])
        .args(["--aws-endpoint-url", &endpoint, "--ami-file"])
        .arg(ami.path())
        .args([
            "--resync-seconds",
            &(RESYNC_SECONDS / TIME_SCALE).to_string(),
            "--poll-seconds",
            "2",
            "--concurrency",
            "8",
        ])
        .args(["--stack-listing-ttl-seconds", &(LISTING_TTL_SECONDS / TIME_SCALE).to_string()])
        .args(["--endpoints-refresh-seconds", &(ENDPOINTS_REFRESH_SECONDS / TIME_SCALE).to_string()])
        // Drift detection off: its hourly round (six DetectStackDrift calls and their polls per
        // cluster) is not part of what this benchmark measures, and would move its figures.
        .args(["--drift-detection-interval-seconds", "0"])
        // The workload clusters do not exist (their API hosts do not resolve): the unhealthy-node
        // terminator acts only on clusters that opt in, as in the tests.
        .args(["--terminate-unhealthy-nodes", "false"])
        .env("KUBECONFIG", env.kubeconfig_path())
        .env("AWS_ACCESS_KEY_ID", "AKIABENCH")
        .env("AWS_SECRET_ACCESS_KEY", "secret")
        .env("RUST_LOG", "warn")
        .kill_on_drop(true)
        .spawn()?;
    let pid = daemon.id().unwrap_or_default();

    let creds: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client.clone(), "giantswarm");
    let aws_clusters: Api<AWSCluster> = Api::namespaced(client.clone(), "org-bench");
    let start = Instant::now();
    for i in 0..clusters {
        let id = format!("b{i:04}");
        let labels = serde_json::json!({"giantswarm.io/cluster": id, "release.giantswarm.io/version": "20.0.0", "giantswarm.io/organization": "bench"});
        creds
            .create(
                &PostParams::default(),
                &create(serde_json::json!({"metadata": {"name": format!("credential-{id}"), "labels": {"giantswarm.io/organization": "bench"}},
                    "stringData": {"aws.awsoperator.arn": format!("arn:aws:iam::{tenant_account}:role/GiantSwarmAWSOperator")}})),
            )
            .await?;
        aws_clusters
            .create(
                &PostParams::default(),
                &create(serde_json::json!({"apiVersion": "infrastructure.giantswarm.io/v1alpha3", "kind": "AWSCluster",
                    "metadata": {"name": id, "labels": labels},
                    "spec": {"cluster": {"dns": {"domain": "bench.example.com"}},
                             "provider": {"credentialSecret": {"name": format!("credential-{id}"), "namespace": "giantswarm"}, "region": REGION}}})),
            )
            .await?;
        Api::<apis::aws::AWSControlPlane>::namespaced(client.clone(), "org-bench")
            .create(
                &PostParams::default(),
                &create(
                    serde_json::json!({"apiVersion": "infrastructure.giantswarm.io/v1alpha3", "kind": "AWSControlPlane",
                    "metadata": {"name": format!("{id}cp"), "labels": labels},
                    "spec": {"availabilityZones": ["eu-central-1a"], "instanceType": "m5.xlarge", "replicas": 1}}),
                ),
            )
            .await?;
        Api::<apis::aws::AWSMachineDeployment>::namespaced(client.clone(), "org-bench")
            .create(
                &PostParams::default(),
                &create(serde_json::json!({"apiVersion": "infrastructure.giantswarm.io/v1alpha3", "kind": "AWSMachineDeployment",
                    "metadata": {"name": format!("{id}np"), "labels": labels},
                    "spec": {"nodePool": {"description": "bench", "machine": {"dockerVolumeSizeGB": 50, "kubeletVolumeSizeGB": 50}, "scaling": {"min": 1, "max": 2}},
                             "provider": {"availabilityZones": ["eu-central-1a"], "worker": {"instanceType": "m5.large", "useAlikeInstanceTypes": false}}}})),
            )
            .await?;
    }
    let configs: Api<apis::aws_config::AWSConfig> = Api::namespaced(client.clone(), "org-bench");
    for i in 0..legacy {
        let id = format!("l{i:04}");
        creds
            .create(
                &PostParams::default(),
                &create(serde_json::json!({"metadata": {"name": format!("credential-{id}"), "labels": {"giantswarm.io/organization": "bench"}},
                    "stringData": {"aws.awsoperator.arn": format!("arn:aws:iam::{legacy_account}:role/GiantSwarmAWSOperator")}})),
            )
            .await?;
        // Each legacy cluster's own VPC block: the management route table gets a route to each.
        let config = legacy_config::awsconfig(&id, "org-bench", installation, REGION, &vpc_id, version)?;
        let mut config = serde_json::to_value(&config)?;
        let block = format!("10.{}.", 100 + i);
        let text = serde_json::to_string(&config)?
            .replace("10.11.", &block)
            .replace("\"giantswarm.io/organization\":\"acme\"", "\"giantswarm.io/organization\":\"bench\"");
        config = serde_json::from_str(&text)?;
        configs.create(&PostParams::default(), &create(config)).await?;
    }
    let deadline = Instant::now() + Duration::from_secs(1800);
    let mut last_progress = Instant::now();
    let created = loop {
        let list = aws_clusters.list(&ListParams::default()).await?;
        let ready = list
            .items
            .iter()
            .filter(|c| {
                c.status.as_ref().is_some_and(|s| s.conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
            })
            .count();
        let created = if legacy == 0 {
            0
        } else {
            let created = |c: &apis::aws_config::AWSConfig| {
                c.status.as_ref().is_some_and(|s| {
                    s.cluster.has_condition(apis::cluster_status::ClusterCondition::Created)
                        && s.conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True")
                })
            };
            configs.list(&ListParams::default()).await?.items.iter().filter(|c| created(c)).count()
        };
        if ready == clusters && created == legacy {
            break start.elapsed();
        }
        if last_progress.elapsed() >= Duration::from_secs(30) {
            last_progress = Instant::now();
            eprintln!(
                "  {:>5.0} s: {ready} of {clusters} Ready, {created} of {legacy} legacy Created, {} AWS calls ({} DescribeStacks)",
                start.elapsed().as_secs_f64(),
                calls.all.load(Ordering::Relaxed),
                calls.describe_stacks.load(Ordering::Relaxed)
            );
        }
        if Instant::now() > deadline {
            anyhow::bail!(
                "only {ready} of {clusters} clusters became Ready and {created} of {legacy} legacy clusters Created within 30 minutes"
            );
        }
        if let Some(status) = daemon.try_wait()? {
            anyhow::bail!("the operator exited with {status}");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let describe_during_creation = calls.describe_stacks.load(Ordering::Relaxed);
    let calls_during_creation = calls.all.load(Ordering::Relaxed);
    // The calls until then by account, from moto's log: each kind's cluster account, and the
    // management account both kinds use.
    let by_account = {
        let log = tokio::task::block_in_place(|| moto.request_log())?;
        let mut by_account = std::collections::BTreeMap::<String, u64>::new();
        for r in &log {
            *by_account.entry(r.account.clone()).or_default() += 1;
        }
        by_account
    };
    // Idle: let requeues drain for one resync, then count AWS calls over the idle window.
    tokio::time::sleep(Duration::from_secs(RESYNC_SECONDS / TIME_SCALE)).await;
    let before = calls.all.load(Ordering::Relaxed);
    let window = Duration::from_secs(IDLE_WINDOW_SECONDS / TIME_SCALE);
    tokio::time::sleep(window).await;
    let idle_calls = calls.all.load(Ordering::Relaxed) - before;
    let simulated_hours = (IDLE_WINDOW_SECONDS as f64) / 3600.0;
    let rss = peak_rss_mib(pid).unwrap_or(f64::NAN);
    if legacy == 0 {
        println!("aws-operator, {clusters} clusters (1 master, 1 node pool each) against moto:");
        println!("  all Ready after                 {:.1} s", created.as_secs_f64());
    } else {
        println!(
            "aws-operator, {clusters} node-pools clusters (1 master, 1 node pool each) and {legacy} legacy clusters against moto:"
        );
        println!("  all Ready and Created after     {:.1} s", created.as_secs_f64());
        let per = |account: &str, n: usize| by_account.get(account).copied().unwrap_or(0) as f64 / n.max(1) as f64;
        println!(
            "  AWS calls until then            {calls_during_creation} ({:.1} per cluster): {:.1} per node-pools cluster and {:.1} per legacy cluster in their own accounts, {} in the management account, {} before any role was assumed",
            calls_during_creation as f64 / (clusters + legacy) as f64,
            per(&tenant_account, clusters),
            per(&legacy_account, legacy),
            by_account.get(&cp_account).copied().unwrap_or(0),
            by_account.get("").copied().unwrap_or(0)
        );
    }
    println!(
        "  DescribeStacks until then       {describe_during_creation} ({:.1} per cluster; {calls_during_creation} AWS calls in all)",
        describe_during_creation as f64 / (clusters + legacy) as f64
    );
    println!("  operator peak RSS               {rss:.1} MiB");
    println!(
        "  idle AWS calls                  {:.2} per cluster per hour ({idle_calls} calls in {} s, = {} min simulated with periods shortened {TIME_SCALE}x)",
        idle_calls as f64 / (clusters + legacy) as f64 / simulated_hours,
        window.as_secs(),
        IDLE_WINDOW_SECONDS / 60
    );
    println!("  AWS calls in total              {}", calls.all.load(Ordering::Relaxed));
    let _ = daemon.kill().await;
    Ok(())
}

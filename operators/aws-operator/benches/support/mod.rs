//! What the cluster benchmarks share (`clusters`, one operator process; `fleet`, sharded
//! replicas): the counting proxy in front of moto, the management account's VPC, the objects of a
//! cluster, the operator's command line with its periods shortened, and the figures read from
//! `/proc`.

#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use apis::aws::AWSCluster;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::PostParams;
use tokio::io::{AsyncReadExt, AsyncWriteExt, copy_bidirectional};
use tokio::net::{TcpListener, TcpStream};

pub const REGION: &str = "eu-central-1";
pub const FLATCAR: &str = "4230.2.4";
pub const NAMESPACE: &str = "org-bench";
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// The operator's periods and the idle window are this many times shorter than in production.
pub const TIME_SCALE: u64 = 10;
/// Production periods, in seconds: resync, stack listing expiry, master Endpoints refresh, the
/// drainers' poll of a steady cluster.
pub const RESYNC_SECONDS: u64 = 300;
pub const LISTING_TTL_SECONDS: u64 = 600;
pub const ENDPOINTS_REFRESH_SECONDS: u64 = 900;
pub const DRAINER_POLL_SECONDS: u64 = 120;
/// The clusters' base domain; the management account holds its intermediate zone `k8s.<domain>`.
pub const DOMAIN: &str = "bench.example.com";
/// The idle window in simulated seconds: longer than every period above.
pub const IDLE_WINDOW_SECONDS: u64 = 1200;

pub fn create<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> T {
    serde_json::from_value(v).expect("bench object")
}

/// A count from the environment, or `default`.
pub fn env_count(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// AWS calls seen by the proxy, and the time moto took to answer them.
#[derive(Default)]
pub struct Calls {
    pub all: AtomicU64,
    pub describe_stacks: AtomicU64,
    /// Calls answered, and the sum of their times from the request's arrival until moto closed
    /// the connection, in microseconds.
    pub answered: AtomicU64,
    pub latency_micros: AtomicU64,
}

impl Calls {
    /// (calls, answered, summed latency) now, to take differences over a period.
    pub fn snapshot(&self) -> (u64, u64, u64) {
        (
            self.all.load(Ordering::Relaxed),
            self.answered.load(Ordering::Relaxed),
            self.latency_micros.load(Ordering::Relaxed),
        )
    }
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

/// moto, the call-counting proxy in front of it, and testenv: what every benchmark runs against.
pub struct Backends {
    /// moto.
    pub moto: motoenv::MotoServer,
    /// The calls the proxy counted.
    pub calls: Arc<Calls>,
    /// The proxy's address, the AWS endpoint the operators are given.
    pub endpoint: String,
    /// The API server.
    pub env: testenv::TestEnv,
    /// A client of it.
    pub client: kube::Client,
    /// The management account.
    pub cp_account: String,
}

impl Backends {
    /// Start moto, the counting proxy and testenv, with a fresh management account.
    pub async fn start() -> anyhow::Result<Self> {
        let moto = tokio::task::spawn_blocking(motoenv::MotoServer::start).await??;
        let calls = Arc::new(Calls::default());
        let proxy = counting_proxy(moto.port(), calls.clone()).await?;
        let env = testenv::TestEnv::start().await?;
        let client = env.client();
        Ok(Self {
            moto,
            calls,
            endpoint: format!("http://127.0.0.1:{proxy}"),
            env,
            client,
            cp_account: motoenv::fresh_account_id(),
        })
    }
}

/// A TCP proxy to moto that counts calls: moto closes every connection after one response, so
/// one accepted connection is one call.
pub async fn counting_proxy(upstream: u16, calls: Arc<Calls>) -> std::io::Result<u16> {
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
                let start = Instant::now();
                if let Ok(mut out) = TcpStream::connect(("127.0.0.1", upstream)).await
                    && out.write_all(&request).await.is_ok()
                {
                    let _ = copy_bidirectional(&mut inbound, &mut out).await;
                    calls.answered.fetch_add(1, Ordering::Relaxed);
                    calls.latency_micros.fetch_add(start.elapsed().as_micros() as u64, Ordering::Relaxed);
                }
            });
        }
    });
    Ok(port)
}

/// A process's peak resident set (`VmHWM`), in MiB.
pub fn peak_rss_mib(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

/// A process's CPU time so far (user and system, its own threads), in seconds.
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The fields after the command (which may hold spaces) start after its closing parenthesis.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    // USER_HZ is 100 on Linux.
    Some((utime + stime) / 100.0)
}

/// The management account's side: the VPC named after the installation, and its route table.
pub struct Management {
    pub vpc_id: String,
    pub route_table_id: String,
}

/// Settings of the operator's own AWS client code for the management account `cp_account`.
pub fn aws_settings(moto: &motoenv::MotoServer, cp_account: &str) -> aws_operator::aws::AwsSettings {
    aws_operator::aws::AwsSettings {
        default_region: REGION.into(),
        endpoint_url: Some(moto.endpoint()),
        ca_bundle: None,
        control_plane_role_arn: Some(format!("arn:aws:iam::{cp_account}:role/aws-operator")),
        credentials: Some(aws_credential_types::Credentials::new("AKIABENCH", "secret", None, None, "bench")),
        operation_timeout: None,
        tenant_external_id: None,
    }
}

/// The management VPC and the intermediate zone `k8s.<DOMAIN>`, through the operator's own
/// client code.
pub async fn management_vpc(
    moto: &motoenv::MotoServer,
    cp_account: &str,
    installation: &str,
) -> anyhow::Result<Management> {
    let factory = aws_operator::aws::AwsFactory::new(aws_settings(moto, cp_account)).await?;
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
    let route_table_id = table.route_table().and_then(|t| t.route_table_id()).unwrap_or_default().to_string();
    // The installation's intermediate zone, which each cluster's zone is delegated from.
    cp.route53
        .create_hosted_zone()
        .name(format!("k8s.{DOMAIN}"))
        .caller_reference(format!("{installation}-intermediate"))
        .send()
        .await?;
    Ok(Management { vpc_id, route_table_id })
}

/// The CRDs, the namespaces `giantswarm` and [`NAMESPACE`], and the Release of this operator
/// version.
pub async fn apply_basics(client: &kube::Client) -> anyhow::Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in apis::all_crds() {
        crds.create(&PostParams::default(), &crd).await?;
    }
    let nss: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    for ns in ["giantswarm", NAMESPACE] {
        nss.create(&PostParams::default(), &create(serde_json::json!({"metadata": {"name": ns}}))).await?;
    }
    let releases: Api<apis::release::Release> = Api::all(client.clone());
    releases
        .create(
            &PostParams::default(),
            &create(serde_json::json!({
                "apiVersion": "release.giantswarm.io/v1alpha1", "kind": "Release", "metadata": {"name": "v20.0.0"},
                "spec": {"state": "active", "date": "2026-10-01T12:00:00Z", "components": [
                    {"name": "kubernetes", "version": "1.34.2"}, {"name": "etcd", "version": "3.5.21"},
                    {"name": "containerlinux", "version": FLATCAR}, {"name": "aws-operator", "version": VERSION}]}
            })),
        )
        .await?;
    Ok(())
}

/// The AMI file the operator reads: one image for [`FLATCAR`] in [`REGION`].
pub fn ami_file() -> anyhow::Result<tempfile::NamedTempFile> {
    let ami = tempfile::NamedTempFile::new()?;
    std::fs::write(ami.path(), format!(r#"{{"{FLATCAR}": {{"{REGION}": "ami-0a1b2c3d4e5f60001"}}}}"#))?;
    Ok(ami)
}

/// `aws-operator daemon` with the benchmarks' settings: periods shortened [`TIME_SCALE`] times,
/// drift detection and the unhealthy-node terminator off, logging at `warn`.
pub fn daemon(
    env: &testenv::TestEnv,
    installation: &str,
    cp_account: &str,
    endpoint: &str,
    ami: &std::path::Path,
) -> tokio::process::Command {
    let mut daemon = tokio::process::Command::new(env!("CARGO_BIN_EXE_aws-operator"));
    daemon
        .args(["daemon", "--installation", installation, "--region", REGION])
        .args(["--control-plane-role-arn", &format!("arn:aws:iam::{cp_account}:role/aws-operator")])
        .args(["--aws-endpoint-url", endpoint, "--ami-file"])
        .arg(ami)
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
        .args(["--drainer-poll-seconds", &(DRAINER_POLL_SECONDS / TIME_SCALE).to_string()])
        // Room for 4,096 /24 networks: each cluster takes one, and each node pool another (the
        // default 10.1.0.0/16 holds 128 such clusters).
        .args(["--ipam-range", "10.16.0.0/12"])
        // Drift detection off: its hourly round (six DetectStackDrift calls and their polls per
        // cluster) is not part of what these benchmarks measure, and would move their figures.
        .args(["--drift-detection-interval-seconds", "0"])
        // The workload clusters do not exist (their API hosts do not resolve): the unhealthy-node
        // terminator acts only on clusters that opt in, as in the tests.
        .args(["--terminate-unhealthy-nodes", "false"])
        .env("KUBECONFIG", env.kubeconfig_path())
        .env("AWS_ACCESS_KEY_ID", "AKIABENCH")
        .env("AWS_SECRET_ACCESS_KEY", "secret")
        .env("RUST_LOG", "warn")
        .kill_on_drop(true);
    daemon
}

/// One cluster `id` in [`NAMESPACE`]: its credential Secret (for the role in `account`), its
/// AWSCluster, an AWSControlPlane of one master and an AWSMachineDeployment of one node.
pub async fn create_cluster(client: &kube::Client, id: &str, account: &str) -> anyhow::Result<()> {
    let labels = serde_json::json!({"giantswarm.io/cluster": id, "release.giantswarm.io/version": "20.0.0", "giantswarm.io/organization": "bench"});
    Api::<k8s_openapi::api::core::v1::Secret>::namespaced(client.clone(), "giantswarm")
        .create(
            &PostParams::default(),
            &create(serde_json::json!({"metadata": {"name": format!("credential-{id}"), "labels": {"giantswarm.io/organization": "bench"}},
                "stringData": {"aws.awsoperator.arn": format!("arn:aws:iam::{account}:role/GiantSwarmAWSOperator")}})),
        )
        .await?;
    Api::<AWSCluster>::namespaced(client.clone(), NAMESPACE)
        .create(
            &PostParams::default(),
            &create(serde_json::json!({"apiVersion": "infrastructure.giantswarm.io/v1alpha3", "kind": "AWSCluster",
                "metadata": {"name": id, "labels": labels},
                "spec": {"cluster": {"dns": {"domain": DOMAIN}},
                         "provider": {"credentialSecret": {"name": format!("credential-{id}"), "namespace": "giantswarm"}, "region": REGION}}})),
        )
        .await?;
    Api::<apis::aws::AWSControlPlane>::namespaced(client.clone(), NAMESPACE)
        .create(
            &PostParams::default(),
            &create(
                serde_json::json!({"apiVersion": "infrastructure.giantswarm.io/v1alpha3", "kind": "AWSControlPlane",
                "metadata": {"name": format!("{id}cp"), "labels": labels},
                "spec": {"availabilityZones": ["eu-central-1a"], "instanceType": "m5.xlarge", "replicas": 1}}),
            ),
        )
        .await?;
    Api::<apis::aws::AWSMachineDeployment>::namespaced(client.clone(), NAMESPACE)
        .create(
            &PostParams::default(),
            &create(serde_json::json!({"apiVersion": "infrastructure.giantswarm.io/v1alpha3", "kind": "AWSMachineDeployment",
                "metadata": {"name": format!("{id}np"), "labels": labels},
                "spec": {"nodePool": {"description": "bench", "machine": {"dockerVolumeSizeGB": 50, "kubeletVolumeSizeGB": 50}, "scaling": {"min": 1, "max": 2}},
                         "provider": {"availabilityZones": ["eu-central-1a"], "worker": {"instanceType": "m5.large", "useAlikeInstanceTypes": false}}}})),
        )
        .await?;
    Ok(())
}

/// Whether an AWSCluster is Ready (all stacks of the cluster, its control plane and node pool
/// usable).
pub fn is_ready(cluster: &AWSCluster) -> bool {
    cluster.status.as_ref().is_some_and(|s| s.conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The simulated hours an idle window of `window` real time stands for.
pub fn simulated_hours(window: Duration) -> f64 {
    window.as_secs_f64() * TIME_SCALE as f64 / 3600.0
}

/// Seconds since the Unix epoch, the clock of moto's request log.
pub fn epoch_seconds() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

/// The calls in `log` that arrived from `from` until `to` (seconds since the Unix epoch), by
/// service and action, most frequent first: what an idle window's calls were.
pub fn calls_by_action(log: &[motoenv::LoggedRequest], from: f64, to: f64) -> Vec<(String, u64)> {
    let mut by_action = std::collections::BTreeMap::<String, u64>::new();
    for r in log.iter().filter(|r| r.time >= from && r.time < to) {
        *by_action.entry(format!("{} {}", r.service, r.action)).or_default() += 1;
    }
    let mut sorted: Vec<(String, u64)> = by_action.into_iter().collect();
    sorted.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    sorted
}

/// `calls_by_action`'s figures per cluster per simulated hour, as one line.
pub fn per_cluster_hour(by_action: &[(String, u64)], clusters: usize, window: Duration) -> String {
    let hours = simulated_hours(window);
    by_action
        .iter()
        .map(|(action, n)| format!("{action} {:.2}", *n as f64 / clusters.max(1) as f64 / hours))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The events whose series grew since `from` (seconds since the Unix epoch), counted by
/// reporting controller, type and reason: what an idle window's Event writes were about.
pub async fn repeated_events(
    client: &kube::Client,
    from: f64,
) -> anyhow::Result<std::collections::BTreeMap<String, u64>> {
    use k8s_openapi::api::events::v1::Event;
    let events: Api<Event> = Api::all(client.clone());
    let mut repeated = std::collections::BTreeMap::<String, u64>::new();
    for event in events.list(&Default::default()).await?.items {
        let Some(series) = &event.series else { continue };
        let last = series.last_observed_time.0.as_microsecond() as f64 / 1e6;
        if last >= from {
            let key = format!(
                "{} {} {}",
                event.reporting_controller.as_deref().unwrap_or(""),
                event.type_.as_deref().unwrap_or(""),
                event.reason.as_deref().unwrap_or("")
            );
            *repeated.entry(key).or_default() += 1;
        }
    }
    Ok(repeated)
}

/// A process's resident set now, split as `/proc` does: (heap and other anonymous memory,
/// mapped files such as the binary's own pages), in MiB.
pub fn rss_split_mib(pid: u32) -> Option<(f64, f64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| -> Option<f64> {
        let line = status.lines().find(|l| l.starts_with(name))?;
        Some(line.split_whitespace().nth(1)?.parse::<f64>().ok()? / 1024.0)
    };
    Some((field("RssAnon:")?, field("RssFile:")?))
}

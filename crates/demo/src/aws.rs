//! The default demo: aws-operator creates a workload cluster in emulated AWS.
//!
//! moto plays AWS with two accounts, the management account (holding the installation's VPC,
//! here `gauss`, and the stacks that peer into it) and the tenant account the cluster's
//! credential Secret names; testenv plays the management cluster; aws-operator runs in this
//! process against both, exactly as `aws-operator daemon` would, with its `/metrics` server on a
//! loopback port. The demo applies the sample Release and cluster with kubectl, follows the
//! objects' conditions and stacks until the cluster is `Created`, then lists what the operator
//! built in each account.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use apis::aws::{AWSCluster, AWSControlPlane, AWSMachineDeployment, StackStatus};
use apis::cluster_status::ClusterCondition;
use aws_credential_types::Credentials;
use aws_operator::aws::{AccountClients, AwsFactory, AwsSettings};
use aws_operator::config::{AmiMap, OperatorConfig};
use aws_operator::context::Shared;
use aws_operator::daemon;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::Api;
use kube::api::ListParams;
use operatorkit::RunSettings;
use prometheus_client::registry::Registry;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::inventory;
use crate::kubectl::Kubectl;
use crate::manifest;
use crate::step;

/// The region of the sample cluster.
const REGION: &str = "eu-central-1";
/// The installation (management cluster) name: the management VPC's `Name` tag.
const INSTALLATION: &str = "gauss";
/// The installation's intermediate zone, `k8s.<base domain>` of the sample cluster.
const INTERMEDIATE_ZONE: &str = "k8s.gauss.eu-central-1.aws.gigantic.io";
/// How long the cluster may take to become `Created`.
const CREATE_TIMEOUT: Duration = Duration::from_secs(300);
/// How long to keep following the masters and node pool once the cluster is `Created`.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(60);
/// How often the progress is read.
const PROGRESS_EVERY: Duration = Duration::from_secs(2);
/// The AMI map used when `docs/examples/ami.json` is absent: the sample Release's Flatcar in the
/// sample region (moto accepts any well-formed image id).
const FALLBACK_AMIS: &str = r#"{"4230.2.4": {"eu-central-1": "ami-0a1b2c3d4e5f60001"}}"#;

/// What the demo needs from the command line.
#[derive(Debug, Clone)]
pub struct Options {
    /// The kubectl binary.
    pub kubectl: String,
    /// The directory with the sample manifests.
    pub examples: std::path::PathBuf,
    /// Serve until Ctrl-C after the demo.
    pub keep: bool,
}

/// The AWS settings the operator and the demo share: moto's endpoint, static credentials (moto
/// accepts any), and the management-account role the operator assumes.
fn aws_settings(endpoint: String, management_account: &str) -> AwsSettings {
    AwsSettings {
        default_region: REGION.into(),
        endpoint_url: Some(endpoint),
        ca_bundle: None,
        control_plane_role_arn: Some(format!("arn:aws:iam::{management_account}:role/aws-operator")),
        credentials: Some(Credentials::new("AKIADEMOOPERATOR", "demo-secret", None, None, "demo")),
        operation_timeout: Some(Duration::from_secs(60)),
        tenant_external_id: None,
    }
}

/// The management cluster's network as an installation has it before any workload cluster: a
/// VPC named after the installation with one private route table, which the operator finds by
/// tag and peers tenant VPCs into.
async fn management_network(clients: &AccountClients) -> anyhow::Result<(String, String)> {
    let tag = |key: &str, value: &str| aws_sdk_ec2::types::Tag::builder().key(key).value(value).build();
    let vpc = clients.ec2.create_vpc().cidr_block("10.0.0.0/16").send().await.context("creating the management VPC")?;
    let vpc_id = vpc.vpc().and_then(|v| v.vpc_id()).context("CreateVpc returned no VPC id")?.to_string();
    clients.ec2.create_tags().resources(&vpc_id).tags(tag("Name", INSTALLATION)).send().await?;
    let rt = clients.ec2.create_route_table().vpc_id(&vpc_id).send().await.context("creating the route table")?;
    let rt_id =
        rt.route_table().and_then(|r| r.route_table_id()).context("CreateRouteTable returned no id")?.to_string();
    clients.ec2.create_tags().resources(&rt_id).tags(tag("Name", &format!("{INSTALLATION}_private_0"))).send().await?;
    Ok((vpc_id, rt_id))
}

/// The AMI map: `ami.json` beside the samples when present, else [`FALLBACK_AMIS`].
fn amis(examples: &Path) -> anyhow::Result<(AmiMap, String)> {
    let file = examples.join("ami.json");
    if file.exists() {
        Ok((AmiMap::load(&file)?, file.display().to_string()))
    } else {
        Ok((AmiMap::from_json(FALLBACK_AMIS)?, "the built-in map".into()))
    }
}

/// The operator running in this process, and its metrics server.
struct RunningOperator {
    token: CancellationToken,
    handle: JoinHandle<anyhow::Result<()>>,
    metrics_addr: Option<SocketAddr>,
}

impl RunningOperator {
    /// Start the controllers and the `/metrics` server on 127.0.0.1:0.
    async fn start(client: kube::Client, aws: AwsFactory, amis: AmiMap) -> anyhow::Result<Self> {
        let config = OperatorConfig {
            installation: INSTALLATION.into(),
            // Moto finishes stacks at once; a short requeue keeps the demo brisk.
            poll: Duration::from_secs(1),
            // The demo's workload cluster has no API server to judge its nodes by: the
            // unhealthy-node terminator acts only on clusters that opt in.
            unhealthy: aws_operator::config::UnhealthySettings {
                all_clusters: false,
                ..aws_operator::config::UnhealthySettings::default()
            },
            ..OperatorConfig::default()
        };
        let mut registry = Registry::default();
        let metrics = operatorkit::Metrics::new(&mut registry);
        let drift_state = aws_operator::drift::DriftState::new(&mut registry, &config.drift);
        let shared = Shared::new(client, aws, config, amis, &mut registry);
        let readiness = operatorkit::Readiness::new();
        let server = operatorkit::Server::bind(
            SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            Arc::new(registry),
            readiness.clone(),
        )
        .await?;
        let metrics_addr = server.local_addr();
        let token = CancellationToken::new();
        tokio::spawn(server.serve(token.clone()));
        let t = token.clone();
        let handle = tokio::spawn(async move {
            let settings = RunSettings { concurrency: 4, resync: Duration::from_secs(300), ..RunSettings::default() };
            daemon::run(shared, drift_state, &metrics, &readiness, settings, t).await
        });
        Ok(Self { token, handle, metrics_addr })
    }

    /// Fail if the operator has stopped on its own.
    async fn check_alive(&mut self) -> anyhow::Result<()> {
        if self.handle.is_finished() {
            let result = (&mut self.handle).await.context("the operator task panicked")?;
            result.context("aws-operator stopped")?;
            bail!("aws-operator stopped without an error");
        }
        Ok(())
    }

    /// Cancel and wait (at most 30 s) for the controllers to finish.
    async fn stop(self) -> anyhow::Result<()> {
        self.token.cancel();
        match tokio::time::timeout(Duration::from_secs(30), self.handle).await {
            Ok(joined) => joined.context("the operator task panicked")?.context("aws-operator stopped with an error"),
            Err(_) => bail!("aws-operator did not stop within 30 s"),
        }
    }
}

/// Run the demo.
pub async fn run(opts: Options) -> anyhow::Result<()> {
    step("Starting moto, the AWS emulator, with a management account and a tenant account");
    let moto = tokio::task::spawn_blocking(motoenv::MotoServer::start).await.context("starting moto")??;
    let management_account = motoenv::fresh_account_id();
    let tenant_account = motoenv::fresh_account_id();
    let tenant_role = format!("arn:aws:iam::{tenant_account}:role/GiantSwarmAWSOperator");
    println!("moto endpoint:      {}", moto.endpoint());
    println!("management account: {management_account} (role arn:aws:iam::{management_account}:role/aws-operator)");
    println!("tenant account:     {tenant_account} (role {tenant_role})");
    let settings = aws_settings(moto.endpoint(), &management_account);
    let demo_aws = AwsFactory::new(settings.clone()).await?;
    let management = demo_aws.control_plane(REGION).await?;
    let (vpc_id, rt_id) = management_network(&management).await?;
    println!(
        "management VPC {vpc_id} (Name={INSTALLATION}, 10.0.0.0/16), route table {rt_id} (Name={INSTALLATION}_private_0)"
    );
    // The installation's intermediate zone, which the cluster's zone is delegated from.
    management
        .route53
        .create_hosted_zone()
        .name(INTERMEDIATE_ZONE)
        .caller_reference(INSTALLATION)
        .send()
        .await
        .context("creating the intermediate hosted zone")?;
    println!("intermediate hosted zone {INTERMEDIATE_ZONE}");

    step("Starting testenv as the management cluster and installing the CRDs");
    let env = testenv::TestEnv::start().await?;
    let kc = env.kubeconfig_path().to_path_buf();
    println!("API server: {}\nkubeconfig: {}", env.base_url(), kc.display());
    let k = Kubectl::new(&opts.kubectl, &kc);
    let crds = apis::to_yaml(&apis::all_crds()).map_err(anyhow::Error::msg)?;
    k.run_with_stdin(&["apply", "-f", "-"], Some(&crds)).await?;
    k.run(&["wait", "--for=condition=Established", "crd", "--all", "--timeout=30s"]).await?;

    step("Starting aws-operator in this process");
    let release_file = opts.examples.join("release-v20.0.0.yaml");
    let release_yaml =
        std::fs::read_to_string(&release_file).with_context(|| format!("reading {}", release_file.display()))?;
    let version = OperatorConfig::default().version;
    match manifest::operator_version_of_release(&release_yaml)? {
        Some(v) if v == version => {}
        other => bail!(
            "{} names aws-operator {}, but this operator is {version}: it would not reconcile the sample cluster",
            release_file.display(),
            other.as_deref().unwrap_or("(none)")
        ),
    }
    let (amis, ami_source) = amis(&opts.examples)?;
    let mut operator = RunningOperator::start(env.client(), AwsFactory::new(settings).await?, amis).await?;
    println!("aws-operator {version}: installation {INSTALLATION}, region {REGION}, AMIs from {ami_source}");
    match operator.metrics_addr {
        Some(addr) => println!("metrics: http://{addr}/metrics"),
        None => println!("metrics: (address unknown)"),
    }

    step("Applying the Release and a workload cluster with one node pool");
    k.run(&["apply", "-f", &release_file.display().to_string()]).await?;
    let sample_file = opts.examples.join("aws-cluster.yaml");
    let sample = std::fs::read_to_string(&sample_file).with_context(|| format!("reading {}", sample_file.display()))?;
    let m = manifest::cluster_manifest(&sample, &tenant_role)?;
    println!(
        "cluster {} in {}: credential Secret → {tenant_role}; node pool {}; no certificate or encryption Secrets: the operator issues them",
        m.cluster_id,
        m.namespace,
        m.node_pools.join(",")
    );
    k.run_with_stdin(&["apply", "-f", "-"], Some(&m.yaml)).await?;

    step(&format!(
        "Waiting for cluster {} to be Created (at most {} minutes)",
        m.cluster_id,
        CREATE_TIMEOUT.as_secs() / 60
    ));
    let progress = Progress::new(env.client(), &m.namespace, &m.cluster_id);
    if let Err(e) = progress.follow(&mut operator).await {
        // What the operator said about the objects is the first thing to look at.
        let _ = k.run_tail(&events_listing(&m.namespace), 30).await;
        return Err(e);
    }

    k.run(&["get", "awsclusters,awscontrolplanes,awsmachinedeployments", "-A"]).await?;
    k.run_tail(&events_listing(&m.namespace), 15).await?;
    crate::print_issued(&env.client(), &m.namespace, &m.cluster_id).await?;

    step("What the operator built, account by account");
    inventory::print_account("Management account", &management).await?;
    let tenant = demo_aws.tenant(&tenant_role, REGION).await?;
    inventory::print_account("Tenant account", &tenant).await?;

    if opts.keep {
        step("Everything keeps running until Ctrl-C; in another shell:");
        println!("export KUBECONFIG={}", kc.display());
        println!("kubectl get awsclusters,awscontrolplanes,awsmachinedeployments -A");
        println!(
            "moto endpoint: {} (accounts {management_account} and {tenant_account}, region {REGION})",
            moto.endpoint()
        );
        if let Some(addr) = operator.metrics_addr {
            println!("curl http://{addr}/metrics");
        }
        tokio::select! {
            signal = tokio::signal::ctrl_c() => signal.context("waiting for Ctrl-C")?,
            result = &mut operator.handle => {
                result.context("the operator task panicked")?.context("aws-operator stopped")?;
            }
        }
    }

    step("Stopping aws-operator");
    operator.stop().await?;
    drop(env);
    drop(moto);
    step("Done");
    Ok(())
}

/// Follows the conditions and stacks of one cluster's objects.
struct Progress {
    clusters: Api<AWSCluster>,
    control_planes: Api<AWSControlPlane>,
    node_pools: Api<AWSMachineDeployment>,
    cluster_id: String,
    selector: String,
}

/// One reading of the cluster's objects.
struct Snapshot {
    /// The printable block.
    text: String,
    /// `Created` is in `status.cluster.conditions`, or `Ready` is `True`.
    cluster_done: bool,
    /// Every control plane and node pool is `Ready`.
    all_ready: bool,
}

fn ready(conditions: &[Condition]) -> Option<&Condition> {
    conditions.iter().find(|c| c.type_ == "Ready")
}

fn ready_text(conditions: &[Condition]) -> String {
    match ready(conditions) {
        Some(c) if c.message.is_empty() => format!("Ready={} {}", c.status, c.reason),
        Some(c) => format!("Ready={} {}: {}", c.status, c.reason, c.message),
        None => "no Ready condition yet".into(),
    }
}

fn stacks_text(stacks: &[StackStatus]) -> String {
    if stacks.is_empty() {
        return "no stacks yet".into();
    }
    stacks
        .iter()
        .map(|s| match &s.reason {
            Some(reason) if s.status.contains("FAILED") || s.status.contains("ROLLBACK") => {
                format!("{} {} ({reason})", s.kind, s.status)
            }
            _ => format!("{} {}", s.kind, s.status),
        })
        .collect::<Vec<_>>()
        .join(" · ")
}

impl Progress {
    fn new(client: kube::Client, namespace: &str, cluster_id: &str) -> Self {
        Self {
            clusters: Api::namespaced(client.clone(), namespace),
            control_planes: Api::namespaced(client.clone(), namespace),
            node_pools: Api::namespaced(client, namespace),
            cluster_id: cluster_id.into(),
            selector: format!("giantswarm.io/cluster={cluster_id}"),
        }
    }

    async fn snapshot(&self) -> anyhow::Result<Snapshot> {
        let mut lines = Vec::new();
        let cluster = self.clusters.get_opt(&self.cluster_id).await?;
        let (cluster_done, lifecycle) = match cluster.as_ref().and_then(|c| c.status.as_ref()) {
            Some(status) => {
                let created = status.cluster.has_condition(ClusterCondition::Created);
                let is_ready = ready(&status.conditions).is_some_and(|c| c.status == "True");
                let lifecycle: Vec<String> =
                    status.cluster.conditions.iter().map(|c| format!("{}={}", c.type_, c.status)).collect();
                lines.push(format!("AWSCluster/{}: {}", self.cluster_id, ready_text(&status.conditions)));
                lines.push(format!("    stacks: {}", stacks_text(&status.stacks)));
                (created || is_ready, lifecycle)
            }
            None => {
                lines.push(format!("AWSCluster/{}: no status yet", self.cluster_id));
                (false, Vec::new())
            }
        };
        if !lifecycle.is_empty() {
            lines.push(format!("    status.cluster.conditions: {}", lifecycle.join(", ")));
        }
        let lp = ListParams::default().labels(&self.selector);
        let mut all_ready = true;
        for cp in self.control_planes.list(&lp).await? {
            let name = cp.metadata.name.clone().unwrap_or_default();
            let status = cp.status.unwrap_or_default();
            all_ready &= ready(&status.conditions).is_some_and(|c| c.status == "True");
            lines.push(format!("AWSControlPlane/{name}: {}", ready_text(&status.conditions)));
            lines.push(format!("    stacks: {}", stacks_text(&status.stacks)));
        }
        for md in self.node_pools.list(&lp).await? {
            let name = md.metadata.name.clone().unwrap_or_default();
            let status = md.status.unwrap_or_default();
            all_ready &= ready(&status.conditions).is_some_and(|c| c.status == "True");
            lines.push(format!("AWSMachineDeployment/{name}: {}", ready_text(&status.conditions)));
            lines.push(format!("    stacks: {}", stacks_text(&status.stacks)));
        }
        Ok(Snapshot { text: lines.join("\n"), cluster_done, all_ready })
    }

    /// Print a snapshot every [`PROGRESS_EVERY`] when it changed, until the cluster is done
    /// (then for at most [`SETTLE_TIMEOUT`] more while the masters and node pool get Ready).
    async fn follow(&self, operator: &mut RunningOperator) -> anyhow::Result<()> {
        let start = Instant::now();
        let mut last = String::new();
        let mut created_at: Option<Instant> = None;
        loop {
            operator.check_alive().await?;
            let snap = self.snapshot().await?;
            if snap.text != last {
                println!("[{:>4}s]", start.elapsed().as_secs());
                println!("{}", snap.text);
                last = snap.text;
            }
            if snap.cluster_done {
                let since = *created_at.get_or_insert_with(|| {
                    println!("cluster {} is Created after {} s", self.cluster_id, start.elapsed().as_secs());
                    Instant::now()
                });
                if snap.all_ready {
                    return Ok(());
                }
                if since.elapsed() > SETTLE_TIMEOUT {
                    println!(
                        "the masters or the node pool are not Ready {} s after the cluster was Created; going on",
                        SETTLE_TIMEOUT.as_secs()
                    );
                    return Ok(());
                }
            } else if start.elapsed() > CREATE_TIMEOUT {
                bail!(
                    "cluster {} did not become Created within {} minutes; last seen:\n{last}",
                    self.cluster_id,
                    CREATE_TIMEOUT.as_secs() / 60
                );
            }
            tokio::time::sleep(PROGRESS_EVERY).await;
        }
    }
}

/// The kubectl arguments that list a namespace's events, oldest first. `kubectl events` orders
/// them by when they were last seen whichever API wrote them; `get events
/// --sort-by=.lastTimestamp` printed nothing for the operator's events, which are written through
/// `events.k8s.io/v1` and carry `eventTime` and `series` instead of `lastTimestamp`.
pub fn events_listing(namespace: &str) -> [&str; 3] {
    ["events", "-n", namespace]
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
    use kube::Api;
    use kube::api::PostParams;
    use kube::runtime::events::{Event, EventType, Recorder, Reporter};

    use super::events_listing;
    use crate::kubectl::Kubectl;

    /// `$KUBECTL`, else the kubectl of `make venv`, else the one on the PATH.
    fn kubectl() -> String {
        let venv = motoenv::workspace_root().join(".venv/bin/kubectl");
        std::env::var("KUBECTL")
            .unwrap_or_else(|_| if venv.exists() { venv.display().to_string() } else { "kubectl".into() })
    }

    #[tokio::test]
    async fn the_event_listing_shows_the_operators_events() -> anyhow::Result<()> {
        let env = testenv::TestEnv::start().await?;
        let client = env.client();
        let ns: Namespace = serde_json::from_value(serde_json::json!({"metadata": {"name": "org-demo"}}))?;
        Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &ns).await?;
        let cm: ConfigMap =
            serde_json::from_value(serde_json::json!({"metadata": {"name": "a1b2c", "namespace": "org-demo"}}))?;
        let cm = Api::<ConfigMap>::namespaced(client.clone(), "org-demo").create(&PostParams::default(), &cm).await?;
        // Published as the operator publishes: events.k8s.io/v1, with eventTime and no
        // lastTimestamp.
        let recorder = Recorder::new(client, Reporter { controller: "aws-operator".into(), instance: None });
        for (reason, note) in [
            ("CFCreateRequested", "creating stack cluster-a1b2c-tccpi"),
            ("CFCompleted", "stack cluster-a1b2c-tccpi: CREATE_COMPLETE"),
        ] {
            let event = Event {
                type_: EventType::Normal,
                reason: reason.into(),
                note: Some(note.into()),
                action: "CreateStack".into(),
                secondary: None,
            };
            recorder.publish(&event, &kube::Resource::object_ref(&cm, &())).await?;
        }
        let k = Kubectl::new(kubectl(), env.kubeconfig_path());
        let shown = k.tail(&events_listing("org-demo"), 15).await?;
        assert!(shown.contains("CFCreateRequested") && shown.contains("CFCompleted"), "{shown}");
        assert!(shown.contains("creating stack cluster-a1b2c-tccpi"), "{shown}");
        // Oldest first.
        assert!(shown.find("CFCreateRequested") < shown.find("CFCompleted"), "{shown}");
        Ok(())
    }
}

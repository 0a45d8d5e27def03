//! `make demo ARGS=--kvm`: kvm-operator creates a workload cluster of KVM virtual machines on a
//! simulated management cluster, then upgrades it to a new Release with a rolling update.
//!
//! testenv plays the management cluster, with three hosts labelled `role=master` and six
//! labelled `role=worker` whose pods run and turn Ready at once; a second testenv plays the
//! workload cluster, whose Nodes follow the node pods (`workload_sim::pods::NodePods`, which also
//! plays the sidecar publishing each VM's IP). kvm-operator runs in this process as
//! `kvm-operator daemon` would, its drain executor included. The demo applies the sample Release
//! and cluster with kubectl, prints each change of the cluster's Deployments, Endpoints, nodes and
//! conditions until it is `Created`, then relabels it to a new Release and follows the roll,
//! one node at a time, masters first, until it is `Updated`.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use apis::cluster_status::ClusterCondition;
use apis::kvm::KVMConfig;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Endpoints, Node, Secret};
use kube::api::{ListParams, PostParams};
use kube::{Api, ResourceExt};
use kvm_objects::access::ClusterRoles;
use kvm_objects::cluster::Settings;
use kvm_objects::names::{self, keys};
use kvm_operator::config::OperatorConfig;
use kvm_operator::context::Shared;
use kvm_operator::daemon;
use operatorkit::{Readiness, RunSettings};
use prometheus_client::registry::Registry;
use testenv::TestEnv;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use workload_sim::WorkloadCluster;
use workload_sim::pods::{self, NodePods};

use crate::kubectl::Kubectl;
use crate::step;

/// The sample cluster's namespace and id (`docs/examples/kvm-cluster.yaml`).
const NS: &str = "org-acme";
const ID: &str = "x7k2p";
/// The Release the demo upgrades to.
const NEXT_RELEASE: &str = "20.2.0";
/// How long creation and the upgrade may each take.
const TIMEOUT: Duration = Duration::from_secs(240);

/// The sample Release renamed to [`NEXT_RELEASE`], with a newer Kubernetes.
fn next_release(examples: &Path) -> anyhow::Result<String> {
    let file = examples.join("kvm-release-v20.1.0.yaml");
    let text = std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
    let mut release: serde_json::Value = serde_saphyr::from_str(&text)?;
    release["metadata"]["name"] = format!("v{NEXT_RELEASE}").into();
    let components = release["spec"]["components"].as_array_mut().context("the Release has components")?;
    for component in components.iter_mut().filter(|c| c["name"] == "kubernetes") {
        component["version"] = "1.34.3".into();
    }
    Ok(serde_json::to_string(&release)?)
}

/// Run the demo.
pub async fn run(kubectl: &str, examples: &Path, keep: bool) -> anyhow::Result<()> {
    step("Starting testenv as the management cluster: 3 master hosts and 6 worker hosts");
    let sim = pods::hosts(3, 6, "64", "256Gi", 110);
    let mc = TestEnv::builder().simulation(sim).start().await?;
    let kc = mc.kubeconfig_path().to_path_buf();
    println!("API server: {}\nkubeconfig: {}", mc.base_url(), kc.display());
    let k = Kubectl::new(kubectl, &kc);
    let crds = apis::to_yaml(&apis::all_crds()).map_err(anyhow::Error::msg)?;
    k.run_with_stdin(&["apply", "-f", "-"], Some(&crds)).await?;
    k.run(&["wait", "--for=condition=Established", "crd", "--all", "--timeout=30s"]).await?;
    k.run(&["create", "namespace", "giantswarm"]).await?;

    step("Starting the workload cluster's API server (a second testenv)");
    let wc = Arc::new(WorkloadCluster::start().await?);
    println!("workload cluster API server: {}", wc.server_url());
    let client = mc.client();

    step("Starting kvm-operator in this process");
    let stop = CancellationToken::new();
    let operator = start_operator(client.clone(), stop.clone());

    step("Applying the Release and cluster x7k2p: 3 masters and 5 workers, etcd on PVCs");
    k.run(&["apply", "-f", &examples.join("kvm-release-v20.1.0.yaml").display().to_string()]).await?;
    k.run(&["apply", "-f", &examples.join("kvm-cluster.yaml").display().to_string()]).await?;
    let secrets_api: Api<Secret> = Api::namespaced(client.clone(), NS);
    secrets_api.create(&PostParams::default(), &wc.kubeconfig_secret(NS, ID)).await?;
    println!(
        "{ID}-kubeconfig for the workload cluster; no certificate or encryption-key Secrets: the operator issues them"
    );
    let selector = format!("{}={}", keys::POD_WATCHER, names::OPERATOR);
    let pods = NodePods::new(client.clone(), ID, selector, keys::VM_IP)
        .label_from_pod("role", keys::APP)
        .label_from_pod(apis::labels::RELEASE_VERSION, apis::labels::RELEASE_VERSION)
        .label_from_pod(apis::labels::KVM_OPERATOR_VERSION, apis::labels::KVM_OPERATOR_VERSION)
        .label("giantswarm.io/provider", "kvm");
    let token = stop.clone();
    pods.spawn(wc.clone(), Duration::from_millis(200), async move { token.cancelled().await });

    step("Following the cluster until it is Created");
    let progress = Progress::new(client.clone(), wc.client());
    progress.follow(ClusterCondition::Created, "20.1.0").await?;
    crate::print_issued(&client, NS, ID).await?;
    k.run(&["get", "kvmconfigs,deployments,endpoints", "-A", "-o", "wide"]).await?;

    step(&format!("Upgrading to Release v{NEXT_RELEASE}: one node at a time, masters first"));
    k.run_with_stdin(&["apply", "-f", "-"], Some(&next_release(examples)?)).await?;
    k.run(&[
        "-n",
        NS,
        "label",
        "--overwrite",
        "kvmconfig",
        ID,
        &format!("release.giantswarm.io/version={NEXT_RELEASE}"),
    ])
    .await?;
    progress.follow(ClusterCondition::Updated, NEXT_RELEASE).await?;
    k.run(&["get", "kvmconfigs", "-A"]).await?;

    if keep {
        step("Everything keeps running until Ctrl-C; in another shell:");
        println!("export KUBECONFIG={}", kc.display());
        println!("kubectl get kvmconfigs,deployments,pods,endpoints -A");
        tokio::signal::ctrl_c().await.context("waiting for Ctrl-C")?;
    }
    step("Stopping kvm-operator");
    stop.cancel();
    operator.await.context("the operator task panicked")??;
    step("Done");
    Ok(())
}

/// kvm-operator as `kvm-operator daemon` runs it (its controllers and drain executor, on one
/// cache of workload-cluster clients: [`daemon::run`]), without leader election: this process
/// is the only replica.
fn start_operator(client: kube::Client, stop: CancellationToken) -> tokio::task::JoinHandle<anyhow::Result<()>> {
    let operator_version = kvm_operator::VERSION;
    let config = OperatorConfig {
        version: operator_version.into(),
        settings: Settings {
            operator_version: operator_version.into(),
            dns_servers: vec!["10.61.0.53".into()],
            ntp_servers: Vec::new(),
            images: Default::default(),
        },
        node_config: Default::default(),
        roles: ClusterRoles::default(),
        // The demo's operator acts as testenv's administrator: no RoleBinding of its own.
        access: None,
        rollout: Default::default(),
    };
    let shared = Shared::new(client, config, None, Duration::from_millis(500), Duration::from_secs(30));
    println!(
        "kvm-operator {operator_version}: the cluster controller, the drainer, the deleter, the terminator and the drain executor; DNS servers 10.61.0.53"
    );
    tokio::spawn(async move {
        let tuning = daemon::Tuning {
            run: RunSettings { concurrency: 4, resync: Duration::from_secs(30), ..RunSettings::default() },
            ..daemon::Tuning::new(operator_version)?
        };
        let mut registry = Registry::default();
        daemon::Daemon::build(shared, tuning, &mut registry, &Readiness::new())?.run(stop).await
    })
}

/// Follows the sample cluster and prints what changed.
struct Progress {
    configs: Api<KVMConfig>,
    deployments: Api<Deployment>,
    endpoints: Api<Endpoints>,
    nodes: Api<Node>,
}

impl Progress {
    fn new(mc: kube::Client, wc: kube::Client) -> Self {
        Self {
            configs: Api::namespaced(mc.clone(), NS),
            deployments: Api::namespaced(mc.clone(), ID),
            endpoints: Api::namespaced(mc, ID),
            nodes: Api::all(wc),
        }
    }

    /// One line: conditions, Deployments available and on `release`, Endpoints, WC nodes.
    async fn line(&self, release: &str) -> anyhow::Result<(String, BTreeMap<String, String>)> {
        let config = self.configs.get(ID).await?;
        let lifecycle = config.status.as_ref().map(|s| s.cluster.clone()).unwrap_or_default();
        let conditions: Vec<&str> = lifecycle.conditions.iter().map(|c| c.type_.as_str()).collect();
        let deployments = self.deployments.list(&ListParams::default()).await?.items;
        let available = deployments
            .iter()
            .filter(|d| d.status.as_ref().and_then(|s| s.available_replicas).unwrap_or(0) >= 1)
            .count();
        let release_of = |d: &Deployment| {
            d.spec
                .as_ref()
                .and_then(|s| s.template.metadata.as_ref())
                .and_then(|m| m.labels.as_ref())
                .and_then(|l| l.get(apis::labels::RELEASE_VERSION).cloned())
                .unwrap_or_default()
        };
        let on_release = deployments.iter().filter(|d| release_of(d) == release).count();
        let versions: BTreeMap<String, String> = deployments.iter().map(|d| (d.name_any(), release_of(d))).collect();
        let mut ready_ips = 0;
        for name in [names::MASTER_SERVICE, names::WORKER_SERVICE] {
            if let Some(e) = self.endpoints.get_opt(name).await? {
                ready_ips += kvm_objects::endpoints::ready_ips(&e).len();
            }
        }
        let nodes = self.nodes.list(&ListParams::default()).await?.items;
        let ready_nodes = nodes
            .iter()
            .filter(|n| {
                n.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
            })
            .count();
        let text = format!(
            "conditions [{}]  Deployments {available}/{} available, {on_release} on v{release}  Endpoints {ready_ips} ready  workload-cluster nodes {ready_nodes}/{} Ready",
            conditions.join(", "),
            deployments.len(),
            nodes.len()
        );
        Ok((text, versions))
    }

    /// Print each change until the cluster has `condition` on `release`.
    async fn follow(&self, condition: ClusterCondition, release: &str) -> anyhow::Result<()> {
        let start = Instant::now();
        let mut last = String::new();
        let mut last_versions = BTreeMap::new();
        loop {
            let (text, versions) = self.line(release).await?;
            if text != last {
                println!("{:>5.1} s  {text}", start.elapsed().as_secs_f64());
                last = text;
            }
            for (name, version) in &versions {
                if last_versions.get(name).is_some_and(|v| v != version) {
                    println!("          rolled {name} to v{version}");
                }
            }
            last_versions = versions;
            let config = self.configs.get(ID).await?;
            let done = config
                .status
                .as_ref()
                .is_some_and(|s| s.cluster.has_condition(condition) && s.cluster.has_version(release))
                && config
                    .status
                    .as_ref()
                    .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"))
                    .is_some_and(|c| c.status == "True");
            if done {
                println!("{:>5.1} s  cluster {ID} is {condition} on v{release}", start.elapsed().as_secs_f64());
                return Ok(());
            }
            if start.elapsed() > TIMEOUT {
                bail!("cluster {ID} is not {condition} on v{release} after {} s: {last}", TIMEOUT.as_secs());
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

//! The world of kvm-operator's lifecycle tests: a management cluster (testenv with simulated
//! nodes labelled `role=master` and `role=worker`) running the operator, a simulated workload
//! cluster, and what stands in for the parts of the real world that are not the operator:
//!
//! - the **VM-IP sidecar**: every Running node pod gets its VM's IP as the annotation
//!   `endpoint.kvm.giantswarm.io/ip`;
//! - the **VMs joining the workload cluster**: the workload cluster's Nodes follow the Running
//!   node pods that have an IP (same name, the VM IP, the labels the node's kubelet would set:
//!   `role`, the release and the operator version of the pod);
//! - the **workload-cluster node readiness** of worker pods: the pod condition
//!   `kvm-operator.giantswarm.io/workload-cluster-node-ready` follows the Node's `Ready`.
//!
//! All three run in one background task, started by [`World::start`], every 100 ms; each
//! writes only what differs.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use apis::kvm::KVMConfig;
use apis::release::Release;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use kvm_objects::access::ClusterRoles;
use kvm_objects::cluster::Settings;
use kvm_objects::names::{NODE_READY_CONDITION, keys};
use kvm_operator::config::OperatorConfig;
use kvm_operator::context::Shared;
use kvm_operator::daemon;
use operatorkit::RunSettings;
use testenv::{NodeSpec, SimConfig, TestEnv};
use tokio_util::sync::CancellationToken;
use workload_sim::{Machine, WorkloadCluster};

/// The namespace of the KVMConfig and of the cluster's Secrets.
pub const NS: &str = "org-acme";
/// The cluster id (docs/examples/kvm-cluster.yaml).
pub const ID: &str = "x7k2p";
/// The operator version under test.
pub const VERSION: &str = "4.0.0";
/// The resync period of the operator under test.
pub const RESYNC: Duration = Duration::from_secs(2);

/// A file of docs/examples.
pub fn example(name: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/examples").join(name))
        .expect("example readable")
}

/// The documents of a YAML text.
pub fn documents(text: &str) -> Vec<serde_json::Value> {
    serde_saphyr::from_multiple::<serde_json::Value>(text).expect("YAML").into_iter().filter(|d| !d.is_null()).collect()
}

/// The example cluster's KVMConfig: 3 masters, 5 workers.
pub fn kvm_config() -> KVMConfig {
    let doc =
        documents(&example("kvm-cluster.yaml")).into_iter().find(|d| d["kind"] == "KVMConfig").expect("KVMConfig");
    serde_json::from_value(doc).expect("KVMConfig decodes")
}

/// The example Release v20.1.0 renamed to `version`, its Kubernetes at `kubernetes`.
pub fn release(version: &str, kubernetes: &str) -> Release {
    let mut doc = documents(&example("kvm-release-v20.1.0.yaml")).remove(0);
    doc["metadata"]["name"] = format!("v{version}").into();
    for component in doc["spec"]["components"].as_array_mut().expect("components") {
        if component["name"] == "kubernetes" {
            component["version"] = kubernetes.into();
        }
    }
    serde_json::from_value(doc).expect("Release decodes")
}

/// The management cluster alone, with the operator running: no workload cluster, no
/// stand-ins, no cluster Secrets.
pub struct Management {
    /// The management cluster; dropping it stops the API server.
    pub mc: TestEnv,
    /// A client.
    pub client: kube::Client,
    /// Stops the operator: cancel it when the test is done.
    pub shutdown: CancellationToken,
}

impl Management {
    /// Start testenv with three `role=master` and six `role=worker` nodes, create the CRDs,
    /// Release v20.1.0 and namespace [`NS`], and run the operator (poll 300 ms, resync
    /// [`RESYNC`]).
    pub async fn start() -> anyhow::Result<Management> {
        let mut sim = SimConfig::default();
        for (role, count) in [("master", 3), ("worker", 6)] {
            for i in 1..=count {
                let mut node = NodeSpec::new(format!("mc-{role}-{i}"));
                node.labels.insert("role".into(), role.into());
                node.memory = "64Gi".into();
                node.cpu = "32".into();
                sim = sim.node(node);
            }
        }
        let mc = TestEnv::builder().simulation(sim).start().await?;
        let client = mc.client();
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        for crd in apis::all_crds() {
            crds.create(&PostParams::default(), &crd).await?;
        }
        Api::<Release>::all(client.clone()).create(&PostParams::default(), &release("20.1.0", "1.34.2")).await?;
        let ns: Namespace = serde_json::from_value(serde_json::json!({"metadata": {"name": NS}}))?;
        Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &ns).await?;

        let config = OperatorConfig {
            version: VERSION.into(),
            settings: Settings {
                operator_version: VERSION.into(),
                dns_servers: vec!["10.61.0.53".into()],
                ntp_servers: vec![],
            },
            node_config: Default::default(),
            roles: ClusterRoles::default(),
        };
        let shared = Arc::new(Shared::new(client.clone(), config, None, Duration::from_millis(300), RESYNC));
        let shutdown = CancellationToken::new();
        let token = shutdown.clone();
        tokio::spawn(async move {
            let mut registry = prometheus_client::registry::Registry::default();
            let metrics = operatorkit::Metrics::new(&mut registry);
            let readiness = operatorkit::Readiness::new();
            let settings = RunSettings { concurrency: 2, resync: RESYNC, ..RunSettings::default() };
            if let Err(e) = daemon::run(shared, &metrics, &readiness, settings, token).await {
                eprintln!("operator stopped: {e:#}");
            }
        });
        Ok(Management { mc, client, shutdown })
    }
}

/// The management cluster, the workload cluster, the operator and the stand-ins.
pub struct World {
    /// The management cluster.
    pub mc: TestEnv,
    /// The workload cluster.
    pub wc: Arc<WorkloadCluster>,
    /// A management-cluster client.
    pub client: kube::Client,
    /// VM IPs given out, by pod name.
    pub ips: Arc<Mutex<BTreeMap<String, String>>>,
    shutdown: CancellationToken,
}

impl Drop for World {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

impl World {
    /// Start both clusters, the operator (poll 300 ms, resync [`RESYNC`]) and the stand-ins;
    /// create the CRDs, Release v20.1.0, the namespace, the certificate and encryption-key
    /// Secrets and the workload cluster's kubeconfig Secret.
    pub async fn start() -> anyhow::Result<World> {
        let Management { mc, client, shutdown } = Management::start().await?;
        create_secrets(&client).await?;
        let wc = Arc::new(WorkloadCluster::start().await?);
        Api::<Secret>::namespaced(client.clone(), NS)
            .create(&PostParams::default(), &wc.kubeconfig_secret(NS, ID))
            .await?;
        let ips = Arc::new(Mutex::new(BTreeMap::new()));
        let stand_ins = StandIns { mc: client.clone(), wc: wc.clone(), ips: ips.clone() };
        let token = shutdown.clone();
        tokio::spawn(async move {
            loop {
                if let Err(e) = stand_ins.step().await {
                    eprintln!("stand-ins: {e:#}");
                }
                tokio::select! {
                    () = token.cancelled() => return,
                    () = tokio::time::sleep(Duration::from_millis(100)) => {}
                }
            }
        });
        Ok(World { mc, wc, client, ips, shutdown })
    }

    /// The KVMConfigs of [`NS`].
    pub fn configs(&self) -> Api<KVMConfig> {
        Api::namespaced(self.client.clone(), NS)
    }

    /// The node Deployments.
    pub fn deployments(&self) -> Api<Deployment> {
        Api::namespaced(self.client.clone(), ID)
    }

    /// The workload cluster's Nodes.
    pub fn wc_nodes(&self) -> Api<Node> {
        Api::all(self.wc.client())
    }
}

/// The cert-operator Secrets and the encryption key of cluster [`ID`].
pub async fn create_secrets(client: &kube::Client) -> anyhow::Result<()> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    for cert in ["api", "calico-etcd-client", "etcd", "service-account", "worker"] {
        let secret: Secret = serde_json::from_value(serde_json::json!({
            "metadata": {"name": format!("{ID}-{cert}"),
                         "labels": {"giantswarm.io/cluster": ID, "giantswarm.io/certificate": cert}},
            "stringData": {"ca": "CA", "crt": "CRT", "key": "KEY"}
        }))?;
        secrets.create(&PostParams::default(), &secret).await?;
    }
    let key: Secret = serde_json::from_value(serde_json::json!({
        "metadata": {"name": format!("{ID}-encryption"),
                     "labels": {"giantswarm.io/cluster": ID, "giantswarm.io/randomkey": "encryption"}},
        "stringData": {"encryption": "a2V5"}
    }))?;
    secrets.create(&PostParams::default(), &key).await?;
    Ok(())
}

/// The sidecar, the VMs joining the workload cluster and the node-readiness mirror.
struct StandIns {
    mc: kube::Client,
    wc: Arc<WorkloadCluster>,
    ips: Arc<Mutex<BTreeMap<String, String>>>,
}

fn running(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none() && pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
}

fn node_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

impl StandIns {
    async fn step(&self) -> anyhow::Result<()> {
        let pods: Api<Pod> = Api::namespaced(self.mc.clone(), ID);
        let selector = format!("{}={}", keys::POD_WATCHER, kvm_objects::names::OPERATOR);
        let list = pods.list(&ListParams::default().labels(&selector)).await?.items;
        let mut machines = Vec::new();
        for pod in list.iter().filter(|p| running(p)) {
            let name = pod.name_any();
            let ip = {
                let mut ips = self.ips.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                let next = ips.len() + 11;
                ips.entry(name.clone()).or_insert_with(|| format!("10.77.{}.{}", next / 250, next % 250)).clone()
            };
            if pod.annotations().get(keys::VM_IP) != Some(&ip) {
                let patch = serde_json::json!({"metadata": {"annotations": {keys::VM_IP: ip}}});
                pods.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await?;
            }
            let label = |key: &str| pod.labels().get(key).cloned().unwrap_or_default();
            machines.push(
                Machine::new(&name)
                    .ip(&ip)
                    .provider_id(format!("kvm://{}", pod.uid().unwrap_or_default()))
                    .label("role", label(keys::APP))
                    .label("giantswarm.io/provider", "kvm")
                    .label(apis::labels::RELEASE_VERSION, label(apis::labels::RELEASE_VERSION))
                    .label(apis::labels::KVM_OPERATOR_VERSION, label(apis::labels::KVM_OPERATOR_VERSION)),
            );
        }
        self.wc.sync_machines(&machines).await?;

        let nodes: BTreeMap<String, bool> = Api::<Node>::all(self.wc.client())
            .list(&ListParams::default())
            .await?
            .items
            .iter()
            .map(|n| (n.name_any(), node_ready(n)))
            .collect();
        for pod in list.iter().filter(|p| running(p) && p.labels().get(keys::APP).map(String::as_str) == Some("worker"))
        {
            let ready = nodes.get(&pod.name_any()).copied().unwrap_or(false);
            let status = if ready { "True" } else { "False" };
            let current = pod
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .and_then(|c| c.iter().find(|c| c.type_ == NODE_READY_CONDITION))
                .map(|c| c.status.clone());
            if current.as_deref() != Some(status) {
                let mut conditions: Vec<serde_json::Value> = pod
                    .status
                    .as_ref()
                    .and_then(|s| s.conditions.clone())
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|c| c.type_ != NODE_READY_CONDITION)
                    .map(|c| serde_json::to_value(c).unwrap_or_default())
                    .collect();
                conditions.push(serde_json::json!({
                    "type": NODE_READY_CONDITION, "status": status,
                    "lastTransitionTime": jiff::Timestamp::now().to_string(),
                }));
                let patch = serde_json::json!({"status": {"conditions": conditions}});
                pods.patch_status(&pod.name_any(), &PatchParams::default(), &Patch::Merge(&patch)).await?;
            }
        }
        Ok(())
    }
}

/// Poll `check` every 100 ms until it returns a value, for at most `seconds`.
pub async fn eventually<T, F, Fut>(what: &str, seconds: u64, mut check: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Option<T>>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(seconds);
    loop {
        if let Some(value) = check().await? {
            return Ok(value);
        }
        if tokio::time::Instant::now() > deadline {
            anyhow::bail!("timed out after {seconds} s waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The sorted names of the objects `api` lists with `selector`.
pub async fn names<K>(api: &Api<K>, selector: &str) -> anyhow::Result<Vec<String>>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let mut names: Vec<String> =
        api.list(&ListParams::default().labels(selector)).await?.items.iter().map(ResourceExt::name_any).collect();
    names.sort();
    Ok(names)
}

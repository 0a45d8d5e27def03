//! The world of kvm-operator's lifecycle tests: a management cluster (testenv with simulated
//! hosts labelled `role=master` and `role=worker`) running the operator as `kvm-operator daemon`
//! runs it (its four controllers and the drain executor, on one cache of workload-cluster
//! clients), a simulated workload cluster, and `workload_sim::pods::NodePods` standing in for
//! what is not the operator: the sidecar that publishes each node pod's VM IP, and the VMs
//! joining the workload cluster (same name, the VM IP, the labels the node's kubelet would set:
//! `role`, the release and the operator version of the pod). The node-ready condition of the
//! worker pods is the operator's own node watcher's.

#![allow(dead_code)]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use apis::cluster_status::ClusterCondition;
use apis::kvm::KVMConfig;
use apis::release::Release;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Node, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ListParams, PostParams};
use kube::{Api, ResourceExt};
use kvm_objects::access::ClusterRoles;
use kvm_objects::cluster::Settings;
use kvm_objects::names::keys;
use kvm_operator::config::{NodeSettings, OperatorConfig};
use kvm_operator::context::Shared;
use kvm_operator::daemon::{Daemon, Tuning};
use operatorkit::RunSettings;
use testenv::TestEnv;
use tokio_util::sync::CancellationToken;
use workload_sim::WorkloadCluster;
use workload_sim::pods::{self, NodePods};

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

/// The operator's configuration in these tests: version [`VERSION`], DNS server 10.61.0.53.
pub fn operator_config() -> OperatorConfig {
    OperatorConfig {
        version: VERSION.into(),
        settings: Settings {
            operator_version: VERSION.into(),
            dns_servers: vec!["10.61.0.53".into()],
            ntp_servers: vec![],
            images: Default::default(),
        },
        node_config: Default::default(),
        roles: ClusterRoles::default(),
        access: None,
        rollout: Default::default(),
    }
}

/// The operator under test, as `kvm-operator daemon` runs it ([`Daemon`]: poll 300 ms, resync
/// [`RESYNC`], drains polled every 200 ms), in a runtime of its own: killing it stops every
/// task at whatever await it is at, as a crash would, with no graceful shutdown.
pub struct Operator {
    mc: testenv::Handle,
    running: Option<(tokio::runtime::Runtime, CancellationToken)>,
    /// The operator's clock (kept across restarts): tests move it to open a maintenance window
    /// or to age the nodes.
    pub clock: node_lifecycle::maintenance::Clock,
    /// The operator's count of max-age replacements (kept across restarts).
    pub max_age_replacements: prometheus_client::metrics::counter::Counter,
    /// The operator's configuration, [`operator_config`] unless the test starts it otherwise.
    config: OperatorConfig,
}

impl Operator {
    /// Start the operator against the management cluster `mc`.
    pub fn start(mc: testenv::Handle) -> anyhow::Result<Operator> {
        Self::start_with(mc, operator_config())
    }

    /// Start the operator with `config` against the management cluster `mc`.
    pub fn start_with(mc: testenv::Handle, config: OperatorConfig) -> anyhow::Result<Operator> {
        let mut operator =
            Operator { mc, running: None, clock: Default::default(), max_age_replacements: Default::default(), config };
        operator.restart()?;
        Ok(operator)
    }

    /// Start the operator again (a no-op while it runs).
    pub fn restart(&mut self) -> anyhow::Result<()> {
        if self.running.is_some() {
            return Ok(());
        }
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
        let token = CancellationToken::new();
        // A client of its own, made in its runtime: its connections die with the operator, as
        // a crashed process's would, and no one else's do.
        let client = {
            let _runtime = runtime.enter();
            self.mc.client()?
        };
        let mut shared = Shared::new(client, self.config.clone(), None, Duration::from_millis(300), RESYNC);
        shared.clock = self.clock.clone();
        shared.max_age_replacements = self.max_age_replacements.clone();
        let mut tuning = Tuning::new(VERSION)?;
        tuning.run = RunSettings { concurrency: 2, resync: RESYNC, ..RunSettings::default() };
        tuning.nodes = NodeSettings { watcher_resync: RESYNC, ..NodeSettings::default() };
        tuning.drain.poll = Duration::from_millis(200);
        tuning.drain.retry = Duration::from_millis(500);
        let stop = token.clone();
        runtime.spawn(async move {
            let mut registry = prometheus_client::registry::Registry::default();
            let started = Daemon::build(shared, tuning, &mut registry, &operatorkit::Readiness::new());
            match started {
                Ok(daemon) => {
                    if let Err(e) = daemon.run(stop).await {
                        eprintln!("operator stopped: {e:#}");
                    }
                }
                Err(e) => eprintln!("operator not started: {e:#}"),
            }
        });
        self.running = Some((runtime, token));
        Ok(())
    }

    /// Kill the operator: no reconcile finishes, no finalizer or lock is released.
    pub fn kill(&mut self) {
        if let Some((runtime, _token)) = self.running.take() {
            runtime.shutdown_background();
        }
    }
}

impl Drop for Operator {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The management cluster alone, with the operator running: no workload cluster, no
/// stand-ins, no cluster Secrets.
pub struct Management {
    /// The management cluster; dropping it stops the API server.
    pub mc: TestEnv,
    /// A client.
    pub client: kube::Client,
    /// The operator; dropping it stops it.
    pub operator: Operator,
}

impl Management {
    /// Start testenv with three `role=master` and six `role=worker` nodes, create the CRDs,
    /// Release v20.1.0 and namespace [`NS`], and run the operator (poll 300 ms, resync
    /// [`RESYNC`]).
    pub async fn start() -> anyhow::Result<Management> {
        Self::start_with(operator_config()).await
    }

    /// [`Management::start`] with the operator's configuration `config`.
    pub async fn start_with(config: OperatorConfig) -> anyhow::Result<Management> {
        let sim = pods::hosts(3, 6, "32", "64Gi", 110);
        let mc = TestEnv::builder().simulation(sim).start().await?;
        let client = mc.client();
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        for crd in apis::all_crds() {
            crds.create(&PostParams::default(), &crd).await?;
        }
        Api::<Release>::all(client.clone()).create(&PostParams::default(), &release("20.1.0", "1.34.2")).await?;
        let ns: Namespace = serde_json::from_value(serde_json::json!({"metadata": {"name": NS}}))?;
        Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &ns).await?;

        let operator = Operator::start_with(mc.handle().clone(), config)?;
        Ok(Management { mc, client, operator })
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
    /// The operator: [`Operator::kill`] and [`Operator::start`] it to crash and restart it.
    pub operator: Operator,
    /// Stops the stand-ins.
    shutdown: CancellationToken,
}

impl Drop for World {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

impl World {
    /// Start both clusters, the operator (poll 300 ms, resync [`RESYNC`]) and the stand-ins;
    /// create the CRDs, Release v20.1.0, the namespace and the workload cluster's kubeconfig
    /// Secret. The cluster's certificates and encryption key the operator issues.
    pub async fn start() -> anyhow::Result<World> {
        Self::start_with(operator_config()).await
    }

    /// [`World::start`] with the operator's configuration `config`.
    pub async fn start_with(config: OperatorConfig) -> anyhow::Result<World> {
        let Management { mc, client, operator } = Management::start_with(config).await?;
        let shutdown = CancellationToken::new();
        let wc = Arc::new(WorkloadCluster::start().await?);
        Api::<Secret>::namespaced(client.clone(), NS)
            .create(&PostParams::default(), &wc.kubeconfig_secret(NS, ID))
            .await?;
        let selector = format!("{}={}", keys::POD_WATCHER, kvm_objects::names::OPERATOR);
        let node_pods = NodePods::new(client.clone(), ID, selector, keys::VM_IP)
            .label_from_pod("role", keys::APP)
            .label_from_pod(apis::labels::RELEASE_VERSION, apis::labels::RELEASE_VERSION)
            .label_from_pod(apis::labels::KVM_OPERATOR_VERSION, apis::labels::KVM_OPERATOR_VERSION)
            .label("giantswarm.io/provider", "kvm");
        let token = shutdown.clone();
        node_pods.spawn(wc.clone(), Duration::from_millis(100), async move { token.cancelled().await });
        Ok(World { mc, wc, client, operator, shutdown })
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

/// `Ready`'s status and message.
pub fn ready(config: &KVMConfig) -> Option<(String, String)> {
    config
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| (c.status.clone(), c.message.clone()))
}

/// Wait (30 s at most) until the cluster's `Ready` is `False`; its reason and message.
pub async fn not_ready(w: &World, what: &str) -> anyhow::Result<(String, String)> {
    let configs = w.configs();
    eventually(&format!("Ready=False {what}"), 30, || async {
        let config = configs.get(ID).await?;
        Ok(config
            .status
            .and_then(|s| s.conditions.into_iter().find(|c| c.type_ == "Ready" && c.status == "False"))
            .map(|c| (c.reason, c.message)))
    })
    .await
}

/// Wait until the cluster is settled on `release`: `settled_by` (`Created` or `Updated`) set,
/// the release recorded, `nodes` nodes on it, `Ready=True`.
pub async fn settled(
    w: &World,
    settled_by: ClusterCondition,
    release: &str,
    nodes: usize,
) -> anyhow::Result<KVMConfig> {
    let configs = w.configs();
    eventually(&format!("{settled_by} on {release} with {nodes} nodes"), 120, || async {
        let config = configs.get(ID).await?;
        let Some(status) = config.status.as_ref() else { return Ok(None) };
        let lifecycle = &status.cluster;
        let done = lifecycle.has_condition(settled_by)
            && lifecycle.has_version(release)
            && lifecycle.nodes.len() == nodes
            && lifecycle.nodes.iter().all(|n| n.version == release)
            && ready(&config).is_some_and(|(s, _)| s == "True");
        Ok(done.then_some(config))
    })
    .await
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

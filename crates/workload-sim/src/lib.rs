//! A simulated workload cluster for the tests of operators that reach into workload clusters.
//!
//! A second `testenv`, with its cluster simulation on, plays the workload cluster (WC); the
//! management cluster (MC) is the test's usual testenv. The bridge here turns the machines a
//! test declares into WC Nodes (name, providerID, labels, InternalIP) and removes a Node when
//! its machine goes, whatever the machines are: kvm-operator's node pods in the MC, EC2
//! instances in moto, or a plain list. It runs workloads (a Deployment with a
//! PodDisruptionBudget) so that a drain is meaningful, flips nodes NotReady, and makes the WC
//! unreachable and reachable again through a gate: a TCP forwarder in front of the API server
//! that the kubeconfig Secret points at.
//!
//! ```no_run
//! use workload_sim::{Machine, Workload, WorkloadCluster};
//!
//! # async fn t() -> anyhow::Result<()> {
//! let wc = WorkloadCluster::start().await?;
//! wc.sync_machines(&[Machine::new("ip-10-1-1-37").provider_id("aws:///eu-central-1a/i-0abc").ip("10.1.1.37")]).await?;
//! wc.deploy(&Workload::new("web", "web", 10).max_unavailable(1)).await?;
//! wc.wait_ready("web", "web", 10).await?;
//! let secret = wc.kubeconfig_secret("al9qy", "al9qy"); // create it in the MC
//! wc.set_reachable(false); // the drainer now sees an unreachable WC
//! # Ok(()) }
//! ```
//!
//! [`pods::NodePods`] plays what runs inside node pods when a workload cluster's nodes are VMs in
//! management-cluster pods: the sidecar that publishes the VM IP, and the VM joining the WC.
//!
//! It is a crate of its own rather than a feature of `node-lifecycle`: a feature that only tests
//! turn on would compile `node-lifecycle`, and every crate above it, once for the tests and again
//! for `cargo run`, because Cargo unifies features per build.
#![forbid(unsafe_code)]

pub mod pods;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Pod, Secret};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use parking_lot::Mutex;
use testenv::{NodeSpec, SimConfig, Simulation, TestEnv};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// What went wrong in the simulated workload cluster.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// testenv failed to start.
    #[error("testenv: {0}")]
    TestEnv(#[from] testenv::Error),
    /// The simulation refused.
    #[error("simulation: {0}")]
    Sim(#[from] testenv::SimError),
    /// A request to the WC failed.
    #[error("workload cluster API: {0}")]
    Kube(#[from] kube::Error),
    /// I/O (the gate).
    #[error("gate: {0}")]
    Io(#[from] std::io::Error),
    /// A wait ran out.
    #[error("timed out waiting for {0}")]
    Timeout(String),
}

/// A machine a test declares: it becomes a WC Node.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Machine {
    /// The node name.
    pub name: String,
    /// `spec.providerID`, e.g. `aws:///eu-central-1a/i-0abc` or `kvm://<pod uid>`.
    pub provider_id: Option<String>,
    /// Labels besides the kubelet's well-known ones.
    pub labels: BTreeMap<String, String>,
    /// The InternalIP (the simulation assigns one otherwise).
    pub ip: Option<String>,
}

impl Machine {
    /// A machine called `name`.
    pub fn new(name: impl Into<String>) -> Self {
        Self { name: name.into(), ..Self::default() }
    }

    /// Set the provider ID.
    pub fn provider_id(mut self, id: impl Into<String>) -> Self {
        self.provider_id = Some(id.into());
        self
    }

    /// Add a label.
    pub fn label(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.labels.insert(key.into(), value.into());
        self
    }

    /// Set the InternalIP.
    pub fn ip(mut self, ip: impl Into<String>) -> Self {
        self.ip = Some(ip.into());
        self
    }
}

/// A Deployment with a PodDisruptionBudget over its pods.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Workload {
    /// Namespace (created if missing).
    pub namespace: String,
    /// Name of the Deployment and the budget; pods are labelled `app=<name>`.
    pub name: String,
    /// Replicas.
    pub replicas: i32,
    /// The budget's `maxUnavailable`: a number or a percentage such as `10%`; `None` for
    /// `minAvailable: 100%` (a budget that never allows a disruption).
    pub max_unavailable: Option<String>,
    /// `terminationGracePeriodSeconds` of the pods.
    pub grace_seconds: i64,
    /// The pods' readiness policy (`sim.testenv.giantswarm.io/readiness`), e.g. `300ms`.
    pub readiness: Option<String>,
    /// `nodeSelector` of the pods.
    pub node_selector: BTreeMap<String, String>,
}

impl Workload {
    /// `replicas` pods in `namespace`, budget `maxUnavailable: 1`, grace 1 s.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>, replicas: i32) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
            replicas,
            max_unavailable: Some("1".into()),
            grace_seconds: 1,
            readiness: None,
            node_selector: BTreeMap::new(),
        }
    }

    /// Set the budget's maxUnavailable (`"1"`, `"10%"`).
    pub fn max_unavailable(mut self, value: impl ToString) -> Self {
        self.max_unavailable = Some(value.to_string());
        self
    }

    /// A budget that never allows a disruption (`minAvailable: 100%`).
    pub fn never_disrupt(mut self) -> Self {
        self.max_unavailable = None;
        self
    }

    /// Set the pods' grace period.
    pub fn grace_seconds(mut self, seconds: i64) -> Self {
        self.grace_seconds = seconds;
        self
    }

    /// Set the pods' readiness policy (`Immediate`, `Never`, `300ms`, …).
    pub fn readiness(mut self, policy: impl Into<String>) -> Self {
        self.readiness = Some(policy.into());
        self
    }

    /// Restrict the pods to nodes with this label.
    pub fn node_selector(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.node_selector.insert(key.into(), value.into());
        self
    }

    /// The Deployment.
    pub fn deployment(&self) -> Deployment {
        let mut annotations = BTreeMap::new();
        if let Some(r) = &self.readiness {
            annotations.insert("sim.testenv.giantswarm.io/readiness".to_string(), r.clone());
        }
        serde_json::from_value(serde_json::json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": {
                "replicas": self.replicas,
                "selector": {"matchLabels": {"app": self.name}},
                "template": {
                    "metadata": {"labels": {"app": self.name}, "annotations": annotations},
                    "spec": {
                        "terminationGracePeriodSeconds": self.grace_seconds,
                        "nodeSelector": self.node_selector,
                        "containers": [{"name": "app", "image": "registry.example/app:1"}]
                    }
                }
            }
        }))
        .expect("a valid Deployment")
    }

    /// The PodDisruptionBudget.
    pub fn budget(&self) -> PodDisruptionBudget {
        let limit = match &self.max_unavailable {
            Some(v) => match v.parse::<i32>() {
                Ok(n) => serde_json::json!({"maxUnavailable": n}),
                Err(_) => serde_json::json!({"maxUnavailable": v}),
            },
            None => serde_json::json!({"minAvailable": "100%"}),
        };
        let mut spec = serde_json::json!({"selector": {"matchLabels": {"app": self.name}}});
        if let (Some(spec), Some(limit)) = (spec.as_object_mut(), limit.as_object()) {
            spec.extend(limit.clone());
        }
        serde_json::from_value(serde_json::json!({
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": spec,
        }))
        .expect("a valid PodDisruptionBudget")
    }
}

/// A TCP forwarder to the WC's API server that can refuse connections and cut open ones.
struct Gate {
    addr: SocketAddr,
    up: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Gate {
    async fn start(target: SocketAddr) -> Result<Gate, Error> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (up, rx) = watch::channel(true);
        let task = tokio::spawn(async move {
            loop {
                let Ok((mut inbound, _)) = listener.accept().await else { continue };
                if !*rx.borrow() {
                    drop(inbound);
                    continue;
                }
                let mut rx = rx.clone();
                tokio::spawn(async move {
                    let Ok(mut outbound) = TcpStream::connect(target).await else { return };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                        _ = rx.wait_for(|up| !*up) => {}
                    }
                });
            }
        });
        Ok(Gate { addr, up, task })
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A simulated workload cluster.
pub struct WorkloadCluster {
    env: TestEnv,
    gate: Gate,
    machines: Mutex<BTreeSet<String>>,
}

impl std::fmt::Debug for WorkloadCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkloadCluster").field("url", &self.env.base_url()).field("gate", &self.gate.addr).finish()
    }
}

impl WorkloadCluster {
    /// A WC without nodes.
    pub async fn start() -> Result<Self, Error> {
        Self::start_with(SimConfig::default()).await
    }

    /// A WC with this simulation configuration (its nodes are not machines of the bridge).
    pub async fn start_with(config: SimConfig) -> Result<Self, Error> {
        let env = TestEnv::builder().simulation(config).start().await?;
        Self::gated(env).await
    }

    /// A WC without nodes that serves HTTPS with its own CA, as a real workload cluster does:
    /// its kubeconfig carries that CA, so a client trusts it alone (the gate passes TLS through).
    pub async fn start_tls() -> Result<Self, Error> {
        let env = TestEnv::builder().simulation(SimConfig::default()).tls(true).start().await?;
        Self::gated(env).await
    }

    async fn gated(env: TestEnv) -> Result<Self, Error> {
        let gate = Gate::start(env.handle().addr()).await?;
        Ok(Self { env, gate, machines: Mutex::new(BTreeSet::new()) })
    }

    /// The testenv playing the WC (faults, request counters, clock).
    pub fn env(&self) -> &TestEnv {
        &self.env
    }

    /// The simulation.
    pub fn sim(&self) -> &Simulation {
        self.env.sim().expect("the workload cluster runs with simulation")
    }

    /// A direct client (not through the gate), for the test's own reads.
    pub fn client(&self) -> kube::Client {
        self.env.client()
    }

    /// The server URL operators use: through the gate.
    pub fn server_url(&self) -> String {
        let scheme = if self.env.handle().ca_pem().is_some() { "https" } else { "http" };
        format!("{scheme}://{}", self.gate.addr)
    }

    /// A kubeconfig for [`WorkloadCluster::server_url`], with the cluster's CA when it serves
    /// HTTPS.
    pub fn kubeconfig(&self) -> String {
        testenv::kubeconfig_yaml_with(&self.server_url(), self.env.handle().ca_pem().as_deref(), None)
    }

    /// The Cluster API kubeconfig Secret `<cluster>-kubeconfig` for the MC.
    pub fn kubeconfig_secret(&self, namespace: &str, cluster: &str) -> Secret {
        kubeconfig_secret(namespace, cluster, &self.kubeconfig())
    }

    /// Store [`Self::kubeconfig_secret`] in the MC, in place of a `<cluster>-kubeconfig` the
    /// operator may already have issued for the cluster: the Secret written here carries no
    /// issuer label, so the operator uses it as it is and never writes it.
    pub async fn install_kubeconfig(&self, secrets: &Api<Secret>, namespace: &str, cluster: &str) -> Result<(), Error> {
        let mut wanted = self.kubeconfig_secret(namespace, cluster);
        let name = format!("{cluster}-kubeconfig");
        loop {
            let written = match secrets.get_opt(&name).await? {
                Some(existing) => {
                    wanted.metadata.resource_version = existing.metadata.resource_version;
                    secrets.replace(&name, &PostParams::default(), &wanted).await
                }
                None => {
                    wanted.metadata.resource_version = None;
                    secrets.create(&PostParams::default(), &wanted).await
                }
            };
            match written {
                Ok(_) => return Ok(()),
                // The operator wrote it in between: read it again and replace that.
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Refuse (and cut) connections through the gate, or let them through again.
    pub fn set_reachable(&self, reachable: bool) {
        self.gate.up.send_replace(reachable);
    }

    /// Register a Node for `machine`.
    pub async fn add_machine(&self, machine: &Machine) -> Result<(), Error> {
        let mut spec = NodeSpec::new(&machine.name);
        for (k, v) in &machine.labels {
            spec = spec.label(k, v);
        }
        self.sim().add_node(spec)?;
        self.machines.lock().insert(machine.name.clone());
        let nodes: Api<Node> = Api::all(self.client());
        if let Some(id) = &machine.provider_id {
            let patch = serde_json::json!({"spec": {"providerID": id}});
            nodes.patch(&machine.name, &PatchParams::default(), &Patch::Merge(patch)).await?;
        }
        if let Some(ip) = &machine.ip {
            let patch = serde_json::json!({"status": {"addresses": [
                {"type": "InternalIP", "address": ip},
                {"type": "Hostname", "address": machine.name},
            ]}});
            nodes.patch_status(&machine.name, &PatchParams::default(), &Patch::Merge(patch)).await?;
        }
        Ok(())
    }

    /// Remove the Node of a machine that went (its pods are deleted, as pod GC does).
    pub fn remove_machine(&self, name: &str) -> Result<(), Error> {
        self.machines.lock().remove(name);
        self.sim().remove_node(name)?;
        Ok(())
    }

    /// Make the WC's Nodes follow `machines`: register the new ones, remove the Nodes of
    /// machines no longer declared. Nodes the bridge did not register are left alone.
    pub async fn sync_machines(&self, machines: &[Machine]) -> Result<(), Error> {
        let declared: BTreeSet<&str> = machines.iter().map(|m| m.name.as_str()).collect();
        let gone: Vec<String> =
            self.machines.lock().iter().filter(|n| !declared.contains(n.as_str())).cloned().collect();
        for name in gone {
            self.remove_machine(&name)?;
        }
        let known = self.machines.lock().clone();
        for machine in machines.iter().filter(|m| !known.contains(&m.name)) {
            self.add_machine(machine).await?;
        }
        Ok(())
    }

    /// The machines the bridge registered.
    pub fn machines(&self) -> Vec<String> {
        self.machines.lock().iter().cloned().collect()
    }

    /// Make a machine's node report Ready or NotReady.
    pub fn set_ready(&self, name: &str, ready: bool) -> Result<(), Error> {
        Ok(self.sim().set_node_ready(name, ready)?)
    }

    /// Create a workload: its namespace (if missing), Deployment and budget.
    pub async fn deploy(&self, workload: &Workload) -> Result<(), Error> {
        let client = self.client();
        let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
        let ns = serde_json::from_value(serde_json::json!({"metadata": {"name": workload.namespace}}))
            .expect("a valid Namespace");
        match namespaces.create(&PostParams::default(), &ns).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(e.into()),
        }
        let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), &workload.namespace);
        pdbs.create(&PostParams::default(), &workload.budget()).await?;
        let deployments: Api<Deployment> = Api::namespaced(client, &workload.namespace);
        deployments.create(&PostParams::default(), &workload.deployment()).await?;
        Ok(())
    }

    /// Wait until `count` pods of the workload run Ready (generous deadline: loaded machines).
    pub async fn wait_ready(&self, namespace: &str, name: &str, count: usize) -> Result<(), Error> {
        let pods: Api<Pod> = Api::namespaced(self.client(), namespace);
        let selector = format!("app={name}");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            let list = pods.list(&ListParams::default().labels(&selector)).await?;
            let ready = list.items.iter().filter(|p| is_ready(p)).count();
            if ready >= count {
                return Ok(());
            }
            if tokio::time::Instant::now() > deadline {
                return Err(Error::Timeout(format!("{count} Ready pods of {namespace}/{name} ({ready} so far)")));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The pods on `node`.
    pub async fn pods_on(&self, node: &str) -> Result<Vec<Pod>, Error> {
        let pods: Api<Pod> = Api::all(self.client());
        Ok(pods.list(&ListParams::default().fields(&format!("spec.nodeName={node}"))).await?.items)
    }
}

/// Whether a pod runs, Ready and not being deleted.
pub fn is_ready(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// A Cluster API kubeconfig Secret `<cluster>-kubeconfig` holding `kubeconfig` under `value`.
pub fn kubeconfig_secret(namespace: &str, cluster: &str, kubeconfig: &str) -> Secret {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": format!("{cluster}-kubeconfig"), "namespace": namespace,
                     "labels": {apis::labels::CLUSTER: cluster}},
        "stringData": {node_lifecycle::clients::KUBECONFIG_KEY: kubeconfig},
    }))
    .expect("a valid Secret")
}

//! # Cluster simulation
//!
//! The controllers and node agents a real cluster runs behind its API server, reduced to what
//! operators observe through the API: Deployments roll out, pods get scheduled, start, become
//! Ready, get IPs, and go away when deleted; Services get Endpoints; PodDisruptionBudgets get
//! status; Nodes renew their Leases. It is opt-in per [`TestEnv`](crate::TestEnv)
//! (`TestEnv::builder().simulation(SimConfig::default())`), so plain API tests stay plain.
//!
//! What runs, and the upstream code each part follows:
//!
//! | Part | Upstream | Module |
//! | --- | --- | --- |
//! | Deployment controller: RollingUpdate and Recreate, proportional scaling, revisions, history cleanup, status and conditions | `pkg/controller/deployment` | `deployment` |
//! | ReplicaSet controller: pods from the template, deletion ranking, status with `minReadySeconds` | `pkg/controller/replicaset` | `replicaset` |
//! | Scheduler: node selectors and required node affinity, taints and tolerations, cordon, resources, required pod (anti-)affinity; binding through `pods/binding` | kube-scheduler's default filter plugins | `scheduler` |
//! | Kubelet: pod start, IPs from the node's pod CIDR, container statuses, readiness by policy and readiness gates, pods that run to completion, containers that stop when their pod is deleted | `pkg/kubelet/status` | `kubelet` |
//! | Nodes: registration, Leases in `kube-node-lease`, Ready heartbeats, `not-ready` and `unschedulable` taints, NoExecute taint eviction, pods of removed nodes | kubelet, node lifecycle, taint eviction and pod GC controllers | `nodes` |
//! | Job controller: completions, parallelism, backoff limit, deadline, conditions; deletion of finished Jobs after `ttlSecondsAfterFinished` | `pkg/controller/job`, `pkg/controller/ttlafterfinished` | `job` |
//! | Disruption controller: PodDisruptionBudget status | `pkg/controller/disruption` (the arithmetic is shared with the eviction API in [`crate::api::eviction`]) | `disruption` |
//! | Endpoints controller: Endpoints of Services with a selector | `pkg/controller/endpoint` | `endpoints` |
//!
//! All of it runs in one task that follows the store's event logs (the same ones watches
//! read), keeps typed caches, and reconciles the objects an event concerns; it writes through
//! [`Api`] like any client, so watchers see every change and finalizers, the garbage
//! collector and namespace termination behave as without the simulation. Nothing is written
//! when nothing changes: an idle cluster costs one Lease renewal per node per
//! [`SimConfig::lease_renew_interval`] and one node status heartbeat per
//! [`SimConfig::node_status_interval`].
//!
//! Pods of simulated nodes follow a [`ReadinessPolicy`]: the simulation's default
//! ([`Simulation::set_readiness`]), overridden per pod by the annotation
//! [`READINESS_ANNOTATION`] and, above both, by [`Simulation::set_pod_ready`].
//!
//! Pods that are not restarted (`restartPolicy` `Never` or `OnFailure`) run to completion by a
//! [`CompletionPolicy`]: the simulation's default ([`SimConfig::completion`]), overridden per
//! pod by [`COMPLETION_ANNOTATION`], with the exit code of [`EXIT_CODE_ANNOTATION`].
//!
//! A deleted pod's containers stop by the [`TerminationPolicy`] ([`SimConfig::termination`]):
//! at once by default, after a delay, or not before the grace period ends. The kubelet then
//! reports them terminated and deletes the pod with grace 0. With the full grace period, the API
//! layer's pod grace reaper deletes the pod when the period ends (as it does without the
//! simulation), and the kubelet reports the containers killed, which is what remains visible
//! when finalizers keep the pod. preStop hooks are not run.

mod cache;
mod deployment;
mod disruption;
mod endpoints;
mod job;
mod kubelet;
mod nodes;
mod replicaset;
mod runtime;
mod scheduler;

use std::collections::{BTreeMap, HashMap};
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Taint;
use parking_lot::Mutex;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::api::Api;
use crate::error::ApiError;
use crate::store::ObjKey;

/// The pod annotation that overrides the readiness policy for one pod: `Immediate`,
/// `Never`, `Manual`, or a delay after container start such as `500ms`, `5s` or `2m`.
pub const READINESS_ANNOTATION: &str = "sim.testenv.giantswarm.io/readiness";

/// The pod annotation that overrides, for one pod whose `restartPolicy` is `Never` or
/// `OnFailure`, when its containers exit: `Immediate`, `Never`, or a delay after container start
/// such as `500ms`, `5s` or `2m` (the syntax of [`READINESS_ANNOTATION`]).
pub const COMPLETION_ANNOTATION: &str = "sim.testenv.giantswarm.io/completion";

/// The pod annotation that sets the exit code the containers of a completing pod report
/// (default `0`). Non-zero: a `Never` pod fails, an `OnFailure` pod's containers restart.
pub const EXIT_CODE_ANNOTATION: &str = "sim.testenv.giantswarm.io/exit-code";

/// When the containers of a pod that is not restarted (`restartPolicy` `Never` or `OnFailure`)
/// run to completion. Pods with `restartPolicy: Always` run until deleted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CompletionPolicy {
    /// As soon as the containers start.
    #[default]
    Immediate,
    /// This long after the containers start.
    After(Duration),
    /// Never: the containers run until the pod is deleted.
    Never,
}

impl CompletionPolicy {
    /// Parse the value of [`COMPLETION_ANNOTATION`] (keywords are case-insensitive).
    pub fn parse(value: &str) -> Option<CompletionPolicy> {
        let value = value.trim();
        match value.to_ascii_lowercase().as_str() {
            "immediate" => Some(CompletionPolicy::Immediate),
            "never" => Some(CompletionPolicy::Never),
            _ => parse_duration(value).map(CompletionPolicy::After),
        }
    }
}

/// How long the simulated containers of a pod being deleted take to stop. The kubelet then
/// reports them terminated and deletes the pod, as a real kubelet does when its containers
/// exit before the grace period ends.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TerminationPolicy {
    /// The containers stop at once on SIGTERM (exit code 143).
    #[default]
    Immediate,
    /// The containers stop this long after the deletion, or at the end of the grace period if
    /// that comes first.
    After(Duration),
    /// The containers ignore SIGTERM and are killed at the end of the grace period (exit code
    /// 137), which is when the pod goes.
    FullGracePeriod,
}

/// When the simulated kubelet reports a running pod's containers Ready.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ReadinessPolicy {
    /// As soon as the containers start.
    #[default]
    Immediate,
    /// This long after the containers start.
    After(Duration),
    /// Never: the pod runs but stays unready.
    Never,
    /// Unready until the test says otherwise with [`Simulation::set_pod_ready`].
    Manual,
}

impl ReadinessPolicy {
    /// Parse the value of [`READINESS_ANNOTATION`] (keywords are case-insensitive).
    pub fn parse(value: &str) -> Option<ReadinessPolicy> {
        let value = value.trim();
        match value.to_ascii_lowercase().as_str() {
            "immediate" => Some(ReadinessPolicy::Immediate),
            "never" => Some(ReadinessPolicy::Never),
            "manual" => Some(ReadinessPolicy::Manual),
            _ => parse_duration(value).map(ReadinessPolicy::After),
        }
    }
}

/// `500ms`, `5s`, `1.5s`, `2m`, `1h`.
fn parse_duration(value: &str) -> Option<Duration> {
    let split = value.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
    let (number, unit) = value.split_at(split);
    let number: f64 = number.parse().ok()?;
    let seconds = match unit {
        "ms" => number / 1000.0,
        "s" => number,
        "m" => number * 60.0,
        "h" => number * 3600.0,
        _ => return None,
    };
    Duration::try_from_secs_f64(seconds).ok()
}

/// A simulated node to create.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeSpec {
    /// The node name (also its `kubernetes.io/hostname` label).
    pub name: String,
    /// Labels besides the well-known ones the kubelet sets.
    pub labels: BTreeMap<String, String>,
    /// Taints (`spec.taints`).
    pub taints: Vec<Taint>,
    /// CPU capacity, as a quantity (default `4`).
    pub cpu: String,
    /// Memory capacity, as a quantity (default `16Gi`).
    pub memory: String,
    /// Pod capacity (default 110).
    pub pods: u32,
    /// Whether the kubelet reports Ready (default true).
    pub ready: bool,
    /// Created cordoned (`spec.unschedulable`).
    pub unschedulable: bool,
}

impl NodeSpec {
    /// A Ready node with default capacity.
    pub fn new(name: impl Into<String>) -> NodeSpec {
        NodeSpec {
            name: name.into(),
            labels: BTreeMap::new(),
            taints: Vec::new(),
            cpu: "4".into(),
            memory: "16Gi".into(),
            pods: 110,
            ready: true,
            unschedulable: false,
        }
    }

    /// Add a label.
    pub fn label(mut self, key: impl Into<String>, value: impl Into<String>) -> NodeSpec {
        self.labels.insert(key.into(), value.into());
        self
    }

    /// Add a taint with `effect` `NoSchedule`, `PreferNoSchedule` or `NoExecute`.
    pub fn taint(mut self, key: impl Into<String>, value: impl Into<String>, effect: impl Into<String>) -> NodeSpec {
        let value: String = value.into();
        self.taints.push(Taint {
            key: key.into(),
            value: (!value.is_empty()).then_some(value),
            effect: effect.into(),
            time_added: None,
        });
        self
    }

    /// Set the CPU, memory and pod capacity.
    pub fn capacity(mut self, cpu: impl Into<String>, memory: impl Into<String>, pods: u32) -> NodeSpec {
        self.cpu = cpu.into();
        self.memory = memory.into();
        self.pods = pods;
        self
    }

    /// Start NotReady.
    pub fn not_ready(mut self) -> NodeSpec {
        self.ready = false;
        self
    }

    /// Start cordoned.
    pub fn cordoned(mut self) -> NodeSpec {
        self.unschedulable = true;
        self
    }
}

/// Configuration of the simulation.
#[derive(Clone, Debug, PartialEq)]
pub struct SimConfig {
    /// Nodes created when the server starts.
    pub nodes: Vec<NodeSpec>,
    /// The default readiness policy of pods.
    pub readiness: ReadinessPolicy,
    /// How often each node's Lease is renewed (kubelet: 10 s).
    pub lease_renew_interval: Duration,
    /// `spec.leaseDurationSeconds` of node Leases (kubelet: 40).
    pub lease_duration_seconds: i32,
    /// How often an unchanged node status is re-reported with a new `lastHeartbeatTime`
    /// (kubelet's `nodeStatusReportFrequency`: 5 minutes).
    pub node_status_interval: Duration,
    /// When pods with `restartPolicy` `Never` or `OnFailure` run to completion, unless the
    /// pod's [`COMPLETION_ANNOTATION`] says otherwise (default: at once).
    pub completion: CompletionPolicy,
    /// How long containers of deleted pods take to stop (default: at once).
    pub termination: TerminationPolicy,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            nodes: Vec::new(),
            readiness: ReadinessPolicy::Immediate,
            lease_renew_interval: Duration::from_secs(10),
            lease_duration_seconds: 40,
            node_status_interval: Duration::from_secs(300),
            completion: CompletionPolicy::Immediate,
            termination: TerminationPolicy::Immediate,
        }
    }
}

impl SimConfig {
    /// Set when pods that are not restarted run to completion.
    pub fn completion(mut self, policy: CompletionPolicy) -> SimConfig {
        self.completion = policy;
        self
    }

    /// Set how long containers of deleted pods take to stop.
    pub fn termination(mut self, policy: TerminationPolicy) -> SimConfig {
        self.termination = policy;
        self
    }

    /// `n` default nodes named `node-1` … `node-<n>`.
    pub fn with_nodes(n: usize) -> SimConfig {
        SimConfig { nodes: (1..=n).map(|i| NodeSpec::new(format!("node-{i}"))).collect(), ..SimConfig::default() }
    }

    /// Add a node created at start.
    pub fn node(mut self, spec: NodeSpec) -> SimConfig {
        self.nodes.push(spec);
        self
    }

    /// Set the default readiness policy.
    pub fn readiness(mut self, policy: ReadinessPolicy) -> SimConfig {
        self.readiness = policy;
        self
    }

    /// Set the Lease renewal interval.
    pub fn lease_renew_interval(mut self, every: Duration) -> SimConfig {
        self.lease_renew_interval = every;
        self
    }

    /// Set the node status heartbeat interval.
    pub fn node_status_interval(mut self, every: Duration) -> SimConfig {
        self.node_status_interval = every;
        self
    }
}

/// Errors of the simulation's controls.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// A node of that name exists already.
    #[error("node {0:?} already exists")]
    NodeExists(String),
    /// No simulated node of that name.
    #[error("no simulated node {0:?}")]
    NodeNotFound(String),
    /// No such pod.
    #[error("pod {namespace}/{name} not found")]
    PodNotFound {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
    /// The node address space (2,816 nodes) is used up.
    #[error("no addresses left for another node")]
    AddressesExhausted,
    /// The API refused a write.
    #[error("the API refused a write: {0}")]
    Api(#[from] ApiError),
    /// The simulation has stopped (the server stopped).
    #[error("the simulation has stopped")]
    Stopped,
}

/// Requests from the controls to the simulation task.
#[derive(Debug)]
pub(crate) enum Command {
    /// Re-evaluate one pod (its readiness override changed).
    SyncPod(ObjKey),
    /// Re-evaluate one node (its readiness changed).
    SyncNode(String),
    /// Re-evaluate every pod of a simulated node (the default policy changed).
    SyncAllPods,
    /// Answer once everything seen so far has been processed.
    Idle(oneshot::Sender<()>),
}

/// A node the simulation runs a kubelet for.
#[derive(Clone, Debug)]
pub(crate) struct SimNode {
    /// Whether its kubelet reports Ready.
    pub ready: bool,
    /// Its InternalIP.
    pub address: Ipv4Addr,
    /// The network address of its /24 pod CIDR.
    pub pod_cidr: Ipv4Addr,
}

/// State shared by the controls and the simulation task.
#[derive(Debug)]
pub(crate) struct Control {
    /// The default readiness policy.
    pub readiness: ReadinessPolicy,
    /// Readiness set by the test, by pod uid.
    pub pod_ready: HashMap<String, bool>,
    /// The simulated nodes, by name.
    pub nodes: BTreeMap<String, SimNode>,
    /// The index the next node's addresses derive from.
    next_index: u32,
}

#[derive(Debug)]
pub(crate) struct Shared {
    pub api: Arc<Api>,
    pub config: SimConfig,
    pub control: Mutex<Control>,
    commands: mpsc::UnboundedSender<Command>,
}

/// The running simulation: controls for tests. Cheap to clone.
#[derive(Clone)]
pub struct Simulation {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Simulation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Simulation").field("nodes", &self.nodes()).finish_non_exhaustive()
    }
}

impl Simulation {
    /// Create the configured nodes and start the simulation task on the current runtime.
    pub(crate) fn start(api: Arc<Api>, config: SimConfig, stop: CancellationToken) -> Result<Simulation, SimError> {
        let (commands, rx) = mpsc::unbounded_channel();
        let control =
            Control { readiness: config.readiness, pod_ready: HashMap::new(), nodes: BTreeMap::new(), next_index: 0 };
        let shared = Arc::new(Shared { api, config: config.clone(), control: Mutex::new(control), commands });
        let sim = Simulation { shared: shared.clone() };
        for spec in config.nodes {
            sim.add_node(spec)?;
        }
        tokio::spawn(runtime::run(shared, rx, stop));
        Ok(sim)
    }

    /// Register a simulated node: its Node object (labels, taints, capacity, addresses, pod
    /// CIDR, conditions) and its Lease. Pods that did not fit anywhere are retried.
    pub fn add_node(&self, spec: NodeSpec) -> Result<(), SimError> {
        let node = {
            let mut control = self.shared.control.lock();
            if control.nodes.contains_key(&spec.name) {
                return Err(SimError::NodeExists(spec.name));
            }
            let index = control.next_index;
            let node = nodes::addresses(index).ok_or(SimError::AddressesExhausted)?;
            let node = SimNode { ready: spec.ready, ..node };
            control.next_index += 1;
            control.nodes.insert(spec.name.clone(), node.clone());
            node
        };
        if let Err(e) = nodes::register(&self.shared, &spec, &node) {
            self.shared.control.lock().nodes.remove(&spec.name);
            return Err(match e {
                SimError::Api(e) if e.code == 409 => SimError::NodeExists(spec.name),
                other => other,
            });
        }
        Ok(())
    }

    /// Delete a simulated node and its Lease. Its pods are deleted as the pod garbage
    /// collector deletes pods of vanished nodes (grace period 0; finalizers still hold).
    pub fn remove_node(&self, name: &str) -> Result<(), SimError> {
        if self.shared.control.lock().nodes.remove(name).is_none() {
            return Err(SimError::NodeNotFound(name.to_string()));
        }
        nodes::unregister(&self.shared, name)
    }

    /// Make a node's kubelet report Ready or NotReady. A NotReady node gets the
    /// `node.kubernetes.io/not-ready:NoSchedule` taint and its pods become unready.
    pub fn set_node_ready(&self, name: &str, ready: bool) -> Result<(), SimError> {
        match self.shared.control.lock().nodes.get_mut(name) {
            Some(node) => node.ready = ready,
            None => return Err(SimError::NodeNotFound(name.to_string())),
        }
        self.send(Command::SyncNode(name.to_string()))
    }

    /// The names of the simulated nodes.
    pub fn nodes(&self) -> Vec<String> {
        self.shared.control.lock().nodes.keys().cloned().collect()
    }

    /// Set the default readiness policy; it applies at once to every pod without its own.
    pub fn set_readiness(&self, policy: ReadinessPolicy) {
        self.shared.control.lock().readiness = policy;
        let _ = self.send(Command::SyncAllPods);
    }

    /// Make a pod Ready or unready, whatever its policy, for as long as the pod lives.
    pub fn set_pod_ready(&self, namespace: &str, name: &str, ready: bool) -> Result<(), SimError> {
        let pods = self.shared.api.registry.get("", "v1", "pods").ok_or(SimError::Stopped)?;
        let pod = self
            .shared
            .api
            .get_stored(&pods, namespace, name)
            .map_err(|_| SimError::PodNotFound { namespace: namespace.to_string(), name: name.to_string() })?;
        self.shared.control.lock().pod_ready.insert(pod.meta.uid.clone(), ready);
        self.send(Command::SyncPod((namespace.to_string(), name.to_string())))
    }

    /// Resolve once the simulation has processed every change made before the call and
    /// everything that followed from it (scheduling, pod start, status updates), except work
    /// that waits for time to pass (readiness delays, grace periods, heartbeats).
    pub async fn wait_idle(&self) -> Result<(), SimError> {
        let (tx, rx) = oneshot::channel();
        self.send(Command::Idle(tx))?;
        rx.await.map_err(|_| SimError::Stopped)
    }

    fn send(&self, command: Command) -> Result<(), SimError> {
        self.shared.commands.send(command).map_err(|_| SimError::Stopped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readiness_annotation_values_parse() {
        assert_eq!(ReadinessPolicy::parse("Never"), Some(ReadinessPolicy::Never));
        assert_eq!(ReadinessPolicy::parse("manual"), Some(ReadinessPolicy::Manual));
        assert_eq!(ReadinessPolicy::parse("IMMEDIATE"), Some(ReadinessPolicy::Immediate));
        assert_eq!(ReadinessPolicy::parse("500ms"), Some(ReadinessPolicy::After(Duration::from_millis(500))));
        assert_eq!(ReadinessPolicy::parse("1.5s"), Some(ReadinessPolicy::After(Duration::from_millis(1500))));
        assert_eq!(ReadinessPolicy::parse("2m"), Some(ReadinessPolicy::After(Duration::from_secs(120))));
        assert_eq!(ReadinessPolicy::parse("soon"), None);
        assert_eq!(ReadinessPolicy::parse("5"), None);
        assert_eq!(ReadinessPolicy::parse("5d"), None);
    }

    #[test]
    fn completion_annotation_values_parse() {
        assert_eq!(CompletionPolicy::parse("never"), Some(CompletionPolicy::Never));
        assert_eq!(CompletionPolicy::parse("Immediate"), Some(CompletionPolicy::Immediate));
        assert_eq!(CompletionPolicy::parse("2s"), Some(CompletionPolicy::After(Duration::from_secs(2))));
        assert_eq!(CompletionPolicy::parse("later"), None);
    }
}

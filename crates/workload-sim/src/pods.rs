//! Stand-ins for what runs inside node pods on a real management cluster, for operators whose
//! workload-cluster nodes are VMs in MC pods (kvm-operator):
//!
//! - the sidecar that publishes the VM's IP as a pod annotation: each running node pod gets an
//!   address of its own, kept for the pod's name;
//! - the VM joining the workload cluster: the WC's machines follow the running node pods (same
//!   name, the VM IP, labels copied from the pod).
//!
//! [`NodePods::step`] does one pass; [`NodePods::spawn`] repeats it until cancelled. Each pass
//! lists the node pods once and writes only what changed, so an idle simulation writes nothing.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams};
use parking_lot::Mutex;

use crate::{Error, Machine, WorkloadCluster};

/// The node pods of one workload cluster and the VMs they stand for.
pub struct NodePods {
    mc: kube::Client,
    namespace: String,
    selector: String,
    ip_annotation: String,
    ip_prefix: String,
    labels_from_pod: Vec<(String, String)>,
    labels: Vec<(String, String)>,
    ips: Mutex<BTreeMap<String, String>>,
}

impl std::fmt::Debug for NodePods {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodePods")
            .field("namespace", &self.namespace)
            .field("selector", &self.selector)
            .field("ips", &self.ips.lock().len())
            .finish_non_exhaustive()
    }
}

impl NodePods {
    /// The pods in `namespace` of the MC that match `selector` are node pods; their VM IP goes
    /// into the annotation `ip_annotation`. Addresses are `10.77.x.y` unless
    /// [`NodePods::ip_prefix`] says otherwise.
    pub fn new(
        mc: kube::Client,
        namespace: impl Into<String>,
        selector: impl Into<String>,
        ip_annotation: impl Into<String>,
    ) -> Self {
        Self {
            mc,
            namespace: namespace.into(),
            selector: selector.into(),
            ip_annotation: ip_annotation.into(),
            ip_prefix: "10.77".into(),
            labels_from_pod: Vec::new(),
            labels: Vec::new(),
            ips: Mutex::new(BTreeMap::new()),
        }
    }

    /// The first two octets of the VM addresses (distinct per cluster when several share a WC).
    pub fn ip_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.ip_prefix = prefix.into();
        self
    }

    /// The WC node gets label `node_label` with the value of the pod's label `pod_label`.
    pub fn label_from_pod(mut self, node_label: impl Into<String>, pod_label: impl Into<String>) -> Self {
        self.labels_from_pod.push((node_label.into(), pod_label.into()));
        self
    }

    /// Every WC node gets label `key=value`.
    pub fn label(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.labels.push((key.into(), value.into()));
        self
    }

    /// The VM IPs handed out so far, by pod name.
    pub fn ips(&self) -> BTreeMap<String, String> {
        self.ips.lock().clone()
    }

    /// One pass: annotate running node pods with their VM IP, then make the WC's machines the
    /// running node pods.
    pub async fn step(&self, wc: &WorkloadCluster) -> Result<(), Error> {
        let pods: Api<Pod> = Api::namespaced(self.mc.clone(), &self.namespace);
        let list = pods.list(&ListParams::default().labels(&self.selector)).await?.items;
        let mut machines = Vec::new();
        for pod in list.iter().filter(|p| running(p)) {
            let name = pod.name_any();
            let ip = {
                let mut ips = self.ips.lock();
                let next = ips.len() + 11;
                let prefix = &self.ip_prefix;
                ips.entry(name.clone()).or_insert_with(|| format!("{prefix}.{}.{}", next / 250, next % 250)).clone()
            };
            if pod.annotations().get(&self.ip_annotation) != Some(&ip) {
                let patch = serde_json::json!({"metadata": {"annotations": {&self.ip_annotation: ip}}});
                pods.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await?;
            }
            let mut machine =
                Machine::new(&name).ip(&ip).provider_id(format!("kvm://{}", pod.uid().unwrap_or_default()));
            for (node_label, pod_label) in &self.labels_from_pod {
                machine = machine.label(node_label, pod.labels().get(pod_label).cloned().unwrap_or_default());
            }
            for (key, value) in &self.labels {
                machine = machine.label(key, value);
            }
            machines.push(machine);
        }
        wc.sync_machines(&machines).await
    }

    /// Repeat [`NodePods::step`] every `period` until `stop` resolves; a failed pass is retried
    /// at the next one.
    pub fn spawn(
        self,
        wc: Arc<WorkloadCluster>,
        period: Duration,
        stop: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            tokio::pin!(stop);
            loop {
                if let Err(error) = self.step(&wc).await {
                    eprintln!("node pods of {}: {error}", self.namespace);
                }
                tokio::select! {
                    () = &mut stop => return,
                    () = tokio::time::sleep(period) => {}
                }
            }
        })
    }
}

fn running(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none() && pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
}

/// A management cluster's simulated hosts for node pods: `masters` hosts labelled
/// `role=master` and `workers` labelled `role=worker` (`host-<role>-<n>`), each with `cpu`
/// cores and `memory` (quantities such as `64` and `256Gi`) and room for `pods` pods.
pub fn hosts(masters: usize, workers: usize, cpu: &str, memory: &str, pods: u32) -> testenv::SimConfig {
    let mut sim = testenv::SimConfig::default();
    for (role, count) in [("master", masters), ("worker", workers)] {
        for i in 1..=count {
            let mut node = testenv::NodeSpec::new(format!("host-{role}-{i}"));
            node.labels.insert("role".into(), role.into());
            node.cpu = cpu.into();
            node.memory = memory.into();
            node.pods = pods;
            sim = sim.node(node);
        }
    }
    sim
}

/// Placeholder cert-operator Secrets of cluster `id` in `namespace`, one per name in `certs`
/// (`<id>-<cert>`, labelled `giantswarm.io/cluster` and `giantswarm.io/certificate`, keys `ca`,
/// `crt`, `key`), and its encryption-key Secret (`<id>-encryption`, labelled
/// `giantswarm.io/randomkey=encryption`).
pub fn cluster_secrets(namespace: &str, id: &str, certs: &[&str]) -> Vec<k8s_openapi::api::core::v1::Secret> {
    use std::collections::BTreeMap;

    use k8s_openapi::ByteString;
    use k8s_openapi::api::core::v1::Secret;
    use kube::api::ObjectMeta;

    let secret = |name: String, labels: BTreeMap<String, String>, data: BTreeMap<String, ByteString>| Secret {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: Some(namespace.to_string()),
            labels: Some(labels),
            ..ObjectMeta::default()
        },
        data: Some(data),
        ..Secret::default()
    };
    let mut secrets: Vec<Secret> = certs
        .iter()
        .map(|cert| {
            secret(
                format!("{id}-{cert}"),
                BTreeMap::from([
                    ("giantswarm.io/cluster".to_string(), id.to_string()),
                    ("giantswarm.io/certificate".to_string(), cert.to_string()),
                ]),
                ["ca", "crt", "key"]
                    .into_iter()
                    .map(|key| (key.to_string(), ByteString(format!("{cert} {key}").into_bytes())))
                    .collect(),
            )
        })
        .collect();
    secrets.push(secret(
        format!("{id}-encryption"),
        BTreeMap::from([
            ("giantswarm.io/cluster".to_string(), id.to_string()),
            ("giantswarm.io/randomkey".to_string(), "encryption".to_string()),
        ]),
        BTreeMap::from([("encryption".to_string(), ByteString(b"ZW5jcnlwdGlvbiBrZXk=".to_vec()))]),
    ));
    secrets
}

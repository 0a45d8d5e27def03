//! `kvm-operator describe`: the tree of a cluster, read from the management cluster, never
//! written to.
//!
//! ```text
//! NAME                                   READY  REASON           SINCE  MESSAGE
//! KVMConfig/org-acme/x7k2p               True   ClusterReady     12m    lifecycle: Created
//! ├─Masters/x7k2p                        True   3/3 ready
//! │ ├─Pod/master-m0001-5d9c8b7f6d-abcde  True   Running          11m    VM IP 10.1.0.11
//! │ …
//! └─Workers/x7k2p                        False  4/5 ready
//!   └─Pod/worker-w0005-…                 False  Draining         1m     VM IP 10.1.0.25; drain: 3 pods evicted
//! ```
//!
//! The walk is pure ([`tree`]): a KVMConfig and the node pods and drains of its namespace
//! ([`ClusterObjects`]) become [`Line`]s; the output and the choice of each line's condition are
//! shared with aws-operator in [`node_lifecycle::describe`]. The edge ([`run`]) reads through
//! the kubeconfig the daemon uses.

use std::io::Write;

use anyhow::Context as _;
use apis::cluster_status::ClusterCondition;
use apis::drainer::DrainerConfig;
use apis::kvm::KVMConfig;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use kvm_objects::names::{self, keys};
use node_lifecycle::describe::{self as shared, DescribeArgs, Line, Readiness, Scope};

/// A cluster's objects in the management cluster.
#[derive(Debug, Clone)]
pub struct ClusterObjects {
    /// The cluster.
    pub config: KVMConfig,
    /// The node pods in the cluster's namespace.
    pub pods: Vec<Pod>,
    /// The drains of its nodes.
    pub drains: Vec<DrainerConfig>,
}

/// The tree of one cluster at `now`.
pub fn tree(objects: &ClusterObjects, now: Timestamp) -> Line {
    let config = &objects.config;
    let status = config.status.clone().unwrap_or_default();
    let name = format!("{}/{}", config.namespace().unwrap_or_default(), config.name_any());
    let mut root = Line::from_conditions("KVMConfig", name, &status.conditions, &shared::nothing_asks, &[]);
    // The lifecycle the Go operator kept (`Creating`, `Updating`, …), newest first.
    let lifecycle = [
        ClusterCondition::Deleting,
        ClusterCondition::Updating,
        ClusterCondition::Creating,
        ClusterCondition::Updated,
        ClusterCondition::Created,
    ]
    .into_iter()
    .filter_map(|c| status.cluster.condition(c).filter(|s| s.status == "True").map(|s| (c, s.last_transition_time.0)))
    .max_by_key(|(_, at)| *at);
    if let Some((c, _)) = lifecycle {
        let note = format!("lifecycle: {}", c.as_str());
        root.message = if root.message.is_empty() { note } else { format!("{note}; {}", root.message) };
    }
    root.children.extend(shared::maintenance_line(
        "spec.cluster.maintenance",
        config.spec.cluster.maintenance.as_ref(),
        now,
    ));
    let id = &config.spec.cluster.id;
    for (heading, role) in [("Masters", "master"), ("Workers", "worker")] {
        let mut pods: Vec<&Pod> =
            objects.pods.iter().filter(|p| p.labels().get(keys::APP).map(String::as_str) == Some(role)).collect();
        pods.sort_by_key(|p| p.name_any());
        let expected = match role {
            "master" => config.spec.cluster.masters.len(),
            _ => config.spec.cluster.workers.len(),
        };
        let lines: Vec<Line> = pods.iter().map(|p| pod_line(p, &objects.drains)).collect();
        let ready = lines.iter().filter(|l| l.ready == Readiness::True).count();
        let mut group = Line::new(heading, id.clone())
            .ready(if ready == expected && lines.len() == expected { Readiness::True } else { Readiness::False })
            .reason(format!("{ready}/{expected} ready"));
        if lines.len() != expected {
            group.message = format!("{} node pods for {expected} nodes", lines.len());
        }
        group.children = lines;
        root.children.push(group);
    }
    // Drains of nodes whose pod is already gone.
    let shown: Vec<String> = objects.pods.iter().map(|p| p.name_any()).collect();
    root.children.extend(objects.drains.iter().filter(|d| !shown.contains(&d.name_any())).map(shared::drain_line));
    root
}

/// A pod's condition of type `type_`.
fn pod_condition<'a>(pod: &'a Pod, type_: &str) -> Option<&'a k8s_openapi::api::core::v1::PodCondition> {
    pod.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == type_)
}

/// A node pod's line: the pod's readiness, its VM's IP, whether the workload cluster's node is
/// ready (workers), and its drain while it goes.
fn pod_line(pod: &Pod, drains: &[DrainerConfig]) -> Line {
    let ready = pod_condition(pod, "Ready");
    let node_ready = pod_condition(pod, names::NODE_READY_CONDITION);
    let mut notes = Vec::new();
    match pod.annotations().get(keys::VM_IP) {
        Some(ip) => notes.push(format!("VM IP {ip}")),
        None => notes.push("no VM IP yet".to_string()),
    }
    let line = Line::new("Pod", pod.name_any());
    let drain = drains.iter().find(|d| d.name_any() == pod.name_any()).map(shared::drain_line);
    if pod.metadata.deletion_timestamp.is_some() {
        let since = pod.metadata.deletion_timestamp.as_ref().map(|t| t.0);
        return match drain {
            Some(d) => {
                notes.push(format!("drain {}: {}", d.reason, d.message));
                line.ready(Readiness::False).reason("Draining").since(d.since.or(since)).message(notes.join("; "))
            }
            None => {
                if pod.annotations().get(keys::DRAINED).map(String::as_str) == Some("True") {
                    notes.push("drained".into());
                }
                line.ready(Readiness::False).reason("Terminating").since(since).message(notes.join("; "))
            }
        };
    }
    let phase = pod.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_else(|| "Pending".into());
    // A worker's pod is ready only while its workload-cluster node is (a readiness gate): the
    // node's condition says more than the gate.
    if let Some(n) = node_ready.filter(|n| n.status != "True") {
        notes.push(n.message.clone().unwrap_or_else(|| "its workload-cluster node is not ready".into()));
        return line
            .ready(Readiness::False)
            .reason(n.reason.clone().unwrap_or_else(|| "NodeNotReady".into()))
            .since(n.last_transition_time.as_ref().map(|t| t.0))
            .message(notes.join("; "));
    }
    match ready {
        Some(r) if r.status != "True" => {
            notes.extend(r.message.clone());
            line.ready(Readiness::False)
                .reason(r.reason.clone().unwrap_or(phase))
                .since(r.last_transition_time.as_ref().map(|t| t.0))
                .message(notes.join("; "))
        }
        None => line.ready(Readiness::False).reason(phase).message(notes.join("; ")),
        Some(r) => line
            .ready(Readiness::True)
            .reason(phase)
            .since(r.last_transition_time.as_ref().map(|t| t.0))
            .message(notes.join("; ")),
    }
}

/// Read the clusters `flags` select through `client`, with their node pods and drains.
pub async fn read_clusters(client: &kube::Client, flags: &DescribeArgs) -> anyhow::Result<Vec<ClusterObjects>> {
    let scope = flags.scope(client.default_namespace());
    let configs: Api<KVMConfig> = match &scope {
        Scope::All => Api::all(client.clone()),
        Scope::Namespace(ns) => Api::namespaced(client.clone(), ns),
    };
    let mut found: Vec<KVMConfig> = configs.list(&ListParams::default()).await.context("listing KVMConfigs")?.items;
    found.retain(|c| flags.selects(&c.name_any()));
    if let (Some(name), true) = (&flags.name, found.is_empty()) {
        let place = match &scope {
            Scope::All => "any namespace".to_string(),
            Scope::Namespace(ns) => format!("namespace {ns}"),
        };
        anyhow::bail!("no KVMConfig {name} in {place}; list them with `kubectl get kvmconfigs -A`");
    }
    found.sort_by_key(|c| (c.namespace(), c.name_any()));
    let mut out = Vec::new();
    for config in found {
        let ns = names::namespace(&config.spec.cluster.id);
        let selector = ListParams::default().labels(&format!("{}={}", keys::POD_WATCHER, names::OPERATOR));
        let pods =
            Api::<Pod>::namespaced(client.clone(), &ns).list(&selector).await.context("listing node pods")?.items;
        let mut drains: Vec<DrainerConfig> = Api::<DrainerConfig>::namespaced(client.clone(), &ns)
            .list(&ListParams::default())
            .await
            .context("listing DrainerConfigs")?
            .items;
        drains.sort_by_key(|o| o.name_any());
        out.push(ClusterObjects { config, pods, drains });
    }
    Ok(out)
}

/// Describe the clusters `flags` select, read through `client`, to `out`, coloured iff `colour`.
pub async fn describe(
    client: &kube::Client,
    flags: &DescribeArgs,
    out: &mut dyn Write,
    now: Timestamp,
    colour: bool,
) -> anyhow::Result<()> {
    let trees: Vec<Line> = read_clusters(client, flags).await?.iter().map(|o| tree(o, now)).collect();
    shared::write(out, &trees, flags.output, now, colour)?;
    Ok(())
}

/// `kvm-operator describe`: to standard output, reaching the management cluster as the daemon
/// does (`KUBECONFIG`, else the pod's service account).
pub async fn run(flags: &DescribeArgs) -> anyhow::Result<()> {
    use std::io::IsTerminal;
    let client = kube::Client::try_default().await.context("connecting to the management cluster")?;
    let stdout = std::io::stdout();
    let colour = operatorkit::logging::colour(stdout.is_terminal());
    describe(&client, flags, &mut stdout.lock(), Timestamp::now(), colour).await
}

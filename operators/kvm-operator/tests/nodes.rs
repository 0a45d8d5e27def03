//! The workload-cluster side of kvm-operator on two testenvs: the management cluster (MC) with
//! simulated hosts labelled `role=master|worker`, and a simulated workload cluster (WC,
//! `workload-sim`) reached through its `<id>-kubeconfig` Secret. Node pods are created here
//! directly, labelled as the cluster controller labels them (the KVMConfig has no certificate
//! Secrets, so the cluster controller creates nothing itself); WC nodes are registered with the
//! pods' names, as the VMs would.
//!
//! - the node watcher mirrors a WC node's readiness into its pod's condition, and the worker
//!   Endpoints follow;
//! - deleting a node pod, or evicting it through the eviction API, is held until its WC node is
//!   cordoned and drained under a PodDisruptionBudget;
//! - the deleter removes an orphaned NotReady WC node and keeps a Ready one and one with a pod;
//! - the unhealthy-node terminator replaces a pod whose node stays NotReady, and with three at
//!   once its circuit breaker deletes only the one allowed.

mod chart;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use apis::drainer::DrainerConfig;
use apis::kvm::KVMConfig;
use apis::release::Release;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Endpoints, Namespace, Node, Pod, Secret, Service};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::rbac::v1::RoleBinding;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DeleteParams, EvictParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use kvm_objects::access::ClusterRoles;
use kvm_objects::cluster::Settings;
use kvm_objects::names;
use kvm_operator::config::{NodeSettings, OperatorConfig};
use kvm_operator::context::Shared;
use kvm_operator::controllers::Nodes;
use kvm_operator::daemon::{Daemon, Tuning};
use node_lifecycle::drain::plan::Backoff;
use node_lifecycle::unhealthy::Limits;
use operatorkit::RunSettings;
use prometheus_client::registry::Registry;
use testenv::{NodeSpec, SimConfig, TestEnv};
use tokio_util::sync::CancellationToken;
use workload_sim::{Machine, Workload, WorkloadCluster};

const NS: &str = "org-acme";
const ID: &str = "x7k2p";
const VERSION: &str = "4.0.0";
const DRAINER_FINALIZER: &str = "operatorkit.giantswarm.io/kvm-operator-drainer-controller";
/// Generous: the machine is shared and loaded.
const DEADLINE: Duration = Duration::from_secs(90);

fn example(name: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/examples").join(name))
        .expect("example readable")
}

fn documents(text: &str) -> Vec<serde_json::Value> {
    serde_saphyr::from_multiple::<serde_json::Value>(text).expect("YAML").into_iter().filter(|d| !d.is_null()).collect()
}

fn kvm_config(annotations: serde_json::Value) -> KVMConfig {
    let mut doc =
        documents(&example("kvm-cluster.yaml")).into_iter().find(|d| d["kind"] == "KVMConfig").expect("KVMConfig");
    doc["metadata"]["annotations"] = annotations;
    serde_json::from_value(doc).expect("KVMConfig decodes")
}

struct World {
    env: TestEnv,
    /// The operator's user: it runs as the chart's ServiceAccount, with the chart's RBAC.
    operator: String,
    client: kube::Client,
    wc: WorkloadCluster,
    nodes: Arc<Nodes>,
    shutdown: CancellationToken,
}

impl Drop for World {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

impl World {
    /// Fail when RBAC refused the operator anything: the node controllers and the drain
    /// executor need no more than the chart grants.
    fn no_refusals(&self) -> anyhow::Result<()> {
        let refused = packaging::rbac::refusals(&self.env.handle().access_log_of(&self.operator));
        anyhow::ensure!(refused.is_empty(), "RBAC refused the operator: {refused:#?}");
        Ok(())
    }

    fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), ID)
    }

    fn wc_nodes(&self) -> Api<Node> {
        Api::all(self.wc.client())
    }

    /// A node pod named `name`, as the cluster controller's Deployments make them.
    async fn node_pod(&self, name: &str, role: &str, ip: &str) -> anyhow::Result<Pod> {
        let pod: Pod = serde_json::from_value(pod_template(name, role, ip))?;
        let pod = self.pods().create(&PostParams::default(), &pod).await?;
        // Running, and held by the drainer's finalizer.
        eventually(&format!("{name} running, with the drainer's finalizer"), || async {
            let pod = self.pods().get(name).await?;
            let running = pod.status.as_ref().and_then(|s| s.phase.as_deref()).is_some_and(|p| p == "Running");
            Ok((running && pod.finalizers().iter().any(|f| f == DRAINER_FINALIZER)).then_some(()))
        })
        .await?;
        Ok(pod)
    }

    /// How many pods of the workload `web` run on WC node `node`.
    async fn web_pods_on(&self, node: &str) -> anyhow::Result<usize> {
        let pods = self.wc.pods_on(node).await?;
        Ok(pods.iter().filter(|p| p.labels().get("app").map(String::as_str) == Some("web")).count())
    }

    /// The pod's node-ready condition status, if any.
    async fn node_ready(&self, name: &str) -> anyhow::Result<Option<String>> {
        let pod = self.pods().get(name).await?;
        Ok(kvm_objects::nodes::current_condition(&pod).map(|c| c.status.clone()))
    }

    async fn events(&self, namespace: &str, reason: &str) -> anyhow::Result<Vec<Event>> {
        let events: Api<Event> = Api::namespaced(self.client.clone(), namespace);
        Ok(events
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter(|e| e.reason.as_deref() == Some(reason))
            .collect())
    }
}

/// A node pod's JSON: the labels and annotations the drainer and the watcher go by.
fn pod_template(name: &str, role: &str, ip: &str) -> serde_json::Value {
    let mut spec = serde_json::json!({
        "nodeSelector": {"role": role},
        "terminationGracePeriodSeconds": 600,
        "containers": [{"name": "k8s-kvm", "image": "quay.io/giantswarm/k8s-kvm:0.6.2"}],
    });
    if role == "worker" {
        spec["readinessGates"] = serde_json::json!([{"conditionType": names::NODE_READY_CONDITION}]);
    }
    let mut metadata = serde_json::json!({
        "namespace": ID,
        "labels": {
            "app": role,
            "giantswarm.io/cluster": ID,
            names::keys::POD_WATCHER: names::OPERATOR,
            apis::labels::KVM_OPERATOR_VERSION: VERSION,
        },
        "annotations": {
            names::keys::API_ENDPOINT: "api.x7k2p.k8s.example.com",
            names::keys::VM_IP: ip,
            names::keys::SERVICE: role,
            names::keys::DRAINED: "False",
        },
    });
    if !name.is_empty() {
        metadata["name"] = serde_json::json!(name);
    }
    serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec})
}

async fn start(kvm_annotations: serde_json::Value, limits: Limits) -> anyhow::Result<World> {
    let _ = tracing_subscriber::fmt()
        .with_env_filter("kvm_operator=debug,node_lifecycle=info,operatorkit=info")
        .with_test_writer()
        .try_init();
    let mut sim = SimConfig::default();
    for (role, count) in [("master", 2), ("worker", 6)] {
        for i in 1..=count {
            let mut node = NodeSpec::new(format!("mc-{role}-{i}"));
            node.labels.insert("role".into(), role.into());
            node.memory = "64Gi".into();
            node.cpu = "32".into();
            sim = sim.node(node);
        }
    }
    let env = TestEnv::builder().secure().simulation(sim).start().await?;
    let client = env.client();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in apis::all_crds() {
        crds.create(&PostParams::default(), &crd).await?;
    }
    let release: Release = serde_json::from_value(documents(&example("kvm-release-v20.1.0.yaml")).remove(0))?;
    Api::<Release>::all(client.clone()).create(&PostParams::default(), &release).await?;
    // The operator runs with the chart's flags for its own RoleBinding.
    let rendered = packaging::helm_template("kvm-operator", &["ci/minimal-values.yaml"], &[])?;
    for ns in [NS, ID] {
        let ns: Namespace = serde_json::from_value(serde_json::json!({"metadata": {"name": ns}}))?;
        Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &ns).await?;
    }
    // The cluster's namespace as the cluster controller leaves it: with the operator's
    // RoleBinding, which gives it its rights inside.
    let binding = kvm_objects::access::operator_role_binding(ID, &chart::access(&rendered)?);
    Api::<RoleBinding>::namespaced(client.clone(), ID).create(&PostParams::default(), &binding).await?;
    let dcs: Api<DrainerConfig> = Api::namespaced(client.clone(), NS);
    eventually("the DrainerConfig API", || async { Ok(dcs.list(&ListParams::default()).await.ok().map(|_| ())) })
        .await?;
    // The selector-less worker Service, whose Endpoints the drainer writes.
    let service: Service = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "worker", "namespace": ID, "labels": {"giantswarm.io/cluster": ID}},
        "spec": {"type": "ClusterIP", "ports": [{"name": "http", "port": 30010, "protocol": "TCP"}]}
    }))?;
    Api::<Service>::namespaced(client.clone(), ID).create(&PostParams::default(), &service).await?;

    let wc = WorkloadCluster::start().await?;
    wc.install_kubeconfig(&Api::<Secret>::namespaced(client.clone(), NS), NS, ID).await?;
    // The cluster brings its own certificate, one that is not one: the cluster controller stops
    // at CertificateInvalid and leaves the node pods to this test.
    for secret in workload_sim::pods::cluster_secrets(NS, ID, &["api"]) {
        Api::<Secret>::namespaced(client.clone(), NS).create(&PostParams::default(), &secret).await?;
    }
    Api::<KVMConfig>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &kvm_config(kvm_annotations))
        .await?;

    let mut tuning = Tuning::new(VERSION)?;
    tuning.run = RunSettings { concurrency: 4, resync: Duration::from_secs(2), ..RunSettings::default() };
    tuning.drain.poll = Duration::from_millis(200);
    tuning.drain.retry = Duration::from_millis(500);
    tuning.drain.backoff = Backoff { initial: Duration::from_millis(200), max: Duration::from_secs(2) };
    tuning.drain.clients.connect_timeout = Duration::from_secs(2);
    tuning.drain.clients.request_timeout = Duration::from_secs(5);
    tuning.nodes = NodeSettings {
        terminate_unhealthy: false,
        limits,
        deleter_resync: Duration::from_secs(1),
        watcher_resync: Duration::from_secs(2),
        watcher_retry: Duration::from_millis(500),
    };
    let config = OperatorConfig {
        version: VERSION.into(),
        settings: Settings {
            operator_version: VERSION.into(),
            dns_servers: vec!["10.61.0.53".into()],
            ntp_servers: vec![],
            images: Default::default(),
        },
        node_config: Default::default(),
        roles: ClusterRoles::default(),
        access: Some(chart::access(&rendered)?),
        rollout: Default::default(),
    };
    let identity = packaging::rbac::apply_chart_identity(&client, env.handle(), &rendered).await?;
    let operator_client = env.handle().client_with_token(Some(&identity.token))?;
    let shared = Shared::new(operator_client, config, None, Duration::from_millis(300), Duration::from_secs(2));
    let mut registry = Registry::default();
    let daemon = Daemon::build(shared, tuning, &mut registry, &operatorkit::Readiness::new())?;
    let nodes = daemon.nodes().clone();
    let shutdown = CancellationToken::new();
    let token = shutdown.clone();
    tokio::spawn(async move {
        if let Err(e) = daemon.run(token).await {
            eprintln!("operator stopped: {e:#}");
        }
    });
    Ok(World { env, operator: identity.user, client, wc, nodes, shutdown })
}

fn default_limits() -> Limits {
    Limits { threshold: Duration::from_secs(3600), cooldown: Duration::from_secs(3600) }
}

async fn eventually<T, F, Fut>(what: &str, mut check: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Option<T>>>,
{
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        if let Some(value) = check().await? {
            return Ok(value);
        }
        if tokio::time::Instant::now() > deadline {
            anyhow::bail!("timed out waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn endpoint_ips(endpoints: Option<&Endpoints>, ready: bool) -> Vec<String> {
    let mut ips: Vec<String> = endpoints
        .into_iter()
        .flat_map(|e| e.subsets.iter().flatten())
        .flat_map(|s| if ready { s.addresses.clone() } else { s.not_ready_addresses.clone() })
        .flatten()
        .map(|a| a.ip)
        .collect();
    ips.sort();
    ips
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watcher_mirrors_node_readiness_into_the_pod_and_the_endpoints() -> anyhow::Result<()> {
    let w = start(serde_json::json!({}), default_limits()).await?;
    let name = "worker-w1a-5d8f9-abcde";
    w.node_pod(name, "worker", "10.77.0.21").await?;
    let endpoints: Api<Endpoints> = Api::namespaced(w.client.clone(), ID);
    eventually("the worker's IP, not ready: its WC node has not registered", || async {
        Ok((endpoint_ips(endpoints.get_opt("worker").await?.as_ref(), false) == ["10.77.0.21"]).then_some(()))
    })
    .await?;
    assert_eq!(w.node_ready(name).await?, None, "no node, no condition");

    w.wc.add_machine(&Machine::new(name).ip("10.77.0.21")).await?;
    eventually("condition True", || async { Ok((w.node_ready(name).await?.as_deref() == Some("True")).then_some(())) })
        .await?;
    eventually("the pod Ready through its readiness gate, and its IP ready", || async {
        let pod = w.pods().get(name).await?;
        let ready = workload_sim::is_ready(&pod);
        Ok((ready && endpoint_ips(endpoints.get_opt("worker").await?.as_ref(), true) == ["10.77.0.21"]).then_some(()))
    })
    .await?;

    w.wc.set_ready(name, false)?;
    eventually("condition False", || async {
        Ok((w.node_ready(name).await?.as_deref() == Some("False")).then_some(()))
    })
    .await?;
    eventually("the IP not ready again", || async {
        Ok((endpoint_ips(endpoints.get_opt("worker").await?.as_ref(), false) == ["10.77.0.21"]).then_some(()))
    })
    .await?;
    w.wc.set_ready(name, true)?;
    eventually("condition True again", || async {
        Ok((w.node_ready(name).await?.as_deref() == Some("True")).then_some(()))
    })
    .await?;

    // Steady: no more writes, however often the deleter (1 s) and the watcher (2 s) look, and
    // one watcher, started once (§14.7: never rebuilt for being quiet).
    tokio::time::sleep(Duration::from_secs(1)).await;
    let writes = w.nodes.metrics.node_condition_writes.get();
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(w.nodes.metrics.node_condition_writes.get(), writes, "no write while nothing changes");
    assert_eq!(w.nodes.metrics.node_watcher_starts.get(), 1);
    assert_eq!(w.nodes.watchers.running(), [ID]);
    assert_eq!(w.events(NS, "NodeWatcherStarted").await?.len(), 1);

    // The cluster goes: its watcher stops.
    Api::<KVMConfig>::namespaced(w.client.clone(), NS).delete(ID, &DeleteParams::default()).await?;
    eventually("the watcher stopped", || async { Ok(w.nodes.watchers.running().is_empty().then_some(())) }).await?;
    w.no_refusals()?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watcher_recovers_from_a_workload_cluster_outage() -> anyhow::Result<()> {
    let w = start(serde_json::json!({}), default_limits()).await?;
    let name = "worker-w1a-5d8f9-abcde";
    w.node_pod(name, "worker", "10.77.0.21").await?;
    w.wc.add_machine(&Machine::new(name).ip("10.77.0.21")).await?;
    eventually("condition True", || async { Ok((w.node_ready(name).await?.as_deref() == Some("True")).then_some(())) })
        .await?;

    // The workload cluster's API goes away for a while: its node watch ends, and the next 30
    // requests about nodes fail. The node turns NotReady meanwhile.
    let faults = w.wc.env().handle().faults();
    eventually("the watcher's node watch", || async { Ok((faults.open_watches() > 0).then_some(())) }).await?;
    faults.fail_next(testenv::RequestMatch::resource("nodes"), 30, 503);
    let closed = faults.close_watches(Some("nodes"));
    assert!(closed >= 1, "the watcher had a node watch open");
    w.wc.set_ready(name, false)?;
    // Once the API answers again, the watcher sees the change without any help.
    eventually("condition False after the outage", || async {
        Ok((w.node_ready(name).await?.as_deref() == Some("False")).then_some(()))
    })
    .await?;
    w.wc.set_ready(name, true)?;
    eventually("condition True again", || async {
        Ok((w.node_ready(name).await?.as_deref() == Some("True")).then_some(()))
    })
    .await?;
    assert_eq!(w.nodes.watchers.running(), [ID], "one watcher, still running");
    w.no_refusals()?;
    Ok(())
}

/// Watch a node pod being deleted until it is gone, recording what its WC node went through
/// meanwhile: whether the node was cordoned, and whether the workload's pods were still on it,
/// while the pod was held.
async fn follow_drain(w: &World, name: &str) -> anyhow::Result<(bool, bool)> {
    let mut cordoned_while_held = false;
    let mut evicted_while_held = false;
    let deadline = tokio::time::Instant::now() + DEADLINE;
    while let Some(pod) = w.pods().get_opt(name).await? {
        assert!(pod.metadata.deletion_timestamp.is_some(), "{name} is being deleted");
        let node = w.wc_nodes().get(name).await?;
        if node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true) {
            cordoned_while_held = true;
            let on_node = w.wc.pods_on(name).await?;
            if !on_node.iter().any(|p| p.labels().get("app").map(String::as_str) == Some("web")) {
                evicted_while_held = true;
            }
        }
        if tokio::time::Instant::now() > deadline {
            anyhow::bail!("timed out waiting for {name} to go");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok((cordoned_while_held, evicted_while_held))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_pod_is_held_until_its_node_is_drained_on_delete_and_on_eviction() -> anyhow::Result<()> {
    let w = start(serde_json::json!({}), default_limits()).await?;
    let (deleted, evicted, spare) = ("worker-w1a-5d8f9-aaaaa", "worker-w2b-5d8f9-bbbbb", "worker-w3c-5d8f9-ccccc");
    for (i, name) in [deleted, evicted, spare].into_iter().enumerate() {
        let ip = format!("10.77.0.{}", 31 + i);
        w.node_pod(name, "worker", &ip).await?;
        w.wc.add_machine(&Machine::new(name).ip(ip)).await?;
    }
    // Two replicas under a budget that lets one go at a time; the spare node takes the
    // replacements.
    w.wc.deploy(&Workload::new("shop", "web", 4).max_unavailable(1)).await?;
    w.wc.wait_ready("shop", "web", 4).await?;
    let (on_deleted, on_evicted) = (w.web_pods_on(deleted).await?, w.web_pods_on(evicted).await?);
    assert!(on_deleted > 0 && on_evicted > 0, "the workload spreads over the nodes: {on_deleted} / {on_evicted}");

    // A deletion (a rollout, a scale-down, a person).
    w.pods().delete(deleted, &DeleteParams::default()).await?;
    let dcs: Api<DrainerConfig> = Api::namespaced(w.client.clone(), NS);
    eventually("the DrainerConfig", || async { Ok(dcs.get_opt(deleted).await?) }).await?;
    let (cordoned, drained) = follow_drain(&w, deleted).await?;
    assert!(cordoned, "the WC node was cordoned while its pod was held");
    assert!(drained, "the workload left the node before its pod went");
    assert_eq!(w.web_pods_on(deleted).await?, 0);
    assert!(dcs.get_opt(deleted).await?.is_none(), "the DrainerConfig is deleted with the pod");

    // `kubectl drain` of the MC host: an eviction through the eviction API.
    w.pods().evict(evicted, &EvictParams::default()).await?;
    let (cordoned, drained) = follow_drain(&w, evicted).await?;
    assert!(cordoned && drained, "an evicted node pod is held until its node is drained too");
    assert_eq!(w.nodes.metrics.pod_drains("drained"), 2);
    assert_eq!(w.events(ID, "NodeDrained").await?.len(), 2);
    w.wc.wait_ready("shop", "web", 4).await.context("the workload runs on the spare node")?;
    w.no_refusals()?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_draining_when_the_node_is_gone_the_cluster_unreachable_or_deleted() -> anyhow::Result<()> {
    let w = start(serde_json::json!({}), default_limits()).await?;
    // A pod whose VM never registered a node: nothing to drain.
    let lonely = "worker-w4d-5d8f9-ddddd";
    w.node_pod(lonely, "worker", "10.77.0.41").await?;
    w.pods().delete(lonely, &DeleteParams::default()).await?;
    eventually("the pod without a node gone", || async { Ok(w.pods().get_opt(lonely).await?.is_none().then_some(())) })
        .await?;
    assert_eq!(w.events(ID, "NodeNotFound").await?.len(), 1);

    // A workload cluster that cannot be reached: the pod goes, with a Warning saying so.
    let cut_off = "worker-w6f-5d8f9-fffff";
    w.node_pod(cut_off, "worker", "10.77.0.43").await?;
    w.wc.add_machine(&Machine::new(cut_off).ip("10.77.0.43")).await?;
    w.wc.set_reachable(false);
    w.pods().delete(cut_off, &DeleteParams::default()).await?;
    eventually("the pod of an unreachable cluster gone", || async {
        Ok(w.pods().get_opt(cut_off).await?.is_none().then_some(()))
    })
    .await?;
    w.wc.set_reachable(true);
    let warning = w.events(ID, "WorkloadClusterUnreachable").await?;
    assert_eq!(warning.len(), 1);
    assert_eq!(warning[0].type_.as_deref(), Some("Warning"));
    assert!(warning[0].note.as_deref().unwrap_or_default().contains("goes without draining"));
    // At least once: a delete path can run again when the finalizer's removal loses a race.
    assert!(w.nodes.metrics.pod_drains("unreachable") >= 1);

    // The cluster is deleted (its KVMConfig held by the cluster controller's finalizer): the
    // pod goes at once, its node untouched.
    let name = "worker-w5e-5d8f9-eeeee";
    w.node_pod(name, "worker", "10.77.0.42").await?;
    w.wc.add_machine(&Machine::new(name).ip("10.77.0.42")).await?;
    w.wc.deploy(&Workload::new("shop", "web", 1).never_disrupt()).await?;
    w.wc.wait_ready("shop", "web", 1).await?;
    let configs: Api<KVMConfig> = Api::namespaced(w.client.clone(), NS);
    let hold = serde_json::json!({"metadata": {"finalizers": ["test.example.com/hold"]}});
    configs.patch(ID, &PatchParams::default(), &Patch::Merge(&hold)).await?;
    configs.delete(ID, &DeleteParams::default()).await?;
    w.pods().delete(name, &DeleteParams::default()).await?;
    eventually("the pod gone without a drain", || async { Ok(w.pods().get_opt(name).await?.is_none().then_some(())) })
        .await?;
    let node = w.wc_nodes().get(name).await?;
    assert_ne!(node.spec.and_then(|s| s.unschedulable), Some(true), "not cordoned");
    assert!(w.nodes.metrics.pod_drains("cluster_deleting") >= 1);
    let unhold = serde_json::json!({"metadata": {"finalizers": null}});
    configs.patch(ID, &PatchParams::default(), &Patch::Merge(&unhold)).await?;
    w.no_refusals()?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_deleter_removes_only_orphaned_notready_nodes() -> anyhow::Result<()> {
    let w = start(serde_json::json!({}), default_limits()).await?;
    let (orphan, ready, with_pod) = ("worker-w1a-old-aaaaa", "worker-w2b-old-bbbbb", "worker-w3c-now-ccccc");
    w.node_pod(with_pod, "worker", "10.77.0.53").await?;
    for name in [orphan, ready, with_pod] {
        w.wc.add_machine(&Machine::new(name)).await?;
    }
    w.wc.set_ready(orphan, false)?;
    w.wc.set_ready(with_pod, false)?;
    eventually("the orphan deleted", || async { Ok(w.wc_nodes().get_opt(orphan).await?.is_none().then_some(())) })
        .await?;
    // Several deleter runs later, the others are still there.
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(w.wc_nodes().get_opt(ready).await?.is_some(), "a Ready node is kept");
    assert!(w.wc_nodes().get_opt(with_pod).await?.is_some(), "a node with a pod is kept");
    assert_eq!(w.nodes.metrics.orphan_nodes_deleted.get(), 1);
    let events = w.events(NS, "OrphanNodeDeleted").await?;
    assert_eq!(events.len(), 1);
    assert!(events[0].note.as_deref().unwrap_or_default().contains(orphan));
    w.no_refusals()?;
    Ok(())
}

/// One worker Deployment, as the cluster controller makes it, whose pod's VM registers a node,
/// beside three spare Ready nodes; the worker's node then turns NotReady. Its pod's name.
async fn unhealthy_worker(w: &World) -> anyhow::Result<String> {
    let mut template = pod_template("", "worker", "10.77.0.61");
    template["metadata"]["labels"]["node"] = serde_json::json!("w1a");
    let deployment: Deployment = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "worker-w1a", "namespace": ID},
        "spec": {"replicas": 1, "strategy": {"type": "Recreate"},
                 "selector": {"matchLabels": {"app": "worker", "node": "w1a"}},
                 "template": {"metadata": template["metadata"], "spec": template["spec"]}}
    }))?;
    Api::<Deployment>::namespaced(w.client.clone(), ID).create(&PostParams::default(), &deployment).await?;
    let first = eventually("the node pod", || async {
        let list = w.pods().list(&ListParams::default().labels("node=w1a")).await?;
        Ok(list.items.first().map(ResourceExt::name_any))
    })
    .await?;
    w.wc.add_machine(&Machine::new(&first).ip("10.77.0.61")).await?;
    for i in 1..=3 {
        // Ready nodes without pods, so that the cluster has several nodes.
        w.wc.add_machine(&Machine::new(format!("worker-spare{i}-x-y"))).await?;
    }
    eventually("condition True", || async {
        Ok((w.node_ready(&first).await?.as_deref() == Some("True")).then_some(()))
    })
    .await?;
    w.wc.set_ready(&first, false)?;
    Ok(first)
}

async fn replacement_of(w: &World, first: &str) -> anyhow::Result<String> {
    eventually("a new node pod replacing the unhealthy one", || async {
        let list = w.pods().list(&ListParams::default().labels("node=w1a")).await?;
        let names: Vec<String> = list.items.iter().map(ResourceExt::name_any).collect();
        Ok((!names.iter().any(|n| n == first)).then(|| names.first().cloned()).flatten())
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unhealthy_node_is_replaced() -> anyhow::Result<()> {
    let limits = Limits { threshold: Duration::from_secs(3), cooldown: Duration::from_secs(3600) };
    let w = start(serde_json::json!({"node.giantswarm.io/terminate-unhealthy": "true"}), limits).await?;
    let first = unhealthy_worker(&w).await?;
    let second = replacement_of(&w, &first).await?;
    assert_ne!(first, second);
    assert_eq!(w.events(NS, "UnhealthyNodeTerminated").await?.len(), 1);
    let config = Api::<KVMConfig>::namespaced(w.client.clone(), NS).get(ID).await?;
    assert!(config.annotations().contains_key(kvm_operator::controllers::unhealthy::LAST_TERMINATION_ANNOTATION));
    w.no_refusals()?;
    Ok(())
}

/// A cluster that opts its unhealthy-node replacement into its maintenance windows: a node
/// NotReady outside the window waits (an event names the window), and is replaced once it opens.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unhealthy_node_waits_for_the_window_when_the_cluster_opts_in() -> anyhow::Result<()> {
    let limits = Limits { threshold: Duration::from_secs(2), cooldown: Duration::from_secs(3600) };
    let w = start(serde_json::json!({"node.giantswarm.io/terminate-unhealthy": "true"}), limits).await?;
    w.nodes.shared.clock.set("2026-06-01T12:00:00Z".parse()?);
    let patch = serde_json::json!({"spec": {"cluster": {"maintenance": {
        "windows": [{"start": "20:00", "duration": "1h"}],
        "unhealthyNodeTerminationInWindow": true
    }}}});
    Api::<KVMConfig>::namespaced(w.client.clone(), NS)
        .patch(ID, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    let first = unhealthy_worker(&w).await?;
    eventually("an event naming the window", || async {
        let events = w.events(NS, "WaitingForMaintenanceWindow").await?;
        Ok(events.iter().any(|e| e.note.as_deref().is_some_and(|n| n.contains("2026-06-01T20:00:00Z"))).then_some(()))
    })
    .await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let names = w.pods().list(&ListParams::default().labels("node=w1a")).await?;
    assert!(names.items.iter().any(|p| p.name_any() == first), "the unhealthy node's pod stays outside the window");
    assert!(w.events(NS, "UnhealthyNodeTerminated").await?.is_empty());

    w.nodes.shared.clock.set("2026-06-01T20:00:01Z".parse()?);
    let second = replacement_of(&w, &first).await?;
    assert_ne!(first, second);
    w.no_refusals()?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_circuit_breaker_holds_when_three_nodes_fail_at_once() -> anyhow::Result<()> {
    let limits = Limits { threshold: Duration::from_secs(2), cooldown: Duration::from_secs(3600) };
    let w = start(serde_json::json!({"node.giantswarm.io/terminate-unhealthy": "true"}), limits).await?;
    let names: Vec<String> = (1..=5).map(|i| format!("worker-w{i}-5d8f9-abcd{i}")).collect();
    for (i, name) in names.iter().enumerate() {
        let ip = format!("10.77.0.{}", 71 + i);
        w.node_pod(name, "worker", &ip).await?;
        w.wc.add_machine(&Machine::new(name).ip(ip)).await?;
    }
    for name in &names[..3] {
        w.wc.set_ready(name, false)?;
    }
    eventually("one terminated", || async {
        Ok((w.events(NS, "UnhealthyNodeTerminated").await?.len() == 1).then_some(()))
    })
    .await?;
    eventually("the others held, with a Warning", || async {
        Ok(w.events(NS, "UnhealthyNodesHeld").await?.into_iter().next())
    })
    .await?;
    // Several runs later: still only one of the three deleted (5 nodes: one per run, then the
    // cooldown).
    tokio::time::sleep(Duration::from_secs(5)).await;
    let mut left = 0;
    for name in &names[..3] {
        if w.pods().get_opt(name).await?.is_some_and(|p| p.metadata.deletion_timestamp.is_none()) {
            left += 1;
        }
    }
    assert_eq!(left, 2, "only one NotReady node replaced");
    for name in &names[3..] {
        assert!(w.pods().get_opt(name).await?.is_some(), "Ready nodes untouched");
    }
    assert_eq!(w.events(NS, "UnhealthyNodeTerminated").await?.len(), 1);
    w.no_refusals()?;
    Ok(())
}

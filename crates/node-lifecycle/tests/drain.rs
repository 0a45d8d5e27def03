//! The drain executor against two testenvs: the management cluster holds the DrainerConfigs and
//! Secrets, a simulated workload cluster holds the nodes and pods.

use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use apis::drainer::{CONDITION_DRAINED, CONDITION_DRAINING, CONDITION_TIMEOUT, DrainerConfig, TIMEOUT_ANNOTATION};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod, Secret};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::runtime::watcher;
use kube::{CustomResourceExt, ResourceExt};
use node_lifecycle::drain::plan::Backoff;
use node_lifecycle::drain::{CORDONED_BY_ANNOTATION, DrainMetrics, Drainer, DrainerSettings};
use node_lifecycle::{ClusterRef, WorkloadClients};
use parking_lot::Mutex;
use prometheus_client::registry::Registry;
use testenv::TestEnv;
use tokio_util::sync::CancellationToken;
use workload_sim::{Machine, Workload, WorkloadCluster, is_ready, kubeconfig_secret};

const OPERATOR: &str = "test-operator";
const CLUSTER: &str = "al9qy";
/// Generous: the machine is shared and loaded.
const DEADLINE: Duration = Duration::from_secs(120);

struct Mc {
    env: TestEnv,
    shutdown: CancellationToken,
    metrics: DrainMetrics,
    clients: WorkloadClients,
    task: tokio::task::JoinHandle<()>,
}

impl Mc {
    fn dcs(&self) -> Api<DrainerConfig> {
        Api::namespaced(self.env.client(), CLUSTER)
    }

    fn secrets(&self) -> Api<Secret> {
        Api::namespaced(self.env.client(), CLUSTER)
    }

    async fn stop(self) {
        self.shutdown.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(30), self.task).await;
    }
}

fn settings() -> DrainerSettings {
    let mut s = DrainerSettings::new(OPERATOR, semver::Version::new(1, 0, 0));
    s.poll = Duration::from_millis(200);
    s.retry = Duration::from_millis(500);
    s.backoff = Backoff { initial: Duration::from_millis(200), max: Duration::from_secs(2) };
    s.clients.connect_timeout = Duration::from_secs(2);
    s.clients.request_timeout = Duration::from_secs(5);
    s
}

/// The management cluster with the DrainerConfig CRD, the cluster's namespace and a running
/// drain executor.
async fn management_cluster() -> Result<Mc> {
    let _ = tracing_subscriber::fmt()
        .with_env_filter("node_lifecycle=debug,operatorkit=info")
        .with_test_writer()
        .try_init();
    let env = TestEnv::start().await?;
    let client = env.client();
    Api::<CustomResourceDefinition>::all(client.clone()).create(&PostParams::default(), &DrainerConfig::crd()).await?;
    let ns: Namespace = serde_json::from_value(serde_json::json!({"metadata": {"name": CLUSTER}}))?;
    Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &ns).await?;
    let dcs: Api<DrainerConfig> = Api::namespaced(client.clone(), CLUSTER);
    eventually("the DrainerConfig API", || async { dcs.list(&ListParams::default()).await.ok() }).await?;
    let mut registry = Registry::default();
    let drainer = Drainer::builder(client, settings(), &mut registry).build()?;
    let metrics = drainer.metrics();
    let clients = drainer.clients().clone();
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(drainer.run(shutdown.clone()));
    Ok(Mc { env, shutdown, metrics, clients, task })
}

fn drainer_config(name: &str, node: &str) -> DrainerConfig {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "core.giantswarm.io/v1alpha1", "kind": "DrainerConfig",
        "metadata": {"name": name, "namespace": CLUSTER,
                     "labels": {format!("{OPERATOR}.giantswarm.io/version"): "1.0.0", apis::labels::CLUSTER: CLUSTER}},
        "spec": {
            "guest": {"cluster": {"api": {"endpoint": "api.al9qy.k8s.example.com"}, "id": CLUSTER},
                      "node": {"name": node}},
            "versionBundle": {"version": "1.0.0"}
        }
    }))
    .expect("a valid DrainerConfig")
}

async fn eventually<T, F, Fut>(what: &str, mut f: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        if let Some(v) = f().await {
            return Ok(v);
        }
        if tokio::time::Instant::now() > deadline {
            bail!("timed out waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Wait until the DrainerConfig has condition `type_` True.
async fn condition(mc: &Mc, name: &str, type_: &str) -> Result<DrainerConfig> {
    let dcs = mc.dcs();
    eventually(&format!("{name}: {type_}=True"), || async {
        let dc = dcs.get(name).await.ok()?;
        dc.status.as_ref().is_some_and(|s| s.has_condition(type_)).then_some(dc)
    })
    .await
}

/// Wait until the DrainerConfig's Draining condition has `reason`.
async fn draining_reason(mc: &Mc, name: &str, reason: &str) -> Result<DrainerConfig> {
    let dcs = mc.dcs();
    eventually(&format!("{name}: Draining reason {reason}"), || async {
        let dc = dcs.get(name).await.ok()?;
        let c = dc.status.as_ref()?.condition(CONDITION_DRAINING)?;
        (c.reason.as_deref() == Some(reason)).then_some(dc)
    })
    .await
}

async fn events_with_reason(mc: &Mc, reason: &str) -> Result<Vec<Event>> {
    let events: Api<Event> = Api::namespaced(mc.env.client(), CLUSTER);
    Ok(events
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .collect())
}

async fn node(wc: &WorkloadCluster, name: &str) -> Result<Node> {
    Ok(Api::<Node>::all(wc.client()).get(name).await?)
}

fn cordoned(node: &Node) -> bool {
    node.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false)
}

/// A WC with `wc-node-1` running `workload`, and a spare node for the replacements.
async fn workload_cluster(workload: &Workload) -> Result<WorkloadCluster> {
    let wc = WorkloadCluster::start().await?;
    wc.add_machine(&Machine::new("wc-node-1")).await?;
    wc.deploy(workload).await?;
    wc.wait_ready(&workload.namespace, &workload.name, workload.replicas as usize).await?;
    wc.add_machine(&Machine::new("wc-node-2")).await?;
    Ok(wc)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_pods_under_a_budget_of_one_are_evicted_one_at_a_time() -> Result<()> {
    // Replacements become Ready 300 ms after they start, so the budget really holds evictions.
    let workload = Workload::new("web", "web", 10).max_unavailable(1).readiness("300ms");
    let wc = workload_cluster(&workload).await?;
    let originals: BTreeSet<String> = wc.pods_on("wc-node-1").await?.iter().filter_map(|p| p.uid()).collect();
    assert_eq!(originals.len(), 10);

    // Follow the workload's pods through a watch: how many are Ready (and not deleting) now,
    // and the fewest at any moment since the watch synced.
    let healthy: Arc<Mutex<(usize, usize)>> = Arc::new(Mutex::new((0, usize::MAX)));
    let seen = healthy.clone();
    let pods: Api<Pod> = Api::namespaced(wc.client(), "web");
    let watch = tokio::spawn(async move {
        let mut state: HashMap<String, bool> = HashMap::new();
        let mut synced = false;
        let mut events = std::pin::pin!(watcher(pods, watcher::Config::default()));
        while let Some(Ok(event)) = events.next().await {
            match event {
                watcher::Event::Apply(p) | watcher::Event::InitApply(p) => {
                    state.insert(p.uid().unwrap_or_default(), is_ready(&p));
                }
                watcher::Event::Delete(p) => {
                    state.remove(&p.uid().unwrap_or_default());
                }
                watcher::Event::InitDone => synced = true,
                watcher::Event::Init => {}
            }
            if synced {
                let ready = state.values().filter(|r| **r).count();
                let mut s = seen.lock();
                s.0 = ready;
                s.1 = s.1.min(ready);
            }
        }
    });
    eventually("the watch to see 10 Ready pods", || async { (healthy.lock().0 == 10).then_some(()) }).await?;
    healthy.lock().1 = 10;

    let mc = management_cluster().await?;
    mc.secrets().create(&PostParams::default(), &wc.kubeconfig_secret(CLUSTER, CLUSTER)).await?;
    mc.dcs().create(&PostParams::default(), &drainer_config("wc-node-1", "wc-node-1")).await?;
    let dc = condition(&mc, "wc-node-1", CONDITION_DRAINED).await?;

    let status = dc.status.clone().unwrap_or_default();
    assert!(!status.timed_out());
    assert_eq!(status.evicted_pods, 10, "{status:?}");
    assert!(status.terminating_pods.is_empty() && status.blocked_pods.is_empty());
    let left: BTreeSet<String> = wc.pods_on("wc-node-1").await?.iter().filter_map(|p| p.uid()).collect();
    assert!(left.is_disjoint(&originals), "every original pod is gone by UID");
    assert!(cordoned(&node(&wc, "wc-node-1").await?));
    let (_, fewest_ready) = *healthy.lock();
    assert_eq!(fewest_ready, 9, "never more than one pod disrupted at a time, and one at least");
    assert_eq!(mc.metrics.evictions("evicted"), 10);
    assert!(mc.metrics.evictions("disruption_budget") > 0, "the budget refused evictions, which were retried");
    assert_eq!(mc.metrics.in_progress(), 0);
    let drained = events_with_reason(&mc, "Drained").await?;
    assert_eq!(drained.len(), 1);
    watch.abort();
    mc.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_that_never_allows_a_disruption_times_out_and_names_the_pods() -> Result<()> {
    let workload = Workload::new("db", "db", 3).never_disrupt();
    let wc = workload_cluster(&workload).await?;
    let mc = management_cluster().await?;
    mc.secrets().create(&PostParams::default(), &wc.kubeconfig_secret(CLUSTER, CLUSTER)).await?;
    let mut dc = drainer_config("wc-node-1", "wc-node-1");
    dc.annotations_mut().insert(TIMEOUT_ANNOTATION.into(), "5s".into());
    mc.dcs().create(&PostParams::default(), &dc).await?;

    let dc = condition(&mc, "wc-node-1", CONDITION_TIMEOUT).await?;
    let status = dc.status.clone().unwrap_or_default();
    assert!(!status.is_drained());
    let pods: BTreeSet<String> = wc.pods_on("wc-node-1").await?.iter().map(|p| p.name_any()).collect();
    assert_eq!(pods.len(), 3, "nothing was evicted");
    let blocked: BTreeSet<String> = status.blocked_pods.iter().map(|b| b.pod.name.clone()).collect();
    assert_eq!(blocked, pods, "the blocked pods are named in status");
    assert!(status.blocked_pods.iter().all(|b| b.reason.contains("disruption budget")), "{status:?}");
    let message = status.condition(CONDITION_TIMEOUT).and_then(|c| c.message.clone()).unwrap_or_default();
    for pod in &pods {
        assert!(message.contains(pod.as_str()), "{message}");
    }
    let n = node(&wc, "wc-node-1").await?;
    assert!(cordoned(&n), "a timed-out node stays cordoned");
    assert_eq!(n.annotations().get(CORDONED_BY_ANNOTATION).map(String::as_str), Some("al9qy/wc-node-1"));
    assert_eq!(events_with_reason(&mc, "DrainTimeout").await?.len(), 1);
    mc.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_workload_cluster_is_reported_and_retried() -> Result<()> {
    let workload = Workload::new("web", "web", 3).max_unavailable(1);
    let wc = workload_cluster(&workload).await?;
    let mc = management_cluster().await?;
    mc.secrets().create(&PostParams::default(), &wc.kubeconfig_secret(CLUSTER, CLUSTER)).await?;
    wc.set_reachable(false);
    mc.dcs().create(&PostParams::default(), &drainer_config("wc-node-1", "wc-node-1")).await?;

    let dc = draining_reason(&mc, "wc-node-1", "WorkloadClusterUnreachable").await?;
    let message = dc.status.as_ref().and_then(|s| s.condition(CONDITION_DRAINING)).and_then(|c| c.message.clone());
    let message = message.unwrap_or_default();
    assert!(message.contains(CLUSTER) && message.contains("al9qy/al9qy-kubeconfig"), "{message}");
    let events = events_with_reason(&mc, "WorkloadClusterUnreachable").await?;
    assert!(!events.is_empty());
    assert!(events[0].note.as_deref().unwrap_or_default().contains("al9qy-kubeconfig"));
    assert!(!cordoned(&node(&wc, "wc-node-1").await?));

    wc.set_reachable(true);
    let dc = condition(&mc, "wc-node-1", CONDITION_DRAINED).await?;
    assert_eq!(dc.status.unwrap_or_default().evicted_pods, 3);
    mc.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_then_rotated_kubeconfig_is_reported_and_the_new_client_used() -> Result<()> {
    let workload = Workload::new("web", "web", 2).max_unavailable(1);
    let wc = workload_cluster(&workload).await?;
    let mc = management_cluster().await?;
    let secret_text = "clusters: [not-a-kubeconfig SECRET-MATERIAL";
    mc.secrets().create(&PostParams::default(), &kubeconfig_secret(CLUSTER, CLUSTER, secret_text)).await?;
    mc.dcs().create(&PostParams::default(), &drainer_config("wc-node-1", "wc-node-1")).await?;

    let dc = draining_reason(&mc, "wc-node-1", "KubeconfigInvalid").await?;
    let message = dc.status.as_ref().and_then(|s| s.condition(CONDITION_DRAINING)).and_then(|c| c.message.clone());
    let message = message.unwrap_or_default();
    assert!(message.contains("al9qy/al9qy-kubeconfig") && message.contains("workload cluster al9qy"), "{message}");
    assert!(!message.contains("SECRET-MATERIAL"), "{message}");
    let events = events_with_reason(&mc, "KubeconfigInvalid").await?;
    assert!(!events.is_empty());
    assert!(!events[0].note.as_deref().unwrap_or_default().contains("SECRET-MATERIAL"));

    // Rotated to an address where nothing answers.
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0")?;
        l.local_addr()?
    };
    let rotated = kubeconfig_secret(CLUSTER, CLUSTER, &testenv::kubeconfig_yaml(&format!("http://{dead}")));
    mc.secrets().replace("al9qy-kubeconfig", &PostParams::default(), &rotated).await?;
    draining_reason(&mc, "wc-node-1", "WorkloadClusterUnreachable").await?;

    // Rotated to the workload cluster's address: the new client drains.
    mc.secrets().replace("al9qy-kubeconfig", &PostParams::default(), &wc.kubeconfig_secret(CLUSTER, CLUSTER)).await?;
    let dc = condition(&mc, "wc-node-1", CONDITION_DRAINED).await?;
    assert_eq!(dc.status.unwrap_or_default().evicted_pods, 2);
    mc.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_node_is_drained_at_once() -> Result<()> {
    let wc = WorkloadCluster::start().await?;
    let mc = management_cluster().await?;
    mc.secrets().create(&PostParams::default(), &wc.kubeconfig_secret(CLUSTER, CLUSTER)).await?;
    mc.dcs().create(&PostParams::default(), &drainer_config("ghost", "ip-10-1-1-99.internal")).await?;
    let dc = condition(&mc, "ghost", CONDITION_DRAINED).await?;
    let drained = dc.status.as_ref().and_then(|s| s.condition(CONDITION_DRAINED)).cloned().context("Drained")?;
    assert_eq!(drained.reason.as_deref(), Some("NodeNotFound"));
    assert!(drained.message.unwrap_or_default().contains("ip-10-1-1-99.internal does not exist"));
    mc.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_deleted_midway_stops_and_leaves_nothing_behind() -> Result<()> {
    let workload = Workload::new("db", "db", 2).never_disrupt();
    let wc = workload_cluster(&workload).await?;
    let mc = management_cluster().await?;
    mc.secrets().create(&PostParams::default(), &wc.kubeconfig_secret(CLUSTER, CLUSTER)).await?;
    mc.dcs().create(&PostParams::default(), &drainer_config("wc-node-1", "wc-node-1")).await?;
    let dcs = mc.dcs();
    eventually("blocked pods in status", || async {
        let dc = dcs.get("wc-node-1").await.ok()?;
        let s = dc.status?;
        (s.cordoned && s.blocked_pods.len() == 2).then_some(())
    })
    .await?;
    assert!(cordoned(&node(&wc, "wc-node-1").await?));
    assert_eq!(mc.metrics.in_progress(), 1);
    assert_eq!(mc.clients.cached(), 1);

    mc.dcs().delete("wc-node-1", &DeleteParams::default()).await?;
    eventually("the DrainerConfig to go", || async { dcs.get_opt("wc-node-1").await.ok()?.is_none().then_some(()) })
        .await?;
    let n = node(&wc, "wc-node-1").await?;
    assert!(!cordoned(&n), "a cancelled drain uncordons its node");
    assert!(!n.annotations().contains_key(CORDONED_BY_ANNOTATION));
    assert_eq!(mc.metrics.in_progress(), 0);
    assert_eq!(mc.clients.cached(), 0, "the cluster's client is dropped");
    assert_eq!(wc.pods_on("wc-node-1").await?.len(), 2);
    assert_eq!(events_with_reason(&mc, "Uncordoned").await?.len(), 1);
    mc.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_drainer_configs_for_one_node_make_one_drain() -> Result<()> {
    let workload = Workload::new("web", "web", 4).max_unavailable(1);
    let wc = workload_cluster(&workload).await?;
    let mc = management_cluster().await?;
    mc.secrets().create(&PostParams::default(), &wc.kubeconfig_secret(CLUSTER, CLUSTER)).await?;
    mc.dcs().create(&PostParams::default(), &drainer_config("first", "wc-node-1")).await?;
    mc.dcs().create(&PostParams::default(), &drainer_config("second", "wc-node-1")).await?;
    let first = condition(&mc, "first", CONDITION_DRAINED).await?;
    let second = condition(&mc, "second", CONDITION_DRAINED).await?;
    let reason = |dc: &DrainerConfig| {
        dc.status
            .as_ref()
            .and_then(|s| s.condition(CONDITION_DRAINED))
            .and_then(|c| c.reason.clone())
            .unwrap_or_default()
    };
    let reasons: BTreeSet<String> = [reason(&first), reason(&second)].into();
    assert!(reasons.contains("DuplicateDrain"), "{reasons:?}");
    assert_eq!(mc.metrics.evictions("evicted"), 4, "each pod evicted once");
    mc.stop().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bridge_turns_machines_into_nodes() -> Result<()> {
    let wc = WorkloadCluster::start().await?;
    let machines = [
        Machine::new("ip-10-1-1-37").provider_id("aws:///eu-central-1a/i-0abc").label("role", "worker").ip("10.1.1.37"),
        Machine::new("ip-10-1-1-38").provider_id("aws:///eu-central-1b/i-0def"),
    ];
    wc.sync_machines(&machines).await?;
    let n = node(&wc, "ip-10-1-1-37").await?;
    assert_eq!(n.spec.as_ref().and_then(|s| s.provider_id.as_deref()), Some("aws:///eu-central-1a/i-0abc"));
    assert_eq!(n.labels().get("role").map(String::as_str), Some("worker"));
    let addresses = n.status.as_ref().and_then(|s| s.addresses.clone()).unwrap_or_default();
    assert!(addresses.iter().any(|a| a.type_ == "InternalIP" && a.address == "10.1.1.37"), "{addresses:?}");

    wc.set_ready("ip-10-1-1-38", false)?;
    let nodes: Api<Node> = Api::all(wc.client());
    eventually("ip-10-1-1-38 NotReady", || async {
        let n = nodes.get("ip-10-1-1-38").await.ok()?;
        let ready = n.status?.conditions?.into_iter().find(|c| c.type_ == "Ready")?;
        (ready.status == "False").then_some(())
    })
    .await?;

    // The first machine goes: its Node goes with it.
    wc.sync_machines(&machines[1..]).await?;
    eventually("ip-10-1-1-37 gone", || async { nodes.get_opt("ip-10-1-1-37").await.ok()?.is_none().then_some(()) })
        .await?;
    assert_eq!(wc.machines(), ["ip-10-1-1-38"]);

    // A cluster reference resolves through the kubeconfig Secret of the bridge.
    let mc = TestEnv::start().await?;
    let ns: Namespace = serde_json::from_value(serde_json::json!({"metadata": {"name": CLUSTER}}))?;
    Api::<Namespace>::all(mc.client()).create(&PostParams::default(), &ns).await?;
    let clients = WorkloadClients::new(mc.client(), Default::default());
    let cluster = ClusterRef::new(CLUSTER, CLUSTER, "api.al9qy.k8s.example.com");
    let error = clients.client_for(&cluster).await.unwrap_err();
    assert!(error.is_not_ready(), "no Secret yet is 'not ready': {error}");
    Api::<Secret>::namespaced(mc.client(), CLUSTER)
        .create(&PostParams::default(), &wc.kubeconfig_secret(CLUSTER, CLUSTER))
        .await?;
    let client = clients.client_for(&cluster).await?;
    assert_eq!(Api::<Node>::all(client.client()).list(&ListParams::default()).await?.items.len(), 1);
    Ok(())
}

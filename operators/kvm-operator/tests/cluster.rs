//! The cluster controller against testenv, with simulated management-cluster nodes labelled
//! `role=master` and `role=worker`: a 3-master, 5-worker KVMConfig gets every object with the
//! right names, and Endpoints from its node pods' VM IPs; bad input gets `Ready=False` and a Warning event and creates nothing; deletion
//! leaves nothing behind, the ClusterRoleBindings included.
//!
//! The operator runs as the kvm-operator chart's ServiceAccount, with the chart's rendered RBAC,
//! on a testenv that authenticates and authorizes like kube-apiserver: a request RBAC refuses
//! fails a test at once, naming it, and a grant of the chart that the cluster's whole life never
//! used fails the first test, unless [`UNUSED_BY_DESIGN`] names it with the reason.

mod chart;

use std::future::Future;
use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use apis::kvm::KVMConfig;
use apis::release::Release;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{
    Endpoints, Namespace, PersistentVolume, PersistentVolumeClaim, Pod, Secret, Service, ServiceAccount,
};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::networking::v1::Ingress;
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use kvm_objects::access::ClusterRoles;
use kvm_objects::cluster::Settings;
use kvm_operator::config::OperatorConfig;
use kvm_operator::context::Shared;
use kvm_operator::daemon::{Daemon, Tuning};
use operatorkit::RunSettings;
use testenv::{NodeSpec, SimConfig, TestEnv};
use tokio_util::sync::CancellationToken;

const NS: &str = "org-acme";
const ID: &str = "x7k2p";

fn example(name: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/examples").join(name))
        .expect("example readable")
}

fn documents(text: &str) -> Vec<serde_json::Value> {
    serde_saphyr::from_multiple::<serde_json::Value>(text).expect("YAML").into_iter().filter(|d| !d.is_null()).collect()
}

fn kvm_config() -> KVMConfig {
    let doc =
        documents(&example("kvm-cluster.yaml")).into_iter().find(|d| d["kind"] == "KVMConfig").expect("KVMConfig");
    serde_json::from_value(doc).expect("KVMConfig decodes")
}

/// The chart's grants a cluster's life leaves unused, each `(verb group/resource, reason)`;
/// the first test fails when one of them is used after all, as when another grant is unused.
const UNUSED_BY_DESIGN: &[(&str, &str)] = &[
    (
        "create coordination.k8s.io/leases",
        "leader election runs in the daemon, not in this controller test; the image test runs the daemon as the chart's pod and takes the Lease",
    ),
    ("get coordination.k8s.io/leases", "as above"),
    ("update coordination.k8s.io/leases", "as above"),
    (
        "patch core.giantswarm.io/drainerconfigs",
        "the drain executor's finalizer, only while a node is drained (node-lifecycle's drain tests)",
    ),
    ("patch core.giantswarm.io/drainerconfigs/status", "the drain executor's progress, as above"),
    (
        "patch core/pods/status",
        "the node watcher's node-ready condition; this test has no workload cluster, tests/nodes.rs has one and runs as the chart's ServiceAccount",
    ),
    (
        "delete core/pods",
        "the unhealthy-node terminator, and the drainer once a node is drained (tests/nodes.rs); a cluster's \
         deletion drains nothing",
    ),
    (
        "create core.giantswarm.io/drainerconfigs",
        "a drain needs a workload cluster that answers; without one the drainer lets the pod go (tests/nodes.rs drains)",
    ),
    ("patch events.k8s.io/events", "a repeated event's series count: only when one repeats"),
];

/// Of [`UNUSED_BY_DESIGN`], the grants a run may use or not: a transient failure (a conflict
/// while the cluster converges) becomes a repeated Warning event in some runs.
const SOMETIMES_USED: &[&str] = &["patch events.k8s.io/events"];

struct World {
    /// The API server; dropping it stops it.
    env: TestEnv,
    /// The administrator's client, which the tests act with.
    client: kube::Client,
    /// The chart's rendered objects.
    rendered: Vec<serde_json::Value>,
    /// Who the operator runs as.
    operator: packaging::rbac::ChartIdentity,
    /// The operator's metrics.
    registry: prometheus_client::registry::Registry,
    shutdown: CancellationToken,
}

impl Drop for World {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

async fn start() -> anyhow::Result<World> {
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
    let env = TestEnv::builder().secure().simulation(sim).start().await?;
    let client = env.client();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in apis::all_crds() {
        crds.create(&PostParams::default(), &crd).await?;
    }
    let release = documents(&example("kvm-release-v20.1.0.yaml")).remove(0);
    let release: Release = serde_json::from_value(release)?;
    Api::<Release>::all(client.clone()).create(&PostParams::default(), &release).await?;
    let ns: Namespace = serde_json::from_value(serde_json::json!({"metadata": {"name": NS}}))?;
    Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &ns).await?;

    // The operator runs with the chart's flags for its own RoleBinding.
    let rendered = packaging::helm_template("kvm-operator", &["ci/minimal-values.yaml"], &[])?;
    let config = OperatorConfig {
        version: "4.0.0".into(),
        settings: Settings {
            operator_version: "4.0.0".into(),
            dns_servers: vec!["10.61.0.53".into()],
            ntp_servers: vec![],
            images: Default::default(),
        },
        node_config: Default::default(),
        roles: ClusterRoles::default(),
        access: Some(chart::access(&rendered)?),
        rollout: Default::default(),
    };
    // The operator runs as the chart's ServiceAccount, with the chart's RBAC.
    let operator = packaging::rbac::apply_chart_identity(&client, env.handle(), &rendered).await?;
    let shared = Shared::new(
        env.handle().client_with_token(Some(&operator.token))?,
        config,
        None,
        Duration::from_millis(300),
        Duration::from_secs(2),
    );
    let mut tuning = Tuning::new("4.0.0")?;
    tuning.run = RunSettings { concurrency: 2, resync: Duration::from_secs(2), ..RunSettings::default() };
    let mut registry = prometheus_client::registry::Registry::default();
    let daemon = Daemon::build(shared, tuning, &mut registry, &operatorkit::Readiness::new())?;
    let shutdown = CancellationToken::new();
    let token = shutdown.clone();
    tokio::spawn(async move {
        if let Err(e) = daemon.run(token).await {
            eprintln!("operator stopped: {e:#}");
        }
    });
    Ok(World { env, client, rendered, operator, registry, shutdown })
}

impl World {
    /// The operator's `/metrics` text.
    fn metrics(&self) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry).expect("the metrics encode");
        text
    }

    /// Run `scenario`, failing at the operator's first refused request.
    async fn without_refusals(&self, scenario: impl Future<Output = anyhow::Result<()>>) -> anyhow::Result<()> {
        Ok(packaging::rbac::without_refusals(self.env.handle(), &self.operator.user, scenario).await?)
    }

    /// The chart's grants the operator has not used so far, as `verb group/resource`.
    fn unused_grants(&self) -> anyhow::Result<Vec<String>> {
        let log = self.env.handle().access_log_of(&self.operator.user);
        Ok(packaging::rbac::unused_grants(&self.rendered, &log)?
            .into_iter()
            .map(|g| format!("{} {}/{}", g.verb, if g.group.is_empty() { "core" } else { &g.group }, g.resource))
            .collect())
    }
}

const CERTS: [&str; 5] = ["api", "calico-etcd-client", "etcd", "service-account", "worker"];

/// The names of the example cluster's certificates, as `docs/examples/kvm-cluster.yaml` gives
/// them.
fn example_names() -> pki::ClusterNames {
    pki::ClusterNames {
        cluster_id: ID.into(),
        api_domain: format!("api.{ID}.k8s.gauss.example.com"),
        internal_api_domain: None,
        etcd_domain: format!("etcd.{ID}.k8s.gauss.example.com"),
        etcd_member_domains: Vec::new(),
        cluster_domain: "cluster.local".into(),
        service_cidr: "172.31.0.0/16".into(),
    }
}

/// The cluster's certificates `certs` as cert-operator writes them (valid, of one PKI issued
/// for the example's names, without the operator's issued-by label).
async fn create_secrets(client: &kube::Client, pki: &pki::ClusterPki, certs: &[&str]) -> anyhow::Result<()> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    for cert in pki.certificates.iter().filter(|c| certs.contains(&c.name.as_str())) {
        let mut secret = pki::secret::certificate_secret(NS, ID, cert);
        secret.metadata.labels.as_mut().map(|l| l.remove(pki::secret::ISSUED_BY_LABEL));
        secrets.create(&PostParams::default(), &secret).await?;
    }
    Ok(())
}

async fn eventually<T, F, Fut>(what: &str, mut check: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Option<T>>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
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

async fn names<K>(api: &Api<K>, selector: &str) -> anyhow::Result<Vec<String>>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let mut names: Vec<String> =
        api.list(&ListParams::default().labels(selector)).await?.items.iter().map(ResourceExt::name_any).collect();
    names.sort();
    Ok(names)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_three_master_five_worker_cluster_gets_every_object_and_deletion_leaves_nothing() -> anyhow::Result<()> {
    let w = start().await?;
    w.without_refusals(a_cluster_lives_and_goes(&w)).await?;
    // Least privilege: the whole life of a cluster used every grant of the chart.
    let unused = w.unused_grants()?;
    let allowed: Vec<&str> = UNUSED_BY_DESIGN.iter().map(|(grant, _)| *grant).collect();
    let surplus: Vec<&String> = unused.iter().filter(|g| !allowed.contains(&g.as_str())).collect();
    assert!(surplus.is_empty(), "the chart grants what the operator never used: {surplus:#?}");
    let stale: Vec<&&str> =
        allowed.iter().filter(|g| !unused.iter().any(|u| u == *g) && !SOMETIMES_USED.contains(*g)).collect();
    assert!(stale.is_empty(), "UNUSED_BY_DESIGN names grants the run used (or the chart lacks): {stale:#?}");
    drop(w);
    Ok(())
}

/// The operator's ServiceAccount creates workloads only in its clusters' namespaces: a
/// Deployment in `kube-system` or in an organisation's namespace is forbidden, one in the
/// cluster's namespace (through the RoleBinding the operator wrote there) is allowed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operators_service_account_cannot_create_workloads_outside_its_clusters_namespaces() -> anyhow::Result<()> {
    let w = start().await?;
    // The cluster brings no Secrets: the operator issues its certificates and key.
    Api::<KVMConfig>::namespaced(w.client.clone(), NS).create(&PostParams::default(), &kvm_config()).await?;
    let bindings: Api<k8s_openapi::api::rbac::v1::RoleBinding> = Api::namespaced(w.client.clone(), ID);
    eventually("the operator's RoleBinding in the cluster's namespace", || async {
        Ok(bindings.list(&ListParams::default()).await?.items.into_iter().next())
    })
    .await?;
    let operator = w.env.handle().client_with_token(Some(&w.operator.token))?;
    let deployment = |ns: &str| -> anyhow::Result<Deployment> {
        Ok(serde_json::from_value(serde_json::json!({
            "metadata": {"name": "intruder", "namespace": ns},
            "spec": {
                "selector": {"matchLabels": {"app": "intruder"}},
                "template": {
                    "metadata": {"labels": {"app": "intruder"}},
                    "spec": {"serviceAccountName": "default", "containers": [{"name": "c", "image": "busybox"}]}
                }
            }
        }))?)
    };
    for ns in ["kube-system", NS, "giantswarm"] {
        let refused = Api::<Deployment>::namespaced(operator.clone(), ns)
            .create(&PostParams::default(), &deployment(ns)?)
            .await
            .expect_err(ns);
        assert!(matches!(&refused, kube::Error::Api(s) if s.code == 403), "{ns}: {refused}");
    }
    Api::<Deployment>::namespaced(operator.clone(), ID).create(&PostParams::default(), &deployment(ID)?).await?;
    Ok(())
}

async fn a_cluster_lives_and_goes(w: &World) -> anyhow::Result<()> {
    let client = &w.client;
    // The cluster brings no Secrets: the operator issues its certificates and key.
    // Worker w1a passes a host directory through: the local PersistentVolume of its mount tag
    // sizes the claim.
    let volume: PersistentVolume = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "local-scratch-1", "labels": {"mount-tag": "scratch"}},
        "spec": {"capacity": {"storage": "40Gi"}, "accessModes": ["ReadWriteOnce"],
                 "storageClassName": "local-storage", "hostPath": {"path": "/srv/scratch"}}
    }))?;
    Api::<PersistentVolume>::all(client.clone()).create(&PostParams::default(), &volume).await?;
    let mut config = kvm_config();
    config.spec.kvm.workers[0].host_volumes.push(apis::kvm::KVMConfigSpecKVMNodeHostVolume {
        mount_tag: "scratch".into(),
        host_path: "/srv/scratch".into(),
    });
    let configs: Api<KVMConfig> = Api::namespaced(client.clone(), NS);
    configs.create(&PostParams::default(), &config).await?;

    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ID);
    let cluster = format!("giantswarm.io/cluster={ID}");
    eventually("eight node Deployments", || async {
        Ok((names(&deployments, &cluster).await?.len() == 8).then_some(()))
    })
    .await?;
    assert_eq!(
        names(&deployments, &cluster).await?,
        [
            "master-m1a",
            "master-m2b",
            "master-m3c",
            "worker-w1a",
            "worker-w2b",
            "worker-w3c",
            "worker-w4d",
            "worker-w5e"
        ]
    );
    // The original's gauge of node Deployments per operator version.
    let gauge = "kvm_operator_deployment_resource_version_bundle_version_total";
    eventually("the Deployments counted", || async {
        Ok(w.metrics().contains(&format!("{gauge}{{major=\"4\",minor=\"0\",patch=\"0\"}} 8")).then_some(()))
    })
    .await
    .with_context(|| w.metrics())?;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ID);
    let node_secrets = names(&secrets, &format!("{cluster},giantswarm.io/managed-by=kvm-operator")).await?;
    assert_eq!(
        node_secrets,
        [
            "master-x7k2p-m1a",
            "master-x7k2p-m2b",
            "master-x7k2p-m3c",
            "worker-x7k2p-w1a",
            "worker-x7k2p-w2b",
            "worker-x7k2p-w3c",
            "worker-x7k2p-w4d",
            "worker-x7k2p-w5e"
        ]
    );
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), ID);
    assert_eq!(
        names(&pvcs, &cluster).await?,
        ["local-pvc-worker-x7k2p-w1a-scratch", "pvc-master-etcd-x7k2p-m1a"],
        "one etcd member, on the first master"
    );
    let scratch = pvcs.get("local-pvc-worker-x7k2p-w1a-scratch").await?.spec.unwrap_or_default();
    let requested = scratch.resources.and_then(|r| r.requests).unwrap_or_default();
    assert_eq!(requested["storage"].0, "40Gi", "the claim asks for the PersistentVolume's capacity");
    assert_eq!(names(&Api::<Service>::namespaced(client.clone(), ID), &cluster).await?, ["master", "worker"]);
    // The Ingresses carry the legacy labels only (`cluster`, `customer`, `app`), as the original's.
    let ingresses: Api<Ingress> = Api::namespaced(client.clone(), ID);
    let legacy = format!("cluster={ID}");
    eventually("the Ingresses", || async { Ok((names(&ingresses, &legacy).await?.len() == 2).then_some(())) }).await?;
    assert_eq!(names(&ingresses, &legacy).await?, ["api", "etcd"]);
    assert!(Api::<ServiceAccount>::namespaced(client.clone(), ID).get_opt(ID).await?.is_some());
    let bindings: Api<ClusterRoleBinding> = Api::all(client.clone());
    assert_eq!(names(&bindings, &cluster).await?, ["x7k2p", "x7k2p-psp"]);

    // The sidecar that publishes each VM's IP as a pod annotation, played here: the drainer
    // writes the Endpoints from the pods. Masters are Ready; workers wait for their
    // workload-cluster node (a readiness gate), so their IPs are not ready.
    let pods: Api<Pod> = Api::namespaced(client.clone(), ID);
    let node_pods = eventually("eight running node pods", || async {
        let list =
            pods.list(&ListParams::default().labels("kvm-operator.giantswarm.io/pod-watcher=kvm-operator")).await?;
        Ok((list.items.len() == 8).then_some(list.items))
    })
    .await?;
    let mut expected_masters = Vec::new();
    for (i, pod) in node_pods.iter().enumerate() {
        let ip = format!("10.77.0.{}", i + 11);
        if pod.labels().get("app").map(String::as_str) == Some("master") {
            expected_masters.push(ip.clone());
        }
        let patch = serde_json::json!({"metadata": {"annotations": {"endpoint.kvm.giantswarm.io/ip": ip}}});
        pods.patch(&pod.name_any(), &PatchParams::default(), &Patch::Merge(&patch)).await?;
    }
    expected_masters.sort();
    assert_eq!(expected_masters.len(), 3, "three master pods");
    let endpoints: Api<Endpoints> = Api::namespaced(client.clone(), ID);
    let ips = |e: &Endpoints, ready: bool| -> Vec<String> {
        let mut ips: Vec<String> = e
            .subsets
            .iter()
            .flatten()
            .flat_map(|s| if ready { s.addresses.clone() } else { s.not_ready_addresses.clone() })
            .flatten()
            .map(|a| a.ip)
            .collect();
        ips.sort();
        ips.dedup();
        ips
    };
    let master = eventually("the master Endpoints with every master's IP, ready", || async {
        Ok(endpoints.get_opt("master").await?.filter(|e| ips(e, true) == expected_masters))
    })
    .await?;
    // etcd's port leads to the first master alone, the one that runs etcd.
    let etcd_subsets: Vec<_> = master
        .subsets
        .iter()
        .flatten()
        .filter(|s| s.ports.iter().flatten().any(|p| p.name.as_deref() == Some("etcd")))
        .collect();
    assert_eq!(etcd_subsets.len(), 1, "{:?}", master.subsets);
    let etcd_targets: Vec<String> = etcd_subsets[0]
        .addresses
        .iter()
        .flatten()
        .filter_map(|a| a.target_ref.as_ref().and_then(|r| r.name.clone()))
        .collect();
    assert!(etcd_targets.len() == 1 && etcd_targets[0].starts_with("master-m1a-"), "{etcd_targets:?}");
    let workers = eventually("the worker Endpoints with five not-ready IPs", || async {
        Ok(endpoints.get_opt("worker").await?.filter(|e| ips(e, false).len() == 5))
    })
    .await?;
    assert!(ips(&workers, true).is_empty(), "no worker is ready before its workload-cluster node is");

    // Node indexes are persisted, one per node, 1 to 8.
    let stored = eventually("node indexes", || async {
        let config = configs.get(ID).await?;
        Ok(Some(config.node_indexes()).filter(|i| i.len() == 8))
    })
    .await?;
    let mut indexes: Vec<i64> = stored.values().copied().collect();
    indexes.sort();
    assert_eq!(indexes, (1..=8).collect::<Vec<_>>());
    // Workers wait for their workload-cluster node (a readiness gate), so the cluster is
    // Creating and says what it waits for.
    let status = eventually("Creating", || async {
        let status = configs.get(ID).await?.status.unwrap_or_default();
        Ok(status.cluster.has_condition(apis::cluster_status::ClusterCondition::Creating).then_some(status))
    })
    .await?;
    let ready = status.conditions.iter().find(|c| c.type_ == "Ready").context("Ready")?;
    assert_eq!(ready.status, "False");

    // A steady cluster is not written again: an applied object keeps its resourceVersion.
    let before = secrets.get("master-x7k2p-m1a").await?.resource_version();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(secrets.get("master-x7k2p-m1a").await?.resource_version(), before, "no write of an unchanged Secret");

    configs.delete(ID, &DeleteParams::default()).await?;
    eventually("the KVMConfig to go", || async { Ok(configs.get_opt(ID).await?.is_none().then_some(())) }).await?;
    assert!(Api::<Namespace>::all(client.clone()).get_opt(ID).await?.is_none(), "namespace gone");
    assert!(names(&bindings, &cluster).await?.is_empty(), "bindings gone");
    assert!(names(&deployments, &cluster).await?.is_empty());
    let metrics = w.metrics();
    assert!(!metrics.contains(&format!("{gauge}{{")), "a deleted cluster's Deployments are not counted: {metrics}");
    assert!(pods.list(&ListParams::default()).await?.items.is_empty(), "no node pod held by a finalizer");
    // The lifecycle, as Normal events on the KVMConfig (this cluster never got Created: its
    // workers' workload-cluster nodes never joined).
    let events: Api<Event> = Api::namespaced(client.clone(), NS);
    let reasons = eventually("the lifecycle events", || async {
        let mut reasons: Vec<String> = events
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter(|e| {
                e.type_.as_deref() == Some("Normal") && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(ID)
            })
            .filter_map(|e| e.reason)
            .filter(|reason| reason.starts_with("Cluster"))
            .collect();
        reasons.sort();
        Ok((reasons.len() == 3).then_some(reasons))
    })
    .await?;
    assert_eq!(reasons, ["ClusterCreating", "ClusterDeleted", "ClusterDeleting"]);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_or_missing_certificates_get_a_condition_and_an_event_and_create_nothing() -> anyhow::Result<()> {
    let w = start().await?;
    w.without_refusals(missing_then_fixed_certificates(&w)).await?;
    drop(w);
    Ok(())
}

async fn missing_then_fixed_certificates(w: &World) -> anyhow::Result<()> {
    let client = &w.client;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    let events: Api<Event> = Api::namespaced(client.clone(), NS);
    let warning = |reason: &'static str| {
        let events = events.clone();
        async move {
            eventually(&format!("a Warning event {reason}"), || async {
                Ok(events
                    .list(&ListParams::default())
                    .await?
                    .items
                    .into_iter()
                    .find(|e| e.type_.as_deref() == Some("Warning") && e.reason.as_deref() == Some(reason)))
            })
            .await
        }
    };
    let configs: Api<KVMConfig> = Api::namespaced(client.clone(), NS);
    let not_ready = |reason: &'static str| {
        let configs = configs.clone();
        async move {
            eventually(&format!("Ready=False {reason}"), || async {
                let status = configs.get(ID).await?.status.unwrap_or_default();
                Ok(status
                    .conditions
                    .into_iter()
                    .find(|c| c.type_ == "Ready" && c.status == "False" && c.reason == reason))
            })
            .await
        }
    };
    // The cluster brings its own certificate, but its api Secret holds another certificate's
    // key: bad input, reported and left as it is.
    let issued = pki::issue_cluster_pki(&example_names(), &pki::IssueOptions::at(std::time::SystemTime::now()))?;
    let mut broken = issued.clone();
    let worker_key = issued.certificates.iter().find(|c| c.name == "worker").expect("worker").key.clone();
    broken.certificates.iter_mut().filter(|c| c.name == "api").for_each(|c| c.key = worker_key.clone());
    create_secrets(client, &broken, &["api"]).await?;
    let broken_api = secrets.get(&format!("{ID}-api")).await?;
    configs.create(&PostParams::default(), &kvm_config()).await?;
    let ready = not_ready("CertificateInvalid").await?;
    for part in [format!("Secret {NS}/{ID}-api"), "key \"key\"".to_string(), "its own key".to_string()] {
        assert!(ready.message.contains(&part), "{part:?} in {:?}", ready.message);
    }
    let note = warning("CertificateInvalid").await?.note.unwrap_or_default();
    assert!(note.contains(&format!("{ID}-api")), "{note}");
    let key_body = worker_key.expose_pem().lines().nth(1).unwrap_or_default().to_string();
    assert!(!key_body.is_empty() && !ready.message.contains(&key_body) && !note.contains(&key_body), "no key material");
    assert_eq!(secrets.get(&format!("{ID}-api")).await?.data, broken_api.data, "the broken Secret is left as it is");
    assert!(
        secrets.get_opt(&format!("{ID}-cluster-ca")).await?.is_none(),
        "no CA is issued for a cluster that brings its own certificates"
    );

    // Fixed, it still lacks the others: the operator waits for them.
    let mut fixed = broken_api.clone();
    fixed.data =
        pki::secret::certificate_secret(NS, ID, issued.certificates.iter().find(|c| c.name == "api").expect("api"))
            .data;
    secrets.replace(&format!("{ID}-api"), &PostParams::default(), &fixed).await?;
    let ready = not_ready("MissingCertificates").await?;
    assert!(
        ready.message.contains("for: calico-etcd-client, etcd, service-account, worker;")
            && ready.message.contains("--certificates-namespace"),
        "{}",
        ready.message
    );
    let note = warning("MissingCertificates").await?.note.unwrap_or_default();
    assert!(note.contains("certificate Secret"));
    // Nothing is created but the claim of the id, taken before any certificate is issued for
    // it: the namespace, labelled with the KVMConfig's UID, and empty.
    let uid = configs.get(ID).await?.uid();
    let claim = Api::<Namespace>::all(client.clone()).get(ID).await?;
    assert_eq!(claim.labels().get("giantswarm.io/cluster-uid"), uid.as_ref(), "{:?}", claim.metadata);
    assert!(names(&Api::<Deployment>::namespaced(client.clone(), ID), "").await?.is_empty(), "nothing created");
    assert!(
        names(&Api::<ClusterRoleBinding>::all(client.clone()), &format!("giantswarm.io/cluster={ID}"))
            .await?
            .is_empty()
    );

    // Fixed input converges: the Secrets appear, the objects follow. The encryption key, which
    // the cluster did not bring, the operator issued.
    create_secrets(client, &issued, &CERTS[1..]).await?;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ID);
    eventually("Deployments after the fix", || async {
        Ok((names(&deployments, &format!("giantswarm.io/cluster={ID}")).await?.len() == 8).then_some(()))
    })
    .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_without_secrets_gets_its_pki_and_key_issued_and_its_nodes_carry_them() -> anyhow::Result<()> {
    let w = start().await?;
    w.without_refusals(issued_certificates(&w)).await?;
    drop(w);
    Ok(())
}

async fn issued_certificates(w: &World) -> anyhow::Result<()> {
    let client = &w.client;
    Api::<KVMConfig>::namespaced(client.clone(), NS).create(&PostParams::default(), &kvm_config()).await?;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ID);
    eventually("Deployments from issued certificates", || async {
        Ok((names(&deployments, &format!("giantswarm.io/cluster={ID}")).await?.len() == 8).then_some(()))
    })
    .await?;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    let listed = secrets.list(&ListParams::default().labels(&format!("giantswarm.io/cluster={ID}"))).await?.items;
    let issued: Vec<&str> =
        listed.iter().filter(|s| pki::secret::issued_here(s)).filter_map(|s| s.metadata.name.as_deref()).collect();
    assert_eq!(issued.len(), 9, "two CAs, five certificates, the key and the management kubeconfig: {issued:?}");
    assert!(issued.contains(&format!("{ID}-kubeconfig").as_str()), "{issued:?}");
    let api = listed.iter().find(|s| s.metadata.name.as_deref() == Some(&format!("{ID}-api"))).expect("api");
    let api_crt = api.data.as_ref().expect("data")["crt"].0.clone();
    pki::inspect(std::str::from_utf8(&api_crt)?).context("the api Secret holds a certificate")?;

    // Every master's node config carries the issued API certificate.
    let node_secrets: Api<Secret> = Api::namespaced(client.clone(), ID);
    let masters: Vec<Secret> = node_secrets
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|s| s.metadata.name.as_deref().is_some_and(|n| n.starts_with("master-")))
        .collect();
    assert!(!masters.is_empty());
    for master in &masters {
        let config = kvm_objects::ignition::decode_node_secret(master)?;
        assert_eq!(config.files["/etc/kubernetes/ssl/api-crt.pem"], api_crt, "{:?}", master.metadata.name);
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_cannot_reach_another_clusters_or_the_management_clusters_objects_through_a_cluster_id()
-> anyhow::Result<()> {
    let w = start().await?;
    w.without_refusals(tenant_ids(&w)).await?;
    drop(w);
    Ok(())
}

/// A KVMConfig of the tenant in `org-evil` named `name` with cluster id `id`.
fn evil_config(name: &str, id: &str) -> anyhow::Result<KVMConfig> {
    let mut config = serde_json::to_value(kvm_config())?;
    config["metadata"] = serde_json::json!({"name": name, "namespace": EVIL, "labels": config["metadata"]["labels"]});
    config["spec"]["cluster"]["id"] = serde_json::json!(id);
    Ok(serde_json::from_value(config)?)
}

const EVIL: &str = "org-evil";

/// The `Ready=False` condition of `name` in `ns` once its reason is `reason`.
async fn refused(client: &kube::Client, ns: &str, name: &str, reason: &str) -> anyhow::Result<String> {
    let configs: Api<KVMConfig> = Api::namespaced(client.clone(), ns);
    eventually(&format!("{ns}/{name} refused with {reason}"), || async {
        let status = configs.get(name).await?.status.unwrap_or_default();
        Ok(status.conditions.into_iter().find(|c| c.type_ == "Ready" && c.reason == reason).map(|c| c.message))
    })
    .await
}

async fn tenant_ids(w: &World) -> anyhow::Result<()> {
    let client = &w.client;
    let nss: Api<Namespace> = Api::all(client.clone());
    let evil: Namespace = serde_json::from_value(serde_json::json!({"metadata": {"name": EVIL}}))?;
    nss.create(&PostParams::default(), &evil).await?;
    // The victim: a cluster of organisation acme, up and running.
    let configs: Api<KVMConfig> = Api::namespaced(client.clone(), NS);
    configs.create(&PostParams::default(), &kvm_config()).await?;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ID);
    let cluster = format!("giantswarm.io/cluster={ID}");
    eventually("the victim's Deployments", || async {
        Ok((names(&deployments, &cluster).await?.len() == 8).then_some(()))
    })
    .await?;
    let victim_uid = configs.get(ID).await?.uid();
    let bindings: Api<ClusterRoleBinding> = Api::all(client.clone());
    let victim_bindings = names(&bindings, &cluster).await?;
    assert_eq!(victim_bindings, [ID.to_string(), format!("{ID}-psp")]);
    // An administrator's ClusterRoleBinding named like a cluster id, as a CNI's may be.
    let cni: ClusterRoleBinding = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "calico", "labels": {"k8s-app": "calico-node"}},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "calico-node"},
        "subjects": [{"kind": "ServiceAccount", "name": "calico-node", "namespace": "kube-system"}]
    }))?;
    bindings.create(&PostParams::default(), &cni).await?;

    // The API server refuses an id that names a namespace.
    let tenant: Api<KVMConfig> = Api::namespaced(client.clone(), EVIL);
    let err = tenant.create(&PostParams::default(), &evil_config("sys", "kube-system")?).await.expect_err("refused");
    assert!(matches!(&err, kube::Error::Api(s) if s.code == 422 && s.message.contains("spec.cluster.id")), "{err}");
    // The tenant claims the victim's id, and the CNI binding's name.
    tenant.create(&PostParams::default(), &evil_config("twin", ID)?).await?;
    tenant.create(&PostParams::default(), &evil_config("cni", "calico")?).await?;
    let message = refused(client, EVIL, "twin", "ClusterIDInUse").await?;
    assert!(message.contains(&format!("KVMConfig {NS}/{ID}")), "{message}");
    // Another twin, in a namespace listed before the victim's: the node controllers still find
    // the victim's KVMConfig for the pods in namespace <id>, the one holding the claim.
    let early: Namespace = serde_json::from_value(serde_json::json!({"metadata": {"name": "org-a"}}))?;
    nss.create(&PostParams::default(), &early).await?;
    let mut twin2 = evil_config("twin2", ID)?;
    twin2.metadata.namespace = Some("org-a".into());
    Api::<KVMConfig>::namespaced(client.clone(), "org-a").create(&PostParams::default(), &twin2).await?;
    let found = kvm_operator::controllers::config_of_cluster(client, ID).await?;
    assert_eq!(found.and_then(|c| c.metadata.uid), victim_uid, "the claim's holder, not a twin");
    let message = refused(client, EVIL, "cni", "ClusterIDInUse").await?;
    assert!(message.contains("ClusterRoleBinding calico"), "{message}");
    // Past the schema (a CRD that predates its pattern), the operator refuses the id itself.
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut crd = crds.get("kvmconfigs.provider.giantswarm.io").await?;
    let mut schema = serde_json::to_value(&crd.spec.versions[0].schema)?;
    let id = &mut schema["openAPIV3Schema"]["properties"]["spec"]["properties"]["cluster"]["properties"]["id"];
    id.as_object_mut().map(|o| o.remove("pattern"));
    crd.spec.versions[0].schema = serde_json::from_value(schema)?;
    crds.replace("kvmconfigs.provider.giantswarm.io", &PostParams::default(), &crd).await?;
    let sys = evil_config("sys", "kube-system")?;
    eventually("the CRD without the pattern to be served", || async {
        Ok(tenant.create(&PostParams::default(), &sys).await.ok().map(drop))
    })
    .await?;
    let message = refused(client, EVIL, "sys", "InvalidClusterID").await?;
    assert!(message.contains("spec.cluster.id") && message.contains("starting with a letter"), "{message}");

    // Nothing was issued for the victim's id in the tenant's namespace, nor bound, and deleting
    // the tenant's objects deletes nothing of others.
    let secrets: Api<Secret> = Api::namespaced(client.clone(), EVIL);
    assert!(names(&secrets, &cluster).await?.is_empty(), "no certificate issued for the victim's id");
    assert!(names(&bindings, "giantswarm.io/cluster=calico").await?.is_empty(), "nothing bound for the tenant");
    for name in ["twin", "cni", "sys"] {
        tenant.delete(name, &DeleteParams::default()).await?;
    }
    Api::<KVMConfig>::namespaced(client.clone(), "org-a").delete("twin2", &DeleteParams::default()).await?;
    eventually("the tenant's KVMConfigs to go", || async {
        Ok(tenant.list(&ListParams::default()).await?.items.is_empty().then_some(()))
    })
    .await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    for ns in [ID, "kube-system"] {
        let ns = nss.get(ns).await?;
        assert!(ns.metadata.deletion_timestamp.is_none(), "{:?} is being deleted", ns.metadata.name);
    }
    assert_eq!(nss.get(ID).await?.labels().get("giantswarm.io/cluster-uid"), victim_uid.as_ref());
    assert_eq!(names(&bindings, &cluster).await?, victim_bindings, "the victim's bindings stay");
    assert!(bindings.get_opt("calico").await?.is_some(), "the CNI's binding stays");
    assert_eq!(names(&deployments, &cluster).await?.len(), 8, "the victim's Deployments stay");
    assert!(configs.get(ID).await?.metadata.deletion_timestamp.is_none());
    Ok(())
}

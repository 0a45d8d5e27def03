//! The cluster controller against testenv, with simulated management-cluster nodes labelled
//! `role=master` and `role=worker`: a 3-master, 5-worker KVMConfig gets every object with the
//! right names, and Endpoints from its node pods' VM IPs; bad input gets `Ready=False` and a Warning event and creates nothing; deletion
//! leaves nothing behind, the ClusterRoleBindings included.

mod support;

use std::time::Duration;

use anyhow::Context;
use apis::kvm::KVMConfig;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Endpoints, Namespace, PersistentVolumeClaim, Pod, Secret, Service, ServiceAccount};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::networking::v1::Ingress;
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use support::{ID, Management, NS, create_secrets, kvm_config, names};
use testenv::TestEnv;
use tokio_util::sync::CancellationToken;

/// The management cluster with the operator; no workload cluster, so workers never become
/// Ready (nothing sets their readiness gate).
struct World {
    /// Kept for the life of the test: dropping it stops the API server.
    _env: TestEnv,
    client: kube::Client,
    shutdown: CancellationToken,
}

impl Drop for World {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

async fn start() -> anyhow::Result<World> {
    let Management { mc, client, shutdown } = Management::start().await?;
    Ok(World { _env: mc, client, shutdown })
}

async fn eventually<T, F, Fut>(what: &str, check: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Option<T>>>,
{
    support::eventually(what, 30, check).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_three_master_five_worker_cluster_gets_every_object_and_deletion_leaves_nothing() -> anyhow::Result<()> {
    let w = start().await?;
    let client = &w.client;
    create_secrets(client).await?;
    let configs: Api<KVMConfig> = Api::namespaced(client.clone(), NS);
    configs.create(&PostParams::default(), &kvm_config()).await?;

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
        ["pvc-master-etcd-x7k2p-m1a", "pvc-master-etcd-x7k2p-m2b", "pvc-master-etcd-x7k2p-m3c"]
    );
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
        ips
    };
    eventually("the master Endpoints with every master's IP, ready", || async {
        Ok(endpoints.get_opt("master").await?.filter(|e| ips(e, true) == expected_masters).map(|_| ()))
    })
    .await?;
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
    assert!(pods.list(&ListParams::default()).await?.items.is_empty(), "no node pod held by a finalizer");
    drop(w);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_certificates_get_a_condition_and_an_event_and_create_nothing() -> anyhow::Result<()> {
    let w = start().await?;
    let client = &w.client;
    let configs: Api<KVMConfig> = Api::namespaced(client.clone(), NS);
    configs.create(&PostParams::default(), &kvm_config()).await?;
    let ready = eventually("Ready=False", || async {
        let status = configs.get(ID).await?.status.unwrap_or_default();
        Ok(status.conditions.into_iter().find(|c| c.type_ == "Ready" && c.status == "False"))
    })
    .await?;
    assert_eq!(ready.reason, "MissingCertificates");
    assert!(
        ready.message.contains("api, calico-etcd-client, etcd, service-account, worker")
            && ready.message.contains("--certificates-namespace"),
        "{}",
        ready.message
    );
    let events: Api<Event> = Api::namespaced(client.clone(), NS);
    let warning = eventually("a Warning event", || async {
        Ok(events
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .find(|e| e.type_.as_deref() == Some("Warning") && e.reason.as_deref() == Some("MissingCertificates")))
    })
    .await?;
    assert!(warning.note.unwrap_or_default().contains("certificate Secret"));
    assert!(Api::<Namespace>::all(client.clone()).get_opt(ID).await?.is_none(), "nothing created");
    assert!(
        names(&Api::<ClusterRoleBinding>::all(client.clone()), &format!("giantswarm.io/cluster={ID}"))
            .await?
            .is_empty()
    );

    // Fixed input converges: the Secrets appear, the objects follow.
    create_secrets(client).await?;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), ID);
    eventually("Deployments after the fix", || async {
        Ok((names(&deployments, &format!("giantswarm.io/cluster={ID}")).await?.len() == 8).then_some(()))
    })
    .await?;
    drop(w);
    Ok(())
}

//! The cluster controller over a cluster's life, on two testenvs (management and workload
//! cluster, see `support`): creation until `Created` with the workload cluster's nodes in the
//! status and no write on an idle resync; scale-down, one node at a time, with node indexes
//! freed and reused; an upgrade by relabelling to a new Release, one Deployment at a time,
//! masters first, until `Updated`; workers held while a workload-cluster master is cordoned.

mod support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use apis::cluster_status::ClusterCondition;
use apis::kvm::KVMConfig;
use apis::release::Release;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::events::v1::Event;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use kvm_objects::names::keys;
use kvm_objects::rolling::is_available;
use support::{ID, RESYNC, World, eventually, kvm_config, names, not_ready, ready, settled};
use tokio_util::sync::CancellationToken;

const NODE_PODS: &str = "kvm-operator.giantswarm.io/pod-watcher=kvm-operator";

/// Create the example cluster and wait until it is `Created`.
async fn created(w: &World) -> anyhow::Result<KVMConfig> {
    w.configs().create(&PostParams::default(), &kvm_config()).await?;
    settled(w, ClusterCondition::Created, "20.1.0", 8).await
}

/// One observation of the node Deployments: name → (release annotation, spec hash, available,
/// being deleted).
type Sample = BTreeMap<String, (String, String, bool, bool)>;

/// Sample the node Deployments every 50 ms until the token is cancelled.
fn sample(w: &World) -> (Arc<Mutex<Vec<Sample>>>, CancellationToken) {
    let samples = Arc::new(Mutex::new(Vec::new()));
    let stop = CancellationToken::new();
    let (api, into, token) = (w.deployments(), samples.clone(), stop.clone());
    tokio::spawn(async move {
        while !token.is_cancelled() {
            if let Ok(list) = api.list(&ListParams::default()).await {
                let sample: Sample = list
                    .items
                    .iter()
                    .map(|d| {
                        let annotation = |key: &str| d.annotations().get(key).cloned().unwrap_or_default();
                        (
                            d.name_any(),
                            (
                                annotation(keys::RELEASE_VERSION),
                                annotation(keys::SPEC_HASH),
                                is_available(d),
                                d.metadata.deletion_timestamp.is_some(),
                            ),
                        )
                    })
                    .collect();
                into.lock().expect("samples").push(sample);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    (samples, stop)
}

fn hashes(deployments: &[Deployment], prefix: &str) -> BTreeMap<String, String> {
    deployments
        .iter()
        .filter(|d| d.name_any().starts_with(prefix))
        .map(|d| (d.name_any(), d.annotations().get(keys::SPEC_HASH).cloned().unwrap_or_default()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_masters_and_five_workers_become_created_and_an_idle_resync_writes_nothing() -> anyhow::Result<()> {
    let w = World::start().await?;
    let config = created(&w).await?;
    let status = config.status.clone().unwrap_or_default();

    // The status mirrors the workload cluster: the node pods' names, each Ready there.
    let pods: Api<Pod> = Api::namespaced(w.client.clone(), ID);
    let mut pod_names: Vec<String> =
        pods.list(&ListParams::default().labels(NODE_PODS)).await?.items.iter().map(ResourceExt::name_any).collect();
    pod_names.sort();
    let recorded: Vec<String> = status.cluster.nodes.iter().map(|n| n.name.clone()).collect();
    let mut sorted = recorded.clone();
    sorted.sort();
    assert_eq!(sorted, pod_names);
    let wc_nodes: Vec<Node> = w.wc_nodes().list(&ListParams::default()).await?.items;
    assert_eq!(wc_nodes.len(), 8);
    assert!(
        wc_nodes.iter().all(|n| n
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))),
        "every workload-cluster node is Ready"
    );
    let masters = status.cluster.nodes.iter().filter(|n| n.labels.get("role").map(String::as_str) == Some("master"));
    assert_eq!(masters.count(), 3, "the nodes' labels are recorded");
    let versions: Vec<&str> = status.cluster.versions.iter().map(|v| v.semver.as_str()).collect();
    assert_eq!(versions, ["20.1.0"]);
    let conditions: Vec<&str> = status.cluster.conditions.iter().map(|c| c.type_.as_str()).collect();
    assert_eq!(conditions, ["Created"]);
    // Each lifecycle step is a Normal event on the KVMConfig.
    let events: Api<Event> = Api::namespaced(w.client.clone(), support::NS);
    let lifecycle = eventually("ClusterCreating and ClusterCreated events", 10, || async {
        let mut notes: Vec<(String, String)> = events
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter(|e| {
                e.type_.as_deref() == Some("Normal") && e.reason.as_deref().is_some_and(|r| r.starts_with("Cluster"))
            })
            .map(|e| (e.reason.unwrap_or_default(), e.note.unwrap_or_default()))
            .collect();
        notes.sort();
        Ok((notes.len() == 2).then_some(notes))
    })
    .await?;
    assert_eq!(
        lifecycle,
        [
            ("ClusterCreated".to_string(), format!("cluster {ID} is created")),
            ("ClusterCreating".to_string(), format!("cluster {ID} is creating"))
        ]
    );
    // The version labels come from the running operator.
    let deployment = w.deployments().get("worker-w1a").await?;
    assert_eq!(deployment.annotations()[keys::VERSION_BUNDLE_VERSION], support::VERSION);

    // An idle cluster: over two resyncs, no write by anyone to anything but the simulated
    // nodes' heartbeats.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let version_before = w.configs().get(ID).await?.resource_version();
    let before = w.mc.handle().requests();
    tokio::time::sleep(RESYNC * 2 + Duration::from_millis(500)).await;
    let idle = w.mc.handle().requests().since(&before);
    let writes: Vec<String> = idle
        .by_resource
        .iter()
        .filter(|((verb, resource), _)| {
            verb.is_write() && resource != "nodes" && !resource.starts_with("leases") && !resource.starts_with("events")
        })
        .map(|((verb, resource), n)| format!("{verb} {resource} ×{n}"))
        .collect();
    assert!(writes.is_empty(), "writes during an idle resync: {writes:?}");
    assert_eq!(w.configs().get(ID).await?.resource_version(), version_before);
    let reads: Vec<String> = idle
        .by_resource
        .iter()
        .filter(|((verb, _), _)| !verb.is_write())
        .map(|((verb, resource), n)| format!("{verb} {resource} ×{n}"))
        .collect();
    eprintln!("requests to the management cluster over two idle resyncs (with the test's own): {reads:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scaling_workers_down_deletes_one_node_at_a_time_and_frees_indexes_for_reuse() -> anyhow::Result<()> {
    let w = World::start().await?;
    let config = created(&w).await?;
    let indexes = config.node_indexes();
    assert_eq!(indexes.len(), 8);

    let (samples, stop) = sample(&w);
    let mut spec = serde_json::to_value(&config.spec)?;
    for part in ["cluster", "kvm"] {
        spec[part]["workers"].as_array_mut().expect("workers").truncate(3);
    }
    let patch = serde_json::json!({"spec": spec});
    w.configs().patch(ID, &PatchParams::default(), &Patch::Merge(&patch)).await?;
    let deployments = w.deployments();
    let cluster = format!("giantswarm.io/cluster={ID}");
    eventually("six node Deployments", 90, || async {
        Ok((names(&deployments, &cluster).await?
            == ["master-m1a", "master-m2b", "master-m3c", "worker-w1a", "worker-w2b", "worker-w3c"])
        .then_some(()))
    })
    .await?;
    stop.cancel();
    // One at a time, in name order: w5e's deletion starts after w4d is gone.
    let samples = samples.lock().expect("samples").clone();
    let deleting_together =
        samples.iter().filter(|s| s.get("worker-w4d").is_some() && s.get("worker-w5e").is_some_and(|d| d.3)).count();
    assert_eq!(deleting_together, 0, "worker-w5e was being deleted while worker-w4d was still there");
    assert!(samples.iter().any(|s| s.get("worker-w4d").is_some_and(|d| d.3)), "w4d's deletion was observed");
    let config = settled(&w, ClusterCondition::Created, "20.1.0", 6).await?;
    let after = config.node_indexes();
    assert_eq!(after.len(), 6);
    assert!(!after.contains_key("w4d") && !after.contains_key("w5e"), "{after:?}");
    for (id, index) in &after {
        assert_eq!(indexes.get(id), Some(index), "{id} kept its index");
    }

    // A new worker gets the lowest freed index: w4d's.
    let mut spec = serde_json::to_value(&config.spec)?;
    spec["cluster"]["workers"].as_array_mut().expect("workers").push(serde_json::json!({"id": "w6f"}));
    let shape = spec["kvm"]["workers"][0].clone();
    spec["kvm"]["workers"].as_array_mut().expect("workers").push(shape);
    let patch = serde_json::json!({"spec": spec});
    w.configs().patch(ID, &PatchParams::default(), &Patch::Merge(&patch)).await?;
    let config = settled(&w, ClusterCondition::Created, "20.1.0", 7).await?;
    assert_eq!(config.node_indexes().get("w6f"), indexes.get("w4d"), "the freed index is reused");
    assert!(deployments.get_opt("worker-w6f").await?.is_some());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_release_rolls_one_node_at_a_time_masters_first_and_workers_wait_for_schedulable_masters()
-> anyhow::Result<()> {
    let w = World::start().await?;
    created(&w).await?;
    Api::<Release>::all(w.client.clone()).create(&PostParams::default(), &support::release("20.2.0", "1.34.3")).await?;

    let (samples, stop) = sample(&w);
    let configs = w.configs();
    let updating_seen = Arc::new(Mutex::new(false));
    let (seen, watch_stop) = (updating_seen.clone(), CancellationToken::new());
    let (api, token) = (configs.clone(), watch_stop.clone());
    tokio::spawn(async move {
        while !token.is_cancelled() {
            if let Ok(config) = api.get(ID).await
                && config.status.is_some_and(|s| s.cluster.has_condition(ClusterCondition::Updating))
            {
                *seen.lock().expect("seen") = true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
    let patch = serde_json::json!({"metadata": {"labels": {"release.giantswarm.io/version": "20.2.0"}}});
    configs.patch(ID, &PatchParams::default(), &Patch::Merge(&patch)).await?;
    let config = settled(&w, ClusterCondition::Updated, "20.2.0", 8).await?;
    stop.cancel();
    watch_stop.cancel();
    assert!(*updating_seen.lock().expect("seen"), "Updating was set while the nodes rolled");
    let lifecycle = config.status.clone().unwrap_or_default().cluster;
    let versions: Vec<&str> = lifecycle.versions.iter().map(|v| v.semver.as_str()).collect();
    assert_eq!(versions, ["20.1.0", "20.2.0"]);

    // The order in which the Deployments took the new release, and how many were on their way
    // (new release, not available yet) at once.
    let samples = samples.lock().expect("samples").clone();
    let mut order: Vec<String> = Vec::new();
    let mut most_in_flight = 0;
    for sample in &samples {
        for (name, (release, ..)) in sample {
            if release == "20.2.0" && !order.contains(name) {
                order.push(name.clone());
            }
        }
        let in_flight = sample.values().filter(|(release, _, available, _)| release == "20.2.0" && !available).count();
        most_in_flight = most_in_flight.max(in_flight);
    }
    assert_eq!(order.len(), 8, "every Deployment took the new release: {order:?}");
    assert!(order[..3].iter().all(|n| n.starts_with("master-")), "masters first: {order:?}");
    assert_eq!(most_in_flight, 1, "one Deployment at a time: {order:?}");

    // A workload-cluster master is cordoned, and the workers' spec changes: the workers wait.
    let wc_nodes = w.wc_nodes();
    let master = wc_nodes
        .list(&ListParams::default().labels("role=master"))
        .await?
        .items
        .first()
        .map(ResourceExt::name_any)
        .expect("a workload-cluster master");
    let cordon = |on: bool| serde_json::json!({"spec": {"unschedulable": on}});
    wc_nodes.patch(&master, &PatchParams::default(), &Patch::Merge(&cordon(true))).await?;
    let workers_before = hashes(&w.deployments().list(&ListParams::default()).await?.items, "worker-");
    let mut spec = serde_json::to_value(&config.spec)?;
    for worker in spec["kvm"]["workers"].as_array_mut().expect("workers") {
        worker["memory"] = "9G".into();
    }
    configs.patch(ID, &PatchParams::default(), &Patch::Merge(&serde_json::json!({"spec": spec}))).await?;
    let message = eventually("Ready naming the unschedulable master", 30, || async {
        let config = configs.get(ID).await?;
        Ok(ready(&config).filter(|(_, m)| m.contains(&master)).map(|(_, m)| m))
    })
    .await?;
    assert!(message.contains("schedulable"), "{message}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let workers_held = hashes(&w.deployments().list(&ListParams::default()).await?.items, "worker-");
    assert_eq!(workers_held, workers_before, "no worker Deployment changed while a master was cordoned");

    wc_nodes.patch(&master, &PatchParams::default(), &Patch::Merge(&cordon(false))).await?;
    eventually("every worker rolled to the new spec", 120, || async {
        let now = hashes(&w.deployments().list(&ListParams::default()).await?.items, "worker-");
        let all_new = now.iter().all(|(name, hash)| workers_before.get(name).is_some_and(|old| old != hash));
        let config = configs.get(ID).await?;
        Ok((all_new && ready(&config).is_some_and(|(s, _)| s == "True")).then_some(()))
    })
    .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_waiting_for_its_workload_cluster_reads_only_its_deployments_each_poll() -> anyhow::Result<()> {
    let w = World::start().await?;
    // The workload cluster cannot be reached by the operator (the stand-ins still register the
    // VMs): the masters come up, the workers wait for their node's readiness, which only the
    // workload cluster can tell; the cluster waits, polled every 300 ms, and that is not an error.
    w.wc.set_reachable(false);
    w.configs().create(&PostParams::default(), &kvm_config()).await?;
    let configs = w.configs();
    let message = eventually("Ready=False waiting for the workers", 60, || async {
        let config = configs.get(ID).await?;
        let deployments = w.deployments().list(&ListParams::default()).await?.items;
        let masters_available = deployments.len() == 8
            && deployments.iter().filter(|d| d.name_any().starts_with("master-")).all(is_available);
        Ok(ready(&config)
            .filter(|(s, m)| masters_available && s == "False" && m.starts_with("waiting for"))
            .map(|(_, m)| m))
    })
    .await?;
    assert!(message.contains("worker-") || message.contains("workload cluster"), "{message}");
    let status = configs.get(ID).await?.status.unwrap_or_default();
    assert!(status.cluster.has_condition(ClusterCondition::Creating));

    let before = w.mc.handle().requests();
    // A window just shorter than the recheck period (RESYNC, 2 s), as long as it can be: a
    // loaded machine reconciles slower, and the polls must still be seen.
    tokio::time::sleep(Duration::from_millis(1800)).await;
    let window = w.mc.handle().requests().since(&before);
    let polls = window.get(testenv::Verb::List, "deployments.apps");
    let secret_reads = window.get(testenv::Verb::Get, "secrets");
    eprintln!("1.8 s of waiting: {polls} Deployment LISTs, {secret_reads} Secret GETs");
    assert!(polls >= 3, "the cluster is polled: {polls}");
    // At most one full pass (eight node Secrets) in a window shorter than the recheck period;
    // without the memory of applied objects it is eight per poll.
    assert!(secret_reads <= 8, "{secret_reads} Secret GETs over {polls} polls");
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(w.client.clone(), support::NS);
    let warnings: Vec<String> = events
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|e| e.type_.as_deref() == Some("Warning"))
        .filter_map(|e| e.reason)
        .collect();
    assert!(warnings.is_empty(), "an unreachable workload cluster is no error: {warnings:?}");

    // Reachable again: the cluster is created.
    w.wc.set_reachable(true);
    settled(&w, ClusterCondition::Created, "20.1.0", 8).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_spec_is_named_once_in_its_condition_and_event() -> anyhow::Result<()> {
    let w = World::start().await?;
    let mut config = kvm_config();
    config.spec.cluster.workers[0].id = "m1a".into();
    // The CRD's rules refuse it at the API server.
    match w.configs().create(&PostParams::default(), &config).await {
        Err(kube::Error::Api(e)) if e.code == 422 => {
            assert!(e.message.contains("a node id is used by both a master and a worker"), "{}", e.message)
        }
        other => anyhow::bail!("the API server accepted a node id used twice: {other:?}"),
    }
    // An object that got past them (its CRD predates the rules) is refused by the operator.
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(w.client.clone());
    let mut crd = crds.get("kvmconfigs.provider.giantswarm.io").await?;
    for version in &mut crd.spec.versions {
        if let Some(spec) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
            .and_then(|s| s.properties.as_mut())
            .and_then(|p| p.get_mut("spec"))
        {
            spec.x_kubernetes_validations = None;
        }
    }
    crds.replace("kvmconfigs.provider.giantswarm.io", &PostParams::default(), &crd).await?;
    eventually("the CRD without its rules to be served", 20, || async {
        Ok(w.configs().create(&PostParams::default(), &config).await.ok().map(|_| ()))
    })
    .await?;
    let (status, message) = not_ready(&w, "").await?;
    assert_eq!(status, "InvalidSpec");
    assert!(
        message.contains("spec.cluster.workers[0].id")
            && message.contains("already used by spec.cluster.masters[0].id"),
        "{message}"
    );
    assert_eq!(message.matches(ID).count(), 1, "the object is named once: {message}");
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(w.client.clone(), support::NS);
    let note = eventually("the Warning event", 30, || async {
        Ok(events
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("InvalidSpec"))
            .and_then(|e| e.note))
    })
    .await?;
    assert_eq!(note.matches(ID).count(), 1, "the object is named once: {note}");
    assert!(Api::<k8s_openapi::api::core::v1::Namespace>::all(w.client.clone()).get_opt(ID).await?.is_none());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_volume_without_its_persistent_volume_waits_named_until_the_volume_exists() -> anyhow::Result<()> {
    let w = World::start().await?;
    let mut config = kvm_config();
    config.spec.kvm.workers[1]
        .host_volumes
        .push(apis::kvm::KVMConfigSpecKVMNodeHostVolume { mount_tag: "bulk".into(), host_path: "/srv/bulk".into() });
    w.configs().create(&PostParams::default(), &config).await?;
    let (reason, message) = not_ready(&w, "naming the host volume").await?;
    assert_eq!(reason, "HostVolumeUnavailable");
    assert!(message.contains("worker w2b: no PersistentVolume is labelled mount-tag=bulk"), "{message}");
    let namespaces = Api::<k8s_openapi::api::core::v1::Namespace>::all(w.client.clone());
    assert!(namespaces.get_opt(ID).await?.is_none(), "nothing is created while an input is missing");

    let volume: k8s_openapi::api::core::v1::PersistentVolume = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "local-bulk", "labels": {"mount-tag": "bulk"}},
        "spec": {"capacity": {"storage": "100Gi"}, "accessModes": ["ReadWriteOnce"], "hostPath": {"path": "/srv/bulk"}}
    }))?;
    Api::<k8s_openapi::api::core::v1::PersistentVolume>::all(w.client.clone())
        .create(&PostParams::default(), &volume)
        .await?;
    let pvcs: Api<k8s_openapi::api::core::v1::PersistentVolumeClaim> = Api::namespaced(w.client.clone(), ID);
    let pvc =
        eventually("the host-volume PVC", 30, || async { Ok(pvcs.get_opt("local-pvc-worker-x7k2p-w2b-bulk").await?) })
            .await?;
    let requests = pvc.spec.and_then(|s| s.resources).and_then(|r| r.requests).unwrap_or_default();
    assert_eq!(requests["storage"].0, "100Gi");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn moving_etcd_away_from_the_master_that_holds_its_data_is_refused_and_changes_nothing() -> anyhow::Result<()> {
    let w = World::start().await?;
    let config = created(&w).await?;
    let before = names(&w.deployments(), "").await?;
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(w.client.clone(), ID);
    let node_config = secrets.get("master-x7k2p-m2b").await?.resource_version();
    // m2b first: it would become the etcd master, with empty storage.
    let mut spec = serde_json::to_value(&config.spec)?;
    let masters = spec["cluster"]["masters"].as_array_mut().expect("masters");
    masters.swap(0, 1);
    let shapes = spec["kvm"]["masters"].as_array_mut().expect("master shapes");
    shapes.swap(0, 1);
    let configs = w.configs();
    configs.patch(ID, &PatchParams::default(), &Patch::Merge(&serde_json::json!({"spec": spec}))).await?;
    let (reason, message) = not_ready(&w, "naming the etcd master").await?;
    assert_eq!(reason, "EtcdMasterMoved");
    assert!(message.contains("master m1a holds the cluster's etcd data"), "{message}");
    tokio::time::sleep(RESYNC).await;
    assert_eq!(names(&w.deployments(), "").await?, before, "no Deployment created or deleted");
    assert_eq!(secrets.get("master-x7k2p-m2b").await?.resource_version(), node_config, "m2b's node config unchanged");
    let etcd = w.deployments().get("master-m1a").await?;
    assert_eq!(etcd.labels().get(keys::ETCD_MEMBER).map(String::as_str), Some("true"));
    Ok(())
}

//! Kill the operator at random points, ten times during a cluster's creation and ten times
//! during its upgrade, as a crash would (every task stops where it is; no reconcile finishes,
//! no finalizer is released), and restart it each time. The cluster converges: one
//! Deployment per node, distinct node indexes, no node pod stuck behind the drain finalizer,
//! no DrainerConfig left.

mod support;

use std::collections::BTreeSet;
use std::time::Duration;

use apis::cluster_status::ClusterCondition;
use apis::drainer::DrainerConfig;
use apis::release::Release;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use support::{ID, World, eventually, kvm_config, settled};

/// Kill the operator ten times, each after a random time within `window_ms`, restarting it
/// after each kill. Returns the kill points in milliseconds, and how many kills came while
/// the cluster was not yet `settled_by` on `release`.
async fn kill_ten_times(
    w: &mut World,
    window_ms: std::ops::Range<u64>,
    settled_by: ClusterCondition,
    release: &str,
) -> anyhow::Result<(Vec<u64>, usize)> {
    let mut kills = Vec::new();
    let mut in_flight = 0;
    for _ in 0..10 {
        let after = rand::random_range(window_ms.clone());
        tokio::time::sleep(Duration::from_millis(after)).await;
        w.operator.kill();
        kills.push(after);
        let status = w.configs().get(ID).await?.status.unwrap_or_default().cluster;
        if !(status.has_condition(settled_by) && status.has_version(release)) {
            in_flight += 1;
        }
        w.operator.restart()?;
    }
    Ok((kills, in_flight))
}

/// What must hold once the cluster converged, whatever the kills interrupted.
async fn no_duplicates_and_no_leftovers(w: &World, nodes: usize) -> anyhow::Result<()> {
    let config = w.configs().get(ID).await?;
    let indexes = config.node_indexes();
    let spec_ids: BTreeSet<String> =
        config.spec.cluster.masters.iter().chain(&config.spec.cluster.workers).map(|n| n.id.clone()).collect();
    let indexed: BTreeSet<String> = indexes.keys().cloned().collect();
    assert_eq!(indexed, spec_ids, "one node index per node of the spec");
    let distinct: BTreeSet<i64> = indexes.values().copied().collect();
    assert_eq!(distinct.len(), indexes.len(), "no node index is handed out twice: {indexes:?}");

    let deployments = w.deployments().list(&ListParams::default()).await?.items;
    assert_eq!(deployments.len(), nodes, "one Deployment per node");
    let pods: Api<Pod> = Api::namespaced(w.client.clone(), ID);
    let settled = eventually("no node pod left terminating, one per node", 60, || async {
        let pods = pods.list(&ListParams::default()).await?.items;
        let terminating: Vec<String> =
            pods.iter().filter(|p| p.metadata.deletion_timestamp.is_some()).map(ResourceExt::name_any).collect();
        Ok((terminating.is_empty() && pods.len() == nodes).then_some(pods))
    })
    .await?;
    // Each remaining pod belongs to a Deployment of the cluster.
    for pod in &settled {
        let node = pod.labels().get(kvm_objects::names::keys::NODE).cloned().unwrap_or_default();
        assert!(spec_ids.contains(&node), "pod {} runs node {node}, which is in the spec", pod.name_any());
    }
    let drainers: Api<DrainerConfig> = Api::all(w.client.clone());
    eventually("no DrainerConfig left", 30, || async {
        Ok(drainers.list(&ListParams::default()).await?.items.is_empty().then_some(()))
    })
    .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_ten_times_during_creation_and_ten_during_an_upgrade_the_cluster_converges() -> anyhow::Result<()> {
    let mut w = World::start().await?;
    w.configs().create(&PostParams::default(), &kvm_config()).await?;
    // Creation takes a few seconds in simulation: kill within it.
    let (kills, in_flight) = kill_ten_times(&mut w, 20..250, ClusterCondition::Created, "20.1.0").await?;
    eprintln!("creation: {in_flight} kills in flight, after {kills:?} ms");
    assert!(in_flight >= 3, "kills came during the creation: {in_flight} of {kills:?} ms");
    if let Err(e) = settled(&w, ClusterCondition::Created, "20.1.0", 8).await {
        anyhow::bail!("{e} (kills after {kills:?} ms)");
    }
    no_duplicates_and_no_leftovers(&w, 8).await?;

    Api::<Release>::all(w.client.clone()).create(&PostParams::default(), &support::release("20.2.0", "1.34.3")).await?;
    let patch = serde_json::json!({"metadata": {"labels": {"release.giantswarm.io/version": "20.2.0"}}});
    w.configs().patch(ID, &PatchParams::default(), &Patch::Merge(&patch)).await?;
    // The roll drains and replaces eight nodes one at a time: kill within it.
    let (kills, in_flight) = kill_ten_times(&mut w, 100..800, ClusterCondition::Updated, "20.2.0").await?;
    eprintln!("upgrade: {in_flight} kills in flight, after {kills:?} ms");
    assert!(in_flight >= 3, "kills came during the upgrade: {in_flight} of {kills:?} ms");
    if let Err(e) = settled(&w, ClusterCondition::Updated, "20.2.0", 8).await {
        anyhow::bail!("{e} (kills after {kills:?} ms)");
    }
    no_duplicates_and_no_leftovers(&w, 8).await?;
    Ok(())
}

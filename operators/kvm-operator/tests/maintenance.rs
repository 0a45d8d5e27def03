//! Maintenance windows and node max-age on a KVM cluster (`spec.cluster.maintenance`,
//! `spec.cluster.maxNodeAge`), on two testenvs (see `support`), with the operator's clock moved
//! by the test instead of waited for.
//!
//! - A Release upgrade started outside the cluster's window waits (`Ready=False`
//!   `WaitingForMaintenanceWindow`, naming the window), changes no Deployment, and rolls once
//!   the clock reaches the window.
//! - Unreadable settings (`maxNodeAge` below a day) get the `MaintenanceSettings` condition
//!   naming the field, and a Warning; the cluster is still created (creation is not disruptive).
//! - With `--max-rolling-clusters 1` and the one slot held by another cluster (a slot Lease, as
//!   another replica or version would hold it), an upgrade waits (`Ready=False`
//!   `WaitingForRolloutSlot`, naming the holder) and changes no Deployment; once that slot is
//!   given back the cluster takes it, rolls, and gives it back when it is done.
//! - Once the nodes are past `maxNodeAge`, their pods are replaced oldest first, one at a time:
//!   never two node pods going at once, never one replaced twice.

mod support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use apis::cluster_status::ClusterCondition;
use apis::release::Release;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use kvm_objects::names::keys;
use kvm_operator::config::RolloutLimits;
use kvm_operator::controllers::cluster::maintenance::{SLOT_SCOPE, WAITING_FOR_SLOT};
use node_lifecycle::slots::Slots;
use support::{ID, NS, World, eventually, kvm_config, settled};
use tokio_util::sync::CancellationToken;

const NODE_PODS: &str = "kvm-operator.giantswarm.io/pod-watcher=kvm-operator";

fn condition(config: &apis::kvm::KVMConfig, type_: &str) -> Option<(String, String, String)> {
    config
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgrade_outside_the_window_waits_and_rolls_when_the_window_opens() -> anyhow::Result<()> {
    let w = World::start().await?;
    // Monday 1 June 2026, 14:00 in Berlin; the window opens at 22:00 (20:00Z) for four hours.
    w.operator.clock.set("2026-06-01T12:00:00Z".parse()?);
    let mut config = kvm_config();
    config.spec.cluster.maintenance = Some(serde_json::from_value(serde_json::json!({
        "timeZone": "Europe/Berlin",
        "windows": [{"days": ["Mon"], "start": "22:00", "duration": "4h"}]
    }))?);
    w.configs().create(&PostParams::default(), &config).await?;
    settled(&w, ClusterCondition::Created, "20.1.0", 8).await?;

    Api::<Release>::all(w.client.clone()).create(&PostParams::default(), &support::release("20.2.0", "1.34.3")).await?;
    let releases = || async {
        let list = w.deployments().list(&ListParams::default()).await?;
        Ok::<_, anyhow::Error>(
            list.items
                .iter()
                .map(|d| (d.name_any(), d.annotations().get(keys::RELEASE_VERSION).cloned().unwrap_or_default()))
                .collect::<BTreeMap<_, _>>(),
        )
    };
    let before = releases().await?;
    let patch = serde_json::json!({"metadata": {"labels": {"release.giantswarm.io/version": "20.2.0"}}});
    w.configs().patch(ID, &PatchParams::default(), &Patch::Merge(&patch)).await?;
    let configs = w.configs();
    let (reason, message) = eventually("Ready=False waiting for the window", 30, || async {
        let config = configs.get(ID).await?;
        Ok(condition(&config, "Ready")
            .filter(|(s, r, _)| s == "False" && r == "WaitingForMaintenanceWindow")
            .map(|(_, r, m)| (r, m)))
    })
    .await?;
    assert_eq!(reason, "WaitingForMaintenanceWindow");
    assert!(
        message.contains("waits for the next maintenance window, which opens at 2026-06-01T20:00:00Z (Mon 22:00 CEST)"),
        "{message}"
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(releases().await?, before, "no node Deployment changed outside the window");

    // The window opens: the cluster rolls to the new release.
    w.operator.clock.set("2026-06-01T20:00:01Z".parse()?);
    settled(&w, ClusterCondition::Updated, "20.2.0", 8).await?;
    assert!(releases().await?.values().all(|r| r == "20.2.0"));
    Ok(())
}

/// The release of each node Deployment of the cluster, by name.
async fn deployment_releases(w: &World) -> anyhow::Result<BTreeMap<String, String>> {
    let list = w.deployments().list(&ListParams::default()).await?;
    Ok(list
        .items
        .iter()
        .map(|d| (d.name_any(), d.annotations().get(keys::RELEASE_VERSION).cloned().unwrap_or_default()))
        .collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgrade_waits_for_a_rollout_slot_held_elsewhere_and_gives_its_own_back() -> anyhow::Result<()> {
    let mut config = support::operator_config();
    config.rollout = RolloutLimits { max_rolling_clusters: 1, slot_namespace: NS.into() };
    let w = World::start_with(config).await?;
    w.configs().create(&PostParams::default(), &kvm_config()).await?;
    settled(&w, ClusterCondition::Created, "20.1.0", 8).await?;

    // Another cluster (its KVMConfig exists, on a release no operator here serves) holds the
    // management cluster's only slot, as a replica of another version would.
    let other = "q9z8w";
    let mut other_config = kvm_config();
    other_config.metadata.name = Some(other.into());
    other_config
        .metadata
        .labels
        .get_or_insert_default()
        .insert("release.giantswarm.io/version".into(), "19.0.0".into());
    w.configs().create(&PostParams::default(), &other_config).await?;
    let slots = Slots::new(w.client.clone(), NS, SLOT_SCOPE, 1);
    let holder = format!("{NS}/{other}");
    assert!(slots.acquire(&holder, &holder, |_| async { true }).await?.is_held());

    Api::<Release>::all(w.client.clone()).create(&PostParams::default(), &support::release("20.2.0", "1.34.3")).await?;
    let before = deployment_releases(&w).await?;
    let patch = serde_json::json!({"metadata": {"labels": {"release.giantswarm.io/version": "20.2.0"}}});
    w.configs().patch(ID, &PatchParams::default(), &Patch::Merge(&patch)).await?;
    let configs = w.configs();
    let message = eventually("Ready=False waiting for a rollout slot", 30, || async {
        let config = configs.get(ID).await?;
        Ok(condition(&config, "Ready").filter(|(s, r, _)| s == "False" && r == WAITING_FOR_SLOT).map(|(.., m)| m))
    })
    .await?;
    assert!(message.contains("--max-rolling-clusters") && message.contains(&holder), "{message}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(deployment_releases(&w).await?, before, "no node Deployment changed without a slot");
    assert_eq!(slots.holders().await?, std::slice::from_ref(&holder), "the waiting cluster took no slot");

    // The other cluster is done: this one takes the slot, rolls, and gives the slot back.
    slots.release(&holder, &holder).await?;
    let mine = format!("{NS}/{ID}");
    eventually("the cluster holds the slot", 30, || async {
        Ok((slots.holders().await? == [mine.clone()]).then_some(()))
    })
    .await?;
    settled(&w, ClusterCondition::Updated, "20.2.0", 8).await?;
    assert!(deployment_releases(&w).await?.values().all(|r| r == "20.2.0"));
    eventually("the slot given back", 30, || async { Ok(slots.holders().await?.is_empty().then_some(())) }).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_past_their_max_age_are_replaced_oldest_first_one_at_a_time() -> anyhow::Result<()> {
    let w = World::start().await?;
    let mut config = kvm_config();
    config.spec.cluster.max_node_age = Some("2h".into());
    w.configs().create(&PostParams::default(), &config).await?;
    // Not a valid max age: named in its condition, with a Warning; the cluster is created all
    // the same.
    settled(&w, ClusterCondition::Created, "20.1.0", 8).await?;
    let configs = w.configs();
    let (status, reason, message) = condition(&configs.get(ID).await?, "MaintenanceSettings").expect("the condition");
    assert_eq!((status.as_str(), reason.as_str()), ("False", "InvalidMaintenance"));
    assert!(message.contains("spec.cluster.maxNodeAge"), "{message}");
    let events = Api::<Event>::namespaced(w.client.clone(), NS).list(&ListParams::default()).await?;
    assert!(
        events.items.iter().any(|e| e.reason.as_deref() == Some("InvalidMaintenance")
            && e.note.as_deref().is_some_and(|n| n.contains("spec.cluster.maxNodeAge"))),
        "a Warning names the field"
    );

    // Fixed: a day. Nothing is a day old yet.
    let patch = serde_json::json!({"spec": {"cluster": {"maxNodeAge": "1d"}}});
    configs.patch(ID, &PatchParams::default(), &Patch::Merge(&patch)).await?;
    eventually("MaintenanceSettings=True", 30, || async {
        Ok(condition(&configs.get(ID).await?, "MaintenanceSettings").filter(|(s, ..)| s == "True").map(|_| ()))
    })
    .await?;
    let pods = Api::<Pod>::namespaced(w.client.clone(), ID);
    let mut original: Vec<(String, jiff::Timestamp)> = pods
        .list(&ListParams::default().labels(NODE_PODS))
        .await?
        .items
        .iter()
        .map(|p| (p.name_any(), p.metadata.creation_timestamp.as_ref().map(|t| t.0).unwrap_or_default()))
        .collect();
    assert_eq!(original.len(), 8);
    original.sort_by(|a, b| a.1.cmp(&b.1).then(a.0.cmp(&b.0)));

    // Sample the node pods: which are being deleted, and in which order they went.
    let going_at_once = Arc::new(Mutex::new(0usize));
    let deleted: Arc<Mutex<Vec<String>>> = Arc::default();
    let stop = CancellationToken::new();
    {
        let (pods, going_at_once, deleted, stop) = (pods.clone(), going_at_once.clone(), deleted.clone(), stop.clone());
        tokio::spawn(async move {
            while !stop.is_cancelled() {
                if let Ok(list) = pods.list(&ListParams::default().labels(NODE_PODS)).await {
                    let going: Vec<String> = list
                        .items
                        .iter()
                        .filter(|p| p.metadata.deletion_timestamp.is_some())
                        .map(ResourceExt::name_any)
                        .collect();
                    let mut most = going_at_once.lock().expect("most");
                    *most = (*most).max(going.len());
                    let mut order = deleted.lock().expect("order");
                    for name in going {
                        if !order.contains(&name) {
                            order.push(name);
                        }
                    }
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        });
    }
    // Two days later every node is past its age: three are replaced, then the clock goes back.
    w.operator.clock.advance(Duration::from_secs(2 * 86_400));
    eventually("three node pods replaced for their age", 120, || async {
        Ok((deleted.lock().expect("order").len() >= 3).then_some(()))
    })
    .await?;
    w.operator.clock.set(jiff::Timestamp::now());
    settled(&w, ClusterCondition::Created, "20.1.0", 8).await?;
    stop.cancel();

    let order = deleted.lock().expect("order").clone();
    let oldest: Vec<String> = original.iter().map(|(n, _)| n.clone()).take(order.len()).collect();
    assert_eq!(order, oldest, "the oldest first, each once");
    assert_eq!(*going_at_once.lock().expect("most"), 1, "one node pod at a time");
    let events = Api::<Event>::namespaced(w.client.clone(), NS).list(&ListParams::default()).await?;
    // Repeats of one event are folded into a series.
    let replaced: i32 = events
        .items
        .iter()
        .filter(|e| e.reason.as_deref() == Some("MaxAgeReplacement"))
        .map(|e| e.series.as_ref().map_or(1, |s| s.count))
        .sum();
    assert!(replaced >= 3, "an event per replacement: {replaced}");
    assert_eq!(w.operator.max_age_replacements.get(), order.len() as u64, "each replacement counted once");
    Ok(())
}

//! A legacy cluster's Release upgrade on moto and a simulated workload cluster, with two operator
//! versions running side by side as a platform runs them.
//!
//! A legacy cluster (one master, three workers) is created by the operator of its Release. Its
//! master boots: the etcd attach script of the node config the operator uploaded attaches the
//! etcd volume and interface (run on an emulated node with the real AWS CLI). Relabelling the
//! `AWSConfig` to a Release of the other operator version hands the cluster over: that operator
//! updates `guest-main`, the master's one-instance group replaces the master (the old instance
//! goes first), the new master's own script attaches the same volume and interface, and the
//! workers roll in batches, each drained through the terminating hook by the shared drainers.
//! The lifecycle goes `Updating` → `Updated` with both versions in `status.cluster.versions`.
//! Every check goes through EC2's and Auto Scaling's own APIs.

mod support;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use apis::aws_config::AWSConfig;
use apis::cluster_status::ClusterCondition;
use aws_operator::aws::AccountClients;
use aws_sdk_ec2::types::Filter;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use support::bridge::{self, NodeBridge, Seen};
use support::legacy::{apply, installation_zone, legacy_cluster, relabel, wait_created};
use support::*;
use workload_sim::WorkloadCluster;

const ID: &str = "lgup1";
const OLD_KEY: &str = "AKIAOLDOPERATOR";
const NEW_KEY: &str = "AKIANEWOPERATOR";

/// The master's etcd volume (found by its Name tag, as the node finds it): its id and the
/// instance it is attached to.
async fn etcd_volume(tenant: &AccountClients) -> anyhow::Result<(String, Option<String>)> {
    let name = aws_stacks::names::master_etcd_volume(ID, 0);
    let out =
        tenant.ec2.describe_volumes().filters(Filter::builder().name("tag:Name").values(&name).build()).send().await?;
    let volumes = out.volumes();
    anyhow::ensure!(volumes.len() == 1, "one volume {name}: {volumes:?}");
    let attached = volumes[0].attachments().iter().find_map(|a| a.instance_id()).map(str::to_string);
    Ok((volumes[0].volume_id().unwrap_or_default().to_string(), attached))
}

/// The master's etcd interface: its id and the instance it is attached to.
async fn etcd_interface(tenant: &AccountClients) -> anyhow::Result<(String, Option<String>)> {
    let name = aws_stacks::names::master_eni(ID, 0);
    let out = tenant
        .ec2
        .describe_network_interfaces()
        .filters(Filter::builder().name("tag:Name").values(&name).build())
        .send()
        .await?;
    let enis = out.network_interfaces();
    anyhow::ensure!(enis.len() == 1, "one interface {name}: {enis:?}");
    let attached = enis[0].attachment().and_then(|a| a.instance_id()).map(str::to_string);
    Ok((enis[0].network_interface_id().unwrap_or_default().to_string(), attached))
}

/// The one master the bridge sees in service.
fn master_in_service(seen: &[Seen]) -> Option<Seen> {
    let masters: Vec<&Seen> = seen.iter().filter(|s| s.master).collect();
    (masters.len() == 1 && masters[0].lifecycle == "InService").then(|| masters[0].clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_upgrade_replaces_the_master_on_its_etcd_volume_and_rolls_the_workers() -> anyhow::Result<()> {
    // AWS's waits at 2 %: the workers' batches pause 18 s (PT15M), the master's 2.4 s.
    let mut f = Fixture::start_with(motoenv::Launcher::from_env().time_scale(0.02)).await?;
    f.apply_basics().await?;
    let next = next_version();
    f.release("20.1.0", FLATCAR_NEXT, &next).await?;
    f.drainer_poll = Some(Duration::from_secs(1));
    f.credential_secret(ID).await?;
    let cp = f.control_plane_clients().await?;
    installation_zone(&cp).await?;
    let config = legacy_cluster(&f, ID).await?;

    // The workload cluster, its nodes following the instances.
    let wc = Arc::new(WorkloadCluster::start().await?);
    wc.install_kubeconfig(&Api::<Secret>::namespaced(f.client.clone(), NS), NS, ID).await?;
    let tenant = f.tenant_clients().await?;
    let endpoint = f.moto.endpoint();
    let bridge = NodeBridge::start(wc.clone(), tenant.clone(), &endpoint, ID, Duration::from_millis(700));
    let (drained_at, recorder) = record_drained(&f.client);

    let _old = f.spawn_operator(VERSION, OLD_KEY).await?;
    let _new = f.spawn_operator(&next, NEW_KEY).await?;
    apply(&f, &config).await?;
    wait_created(&f, ID, 300).await?;
    let before = eventually(120, "the master and three workers in service", || async {
        let seen = bridge.seen();
        let in_service = seen.iter().filter(|s| s.lifecycle == "InService").count();
        Ok((in_service == 4 && master_in_service(&seen).is_some()).then_some(seen))
    })
    .await
    .with_context(|| format!("bridge: {:?}", bridge.errors()))?;
    let old_master = master_in_service(&before).expect("the master");
    assert!(before.iter().all(|s| s.version == VERSION), "{before:?}");
    let old_instances: BTreeSet<String> = before.iter().map(|s| s.instance.clone()).collect();

    // The master boots: its node config attaches the etcd volume and interface.
    bridge::attach_etcd(&tenant, &endpoint, ID, 0, &old_master, Duration::from_secs(120)).await?;
    let (volume, attached) = etcd_volume(&tenant).await?;
    assert_eq!(attached.as_deref(), Some(old_master.instance.as_str()), "the volume is on the first master");
    let (eni, _) = etcd_interface(&tenant).await?;

    // The upgrade: the Release of the other operator version.
    let calls_before = f.moto.request_log()?.len();
    let started = Instant::now();
    relabel(&f, ID, "20.1.0", &next).await?;
    let api: Api<AWSConfig> = Api::namespaced(f.client.clone(), NS);
    let mut saw_updating = false;
    let mut master_replaced_first = None;
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let c = api.get(ID).await?;
        let lifecycle = c.status.as_ref().map(|s| s.cluster.clone()).unwrap_or_default();
        saw_updating |= lifecycle.has_condition(ClusterCondition::Updating);
        let seen = bridge.seen();
        // When the first old worker stops being in service, is the master already new?
        let worker_moved = before
            .iter()
            .filter(|s| !s.master)
            .any(|old| seen.iter().find(|s| s.instance == old.instance).is_none_or(|s| s.lifecycle != "InService"));
        if worker_moved && master_replaced_first.is_none() {
            master_replaced_first =
                Some(seen.iter().filter(|s| s.master).all(|s| !old_instances.contains(&s.instance)));
        }
        let updated = lifecycle.has_condition(ClusterCondition::Updated)
            && lifecycle.versions.iter().any(|v| v.semver == next)
            && ready(c.status.as_ref().map(|s| &s.conditions));
        let all_new = seen.len() == 4
            && seen
                .iter()
                .all(|s| !old_instances.contains(&s.instance) && s.version == next && s.lifecycle == "InService");
        if updated && all_new {
            break;
        }
        if Instant::now() > deadline {
            anyhow::bail!(
                "the upgrade did not finish: {seen:#?}\nbridge: {:?}\nstatus: {}\n{}",
                bridge.errors(),
                serde_json::to_string(&c.status)?,
                dump(&f.client).await
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let elapsed = started.elapsed();
    let log = f.moto.request_log()?;
    let upgrade_calls = &log[calls_before..];
    let operator_calls: Vec<_> = upgrade_calls.iter().filter(|r| r.principal == NEW_KEY).collect();
    let writes = operator_calls.iter().filter(|r| r.is_write()).count();
    println!(
        "legacy upgrade of {ID}: Updated after {:.1} s (AWS's waits at 2 %), the new operator made {} AWS calls ({writes} writes); master replaced before the workers: {master_replaced_first:?}",
        elapsed.as_secs_f64(),
        operator_calls.len()
    );
    assert!(saw_updating, "the lifecycle said Updating during the upgrade");

    // The new master: another instance, whose own node config attaches the same volume and
    // interface (the old instance is gone, so EC2 detached them).
    let seen = bridge.seen();
    let new_master = master_in_service(&seen).expect("the new master");
    assert_ne!(new_master.instance, old_master.instance, "the master was replaced");
    assert_eq!(new_master.version, next, "the new master boots the new operator's node config");
    bridge::attach_etcd(&tenant, &endpoint, ID, 0, &new_master, Duration::from_secs(120)).await?;
    let (volume_after, attached) = etcd_volume(&tenant).await?;
    assert_eq!(volume_after, volume, "the etcd volume was kept");
    assert_eq!(attached.as_deref(), Some(new_master.instance.as_str()), "the volume is on the new master");
    let (eni_after, eni_attached) = etcd_interface(&tenant).await?;
    assert_eq!(eni_after, eni, "the etcd interface (the peer address) was kept");
    assert_eq!(eni_attached.as_deref(), Some(new_master.instance.as_str()));

    // Both versions in the status, the cluster Ready, no Warning.
    let c = api.get(ID).await?;
    let versions: Vec<String> =
        c.status.as_ref().map(|s| s.cluster.versions.iter().map(|v| v.semver.clone()).collect()).unwrap_or_default();
    assert!(versions.contains(&VERSION.to_string()) && versions.contains(&next), "{versions:?}");
    let warnings = event_notes(&f.client, ID, "Warning", None).await?;
    assert!(warnings.is_empty(), "no Warning event: {warnings:?}");

    // Every old worker's node was drained (the master has no terminating hook: one master).
    recorder.abort();
    let drained_at = drained_at.lock().clone();
    for old in before.iter().filter(|s| !s.master) {
        assert!(drained_at.contains_key(&old.instance), "worker {} was never drained: {drained_at:?}", old.instance);
    }
    nothing_left_terminating(&f, &tenant).await?;
    // The old operator wrote nothing after the handover (the reconcile under way may finish).
    let late: Vec<_> = upgrade_calls
        .iter()
        .filter(|r| r.principal == OLD_KEY && r.is_write() && r.time > log[calls_before].time + 5.0)
        .collect();
    assert!(late.is_empty(), "the old operator wrote after the handover: {late:?}");
    drop(bridge);
    Ok(())
}

//! Release upgrades against moto and a simulated workload cluster, with two operator versions
//! running side by side as a platform runs them.
//!
//! An HA cluster (three masters) with two node pools of three nodes and a workload under a
//! disruption budget is created by the operator of its Release. Relabelling it to a Release
//! whose Flatcar has no AMI stops at `AmiNotFound` and rolls nothing. Relabelling it to a
//! Release of the other operator version hands it over: that operator rolls the masters one at
//! a time (each new master's launching hook completed once its node is Ready, each old one
//! drained through the terminating hook), and only once every master node carries the new
//! version do the pools roll, in batches, with the cluster autoscaler's tag off meanwhile. The
//! cluster ends `Updated` with the new version, every instance replaced, and the old operator
//! made no AWS write after the handover (moto's request log, by access key).

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use apis::aws::{AWSCluster, AWSControlPlane, AWSMachineDeployment};
use apis::cluster_status::ClusterCondition;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};
use support::bridge::NodeBridge;
use support::*;
use workload_sim::{Workload, WorkloadCluster};

const ID: &str = "upg01";
const OLD_KEY: &str = "AKIAOLDOPERATOR";
const NEW_KEY: &str = "AKIANEWOPERATOR";
const POOLS: [&str; 2] = ["np001", "np002"];

fn now() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or_default()
}

/// Relabel the cluster's four objects to Release `release`, run by operator `version`.
async fn relabel(f: &Fixture, release: &str, version: &str) -> anyhow::Result<()> {
    f.relabel(ID, "cp001", &POOLS, release, version).await
}

/// The control plane says `Ready=False` with `reason`, and five seconds later the cluster still
/// runs exactly `instances`.
async fn held(
    f: &Fixture,
    bridge: &NodeBridge,
    instances: &BTreeSet<String>,
    reason: &str,
    what: &str,
) -> anyhow::Result<()> {
    let cps: Api<AWSControlPlane> = Api::namespaced(f.client.clone(), NS);
    let found = eventually(120, &format!("{reason} on the control plane"), || async {
        let cp = cps.get("cp001").await?;
        Ok(cp
            .status
            .and_then(|s| s.conditions.into_iter().find(|c| c.type_ == "Ready"))
            .filter(|c| c.status == "False" && c.reason == reason))
    })
    .await;
    if let Err(e) = found {
        anyhow::bail!("{e}\n{}", dump(&f.client).await);
    }
    tokio::time::sleep(Duration::from_secs(5)).await;
    let still: BTreeSet<String> = bridge.seen().iter().map(|s| s.instance.clone()).collect();
    assert_eq!(&still, instances, "{what}");
    Ok(())
}

/// The workload's ready pods.
async fn ready_pods(wc: &WorkloadCluster) -> anyhow::Result<usize> {
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(wc.client(), "web");
    let list = pods.list(&ListParams::default().labels("app=web")).await?;
    Ok(list.items.iter().filter(|p| p.metadata.deletion_timestamp.is_none() && workload_sim::is_ready(p)).count())
}

/// Whether the group of pool `pool` carries the cluster autoscaler's tag.
async fn autoscaler_tagged(tenant: &aws_operator::aws::AccountClients, group: &str) -> anyhow::Result<bool> {
    let out = tenant.autoscaling.describe_auto_scaling_groups().auto_scaling_group_names(group).send().await?;
    Ok(out
        .auto_scaling_groups()
        .first()
        .is_some_and(|g| g.tags().iter().any(|t| t.key() == Some(aws_operator::upgrade::AUTOSCALER_ENABLED_TAG))))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_upgrade_rolls_the_masters_then_the_pools_and_hands_the_cluster_over() -> anyhow::Result<()> {
    // AWS's waits at 2 %: masters pause 2.4 s between them, the launching hook would give up
    // after 20 s, the pools' terminating hook after 72 s.
    let mut f = Fixture::start_with(motoenv::Launcher::from_env().time_scale(0.02)).await?;
    f.apply_basics().await?;
    let next = next_version();
    f.release("20.0.9", "9999.0.0", &next).await?;
    f.release("20.1.0", FLATCAR_NEXT, &next).await?;
    f.drainer_poll = Some(Duration::from_secs(1));

    f.credential_secret(ID).await?;
    f.cluster(ID).await?;
    f.control_plane(ID, "cp001", &["eu-central-1a", "eu-central-1b", "eu-central-1c"], 3).await?;
    f.node_pool(ID, "np001", &["eu-central-1a"], 3, 5).await?;
    f.node_pool(ID, "np002", &["eu-central-1b"], 3, 5).await?;
    // Batches of one, a minute apart (1.2 s here); np002's batch size is not a number, so its
    // default (10 %, one instance) applies and its status says so.
    let mds: Api<AWSMachineDeployment> = Api::namespaced(f.client.clone(), NS);
    for (pool, batch) in [("np001", "1"), ("np002", "one")] {
        let patch = serde_json::json!({"metadata": {"annotations": {
            "alpha.aws.giantswarm.io/update-max-batch-size": batch,
            "alpha.aws.giantswarm.io/update-pause-time": "PT1M",
        }}});
        mds.patch(pool, &PatchParams::default(), &Patch::Merge(&patch)).await?;
    }

    // The workload cluster, its nodes following the instances.
    let wc = Arc::new(WorkloadCluster::start().await?);
    wc.install_kubeconfig(&Api::<Secret>::namespaced(f.client.clone(), NS), NS, ID).await?;
    let tenant = f.tenant_clients().await?;
    let bridge = NodeBridge::start(wc.clone(), tenant.clone(), &f.moto.endpoint(), ID, Duration::from_millis(700));

    // When each instance's node was drained, from the DrainerConfigs as they change.
    let (drained_at, recorder) = record_drained(&f.client);

    let mut old = f.spawn_operator(VERSION, OLD_KEY).await?;
    let new = f.spawn_operator(&next, NEW_KEY).await?;
    let clusters: Api<AWSCluster> = Api::namespaced(f.client.clone(), NS);
    let created = eventually(400, "the cluster to be Ready with nine nodes", || async {
        let c = clusters.get(ID).await?;
        let nodes = bridge.seen().iter().filter(|s| s.lifecycle == "InService").count();
        Ok((ready(c.status.as_ref().map(|s| &s.conditions)) && nodes == 9).then_some(()))
    })
    .await;
    if let Err(e) = created {
        anyhow::bail!("{e}\nbridge: {:?}\n{}", bridge.errors(), dump(&f.client).await);
    }
    let workload = Workload::new("web", "web", 4).max_unavailable(1).node_selector("kubernetes.io/role", "worker");
    wc.deploy(&workload).await?;
    wc.wait_ready("web", "web", 4).await?;

    // The ignored annotation is named on np002; np001's apply.
    let condition = |md: &AWSMachineDeployment| {
        md.status.as_ref().and_then(|s| s.conditions.iter().find(|c| c.type_ == "RollingUpdateSettings").cloned())
    };
    let np002 = condition(&mds.get("np002").await?).expect("np002's RollingUpdateSettings condition");
    assert_eq!((np002.status.as_str(), np002.reason.as_str()), ("False", "InvalidAnnotation"), "{np002:?}");
    assert!(np002.message.contains("alpha.aws.giantswarm.io/update-max-batch-size"), "{np002:?}");
    assert_eq!(condition(&mds.get("np001").await?).map(|c| c.status), Some("True".to_string()));

    // Both pools' groups carry the autoscaler's tag once created.
    let group_of = |pool: &str| aws_stacks::names::stack_name(ID, aws_stacks::names::StackKind::Tcnp, Some(pool));
    let mut groups = Vec::new();
    for pool in POOLS {
        let stack = tenant.cfn.describe(&group_of(pool)).await?.expect("the pool's stack");
        groups.push(stack.outputs.get("AutoScalingGroupName").expect("the group output").clone());
    }
    for group in &groups {
        let tagged = eventually(30, "the autoscaler tag", || async {
            Ok(autoscaler_tagged(&tenant, group).await?.then_some(()))
        });
        tagged.await?;
    }
    let before: Vec<support::bridge::Seen> = bridge.seen();
    let old_instances: BTreeSet<String> = before.iter().map(|s| s.instance.clone()).collect();
    assert_eq!(old_instances.len(), 9);
    assert!(before.iter().all(|s| s.version == VERSION), "{before:?}");

    // A Release whose Flatcar has no AMI here, of the other operator version: the cluster is
    // handed over, the control plane says what is missing, and nothing rolls.
    let handover = now();
    relabel(&f, "20.0.9", &next).await?;
    held(&f, &bridge, &old_instances, "AmiNotFound", "nothing rolled for a Release without an AMI").await?;

    // The real upgrade, while the workload cluster cannot be reached: the masters wait (their
    // drains need it), and the control plane says why.
    wc.set_reachable(false);
    relabel(&f, "20.1.0", &next).await?;
    held(
        &f,
        &bridge,
        &old_instances,
        "WorkloadClusterUnreachable",
        "nothing rolled while the workload cluster was unreachable",
    )
    .await?;
    wc.set_reachable(true);
    let mut waited: BTreeSet<String> = BTreeSet::new();
    let mut left_at: BTreeMap<String, f64> = BTreeMap::new();
    let mut first_pool_replacement: Option<Vec<support::bridge::Seen>> = None;
    let mut samples = 0;
    let mut untagged_while_rolling = true;
    let mut unavailable = 0usize;
    let mut fewest_masters = 3usize;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(600);
    loop {
        let seen = bridge.seen();
        // The first moment a pool instance of the old version stops being in service.
        let pool_moved =
            seen.iter().any(|s| !s.master && old_instances.contains(&s.instance) && s.lifecycle != "InService")
                || before.iter().filter(|s| !s.master).any(|s| !seen.iter().any(|n| n.instance == s.instance));
        // When each old instance stopped waiting on its terminating hook.
        for instance in &old_instances {
            let state = seen.iter().find(|s| &s.instance == instance).map(|s| s.lifecycle.as_str());
            if state == Some("Terminating:Wait") {
                waited.insert(instance.clone());
            } else if waited.contains(instance) {
                left_at.entry(instance.clone()).or_insert_with(now);
            }
        }
        if pool_moved && first_pool_replacement.is_none() {
            first_pool_replacement = Some(seen.clone());
        }
        // While a pool rolls, its group is off the autoscaler's list.
        for (pool, group) in POOLS.iter().zip(&groups) {
            let rolling = seen.iter().any(|s| &s.group == group && s.lifecycle.starts_with("Terminating"));
            if rolling && autoscaler_tagged(&tenant, group).await? {
                eprintln!("pool {pool} rolls with the autoscaler tag on its group");
                untagged_while_rolling = false;
            }
        }
        let ready_pods = ready_pods(&wc).await.unwrap_or(4);
        // Masters one at a time: never more than one of the three out of service.
        fewest_masters = fewest_masters.min(seen.iter().filter(|s| s.master && s.lifecycle == "InService").count());
        if ready_pods < 3 {
            unavailable += 1;
        }
        samples += 1;
        let c = clusters.get(ID).await?;
        let lifecycle = c.status.as_ref().map(|s| s.cluster.clone()).unwrap_or_default();
        let updated = lifecycle.has_condition(ClusterCondition::Updated)
            && lifecycle.versions.iter().any(|v| v.semver == next)
            && ready(c.status.as_ref().map(|s| &s.conditions));
        let all_new = seen.len() == 9
            && seen
                .iter()
                .all(|s| !old_instances.contains(&s.instance) && s.version == next && s.lifecycle == "InService");
        if updated && all_new {
            break;
        }
        if tokio::time::Instant::now() > deadline {
            anyhow::bail!(
                "the upgrade did not finish: {seen:#?}\nbridge: {:?}\n{}",
                bridge.errors(),
                dump(&f.client).await
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    eprintln!("upgrade: {samples} samples, {unavailable} with fewer than 3 ready pods");

    // Masters first: when the first pool instance left service, every master was new.
    let at = first_pool_replacement.expect("the pools rolled");
    let masters: Vec<_> = at.iter().filter(|s| s.master).collect();
    assert!(
        masters.iter().all(|s| !old_instances.contains(&s.instance) && s.version == next),
        "a pool rolled before the masters were done: {at:#?}"
    );
    assert_eq!(fewest_masters, 2, "masters are replaced one at a time (fewest in service at once)");
    assert!(untagged_while_rolling, "the autoscaler tag stayed on a rolling group");
    for group in &groups {
        let tagged = eventually(30, "the autoscaler tag back", || async {
            Ok(autoscaler_tagged(&tenant, group).await?.then_some(()))
        });
        tagged.await?;
    }
    assert_eq!(unavailable, 0, "the workload's budget was broken");
    wc.wait_ready("web", "web", 4).await?;

    // Every replaced instance's node was drained before the instance went on.
    recorder.abort();
    let drained_at = drained_at.lock().clone();
    for instance in &old_instances {
        let drained = drained_at
            .get(instance)
            .with_context(|| format!("instance {instance} was never drained: {drained_at:?}"))?;
        if let Some(left) = left_at.get(instance) {
            assert!(
                drained <= left,
                "instance {instance} left its hook at {left} before its node was drained at {drained}"
            );
        }
    }
    eprintln!("{} of 9 instances seen waiting on their hook, all drained first", left_at.len());

    // The drainers' events.
    let events: Api<Event> = Api::namespaced(f.client.clone(), NS);
    let drained: Vec<Event> = events
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("NodeDrained"))
        .collect();
    let on = |name: &str| drained.iter().any(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name));
    assert!(on("cp001") && on("np001") && on("np002"), "NodeDrained events: {drained:?}");
    let cluster = clusters.get(ID).await?;
    let names: Vec<String> = cluster
        .status
        .as_ref()
        .map(|s| s.cluster.versions.iter().map(|v| v.semver.clone()).collect())
        .unwrap_or_default();
    assert!(names.contains(&VERSION.to_string()) && names.contains(&next), "{names:?}");

    // The two operators never both wrote: the old one made no write after the handover (the
    // reconcile under way then may finish: 5 s), the new one none before it.
    let log = f.moto.request_log()?;
    let late: Vec<_> =
        log.iter().filter(|r| r.principal == OLD_KEY && r.is_write() && r.time > handover + 5.0).collect();
    assert!(late.is_empty(), "the old operator wrote after the handover: {late:?}");
    let early: Vec<_> = log.iter().filter(|r| r.principal == NEW_KEY && r.is_write() && r.time < handover).collect();
    assert!(early.is_empty(), "the new operator wrote before the handover: {early:?}");
    assert!(log.iter().any(|r| r.principal == OLD_KEY && r.is_write()), "the old operator created the cluster");
    old.kill();
    drop(new);
    drop(bridge);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_killed_five_times_during_an_upgrade_converges() -> anyhow::Result<()> {
    let mut f = Fixture::start_with(motoenv::Launcher::from_env().time_scale(0.02)).await?;
    f.apply_basics().await?;
    let next = next_version();
    f.release("20.1.0", FLATCAR_NEXT, &next).await?;
    f.drainer_poll = Some(Duration::from_secs(1));
    f.credential_secret(ID).await?;
    f.cluster(ID).await?;
    f.control_plane(ID, "cp001", &["eu-central-1a", "eu-central-1b", "eu-central-1c"], 3).await?;
    for pool in POOLS {
        f.node_pool(ID, pool, &["eu-central-1a"], 2, 3).await?;
        let patch =
            serde_json::json!({"metadata": {"annotations": {"alpha.aws.giantswarm.io/update-pause-time": "PT1M"}}});
        Api::<AWSMachineDeployment>::namespaced(f.client.clone(), NS)
            .patch(pool, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
    }
    let wc = Arc::new(WorkloadCluster::start().await?);
    wc.install_kubeconfig(&Api::<Secret>::namespaced(f.client.clone(), NS), NS, ID).await?;
    let tenant = f.tenant_clients().await?;
    let bridge = NodeBridge::start(wc.clone(), tenant.clone(), &f.moto.endpoint(), ID, Duration::from_millis(700));
    let _old = f.spawn_operator(VERSION, OLD_KEY).await?;
    let clusters: Api<AWSCluster> = Api::namespaced(f.client.clone(), NS);
    let created = eventually(400, "the cluster to be Ready with seven nodes", || async {
        let c = clusters.get(ID).await?;
        let nodes = bridge.seen().iter().filter(|s| s.lifecycle == "InService").count();
        Ok((ready(c.status.as_ref().map(|s| &s.conditions)) && nodes == 7).then_some(()))
    })
    .await;
    if let Err(e) = created {
        anyhow::bail!("{e}\nbridge: {:?}\n{}", bridge.errors(), dump(&f.client).await);
    }
    let old_instances: BTreeSet<String> = bridge.seen().iter().map(|s| s.instance.clone()).collect();

    // The new operator dies five times while it rolls the cluster, at different stages.
    relabel(&f, "20.1.0", &next).await?;
    for round in 0..5 {
        let mut new = f.spawn_operator(&next, NEW_KEY).await?;
        tokio::time::sleep(Duration::from_millis(2500 + 1300 * round)).await;
        new.kill();
        let waiting = bridge.seen().iter().filter(|s| s.lifecycle.starts_with("Terminating")).count();
        eprintln!("killed the operator (round {round}); {waiting} instances terminating");
    }
    let _new = f.spawn_operator(&next, NEW_KEY).await?;
    updated_with_every_instance_replaced(&f, &bridge, ID, &old_instances, 7, &next, 600).await?;
    // Nothing is left waiting on a hook, and no DrainerConfig is left.
    nothing_left_terminating(&f, &tenant).await?;
    Ok(())
}

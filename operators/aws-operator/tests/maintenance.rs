//! Maintenance windows against moto and testenv, with the operator's clock moved by the test.
//!
//! A cluster with one master and two one-node pools is created (creation never waits). Its
//! AWSCluster then gets a weekly window, the operator's clock is set outside it, and one pool's
//! instance type changes, which replaces its instances: the pool says
//! `Ready=False WaitingForMaintenanceWindow` with the next window's start, gets a Normal event,
//! and its stack stays as it was; a scaling-only change of the other pool applies at once, and so
//! does the security-group rule it gets for a third pool added meanwhile (no instance is
//! replaced for it). Moving
//! the clock into the window rolls the pool. Settings the operator cannot read (an unknown time
//! zone, a max age under a day) are named in a `MaintenanceSettings` condition with a Warning
//! event, and nothing rolls.

mod support;

/// The chart's release namespace, where its Leases are.
const LEASE_NAMESPACE: &str = "giantswarm";

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use apis::aws::{AWSCluster, AWSMachineDeployment};
use aws_stacks::names::{StackKind, stack_name};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};
use support::bridge::{NodeBridge, Seen};
use support::*;
use workload_sim::WorkloadCluster;

/// The condition `type_` of pool `pool`.
async fn pool_condition(f: &Fixture, pool: &str, type_: &str) -> anyhow::Result<Option<Condition>> {
    let md = Api::<AWSMachineDeployment>::namespaced(f.client.clone(), NS).get(pool).await?;
    Ok(md.status.and_then(|s| s.conditions.into_iter().find(|c| c.type_ == type_)))
}

/// The events about `name` with `reason`.
async fn events(f: &Fixture, name: &str, reason: &str) -> anyhow::Result<Vec<Event>> {
    Ok(events_about(&f.client, name).await?.into_iter().filter(|e| e.reason.as_deref() == Some(reason)).collect())
}

async fn merge<K>(f: &Fixture, name: &str, patch: serde_json::Value) -> anyhow::Result<()>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    Api::<K>::namespaced(f.client.clone(), NS).patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await?;
    Ok(())
}

/// A cluster `id` with one master and pools np001 and np002 of one node each, Ready.
async fn ready_cluster(f: &mut Fixture, id: &str) -> anyhow::Result<()> {
    f.apply_basics().await?;
    add_cluster(f, id, &["np001", "np002"], 1).await?;
    f.start_operator().await?;
    wait_ready(f, &[id]).await
}

/// Cluster `id` with one master and `pools` of `size` nodes each.
async fn add_cluster(f: &Fixture, id: &str, pools: &[&str], size: i32) -> anyhow::Result<()> {
    f.credential_secret(id).await?;
    f.cluster(id).await?;
    f.control_plane(id, &format!("cp-{id}"), &["eu-central-1a"], 1).await?;
    for pool in pools {
        f.node_pool(id, pool, &["eu-central-1a"], size, size).await?;
    }
    Ok(())
}

/// Wait until clusters `ids` and every node pool are Ready.
async fn wait_ready(f: &Fixture, ids: &[&str]) -> anyhow::Result<()> {
    let clusters: Api<AWSCluster> = Api::namespaced(f.client.clone(), NS);
    let mds: Api<AWSMachineDeployment> = Api::namespaced(f.client.clone(), NS);
    let created = eventually(240, "the clusters and their pools to be Ready", || async {
        let mut all = true;
        for id in ids {
            all &= ready(clusters.get(id).await?.status.as_ref().map(|s| &s.conditions));
        }
        let pools = mds.list(&ListParams::default()).await?;
        all &= pools.items.iter().all(|p| ready(p.status.as_ref().map(|s| &s.conditions)));
        Ok(all.then_some(()))
    })
    .await;
    if let Err(e) = created {
        anyhow::bail!("{e}\n{}", dump(&f.client).await);
    }
    Ok(())
}

/// The pool's TCNP template hash and status.
async fn tcnp(f: &Fixture, id: &str, pool: &str) -> anyhow::Result<(Option<String>, String)> {
    let tenant = f.tenant_clients().await?;
    let view = tenant.cfn.describe(&stack_name(id, StackKind::Tcnp, Some(pool))).await?.expect("the pool's stack");
    Ok((view.template_hash().map(str::to_string), view.status.as_str().to_string()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_outside_its_window_waits_then_rolls_when_the_window_opens() -> anyhow::Result<()> {
    let mut f = Fixture::start_with(motoenv::Launcher::from_env().time_scale(0.02)).await?;
    let id = "mw001";
    ready_cluster(&mut f, id).await?;
    let clock = f.shared.clone().expect("the operator runs").clock.clone();

    // Mondays 02:00 in Berlin for 4 hours; the operator's clock on a Wednesday.
    clock.set("2026-12-02T12:00:00Z".parse()?);
    let window = serde_json::json!({"timeZone": "Europe/Berlin", "windows": [{"days": ["Mon"], "start": "02:00", "duration": "4h"}]});
    merge::<AWSCluster>(&f, id, serde_json::json!({"spec": {"cluster": {"maintenance": window}}})).await?;
    let before = tcnp(&f, id, "np001").await?;
    let hash_before = before.0.clone();

    // A new instance type replaces np001's instance: it waits, and says until when.
    merge::<AWSMachineDeployment>(
        &f,
        "np001",
        serde_json::json!({"spec": {"provider": {"worker": {"instanceType": "m5.xlarge"}}}}),
    )
    .await?;
    let waiting = eventually(60, "np001 waiting for the window", || async {
        Ok(pool_condition(&f, "np001", "Ready").await?.filter(|c| c.reason == "WaitingForMaintenanceWindow"))
    })
    .await;
    let waiting = match waiting {
        Ok(c) => c,
        Err(e) => anyhow::bail!("{e}\n{}", dump(&f.client).await),
    };
    assert_eq!(waiting.status, "False");
    assert_eq!(
        waiting.message,
        "the rolling update of node pool np001 waits for the next maintenance window, which opens at 2026-12-07T01:00:00Z (Mon 02:00 CET) and closes at 2026-12-07T05:00:00Z"
    );
    let settings = pool_condition(&f, "np001", "MaintenanceSettings").await?.expect("the settings condition");
    assert_eq!((settings.status.as_str(), settings.reason.as_str()), ("True", "Valid"));
    assert_eq!(events(&f, "np001", "WaitingForMaintenanceWindow").await?.len(), 1, "one Normal event");

    // Scaling never waits: np002's maximum moves while the window is closed.
    merge::<AWSMachineDeployment>(&f, "np002", serde_json::json!({"spec": {"nodePool": {"scaling": {"max": 2}}}}))
        .await?;
    let tenant = f.tenant_clients().await?;
    let np002_group = tenant
        .cfn
        .describe(&stack_name(id, StackKind::Tcnp, Some("np002")))
        .await?
        .and_then(|v| v.outputs.get("AutoScalingGroupName").cloned())
        .expect("np002's group");
    eventually(60, "np002's group to allow two instances", || async {
        let out =
            tenant.autoscaling.describe_auto_scaling_groups().auto_scaling_group_names(&np002_group).send().await?;
        Ok(out.auto_scaling_groups().first().and_then(|g| g.max_size()).filter(|m| *m == 2).map(|_| ()))
    })
    .await?;
    // A new pool never waits, and the rule the other pools get for its security group replaces
    // no instance: np002 takes it at once (seen through EC2), its instance stays; np001, whose
    // update rolls, still waits.
    let group_instances = |group: String| {
        let tenant = tenant.clone();
        async move {
            let out = tenant.autoscaling.describe_auto_scaling_groups().auto_scaling_group_names(group).send().await?;
            let mut ids: Vec<String> = out
                .auto_scaling_groups()
                .iter()
                .flat_map(|g| g.instances())
                .filter_map(|i| i.instance_id().map(str::to_string))
                .collect();
            ids.sort();
            Ok::<_, anyhow::Error>(ids)
        }
    };
    let np002_instances = group_instances(np002_group.clone()).await?;
    f.node_pool(id, "np003", &["eu-central-1a"], 1, 1).await?;
    let output = |pool: &'static str| {
        let tenant = tenant.clone();
        async move {
            let view = tenant.cfn.describe(&stack_name(id, StackKind::Tcnp, Some(pool))).await?;
            Ok::<_, anyhow::Error>(view.and_then(|v| v.outputs.get("SecurityGroupID").cloned()))
        }
    };
    let np002_sg = output("np002").await?.expect("np002's security group");
    let peered = eventually(90, "np002's security group to admit np003's", || async {
        let Some(np003_sg) = output("np003").await? else { return Ok(None) };
        let out = tenant.ec2.describe_security_groups().group_ids(&np002_sg).send().await?;
        let admits = out
            .security_groups()
            .iter()
            .flat_map(|g| g.ip_permissions())
            .flat_map(|p| p.user_id_group_pairs())
            .any(|pair| pair.group_id() == Some(np003_sg.as_str()));
        Ok(admits.then_some(()))
    })
    .await;
    if let Err(e) = peered {
        anyhow::bail!("{e}\n{}", dump(&f.client).await);
    }
    assert_eq!(group_instances(np002_group.clone()).await?, np002_instances, "np002's instance was not replaced");
    assert!(events(&f, "np002", "WaitingForMaintenanceWindow").await?.is_empty(), "np002 never waited");
    // Meanwhile np001's stack was not touched.
    assert_eq!(tcnp(&f, id, "np001").await?, before);

    // The window opens: np001 rolls.
    clock.set("2026-12-07T01:00:30Z".parse()?);
    let rolled = eventually(60, "np001's stack to update", || async {
        let (hash, status) = tcnp(&f, id, "np001").await?;
        Ok((hash != hash_before || status == "UPDATE_IN_PROGRESS").then_some(status))
    })
    .await;
    if let Err(e) = rolled {
        anyhow::bail!("{e}\n{}", dump(&f.client).await);
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreadable_maintenance_settings_are_named_and_nothing_rolls() -> anyhow::Result<()> {
    let mut f = Fixture::start_with(motoenv::Launcher::from_env().time_scale(0.02)).await?;
    let id = "mw002";
    ready_cluster(&mut f, id).await?;
    let bad = serde_json::json!({"timeZone": "Europe/Berlln", "windows": [{"days": ["Mon"], "start": "02:00", "duration": "4h"}]});
    merge::<AWSCluster>(&f, id, serde_json::json!({"spec": {"cluster": {"maintenance": bad}}})).await?;
    let before = tcnp(&f, id, "np001").await?;
    let hash_before = before.0.clone();
    merge::<AWSMachineDeployment>(
        &f,
        "np001",
        serde_json::json!({"spec": {"nodePool": {"maxNodeAge": "12h"}, "provider": {"worker": {"instanceType": "m5.xlarge"}}}}),
    )
    .await?;
    let named = eventually(60, "np001's MaintenanceSettings=False", || async {
        Ok(pool_condition(&f, "np001", "MaintenanceSettings").await?.filter(|c| c.status == "False"))
    })
    .await;
    let named = match named {
        Ok(c) => c,
        Err(e) => anyhow::bail!("{e}\n{}", dump(&f.client).await),
    };
    assert_eq!(named.reason, "InvalidMaintenance");
    assert!(
        named.message.contains(
            "spec.cluster.maintenance.timeZone: \"Europe/Berlln\" is not a known IANA time zone; use a name such as \"Europe/Berlin\""
        ),
        "{}",
        named.message
    );
    assert!(
        named
            .message
            .contains("spec.nodePool.maxNodeAge: \"12h\" is below the minimum of one day; set it to \"1d\" or more"),
        "{}",
        named.message
    );
    let ready = eventually(30, "np001 Ready=False InvalidMaintenance", || async {
        Ok(pool_condition(&f, "np001", "Ready").await?.filter(|c| c.reason == "InvalidMaintenance"))
    })
    .await?;
    assert_eq!(ready.status, "False");
    assert!(!events(&f, "np001", "InvalidMaintenance").await?.is_empty(), "a Warning event");
    // Nothing rolls while the settings are wrong, and the process did not fail.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(tcnp(&f, id, "np001").await?, before);
    assert!(hash_before.is_some());
    assert!(f.operator_alive());
    Ok(())
}

/// A simulated workload cluster for cluster `id`, whose nodes follow its instances, so that the
/// drains of a roll complete.
async fn workload_cluster(f: &Fixture, id: &str) -> anyhow::Result<(Arc<WorkloadCluster>, NodeBridge)> {
    let wc = Arc::new(WorkloadCluster::start().await?);
    wc.install_kubeconfig(&Api::<Secret>::namespaced(f.client.clone(), NS), NS, id).await?;
    let tenant = f.tenant_clients().await?;
    let bridge = NodeBridge::start(wc.clone(), tenant, &f.moto.endpoint(), id, Duration::from_millis(300));
    Ok((wc, bridge))
}

/// Cluster `id` with pools of one node each, batches a minute apart (1.2 s here), and its
/// workload cluster.
async fn rolling_cluster(f: &Fixture, id: &str, pools: &[&str]) -> anyhow::Result<(Arc<WorkloadCluster>, NodeBridge)> {
    add_cluster(f, id, pools, 1).await?;
    merge::<AWSCluster>(
        f,
        id,
        serde_json::json!({"metadata": {"annotations": {"alpha.aws.giantswarm.io/update-pause-time": "PT1M"}}}),
    )
    .await?;
    workload_cluster(f, id).await
}

/// Change the instance type of `pools` (`(cluster, pool)`, pool names unique), then watch them
/// until each one's stack was updated and its instance replaced: the most pools rolling at
/// once (their stack updating, or an instance of their group not `InService`, as the bridges
/// see Auto Scaling), and the `Ready` messages of pools that waited for a rollout slot.
async fn roll_and_watch(
    f: &Fixture,
    bridges: &[&NodeBridge],
    pools: &[(&str, &str)],
) -> anyhow::Result<(usize, Vec<String>)> {
    let tenant = f.tenant_clients().await?;
    let mut before = Vec::new();
    let mut groups = Vec::new();
    for (id, pool) in pools {
        before.push(tcnp(f, id, pool).await?.0);
        let view = tenant.cfn.describe(&stack_name(id, StackKind::Tcnp, Some(pool))).await?.expect("the pool's stack");
        groups.push(view.outputs.get("AutoScalingGroupName").cloned().expect("the pool's group"));
    }
    let old: BTreeSet<String> = bridges.iter().flat_map(|b| b.seen()).map(|s| s.instance).collect();
    for (_, pool) in pools {
        merge::<AWSMachineDeployment>(
            f,
            pool,
            serde_json::json!({"spec": {"provider": {"worker": {"instanceType": "m5.xlarge"}}}}),
        )
        .await?;
    }
    let (mut most, mut waited) = (0, Vec::new());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        let seen: Vec<Seen> = bridges.iter().flat_map(|b| b.seen()).collect();
        let (mut rolling, mut done) = (0, 0);
        for (i, (id, pool)) in pools.iter().enumerate() {
            let (hash, status) = tcnp(f, id, pool).await?;
            let members: Vec<&Seen> = seen.iter().filter(|s| s.group == groups[i]).collect();
            let unsettled = members.iter().any(|s| s.lifecycle != "InService");
            if status.contains("IN_PROGRESS") || unsettled {
                rolling += 1;
            } else if hash != before[i] && members.len() == 1 && members.iter().all(|s| !old.contains(&s.instance)) {
                done += 1;
            }
            if let Some(c) = pool_condition(f, pool, "Ready").await?.filter(|c| c.reason == "WaitingForRolloutSlot")
                && !waited.contains(&c.message)
            {
                waited.push(c.message);
            }
        }
        most = most.max(rolling);
        if done == pools.len() {
            return Ok((most, waited));
        }
        if tokio::time::Instant::now() > deadline {
            let errors: Vec<String> = bridges.iter().flat_map(|b| b.errors()).collect();
            anyhow::bail!(
                "not every pool rolled (most at once: {most}, waited: {waited:?})\nbridge: {errors:?}\n{}",
                dump(&f.client).await
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_more_pools_roll_at_once_than_max_rolling_node_pools() -> anyhow::Result<()> {
    let mut f = Fixture::start_with(motoenv::Launcher::from_env().time_scale(0.02)).await?;
    f.drainer_poll = Some(Duration::from_secs(1));
    f.apply_basics().await?;
    let id = "mw003";
    let (_wc, bridge) = rolling_cluster(&f, id, &["np001", "np002"]).await?;
    f.start_operator().await?;
    wait_ready(&f, &[id]).await?;
    merge::<AWSCluster>(&f, id, serde_json::json!({"spec": {"cluster": {"maintenance": {"maxRollingNodePools": 1}}}}))
        .await?;
    let (most, waited) = roll_and_watch(&f, &[&bridge], &[(id, "np001"), (id, "np002")]).await?;
    assert_eq!(most, 1, "at most one pool rolling at once");
    assert!(
        waited.iter().any(|m| m.contains(
            "at most 1 node pools of cluster mw003 roll at once (spec.cluster.maintenance.maxRollingNodePools)"
        )),
        "{waited:?}"
    );
    // Every slot was given back.
    let leases = Api::<Lease>::namespaced(f.client.clone(), "giantswarm");
    let freed = eventually(30, "the pool slots to be freed", || async {
        let l = leases.list(&ListParams::default().labels("node-lifecycle.giantswarm.io/rollout-scope")).await?;
        Ok(l.items.is_empty().then_some(()))
    });
    freed.await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_more_clusters_roll_at_once_than_max_rolling_clusters() -> anyhow::Result<()> {
    // As the chart's ServiceAccount: the chart grants what the rollout slots do.
    let mut f = Fixture::start_as_chart(motoenv::Launcher::from_env().time_scale(0.02)).await?;
    let (env, user) = (f.env.handle().clone(), f.service_account.clone().expect("the chart's identity").user);
    packaging::rbac::without_refusals(&env, &user, two_clusters_one_slot(&mut f)).await?;
    Ok(())
}

async fn two_clusters_one_slot(f: &mut Fixture) -> anyhow::Result<()> {
    f.drainer_poll = Some(Duration::from_secs(1));
    f.max_rolling_clusters = 1;
    f.apply_basics().await?;
    let (_wc4, bridge4) = rolling_cluster(f, "mw004", &["np004"]).await?;
    let (_wc5, bridge5) = rolling_cluster(f, "mw005", &["np005"]).await?;
    f.start_operator().await?;
    wait_ready(f, &["mw004", "mw005"]).await?;
    let (most, waited) = roll_and_watch(f, &[&bridge4, &bridge5], &[("mw004", "np004"), ("mw005", "np005")]).await?;
    assert_eq!(most, 1, "at most one cluster rolling at once");
    assert!(
        waited.iter().any(|m| m.contains("at most 1 clusters roll at once (--max-rolling-clusters)")),
        "{waited:?}"
    );
    Ok(())
}

/// Two replicas sharing the clusters (`--sharding`), each owning one of two clusters, and
/// `--max-rolling-clusters=1`: they reconcile at the same time, yet never roll both clusters at
/// once, because the slot is a Lease both see.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sharded_replicas_together_respect_max_rolling_clusters() -> anyhow::Result<()> {
    let mut f = Fixture::start_secure_with(motoenv::Launcher::from_env().time_scale(0.02)).await?;
    f.apply_basics().await?;
    f.as_chart_service_account(&packaging::helm_template("aws-operator", &["ci/sharding-values.yaml"], &[])?).await?;
    let (env, user) = (f.env.handle().clone(), f.service_account.clone().expect("the chart's identity").user);
    packaging::rbac::without_refusals(&env, &user, two_shards_one_slot(&mut f)).await?;
    Ok(())
}

async fn two_shards_one_slot(f: &mut Fixture) -> anyhow::Result<()> {
    f.drainer_poll = Some(Duration::from_secs(1));
    f.max_rolling_clusters = 1;
    f.sharded = true;
    // Two clusters that the ring of the two replicas puts on different shards.
    let ring =
        operatorkit::sharding::Ring::new(["akiashardx", "akiashardy"], operatorkit::sharding::DEFAULT_VIRTUAL_NODES);
    let first = "mw007";
    let second = (8..100)
        .map(|i| format!("mw{i:03}"))
        .find(|id| ring.shard_for(id) != ring.shard_for(first))
        .expect("a cluster on the other shard");
    let (_wc1, bridge1) = rolling_cluster(f, first, &["np007"]).await?;
    let (_wc2, bridge2) = rolling_cluster(f, &second, &["np008"]).await?;
    let _x = f.spawn_operator(VERSION, "AKIASHARDX").await?;
    let _y = f.spawn_operator(VERSION, "AKIASHARDY").await?;
    wait_ready(f, &[first, &second]).await?;
    // Each replica owns one of them.
    let label = operatorkit::sharding::ShardingConfig::new(LEASE_NAMESPACE, aws_operator::daemon::lease_name(VERSION))
        .shard_label();
    let clusters: Api<AWSCluster> = Api::namespaced(f.client.clone(), NS);
    let mut owners = BTreeSet::new();
    for id in [first, second.as_str()] {
        owners.insert(
            clusters.get(id).await?.metadata.labels.unwrap_or_default().get(&label).cloned().unwrap_or_default(),
        );
    }
    assert_eq!(owners, BTreeSet::from(["akiashardx".to_string(), "akiashardy".to_string()]), "one cluster each");

    let (most, waited) = roll_and_watch(f, &[&bridge1, &bridge2], &[(first, "np007"), (&second, "np008")]).await?;
    assert_eq!(most, 1, "at most one cluster rolling at once across both replicas");
    assert!(
        waited.iter().any(|m| m.contains("at most 1 clusters roll at once (--max-rolling-clusters)")),
        "{waited:?}"
    );
    // Both replicas wrote to AWS: each rolled its own cluster.
    let log = f.moto.request_log()?;
    for key in ["AKIASHARDX", "AKIASHARDY"] {
        assert!(log.iter().any(|r| r.principal == key && r.is_write()), "{key} wrote nothing");
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_past_max_age_are_replaced_drained_one_at_a_time() -> anyhow::Result<()> {
    let mut f = Fixture::start_with(motoenv::Launcher::from_env().time_scale(0.02)).await?;
    f.drainer_poll = Some(Duration::from_secs(1));
    f.apply_basics().await?;
    let id = "mw006";
    add_cluster(&f, id, &["np006"], 2).await?;
    let (_wc, bridge) = workload_cluster(&f, id).await?;
    let (drained, recorder) = record_drained(&f.client);
    f.start_operator().await?;
    wait_ready(&f, &[id]).await?;
    let shared = f.shared.clone().expect("the operator runs");
    let tenant = f.tenant_clients().await?;
    let group = tenant
        .cfn
        .describe(&stack_name(id, StackKind::Tcnp, Some("np006")))
        .await?
        .and_then(|v| v.outputs.get("AutoScalingGroupName").cloned())
        .expect("the pool's group");
    let old = eventually(30, "two instances in service", || async {
        let seen: Vec<Seen> = bridge.seen().into_iter().filter(|s| s.group == group).collect();
        Ok((seen.len() == 2 && seen.iter().all(|s| s.lifecycle == "InService"))
            .then(|| seen.into_iter().map(|s| s.instance).collect::<BTreeSet<String>>()))
    })
    .await?;

    // A max age of a day, and the operator's clock a day minus 60 s ahead: the instances, at
    // least 61 s old, are past it; their replacements come due only 60 s after they launch,
    // which leaves both replacements a minute to finish before a new instance could be due.
    let newest = {
        let out = tenant.ec2.describe_instances().set_instance_ids(Some(old.iter().cloned().collect())).send().await?;
        out.reservations()
            .iter()
            .flat_map(|r| r.instances())
            .filter_map(|i| i.launch_time().map(|t| t.secs()))
            .max()
            .expect("launch times")
    };
    let now = || std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64);
    let wait = (newest + 61 - now()?).max(0) as u64;
    tokio::time::sleep(Duration::from_secs(wait)).await;
    shared.clock.advance(Duration::from_secs(86_400 - 60));
    merge::<AWSMachineDeployment>(&f, "np006", serde_json::json!({"spec": {"nodePool": {"maxNodeAge": "1d"}}})).await?;

    let (mut most, deadline) = (0, tokio::time::Instant::now() + Duration::from_secs(60));
    loop {
        let seen: Vec<Seen> = bridge.seen().into_iter().filter(|s| s.group == group).collect();
        let leaving = seen.iter().filter(|s| old.contains(&s.instance) && s.lifecycle != "InService").count();
        most = most.max(leaving);
        let replaced = seen.len() == 2 && seen.iter().all(|s| !old.contains(&s.instance) && s.lifecycle == "InService");
        if replaced {
            break;
        }
        if tokio::time::Instant::now() > deadline {
            anyhow::bail!("the old instances were not replaced: {seen:?}\n{}", dump(&f.client).await);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    recorder.abort();
    assert_eq!(most, 1, "one instance at a time");
    let drained: BTreeSet<String> = drained.lock().keys().cloned().collect();
    assert!(old.is_subset(&drained), "each old instance drained first: {old:?} {drained:?}");
    assert_eq!(shared.max_age_replacements.get(), 2, "each old instance counted once");
    // One event per replacement (the recorder folds repeats into a series).
    let announced: i32 =
        events(&f, "np006", "MaxAgeReplacement").await?.iter().map(|e| e.series.as_ref().map_or(1, |s| s.count)).sum();
    assert_eq!(announced, 2);
    // The group kept its size.
    let capacity = aws_operator::aws::ec2::asg_capacity(&tenant, &group).await?.expect("the group");
    assert_eq!(capacity.0, 2);
    Ok(())
}

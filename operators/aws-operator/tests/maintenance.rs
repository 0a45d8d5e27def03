//! Maintenance windows against moto and testenv, with the operator's clock moved by the test.
//!
//! A cluster with one master and two one-node pools is created (creation never waits). Its
//! AWSCluster then gets a weekly window, the operator's clock is set outside it, and one pool's
//! instance type changes, which replaces its instances: the pool says
//! `Ready=False WaitingForMaintenanceWindow` with the next window's start, gets a Normal event,
//! and its stack stays as it was; a scaling-only change of the other pool applies at once. Moving
//! the clock into the window rolls the pool. Settings the operator cannot read (an unknown time
//! zone, a max age under a day) are named in a `MaintenanceSettings` condition with a Warning
//! event, and nothing rolls.

mod support;

use std::time::Duration;

use apis::aws::{AWSCluster, AWSMachineDeployment};
use aws_stacks::names::{StackKind, stack_name};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};
use support::*;

/// The condition `type_` of pool `pool`.
async fn pool_condition(f: &Fixture, pool: &str, type_: &str) -> anyhow::Result<Option<Condition>> {
    let md = Api::<AWSMachineDeployment>::namespaced(f.client.clone(), NS).get(pool).await?;
    Ok(md.status.and_then(|s| s.conditions.into_iter().find(|c| c.type_ == type_)))
}

/// The events about `name` with `reason`.
async fn events(f: &Fixture, name: &str, reason: &str) -> anyhow::Result<Vec<Event>> {
    Ok(Api::<Event>::namespaced(f.client.clone(), NS)
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|e| {
            e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name) && e.reason.as_deref() == Some(reason)
        })
        .collect())
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
    f.credential_secret(id).await?;
    f.certificates(id).await?;
    f.cluster(id).await?;
    f.control_plane(id, "cp001", &["eu-central-1a"], 1).await?;
    f.node_pool(id, "np001", &["eu-central-1a"], 1, 1).await?;
    f.node_pool(id, "np002", &["eu-central-1a"], 1, 1).await?;
    f.start_operator().await?;
    let clusters: Api<AWSCluster> = Api::namespaced(f.client.clone(), NS);
    let mds: Api<AWSMachineDeployment> = Api::namespaced(f.client.clone(), NS);
    let created = eventually(240, "the cluster and both pools to be Ready", || async {
        let c = clusters.get(id).await?;
        let pools = mds.list(&ListParams::default()).await?;
        let all = ready(c.status.as_ref().map(|s| &s.conditions))
            && pools.items.len() == 2
            && pools.items.iter().all(|p| ready(p.status.as_ref().map(|s| &s.conditions)));
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

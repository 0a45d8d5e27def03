//! What a user watching a cluster sees, against testenv and moto: the status while the cluster
//! is created (not only once it is done), one event per stack transition and per stack, the
//! Giant Swarm lifecycle on an update that is not a version change, and an error that persists
//! (a missing AMI) in `Ready`.

mod support;

use std::collections::BTreeMap;

use apis::aws::{AWSCluster, AWSControlPlane, AWSMachineDeployment};
use apis::cluster_status::ClusterCondition;
use apis::release::Release;
use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use support::*;

/// The events of the namespace about `name`.
async fn events_of(client: &kube::Client, name: &str) -> anyhow::Result<Vec<Event>> {
    let events: Api<Event> = Api::namespaced(client.clone(), NS);
    Ok(events
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .collect())
}

fn describe(events: &[Event]) -> String {
    events
        .iter()
        .map(|e| {
            format!(
                "{:?} {:?} related={:?} count={:?}: {:?}",
                e.type_,
                e.reason,
                e.related.as_ref().and_then(|r| r.name.clone()),
                e.series.as_ref().map(|s| s.count),
                e.note
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_status_shows_progress_and_every_transition_is_one_event() -> anyhow::Result<()> {
    let mut f = Fixture::start().await?;
    f.apply_basics().await?;
    let id = "st001";
    f.credential_secret(id).await?;
    // The cluster alone: it creates TCCPI and then waits for a control plane naming its zones.
    f.cluster(id).await?;
    f.start_operator().await?;
    let clusters: Api<AWSCluster> = Api::namespaced(f.client.clone(), NS);
    let tccpi = format!("cluster-{id}-tccpi");
    let waiting = eventually(90, "the waiting cluster's status", || async {
        let c = clusters.get(id).await?;
        let Some(status) = c.status.clone() else { return Ok(None) };
        let shows =
            status.conditions.iter().any(|c| {
                c.type_ == "Ready" && c.status == "False" && c.message.contains("waiting for an AWSControlPlane")
            }) && status.stacks.iter().any(|s| s.name == tccpi && s.status == "CREATE_COMPLETE");
        Ok(shows.then_some(status))
    })
    .await;
    let waiting = match waiting {
        Ok(s) => s,
        Err(e) => anyhow::bail!("{e}\n{}", dump(&f.client).await),
    };
    assert!(waiting.cluster.has_condition(ClusterCondition::Creating), "{:?}", waiting.cluster);
    assert_eq!(waiting.provider.network.cidr.as_deref().map(|c| c.ends_with("/24")), Some(true));
    let condition = waiting.conditions.iter().find(|c| c.type_ == "Ready").expect("Ready");
    assert_eq!(condition.reason, "StacksCreating", "{condition:?}");

    // The rest of the cluster.
    f.control_plane(id, "cp001", &["eu-central-1a"], 1).await?;
    f.node_pool(id, "np001", &["eu-central-1a"], 1, 2).await?;
    let cluster = eventually(180, "the cluster to be Ready", || async {
        let c = clusters.get(id).await?;
        Ok(ready(c.status.as_ref().map(|s| &s.conditions)).then_some(c))
    })
    .await;
    let cluster = match cluster {
        Ok(c) => c,
        Err(e) => anyhow::bail!("{e}\n{}", dump(&f.client).await),
    };
    let lifecycle = cluster.status.clone().unwrap_or_default().cluster;
    assert!(lifecycle.has_condition(ClusterCondition::Created), "{lifecycle:?}");
    // Polling on for a while changes nothing: no event repeats.
    tokio::time::sleep(std::time::Duration::from_secs(5)).await;

    // One event per stack and step: every stack of the cluster has its own create request, and
    // no stack event was published twice.
    let cluster_events = events_of(&f.client, id).await?;
    for kind in ["tccpi", "tccp", "tccpf"] {
        let stack = format!("cluster-{id}-{kind}");
        let requested: Vec<&Event> = cluster_events
            .iter()
            .filter(|e| {
                e.reason.as_deref() == Some("CFCreateRequested")
                    && e.related.as_ref().and_then(|r| r.name.as_deref()) == Some(stack.as_str())
            })
            .collect();
        assert_eq!(requested.len(), 1, "{stack}:\n{}", describe(&cluster_events));
        assert!(requested[0].note.as_deref().is_some_and(|n| n.contains(&stack)), "{}", describe(&cluster_events));
    }
    for name in [id, "cp001", "np001"] {
        let events = events_of(&f.client, name).await?;
        let repeated: Vec<Event> = events
            .iter()
            .filter(|e| e.reason.as_deref().is_some_and(|r| r.starts_with("CF")))
            .filter(|e| e.series.as_ref().is_some_and(|s| s.count > 1))
            .cloned()
            .collect();
        assert!(repeated.is_empty(), "{name}: stack events repeated:\n{}", describe(&repeated));
        let completed = events.iter().filter(|e| e.reason.as_deref() == Some("CFCompleted")).count();
        assert!(completed >= 1, "{name}: no completion event:\n{}", describe(&events));
    }

    // A change that is not a version change updates one stack: Updating, then Updated.
    let mds: Api<AWSMachineDeployment> = Api::namespaced(f.client.clone(), NS);
    mds.patch(
        "np001",
        &PatchParams::default(),
        &Patch::Merge(&serde_json::json!({"spec": {"nodePool": {"scaling": {"max": 3}}}})),
    )
    .await?;
    let updated = eventually(120, "the cluster to be Updated", || async {
        let c = clusters.get(id).await?;
        let status = c.status.clone().unwrap_or_default();
        Ok((status.cluster.has_condition(ClusterCondition::Updated) && ready(Some(&status.conditions)))
            .then_some(status))
    })
    .await;
    let updated = match updated {
        Ok(s) => s,
        Err(e) => anyhow::bail!("{e}\n{}\n{}", dump(&f.client).await, describe(&events_of(&f.client, id).await?)),
    };
    assert!(updated.cluster.has_condition(ClusterCondition::Created), "{:?}", updated.cluster);
    assert!(!updated.cluster.has_condition(ClusterCondition::Updating), "{:?}", updated.cluster);

    // The node pool's status names the types of its running workers and counts its spot
    // instances, as EC2 describes the instances of its group.
    let tenant = f.tenant_clients().await?;
    let running = tenant
        .ec2
        .describe_instances()
        .filters(aws_sdk_ec2::types::Filter::builder().name("instance-state-name").values("running").build())
        .send()
        .await?;
    let tcnp = format!("cluster-{id}-tcnp-np001");
    let stacks = tenant.cfn.describe_all().await?;
    let pool_group = stacks
        .iter()
        .find(|s| s.name == tcnp)
        .and_then(|s| s.outputs.get("AutoScalingGroupName").cloned())
        .ok_or_else(|| anyhow::anyhow!("{tcnp} names no group"))?;
    let mut types: Vec<String> = running
        .reservations()
        .iter()
        .flat_map(|r| r.instances())
        .filter(|i| {
            i.tags()
                .iter()
                .any(|t| t.key() == Some("aws:autoscaling:groupName") && t.value() == Some(pool_group.as_str()))
        })
        .filter_map(|i| i.instance_type().map(|t| t.as_str().to_string()))
        .collect();
    types.sort();
    types.dedup();
    assert_eq!(types, ["m5.2xlarge"], "the pool runs its spec's instance type");
    let worker = eventually(60, "the node pool's worker status", || async {
        let md = mds.get("np001").await?;
        Ok(md.status.and_then(|s| s.provider).and_then(|p| p.worker).filter(|w| !w.instance_types.is_empty()))
    })
    .await?;
    assert_eq!(worker.instance_types, types);
    assert_eq!(worker.spot_instances, 0, "an on-demand pool runs no spot instance");
    let events = events_of(&f.client, id).await?;
    let reasons: BTreeMap<String, usize> = events.iter().fold(BTreeMap::new(), |mut m, e| {
        *m.entry(e.reason.clone().unwrap_or_default()).or_default() += 1;
        m
    });
    for lifecycle in ["ClusterCreating", "ClusterCreated", "ClusterUpdating", "ClusterUpdated"] {
        assert_eq!(reasons.get(lifecycle), Some(&1), "{lifecycle}:\n{}", describe(&events));
    }
    // This installation has no intermediate zone: the delegation is skipped, said once.
    let skipped: Vec<&Event> = events.iter().filter(|e| e.reason.as_deref() == Some("DelegationSkipped")).collect();
    assert_eq!(skipped.len(), 1, "{}", describe(&events));
    assert_eq!(skipped[0].type_.as_deref(), Some("Normal"));
    assert!(skipped[0].note.as_deref().is_some_and(|n| n.contains("has no hosted zone k8s.")), "{}", describe(&events));
    f.kill_operator().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_skipped_delegation_is_announced_once_however_often_it_is_looked_at_again() -> anyhow::Result<()> {
    let mut f = Fixture::start().await?;
    f.apply_basics().await?;
    // The installation has no intermediate zone; the skip is looked at again every second, at
    // each reconcile of a resync every second.
    f.stack_listing_ttl = Some(std::time::Duration::from_secs(1));
    f.resync = std::time::Duration::from_secs(1);
    let id = "dlg01";
    f.credential_secret(id).await?;
    f.cluster(id).await?;
    f.control_plane(id, "cp001", &["eu-central-1a"], 1).await?;
    f.node_pool(id, "np001", &["eu-central-1a"], 1, 3).await?;
    f.start_operator().await?;
    wait_ready(&f, id).await?;
    let start = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_secs_f64();
    tokio::time::sleep(std::time::Duration::from_secs(6)).await;
    let lookups = f.moto.request_log()?.iter().filter(|r| r.service == "route53" && r.time >= start).count();
    let events = events_of(&f.client, id).await?;
    let skipped: Vec<&Event> = events.iter().filter(|e| e.reason.as_deref() == Some("DelegationSkipped")).collect();
    assert_eq!(skipped.len(), 1, "{}", describe(&events));
    // Said once: a repeat would have grown the event's series, a write per period.
    assert_eq!(skipped[0].series, None, "{}", describe(&events));
    // Looked at again, in the management account, about once per period.
    assert!((1..=9).contains(&lookups), "{lookups} Route53 calls in 6 s with a period of 1 s");
    f.kill_operator().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_ami_shows_in_ready() -> anyhow::Result<()> {
    let mut f = Fixture::start().await?;
    f.apply_basics().await?;
    // A Release whose Flatcar has no AMI in the operator's AMI file.
    let releases: Api<Release> = Api::all(f.client.clone());
    let release: Release = serde_json::from_value(serde_json::json!({
        "apiVersion": "release.giantswarm.io/v1alpha1", "kind": "Release", "metadata": {"name": "v20.0.9"},
        "spec": {"state": "active", "date": "2026-10-01T12:00:00Z", "components": [
            {"name": "kubernetes", "version": "1.34.2"},
            {"name": "etcd", "version": "3.5.16"},
            {"name": "containerlinux", "version": "9999.0.0"},
            {"name": "aws-operator", "version": VERSION}
        ]}
    }))?;
    releases.create(&PostParams::default(), &release).await?;
    let id = "ami01";
    f.credential_secret(id).await?;
    f.cluster(id).await?;
    f.control_plane(id, "cpami", &["eu-central-1a"], 1).await?;
    for (kind, name) in [("awsclusters", id), ("awscontrolplanes", "cpami")] {
        let patch = serde_json::json!({"metadata": {"labels": {"release.giantswarm.io/version": "20.0.9"}}});
        match kind {
            "awsclusters" => {
                Api::<AWSCluster>::namespaced(f.client.clone(), NS)
                    .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await?;
            }
            _ => {
                Api::<AWSControlPlane>::namespaced(f.client.clone(), NS)
                    .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await?;
            }
        }
    }
    f.start_operator().await?;
    let cps: Api<AWSControlPlane> = Api::namespaced(f.client.clone(), NS);
    let condition = eventually(180, "Ready=False naming the missing AMI", || async {
        let c = cps.get("cpami").await?;
        Ok(c.status
            .and_then(|s| s.conditions.into_iter().find(|c| c.type_ == "Ready"))
            .filter(|c| c.status == "False" && c.reason == "AmiNotFound"))
    })
    .await;
    let condition = match condition {
        Ok(c) => c,
        Err(e) => anyhow::bail!("{e}\n{}", dump(&f.client).await),
    };
    assert!(condition.message.contains("9999.0.0") && condition.message.contains(REGION), "{condition:?}");
    // Reported once it persisted, and it stays: the masters' stack was never created.
    let tenant = f.tenant_clients().await?;
    let stacks: Vec<String> = tenant.cfn.describe_all().await?.into_iter().map(|s| s.name).collect();
    assert!(!stacks.iter().any(|s| s.ends_with("-tccpn")), "{stacks:?}");
    f.kill_operator().await;
    Ok(())
}

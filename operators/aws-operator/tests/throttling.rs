//! Throttled AWS: with one request in five refused by the emulator with each service's
//! throttling error (`RequestLimitExceeded`, `SlowDown`, `ThrottlingException`, `Throttling`),
//! a cluster is created, scaled, upgraded and deleted as without throttling. The SDK's bounded
//! adaptive retries and the reconcile loop absorb the refusals; nothing is created twice, each
//! replaced instance's lifecycle action is completed once, and nothing is left behind.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use apis::aws::{AWSCluster, AWSControlPlane, AWSMachineDeployment};
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use support::bridge::NodeBridge;
use support::*;
use workload_sim::WorkloadCluster;

/// The share of AWS requests refused.
const SHARE: f64 = 0.2;

async fn live_stacks(aws: &aws_operator::aws::AccountClients) -> anyhow::Result<Vec<String>> {
    let mut names: Vec<String> = aws.cfn.describe_all().await?.into_iter().map(|s| s.name).collect();
    names.sort();
    Ok(names)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_is_created_scaled_and_deleted_while_a_fifth_of_aws_requests_are_throttled() -> anyhow::Result<()> {
    let mut f = Fixture::start().await?;
    f.apply_basics().await?;
    let id = "thr01";
    f.credential_secret(id).await?;
    f.cluster(id).await?;
    f.control_plane(id, "cp001", &["eu-central-1a"], 1).await?;
    f.node_pool(id, "np001", &["eu-central-1a"], 1, 3).await?;
    assert_eq!(f.moto.throttle(SHARE)?.throttle_share, SHARE);
    f.start_operator().await?;

    // Created.
    let clusters: Api<AWSCluster> = Api::namespaced(f.client.clone(), NS);
    let created = eventually(900, "the cluster to be Ready under throttling", || async {
        let c = clusters.get(id).await?;
        Ok(ready(c.status.as_ref().map(|s| &s.conditions)).then_some(()))
    })
    .await;
    if let Err(e) = created {
        anyhow::bail!("{e}\n{}", dump(&f.client).await);
    }
    let tenant = f.tenant_clients().await?;
    let cp = f.control_plane_clients().await?;
    let stacks: Vec<String> = live_stacks(&tenant).await?.into_iter().chain(live_stacks(&cp).await?).collect();

    // Scaled: the pool's minimum goes from 1 to 2 and its group follows.
    let pools: Api<AWSMachineDeployment> = Api::namespaced(f.client.clone(), NS);
    let patch = Patch::Merge(serde_json::json!({"spec": {"nodePool": {"scaling": {"min": 2}}}}));
    pools.patch("np001", &PatchParams::default(), &patch).await?;
    let scaled = eventually(900, "the pool's group to have a minimum of 2", || async {
        let groups = tenant.autoscaling.describe_auto_scaling_groups().send().await?;
        let min: Vec<i32> = groups
            .auto_scaling_groups()
            .iter()
            .filter(|g| g.tags().iter().any(|t| t.value() == Some("np001")))
            .filter_map(|g| g.min_size())
            .collect();
        Ok((min == [2]).then_some(()))
    })
    .await;
    if let Err(e) = scaled {
        anyhow::bail!("{e}\n{}", dump(&f.client).await);
    }

    // Deleted, as `kubectl delete -f` does: the Secret first, then the cluster.
    Api::<Secret>::namespaced(f.client.clone(), "giantswarm")
        .delete(&format!("credential-{id}"), &DeleteParams::default())
        .await?;
    clusters.delete(id, &DeleteParams::default()).await?;
    let gone = eventually(900, "the cluster, its control plane and node pool to be gone", || async {
        let c = clusters.get_opt(id).await?;
        let cp = Api::<AWSControlPlane>::namespaced(f.client.clone(), NS).get_opt("cp001").await?;
        let md = pools.get_opt("np001").await?;
        Ok((c.is_none() && cp.is_none() && md.is_none()).then_some(()))
    })
    .await;
    if let Err(e) = gone {
        anyhow::bail!("{e}\n{}", dump(&f.client).await);
    }
    f.moto.throttle(0.0)?;
    assert_eq!(live_stacks(&tenant).await?, Vec::<String>::new(), "no tenant stack left");
    assert_eq!(live_stacks(&cp).await?, Vec::<String>::new(), "no management stack left");

    // Throttling happened, across the services (which ones is chance: a service called a few
    // times may escape), and no stack was created twice: each CreateStack that AWS answered
    // created one of the cluster's stacks.
    let log = f.moto.request_log()?;
    let mut refused: BTreeMap<String, usize> = BTreeMap::new();
    for r in log.iter().filter(|r| r.throttled) {
        *refused.entry(r.service.clone()).or_default() += 1;
    }
    let throttled: usize = refused.values().sum();
    eprintln!("{throttled} of {} AWS requests throttled: {refused:?}", log.len());
    assert!(throttled * 20 >= log.len(), "at least a twentieth of the requests were throttled: {refused:?}");
    assert!(refused.len() >= 4, "at least four services were throttled: {refused:?}");
    let created = log.iter().filter(|r| r.action == "CreateStack" && !r.throttled).count();
    assert_eq!(created, stacks.len(), "one CreateStack per stack ({stacks:?})");
    f.kill_operator().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_upgrade_replaces_every_instance_once_while_a_fifth_of_aws_requests_are_throttled()
-> anyhow::Result<()> {
    const ID: &str = "thr02";
    const OLD_KEY: &str = "AKIAOLDTHROTTLED";
    const NEW_KEY: &str = "AKIANEWTHROTTLED";
    // AWS's waits at a twentieth: the hooks' heartbeat timeouts (900 s for masters, 3,600 s for
    // workers) stay longer than a throttled drain takes.
    let mut f = Fixture::start_with(motoenv::Launcher::from_env().time_scale(0.05)).await?;
    f.apply_basics().await?;
    let next = next_version();
    f.release("20.1.0", FLATCAR_NEXT, &next).await?;
    f.drainer_poll = Some(Duration::from_secs(1));
    f.credential_secret(ID).await?;
    f.cluster(ID).await?;
    f.control_plane(ID, "cp001", &["eu-central-1a", "eu-central-1b", "eu-central-1c"], 3).await?;
    f.node_pool(ID, "np001", &["eu-central-1a"], 2, 3).await?;
    let pause = serde_json::json!({"metadata": {"annotations": {"alpha.aws.giantswarm.io/update-pause-time": "PT1M"}}});
    Api::<AWSMachineDeployment>::namespaced(f.client.clone(), NS)
        .patch("np001", &PatchParams::default(), &Patch::Merge(&pause))
        .await?;
    let wc = Arc::new(WorkloadCluster::start().await?);
    wc.install_kubeconfig(&Api::<Secret>::namespaced(f.client.clone(), NS), NS, ID).await?;
    let tenant = f.tenant_clients().await?;
    let bridge = NodeBridge::start(wc.clone(), tenant.clone(), &f.moto.endpoint(), ID, Duration::from_millis(700));
    let _old = f.spawn_operator(VERSION, OLD_KEY).await?;
    let clusters: Api<AWSCluster> = Api::namespaced(f.client.clone(), NS);
    let created = eventually(400, "the cluster to be Ready with five nodes", || async {
        let c = clusters.get(ID).await?;
        let nodes = bridge.seen().iter().filter(|s| s.lifecycle == "InService").count();
        Ok((ready(c.status.as_ref().map(|s| &s.conditions)) && nodes == 5).then_some(()))
    })
    .await;
    if let Err(e) = created {
        anyhow::bail!("{e}\nbridge: {:?}\n{}", bridge.errors(), dump(&f.client).await);
    }
    let old_instances: BTreeSet<String> = bridge.seen().iter().map(|s| s.instance.clone()).collect();

    // Throttled from here on, the cluster is handed to the next operator version, which rolls
    // every instance (the nodes' own hook scripts are throttled too).
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_secs_f64();
    assert_eq!(f.moto.throttle(SHARE)?.throttle_share, SHARE);
    f.relabel(ID, "cp001", &["np001"], "20.1.0", &next).await?;
    let _new = f.spawn_operator(&next, NEW_KEY).await?;
    updated_with_every_instance_replaced(&f, &bridge, ID, &old_instances, 5, &next, 900).await?;
    f.moto.throttle(0.0)?;

    // Nothing waits on a hook, no DrainerConfig is left, no stack was created, and each old
    // instance's terminating lifecycle action was completed once by the operators: a completion
    // AWS refused with a throttling error changed nothing and was retried.
    nothing_left_terminating(&f, &tenant).await?;
    let log: Vec<_> = f.moto.request_log()?.into_iter().filter(|r| r.time >= since).collect();
    let throttled = log.iter().filter(|r| r.throttled).count();
    eprintln!("{throttled} of {} AWS requests throttled during the upgrade", log.len());
    assert!(throttled * 20 >= log.len(), "at least a twentieth of the upgrade's requests were throttled");
    let answered = |action: &str| {
        log.iter()
            .filter(|r| r.action == action && !r.throttled && [OLD_KEY, NEW_KEY].contains(&r.principal.as_str()))
            .count()
    };
    assert_eq!(answered("CreateStack"), 0, "an upgrade creates no stack");
    let refused_completions = log.iter().filter(|r| r.action == "CompleteLifecycleAction" && r.throttled).count();
    eprintln!("{refused_completions} lifecycle-action completions throttled and retried");
    let mut completed: BTreeMap<&str, usize> = BTreeMap::new();
    for r in &log {
        if r.action == "CompleteLifecycleAction"
            && r.status == 200
            && [OLD_KEY, NEW_KEY].contains(&r.principal.as_str())
        {
            *completed.entry(r.instance.as_str()).or_default() += 1;
        }
    }
    let events = Api::<k8s_openapi::api::events::v1::Event>::namespaced(f.client.clone(), NS)
        .list(&ListParams::default())
        .await?
        .items;
    let completions: Vec<String> = events
        .into_iter()
        .filter(|e| {
            ["NodeDrained", "NodeDrainTimeout", "InstanceWithoutNode", "NodeReleasedForDeletion"]
                .contains(&e.reason.as_deref().unwrap_or_default())
        })
        .map(|e| format!("{}: {}", e.reason.unwrap_or_default(), e.note.unwrap_or_default()))
        .collect();
    // Nothing happens twice: no instance's action is completed twice, and only the replaced
    // instances' are. (An instance whose hook reached its heartbeat timeout while its drain was
    // slowed by the throttling went on without a completion, as AWS's default result says.)
    assert!(
        completed.iter().all(|(instance, n)| *n == 1 && old_instances.contains(*instance)),
        "each replaced instance's lifecycle action completed at most once, by the operators: {completed:?} \
         (replaced: {old_instances:?}); events: {completions:#?}"
    );
    let timed_out: Vec<&String> = old_instances.iter().filter(|i| !completed.contains_key(i.as_str())).collect();
    eprintln!(
        "{} of {} replaced instances completed by the operators; gone by their heartbeat timeout: {timed_out:?}",
        completed.len(),
        old_instances.len()
    );
    assert!(completed.len() * 2 > old_instances.len(), "most instances were drained and completed: {completed:?}");
    Ok(())
}

//! The drainers against moto and a simulated workload cluster: an instance a node pool's group
//! terminates waits in `Terminating:Wait` on the pool's hook, the operator asks for its node to
//! be drained with a DrainerConfig, the drain executor drains it, and the operator completes the
//! lifecycle action, so the instance goes only after its pods did. The operator runs as the
//! chart's ServiceAccount, so the run also proves the chart grants what the drainers do.

mod support;

use anyhow::Context as _;
use apis::aws::AWSCluster;
use apis::drainer::DrainerConfig;
use k8s_openapi::api::core::v1::{Node, Secret};
use k8s_openapi::api::events::v1::Event;
use kube::api::ListParams;
use kube::{Api, ResourceExt};
use support::*;
use workload_sim::{Machine, Workload, WorkloadCluster};

/// Cluster `id` with one master (no hooks) and a pool of two instances (the `NodePool` hook).
async fn create(f: &Fixture, id: &str) -> anyhow::Result<()> {
    f.credential_secret(id).await?;
    f.cluster(id).await?;
    f.control_plane(id, "cp001", &["eu-central-1a"], 1).await?;
    f.node_pool(id, "np001", &["eu-central-1a"], 2, 3).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminated_pool_instance_waits_until_its_node_is_drained() -> anyhow::Result<()> {
    let mut f = Fixture::start_as_chart(motoenv::Launcher::from_env()).await?;
    let (env, user) = (f.env.handle().clone(), f.service_account.clone().expect("the chart's identity").user);
    packaging::rbac::without_refusals(&env, &user, drain_one_instance(&mut f)).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_cluster_lets_its_instances_go_at_once_without_draining() -> anyhow::Result<()> {
    // Stack deletes drain their groups through the hooks, which wait AWS's hour unless completed.
    let mut f = Fixture::start_as_chart(motoenv::Launcher::from_env().group_deletion_hooks(true)).await?;
    let (env, user) = (f.env.handle().clone(), f.service_account.clone().expect("the chart's identity").user);
    packaging::rbac::without_refusals(&env, &user, delete_a_cluster(&mut f)).await?;
    Ok(())
}

async fn delete_a_cluster(f: &mut Fixture) -> anyhow::Result<()> {
    let id = "dra02";
    create(f, id).await?;
    f.start_operator().await?;
    wait_ready(f, id).await?;
    let tenant = f.tenant_clients().await?;
    let tcnp = aws_stacks::names::stack_name(id, aws_stacks::names::StackKind::Tcnp, Some("np001"));
    let stack = tenant.cfn.describe(&tcnp).await?.expect("the pool's stack exists");
    let group = stack.outputs.get("AutoScalingGroupName").expect("the pool's group output").clone();
    let groups = tenant.autoscaling.describe_auto_scaling_groups().auto_scaling_group_names(&group).send().await?;
    let instances: Vec<String> = groups.auto_scaling_groups()[0]
        .instances()
        .iter()
        .filter_map(|i| i.instance_id().map(str::to_string))
        .collect();
    assert!(!instances.is_empty(), "the pool has instances");

    Api::<AWSCluster>::namespaced(f.client.clone(), NS).delete(id, &Default::default()).await?;
    let gone = eventually(180, "the cluster to be gone", || async {
        Ok(Api::<AWSCluster>::namespaced(f.client.clone(), NS).get_opt(id).await?.is_none().then_some(()))
    })
    .await;
    if let Err(e) = gone {
        anyhow::bail!("{e}\n{}", dump(&f.client).await);
    }
    // The pool's stack delete waited for its instances to leave Terminating:Wait, which at AWS's
    // timing takes the hook's hour unless the operator completes the actions.
    for instance in &instances {
        assert_eq!(ec2_state(&tenant, instance).await?, "terminated", "{instance}");
    }
    // Nothing was drained: no DrainerConfig, and the pool tells why its instances went (the
    // event recorder folds repeats of one reason into one event).
    let dcs: Api<DrainerConfig> = Api::namespaced(f.client.clone(), NS);
    assert!(dcs.list(&ListParams::default()).await?.items.is_empty(), "no DrainerConfig is left");
    let events: Api<Event> = Api::namespaced(f.client.clone(), NS);
    let released = events.list(&ListParams::default()).await?.items.into_iter().any(|e| {
        e.reason.as_deref() == Some("NodeReleasedForDeletion")
            && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("np001")
            && e.note.as_deref().is_some_and(|n| instances.iter().any(|i| n.contains(i.as_str())))
    });
    assert!(released, "a NodeReleasedForDeletion event on the pool");
    Ok(())
}

async fn drain_one_instance(f: &mut Fixture) -> anyhow::Result<()> {
    let id = "dra01";
    create(f, id).await?;
    f.start_operator().await?;
    wait_ready(f, id).await?;

    // The pool's group and its instances, with their nodes' names.
    let tenant = f.tenant_clients().await?;
    let tcnp = aws_stacks::names::stack_name(id, aws_stacks::names::StackKind::Tcnp, Some("np001"));
    let stack = tenant.cfn.describe(&tcnp).await?.expect("the pool's stack exists");
    let group = stack.outputs.get("AutoScalingGroupName").expect("the pool's group output").clone();
    let groups = tenant.autoscaling.describe_auto_scaling_groups().auto_scaling_group_names(&group).send().await?;
    let instances: Vec<String> = groups.auto_scaling_groups()[0]
        .instances()
        .iter()
        .filter_map(|i| i.instance_id().map(str::to_string))
        .collect();
    assert!(!instances.is_empty(), "the pool has instances");
    let described = tenant.ec2.describe_instances().set_instance_ids(Some(instances.clone())).send().await?;
    let dns_of = |instance: &str| {
        described
            .reservations()
            .iter()
            .flat_map(|r| r.instances())
            .find(|i| i.instance_id() == Some(instance))
            .and_then(|i| i.private_dns_name())
            .unwrap_or_default()
            .to_string()
    };
    let victim = instances[0].clone();
    let victim_node = dns_of(&victim);
    assert!(!victim_node.is_empty(), "moto gives instances private DNS names");

    // The workload cluster: the victim's node carries the workload; the others have room for it.
    let wc = WorkloadCluster::start().await?;
    wc.add_machine(&Machine::new(&victim_node)).await?;
    let workload = Workload::new("web", "web", 3).max_unavailable(1);
    wc.deploy(&workload).await?;
    wc.wait_ready("web", "web", 3).await?;
    for other in &instances[1..] {
        wc.add_machine(&Machine::new(dns_of(other))).await?;
    }
    if instances.len() == 1 {
        wc.add_machine(&Machine::new("spare-node")).await?;
    }
    wc.install_kubeconfig(&Api::<Secret>::namespaced(f.client.clone(), NS), NS, id).await?;

    tenant
        .autoscaling
        .terminate_instance_in_auto_scaling_group()
        .instance_id(&victim)
        // The group keeps its size (its minimum allows no less): a replacement launches while
        // the victim goes through the pool's terminating hook.
        .should_decrement_desired_capacity(false)
        .send()
        .await
        .context("TerminateInstanceInAutoScalingGroup")?;
    assert_eq!(lifecycle_state(&tenant, &victim).await?.as_deref(), Some("Terminating:Wait"));

    // A DrainerConfig for the victim's node, labelled for the drain executor.
    let dcs: Api<DrainerConfig> = Api::namespaced(f.client.clone(), NS);
    let dc = eventually(60, "a DrainerConfig for the victim's node", || async { Ok(dcs.get_opt(&victim_node).await?) })
        .await
        .with_context(|| format!("group {group}, instance {victim}, node {victim_node}"))?;
    let labels = dc.labels();
    assert_eq!(labels.get("aws-operator.giantswarm.io/instance"), Some(&victim));
    assert_eq!(labels.get("aws-operator.giantswarm.io/version").map(String::as_str), Some(VERSION));
    assert_eq!(labels.get("giantswarm.io/machine-deployment").map(String::as_str), Some("np001"));
    assert_eq!(dc.spec.guest.node.name, victim_node);

    // The instance goes only once drained: then it has left its group and EC2 terminated it.
    let result = eventually(120, "the victim to be terminated", || async {
        let state = lifecycle_state(&tenant, &victim).await?;
        if state.as_deref() == Some("Terminating:Wait") {
            // Still held: it must not have lost its pods' home before the drain.
            return Ok(None);
        }
        Ok((state.is_none() && ec2_state(&tenant, &victim).await? == "terminated").then_some(()))
    })
    .await;
    if let Err(e) = result {
        anyhow::bail!("{e}\nDrainerConfig: {:?}\n{}", dcs.get_opt(&victim_node).await?, dump(&f.client).await);
    }
    let node = Api::<Node>::all(wc.client()).get(&victim_node).await?;
    assert_eq!(node.spec.and_then(|s| s.unschedulable), Some(true), "the node was cordoned");
    assert!(wc.pods_on(&victim_node).await?.is_empty(), "its pods were evicted before the instance went");
    wc.wait_ready("web", "web", 3).await?;

    // The completion is reported, and the DrainerConfig goes once its instance did.
    let events: Api<Event> = Api::namespaced(f.client.clone(), NS);
    eventually(30, "a NodeDrained event on the pool", || async {
        Ok(events.list(&ListParams::default()).await?.items.into_iter().find(|e| {
            e.reason.as_deref() == Some("NodeDrained")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("np001")
        }))
    })
    .await?;
    eventually(30, "the DrainerConfig to be deleted", || async {
        Ok(dcs.get_opt(&victim_node).await?.is_none().then_some(()))
    })
    .await?;
    // The other instances stay.
    for other in &instances[1..] {
        assert_eq!(lifecycle_state(&tenant, other).await?.as_deref(), Some("InService"), "{other}");
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn steady_clusters_share_one_auto_scaling_listing_per_drainer_poll_and_describe_no_instance() -> anyhow::Result<()>
{
    let mut f = Fixture::start().await?;
    f.apply_basics().await?;
    // Every owner looks for waiting instances every 4 s; a listing younger than the active poll
    // (0.5 s) is all an owner that is not steady would accept.
    let drainer_poll = std::time::Duration::from_secs(4);
    f.drainer_poll = Some(drainer_poll);
    f.drainer_active_poll = Some(std::time::Duration::from_millis(500));
    // Three clusters in one tenant account: six owners (three control planes, three pools). Each
    // cluster is created once the one before is Ready, so that the owners poll on timers apart
    // from each other, as in an installation, not all at once.
    let clusters = [("drc01", "cp001", "np001"), ("drc02", "cp002", "np002"), ("drc03", "cp003", "np003")];
    f.start_operator().await?;
    for (id, cp, pool) in clusters {
        f.credential_secret(id).await?;
        f.cluster(id).await?;
        f.control_plane(id, cp, &["eu-central-1a"], 1).await?;
        f.node_pool(id, pool, &["eu-central-1a"], 1, 3).await?;
        wait_ready(&f, id).await?;
        tokio::time::sleep(drainer_poll / 3).await;
    }
    let count = |action: &str, since: f64| -> anyhow::Result<usize> {
        Ok(f.moto.request_log()?.iter().filter(|r| r.action == action && r.time >= since).count())
    };
    let now = || std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs_f64());
    // Let the owners settle (their first passes list DrainerConfigs and mark them settled).
    tokio::time::sleep(drainer_poll * 2).await;
    let window = 16.0;
    let start = now()?;
    tokio::time::sleep(std::time::Duration::from_secs_f64(window)).await;
    let listings = count("DescribeAutoScalingGroups", start)?;
    let described = count("DescribeInstances", start)?;
    // At most one listing per drainer poll for the account (plus one at each edge of the
    // window), where six owners each listing on their own would make six per drainer poll.
    let most = (window / drainer_poll.as_secs_f64()).ceil() as usize + 2;
    eprintln!("{listings} DescribeAutoScalingGroups and {described} DescribeInstances in {window} s");
    assert!(listings >= 1, "the drainers looked at the groups");
    assert!(listings <= most, "{listings} DescribeAutoScalingGroups in {window} s (at most {most})");
    assert_eq!(described, 0, "no DescribeInstances while no instance waits");
    Ok(())
}

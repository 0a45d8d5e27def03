//! The unhealthy-node terminator against moto and a simulated workload cluster: the cluster's
//! EC2 instances become WC nodes (named by their private DNS names, `spec.providerID`
//! `aws:///<zone>/<instance id>`, the master labelled as control plane); a node flipped NotReady
//! past a short threshold gets its instance terminated in its Auto Scaling group without the
//! group shrinking, and an `UnhealthyNodeTerminated` event, while a NotReady node without an
//! instance is reported and skipped; the AWSCluster's opt-out annotation
//! prevents it; the circuit breaker holds back a second node within one run and the cooldown.

mod support;

use std::time::Duration;

use apis::aws::AWSCluster;
use aws_operator::aws::AccountClients;
use aws_operator::config::UnhealthySettings;
use aws_operator::controllers::unhealthy::{LAST_TERMINATION_ANNOTATION, TERMINATE_UNHEALTHY_ANNOTATION};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::events::v1::Event;
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use node_lifecycle::unhealthy::Limits;
use support::*;
use workload_sim::{Machine, WorkloadCluster};

/// The terminator of these tests: on in every cluster that does not opt out, 2 s of NotReady,
/// a cooldown longer than any test, and a resync short enough to see an annotation change.
fn settings() -> UnhealthySettings {
    UnhealthySettings {
        all_clusters: true,
        limits: Limits { threshold: Duration::from_secs(2), cooldown: Duration::from_secs(600) },
        resync: Duration::from_secs(2),
    }
}

/// One cluster's instances as WC nodes.
struct Cluster {
    id: String,
    tenant: std::sync::Arc<AccountClients>,
    /// The node pool's Auto Scaling group.
    group: String,
    /// The pool's instances `(instance id, node name)`.
    workers: Vec<(String, String)>,
    wc: WorkloadCluster,
}

/// Cluster `id` (one master, a pool of two) with `annotations`, its WC reachable through a
/// kubeconfig Secret before the operator starts, and every instance registered there as a node.
async fn cluster(f: &mut Fixture, id: &str, annotations: serde_json::Value) -> anyhow::Result<Cluster> {
    f.credential_secret(id).await?;
    f.cluster(id).await?;
    let clusters: Api<AWSCluster> = Api::namespaced(f.client.clone(), NS);
    let patch = serde_json::json!({"metadata": {"annotations": annotations}});
    clusters.patch(id, &PatchParams::default(), &Patch::Merge(&patch)).await?;
    f.control_plane(id, "cp001", &["eu-central-1a"], 1).await?;
    f.node_pool(id, "np001", &["eu-central-1a"], 3, 4).await?;
    // The WC answers from the start (without nodes), through its kubeconfig Secret rather than
    // the issued `api` certificate for an API host that does not resolve.
    let wc = WorkloadCluster::start().await?;
    wc.install_kubeconfig(&Api::<Secret>::namespaced(f.client.clone(), NS), NS, id).await?;
    f.unhealthy = Some(settings());
    f.start_operator().await?;
    let ready = eventually(300, &format!("cluster {id} to be Ready"), || async {
        let c = clusters.get(id).await?;
        Ok(support::ready(c.status.as_ref().map(|s| &s.conditions)).then_some(()))
    })
    .await;
    if let Err(e) = ready {
        anyhow::bail!("{e}\n{}", dump(&f.client).await);
    }

    let tenant = f.tenant_clients().await?;
    let tcnp = aws_stacks::names::stack_name(id, aws_stacks::names::StackKind::Tcnp, Some("np001"));
    let stack = tenant.cfn.describe(&tcnp).await?.expect("the pool's stack exists");
    let group = stack.outputs.get("AutoScalingGroupName").expect("the pool's group output").clone();
    // Every running instance of the cluster: the pool's by its group, the master's otherwise.
    let described = tenant
        .ec2
        .describe_instances()
        .filters(aws_sdk_ec2::types::Filter::builder().name("tag:giantswarm.io/cluster").values(id).build())
        .filters(aws_sdk_ec2::types::Filter::builder().name("instance-state-name").values("running").build())
        .send()
        .await?;
    let mut workers = Vec::new();
    let mut masters = 0;
    for i in described.reservations().iter().flat_map(|r| r.instances()) {
        let (Some(instance), Some(dns)) = (i.instance_id(), i.private_dns_name()) else { continue };
        let zone = i.placement().and_then(|p| p.availability_zone()).unwrap_or_default();
        let in_pool =
            i.tags().iter().any(|t| t.key() == Some("aws:autoscaling:groupName") && t.value() == Some(&group));
        let mut machine = Machine::new(dns).provider_id(format!("aws:///{zone}/{instance}"));
        if in_pool {
            workers.push((instance.to_string(), dns.to_string()));
        } else {
            masters += 1;
            machine = machine.label("node-role.kubernetes.io/control-plane", "");
        }
        wc.add_machine(&machine).await?;
    }
    workers.sort();
    assert_eq!((masters, workers.len()), (1, 3), "one master and three pool instances: {workers:?}");
    Ok(Cluster { id: id.to_string(), tenant, group, workers, wc })
}

impl Cluster {
    /// The lifecycle state of `instance` in Auto Scaling, `None` once it left its group.
    async fn state(&self, instance: &str) -> anyhow::Result<Option<String>> {
        lifecycle_state(&self.tenant, instance).await
    }

    /// Whether `instance` was terminated: it left service in its group (waiting in the pool's
    /// terminating hook, or gone from the group).
    async fn terminated(&self, instance: &str) -> anyhow::Result<bool> {
        Ok(self.state(instance).await?.as_deref() != Some("InService"))
    }

    /// The pool group's desired capacity.
    async fn desired(&self) -> anyhow::Result<i32> {
        let out =
            self.tenant.autoscaling.describe_auto_scaling_groups().auto_scaling_group_names(&self.group).send().await?;
        Ok(out.auto_scaling_groups().first().and_then(|g| g.desired_capacity()).unwrap_or_default())
    }

    /// The events on the AWSCluster with `reason`, as `(type, note)`.
    async fn events(&self, f: &Fixture, reason: &str) -> anyhow::Result<Vec<(String, String)>> {
        let events: Api<Event> = Api::namespaced(f.client.clone(), NS);
        Ok(events
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter(|e| {
                e.reason.as_deref() == Some(reason)
                    && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(self.id.as_str())
            })
            .map(|e| (e.type_.unwrap_or_default(), e.note.unwrap_or_default()))
            .collect())
    }
}

/// As the chart's ServiceAccount with its drain executor: the chart grants what the terminator
/// does, and the terminated instance goes the whole way (drained through the pool's hook, then
/// terminated by EC2).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_notready_pool_node_is_terminated_in_its_group_without_shrinking_it() -> anyhow::Result<()> {
    let mut f = Fixture::start_as_chart(motoenv::Launcher::from_env()).await?;
    let (env, user) = (f.env.handle().clone(), f.service_account.clone().expect("the chart's identity").user);
    packaging::rbac::without_refusals(&env, &user, terminate_one(&mut f)).await?;
    Ok(())
}

async fn terminate_one(f: &mut Fixture) -> anyhow::Result<()> {
    let c = cluster(f, "unh01", serde_json::json!({})).await?;
    let desired = c.desired().await?;
    let (victim, victim_node) = c.workers[0].clone();
    let (other, _) = c.workers[1].clone();

    // A node the AWS cloud provider did not register (no providerID) fails beside it: it is
    // reported and skipped, and the run goes on.
    let stray = "stray-node";
    c.wc.add_machine(&Machine::new(stray)).await?;
    c.wc.set_ready(stray, false)?;
    c.wc.set_ready(&victim_node, false)?;
    let result = eventually(30, "the victim's instance to leave service", || async {
        Ok(c.terminated(&victim).await?.then_some(()))
    })
    .await;
    if let Err(e) = result {
        anyhow::bail!("{e}\n{}", dump(&f.client).await);
    }
    // Terminated in its group, which keeps its size and replaces it.
    assert_eq!(c.desired().await?, desired, "the group's desired capacity is kept");
    // The pool's hook held it until its node was drained; then EC2 terminated it.
    eventually(60, "EC2 to terminate the victim", || async {
        Ok((ec2_state(&c.tenant, &victim).await? == "terminated").then_some(()))
    })
    .await?;
    assert_eq!(c.state(&other).await?.as_deref(), Some("InService"), "the Ready node's instance stays");
    let terminated = eventually(10, "an UnhealthyNodeTerminated event", || async {
        Ok(c.events(f, "UnhealthyNodeTerminated").await?.into_iter().next())
    })
    .await?;
    assert_eq!(terminated.0, "Normal");
    assert!(terminated.1.contains(&victim) && terminated.1.contains(&victim_node), "{}", terminated.1);
    let without = eventually(10, "an UnhealthyNodeWithoutInstance event", || async {
        Ok(c.events(f, "UnhealthyNodeWithoutInstance").await?.into_iter().next())
    })
    .await?;
    assert_eq!(without.0, "Warning");
    assert!(without.1.contains(stray) && !without.1.contains(&victim_node), "{}", without.1);
    let clusters: Api<AWSCluster> = Api::namespaced(f.client.clone(), NS);
    assert!(clusters.get(&c.id).await?.annotations().contains_key(LAST_TERMINATION_ANNOTATION), "cooldown recorded");
    let shared = f.shared.clone().expect("the operator runs");
    assert_eq!((shared.unhealthy.terminated("worker"), shared.unhealthy.terminated("master")), (1, 0));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_that_opts_out_keeps_its_unhealthy_nodes() -> anyhow::Result<()> {
    let mut f = Fixture::start().await?;
    f.apply_basics().await?;
    let c = cluster(&mut f, "unh02", serde_json::json!({TERMINATE_UNHEALTHY_ANNOTATION: "false"})).await?;
    let (victim, victim_node) = c.workers[0].clone();

    c.wc.set_ready(&victim_node, false)?;
    // Several thresholds and resyncs pass: nothing is terminated.
    tokio::time::sleep(Duration::from_secs(8)).await;
    assert_eq!(c.state(&victim).await?.as_deref(), Some("InService"), "the opted-out cluster's instance stays");
    assert!(c.events(&f, "UnhealthyNodeTerminated").await?.is_empty());
    assert_eq!(f.shared.clone().expect("the operator runs").unhealthy.terminated("worker"), 0);

    // Opting in again: the same node's instance goes, so it was the annotation that held it.
    let clusters: Api<AWSCluster> = Api::namespaced(f.client.clone(), NS);
    let patch = serde_json::json!({"metadata": {"annotations": {TERMINATE_UNHEALTHY_ANNOTATION: null}}});
    clusters.patch(&c.id, &PatchParams::default(), &Patch::Merge(&patch)).await?;
    eventually(30, "the victim's instance to leave service once the cluster opts in", || async {
        Ok(c.terminated(&victim).await?.then_some(()))
    })
    .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_circuit_breaker_terminates_one_of_three_notready_nodes_and_holds_the_others() -> anyhow::Result<()> {
    let mut f = Fixture::start().await?;
    f.apply_basics().await?;
    let c = cluster(&mut f, "unh03", serde_json::json!({})).await?;
    let desired = c.desired().await?;

    // All three pool nodes fail at once: with four nodes, one goes per run (max(1, 10 %)), then
    // the cooldown holds the other two.
    for (_, node) in &c.workers {
        c.wc.set_ready(node, false)?;
    }
    eventually(30, "one instance to leave service", || async {
        let mut any = false;
        for (instance, _) in &c.workers {
            any |= c.terminated(instance).await?;
        }
        Ok(any.then_some(()))
    })
    .await?;
    let held = eventually(15, "an UnhealthyNodesHeld event", || async {
        Ok(c.events(&f, "UnhealthyNodesHeld").await?.into_iter().next())
    })
    .await?;
    // Runs go on at the resync and when nodes are due: the held node stays held.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let mut gone = Vec::new();
    let mut kept = Vec::new();
    for (instance, node) in &c.workers {
        if c.terminated(instance).await? { gone.push(node.clone()) } else { kept.push(node.clone()) }
    }
    assert_eq!((gone.len(), kept.len()), (1, 2), "one terminated, two held: gone {gone:?}, kept {kept:?}");
    assert_eq!(held.0, "Warning");
    assert!(kept.iter().all(|k| held.1.contains(k)) && !held.1.contains(&gone[0]), "{}", held.1);
    assert_eq!(c.events(&f, "UnhealthyNodeTerminated").await?.len(), 1);
    assert_eq!(c.desired().await?, desired);
    let shared = f.shared.clone().expect("the operator runs");
    assert_eq!(shared.unhealthy.terminated("worker"), 1);
    assert!(shared.unhealthy.held.get() >= 1);
    Ok(())
}

/// A cluster that opts unhealthy-node termination into its maintenance window
/// (`spec.cluster.maintenance.unhealthyNodeTerminationInWindow`) keeps a NotReady node's
/// instance until the window opens, with a Normal event naming the window; then it goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_opted_in_cluster_terminates_unhealthy_nodes_only_in_its_window() -> anyhow::Result<()> {
    let mut f = Fixture::start().await?;
    f.apply_basics().await?;
    let c = cluster(&mut f, "unh05", serde_json::json!({})).await?;
    let shared = f.shared.clone().expect("the operator runs");
    // Sundays 03:00 UTC for an hour; the operator's clock on a Wednesday.
    shared.clock.set("2026-12-02T12:00:00Z".parse()?);
    let maintenance = serde_json::json!({"spec": {"cluster": {"maintenance": {
        "windows": [{"days": ["Sun"], "start": "03:00", "duration": "1h"}],
        "unhealthyNodeTerminationInWindow": true
    }}}});
    Api::<AWSCluster>::namespaced(f.client.clone(), NS)
        .patch(&c.id, &PatchParams::default(), &Patch::Merge(&maintenance))
        .await?;
    let (victim, victim_node) = c.workers[0].clone();
    c.wc.set_ready(&victim_node, false)?;
    let waiting = eventually(30, "a WaitingForMaintenanceWindow event", || async {
        Ok(c.events(&f, "WaitingForMaintenanceWindow").await?.into_iter().next())
    })
    .await?;
    assert_eq!(waiting.0, "Normal");
    assert!(waiting.1.contains(&victim) && waiting.1.contains("opens at 2026-12-06T03:00:00Z"), "{}", waiting.1);
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(c.state(&victim).await?.as_deref(), Some("InService"), "kept outside the window");
    assert_eq!(shared.unhealthy.terminated("worker"), 0);
    // The window opens.
    shared.clock.set("2026-12-06T03:00:05Z".parse()?);
    eventually(30, "the victim's instance to leave service", || async {
        Ok(c.terminated(&victim).await?.then_some(()))
    })
    .await?;
    assert_eq!(shared.unhealthy.terminated("worker"), 1);
    Ok(())
}

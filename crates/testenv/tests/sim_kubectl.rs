//! `kubectl drain`, `cordon` and `uncordon` against simulated nodes, with the system kubectl
//! (`/usr/bin/kubectl`, v1.32, or `$KUBECTL`): drain evicts what the PodDisruptionBudgets
//! allow, retries what they refuse until its timeout, and completes once they allow it.

mod kubectl_support;
mod sim_support;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kubectl_support::{Client, Kubectl};
use serde_json::json;
use sim_support::{deployment, eventually, pods, rolled_out, start};
use testenv::{NodeSpec, SimConfig};

fn node_of(p: &Pod) -> String {
    p.spec.as_ref().and_then(|s| s.node_name.clone()).unwrap_or_default()
}

/// Wait until exactly `count` pods match `selector`, all on node-2. The Deployment may still
/// report the evicted pod available for a moment after the drain, so its rollout alone is not
/// proof that the replacement is scheduled.
async fn on_node_2(env: &testenv::TestEnv, selector: &str, count: usize) {
    eventually(&format!("{count} pods {selector} on node-2"), || async {
        let pods = pods(env, selector).await;
        (pods.len() == count && pods.iter().all(|p| node_of(p) == "node-2")).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_evicts_what_budgets_allow_and_waits_for_the_rest() {
    // Everything starts on node-1; node-2 joins later to take the evicted pods.
    let env = start(SimConfig::with_nodes(1)).await;
    let deployments: Api<Deployment> = Api::default_namespaced(env.client());
    let graceful = json!({"template": {"spec": {"terminationGracePeriodSeconds": 1}}});
    deployments.create(&PostParams::default(), &deployment("free", 2, graceful.clone())).await.unwrap();
    deployments.create(&PostParams::default(), &deployment("guarded", 1, graceful)).await.unwrap();
    let pdb: PodDisruptionBudget = serde_json::from_value(json!({
        "metadata": {"name": "guard"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}},
    }))
    .unwrap();
    let pdbs: Api<PodDisruptionBudget> = Api::default_namespaced(env.client());
    pdbs.create(&PostParams::default(), &pdb).await.unwrap();
    rolled_out(&env, "free").await;
    rolled_out(&env, "guarded").await;
    let free_before: Vec<String> = pods(&env, "app=free").await.into_iter().map(|p| p.metadata.name.unwrap()).collect();
    let guarded = pods(&env, "app=guarded").await.remove(0);
    let guarded_name = guarded.metadata.name.clone().unwrap();
    assert_eq!(node_of(&guarded), "node-1");
    env.sim().unwrap().add_node(NodeSpec::new("node-2")).unwrap();

    let kubectl = Kubectl::new(Client::System.binary().expect("the system kubectl"), &env);
    let out = kubectl.run(&["drain", "node-1", "--ignore-daemonsets", "--timeout=12s"]).await;
    let all = format!("{}\n{}", out.stdout, out.stderr);
    assert!(!out.success(), "the budget keeps the drain from finishing:\n{all}");
    assert!(all.contains("node/node-1 cordoned"), "{all}");
    assert!(
        all.contains(&format!(
            "error when evicting pods/\"{guarded_name}\" -n \"default\" (will retry after 5s): Cannot evict pod as it would violate the pod's disruption budget."
        )),
        "{all}"
    );
    for name in &free_before {
        assert!(all.contains(&format!("pod/{name} evicted")), "{name} is evicted:\n{all}");
    }
    assert!(all.contains("There are pending pods in node \"node-1\""), "{all}");
    assert!(all.contains(&format!("pods/\"{guarded_name}\" -n \"default\": global timeout reached: 12s")), "{all}");

    // The free pods moved to node-2; the guarded one still runs on node-1.
    let api: Api<Pod> = Api::default_namespaced(env.client());
    for name in &free_before {
        assert!(api.get_opt(name).await.unwrap().is_none(), "{name} is gone");
    }
    rolled_out(&env, "free").await;
    on_node_2(&env, "app=free", 2).await;
    let still = api.get(&guarded_name).await.unwrap();
    assert_eq!(node_of(&still), "node-1");
    assert!(still.metadata.deletion_timestamp.is_none());
    let nodes: Api<Node> = Api::all(env.client());
    assert_eq!(nodes.get("node-1").await.unwrap().spec.unwrap().unschedulable, Some(true));

    // Relax the budget: a second drain completes.
    pdbs.patch("guard", &PatchParams::default(), &Patch::Merge(json!({"spec": {"minAvailable": 0}}))).await.unwrap();
    let out = kubectl.ok(&["drain", "node-1", "--ignore-daemonsets", "--timeout=60s"]).await;
    assert!(out.contains(&format!("pod/{guarded_name} evicted")), "{out}");
    assert!(out.contains("node/node-1 drained"), "{out}");
    rolled_out(&env, "guarded").await;
    on_node_2(&env, "app=guarded", 1).await;
    let on_node_1 = api.list(&kube::api::ListParams::default().fields("spec.nodeName=node-1")).await.unwrap().items;
    assert!(on_node_1.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cordon_and_uncordon_toggle_scheduling() {
    let env = start(SimConfig::with_nodes(1)).await;
    let kubectl = Kubectl::new(Client::System.binary().expect("the system kubectl"), &env);
    assert!(kubectl.ok(&["cordon", "node-1"]).await.contains("node/node-1 cordoned"));
    let nodes: Api<Node> = Api::all(env.client());
    eventually("the cordon taint", || async {
        let n = nodes.get("node-1").await.ok()?;
        n.spec?
            .taints?
            .iter()
            .any(|t| t.key == "node.kubernetes.io/unschedulable" && t.effect == "NoSchedule")
            .then_some(())
    })
    .await;
    let table = kubectl.ok(&["get", "nodes"]).await;
    assert!(table.contains("Ready,SchedulingDisabled"), "{table}");

    let api: Api<Pod> = Api::default_namespaced(env.client());
    api.create(&PostParams::default(), &sim_support::pod("waits", json!({}))).await.unwrap();
    let message = eventually("the pod to be unschedulable", || async {
        let p = api.get("waits").await.ok()?;
        sim_support::condition(&p, "PodScheduled")?.2
    })
    .await;
    assert_eq!(message, "0/1 nodes are available: 1 node(s) were unschedulable.");

    assert!(kubectl.ok(&["uncordon", "node-1"]).await.contains("node/node-1 uncordoned"));
    eventually("the pod to run on the uncordoned node", || async {
        let p = api.get("waits").await.ok()?;
        (node_of(&p) == "node-1" && sim_support::ready(&p)).then_some(())
    })
    .await;
    let node = nodes.get("node-1").await.unwrap();
    assert!(node.spec.unwrap().taints.is_none());
}

/// `kubectl drain --disable-eviction` deletes pods directly, with a protobuf DeleteOptions body,
/// and waits for them to go; deleted pods stop at once, so it returns long before their
/// ten-minute grace period would end.
async fn drain_without_eviction(client: Client) {
    let Some(bin) = client.binary() else {
        eprintln!("skipped: KUBECTL_NEW is not set (make test sets it after `make venv`)");
        return;
    };
    let env = start(SimConfig::with_nodes(1)).await;
    let deployments: Api<Deployment> = Api::default_namespaced(env.client());
    let graceful = json!({"template": {"spec": {"terminationGracePeriodSeconds": 600}}});
    deployments.create(&PostParams::default(), &deployment("web", 2, graceful)).await.unwrap();
    rolled_out(&env, "web").await;
    let before: Vec<String> = pods(&env, "app=web").await.into_iter().map(|p| p.metadata.name.unwrap()).collect();
    env.sim().unwrap().add_node(NodeSpec::new("node-2")).unwrap();

    let kubectl = Kubectl::new(bin, &env);
    let out = kubectl.ok(&["drain", "node-1", "--disable-eviction", "--ignore-daemonsets", "--timeout=80s"]).await;
    for name in &before {
        assert!(out.contains(&format!("pod/{name} deleted")), "{name} is deleted:\n{out}");
    }
    assert!(out.contains("node/node-1 drained"), "{out}");
    // The Deployment's status may still describe the pods that were deleted, so wait for the
    // replacements themselves rather than for the rollout.
    eventually("both replacements to run on node-2", || async {
        let pods = pods(&env, "app=web").await;
        let moved = pods.len() == 2 && pods.iter().all(|p| node_of(p) == "node-2" && sim_support::ready(p));
        moved.then_some(())
    })
    .await;
    rolled_out(&env, "web").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_with_eviction_disabled_deletes_pods_kubectl_1_32() {
    drain_without_eviction(Client::System).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_with_eviction_disabled_deletes_pods_kubectl_new() {
    drain_without_eviction(Client::New).await;
}

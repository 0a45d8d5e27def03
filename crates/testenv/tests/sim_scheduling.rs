//! Cluster simulation: the scheduler's filters and messages, the kubelet's pod lifecycle and
//! readiness, and simulated nodes (Leases, readiness, taints, removal).

mod sim_support;

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;
use sim_support::{condition, deployment, eventually, pod, pods, ready, rolled_out, start};
use testenv::{NodeSpec, ReadinessPolicy, SimConfig, TerminationPolicy};

fn scheduled_on(p: &Pod) -> Option<String> {
    p.spec.as_ref()?.node_name.clone()
}

async fn unschedulable_message(api: &Api<Pod>, name: &str) -> String {
    eventually(&format!("{name} to be unschedulable"), || async {
        let p = api.get(name).await.ok()?;
        match condition(&p, "PodScheduled")? {
            (status, Some(reason), Some(message)) if status == "False" && reason == "Unschedulable" => Some(message),
            _ => None,
        }
    })
    .await
}

async fn running_on(api: &Api<Pod>, name: &str) -> Pod {
    eventually(&format!("{name} to run"), || async {
        let p = api.get(name).await.ok()?;
        (p.status.as_ref()?.phase.as_deref() == Some("Running")).then_some(p)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anti_affinity_leaves_the_second_pod_pending_until_a_node_is_added() {
    let env = start(SimConfig::with_nodes(1)).await;
    let anti = json!({"template": {"spec": {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "aa"}}, "topologyKey": "kubernetes.io/hostname"}
    ]}}}}});
    let deployments: Api<Deployment> = Api::default_namespaced(env.client());
    deployments.create(&PostParams::default(), &deployment("aa", 2, anti)).await.unwrap();
    let api: Api<Pod> = Api::default_namespaced(env.client());
    let pending = eventually("one pod running and one pending", || async {
        let all = pods(&env, "app=aa").await;
        let running = all.iter().filter(|p| ready(p)).count();
        let pending: Vec<&Pod> = all.iter().filter(|p| scheduled_on(p).is_none()).collect();
        (all.len() == 2 && running == 1 && pending.len() == 1).then(|| pending[0].metadata.name.clone().unwrap())
    })
    .await;
    let message = unschedulable_message(&api, &pending).await;
    assert_eq!(message, "0/1 nodes are available: 1 node(s) didn't match pod anti-affinity rules.");
    let p = api.get(&pending).await.unwrap();
    assert_eq!(p.status.as_ref().unwrap().phase.as_deref(), Some("Pending"));

    // A new node is a reason to try again.
    env.sim().unwrap().add_node(NodeSpec::new("node-2")).unwrap();
    let placed = running_on(&api, &pending).await;
    assert_eq!(scheduled_on(&placed).as_deref(), Some("node-2"));
    assert_eq!(condition(&placed, "PodScheduled").unwrap().0, "True");
    rolled_out(&env, "aa").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scheduler_honours_selectors_taints_cordon_and_resources() {
    let config = SimConfig::default()
        .node(NodeSpec::new("db-1").label("role", "db").taint("dedicated", "db", "NoSchedule"))
        .node(NodeSpec::new("off-1").label("role", "web").cordoned())
        .node(NodeSpec::new("web-1").label("role", "web").capacity("2", "4Gi", 110));
    let env = start(config).await;
    let api: Api<Pod> = Api::default_namespaced(env.client());

    api.create(&PostParams::default(), &pod("front", json!({"spec": {"nodeSelector": {"role": "web"}}})))
        .await
        .unwrap();
    assert_eq!(scheduled_on(&running_on(&api, "front").await).as_deref(), Some("web-1"), "off-1 is cordoned");

    api.create(&PostParams::default(), &pod("store", json!({"spec": {"nodeSelector": {"role": "db"}}}))).await.unwrap();
    assert_eq!(
        unschedulable_message(&api, "store").await,
        "0/3 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, 1 node(s) had untolerated taint {dedicated: db}, 1 node(s) were unschedulable."
    );
    // Tolerating the taint is a change of the pod, which is retried.
    let tolerate = json!({"spec": {"tolerations": [{"key": "dedicated", "operator": "Equal", "value": "db", "effect": "NoSchedule"}]}});
    api.patch("store", &PatchParams::default(), &Patch::Strategic(tolerate)).await.unwrap();
    assert_eq!(scheduled_on(&running_on(&api, "store").await).as_deref(), Some("db-1"));

    let big = json!({"spec": {"nodeSelector": {"role": "web"}, "containers": [{"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "3"}}}]}});
    api.create(&PostParams::default(), &pod("big", big)).await.unwrap();
    assert_eq!(
        unschedulable_message(&api, "big").await,
        "0/3 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint {dedicated: db}, 1 node(s) were unschedulable."
    );

    // Uncordoning off-1 (it has the same 4 CPUs as a default node) lets the big pod in.
    let nodes: Api<Node> = Api::all(env.client());
    let off = nodes.get("off-1").await.unwrap();
    let taints: Vec<String> =
        off.spec.unwrap().taints.unwrap().into_iter().map(|t| format!("{}:{}", t.key, t.effect)).collect();
    assert_eq!(taints, ["node.kubernetes.io/unschedulable:NoSchedule"]);
    nodes
        .patch("off-1", &PatchParams::default(), &Patch::Merge(json!({"spec": {"unschedulable": null}})))
        .await
        .unwrap();
    assert_eq!(scheduled_on(&running_on(&api, "big").await).as_deref(), Some("off-1"));
    let off = eventually("the cordon taint to go", || async {
        let n = nodes.get("off-1").await.ok()?;
        n.spec.as_ref()?.taints.is_none().then_some(n)
    })
    .await;
    assert!(off.spec.unwrap().unschedulable.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_follows_policy_annotation_override_and_readiness_gates() {
    let env = start(SimConfig::with_nodes(1).readiness(ReadinessPolicy::Manual)).await;
    let sim = env.sim().unwrap();
    let api: Api<Pod> = Api::default_namespaced(env.client());
    let annotated = |value: &str| json!({"metadata": {"annotations": {"sim.testenv.giantswarm.io/readiness": value}}});
    api.create(&PostParams::default(), &pod("manual", json!({}))).await.unwrap();
    api.create(&PostParams::default(), &pod("never", annotated("Never"))).await.unwrap();
    api.create(&PostParams::default(), &pod("later", annotated("300ms"))).await.unwrap();
    let gated = json!({
        "metadata": {"annotations": {"sim.testenv.giantswarm.io/readiness": "Immediate"}},
        "spec": {"readinessGates": [{"conditionType": "example.com/node-ready"}]},
    });
    api.create(&PostParams::default(), &pod("gated", gated)).await.unwrap();

    let manual = running_on(&api, "manual").await;
    sim.wait_idle().await.unwrap();
    let manual = api.get("manual").await.unwrap_or(manual);
    assert_eq!(
        condition(&manual, "Ready").unwrap(),
        ("False".into(), Some("ContainersNotReady".into()), Some("containers with unready status: [main]".into()))
    );
    sim.set_pod_ready("default", "manual", true).unwrap();
    eventually("the manual pod to become ready", || async { ready(&api.get("manual").await.ok()?).then_some(()) })
        .await;
    sim.set_pod_ready("default", "manual", false).unwrap();
    eventually("the manual pod to become unready", || async { (!ready(&api.get("manual").await.ok()?)).then_some(()) })
        .await;

    eventually("the delayed pod to become ready", || async { ready(&api.get("later").await.ok()?).then_some(()) })
        .await;

    let gated = eventually("the gated pod to wait for its gate", || async {
        let p = api.get("gated").await.ok()?;
        (condition(&p, "ContainersReady")?.0 == "True").then_some(p)
    })
    .await;
    assert_eq!(
        condition(&gated, "Ready").unwrap(),
        (
            "False".into(),
            Some("ReadinessGatesNotReady".into()),
            Some("corresponding condition of pod readiness gate \"example.com/node-ready\" does not exist.".into())
        )
    );
    // Another controller reports the gate's condition.
    let gate = json!({"status": {"conditions": [{"type": "example.com/node-ready", "status": "True"}]}});
    api.patch_status("gated", &PatchParams::default(), &Patch::Strategic(gate)).await.unwrap();
    eventually("the gated pod to become ready", || async { ready(&api.get("gated").await.ok()?).then_some(()) }).await;

    // The default policy changes: pods without their own follow it; "Never" stays unready.
    sim.set_readiness(ReadinessPolicy::Immediate);
    sim.wait_idle().await.unwrap();
    assert!(!ready(&api.get("never").await.unwrap()));
    assert!(!ready(&api.get("manual").await.unwrap()), "the test's own say outranks the policy");
    assert!(sim.set_pod_ready("default", "missing", true).is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_network_pods_share_the_node_address() {
    let env = start(SimConfig::with_nodes(1)).await;
    let api: Api<Pod> = Api::default_namespaced(env.client());
    api.create(&PostParams::default(), &pod("host", json!({"spec": {"hostNetwork": true}}))).await.unwrap();
    api.create(&PostParams::default(), &pod("plain", json!({}))).await.unwrap();
    let host = running_on(&api, "host").await;
    let plain = running_on(&api, "plain").await;
    let node = Api::<Node>::all(env.client()).get("node-1").await.unwrap();
    let address =
        node.status.unwrap().addresses.unwrap().into_iter().find(|a| a.type_ == "InternalIP").unwrap().address;
    let s = host.status.unwrap();
    assert_eq!(s.pod_ip.as_deref(), Some(address.as_str()));
    assert_eq!(s.host_ip.as_deref(), Some(address.as_str()));
    let p = plain.status.unwrap();
    assert_eq!(p.host_ip.as_deref(), Some(address.as_str()));
    assert_ne!(p.pod_ip.as_deref(), Some(address.as_str()));
    let cidr = node.spec.unwrap().pod_cidr.unwrap();
    assert!(p.pod_ip.unwrap().starts_with(cidr.trim_end_matches("0/24")), "{cidr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_with_a_finalizer_stays_terminating_until_the_finalizer_goes() {
    // Containers that ignore SIGTERM: they are killed when the grace period ends.
    let env = start(SimConfig::with_nodes(1).termination(TerminationPolicy::FullGracePeriod)).await;
    let api: Api<Pod> = Api::default_namespaced(env.client());
    let held = json!({"metadata": {"finalizers": ["example.com/drain"]}, "spec": {"terminationGracePeriodSeconds": 1}});
    api.create(&PostParams::default(), &pod("held", held)).await.unwrap();
    running_on(&api, "held").await;
    api.delete("held", &DeleteParams::default()).await.unwrap();

    // After the grace period the containers are reported killed; the finalizer keeps the pod.
    let terminated = eventually("the containers to be reported terminated", || async {
        let p = api.get("held").await.ok()?;
        (p.status.as_ref()?.phase.as_deref() == Some("Failed")).then_some(p)
    })
    .await;
    assert!(terminated.metadata.deletion_timestamp.is_some());
    assert_eq!(terminated.metadata.deletion_grace_period_seconds, Some(0));
    let state = terminated.status.unwrap().container_statuses.unwrap()[0].state.clone().unwrap();
    assert_eq!(state.terminated.unwrap().exit_code, 137);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(api.get_opt("held").await.unwrap().is_some(), "still there while the finalizer is");

    api.patch("held", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"finalizers": null}}))).await.unwrap();
    eventually("the pod to be gone", || async { api.get_opt("held").await.ok()?.is_none().then_some(()) }).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_renew_leases_report_readiness_and_take_their_pods_when_removed() {
    let env = start(SimConfig::with_nodes(1).lease_renew_interval(Duration::from_millis(200))).await;
    let sim = env.sim().unwrap();
    let leases: Api<Lease> = Api::namespaced(env.client(), "kube-node-lease");
    let first = leases.get("node-1").await.unwrap();
    let spec = first.spec.clone().unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("node-1"));
    assert_eq!(spec.lease_duration_seconds, Some(40));
    assert_eq!(first.metadata.owner_references.unwrap()[0].kind, "Node");
    eventually("the lease to be renewed", || async {
        let l = leases.get("node-1").await.ok()?;
        (l.spec?.renew_time != spec.renew_time).then_some(())
    })
    .await;

    let api: Api<Pod> = Api::default_namespaced(env.client());
    api.create(&PostParams::default(), &pod("on-node", json!({}))).await.unwrap();
    eventually("the pod to be ready", || async { ready(&api.get("on-node").await.ok()?).then_some(()) }).await;

    let nodes: Api<Node> = Api::all(env.client());
    sim.set_node_ready("node-1", false).unwrap();
    let node = eventually("the node to be NotReady and tainted", || async {
        let n = nodes.get("node-1").await.ok()?;
        let tainted = n
            .spec
            .as_ref()?
            .taints
            .iter()
            .flatten()
            .any(|t| t.key == "node.kubernetes.io/not-ready" && t.effect == "NoSchedule");
        tainted.then_some(n)
    })
    .await;
    let cond = node.status.unwrap().conditions.unwrap().into_iter().find(|c| c.type_ == "Ready").unwrap();
    assert_eq!((cond.status.as_str(), cond.reason.as_deref()), ("False", Some("KubeletNotReady")));
    eventually("the pod to become unready", || async { (!ready(&api.get("on-node").await.ok()?)).then_some(()) }).await;
    sim.set_node_ready("node-1", true).unwrap();
    eventually("the pod to be ready again", || async { ready(&api.get("on-node").await.ok()?).then_some(()) }).await;
    assert!(nodes.get("node-1").await.unwrap().spec.unwrap().taints.is_none());

    sim.remove_node("node-1").unwrap();
    eventually("the node, its lease and its pods to be gone", || async {
        let gone = nodes.get_opt("node-1").await.ok()?.is_none()
            && leases.get_opt("node-1").await.ok()?.is_none()
            && api.get_opt("on-node").await.ok()?.is_none();
        gone.then_some(())
    })
    .await;
    assert!(matches!(sim.remove_node("node-1"), Err(testenv::SimError::NodeNotFound(_))));
    assert!(sim.add_node(NodeSpec::new("node-1")).is_ok(), "the name is free again");
    assert!(matches!(sim.add_node(NodeSpec::new("node-1")), Err(testenv::SimError::NodeExists(_))));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn noexecute_taints_evict_pods_that_do_not_tolerate_them() {
    let env = start(SimConfig::with_nodes(1)).await;
    let api: Api<Pod> = Api::default_namespaced(env.client());
    api.create(&PostParams::default(), &pod("plain", json!({}))).await.unwrap();
    let tolerant =
        json!({"spec": {"tolerations": [{"key": "maintenance", "operator": "Exists", "effect": "NoExecute"}]}});
    api.create(&PostParams::default(), &pod("tolerant", tolerant)).await.unwrap();
    running_on(&api, "plain").await;
    running_on(&api, "tolerant").await;

    let nodes: Api<Node> = Api::all(env.client());
    let taint = json!({"spec": {"taints": [{"key": "maintenance", "value": "true", "effect": "NoExecute"}]}});
    nodes.patch("node-1", &PatchParams::default(), &Patch::Merge(taint)).await.unwrap();
    eventually("the intolerant pod to be evicted", || async {
        api.get_opt("plain").await.ok()?.is_none().then_some(())
    })
    .await;
    env.sim().unwrap().wait_idle().await.unwrap();
    let kept = api.get("tolerant").await.unwrap();
    assert!(kept.metadata.deletion_timestamp.is_none() && ready(&kept));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topology_spread_constraints_bound_the_skew_and_steer_placement() {
    let config = SimConfig::default()
        .node(NodeSpec::new("a-1").label("zone", "a"))
        .node(NodeSpec::new("a-2").label("zone", "a"))
        .node(NodeSpec::new("b-1").label("zone", "b").cordoned())
        .node(NodeSpec::new("x-1"));
    let env = start(config).await;
    let api: Api<Pod> = Api::default_namespaced(env.client());
    let spread = |name: &str, app: &str, when: &str| {
        pod(
            name,
            json!({"metadata": {"labels": {"app": app}}, "spec": {"topologySpreadConstraints": [{
                "maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": when,
                "labelSelector": {"matchLabels": {"app": app}},
            }]}}),
        )
    };

    // DoNotSchedule: zone b counts (cordoned, but taints are ignored), x-1 has no zone.
    api.create(&PostParams::default(), &spread("s1", "s", "DoNotSchedule")).await.unwrap();
    assert_eq!(scheduled_on(&running_on(&api, "s1").await).as_deref(), Some("a-1"));
    api.create(&PostParams::default(), &spread("s2", "s", "DoNotSchedule")).await.unwrap();
    assert_eq!(
        unschedulable_message(&api, "s2").await,
        "0/4 nodes are available: 1 node(s) didn't match pod topology spread constraints (missing required label), 1 node(s) were unschedulable, 2 node(s) didn't match pod topology spread constraints."
    );
    let nodes: Api<Node> = Api::all(env.client());
    nodes.patch("b-1", &PatchParams::default(), &Patch::Merge(json!({"spec": {"unschedulable": null}}))).await.unwrap();
    assert_eq!(scheduled_on(&running_on(&api, "s2").await).as_deref(), Some("b-1"));

    // ScheduleAnyway: the zone with fewer such pods wins over the node with fewer pods; a node
    // without the key comes last.
    api.create(&PostParams::default(), &spread("t1", "t", "ScheduleAnyway")).await.unwrap();
    assert_eq!(scheduled_on(&running_on(&api, "t1").await).as_deref(), Some("a-2"));
    api.create(&PostParams::default(), &spread("t2", "t", "ScheduleAnyway")).await.unwrap();
    assert_eq!(
        scheduled_on(&running_on(&api, "t2").await).as_deref(),
        Some("b-1"),
        "zone b has no t pod; x-1, with no pod at all, has no zone"
    );
}

//! The eviction subresource against PodDisruptionBudgets, with and without the simulation,
//! and the disruption controller's budget status.

mod sim_support;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use sim_support::{deployment, eventually, evict, pod, pods, post, ready, start};
use testenv::{ReadinessPolicy, SimConfig, TestEnv};

fn budget(name: &str, app: &str, rule: Value) -> PodDisruptionBudget {
    let mut pdb = json!({
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name},
        "spec": {"selector": {"matchLabels": {"app": app}}},
    });
    sim_support::merge(&mut pdb["spec"], rule);
    serde_json::from_value(pdb).unwrap()
}

/// (currentHealthy, desiredHealthy, expectedPods, disruptionsAllowed) once observed.
async fn figures(api: &Api<PodDisruptionBudget>, name: &str, wanted: (i32, i32, i32, i32)) -> PodDisruptionBudget {
    eventually(&format!("budget {name} to report {wanted:?}"), || async {
        let pdb = api.get(name).await.ok()?;
        let s = pdb.status.as_ref()?;
        let seen = (s.current_healthy, s.desired_healthy, s.expected_pods, s.disruptions_allowed);
        (seen == wanted && s.observed_generation == pdb.metadata.generation).then_some(pdb)
    })
    .await
}

fn allowed_condition(pdb: &PodDisruptionBudget) -> (String, String) {
    let c = pdb
        .status
        .as_ref()
        .unwrap()
        .conditions
        .as_ref()
        .unwrap()
        .iter()
        .find(|c| c.type_ == "DisruptionAllowed")
        .unwrap();
    (c.status.clone(), c.reason.clone())
}

/// Start `n` pods of a Deployment `app` and make exactly them Ready (the default policy is
/// Manual, so replacements stay unready).
async fn ready_pods(env: &TestEnv, app: &str, n: i32) -> Vec<String> {
    let deployments: Api<Deployment> = Api::default_namespaced(env.client());
    deployments.create(&PostParams::default(), &deployment(app, n, json!({}))).await.unwrap();
    let names = eventually("the pods to run", || async {
        let all = pods(env, &format!("app={app}")).await;
        let running: Vec<String> = all
            .iter()
            .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
            .map(|p| p.metadata.name.clone().unwrap())
            .collect();
        (running.len() == usize::try_from(n).unwrap()).then_some(running)
    })
    .await;
    let sim = env.sim().unwrap();
    for name in &names {
        sim.set_pod_ready("default", name, true).unwrap();
    }
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evictions_follow_the_budget_and_its_status() {
    let env = start(SimConfig::with_nodes(2).readiness(ReadinessPolicy::Manual)).await;
    let pdbs: Api<PodDisruptionBudget> = Api::default_namespaced(env.client());
    pdbs.create(&PostParams::default(), &budget("guard", "guarded", json!({"minAvailable": 2}))).await.unwrap();
    let names = ready_pods(&env, "guarded", 3).await;
    let pdb = figures(&pdbs, "guard", (3, 2, 3, 1)).await;
    assert_eq!(allowed_condition(&pdb), ("True".into(), "SufficientPods".into()));

    let (code, body) = evict(&env, &names[0]).await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(body["status"], "Success");
    // The replacement does not become Ready (Manual), so the budget is spent.
    let (code, body) = evict(&env, &names[1]).await;
    assert_eq!(code, 429, "{body}");
    assert_eq!(body["reason"], "TooManyRequests");
    assert_eq!(body["message"], "Cannot evict pod as it would violate the pod's disruption budget.");
    assert_eq!(
        body["details"]["causes"],
        json!([{"reason": "DisruptionBudget", "message": "The disruption budget guard needs 2 healthy pods and has 2 currently"}])
    );
    let pdb = figures(&pdbs, "guard", (2, 2, 3, 0)).await;
    assert_eq!(allowed_condition(&pdb), ("False".into(), "InsufficientPods".into()));

    // An unready pod may go while the budget is met without it (IfHealthyBudget).
    let api: Api<Pod> = Api::default_namespaced(env.client());
    let replacement = eventually("the unready replacement", || async {
        let all = pods(&env, "app=guarded").await;
        all.into_iter()
            .find(|p| !ready(p) && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
            .and_then(|p| p.metadata.name)
    })
    .await;
    assert_eq!(evict(&env, &replacement).await.0, 201);

    // Below the budget, an unready pod is protected too, unless the policy says AlwaysAllow.
    env.sim().unwrap().set_pod_ready("default", &names[1], false).unwrap();
    figures(&pdbs, "guard", (1, 2, 3, 0)).await;
    assert_eq!(evict(&env, &names[1]).await.0, 429);
    let always = json!({"spec": {"unhealthyPodEvictionPolicy": "AlwaysAllow"}});
    pdbs.patch("guard", &PatchParams::default(), &Patch::Merge(always)).await.unwrap();
    assert_eq!(evict(&env, &names[1]).await.0, 201);
    assert_eq!(evict(&env, &names[2]).await.0, 429, "a Ready pod still needs an allowed disruption");
    eventually("the evicted pods to be gone", || async {
        let left = api.get_opt(&names[1]).await.ok()?.is_none() && api.get_opt(&names[0]).await.ok()?.is_none();
        left.then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn percentages_count_the_controllers_scale() {
    let env = start(SimConfig::with_nodes(1)).await;
    let pdbs: Api<PodDisruptionBudget> = Api::default_namespaced(env.client());
    pdbs.create(&PostParams::default(), &budget("half", "web", json!({"maxUnavailable": "50%"}))).await.unwrap();
    pdbs.create(&PostParams::default(), &budget("most", "api", json!({"minAvailable": "60%"}))).await.unwrap();
    let deployments: Api<Deployment> = Api::default_namespaced(env.client());
    deployments.create(&PostParams::default(), &deployment("web", 3, json!({}))).await.unwrap();
    deployments.create(&PostParams::default(), &deployment("api", 3, json!({}))).await.unwrap();
    // 50% of 3 rounded up may be unavailable: 3 − 2 = 1 must stay; 60% of 3 rounded up is 2.
    figures(&pdbs, "half", (3, 1, 3, 2)).await;
    figures(&pdbs, "most", (3, 2, 3, 1)).await;
    // Scaling the Deployment changes the expected count even before pods exist.
    deployments.patch("web", &PatchParams::default(), &Patch::Merge(json!({"spec": {"replicas": 6}}))).await.unwrap();
    figures(&pdbs, "half", (6, 3, 6, 3)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_evictions_never_overspend_a_budget() {
    let env = start(SimConfig::with_nodes(2).readiness(ReadinessPolicy::Manual)).await;
    let pdbs: Api<PodDisruptionBudget> = Api::default_namespaced(env.client());
    pdbs.create(&PostParams::default(), &budget("one", "race", json!({"maxUnavailable": 1}))).await.unwrap();
    let names = ready_pods(&env, "race", 4).await;
    figures(&pdbs, "one", (4, 3, 4, 1)).await;
    let results = futures::future::join_all(names.iter().map(|n| evict(&env, n))).await;
    let mut codes: Vec<u16> = results.iter().map(|(c, _)| *c).collect();
    codes.sort_unstable();
    assert_eq!(codes, [201, 429, 429, 429], "{results:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_under_two_budgets_cannot_be_evicted() {
    let env = start(SimConfig::with_nodes(1)).await;
    let pdbs: Api<PodDisruptionBudget> = Api::default_namespaced(env.client());
    pdbs.create(&PostParams::default(), &budget("a", "twice", json!({"maxUnavailable": 1}))).await.unwrap();
    pdbs.create(&PostParams::default(), &budget("b", "twice", json!({"maxUnavailable": 1}))).await.unwrap();
    let api: Api<Pod> = Api::default_namespaced(env.client());
    api.create(&PostParams::default(), &pod("twice", json!({}))).await.unwrap();
    eventually("the pod to be ready", || async { ready(&api.get("twice").await.ok()?).then_some(()) }).await;
    let (code, body) = evict(&env, "twice").await;
    assert_eq!(code, 500, "{body}");
    assert_eq!(
        body["message"],
        "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
    );
    assert!(body.get("reason").is_none());
    assert!(api.get_opt("twice").await.unwrap().is_some());
}

/// Without the simulation there is no disruption controller, but evictions still respect
/// budgets: the figures are computed when the eviction is decided.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn budgets_apply_without_the_simulation() {
    let env = TestEnv::start().await.unwrap();
    let api: Api<Pod> = Api::default_namespaced(env.client());
    for name in ["solo", "waiting"] {
        let bound = json!({"metadata": {"labels": {"app": "solo"}}, "spec": {"nodeName": "node-x"}});
        api.create(&PostParams::default(), &pod(name, bound)).await.unwrap();
    }
    let running = json!({"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}});
    api.patch_status("solo", &PatchParams::default(), &Patch::Merge(running)).await.unwrap();
    let pdbs: Api<PodDisruptionBudget> = Api::default_namespaced(env.client());
    pdbs.create(&PostParams::default(), &budget("keep", "solo", json!({"minAvailable": 1}))).await.unwrap();

    let (code, body) = evict(&env, "solo").await;
    assert_eq!(code, 429, "{body}");
    assert_eq!(
        body["details"]["causes"][0]["message"],
        "The disruption budget keep needs 1 healthy pods and has 1 currently"
    );
    assert!(
        pdbs.get("keep").await.unwrap().status.is_none_or(|s| s.observed_generation.is_none()),
        "no controller, no status"
    );

    // A dry run answers without deleting; a Pending pod is not protected.
    let dry = json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "waiting"}, "deleteOptions": {"dryRun": ["All"]}});
    assert_eq!(post(&env, "/api/v1/namespaces/default/pods/waiting/eviction", &dry).await.0, 201);
    assert!(api.get_opt("waiting").await.unwrap().is_some());
    assert_eq!(evict(&env, "waiting").await.0, 201);
    assert!(api.get("waiting").await.map(|p| p.metadata.deletion_timestamp.is_some()).unwrap_or(true));

    pdbs.patch("keep", &PatchParams::default(), &Patch::Merge(json!({"spec": {"minAvailable": 0}}))).await.unwrap();
    assert_eq!(evict(&env, "solo").await.0, 201);
}

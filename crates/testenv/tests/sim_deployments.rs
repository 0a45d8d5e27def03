//! Cluster simulation: Deployments become Available, roll out RollingUpdate and Recreate
//! changes as upstream's controller does, scale, and are garbage-collected with their
//! ReplicaSets and pods.

mod sim_support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use serde_json::json;
use sim_support::{deployment, eventually, pods, ready, rolled_out, start};
use testenv::{ReadinessPolicy, SimConfig};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deployment_becomes_available_with_hashed_replicaset_and_running_pods() {
    // Leases renew hourly here, so that an idle cluster must write nothing at all.
    let env = start(SimConfig::with_nodes(2).lease_renew_interval(Duration::from_secs(3600))).await;
    let deployments: Api<Deployment> = Api::default_namespaced(env.client());
    deployments.create(&PostParams::default(), &deployment("web", 3, json!({}))).await.unwrap();

    let d = rolled_out(&env, "web").await;
    let status = d.status.clone().unwrap();
    assert_eq!(status.observed_generation, d.metadata.generation);
    assert_eq!(
        (
            status.replicas,
            status.updated_replicas,
            status.ready_replicas,
            status.available_replicas,
            status.unavailable_replicas
        ),
        (Some(3), Some(3), Some(3), Some(3), None)
    );
    let conditions: BTreeMap<String, (String, String, String)> = status
        .conditions
        .unwrap()
        .into_iter()
        .map(|c| (c.type_, (c.status, c.reason.unwrap_or_default(), c.message.unwrap_or_default())))
        .collect();
    assert_eq!(
        conditions["Available"],
        ("True".into(), "MinimumReplicasAvailable".into(), "Deployment has minimum availability.".into())
    );

    // One ReplicaSet named after the template hash, which labels it, its selector and its pods.
    let replicasets: Api<ReplicaSet> = Api::default_namespaced(env.client());
    let rs_list = replicasets.list(&ListParams::default().labels("app=web")).await.unwrap().items;
    assert_eq!(rs_list.len(), 1);
    let rs = &rs_list[0];
    let hash = rs.metadata.labels.as_ref().unwrap()["pod-template-hash"].clone();
    let rs_name = rs.metadata.name.clone().unwrap();
    assert_eq!(rs_name, format!("web-{hash}"));
    let rs_spec = rs.spec.as_ref().unwrap();
    assert_eq!(rs_spec.selector.match_labels.as_ref().unwrap()["pod-template-hash"], hash);
    assert_eq!(
        rs_spec.template.as_ref().unwrap().metadata.as_ref().unwrap().labels.as_ref().unwrap()["pod-template-hash"],
        hash
    );
    let owner = &rs.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
        ("Deployment", d.metadata.uid.as_deref().unwrap(), Some(true))
    );
    let annotations = rs.metadata.annotations.as_ref().unwrap();
    assert_eq!(annotations["deployment.kubernetes.io/revision"], "1");
    assert_eq!(annotations["deployment.kubernetes.io/desired-replicas"], "3");
    assert_eq!(annotations["deployment.kubernetes.io/max-replicas"], "4", "3 + 25% surge rounded up");
    assert_eq!(d.metadata.annotations.as_ref().unwrap()["deployment.kubernetes.io/revision"], "1");
    assert_eq!(
        conditions["Progressing"],
        (
            "True".into(),
            "NewReplicaSetAvailable".into(),
            format!("ReplicaSet \"{rs_name}\" has successfully progressed.")
        )
    );

    let pods = pods(&env, "app=web").await;
    assert_eq!(pods.len(), 3);
    let mut ips = BTreeSet::new();
    let mut nodes = BTreeSet::new();
    for p in &pods {
        assert!(p.metadata.name.as_deref().unwrap().starts_with(&format!("{rs_name}-")));
        assert_eq!(p.metadata.labels.as_ref().unwrap()["pod-template-hash"], hash);
        let owner = &p.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!((owner.kind.as_str(), owner.name.as_str()), ("ReplicaSet", rs_name.as_str()));
        let s = p.status.as_ref().unwrap();
        assert_eq!(s.phase.as_deref(), Some("Running"));
        assert!(ready(p));
        assert!(s.pod_ip.as_deref().unwrap().starts_with("10.24"), "pod IPs come from the node's pod CIDR");
        ips.insert(s.pod_ip.clone().unwrap());
        nodes.insert(p.spec.as_ref().unwrap().node_name.clone().unwrap());
        let c = &s.container_statuses.as_ref().unwrap()[0];
        assert!(c.ready && c.started == Some(true));
        assert!(c.state.as_ref().unwrap().running.is_some());
        assert!(c.container_id.as_deref().unwrap().starts_with("containerd://"));
    }
    assert_eq!(ips.len(), 3, "pod IPs are unique");
    assert_eq!(nodes.len(), 2, "pods spread over the nodes");

    // Idle: nothing is written any more.
    let sim = env.sim().unwrap();
    sim.wait_idle().await.unwrap();
    let before = env.handle().resource_version();
    tokio::time::sleep(Duration::from_millis(500)).await;
    sim.wait_idle().await.unwrap();
    assert_eq!(env.handle().resource_version(), before, "an idle simulation writes nothing");
}

/// What a pod looks like at one point of the watch.
#[derive(Clone, Debug)]
struct Seen {
    name: String,
    hash: String,
    ready: bool,
    /// Deleted, or marked for deletion.
    gone: bool,
}

/// One step of the pod history, in the server's order.
#[derive(Debug)]
enum Step {
    Added(Seen),
    Changed(Seen),
}

impl Step {
    fn seen(&self) -> &Seen {
        match self {
            Step::Added(s) | Step::Changed(s) => s,
        }
    }
}

/// Follow the pods of `selector` from now until `stop`; the current pods come first, as ADDED.
async fn watch_pods(
    env: &testenv::TestEnv,
    selector: &str,
) -> (tokio::task::JoinHandle<Vec<Step>>, tokio::sync::oneshot::Sender<()>) {
    let api: Api<Pod> = Api::default_namespaced(env.client());
    let stream = api.watch(&WatchParams::default().labels(selector).timeout(290), "0").await.unwrap();
    let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let mut stream = stream.boxed();
        let mut steps = Vec::new();
        let seen = |p: &Pod, deleted: bool| Seen {
            name: p.metadata.name.clone().unwrap(),
            hash: p.metadata.labels.as_ref().unwrap()["pod-template-hash"].clone(),
            ready: ready(p),
            gone: deleted || p.metadata.deletion_timestamp.is_some(),
        };
        loop {
            let event = tokio::select! {
                _ = &mut stopped => return steps,
                e = stream.try_next() => match e { Ok(Some(e)) => e, _ => return steps },
            };
            match event {
                WatchEvent::Added(p) => steps.push(Step::Added(seen(&p, false))),
                WatchEvent::Modified(p) => steps.push(Step::Changed(seen(&p, false))),
                WatchEvent::Deleted(p) => steps.push(Step::Changed(seen(&p, true))),
                _ => {}
            }
        }
    });
    (task, stop)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rolling_update_replaces_pods_one_by_one() {
    let env = start(SimConfig::with_nodes(3).readiness(ReadinessPolicy::After(Duration::from_millis(200)))).await;
    let deployments: Api<Deployment> = Api::default_namespaced(env.client());
    let strategy =
        json!({"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}});
    deployments.create(&PostParams::default(), &deployment("roll", 3, strategy)).await.unwrap();
    let before = rolled_out(&env, "roll").await;
    let (watch, stop) = watch_pods(&env, "app=roll").await;

    let change = json!({"spec": {"template": {"spec": {"containers": [{"name": "web", "image": "nginx:1.28"}]}}}});
    deployments.patch("roll", &PatchParams::default(), &Patch::Strategic(change)).await.unwrap();
    let after = rolled_out(&env, "roll").await;
    assert_ne!(after.metadata.generation, before.metadata.generation);
    assert_eq!(after.metadata.annotations.as_ref().unwrap()["deployment.kubernetes.io/revision"], "2");
    let _ = stop.send(());
    let steps = watch.await.unwrap();

    // Replay the history: the pods as they were after each step.
    let initial: BTreeSet<String> = steps.iter().take(3).map(|s| s.seen().hash.clone()).collect();
    assert_eq!(initial.len(), 1, "the watch starts with the three old pods");
    let old_hash = initial.into_iter().next().unwrap();
    let mut state: BTreeMap<String, Seen> = BTreeMap::new();
    let mut new_created = Vec::new();
    for (i, step) in steps.iter().enumerate() {
        let seen = step.seen().clone();
        if let Step::Added(s) = step
            && s.hash != old_hash
        {
            // maxSurge 1: each new pod comes only once the previous new one is Ready.
            let unready_new = state.values().filter(|p| p.hash != old_hash && !p.gone && !p.ready).count();
            assert_eq!(unready_new, 0, "new pod {} created while another new pod was not Ready: {steps:#?}", s.name);
            new_created.push(s.name.clone());
        }
        state.insert(seen.name.clone(), seen);
        if i >= 3 {
            // maxUnavailable 0: three Ready pods at all times.
            let ready = state.values().filter(|p| !p.gone && p.ready).count();
            assert!(ready >= 3, "only {ready} Ready pods after step {i}: {steps:#?}");
        }
    }
    assert_eq!(new_created.len(), 3, "{steps:#?}");
    let old_gone = state.values().filter(|p| p.hash == old_hash && p.gone).count();
    assert_eq!(old_gone, 3);
    let live: Vec<&Seen> = state.values().filter(|p| !p.gone).collect();
    assert!(live.len() == 3 && live.iter().all(|p| p.hash != old_hash && p.ready));

    // The old ReplicaSet stays, scaled to zero, as history.
    let replicasets: Api<ReplicaSet> = Api::default_namespaced(env.client());
    let sizes: BTreeMap<String, i32> = replicasets
        .list(&ListParams::default().labels("app=roll"))
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|rs| (rs.metadata.labels.unwrap()["pod-template-hash"].clone(), rs.spec.unwrap().replicas.unwrap()))
        .collect();
    assert_eq!(sizes.len(), 2);
    assert_eq!(sizes[&old_hash], 0);
    assert_eq!(sizes.values().sum::<i32>(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recreate_replaces_all_pods_at_once_after_the_old_ones_are_gone() {
    let env = start(SimConfig::with_nodes(2)).await;
    let deployments: Api<Deployment> = Api::default_namespaced(env.client());
    let spec = json!({"strategy": {"type": "Recreate"}, "template": {"spec": {"terminationGracePeriodSeconds": 1}}});
    deployments.create(&PostParams::default(), &deployment("redo", 2, spec)).await.unwrap();
    rolled_out(&env, "redo").await;
    let (watch, stop) = watch_pods(&env, "app=redo").await;

    let change = json!({"spec": {"template": {"metadata": {"annotations": {"rev": "2"}}}}});
    deployments.patch("redo", &PatchParams::default(), &Patch::Merge(change)).await.unwrap();
    rolled_out(&env, "redo").await;
    let _ = stop.send(());
    let steps = watch.await.unwrap();

    // Both old pods are going before the first new pod comes.
    let old_hash = steps[0].seen().hash.clone();
    let first_new = steps.iter().position(|s| matches!(s, Step::Added(p) if p.hash != old_hash)).expect("new pods");
    let going: BTreeSet<&str> =
        steps[..first_new].iter().map(Step::seen).filter(|p| p.gone).map(|p| p.name.as_str()).collect();
    assert_eq!(going.len(), 2, "{steps:#?}");
    let current = pods(&env, "app=redo").await;
    assert_eq!(current.len(), 2);
    assert!(current.iter().all(|p| p.metadata.deletion_timestamp.is_none() && ready(p)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scaling_resizes_the_replicaset_and_deleting_cascades() {
    let env = start(SimConfig::with_nodes(1)).await;
    let deployments: Api<Deployment> = Api::default_namespaced(env.client());
    deployments.create(&PostParams::default(), &deployment("scale", 2, json!({}))).await.unwrap();
    rolled_out(&env, "scale").await;

    deployments.patch("scale", &PatchParams::default(), &Patch::Merge(json!({"spec": {"replicas": 5}}))).await.unwrap();
    rolled_out(&env, "scale").await;
    assert_eq!(pods(&env, "app=scale").await.len(), 5);
    deployments.patch("scale", &PatchParams::default(), &Patch::Merge(json!({"spec": {"replicas": 1}}))).await.unwrap();
    let d = rolled_out(&env, "scale").await;
    eventually("surplus pods to go", || async { (pods(&env, "app=scale").await.len() == 1).then_some(()) }).await;
    let replicasets: Api<ReplicaSet> = Api::default_namespaced(env.client());
    let rs = replicasets.list(&ListParams::default().labels("app=scale")).await.unwrap().items;
    assert_eq!(rs.len(), 1, "scaling is not a new revision");
    assert_eq!(rs[0].metadata.annotations.as_ref().unwrap()["deployment.kubernetes.io/desired-replicas"], "1");
    assert_eq!(d.metadata.annotations.as_ref().unwrap()["deployment.kubernetes.io/revision"], "1");

    deployments.delete("scale", &DeleteParams::foreground()).await.unwrap();
    eventually("the deployment, its ReplicaSet and its pods to be gone", || async {
        let gone = deployments.get_opt("scale").await.ok()?.is_none()
            && replicasets.list(&ListParams::default().labels("app=scale")).await.ok()?.items.is_empty()
            && pods(&env, "app=scale").await.is_empty();
        gone.then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollout_that_never_becomes_ready_times_out() {
    let env = start(SimConfig::with_nodes(1).readiness(ReadinessPolicy::Never)).await;
    let deployments: Api<Deployment> = Api::default_namespaced(env.client());
    deployments
        .create(&PostParams::default(), &deployment("stuck", 1, json!({"progressDeadlineSeconds": 1})))
        .await
        .unwrap();
    let progressing = eventually("the progress deadline to pass", || async {
        let d = deployments.get("stuck").await.ok()?;
        let c = d.status?.conditions?.into_iter().find(|c| c.type_ == "Progressing")?;
        (c.reason.as_deref() == Some("ProgressDeadlineExceeded")).then_some(c)
    })
    .await;
    assert_eq!(progressing.status, "False");
    assert!(progressing.message.unwrap().ends_with("has timed out progressing."));
    let d = deployments.get("stuck").await.unwrap();
    let available = d.status.unwrap().conditions.unwrap().into_iter().find(|c| c.type_ == "Available").unwrap();
    assert_eq!((available.status.as_str(), available.reason.as_deref()), ("False", Some("MinimumReplicasUnavailable")));
}

//! The simulation's Job controller, pods that run to completion, and how fast deleted pods go.

mod sim_support;

use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use serde_json::{Value, json};
use sim_support::{eventually, pod, pods, start};
use testenv::{COMPLETION_ANNOTATION, CompletionPolicy, EXIT_CODE_ANNOTATION, SimConfig, TerminationPolicy};

/// A Job whose pods (`restartPolicy` from `restart`) carry `annotations`; `spec` is merged in.
fn job(name: &str, restart: &str, annotations: Value, spec: Value) -> Job {
    let mut j = json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "template": {
                "metadata": {"annotations": annotations},
                "spec": {"restartPolicy": restart, "containers": [{"name": "work", "image": "busybox:1.36"}]},
            },
        },
    });
    sim_support::merge(&mut j["spec"], spec);
    serde_json::from_value(j).expect("a valid Job")
}

fn condition<'a>(job: &'a Job, type_: &str) -> Option<&'a k8s_openapi::api::batch::v1::JobCondition> {
    job.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == type_ && c.status == "True")
}

async fn finished(jobs: &Api<Job>, name: &str, type_: &str) -> Job {
    eventually(&format!("job {name} to be {type_}"), || async {
        let j = jobs.get(name).await.ok()?;
        condition(&j, type_).is_some().then_some(j)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_runs_its_completions_in_parallel_and_completes() {
    let env = start(SimConfig::with_nodes(2)).await;
    let jobs: Api<Job> = Api::default_namespaced(env.client());
    let spec = json!({"completions": 3, "parallelism": 2});
    jobs.create(&PostParams::default(), &job("batch", "Never", json!({COMPLETION_ANNOTATION: "300ms"}), spec))
        .await
        .unwrap();

    let done = finished(&jobs, "batch", "Complete").await;
    let status = done.status.clone().unwrap();
    assert_eq!(status.succeeded, Some(3));
    assert_eq!(status.failed, None);
    assert_eq!(status.active, None);
    assert!(status.start_time.is_some() && status.completion_time.is_some());
    let complete = condition(&done, "Complete").unwrap();
    assert_eq!(complete.reason.as_deref(), Some("CompletionsReached"));
    assert!(condition(&done, "SuccessCriteriaMet").is_some());

    let uid = done.metadata.uid.clone().unwrap();
    let ran = pods(&env, &format!("batch.kubernetes.io/controller-uid={uid}")).await;
    assert_eq!(ran.len(), 3, "one pod per completion");
    for p in &ran {
        let s = p.status.as_ref().unwrap();
        assert_eq!(s.phase.as_deref(), Some("Succeeded"), "{p:?}");
        let terminated = s.container_statuses.as_ref().unwrap()[0].state.clone().unwrap().terminated.unwrap();
        assert_eq!((terminated.exit_code, terminated.reason.as_deref()), (0, Some("Completed")));
        let owner = &p.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!((owner.kind.as_str(), owner.controller), ("Job", Some(true)));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_beyond_the_backoff_limit_fail_the_job() {
    let env = start(SimConfig::with_nodes(1)).await;
    let jobs: Api<Job> = Api::default_namespaced(env.client());
    let failing = json!({EXIT_CODE_ANNOTATION: "3"});
    jobs.create(&PostParams::default(), &job("doomed", "Never", failing, json!({"backoffLimit": 1}))).await.unwrap();

    let failed = finished(&jobs, "doomed", "Failed").await;
    let c = condition(&failed, "Failed").unwrap();
    assert_eq!(c.reason.as_deref(), Some("BackoffLimitExceeded"));
    assert_eq!(c.message.as_deref(), Some("Job has reached the specified backoff limit"));
    assert!(condition(&failed, "FailureTarget").is_some());
    assert_eq!(failed.status.as_ref().unwrap().failed, Some(2), "backoffLimit 1 allows one retry");
    let uid = failed.metadata.uid.clone().unwrap();
    let ran = pods(&env, &format!("batch.kubernetes.io/controller-uid={uid}")).await;
    assert_eq!(ran.len(), 2);
    for p in &ran {
        let terminated = p.status.as_ref().unwrap().container_statuses.as_ref().unwrap()[0]
            .state
            .clone()
            .unwrap()
            .terminated
            .unwrap();
        assert_eq!((terminated.exit_code, terminated.reason.as_deref()), (3, Some("Error")));
        assert_eq!(p.status.as_ref().unwrap().phase.as_deref(), Some("Failed"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_failure_pods_restart_until_the_backoff_limit() {
    // The full grace period keeps the pod the failed Job deletes, to look at.
    let env = start(SimConfig::with_nodes(1).termination(TerminationPolicy::FullGracePeriod)).await;
    let jobs: Api<Job> = Api::default_namespaced(env.client());
    let failing = json!({EXIT_CODE_ANNOTATION: "1"});
    jobs.create(&PostParams::default(), &job("crashy", "OnFailure", failing, json!({"backoffLimit": 2})))
        .await
        .unwrap();
    let failed = finished(&jobs, "crashy", "Failed").await;
    assert_eq!(condition(&failed, "Failed").unwrap().reason.as_deref(), Some("BackoffLimitExceeded"));
    // The one pod was restarted in place, then deleted with the Job's failure.
    let uid = failed.metadata.uid.clone().unwrap();
    let api: Api<Pod> = Api::default_namespaced(env.client());
    let ran =
        api.list(&ListParams::default().labels(&format!("batch.kubernetes.io/controller-uid={uid}"))).await.unwrap();
    assert_eq!(ran.items.len(), 1, "OnFailure restarts the containers instead of making pods");
    let pod = &ran.items[0];
    assert!(pod.metadata.deletion_timestamp.is_some(), "the failed Job deletes its running pod");
    let status = pod.status.as_ref().unwrap().container_statuses.as_ref().unwrap()[0].clone();
    assert_eq!(status.restart_count, 2);
    let last = status.last_state.unwrap().terminated.unwrap();
    assert_eq!((last.exit_code, last.reason.as_deref()), (1, Some("Error")));
    assert_eq!(failed.status.as_ref().unwrap().failed, Some(1), "the deleted pod counts as failed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finished_jobs_go_after_their_ttl_with_their_pods() {
    let env = start(SimConfig::with_nodes(1)).await;
    let jobs: Api<Job> = Api::default_namespaced(env.client());
    // Watched from before its creation: with a TTL of one second the Job is Complete only
    // briefly, a window a poll on a loaded machine can miss.
    let mut events = jobs.watch(&WatchParams::default().fields("metadata.name=brief"), "0").await.unwrap().boxed();
    jobs.create(&PostParams::default(), &job("brief", "Never", json!({}), json!({"ttlSecondsAfterFinished": 1})))
        .await
        .unwrap();
    let mut done: Option<Job> = None;
    let deleted = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(event) = events.try_next().await.unwrap() {
            match event {
                WatchEvent::Added(j) | WatchEvent::Modified(j)
                    if done.is_none() && condition(&j, "Complete").is_some() =>
                {
                    done = Some(j);
                }
                WatchEvent::Deleted(j) => return Some(j),
                _ => {}
            }
        }
        None
    })
    .await
    .expect("the job to be deleted within 60 s")
    .expect("the watch ended before the job was deleted");
    let done = done.expect("the job was Complete before it was deleted");
    let finished_at = done.status.as_ref().and_then(|s| s.completion_time.clone()).expect("a completion time");
    assert_eq!(deleted.metadata.uid, done.metadata.uid, "the deleted Job is the one that finished");
    let uid = done.metadata.uid.clone().unwrap();
    // Deleted no sooner than its TTL after it finished.
    let elapsed = jiff::Timestamp::now().duration_since(finished_at.0);
    assert!(elapsed >= jiff::SignedDuration::from_secs(1), "deleted {elapsed:?} after it finished");
    eventually("its pods to be collected", || async {
        pods(&env, &format!("batch.kubernetes.io/controller-uid={uid}")).await.is_empty().then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_that_are_not_restarted_complete_by_their_annotation_or_the_default() {
    let env = start(SimConfig::with_nodes(1).completion(CompletionPolicy::Never)).await;
    let api: Api<Pod> = Api::default_namespaced(env.client());
    let never = json!({"spec": {"restartPolicy": "Never"}});
    api.create(&PostParams::default(), &pod("runs-on", never.clone())).await.unwrap();
    let timed = json!({"metadata": {"annotations": {COMPLETION_ANNOTATION: "1s"}}, "spec": {"restartPolicy": "Never"}});
    api.create(&PostParams::default(), &pod("timed", timed)).await.unwrap();
    let always = json!({"metadata": {"annotations": {COMPLETION_ANNOTATION: "immediate"}}});
    api.create(&PostParams::default(), &pod("service", always)).await.unwrap();

    let phase = |name: &'static str| {
        let api = api.clone();
        async move { api.get(name).await.ok()?.status?.phase }
    };
    eventually("the timed pod to run, then succeed", || async {
        (phase("timed").await.as_deref() == Some("Succeeded")).then_some(())
    })
    .await;
    env.sim().unwrap().wait_idle().await.unwrap();
    assert_eq!(phase("runs-on").await.as_deref(), Some("Running"), "the default here is Never");
    assert_eq!(phase("service").await.as_deref(), Some("Running"), "restartPolicy Always pods never complete");
    let done = api.get("timed").await.unwrap().status.unwrap();
    let ready = done.conditions.unwrap().into_iter().find(|c| c.type_ == "Ready").unwrap();
    assert_eq!((ready.status.as_str(), ready.reason.as_deref()), ("False", Some("PodCompleted")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleted_pods_stop_at_once_by_default() {
    let env = start(SimConfig::with_nodes(1)).await;
    let api: Api<Pod> = Api::default_namespaced(env.client());
    // A long grace period that the containers do not need.
    let slow = json!({"spec": {"terminationGracePeriodSeconds": 600}});
    api.create(&PostParams::default(), &pod("quick", slow.clone())).await.unwrap();
    let held =
        json!({"metadata": {"finalizers": ["example.com/hold"]}, "spec": {"terminationGracePeriodSeconds": 600}});
    api.create(&PostParams::default(), &pod("held", held)).await.unwrap();
    for name in ["quick", "held"] {
        eventually("the pod to run", || async {
            (api.get(name).await.ok()?.status?.phase.as_deref() == Some("Running")).then_some(())
        })
        .await;
    }
    api.delete("quick", &DeleteParams::default()).await.unwrap();
    api.delete("held", &DeleteParams::default()).await.unwrap();
    eventually("the deleted pod to go long before its grace period ends", || async {
        api.get_opt("quick").await.ok()?.is_none().then_some(())
    })
    .await;
    // The finalizer keeps the other: its containers are reported stopped on SIGTERM.
    let stopped = eventually("the held pod's containers to stop", || async {
        let p = api.get("held").await.ok()?;
        (p.status.as_ref()?.phase.as_deref() == Some("Failed")).then_some(p)
    })
    .await;
    assert_eq!(stopped.metadata.deletion_grace_period_seconds, Some(0), "the kubelet deleted it with grace 0");
    let terminated = stopped.status.unwrap().container_statuses.unwrap()[0].state.clone().unwrap().terminated.unwrap();
    assert_eq!(terminated.exit_code, 143);
    api.patch("held", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"finalizers": null}}))).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_full_grace_period_is_an_option() {
    let env = start(SimConfig::with_nodes(1).termination(TerminationPolicy::FullGracePeriod)).await;
    let api: Api<Pod> = Api::default_namespaced(env.client());
    api.create(&PostParams::default(), &pod("patient", json!({"spec": {"terminationGracePeriodSeconds": 600}})))
        .await
        .unwrap();
    eventually("the pod to run", || async {
        (api.get("patient").await.ok()?.status?.phase.as_deref() == Some("Running")).then_some(())
    })
    .await;
    api.delete("patient", &DeleteParams::default()).await.unwrap();
    env.sim().unwrap().wait_idle().await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let p = api.get("patient").await.expect("the pod waits out its grace period");
    assert!(p.metadata.deletion_timestamp.is_some());
    assert_eq!(p.metadata.deletion_grace_period_seconds, Some(600));
    assert_eq!(p.status.unwrap().phase.as_deref(), Some("Running"));
    // A shorter grace period ends it.
    api.delete("patient", &DeleteParams { grace_period_seconds: Some(0), ..DeleteParams::default() }).await.unwrap();
    eventually("the pod to go", || async { api.get_opt("patient").await.ok()?.is_none().then_some(()) }).await;
}

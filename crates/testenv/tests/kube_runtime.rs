//! kube-runtime end to end against testenv: `watcher`, `reflector`, `Controller` and the
//! `finalizer` helper, including recovery from a forced `410 Expired` and from closed watches.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::finalizer::{Event as Finalizer, finalizer};
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::watcher::{self, Event};
use kube::runtime::{Controller, WatchStreamExt};
use testenv::{RequestMatch, TestEnv, Verb};
use tokio::time::timeout;

const WAIT: Duration = Duration::from_secs(20);

fn cm(name: &str, value: &str) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.into());
    cm.data = Some([("v".to_string(), value.to_string())].into());
    cm
}

async fn eventually<F: Fn() -> bool>(what: &str, f: F) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !f() {
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn reflector_follows_creates_updates_and_deletes() {
    let env = TestEnv::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    api.create(&PostParams::default(), &cm("a", "1")).await.unwrap();
    let (reader, writer) = reflector::store();
    let stream = reflector::reflector(writer, watcher::watcher(api.clone(), watcher::Config::default()));
    let task = tokio::spawn(stream.applied_objects().for_each(|_| async {}));
    timeout(WAIT, reader.wait_until_ready()).await.unwrap().unwrap();
    assert_eq!(reader.get(&ObjectRef::new("a").within("default")).unwrap().data.as_ref().unwrap()["v"], "1");

    api.create(&PostParams::default(), &cm("b", "1")).await.unwrap();
    api.patch("a", &PatchParams::default(), &Patch::Merge(serde_json::json!({"data": {"v": "2"}}))).await.unwrap();
    api.delete("b", &DeleteParams::default()).await.unwrap();
    api.create(&PostParams::default(), &cm("c", "1")).await.unwrap();
    eventually("the store to converge", || {
        let a = reader.get(&ObjectRef::new("a").within("default"));
        a.is_some_and(|a| a.data.as_ref().unwrap()["v"] == "2")
            && reader.get(&ObjectRef::new("b").within("default")).is_none()
            && reader.get(&ObjectRef::new("c").within("default")).is_some()
    })
    .await;
    task.abort();
}

/// A watch that is cut and cannot resume (history compacted) gets an in-stream 410; the watcher
/// must re-list, and the reflector must drop what was deleted while it was not watching.
#[tokio::test]
async fn watcher_relists_after_forced_410_and_reflector_drops_missed_deletes() {
    let env = TestEnv::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    for n in ["a", "b"] {
        api.create(&PostParams::default(), &cm(n, "1")).await.unwrap();
    }
    let (reader, writer) = reflector::store();
    let inits = Arc::new(AtomicUsize::new(0));
    let seen_inits = inits.clone();
    let stream = reflector::reflector(writer, watcher::watcher(api.clone(), watcher::Config::default()));
    let task = tokio::spawn(stream.for_each(move |ev| {
        if matches!(ev, Ok(Event::Init)) {
            seen_inits.fetch_add(1, Ordering::SeqCst);
        }
        async {}
    }));
    timeout(WAIT, reader.wait_until_ready()).await.unwrap().unwrap();
    assert_eq!(inits.load(Ordering::SeqCst), 1);
    // Make the watch fail to resume: new watches are held back while changes happen, the
    // history is compacted past them, then every watch is cut.
    env.handle().faults().delay(RequestMatch::new(Verb::Watch, "configmaps"), Duration::from_millis(500), Some(1));
    env.handle().close_watches(Some("configmaps"));
    api.delete("b", &DeleteParams::default()).await.unwrap();
    api.create(&PostParams::default(), &cm("c", "1")).await.unwrap();
    env.handle().compact();
    eventually("a re-list", || inits.load(Ordering::SeqCst) >= 2).await;
    eventually("the store to reflect the missed changes", || {
        reader.get(&ObjectRef::new("b").within("default")).is_none()
            && reader.get(&ObjectRef::new("c").within("default")).is_some()
            && reader.get(&ObjectRef::new("a").within("default")).is_some()
    })
    .await;
    task.abort();
}

/// A watch closed by the server resumes from the last resourceVersion without a re-list and
/// without missing or repeating changes.
#[tokio::test]
async fn watcher_resumes_a_closed_watch_without_relisting() {
    let env = TestEnv::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let mut events = watcher::watcher(api.clone(), watcher::Config::default()).boxed();
    // Initial (empty) list.
    loop {
        match timeout(WAIT, events.try_next()).await.unwrap().unwrap() {
            Some(Event::InitDone) => break,
            Some(_) => {}
            None => panic!("stream ended"),
        }
    }
    api.create(&PostParams::default(), &cm("x", "1")).await.unwrap();
    match timeout(WAIT, events.try_next()).await.unwrap().unwrap() {
        Some(Event::Apply(o)) => assert_eq!(o.metadata.name.as_deref(), Some("x")),
        other => panic!("expected the create, got {other:?}"),
    }
    let lists_before = env.handle().requests().get(Verb::List, "configmaps");
    assert!(env.handle().close_watches(Some("configmaps")) >= 1);
    // Changes while the watch is being re-established are delivered exactly once.
    api.patch("x", &PatchParams::default(), &Patch::Merge(serde_json::json!({"data": {"v": "2"}}))).await.unwrap();
    api.delete("x", &DeleteParams::default()).await.unwrap();
    match timeout(WAIT, events.try_next()).await.unwrap().unwrap() {
        Some(Event::Apply(o)) => assert_eq!(o.data.unwrap()["v"], "2"),
        other => panic!("expected the update, got {other:?}"),
    }
    match timeout(WAIT, events.try_next()).await.unwrap().unwrap() {
        Some(Event::Delete(o)) => assert_eq!(o.metadata.name.as_deref(), Some("x")),
        other => panic!("expected the delete, got {other:?}"),
    }
    assert_eq!(env.handle().requests().get(Verb::List, "configmaps"), lists_before, "a resumed watch does not re-list");
}

#[tokio::test]
async fn watcher_with_streaming_lists_gets_initial_objects_then_changes() {
    let env = TestEnv::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    api.create(&PostParams::default(), &cm("a", "1")).await.unwrap();
    let mut events = watcher::watcher(api.clone(), watcher::Config::default().streaming_lists()).boxed();
    let mut initial = Vec::new();
    loop {
        match timeout(WAIT, events.try_next()).await.unwrap().unwrap() {
            Some(Event::InitApply(o)) => initial.push(o.metadata.name.unwrap()),
            Some(Event::InitDone) => break,
            Some(_) => {}
            None => panic!("stream ended"),
        }
    }
    assert_eq!(initial, ["a"]);
    assert_eq!(env.handle().requests().get(Verb::List, "configmaps"), 0, "streaming lists need no list call");
    api.create(&PostParams::default(), &cm("b", "1")).await.unwrap();
    match timeout(WAIT, events.try_next()).await.unwrap().unwrap() {
        Some(Event::Apply(o)) => assert_eq!(o.metadata.name.as_deref(), Some("b")),
        other => panic!("expected the create, got {other:?}"),
    }
}

#[derive(Debug, thiserror::Error)]
#[error("reconcile failed: {0}")]
struct ReconcileError(String);

/// A Controller using the finalizer helper: it adds its finalizer, reconciles, and on
/// deletion runs its cleanup once and releases the object; injected 500s and 409s on its
/// writes are retried until it converges.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_with_finalizer_converges_through_injected_errors_and_cleans_up() {
    const FINALIZER: &str = "example.com/cleanup";
    let env = TestEnv::start().await.unwrap();
    let api: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    let cleanups = Arc::new(AtomicUsize::new(0));
    // The first patches fail: the finalizer add and the first status-like write.
    env.handle().faults().fail_next(RequestMatch::new(Verb::Patch, "configmaps"), 1, 500);
    env.handle().faults().fail_next(RequestMatch::new(Verb::Patch, "configmaps"), 1, 409);

    struct Ctx {
        api: Api<ConfigMap>,
        cleanups: Arc<AtomicUsize>,
    }
    let ctx = Arc::new(Ctx { api: api.clone(), cleanups: cleanups.clone() });
    let controller = Controller::new(api.clone(), watcher::Config::default())
        .run(
            |obj: Arc<ConfigMap>, ctx: Arc<Ctx>| async move {
                let api = ctx.api.clone();
                finalizer(&api, FINALIZER, obj, |event| async {
                    match event {
                        Finalizer::Apply(cm) => {
                            let name = cm.metadata.name.clone().unwrap_or_default();
                            let patch = serde_json::json!({"metadata": {"annotations": {"reconciled": "yes"}}});
                            api.patch(&name, &PatchParams::default(), &Patch::Merge(patch))
                                .await
                                .map_err(|e| ReconcileError(e.to_string()))?;
                            Ok(Action::await_change())
                        }
                        Finalizer::Cleanup(_) => {
                            ctx.cleanups.fetch_add(1, Ordering::SeqCst);
                            Ok::<_, ReconcileError>(Action::await_change())
                        }
                    }
                })
                .await
                .map_err(|e| ReconcileError(e.to_string()))
            },
            |_obj, _err: &ReconcileError, _ctx| Action::requeue(Duration::from_millis(50)),
            ctx,
        )
        .for_each(|_| async {});
    let task = tokio::spawn(controller);

    api.create(&PostParams::default(), &cm("x", "1")).await.unwrap();
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let x = api.get("x").await.unwrap();
        let done = x.metadata.finalizers.as_deref() == Some(&[FINALIZER.to_string()][..])
            && x.metadata.annotations.as_ref().is_some_and(|a| a.get("reconciled").map(String::as_str) == Some("yes"));
        if done {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "controller did not converge: {x:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    api.delete("x", &DeleteParams::default()).await.unwrap();
    let deadline = tokio::time::Instant::now() + WAIT;
    while api.get_opt("x").await.unwrap().is_some() {
        assert!(tokio::time::Instant::now() < deadline, "finalizer was not released");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(cleanups.load(Ordering::SeqCst), 1, "cleanup ran exactly once");
    task.abort();
}

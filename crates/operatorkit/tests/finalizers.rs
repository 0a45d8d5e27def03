//! Finalizers and outcomes end to end: the finalizer is added before the first resource runs,
//! removed only after a complete deletion, and kept on errors, on cancel-reconciliation and on
//! keep-finalizer.

mod common;

use common::*;

const NAME: &str = "finalizer-test";
const FINALIZER: &str = "operatorkit.giantswarm.io/finalizer-test";

async fn setup(steps: &[&str]) -> (Harness, std::sync::Arc<Script>, Running) {
    logs();
    let h = Harness::start().await;
    h.create_release("v20.0.0", "1.2.0").await;
    let script = Script::new();
    let set = set(&h, &script, "v1", "^1", steps);
    let controller = controller(&h, NAME, vec![set]).build().expect("the controller builds");
    assert_eq!(controller.finalizer(), FINALIZER);
    let running = spawn(controller);
    (h, script, running)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_finalizer_is_added_then_removed_after_a_successful_deletion() {
    let (h, script, running) = setup(&["first", "second"]).await;
    h.create_cluster("c1", Some("20.0.0")).await;
    eventually("the finalizer and both side effects", || async {
        h.has_finalizer("c1", FINALIZER).await
            && h.side_effect("c1", "first").await.is_some()
            && h.side_effect("c1", "second").await.is_some()
    })
    .await;
    // Resources share the reconcile's typed state: the second saw the first run before it.
    let second = script.calls_for("c1").into_iter().find(|c| c.resource == "second").expect("second ran");
    assert_eq!(second.state, ["first"]);

    h.delete("c1").await;
    eventually("the object to be gone", || async { h.get("c1").await.is_none() }).await;
    assert!(h.side_effect("c1", "first").await.is_none() && h.side_effect("c1", "second").await.is_none());
    assert_eq!(script.deleted("c1", "first"), 1);
    assert_eq!(script.deleted("c1", "second"), 1);
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_finalizers_survive_our_add_and_remove() {
    let (h, _script, running) = setup(&["first"]).await;
    let mut cm = cluster("c2", Some("20.0.0"));
    cm.metadata.finalizers = Some(vec!["example.com/other".into()]);
    h.cms().create(&Default::default(), &cm).await.unwrap();
    eventually("our finalizer next to the other one", || async {
        h.finalizers("c2").await == Some(vec!["example.com/other".into(), FINALIZER.into()])
    })
    .await;
    h.delete("c2").await;
    eventually("only the other finalizer left", || async {
        h.finalizers("c2").await == Some(vec!["example.com/other".to_string()])
    })
    .await;
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_during_deletion_keeps_the_finalizer_until_the_deletion_succeeds() {
    let (h, script, running) = setup(&["first", "second"]).await;
    h.create_cluster("c1", Some("20.0.0")).await;
    eventually("the finalizer", || async { h.has_finalizer("c1", FINALIZER).await }).await;
    script.set("first", Phase::Delete, Behaviour::Fail);
    h.delete("c1").await;
    eventually("the deletion to be retried", || async { script.count("c1", "first", Phase::Delete) >= 3 }).await;
    assert!(h.has_finalizer("c1", FINALIZER).await, "a failed deletion keeps the finalizer");
    assert_eq!(script.count("c1", "second", Phase::Delete), 0, "an error stops the resources after it");
    eventually("a Warning event with the error kind", || async {
        h.warnings("c1").await.iter().any(|(reason, note)| reason == "ScriptedFailure" && note.contains("first"))
    })
    .await;

    script.clear();
    eventually("the object to be gone", || async { h.get("c1").await.is_none() }).await;
    assert_eq!(script.deleted("c1", "second"), 1);
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_reconciliation_during_deletion_keeps_the_finalizer() {
    let (h, script, running) = setup(&["first", "second"]).await;
    h.create_cluster("c1", Some("20.0.0")).await;
    eventually("the finalizer", || async { h.has_finalizer("c1", FINALIZER).await }).await;
    script.set("first", Phase::Delete, Behaviour::CancelReconciliation);
    h.delete("c1").await;
    eventually("the first delete", || async { script.count("c1", "first", Phase::Delete) >= 1 }).await;
    settle().await;
    assert!(h.has_finalizer("c1", FINALIZER).await, "a cancelled deletion is not finished");
    assert_eq!(script.count("c1", "second", Phase::Delete), 0, "cancel-reconciliation stops the later resources");
    assert!(h.warnings("c1").await.is_empty(), "a cancellation is not an error");
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_finalizer_runs_every_resource_but_keeps_the_finalizer() {
    let (h, script, running) = setup(&["first", "second"]).await;
    h.create_cluster("c1", Some("20.0.0")).await;
    eventually("the finalizer", || async { h.has_finalizer("c1", FINALIZER).await }).await;
    script.set("first", Phase::Delete, Behaviour::KeepFinalizer);
    h.delete("c1").await;
    eventually("both deletes", || async { script.count("c1", "second", Phase::Delete) >= 1 }).await;
    settle().await;
    assert!(h.has_finalizer("c1", FINALIZER).await, "keep-finalizer keeps it");
    running.stop().await;

    // Once nothing keeps it any more, the next controller run removes it.
    script.clear();
    let running =
        spawn(controller(&h, NAME, vec![set(&h, &script, "v1", "^1", &["first", "second"])]).build().unwrap());
    eventually("the object to be gone", || async { h.get("c1").await.is_none() }).await;
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_resource_skips_only_that_resource() {
    let (h, script, running) = setup(&["first", "second"]).await;
    script.set("first", Phase::Create, Behaviour::CancelResource);
    script.set("first", Phase::Delete, Behaviour::CancelResource);
    h.create_cluster("c1", Some("20.0.0")).await;
    eventually("the second resource to run", || async { h.side_effect("c1", "second").await.is_some() }).await;
    h.delete("c1").await;
    // Cancel-resource does not keep the finalizer: the deletion completes.
    eventually("the object to be gone", || async { h.get("c1").await.is_none() }).await;
    assert!(script.count("c1", "second", Phase::Delete) >= 1);
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_reconciliation_on_update_stops_later_resources_successfully() {
    let (h, script, running) = setup(&["first", "second"]).await;
    script.set("first", Phase::Create, Behaviour::CancelReconciliation);
    h.create_cluster("c1", Some("20.0.0")).await;
    eventually("the first resource", || async { h.side_effect("c1", "first").await.is_some() }).await;
    settle().await;
    assert_eq!(script.count("c1", "second", Phase::Create), 0);
    assert!(h.has_finalizer("c1", FINALIZER).await);
    assert!(h.warnings("c1").await.is_empty());
    running.stop().await;
}

//! The controller end to end: pause, crash and restart at every point between resources,
//! injected API failures, leader election gating, graceful shutdown, and the HTTP endpoints.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;

use common::*;
use operatorkit::{Leadership, Metrics, Readiness, Server};
use prometheus_client::registry::Registry;
use testenv::{RequestMatch, Verb};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

const STEPS: [&str; 3] = ["a", "b", "c"];

async fn with_release() -> (Harness, Arc<Script>) {
    logs();
    let h = Harness::start().await;
    h.create_release("v20.0.0", "1.2.0").await;
    (h, Script::new())
}

fn build(
    h: &Harness,
    script: &Arc<Script>,
    name: &str,
) -> operatorkit::Controller<k8s_openapi::api::core::v1::ConfigMap> {
    controller(h, name, vec![set(h, script, "v1", "^1", &STEPS)]).build().expect("the controller builds")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paused_objects_are_left_alone_until_unpaused_deletion_included() {
    let (h, script) = with_release().await;
    let controller = controller(&h, "pause-test", vec![set(&h, &script, "v1", "^1", &STEPS)])
        .pause_annotation("test.giantswarm.io/hold", "yes")
        .build()
        .unwrap();
    let running = spawn(controller);
    let mut paused = cluster("paused", Some("20.0.0"));
    paused.metadata.annotations = Some([("operatorkit.giantswarm.io/paused".to_string(), "true".to_string())].into());
    h.cms().create(&Default::default(), &paused).await.unwrap();
    let mut held = cluster("held", Some("20.0.0"));
    held.metadata.annotations = Some([("test.giantswarm.io/hold".to_string(), "yes".to_string())].into());
    h.cms().create(&Default::default(), &held).await.unwrap();
    h.create_cluster("probe", Some("20.0.0")).await;
    eventually("the probe reconciled", || async { script.count("probe", "c", Phase::Create) >= 1 }).await;
    settle().await;
    assert!(script.calls_for("paused").is_empty() && script.calls_for("held").is_empty());
    assert_eq!(h.finalizers("paused").await, Some(vec![]));

    // Unpausing reconciles at once (the annotation change passes the predicate).
    h.annotate("paused", "operatorkit.giantswarm.io/paused", None).await;
    eventually("the unpaused object reconciled", || async { script.count("paused", "c", Phase::Create) >= 1 }).await;

    // A paused object is not deleted either: the finalizer holds it until it is unpaused.
    h.annotate("paused", "operatorkit.giantswarm.io/paused", Some("true")).await;
    settle().await;
    h.delete("paused").await;
    settle().await;
    assert!(h.get("paused").await.is_some(), "paused: the deletion waits");
    assert_eq!(script.count("paused", "a", Phase::Delete), 0);
    h.annotate("paused", "operatorkit.giantswarm.io/paused", Some("false")).await;
    eventually("the deletion to finish once unpaused", || async { h.get("paused").await.is_none() }).await;
    running.stop().await;
}

/// For every point between two resources (and before the first and after the last), on both
/// paths: crash the controller there, start a new one, and check that it converges and that no
/// side effect happened twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_between_any_two_resources_converges_after_restart_without_duplicates() {
    let (h, script) = with_release().await;
    let crash_points = [
        ("a", Behaviour::HangBefore), // after the finalizer, before any resource
        ("a", Behaviour::Hang),       // between a and b
        ("b", Behaviour::Hang),       // between b and c
        ("c", Behaviour::Hang),       // after c, before the reconcile ends
    ];
    for (i, (resource, behaviour)) in crash_points.iter().enumerate() {
        let object = format!("crash-create-{i}");
        script.clear();
        script.set(resource, Phase::Create, behaviour.clone());
        let first = spawn(build(&h, &script, "crash-test"));
        h.create_cluster(&object, Some("20.0.0")).await;
        script.wait_for_hang_of(&object).await;
        first.crash().await;

        script.clear();
        let second = spawn(build(&h, &script, "crash-test"));
        eventually("every side effect after the restart", || async {
            let mut all = true;
            for step in STEPS {
                // The side effect, and the controller having counted it: the server may answer
                // the test's GET before the controller has read the create's response.
                all &= h.side_effect(&object, step).await.is_some() && script.created(&object, step) >= 1;
            }
            all
        })
        .await;
        for step in STEPS {
            assert_eq!(script.created(&object, step), 1, "{object}: {step} created its side effect exactly once");
        }
        second.stop().await;
    }

    for (i, resource) in STEPS.iter().enumerate() {
        let object = format!("crash-delete-{i}");
        script.clear();
        let first = spawn(build(&h, &script, "crash-test"));
        h.create_cluster(&object, Some("20.0.0")).await;
        eventually("the object ready", || async { h.side_effect(&object, "c").await.is_some() }).await;
        script.set(resource, Phase::Delete, Behaviour::Hang);
        h.delete(&object).await;
        script.wait_for_hang_of(&object).await;
        first.crash().await;
        assert!(h.get(&object).await.is_some(), "the finalizer holds the object through the crash");

        script.clear();
        let second = spawn(build(&h, &script, "crash-test"));
        eventually("the deletion to finish after the restart", || async { h.get(&object).await.is_none() }).await;
        for step in STEPS {
            assert!(h.side_effect(&object, step).await.is_none(), "{object}: {step} cleaned up");
            assert_eq!(script.deleted(&object, step), 1, "{object}: {step} deleted its side effect exactly once");
        }
        second.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn injected_conflicts_and_server_errors_converge() {
    let (h, script) = with_release().await;
    let faults = h.env.handle().faults();
    h.create_cluster("faulty", Some("20.0.0")).await;
    // The finalizer patch fails twice (500, then 409), the first side-effect create once (500).
    faults.fail_next(RequestMatch::new(Verb::Patch, "configmaps").named("faulty"), 1, 500);
    faults.fail_next(RequestMatch::new(Verb::Patch, "configmaps").named("faulty"), 1, 409);
    faults.fail_next(RequestMatch::new(Verb::Create, "configmaps"), 1, 500);
    let running = spawn(build(&h, &script, "fault-test"));
    eventually("convergence", || async {
        h.has_finalizer("faulty", "operatorkit.giantswarm.io/fault-test").await
            && h.side_effect("faulty", "c").await.is_some()
    })
    .await;
    assert_eq!(script.created("faulty", "a"), 1);
    eventually("a Warning event naming the API error kind", || async {
        h.warnings("faulty").await.iter().any(|(reason, _)| reason == "InternalError")
    })
    .await;

    // The finalizer removal fails the same ways; the deletion still completes.
    faults.fail_next(RequestMatch::new(Verb::Patch, "configmaps").named("faulty"), 1, 409);
    faults.fail_next(RequestMatch::new(Verb::Patch, "configmaps").named("faulty"), 1, 500);
    h.delete("faulty").await;
    eventually("the object to be gone", || async { h.get("faulty").await.is_none() }).await;
    for step in STEPS {
        assert_eq!(script.deleted("faulty", step), 1, "{step} cleaned up once, however often the deletion ran");
        assert!(h.side_effect("faulty", step).await.is_none());
    }
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_writes_nothing_until_it_leads_and_stops_when_it_loses() {
    let (h, script) = with_release().await;
    let (leader_tx, leader_rx) = tokio::sync::watch::channel(false);
    let controller = controller(&h, "standby-test", vec![set(&h, &script, "v1", "^1", &STEPS)])
        .leadership(Leadership::from_receiver(leader_rx))
        .build()
        .unwrap();
    let store = controller.store();
    let running = spawn(controller);
    h.create_cluster("c", Some("20.0.0")).await;
    h.create_cluster("no-release", Some("99.0.0")).await;
    eventually("the standby's cache to hold the objects", || async { store.state().len() == 2 }).await;
    let before = h.env.handle().requests();
    settle().await;
    let during = h.env.handle().requests().since(&before);
    assert_eq!(during.writes(), 0, "a standby writes nothing, not even events: {during:?}");
    assert!(script.calls().is_empty(), "a standby runs no resource");

    leader_tx.send(true).unwrap();
    eventually("the new leader reconciles what it cached", || async {
        h.side_effect("c", "c").await.is_some() && !h.warnings("no-release").await.is_empty()
    })
    .await;

    leader_tx.send(false).unwrap();
    let calls = script.calls().len();
    h.label("c", "touched", Some("yes")).await;
    settle().await;
    assert_eq!(script.calls().len(), calls, "after losing the lease nothing runs");
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn losing_leadership_mid_reconcile_stops_before_the_next_resource() {
    let (h, script) = with_release().await;
    let (leader_tx, leader_rx) = tokio::sync::watch::channel(true);
    script.set("a", Phase::Create, Behaviour::Slow);
    let controller = controller(&h, "lost-test", vec![set(&h, &script, "v1", "^1", &STEPS)])
        .leadership(Leadership::from_receiver(leader_rx))
        .build()
        .unwrap();
    let running = spawn(controller);
    h.create_cluster("c", Some("20.0.0")).await;
    script.wait_for_hang().await;
    leader_tx.send(false).unwrap();
    eventually("resource a to finish", || async { h.side_effect("c", "a").await.is_some() }).await;
    settle().await;
    assert_eq!(script.count("c", "b", Phase::Create), 0, "no resource runs after the lease is lost");
    assert!(h.side_effect("c", "b").await.is_none());
    assert!(h.warnings("c").await.is_empty(), "losing the lease is not reported as a failure");

    // Regaining it finishes the job.
    script.clear();
    leader_tx.send(true).unwrap();
    eventually("the new term to finish the reconcile", || async { h.side_effect("c", "c").await.is_some() }).await;
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resource_writing_through_a_gated_client_writes_nothing_after_the_lease_is_lost() {
    let (h, script) = with_release().await;
    let (leader_tx, leader_rx) = tokio::sync::watch::channel(true);
    let leadership = Leadership::from_receiver(leader_rx);
    script.set("a", Phase::Create, Behaviour::Slow);
    let steps = set_writing_through(leadership.gate(h.client.clone()), &script, "v1", "^1", &STEPS);
    let controller = controller(&h, "gated-test", vec![steps]).leadership(leadership).build().unwrap();
    let running = spawn(controller);
    h.create_cluster("c", Some("20.0.0")).await;
    // Resource a is running (its write still ahead) when the lease goes.
    script.wait_for_hang().await;
    leader_tx.send(false).unwrap();
    eventually("resource a to try its write", || async { !script.writes_of("c", "a").is_empty() }).await;
    assert_eq!(script.writes_of("c", "a"), [false], "the write after the lease was lost is refused");
    settle().await;
    assert!(h.side_effect("c", "a").await.is_none());
    assert_eq!(script.count("c", "b", Phase::Create), 0, "no resource runs after the lease is lost");
    assert!(h.warnings("c").await.is_empty(), "a refused write is no failure of the object");

    // The next term redoes the write.
    script.clear();
    leader_tx.send(true).unwrap();
    eventually("the new term to finish the reconcile", || async { h.side_effect("c", "c").await.is_some() }).await;
    assert!(h.side_effect("c", "a").await.is_some());
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_shutdown_lets_running_reconciles_finish() {
    let (h, script) = with_release().await;
    script.set("b", Phase::Create, Behaviour::Slow);
    let running = spawn(build(&h, &script, "shutdown-test"));
    h.create_cluster("c", Some("20.0.0")).await;
    script.wait_for_hang().await;
    running.stop().await;
    assert!(h.side_effect("c", "c").await.is_some(), "the reconcile in flight ran to its end");
}

async fn http_get(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let status = response.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = response.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    (status, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_health_and_readiness_are_served() {
    let (h, script) = with_release().await;
    let mut registry = Registry::default();
    let metrics = Metrics::new(&mut registry);
    let readiness = Readiness::new();
    script.set("a", Phase::Create, Behaviour::Fail);
    let controller = controller(&h, "server-test", vec![set(&h, &script, "v1", "^1", &STEPS)])
        .metrics(&metrics)
        .readiness(&readiness)
        .build()
        .unwrap();
    let server = Server::bind("127.0.0.1:0".parse().unwrap(), Arc::new(registry), readiness.clone())
        .await
        .unwrap()
        .version("test-operator", "1.2.3");
    let addr = server.local_addr().unwrap();
    let stop = CancellationToken::new();
    let server_task = tokio::spawn(server.serve(stop.clone()));

    assert_eq!(http_get(addr, "/healthz").await.0, 200);
    let (status, body) = http_get(addr, "/version").await;
    assert_eq!(status, 200);
    let version: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(version, serde_json::json!({"name": "test-operator", "version": "1.2.3"}));
    let (status, body) = http_get(addr, "/readyz").await;
    assert_eq!(status, 503, "caches not synced yet");
    assert!(body.contains("waiting controller/server-test/objects"), "{body}");

    h.create_cluster("c", Some("20.0.0")).await;
    let running = spawn(controller);
    eventually("ready once the caches synced", || async {
        let (status, body) = http_get(addr, "/readyz").await;
        status == 200 && body.contains("ok controller/server-test/releases")
    })
    .await;
    eventually("a failure counted", || async {
        http_get(addr, "/metrics").await.1.contains("operatorkit_controller_errors_total{controller=\"server-test\"}")
    })
    .await;
    script.clear();
    eventually("a success observed", || async {
        let body = http_get(addr, "/metrics").await.1;
        body.contains("operatorkit_controller_event_count{controller=\"server-test\",event=\"update\"}")
            && body.contains("operatorkit_controller_creation_timestamp{controller=\"server-test\",kind=\"ConfigMap\",name=\"c\",namespace=\"default\"}")
            && body.contains("operatorkit_controller_reconciles_in_flight{controller=\"server-test\"} 0")
    })
    .await;
    assert_eq!(http_get(addr, "/nope").await.0, 404);
    running.stop().await;
    stop.cancel();
    server_task.await.unwrap();
}

/// A shutdown that arrives while the first list is still in flight ends the controller at once:
/// no reconcile has started, and the cache can no longer fill once the watch stops.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_before_the_first_list_completes_stops_at_once() {
    let (h, script) = with_release().await;
    h.create_cluster("early", Some("20.0.0")).await;
    h.env.handle().faults().delay(RequestMatch::new(Verb::List, "configmaps"), std::time::Duration::from_secs(3), None);
    let running = spawn(build(&h, &script, "early-stop"));
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    running.stop().await;
    assert!(script.calls_for("early").is_empty(), "nothing reconciled: {:?}", script.calls());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_related_object_changing_requeues_the_object_it_names() {
    use k8s_openapi::api::core::v1::Secret;
    use kube::runtime::reflector::ObjectRef;

    let (h, script) = with_release().await;
    let secrets: kube::Api<Secret> = kube::Api::namespaced(h.client.clone(), NS);
    let controller = controller(&h, "related-test", vec![set(&h, &script, "v1", "^1", &STEPS)])
        .watches(secrets.clone(), |s: &Secret| {
            let parent = s.metadata.labels.as_ref().and_then(|l| l.get("test.giantswarm.io/parent"));
            parent.map(|p| ObjectRef::new(p).within(NS)).into_iter().collect()
        })
        .build()
        .unwrap();
    let running = spawn(controller);
    h.create_cluster("parent", Some("20.0.0")).await;
    h.create_cluster("other", Some("20.0.0")).await;
    eventually("both reconciled", || async {
        script.count("parent", "c", Phase::Create) >= 1 && script.count("other", "c", Phase::Create) >= 1
    })
    .await;
    settle().await;
    let (parent, other) = (script.count("parent", "c", Phase::Create), script.count("other", "c", Phase::Create));

    let child = |name: &str, parent: &str| Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            labels: Some([("test.giantswarm.io/parent".to_string(), parent.to_string())].into()),
            ..Default::default()
        },
        ..Default::default()
    };
    // A child of an object that does not exist is dropped without harm.
    secrets.create(&Default::default(), &child("orphan", "missing")).await.unwrap();
    secrets.create(&Default::default(), &child("child", "parent")).await.unwrap();
    eventually("the parent reconciled again", || async { script.count("parent", "c", Phase::Create) > parent }).await;
    let after_create = script.count("parent", "c", Phase::Create);
    // Deleting the child requeues the parent too.
    secrets.delete("child", &Default::default()).await.unwrap();
    eventually("the parent reconciled on the deletion", || async {
        script.count("parent", "c", Phase::Create) > after_create
    })
    .await;
    settle().await;
    assert_eq!(script.count("other", "c", Phase::Create), other, "an unrelated object is not requeued");
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cache_holds_objects_trimmed_and_the_resources_get_them_so() {
    let (h, script) = with_release().await;
    let controller = controller(&h, "trim-test", vec![set(&h, &script, "v1", "^1", &STEPS)])
        .trim_cached(|cm: &mut k8s_openapi::api::core::v1::ConfigMap| cm.data = None)
        .build()
        .unwrap();
    let store = controller.store();
    let running = spawn(controller);
    let mut big = cluster("big", Some("20.0.0"));
    big.data = Some([("payload".to_string(), "x".repeat(4096))].into());
    h.cms().create(&Default::default(), &big).await.unwrap();
    eventually("the object reconciled", || async { script.count("big", "c", Phase::Create) >= 1 }).await;
    let cached = store.state().into_iter().find(|cm| cm.metadata.name.as_deref() == Some("big")).expect("cached");
    assert_eq!(cached.data, None, "the trimmed field is not cached");
    assert_eq!(cached.metadata.managed_fields, None, "managedFields are never cached");
    assert!(cached.metadata.labels.is_some(), "what is not trimmed is kept");
    let stored = h.get("big").await.expect("the object");
    assert_eq!(stored.data.map(|d| d["payload"].len()), Some(4096), "the object itself is untouched");
    running.stop().await;
}

/// A resource that counts its calls per object, works a few milliseconds and asks to be
/// called again almost at once: every object is always due.
struct Busy {
    calls: Arc<parking_lot::Mutex<std::collections::BTreeMap<String, usize>>>,
}

impl operatorkit::Resource<k8s_openapi::api::core::v1::ConfigMap, ()> for Busy {
    fn name(&self) -> &str {
        "busy"
    }

    async fn ensure_created(
        &self,
        _: &mut (),
        obj: &k8s_openapi::api::core::v1::ConfigMap,
    ) -> operatorkit::resource::Result<operatorkit::Outcome> {
        *self.calls.lock().entry(obj.metadata.name.clone().unwrap_or_default()).or_insert(0) += 1;
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        Ok(operatorkit::Outcome::proceed().requeue_after(std::time::Duration::from_millis(1)))
    }

    async fn ensure_deleted(
        &self,
        _: &mut (),
        _: &k8s_openapi::api::core::v1::ConfigMap,
    ) -> operatorkit::resource::Result<operatorkit::Outcome> {
        Ok(operatorkit::Outcome::proceed())
    }
}

/// Saturated (every object always due, one turn), every object still gets its turn: turns go
/// first come, first served, so no object that requeues itself can take them all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_saturated_controller_gives_every_object_its_turn() {
    const OBJECTS: usize = 12;
    const ROUNDS: usize = 8;
    let (h, _script) = with_release().await;
    let calls = Arc::new(parking_lot::Mutex::new(std::collections::BTreeMap::new()));
    let set = operatorkit::ResourceSet::with_default_state("v1", semver::VersionReq::parse("^1").unwrap())
        .resource(Busy { calls: calls.clone() })
        .build();
    let controller = controller(&h, "fair-test", vec![set]).concurrency(1).build().unwrap();
    for i in 0..OBJECTS {
        h.create_cluster(&format!("c{i:02}"), Some("20.0.0")).await;
    }
    let running = spawn(controller);
    eventually("enough reconciles for every object to have had several turns", || async {
        calls.lock().values().sum::<usize>() >= OBJECTS * ROUNDS
    })
    .await;
    let counts = calls.lock().clone();
    running.stop().await;
    assert_eq!(counts.len(), OBJECTS, "every object was reconciled: {counts:?}");
    let (least, most) = (counts.values().min().copied(), counts.values().max().copied());
    assert!(
        least >= Some(ROUNDS / 2) && most <= Some(ROUNDS * 2),
        "turns are shared out evenly (between {} and {} each): {counts:?}",
        ROUNDS / 2,
        ROUNDS * 2
    );
}

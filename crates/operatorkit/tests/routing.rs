//! The release router end to end: zero, one and many matching sets, overlapping sets,
//! upgrades by relabelling, Release changes, unroutable objects and legacy label routing.

mod common;

use std::sync::Arc;

use common::*;
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::ConfigMap;
use operatorkit::{BuildError, ResourceError, Routing, StatusHook, Unroutable};
use parking_lot::Mutex;
use semver::Version;
use testenv::Verb;

/// Records what the controller reports through the status hook.
#[derive(Default, Clone)]
struct Problems(Arc<Mutex<Vec<(String, &'static str)>>>);

impl Problems {
    fn reasons(&self, object: &str) -> Vec<&'static str> {
        self.0.lock().iter().filter(|(o, _)| o == object).map(|(_, r)| *r).collect()
    }
}

impl StatusHook<ConfigMap> for Problems {
    fn unroutable<'a>(
        &'a self,
        obj: &'a ConfigMap,
        problem: &'a Unroutable,
    ) -> BoxFuture<'a, Result<(), ResourceError>> {
        self.0.lock().push((obj.metadata.name.clone().unwrap_or_default(), problem.reason()));
        Box::pin(async { Ok(()) })
    }

    fn routed<'a>(
        &'a self,
        obj: &'a ConfigMap,
        _set: &'a str,
        _v: &'a Version,
        _from: &'a operatorkit::router::VersionFrom,
    ) -> BoxFuture<'a, Result<(), ResourceError>> {
        let name = obj.metadata.name.clone().unwrap_or_default();
        self.0.lock().retain(|(o, _)| *o != name);
        Box::pin(async { Ok(()) })
    }
}

const FINALIZER: &str = "operatorkit.giantswarm.io/routing-test";

async fn three_sets() -> (Harness, Arc<Script>, Problems, Running) {
    logs();
    let h = Harness::start().await;
    h.create_release("v20.0.0", "1.2.0").await;
    h.create_release("v21.0.0", "2.0.0").await;
    h.create_release("v22.0.0", "3.1.0").await;
    h.create_release("v30.0.0", "9.0.0").await;
    let script = Script::new();
    let sets = vec![
        set(&h, &script, "v1", "^1", &["a"]),
        set(&h, &script, "v2", "^2", &["a"]),
        set(&h, &script, "v3", ">=3.0.0, <4.0.0", &["a"]),
    ];
    let problems = Problems::default();
    let controller =
        controller(&h, "routing-test", sets).status_hook(problems.clone()).build().expect("disjoint sets build");
    (h, script, problems, spawn(controller))
}

fn sets_of(script: &Script, object: &str) -> Vec<String> {
    script.calls_for(object).into_iter().map(|c| c.set).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_object_goes_to_the_one_set_matching_its_release() {
    let (h, script, _problems, running) = three_sets().await;
    h.create_cluster("one", Some("20.0.0")).await;
    h.create_cluster("two", Some("21.0.0")).await;
    h.create_cluster("three", Some("22.0.0")).await;
    eventually("all three reconciled", || async {
        ["one", "two", "three"].iter().all(|o| script.count(o, "a", Phase::Create) >= 1)
    })
    .await;
    assert!(sets_of(&script, "one").iter().all(|s| s == "v1"));
    assert!(sets_of(&script, "two").iter().all(|s| s == "v2"));
    assert!(sets_of(&script, "three").iter().all(|s| s == "v3"));
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zero_matches_write_nothing() {
    let (h, script, problems, running) = three_sets().await;
    let before = h.env.handle().requests();
    h.create_cluster("other-version", Some("30.0.0")).await;
    h.create_cluster("probe", Some("20.0.0")).await;
    // The probe proves the controller is running and has seen both objects.
    eventually("the probe reconciled", || async { script.count("probe", "a", Phase::Create) >= 1 }).await;
    settle().await;
    assert!(script.calls_for("other-version").is_empty(), "no resource ran");
    assert_eq!(h.finalizers("other-version").await, Some(vec![]), "no finalizer was added");
    assert!(h.warnings("other-version").await.is_empty(), "another operator's object is not an error");
    assert!(problems.reasons("other-version").is_empty());
    let writes = h.env.handle().requests().since(&before);
    assert_eq!(writes.get(Verb::Patch, "configmaps"), 1, "only the probe's finalizer was patched");

    // Deleting it is the other operator's business too: nothing runs, nothing blocks.
    h.delete("other-version").await;
    eventually("the object to be gone", || async { h.get("other-version").await.is_none() }).await;
    assert!(script.calls_for("other-version").is_empty());
    running.stop().await;
}

#[test]
fn overlapping_sets_refuse_to_build_naming_both() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let h = Harness::start().await;
        let script = Script::new();
        let err = controller(
            &h,
            "overlap-test",
            vec![
                set(&h, &script, "legacy", ">=1.0.0, <2.0.0", &["a"]),
                set(&h, &script, "current", "^2", &["a"]),
                set(&h, &script, "broad", ">=1.5", &["a"]),
            ],
        )
        .build()
        .expect_err("overlapping sets are refused");
        match &err {
            BuildError::OverlappingSets { first, second, witness, .. } => {
                assert_eq!((first.as_str(), second.as_str(), witness.as_str()), ("legacy", "broad", "1.5.0"));
            }
            other => panic!("unexpected error {other:?}"),
        }
        assert!(err.to_string().contains("\"legacy\"") && err.to_string().contains("\"broad\""));
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn relabelling_upgrades_the_object_to_the_other_set_under_the_same_finalizer() {
    let (h, script, _problems, running) = three_sets().await;
    h.create_cluster("c", Some("20.0.0")).await;
    eventually("v1 reconciled it", || async { script.count("c", "a", Phase::Create) >= 1 }).await;
    assert!(h.has_finalizer("c", FINALIZER).await);
    let before = script.calls_for("c").len();

    h.label("c", RELEASE_LABEL, Some("21.0.0")).await;
    eventually("v2 reconciled it", || async { script.calls_for("c").iter().skip(before).any(|c| c.set == "v2") }).await;
    assert!(script.calls_for("c").iter().skip(before).all(|c| c.set == "v2"), "after the relabel only v2 runs");
    assert_eq!(h.finalizers("c").await, Some(vec![FINALIZER.to_string()]), "the same single finalizer");

    h.delete("c").await;
    eventually("the object to be gone", || async { h.get("c").await.is_none() }).await;
    let deletes: Vec<_> = script.calls_for("c").into_iter().filter(|c| c.phase == Phase::Delete).collect();
    assert!(!deletes.is_empty() && deletes.iter().all(|c| c.set == "v2"), "the new set deletes: {deletes:?}");
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_change_requeues_its_clusters_only() {
    let (h, script, _problems, running) = three_sets().await;
    h.create_cluster("on-20", Some("20.0.0")).await;
    h.create_cluster("on-22", Some("22.0.0")).await;
    eventually("both reconciled", || async {
        script.count("on-20", "a", Phase::Create) >= 1 && script.count("on-22", "a", Phase::Create) >= 1
    })
    .await;
    settle().await;
    let on_22_before = script.calls_for("on-22").len();

    // The object itself does not change; only its Release does.
    h.set_release_version("v20.0.0", "2.3.0").await;
    eventually("on-20 moved to v2", || async { script.calls_for("on-20").iter().any(|c| c.set == "v2") }).await;
    settle().await;
    assert_eq!(script.calls_for("on-22").len(), on_22_before, "a cluster of another release is not requeued");
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unroutable_objects_get_a_warning_and_a_status_report_and_nothing_else() {
    let (h, script, problems, running) = three_sets().await;
    h.create_cluster("no-label", None).await;
    h.create_cluster("no-release", Some("40.0.0")).await;
    // The warning is sent before the status hook is called: wait for both.
    eventually("warnings and status reports for both", || async {
        h.warnings("no-label").await.iter().any(|(r, _)| r == "ReleaseLabelMissing")
            && h.warnings("no-release").await.iter().any(|(r, n)| r == "ReleaseNotFound" && n.contains("v40.0.0"))
            && !problems.reasons("no-label").is_empty()
            && !problems.reasons("no-release").is_empty()
    })
    .await;
    let only =
        |reasons: Vec<&'static str>, expected: &str| !reasons.is_empty() && reasons.iter().all(|r| *r == expected);
    assert!(only(problems.reasons("no-label"), "ReleaseLabelMissing"));
    assert!(only(problems.reasons("no-release"), "ReleaseNotFound"));
    assert!(script.calls_for("no-label").is_empty() && script.calls_for("no-release").is_empty());
    assert_eq!(h.finalizers("no-release").await, Some(vec![]), "no finalizer without a resource set");

    // The missing Release appears: its clusters are requeued and routed.
    h.create_release("v40.0.0", "3.9.0").await;
    eventually("no-release reconciled by v3", || async {
        script.calls_for("no-release").iter().any(|c| c.set == "v3")
    })
    .await;
    assert!(problems.reasons("no-release").is_empty(), "the routed hook cleared the problem");
    // Adding the label routes the other one.
    h.label("no-label", RELEASE_LABEL, Some("21.0.0")).await;
    eventually("no-label reconciled by v2", || async { script.calls_for("no-label").iter().any(|c| c.set == "v2") })
        .await;
    running.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_mode_selects_objects_by_the_operator_version_label() {
    logs();
    let h = Harness::start().await;
    let script = Script::new();
    let controller =
        controller(&h, "legacy-test", vec![set(&h, &script, "v1", "^1", &["a"]), set(&h, &script, "v2", "^2", &["a"])])
            .routing(Routing::Legacy { version: Version::new(2, 4, 0) })
            .build()
            .expect("builds");
    let running = spawn(controller);
    for (name, version) in [("mine", "2.4.0"), ("older", "1.9.0")] {
        let mut cm = cluster(name, None);
        cm.metadata.labels.get_or_insert_default().insert("test-operator.giantswarm.io/version".into(), version.into());
        h.cms().create(&Default::default(), &cm).await.unwrap();
    }
    eventually("mine reconciled by v2", || async { script.calls_for("mine").iter().any(|c| c.set == "v2") }).await;
    settle().await;
    assert!(script.calls_for("older").is_empty(), "objects of other operator versions are not even watched");
    assert!(h.warnings("mine").await.is_empty(), "no Release is needed in legacy mode");
    running.stop().await;
}

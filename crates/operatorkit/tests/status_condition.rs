//! The ready-made `ReleaseCondition` status hook on a custom resource with a status subresource:
//! `ReleaseResolved=False` with the routing problem while the object cannot be routed, `True`
//! once it can, and no status write while nothing changes.

mod common;

use common::*;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use operatorkit::{Controller, Leadership, Outcome, ReleaseCondition, Resource, ResourceSet, resource};
use semver::VersionReq;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use testenv::Verb;

/// A minimal cluster kind: `example.giantswarm.io/v1 Cluster`, namespaced, with status.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Cluster {
    #[serde(rename = "apiVersion")]
    api_version: String,
    kind: String,
    metadata: kube::api::ObjectMeta,
    #[serde(default)]
    status: Option<Value>,
}

impl kube::Resource for Cluster {
    type DynamicType = ();
    type Scope = kube::core::NamespaceResourceScope;

    fn kind(_: &()) -> std::borrow::Cow<'_, str> {
        "Cluster".into()
    }
    fn group(_: &()) -> std::borrow::Cow<'_, str> {
        "example.giantswarm.io".into()
    }
    fn version(_: &()) -> std::borrow::Cow<'_, str> {
        "v1".into()
    }
    fn plural(_: &()) -> std::borrow::Cow<'_, str> {
        "clusters".into()
    }
    fn meta(&self) -> &kube::api::ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut kube::api::ObjectMeta {
        &mut self.metadata
    }
}

struct Noop;

impl Resource<Cluster, ()> for Noop {
    fn name(&self) -> &str {
        "noop"
    }
    async fn ensure_created(&self, _: &mut (), _: &Cluster) -> resource::Result<Outcome> {
        Ok(Outcome::proceed())
    }
    async fn ensure_deleted(&self, _: &mut (), _: &Cluster) -> resource::Result<Outcome> {
        Ok(Outcome::proceed())
    }
}

fn crd() -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "clusters.example.giantswarm.io"},
        "spec": {
            "group": "example.giantswarm.io", "scope": "Namespaced",
            "names": {"plural": "clusters", "singular": "cluster", "kind": "Cluster"},
            "versions": [{"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}]
        }
    }))
    .expect("a valid CRD")
}

fn condition(obj: &DynamicObject) -> Option<Value> {
    obj.data["status"]["conditions"].as_array()?.iter().find(|c| c["type"] == "ReleaseResolved").cloned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_condition_reports_routing_problems_and_their_resolution() {
    logs();
    let h = Harness::start().await;
    let crds: Api<CustomResourceDefinition> = Api::all(h.client.clone());
    crds.create(&PostParams::default(), &crd()).await.expect("the CRD installs");
    let gvk = GroupVersionKind::gvk("example.giantswarm.io", "v1", "Cluster");
    let clusters: Api<DynamicObject> =
        Api::namespaced_with(h.client.clone(), NS, &ApiResource::from_gvk_with_plural(&gvk, "clusters"));
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "example.giantswarm.io/v1", "kind": "Cluster",
        "metadata": {"name": "c1", "labels": {"test.giantswarm.io/cluster": "true", "release.giantswarm.io/version": "20.0.0"}},
        "spec": {}
    }))
    .unwrap();
    clusters.create(&PostParams::default(), &obj).await.expect("create");

    let set = ResourceSet::with_default_state("v1", VersionReq::parse("^1").unwrap()).resource(Noop).build();
    let controller = Controller::<Cluster>::builder(h.client.clone(), "status-test")
        .operator(OPERATOR)
        .api(Api::namespaced(h.client.clone(), NS))
        .label_selector(SELECTOR)
        .leadership(Leadership::always())
        .resource_set(set)
        .status_hook(ReleaseCondition::<Cluster>::new(h.client.clone()))
        .build()
        .expect("the controller builds");
    let shutdown = tokio_util::sync::CancellationToken::new();
    let task = tokio::spawn(controller.run(shutdown.clone()));

    // No Release v20.0.0 yet: False, with the reason and a message that says what to do.
    eventually("ReleaseResolved=False", || async {
        let c = clusters.get("c1").await.ok().as_ref().and_then(condition);
        c.is_some_and(|c| c["status"] == "False" && c["reason"] == "ReleaseNotFound")
    })
    .await;
    let c = condition(&clusters.get("c1").await.unwrap()).unwrap();
    assert!(c["message"].as_str().unwrap().contains("Release v20.0.0 does not exist"), "{c}");
    assert_eq!(c["observedGeneration"], 1);

    // The Release appears: True, naming the set.
    h.create_release("v20.0.0", "1.2.0").await;
    eventually("ReleaseResolved=True", || async {
        let c = clusters.get("c1").await.ok().as_ref().and_then(condition);
        c.is_some_and(|c| c["status"] == "True" && c["reason"] == "ResourceSetSelected")
    })
    .await;
    let c = condition(&clusters.get("c1").await.unwrap()).unwrap();
    assert!(c["message"].as_str().unwrap().contains("resource set v1"), "{c}");

    // Steady state: further reconciles (a label change) write no status.
    settle().await;
    let before = h.env.handle().requests();
    clusters
        .patch("c1", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"labels": {"touch": "1"}}})))
        .await
        .unwrap();
    settle().await;
    let during = h.env.handle().requests().since(&before);
    assert_eq!(
        during.get(Verb::Patch, "clusters.example.giantswarm.io"),
        1,
        "only the test's own label patch: {during:?}"
    );
    shutdown.cancel();
    let _ = tokio::time::timeout(WAIT, task).await;
}

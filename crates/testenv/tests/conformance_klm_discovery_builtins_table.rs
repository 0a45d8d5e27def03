//! Checklist sections K, L and M: version, discovery and OpenAPI; the built-in resources
//! clusters always have; Table and metadata-only representations.

mod common;

use std::time::Duration;

use common::*;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Api, ListParams, PostParams};
use kube::discovery::{Discovery, Scope};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use serde_json::{Value, json};

const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io";
const AGGREGATED: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

fn resource<'a>(list: &'a Value, name: &str) -> &'a Value {
    list["resources"]
        .as_array()
        .and_then(|rs| rs.iter().find(|r| r["name"] == name))
        .unwrap_or_else(|| panic!("no {name} in {list}"))
}

fn sorted_strings(v: &Value) -> Vec<String> {
    let mut out: Vec<String> = serde_json::from_value(v.clone()).unwrap_or_default();
    out.sort();
    out
}

#[tokio::test]
async fn k1_version_has_every_field_as_a_string() {
    let (env, http) = start().await;
    let v = http.get("/version").await.json();
    for k in
        ["major", "minor", "gitVersion", "gitCommit", "gitTreeState", "buildDate", "goVersion", "compiler", "platform"]
    {
        assert!(v[k].is_string(), "{k} in {v}");
    }
    let info = env.client().apiserver_version().await.expect("kube-rs parses /version");
    assert_eq!(info.major, "1");
    assert!(info.git_version.starts_with("v1."));
}

#[tokio::test]
async fn k2_legacy_core_discovery() {
    let (env, http) = start().await;
    let api = http.get("/api").await.json();
    assert_eq!(api["kind"], "APIVersions");
    assert_eq!(api["versions"], json!(["v1"]));
    assert_eq!(
        api["serverAddressByClientCIDRs"],
        json!([{"clientCIDR": "0.0.0.0/0", "serverAddress": env.handle().addr().to_string()}])
    );
    let v1 = http.get("/api/v1").await.json();
    assert_eq!(v1["kind"], "APIResourceList");
    assert_eq!(v1["groupVersion"], "v1");
    let cms = resource(&v1, "configmaps");
    assert_eq!(cms["singularName"], "configmap");
    assert_eq!(cms["namespaced"], true);
    assert_eq!(cms["kind"], "ConfigMap");
    assert_eq!(
        sorted_strings(&cms["verbs"]),
        ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
    );
    assert_eq!(cms["shortNames"], json!(["cm"]));
    let ns = resource(&v1, "namespaces");
    assert_eq!(ns["namespaced"], false);
    assert!(!sorted_strings(&ns["verbs"]).contains(&"deletecollection".to_string()));
    assert_eq!(sorted_strings(&resource(&v1, "pods/status")["verbs"]), ["get", "patch", "update"]);
    assert_eq!(resource(&v1, "pods/status")["kind"], "Pod");
    assert!(v1["resources"].as_array().unwrap().iter().any(|r| r["name"] == "pods/eviction"));
}

#[tokio::test]
async fn k2_legacy_group_discovery_of_custom_resources() {
    let (_env, http) = start_with_foo().await;
    let groups = http.get("/apis").await.json();
    assert_eq!(groups["kind"], "APIGroupList");
    let g =
        groups["groups"].as_array().unwrap().iter().find(|g| g["name"] == "example.com").expect("example.com listed");
    assert_eq!(g["versions"], json!([{"groupVersion": "example.com/v1", "version": "v1"}]));
    assert_eq!(g["preferredVersion"], json!({"groupVersion": "example.com/v1", "version": "v1"}));
    assert!(groups["groups"].as_array().unwrap().iter().any(|g| g["name"] == "apps"));
    let group = http.get("/apis/example.com").await.json();
    assert_eq!(group["kind"], "APIGroup");
    assert_eq!(group["name"], "example.com");
    let list = http.get("/apis/example.com/v1").await.json();
    assert_eq!(list["kind"], "APIResourceList");
    assert_eq!(list["apiVersion"], "v1");
    assert_eq!(list["groupVersion"], "example.com/v1");
    let foos = resource(&list, "foos");
    assert_eq!(foos["singularName"], "foo");
    assert_eq!(foos["namespaced"], true);
    assert_eq!(foos["kind"], "Foo");
    assert_eq!(
        sorted_strings(&foos["verbs"]),
        ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
    );
    assert_eq!(foos["shortNames"], json!(["fo"]));
    assert_eq!(foos["categories"], json!(["all"]));
    let status = resource(&list, "foos/status");
    assert_eq!(status["kind"], "Foo");
    assert_eq!(status["namespaced"], true);
    assert_eq!(sorted_strings(&status["verbs"]), ["get", "patch", "update"]);
    let scale = resource(&list, "foos/scale");
    assert_eq!(scale["kind"], "Scale");
    assert_eq!(scale["group"], "autoscaling");
    assert_eq!(scale["version"], "v1");
}

#[tokio::test]
async fn k2_kube_rs_discovery_finds_custom_resources_and_subresources() {
    let (env, http) = start_with_foo().await;
    let _ = &http;
    let discovery = within("discovery", Discovery::new(env.client()).run()).await.expect("discovery runs");
    let group = discovery.get("example.com").expect("example.com discovered");
    let (ar, caps) = group.recommended_kind("Foo").expect("Foo discovered");
    assert_eq!(ar.plural, "foos");
    assert!(matches!(caps.scope, Scope::Namespaced));
    let subs: Vec<String> = caps.subresources.iter().map(|(r, _)| r.plural.clone()).collect();
    assert!(subs.iter().any(|s| s.ends_with("status")), "{subs:?}");
    assert!(discovery.get("apps").is_some());
}

#[tokio::test]
async fn k3_aggregated_discovery_documents() {
    let (env, http) = start_with_foo().await;
    let r = http.get_accept("/apis", AGGREGATED).await;
    r.expect(200);
    assert!(r.content_type().replace(' ', "").contains("as=APIGroupDiscoveryList"), "{}", r.content_type());
    let doc = r.json();
    assert_eq!(doc["kind"], "APIGroupDiscoveryList");
    assert_eq!(doc["apiVersion"], "apidiscovery.k8s.io/v2");
    let g =
        doc["items"].as_array().unwrap().iter().find(|g| g["metadata"]["name"] == "example.com").expect("example.com");
    let v = &g["versions"][0];
    assert_eq!(v["version"], "v1");
    assert_eq!(v["freshness"], "Current");
    let foos = v["resources"].as_array().unwrap().iter().find(|r| r["resource"] == "foos").expect("foos");
    assert_eq!(foos["responseKind"], json!({"group": "example.com", "version": "v1", "kind": "Foo"}));
    assert_eq!(foos["scope"], "Namespaced");
    assert_eq!(foos["singularResource"], "foo");
    assert_eq!(foos["shortNames"], json!(["fo"]));
    assert_eq!(foos["categories"], json!(["all"]));
    let status =
        foos["subresources"].as_array().unwrap().iter().find(|s| s["subresource"] == "status").expect("status");
    assert_eq!(status["responseKind"], json!({"group": "example.com", "version": "v1", "kind": "Foo"}));
    assert_eq!(sorted_strings(&status["verbs"]), ["get", "patch", "update"]);
    let core = http.get_accept("/api", AGGREGATED).await.json();
    assert_eq!(core["kind"], "APIGroupDiscoveryList");
    let g = &core["items"][0];
    assert_eq!(g["metadata"].get("name").and_then(Value::as_str).unwrap_or(""), "");
    assert!(g["versions"][0]["resources"].as_array().unwrap().iter().any(|r| r["resource"] == "configmaps"));
    // kube-rs uses it.
    let discovery = within("aggregated discovery", Discovery::new(env.client()).run_aggregated())
        .await
        .expect("aggregated discovery");
    assert!(discovery.get("example.com").and_then(|g| g.recommended_kind("Foo")).is_some());
}

#[tokio::test]
async fn k4_openapi_v3_documents_have_patch_operations_with_gvk_and_field_validation() {
    let (_env, http) = start_with_foo().await;
    let root = http.get("/openapi/v3").await;
    root.expect(200);
    let root = root.json();
    let url =
        root["paths"]["apis/example.com/v1"]["serverRelativeURL"].as_str().expect("example.com/v1 listed").to_string();
    assert!(url.starts_with("/openapi/v3/apis/example.com/v1?hash="), "{url}");
    assert!(root["paths"]["api/v1"]["serverRelativeURL"].is_string());
    let doc = http.get_accept(&url, "application/json").await;
    doc.expect(200);
    let doc = doc.json();
    assert!(doc["openapi"].as_str().is_some_and(|v| v.starts_with("3.")), "{}", doc["openapi"]);
    let item = &doc["paths"]["/apis/example.com/v1/namespaces/{namespace}/foos/{name}"];
    let patch = &item["patch"];
    assert_eq!(
        patch["x-kubernetes-group-version-kind"],
        json!({"group": "example.com", "version": "v1", "kind": "Foo"})
    );
    let params: Vec<Value> = patch["parameters"].as_array().cloned().unwrap_or_default();
    let all_params: Vec<Value> =
        params.into_iter().chain(item["parameters"].as_array().cloned().unwrap_or_default()).collect();
    assert!(all_params.iter().any(|p| p["name"] == "fieldValidation"), "{patch}");
    assert!(patch["requestBody"].is_object());
    let schemas = doc["components"]["schemas"].as_object().expect("components.schemas");
    assert!(
        schemas.values().any(|s| s["x-kubernetes-group-version-kind"]
            .as_array()
            .is_some_and(|g| g.iter().any(|g| g["kind"] == "Foo"))),
        "a Foo schema with its GVK"
    );
}

#[tokio::test]
async fn k4_openapi_hash_changes_when_the_crd_changes() {
    let (_env, http) = start_with_foo().await;
    let before = http.get("/openapi/v3").await.json()["paths"]["apis/example.com/v1"]["serverRelativeURL"].clone();
    let mut crd = http.get(&format!("{CRDS}/foos.example.com")).await.json();
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["extra"] =
        json!({"type": "string"});
    http.put(&format!("{CRDS}/foos.example.com"), &crd).await.expect(200);
    let after = http.get("/openapi/v3").await.json()["paths"]["apis/example.com/v1"]["serverRelativeURL"].clone();
    assert_ne!(before, after);
}

#[tokio::test]
async fn k5_openapi_v2_is_served_as_json_with_definitions() {
    let (_env, http) = start().await;
    // client-go asks for protobuf: a document without definitions.
    let r = http.get_accept("/openapi/v2", "application/com.github.proto-openapi.spec.v2@v1.0+protobuf").await;
    r.expect(200);
    assert_eq!(r.content_type(), "application/com.github.proto-openapi.spec.v2.v1.0+protobuf");
    assert_eq!(&r.body[..], b"\x0a\x032.0");
    assert_eq!(http.get_accept("/openapi/v2", "application/yaml").await.status, 406);
    let r = http.get_accept("/openapi/v2", "application/json").await;
    r.expect(200);
    let doc = r.json();
    assert_eq!(doc["swagger"], "2.0");
    let deployment = &doc["definitions"]["io.k8s.api.apps.v1.Deployment"];
    assert_eq!(
        deployment["x-kubernetes-group-version-kind"],
        json!([{"group": "apps", "version": "v1", "kind": "Deployment"}])
    );
    let spec_ref =
        deployment["properties"]["spec"]["allOf"][0]["$ref"].as_str().expect("spec refers to DeploymentSpec");
    assert_eq!(spec_ref, "#/definitions/io.k8s.api.apps.v1.DeploymentSpec");
}

#[tokio::test]
async fn k6_discovery_and_openapi_follow_crd_changes_immediately() {
    let (_env, http) = start().await;
    assert_eq!(http.get("/apis/example.com/v1").await.status, 404);
    assert!(http.get("/openapi/v3").await.json()["paths"].get("apis/example.com/v1").is_none());
    http.post(CRDS, &foo_crd()).await.expect(201);
    http.get("/apis/example.com/v1").await.expect(200);
    assert!(http.get("/openapi/v3").await.json()["paths"].get("apis/example.com/v1").is_some());
    // A new version appears at once.
    let mut crd = http.get(&format!("{CRDS}/foos.example.com")).await.json();
    let mut v2 = crd["spec"]["versions"][0].clone();
    v2["name"] = json!("v2");
    v2["storage"] = json!(false);
    crd["spec"]["versions"].as_array_mut().unwrap().push(v2);
    http.put(&format!("{CRDS}/foos.example.com"), &crd).await.expect(200);
    http.get("/apis/example.com/v2").await.expect(200);
    let group = http.get("/apis/example.com").await.json();
    assert_eq!(group["versions"].as_array().unwrap().len(), 2);
    assert_eq!(group["preferredVersion"]["version"], "v2", "GA v2 is preferred over v1");
}

#[tokio::test]
async fn l1_system_namespaces_exist_and_are_active() {
    let (_env, http) = start().await;
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        let r = http.get(&format!("/api/v1/namespaces/{ns}")).await;
        r.expect(200);
        assert_eq!(r.json()["status"]["phase"], "Active", "{ns}");
    }
}

#[tokio::test]
async fn l2_leases_keep_micro_time_precision() {
    let (env, http) = start().await;
    let leases: Api<Lease> = Api::namespaced(env.client(), "default");
    let now = jiff::Timestamp::from_microsecond(1_767_225_600_123_456).unwrap();
    let mut lease = Lease::default();
    lease.metadata.name = Some("l".into());
    lease.spec = Some(LeaseSpec {
        holder_identity: Some("me".into()),
        lease_duration_seconds: Some(15),
        acquire_time: Some(MicroTime(now)),
        renew_time: Some(MicroTime(now)),
        lease_transitions: Some(0),
        ..LeaseSpec::default()
    });
    let created = leases.create(&PostParams::default(), &lease).await.expect("create lease");
    assert_eq!(created.spec.as_ref().and_then(|s| s.renew_time.clone()).map(|t| t.0), Some(now));
    let raw = http.get("/apis/coordination.k8s.io/v1/namespaces/default/leases/l").await.json();
    assert_eq!(raw["spec"]["renewTime"], "2026-01-01T00:00:00.123456Z");
    // Second precision input is normalised to six fractional digits.
    let r = http
        .merge(
            "/apis/coordination.k8s.io/v1/namespaces/default/leases/l",
            &json!({"spec": {"renewTime": "2026-01-01T00:00:05Z"}}),
        )
        .await;
    r.expect(200);
    assert_eq!(r.json()["spec"]["renewTime"], "2026-01-01T00:00:05.000000Z");
    let mut l = leases.get("l").await.expect("get");
    l.spec.as_mut().unwrap().holder_identity = Some("other".into());
    let replaced = leases.replace("l", &PostParams::default(), &l).await.expect("replace");
    assert_eq!(replaced.spec.and_then(|s| s.holder_identity).as_deref(), Some("other"));
}

#[tokio::test]
async fn l3_kube_runtime_recorder_events_are_stored_and_visible_as_core_events() {
    let (env, http) = start_with_foo().await;
    let f = create_foo(&http, "f", json!({})).await;
    let reference = ObjectReference {
        api_version: Some("example.com/v1".into()),
        kind: Some("Foo".into()),
        name: Some("f".into()),
        namespace: Some("default".into()),
        uid: f["metadata"]["uid"].as_str().map(str::to_string),
        ..ObjectReference::default()
    };
    let recorder =
        Recorder::new(env.client(), Reporter { controller: "foo-controller".into(), instance: Some("pod-1".into()) });
    let event = Event {
        type_: EventType::Normal,
        reason: "Reconciled".into(),
        note: Some("all good".into()),
        action: "Reconcile".into(),
        secondary: None,
    };
    recorder.publish(&event, &reference).await.expect("publish");
    recorder.publish(&event, &reference).await.expect("publish again (series)");
    let v1 = http.get("/apis/events.k8s.io/v1/namespaces/default/events").await.json();
    let items = v1["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "a repeated event is one object with a series: {v1}");
    let e = &items[0];
    assert_eq!(e["reason"], "Reconciled");
    assert_eq!(e["note"], "all good");
    assert_eq!(e["reportingController"], "foo-controller");
    assert_eq!(e["regarding"]["name"], "f");
    assert_eq!(e["series"]["count"], 2);
    // kubectl describe's query on core/v1 events finds it.
    let uid = f["metadata"]["uid"].as_str().unwrap();
    let q = format!(
        "involvedObject.uid%3D{uid},involvedObject.name%3Df,involvedObject.namespace%3Ddefault,involvedObject.kind%3DFoo"
    );
    let core = http
        .get_accept(
            &format!("/api/v1/namespaces/default/events?fieldSelector={q}&limit=500"),
            "application/vnd.kubernetes.protobuf,application/json",
        )
        .await
        .json();
    let items = core["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{core}");
    assert_eq!(items[0]["message"], "all good");
    assert_eq!(items[0]["involvedObject"]["uid"], uid);
    assert_eq!(items[0]["source"]["component"], "foo-controller");
}

#[tokio::test]
async fn l3_events_for_cluster_scoped_objects_go_to_default() {
    let (env, _http) = start().await;
    let reference = ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Node".into()),
        name: Some("n1".into()),
        ..ObjectReference::default()
    };
    let recorder = Recorder::new(env.client(), Reporter { controller: "ctl".into(), instance: None });
    let event =
        Event { type_: EventType::Warning, reason: "Oops".into(), note: None, action: "Check".into(), secondary: None };
    recorder.publish(&event, &reference).await.expect("publish");
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(env.client(), "default");
    let list = events.list(&ListParams::default()).await.expect("list");
    assert_eq!(list.items.len(), 1);
    assert_eq!(list.items[0].type_.as_deref(), Some("Warning"));
}

#[tokio::test]
async fn l4_common_builtin_resources_are_served() {
    let (_env, http) = start().await;
    for path in [
        "/api/v1/namespaces/default/configmaps",
        "/api/v1/namespaces/default/secrets",
        "/api/v1/namespaces/default/serviceaccounts",
        "/api/v1/namespaces/default/services",
        "/api/v1/namespaces/default/pods",
        "/apis/apps/v1/namespaces/default/deployments",
        "/apis/apps/v1/namespaces/default/statefulsets",
        "/apis/batch/v1/namespaces/default/jobs",
        "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles",
        "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        "/apis/coordination.k8s.io/v1/namespaces/default/leases",
        "/apis/events.k8s.io/v1/namespaces/default/events",
    ] {
        let r = http.get(path).await;
        assert_eq!(r.status, 200, "{path}: {}", r.text());
    }
}

#[tokio::test]
async fn l4_secrets_fold_string_data_and_validate_base64() {
    let (_env, http) = start().await;
    let secrets = "/api/v1/namespaces/default/secrets";
    let r = http
        .post(secrets, &json!({"metadata": {"name": "s"}, "stringData": {"user": "admin"}, "data": {"other": "eA=="}}))
        .await;
    r.expect(201);
    let s = r.json();
    assert_eq!(s["data"], json!({"user": "YWRtaW4=", "other": "eA=="}));
    assert!(s.get("stringData").is_none());
    assert_eq!(s["type"], "Opaque");
    let r = http.post(secrets, &json!({"metadata": {"name": "bad"}, "data": {"k": "not base64!"}})).await;
    assert_reason(&r, 400, "BadRequest");
}

#[tokio::test]
async fn l4_immutable_configmaps_and_secrets_refuse_data_changes() {
    let (_env, http) = start().await;
    let mut body = cm("a", json!({"k": "v"}));
    body["immutable"] = json!(true);
    http.post(CMS, &body).await.expect(201);
    let s = assert_reason(&http.merge(&format!("{CMS}/a"), &json!({"data": {"k": "w"}})).await, 422, "Invalid");
    assert_eq!(s["details"]["causes"][0]["field"], "data");
    // Metadata may still change.
    http.merge(&format!("{CMS}/a"), &json!({"metadata": {"labels": {"x": "y"}}})).await.expect(200);
    let secrets = "/api/v1/namespaces/default/secrets";
    http.post(secrets, &json!({"metadata": {"name": "s"}, "data": {"k": "eA=="}, "immutable": true})).await.expect(201);
    assert_reason(&http.merge(&format!("{secrets}/s"), &json!({"data": {"k": "eQ=="}})).await, 422, "Invalid");
}

#[tokio::test]
async fn l5_deployment_defaults() {
    let (_env, http) = start().await;
    let d = json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
        "spec": {"selector": {"matchLabels": {"app": "d"}}, "template": {"metadata": {"labels": {"app": "d"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}
    });
    let r = http.post("/apis/apps/v1/namespaces/default/deployments", &d).await;
    r.expect(201);
    let spec = r.json()["spec"].clone();
    assert_eq!(spec["replicas"], 1);
    assert_eq!(spec["revisionHistoryLimit"], 10);
    assert_eq!(spec["progressDeadlineSeconds"], 600);
    assert_eq!(
        spec["strategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}})
    );
}

#[tokio::test]
async fn m1_table_for_get_list_and_include_object() {
    let (_env, http) = start().await;
    create_cm(&http, "a", json!({"k": "v"})).await;
    let one = http.get_accept(&format!("{CMS}/a"), TABLE).await;
    one.expect(200);
    let t = one.json();
    assert_eq!(t["kind"], "Table");
    assert_eq!(t["apiVersion"], "meta.k8s.io/v1");
    assert_eq!(t["columnDefinitions"][0]["name"], "Name");
    assert_eq!(t["columnDefinitions"][0]["format"], "name");
    assert_eq!(t["rows"].as_array().map(Vec::len), Some(1));
    assert_eq!(t["rows"][0]["cells"][0], "a");
    assert_eq!(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
    assert!(t["metadata"]["resourceVersion"].is_string());
    let full = http.get_accept(&format!("{CMS}?includeObject=Object"), TABLE).await.json();
    assert_eq!(full["rows"][0]["object"]["kind"], "ConfigMap");
    assert_eq!(full["rows"][0]["object"]["data"]["k"], "v");
    let none = http.get_accept(&format!("{CMS}?includeObject=None"), TABLE).await.json();
    assert!(none["rows"][0].get("object").is_none_or(Value::is_null), "{none}");
}

#[tokio::test]
async fn m1_table_lists_page_and_carry_namespaces_in_row_objects() {
    let (_env, http) = start().await;
    http.post("/api/v1/namespaces", &json!({"metadata": {"name": "other"}})).await.expect(201);
    create_cm(&http, "a", json!({})).await;
    create_cm(&http, "b", json!({})).await;
    http.post("/api/v1/namespaces/other/configmaps", &cm("c", json!({}))).await.expect(201);
    let p1 = http.get_accept("/api/v1/configmaps?limit=2", TABLE).await.json();
    assert_eq!(p1["kind"], "Table");
    assert_eq!(p1["rows"].as_array().map(Vec::len), Some(2));
    let token = p1["metadata"]["continue"].as_str().expect("continue in Table metadata").to_string();
    let rvs = rv_str(&p1);
    assert_eq!(p1["rows"][0]["object"]["metadata"]["namespace"], "default");
    let p2 = http.get_accept(&format!("/api/v1/configmaps?limit=2&continue={token}"), TABLE).await.json();
    assert_eq!(rv_str(&p2), rvs);
    assert_eq!(p2["rows"][0]["object"]["metadata"]["namespace"], "other");
    assert_eq!(p2["rows"][0]["cells"][0], "c");
}

#[tokio::test]
async fn m1_builtin_tables_have_their_kubectl_columns() {
    let (env, http) = start().await;
    http.post("/apis/apps/v1/namespaces/default/deployments", &json!({
        "metadata": {"name": "d"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "d"}}, "template": {"metadata": {"labels": {"app": "d"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}
    })).await.expect(201);
    env.handle().advance_clock(Duration::from_secs(120));
    let t = http.get_accept("/apis/apps/v1/namespaces/default/deployments", TABLE).await.json();
    let cols: Vec<&str> =
        t["columnDefinitions"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(&cols[..5], ["Name", "Ready", "Up-to-date", "Available", "Age"]);
    assert_eq!(t["rows"][0]["cells"][0], "d");
    // 120 s of advanced clock plus the real time the requests took: a second boundary may fall
    // in between (kubectl's age format shows seconds below ten minutes).
    let age = t["rows"][0]["cells"][4].as_str().unwrap_or_default();
    assert!(age == "2m" || age == "2m1s", "age {age}");
}

#[tokio::test]
async fn m2_partial_object_metadata_get_and_list() {
    let (env, http) = start().await;
    for n in ["a", "b", "c"] {
        create_cm(&http, n, json!({"payload": "x"})).await;
    }
    let r = http
        .get_accept(&format!("{CMS}?limit=2"), "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1")
        .await;
    r.expect(200);
    let l = r.json();
    assert_eq!(l["kind"], "PartialObjectMetadataList");
    assert_eq!(l["apiVersion"], "meta.k8s.io/v1");
    assert!(l["metadata"]["resourceVersion"].is_string());
    assert!(l["metadata"]["continue"].as_str().is_some_and(|c| !c.is_empty()));
    assert_eq!(l["items"].as_array().map(Vec::len), Some(2));
    assert_eq!(l["items"][0]["kind"], "PartialObjectMetadata");
    assert!(l["items"][0].get("data").is_none());
    // kube-rs metadata calls.
    let api: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(env.client(), "default");
    let meta = api.get_metadata("a").await.expect("get_metadata");
    assert_eq!(meta.metadata.name.as_deref(), Some("a"));
    let list = api.list_metadata(&ListParams::default()).await.expect("list_metadata");
    assert_eq!(list.items.len(), 3);
}

#[tokio::test]
async fn m2_the_wrong_metadata_form_is_406() {
    let (_env, http) = start().await;
    create_cm(&http, "a", json!({})).await;
    let r =
        http.get_accept(&format!("{CMS}/a"), "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1").await;
    assert_reason(&r, 406, "NotAcceptable");
    let r = http.get_accept(CMS, "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1").await;
    assert_reason(&r, 406, "NotAcceptable");
}

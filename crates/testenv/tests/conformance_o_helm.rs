//! Conformance O: what Helm and kubectl need beyond the basics. Protobuf `DeleteOptions` on
//! delete and deletecollection (Helm's uninstall, `kubectl drain --disable-eviction`),
//! `autoscaling/v2` HorizontalPodAutoscalers, `pods/log`, Job defaulting and validation, and
//! OpenAPI schemas of the built-in kinds, and NetworkPolicies (charts ship them).

mod common;

use common::*;
use http::Method;
use serde_json::{Value, json};

const CMS: &str = "/api/v1/namespaces/default/configmaps";
const PODS: &str = "/api/v1/namespaces/default/pods";
const HPAS: &str = "/apis/autoscaling/v2/namespaces/default/horizontalpodautoscalers";
const JOBS: &str = "/apis/batch/v1/namespaces/default/jobs";
const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

/// A protobuf field with a length-delimited value.
fn bytes_field(number: u64, value: &[u8]) -> Vec<u8> {
    let mut out = varint((number << 3) | 2);
    out.extend(varint(value.len() as u64));
    out.extend_from_slice(value);
    out
}

fn varint(mut v: u64) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return out;
        }
        out.push(byte | 0x80);
    }
}

/// A `runtime.Unknown` envelope as client-go writes it: `k8s\0`, TypeMeta, raw message.
fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    let mut type_meta = bytes_field(1, api_version.as_bytes());
    type_meta.extend(bytes_field(2, kind.as_bytes()));
    let mut unknown = bytes_field(1, &type_meta);
    unknown.extend(bytes_field(2, raw));
    let mut out = b"k8s\0".to_vec();
    out.extend(unknown);
    out
}

/// DeleteOptions as protobuf: preconditions.uid (2.1), propagationPolicy (4), dryRun (5).
fn delete_options(uid: Option<&str>, propagation: Option<&str>, dry_run: bool) -> Vec<u8> {
    let mut raw = Vec::new();
    // gracePeriodSeconds (1): 0, as Helm sends for its release Secrets.
    raw.extend(varint(1 << 3));
    raw.extend(varint(0));
    if let Some(uid) = uid {
        raw.extend(bytes_field(2, &bytes_field(1, uid.as_bytes())));
    }
    if let Some(p) = propagation {
        raw.extend(bytes_field(4, p.as_bytes()));
    }
    if dry_run {
        raw.extend(bytes_field(5, b"All"));
    }
    envelope("meta.k8s.io/v1", "DeleteOptions", &raw)
}

async fn delete_protobuf(http: &Http, path: &str, body: Vec<u8>) -> Resp {
    http.send(Method::DELETE, path, &[("content-type", PROTOBUF)], Some(body)).await
}

#[tokio::test]
async fn o1_delete_decodes_protobuf_delete_options() {
    let (_env, http) = start().await;
    let cm = create_cm(&http, "release", json!({"k": "v"})).await;
    let uid = cm["metadata"]["uid"].as_str().unwrap().to_string();

    // The precondition is read from the protobuf body: a wrong uid is a conflict.
    let r = delete_protobuf(&http, &format!("{CMS}/release"), delete_options(Some("wrong"), None, false)).await;
    let body = assert_reason(&r, 409, "Conflict");
    let message = body["message"].as_str().unwrap();
    assert!(
        message.contains(&format!("the UID in the precondition (wrong) does not match the UID in record ({uid})")),
        "{message}"
    );
    // dryRun=All from the body leaves the object.
    let r = delete_protobuf(&http, &format!("{CMS}/release"), delete_options(None, None, true)).await;
    r.expect(200);
    http.get(&format!("{CMS}/release")).await.expect(200);
    // The real thing, as Helm's uninstall sends it.
    let r =
        delete_protobuf(&http, &format!("{CMS}/release"), delete_options(Some(&uid), Some("Background"), false)).await;
    r.expect(200);
    assert_eq!(http.get(&format!("{CMS}/release")).await.status, 404);
}

#[tokio::test]
async fn o2_deletecollection_decodes_protobuf_delete_options() {
    let (_env, http) = start().await;
    for name in ["a", "b"] {
        let mut cm = cm(name, json!({}));
        cm["metadata"]["labels"] = json!({"release": "x"});
        http.post(CMS, &cm).await.expect(201);
    }
    let path = format!("{CMS}?labelSelector=release%3Dx");
    let r = delete_protobuf(&http, &path, delete_options(None, None, true)).await;
    r.expect(200);
    assert_eq!(http.get(&path).await.json()["items"].as_array().unwrap().len(), 2, "dry run keeps both");
    let r = delete_protobuf(&http, &path, delete_options(None, Some("Background"), false)).await;
    r.expect(200);
    assert_eq!(r.json()["items"].as_array().unwrap().len(), 2);
    assert!(http.get(&path).await.json()["items"].as_array().unwrap().is_empty());
}

#[tokio::test]
async fn o3_a_protobuf_delete_body_must_hold_delete_options() {
    let (_env, http) = start().await;
    create_cm(&http, "keep", json!({})).await;
    let raw = bytes_field(1, &bytes_field(1, b"keep"));
    let r = delete_protobuf(&http, &format!("{CMS}/keep"), envelope("v1", "ConfigMap", &raw)).await;
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.json()["message"].as_str().unwrap().contains("couldn't decode DeleteOptions"), "{}", r.text());
    http.get(&format!("{CMS}/keep")).await.expect(200);
}

fn hpa(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": name}, "spec": spec})
}

#[tokio::test]
async fn o4_horizontal_pod_autoscalers_are_served_defaulted_and_validated() {
    let (_env, http) = start().await;
    let resources = http.get("/apis/autoscaling/v2").await.json();
    let hpa_resource = resources["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "horizontalpodautoscalers")
        .cloned()
        .expect("autoscaling/v2 serves horizontalpodautoscalers");
    assert_eq!(hpa_resource["shortNames"], json!(["hpa"]));
    assert_eq!(hpa_resource["kind"], "HorizontalPodAutoscaler");

    let target = json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"});
    let r = http.post(HPAS, &hpa("web", json!({"scaleTargetRef": target, "maxReplicas": 4}))).await;
    r.expect(201);
    let created = r.json();
    assert_eq!(created["spec"]["minReplicas"], 1);
    assert_eq!(
        created["spec"]["metrics"],
        json!([{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}])
    );
    assert!(created.get("status").is_none_or(|s| s.as_object().is_none_or(|m| m.is_empty())), "{created}");

    let r = http
        .post(HPAS, &hpa("bad", json!({"scaleTargetRef": {"kind": "Deployment"}, "minReplicas": 5, "maxReplicas": 2})))
        .await;
    let body = assert_reason(&r, 422, "Invalid");
    let causes: Vec<String> = body["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| format!("{}: {}", c["field"].as_str().unwrap(), c["message"].as_str().unwrap()))
        .collect();
    assert!(
        causes.iter().any(
            |c| c.starts_with("spec.maxReplicas: Invalid value: 2: must be greater than or equal to `minReplicas`")
        ),
        "{causes:?}"
    );
    assert!(causes.iter().any(|c| c == "spec.scaleTargetRef.name: Required value"), "{causes:?}");
    let r = http.post(HPAS, &hpa("zero", json!({"scaleTargetRef": target, "maxReplicas": 0}))).await;
    assert_reason(&r, 422, "Invalid");
}

#[tokio::test]
async fn o5_pod_logs_are_empty_and_name_their_container() {
    let (_env, http) = start().await;
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "two"},
        "spec": {"containers": [{"name": "a", "image": "busybox"}, {"name": "b", "image": "busybox"}]}});
    http.post(PODS, &pod).await.expect(201);
    let r = http.get(&format!("{PODS}/two/log")).await;
    assert_status(&r, 400, "BadRequest", "a container name must be specified for pod two, choose one of: [a b]");
    let r = http.get(&format!("{PODS}/two/log?container=b")).await;
    r.expect(200);
    assert!(r.content_type().starts_with("text/plain"), "{}", r.content_type());
    assert_eq!(r.text(), "");
    let r = http.get(&format!("{PODS}/two/log?container=c")).await;
    assert_status(&r, 400, "BadRequest", "container c is not valid for pod two");
    assert_eq!(http.get(&format!("{PODS}/none/log")).await.status, 404);
    // Only GET.
    assert_eq!(http.post(&format!("{PODS}/two/log"), &json!({})).await.status, 405);

    let core = http.get("/api/v1").await.json();
    let log = core["resources"].as_array().unwrap().iter().find(|r| r["name"] == "pods/log").cloned();
    assert_eq!(log.expect("pods/log is listed")["verbs"], json!(["get"]));
}

#[tokio::test]
async fn o6_jobs_get_a_generated_selector_and_defaults() {
    let (_env, http) = start().await;
    let job = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "migrate"},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "m", "image": "busybox:1.36"}]}}}});
    let r = http.post(JOBS, &job).await;
    r.expect(201);
    let created = r.json();
    let uid = created["metadata"]["uid"].as_str().unwrap();
    let spec = &created["spec"];
    assert_eq!(spec["selector"], json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}));
    let labels = &spec["template"]["metadata"]["labels"];
    assert_eq!(labels["batch.kubernetes.io/controller-uid"], uid);
    assert_eq!(labels["batch.kubernetes.io/job-name"], "migrate");
    assert_eq!(labels["job-name"], "migrate");
    assert_eq!((spec["completions"].clone(), spec["parallelism"].clone()), (json!(1), json!(1)));
    assert_eq!(spec["backoffLimit"], 6);
    assert_eq!(spec["completionMode"], "NonIndexed");
    assert_eq!(spec["template"]["spec"]["terminationGracePeriodSeconds"], 30);

    // A Job's pods must not be restarted forever.
    let mut always = job.clone();
    always["metadata"]["name"] = json!("forever");
    always["spec"]["template"]["spec"]["restartPolicy"] = json!("Always");
    let r = http.post(JOBS, &always).await;
    let body = assert_reason(&r, 422, "Invalid");
    let message = body["message"].as_str().unwrap();
    assert!(
        message.contains(
            r#"spec.template.spec.restartPolicy: Unsupported value: "Always": supported values: "OnFailure", "Never""#
        ),
        "{message}"
    );
}

#[tokio::test]
async fn o7_openapi_v3_has_schemas_of_builtin_kinds() {
    let (_env, http) = start().await;
    let root = http.get("/openapi/v3").await.json();
    let url = root["paths"]["apis/apps/v1"]["serverRelativeURL"].as_str().expect("apps/v1").to_string();
    let doc = http.get_accept(&url, "application/json").await.json();
    let schemas = doc["components"]["schemas"].as_object().expect("components.schemas");
    let deployment = &schemas["io.k8s.api.apps.v1.Deployment"];
    assert_eq!(
        deployment["x-kubernetes-group-version-kind"],
        json!([{"group": "apps", "version": "v1", "kind": "Deployment"}])
    );
    let spec = &schemas["io.k8s.api.apps.v1.DeploymentSpec"];
    assert!(spec["description"].as_str().unwrap().contains("DeploymentSpec is the specification"), "{spec}");
    assert_eq!(spec["required"], json!(["selector", "template"]));
    let containers = &schemas["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"];
    assert_eq!(containers["x-kubernetes-patch-merge-key"], "name");
    // The operations refer to the schema, and built-in kinds take strategic merge patches.
    let item = &doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"];
    assert_eq!(
        item["put"]["requestBody"]["content"]["application/json"]["schema"]["$ref"],
        "#/components/schemas/io.k8s.api.apps.v1.Deployment"
    );
    assert!(item["patch"]["requestBody"]["content"].get("application/strategic-merge-patch+json").is_some());
    // Every reference resolves within the document.
    let text = doc.to_string();
    for name in text.split("\"#/components/schemas/").skip(1).map(|s| s.split('"').next().unwrap()) {
        assert!(schemas.contains_key(name), "{name} is referred to but missing");
    }
}

#[tokio::test]
async fn o8_network_policies_are_served_applied_and_versioned() {
    let (_env, http) = start().await;
    let resources = http.get("/apis/networking.k8s.io/v1").await.json();
    let netpol = resources["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "networkpolicies")
        .cloned()
        .expect("networking.k8s.io/v1 serves networkpolicies");
    assert_eq!(netpol["kind"], "NetworkPolicy");
    assert_eq!(netpol["namespaced"], true);
    assert_eq!(netpol["shortNames"], json!(["netpol"]));

    // Server-side apply, as Helm 4 writes a chart's objects.
    let path = "/apis/networking.k8s.io/v1/namespaces/default/networkpolicies/operator";
    let policy = |port: u16| {
        json!({
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": {"name": "operator"},
            "spec": {
                "podSelector": {"matchLabels": {"app": "operator"}},
                "policyTypes": ["Ingress", "Egress"],
                "ingress": [{"ports": [{"port": 8000, "protocol": "TCP"}]}],
                "egress": [{"ports": [{"port": port, "protocol": "TCP"}]}],
            },
        })
    };
    let created = http.apply(path, "fieldManager=helm", &policy(443)).await;
    created.expect(201);
    let created = created.json();
    assert_eq!(created["metadata"]["generation"], 1);
    assert!(created.get("status").is_none(), "networking.k8s.io/v1 NetworkPolicy has no status: {created}");
    // A spec change moves the generation; the same spec again changes nothing.
    let changed = http.apply(path, "fieldManager=helm", &policy(6443)).await.json();
    assert_eq!(changed["metadata"]["generation"], 2);
    assert_eq!(changed["spec"]["egress"], json!([{"ports": [{"port": 6443, "protocol": "TCP"}]}]));
    let again = http.apply(path, "fieldManager=helm", &policy(6443)).await.json();
    assert_eq!(again["metadata"]["resourceVersion"], changed["metadata"]["resourceVersion"]);
    // Undecodable bodies are refused like any built-in kind's.
    let mut bad = policy(443);
    bad["metadata"]["name"] = json!("bad");
    bad["spec"]["podSelector"] = json!("all");
    let r = http.post("/apis/networking.k8s.io/v1/namespaces/default/networkpolicies", &bad).await;
    assert_eq!(r.status, 400, "{}", r.text());
    let listed = http.get("/apis/networking.k8s.io/v1/namespaces/default/networkpolicies").await.json();
    assert_eq!(listed["items"].as_array().unwrap().len(), 1);
    http.delete(path).await.expect(200);
    assert_eq!(http.get(path).await.status, 404);
}

//! Helpers shared by the cluster simulation tests (`sim_*.rs`), on top of the conformance
//! suite's (`common`).
#![allow(dead_code)]

#[path = "../common/mod.rs"]
mod common;

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use serde_json::{Value, json};
use testenv::{SimConfig, TestEnv};

/// How long a test waits for the simulation to reach an expected state.
pub const WAIT: Duration = Duration::from_secs(30);

/// A server with the simulation on.
pub async fn start(config: SimConfig) -> TestEnv {
    TestEnv::builder().simulation(config).start().await.expect("the test server starts")
}

/// Poll `probe` until it yields a value, failing the test after [`WAIT`].
pub async fn eventually<T, F, Fut>(what: &str, probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    common::eventually(WAIT, what, probe).await
}

/// A Deployment of `replicas` pods labelled `app=<name>`, with one nginx container exposing
/// port 8080 as `http`. `extra` is merged into the Deployment's spec.
pub fn deployment(name: &str, replicas: i32, extra: Value) -> Deployment {
    let mut d = json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "terminationGracePeriodSeconds": 0,
                    "containers": [{"name": "web", "image": "nginx:1.27", "ports": [{"name": "http", "containerPort": 8080}]}],
                },
            },
        },
    });
    merge(&mut d["spec"], extra);
    serde_json::from_value(d).expect("a valid Deployment")
}

/// A bare pod labelled `app=<name>`; `extra` is merged into the whole object.
pub fn pod(name: &str, extra: Value) -> Pod {
    let mut p = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {"terminationGracePeriodSeconds": 0, "containers": [{"name": "main", "image": "busybox:1.36"}]},
    });
    merge(&mut p, extra);
    serde_json::from_value(p).expect("a valid Pod")
}

/// JSON merge of `extra` into `base` (objects merge, everything else replaces).
pub fn merge(base: &mut Value, extra: Value) {
    match (base, extra) {
        (Value::Object(b), Value::Object(e)) => {
            for (k, v) in e {
                merge(b.entry(k).or_insert(Value::Null), v);
            }
        }
        (b, e) => *b = e,
    }
}

/// The status of a pod condition, if the pod has it.
pub fn condition(pod: &Pod, type_: &str) -> Option<(String, Option<String>, Option<String>)> {
    let c = pod.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == type_)?;
    Some((c.status.clone(), c.reason.clone(), c.message.clone()))
}

/// Whether a pod is Ready.
pub fn ready(pod: &Pod) -> bool {
    condition(pod, "Ready").is_some_and(|c| c.0 == "True")
}

/// The pods matching a label selector in `default`.
pub async fn pods(env: &TestEnv, selector: &str) -> Vec<Pod> {
    let api: Api<Pod> = Api::default_namespaced(env.client());
    api.list(&ListParams::default().labels(selector)).await.expect("list pods").items
}

/// Wait until the Deployment reports all replicas updated and available at its generation.
pub async fn rolled_out(env: &TestEnv, name: &str) -> Deployment {
    let api: Api<Deployment> = Api::default_namespaced(env.client());
    eventually(&format!("deployment {name} to roll out"), || async {
        let d = api.get(name).await.ok()?;
        let replicas = d.spec.as_ref()?.replicas.unwrap_or(1);
        let s = d.status.as_ref()?;
        let done = s.observed_generation == d.metadata.generation
            && s.updated_replicas.unwrap_or(0) == replicas
            && s.replicas.unwrap_or(0) == replicas
            && s.available_replicas.unwrap_or(0) == replicas
            && s.conditions
                .iter()
                .flatten()
                .any(|c| c.type_ == "Progressing" && c.reason.as_deref() == Some("NewReplicaSetAvailable"));
        done.then_some(d)
    })
    .await
}

/// POST a JSON body to the server; the status code and the JSON answer.
pub async fn post(env: &TestEnv, path: &str, body: &Value) -> (u16, Value) {
    let response = common::Http::new(env).post(path, body).await;
    let json = serde_json::from_slice(&response.body).unwrap_or(Value::Null);
    (response.status, json)
}

/// POST an Eviction of pod `default/<name>`.
pub async fn evict(env: &TestEnv, name: &str) -> (u16, Value) {
    let eviction =
        json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": "default"}});
    post(env, &format!("/api/v1/namespaces/default/pods/{name}/eviction"), &eviction).await
}

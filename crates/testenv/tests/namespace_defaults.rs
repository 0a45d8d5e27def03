//! What every namespace of a real cluster holds, as kube-controller-manager's service-account
//! controller and root-CA publisher give it: a `default` ServiceAccount (so `kubectl create
//! token default` works) and the `kube-root-ca.crt` ConfigMap with the serving CA under
//! `ca.crt`; both come back when deleted. Checked with the real kubectl (v1.32 and `$KUBECTL_NEW`).

mod kubectl_support;

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
use kube::api::Api;
use testenv::TestEnv;

/// Retry `kubectl args` for up to 10 s until it succeeds (the controllers run right after the
/// namespace is created, not inside the request); its standard output.
async fn eventually_ok(k: &kubectl_support::Kubectl, args: &[&str]) -> String {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let out = k.run(args).await;
        if out.success() {
            return out.stdout;
        }
        assert!(tokio::time::Instant::now() < deadline, "kubectl {args:?} kept failing: {}", out.stderr);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn secure_flow(client: kubectl_support::Client) {
    let Some(bin) = client.binary() else {
        eprintln!("skipped: KUBECTL_NEW is not set (make test sets it after `make venv`)");
        return;
    };
    let env = TestEnv::builder().secure().start().await.expect("testenv starts");
    let k = kubectl_support::Kubectl::new(bin, &env);
    let ca = env.handle().ca_pem().expect("a secure testenv serves TLS");

    // A namespace that existed at start, and a new one.
    k.ok(&["create", "namespace", "team-a"]).await;
    for ns in ["default", "team-a"] {
        let token = eventually_ok(&k, &["create", "token", "default", "-n", ns]).await;
        assert_eq!(token.trim().split('.').count(), 3, "a JWT in {ns}: {token}");
        let published =
            eventually_ok(&k, &["get", "configmap", "kube-root-ca.crt", "-n", ns, "-o", "jsonpath={.data.ca\\.crt}"])
                .await;
        assert_eq!(published, ca, "the serving CA in {ns}");
    }

    // Deleted, both come back; a changed CA is put back.
    k.ok(&["delete", "serviceaccount", "default", "-n", "team-a"]).await;
    k.ok(&["delete", "configmap", "kube-root-ca.crt", "-n", "team-a"]).await;
    eventually_ok(&k, &["get", "serviceaccount", "default", "-n", "team-a"]).await;
    eventually_ok(&k, &["get", "configmap", "kube-root-ca.crt", "-n", "team-a"]).await;
    k.ok(&["patch", "configmap", "kube-root-ca.crt", "-n", "team-a", "-p", r#"{"data":{"ca.crt":"tampered"}}"#]).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let now =
            k.ok(&["get", "configmap", "kube-root-ca.crt", "-n", "team-a", "-o", "jsonpath={.data.ca\\.crt}"]).await;
        if now == ca {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "the CA was not put back: {now}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // A terminating namespace gets nothing back, and goes.
    k.ok(&["delete", "namespace", "team-a", "--wait=true", "--timeout=30s"]).await;
    let out = k.run(&["get", "serviceaccount", "default", "-n", "team-a"]).await;
    assert!(!out.success(), "nothing recreated in a deleted namespace: {}", out.stdout);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_1_32_creates_a_token_for_the_default_service_account_and_reads_the_root_ca() {
    secure_flow(kubectl_support::Client::System).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_new_creates_a_token_for_the_default_service_account_and_reads_the_root_ca() {
    secure_flow(kubectl_support::Client::New).await;
}

/// Without TLS there is no CA to publish: the ServiceAccount only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_http_testenv_gives_each_namespace_its_service_account_and_no_ca() {
    let env = TestEnv::start().await.expect("testenv starts");
    let Some(bin) = kubectl_support::Client::System.binary() else { return };
    let k = kubectl_support::Kubectl::new(bin, &env);
    k.ok(&["create", "namespace", "plain"]).await;
    eventually_ok(&k, &["get", "serviceaccount", "default", "-n", "plain"]).await;
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "plain");
    assert!(cms.get_opt("kube-root-ca.crt").await.expect("get").is_none());
}

/// Off, a namespace is empty, as in envtest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespace_defaults_can_be_switched_off() {
    let env = TestEnv::builder().secure().namespace_defaults(false).start().await.expect("testenv starts");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let sas: Api<ServiceAccount> = Api::namespaced(env.client(), "default");
    assert!(sas.get_opt("default").await.expect("get").is_none());
    let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
    assert!(cms.get_opt("kube-root-ca.crt").await.expect("get").is_none());
    // And on, the same server shape has them.
    let env = TestEnv::builder().secure().start().await.expect("testenv starts");
    let sas: Api<ServiceAccount> = Api::namespaced(env.client(), "default");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while sas.get_opt("default").await.expect("get").is_none() {
        assert!(tokio::time::Instant::now() < deadline, "no default ServiceAccount");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

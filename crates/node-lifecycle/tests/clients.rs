//! Workload-cluster clients from cert-operator Secrets against a workload cluster that serves
//! TLS: the Secret's CA verifies the server, and a CA that did not sign it is refused with a
//! typed error naming the cluster and the Secret, never a hang.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Node, Secret};
use kube::api::{Api, ListParams, PostParams};
use node_lifecycle::clients::{ClientOptions, ClusterRef, WorkloadClients};
use testenv::TestEnv;

const NS: &str = "org-acme";
const ID: &str = "tls01";

/// A cert-operator Secret for certificate `api` of cluster [`ID`] with `ca` as its CA.
fn certificate_secret(name: &str, ca: &str) -> anyhow::Result<Secret> {
    // A client certificate of its own: the workload cluster here authenticates nobody, so only
    // the server side of TLS is checked; the client presents it all the same.
    let key = rcgen::KeyPair::generate()?;
    let crt = rcgen::CertificateParams::new(vec!["node-lifecycle".to_string()])?.self_signed(&key)?;
    Ok(serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "namespace": NS,
                     "labels": {"giantswarm.io/cluster": ID, "giantswarm.io/certificate": "api"}},
        "stringData": {"ca": ca, "crt": crt.pem(), "key": key.serialize_pem()}
    }))?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cert_operator_secrets_reach_a_workload_cluster_that_serves_tls() -> anyhow::Result<()> {
    let mc = TestEnv::start().await?;
    let wc = TestEnv::builder().tls(true).start().await?;
    let ca = wc.handle().ca_pem().expect("a TLS test server has a CA");
    let endpoint = wc.base_url();
    assert!(endpoint.starts_with("https://"), "{endpoint}");

    let namespaces: Api<Namespace> = Api::all(mc.client());
    namespaces
        .create(&PostParams::default(), &serde_json::from_value(serde_json::json!({"metadata": {"name": NS}}))?)
        .await?;
    let secrets: Api<Secret> = Api::namespaced(mc.client(), NS);
    secrets.create(&PostParams::default(), &certificate_secret("tls01-api", &ca)?).await?;

    let options = ClientOptions {
        connect_timeout: Duration::from_secs(2),
        request_timeout: Duration::from_secs(5),
        ..ClientOptions::default()
    };
    let clients = WorkloadClients::new(mc.client(), options.clone());
    let cluster = ClusterRef::new(NS, ID, endpoint.clone());
    let client = clients.client_for(&cluster).await?;
    assert_eq!(client.secret(), "tls01-api");
    let nodes: Api<Node> = Api::all(client.client());
    nodes.list(&ListParams::default()).await?;

    // A CA that did not sign the server's certificate: refused, quickly, naming what to fix.
    let other = TestEnv::builder().tls(true).start().await?;
    let wrong_ca = other.handle().ca_pem().expect("a CA");
    let clients = WorkloadClients::new(mc.client(), options);
    secrets.delete("tls01-api", &Default::default()).await?;
    secrets.create(&PostParams::default(), &certificate_secret("tls01-api-2", &wrong_ca)?).await?;
    let client = clients.client_for(&cluster).await?;
    let started = std::time::Instant::now();
    let err = Api::<Node>::all(client.client()).list(&ListParams::default()).await.expect_err("an untrusted server");
    assert!(started.elapsed() < Duration::from_secs(10), "refused after {:?}", started.elapsed());
    let typed = client.error(err).to_string();
    assert!(typed.contains(ID), "{typed}");
    assert!(!typed.contains("BEGIN"), "no key material in errors: {typed}");
    Ok(())
}

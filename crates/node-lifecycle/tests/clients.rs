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

/// A view gated by a leadership refuses writes, request by request, once the leadership is
/// lost, while reads go on; it shares the cache of the clients it was made from.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_through_a_gated_view_stop_the_moment_leadership_is_lost() -> anyhow::Result<()> {
    let mc = TestEnv::start().await?;
    let wc = TestEnv::start().await?;
    let namespaces: Api<Namespace> = Api::all(mc.client());
    namespaces
        .create(&PostParams::default(), &serde_json::from_value(serde_json::json!({"metadata": {"name": NS}}))?)
        .await?;
    let kubeconfig = wc.handle().kubeconfig();
    let secret: Secret = serde_json::from_value(serde_json::json!({
        "metadata": {"name": format!("{ID}-kubeconfig"), "namespace": NS},
        "stringData": {"value": kubeconfig}
    }))?;
    Api::<Secret>::namespaced(mc.client(), NS).create(&PostParams::default(), &secret).await?;

    let (leading, rx) = tokio::sync::watch::channel(true);
    let clients = WorkloadClients::new(mc.client(), ClientOptions::default());
    let gated = clients.gated_by(operatorkit::Leadership::from_receiver(rx));
    let cluster = ClusterRef::new(NS, ID, wc.base_url());
    let client = gated.client_for(&cluster).await?;
    assert_eq!(clients.cached(), 1, "the view shares the cache");
    let nodes: Api<Node> = Api::all(client.client());
    let node = |name: &str| -> anyhow::Result<Node> {
        Ok(serde_json::from_value(serde_json::json!({"metadata": {"name": name}}))?)
    };
    nodes.create(&PostParams::default(), &node("leading")?).await?;

    // The lease is lost while the client is held: the next write is refused before it is sent.
    leading.send(false)?;
    let refused = nodes.create(&PostParams::default(), &node("after")?).await.expect_err("a write after the loss");
    assert!(refused.to_string().contains("leader election lease"), "{refused}");
    let names: Vec<String> =
        nodes.list(&ListParams::default()).await?.items.into_iter().filter_map(|n| n.metadata.name).collect();
    assert_eq!(names, vec!["leading".to_string()], "reads go on; the refused write never reached the cluster");

    // The ungated clients of the same cache still write.
    let ungated = clients.client_for(&cluster).await?;
    Api::<Node>::all(ungated.client()).create(&PostParams::default(), &node("ungated")?).await?;
    Ok(())
}

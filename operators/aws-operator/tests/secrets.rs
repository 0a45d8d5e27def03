//! The Secrets a cluster uses, against testenv alone: certificates are read from one namespace
//! only, and those used are held by the operator's finalizer (`operatorkit::held_secrets`).

use std::sync::Arc;

use aws_operator::aws::{AwsFactory, AwsSettings};
use aws_operator::config::{AmiMap, OperatorConfig};
use aws_operator::context::SECRET_FINALIZER as FINALIZER;
use aws_operator::context::Shared;
use aws_operator::node_config;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{Api, PostParams};
use prometheus_client::registry::Registry;
use testenv::TestEnv;

const CLUSTER_NS: &str = "org-acme";
const ELSEWHERE: &str = "org-mallory";

async fn shared(env: &TestEnv, config: OperatorConfig) -> anyhow::Result<Arc<Shared>> {
    let aws = AwsFactory::new(AwsSettings { default_region: "eu-central-1".into(), ..AwsSettings::default() }).await?;
    Ok(Shared::new(env.client(), aws, config, AmiMap::default(), &mut Registry::default()))
}

async fn namespaces(client: &kube::Client) -> anyhow::Result<()> {
    let api: Api<Namespace> = Api::all(client.clone());
    for ns in [CLUSTER_NS, ELSEWHERE] {
        api.create(&PostParams::default(), &serde_json::from_value(serde_json::json!({"metadata": {"name": ns}}))?)
            .await?;
    }
    Ok(())
}

async fn certificate(client: &kube::Client, ns: &str, name: &str, cluster: &str, cert: &str) -> anyhow::Result<()> {
    let secret: Secret = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "labels": {"giantswarm.io/cluster": cluster, "giantswarm.io/certificate": cert}},
        "stringData": {"ca": format!("{ns}-ca"), "crt": format!("{ns}-crt"), "key": format!("{ns}-key")}
    }))?;
    Api::<Secret>::namespaced(client.clone(), ns).create(&PostParams::default(), &secret).await?;
    Ok(())
}

async fn finalizers(client: &kube::Client, ns: &str, name: &str) -> anyhow::Result<Vec<String>> {
    let secret = Api::<Secret>::namespaced(client.clone(), ns).get(name).await?;
    Ok(secret.metadata.finalizers.unwrap_or_default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificates_come_from_the_cluster_namespace_only() -> anyhow::Result<()> {
    let env = TestEnv::start().await?;
    let client = env.client();
    namespaces(&client).await?;
    // A Secret labelled for cluster a1b2c in another namespace, with a certificate the cluster's
    // own namespace lacks, and one that it has too.
    certificate(&client, ELSEWHERE, "planted-api", "a1b2c", "api").await?;
    certificate(&client, ELSEWHERE, "planted-worker", "a1b2c", "worker").await?;
    certificate(&client, CLUSTER_NS, "a1b2c-worker", "a1b2c", "worker").await?;

    let shared = shared(&env, OperatorConfig::default()).await?;
    let ns = node_config::certificates_namespace(&shared, CLUSTER_NS);
    assert_eq!(ns, CLUSTER_NS);
    let certs = node_config::certificates(&shared, ns, "a1b2c").await?;
    assert_eq!(certs.keys().collect::<Vec<_>>(), ["worker"], "the planted api certificate is ignored");
    assert_eq!(
        certs["worker"]["crt"],
        format!("{CLUSTER_NS}-crt").into_bytes(),
        "the cluster's own worker certificate"
    );
    // What is used is held; what is ignored is not touched.
    assert_eq!(finalizers(&client, CLUSTER_NS, "a1b2c-worker").await?, [FINALIZER]);
    assert!(finalizers(&client, ELSEWHERE, "planted-api").await?.is_empty());

    // A configured namespace replaces the cluster's.
    let shared = shared_with_namespace(&env, ELSEWHERE).await?;
    assert_eq!(node_config::certificates_namespace(&shared, CLUSTER_NS), ELSEWHERE);
    Ok(())
}

async fn shared_with_namespace(env: &TestEnv, ns: &str) -> anyhow::Result<Arc<Shared>> {
    shared(env, OperatorConfig { certificates_namespace: Some(ns.into()), ..OperatorConfig::default() }).await
}

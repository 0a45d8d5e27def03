//! A workload cluster started with TLS is reached through its kubeconfig, which trusts the
//! cluster's own CA and nothing else.

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use workload_sim::WorkloadCluster;

async fn client_of(kubeconfig: &str) -> anyhow::Result<kube::Client> {
    let config =
        kube::Config::from_custom_kubeconfig(Kubeconfig::from_yaml(kubeconfig)?, &KubeConfigOptions::default()).await?;
    Ok(kube::Client::try_from(config)?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_workload_cluster_is_reached_through_its_kubeconfigs_ca_alone() -> anyhow::Result<()> {
    let wc = WorkloadCluster::start_tls().await?;
    assert!(wc.server_url().starts_with("https://"), "{}", wc.server_url());
    let kubeconfig = wc.kubeconfig();
    assert!(kubeconfig.contains("certificate-authority-data"), "the kubeconfig carries the cluster's CA");
    let namespaces: Api<Namespace> = Api::all(client_of(&kubeconfig).await?);
    namespaces.list(&ListParams::default()).await?;

    // Another cluster's CA does not verify this one's serving certificate.
    let other = WorkloadCluster::start_tls().await?;
    let foreign = other.kubeconfig().replace(&other.server_url(), &wc.server_url());
    let refused: Api<Namespace> = Api::all(client_of(&foreign).await?);
    assert!(refused.list(&ListParams::default()).await.is_err(), "a foreign CA is not trusted");
    Ok(())
}

//! A cluster's PKI Secrets written to a real (in-process) API server: issued once, never twice,
//! whether the writer is interrupted or races another; Secrets someone else wrote are left alone.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{Api, ListParams, PostParams};
use node_lifecycle::pki_secrets::ensure;
use pki::ClusterNames;
use pki::ensure::{EncryptionFormat, EnsureRequest};
use testenv::TestEnv;

const ID: &str = "p9k1x";

fn names() -> ClusterNames {
    ClusterNames {
        cluster_id: ID.into(),
        api_domain: format!("api.{ID}.k8s.example.org"),
        internal_api_domain: None,
        etcd_domain: format!("etcd.{ID}.k8s.example.org"),
        etcd_member_domains: Vec::new(),
        cluster_domain: "cluster.local".into(),
        service_cidr: "10.96.0.0/12".into(),
    }
}

fn request<'a>(namespace: &'a str, names: &'a ClusterNames, encryption: EncryptionFormat) -> EnsureRequest<'a> {
    EnsureRequest {
        namespace,
        names,
        encryption,
        options: pki::IssueOptions::at(SystemTime::now()),
        renewal: pki::RenewalPolicy::default(),
        kubeconfig_server: Some(format!("https://{}", names.api_domain)),
        service_account_v2: false,
    }
}

async fn namespace(env: &TestEnv, name: &str) -> anyhow::Result<Api<Secret>> {
    let namespaces: Api<Namespace> = Api::all(env.client());
    namespaces
        .create(&PostParams::default(), &serde_json::from_value(serde_json::json!({"metadata": {"name": name}}))?)
        .await?;
    Ok(Api::namespaced(env.client(), name))
}

/// Secret name → its data as text.
async fn stored(secrets: &Api<Secret>) -> anyhow::Result<BTreeMap<String, BTreeMap<String, String>>> {
    Ok(secrets
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .map(|s| {
            let data = s.data.unwrap_or_default();
            let data = data.into_iter().map(|(k, v)| (k, String::from_utf8_lossy(&v.0).into_owned())).collect();
            (s.metadata.name.unwrap_or_default(), data)
        })
        .collect())
}

/// Exactly the two CAs, five certificates and the management kubeconfig of the right CA, and
/// one encryption Secret.
fn assert_one_pki(secrets: &BTreeMap<String, BTreeMap<String, String>>) {
    let mut names: Vec<&str> = secrets.keys().map(String::as_str).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "p9k1x-api",
            "p9k1x-calico-etcd-client",
            "p9k1x-cluster-ca",
            "p9k1x-encryption-provider-config",
            "p9k1x-etcd",
            "p9k1x-etcd-ca",
            "p9k1x-kubeconfig",
            "p9k1x-service-account",
            "p9k1x-worker"
        ]
    );
    for (leaf, ca) in [
        ("api", "cluster-ca"),
        ("worker", "cluster-ca"),
        ("service-account", "cluster-ca"),
        ("etcd", "etcd-ca"),
        ("calico-etcd-client", "etcd-ca"),
    ] {
        assert_eq!(secrets[&format!("{ID}-{leaf}")]["ca"], secrets[&format!("{ID}-{ca}")]["crt"], "{leaf}");
    }
    let value = secrets[&format!("{ID}-kubeconfig")]["value"].clone().into_bytes();
    let kubeconfig =
        Secret { data: Some([("value".to_string(), k8s_openapi::ByteString(value))].into()), ..Secret::default() };
    let (_, files) = pki::kubeconfig::read(&kubeconfig).expect("the kubeconfig embeds its certificates");
    assert_eq!(files.ca, secrets[&format!("{ID}-cluster-ca")]["crt"], "the kubeconfig's CA");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_without_secrets_gets_them_once() -> anyhow::Result<()> {
    let env = TestEnv::start().await?;
    let secrets = namespace(&env, "org-first").await?;
    let names = names();
    let request = request("org-first", &names, EncryptionFormat::ProviderConfig);
    let started = std::time::Instant::now();
    let first = ensure(&env.client(), &request).await?;
    eprintln!("issued and stored a cluster's PKI in {} ms", started.elapsed().as_millis());
    assert_eq!(first.created.len(), 9, "{first:?}");
    assert!(first.next_renewal.is_some());
    let before = stored(&secrets).await?;
    assert_one_pki(&before);

    let second = ensure(&env.client(), &request).await?;
    assert!(second.created.is_empty() && second.replaced.is_empty(), "{second:?}");
    assert_eq!(stored(&secrets).await?, before, "nothing was written again");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupted_ten_times_and_raced_it_still_issues_one_ca_of_each_kind_and_one_key() -> anyhow::Result<()> {
    let env = TestEnv::start().await?;
    let names = names();
    let mut interrupted_with = Vec::new();
    for kill in 0..10u64 {
        // A cluster of its own for each interruption point: stopped after `kill` × 400 µs.
        let ns = format!("org-crash-{kill}");
        let secrets = namespace(&env, &ns).await?;
        let (client, task_names, task_ns) = (env.client(), names.clone(), ns.clone());
        let task = tokio::spawn(async move {
            ensure(&client, &request(&task_ns, &task_names, EncryptionFormat::ProviderConfig)).await.map(drop)
        });
        tokio::time::sleep(Duration::from_micros(kill * 400)).await;
        task.abort();
        let _ = task.await;
        interrupted_with.push(stored(&secrets).await?.len());
        // Restarted: two writers at once, as two replicas would be.
        let (client_a, client_b) = (env.client(), env.client());
        let (request_a, request_b) = (
            request(&ns, &names, EncryptionFormat::ProviderConfig),
            request(&ns, &names, EncryptionFormat::ProviderConfig),
        );
        let (a, b) = tokio::join!(ensure(&client_a, &request_a), ensure(&client_b, &request_b));
        a?;
        b?;
        assert_one_pki(&stored(&secrets).await?);
    }
    eprintln!("Secrets stored when each run was stopped: {interrupted_with:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_someone_else_wrote_are_left_alone() -> anyhow::Result<()> {
    let env = TestEnv::start().await?;
    let secrets = namespace(&env, "org-own").await?;
    // Placeholder cert-operator Secrets and a randomkeys Secret, as kvm-operator reads them.
    for secret in workload_sim::pods::cluster_secrets("org-own", ID, &["api", "calico-etcd-client", "etcd", "worker"]) {
        secrets.create(&PostParams::default(), &secret).await?;
    }
    let before = stored(&secrets).await?;
    let names = names();
    let ensured = ensure(&env.client(), &request("org-own", &names, EncryptionFormat::RandomKey)).await?;
    assert!(ensured.created.is_empty() && ensured.replaced.is_empty(), "{ensured:?}");
    assert_eq!(ensured.missing, ["service-account"]);
    assert_eq!(ensured.foreign_problems.len(), 4, "placeholders are no certificates: {ensured:?}");
    assert_eq!(stored(&secrets).await?, before);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_encryption_config_without_labels_is_found_by_its_name_and_kept() -> anyhow::Result<()> {
    let env = TestEnv::start().await?;
    let secrets = namespace(&env, "org-keep").await?;
    // As the encryption-provider operator writes it: no labels.
    let theirs: Secret = serde_json::from_value(serde_json::json!({
        "metadata": {"name": format!("{ID}-encryption-provider-config"), "namespace": "org-keep"},
        "stringData": {"encryption": "kind: EncryptionConfiguration\n"}
    }))?;
    secrets.create(&PostParams::default(), &theirs).await?;
    let names = names();
    let ensured = ensure(&env.client(), &request("org-keep", &names, EncryptionFormat::ProviderConfig)).await?;
    assert_eq!(ensured.created.len(), 8, "two CAs, five certificates and the kubeconfig, no key: {ensured:?}");
    let kept = secrets.get(&format!("{ID}-encryption-provider-config")).await?;
    assert_eq!(kept.data.expect("data")["encryption"].0, b"kind: EncryptionConfiguration\n");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificates_due_for_renewal_are_replaced_and_the_cas_and_key_stay() -> anyhow::Result<()> {
    let env = TestEnv::start().await?;
    let secrets = namespace(&env, "org-renew").await?;
    let names = names();
    let mut issued_long_ago = request("org-renew", &names, EncryptionFormat::ProviderConfig);
    issued_long_ago.options.now = SystemTime::now() - Duration::from_secs(300 * 86_400);
    ensure(&env.client(), &issued_long_ago).await?;
    let before = stored(&secrets).await?;

    let renewed = ensure(&env.client(), &request("org-renew", &names, EncryptionFormat::ProviderConfig)).await?;
    assert!(renewed.created.is_empty(), "{renewed:?}");
    let mut replaced = renewed.replaced.clone();
    replaced.sort();
    assert_eq!(
        replaced,
        [
            "p9k1x-api",
            "p9k1x-calico-etcd-client",
            "p9k1x-etcd",
            "p9k1x-kubeconfig",
            "p9k1x-service-account",
            "p9k1x-worker"
        ]
    );
    let after = stored(&secrets).await?;
    assert_one_pki(&after);
    for (name, data) in &after {
        let changed = data != &before[name];
        let leaf = !name.ends_with("-ca") && !name.ends_with("-config");
        assert_eq!(changed, leaf, "{name}");
    }
    Ok(())
}

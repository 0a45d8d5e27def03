//! Secrets held by a finalizer, against testenv: a held Secret outlives its deletion until it is
//! released, and holding or releasing twice is harmless.

use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{Api, DeleteParams, PostParams};
use operatorkit::held_secrets;
use testenv::TestEnv;

const NS: &str = "org-acme";
const FINALIZER: &str = "example.giantswarm.io/secret-in-use";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_secret_outlives_its_deletion_until_released() -> anyhow::Result<()> {
    let env = TestEnv::start().await?;
    let client = env.client();
    let ns: Namespace = serde_json::from_value(serde_json::json!({"metadata": {"name": NS}}))?;
    Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &ns).await?;
    let secret: Secret = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "credential"}, "stringData": {"crt": "certificate"}
    }))?;
    Api::<Secret>::namespaced(client.clone(), NS).create(&PostParams::default(), &secret).await?;
    assert!(held_secrets::hold(&client, NS, "credential", FINALIZER).await?);
    assert!(held_secrets::hold(&client, NS, "credential", FINALIZER).await?, "holding twice is harmless");
    let api: Api<Secret> = Api::namespaced(client.clone(), NS);
    assert_eq!(api.get("credential").await?.metadata.finalizers.unwrap_or_default(), [FINALIZER]);
    assert!(!held_secrets::hold(&client, NS, "absent", FINALIZER).await?);

    api.delete("credential", &DeleteParams::default()).await?;
    // Deleted, but still readable while held; holding a deleting Secret changes nothing.
    let deleting = api.get("credential").await?;
    assert!(deleting.metadata.deletion_timestamp.is_some());
    assert!(deleting.data.is_some_and(|d| d.contains_key("crt")));
    assert!(held_secrets::hold(&client, NS, "credential", FINALIZER).await?);

    held_secrets::release(&client, NS, "credential", FINALIZER).await?;
    assert!(api.get_opt("credential").await?.is_none(), "released, the deleted Secret goes");
    held_secrets::release(&client, NS, "credential", FINALIZER).await?;
    Ok(())
}

//! What an installation adds to every node, as the nodes get it: the pause image and the Docker
//! Hub token in the node configs the operator uploads (read back from S3, encrypted there with
//! the cluster's key), and the token nowhere else a person reads: not in the events, not in the
//! objects' status.

mod support;

use std::sync::Arc;

use apis::aws::{AWSCluster, AWSControlPlane, AWSMachineDeployment};
use kube::Api;
use support::*;

const ID: &str = "extr1";
/// `alice:dckr_pat_secret`, as the token is given.
const TOKEN: &str = "YWxpY2U6ZGNrcl9wYXRfc2VjcmV0";
const PAUSE: &str = "gsoci.azurecr.io/giantswarm/pause:3.10";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pause_image_and_the_docker_hub_token_reach_the_nodes_and_the_token_nothing_else() -> anyhow::Result<()> {
    let mut f = Fixture::start().await?;
    f.apply_basics().await?;
    f.configure = Some(Arc::new(|config| {
        config.node_extras.pause_image = PAUSE.into();
        config.node_extras.dockerhub_token = ignition::extras::DockerhubToken::parse(TOKEN).expect("valid");
    }));
    f.credential_secret(ID).await?;
    f.cluster(ID).await?;
    f.control_plane(ID, "cp001", &["eu-central-1a"], 1).await?;
    f.node_pool(ID, "np001", &["eu-central-1a"], 1, 3).await?;
    f.start_operator().await?;
    let tenant = f.tenant_clients().await?;
    let bucket = aws_stacks::names::bucket(&tenant.account_id, ID);
    // The master's and the pool's.
    let listed = eventually(240, "both node configs in the bucket", || async {
        let listed = tenant.s3.list_objects_v2().bucket(&bucket).prefix("version/").send().await;
        let keys: Vec<String> = listed
            .map(|l| l.contents().iter().filter_map(|o| o.key().map(str::to_string)).collect())
            .unwrap_or_default();
        Ok((keys.iter().any(|k| k.contains("-tccpn-")) && keys.iter().any(|k| k.ends_with("-tcnp-np001")))
            .then_some(keys))
    })
    .await;
    let keys = match listed {
        Ok(keys) => keys,
        Err(e) => anyhow::bail!("{e}\n{}", dump(&f.client).await),
    };
    let key_arn = tenant
        .kms
        .describe_key()
        .key_id(aws_stacks::names::kms_alias(ID))
        .send()
        .await?
        .key_metadata()
        .and_then(|m| m.arn().map(str::to_string))
        .expect("the cluster key");
    for key in &keys {
        // Encrypted at rest with the cluster's key: reading it takes kms:Decrypt on that key.
        let head = tenant.s3.head_object().bucket(&bucket).key(key).send().await?;
        assert_eq!(head.server_side_encryption().map(|e| e.as_str()), Some("aws:kms"), "{key}");
        assert_eq!(head.ssekms_key_id(), Some(key_arn.as_str()), "{key}");
        let body = tenant.s3.get_object().bucket(&bucket).key(key).send().await?.body.collect().await?.into_bytes();
        let config = ignition::parse(&body)?;
        let containerd = String::from_utf8(config.files[ignition::extras::CONTAINERD_CONFIG].clone())?;
        assert!(containerd.contains(&format!("sandbox_image = \"{PAUSE}\"")), "{key}: {containerd}");
        assert!(containerd.contains(&format!("auth = \"{TOKEN}\"")), "{key}: the token for docker.io");
        assert_eq!(config.modes[ignition::extras::CONTAINERD_CONFIG], 0o600, "{key}");
        let docker = String::from_utf8(config.files[ignition::extras::DOCKER_CLIENT_CONFIG].clone())?;
        assert!(docker.contains(TOKEN), "{key}: Docker's client configuration");
        let dropins = config.units["containerd.service"]["dropins"].to_string();
        assert!(dropins.contains("CONTAINERD_CONFIG=/etc/containerd/config.toml"), "{key}: {dropins}");
    }

    // Nowhere a person reads: the events and the objects (status included).
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(f.client.clone(), NS);
    let mut seen = serde_json::to_string(&events.list(&Default::default()).await?.items)?;
    seen += &serde_json::to_string(
        &Api::<AWSCluster>::namespaced(f.client.clone(), NS).list(&Default::default()).await?.items,
    )?;
    seen += &serde_json::to_string(
        &Api::<AWSControlPlane>::namespaced(f.client.clone(), NS).list(&Default::default()).await?.items,
    )?;
    seen += &serde_json::to_string(
        &Api::<AWSMachineDeployment>::namespaced(f.client.clone(), NS).list(&Default::default()).await?.items,
    )?;
    assert!(!seen.contains(TOKEN) && !seen.contains("dckr_pat_secret"), "the token is in an event or an object");
    f.kill_operator().await;
    Ok(())
}

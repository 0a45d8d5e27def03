//! Deleting clusters the way people do: `kubectl delete -f cluster.yaml` (the Secrets first,
//! then the AWSCluster alone), re-creating a cluster with the same id in the same operator
//! process, and control planes and node pools whose AWSCluster vanished first.

mod support;

use apis::aws::{AWSCluster, AWSControlPlane, AWSMachineDeployment};
use aws_operator::context::SECRET_FINALIZER as FINALIZER;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams};
use support::*;

async fn live_stacks(aws: &aws_operator::aws::AccountClients) -> anyhow::Result<Vec<String>> {
    let mut names: Vec<String> = aws.cfn.describe_all().await?.into_iter().map(|s| s.name).collect();
    names.sort();
    Ok(names)
}

async fn create(f: &Fixture, id: &str) -> anyhow::Result<()> {
    f.credential_secret(id).await?;
    f.cluster(id).await?;
    f.control_plane(id, "cp001", &["eu-central-1a"], 1).await?;
    f.node_pool(id, "np001", &["eu-central-1a"], 1, 3).await?;
    Ok(())
}

/// The Secret of cluster `id` the fixture creates: the credential.
fn user_secrets(id: &str) -> Vec<(&'static str, String)> {
    vec![("giantswarm", format!("credential-{id}"))]
}

/// The Secrets the operator issued for cluster `id` that its node configs read: the certificates,
/// the encryption-provider config and the service-account issuer's key pair.
fn issued_secrets(id: &str) -> Vec<(&'static str, String)> {
    let mut out: Vec<_> = pki::CERTIFICATES.iter().map(|cert| (NS, format!("{id}-{cert}"))).collect();
    out.push((NS, format!("{id}-encryption-provider-config")));
    out.push((NS, format!("{id}-service-account-v2")));
    out
}

/// Node config objects in the cluster bucket, by key.
async fn node_configs(f: &Fixture, id: &str) -> anyhow::Result<Vec<String>> {
    let tenant = f.tenant_clients().await?;
    let bucket = aws_stacks::names::bucket(&tenant.account_id, id);
    let listed = tenant.s3.list_objects_v2().bucket(&bucket).send().await?;
    Ok(listed.contents().iter().filter_map(|o| o.key()).map(str::to_string).collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_the_secrets_then_the_cluster_tears_everything_down_and_a_recreated_cluster_is_complete()
-> anyhow::Result<()> {
    let mut f = Fixture::start().await?;
    f.apply_basics().await?;
    let id = "del01";
    create(&f, id).await?;
    f.start_operator().await?;
    wait_ready(&f, id).await?;
    let first_configs = node_configs(&f, id).await?;
    assert!(!first_configs.is_empty(), "node configs uploaded");

    // Every Secret the cluster uses is held.
    for (ns, name) in user_secrets(id).into_iter().chain(issued_secrets(id)) {
        let secret = Api::<Secret>::namespaced(f.client.clone(), ns).get(&name).await?;
        assert!(secret.metadata.finalizers.unwrap_or_default().contains(&FINALIZER.to_string()), "{ns}/{name} held");
    }
    // `kubectl delete -f`: the Secrets first, then the AWSCluster; nobody deletes the control
    // plane or the node pool by hand.
    for (ns, name) in user_secrets(id) {
        Api::<Secret>::namespaced(f.client.clone(), ns).delete(&name, &DeleteParams::default()).await?;
    }
    Api::<AWSCluster>::namespaced(f.client.clone(), NS).delete(id, &DeleteParams::default()).await?;

    let gone = eventually(300, "the cluster, its control plane and node pool to be gone", || async {
        let c = Api::<AWSCluster>::namespaced(f.client.clone(), NS).get_opt(id).await?;
        let cp = Api::<AWSControlPlane>::namespaced(f.client.clone(), NS).get_opt("cp001").await?;
        let md = Api::<AWSMachineDeployment>::namespaced(f.client.clone(), NS).get_opt("np001").await?;
        Ok((c.is_none() && cp.is_none() && md.is_none()).then_some(()))
    })
    .await;
    if let Err(e) = gone {
        anyhow::bail!("{e}\n{}", dump(&f.client).await);
    }
    let tenant = f.tenant_clients().await?;
    let cp = f.control_plane_clients().await?;
    assert_eq!(live_stacks(&tenant).await?, Vec::<String>::new(), "no tenant stack left");
    assert_eq!(live_stacks(&cp).await?, Vec::<String>::new(), "no management stack left");
    for (ns, name) in user_secrets(id) {
        let left = Api::<Secret>::namespaced(f.client.clone(), ns).get_opt(&name).await?;
        assert!(left.is_none(), "{ns}/{name} released and gone");
    }
    // What the operator issued is released and stays, for a cluster created again with the id.
    for (ns, name) in issued_secrets(id) {
        let left = Api::<Secret>::namespaced(f.client.clone(), ns).get(&name).await?;
        assert!(!left.metadata.finalizers.unwrap_or_default().contains(&FINALIZER.to_string()), "{ns}/{name} released");
    }

    // The same cluster again, in the same operator process: a new, empty bucket that must get
    // every node config again.
    create(&f, id).await?;
    wait_ready(&f, id).await?;
    let configs = eventually(120, "the node configs in the new bucket", || async {
        let keys = node_configs(&f, id).await?;
        Ok((keys.len() >= first_configs.len()).then_some(keys))
    })
    .await?;
    assert_eq!(configs, first_configs);
    f.kill_operator().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_control_plane_and_node_pool_without_their_cluster_delete_their_stacks_first() -> anyhow::Result<()> {
    // Stack deletes hold the pool's instances on its terminating hook (an hour at AWS's pace),
    // as CloudFormation does: without their cluster nothing can drain them, so the operator
    // releases them at once.
    let mut f = Fixture::start_with(motoenv::Launcher::from_env().group_deletion_hooks(true)).await?;
    f.apply_basics().await?;
    let id = "orp01";
    create(&f, id).await?;
    f.start_operator().await?;
    wait_ready(&f, id).await?;
    let tenant = f.tenant_clients().await?;
    let cp = f.control_plane_clients().await?;
    let tccpn = format!("cluster-{id}-tccpn");
    let tcnp = format!("cluster-{id}-tcnp-np001");
    let tcnpf = format!("cluster-{id}-tcnpf-np001");
    assert!(live_stacks(&tenant).await?.contains(&tccpn));

    // The AWSCluster vanishes without its teardown (its finalizers removed by hand).
    let clusters: Api<AWSCluster> = Api::namespaced(f.client.clone(), NS);
    let no_finalizers = serde_json::json!({"metadata": {"finalizers": null}});
    clusters.patch(id, &PatchParams::default(), &Patch::Merge(&no_finalizers)).await?;
    clusters.delete(id, &DeleteParams::default()).await?;
    eventually(30, "the AWSCluster to be gone", || async { Ok(clusters.get_opt(id).await?.is_none().then_some(())) })
        .await?;

    let cps: Api<AWSControlPlane> = Api::namespaced(f.client.clone(), NS);
    let mds: Api<AWSMachineDeployment> = Api::namespaced(f.client.clone(), NS);
    cps.delete("cp001", &DeleteParams::default()).await?;
    mds.delete("np001", &DeleteParams::default()).await?;
    // Sample the stacks while the objects exist: each object may go only after its stacks.
    let result = eventually(300, "the control plane and node pool to be gone", || async {
        let (cp_left, md_left) = (cps.get_opt("cp001").await?.is_some(), mds.get_opt("np001").await?.is_some());
        let (tenant_stacks, cp_stacks) = (live_stacks(&tenant).await?, live_stacks(&cp).await?);
        if !cp_left && tenant_stacks.contains(&tccpn) {
            return Ok(Some(Some(format!("the control plane went while {tccpn} exists"))));
        }
        if !md_left && (tenant_stacks.contains(&tcnp) || cp_stacks.contains(&tcnpf)) {
            return Ok(Some(Some(format!(
                "the node pool went while its stacks exist: {tenant_stacks:?} {cp_stacks:?}"
            ))));
        }
        Ok((!cp_left && !md_left).then_some(None))
    })
    .await;
    match result {
        Ok(None) => {}
        Ok(Some(violation)) => anyhow::bail!("{violation}"),
        Err(e) => anyhow::bail!("{e}\n{}", dump(&f.client).await),
    }
    let tenant_left = live_stacks(&tenant).await?;
    assert!(!tenant_left.contains(&tccpn) && !tenant_left.contains(&tcnp), "{tenant_left:?}");
    assert!(!live_stacks(&cp).await?.contains(&tcnpf));
    // The cluster's own stacks are not theirs to delete.
    assert!(tenant_left.contains(&format!("cluster-{id}-tccp")), "{tenant_left:?}");
    f.kill_operator().await;
    Ok(())
}

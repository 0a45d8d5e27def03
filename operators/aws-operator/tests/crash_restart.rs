//! Kill the operator at random points during creation, ten times, then let it finish: the
//! cluster converges with no duplicate stacks, buckets or keys.

mod support;

use std::time::Duration;

use apis::aws::AWSCluster;
use kube::Api;
use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_ten_times_during_creation_the_cluster_still_converges_without_duplicates() -> anyhow::Result<()> {
    let mut f = Fixture::start().await?;
    f.apply_basics().await?;
    let id = "crash1";
    f.credential_secret(id).await?;
    f.cluster(id).await?;
    f.control_plane(id, "cpc01", &["eu-central-1a"], 1).await?;
    f.node_pool(id, "npc01", &["eu-central-1a"], 1, 3).await?;
    let mut kills = Vec::new();
    for _ in 0..10 {
        f.start_operator().await?;
        // moto answers in milliseconds, so the whole creation takes about a second: kill within it.
        let after = Duration::from_millis(rand::random_range(20..900));
        tokio::time::sleep(after).await;
        f.kill_operator().await;
        kills.push(after.as_millis());
    }
    f.start_operator().await?;
    let clusters: Api<AWSCluster> = Api::namespaced(f.client.clone(), NS);
    let converged = eventually(120, "the cluster to be Ready after the kills", || async {
        let c = clusters.get(id).await?;
        Ok(ready(c.status.as_ref().map(|s| &s.conditions)).then_some(()))
    })
    .await;
    if let Err(e) = converged {
        anyhow::bail!("{e} (kills after {kills:?} ms)\n{}", dump(&f.client).await);
    }
    let tenant = f.tenant_clients().await?;
    let cp = f.control_plane_clients().await?;
    let mut tenant_stacks: Vec<String> = tenant.cfn.describe_all().await?.into_iter().map(|s| s.name).collect();
    tenant_stacks.sort();
    assert_eq!(
        tenant_stacks,
        vec![format!("cluster-{id}-tccp"), format!("cluster-{id}-tccpn"), format!("cluster-{id}-tcnp-npc01")]
    );
    let mut cp_stacks: Vec<String> = cp.cfn.describe_all().await?.into_iter().map(|s| s.name).collect();
    cp_stacks.sort();
    assert_eq!(
        cp_stacks,
        vec![format!("cluster-{id}-tccpf"), format!("cluster-{id}-tccpi"), format!("cluster-{id}-tcnpf-npc01")]
    );
    let buckets: Vec<String> =
        tenant.s3.list_buckets().send().await?.buckets().iter().filter_map(|b| b.name().map(str::to_string)).collect();
    // The config and access-log buckets, and the service-account issuer's (Release 20 has IAM
    // roles for service accounts).
    assert_eq!(buckets.len(), 3, "{buckets:?}");
    // A CreateKey in flight at a kill may complete after the next process looked; such orphans
    // are scheduled for deletion, so exactly one key is usable.
    let keys = tenant.kms.list_keys().send().await?;
    let mut usable = 0;
    for k in keys.keys() {
        let meta = tenant.kms.describe_key().key_id(k.key_id().unwrap_or_default()).send().await?;
        // Only the keys the operator creates (they carry the cluster tag): moto also creates an
        // untagged default key of its own when encrypted EBS volumes are launched.
        let tags = tenant.kms.list_resource_tags().key_id(k.key_id().unwrap_or_default()).send().await?;
        let ours = tags.tags().iter().any(|t| t.tag_key() == "giantswarm.io/cluster" && t.tag_value() == id);
        if ours && meta.key_metadata().is_some_and(|m| m.deletion_date().is_none()) {
            usable += 1;
        }
    }
    let mut detail = Vec::new();
    for k in keys.keys() {
        let id = k.key_id().unwrap_or_default();
        let tags = tenant.kms.list_resource_tags().key_id(id).send().await?;
        let meta = tenant.kms.describe_key().key_id(id).send().await?;
        detail.push(format!(
            "{id}: tags {:?} state {:?} deletion {:?}",
            tags.tags(),
            meta.key_metadata().and_then(|m| m.key_state()),
            meta.key_metadata().and_then(|m| m.deletion_date())
        ));
    }
    assert_eq!(usable, 1, "exactly one usable key: {detail:#?}");
    let aliases = tenant.kms.list_aliases().send().await?;
    assert_eq!(aliases.aliases().iter().filter(|a| a.alias_name() == Some(&format!("alias/{id}"))).count(), 1);
    let vpcs = tenant.ec2.describe_vpcs().send().await?;
    let ours = vpcs
        .vpcs()
        .iter()
        .filter(|v| v.tags().iter().any(|t| t.key() == Some("giantswarm.io/cluster") && t.value() == Some(id)))
        .count();
    assert_eq!(ours, 1, "one VPC for the cluster");
    f.kill_operator().await;
    Ok(())
}

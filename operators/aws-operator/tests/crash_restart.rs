//! Kill the operator at random points during creation, ten times, then let it finish: the
//! cluster converges with no duplicate stacks, buckets or keys.

mod support;

use std::time::Duration;

use apis::aws::AWSCluster;
use kube::Api;
use support::crash::*;
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
    let (usable, detail) = usable_cluster_keys(&tenant, id).await?;
    assert_eq!(usable, 1, "exactly one usable key: {detail:#?}");
    assert_eq!(cluster_key_aliases(&tenant, id).await?, 1);
    assert_eq!(cluster_vpcs(&tenant, id).await?.len(), 1, "one VPC for the cluster");
    f.kill_operator().await;
    Ok(())
}

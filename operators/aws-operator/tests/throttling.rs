//! Throttled AWS: with one request in five refused by the emulator with each service's
//! throttling error (`RequestLimitExceeded`, `SlowDown`, `ThrottlingException`, `Throttling`),
//! a cluster is created, scaled and deleted as without throttling. The SDK's bounded adaptive
//! retries and the reconcile loop absorb the refusals; nothing is created twice and nothing is
//! left behind.

mod support;

use std::collections::BTreeMap;

use apis::aws::{AWSCluster, AWSControlPlane, AWSMachineDeployment};
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams};
use support::*;

/// The share of AWS requests refused.
const SHARE: f64 = 0.2;

async fn live_stacks(aws: &aws_operator::aws::AccountClients) -> anyhow::Result<Vec<String>> {
    let mut names: Vec<String> = aws.cfn.describe_all().await?.into_iter().map(|s| s.name).collect();
    names.sort();
    Ok(names)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_is_created_scaled_and_deleted_while_a_fifth_of_aws_requests_are_throttled() -> anyhow::Result<()> {
    let mut f = Fixture::start().await?;
    f.apply_basics().await?;
    let id = "thr01";
    f.credential_secret(id).await?;
    f.cluster(id).await?;
    f.control_plane(id, "cp001", &["eu-central-1a"], 1).await?;
    f.node_pool(id, "np001", &["eu-central-1a"], 1, 3).await?;
    assert_eq!(f.moto.throttle(SHARE)?.throttle_share, SHARE);
    f.start_operator().await?;

    // Created.
    let clusters: Api<AWSCluster> = Api::namespaced(f.client.clone(), NS);
    let created = eventually(900, "the cluster to be Ready under throttling", || async {
        let c = clusters.get(id).await?;
        Ok(ready(c.status.as_ref().map(|s| &s.conditions)).then_some(()))
    })
    .await;
    if let Err(e) = created {
        anyhow::bail!("{e}\n{}", dump(&f.client).await);
    }
    let tenant = f.tenant_clients().await?;
    let cp = f.control_plane_clients().await?;
    let stacks: Vec<String> = live_stacks(&tenant).await?.into_iter().chain(live_stacks(&cp).await?).collect();

    // Scaled: the pool's minimum goes from 1 to 2 and its group follows.
    let pools: Api<AWSMachineDeployment> = Api::namespaced(f.client.clone(), NS);
    let patch = Patch::Merge(serde_json::json!({"spec": {"nodePool": {"scaling": {"min": 2}}}}));
    pools.patch("np001", &PatchParams::default(), &patch).await?;
    let scaled = eventually(900, "the pool's group to have a minimum of 2", || async {
        let groups = tenant.autoscaling.describe_auto_scaling_groups().send().await?;
        let min: Vec<i32> = groups
            .auto_scaling_groups()
            .iter()
            .filter(|g| g.tags().iter().any(|t| t.value() == Some("np001")))
            .filter_map(|g| g.min_size())
            .collect();
        Ok((min == [2]).then_some(()))
    })
    .await;
    if let Err(e) = scaled {
        anyhow::bail!("{e}\n{}", dump(&f.client).await);
    }

    // Deleted, as `kubectl delete -f` does: the Secret first, then the cluster.
    Api::<Secret>::namespaced(f.client.clone(), "giantswarm")
        .delete(&format!("credential-{id}"), &DeleteParams::default())
        .await?;
    clusters.delete(id, &DeleteParams::default()).await?;
    let gone = eventually(900, "the cluster, its control plane and node pool to be gone", || async {
        let c = clusters.get_opt(id).await?;
        let cp = Api::<AWSControlPlane>::namespaced(f.client.clone(), NS).get_opt("cp001").await?;
        let md = pools.get_opt("np001").await?;
        Ok((c.is_none() && cp.is_none() && md.is_none()).then_some(()))
    })
    .await;
    if let Err(e) = gone {
        anyhow::bail!("{e}\n{}", dump(&f.client).await);
    }
    f.moto.throttle(0.0)?;
    assert_eq!(live_stacks(&tenant).await?, Vec::<String>::new(), "no tenant stack left");
    assert_eq!(live_stacks(&cp).await?, Vec::<String>::new(), "no management stack left");

    // Throttling happened, across the services (which ones is chance: a service called a few
    // times may escape), and no stack was created twice: each CreateStack that AWS answered
    // created one of the cluster's stacks.
    let log = f.moto.request_log()?;
    let mut refused: BTreeMap<String, usize> = BTreeMap::new();
    for r in log.iter().filter(|r| r.throttled) {
        *refused.entry(r.service.clone()).or_default() += 1;
    }
    let throttled: usize = refused.values().sum();
    eprintln!("{throttled} of {} AWS requests throttled: {refused:?}", log.len());
    assert!(throttled * 20 >= log.len(), "at least a twentieth of the requests were throttled: {refused:?}");
    assert!(refused.len() >= 4, "at least four services were throttled: {refused:?}");
    let created = log.iter().filter(|r| r.action == "CreateStack" && !r.throttled).count();
    assert_eq!(created, stacks.len(), "one CreateStack per stack ({stacks:?})");
    f.kill_operator().await;
    Ok(())
}

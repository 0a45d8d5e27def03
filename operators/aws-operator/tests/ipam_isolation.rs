//! IPAM isolation: a node pool whose subnet annotation is not a CIDR block is refused on its
//! own (`Ready=False`, naming the annotation and the fix), and every other object of the
//! installation still gets its range: the cluster its CIDR, a sibling pool its subnet.

mod support;

use apis::aws::{AWSCluster, AWSMachineDeployment};
use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use support::*;

const SUBNET: &str = "machine-deployment.giantswarm.io/subnet";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_subnet_annotation_stops_only_its_own_pool() -> anyhow::Result<()> {
    let mut f = Fixture::start().await?;
    f.apply_basics().await?;
    let id = "ipis1";
    f.credential_secret(id).await?;
    // The bad pool exists, annotated, before anything else is allocated.
    f.node_pool(id, "npbad", &["eu-central-1a"], 1, 2).await?;
    let mds: Api<AWSMachineDeployment> = Api::namespaced(f.client.clone(), NS);
    let annotate = serde_json::json!({"metadata": {"annotations": {SUBNET: "10.1.0.0/33"}}});
    mds.patch("npbad", &PatchParams::default(), &Patch::Merge(&annotate)).await?;
    f.cluster(id).await?;
    f.control_plane(id, "cpipis", &["eu-central-1a"], 1).await?;
    f.node_pool(id, "npgood", &["eu-central-1a"], 1, 2).await?;
    f.start_operator().await?;

    let clusters: Api<AWSCluster> = Api::namespaced(f.client.clone(), NS);
    // The cluster stays Ready=False while one of its pools is, by design; it gets its CIDR.
    let outcome = eventually(240, "the cluster's CIDR and the good pool to be Ready", || async {
        let cluster = clusters.get(id).await?;
        let good = mds.get("npgood").await?;
        Ok((cluster.cidr().is_some() && ready(good.status.as_ref().map(|s| &s.conditions))).then_some((cluster, good)))
    })
    .await;
    let (cluster, good) = match outcome {
        Ok(v) => v,
        Err(e) => anyhow::bail!("{e}\n{}", dump(&f.client).await),
    };
    assert!(cluster.cidr().is_some(), "the cluster got its CIDR");
    let subnet = good.annotations().get(SUBNET).cloned().unwrap_or_default();
    assert!(subnet.parse::<aws_stacks::ipam::Ipv4Net>().is_ok(), "the good pool got a range: {subnet:?}");

    // The bad pool, and only it, says what is wrong and how to fix it.
    let bad = mds.get("npbad").await?;
    let cond = bad.status.as_ref().and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready")).cloned();
    let cond = cond.ok_or_else(|| anyhow::anyhow!("npbad has no Ready condition"))?;
    assert_eq!((cond.status.as_str(), cond.reason.as_str()), ("False", "InvalidAnnotation"), "{cond:?}");
    assert!(
        cond.message.contains(&format!("annotation {SUBNET} \"10.1.0.0/33\""))
            && cond.message.contains("remove it to have a range allocated"),
        "{}",
        cond.message
    );
    assert!(
        bad.status.as_ref().is_none_or(|s| s.stacks.is_empty()),
        "nothing was created for the bad pool: {:?}",
        bad.status
    );
    f.kill_operator().await;
    Ok(())
}

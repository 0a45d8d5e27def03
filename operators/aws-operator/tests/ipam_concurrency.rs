//! IPAM under contention: twenty clusters and twenty node pools allocate at once while the
//! operator's caches lag behind the API server (testenv delays every watch), and the operator is
//! killed in the middle and started again. Every object ends with one range, allocated once,
//! and no two ranges overlap.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use apis::aws::{AWSCluster, AWSMachineDeployment};
use aws_stacks::ipam::Ipv4Net;
use k8s_openapi::api::events::v1::Event;
use kube::api::ListParams;
use kube::{Api, ResourceExt};
use support::*;
use testenv::{RequestMatch, Verb};

const CLUSTERS: usize = 20;
const SUBNET: &str = "machine-deployment.giantswarm.io/subnet";

/// `Kind/name` → the range the API server holds for it.
async fn ranges(f: &Fixture) -> anyhow::Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for c in Api::<AWSCluster>::namespaced(f.client.clone(), NS).list(&ListParams::default()).await?.items {
        if let Some(cidr) = c.status.as_ref().and_then(|s| s.provider.network.cidr.clone()) {
            out.insert(format!("AWSCluster/{}", c.name_any()), cidr);
        }
    }
    for md in Api::<AWSMachineDeployment>::namespaced(f.client.clone(), NS).list(&ListParams::default()).await?.items {
        if let Some(cidr) = md.annotations().get(SUBNET) {
            out.insert(format!("AWSMachineDeployment/{}", md.name_any()), cidr.clone());
        }
    }
    Ok(out)
}

/// `Kind/name` → the ranges its `CIDRAllocated` events announced (each repetition counted).
async fn allocations(f: &Fixture) -> anyhow::Result<BTreeMap<String, Vec<String>>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for e in Api::<Event>::namespaced(f.client.clone(), NS).list(&ListParams::default()).await?.items {
        if e.reason.as_deref() != Some("CIDRAllocated") {
            continue;
        }
        let Some(r) = e.regarding.as_ref() else { continue };
        let key = format!("{}/{}", r.kind.clone().unwrap_or_default(), r.name.clone().unwrap_or_default());
        let cidr = e.note.as_deref().and_then(|n| n.split_whitespace().find(|w| w.contains('/'))).unwrap_or_default();
        let times = e.series.as_ref().map_or(1, |s| s.count.max(1));
        for _ in 0..times {
            out.entry(key.clone()).or_default().push(cidr.to_owned());
        }
    }
    Ok(out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_allocations_with_lagging_caches_and_a_crash_never_share_a_range() -> anyhow::Result<()> {
    let mut f = Fixture::start().await?;
    f.apply_basics().await?;
    // No control plane: the clusters stop after allocation and their first stack, which keeps
    // the test about IPAM.
    for i in 0..CLUSTERS {
        let id = format!("ipm{i:02}");
        f.credential_secret(&id).await?;
        f.cluster(&id).await?;
        f.node_pool(&id, &format!("np{i:02}"), &["eu-central-1a"], 1, 2).await?;
    }
    // Every watch starts three seconds late: each reconcile in that window reads an object
    // without the allocation it just received.
    for resource in ["awsclusters", "awsmachinedeployments"] {
        f.env.handle().faults().delay(RequestMatch::new(Verb::Watch, resource), Duration::from_secs(3), None);
    }

    f.start_operator().await?;
    // The crash: in the middle of the allocations.
    eventually(120, "some allocations", || async { Ok((ranges(&f).await?.len() >= 5).then_some(())) }).await?;
    f.kill_operator().await;
    let before_crash = ranges(&f).await?;
    f.start_operator().await?;

    let all = match eventually(240, "every cluster and node pool to have a range", || async {
        let r = ranges(&f).await?;
        Ok((r.len() == 2 * CLUSTERS).then_some(r))
    })
    .await
    {
        Ok(r) => r,
        Err(e) => anyhow::bail!("{e}\n{:?}\n{}", ranges(&f).await?, dump(&f.client).await),
    };
    // Let every lagging reconcile run against the late caches.
    tokio::time::sleep(Duration::from_secs(8)).await;
    let after = ranges(&f).await?;
    assert_eq!(after, all, "a range changed after it was allocated");
    for (object, cidr) in &before_crash {
        assert_eq!(after.get(object), Some(cidr), "{object} changed its range across the crash");
    }

    let nets: Vec<(&String, Ipv4Net)> =
        after.iter().map(|(o, c)| (o, c.parse().unwrap_or_else(|e| panic!("{o}: {c}: {e}")))).collect();
    for (i, (a, na)) in nets.iter().enumerate() {
        for (b, nb) in &nets[i + 1..] {
            assert!(!na.overlaps(nb), "{a} ({na}) and {b} ({nb}) overlap");
        }
    }
    // Each object was allocated for once: at most one announcement (a crash can fall between
    // the write and the event), and it names the range the object kept.
    let announced = allocations(&f).await?;
    for (object, cidrs) in &announced {
        assert!(cidrs.len() <= 1, "{object} was allocated {} times: {cidrs:?}", cidrs.len());
        assert_eq!(after.get(object), cidrs.first(), "{object}");
    }
    assert!(announced.len() >= CLUSTERS, "most allocations are announced: {announced:?}");
    f.kill_operator().await;
    Ok(())
}

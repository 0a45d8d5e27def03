//! `make bench`: a Release upgrade of a cluster with 3 masters and 3 node pools of 10 nodes,
//! against moto at 1 % of AWS's waits and a simulated workload cluster, the operators in this
//! process (the old version, and the new one that takes the cluster over), with their drainer
//! settings at the defaults (`--drainer-poll-seconds` 120, `--drainer-active-poll-seconds` 2)
//! and the test fixture's `--poll-seconds` of 0.5 s (default 10): a pool whose stack is
//! updating is reconciled more often than in production, so the call count is an upper bound.
//!
//! Prints:
//! - the total time from the relabel until the cluster is `Updated` with every instance
//!   replaced;
//! - the new operator's AWS calls per replaced node (moto's request log, by the operator's
//!   access key; target ≤ 10);
//! - the operator's reaction times, p50 and p99: from an instance entering `Terminating:Wait`
//!   to its DrainerConfig, and from the DrainerConfig's `Drained` to the instance leaving
//!   `Terminating:Wait` (the `CompleteLifecycleAction`). Target for both: p50 ≤ 2 s. The bench
//!   watches DrainerConfigs and lists the Auto Scaling instances every 100 ms with its own key,
//!   so each figure is exact to about 0.1 s.

#[path = "../tests/support/mod.rs"]
#[allow(unused_imports)]
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use apis::aws::{AWSCluster, AWSControlPlane, AWSMachineDeployment};
use apis::cluster_status::ClusterCondition;
use apis::drainer::DrainerConfig;
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Api, ResourceExt as _};
use parking_lot::Mutex;
use support::bridge::NodeBridge;
use support::*;
use workload_sim::{Workload, WorkloadCluster};

const ID: &str = "bench";
const POOLS: [&str; 3] = ["np001", "np002", "np003"];
const NODES_PER_POOL: i32 = 10;
const NEW_KEY: &str = "AKIANEWOPERATOR";

fn next_version() -> String {
    let v = semver::Version::parse(VERSION).expect("the crate version is semver");
    format!("{}.{}.0", v.major, v.minor + 1)
}

fn percentile(values: &mut [f64], p: f64) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    values.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * values.len() as f64).ceil() as usize;
    values[rank.clamp(1, values.len()) - 1]
}

#[derive(Default)]
struct Timeline {
    /// Instance → when it was first seen in `Terminating:Wait`, and when first seen out of it.
    waiting: BTreeMap<String, (Instant, Option<Instant>)>,
    /// Instance → when its DrainerConfig appeared, and when it was first seen `Drained`.
    dc_created: BTreeMap<String, Instant>,
    drained: BTreeMap<String, Instant>,
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let f = Fixture::start_with(motoenv::Launcher::from_env().time_scale(0.01)).await?;
    f.apply_basics().await?;
    let next = next_version();
    f.release("20.1.0", FLATCAR_NEXT, &next).await?;
    f.credential_secret(ID).await?;
    f.cluster(ID).await?;
    f.control_plane(ID, "cp001", &["eu-central-1a", "eu-central-1b", "eu-central-1c"], 3).await?;
    let mds: Api<AWSMachineDeployment> = Api::namespaced(f.client.clone(), NS);
    for (i, pool) in POOLS.iter().enumerate() {
        let zone = ["eu-central-1a", "eu-central-1b", "eu-central-1c"][i];
        f.node_pool(ID, pool, &[zone], NODES_PER_POOL, NODES_PER_POOL).await?;
        // A minute between batches (0.6 s here) instead of ten.
        let patch =
            serde_json::json!({"metadata": {"annotations": {"alpha.aws.giantswarm.io/update-pause-time": "PT1M"}}});
        mds.patch(pool, &PatchParams::default(), &Patch::Merge(&patch)).await?;
    }
    let wc = Arc::new(WorkloadCluster::start().await?);
    Api::<Secret>::namespaced(f.client.clone(), NS)
        .create(&PostParams::default(), &wc.kubeconfig_secret(NS, ID))
        .await?;
    let tenant = f.tenant_clients().await?;
    let bridge = NodeBridge::start(wc.clone(), tenant.clone(), &f.moto.endpoint(), ID, Duration::from_millis(500));
    let _old = f.spawn_operator(VERSION, "AKIAOLDOPERATOR").await?;
    let _new = f.spawn_operator(&next, NEW_KEY).await?;
    let total = 3 + POOLS.len() * NODES_PER_POOL as usize;
    let clusters: Api<AWSCluster> = Api::namespaced(f.client.clone(), NS);
    let started = Instant::now();
    eventually(900, "the cluster to be Ready with every node", || async {
        let c = clusters.get(ID).await?;
        let nodes = bridge.seen().iter().filter(|s| s.lifecycle == "InService").count();
        Ok((ready(c.status.as_ref().map(|s| &s.conditions)) && nodes == total).then_some(()))
    })
    .await?;
    println!("created: {total} instances in {:.1} s", started.elapsed().as_secs_f64());
    let workload = Workload::new("web", "web", 20).max_unavailable(2).node_selector("kubernetes.io/role", "worker");
    wc.deploy(&workload).await?;
    wc.wait_ready("web", "web", 20).await?;
    let old_instances: BTreeSet<String> = bridge.seen().iter().map(|s| s.instance.clone()).collect();

    // What the bench observes: DrainerConfigs as they change, instances every 100 ms.
    let timeline = Arc::new(Mutex::new(Timeline::default()));
    let dc_task = {
        let (timeline, dcs) = (timeline.clone(), Api::<DrainerConfig>::namespaced(f.client.clone(), NS));
        tokio::spawn(async move {
            let mut stream =
                std::pin::pin!(watcher(dcs, watcher::Config::default()).default_backoff().applied_objects());
            while let Some(item) = stream.next().await {
                let Ok(dc) = item else { continue };
                let Some(instance) = dc.labels().get("aws-operator.giantswarm.io/instance").cloned() else { continue };
                let mut t = timeline.lock();
                t.dc_created.entry(instance.clone()).or_insert_with(Instant::now);
                if dc.status.as_ref().is_some_and(|s| s.is_drained()) {
                    t.drained.entry(instance).or_insert_with(Instant::now);
                }
            }
        })
    };
    let asg_task = {
        let (timeline, tenant) = (timeline.clone(), tenant.clone());
        tokio::spawn(async move {
            loop {
                if let Ok(out) = tenant.autoscaling.describe_auto_scaling_instances().send().await {
                    let now = Instant::now();
                    let states: BTreeMap<String, String> = out
                        .auto_scaling_instances()
                        .iter()
                        .filter_map(|i| Some((i.instance_id()?.to_string(), i.lifecycle_state()?.to_string())))
                        .collect();
                    let mut t = timeline.lock();
                    for (instance, state) in &states {
                        if state == "Terminating:Wait" {
                            t.waiting.entry(instance.clone()).or_insert((now, None));
                        }
                    }
                    for (instance, (_, left)) in t.waiting.iter_mut() {
                        if left.is_none() && states.get(instance).is_none_or(|s| s != "Terminating:Wait") {
                            *left = Some(now);
                        }
                    }
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };

    // The upgrade.
    let handover = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_secs_f64();
    let start = Instant::now();
    let patch = Patch::Merge(serde_json::json!({"metadata": {"labels": {
        "release.giantswarm.io/version": "20.1.0", "aws-operator.giantswarm.io/version": next,
    }}}));
    let pp = PatchParams::default();
    clusters.patch(ID, &pp, &patch).await?;
    Api::<AWSControlPlane>::namespaced(f.client.clone(), NS).patch("cp001", &pp, &patch).await?;
    for pool in POOLS {
        mds.patch(pool, &pp, &patch).await?;
    }
    eventually(1800, "the cluster to be Updated with every instance replaced", || async {
        let c = clusters.get(ID).await?;
        let lifecycle = c.status.as_ref().map(|s| s.cluster.clone()).unwrap_or_default();
        let seen = bridge.seen();
        let all_new = seen.len() == total
            && seen
                .iter()
                .all(|s| !old_instances.contains(&s.instance) && s.version == next && s.lifecycle == "InService");
        Ok((lifecycle.has_condition(ClusterCondition::Updated)
            && ready(c.status.as_ref().map(|s| &s.conditions))
            && all_new)
            .then_some(()))
    })
    .await?;
    let elapsed = start.elapsed().as_secs_f64();
    dc_task.abort();
    asg_task.abort();

    let log = f.moto.request_log()?;
    let calls: Vec<_> = log.iter().filter(|r| r.principal == NEW_KEY && r.time >= handover).collect();
    let mut by_action: BTreeMap<&str, usize> = BTreeMap::new();
    for r in &calls {
        *by_action.entry(r.action.as_str()).or_default() += 1;
    }
    let replaced = old_instances.len();
    let t = timeline.lock();
    let mut to_dc: Vec<f64> = t
        .waiting
        .iter()
        .filter_map(|(i, (w, _))| t.dc_created.get(i).map(|d| d.saturating_duration_since(*w).as_secs_f64()))
        .collect();
    let mut to_complete: Vec<f64> = t
        .waiting
        .iter()
        .filter_map(|(i, (_, left))| Some(left.as_ref()?.saturating_duration_since(*t.drained.get(i)?).as_secs_f64()))
        .collect();
    println!("upgrade: 3 masters and {} pools of {NODES_PER_POOL} nodes, moto at 1 % of AWS's waits", POOLS.len());
    println!("  total time                          {elapsed:.1} s ({replaced} instances replaced)");
    println!(
        "  AWS calls per replaced node         {:.1} ({} calls; target <= 10)",
        calls.len() as f64 / replaced as f64,
        calls.len()
    );
    let top: Vec<String> = {
        let mut v: Vec<_> = by_action.iter().collect();
        v.sort_by(|a, b| b.1.cmp(a.1));
        v.iter().take(6).map(|(a, n)| format!("{a} {n}")).collect()
    };
    println!("  most frequent                       {}", top.join(", "));
    println!(
        "  Terminating:Wait -> DrainerConfig   p50 {:.2} s, p99 {:.2} s ({} instances; target p50 <= 2 s)",
        percentile(&mut to_dc, 50.0),
        percentile(&mut to_dc, 99.0),
        to_dc.len()
    );
    println!(
        "  Drained -> lifecycle completed      p50 {:.2} s, p99 {:.2} s ({} instances; target p50 <= 2 s)",
        percentile(&mut to_complete, 50.0),
        percentile(&mut to_complete, 99.0),
        to_complete.len()
    );
    Ok(())
}

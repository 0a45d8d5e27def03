//! Wires the three controllers on operatorkit and runs them.
//!
//! Each controller routes an object by its `release.giantswarm.io/version` label: the Release
//! `v<version>` names the `aws-operator` component version, and this process handles exactly its
//! own version, so several operator versions can run side by side, each reconciling the clusters
//! of its releases (reference §1, §10). Objects whose Release does not exist or has no
//! `aws-operator` component get a `ReleaseResolved=False` condition.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use apis::aws::{AWSCluster, AWSControlPlane, AWSMachineDeployment};
use kube::runtime::reflector::ObjectRef;
use kube::{Api, ResourceExt};
use operatorkit::{Controller, ControllerBuilder, Leadership, Metrics, Readiness, ResourceSet};
use semver::VersionReq;
use tokio_util::sync::CancellationToken;

use crate::context::Shared;
use crate::controllers::status::{StatusReport, WithStatus};
use crate::controllers::{cluster, control_plane, node_pool};

/// The Release component this operator is.
pub const COMPONENT: &str = "aws-operator";

/// Controller settings.
#[derive(Clone, Debug)]
pub struct RunSettings {
    /// Parallel reconciles per controller.
    pub concurrency: u16,
    /// Resync period.
    pub resync: Duration,
    /// Whether this replica leads ([`Leadership::always`] without leader election). The same
    /// leadership must gate the Kubernetes client and the AWS clients of [`Shared`] (see
    /// [`lease_name`]).
    pub leadership: Leadership,
}

impl Default for RunSettings {
    fn default() -> Self {
        Self { concurrency: 8, resync: Duration::from_secs(300), leadership: Leadership::always() }
    }
}

/// The Lease the replicas of one operator version compete for: `aws-operator-<version>`.
///
/// One lease per version, because versions run side by side and each reconciles only the
/// clusters of its own Releases: the replicas of 16.2.0 elect a leader among themselves, while
/// the leader of 16.1.0 goes on with its clusters.
pub fn lease_name(version: &str) -> String {
    // A Lease name is a DNS subdomain: semver's `+` and upper case are not allowed in one.
    let version: String = version
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '.' || c == '-' { c } else { '-' })
        .collect();
    format!("{COMPONENT}-{version}")
}

fn requirement(shared: &Shared) -> anyhow::Result<VersionReq> {
    Ok(VersionReq::parse(&format!("={}", shared.config.version))?)
}

/// One controller of this operator: routed by Release to `set`, reporting routing problems in a
/// `ReleaseResolved` condition and persistent errors in `Ready` ([`StatusReport`]).
fn builder<K: WithStatus>(
    name: &str,
    set: ResourceSet<K>,
    shared: &Arc<Shared>,
    metrics: &Metrics,
    readiness: &Readiness,
    settings: &RunSettings,
) -> ControllerBuilder<K> {
    let client = &shared.client;
    Controller::<K>::builder(client.clone(), name)
        .operator(COMPONENT)
        .resource_set(set)
        .metrics(metrics)
        .readiness(readiness)
        .status_hook(StatusReport::new(client.clone()))
        .concurrency(settings.concurrency)
        .resync(settings.resync)
        .leadership(settings.leadership.clone())
}

/// The AWSCluster a control plane or node pool belongs to: its `giantswarm.io/cluster` label, in
/// its namespace.
fn owning_cluster<C: kube::ResourceExt>(child: &C) -> Vec<ObjectRef<AWSCluster>> {
    let cluster = child.labels().get(apis::labels::CLUSTER);
    cluster.map(|id| ObjectRef::new(id).within(&child.namespace().unwrap_or_default())).into_iter().collect()
}

/// The other node pools of a changed pool's cluster. The index of pools per cluster is kept from
/// the watch itself, which sees every pool (the initial listing included); a pool once seen stays
/// in it, and naming one that is gone costs nothing (it is skipped).
fn sibling_pools() -> impl Fn(&AWSMachineDeployment) -> Vec<ObjectRef<AWSMachineDeployment>> + Send + Sync + 'static {
    type Index = BTreeMap<(String, String), BTreeSet<String>>;
    let index: Arc<Mutex<Index>> = Arc::default();
    move |pool: &AWSMachineDeployment| {
        let (Some(cluster), ns) = (pool.labels().get(apis::labels::CLUSTER), pool.namespace().unwrap_or_default())
        else {
            return Vec::new();
        };
        let mut index = index.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let members = index.entry((ns.clone(), cluster.clone())).or_default();
        members.insert(pool.name_any());
        members.iter().filter(|name| **name != pool.name_any()).map(|name| ObjectRef::new(name).within(&ns)).collect()
    }
}

/// Build and run the three controllers until `shutdown`.
pub async fn run(
    shared: Arc<Shared>,
    metrics: &Metrics,
    readiness: &Readiness,
    settings: RunSettings,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let client = shared.client.clone();
    let req = requirement(&shared)?;
    let set_name = format!("v{}", shared.config.version);

    let clusters = cluster::resource_set(shared.clone(), set_name.clone(), req.clone());
    // The cluster's Ready condition summarises its control plane and node pools: their changes
    // requeue it.
    let cluster_controller = builder(cluster::CONTROLLER, clusters, &shared, metrics, readiness, &settings)
        .watches(Api::<AWSControlPlane>::all(client.clone()), owning_cluster)
        .watches(Api::<AWSMachineDeployment>::all(client.clone()), owning_cluster)
        .build()?;

    let cps = control_plane::resource_set(shared.clone(), set_name.clone(), req.clone());
    let cp_controller = builder(control_plane::CONTROLLER, cps, &shared, metrics, readiness, &settings).build()?;

    let mds = node_pool::resource_set(shared.clone(), set_name, req);
    // A pool's security group admits its siblings': adding or removing a pool (or its stack
    // getting its group) requeues the cluster's other pools.
    let md_controller = builder(node_pool::CONTROLLER, mds, &shared, metrics, readiness, &settings)
        .watches(Api::<AWSMachineDeployment>::all(client.clone()), sibling_pools())
        .build()?;

    tokio::join!(
        cluster_controller.run(shutdown.clone()),
        cp_controller.run(shutdown.clone()),
        md_controller.run(shutdown.clone()),
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_lease_per_version_with_a_valid_name() {
        assert_eq!(lease_name("16.2.0"), "aws-operator-16.2.0");
        assert_eq!(lease_name("16.2.0-Beta.1+build.7"), "aws-operator-16.2.0-beta.1-build.7");
        assert_ne!(lease_name("16.2.0"), lease_name("16.1.0"));
    }
}

//! `aws-operator daemon`: the wiring. The flags become the configuration, the configuration and
//! the clients become the [`Shared`] context, and the controllers run on it beside the
//! drain executor, under leader election or sharded over the replicas
//! ([`operatorkit::replicas`]), with the `/metrics`, `/healthz` and `/readyz` server, until
//! SIGTERM or Ctrl-C.
//!
//! Each controller routes an object by its `release.giantswarm.io/version` label: the Release
//! `v<version>` names the `aws-operator` component version, and this process handles exactly its
//! own version, so several operator versions can run side by side, each reconciling the clusters
//! of its releases (reference §1, §10). An `AWSConfig` without that label is routed by the
//! operator version it names itself (`aws-operator.giantswarm.io/version`, else
//! `spec.versionBundle.version`, as the original operator was), through the one Release whose
//! `aws-operator` component is that version ([`legacy::version_of`]). Objects whose Release does
//! not exist or has no `aws-operator` component get a `ReleaseResolved=False` condition.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use apis::aws::{AWSCluster, AWSControlPlane, AWSMachineDeployment};
use apis::drainer::DrainerConfig;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, ResourceExt};
use node_lifecycle::drain::{Drainer, DrainerSettings};
use operatorkit::replicas::{self, ReplicaSettings, Replicas};
use operatorkit::{Controller, ControllerBuilder, Metrics, Readiness, ResourceSet, RunSettings, Server};
use prometheus_client::registry::Registry;
use semver::VersionReq;
use tokio_util::sync::CancellationToken;

use crate::aws::AwsFactory;
use crate::aws::budget::{MembershipConfig, RequestBudget};
use crate::config::{AmiMap, BudgetSettings, DaemonArgs, OperatorConfig};
use crate::context::Shared;
use crate::controllers::status::{StatusReport, WithStatus};
use crate::controllers::{cluster, control_plane, drift, legacy, node_pool, unhealthy};
use crate::drift::DriftState;

pub use crate::config::COMPONENT;

/// The Lease the replicas of one operator version compete for: `aws-operator-<version>`.
///
/// One lease per version, because versions run side by side and each reconciles only the
/// clusters of its own Releases: the replicas of 16.2.0 elect a leader among themselves, while
/// the leader of 16.1.0 goes on with its clusters.
pub fn lease_name(version: &str) -> String {
    operatorkit::leader::lease_name(COMPONENT, version)
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
        .run_settings(settings)
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

/// The DrainerConfigs of every namespace.
fn drainer_configs(shared: &Shared) -> Api<DrainerConfig> {
    Api::all(shared.client.clone())
}

/// The DrainerConfigs this operator version makes: when sharded, the sharder assigns only those.
fn own_drainer_configs(shared: &Shared) -> Option<String> {
    Some(format!("{}={}", apis::labels::AWS_OPERATOR_VERSION, shared.config.version))
}

/// The owner of a DrainerConfig this operator version made: the object named by its `owner`
/// label (`giantswarm.io/control-plane` or `giantswarm.io/machine-deployment`), in its namespace.
fn drainer_owner<K>(
    owner: &'static str,
    version: &str,
) -> impl Fn(&DrainerConfig) -> Vec<ObjectRef<K>> + Send + Sync + 'static
where
    K: kube::Resource<DynamicType = ()>,
{
    let version = version.to_string();
    move |dc: &DrainerConfig| {
        let labels = dc.labels();
        if labels.get(apis::labels::AWS_OPERATOR_VERSION) != Some(&version) {
            return Vec::new();
        }
        labels
            .get(owner)
            .map(|name| ObjectRef::new(name).within(&dc.namespace().unwrap_or_default()))
            .into_iter()
            .collect()
    }
}

/// Build and run the controllers (the node-pools kinds' and legacy `AWSConfig`s') until `shutdown`.
pub async fn run(
    shared: Arc<Shared>,
    drift_state: DriftState,
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
    // A DrainerConfig that drained (or timed out) requeues its owner, whose drainers then
    // complete the lifecycle action at once instead of at the next poll.
    let cp_controller = builder(control_plane::CONTROLLER, cps, &shared, metrics, readiness, &settings)
        .watches_selected(
            drainer_configs(&shared),
            own_drainer_configs(&shared),
            drainer_owner(apis::labels::CONTROL_PLANE, &shared.config.version),
        )
        .build()?;

    // The unhealthy-node terminator looks at each cluster every `--unhealthy-node-resync-seconds`
    // (reference §4.5: 3 min), besides when a node is due. It writes no status: the cluster
    // controller owns the AWSCluster's conditions, and the terminator reports by events.
    let terminator = Controller::<AWSCluster>::builder(client.clone(), unhealthy::CONTROLLER)
        .operator(COMPONENT)
        .resource_set(unhealthy::resource_set(shared.clone(), set_name.clone(), req.clone()))
        .metrics(metrics)
        .readiness(readiness)
        .run_settings(&RunSettings { resync: shared.config.unhealthy.resync, ..settings.clone() })
        .build()?;

    // The drift detector looks at each cluster every `--drift-detection-interval-seconds`, and
    // requeues itself while detections run; it writes only `status.drift` and its `Drifted`
    // condition. It runs even when detection is off (doing nothing), so that the finalizer it
    // put on the clusters while it was on is still released when they are deleted.
    let drift_resync = if shared.config.drift.enabled() { shared.config.drift.interval } else { settings.resync };
    let drift_detector = Controller::<AWSCluster>::builder(client.clone(), drift::CONTROLLER)
        .operator(COMPONENT)
        .resource_set(drift::resource_set(shared.clone(), drift_state, set_name.clone(), req.clone()))
        .metrics(metrics)
        .readiness(readiness)
        .run_settings(&RunSettings { resync: drift_resync, ..settings.clone() })
        .build()?;

    // Legacy clusters (`AWSConfig`): their own resource set, routed by Release like the others;
    // one without the release label by the operator version it names itself.
    let legacy_set = legacy::resource_set(shared.clone(), set_name.clone(), req.clone());
    let legacy_controller = builder(legacy::CONTROLLER, legacy_set, &shared, metrics, readiness, &settings)
        .version_source(legacy::version_of)
        .build()?;

    let mds = node_pool::resource_set(shared.clone(), set_name, req);
    // A pool's security group admits its siblings': adding or removing a pool (or its stack
    // getting its group) requeues the cluster's other pools.
    let md_controller = builder(node_pool::CONTROLLER, mds, &shared, metrics, readiness, &settings)
        .watches(Api::<AWSMachineDeployment>::all(client.clone()), sibling_pools())
        .watches_selected(
            drainer_configs(&shared),
            own_drainer_configs(&shared),
            drainer_owner(apis::labels::MACHINE_DEPLOYMENT, &shared.config.version),
        )
        .build()?;

    replicas::run_controllers(&settings, async {
        tokio::join!(
            cluster_controller.run(shutdown.clone()),
            cp_controller.run(shutdown.clone()),
            md_controller.run(shutdown.clone()),
            terminator.run(shutdown.clone()),
            drift_detector.run(shutdown.clone()),
            legacy_controller.run(shutdown.clone()),
        )
    })
    .await;
    Ok(())
}

/// Run `aws-operator daemon` with `args` until SIGTERM or Ctrl-C.
pub async fn serve(args: DaemonArgs) -> anyhow::Result<()> {
    crate::config::check_args(&args).map_err(anyhow::Error::msg)?;
    let client = kube::Client::try_default().await.context("connecting to the management cluster")?;
    let amis = AmiMap::load(&args.ami_file)?;
    let version = OperatorConfig::default().version;
    let replicas = Replicas::new(
        client.clone(),
        &ReplicaSettings::from_flags(
            args.leader_election,
            args.sharding.then_some(args.sharding_mode),
            &args.leader_election_namespace,
            args.leader_election_name.clone(),
            COMPONENT,
            &version,
        ),
        operatorkit::sharding::cluster_key(),
    )
    .context("leader election and sharding")?;
    // The controllers write (to AWS and to the management cluster) while this replica holds
    // its shard (sharded) or leads; the drain executor runs on the leader only.
    let (writes, leader) = (replicas.writes(), replicas.leader());
    // One AWS request budget per account and region, shared with every replica and version
    // that holds a member Lease in this namespace.
    let budget_settings = BudgetSettings::new(&args);
    let budget = RequestBudget::new(&budget_settings);
    let membership = MembershipConfig::new(&args.leader_election_namespace, operatorkit::leader::default_identity())
        .lease_duration(budget_settings.lease_duration);
    let aws = AwsFactory::new(args.aws.settings(None)).await?.gated_by(writes.clone()).budgeted(budget.clone());
    let config = OperatorConfig::from_args(&args);
    let mut registry = Registry::default();
    budget.register_metrics(&mut registry);
    let metrics = Metrics::new(&mut registry);
    let readiness = Readiness::new();
    replicas.register(&mut registry, &readiness);
    // The drain executor: the DrainerConfigs labelled with this version, so that a platform
    // needs no node-operator.
    let drain_settings = DrainerSettings {
        timeout: Duration::from_secs(args.drain_timeout_seconds.max(1)),
        ..DrainerSettings::new("aws-operator", semver::Version::parse(&version).context("the operator's version")?)
    };
    let drift = DriftState::sharing(&mut registry, budget.clone());
    let shared = Shared::new(writes.gate(client.clone()), aws, config, amis, &mut registry);
    let shutdown = CancellationToken::new();
    tokio::spawn(budget.run_membership(client.clone(), membership, writes.clone(), shutdown.clone()));
    let drainer = Drainer::builder(leader.gate(client), drain_settings, &mut registry)
        .clients(shared.workload_clients.clone())
        .metrics(&metrics)
        .readiness(&readiness)
        .leadership(leader)
        .build()
        .context("the drain executor")?;
    let server = Server::bind(args.listen, Arc::new(registry), readiness.clone()).await?.version(COMPONENT, &version);
    tracing::info!(addr = ?server.local_addr(), version = %shared.config.version, "aws-operator starting");
    let serving = tokio::spawn(server.serve(shutdown.clone()));
    tokio::spawn(shared.amis.clone().watch(
        args.ami_file.clone(),
        Duration::from_secs(args.ami_reload_seconds.max(1)),
        shutdown.clone(),
    ));
    let settings = replicas.run_settings(args.concurrency, Duration::from_secs(args.resync_seconds));
    // The election stops after the controllers, so that releasing the lease comes last.
    let election = replicas.start();
    let stop = shutdown.clone();
    tokio::spawn(async move {
        operatorkit::server::terminated().await;
        tracing::info!("stopping: the controllers finish their reconciles, then the leader Lease is released");
        stop.cancel();
    });
    let (controllers, ()) = tokio::join!(
        run(shared, drift, &metrics, &readiness, settings, shutdown.clone()),
        drainer.run(shutdown.clone()),
    );
    controllers?;
    shutdown.cancel();
    election.stop().await;
    let _ = serving.await;
    Ok(())
}

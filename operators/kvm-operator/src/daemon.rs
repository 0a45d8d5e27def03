//! `kvm-operator daemon`: the wiring. The flags become the configuration, the configuration and
//! the client become the [`Shared`] context, and the cluster controller runs on it beside the
//! drain executor, under leader election (one Lease per operator version) or sharded over the
//! replicas ([`operatorkit::replicas`]), with the `/metrics`, `/healthz` and `/readyz` server,
//! until SIGTERM or Ctrl-C.
//!
//! The cluster controller routes a KVMConfig by its `release.giantswarm.io/version` label: the
//! Release `v<version>` names the `kvm-operator` component version, and this process handles
//! exactly its own version, so several operator versions can run side by side. KVMConfigs whose
//! Release does not exist or has no `kvm-operator` component get a `ReleaseResolved=False`
//! condition.
//!
//! The drainer controller watches the node pods, routed by their operator-version label: it
//! holds a node pod being deleted until the drain executor has drained its workload-cluster
//! node, and writes the Endpoints. The deleter and the unhealthy-node terminator watch
//! KVMConfigs like the cluster controller; the deleter also keeps one node watcher per cluster
//! running. All of them reach workload clusters through the drain executor's client cache
//! ([`node_lifecycle::WorkloadClients`]), and their metrics are in the operator's registry.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use node_lifecycle::drain::{Drainer, DrainerSettings};
use operatorkit::Server;
use operatorkit::replicas::{self, ReplicaSettings, Replicas};
use prometheus_client::registry::Registry;

use apis::kvm::KVMConfig;
use operatorkit::status::StatusReport;
use operatorkit::{Controller, Metrics, Readiness, RunSettings};
use semver::VersionReq;
use tokio_util::sync::CancellationToken;

use apis::drainer::DrainerConfig;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;

use crate::config::{DaemonArgs, NodeSettings, OperatorConfig, RolloutLimits};
use crate::context::Shared;
use crate::controllers::{NodeMetrics, Nodes, cluster, deleter, drainer, unhealthy};

/// The Release component this operator is.
pub const COMPONENT: &str = "kvm-operator";

/// How a [`Daemon`] runs, beyond its shared context: the controllers' concurrency, resync and
/// leadership, the node controllers' settings and the drain executor's.
#[derive(Debug, Clone)]
pub struct Tuning {
    /// Concurrency, resync and leadership of every controller.
    pub run: RunSettings,
    /// The deleter, node watchers and unhealthy-node terminator.
    pub nodes: NodeSettings,
    /// The drain executor, and the options of the workload-cluster clients it caches.
    pub drain: DrainerSettings,
}

impl Tuning {
    /// The defaults for operator `version` (semver).
    pub fn new(version: &str) -> anyhow::Result<Self> {
        let version = semver::Version::parse(version).with_context(|| format!("operator version {version}"))?;
        Ok(Self {
            run: RunSettings::default(),
            nodes: NodeSettings::default(),
            drain: DrainerSettings::new(COMPONENT, version),
        })
    }
}

/// Everything `kvm-operator daemon` runs, built and ready: the controllers of
/// [`run_with_nodes`] and the drain executor, on one cache of workload-cluster clients (the
/// executor's, built from [`Tuning::drain`]). [`serve`], the demo and the tests all run the
/// operator through it.
pub struct Daemon {
    nodes: Arc<Nodes>,
    drainer: Drainer,
    metrics: Metrics,
    readiness: Readiness,
    run: RunSettings,
}

impl std::fmt::Debug for Daemon {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Daemon").field("run", &self.run).finish_non_exhaustive()
    }
}

impl Daemon {
    /// Build the daemon on `shared`: its metrics (the controllers', the executor's and the node
    /// controllers') go into `registry`, its readiness into `readiness`.
    pub fn build(
        shared: Shared,
        tuning: Tuning,
        registry: &mut Registry,
        readiness: &Readiness,
    ) -> anyhow::Result<Daemon> {
        let metrics = Metrics::new(registry);
        operatorkit::metrics::register(
            registry,
            "kvm_operator_max_age_replacements",
            "Node pods deleted (drained first, then started anew) because they were older than their cluster's maxNodeAge",
            shared.max_age_replacements.clone(),
        );
        let drainer = Drainer::builder(shared.client.clone(), tuning.drain, registry)
            .metrics(&metrics)
            .readiness(readiness)
            .leadership(tuning.run.leadership.clone())
            .build()
            .context("the drain executor")?;
        // One cache of workload-cluster clients for the drain executor and every controller;
        // the executor's run keeps it current. The controllers' writes to workload clusters
        // are fenced by their leadership, request by request.
        let clients = drainer.clients().gated_by(tuning.run.leadership.clone());
        let shared = Arc::new(shared.with_workload_clients(clients));
        let nodes = Arc::new(Nodes::new(shared, tuning.nodes, NodeMetrics::new(registry)));
        Ok(Daemon { nodes, drainer, metrics, readiness: readiness.clone(), run: tuning.run })
    }

    /// The node controllers' context (the shared context, the node watchers, the clients).
    pub fn nodes(&self) -> &Arc<Nodes> {
        &self.nodes
    }

    /// Run until `shutdown`: the controllers beside the drain executor.
    pub async fn run(self, shutdown: CancellationToken) -> anyhow::Result<()> {
        let Daemon { nodes, drainer, metrics, readiness, run } = self;
        let (controllers, ()) =
            tokio::join!(run_with_nodes(nodes, &metrics, &readiness, run, shutdown.clone()), drainer.run(shutdown));
        controllers
    }
}

/// Build and run the controllers until `shutdown`: the cluster controller, the drainer (pod
/// finalizer drain and Endpoints), the deleter (with the per-cluster node watchers) and the
/// unhealthy-node terminator, all on `nodes`' shared context.
async fn run_with_nodes(
    nodes: Arc<Nodes>,
    metrics: &Metrics,
    readiness: &Readiness,
    settings: RunSettings,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let shared = nodes.shared.clone();
    let client = shared.client.clone();
    let set_name = format!("v{}", shared.config.version);
    let requirement = VersionReq::parse(&format!("={}", shared.config.version))?;
    let set = cluster::resource_set(shared.clone(), set_name.clone(), requirement.clone());
    let controller = Controller::<KVMConfig>::builder(client.clone(), cluster::CONTROLLER)
        .operator(COMPONENT)
        .resource_set(set)
        .metrics(metrics)
        .readiness(readiness)
        .status_hook(StatusReport::new(client.clone()))
        .run_settings(&settings)
        .build()?;
    // Node pods carry the operator version as a label, not a Release: legacy routing.
    let version = semver::Version::parse(&shared.config.version)?;
    let pods = drainer::resource_set(nodes.clone(), set_name.clone(), requirement.clone());
    let drainer = Controller::<Pod>::builder(client.clone(), drainer::CONTROLLER)
        .operator(COMPONENT)
        .routing(operatorkit::Routing::Legacy { version })
        .label_selector(crate::controllers::pod_selector())
        .resource_set(pods)
        // Readiness and the node-ready condition are pod status: follow every change.
        // Only node pods, and only this version's DrainerConfigs: when sharded, the sharder
        // assigns what these watches select, and must not label every pod of the cluster.
        .watches_selected(
            Api::<Pod>::all(client.clone()),
            Some(crate::controllers::pod_selector()),
            drainer::requeue_node_pod,
        )
        .watches_selected(
            Api::<DrainerConfig>::all(client.clone()),
            Some(format!("{}={}", apis::labels::KVM_OPERATOR_VERSION, shared.config.version)),
            drainer::requeue_drained_pod,
        )
        .metrics(metrics)
        .readiness(readiness)
        .run_settings(&settings)
        .build()?;
    let deleter = Controller::<KVMConfig>::builder(client.clone(), deleter::CONTROLLER)
        .operator(COMPONENT)
        .resource_set(deleter::resource_set(nodes.clone(), set_name.clone(), requirement.clone()))
        .metrics(metrics)
        .readiness(readiness)
        .run_settings(&RunSettings { resync: nodes.settings.deleter_resync.min(settings.resync), ..settings.clone() })
        .build()?;
    let terminator = Controller::<KVMConfig>::builder(client.clone(), unhealthy::CONTROLLER)
        .operator(COMPONENT)
        .resource_set(unhealthy::resource_set(nodes.clone(), set_name, requirement))
        .metrics(metrics)
        .readiness(readiness)
        .run_settings(&settings)
        .build()?;
    replicas::run_controllers(&settings, async {
        tokio::join!(
            controller.run(shutdown.clone()),
            drainer.run(shutdown.clone()),
            deleter.run(shutdown.clone()),
            terminator.run(shutdown.clone())
        )
    })
    .await;
    nodes.watchers.stop_all();
    Ok(())
}

/// The Lease the replicas of one operator version compete for: `kvm-operator-<version>`.
pub fn lease_name(version: &str) -> String {
    operatorkit::leader::lease_name(COMPONENT, version)
}

/// Run `kvm-operator daemon` with `args` until SIGTERM or Ctrl-C.
pub async fn serve(args: DaemonArgs) -> anyhow::Result<()> {
    args.cluster.require_install_settings().map_err(anyhow::Error::msg)?;
    let client = kube::Client::try_default().await.context("connecting to the management cluster")?;
    let version = env!("CARGO_PKG_VERSION").to_string();
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
    let mut registry = Registry::default();
    let readiness = Readiness::new();
    replicas.register(&mut registry, &readiness);
    let defaults = Tuning::new(&version)?;
    let tuning = Tuning {
        // The drain executor runs on the leader; the controllers write while this replica
        // leads or (sharded) holds its shard.
        run: replicas.run_settings(args.concurrency, Duration::from_secs(args.resync_seconds)),
        nodes: NodeSettings {
            watcher_resync: Duration::from_secs(args.resync_seconds.max(1)),
            ..NodeSettings::new(&args.nodes)
        },
        // The drain executor: the DrainerConfigs labelled kvm-operator.giantswarm.io/version=<v>.
        drain: DrainerSettings { timeout: Duration::from_secs(args.drain_timeout_seconds.max(1)), ..defaults.drain },
    };
    let shared = Shared::new(
        replicas.writes().gate(client),
        OperatorConfig {
            rollout: RolloutLimits {
                max_rolling_clusters: args.max_rolling_clusters,
                slot_namespace: args.leader_election_namespace.clone(),
            },
            access: args.cluster.access().map_err(anyhow::Error::msg)?,
            ..OperatorConfig::new(&version, &args.cluster)
        },
        args.certificates_namespace.clone(),
        Duration::from_secs(args.poll_seconds.max(1)),
        Duration::from_secs(args.resync_seconds),
    );
    let daemon = Daemon::build(shared, tuning, &mut registry, &readiness)?;
    let shutdown = CancellationToken::new();
    let server = Server::bind(args.listen, Arc::new(registry), readiness.clone()).await?;
    tracing::info!(addr = ?server.local_addr(), version = %version, "kvm-operator starting");
    let serving = tokio::spawn(server.serve(shutdown.clone()));
    // The election stops after the controllers, so that releasing the lease comes last.
    let election = replicas.start();
    let stop = shutdown.clone();
    tokio::spawn(async move {
        operatorkit::server::terminated().await;
        tracing::info!("stopping: the controllers finish their reconciles, then the leader Lease is released");
        stop.cancel();
    });
    daemon.run(shutdown.clone()).await?;
    shutdown.cancel();
    election.stop().await;
    let _ = serving.await;
    Ok(())
}

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
//! ([`node_lifecycle::WorkloadClients`]), and their metrics are in the operator's registry,
//! beside the original's status metrics computed from the cluster controller's cache at scrape
//! time ([`cluster_status_series`]: `statusresource_cluster_status{cluster_id,status}` and
//! `statusresource_cluster_creation_seconds{cluster_id}`), and its node Deployments per operator
//! version from the cluster controller's reads
//! (`kvm_operator_deployment_resource_version_bundle_version_total{major,minor,patch}`).
//! `/version` serves the operator's name and version.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use anyhow::Context;
use kube::runtime::reflector::Store;
use node_lifecycle::drain::{Drainer, DrainerSettings};
use operatorkit::Server;
use operatorkit::replicas::{self, ReplicaSettings, Replicas};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::metrics::MetricType;
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
    /// The cluster controller's KVMConfig cache, for the `statusresource_*` metrics, once the
    /// controller is built.
    clusters: Arc<OnceLock<Store<KVMConfig>>>,
}

/// One cluster's series of the `statusresource_*` metrics, as the original's status collector
/// named them.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterStatusSeries {
    /// The cluster id (the KVMConfig's name).
    pub cluster_id: String,
    /// Its lifecycle status now: the `True` condition of `status.cluster.conditions` set last
    /// (`Creating`, `Created`, `Updating`, `Updated`, `Deleting`).
    pub status: Option<String>,
    /// Seconds from the KVMConfig's creation to its `Created` condition, once created.
    pub creation_seconds: Option<f64>,
}

/// The `statusresource_*` series of `configs`. Pure.
pub fn cluster_status_series(configs: &[Arc<KVMConfig>]) -> Vec<ClusterStatusSeries> {
    use apis::cluster_status::{ClusterCondition, STATUS_TRUE};
    let mut out: Vec<ClusterStatusSeries> = configs
        .iter()
        .map(|config| {
            let cluster = config.status.as_ref().map(|s| &s.cluster);
            let status = cluster
                .and_then(|c| {
                    c.conditions.iter().filter(|c| c.status == STATUS_TRUE).max_by_key(|c| c.last_transition_time.0)
                })
                .map(|c| c.type_.clone());
            let created =
                cluster.and_then(|c| c.condition(ClusterCondition::Created)).map(|c| c.last_transition_time.0);
            let born = config.metadata.creation_timestamp.as_ref().map(|t| t.0);
            let creation_seconds = match (born, created) {
                (Some(born), Some(created)) => Some(created.duration_since(born).as_secs_f64().max(0.0)),
                _ => None,
            };
            ClusterStatusSeries {
                cluster_id: config.metadata.name.clone().unwrap_or_default(),
                status,
                creation_seconds,
            }
        })
        .collect();
    out.sort_by(|a, b| a.cluster_id.cmp(&b.cluster_id));
    out
}

/// Computes the `statusresource_*` gauges at scrape time from the cluster controller's cache,
/// and the node Deployments per operator version from what the cluster controller last read.
#[derive(Debug)]
struct ClusterStatusCollector {
    clusters: Arc<OnceLock<Store<KVMConfig>>>,
    deployments: Arc<crate::context::DeploymentVersions>,
}

/// `kvm_operator_deployment_resource_version_bundle_version_total{major,minor,patch}`: the
/// labels and count of each operator version that is a semantic version.
fn deployment_version_series(totals: &std::collections::BTreeMap<String, u64>) -> Vec<([String; 3], u64)> {
    totals
        .iter()
        .filter_map(|(version, count)| {
            let v = semver::Version::parse(version).ok()?;
            Some(([v.major.to_string(), v.minor.to_string(), v.patch.to_string()], *count))
        })
        .collect()
}

impl Collector for ClusterStatusCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let mut versions = encoder.encode_descriptor(
            "kvm_operator_deployment_resource_version_bundle_version_total",
            "Node Deployments per operator version (major, minor, patch), as the original named it.",
            None,
            MetricType::Gauge,
        )?;
        for ([major, minor, patch], count) in deployment_version_series(&self.deployments.totals()) {
            let labels = [("major", major.as_str()), ("minor", minor.as_str()), ("patch", patch.as_str())];
            versions.encode_family(&labels)?.encode_gauge(&(count as i64))?;
        }
        let Some(store) = self.clusters.get() else { return Ok(()) };
        let series = cluster_status_series(&store.state());
        let mut status = encoder.encode_descriptor(
            "statusresource_cluster_status",
            "The lifecycle status of each cluster (1 for its current one).",
            None,
            MetricType::Gauge,
        )?;
        for s in &series {
            if let Some(value) = &s.status {
                let labels = [("cluster_id", s.cluster_id.as_str()), ("status", value.as_str())];
                status.encode_family(&labels)?.encode_gauge(&1i64)?;
            }
        }
        let mut creation = encoder.encode_descriptor(
            "statusresource_cluster_creation_seconds",
            "Seconds from each cluster's KVMConfig creation to its Created condition.",
            None,
            MetricType::Gauge,
        )?;
        for s in &series {
            if let Some(seconds) = s.creation_seconds {
                creation.encode_family(&[("cluster_id", s.cluster_id.as_str())])?.encode_gauge(&seconds)?;
            }
        }
        Ok(())
    }
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
        let deployments = shared.deployment_versions.clone();
        let nodes = Arc::new(Nodes::new(shared, tuning.nodes, NodeMetrics::new(registry)));
        let clusters = Arc::new(OnceLock::new());
        registry.register_collector(Box::new(ClusterStatusCollector { clusters: clusters.clone(), deployments }));
        Ok(Daemon { nodes, drainer, metrics, readiness: readiness.clone(), run: tuning.run, clusters })
    }

    /// The node controllers' context (the shared context, the node watchers, the clients).
    pub fn nodes(&self) -> &Arc<Nodes> {
        &self.nodes
    }

    /// Run until `shutdown`: the controllers beside the drain executor.
    pub async fn run(self, shutdown: CancellationToken) -> anyhow::Result<()> {
        let Daemon { nodes, drainer, metrics, readiness, run, clusters } = self;
        let (controllers, ()) = tokio::join!(
            run_with_nodes(nodes, &metrics, &readiness, run, &clusters, shutdown.clone()),
            drainer.run(shutdown)
        );
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
    clusters: &OnceLock<Store<KVMConfig>>,
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
    let _ = clusters.set(controller.store());
    // Node pods carry the operator version as a label, not a Release: legacy routing.
    let version = semver::Version::parse(&shared.config.version)?;
    let pods = drainer::resource_set(nodes.clone(), set_name.clone(), requirement.clone());
    let drainer = Controller::<Pod>::builder(client.clone(), drainer::CONTROLLER)
        .operator(COMPONENT)
        .routing(operatorkit::Routing::Legacy { version })
        .label_selector(crate::controllers::pod_selector())
        // The drainer reads a node pod's metadata and status from the cache, and the pod
        // itself when it drains: the spec (the VM's containers, volumes and environment, most
        // of a node pod) is not kept for every node pod of every cluster.
        .trim_cached(|pod: &mut Pod| pod.spec = None)
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
    let server = Server::bind(args.listen, Arc::new(registry), readiness.clone()).await?.version(COMPONENT, &version);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The example cluster named `name`, created at 10:00, with `conditions` in its status.
    fn config(name: &str, conditions: serde_json::Value) -> Arc<KVMConfig> {
        let docs: Vec<serde_json::Value> =
            serde_saphyr::from_multiple(include_str!("../../../docs/examples/kvm-cluster.yaml")).expect("YAML");
        let mut doc = docs.into_iter().find(|d| d["kind"] == "KVMConfig").expect("a KVMConfig");
        doc["metadata"]["name"] = name.into();
        doc["metadata"]["creationTimestamp"] = "2026-03-01T10:00:00Z".into();
        doc["status"] = serde_json::json!({"cluster": {"conditions": conditions}});
        Arc::new(serde_json::from_value(doc).expect("KVMConfig"))
    }

    #[test]
    fn deployments_are_counted_per_operator_version_over_every_cluster_until_one_is_deleted() {
        let deployment = |version: Option<&str>| {
            let mut d = k8s_openapi::api::apps::v1::Deployment::default();
            if let Some(v) = version {
                let key = kvm_objects::names::keys::VERSION_BUNDLE_VERSION;
                d.metadata.annotations = Some([(key.to_string(), v.to_string())].into());
            }
            d
        };
        let versions = crate::context::DeploymentVersions::default();
        versions.record("aa001", &[deployment(Some("4.0.0")), deployment(Some("4.0.0")), deployment(None)]);
        versions.record("bb002", &[deployment(Some("4.0.0")), deployment(Some("3.9.1")), deployment(Some("dev"))]);
        let series = |v: &crate::context::DeploymentVersions| deployment_version_series(&v.totals());
        let labels = |l: [&str; 3]| l.map(String::from);
        assert_eq!(series(&versions), [(labels(["3", "9", "1"]), 1), (labels(["4", "0", "0"]), 3)]);
        // A cluster's next read replaces its count; a deleted cluster is no longer counted.
        versions.record("aa001", &[deployment(Some("4.0.0"))]);
        assert_eq!(series(&versions), [(labels(["3", "9", "1"]), 1), (labels(["4", "0", "0"]), 2)]);
        versions.forget("bb002");
        assert_eq!(series(&versions), [(labels(["4", "0", "0"]), 1)]);
    }

    #[test]
    fn the_status_series_name_each_clusters_current_status_and_how_long_creation_took() {
        let series = cluster_status_series(&[
            config(
                "zz002",
                serde_json::json!([
                    {"type": "Updating", "status": "True", "lastTransitionTime": "2026-03-02T09:00:00Z"},
                    {"type": "Created", "status": "True", "lastTransitionTime": "2026-03-01T10:12:30Z"}
                ]),
            ),
            config(
                "aa001",
                serde_json::json!([{"type": "Creating", "status": "True", "lastTransitionTime": "2026-03-01T10:00:05Z"}]),
            ),
            config("mm003", serde_json::json!([])),
        ]);
        assert_eq!(
            series,
            [
                ClusterStatusSeries {
                    cluster_id: "aa001".into(),
                    status: Some("Creating".into()),
                    creation_seconds: None
                },
                ClusterStatusSeries { cluster_id: "mm003".into(), status: None, creation_seconds: None },
                ClusterStatusSeries {
                    cluster_id: "zz002".into(),
                    status: Some("Updating".into()),
                    creation_seconds: Some(750.0)
                },
            ]
        );
    }
}

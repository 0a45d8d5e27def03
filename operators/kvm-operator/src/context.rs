//! [`Shared`]: what every controller shares — the management-cluster client, the operator's
//! settings, the workload-cluster clients and the memory of what was applied.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use node_lifecycle::clients::{ClientOptions, WorkloadClients};

use crate::config::OperatorConfig;

/// What every controller of one operator process shares.
#[derive(Clone)]
pub struct Shared {
    /// The management-cluster client.
    pub client: kube::Client,
    /// The operator's settings.
    pub config: OperatorConfig,
    /// The namespace of every cluster's certificate Secrets; `None`: each cluster's own.
    pub certificates_namespace: Option<String>,
    /// The requeue interval while the cluster converges (pods starting, teardown in progress).
    pub poll: Duration,
    /// Clients of the workload clusters, from their `<id>-kubeconfig` Secrets.
    pub workload_clients: WorkloadClients,
    /// What the cluster controller applied last, per cluster.
    pub applied: std::sync::Arc<AppliedCache>,
    /// The cluster controller's events (its lifecycle: `ClusterCreating`, `ClusterCreated`, …).
    pub events: operatorkit::Events,
    /// The time maintenance windows and node ages are judged by: the system's, which tests
    /// move ([`node_lifecycle::maintenance::Clock::set`]).
    pub clock: node_lifecycle::maintenance::Clock,
    /// The clusters whose rollout slot this process has given back since it last took one, so
    /// that a settled cluster does not read the slot Leases on every reconcile.
    pub released: std::sync::Arc<parking_lot::Mutex<std::collections::BTreeSet<String>>>,
    /// `kvm_operator_max_age_replacements_total`: node pods deleted because they were older
    /// than their cluster's `maxNodeAge` (registered by [`crate::daemon::Daemon::build`]).
    pub max_age_replacements: prometheus_client::metrics::counter::Counter,
    /// The node Deployments of each cluster per operator version, as the cluster controller
    /// last read them (served as the original's
    /// `kvm_operator_deployment_resource_version_bundle_version_total`).
    pub deployment_versions: std::sync::Arc<DeploymentVersions>,
}

/// How many node Deployments of each cluster carry each operator version (their
/// `giantswarm.io/version-bundle-version` annotation), as the cluster controller last listed
/// them.
///
/// The original set one gauge per version from whichever cluster it read last; here each
/// cluster's count is kept and the gauge is their sum, so the figure is the whole fleet's. A
/// cluster is forgotten when its deletion starts.
#[derive(Debug, Default)]
pub struct DeploymentVersions(parking_lot::Mutex<BTreeMap<String, BTreeMap<String, u64>>>);

impl DeploymentVersions {
    /// Record the node Deployments `deployments` of cluster `cluster`, replacing its last count.
    pub fn record(&self, cluster: &str, deployments: &[k8s_openapi::api::apps::v1::Deployment]) {
        let mut counts = BTreeMap::new();
        for deployment in deployments {
            let annotations = deployment.metadata.annotations.as_ref();
            if let Some(version) = annotations.and_then(|a| a.get(kvm_objects::names::keys::VERSION_BUNDLE_VERSION)) {
                *counts.entry(version.clone()).or_insert(0) += 1;
            }
        }
        self.0.lock().insert(cluster.to_string(), counts);
    }

    /// Stop counting cluster `cluster`.
    pub fn forget(&self, cluster: &str) {
        self.0.lock().remove(cluster);
    }

    /// The node Deployments of every recorded cluster, per operator version.
    pub fn totals(&self) -> BTreeMap<String, u64> {
        let mut totals = BTreeMap::new();
        for counts in self.0.lock().values() {
            for (version, count) in counts {
                *totals.entry(version.clone()).or_insert(0) += count;
            }
        }
        totals
    }
}

impl Shared {
    /// The shared state of a process: `recheck` is how long an applied set of objects is
    /// trusted without reading it back (the resync period).
    pub fn new(
        client: kube::Client,
        config: OperatorConfig,
        certificates_namespace: Option<String>,
        poll: Duration,
        recheck: Duration,
    ) -> Self {
        Self {
            workload_clients: WorkloadClients::new(client.clone(), ClientOptions::for_operator("kvm-operator")),
            events: operatorkit::Events::new(client.clone(), crate::config::CLUSTER_CONTROLLER),
            client,
            config,
            certificates_namespace,
            poll,
            applied: std::sync::Arc::new(AppliedCache::new(recheck)),
            clock: node_lifecycle::maintenance::Clock::system(),
            released: std::sync::Arc::default(),
            max_age_replacements: Default::default(),
            deployment_versions: Default::default(),
        }
    }

    /// Use `clients` to reach workload clusters (the drain executor's cache, so that the whole
    /// process holds one client per cluster).
    pub fn with_workload_clients(mut self, clients: WorkloadClients) -> Self {
        self.workload_clients = clients;
        self
    }
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("config", &self.config)
            .field("certificates_namespace", &self.certificates_namespace)
            .field("poll", &self.poll)
            .finish_non_exhaustive()
    }
}

/// Per cluster, the digest of the objects that were last applied in full, and when.
///
/// A cluster that waits (for its pods, its workload cluster, a roll) is reconciled every poll
/// interval. Reading back every one of its objects each time to find them unchanged costs a GET
/// per object and poll; instead, a set of objects whose desired digest was applied less than
/// `recheck` ago is trusted as it is. After `recheck` (the resync period), after a restart, or
/// when anything in the desired objects changes, the objects are read and applied again, so an
/// object deleted or edited by hand comes back within a resync.
#[derive(Debug)]
pub struct AppliedCache {
    recheck: Duration,
    entries: Mutex<HashMap<String, (String, Instant)>>,
}

impl AppliedCache {
    /// An empty cache that trusts an entry for `recheck`.
    pub fn new(recheck: Duration) -> Self {
        Self { recheck, entries: Mutex::default() }
    }

    fn entries(&self) -> std::sync::MutexGuard<'_, HashMap<String, (String, Instant)>> {
        self.entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether `digest` was applied for `key` less than `recheck` ago.
    pub fn fresh(&self, key: &str, digest: &str) -> bool {
        self.entries().get(key).is_some_and(|(d, at)| d == digest && at.elapsed() < self.recheck)
    }

    /// Remember that `digest` was applied for `key` now.
    pub fn record(&self, key: &str, digest: String) {
        self.entries().insert(key.to_string(), (digest, Instant::now()));
    }

    /// Forget `key`: its next reconcile reads and applies everything.
    pub fn forget(&self, key: &str) {
        self.entries().remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_is_trusted_for_its_digest_and_its_time_only() {
        let cache = AppliedCache::new(Duration::from_secs(60));
        assert!(!cache.fresh("org/x", "d1"));
        cache.record("org/x", "d1".into());
        assert!(cache.fresh("org/x", "d1"));
        assert!(!cache.fresh("org/x", "d2"), "another desired state is applied");
        assert!(!cache.fresh("org/y", "d1"));
        cache.forget("org/x");
        assert!(!cache.fresh("org/x", "d1"));
        let expired = AppliedCache::new(Duration::ZERO);
        expired.record("org/x", "d1".into());
        assert!(!expired.fresh("org/x", "d1"), "read back after the recheck period");
    }
}

//! How the replicas of one operator version share the work, as one choice for a daemon to make:
//! alone, under leader election (one replica writes, the others wait), or sharded (every
//! replica writes, each for its own share of the clusters; see [`crate::sharding`]).
//!
//! A daemon builds [`Replicas`] from its flags, takes the [`RunSettings`] and the write fences
//! from it, builds its controllers with [`ControllerBuilder::run_settings`], and runs them
//! through [`run_controllers`], which joins the sharding ring only once the controllers are
//! built (the sharder assigns the kinds they registered) and leaves it only once they have
//! stopped. [`Replicas::start`] runs the ordinary leader election, which sharding keeps too:
//! the leader is the sharder, and runs the work that stays single (the drain executor).
//!
//! [`ControllerBuilder::run_settings`]: crate::ControllerBuilder::run_settings

use std::future::Future;
use std::time::Duration;

use kube::Client;
use prometheus_client::registry::Registry;
use tokio_util::sync::CancellationToken;

use crate::RunSettings;
use crate::leader::{self, LeaderElectionConfig, LeaderElector, Leadership};
use crate::server::Readiness;
use crate::sharding::{self, KeyFn, Sharding, ShardingConfig, ShardingMode};

/// How the replicas share the work.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// One replica, no Lease: it always writes.
    Single,
    /// The replicas elect a leader on one Lease; only the leader writes.
    LeaderElection,
    /// Every replica holds its own shard Lease and reconciles its share of the objects; the
    /// leader of the ordinary Lease assigns them.
    Sharding(ShardingMode),
}

impl Mode {
    /// The mode the two flags of a daemon select: `--sharding` wins over
    /// `--leader-election`, since sharding elects the leader too.
    pub fn from_flags(leader_election: bool, sharding: Option<ShardingMode>) -> Self {
        match (sharding, leader_election) {
            (Some(mode), _) => Mode::Sharding(mode),
            (None, true) => Mode::LeaderElection,
            (None, false) => Mode::Single,
        }
    }
}

/// Where the Leases live and what they are called.
#[derive(Clone, Debug)]
pub struct ReplicaSettings {
    /// How the replicas share the work.
    pub mode: Mode,
    /// The namespace of every Lease (the operator's own).
    pub namespace: String,
    /// The leader Lease, e.g. [`leader::lease_name`] of the component and version.
    pub lease_name: String,
    /// The sharding ring: the replicas of one version share one (by default the leader
    /// Lease's name, so that versions side by side shard their own clusters).
    pub ring: String,
}

impl ReplicaSettings {
    /// `component`'s defaults for `version`: the Lease and ring `<component>-<version>`.
    pub fn new(mode: Mode, namespace: impl Into<String>, component: &str, version: &str) -> Self {
        let name = leader::lease_name(component, version);
        Self { mode, namespace: namespace.into(), lease_name: name.clone(), ring: name }
    }

    /// What a daemon's flags ask for: `--leader-election`, `--sharding` with `--sharding-mode`,
    /// the Leases' namespace and `--leader-election-name` (default `<component>-<version>`).
    /// The ring keeps the default name, so that it stays one per version.
    pub fn from_flags(
        leader_election: bool,
        sharding: Option<ShardingMode>,
        namespace: impl Into<String>,
        lease_name: Option<String>,
        component: &str,
        version: &str,
    ) -> Self {
        let defaults = Self::new(Mode::from_flags(leader_election, sharding), namespace, component, version);
        Self { lease_name: lease_name.unwrap_or(defaults.lease_name.clone()), ..defaults }
    }
}

/// The Leases of one replica, built and not yet running.
pub struct Replicas {
    mode: Mode,
    elector: Option<LeaderElector>,
    sharding: Option<Sharding>,
    leader: Leadership,
}

impl std::fmt::Debug for Replicas {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replicas").field("mode", &self.mode).field("sharding", &self.sharding).finish_non_exhaustive()
    }
}

/// Errors building [`Replicas`].
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The leader Lease's settings are invalid.
    #[error("leader election: {0}")]
    Leader(#[from] leader::Error),
    /// The shard's settings are invalid.
    #[error("sharding: {0}")]
    Sharding(#[from] sharding::Error),
}

impl Replicas {
    /// The Leases `settings` asks for. Sharded objects are grouped by `key` (usually
    /// [`sharding::cluster_key`]). Every Lease is released on shutdown: the controllers have
    /// stopped by then, so another replica may take over at once.
    pub fn new(client: Client, settings: &ReplicaSettings, key: KeyFn) -> Result<Self, Error> {
        let elector = match settings.mode {
            Mode::Single => None,
            Mode::LeaderElection | Mode::Sharding(_) => {
                let config = LeaderElectionConfig {
                    release_on_cancel: true,
                    ..LeaderElectionConfig::new(&settings.namespace, &settings.lease_name)
                };
                Some(LeaderElector::new(client.clone(), config)?)
            }
        };
        let sharding = match settings.mode {
            Mode::Sharding(mode) => {
                let config = ShardingConfig { mode, ..ShardingConfig::new(&settings.namespace, &settings.ring) };
                Some(Sharding::new(client, config, key)?)
            }
            Mode::Single | Mode::LeaderElection => None,
        };
        let leader = elector.as_ref().map_or_else(Leadership::always, LeaderElector::leadership);
        Ok(Self { mode: settings.mode, elector, sharding, leader })
    }

    /// How the replicas share the work.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The ordinary leader: gate the work that stays on one replica with it (the drain
    /// executor). [`Leadership::always`] for a single replica.
    pub fn leader(&self) -> Leadership {
        self.leader.clone()
    }

    /// The fence of the controllers' writes: the shard Lease when sharded, else the leader.
    /// Gate the clients the controllers write through with it.
    pub fn writes(&self) -> Leadership {
        self.sharding.as_ref().map_or_else(|| self.leader.clone(), Sharding::held)
    }

    /// This replica's shard, when sharded.
    pub fn sharding(&self) -> Option<&Sharding> {
        self.sharding.as_ref()
    }

    /// The settings the controllers run with.
    pub fn run_settings(&self, concurrency: u16, resync: Duration) -> RunSettings {
        RunSettings { concurrency, resync, leadership: self.leader.clone(), sharding: self.sharding.clone() }
    }

    /// Register the Leases' metrics, and (when sharded) the readiness check that turns ready
    /// once this replica's shard is in the ring.
    pub fn register(&self, registry: &mut Registry, readiness: &Readiness) {
        if let Some(elector) = &self.elector {
            elector.register_metrics(registry);
        }
        if let Some(sharding) = &self.sharding {
            sharding.register_metrics(registry);
            sharding.readiness(readiness);
        }
    }

    /// Start competing for the leader Lease. The shard Lease is joined by
    /// [`run_controllers`]. Stop with [`Election::stop`] after the controllers.
    pub fn start(mut self) -> Election {
        let stop = CancellationToken::new();
        let task = self.elector.take().map(|elector| tokio::spawn(elector.run(stop.clone())));
        Election { stop, task }
    }
}

/// The running leader election of [`Replicas::start`].
#[derive(Debug)]
pub struct Election {
    stop: CancellationToken,
    task: Option<tokio::task::JoinHandle<Result<(), leader::Error>>>,
}

impl Election {
    /// Release the leader Lease (if held) and wait for the election to end.
    pub async fn stop(self) {
        self.stop.cancel();
        if let Some(task) = self.task {
            match task.await {
                Ok(Ok(())) => {}
                Ok(Err(error)) => tracing::warn!(%error, "leader election ended with an error"),
                Err(error) => tracing::warn!(%error, "leader election task failed"),
            }
        }
    }
}

/// Run `controllers` (already built, with [`ControllerBuilder::run_settings`] of `settings`) to
/// the end. When `settings` shards, this replica joins the ring once they are built and leaves
/// it (releasing its shard Lease) only after they have stopped, so that no object moves to
/// another replica while one of this replica's reconciles still runs.
///
/// [`ControllerBuilder::run_settings`]: crate::ControllerBuilder::run_settings
pub async fn run_controllers<F: Future>(settings: &RunSettings, controllers: F) -> F::Output {
    let Some(sharding) = settings.sharding.clone() else {
        return controllers.await;
    };
    let stop = CancellationToken::new();
    let ring = tokio::spawn(sharding.run(settings.leadership.clone(), stop.clone()));
    let output = controllers.await;
    stop.cancel();
    match ring.await {
        Ok(Ok(())) => {}
        Ok(Err(error)) => tracing::warn!(%error, "sharding ended with an error"),
        Err(error) => tracing::warn!(%error, "sharding task failed"),
    }
    output
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sharding_wins_over_leader_election_and_both_off_is_single() {
        assert_eq!(Mode::from_flags(true, None), Mode::LeaderElection);
        assert_eq!(Mode::from_flags(false, None), Mode::Single);
        assert_eq!(Mode::from_flags(false, Some(ShardingMode::Labels)), Mode::Sharding(ShardingMode::Labels));
        assert_eq!(
            Mode::from_flags(true, Some(ShardingMode::NamespaceRanges)),
            Mode::Sharding(ShardingMode::NamespaceRanges)
        );
    }

    #[test]
    fn a_version_names_its_lease_and_ring_alike() {
        let s = ReplicaSettings::new(Mode::Single, "giantswarm", "aws-operator", "16.2.0+dev");
        assert_eq!(s.lease_name, "aws-operator-16.2.0-dev");
        assert_eq!(s.ring, s.lease_name);
    }
}

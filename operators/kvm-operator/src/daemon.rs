//! The wiring: the [`Shared`] context and the controllers that run on it.
//!
//! The cluster controller routes a KVMConfig by its `release.giantswarm.io/version` label: the
//! Release `v<version>` names the `kvm-operator` component version, and this process handles
//! exactly its own version, so several operator versions can run side by side. KVMConfigs whose
//! Release does not exist or has no `kvm-operator` component get a `ReleaseResolved=False`
//! condition.
//!
//! Not built yet: `serve` (the `daemon` command: flags, leader election, the `/metrics`
//! `/healthz` `/readyz` server, the drain executor, signals) and the deleter, drainer and
//! unhealthy-node-terminator controllers.

use std::sync::Arc;

use apis::kvm::KVMConfig;
use operatorkit::status::StatusReport;
use operatorkit::{Controller, Metrics, Readiness, RunSettings};
use semver::VersionReq;
use tokio_util::sync::CancellationToken;

use crate::context::Shared;
use crate::controllers::cluster;

/// The Release component this operator is.
pub const COMPONENT: &str = "kvm-operator";

/// Build and run the controllers until `shutdown`.
pub async fn run(
    shared: Arc<Shared>,
    metrics: &Metrics,
    readiness: &Readiness,
    settings: RunSettings,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let client = shared.client.clone();
    let requirement = VersionReq::parse(&format!("={}", shared.config.version))?;
    let set = cluster::resource_set(shared.clone(), format!("v{}", shared.config.version), requirement);
    let controller = Controller::<KVMConfig>::builder(client.clone(), cluster::CONTROLLER)
        .operator(COMPONENT)
        .resource_set(set)
        .metrics(metrics)
        .readiness(readiness)
        .status_hook(StatusReport::new(client))
        .concurrency(settings.concurrency)
        .resync(settings.resync)
        .leadership(settings.leadership.clone())
        .build()?;
    controller.run(shutdown).await;
    Ok(())
}

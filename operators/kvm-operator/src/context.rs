//! [`Shared`]: what every controller shares — the management-cluster client and the operator's
//! settings.

use std::time::Duration;

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

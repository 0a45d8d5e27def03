//! The disruption controller (`pkg/controller/disruption`): keeps the status of
//! PodDisruptionBudgets (`currentHealthy`, `desiredHealthy`, `expectedPods`,
//! `disruptionsAllowed`, `disruptedPods`, `observedGeneration` and the `DisruptionAllowed`
//! condition) current whenever a budget, a pod of its namespace, or a controller of those
//! pods changes, and again when an entry of `disruptedPods` expires.
//!
//! The arithmetic lives in [`crate::api::eviction`], where the eviction subresource uses the
//! same figures under the same lock.

use super::runtime::{Runtime, Work};
use crate::store::ObjKey;

impl Runtime {
    /// Recompute one budget's status.
    pub(super) fn sync_budget(&mut self, key: &ObjKey) {
        match self.api.sync_disruption_status(&key.0, &key.1) {
            Ok(Some(recheck)) => self.at(recheck, Work::Budget(key.clone())),
            Ok(None) => {}
            Err(e) if e.code == 404 => {}
            Err(e) => self.retry(Work::Budget(key.clone()), &e),
        }
    }
}

//! What happens after a resource ran: the explicit replacement of operatorkit's context flags.
//!
//! The Go library signalled control flow through close-once channels stored in the request
//! context (`reconciliationcanceledcontext`, `resourcecanceledcontext`, `finalizerskeptcontext`).
//! Here every `ensure_created` / `ensure_deleted` returns an [`Outcome`]: a [`Flow`] plus two
//! flags, and the controller folds the outcomes of one reconcile into its decision.
//!
//! | Flow | Update path | Delete path |
//! | --- | --- | --- |
//! | [`Flow::Continue`] | next resource | next resource |
//! | [`Flow::CancelResource`] | next resource (the CRUD adapter skips this resource's remaining steps) | next resource; the finalizer may still be removed |
//! | [`Flow::CancelReconciliation`] | no further resource runs; success | no further resource runs; **the finalizer is kept** (operatorkit v3+ behaviour) |
//!
//! [`Outcome::keep_finalizer`] keeps the finalizer at the end of a delete path even though every
//! resource succeeded: the deletion is replayed later (cloud deletion still in progress,
//! dependants still present). It has no effect on the update path.
//!
//! [`Outcome::requeue_after`] asks for the next reconcile of this object no later than the given
//! duration (the controller otherwise requeues after its resync period). The shortest request of
//! one reconcile wins.

use std::time::Duration;

/// How the pipeline continues after a resource returned.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Flow {
    /// Run the next resource.
    #[default]
    Continue,
    /// Stop this resource (the CRUD adapter skips its remaining steps) and run the next one.
    CancelResource,
    /// Stop the whole reconcile successfully: no further resource runs. During deletion the
    /// finalizer is kept, so the deletion is replayed later.
    CancelReconciliation,
}

/// The result of one `ensure_created` / `ensure_deleted` call.
#[must_use = "an Outcome decides whether the following resources run"]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Outcome {
    flow: Flow,
    keep_finalizer: bool,
    requeue_after: Option<Duration>,
}

impl Outcome {
    /// Continue with the next resource.
    pub const fn proceed() -> Self {
        Self { flow: Flow::Continue, keep_finalizer: false, requeue_after: None }
    }

    /// Stop this resource and continue with the next one.
    pub const fn cancel_resource() -> Self {
        Self { flow: Flow::CancelResource, keep_finalizer: false, requeue_after: None }
    }

    /// Stop the reconcile here, successfully. During deletion this keeps the finalizer.
    pub const fn cancel_reconciliation() -> Self {
        Self { flow: Flow::CancelReconciliation, keep_finalizer: false, requeue_after: None }
    }

    /// Also keep the finalizer at the end of the delete path, so the deletion is replayed.
    pub const fn keep_finalizer(mut self) -> Self {
        self.keep_finalizer = true;
        self
    }

    /// Also reconcile this object again no later than `after`.
    pub const fn requeue_after(mut self, after: Duration) -> Self {
        self.requeue_after = Some(after);
        self
    }

    /// The flow.
    pub const fn flow(&self) -> Flow {
        self.flow
    }

    /// Whether the finalizer must be kept.
    pub const fn keeps_finalizer(&self) -> bool {
        self.keep_finalizer
    }

    /// The requested requeue, if any.
    pub const fn requeue(&self) -> Option<Duration> {
        self.requeue_after
    }

    /// Fold a later outcome of the same resource (CRUD steps) or reconcile into this one: the
    /// stronger flow wins, the flags accumulate and the shortest requeue wins.
    pub fn merge(self, later: Outcome) -> Outcome {
        let flow = match (self.flow, later.flow) {
            (Flow::CancelReconciliation, _) | (_, Flow::CancelReconciliation) => Flow::CancelReconciliation,
            (Flow::CancelResource, _) | (_, Flow::CancelResource) => Flow::CancelResource,
            _ => Flow::Continue,
        };
        Outcome {
            flow,
            keep_finalizer: self.keep_finalizer || later.keep_finalizer,
            requeue_after: shortest(self.requeue_after, later.requeue_after),
        }
    }
}

/// The shorter of two optional durations.
pub(crate) fn shortest(a: Option<Duration>, b: Option<Duration>) -> Option<Duration> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builders_set_flags() {
        let o = Outcome::cancel_reconciliation().keep_finalizer().requeue_after(Duration::from_secs(3));
        assert_eq!(o.flow(), Flow::CancelReconciliation);
        assert!(o.keeps_finalizer());
        assert_eq!(o.requeue(), Some(Duration::from_secs(3)));
        assert_eq!(Outcome::default(), Outcome::proceed());
    }

    #[test]
    fn merge_keeps_the_strongest_flow_and_the_shortest_requeue() {
        let a = Outcome::proceed().requeue_after(Duration::from_secs(10));
        let b = Outcome::cancel_resource().requeue_after(Duration::from_secs(2));
        let m = a.merge(b);
        assert_eq!(m.flow(), Flow::CancelResource);
        assert_eq!(m.requeue(), Some(Duration::from_secs(2)));
        assert!(!m.keeps_finalizer());
        let m = m.merge(Outcome::cancel_reconciliation().keep_finalizer());
        assert_eq!(m.flow(), Flow::CancelReconciliation);
        assert!(m.keeps_finalizer());
        assert_eq!(Outcome::cancel_reconciliation().merge(Outcome::proceed()).flow(), Flow::CancelReconciliation);
    }
}

//! Leader election on a coordination.k8s.io Lease.
//!
//! [`Leadership`] is the read side that controllers consult before every write: a replica that
//! is not (or no longer) the leader keeps its caches warm but writes nothing.

use tokio::sync::watch;

/// Whether this replica currently holds the lease. Cheap to clone; every clone sees changes at
/// once.
#[derive(Clone, Debug)]
pub struct Leadership {
    rx: watch::Receiver<bool>,
}

impl Leadership {
    /// A replica that is always the leader: the default when leader election is off.
    pub fn always() -> Self {
        // The sender is dropped at once; the receiver keeps the last value forever.
        let (_tx, rx) = watch::channel(true);
        Self { rx }
    }

    /// Wrap the receiving end of a leadership channel (`true` = leader).
    pub fn from_receiver(rx: watch::Receiver<bool>) -> Self {
        Self { rx }
    }

    /// Whether this replica may write now.
    pub fn is_leader(&self) -> bool {
        *self.rx.borrow()
    }

    /// Wait until this replica is the leader. Returns at once if it already is. If the
    /// elector stops while this replica is not the leader, this never returns.
    pub async fn acquired(&mut self) {
        if self.rx.wait_for(|leader| *leader).await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    /// Wait until this replica loses leadership. If the elector stops while this replica leads
    /// (the `always` case), this never returns.
    pub async fn lost(&mut self) {
        if self.rx.wait_for(|leader| !*leader).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

//! The status hook: how the controller reports routing problems in the object's status.
//!
//! The shape of a status is the operator's (a `metav1.Condition` list, Giant Swarm's
//! `StatusCluster`, ...), so the controller does not write it. When an object cannot be routed
//! (no release label, no such Release, no component of this operator in it), the controller
//! emits a Warning event and calls [`StatusHook::unroutable`], which typically sets a condition
//! such as `ReleaseResolved=False` with the problem's reason and message. When routing succeeds
//! again it calls [`StatusHook::routed`], which can clear that condition. Both run only on the
//! leader; implementations should skip writes that would change nothing (the object passed in is
//! the cached one, so comparing against its current status is free).

use futures::future::BoxFuture;
use semver::Version;

use crate::error::ResourceError;
use crate::router::Unroutable;

/// Reports routing problems in the status of objects of kind `K`.
pub trait StatusHook<K>: Send + Sync {
    /// The object cannot be routed; record `problem` in its status.
    fn unroutable<'a>(&'a self, obj: &'a K, problem: &'a Unroutable) -> BoxFuture<'a, Result<(), ResourceError>>;

    /// The object was routed to `set` for component version `version`; clear a problem recorded
    /// earlier, if any. Default: nothing.
    fn routed<'a>(
        &'a self,
        obj: &'a K,
        set: &'a str,
        version: &'a Version,
    ) -> BoxFuture<'a, Result<(), ResourceError>> {
        let _ = (obj, set, version);
        Box::pin(async { Ok(()) })
    }
}

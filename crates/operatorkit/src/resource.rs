//! The [`Resource`] trait: one step of a reconcile.
//!
//! A *resource* in operatorkit's sense is not a Kubernetes object but one idempotent step of the
//! reconcile of a watched object `K`: "ensure the CloudFormation stack exists", "ensure the
//! Endpoints list the node IPs". The resources of a [`ResourceSet`](crate::ResourceSet) run
//! strictly one after another, in order, and share a typed per-reconcile state `S` that the set's
//! initialiser builds at the start of every reconcile (this replaces the Go library's untyped
//! `InitCtx` plus `controllercontext.FromContext`).
//!
//! * `ensure_created` runs for objects that are not being deleted: on create, on every change
//!   the controller's predicate lets through, on related changes (Release) and on every resync.
//!   It must be idempotent and cheap when nothing changed.
//! * `ensure_deleted` runs while the object has a `deletionTimestamp` and still carries this
//!   controller's finalizer. It must be idempotent: a crash after it returned but before the
//!   finalizer was removed runs it again.
//!
//! Both return an [`Outcome`] (continue, cancel this resource, cancel the reconcile; keep the
//! finalizer; requeue after a duration) or a [`ResourceError`], which stops the reconcile: on the
//! delete path the finalizer then stays and the deletion is retried with backoff.
//!
//! Implement the trait with `async fn`; the returned futures must be `Send` because reconciles
//! run on a multi-threaded runtime.

use std::future::Future;

use futures::future::BoxFuture;

use crate::error::ResourceError;
use crate::outcome::Outcome;

/// The result of a resource call.
pub type Result<T, E = ResourceError> = std::result::Result<T, E>;

/// One step of the reconcile of objects of kind `K`, sharing the per-reconcile state `S` with
/// the other resources of its set.
///
/// ```
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use operatorkit::{Outcome, Resource, resource};
///
/// /// Counts how many resources ran, in a state shared by one reconcile.
/// struct Count;
///
/// impl Resource<ConfigMap, u32> for Count {
///     fn name(&self) -> &str {
///         "count"
///     }
///     async fn ensure_created(&self, state: &mut u32, _obj: &ConfigMap) -> resource::Result<Outcome> {
///         *state += 1;
///         Ok(Outcome::proceed())
///     }
///     async fn ensure_deleted(&self, _state: &mut u32, _obj: &ConfigMap) -> resource::Result<Outcome> {
///         Ok(Outcome::proceed())
///     }
/// }
/// ```
pub trait Resource<K, S>: Send + Sync {
    /// The resource's name: the `resource` log key and metric label.
    fn name(&self) -> &str;

    /// Converge the world towards the object (the object is not being deleted).
    fn ensure_created(&self, state: &mut S, obj: &K) -> impl Future<Output = Result<Outcome>> + Send;

    /// Clean up what this resource created (the object is being deleted).
    fn ensure_deleted(&self, state: &mut S, obj: &K) -> impl Future<Output = Result<Outcome>> + Send;
}

/// The object-safe form of [`Resource`], so that one set can hold resources of different types.
pub(crate) trait DynResource<K, S>: Send + Sync {
    fn name(&self) -> &str;
    fn ensure_created<'a>(&'a self, state: &'a mut S, obj: &'a K) -> BoxFuture<'a, Result<Outcome>>;
    fn ensure_deleted<'a>(&'a self, state: &'a mut S, obj: &'a K) -> BoxFuture<'a, Result<Outcome>>;
}

impl<K, S, R> DynResource<K, S> for R
where
    R: Resource<K, S>,
    K: Sync,
    S: Send,
{
    fn name(&self) -> &str {
        Resource::name(self)
    }

    fn ensure_created<'a>(&'a self, state: &'a mut S, obj: &'a K) -> BoxFuture<'a, Result<Outcome>> {
        Box::pin(Resource::ensure_created(self, state, obj))
    }

    fn ensure_deleted<'a>(&'a self, state: &'a mut S, obj: &'a K) -> BoxFuture<'a, Result<Outcome>> {
        Box::pin(Resource::ensure_deleted(self, state, obj))
    }
}

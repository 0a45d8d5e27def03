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
//!
//! When a reconcile fails, the controller calls [`StatusHook::failed`] with the error and the
//! number of consecutive failures of that object, so that an operator can show a failure that
//! persists (denied credentials, throttling beyond the client's retries) in the status without
//! making it flap on one transient error.
//!
//! [`ReleaseCondition`] is a ready-made hook for kinds with `metav1.Condition`s in their status.

use std::marker::PhantomData;

use futures::future::BoxFuture;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use semver::Version;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::conditions::{ConditionStatus, DesiredCondition, set_status_condition};
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

    /// A reconcile of `obj` failed with an error of `kind` described by `message`, the
    /// `consecutive`-th failure in a row (a successful reconcile resets the count). Called on
    /// the leader after the Warning event. Default: nothing.
    fn failed<'a>(
        &'a self,
        obj: &'a K,
        kind: &'a str,
        message: &'a str,
        consecutive: u32,
    ) -> BoxFuture<'a, Result<(), ResourceError>> {
        let _ = (obj, kind, message, consecutive);
        Box::pin(async { Ok(()) })
    }
}

/// The condition type [`ReleaseCondition`] writes.
pub const RELEASE_RESOLVED: &str = "ReleaseResolved";

/// A ready-made [`StatusHook`] for kinds whose status holds upstream `metav1.Condition`s at
/// `.status.conditions` and that have a status subresource: it keeps a `ReleaseResolved`
/// condition, `False` with the routing problem's reason and message while the object cannot be
/// routed, `True` naming the resource set once it can.
///
/// The condition is computed with [`set_status_condition`](crate::conditions::set_status_condition)
/// against the cached object, so an unchanged condition costs no request. The write is a merge
/// patch of the status subresource that carries the cached `resourceVersion`: if the object
/// changed meanwhile the API server answers 409 and the next reconcile tries again, so a
/// concurrent writer's conditions are never overwritten.
pub struct ReleaseCondition<K> {
    client: kube::Client,
    _kind: PhantomData<fn() -> K>,
}

impl<K> ReleaseCondition<K> {
    /// A hook writing through `client`.
    pub fn new(client: kube::Client) -> Self {
        Self { client, _kind: PhantomData }
    }
}

impl<K> std::fmt::Debug for ReleaseCondition<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReleaseCondition").finish_non_exhaustive()
    }
}

impl<K> ReleaseCondition<K>
where
    K: kube::Resource<DynamicType = ()>
        + Serialize
        + DeserializeOwned
        + Clone
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    async fn write(&self, obj: &K, desired: DesiredCondition) -> Result<(), ResourceError> {
        let meta = obj.meta();
        let (Some(_), Some(resource_version)) = (meta.name.as_deref(), meta.resource_version.as_deref()) else {
            return Ok(());
        };
        let value = serde_json::to_value(obj).map_err(|e| ResourceError::msg("StatusEncoding", e.to_string()))?;
        let mut conditions: Vec<Condition> = match value.pointer("/status/conditions") {
            Some(list) => serde_json::from_value(list.clone()).map_err(|e| {
                ResourceError::msg("StatusDecoding", format!("status.conditions is not a list of conditions: {e}"))
                    .permanent()
            })?,
            None => Vec::new(),
        };
        let desired = desired.observed_generation(meta.generation);
        if !set_status_condition(&mut conditions, desired, jiff::Timestamp::now()) {
            return Ok(());
        }
        let patch = serde_json::json!({
            "metadata": {"resourceVersion": resource_version},
            "status": {"conditions": conditions},
        });
        crate::finalizer::send_patch::<K>(&self.client, meta, Some("status"), "application/merge-patch+json", &patch)
            .await?;
        Ok(())
    }
}

impl<K> StatusHook<K> for ReleaseCondition<K>
where
    K: kube::Resource<DynamicType = ()>
        + Serialize
        + DeserializeOwned
        + Clone
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    fn unroutable<'a>(&'a self, obj: &'a K, problem: &'a Unroutable) -> BoxFuture<'a, Result<(), ResourceError>> {
        Box::pin(async move {
            let desired = DesiredCondition::new(RELEASE_RESOLVED, ConditionStatus::False, problem.reason())
                .message(problem.to_string());
            self.write(obj, desired).await
        })
    }

    fn routed<'a>(
        &'a self,
        obj: &'a K,
        set: &'a str,
        version: &'a Version,
    ) -> BoxFuture<'a, Result<(), ResourceError>> {
        Box::pin(async move {
            let desired = DesiredCondition::new(RELEASE_RESOLVED, ConditionStatus::True, "ResourceSetSelected")
                .message(format!("resource set {set} handles this object (component version {version})"));
            self.write(obj, desired).await
        })
    }
}

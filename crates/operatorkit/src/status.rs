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
//!
//! # The status lifecycle both operators share
//!
//! The rest of this module is what an operator's controllers do with such a status: `Ready` and
//! the other conditions ([`set_condition`]), status writes that cost nothing when nothing changed
//! ([`write_status`]), invalid input recorded as `Ready=False` ([`reject`], with
//! [`InvalidInput`](crate::error::InvalidInput) as the error), and [`StatusReport`], the hook
//! that shows a persistent reconcile error in `Ready`. They work on any namespaced kind whose
//! status has conditions ([`WithConditions`], [`WithStatus`]); those two traits are defined in
//! `apis::status` and implemented there for every kind, since Rust allows a trait's
//! implementation only in the crate of the trait or of the type.

use std::marker::PhantomData;

use futures::future::BoxFuture;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use semver::Version;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::conditions::{ConditionStatus, DesiredCondition, set_status_condition};
use crate::error::ResourceError;
use crate::router::{Unroutable, VersionFrom};
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};

/// Reports routing problems in the status of objects of kind `K`.
pub trait StatusHook<K>: Send + Sync {
    /// The object cannot be routed; record `problem` in its status.
    fn unroutable<'a>(&'a self, obj: &'a K, problem: &'a Unroutable) -> BoxFuture<'a, Result<(), ResourceError>>;

    /// The object was routed to `set` for component version `version`, read from `from`;
    /// clear a problem recorded earlier, if any. Default: nothing.
    fn routed<'a>(
        &'a self,
        obj: &'a K,
        set: &'a str,
        version: &'a Version,
        from: &'a VersionFrom,
    ) -> BoxFuture<'a, Result<(), ResourceError>> {
        let _ = (obj, set, version, from);
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
/// The condition is computed with [`set_status_condition`]
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
        from: &'a VersionFrom,
    ) -> BoxFuture<'a, Result<(), ResourceError>> {
        Box::pin(async move {
            let desired = DesiredCondition::new(RELEASE_RESOLVED, ConditionStatus::True, "ResourceSetSelected")
                .message(format!("resource set {set} handles this object (component version {version}, from {from})"));
            self.write(obj, desired).await
        })
    }
}

// ---------------------------------------------------------------------------------------------
// The status lifecycle of an operator's kinds
// ---------------------------------------------------------------------------------------------

/// The `Ready` condition type.
pub const READY: &str = "Ready";

/// `Kind namespace/name` of an object.
pub fn describe<K: kube::Resource<DynamicType = ()>>(obj: &K) -> String {
    format!("{} {}/{}", K::kind(&()), obj.namespace().unwrap_or_default(), obj.name_any())
}

/// Set a condition in a list; `true` when it changed.
pub fn set_condition(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: bool,
    reason: &str,
    message: impl Into<String>,
    generation: Option<i64>,
) -> bool {
    set_status_condition(
        conditions,
        DesiredCondition::new(type_, ConditionStatus::from(status), reason)
            .message(message)
            .observed_generation(generation),
        jiff::Timestamp::now(),
    )
}

pub use apis::status::{NamespacedObject, WithConditions, WithStatus};

/// Set `Ready=False` with `reason` and `message` on the object's current status, write it, and
/// return the status written.
pub async fn mark_not_ready<K, St>(
    client: &kube::Client,
    obj: &K,
    current: Option<&St>,
    reason: &str,
    message: String,
) -> Result<St, kube::Error>
where
    K: NamespacedObject,
    St: WithConditions,
{
    let mut status = current.cloned().unwrap_or_default();
    set_condition(status.conditions_mut(), READY, false, reason, message, obj.meta().generation);
    write_status(client, obj, current, &status).await?;
    Ok(status)
}

/// Record invalid input as `Ready=False` (reason = the error's kind) and hand the error back: it
/// becomes the Warning event. A failed status write is logged, never returned, so the input error
/// is what the user sees.
pub async fn reject<K, St>(
    client: &kube::Client,
    obj: &K,
    current: Option<&St>,
    err: ResourceError,
) -> (St, ResourceError)
where
    K: NamespacedObject,
    St: WithConditions,
{
    match mark_not_ready(client, obj, current, err.kind(), err.inner().to_string()).await {
        Ok(status) => (status, err),
        Err(e) => {
            tracing::warn!(error = %e, object = describe(obj), "writing the status of an invalid object failed");
            (current.cloned().unwrap_or_default(), err)
        }
    }
}

/// Merge-patch `.status` of an object when it differs from what the object carries.
pub async fn write_status<K, St>(
    client: &kube::Client,
    obj: &K,
    current: Option<&St>,
    desired: &St,
) -> Result<(), kube::Error>
where
    K: NamespacedObject,
    St: Serialize + PartialEq,
{
    if current == Some(desired) {
        return Ok(());
    }
    let api: Api<K> = Api::namespaced(client.clone(), &obj.namespace().unwrap_or_default());
    let patch = serde_json::json!({ "status": desired });
    api.patch_status(&obj.name_any(), &PatchParams::default(), &Patch::Merge(&patch)).await?;
    Ok(())
}

/// How many failed reconciles in a row make an error persistent enough for `Ready`: one
/// transient failure (a throttled call, a dropped connection) must not make `Ready` flap, an
/// error that stays (a denied AssumeRole, throttling beyond the client's retries, a missing AMI)
/// must show. With operatorkit's backoff and the AWS client's own retries, five attempts span
/// from a few seconds to minutes.
pub const PERSISTENT_AFTER: u32 = 5;

/// The operator's status hook: routing problems go to `ReleaseResolved` (operatorkit's
/// [`ReleaseCondition`]); an error that fails [`PERSISTENT_AFTER`] reconciles in a row goes to
/// `Ready=False`, with the error's kind as the reason and its message. The next reconcile that
/// gets through writes `Ready` from what it finds again.
pub struct StatusReport<K> {
    client: kube::Client,
    release: ReleaseCondition<K>,
}

impl<K> StatusReport<K> {
    /// The hook of one controller, writing through `client`.
    pub fn new(client: kube::Client) -> Self {
        let release = ReleaseCondition::new(client.clone());
        Self { client, release }
    }
}

impl<K> std::fmt::Debug for StatusReport<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatusReport").finish_non_exhaustive()
    }
}

/// Whether the `consecutive`-th failure in a row is reported in `Ready`.
pub fn persistent(consecutive: u32) -> bool {
    consecutive >= PERSISTENT_AFTER
}

impl<K: WithStatus> StatusHook<K> for StatusReport<K> {
    fn unroutable<'a>(&'a self, obj: &'a K, problem: &'a Unroutable) -> BoxFuture<'a, Result<(), ResourceError>> {
        self.release.unroutable(obj, problem)
    }

    fn routed<'a>(
        &'a self,
        obj: &'a K,
        set: &'a str,
        version: &'a semver::Version,
        from: &'a VersionFrom,
    ) -> BoxFuture<'a, Result<(), ResourceError>> {
        self.release.routed(obj, set, version, from)
    }

    fn failed<'a>(
        &'a self,
        obj: &'a K,
        kind: &'a str,
        message: &'a str,
        consecutive: u32,
    ) -> BoxFuture<'a, Result<(), ResourceError>> {
        Box::pin(async move {
            if persistent(consecutive) {
                mark_not_ready(&self.client, obj, obj.status(), kind, message.to_string()).await?;
            }
            Ok(())
        })
    }
}

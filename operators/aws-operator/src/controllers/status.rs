//! The status lifecycle every controller shares: `Ready` and the other `metav1.Condition`s,
//! status writes that cost nothing when nothing changed, invalid input recorded as
//! `Ready=False`, and the status hook that shows a persistent reconcile error in `Ready`.
//!
//! Nothing here names an AWS type: the functions take a Kubernetes client and work on any
//! namespaced kind whose status has conditions ([`WithConditions`], [`WithStatus`]), so that
//! kvm-operator can take this module as it is. The implementations for this operator's kinds
//! are in [`super`]: they stay with the operator (or go to the kinds' crate) when this module
//! moves, since Rust allows a trait's implementation for a type only in the crate of one of
//! the two.

use futures::future::BoxFuture;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use operatorkit::conditions::{ConditionStatus, DesiredCondition, set_status_condition};
use operatorkit::{ReleaseCondition, ResourceError, StatusHook, Unroutable};
use serde::Serialize;
use serde::de::DeserializeOwned;

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

/// The objects the controllers write status, annotations and finalizers on: namespaced kinds
/// that deserialize.
pub trait NamespacedObject:
    kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
    + Clone
    + DeserializeOwned
    + std::fmt::Debug
{
}

impl<T> NamespacedObject for T where
    T: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
{
}

/// A status with upstream `metav1.Condition`s.
pub trait WithConditions: Default + Clone + Serialize + PartialEq {
    /// The conditions.
    fn conditions_mut(&mut self) -> &mut Vec<Condition>;
}

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

/// An object of one of the operator's kinds, with its status.
pub trait WithStatus: NamespacedObject + Serialize + Send + Sync + 'static {
    /// The status type.
    type Status: WithConditions + Send + Sync;
    /// The status, if any.
    fn status(&self) -> Option<&Self::Status>;
}

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
    ) -> BoxFuture<'a, Result<(), ResourceError>> {
        self.release.routed(obj, set, version)
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

//! The optional CRUD shape of a resource: current state, desired state, and a patch with create,
//! delete and update parts.
//!
//! Complex resources are easier to reason about when reading the world, computing what it should
//! be and changing it are separate steps. [`Crud`] is that shape; [`CrudResource`] turns it into
//! a [`Resource`]. Its execution follows operatorkit's `crud.Resource`:
//!
//! 1. `current_state`, then `desired_state`. Either may stop the resource by returning
//!    [`Step::Stop`] with an [`Outcome`] (the documented convention is to cancel a CRUD resource
//!    from `current_state`, e.g. when a workload cluster's API is not up yet).
//! 2. `update_patch` (object not deleting) or `delete_patch` (object deleting): pure functions of
//!    the object, the current and the desired state. A [`Patch`] has three optional parts; a part
//!    counts as present once set, even with an empty value.
//! 3. The parts are applied in the order **create → delete → update** (the order of the Go code;
//!    its doc comment claimed create → update → delete). An apply step whose outcome is not
//!    [`Flow::Continue`] skips the remaining parts of this resource.
//!
//! The first error aborts the resource and propagates. Each step runs in a tracing span whose
//! `function` field carries the Go step name (`GetCurrentState`, `ApplyCreateChange`, ...).

use std::future::Future;

use tracing::Instrument;

use crate::outcome::{Flow, Outcome};
use crate::resource::{Resource, Result};

/// Whether a state-reading step produced its value or stopped the resource.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step<T> {
    /// The state; continue with the next step.
    Proceed(T),
    /// Stop this resource with this outcome (usually [`Outcome::cancel_resource`]).
    Stop(Outcome),
}

/// The changes a CRUD resource applies: optional create, delete and update parts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Patch<C> {
    create: Option<C>,
    delete: Option<C>,
    update: Option<C>,
}

impl<C> Default for Patch<C> {
    fn default() -> Self {
        Self { create: None, delete: None, update: None }
    }
}

impl<C> Patch<C> {
    /// A patch with no parts: nothing is applied.
    pub fn new() -> Self {
        Self::default()
    }

    /// Set the create part.
    pub fn create(mut self, change: C) -> Self {
        self.create = Some(change);
        self
    }

    /// Set the delete part.
    pub fn delete(mut self, change: C) -> Self {
        self.delete = Some(change);
        self
    }

    /// Set the update part.
    pub fn update(mut self, change: C) -> Self {
        self.update = Some(change);
        self
    }

    /// Whether no part is set.
    pub fn is_empty(&self) -> bool {
        self.create.is_none() && self.delete.is_none() && self.update.is_none()
    }

    /// The parts, in application order.
    pub fn into_parts(self) -> (Option<C>, Option<C>, Option<C>) {
        (self.create, self.delete, self.update)
    }
}

/// A resource written as current state / desired state / patch. Wrap it in [`CrudResource`]
/// to add it to a resource set.
pub trait Crud<K, S>: Send + Sync {
    /// What the current and desired states are (e.g. a list of ConfigMaps).
    type State: Send + Sync;
    /// What one part of a patch carries.
    type Change: Send;

    /// The resource's name.
    fn name(&self) -> &str;

    /// Read what exists now.
    fn current_state(&self, state: &mut S, obj: &K) -> impl Future<Output = Result<Step<Self::State>>> + Send;

    /// Compute what should exist.
    fn desired_state(&self, state: &mut S, obj: &K) -> impl Future<Output = Result<Step<Self::State>>> + Send;

    /// The changes for an object that is not being deleted (pure).
    fn update_patch(&self, obj: &K, current: &Self::State, desired: &Self::State) -> Result<Patch<Self::Change>>;

    /// The changes for an object that is being deleted (pure).
    fn delete_patch(&self, obj: &K, current: &Self::State, desired: &Self::State) -> Result<Patch<Self::Change>>;

    /// Apply the create part.
    fn apply_create(
        &self,
        state: &mut S,
        obj: &K,
        change: Self::Change,
    ) -> impl Future<Output = Result<Outcome>> + Send;

    /// Apply the delete part.
    fn apply_delete(
        &self,
        state: &mut S,
        obj: &K,
        change: Self::Change,
    ) -> impl Future<Output = Result<Outcome>> + Send;

    /// Apply the update part.
    fn apply_update(
        &self,
        state: &mut S,
        obj: &K,
        change: Self::Change,
    ) -> impl Future<Output = Result<Outcome>> + Send;
}

/// Adapts a [`Crud`] implementation into a [`Resource`].
#[derive(Clone, Debug)]
pub struct CrudResource<C> {
    crud: C,
}

impl<C> CrudResource<C> {
    /// Wrap `crud`.
    pub fn new(crud: C) -> Self {
        Self { crud }
    }

    /// The wrapped implementation.
    pub fn crud(&self) -> &C {
        &self.crud
    }
}

fn step_span(function: &'static str) -> tracing::Span {
    tracing::debug_span!("crud", function)
}

impl<C> CrudResource<C> {
    async fn run<K, S>(&self, state: &mut S, obj: &K, deleting: bool) -> Result<Outcome>
    where
        C: Crud<K, S>,
        K: Sync,
        S: Send,
    {
        let current = match self.crud.current_state(state, obj).instrument(step_span("GetCurrentState")).await? {
            Step::Proceed(current) => current,
            Step::Stop(outcome) => return Ok(outcome),
        };
        let desired = match self.crud.desired_state(state, obj).instrument(step_span("GetDesiredState")).await? {
            Step::Proceed(desired) => desired,
            Step::Stop(outcome) => return Ok(outcome),
        };
        let patch = if deleting {
            step_span("NewDeletePatch").in_scope(|| self.crud.delete_patch(obj, &current, &desired))?
        } else {
            step_span("NewUpdatePatch").in_scope(|| self.crud.update_patch(obj, &current, &desired))?
        };
        let (create, delete, update) = patch.into_parts();
        let mut outcome = Outcome::proceed();
        if let Some(change) = create {
            let o = self.crud.apply_create(state, obj, change).instrument(step_span("ApplyCreateChange")).await?;
            outcome = outcome.merge(o);
            if o.flow() != Flow::Continue {
                return Ok(outcome);
            }
        }
        if let Some(change) = delete {
            let o = self.crud.apply_delete(state, obj, change).instrument(step_span("ApplyDeleteChange")).await?;
            outcome = outcome.merge(o);
            if o.flow() != Flow::Continue {
                return Ok(outcome);
            }
        }
        if let Some(change) = update {
            let o = self.crud.apply_update(state, obj, change).instrument(step_span("ApplyUpdateChange")).await?;
            outcome = outcome.merge(o);
        }
        Ok(outcome)
    }
}

impl<K, S, C> Resource<K, S> for CrudResource<C>
where
    C: Crud<K, S>,
    K: Sync,
    S: Send,
{
    fn name(&self) -> &str {
        self.crud.name()
    }

    fn ensure_created(&self, state: &mut S, obj: &K) -> impl Future<Output = Result<Outcome>> + Send {
        self.run(state, obj, false)
    }

    fn ensure_deleted(&self, state: &mut S, obj: &K) -> impl Future<Output = Result<Outcome>> + Send {
        self.run(state, obj, true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ResourceError;

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread().build().expect("a runtime").block_on(f)
    }

    /// Records the order of its steps; its states are sets of names.
    struct Recorder {
        stop_in_current: Option<Outcome>,
        cancel_create: bool,
        fail_delete: bool,
    }

    type Log = Vec<String>;

    impl Crud<Vec<&'static str>, Log> for Recorder {
        type State = Vec<&'static str>;
        type Change = Vec<&'static str>;

        fn name(&self) -> &str {
            "recorder"
        }

        async fn current_state(&self, log: &mut Log, _: &Vec<&'static str>) -> Result<Step<Self::State>> {
            log.push("current".into());
            Ok(match self.stop_in_current {
                Some(o) => Step::Stop(o),
                None => Step::Proceed(vec!["a", "b"]),
            })
        }

        async fn desired_state(&self, log: &mut Log, obj: &Vec<&'static str>) -> Result<Step<Self::State>> {
            log.push("desired".into());
            Ok(Step::Proceed(obj.clone()))
        }

        fn update_patch(
            &self,
            _: &Vec<&'static str>,
            current: &Self::State,
            desired: &Self::State,
        ) -> Result<Patch<Self::Change>> {
            let create: Vec<_> = desired.iter().filter(|d| !current.contains(d)).copied().collect();
            let delete: Vec<_> = current.iter().filter(|c| !desired.contains(c)).copied().collect();
            let update: Vec<_> = current.iter().filter(|c| desired.contains(c)).copied().collect();
            Ok(Patch::new().create(create).delete(delete).update(update))
        }

        fn delete_patch(
            &self,
            _: &Vec<&'static str>,
            current: &Self::State,
            _: &Self::State,
        ) -> Result<Patch<Self::Change>> {
            Ok(Patch::new().delete(current.clone()))
        }

        async fn apply_create(&self, log: &mut Log, _: &Vec<&'static str>, change: Self::Change) -> Result<Outcome> {
            log.push(format!("create {change:?}"));
            Ok(if self.cancel_create { Outcome::cancel_resource() } else { Outcome::proceed() })
        }

        async fn apply_delete(&self, log: &mut Log, _: &Vec<&'static str>, change: Self::Change) -> Result<Outcome> {
            log.push(format!("delete {change:?}"));
            if self.fail_delete {
                return Err(ResourceError::msg("DeleteFailed", "the delete failed"));
            }
            Ok(Outcome::proceed())
        }

        async fn apply_update(&self, log: &mut Log, _: &Vec<&'static str>, change: Self::Change) -> Result<Outcome> {
            log.push(format!("update {change:?}"));
            Ok(Outcome::proceed().requeue_after(std::time::Duration::from_secs(7)))
        }
    }

    fn recorder() -> Recorder {
        Recorder { stop_in_current: None, cancel_create: false, fail_delete: false }
    }

    #[test]
    fn parts_apply_create_then_delete_then_update() {
        let r = CrudResource::new(recorder());
        let mut log = Log::new();
        let outcome = block_on(r.ensure_created(&mut log, &vec!["b", "c"])).unwrap();
        assert_eq!(log, ["current", "desired", "create [\"c\"]", "delete [\"a\"]", "update [\"b\"]"]);
        assert_eq!(outcome.flow(), Flow::Continue);
        assert_eq!(outcome.requeue(), Some(std::time::Duration::from_secs(7)));
    }

    #[test]
    fn deleting_objects_use_the_delete_patch() {
        let r = CrudResource::new(recorder());
        let mut log = Log::new();
        let outcome = block_on(r.ensure_deleted(&mut log, &vec!["b"])).unwrap();
        assert_eq!(outcome, Outcome::proceed());
        assert_eq!(log, ["current", "desired", "delete [\"a\", \"b\"]"]);
    }

    #[test]
    fn stopping_in_current_state_skips_every_later_step() {
        let r = CrudResource::new(Recorder { stop_in_current: Some(Outcome::cancel_resource()), ..recorder() });
        let mut log = Log::new();
        let outcome = block_on(r.ensure_created(&mut log, &vec!["c"])).unwrap();
        assert_eq!(log, ["current"]);
        assert_eq!(outcome.flow(), Flow::CancelResource);
    }

    #[test]
    fn a_cancelled_apply_step_skips_the_remaining_parts() {
        let r = CrudResource::new(Recorder { cancel_create: true, ..recorder() });
        let mut log = Log::new();
        let outcome = block_on(r.ensure_created(&mut log, &vec!["b", "c"])).unwrap();
        assert_eq!(log, ["current", "desired", "create [\"c\"]"]);
        assert_eq!(outcome.flow(), Flow::CancelResource);
    }

    #[test]
    fn the_first_error_aborts_the_resource() {
        let r = CrudResource::new(Recorder { fail_delete: true, ..recorder() });
        let mut log = Log::new();
        let err = block_on(r.ensure_created(&mut log, &vec!["b", "c"])).unwrap_err();
        assert_eq!(err.kind(), "DeleteFailed");
        assert_eq!(log, ["current", "desired", "create [\"c\"]", "delete [\"a\"]"]);
    }

    #[test]
    fn an_empty_patch_applies_nothing() {
        let p: Patch<()> = Patch::new();
        assert!(p.is_empty());
        assert!(!Patch::new().update(()).is_empty(), "a part counts once set, even when empty");
    }
}

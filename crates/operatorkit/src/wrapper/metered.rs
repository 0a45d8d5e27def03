//! Measures resource calls: operatorkit's `metricsresource`.
//!
//! Every call is observed in `operatorkit_controller_operation{resource, operation}` (seconds;
//! its `_count` series counts calls) and every failure counted in
//! `operatorkit_controller_operation_errors_total{resource, operation}`. Operation names are Go's:
//! `EnsureCreated`, `EnsureDeleted`, and for CRUD steps `GetCurrentState`, `GetDesiredState`,
//! `NewUpdatePatch`, `NewDeletePatch`, `ApplyCreatePatch`, `ApplyDeletePatch`,
//! `ApplyUpdatePatch`.

use std::future::Future;
use std::time::Instant;

use crate::crud::{Crud, Patch, Step};
use crate::metrics::Metrics;
use crate::outcome::Outcome;
use crate::resource::{Resource, Result};

/// A resource whose calls are measured.
#[derive(Clone, Debug)]
pub struct Metered<R> {
    inner: R,
    metrics: Metrics,
}

impl<R> Metered<R> {
    /// Measure `inner` into `metrics`.
    pub fn new(inner: R, metrics: &Metrics) -> Self {
        Self { inner, metrics: metrics.clone() }
    }

    /// The wrapped resource.
    pub fn inner(&self) -> &R {
        &self.inner
    }

    async fn observe<T>(
        &self,
        name: &str,
        operation: &'static str,
        call: impl Future<Output = Result<T>>,
    ) -> Result<T> {
        let start = Instant::now();
        let result = call.await;
        self.metrics.operation(name, operation, start.elapsed(), result.is_err());
        result
    }

    fn observe_sync<T>(&self, name: &str, operation: &'static str, call: impl FnOnce() -> Result<T>) -> Result<T> {
        let start = Instant::now();
        let result = call();
        self.metrics.operation(name, operation, start.elapsed(), result.is_err());
        result
    }
}

impl<K, S, R> Resource<K, S> for Metered<R>
where
    R: Resource<K, S>,
    K: Sync,
    S: Send,
{
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn ensure_created(&self, state: &mut S, obj: &K) -> impl Future<Output = Result<Outcome>> + Send {
        self.observe(self.inner.name(), "EnsureCreated", self.inner.ensure_created(state, obj))
    }

    fn ensure_deleted(&self, state: &mut S, obj: &K) -> impl Future<Output = Result<Outcome>> + Send {
        self.observe(self.inner.name(), "EnsureDeleted", self.inner.ensure_deleted(state, obj))
    }
}

impl<K, S, C> Crud<K, S> for Metered<C>
where
    C: Crud<K, S>,
    K: Sync,
    S: Send,
{
    type State = C::State;
    type Change = C::Change;

    fn name(&self) -> &str {
        self.inner.name()
    }

    fn current_state(&self, state: &mut S, obj: &K) -> impl Future<Output = Result<Step<Self::State>>> + Send {
        self.observe(self.inner.name(), "GetCurrentState", self.inner.current_state(state, obj))
    }

    fn desired_state(&self, state: &mut S, obj: &K) -> impl Future<Output = Result<Step<Self::State>>> + Send {
        self.observe(self.inner.name(), "GetDesiredState", self.inner.desired_state(state, obj))
    }

    fn update_patch(&self, obj: &K, current: &Self::State, desired: &Self::State) -> Result<Patch<Self::Change>> {
        self.observe_sync(self.inner.name(), "NewUpdatePatch", || self.inner.update_patch(obj, current, desired))
    }

    fn delete_patch(&self, obj: &K, current: &Self::State, desired: &Self::State) -> Result<Patch<Self::Change>> {
        self.observe_sync(self.inner.name(), "NewDeletePatch", || self.inner.delete_patch(obj, current, desired))
    }

    fn apply_create(
        &self,
        state: &mut S,
        obj: &K,
        change: Self::Change,
    ) -> impl Future<Output = Result<Outcome>> + Send {
        self.observe(self.inner.name(), "ApplyCreatePatch", self.inner.apply_create(state, obj, change))
    }

    fn apply_delete(
        &self,
        state: &mut S,
        obj: &K,
        change: Self::Change,
    ) -> impl Future<Output = Result<Outcome>> + Send {
        self.observe(self.inner.name(), "ApplyDeletePatch", self.inner.apply_delete(state, obj, change))
    }

    fn apply_update(
        &self,
        state: &mut S,
        obj: &K,
        change: Self::Change,
    ) -> impl Future<Output = Result<Outcome>> + Send {
        self.observe(self.inner.name(), "ApplyUpdatePatch", self.inner.apply_update(state, obj, change))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ResourceError;
    use prometheus_client::registry::Registry;

    struct Fails;

    impl Resource<(), ()> for Fails {
        fn name(&self) -> &str {
            "fails"
        }
        async fn ensure_created(&self, _: &mut (), _: &()) -> Result<Outcome> {
            Err(ResourceError::msg("Broken", "broken"))
        }
        async fn ensure_deleted(&self, _: &mut (), _: &()) -> Result<Outcome> {
            Ok(Outcome::proceed())
        }
    }

    #[test]
    fn calls_and_failures_are_recorded_per_operation() {
        let mut registry = Registry::default();
        let metrics = Metrics::new(&mut registry);
        let r = Metered::new(Fails, &metrics);
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        assert!(rt.block_on(r.ensure_created(&mut (), &())).is_err());
        assert_eq!(rt.block_on(r.ensure_deleted(&mut (), &())).unwrap(), Outcome::proceed());
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &registry).unwrap();
        assert!(
            out.contains("operatorkit_controller_operation_count{resource=\"fails\",operation=\"EnsureCreated\"} 1")
        );
        assert!(out.contains(
            "operatorkit_controller_operation_errors_total{resource=\"fails\",operation=\"EnsureCreated\"} 1"
        ));
        assert!(
            out.contains("operatorkit_controller_operation_count{resource=\"fails\",operation=\"EnsureDeleted\"} 1")
        );
        assert!(
            !out.contains(
                "operatorkit_controller_operation_errors_total{resource=\"fails\",operation=\"EnsureDeleted\"}"
            )
        );
    }
}

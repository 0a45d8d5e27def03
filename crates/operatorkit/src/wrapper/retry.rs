//! Retries failed resource calls in place, before the error reaches the controller.
//!
//! operatorkit's `retryresource`: by default at most 3 attempts, 1 s apart (Go's
//! `backoff.NewMaxRetries(3, 1s)`), every failed attempt logged. Unlike Go, only errors that say
//! they are retryable ([`ResourceError::is_retryable`]) are retried: a 403 or a validation error
//! fails at once. The controller's per-object backoff remains the outer safety net.

use std::time::Duration;

use crate::crud::{Crud, Patch, Step};
use crate::error::ResourceError;
use crate::outcome::Outcome;
use crate::resource::{Resource, Result};

/// A resource whose failed calls are retried.
#[derive(Clone, Debug)]
pub struct Retry<R> {
    inner: R,
    attempts: u32,
    interval: Duration,
}

impl<R> Retry<R> {
    /// Retry `inner`: 3 attempts, 1 s apart.
    pub fn new(inner: R) -> Self {
        Self { inner, attempts: 3, interval: Duration::from_secs(1) }
    }

    /// At most `attempts` calls in total (at least 1).
    pub fn attempts(mut self, attempts: u32) -> Self {
        self.attempts = attempts.max(1);
        self
    }

    /// Wait `interval` between attempts.
    pub fn interval(mut self, interval: Duration) -> Self {
        self.interval = interval;
        self
    }

    /// The wrapped resource.
    pub fn inner(&self) -> &R {
        &self.inner
    }

    /// Decide after a failed attempt: `Ok(())` to try again (after waiting), `Err` to give up.
    async fn after_failure(&self, resource: &str, operation: &str, attempt: u32, error: ResourceError) -> Result<()> {
        if attempt >= self.attempts || !error.is_retryable() {
            return Err(error);
        }
        tracing::warn!(resource, operation, attempt, kind = error.kind(), error = %error, "retrying due to error");
        tokio::time::sleep(self.interval).await;
        Ok(())
    }
}

/// Run `$call` until it succeeds or the retry policy gives up.
macro_rules! retrying {
    ($self:ident, $name:expr, $operation:expr, $call:expr) => {{
        let mut attempt = 1;
        loop {
            match $call.await {
                Ok(value) => break Ok(value),
                Err(error) => {
                    $self.after_failure($name, $operation, attempt, error).await?;
                    attempt += 1;
                }
            }
        }
    }};
}

impl<K, S, R> Resource<K, S> for Retry<R>
where
    R: Resource<K, S>,
    K: Sync,
    S: Send,
{
    fn name(&self) -> &str {
        self.inner.name()
    }

    async fn ensure_created(&self, state: &mut S, obj: &K) -> Result<Outcome> {
        retrying!(self, self.inner.name(), "EnsureCreated", self.inner.ensure_created(state, obj))
    }

    async fn ensure_deleted(&self, state: &mut S, obj: &K) -> Result<Outcome> {
        retrying!(self, self.inner.name(), "EnsureDeleted", self.inner.ensure_deleted(state, obj))
    }
}

/// Every step is retried; apply steps get a clone of their change on each attempt.
impl<K, S, C> Crud<K, S> for Retry<C>
where
    C: Crud<K, S>,
    C::Change: Clone + Sync,
    K: Sync,
    S: Send,
{
    type State = C::State;
    type Change = C::Change;

    fn name(&self) -> &str {
        self.inner.name()
    }

    async fn current_state(&self, state: &mut S, obj: &K) -> Result<Step<Self::State>> {
        retrying!(self, self.inner.name(), "GetCurrentState", self.inner.current_state(state, obj))
    }

    async fn desired_state(&self, state: &mut S, obj: &K) -> Result<Step<Self::State>> {
        retrying!(self, self.inner.name(), "GetDesiredState", self.inner.desired_state(state, obj))
    }

    // Patch computations are pure: retrying cannot change their result.
    fn update_patch(&self, obj: &K, current: &Self::State, desired: &Self::State) -> Result<Patch<Self::Change>> {
        self.inner.update_patch(obj, current, desired)
    }

    fn delete_patch(&self, obj: &K, current: &Self::State, desired: &Self::State) -> Result<Patch<Self::Change>> {
        self.inner.delete_patch(obj, current, desired)
    }

    async fn apply_create(&self, state: &mut S, obj: &K, change: Self::Change) -> Result<Outcome> {
        retrying!(self, self.inner.name(), "ApplyCreateChange", self.inner.apply_create(state, obj, change.clone()))
    }

    async fn apply_delete(&self, state: &mut S, obj: &K, change: Self::Change) -> Result<Outcome> {
        retrying!(self, self.inner.name(), "ApplyDeleteChange", self.inner.apply_delete(state, obj, change.clone()))
    }

    async fn apply_update(&self, state: &mut S, obj: &K, change: Self::Change) -> Result<Outcome> {
        retrying!(self, self.inner.name(), "ApplyUpdateChange", self.inner.apply_update(state, obj, change.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    struct Flaky {
        failures: AtomicU32,
        retryable: bool,
    }

    impl Resource<(), u32> for Flaky {
        fn name(&self) -> &str {
            "flaky"
        }

        async fn ensure_created(&self, calls: &mut u32, _: &()) -> Result<Outcome> {
            *calls += 1;
            if self.failures.load(Ordering::SeqCst) > 0 {
                self.failures.fetch_sub(1, Ordering::SeqCst);
                let e = ResourceError::msg("Flaky", "not yet");
                return Err(if self.retryable { e } else { e.permanent() });
            }
            Ok(Outcome::proceed())
        }

        async fn ensure_deleted(&self, _: &mut u32, _: &()) -> Result<Outcome> {
            Ok(Outcome::proceed())
        }
    }

    fn run<F: Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(f)
    }

    #[test]
    fn retryable_errors_are_retried_up_to_the_limit() {
        let r = Retry::new(Flaky { failures: AtomicU32::new(2), retryable: true }).interval(Duration::from_millis(1));
        let mut calls = 0;
        assert_eq!(run(r.ensure_created(&mut calls, &())).unwrap(), Outcome::proceed());
        assert_eq!(calls, 3);

        let r = Retry::new(Flaky { failures: AtomicU32::new(3), retryable: true }).interval(Duration::from_millis(1));
        let mut calls = 0;
        let err = run(r.ensure_created(&mut calls, &())).unwrap_err();
        assert_eq!((calls, err.kind()), (3, "Flaky"));
    }

    #[test]
    fn permanent_errors_are_not_retried() {
        let r = Retry::new(Flaky { failures: AtomicU32::new(1), retryable: false }).attempts(5);
        let mut calls = 0;
        assert!(run(r.ensure_created(&mut calls, &())).is_err());
        assert_eq!(calls, 1);
        assert_eq!(Resource::<(), u32>::name(&r), "flaky");
    }
}

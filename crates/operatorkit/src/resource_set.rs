//! [`ResourceSet`]: a versioned, ordered list of resources with a typed per-reconcile state.
//!
//! A set has a name (for logs), a semver requirement on this operator's component version (the
//! router hands an object to the one set whose requirement matches the version its Release
//! names), the resources in execution order, and an initialiser that builds the state `S` the
//! resources share during one reconcile. The initialiser runs at the start of every reconcile,
//! before anything is written; an error fails the reconcile (operatorkit's `InitCtx`).
//!
//! Sets with different state types can serve one controller: the state type is erased inside
//! the set.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use semver::{Version, VersionReq};
use tracing::Instrument;

use crate::error::{ReconcileError, ResourceError};
use crate::outcome::{Flow, Outcome};
use crate::resource::{DynResource, Resource};

/// What a reconcile knows besides the object: passed to the state initialiser.
#[derive(Clone, Debug)]
pub struct ReconcileMeta {
    /// The controller's name.
    pub controller: Arc<str>,
    /// The resource set's name.
    pub set: Arc<str>,
    /// A per-controller counter of reconciles (the `loop` log key).
    pub loop_id: u64,
    /// The component version that selected the set (`None` never happens in release mode).
    pub version: Option<Version>,
    /// The Release that was read (`None` in legacy mode).
    pub release: Option<String>,
    /// Whether the object is being deleted.
    pub deleting: bool,
}

impl ReconcileMeta {
    /// A key unique to this reconcile (`<controller>-<loop>`), for memoising lookups within one
    /// reconcile, as operatorkit's `cachekeycontext`.
    pub fn cache_key(&self) -> String {
        format!("{}-{}", self.controller, self.loop_id)
    }
}

type InitFn<K, S> = dyn Fn(Arc<K>, ReconcileMeta) -> BoxFuture<'static, Result<S, ResourceError>> + Send + Sync;

/// A versioned list of resources over objects of kind `K`.
pub struct ResourceSet<K> {
    name: Arc<str>,
    requirement: VersionReq,
    runner: Arc<dyn SetRunner<K>>,
}

impl<K> Clone for ResourceSet<K> {
    fn clone(&self) -> Self {
        Self { name: self.name.clone(), requirement: self.requirement.clone(), runner: self.runner.clone() }
    }
}

impl<K> std::fmt::Debug for ResourceSet<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResourceSet")
            .field("name", &self.name)
            .field("requirement", &self.requirement.to_string())
            .field("resources", &self.runner.resource_names())
            .finish()
    }
}

impl<K: Send + Sync + 'static> ResourceSet<K> {
    /// Start a set named `name` handling component versions matching `requirement`, whose
    /// reconciles share a state built by `init`.
    pub fn builder<S, F, Fut>(name: impl Into<String>, requirement: VersionReq, init: F) -> ResourceSetBuilder<K, S>
    where
        S: Send + 'static,
        F: Fn(Arc<K>, ReconcileMeta) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<S, ResourceError>> + Send + 'static,
    {
        ResourceSetBuilder {
            name: name.into(),
            requirement,
            init: Arc::new(move |obj, meta| Box::pin(init(obj, meta))),
            resources: Vec::new(),
        }
    }

    /// Start a set whose state is `S::default()` at the start of every reconcile.
    pub fn with_default_state<S>(name: impl Into<String>, requirement: VersionReq) -> ResourceSetBuilder<K, S>
    where
        S: Default + Send + 'static,
    {
        Self::builder(name, requirement, |_, _| async { Ok(S::default()) })
    }
}

impl<K> ResourceSet<K> {
    /// The set's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The component versions it handles.
    pub fn requirement(&self) -> &VersionReq {
        &self.requirement
    }

    /// Its resources' names, in order.
    pub fn resource_names(&self) -> Vec<String> {
        self.runner.resource_names()
    }

    pub(crate) fn runner(&self) -> &dyn SetRunner<K> {
        &*self.runner
    }
}

/// Builds a [`ResourceSet`].
pub struct ResourceSetBuilder<K, S> {
    name: String,
    requirement: VersionReq,
    init: Arc<InitFn<K, S>>,
    resources: Vec<Box<dyn DynResource<K, S>>>,
}

impl<K, S> std::fmt::Debug for ResourceSetBuilder<K, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResourceSetBuilder")
            .field("name", &self.name)
            .field("requirement", &self.requirement.to_string())
            .field("resources", &self.resources.iter().map(|r| r.name().to_string()).collect::<Vec<_>>())
            .finish()
    }
}

impl<K, S> ResourceSetBuilder<K, S>
where
    K: Send + Sync + 'static,
    S: Send + 'static,
{
    /// Append a resource; resources run in the order they are added.
    pub fn resource(mut self, resource: impl Resource<K, S> + 'static) -> Self {
        self.resources.push(Box::new(resource));
        self
    }

    /// Finish the set.
    pub fn build(self) -> ResourceSet<K> {
        let name: Arc<str> = self.name.into();
        ResourceSet {
            name: name.clone(),
            requirement: self.requirement,
            runner: Arc::new(TypedSet { name, init: self.init, resources: self.resources }),
        }
    }
}

/// What the controller provides to a running set: its write paths.
pub(crate) trait WritePaths<K>: Send + Sync {
    /// Fail if this replica may not write (leadership lost).
    fn may_write(&self) -> Result<(), ReconcileError>;

    /// Make sure the finalizer is on the object, returning the object as written, or `None`
    /// when the guarded patch lost against a newer version (requeue at once).
    fn ensure_finalizer<'a>(&'a self, obj: Arc<K>) -> BoxFuture<'a, Result<Option<Arc<K>>, ReconcileError>>;
}

/// How a set's run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SetEnd {
    /// The resources ran (all, or up to a cancel-reconciliation).
    Ran {
        /// The shortest requeue a resource asked for.
        requeue: Option<Duration>,
        /// Delete path: the finalizer must stay.
        keep_finalizer: bool,
    },
    /// The finalizer could not be added because the cached object was stale.
    Stale,
}

/// A set with its state type erased.
pub(crate) trait SetRunner<K>: Send + Sync {
    fn resource_names(&self) -> Vec<String>;

    fn run<'a>(
        &'a self,
        obj: Arc<K>,
        meta: ReconcileMeta,
        paths: &'a dyn WritePaths<K>,
    ) -> BoxFuture<'a, Result<SetEnd, ReconcileError>>;
}

struct TypedSet<K, S> {
    name: Arc<str>,
    init: Arc<InitFn<K, S>>,
    resources: Vec<Box<dyn DynResource<K, S>>>,
}

impl<K, S> SetRunner<K> for TypedSet<K, S>
where
    K: Send + Sync + 'static,
    S: Send + 'static,
{
    fn resource_names(&self) -> Vec<String> {
        self.resources.iter().map(|r| r.name().to_string()).collect()
    }

    fn run<'a>(
        &'a self,
        obj: Arc<K>,
        meta: ReconcileMeta,
        paths: &'a dyn WritePaths<K>,
    ) -> BoxFuture<'a, Result<SetEnd, ReconcileError>> {
        Box::pin(async move {
            let deleting = meta.deleting;
            let mut state = (self.init)(obj.clone(), meta)
                .await
                .map_err(|source| ReconcileError::StateInit { set: self.name.to_string(), source })?;
            let obj = if deleting {
                obj
            } else {
                // The finalizer goes on before the first resource can create anything, so that
                // whatever it creates is cleaned up on deletion.
                match paths.ensure_finalizer(obj).await? {
                    Some(obj) => obj,
                    None => return Ok(SetEnd::Stale),
                }
            };
            let mut total = Outcome::proceed();
            let mut cancelled = false;
            for resource in &self.resources {
                paths.may_write()?;
                let name = resource.name();
                let span = tracing::info_span!("resource", resource = name);
                let call = if deleting {
                    resource.ensure_deleted(&mut state, &obj)
                } else {
                    resource.ensure_created(&mut state, &obj)
                };
                let outcome = call
                    .instrument(span)
                    .await
                    .map_err(|source| ReconcileError::Resource { resource: name.to_string(), source })?;
                total = total.merge(outcome);
                match outcome.flow() {
                    Flow::Continue => {}
                    Flow::CancelResource => tracing::debug!(resource = name, "resource cancelled itself"),
                    Flow::CancelReconciliation => {
                        tracing::debug!(resource = name, "resource cancelled the reconciliation");
                        cancelled = true;
                        break;
                    }
                }
            }
            Ok(SetEnd::Ran {
                requeue: total.requeue(),
                // A cancelled deletion keeps the finalizer (operatorkit v3+): the deletion is not
                // finished, so it must run again.
                keep_finalizer: deleting && (total.keeps_finalizer() || cancelled),
            })
        })
    }
}

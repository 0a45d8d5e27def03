//! # operatorkit
//!
//! A provider-agnostic controller library on kube-rs, the Rust successor of Giant Swarm's Go
//! `operatorkit`. A controller reconciles one kind (related kinds it watches only requeue those
//! objects); each object is routed, through the `Release`
//! its `release.giantswarm.io/version` label names, to the one [`ResourceSet`] that handles this
//! operator's version; the set's [`Resource`]s then run in order, sharing a typed
//! per-reconcile state and steering the reconcile with explicit [`Outcome`]s.
//!
//! ```no_run
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use operatorkit::{Controller, Outcome, Resource, ResourceSet, resource};
//! use semver::VersionReq;
//! use tokio_util::sync::CancellationToken;
//!
//! /// The state the resources of one reconcile share.
//! #[derive(Default)]
//! struct State {
//!     seen: usize,
//! }
//!
//! struct Greeter;
//!
//! impl Resource<ConfigMap, State> for Greeter {
//!     fn name(&self) -> &str {
//!         "greeter"
//!     }
//!     async fn ensure_created(&self, state: &mut State, cm: &ConfigMap) -> resource::Result<Outcome> {
//!         state.seen += 1;
//!         tracing::info!(name = cm.metadata.name.as_deref(), "hello");
//!         Ok(Outcome::proceed())
//!     }
//!     async fn ensure_deleted(&self, _: &mut State, _: &ConfigMap) -> resource::Result<Outcome> {
//!         Ok(Outcome::proceed())
//!     }
//! }
//!
//! # async fn run(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
//! let set = ResourceSet::with_default_state("v1", VersionReq::parse("^1")?)
//!     .resource(Greeter)
//!     .build();
//! let controller = Controller::<ConfigMap>::builder(client, "greeter-controller")
//!     .operator("greeter-operator")
//!     .resource_set(set)
//!     .build()?;
//! controller.run(CancellationToken::new()).await;
//! # Ok(()) }
//! ```
//!
//! The pieces, each with its own module documentation:
//!
//! * [`resource`], [`crud`], [`outcome`]: the reconcile steps and their control flow;
//! * [`resource_set`], [`router`]: versioned sets and the pure, build-time-checked router;
//! * [`controller`]: the kube-runtime controller, finalizers ([`finalizer`]), change predicates
//!   and pause ([`predicate`]), leader election ([`leader`]), status hook ([`status`]);
//! * [`sharding`]: active-active replicas, each reconciling its own share of the objects, and
//!   [`replicas`]: the one choice a daemon makes between one replica, leader election and
//!   sharding;
//! * [`metrics`], [`server`], Warning events, [`wrapper`]s for retries and metrics;
//! * [`conditions`]: `metav1.Condition` helpers and the Giant Swarm cluster lifecycle;
//! * [`held_secrets`]: Secrets a cluster uses, held by a finalizer until its teardown ends;
//! * [`logging`]: the log output every operator binary installs.
//!
//! `crates/operatorkit/README.md` explains the design and how it differs from the Go library;
//! `examples/configmap_controller.rs` is a complete controller that runs against `testenv`.
#![forbid(unsafe_code)]

pub mod conditions;
pub mod controller;
pub mod crud;
pub mod error;
pub mod events;
pub mod finalizer;
pub mod held_secrets;
pub mod leader;
pub mod logging;
pub mod metrics;
pub mod outcome;
pub mod predicate;
pub mod replicas;
pub mod resource;
pub mod resource_set;
pub mod router;
pub mod server;
pub mod sharding;
pub mod status;
pub mod wrapper;

pub use controller::{Controller, ControllerBuilder, ErrorBackoff, RunSettings};
pub use error::{BuildError, ErrorKind, ReconcileError, ResourceError};
pub use events::Events;
pub use leader::Leadership;
pub use metrics::Metrics;
pub use outcome::{Flow, Outcome};
pub use resource::Resource;
pub use resource_set::{ReconcileMeta, ResourceSet, ResourceSetBuilder};
pub use router::{ObjectVersion, Route, Router, Routing, Unroutable, VersionFrom};
pub use server::{Readiness, Server};
pub use sharding::{Sharding, ShardingConfig};
pub use status::{ReleaseCondition, StatusHook};

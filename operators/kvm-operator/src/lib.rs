//! kvm-operator: runs workload clusters whose nodes are KVM virtual machines in pods of the
//! management cluster — one Deployment per node, selector-less `master` and `worker` Services,
//! Ingresses for the API and etcd, a node-config Secret per node.
//!
//! # Layout
//!
//! The top level reads like aws-operator's; what exists today:
//!
//! | module | what it holds |
//! | --- | --- |
//! | `main.rs` | the binary: the `daemon`, `render` and `describe` commands and their dispatch, nothing else |
//! | [`daemon`] | the wiring: flags → configuration → [`context::Shared`] and [`controllers::Nodes`] → the four controllers and the drain executor, leader election, the `/metrics` `/healthz` `/readyz` server, signals |
//! | [`context`] | [`context::Shared`]: what every controller shares — the client, the settings, the workload-cluster clients (one cache with the drain executor), the memory of applied objects |
//! | [`controllers`] | one module per controller: [`controllers::cluster`] (inputs, node indexes, the workload cluster's nodes, the objects by server-side apply, scale-down and rolling updates, the lifecycle status, ordered teardown), [`controllers::drainer`] (the pod-finalizer drain, the Endpoints from the node pods), [`controllers::deleter`] (leftover workload-cluster nodes), [`controllers::unhealthy`] (the unhealthy-node terminator), and the per-cluster [`controllers::node_watcher`] |
//! | [`describe`] | the `describe` command: the tree of a cluster from its KVMConfig, node pods and drains, over the shared output of [`node_lifecycle::describe`] |
//! | [`config`] | flags and settings: [`config::DaemonArgs`], [`config::ClusterArgs`] (shared by `daemon` and `render`), [`config::OperatorConfig`], [`config::NodeArgs`] and [`config::NodeSettings`] (the node controllers) |
//! | [`render`] | the `render` command's edge: reads the CR files and flags, calls [`plan`], prints YAML |
//! | [`plan`] | pure: every object of a cluster in apply order ([`plan::build`]), a cluster's Secrets ([`plan::ClusterSecrets`]), the plan of a set of files |
//!
//! # Layers
//!
//! As in aws-operator, every import points down this table: a module may use its own layer and
//! the layers above it in the table, never one below. `tests/architecture.rs` reads the crate's
//! imports and holds the code to this table, and to no circle between the modules it names.
//! kvm-operator has no provider edge of its own (the workload-cluster clients are
//! `node_lifecycle`'s) and no subsystem beside its controllers, so those two layers are absent.
//!
//! | layer | modules | what decides, what does |
//! | --- | --- | --- |
//! | 1. settings | [`config`] | flags and settings, read once; the controllers' names |
//! | 2. policy | [`plan`] | pure decisions, tested from fixtures: every object of a cluster in apply order, over `kvm_objects` |
//! | 3. context | [`context`] | what every controller shares: the client, the settings, the workload-cluster clients, the memory of applied objects |
//! | 4. controller helpers | [`controllers`] | what the node controllers share: [`controllers::Nodes`] with its events, metrics and per-cluster node watchers (`controllers::node_watcher`, a part of this layer: the deleter starts them, the drainer nudges them), the node pods' selector, how a workload cluster is reached |
//! | 5. controllers | [`controllers::cluster`], [`controllers::drainer`], [`controllers::deleter`], [`controllers::unhealthy`] | dereference, validate, build, apply, status |
//! | 6. commands | [`daemon`], [`render`], [`describe`] | the wiring of the daemon, and the `render` and `describe` commands |
//!
//! The desired state itself is pure and lives in `kvm_objects` (names, node indexes,
//! Deployments, Services, Ingresses, Endpoints, rolling and scale-down, the lifecycle status,
//! the unhealthy-node planner, node configs).
//!
//! # The shape of a reconcile
//!
//! As in aws-operator: **dereference** (the Release, the certificate Secrets) → **validate**
//! (bad input stops with `Ready=False` and a Warning event, nothing written —
//! [`operatorkit::error::InvalidInput`], [`operatorkit::status::reject`]) → **build** (pure:
//! [`plan::build`] over `kvm_objects`) → **apply** (server-side apply, unchanged objects not
//! written) → **status** ([`operatorkit::status`], `apis::cluster_status`). Deletion runs the
//! teardown in the order of the reference's §10.
//!
//! # Why the planner is a module here and not in `kvm_objects`
//!
//! `kvm_objects` builds each object from a validated [`kvm_objects::cluster::Cluster`]. The
//! planner adds what the operator decides around them: which Release a KVMConfig runs, which
//! Secrets hold its certificates, the operator's flags ([`config::OperatorConfig`]) and the order
//! of application. The cluster controller and `render` share it, so `render` prints what the
//! controller would write.
#![forbid(unsafe_code)]

pub mod config;
pub mod context;
pub mod controllers;
pub mod daemon;
pub mod describe;
pub mod plan;
pub mod render;

/// This operator's version: it reconciles the clusters whose Release names this version of the
/// `kvm-operator` component.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

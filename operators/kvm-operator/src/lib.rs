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
//! | `main.rs` | the binary: the `render` command and its dispatch, nothing else |
//! | [`config`] | flags and settings: [`config::ClusterArgs`] (shared by every command that builds objects), [`config::OperatorConfig`] |
//! | [`render`] | the `render` command's edge: reads the CR files and flags, calls [`plan`], prints YAML |
//! | [`plan`] | pure: every object of a cluster in apply order ([`plan::build`]), a cluster's Secrets ([`plan::ClusterSecrets`]), the plan of a set of files |
//!
//! Not built yet: `daemon.rs` (the wiring), `context.rs`, and `controllers/` (cluster, deleter,
//! drainer, unhealthy-node terminator). The desired state itself is pure and lives in
//! `kvm_objects` (names, node indexes, Deployments, Services, Ingresses, Endpoints, rolling, the
//! unhealthy-node planner, node configs).
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
pub mod plan;
pub mod render;

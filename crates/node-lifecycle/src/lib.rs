//! # node-lifecycle
//!
//! What both cluster operators need inside a *workload* cluster (WC), shared so that neither
//! copies the other and a platform needs no node-operator:
//!
//! * [`claims`]: the claim of a cluster id, the namespace `<id>` labelled with the UID of the one
//!   cluster object that holds it, created, adopted and released only by that object;
//! * [`clients`]: a cached `kube::Client` per workload cluster, resolved from the management
//!   cluster's Secrets (the Cluster API `<id>-kubeconfig` Secret, else cert-operator
//!   certificates), rebuilt when its Secret changes, with timeouts and typed errors that tell
//!   "not reachable yet" from real failures, and no key material in any message;
//! * [`access`]: a client of the management identity that a workload cluster refuses an
//!   operation its role grants (a cluster whose masters predate the role) applies the role with
//!   the cluster's `api` certificate, at most once per interval, and retries;
//! * [`drain`]: the `DrainerConfig` executor, an operatorkit controller that cordons a node,
//!   evicts its pods under their PodDisruptionBudgets and sets `Drained` or `Timeout`, one
//!   short step per reconcile;
//! * [`unhealthy`]: which NotReady nodes to replace in one run, behind the circuit breaker both
//!   operators share (at most one master and `max(1, round(10 %))` of the nodes per run, a
//!   cooldown between runs that replace), as pure functions;
//! * [`maintenance`]: weekly maintenance windows in a time zone (daylight-saving changes
//!   included), the max-age choice of the next node to replace, and the [`maintenance::Clock`]
//!   the controllers share, as pure functions;
//! * [`pki_secrets`]: a workload cluster's PKI and encryption key as Secrets in the management
//!   cluster, issued when absent and renewed when due ([`pki::ensure`] decides);
//! * [`describe`]: the `describe` command both operators share — its flags, the choice of the
//!   condition each line shows, the maintenance-window and drain lines, the tree and JSON output;
//! * [`slots`]: rollout limits (clusters rolling per management cluster, node pools rolling per
//!   cluster) as Leases that every replica shares and that survive restarts.
//!
//! Tests simulate a workload cluster with the `workload-sim` crate: a second `testenv` with
//! nodes for the machines a test declares and workloads under disruption budgets.
//!
//! An operator wires the executor with one call:
//!
//! ```no_run
//! use node_lifecycle::drain::{Drainer, DrainerSettings};
//! use prometheus_client::registry::Registry;
//! use tokio_util::sync::CancellationToken;
//!
//! # async fn run(client: kube::Client) -> Result<(), Box<dyn std::error::Error>> {
//! let mut registry = Registry::default();
//! let settings = DrainerSettings::new("aws-operator", semver::Version::new(16, 2, 0));
//! // Drains every DrainerConfig labelled aws-operator.giantswarm.io/version=16.2.0.
//! let drainer = Drainer::builder(client, settings, &mut registry).build()?;
//! drainer.run(CancellationToken::new()).await;
//! # Ok(()) }
//! ```
//!
//! `docs/node-lifecycle.md` describes the behaviour for users: conditions, events, metrics,
//! settings and how to test against a simulated workload cluster.
#![forbid(unsafe_code)]

pub mod access;
pub mod claims;
pub mod clients;
pub mod describe;
pub mod disruption;
pub mod drain;
pub mod maintenance;
pub mod pki_secrets;
pub mod slots;
pub mod unhealthy;

pub use clients::{ClientOptions, ClusterRef, WorkloadClient, WorkloadClients, WorkloadClusterError};
pub use drain::{Drainer, DrainerSettings};

//! The drainers: Auto Scaling terminating lifecycle hooks meet DrainerConfigs.
//!
//! A control-plane or node-pool group whose instance is about to go holds it in
//! `Terminating:Wait` (the hooks of reference §6.4). The drainers create a DrainerConfig for the
//! instance's workload-cluster node, let the drain executor ([`node_lifecycle::drain`]) drain
//! it, and complete the lifecycle action once it is drained or timed out, so that pods leave a
//! node before its instance does (reference §6.5).
//!
//! The decision is pure ([`plan`]); the controllers read and apply it.

pub mod plan;

//! What kvm-operator puts into the management cluster, as pure functions: names, node indexes,
//! Deployments, Services, Endpoints, Ingresses, node configs.
#![forbid(unsafe_code)]

pub mod cluster;
pub mod deployment;
pub mod endpoints;
pub mod ignition;
pub mod ingress;
pub mod names;
pub mod node_index;
pub mod rolling;
pub mod services;
pub mod unhealthy;

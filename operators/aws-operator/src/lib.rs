//! aws-operator: provisions workload clusters on AWS through CloudFormation.
#![forbid(unsafe_code)]

pub mod aws;
pub mod cluster;
pub mod common;
pub mod context;
pub mod control_plane;
pub mod ipam;
pub mod machine_deployment;
pub mod node_config;
pub mod operator;
pub mod render;

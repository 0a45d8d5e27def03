//! aws-operator: provisions workload clusters on AWS through CloudFormation.
#![forbid(unsafe_code)]

pub mod aws;
pub mod cloudformation;
pub mod cluster;
pub mod common;
pub mod context;
pub mod control_plane;
pub mod held_secrets;
pub mod ipam_lock;
pub mod logging;
pub mod machine_deployment;
pub mod node_config;
pub mod operator;
pub mod render;
pub mod services;
pub mod stack_ops;

//! aws-operator: provisions workload clusters on AWS through CloudFormation.
#![forbid(unsafe_code)]

pub mod aws;
pub mod config;
pub mod context;
pub mod controllers;
pub mod daemon;
pub mod ipam;
pub mod node_config;
pub mod plan;
pub mod render;

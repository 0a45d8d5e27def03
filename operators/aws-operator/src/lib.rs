//! aws-operator: provisions workload clusters on AWS through CloudFormation.
#![forbid(unsafe_code)]

pub mod aws;
pub mod context;
pub mod controllers;
pub mod ipam;
pub mod node_config;
pub mod operator;
pub mod render;

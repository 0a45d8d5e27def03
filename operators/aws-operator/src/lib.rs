//! aws-operator: provisions workload clusters on AWS through CloudFormation.
#![forbid(unsafe_code)]

pub mod aws;
pub mod cloudformation;
pub mod cluster;
pub mod common;
pub mod context;
pub mod ipam_lock;
pub mod services;
pub mod stack_ops;

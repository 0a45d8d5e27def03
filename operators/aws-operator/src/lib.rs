//! aws-operator: provisions workload clusters on AWS through CloudFormation.
#![forbid(unsafe_code)]

pub mod aws;
pub mod cloudformation;
pub mod services;

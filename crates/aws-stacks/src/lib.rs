//! What aws-operator puts into AWS, as pure functions of typed inputs: the names of things
//! ([`names`]), address management ([`ipam`]), the six CloudFormation stacks and the three of
//! legacy clusters ([`cfn`], [`stacks`], [`stacks::legacy`]), the Ignition node configs
//! ([`ignition`]), IAM roles for service accounts ([`irsa`]) and the stack state machine that
//! decides what to do with a stack as CloudFormation shows it ([`state`]).
//!
//! Nothing here talks to AWS or Kubernetes, so `aws-operator render` and the template tests run
//! without either.
#![forbid(unsafe_code)]

pub mod cfn;
pub mod ignition;
pub mod ipam;
pub mod irsa;
pub mod leftovers;
pub mod names;
pub mod stacks;
pub mod state;

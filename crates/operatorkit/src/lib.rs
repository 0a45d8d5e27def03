//! # operatorkit
//!
//! A provider-agnostic controller library on kube-rs.
#![forbid(unsafe_code)]

pub mod conditions;
pub mod leader;

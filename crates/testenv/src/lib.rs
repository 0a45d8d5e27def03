//! testenv: an in-process Kubernetes API server for tests.
#![forbid(unsafe_code)]

pub mod builtin_shapes;
pub mod patch;
pub mod schema;
pub mod selector;
pub mod shape;
pub mod ssa;
pub mod table;

//! The controllers, one module each, and what they share.
//!
//! | module | what it holds |
//! | --- | --- |
//! | [`cluster`] | KVMConfig: inputs, node indexes, the objects of the cluster in the management cluster, status, ordered teardown |
//! | [`drainer`] | node pods: the `master` and `worker` Endpoints (the pod finalizer's drain is not built yet) |
//!
//! Not built yet: the deleter and the unhealthy-node terminator. The status lifecycle (`Ready`, status writes, rejected input) is
//! [`operatorkit::status`], shared with aws-operator.

pub mod cluster;
pub mod drainer;

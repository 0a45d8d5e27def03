//! What the status of a kind holds and where the kind keeps it: the traits the shared status
//! lifecycle (`operatorkit::status`) works through, implemented here for every kind whose status
//! has `metav1.Condition`s.
//!
//! They live with the kinds rather than with the lifecycle because Rust allows a trait's
//! implementation only in the crate of the trait or of the type, and `operatorkit` depends on
//! this crate, not the other way round.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::aws::{
    AWSCluster, AWSClusterStatus, AWSControlPlane, AWSControlPlaneStatus, AWSMachineDeployment,
    AWSMachineDeploymentStatus,
};
use crate::aws_config::{AWSConfig, AWSConfigStatus};
use crate::kvm::{KVMConfig, KVMConfigStatus};

/// The objects the controllers write status, annotations and finalizers on: namespaced kinds
/// that deserialize.
pub trait NamespacedObject:
    kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
    + Clone
    + DeserializeOwned
    + std::fmt::Debug
{
}

impl<T> NamespacedObject for T where
    T: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
{
}

/// A status with upstream `metav1.Condition`s.
pub trait WithConditions: Default + Clone + Serialize + PartialEq {
    /// The conditions.
    fn conditions_mut(&mut self) -> &mut Vec<Condition>;
}

/// An object of one of the operator's kinds, with its status.
pub trait WithStatus: NamespacedObject + Serialize + Send + Sync + 'static {
    /// The status type.
    type Status: WithConditions + Send + Sync;
    /// The status, if any.
    fn status(&self) -> Option<&Self::Status>;
}

macro_rules! kinds {
    ($($kind:ty => $status:ty),*) => {$(
        impl WithConditions for $status {
            fn conditions_mut(&mut self) -> &mut Vec<Condition> {
                &mut self.conditions
            }
        }
        impl WithStatus for $kind {
            type Status = $status;
            fn status(&self) -> Option<&$status> {
                self.status.as_ref()
            }
        }
    )*};
}

kinds!(
    AWSCluster => AWSClusterStatus,
    AWSControlPlane => AWSControlPlaneStatus,
    AWSMachineDeployment => AWSMachineDeploymentStatus,
    AWSConfig => AWSConfigStatus,
    KVMConfig => KVMConfigStatus
);

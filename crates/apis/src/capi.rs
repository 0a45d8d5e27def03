//! The Cluster API objects Giant Swarm fleets carry beside the AWS kinds, read (and, for
//! [`Cluster`]'s `spec.controlPlaneEndpoint`, written) by aws-operator when their CRDs are
//! installed: [`Cluster`] and [`MachineDeployment`] of `cluster.x-k8s.io`, and
//! [`G8sControlPlane`] of `infrastructure.giantswarm.io`.
//!
//! Their CRDs belong to Cluster API and to Giant Swarm's apiextensions, not to this project: no
//! chart ships them and [`crate::all_crds`] does not list them. The types hold only what the
//! operator reads; every other field of a real object is ignored when it is read, so an object
//! of any of the served versions (`v1alpha3`, `v1alpha4`, `v1beta1`; the fields read are the same
//! in each) deserialises whole.
//!
//! What the operator reads, and from where:
//!
//! | object | field | used as |
//! | --- | --- | --- |
//! | `Cluster` `<id>` | annotation [`ETCD_QUOTA_BACKEND_BYTES`] | etcd's `--quota-backend-bytes` on the masters |
//! | `Cluster` `<id>` | annotation [`TERMINATED_POD_GC_THRESHOLD`] | the controller manager's `--terminated-pod-gc-threshold` |
//! | `Cluster` `<id>` | annotation [`CILIUM_POD_CIDR`] | the pod CIDR, unless the AWSCluster's `spec.provider.pods.cidrBlock` is set |
//! | `Cluster` `<id>` | annotation [`CILIUM_IPAM_MODE`] | `eni`: Cilium manages the workers' interfaces (their role may), the controller manager allocates no node CIDRs |
//! | `Cluster` `<id>` | labels `tag.provider.giantswarm.io/<key>` | cloud tags, beside the AWSCluster's (whose win per key) |
//! | `G8sControlPlane` `<cp>` | `spec.replicas` | the master count, unless the AWSControlPlane's `spec.replicas` is set |
//! | `MachineDeployment` `<pool>` | annotation (or label) [`CGROUP_V1`] | the pool's workers boot with cgroups v1 |
//!
//! [`CILIUM_FORCE_DISABLE_KUBE_PROXY`] is accepted and has no effect: these nodes always run
//! kube-proxy, which is what it forced.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::{CustomResource, ResourceExt};
use serde::{Deserialize, Serialize};

use crate::validation::{FieldError, check_cidr, into_result};

/// Annotation on a `Cluster`: etcd's backend quota in bytes (`--quota-backend-bytes`), a
/// positive integer; etcd's default (2 GiB) when absent.
pub const ETCD_QUOTA_BACKEND_BYTES: &str = "etcd.giantswarm.io/quota-backend-bytes";
/// Annotation on a `Cluster`: how many terminated pods the controller manager keeps before it
/// deletes them (`--terminated-pod-gc-threshold`), an integer; its default (12500) when absent.
pub const TERMINATED_POD_GC_THRESHOLD: &str = "controllermanager.giantswarm.io/terminated-pod-gc-threshold";
/// Annotation on a `Cluster`: the pod CIDR Cilium uses.
pub const CILIUM_POD_CIDR: &str = "cilium.giantswarm.io/pod-cidr";
/// Annotation on a `Cluster`: Cilium's IPAM mode, `kubernetes` (the default) or `eni`.
pub const CILIUM_IPAM_MODE: &str = "cilium.giantswarm.io/ipam-mode";
/// Annotation on a `Cluster`: keep kube-proxy instead of Cilium's replacement of it. Accepted;
/// these nodes always run kube-proxy.
pub const CILIUM_FORCE_DISABLE_KUBE_PROXY: &str = "cilium.giantswarm.io/force-disable-cilium-kube-proxy";
/// Annotation (or label) on a `MachineDeployment`: present with any value, the pool's workers
/// boot with cgroups v1 instead of v2.
pub const CGROUP_V1: &str = "node.giantswarm.io/cgroupv1";
/// The label prefix of cloud tags on a `Cluster` (and an `AWSCluster`):
/// `tag.provider.giantswarm.io/<key>: <value>` becomes the AWS tag `<key>=<value>`.
pub const CLOUD_TAG_PREFIX: &str = "tag.provider.giantswarm.io/";

/// The Cluster API group of [`Cluster`] and [`MachineDeployment`].
pub const CAPI_GROUP: &str = "cluster.x-k8s.io";
/// The versions of [`CAPI_GROUP`] whose `Cluster` and `MachineDeployment` the operator reads,
/// most preferred first: the fields read are the same in each.
pub const CAPI_VERSIONS: [&str; 3] = ["v1beta1", "v1alpha4", "v1alpha3"];

/// A Cluster API `Cluster`: the provider-independent cluster object, named like the AWSCluster
/// (the cluster id) in the same namespace.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[kube(
    group = "cluster.x-k8s.io",
    version = "v1beta1",
    kind = "Cluster",
    plural = "clusters",
    namespaced,
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterSpec {
    /// Where the workload cluster's API server is reached; aws-operator writes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane_endpoint: Option<ApiEndpoint>,
}

/// `spec.controlPlaneEndpoint` of a [`Cluster`].
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct ApiEndpoint {
    /// The host name.
    #[serde(default)]
    pub host: String,
    /// The port.
    #[serde(default)]
    pub port: i32,
}

/// A Cluster API `MachineDeployment`: the provider-independent node pool, named like its
/// AWSMachineDeployment in the same namespace.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[kube(
    group = "cluster.x-k8s.io",
    version = "v1beta1",
    kind = "MachineDeployment",
    plural = "machinedeployments",
    namespaced,
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct MachineDeploymentSpec {
    /// The cluster the pool belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_name: Option<String>,
}

/// Giant Swarm's `G8sControlPlane`: the provider-independent control plane, named like its
/// AWSControlPlane in the same namespace.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "infrastructure.giantswarm.io",
    version = "v1alpha3",
    kind = "G8sControlPlane",
    plural = "g8scontrolplanes",
    namespaced,
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct G8sControlPlaneSpec {
    /// The number of masters, 1 or 3.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// The AWSControlPlane it stands beside.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infrastructure_ref: Option<ObjectReference>,
}

/// Cilium's IPAM mode ([`CILIUM_IPAM_MODE`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CiliumIpamMode {
    /// Node CIDRs allocated by the controller manager.
    #[default]
    Kubernetes,
    /// Pod addresses from secondary addresses of the nodes' interfaces, managed by Cilium.
    Eni,
}

/// The annotation path of `key`, as field errors name it.
fn annotation_field(key: &str) -> String {
    format!("metadata.annotations[{key}]")
}

impl Cluster {
    fn annotation(&self, key: &str) -> Option<&str> {
        self.annotations().get(key).map(String::as_str)
    }

    /// [`ETCD_QUOTA_BACKEND_BYTES`]: `Ok(None)` when absent.
    pub fn etcd_quota_backend_bytes(&self) -> Result<Option<u64>, FieldError> {
        let Some(value) = self.annotation(ETCD_QUOTA_BACKEND_BYTES) else { return Ok(None) };
        match value.trim().parse::<u64>() {
            Ok(n) if n > 0 => Ok(Some(n)),
            _ => Err(FieldError::new(
                annotation_field(ETCD_QUOTA_BACKEND_BYTES),
                value,
                "must be a positive number of bytes, such as 8589934592 for 8 GiB; remove it for etcd's default of 2 GiB",
            )),
        }
    }

    /// [`TERMINATED_POD_GC_THRESHOLD`]: `Ok(None)` when absent.
    pub fn terminated_pod_gc_threshold(&self) -> Result<Option<u32>, FieldError> {
        let Some(value) = self.annotation(TERMINATED_POD_GC_THRESHOLD) else { return Ok(None) };
        match value.trim().parse::<u32>() {
            Ok(n) if n <= i32::MAX as u32 => Ok(Some(n)),
            _ => Err(FieldError::new(
                annotation_field(TERMINATED_POD_GC_THRESHOLD),
                value,
                "must be a whole number of terminated pods, such as 12500 (0 turns their garbage collection off); remove it for the controller manager's default",
            )),
        }
    }

    /// [`CILIUM_POD_CIDR`]: `Ok(None)` when absent or empty.
    pub fn cilium_pod_cidr(&self) -> Result<Option<&str>, FieldError> {
        let Some(value) = self.annotation(CILIUM_POD_CIDR).filter(|v| !v.is_empty()) else { return Ok(None) };
        let mut errors = Vec::new();
        check_cidr(&annotation_field(CILIUM_POD_CIDR), value, &mut errors);
        match errors.pop() {
            None => Ok(Some(value)),
            Some(e) => Err(e),
        }
    }

    /// [`CILIUM_IPAM_MODE`]: `kubernetes` when absent.
    pub fn cilium_ipam_mode(&self) -> Result<CiliumIpamMode, FieldError> {
        match self.annotation(CILIUM_IPAM_MODE) {
            None | Some("kubernetes") => Ok(CiliumIpamMode::Kubernetes),
            Some("eni") => Ok(CiliumIpamMode::Eni),
            Some(other) => Err(FieldError::new(
                annotation_field(CILIUM_IPAM_MODE),
                other,
                "must be kubernetes or eni; remove it for kubernetes",
            )),
        }
    }

    /// The cloud tags of the cluster's labels ([`CLOUD_TAG_PREFIX`]), the prefix stripped.
    pub fn cloud_tags(&self) -> BTreeMap<String, String> {
        cloud_tags(self.labels())
    }

    /// Every annotation this object sets that the operator cannot use, each naming the field,
    /// the value and the fix.
    pub fn validate(&self) -> Result<(), Vec<FieldError>> {
        let errors = [
            self.etcd_quota_backend_bytes().err(),
            self.terminated_pod_gc_threshold().err(),
            self.cilium_pod_cidr().err(),
            self.cilium_ipam_mode().err(),
        ];
        into_result(errors.into_iter().flatten().collect())
    }

    /// The annotations this object sets that have no effect, each with why.
    pub fn ignored_fields(&self) -> Vec<(String, &'static str)> {
        let mut ignored = Vec::new();
        if self.annotation(CILIUM_FORCE_DISABLE_KUBE_PROXY).is_some() {
            ignored.push((
                annotation_field(CILIUM_FORCE_DISABLE_KUBE_PROXY),
                "these nodes always run kube-proxy, which is what it forced",
            ));
        }
        ignored
    }
}

/// The cloud tags among `labels`: `tag.provider.giantswarm.io/<key>: <value>` as `<key>: <value>`
/// (a label with nothing after the prefix is not one).
pub fn cloud_tags(labels: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    labels
        .iter()
        .filter_map(|(k, v)| Some((k.strip_prefix(CLOUD_TAG_PREFIX)?.to_owned(), v.clone())))
        .filter(|(k, _)| !k.is_empty())
        .collect()
}

impl MachineDeployment {
    /// Whether the pool's workers boot with cgroups v1: [`CGROUP_V1`] is present, as an
    /// annotation or a label, with any value (Giant Swarm's tooling set it either way).
    pub fn cgroup_v1(&self) -> bool {
        self.annotations().contains_key(CGROUP_V1) || self.labels().contains_key(CGROUP_V1)
    }
}

impl G8sControlPlane {
    /// `spec.replicas`, checked: 1 or 3 (the schema of Giant Swarm's CRD says so too, but an
    /// object written before that schema may hold anything).
    pub fn replicas(&self) -> Result<Option<i32>, FieldError> {
        match self.spec.replicas {
            None => Ok(None),
            Some(n @ (1 | 3)) => Ok(Some(n)),
            Some(n) => Err(FieldError::new(
                "spec.replicas",
                n,
                "must be 1 or 3 masters; or set spec.replicas of the AWSControlPlane, which wins",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(annotations: serde_json::Value) -> Cluster {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster",
            "metadata": {"name": "al9qy", "namespace": "org-acme", "annotations": annotations},
            "spec": {}
        }))
        .expect("a Cluster")
    }

    #[test]
    fn cluster_annotations_parse_or_name_the_field_and_the_fix() {
        let c = cluster(serde_json::json!({
            ETCD_QUOTA_BACKEND_BYTES: "8589934592",
            TERMINATED_POD_GC_THRESHOLD: "500",
            CILIUM_POD_CIDR: "10.4.0.0/16",
            CILIUM_IPAM_MODE: "eni"
        }));
        assert_eq!(c.etcd_quota_backend_bytes(), Ok(Some(8_589_934_592)));
        assert_eq!(c.terminated_pod_gc_threshold(), Ok(Some(500)));
        assert_eq!(c.cilium_pod_cidr(), Ok(Some("10.4.0.0/16")));
        assert_eq!(c.cilium_ipam_mode(), Ok(CiliumIpamMode::Eni));
        assert_eq!(c.validate(), Ok(()));

        let none = cluster(serde_json::json!({}));
        assert_eq!(none.etcd_quota_backend_bytes(), Ok(None));
        assert_eq!(none.terminated_pod_gc_threshold(), Ok(None));
        assert_eq!(none.cilium_pod_cidr(), Ok(None));
        assert_eq!(none.cilium_ipam_mode(), Ok(CiliumIpamMode::Kubernetes));

        let bad = cluster(serde_json::json!({
            ETCD_QUOTA_BACKEND_BYTES: "8Gi",
            TERMINATED_POD_GC_THRESHOLD: "-1",
            CILIUM_POD_CIDR: "10.4.0.1/16",
            CILIUM_IPAM_MODE: "calico"
        }));
        let errors = bad.validate().expect_err("four bad annotations");
        let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "metadata.annotations[etcd.giantswarm.io/quota-backend-bytes]",
                "metadata.annotations[controllermanager.giantswarm.io/terminated-pod-gc-threshold]",
                "metadata.annotations[cilium.giantswarm.io/pod-cidr]",
                "metadata.annotations[cilium.giantswarm.io/ipam-mode]",
            ]
        );
        assert!(errors[0].to_string().contains("\"8Gi\"") && errors[0].message.contains("8589934592"), "{}", errors[0]);
        assert!(errors[2].message.contains("10.4.0.0/16"), "{}", errors[2]);
        let zero = cluster(serde_json::json!({ETCD_QUOTA_BACKEND_BYTES: "0"}));
        assert!(zero.etcd_quota_backend_bytes().is_err());
    }

    #[test]
    fn cloud_tags_come_from_the_prefixed_labels() {
        let labels = BTreeMap::from([
            ("tag.provider.giantswarm.io/cost-center".to_owned(), "blue".to_owned()),
            ("tag.provider.giantswarm.io/".to_owned(), "no key".to_owned()),
            ("giantswarm.io/organization".to_owned(), "acme".to_owned()),
        ]);
        assert_eq!(cloud_tags(&labels), BTreeMap::from([("cost-center".to_owned(), "blue".to_owned())]));
    }

    #[test]
    fn cgroup_v1_is_the_key_present_as_annotation_or_label() {
        let md = |meta: serde_json::Value| -> MachineDeployment {
            let mut m = serde_json::json!({"name": "g3j50", "namespace": "org-acme"});
            m.as_object_mut().expect("object").extend(meta.as_object().cloned().unwrap_or_default());
            serde_json::from_value(serde_json::json!({"metadata": m, "spec": {}})).expect("a MachineDeployment")
        };
        assert!(md(serde_json::json!({"annotations": {CGROUP_V1: ""}})).cgroup_v1());
        assert!(md(serde_json::json!({"labels": {CGROUP_V1: "true"}})).cgroup_v1());
        assert!(!md(serde_json::json!({"labels": {"giantswarm.io/machine-deployment": "g3j50"}})).cgroup_v1());
    }

    #[test]
    fn g8s_control_plane_replicas_are_one_or_three() {
        let g = |replicas: serde_json::Value| -> G8sControlPlane {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": "a2wax", "namespace": "org-acme"}, "spec": {"replicas": replicas}
            }))
            .expect("a G8sControlPlane")
        };
        assert_eq!(g(serde_json::json!(3)).replicas(), Ok(Some(3)));
        assert_eq!(g(serde_json::json!(null)).replicas(), Ok(None));
        let err = g(serde_json::json!(2)).replicas().expect_err("2 masters");
        assert_eq!(err.field, "spec.replicas");
        assert!(err.message.contains("1 or 3"), "{err}");
    }
}

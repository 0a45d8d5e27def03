//! Every name kvm-operator gives to what it creates, in one place (reference §6).
//!
//! The names are the operator's contract with itself across restarts and upgrades: objects are
//! found again by them. Two deliberate departures from the original, both so that removing a
//! node in the middle of a list renames nothing (reference §14.2): the etcd PVC and the etcd
//! host directory are named after the node id, not the node's position in the list.

use crate::cluster::Role;

/// The operator's name: the `giantswarm.io/managed-by` value and the `app` of its bindings.
pub const OPERATOR: &str = "kvm-operator";
/// The selector-less Service (and Endpoints) of the masters.
pub const MASTER_SERVICE: &str = "master";
/// The selector-less NodePort Service (and Endpoints) of the workers.
pub const WORKER_SERVICE: &str = "worker";
/// The Ingress of the workload cluster's API.
pub const API_INGRESS: &str = "api";
/// The Ingress of the workload cluster's etcd.
pub const ETCD_INGRESS: &str = "etcd";
/// The key of a node's Ignition in its Secret.
pub const USER_DATA_KEY: &str = "user_data";

/// The pod condition (and readiness gate of worker pods) that mirrors the workload-cluster
/// node's `Ready` condition.
pub const NODE_READY_CONDITION: &str = "kvm-operator.giantswarm.io/workload-cluster-node-ready";

/// Labels and annotations of the objects kvm-operator writes.
pub mod keys {
    /// Pod label selecting the node pods the drainer watches; value [`super::OPERATOR`].
    pub const POD_WATCHER: &str = "kvm-operator.giantswarm.io/pod-watcher";
    /// Pod annotation: the workload cluster's API host, for the drain request.
    pub const API_ENDPOINT: &str = "kvm-operator.giantswarm.io/api-endpoint";
    /// Pod annotation: the VM's IP, written by the endpoint-updater sidecar.
    pub const VM_IP: &str = "endpoint.kvm.giantswarm.io/ip";
    /// Pod annotation: the Service (`master` or `worker`) whose Endpoints hold the VM's IP.
    pub const SERVICE: &str = "endpoint.kvm.giantswarm.io/service";
    /// Pod annotation: `True` once the workload-cluster node is drained.
    pub const DRAINED: &str = "endpoint.kvm.giantswarm.io/drained";
    /// Pod annotation: the operator version that created the pod.
    pub const VERSION_BUNDLE: &str = "kvm-operator.giantswarm.io/version-bundle";
    /// Pod annotation prefix: `<prefix><component>` holds a release component's version.
    pub const COMPONENT_VERSION_PREFIX: &str = "kvm-operator.giantswarm.io/component-version-";
    /// Deployment annotation: the release version.
    pub const RELEASE_VERSION: &str = "giantswarm.io/release-version";
    /// Deployment annotation: the operator version.
    pub const VERSION_BUNDLE_VERSION: &str = "giantswarm.io/version-bundle-version";
    /// Deployment annotation: a digest of the desired pod template, so that any change of the
    /// node's spec rolls it (the original compared only the two version annotations, §14.5).
    pub const SPEC_HASH: &str = "kvm-operator.giantswarm.io/spec-hash";
    /// Label: the node id of a Deployment, pod or PVC.
    pub const NODE: &str = "node";
    /// Label: the role (`master` or `worker`).
    pub const APP: &str = "app";
    /// Label: the cluster id (legacy spelling).
    pub const CLUSTER: &str = "cluster";
    /// Label: the customer (legacy spelling).
    pub const CUSTOMER: &str = "customer";
    /// Label on PVCs: the operator version.
    pub const VERSION_BUNDLE_LABEL: &str = "giantswarm.io/version-bundle";
    /// Label on the Deployment, pod and PVC of the master that runs the cluster's etcd:
    /// `true`. The master Endpoints send etcd's port to it alone.
    pub const ETCD_MEMBER: &str = "kvm-operator.giantswarm.io/etcd-member";
    /// PersistentVolume label selecting a worker's host volume.
    pub const MOUNT_TAG: &str = "mount-tag";
}

/// The management-cluster namespace of a cluster's objects, and its ServiceAccount.
pub fn namespace(cluster_id: &str) -> String {
    cluster_id.to_string()
}

/// The two ClusterRoleBindings of a cluster: general and pod-security.
pub fn cluster_role_bindings(cluster_id: &str) -> [String; 2] {
    [cluster_id.to_string(), format!("{cluster_id}-psp")]
}

/// A node's Deployment: `<role>-<nodeID>`.
pub fn deployment(role: Role, node_id: &str) -> String {
    format!("{}-{node_id}", role.as_str())
}

/// A node's Ignition Secret: `<role>-<clusterID>-<nodeID>` (the reference's ConfigMap name).
pub fn node_secret(role: Role, cluster_id: &str, node_id: &str) -> String {
    format!("{}-{cluster_id}-{node_id}", role.as_str())
}

/// A master's etcd PVC: `pvc-master-etcd-<clusterID>-<nodeID>`.
pub fn etcd_pvc(cluster_id: &str, node_id: &str) -> String {
    format!("pvc-master-etcd-{cluster_id}-{node_id}")
}

/// A master's etcd directory on the host: `/home/core/volumes/<clusterID>/k8s-master-<nodeID>`.
pub fn etcd_host_path(cluster_id: &str, node_id: &str) -> String {
    format!("/home/core/volumes/{cluster_id}/k8s-master-{node_id}")
}

/// A worker's host-volume PVC: `local-pvc-worker-<clusterID>-<nodeID>-<mountTag>`.
pub fn host_volume_pvc(cluster_id: &str, node_id: &str, mount_tag: &str) -> String {
    format!("local-pvc-worker-{cluster_id}-{node_id}-{mount_tag}")
}

/// The flannel bridge of a cluster on every host: `br-<clusterID>`.
pub fn bridge(cluster_id: &str) -> String {
    format!("br-{cluster_id}")
}

/// The VM's tap device: `tap-<clusterID>`.
pub fn tap(cluster_id: &str) -> String {
    format!("tap-{cluster_id}")
}

/// flannel's environment file of the cluster's bridge.
pub fn flannel_env_file(cluster_id: &str) -> String {
    format!("/run/flannel/networks/br-{cluster_id}.env")
}

/// The node's iSCSI initiator name, from its allocated index.
pub fn iscsi_initiator(cluster_id: &str, role: Role, index: i64) -> String {
    format!("iqn.2016-04.com.coreos.iscsi:giantswarm-{cluster_id}-{}-{index}", role.as_str())
}

/// The host port of the node pod's health check: `23000 + VNI`.
pub fn liveness_port(vni: i64) -> i32 {
    (23000 + vni) as i32
}

/// The host port of the node pod's shutdown deferrer: `47000 + VNI`.
pub fn shutdown_deferrer_port(vni: i64) -> i32 {
    (47000 + vni) as i32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_of_section_6() {
        assert_eq!(namespace("q7m2x"), "q7m2x");
        assert_eq!(cluster_role_bindings("q7m2x"), ["q7m2x", "q7m2x-psp"]);
        assert_eq!(deployment(Role::Master, "ab1"), "master-ab1");
        assert_eq!(deployment(Role::Worker, "cd2"), "worker-cd2");
        assert_eq!(node_secret(Role::Worker, "q7m2x", "cd2"), "worker-q7m2x-cd2");
        assert_eq!(etcd_pvc("q7m2x", "ab1"), "pvc-master-etcd-q7m2x-ab1");
        assert_eq!(etcd_host_path("q7m2x", "ab1"), "/home/core/volumes/q7m2x/k8s-master-ab1");
        assert_eq!(host_volume_pvc("q7m2x", "cd2", "fast"), "local-pvc-worker-q7m2x-cd2-fast");
        assert_eq!((bridge("q7m2x"), tap("q7m2x")), ("br-q7m2x".to_string(), "tap-q7m2x".to_string()));
        assert_eq!(flannel_env_file("q7m2x"), "/run/flannel/networks/br-q7m2x.env");
        assert_eq!(iscsi_initiator("q7m2x", Role::Worker, 4), "iqn.2016-04.com.coreos.iscsi:giantswarm-q7m2x-worker-4");
        assert_eq!((liveness_port(26), shutdown_deferrer_port(26)), (23026, 47026));
    }

    #[test]
    fn the_longest_ids_fit_interface_and_host_names() {
        let cluster = "a".repeat(apis::kvm::CLUSTER_ID_MAX_LENGTH);
        assert!(tap(&cluster).len() <= 15 && bridge(&cluster).len() <= 15, "Linux interface names");
        let node = "b".repeat(apis::kvm::NODE_ID_MAX_LENGTH);
        // Pod and node name: the Deployment, a replica-set hash of up to 10, a 5-character suffix.
        let pod = format!("{}-{}-{}", deployment(Role::Worker, &node), "c".repeat(10), "d".repeat(5));
        assert!(pod.len() <= 63, "{} characters", pod.len());
    }
}

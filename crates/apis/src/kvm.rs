//! The KVM custom resource of `provider.giantswarm.io/v1alpha1`, reconciled by kvm-operator:
//! [`KVMConfig`], one per workload cluster whose nodes are KVM virtual machines in pods of the
//! management cluster.
//!
//! The JSON shape follows `giantswarm/apiextensions` (`pkg/apis/provider/v1alpha1/kvm_types.go`),
//! so objects written for the Go operator are read unchanged, `null` lists included; field names
//! keep upstream's spelling (`clusterIPRange`, `dockerVolumeSizeGB`, `k8sKVM`). The status is
//! the shared [`StatusCluster`] lifecycle (`Creating` → `Created` → `Updating` → `Updated`,
//! `Deleting`) plus the node indexes kvm-operator allocates.
//!
//! # Validation
//!
//! The CRD rejects what a schema can: at least one master, cluster and node ids that fit the
//! names built from them, CIDR blocks ([`CIDR_PATTERN`]), ports and the VNI in range, memory
//! sizes qemu understands, node ids unique within each list (list-map keys), and CEL rules for
//! the lists of `spec.cluster` and `spec.kvm` having equal lengths and a node id used by both a
//! master and a worker. [`KVMConfigSpec::validate`] checks all of it again plus what a schema
//! cannot express (host bits in a CIDR block, duplicate node ports), so that objects stored
//! before the schema existed, or by an API server without CEL, still get a clear answer instead
//! of a crash (the Go operator indexed one list by the other's positions and panicked).

use std::collections::{BTreeMap, BTreeSet};

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::cluster_status::StatusCluster;
use crate::go::null_as_default;
use crate::validation::{CIDR_PATTERN, FieldError, check_cidr, into_result, parse_cidr};

/// A cluster id ([`crate::cluster_id`]): a lower-case letter, then lower-case letters and digits.
pub const CLUSTER_ID_PATTERN: &str = crate::cluster_id::PATTERN;
/// The longest cluster id: the VM's tap device is `tap-<id>`, and Linux interface names have at
/// most 15 characters.
pub const CLUSTER_ID_MAX_LENGTH: usize = crate::cluster_id::MAX_LENGTH;
/// A node id: a DNS label of at most [`NODE_ID_MAX_LENGTH`] characters.
pub const NODE_ID_PATTERN: &str = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";
/// The longest node id: the workload cluster node is named after its pod,
/// `worker-<id>-<replica set hash, ≤10>-<5>`, and a host name has at most 63 characters.
pub const NODE_ID_MAX_LENGTH: usize = 39;
/// A VM memory size as qemu's `-m` reads it: a number and `M` or `G`, e.g. `8G`, `1536M`.
pub const MEMORY_PATTERN: &str = r"^[0-9]+(\.[0-9]+)?[MG]$";
/// A port-mapping name: an IANA service name (lower-case letters, digits and `-`, ≤ 15).
pub const PORT_NAME_PATTERN: &str = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";
/// The largest flannel VNI: the node pods listen on host ports `23000 + VNI` and `47000 + VNI`.
pub const MAX_VNI: i64 = 65535 - 47000;

/// The desired state of a workload cluster whose nodes are KVM virtual machines.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "provider.giantswarm.io",
    version = "v1alpha1",
    kind = "KVMConfig",
    plural = "kvmconfigs",
    namespaced,
    status = "KVMConfigStatus",
    category = "giantswarm",
    category = "kvm",
    doc = "A workload cluster whose nodes are KVM virtual machines in pods of the management cluster.",
    printcolumn = r#"{"name":"Masters","type":"string","jsonPath":".spec.cluster.masters[*].id","description":"Master node ids"}"#,
    printcolumn = r#"{"name":"Release","type":"string","jsonPath":".metadata.labels.release\\.giantswarm\\.io/version","description":"Giant Swarm release"}"#,
    printcolumn = r#"{"name":"Operator","type":"string","jsonPath":".metadata.labels.kvm-operator\\.giantswarm\\.io/version","description":"kvm-operator version that reconciles the cluster"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "size(self.cluster.masters) == size(self.kvm.masters)",
        "message": "spec.kvm.masters must have one entry per spec.cluster.masters entry (they are matched by position)"
    },
    {
        "rule": "size(self.cluster.workers) == size(self.kvm.workers)",
        "message": "spec.kvm.workers must have one entry per spec.cluster.workers entry (they are matched by position)"
    },
    {
        "rule": "self.cluster.workers.all(w, !self.cluster.masters.exists(m, m.id == w.id))",
        "message": "a node id is used by both a master and a worker; give every node its own id"
    }
]))]
pub struct KVMConfigSpec {
    /// Provider-independent cluster settings.
    pub cluster: KVMConfigSpecCluster,
    /// KVM settings: one VM shape per node, matched by position to `spec.cluster`'s nodes.
    pub kvm: KVMConfigSpecKVM,
    /// Deprecated: the operator version is the `kvm-operator.giantswarm.io/version` label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version_bundle: Option<KVMConfigSpecVersionBundle>,
}

/// `spec.cluster`: upstream's provider-independent `Cluster` block.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KVMConfigSpecCluster {
    /// Calico settings of the workload cluster.
    #[serde(default, deserialize_with = "null_as_default")]
    pub calico: ClusterCalico,
    /// The customer (organization) that owns the cluster.
    #[serde(default, deserialize_with = "null_as_default")]
    pub customer: ClusterCustomer,
    /// Docker settings of the nodes.
    #[serde(default, deserialize_with = "null_as_default")]
    pub docker: ClusterDocker,
    /// etcd settings.
    #[serde(default, deserialize_with = "null_as_default")]
    pub etcd: ClusterEtcd,
    /// The cluster id: the management-cluster namespace of its objects and a part of their
    /// names, e.g. `xa5ly`.
    #[schemars(regex(pattern = CLUSTER_ID_PATTERN), length(min = 1, max = CLUSTER_ID_MAX_LENGTH))]
    pub id: String,
    /// Kubernetes settings.
    pub kubernetes: ClusterKubernetes,
    /// When disruptive work (rolling node replacement, max-age replacement) may run; the
    /// same settings as an AWSCluster's (`maxRollingNodePools` does not apply: a KVM cluster
    /// replaces one node at a time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maintenance: Option<crate::maintenance::Maintenance>,
    /// Replace nodes older than this, one at a time, drained first, inside the maintenance
    /// windows: a number and a unit such as `30d` or `720h`, at least a day.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_node_age: Option<String>,
    /// The control-plane nodes; at least one.
    #[serde(deserialize_with = "null_as_default")]
    #[schemars(length(min = 1, max = 7))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["id"]))]
    pub masters: Vec<ClusterNode>,
    /// Deprecated worker scaling bounds; the node lists are what counts.
    #[serde(default, deserialize_with = "null_as_default")]
    pub scaling: ClusterScaling,
    /// Deprecated and unused.
    #[serde(default)]
    pub version: String,
    /// The worker nodes.
    #[serde(default, deserialize_with = "null_as_default")]
    #[schemars(length(max = 250))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["id"]))]
    pub workers: Vec<ClusterNode>,
}

/// `spec.cluster.calico`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterCalico {
    /// The prefix length of the pod network, e.g. `16`.
    #[serde(default)]
    #[schemars(range(min = 0, max = 32))]
    pub cidr: i64,
    /// The MTU of the pod network.
    #[serde(default)]
    #[schemars(range(min = 0, max = 9000))]
    pub mtu: i64,
    /// The network address of the pod network, e.g. `10.2.0.0`.
    #[serde(default)]
    pub subnet: String,
}

/// `spec.cluster.customer`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterCustomer {
    /// The organization's id: the `customer` and `giantswarm.io/organization` label values.
    #[serde(default)]
    pub id: String,
}

/// `spec.cluster.docker`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterDocker {
    /// The docker daemon's bridge.
    #[serde(default, deserialize_with = "null_as_default")]
    pub daemon: ClusterDockerDaemon,
}

/// `spec.cluster.docker.daemon`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterDockerDaemon {
    /// The docker bridge's address and prefix (docker's `--bip`, so host bits are expected),
    /// e.g. `172.17.0.1/16`; empty for docker's default.
    #[serde(default)]
    #[schemars(regex(
        pattern = r"^$|^((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])/(3[0-2]|[12]?[0-9])$"
    ))]
    pub cidr: String,
}

/// `spec.cluster.etcd`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterEtcd {
    /// Extra names of the etcd certificate.
    #[serde(default)]
    pub alt_names: String,
    /// The etcd host name: the host of the `etcd` Ingress.
    #[serde(default)]
    pub domain: String,
    /// etcd's client port.
    #[serde(default)]
    #[schemars(range(min = 0, max = 65535))]
    pub port: i64,
    /// The key prefix.
    #[serde(default)]
    pub prefix: String,
}

/// `spec.cluster.kubernetes`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterKubernetes {
    /// The API server.
    pub api: ClusterKubernetesAPI,
    /// The cloud provider name given to the components; empty for none.
    #[serde(default)]
    pub cloud_provider: String,
    /// Cluster DNS.
    #[serde(default, deserialize_with = "null_as_default")]
    pub dns: ClusterKubernetesDNS,
    /// The cluster domain, e.g. `cluster.local`.
    #[serde(default)]
    pub domain: String,
    /// The ingress controller of the workload cluster.
    #[serde(default, deserialize_with = "null_as_default")]
    pub ingress_controller: ClusterKubernetesIngressController,
    /// Kubelet settings.
    #[serde(default, deserialize_with = "null_as_default")]
    pub kubelet: ClusterKubernetesKubelet,
    /// Node network setup.
    #[serde(default, deserialize_with = "null_as_default")]
    pub network_setup: ClusterKubernetesNetworkSetup,
    /// SSH access to the nodes.
    #[serde(default, deserialize_with = "null_as_default")]
    pub ssh: ClusterKubernetesSSH,
}

/// `spec.cluster.kubernetes.api`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterKubernetesAPI {
    /// The Service CIDR, e.g. `172.31.0.0/16`.
    #[serde(rename = "clusterIPRange")]
    #[schemars(regex(pattern = CIDR_PATTERN))]
    pub cluster_ip_range: String,
    /// The API host name, `api.<base domain>`: the host of the `api` Ingress.
    #[schemars(length(min = 1))]
    pub domain: String,
    /// The API server's port, typically 443.
    #[schemars(range(min = 1, max = 65535))]
    pub secure_port: i64,
}

/// `spec.cluster.kubernetes.dns`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterKubernetesDNS {
    /// The cluster DNS Service address.
    #[serde(default)]
    pub ip: String,
}

/// `spec.cluster.kubernetes.ingressController`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterKubernetesIngressController {
    /// Deprecated image setting.
    #[serde(default, deserialize_with = "null_as_default")]
    pub docker: DockerImage,
    /// The ingress domain.
    #[serde(default)]
    pub domain: String,
    /// The wildcard domain.
    #[serde(default)]
    pub wildcard_domain: String,
    /// The HTTP port.
    #[serde(default)]
    #[schemars(range(min = 0, max = 65535))]
    pub insecure_port: i64,
    /// The HTTPS port.
    #[serde(default)]
    #[schemars(range(min = 0, max = 65535))]
    pub secure_port: i64,
}

/// A deprecated `docker.image` setting, kept so that old objects read back unchanged.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DockerImage {
    /// The image; ignored.
    #[serde(default)]
    pub image: String,
}

/// `spec.cluster.kubernetes.kubelet`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterKubernetesKubelet {
    /// Extra names of the kubelet certificate.
    #[serde(default)]
    pub alt_names: String,
    /// The kubelet domain.
    #[serde(default)]
    pub domain: String,
    /// Extra node labels, comma-separated `key=value` pairs, added to kubelet's `--node-labels`.
    #[serde(default)]
    pub labels: String,
    /// The kubelet port.
    #[serde(default)]
    #[schemars(range(min = 0, max = 65535))]
    pub port: i64,
}

/// `spec.cluster.kubernetes.networkSetup`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterKubernetesNetworkSetup {
    /// Deprecated image setting.
    #[serde(default, deserialize_with = "null_as_default")]
    pub docker: DockerImage,
    /// kube-proxy settings.
    #[serde(default, deserialize_with = "null_as_default")]
    pub kube_proxy: ClusterKubernetesNetworkSetupKubeProxy,
}

/// `spec.cluster.kubernetes.networkSetup.kubeProxy`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterKubernetesNetworkSetupKubeProxy {
    /// kube-proxy's `--conntrack-max-per-core`; 0 for its default.
    #[serde(default)]
    #[schemars(range(min = 0))]
    pub conntrack_max_per_core: i64,
}

/// `spec.cluster.kubernetes.ssh`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterKubernetesSSH {
    /// Users that may log in to the nodes.
    #[serde(default, deserialize_with = "null_as_default")]
    pub user_list: Vec<ClusterKubernetesSSHUser>,
}

/// One entry of `spec.cluster.kubernetes.ssh.userList`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterKubernetesSSHUser {
    /// The user name.
    pub name: String,
    /// The user's SSH public key.
    pub public_key: String,
}

/// A node of `spec.cluster.masters` or `spec.cluster.workers`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterNode {
    /// The node id, stable across rollouts of the node, e.g. `8bb5v`.
    #[schemars(regex(pattern = NODE_ID_PATTERN), length(min = 1, max = NODE_ID_MAX_LENGTH))]
    pub id: String,
}

/// `spec.cluster.scaling` (deprecated).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterScaling {
    /// The largest worker count.
    #[serde(default)]
    pub max: i64,
    /// The smallest worker count.
    #[serde(default)]
    pub min: i64,
}

/// `spec.kvm`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KVMConfigSpecKVM {
    /// Deprecated: the endpoint-updater image is fixed.
    #[serde(default, deserialize_with = "null_as_default")]
    pub endpoint_updater: KVMConfigSpecKVMImage,
    /// The node pods' settings.
    #[serde(rename = "k8sKVM", default, deserialize_with = "null_as_default")]
    pub k8s_kvm: KVMConfigSpecKVMK8sKVM,
    /// One VM shape per master, matched by position to `spec.cluster.masters`.
    #[serde(deserialize_with = "null_as_default")]
    #[schemars(length(min = 1, max = 7))]
    pub masters: Vec<KVMConfigSpecKVMNode>,
    /// The cluster's network on the management-cluster hosts.
    pub network: KVMConfigSpecKVMNetwork,
    /// Deprecated: the node-controller image is fixed.
    #[serde(default, deserialize_with = "null_as_default")]
    pub node_controller: KVMConfigSpecKVMImage,
    /// The ports of the `worker` NodePort Service; `http` 30010 and `https` 30011 when empty.
    #[serde(default, deserialize_with = "null_as_default")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub port_mappings: Vec<KVMConfigSpecKVMPortMapping>,
    /// One VM shape per worker, matched by position to `spec.cluster.workers`.
    #[serde(default, deserialize_with = "null_as_default")]
    #[schemars(length(max = 250))]
    pub workers: Vec<KVMConfigSpecKVMNode>,
}

/// A deprecated `{docker: {image}}` block.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KVMConfigSpecKVMImage {
    /// The image; ignored.
    #[serde(default, deserialize_with = "null_as_default")]
    pub docker: DockerImage,
}

/// Where masters keep their etcd data.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum StorageType {
    /// A directory on the management-cluster host (the default; also written as `""`).
    #[default]
    #[serde(rename = "hostPath", alias = "")]
    HostPath,
    /// A PersistentVolumeClaim per master.
    #[serde(rename = "persistentVolume")]
    PersistentVolume,
}

/// `spec.kvm.k8sKVM`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KVMConfigSpecKVMK8sKVM {
    /// Deprecated: the k8s-kvm image is fixed.
    #[serde(default, deserialize_with = "null_as_default")]
    pub docker: DockerImage,
    /// Where masters keep their etcd data; `hostPath` when absent or empty.
    #[serde(default, deserialize_with = "null_as_default")]
    #[schemars(schema_with = "storage_type_schema")]
    pub storage_type: StorageType,
}

/// Go-written objects say `""` for the default storage type; the schema accepts it so that they
/// stay writable.
fn storage_type_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "string",
        "enum": ["", "hostPath", "persistentVolume"],
        "description": "Where masters keep their etcd data: hostPath (the default, also \"\") or persistentVolume."
    })
}

/// One VM: its CPU, memory and disks.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KVMConfigSpecKVMNode {
    /// Cores: the pod's CPU request and limit, and qemu's `-smp`.
    #[schemars(range(min = 1, max = 256))]
    pub cpus: i64,
    /// The docker and kubelet disk size in GB (workers), when `dockerVolumeSizeGB` is unset.
    #[serde(default)]
    #[schemars(range(min = 0.0))]
    pub disk: f64,
    /// The docker and kubelet disk size in GB (workers); wins over `disk`.
    #[serde(rename = "dockerVolumeSizeGB", default)]
    #[schemars(range(min = 0))]
    pub docker_volume_size_gb: i64,
    /// Host directories passed through to the VM (workers).
    #[serde(default, deserialize_with = "null_as_default")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["mountTag"]))]
    pub host_volumes: Vec<KVMConfigSpecKVMNodeHostVolume>,
    /// The VM's memory as qemu reads it, e.g. `8G`; the pod requests more (qemu's overhead).
    #[schemars(regex(pattern = MEMORY_PATTERN))]
    pub memory: String,
}

/// A host directory passed through to a worker VM over 9p.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KVMConfigSpecKVMNodeHostVolume {
    /// The 9p mount tag; also selects the local PersistentVolume labelled `mount-tag=<tag>`, and
    /// names the pod volume and the PVC, so it is a DNS label.
    #[schemars(regex(pattern = NODE_ID_PATTERN), length(min = 1, max = 31))]
    pub mount_tag: String,
    /// The directory on the management-cluster host.
    #[schemars(regex(pattern = r"^/[A-Za-z0-9_./-]*$"))]
    pub host_path: String,
}

/// `spec.kvm.network`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KVMConfigSpecKVMNetwork {
    /// The cluster's flannel network.
    pub flannel: KVMConfigSpecKVMNetworkFlannel,
}

/// `spec.kvm.network.flannel`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KVMConfigSpecKVMNetworkFlannel {
    /// The VXLAN network id; it also picks the node pods' host ports (`23000 + vni` for the
    /// health check, `47000 + vni` for the shutdown deferrer).
    #[schemars(range(min = 1, max = MAX_VNI))]
    pub vni: i64,
}

/// One port of the `worker` NodePort Service.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KVMConfigSpecKVMPortMapping {
    /// The port name, e.g. `http`.
    #[schemars(regex(pattern = PORT_NAME_PATTERN), length(min = 1, max = 15))]
    pub name: String,
    /// The node port on the management cluster; 0 lets Kubernetes choose.
    #[serde(default)]
    #[schemars(range(min = 0, max = 65535))]
    pub node_port: i64,
    /// The port on the worker VMs (also the Service port).
    #[schemars(range(min = 1, max = 65535))]
    pub target_port: i64,
}

/// `spec.versionBundle` (deprecated).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KVMConfigSpecVersionBundle {
    /// Unused.
    #[serde(default)]
    pub version: String,
}

/// `status` of a [`KVMConfig`].
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KVMConfigStatus {
    /// `metav1.Condition`s: `Ready` (bad input names the field and the fix here) and
    /// `ReleaseResolved`, as for every kind the operators reconcile. New here: the Go
    /// operator's lifecycle is in `cluster.conditions`, which stays as it was.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition>,
    /// The cluster lifecycle, nodes and versions.
    #[serde(default, deserialize_with = "null_as_default")]
    pub cluster: StatusCluster,
    /// What kvm-operator allocated.
    #[serde(default, deserialize_with = "null_as_default")]
    pub kvm: KVMConfigStatusKVM,
}

/// `status.kvm`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KVMConfigStatusKVM {
    /// The index of each node id, from 1: it names the node's iSCSI initiator. Allocated by
    /// kvm-operator; an index is freed when its node is removed.
    #[serde(default, deserialize_with = "null_as_default")]
    pub node_indexes: BTreeMap<String, i64>,
}

/// Whether `memory` (a [`MEMORY_PATTERN`] value) is positive, in megabytes.
pub fn memory_megabytes(memory: &str) -> Option<f64> {
    let (number, factor) =
        if let Some(n) = memory.strip_suffix('G') { (n, 1024.0) } else { (memory.strip_suffix('M')?, 1.0) };
    let value: f64 = number.parse().ok()?;
    (value.is_finite() && value >= 0.0 && !number.starts_with(['+', '-'])).then_some(value * factor)
}

impl KVMConfigSpec {
    /// Every problem the schema cannot catch, or that an object stored before the schema may
    /// have: node lists of `spec.cluster` and `spec.kvm` of different lengths, no masters,
    /// duplicate node ids, malformed or ambiguous CIDR blocks, memory sizes and port mappings.
    pub fn validate(&self) -> Result<(), Vec<FieldError>> {
        let mut errors = Vec::new();
        let cluster = &self.cluster;
        if let Err(e) = crate::cluster_id::check("spec.cluster.id", &cluster.id) {
            errors.push(e);
        }
        if cluster.masters.is_empty() {
            errors.push(FieldError::new(
                "spec.cluster.masters",
                "[]",
                "a cluster needs at least one master; add an entry such as {id: m0001} here and its VM shape to \
                 spec.kvm.masters",
            ));
        }
        for (role, ids, shapes) in
            [("masters", &cluster.masters, &self.kvm.masters), ("workers", &cluster.workers, &self.kvm.workers)]
        {
            if ids.len() != shapes.len() {
                errors.push(FieldError::new(
                    format!("spec.kvm.{role}"),
                    format!("{} entries", shapes.len()),
                    format!(
                        "spec.cluster.{role} has {} entries and they are matched by position; give \
                         spec.kvm.{role} exactly one entry per node",
                        ids.len()
                    ),
                ));
            }
        }
        let mut seen = BTreeMap::new();
        for (role, nodes) in [("masters", &cluster.masters), ("workers", &cluster.workers)] {
            for (i, node) in nodes.iter().enumerate() {
                let field = format!("spec.cluster.{role}[{i}].id");
                if node.id.is_empty() || node.id.len() > NODE_ID_MAX_LENGTH || !is_dns_label(&node.id) {
                    errors.push(FieldError::new(
                        &field,
                        &node.id,
                        format!(
                            "must be 1 to {NODE_ID_MAX_LENGTH} lower-case letters, digits or '-', starting and \
                             ending with a letter or digit"
                        ),
                    ));
                }
                if let Some(first) = seen.insert(node.id.as_str(), field.clone()) {
                    errors.push(FieldError::new(
                        &field,
                        &node.id,
                        format!("node id is already used by {first}; give every node its own id"),
                    ));
                }
            }
        }
        for (role, shapes) in [("masters", &self.kvm.masters), ("workers", &self.kvm.workers)] {
            for (i, shape) in shapes.iter().enumerate() {
                check_shape(&format!("spec.kvm.{role}[{i}]"), shape, &mut errors);
            }
        }
        if !cluster.kubernetes.api.cluster_ip_range.is_empty() {
            check_cidr(
                "spec.cluster.kubernetes.api.clusterIPRange",
                &cluster.kubernetes.api.cluster_ip_range,
                &mut errors,
            );
        }
        if !cluster.docker.daemon.cidr.is_empty() && parse_cidr(&cluster.docker.daemon.cidr).is_none() {
            errors.push(FieldError::new(
                "spec.cluster.docker.daemon.cidr",
                &cluster.docker.daemon.cidr,
                "must be the docker bridge's address and prefix, such as 172.17.0.1/16",
            ));
        }
        if !cluster.calico.subnet.is_empty() {
            check_cidr(
                "spec.cluster.calico.subnet",
                &format!("{}/{}", cluster.calico.subnet, cluster.calico.cidr),
                &mut errors,
            );
        }
        let api = &cluster.kubernetes.api;
        if api.domain.is_empty() {
            errors.push(FieldError::new(
                "spec.cluster.kubernetes.api.domain",
                "",
                "set the workload cluster's API host name, such as api.xa5ly.k8s.example.com",
            ));
        }
        if !(1..=65535).contains(&api.secure_port) {
            errors.push(FieldError::new(
                "spec.cluster.kubernetes.api.securePort",
                api.secure_port,
                "must be a port from 1 to 65535, typically 443",
            ));
        }
        let vni = self.kvm.network.flannel.vni;
        if !(1..=MAX_VNI).contains(&vni) {
            errors.push(FieldError::new(
                "spec.kvm.network.flannel.vni",
                vni,
                format!("must be from 1 to {MAX_VNI}: the node pods listen on host ports 23000+vni and 47000+vni"),
            ));
        }
        check_port_mappings(&self.kvm.port_mappings, &mut errors);
        into_result(errors)
    }
}

impl KVMConfig {
    /// See [`KVMConfigSpec::validate`].
    pub fn validate(&self) -> Result<(), Vec<FieldError>> {
        self.spec.validate()
    }

    /// The cluster id (`spec.cluster.id`).
    pub fn cluster_id(&self) -> &str {
        &self.spec.cluster.id
    }

    /// The allocated node indexes, empty before the first allocation.
    pub fn node_indexes(&self) -> BTreeMap<String, i64> {
        self.status.as_ref().map(|s| s.kvm.node_indexes.clone()).unwrap_or_default()
    }
}

fn is_dns_label(value: &str) -> bool {
    let bytes = value.as_bytes();
    let inner = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-';
    let edge = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    !bytes.is_empty() && bytes.iter().all(inner) && bytes.first().is_some_and(edge) && bytes.last().is_some_and(edge)
}

fn check_shape(field: &str, shape: &KVMConfigSpecKVMNode, errors: &mut Vec<FieldError>) {
    if shape.cpus < 1 {
        errors.push(FieldError::new(format!("{field}.cpus"), shape.cpus, "must be at least 1 core"));
    }
    if !memory_megabytes(&shape.memory).is_some_and(|m| m > 0.0) {
        errors.push(FieldError::new(
            format!("{field}.memory"),
            &shape.memory,
            "must be a positive size qemu reads, a number followed by M or G, such as 8G or 1536M",
        ));
    }
    if shape.disk < 0.0 || !shape.disk.is_finite() {
        errors.push(FieldError::new(format!("{field}.disk"), shape.disk, "must be a size in GB of 0 or more"));
    }
    if shape.docker_volume_size_gb < 0 {
        errors.push(FieldError::new(
            format!("{field}.dockerVolumeSizeGB"),
            shape.docker_volume_size_gb,
            "must be a size in GB of 0 or more (0 for the default)",
        ));
    }
    let mut tags = BTreeSet::new();
    for (i, volume) in shape.host_volumes.iter().enumerate() {
        if volume.mount_tag.len() > 31 || !is_dns_label(&volume.mount_tag) {
            errors.push(FieldError::new(
                format!("{field}.hostVolumes[{i}].mountTag"),
                &volume.mount_tag,
                "must be 1 to 31 lower-case letters, digits or '-' (it names a pod volume and a PVC)",
            ));
        } else if !tags.insert(volume.mount_tag.as_str()) {
            errors.push(FieldError::new(
                format!("{field}.hostVolumes[{i}].mountTag"),
                &volume.mount_tag,
                "mount tag is used twice on this node; give each host volume its own tag",
            ));
        }
        if !volume.host_path.starts_with('/') {
            errors.push(FieldError::new(
                format!("{field}.hostVolumes[{i}].hostPath"),
                &volume.host_path,
                "must be an absolute path on the management-cluster host, such as /data/local",
            ));
        }
    }
}

fn check_port_mappings(mappings: &[KVMConfigSpecKVMPortMapping], errors: &mut Vec<FieldError>) {
    let mut names = BTreeSet::new();
    let mut node_ports = BTreeMap::new();
    let mut target_ports = BTreeMap::new();
    for (i, mapping) in mappings.iter().enumerate() {
        let field = format!("spec.kvm.portMappings[{i}]");
        if mapping.name.is_empty() || mapping.name.len() > 15 || !is_dns_label(&mapping.name) {
            errors.push(FieldError::new(
                format!("{field}.name"),
                &mapping.name,
                "must be 1 to 15 lower-case letters, digits or '-', such as http",
            ));
        } else if !names.insert(mapping.name.as_str()) {
            errors.push(FieldError::new(
                format!("{field}.name"),
                &mapping.name,
                "port name is used twice; give each mapping its own name",
            ));
        }
        if !(1..=65535).contains(&mapping.target_port) {
            errors.push(FieldError::new(
                format!("{field}.targetPort"),
                mapping.target_port,
                "must be a port from 1 to 65535",
            ));
        } else if let Some(first) = target_ports.insert(mapping.target_port, i) {
            errors.push(FieldError::new(
                format!("{field}.targetPort"),
                mapping.target_port,
                format!("port is already mapped by spec.kvm.portMappings[{first}]; a Service port is used once"),
            ));
        }
        if !(0..=65535).contains(&mapping.node_port) {
            errors.push(FieldError::new(
                format!("{field}.nodePort"),
                mapping.node_port,
                "must be a port from 1 to 65535, or 0 to let Kubernetes choose",
            ));
        } else if mapping.node_port != 0
            && let Some(first) = node_ports.insert(mapping.node_port, i)
        {
            errors.push(FieldError::new(
                format!("{field}.nodePort"),
                mapping.node_port,
                format!("node port is already used by spec.kvm.portMappings[{first}]; use another or 0"),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::CustomResourceExt;
    use serde_json::json;

    /// A Go-written object: the shape `cluster-operator` stores, with `null` lists.
    const GO_WRITTEN: &str = r#"{
        "apiVersion": "provider.giantswarm.io/v1alpha1", "kind": "KVMConfig",
        "metadata": {"name": "xa5ly", "namespace": "default",
                     "labels": {"kvm-operator.giantswarm.io/version": "3.18.6", "release.giantswarm.io/version": "14.1.0"}},
        "spec": {
            "cluster": {
                "calico": {"cidr": 16, "mtu": 1430, "subnet": "10.2.0.0"},
                "customer": {"id": "acme"},
                "docker": {"daemon": {"cidr": "172.17.0.1/16"}},
                "etcd": {"altNames": "", "domain": "etcd.xa5ly.k8s.example.com", "port": 443, "prefix": "giantswarm.io"},
                "id": "xa5ly",
                "kubernetes": {
                    "api": {"clusterIPRange": "172.31.0.0/16", "domain": "api.xa5ly.k8s.example.com", "securePort": 443},
                    "cloudProvider": "", "dns": {"ip": "172.31.0.10"}, "domain": "cluster.local",
                    "ingressController": {"docker": {"image": ""}, "domain": "ingress.xa5ly.k8s.example.com",
                                          "wildcardDomain": "*.xa5ly.k8s.example.com", "insecurePort": 30010, "securePort": 30011},
                    "kubelet": {"altNames": "", "domain": "worker.xa5ly.k8s.example.com",
                                "labels": "giantswarm.io/provider=kvm,kvm-operator.giantswarm.io/version=3.18.6", "port": 10250},
                    "networkSetup": {"docker": {"image": ""}, "kubeProxy": {"conntrackMaxPerCore": 0}},
                    "ssh": {"userList": null}
                },
                "masters": [{"id": "m7q2d"}],
                "scaling": {"max": 2, "min": 2},
                "version": "",
                "workers": [{"id": "w1k9c"}, {"id": "w4z8p"}]
            },
            "kvm": {
                "endpointUpdater": {"docker": {"image": ""}},
                "k8sKVM": {"docker": {"image": ""}, "storageType": ""},
                "masters": [{"cpus": 2, "disk": 20, "memory": "3G", "dockerVolumeSizeGB": 0, "hostVolumes": null}],
                "network": {"flannel": {"vni": 26}},
                "nodeController": {"docker": {"image": ""}},
                "portMappings": null,
                "workers": [
                    {"cpus": 4, "disk": 40, "memory": "8G", "dockerVolumeSizeGB": 50, "hostVolumes": [{"mountTag": "fast", "hostPath": "/data/fast"}]},
                    {"cpus": 4, "disk": 40, "memory": "8G", "dockerVolumeSizeGB": 0, "hostVolumes": null}
                ]
            },
            "versionBundle": {"version": ""}
        },
        "status": {"cluster": {"conditions": null, "nodes": null, "versions": null},
                   "kvm": {"nodeIndexes": {"m7q2d": 1, "w1k9c": 2, "w4z8p": 3}}}
    }"#;

    fn go_written() -> KVMConfig {
        serde_json::from_str(GO_WRITTEN).unwrap_or_else(|e| panic!("{e}"))
    }

    fn fields(errors: &[FieldError]) -> Vec<&str> {
        errors.iter().map(|e| e.field.as_str()).collect()
    }

    #[test]
    fn reads_go_written_objects() {
        let config = go_written();
        assert_eq!(config.cluster_id(), "xa5ly");
        assert_eq!(config.spec.kvm.k8s_kvm.storage_type, StorageType::HostPath, "\"\" means hostPath");
        assert_eq!(config.spec.kvm.workers[0].host_volumes[0].mount_tag, "fast");
        assert!(config.spec.kvm.port_mappings.is_empty());
        assert_eq!(config.node_indexes()["w4z8p"], 3);
        assert_eq!(config.validate(), Ok(()));
        // Written back with upstream's names.
        let written = serde_json::to_value(&config.spec).unwrap_or_default();
        assert_eq!(written["kvm"]["k8sKVM"]["storageType"], "hostPath");
        assert_eq!(written["cluster"]["kubernetes"]["api"]["clusterIPRange"], "172.31.0.0/16");
        assert_eq!(written["kvm"]["workers"][0]["dockerVolumeSizeGB"], 50);
        let pv: KVMConfigSpecKVMK8sKVM = serde_json::from_value(json!({"storageType": "persistentVolume"})).unwrap();
        assert_eq!(pv.storage_type, StorageType::PersistentVolume);
        assert!(serde_json::from_value::<KVMConfigSpecKVMK8sKVM>(json!({"storageType": "nfs"})).is_err());
    }

    #[test]
    fn node_lists_of_different_lengths_and_no_masters_are_named() {
        let mut config = go_written();
        config.spec.kvm.workers.pop();
        config.spec.cluster.masters.clear();
        let errors = config.validate().unwrap_err();
        assert_eq!(fields(&errors), ["spec.cluster.masters", "spec.kvm.masters", "spec.kvm.workers"]);
        assert!(errors[0].message.contains("at least one master"), "{}", errors[0]);
        assert_eq!(
            errors[2].to_string(),
            "spec.kvm.workers: invalid value \"1 entries\": spec.cluster.workers has 2 entries and they are \
             matched by position; give spec.kvm.workers exactly one entry per node"
        );
    }

    #[test]
    fn duplicate_and_malformed_node_ids_are_named() {
        let mut config = go_written();
        config.spec.cluster.workers[1].id = "m7q2d".into();
        config.spec.cluster.workers[0].id = "W1".into();
        let errors = config.validate().unwrap_err();
        assert_eq!(fields(&errors), ["spec.cluster.workers[0].id", "spec.cluster.workers[1].id"]);
        assert!(errors[1].message.contains("already used by spec.cluster.masters[0].id"), "{}", errors[1]);
        config.spec.cluster.id = "much-too-long-id".into();
        assert_eq!(fields(&config.validate().unwrap_err())[0], "spec.cluster.id");
    }

    #[test]
    fn malformed_cidrs_memory_and_vni_are_named() {
        let mut config = go_written();
        config.spec.cluster.kubernetes.api.cluster_ip_range = "172.31.0.1/16".into();
        config.spec.cluster.calico.subnet = "10.2.3.0".into();
        config.spec.cluster.docker.daemon.cidr = "172.17.0.1".into();
        config.spec.kvm.workers[1].memory = "8Gi".into();
        config.spec.kvm.masters[0].cpus = 0;
        config.spec.kvm.network.flannel.vni = 20000;
        let errors = config.validate().unwrap_err();
        assert_eq!(
            fields(&errors),
            [
                "spec.kvm.masters[0].cpus",
                "spec.kvm.workers[1].memory",
                "spec.cluster.kubernetes.api.clusterIPRange",
                "spec.cluster.docker.daemon.cidr",
                "spec.cluster.calico.subnet",
                "spec.kvm.network.flannel.vni",
            ]
        );
        assert_eq!(errors[2].message, "host bits are set; use the network address 172.31.0.0/16");
        assert!(errors[1].message.contains("such as 8G"), "{}", errors[1]);
        assert_eq!(memory_megabytes("1536M"), Some(1536.0));
        assert_eq!(memory_megabytes("2.5G"), Some(2560.0));
        assert_eq!(memory_megabytes("8"), None);
    }

    #[test]
    fn malformed_port_mappings_are_named() {
        let mut config = go_written();
        let mapping = |name: &str, node_port, target_port| KVMConfigSpecKVMPortMapping {
            name: name.into(),
            node_port,
            target_port,
        };
        config.spec.kvm.port_mappings = vec![
            mapping("http", 30010, 30010),
            mapping("http", 30011, 30011),
            mapping("metrics", 30010, 0),
            mapping("auto", 0, 8080),
            mapping("auto2", 0, 8081),
            mapping("HTTPS", 70000, 443),
        ];
        let errors = config.validate().unwrap_err();
        assert_eq!(
            fields(&errors),
            [
                "spec.kvm.portMappings[1].name",
                "spec.kvm.portMappings[2].targetPort",
                "spec.kvm.portMappings[2].nodePort",
                "spec.kvm.portMappings[5].name",
                "spec.kvm.portMappings[5].nodePort",
            ]
        );
        assert!(errors[2].message.contains("already used by spec.kvm.portMappings[0]"), "{}", errors[2]);
    }

    #[test]
    fn host_volumes_are_checked() {
        let mut config = go_written();
        config.spec.kvm.workers[0]
            .host_volumes
            .push(KVMConfigSpecKVMNodeHostVolume { mount_tag: "fast".into(), host_path: "data".into() });
        let errors = config.validate().unwrap_err();
        assert_eq!(
            fields(&errors),
            ["spec.kvm.workers[0].hostVolumes[1].mountTag", "spec.kvm.workers[0].hostVolumes[1].hostPath"]
        );
    }

    fn schema() -> serde_json::Value {
        let crd = KVMConfig::crd();
        serde_json::to_value(crd.spec.versions[0].schema.as_ref().and_then(|s| s.open_api_v3_schema.as_ref()))
            .unwrap_or_default()
    }

    #[test]
    fn the_schema_rejects_what_it_can() {
        let crd = KVMConfig::crd();
        assert_eq!(crd.metadata.name.as_deref(), Some("kvmconfigs.provider.giantswarm.io"));
        assert_eq!(crd.spec.scope, "Namespaced");
        assert!(crd.spec.versions[0].subresources.as_ref().and_then(|s| s.status.as_ref()).is_some());

        let schema = schema();
        let spec = &schema["properties"]["spec"];
        let rules: Vec<&str> = spec["x-kubernetes-validations"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r["rule"].as_str())
            .collect();
        assert_eq!(rules.len(), 3, "{spec}");
        assert!(rules[0].contains("size(self.cluster.masters) == size(self.kvm.masters)"));
        let cluster = &spec["properties"]["cluster"]["properties"];
        assert_eq!(cluster["masters"]["minItems"], 1);
        assert_eq!(cluster["masters"]["x-kubernetes-list-type"], "map");
        assert_eq!(cluster["masters"]["x-kubernetes-list-map-keys"], json!(["id"]));
        assert_eq!(cluster["workers"]["x-kubernetes-list-map-keys"], json!(["id"]));
        assert_eq!(cluster["id"]["maxLength"], CLUSTER_ID_MAX_LENGTH);
        assert_eq!(cluster["masters"]["items"]["properties"]["id"]["pattern"], NODE_ID_PATTERN);
        assert_eq!(cluster["kubernetes"]["properties"]["api"]["properties"]["clusterIPRange"]["pattern"], CIDR_PATTERN);
        let kvm = &spec["properties"]["kvm"]["properties"];
        assert_eq!(kvm["masters"]["minItems"], 1);
        assert_eq!(kvm["network"]["properties"]["flannel"]["properties"]["vni"]["maximum"], MAX_VNI as f64);
        assert_eq!(kvm["masters"]["items"]["properties"]["memory"]["pattern"], MEMORY_PATTERN);
        assert_eq!(kvm["portMappings"]["x-kubernetes-list-map-keys"], json!(["name"]));
        assert_eq!(kvm["k8sKVM"]["properties"]["storageType"]["enum"], json!(["", "hostPath", "persistentVolume"]));
        let status = &schema["properties"]["status"]["properties"];
        assert_eq!(status["kvm"]["properties"]["nodeIndexes"]["additionalProperties"]["type"], "integer");
    }
}

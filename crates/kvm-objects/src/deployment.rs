//! The node Deployments (reference §5): one per workload-cluster node, replicas 1, `Recreate`,
//! a privileged host-network pod whose `k8s-kvm` container runs the node as a qemu VM, with
//! three sidecars: the endpoint updater (publishes the VM IP), the health checker (the probes'
//! target) and the shutdown deferrer (holds the VM's power-off until the node is drained).
//! Plus the PersistentVolumeClaims of etcd data (storage type `persistentVolume`) and of
//! workers' host volumes.
//!
//! Departures from the original, each deliberate:
//! - every Deployment carries [`keys::SPEC_HASH`], a digest of its pod template, so that a
//!   change of CPU, memory, disks, host volumes or the operator's DNS/NTP settings rolls the
//!   node (the original rolled only on version changes, §9.1, §14.5); the pod template carries
//!   the release version (label `release.giantswarm.io/version`), so a new Release replaces
//!   every node even when none of the annotated components changed;
//! - the version labels and annotations name the running operator's version, not the
//!   KVMConfig's `kvm-operator.giantswarm.io/version` label;
//! - the etcd PVC and host directory are named after the node id, not its position (§14.2);
//! - memory requests are in `Mi`, the unit qemu's `-m` uses: the original wrote the same
//!   numbers with the decimal `M` suffix and so requested about 5 % less than the VM takes;
//! - [`stale_pvcs`] names the PVCs of removed nodes, which the original kept until the cluster
//!   was deleted (§14.3).

use std::collections::{BTreeMap, BTreeSet};

use apis::kvm::StorageType;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::cluster::{ANNOTATED_COMPONENTS, Cluster, Node, Role};
use crate::names::{self, keys};

/// The endpoint-updater sidecar's image.
pub const ENDPOINT_UPDATER_IMAGE: &str = "quay.io/giantswarm/k8s-endpoint-updater:0.1.0";
/// The VM container's image.
pub const K8S_KVM_IMAGE: &str = "quay.io/giantswarm/k8s-kvm:0.6.2";
/// The health-check sidecar's image.
pub const HEALTH_IMAGE: &str = "quay.io/giantswarm/k8s-kvm-health:0.1.0";
/// The shutdown-deferrer sidecar's image.
pub const SHUTDOWN_DEFERRER_IMAGE: &str = "quay.io/giantswarm/shutdown-deferrer:0.1.0";

/// The images of a node pod's four containers; by default the ones above.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodePodImages {
    /// The endpoint-updater sidecar.
    pub endpoint_updater: String,
    /// The VM container, k8s-kvm.
    pub k8s_kvm: String,
    /// The health-check sidecar.
    pub health: String,
    /// The shutdown-deferrer sidecar.
    pub shutdown_deferrer: String,
}

impl Default for NodePodImages {
    fn default() -> Self {
        Self {
            endpoint_updater: ENDPOINT_UPDATER_IMAGE.into(),
            k8s_kvm: K8S_KVM_IMAGE.into(),
            health: HEALTH_IMAGE.into(),
            shutdown_deferrer: SHUTDOWN_DEFERRER_IMAGE.into(),
        }
    }
}
/// How long a node pod may take to stop: node-operator's drain timeout (10 min).
pub const TERMINATION_GRACE_SECONDS: i64 = 600;
/// The size of a master's etcd PVC.
pub const ETCD_PVC_SIZE: &str = "15Gi";
/// The storage class of etcd PVCs.
pub const ETCD_STORAGE_CLASS: &str = "g8s-storage";
/// The storage class of workers' host-volume PVCs.
pub const HOST_VOLUME_STORAGE_CLASS: &str = "local-storage";
/// The host directory caching Flatcar images.
pub const IMAGES_HOST_PATH: &str = "/var/lib/flatcar-kvm-images";

/// The labels of a node's Deployment and PVCs.
fn node_labels(cluster: &Cluster, node: &Node) -> BTreeMap<String, String> {
    let mut labels = cluster.common_labels();
    labels.insert(keys::APP.into(), node.role.as_str().into());
    labels.insert(keys::NODE.into(), node.id.clone());
    if cluster.runs_etcd(node) {
        labels.insert(keys::ETCD_MEMBER.into(), "true".into());
    }
    labels
}

/// The memory the pod requests for a VM of `memory` (a `MEMORY_PATTERN` value), in MiB:
/// masters the VM plus 1536 (qemu and the sidecars); workers the VM rounded up to whole GiB plus
/// 512 plus 768 per started 12 GiB beyond the first two slots (reference §5.3; 8G → 10240).
pub fn memory_request_mib(role: Role, memory: &str) -> u64 {
    let vm = apis::kvm::memory_megabytes(memory).unwrap_or_default();
    match role {
        Role::Master => vm.ceil() as u64 + 1024 + 512,
        Role::Worker => {
            let gib = (vm / 1024.0).ceil() as u64;
            gib * 1024 + 512 + 768 * (2 + gib / 12)
        }
    }
}

/// `DISK_DOCKER` and `DISK_KUBELET` of a node: masters 50G and 5G; workers their
/// `dockerVolumeSizeGB`, else their `disk`, else the masters' sizes.
pub fn disk_sizes(node: &Node) -> (String, String) {
    let defaults = ("50G".to_string(), "5G".to_string());
    if node.role == Role::Master {
        return defaults;
    }
    if node.shape.docker_volume_size_gb > 0 {
        let size = format!("{}G", node.shape.docker_volume_size_gb);
        (size.clone(), size)
    } else if node.shape.disk > 0.0 {
        let size = format!("{}G", node.shape.disk);
        (size.clone(), size)
    } else {
        defaults
    }
}

/// The Deployment of `node`.
pub fn deployment(cluster: &Cluster, node: &Node) -> Deployment {
    let template = pod_template(cluster, node);
    let mut labels = node_labels(cluster, node);
    labels.insert(apis::labels::MANAGED_BY.into(), names::OPERATOR.into());
    let selector = BTreeMap::from([
        (keys::APP.to_string(), node.role.as_str().to_string()),
        ("cluster".to_string(), cluster.id.clone()),
        (keys::NODE.to_string(), node.id.clone()),
    ]);
    let deployment = json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": names::deployment(node.role, &node.id),
            "namespace": names::namespace(&cluster.id),
            "labels": labels,
            "annotations": {
                keys::RELEASE_VERSION: cluster.release_version,
                keys::VERSION_BUNDLE_VERSION: cluster.operator_version,
                keys::SPEC_HASH: spec_hash(&template),
            },
        },
        "spec": {
            "replicas": 1,
            "strategy": { "type": "Recreate" },
            "selector": { "matchLabels": selector },
            "template": template,
        },
    });
    serde_json::from_value(deployment).expect("the Deployment JSON has the Deployment shape")
}

/// SHA-256 (hex, first 16 bytes) of the canonical JSON of a pod template.
pub fn spec_hash(template: &Value) -> String {
    let digest = Sha256::digest(ignition::canonical_json(template).as_bytes());
    digest[..16].iter().map(|b| format!("{b:02x}")).collect()
}

fn env(name: &str, value: impl Into<String>) -> Value {
    json!({ "name": name, "value": value.into() })
}

fn env_field(name: &str, path: &str) -> Value {
    json!({ "name": name, "valueFrom": { "fieldRef": { "apiVersion": "v1", "fieldPath": path } } })
}

fn pod_template(cluster: &Cluster, node: &Node) -> Value {
    let role = node.role.as_str();
    let mut labels = cluster.common_labels();
    labels.insert(keys::APP.into(), role.into());
    labels.insert(keys::NODE.into(), node.id.clone());
    labels.insert(keys::POD_WATCHER.into(), names::OPERATOR.into());
    labels.insert(apis::labels::KVM_OPERATOR_VERSION.into(), cluster.operator_version.clone());
    if cluster.runs_etcd(node) {
        labels.insert(keys::ETCD_MEMBER.into(), "true".into());
    }
    // The release in the pod template: a new Release replaces every node (one at a time), even
    // when none of the annotated components changed, and the node pod names the release its
    // VM runs (the kubelet labels the workload-cluster node with it).
    labels.insert(apis::labels::RELEASE_VERSION.into(), cluster.release_version.clone());
    let mut annotations = BTreeMap::from([
        (keys::API_ENDPOINT.to_string(), cluster.api_domain.clone()),
        (keys::VM_IP.to_string(), String::new()),
        (keys::SERVICE.to_string(), role.to_string()),
        (keys::DRAINED.to_string(), "False".to_string()),
        (keys::VERSION_BUNDLE.to_string(), cluster.operator_version.clone()),
    ]);
    for component in ANNOTATED_COMPONENTS {
        if let Some(version) = cluster.components.get(component) {
            annotations.insert(format!("{}{component}", keys::COMPONENT_VERSION_PREFIX), version.clone());
        }
    }

    let liveness_port = names::liveness_port(cluster.vni);
    let deferrer_url = format!("http://127.0.0.1:{}", names::shutdown_deferrer_port(cluster.vni));
    let (disk_docker, disk_kubelet) = disk_sizes(node);
    let memory = format!("{}Mi", memory_request_mib(node.role, &node.shape.memory));
    let cpus = node.shape.cpus.to_string();

    let mut kvm_env = vec![
        env("CLOUD_CONFIG_PATH", "/cloudconfig/user_data"),
        env("CORES", cpus.clone()),
        env("DISK_DOCKER", disk_docker),
        env("DISK_KUBELET", disk_kubelet),
        env("DISK_OS", "5G"),
        env("DNS_SERVERS", cluster.settings.dns_servers.join(",")),
        env("FLATCAR_CHANNEL", "stable"),
        env("FLATCAR_VERSION", cluster.containerlinux_version()),
        env_field("HOSTNAME", "metadata.name"),
        env("MEMORY", node.shape.memory.clone()),
        env("NETWORK_BRIDGE_NAME", names::bridge(&cluster.id)),
        env("NETWORK_TAP_NAME", names::tap(&cluster.id)),
        env("NTP_SERVERS", cluster.settings.ntp_servers.join(",")),
        env("ROLE", role),
    ];
    let mut kvm_mounts = vec![
        json!({ "name": "cloud-config", "mountPath": "/cloudconfig/" }),
        json!({ "name": "images", "mountPath": "/usr/code/images/" }),
        json!({ "name": "rootfs", "mountPath": "/usr/code/rootfs/" }),
    ];
    let mut volumes = vec![
        json!({ "name": "cloud-config", "secret": { "secretName": names::node_secret(node.role, &cluster.id, &node.id) } }),
        json!({ "name": "images", "hostPath": { "path": IMAGES_HOST_PATH } }),
        json!({ "name": "rootfs", "emptyDir": {} }),
        json!({ "name": "flannel", "hostPath": { "path": "/run/flannel" } }),
    ];
    let mut health_env = vec![
        env("LISTEN_ADDRESS", format!("http://127.0.0.1:{liveness_port}")),
        env("NETWORK_ENV_FILE_PATH", names::flannel_env_file(&cluster.id)),
    ];
    match node.role {
        Role::Master => {
            kvm_env.push(env("DEBUG", "true"));
            health_env.push(env("CHECK_K8S_API", "true"));
        }
        Role::Worker => {
            let host_volumes = &node.shape.host_volumes;
            if !host_volumes.is_empty() {
                let paths: Vec<String> =
                    host_volumes.iter().map(|v| format!("{}:{}", v.mount_tag, v.host_path)).collect();
                kvm_env.push(env("HOST_DATA_VOLUME_PATHS", paths.join(",")));
            }
            for volume in host_volumes {
                kvm_mounts.push(json!({ "name": volume.mount_tag, "mountPath": volume.host_path }));
                volumes.push(json!({
                    "name": volume.mount_tag,
                    "persistentVolumeClaim": {
                        "claimName": names::host_volume_pvc(&cluster.id, &node.id, &volume.mount_tag),
                    },
                }));
            }
        }
    }
    // etcd's data, on the master that runs it.
    if cluster.runs_etcd(node) {
        kvm_mounts.push(json!({ "name": "etcd-data", "mountPath": "/etc/kubernetes/data/etcd/" }));
        volumes.push(match cluster.storage {
            StorageType::HostPath => json!({
                "name": "etcd-data",
                "hostPath": { "path": names::etcd_host_path(&cluster.id, &node.id) },
            }),
            StorageType::PersistentVolume => json!({
                "name": "etcd-data",
                "persistentVolumeClaim": { "claimName": names::etcd_pvc(&cluster.id, &node.id) },
            }),
        });
    }
    kvm_env.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));

    let probe = |initial_delay: i32| {
        json!({
            "httpGet": { "host": "127.0.0.1", "path": "/healthz", "port": liveness_port },
            "initialDelaySeconds": initial_delay,
            "timeoutSeconds": 5,
            "periodSeconds": 35,
            "failureThreshold": 4,
        })
    };
    let containers = json!([
        {
            "name": "k8s-endpoint-updater",
            "image": cluster.settings.images.endpoint_updater,
            "args": [
                "update",
                format!("--provider.bridge.name={}", names::bridge(&cluster.id)),
                format!("--service.kubernetes.cluster.namespace={}", cluster.id),
                format!("--service.kubernetes.cluster.service={role}"),
                "--service.kubernetes.inCluster=true",
            ],
            "env": [env_field("POD_NAME", "metadata.name")],
            "securityContext": { "privileged": true },
        },
        {
            "name": "k8s-kvm",
            "image": cluster.settings.images.k8s_kvm,
            "args": [role],
            "env": kvm_env,
            "volumeMounts": kvm_mounts,
            "securityContext": { "privileged": true },
            "resources": {
                "requests": { "cpu": cpus, "memory": memory },
                "limits": { "cpu": cpus, "memory": memory },
            },
            "lifecycle": { "preStop": { "exec": { "command": ["/qemu-shutdown", format!("{deferrer_url}/v1/defer/")] } } },
            "livenessProbe": probe(500),
            "readinessProbe": probe(100),
        },
        {
            "name": "k8s-kvm-health",
            "image": cluster.settings.images.health,
            "imagePullPolicy": "Always",
            "env": health_env,
            "volumeMounts": [{ "name": "flannel", "mountPath": "/run/flannel" }],
            "securityContext": { "privileged": true },
        },
        {
            "name": "shutdown-deferrer",
            "image": cluster.settings.images.shutdown_deferrer,
            "imagePullPolicy": "Always",
            "args": ["daemon", format!("--server.listen.address={deferrer_url}")],
            "env": [env_field("MY_POD_NAME", "metadata.name"), env_field("MY_POD_NAMESPACE", "metadata.namespace")],
            "lifecycle": { "preStop": { "exec": { "command": ["/pre-shutdown-hook", format!("{deferrer_url}/v1/defer/")] } } },
            "livenessProbe": {
                "httpGet": { "host": "127.0.0.1", "path": "/healthz", "port": names::shutdown_deferrer_port(cluster.vni) },
                "initialDelaySeconds": 15,
                "periodSeconds": 10,
            },
        },
    ]);

    let mut spec = json!({
        "hostNetwork": true,
        "nodeSelector": { "role": role },
        "serviceAccountName": names::namespace(&cluster.id),
        "terminationGracePeriodSeconds": TERMINATION_GRACE_SECONDS,
        "affinity": { "podAntiAffinity": { "requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": { "matchExpressions": [{ "key": keys::APP, "operator": "In", "values": ["master", "worker"] }] },
            "namespaces": [names::namespace(&cluster.id)],
            "topologyKey": "kubernetes.io/hostname",
        }] } },
        "containers": containers,
        "volumes": volumes,
    });
    if node.role == Role::Worker {
        spec["readinessGates"] = json!([{ "conditionType": names::NODE_READY_CONDITION }]);
    }
    let template = json!({ "metadata": { "labels": labels, "annotations": annotations }, "spec": spec });
    // Round-trip through the typed template so the hash covers exactly what the API stores.
    let typed: PodTemplateSpec =
        serde_json::from_value(template).expect("the pod template JSON has the PodTemplateSpec shape");
    serde_json::to_value(typed).unwrap_or_default()
}

/// The etcd PVC of `node`, when the cluster keeps etcd data on PersistentVolumes and `node`
/// runs the cluster's etcd ([`Cluster::runs_etcd`]).
pub fn etcd_pvc(cluster: &Cluster, node: &Node) -> Option<PersistentVolumeClaim> {
    if !cluster.runs_etcd(node) || cluster.storage != StorageType::PersistentVolume {
        return None;
    }
    Some(pvc(cluster, node, &names::etcd_pvc(&cluster.id, &node.id), ETCD_STORAGE_CLASS, ETCD_PVC_SIZE, None))
}

/// The PVC of one host volume of worker `node`, bound to the local PersistentVolume labelled
/// `mount-tag=<tag>` whose capacity is `capacity`.
pub fn host_volume_pvc(cluster: &Cluster, node: &Node, mount_tag: &str, capacity: &Quantity) -> PersistentVolumeClaim {
    let name = names::host_volume_pvc(&cluster.id, &node.id, mount_tag);
    pvc(cluster, node, &name, HOST_VOLUME_STORAGE_CLASS, &capacity.0, Some(mount_tag))
}

/// The node whose Deployment among `current` runs the cluster's etcd (label
/// [`keys::ETCD_MEMBER`]) when `cluster` would move etcd to another master: the first of
/// `spec.cluster.masters` is no longer that node, so the new etcd master would start empty
/// and the old one's data would be dropped with it. `None` when etcd stays where it is, or
/// no Deployment is marked yet.
pub fn etcd_member_moved(cluster: &Cluster, current: &[Deployment]) -> Option<String> {
    let labels = |d: &Deployment| d.metadata.labels.clone().unwrap_or_default();
    let holder = current
        .iter()
        .filter(|d| d.metadata.deletion_timestamp.is_none())
        .find(|d| labels(d).get(keys::ETCD_MEMBER).is_some_and(|v| v == "true"))
        .and_then(|d| labels(d).get(keys::NODE).cloned())?;
    let desired = cluster.etcd_master().map(|n| n.id.as_str());
    (desired != Some(holder.as_str())).then_some(holder)
}

/// Why the host-volume PVCs of a cluster cannot be built from the PersistentVolumes found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostVolumeError {
    /// No PersistentVolume carries the mount tag.
    #[error(
        "worker {node}: no PersistentVolume is labelled {label}={tag}; create the local PersistentVolume of host volume {tag}, or remove it from spec.kvm.workers[].hostVolumes",
        label = keys::MOUNT_TAG
    )]
    NoVolume {
        /// The worker.
        node: String,
        /// The mount tag.
        tag: String,
    },
    /// More than one PersistentVolume carries it: the claim could bind to any of them.
    #[error(
        "worker {node}: PersistentVolumes {volumes} are all labelled {label}={tag}; a mount tag selects exactly one PersistentVolume in the whole management cluster, so relabel all but one",
        volumes = volumes.join(", "),
        label = keys::MOUNT_TAG
    )]
    SeveralVolumes {
        /// The worker.
        node: String,
        /// The mount tag.
        tag: String,
        /// The PersistentVolumes.
        volumes: Vec<String>,
    },
    /// The PersistentVolume is bound, or reserved, for another claim.
    #[error(
        "worker {node}: PersistentVolume {volume} (label {label}={tag}) is claimed by {claim}, not by {expected}; free it or give the host volume another mount tag",
        label = keys::MOUNT_TAG
    )]
    ClaimedElsewhere {
        /// The worker.
        node: String,
        /// The mount tag.
        tag: String,
        /// The PersistentVolume.
        volume: String,
        /// `namespace/name` of the claim it is bound to.
        claim: String,
        /// `namespace/name` of the claim the operator makes.
        expected: String,
    },
    /// The PersistentVolume has no storage capacity to request.
    #[error("worker {node}: PersistentVolume {volume} (label {label}={tag}) has no spec.capacity.storage; set it", label = keys::MOUNT_TAG)]
    NoCapacity {
        /// The worker.
        node: String,
        /// The mount tag.
        tag: String,
        /// The PersistentVolume.
        volume: String,
    },
}

/// The mount tags of every worker's host volumes, sorted and deduplicated: the values of the
/// `mount-tag` label whose PersistentVolumes [`host_volume_pvcs`] needs.
pub fn host_volume_tags(cluster: &Cluster) -> Vec<String> {
    let tags: BTreeSet<String> = cluster
        .nodes
        .iter()
        .filter(|n| n.role == Role::Worker)
        .flat_map(|n| n.shape.host_volumes.iter().map(|v| v.mount_tag.clone()))
        .collect();
    tags.into_iter().collect()
}

/// The PVC of every host volume of every worker, each requesting the capacity of the one
/// PersistentVolume among `volumes` labelled with its mount tag (reference §4.1.7). The first
/// problem found, in node order, is the error: a missing or ambiguous PersistentVolume, one
/// claimed by another PVC, or one without a capacity.
pub fn host_volume_pvcs(
    cluster: &Cluster,
    volumes: &[PersistentVolume],
) -> Result<Vec<PersistentVolumeClaim>, HostVolumeError> {
    let mut pvcs = Vec::new();
    for node in cluster.nodes.iter().filter(|n| n.role == Role::Worker) {
        for volume in &node.shape.host_volumes {
            let tag = &volume.mount_tag;
            let matching: Vec<&PersistentVolume> = volumes
                .iter()
                .filter(|pv| pv.metadata.labels.as_ref().and_then(|l| l.get(keys::MOUNT_TAG)) == Some(tag))
                .collect();
            let pv = match matching.as_slice() {
                [] => return Err(HostVolumeError::NoVolume { node: node.id.clone(), tag: tag.clone() }),
                [one] => *one,
                several => {
                    let mut names: Vec<String> = several.iter().filter_map(|pv| pv.metadata.name.clone()).collect();
                    names.sort();
                    return Err(HostVolumeError::SeveralVolumes {
                        node: node.id.clone(),
                        tag: tag.clone(),
                        volumes: names,
                    });
                }
            };
            let volume_name = pv.metadata.name.clone().unwrap_or_default();
            let name = names::host_volume_pvc(&cluster.id, &node.id, tag);
            let namespace = names::namespace(&cluster.id);
            if let Some(claim) = pv.spec.as_ref().and_then(|s| s.claim_ref.as_ref()) {
                let (claim_ns, claim_name) = (claim.namespace.as_deref(), claim.name.as_deref());
                if claim_ns != Some(namespace.as_str()) || claim_name != Some(name.as_str()) {
                    return Err(HostVolumeError::ClaimedElsewhere {
                        node: node.id.clone(),
                        tag: tag.clone(),
                        volume: volume_name,
                        claim: format!("{}/{}", claim_ns.unwrap_or_default(), claim_name.unwrap_or_default()),
                        expected: format!("{namespace}/{name}"),
                    });
                }
            }
            let Some(capacity) = pv.spec.as_ref().and_then(|s| s.capacity.as_ref()).and_then(|c| c.get("storage"))
            else {
                return Err(HostVolumeError::NoCapacity {
                    node: node.id.clone(),
                    tag: tag.clone(),
                    volume: volume_name,
                });
            };
            pvcs.push(host_volume_pvc(cluster, node, tag, capacity));
        }
    }
    Ok(pvcs)
}

fn pvc(
    cluster: &Cluster,
    node: &Node,
    name: &str,
    class: &str,
    size: &str,
    mount_tag: Option<&str>,
) -> PersistentVolumeClaim {
    let mut labels = node_labels(cluster, node);
    labels.insert(apis::labels::MANAGED_BY.into(), names::OPERATOR.into());
    labels.insert(keys::VERSION_BUNDLE_LABEL.into(), cluster.operator_version.clone());
    let mut spec = json!({
        "accessModes": ["ReadWriteOnce"],
        "storageClassName": class,
        "resources": { "requests": { "storage": size } },
    });
    if let Some(tag) = mount_tag {
        spec["selector"] = json!({ "matchLabels": { keys::MOUNT_TAG: tag } });
    }
    let pvc = json!({
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": { "name": name, "namespace": names::namespace(&cluster.id), "labels": labels },
        "spec": spec,
    });
    serde_json::from_value(pvc).expect("the PVC JSON has the PVC shape")
}

/// The names of every PVC the cluster's nodes use.
pub fn desired_pvc_names(cluster: &Cluster) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for node in &cluster.nodes {
        if cluster.runs_etcd(node) && cluster.storage == StorageType::PersistentVolume {
            names.insert(names::etcd_pvc(&cluster.id, &node.id));
        }
        if node.role == Role::Worker {
            for volume in &node.shape.host_volumes {
                names.insert(names::host_volume_pvc(&cluster.id, &node.id, &volume.mount_tag));
            }
        }
    }
    names
}

/// The operator's PVCs among `current` that no node uses any more: delete them once the
/// Deployment that mounted them is gone.
pub fn stale_pvcs(cluster: &Cluster, current: &[PersistentVolumeClaim]) -> Vec<String> {
    let desired = desired_pvc_names(cluster);
    let mut stale: Vec<String> = current
        .iter()
        .filter(|pvc| {
            pvc.metadata.labels.as_ref().and_then(|l| l.get(apis::labels::MANAGED_BY)).map(String::as_str)
                == Some(names::OPERATOR)
        })
        .filter_map(|pvc| pvc.metadata.name.clone())
        .filter(|name| !desired.contains(name))
        .collect();
    stale.sort();
    stale
}

/// The stale PVCs ([`stale_pvcs`]) among `current` that may be deleted now: those whose node
/// (label `node`) has no Deployment among `deployments` any more, so that no pod mounts them.
/// The data of a removed node goes with its PVC (the storage class's reclaim policy decides
/// about the volume): a node id that comes back starts afresh, as a new node.
pub fn removable_pvcs(cluster: &Cluster, current: &[PersistentVolumeClaim], deployments: &[Deployment]) -> Vec<String> {
    let node_of = |labels: &Option<BTreeMap<String, String>>| labels.as_ref().and_then(|l| l.get(keys::NODE)).cloned();
    let mounted: BTreeSet<String> = deployments.iter().filter_map(|d| node_of(&d.metadata.labels)).collect();
    let stale = stale_pvcs(cluster, current);
    current
        .iter()
        .filter(|pvc| pvc.metadata.name.as_ref().is_some_and(|n| stale.contains(n)))
        .filter(|pvc| node_of(&pvc.metadata.labels).is_none_or(|node| !mounted.contains(&node)))
        .filter_map(|pvc| pvc.metadata.name.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::fixtures;
    use k8s_openapi::api::core::v1::{Container, EnvVar, PodSpec};

    fn node<'a>(cluster: &'a Cluster, id: &str) -> &'a Node {
        cluster.nodes.iter().find(|n| n.id == id).expect("fixture node")
    }

    fn spec(d: &Deployment) -> &PodSpec {
        d.spec.as_ref().and_then(|s| s.template.spec.as_ref()).expect("pod spec")
    }

    fn container<'a>(d: &'a Deployment, name: &str) -> &'a Container {
        spec(d).containers.iter().find(|c| c.name == name).unwrap_or_else(|| panic!("container {name}"))
    }

    fn env_of(c: &Container) -> BTreeMap<String, String> {
        c.env
            .iter()
            .flatten()
            .map(|EnvVar { name, value, value_from }| {
                let from =
                    value_from.as_ref().and_then(|f| f.field_ref.as_ref()).map(|f| format!("<{}>", f.field_path));
                (name.clone(), value.clone().or(from).unwrap_or_default())
            })
            .collect()
    }

    #[test]
    fn etcd_stays_on_the_master_that_holds_its_data() {
        let cluster = fixtures::cluster();
        let current: Vec<Deployment> = cluster.nodes.iter().map(|n| deployment(&cluster, n)).collect();
        assert_eq!(etcd_member_moved(&cluster, &current), None);
        assert_eq!(etcd_member_moved(&cluster, &[]), None, "a new cluster has nothing to move");
        // ma1 leaves the head of spec.cluster.masters: ma2 would become the etcd master.
        let mut reordered = fixtures::cluster();
        reordered.nodes.retain(|n| n.id != "ma1");
        assert_eq!(etcd_member_moved(&reordered, &current).as_deref(), Some("ma1"));
    }

    fn pv(name: &str, tag: &str, capacity: Option<&str>, claim: Option<(&str, &str)>) -> PersistentVolume {
        let mut spec = json!({});
        if let Some(c) = capacity {
            spec["capacity"] = json!({ "storage": c });
        }
        if let Some((ns, name)) = claim {
            spec["claimRef"] = json!({ "namespace": ns, "name": name });
        }
        serde_json::from_value(json!({ "metadata": { "name": name, "labels": { "mount-tag": tag } }, "spec": spec }))
            .expect("PV")
    }

    #[test]
    fn a_host_volume_claims_the_one_persistent_volume_of_its_mount_tag_at_its_capacity() {
        let cluster = fixtures::cluster();
        assert_eq!(host_volume_tags(&cluster), ["scratch"]);
        let volumes = [pv("local-a", "scratch", Some("50Gi"), None), pv("local-b", "other", Some("10Gi"), None)];
        let pvcs = host_volume_pvcs(&cluster, &volumes).expect("one PV per tag");
        assert_eq!(pvcs.len(), 1);
        let pvc = &pvcs[0];
        assert_eq!(pvc.metadata.name.as_deref(), Some("local-pvc-worker-qz7lt-wk1-scratch"));
        assert_eq!(pvc.metadata.namespace.as_deref(), Some("qz7lt"));
        let spec = pvc.spec.as_ref().expect("spec");
        assert_eq!(spec.storage_class_name.as_deref(), Some("local-storage"));
        let requests = spec.resources.as_ref().and_then(|r| r.requests.as_ref()).expect("requests");
        assert_eq!(requests["storage"].0, "50Gi");
        let selector = spec.selector.as_ref().and_then(|s| s.match_labels.as_ref()).expect("selector");
        assert_eq!(selector["mount-tag"], "scratch");
        assert_eq!(pvc.metadata.labels.as_ref().expect("labels")["node"], "wk1");
        // Bound to this very claim already: fine.
        let bound = [pv("local-a", "scratch", Some("50Gi"), Some(("qz7lt", "local-pvc-worker-qz7lt-wk1-scratch")))];
        assert!(host_volume_pvcs(&cluster, &bound).is_ok());
    }

    #[test]
    fn a_missing_ambiguous_foreign_or_sizeless_persistent_volume_is_named() {
        let cluster = fixtures::cluster();
        let err = host_volume_pvcs(&cluster, &[]).unwrap_err();
        assert_eq!(err, HostVolumeError::NoVolume { node: "wk1".into(), tag: "scratch".into() });
        assert!(err.to_string().contains("no PersistentVolume is labelled mount-tag=scratch"), "{err}");

        let two = [pv("b", "scratch", Some("1Gi"), None), pv("a", "scratch", Some("1Gi"), None)];
        let err = host_volume_pvcs(&cluster, &two).unwrap_err();
        assert!(matches!(&err, HostVolumeError::SeveralVolumes { volumes, .. } if volumes == &["a", "b"]), "{err}");

        let foreign = [pv("a", "scratch", Some("1Gi"), Some(("other", "claim")))];
        let err = host_volume_pvcs(&cluster, &foreign).unwrap_err();
        assert!(
            err.to_string().contains("is claimed by other/claim, not by qz7lt/local-pvc-worker-qz7lt-wk1-scratch"),
            "{err}"
        );

        let sizeless = [pv("a", "scratch", None, None)];
        let err = host_volume_pvcs(&cluster, &sizeless).unwrap_err();
        assert!(matches!(err, HostVolumeError::NoCapacity { .. }), "{err}");
    }

    #[test]
    fn a_worker_deployment_is_section_5() {
        let cluster = fixtures::cluster();
        let d = deployment(&cluster, node(&cluster, "wk1"));
        let meta = &d.metadata;
        assert_eq!((meta.name.as_deref(), meta.namespace.as_deref()), (Some("worker-wk1"), Some("qz7lt")));
        let labels = meta.labels.clone().unwrap_or_default();
        assert_eq!(labels["app"], "worker");
        assert_eq!(labels["node"], "wk1");
        assert_eq!(labels["customer"], "globex");
        assert_eq!(labels["giantswarm.io/organization"], "globex");
        assert_eq!(labels["giantswarm.io/managed-by"], "kvm-operator");
        let annotations = meta.annotations.clone().unwrap_or_default();
        assert_eq!(annotations["giantswarm.io/release-version"], "20.1.0");
        assert_eq!(annotations["giantswarm.io/version-bundle-version"], "4.3.9");
        assert_eq!(annotations[keys::SPEC_HASH].len(), 32);

        let dspec = d.spec.as_ref().expect("spec");
        assert_eq!(dspec.replicas, Some(1));
        assert_eq!(dspec.strategy.as_ref().and_then(|s| s.type_.as_deref()), Some("Recreate"));
        let selector = dspec.selector.match_labels.clone().unwrap_or_default();
        assert_eq!(selector.keys().collect::<Vec<_>>(), ["app", "cluster", "node"]);

        let template_meta = dspec.template.metadata.as_ref().expect("template metadata");
        let pod_labels = template_meta.labels.clone().unwrap_or_default();
        assert_eq!(pod_labels["kvm-operator.giantswarm.io/pod-watcher"], "kvm-operator");
        assert_eq!(pod_labels["kvm-operator.giantswarm.io/version"], "4.3.9");
        assert_eq!(pod_labels["release.giantswarm.io/version"], "20.1.0");
        let pod_annotations = template_meta.annotations.clone().unwrap_or_default();
        assert_eq!(pod_annotations["kvm-operator.giantswarm.io/api-endpoint"], "api.qz7lt.k8s.gollum.example.net");
        assert_eq!(pod_annotations["endpoint.kvm.giantswarm.io/ip"], "");
        assert_eq!(pod_annotations["endpoint.kvm.giantswarm.io/service"], "worker");
        assert_eq!(pod_annotations["endpoint.kvm.giantswarm.io/drained"], "False");
        assert_eq!(pod_annotations["kvm-operator.giantswarm.io/component-version-containerlinux"], "3815.2.5");
        assert_eq!(pod_annotations["kvm-operator.giantswarm.io/component-version-calico"], "3.26.4");
        assert!(!pod_annotations.keys().any(|k| k.ends_with("cert-exporter")), "only the four components");

        let pod = spec(&d);
        assert_eq!(pod.host_network, Some(true));
        assert_eq!(pod.node_selector.clone().unwrap_or_default()["role"], "worker");
        assert_eq!(pod.service_account_name.as_deref(), Some("qz7lt"));
        assert_eq!(pod.termination_grace_period_seconds, Some(600));
        let gates: Vec<_> = pod.readiness_gates.iter().flatten().map(|g| g.condition_type.as_str()).collect();
        assert_eq!(gates, ["kvm-operator.giantswarm.io/workload-cluster-node-ready"]);
        let anti = pod.affinity.as_ref().and_then(|a| a.pod_anti_affinity.as_ref()).expect("anti-affinity");
        let term = &anti.required_during_scheduling_ignored_during_execution.as_ref().expect("required")[0];
        assert_eq!(term.topology_key, "kubernetes.io/hostname");
        assert_eq!(term.namespaces.as_deref(), Some(&["qz7lt".to_string()][..]));
        let expr = &term.label_selector.as_ref().and_then(|s| s.match_expressions.clone()).expect("expressions")[0];
        assert_eq!((expr.key.as_str(), expr.operator.as_str()), ("app", "In"));
        assert_eq!(expr.values.as_deref(), Some(&["master".to_string(), "worker".to_string()][..]));

        let names: Vec<_> = pod.containers.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["k8s-endpoint-updater", "k8s-kvm", "k8s-kvm-health", "shutdown-deferrer"]);

        let kvm = container(&d, "k8s-kvm");
        let env = env_of(kvm);
        assert_eq!(env["CORES"], "6");
        assert_eq!(env["MEMORY"], "12G");
        assert_eq!((env["DISK_DOCKER"].as_str(), env["DISK_KUBELET"].as_str()), ("80G", "80G"));
        assert_eq!(env["DISK_OS"], "5G");
        assert_eq!(env["DNS_SERVERS"], "10.99.0.53,10.99.1.53");
        assert_eq!(env["NTP_SERVERS"], "10.99.0.123");
        assert_eq!(env["FLATCAR_VERSION"], "3815.2.5");
        assert_eq!(env["FLATCAR_CHANNEL"], "stable");
        assert_eq!(env["HOSTNAME"], "<metadata.name>");
        assert_eq!((env["NETWORK_BRIDGE_NAME"].as_str(), env["NETWORK_TAP_NAME"].as_str()), ("br-qz7lt", "tap-qz7lt"));
        assert_eq!(env["CLOUD_CONFIG_PATH"], "/cloudconfig/user_data");
        assert_eq!(env["HOST_DATA_VOLUME_PATHS"], "scratch:/srv/scratch");
        assert!(!env.contains_key("DEBUG"));
        assert_eq!(kvm.args.as_deref(), Some(&["worker".to_string()][..]));
        let resources = kvm.resources.as_ref().expect("resources");
        assert_eq!(resources.requests, resources.limits, "requests equal limits");
        let requests = resources.requests.clone().unwrap_or_default();
        assert_eq!((requests["cpu"].0.as_str(), requests["memory"].0.as_str()), ("6", "15104Mi"));
        let liveness = kvm.liveness_probe.as_ref().expect("liveness");
        let get = liveness.http_get.as_ref().expect("httpGet");
        assert_eq!((get.host.as_deref(), get.path.as_deref()), (Some("127.0.0.1"), Some("/healthz")));
        assert_eq!(get.port, k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(23041), "23000 + VNI 41");
        assert_eq!(
            (
                liveness.initial_delay_seconds,
                liveness.timeout_seconds,
                liveness.period_seconds,
                liveness.failure_threshold
            ),
            (Some(500), Some(5), Some(35), Some(4))
        );
        assert_eq!(kvm.readiness_probe.as_ref().and_then(|p| p.initial_delay_seconds), Some(100));
        let pre_stop = kvm.lifecycle.as_ref().and_then(|l| l.pre_stop.as_ref()).and_then(|h| h.exec.as_ref());
        assert_eq!(
            pre_stop.and_then(|e| e.command.clone()),
            Some(vec!["/qemu-shutdown".to_string(), "http://127.0.0.1:47041/v1/defer/".to_string()])
        );
        let mounts: Vec<_> =
            kvm.volume_mounts.iter().flatten().map(|m| (m.name.as_str(), m.mount_path.as_str())).collect();
        assert!(mounts.contains(&("scratch", "/srv/scratch")), "{mounts:?}");
        let volumes = pod.volumes.clone().unwrap_or_default();
        let scratch = volumes.iter().find(|v| v.name == "scratch").expect("host volume");
        assert_eq!(
            scratch.persistent_volume_claim.as_ref().map(|p| p.claim_name.as_str()),
            Some("local-pvc-worker-qz7lt-wk1-scratch")
        );
        let config = volumes.iter().find(|v| v.name == "cloud-config").and_then(|v| v.secret.as_ref());
        assert_eq!(config.and_then(|c| c.secret_name.as_deref()), Some("worker-qz7lt-wk1"));

        let updater = container(&d, "k8s-endpoint-updater");
        assert_eq!(updater.security_context.as_ref().and_then(|s| s.privileged), Some(true));
        let args = updater.args.clone().unwrap_or_default();
        assert!(args.contains(&"--provider.bridge.name=br-qz7lt".to_string()), "{args:?}");
        assert!(args.contains(&"--service.kubernetes.cluster.service=worker".to_string()), "{args:?}");
        assert_eq!(env_of(updater)["POD_NAME"], "<metadata.name>");

        let health = env_of(container(&d, "k8s-kvm-health"));
        assert_eq!(health["LISTEN_ADDRESS"], "http://127.0.0.1:23041");
        assert_eq!(health["NETWORK_ENV_FILE_PATH"], "/run/flannel/networks/br-qz7lt.env");
        assert!(!health.contains_key("CHECK_K8S_API"));

        let deferrer = container(&d, "shutdown-deferrer");
        assert_eq!(deferrer.image_pull_policy.as_deref(), Some("Always"));
        assert_eq!(
            deferrer.args.clone().unwrap_or_default(),
            ["daemon", "--server.listen.address=http://127.0.0.1:47041"]
        );
        assert_eq!(env_of(deferrer)["MY_POD_NAMESPACE"], "<metadata.namespace>");
    }

    #[test]
    fn the_operators_images_reach_the_four_containers() {
        let mut cluster = fixtures::cluster();
        let image = |d: &Deployment, name: &str| container(d, name).image.clone().unwrap_or_default();
        let d = deployment(&cluster, node(&cluster, "wk1"));
        assert_eq!(image(&d, "k8s-kvm"), K8S_KVM_IMAGE);
        cluster.settings.images = NodePodImages {
            endpoint_updater: "registry.example.org/updater:1".into(),
            k8s_kvm: "registry.example.org/k8s-kvm:2".into(),
            health: "registry.example.org/health:3".into(),
            shutdown_deferrer: "registry.example.org/deferrer:4".into(),
        };
        let d = deployment(&cluster, node(&cluster, "wk1"));
        assert_eq!(
            ["k8s-endpoint-updater", "k8s-kvm", "k8s-kvm-health", "shutdown-deferrer"].map(|c| image(&d, c)),
            [
                "registry.example.org/updater:1",
                "registry.example.org/k8s-kvm:2",
                "registry.example.org/health:3",
                "registry.example.org/deferrer:4"
            ]
        );
    }

    #[test]
    fn a_master_keeps_etcd_on_its_pvc_or_host_path() {
        let mut cluster = fixtures::cluster();
        let d = deployment(&cluster, node(&cluster, "ma1"));
        let pod = spec(&d);
        assert!(pod.readiness_gates.is_none(), "masters have no readiness gate");
        assert_eq!(pod.node_selector.clone().unwrap_or_default()["role"], "master");
        let kvm = container(&d, "k8s-kvm");
        let env = env_of(kvm);
        assert_eq!(env["DEBUG"], "true");
        assert_eq!((env["DISK_DOCKER"].as_str(), env["DISK_KUBELET"].as_str()), ("50G", "5G"));
        let requests = kvm.resources.as_ref().and_then(|r| r.requests.clone()).unwrap_or_default();
        assert_eq!(requests["memory"].0, "5632Mi", "4G + 1024 + 512");
        assert_eq!(env_of(container(&d, "k8s-kvm-health"))["CHECK_K8S_API"], "true");
        let etcd = pod.volumes.iter().flatten().find(|v| v.name == "etcd-data").expect("etcd volume");
        assert_eq!(
            etcd.persistent_volume_claim.as_ref().map(|p| p.claim_name.as_str()),
            Some("pvc-master-etcd-qz7lt-ma1")
        );
        let pvc = etcd_pvc(&cluster, node(&cluster, "ma1")).expect("etcd PVC");
        assert_eq!(pvc.metadata.name.as_deref(), Some("pvc-master-etcd-qz7lt-ma1"));
        let pvc_spec = pvc.spec.expect("spec");
        assert_eq!(pvc_spec.storage_class_name.as_deref(), Some("g8s-storage"));
        assert_eq!(pvc_spec.resources.and_then(|r| r.requests).unwrap_or_default()["storage"].0, "15Gi");
        assert_eq!(pvc.metadata.labels.unwrap_or_default()["node"], "ma1");
        assert!(etcd_pvc(&cluster, node(&cluster, "wk1")).is_none());
        assert_eq!(d.metadata.labels.clone().unwrap_or_default()["kvm-operator.giantswarm.io/etcd-member"], "true");
        // One etcd member per cluster, on the first master: the others keep no etcd data.
        let other = deployment(&cluster, node(&cluster, "ma2"));
        assert!(spec(&other).volumes.iter().flatten().all(|v| v.name != "etcd-data"));
        assert!(
            !other.metadata.labels.clone().unwrap_or_default().contains_key("kvm-operator.giantswarm.io/etcd-member")
        );
        assert!(etcd_pvc(&cluster, node(&cluster, "ma2")).is_none());

        cluster.storage = StorageType::HostPath;
        let d = deployment(&cluster, node(&cluster, "ma1"));
        let etcd = spec(&d).volumes.iter().flatten().find(|v| v.name == "etcd-data").expect("etcd volume");
        assert_eq!(
            etcd.host_path.as_ref().map(|h| h.path.as_str()),
            Some("/home/core/volumes/qz7lt/k8s-master-ma1"),
            "named by node id, not position"
        );
        assert!(etcd_pvc(&cluster, node(&cluster, "ma2")).is_none());
    }

    #[test]
    fn memory_and_disk_formulas() {
        assert_eq!(memory_request_mib(Role::Worker, "8G"), 10240, "the reference's example");
        assert_eq!(memory_request_mib(Role::Worker, "12G"), 12 * 1024 + 512 + 768 * 3);
        assert_eq!(memory_request_mib(Role::Worker, "1536M"), 2048 + 512 + 1536, "rounded up to whole GiB");
        assert_eq!(memory_request_mib(Role::Master, "3G"), 3072 + 1536);
        let cluster = fixtures::cluster();
        assert_eq!(
            disk_sizes(node(&cluster, "wk2")),
            ("30G".to_string(), "30G".to_string()),
            "disk when no docker size"
        );
        let mut bare = node(&cluster, "wk2").clone();
        bare.shape.disk = 0.0;
        assert_eq!(disk_sizes(&bare), ("50G".to_string(), "5G".to_string()));
    }

    #[test]
    fn any_spec_change_changes_the_hash_and_nothing_else_does() {
        let cluster = fixtures::cluster();
        let hash = |c: &Cluster, id: &str| {
            deployment(c, node(c, id)).metadata.annotations.unwrap_or_default()[keys::SPEC_HASH].clone()
        };
        let base = hash(&cluster, "wk1");
        assert_eq!(hash(&fixtures::cluster(), "wk1"), base, "deterministic");
        assert_ne!(hash(&cluster, "wk2"), base);
        type Change = fn(&mut Cluster);
        let changes: [(&str, Change); 7] = [
            ("release", |c| c.release_version = "20.2.0".into()),
            ("operator version", |c| c.operator_version = "4.4.0".into()),
            ("cpus", |c| c.nodes[3].shape.cpus = 8),
            ("memory", |c| c.nodes[3].shape.memory = "16G".into()),
            ("host volumes", |c| c.nodes[3].shape.host_volumes.clear()),
            ("dns servers", |c| c.settings.dns_servers.push("10.99.2.53".into())),
            ("containerlinux", |c| drop(c.components.insert("containerlinux".into(), "3815.2.6".into()))),
        ];
        for (what, change) in changes {
            let mut changed = fixtures::cluster();
            change(&mut changed);
            assert_ne!(hash(&changed, "wk1"), base, "{what} did not change the hash");
        }
        let mut unrelated = fixtures::cluster();
        unrelated.components.insert("cert-exporter".into(), "9.9.9".into());
        assert_eq!(hash(&unrelated, "wk1"), base, "a component the pods do not use");
    }

    #[test]
    fn pvcs_of_removed_nodes_are_stale() {
        let cluster = fixtures::cluster();
        let capacity = Quantity("100Gi".into());
        let scratch = host_volume_pvc(&cluster, node(&cluster, "wk1"), "scratch", &capacity);
        let spec = scratch.spec.clone().expect("spec");
        assert_eq!(spec.storage_class_name.as_deref(), Some("local-storage"));
        assert_eq!(spec.selector.and_then(|s| s.match_labels).unwrap_or_default()["mount-tag"], "scratch");
        assert_eq!(spec.resources.and_then(|r| r.requests).unwrap_or_default()["storage"].0, "100Gi");

        let mut current: Vec<PersistentVolumeClaim> =
            cluster.nodes(Role::Master).filter_map(|n| etcd_pvc(&cluster, n)).collect();
        current.push(scratch);
        let mut removed = fixtures::cluster();
        removed.nodes.retain(|n| n.id != "ma1" && n.id != "wk1");
        let foreign: PersistentVolumeClaim =
            serde_json::from_value(json!({"metadata": {"name": "someone-elses", "namespace": "qz7lt"}})).expect("pvc");
        current.push(foreign);
        assert_eq!(stale_pvcs(&removed, &current), ["local-pvc-worker-qz7lt-wk1-scratch", "pvc-master-etcd-qz7lt-ma1"]);
        assert!(stale_pvcs(&cluster, &current).is_empty());

        // ma1's Deployment is still there (being deleted): its PVC waits; wk1's is gone.
        let deployments =
            vec![deployment(&cluster, node(&cluster, "ma2")), deployment(&cluster, node(&cluster, "ma1"))];
        assert_eq!(removable_pvcs(&removed, &current, &deployments), ["local-pvc-worker-qz7lt-wk1-scratch"]);
        assert_eq!(removable_pvcs(&removed, &current, &deployments[..1]).len(), 2);
    }
}

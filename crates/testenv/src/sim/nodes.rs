//! Simulated nodes: what their kubelets and the node controllers of kube-controller-manager
//! keep in the API.
//!
//! * Registration: a Node with the kubelet's well-known labels, capacity and allocatable,
//!   an InternalIP and Hostname address, a /24 pod CIDR, node info and the four kubelet
//!   conditions; and its Lease in `kube-node-lease`, owned by the Node (kubelet
//!   `nodelease`), renewed every [`SimConfig::lease_renew_interval`](super::SimConfig).
//! * Status: the Ready condition follows the test's control; an unchanged status is
//!   re-reported (`lastHeartbeatTime`) every `node_status_interval`.
//! * Taints, as the node lifecycle controller sets them (`TaintNodesByCondition`):
//!   `node.kubernetes.io/not-ready:NoSchedule` while not Ready, and
//!   `node.kubernetes.io/unschedulable:NoSchedule` while cordoned (`kubectl cordon`).
//! * A deleted node's pods are deleted with grace 0, as the pod garbage collector does for
//!   pods bound to nodes that no longer exist.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{
    DaemonEndpoint, Node, NodeAddress, NodeCondition, NodeDaemonEndpoints, NodeSpec as CoreNodeSpec, NodeStatus,
    NodeSystemInfo, Taint,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, OwnerReference, Time};
use serde_json::Value;

use super::runtime::{Runtime, Work};
use super::{NodeSpec, Shared, SimError, SimNode};
use crate::api::{Part, WriteOptions};
use crate::store::ObjKey;

const MANAGER: &str = "kubelet";
const LIFECYCLE_MANAGER: &str = "kube-controller-manager";
/// The namespace of node Leases.
pub const LEASE_NAMESPACE: &str = "kube-node-lease";
const NOT_READY_TAINT: &str = "node.kubernetes.io/not-ready";
const UNSCHEDULABLE_TAINT: &str = "node.kubernetes.io/unschedulable";
const KUBELET_VERSION: &str = "v1.32.0";

/// The addresses of the node with `index`: InternalIP `172.18.x.y` and pod CIDR
/// `10.<244+i/256>.<i%256>.0/24`; `None` past the last one.
pub(super) fn addresses(index: u32) -> Option<SimNode> {
    if index >= 11 * 256 {
        return None;
    }
    let address = Ipv4Addr::from(u32::from(Ipv4Addr::new(172, 18, 0, 2)) + index);
    let pod_cidr = Ipv4Addr::new(10, 244 + u8::try_from(index / 256).ok()?, u8::try_from(index % 256).ok()?, 0);
    Some(SimNode { ready: true, address, pod_cidr })
}

/// The conditions a kubelet reports, keeping transition times and, unless `heartbeat`,
/// heartbeat times of conditions whose status holds.
fn conditions(old: &[NodeCondition], ready: bool, now: &Time, heartbeat: bool) -> Vec<NodeCondition> {
    let wanted = [
        ("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
        ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
        ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
        if ready {
            ("Ready", "True", "KubeletReady", "kubelet is posting ready status")
        } else {
            (
                "Ready",
                "False",
                "KubeletNotReady",
                "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized",
            )
        },
    ];
    wanted
        .into_iter()
        .map(|(type_, status, reason, message)| {
            let previous = old.iter().find(|c| c.type_ == type_ && c.status == status);
            let keep = |t: Option<&Option<Time>>| t.cloned().flatten().unwrap_or_else(|| now.clone());
            NodeCondition {
                type_: type_.into(),
                status: status.into(),
                reason: Some(reason.into()),
                message: Some(message.into()),
                last_transition_time: Some(keep(previous.map(|c| &c.last_transition_time))),
                last_heartbeat_time: Some(if heartbeat {
                    now.clone()
                } else {
                    keep(previous.map(|c| &c.last_heartbeat_time))
                }),
            }
        })
        .collect()
}

/// The node's taints with the lifecycle controller's own set for its state.
fn managed_taints(current: &[Taint], ready: bool, unschedulable: bool) -> Vec<Taint> {
    let mut taints: Vec<Taint> =
        current.iter().filter(|t| !(t.effect == "NoSchedule" && is_managed(&t.key))).cloned().collect();
    let keep_or_new = |key: &str| {
        current.iter().find(|t| t.key == key && t.effect == "NoSchedule").cloned().unwrap_or(Taint {
            key: key.into(),
            effect: "NoSchedule".into(),
            value: None,
            time_added: None,
        })
    };
    if !ready {
        taints.push(keep_or_new(NOT_READY_TAINT));
    }
    if unschedulable {
        taints.push(keep_or_new(UNSCHEDULABLE_TAINT));
    }
    taints
}

fn is_managed(key: &str) -> bool {
    key == NOT_READY_TAINT || key == UNSCHEDULABLE_TAINT
}

fn node_object(spec: &NodeSpec, sim: &SimNode, now: &Time) -> Node {
    let mut labels = BTreeMap::from([
        ("kubernetes.io/hostname".to_string(), spec.name.clone()),
        ("kubernetes.io/os".to_string(), "linux".to_string()),
        ("kubernetes.io/arch".to_string(), "amd64".to_string()),
        ("beta.kubernetes.io/os".to_string(), "linux".to_string()),
        ("beta.kubernetes.io/arch".to_string(), "amd64".to_string()),
    ]);
    labels.extend(spec.labels.clone());
    let resources = BTreeMap::from([
        ("cpu".to_string(), Quantity(spec.cpu.clone())),
        ("memory".to_string(), Quantity(spec.memory.clone())),
        ("pods".to_string(), Quantity(spec.pods.to_string())),
        ("ephemeral-storage".to_string(), Quantity("100Gi".into())),
    ]);
    let cidr = format!("{}/24", sim.pod_cidr);
    let id = NodeIds::of(&spec.name);
    Node {
        metadata: ObjectMeta {
            name: Some(spec.name.clone()),
            labels: Some(labels),
            annotations: Some(BTreeMap::from([
                ("node.alpha.kubernetes.io/ttl".to_string(), "0".to_string()),
                ("volumes.kubernetes.io/controller-managed-attach-detach".to_string(), "true".to_string()),
            ])),
            ..ObjectMeta::default()
        },
        spec: Some(CoreNodeSpec {
            pod_cidr: Some(cidr.clone()),
            pod_cidrs: Some(vec![cidr]),
            taints: Some(managed_taints(&spec.taints, spec.ready, spec.unschedulable)).filter(|t| !t.is_empty()),
            unschedulable: spec.unschedulable.then_some(true),
            ..CoreNodeSpec::default()
        }),
        status: Some(NodeStatus {
            capacity: Some(resources.clone()),
            allocatable: Some(resources),
            conditions: Some(conditions(&[], spec.ready, now, true)),
            addresses: Some(vec![
                NodeAddress { type_: "InternalIP".into(), address: sim.address.to_string() },
                NodeAddress { type_: "Hostname".into(), address: spec.name.clone() },
            ]),
            daemon_endpoints: Some(NodeDaemonEndpoints { kubelet_endpoint: Some(DaemonEndpoint { port: 10250 }) }),
            node_info: Some(NodeSystemInfo {
                architecture: "amd64".into(),
                boot_id: id.boot,
                container_runtime_version: "containerd://1.7.24".into(),
                kernel_version: "6.8.0-simulated".into(),
                kube_proxy_version: KUBELET_VERSION.into(),
                kubelet_version: KUBELET_VERSION.into(),
                machine_id: id.machine,
                operating_system: "linux".into(),
                os_image: "testenv simulated node".into(),
                system_uuid: id.system,
                swap: None,
            }),
            ..NodeStatus::default()
        }),
    }
}

/// The machine identities a kubelet reports, stable per node name.
struct NodeIds {
    machine: String,
    system: String,
    boot: String,
}

impl NodeIds {
    fn of(name: &str) -> NodeIds {
        let uuid =
            |hex: &str| format!("{}-{}-{}-{}-{}", &hex[0..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..32]);
        let machine = super::kubelet::hex_id(&[name, "machine"]);
        NodeIds {
            system: uuid(&super::kubelet::hex_id(&[name, "system"])),
            boot: uuid(&super::kubelet::hex_id(&[name, "boot"])),
            machine: machine[..32].to_string(),
        }
    }
}

fn lease_object(node: &str, node_uid: &str, duration: i32, now: jiff::Timestamp) -> Lease {
    Lease {
        metadata: ObjectMeta {
            name: Some(node.to_string()),
            namespace: Some(LEASE_NAMESPACE.into()),
            owner_references: Some(vec![OwnerReference {
                api_version: "v1".into(),
                kind: "Node".into(),
                name: node.to_string(),
                uid: node_uid.to_string(),
                ..OwnerReference::default()
            }]),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(node.to_string()),
            lease_duration_seconds: Some(duration),
            renew_time: Some(MicroTime(now)),
            ..LeaseSpec::default()
        }),
    }
}

fn options(manager: &str) -> WriteOptions {
    WriteOptions { manager: manager.into(), ..WriteOptions::default() }
}

fn to_value<T: serde::Serialize>(obj: &T) -> Result<Value, SimError> {
    serde_json::to_value(obj).map_err(|e| SimError::Api(crate::error::ApiError::internal(e.to_string())))
}

/// Create the Node and its Lease (the controls call this; the task does the rest).
pub(super) fn register(shared: &Shared, spec: &NodeSpec, sim: &SimNode) -> Result<(), SimError> {
    let api = &shared.api;
    let nodes = api.registry.get("", "v1", "nodes").ok_or(SimError::Stopped)?;
    let leases = api.registry.get("coordination.k8s.io", "v1", "leases").ok_or(SimError::Stopped)?;
    let now = api.clock.now();
    let node = node_object(spec, sim, &Time(jiff::Timestamp::from_second(now.as_second()).unwrap_or(now)));
    let created = api.create(&nodes, "", to_value(&node)?, &options(MANAGER))?;
    let uid = created.object.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or("");
    let lease = lease_object(&spec.name, uid, shared.config.lease_duration_seconds, now);
    match api.create(&leases, LEASE_NAMESPACE, to_value(&lease)?, &options(MANAGER)) {
        Ok(_) => Ok(()),
        // A Lease left by an earlier node of that name: the next renewal takes it over.
        Err(e) if e.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Delete the Node and its Lease.
pub(super) fn unregister(shared: &Shared, name: &str) -> Result<(), SimError> {
    let api = &shared.api;
    let nodes = api.registry.get("", "v1", "nodes").ok_or(SimError::Stopped)?;
    let leases = api.registry.get("coordination.k8s.io", "v1", "leases").ok_or(SimError::Stopped)?;
    match api.delete(&nodes, "", name, &Default::default()) {
        Ok(_) => {}
        Err(e) if e.code == 404 => return Err(SimError::NodeNotFound(name.to_string())),
        Err(e) => return Err(e.into()),
    }
    match api.delete(&leases, LEASE_NAMESPACE, name, &Default::default()) {
        Ok(_) => Ok(()),
        Err(e) if e.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

impl Runtime {
    /// Keep one node's conditions and lifecycle taints current; clean up after a deleted node.
    pub(super) fn sync_node(&mut self, name: &str) {
        let key: ObjKey = (String::new(), name.to_string());
        let Some(node) = self.cache.nodes.get(&key).cloned() else {
            self.collect_orphaned_pods(name);
            return;
        };
        let Some(sim) = self.shared.control.lock().nodes.get(name).cloned() else { return };
        let uid = node.metadata.uid.clone();
        let now = self.now();
        let old = node.status.as_ref().and_then(|s| s.conditions.clone()).unwrap_or_default();
        let wanted = conditions(&old, sim.ready, &now, false);
        if wanted != old {
            let nodes = self.defs.nodes.clone();
            let result = self.update::<Node>(&nodes, &key, uid.as_deref(), Part::Status, MANAGER, |n| {
                n.status.get_or_insert_with(Default::default).conditions = Some(wanted.clone());
            });
            if let Err(e) = result {
                return self.retry(Work::Node(name.to_string()), &e);
            }
        }
        let spec = node.spec.clone().unwrap_or_default();
        let current = spec.taints.clone().unwrap_or_default();
        let taints = managed_taints(&current, sim.ready, spec.unschedulable.unwrap_or(false));
        if taints != current {
            let nodes = self.defs.nodes.clone();
            let result = self.update::<Node>(&nodes, &key, uid.as_deref(), Part::Main, LIFECYCLE_MANAGER, |n| {
                // Recompute from the node as stored: a cordon may have raced with this sync.
                let spec = n.spec.get_or_insert_with(Default::default);
                let taints = managed_taints(
                    spec.taints.as_deref().unwrap_or_default(),
                    sim.ready,
                    spec.unschedulable.unwrap_or(false),
                );
                spec.taints = (!taints.is_empty()).then_some(taints);
            });
            if let Err(e) = result {
                self.retry(Work::Node(name.to_string()), &e);
            }
        }
    }

    /// Delete the pods bound to a node that no longer exists (`PodGCController.gcOrphaned`).
    fn collect_orphaned_pods(&mut self, node: &str) {
        let pods: Vec<ObjKey> = self.cache.pods_by_node.get(node).cloned().collect();
        let def = self.defs.pods.clone();
        for key in pods {
            let Some(pod) = self.cache.pods.get(&key) else { continue };
            if pod.metadata.deletion_grace_period_seconds == Some(0) {
                continue;
            }
            let uid = pod.metadata.uid.clone();
            if let Err(e) = self.delete(&def, &key, uid.as_deref(), Some(0)) {
                self.retry(Work::Node(node.to_string()), &e);
            }
        }
    }

    /// Renew the Lease of every simulated node (recreating any that was deleted).
    pub(super) fn renew_leases(&mut self) {
        let names: Vec<String> = self.shared.control.lock().nodes.keys().cloned().collect();
        let leases = self.defs.leases.clone();
        let now = self.api.clock.now();
        for name in names {
            let Some(node) = self.cache.nodes.get(&(String::new(), name.clone())).cloned() else { continue };
            let key: ObjKey = (LEASE_NAMESPACE.into(), name.clone());
            let result = self.update::<Lease>(&leases, &key, None, Part::Main, MANAGER, |lease| {
                let spec = lease.spec.get_or_insert_with(Default::default);
                spec.holder_identity = Some(name.clone());
                spec.renew_time = Some(MicroTime(now));
            });
            match result {
                Ok(_) => {}
                Err(e) if e.code == 404 => {
                    let uid = node.metadata.uid.as_deref().unwrap_or("");
                    let lease = lease_object(&name, uid, self.shared.config.lease_duration_seconds, now);
                    if let Err(e) = self.create(&leases, LEASE_NAMESPACE, &lease, MANAGER) {
                        tracing::debug!(node = %name, error = %e, "cannot recreate a node Lease");
                    }
                }
                Err(e) => tracing::debug!(node = %name, error = %e, "cannot renew a node Lease"),
            }
        }
    }

    /// Re-report the status of every simulated node with a new `lastHeartbeatTime`.
    pub(super) fn node_heartbeats(&mut self) {
        let nodes: Vec<(String, bool)> =
            self.shared.control.lock().nodes.iter().map(|(n, s)| (n.clone(), s.ready)).collect();
        let def = self.defs.nodes.clone();
        let now = self.now();
        for (name, ready) in nodes {
            let key: ObjKey = (String::new(), name.clone());
            let Some(node) = self.cache.nodes.get(&key).cloned() else { continue };
            let result = self.update::<Node>(&def, &key, node.metadata.uid.as_deref(), Part::Status, MANAGER, |n| {
                let status = n.status.get_or_insert_with(Default::default);
                let old = status.conditions.clone().unwrap_or_default();
                status.conditions = Some(conditions(&old, ready, &now, true));
            });
            if let Err(e) = result {
                tracing::debug!(node = %name, error = %e, "cannot report a node heartbeat");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: i64) -> Time {
        Time(jiff::Timestamp::from_second(s).unwrap())
    }

    #[test]
    fn addresses_are_unique_and_bounded() {
        let a = addresses(0).unwrap();
        assert_eq!(a.address, Ipv4Addr::new(172, 18, 0, 2));
        assert_eq!(a.pod_cidr, Ipv4Addr::new(10, 244, 0, 0));
        let b = addresses(257).unwrap();
        assert_eq!(b.pod_cidr, Ipv4Addr::new(10, 245, 1, 0));
        assert_eq!(b.address, Ipv4Addr::new(172, 18, 1, 3));
        assert!(addresses(11 * 256 - 1).is_some());
        assert!(addresses(11 * 256).is_none());
    }

    #[test]
    fn conditions_keep_times_until_status_changes() {
        let first = conditions(&[], true, &t(1), true);
        let again = conditions(&first, true, &t(5), false);
        assert_eq!(again, first, "no heartbeat, no change: nothing to write");
        let beat = conditions(&first, true, &t(9), true);
        let ready = beat.iter().find(|c| c.type_ == "Ready").unwrap();
        assert_eq!(ready.last_heartbeat_time, Some(t(9)));
        assert_eq!(ready.last_transition_time, Some(t(1)));
        let down = conditions(&beat, false, &t(12), false);
        let ready = down.iter().find(|c| c.type_ == "Ready").unwrap();
        assert_eq!((ready.status.as_str(), ready.reason.as_deref()), ("False", Some("KubeletNotReady")));
        assert_eq!(ready.last_transition_time, Some(t(12)));
    }

    #[test]
    fn lifecycle_taints_follow_readiness_and_cordon() {
        let user =
            Taint { key: "dedicated".into(), value: Some("db".into()), effect: "NoSchedule".into(), time_added: None };
        let taints = managed_taints(std::slice::from_ref(&user), false, true);
        let keys: Vec<&str> = taints.iter().map(|t| t.key.as_str()).collect();
        assert_eq!(keys, ["dedicated", NOT_READY_TAINT, UNSCHEDULABLE_TAINT]);
        assert_eq!(managed_taints(&taints, false, true), taints, "stable once set");
        assert_eq!(managed_taints(&taints, true, false), vec![user]);
    }
}

//! The Endpoints of the selector-less `master` and `worker` Services, computed from the node
//! pods as they are (reference §7, issue: "A master's VM IP is in from the start and removed
//! only after its containers stop. A worker's VM IP is in only while its pod is Ready and its
//! WC node is Ready. Not-ready addresses go into notReadyAddresses. An Endpoints object that
//! becomes empty is deleted").
//!
//! The original edited the Endpoints incrementally, one pod event at a time: add this IP, remove
//! that one. Most of its endpoint bugs came from that (reference §7.4, §15): IPs of pods that
//! vanished without passing the delete path stayed forever, stale events re-added deleted IPs,
//! an IP that was in neither list was never added to `notReadyAddresses`, an object with no
//! subsets crashed the operator, ports were copied once and never refreshed, and updating to
//! zero addresses failed validation. Here the whole object is a function of *all* observed node
//! pods and of the Service: an IP is present exactly while a pod that carries it says so, the
//! ports are the Service's current ones, the lists are sorted so equal input gives an equal
//! object (no needless writes), and an empty result is a deletion, never an empty update.
//!
//! One deliberate change: a master's IP is present from the start, as before, but it is a
//! `notReadyAddress` until the master's pod is Ready (the original served traffic to a master
//! whose API was not up yet, §14.11).
//!
//! A cluster has one etcd member, on the master labelled [`keys::ETCD_MEMBER`]
//! ([`crate::cluster::Cluster::etcd_master`]): the `master` Endpoints put the `etcd` port in a
//! subset of its own, with that master's address alone, and the other ports in one with every
//! master's. Without any such label (pods of an operator that ran etcd on every master) every
//! master keeps the etcd port, as before.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use k8s_openapi::api::core::v1::{Endpoints, Pod, Service};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::{Value, json};

use crate::cluster::Role;
use crate::names::{self, keys};

/// The name of the `master` Service's etcd port.
const ETCD_PORT: &str = "etcd";

/// What the operator observes of one node pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodePod {
    /// The pod name (= the workload-cluster node name).
    pub name: String,
    /// The pod namespace (= the cluster id).
    pub namespace: String,
    /// Which Service the VM serves.
    pub role: Role,
    /// The VM's IP, once the endpoint updater published it.
    pub vm_ip: Option<Ipv4Addr>,
    /// The pod's `Ready` condition is `True` (for workers it includes the readiness gate).
    pub pod_ready: bool,
    /// The pod condition [`names::NODE_READY_CONDITION`] is `True`.
    pub wc_node_ready: bool,
    /// The pod has a deletion timestamp.
    pub terminating: bool,
    /// At least one container of the pod is running.
    pub containers_running: bool,
    /// The node is drained (annotation [`keys::DRAINED`] is `true`, any case).
    pub drained: bool,
    /// The pod's VM runs the cluster's etcd (label [`keys::ETCD_MEMBER`] is `true`).
    pub etcd_member: bool,
}

fn condition_true(pod: &Pod, type_: &str) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == type_ && c.status == "True"))
}

impl NodePod {
    /// Read a node pod. `None` for a pod that is not a node pod (no role in its service
    /// annotation or `app` label).
    pub fn from_pod(pod: &Pod) -> Option<Self> {
        let annotations = pod.metadata.annotations.clone().unwrap_or_default();
        let labels = pod.metadata.labels.clone().unwrap_or_default();
        let role = annotations.get(keys::SERVICE).or_else(|| labels.get(keys::APP)).and_then(|r| Role::parse(r))?;
        let running = pod
            .status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.state.as_ref().is_some_and(|s| s.running.is_some())));
        Some(Self {
            name: pod.metadata.name.clone().unwrap_or_default(),
            namespace: pod.metadata.namespace.clone().unwrap_or_default(),
            role,
            // A value that is not an IPv4 address is treated as not yet published.
            vm_ip: annotations.get(keys::VM_IP).and_then(|ip| ip.parse().ok()),
            pod_ready: condition_true(pod, "Ready"),
            wc_node_ready: condition_true(pod, names::NODE_READY_CONDITION),
            terminating: pod.metadata.deletion_timestamp.is_some(),
            containers_running: running,
            drained: annotations.get(keys::DRAINED).is_some_and(|d| d.eq_ignore_ascii_case("true")),
            etcd_member: labels.get(keys::ETCD_MEMBER).is_some_and(|v| v == "true"),
        })
    }
}

/// Where a pod's VM IP belongs in its Service's Endpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Placement {
    /// Not in the Endpoints.
    Absent,
    /// In `notReadyAddresses`: known, but not to be sent traffic.
    NotReady,
    /// In `addresses`.
    Ready,
}

/// Where `pod`'s VM IP belongs:
/// - no IP yet: absent;
/// - a master: ready while its pod is Ready, else not ready; a terminating master stays until
///   no container of its pod runs (its API serves while the node drains), then it is absent;
/// - a worker: ready while its pod and its workload-cluster node are Ready; a terminating worker
///   is not ready at once (its ingress pods are being evicted), and absent once drained or
///   stopped.
pub fn placement(pod: &NodePod) -> Placement {
    if pod.vm_ip.is_none() {
        return Placement::Absent;
    }
    match pod.role {
        Role::Master if pod.terminating && !pod.containers_running => Placement::Absent,
        Role::Master if pod.pod_ready => Placement::Ready,
        Role::Master => Placement::NotReady,
        Role::Worker if pod.terminating && (pod.drained || !pod.containers_running) => Placement::Absent,
        Role::Worker if pod.terminating => Placement::NotReady,
        Role::Worker if pod.pod_ready && pod.wc_node_ready => Placement::Ready,
        Role::Worker => Placement::NotReady,
    }
}

/// The desired Endpoints of `service` (`master` or `worker`) from every observed node pod of
/// its cluster; `None` when no pod puts an address in it: the object is to be deleted.
pub fn desired_endpoints(service: &Service, pods: &[NodePod]) -> Option<Endpoints> {
    let name = service.metadata.name.clone().unwrap_or_default();
    let role = Role::parse(&name)?;
    // An IP two pods claim (an old and a new pod of one host) takes the better placement.
    let mut placed: BTreeMap<Ipv4Addr, (Placement, &NodePod)> = BTreeMap::new();
    for pod in pods.iter().filter(|p| p.role == role) {
        let (Some(ip), where_) = (pod.vm_ip, placement(pod)) else { continue };
        if where_ == Placement::Absent {
            continue;
        }
        let entry = placed.entry(ip).or_insert((where_, pod));
        if (where_, &pod.name) > (entry.0, &entry.1.name) {
            *entry = (where_, pod);
        }
    }
    if placed.is_empty() {
        return None;
    }
    let address = |ip: &Ipv4Addr, pod: &NodePod| json!({ "ip": ip.to_string(), "targetRef": { "kind": "Pod", "name": pod.name, "namespace": pod.namespace } });
    let ports: Vec<(bool, Value)> = service
        .spec
        .as_ref()
        .and_then(|s| s.ports.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|p| {
            let port = match p.target_port {
                Some(IntOrString::Int(target)) => target,
                _ => p.port,
            };
            let etcd = p.name.as_deref() == Some(ETCD_PORT);
            (etcd, json!({ "name": p.name, "port": port, "protocol": p.protocol.unwrap_or_else(|| "TCP".into()), "appProtocol": p.app_protocol }))
        })
        .collect();
    // etcd's port goes to the master that runs etcd alone; the pods of an operator that ran
    // etcd on every master carry no mark, and then every master keeps it.
    let marked = placed.values().any(|(_, pod)| pod.etcd_member);
    let serves_etcd = |pod: &NodePod| !marked || pod.etcd_member;
    let subset = |ports: Vec<Value>, only_etcd: bool| -> Option<Value> {
        let chosen = |want: Placement| -> Vec<Value> {
            placed
                .iter()
                .filter(|(_, (p, pod))| *p == want && (!only_etcd || serves_etcd(pod)))
                .map(|(ip, (_, pod))| address(ip, pod))
                .collect()
        };
        let (ready, not_ready) = (chosen(Placement::Ready), chosen(Placement::NotReady));
        if ports.is_empty() || (ready.is_empty() && not_ready.is_empty()) {
            return None;
        }
        let mut subset = json!({ "ports": ports });
        if !ready.is_empty() {
            subset["addresses"] = json!(ready);
        }
        if !not_ready.is_empty() {
            subset["notReadyAddresses"] = json!(not_ready);
        }
        Some(subset)
    };
    let (etcd_ports, other_ports): (Vec<_>, Vec<_>) = ports.into_iter().partition(|(etcd, _)| *etcd);
    let strip = |ports: Vec<(bool, Value)>| ports.into_iter().map(|(_, p)| p).collect::<Vec<_>>();
    let subsets: Vec<Value> = if marked && !etcd_ports.is_empty() {
        [subset(strip(other_ports), false), subset(strip(etcd_ports), true)].into_iter().flatten().collect()
    } else {
        let mut all = strip(etcd_ports);
        all.extend(strip(other_ports));
        subset(all, false).into_iter().collect()
    };
    let endpoints = json!({
        "apiVersion": "v1",
        "kind": "Endpoints",
        "metadata": {
            "name": name,
            "namespace": service.metadata.namespace,
            "labels": service.metadata.labels,
        },
        "subsets": subsets,
    });
    Some(serde_json::from_value(endpoints).expect("the Endpoints JSON has the Endpoints shape"))
}

/// The distinct ready IPs of `endpoints`, over all its subsets (the `master` Endpoints list
/// the etcd master in the API subset and in the etcd one).
pub fn ready_ips(endpoints: &Endpoints) -> std::collections::BTreeSet<String> {
    endpoints.subsets.iter().flatten().flat_map(|s| s.addresses.iter().flatten().map(|a| a.ip.clone())).collect()
}

/// What to do to bring the current Endpoints to the desired ones.
#[derive(Debug, Clone, PartialEq)]
pub enum EndpointsAction {
    /// Nothing: the current object already says what is desired (no write).
    Unchanged,
    /// Create the object.
    Create(Endpoints),
    /// Replace the current object's labels and subsets.
    Update(Endpoints),
    /// Delete the current object: no address is left.
    Delete,
}

/// Compare `current` with `desired` ([`desired_endpoints`]).
pub fn endpoints_action(current: Option<&Endpoints>, desired: Option<Endpoints>) -> EndpointsAction {
    match (current, desired) {
        (None, None) => EndpointsAction::Unchanged,
        (Some(_), None) => EndpointsAction::Delete,
        (None, Some(desired)) => EndpointsAction::Create(desired),
        (Some(current), Some(desired)) => {
            if current.subsets == desired.subsets && current.metadata.labels == desired.metadata.labels {
                EndpointsAction::Unchanged
            } else {
                EndpointsAction::Update(desired)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::fixtures;
    use crate::services::{master_service, worker_service};

    fn pod(name: &str, role: Role, ip: &str) -> NodePod {
        NodePod {
            name: name.into(),
            namespace: "qz7lt".into(),
            role,
            vm_ip: ip.parse().ok(),
            pod_ready: true,
            wc_node_ready: true,
            terminating: false,
            containers_running: true,
            drained: false,
            etcd_member: false,
        }
    }

    fn ips(endpoints: &Endpoints) -> (Vec<String>, Vec<String>) {
        let subset = &endpoints.subsets.as_ref().expect("subsets")[0];
        let list = |l: &Option<Vec<k8s_openapi::api::core::v1::EndpointAddress>>| {
            l.iter().flatten().map(|a| a.ip.clone()).collect::<Vec<_>>()
        };
        (list(&subset.addresses), list(&subset.not_ready_addresses))
    }

    #[test]
    fn masters_are_in_from_the_start_and_leave_when_stopped() {
        let service = master_service(&fixtures::cluster());
        let mut booting = pod("master-ma1-7d9f-x2k4q", Role::Master, "10.7.3.11");
        booting.pod_ready = false;
        booting.wc_node_ready = false;
        let ready = pod("master-ma2-5c6b-j8r2n", Role::Master, "10.7.4.11");
        let mut no_ip = pod("master-ma3-4f7c-p0w9z", Role::Master, "");
        no_ip.pod_ready = false;
        let worker = pod("worker-wk1-6b8d-m3t5v", Role::Worker, "10.7.9.11");
        let endpoints =
            desired_endpoints(&service, &[booting.clone(), ready.clone(), no_ip, worker]).expect("endpoints");
        assert_eq!(ips(&endpoints), (vec!["10.7.4.11".to_string()], vec!["10.7.3.11".to_string()]));
        assert_eq!(endpoints.metadata.name.as_deref(), Some("master"));
        let ports: Vec<_> = endpoints.subsets.as_ref().expect("subsets")[0]
            .ports
            .iter()
            .flatten()
            .map(|p| (p.name.clone().unwrap_or_default(), p.port))
            .collect();
        assert_eq!(ports, [("etcd".to_string(), 2379), ("api".to_string(), 443)]);

        // Terminating: stays while a container runs, even when no longer Ready.
        let mut draining = ready.clone();
        draining.terminating = true;
        draining.pod_ready = false;
        assert_eq!(placement(&draining), Placement::NotReady);
        draining.containers_running = false;
        assert_eq!(placement(&draining), Placement::Absent);
        let endpoints = desired_endpoints(&service, &[booting, draining]).expect("endpoints");
        assert_eq!(ips(&endpoints), (vec![], vec!["10.7.3.11".to_string()]));
    }

    #[test]
    fn the_etcd_port_goes_to_the_master_that_runs_etcd_alone() {
        let service = master_service(&fixtures::cluster());
        let mut first = pod("master-ma1-7d9f-x2k4q", Role::Master, "10.7.3.11");
        first.etcd_member = true;
        let second = pod("master-ma2-5c6b-j8r2n", Role::Master, "10.7.4.11");
        let mut third = pod("master-ma3-4f7c-p0w9z", Role::Master, "10.7.5.11");
        third.pod_ready = false;
        let endpoints = desired_endpoints(&service, &[first.clone(), second.clone(), third]).expect("endpoints");
        let subsets: Vec<(Vec<String>, Vec<String>, Vec<String>)> = endpoints
            .subsets
            .iter()
            .flatten()
            .map(|s| {
                let list = |l: &Option<Vec<k8s_openapi::api::core::v1::EndpointAddress>>| {
                    l.iter().flatten().map(|a| a.ip.clone()).collect::<Vec<_>>()
                };
                let ports = s.ports.iter().flatten().map(|p| p.name.clone().unwrap_or_default()).collect();
                (ports, list(&s.addresses), list(&s.not_ready_addresses))
            })
            .collect();
        let strings = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            subsets,
            [
                (strings(&["api"]), strings(&["10.7.3.11", "10.7.4.11"]), strings(&["10.7.5.11"])),
                (strings(&["etcd"]), strings(&["10.7.3.11"]), vec![]),
            ]
        );
        // The etcd master not placed yet: no etcd subset, the API subset alone.
        let mut booting = first;
        booting.vm_ip = None;
        let endpoints = desired_endpoints(&service, &[booting, second]).expect("endpoints");
        let ports: Vec<Vec<String>> = endpoints
            .subsets
            .iter()
            .flatten()
            .map(|s| s.ports.iter().flatten().map(|p| p.name.clone().unwrap_or_default()).collect())
            .collect();
        assert_eq!(ports, [["etcd", "api"]], "unmarked pods keep every port, as the earlier operator's did");
    }

    #[test]
    fn workers_are_ready_only_with_a_ready_pod_and_node() {
        let cluster = fixtures::cluster();
        let service = worker_service(&cluster);
        let ready = pod("worker-wk1-6b8d-m3t5v", Role::Worker, "10.7.9.11");
        let mut node_not_ready = pod("worker-wk2-6b8d-h7q1c", Role::Worker, "10.7.10.11");
        node_not_ready.wc_node_ready = false;
        let mut pod_not_ready = pod("worker-wk3-6b8d-a1b2c", Role::Worker, "10.7.2.11");
        pod_not_ready.pod_ready = false;
        let endpoints =
            desired_endpoints(&service, &[ready.clone(), node_not_ready, pod_not_ready]).expect("endpoints");
        assert_eq!(
            ips(&endpoints),
            (vec!["10.7.9.11".to_string()], vec!["10.7.2.11".to_string(), "10.7.10.11".to_string()]),
            "sorted numerically"
        );
        let ports: Vec<_> =
            endpoints.subsets.as_ref().expect("subsets")[0].ports.iter().flatten().map(|p| p.port).collect();
        assert_eq!(ports, [30010, 30011], "the Service's target ports, as they are now");

        let mut terminating = ready.clone();
        terminating.terminating = true;
        assert_eq!(placement(&terminating), Placement::NotReady, "no traffic while it drains");
        terminating.drained = true;
        assert_eq!(placement(&terminating), Placement::Absent);
    }

    #[test]
    fn an_empty_result_deletes_and_an_unchanged_one_writes_nothing() {
        let service = worker_service(&fixtures::cluster());
        let mut gone = pod("worker-wk1-6b8d-m3t5v", Role::Worker, "10.7.9.11");
        gone.terminating = true;
        gone.containers_running = false;
        assert_eq!(desired_endpoints(&service, &[gone]), None);
        assert_eq!(desired_endpoints(&service, &[]), None);

        let current = desired_endpoints(&service, &[pod("worker-wk1-6b8d-m3t5v", Role::Worker, "10.7.9.11")]);
        assert_eq!(endpoints_action(current.as_ref(), None), EndpointsAction::Delete);
        assert_eq!(endpoints_action(None, None), EndpointsAction::Unchanged);
        assert_eq!(endpoints_action(current.as_ref(), current.clone()), EndpointsAction::Unchanged);
        // Same pods in another order: the same object, no write.
        let a = pod("worker-wk1-6b8d-m3t5v", Role::Worker, "10.7.9.11");
        let b = pod("worker-wk2-6b8d-h7q1c", Role::Worker, "10.7.10.11");
        let ab = desired_endpoints(&service, &[a.clone(), b.clone()]);
        assert_eq!(endpoints_action(ab.as_ref(), desired_endpoints(&service, &[b, a])), EndpointsAction::Unchanged);
        assert!(matches!(endpoints_action(current.as_ref(), ab), EndpointsAction::Update(_)));
    }

    #[test]
    fn a_vanished_pod_leaves_no_stale_ip_and_ports_follow_the_service() {
        let mut cluster = fixtures::cluster();
        let before = desired_endpoints(
            &worker_service(&cluster),
            &[
                pod("worker-wk1-6b8d-m3t5v", Role::Worker, "10.7.9.11"),
                pod("worker-wk2-6b8d-h7q1c", Role::Worker, "10.7.10.11"),
            ],
        );
        // wk2's pod was force-deleted: it is simply not observed any more.
        cluster.port_mappings.truncate(1);
        let after =
            desired_endpoints(&worker_service(&cluster), &[pod("worker-wk1-6b8d-m3t5v", Role::Worker, "10.7.9.11")])
                .expect("endpoints");
        assert_eq!(ips(&after), (vec!["10.7.9.11".to_string()], vec![]));
        assert_eq!(after.subsets.as_ref().expect("subsets")[0].ports.as_ref().map(Vec::len), Some(1));
        assert!(matches!(endpoints_action(before.as_ref(), Some(after)), EndpointsAction::Update(_)));
    }

    #[test]
    fn node_pods_are_read_from_pods() {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {
                "name": "worker-wk1-6b8d-m3t5v", "namespace": "qz7lt",
                "deletionTimestamp": "2026-01-02T03:04:05Z",
                "labels": {"app": "worker"},
                "annotations": {"endpoint.kvm.giantswarm.io/ip": "10.7.9.11", "endpoint.kvm.giantswarm.io/service": "worker",
                                "endpoint.kvm.giantswarm.io/drained": "True"}
            },
            "status": {
                "conditions": [{"type": "Ready", "status": "True"},
                               {"type": "kvm-operator.giantswarm.io/workload-cluster-node-ready", "status": "False"}],
                "containerStatuses": [{"name": "k8s-kvm", "image": "x", "imageID": "", "ready": true, "restartCount": 0,
                                       "state": {"running": {"startedAt": "2026-01-02T03:00:00Z"}}}]
            }
        }))
        .expect("pod");
        let read = NodePod::from_pod(&pod).expect("a node pod");
        assert_eq!(read.role, Role::Worker);
        assert_eq!(read.vm_ip, Some(Ipv4Addr::new(10, 7, 9, 11)));
        assert!(read.pod_ready && !read.wc_node_ready && read.terminating && read.containers_running && read.drained);

        let mut garbage = pod.clone();
        garbage.metadata.annotations.as_mut().map(|a| a.insert(keys::VM_IP.into(), "not-an-ip".into()));
        assert_eq!(NodePod::from_pod(&garbage).and_then(|p| p.vm_ip), None);
        let other: Pod = serde_json::from_value(json!({"metadata": {"name": "nginx"}})).expect("pod");
        assert_eq!(NodePod::from_pod(&other), None);
    }
}

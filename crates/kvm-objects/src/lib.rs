//! What kvm-operator puts into the management cluster, as pure functions: names, node indexes,
//! Deployments, Services, Endpoints, Ingresses, node configs.
//!
//! kvm-operator runs each workload-cluster node as a KVM virtual machine in a pod of the
//! management cluster: one Deployment per node, a selector-less `master` and `worker` Service
//! whose Endpoints the operator writes, Ingresses for the API and etcd, and one Ignition
//! Secret per node (a ConfigMap in the original: see [`ignition`](mod@ignition) for why). Everything it writes is computed here from typed inputs, without a
//! Kubernetes client, so the controllers stay thin and every rule is tested from fixtures in
//! milliseconds:
//!
//! | module | what |
//! | --- | --- |
//! | [`cluster`] | the validated input: a `KVMConfig`, its Release's versions, the operator's settings |
//! | [`names`] | every name of the reference's §6 |
//! | [`access`] | the namespace, the ServiceAccount and the two ClusterRoleBindings |
//! | [`node_index`] | `status.kvm.nodeIndexes`: stable, lowest free, never duplicated |
//! | [`deployment`] | the node Deployments of §5 and their PVCs |
//! | [`services`], [`ingress`] | the `master` and `worker` Services, the `api` and `etcd` Ingresses |
//! | [`endpoints`] | the Endpoints as a function of all observed node pods |
//! | [`rolling`] | which single Deployment to replace next, which removed node's Deployment to delete next |
//! | [`lifecycle`] | `status.cluster`: Creating, Created, Updating, Updated, nodes and versions |
//! | [`drain`] | what the pod finalizer does next for a node pod being deleted; its DrainerConfig |
//! | [`nodes`] | the workload-cluster side: the node-ready pod condition, orphaned nodes, node roles |
//! | [`ignition`](mod@ignition) | a node's Ignition config and its Secret |
//!
//! ```
//! use kvm_objects::cluster::{Cluster, Role, Settings};
//! use kvm_objects::{desired, names};
//!
//! let config: apis::kvm::KVMConfig = serde_json::from_value(serde_json::json!({
//!     "apiVersion": "provider.giantswarm.io/v1alpha1", "kind": "KVMConfig",
//!     "metadata": {"name": "d3mo1", "labels": {
//!         "kvm-operator.giantswarm.io/version": "4.0.0", "release.giantswarm.io/version": "20.1.0"}},
//!     "spec": {
//!         "cluster": {"id": "d3mo1", "masters": [{"id": "m1"}], "workers": [{"id": "w1"}],
//!                     "kubernetes": {"api": {"clusterIPRange": "172.31.0.0/16",
//!                                            "domain": "api.d3mo1.example.com", "securePort": 443},
//!                                    "dns": {"ip": "172.31.0.10"}},
//!                     "calico": {"subnet": "10.2.0.0", "cidr": 16}},
//!         "kvm": {"masters": [{"cpus": 2, "memory": "4G"}], "workers": [{"cpus": 4, "memory": "8G"}],
//!                 "network": {"flannel": {"vni": 7}}}
//!     }
//! })).unwrap();
//! let components = [("containerlinux", "3815.2.5"), ("kubernetes", "1.29.9"), ("etcd", "3.5.13")]
//!     .map(|(name, version)| (name.to_string(), version.to_string()))
//!     .into();
//! let settings = Settings {
//!     operator_version: "4.0.0".into(),
//!     dns_servers: vec!["10.0.0.53".into()],
//!     ntp_servers: vec![],
//!     images: Default::default(),
//! };
//! let cluster = Cluster::new(&config, "v20.1.0", &components, &settings).unwrap();
//!
//! let objects = desired(&cluster);
//! let names: Vec<_> = objects.deployments.iter().filter_map(|d| d.metadata.name.as_deref()).collect();
//! assert_eq!(names, ["master-m1", "worker-w1"]);
//! assert_eq!(names::deployment(Role::Worker, "w1"), "worker-w1");
//! ```
//!
//! # The original's bugs, fixed by design
//!
//! From the reference's §14 and §15, for what this crate decides:
//!
//! - **§14.1 node lists zipped by position, a length mismatch crashed**: the CRD refuses it
//!   (CEL), [`cluster::Cluster::new`] refuses it with a field error naming the fix, and the
//!   lists are paired once, into [`cluster::Node`]s.
//! - **§14.2 PVC and etcd directory names by list position**: named by node id
//!   ([`names::etcd_pvc`], [`names::etcd_host_path`], [`names::host_volume_pvc`]); removing a
//!   node in the middle renames nothing. Mount tags are DNS labels, checked by schema.
//! - **One unclustered etcd member per master**: several cluster states behind one
//!   load-balanced API. One member, on [`cluster::Cluster::etcd_master`]; the other masters'
//!   API servers use it through the etcd domain, and the `master` Endpoints send etcd's port
//!   to it alone ([`endpoints`]); [`deployment::etcd_member_moved`] tells when a spec would
//!   move it away from its data.
//! - **§10.3 ClusterRoleBindings leaked after every cluster**: [`access`] labels them with the
//!   cluster, and the operator deletes them at the end of the teardown.
//! - **§14.3 PVCs of removed workers never deleted**: [`deployment::stale_pvcs`] lists them;
//!   the operator deletes each once the Deployment that mounted it is gone.
//! - **§14.5 spec changes never rolled nodes; Ingresses never updated; Endpoint ports never
//!   refreshed**: every Deployment carries a pod-template digest that
//!   [`rolling::is_deployment_modified`] compares; Ingresses and Services are complete desired
//!   objects; Endpoint ports are taken from the Service on every computation.
//! - **§14.6 certificate files in completion order, needless ConfigMap rewrites**: files are
//!   sorted by path and gzip has a fixed header, so equal inputs give byte-equal node Secrets.
//! - **Node configs with private keys in ConfigMaps**: they are Secrets here, same name and key.
//! - **§14.8 a NotReady node without a pod failed the terminator**: the plan
//!   (`node_lifecycle::unhealthy::plan`, shared with aws-operator) reports it and goes on.
//! - **§14.7 the node watcher rebuilt on quiet clusters; conditions rewritten**: the condition
//!   is written only when its status or reason changes ([`nodes::condition_patch`]); the
//!   operator restarts a watcher only when what it watches changes.
//! - **§14.10 pod finalizers stuck when the KVMConfig was gone; drains that never ended**:
//!   [`drain::step`] releases a pod whose cluster is gone or being deleted, and a drain that
//!   gets no answer within its timeout (the pod's grace period) plus a minute.
//! - **§14.9 a worker whose VM never registers blocked all rolling**: [`rolling::next_update`]
//!   replaces a single unavailable node that needs the update anyway.
//! - **§14.11 a master's IP served traffic before the master was Ready**: it is in the Endpoints
//!   from the start, but as a not-ready address until its pod is Ready.
//! - **§15 endpoint management as a recurring bug source** (stale IPs after reschedules,
//!   IPs of undrained or vanished pods, stale events re-adding deleted IPs, empty updates that
//!   failed validation, a crash on an object without subsets): [`endpoints::desired_endpoints`]
//!   computes the whole object from all observed pods; an empty result is a deletion.
//! - **§15 node indexes**: [`node_index::allocate`] never gives an index twice, even from a
//!   damaged map, and reuses a freed index only from the next pass.
//! - **§15 tick-based unhealthy threshold; the pause between terminations not enforced**: a
//!   NotReady duration and an enforced cooldown (`node_lifecycle::unhealthy::Limits`).
//! - **§15 rolling safety**: workers wait while a workload-cluster master is cordoned or tainted
//!   (today's `control-plane` taint key counts as a role, not as unschedulable); the
//!   availability gate requires the Deployment's status to describe its current generation.
#![forbid(unsafe_code)]

pub mod access;
pub mod cluster;
pub mod deployment;
pub mod drain;
pub mod endpoints;
pub mod ignition;
pub mod ingress;
pub mod lifecycle;
pub mod names;
pub mod node_index;
pub mod nodes;
pub mod rolling;
pub mod services;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Service};
use k8s_openapi::api::networking::v1::Ingress;

/// The objects of a cluster that depend only on its spec (node configs also need certificates
/// and node indexes, Endpoints the observed pods, host-volume PVCs the PVs' capacities).
#[derive(Debug, Clone, PartialEq)]
pub struct Desired {
    /// One per node, masters first.
    pub deployments: Vec<Deployment>,
    /// The etcd PVC of the master that runs etcd (storage type `persistentVolume`).
    pub etcd_pvcs: Vec<PersistentVolumeClaim>,
    /// `master` and `worker`.
    pub services: Vec<Service>,
    /// `api` and `etcd`.
    pub ingresses: Vec<Ingress>,
}

/// The spec-only objects of `cluster`.
pub fn desired(cluster: &cluster::Cluster) -> Desired {
    Desired {
        deployments: cluster.nodes.iter().map(|n| deployment::deployment(cluster, n)).collect(),
        etcd_pvcs: cluster.nodes.iter().filter_map(|n| deployment::etcd_pvc(cluster, n)).collect(),
        services: vec![services::master_service(cluster), services::worker_service(cluster)],
        ingresses: vec![ingress::api_ingress(cluster), ingress::etcd_ingress(cluster)],
    }
}

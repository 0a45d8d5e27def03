//! The drainer controller, watching node pods (label `kvm-operator.giantswarm.io/pod-watcher`,
//! routed by the pods' `kvm-operator.giantswarm.io/version` label): the pod finalizer that holds
//! a node pod being deleted until its workload-cluster (WC) node is drained, and the `master`
//! and `worker` Endpoints.
//!
//! Resources, in order:
//!
//! 1. `drain` ([`DrainNode`]), on deletion only (reference §8). The finalizer
//!    `operatorkit.giantswarm.io/kvm-operator-drainer-controller` holds the pod while the drain
//!    executor ([`node_lifecycle::drain`], wired in the daemon) drains the WC node of the same
//!    name: the drainer creates DrainerConfig `<pod name>` labelled with this operator's
//!    version, and on `Drained` or `Timeout` marks the pod drained
//!    (`endpoint.kvm.giantswarm.io/drained: True`), deletes the DrainerConfig, deletes the pod
//!    again with grace 0 (the VM's shutdown no longer needs to wait) and releases the
//!    finalizer. What happens next is a pure function ([`kvm_objects::drain::step`]). Every
//!    path ends: no draining while the cluster is deleted (its KVMConfig is deleting) or when
//!    its KVMConfig is gone (the original errored forever, §14.10); a WC that cannot be reached
//!    or no longer has the node releases the pod with an event saying so; the drain's timeout
//!    is the pod's grace period (600 s for node pods), and a drain that gets no answer within
//!    it plus a minute releases the pod too.
//! 2. `endpoints` ([`EndpointsOfPods`]): on every event of a node pod, the `master` and
//!    `worker` Endpoints of its cluster are computed from *all* the cluster's node pods and its
//!    Services ([`kvm_objects::endpoints`]): a master's VM IP is in from the start (not ready
//!    until its pod is), a worker's is ready only while its pod and its WC node are (the pod
//!    condition the node watcher writes); a drained or stopped worker is out; an Endpoints
//!    object with no address left is deleted, and an unchanged one is not written. It runs
//!    after `drain`, so the address of a worker whose drain just finished leaves at once.
//!
//! Pod readiness and the node-ready condition are pod *status*, which operatorkit's change
//! predicate does not pass on; the daemon adds a watch of node pods that requeues a pod on any
//! change ([`requeue_node_pod`]), so the Endpoints follow readiness at once and not only at the
//! resync. A watch of the operator's DrainerConfigs requeues their pod
//! ([`requeue_drained_pod`]) when the executor reports progress.

use std::collections::BTreeMap;
use std::sync::Arc;

use apis::drainer::DrainerConfig;
use k8s_openapi::api::core::v1::{Endpoints, Node, Pod, PodStatus, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Resource as _, ResourceExt};
use kvm_objects::drain::{
    ClusterState, DrainRequest, Observed, Release, Step, drain_timeout, drainer_config, overdue, step,
};
use kvm_objects::endpoints::{EndpointsAction, NodePod, desired_endpoints, endpoints_action};
use kvm_objects::names;
use node_lifecycle::{ClusterRef, WorkloadClusterError};
use operatorkit::{Outcome, Resource, ResourceSet, resource};
use semver::VersionReq;

use super::{Events, Nodes, config_of_cluster};

/// The controller's name (and finalizer suffix).
pub const CONTROLLER: &str = crate::config::DRAINER_CONTROLLER;

/// Whether `pod` is a node pod (it carries the pod-watcher label).
pub fn is_node_pod(pod: &Pod) -> bool {
    pod.labels().get(names::keys::POD_WATCHER).map(String::as_str) == Some(names::OPERATOR)
}

/// The related-watch mapping of node pods: any change of a node pod, its status included,
/// reconciles it.
pub fn requeue_node_pod(pod: &Pod) -> Vec<ObjectRef<Pod>> {
    if is_node_pod(pod) { vec![ObjectRef::from_obj(pod)] } else { Vec::new() }
}

/// The related-watch mapping of DrainerConfigs: one this operator created reconciles its pod
/// (`<cluster id>/<DrainerConfig name>`).
pub fn requeue_drained_pod(dc: &DrainerConfig) -> Vec<ObjectRef<Pod>> {
    if dc.labels().get(apis::labels::MANAGED_BY).map(String::as_str) != Some(names::OPERATOR) {
        return Vec::new();
    }
    vec![ObjectRef::new(&dc.name_any()).within(&names::namespace(&dc.spec.guest.cluster.id))]
}

/// The resource set `name` for the operator versions `requirement` matches.
pub fn resource_set(nodes: Arc<Nodes>, name: String, requirement: VersionReq) -> ResourceSet<Pod> {
    ResourceSet::builder(name, requirement, move |_: Arc<Pod>, _| {
        let nodes = nodes.clone();
        async move { Ok(nodes) }
    })
    .resource(DrainNode)
    .resource(EndpointsOfPods)
    .build()
}

/// Write the cluster's Endpoints from all its node pods, one reconcile of the cluster at a time.
async fn converge(nodes: &Nodes, namespace: &str) -> Result<(), kube::Error> {
    let lock = nodes.endpoints_lock(namespace);
    let _serialized = lock.lock().await;
    let shared = &nodes.shared;
    let pods = node_pods(&shared.client, namespace).await?;
    let observed: Vec<NodePod> = pods.iter().filter_map(NodePod::from_pod).collect();
    let endpoints = Api::<Endpoints>::namespaced(shared.client.clone(), namespace);
    for name in [names::MASTER_SERVICE, names::WORKER_SERVICE] {
        // No Service (yet, or any more): its Endpoints are the cluster controller's to wait for.
        let Some(service) = Api::<Service>::namespaced(shared.client.clone(), namespace).get_opt(name).await? else {
            continue;
        };
        let current = endpoints.get_opt(name).await?;
        match endpoints_action(current.as_ref(), desired_endpoints(&service, &observed)) {
            EndpointsAction::Unchanged => {}
            EndpointsAction::Create(desired) => {
                endpoints.create(&PostParams::default(), &desired).await?;
            }
            EndpointsAction::Update(mut desired) => {
                desired.metadata.resource_version = current.and_then(|c| c.metadata.resource_version);
                endpoints.replace(name, &PostParams::default(), &desired).await?;
            }
            EndpointsAction::Delete => match endpoints.delete(name, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(e),
            },
        }
    }
    Ok(())
}

/// The node pods of `namespace` as the Endpoints need them: their metadata (without
/// `managedFields`) and status, read with one LIST. The specs (the VM's containers, volumes
/// and environment, most of a node pod) and `managedFields` are skipped while the response is
/// parsed: with many clusters converging at once, the parsed LISTs of whole pods were the
/// largest transient part of the operator's heap.
async fn node_pods(client: &kube::Client, namespace: &str) -> Result<Vec<Pod>, kube::Error> {
    #[derive(serde::Deserialize)]
    struct List {
        items: Vec<Item>,
    }
    #[derive(serde::Deserialize)]
    struct Item {
        metadata: Meta,
        status: Option<PodStatus>,
    }
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Meta {
        name: Option<String>,
        namespace: Option<String>,
        labels: Option<BTreeMap<String, String>>,
        annotations: Option<BTreeMap<String, String>>,
        deletion_timestamp: Option<Time>,
    }
    let api = Api::<Pod>::namespaced(client.clone(), namespace);
    let request = kube::core::Request::new(api.resource_url())
        .list(&ListParams::default().labels(&super::pod_selector()))
        .map_err(kube::Error::BuildRequest)?;
    let list: List = client.request(request).await?;
    Ok(list
        .items
        .into_iter()
        .map(|Item { metadata: m, status }| Pod {
            metadata: ObjectMeta {
                name: m.name,
                namespace: m.namespace,
                labels: m.labels,
                annotations: m.annotations,
                deletion_timestamp: m.deletion_timestamp,
                ..ObjectMeta::default()
            },
            spec: None,
            status,
        })
        .collect())
}

/// The Endpoints half of the drainer.
#[derive(Debug)]
pub struct EndpointsOfPods;

impl Resource<Pod, Arc<Nodes>> for EndpointsOfPods {
    fn name(&self) -> &str {
        "endpoints"
    }

    async fn ensure_created(&self, nodes: &mut Arc<Nodes>, pod: &Pod) -> resource::Result<Outcome> {
        let namespace = pod.namespace().unwrap_or_default();
        converge(nodes, &namespace).await?;
        // A new node pod may find its node registered already: the watcher compares at once.
        nodes.watchers.nudge(&namespace);
        Ok(Outcome::proceed())
    }

    async fn ensure_deleted(&self, nodes: &mut Arc<Nodes>, pod: &Pod) -> resource::Result<Outcome> {
        // The pod is terminating (its finalizer holds it): a worker's address leaves the
        // Endpoints now, a master's once its containers stop.
        converge(nodes, &pod.namespace().unwrap_or_default()).await?;
        Ok(Outcome::proceed())
    }
}

/// The pod finalizer's drain (see the module docs).
#[derive(Debug)]
pub struct DrainNode;

/// What a pod let go is counted as in `kvm_operator_pod_drains_total`.
fn release_result(release: Release) -> &'static str {
    match release {
        Release::ClusterDeleting => "cluster_deleting",
        Release::ClusterMissing => "cluster_missing",
        Release::AlreadyDrained => "already_drained",
        Release::DrainOverdue => "overdue",
    }
}

impl DrainNode {
    /// Delete the pod's DrainerConfig, if any (NotFound is fine).
    async fn delete_request(dcs: &Api<DrainerConfig>, name: &str) -> Result<(), kube::Error> {
        match dcs.delete(name, &DeleteParams::default()).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Mark the pod drained: the drain phase is over (its worker address leaves the
    /// Endpoints, and a delete path run again ends quietly).
    async fn mark_drained(nodes: &Nodes, pod: &Pod) -> Result<(), kube::Error> {
        if NodePod::from_pod(pod).is_some_and(|p| p.drained) {
            return Ok(());
        }
        let pods = Api::<Pod>::namespaced(nodes.shared.client.clone(), &pod.namespace().unwrap_or_default());
        let mark = serde_json::json!({ "metadata": { "annotations": { names::keys::DRAINED: "True" } } });
        match pods.patch(&pod.name_any(), &PatchParams::default(), &Patch::Merge(&mark)).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Let the pod go without draining (more), saying why.
    async fn release(
        nodes: &Nodes,
        events: &Events,
        pod: &Pod,
        dcs: Option<&Api<DrainerConfig>>,
        result: &str,
        reason: &str,
        note: Option<(bool, String)>,
    ) -> resource::Result<Outcome> {
        if let Some(dcs) = dcs {
            Self::delete_request(dcs, &pod.name_any()).await?;
        }
        Self::mark_drained(nodes, pod).await?;
        nodes.metrics.pod_drain(result);
        if let Some((warning, note)) = note {
            let subject = pod.object_ref(&());
            if warning {
                events.warning(&subject, "Drain", reason, note).await;
            } else {
                events.normal(&subject, "Drain", reason, note).await;
            }
        }
        Ok(Outcome::proceed())
    }
}

impl Resource<Pod, Arc<Nodes>> for DrainNode {
    fn name(&self) -> &str {
        "drain"
    }

    async fn ensure_created(&self, _: &mut Arc<Nodes>, _: &Pod) -> resource::Result<Outcome> {
        Ok(Outcome::proceed())
    }

    async fn ensure_deleted(&self, nodes: &mut Arc<Nodes>, cached: &Pod) -> resource::Result<Outcome> {
        let client = nodes.shared.client.clone();
        let events = &nodes.events.drainer;
        let id = cached.namespace().unwrap_or_default();
        let name = cached.name_any();
        // Read again: the cache can lag behind this controller's own last step (a drained
        // mark), and a step taken twice would ask for a second drain.
        let Some(pod) = Api::<Pod>::namespaced(client.clone(), &id).get_opt(&name).await? else {
            return Ok(Outcome::proceed());
        };
        let pod = &pod;
        let config = config_of_cluster(&client, &id).await?;
        let cluster = match &config {
            None => ClusterState::Missing,
            Some(c) if c.metadata.deletion_timestamp.is_some() => ClusterState::Deleting,
            Some(_) => ClusterState::Running,
        };
        let cluster_ref = config.as_ref().map(|c| nodes.cluster_ref(c));
        let dcs = cluster_ref.as_ref().map(|c| Api::<DrainerConfig>::namespaced(client.clone(), &c.namespace));
        let dc = match &dcs {
            Some(dcs) => dcs.get_opt(&name).await?,
            None => None,
        };
        let timeout = drain_timeout(pod);
        let now = jiff::Timestamp::now();
        let is_overdue = dc
            .as_ref()
            .and_then(|dc| dc.metadata.creation_timestamp.as_ref())
            .is_some_and(|t| overdue(t.0, timeout, now));
        let observed = Observed {
            cluster,
            drained: NodePod::from_pod(pod).is_some_and(|p| p.drained),
            drainer_config: dc.as_ref().map(|dc| dc.status.as_ref().unwrap_or(&EMPTY_STATUS)),
            overdue: is_overdue,
        };
        match step(&observed) {
            Step::Release(release) => {
                let note = match release {
                    Release::ClusterDeleting => {
                        Some((false, format!("cluster {id} is being deleted: node {name} goes without draining")))
                    }
                    Release::ClusterMissing => {
                        Some((true, format!("no KVMConfig has cluster id {id}: node pod {name} goes without draining")))
                    }
                    Release::AlreadyDrained => None,
                    Release::DrainOverdue => Some((
                        true,
                        format!(
                            "the drain of workload-cluster node {name} got no answer within its timeout of {}s (is the drain executor running?); the pod goes undrained",
                            timeout.as_secs()
                        ),
                    )),
                };
                Self::release(nodes, events, pod, dcs.as_ref(), release_result(release), release.reason(), note).await
            }
            Step::Finish { timed_out } => {
                let pods = Api::<Pod>::namespaced(client.clone(), &id);
                Self::mark_drained(nodes, pod).await?;
                if let Some(dcs) = &dcs {
                    Self::delete_request(dcs, &name).await?;
                }
                // The VM's shutdown hooks wait for the drain; it is over, so they need not.
                match pods.delete(&name, &DeleteParams { grace_period_seconds: Some(0), ..Default::default() }).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(s)) if s.code == 404 => {}
                    Err(e) => return Err(e.into()),
                }
                let subject = pod.object_ref(&());
                if timed_out {
                    nodes.metrics.pod_drain("timeout");
                    let why = dc
                        .as_ref()
                        .and_then(|dc| dc.status.as_ref())
                        .and_then(|s| s.condition(apis::drainer::CONDITION_TIMEOUT))
                        .and_then(|c| c.message.clone())
                        .unwrap_or_default();
                    events
                        .warning(
                            &subject,
                            "Drain",
                            "DrainTimeout",
                            format!("draining workload-cluster node {name} timed out; the pod goes. {why}"),
                        )
                        .await;
                } else {
                    nodes.metrics.pod_drain("drained");
                    events
                        .normal(
                            &subject,
                            "Drain",
                            "NodeDrained",
                            format!("workload-cluster node {name} is drained; the pod goes"),
                        )
                        .await;
                }
                Ok(Outcome::proceed())
            }
            Step::Wait => Ok(Outcome::proceed().keep_finalizer().requeue_after(nodes.shared.poll)),
            Step::Request => {
                let (Some(cluster_ref), Some(dcs)) = (cluster_ref, dcs) else {
                    return Ok(Outcome::proceed());
                };
                // Ask only a cluster that answers and still has the node: otherwise nothing can
                // be drained, and holding the pod would only delay its replacement.
                let unreachable = |problem: String| {
                    (
                        true,
                        format!(
                            "workload cluster {id} cannot be reached ({problem}): node pod {name} goes without draining"
                        ),
                    )
                };
                let missing = match node_exists(nodes, &cluster_ref, &name).await {
                    Ok(true) => None,
                    Ok(false) => Some((
                        "node_missing",
                        "NodeNotFound",
                        (false, format!("workload cluster {id} has no node {name}: nothing to drain")),
                    )),
                    // Reading the management cluster failed: retry.
                    Err(e @ WorkloadClusterError::Management { .. }) => return Err(e.into()),
                    // Unreachable, or refusing the credentials: nothing can be drained.
                    Err(e) => Some(("unreachable", e.reason(), unreachable(e.to_string()))),
                };
                if let Some((result, reason, note)) = missing {
                    return Self::release(nodes, events, pod, None, result, reason, Some(note)).await;
                }
                let request = drainer_config(&DrainRequest {
                    node: &name,
                    namespace: &cluster_ref.namespace,
                    cluster_id: &id,
                    api_endpoint: &cluster_ref.api_endpoint,
                    operator_version: &nodes.shared.config.version,
                    timeout,
                });
                match dcs.create(&PostParams::default(), &request).await {
                    Ok(_) => {
                        events
                            .normal(
                                &pod.object_ref(&()),
                                "Drain",
                                "DrainRequested",
                                format!("draining workload-cluster node {name} before its pod goes (DrainerConfig {}/{name})", cluster_ref.namespace),
                            )
                            .await;
                    }
                    Err(kube::Error::Api(s)) if s.code == 409 => {}
                    Err(e) => return Err(e.into()),
                }
                Ok(Outcome::proceed().keep_finalizer().requeue_after(nodes.shared.poll))
            }
        }
    }
}

/// Whether the workload cluster has node `name`; an error when it cannot be asked.
async fn node_exists(nodes: &Nodes, cluster: &ClusterRef, name: &str) -> Result<bool, WorkloadClusterError> {
    let wc = nodes.clients().client_for(cluster).await?;
    match Api::<Node>::all(wc.client()).get_opt(name).await {
        Ok(node) => Ok(node.is_some()),
        Err(e) => Err(wc.error(e)),
    }
}

/// The status of a DrainerConfig the executor has not written to yet.
static EMPTY_STATUS: apis::drainer::DrainerConfigStatus = apis::drainer::DrainerConfigStatus {
    conditions: Vec::new(),
    cordoned: false,
    evicted_pods: 0,
    terminating_pods: Vec::new(),
    blocked_pods: Vec::new(),
};

//! The drainer controller, watching node pods (label `kvm-operator.giantswarm.io/pod-watcher`,
//! routed by the pods' `kvm-operator.giantswarm.io/version` label): today its Endpoints half.
//!
//! On every event of a node pod, the `master` and `worker` Endpoints of its cluster are computed
//! from *all* the cluster's node pods and its Services ([`kvm_objects::endpoints`]): a master's
//! VM IP is in from the start (not ready until its pod is), a worker's is ready only while its
//! pod and its workload-cluster node are; an Endpoints object with no address left is deleted,
//! and an unchanged one is not written.
//!
//! Not built yet: the pod finalizer's drain (holding a node pod that is being deleted until its
//! workload-cluster node is drained, through a DrainerConfig). The finalizer operatorkit puts on
//! the pods is released on deletion at once.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Endpoints, Pod, Service};
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, ResourceExt};
use kvm_objects::endpoints::{EndpointsAction, NodePod, desired_endpoints, endpoints_action};
use kvm_objects::names;
use operatorkit::{Outcome, Resource, ResourceSet, resource};
use semver::VersionReq;

use crate::context::Shared;

/// The controller's name (and finalizer suffix).
pub const CONTROLLER: &str = "kvm-operator-drainer-controller";

/// The label selecting the node pods this controller watches.
pub fn pod_selector() -> String {
    format!("{}={}", names::keys::POD_WATCHER, names::OPERATOR)
}

/// The resource set `name` for the operator versions `requirement` matches.
pub fn resource_set(shared: Arc<Shared>, name: String, requirement: VersionReq) -> ResourceSet<Pod> {
    ResourceSet::builder(name, requirement, move |_: Arc<Pod>, _| {
        let shared = shared.clone();
        async move { Ok(shared) }
    })
    .resource(EndpointsOfPods)
    .build()
}

/// Write the cluster's Endpoints from all its node pods.
async fn converge(shared: &Shared, namespace: &str) -> Result<(), kube::Error> {
    let pods = Api::<Pod>::namespaced(shared.client.clone(), namespace)
        .list(&ListParams::default().labels(&pod_selector()))
        .await?;
    let observed: Vec<NodePod> = pods.items.iter().filter_map(NodePod::from_pod).collect();
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

/// The Endpoints half of the drainer.
#[derive(Debug)]
pub struct EndpointsOfPods;

impl Resource<Pod, Arc<Shared>> for EndpointsOfPods {
    fn name(&self) -> &str {
        "endpoints"
    }

    async fn ensure_created(&self, shared: &mut Arc<Shared>, pod: &Pod) -> resource::Result<Outcome> {
        converge(shared, &pod.namespace().unwrap_or_default()).await?;
        Ok(Outcome::proceed())
    }

    async fn ensure_deleted(&self, shared: &mut Arc<Shared>, pod: &Pod) -> resource::Result<Outcome> {
        // The pod is terminating (its finalizer holds it): a worker's address leaves the
        // Endpoints now, a master's once its containers stop.
        converge(shared, &pod.namespace().unwrap_or_default()).await?;
        Ok(Outcome::proceed())
    }
}

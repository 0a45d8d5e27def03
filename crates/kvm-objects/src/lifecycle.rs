//! The cluster's lifecycle in `status.cluster` (reference §13): `Creating` → `Created` →
//! `Updating` → `Updated`, the nodes mirrored from the workload cluster and the history of the
//! versions the cluster converged to.
//!
//! The state machine is the one every operator shares, [`advance_cluster_status`]; this module
//! says what it is fed for a KVM cluster:
//! - the **version** is the release (`release.giantswarm.io/version`), not the operator
//!   version: upgrading a cluster means relabelling it to a new Release, usually served by the
//!   same operator version, and that must show as `Updating` and end in a new entry of
//!   `versions`. A node's version is its workload-cluster Node's `release.giantswarm.io/version`
//!   label, which the node's kubelet sets from the pod it runs in; a Node without it counts as
//!   not running the desired release (the original aborted the whole reconcile on such a node);
//! - a cluster is `Created` or `Updated` only when, besides every desired node running the
//!   desired release in the workload cluster, every node Deployment is available (masters
//!   Ready, workers Ready with their workload-cluster node): registered is not enough;
//! - an unreachable workload cluster leaves the recorded nodes as they are.

use apis::cluster_status::{
    ClusterCondition, ClusterObservation, StatusCluster, StatusClusterNode, advance_cluster_status,
};
use k8s_openapi::api::core::v1::Node;

use crate::cluster::Cluster;

/// The workload-cluster Node label naming the release the node runs.
pub const NODE_VERSION_LABEL: &str = apis::labels::RELEASE_VERSION;

/// The status entries of a workload cluster's Nodes, in name order; `now` for new entries.
pub fn observed_nodes(nodes: &[Node], now: jiff::Timestamp) -> Vec<StatusClusterNode> {
    let mut observed: Vec<StatusClusterNode> = nodes
        .iter()
        .map(|node| {
            let labels = node.metadata.labels.clone().unwrap_or_default();
            let name = node.metadata.name.clone().unwrap_or_default();
            StatusClusterNode::from_labels(name.clone(), &labels, NODE_VERSION_LABEL, now).unwrap_or_else(|_| {
                StatusClusterNode {
                    labels,
                    last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now),
                    name,
                    version: String::new(),
                }
            })
        })
        .collect();
    observed.sort_by(|a, b| a.name.cmp(&b.name));
    observed
}

/// One step of the lifecycle of `cluster`: `wc_nodes` are the workload cluster's Nodes (`None`
/// when it cannot be read), `available` whether every node Deployment is available. Returns the
/// lifecycle condition this step set, if any; the caller writes the status when it changed.
pub fn advance(
    status: &mut StatusCluster,
    cluster: &Cluster,
    wc_nodes: Option<&[Node]>,
    available: bool,
    now: jiff::Timestamp,
) -> Option<ClusterCondition> {
    let observation = ClusterObservation {
        desired_version: cluster.release_version.clone(),
        desired_nodes: cluster.nodes.len(),
        nodes: wc_nodes.map(|nodes| observed_nodes(nodes, now)),
    };
    let before = status.clone();
    advance_cluster_status(status, &observation, now);
    if !available {
        // Converged in the workload cluster, but a node pod is not back: not done yet.
        let finished = [ClusterCondition::Created, ClusterCondition::Updated]
            .into_iter()
            .any(|c| status.has_condition(c) && !before.has_condition(c));
        if finished {
            status.conditions.clone_from(&before.conditions);
        }
        status.versions.clone_from(&before.versions);
    }
    [ClusterCondition::Creating, ClusterCondition::Created, ClusterCondition::Updating, ClusterCondition::Updated]
        .into_iter()
        .find(|c| status.has_condition(*c) && !before.has_condition(*c))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::fixtures;
    use serde_json::json;

    fn t(seconds: i64) -> jiff::Timestamp {
        jiff::Timestamp::from_second(1_790_000_000 + seconds).expect("time")
    }

    /// The workload-cluster Nodes of `cluster`'s nodes, all on `release` (`None`: unlabelled).
    fn nodes(cluster: &Cluster, release: Option<&str>) -> Vec<Node> {
        cluster
            .nodes
            .iter()
            .map(|n| {
                let mut labels = json!({"role": n.role.as_str()});
                if let Some(release) = release {
                    labels[NODE_VERSION_LABEL] = release.into();
                }
                serde_json::from_value(
                    json!({"metadata": {"name": format!("{}-{}-5d8f", n.role, n.id), "labels": labels}}),
                )
                .expect("node")
            })
            .collect()
    }

    fn conditions(status: &StatusCluster) -> Vec<&str> {
        status.conditions.iter().map(|c| c.type_.as_str()).collect()
    }

    #[test]
    fn created_once_every_node_runs_the_release_and_every_deployment_is_available() {
        let cluster = fixtures::cluster();
        let mut status = StatusCluster::default();
        assert_eq!(advance(&mut status, &cluster, None, false, t(0)), Some(ClusterCondition::Creating));
        assert_eq!(advance(&mut status, &cluster, None, false, t(1)), None, "no workload cluster yet: nothing new");
        // The nodes register; unlabelled ones do not count as running the release.
        let unlabelled = nodes(&cluster, None);
        assert_eq!(advance(&mut status, &cluster, Some(&unlabelled), false, t(2)), None);
        assert_eq!(status.nodes.len(), 5);
        assert!(status.nodes.iter().all(|n| n.version.is_empty()));
        assert_eq!(advance(&mut status, &cluster, Some(&unlabelled), true, t(3)), None);
        let labelled = nodes(&cluster, Some("20.1.0"));
        advance(&mut status, &cluster, Some(&labelled), false, t(4));
        assert!(status.nodes.iter().all(|n| n.version == "20.1.0"));
        // Every node runs the release, but a Deployment is not available: still Creating.
        assert_eq!(advance(&mut status, &cluster, Some(&labelled), false, t(5)), None);
        assert_eq!(conditions(&status), ["Creating"]);
        assert_eq!(advance(&mut status, &cluster, Some(&labelled), true, t(6)), Some(ClusterCondition::Created));
        assert_eq!(advance(&mut status, &cluster, Some(&labelled), true, t(7)), None);
        assert_eq!(status.latest_version(), Some("20.1.0"));
        let steady = status.clone();
        assert_eq!(advance(&mut status, &cluster, Some(&labelled), true, t(8)), None);
        assert_eq!(status, steady, "a steady cluster changes nothing, times included");
        assert_eq!(advance(&mut status, &cluster, None, true, t(9)), None);
        assert_eq!(status, steady, "an unreachable workload cluster keeps the recorded nodes");
    }

    #[test]
    fn a_new_release_is_updating_until_every_node_runs_it() {
        let mut cluster = fixtures::cluster();
        let mut status = StatusCluster::default();
        let old = nodes(&cluster, Some("20.1.0"));
        for (i, available) in [false, false, true, true].into_iter().enumerate() {
            advance(&mut status, &cluster, Some(&old), available, t(i as i64));
        }
        assert_eq!(conditions(&status), ["Created"]);
        cluster.release_version = "20.2.0".into();
        assert_eq!(advance(&mut status, &cluster, Some(&old), true, t(10)), Some(ClusterCondition::Updating));
        // Half way: some nodes run the new release.
        let mut half = old.clone();
        for node in half.iter_mut().take(3) {
            node.metadata.labels.get_or_insert_default().insert(NODE_VERSION_LABEL.into(), "20.2.0".into());
        }
        assert_eq!(advance(&mut status, &cluster, Some(&half), true, t(11)), None);
        assert_eq!(advance(&mut status, &cluster, Some(&half), true, t(12)), None, "not converged");
        let new = nodes(&cluster, Some("20.2.0"));
        advance(&mut status, &cluster, Some(&new), false, t(13));
        assert_eq!(advance(&mut status, &cluster, Some(&new), false, t(14)), None, "the last pod is not back");
        assert_eq!(advance(&mut status, &cluster, Some(&new), true, t(15)), Some(ClusterCondition::Updated));
        advance(&mut status, &cluster, Some(&new), true, t(16));
        let versions: Vec<&str> = status.versions.iter().map(|v| v.semver.as_str()).collect();
        assert_eq!(versions, ["20.1.0", "20.2.0"]);
        assert_eq!(conditions(&status), ["Updated", "Created"]);
    }
}

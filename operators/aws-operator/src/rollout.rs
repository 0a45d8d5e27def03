//! Rollout limits: at most `--max-rolling-clusters` clusters of the management cluster roll at
//! once, and at most `spec.cluster.maintenance.maxRollingNodePools` node pools of one cluster.
//! Both are [`node_lifecycle::slots`] (Leases in the operator's namespace), so every replica of
//! every version shares them and a restart finds them where they were.
//!
//! A control plane or node pool takes its slots right before a disruptive step (a stack update
//! that replaces instances, a max-age replacement) and gives them back once its stack is current
//! again or it is deleted. A cluster's slot is shared by its objects that roll: the last one
//! done frees it. Without limits (the default) nothing is written or read.

use std::sync::Arc;

use apis::aws::{AWSCluster, AWSControlPlane, AWSMachineDeployment};
use kube::ResourceExt as _;
use node_lifecycle::slots::{Acquired, SlotError, Slots, scope_name};
use operatorkit::ResourceError;

use crate::context::Shared;

/// The `Ready` reason of an object whose disruptive work waits for a rollout slot.
pub const WAITING_FOR_SLOT: &str = "WaitingForRolloutSlot";

/// A member's key in a slot: `<Kind>/<namespace>/<name>`.
fn member<K: kube::Resource<DynamicType = ()>>(obj: &K) -> String {
    format!("{}/{}/{}", K::kind(&()), obj.namespace().unwrap_or_default(), obj.name_any())
}

fn cluster_key(cluster: &AWSCluster) -> String {
    format!("{}/{}", cluster.namespace().unwrap_or_default(), cluster.name_any())
}

fn cluster_slots(shared: &Shared) -> Slots {
    Slots::new(
        shared.client.clone(),
        &shared.config.slot_namespace,
        "aws-operator-rolling-clusters",
        shared.config.max_rolling_clusters,
    )
}

fn pool_slots(shared: &Shared, cluster: &AWSCluster) -> Slots {
    let limit = cluster.spec.cluster.maintenance.as_ref().and_then(|m| m.max_rolling_node_pools).unwrap_or(0);
    let scope =
        scope_name(&["aws-operator-rolling-pools", &cluster.namespace().unwrap_or_default(), &cluster.name_any()]);
    Slots::new(shared.client.clone(), &shared.config.slot_namespace, scope, limit)
}

fn error(e: SlotError) -> ResourceError {
    ResourceError::msg("RolloutSlots", e.to_string())
}

/// Whether the member `key` (`<Kind>/<namespace>/<name>`) still exists and is not being deleted.
async fn alive(client: kube::Client, key: String) -> bool {
    let mut parts = key.splitn(3, '/');
    let (Some(kind), Some(ns), Some(name)) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    let found = match kind {
        "AWSMachineDeployment" => kube::Api::<AWSMachineDeployment>::namespaced(client, ns)
            .get_opt(name)
            .await
            .map(|o| o.map(|o| o.metadata.deletion_timestamp.is_none())),
        "AWSControlPlane" => kube::Api::<AWSControlPlane>::namespaced(client, ns)
            .get_opt(name)
            .await
            .map(|o| o.map(|o| o.metadata.deletion_timestamp.is_none())),
        _ => return false,
    };
    // An error is no proof of absence: the member keeps its slot.
    found.map_or(true, |o| o.unwrap_or(false))
}

/// The slots an object of a cluster deals with.
struct Scopes {
    /// The object's member key.
    me: String,
    /// Whether it is a node pool (which has a pool slot besides the cluster's).
    is_pool: bool,
    pools: Slots,
    clusters: Slots,
}

/// The slots of `obj` in `cluster`; `None` when no limit applies to it.
fn scopes<K: kube::Resource<DynamicType = ()>>(shared: &Shared, cluster: &AWSCluster, obj: &K) -> Option<Scopes> {
    let is_pool = K::kind(&()) == "AWSMachineDeployment";
    let (pools, clusters) = (pool_slots(shared, cluster), cluster_slots(shared));
    let limited = clusters.limit() > 0 || (is_pool && pools.limit() > 0);
    limited.then(|| Scopes { me: member(obj), is_pool, pools, clusters })
}

/// Take the slots `obj` needs for a disruptive step in `cluster`: the cluster's, and for a node
/// pool its pool slot. `None` when it may go; else why it waits, for its `Ready` message.
pub async fn acquire<K>(shared: &Arc<Shared>, cluster: &AWSCluster, obj: &K) -> Result<Option<String>, ResourceError>
where
    K: kube::Resource<DynamicType = ()>,
{
    let Some(Scopes { me, is_pool, pools, clusters }) = scopes(shared, cluster, obj) else {
        return Ok(None);
    };
    let client = shared.client.clone();
    let check = move |key: String| alive(client.clone(), key);
    // The pool's own slot first: a pool that cannot roll yet does not hold a cluster slot that
    // another cluster could use.
    if is_pool && let Acquired::Busy(holders) = pools.acquire(&me, &me, &check).await.map_err(error)? {
        return Ok(Some(format!(
            "waiting for a rollout slot: at most {} node pools of cluster {} roll at once (spec.cluster.maintenance.maxRollingNodePools), and {} roll now",
            pools.limit(),
            cluster.name_any(),
            holders.join(", ")
        )));
    }
    match clusters.acquire(&cluster_key(cluster), &me, &check).await.map_err(error)? {
        Acquired::Busy(holders) => {
            // Give the pool slot back, so that the cluster's other pools are not held up by a
            // pool that waits.
            if is_pool {
                pools.release(&me, &me).await.map_err(error)?;
            }
            Ok(Some(format!(
                "waiting for a rollout slot: at most {} clusters roll at once (--max-rolling-clusters), and {} roll now",
                clusters.limit(),
                holders.join(", ")
            )))
        }
        _ => {
            shared.memo.lock().rollout_released.remove(&me);
            Ok(None)
        }
    }
}

/// Give back the slots of `obj` in `cluster` (its step is done, or it is deleted). Reads the
/// Leases once per object and process start, then only after an [`acquire`].
pub async fn release<K>(shared: &Arc<Shared>, cluster: &AWSCluster, obj: &K) -> Result<(), ResourceError>
where
    K: kube::Resource<DynamicType = ()>,
{
    let Some(Scopes { me, is_pool, pools, clusters }) = scopes(shared, cluster, obj) else {
        return Ok(());
    };
    if shared.memo.lock().rollout_released.contains(&me) {
        return Ok(());
    }
    if is_pool {
        pools.release(&me, &me).await.map_err(error)?;
    }
    clusters.release(&cluster_key(cluster), &me).await.map_err(error)?;
    shared.memo.lock().rollout_released.insert(me);
    Ok(())
}

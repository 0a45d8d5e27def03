//! The IPAM lock and the inputs of an allocation.
//!
//! Two clusters (or node pools) allocated at once must never get the same range, including
//! across operator restarts and across operator versions running side by side. The lock is
//! upstream's kubelock (reference §7.6): an annotation `kubelock.giantswarm.io/ipam` on the
//! Namespace `giantswarm` holding `{"owner", "createdAt", "ttl"}`. It is taken with an
//! update that carries the Namespace's `resourceVersion`, so of two concurrent takers exactly one
//! wins (the other gets 409 and retries later); it expires after its TTL, so a holder that died
//! never blocks allocation for longer than 30 seconds. Allocations are persisted (status or
//! annotation) before the lock is released, and every allocation reads the persisted ones fresh
//! from the API server, never from a cache.

use std::time::Duration;

use apis::aws::{AWSCluster, AWSMachineDeployment, NetworkPool};
use apis::labels;
use aws_stacks::ipam::Ipv4Net;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use operatorkit::ResourceError;

use crate::aws::AccountClients;
use crate::common::{self, InvalidInput};
use crate::context::Shared;

/// The lock annotation.
pub const LOCK_ANNOTATION: &str = "kubelock.giantswarm.io/ipam";

/// How long a lock is valid.
pub const LOCK_TTL: Duration = Duration::from_secs(30);

#[derive(serde::Serialize, serde::Deserialize, Debug)]
#[serde(rename_all = "camelCase")]
struct LockData {
    owner: String,
    created_at: String,
    ttl: String,
}

/// A held lock; release it with [`Lock::release`].
#[derive(Debug)]
#[must_use = "release the lock"]
pub struct Lock {
    token: String,
}

fn owner(shared: &Shared) -> String {
    format!("aws-operator@{}", shared.config.version)
}

/// Try to take the lock: `Ok(None)` while someone else holds an unexpired lock or when another
/// taker won the race.
pub async fn acquire(shared: &Shared) -> Result<Option<Lock>, ResourceError> {
    let api: Api<Namespace> = Api::all(shared.client.clone());
    let ns_name = &shared.config.lock_namespace;
    let ns = match api.get_opt(ns_name).await? {
        Some(ns) => ns,
        None => {
            let ns: Namespace = serde_json::from_value(serde_json::json!({"metadata": {"name": ns_name}}))
                .map_err(|e| ResourceError::msg("Internal", e.to_string()))?;
            match api.create(&PostParams::default(), &ns).await {
                Ok(ns) => ns,
                Err(kube::Error::Api(s)) if s.code == 409 => api.get(ns_name).await?,
                Err(e) => return Err(e.into()),
            }
        }
    };
    let now = jiff::Timestamp::now();
    if let Some(raw) = ns.annotations().get(LOCK_ANNOTATION)
        && let Ok(data) = serde_json::from_str::<LockData>(raw)
    {
        let created: Option<jiff::Timestamp> = data.created_at.parse().ok();
        let ttl = data.ttl.trim_end_matches('s').parse::<u64>().unwrap_or(30);
        let expired = created.is_none_or(|c| now.duration_since(c).as_secs() >= ttl as i64);
        if !expired {
            return Ok(None);
        }
    }
    let token = format!("{}#{}", owner(shared), uuid_like());
    let data = LockData { owner: token.clone(), created_at: now.to_string(), ttl: format!("{}s", LOCK_TTL.as_secs()) };
    let mut updated = ns.clone();
    updated
        .metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(LOCK_ANNOTATION.to_string(), serde_json::to_string(&data).unwrap_or_default());
    // The replace carries the resourceVersion read above: a concurrent taker makes it fail.
    match api.replace(ns_name, &PostParams::default(), &updated).await {
        Ok(_) => Ok(Some(Lock { token })),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(None),
        Err(e) => Err(e.into()),
    }
}

fn uuid_like() -> String {
    let n: u64 = rand::random();
    format!("{n:016x}")
}

impl Lock {
    /// Remove the annotation if it is still ours. Failures are logged: the lock expires anyway.
    pub async fn release(self, shared: &Shared) {
        let api: Api<Namespace> = Api::all(shared.client.clone());
        let ns_name = &shared.config.lock_namespace;
        for _ in 0..3 {
            let Ok(ns) = api.get(ns_name).await else { return };
            let ours = ns
                .annotations()
                .get(LOCK_ANNOTATION)
                .and_then(|raw| serde_json::from_str::<LockData>(raw).ok())
                .is_some_and(|d| d.owner == self.token);
            if !ours {
                return;
            }
            let mut updated = ns.clone();
            if let Some(a) = updated.metadata.annotations.as_mut() {
                a.remove(LOCK_ANNOTATION);
            }
            match api.replace(ns_name, &PostParams::default(), &updated).await {
                Ok(_) => return,
                Err(kube::Error::Api(s)) if s.code == 409 => continue,
                Err(e) => {
                    tracing::warn!(error = %e, "releasing the IPAM lock failed; it expires by itself");
                    return;
                }
            }
        }
    }
}

/// Every range already taken: all clusters' CIDRs, all node pools' subnets (every namespace)
/// and every subnet of the tenant account.
pub async fn reserved(shared: &Shared, tenant: &AccountClients) -> Result<Vec<Ipv4Net>, ResourceError> {
    let mut out = Vec::new();
    let clusters: Api<AWSCluster> = Api::all(shared.client.clone());
    for c in clusters.list(&ListParams::default()).await?.items {
        if let Some(cidr) = c.status.as_ref().and_then(|s| s.provider.network.cidr.as_deref())
            && let Ok(net) = cidr.parse()
        {
            out.push(net);
        }
    }
    let mds: Api<AWSMachineDeployment> = Api::all(shared.client.clone());
    for md in mds.list(&ListParams::default()).await?.items {
        if let Some(cidr) = md.annotations().get(labels::MACHINE_DEPLOYMENT_SUBNET)
            && let Ok(net) = cidr.parse()
        {
            out.push(net);
        }
    }
    for cidr in crate::services::subnet_cidrs(tenant).await? {
        if let Ok(net) = cidr.parse() {
            out.push(net);
        }
    }
    out.sort_by_key(|n: &Ipv4Net| (u32::from(n.network()), n.prefix()));
    out.dedup();
    Ok(out)
}

/// The range a cluster allocates from: its NetworkPool's, else the operator's.
pub async fn range_for_cluster(shared: &Shared, cluster: &AWSCluster) -> Result<Ipv4Net, ResourceError> {
    if let Some(pool) = cluster.spec.provider.nodes.as_ref().and_then(|n| n.network_pool.as_deref()) {
        let api: Api<NetworkPool> = Api::namespaced(shared.client.clone(), &cluster.namespace().unwrap_or_default());
        let Some(np) = api.get_opt(pool).await? else {
            return Err(InvalidInput {
                object: common::describe(cluster),
                reason: "NetworkPoolNotFound",
                message: format!("spec.provider.nodes.networkPool names NetworkPool {pool}, which does not exist in this namespace: create it or remove the field"),
            }
            .into());
        };
        let range: Ipv4Net = np.spec.cidr_block.parse().map_err(|e| InvalidInput {
            object: format!("NetworkPool {}/{pool}", np.namespace().unwrap_or_default()),
            reason: "InvalidNetworkPool",
            message: format!("spec.cidrBlock {}: {e}", np.spec.cidr_block),
        })?;
        check_pool_overlap(shared, &np, range).await?;
        return Ok(range);
    }
    shared.config.ipam_range.parse().map_err(|e| {
        ResourceError::msg("InvalidConfiguration", format!("--ipam-range {}: {e}", shared.config.ipam_range))
            .permanent()
    })
}

/// A NetworkPool must not overlap another NetworkPool or the operator's default range: two
/// overlapping pools would hand the same addresses to clusters that each believe them free of
/// the other pool's reservations only by accident.
async fn check_pool_overlap(shared: &Shared, np: &NetworkPool, range: Ipv4Net) -> Result<(), ResourceError> {
    let api: Api<NetworkPool> = Api::all(shared.client.clone());
    for other in api.list(&ListParams::default()).await?.items {
        if other.uid() == np.uid() {
            continue;
        }
        if let Ok(o) = other.spec.cidr_block.parse::<Ipv4Net>()
            && o.overlaps(&range)
        {
            return Err(InvalidInput {
                object: format!("NetworkPool {}/{}", np.namespace().unwrap_or_default(), np.name_any()),
                reason: "OverlappingNetworkPool",
                message: format!(
                    "spec.cidrBlock {range} overlaps NetworkPool {}/{} ({o}): give each pool its own range",
                    other.namespace().unwrap_or_default(),
                    other.name_any()
                ),
            }
            .into());
        }
    }
    if let Ok(default) = shared.config.ipam_range.parse::<Ipv4Net>()
        && default.overlaps(&range)
    {
        return Err(InvalidInput {
            object: format!("NetworkPool {}/{}", np.namespace().unwrap_or_default(), np.name_any()),
            reason: "OverlappingNetworkPool",
            message: format!(
                "spec.cidrBlock {range} overlaps the operator's default range {default}: choose a range outside it"
            ),
        }
        .into());
    }
    Ok(())
}

/// The mask of a cluster or node pool: annotation `alpha.aws.giantswarm.io/aws-subnet-size`, else
/// the operator's default.
pub fn mask_of<K: kube::Resource>(obj: &K, default: u8) -> u8 {
    obj.annotations()
        .get(labels::AWS_SUBNET_SIZE)
        .and_then(|v| v.parse::<u8>().ok())
        .filter(|m| (16..=28).contains(m))
        .unwrap_or(default)
}

/// Persist a node pool's CIDR in its annotation.
pub async fn annotate_node_pool(shared: &Shared, md: &AWSMachineDeployment, cidr: &Ipv4Net) -> Result<(), kube::Error> {
    let api: Api<AWSMachineDeployment> = Api::namespaced(shared.client.clone(), &md.namespace().unwrap_or_default());
    let patch = serde_json::json!({"metadata": {"annotations": {labels::MACHINE_DEPLOYMENT_SUBNET: cidr.to_string()}}});
    api.patch(&md.name_any(), &PatchParams::default(), &Patch::Merge(&patch)).await?;
    Ok(())
}

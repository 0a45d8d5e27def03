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
//!
//! [`allocate`] is the one way to allocate, for clusters and node pools alike:
//!
//! - The tenant account's subnets are read *before* the lock: that AWS call may take up to a
//!   minute, longer than the lock lives. Nothing of ours creates a subnet between that read and
//!   the lock, since every range is persisted in Kubernetes before a stack uses it.
//! - Under the lock, the object itself is read again from the API server: a cache that has not
//!   yet seen the object's own allocation must not cause a second one.
//! - The write is fenced: right before it, the lock is renewed with an update that carries the
//!   Namespace's `resourceVersion` and requires the annotation to still hold this taker's token
//!   ([`Lock::fence`]). A holder whose lock expired and was taken over writes nothing.
//! - Data that cannot be read counts as taken: an unreadable lock annotation is a held lock, and
//!   an unreadable cluster CIDR (status, which only the operator writes) stops allocation. Both
//!   come back as errors (so Warning events) that name the object and the fix. A node pool's
//!   subnet annotation is another matter: anyone who may edit the pool may write it, so one that
//!   is not a CIDR block reserves nothing and refuses only its own pool (`Ready=False`
//!   `InvalidAnnotation`); every other object still allocates.

use std::time::Duration;

use apis::aws::{AWSCluster, AWSMachineDeployment, NetworkPool};
use apis::labels;
use aws_stacks::ipam::{self, Ipv4Net};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use operatorkit::ResourceError;

use crate::aws::AccountClients;
use crate::context::Shared;
use operatorkit::error::InvalidInput;

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

/// An unreadable lock annotation: treated as a held lock.
fn unreadable_lock(ns_name: &str, raw: &str, why: impl std::fmt::Display) -> ResourceError {
    ResourceError::msg(
        "IpamLockUnreadable",
        format!(
            "annotation {LOCK_ANNOTATION} on Namespace {ns_name} cannot be read ({why}): {raw:?}; it counts as a held \
             lock, so no range is allocated until it is fixed: remove the annotation once no allocation is running"
        ),
    )
}

/// The lock's holder, and whether it has expired, at `now`. Unreadable data is an error: a lock
/// that cannot be read could be held.
fn lock_state(ns_name: &str, raw: &str, now: jiff::Timestamp) -> Result<(LockData, bool), ResourceError> {
    let data = serde_json::from_str::<LockData>(raw).map_err(|e| unreadable_lock(ns_name, raw, e))?;
    let created: jiff::Timestamp =
        data.created_at.parse().map_err(|e| unreadable_lock(ns_name, raw, format!("createdAt: {e}")))?;
    let ttl = data
        .ttl
        .strip_suffix('s')
        .and_then(|t| t.parse::<u64>().ok())
        .ok_or_else(|| unreadable_lock(ns_name, raw, "ttl is not a number of seconds like \"30s\""))?;
    let expired = now.duration_since(created).as_secs() >= i64::try_from(ttl).unwrap_or(i64::MAX);
    Ok((data, expired))
}

/// The lock annotation's value for `token`, valid from `now` for [`LOCK_TTL`].
fn lock_value(token: &str, now: jiff::Timestamp) -> String {
    let data =
        LockData { owner: token.to_owned(), created_at: now.to_string(), ttl: format!("{}s", LOCK_TTL.as_secs()) };
    serde_json::to_string(&data).unwrap_or_default()
}

/// Try to take the lock: `Ok(None)` while someone else holds an unexpired lock or when another
/// taker won the race; an error when the annotation cannot be read (it counts as held).
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
    if let Some(raw) = ns.annotations().get(LOCK_ANNOTATION) {
        let (_, expired) = lock_state(ns_name, raw, now)?;
        if !expired {
            return Ok(None);
        }
    }
    let token = format!("{}#{}", owner(shared), uuid_like());
    let mut updated = ns.clone();
    updated
        .metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(LOCK_ANNOTATION.to_string(), lock_value(&token, now));
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
    /// Proves, right before a write, that the lock is still ours and renews it for another
    /// [`LOCK_TTL`]: `false` when it expired or someone else holds it now. The renewal carries
    /// the resourceVersion of the read that found our token, so a takeover between the two
    /// makes it fail rather than be overwritten.
    pub async fn fence(&self, shared: &Shared) -> Result<bool, ResourceError> {
        let api: Api<Namespace> = Api::all(shared.client.clone());
        let ns_name = &shared.config.lock_namespace;
        let ns = api.get(ns_name).await?;
        let now = jiff::Timestamp::now();
        let Some(raw) = ns.annotations().get(LOCK_ANNOTATION) else { return Ok(false) };
        let (data, expired) = lock_state(ns_name, raw, now)?;
        if data.owner != self.token || expired {
            return Ok(false);
        }
        let mut updated = ns.clone();
        updated
            .metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(LOCK_ANNOTATION.to_string(), lock_value(&self.token, now));
        match api.replace(ns_name, &PostParams::default(), &updated).await {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

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

/// A reservation that cannot be read: its range is unknown, so nothing may be allocated.
fn unreadable_reservation(object: String, field: &str, value: &str, why: impl std::fmt::Display) -> ResourceError {
    ResourceError::msg(
        "IpamReservationUnreadable",
        format!(
            "{object}: {field} {value:?} is not a CIDR block ({why}); it counts as taken, so no range is allocated \
             until it is fixed: write it as a.b.c.d/prefix"
        ),
    )
}

/// Every range already allocated in the management cluster: all clusters' CIDRs and all node
/// pools' subnets, in every namespace, read from the API server. `except` is the object being
/// allocated for, whose own value is not a reservation against itself.
pub async fn reserved_in_cluster(shared: &Shared, except: Option<&str>) -> Result<Vec<Ipv4Net>, ResourceError> {
    let mut out = Vec::new();
    let clusters: Api<AWSCluster> = Api::all(shared.client.clone());
    for c in clusters.list(&ListParams::default()).await?.items {
        if c.uid().is_some() && c.uid().as_deref() == except {
            continue;
        }
        if let Some(cidr) = c.status.as_ref().and_then(|s| s.provider.network.cidr.as_deref()) {
            let net: Ipv4Net = cidr.parse().map_err(|e| {
                unreadable_reservation(operatorkit::status::describe(&c), "status.provider.network.cidr", cidr, e)
            })?;
            out.push(net);
        }
    }
    let mds: Api<AWSMachineDeployment> = Api::all(shared.client.clone());
    for md in mds.list(&ListParams::default()).await?.items {
        if md.uid().is_some() && md.uid().as_deref() == except {
            continue;
        }
        // An annotation that is not a CIDR block reserves nothing: no range was allocated
        // there (ours are written as CIDR blocks), and the pool itself is refused for it
        // (`check_node_pool_subnet`: Ready=False, naming the annotation). One pool's bad
        // annotation must not stop allocation for every other object of the installation.
        if let Some(cidr) = md.annotations().get(labels::MACHINE_DEPLOYMENT_SUBNET)
            && let Ok(net) = cidr.parse::<Ipv4Net>()
        {
            out.push(net);
        }
    }
    Ok(out)
}

/// Every subnet of the tenant account.
async fn tenant_subnets(tenant: &AccountClients) -> Result<Vec<Ipv4Net>, ResourceError> {
    let mut out = Vec::new();
    for cidr in crate::aws::ec2::subnet_cidrs(tenant).await? {
        let net: Ipv4Net = cidr
            .parse()
            .map_err(|e| unreadable_reservation(format!("account {}", tenant.account_id), "subnet CIDR", &cidr, e))?;
        out.push(net);
    }
    Ok(out)
}

/// What a range is allocated for.
#[derive(Debug, Clone, Copy)]
pub enum Owner<'a> {
    /// A cluster's CIDR, persisted in `status.provider.network.cidr`.
    Cluster(&'a AWSCluster),
    /// A node pool's CIDR, persisted in its annotation [`labels::MACHINE_DEPLOYMENT_SUBNET`].
    NodePool(&'a AWSMachineDeployment),
}

impl Owner<'_> {
    fn describe(&self) -> String {
        match self {
            Owner::Cluster(c) => operatorkit::status::describe(*c),
            Owner::NodePool(md) => operatorkit::status::describe(*md),
        }
    }

    /// The allocation the API server holds for the object now (not the cache's copy).
    async fn persisted(&self, shared: &Shared) -> Result<Option<String>, ResourceError> {
        Ok(match self {
            Owner::Cluster(c) => {
                let api: Api<AWSCluster> = Api::namespaced(shared.client.clone(), &c.namespace().unwrap_or_default());
                api.get(&c.name_any()).await?.status.and_then(|s| s.provider.network.cidr)
            }
            Owner::NodePool(md) => {
                let api: Api<AWSMachineDeployment> =
                    Api::namespaced(shared.client.clone(), &md.namespace().unwrap_or_default());
                api.get(&md.name_any()).await?.annotations().get(labels::MACHINE_DEPLOYMENT_SUBNET).cloned()
            }
        })
    }

    async fn persist(&self, shared: &Shared, cidr: &Ipv4Net) -> Result<(), ResourceError> {
        match self {
            Owner::Cluster(c) => {
                let api: Api<AWSCluster> = Api::namespaced(shared.client.clone(), &c.namespace().unwrap_or_default());
                let patch = serde_json::json!({"status": {"provider": {"network": {"cidr": cidr.to_string()}}}});
                api.patch_status(&c.name_any(), &PatchParams::default(), &Patch::Merge(&patch)).await?;
            }
            Owner::NodePool(md) => annotate_node_pool(shared, md, cidr).await?,
        }
        Ok(())
    }
}

/// The result of [`allocate`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Allocation {
    /// A new range, persisted.
    Allocated(Ipv4Net),
    /// The object already had this range (the cache had not seen it yet).
    Existing(String),
    /// The lock is held by someone else, or was lost before the write: try again later.
    Busy,
}

/// Allocates a `/mask` from `range` for `owner`, as the [module docs](self) describe.
pub async fn allocate(
    shared: &Shared,
    tenant: &AccountClients,
    owner: Owner<'_>,
    range: Ipv4Net,
    mask: u8,
) -> Result<Allocation, ResourceError> {
    let subnets = tenant_subnets(tenant).await?;
    let Some(lock) = acquire(shared).await? else { return Ok(Allocation::Busy) };
    let result: Result<Allocation, ResourceError> = async {
        if let Some(existing) = owner.persisted(shared).await? {
            return Ok(Allocation::Existing(existing));
        }
        let except = match owner {
            Owner::Cluster(c) => c.uid(),
            Owner::NodePool(md) => md.uid(),
        };
        let mut reserved = reserved_in_cluster(shared, except.as_deref()).await?;
        reserved.extend(subnets);
        reserved.sort_by_key(|n: &Ipv4Net| (u32::from(n.network()), n.prefix()));
        reserved.dedup();
        let cidr = ipam::free(range, mask, &reserved).map_err(|e| {
            ResourceError::msg("IpamExhausted", format!("{}: no free /{mask} in {range}: {e}", owner.describe()))
        })?;
        if !lock.fence(shared).await? {
            tracing::info!(object = %owner.describe(), "the IPAM lock expired before the write; allocating again later");
            return Ok(Allocation::Busy);
        }
        owner.persist(shared, &cidr).await?;
        Ok(Allocation::Allocated(cidr))
    }
    .await;
    lock.release(shared).await;
    result
}

/// The range a cluster allocates from: its NetworkPool's, else the operator's.
pub async fn range_for_cluster(shared: &Shared, cluster: &AWSCluster) -> Result<Ipv4Net, ResourceError> {
    if let Some(pool) = cluster.spec.provider.nodes.as_ref().and_then(|n| n.network_pool.as_deref()) {
        let api: Api<NetworkPool> = Api::namespaced(shared.client.clone(), &cluster.namespace().unwrap_or_default());
        let Some(np) = api.get_opt(pool).await? else {
            return Err(InvalidInput {
                object: operatorkit::status::describe(cluster),
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

/// A node pool's subnet annotation, whoever set it, must be a CIDR block that overlaps no other
/// allocation: no cluster's CIDR (its own cluster's included) and no other node pool's subnet.
/// Violations are [`InvalidInput`] naming the annotation, the other object and the fix.
pub async fn check_node_pool_subnet(
    shared: &Shared,
    md: &AWSMachineDeployment,
    subnet: &str,
) -> Result<(), ResourceError> {
    let field = format!("annotation {}", labels::MACHINE_DEPLOYMENT_SUBNET);
    let invalid = |reason: &'static str, message: String| -> ResourceError {
        InvalidInput { object: operatorkit::status::describe(md), reason, message }.into()
    };
    let net: Ipv4Net = subnet.parse().map_err(|e| {
        invalid("InvalidAnnotation", format!("{field} {subnet:?}: {e}; remove it to have a range allocated"))
    })?;
    // Every other allocation: each cluster's CIDR and each other pool's range, as (object, CIDR).
    let clusters: Api<AWSCluster> = Api::all(shared.client.clone());
    let mut taken: Vec<(String, String)> = clusters
        .list(&ListParams::default())
        .await?
        .items
        .iter()
        .filter_map(|c| Some((operatorkit::status::describe(c), c.status.as_ref()?.provider.network.cidr.clone()?)))
        .collect();
    let mds: Api<AWSMachineDeployment> = Api::all(shared.client.clone());
    taken.extend(mds.list(&ListParams::default()).await?.items.iter().filter(|o| o.uid() != md.uid()).filter_map(
        |o| Some((operatorkit::status::describe(o), o.annotations().get(labels::MACHINE_DEPLOYMENT_SUBNET)?.clone())),
    ));
    match taken.iter().find(|(_, cidr)| cidr.parse::<Ipv4Net>().is_ok_and(|other| other.overlaps(&net))) {
        Some((other, cidr)) => Err(invalid(
            "OverlappingSubnet",
            format!(
                "{field} {net} overlaps {other} ({cidr}): choose a range no cluster or node pool uses, or remove \
                 the annotation to have one allocated"
            ),
        )),
        None => Ok(()),
    }
}

/// Persist a node pool's CIDR in its annotation.
pub async fn annotate_node_pool(shared: &Shared, md: &AWSMachineDeployment, cidr: &Ipv4Net) -> Result<(), kube::Error> {
    let api: Api<AWSMachineDeployment> = Api::namespaced(shared.client.clone(), &md.namespace().unwrap_or_default());
    let patch = serde_json::json!({"metadata": {"annotations": {labels::MACHINE_DEPLOYMENT_SUBNET: cidr.to_string()}}});
    api.patch(&md.name_any(), &PatchParams::default(), &Patch::Merge(&patch)).await?;
    Ok(())
}

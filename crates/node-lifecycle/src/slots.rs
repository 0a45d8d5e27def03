//! Rollout slots: at most N holders of a scope at once (clusters rolling per management
//! cluster, node pools rolling per cluster), shared by every replica of an operator and kept
//! across restarts.
//!
//! A slot is a `coordination.k8s.io/v1` Lease named `<scope>-<i>` (`i` below the limit) in the
//! operator's namespace, labelled [`SCOPE_LABEL`]`=<scope>`. Its `holderIdentity` names the
//! holder (a cluster, a node pool); its [`MEMBERS_ANNOTATION`] lists the objects that need it
//! (a cluster's control plane and pools each join the cluster's slot), so the slot is freed
//! when the last of them is done, not when the first is. Every write is guarded by the Lease's
//! `resourceVersion` (create, replace, delete with a precondition), so two replicas that race
//! for the last slot cannot both win: the loser sees a conflict and the slot as taken.
//!
//! The Kubernetes API server is the only state: an operator that restarts finds its slots where
//! it left them, and a member whose object no longer exists is dropped by the next
//! [`Slots::acquire`] that finds every slot taken (the caller says which members live).

use std::collections::BTreeMap;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use kube::api::{DeleteParams, ListParams, ObjectMeta, PostParams, Preconditions};
use kube::{Api, ResourceExt as _};

/// The label that names a Lease's scope.
pub const SCOPE_LABEL: &str = "node-lifecycle.giantswarm.io/rollout-scope";

/// The annotation listing a slot's members, comma-separated.
pub const MEMBERS_ANNOTATION: &str = "node-lifecycle.giantswarm.io/rollout-members";

/// A slot operation that failed at the API server.
#[derive(Debug, thiserror::Error)]
#[error("rollout slots {scope}: {source}")]
pub struct SlotError {
    /// The scope.
    pub scope: String,
    /// The API error.
    #[source]
    pub source: kube::Error,
}

/// How many fresh listings [`Slots::acquire`] tries after lost races before it answers busy.
const MAX_ATTEMPTS: usize = 32;

/// What [`Slots::acquire`] got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Acquired {
    /// No limit: nothing was written.
    Unlimited,
    /// The holder has this slot (it had it already, or took it now).
    Held(String),
    /// Every slot is taken by these holders, sorted.
    Busy(Vec<String>),
}

impl Acquired {
    /// Whether the holder may go on.
    pub fn is_held(&self) -> bool {
        !matches!(self, Self::Busy(_))
    }
}

/// The slots of one scope.
#[derive(Clone)]
pub struct Slots {
    api: Api<Lease>,
    scope: String,
    limit: u32,
}

impl std::fmt::Debug for Slots {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Slots").field("scope", &self.scope).field("limit", &self.limit).finish_non_exhaustive()
    }
}

fn members_of(lease: &Lease) -> Vec<String> {
    lease
        .annotations()
        .get(MEMBERS_ANNOTATION)
        .map(|m| m.split(',').filter(|s| !s.is_empty()).map(str::to_string).collect())
        .unwrap_or_default()
}

fn holder_of(lease: &Lease) -> Option<&str> {
    lease.spec.as_ref().and_then(|s| s.holder_identity.as_deref()).filter(|h| !h.is_empty())
}

fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409 || s.code == 404)
}

impl Slots {
    /// The slots of `scope` (a valid Lease name prefix, e.g. `aws-operator-rolling-clusters`),
    /// at most `limit` held at once (0: no limit, and no Lease is ever written), as Leases in
    /// `namespace`.
    pub fn new(client: kube::Client, namespace: &str, scope: impl Into<String>, limit: u32) -> Self {
        Self { api: Api::namespaced(client, namespace), scope: scope.into(), limit }
    }

    /// The scope.
    pub fn scope(&self) -> &str {
        &self.scope
    }

    /// The limit (0: none).
    pub fn limit(&self) -> u32 {
        self.limit
    }

    fn err(&self, source: kube::Error) -> SlotError {
        SlotError { scope: self.scope.clone(), source }
    }

    async fn list(&self) -> Result<Vec<Lease>, SlotError> {
        let lp = ListParams::default().labels(&format!("{SCOPE_LABEL}={}", self.scope));
        Ok(self.api.list(&lp).await.map_err(|e| self.err(e))?.items)
    }

    fn lease(&self, name: &str, holder: &str, members: &[String], resource_version: Option<String>) -> Lease {
        Lease {
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                labels: Some(BTreeMap::from([(SCOPE_LABEL.to_string(), self.scope.clone())])),
                annotations: Some(BTreeMap::from([(MEMBERS_ANNOTATION.to_string(), members.join(","))])),
                resource_version,
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec { holder_identity: Some(holder.to_string()), ..LeaseSpec::default() }),
        }
    }

    /// Put `member` in `lease` (held by its holder); `false` on a conflict.
    async fn join(&self, lease: &Lease, member: &str) -> Result<bool, SlotError> {
        let mut members = members_of(lease);
        if members.iter().any(|m| m == member) {
            return Ok(true);
        }
        members.push(member.to_string());
        members.sort();
        let name = lease.name_any();
        let holder = holder_of(lease).unwrap_or_default().to_string();
        let new = self.lease(&name, &holder, &members, lease.resource_version());
        match self.api.replace(&name, &PostParams::default(), &new).await {
            Ok(_) => Ok(true),
            Err(e) if is_conflict(&e) => Ok(false),
            Err(e) => Err(self.err(e)),
        }
    }

    /// Take a slot for `holder` on behalf of `member` (an object that needs it; the holder
    /// itself when only one object does). Idempotent: a holder that has a slot keeps it and
    /// gains the member. When every slot is taken, the members `alive` says no longer exist are
    /// dropped, and a slot left without members is taken over.
    pub async fn acquire<F, Fut>(&self, holder: &str, member: &str, alive: F) -> Result<Acquired, SlotError>
    where
        F: Fn(String) -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        if self.limit == 0 {
            return Ok(Acquired::Unlimited);
        }
        // A lost race (a conflict) is tried again with a fresh listing. Every conflict is some
        // other writer's success, so racers make progress; the bound only keeps a pathological
        // storm from spinning, and is generous enough that many replicas racing for the last
        // slots are not told "busy" while one is still free.
        for _ in 0..MAX_ATTEMPTS {
            let leases = self.list().await?;
            if let Some(own) = leases.iter().find(|l| holder_of(l) == Some(holder)) {
                if self.join(own, member).await? {
                    return Ok(Acquired::Held(own.name_any()));
                }
                continue;
            }
            let held: Vec<&Lease> = leases.iter().filter(|l| holder_of(l).is_some()).collect();
            let mut raced = false;
            if (held.len() as u32) < self.limit {
                for i in 0..self.limit {
                    let name = format!("{}-{i}", self.scope);
                    let new = self.lease(&name, holder, &[member.to_string()], None);
                    // One write per listing: after a lost race the next slot is tried only on
                    // a fresh listing, which shows whether this holder took a slot meanwhile
                    // (through another replica) — trying the next slot at once could give one
                    // holder two slots.
                    match leases.iter().find(|l| l.name_any() == name) {
                        None => match self.api.create(&PostParams::default(), &new).await {
                            Ok(_) => return Ok(Acquired::Held(name)),
                            Err(e) if matches!(&e, kube::Error::Api(s) if s.code == 409) => {
                                raced = true;
                                break;
                            }
                            Err(e) => return Err(self.err(e)),
                        },
                        Some(free) if holder_of(free).is_none() => {
                            let new = self.lease(&name, holder, &[member.to_string()], free.resource_version());
                            match self.api.replace(&name, &PostParams::default(), &new).await {
                                Ok(_) => return Ok(Acquired::Held(name)),
                                Err(e) if is_conflict(&e) => {
                                    raced = true;
                                    break;
                                }
                                Err(e) => return Err(self.err(e)),
                            }
                        }
                        Some(_) => {}
                    }
                }
            }
            if raced {
                continue;
            }
            // Full: drop the members that are gone, and free a slot nobody needs any more.
            let mut freed = false;
            for lease in &held {
                let members = members_of(lease);
                let mut living = Vec::new();
                for m in &members {
                    if alive(m.clone()).await {
                        living.push(m.clone());
                    }
                }
                if living.len() == members.len() && !members.is_empty() {
                    continue;
                }
                if self.write_members(lease, &living).await? {
                    freed |= living.is_empty();
                }
            }
            if !freed {
                let mut holders: Vec<String> = held.iter().filter_map(|l| holder_of(l).map(str::to_string)).collect();
                holders.sort();
                return Ok(Acquired::Busy(holders));
            }
        }
        let mut holders: Vec<String> =
            self.list().await?.iter().filter_map(|l| holder_of(l).map(str::to_string)).collect();
        holders.sort();
        Ok(Acquired::Busy(holders))
    }

    /// Leave `lease` with `members`, or free it (delete it, if it is unchanged) when none are
    /// left; `false` on a conflict.
    async fn write_members(&self, lease: &Lease, members: &[String]) -> Result<bool, SlotError> {
        let name = lease.name_any();
        let result = if members.is_empty() {
            let dp = DeleteParams {
                preconditions: Some(Preconditions { resource_version: lease.resource_version(), uid: lease.uid() }),
                ..DeleteParams::default()
            };
            self.api.delete(&name, &dp).await.map(|_| ())
        } else {
            let holder = holder_of(lease).unwrap_or_default().to_string();
            let new = self.lease(&name, &holder, members, lease.resource_version());
            self.api.replace(&name, &PostParams::default(), &new).await.map(|_| ())
        };
        match result {
            Ok(()) => Ok(true),
            Err(e) if is_conflict(&e) => Ok(false),
            Err(e) => Err(self.err(e)),
        }
    }

    /// `member` no longer needs `holder`'s slot; the slot is freed when it was the last member.
    /// Does nothing without a limit or when the holder has no slot.
    pub async fn release(&self, holder: &str, member: &str) -> Result<(), SlotError> {
        if self.limit == 0 {
            return Ok(());
        }
        for _ in 0..5 {
            let leases = self.list().await?;
            let Some(own) = leases.iter().find(|l| holder_of(l) == Some(holder)) else {
                return Ok(());
            };
            let members: Vec<String> = members_of(own).into_iter().filter(|m| m != member).collect();
            if members.len() == members_of(own).len() && !members.is_empty() {
                return Ok(());
            }
            if self.write_members(own, &members).await? {
                return Ok(());
            }
        }
        Ok(())
    }

    /// The holders of this scope's slots, sorted.
    pub async fn holders(&self) -> Result<Vec<String>, SlotError> {
        if self.limit == 0 {
            return Ok(Vec::new());
        }
        let mut holders: Vec<String> =
            self.list().await?.iter().filter_map(|l| holder_of(l).map(str::to_string)).collect();
        holders.sort();
        Ok(holders)
    }
}

/// A Lease-name-safe scope from parts (lowercase, `[a-z0-9-]`, at most 50 characters so that
/// `-<i>` fits): `scope_name(&["aws-operator", "pools", "org-acme", "a1b2c"])`.
pub fn scope_name(parts: &[&str]) -> String {
    let joined = parts.join("-").to_ascii_lowercase();
    let mut clean: String =
        joined.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '-' }).collect();
    clean.truncate(50);
    clean.trim_matches('-').to_string()
}

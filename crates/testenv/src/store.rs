//! Versioned object storage: what etcd is to kube-apiserver.
//!
//! * One global, monotonic resourceVersion (RV) sequence across every resource (checklist C1).
//! * Multi-version concurrency control: every key keeps the versions written since the last
//!   compaction, so a paginated list can be served from the snapshot of its first page (D3) and a
//!   list at an exact RV can be answered (D6).
//! * A per-resource event log, so that a watch from RV `X` replays every change after `X` exactly
//!   once and in order (E2, E6), and a watch from before the retained history gets `410 Expired` (E5).
//! * Compaction by age and by count, and on demand from tests.
//! * Indexes by uid and by owner uid, for the garbage collector.
//!
//! The store knows nothing of Kubernetes semantics beyond the [`Meta`] summary that the API layer
//! computes for each object. Objects are kept as serialized JSON (`Bytes`): reads, lists and watch
//! events are served without re-serialising, and memory stays close to the size of the JSON.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::RwLock;
use serde_json::Value;

/// Identifies the storage of one resource, shared by all of its served versions:
/// `configmaps`, `deployments.apps`, `foos.example.com`.
pub type StorageKey = Arc<str>;

/// Identifies one object within a resource: (namespace or "", name). Ordered as etcd keys are.
pub type ObjKey = (String, String);

/// A reference from an object to its owner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnerRef {
    /// The owner's uid, which identifies it.
    pub uid: String,
    /// `apiVersion` of the owner.
    pub api_version: String,
    /// `kind` of the owner.
    pub kind: String,
    /// `name` of the owner.
    pub name: String,
    /// Whether this owner is the managing controller.
    pub controller: bool,
    /// Whether this dependent blocks the foreground deletion of the owner.
    pub block_owner_deletion: bool,
}

/// What the API layer extracts from an object when it is written, so that selectors, the
/// garbage collector and the namespace controller never need to parse the stored JSON.
#[derive(Clone, Debug, Default)]
pub struct Meta {
    /// `metadata.uid`.
    pub uid: String,
    /// `metadata.resourceVersion`, assigned by the store.
    pub rv: u64,
    /// `metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// `metadata.finalizers`.
    pub finalizers: Vec<String>,
    /// `metadata.ownerReferences`.
    pub owners: Vec<OwnerRef>,
    /// Whether `metadata.deletionTimestamp` is set.
    pub deleting: bool,
    /// `apiVersion` the object was stored in (multi-version resources).
    pub api_version: String,
    /// Extra fields a field selector may use for this kind, e.g. `spec.nodeName` for pods.
    pub fields: Vec<(String, String)>,
    /// The schema epoch the object was defaulted with (custom resources); see the registry.
    pub schema_epoch: u64,
}

impl Meta {
    /// The value of a field for field selectors: `metadata.name` and `metadata.namespace` are
    /// answered by the caller from the key; this looks up the kind-specific fields.
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }
}

/// One stored version of an object.
#[derive(Debug)]
pub struct Stored {
    /// The object as JSON, with `metadata.resourceVersion` equal to `meta.rv`.
    pub json: Bytes,
    /// The summary of the object.
    pub meta: Meta,
}

impl Stored {
    /// Parse the stored JSON. Stored JSON was produced by serde_json, so this cannot fail
    /// short of memory corruption; a failure yields `Value::Null` rather than a panic.
    pub fn value(&self) -> Value {
        serde_json::from_slice(&self.json).unwrap_or(Value::Null)
    }
}

/// The type of a watch event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    /// The object was created.
    Added,
    /// The object was changed.
    Modified,
    /// The object was removed.
    Deleted,
}

impl EventType {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One change, as kept in the event log and delivered to watchers.
#[derive(Debug)]
pub struct Event {
    /// The RV of the change.
    pub rv: u64,
    /// What happened.
    pub kind: EventType,
    /// The object's key.
    pub key: ObjKey,
    /// The new state; for deletions, the last state with the deletion's RV (E3).
    pub object: Arc<Stored>,
    /// The previous state, for selector transitions (E4).
    pub prev: Option<Arc<Stored>>,
}

/// Why a write was refused by the store.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum StoreError {
    /// The key exists (create).
    #[error("already exists")]
    AlreadyExists,
    /// The key does not exist (update, delete).
    #[error("not found")]
    NotFound,
    /// The current RV differs from the expected one.
    #[error("conflict")]
    Conflict,
}

/// A requested change to one key.
#[derive(Debug)]
pub enum Change {
    /// Create the object; fails if it exists.
    Create(Value, Meta),
    /// Replace the object; fails if it does not exist or its RV is not `expect_rv`.
    Update {
        /// The new object.
        value: Value,
        /// Its summary.
        meta: Meta,
        /// The RV the change was computed from (optimistic concurrency).
        expect_rv: u64,
    },
    /// Remove the object; fails if its RV is not `expect_rv`.
    Delete {
        /// The RV the decision was made on.
        expect_rv: u64,
    },
}

/// A hint to the built-in controllers (garbage collector, namespace and CRD finalizers) that
/// something they may care about changed. Hints are cheap and may be redundant.
#[derive(Clone, Debug)]
pub enum Hint {
    /// An object was removed from storage.
    Removed {
        /// Its storage key.
        resource: StorageKey,
        /// Its key.
        key: ObjKey,
        /// Its uid.
        uid: String,
        /// The uids of its owners.
        owners: Vec<String>,
    },
    /// An object was written with owner references it did not have before: the garbage
    /// collector checks that its owners exist.
    Owned {
        /// Its storage key.
        resource: StorageKey,
        /// Its key.
        key: ObjKey,
    },
    /// An object was created: a new namespace gets its defaults.
    Added {
        /// Its storage key.
        resource: StorageKey,
        /// Its key.
        key: ObjKey,
    },
    /// An object is (now) marked for deletion, or changed while marked.
    Deleting {
        /// Its storage key.
        resource: StorageKey,
        /// Its key.
        key: ObjKey,
        /// Its uid.
        uid: String,
    },
}

/// Retention of history.
#[derive(Clone, Debug)]
pub struct Retention {
    /// Events older than this are compacted.
    pub max_age: Duration,
    /// At most this many events are kept in all.
    pub max_events: usize,
}

impl Default for Retention {
    fn default() -> Self {
        // etcd in kube-apiserver is compacted every 5 minutes; that is the window a re-watch
        // can rely on.
        Retention { max_age: Duration::from_secs(300), max_events: 200_000 }
    }
}

/// The versions of one key since the last compaction, oldest first. `None` is a tombstone.
#[derive(Debug, Default)]
struct Versions(Vec<(u64, Option<Arc<Stored>>)>);

impl Versions {
    fn latest(&self) -> Option<&Arc<Stored>> {
        self.0.last().and_then(|(_, s)| s.as_ref())
    }

    fn at(&self, rv: u64) -> Option<&Arc<Stored>> {
        self.0.iter().rev().find(|(v, _)| *v <= rv).and_then(|(_, s)| s.as_ref())
    }
}

#[derive(Debug)]
struct Table {
    objects: BTreeMap<ObjKey, Versions>,
    log: VecDeque<Arc<Event>>,
    notify: tokio::sync::watch::Sender<u64>,
    live: usize,
}

impl Table {
    fn new() -> Table {
        Table { objects: BTreeMap::new(), log: VecDeque::new(), notify: tokio::sync::watch::Sender::new(0), live: 0 }
    }
}

#[derive(Debug)]
struct Inner {
    rv: u64,
    /// History at or below this RV has been compacted away.
    compacted: u64,
    tables: HashMap<StorageKey, Table>,
    /// Every event in RV order, for compaction: (rv, when, resource, key).
    history: VecDeque<(u64, Instant, StorageKey, ObjKey)>,
    by_uid: HashMap<String, (StorageKey, ObjKey)>,
    dependents: HashMap<String, HashSet<(StorageKey, ObjKey)>>,
    retention: Retention,
    hints: Option<tokio::sync::mpsc::UnboundedSender<Hint>>,
}

/// The store. Cheap to share behind an `Arc`.
#[derive(Debug)]
pub struct Store {
    inner: RwLock<Inner>,
}

/// The outcome of a committed change.
#[derive(Debug, Clone)]
pub struct Committed {
    /// The new state, or for a deletion the final state with the deletion RV.
    pub object: Arc<Stored>,
    /// The event that was emitted.
    pub kind: EventType,
}

/// A consistent read of one resource at one RV.
#[derive(Debug)]
pub struct Snapshot {
    /// The RV the items reflect.
    pub rv: u64,
    /// The items in key order.
    pub items: Vec<(ObjKey, Arc<Stored>)>,
    /// Whether items remain after the last one returned (pagination).
    pub more: bool,
    /// How many items remain after the last one returned.
    pub remaining: usize,
}

/// Where a watch starts reading the event log.
#[derive(Debug)]
pub struct WatchStart {
    /// Events already in the log after the start RV, oldest first.
    pub backlog: Vec<Arc<Event>>,
    /// Notified with the latest RV of this resource on every change.
    pub notify: tokio::sync::watch::Receiver<u64>,
}

/// Errors of reads that depend on history.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum HistoryError {
    /// The RV is older than the retained history; carries the oldest RV a read may start from
    /// (the compaction point).
    #[error("too old resource version")]
    Expired {
        /// The oldest RV that can still be served.
        oldest: u64,
    },
    /// The RV is newer than anything stored; carries the current RV.
    #[error("too large resource version")]
    TooLarge {
        /// The current RV.
        current: u64,
    },
}

impl Store {
    /// A new, empty store.
    pub fn new(retention: Retention) -> Store {
        Store {
            inner: RwLock::new(Inner {
                rv: 0,
                compacted: 0,
                tables: HashMap::new(),
                history: VecDeque::new(),
                by_uid: HashMap::new(),
                dependents: HashMap::new(),
                retention,
                hints: None,
            }),
        }
    }

    /// Route controller hints to `tx`.
    pub fn set_hints(&self, tx: tokio::sync::mpsc::UnboundedSender<Hint>) {
        self.inner.write().hints = Some(tx);
    }

    /// The current RV.
    pub fn current_rv(&self) -> u64 {
        self.inner.read().rv
    }

    /// The RV of the latest change to one resource (0 if it never changed): caches derived
    /// from a resource (the RBAC policy) rebuild only when it moves.
    pub fn last_change(&self, resource: &str) -> u64 {
        self.inner.read().tables.get(resource).map_or(0, |t| *t.notify.borrow())
    }

    /// The oldest RV a watch or an exact read can start from.
    pub fn compacted_rv(&self) -> u64 {
        self.inner.read().compacted
    }

    /// The current state of one object.
    pub fn get(&self, resource: &str, key: &ObjKey) -> Option<Arc<Stored>> {
        let inner = self.inner.read();
        inner.tables.get(resource)?.objects.get(key)?.latest().cloned()
    }

    /// Find an object by uid: its resource, key and current state.
    pub fn get_by_uid(&self, uid: &str) -> Option<(StorageKey, ObjKey, Arc<Stored>)> {
        let inner = self.inner.read();
        let (res, key) = inner.by_uid.get(uid)?;
        let obj = inner.tables.get(res)?.objects.get(key)?.latest()?.clone();
        Some((res.clone(), key.clone(), obj))
    }

    /// Objects that list `uid` among their owners.
    pub fn dependents_of(&self, uid: &str) -> Vec<(StorageKey, ObjKey, Arc<Stored>)> {
        let inner = self.inner.read();
        let Some(deps) = inner.dependents.get(uid) else {
            return Vec::new();
        };
        let mut out: Vec<_> = deps
            .iter()
            .filter_map(|(res, key)| {
                let obj = inner.tables.get(res)?.objects.get(key)?.latest()?.clone();
                Some((res.clone(), key.clone(), obj))
            })
            .collect();
        out.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
        out
    }

    /// Number of live objects of a resource in a namespace (or in all, with `None`).
    pub fn count(&self, resource: &str, namespace: Option<&str>) -> usize {
        let inner = self.inner.read();
        let Some(table) = inner.tables.get(resource) else {
            return 0;
        };
        match namespace {
            None => table.live,
            Some(ns) => ns_range(&table.objects, ns).filter(|(_, v)| v.latest().is_some()).count(),
        }
    }

    /// Storage keys that hold at least one live object.
    pub fn resources_with_objects(&self) -> Vec<StorageKey> {
        let inner = self.inner.read();
        let mut keys: Vec<_> = inner.tables.iter().filter(|(_, t)| t.live > 0).map(|(k, _)| k.clone()).collect();
        keys.sort();
        keys
    }

    /// Read a page of one resource.
    ///
    /// * `at`: `None` reads the current state; `Some(rv)` reads the snapshot at `rv`, which must
    ///   not be older than the retained history nor newer than the current RV.
    /// * `namespace`: restrict to one namespace.
    /// * `after`: continue after this key (pagination).
    /// * `filter`: items that do not pass are skipped and do not count towards `limit`.
    pub fn list(
        &self,
        resource: &str,
        namespace: Option<&str>,
        at: Option<u64>,
        after: Option<&ObjKey>,
        limit: Option<usize>,
        filter: &dyn Fn(&ObjKey, &Stored) -> bool,
    ) -> Result<Snapshot, HistoryError> {
        let inner = self.inner.read();
        let rv = match at {
            None => inner.rv,
            Some(rv) if rv > inner.rv => return Err(HistoryError::TooLarge { current: inner.rv }),
            Some(rv) if rv < inner.compacted => {
                return Err(HistoryError::Expired { oldest: inner.compacted });
            }
            Some(rv) => rv,
        };
        let mut snap = Snapshot { rv, items: Vec::new(), more: false, remaining: 0 };
        let Some(table) = inner.tables.get(resource) else {
            return Ok(snap);
        };
        let iter: Box<dyn Iterator<Item = (&ObjKey, &Versions)>> = match (namespace, after) {
            (Some(ns), None) => Box::new(ns_range(&table.objects, ns)),
            (Some(ns), Some(after)) => Box::new(ns_range(&table.objects, ns).skip_while(move |(k, _)| *k <= after)),
            (None, Some(after)) => Box::new(
                table.objects.range::<ObjKey, _>((std::ops::Bound::Excluded(after), std::ops::Bound::Unbounded)),
            ),
            (None, None) => Box::new(table.objects.iter()),
        };
        let current = at.is_none() || rv == inner.rv;
        for (key, versions) in iter {
            let found = if current { versions.latest() } else { versions.at(rv) };
            let Some(obj) = found else { continue };
            if !filter(key, obj) {
                continue;
            }
            if let Some(limit) = limit
                && snap.items.len() >= limit
            {
                snap.more = true;
                snap.remaining += 1;
                continue;
            }
            snap.items.push((key.clone(), obj.clone()));
        }
        Ok(snap)
    }

    /// Start a watch of one resource from `from` (exclusive): the events after it that are in
    /// the log, and a receiver to learn of later ones. `from` below the compaction point fails.
    pub fn watch_from(&self, resource: &str, from: u64) -> Result<WatchStart, HistoryError> {
        let mut inner = self.inner.write();
        if from < inner.compacted {
            return Err(HistoryError::Expired { oldest: inner.compacted });
        }
        if from > inner.rv {
            return Err(HistoryError::TooLarge { current: inner.rv });
        }
        let table = inner.tables.entry(resource.into()).or_insert_with(Table::new);
        let start = table.log.partition_point(|e| e.rv <= from);
        Ok(WatchStart { backlog: table.log.range(start..).cloned().collect(), notify: table.notify.subscribe() })
    }

    /// Events of one resource after `from`, at most `max`; `Err` if `from` was compacted away.
    pub fn events_after(&self, resource: &str, from: u64, max: usize) -> Result<Vec<Arc<Event>>, HistoryError> {
        let inner = self.inner.read();
        if from < inner.compacted {
            return Err(HistoryError::Expired { oldest: inner.compacted });
        }
        let Some(table) = inner.tables.get(resource) else {
            return Ok(Vec::new());
        };
        let start = table.log.partition_point(|e| e.rv <= from);
        Ok(table.log.range(start..).take(max).cloned().collect())
    }

    /// Apply one change atomically, assigning the next RV, logging the event and notifying
    /// watchers. `set_rv` writes the RV into the object before it is serialised.
    pub fn commit(&self, resource: &StorageKey, key: &ObjKey, change: Change) -> Result<Committed, StoreError> {
        let mut guard = self.inner.write();
        let inner = &mut *guard;
        let table = inner.tables.entry(resource.clone()).or_insert_with(Table::new);
        let versions = table.objects.entry(key.clone()).or_default();
        let prev = versions.latest().cloned();
        let rv = inner.rv + 1;
        let (kind, object) = match change {
            Change::Create(mut value, mut meta) => {
                if prev.is_some() {
                    return Err(StoreError::AlreadyExists);
                }
                meta.rv = rv;
                set_rv(&mut value, rv);
                (EventType::Added, Arc::new(Stored { json: to_bytes(&value), meta }))
            }
            Change::Update { mut value, mut meta, expect_rv } => {
                let Some(prev) = &prev else { return Err(StoreError::NotFound) };
                if prev.meta.rv != expect_rv {
                    return Err(StoreError::Conflict);
                }
                meta.rv = rv;
                set_rv(&mut value, rv);
                (EventType::Modified, Arc::new(Stored { json: to_bytes(&value), meta }))
            }
            Change::Delete { expect_rv } => {
                let Some(prev) = &prev else { return Err(StoreError::NotFound) };
                if prev.meta.rv != expect_rv {
                    return Err(StoreError::Conflict);
                }
                let mut value = prev.value();
                set_rv(&mut value, rv);
                let mut meta = prev.meta.clone();
                meta.rv = rv;
                (EventType::Deleted, Arc::new(Stored { json: to_bytes(&value), meta }))
            }
        };
        inner.rv = rv;
        versions.0.push((rv, (kind != EventType::Deleted).then(|| object.clone())));
        match kind {
            EventType::Added => table.live += 1,
            EventType::Deleted => table.live -= 1,
            EventType::Modified => {}
        }
        let event = Arc::new(Event { rv, kind, key: key.clone(), object: object.clone(), prev: prev.clone() });
        table.log.push_back(event);
        table.notify.send_replace(rv);
        inner.history.push_back((rv, Instant::now(), resource.clone(), key.clone()));

        // Indexes for the garbage collector.
        if let Some(prev) = &prev {
            for owner in &prev.meta.owners {
                if let Some(set) = inner.dependents.get_mut(&owner.uid) {
                    set.remove(&(resource.clone(), key.clone()));
                    if set.is_empty() {
                        inner.dependents.remove(&owner.uid);
                    }
                }
            }
        }
        if kind == EventType::Deleted {
            inner.by_uid.remove(&object.meta.uid);
        } else {
            inner.by_uid.insert(object.meta.uid.clone(), (resource.clone(), key.clone()));
            for owner in &object.meta.owners {
                inner.dependents.entry(owner.uid.clone()).or_default().insert((resource.clone(), key.clone()));
            }
        }
        if let Some(hints) = &inner.hints {
            let hint = match kind {
                EventType::Deleted => Some(Hint::Removed {
                    resource: resource.clone(),
                    key: key.clone(),
                    uid: object.meta.uid.clone(),
                    owners: object.meta.owners.iter().map(|o| o.uid.clone()).collect(),
                }),
                EventType::Added if key.0.is_empty() && object.meta.owners.is_empty() && !object.meta.deleting => {
                    Some(Hint::Added { resource: resource.clone(), key: key.clone() })
                }
                _ if object.meta.deleting => {
                    Some(Hint::Deleting { resource: resource.clone(), key: key.clone(), uid: object.meta.uid.clone() })
                }
                _ if !object.meta.owners.is_empty()
                    && prev.as_ref().is_none_or(|p| p.meta.owners != object.meta.owners) =>
                {
                    Some(Hint::Owned { resource: resource.clone(), key: key.clone() })
                }
                _ => None,
            };
            if let Some(hint) = hint {
                let _ = hints.send(hint);
            }
        }
        Self::compact_by_retention(inner);
        Ok(Committed { object, kind })
    }

    /// Drop all history up to the current RV: every watch or exact read from an older RV now
    /// gets `410 Expired`. A test hook.
    pub fn compact_now(&self) -> u64 {
        let mut inner = self.inner.write();
        let rv = inner.rv;
        Self::compact_to(&mut inner, rv);
        rv
    }

    /// Drop history up to `rv`.
    pub fn compact_to_rv(&self, rv: u64) {
        let mut inner = self.inner.write();
        let rv = rv.min(inner.rv);
        Self::compact_to(&mut inner, rv);
    }

    fn compact_by_retention(inner: &mut Inner) {
        let now = Instant::now();
        let mut limit = None;
        let excess = inner.history.len().saturating_sub(inner.retention.max_events);
        if excess > 0 {
            limit = inner.history.get(excess - 1).map(|h| h.0);
        }
        // Only look at the front: history is in time order.
        let mut aged = None;
        for (rv, at, _, _) in inner.history.iter() {
            if now.duration_since(*at) > inner.retention.max_age {
                aged = Some(*rv);
            } else {
                break;
            }
        }
        let limit = match (limit, aged) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        if let Some(limit) = limit {
            Self::compact_to(inner, limit);
        }
    }

    fn compact_to(inner: &mut Inner, limit: u64) {
        if limit <= inner.compacted {
            return;
        }
        while let Some((rv, _, _, _)) = inner.history.front() {
            if *rv > limit {
                break;
            }
            let Some((rv, _, resource, key)) = inner.history.pop_front() else { break };
            let Some(table) = inner.tables.get_mut(&resource) else { continue };
            while table.log.front().is_some_and(|e| e.rv <= rv) {
                table.log.pop_front();
            }
            if let Some(versions) = table.objects.get_mut(&key) {
                // Versions older than `rv` can no longer be read: any readable snapshot is at
                // or above the compaction point and sees this version or a later one.
                let keep_from = versions.0.iter().rposition(|(v, _)| *v <= rv).unwrap_or(0);
                versions.0.drain(..keep_from);
                if versions.0.len() == 1 && versions.0[0].1.is_none() {
                    table.objects.remove(&key);
                }
            }
        }
        inner.compacted = limit;
    }
}

fn ns_range<'a>(
    objects: &'a BTreeMap<ObjKey, Versions>,
    ns: &str,
) -> impl Iterator<Item = (&'a ObjKey, &'a Versions)> + 'a {
    let start = (ns.to_string(), String::new());
    let ns = ns.to_string();
    objects.range(start..).take_while(move |(k, _)| k.0 == ns)
}

fn set_rv(value: &mut Value, rv: u64) {
    if let Some(meta) = value.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
    }
}

fn to_bytes(value: &Value) -> Bytes {
    // Serialising a `Value` cannot fail (all map keys are strings).
    Bytes::from(serde_json::to_vec(value).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key(ns: &str, name: &str) -> ObjKey {
        (ns.to_string(), name.to_string())
    }

    fn obj(name: &str) -> (Value, Meta) {
        (json!({"metadata": {"name": name}}), Meta { uid: format!("uid-{name}"), ..Meta::default() })
    }

    fn res() -> StorageKey {
        "configmaps".into()
    }

    fn create(store: &Store, ns: &str, name: &str) -> u64 {
        let (v, m) = obj(name);
        store.commit(&res(), &key(ns, name), Change::Create(v, m)).unwrap().object.meta.rv
    }

    #[test]
    fn rv_is_global_and_written_into_objects() {
        let store = Store::new(Retention::default());
        assert_eq!(create(&store, "a", "x"), 1);
        let other: StorageKey = "secrets".into();
        let (v, m) = obj("y");
        let c = store.commit(&other, &key("a", "y"), Change::Create(v, m)).unwrap();
        assert_eq!(c.object.meta.rv, 2);
        assert_eq!(c.object.value()["metadata"]["resourceVersion"], "2");
    }

    #[test]
    fn stale_update_conflicts_and_missing_is_not_found() {
        let store = Store::new(Retention::default());
        let rv = create(&store, "a", "x");
        let (v, m) = obj("x");
        let err = store
            .commit(&res(), &key("a", "x"), Change::Update { value: v.clone(), meta: m.clone(), expect_rv: rv + 7 })
            .unwrap_err();
        assert_eq!(err, StoreError::Conflict);
        let err =
            store.commit(&res(), &key("a", "nope"), Change::Update { value: v, meta: m, expect_rv: rv }).unwrap_err();
        assert_eq!(err, StoreError::NotFound);
        let (v, m) = obj("x");
        assert_eq!(store.commit(&res(), &key("a", "x"), Change::Create(v, m)).unwrap_err(), StoreError::AlreadyExists);
    }

    #[test]
    fn snapshot_list_hides_later_changes() {
        let store = Store::new(Retention::default());
        create(&store, "a", "1");
        create(&store, "a", "2");
        let first = store.list(&res(), None, None, None, Some(1), &|_, _| true).unwrap();
        assert_eq!(first.items.len(), 1);
        assert!(first.more);
        assert_eq!(first.remaining, 1);
        // Changes after the first page must not show on the second.
        create(&store, "a", "3");
        let rv2 = store.get(&res(), &key("a", "2")).unwrap().meta.rv;
        store.commit(&res(), &key("a", "2"), Change::Delete { expect_rv: rv2 }).unwrap();
        let second = store.list(&res(), None, Some(first.rv), Some(&first.items[0].0), Some(10), &|_, _| true).unwrap();
        let names: Vec<_> = second.items.iter().map(|(k, _)| k.1.as_str()).collect();
        assert_eq!(names, ["2"]);
        assert!(!second.more);
    }

    #[test]
    fn namespace_scoped_list_uses_key_order() {
        let store = Store::new(Retention::default());
        create(&store, "b", "z");
        create(&store, "a", "y");
        create(&store, "b", "a");
        let snap = store.list(&res(), Some("b"), None, None, None, &|_, _| true).unwrap();
        let names: Vec<_> = snap.items.iter().map(|(k, _)| k.1.as_str()).collect();
        assert_eq!(names, ["a", "z"]);
        let all = store.list(&res(), None, None, None, None, &|_, _| true).unwrap();
        assert_eq!(all.items.len(), 3);
        assert_eq!(store.count(&res(), Some("b")), 2);
    }

    #[test]
    fn watch_replays_exactly_after_rv_and_compaction_expires() {
        let store = Store::new(Retention::default());
        let r1 = create(&store, "a", "1");
        create(&store, "a", "2");
        let start = store.watch_from(&res(), r1).unwrap();
        let rvs: Vec<_> = start.backlog.iter().map(|e| e.rv).collect();
        assert_eq!(rvs, [2]);
        store.compact_now();
        assert_eq!(store.watch_from(&res(), r1).unwrap_err(), HistoryError::Expired { oldest: 2 });
        // Watching from the compaction point itself is fine: nothing was lost after it.
        assert!(store.watch_from(&res(), 2).unwrap().backlog.is_empty());
        assert!(matches!(store.watch_from(&res(), 99), Err(HistoryError::TooLarge { current: 2 })));
    }

    #[test]
    fn delete_event_carries_last_state_with_deletion_rv() {
        let store = Store::new(Retention::default());
        let rv = create(&store, "a", "x");
        let c = store.commit(&res(), &key("a", "x"), Change::Delete { expect_rv: rv }).unwrap();
        assert_eq!(c.kind, EventType::Deleted);
        assert_eq!(c.object.meta.rv, rv + 1);
        assert_eq!(c.object.value()["metadata"]["name"], "x");
        assert_eq!(c.object.value()["metadata"]["resourceVersion"], (rv + 1).to_string());
        assert!(store.get(&res(), &key("a", "x")).is_none());
        // The old version remains readable at its RV until compaction.
        let snap = store.list(&res(), None, Some(rv), None, None, &|_, _| true).unwrap();
        assert_eq!(snap.items.len(), 1);
        store.compact_now();
        assert!(store.list(&res(), None, Some(rv), None, None, &|_, _| true).is_err());
    }

    #[test]
    fn retention_by_count_compacts_oldest() {
        let store = Store::new(Retention { max_age: Duration::from_secs(3600), max_events: 2 });
        for i in 0..5 {
            create(&store, "a", &i.to_string());
        }
        assert_eq!(store.compacted_rv(), 3);
        assert!(store.watch_from(&res(), 2).is_err());
        assert_eq!(store.watch_from(&res(), 3).unwrap().backlog.len(), 2);
    }

    #[test]
    fn owner_index_follows_owner_references() {
        let store = Store::new(Retention::default());
        let (v, mut m) = obj("child");
        m.owners.push(OwnerRef { uid: "owner".into(), ..OwnerRef::default_for_tests() });
        let c = store.commit(&res(), &key("a", "child"), Change::Create(v, m)).unwrap();
        assert_eq!(store.dependents_of("owner").len(), 1);
        assert!(store.get_by_uid("uid-child").is_some());
        store.commit(&res(), &key("a", "child"), Change::Delete { expect_rv: c.object.meta.rv }).unwrap();
        assert!(store.dependents_of("owner").is_empty());
        assert!(store.get_by_uid("uid-child").is_none());
    }

    impl OwnerRef {
        fn default_for_tests() -> OwnerRef {
            OwnerRef {
                uid: String::new(),
                api_version: "v1".into(),
                kind: "ConfigMap".into(),
                name: "o".into(),
                controller: false,
                block_owner_deletion: false,
            }
        }
    }
}

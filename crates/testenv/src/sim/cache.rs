//! Typed caches of the objects the simulation reacts to, fed from the store's event logs the
//! way informers are fed from watches: a list, then every event after it in order, and a new
//! list when the history the cache needs was compacted away (a watch's `410 Expired`).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::Metadata;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::de::DeserializeOwned;

use crate::store::{EventType, HistoryError, ObjKey, StorageKey, Store, Stored};

/// A change of one cached object.
#[derive(Debug)]
pub(crate) struct Change<T> {
    /// The object's key.
    pub key: ObjKey,
    /// The cached state before the change.
    pub old: Option<Arc<T>>,
    /// The state after it; `None` when the object is gone.
    pub new: Option<Arc<T>>,
}

/// The cache of one resource.
#[derive(Debug)]
pub(crate) struct Informer<T> {
    storage: StorageKey,
    /// The RV of the last event applied.
    rv: u64,
    objects: BTreeMap<ObjKey, Arc<T>>,
}

/// Events read from the log per poll: bounded so that a burst does not hold the store lock long.
const BATCH: usize = 512;

impl<T: DeserializeOwned + Metadata<Ty = ObjectMeta>> Informer<T> {
    /// An empty cache of `storage`; the first [`Informer::poll`] lists it.
    pub fn new(storage: StorageKey) -> Informer<T> {
        Informer { storage, rv: 0, objects: BTreeMap::new() }
    }

    /// The storage followed.
    pub fn storage(&self) -> &StorageKey {
        &self.storage
    }

    /// One object.
    pub fn get(&self, key: &ObjKey) -> Option<&Arc<T>> {
        self.objects.get(key)
    }

    /// Every object, in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&ObjKey, &Arc<T>)> {
        self.objects.iter()
    }

    /// The objects of one namespace, in key order.
    pub fn in_namespace<'a>(&'a self, namespace: &str) -> impl Iterator<Item = (&'a ObjKey, &'a Arc<T>)> + 'a {
        let start = (namespace.to_string(), String::new());
        let namespace = namespace.to_string();
        self.objects.range(start..).take_while(move |(k, _)| k.0 == namespace)
    }

    /// Apply every event after the last one seen; push what changed to `out`.
    pub fn poll(&mut self, store: &Store, out: &mut Vec<Change<T>>) {
        if self.rv == 0 {
            self.relist(store, out);
            return;
        }
        loop {
            match store.events_after(&self.storage, self.rv, BATCH) {
                Ok(events) => {
                    let more = events.len() == BATCH;
                    for event in events {
                        self.rv = event.rv;
                        let new = match event.kind {
                            EventType::Deleted => None,
                            EventType::Added | EventType::Modified => decode::<T>(&event.object),
                        };
                        self.apply(event.key.clone(), new, out);
                    }
                    if !more {
                        return;
                    }
                }
                Err(HistoryError::Expired { .. } | HistoryError::TooLarge { .. }) => {
                    self.relist(store, out);
                    return;
                }
            }
        }
    }

    fn apply(&mut self, key: ObjKey, new: Option<Arc<T>>, out: &mut Vec<Change<T>>) {
        let old = match &new {
            Some(obj) => self.objects.insert(key.clone(), obj.clone()),
            None => self.objects.remove(&key),
        };
        if old.is_some() || new.is_some() {
            out.push(Change { key, old, new });
        }
    }

    /// Replace the cache with the current state, reporting the differences as changes.
    fn relist(&mut self, store: &Store, out: &mut Vec<Change<T>>) {
        let Ok(snapshot) = store.list(&self.storage, None, None, None, None, &|_, _| true) else { return };
        // Watching from the snapshot RV afterwards misses nothing: the log holds every later event.
        self.rv = snapshot.rv.max(1);
        let mut gone: BTreeSet<ObjKey> = self.objects.keys().cloned().collect();
        for (key, stored) in snapshot.items {
            gone.remove(&key);
            let new = decode::<T>(&stored);
            self.apply(key, new, out);
        }
        for key in gone {
            self.apply(key, None, out);
        }
    }
}

fn decode<T: DeserializeOwned + Metadata<Ty = ObjectMeta>>(stored: &Stored) -> Option<Arc<T>> {
    match serde_json::from_slice::<T>(&stored.json) {
        Ok(mut obj) => {
            // No controller reads field ownership; it is often half of an object's size.
            obj.metadata_mut().managed_fields = None;
            Some(Arc::new(obj))
        }
        Err(e) => {
            // Stored objects went through the typed decoder when written; this cannot happen
            // short of a bug, and skipping the object is the safe reaction.
            tracing::warn!(error = %e, "the simulation cannot decode a stored object");
            None
        }
    }
}

/// Keys of objects grouped by a string (a node name, an owner uid).
#[derive(Debug, Default)]
pub(crate) struct Index {
    groups: HashMap<String, BTreeSet<ObjKey>>,
}

impl Index {
    /// Move `key` from group `old` to group `new`.
    pub fn update(&mut self, key: &ObjKey, old: Option<&str>, new: Option<&str>) {
        if old == new {
            return;
        }
        if let Some(old) = old
            && let Some(set) = self.groups.get_mut(old)
        {
            set.remove(key);
            if set.is_empty() {
                self.groups.remove(old);
            }
        }
        if let Some(new) = new {
            self.groups.entry(new.to_string()).or_default().insert(key.clone());
        }
    }

    /// The keys in a group.
    pub fn get(&self, group: &str) -> impl Iterator<Item = &ObjKey> {
        self.groups.get(group).into_iter().flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Change as StoreChange, Meta, Retention};
    use k8s_openapi::api::core::v1::ConfigMap;
    use serde_json::json;

    fn put(store: &Store, name: &str, v: i64) {
        let key = ("ns".to_string(), name.to_string());
        let res: StorageKey = "things".into();
        let value =
            json!({"metadata": {"name": name, "managedFields": [{"manager": "m"}]}, "data": {"v": v.to_string()}});
        let change = match store.get(&res, &key) {
            Some(cur) => StoreChange::Update { value, meta: Meta::default(), expect_rv: cur.meta.rv },
            None => StoreChange::Create(value, Meta::default()),
        };
        store.commit(&res, &key, change).unwrap();
    }

    #[test]
    fn informer_follows_the_log_and_relists_after_compaction() {
        let store = Store::new(Retention::default());
        put(&store, "a", 1);
        let mut informer: Informer<ConfigMap> = Informer::new("things".into());
        let mut out = Vec::new();
        informer.poll(&store, &mut out);
        assert_eq!(out.len(), 1);
        out.clear();
        put(&store, "a", 2);
        put(&store, "b", 1);
        informer.poll(&store, &mut out);
        assert_eq!(out.len(), 2);
        let v = |c: &Option<Arc<ConfigMap>>| c.as_ref().unwrap().data.as_ref().unwrap()["v"].clone();
        assert_eq!((v(&out[0].old), v(&out[0].new)), ("1".to_string(), "2".to_string()));
        assert!(out[0].new.as_ref().unwrap().metadata.managed_fields.is_none(), "field ownership is not cached");
        out.clear();
        // History gone: the next poll relists and reports the differences.
        let key = ("ns".to_string(), "a".to_string());
        let rv = store.get("things", &key).unwrap().meta.rv;
        store.commit(&"things".into(), &key, StoreChange::Delete { expect_rv: rv }).unwrap();
        put(&store, "c", 1);
        store.compact_now();
        informer.poll(&store, &mut out);
        let removed: Vec<_> = out.iter().filter(|c| c.new.is_none()).map(|c| c.key.1.as_str()).collect();
        assert_eq!(removed, ["a"]);
        assert!(informer.get(&("ns".into(), "c".into())).is_some());
        assert_eq!(informer.in_namespace("ns").count(), 2);
    }

    #[test]
    fn index_moves_keys_between_groups() {
        let mut index = Index::default();
        let k = ("ns".to_string(), "p".to_string());
        index.update(&k, None, Some("n1"));
        index.update(&k, Some("n1"), Some("n2"));
        assert_eq!(index.get("n1").count(), 0);
        assert_eq!(index.get("n2").collect::<Vec<_>>(), [&k]);
        index.update(&k, Some("n2"), None);
        assert_eq!(index.get("n2").count(), 0);
    }
}

//! The semantics of the Kubernetes API, independent of HTTP: what kube-apiserver's generic
//! registry (`k8s.io/apiserver/pkg/registry/generic/registry.Store`) and the per-kind strategies do.
//!
//! Every write, whether from an HTTP request or from a built-in controller (garbage collector,
//! namespace and CRD finalizers, the cluster simulation), goes through one pipeline:
//! decode → strategy (status, generation, defaults) → admission-like checks (namespace lifecycle,
//! finalizers) → validation → managedFields → no-op check → commit, so every caller gets the same
//! rules and the same watch events.

mod binding;
mod crd;
mod delete;
pub mod eviction;
mod log;
mod strategy;
mod write;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use serde_json::{Map, Value};

pub use delete::{
    CRD_CLEANUP_FINALIZER, DeleteOptions, DeleteOutcome, FOREGROUND_FINALIZER, ORPHAN_FINALIZER, PropagationPolicy,
    parse_policy,
};
pub use log::pod_log_container;
pub(crate) use write::Mutation;
pub use write::{FieldValidation, Part, PatchKind, WriteOptions, WriteOutcome, set_path};

use crate::error::ApiError;
use crate::registry::{BuiltinKind, Flavor, Registry, ResourceDef};
use crate::selector::{FieldSelector, LabelSelector};
use crate::store::{HistoryError, Meta, ObjKey, OwnerRef, Snapshot, Store, Stored};

/// Tunables of the API semantics.
#[derive(Clone, Debug)]
pub struct ApiConfig {
    /// Run the garbage collector (owner references).
    pub garbage_collector: bool,
    /// Run the namespace controller (deletes the content of terminating namespaces).
    pub namespace_controller: bool,
    /// Delete gracefully-deleted pods when their grace period ends (stands in for a kubelet
    /// when no cluster simulation runs).
    pub pod_grace_reaper: bool,
    /// Admit pods under Pod Security from their namespace's labels.
    pub pod_security: bool,
    /// Give every namespace what kube-controller-manager gives it: a `default` ServiceAccount
    /// and, when the server has a CA ([`ApiConfig::root_ca`]), the `kube-root-ca.crt` ConfigMap.
    pub namespace_defaults: bool,
    /// The CA (PEM) published in every namespace's `kube-root-ca.crt` ConfigMap under
    /// `ca.crt`: the serving CA when the server serves TLS, set at start.
    pub root_ca: Option<String>,
}

impl Default for ApiConfig {
    fn default() -> Self {
        ApiConfig {
            garbage_collector: true,
            namespace_controller: true,
            pod_grace_reaper: true,
            pod_security: false,
            namespace_defaults: true,
            root_ca: None,
        }
    }
}

/// A clock that tests can move forward.
#[derive(Debug, Default)]
pub struct Clock {
    offset_ms: std::sync::atomic::AtomicI64,
}

impl Clock {
    /// Now, plus any offset set by tests.
    pub fn now(&self) -> jiff::Timestamp {
        let offset = self.offset_ms.load(std::sync::atomic::Ordering::Relaxed);
        jiff::Timestamp::now()
            .checked_add(jiff::SignedDuration::from_millis(offset))
            .unwrap_or_else(|_| jiff::Timestamp::now())
    }

    /// Move the clock forward.
    pub fn advance(&self, by: Duration) {
        let ms = i64::try_from(by.as_millis()).unwrap_or(i64::MAX);
        self.offset_ms.fetch_add(ms, std::sync::atomic::Ordering::Relaxed);
    }

    /// RFC 3339 with seconds, as `metav1.Time` serialises.
    pub fn now_rfc3339(&self) -> String {
        format_time(self.now())
    }
}

/// `metav1.Time` format.
pub fn format_time(t: jiff::Timestamp) -> String {
    jiff::fmt::strtime::format("%Y-%m-%dT%H:%M:%SZ", t).unwrap_or_default()
}

/// `metav1.MicroTime` format.
pub fn format_micro_time(t: jiff::Timestamp) -> String {
    jiff::fmt::strtime::format("%Y-%m-%dT%H:%M:%S%.6fZ", t).unwrap_or_default()
}

/// The API server core: storage plus the rules of the Kubernetes API.
#[derive(Debug)]
pub struct Api {
    /// Object storage.
    pub store: Arc<Store>,
    /// Served resources.
    pub registry: Arc<Registry>,
    /// Time source.
    pub clock: Clock,
    /// Tunables.
    pub config: ApiConfig,
    /// Deferred work (pod grace periods) is spawned here.
    pub(crate) reaper: Option<tokio::sync::mpsc::UnboundedSender<(ResourceKey, Duration)>>,
    /// Serialises eviction decisions and PodDisruptionBudget status updates, so that two
    /// concurrent evictions never both spend the same allowed disruption.
    pub(crate) eviction_lock: parking_lot::Mutex<()>,
    namespaces: Arc<ResourceDef>,
}

/// A resource and object identity, used for deferred work.
#[derive(Clone, Debug)]
pub struct ResourceKey {
    /// The served definition.
    pub def: Arc<ResourceDef>,
    /// Namespace ("" for cluster-scoped).
    pub namespace: String,
    /// Name.
    pub name: String,
    /// The uid the work applies to.
    pub uid: String,
}

/// The result of a list: raw items as presented in the requested version.
#[derive(Debug)]
pub struct ListResult {
    /// Snapshot RV.
    pub rv: u64,
    /// Items, in key order, as JSON.
    pub items: Vec<(ObjKey, Bytes)>,
    /// Continue token for the next page.
    pub continue_token: Option<String>,
    /// Items after this page.
    pub remaining: Option<usize>,
}

/// How a list chooses its snapshot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadAt {
    /// The most recent state.
    Latest,
    /// Exactly this RV.
    Exact(u64),
}

impl Api {
    /// A new API core over `store` and `registry`.
    pub fn new(store: Arc<Store>, registry: Arc<Registry>, config: ApiConfig) -> Api {
        #[allow(clippy::expect_used)]
        let namespaces = registry.get("", "v1", "namespaces").expect("the built-in table serves namespaces");
        Api {
            store,
            registry,
            clock: Clock::default(),
            config,
            reaper: None,
            eviction_lock: parking_lot::Mutex::new(()),
            namespaces,
        }
    }

    /// Read one object as presented in `def`'s version.
    pub fn get(&self, def: &ResourceDef, namespace: &str, name: &str) -> Result<Value, ApiError> {
        let stored = self.get_stored(def, namespace, name)?;
        Ok(self.present_value(def, &stored))
    }

    /// Read one object's stored form.
    pub fn get_stored(&self, def: &ResourceDef, namespace: &str, name: &str) -> Result<Arc<Stored>, ApiError> {
        self.store
            .get(&def.storage, &obj_key(def, namespace, name))
            .filter(|s| Self::visible_in(def, s))
            .ok_or_else(|| ApiError::not_found(def, name))
    }

    /// List objects.
    #[allow(clippy::too_many_arguments)]
    pub fn list(
        &self,
        def: &ResourceDef,
        namespace: Option<&str>,
        labels: &LabelSelector,
        fields: &FieldSelector,
        at: ReadAt,
        after: Option<&ObjKey>,
        limit: Option<usize>,
    ) -> Result<ListResult, ApiError> {
        self.list_where(def, namespace, labels, fields, &|_, _| true, at, after, limit)
    }

    /// [`list`](Self::list), keeping only objects that `extra` also accepts (a shard
    /// selector, say), so that limits and continue tokens count only selected objects.
    #[allow(clippy::too_many_arguments)]
    pub fn list_where(
        &self,
        def: &ResourceDef,
        namespace: Option<&str>,
        labels: &LabelSelector,
        fields: &FieldSelector,
        extra: &(dyn Fn(&ObjKey, &Stored) -> bool + Sync),
        at: ReadAt,
        after: Option<&ObjKey>,
        limit: Option<usize>,
    ) -> Result<ListResult, ApiError> {
        let filter = |key: &ObjKey, s: &Stored| matches(def, key, s, labels, fields) && extra(key, s);
        let at_rv = match at {
            ReadAt::Latest => None,
            ReadAt::Exact(rv) => Some(rv),
        };
        let snap: Snapshot = self
            .store
            .list(&def.storage, namespace, at_rv, after, limit, &filter)
            .map_err(|e| match e {
                HistoryError::Expired { .. } => {
                    if after.is_some() {
                        ApiError::expired(
                            "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.",
                        )
                    } else {
                        ApiError::expired("The resourceVersion for the provided list is too old.")
                    }
                }
                HistoryError::TooLarge { current } => ApiError::too_large_rv(at_rv.unwrap_or(0), current),
            })?;
        let continue_token = if snap.more { snap.items.last().map(|(k, _)| encode_continue(snap.rv, k)) } else { None };
        let remaining = snap.more.then_some(snap.remaining);
        let items = snap.items.into_iter().map(|(k, s)| (k, self.present(def, &s))).collect();
        Ok(ListResult { rv: snap.rv, items, continue_token, remaining })
    }

    /// Whether an object stored under `def.storage` is visible through `def` (always, but kept
    /// as the single place to change if a resource ever shares storage selectively).
    fn visible_in(_def: &ResourceDef, _stored: &Stored) -> bool {
        true
    }

    /// The stored object as `def`'s version presents it: zero-copy when the stored form is
    /// already right, otherwise converted (apiVersion of another CRD version, events.k8s.io
    /// events, defaults added to the schema since the object was written).
    pub fn present(&self, def: &ResourceDef, stored: &Stored) -> Bytes {
        if self.presentation_is_identity(def, stored) {
            return stored.json.clone();
        }
        Bytes::from(serde_json::to_vec(&self.present_value(def, stored)).unwrap_or_default())
    }

    fn presentation_is_identity(&self, def: &ResourceDef, stored: &Stored) -> bool {
        match &def.flavor {
            Flavor::Builtin(b) => b.kind != BuiltinKind::EventV1,
            Flavor::Custom(c) => {
                stored.meta.api_version == def.api_version() && (!c.has_defaults || stored.meta.schema_epoch == c.epoch)
            }
        }
    }

    /// Like [`Api::present`], as a `Value`.
    pub fn present_value(&self, def: &ResourceDef, stored: &Stored) -> Value {
        let mut value = stored.value();
        if self.presentation_is_identity(def, stored) {
            return value;
        }
        match &def.flavor {
            Flavor::Builtin(b) if b.kind == BuiltinKind::EventV1 => crate::registry::event_core_to_v1(&value),
            Flavor::Builtin(_) => value,
            Flavor::Custom(c) => {
                if let Some(map) = value.as_object_mut() {
                    map.insert("apiVersion".into(), Value::String(def.api_version()));
                }
                if c.has_defaults
                    && let Some(schema) = &c.schema
                {
                    schema.apply_defaults(&mut value);
                }
                value
            }
        }
    }

    /// Convert a request-version object to its storage form.
    pub(crate) fn to_storage(&self, def: &ResourceDef, mut value: Value) -> Value {
        match &def.flavor {
            Flavor::Builtin(b) if b.kind == BuiltinKind::EventV1 => crate::registry::event_v1_to_core(&value),
            Flavor::Builtin(_) => value,
            Flavor::Custom(c) => {
                if let Some(map) = value.as_object_mut() {
                    let group = &def.group;
                    map.insert("apiVersion".into(), Value::String(format!("{group}/{}", c.storage_version)));
                }
                value
            }
        }
    }

    /// Compute the store summary of an object in storage form.
    pub(crate) fn meta_of(&self, def: &ResourceDef, value: &Value) -> Meta {
        let md = value.get("metadata");
        let str_of = |k: &str| md.and_then(|m| m.get(k)).and_then(Value::as_str).unwrap_or("").to_string();
        let labels = md
            .and_then(|m| m.get("labels"))
            .and_then(Value::as_object)
            .map(|m| m.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string())).collect())
            .unwrap_or_default();
        let finalizers = string_list(md.and_then(|m| m.get("finalizers")));
        let owners = md
            .and_then(|m| m.get("ownerReferences"))
            .and_then(Value::as_array)
            .map(|refs| {
                refs.iter()
                    .map(|r| OwnerRef {
                        uid: r.get("uid").and_then(Value::as_str).unwrap_or("").to_string(),
                        api_version: r.get("apiVersion").and_then(Value::as_str).unwrap_or("").to_string(),
                        kind: r.get("kind").and_then(Value::as_str).unwrap_or("").to_string(),
                        name: r.get("name").and_then(Value::as_str).unwrap_or("").to_string(),
                        controller: r.get("controller").and_then(Value::as_bool).unwrap_or(false),
                        block_owner_deletion: r.get("blockOwnerDeletion").and_then(Value::as_bool).unwrap_or(false),
                    })
                    .collect()
            })
            .unwrap_or_default();
        let mut fields = Vec::new();
        match &def.flavor {
            Flavor::Builtin(b) => {
                for f in b.selectable_fields {
                    fields.push((f.to_string(), field_value(value, f)));
                }
            }
            Flavor::Custom(c) => {
                for f in &c.selectable_fields {
                    fields.push((f.clone(), field_value(value, f)));
                }
            }
        }
        Meta {
            uid: str_of("uid"),
            rv: 0,
            labels,
            finalizers,
            owners,
            deleting: md.and_then(|m| m.get("deletionTimestamp")).is_some_and(|v| !v.is_null()),
            api_version: value.get("apiVersion").and_then(Value::as_str).unwrap_or("").to_string(),
            fields,
            schema_epoch: def.custom().map(|c| c.epoch).unwrap_or(0),
        }
    }

    /// The served definition of namespaces.
    pub fn namespaces_def(&self) -> Arc<ResourceDef> {
        self.namespaces.clone()
    }
}

/// The key of an object of `def`: cluster-scoped objects have an empty namespace.
pub fn obj_key(def: &ResourceDef, namespace: &str, name: &str) -> ObjKey {
    let ns = if def.namespaced { namespace.to_string() } else { String::new() };
    (ns, name.to_string())
}

/// Whether a stored object passes label and field selectors.
pub fn matches(
    def: &ResourceDef,
    key: &ObjKey,
    stored: &Stored,
    labels: &LabelSelector,
    fields: &FieldSelector,
) -> bool {
    labels.matches(&stored.meta.labels) && fields.matches(|f| field_of(def, key, &stored.meta, f))
}

/// The value of a selectable field of an object.
pub fn field_of(_def: &ResourceDef, key: &ObjKey, meta: &Meta, field: &str) -> Option<String> {
    match field {
        "metadata.name" => Some(key.1.clone()),
        "metadata.namespace" => Some(key.0.clone()),
        other => meta.field(other).map(str::to_string),
    }
}

/// Read a dotted field (`spec.nodeName`) as the string a field selector compares.
fn field_value(value: &Value, path: &str) -> String {
    let mut cur = value;
    for part in path.trim_start_matches('.').split('.') {
        match cur.get(part) {
            Some(v) => cur = v,
            None => return String::new(),
        }
    }
    match cur {
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn string_list(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|s| s.as_str().map(str::to_string)).collect())
        .unwrap_or_default()
}

/// Encode a continue token: opaque to clients, it carries the snapshot RV and the last key.
pub fn encode_continue(rv: u64, key: &ObjKey) -> String {
    use base64::Engine;
    let raw = serde_json::json!({"v": "meta.k8s.io/v1", "rv": rv, "start": [key.0, key.1]});
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw.to_string())
}

/// Decode a continue token.
pub fn decode_continue(token: &str) -> Result<(u64, ObjKey), ApiError> {
    use base64::Engine;
    let bad = || ApiError::bad_request(format!("continue key is not valid: {token}"));
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(token).map_err(|_| bad())?;
    let v: Value = serde_json::from_slice(&raw).map_err(|_| bad())?;
    let rv = v.get("rv").and_then(Value::as_u64).ok_or_else(bad)?;
    let start = v.get("start").and_then(Value::as_array).ok_or_else(bad)?;
    match start.as_slice() {
        [Value::String(ns), Value::String(name)] => Ok((rv, (ns.clone(), name.clone()))),
        _ => Err(bad()),
    }
}

/// Get `metadata` as a mutable map, creating it if absent.
pub(crate) fn metadata_mut(value: &mut Value) -> Option<&mut Map<String, Value>> {
    let obj = value.as_object_mut()?;
    let md = obj.entry("metadata").or_insert_with(|| Value::Object(Map::new()));
    if !md.is_object() {
        *md = Value::Object(Map::new());
    }
    md.as_object_mut()
}

/// A string field of `metadata`.
pub(crate) fn meta_str<'a>(value: &'a Value, key: &str) -> Option<&'a str> {
    value.get("metadata")?.get(key)?.as_str()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_tokens_round_trip_and_reject_garbage() {
        let key = ("ns".to_string(), "name".to_string());
        let token = encode_continue(42, &key);
        assert_eq!(decode_continue(&token).unwrap(), (42, key));
        assert_eq!(decode_continue("!!").unwrap_err().code, 400);
    }

    #[test]
    fn field_values_stringify_scalars() {
        let v = serde_json::json!({"spec": {"nodeName": "n1", "unschedulable": true}});
        assert_eq!(field_value(&v, "spec.nodeName"), "n1");
        assert_eq!(field_value(&v, "spec.unschedulable"), "true");
        assert_eq!(field_value(&v, "status.phase"), "");
    }
}

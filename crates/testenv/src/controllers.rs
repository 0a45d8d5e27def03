//! The parts of kube-controller-manager and kube-apiserver's own controllers that API clients
//! observe: the garbage collector (owner references, foreground and orphan deletion), the
//! namespace controller (terminating namespaces), each namespace's defaults (the `default`
//! ServiceAccount and the `kube-root-ca.crt` ConfigMap), the CRD finalizer (deleting a CRD deletes its
//! custom resources), and, without a cluster simulation, the end of pod grace periods.
//!
//! envtest runs none of these (controller-runtime #626, #1459), which surprises its users; here
//! they run by default and can be switched off per TestEnv (checklist F9, F11, J9).
//!
//! The controllers are driven by [`Hint`]s from the store, plus a periodic sweep so that nothing
//! is missed, and write through the same [`Api`] as HTTP clients, so finalizers are honoured and
//! watchers see every change.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::api::{Api, DeleteOptions, PropagationPolicy, ResourceKey, WriteOptions};
use crate::api::{FOREGROUND_FINALIZER, ORPHAN_FINALIZER};
use crate::registry::{BuiltinKind, ResourceDef};
use crate::selector::{FieldSelector, LabelSelector};
use crate::store::{Hint, ObjKey, Stored};

const MANAGER: &str = "kube-controller-manager";
const NAMESPACE_FINALIZER: &str = "kubernetes";

/// Run the controllers until `stop` fires.
pub(crate) async fn run(api: Arc<Api>, mut hints: mpsc::UnboundedReceiver<Hint>, stop: CancellationToken) {
    let mut sweep = tokio::time::interval(Duration::from_secs(2));
    sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            hint = hints.recv() => {
                let Some(hint) = hint else { return };
                handle_hint(&api, hint);
                // Drain what is already queued before yielding.
                while let Ok(hint) = hints.try_recv() {
                    handle_hint(&api, hint);
                }
            }
            _ = sweep.tick() => sweep_all(&api),
        }
    }
}

/// Delete gracefully deleted pods when their grace period ends.
pub(crate) async fn run_reaper(
    api: Arc<Api>,
    mut rx: mpsc::UnboundedReceiver<(ResourceKey, Duration)>,
    stop: CancellationToken,
) {
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            item = rx.recv() => {
                let Some((key, after)) = item else { return };
                let api = api.clone();
                let stop = stop.clone();
                tokio::spawn(async move {
                    tokio::select! {
                        _ = stop.cancelled() => {}
                        _ = tokio::time::sleep(after) => {
                            let opts = DeleteOptions { grace_period_seconds: Some(0), precondition_uid: Some(key.uid.clone()), ..DeleteOptions::default() };
                            let _ = api.delete(&key.def, &key.namespace, &key.name, &opts);
                        }
                    }
                });
            }
        }
    }
}

fn handle_hint(api: &Api, hint: Hint) {
    match hint {
        Hint::Removed { resource, key, uid, owners } => {
            if api.config.garbage_collector {
                for (res, dep_key, dep) in api.store.dependents_of(&uid) {
                    process_dependent(api, &res, &dep_key, &dep);
                }
                for owner in owners {
                    if let Some((res, key, obj)) = api.store.get_by_uid(&owner) {
                        process_deleting_owner(api, &res, &key, &obj);
                    }
                }
            }
            if api.config.namespace_controller && !key.0.is_empty() {
                process_namespace(api, &key.0);
            }
            if !key.0.is_empty() {
                ensure_namespace_defaults(api, &key.0);
            }
            if let Some(def) = api.registry.for_storage(&resource)
                && let Some(c) = def.custom()
            {
                process_crd(api, &c.crd_name);
            }
        }
        Hint::Added { resource, key } => {
            if api.registry.for_storage(&resource).is_some_and(|d| d.builtin_kind() == BuiltinKind::Namespace) {
                ensure_namespace_defaults(api, &key.1);
            }
        }
        Hint::Owned { resource, key } => {
            if api.config.garbage_collector
                && let Some(obj) = api.store.get(&resource, &key)
            {
                process_dependent(api, &resource, &key, &obj);
            }
        }
        Hint::Deleting { resource, key, uid: _ } => {
            let Some(obj) = api.store.get(&resource, &key) else { return };
            if api.config.garbage_collector {
                process_deleting_owner(api, &resource, &key, &obj);
            }
            match api.registry.for_storage(&resource).map(|d| d.builtin_kind()) {
                Some(BuiltinKind::Namespace) if api.config.namespace_controller => process_namespace(api, &key.1),
                Some(BuiltinKind::CustomResourceDefinition) => process_crd(api, &key.1),
                _ => {}
            }
        }
    }
}

/// Re-check everything that is being deleted, and every namespace's defaults: a safety net for
/// anything a hint missed.
fn sweep_all(api: &Api) {
    if api.config.namespace_defaults {
        let ns_def = api.namespaces_def();
        if let Ok(list) = api.store.list(&ns_def.storage, None, None, None, None, &|_, s: &Stored| !s.meta.deleting) {
            for (key, _) in list.items {
                ensure_namespace_defaults(api, &key.1);
            }
        }
    }
    for resource in api.store.resources_with_objects() {
        let Some(def) = api.registry.for_storage(&resource) else { continue };
        let Ok(list) = api.store.list(&resource, None, None, None, None, &|_, s: &Stored| s.meta.deleting) else {
            continue;
        };
        for (key, obj) in list.items {
            if api.config.garbage_collector {
                process_deleting_owner(api, &resource, &key, &obj);
            }
            match def.builtin_kind() {
                BuiltinKind::Namespace if api.config.namespace_controller => process_namespace(api, &key.1),
                BuiltinKind::CustomResourceDefinition => process_crd(api, &key.1),
                _ => {}
            }
        }
    }
}

fn internal_opts() -> WriteOptions {
    WriteOptions { manager: MANAGER.into(), ..WriteOptions::default() }
}

/// A dependent lost an owner: delete it when every owner is gone, or drop the dangling
/// references when some remain (`attemptToDeleteItem`).
fn process_dependent(api: &Api, resource: &str, key: &ObjKey, dep: &Stored) {
    if dep.meta.owners.is_empty() {
        return;
    }
    let Some(def) = api.registry.for_storage(resource) else { return };
    let mut dangling = Vec::new();
    let mut waiting_foreground = false;
    for owner in &dep.meta.owners {
        match api.store.get_by_uid(&owner.uid) {
            // An owner must be cluster-scoped or in the dependent's namespace; anything else
            // is treated as absent, as the garbage collector does.
            Some((_, owner_key, owner_obj)) if owner_key.0.is_empty() || owner_key.0 == key.0 => {
                if owner_obj.meta.deleting && owner_obj.meta.finalizers.iter().any(|f| f == FOREGROUND_FINALIZER) {
                    waiting_foreground = true;
                }
            }
            _ => dangling.push(owner.uid.clone()),
        }
    }
    if dangling.len() == dep.meta.owners.len() {
        let opts = DeleteOptions { precondition_uid: Some(dep.meta.uid.clone()), ..DeleteOptions::default() };
        let _ = api.delete(&def, &key.0, &key.1, &opts);
    } else if !dangling.is_empty() {
        remove_owner_refs(api, &def, key, &dangling);
    } else if waiting_foreground && !dep.meta.deleting {
        let opts = DeleteOptions {
            precondition_uid: Some(dep.meta.uid.clone()),
            propagation: Some(PropagationPolicy::Foreground),
            ..DeleteOptions::default()
        };
        let _ = api.delete(&def, &key.0, &key.1, &opts);
    }
}

/// An owner is being deleted with `foregroundDeletion` or `orphan`.
fn process_deleting_owner(api: &Api, resource: &str, key: &ObjKey, owner: &Stored) {
    if !owner.meta.deleting {
        return;
    }
    let Some(def) = api.registry.for_storage(resource) else { return };
    let has = |f: &str| owner.meta.finalizers.iter().any(|x| x == f);
    if has(ORPHAN_FINALIZER) {
        for (res, dep_key, _) in api.store.dependents_of(&owner.meta.uid) {
            if let Some(dep_def) = api.registry.for_storage(&res) {
                remove_owner_refs(api, &dep_def, &dep_key, std::slice::from_ref(&owner.meta.uid));
            }
        }
        if api.store.dependents_of(&owner.meta.uid).is_empty() {
            remove_finalizer(api, &def, key, &owner.meta.uid, ORPHAN_FINALIZER);
        }
        return;
    }
    if has(FOREGROUND_FINALIZER) {
        let deps = api.store.dependents_of(&owner.meta.uid);
        let mut blocking = 0;
        for (res, dep_key, dep) in &deps {
            let blocks = dep.meta.owners.iter().any(|o| o.uid == owner.meta.uid && o.block_owner_deletion);
            if blocks {
                blocking += 1;
            }
            if !dep.meta.deleting
                && let Some(dep_def) = api.registry.for_storage(res)
            {
                let opts = DeleteOptions {
                    precondition_uid: Some(dep.meta.uid.clone()),
                    propagation: Some(PropagationPolicy::Foreground),
                    ..DeleteOptions::default()
                };
                let _ = api.delete(&dep_def, &dep_key.0, &dep_key.1, &opts);
            }
        }
        if blocking == 0 {
            remove_finalizer(api, &def, key, &owner.meta.uid, FOREGROUND_FINALIZER);
        }
    }
}

fn remove_owner_refs(api: &Api, def: &ResourceDef, key: &ObjKey, uids: &[String]) {
    let _ = api.guaranteed_update(def, &key.0, &key.1, crate::api::Part::Main, &internal_opts(), false, |current| {
        let Some(current) = current else {
            return Err(crate::error::ApiError::not_found(def, &key.1));
        };
        let mut v = current.clone();
        if let Some(md) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            let refs: Vec<Value> = md
                .get("ownerReferences")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter(|r| !uids.iter().any(|u| Some(u.as_str()) == r.get("uid").and_then(Value::as_str)))
                        .cloned()
                        .collect()
                })
                .unwrap_or_default();
            if refs.is_empty() {
                md.remove("ownerReferences");
            } else {
                md.insert("ownerReferences".into(), Value::Array(refs));
            }
        }
        Ok(crate::api::Mutation { value: v, applied: false, precondition: None })
    });
}

fn remove_finalizer(api: &Api, def: &ResourceDef, key: &ObjKey, uid: &str, finalizer: &str) {
    let _ = api.guaranteed_update(def, &key.0, &key.1, crate::api::Part::Main, &internal_opts(), false, |current| {
        let Some(current) = current else {
            return Err(crate::error::ApiError::not_found(def, &key.1));
        };
        if current.pointer("/metadata/uid").and_then(Value::as_str) != Some(uid) {
            return Err(crate::error::ApiError::not_found(def, &key.1));
        }
        let mut v = current.clone();
        if let Some(md) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            let fins: Vec<Value> = md
                .get("finalizers")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter(|f| f.as_str() != Some(finalizer)).cloned().collect())
                .unwrap_or_default();
            if fins.is_empty() {
                md.remove("finalizers");
            } else {
                md.insert("finalizers".into(), Value::Array(fins));
            }
        }
        Ok(crate::api::Mutation { value: v, applied: false, precondition: None })
    });
}

/// The name of every namespace's ServiceAccount.
pub(crate) const DEFAULT_SERVICE_ACCOUNT: &str = "default";
/// The name of every namespace's ConfigMap with the cluster's CA.
pub(crate) const ROOT_CA_CONFIG_MAP: &str = "kube-root-ca.crt";

/// Give namespace `name` what kube-controller-manager gives every namespace that is not
/// terminating: the `default` ServiceAccount (`serviceaccounts-controller`) and, when the server
/// has a CA, the `kube-root-ca.crt` ConfigMap with it under `ca.crt` (`root-ca-cert-publisher`,
/// which also puts back a changed CA). Created when missing, so a deleted one comes back.
pub(crate) fn ensure_namespace_defaults(api: &Api, name: &str) {
    if !api.config.namespace_defaults {
        return;
    }
    let ns_def = api.namespaces_def();
    match api.get_stored(&ns_def, "", name) {
        Ok(ns) if !ns.meta.deleting => {}
        _ => return,
    }
    if let Some(sa_def) = api.registry.get("", "v1", "serviceaccounts")
        && api.get_stored(&sa_def, name, DEFAULT_SERVICE_ACCOUNT).is_err()
    {
        let body = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": DEFAULT_SERVICE_ACCOUNT}});
        if let Err(e) = api.create(&sa_def, name, body, &internal_opts()) {
            tracing::debug!(namespace = name, error = %e, "cannot create the default ServiceAccount");
        }
    }
    let (Some(ca), Some(cm_def)) = (&api.config.root_ca, api.registry.get("", "v1", "configmaps")) else { return };
    let data = json!({"ca.crt": ca});
    match api.get_stored(&cm_def, name, ROOT_CA_CONFIG_MAP) {
        Ok(cm) if cm.value().get("data") == Some(&data) => {}
        Ok(cm) => {
            let mut body = cm.value();
            body["data"] = data;
            if let Err(e) =
                api.update(&cm_def, name, ROOT_CA_CONFIG_MAP, crate::api::Part::Main, body, &internal_opts())
            {
                tracing::debug!(namespace = name, error = %e, "cannot restore the kube-root-ca.crt ConfigMap");
            }
        }
        Err(_) => {
            let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": ROOT_CA_CONFIG_MAP}, "data": data});
            if let Err(e) = api.create(&cm_def, name, body, &internal_opts()) {
                tracing::debug!(namespace = name, error = %e, "cannot create the kube-root-ca.crt ConfigMap");
            }
        }
    }
}

/// A terminating namespace: delete its content, report what remains in its conditions, and
/// finalize it once empty (`pkg/controller/namespace/deletion`).
fn process_namespace(api: &Api, name: &str) {
    let ns_def = api.namespaces_def();
    let Some(ns) = api.store.get(&ns_def.storage, &(String::new(), name.to_string())) else { return };
    if !ns.meta.deleting {
        return;
    }
    let mut remaining: BTreeMap<String, usize> = BTreeMap::new();
    let mut finalizers_remaining: BTreeMap<String, usize> = BTreeMap::new();
    for resource in api.store.resources_with_objects() {
        let Some(def) = api.registry.for_storage(&resource) else { continue };
        if !def.namespaced {
            continue;
        }
        let Ok(list) = api.list(
            &def,
            Some(name),
            &LabelSelector::everything(),
            &FieldSelector::everything(),
            crate::api::ReadAt::Latest,
            None,
            None,
        ) else {
            continue;
        };
        for ((ns, obj_name), _) in list.items {
            let _ = api.delete(&def, &ns, &obj_name, &DeleteOptions::default());
            if let Some(left) = api.store.get(&def.storage, &(ns.clone(), obj_name.clone())) {
                *remaining.entry(def.qualified()).or_default() += 1;
                for f in &left.meta.finalizers {
                    *finalizers_remaining.entry(f.clone()).or_default() += 1;
                }
            }
        }
    }
    let now = api.clock.now_rfc3339();
    let content = if remaining.is_empty() {
        ("False", "ContentDeleted", "All content successfully deleted, may be waiting on finalization".to_string())
    } else {
        let list: Vec<String> = remaining.iter().map(|(r, n)| format!("{r} has {n} resource instances")).collect();
        ("True", "SomeResourcesRemain", format!("Some resources are remaining: {}", list.join(", ")))
    };
    let fins = if finalizers_remaining.is_empty() {
        ("False", "ContentHasNoFinalizers", "All content-preserving finalizers finished".to_string())
    } else {
        let list: Vec<String> =
            finalizers_remaining.iter().map(|(f, n)| format!("{f} in {n} resource instances")).collect();
        (
            "True",
            "SomeFinalizersRemain",
            format!("Some content in the namespace has finalizers remaining: {}", list.join(", ")),
        )
    };
    let conditions = [
        (
            "NamespaceDeletionDiscoveryFailure",
            ("False", "ResourcesDiscovered", "All resources successfully discovered".to_string()),
        ),
        (
            "NamespaceDeletionGroupVersionParsingFailure",
            ("False", "ParsedGroupVersions", "All legacy kube types successfully parsed".to_string()),
        ),
        (
            "NamespaceDeletionContentFailure",
            ("False", "ContentDeleted", "All content successfully deleted, may be waiting on finalization".to_string()),
        ),
        ("NamespaceContentRemaining", content),
        ("NamespaceFinalizersRemaining", fins),
    ];
    let empty = remaining.is_empty();
    let _ = api.guaranteed_update(&ns_def, "", name, crate::api::Part::Status, &internal_opts(), false, |current| {
        let Some(current) = current else { return Err(crate::error::ApiError::not_found(&ns_def, name)) };
        let mut v = current.clone();
        let old: Vec<Value> = v.pointer("/status/conditions").and_then(Value::as_array).cloned().unwrap_or_default();
        let list: Vec<Value> = conditions
            .iter()
            .map(|(ty, (status, reason, message))| {
                let prev = old.iter().find(|c| c.get("type").and_then(Value::as_str) == Some(ty));
                let ltt = match prev {
                    Some(p) if p.get("status").and_then(Value::as_str) == Some(status) => {
                        p.get("lastTransitionTime").cloned().unwrap_or(json!(now))
                    }
                    _ => json!(now),
                };
                json!({"type": ty, "status": status, "lastTransitionTime": ltt, "reason": reason, "message": message})
            })
            .collect();
        crate::api::set_path(&mut v, &["status", "conditions"], Some(Value::Array(list)));
        Ok(crate::api::Mutation { value: v, applied: false, precondition: None })
    });
    if empty {
        let _ =
            api.guaranteed_update(&ns_def, "", name, crate::api::Part::Finalize, &internal_opts(), false, |current| {
                let Some(current) = current else { return Err(crate::error::ApiError::not_found(&ns_def, name)) };
                let mut v = current.clone();
                let fins: Vec<Value> = v
                    .pointer("/spec/finalizers")
                    .and_then(Value::as_array)
                    .map(|a| a.iter().filter(|f| f.as_str() != Some(NAMESPACE_FINALIZER)).cloned().collect())
                    .unwrap_or_default();
                crate::api::set_path(
                    &mut v,
                    &["spec", "finalizers"],
                    if fins.is_empty() { None } else { Some(Value::Array(fins)) },
                );
                Ok(crate::api::Mutation { value: v, applied: false, precondition: None })
            });
    }
}

/// A CRD being deleted: delete its custom resources, then release its finalizer.
fn process_crd(api: &Api, crd_name: &str) {
    let Some(crd_def) = api.registry.get("apiextensions.k8s.io", "v1", "customresourcedefinitions") else { return };
    let Some(crd) = api.store.get(&crd_def.storage, &(String::new(), crd_name.to_string())) else { return };
    if !crd.meta.deleting || !crd.meta.finalizers.iter().any(|f| f == crate::api::CRD_CLEANUP_FINALIZER) {
        return;
    }
    let value = crd.value();
    let group = value.pointer("/spec/group").and_then(Value::as_str).unwrap_or("");
    let plural = value.pointer("/spec/names/plural").and_then(Value::as_str).unwrap_or("");
    let storage = format!("{plural}.{group}");
    if let Some(def) = api.registry.for_storage(&storage)
        && let Ok(list) = api.list(
            &def,
            None,
            &LabelSelector::everything(),
            &FieldSelector::everything(),
            crate::api::ReadAt::Latest,
            None,
            None,
        )
    {
        for ((ns, name), _) in list.items {
            let _ = api.delete(&def, &ns, &name, &DeleteOptions::default());
        }
    }
    if api.store.count(&storage, None) == 0 {
        remove_finalizer(
            api,
            &crd_def,
            &(String::new(), crd_name.to_string()),
            &crd.meta.uid,
            crate::api::CRD_CLEANUP_FINALIZER,
        );
    }
}

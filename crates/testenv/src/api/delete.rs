//! Deletion: finalizers, propagation policies, graceful deletion, preconditions (checklist F).

use std::time::Duration;

use serde_json::{Value, json};

use super::{Api, ResourceKey, format_time, metadata_mut, obj_key};
use crate::error::ApiError;
use crate::registry::{BuiltinKind, ResourceDef};
use crate::schema::FieldError;
use crate::store::{Change, StoreError};

/// `propagationPolicy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PropagationPolicy {
    /// Delete the owner now; the garbage collector deletes dependents afterwards.
    Background,
    /// Delete dependents first (`foregroundDeletion` finalizer).
    Foreground,
    /// Keep dependents, removing their owner references (`orphan` finalizer).
    Orphan,
}

/// The finalizer that makes the garbage collector delete dependents first.
pub const FOREGROUND_FINALIZER: &str = "foregroundDeletion";
/// The finalizer that makes the garbage collector orphan dependents.
pub const ORPHAN_FINALIZER: &str = "orphan";
/// The finalizer that deletes the custom resources of a CRD being deleted.
pub const CRD_CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

/// DeleteOptions (from the body or the query).
#[derive(Clone, Debug, Default)]
pub struct DeleteOptions {
    /// `propagationPolicy`.
    pub propagation: Option<PropagationPolicy>,
    /// Deprecated `orphanDependents`.
    pub orphan_dependents: Option<bool>,
    /// `gracePeriodSeconds`.
    pub grace_period_seconds: Option<i64>,
    /// `preconditions.uid`.
    pub precondition_uid: Option<String>,
    /// `preconditions.resourceVersion`.
    pub precondition_rv: Option<String>,
    /// `dryRun=All`.
    pub dry_run: bool,
}

impl DeleteOptions {
    /// Read DeleteOptions from a JSON body (kind/apiVersion optional, as kube-rs omits them).
    pub fn from_json(v: &Value) -> Result<DeleteOptions, ApiError> {
        let mut o = DeleteOptions::default();
        if let Some(p) = v.get("propagationPolicy").and_then(Value::as_str) {
            o.propagation = Some(parse_policy(p)?);
        }
        o.orphan_dependents = v.get("orphanDependents").and_then(Value::as_bool);
        o.grace_period_seconds = v.get("gracePeriodSeconds").and_then(Value::as_i64);
        if let Some(pre) = v.get("preconditions") {
            o.precondition_uid = pre.get("uid").and_then(Value::as_str).map(str::to_string);
            o.precondition_rv = pre.get("resourceVersion").and_then(Value::as_str).map(str::to_string);
        }
        if let Some(dry) = v.get("dryRun").and_then(Value::as_array) {
            for d in dry {
                match d.as_str() {
                    Some("All") => o.dry_run = true,
                    other => {
                        return Err(ApiError::invalid_kind(
                            "meta.k8s.io",
                            "DeleteOptions",
                            "",
                            &[FieldError::not_supported("dryRun", json!(other), &["All"])],
                        ));
                    }
                }
            }
        }
        Ok(o)
    }

    fn policy(&self, def: &ResourceDef) -> Result<PropagationPolicy, ApiError> {
        match (self.propagation, self.orphan_dependents) {
            (Some(_), Some(_)) => Err(ApiError::invalid_kind(
                "meta.k8s.io",
                "DeleteOptions",
                "",
                &[FieldError::invalid(
                    "propagationPolicy",
                    json!(format!("{:?}", self.propagation)),
                    "orphanDependents and deletionPropagation cannot be both set",
                )],
            )),
            (Some(p), None) => Ok(p),
            (None, Some(true)) => Ok(PropagationPolicy::Orphan),
            (None, Some(false)) => Ok(PropagationPolicy::Background),
            // Every kind served here defaults to background (apps/v1, custom resources, core).
            (None, None) => {
                let _ = def;
                Ok(PropagationPolicy::Background)
            }
        }
    }
}

/// Parse a `propagationPolicy` value.
pub fn parse_policy(p: &str) -> Result<PropagationPolicy, ApiError> {
    match p {
        "Background" => Ok(PropagationPolicy::Background),
        "Foreground" => Ok(PropagationPolicy::Foreground),
        "Orphan" => Ok(PropagationPolicy::Orphan),
        other => Err(ApiError::invalid_kind(
            "meta.k8s.io",
            "DeleteOptions",
            "",
            &[FieldError::not_supported("propagationPolicy", json!(other), &["Foreground", "Background", "Orphan"])],
        )),
    }
}

/// What a DELETE did.
#[derive(Debug)]
pub enum DeleteOutcome {
    /// The object is gone; its last state.
    Deleted(Value),
    /// The object is marked for deletion and waits for finalizers or a grace period.
    Pending(Value),
}

const MAX_ATTEMPTS: usize = 32;

impl Api {
    /// DELETE one object.
    pub fn delete(
        &self,
        def: &ResourceDef,
        namespace: &str,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<DeleteOutcome, ApiError> {
        let key = obj_key(def, namespace, name);
        let policy = opts.policy(def)?;
        for _ in 0..MAX_ATTEMPTS {
            let Some(current) = self.store.get(&def.storage, &key) else {
                return Err(ApiError::not_found(def, name));
            };
            if let Some(uid) = &opts.precondition_uid
                && *uid != current.meta.uid
            {
                return Err(ApiError::delete_precondition(
                    def,
                    name,
                    &format!(
                        "the UID in the precondition ({uid}) does not match the UID in record ({}). The object might have been deleted and then recreated",
                        current.meta.uid
                    ),
                ));
            }
            if let Some(rv) = &opts.precondition_rv
                && *rv != current.meta.rv.to_string()
            {
                return Err(ApiError::delete_precondition(
                    def,
                    name,
                    &format!(
                        "the ResourceVersion in the precondition ({rv}) does not match the ResourceVersion in record ({}). The object might have been modified",
                        current.meta.rv
                    ),
                ));
            }
            let mut value = current.value();
            let now = self.clock.now();
            if current.meta.deleting {
                // Already being deleted (F5): only a shorter grace period changes anything.
                let Some(grace) = opts.grace_period_seconds else {
                    return Ok(DeleteOutcome::Pending(self.present_value(def, &current)));
                };
                let current_grace =
                    value.pointer("/metadata/deletionGracePeriodSeconds").and_then(Value::as_i64).unwrap_or(0);
                if grace >= current_grace {
                    return Ok(DeleteOutcome::Pending(self.present_value(def, &current)));
                }
                if grace == 0
                    && current.meta.finalizers.is_empty()
                    && !self.deletion_waits_for_spec_finalizers(def, &value)
                {
                    if opts.dry_run {
                        return Ok(DeleteOutcome::Deleted(self.present_value(def, &current)));
                    }
                    match self.store.commit(&def.storage, &key, Change::Delete { expect_rv: current.meta.rv }) {
                        Ok(done) => {
                            self.after_removal(def, &done.object);
                            return Ok(DeleteOutcome::Deleted(self.present_value(def, &done.object)));
                        }
                        Err(_) => continue,
                    }
                }
                if let Some(md) = metadata_mut(&mut value) {
                    md.insert("deletionGracePeriodSeconds".into(), json!(grace));
                    md.insert("deletionTimestamp".into(), json!(format_time(add_secs(now, grace))));
                }
                if opts.dry_run {
                    return Ok(DeleteOutcome::Pending(self.present_value_of(def, value)));
                }
                let meta = self.meta_of(def, &value);
                match self.store.commit(&def.storage, &key, Change::Update { value, meta, expect_rv: current.meta.rv })
                {
                    Ok(done) => return Ok(DeleteOutcome::Pending(self.present_value(def, &done.object))),
                    Err(_) => continue,
                }
            }

            let mut finalizers = current.meta.finalizers.clone();
            let mut add = |f: &str| {
                if !finalizers.iter().any(|x| x == f) {
                    finalizers.push(f.to_string());
                }
            };
            match policy {
                PropagationPolicy::Foreground => add(FOREGROUND_FINALIZER),
                PropagationPolicy::Orphan => add(ORPHAN_FINALIZER),
                PropagationPolicy::Background => {}
            }
            let kind = def.builtin_kind();
            if kind == BuiltinKind::CustomResourceDefinition {
                add(CRD_CLEANUP_FINALIZER);
            }
            let grace = self.graceful_period(def, &value, opts);
            let namespace_pending = self.deletion_waits_for_spec_finalizers(def, &value);
            if finalizers.is_empty() && grace == 0 && !namespace_pending {
                if opts.dry_run {
                    return Ok(DeleteOutcome::Deleted(self.present_value(def, &current)));
                }
                match self.store.commit(&def.storage, &key, Change::Delete { expect_rv: current.meta.rv }) {
                    Ok(done) => {
                        self.after_removal(def, &done.object);
                        return Ok(DeleteOutcome::Deleted(self.present_value(def, &done.object)));
                    }
                    Err(StoreError::NotFound) => return Err(ApiError::not_found(def, name)),
                    Err(_) => continue,
                }
            }
            // Mark for deletion (markAsDeleting): one MODIFIED event.
            if let Some(md) = metadata_mut(&mut value) {
                md.insert("deletionTimestamp".into(), json!(format_time(add_secs(now, grace))));
                md.insert("deletionGracePeriodSeconds".into(), json!(grace));
                if finalizers.is_empty() {
                    md.remove("finalizers");
                } else {
                    md.insert("finalizers".into(), json!(finalizers));
                }
                if def.has_generation()
                    && let Some(g) = md.get("generation").and_then(Value::as_i64)
                    && g > 0
                {
                    md.insert("generation".into(), json!(g + 1));
                }
            }
            match kind {
                BuiltinKind::Namespace => {
                    super::write::set_path(&mut value, &["status", "phase"], Some(json!("Terminating")));
                }
                BuiltinKind::CustomResourceDefinition => {
                    crd_terminating_condition(&mut value, &self.clock.now_rfc3339());
                }
                _ => {}
            }
            if opts.dry_run {
                return Ok(DeleteOutcome::Pending(self.present_value_of(def, value)));
            }
            let meta = self.meta_of(def, &value);
            match self.store.commit(&def.storage, &key, Change::Update { value, meta, expect_rv: current.meta.rv }) {
                Ok(done) => {
                    self.after_write(def, &done.object);
                    if grace > 0
                        && let Some(reaper) = &self.reaper
                    {
                        let _ = reaper.send((
                            ResourceKey {
                                def: std::sync::Arc::new(def.clone()),
                                namespace: namespace.to_string(),
                                name: name.to_string(),
                                uid: done.object.meta.uid.clone(),
                            },
                            Duration::from_secs(u64::try_from(grace).unwrap_or(0)),
                        ));
                    }
                    return Ok(DeleteOutcome::Pending(self.present_value(def, &done.object)));
                }
                Err(StoreError::NotFound) => return Err(ApiError::not_found(def, name)),
                Err(_) => continue,
            }
        }
        Err(ApiError::conflict(def, name))
    }

    /// The grace period of a deletion: only pods bound to a node and not yet terminal wait
    /// (F10); everything else is deleted at once.
    fn graceful_period(&self, def: &ResourceDef, value: &Value, opts: &DeleteOptions) -> i64 {
        if def.builtin_kind() != BuiltinKind::Pod {
            return 0;
        }
        let bound = value.pointer("/spec/nodeName").and_then(Value::as_str).is_some_and(|n| !n.is_empty());
        let phase = value.pointer("/status/phase").and_then(Value::as_str).unwrap_or("");
        if !bound || phase == "Succeeded" || phase == "Failed" {
            return 0;
        }
        opts.grace_period_seconds
            .or_else(|| value.pointer("/spec/terminationGracePeriodSeconds").and_then(Value::as_i64))
            .unwrap_or(30)
            .max(0)
    }

    fn present_value_of(&self, def: &ResourceDef, storage_form: Value) -> Value {
        let meta = self.meta_of(def, &storage_form);
        let json = bytes::Bytes::from(serde_json::to_vec(&storage_form).unwrap_or_default());
        self.present_value(def, &crate::store::Stored { json, meta })
    }

    /// DELETE a collection: every match is deleted by the single-object rules.
    pub fn delete_collection(
        &self,
        def: &ResourceDef,
        namespace: Option<&str>,
        labels: &crate::selector::LabelSelector,
        fields: &crate::selector::FieldSelector,
        opts: &DeleteOptions,
    ) -> Result<Vec<Value>, ApiError> {
        let snapshot = self.list(def, namespace, labels, fields, super::ReadAt::Latest, None, None)?;
        let mut out = Vec::new();
        for ((ns, name), _) in snapshot.items {
            match self.delete(def, &ns, &name, opts) {
                Ok(DeleteOutcome::Deleted(v) | DeleteOutcome::Pending(v)) => out.push(v),
                Err(e) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }
}

fn add_secs(t: jiff::Timestamp, secs: i64) -> jiff::Timestamp {
    t.checked_add(jiff::SignedDuration::from_secs(secs)).unwrap_or(t)
}

fn crd_terminating_condition(value: &mut Value, now: &str) {
    let cond = json!({
        "type": "Terminating",
        "status": "True",
        "lastTransitionTime": now,
        "reason": "InstanceDeletionPending",
        "message": "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon",
    });
    let Some(obj) = value.as_object_mut() else { return };
    let status = obj.entry("status").or_insert_with(|| json!({}));
    let Some(status) = status.as_object_mut() else { return };
    let conditions = status.entry("conditions").or_insert_with(|| json!([]));
    if let Some(list) = conditions.as_array_mut() {
        list.retain(|c| c.get("type").and_then(Value::as_str) != Some("Terminating"));
        list.push(cond);
    }
}

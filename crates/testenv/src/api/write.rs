//! Create, update, patch and server-side apply.

use serde_json::{Map, Value, json};

use super::{Api, meta_str, metadata_mut, obj_key};
use crate::error::ApiError;
use crate::patch::{PatchError, apply_json_patch, apply_merge_patch, apply_strategic_merge_patch};
use crate::registry::{BuiltinKind, Flavor, ResourceDef};
use crate::schema::FieldError;
use crate::ssa::{self, ManagedFieldsEntry, Manager};
use crate::store::{Change, StoreError, Stored};
use crate::validation::{self, NameRule};

/// `fieldValidation` (C10).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum FieldValidation {
    /// Unknown fields are an error (400).
    Strict,
    /// Unknown fields are dropped with a Warning header. The server default.
    #[default]
    Warn,
    /// Unknown fields are dropped silently.
    Ignore,
}

impl FieldValidation {
    /// Parse the query parameter.
    pub fn parse(s: &str) -> Result<FieldValidation, ApiError> {
        match s {
            "Strict" => Ok(FieldValidation::Strict),
            "Warn" | "" => Ok(FieldValidation::Warn),
            "Ignore" => Ok(FieldValidation::Ignore),
            other => Err(ApiError::bad_request(format!(
                "fieldValidation must be one of \"Ignore\", \"Warn\", or \"Strict\", got {other:?}"
            ))),
        }
    }
}

/// Options common to writes.
#[derive(Clone, Debug, Default)]
pub struct WriteOptions {
    /// `dryRun=All`: validate and answer, persist nothing.
    pub dry_run: bool,
    /// `fieldManager`, or the User-Agent's product name for non-apply writes.
    pub manager: String,
    /// `fieldValidation`.
    pub field_validation: FieldValidation,
    /// `force` (apply only).
    pub force: bool,
}

/// The result of a write.
#[derive(Debug)]
pub struct WriteOutcome {
    /// The object as stored, in the request's version.
    pub object: Value,
    /// Whether the write created the object (201).
    pub created: bool,
    /// Warnings for the `Warning` header.
    pub warnings: Vec<String>,
}

/// The PATCH content types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchKind {
    /// `application/json-patch+json`
    Json,
    /// `application/merge-patch+json`
    Merge,
    /// `application/strategic-merge-patch+json`
    Strategic,
    /// `application/apply-patch+yaml` (server-side apply)
    Apply,
}

impl PatchKind {
    /// From a Content-Type (parameters ignored).
    pub fn from_content_type(ct: &str) -> Option<PatchKind> {
        match ct.split(';').next().unwrap_or("").trim() {
            "application/json-patch+json" => Some(PatchKind::Json),
            "application/merge-patch+json" => Some(PatchKind::Merge),
            "application/strategic-merge-patch+json" => Some(PatchKind::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+cbor" => Some(PatchKind::Apply),
            _ => None,
        }
    }
}

/// Which part of an object a write addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    /// The main resource: status is kept from the stored object when the kind has a status subresource.
    Main,
    /// `/status`: only status changes.
    Status,
    /// `namespaces/<name>/finalize`: only `spec.finalizers` changes.
    Finalize,
    /// Spec and status together, as storage-level updates such as the pod binding
    /// (`BindingREST.setPodNodeAndMetadata`) write them; no HTTP route maps to it.
    Whole,
}

impl Part {
    fn subresource(self) -> Option<&'static str> {
        match self {
            Part::Main | Part::Whole => None,
            Part::Status => Some("status"),
            Part::Finalize => Some("finalize"),
        }
    }
}

/// What a mutation function produced from the current object.
pub(crate) struct Mutation {
    /// The desired object, in the request's version.
    pub value: Value,
    /// The managedFields were computed by server-side apply already.
    pub applied: bool,
    /// A resourceVersion the client demanded (`None`: unconditional).
    pub precondition: Option<String>,
}

const MAX_ATTEMPTS: usize = 32;

impl Api {
    /// POST: create an object.
    pub fn create(
        &self,
        def: &ResourceDef,
        namespace: &str,
        body: Value,
        opts: &WriteOptions,
    ) -> Result<WriteOutcome, ApiError> {
        self.create_inner(def, namespace, body, opts, false)
    }

    /// PUT: replace an object (or a part of it).
    pub fn update(
        &self,
        def: &ResourceDef,
        namespace: &str,
        name: &str,
        part: Part,
        body: Value,
        opts: &WriteOptions,
    ) -> Result<WriteOutcome, ApiError> {
        if !body.is_object() {
            return Err(ApiError::bad_request("the request body must be a JSON object"));
        }
        let precondition = meta_str(&body, "resourceVersion").filter(|s| !s.is_empty()).map(str::to_string);
        // Custom resources refuse unconditional updates (AllowUnconditionalUpdate=false).
        if precondition.is_none() && def.is_custom() && part == Part::Main {
            return Err(ApiError::invalid(
                def,
                name,
                // Go prints the zero uint64 with %#v: `Invalid value: 0x0`.
                &[FieldError::new(
                    crate::schema::FieldErrorKind::Invalid,
                    "metadata.resourceVersion",
                    None,
                    "0x0: must be specified for an update",
                )],
            ));
        }
        let create_on_missing = part == Part::Main && def.builtin().is_some_and(|b| b.allow_create_on_update);
        self.guaranteed_update(def, namespace, name, part, opts, create_on_missing, |_| {
            Ok(Mutation { value: body.clone(), applied: false, precondition: precondition.clone() })
        })
    }

    /// PATCH: apply a patch of `kind` to an object (or a part of it).
    #[allow(clippy::too_many_arguments)]
    pub fn patch(
        &self,
        def: &ResourceDef,
        namespace: &str,
        name: &str,
        part: Part,
        kind: PatchKind,
        patch: &Value,
        opts: &WriteOptions,
    ) -> Result<WriteOutcome, ApiError> {
        if kind != PatchKind::Apply && opts.force {
            return Err(ApiError::invalid_kind(
                "meta.k8s.io",
                "PatchOptions",
                "",
                &[FieldError::forbidden("force", "may not be specified for non-apply patch")],
            ));
        }
        if kind == PatchKind::Strategic && def.is_custom() {
            return Err(ApiError::unsupported_media_type("application/strategic-merge-patch+json"));
        }
        if kind == PatchKind::Apply {
            return self.apply(def, namespace, name, part, patch, opts);
        }
        if kind == PatchKind::Json
            && let Some(ops) = patch.as_array()
            && ops.len() > crate::patch::MAX_JSON_PATCH_OPERATIONS
        {
            return Err(ApiError::too_large(format!(
                "The allowed maximum operations in a JSON patch is {}, got {}",
                crate::patch::MAX_JSON_PATCH_OPERATIONS,
                ops.len()
            )));
        }
        self.guaranteed_update(def, namespace, name, part, opts, false, |current| {
            let Some(current) = current else { return Err(ApiError::not_found(def, name)) };
            let patched = match kind {
                PatchKind::Json => apply_json_patch(current, patch),
                PatchKind::Merge => apply_merge_patch(current, patch),
                PatchKind::Strategic => apply_strategic_merge_patch(current, patch, &def.shape),
                PatchKind::Apply => unreachable_apply(),
            }
            .map_err(|e| match e {
                PatchError::Malformed(m) => ApiError::bad_request(m),
                PatchError::Invalid(m) => match kind {
                    // kube answers failed JSON patch operations with a generic 422; the
                    // operation that failed is only logged.
                    PatchKind::Json => {
                        tracing::debug!(resource = %def.qualified(), name, error = %m, "JSON patch failed");
                        ApiError::unprocessable("the server rejected our request due to an error in our request")
                    }
                    _ => ApiError::unprocessable(m),
                },
            })?;
            if !patched.is_object() {
                return Err(ApiError::bad_request("the patched object must be a JSON object"));
            }
            if meta_str(&patched, "name").is_some_and(|n| n != name) {
                return Err(ApiError::bad_request(format!(
                    "the name of the object ({}) does not match the name on the URL ({name})",
                    meta_str(&patched, "name").unwrap_or("")
                )));
            }
            if let (Some(a), Some(b)) = (meta_str(&patched, "uid"), meta_str(current, "uid"))
                && a != b
            {
                return Err(ApiError::conflict_msg(
                    def,
                    name,
                    &format!("Precondition failed: UID in precondition: {a}, UID in object meta: {b}"),
                ));
            }
            let precondition = meta_str(&patched, "resourceVersion").map(str::to_string);
            Ok(Mutation { value: patched, applied: false, precondition })
        })
    }

    fn apply(
        &self,
        def: &ResourceDef,
        namespace: &str,
        name: &str,
        part: Part,
        applied: &Value,
        opts: &WriteOptions,
    ) -> Result<WriteOutcome, ApiError> {
        if opts.manager.is_empty() {
            return Err(ApiError::invalid_kind(
                "meta.k8s.io",
                "PatchOptions",
                "",
                &[FieldError::required("fieldManager", "is required for apply patch")],
            ));
        }
        if let Err(why) = ssa::validate_manager(&opts.manager) {
            return Err(ApiError::invalid_kind(
                "meta.k8s.io",
                "PatchOptions",
                "",
                &[FieldError::invalid("fieldManager", json!(opts.manager), why)],
            ));
        }
        let Some(obj) = applied.as_object() else {
            return Err(ApiError::bad_request("the apply patch must be a JSON or YAML object"));
        };
        let api_version = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
        if api_version != def.api_version() {
            return Err(ApiError::bad_request(format!(
                "Incorrect version specified in apply patch. Specified patch version: {api_version}, expected: {}",
                def.api_version()
            )));
        }
        let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
        if kind != def.kind {
            return Err(ApiError::bad_request(format!(
                "Incorrect kind specified in apply patch. Specified patch kind: {kind}, expected: {}",
                def.kind
            )));
        }
        match meta_str(applied, "name") {
            Some(n) if n == name => {}
            Some(n) => {
                return Err(ApiError::bad_request(format!(
                    "the name of the object ({n}) does not match the name on the URL ({name})"
                )));
            }
            None => {
                return Err(ApiError::bad_request("metadata.name: Required value: name is required for apply patch"));
            }
        }
        let precondition = meta_str(applied, "resourceVersion").filter(|s| !s.is_empty()).map(str::to_string);
        let applied_uid = meta_str(applied, "uid").filter(|s| !s.is_empty()).map(str::to_string);
        let mut applied = applied.clone();
        if let Some(md) = metadata_mut(&mut applied) {
            md.remove("resourceVersion");
            md.remove("managedFields");
        }
        // What the applier may set in this part: status only on /status, never status on the
        // main resource of a kind with a status subresource.
        match part {
            Part::Status => {
                // Only status counts on /status: the rest of the applied metadata is ignored.
                let status = applied.get("status").cloned();
                let mut only = Map::new();
                for k in ["apiVersion", "kind"] {
                    if let Some(v) = applied.get(k) {
                        only.insert(k.into(), v.clone());
                    }
                }
                let mut md = Map::new();
                for k in ["name", "namespace"] {
                    if let Some(v) = applied.get("metadata").and_then(|m| m.get(k)) {
                        md.insert(k.into(), v.clone());
                    }
                }
                only.insert("metadata".into(), Value::Object(md));
                if let Some(s) = status {
                    only.insert("status".into(), s);
                }
                applied = Value::Object(only);
            }
            Part::Main if def.status => {
                if let Some(map) = applied.as_object_mut() {
                    map.remove("status");
                }
            }
            _ => {}
        }
        let now = self.clock.now_rfc3339();
        let version = def.api_version();
        self.guaranteed_update(def, namespace, name, part, opts, true, |current| {
            match (current, &precondition, &applied_uid) {
                (Some(cur), Some(rv), _) if meta_str(cur, "resourceVersion") != Some(rv.as_str()) => {
                    return Err(ApiError::conflict(def, name));
                }
                (Some(cur), _, Some(uid)) if meta_str(cur, "uid") != Some(uid.as_str()) => {
                    return Err(ApiError::conflict_msg(
                        def,
                        name,
                        &format!(
                            "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                            meta_str(cur, "uid").unwrap_or("")
                        ),
                    ));
                }
                (None, _, Some(uid)) => {
                    return Err(ApiError::conflict_plain(format!(
                        "uid mismatch: the provided object specified uid {uid}, and no existing object was found"
                    )));
                }
                _ => {}
            }
            let managed = match current.and_then(|c| c.get("metadata")).and_then(|m| m.get("managedFields")) {
                Some(v) => ssa::parse_entries(v).unwrap_or_default(),
                None => Vec::new(),
            };
            let manager =
                Manager { name: &opts.manager, api_version: &version, subresource: part.subresource(), time: &now };
            let mut base = current.cloned();
            if let Some(base) = &mut base
                && let Some(md) = metadata_mut(base)
            {
                md.remove("managedFields");
            }
            let (mut merged, managed) = ssa::apply(base.as_ref(), &applied, managed, &manager, opts.force, &def.shape)
                .map_err(|e| match e {
                    ssa::ApplyError::Conflicts(c) => ApiError::apply_conflict(c.message(), c.causes()),
                    ssa::ApplyError::BadRequest(m) => ApiError::bad_request(m),
                    ssa::ApplyError::Invalid(m) => ApiError::internal_plain(format!(
                        "failed to create typed patch object ({}, Kind={}): {m}",
                        def.api_version(),
                        def.kind
                    )),
                })?;
            set_managed_fields(&mut merged, &managed);
            if let Some(cur) = current
                && let Some(md) = metadata_mut(&mut merged)
            {
                // Identity and bookkeeping come from the stored object, never from the merge.
                for k in ["resourceVersion", "uid", "creationTimestamp", "generation"] {
                    match cur.get("metadata").and_then(|m| m.get(k)) {
                        Some(v) => md.insert(k.into(), v.clone()),
                        None => md.remove(k),
                    };
                }
            }
            Ok(Mutation { value: merged, applied: true, precondition: precondition.clone() })
        })
    }

    /// The heart of every update: read the current object, compute the desired one, validate,
    /// and commit if nothing changed in between (retrying otherwise), as `GuaranteedUpdate` does.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn guaranteed_update(
        &self,
        def: &ResourceDef,
        namespace: &str,
        name: &str,
        part: Part,
        opts: &WriteOptions,
        create_on_missing: bool,
        mut mutate: impl FnMut(Option<&Value>) -> Result<Mutation, ApiError>,
    ) -> Result<WriteOutcome, ApiError> {
        let key = obj_key(def, namespace, name);
        for _ in 0..MAX_ATTEMPTS {
            let current = self.store.get(&def.storage, &key);
            let current_value = current.as_ref().map(|s| self.present_value(def, s));
            let mutation = mutate(current_value.as_ref())?;
            let (Some(current), Some(current_value)) = (current, current_value) else {
                if !create_on_missing {
                    return Err(ApiError::not_found(def, name));
                }
                if mutation.precondition.is_some() {
                    // A precondition on an object that does not exist cannot hold.
                    return Err(ApiError::not_found(def, name));
                }
                let mut value = mutation.value;
                if let Some(md) = metadata_mut(&mut value) {
                    md.entry("name").or_insert_with(|| json!(name));
                }
                match self.create_inner(def, namespace, value, opts, mutation.applied) {
                    Err(e) if e.reason == "AlreadyExists" => continue,
                    other => return other,
                }
            };
            if let Some(rv) = &mutation.precondition
                && *rv != current.meta.rv.to_string()
            {
                return Err(ApiError::conflict(def, name));
            }
            let mut warnings = Vec::new();
            let mut desired =
                self.prepare_update(def, namespace, name, part, &current_value, mutation.value, opts, &mut warnings)?;
            if !mutation.applied {
                let old_managed = managed_fields_of(&current_value);
                let manager = Manager {
                    name: &opts.manager,
                    api_version: &def.api_version(),
                    subresource: part.subresource(),
                    time: &self.clock.now_rfc3339(),
                };
                // `managedFields: [{}]` resets ownership (I8); `[]` or absence keeps it.
                let requested = desired.get("metadata").and_then(|m| m.get("managedFields")).cloned();
                let reset =
                    requested.as_ref().and_then(Value::as_array).is_some_and(|a| a.len() == 1 && a[0] == json!({}));
                let base = if reset { Vec::new() } else { old_managed };
                let entries = ssa::record_update(
                    Some(&strip_managed(&current_value)),
                    &strip_managed(&desired),
                    base,
                    &manager,
                    &def.shape,
                );
                set_managed_fields(&mut desired, &entries);
            }
            let storage_form = self.to_storage(def, desired);
            let mut meta = self.meta_of(def, &storage_form);
            // The no-op rule (C8): identical content means no write, no RV, no event.
            let mut compare = storage_form.clone();
            if let Some(md) = metadata_mut(&mut compare) {
                md.insert("resourceVersion".into(), json!(current.meta.rv.to_string()));
            }
            let stored_value = current.value();
            if compare == stored_value {
                return Ok(WriteOutcome { object: current_value, created: false, warnings });
            }
            let finalizers_empty = meta.finalizers.is_empty();
            let grace_zero = stored_value
                .get("metadata")
                .and_then(|m| m.get("deletionGracePeriodSeconds"))
                .and_then(Value::as_i64)
                .unwrap_or(0)
                == 0;
            if opts.dry_run {
                return Ok(WriteOutcome {
                    object: self.present_value(def, &Stored { json: to_json(&compare), meta }),
                    created: false,
                    warnings,
                });
            }
            if meta.deleting
                && finalizers_empty
                && grace_zero
                && !self.deletion_waits_for_spec_finalizers(def, &storage_form)
            {
                // Emptying the finalizers of an object being deleted removes it (F4): one
                // DELETED event, and the response is the submitted object.
                match self.store.commit(&def.storage, &key, Change::Delete { expect_rv: current.meta.rv }) {
                    Ok(done) => {
                        self.after_removal(def, &done.object);
                        let mut response = compare;
                        if let Some(md) = metadata_mut(&mut response) {
                            md.insert("resourceVersion".into(), json!(done.object.meta.rv.to_string()));
                        }
                        let presented = self
                            .present_value(def, &Stored { json: to_json(&response), meta: done.object.meta.clone() });
                        return Ok(WriteOutcome { object: presented, created: false, warnings });
                    }
                    Err(StoreError::Conflict | StoreError::NotFound) => continue,
                    Err(StoreError::AlreadyExists) => continue,
                }
            }
            meta.rv = 0;
            match self.store.commit(
                &def.storage,
                &key,
                Change::Update { value: storage_form, meta, expect_rv: current.meta.rv },
            ) {
                Ok(done) => {
                    self.after_write(def, &done.object);
                    return Ok(WriteOutcome {
                        object: self.present_value(def, &done.object),
                        created: false,
                        warnings,
                    });
                }
                Err(StoreError::Conflict | StoreError::NotFound | StoreError::AlreadyExists) => continue,
            }
        }
        Err(ApiError::conflict(def, name))
    }

    /// Create; `applied` says server-side apply computed managedFields already.
    pub(crate) fn create_inner(
        &self,
        def: &ResourceDef,
        namespace: &str,
        mut body: Value,
        opts: &WriteOptions,
        applied: bool,
    ) -> Result<WriteOutcome, ApiError> {
        check_type(def, &mut body)?;
        let mut warnings = Vec::new();
        normalize_metadata(&mut body, &mut warnings);
        let Some(md) = metadata_mut(&mut body) else {
            return Err(ApiError::bad_request("the request body must be a JSON object"));
        };
        // Namespace (C4).
        if def.namespaced {
            match md.get("namespace").and_then(Value::as_str) {
                Some(ns) if !ns.is_empty() && ns != namespace => {
                    return Err(ApiError::bad_request(
                        "the namespace of the provided object does not match the namespace sent on the request",
                    ));
                }
                _ => {
                    md.insert("namespace".into(), json!(namespace));
                }
            }
        } else {
            md.remove("namespace");
        }
        if md.get("resourceVersion").and_then(Value::as_str).is_some_and(|s| !s.is_empty()) {
            return Err(ApiError::plain("resourceVersion should not be set on objects to be created"));
        }
        for k in [
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "resourceVersion",
            "selfLink",
        ] {
            md.remove(k);
        }
        let generate_name = md.get("generateName").and_then(Value::as_str).unwrap_or("").to_string();
        let mut name = md.get("name").and_then(Value::as_str).unwrap_or("").to_string();
        let generated = name.is_empty() && !generate_name.is_empty();
        if name.is_empty() && generate_name.is_empty() {
            return Err(ApiError::invalid(
                def,
                "",
                &[FieldError::required("metadata.name", "name or generateName is required")],
            ));
        }
        let now = self.clock.now_rfc3339();
        md.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
        md.insert("creationTimestamp".into(), json!(now));
        if def.has_generation() {
            md.insert("generation".into(), json!(1));
        } else {
            md.remove("generation");
        }
        if !applied && !md.contains_key("managedFields") {
            md.remove("managedFields");
        }

        // Namespace lifecycle (C12).
        if def.namespaced {
            let ns_def = self.namespaces_def();
            match self.store.get(&ns_def.storage, &(String::new(), namespace.to_string())) {
                None => return Err(ApiError::not_found(&ns_def, namespace)),
                Some(ns) if ns.meta.deleting => {
                    return Err(ApiError::namespace_terminating(def, &name, namespace));
                }
                Some(_) => {}
            }
        }
        if let Some(c) = def.custom()
            && c.terminating
        {
            return Err(ApiError::method_not_allowed("create", def)
                .with_message("create not allowed while custom resource definition is terminating".into()));
        }

        self.prepare_create(def, &mut body)?;
        let mut body = self.decode_and_validate(def, body, None, opts.field_validation, &mut warnings, &name)?;
        if !applied {
            let manager =
                Manager { name: &opts.manager, api_version: &def.api_version(), subresource: None, time: &now };
            let entries = ssa::record_update(None, &strip_managed(&body), Vec::new(), &manager, &def.shape);
            set_managed_fields(&mut body, &entries);
        }
        for attempt in 0..8 {
            if generated {
                name = format!("{generate_name}{}", random_suffix());
                if let Some(md) = metadata_mut(&mut body) {
                    md.insert("name".into(), json!(name));
                }
            }
            let errors = validation::validate_object_meta(
                body.get("metadata").unwrap_or(&Value::Null),
                def.namespaced,
                name_rule(def),
            );
            if !errors.is_empty() {
                return Err(ApiError::invalid(def, &name, &errors));
            }
            if attempt == 0 {
                crate::auth::podsecurity::admit_write(self, def, namespace, &name, &body, &mut warnings)?;
            }
            let storage_form = self.to_storage(def, body.clone());
            let meta = self.meta_of(def, &storage_form);
            let key = obj_key(def, namespace, &name);
            if opts.dry_run {
                // A dry run answers what the write would: an existing name still conflicts.
                if let Some(existing) = self.store.get(&def.storage, &key) {
                    return Err(ApiError::already_exists(def, &name, existing.meta.deleting));
                }
                return Ok(WriteOutcome { object: body, created: true, warnings });
            }
            match self.store.commit(&def.storage, &key, Change::Create(storage_form, meta)) {
                Ok(done) => {
                    self.after_write(def, &done.object);
                    return Ok(WriteOutcome { object: self.present_value(def, &done.object), created: true, warnings });
                }
                Err(StoreError::AlreadyExists) if generated && attempt < 7 => continue,
                Err(_) => {
                    let terminating = self.store.get(&def.storage, &key).is_some_and(|s| s.meta.deleting);
                    return Err(ApiError::already_exists(def, &name, terminating));
                }
            }
        }
        Err(ApiError::already_exists(def, &name, false))
    }

    /// Merge the desired object with the stored one according to the part written and the
    /// kind's strategy, and validate it.
    #[allow(clippy::too_many_arguments)]
    fn prepare_update(
        &self,
        def: &ResourceDef,
        namespace: &str,
        name: &str,
        part: Part,
        old: &Value,
        mut new: Value,
        opts: &WriteOptions,
        warnings: &mut Vec<String>,
    ) -> Result<Value, ApiError> {
        check_type(def, &mut new)?;
        {
            let Some(md) = metadata_mut(&mut new) else {
                return Err(ApiError::bad_request("the request body must be a JSON object"));
            };
            match md.get("name").and_then(Value::as_str) {
                Some(n) if n != name => {
                    return Err(ApiError::bad_request(format!(
                        "the name of the object ({n}) does not match the name on the URL ({name})"
                    )));
                }
                _ => {
                    md.insert("name".into(), json!(name));
                }
            }
            if def.namespaced {
                match md.get("namespace").and_then(Value::as_str) {
                    Some(ns) if !ns.is_empty() && ns != namespace => {
                        return Err(ApiError::bad_request(
                            "the namespace of the provided object does not match the namespace sent on the request",
                        ));
                    }
                    _ => {
                        md.insert("namespace".into(), json!(namespace));
                    }
                }
            } else {
                md.remove("namespace");
            }
        }
        // The part of the object this write may change.
        let mut merged = match part {
            Part::Main => {
                let mut v = new;
                if def.status {
                    copy_field(old, &mut v, "status");
                }
                if def.builtin_kind() == BuiltinKind::Namespace {
                    // Namespace spec.finalizers change only through /finalize.
                    let fin = old.get("spec").and_then(|s| s.get("finalizers")).cloned();
                    set_path(&mut v, &["spec", "finalizers"], fin);
                }
                v
            }
            Part::Status => {
                let mut v = old.clone();
                copy_field(&new, &mut v, "status");
                // managedFields travel with the request so that record_update sees the
                // caller's intent (reset or not); everything else of metadata is the stored one.
                if let Some(mf) = new.get("metadata").and_then(|m| m.get("managedFields")) {
                    set_path(&mut v, &["metadata", "managedFields"], Some(mf.clone()));
                }
                v
            }
            Part::Finalize => {
                let mut v = old.clone();
                let fin = new.get("spec").and_then(|s| s.get("finalizers")).cloned();
                set_path(&mut v, &["spec", "finalizers"], fin);
                v
            }
            Part::Whole => new,
        };
        normalize_metadata(&mut merged, warnings);
        // System metadata (rest.BeforeUpdate, ValidateObjectMetaAccessorUpdate).
        let old_md = old.get("metadata").cloned().unwrap_or_else(|| json!({}));
        let Some(md) = metadata_mut(&mut merged) else {
            return Err(ApiError::bad_request("the request body must be a JSON object"));
        };
        let mut immutable = Vec::new();
        match (md.get("uid").and_then(Value::as_str), old_md.get("uid").and_then(Value::as_str)) {
            (None | Some(""), _) => {}
            (Some(a), Some(b)) if a == b => {}
            (Some(a), _) => immutable.push(FieldError::invalid("metadata.uid", json!(a), "field is immutable")),
        }
        for field in ["deletionTimestamp", "deletionGracePeriodSeconds"] {
            match (md.get(field).filter(|v| !v.is_null()), old_md.get(field)) {
                (Some(a), old_value) if Some(a) != old_value => {
                    immutable.push(FieldError::invalid(format!("metadata.{field}"), a.clone(), "field is immutable"));
                }
                _ => {}
            }
        }
        if !immutable.is_empty() {
            return Err(ApiError::invalid(def, name, &immutable));
        }
        for k in ["uid", "creationTimestamp", "deletionTimestamp", "generation", "deletionGracePeriodSeconds"] {
            match old_md.get(k) {
                Some(v) => md.insert(k.into(), v.clone()),
                None => md.remove(k),
            };
        }
        md.remove("selfLink");
        // Finalizers may not be added to an object being deleted (F3).
        let deleting = old_md.get("deletionTimestamp").is_some_and(|v| !v.is_null());
        let old_fin = super::string_list(old_md.get("finalizers"));
        let new_fin = super::string_list(md.get("finalizers"));
        if let Some(err) = validation::validate_finalizers_on_update(&old_fin, &new_fin, deleting) {
            return Err(ApiError::invalid(def, name, &[err]));
        }
        self.prepare_update_kind(def, old, &mut merged)?;
        let mut merged = self.decode_and_validate(def, merged, Some(old), opts.field_validation, warnings, name)?;
        // Generation (G2): bumped when anything outside metadata (and status, if it is a
        // subresource) changes.
        if def.has_generation() && spec_changed(def, old, &merged) {
            let g = old.get("metadata").and_then(|m| m.get("generation")).and_then(Value::as_i64).unwrap_or(0);
            set_path(&mut merged, &["metadata", "generation"], Some(json!(g + 1)));
        }
        let errors = validation::validate_object_meta(
            merged.get("metadata").unwrap_or(&Value::Null),
            def.namespaced,
            name_rule(def),
        );
        if !errors.is_empty() {
            return Err(ApiError::invalid(def, name, &errors));
        }
        // Pod templates of workloads are checked on update too (warnings only); pods are
        // checked when created, their specs being all but immutable.
        if part == Part::Main && def.kind != "Pod" && spec_changed(def, old, &merged) {
            crate::auth::podsecurity::admit_write(self, def, namespace, name, &merged, warnings)?;
        }
        Ok(merged)
    }

    /// Decode a request-version object into its canonical form and validate it: the typed round
    /// trip for built-ins, pruning, defaulting and schema validation for custom resources.
    pub(crate) fn decode_and_validate(
        &self,
        def: &ResourceDef,
        value: Value,
        old: Option<&Value>,
        fv: FieldValidation,
        warnings: &mut Vec<String>,
        name: &str,
    ) -> Result<Value, ApiError> {
        let version = &def.version;
        let kind = &def.kind;
        let unknown = |paths: Vec<String>, warnings: &mut Vec<String>| -> Result<(), ApiError> {
            if paths.is_empty() {
                return Ok(());
            }
            let list: Vec<String> = paths.iter().map(|p| format!("unknown field \"{p}\"")).collect();
            match fv {
                FieldValidation::Strict => Err(ApiError::bad_request(format!(
                    "{kind} in version \"{version}\" cannot be handled as a {kind}: strict decoding error: {}",
                    list.join(", ")
                ))),
                FieldValidation::Warn => {
                    warnings.extend(list);
                    Ok(())
                }
                FieldValidation::Ignore => Ok(()),
            }
        };
        match &def.flavor {
            Flavor::Builtin(b) => {
                let decoded = (b.decode)(value.clone()).map_err(|e| {
                    ApiError::bad_request(format!("{kind} in version \"{version}\" cannot be handled as a {kind}: {e}"))
                })?;
                unknown(dropped_paths(&value, &decoded), warnings)?;
                self.validate_builtin(def, &decoded, old, name)?;
                Ok(decoded)
            }
            Flavor::Custom(c) => {
                let mut value = value;
                let Some(schema) = &c.schema else { return Ok(value) };
                let pruned = schema.prune(&mut value);
                unknown(pruned, warnings)?;
                schema.apply_defaults(&mut value);
                let errors = schema.validate_with_rules(&value, old);
                if !errors.is_empty() {
                    return Err(ApiError::invalid(def, name, &errors));
                }
                Ok(value)
            }
        }
    }

    /// Whether removing a deleting object must also wait for non-metadata finalizers
    /// (namespaces wait for `spec.finalizers`).
    pub(crate) fn deletion_waits_for_spec_finalizers(&self, def: &ResourceDef, value: &Value) -> bool {
        def.builtin_kind() == BuiltinKind::Namespace
            && value
                .get("spec")
                .and_then(|s| s.get("finalizers"))
                .and_then(Value::as_array)
                .is_some_and(|a| !a.is_empty())
    }
}

/// Drop empty metadata collections and duplicate owner references, as the round trip through
/// ObjectMeta does in kube-apiserver (C9).
fn normalize_metadata(value: &mut Value, warnings: &mut Vec<String>) {
    if let Some(md) = value.get_mut("metadata") {
        if let Some(w) = validation::dedup_owner_references(md) {
            warnings.push(w);
        }
        validation::normalize_object_meta(md);
    }
}

fn unreachable_apply() -> Result<Value, PatchError> {
    Err(PatchError::Invalid("apply patches are handled separately".into()))
}

impl ApiError {
    /// Replace the message.
    pub fn with_message(mut self, message: String) -> ApiError {
        self.message = message;
        self
    }
}

/// Check (and fill in) apiVersion and kind of a request body.
fn check_type(def: &ResourceDef, body: &mut Value) -> Result<(), ApiError> {
    let Some(obj) = body.as_object_mut() else {
        return Err(ApiError::bad_request("the request body must be a JSON object"));
    };
    let expected = def.api_version();
    match obj.get("apiVersion").and_then(Value::as_str) {
        Some(v) if v != expected => {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({v}) does not match the expected API version ({expected})"
            )));
        }
        Some(_) => {}
        None if def.is_custom() => {
            return Err(ApiError::bad_request(format!(
                "Object 'apiVersion' is missing in '{}'",
                truncate(&Value::Object(obj.clone()))
            )));
        }
        None => {
            obj.insert("apiVersion".into(), json!(expected));
        }
    }
    match obj.get("kind").and_then(Value::as_str) {
        Some(k) if k != def.kind => Err(ApiError::bad_request(format!(
            "{k} in version \"{}\" cannot be handled as a {}: the kind in the data ({k}) does not match the expected kind ({})",
            def.version, def.kind, def.kind
        ))),
        Some(_) => Ok(()),
        None if def.is_custom() => Err(ApiError::bad_request(format!(
            "Object 'Kind' is missing in '{}'",
            truncate(&Value::Object(obj.clone()))
        ))),
        None => {
            obj.insert("kind".into(), json!(def.kind));
            Ok(())
        }
    }
}

fn truncate(v: &Value) -> String {
    let s = v.to_string();
    if s.len() > 256 { format!("{}...", &s[..s.char_indices().nth(256).map(|(i, _)| i).unwrap_or(s.len())]) } else { s }
}

fn name_rule(def: &ResourceDef) -> NameRule {
    match def.builtin_kind() {
        BuiltinKind::Namespace => NameRule::Dns1123Label,
        BuiltinKind::Service => NameRule::Dns1035Label,
        // Events, RBAC objects and a few others accept path segments.
        BuiltinKind::Event | BuiltinKind::EventV1 => NameRule::PathSegment,
        _ if def.group == "rbac.authorization.k8s.io" => NameRule::PathSegment,
        _ => NameRule::Dns1123Subdomain,
    }
}

/// Paths present (non-null) in `input` and absent from `decoded`: the unknown fields a typed
/// decoder dropped.
fn dropped_paths(input: &Value, decoded: &Value) -> Vec<String> {
    fn walk(input: &Value, decoded: &Value, path: &str, out: &mut Vec<String>, depth: usize) {
        if depth > 64 {
            return;
        }
        match (input, decoded) {
            (Value::Object(a), Value::Object(b)) => {
                for (k, v) in a {
                    let p = if path.is_empty() { k.clone() } else { format!("{path}.{k}") };
                    match b.get(k) {
                        Some(d) => walk(v, d, &p, out, depth + 1),
                        None if !v.is_null() => out.push(p),
                        None => {}
                    }
                }
            }
            (Value::Array(a), Value::Array(b)) => {
                for (i, (v, d)) in a.iter().zip(b.iter()).enumerate() {
                    walk(v, d, &format!("{path}[{i}]"), out, depth + 1);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(input, decoded, "", &mut out, 0);
    out
}

/// Whether anything but metadata (and status, when it is a subresource) differs.
fn spec_changed(def: &ResourceDef, old: &Value, new: &Value) -> bool {
    let (Some(a), Some(b)) = (old.as_object(), new.as_object()) else { return true };
    let skip = |k: &str| k == "metadata" || k == "apiVersion" || k == "kind" || (def.status && k == "status");
    let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).filter(|k| !skip(k)).collect();
    keys.into_iter().any(|k| a.get(k) != b.get(k))
}

fn copy_field(from: &Value, to: &mut Value, field: &str) {
    if let Some(obj) = to.as_object_mut() {
        match from.get(field) {
            Some(v) => obj.insert(field.into(), v.clone()),
            None => obj.remove(field),
        };
    }
}

/// Set (or with `None` remove) a nested field, creating parents.
pub fn set_path(value: &mut Value, path: &[&str], new: Option<Value>) {
    let Some((last, parents)) = path.split_last() else { return };
    let mut cur = value;
    for p in parents {
        let Some(obj) = cur.as_object_mut() else { return };
        if new.is_none() && !obj.contains_key(*p) {
            return;
        }
        cur = obj.entry(p.to_string()).or_insert_with(|| json!({}));
        if !cur.is_object() {
            *cur = json!({});
        }
    }
    if let Some(obj) = cur.as_object_mut() {
        match new {
            Some(v) => obj.insert(last.to_string(), v),
            None => obj.remove(*last),
        };
    }
}

fn managed_fields_of(v: &Value) -> Vec<ManagedFieldsEntry> {
    v.get("metadata")
        .and_then(|m| m.get("managedFields"))
        .and_then(|mf| ssa::parse_entries(mf).ok())
        .unwrap_or_default()
}

fn strip_managed(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(md) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        md.remove("managedFields");
    }
    v
}

fn set_managed_fields(v: &mut Value, entries: &[ManagedFieldsEntry]) {
    if let Some(md) = metadata_mut(v) {
        if entries.is_empty() {
            md.remove("managedFields");
        } else {
            md.insert("managedFields".into(), serde_json::to_value(entries).unwrap_or(Value::Null));
        }
    }
}

fn to_json(v: &Value) -> bytes::Bytes {
    bytes::Bytes::from(serde_json::to_vec(v).unwrap_or_default())
}

/// The 5-character suffix of generateName (consonants and digits that cannot spell words).
fn random_suffix() -> String {
    use rand::RngExt;
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::rng();
    (0..5).map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dropped_paths_name_unknown_fields() {
        let input = json!({"spec": {"a": 1, "b": {"c": 2}, "n": null}, "x": [{"y": 1, "z": 2}]});
        let decoded = json!({"spec": {"a": 1, "b": {}}, "x": [{"y": 1}]});
        assert_eq!(dropped_paths(&input, &decoded), ["spec.b.c", "x[0].z"]);
    }

    #[test]
    fn generate_name_suffix_uses_kube_alphabet() {
        let s = random_suffix();
        assert_eq!(s.len(), 5);
        assert!(s.chars().all(|c| "bcdfghjklmnpqrstvwxz2456789".contains(c)));
    }

    #[test]
    fn patch_kinds_parse_with_parameters() {
        assert_eq!(PatchKind::from_content_type("application/merge-patch+json; charset=utf-8"), Some(PatchKind::Merge));
        assert_eq!(PatchKind::from_content_type("application/json"), None);
    }
}

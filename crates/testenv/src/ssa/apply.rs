//! Server-side apply: merging an applied configuration, conflicts, and removal of fields the
//! applier stopped applying.
//!
//! Follows structured-merge-diff's `merge.Updater.Apply` and apiserver's fieldmanager:
//!
//! 1. the configuration is merged into the live object per shape ([`super::typed::merge`]);
//! 2. the applier's new set is the field set of its configuration, minus never-tracked paths;
//! 3. fields in the applier's previous `Apply` set but not in the new one are removed from
//!    the object unless another manager (any operation) still owns them or something below
//!    them; containers left empty by that removal and owned by nobody go too (I4);
//! 4. the live and merged objects are compared; a field another manager owns that the apply
//!    adds, changes (or explicitly nulls out) is a conflict, unless `force` moves it (I3).
//!    Applying the value a field already has shares ownership and is never a conflict;
//! 5. fields the apply removed leave every other manager's set; empty entries are dropped.

use std::fmt;

use serde_json::{Map, Value};

use super::fieldset::{FieldSet, PathElement};
use super::managed::{ManagedFieldsEntry, Operation, SERVER_METADATA, sort_entries, strip_ignored, write_entries};
use super::typed::{compare, depth_exceeds, field_set, get_at, merge, remove_at};
use super::{MAX_DEPTH, Manager};
use crate::shape::Shape;

/// One field an apply would take from another manager.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conflict {
    /// The manager currently owning the field.
    pub manager: String,
    /// How that manager came to own it.
    pub operation: Operation,
    /// apiVersion of that manager's entry.
    pub api_version: String,
    /// Subresource of that manager's entry, if any.
    pub subresource: Option<String>,
    /// The field, in kube's path format (`.spec.containers[name="nginx"].image`).
    pub field: String,
}

impl Conflict {
    /// How apiserver's `printManager` names the manager: `"mgr"` for appliers,
    /// `"mgr" using apps/v1` for updaters, with ` with subresource "status"` after the name
    /// for subresource entries.
    pub fn manager_description(&self) -> String {
        let mut out = quote(&self.manager);
        if let Some(sub) = self.subresource.as_deref().filter(|s| !s.is_empty()) {
            out.push_str(&format!(" with subresource {}", quote(sub)));
        }
        if self.operation == Operation::Update {
            out.push_str(&format!(" using {}", self.api_version));
        }
        out
    }

    fn identifier(&self) -> String {
        ManagedFieldsEntry {
            manager: self.manager.clone(),
            operation: self.operation,
            api_version: self.api_version.clone(),
            time: None,
            fields_type: String::new(),
            fields_v1: None,
            subresource: self.subresource.clone(),
        }
        .identifier()
    }
}

/// Go's `%q` for the strings managers are made of (printable text): a JSON string literal.
fn quote(s: &str) -> String {
    Value::String(s.to_string()).to_string()
}

/// The conflicts that made an apply fail, ordered as apiserver lists them (by manager
/// identifier, then by path).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.message())]
pub struct Conflicts(pub Vec<Conflict>);

impl Conflicts {
    /// The Status message apiserver's `getConflictMessage` builds:
    ///
    /// * one conflict: `Apply failed with 1 conflict: conflict with "mgr" using v1: .spec.x`
    /// * several: `Apply failed with 2 conflicts: conflicts with "a":\n- .spec.x\n- .spec.y`
    ///   with one `conflicts with ...:` block per manager.
    pub fn message(&self) -> String {
        if let [only] = self.0.as_slice() {
            return format!(
                "Apply failed with 1 conflict: conflict with {}: {}",
                only.manager_description(),
                only.field
            );
        }
        let mut lines = Vec::new();
        let mut current: Option<String> = None;
        for conflict in &self.0 {
            let id = conflict.identifier();
            if current.as_deref() != Some(id.as_str()) {
                lines.push(format!("conflicts with {}:", conflict.manager_description()));
                current = Some(id);
            }
            lines.push(format!("- {}", conflict.field));
        }
        format!("Apply failed with {} conflicts: {}", self.0.len(), lines.join("\n"))
    }

    /// The Status `details.causes`, as (message, field) pairs; each cause has reason
    /// `FieldManagerConflict` and message `conflict with "mgr" using v1`.
    pub fn causes(&self) -> Vec<(String, String)> {
        self.0.iter().map(|c| (format!("conflict with {}", c.manager_description()), c.field.clone())).collect()
    }
}

/// Why an apply could not be performed.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// Fields owned by other managers would change (409 Conflict, reason `Conflict`; see
    /// [`Conflicts::message`] and [`Conflicts::causes`]).
    #[error(transparent)]
    Conflicts(#[from] Conflicts),
    /// The body cannot be applied at all (400 BadRequest), e.g.
    /// `metadata.managedFields must be nil`.
    #[error("{0}")]
    BadRequest(String),
    /// The configuration does not fit the type, e.g. a keyed list item without its key
    /// (`.spec.containers: element 0: associative list with keys has an element that omits key
    /// field "name" (and doesn't have default value)`). kube-apiserver answers this with a 500
    /// whose message is `failed to create typed patch object (<group/version, Kind=kind>): `
    /// followed by this text.
    #[error("{0}")]
    Invalid(String),
}

/// Applies `applied` (an apply patch body, already decoded from YAML/JSON) onto `current`
/// (`None` when the apply creates the object).
///
/// `managed` are the stored entries of `current`. The caller has already checked the body's
/// apiVersion/kind/name, the `metadata.resourceVersion` precondition (I5) and, for writes to
/// the main resource of a kind with a status subresource, dropped `status` from `applied`;
/// for `/status` it passes only the status and `subresource: Some("status")`.
///
/// Returns the object to store, with `metadata.managedFields` already written, and the
/// entries. Server-owned metadata in `applied` (uid, resourceVersion, generation, timestamps,
/// selfLink) is ignored; the caller's create/update path fills those in as usual.
pub fn apply(
    current: Option<&Value>,
    applied: &Value,
    managed: Vec<ManagedFieldsEntry>,
    manager: &Manager<'_>,
    force: bool,
    shape: &Shape,
) -> Result<(Value, Vec<ManagedFieldsEntry>), ApplyError> {
    if depth_exceeds(applied, MAX_DEPTH) || current.is_some_and(|c| depth_exceeds(c, MAX_DEPTH)) {
        return Err(ApplyError::BadRequest(format!("the apply patch is nested deeper than {MAX_DEPTH} levels")));
    }
    let Value::Object(applied_map) = applied else {
        return Err(ApplyError::BadRequest("the apply patch must be a JSON object".to_string()));
    };
    let config = clean_config(applied_map)?;

    let mut new_set = field_set(&config, shape, true).map_err(ApplyError::Invalid)?;
    strip_ignored(&mut new_set);

    let mut live = current.cloned().unwrap_or_else(|| Value::Object(Map::new()));
    if let Some(Value::Object(metadata)) = live.get_mut("metadata") {
        metadata.remove("managedFields");
    }
    let mut merged = merge(Some(&live), &config, shape);

    let mut managed = managed;
    let own = managed.iter().position(|e| e.is_for(manager, Operation::Apply));
    let last_set = own.map(|i| managed[i].fields()).unwrap_or_default();
    let others = managed
        .iter()
        .enumerate()
        .filter(|(i, _)| Some(*i) != own)
        .fold(FieldSet::new(), |acc, (_, e)| acc.union(&e.fields()));

    prune(&mut merged, &last_set, &new_set, &others, shape);

    let mut comparison = compare(&live, &merged, shape);
    comparison.filter(strip_ignored);
    let nulled = comparison.removed.intersection(&new_set);
    let changed = comparison.added.union(&comparison.modified).union(&nulled);

    let mut conflicts = Vec::new();
    let mut taken: Vec<(usize, FieldSet)> = Vec::new();
    for (i, entry) in managed.iter().enumerate() {
        if Some(i) == own {
            continue;
        }
        let lost = entry.fields().intersection(&changed);
        if lost.is_empty() {
            continue;
        }
        conflicts.extend(lost.paths().iter().map(|path| Conflict {
            manager: entry.manager.clone(),
            operation: entry.operation,
            api_version: entry.api_version.clone(),
            subresource: entry.subresource.clone(),
            field: path.to_string(),
        }));
        taken.push((i, lost));
    }
    if !conflicts.is_empty() && !force {
        conflicts.sort_by_cached_key(Conflict::identifier);
        return Err(ApplyError::Conflicts(Conflicts(conflicts)));
    }

    for (i, entry) in managed.iter_mut().enumerate() {
        if Some(i) == own {
            continue;
        }
        let set = entry.fields();
        let mut updated = set.difference(&comparison.removed);
        if let Some((_, lost)) = taken.iter().find(|(j, _)| *j == i) {
            updated = updated.difference(lost);
        }
        if updated != set {
            entry.fields_v1 = Some(updated);
        }
    }

    let object_changed = merged != live;
    match own {
        Some(i) => {
            let entry = &mut managed[i];
            let set_changed = entry.fields() != new_set || entry.api_version != manager.api_version;
            if set_changed || object_changed {
                entry.time = Some(manager.time.to_string());
            }
            if set_changed {
                entry.api_version = manager.api_version.to_string();
                entry.fields_v1 = Some(new_set);
            }
        }
        None => managed.push(ManagedFieldsEntry::new(manager, Operation::Apply, new_set)),
    }
    managed.retain(|e| !e.is_empty());
    sort_entries(&mut managed);
    write_entries(&mut merged, &managed);
    Ok((merged, managed))
}

/// The configuration to merge: the body without server-owned metadata. A body carrying
/// managedFields is rejected as apiserver rejects it.
fn clean_config(applied: &Map<String, Value>) -> Result<Value, ApplyError> {
    let mut config = applied.clone();
    if let Some(Value::Object(metadata)) = config.get_mut("metadata") {
        if metadata.get("managedFields").is_some_and(|v| !v.is_null()) {
            return Err(ApplyError::BadRequest("metadata.managedFields must be nil".to_string()));
        }
        for name in SERVER_METADATA {
            metadata.remove(*name);
        }
    }
    Ok(Value::Object(config))
}

/// Removes from `merged` what the applier applied last time and not this time, unless
/// another manager owns it or something below it; then removes containers that removal left
/// empty and that nobody owns anything in.
fn prune(merged: &mut Value, last_set: &FieldSet, new_set: &FieldSet, others: &FieldSet, shape: &Shape) {
    let dropped = last_set.difference(new_set);
    if dropped.is_empty() {
        return;
    }
    let keep = new_set.union(others);
    for path in dropped.paths() {
        let path = path.elements();
        if others.contains_prefix(path) {
            continue;
        }
        if remove_at(merged, path, shape) {
            remove_emptied_ancestors(merged, path, &keep, shape);
        }
    }
}

fn remove_emptied_ancestors(merged: &mut Value, path: &[PathElement], keep: &FieldSet, shape: &Shape) {
    for len in (1..path.len()).rev() {
        let ancestor = &path[..len];
        let empty = match get_at(merged, ancestor, shape) {
            Some(Value::Object(m)) => m.is_empty(),
            Some(Value::Array(a)) => a.is_empty(),
            _ => false,
        };
        if !empty || keep.contains_prefix(ancestor) {
            return;
        }
        remove_at(merged, ancestor, shape);
    }
}

impl fmt::Display for Conflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "conflict with {}: {}", self.manager_description(), self.field)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builtin_shapes::builtin_shape;
    use crate::ssa::record_update;
    use serde_json::json;

    const T1: &str = "2024-01-01T00:00:00Z";
    const T2: &str = "2024-01-01T00:05:00Z";
    const T3: &str = "2024-01-01T00:10:00Z";

    fn mgr<'a>(name: &'a str, time: &'a str) -> Manager<'a> {
        Manager { name, api_version: "coordination.k8s.io/v1", subresource: None, time }
    }

    fn lease_shape() -> Shape {
        builtin_shape("coordination.k8s.io", "Lease").as_ref().clone()
    }

    fn lease(spec: Value) -> Value {
        json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "lock", "namespace": "default"},
            "spec": spec
        })
    }

    fn entry<'e>(entries: &'e [ManagedFieldsEntry], manager: &str) -> &'e ManagedFieldsEntry {
        entries.iter().find(|e| e.manager == manager).unwrap_or_else(|| panic!("no entry for {manager} in {entries:?}"))
    }

    fn conflicts(result: Result<(Value, Vec<ManagedFieldsEntry>), ApplyError>) -> Conflicts {
        match result {
            Err(ApplyError::Conflicts(c)) => c,
            other => panic!("expected conflicts, got {other:?}"),
        }
    }

    #[test]
    fn test_apply_creates_object_with_apply_entry() {
        let (obj, entries) = apply(
            None,
            &lease(json!({"holderIdentity": "a", "leaseDurationSeconds": 15})),
            vec![],
            &mgr("a", T1),
            false,
            &lease_shape(),
        )
        .unwrap();
        assert_eq!(obj["spec"], json!({"holderIdentity": "a", "leaseDurationSeconds": 15}));
        assert_eq!(obj["metadata"]["name"], json!("lock"));
        assert_eq!(
            obj["metadata"]["managedFields"],
            json!([{
                "manager": "a", "operation": "Apply", "apiVersion": "coordination.k8s.io/v1",
                "time": T1, "fieldsType": "FieldsV1",
                "fieldsV1": {"f:spec": {"f:holderIdentity": {}, "f:leaseDurationSeconds": {}}}
            }])
        );
        assert_eq!(entries.len(), 1);
    }

    #[test]
    fn test_lease_mutual_exclusion_second_applier_conflicts() {
        let shape = lease_shape();
        let (obj, entries) =
            apply(None, &lease(json!({"holderIdentity": "a"})), vec![], &mgr("a", T1), false, &shape).unwrap();
        let c =
            conflicts(apply(Some(&obj), &lease(json!({"holderIdentity": "b"})), entries, &mgr("b", T2), false, &shape));
        assert_eq!(c.message(), "Apply failed with 1 conflict: conflict with \"a\": .spec.holderIdentity");
        assert_eq!(c.causes(), vec![("conflict with \"a\"".to_string(), ".spec.holderIdentity".to_string())]);
        assert_eq!(c.0[0].operation, Operation::Apply);
        assert_eq!(c.to_string(), c.message());
    }

    #[test]
    fn test_applying_the_same_value_shares_ownership() {
        let shape = lease_shape();
        let (obj, entries) =
            apply(None, &lease(json!({"holderIdentity": "a"})), vec![], &mgr("a", T1), false, &shape).unwrap();
        let (obj2, entries) =
            apply(Some(&obj), &lease(json!({"holderIdentity": "a"})), entries, &mgr("b", T2), false, &shape).unwrap();
        assert_eq!(obj2["spec"], obj["spec"]);
        let owned = json!({"f:spec": {"f:holderIdentity": {}}});
        assert_eq!(entry(&entries, "a").fields().to_fields_v1(), owned);
        assert_eq!(entry(&entries, "b").fields().to_fields_v1(), owned);
    }

    #[test]
    fn test_force_moves_ownership_to_the_applier() {
        let shape = lease_shape();
        let (obj, entries) = apply(
            None,
            &lease(json!({"holderIdentity": "a", "leaseDurationSeconds": 10})),
            vec![],
            &mgr("a", T1),
            false,
            &shape,
        )
        .unwrap();
        let (obj, entries) =
            apply(Some(&obj), &lease(json!({"holderIdentity": "b"})), entries, &mgr("b", T2), true, &shape).unwrap();
        assert_eq!(obj["spec"], json!({"holderIdentity": "b", "leaseDurationSeconds": 10}));
        assert_eq!(entry(&entries, "a").fields().to_fields_v1(), json!({"f:spec": {"f:leaseDurationSeconds": {}}}));
        assert_eq!(entry(&entries, "a").time.as_deref(), Some(T1));
        assert_eq!(entry(&entries, "b").fields().to_fields_v1(), json!({"f:spec": {"f:holderIdentity": {}}}));
        // The old holder, re-applying without force, now conflicts with the new one.
        let c = conflicts(apply(
            Some(&obj),
            &lease(json!({"holderIdentity": "a", "leaseDurationSeconds": 10})),
            entries,
            &mgr("a", T3),
            false,
            &shape,
        ));
        assert_eq!(c.message(), "Apply failed with 1 conflict: conflict with \"b\": .spec.holderIdentity");
    }

    #[test]
    fn test_force_that_takes_everything_drops_the_losers_entry() {
        let shape = lease_shape();
        let (obj, entries) =
            apply(None, &lease(json!({"holderIdentity": "a"})), vec![], &mgr("a", T1), false, &shape).unwrap();
        let (_, entries) =
            apply(Some(&obj), &lease(json!({"holderIdentity": "b"})), entries, &mgr("b", T2), true, &shape).unwrap();
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0].manager, "b");
    }

    #[test]
    fn test_conflict_with_update_manager_names_its_api_version() {
        let shape = builtin_shape("example.com", "Foo").as_ref().clone();
        let foo = |x: i64| json!({"apiVersion": "example.com/v1", "kind": "Foo", "metadata": {"name": "f"}, "spec": {"x": x}});
        let creator = Manager { name: "mgr", api_version: "example.com/v1", subresource: None, time: T1 };
        let created = foo(1);
        let entries = record_update(None, &created, vec![], &creator, &shape);
        let applier = Manager { name: "applier", api_version: "example.com/v1", subresource: None, time: T2 };
        let c = conflicts(apply(Some(&created), &foo(2), entries.clone(), &applier, false, &shape));
        assert_eq!(c.message(), "Apply failed with 1 conflict: conflict with \"mgr\" using example.com/v1: .spec.x");
        assert_eq!(c.causes(), vec![("conflict with \"mgr\" using example.com/v1".to_string(), ".spec.x".to_string())]);
        // The same value is not a conflict even against an updater.
        assert!(apply(Some(&created), &foo(1), entries, &applier, false, &shape).is_ok());
    }

    #[test]
    fn test_update_takes_fields_from_an_applier_who_then_conflicts() {
        let shape = lease_shape();
        let (obj, entries) = apply(
            None,
            &lease(json!({"holderIdentity": "a", "leaseDurationSeconds": 10})),
            vec![],
            &mgr("a", T1),
            false,
            &shape,
        )
        .unwrap();
        let mut edited = obj.clone();
        edited["spec"]["leaseDurationSeconds"] = json!(30);
        let entries = record_update(Some(&obj), &edited, entries, &mgr("kubectl-edit", T2), &shape);
        assert_eq!(entry(&entries, "a").fields().to_fields_v1(), json!({"f:spec": {"f:holderIdentity": {}}}));
        let c = conflicts(apply(
            Some(&edited),
            &lease(json!({"holderIdentity": "a", "leaseDurationSeconds": 10})),
            entries.clone(),
            &mgr("a", T3),
            false,
            &shape,
        ));
        assert_eq!(
            c.message(),
            "Apply failed with 1 conflict: conflict with \"kubectl-edit\" using coordination.k8s.io/v1: \
             .spec.leaseDurationSeconds"
        );
        // Re-applying without the field it lost leaves the edited value alone.
        let (obj, _) =
            apply(Some(&edited), &lease(json!({"holderIdentity": "a"})), entries, &mgr("a", T3), false, &shape)
                .unwrap();
        assert_eq!(obj["spec"]["leaseDurationSeconds"], json!(30));
    }

    #[test]
    fn test_applier_conflicts_with_its_own_update_entry() {
        let shape = lease_shape();
        let v1 = lease(json!({"holderIdentity": "a"}));
        let entries = record_update(None, &v1, vec![], &mgr("ctl", T1), &shape);
        let c = conflicts(apply(
            Some(&v1),
            &lease(json!({"holderIdentity": "b"})),
            entries,
            &mgr("ctl", T2),
            false,
            &shape,
        ));
        assert_eq!(
            c.message(),
            "Apply failed with 1 conflict: conflict with \"ctl\" using coordination.k8s.io/v1: .spec.holderIdentity"
        );
    }

    #[test]
    fn test_multiple_conflicts_message_groups_by_manager() {
        let shape = lease_shape();
        let (obj, entries) = apply(
            None,
            &lease(json!({"holderIdentity": "a", "leaseDurationSeconds": 1})),
            vec![],
            &mgr("zeta", T1),
            false,
            &shape,
        )
        .unwrap();
        let mut updated = obj.clone();
        updated["spec"]["leaseTransitions"] = json!(3);
        let entries = record_update(Some(&obj), &updated, entries, &mgr("alpha", T2), &shape);
        let c = conflicts(apply(
            Some(&updated),
            &lease(json!({"holderIdentity": "b", "leaseDurationSeconds": 2, "leaseTransitions": 4})),
            entries,
            &mgr("new", T3),
            false,
            &shape,
        ));
        assert_eq!(
            c.message(),
            "Apply failed with 3 conflicts: conflicts with \"alpha\" using coordination.k8s.io/v1:\n\
             - .spec.leaseTransitions\nconflicts with \"zeta\":\n- .spec.holderIdentity\n\
             - .spec.leaseDurationSeconds"
        );
        assert_eq!(c.causes().len(), 3);
        assert_eq!(c.causes()[0].0, "conflict with \"alpha\" using coordination.k8s.io/v1");
        assert_eq!(c.causes()[2], ("conflict with \"zeta\"".to_string(), ".spec.leaseDurationSeconds".to_string()));
    }

    #[test]
    fn test_fields_dropped_from_config_are_removed() {
        let shape = lease_shape();
        let (obj, entries) = apply(
            None,
            &lease(json!({"holderIdentity": "a", "leaseDurationSeconds": 10})),
            vec![],
            &mgr("a", T1),
            false,
            &shape,
        )
        .unwrap();
        let (obj, entries) =
            apply(Some(&obj), &lease(json!({"holderIdentity": "a"})), entries, &mgr("a", T2), false, &shape).unwrap();
        assert_eq!(obj["spec"], json!({"holderIdentity": "a"}));
        assert_eq!(entries[0].fields().to_fields_v1(), json!({"f:spec": {"f:holderIdentity": {}}}));
        assert_eq!(entries[0].time.as_deref(), Some(T2));
    }

    #[test]
    fn test_co_owned_fields_survive_removal_from_one_config() {
        let shape = lease_shape();
        let both = lease(json!({"holderIdentity": "a", "leaseDurationSeconds": 10}));
        let (obj, entries) = apply(None, &both, vec![], &mgr("a", T1), false, &shape).unwrap();
        let (obj, entries) =
            apply(Some(&obj), &lease(json!({"leaseDurationSeconds": 10})), entries, &mgr("b", T2), false, &shape)
                .unwrap();
        // `spec: {}` would itself be owned (an empty object is a member); leave spec out.
        let bare = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "lock"}});
        let (obj, entries) = apply(Some(&obj), &bare, entries, &mgr("a", T3), false, &shape).unwrap();
        assert_eq!(obj["spec"], json!({"leaseDurationSeconds": 10}));
        assert_eq!(entries.len(), 1, "a owns nothing any more: {entries:?}");
        assert_eq!(entries[0].manager, "b");
    }

    #[test]
    fn test_removal_keeps_map_entries_of_other_managers_and_drops_emptied_maps() {
        let shape = builtin_shape("", "ConfigMap").as_ref().clone();
        let cm = |labels: Value| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "labels": labels}});
        let m = |name| Manager { name, api_version: "v1", subresource: None, time: T1 };
        let (obj, entries) = apply(None, &cm(json!({"x": "1"})), vec![], &m("a"), false, &shape).unwrap();
        let mut edited = obj.clone();
        edited["metadata"]["labels"]["z"] = json!("2");
        let entries = record_update(Some(&obj), &edited, entries, &m("editor"), &shape);
        let no_labels = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}});
        let (obj, entries) = apply(Some(&edited), &no_labels, entries, &m("a"), false, &shape).unwrap();
        assert_eq!(obj["metadata"]["labels"], json!({"z": "2"}));
        assert!(entries.iter().all(|e| e.manager == "editor"), "{entries:?}");

        // Alone, the applier's last label takes the emptied map with it.
        let (obj, entries) = apply(None, &cm(json!({"x": "1"})), vec![], &m("a"), false, &shape).unwrap();
        let (obj, entries) = apply(Some(&obj), &no_labels, entries, &m("a"), false, &shape).unwrap();
        assert_eq!(obj["metadata"], json!({"name": "c"}));
        assert!(entries.is_empty());
    }

    fn deployment(containers: Value) -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d", "namespace": "default"},
            "spec": {"template": {"spec": {"containers": containers}}}
        })
    }

    fn apps<'a>(name: &'a str, time: &'a str) -> Manager<'a> {
        Manager { name, api_version: "apps/v1", subresource: None, time }
    }

    #[test]
    fn test_list_map_items_are_owned_by_key() {
        let shape = builtin_shape("apps", "Deployment").as_ref().clone();
        let (obj, entries) = apply(
            None,
            &deployment(json!([{"name": "nginx", "image": "nginx:1"}])),
            vec![],
            &apps("a", T1),
            false,
            &shape,
        )
        .unwrap();
        assert_eq!(
            entries[0].fields().to_fields_v1(),
            json!({"f:spec": {"f:template": {"f:spec": {"f:containers": {
                "k:{\"name\":\"nginx\"}": {".": {}, "f:image": {}, "f:name": {}}
            }}}}})
        );
        let (obj, entries) = apply(
            Some(&obj),
            &deployment(json!([{"name": "sidecar", "image": "envoy"}])),
            entries,
            &apps("b", T2),
            false,
            &shape,
        )
        .unwrap();
        let names: Vec<&str> = obj["spec"]["template"]["spec"]["containers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, vec!["nginx", "sidecar"]);

        let c = conflicts(apply(
            Some(&obj),
            &deployment(json!([{"name": "nginx", "image": "nginx:2"}])),
            entries.clone(),
            &apps("b", T3),
            false,
            &shape,
        ));
        assert_eq!(
            c.message(),
            "Apply failed with 1 conflict: conflict with \"a\": .spec.template.spec.containers[name=\"nginx\"].image"
        );

        // Dropping its only item removes the item; the other applier's item stays.
        let (obj, entries) = apply(Some(&obj), &deployment(json!([])), entries, &apps("a", T3), false, &shape).unwrap();
        assert_eq!(obj["spec"]["template"]["spec"]["containers"], json!([{"name": "sidecar", "image": "envoy"}]));
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0].manager, "b");
    }

    #[test]
    fn test_container_ports_default_protocol_in_key() {
        let shape = builtin_shape("", "Pod").as_ref().clone();
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "ports": [{"containerPort": 80}]}]}});
        let m = Manager { name: "a", api_version: "v1", subresource: None, time: T1 };
        let (_, entries) = apply(None, &pod, vec![], &m, false, &shape).unwrap();
        let encoded = entries[0].fields().to_fields_v1();
        assert_eq!(
            encoded["f:spec"]["f:containers"]["k:{\"name\":\"c\"}"]["f:ports"],
            json!({"k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}}})
        );
    }

    #[test]
    fn test_set_items_are_owned_individually() {
        let shape = builtin_shape("", "ConfigMap").as_ref().clone();
        let cm =
            |f: Value| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "finalizers": f}});
        let m = |name| Manager { name, api_version: "v1", subresource: None, time: T1 };
        let (obj, entries) = apply(None, &cm(json!(["a"])), vec![], &m("one"), false, &shape).unwrap();
        let (obj, entries) = apply(Some(&obj), &cm(json!(["b"])), entries, &m("two"), false, &shape).unwrap();
        assert_eq!(obj["metadata"]["finalizers"], json!(["a", "b"]));
        assert_eq!(entry(&entries, "one").fields().paths()[0].to_string(), ".metadata.finalizers[=\"a\"]");
        let (obj, _) = apply(Some(&obj), &cm(json!([])), entries, &m("one"), false, &shape).unwrap();
        assert_eq!(obj["metadata"]["finalizers"], json!(["b"]));
    }

    #[test]
    fn test_identical_reapply_is_byte_identical() {
        let shape = lease_shape();
        let config = lease(json!({"holderIdentity": "a"}));
        let (obj, entries) = apply(None, &config, vec![], &mgr("a", T1), false, &shape).unwrap();
        let (again, entries2) = apply(Some(&obj), &config, entries.clone(), &mgr("a", T2), false, &shape).unwrap();
        assert_eq!(serde_json::to_string(&again).unwrap(), serde_json::to_string(&obj).unwrap());
        assert_eq!(entries2, entries);
        // A changed value refreshes the time.
        let (_, entries3) =
            apply(Some(&obj), &lease(json!({"holderIdentity": "b"})), entries, &mgr("a", T3), false, &shape).unwrap();
        assert_eq!(entries3[0].time.as_deref(), Some(T3));
    }

    #[test]
    fn test_server_owned_metadata_is_ignored_and_untracked() {
        let shape = lease_shape();
        let mut config = lease(json!({"holderIdentity": "a"}));
        config["metadata"]["resourceVersion"] = json!("42");
        config["metadata"]["uid"] = json!("client-uid");
        config["metadata"]["generation"] = json!(9);
        let current = json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "lock", "namespace": "default", "uid": "server-uid", "resourceVersion": "7"}
        });
        let (obj, entries) = apply(Some(&current), &config, vec![], &mgr("a", T1), false, &shape).unwrap();
        assert_eq!(obj["metadata"]["uid"], json!("server-uid"));
        assert_eq!(obj["metadata"]["resourceVersion"], json!("7"));
        assert!(obj["metadata"].get("generation").is_none());
        assert_eq!(entries[0].fields().to_fields_v1(), json!({"f:spec": {"f:holderIdentity": {}}}));
    }

    #[test]
    fn test_ignored_fields_never_conflict() {
        let shape = lease_shape();
        let mut bogus = ManagedFieldsEntry::new(&mgr("other", T1), Operation::Update, FieldSet::new());
        bogus.fields_v1 =
            Some(FieldSet::from_fields_v1(&json!({"f:apiVersion": {}, "f:metadata": {"f:name": {}}})).unwrap());
        let current = lease(json!({}));
        let mut config = lease(json!({}));
        config["apiVersion"] = json!("coordination.k8s.io/v2");
        let result = apply(Some(&current), &config, vec![bogus], &mgr("a", T1), false, &shape);
        assert!(result.is_ok(), "{result:?}");
    }

    #[test]
    fn test_managed_fields_in_body_is_rejected() {
        let mut config = lease(json!({}));
        config["metadata"]["managedFields"] = json!([]);
        let err = apply(None, &config, vec![], &mgr("a", T1), false, &lease_shape()).unwrap_err();
        assert!(matches!(&err, ApplyError::BadRequest(m) if m == "metadata.managedFields must be nil"), "{err:?}");
        config["metadata"]["managedFields"] = Value::Null;
        assert!(apply(None, &config, vec![], &mgr("a", T1), false, &lease_shape()).is_ok());
    }

    #[test]
    fn test_non_object_body_is_rejected() {
        let err = apply(None, &json!([1]), vec![], &mgr("a", T1), false, &lease_shape()).unwrap_err();
        assert!(matches!(err, ApplyError::BadRequest(_)));
    }

    #[test]
    fn test_keyed_item_without_key_is_invalid() {
        let shape = builtin_shape("", "Pod").as_ref().clone();
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"image": "nginx"}]}});
        let m = Manager { name: "a", api_version: "v1", subresource: None, time: T1 };
        let err = apply(None, &pod, vec![], &m, false, &shape).unwrap_err();
        assert_eq!(
            err.to_string(),
            ".spec.containers: element 0: associative list with keys has an element that omits key \
             field \"name\" (and doesn't have default value)"
        );
        assert!(matches!(err, ApplyError::Invalid(_)));
    }

    #[test]
    fn test_deeply_nested_body_is_rejected() {
        let mut deep = json!(1);
        for _ in 0..300 {
            deep = json!({ "a": deep });
        }
        let config = lease(deep);
        let err = apply(None, &config, vec![], &mgr("a", T1), false, &lease_shape()).unwrap_err();
        assert!(matches!(err, ApplyError::BadRequest(ref m) if m.contains("deeper")), "{err:?}");
    }

    #[test]
    fn test_null_removes_field_and_is_owned() {
        let shape = lease_shape();
        let (obj, entries) = apply(
            None,
            &lease(json!({"holderIdentity": "a", "leaseDurationSeconds": 10})),
            vec![],
            &mgr("a", T1),
            false,
            &shape,
        )
        .unwrap();
        let c = conflicts(apply(
            Some(&obj),
            &lease(json!({"holderIdentity": null})),
            entries.clone(),
            &mgr("b", T2),
            false,
            &shape,
        ));
        assert_eq!(c.0[0].field, ".spec.holderIdentity");
        let (obj, entries) =
            apply(Some(&obj), &lease(json!({"holderIdentity": null})), entries, &mgr("b", T2), true, &shape).unwrap();
        assert_eq!(obj["spec"], json!({"leaseDurationSeconds": 10}));
        assert_eq!(entry(&entries, "b").fields().to_fields_v1(), json!({"f:spec": {"f:holderIdentity": {}}}));
    }

    #[test]
    fn test_status_subresource_entry_and_description() {
        let shape = builtin_shape("apps", "Deployment").as_ref().clone();
        let status = |n: i64| json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "status": {"replicas": n}});
        let st = Manager { name: "ctrl", api_version: "apps/v1", subresource: Some("status"), time: T1 };
        let (obj, entries) = apply(Some(&json!({})), &status(1), vec![], &st, false, &shape).unwrap();
        assert_eq!(entries[0].subresource.as_deref(), Some("status"));
        let main = Manager { subresource: None, ..st };
        let c = conflicts(apply(Some(&obj), &status(2), entries, &main, false, &shape));
        assert_eq!(
            c.message(),
            "Apply failed with 1 conflict: conflict with \"ctrl\" with subresource \"status\": .status.replicas"
        );
    }

    #[test]
    fn test_empty_config_drops_the_appliers_fields_and_entry() {
        let shape = lease_shape();
        let (obj, entries) =
            apply(None, &lease(json!({"holderIdentity": "a"})), vec![], &mgr("a", T1), false, &shape).unwrap();
        let bare = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "lock"}});
        let (obj, entries) = apply(Some(&obj), &bare, entries, &mgr("a", T2), false, &shape).unwrap();
        assert!(entries.is_empty());
        assert!(obj.get("spec").is_none(), "{obj}");
        assert!(obj["metadata"].get("managedFields").is_none());
    }

    #[test]
    fn test_untyped_content_marks_objects_as_members() {
        let shape = builtin_shape("example.com", "Foo").as_ref().clone();
        let foo = json!({"apiVersion": "example.com/v1", "kind": "Foo", "metadata": {"name": "f"},
            "spec": {"a": {"b": 1}, "list": [1, 2]}});
        let m = Manager { name: "a", api_version: "example.com/v1", subresource: None, time: T1 };
        let (_, entries) = apply(None, &foo, vec![], &m, false, &shape).unwrap();
        assert_eq!(
            entries[0].fields().to_fields_v1(),
            json!({"f:spec": {".": {}, "f:a": {".": {}, "f:b": {}}, "f:list": {}}})
        );
    }
}

//! `metadata.managedFields` entries and the bookkeeping of non-apply writes.
//!
//! Follows apimachinery's `util/managedfields/internal` package: entries are identified as
//! `BuildManagerIdentifier` does (manager, operation, subresource, and for `Update` entries
//! also the apiVersion), decoded with `DecodeManagedFields`' checks, sorted as
//! `sortEncodedManagedFields` sorts them, and an `Update` is recorded as structured-merge-diff's
//! `Updater.Update` plus `managedFieldsUpdater` record it.

use std::str::FromStr;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::fieldset::{FieldSet, PathElement};
use super::typed::{compare, depth_exceeds};
use super::{MAX_DEPTH, Manager};
use crate::shape::Shape;

/// The only `fieldsType` kube-apiserver knows.
pub const FIELDS_TYPE_V1: &str = "FieldsV1";

/// How the fields of an entry came to be owned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Operation {
    /// Server-side apply (`application/apply-patch+yaml`).
    Apply,
    /// Any other write: create, update, JSON/merge/strategic patch.
    Update,
}

impl Operation {
    /// The wire name (`"Apply"` or `"Update"`).
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Apply => "Apply",
            Operation::Update => "Update",
        }
    }
}

/// One `metadata.managedFields` entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ManagedFieldsEntry {
    /// The field manager (`fieldManager` query parameter, or the User-Agent prefix).
    #[serde(default)]
    pub manager: String,
    /// Apply or Update.
    pub operation: Operation,
    /// apiVersion of the object as the manager wrote it.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    /// When the manager last changed the object (RFC 3339, seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<String>,
    /// Always [`FIELDS_TYPE_V1`].
    #[serde(default = "fields_type_v1")]
    pub fields_type: String,
    /// The owned fields.
    #[serde(rename = "fieldsV1", default, skip_serializing_if = "Option::is_none")]
    pub fields_v1: Option<FieldSet>,
    /// `status`, `scale`, ... when the write went to a subresource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subresource: Option<String>,
}

fn fields_type_v1() -> String {
    FIELDS_TYPE_V1.to_string()
}

impl ManagedFieldsEntry {
    /// A new entry owning `set`.
    pub fn new(manager: &Manager<'_>, operation: Operation, set: FieldSet) -> Self {
        ManagedFieldsEntry {
            manager: manager.name.to_string(),
            operation,
            api_version: manager.api_version.to_string(),
            time: Some(manager.time.to_string()),
            fields_type: fields_type_v1(),
            fields_v1: Some(set),
            subresource: manager.subresource.filter(|s| !s.is_empty()).map(str::to_string),
        }
    }

    /// The owned fields (empty when `fieldsV1` is absent).
    pub fn fields(&self) -> FieldSet {
        self.fields_v1.clone().unwrap_or_default()
    }

    /// Whether the entry owns nothing.
    pub fn is_empty(&self) -> bool {
        self.fields_v1.as_ref().is_none_or(FieldSet::is_empty)
    }

    fn subresource_str(&self) -> &str {
        self.subresource.as_deref().unwrap_or("")
    }

    /// Whether this entry is the one `manager` writes with `operation`.
    ///
    /// apiserver's `BuildManagerIdentifier` keys entries by manager, operation and subresource,
    /// and `Update` entries additionally by apiVersion (so an appliers' entry survives version
    /// changes, while updates through different versions are tracked separately).
    pub fn is_for(&self, manager: &Manager<'_>, operation: Operation) -> bool {
        self.manager == manager.name
            && self.operation == operation
            && self.subresource_str() == manager.subresource.unwrap_or("")
            && (operation == Operation::Apply || self.api_version == manager.api_version)
    }

    /// Same identity as [`Self::is_for`], between two entries.
    fn same_identity(&self, other: &ManagedFieldsEntry) -> bool {
        self.manager == other.manager
            && self.operation == other.operation
            && self.subresource_str() == other.subresource_str()
            && (self.operation == Operation::Apply || self.api_version == other.api_version)
    }

    /// The manager identifier apiserver uses to name this entry in conflict messages: the JSON
    /// of the entry without fields, fieldsType and time, and without apiVersion for appliers.
    pub(crate) fn identifier(&self) -> String {
        let mut out =
            format!("{{\"manager\":{},\"operation\":\"{}\"", json_string(&self.manager), self.operation.as_str());
        if self.operation == Operation::Update && !self.api_version.is_empty() {
            out.push_str(&format!(",\"apiVersion\":{}", json_string(&self.api_version)));
        }
        if let Some(sub) = self.subresource.as_deref().filter(|s| !s.is_empty()) {
            out.push_str(&format!(",\"subresource\":{}", json_string(sub)));
        }
        out.push('}');
        out
    }
}

fn json_string(s: &str) -> String {
    Value::String(s.to_string()).to_string()
}

/// Paths no manager ever owns: identity and server-maintained metadata. apiserver's
/// `stripMetaManager` removes the same ones (plus `deletionTimestamp` and
/// `deletionGracePeriodSeconds` here, which only the server sets).
const IGNORED_TOP: &[&str] = &["apiVersion", "kind"];
const IGNORED_METADATA: &[&str] = &[
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
];

/// Removes the never-tracked paths from a set, and `.metadata` itself (its children stay).
pub(crate) fn strip_ignored(set: &mut FieldSet) {
    for name in IGNORED_TOP {
        set.remove_prefix(&[PathElement::field(*name)]);
    }
    for name in IGNORED_METADATA {
        set.remove_prefix(&[PathElement::field("metadata"), PathElement::field(*name)]);
    }
    set.remove(&[PathElement::field("metadata")]);
}

/// Metadata fields the server owns; an applied configuration cannot set them.
pub(crate) const SERVER_METADATA: &[&str] = &[
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
];

/// Sorts entries as apiserver encodes them: Apply before Update, then by time (seconds),
/// manager, apiVersion and subresource. The order is a function of the entries alone, so
/// rewriting the same entries yields the same bytes.
pub(crate) fn sort_entries(entries: &mut [ManagedFieldsEntry]) {
    fn seconds(e: &ManagedFieldsEntry) -> i64 {
        e.time.as_deref().and_then(|t| jiff::Timestamp::from_str(t).ok()).map_or(0, |t| t.as_second())
    }
    entries.sort_by(|p, q| {
        p.operation
            .cmp(&q.operation)
            .then_with(|| seconds(p).cmp(&seconds(q)))
            .then_with(|| p.manager.cmp(&q.manager))
            .then_with(|| p.api_version.cmp(&q.api_version))
            .then_with(|| p.subresource_str().cmp(q.subresource_str()))
    });
}

/// Parses `metadata.managedFields` with the checks of apiserver's `DecodeManagedFields`.
///
/// `null` (or an absent field) is no entries. Entries with the same identity collapse into
/// the last one, as they do when apiserver decodes them into a map.
pub fn parse_entries(value: &Value) -> Result<Vec<ManagedFieldsEntry>, String> {
    let items = match value {
        Value::Null => return Ok(Vec::new()),
        Value::Array(items) => items,
        _ => return Err("managedFields must be a list".to_string()),
    };
    let mut out: Vec<ManagedFieldsEntry> = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let entry = parse_entry(i, item)?;
        match out.iter_mut().find(|e| e.same_identity(&entry)) {
            Some(existing) => *existing = entry,
            None => out.push(entry),
        }
    }
    Ok(out)
}

fn parse_entry(i: usize, item: &Value) -> Result<ManagedFieldsEntry, String> {
    let Value::Object(object) = item else {
        return Err(format!("managed fields entry {i} must be an object"));
    };
    let string = |key: &str| -> Result<Option<String>, String> {
        match object.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(format!("{key} in managed fields entry {i} must be a string")),
        }
    };
    let operation = match string("operation")?.as_deref() {
        Some("Apply") => Operation::Apply,
        Some("Update") => Operation::Update,
        _ => return Err("operation must be `Apply` or `Update`".to_string()),
    };
    let api_version = string("apiVersion")?.unwrap_or_default();
    if api_version.is_empty() {
        return Err("apiVersion must not be empty".to_string());
    }
    match string("fieldsType")?.as_deref() {
        Some(FIELDS_TYPE_V1) => {}
        None | Some("") => return Err(format!("missing fieldsType in managed fields entry {i}")),
        Some(other) => {
            return Err(format!("invalid fieldsType {other:?} in managed fields entry {i}"));
        }
    }
    let fields = match object.get("fieldsV1") {
        None => FieldSet::new(),
        Some(v) => FieldSet::from_fields_v1(v)
            .map_err(|e| format!("error decoding fieldsV1 of managed fields entry {i}: {e}"))?,
    };
    Ok(ManagedFieldsEntry {
        manager: string("manager")?.unwrap_or_default(),
        operation,
        api_version,
        time: string("time")?,
        fields_type: fields_type_v1(),
        fields_v1: Some(fields),
        subresource: string("subresource")?.filter(|s| !s.is_empty()),
    })
}

/// Chooses the entries a non-apply write starts from, as apiserver's `FieldManager.Update`
/// does, given the `metadata.managedFields` the client sent (`sent`, taken from the object
/// the write produced) and the stored entries (`live`):
///
/// * writes to a subresource, and bodies without managedFields (absent, `null`, `[]`) keep
///   the stored entries, so clients unaware of managedFields cannot wipe them;
/// * `[{}]` (only empty entries) resets ownership: the write starts from no entries (I8);
/// * otherwise the client's entries are used if they decode, else the stored ones.
///
/// Pass the result to [`record_update`] as `managed`.
pub fn entries_for_update(
    sent: Option<&Value>,
    live: &[ManagedFieldsEntry],
    is_subresource: bool,
) -> Vec<ManagedFieldsEntry> {
    if is_subresource {
        return live.to_vec();
    }
    match sent {
        None | Some(Value::Null) => live.to_vec(),
        Some(Value::Array(items)) if items.is_empty() => live.to_vec(),
        Some(Value::Array(items)) if items.iter().all(|i| i.as_object().is_some_and(Map::is_empty)) => Vec::new(),
        Some(value) => match parse_entries(value) {
            Ok(entries) if !entries.is_empty() => entries,
            _ => live.to_vec(),
        },
    }
}

/// Stores `entries` as `metadata.managedFields` of `object`, or removes the field when there
/// are none (apiserver never stores an empty list).
pub fn write_entries(object: &mut Value, entries: &[ManagedFieldsEntry]) {
    let Value::Object(root) = object else { return };
    if entries.is_empty() {
        if let Some(Value::Object(metadata)) = root.get_mut("metadata") {
            metadata.remove("managedFields");
        }
        return;
    }
    let metadata = root.entry("metadata").or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(metadata) = metadata {
        let encoded = entries.iter().filter_map(|e| serde_json::to_value(e).ok()).collect();
        metadata.insert("managedFields".to_string(), Value::Array(encoded));
    }
}

/// Records a non-apply write (create, update, any non-apply patch) by `manager`.
///
/// `old` is the stored object (`None` on create), `new` the object about to be stored;
/// their `metadata.managedFields` are ignored. Following structured-merge-diff's
/// `Updater.Update`:
///
/// * fields added or changed by the write are taken by `manager`'s `Update` entry and
///   removed from every other entry (updates never conflict);
/// * fields the write removed are removed from every entry;
/// * the manager's entry gets a new time (and is created) only when the write added or
///   changed something, so identical re-writes leave the entries byte-identical (C8);
/// * entries left owning nothing are dropped, and the rest are sorted as apiserver sorts them.
///
/// Objects nested deeper than [`super::MAX_DEPTH`] are not walked; the entries are then
/// returned unchanged (the server rejects such bodies before they get here).
pub fn record_update(
    old: Option<&Value>,
    new: &Value,
    managed: Vec<ManagedFieldsEntry>,
    manager: &Manager<'_>,
    shape: &Shape,
) -> Vec<ManagedFieldsEntry> {
    let mut managed = managed;
    let empty = Value::Object(Map::new());
    let old = old.unwrap_or(&empty);
    if depth_exceeds(old, MAX_DEPTH) || depth_exceeds(new, MAX_DEPTH) {
        sort_entries(&mut managed);
        return managed;
    }
    let mut comparison = compare(old, new, shape);
    comparison.filter(strip_ignored);
    let taken = comparison.added.union(&comparison.modified);
    let removed = comparison.removed;

    let mut found = false;
    for entry in &mut managed {
        let set = entry.fields();
        if entry.is_for(manager, Operation::Update) {
            found = true;
            let updated = set.difference(&removed).union(&taken);
            if !taken.is_empty() {
                entry.time = Some(manager.time.to_string());
            }
            if updated != set {
                entry.fields_v1 = Some(updated);
            }
        } else {
            let updated = set.difference(&taken).difference(&removed);
            if updated != set {
                entry.fields_v1 = Some(updated);
            }
        }
    }
    if !found && !taken.is_empty() {
        managed.push(ManagedFieldsEntry::new(manager, Operation::Update, taken));
    }
    managed.retain(|e| !e.is_empty());
    sort_entries(&mut managed);
    managed
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const T1: &str = "2024-01-01T00:00:00Z";
    const T2: &str = "2024-01-01T00:01:00Z";

    fn mgr<'a>(name: &'a str, time: &'a str) -> Manager<'a> {
        Manager { name, api_version: "v1", subresource: None, time }
    }

    fn cm_shape() -> Shape {
        crate::builtin_shapes::builtin_shape("", "ConfigMap").as_ref().clone()
    }

    fn fields(entry: &ManagedFieldsEntry) -> Value {
        entry.fields().to_fields_v1()
    }

    #[test]
    fn test_update_on_create_records_all_fields() {
        let new = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "namespace": "ns", "uid": "u", "labels": {"app": "x"}},
            "data": {"k": "v"}
        });
        let out = record_update(None, &new, vec![], &mgr("kubectl-create", T1), &cm_shape());
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].operation, Operation::Update);
        assert_eq!(out[0].manager, "kubectl-create");
        assert_eq!(out[0].time.as_deref(), Some(T1));
        assert_eq!(
            fields(&out[0]),
            json!({"f:data": {".": {}, "f:k": {}}, "f:metadata": {"f:labels": {".": {}, "f:app": {}}}})
        );
    }

    #[test]
    fn test_update_on_change_takes_fields_from_other_managers() {
        let shape = cm_shape();
        let v1 = json!({"metadata": {"name": "a"}, "data": {"k": "v", "j": "w"}});
        let first = record_update(None, &v1, vec![], &mgr("one", T1), &shape);
        let v2 = json!({"metadata": {"name": "a"}, "data": {"k": "changed", "j": "w"}});
        let out = record_update(Some(&v1), &v2, first, &mgr("two", T2), &shape);
        assert_eq!(out.len(), 2);
        let one = out.iter().find(|e| e.manager == "one").unwrap();
        let two = out.iter().find(|e| e.manager == "two").unwrap();
        assert_eq!(fields(one), json!({"f:data": {".": {}, "f:j": {}}}));
        assert_eq!(fields(two), json!({"f:data": {"f:k": {}}}));
        assert_eq!(one.time.as_deref(), Some(T1), "losing fields does not touch the time");
    }

    #[test]
    fn test_update_removing_fields_drops_them_everywhere_and_empty_entries() {
        let shape = cm_shape();
        let v1 = json!({"metadata": {"name": "a"}, "data": {"k": "v"}});
        let first = record_update(None, &v1, vec![], &mgr("one", T1), &shape);
        let v2 = json!({"metadata": {"name": "a"}});
        let out = record_update(Some(&v1), &v2, first, &mgr("two", T2), &shape);
        assert!(out.is_empty(), "{out:?}");
    }

    #[test]
    fn test_identical_rewrite_leaves_entries_byte_identical() {
        let shape = cm_shape();
        let v1 = json!({"metadata": {"name": "a"}, "data": {"k": "v"}});
        let first = record_update(None, &v1, vec![], &mgr("one", T1), &shape);
        let again = record_update(Some(&v1), &v1, first.clone(), &mgr("one", T2), &shape);
        assert_eq!(serde_json::to_string(&again).unwrap(), serde_json::to_string(&first).unwrap());
        let other = record_update(Some(&v1), &v1, first.clone(), &mgr("two", T2), &shape);
        assert_eq!(other, first, "a no-op write by another manager creates no entry");
    }

    #[test]
    fn test_update_refreshes_time_when_fields_change() {
        let shape = cm_shape();
        let v1 = json!({"metadata": {"name": "a"}, "data": {"k": "v"}});
        let first = record_update(None, &v1, vec![], &mgr("one", T1), &shape);
        let v2 = json!({"metadata": {"name": "a"}, "data": {"k": "w"}});
        let out = record_update(Some(&v1), &v2, first, &mgr("one", T2), &shape);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].time.as_deref(), Some(T2));
    }

    #[test]
    fn test_managed_fields_and_identity_are_never_tracked() {
        let shape = cm_shape();
        let v1 = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}});
        let v2 = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "resourceVersion": "5", "generation": 2,
                         "managedFields": [{"manager": "x"}], "creationTimestamp": T1}
        });
        assert!(record_update(Some(&v1), &v2, vec![], &mgr("m", T1), &shape).is_empty());
    }

    #[test]
    fn test_update_entries_are_keyed_by_subresource() {
        let shape = Shape::Untyped;
        let v1 = json!({"spec": {"a": 1}});
        let main = record_update(None, &v1, vec![], &mgr("ctl", T1), &shape);
        let v2 = json!({"spec": {"a": 1}, "status": {"ready": true}});
        let status_mgr = Manager { subresource: Some("status"), ..mgr("ctl", T2) };
        let out = record_update(Some(&v1), &v2, main, &status_mgr, &shape);
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].subresource, None);
        assert_eq!(out[1].subresource.as_deref(), Some("status"));
        let encoded = serde_json::to_value(&out[1]).unwrap();
        assert_eq!(encoded["subresource"], json!("status"));
        assert_eq!(encoded["fieldsV1"], json!({"f:status": {".": {}, "f:ready": {}}}));
    }

    #[test]
    fn test_entries_are_sorted_like_apiserver() {
        let e = |m: &str, op: Operation, t: &str| ManagedFieldsEntry {
            manager: m.to_string(),
            operation: op,
            api_version: "v1".to_string(),
            time: Some(t.to_string()),
            fields_type: fields_type_v1(),
            fields_v1: None,
            subresource: None,
        };
        let mut entries = vec![
            e("b", Operation::Update, T1),
            e("z", Operation::Apply, T2),
            e("a", Operation::Update, T2),
            e("a", Operation::Update, T1),
            e("y", Operation::Apply, T1),
        ];
        sort_entries(&mut entries);
        let order: Vec<(&str, Operation)> = entries.iter().map(|e| (e.manager.as_str(), e.operation)).collect();
        assert_eq!(
            order,
            vec![
                ("y", Operation::Apply),
                ("z", Operation::Apply),
                ("a", Operation::Update),
                ("b", Operation::Update),
                ("a", Operation::Update),
            ]
        );
    }

    #[test]
    fn test_parse_entries_round_trips_and_validates() {
        let wire = json!([{
            "manager": "kubectl", "operation": "Apply", "apiVersion": "v1", "time": T1,
            "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {"f:k": {}}}
        }]);
        let entries = parse_entries(&wire).unwrap();
        assert_eq!(serde_json::to_value(&entries).unwrap(), wire);
        assert!(parse_entries(&Value::Null).unwrap().is_empty());

        let bad = |v: Value| parse_entries(&v).unwrap_err();
        assert_eq!(bad(json!({})), "managedFields must be a list");
        assert_eq!(bad(json!([{}])), "operation must be `Apply` or `Update`");
        assert_eq!(bad(json!([{"operation": "Apply"}])), "apiVersion must not be empty");
        assert_eq!(
            bad(json!([{"operation": "Apply", "apiVersion": "v1"}])),
            "missing fieldsType in managed fields entry 0"
        );
        assert_eq!(
            bad(json!([{"operation": "Apply", "apiVersion": "v1", "fieldsType": "FieldsV2"}])),
            "invalid fieldsType \"FieldsV2\" in managed fields entry 0"
        );
        assert!(
            bad(json!([{"operation": "Apply", "apiVersion": "v1", "fieldsType": "FieldsV1",
                             "fieldsV1": {"bad": {}}}]))
            .contains("entry 0")
        );
        assert!(bad(json!([{"operation": "Apply", "apiVersion": 1}])).contains("must be a string"));
        assert!(bad(json!([1])).contains("must be an object"));
    }

    #[test]
    fn test_parse_entries_collapses_duplicate_identities() {
        let wire = json!([
            {"manager": "m", "operation": "Apply", "apiVersion": "v1", "fieldsType": "FieldsV1", "fieldsV1": {"f:a": {}}},
            {"manager": "m", "operation": "Apply", "apiVersion": "v2", "fieldsType": "FieldsV1", "fieldsV1": {"f:b": {}}}
        ]);
        let entries = parse_entries(&wire).unwrap();
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0].api_version, "v2");
    }

    #[test]
    fn test_entries_for_update_reset_and_keep_rules() {
        let live = parse_entries(&json!([{
            "manager": "m", "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1",
            "fieldsV1": {"f:data": {"f:k": {}}}
        }]))
        .unwrap();
        assert_eq!(entries_for_update(None, &live, false), live);
        assert_eq!(entries_for_update(Some(&json!([])), &live, false), live);
        assert_eq!(entries_for_update(Some(&Value::Null), &live, false), live);
        assert!(entries_for_update(Some(&json!([{}])), &live, false).is_empty());
        assert_eq!(entries_for_update(Some(&json!([{}])), &live, true), live, "subresources keep");
        assert_eq!(entries_for_update(Some(&json!([{"operation": "Bogus"}])), &live, false), live);
        let sent = json!([{"manager": "other", "operation": "Update", "apiVersion": "v1",
                           "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {}}}]);
        assert_eq!(entries_for_update(Some(&sent), &live, false)[0].manager, "other");
    }

    #[test]
    fn test_write_entries_sets_or_removes() {
        let mut obj = json!({"metadata": {"name": "a", "managedFields": []}});
        write_entries(&mut obj, &[]);
        assert_eq!(obj, json!({"metadata": {"name": "a"}}));
        let entry = ManagedFieldsEntry::new(&mgr("m", T1), Operation::Update, FieldSet::new());
        write_entries(&mut obj, std::slice::from_ref(&entry));
        assert_eq!(obj["metadata"]["managedFields"][0]["manager"], json!("m"));
        assert_eq!(obj["metadata"]["managedFields"][0]["fieldsType"], json!("FieldsV1"));
    }

    #[test]
    fn test_identifier_matches_apiserver_json() {
        let mut e = ManagedFieldsEntry::new(&mgr("m", T1), Operation::Update, FieldSet::new());
        assert_eq!(e.identifier(), r#"{"manager":"m","operation":"Update","apiVersion":"v1"}"#);
        e.operation = Operation::Apply;
        e.subresource = Some("status".to_string());
        assert_eq!(e.identifier(), r#"{"manager":"m","operation":"Apply","subresource":"status"}"#);
    }
}

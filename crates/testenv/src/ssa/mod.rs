//! Server-side apply and `metadata.managedFields`, as pure functions over JSON objects.
//!
//! This is a port of the parts of `sigs.k8s.io/structured-merge-diff/v4` (field paths, typed
//! merge and comparison, conflicts) and of apiserver's field manager
//! (`k8s.io/apimachinery/pkg/util/managedfields/internal`) that clients can observe. Types are
//! described by [`crate::shape::Shape`]: CRD structural schemas and the upstream Go markers
//! transcribed in [`crate::builtin_shapes`].
//!
//! # Ownership model
//!
//! Every write records which *manager* owns which fields, as a set of paths ([`FieldSet`])
//! per `metadata.managedFields` entry. Entries are identified by manager name, operation
//! (`Apply` or `Update`) and subresource, and for `Update` also by apiVersion, exactly as
//! apiserver's `BuildManagerIdentifier` keys them.
//!
//! * Non-apply writes (create, update, JSON/merge/strategic patch) go through
//!   [`record_update`]: added or changed fields move to the writer's `Update` entry, removed
//!   fields leave every entry. Updates never conflict.
//! * Apply ([`apply()`]) merges the configuration into the object per shape; the applier then
//!   owns exactly the fields of its configuration. Changing a field another manager owns is a
//!   conflict unless forced; applying the value it already has shares ownership. Fields the
//!   applier stops applying are removed unless someone else owns them.
//! * `apiVersion`, `kind`, `metadata.name`, `metadata.namespace`, `metadata.uid`,
//!   `metadata.resourceVersion`, `metadata.generation`, `metadata.creationTimestamp`,
//!   `metadata.deletionTimestamp`, `metadata.deletionGracePeriodSeconds`,
//!   `metadata.managedFields` and `metadata.selfLink` are never tracked and never conflict.
//!
//! # How the write path uses this module
//!
//! * **Create / update / non-apply patch**: resolve the manager with
//!   [`manager_or_user_agent`] (and [`validate_manager`] when a `fieldManager` was given), pick
//!   the starting entries with [`entries_for_update`] (this implements the I8 rule: a body
//!   with `managedFields: [{}]` resets ownership, `[]` or no field keeps the stored entries),
//!   call [`record_update`] with the stored and the new object, and store the result with
//!   [`write_entries`]. On create the stored entries are `&[]`, so managedFields sent with a
//!   new object are kept when they decode, as apiserver keeps them.
//! * **Apply**: require a `fieldManager` ([`validate_manager`]), check the body's
//!   apiVersion/kind/name and the `metadata.resourceVersion` precondition, strip `status` when
//!   the kind has a status subresource (or pass only `status` with `subresource:
//!   Some("status")` for `/status`), then call [`apply()`] with the stored entries
//!   ([`parse_entries`] of the stored `metadata.managedFields`). [`ApplyError::Conflicts`]
//!   becomes a 409 whose message and causes come from [`Conflicts::message`] and
//!   [`Conflicts::causes`].
//! * **No-op rule (C8)**: entry times change only when the write changed something, and the
//!   entries are always sorted the same way, so a write that changes nothing produces
//!   byte-identical `managedFields` and the caller's "stored bytes unchanged" check holds.
//!
//! # Limits
//!
//! Values nested deeper than [`MAX_DEPTH`] levels are rejected by [`apply()`] and left
//! untracked by [`record_update`]. The walkers recurse once per level, so nothing deeper is
//! ever walked.

mod apply;
mod fieldset;
mod managed;
mod typed;

pub use apply::{ApplyError, Conflict, Conflicts, apply};
pub use fieldset::{FieldPath, FieldSet, PathElement};
pub use managed::{
    FIELDS_TYPE_V1, ManagedFieldsEntry, Operation, entries_for_update, parse_entries, record_update, write_entries,
};

/// Deepest JSON nesting (objects and arrays) the module walks.
pub const MAX_DEPTH: usize = 256;

/// apiserver's `FieldManagerMaxLength`.
pub const FIELD_MANAGER_MAX_LENGTH: usize = 128;

/// Who is writing, and when.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Manager<'a> {
    /// The field manager name.
    pub name: &'a str,
    /// apiVersion of the request (`v1`, `apps/v1`, `example.com/v1`).
    pub api_version: &'a str,
    /// The subresource written (`Some("status")`), `None` for the main resource.
    pub subresource: Option<&'a str>,
    /// The write's timestamp, RFC 3339 with seconds (`2024-01-01T00:00:00Z`).
    pub time: &'a str,
}

/// Go's `unicode.IsPrint`, near enough: graphic characters and the ASCII space.
fn is_print(c: char) -> bool {
    c == ' ' || !(c.is_control() || c.is_whitespace() || is_format_char(c))
}

/// Unicode format characters (category Cf) that are not printable, the common ones.
fn is_format_char(c: char) -> bool {
    matches!(c, '\u{00AD}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{2064}' | '\u{FEFF}')
}

/// Validates a `fieldManager` as apiserver does for apply patches: required, at most 128
/// bytes, printable characters only. The error is the field error text apiserver puts in
/// its 422 (`fieldManager: Required value: is required for apply patch`, ...).
///
/// For non-apply writes an empty `fieldManager` means "derive it from the User-Agent"
/// ([`manager_or_user_agent`]); call this only when one was given.
pub fn validate_manager(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("fieldManager: Required value: is required for apply patch".to_string());
    }
    if name.len() > FIELD_MANAGER_MAX_LENGTH {
        return Err(format!("fieldManager: Too long: may not be more than {FIELD_MANAGER_MAX_LENGTH} bytes"));
    }
    if let Some((position, c)) = name.char_indices().find(|(_, c)| !is_print(*c)) {
        return Err(format!(
            "fieldManager: Invalid value: {}: invalid character U+{:04X} (at position {position})",
            serde_json::Value::String(name.to_string()),
            u32::from(c)
        ));
    }
    Ok(())
}

/// The manager of a non-apply write: the `fieldManager` parameter when given, else the
/// User-Agent up to its first `/`, without unprintable characters and cut to 128 bytes
/// (apiserver's `managerOrUserAgent`). kube-rs sends `kube-rs/<version>`, kubectl
/// `kubectl/v1.32.4 (linux/amd64) kubernetes/...`.
pub fn manager_or_user_agent(field_manager: Option<&str>, user_agent: &str) -> String {
    if let Some(manager) = field_manager.filter(|m| !m.is_empty()) {
        return manager.to_string();
    }
    let prefix = user_agent.split('/').next().unwrap_or_default();
    let mut out = String::new();
    for c in prefix.chars().filter(|c| is_print(*c)) {
        if out.len() + c.len_utf8() > FIELD_MANAGER_MAX_LENGTH {
            break;
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_validate_manager_accepts_ordinary_names() {
        assert_eq!(validate_manager("kubectl"), Ok(()));
        assert_eq!(validate_manager("my controller/v1 (é)"), Ok(()));
        assert_eq!(validate_manager(&"a".repeat(128)), Ok(()));
    }

    #[test]
    fn test_validate_manager_rejects_empty_long_and_unprintable() {
        assert_eq!(validate_manager(""), Err("fieldManager: Required value: is required for apply patch".to_string()));
        assert_eq!(
            validate_manager(&"a".repeat(129)),
            Err("fieldManager: Too long: may not be more than 128 bytes".to_string())
        );
        assert_eq!(
            validate_manager("a\u{7}b"),
            Err("fieldManager: Invalid value: \"a\\u0007b\": invalid character U+0007 (at position 1)".to_string())
        );
        assert!(validate_manager("a\tb").is_err());
        assert!(validate_manager("a\u{200B}").is_err());
    }

    #[test]
    fn test_manager_or_user_agent_prefers_field_manager() {
        assert_eq!(manager_or_user_agent(Some("mine"), "kubectl/v1.32.4"), "mine");
        assert_eq!(manager_or_user_agent(Some(""), "kubectl/v1.32.4 (linux/amd64)"), "kubectl");
        assert_eq!(manager_or_user_agent(None, "kube-rs/1.0"), "kube-rs");
        assert_eq!(manager_or_user_agent(None, "a\u{1}b/x"), "ab");
        assert_eq!(manager_or_user_agent(None, &"é".repeat(100)).len(), 128);
        assert_eq!(manager_or_user_agent(None, ""), "");
    }
}

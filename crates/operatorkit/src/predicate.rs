//! Which watch events start a reconcile, and which objects are paused.
//!
//! # Change detection
//!
//! Writing status triggered a full reconcile in Go operatorkit (no generation predicate), and a
//! status write by the reconcile itself then triggered another one. Here the watch passes through
//! a change filter with [`change_hash`]: an event starts a reconcile only if one of these changed
//! since the last event of that object while it stayed in the watch (an object that leaves the
//! watch, as a sharded object moved to another shard does, is forgotten, so its return counts):
//!
//! * `metadata.generation` (the API server bumps it on spec changes only), or, for kinds without
//!   a generation such as ConfigMaps, `metadata.resourceVersion` (every change counts);
//! * labels (the release label routes the object), annotations (pause), finalizers other than
//!   the controller's own (its own patch must not echo back as a second reconcile), and
//!   `deletionTimestamp`. For kinds without a generation the own finalizer patch still makes a
//!   new resourceVersion; the controller remembers the hash of the version it wrote and does
//!   not reconcile on that version's watch event.
//!
//! Status-only writes to kinds with a status subresource change none of these, so they do not
//! reconcile. Periodic resyncs and Release changes reach the controller by other paths.
//!
//! # Pause
//!
//! An object is paused iff it carries one of the pause annotations with exactly the configured
//! value. Defaults: `cluster.x-k8s.io/paused: "true"` (Cluster API) and
//! `operatorkit.giantswarm.io/paused: "true"`; operators add their own. A paused object is not
//! reconciled at all, including its deletion (as in Go), so the finalizer holds it until it is
//! unpaused. Comparing exact values avoids Go v2.0.0's bug where any empty-valued annotation
//! paused an object.

use std::collections::BTreeMap;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use apis::labels;
use kube::Resource;

/// The pause annotations every controller honours.
pub fn default_pause_annotations() -> BTreeMap<String, String> {
    [(labels::CAPI_PAUSED, "true"), (labels::OPERATORKIT_PAUSED, "true")]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The pause annotation that pauses `annotations`, if any.
pub fn paused_by<'a>(
    annotations: Option<&BTreeMap<String, String>>,
    pause: &'a BTreeMap<String, String>,
) -> Option<(&'a str, &'a str)> {
    let annotations = annotations?;
    pause
        .iter()
        .find(|(key, value)| annotations.get(*key).is_some_and(|v| v == *value))
        .map(|(k, v)| (k.as_str(), v.as_str()))
}

/// A hash of everything whose change should reconcile an object (see the module docs).
pub fn change_hash<K: Resource>(obj: &K) -> Option<u64> {
    change_hash_ignoring(obj, None)
}

/// [`change_hash`], ignoring the finalizer `own`: the controller's own finalizer patch then does
/// not echo back as a second reconcile (for kinds with a generation; without one, the
/// resourceVersion changes, and the controller recognises the echo by the hash of the version
/// its patch wrote).
pub fn change_hash_ignoring<K: Resource>(obj: &K, own: Option<&str>) -> Option<u64> {
    let meta = obj.meta();
    let mut hasher = DefaultHasher::new();
    match meta.generation {
        Some(generation) => (0u8, generation).hash(&mut hasher),
        None => (1u8, &meta.resource_version).hash(&mut hasher),
    }
    meta.labels.hash(&mut hasher);
    meta.annotations.hash(&mut hasher);
    for finalizer in meta.finalizers.iter().flatten().filter(|f| Some(f.as_str()) != own) {
        finalizer.hash(&mut hasher);
    }
    meta.deletion_timestamp.as_ref().map(|t| t.0.as_second()).hash(&mut hasher);
    Some(hasher.finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::ConfigMap;

    fn annotations(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn pause_needs_the_exact_value() {
        let mut pause = default_pause_annotations();
        pause.insert("app-operator.giantswarm.io/paused".into(), "yes".into());
        assert_eq!(
            paused_by(Some(&annotations(&[("cluster.x-k8s.io/paused", "true")])), &pause),
            Some(("cluster.x-k8s.io/paused", "true"))
        );
        assert!(paused_by(Some(&annotations(&[("operatorkit.giantswarm.io/paused", "false")])), &pause).is_none());
        assert!(paused_by(Some(&annotations(&[("app-operator.giantswarm.io/paused", "yes")])), &pause).is_some());
        // Go v2.0.0 paused objects with any empty-valued annotation.
        assert!(paused_by(Some(&annotations(&[("unrelated", "")])), &pause).is_none());
        assert!(paused_by(None, &pause).is_none());
    }

    #[test]
    fn status_only_changes_keep_the_hash_for_kinds_with_generation() {
        let mut d = Deployment::default();
        d.metadata.generation = Some(3);
        d.metadata.resource_version = Some("10".into());
        let before = change_hash(&d);
        d.metadata.resource_version = Some("11".into());
        d.status = Some(Default::default());
        assert_eq!(change_hash(&d), before, "a status write bumps resourceVersion only");
        d.metadata.generation = Some(4);
        assert_ne!(change_hash(&d), before);
    }

    #[test]
    fn metadata_changes_change_the_hash() {
        let mut d = Deployment::default();
        d.metadata.generation = Some(1);
        let base = change_hash(&d);
        let mut l = d.clone();
        l.metadata.labels = Some(annotations(&[("release.giantswarm.io/version", "20.0.0")]));
        let mut a = d.clone();
        a.metadata.annotations = Some(annotations(&[("operatorkit.giantswarm.io/paused", "true")]));
        let mut f = d.clone();
        f.metadata.finalizers = Some(vec!["x".into()]);
        let mut t = d.clone();
        t.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::UNIX_EPOCH));
        for changed in [l, a, f, t] {
            assert_ne!(change_hash(&changed), base);
        }
    }

    #[test]
    fn the_own_finalizer_can_be_ignored() {
        let mut d = Deployment::default();
        d.metadata.generation = Some(1);
        let before = change_hash_ignoring(&d, Some("mine"));
        d.metadata.finalizers = Some(vec!["mine".into()]);
        assert_eq!(change_hash_ignoring(&d, Some("mine")), before);
        d.metadata.finalizers = Some(vec!["mine".into(), "theirs".into()]);
        assert_ne!(change_hash_ignoring(&d, Some("mine")), before);
    }

    #[test]
    fn kinds_without_generation_fall_back_to_the_resource_version() {
        let mut cm = ConfigMap::default();
        cm.metadata.resource_version = Some("1".into());
        let before = change_hash(&cm);
        cm.metadata.resource_version = Some("2".into());
        assert_ne!(change_hash(&cm), before);
    }
}

//! Giant Swarm's `status.cluster`: the lifecycle record shared by the legacy provider CRs.
//!
//! [`StatusCluster`] and its parts have the JSON shape of `status.cluster` in the legacy provider
//! CRs (`provider.giantswarm.io/v1alpha1`, e.g. `KVMConfig`) and of `status.cluster` in
//! `AWSCluster` (`infrastructure.giantswarm.io/v1alpha3`), so operators can embed them in their
//! status and read what the Go operators wrote. [`advance_cluster_status`] is the state machine
//! of `giantswarm/statusresource`: `Creating` → `Created` → `Updating` → `Updated` (and again
//! `Updating` on the next upgrade), `Deleting` on deletion ([`mark_cluster_deleting`]), and a
//! history of the versions the cluster converged to, capped at [`CLUSTER_VERSION_LIMIT`] entries.
//!
//! Every function takes the current time as an argument, so each rule is unit-tested with fixed
//! clocks.

use std::collections::BTreeMap;
use std::fmt;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::go::null_as_default;

/// How many versions [`StatusCluster::versions`] keeps (upstream `ClusterVersionLimit`).
pub const CLUSTER_VERSION_LIMIT: usize = 5;

/// The `status` of a [`StatusClusterCondition`] that holds.
pub const STATUS_TRUE: &str = "True";
/// The `status` of a [`StatusClusterCondition`] that does not hold.
pub const STATUS_FALSE: &str = "False";

/// `status.cluster` of the legacy Giant Swarm provider CRs.
///
/// Lists are written as `[]` even when empty and read back from `null` too, as the Go types
/// (without `omitempty`) wrote nil lists.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StatusCluster {
    /// The workload cluster's ID (the name of its cluster object).
    #[serde(default)]
    pub id: String,
    /// Lifecycle conditions, newest first: `Creating`/`Created`, `Updating`/`Updated`,
    /// `Deleting`/`Deleted`.
    #[serde(default, deserialize_with = "null_as_default")]
    pub conditions: Vec<StatusClusterCondition>,
    /// Network facts of the workload cluster.
    #[serde(default, deserialize_with = "null_as_default")]
    pub network: StatusClusterNetwork,
    /// The workload cluster's nodes, as last seen.
    #[serde(default, deserialize_with = "null_as_default")]
    pub nodes: Vec<StatusClusterNode>,
    /// Free-form conditions of individual reconciliation steps.
    #[serde(default, deserialize_with = "null_as_default")]
    pub resources: Vec<StatusClusterResource>,
    /// Scaling facts of the workload cluster.
    #[serde(default, deserialize_with = "null_as_default")]
    pub scaling: StatusClusterScaling,
    /// The versions the cluster converged to, oldest first, at most [`CLUSTER_VERSION_LIMIT`].
    #[serde(default, deserialize_with = "null_as_default")]
    pub versions: Vec<StatusClusterVersion>,
}

/// One condition in [`StatusCluster::conditions`] or [`StatusClusterResource::conditions`].
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StatusClusterCondition {
    /// When the condition was set.
    pub last_transition_time: Time,
    /// [`STATUS_TRUE`] or [`STATUS_FALSE`].
    pub status: String,
    /// The condition type, e.g. `Created`.
    #[serde(rename = "type")]
    pub type_: String,
}

/// `status.cluster.network`.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct StatusClusterNetwork {
    /// The CIDR allocated to the workload cluster.
    #[serde(default)]
    pub cidr: String,
}

/// One node in [`StatusCluster::nodes`].
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StatusClusterNode {
    /// The node's labels.
    #[serde(default, deserialize_with = "null_as_default")]
    pub labels: BTreeMap<String, String>,
    /// When the node was last seen to change.
    pub last_transition_time: Time,
    /// The node name.
    pub name: String,
    /// The operator version the node runs (its `<provider>-operator.giantswarm.io/version` label).
    #[serde(default)]
    pub version: String,
}

/// A node without the label that names the operator version it runs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("node {node} has no {label} label, so the operator version it runs is unknown")]
pub struct MissingVersionLabel {
    /// The node name.
    pub node: String,
    /// The label looked for.
    pub label: String,
}

impl StatusClusterNode {
    /// A node entry from a workload cluster Node's name and labels: the version is the value of
    /// `version_label` (e.g. `kvm-operator.giantswarm.io/version`), which must be present.
    pub fn from_labels(
        name: impl Into<String>,
        labels: &BTreeMap<String, String>,
        version_label: &str,
        now: Timestamp,
    ) -> Result<Self, MissingVersionLabel> {
        let name = name.into();
        let Some(version) = labels.get(version_label) else {
            return Err(MissingVersionLabel { node: name, label: version_label.to_string() });
        };
        Ok(Self { labels: labels.clone(), last_transition_time: Time(now), name, version: version.clone() })
    }
}

/// One entry of [`StatusCluster::resources`].
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StatusClusterResource {
    /// The conditions of this step.
    #[serde(default, deserialize_with = "null_as_default")]
    pub conditions: Vec<StatusClusterCondition>,
    /// The name of the reconciliation step.
    pub name: String,
}

/// `status.cluster.scaling`.
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct StatusClusterScaling {
    /// How many worker nodes the cluster should have.
    #[serde(default)]
    pub desired_capacity: i64,
}

/// One entry of [`StatusCluster::versions`].
#[derive(Serialize, Deserialize, JsonSchema, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct StatusClusterVersion {
    /// Deprecated upstream in favour of `lastTransitionTime`; still written, since older readers
    /// order the history by it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub date: Option<Time>,
    /// When the cluster converged to this version.
    pub last_transition_time: Time,
    /// The version.
    pub semver: String,
}

/// The lifecycle conditions of [`StatusCluster`]. Each has an opposite, which setting it
/// removes: a cluster is either creating or created, updating or updated, deleting or deleted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ClusterCondition {
    /// The cluster is being created.
    Creating,
    /// Every desired node runs the desired version for the first time.
    Created,
    /// The desired version differs from the last one the cluster converged to.
    Updating,
    /// Every desired node runs the new version.
    Updated,
    /// The cluster is being deleted.
    Deleting,
    /// The cluster is deleted.
    Deleted,
}

impl ClusterCondition {
    /// The condition type as written: `Creating`, `Created`, ….
    pub fn as_str(self) -> &'static str {
        match self {
            ClusterCondition::Creating => "Creating",
            ClusterCondition::Created => "Created",
            ClusterCondition::Updating => "Updating",
            ClusterCondition::Updated => "Updated",
            ClusterCondition::Deleting => "Deleting",
            ClusterCondition::Deleted => "Deleted",
        }
    }

    /// The reason of the Normal event published when a cluster enters this condition:
    /// `ClusterCreating`, `ClusterCreated`, ….
    pub fn event_reason(self) -> String {
        format!("Cluster{}", self.as_str())
    }

    /// The note of that event: `cluster <id> is created`, ….
    pub fn event_note(self, id: &str) -> String {
        format!("cluster {id} is {}", self.as_str().to_lowercase())
    }

    /// The other half of the pair, which setting this condition removes.
    pub fn opposite(self) -> Self {
        match self {
            ClusterCondition::Creating => ClusterCondition::Created,
            ClusterCondition::Created => ClusterCondition::Creating,
            ClusterCondition::Updating => ClusterCondition::Updated,
            ClusterCondition::Updated => ClusterCondition::Updating,
            ClusterCondition::Deleting => ClusterCondition::Deleted,
            ClusterCondition::Deleted => ClusterCondition::Deleting,
        }
    }
}

impl fmt::Display for ClusterCondition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl StatusCluster {
    /// The entry of `condition`, whatever its status (upstream `Get<X>Condition`).
    pub fn condition(&self, condition: ClusterCondition) -> Option<&StatusClusterCondition> {
        self.conditions.iter().find(|c| c.type_ == condition.as_str())
    }

    /// Whether `condition` is present with status `True` (upstream `Has<X>Condition`).
    pub fn has_condition(&self, condition: ClusterCondition) -> bool {
        self.conditions.iter().any(|c| c.type_ == condition.as_str() && c.status == STATUS_TRUE)
    }

    /// Set `condition` to `True` at `now`, removing its opposite (upstream `With<X>Condition`,
    /// which prepends the new entry). Unlike upstream, an entry already `True` is kept with its
    /// time rather than duplicated. Returns whether anything changed.
    pub fn set_condition(&mut self, condition: ClusterCondition, now: Timestamp) -> bool {
        let before = self.conditions.len();
        self.conditions.retain(|c| c.type_ != condition.opposite().as_str());
        let removed_opposite = self.conditions.len() != before;
        if self.has_condition(condition) {
            return removed_opposite;
        }
        // An entry of this type that is not `True` is replaced, not kept beside the new one.
        self.conditions.retain(|c| c.type_ != condition.as_str());
        self.conditions.insert(
            0,
            StatusClusterCondition {
                last_transition_time: Time(now),
                status: STATUS_TRUE.to_string(),
                type_: condition.as_str().to_string(),
            },
        );
        true
    }

    /// The version converged to most recently (upstream `LatestVersion`): the entry with the
    /// newest `lastTransitionTime`, the first of equals.
    pub fn latest_version(&self) -> Option<&str> {
        self.versions
            .iter()
            .fold(None::<&StatusClusterVersion>, |newest, v| match newest {
                Some(n) if n.last_transition_time >= v.last_transition_time => Some(n),
                _ => Some(v),
            })
            .map(|v| v.semver.as_str())
    }

    /// Whether `semver` is in the version history (upstream `HasVersion`).
    pub fn has_version(&self, semver: &str) -> bool {
        self.versions.iter().any(|v| v.semver == semver)
    }

    /// Append `semver` to the version history at `now` unless it is there already, dropping the
    /// oldest entries beyond [`CLUSTER_VERSION_LIMIT`] (upstream `WithNewVersion`). Returns
    /// whether anything changed.
    pub fn add_version(&mut self, semver: &str, now: Timestamp) -> bool {
        if self.has_version(semver) {
            return false;
        }
        // Stable: entries written in the same second keep their order.
        self.versions.sort_by(|a, b| a.last_transition_time.cmp(&b.last_transition_time));
        let keep = CLUSTER_VERSION_LIMIT - 1;
        if self.versions.len() > keep {
            self.versions.drain(..self.versions.len() - keep);
        }
        self.versions.push(StatusClusterVersion {
            date: Some(Time(now)),
            last_transition_time: Time(now),
            semver: semver.to_string(),
        });
        true
    }
}

/// What an operator observed of a workload cluster in one reconciliation, for
/// [`advance_cluster_status`].
#[derive(Clone, Debug, PartialEq)]
pub struct ClusterObservation {
    /// The version the cluster should run: the operator version its nodes are labelled with.
    pub desired_version: String,
    /// How many nodes the cluster should have.
    pub desired_nodes: usize,
    /// The nodes the workload cluster API reports, or `None` when it cannot be reached (not
    /// yet created, or down), which leaves the recorded nodes as they are.
    pub nodes: Option<Vec<StatusClusterNode>>,
}

/// One step of the `giantswarm/statusresource` state machine on `status`. Returns whether
/// anything changed; a controller writes the status only then, and may end the reconciliation
/// after a write as upstream does, since the write brings a new event.
///
/// Like upstream, every rule looks at the status as it was before this call, and nodes count as
/// converged when the recorded node list is not empty, has the desired length, and every node
/// runs the desired version:
///
/// 1. no conditions, nodes or versions → `Creating`;
/// 2. `Creating`, not `Created`, converged → `Created`;
/// 3. `Created`, not `Updating`, and the latest recorded version differs from the desired one →
///    `Updating`;
/// 4. `Updating`, not `Updated`, converged → `Updated`;
/// 5. `Created` or `Updated`, desired version not yet recorded, converged → record it;
/// 6. the observed nodes replace the recorded ones when the two differ in name or version
///    (labels alone do not count). Nodes that did not change keep their `lastTransitionTime`.
///
/// Unlike upstream, an observed empty node list is recorded too (upstream ignored it, so a
/// cluster without nodes kept showing stale ones).
pub fn advance_cluster_status(status: &mut StatusCluster, observation: &ClusterObservation, now: Timestamp) -> bool {
    let before = status.clone();
    let desired = observation.desired_version.as_str();
    let converged = !before.nodes.is_empty()
        && before.nodes.len() == observation.desired_nodes
        && before.nodes.iter().all(|n| n.version == desired);
    let mut changed = false;

    if !before.has_condition(ClusterCondition::Creating)
        && before.conditions.is_empty()
        && before.nodes.is_empty()
        && before.versions.is_empty()
    {
        changed |= status.set_condition(ClusterCondition::Creating, now);
    }
    if before.has_condition(ClusterCondition::Creating) && !before.has_condition(ClusterCondition::Created) && converged
    {
        changed |= status.set_condition(ClusterCondition::Created, now);
    }
    if before.has_condition(ClusterCondition::Created)
        && !before.has_condition(ClusterCondition::Updating)
        && before.latest_version().is_some_and(|latest| latest != desired)
    {
        changed |= status.set_condition(ClusterCondition::Updating, now);
    }
    if before.has_condition(ClusterCondition::Updating) && !before.has_condition(ClusterCondition::Updated) && converged
    {
        changed |= status.set_condition(ClusterCondition::Updated, now);
    }
    if (before.has_condition(ClusterCondition::Created) || before.has_condition(ClusterCondition::Updated))
        && !before.has_version(desired)
        && converged
    {
        changed |= status.add_version(desired, now);
    }
    if let Some(observed) = &observation.nodes {
        changed |= refresh_nodes(&mut status.nodes, observed);
    }
    changed
}

/// Mark a cluster that is being deleted (the delete path of `statusresource`). Returns whether
/// anything changed.
pub fn mark_cluster_deleting(status: &mut StatusCluster, now: Timestamp) -> bool {
    status.set_condition(ClusterCondition::Deleting, now)
}

/// Replace `recorded` with `observed` when they differ as sets of (name, version). Nodes that
/// did not change keep their recorded transition time.
fn refresh_nodes(recorded: &mut Vec<StatusClusterNode>, observed: &[StatusClusterNode]) -> bool {
    let same = |a: &StatusClusterNode, b: &StatusClusterNode| a.name == b.name && a.version == b.version;
    let covers = |xs: &[StatusClusterNode], ys: &[StatusClusterNode]| xs.iter().all(|x| ys.iter().any(|y| same(x, y)));
    if covers(recorded, observed) && covers(observed, recorded) {
        return false;
    }
    let refreshed = observed
        .iter()
        .map(|node| match recorded.iter().find(|r| same(r, node)) {
            Some(unchanged) => {
                StatusClusterNode { last_transition_time: unchanged.last_transition_time.clone(), ..node.clone() }
            }
            None => node.clone(),
        })
        .collect();
    *recorded = refreshed;
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A fixed clock: `t(0)` is 2026-01-01T00:00:00Z, `t(n)` n seconds later.
    fn t(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_767_225_600 + seconds).unwrap_or(Timestamp::UNIX_EPOCH)
    }

    fn node(name: &str, version: &str, at: i64) -> StatusClusterNode {
        StatusClusterNode {
            labels: BTreeMap::from([("kvm-operator.giantswarm.io/version".to_string(), version.to_string())]),
            last_transition_time: Time(t(at)),
            name: name.into(),
            version: version.into(),
        }
    }

    fn observe(version: &str, desired_nodes: usize, nodes: Option<Vec<StatusClusterNode>>) -> ClusterObservation {
        ClusterObservation { desired_version: version.into(), desired_nodes, nodes }
    }

    fn types(status: &StatusCluster) -> Vec<&str> {
        status.conditions.iter().map(|c| c.type_.as_str()).collect()
    }

    fn semvers(status: &StatusCluster) -> Vec<&str> {
        status.versions.iter().map(|v| v.semver.as_str()).collect()
    }

    #[test]
    fn reads_the_go_shape_with_nulls_and_fractional_times() {
        let status: StatusCluster = serde_json::from_value(json!({
            "conditions": [{"lastTransitionTime": "2019-03-01T10:00:00.123456789Z", "status": "True", "type": "Created"}],
            "network": {"cidr": "10.1.0.0/16"},
            "nodes": null,
            "resources": [{"name": "endpoint", "conditions": null}],
            "scaling": {"desiredCapacity": 3},
            "versions": [{"date": "0001-01-01T00:00:00Z", "lastTransitionTime": "2019-03-01T10:00:00Z", "semver": "3.1.0"}]
        }))
        .unwrap_or_default();
        assert!(status.has_condition(ClusterCondition::Created));
        assert_eq!(status.network.cidr, "10.1.0.0/16");
        assert!(status.nodes.is_empty());
        assert_eq!(status.resources[0].name, "endpoint");
        assert!(status.resources[0].conditions.is_empty());
        assert_eq!(status.scaling.desired_capacity, 3);
        assert_eq!(status.latest_version(), Some("3.1.0"));
    }

    #[test]
    fn writes_camel_case_with_every_list_present() {
        let mut status = StatusCluster::default();
        status.set_condition(ClusterCondition::Creating, t(0));
        status.add_version("1.0.0", t(0));
        let value = serde_json::to_value(&status).unwrap_or_default();
        assert_eq!(
            value,
            json!({
                "id": "",
                "conditions": [{"lastTransitionTime": "2026-01-01T00:00:00Z", "status": "True", "type": "Creating"}],
                "network": {"cidr": ""},
                "nodes": [],
                "resources": [],
                "scaling": {"desiredCapacity": 0},
                "versions": [{"date": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z", "semver": "1.0.0"}]
            })
        );
        let back: StatusCluster = serde_json::from_value(value).unwrap_or_default();
        assert_eq!(back, status);
    }

    #[test]
    fn an_empty_object_reads_as_the_default() {
        let status: Option<StatusCluster> = serde_json::from_value(json!({})).ok();
        assert_eq!(status, Some(StatusCluster::default()));
    }

    #[test]
    fn the_schema_names_the_wire_fields() {
        let schema = schemars::schema_for!(StatusCluster);
        let properties = schema.get("properties").and_then(|p| p.as_object()).map(|p| {
            let mut keys: Vec<_> = p.keys().cloned().collect();
            keys.sort();
            keys
        });
        assert_eq!(
            properties,
            Some(
                ["conditions", "id", "network", "nodes", "resources", "scaling", "versions"].map(String::from).to_vec()
            )
        );
    }

    #[test]
    fn setting_a_condition_removes_its_opposite_and_prepends() {
        let mut status = StatusCluster::default();
        assert!(status.set_condition(ClusterCondition::Creating, t(0)));
        assert!(status.set_condition(ClusterCondition::Created, t(10)));
        assert_eq!(types(&status), ["Created"]);
        assert!(status.set_condition(ClusterCondition::Updating, t(20)));
        assert_eq!(types(&status), ["Updating", "Created"]);
        assert!(status.set_condition(ClusterCondition::Updated, t(30)));
        assert_eq!(types(&status), ["Updated", "Created"]);
        assert_eq!(
            status.condition(ClusterCondition::Created).map(|c| c.last_transition_time.clone()),
            Some(Time(t(10)))
        );
    }

    #[test]
    fn setting_a_condition_that_holds_changes_nothing() {
        let mut status = StatusCluster::default();
        status.set_condition(ClusterCondition::Created, t(0));
        let before = status.clone();
        assert!(!status.set_condition(ClusterCondition::Created, t(10)));
        assert_eq!(status, before);
    }

    #[test]
    fn a_false_entry_is_replaced_not_duplicated() {
        let mut status = StatusCluster {
            conditions: vec![StatusClusterCondition {
                last_transition_time: Time(t(0)),
                status: STATUS_FALSE.into(),
                type_: "Created".into(),
            }],
            ..StatusCluster::default()
        };
        assert!(!status.has_condition(ClusterCondition::Created));
        assert!(status.condition(ClusterCondition::Created).is_some());
        assert!(status.set_condition(ClusterCondition::Created, t(10)));
        assert_eq!(status.conditions.len(), 1);
        assert!(status.has_condition(ClusterCondition::Created));
    }

    #[test]
    fn opposites_pair_up() {
        for c in [ClusterCondition::Creating, ClusterCondition::Updating, ClusterCondition::Deleting] {
            assert_eq!(c.opposite().opposite(), c);
            assert_ne!(c.opposite(), c);
        }
        assert_eq!(ClusterCondition::Deleted.opposite().to_string(), "Deleting");
    }

    #[test]
    fn version_history_keeps_the_newest_five() {
        let mut status = StatusCluster::default();
        for (i, v) in ["1.0.0", "1.1.0", "1.2.0", "2.0.0", "2.1.0", "3.0.0", "3.1.0"].iter().enumerate() {
            assert!(status.add_version(v, t(i as i64 * 100)));
            assert!(status.versions.len() <= CLUSTER_VERSION_LIMIT);
        }
        assert_eq!(semvers(&status), ["1.2.0", "2.0.0", "2.1.0", "3.0.0", "3.1.0"]);
        assert_eq!(status.latest_version(), Some("3.1.0"));
    }

    #[test]
    fn a_recorded_version_is_not_added_twice() {
        let mut status = StatusCluster::default();
        assert!(status.add_version("1.0.0", t(0)));
        assert!(!status.add_version("1.0.0", t(10)));
        assert_eq!(status.versions.len(), 1);
        assert_eq!(status.versions[0].last_transition_time, Time(t(0)));
    }

    #[test]
    fn the_oldest_versions_go_even_when_stored_out_of_order() {
        let entry = |semver: &str, at: i64| StatusClusterVersion {
            date: None,
            last_transition_time: Time(t(at)),
            semver: semver.into(),
        };
        let mut status = StatusCluster {
            versions: vec![entry("5", 50), entry("1", 10), entry("4", 40), entry("2", 20), entry("3", 30)],
            ..StatusCluster::default()
        };
        assert_eq!(status.latest_version(), Some("5"));
        assert!(status.add_version("6", t(60)));
        assert_eq!(semvers(&status), ["2", "3", "4", "5", "6"]);
    }

    #[test]
    fn no_versions_means_no_latest() {
        assert_eq!(StatusCluster::default().latest_version(), None);
        assert!(!StatusCluster::default().has_version("1.0.0"));
    }

    #[test]
    fn a_new_cluster_is_creating() {
        let mut status = StatusCluster::default();
        assert!(advance_cluster_status(&mut status, &observe("1.0.0", 3, None), t(0)));
        assert_eq!(types(&status), ["Creating"]);
        // Nothing more happens until nodes show up.
        assert!(!advance_cluster_status(&mut status, &observe("1.0.0", 3, None), t(10)));
    }

    #[test]
    fn creating_becomes_created_only_when_every_desired_node_runs_the_version() {
        let mut status = StatusCluster::default();
        advance_cluster_status(&mut status, &observe("1.0.0", 2, None), t(0));

        // One of two nodes: recorded, but not created.
        let one = Some(vec![node("n1", "1.0.0", 5)]);
        assert!(advance_cluster_status(&mut status, &observe("1.0.0", 2, one.clone()), t(5)));
        assert!(!advance_cluster_status(&mut status, &observe("1.0.0", 2, one), t(6)));
        assert_eq!(types(&status), ["Creating"]);

        // Two nodes, one on another version: still not created.
        let mixed = Some(vec![node("n1", "1.0.0", 5), node("n2", "0.9.0", 7)]);
        assert!(advance_cluster_status(&mut status, &observe("1.0.0", 2, mixed.clone()), t(7)));
        assert!(!advance_cluster_status(&mut status, &observe("1.0.0", 2, mixed), t(8)));
        assert_eq!(types(&status), ["Creating"]);

        // Both on the version: created (rules look at the recorded nodes, so it takes a pass).
        let both = Some(vec![node("n1", "1.0.0", 5), node("n2", "1.0.0", 9)]);
        assert!(advance_cluster_status(&mut status, &observe("1.0.0", 2, both.clone()), t(9)));
        assert_eq!(types(&status), ["Creating"]);
        assert!(advance_cluster_status(&mut status, &observe("1.0.0", 2, both.clone()), t(10)));
        assert_eq!(types(&status), ["Created"]);
        // Then the version is recorded, then the status is steady.
        assert!(advance_cluster_status(&mut status, &observe("1.0.0", 2, both.clone()), t(11)));
        assert_eq!(semvers(&status), ["1.0.0"]);
        assert!(!advance_cluster_status(&mut status, &observe("1.0.0", 2, both), t(12)));
    }

    #[test]
    fn no_nodes_never_count_as_converged() {
        let mut status = StatusCluster::default();
        status.set_condition(ClusterCondition::Creating, t(0));
        assert!(!advance_cluster_status(&mut status, &observe("1.0.0", 0, Some(vec![])), t(1)));
        assert_eq!(types(&status), ["Creating"]);
    }

    /// A cluster created at 1.0.0 with two nodes, version recorded.
    fn created_cluster() -> StatusCluster {
        let mut status = StatusCluster::default();
        let nodes = Some(vec![node("n1", "1.0.0", 0), node("n2", "1.0.0", 0)]);
        for i in 0..4 {
            advance_cluster_status(&mut status, &observe("1.0.0", 2, nodes.clone()), t(i));
        }
        assert_eq!(types(&status), ["Created"]);
        assert_eq!(semvers(&status), ["1.0.0"]);
        status
    }

    #[test]
    fn a_new_desired_version_is_an_update_until_the_nodes_converge() {
        let mut status = created_cluster();
        let old_nodes = Some(vec![node("n1", "1.0.0", 0), node("n2", "1.0.0", 0)]);
        assert!(advance_cluster_status(&mut status, &observe("1.1.0", 2, old_nodes.clone()), t(100)));
        assert_eq!(types(&status), ["Updating", "Created"]);
        assert!(!advance_cluster_status(&mut status, &observe("1.1.0", 2, old_nodes), t(101)));

        let new_nodes = Some(vec![node("n1", "1.1.0", 110), node("n2", "1.1.0", 110)]);
        assert!(advance_cluster_status(&mut status, &observe("1.1.0", 2, new_nodes.clone()), t(110)));
        assert_eq!(types(&status), ["Updating", "Created"]);
        // Converged nodes: updated and recorded in the same pass, as upstream.
        assert!(advance_cluster_status(&mut status, &observe("1.1.0", 2, new_nodes.clone()), t(111)));
        assert_eq!(types(&status), ["Updated", "Created"]);
        assert_eq!(semvers(&status), ["1.0.0", "1.1.0"]);
        assert_eq!(status.latest_version(), Some("1.1.0"));
        assert!(!advance_cluster_status(&mut status, &observe("1.1.0", 2, new_nodes), t(112)));
    }

    #[test]
    fn the_next_upgrade_starts_from_updated() {
        let mut status = created_cluster();
        let mut history = vec!["1.0.0".to_string()];
        for (step, version) in ["1.1.0", "1.2.0", "2.0.0", "2.1.0", "3.0.0", "3.1.0"].into_iter().enumerate() {
            let at = 1000 * (step as i64 + 1);
            let nodes = Some(vec![node("n1", version, at), node("n2", version, at)]);
            for i in 0..5 {
                advance_cluster_status(&mut status, &observe(version, 2, nodes.clone()), t(at + i));
            }
            assert_eq!(types(&status), ["Updated", "Created"], "after upgrading to {version}");
            history.push(version.to_string());
        }
        assert_eq!(semvers(&status), history[history.len() - CLUSTER_VERSION_LIMIT..].to_vec());
        assert_eq!(status.latest_version(), Some("3.1.0"));
    }

    #[test]
    fn nodes_are_refreshed_by_name_and_version_only() {
        let mut status = created_cluster();
        let steady = observe("1.0.0", 2, Some(vec![node("n1", "1.0.0", 50), node("n2", "1.0.0", 50)]));
        // Same names and versions (newer timestamps): no change, so no write.
        assert!(!advance_cluster_status(&mut status, &steady, t(50)));
        // Labels alone do not count either.
        let mut relabelled = node("n1", "1.0.0", 51);
        relabelled.labels.insert("role".into(), "worker".into());
        assert!(!advance_cluster_status(
            &mut status,
            &observe("1.0.0", 2, Some(vec![relabelled, node("n2", "1.0.0", 51)])),
            t(51)
        ));

        // A replaced node: the list is replaced; the unchanged node keeps its time.
        let replaced = observe("1.0.0", 2, Some(vec![node("n1", "1.0.0", 60), node("n3", "1.0.0", 60)]));
        assert!(advance_cluster_status(&mut status, &replaced, t(60)));
        let names: Vec<_> = status.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["n1", "n3"]);
        assert_eq!(status.nodes[0].last_transition_time, Time(t(0)));
        assert_eq!(status.nodes[1].last_transition_time, Time(t(60)));

        // An unreachable workload cluster leaves the nodes alone.
        assert!(!advance_cluster_status(&mut status, &observe("1.0.0", 2, None), t(70)));
        assert_eq!(status.nodes.len(), 2);

        // All nodes gone is recorded.
        assert!(advance_cluster_status(&mut status, &observe("1.0.0", 2, Some(vec![])), t(80)));
        assert!(status.nodes.is_empty());
    }

    #[test]
    fn deletion_marks_deleting_once() {
        let mut status = created_cluster();
        assert!(mark_cluster_deleting(&mut status, t(100)));
        assert_eq!(types(&status), ["Deleting", "Created"]);
        assert!(!mark_cluster_deleting(&mut status, t(110)));
        assert_eq!(
            status.condition(ClusterCondition::Deleting).map(|c| c.last_transition_time.clone()),
            Some(Time(t(100)))
        );
    }

    #[test]
    fn node_entries_come_from_the_version_label() {
        let labels = BTreeMap::from([
            ("kvm-operator.giantswarm.io/version".to_string(), "4.2.0".to_string()),
            ("role".to_string(), "worker".to_string()),
        ]);
        let entry = StatusClusterNode::from_labels("worker-1", &labels, "kvm-operator.giantswarm.io/version", t(0));
        assert_eq!(entry.as_ref().map(|n| n.version.as_str()), Ok("4.2.0"));
        assert_eq!(entry.as_ref().map(|n| n.labels.len()), Ok(2));

        let missing = StatusClusterNode::from_labels("worker-1", &labels, "aws-operator.giantswarm.io/version", t(0));
        assert_eq!(
            missing.err().map(|e| e.to_string()),
            Some(
                "node worker-1 has no aws-operator.giantswarm.io/version label, so the operator version it runs is unknown"
                    .to_string()
            )
        );
    }
}

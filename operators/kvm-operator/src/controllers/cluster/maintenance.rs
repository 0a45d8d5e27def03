//! Maintenance windows, the management cluster's rollout limit and node max-age, as the cluster
//! controller applies them to a KVMConfig (`spec.cluster.maintenance`,
//! `spec.cluster.maxNodeAge`).
//!
//! Only disruptive work asks: replacing a changed node Deployment (a rolling update) and
//! replacing a node older than its max age. Creating nodes, removing nodes taken out of the
//! spec, and everything else never wait. The windows and the gate are aws-operator's
//! ([`node_lifecycle::maintenance`], [`node_lifecycle::disruption`]); the limit is the shared
//! rollout slots ([`node_lifecycle::slots`]): at most `--max-rolling-clusters` clusters of every
//! replica and version of kvm-operator replace nodes at once. A cluster takes its slot before
//! its first replacement and gives it back once every Deployment is current and no node is past
//! its age (or the cluster is deleted).
//!
//! A spec the operator cannot read (a malformed window, an unknown time zone, a max age below a
//! day) holds the disruptive work, with the `MaintenanceSettings` condition naming the field and
//! the fix and a Warning event; everything else goes on.

use std::collections::BTreeSet;
use std::time::Duration;

use apis::kvm::KVMConfig;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt as _;
use node_lifecycle::disruption::{self, Gate};
use node_lifecycle::maintenance::{AgedNode, MaintenanceError, MaxAgeStep, Schedule, max_age_step, parse_max_age};
use node_lifecycle::slots::{Acquired, Slots};
use operatorkit::ResourceError;

use crate::context::Shared;

/// The path of the cluster's maintenance settings.
pub const FIELD: &str = "spec.cluster.maintenance";
/// The path of the cluster's max node age.
pub const MAX_AGE_FIELD: &str = "spec.cluster.maxNodeAge";
/// The `Ready` reason of a cluster whose replacement waits for a rollout slot.
pub const WAITING_FOR_SLOT: &str = "WaitingForRolloutSlot";
/// The scope of the rollout slots of kvm-operator's clusters.
pub const SLOT_SCOPE: &str = "kvm-operator-rolling-clusters";

/// The cluster's maintenance settings, read: the schedule (`None`: none set) and the max age
/// (`None`: nodes are not replaced for age), or every problem.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The windows, or their problems.
    pub schedule: Result<Option<Schedule>, Vec<MaintenanceError>>,
    /// The max age, or its problem.
    pub max_age: Result<Option<Duration>, MaintenanceError>,
}

impl Settings {
    /// Read `config`'s settings.
    pub fn of(config: &KVMConfig) -> Self {
        let cluster = &config.spec.cluster;
        let schedule = match &cluster.maintenance {
            None => Ok(None),
            Some(spec) => Schedule::parse(FIELD, spec).map(Some),
        };
        let max_age = cluster.max_node_age.as_deref().map(|raw| parse_max_age(MAX_AGE_FIELD, raw)).transpose();
        Self { schedule, max_age }
    }

    /// Every problem, for the `MaintenanceSettings` condition: `Ok` when the settings apply.
    pub fn problems(&self, config: &KVMConfig) -> Result<(), String> {
        let mut problems: Vec<MaintenanceError> = self.schedule.clone().err().unwrap_or_default();
        problems.extend(self.max_age.clone().err());
        if problems.is_empty() { Ok(()) } else { Err(disruption::problems_message(&whose(config), &problems)) }
    }

    /// The schedule as the gate takes it: a max-age problem holds the disruptive work as an
    /// unreadable window does.
    fn gate_schedule(&self) -> Result<Option<Schedule>, Vec<MaintenanceError>> {
        match (&self.schedule, &self.max_age) {
            (Err(problems), _) => Err(problems.clone()),
            (Ok(_), Err(problem)) => Err(vec![problem.clone()]),
            (Ok(schedule), Ok(_)) => Ok(schedule.clone()),
        }
    }
}

/// `KVMConfig <namespace>/<name>`.
pub fn whose(config: &KVMConfig) -> String {
    format!("KVMConfig {}/{}", config.namespace().unwrap_or_default(), config.name_any())
}

/// Why a disruptive step does not run now: the `Ready` reason and message, and when to look
/// again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hold {
    /// The `Ready` reason.
    pub reason: &'static str,
    /// The `Ready` message.
    pub message: String,
    /// When to look again (`None`: at the poll interval).
    pub retry_after: Option<Duration>,
}

fn slots(shared: &Shared) -> Slots {
    Slots::new(
        shared.client.clone(),
        &shared.config.rollout.slot_namespace,
        SLOT_SCOPE,
        shared.config.rollout.max_rolling_clusters,
    )
}

fn cluster_key(config: &KVMConfig) -> String {
    format!("{}/{}", config.namespace().unwrap_or_default(), config.name_any())
}

fn slot_error(e: node_lifecycle::slots::SlotError) -> ResourceError {
    ResourceError::msg("RolloutSlots", e.to_string())
}

/// Whether the KVMConfig `key` (`<namespace>/<name>`) still exists and is not being deleted.
async fn alive(client: kube::Client, key: String) -> bool {
    let Some((ns, name)) = key.split_once('/') else { return false };
    match kube::Api::<KVMConfig>::namespaced(client, ns).get_opt(name).await {
        Ok(found) => found.is_some_and(|c| c.metadata.deletion_timestamp.is_none()),
        // An error is no proof of absence: the holder keeps its slot.
        Err(_) => true,
    }
}

/// May `what` (e.g. `the replacement of node Deployment worker-w1`) run in `config`'s cluster
/// now? `None` when it may (the cluster then holds a rollout slot, if there is a limit), else
/// why not.
pub async fn may_disrupt(
    shared: &Shared,
    config: &KVMConfig,
    settings: &Settings,
    what: &str,
) -> Result<Option<Hold>, ResourceError> {
    match disruption::gate(&whose(config), &settings.gate_schedule(), what, shared.clock.now(), shared.poll) {
        Gate::Go => {}
        Gate::Wait { message, retry_after } => {
            return Ok(Some(Hold { reason: disruption::WAITING_FOR_WINDOW, message, retry_after: Some(retry_after) }));
        }
        Gate::Invalid(message) => {
            return Ok(Some(Hold { reason: disruption::INVALID_MAINTENANCE, message, retry_after: None }));
        }
    }
    let slots = slots(shared);
    let key = cluster_key(config);
    let client = shared.client.clone();
    match slots.acquire(&key, &key, move |k| alive(client.clone(), k)).await.map_err(slot_error)? {
        Acquired::Busy(holders) => Ok(Some(Hold {
            reason: WAITING_FOR_SLOT,
            message: format!(
                "{what} waits for a rollout slot: at most {} clusters replace nodes at once (--max-rolling-clusters), and {} do now",
                slots.limit(),
                holders.join(", ")
            ),
            retry_after: None,
        })),
        Acquired::Held(_) => {
            shared.released.lock().remove(&key);
            Ok(None)
        }
        Acquired::Unlimited => Ok(None),
    }
}

/// The cluster has nothing disruptive left to do (or is deleted): give its slot back. Reads the
/// Leases once per cluster and process start, then only after a [`may_disrupt`].
pub async fn done(shared: &Shared, config: &KVMConfig) -> Result<(), ResourceError> {
    let key = cluster_key(config);
    if shared.config.rollout.max_rolling_clusters == 0 || shared.released.lock().contains(&key) {
        return Ok(());
    }
    slots(shared).release(&key, &key).await.map_err(slot_error)?;
    shared.released.lock().insert(key);
    Ok(())
}

/// The node pods as max-age replacement sees them: launched at the pod's creation, in service
/// while not being deleted.
pub fn aged(pods: &[Pod]) -> Vec<AgedNode> {
    pods.iter()
        .filter_map(|p| {
            let launched = p.metadata.creation_timestamp.as_ref()?.0;
            Some(AgedNode { id: p.name_any(), launched, in_service: p.metadata.deletion_timestamp.is_none() })
        })
        .collect()
}

/// The next max-age step among `pods` at `now`, for `max_age`.
pub fn next_replacement(pods: &[Pod], max_age: Duration, now: Timestamp) -> MaxAgeStep {
    max_age_step(&aged(pods), &BTreeSet::new(), max_age, now)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const FIXTURE: &str = include_str!("../../../../../crates/apis/tests/fixtures/kvmconfig-qz7lt.yaml");

    fn config(cluster: serde_json::Value) -> KVMConfig {
        let mut value: serde_json::Value = serde_saphyr::from_str(FIXTURE).expect("fixture parses");
        for (k, v) in cluster.as_object().expect("object") {
            value["spec"]["cluster"][k] = v.clone();
        }
        value["metadata"]["name"] = json!("q7m2x");
        value["metadata"]["namespace"] = json!("default");
        serde_json::from_value(value).expect("a KVMConfig")
    }

    fn pod(name: &str, created: &str, deleting: bool) -> Pod {
        let mut meta = json!({"name": name, "namespace": "q7m2x", "creationTimestamp": created});
        if deleting {
            meta["deletionTimestamp"] = json!("2026-06-01T11:59:00Z");
        }
        serde_json::from_value(json!({"metadata": meta})).expect("pod")
    }

    #[test]
    fn bad_settings_are_named_with_their_fields_and_a_max_age_problem_holds_disruption() {
        let c = config(json!({
            "maintenance": {"timeZone": "Mars/Olympus", "windows": [{"start": "02:00", "duration": "4h"}]},
            "maxNodeAge": "2h"
        }));
        let s = Settings::of(&c);
        let message = s.problems(&c).expect_err("two problems");
        assert!(message.starts_with("KVMConfig default/q7m2x: spec.cluster.maintenance.timeZone"), "{message}");
        assert!(message.contains("spec.cluster.maxNodeAge"), "{message}");

        let only_age = config(json!({"maxNodeAge": "12h"}));
        let s = Settings::of(&only_age);
        assert!(s.problems(&only_age).is_err());
        assert!(s.gate_schedule().is_err(), "an unreadable max age holds the disruptive work");

        let fine = config(json!({"maxNodeAge": "30d"}));
        let s = Settings::of(&fine);
        assert_eq!(s.problems(&fine), Ok(()));
        assert_eq!(s.max_age, Ok(Some(Duration::from_secs(30 * 86_400))));
        assert!(matches!(s.gate_schedule(), Ok(None)));
    }

    #[test]
    fn the_oldest_pod_past_its_age_goes_first_and_a_deleting_pod_holds_the_next() {
        let now: Timestamp = "2026-06-01T12:00:00Z".parse().expect("t");
        let day = Duration::from_secs(86_400);
        let pods = [
            pod("worker-w1-a", "2026-05-20T12:00:00Z", false),
            pod("worker-w2-b", "2026-05-10T12:00:00Z", false),
            pod("master-m1-c", "2026-05-31T12:00:00Z", false),
        ];
        match next_replacement(&pods, 7 * day, now) {
            MaxAgeStep::Replace { id, age } => {
                assert_eq!(id, "worker-w2-b");
                assert_eq!(age, 22 * day);
            }
            other => panic!("{other:?}"),
        }
        let going = [pod("worker-w2-b", "2026-05-10T12:00:00Z", true), pods[0].clone(), pods[2].clone()];
        assert!(matches!(next_replacement(&going, 7 * day, now), MaxAgeStep::Busy(id) if id == "worker-w2-b"));
        match next_replacement(&pods, 30 * day, now) {
            MaxAgeStep::Idle { due } => assert_eq!(due, Some("2026-06-09T12:00:00Z".parse().expect("t"))),
            other => panic!("{other:?}"),
        }
    }
}

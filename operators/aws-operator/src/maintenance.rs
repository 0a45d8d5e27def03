//! Maintenance windows as the controllers apply them: whether a disruptive step (a TCCPN or
//! TCNP stack update that replaces instances) may run now, and what the object's status says
//! when it may not. The decisions are pure; the schedule itself is `node_lifecycle::maintenance`,
//! shared with kvm-operator.
//!
//! Only disruptive work waits. A scaling-only change, a new pool and a first stack creation go
//! at once ([`crate::upgrade::Change`] tells them apart). A spec the operator cannot read
//! (a malformed window, an unknown time zone, a window shorter than the pool's pause between
//! batches, a `maxNodeAge` below a day) holds the disruptive work too: a mistake never lets a
//! roll run outside the windows someone meant to set.

use std::time::Duration;

use apis::aws::AWSCluster;
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::ResourceExt as _;
use node_lifecycle::maintenance::{MaintenanceError, Schedule};

pub use node_lifecycle::disruption::{
    Gate, INVALID_MAINTENANCE, SETTINGS, WAITING_FOR_WINDOW, problems_message, set_settings_condition,
};

/// The path of the cluster's settings.
pub const FIELD: &str = "spec.cluster.maintenance";

/// The cluster's schedule: `Ok(None)` when it sets no maintenance, every problem otherwise.
/// `pause`, a pool's pause between batches, must fit in every window.
pub fn schedule(cluster: &AWSCluster, pause: Option<Duration>) -> Result<Option<Schedule>, Vec<MaintenanceError>> {
    let Some(spec) = &cluster.spec.cluster.maintenance else {
        return Ok(None);
    };
    let schedule = Schedule::parse(FIELD, spec)?;
    if let Some(pause) = pause {
        schedule.check_pause(pause).map_err(|e| vec![e])?;
    }
    Ok(Some(schedule))
}

/// Whether the wait of `obj`'s disruptive work starts now and is to be announced (with a Normal
/// event [`WAITING_FOR_WINDOW`]): its `Ready` condition among its conditions `before` this
/// reconcile does not say so yet.
pub fn wait_starts(before: &[Condition]) -> bool {
    !before.iter().any(|c| c.type_ == operatorkit::status::READY && c.reason == WAITING_FOR_WINDOW)
}

/// The gate of a disruptive step of `what` (e.g. `the rolling update of node pool np001`) in
/// `cluster`, at `now`; `poll` bounds the requeue ([`node_lifecycle::disruption::gate`]).
pub fn gate(
    cluster: &AWSCluster,
    schedule: &Result<Option<Schedule>, Vec<MaintenanceError>>,
    what: &str,
    now: Timestamp,
    poll: Duration,
) -> Gate {
    let whose = format!("AWSCluster {}/{}", cluster.namespace().unwrap_or_default(), cluster.name_any());
    node_lifecycle::disruption::gate(&whose, schedule, what, now, poll)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(maintenance: serde_json::Value) -> AWSCluster {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "infrastructure.giantswarm.io/v1alpha3", "kind": "AWSCluster",
            "metadata": {"name": "a1b2c", "namespace": "org-acme"},
            "spec": {
                "cluster": {"dns": {"domain": "example.com"}, "maintenance": maintenance},
                "provider": {"credentialSecret": {"name": "c", "namespace": "giantswarm"}, "region": "eu-central-1"}
            }
        }))
        .expect("a cluster")
    }

    #[test]
    fn outside_its_window_a_roll_waits_with_the_window_named_and_looks_again_at_the_poll() {
        let c = cluster(
            serde_json::json!({"timeZone": "Europe/Berlin", "windows": [{"days": ["Mon"], "start": "22:00", "duration": "4h"}]}),
        );
        let s = schedule(&c, Some(Duration::from_secs(600)));
        let poll = Duration::from_secs(10);
        match gate(&c, &s, "the rolling update of node pool np001", "2026-06-01T12:00:00Z".parse().expect("t"), poll) {
            Gate::Wait { message, retry_after } => {
                assert_eq!(
                    message,
                    "the rolling update of node pool np001 waits for the next maintenance window, which opens at 2026-06-01T20:00:00Z (Mon 22:00 CEST) and closes at 2026-06-02T00:00:00Z"
                );
                assert_eq!(retry_after, poll);
            }
            other => panic!("{other:?}"),
        }
        // Five seconds before it opens, look again when it opens.
        let gate_soon = gate(&c, &s, "x", "2026-06-01T19:59:55Z".parse().expect("t"), poll);
        assert!(matches!(gate_soon, Gate::Wait { retry_after, .. } if retry_after == Duration::from_secs(5)));
        assert_eq!(gate(&c, &s, "x", "2026-06-01T20:00:00Z".parse().expect("t"), poll), Gate::Go);
    }

    #[test]
    fn a_wait_is_announced_once_when_it_starts() {
        let ready = |reason: &str| Condition {
            type_: operatorkit::status::READY.to_string(),
            status: "False".to_string(),
            reason: reason.to_string(),
            message: String::new(),
            last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::UNIX_EPOCH),
            observed_generation: None,
        };
        assert!(wait_starts(&[]));
        assert!(wait_starts(&[ready("Updating")]));
        assert!(!wait_starts(&[ready(WAITING_FOR_WINDOW)]));
    }

    #[test]
    fn no_settings_never_wait_and_bad_settings_hold_with_the_field_named() {
        let plain: AWSCluster = {
            let mut c = cluster(serde_json::Value::Null);
            c.spec.cluster.maintenance = None;
            c
        };
        let now: Timestamp = "2026-06-01T12:00:00Z".parse().expect("t");
        assert_eq!(gate(&plain, &schedule(&plain, None), "x", now, Duration::from_secs(1)), Gate::Go);
        let short = cluster(serde_json::json!({"windows": [{"start": "02:00", "duration": "5m"}]}));
        let s = schedule(&short, Some(Duration::from_secs(600)));
        match gate(&short, &s, "x", now, Duration::from_secs(1)) {
            Gate::Invalid(message) => assert!(
                message.starts_with("AWSCluster org-acme/a1b2c: spec.cluster.maintenance.windows[0].duration: a window of 5m is shorter than the rolling update's pause of 10m"),
                "{message}"
            ),
            other => panic!("{other:?}"),
        }
        let zone = cluster(serde_json::json!({"timeZone": "Europe/Berlln", "windows": []}));
        let err = schedule(&zone, None).expect_err("unknown zone");
        assert_eq!(err[0].field(), "spec.cluster.maintenance.timeZone");
    }
}

//! Whether a disruptive step may run now, as both operators' controllers ask it: a rolling node
//! replacement, a max-age replacement (and an unhealthy-node termination when the cluster opts
//! it into its windows), against the cluster's maintenance schedule
//! ([`crate::maintenance::Schedule`]) at the operator's clock. Pure.
//!
//! A spec the operator cannot read (a malformed window, an unknown time zone, a window shorter
//! than a batch's pause, a max-age below a day) holds the disruptive work too: a mistake never
//! lets a roll run outside the windows someone meant to set. Everything else (scaling, new
//! nodes or pools, first creation) never asks.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

use crate::maintenance::{MaintenanceError, Schedule, WindowState};

/// The condition saying whether a cluster's maintenance settings can be used: `False` with
/// reason [`INVALID_MAINTENANCE`] names each field and its fix.
pub const SETTINGS: &str = "MaintenanceSettings";

/// The `Ready` reason of an object whose disruptive work waits for the next window.
pub const WAITING_FOR_WINDOW: &str = "WaitingForMaintenanceWindow";

/// The `Ready` reason (and the [`SETTINGS`] reason) of an object whose disruptive work waits
/// because the maintenance settings cannot be read.
pub const INVALID_MAINTENANCE: &str = "InvalidMaintenance";

/// The message for `problems` of the settings of `whose` (`AWSCluster org-acme/a1b2c`).
pub fn problems_message(whose: &str, problems: &[MaintenanceError]) -> String {
    let list: Vec<String> = problems.iter().map(ToString::to_string).collect();
    format!("{whose}: {}; disruptive work (rolling node replacement) waits until this is fixed", list.join("; "))
}

/// Set the [`SETTINGS`] condition in `conditions` (`before`: the object's conditions as read)
/// from `settings`: `Ok` when they can be used, else the problems' message. Returns the message
/// of a `False` condition that is new (not `False` with that message before), for the Warning
/// event.
pub fn set_settings_condition(
    conditions: &mut Vec<Condition>,
    before: &[Condition],
    settings: &Result<(), String>,
    generation: Option<i64>,
) -> Option<String> {
    let (ok, reason, message) = match settings {
        Ok(()) => (true, "Valid", "the maintenance settings apply".to_string()),
        Err(message) => (false, INVALID_MAINTENANCE, message.clone()),
    };
    operatorkit::status::set_condition(conditions, SETTINGS, ok, reason, message.clone(), generation);
    let was_false = before.iter().any(|c| c.type_ == SETTINGS && c.status == "False" && c.message == message);
    (!ok && !was_false).then_some(message)
}

/// Whether a disruptive step may run now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gate {
    /// Yes.
    Go,
    /// Not before the next window: the `Ready` message, and when to look again (the window's
    /// start, or the poll interval if that is sooner, so that a moved clock or a changed spec
    /// is seen).
    Wait {
        /// Why it waits and when the window opens (RFC 3339, and local time).
        message: String,
        /// When to look again.
        retry_after: Duration,
    },
    /// Not until the settings are fixed: the `Ready` message.
    Invalid(String),
}

/// The gate of a disruptive step of `what` (e.g. `the rolling update of node pool np001`) in
/// the cluster `whose` (for messages) with `schedule` (`Ok(None)`: no maintenance set), at
/// `now`; `poll` bounds the requeue.
pub fn gate(
    whose: &str,
    schedule: &Result<Option<Schedule>, Vec<MaintenanceError>>,
    what: &str,
    now: Timestamp,
    poll: Duration,
) -> Gate {
    let schedule = match schedule {
        Ok(None) => return Gate::Go,
        Ok(Some(s)) => s,
        Err(problems) => return Gate::Invalid(problems_message(whose, problems)),
    };
    match schedule.state(now) {
        WindowState::Unrestricted | WindowState::Open { .. } => Gate::Go,
        WindowState::Closed { opens, closes } => {
            let retry_after = crate::maintenance::wait_until(now, opens).min(poll);
            Gate::Wait {
                message: format!(
                    "{what} waits for the next maintenance window, which opens at {opens} ({}) and closes at {closes}",
                    schedule.local(opens)
                ),
                retry_after,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use apis::maintenance::{Maintenance, Window};

    fn berlin_mondays() -> Maintenance {
        Maintenance {
            time_zone: Some("Europe/Berlin".into()),
            windows: vec![Window { days: vec!["Mon".into()], start: "22:00".into(), duration: "4h".into() }],
            ..Maintenance::default()
        }
    }

    #[test]
    fn outside_its_window_a_step_waits_with_the_window_named_and_looks_again_at_the_poll() {
        let s = Schedule::parse("spec.cluster.maintenance", &berlin_mondays()).map(Some);
        let poll = Duration::from_secs(10);
        let now: Timestamp = "2026-06-01T12:00:00Z".parse().expect("t");
        match gate("KVMConfig default/q7m2x", &s, "the replacement of node Deployment worker-w1", now, poll) {
            Gate::Wait { message, retry_after } => {
                assert_eq!(
                    message,
                    "the replacement of node Deployment worker-w1 waits for the next maintenance window, which opens at 2026-06-01T20:00:00Z (Mon 22:00 CEST) and closes at 2026-06-02T00:00:00Z"
                );
                assert_eq!(retry_after, poll);
            }
            other => panic!("{other:?}"),
        }
        let soon = gate("c", &s, "x", "2026-06-01T19:59:55Z".parse().expect("t"), poll);
        assert!(matches!(soon, Gate::Wait { retry_after, .. } if retry_after == Duration::from_secs(5)));
        assert_eq!(gate("c", &s, "x", "2026-06-01T20:00:00Z".parse().expect("t"), poll), Gate::Go);
        assert_eq!(gate("c", &Ok(None), "x", now, poll), Gate::Go);
    }

    #[test]
    fn unreadable_settings_hold_the_step_and_name_the_cluster_and_field() {
        let bad = Maintenance { time_zone: Some("Europe/Berlln".into()), ..berlin_mondays() };
        let s = Schedule::parse("spec.cluster.maintenance", &bad).map(Some);
        let now: Timestamp = "2026-06-01T21:00:00Z".parse().expect("t");
        match gate("KVMConfig default/q7m2x", &s, "x", now, Duration::from_secs(1)) {
            Gate::Invalid(message) => {
                assert!(message.starts_with("KVMConfig default/q7m2x: spec.cluster.maintenance.timeZone"), "{message}");
                assert!(message.ends_with("waits until this is fixed"), "{message}");
            }
            other => panic!("{other:?}"),
        }
    }
}

//! Status-condition helpers.
//!
//! Two shapes of conditions, both as pure functions with the current time passed in, so that
//! every rule is unit-tested with fixed clocks.
//!
//! # `metav1.Condition`
//!
//! [`set_status_condition`], [`remove_status_condition`], [`find_status_condition`],
//! [`is_status_condition_true`], [`is_status_condition_false`] and
//! [`is_status_condition_present_and_equal`] follow `k8s.io/apimachinery/pkg/api/meta/conditions.go`
//! on a `Vec<Condition>`:
//!
//! - a condition is identified by its `type`; setting one that is absent appends it;
//! - `lastTransitionTime` changes only when `status` changes — a new reason, message or
//!   observed generation updates those fields but keeps the time of the last transition;
//! - setting returns whether anything changed, so a controller can skip a status write that
//!   would change nothing (an unchanged status must cost no API request).
//!
//! Upstream takes the transition time from the new condition when it is set and from the wall
//! clock otherwise; here [`DesiredCondition`] carries no time at all and the caller passes `now`.
//!
//! # Giant Swarm `status.cluster`
//!
//! Re-exported from [`apis::cluster_status`], where the types live beside the CRDs that embed
//! them: [`StatusCluster`] and its parts have the JSON shape of `status.cluster` in the legacy
//! provider CRs (`provider.giantswarm.io/v1alpha1`, e.g. `KVMConfig`) and in `AWSCluster`, so
//! operators can embed them in their status and read what the Go operators wrote.
//! [`advance_cluster_status`] is the state machine of `giantswarm/statusresource`: `Creating` → `Created` → `Updating` → `Updated` (and again
//! `Updating` on the next upgrade), `Deleting` on deletion ([`mark_cluster_deleting`]), and a
//! history of the versions the cluster converged to, capped at [`CLUSTER_VERSION_LIMIT`] entries.

use std::fmt;

pub use apis::cluster_status::*;
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// The status of a `metav1.Condition`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConditionStatus {
    /// The condition holds.
    True,
    /// The condition does not hold.
    False,
    /// It cannot be told whether the condition holds.
    Unknown,
}

impl ConditionStatus {
    /// The wire value: `True`, `False` or `Unknown`.
    pub fn as_str(self) -> &'static str {
        match self {
            ConditionStatus::True => "True",
            ConditionStatus::False => "False",
            ConditionStatus::Unknown => "Unknown",
        }
    }
}

impl From<bool> for ConditionStatus {
    fn from(holds: bool) -> Self {
        if holds { ConditionStatus::True } else { ConditionStatus::False }
    }
}

impl fmt::Display for ConditionStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a condition should say: everything but `lastTransitionTime`, which
/// [`set_status_condition`] manages.
///
/// ```
/// use operatorkit::conditions::{ConditionStatus, DesiredCondition};
///
/// let ready = DesiredCondition::new("Ready", ConditionStatus::False, "StackCreating")
///     .message("the control plane stack is being created")
///     .observed_generation(Some(3));
/// assert_eq!(ready.reason, "StackCreating");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DesiredCondition {
    /// The condition type, in CamelCase (`Ready`, `Progressing`).
    pub type_: String,
    /// Whether it holds.
    pub status: ConditionStatus,
    /// A CamelCase, machine-readable reason for the status.
    pub reason: String,
    /// A human-readable explanation. Never put secrets here: status is widely readable.
    pub message: String,
    /// The `metadata.generation` the status was computed from.
    pub observed_generation: Option<i64>,
}

impl DesiredCondition {
    /// A condition of `type_` with `status` for `reason`, no message and no observed generation.
    pub fn new(type_: impl Into<String>, status: ConditionStatus, reason: impl Into<String>) -> Self {
        Self { type_: type_.into(), status, reason: reason.into(), message: String::new(), observed_generation: None }
    }

    /// Set the message.
    pub fn message(mut self, message: impl Into<String>) -> Self {
        self.message = message.into();
        self
    }

    /// Set the observed generation (pass the object's `metadata.generation`).
    pub fn observed_generation(mut self, generation: Option<i64>) -> Self {
        self.observed_generation = generation;
        self
    }
}

/// Set a condition (upstream `SetStatusCondition`): append it if its type is absent, else update
/// the existing one. `lastTransitionTime` becomes `now` when the condition is new or its status
/// changes, and is kept otherwise. Returns whether anything changed.
pub fn set_status_condition(conditions: &mut Vec<Condition>, desired: DesiredCondition, now: Timestamp) -> bool {
    let Some(existing) = conditions.iter_mut().find(|c| c.type_ == desired.type_) else {
        conditions.push(Condition {
            type_: desired.type_,
            status: desired.status.as_str().to_string(),
            reason: desired.reason,
            message: desired.message,
            observed_generation: desired.observed_generation,
            last_transition_time: Time(now),
        });
        return true;
    };
    let mut changed = false;
    if existing.status != desired.status.as_str() {
        existing.status = desired.status.as_str().to_string();
        existing.last_transition_time = Time(now);
        changed = true;
    }
    if existing.reason != desired.reason {
        existing.reason = desired.reason;
        changed = true;
    }
    if existing.message != desired.message {
        existing.message = desired.message;
        changed = true;
    }
    if existing.observed_generation != desired.observed_generation {
        existing.observed_generation = desired.observed_generation;
        changed = true;
    }
    changed
}

/// Remove every condition of `type_` (upstream `RemoveStatusCondition`). Returns whether one
/// was removed.
pub fn remove_status_condition(conditions: &mut Vec<Condition>, type_: &str) -> bool {
    let before = conditions.len();
    conditions.retain(|c| c.type_ != type_);
    conditions.len() != before
}

/// The condition of `type_` (upstream `FindStatusCondition`).
pub fn find_status_condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Whether the condition of `type_` is present with `status` (upstream
/// `IsStatusConditionPresentAndEqual`). An absent condition is neither true nor false.
pub fn is_status_condition_present_and_equal(conditions: &[Condition], type_: &str, status: ConditionStatus) -> bool {
    find_status_condition(conditions, type_).is_some_and(|c| c.status == status.as_str())
}

/// Whether the condition of `type_` is present and `True`.
pub fn is_status_condition_true(conditions: &[Condition], type_: &str) -> bool {
    is_status_condition_present_and_equal(conditions, type_, ConditionStatus::True)
}

/// Whether the condition of `type_` is present and `False`.
pub fn is_status_condition_false(conditions: &[Condition], type_: &str) -> bool {
    is_status_condition_present_and_equal(conditions, type_, ConditionStatus::False)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fixed clock: `t(0)` is 2026-01-01T00:00:00Z, `t(n)` n seconds later.
    fn t(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_767_225_600 + seconds).unwrap_or(Timestamp::UNIX_EPOCH)
    }

    fn ready(status: ConditionStatus) -> DesiredCondition {
        DesiredCondition::new("Ready", status, "Reconciled").message("all good").observed_generation(Some(1))
    }

    // --- metav1.Condition ---------------------------------------------------------------------

    #[test]
    fn setting_an_absent_condition_appends_it_at_now() {
        let mut conditions = Vec::new();
        assert!(set_status_condition(&mut conditions, ready(ConditionStatus::True), t(0)));
        assert_eq!(
            conditions,
            [Condition {
                type_: "Ready".into(),
                status: "True".into(),
                reason: "Reconciled".into(),
                message: "all good".into(),
                observed_generation: Some(1),
                last_transition_time: Time(t(0)),
            }]
        );
    }

    #[test]
    fn setting_the_same_condition_again_changes_nothing() {
        let mut conditions = Vec::new();
        set_status_condition(&mut conditions, ready(ConditionStatus::True), t(0));
        let before = conditions.clone();
        assert!(!set_status_condition(&mut conditions, ready(ConditionStatus::True), t(60)));
        assert_eq!(conditions, before);
    }

    #[test]
    fn a_status_change_moves_the_transition_time() {
        let mut conditions = Vec::new();
        set_status_condition(&mut conditions, ready(ConditionStatus::True), t(0));
        assert!(set_status_condition(&mut conditions, ready(ConditionStatus::False), t(60)));
        assert_eq!(conditions[0].status, "False");
        assert_eq!(conditions[0].last_transition_time, Time(t(60)));
    }

    #[test]
    fn a_new_reason_keeps_the_transition_time() {
        let mut conditions = Vec::new();
        set_status_condition(&mut conditions, ready(ConditionStatus::False), t(0));
        let waiting = DesiredCondition { reason: "WaitingForStack".into(), ..ready(ConditionStatus::False) };
        assert!(set_status_condition(&mut conditions, waiting, t(60)));
        assert_eq!(conditions[0].reason, "WaitingForStack");
        assert_eq!(conditions[0].last_transition_time, Time(t(0)));
    }

    #[test]
    fn a_new_message_keeps_the_transition_time() {
        let mut conditions = Vec::new();
        set_status_condition(&mut conditions, ready(ConditionStatus::True), t(0));
        assert!(set_status_condition(&mut conditions, ready(ConditionStatus::True).message("3 of 3 nodes"), t(60)));
        assert_eq!(conditions[0].message, "3 of 3 nodes");
        assert_eq!(conditions[0].last_transition_time, Time(t(0)));
    }

    #[test]
    fn a_new_observed_generation_is_a_change_without_a_transition() {
        let mut conditions = Vec::new();
        set_status_condition(&mut conditions, ready(ConditionStatus::True), t(0));
        assert!(set_status_condition(
            &mut conditions,
            ready(ConditionStatus::True).observed_generation(Some(2)),
            t(60)
        ));
        assert_eq!(conditions[0].observed_generation, Some(2));
        assert_eq!(conditions[0].last_transition_time, Time(t(0)));
        // Dropping it is a change too.
        assert!(set_status_condition(&mut conditions, ready(ConditionStatus::True).observed_generation(None), t(61)));
        assert_eq!(conditions[0].observed_generation, None);
    }

    #[test]
    fn setting_one_condition_leaves_the_others_in_place() {
        let mut conditions = Vec::new();
        set_status_condition(&mut conditions, DesiredCondition::new("Available", ConditionStatus::True, "Up"), t(0));
        set_status_condition(&mut conditions, ready(ConditionStatus::True), t(1));
        set_status_condition(&mut conditions, DesiredCondition::new("Degraded", ConditionStatus::False, "Fine"), t(2));
        assert!(set_status_condition(&mut conditions, ready(ConditionStatus::False), t(3)));
        let types: Vec<_> = conditions.iter().map(|c| c.type_.as_str()).collect();
        assert_eq!(types, ["Available", "Ready", "Degraded"]);
        assert_eq!(conditions[0].last_transition_time, Time(t(0)));
        assert_eq!(conditions[2].last_transition_time, Time(t(2)));
    }

    #[test]
    fn removing_reports_whether_a_condition_went() {
        let mut conditions = Vec::new();
        assert!(!remove_status_condition(&mut conditions, "Ready"));
        set_status_condition(&mut conditions, ready(ConditionStatus::True), t(0));
        set_status_condition(&mut conditions, DesiredCondition::new("Available", ConditionStatus::True, "Up"), t(0));
        assert!(!remove_status_condition(&mut conditions, "Degraded"));
        assert!(remove_status_condition(&mut conditions, "Ready"));
        assert_eq!(conditions.len(), 1);
        assert_eq!(conditions[0].type_, "Available");
        assert!(!remove_status_condition(&mut conditions, "Ready"));
    }

    #[test]
    fn find_and_status_predicates() {
        let mut conditions = Vec::new();
        set_status_condition(&mut conditions, ready(ConditionStatus::True), t(0));
        set_status_condition(&mut conditions, DesiredCondition::new("Degraded", ConditionStatus::False, "Fine"), t(0));
        set_status_condition(
            &mut conditions,
            DesiredCondition::new("Paused", ConditionStatus::Unknown, "NoData"),
            t(0),
        );

        assert_eq!(find_status_condition(&conditions, "Degraded").map(|c| c.reason.as_str()), Some("Fine"));
        assert!(find_status_condition(&conditions, "Missing").is_none());

        assert!(is_status_condition_true(&conditions, "Ready"));
        assert!(!is_status_condition_false(&conditions, "Ready"));
        assert!(is_status_condition_false(&conditions, "Degraded"));
        assert!(!is_status_condition_true(&conditions, "Degraded"));
        // Unknown is neither.
        assert!(!is_status_condition_true(&conditions, "Paused"));
        assert!(!is_status_condition_false(&conditions, "Paused"));
        assert!(is_status_condition_present_and_equal(&conditions, "Paused", ConditionStatus::Unknown));
        // Absent is neither, and not equal to anything.
        assert!(!is_status_condition_true(&conditions, "Missing"));
        assert!(!is_status_condition_false(&conditions, "Missing"));
        assert!(!is_status_condition_present_and_equal(&conditions, "Missing", ConditionStatus::Unknown));
    }

    #[test]
    fn condition_status_wire_values() {
        assert_eq!(ConditionStatus::from(true).as_str(), "True");
        assert_eq!(ConditionStatus::from(false).to_string(), "False");
        assert_eq!(ConditionStatus::Unknown.as_str(), "Unknown");
    }
}

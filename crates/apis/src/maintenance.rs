//! Maintenance windows and rollout limits of a workload cluster, shared by the providers.
//!
//! The same type sits at `spec.cluster.maintenance` of an `AWSCluster` and of a `KVMConfig`:
//! the operators read it through `node_lifecycle::maintenance`, which parses and checks it
//! (the schema only says what shape it has; a time zone or a duration is checked there, so that
//! a mistake gets a condition naming the field and the fix instead of a refused write).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// When disruptive work (rolling node replacement, max-age replacement, and unhealthy-node
/// termination if opted in) may run in a cluster, and how much of it at once. Scaling and new
/// node pools never wait.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Maintenance {
    /// The IANA time zone the windows' start times are in, such as `Europe/Berlin`; `UTC`
    /// when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,
    /// Weekly windows; disruptive work runs only while one is open. None listed: at any time.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub windows: Vec<Window>,
    /// At most this many node pools of the cluster roll at once; no limit when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_rolling_node_pools: Option<u32>,
    /// Whether terminating unhealthy nodes waits for a window too (by default it does not:
    /// a broken node is replaced at once).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unhealthy_node_termination_in_window: Option<bool>,
}

/// One weekly slot.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Window {
    /// The days it starts on: `Mon` … `Sun` (or full names); every day when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub days: Vec<String>,
    /// The local start time, `HH:MM` on a 24-hour clock.
    pub start: String,
    /// How long it stays open: a number and a unit, such as `4h`, `90m` or `1h30m`; at most
    /// `7d`.
    pub duration: String,
}

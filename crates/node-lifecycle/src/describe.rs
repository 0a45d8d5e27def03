//! The `describe` command both operators share: one tree per cluster, from the cluster down
//! through its control plane and node pools to what runs them (stacks and instances on AWS, node
//! pods on KVM), one line per object with the condition that matters.
//!
//! Each operator walks its own objects into [`Line`]s; this module holds what is the same for
//! both: the command's flags ([`DescribeArgs`]), the choice of the condition a line shows
//! ([`Line::from_conditions`]), the lines for a maintenance window ([`maintenance_line`]) and a
//! drain ([`drain_line`]), and the output ([`write`]): an aligned tree for people, coloured only
//! on a terminal without `NO_COLOR` ([`operatorkit::logging::colour`]), or JSON for tools.
//!
//! ```
//! use node_lifecycle::describe::{Line, Output, Readiness, write};
//!
//! let now = jiff::Timestamp::from_second(1_800_000_000).unwrap();
//! let mut cluster = Line::new("KVMConfig", "org-acme/x7k2p").ready(Readiness::True);
//! cluster.children.push(Line::new("Pod", "master-m0001").ready(Readiness::True).reason("Running"));
//! let mut out = Vec::new();
//! write(&mut out, &[cluster], Output::Text, now, false).unwrap();
//! let text = String::from_utf8(out).unwrap();
//! assert!(text.contains("└─Pod/master-m0001"), "{text}");
//! ```

use std::io::Write;

use apis::drainer::{CONDITION_DRAINED, CONDITION_DRAINING, CONDITION_TIMEOUT, DrainerConfig};
use apis::maintenance::Maintenance;
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::ResourceExt;
use serde::Serialize;

use crate::maintenance::{Schedule, WindowState, format_duration};

/// The flags of `describe`, the same in both operators. The management cluster is reached as the
/// daemon reaches it: the kubeconfig of `KUBECONFIG` (or `~/.kube/config`), else the pod's
/// service account.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct DescribeArgs {
    /// The cluster to show (its id); without it, every cluster of the namespace.
    pub name: Option<String>,
    /// The namespace of the cluster objects (default: the kubeconfig context's).
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
    /// Every cluster in every namespace.
    #[arg(short = 'A', long)]
    pub all_namespaces: bool,
    /// `text` (a tree for people) or `json` (for tools).
    #[arg(short = 'o', long, value_enum, default_value_t = Output::Text)]
    pub output: Output,
}

/// Where `describe` looks, from [`DescribeArgs`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// One namespace.
    Namespace(String),
    /// Every namespace.
    All,
}

impl DescribeArgs {
    /// The namespaces to read: every one with `-A`, else `-n` or `default_namespace` (the
    /// client's).
    pub fn scope(&self, default_namespace: &str) -> Scope {
        match (&self.namespace, self.all_namespaces) {
            (_, true) => Scope::All,
            (Some(ns), false) => Scope::Namespace(ns.clone()),
            (None, false) => Scope::Namespace(default_namespace.to_string()),
        }
    }

    /// Whether the cluster named `name` is one to show.
    pub fn selects(&self, name: &str) -> bool {
        self.name.as_deref().is_none_or(|n| n == name)
    }
}

/// How `describe` prints.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Output {
    /// An aligned tree for people.
    #[default]
    Text,
    /// One JSON document: a list of trees.
    Json,
}

/// The READY column of a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
pub enum Readiness {
    /// Ready.
    True,
    /// Not ready: the reason and message say why.
    False,
    /// Not known (a condition `Unknown`, something that could not be read).
    Unknown,
    /// A line that has no readiness of its own (a heading, a maintenance window).
    #[default]
    #[serde(rename = "")]
    None,
}

impl Readiness {
    /// The readiness of a condition's `status`.
    pub fn of_status(status: &str) -> Self {
        match status {
            "True" => Self::True,
            "False" => Self::False,
            _ => Self::Unknown,
        }
    }

    fn text(self) -> &'static str {
        match self {
            Self::True => "True",
            Self::False => "False",
            Self::Unknown => "Unknown",
            Self::None => "",
        }
    }

    /// The ANSI colour of the column: green, red, yellow.
    fn colour(self) -> Option<&'static str> {
        match self {
            Self::True => Some("\x1b[32m"),
            Self::False => Some("\x1b[31m"),
            Self::Unknown => Some("\x1b[33m"),
            Self::None => None,
        }
    }
}

/// One line of the tree: an object (or a part of one) and the condition that matters for it.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct Line {
    /// What it is: `AWSCluster`, `Stack`, `Instance`, `Pod`, …
    pub kind: String,
    /// Its name (`namespace/name` for the root).
    pub name: String,
    /// Whether it is ready.
    pub ready: Readiness,
    /// The reason of the condition that matters (CamelCase), or a state such as
    /// `CREATE_COMPLETE`; a condition other than `Ready` is named before it (`UpdatePending:
    /// AwaitingApproval`).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Since when (the condition's last transition).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub since: Option<Timestamp>,
    /// The condition's message (the text output shows its first line).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// The objects below it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<Line>,
}

impl Line {
    /// A line for `kind` `name`, with nothing else yet.
    pub fn new(kind: impl Into<String>, name: impl Into<String>) -> Self {
        Self { kind: kind.into(), name: name.into(), ..Default::default() }
    }

    /// With readiness `ready`.
    pub fn ready(mut self, ready: Readiness) -> Self {
        self.ready = ready;
        self
    }

    /// With reason `reason`.
    pub fn reason(mut self, reason: impl Into<String>) -> Self {
        self.reason = reason.into();
        self
    }

    /// With message `message`.
    pub fn message(mut self, message: impl Into<String>) -> Self {
        self.message = message.into();
        self
    }

    /// Since `since`, if known.
    pub fn since(mut self, since: Option<Timestamp>) -> Self {
        self.since = since;
        self
    }

    /// With `child` below it.
    pub fn child(mut self, child: Line) -> Self {
        self.children.push(child);
        self
    }

    /// A line for an object with `metav1.Condition`s, showing the condition that matters:
    ///
    /// 1. the first condition that `asks` says asks for a person (an update waiting for
    ///    approval): nothing moves until someone acts, whatever else holds;
    /// 2. `Ready` when it is not `True`: what is wrong or still to come;
    /// 3. the first of `notable` (condition types such as `Drifted`) that is `True`;
    /// 4. `Ready` itself.
    ///
    /// A condition other than `Ready` is named before its reason. Without conditions the object
    /// has not been reconciled yet, and the line says so.
    pub fn from_conditions(
        kind: impl Into<String>,
        name: impl Into<String>,
        conditions: &[Condition],
        asks: &dyn Fn(&Condition) -> bool,
        notable: &[&str],
    ) -> Self {
        let line = Self::new(kind, name);
        let Some(ready) = conditions.iter().find(|c| c.type_ == operatorkit::status::READY) else {
            return line
                .ready(Readiness::Unknown)
                .reason("NotReconciled")
                .message("no Ready condition yet: the operator has not reconciled this object");
        };
        let readiness = Readiness::of_status(&ready.status);
        let shown = conditions
            .iter()
            .find(|c| asks(c))
            .or((readiness != Readiness::True).then_some(ready))
            .or_else(|| notable.iter().find_map(|t| conditions.iter().find(|c| c.type_ == *t && c.status == "True")))
            .unwrap_or(ready);
        let reason = if shown.type_ == operatorkit::status::READY {
            shown.reason.clone()
        } else {
            format!("{}: {}", shown.type_, shown.reason)
        };
        line.ready(readiness).reason(reason).message(shown.message.clone()).since(Some(shown.last_transition_time.0))
    }
}

/// For [`Line::from_conditions`]: no condition asks for a person.
pub fn nothing_asks(_: &Condition) -> bool {
    false
}

/// The line of a cluster's maintenance windows at `now`: open until when, or when the next one
/// opens; a schedule that does not parse is `False` with every problem. `None` without a
/// schedule (disruptive work runs at any time).
pub fn maintenance_line(field: &str, spec: Option<&Maintenance>, now: Timestamp) -> Option<Line> {
    let spec = spec?;
    let line = Line::new("Maintenance", field);
    let schedule = match Schedule::parse(field, spec) {
        Ok(s) => s,
        Err(problems) => {
            let message = problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ");
            return Some(line.ready(Readiness::False).reason(crate::disruption::INVALID_MAINTENANCE).message(message));
        }
    };
    let within = |at: Timestamp| roughly(crate::maintenance::wait_until(now, at));
    Some(match schedule.state(now) {
        WindowState::Unrestricted => line.reason("Unrestricted").message("no window: disruptive work runs at any time"),
        WindowState::Open { closes } => line.reason("Open").message(format!(
            "disruptive work may run; the window closes at {} (in {})",
            schedule.local(closes),
            within(closes)
        )),
        WindowState::Closed { opens, .. } => line.reason("Closed").message(format!(
            "disruptive work waits; the next window opens at {} (in {})",
            schedule.local(opens),
            within(opens)
        )),
    })
}

/// `d` in its two largest units (`4d12h`, `3h5m`, `42s`): how far off a window is, without the
/// false precision of seconds in days.
fn roughly(d: std::time::Duration) -> String {
    let secs = d.as_secs();
    let unit = [86_400, 3_600, 60, 1].into_iter().find(|u| secs >= *u).unwrap_or(1);
    let next = match unit {
        86_400 => 3_600,
        3_600 => 60,
        _ => 1,
    };
    format_duration(std::time::Duration::from_secs(secs - secs % next))
}

/// The line of a drain (a DrainerConfig): `Drained` or `Timeout` when it ended, else the
/// `Draining` condition's progress, with the evicted pods counted.
pub fn drain_line(drain: &DrainerConfig) -> Line {
    let conditions = drain.status.as_ref().map(|s| s.conditions.as_slice()).unwrap_or_default();
    let find = |t: &str| conditions.iter().find(|c| c.type_ == t && c.status == apis::drainer::STATUS_TRUE);
    let evicted = drain.status.as_ref().map_or(0, |s| s.evicted_pods);
    let line = Line::new("Drain", drain.spec.guest.node.name.clone());
    if let Some(c) = find(CONDITION_DRAINED) {
        return line
            .ready(Readiness::True)
            .reason(CONDITION_DRAINED)
            .since(Some(c.last_transition_time.0))
            .message(format!("{evicted} pods evicted; the instance or pod goes next"));
    }
    if let Some(c) = find(CONDITION_TIMEOUT) {
        return line.ready(Readiness::False).reason(CONDITION_TIMEOUT).since(Some(c.last_transition_time.0)).message(
            c.message
                .clone()
                .unwrap_or_else(|| format!("draining took too long ({evicted} pods evicted); the node goes anyway")),
        );
    }
    match conditions.iter().find(|c| c.type_ == CONDITION_DRAINING) {
        Some(c) => line
            .ready(if c.status == apis::drainer::STATUS_TRUE { Readiness::False } else { Readiness::Unknown })
            .reason(format!("{CONDITION_DRAINING}: {}", c.reason.clone().unwrap_or_default()))
            .since(Some(c.last_transition_time.0))
            .message(format!("{evicted} pods evicted; {}", c.message.clone().unwrap_or_default())),
        None => line
            .ready(Readiness::Unknown)
            .reason("DrainRequested")
            .since(drain.creation_timestamp().map(|t: Time| t.0))
            .message("waiting for the drain executor"),
    }
}

/// How long ago `since` was at `now`, as `kubectl get` shows ages: `45s`, `12m`, `5h`, `3d`.
pub fn age(since: Timestamp, now: Timestamp) -> String {
    let secs = since.duration_until(now).as_secs().max(0);
    match secs {
        s if s < 120 => format!("{s}s"),
        s if s < 120 * 60 => format!("{}m", s / 60),
        s if s < 48 * 3600 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
}

/// The longest message the text output shows; JSON has it whole.
const MESSAGE_WIDTH: usize = 140;

/// The one-line form of `message`: its first line, cut at [`MESSAGE_WIDTH`] characters.
fn one_line(message: &str) -> String {
    let first = message.lines().next().unwrap_or_default().trim();
    if first.chars().count() > MESSAGE_WIDTH || message.trim().lines().nth(1).is_some() {
        let cut: String = first.chars().take(MESSAGE_WIDTH).collect();
        format!("{cut}…")
    } else {
        first.to_string()
    }
}

struct Row {
    name: String,
    ready: Readiness,
    reason: String,
    age: String,
    message: String,
}

fn rows(line: &Line, prefix: &str, branch: &str, now: Timestamp, out: &mut Vec<Row>) {
    out.push(Row {
        name: format!("{prefix}{branch}{}/{}", line.kind, line.name),
        ready: line.ready,
        reason: line.reason.clone(),
        age: line.since.map(|s| age(s, now)).unwrap_or_default(),
        message: one_line(&line.message),
    });
    let below = match branch {
        "" => prefix.to_string(),
        "├─" => format!("{prefix}│ "),
        _ => format!("{prefix}  "),
    };
    for (i, child) in line.children.iter().enumerate() {
        let last = i + 1 == line.children.len();
        rows(child, &below, if last { "└─" } else { "├─" }, now, out);
    }
}

/// Print `trees` as `output` at `now`; the text form is coloured iff `colour` (pass
/// [`operatorkit::logging::colour`] of whether the output is a terminal).
pub fn write(out: &mut dyn Write, trees: &[Line], output: Output, now: Timestamp, colour: bool) -> std::io::Result<()> {
    if output == Output::Json {
        serde_json::to_writer_pretty(&mut *out, trees)?;
        return writeln!(out);
    }
    let mut all = Vec::new();
    for tree in trees {
        rows(tree, "", "", now, &mut all);
    }
    let header = Row {
        name: "NAME".into(),
        ready: Readiness::None,
        reason: "REASON".into(),
        age: "SINCE".into(),
        message: "MESSAGE".into(),
    };
    let width = |f: &dyn Fn(&Row) -> usize| all.iter().chain([&header]).map(f).max().unwrap_or(0);
    let name_w = width(&|r| r.name.chars().count());
    let reason_w = width(&|r| r.reason.chars().count());
    let age_w = width(&|r| r.age.chars().count());
    let ready_w = "Unknown".len();
    let (bold, reset) = if colour { ("\x1b[1m", "\x1b[0m") } else { ("", "") };
    let head = format!(
        "{:name_w$}  {:ready_w$}  {:reason_w$}  {:age_w$}  {}",
        header.name, "READY", header.reason, header.age, header.message
    );
    writeln!(out, "{bold}{}{reset}", head.trim_end())?;
    for row in &all {
        let name_pad = name_w - row.name.chars().count();
        let ready_text = format!("{:ready_w$}", row.ready.text());
        let ready = match (colour, row.ready.colour()) {
            (true, Some(c)) => format!("{c}{ready_text}{reset}"),
            _ => ready_text,
        };
        let text = format!(
            "{}{:name_pad$}  {ready}  {:reason_w$}  {:age_w$}  {}",
            row.name, "", row.reason, row.age, row.message
        );
        writeln!(out, "{}", text.trim_end())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + secs).expect("in range")
    }

    fn condition(type_: &str, status: &str, reason: &str, message: &str, secs: i64) -> Condition {
        Condition {
            type_: type_.into(),
            status: status.into(),
            reason: reason.into(),
            message: message.into(),
            last_transition_time: Time(at(secs)),
            observed_generation: None,
        }
    }

    #[test]
    fn ready_false_matters_most_then_attention_conditions_then_ready() {
        let not_ready = [
            condition("UpdatePending", "True", "AwaitingApproval", "approve plan abc", 0),
            condition("Ready", "False", "StackFailed", "stack x failed", 5),
        ];
        let asks = |c: &Condition| c.type_ == "UpdatePending" && c.reason == "AwaitingApproval";
        let l = Line::from_conditions("AWSControlPlane", "cp001", &not_ready, &nothing_asks, &["UpdatePending"]);
        assert_eq!(
            (l.ready, l.reason.as_str(), l.message.as_str()),
            (Readiness::False, "StackFailed", "stack x failed")
        );
        let l = Line::from_conditions("AWSControlPlane", "cp001", &not_ready, &asks, &[]);
        assert_eq!(
            (l.ready, l.reason.as_str(), l.message.as_str()),
            (Readiness::False, "UpdatePending: AwaitingApproval", "approve plan abc"),
            "approval asks for a person: it comes first"
        );

        let waiting = [
            condition("Ready", "True", "StacksComplete", "", 0),
            condition("UpdatePending", "True", "AwaitingApproval", "approve plan abc", 5),
        ];
        let l =
            Line::from_conditions("AWSControlPlane", "cp001", &waiting, &nothing_asks, &["Drifted", "UpdatePending"]);
        assert_eq!(
            (l.ready, l.reason.as_str(), l.message.as_str(), l.since),
            (Readiness::True, "UpdatePending: AwaitingApproval", "approve plan abc", Some(at(5)))
        );

        let calm =
            [condition("Ready", "True", "StacksComplete", "", 0), condition("UpdatePending", "False", "None", "", 5)];
        let l = Line::from_conditions("AWSControlPlane", "cp001", &calm, &asks, &["UpdatePending"]);
        assert_eq!((l.ready, l.reason.as_str()), (Readiness::True, "StacksComplete"));

        let l = Line::from_conditions("AWSControlPlane", "cp001", &[], &asks, &["UpdatePending"]);
        assert_eq!((l.ready, l.reason.as_str()), (Readiness::Unknown, "NotReconciled"));
    }

    fn sample() -> Vec<Line> {
        let cluster = Line::new("AWSCluster", "org-acme/a1b2c")
            .ready(Readiness::True)
            .reason("StacksComplete")
            .since(Some(at(0)))
            .child(
                Line::new("AWSControlPlane", "cp001")
                    .ready(Readiness::False)
                    .reason("StackFailed")
                    .since(Some(at(3000)))
                    .message("stack failed\nsecond line")
                    .child(Line::new("Instance", "i-1").ready(Readiness::True).reason("InService")),
            )
            .child(Line::new("AWSMachineDeployment", "np001").ready(Readiness::Unknown));
        vec![cluster]
    }

    #[test]
    fn the_text_is_an_aligned_tree_without_escape_codes_unless_coloured() {
        let mut out = Vec::new();
        write(&mut out, &sample(), Output::Text, at(3600), false).expect("written");
        let text = String::from_utf8(out).expect("UTF-8");
        let expected = "\
NAME                          READY    REASON          SINCE  MESSAGE
AWSCluster/org-acme/a1b2c     True     StacksComplete  60m
├─AWSControlPlane/cp001       False    StackFailed     10m    stack failed…
│ └─Instance/i-1              True     InService
└─AWSMachineDeployment/np001  Unknown
";
        assert_eq!(text, expected);
        assert!(!text.contains('\x1b'));

        let mut out = Vec::new();
        write(&mut out, &sample(), Output::Text, at(3600), true).expect("written");
        let coloured = String::from_utf8(out).expect("UTF-8");
        assert!(coloured.contains("\x1b[31mFalse"), "{coloured}");
    }

    #[test]
    fn json_carries_whole_messages_and_timestamps() {
        let mut out = Vec::new();
        write(&mut out, &sample(), Output::Json, at(3600), true).expect("written");
        let v: serde_json::Value = serde_json::from_slice(&out).expect("JSON");
        let cp = &v[0]["children"][0];
        assert_eq!(cp["message"], "stack failed\nsecond line");
        assert_eq!(cp["ready"], "False");
        assert_eq!(cp["since"], at(3000).to_string());
        assert!(!String::from_utf8_lossy(&out).contains('\x1b'));
    }

    #[test]
    fn ages_read_like_kubectl() {
        assert_eq!(age(at(0), at(59)), "59s");
        assert_eq!(age(at(0), at(600)), "10m");
        assert_eq!(age(at(0), at(3 * 3600)), "3h");
        assert_eq!(age(at(0), at(3 * 86_400)), "3d");
        assert_eq!(age(at(10), at(0)), "0s", "a clock behind the server's");
    }

    #[test]
    fn a_maintenance_window_says_when_it_opens_or_closes() {
        let spec: Maintenance = serde_json::from_value(serde_json::json!({
            "timeZone": "UTC", "windows": [{"days": ["Mon"], "start": "02:00", "duration": "2h"}]
        }))
        .expect("maintenance");
        // 1_800_000_000 is Friday 2027-01-15 08:00 UTC.
        let closed = maintenance_line("spec.cluster.maintenance", Some(&spec), at(0)).expect("a line");
        assert_eq!(closed.reason, "Closed", "{closed:?}");
        assert!(closed.message.contains("(in 2d18h)"), "{closed:?}");
        let open =
            maintenance_line("spec.cluster.maintenance", Some(&spec), at(2 * 86_400 + 18 * 3600 + 60)).expect("a line");
        assert_eq!(open.reason, "Open", "{open:?}");
        assert!(maintenance_line("spec.cluster.maintenance", None, at(0)).is_none());
    }
}

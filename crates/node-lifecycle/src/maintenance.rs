//! Maintenance windows and node max-age, as pure functions of a spec and a clock.
//!
//! Platform teams want disruptive work (a rolling node replacement, replacing nodes past their
//! maximum age, terminating an unhealthy node if they opt in) to happen only in weekly slots of
//! their choosing, in their own time zone. Both operators read the same provider-neutral spec
//! ([`apis::maintenance::Maintenance`]) and ask this module two questions: is a window open
//! now, and when does the next one start. Nothing here reads a clock or the network: callers
//! pass `now` (from a [`Clock`] they share between controllers, which tests move), so every rule
//! is unit-tested with fixed instants, the daylight-saving changes of Europe/Berlin and
//! America/New_York included.
//!
//! ## Windows
//!
//! A window is a set of days of the week, a local start time `HH:MM` and a duration (`4h`,
//! `90m`, `1h30m`, at most 7 days). A window starting on Monday 23:00 for 4 hours is open until
//! Tuesday 03:00. Windows that overlap or touch are merged, so a window that runs into the next
//! one keeps the work going. An empty list of days means every day; an empty list of windows
//! means no window restriction at all (the rollout limits still apply).
//!
//! ## Daylight-saving time (the choices)
//!
//! - **A start in a skipped local hour** (spring forward: 02:30 on the last Sunday of March in
//!   Berlin does not exist) starts at the first valid instant after the gap: 03:00 local, which
//!   is the instant the clocks jumped.
//! - **A start in a repeated local hour** (fall back: 02:30 happens twice on the last Sunday of
//!   October in Berlin) uses the first occurrence, so a window opens once, not twice.
//! - **A duration is elapsed time**: a `4h` window starting 01:00 on a spring-forward day ends
//!   at 06:00 local (four real hours later), not at 05:00. People expect maintenance to get the
//!   time they granted.
//!
//! The time zone database is the one compiled into the operator (`chrono-tz`), so a window
//! means the same whatever the image's `/usr/share/zoneinfo` holds.
//!
//! ## Max age
//!
//! [`max_age_step`] picks the one node to replace next: the oldest past the age, and only while
//! no replacement is in flight, so nodes go one at a time and a node already being replaced
//! (terminating, or terminated earlier and still listed) is never counted twice.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use apis::maintenance::Maintenance;
use chrono::{Datelike as _, LocalResult, NaiveDate, NaiveDateTime, NaiveTime, TimeZone as _, Weekday};
use chrono_tz::Tz;
use jiff::Timestamp;

/// The longest window: a week, which is always open.
pub const MAX_WINDOW: Duration = Duration::from_secs(7 * 24 * 3600);

/// The shortest `maxNodeAge`: nodes younger than a day are not replaced for their age.
pub const MIN_MAX_AGE: Duration = Duration::from_secs(24 * 3600);

/// Input a window spec or a max age cannot be used with. Each names the field (as its path in
/// the object, e.g. `spec.cluster.maintenance.windows[0].start`) and says how to fix it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MaintenanceError {
    /// A window's days, start or duration cannot be read.
    #[error("{field}: {value:?} {problem}")]
    MalformedWindow {
        /// The field's path.
        field: String,
        /// The value as given.
        value: String,
        /// What is wrong and what would be right.
        problem: String,
    },
    /// The time zone is not an IANA zone name.
    #[error(
        "{field}: {value:?} is not a known IANA time zone; use a name such as \"Europe/Berlin\", \"America/New_York\" or \"UTC\""
    )]
    UnknownTimeZone {
        /// The field's path.
        field: String,
        /// The value as given.
        value: String,
    },
    /// A window is too short to hold one batch and its pause: a roll started in it could not
    /// finish one step before it closes.
    #[error(
        "{field}: a window of {window} is shorter than the rolling update's pause of {pause} between batches; make the window longer than {pause} or shorten the pause"
    )]
    WindowShorterThanPause {
        /// The window's duration field.
        field: String,
        /// The window's duration, as given.
        window: String,
        /// The pause, in the same notation.
        pause: String,
    },
    /// A duration field cannot be read.
    #[error(
        "{field}: {value:?} is not a duration; write it as a number and a unit, such as \"30d\", \"720h\" or \"90m\""
    )]
    MalformedDuration {
        /// The field's path.
        field: String,
        /// The value as given.
        value: String,
    },
    /// A max age under [`MIN_MAX_AGE`].
    #[error("{field}: {value:?} is below the minimum of one day; set it to \"1d\" or more, or remove it")]
    MaxAgeTooShort {
        /// The field's path.
        field: String,
        /// The value as given.
        value: String,
    },
}

impl MaintenanceError {
    /// The path of the field at fault.
    pub fn field(&self) -> &str {
        match self {
            Self::MalformedWindow { field, .. }
            | Self::UnknownTimeZone { field, .. }
            | Self::WindowShorterThanPause { field, .. }
            | Self::MalformedDuration { field, .. }
            | Self::MaxAgeTooShort { field, .. } => field,
        }
    }
}

/// Read a duration such as `30d`, `720h`, `90m`, `1h30m` or `45s`: numbers each followed by a
/// unit (`d`, `h`, `m`, `s`), largest unit first, each at most once. `None` when malformed or
/// zero.
pub fn parse_duration(raw: &str) -> Option<Duration> {
    let mut rest = raw.trim();
    if rest.is_empty() {
        return None;
    }
    let mut total: u64 = 0;
    let mut last_rank = 0;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        if digits == 0 || digits == rest.len() {
            return None;
        }
        let value: u64 = rest[..digits].parse().ok()?;
        let unit = rest[digits..].chars().next()?;
        let (rank, factor) = match unit {
            'd' => (1, 86_400),
            'h' => (2, 3_600),
            'm' => (3, 60),
            's' => (4, 1),
            _ => return None,
        };
        if rank <= last_rank {
            return None;
        }
        last_rank = rank;
        total = total.checked_add(value.checked_mul(factor)?)?;
        rest = &rest[digits + 1..];
    }
    (total > 0).then(|| Duration::from_secs(total))
}

/// How long from `now` until `at` (a window's opening, a node coming due), in whole seconds
/// and at least one: a requeue after zero would spin.
pub fn wait_until(now: Timestamp, at: Timestamp) -> Duration {
    Duration::from_secs(now.duration_until(at).as_secs().max(1) as u64)
}

/// A duration in the notation [`parse_duration`] reads, largest units first (`1h30m`).
pub fn format_duration(d: Duration) -> String {
    let mut secs = d.as_secs();
    if secs == 0 {
        return "0s".into();
    }
    let mut out = String::new();
    for (unit, factor) in [("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1)] {
        if secs >= factor {
            out.push_str(&format!("{}{unit}", secs / factor));
            secs %= factor;
        }
    }
    out
}

/// Read a max age (`maxNodeAge`) at `field`: a duration of at least one day.
pub fn parse_max_age(field: &str, raw: &str) -> Result<Duration, MaintenanceError> {
    let age = parse_duration(raw)
        .ok_or_else(|| MaintenanceError::MalformedDuration { field: field.into(), value: raw.into() })?;
    if age < MIN_MAX_AGE {
        return Err(MaintenanceError::MaxAgeTooShort { field: field.into(), value: raw.into() });
    }
    Ok(age)
}

/// One weekly slot, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Window {
    /// The days it starts on.
    pub days: BTreeSet<u32>,
    /// The local start time.
    pub start: NaiveTime,
    /// How long it stays open (elapsed time).
    pub duration: Duration,
    /// The duration as given, for messages.
    duration_text: String,
    /// The path of the window, e.g. `spec.cluster.maintenance.windows[0]`.
    field: String,
}

/// A cluster's maintenance schedule: its windows in its time zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    zone: Tz,
    windows: Vec<Window>,
}

/// Whether disruptive work may run now, and until or from when.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowState {
    /// No window restricts the work.
    Unrestricted,
    /// A window is open until `closes`.
    Open {
        /// When the open window (merged with any it runs into) closes.
        closes: Timestamp,
    },
    /// Closed: the next window opens at `opens`.
    Closed {
        /// When the next window opens.
        opens: Timestamp,
        /// When it closes.
        closes: Timestamp,
    },
}

impl WindowState {
    /// Whether work may run now.
    pub fn is_open(&self) -> bool {
        !matches!(self, Self::Closed { .. })
    }
}

fn weekday(raw: &str) -> Option<Weekday> {
    let day = raw.trim().to_ascii_lowercase();
    let full = [
        ("monday", Weekday::Mon),
        ("tuesday", Weekday::Tue),
        ("wednesday", Weekday::Wed),
        ("thursday", Weekday::Thu),
        ("friday", Weekday::Fri),
        ("saturday", Weekday::Sat),
        ("sunday", Weekday::Sun),
    ];
    full.iter().find(|(name, _)| day == *name || (day.len() == 3 && name.starts_with(&day))).map(|(_, d)| *d)
}

fn start_time(raw: &str) -> Option<NaiveTime> {
    let (h, m) = raw.trim().split_once(':')?;
    if h.len() != 2 || m.len() != 2 {
        return None;
    }
    NaiveTime::from_hms_opt(h.parse().ok()?, m.parse().ok()?, 0)
}

impl Schedule {
    /// Read `spec`, whose path in the object is `field` (e.g. `spec.cluster.maintenance`).
    /// Returns every problem found.
    pub fn parse(field: &str, spec: &Maintenance) -> Result<Self, Vec<MaintenanceError>> {
        let mut errors = Vec::new();
        let raw_zone = spec.time_zone.as_deref().unwrap_or("UTC");
        let zone = match raw_zone.trim().parse::<Tz>() {
            Ok(z) => Some(z),
            Err(_) => {
                errors.push(MaintenanceError::UnknownTimeZone {
                    field: format!("{field}.timeZone"),
                    value: raw_zone.into(),
                });
                None
            }
        };
        let mut windows = Vec::new();
        for (i, w) in spec.windows.iter().enumerate() {
            let at = format!("{field}.windows[{i}]");
            let mut days = BTreeSet::new();
            for (j, d) in w.days.iter().enumerate() {
                match weekday(d) {
                    Some(day) => {
                        days.insert(day.num_days_from_monday());
                    }
                    None => errors.push(MaintenanceError::MalformedWindow {
                        field: format!("{at}.days[{j}]"),
                        value: d.clone(),
                        problem: "is not a day of the week; use Mon, Tue, Wed, Thu, Fri, Sat or Sun (or the full name)"
                            .into(),
                    }),
                }
            }
            if w.days.is_empty() {
                days = (0..7).collect();
            }
            let start = start_time(&w.start);
            if start.is_none() {
                errors.push(MaintenanceError::MalformedWindow {
                    field: format!("{at}.start"),
                    value: w.start.clone(),
                    problem:
                        "is not a local time; write it as HH:MM on a 24-hour clock, such as \"02:00\" or \"22:30\""
                            .into(),
                });
            }
            let duration = match parse_duration(&w.duration) {
                Some(d) if d <= MAX_WINDOW => Some(d),
                Some(_) => {
                    errors.push(MaintenanceError::MalformedWindow {
                        field: format!("{at}.duration"),
                        value: w.duration.clone(),
                        problem: "is longer than a week; use at most \"7d\" (or remove the windows to allow work at any time)"
                            .into(),
                    });
                    None
                }
                None => {
                    errors.push(MaintenanceError::MalformedWindow {
                        field: format!("{at}.duration"),
                        value: w.duration.clone(),
                        problem: "is not a duration above zero; write a number and a unit, such as \"4h\", \"90m\" or \"1h30m\""
                            .into(),
                    });
                    None
                }
            };
            if let (Some(start), Some(duration)) = (start, duration) {
                windows.push(Window { days, start, duration, duration_text: w.duration.trim().into(), field: at });
            }
        }
        match zone {
            Some(zone) if errors.is_empty() => Ok(Self { zone, windows }),
            _ => Err(errors),
        }
    }

    /// The time zone.
    pub fn zone(&self) -> Tz {
        self.zone
    }

    /// The windows.
    pub fn windows(&self) -> &[Window] {
        &self.windows
    }

    /// `at` as a local time in the schedule's zone, for messages: `Mon 22:00 CEST`.
    pub fn local(&self, at: Timestamp) -> String {
        match chrono::DateTime::from_timestamp(at.as_second(), 0) {
            Some(t) => t.with_timezone(&self.zone).format("%a %H:%M %Z").to_string(),
            None => at.to_string(),
        }
    }

    /// `Err` naming the first window shorter than `pause` (a rolling update's pause between
    /// batches): a roll could not complete one batch and its pause inside it.
    pub fn check_pause(&self, pause: Duration) -> Result<(), MaintenanceError> {
        match self.windows.iter().find(|w| w.duration < pause) {
            Some(w) => Err(MaintenanceError::WindowShorterThanPause {
                field: format!("{}.duration", w.field),
                window: w.duration_text.clone(),
                pause: format_duration(pause),
            }),
            None => Ok(()),
        }
    }

    /// Where `now` stands: unrestricted (no windows), inside a window (until when), or outside
    /// (when the next one opens).
    pub fn state(&self, now: Timestamp) -> WindowState {
        match self.next_window(now) {
            None => WindowState::Unrestricted,
            Some((opens, closes)) if opens <= now => WindowState::Open { closes },
            Some((opens, closes)) => WindowState::Closed { opens, closes },
        }
    }

    /// Whether a window is open at `now` (always, without windows).
    pub fn is_open(&self, now: Timestamp) -> bool {
        self.state(now).is_open()
    }

    /// The window open at `now`, or else the next one to open, as `(start, end)`; windows that
    /// overlap or touch count as one. `None` without windows.
    pub fn next_window(&self, now: Timestamp) -> Option<(Timestamp, Timestamp)> {
        if self.windows.is_empty() {
            return None;
        }
        let now_utc = chrono::DateTime::from_timestamp(now.as_second(), now.subsec_nanosecond().max(0) as u32)?;
        let today = now_utc.with_timezone(&self.zone).date_naive();
        // A window may have opened up to a week before today and still be open; the next one
        // opens within a week after.
        let mut slots: Vec<(i64, i64)> = Vec::new();
        for offset in -8i64..=8 {
            let Some(day) = today.checked_add_signed(chrono::TimeDelta::days(offset)) else { continue };
            for w in &self.windows {
                if !w.days.contains(&day.weekday().num_days_from_monday()) {
                    continue;
                }
                let Some(start) = self.resolve(day, w.start) else { continue };
                slots.push((start, start.saturating_add(w.duration.as_secs() as i64)));
            }
        }
        slots.sort_unstable();
        let mut merged: Vec<(i64, i64)> = Vec::new();
        for (start, end) in slots {
            match merged.last_mut() {
                Some(last) if start <= last.1 => last.1 = last.1.max(end),
                _ => merged.push((start, end)),
            }
        }
        let now_s = now.as_second();
        let (start, end) = merged.into_iter().find(|(_, end)| *end > now_s)?;
        Some((Timestamp::from_second(start).ok()?, Timestamp::from_second(end).ok()?))
    }

    /// The instant (Unix seconds) local time `time` on `day` names: the first occurrence of a
    /// repeated hour, the first valid instant after a skipped one.
    fn resolve(&self, day: NaiveDate, time: NaiveTime) -> Option<i64> {
        let mut local = NaiveDateTime::new(day, time);
        // Gaps are whole minutes in the zone database; no gap is longer than a day.
        for _ in 0..=24 * 60 {
            match self.zone.from_local_datetime(&local) {
                LocalResult::Single(t) => return Some(t.timestamp()),
                LocalResult::Ambiguous(first, _) => return Some(first.timestamp()),
                LocalResult::None => local += chrono::TimeDelta::minutes(1),
            }
        }
        None
    }
}

/// A clock the controllers of one process share: the system's time, shifted by an offset that
/// tests set to move time without waiting. Production code never shifts it.
#[derive(Debug, Clone, Default)]
pub struct Clock {
    offset_seconds: Arc<AtomicI64>,
}

impl Clock {
    /// The system clock.
    pub fn system() -> Self {
        Self::default()
    }

    /// Now, by this clock.
    pub fn now(&self) -> Timestamp {
        let offset = self.offset_seconds.load(Ordering::Relaxed);
        Timestamp::now().checked_add(jiff::SignedDuration::from_secs(offset)).unwrap_or(Timestamp::MAX)
    }

    /// Make this clock (and every clone) read `at` now, and run on from there.
    pub fn set(&self, at: Timestamp) {
        let offset = at.as_second() - Timestamp::now().as_second();
        self.offset_seconds.store(offset, Ordering::Relaxed);
    }

    /// Move this clock (and every clone) forward by `by`.
    pub fn advance(&self, by: Duration) {
        self.offset_seconds.fetch_add(by.as_secs() as i64, Ordering::Relaxed);
    }
}

/// One node (or instance) as max-age replacement sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgedNode {
    /// Its id (an EC2 instance id, a node name).
    pub id: String,
    /// When it was launched.
    pub launched: Timestamp,
    /// Whether it serves normally; `false` while it is pending, terminating, detaching, or
    /// otherwise on its way in or out.
    pub in_service: bool,
}

/// What max-age replacement does next in one group of nodes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MaxAgeStep {
    /// Replace this node now.
    Replace {
        /// The node.
        id: String,
        /// How old it is.
        age: Duration,
    },
    /// A replacement is in flight (this node is on its way in or out, or was replaced and is
    /// still listed): nothing else goes until it is done.
    Busy(String),
    /// No node is past the age; the oldest one reaches it at `due` (`None`: no node).
    Idle {
        /// When the next node comes due.
        due: Option<Timestamp>,
    },
}

/// The next max-age step among `nodes` at `now`: one at a time, oldest first. `replaced` holds
/// the nodes already sent away (a replacement the listing may not show yet); they count as in
/// flight while listed, never as due again.
pub fn max_age_step(nodes: &[AgedNode], replaced: &BTreeSet<String>, max_age: Duration, now: Timestamp) -> MaxAgeStep {
    let mut sorted: Vec<&AgedNode> = nodes.iter().collect();
    sorted.sort_by(|a, b| a.launched.cmp(&b.launched).then_with(|| a.id.cmp(&b.id)));
    if let Some(busy) = sorted.iter().find(|n| !n.in_service || replaced.contains(&n.id)) {
        return MaxAgeStep::Busy(busy.id.clone());
    }
    let max_age_signed = jiff::SignedDuration::from_secs(max_age.as_secs() as i64);
    match sorted.first() {
        None => MaxAgeStep::Idle { due: None },
        Some(oldest) => {
            let age = now.duration_since(oldest.launched);
            if age > max_age_signed {
                MaxAgeStep::Replace { id: oldest.id.clone(), age: Duration::from_secs(age.as_secs().max(0) as u64) }
            } else {
                MaxAgeStep::Idle { due: oldest.launched.checked_add(max_age_signed).ok() }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use apis::maintenance::Window as SpecWindow;

    fn spec(zone: &str, windows: &[(&[&str], &str, &str)]) -> Maintenance {
        Maintenance {
            time_zone: Some(zone.into()),
            windows: windows
                .iter()
                .map(|(days, start, duration)| SpecWindow {
                    days: days.iter().map(|d| d.to_string()).collect(),
                    start: start.to_string(),
                    duration: duration.to_string(),
                })
                .collect(),
            ..Maintenance::default()
        }
    }

    fn schedule(zone: &str, windows: &[(&[&str], &str, &str)]) -> Schedule {
        Schedule::parse("spec.cluster.maintenance", &spec(zone, windows)).expect("a valid schedule")
    }

    fn at(rfc3339: &str) -> Timestamp {
        rfc3339.parse().expect("an instant")
    }

    #[test]
    fn durations_read_in_units_largest_first() {
        assert_eq!(parse_duration("4h"), Some(Duration::from_secs(4 * 3600)));
        assert_eq!(parse_duration("90m"), Some(Duration::from_secs(90 * 60)));
        assert_eq!(parse_duration("1h30m"), Some(Duration::from_secs(90 * 60)));
        assert_eq!(parse_duration("30d"), Some(Duration::from_secs(30 * 86_400)));
        assert_eq!(parse_duration("720h"), Some(Duration::from_secs(30 * 86_400)));
        for bad in ["", "4", "h", "30m1h", "4h4h", "1.5h", "-1h", "4 h", "0h", "4w"] {
            assert_eq!(parse_duration(bad), None, "{bad:?}");
        }
        assert_eq!(format_duration(Duration::from_secs(90 * 60)), "1h30m");
        assert_eq!(format_duration(Duration::from_secs(86_400 + 5)), "1d5s");
        let now: Timestamp = "2026-06-01T12:00:00Z".parse().expect("t");
        let later: Timestamp = "2026-06-01T12:01:30Z".parse().expect("t");
        assert_eq!(wait_until(now, later), Duration::from_secs(90));
        assert_eq!(wait_until(later, now), Duration::from_secs(1), "past: at least a second");
    }

    #[test]
    fn a_window_is_open_from_its_local_start_for_its_duration() {
        // Monday 22:00 Berlin (CEST, +02:00) for 4 h: open until Tuesday 02:00 local.
        let s = schedule("Europe/Berlin", &[(&["Mon"], "22:00", "4h")]);
        // Monday 2026-06-01.
        assert_eq!(
            s.state(at("2026-06-01T19:59:00Z")),
            WindowState::Closed { opens: at("2026-06-01T20:00:00Z"), closes: at("2026-06-02T00:00:00Z") }
        );
        assert!(s.is_open(at("2026-06-01T20:00:00Z")));
        assert!(s.is_open(at("2026-06-01T23:59:59Z")), "past midnight UTC and local, still in the window");
        assert!(!s.is_open(at("2026-06-02T00:00:00Z")), "the end is exclusive");
        assert_eq!(s.local(at("2026-06-01T20:00:00Z")), "Mon 22:00 CEST");
        // After it closes, the next one is a week later.
        assert_eq!(
            s.next_window(at("2026-06-02T00:00:00Z")),
            Some((at("2026-06-08T20:00:00Z"), at("2026-06-09T00:00:00Z")))
        );
    }

    #[test]
    fn days_listed_several_ways_and_overlapping_windows_merge() {
        let s = schedule("UTC", &[(&["saturday", "SUN"], "22:00", "4h"), (&["Sun"], "01:00", "2h")]);
        // Saturday 2026-06-06 22:00 → Sunday 02:00, merged with Sunday 01:00 → 03:00, and
        // Sunday 22:00 → Monday 02:00 apart.
        assert_eq!(
            s.next_window(at("2026-06-06T12:00:00Z")),
            Some((at("2026-06-06T22:00:00Z"), at("2026-06-07T03:00:00Z")))
        );
        assert_eq!(
            s.next_window(at("2026-06-07T03:00:00Z")),
            Some((at("2026-06-07T22:00:00Z"), at("2026-06-08T02:00:00Z")))
        );
        // No days: every day.
        let daily = schedule("UTC", &[(&[], "03:00", "1h")]);
        assert_eq!(
            daily.next_window(at("2026-06-03T04:00:00Z")),
            Some((at("2026-06-04T03:00:00Z"), at("2026-06-04T04:00:00Z")))
        );
        // No windows: no restriction.
        let none = schedule("UTC", &[]);
        assert_eq!(none.state(at("2026-06-03T04:00:00Z")), WindowState::Unrestricted);
        assert!(none.is_open(at("2026-06-03T04:00:00Z")));
        // A week-long window is always open.
        let always = schedule("UTC", &[(&["Mon"], "00:00", "7d")]);
        assert!(always.is_open(at("2026-06-07T23:59:59Z")));
    }

    #[test]
    fn berlin_spring_forward_a_start_in_the_skipped_hour_opens_when_the_clocks_jump() {
        // Sunday 2026-03-29: 02:00 CET becomes 03:00 CEST (01:00 UTC).
        let s = schedule("Europe/Berlin", &[(&["Sun"], "02:30", "1h")]);
        assert_eq!(
            s.next_window(at("2026-03-28T12:00:00Z")),
            Some((at("2026-03-29T01:00:00Z"), at("2026-03-29T02:00:00Z")))
        );
        // The week before and after: 02:30 CET (01:30 UTC) and 02:30 CEST (00:30 UTC).
        assert_eq!(
            s.next_window(at("2026-03-21T12:00:00Z")),
            Some((at("2026-03-22T01:30:00Z"), at("2026-03-22T02:30:00Z")))
        );
        assert_eq!(
            s.next_window(at("2026-04-04T12:00:00Z")),
            Some((at("2026-04-05T00:30:00Z"), at("2026-04-05T01:30:00Z")))
        );
        // A window across the change lasts its elapsed hours: 01:00 CET + 4 h = 06:00 CEST.
        let across = schedule("Europe/Berlin", &[(&["Sun"], "01:00", "4h")]);
        assert_eq!(
            across.next_window(at("2026-03-28T12:00:00Z")),
            Some((at("2026-03-29T00:00:00Z"), at("2026-03-29T04:00:00Z")))
        );
    }

    #[test]
    fn berlin_fall_back_a_start_in_the_repeated_hour_opens_once_at_its_first_occurrence() {
        // Sunday 2026-10-25: 03:00 CEST becomes 02:00 CET (01:00 UTC); 02:30 happens at 00:30
        // and 01:30 UTC.
        let s = schedule("Europe/Berlin", &[(&["Sun"], "02:30", "30m")]);
        assert_eq!(
            s.next_window(at("2026-10-24T12:00:00Z")),
            Some((at("2026-10-25T00:30:00Z"), at("2026-10-25T01:00:00Z")))
        );
        assert!(!s.is_open(at("2026-10-25T01:30:00Z")), "the second 02:30 opens nothing");
        assert_eq!(
            s.next_window(at("2026-10-25T01:00:00Z")),
            Some((at("2026-11-01T01:30:00Z"), at("2026-11-01T02:00:00Z")))
        );
    }

    #[test]
    fn new_york_spring_forward_and_fall_back() {
        // Sunday 2026-03-08: 02:00 EST becomes 03:00 EDT (07:00 UTC).
        let s = schedule("America/New_York", &[(&["Sun"], "02:15", "2h")]);
        assert_eq!(
            s.next_window(at("2026-03-07T12:00:00Z")),
            Some((at("2026-03-08T07:00:00Z"), at("2026-03-08T09:00:00Z")))
        );
        // Sunday 2026-11-01: 02:00 EDT becomes 01:00 EST (06:00 UTC); 01:30 happens at 05:30
        // and 06:30 UTC; the first one counts.
        let s = schedule("America/New_York", &[(&["Sun"], "01:30", "1h")]);
        assert_eq!(
            s.next_window(at("2026-10-31T12:00:00Z")),
            Some((at("2026-11-01T05:30:00Z"), at("2026-11-01T06:30:00Z")))
        );
        assert!(!s.is_open(at("2026-11-01T06:30:00Z")));
        // A daily 23:00 window on the fall-back day: 23:00 EST is 04:00 UTC the next day.
        let daily = schedule("America/New_York", &[(&[], "23:00", "1h")]);
        assert_eq!(
            daily.next_window(at("2026-11-01T12:00:00Z")),
            Some((at("2026-11-02T04:00:00Z"), at("2026-11-02T05:00:00Z")))
        );
    }

    #[test]
    fn bad_input_names_the_field_and_the_fix() {
        let errors = Schedule::parse(
            "spec.cluster.maintenance",
            &spec("Mars/Olympus", &[(&["Mon", "Funday"], "25:00", "4"), (&["Tue"], "2:00", "9d")]),
        )
        .expect_err("invalid");
        let fields: Vec<&str> = errors.iter().map(MaintenanceError::field).collect();
        assert_eq!(
            fields,
            [
                "spec.cluster.maintenance.timeZone",
                "spec.cluster.maintenance.windows[0].days[1]",
                "spec.cluster.maintenance.windows[0].start",
                "spec.cluster.maintenance.windows[0].duration",
                "spec.cluster.maintenance.windows[1].start",
                "spec.cluster.maintenance.windows[1].duration",
            ]
        );
        let text = errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n");
        assert!(
            text.contains("\"Mars/Olympus\" is not a known IANA time zone; use a name such as \"Europe/Berlin\""),
            "{text}"
        );
        assert!(text.contains("\"25:00\" is not a local time; write it as HH:MM"), "{text}");
        assert!(text.contains("\"Funday\" is not a day of the week"), "{text}");
        assert!(text.contains("\"9d\" is longer than a week"), "{text}");
        // The default zone is UTC.
        let utc = Schedule::parse("m", &Maintenance { time_zone: None, ..spec("UTC", &[(&["Mon"], "00:00", "1h")]) });
        assert_eq!(utc.map(|s| s.zone()), Ok(Tz::UTC));
    }

    #[test]
    fn a_window_shorter_than_the_pause_between_batches_is_refused() {
        let s = schedule("UTC", &[(&["Mon"], "00:00", "4h"), (&["Tue"], "00:00", "30m")]);
        assert_eq!(s.check_pause(Duration::from_secs(600)), Ok(()));
        let err = s.check_pause(Duration::from_secs(3600)).expect_err("too short");
        assert_eq!(err.field(), "spec.cluster.maintenance.windows[1].duration");
        assert_eq!(
            err.to_string(),
            "spec.cluster.maintenance.windows[1].duration: a window of 30m is shorter than the rolling update's pause of 1h between batches; make the window longer than 1h or shorten the pause"
        );
    }

    #[test]
    fn max_age_is_at_least_a_day() {
        let field = "spec.nodePool.maxNodeAge";
        assert_eq!(parse_max_age(field, "30d"), Ok(Duration::from_secs(30 * 86_400)));
        assert_eq!(parse_max_age(field, "24h"), Ok(MIN_MAX_AGE));
        let short = parse_max_age(field, "23h").expect_err("too short");
        assert_eq!(
            short.to_string(),
            "spec.nodePool.maxNodeAge: \"23h\" is below the minimum of one day; set it to \"1d\" or more, or remove it"
        );
        let bad = parse_max_age(field, "a month").expect_err("malformed");
        assert_eq!(bad.field(), field);
        assert!(bad.to_string().contains("such as \"30d\""), "{bad}");
    }

    fn node(id: &str, launched: &str, in_service: bool) -> AgedNode {
        AgedNode { id: id.into(), launched: at(launched), in_service }
    }

    #[test]
    fn max_age_replaces_the_oldest_past_the_age_one_at_a_time() {
        let day = Duration::from_secs(86_400);
        let now = at("2026-06-10T00:00:00Z");
        let nodes = [
            node("i-young", "2026-06-09T12:00:00Z", true),
            node("i-old", "2026-06-01T00:00:00Z", true),
            node("i-older", "2026-05-20T00:00:00Z", true),
        ];
        let none = BTreeSet::new();
        assert_eq!(
            max_age_step(&nodes, &none, day, now),
            MaxAgeStep::Replace { id: "i-older".into(), age: Duration::from_secs(21 * 86_400) }
        );
        // Once it is terminating, nothing else goes; the same once it was sent away and still
        // shows InService in a stale listing.
        let mut terminating = nodes.clone();
        terminating[2].in_service = false;
        assert_eq!(max_age_step(&terminating, &none, day, now), MaxAgeStep::Busy("i-older".into()));
        let sent = BTreeSet::from(["i-older".to_string()]);
        assert_eq!(max_age_step(&nodes, &sent, day, now), MaxAgeStep::Busy("i-older".into()));
        // Its replacement in service, it gone: the next oldest.
        let after = [nodes[0].clone(), nodes[1].clone(), node("i-new", "2026-06-09T23:00:00Z", true)];
        assert!(matches!(max_age_step(&after, &sent, day, now), MaxAgeStep::Replace { id, .. } if id == "i-old"));
        // Nobody due: when the oldest will be.
        assert_eq!(
            max_age_step(&nodes, &none, Duration::from_secs(30 * 86_400), now),
            MaxAgeStep::Idle { due: Some(at("2026-06-19T00:00:00Z")) }
        );
        assert_eq!(max_age_step(&[], &none, day, now), MaxAgeStep::Idle { due: None });
    }

    #[test]
    fn a_shared_clock_moves_for_every_clone() {
        let clock = Clock::system();
        let other = clock.clone();
        let target = at("2030-01-01T00:00:00Z");
        clock.set(target);
        let read = other.now();
        assert!(read >= target && read < target.checked_add(jiff::SignedDuration::from_secs(5)).expect("in range"));
        other.advance(Duration::from_secs(3600));
        assert!(clock.now() >= at("2030-01-01T01:00:00Z"));
    }
}

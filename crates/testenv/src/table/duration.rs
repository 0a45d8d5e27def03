//! Human-readable ages, exactly as kube-apiserver prints them.
//!
//! Server-side tables show ages such as `5s`, `2m3s` or `45d`. The text comes from
//! `k8s.io/apimachinery/pkg/util/duration.HumanDuration`, which keeps two to three
//! significant figures and tolerates clock skew of up to two seconds into the future
//! (printed as `0s`); anything further in the future prints `<invalid>`. The built-in
//! printers wrap it in `translateTimestampSince`, which prints `<unknown>` for a missing
//! timestamp; [`age_of`] is that wrapper.

use jiff::Timestamp;

const NANOS_PER_SECOND: i128 = 1_000_000_000;
const NANOS_PER_MINUTE: i128 = 60 * NANOS_PER_SECOND;
const NANOS_PER_HOUR: i128 = 60 * NANOS_PER_MINUTE;

/// Formats a signed duration given in nanoseconds as `HumanDuration` does.
///
/// Go's arithmetic is reproduced: seconds are truncated toward zero before the
/// skew check, so `-1.9s` still prints `0s` while `-2s` prints `<invalid>`.
pub fn human_duration_nanos(nanos: i128) -> String {
    let seconds = nanos / NANOS_PER_SECOND; // truncates toward zero, like Go's int(d.Seconds())
    if seconds < -1 {
        return "<invalid>".to_owned();
    }
    if seconds < 0 {
        return "0s".to_owned();
    }
    if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = nanos / NANOS_PER_MINUTE;
    if minutes < 10 {
        let s = seconds % 60;
        if s == 0 {
            return format!("{minutes}m");
        }
        return format!("{minutes}m{s}s");
    }
    if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = nanos / NANOS_PER_HOUR;
    if hours < 8 {
        let m = minutes % 60;
        if m == 0 {
            return format!("{hours}h");
        }
        return format!("{hours}h{m}m");
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        if h == 0 {
            return format!("{}d", hours / 24);
        }
        return format!("{}d{h}h", hours / 24);
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        if dy == 0 {
            return format!("{}y", hours / 24 / 365);
        }
        return format!("{}y{dy}d", hours / 24 / 365);
    }
    format!("{}y", hours / 24 / 365)
}

/// The humanised time elapsed between `since` and `now` (`HumanDuration(now - since)`).
pub fn human_since(since: Timestamp, now: Timestamp) -> String {
    human_duration_nanos(now.as_nanosecond() - since.as_nanosecond())
}

/// Parses an RFC 3339 timestamp as found in `metav1.Time`/`metav1.MicroTime` fields.
///
/// Returns `None` for anything that is not a timestamp, including the empty string and
/// JSON `null`, which Go decodes to the zero time.
pub fn parse_timestamp(value: &str) -> Option<Timestamp> {
    if value.is_empty() {
        return None;
    }
    value.parse::<Timestamp>().ok()
}

/// `translateTimestampSince` of the built-in printers: the humanised age of an optional
/// RFC 3339 timestamp, or `<unknown>` when it is missing (Go's zero time).
pub fn age_of(timestamp: Option<&str>, now: Timestamp) -> String {
    match timestamp.and_then(parse_timestamp) {
        Some(ts) => human_since(ts, now),
        None => "<unknown>".to_owned(),
    }
}

/// Formats a timestamp the way Go's `t.UTC().Format(time.RFC3339)` does (whole seconds, `Z`).
pub fn format_rfc3339(ts: Timestamp) -> String {
    ts.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: i128) -> String {
        human_duration_nanos(s * NANOS_PER_SECOND)
    }

    #[test]
    fn test_seconds_are_printed_up_to_two_minutes() {
        assert_eq!(secs(0), "0s");
        assert_eq!(secs(5), "5s");
        assert_eq!(secs(119), "119s");
    }

    #[test]
    fn test_minutes_and_seconds_below_ten_minutes() {
        assert_eq!(secs(120), "2m");
        assert_eq!(secs(123), "2m3s");
        assert_eq!(secs(9 * 60 + 59), "9m59s");
    }

    #[test]
    fn test_whole_minutes_below_three_hours() {
        assert_eq!(secs(10 * 60), "10m");
        assert_eq!(secs(10 * 60 + 30), "10m");
        assert_eq!(secs(179 * 60), "179m");
    }

    #[test]
    fn test_hours_and_minutes_below_eight_hours() {
        assert_eq!(secs(3 * 3600), "3h");
        assert_eq!(secs(3 * 3600 + 5 * 60), "3h5m");
        assert_eq!(secs(7 * 3600 + 59 * 60 + 59), "7h59m");
    }

    #[test]
    fn test_whole_hours_below_two_days() {
        assert_eq!(secs(8 * 3600), "8h");
        assert_eq!(secs(47 * 3600 + 59 * 60), "47h");
    }

    #[test]
    fn test_days_and_hours_below_eight_days() {
        assert_eq!(secs(48 * 3600), "2d");
        assert_eq!(secs(51 * 3600), "2d3h");
        assert_eq!(secs(7 * 86400 + 23 * 3600), "7d23h");
    }

    #[test]
    fn test_whole_days_below_two_years() {
        assert_eq!(secs(8 * 86400), "8d");
        assert_eq!(secs(45 * 86400 + 3600), "45d");
        assert_eq!(secs(729 * 86400), "729d");
    }

    #[test]
    fn test_years_and_days_below_eight_years() {
        assert_eq!(secs(730 * 86400), "2y");
        assert_eq!(secs(740 * 86400), "2y10d");
    }

    #[test]
    fn test_whole_years_from_eight_years() {
        assert_eq!(secs(365 * 8 * 86400), "8y");
        assert_eq!(secs(365 * 9 * 86400 + 100 * 86400), "9y");
    }

    #[test]
    fn test_small_future_skew_is_tolerated_as_zero() {
        assert_eq!(human_duration_nanos(-1), "0s");
        assert_eq!(human_duration_nanos(-1_999_999_999), "0s");
    }

    #[test]
    fn test_future_beyond_tolerance_is_invalid() {
        assert_eq!(secs(-2), "<invalid>");
        assert_eq!(secs(-3600), "<invalid>");
    }

    #[test]
    fn test_age_of_missing_timestamp_is_unknown() {
        let now = Timestamp::UNIX_EPOCH;
        assert_eq!(age_of(None, now), "<unknown>");
        assert_eq!(age_of(Some(""), now), "<unknown>");
        assert_eq!(age_of(Some("not a time"), now), "<unknown>");
    }

    #[test]
    fn test_age_of_timestamp_is_humanised() {
        let now: Timestamp = "2024-05-01T12:00:00Z".parse().unwrap();
        assert_eq!(age_of(Some("2024-05-01T11:55:00Z"), now), "5m");
        assert_eq!(age_of(Some("2024-05-01T11:59:59.5Z"), now), "0s");
    }

    #[test]
    fn test_format_rfc3339_uses_whole_seconds_and_z() {
        let ts: Timestamp = "2024-05-01T12:00:00.123+02:00".parse().unwrap();
        assert_eq!(format_rfc3339(ts), "2024-05-01T10:00:00Z");
        let early: Timestamp = "0001-01-01T00:00:00Z".parse().unwrap();
        assert_eq!(format_rfc3339(early), "0001-01-01T00:00:00Z");
    }
}

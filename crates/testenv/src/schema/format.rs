//! String formats, as kube-openapi's `strfmt.Default` registry checks them.
//!
//! Only the formats CRDs support reach this module (see [`super::node`]); each check follows
//! the Go implementation it mirrors:
//!
//! | format | upstream check |
//! |---|---|
//! | `bsonobjectid` | 24 hex digits |
//! | `uri` | `url.ParseRequestURI` (absolute URI or absolute path) |
//! | `email` | `mail.ParseAddress` (approximated: `local@domain`, optionally `Name <local@domain>`) |
//! | `hostname` | strfmt's RFC 1034 regex, 255 bytes overall, 63 per label |
//! | `ipv4`, `ipv6`, `cidr` | `net.ParseIP`/`ParseCIDR`, IPv4 leading zeros tolerated |
//! | `mac` | `net.ParseMAC` (`:`/`-` separated octets or `.` separated quads; 6, 8 or 20 bytes) |
//! | `uuid`, `uuid3/4/5` | strfmt's case-insensitive regexes (dashes optional) |
//! | `isbn`, `isbn10`, `isbn13` | govalidator's checksums |
//! | `creditcard` | govalidator's issuer regex and Luhn checksum |
//! | `ssn`, `hexcolor`, `rgbcolor` | govalidator's regexes |
//! | `byte` | govalidator's standard base64 regex (so the empty string is rejected) |
//! | `password` | anything |
//! | `date` | `time.Parse("2006-01-02")` |
//! | `datetime` (`date-time`) | strfmt's `IsDateTime`: a date, `T`, `hh:mm:ss`, fraction, `Z` or offset |
//! | `duration` | `time.ParseDuration`, else strfmt's `<n> <unit>` sequences |

use std::net::Ipv6Addr;
use std::sync::LazyLock;

use regex::Regex;

/// Whether `value` satisfies `format` (a supported format; unknown ones pass).
pub(crate) fn is_valid(format: &str, value: &str) -> bool {
    match format.replace('-', "").as_str() {
        "bsonobjectid" => value.len() == 24 && value.bytes().all(|b| b.is_ascii_hexdigit()),
        "uri" => is_request_uri(value),
        "email" => is_email(value),
        "hostname" => is_hostname(value),
        "ipv4" => parse_ip_sloppy(value) && value.contains('.'),
        "ipv6" => value.contains(':') && value.parse::<Ipv6Addr>().is_ok(),
        "cidr" => is_cidr(value),
        "mac" => is_mac(value),
        "uuid" => matches(&UUID, value),
        "uuid3" => matches(&UUID3, value),
        "uuid4" => matches(&UUID4, value),
        "uuid5" => matches(&UUID5, value),
        "isbn" => is_isbn10(value) || is_isbn13(value),
        "isbn10" => is_isbn10(value),
        "isbn13" => is_isbn13(value),
        "creditcard" => is_credit_card(value),
        "ssn" => value.len() == 11 && matches(&SSN, value),
        "hexcolor" => matches(&HEXCOLOR, value),
        "rgbcolor" => matches(&RGBCOLOR, value),
        "byte" => matches(&BASE64, value),
        "date" => is_date(value),
        "datetime" => is_date_time(value),
        "duration" => is_duration(value),
        _ => true,
    }
}

fn regex(pattern: &str) -> Option<Regex> {
    Regex::new(pattern).ok()
}

fn matches(re: &LazyLock<Option<Regex>>, value: &str) -> bool {
    re.as_ref().is_some_and(|r| r.is_match(value))
}

static HOSTNAME: LazyLock<Option<Regex>> = LazyLock::new(|| {
    regex(
        r"^([a-zA-Z0-9\p{S}\p{L}]((-?[a-zA-Z0-9\p{S}\p{L}]{0,62})?)|([a-zA-Z0-9\p{S}\p{L}](([a-zA-Z0-9-\p{S}\p{L}]{0,61}[a-zA-Z0-9\p{S}\p{L}])?)(\.)){1,}([a-zA-Z\p{L}]){2,63})$",
    )
});
static UUID: LazyLock<Option<Regex>> =
    LazyLock::new(|| regex(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$"));
static UUID3: LazyLock<Option<Regex>> =
    LazyLock::new(|| regex(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?3[0-9a-f]{3}-?[0-9a-f]{4}-?[0-9a-f]{12}$"));
static UUID4: LazyLock<Option<Regex>> =
    LazyLock::new(|| regex(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?4[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$"));
static UUID5: LazyLock<Option<Regex>> =
    LazyLock::new(|| regex(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?5[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$"));
static SSN: LazyLock<Option<Regex>> = LazyLock::new(|| regex(r"^[0-9]{3}[- ]?[0-9]{2}[- ]?[0-9]{4}$"));
static HEXCOLOR: LazyLock<Option<Regex>> = LazyLock::new(|| regex(r"^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$"));
static RGBCOLOR: LazyLock<Option<Regex>> = LazyLock::new(|| {
    let c = r"\s*(0|[1-9][0-9]?|1[0-9][0-9]?|2[0-4][0-9]|25[0-5])\s*";
    regex(&format!(r"^rgb\({c},{c},{c}\)$"))
});
static BASE64: LazyLock<Option<Regex>> =
    LazyLock::new(|| regex(r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{4})$"));
static CREDIT_CARD: LazyLock<Option<Regex>> = LazyLock::new(|| {
    regex(
        r"^(?:4[0-9]{12}(?:[0-9]{3})?|5[1-5][0-9]{14}|6(?:011|5[0-9][0-9])[0-9]{12}|3[47][0-9]{13}|3(?:0[0-5]|[68][0-9])[0-9]{11}|(?:2131|1800|35[0-9]{3})[0-9]{11})$",
    )
});
static DATE_TIME_TAIL: LazyLock<Option<Regex>> =
    LazyLock::new(|| regex(r"^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$"));
static DURATION_SHAPE: LazyLock<Option<Regex>> = LazyLock::new(|| regex(r"^\s*(?:[0-9]+\s*[A-Za-zµ]+\s*)+$"));
static DURATION_PART: LazyLock<Option<Regex>> = LazyLock::new(|| regex(r"([0-9]+)\s*([A-Za-zµ]+)"));

fn is_hostname(s: &str) -> bool {
    matches(&HOSTNAME, s) && s.len() <= 255 && s.split('.').all(|label| label.len() <= 63)
}

/// Go's IPv4 parsing as `netutils.ParseIPSloppy` does it: four decimal octets, leading zeros
/// allowed; or any IPv6 address (which may embed an IPv4 tail).
fn parse_ip_sloppy(s: &str) -> bool {
    parse_ipv4_sloppy(s) || (s.contains(':') && s.parse::<Ipv6Addr>().is_ok())
}

fn parse_ipv4_sloppy(s: &str) -> bool {
    let parts: Vec<&str> = s.split('.').collect();
    parts.len() == 4
        && parts.iter().all(|p| {
            !p.is_empty()
                && p.bytes().all(|b| b.is_ascii_digit())
                && p.trim_start_matches('0').len() <= 3
                && p.parse::<u32>().map(|n| n <= 255).unwrap_or(false)
        })
}

fn is_cidr(s: &str) -> bool {
    let Some((addr, prefix)) = s.split_once('/') else {
        return false;
    };
    let bits = if parse_ipv4_sloppy(addr) {
        32
    } else if addr.contains(':') && addr.parse::<Ipv6Addr>().is_ok() {
        128
    } else {
        return false;
    };
    !prefix.is_empty()
        && prefix.bytes().all(|b| b.is_ascii_digit())
        && prefix.trim_start_matches('0').len() <= 3
        && prefix.parse::<u32>().map(|n| n <= bits).unwrap_or(false)
}

/// `net.ParseMAC`.
fn is_mac(s: &str) -> bool {
    if s.len() < 14 {
        return false;
    }
    let bytes = s.as_bytes();
    let octets = if let Some(&sep @ (b':' | b'-')) = bytes.get(2) {
        let groups: Vec<&str> = s.split(char::from(sep)).collect();
        if !groups.iter().all(|g| g.len() == 2 && g.bytes().all(|b| b.is_ascii_hexdigit())) {
            return false;
        }
        groups.len()
    } else if bytes.get(4) == Some(&b'.') {
        let groups: Vec<&str> = s.split('.').collect();
        if !groups.iter().all(|g| g.len() == 4 && g.bytes().all(|b| b.is_ascii_hexdigit())) {
            return false;
        }
        groups.len() * 2
    } else {
        return false;
    };
    matches!(octets, 6 | 8 | 20)
}

fn isbn_sanitized(s: &str) -> String {
    s.chars().filter(|c| !c.is_whitespace() && *c != '-').collect()
}

fn is_isbn10(s: &str) -> bool {
    let s = isbn_sanitized(s);
    let b = s.as_bytes();
    let (Some(head), Some(&check)) = (b.get(..9), b.get(9)) else {
        return false;
    };
    if b.len() != 10 || !head.iter().all(u8::is_ascii_digit) || !(check.is_ascii_digit() || check == b'X') {
        return false;
    }
    let mut sum: u32 = head.iter().zip(1u32..).map(|(d, w)| w * u32::from(d - b'0')).sum();
    sum += 10 * if check == b'X' { 10 } else { u32::from(check - b'0') };
    sum.is_multiple_of(11)
}

fn is_isbn13(s: &str) -> bool {
    let s = isbn_sanitized(s);
    let b = s.as_bytes();
    let (Some(head), Some(&check)) = (b.get(..12), b.get(12)) else {
        return false;
    };
    if b.len() != 13 || !b.iter().all(u8::is_ascii_digit) {
        return false;
    }
    let sum: u32 = head.iter().zip([1u32, 3].iter().cycle()).map(|(d, w)| w * u32::from(d - b'0')).sum();
    u32::from(check - b'0') == (10 - sum % 10) % 10
}

fn is_credit_card(s: &str) -> bool {
    let digits: String = s.chars().filter(char::is_ascii_digit).collect();
    if !matches(&CREDIT_CARD, &digits) {
        return false;
    }
    let mut sum = 0u32;
    let mut double = false;
    for b in digits.bytes().rev() {
        let mut d = u32::from(b - b'0');
        if double {
            d *= 2;
            if d >= 10 {
                d = d % 10 + 1;
            }
        }
        sum += d;
        double = !double;
    }
    sum.is_multiple_of(10)
}

/// `time.Parse("2006-01-02", s)`.
fn is_date(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() != 10 || b.get(4) != Some(&b'-') || b.get(7) != Some(&b'-') {
        return false;
    }
    let num = |r: std::ops::Range<usize>| -> Option<u32> {
        let part = s.get(r)?;
        part.bytes().all(|c| c.is_ascii_digit()).then(|| part.parse().ok()).flatten()
    };
    let (Some(year), Some(month), Some(day)) = (num(0..4), num(5..7), num(8..10)) else {
        return false;
    };
    (1..=12).contains(&month) && day >= 1 && day <= days_in_month(year, month)
}

pub(crate) fn days_in_month(year: u32, month: u32) -> u32 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if (year.is_multiple_of(4) && !year.is_multiple_of(100)) || year.is_multiple_of(400) => 29,
        2 => 28,
        _ => 0,
    }
}

/// strfmt's `IsDateTime`, including its quirks: the string is lower-cased and split at every
/// `t`, only the first two pieces are looked at, and the time's separator before the fraction
/// may be any character.
fn is_date_time(s: &str) -> bool {
    if s.len() < 4 {
        return false;
    }
    let lower = s.to_lowercase();
    let mut pieces = lower.split('t');
    let (Some(date), Some(time)) = (pieces.next(), pieces.next()) else {
        return false;
    };
    if !is_date(date) {
        return false;
    }
    let Some(caps) = DATE_TIME_TAIL.as_ref().and_then(|r| r.captures(time)) else {
        return false;
    };
    let group = |i: usize| caps.get(i).map_or("", |m| m.as_str());
    group(1) <= "23" && group(2) <= "59" && group(3) <= "59"
}

/// strfmt's `IsDuration`: Go's `time.ParseDuration`, or a sequence of `<digits> <unit>` with
/// units in nanoseconds to weeks, spelled short or long.
fn is_duration(s: &str) -> bool {
    if is_go_duration(s) {
        return true;
    }
    if !matches(&DURATION_SHAPE, s) {
        return false;
    }
    const UNITS: &[&[&str]] = &[
        &["ns", "nano"],
        &["us", "µs", "micro"],
        &["ms", "milli"],
        &["s", "sec"],
        &["m", "min"],
        &["h", "hr", "hour"],
        &["d", "day"],
        &["w", "wk", "week"],
    ];
    let Some(re) = DURATION_PART.as_ref() else {
        return false;
    };
    let mut ok = false;
    for caps in re.captures_iter(s) {
        // strconv.Atoi: an overflowing count makes the whole value invalid.
        if caps.get(1).map(|m| m.as_str().parse::<i64>()).is_none_or(|r| r.is_err()) {
            return false;
        }
        let unit = caps.get(2).map_or(String::new(), |m| m.as_str().trim().to_lowercase());
        for variants in UNITS {
            let last = variants.len() - 1;
            for (i, v) in variants.iter().enumerate() {
                if (i == last && unit.starts_with(v)) || v.eq_ignore_ascii_case(&unit) {
                    ok = true;
                }
            }
        }
    }
    ok
}

/// Go's `time.ParseDuration` grammar: `[-+]?(\d*(\.\d*)?unit)+` or `0`, within int64
/// nanoseconds.
fn is_go_duration(s: &str) -> bool {
    let s = s.strip_prefix(['-', '+']).unwrap_or(s);
    if s == "0" {
        return true;
    }
    if s.is_empty() {
        return false;
    }
    let mut rest = s;
    let mut total: f64 = 0.0;
    while !rest.is_empty() {
        let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let (int_part, after) = rest.split_at(int_len);
        let (frac_part, after) = match after.strip_prefix('.') {
            Some(a) => {
                let n = a.bytes().take_while(u8::is_ascii_digit).count();
                a.split_at(n)
            }
            None => ("", after),
        };
        if int_part.is_empty() && frac_part.is_empty() {
            return false;
        }
        let unit_len = after.find(|c: char| c == '.' || c.is_ascii_digit()).unwrap_or(after.len());
        let (unit, next) = after.split_at(unit_len);
        let nanos = match unit {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return false,
        };
        let value: f64 = format!("{}.{}", if int_part.is_empty() { "0" } else { int_part }, frac_part)
            .trim_end_matches('.')
            .parse()
            .unwrap_or(f64::INFINITY);
        total += value * nanos;
        rest = next;
    }
    total <= i64::MAX as f64
}

/// An approximation of `mail.ParseAddress`: an `addr-spec`, optionally as `Name <addr-spec>`,
/// with a dot-atom or quoted local part and a dot-atom or literal domain.
fn is_email(s: &str) -> bool {
    let s = s.trim();
    let addr = match (s.rfind('<'), s.strip_suffix('>')) {
        (Some(open), Some(inner)) => match inner.get(open + 1..) {
            Some(a) => a,
            None => return false,
        },
        _ => s,
    };
    let Some(at) = addr.rfind('@') else {
        return false;
    };
    let (local, domain) = (&addr[..at], &addr[at + 1..]);
    let local_ok = if local.len() >= 2 && local.starts_with('"') && local.ends_with('"') {
        !local[1..local.len() - 1].contains(['\r', '\n'])
    } else {
        is_dot_atom(local)
    };
    let domain_ok =
        if domain.starts_with('[') && domain.ends_with(']') { domain.len() > 2 } else { is_dot_atom(domain) };
    local_ok && domain_ok
}

fn is_dot_atom(s: &str) -> bool {
    const SPECIALS: &str = "!#$%&'*+-/=?^_`{|}~";
    !s.is_empty()
        && s.split('.').all(|atom| {
            !atom.is_empty() && atom.chars().all(|c| c.is_ascii_alphanumeric() || SPECIALS.contains(c) || !c.is_ascii())
        })
}

/// An approximation of `url.ParseRequestURI`: an absolute path, or a scheme followed by an
/// opaque part or an authority whose host and port are well formed; no control characters and
/// only well-formed `%` escapes.
fn is_request_uri(s: &str) -> bool {
    if s.is_empty() || s.chars().any(|c| (c as u32) < 0x20 || c == '\u{7f}') {
        return false;
    }
    let (before_query, _query) = s.split_once('?').unwrap_or((s, ""));
    if before_query.starts_with('/') {
        return escapes_ok(before_query);
    }
    // scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) ":"
    let Some(colon) = before_query.find(':') else {
        return false;
    };
    let scheme = &before_query[..colon];
    let scheme_ok = scheme.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && scheme.chars().all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c));
    if !scheme_ok {
        return false;
    }
    let rest = &before_query[colon + 1..];
    let Some(after_slashes) = rest.strip_prefix("//") else {
        // Opaque (`mailto:x`) or rooted path (`file:/x`).
        return !rest.starts_with('/') || escapes_ok(rest);
    };
    let (authority, path) = match after_slashes.find('/') {
        Some(i) => after_slashes.split_at(i),
        None => (after_slashes, ""),
    };
    let host_port = match authority.rfind('@') {
        Some(i) => &authority[i + 1..],
        None => authority,
    };
    host_ok(host_port) && escapes_ok(path)
}

fn host_ok(host_port: &str) -> bool {
    let (host, port) = if let Some(inner) = host_port.strip_prefix('[') {
        let Some(close) = inner.find(']') else {
            return false;
        };
        let after = &inner[close + 1..];
        let port = match after.strip_prefix(':') {
            Some(p) => p,
            None if after.is_empty() => "",
            None => return false,
        };
        (&inner[..close], port)
    } else {
        match host_port.rfind(':') {
            Some(i) => (&host_port[..i], &host_port[i + 1..]),
            None => (host_port, ""),
        }
    };
    const ALLOWED: &str = "-._~!$&'()*+,;=:[]<>\"%";
    port.bytes().all(|b| b.is_ascii_digit())
        && host.chars().all(|c| !c.is_ascii() || c.is_ascii_alphanumeric() || ALLOWED.contains(c))
        && escapes_ok(host)
}

fn escapes_ok(s: &str) -> bool {
    // Every `%` must start a `%XX` escape.
    s.split('%').skip(1).all(|after| {
        let b = after.as_bytes();
        b.len() >= 2 && b.iter().take(2).all(u8::is_ascii_hexdigit)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_date_time_accepts_rfc3339_and_rejects_garbage() {
        assert!(is_valid("date-time", "2024-02-29T10:00:00Z"));
        assert!(is_valid("date-time", "2024-02-29T10:00:00.123+02:00"));
        assert!(is_valid("datetime", "2024-02-29t10:00:00z"));
        assert!(!is_valid("date-time", "2023-02-29T10:00:00Z"), "not a leap year");
        assert!(!is_valid("date-time", "2024-01-01T24:00:00Z"));
        assert!(!is_valid("date-time", "2024-01-01"));
        assert!(!is_valid("date-time", "yesterday"));
    }

    #[test]
    fn test_date_checks_the_calendar() {
        assert!(is_valid("date", "2024-12-31"));
        assert!(!is_valid("date", "2024-13-01"));
        assert!(!is_valid("date", "2024-04-31"));
        assert!(!is_valid("date", "24-01-01"));
    }

    #[test]
    fn test_ip_formats() {
        assert!(is_valid("ipv4", "10.0.0.1"));
        assert!(is_valid("ipv4", "010.000.000.001"), "leading zeros tolerated");
        assert!(!is_valid("ipv4", "256.0.0.1"));
        assert!(!is_valid("ipv4", "::1"));
        assert!(is_valid("ipv6", "::1"));
        assert!(is_valid("ipv6", "2001:db8::8a2e:370:7334"));
        assert!(!is_valid("ipv6", "10.0.0.1"));
        assert!(is_valid("cidr", "10.0.0.0/8"));
        assert!(is_valid("cidr", "2001:db8::/32"));
        assert!(!is_valid("cidr", "10.0.0.0/33"));
        assert!(!is_valid("cidr", "10.0.0.0"));
    }

    #[test]
    fn test_hostname() {
        assert!(is_valid("hostname", "example.com"));
        assert!(is_valid("hostname", "localhost"));
        assert!(!is_valid("hostname", "-bad.com"));
        assert!(!is_valid("hostname", "a_b.com"));
        assert!(!is_valid("hostname", &format!("{}.com", "a".repeat(64))));
    }

    #[test]
    fn test_uuid_byte_and_misc() {
        assert!(is_valid("uuid", "123e4567-e89b-12d3-a456-426614174000"));
        assert!(is_valid("uuid", "123E4567E89B12D3A456426614174000"));
        assert!(!is_valid("uuid", "123e4567"));
        assert!(is_valid("uuid4", "123e4567-e89b-42d3-a456-426614174000"));
        assert!(!is_valid("uuid4", "123e4567-e89b-12d3-a456-426614174000"));
        assert!(is_valid("byte", "aGVsbG8="));
        assert!(!is_valid("byte", "not base64!"));
        assert!(!is_valid("byte", ""));
        assert!(is_valid("password", ""));
        assert!(is_valid("bsonobjectid", "507f1f77bcf86cd799439011"));
        assert!(is_valid("hexcolor", "#fff"));
        assert!(is_valid("rgbcolor", "rgb(255, 0, 10)"));
        assert!(!is_valid("rgbcolor", "rgb(256,0,0)"));
        assert!(is_valid("ssn", "123-45-6789"));
        assert!(!is_valid("ssn", "123456789"));
        assert!(is_valid("mac", "00:00:5e:00:53:01"));
        assert!(is_valid("mac", "0000.5e00.5301"));
        assert!(!is_valid("mac", "00:00:5e:00:53"));
        assert!(is_valid("isbn10", "0321751043"));
        assert!(is_valid("isbn13", "978-0321751041"));
        assert!(!is_valid("isbn13", "978-0321751042"));
        assert!(is_valid("creditcard", "4111 1111 1111 1111"));
        assert!(!is_valid("creditcard", "4111 1111 1111 1112"));
    }

    #[test]
    fn test_duration_accepts_go_and_long_forms() {
        assert!(is_valid("duration", "1h30m"));
        assert!(is_valid("duration", "1.5s"));
        assert!(is_valid("duration", "0"));
        assert!(is_valid("duration", "3 days"));
        assert!(is_valid("duration", "2 weeks"));
        assert!(!is_valid("duration", "soon"));
        assert!(!is_valid("duration", "5"));
    }

    #[test]
    fn test_uri_and_email() {
        assert!(is_valid("uri", "https://example.com/a?b=c"));
        assert!(is_valid("uri", "/relative/path"));
        assert!(is_valid("uri", "mailto:a@b.c"));
        assert!(!is_valid("uri", "example.com"));
        assert!(!is_valid("uri", "http://exa mple.com"));
        assert!(!is_valid("uri", "http://example.com:port"));
        assert!(!is_valid("uri", "/bad%zzescape"));
        assert!(is_valid("email", "someone@example.com"));
        assert!(is_valid("email", "Some One <someone@example.com>"));
        assert!(!is_valid("email", "someone"));
        assert!(!is_valid("email", "a..b@example.com"));
    }

    #[test]
    fn test_unknown_formats_pass() {
        assert!(is_valid("int32", "anything"));
        assert!(is_valid("k8s-whatever", "anything"));
    }
}

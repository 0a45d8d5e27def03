//! Go-compatible rendering of values in error messages.
//!
//! kube-apiserver's messages are produced by Go's `fmt` and `encoding/json`, and clients (and
//! people) compare them textually, so the few formatting rules that show up in field errors are
//! reproduced here:
//!
//! - `%q` ([`quote`]): `strconv.Quote`, double-quoted with Go escapes;
//! - `%v` of a `float64` ([`float_v`]): the shortest representation, switching to exponent form
//!   (`1e+06`) when the decimal exponent is below -4 or at least 6;
//! - `json.Marshal` ([`json`]): sorted object keys, HTML-safe string escapes (`<` is `\u003c`)
//!   and Go's float format (`1`, not `1.0`; `1e+21`; `1e-7`).

use serde_json::Value;

/// The decimal digits and point position of a finite float, as strconv computes them for the
/// shortest representation that round-trips.
struct Decimal {
    negative: bool,
    /// The significant digits, without leading or trailing zeros (`"0"` for zero).
    digits: String,
    /// The position of the decimal point relative to the first digit (`1.5` has `dp == 1`).
    dp: i32,
}

impl Decimal {
    fn of(f: f64) -> Decimal {
        // `{:e}` prints the shortest round-trip digits, e.g. `-1.2345e6`, `1e-7`, `0e0`.
        let s = format!("{f:e}");
        let (negative, s) = match s.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, s.as_str()),
        };
        let (mantissa, exp) = s.split_once('e').unwrap_or((s, "0"));
        let exp: i32 = exp.parse().unwrap_or(0);
        let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
        let digits = if digits.is_empty() { "0".to_string() } else { digits };
        Decimal { negative, digits, dp: exp + 1 }
    }

    fn sign(&self) -> &'static str {
        if self.negative { "-" } else { "" }
    }

    /// `%e` with the shortest precision: `d.ddde±XX`, at least two exponent digits.
    fn exponent_form(&self) -> String {
        let (first, rest) = self.digits.split_at(1);
        let exp = if self.digits == "0" { 0 } else { self.dp - 1 };
        let mut out = String::from(self.sign());
        out.push_str(first);
        if !rest.is_empty() {
            out.push('.');
            out.push_str(rest);
        }
        out.push('e');
        out.push(if exp < 0 { '-' } else { '+' });
        let abs = exp.unsigned_abs();
        if abs < 10 {
            out.push('0');
        }
        out.push_str(&abs.to_string());
        out
    }

    /// `%f` with the shortest precision.
    fn fixed_form(&self) -> String {
        let mut out = String::from(self.sign());
        let nd = self.digits.len() as i32;
        if self.dp <= 0 {
            out.push_str("0.");
            for _ in 0..(-self.dp) {
                out.push('0');
            }
            out.push_str(&self.digits);
        } else if self.dp >= nd {
            out.push_str(&self.digits);
            if self.digits != "0" {
                for _ in 0..(self.dp - nd) {
                    out.push('0');
                }
            }
        } else {
            let (int, frac) = self.digits.split_at(self.dp as usize);
            out.push_str(int);
            out.push('.');
            out.push_str(frac);
        }
        out
    }
}

/// `fmt.Sprintf("%v", f)` for a `float64`.
pub(crate) fn float_v(f: f64) -> String {
    if f.is_nan() {
        return "NaN".to_string();
    }
    if f.is_infinite() {
        return if f > 0.0 { "+Inf" } else { "-Inf" }.to_string();
    }
    let d = Decimal::of(f);
    let exp = if d.digits == "0" { 0 } else { d.dp - 1 };
    if !(-4..6).contains(&exp) { d.exponent_form() } else { d.fixed_form() }
}

/// How `encoding/json` prints a `float64`.
pub(crate) fn float_json(f: f64) -> String {
    if !f.is_finite() {
        // encoding/json refuses these; they cannot come out of a JSON document anyway.
        return "null".to_string();
    }
    let abs = f.abs();
    let d = Decimal::of(f);
    if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        let s = d.exponent_form();
        // Go trims a single leading zero of a negative exponent: `e-07` becomes `e-7`.
        match s.find("e-0") {
            Some(i) if s.len() == i + 4 => format!("{}e-{}", &s[..i], &s[i + 3..]),
            _ => s,
        }
    } else {
        d.fixed_form()
    }
}

/// A JSON number printed as Go prints the `int64` or `float64` it decodes to.
fn number_text(n: &serde_json::Number, json: bool) -> String {
    match n.as_i64() {
        Some(i) => i.to_string(),
        // A float, or an integer beyond int64 that Go's decoder would turn into a float64.
        None => {
            let f = n.as_f64().unwrap_or(0.0);
            if json { float_json(f) } else { float_v(f) }
        }
    }
}

/// `%v` of a JSON number the way kube-apiserver holds it (`int64` or `float64`).
pub(crate) fn number_v(n: &serde_json::Number) -> String {
    number_text(n, false)
}

/// `strconv.Quote`.
pub(crate) fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if is_go_printable(c) => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if (c as u32) < 0x10000 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push_str(&format!("\\U{:08x}", c as u32)),
        }
    }
    out.push('"');
    out
}

/// An approximation of Go's `strconv.IsPrint`: letters, marks, numbers, punctuation, symbols
/// and the ASCII space are printable; controls, other spaces and format characters are not.
fn is_go_printable(c: char) -> bool {
    if c == ' ' {
        return true;
    }
    if c.is_control() || c.is_whitespace() {
        return false;
    }
    !matches!(
        c,
        '\u{ad}'
            | '\u{600}'..='\u{605}'
            | '\u{61c}'
            | '\u{6dd}'
            | '\u{70f}'
            | '\u{180e}'
            | '\u{200b}'..='\u{200f}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{206f}'
            | '\u{e000}'..='\u{f8ff}'
            | '\u{feff}'
            | '\u{fff9}'..='\u{fffb}'
            | '\u{e0001}'
            | '\u{e0020}'..='\u{e007f}'
            | '\u{f0000}'..
    )
}

/// `json.Marshal` of a decoded JSON value.
pub(crate) fn json(v: &Value) -> String {
    let mut out = String::new();
    write_json(v, &mut out);
    out
}

fn write_json(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&number_text(n, true)),
        Value::String(s) => write_json_string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            // serde_json's map is ordered by key, as Go's encoder orders map keys.
            out.push('{');
            for (i, (k, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json_string(k, out);
                out.push(':');
                write_json(item, out);
            }
            out.push('}');
        }
    }
}

/// A JSON string as Go's `encoding/json` writes it (HTML-safe escapes included).
pub(crate) fn write_json_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            // HTML-safe escaping, as encoding/json does by default.
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                out.push_str(&format!("\\u{:04x}", c as u32));
            }
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// go-openapi's `swag.IsFloat64AJSONInteger`: whether a float is (within a relative 1e-9) an
/// integer that JSON can represent exactly.
pub(crate) fn is_json_integer(f: f64) -> bool {
    const MAX_JSON_FLOAT: f64 = 9_007_199_254_740_991.0; // 2^53 - 1
    if !f.is_finite() || !(-MAX_JSON_FLOAT..=MAX_JSON_FLOAT).contains(&f) {
        return false;
    }
    if f.fract() == 0.0 {
        return true;
    }
    let g = f.round();
    let diff = (f - g).abs();
    if f == 0.0 || g == 0.0 {
        return diff < 1e-9 * f64::MIN_POSITIVE;
    }
    diff / (f.abs() + g.abs()).min(f64::MAX) < 1e-9
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn test_float_v_uses_exponent_from_one_million() {
        assert_eq!(float_v(10.0), "10");
        assert_eq!(float_v(100000.0), "100000");
        assert_eq!(float_v(1e6), "1e+06");
        assert_eq!(float_v(1234567.0), "1.234567e+06");
        assert_eq!(float_v(0.5), "0.5");
        assert_eq!(float_v(0.0001), "0.0001");
        assert_eq!(float_v(0.00001), "1e-05");
        assert_eq!(float_v(-2.5), "-2.5");
        assert_eq!(float_v(0.0), "0");
        assert_eq!(float_v(1e100), "1e+100");
    }

    #[test]
    fn test_float_json_matches_encoding_json() {
        assert_eq!(float_json(1.0), "1");
        assert_eq!(float_json(1.5), "1.5");
        assert_eq!(float_json(1e20), "100000000000000000000");
        assert_eq!(float_json(1e21), "1e+21");
        assert_eq!(float_json(1e-7), "1e-7");
        assert_eq!(float_json(1.5e-7), "1.5e-7");
        assert_eq!(float_json(0.000001), "0.000001");
    }

    #[test]
    fn test_quote_escapes_like_strconv() {
        assert_eq!(quote("abc"), r#""abc""#);
        assert_eq!(quote("a\"b\\c"), r#""a\"b\\c""#);
        assert_eq!(quote("a\nb\tc"), r#""a\nb\tc""#);
        assert_eq!(quote("\u{1}"), r#""\x01""#);
        assert_eq!(quote("ünï"), "\"ünï\"");
        assert_eq!(quote("\u{a0}"), r#""\u00a0""#);
    }

    #[test]
    fn test_json_sorts_keys_and_escapes_html() {
        let v = json!({"b": 1, "a": [true, null, 1.0, "<&>"]});
        assert_eq!(json(&v), r#"{"a":[true,null,1,"\u003c\u0026\u003e"],"b":1}"#);
    }

    #[test]
    fn test_json_integer_tolerates_rounding_noise() {
        assert!(is_json_integer(3.0));
        assert!(is_json_integer(3.0000000000000004));
        assert!(!is_json_integer(3.5));
        assert!(!is_json_integer(f64::INFINITY));
        assert!(!is_json_integer(1e300));
    }
}

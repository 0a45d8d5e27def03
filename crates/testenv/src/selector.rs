//! Label and field selectors.
//!
//! * [`LabelSelector`] parses the `labelSelector` query parameter with the grammar and
//!   the error texts of apimachinery's `labels.Parse` (`k8s.io/apimachinery/pkg/labels/
//!   selector.go`): `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k`, `!k`,
//!   `k>N`, `k<N`, comma meaning AND, whitespace ignored. Keys must be qualified names and
//!   values valid label values, as upstream validates them while parsing. `!=` and
//!   `notin` match objects that lack the key. It also converts a `metav1.LabelSelector`
//!   object (`matchLabels`/`matchExpressions`) the way `LabelSelectorAsSelector` does,
//!   after the checks of `ValidateLabelSelector`.
//! * [`FieldSelector`] parses `fieldSelector` as `fields.ParseSelector` does: `f=v`,
//!   `f==v`, `f!=v`, comma meaning AND, values escaped with `\,`, `\=` and `\\`. A field
//!   the object does not have reads as the empty string. Which field names a resource
//!   supports is the caller's decision ([`FieldSelector::fields`]).
//!
//! Both render back to their canonical string form (requirements sorted by key for
//! labels; terms sorted for fields), which is what kube-apiserver echoes in messages.
//!
//! The name-syntax rules (`IsQualifiedName`, `IsDNS1123Subdomain`, ...) live in
//! [`syntax`] because label selectors need them; object validation uses the same ones.

use std::collections::BTreeMap;
use std::fmt;

use serde_json::Value;

// =======================================================================================
// Name syntax

/// The string checks of `k8s.io/apimachinery/pkg/util/validation` with their exact
/// messages. Each function returns the list of problems; empty means valid.
pub mod syntax {
    const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
    const QUALIFIED_NAME_ERR: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
    const QUALIFIED_NAME_MAX_LENGTH: usize = 63;
    const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
    const LABEL_VALUE_ERR: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
    /// Maximum length of a label value.
    pub const LABEL_VALUE_MAX_LENGTH: usize = 63;
    const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
    const DNS1123_LABEL_ERR: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
    /// Maximum length of an RFC 1123 label.
    pub const DNS1123_LABEL_MAX_LENGTH: usize = 63;
    const DNS1123_SUBDOMAIN_FMT: &str = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
    const DNS1123_SUBDOMAIN_ERR: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
    /// Maximum length of an RFC 1123 subdomain.
    pub const DNS1123_SUBDOMAIN_MAX_LENGTH: usize = 253;
    const DNS1035_LABEL_FMT: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";
    const DNS1035_LABEL_ERR: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character";
    /// Maximum length of an RFC 1035 label.
    pub const DNS1035_LABEL_MAX_LENGTH: usize = 63;

    /// `validation.MaxLenError`.
    pub fn max_len_error(length: usize) -> String {
        format!("must be no more than {length} characters")
    }

    /// `validation.EmptyError`.
    pub fn empty_error() -> String {
        "must be non-empty".to_owned()
    }

    /// `validation.RegexError`: the message, examples and the regex upstream validates with.
    pub fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
        if examples.is_empty() {
            return format!("{msg} (regex used for validation is '{fmt}')");
        }
        let mut out = format!("{msg} (e.g. ");
        for (i, example) in examples.iter().enumerate() {
            if i > 0 {
                out.push_str(" or ");
            }
            out.push('\'');
            out.push_str(example);
            out.push_str("', ");
        }
        out.push_str("regex used for validation is '");
        out.push_str(fmt);
        out.push_str("')");
        out
    }

    fn is_alnum(b: u8) -> bool {
        b.is_ascii_alphanumeric()
    }

    /// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`
    fn is_qualified_name_part(s: &str) -> bool {
        let b = s.as_bytes();
        match (b.first(), b.last()) {
            (Some(&first), Some(&last)) => {
                is_alnum(first) && is_alnum(last) && b.iter().all(|&c| is_alnum(c) || matches!(c, b'-' | b'_' | b'.'))
            }
            _ => false,
        }
    }

    /// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`
    fn is_dns1123_label_text(s: &str) -> bool {
        let b = s.as_bytes();
        let edge = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
        match (b.first(), b.last()) {
            (Some(&first), Some(&last)) => edge(first) && edge(last) && b.iter().all(|&c| edge(c) || c == b'-'),
            _ => false,
        }
    }

    fn is_dns1123_subdomain_text(s: &str) -> bool {
        s.split('.').all(is_dns1123_label_text)
    }

    /// `IsQualifiedName`: an optional DNS-subdomain prefix and `/`, then a name of at most
    /// 63 alphanumerics, `-`, `_` and `.` that starts and ends alphanumeric. Used for label
    /// and annotation keys and finalizer names.
    pub fn is_qualified_name(value: &str) -> Vec<String> {
        let mut errs = Vec::new();
        let parts: Vec<&str> = value.split('/').collect();
        let name = match parts.as_slice() {
            [name] => *name,
            [prefix, name] => {
                if prefix.is_empty() {
                    errs.push(format!("prefix part {}", empty_error()));
                } else {
                    errs.extend(is_dns1123_subdomain(prefix).into_iter().map(|m| format!("prefix part {m}")));
                }
                *name
            }
            _ => {
                return vec![format!(
                    "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                    regex_error(QUALIFIED_NAME_ERR, QUALIFIED_NAME_FMT, &["MyName", "my.name", "123-abc"])
                )];
            }
        };
        if name.is_empty() {
            errs.push(format!("name part {}", empty_error()));
        } else if name.len() > QUALIFIED_NAME_MAX_LENGTH {
            errs.push(format!("name part {}", max_len_error(QUALIFIED_NAME_MAX_LENGTH)));
        }
        if !is_qualified_name_part(name) {
            errs.push(format!(
                "name part {}",
                regex_error(QUALIFIED_NAME_ERR, QUALIFIED_NAME_FMT, &["MyName", "my.name", "123-abc"])
            ));
        }
        errs
    }

    /// `IsValidLabelValue`: empty, or at most 63 alphanumerics, `-`, `_` and `.` that
    /// start and end alphanumeric.
    pub fn is_valid_label_value(value: &str) -> Vec<String> {
        let mut errs = Vec::new();
        if value.len() > LABEL_VALUE_MAX_LENGTH {
            errs.push(max_len_error(LABEL_VALUE_MAX_LENGTH));
        }
        if !value.is_empty() && !is_qualified_name_part(value) {
            errs.push(regex_error(LABEL_VALUE_ERR, LABEL_VALUE_FMT, &["MyValue", "my_value", "12345"]));
        }
        errs
    }

    /// `IsDNS1123Label`: at most 63 lower-case alphanumerics or `-`, alphanumeric at both ends.
    pub fn is_dns1123_label(value: &str) -> Vec<String> {
        let mut errs = Vec::new();
        if value.len() > DNS1123_LABEL_MAX_LENGTH {
            errs.push(max_len_error(DNS1123_LABEL_MAX_LENGTH));
        }
        if !is_dns1123_label_text(value) {
            if is_dns1123_subdomain_text(value) {
                // A valid subdomain but not a label: the length was checked, so it is the dots.
                errs.push("must not contain dots".to_owned());
            } else {
                errs.push(regex_error(DNS1123_LABEL_ERR, DNS1123_LABEL_FMT, &["my-name", "123-abc"]));
            }
        }
        errs
    }

    /// `IsDNS1123Subdomain`: at most 253 characters of dot-separated RFC 1123 labels.
    pub fn is_dns1123_subdomain(value: &str) -> Vec<String> {
        let mut errs = Vec::new();
        if value.len() > DNS1123_SUBDOMAIN_MAX_LENGTH {
            errs.push(max_len_error(DNS1123_SUBDOMAIN_MAX_LENGTH));
        }
        if !is_dns1123_subdomain_text(value) {
            errs.push(regex_error(DNS1123_SUBDOMAIN_ERR, DNS1123_SUBDOMAIN_FMT, &["example.com"]));
        }
        errs
    }

    /// `IsDNS1035Label`: like an RFC 1123 label but starting with a letter (Service names).
    pub fn is_dns1035_label(value: &str) -> Vec<String> {
        let mut errs = Vec::new();
        if value.len() > DNS1035_LABEL_MAX_LENGTH {
            errs.push(max_len_error(DNS1035_LABEL_MAX_LENGTH));
        }
        let valid = value.as_bytes().first().is_some_and(u8::is_ascii_lowercase) && is_dns1123_label_text(value);
        if !valid {
            errs.push(regex_error(DNS1035_LABEL_ERR, DNS1035_LABEL_FMT, &["my-name", "abc-123"]));
        }
        errs
    }
}

/// Go's `%q`: a double-quoted string with Go escapes.
pub(crate) use crate::schema::gofmt::quote as go_quote;

/// Joins error messages as `utilerrors.NewAggregate(...).Error()` does: one message as is,
/// several deduplicated inside `[...]`.
fn aggregate(messages: Vec<String>) -> String {
    let mut unique: Vec<String> = Vec::new();
    for m in messages {
        if !unique.contains(&m) {
            unique.push(m);
        }
    }
    if unique.len() == 1 {
        return unique.pop().unwrap_or_default();
    }
    format!("[{}]", unique.join(", "))
}

/// `field.Invalid(path, value, detail).Error()` for a string value.
fn invalid_message(path: &str, value: &str, detail: &str) -> String {
    format!("{path}: Invalid value: {}: {detail}", go_quote(value))
}

// =======================================================================================
// Label selectors

/// A requirement operator (`selection.Operator`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Operator {
    In,
    NotIn,
    Equals,
    DoubleEquals,
    NotEquals,
    Exists,
    DoesNotExist,
    GreaterThan,
    LessThan,
}

/// One `key op values` term of a label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Requirement {
    key: String,
    op: Operator,
    values: Vec<String>,
}

impl Requirement {
    /// `NewRequirement`'s checks of the operator/value combination and of the values
    /// (the key has been checked by the caller). Returns Go-formatted messages.
    fn validate(&self) -> Vec<String> {
        let mut errs = Vec::new();
        let vals = &self.values;
        match self.op {
            Operator::In | Operator::NotIn if vals.is_empty() => errs.push(
                "values: Invalid value: []string{}: for 'in', 'notin' operators, values set can't be empty".to_owned(),
            ),
            Operator::Equals | Operator::DoubleEquals | Operator::NotEquals if vals.len() != 1 => errs.push(format!(
                "values: Invalid value: {}: exact-match compatibility requires one single value",
                go_string_slice(vals)
            )),
            Operator::Exists | Operator::DoesNotExist if !vals.is_empty() => errs.push(format!(
                "values: Invalid value: {}: values set must be empty for exists and does not exist",
                go_string_slice(vals)
            )),
            Operator::GreaterThan | Operator::LessThan => {
                if vals.len() != 1 {
                    errs.push(format!(
                        "values: Invalid value: {}: for 'Gt', 'Lt' operators, exactly one value is required",
                        go_string_slice(vals)
                    ));
                }
                for (i, v) in vals.iter().enumerate() {
                    if v.parse::<i64>().is_err() {
                        errs.push(invalid_message(
                            &format!("values[{i}]"),
                            v,
                            "for 'Gt', 'Lt' operators, the value must be an integer",
                        ));
                    }
                }
            }
            _ => {}
        }
        for (i, v) in vals.iter().enumerate() {
            let problems = syntax::is_valid_label_value(v);
            if !problems.is_empty() {
                errs.push(invalid_message(&format!("values[{i}][{}]", self.key), v, &problems.join("; ")));
            }
        }
        errs
    }

    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let has_value = |v: &String| self.values.contains(v);
        match self.op {
            Operator::In | Operator::Equals | Operator::DoubleEquals => labels.get(&self.key).is_some_and(has_value),
            Operator::NotIn | Operator::NotEquals => !labels.get(&self.key).is_some_and(has_value),
            Operator::Exists => labels.contains_key(&self.key),
            Operator::DoesNotExist => !labels.contains_key(&self.key),
            Operator::GreaterThan | Operator::LessThan => {
                let Some(Ok(actual)) = labels.get(&self.key).map(|v| v.parse::<i64>()) else {
                    return false;
                };
                let [wanted] = self.values.as_slice() else {
                    return false;
                };
                let Ok(wanted) = wanted.parse::<i64>() else {
                    return false;
                };
                if self.op == Operator::GreaterThan { actual > wanted } else { actual < wanted }
            }
        }
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.op == Operator::DoesNotExist {
            f.write_str("!")?;
        }
        f.write_str(&self.key)?;
        let op = match self.op {
            Operator::Equals => "=",
            Operator::DoubleEquals => "==",
            Operator::NotEquals => "!=",
            Operator::In => " in ",
            Operator::NotIn => " notin ",
            Operator::GreaterThan => ">",
            Operator::LessThan => "<",
            Operator::Exists | Operator::DoesNotExist => return Ok(()),
        };
        f.write_str(op)?;
        let set = matches!(self.op, Operator::In | Operator::NotIn);
        if set {
            f.write_str("(")?;
        }
        // Values print sorted, without changing the stored order.
        let mut values: Vec<&str> = self.values.iter().map(String::as_str).collect();
        values.sort_unstable();
        f.write_str(&values.join(","))?;
        if set {
            f.write_str(")")?;
        }
        Ok(())
    }
}

/// Go's `%#v` of a `[]string`.
fn go_string_slice(values: &[String]) -> String {
    let quoted: Vec<String> = values.iter().map(|v| go_quote(v)).collect();
    format!("[]string{{{}}}", quoted.join(", "))
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum LabelSelectorRepr {
    /// All requirements must match; no requirements selects everything.
    Requirements(Vec<Requirement>),
    /// `labels.Nothing()`: what a missing (`null`) `metav1.LabelSelector` converts to.
    Nothing,
}

/// A parsed label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelSelector {
    repr: LabelSelectorRepr,
}

impl Default for LabelSelector {
    fn default() -> Self {
        LabelSelector::everything()
    }
}

impl LabelSelector {
    /// The selector that matches every object (`labels.Everything()`, the empty string).
    pub fn everything() -> Self {
        LabelSelector { repr: LabelSelectorRepr::Requirements(Vec::new()) }
    }

    /// The selector that matches no object (`labels.Nothing()`).
    pub fn nothing() -> Self {
        LabelSelector { repr: LabelSelectorRepr::Nothing }
    }

    /// Whether this selector places no restriction (kube-apiserver skips filtering).
    pub fn is_everything(&self) -> bool {
        matches!(&self.repr, LabelSelectorRepr::Requirements(r) if r.is_empty())
    }

    /// Whether this selector is [`LabelSelector::nothing`].
    pub fn is_nothing(&self) -> bool {
        self.repr == LabelSelectorRepr::Nothing
    }

    /// Parses the query-string form, e.g. `app=web,tier in (a,b),!canary`.
    ///
    /// Errors carry `labels.Parse`'s text, e.g. `unable to parse requirement: found '',
    /// expected: identifier`; kube-apiserver answers them with 400 BadRequest.
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut parser = Parser { tokens: Lexer { s: s.as_bytes(), pos: 0 }.scan(), pos: 0 };
        let mut requirements = parser.parse()?;
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(LabelSelector { repr: LabelSelectorRepr::Requirements(requirements) })
    }

    /// Converts a `metav1.LabelSelector` JSON object as `LabelSelectorAsSelector` does,
    /// after the checks of `ValidateLabelSelector`.
    ///
    /// `null` converts to [`LabelSelector::nothing`] and `{}` to
    /// [`LabelSelector::everything`]; callers decide what an absent selector means for
    /// their resource. Error messages use paths relative to the selector
    /// (`matchExpressions[0].values: Required value: ...`), several joined as `[a, b]`.
    pub fn from_label_selector(v: &Value) -> Result<Self, String> {
        if v.is_null() {
            return Ok(LabelSelector::nothing());
        }
        let Some(obj) = v.as_object() else {
            return Err("a label selector must be an object".to_owned());
        };
        let issues = label_selector_issues(v);
        if !issues.is_empty() {
            return Err(aggregate(issues.iter().map(SelectorIssue::message).collect()));
        }
        let mut requirements = Vec::new();
        if let Some(labels) = obj.get("matchLabels").and_then(Value::as_object) {
            for (k, val) in labels {
                requirements.push(Requirement {
                    key: k.clone(),
                    op: Operator::Equals,
                    values: vec![val.as_str().unwrap_or("").to_owned()],
                });
            }
        }
        for expr in obj.get("matchExpressions").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]) {
            let op = match expr.get("operator").and_then(Value::as_str) {
                Some("In") => Operator::In,
                Some("NotIn") => Operator::NotIn,
                Some("Exists") => Operator::Exists,
                _ => Operator::DoesNotExist,
            };
            let values = expr
                .get("values")
                .and_then(Value::as_array)
                .map(|vals| vals.iter().filter_map(Value::as_str).map(str::to_owned).collect())
                .unwrap_or_default();
            requirements.push(Requirement {
                key: expr.get("key").and_then(Value::as_str).unwrap_or("").to_owned(),
                op,
                values,
            });
        }
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(LabelSelector { repr: LabelSelectorRepr::Requirements(requirements) })
    }

    /// Whether an object with these labels is selected.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        match &self.repr {
            LabelSelectorRepr::Requirements(reqs) => reqs.iter().all(|r| r.matches(labels)),
            LabelSelectorRepr::Nothing => false,
        }
    }

    /// Whether an object is selected, reading its `metadata.labels` (non-string values
    /// are ignored).
    pub fn matches_object(&self, obj: &Value) -> bool {
        if self.is_everything() {
            return true;
        }
        self.matches(&labels_of(obj))
    }
}

/// The string-valued `metadata.labels` of an object.
pub fn labels_of(obj: &Value) -> BTreeMap<String, String> {
    obj.get("metadata")
        .and_then(|m| m.get("labels"))
        .and_then(Value::as_object)
        .map(|m| m.iter().filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_owned()))).collect())
        .unwrap_or_default()
}

impl fmt::Display for LabelSelector {
    /// The canonical form: requirements sorted by key, joined by commas; empty for
    /// everything and for nothing, as upstream.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let LabelSelectorRepr::Requirements(reqs) = &self.repr else {
            return Ok(());
        };
        for (i, r) in reqs.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{r}")?;
        }
        Ok(())
    }
}

/// What is wrong with a `metav1.LabelSelector`, as `ValidateLabelSelector` reports it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SelectorIssue {
    /// The `field.ErrorType`.
    pub(crate) kind: SelectorIssueKind,
    /// Path relative to the selector, e.g. `matchExpressions[0].values`.
    pub(crate) field: String,
    /// The detail message.
    pub(crate) detail: String,
    /// The offending value, for `Invalid`.
    pub(crate) bad_value: Option<Value>,
}

/// The kinds of problem `ValidateLabelSelector` reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SelectorIssueKind {
    Invalid,
    Required,
    Forbidden,
}

impl SelectorIssue {
    fn invalid(field: String, value: Value, detail: String) -> Self {
        SelectorIssue { kind: SelectorIssueKind::Invalid, field, detail, bad_value: Some(value) }
    }

    /// `field.Error.Error()`.
    fn message(&self) -> String {
        match self.kind {
            SelectorIssueKind::Required => {
                format!("{}: Required value: {}", self.field, self.detail)
            }
            SelectorIssueKind::Forbidden => format!("{}: Forbidden: {}", self.field, self.detail),
            SelectorIssueKind::Invalid => {
                let value = match &self.bad_value {
                    Some(Value::String(s)) => go_quote(s),
                    Some(other) => other.to_string(),
                    None => "null".to_owned(),
                };
                format!("{}: Invalid value: {value}: {}", self.field, self.detail)
            }
        }
    }
}

/// `ValidateLabelSelector` (default options) on a `metav1.LabelSelector` JSON object.
pub(crate) fn label_selector_issues(v: &Value) -> Vec<SelectorIssue> {
    let mut issues = Vec::new();
    let Some(obj) = v.as_object() else {
        return issues;
    };
    match obj.get("matchLabels") {
        None | Some(Value::Null) => {}
        Some(Value::Object(labels)) => {
            let sorted: BTreeMap<&String, &Value> = labels.iter().collect();
            for (k, val) in sorted {
                for m in syntax::is_qualified_name(k) {
                    issues.push(SelectorIssue::invalid("matchLabels".to_owned(), Value::String(k.clone()), m));
                }
                match val.as_str() {
                    Some(s) => {
                        for m in syntax::is_valid_label_value(s) {
                            issues.push(SelectorIssue::invalid("matchLabels".to_owned(), val.clone(), m));
                        }
                    }
                    None => issues.push(SelectorIssue::invalid(
                        "matchLabels".to_owned(),
                        val.clone(),
                        "must be a string".to_owned(),
                    )),
                }
            }
        }
        Some(other) => {
            issues.push(SelectorIssue::invalid("matchLabels".to_owned(), other.clone(), "must be an object".to_owned()))
        }
    }
    let exprs = match obj.get("matchExpressions") {
        None | Some(Value::Null) => &[][..],
        Some(Value::Array(a)) => a.as_slice(),
        Some(other) => {
            issues.push(SelectorIssue::invalid(
                "matchExpressions".to_owned(),
                other.clone(),
                "must be a list".to_owned(),
            ));
            &[][..]
        }
    };
    for (i, expr) in exprs.iter().enumerate() {
        let path = format!("matchExpressions[{i}]");
        let values: &[Value] = match expr.get("values") {
            None | Some(Value::Null) => &[],
            Some(Value::Array(a)) => a,
            Some(other) => {
                issues.push(SelectorIssue::invalid(
                    format!("{path}.values"),
                    other.clone(),
                    "must be a list".to_owned(),
                ));
                &[]
            }
        };
        let operator = expr.get("operator").and_then(Value::as_str).unwrap_or("");
        match operator {
            "In" | "NotIn" => {
                if values.is_empty() {
                    issues.push(SelectorIssue {
                        kind: SelectorIssueKind::Required,
                        field: format!("{path}.values"),
                        detail: "must be specified when `operator` is 'In' or 'NotIn'".to_owned(),
                        bad_value: None,
                    });
                }
            }
            "Exists" | "DoesNotExist" => {
                if !values.is_empty() {
                    issues.push(SelectorIssue {
                        kind: SelectorIssueKind::Forbidden,
                        field: format!("{path}.values"),
                        detail: "may not be specified when `operator` is 'Exists' or 'DoesNotExist'".to_owned(),
                        bad_value: None,
                    });
                }
            }
            _ => issues.push(SelectorIssue::invalid(
                format!("{path}.operator"),
                Value::String(operator.to_owned()),
                "not a valid selector operator".to_owned(),
            )),
        }
        let key = expr.get("key").and_then(Value::as_str).unwrap_or("");
        for m in syntax::is_qualified_name(key) {
            issues.push(SelectorIssue::invalid(format!("{path}.key"), Value::String(key.to_owned()), m));
        }
        for (j, value) in values.iter().enumerate() {
            let field = format!("{path}.values[{j}]");
            match value.as_str() {
                Some(s) => {
                    for m in syntax::is_valid_label_value(s) {
                        issues.push(SelectorIssue::invalid(field.clone(), value.clone(), m));
                    }
                }
                None => issues.push(SelectorIssue::invalid(field, value.clone(), "must be a string".to_owned())),
            }
        }
    }
    issues
}

// ---------------------------------------------------------------------------------------
// labels.Parse: a literal port of the lexer and recursive-descent parser, so that the
// accepted language and the error texts are the same.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token {
    Error,
    EndOfString,
    ClosedPar,
    Comma,
    DoesNotExist,
    DoubleEquals,
    Equals,
    GreaterThan,
    Identifier,
    In,
    LessThan,
    NotEquals,
    NotIn,
    OpenPar,
}

fn keyword(s: &[u8]) -> Option<Token> {
    Some(match s {
        b")" => Token::ClosedPar,
        b"," => Token::Comma,
        b"!" => Token::DoesNotExist,
        b"==" => Token::DoubleEquals,
        b"=" => Token::Equals,
        b">" => Token::GreaterThan,
        b"in" => Token::In,
        b"<" => Token::LessThan,
        b"!=" => Token::NotEquals,
        b"notin" => Token::NotIn,
        b"(" => Token::OpenPar,
        _ => return None,
    })
}

fn is_whitespace(ch: u8) -> bool {
    matches!(ch, b' ' | b'\t' | b'\r' | b'\n')
}

fn is_special_symbol(ch: u8) -> bool {
    matches!(ch, b'=' | b'!' | b'(' | b')' | b',' | b'>' | b'<')
}

struct Lexer<'a> {
    s: &'a [u8],
    pos: usize,
}

impl Lexer<'_> {
    /// The next byte, or 0 at the end (a NUL byte in the input reads the same, as upstream).
    fn read(&mut self) -> u8 {
        match self.s.get(self.pos) {
            Some(&b) => {
                self.pos += 1;
                b
            }
            None => 0,
        }
    }

    fn unread(&mut self) {
        self.pos = self.pos.saturating_sub(1);
    }

    fn scan_id_or_keyword(&mut self) -> (Token, String) {
        let mut buffer = Vec::new();
        loop {
            let ch = self.read();
            if ch == 0 {
                break;
            }
            if is_special_symbol(ch) || is_whitespace(ch) {
                self.unread();
                break;
            }
            buffer.push(ch);
        }
        let literal = String::from_utf8_lossy(&buffer).into_owned();
        match keyword(&buffer) {
            Some(tok) => (tok, literal),
            None => (Token::Identifier, literal),
        }
    }

    fn scan_special_symbol(&mut self) -> (Token, String) {
        let mut last: Option<(Token, String)> = None;
        let mut buffer = Vec::new();
        loop {
            let ch = self.read();
            if ch == 0 {
                break;
            }
            if !is_special_symbol(ch) {
                self.unread();
                break;
            }
            buffer.push(ch);
            if let Some(tok) = keyword(&buffer) {
                last = Some((tok, String::from_utf8_lossy(&buffer).into_owned()));
            } else if last.is_some() {
                self.unread();
                break;
            }
        }
        last.unwrap_or_else(|| {
            (Token::Error, format!("error expected: keyword found '{}'", String::from_utf8_lossy(&buffer)))
        })
    }

    fn lex(&mut self) -> (Token, String) {
        let mut ch = self.read();
        while is_whitespace(ch) {
            ch = self.read();
        }
        if ch == 0 {
            return (Token::EndOfString, String::new());
        }
        self.unread();
        if is_special_symbol(ch) { self.scan_special_symbol() } else { self.scan_id_or_keyword() }
    }

    fn scan(mut self) -> Vec<(Token, String)> {
        let mut items = Vec::new();
        loop {
            let (tok, lit) = self.lex();
            items.push((tok, lit));
            if tok == Token::EndOfString {
                return items;
            }
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Context {
    KeyAndOperator,
    Values,
}

struct Parser {
    tokens: Vec<(Token, String)>,
    pos: usize,
}

impl Parser {
    fn token_at(&self, pos: usize, ctx: Context) -> (Token, String) {
        let (tok, lit) = self.tokens.get(pos).cloned().unwrap_or((Token::EndOfString, String::new()));
        // In value position `in` and `notin` are ordinary identifiers.
        let tok = match (ctx, tok) {
            (Context::Values, Token::In | Token::NotIn) => Token::Identifier,
            (_, t) => t,
        };
        (tok, lit)
    }

    fn lookahead(&self, ctx: Context) -> (Token, String) {
        self.token_at(self.pos, ctx)
    }

    fn consume(&mut self, ctx: Context) -> (Token, String) {
        let item = self.token_at(self.pos, ctx);
        self.pos += 1;
        item
    }

    fn parse(&mut self) -> Result<Vec<Requirement>, String> {
        let mut requirements = Vec::new();
        loop {
            let (tok, lit) = self.lookahead(Context::Values);
            match tok {
                Token::Identifier | Token::DoesNotExist => {
                    let r = self.parse_requirement().map_err(|e| format!("unable to parse requirement: {e}"))?;
                    requirements.push(r);
                    let (t, l) = self.consume(Context::Values);
                    match t {
                        Token::EndOfString => return Ok(requirements),
                        Token::Comma => {
                            let (t2, l2) = self.lookahead(Context::Values);
                            if t2 != Token::Identifier && t2 != Token::DoesNotExist {
                                return Err(format!("found '{l2}', expected: identifier after ','"));
                            }
                        }
                        _ => return Err(format!("found '{l}', expected: ',' or 'end of string'")),
                    }
                }
                Token::EndOfString => return Ok(requirements),
                _ => {
                    return Err(format!("found '{lit}', expected: !, identifier, or 'end of string'"));
                }
            }
        }
    }

    fn parse_requirement(&mut self) -> Result<Requirement, String> {
        let (key, op) = self.parse_key_and_infer_operator()?;
        let (op, values) = match op {
            Some(op @ (Operator::Exists | Operator::DoesNotExist)) => (op, Vec::new()),
            _ => {
                let op = self.parse_operator()?;
                let values = match op {
                    Operator::In | Operator::NotIn => self.parse_values()?,
                    _ => self.parse_exact_value()?,
                };
                (op, values)
            }
        };
        let requirement = Requirement { key, op, values };
        let errs = requirement.validate();
        if errs.is_empty() { Ok(requirement) } else { Err(aggregate(errs)) }
    }

    /// Reads `[!]key`; infers `Exists`/`DoesNotExist` when no operator follows.
    fn parse_key_and_infer_operator(&mut self) -> Result<(String, Option<Operator>), String> {
        let mut op = None;
        let (mut tok, mut literal) = self.consume(Context::Values);
        if tok == Token::DoesNotExist {
            op = Some(Operator::DoesNotExist);
            (tok, literal) = self.consume(Context::Values);
        }
        if tok != Token::Identifier {
            return Err(format!("found '{literal}', expected: identifier"));
        }
        let problems = syntax::is_qualified_name(&literal);
        if !problems.is_empty() {
            // Upstream validates with a nil field path, which prints as `<nil>`.
            return Err(invalid_message("<nil>", &literal, &problems.join("; ")));
        }
        let (next, _) = self.lookahead(Context::Values);
        if (next == Token::EndOfString || next == Token::Comma) && op.is_none() {
            op = Some(Operator::Exists);
        }
        Ok((literal, op))
    }

    fn parse_operator(&mut self) -> Result<Operator, String> {
        let (tok, lit) = self.consume(Context::KeyAndOperator);
        Ok(match tok {
            Token::In => Operator::In,
            Token::Equals => Operator::Equals,
            Token::DoubleEquals => Operator::DoubleEquals,
            Token::GreaterThan => Operator::GreaterThan,
            Token::LessThan => Operator::LessThan,
            Token::NotIn => Operator::NotIn,
            Token::NotEquals => Operator::NotEquals,
            _ => {
                return Err(format!("found '{lit}', expected: in, notin, =, ==, !=, gt, lt"));
            }
        })
    }

    /// `(a,b,...)`, returned sorted and deduplicated like a `sets.String`.
    fn parse_values(&mut self) -> Result<Vec<String>, String> {
        let (tok, lit) = self.consume(Context::Values);
        if tok != Token::OpenPar {
            return Err(format!("found '{lit}' expected: '('"));
        }
        let (tok, lit) = self.lookahead(Context::Values);
        match tok {
            Token::Identifier | Token::Comma => {
                let set = self.parse_identifiers_list()?;
                let (close, _) = self.consume(Context::Values);
                if close != Token::ClosedPar {
                    return Err(format!("found '{lit}', expected: ')'"));
                }
                Ok(set.into_iter().collect())
            }
            Token::ClosedPar => {
                self.consume(Context::Values);
                Ok(vec![String::new()])
            }
            _ => Err(format!("found '{lit}', expected: ',', ')' or identifier")),
        }
    }

    fn parse_identifiers_list(&mut self) -> Result<std::collections::BTreeSet<String>, String> {
        let mut set = std::collections::BTreeSet::new();
        loop {
            let (tok, lit) = self.consume(Context::Values);
            match tok {
                Token::Identifier => {
                    set.insert(lit);
                    let (tok2, lit2) = self.lookahead(Context::Values);
                    match tok2 {
                        Token::Comma => continue,
                        Token::ClosedPar => return Ok(set),
                        _ => return Err(format!("found '{lit2}', expected: ',' or ')'")),
                    }
                }
                Token::Comma => {
                    // Empty values: "(,a)", "(a,)" and "(a,,b)" all contain "".
                    if set.is_empty() {
                        set.insert(String::new());
                    }
                    let (tok2, _) = self.lookahead(Context::Values);
                    if tok2 == Token::ClosedPar {
                        set.insert(String::new());
                        return Ok(set);
                    }
                    if tok2 == Token::Comma {
                        self.consume(Context::Values);
                        set.insert(String::new());
                    }
                }
                _ => return Err(format!("found '{lit}', expected: ',', or identifier")),
            }
        }
    }

    fn parse_exact_value(&mut self) -> Result<Vec<String>, String> {
        let (tok, _) = self.lookahead(Context::Values);
        if tok == Token::EndOfString || tok == Token::Comma {
            return Ok(vec![String::new()]);
        }
        let (tok, lit) = self.consume(Context::Values);
        if tok == Token::Identifier { Ok(vec![lit]) } else { Err(format!("found '{lit}', expected: identifier")) }
    }
}

// =======================================================================================
// Field selectors

/// One `field=value` or `field!=value` term.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FieldTerm {
    field: String,
    value: String,
    negated: bool,
}

impl fmt::Display for FieldTerm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let op = if self.negated { "!=" } else { "=" };
        write!(f, "{}{op}{}", self.field, escape_field_value(&self.value))
    }
}

/// A parsed field selector: all terms must hold.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FieldSelector {
    terms: Vec<FieldTerm>,
}

/// `fields.EscapeValue`.
fn escape_field_value(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        if matches!(c, '\\' | ',' | '=') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// `fields.UnescapeValue`, with its errors.
fn unescape_field_value(value: &str) -> Result<String, String> {
    let mut out = String::with_capacity(value.len());
    let mut in_slash = false;
    for c in value.chars() {
        if in_slash {
            match c {
                '\\' | ',' | '=' => out.push(c),
                other => {
                    return Err(format!("invalid field selector: invalid escape sequence: \\{other}"));
                }
            }
            in_slash = false;
            continue;
        }
        match c {
            '\\' => in_slash = true,
            // Go prints the rune with %v, i.e. as its code point number.
            ',' | '=' => {
                return Err(format!("invalid field selector: unescaped character in value: {}", u32::from(c)));
            }
            other => out.push(other),
        }
    }
    if in_slash {
        return Err("invalid field selector: invalid escape sequence: \\".to_owned());
    }
    Ok(out)
}

/// `splitTerms`: split on commas that are not escaped, keeping the escapes.
fn split_field_terms(selector: &str) -> Vec<&str> {
    if selector.is_empty() {
        return Vec::new();
    }
    let mut terms = Vec::new();
    let mut start = 0;
    let mut in_slash = false;
    for (i, c) in selector.char_indices() {
        if in_slash {
            in_slash = false;
        } else if c == '\\' {
            in_slash = true;
        } else if c == ',' {
            terms.push(selector.get(start..i).unwrap_or(""));
            start = i + 1;
        }
    }
    terms.push(selector.get(start..).unwrap_or(""));
    terms
}

/// `splitTerm`: the first `!=`, `==` or `=` splits field from value.
fn split_field_term(term: &str) -> Option<(&str, bool, &str)> {
    for (i, _) in term.char_indices() {
        let rest = term.get(i..)?;
        for (op, negated) in [("!=", true), ("==", false), ("=", false)] {
            if let Some(value) = rest.strip_prefix(op) {
                return Some((term.get(..i)?, negated, value));
            }
        }
    }
    None
}

impl FieldSelector {
    /// The selector that matches everything (the empty string).
    pub fn everything() -> Self {
        FieldSelector::default()
    }

    /// Whether this selector has no terms.
    pub fn is_everything(&self) -> bool {
        self.terms.is_empty()
    }

    /// Parses the query-string form, e.g. `metadata.name=a,status.phase!=Running`.
    ///
    /// Errors carry `fields.ParseSelector`'s text, e.g. `invalid selector: 'x'; can't
    /// understand 'x'`; kube-apiserver answers them with 400 BadRequest.
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut parts = split_field_terms(s);
        parts.sort_unstable();
        let mut terms = Vec::new();
        for part in parts {
            if part.is_empty() {
                continue;
            }
            let Some((field, negated, raw)) = split_field_term(part) else {
                return Err(format!("invalid selector: '{s}'; can't understand '{part}'"));
            };
            terms.push(FieldTerm { field: field.to_owned(), value: unescape_field_value(raw)?, negated });
        }
        Ok(FieldSelector { terms })
    }

    /// The field names the selector refers to, so callers can reject unsupported ones
    /// (`field label not supported: spec.foo`).
    pub fn fields(&self) -> impl Iterator<Item = &str> {
        self.terms.iter().map(|t| t.field.as_str())
    }

    /// Whether an object matches; `get` returns a field's value, `None` reading as `""`.
    pub fn matches(&self, get: impl Fn(&str) -> Option<String>) -> bool {
        self.terms.iter().all(|t| {
            let actual = get(&t.field).unwrap_or_default();
            (actual == t.value) != t.negated
        })
    }

    /// The value a `field=value` (or `==`) term pins `field` to, as `RequiresExactMatch`.
    pub fn requires_exact_match(&self, field: &str) -> Option<&str> {
        self.terms.iter().find(|t| !t.negated && t.field == field).map(|t| t.value.as_str())
    }

    /// The name pinned by `metadata.name=`, which lets a store use a point lookup. The
    /// caller must still apply [`FieldSelector::matches`] to the result, since other
    /// terms may exclude it.
    pub fn exact_name(&self) -> Option<&str> {
        self.requires_exact_match("metadata.name")
    }
}

impl fmt::Display for FieldSelector {
    /// The canonical form: terms in sorted order, values escaped, `==` shown as `=`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, t) in self.terms.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{t}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::syntax::*;
    use super::*;
    use serde_json::json;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn sel(s: &str) -> LabelSelector {
        LabelSelector::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    fn err(s: &str) -> String {
        LabelSelector::parse(s).expect_err(s)
    }

    const NAME_PART_REGEX: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";
    const LABEL_VALUE_REGEX: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
    const SUBDOMAIN_REGEX: &str = r"a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

    // ---- syntax

    #[test]
    fn test_dns1123_subdomain_accepts_dotted_lowercase_names() {
        assert!(is_dns1123_subdomain("example.com").is_empty());
        assert!(is_dns1123_subdomain("a").is_empty());
        assert!(is_dns1123_subdomain("foos.example-1.com").is_empty());
    }

    #[test]
    fn test_dns1123_subdomain_rejects_with_exact_message() {
        for bad in ["Foo", "a..b", "-a", "a-", "a_b", "", ".a", "a."] {
            assert_eq!(is_dns1123_subdomain(bad), [SUBDOMAIN_REGEX], "{bad}");
        }
    }

    #[test]
    fn test_dns1123_subdomain_too_long() {
        let long = "a".repeat(254);
        assert_eq!(is_dns1123_subdomain(&long), ["must be no more than 253 characters"]);
        assert!(is_dns1123_subdomain(&"a".repeat(253)).is_empty());
    }

    #[test]
    fn test_dns1123_label_messages() {
        assert!(is_dns1123_label("my-name").is_empty());
        assert_eq!(is_dns1123_label("a.b"), ["must not contain dots"]);
        assert_eq!(
            is_dns1123_label("My_Name"),
            [
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
            ]
        );
        assert_eq!(is_dns1123_label(&"a".repeat(64)), ["must be no more than 63 characters"]);
    }

    #[test]
    fn test_dns1035_label_must_start_with_letter() {
        assert!(is_dns1035_label("web-1").is_empty());
        let msg = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";
        assert_eq!(is_dns1035_label("1web"), [msg]);
        assert_eq!(is_dns1035_label("web.a"), [msg]);
        assert_eq!(is_dns1035_label(""), [msg]);
    }

    #[test]
    fn test_qualified_name_with_and_without_prefix() {
        assert!(is_qualified_name("app").is_empty());
        assert!(is_qualified_name("example.com/My_Name.1").is_empty());
        assert_eq!(is_qualified_name("a b"), [NAME_PART_REGEX]);
        assert_eq!(is_qualified_name(""), ["name part must be non-empty", NAME_PART_REGEX]);
        assert_eq!(is_qualified_name("/a"), ["prefix part must be non-empty"]);
        assert_eq!(is_qualified_name("Example.com/a"), [format!("prefix part {SUBDOMAIN_REGEX}")]);
        assert_eq!(is_qualified_name(&"a".repeat(64)), ["name part must be no more than 63 characters"]);
    }

    #[test]
    fn test_qualified_name_with_two_slashes() {
        assert_eq!(
            is_qualified_name("a/b/c"),
            [
                "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            ]
        );
    }

    #[test]
    fn test_label_value() {
        assert!(is_valid_label_value("").is_empty());
        assert!(is_valid_label_value("v1.2_3-x").is_empty());
        assert_eq!(is_valid_label_value("-x"), [LABEL_VALUE_REGEX]);
        assert_eq!(is_valid_label_value(&"a".repeat(64)), ["must be no more than 63 characters"]);
    }

    #[test]
    fn test_go_quote_escapes() {
        assert_eq!(go_quote("a\"b\\c\n\u{1}é"), r#""a\"b\\c\n\x01é""#);
    }

    // ---- label selector parsing and matching

    #[test]
    fn test_empty_selector_is_everything() {
        let s = sel("");
        assert!(s.is_everything());
        assert!(s.matches(&labels(&[])));
        assert_eq!(s.to_string(), "");
        assert!(sel("  ").is_everything());
    }

    #[test]
    fn test_equality_operators() {
        let l = labels(&[("app", "web")]);
        assert!(sel("app=web").matches(&l));
        assert!(sel("app==web").matches(&l));
        assert!(!sel("app=db").matches(&l));
        assert!(sel("app!=db").matches(&l));
        assert!(!sel("app!=web").matches(&l));
    }

    #[test]
    fn test_not_equal_and_notin_match_objects_lacking_the_key() {
        let none = labels(&[]);
        assert!(sel("app!=web").matches(&none));
        assert!(sel("app notin (web)").matches(&none));
        assert!(!sel("app=web").matches(&none));
        assert!(!sel("app in (web)").matches(&none));
    }

    #[test]
    fn test_set_operators() {
        let l = labels(&[("tier", "b")]);
        assert!(sel("tier in (a,b)").matches(&l));
        assert!(!sel("tier notin (a,b)").matches(&l));
        assert!(sel("tier notin (a,c)").matches(&l));
    }

    #[test]
    fn test_exists_and_does_not_exist() {
        let l = labels(&[("a", "")]);
        assert!(sel("a").matches(&l));
        assert!(!sel("!a").matches(&l));
        assert!(sel("!b").matches(&l));
        assert!(!sel("b").matches(&l));
    }

    #[test]
    fn test_greater_and_less_than() {
        let l = labels(&[("n", "5"), ("s", "x")]);
        assert!(sel("n>4").matches(&l));
        assert!(!sel("n>5").matches(&l));
        assert!(sel("n<6").matches(&l));
        assert!(!sel("s>1").matches(&l), "non-integer label never matches");
        assert!(!sel("m<9").matches(&l), "missing label never matches");
    }

    #[test]
    fn test_comma_is_and_and_whitespace_is_tolerated() {
        let l = labels(&[("app", "web"), ("tier", "a")]);
        assert!(sel(" app = web , tier in ( a , b ) ,!canary ").matches(&l));
        assert!(!sel("app=web,tier=b").matches(&l));
    }

    #[test]
    fn test_in_and_notin_are_values_in_value_position() {
        let l = labels(&[("x", "in")]);
        assert!(sel("x in (in,notin)").matches(&l));
        assert!(sel("x=in").matches(&l));
    }

    #[test]
    fn test_empty_values() {
        let l = labels(&[("a", "")]);
        assert!(sel("a=").matches(&l));
        assert!(sel("a in ()").matches(&l));
        assert!(sel("a in (,x)").matches(&l));
        assert_eq!(sel("a in (x,)").to_string(), "a in (,x)");
    }

    #[test]
    fn test_canonical_string_sorts_keys_and_values() {
        assert_eq!(
            sel("z=1,!y,a notin (c,b),m in (q), k==v, g>3, h<4, x").to_string(),
            "a notin (b,c),g>3,h<4,k==v,m in (q),x,!y,z=1"
        );
    }

    #[test]
    fn test_operator_without_value_means_empty_value() {
        assert!(sel("a=").matches(&labels(&[("a", "")])));
        assert!(!sel("a=").matches(&labels(&[("a", "x")])));
        assert!(sel("a!=,b").matches(&labels(&[("a", "x"), ("b", "")])));
    }

    #[test]
    fn test_parse_error_messages() {
        assert_eq!(err("a=b,"), "found '', expected: identifier after ','");
        assert_eq!(err("a=b c"), "found 'c', expected: ',' or 'end of string'");
        assert_eq!(err(",a"), "found ',', expected: !, identifier, or 'end of string'");
        assert_eq!(err("!"), "unable to parse requirement: found '', expected: identifier");
        assert_eq!(err("a b"), "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt");
        assert_eq!(err("a in b"), "unable to parse requirement: found 'b' expected: '('");
        assert_eq!(err("a in (b"), "unable to parse requirement: found '', expected: ',' or ')'");
        assert_eq!(err("a in (=)"), "unable to parse requirement: found '=', expected: ',', ')' or identifier");
        assert_eq!(err("a=(b)"), "unable to parse requirement: found '(', expected: identifier");
        assert_eq!(err("a!!b"), "unable to parse requirement: found '!', expected: in, notin, =, ==, !=, gt, lt");
    }

    #[test]
    fn test_invalid_key_is_rejected_with_nil_path() {
        assert_eq!(
            err("a%b=c"),
            format!("unable to parse requirement: <nil>: Invalid value: \"a%b\": {NAME_PART_REGEX}")
        );
    }

    #[test]
    fn test_invalid_value_is_rejected() {
        assert_eq!(
            err("a=b/c"),
            format!("unable to parse requirement: values[0][a]: Invalid value: \"b/c\": {LABEL_VALUE_REGEX}")
        );
    }

    #[test]
    fn test_gt_lt_need_integer() {
        assert_eq!(
            err("a>b"),
            "unable to parse requirement: values[0]: Invalid value: \"b\": for 'Gt', 'Lt' operators, the value must be an integer"
        );
        // Negative numbers are integers but not valid label values.
        assert_eq!(
            err("a<-1"),
            format!("unable to parse requirement: values[0][a]: Invalid value: \"-1\": {LABEL_VALUE_REGEX}")
        );
        assert_eq!(
            err("a>"),
            "unable to parse requirement: values[0]: Invalid value: \"\": for 'Gt', 'Lt' operators, the value must be an integer"
        );
    }

    #[test]
    fn test_multiple_errors_are_aggregated() {
        assert_eq!(
            err("a>x/y"),
            format!(
                "unable to parse requirement: [values[0]: Invalid value: \"x/y\": for 'Gt', 'Lt' operators, the value must be an integer, values[0][a]: Invalid value: \"x/y\": {LABEL_VALUE_REGEX}]"
            )
        );
    }

    #[test]
    fn test_non_ascii_input_does_not_panic() {
        assert!(LabelSelector::parse("é=ü").is_err());
        assert!(LabelSelector::parse("a in (é").is_err());
        assert!(LabelSelector::parse("a\0b").is_err());
    }

    #[test]
    fn test_matches_object_reads_metadata_labels() {
        let obj = json!({"metadata": {"labels": {"app": "web", "n": 1}}});
        assert!(sel("app=web").matches_object(&obj));
        assert!(sel("!n").matches_object(&obj), "non-string label values are ignored");
        assert!(sel("").matches_object(&json!(null)));
    }

    // ---- metav1.LabelSelector

    #[test]
    fn test_from_label_selector_match_labels_and_expressions() {
        let s = LabelSelector::from_label_selector(&json!({
            "matchLabels": {"app": "web"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["b", "a"]},
                {"key": "env", "operator": "NotIn", "values": ["prod"]},
                {"key": "canary", "operator": "DoesNotExist"},
                {"key": "team", "operator": "Exists"}
            ]
        }))
        .unwrap();
        assert_eq!(s.to_string(), "app=web,!canary,env notin (prod),team,tier in (a,b)");
        assert!(s.matches(&labels(&[("app", "web"), ("tier", "a"), ("team", "x")])));
        assert!(!s.matches(&labels(&[("app", "web"), ("tier", "a"), ("team", "x"), ("canary", "1")])));
    }

    #[test]
    fn test_from_label_selector_empty_is_everything_and_null_is_nothing() {
        let empty = LabelSelector::from_label_selector(&json!({})).unwrap();
        assert!(empty.is_everything());
        assert!(empty.matches(&labels(&[])));
        let none = LabelSelector::from_label_selector(&Value::Null).unwrap();
        assert!(none.is_nothing());
        assert!(!none.matches(&labels(&[])));
        assert_eq!(none.to_string(), "");
        assert!(
            LabelSelector::from_label_selector(&json!({"matchLabels": {}, "matchExpressions": []}))
                .unwrap()
                .is_everything()
        );
    }

    #[test]
    fn test_from_label_selector_validation_errors() {
        let e = |v: Value| LabelSelector::from_label_selector(&v).unwrap_err();
        assert_eq!(
            e(json!({"matchExpressions": [{"key": "a", "operator": "In"}]})),
            "matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'"
        );
        assert_eq!(
            e(json!({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]})),
            "matchExpressions[0].values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
        );
        assert_eq!(
            e(json!({"matchExpressions": [{"key": "a", "operator": "Equals", "values": ["x"]}]})),
            "matchExpressions[0].operator: Invalid value: \"Equals\": not a valid selector operator"
        );
        assert_eq!(
            e(json!({"matchLabels": {"a": "-"}})),
            format!("matchLabels: Invalid value: \"-\": {LABEL_VALUE_REGEX}")
        );
        assert_eq!(
            e(json!({"matchExpressions": [{"key": "a b", "operator": "NotIn"}]})),
            format!(
                "[matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn', matchExpressions[0].key: Invalid value: \"a b\": {NAME_PART_REGEX}]"
            )
        );
        assert_eq!(e(json!("app=web")), "a label selector must be an object");
    }

    // ---- field selectors

    fn fsel(s: &str) -> FieldSelector {
        FieldSelector::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    fn getter<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |f| pairs.iter().find(|(k, _)| *k == f).map(|(_, v)| v.to_string())
    }

    #[test]
    fn test_field_selector_operators() {
        let obj = [("metadata.name", "a"), ("metadata.namespace", "ns")];
        assert!(fsel("metadata.name=a").matches(getter(&obj)));
        assert!(fsel("metadata.name==a").matches(getter(&obj)));
        assert!(!fsel("metadata.name!=a").matches(getter(&obj)));
        assert!(fsel("metadata.name=a,metadata.namespace=ns").matches(getter(&obj)));
        assert!(!fsel("metadata.name=a,metadata.namespace=other").matches(getter(&obj)));
    }

    #[test]
    fn test_field_selector_missing_field_reads_as_empty() {
        assert!(fsel("spec.nodeName=").matches(getter(&[])));
        assert!(fsel("spec.nodeName!=n1").matches(getter(&[])));
        assert!(!fsel("spec.nodeName=n1").matches(getter(&[])));
    }

    #[test]
    fn test_field_selector_escapes() {
        let s = fsel(r"a=x\,y\=z\\w");
        assert!(s.matches(getter(&[("a", r"x,y=z\w")])));
        assert_eq!(s.to_string(), r"a=x\,y\=z\\w");
    }

    #[test]
    fn test_field_selector_errors() {
        assert_eq!(FieldSelector::parse("abc").unwrap_err(), "invalid selector: 'abc'; can't understand 'abc'");
        assert_eq!(
            FieldSelector::parse("a=b=c").unwrap_err(),
            "invalid field selector: unescaped character in value: 61"
        );
        assert_eq!(FieldSelector::parse(r"a=b\x").unwrap_err(), r"invalid field selector: invalid escape sequence: \x");
        assert_eq!(FieldSelector::parse(r"a=b\").unwrap_err(), r"invalid field selector: invalid escape sequence: \");
    }

    #[test]
    fn test_field_selector_everything_and_canonical_form() {
        assert!(fsel("").is_everything());
        assert!(fsel("").matches(getter(&[])));
        assert!(fsel(",").is_everything());
        assert_eq!(fsel("b==2,a!=1").to_string(), "a!=1,b=2");
    }

    #[test]
    fn test_field_selector_fields_and_exact_name() {
        let s = fsel("metadata.namespace=ns,metadata.name=a,spec.x!=y");
        let fields: Vec<&str> = s.fields().collect();
        assert_eq!(fields, ["metadata.name", "metadata.namespace", "spec.x"]);
        assert_eq!(s.exact_name(), Some("a"));
        assert_eq!(s.requires_exact_match("metadata.namespace"), Some("ns"));
        assert_eq!(fsel("metadata.name!=a").exact_name(), None);
        assert_eq!(fsel("metadata.name==b").exact_name(), Some("b"));
    }

    #[test]
    fn test_field_selector_first_operator_splits_and_non_ascii_is_safe() {
        let s = fsel("a!b=c");
        assert_eq!(s.fields().collect::<Vec<_>>(), ["a!b"]);
        assert!(fsel("ä=ö").matches(getter(&[("ä", "ö")])));
    }
}

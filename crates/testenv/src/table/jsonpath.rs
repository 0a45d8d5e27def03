//! The subset of Kubernetes JSONPath that CRD printer columns use.
//!
//! kube-apiserver evaluates `additionalPrinterColumns[].jsonPath` with
//! `k8s.io/client-go/util/jsonpath` (template `{<jsonPath>}`, `AllowMissingKeys(true)`).
//! This module follows that implementation rather than RFC 9535, because a test server
//! must show the same cells as a real cluster:
//!
//! * `.a.b` field access; `\.` escapes a dot inside a field name
//!   (`.metadata.labels.app\.kubernetes\.io/name`); `.*` and `[*]` wildcards; `..a`
//!   recursive descent; `$`/`@` name the current object.
//! * `[n]`, `[-1]`, `[a:b]`, `[a:b:step]` array selection; out-of-range indices are an
//!   evaluation error, as upstream.
//! * `['a.b']` is **not** a literal key: upstream re-parses the quoted text as the path
//!   `.a.b`, so it selects `a` then `b`. Use `\.` to reach a key that contains dots.
//! * `[?(@.type=="Ready")]` filters with `==`, `!=`, `<`, `>`, `<=`, `>=`, and
//!   `[?(@.x)]` existence. Comparisons follow Go's `text/template`: operands must have the
//!   same basic kind (string, integer, float, bool), otherwise evaluation fails.
//! * `[a,b]` unions of bracket selections.
//!
//! A missing key yields no result (`AllowMissingKeys`); type mismatches and bad indices
//! yield an [`JsonPathError::Eval`], which callers turn into an empty (`null`) cell exactly
//! as the CRD table convertor does. Text outside a single `{...}` action, `range`/`end`
//! blocks and functions are not supported and fail to parse.

use serde_json::Value;

/// Maximum nesting of filters inside filters, and of JSON levels walked by `..`.
const MAX_DEPTH: usize = 256;

/// Why a JSONPath could not be parsed or evaluated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JsonPathError {
    /// The expression is not valid (or uses a construct this subset does not support).
    #[error("invalid JSONPath {expr:?}: {reason}")]
    Parse {
        /// The expression as given.
        expr: String,
        /// What was wrong.
        reason: String,
    },
    /// The expression is valid but cannot be applied to this document.
    #[error("{0}")]
    Eval(String),
}

/// A parsed JSONPath expression.
#[derive(Debug, Clone, PartialEq)]
pub struct JsonPath {
    steps: Vec<Step>,
}

#[derive(Debug, Clone, PartialEq)]
enum Step {
    Field(String),
    Wildcard,
    Recursive,
    Slice(SliceParams),
    Filter(Box<Filter>),
    Union(Vec<Vec<Step>>),
    /// A construct upstream parses but cannot evaluate here (a bare identifier or
    /// literal outside a filter); evaluating it fails, as upstream's evaluation does.
    Unsupported(String),
}

/// `[start:end:step]` with Go's "known"/"derived" flags (a single index `[i]` is the
/// slice `[i:i+1]` whose end is derived, which matters for negative indices).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct SliceParams {
    start: Option<i64>,
    end: Option<i64>,
    end_derived: bool,
    step: Option<i64>,
}

#[derive(Debug, Clone, PartialEq)]
struct Filter {
    left: Operand,
    /// `None` is the existence test `[?(@.x)]`.
    op: Option<String>,
    right: Operand,
}

#[derive(Debug, Clone, PartialEq)]
enum Operand {
    Path(Vec<Step>),
    Literal(Scalar),
}

/// A value as Go's `text/template` comparison functions classify it.
#[derive(Debug, Clone, PartialEq)]
enum Scalar {
    Str(String),
    Int(i64),
    Float(f64),
    Bool(bool),
}

impl JsonPath {
    /// Parses an expression such as `.status.conditions[?(@.type=="Ready")].status`,
    /// with or without the surrounding `{}`.
    pub fn parse(expr: &str) -> Result<Self, JsonPathError> {
        let fail = |reason: &str| JsonPathError::Parse { expr: expr.to_owned(), reason: reason.to_owned() };
        let trimmed = expr.trim();
        let inner = match trimmed.strip_prefix('{') {
            Some(rest) => rest.strip_suffix('}').ok_or_else(|| fail("unclosed action"))?,
            None => trimmed,
        };
        if inner.trim().is_empty() {
            return Err(fail("empty expression"));
        }
        if inner.contains('{') || inner.contains('}') {
            return Err(fail("only a single {...} action is supported"));
        }
        let chars: Vec<char> = inner.chars().collect();
        let steps = parse_steps(&chars, 0).map_err(|reason| fail(&reason))?;
        Ok(JsonPath { steps })
    }

    /// Every value the expression selects in `root`, in document order.
    pub fn find<'a>(&self, root: &'a Value) -> Result<Vec<&'a Value>, JsonPathError> {
        eval_steps(&self.steps, vec![root])
    }
}

// ---------------------------------------------------------------------------------------
// Parsing

fn is_terminator(c: char) -> bool {
    c.is_whitespace() || matches!(c, '.' | ',' | '[' | ']' | '$' | '@' | '{' | '}' | '(' | ')' | '=' | '<' | '>' | '!')
}

/// Parses a sequence of path steps. `depth` counts filter nesting.
fn parse_steps(chars: &[char], depth: usize) -> Result<Vec<Step>, String> {
    if depth > MAX_DEPTH {
        return Err("filters nested too deeply".to_owned());
    }
    let mut steps = Vec::new();
    let mut pos = 0;
    while let Some(&c) = chars.get(pos) {
        match c {
            c if c.is_whitespace() => pos += 1,
            '$' | '@' => pos += 1, // the current object: nothing to do
            '.' => {
                if chars.get(pos + 1) == Some(&'.') {
                    steps.push(Step::Recursive);
                    pos += 2;
                    // `..name` is recursive descent followed by the field `name`.
                    if chars.get(pos).is_some_and(|&c| is_field_start(c)) {
                        let (name, next) = read_field(chars, pos);
                        pos = next;
                        steps.push(Step::Field(name));
                    }
                    continue;
                }
                pos += 1;
                let (name, next) = read_field(chars, pos);
                pos = next;
                if name == "*" {
                    steps.push(Step::Wildcard);
                } else if !name.is_empty() {
                    steps.push(Step::Field(name));
                }
                // An empty name (`{.}` or `.[0]`) selects the current value itself.
            }
            '[' => {
                if chars.get(pos + 1) == Some(&'?') && chars.get(pos + 2) == Some(&'(') {
                    let (filter, next) = parse_filter(chars, pos + 3, depth)?;
                    steps.push(Step::Filter(Box::new(filter)));
                    pos = next;
                } else {
                    let close = chars[pos..]
                        .iter()
                        .position(|&c| c == ']')
                        .map(|i| pos + i)
                        .ok_or_else(|| "unterminated array".to_owned())?;
                    let text: String = chars[pos + 1..close].iter().collect();
                    steps.extend(parse_bracket(&text, depth)?);
                    pos = close + 1;
                }
            }
            c if is_field_start(c) => {
                // Upstream parses a bare identifier or number but fails to evaluate it.
                let (name, next) = read_field(chars, pos);
                pos = next;
                steps.push(Step::Unsupported(format!("unrecognized identifier {name}")));
            }
            other => return Err(format!("unrecognized character in action: {other:?}")),
        }
    }
    Ok(steps)
}

fn is_field_start(c: char) -> bool {
    c == '_' || c.is_alphanumeric()
}

/// Reads a field name up to the next unescaped terminator; backslashes escape the
/// following character and are removed, as in `parseField`.
fn read_field(chars: &[char], mut pos: usize) -> (String, usize) {
    let mut name = String::new();
    while let Some(&c) = chars.get(pos) {
        if c == '\\' {
            if let Some(&escaped) = chars.get(pos + 1) {
                name.push(escaped);
                pos += 2;
                continue;
            }
            pos += 1;
            continue;
        }
        if is_terminator(c) {
            break;
        }
        name.push(c);
        pos += 1;
    }
    (name, pos)
}

/// Parses the text between `[` and `]` (not a filter).
fn parse_bracket(text: &str, depth: usize) -> Result<Vec<Step>, String> {
    let text = if text.trim() == "*" { ":" } else { text };
    let parts: Vec<&str> = text.split(',').collect();
    if parts.len() > 1 {
        let mut union = Vec::with_capacity(parts.len());
        for part in parts {
            let chars: Vec<char> = format!("[{}]", part.trim()).chars().collect();
            union.push(parse_steps(&chars, depth + 1)?);
        }
        return Ok(vec![Step::Union(union)]);
    }
    // `['a.b']`: upstream re-parses the quoted text as the path `.a.b`.
    if let Some(key) = text.strip_prefix('\'').and_then(|t| t.strip_suffix('\'')).filter(|k| !k.contains('\'')) {
        let chars: Vec<char> = format!(".{key}").chars().collect();
        return parse_steps(&chars, depth + 1);
    }
    parse_slice(text).map(|s| vec![Step::Slice(s)])
}

/// `^(-?[\d]*)(:-?[\d]*)?(:-?[\d]*)?$` with spaces tolerated around numbers.
fn parse_slice(text: &str) -> Result<SliceParams, String> {
    let invalid = || format!("invalid array index {text}");
    let fields: Vec<&str> = text.split(':').collect();
    if fields.len() > 3 {
        return Err(invalid());
    }
    let mut values = [None; 3];
    for (i, field) in fields.iter().enumerate() {
        let field = field.trim();
        if field.is_empty() {
            continue;
        }
        let digits = field.strip_prefix('-').unwrap_or(field);
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(invalid());
        }
        let value: i64 = field.parse().map_err(|_| format!("array index {field} is not a number"))?;
        if let Some(slot) = values.get_mut(i) {
            *slot = Some(value);
        }
    }
    let [start, mut end, step] = values;
    let mut end_derived = false;
    if fields.len() == 1 {
        // A single index `[i]` selects `[i:i+1]`.
        if let Some(i) = start {
            end = Some(i.saturating_add(1));
            end_derived = true;
        }
    }
    Ok(SliceParams { start, end, end_derived, step })
}

/// Parses a filter starting just after `[?(`; returns it and the position after `)]`.
fn parse_filter(chars: &[char], start: usize, depth: usize) -> Result<(Filter, usize), String> {
    let mut pos = start;
    let mut quote: Option<char> = None;
    let close = loop {
        let Some(&c) = chars.get(pos) else {
            return Err("unterminated filter".to_owned());
        };
        match quote {
            Some(q) => {
                if c == '\\' {
                    pos += 1;
                } else if c == q {
                    quote = None;
                }
            }
            None => match c {
                '"' | '\'' => quote = Some(c),
                ')' => break pos,
                _ => {}
            },
        }
        pos += 1;
    };
    if chars.get(close + 1) != Some(&']') {
        return Err("unclosed array expect ]".to_owned());
    }
    let text: String = chars[start..close].iter().collect();
    let filter = split_filter(&text, depth)?;
    Ok((filter, close + 2))
}

/// Splits `left op right` as upstream's `^([^!<>=]+)([!<>=]+)(.+?)$` does; without an
/// operator the filter is an existence test.
fn split_filter(text: &str, depth: usize) -> Result<Filter, String> {
    let is_op = |c: char| matches!(c, '!' | '<' | '>' | '=');
    let left_len = text.find(is_op).unwrap_or(text.len());
    let (left, rest) = text.split_at(left_len);
    let op_len = rest.find(|c: char| !is_op(c)).unwrap_or(rest.len());
    let (op, right) = rest.split_at(op_len);
    if left.is_empty() || op.is_empty() || right.is_empty() {
        return Ok(Filter { left: parse_operand(text, depth)?, op: None, right: Operand::Path(Vec::new()) });
    }
    Ok(Filter { left: parse_operand(left, depth)?, op: Some(op.to_owned()), right: parse_operand(right, depth)? })
}

fn parse_operand(text: &str, depth: usize) -> Result<Operand, String> {
    let t = text.trim();
    if let Some(first @ ('"' | '\'')) = t.chars().next() {
        return unquote(t, first).map(|s| Operand::Literal(Scalar::Str(s)));
    }
    if t == "true" || t == "false" {
        return Ok(Operand::Literal(Scalar::Bool(t == "true")));
    }
    if t.starts_with(|c: char| c.is_ascii_digit() || c == '-' || c == '+') {
        if let Ok(i) = t.parse::<i64>() {
            return Ok(Operand::Literal(Scalar::Int(i)));
        }
        return t
            .parse::<f64>()
            .map(|f| Operand::Literal(Scalar::Float(f)))
            .map_err(|_| format!("cannot parse number {t}"));
    }
    let chars: Vec<char> = t.chars().collect();
    parse_steps(&chars, depth + 1).map(Operand::Path)
}

fn unquote(t: &str, quote: char) -> Result<String, String> {
    let body = t
        .strip_prefix(quote)
        .and_then(|b| b.strip_suffix(quote))
        .ok_or_else(|| format!("unterminated quoted string {t}"))?;
    let mut out = String::with_capacity(body.len());
    let mut chars = body.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some(other) => out.push(other),
            None => return Err(format!("unterminated quoted string {t}")),
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------
// Evaluation

fn eval_steps<'a>(steps: &[Step], mut current: Vec<&'a Value>) -> Result<Vec<&'a Value>, JsonPathError> {
    for step in steps {
        current = eval_step(step, current)?;
    }
    Ok(current)
}

fn eval_step<'a>(step: &Step, input: Vec<&'a Value>) -> Result<Vec<&'a Value>, JsonPathError> {
    match step {
        Step::Field(name) => Ok(input.into_iter().filter_map(|v| v.as_object().and_then(|m| m.get(name))).collect()),
        Step::Wildcard => {
            let mut out = Vec::new();
            for v in input {
                match v {
                    Value::Object(m) => out.extend(m.values()),
                    Value::Array(a) => out.extend(a.iter()),
                    _ => {}
                }
            }
            Ok(out)
        }
        Step::Recursive => {
            let mut out = Vec::new();
            for v in input {
                collect_recursive(v, &mut out, 0)?;
            }
            Ok(out)
        }
        Step::Slice(params) => eval_slice(*params, input),
        Step::Filter(filter) => eval_filter(filter, input),
        Step::Union(branches) => {
            let mut out = Vec::new();
            for branch in branches {
                out.extend(eval_steps(branch, input.clone())?);
            }
            Ok(out)
        }
        Step::Unsupported(reason) => Err(JsonPathError::Eval(reason.clone())),
    }
}

/// `evalRecursive`: every container that has children, followed by its descendants.
fn collect_recursive<'a>(v: &'a Value, out: &mut Vec<&'a Value>, depth: usize) -> Result<(), JsonPathError> {
    if depth > MAX_DEPTH {
        return Err(JsonPathError::Eval("document nested too deeply".to_owned()));
    }
    let children: Vec<&Value> = match v {
        Value::Object(m) => m.values().collect(),
        Value::Array(a) => a.iter().collect(),
        _ => return Ok(()),
    };
    if children.is_empty() {
        return Ok(());
    }
    out.push(v);
    for child in children {
        collect_recursive(child, out, depth + 1)?;
    }
    Ok(())
}

fn eval_slice(params: SliceParams, input: Vec<&Value>) -> Result<Vec<&Value>, JsonPathError> {
    let mut out = Vec::new();
    for v in input {
        let items = match v {
            Value::Null => continue,
            Value::Array(a) => a,
            other => {
                return Err(JsonPathError::Eval(format!("{} is not array or slice", kind_name(other))));
            }
        };
        let len = i64::try_from(items.len()).unwrap_or(i64::MAX);
        let mut start = params.start.unwrap_or(0);
        if start < 0 {
            start += len;
        }
        let mut end = params.end.unwrap_or(len);
        if end < 0 || (end == 0 && params.end_derived) {
            end += len;
        }
        if start == end {
            // Upstream returns what it has collected so far when zero elements are asked for.
            return Ok(out);
        }
        if start >= len || start < 0 {
            return Err(JsonPathError::Eval(format!("array index out of bounds: index {start}, length {len}")));
        }
        if end > len || end < 0 {
            return Err(JsonPathError::Eval(format!("array index out of bounds: index {}, length {len}", end - 1)));
        }
        if start > end {
            return Err(JsonPathError::Eval(format!("starting index {start} is greater than ending index {end}")));
        }
        let step = match params.step {
            Some(s) if s <= 0 => return Err(JsonPathError::Eval("step must be > 0".to_owned())),
            Some(s) => usize::try_from(s).unwrap_or(usize::MAX),
            None => 1,
        };
        // start/end are within 0..=len here, so the conversions cannot fail.
        let from = usize::try_from(start).unwrap_or(0);
        let to = usize::try_from(end).unwrap_or(0);
        out.extend(items.iter().take(to).skip(from).step_by(step));
    }
    Ok(out)
}

fn eval_filter<'a>(filter: &Filter, input: Vec<&'a Value>) -> Result<Vec<&'a Value>, JsonPathError> {
    let mut out = Vec::new();
    for v in input {
        let Value::Array(items) = v else {
            return Err(JsonPathError::Eval(format!("{} is not array or slice and cannot be filtered", kind_name(v))));
        };
        for item in items {
            let Some(op) = &filter.op else {
                let found = match &filter.left {
                    Operand::Path(steps) => eval_steps(steps, vec![item]).map(|r| !r.is_empty()).unwrap_or(false),
                    Operand::Literal(_) => true,
                };
                if found {
                    out.push(item);
                }
                continue;
            };
            let Some(left) = eval_operand(&filter.left, item)? else {
                continue;
            };
            let Some(right) = eval_operand(&filter.right, item)? else {
                continue;
            };
            if compare(op, &left, &right)? {
                out.push(item);
            }
        }
    }
    Ok(out)
}

/// The single value an operand denotes for `item`, `None` when a path selects nothing.
fn eval_operand(operand: &Operand, item: &Value) -> Result<Option<Option<Scalar>>, JsonPathError> {
    match operand {
        Operand::Literal(s) => Ok(Some(Some(s.clone()))),
        Operand::Path(steps) => {
            let found = eval_steps(steps, vec![item])?;
            match found.as_slice() {
                [] => Ok(None),
                [one] => Ok(Some(scalar_of(one))),
                _ => Err(JsonPathError::Eval("can only compare one element at a time".to_owned())),
            }
        }
    }
}

/// Classifies a JSON value as the unstructured decoder would: integers that fit `int64`
/// are integers, other numbers are floats. Objects, arrays and null are not comparable.
fn scalar_of(v: &Value) -> Option<Scalar> {
    match v {
        Value::String(s) => Some(Scalar::Str(s.clone())),
        Value::Bool(b) => Some(Scalar::Bool(*b)),
        Value::Number(n) => match n.as_i64() {
            Some(i) => Some(Scalar::Int(i)),
            None => n.as_f64().map(Scalar::Float),
        },
        _ => None,
    }
}

fn compare(op: &str, left: &Option<Scalar>, right: &Option<Scalar>) -> Result<bool, JsonPathError> {
    let bad_type = || JsonPathError::Eval("invalid type for comparison".to_owned());
    let (Some(l), Some(r)) = (left, right) else {
        return Err(bad_type());
    };
    let equal = || -> Result<bool, JsonPathError> {
        match (l, r) {
            (Scalar::Str(a), Scalar::Str(b)) => Ok(a == b),
            (Scalar::Int(a), Scalar::Int(b)) => Ok(a == b),
            (Scalar::Float(a), Scalar::Float(b)) => Ok(a == b),
            (Scalar::Bool(a), Scalar::Bool(b)) => Ok(a == b),
            _ => Err(JsonPathError::Eval("incompatible types for comparison".to_owned())),
        }
    };
    let less = || -> Result<bool, JsonPathError> {
        match (l, r) {
            (Scalar::Str(a), Scalar::Str(b)) => Ok(a < b),
            (Scalar::Int(a), Scalar::Int(b)) => Ok(a < b),
            (Scalar::Float(a), Scalar::Float(b)) => Ok(a < b),
            (Scalar::Bool(_), Scalar::Bool(_)) => Err(bad_type()),
            _ => Err(JsonPathError::Eval("incompatible types for comparison".to_owned())),
        }
    };
    match op {
        "==" => equal(),
        "!=" => equal().map(|e| !e),
        "<" => less(),
        "<=" => Ok(less()? || equal()?),
        ">" => Ok(!(less()? || equal()?)),
        ">=" => less().map(|l| !l),
        other => Err(JsonPathError::Eval(format!("unrecognized filter operator {other}"))),
    }
}

fn kind_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "map[string]interface {}",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn find(path: &str, doc: &Value) -> Vec<Value> {
        JsonPath::parse(path).unwrap().find(doc).unwrap().into_iter().cloned().collect()
    }

    fn doc() -> Value {
        json!({
            "metadata": {
                "name": "a",
                "labels": {"app.kubernetes.io/name": "web", "x": {"y": "nested"}}
            },
            "spec": {"replicas": 3, "ratio": 1.5, "items": [{"b": 1}, {"b": 2}, {"c": 3}]},
            "status": {"conditions": [
                {"type": "Ready", "status": "True"},
                {"type": "Synced", "status": "False", "count": 2}
            ]}
        })
    }

    #[test]
    fn test_dotted_fields_select_nested_value() {
        assert_eq!(find(".metadata.name", &doc()), vec![json!("a")]);
        assert_eq!(find("{.spec.replicas}", &doc()), vec![json!(3)]);
    }

    #[test]
    fn test_missing_key_selects_nothing() {
        assert!(find(".spec.nothere.deeper", &doc()).is_empty());
        assert!(find(".metadata.name.sub", &doc()).is_empty());
    }

    #[test]
    fn test_index_and_negative_index() {
        assert_eq!(find(".spec.items[0].b", &doc()), vec![json!(1)]);
        assert_eq!(find(".spec.items[-1].c", &doc()), vec![json!(3)]);
    }

    #[test]
    fn test_out_of_range_index_is_an_evaluation_error() {
        let path = JsonPath::parse(".spec.items[5]").unwrap();
        assert!(matches!(path.find(&doc()), Err(JsonPathError::Eval(_))));
    }

    #[test]
    fn test_index_on_non_array_is_an_evaluation_error() {
        let path = JsonPath::parse(".metadata.name[0]").unwrap();
        assert!(matches!(path.find(&doc()), Err(JsonPathError::Eval(_))));
    }

    #[test]
    fn test_wildcard_then_field_collects_every_match() {
        assert_eq!(find(".spec.items[*].b", &doc()), vec![json!(1), json!(2)]);
        assert_eq!(find(".spec.items.*.b", &doc()), vec![json!(1), json!(2)]);
    }

    #[test]
    fn test_slice_with_bounds_and_step() {
        assert_eq!(find(".spec.items[0:2].b", &doc()), vec![json!(1), json!(2)]);
        assert_eq!(find(".spec.items[0:3:2]", &doc()), vec![json!({"b": 1}), json!({"c": 3})]);
    }

    #[test]
    fn test_escaped_dot_reaches_dotted_key() {
        assert_eq!(find(r".metadata.labels.app\.kubernetes\.io/name", &doc()), vec![json!("web")]);
    }

    #[test]
    fn test_quoted_bracket_key_is_reparsed_as_a_path_like_upstream() {
        // ['x.y'] means .x.y in Kubernetes JSONPath.
        assert_eq!(find(".metadata.labels['x.y']", &doc()), vec![json!("nested")]);
        assert!(find(".metadata.labels['app.kubernetes.io/name']", &doc()).is_empty());
        assert_eq!(find(r".metadata.labels['app\.kubernetes\.io/name']", &doc()), vec![json!("web")]);
    }

    #[test]
    fn test_filter_on_condition_type_selects_status() {
        assert_eq!(find(r#".status.conditions[?(@.type=="Ready")].status"#, &doc()), vec![json!("True")]);
        assert_eq!(find(".status.conditions[?(@.type == 'Synced')].status", &doc()), vec![json!("False")]);
    }

    #[test]
    fn test_filter_not_equal_and_numeric_comparison() {
        assert_eq!(find(r#".status.conditions[?(@.type!="Ready")].type"#, &doc()), vec![json!("Synced")]);
        assert_eq!(find(".status.conditions[?(@.count>1)].type", &doc()), vec![json!("Synced")]);
    }

    #[test]
    fn test_filter_existence() {
        assert_eq!(find(".status.conditions[?(@.count)].type", &doc()), vec![json!("Synced")]);
    }

    #[test]
    fn test_filter_with_mismatched_types_is_an_evaluation_error() {
        let path = JsonPath::parse(".status.conditions[?(@.status==true)]").unwrap();
        assert!(matches!(path.find(&doc()), Err(JsonPathError::Eval(_))));
    }

    #[test]
    fn test_filter_on_non_array_is_an_evaluation_error() {
        let path = JsonPath::parse(r#".metadata[?(@.name=="a")]"#).unwrap();
        assert!(matches!(path.find(&doc()), Err(JsonPathError::Eval(_))));
    }

    #[test]
    fn test_recursive_descent_finds_nested_fields() {
        assert_eq!(find("..b", &doc()), vec![json!(1), json!(2)]);
    }

    #[test]
    fn test_union_of_indices() {
        assert_eq!(find(".spec.items[0,2]", &doc()), vec![json!({"b": 1}), json!({"c": 3})]);
    }

    #[test]
    fn test_root_markers_are_accepted() {
        assert_eq!(find("$.metadata.name", &doc()), vec![json!("a")]);
        assert_eq!(find("{@.metadata.name}", &doc()), vec![json!("a")]);
    }

    #[test]
    fn test_invalid_expressions_fail_to_parse() {
        for bad in [".a[", ".a[x]", ".a[?(@.b==1)", "{.a", "{.a}{.b}", ".a[\"b\"]", "#a", "", "{ }"] {
            assert!(matches!(JsonPath::parse(bad), Err(JsonPathError::Parse { .. })), "{bad} should not parse");
        }
    }

    #[test]
    fn test_bare_identifier_parses_but_fails_to_evaluate() {
        let path = JsonPath::parse("metadata").unwrap();
        assert!(matches!(path.find(&doc()), Err(JsonPathError::Eval(_))));
    }

    #[test]
    fn test_deeply_nested_document_does_not_overflow_recursive_descent() {
        let mut v = json!(1);
        for _ in 0..400 {
            v = json!({ "a": v });
        }
        let path = JsonPath::parse("..a").unwrap();
        assert!(path.find(&v).is_err());
    }
}

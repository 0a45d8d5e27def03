//! The charts' Grafana dashboards against what an operator exports: every query of a chart's
//! dashboard must name only metrics that the operator's `/metrics` serves, so that a renamed or
//! removed metric fails a test instead of leaving an empty panel.
//!
//! A query names its metrics with a selector (`name{…}`), as every query of the dashboards does;
//! the test fails for a query that names none, so the convention holds. Template variables read
//! `label_values(<metric>, <label>)`.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::Error;

/// The queries of chart `chart`'s dashboard, rendered with `metrics.dashboard.enabled`: every
/// panel target's `expr` and every template variable's `query`.
pub fn queries(chart: &str) -> Result<Vec<String>, Error> {
    let values =
        tempfile::Builder::new().suffix(".yaml").tempfile().map_err(|e| Error::Io("a values file".into(), e))?;
    std::fs::write(values.path(), "metrics:\n  dashboard:\n    enabled: true\n")
        .map_err(|e| Error::Io("a values file".into(), e))?;
    let path = values.path().to_string_lossy().into_owned();
    let rendered = crate::helm_template(chart, &["ci/minimal-values.yaml", &path], &[])?;
    let config_map = rendered
        .iter()
        .find(|o| o["kind"] == "ConfigMap" && o["metadata"]["name"].as_str().is_some_and(|n| n.ends_with("-dashboard")))
        .ok_or_else(|| Error::Dashboard(format!("chart {chart} rendered no dashboard ConfigMap")))?;
    let mut out = Vec::new();
    for (key, json) in config_map["data"].as_object().into_iter().flatten() {
        let board: Value = serde_json::from_str(json.as_str().unwrap_or_default())
            .map_err(|e| Error::Dashboard(format!("{key} is not JSON: {e}")))?;
        collect(&board, &mut out);
    }
    Ok(out)
}

fn collect(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(map) => {
            for (k, child) in map {
                match (k.as_str(), child) {
                    ("expr", Value::String(q)) => out.push(q.clone()),
                    ("query", Value::String(q)) if q.contains('(') => out.push(q.clone()),
                    _ => collect(child, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|i| collect(i, out)),
        _ => {}
    }
}

/// The metric names `query` reads: each name followed by a selector, and the metric of
/// `label_values(<metric>, …)`.
pub fn metrics_of(query: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let chars: Vec<char> = query.chars().collect();
    let is_start = |c: char| c.is_ascii_alphabetic() || c == '_' || c == ':';
    let is_part = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
    let mut i = 0;
    let mut in_string = false;
    let mut depth = 0;
    while i < chars.len() {
        let c = chars[i];
        if in_string {
            in_string = c != '"';
            i += 1;
            continue;
        }
        match c {
            '"' => in_string = true,
            '{' => depth += 1,
            '}' => depth -= 1,
            _ => {}
        }
        let boundary = i == 0 || !is_part(chars[i - 1]);
        if depth == 0 && boundary && is_start(c) {
            let start = i;
            while i < chars.len() && is_part(chars[i]) {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let next = chars[i..].iter().find(|c| !c.is_whitespace()).copied();
            if next == Some('{') {
                names.insert(word);
            } else if word == "label_values" {
                let rest: String = chars[i..].iter().collect();
                if let Some(metric) = rest.trim_start().strip_prefix('(').and_then(|r| r.split(',').next()) {
                    names.insert(metric.trim().to_string());
                }
            }
            continue;
        }
        i += 1;
    }
    names
}

/// The series names an exposition (Prometheus text, as `/metrics` serves it) can have, from its
/// `# TYPE` lines: `<name>_total` for a counter, `<name>_bucket`, `_sum` and `_count` for a
/// histogram, `<name>` otherwise.
pub fn exported(exposition: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in exposition.lines() {
        let mut words = line.split_whitespace();
        if (words.next(), words.next()) != (Some("#"), Some("TYPE")) {
            continue;
        }
        let (Some(name), Some(kind)) = (words.next(), words.next()) else { continue };
        match kind {
            "counter" => {
                names.insert(format!("{}_total", name.trim_end_matches("_total")));
            }
            "histogram" => {
                for suffix in ["_bucket", "_sum", "_count"] {
                    names.insert(format!("{name}{suffix}"));
                }
            }
            "info" => {
                names.insert(format!("{name}_info"));
            }
            _ => {
                names.insert(name.to_string());
            }
        }
    }
    names
}

/// What is wrong with chart `chart`'s dashboard against `exposition`: each query that names a
/// metric not exported, with the metric, and each query that names none. Empty: every query
/// reads a metric the operator serves.
pub fn problems(chart: &str, exposition: &str) -> Result<Vec<String>, Error> {
    let served = exported(exposition);
    let mut out = Vec::new();
    for query in queries(chart)? {
        let metrics = metrics_of(&query);
        if metrics.is_empty() {
            out.push(format!("query names no metric (write `name{{…}}`): {query}"));
        }
        for m in metrics.iter().filter(|m| !served.contains(*m)) {
            out.push(format!("{m} is not exported; query: {query}"));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_are_read_from_selectors_and_label_values() {
        let q = r#"histogram_quantile(0.9, sum by (le, result) (rate(node_lifecycle_drain_duration_seconds_bucket{namespace="$namespace", x="a{b"}[1h])))"#;
        assert_eq!(metrics_of(q).into_iter().collect::<Vec<_>>(), ["node_lifecycle_drain_duration_seconds_bucket"]);
        assert_eq!(
            metrics_of("label_values(operatorkit_controller_queue_depth, namespace)").into_iter().collect::<Vec<_>>(),
            ["operatorkit_controller_queue_depth"]
        );
        assert!(metrics_of("sum(rate(x[5m]))").is_empty(), "a bare name is not read: the test then fails the query");
    }

    #[test]
    fn exported_names_follow_the_metric_types() {
        let text = "# HELP a A.\n# TYPE a counter\na_total 1\n# TYPE b histogram\n# TYPE c gauge\n";
        let names: Vec<String> = exported(text).into_iter().collect();
        assert_eq!(names, ["a_total", "b_bucket", "b_count", "b_sum", "c"]);
    }
}

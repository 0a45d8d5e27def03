//! Every stack of every fixture cluster must pass checkov's CloudFormation checks, except the
//! findings waived in `checkov-waivers.txt` at the crate root (each with its check, resource
//! and reason). An unwaived failure fails the test, and so does a waiver that matches no
//! failure any more, so the file never lists more than what is true.
//!
//! checkov is taken from `$CHECKOV`, else from its own virtualenv
//! (`<workspace>/.venv/checkov/bin/checkov`, created by `make static-checks`).

mod fixture_clusters;

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use fixture_clusters::{venv_tool, write_all};
use serde_json::Value;

/// The waiver file: one waiver a line, `<check id> <resource type>.<logical id> <reason>`;
/// `#` starts a comment line.
const WAIVERS: &str = include_str!("../checkov-waivers.txt");

/// `(check id, resource)` → reason.
fn waivers() -> BTreeMap<(String, String), String> {
    let mut out = BTreeMap::new();
    for (n, line) in WAIVERS.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut words = line.splitn(3, char::is_whitespace);
        let (Some(check), Some(resource), Some(reason)) = (words.next(), words.next(), words.next()) else {
            panic!("checkov-waivers.txt line {}: want `<check id> <Type.LogicalId> <reason>`, got {line:?}", n + 1);
        };
        assert!(
            check.starts_with("CKV") && resource.contains("::") && !reason.trim().is_empty(),
            "checkov-waivers.txt line {}: want `<check id> <Type.LogicalId> <reason>`, got {line:?}",
            n + 1
        );
        out.insert((check.to_owned(), resource.to_owned()), reason.trim().to_owned());
    }
    out
}

#[test]
fn every_stack_passes_checkov_but_for_the_listed_waivers() {
    let checkov = venv_tool("CHECKOV", ".venv/checkov/bin/checkov", "make static-checks");
    let dir = tempfile::tempdir().expect("temp dir");
    let files = write_all(dir.path());
    let output = Command::new(&checkov)
        .args(["--framework", "cloudformation", "--output", "json", "--quiet", "--compact", "--skip-download"])
        .arg("--directory")
        .arg(dir.path())
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e} (run `make static-checks`)", checkov.display()));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let report: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!("checkov printed no JSON report ({e}):\n{stdout}\n{}", String::from_utf8_lossy(&output.stderr))
    });
    // One framework gives one report object; a list would mean another framework ran too.
    let summary = &report["summary"];
    println!("checkov on {} templates: {summary}", files.len());
    assert_eq!(summary["parsing_errors"], 0, "checkov could not parse a template: {summary}");
    assert!(
        summary["resource_count"].as_u64().unwrap_or(0) > 0 && summary["passed"].as_u64().unwrap_or(0) > 0,
        "checkov checked nothing: {summary}"
    );

    let waivers = waivers();
    let mut used = BTreeSet::new();
    let mut failures = Vec::new();
    for failed in report["results"]["failed_checks"].as_array().into_iter().flatten() {
        let key = (
            failed["check_id"].as_str().unwrap_or_default().to_owned(),
            failed["resource"].as_str().unwrap_or_default().to_owned(),
        );
        if waivers.contains_key(&key) {
            used.insert(key);
        } else {
            failures.push(format!(
                "{} {} in {}: {}",
                key.0,
                key.1,
                failed["file_path"].as_str().unwrap_or_default(),
                failed["check_name"].as_str().unwrap_or_default()
            ));
        }
    }
    failures.sort();
    failures.dedup();
    let waived = report["results"]["failed_checks"].as_array().map_or(0, Vec::len) - failures.len();
    println!("checkov: {} passed, {} failed, {waived} of them waived", summary["passed"], summary["failed"]);
    assert!(
        failures.is_empty(),
        "checkov failures without a waiver in crates/aws-stacks/checkov-waivers.txt (fix the template, or \
         waive with the reason):\n{}",
        failures.join("\n")
    );
    let stale: Vec<String> =
        waivers.keys().filter(|k| !used.contains(*k)).map(|(check, resource)| format!("{check} {resource}")).collect();
    assert!(stale.is_empty(), "waivers in checkov-waivers.txt that match no failure any more:\n{}", stale.join("\n"));
}

//! Every stack, rendered for several clusters, must pass `cfn-lint` without a finding and stay
//! below CloudFormation's inline template size limit.
//!
//! `cfn-lint` is taken from `$CFN_LINT`, else from the workspace virtualenv
//! (`<workspace>/.venv/bin/cfn-lint`, created by `make venv`). A finding of any level (error,
//! warning, informational) fails the test, except the checks in [`IGNORED_CHECKS`].

mod fixture_clusters;

use std::process::Command;

use aws_stacks::cfn::MAX_TEMPLATE_BODY_BYTES;
use fixture_clusters::{SHAPES, render_all, venv_tool, write_all};

/// Checks that cannot pass by design, each with its reason:
///
/// * `W3010` "Avoid hardcoding availability zones": the operator decides the AZ layout (IPAM,
///   §7.6) and renders AZ names as literals; `Fn::GetAZs` would hand the choice back to
///   CloudFormation, and the moto emulator resolves it to us-east-1 zones in every region.
const IGNORED_CHECKS: &str = "W3010";

#[test]
fn every_stack_passes_cfn_lint() {
    let lint = venv_tool("CFN_LINT", ".venv/bin/cfn-lint", "make venv");
    let dir = tempfile::tempdir().expect("temp dir");
    let files = write_all(dir.path());
    let output = Command::new(&lint)
        .args(["--format", "parseable", "--regions", "eu-central-1", "--ignore-checks", IGNORED_CHECKS, "--"])
        .args(&files)
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e} (run `make venv`)", lint.display()));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.trim().is_empty(),
        "cfn-lint reported findings on {} templates (exit {:?}):\n{stdout}\n{stderr}",
        files.len(),
        output.status.code()
    );
}

#[test]
fn every_stack_fits_the_inline_template_limit() {
    // The largest shape: 3 AZs, 3 masters, Route53, AWS-CNI, whitelists.
    let largest = &SHAPES[2];
    for (stack, template) in render_all(largest) {
        let size = template.body_len();
        println!("{stack}: {size} bytes ({} resources)", template.resources.len());
        assert!(size < MAX_TEMPLATE_BODY_BYTES, "{stack} is {size} bytes, limit {MAX_TEMPLATE_BODY_BYTES}");
    }
}

#[test]
fn rendering_is_deterministic() {
    for shape in &SHAPES {
        let a: Vec<String> = render_all(shape).iter().map(|(_, t)| t.hash()).collect();
        let b: Vec<String> = render_all(shape).iter().map(|(_, t)| t.hash()).collect();
        assert_eq!(a, b, "{}", shape.name);
    }
}

//! The whole suite over every node config aws-operator renders: workers and single and HA
//! masters (with every worker volume, which every worker config mounts).

mod support;

use std::time::Instant;

use aws_stacks::ignition::{Role, render};
use node_verify::{Finding, check, tools};
use support::input;

/// Every aws-operator node config: (node, sealed Ignition JSON).
fn configs() -> Vec<(String, String)> {
    let mut roles = vec![("worker-g3j50".to_string(), Role::Worker { md_id: "g3j50".into() })];
    for masters in [1u8, 3] {
        for id in 1..=masters {
            roles.push((format!("master-{id}-of-{masters}"), support::master(id, masters)));
        }
    }
    roles
        .into_iter()
        .map(|(node, role)| {
            let config = render(&input(role)).expect("render");
            // KMS stands aside: the ciphertext is the plaintext; no check reads it.
            let sealed = config.seal(|p| Ok::<_, std::convert::Infallible>(p.to_vec())).expect("seal");
            (node, String::from_utf8(sealed).expect("JSON"))
        })
        .collect()
}

fn report(findings: &[Finding]) -> String {
    findings.iter().map(|f| format!("  {f}\n")).collect()
}

#[test]
fn every_aws_node_config_passes_the_pure_checks() {
    let configs = configs();
    let findings: Vec<Finding> = configs.iter().flat_map(|(node, json)| check(node, json)).collect();
    assert!(findings.is_empty(), "{} configs:\n{}", configs.len(), report(&findings));
}

#[test]
fn every_aws_unit_passes_systemd_analyze_and_every_script_shellcheck() {
    let started = Instant::now();
    let configs = configs();
    let mut findings = Vec::new();
    for (node, json) in &configs {
        findings.extend(tools::systemd_analyze(node, json));
        findings.extend(tools::shellcheck(node, json));
    }
    let units: usize = configs.iter().map(|(_, j)| ignition::parse(j.as_bytes()).expect("parse").units.len()).sum();
    let scripts: usize = configs.iter().map(|(_, j)| node_verify::scripts(j).len()).sum();
    eprintln!(
        "{} aws configs, {units} units, {scripts} scripts through systemd-analyze and shellcheck in {:?}",
        configs.len(),
        started.elapsed()
    );
    assert!(scripts >= configs.len(), "every config has its decrypt script: {scripts}");
    assert!(findings.is_empty(), "{}", report(&findings));
}

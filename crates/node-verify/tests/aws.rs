//! The whole suite over every node config aws-operator renders: workers and single and HA
//! masters (with every worker volume, which every worker config mounts).

use std::collections::BTreeMap;
use std::time::Instant;

use aws_stacks::ignition::{
    InitialClusterState, NodeConfigInput, NodeSecret, Role, etcd_initial_cluster, etcd_name, paths, render, secrets_for,
};
use node_verify::{Finding, check, tools};

fn input(role: Role) -> NodeConfigInput {
    let master = matches!(role, Role::Master { .. });
    // The node's files come from the product's own mapping of the cluster's certificates, as the
    // controllers place them; masters also get the encryption config, as the control plane adds it.
    let certs: BTreeMap<String, BTreeMap<String, Vec<u8>>> = ["worker", "api", "etcd", "service-account"]
        .into_iter()
        .map(|cert| {
            (cert.to_string(), ["ca", "crt", "key"].into_iter().map(|k| (k.to_string(), b"pem".to_vec())).collect())
        })
        .collect();
    let mut secrets = secrets_for(master, &certs).expect("every certificate");
    if master {
        secrets.push(NodeSecret { path: paths::ENCRYPTION_CONFIG.into(), plaintext: b"pem".to_vec() });
    }
    NodeConfigInput {
        role,
        cluster_id: "al9qy".into(),
        base_domain: "al9qy.k8s.example.com".into(),
        api_domain: "api.al9qy.k8s.example.com".into(),
        etcd_domain: "etcd.al9qy.k8s.example.com".into(),
        region: "eu-central-1".into(),
        kubernetes_version: "1.33.4".into(),
        etcd_version: "v3.5.21".into(),
        node_labels: BTreeMap::from([("team".into(), "blue".into())]),
        service_cidr: "172.31.0.0/16".into(),
        cluster_dns_ip: "172.31.0.10".into(),
        pod_cidr: "10.2.0.0/16".into(),
        oidc: None,
        conntrack_max_per_core: None,
        registry: "quay.io".into(),
        secrets,
    }
}

/// Every aws-operator node config: (node, sealed Ignition JSON).
fn configs() -> Vec<(String, String)> {
    let mut roles = vec![("worker-g3j50".to_string(), Role::Worker { md_id: "g3j50".into() })];
    for masters in [1u8, 3] {
        for id in 1..=masters {
            roles.push((
                format!("master-{id}-of-{masters}"),
                Role::Master {
                    id,
                    etcd_name: etcd_name(id),
                    etcd_initial_cluster: etcd_initial_cluster("al9qy.k8s.example.com", masters),
                    initial_cluster_state: InitialClusterState::New,
                },
            ));
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

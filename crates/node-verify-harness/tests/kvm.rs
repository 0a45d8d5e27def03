//! The whole suite over every node config kvm-operator renders: three masters and two workers,
//! etcd on a PVC and on a host path, a host volume whose tag has a `-`, with and without a
//! proxy and registry mirrors; at the Kubernetes version of the fixture and of the example
//! Release.

use std::collections::BTreeMap;
use std::time::Instant;

use apis::kvm::KVMConfig;
use kvm_objects::cluster::{Cluster, Settings};
use kvm_objects::ignition::{EncryptionKey, NodeConfigInput, NodeConfigSettings, Proxy, TlsAsset, render};
use kvm_objects::node_index::allocate;
use node_verify::{Finding, check};
use node_verify_harness::tools;

const FIXTURE: &str = include_str!("../../apis/tests/fixtures/kvmconfig-qz7lt.yaml");

/// The Kubernetes and etcd versions the fixture and the example Release
/// (`docs/examples/kvm-release-v20.1.0.yaml`) pin.
const VERSIONS: [(&str, &str); 2] = [("1.29.9", "3.5.13"), ("1.34.2", "3.5.21")];

fn cluster(storage: &str, (kubernetes, etcd): (&str, &str)) -> Cluster {
    let yaml = FIXTURE
        .replace("mountTag: scratch", "mountTag: t4wzk-data")
        .replace("storageType: persistentVolume", &format!("storageType: {storage}"));
    let config: KVMConfig = serde_saphyr::from_str(&yaml).expect("fixture");
    let components = BTreeMap::from([
        ("containerlinux".to_string(), "3815.2.5".to_string()),
        ("kubernetes".to_string(), kubernetes.to_string()),
        ("etcd".to_string(), etcd.to_string()),
    ]);
    let settings = Settings {
        operator_version: "4.0.0".into(),
        dns_servers: vec!["10.99.0.53".into()],
        ntp_servers: vec!["10.99.0.123".into()],
        images: Default::default(),
    };
    Cluster::new(&config, "v20.1.0", &components, &settings).expect("valid fixture")
}

/// Every kvm-operator node config at the fixture's versions: (node, Ignition JSON).
fn configs() -> Vec<(String, String)> {
    configs_at(VERSIONS[0])
}

/// Every kvm-operator node config at `(kubernetes, etcd)`: (node, Ignition JSON).
fn configs_at(versions: (&str, &str)) -> Vec<(String, String)> {
    let certs: BTreeMap<String, TlsAsset> = ["api", "calico-etcd-client", "etcd", "service-account", "worker"]
        .into_iter()
        .map(|c| (c.to_string(), TlsAsset { ca: b"ca".to_vec(), crt: b"crt".to_vec(), key: b"key".to_vec() }))
        .collect();
    let key = EncryptionKey::from_base64("a2V5");
    let plain = NodeConfigSettings::default();
    let proxied = NodeConfigSettings {
        proxy: Proxy {
            http: "http://proxy.example:3128".into(),
            https: "http://proxy.example:3128".into(),
            no_proxy: vec!["10.0.0.0/8".into()],
        },
        registry_mirrors: vec!["https://mirror.example".into()],
        // With the proxy's drop-in on containerd.service, the custom configuration's joins it.
        pause_image: "gsoci.azurecr.io/giantswarm/pause:3.10".into(),
        dockerhub_token: ignition::extras::DockerhubToken::placeholder(),
        ..NodeConfigSettings::default()
    };
    let mut out = Vec::new();
    for (storage, settings, variant) in
        [("persistentVolume", &plain, "pvc"), ("hostPath", &plain, "hostpath"), ("persistentVolume", &proxied, "proxy")]
    {
        let cluster = cluster(storage, versions);
        let ids: Vec<&str> = cluster.nodes.iter().map(|n| n.id.as_str()).collect();
        let indexes = allocate(&BTreeMap::new(), &ids).indexes;
        for node in &cluster.nodes {
            let input = NodeConfigInput {
                cluster: &cluster,
                node,
                node_indexes: &indexes,
                certs: &certs,
                encryption_key: Some(&key),
                settings,
            };
            out.push((format!("{}/{variant}", node.id), render(&input).expect("render").to_json()));
        }
    }
    out
}

fn report(findings: &[Finding]) -> String {
    findings.iter().map(|f| format!("  {f}\n")).collect()
}

#[test]
fn every_kvm_node_config_passes_the_pure_checks() {
    let configs: Vec<(String, String)> = VERSIONS
        .into_iter()
        .flat_map(|v| configs_at(v).into_iter().map(move |(node, json)| (format!("{node}@{}", v.0), json)))
        .collect();
    assert!(
        configs.iter().any(|(_, j)| j.contains(r#""name":"data-t4wzk\\x2ddata.mount""#)),
        "the host volume's mount unit is escaped"
    );
    let findings: Vec<Finding> = configs.iter().flat_map(|(node, json)| check(node, json)).collect();
    assert!(findings.is_empty(), "{} configs:\n{}", configs.len(), report(&findings));
    // Every pinned version has every list: every component's flags were checked.
    let mut flags = 0;
    for (node, json) in &configs {
        for run in node_verify::components::invocations(json) {
            let minor = run.version.as_deref().and_then(node_verify::components::minor).expect("a tagged image");
            assert!(node_verify::components::flag_list(&run.component, &minor).is_some(), "{node}: {run:?}");
            flags += run.flags.len();
        }
    }
    eprintln!("{} kvm configs, {flags} flags checked", configs.len());
    assert!(flags > 0);
}

#[test]
fn every_kvm_unit_passes_systemd_analyze_every_script_shellcheck_and_every_toml_file_tomllib() {
    let started = Instant::now();
    let configs = configs();
    let mut findings = Vec::new();
    for (node, json) in &configs {
        findings.extend(tools::systemd_analyze(node, json));
        findings.extend(tools::shellcheck(node, json));
        findings.extend(tools::toml(node, json));
    }
    let tomls = configs.iter().filter(|(_, j)| j.contains(ignition::extras::CONTAINERD_CONFIG)).count();
    assert!(tomls >= 1, "the proxied configs carry containerd's configuration: {tomls}");
    let units: usize = configs.iter().map(|(_, j)| ignition::parse(j.as_bytes()).expect("parse").units.len()).sum();
    eprintln!(
        "{} kvm configs, {units} units through systemd-analyze and shellcheck in {:?}",
        configs.len(),
        started.elapsed()
    );
    assert!(findings.is_empty(), "{}", report(&findings));
}

/// Break one reference, one unit name and one field of a rendered master's config: each check
/// names the node, the file or unit and the problem.
#[test]
fn a_broken_rendered_config_fails_the_check_that_covers_it() {
    let (node, json) = configs().into_iter().find(|(n, _)| n == "ma1/pvc").expect("ma1");
    let mut doc: serde_json::Value = serde_json::from_str(&json).expect("JSON");
    let files = doc["storage"]["files"].as_array_mut().expect("files");
    files.retain(|f| f["path"] != "/etc/kubernetes/ssl/worker-ca.pem");
    let findings = check(&node, &doc.to_string());
    assert!(
        findings.iter().any(|f| f.to_string()
            == "node ma1/pvc: /etc/kubernetes/config/kubelet.yaml: names /etc/kubernetes/ssl/worker-ca.pem, \
                which the config neither writes nor makes (Reference)"),
        "{}",
        report(&findings)
    );

    let mut doc: serde_json::Value = serde_json::from_str(&json).expect("JSON");
    for unit in doc["systemd"]["units"].as_array_mut().expect("units") {
        if unit["name"] == "var-lib-etcd.automount" {
            unit["name"] = "var-lib-etcd2.automount".into();
        }
    }
    let findings = check(&node, &doc.to_string());
    assert_eq!(findings.len(), 1, "{}", report(&findings));
    assert_eq!(findings[0].subject, "var-lib-etcd2.automount");
    assert!(findings[0].problem.contains("Where=/var/lib/etcd needs the unit name var-lib-etcd.automount"));

    let mut doc: serde_json::Value = serde_json::from_str(&json).expect("JSON");
    doc["systemd"]["units"][0]["enable"] = true.into();
    let findings = check(&node, &doc.to_string());
    assert_eq!(findings.len(), 1, "{}", report(&findings));
    assert!(
        findings[0].to_string().starts_with("node ma1/pvc: config: not Ignition 3.3: unknown field `enable`"),
        "{}",
        findings[0]
    );
}

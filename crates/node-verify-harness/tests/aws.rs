//! The whole suite over every node config aws-operator renders: workers and single and HA
//! masters (with every worker volume, which every worker config mounts), at every Kubernetes
//! version the fixtures and examples pin.

mod support;

use std::time::Instant;

use aws_stacks::ignition::{Role, render};
use node_verify::{Finding, check};
use node_verify_harness::tools;

/// The Kubernetes versions the fixtures and examples pin, with the etcd of each.
pub const VERSIONS: [(&str, &str); 4] =
    [("1.29.9", "3.5.13"), ("1.31.7", "3.5.17"), ("1.33.4", "3.5.21"), ("1.34.2", "3.5.21")];

/// Every aws-operator node config at the newest pinned version: (node, sealed Ignition JSON).
fn configs() -> Vec<(String, String)> {
    configs_at(VERSIONS[VERSIONS.len() - 1])
}

/// Every aws-operator node config at `(kubernetes, etcd)`: (node, sealed Ignition JSON).
fn configs_at((kubernetes, etcd): (&str, &str)) -> Vec<(String, String)> {
    let mut roles = vec![("worker-g3j50".to_string(), Role::Worker { md_id: "g3j50".into() })];
    for masters in [1u8, 3] {
        for id in 1..=masters {
            roles.push((format!("master-{id}-of-{masters}"), support::master(id, masters)));
        }
    }
    roles
        .into_iter()
        .map(|(node, role)| {
            let mut input = support::input(role);
            input.kubernetes_version = kubernetes.into();
            input.etcd_version = format!("v{etcd}");
            let config = render(&input).expect("render");
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
    let started = Instant::now();
    let mut findings = Vec::new();
    let mut configs = 0;
    for versions in VERSIONS {
        for (node, json) in configs_at(versions) {
            findings.extend(check(&format!("{node}@{}", versions.0), &json));
            configs += 1;
        }
    }
    eprintln!("{configs} aws configs through the pure checks in {:?}", started.elapsed());
    assert!(findings.is_empty(), "{configs} configs:\n{}", report(&findings));
}

/// What the flag check covers: every component run of every config at every pinned version,
/// with its flag list where one is kept; the runs it cannot check are the ones
/// `components::unchecked` names, and only those.
#[test]
fn the_flags_of_every_component_are_checked_where_a_list_is_kept() {
    let mut checked = 0;
    let mut unlisted = std::collections::BTreeSet::new();
    for versions in VERSIONS {
        for (node, json) in configs_at(versions) {
            let runs = node_verify::components::invocations(&json);
            let expected = if node.starts_with("master") { 6 } else { 2 };
            assert_eq!(runs.len(), expected, "{node}: {runs:?}");
            let mut without_list = Vec::new();
            for run in runs {
                let version = run.version.clone().expect("every component runs from a tagged image");
                let minor = node_verify::components::minor(&version).expect("a version");
                match node_verify::components::flag_list(&run.component, &minor) {
                    Some(_) => checked += run.flags.len(),
                    None => {
                        unlisted.insert(format!("{} {minor}", run.component));
                        without_list.push(format!("{}: {} {version}", run.subject, run.component));
                    }
                }
            }
            let unchecked = node_verify::components::unchecked(&json);
            assert_eq!(unchecked.len(), without_list.len(), "{node}: {unchecked:?}");
            for (said, run) in unchecked.iter().zip(&without_list) {
                assert!(said.starts_with(run) && said.contains(": no flag list is kept for "), "{said}");
            }
        }
    }
    eprintln!("{checked} flags checked against their version's list; no list for: {unlisted:?}");
    assert!(checked > 0);
    let lists = |c: &str| node_verify::components::flag_minors(c).join(" ");
    eprintln!(
        "flag lists kept: kube-apiserver {}; kubelet {}; etcd {}",
        lists("kube-apiserver"),
        lists("kubelet"),
        lists("etcd")
    );
    // The lists lag upstream's releases: a version without one is newer than every list kept.
    for u in &unlisted {
        let (component, minor) = u.split_once(' ').expect("component minor");
        let kept = node_verify::components::flag_minors(component);
        assert!(kept.last().is_some_and(|newest| *newest < minor), "{u} lacks a list between kept ones: {kept:?}");
    }
}

/// A Release whose Kubernetes minor no component-config field list is kept for: its kubelet's
/// and kube-proxy's configs cannot be checked, and each is a finding naming the node, the file,
/// the version and the minors kept; no other check finds anything.
#[test]
fn a_kubernetes_version_without_field_lists_is_a_finding_not_a_pass() {
    for kubernetes in ["1.35.0", "1.28.15"] {
        let (_, json) = master((kubernetes, "3.5.21"));
        let minor = node_verify::components::minor(kubernetes).expect("a version");
        let mut findings: Vec<String> = check("master-2", &json).iter().map(ToString::to_string).collect();
        findings.sort();
        let kept = node_verify::components::config_minors("KubeletConfiguration").join(", ");
        assert_eq!(
            findings,
            [
                format!(
                    "node master-2: /etc/kubernetes/config/kube-proxy.yaml: KubeProxyConfiguration of Kubernetes \
                     v{kubernetes}: no field list is kept for {minor}, so it cannot be checked (kept: {kept}); use a \
                     Release whose Kubernetes is one of these (ComponentConfig)"
                ),
                format!(
                    "node master-2: /etc/kubernetes/config/kubelet.yaml: KubeletConfiguration of Kubernetes \
                     v{kubernetes}: no field list is kept for {minor}, so it cannot be checked (kept: {kept}); use a \
                     Release whose Kubernetes is one of these (ComponentConfig)"
                ),
            ]
        );
    }
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

/// `json` with `edit` applied to the text of the file at `path`.
fn edit_file(json: &str, path: &str, edit: impl Fn(&str) -> String) -> String {
    let mut doc: serde_json::Value = serde_json::from_str(json).expect("JSON");
    let file = doc["storage"]["files"]
        .as_array_mut()
        .expect("files")
        .iter_mut()
        .find(|f| f["path"] == path)
        .unwrap_or_else(|| panic!("{path}"));
    let source = file["contents"]["source"].as_str().expect("source");
    let text = String::from_utf8(ignition::decode_data_url(source).expect("data URL")).expect("UTF-8");
    let edited = edit(&text);
    assert_ne!(edited, text, "the edit changes {path}");
    file["contents"]["source"] = ignition::data_url(edited.as_bytes()).into();
    doc.to_string()
}

/// `json` with `edit` applied to the contents of the unit `name`.
fn edit_unit(json: &str, name: &str, edit: impl Fn(&str) -> String) -> String {
    let mut doc: serde_json::Value = serde_json::from_str(json).expect("JSON");
    let unit = doc["systemd"]["units"]
        .as_array_mut()
        .expect("units")
        .iter_mut()
        .find(|u| u["name"] == name)
        .unwrap_or_else(|| panic!("{name}"));
    let text = unit["contents"].as_str().expect("contents").to_string();
    let edited = edit(&text);
    assert_ne!(edited, text, "the edit changes {name}");
    unit["contents"] = edited.into();
    doc.to_string()
}

fn master(versions: (&str, &str)) -> (String, String) {
    configs_at(versions).into_iter().find(|(n, _)| n == "master-2-of-3").expect("master 2")
}

/// Break a component config field, a flag, and use a flag of a newer version in a rendered
/// master's config: each fails its check, naming the node, the file or unit and the problem.
#[test]
fn a_broken_component_config_or_flag_fails_naming_node_file_and_problem() {
    let only = |json: &str| -> Vec<String> { check("master-2", json).iter().map(ToString::to_string).collect() };
    let (_, json) = master(VERSIONS[0]);
    assert_eq!(only(&json), Vec::<String>::new());

    let kubelet = "/etc/kubernetes/config/kubelet.yaml";
    let typo = edit_file(&json, kubelet, |t| t.replace("clientCAFile:", "clientCaFile:"));
    assert_eq!(
        only(&typo),
        ["node master-2: /etc/kubernetes/config/kubelet.yaml: KubeletConfiguration of Kubernetes v1.29.9: \
          unknown field authentication.x509.clientCaFile (ComponentConfig)"]
    );
    // A field kubelet 1.30 added is unknown to kubelet 1.29, and known to 1.31.
    let newer = |json: &str| edit_file(json, kubelet, |t| format!("{t}podLogsDir: /var/log/pods\n"));
    assert_eq!(
        only(&newer(&json)),
        ["node master-2: /etc/kubernetes/config/kubelet.yaml: KubeletConfiguration of Kubernetes v1.29.9: \
          unknown field podLogsDir (ComponentConfig)"]
    );
    assert_eq!(only(&newer(&master(VERSIONS[1]).1)), Vec::<String>::new());
    let proxy =
        edit_file(&json, "/etc/kubernetes/config/kube-proxy.yaml", |t| t.replace("mode: iptables", "mode: [iptables]"));
    assert_eq!(
        only(&proxy),
        ["node master-2: /etc/kubernetes/config/kube-proxy.yaml: KubeProxyConfiguration of Kubernetes v1.29.9: \
          field mode is a list, not string (ComponentConfig)"]
    );

    let apiserver = "/etc/kubernetes/manifests/k8s-api-server.yaml";
    let unknown = edit_file(&json, apiserver, |t| t.replace("--allow-privileged=true", "--allow-privilged=true"));
    assert_eq!(
        only(&unknown),
        ["node master-2: /etc/kubernetes/manifests/k8s-api-server.yaml: kube-apiserver v1.29.9 has no flag \
          --allow-privilged (Flag)"]
    );
    // --emulated-version came with kube-apiserver 1.31.
    let newer = |json: &str| {
        edit_file(json, apiserver, |t| {
            t.replace("- --allow-privileged=true", "- --allow-privileged=true\n        - --emulated-version=1.29")
        })
    };
    assert_eq!(
        only(&newer(&json)),
        ["node master-2: /etc/kubernetes/manifests/k8s-api-server.yaml: kube-apiserver v1.29.9 has no flag \
          --emulated-version (Flag)"]
    );
    assert_eq!(only(&newer(&master(VERSIONS[1]).1)), Vec::<String>::new());

    let kubelet_unit = edit_unit(&json, "kubelet.service", |t| t.replace("--node-labels=", "--node-label="));
    assert_eq!(
        only(&kubelet_unit),
        ["node master-2: kubelet.service: kubelet v1.29.9 has no flag --node-label (Flag)"]
    );
    let etcd =
        edit_unit(&json, "etcd3.service", |t| t.replace("--peer-client-cert-auth=true", "--peer-client-auth=true"));
    assert_eq!(only(&etcd), ["node master-2: etcd3.service: etcd v3.5.13 has no flag --peer-client-auth (Flag)"]);
}

use ignition::{Config, File, Mount, Unit};

use super::*;

fn config() -> Config {
    Config {
        files: vec![
            File::text("/etc/kubernetes/config/kubelet.yaml", "clientCAFile: /etc/kubernetes/ssl/worker-ca.pem\n"),
            File::private("/etc/kubernetes/ssl/worker-ca.pem.enc", b"ciphertext".to_vec()),
            File::script("/opt/bin/decrypt", "#!/bin/bash\nset -eu\necho /etc/kubernetes/ssl/worker-ca.pem.enc\n"),
        ],
        units: vec![
            Unit::new("decrypt.service", "[Service]\nType=oneshot\nExecStart=/opt/bin/decrypt\n"),
            Mount {
                description: "data",
                requires: &[],
                after: &[],
                before: &[],
                what: "t4wzk-data",
                path: "/data/t4wzk-data",
                fs_type: "9p",
                options: None,
                wanted_by: "local-fs.target",
            }
            .unit(),
        ],
        ..Config::default()
    }
}

fn only(findings: &[Finding], check: Check) -> Vec<&Finding> {
    findings.iter().filter(|f| f.check == check).collect()
}

#[test]
fn a_good_config_passes() {
    assert_eq!(check("n1", &config().to_json()), vec![]);
}

#[test]
fn unknown_and_missing_fields_are_errors() {
    let mut doc = config().to_value();
    doc["storage"]["files"][0]["filesystem"] = "root".into();
    let f = check("n1", &doc.to_string());
    assert_eq!(f.len(), 1, "{f:?}");
    assert!(f[0].to_string().contains("node n1") && f[0].problem.contains("unknown field `filesystem`"), "{}", f[0]);
    let mut doc = config().to_value();
    doc["systemd"]["units"][0].as_object_mut().expect("unit").remove("name");
    assert!(check("n1", &doc.to_string())[0].problem.contains("missing field `name`"));
}

#[test]
fn modes_schemes_compression_and_version_are_checked() {
    let mut doc = config().to_value();
    doc["storage"]["files"][0]["mode"] = 0o17777.into();
    doc["storage"]["files"][1]["contents"]["source"] = "ftp://example.com/x".into();
    doc["storage"]["files"][2]["contents"]["compression"] = "bzip2".into();
    doc["ignition"]["version"] = "3.4.0".into();
    let f = check("n1", &doc.to_string());
    let text: Vec<String> = only(&f, Check::Ignition).iter().map(|f| f.to_string()).collect();
    assert_eq!(text.len(), 4, "{text:?}");
    assert!(text[0].contains("ignition.version is \"3.4.0\""), "{text:?}");
    assert!(text[1].contains("/etc/kubernetes/config/kubelet.yaml: mode 0o17777"), "{text:?}");
    assert!(text[2].contains("worker-ca.pem.enc: source scheme \"ftp\""), "{text:?}");
    assert!(text[3].contains("/opt/bin/decrypt: compression \"bzip2\""), "{text:?}");
}

#[test]
fn a_mount_unit_named_without_escaping_fails() {
    let mut doc = config().to_value();
    doc["systemd"]["units"][1]["name"] = "data-t4wzk-data.mount".into();
    let f = check("n1", &doc.to_string());
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].check, Check::UnitName);
    assert_eq!(f[0].subject, "data-t4wzk-data.mount");
    assert!(f[0].problem.contains("data-t4wzk\\x2ddata.mount"), "{}", f[0]);
}

#[test]
fn a_path_nobody_writes_fails_the_reference_check() {
    let mut broken = config();
    broken.files[0] =
        File::text("/etc/kubernetes/config/kubelet.yaml", "clientCAFile: /etc/kubernetes/ssl/wrker-ca.pem\n");
    let f = check("n1", &broken.to_json());
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].check, Check::Reference);
    assert_eq!(
        f[0].to_string(),
        "node n1: /etc/kubernetes/config/kubelet.yaml: names /etc/kubernetes/ssl/wrker-ca.pem, which the config neither writes nor makes (Reference)"
    );
    // A decrypted file is made only when something names its .enc.
    let mut unnamed = config();
    unnamed.files[2] = File::script("/opt/bin/decrypt", "#!/bin/bash\ntrue\n");
    let f = check("n1", &unnamed.to_json());
    assert_eq!(f.len(), 1, "{f:?}");
    assert!(f[0].problem.contains("/etc/kubernetes/ssl/worker-ca.pem"), "{}", f[0]);
}

/// Every Kubernetes component has a flag list for each minor whose component-config fields are
/// kept, so no Release the field lists accept goes with unchecked flags; each list names its
/// upstream source and commit.
#[test]
fn every_supported_minor_has_a_flag_list_of_every_component_with_its_source() {
    let minors = components::config_minors("KubeletConfiguration");
    assert_eq!(minors, ["1.29", "1.30", "1.31", "1.32", "1.33", "1.34"]);
    assert_eq!(components::config_minors("KubeProxyConfiguration"), minors);
    for component in components::COMPONENTS.iter().filter(|c| **c != "etcd") {
        assert_eq!(components::flag_minors(component), minors, "{component}");
    }
    assert_eq!(components::flag_minors("etcd"), ["3.4", "3.5"]);
    let commit = |source: &str| source.split(|c: char| !c.is_ascii_hexdigit()).any(|w| w.len() == 40);
    for component in components::COMPONENTS {
        for minor in components::flag_minors(component) {
            let list = components::flag_list(component, minor).expect("a list");
            assert!(list.source.starts_with(&format!("{component} {minor}: ")), "{}", list.source);
            let upstream = if component == "etcd" { "etcd-io/etcd" } else { "kubernetes/website" };
            assert!(list.source.contains(upstream) && commit(list.source), "{component} {minor}: {}", list.source);
            assert!(list.entries.len() > 40, "{component} {minor}: {} flags", list.entries.len());
            assert!(list.entries.iter().all(|f| !f.is_empty() && !f.starts_with('-')), "{component} {minor}");
        }
    }
}

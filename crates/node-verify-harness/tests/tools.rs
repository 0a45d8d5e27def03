//! The real tools on a small config: `systemd-analyze verify`, `shellcheck` and `tomllib` pass a
//! good one and name what they refuse, with the node and the unit or file.

use ignition::{Config, Dropin, File, Mount, Unit};
use node_verify_harness::tools;

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

#[test]
fn the_tools_pass_a_good_config_and_name_what_they_refuse() {
    let good = config().to_json();
    assert_eq!(tools::systemd_analyze("n1", &good), vec![]);
    assert_eq!(tools::shellcheck("n1", &good), vec![]);
    let mut doc = config().to_value();
    doc["systemd"]["units"][1]["name"] = "data-t4wzk-data.mount".into();
    doc["systemd"]["units"][0]["contents"] = "[Service]\nType=oneshot\nExecStart=/opt/bin/decrypt\nBogus=1\n".into();
    let f = tools::systemd_analyze("n1", &doc.to_string());
    let text: Vec<String> = f.iter().map(|f| f.to_string()).collect();
    assert!(
        text.iter()
            .any(|t| t.contains("node n1: data-t4wzk-data.mount:")
                && t.contains("Where= setting doesn't match unit name")),
        "{text:?}"
    );
    assert!(
        text.iter().any(|t| t.contains("node n1: decrypt.service:") && t.contains("Unknown key 'Bogus'")),
        "{text:?}"
    );
    let mut bad = config();
    bad.files[2] = File::script(
        "/opt/bin/decrypt",
        "#!/bin/bash\nfor f in $(ls /etc/kubernetes/ssl/worker-ca.pem.enc); do echo $f; done\n",
    );
    let f = tools::shellcheck("n1", &bad.to_json());
    assert_eq!(f.len(), 1, "{f:?}");
    assert!(f[0].to_string().starts_with("node n1: /opt/bin/decrypt: line "), "{}", f[0]);
    assert!(f[0].problem.contains("SC2045") || f[0].problem.contains("SC2086"), "{}", f[0]);
}

#[test]
fn a_drop_in_on_an_image_unit_and_a_toml_file_are_checked_too() {
    let extras = ignition::extras::NodeExtras { pause_image: "pause:3.10".into(), ..Default::default() };
    let mut good = config();
    good.files.extend(extras.files());
    for (service, dropin) in extras.dropins() {
        ignition::add_dropin(&mut good.units, service, dropin);
    }
    let good = good.to_json();
    assert_eq!(tools::systemd_analyze("n1", &good), vec![]);
    assert_eq!(tools::toml("n1", &good), vec![]);

    let mut bad = config();
    bad.units.push(Unit::dropins("containerd.service", vec![Dropin::new("10-x.conf", "[Service]\nBogus=1\n")]));
    bad.files.push(File::text("/etc/containerd/config.toml", "version = 2\n[plugins\nsandbox_image = \"x\"\n"));
    let bad = bad.to_json();
    let f = tools::systemd_analyze("n1", &bad);
    assert!(f.iter().any(|f| f.subject == "containerd.service" && f.problem.contains("Unknown key 'Bogus'")), "{f:?}");
    let f = tools::toml("n1", &bad);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].subject, "/etc/containerd/config.toml");
    assert!(f[0].problem.contains("line 2"), "{}", f[0]);
}

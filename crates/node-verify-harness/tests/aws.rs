//! The whole suite over every node config aws-operator renders: workers and single and HA
//! masters (with every worker volume, which every worker config mounts), masters of clusters
//! with IAM roles for service accounts, and the master and workers of a legacy `AWSConfig`
//! cluster (the apis fixture, through the product's mapping of its fields), at every Kubernetes
//! version the fixtures and examples pin.

mod support;

use std::time::Instant;

use aws_stacks::ignition::{NodeTuning, Role, render};
use node_verify::{Finding, check};
use node_verify_harness::tools;

/// The Kubernetes versions the fixtures and examples pin, with the etcd of each.
pub const VERSIONS: [(&str, &str); 4] =
    [("1.29.9", "3.5.13"), ("1.31.7", "3.5.17"), ("1.33.4", "3.5.21"), ("1.34.2", "3.5.21")];

/// Every aws-operator node config at the newest pinned version: (node, sealed Ignition JSON).
fn configs() -> Vec<(String, String)> {
    configs_at(VERSIONS[VERSIONS.len() - 1])
}

/// Every aws-operator node config at `(kubernetes, etcd)`: (node, sealed Ignition JSON). The
/// `-tuned` ones carry every setting a fleet may add ([`NodeTuning`]): etcd's quota, the pod
/// garbage collection, Cilium's ENI mode and cgroups v1; and what an installation adds to every
/// node (an SSH user, the SSO CA, a registry mirror, the pause image, a Docker Hub token).
fn configs_at((kubernetes, etcd): (&str, &str)) -> Vec<(String, String)> {
    // (node, role, tuned, with IAM roles for service accounts)
    let mut roles = vec![("worker-g3j50".to_string(), Role::Worker { md_id: "g3j50".into() }, false, false)];
    for masters in [1u8, 3] {
        // The product's own master ids: 0 for a single master, 1 to 3 for three.
        let ids = aws_stacks::stacks::tccpn::master_ids(masters.into()).expect("a supported master count");
        for &id in &ids {
            roles.push((format!("master-{id}-of-{masters}"), support::master(id, masters), false, false));
        }
        // With IAM roles for service accounts: the API server signs as the public issuer.
        roles.push((format!("master-{}-of-{masters}-irsa", ids[0]), support::master(ids[0], masters), false, true));
    }
    roles.push(("worker-g3j50-tuned".to_string(), Role::Worker { md_id: "g3j50".into() }, true, false));
    roles.push(("master-1-of-3-tuned".to_string(), support::master(1, 3), true, false));
    let mut configs: Vec<(String, String)> = roles
        .into_iter()
        .map(|(node, role, tuned, irsa)| {
            let input = support::input(role);
            let mut input = if irsa { support::with_irsa(input) } else { input };
            if tuned {
                input.tuning = NodeTuning {
                    etcd_quota_backend_bytes: Some(8_589_934_592),
                    terminated_pod_gc_threshold: Some(500),
                    cilium_eni: true,
                    cgroup_v1: true,
                };
                input.extras = ignition::extras::NodeExtras {
                    ssh_users: ignition::extras::parse_ssh_users("alice:ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIa alice")
                        .expect("users"),
                    sso_public_key: "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIs sso-ca".into(),
                    registry_mirrors: vec!["https://mirror.example.com".into()],
                    pause_image: "gsoci.azurecr.io/giantswarm/pause:3.10".into(),
                    dockerhub_token: ignition::extras::DockerhubToken::placeholder(),
                };
            }
            input.kubernetes_version = kubernetes.into();
            input.etcd_version = format!("v{etcd}");
            let config = render(&input).expect("render");
            // KMS stands aside: the ciphertext is the plaintext; no check reads it.
            let sealed = config.seal(|p| Ok::<_, std::convert::Infallible>(p.to_vec())).expect("seal");
            (node, String::from_utf8(sealed).expect("JSON"))
        })
        .collect();
    configs.extend(legacy_configs_at((kubernetes, etcd)));
    configs
}

/// The legacy cluster as Giant Swarm's API wrote it.
const LEGACY_FIXTURE: &str = include_str!("../../apis/tests/fixtures/awsconfig-p3x7d.yaml");

/// The master's and the workers' configs of the legacy fixture cluster at `(kubernetes, etcd)`,
/// from the product's own mapping of the object ([`aws_stacks::stacks::legacy::inputs`]); the
/// secret files are the product's mapping of the certificates, as for the other nodes.
fn legacy_configs_at((kubernetes, etcd): (&str, &str)) -> Vec<(String, String)> {
    use aws_stacks::stacks::legacy::inputs::{Installation, LegacyNode, node_config_input};
    let config: apis::aws_config::AWSConfig = serde_saphyr::from_str(LEGACY_FIXTURE).expect("fixture");
    let installation = Installation {
        installation: "tyrell".into(),
        operator_version: "16.2.0".into(),
        release_version: "6.3.0".into(),
        kubernetes_version: kubernetes.into(),
        etcd_version: format!("v{etcd}"),
        route53_enabled: true,
        tenant_account_id: "210987654321".into(),
        management_account_id: "000111222333".into(),
        management_vpc_cidr: "10.0.0.0/16".into(),
        peer_role_arn: "arn:aws:iam::000111222333:role/p3x7d-vpc-peer-access".into(),
        kms_key_arn: "arn:aws:kms:eu-west-1:210987654321:key/5e6f7a8b".into(),
        imds_http_tokens: "required".into(),
        registry: "quay.io".into(),
        extras: Default::default(),
    };
    [
        ("master-legacy-p3x7d", LegacyNode::Master { existing: false }, support::master(0, 1)),
        ("worker-legacy-p3x7d", LegacyNode::Worker, Role::Worker { md_id: "worker".into() }),
    ]
    .into_iter()
    .map(|(node, legacy, role)| {
        let secrets = support::input(role).secrets;
        let input = node_config_input(&config, &installation, legacy, secrets).expect("a valid fixture");
        let sealed =
            render(&input).expect("render").seal(|p| Ok::<_, std::convert::Infallible>(p.to_vec())).expect("seal");
        (node.to_string(), String::from_utf8(sealed).expect("JSON"))
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

/// What the flag check covers: every component run of every config at every pinned version
/// runs from a tagged image whose version has a flag list, so every flag is checked.
#[test]
fn the_flags_of_every_component_are_checked_at_every_pinned_version() {
    let mut total = 0;
    for versions in VERSIONS {
        let mut checked = std::collections::BTreeMap::<String, usize>::new();
        for (node, json) in configs_at(versions) {
            let runs = node_verify::components::invocations(&json);
            let expected = if node.starts_with("master") { 6 } else { 2 };
            assert_eq!(runs.len(), expected, "{node}: {runs:?}");
            for run in runs {
                let version = run.version.clone().expect("every component runs from a tagged image");
                let minor = node_verify::components::minor(&version).expect("a version");
                assert!(node_verify::components::flag_list(&run.component, &minor).is_some(), "{node}: {run:?}");
                *checked.entry(run.component).or_default() += run.flags.len();
            }
        }
        let sum: usize = checked.values().sum();
        eprintln!("Kubernetes {} / etcd {}: {sum} flags checked {checked:?}", versions.0, versions.1);
        assert!(checked.len() == 6 && checked.values().all(|n| *n > 0), "{checked:?}");
        total += sum;
    }
    let lists = |c: &str| node_verify::components::flag_minors(c).join(" ");
    eprintln!(
        "{total} flags checked against their version's list; lists kept: kube-apiserver {}; kubelet {}; etcd {}",
        lists("kube-apiserver"),
        lists("kubelet"),
        lists("etcd")
    );
}

/// A Release whose Kubernetes minor no list is kept for: its kubelet's and kube-proxy's configs
/// and the flags of every Kubernetes component cannot be checked, and each is a finding naming
/// the node, the file or unit, the version and the minors kept; no other check finds anything.
/// Likewise for an etcd minor without a flag list.
#[test]
fn a_version_without_lists_is_a_finding_not_a_pass() {
    let kept = node_verify::components::config_minors("KubeletConfiguration").join(", ");
    for kubernetes in ["1.35.0", "1.28.15"] {
        let (_, json) = master((kubernetes, "3.5.21"));
        let minor = node_verify::components::minor(kubernetes).expect("a version");
        let mut findings: Vec<String> = check("master-2", &json).iter().map(ToString::to_string).collect();
        findings.sort();
        let config = |path: &str, kind: &str| {
            format!(
                "node master-2: {path}: {kind} of Kubernetes v{kubernetes}: no field list is kept for {minor}, so it \
                 cannot be checked (kept: {kept}); use a Release whose Kubernetes is one of these (ComponentConfig)"
            )
        };
        let flags = |subject: &str, component: &str| {
            format!(
                "node master-2: {subject}: {component} v{kubernetes}: no flag list is kept for {minor}, so its flags \
                 cannot be checked (kept: {kept}); use a Release whose Kubernetes is one of these (Flag)"
            )
        };
        let mut expected = vec![
            config("/etc/kubernetes/config/kube-proxy.yaml", "KubeProxyConfiguration"),
            config("/etc/kubernetes/config/kubelet.yaml", "KubeletConfiguration"),
            flags("/etc/kubernetes/manifests/k8s-api-server.yaml", "kube-apiserver"),
            flags("/etc/kubernetes/manifests/k8s-controller-manager.yaml", "kube-controller-manager"),
            flags("/etc/kubernetes/manifests/k8s-scheduler.yaml", "kube-scheduler"),
            flags("/etc/kubernetes/manifests/kube-proxy.yaml", "kube-proxy"),
            flags("kubelet.service", "kubelet"),
        ];
        expected.sort();
        assert_eq!(findings, expected);
    }
    let (_, json) = master(("1.34.2", "3.6.4"));
    assert_eq!(
        check("master-2", &json).iter().map(ToString::to_string).collect::<Vec<_>>(),
        ["node master-2: etcd3.service: etcd v3.6.4: no flag list is kept for 3.6, so its flags cannot be checked \
          (kept: 3.4, 3.5); use a Release whose etcd is one of these (Flag)"]
    );
    // Releases that still pin etcd 3.4 are checked against 3.4's flags: the rendered unit passes,
    // and a flag that came with 3.5 is a finding.
    let (_, json) = master(("1.34.2", "3.4.23"));
    assert_eq!(check("master-2", &json).iter().map(ToString::to_string).collect::<Vec<_>>(), Vec::<String>::new());
    let newer = edit_unit(&json, "etcd3.service", |t| t.replace("--name=", "--experimental-memory-mlock --name="));
    assert_eq!(
        check("master-2", &newer).iter().map(ToString::to_string).collect::<Vec<_>>(),
        ["node master-2: etcd3.service: etcd v3.4.23 has no flag --experimental-memory-mlock (Flag)"]
    );
}

#[test]
fn every_aws_unit_passes_systemd_analyze_every_script_shellcheck_and_every_toml_file_tomllib() {
    let started = Instant::now();
    let configs = configs();
    let mut findings = Vec::new();
    for (node, json) in &configs {
        findings.extend(tools::systemd_analyze(node, json));
        findings.extend(tools::shellcheck(node, json));
        findings.extend(tools::toml(node, json));
    }
    let tomls = configs.iter().filter(|(_, j)| j.contains(ignition::extras::CONTAINERD_CONFIG)).count();
    assert!(tomls >= 2, "the tuned configs carry containerd's configuration: {tomls}");
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

    // A member that is not in its own initial cluster, or that advertises another peer URL
    // than the cluster gives it, would not start.
    let stranger = edit_unit(&json, "etcd3.service", |t| t.replace("--name=etcd2 ", "--name=etcd0 "));
    assert_eq!(
        only(&stranger),
        [format!(
            "node master-2: etcd3.service: etcd --name=etcd0 is no member of its --initial-cluster={}; \
             etcd would not start (Flag)",
            aws_stacks::ignition::etcd_initial_cluster("al9qy.k8s.example.com", 3)
        )]
    );
    let elsewhere = edit_unit(&json, "etcd3.service", |t| {
        t.replace("--initial-advertise-peer-urls=https://etcd2.", "--initial-advertise-peer-urls=https://etcd3.")
    });
    assert_eq!(
        only(&elsewhere),
        ["node master-2: etcd3.service: etcd etcd2 advertises peer URLs \
          https://etcd3.al9qy.k8s.example.com:2380 but its --initial-cluster gives it \
          https://etcd2.al9qy.k8s.example.com:2380; etcd would not start (Flag)"]
    );
}

/// The lists follow upstream from minor to minor: a flag kubelet lost in 1.34 is a finding at
/// 1.34 and passes at 1.33; flags the control plane gained in 1.32 and 1.33 are findings at
/// 1.31 and pass at 1.33. Each finding names the node, the unit or file, and the flag.
#[test]
fn a_flag_is_checked_against_the_list_of_its_own_minor() {
    let only = |json: &str| -> Vec<String> { check("master-2", json).iter().map(ToString::to_string).collect() };
    let (v131, v133, v134) = (master(VERSIONS[1]).1, master(VERSIONS[2]).1, master(VERSIONS[3]).1);
    for json in [&v131, &v133, &v134] {
        assert_eq!(only(json), Vec::<String>::new());
    }

    // kubelet's --register-schedulable went in 1.34.
    let kubelet = |json: &str| {
        edit_unit(json, "kubelet.service", |t| {
            t.replace("--node-labels=", "--register-schedulable=true --node-labels=")
        })
    };
    assert_eq!(
        only(&kubelet(&v134)),
        ["node master-2: kubelet.service: kubelet v1.34.2 has no flag --register-schedulable (Flag)"]
    );
    assert_eq!(only(&kubelet(&v133)), Vec::<String>::new());

    // kube-apiserver's --emulation-forward-compatible came in 1.33.
    let apiserver = |json: &str| {
        edit_file(json, "/etc/kubernetes/manifests/k8s-api-server.yaml", |t| {
            t.replace(
                "- --allow-privileged=true",
                "- --allow-privileged=true\n        - --emulation-forward-compatible=false",
            )
        })
    };
    assert_eq!(
        only(&apiserver(&v131)),
        ["node master-2: /etc/kubernetes/manifests/k8s-api-server.yaml: kube-apiserver v1.31.7 has no flag \
          --emulation-forward-compatible (Flag)"]
    );
    assert_eq!(only(&apiserver(&v133)), Vec::<String>::new());

    // kube-controller-manager's --concurrent-daemonset-syncs came in 1.32.
    let controller_manager = |json: &str| {
        edit_file(json, "/etc/kubernetes/manifests/k8s-controller-manager.yaml", |t| {
            t.replace("- --leader-elect=true", "- --leader-elect=true\n        - --concurrent-daemonset-syncs=2")
        })
    };
    assert_eq!(
        only(&controller_manager(&v131)),
        ["node master-2: /etc/kubernetes/manifests/k8s-controller-manager.yaml: kube-controller-manager v1.31.7 \
          has no flag --concurrent-daemonset-syncs (Flag)"]
    );
    assert_eq!(only(&controller_manager(&v134)), Vec::<String>::new());
}

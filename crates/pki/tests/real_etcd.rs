//! The real etcd (Debian `etcd-server`) started exactly as each provider's rendered master
//! config starts it, with certificates this crate issues, placed where the node config puts them;
//! a client with the API server's rendered etcd client flags (etcdctl, Debian `etcd-client`)
//! writes and reads a key. This proves the unit's command line, the certificate paths and the
//! certificates' names and usages together.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use pki::secret::CERTIFICATE_LABEL;
use pki::{ClusterNames, EncryptionKey, IssueOptions, encryption_configuration, issue_cluster_pki};
use support::node::{Etcd, Node, apiserver_flag};

/// The certificate Secrets' data by certificate name, as the operators collect them by label.
fn certificate_data(pki: &pki::ClusterPki, cluster_id: &str) -> BTreeMap<String, BTreeMap<String, Vec<u8>>> {
    pki.secrets("org-umbra", cluster_id)
        .into_iter()
        .filter_map(|s| {
            let cert = s.metadata.labels.as_ref()?.get(CERTIFICATE_LABEL)?.clone();
            Some((cert, s.data?.into_iter().map(|(k, v)| (k, v.0)).collect()))
        })
        .collect()
}

/// A single AWS master (`etcd0`), its certificates from the returned PKI.
fn aws_master() -> (Node, pki::ClusterPki) {
    use aws_stacks::ignition::{self, InitialClusterState, NodeConfigInput, NodeSecret, Role, paths};
    use aws_stacks::names;
    let (id, domain) = ("al9qy", "gauss.eu-central-1.aws.gigantic.io");
    let base = names::tenant_base_domain(id, domain);
    let pki_names = ClusterNames {
        cluster_id: id.into(),
        api_domain: names::api_host(id, domain),
        internal_api_domain: Some(format!("internal-api.{base}")),
        etcd_domain: names::etcd_host(id, domain),
        etcd_member_domains: (0..=3).map(|n| format!("{}.{base}", ignition::etcd_name(n))).collect(),
        cluster_domain: ignition::CLUSTER_DOMAIN.into(),
        service_cidr: "172.31.0.0/16".into(),
    };
    let pki = issue_cluster_pki(&pki_names, &IssueOptions::at(std::time::SystemTime::now())).expect("issue");
    let mut secrets = ignition::secrets_for(true, &certificate_data(&pki, id)).expect("every certificate");
    let key = EncryptionKey::generate().expect("key");
    secrets
        .push(NodeSecret { path: paths::ENCRYPTION_CONFIG.into(), plaintext: encryption_configuration(&key).into() });
    let input = NodeConfigInput {
        role: Role::Master {
            id: 0,
            etcd_name: ignition::etcd_name(0),
            etcd_initial_cluster: ignition::etcd_initial_cluster(&base, 1),
            initial_cluster_state: InitialClusterState::New,
        },
        cluster_id: id.into(),
        base_domain: base.clone(),
        api_domain: pki_names.api_domain.clone(),
        etcd_domain: pki_names.etcd_domain.clone(),
        region: "eu-central-1".into(),
        kubernetes_version: "1.33.4".into(),
        etcd_version: "3.5.21".into(),
        node_labels: BTreeMap::new(),
        service_cidr: pki_names.service_cidr.clone(),
        cluster_dns_ip: "172.31.0.10".into(),
        pod_cidr: "10.2.0.0/16".into(),
        oidc: None,
        conntrack_max_per_core: None,
        registry: "quay.io".into(),
        tuning: Default::default(),
        extras: Default::default(),
        irsa: None,
        secrets,
    };
    let config = ignition::render(&input).expect("render");
    // Sealed with the identity instead of KMS: the node's decrypt unit turns each `.enc` file
    // into its plaintext, which is what `secrets()` holds.
    let sealed = config.seal(|p| Ok::<_, std::convert::Infallible>(p.to_vec())).unwrap_or_else(|e| match e {});
    let parsed = ::ignition::parse(&sealed).expect("parse");
    let mut files = parsed.files.clone();
    for secret in config.secrets() {
        files.insert(secret.path.clone(), secret.plaintext.clone());
    }
    let node = Node {
        etcd_unit: unit(&parsed, ignition::ETCD_UNIT),
        apiserver_manifest: text(&files, "/etc/kubernetes/manifests/k8s-api-server.yaml"),
        files,
        // What the attach script writes: the etcd interface's address and the host's.
        environment: vec![("ETCD_ENI_IP", "127.0.0.2"), ("ETCD_HOST_IP", "127.0.0.3")],
    };
    (node, pki)
}

/// The KVM master that runs etcd, of the `qz7lt` fixture cluster, its certificates from `pki`.
fn kvm_master() -> Node {
    use kvm_objects::cluster::{Cluster, Settings};
    use kvm_objects::ignition::{NodeConfigInput, NodeConfigSettings, TlsAsset, render};
    let config: apis::kvm::KVMConfig =
        serde_saphyr::from_str(include_str!("../../apis/tests/fixtures/kvmconfig-qz7lt.yaml")).expect("fixture");
    let components = BTreeMap::from(
        [("containerlinux", "3815.2.5"), ("etcd", "3.5.13"), ("kubernetes", "1.29.9")]
            .map(|(k, v)| (k.into(), v.into())),
    );
    let settings = Settings {
        operator_version: "4.3.9".into(),
        dns_servers: vec!["10.99.0.53".into()],
        ntp_servers: Vec::new(),
        images: Default::default(),
    };
    let cluster = Cluster::new(&config, "v20.1.0", &components, &settings).expect("cluster");
    let pki_names = ClusterNames {
        cluster_id: cluster.id.clone(),
        api_domain: cluster.api_domain.clone(),
        internal_api_domain: None,
        etcd_domain: cluster.etcd_domain.clone(),
        etcd_member_domains: Vec::new(),
        cluster_domain: ignition::kubernetes::CLUSTER_DOMAIN.into(),
        service_cidr: cluster.service_cidr.clone(),
    };
    let pki = issue_cluster_pki(&pki_names, &IssueOptions::at(std::time::SystemTime::now())).expect("issue");
    // As kvm-operator reads the cert-operator Secrets: keys ca, crt and key.
    let certs: BTreeMap<String, TlsAsset> = certificate_data(&pki, &cluster.id)
        .into_iter()
        .map(|(name, mut data)| {
            let mut take = |k: &str| data.remove(k).expect("key");
            let asset = TlsAsset { ca: take("ca"), crt: take("crt"), key: take("key") };
            (name, asset)
        })
        .collect();
    let key = EncryptionKey::generate().expect("key");
    let master = cluster.etcd_master().expect("a master runs etcd").clone();
    let indexes: BTreeMap<String, i64> = cluster.nodes.iter().zip(1..).map(|(n, i)| (n.id.clone(), i)).collect();
    let node_settings = NodeConfigSettings::default();
    let rendered = render(&NodeConfigInput {
        cluster: &cluster,
        node: &master,
        node_indexes: &indexes,
        certs: &certs,
        encryption_key: Some(&key),
        settings: &node_settings,
    })
    .expect("render");
    let parsed = ::ignition::parse(rendered.to_json().as_bytes()).expect("parse");
    Node {
        etcd_unit: unit(&parsed, ignition::kubernetes::ETCD_UNIT),
        apiserver_manifest: text(&parsed.files, "/etc/kubernetes/manifests/k8s-api-server.yaml"),
        files: parsed.files,
        environment: Vec::new(),
    }
}

fn unit(parsed: &::ignition::Parsed, name: &str) -> String {
    parsed.units[name]["contents"].as_str().unwrap_or_else(|| panic!("{name} has contents")).to_string()
}

fn text(files: &BTreeMap<String, Vec<u8>>, path: &str) -> String {
    String::from_utf8(files.get(path).unwrap_or_else(|| panic!("{path} is written")).clone()).expect("utf-8")
}

/// Start etcd as the unit does; write and read a key with the API server's etcd client flags;
/// refuse `refused` (a certificate of the same node that etcd must not accept). Returns the time
/// from start to the first write.
fn write_and_read(node: &Node, refused: [&str; 3]) -> (Etcd, Duration) {
    let mut etcd = Etcd::start(node);
    let manifest = &node.apiserver_manifest;
    let servers = apiserver_flag(manifest, "etcd-servers");
    let client = [
        apiserver_flag(manifest, "etcd-cafile"),
        apiserver_flag(manifest, "etcd-certfile"),
        apiserver_flag(manifest, "etcd-keyfile"),
    ];
    let client = [client[0].as_str(), client[1].as_str(), client[2].as_str()];
    let endpoint = etcd.remap.endpoint(servers.split(',').next().expect("a server"));
    let took = etcd.put_when_ready(&endpoint, client, "/registry/pki-test", "written-by-the-api-servers-certificate");
    let out = etcd.etcdctl(&endpoint, client, &["get", "/registry/pki-test", "--print-value-only"]);
    assert!(out.status.success(), "get: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "written-by-the-api-servers-certificate");

    for path in refused {
        assert!(node.files.contains_key(path), "the node has no {path}");
    }
    let out = etcd.etcdctl(&endpoint, refused, &["get", "/registry/pki-test"]);
    assert!(!out.status.success(), "etcd accepted {refused:?}: {}", String::from_utf8_lossy(&out.stdout));
    assert!(
        etcd.log_text().contains("failed to verify client certificate: x509: certificate signed by unknown authority"),
        "etcd did not refuse the client certificate:\n{}",
        etcd.log_text()
    );
    (etcd, took)
}

/// The worker's certificate (cluster CA) with the etcd CA to trust the server: etcd refuses it.
const WORKER_TLS_AWS: [&str; 3] = [
    "/etc/kubernetes/ssl/etcd/server-ca.pem",
    "/etc/kubernetes/ssl/worker-crt.pem",
    "/etc/kubernetes/ssl/worker-key.pem",
];

#[test]
fn an_aws_master_runs_etcd_with_its_rendered_flags_and_certificates() {
    let (mut node, pki) = aws_master();
    // Another client of the etcd CA than the API server (whose client certificate is etcd's own
    // server certificate): calico's, which AWS masters do not carry, placed for this check.
    let calico = pki.certificate("calico-etcd-client").expect("calico");
    let calico_tls = ["/tmp/calico/ca.pem", "/tmp/calico/crt.pem", "/tmp/calico/key.pem"];
    for (path, contents) in calico_tls.iter().zip([&calico.ca_pem, &calico.crt_pem, calico.key.expose_pem()]) {
        node.files.insert(path.to_string(), contents.as_bytes().to_vec());
    }
    let (etcd, took) = write_and_read(&node, WORKER_TLS_AWS);
    eprintln!("aws master: etcd started and took its first write in {} ms", took.as_millis());
    // Every listen address of the unit serves: the interface's, the host's and loopback. Clients
    // reach the first two by the etcd names, which the test cannot resolve: it skips the name
    // check there (the names are checked by the handshake tests), not the client certificate.
    let tls = [
        "/etc/kubernetes/ssl/etcd/server-ca.pem",
        "/etc/kubernetes/ssl/etcd/server-crt.pem",
        "/etc/kubernetes/ssl/etcd/server-key.pem",
    ];
    for host in ["127.0.0.2", "127.0.0.3", "127.0.0.1"] {
        let endpoint = format!("https://{host}:{}", etcd.remap.client_port);
        let out = etcd.etcdctl(&endpoint, tls, &["endpoint", "health", "--insecure-skip-tls-verify"]);
        assert!(out.status.success(), "{endpoint}: {}", String::from_utf8_lossy(&out.stderr));
    }
    let endpoint = format!("https://127.0.0.1:{}", etcd.remap.client_port);
    let out = etcd.etcdctl(&endpoint, calico_tls, &["get", "/registry/pki-test", "--print-value-only"]);
    assert!(out.status.success(), "calico: {}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn a_kvm_master_runs_etcd_with_its_rendered_flags_and_certificates() {
    let node = kvm_master();
    let (etcd, took) = write_and_read(
        &node,
        // The API server's own certificate (cluster CA) is not an etcd client certificate.
        ["/etc/kubernetes/ssl/etcd-ca.pem", "/etc/kubernetes/ssl/api-crt.pem", "/etc/kubernetes/ssl/api-key.pem"],
    );
    eprintln!("kvm master: etcd started and took its first write in {} ms", took.as_millis());
    // Calico's client certificate, as the master's config writes it, is accepted too.
    let calico = [
        "/etc/kubernetes/ssl/calico-etcd-client-ca.pem",
        "/etc/kubernetes/ssl/calico-etcd-client-crt.pem",
        "/etc/kubernetes/ssl/calico-etcd-client-key.pem",
    ];
    let endpoint = format!("https://127.0.0.1:{}", etcd.remap.client_port);
    let out = etcd.etcdctl(&endpoint, calico, &["get", "/registry/pki-test", "--print-value-only"]);
    assert!(out.status.success(), "calico: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "written-by-the-api-servers-certificate");
}

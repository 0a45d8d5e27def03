//! The aws-operator node config inputs the suites render.
#![allow(dead_code)]

use std::collections::BTreeMap;

use aws_stacks::ignition::{
    InitialClusterState, NodeConfigInput, NodeSecret, Role, etcd_initial_cluster, etcd_name, paths, secrets_for,
};

/// The cluster id of every input.
pub const CLUSTER: &str = "al9qy";
/// Its region.
pub const REGION: &str = "eu-central-1";

/// The input of a node with `role`. The node's files come from the product's own mapping of the
/// cluster's certificates, as the controllers place them; masters also get the encryption
/// config, as the control plane adds it. Every secret's content differs, and names it.
pub fn input(role: Role) -> NodeConfigInput {
    let master = matches!(role, Role::Master { .. });
    let certs: BTreeMap<String, BTreeMap<String, Vec<u8>>> = ["worker", "api", "etcd", "service-account"]
        .into_iter()
        .map(|cert| {
            let files =
                ["ca", "crt", "key"].into_iter().map(|k| (k.to_string(), format!("{cert} {k} pem\n").into_bytes()));
            (cert.to_string(), files.collect())
        })
        .collect();
    let mut secrets = secrets_for(master, &certs).expect("every certificate");
    if master {
        secrets.push(NodeSecret { path: paths::ENCRYPTION_CONFIG.into(), plaintext: b"encryption config\n".to_vec() });
    }
    NodeConfigInput {
        role,
        cluster_id: CLUSTER.into(),
        base_domain: "al9qy.k8s.example.com".into(),
        api_domain: "api.al9qy.k8s.example.com".into(),
        etcd_domain: "etcd.al9qy.k8s.example.com".into(),
        region: REGION.into(),
        kubernetes_version: "1.33.4".into(),
        etcd_version: "v3.5.21".into(),
        node_labels: BTreeMap::from([("team".into(), "blue".into())]),
        service_cidr: "172.31.0.0/16".into(),
        cluster_dns_ip: "172.31.0.10".into(),
        pod_cidr: "10.2.0.0/16".into(),
        oidc: None,
        conntrack_max_per_core: None,
        registry: "quay.io".into(),
        tuning: Default::default(),
        extras: Default::default(),
        irsa: None,
        secrets,
    }
}

/// `input` of a cluster with IAM roles for service accounts: its masters sign service-account
/// tokens as the public issuer, with the v2 key pair shipped as the control plane adds it.
pub fn with_irsa(mut input: NodeConfigInput) -> NodeConfigInput {
    input.irsa = Some(aws_stacks::ignition::Irsa {
        issuers: vec![format!(
            "https://{}",
            aws_stacks::irsa::s3_issuer_host(REGION, &aws_stacks::irsa::bucket("123456789012", CLUSTER))
        )],
        audiences: vec![aws_stacks::irsa::sts_audience(REGION)],
    });
    for (path, content) in [
        (paths::SERVICE_ACCOUNT_V2_PUB, "service-account-v2 pub pem\n"),
        (paths::SERVICE_ACCOUNT_V2_PRIV, "service-account-v2 key pem\n"),
    ] {
        input.secrets.push(NodeSecret { path: path.into(), plaintext: content.as_bytes().to_vec() });
    }
    input
}

/// Master `id` of `masters`.
pub fn master(id: u8, masters: u8) -> Role {
    Role::Master {
        id,
        etcd_name: etcd_name(id),
        etcd_initial_cluster: etcd_initial_cluster("al9qy.k8s.example.com", masters),
        initial_cluster_state: InitialClusterState::New,
    }
}

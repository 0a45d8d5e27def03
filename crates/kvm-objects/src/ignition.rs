//! A KVM node's Ignition config and the Secret that carries it to the VM (reference §4.1.6):
//! `user_data` = base64(gzip(Ignition JSON)), which k8s-kvm decodes and hands to the VM at boot.
//!
//! **A deliberate departure from the reference**: the original stored this in a ConfigMap. The
//! config holds the node's TLS private keys and, on masters, the API server's encryption key, and
//! ConfigMaps are readable by far more roles than Secrets, are not encrypted at rest and show up
//! in every `kubectl describe`. So it is a Secret (type `Opaque`) with the same name
//! (`<role>-<clusterID>-<nodeID>`) and the same key and content (`user_data`: the base64 text
//! k8s-kvm reads from the mounted file), mounted at the same path.
//!
//! Built on the shared `ignition` crate (the same document model and encodings as AWS nodes).
//! Rendering is deterministic: the files are sorted by path and the gzip header is fixed, so
//! equal inputs give byte-equal Secrets and an unchanged cluster causes no write. The
//! original appended certificate files in the order concurrent fetches completed, so the same
//! inputs could render differently and rewrite ConfigMaps for nothing (§14.6).
//!
//! What a KVM node gets here:
//! - its iSCSI initiator name from its node index, and iscsid's safe-logout setting; `iscsid`
//!   and `multipathd` enabled;
//! - the docker and kubelet disks (virtio, XFS, made by k8s-kvm) mounted before the runtimes;
//! - the master that runs etcd ([`Cluster::etcd_master`]): etcd's data directory over 9p (tag
//!   `etcdshare`, msize 512000), automounted; workers: one 9p mount `/data/<tag>` per host
//!   volume;
//! - the TLS assets of its role from the cert-operator Secrets (masters `api`, `etcd`,
//!   `service-account`, `calico-etcd-client` and `worker` for their kubelet; workers `worker`, `calico-etcd-client`), and on
//!   masters the API server's encryption config with the cluster's key, all mode 0600;
//! - SSH users from `spec.cluster.kubernetes.ssh.userList`, the SSO CA key, registry mirrors and
//!   proxy settings as drop-ins of docker, containerd and kubelet.
//!
//! - the Kubernetes components, from the shared `ignition::kubernetes` (the same kubelet,
//!   kube-proxy, etcd and control-plane static pods as AWS nodes), with KVM's differences: the
//!   certificates at `<TLS_DIR>/<cert>-{ca,crt,key}.pem`, no cloud provider, kubelet after the
//!   virtio disk mounts, the API server with `--enable-priority-and-fairness=false` (to spare
//!   etcd's memory, as the original) and the operator's OIDC flags, and etcd as the reference
//!   runs it: one member (non-HA, initial state `new`), listening on every address of the VM,
//!   advertised to clients as the etcd domain on 443 (the Ingress passes TLS through to Service
//!   `master`, whose Endpoints send etcd's port to this master alone), with its data on the 9p
//!   share. It runs on the first master only: the other masters' API servers use it through
//!   the etcd domain. The reference ran one unclustered member on every master, which with
//!   several masters is several cluster states behind one load-balanced API.
//!
//! Not rendered: calico, which the workload cluster's own chart installs.

use std::collections::BTreeMap;
use std::fmt;

use ignition::kubernetes::{
    Components, ETCD_UNIT, EtcdMember, InitialClusterState, KUBELET_UNIT, KubeletUnit, TlsPaths,
};
use ignition::{Config, Dropin, File, IgnitionError, Mount, Unit, automount_unit_name, mount_unit_name};
use k8s_openapi::api::core::v1::Secret;
use serde_json::json;

use crate::cluster::{Cluster, Node, Role};
use crate::names;

/// The cert-operator certificates a master's config needs. `worker` is among them: a master's
/// kubelet (its config and kubeconfig) authenticates with the worker certificate, as a worker's does.
pub const MASTER_CERTS: [&str; 5] = ["api", "calico-etcd-client", "etcd", "service-account", "worker"];
/// The cert-operator certificates a worker's config needs.
pub const WORKER_CERTS: [&str; 2] = ["calico-etcd-client", "worker"];
/// Where the TLS assets go: `<dir>/<cert>-{ca,crt,key}.pem`.
pub const TLS_DIR: &str = "/etc/kubernetes/ssl";
/// The API server's encryption-provider config (masters).
pub const ENCRYPTION_CONFIG: &str = "/etc/kubernetes/encryption/k8s-encryption-config.yaml";
/// The 9p tag of a master's etcd share.
pub const ETCD_SHARE_TAG: &str = "etcdshare";
/// etcd's data directory in a master VM.
pub const ETCD_DATA_DIR: &str = "/var/lib/etcd";
/// The 9p options: virtio transport, 9p2000.L, and msize 512000 for etcd's I/O (PR #1250).
pub const NINE_P_OPTIONS: &str = "trans=virtio,version=9p2000.L,cache=mmap,msize=512000";

/// One certificate of a cert-operator Secret (data keys `ca`, `crt`, `key`).
#[derive(Clone, PartialEq, Eq)]
pub struct TlsAsset {
    /// The CA certificate (PEM).
    pub ca: Vec<u8>,
    /// The certificate (PEM).
    pub crt: Vec<u8>,
    /// The private key (PEM). Never printed.
    pub key: Vec<u8>,
}

impl fmt::Debug for TlsAsset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsAsset").field("crt_bytes", &self.crt.len()).field("key", &"***").finish()
    }
}

/// The cluster's API-server encryption key (the `encryption` randomkey Secret). Never printed.
pub use pki::EncryptionKey;

/// HTTP proxy settings of the nodes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Proxy {
    /// `HTTP_PROXY`.
    pub http: String,
    /// `HTTPS_PROXY`.
    pub https: String,
    /// `NO_PROXY` entries.
    pub no_proxy: Vec<String>,
}

pub use ignition::kubernetes::Oidc;

/// The registry node images come from unless the operator is told otherwise.
pub const DEFAULT_REGISTRY: &str = "gsoci.azurecr.io";

/// The operator's settings that go into every node config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeConfigSettings {
    /// The registry the Kubernetes component images are pulled from.
    pub registry: String,
    /// The API servers' OpenID Connect flags; none when `None`.
    pub oidc: Option<Oidc>,
    /// Proxy for docker, containerd and kubelet; none when both URLs are empty.
    pub proxy: Proxy,
    /// Docker registry mirrors.
    pub registry_mirrors: Vec<String>,
    /// The SSO CA's public key, trusted for SSH user certificates; none when empty.
    pub sso_public_key: String,
    /// The pod sandbox image; containerd's own when empty.
    pub pause_image: String,
    /// The Docker Hub credential; none when empty. Never printed.
    pub dockerhub_token: ignition::extras::DockerhubToken,
}

impl Default for NodeConfigSettings {
    fn default() -> Self {
        Self {
            registry: DEFAULT_REGISTRY.into(),
            oidc: None,
            proxy: Proxy::default(),
            registry_mirrors: Vec::new(),
            sso_public_key: String::new(),
            pause_image: String::new(),
            dockerhub_token: Default::default(),
        }
    }
}

/// Everything one node's config is rendered from.
#[derive(Debug, Clone)]
pub struct NodeConfigInput<'a> {
    /// The cluster.
    pub cluster: &'a Cluster,
    /// The node.
    pub node: &'a Node,
    /// The cluster's allocated node indexes (`status.kvm.nodeIndexes`).
    pub node_indexes: &'a BTreeMap<String, i64>,
    /// The cluster's cert-operator certificates by name.
    pub certs: &'a BTreeMap<String, TlsAsset>,
    /// The encryption key; required for masters.
    pub encryption_key: Option<&'a EncryptionKey>,
    /// The operator's settings.
    pub settings: &'a NodeConfigSettings,
}

/// Why a node config cannot be rendered. Each names what is missing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NodeConfigError {
    /// The node has no index in `status.kvm.nodeIndexes` yet.
    #[error(
        "node {node} has no index in status.kvm.nodeIndexes yet; indexes are allocated before configs are rendered"
    )]
    MissingIndex {
        /// The node id.
        node: String,
    },
    /// A certificate Secret is missing.
    #[error(
        "{role} node {node} needs the {cert:?} certificate: no Secret labelled giantswarm.io/certificate={cert} and giantswarm.io/cluster={cluster} was found"
    )]
    MissingCertificate {
        /// The node id.
        node: String,
        /// Its role.
        role: Role,
        /// The certificate.
        cert: &'static str,
        /// The cluster id.
        cluster: String,
    },
    /// The encryption key Secret is missing.
    #[error(
        "master {node} needs the API server's encryption key: no Secret labelled giantswarm.io/randomkey=encryption and giantswarm.io/cluster={cluster} was found"
    )]
    MissingEncryptionKey {
        /// The node id.
        node: String,
        /// The cluster id.
        cluster: String,
    },
    /// The config is not valid Ignition (a path the inputs produced).
    #[error(transparent)]
    Ignition(#[from] IgnitionError),
}

/// Render the node's Ignition config.
pub fn render(input: &NodeConfigInput<'_>) -> Result<Config, NodeConfigError> {
    let (cluster, node) = (input.cluster, input.node);
    let index =
        *input.node_indexes.get(&node.id).ok_or_else(|| NodeConfigError::MissingIndex { node: node.id.clone() })?;
    let mut files = vec![
        File::text(
            "/etc/iscsi/initiatorname.iscsi",
            &format!("InitiatorName={}\n", names::iscsi_initiator(&cluster.id, node.role, index)),
        ),
        // Never log out of a session whose devices are still mounted (a node shutting down
        // would otherwise lose its volumes under a running workload).
        File::text("/etc/iscsi/iscsid.conf", "iscsid.safe_logout = Yes\nnode.startup = automatic\n"),
    ];
    let certs: &[&'static str] = match node.role {
        Role::Master => &MASTER_CERTS,
        Role::Worker => &WORKER_CERTS,
    };
    for cert in certs {
        let asset = input.certs.get(*cert).ok_or_else(|| NodeConfigError::MissingCertificate {
            node: node.id.clone(),
            role: node.role,
            cert,
            cluster: cluster.id.clone(),
        })?;
        for (suffix, content) in [("ca", &asset.ca), ("crt", &asset.crt), ("key", &asset.key)] {
            files.push(File::private(format!("{TLS_DIR}/{cert}-{suffix}.pem"), content.clone()));
        }
    }
    if node.role == Role::Master {
        let key = input.encryption_key.ok_or_else(|| NodeConfigError::MissingEncryptionKey {
            node: node.id.clone(),
            cluster: cluster.id.clone(),
        })?;
        files.push(File::private(ENCRYPTION_CONFIG, pki::encryption_configuration(key)));
    }
    let settings = input.settings;
    let components = components(cluster, node, settings);
    files.extend(components.node_files());
    if node.role == Role::Master {
        files.extend(components.master_files());
        files.extend(ignition::access::master_files(&components.tls));
    }
    // The installation's additions, the same as on aws-operator's nodes.
    let extras = ignition::extras::NodeExtras {
        ssh_users: cluster
            .ssh_users
            .iter()
            .map(|u| ignition::extras::SshUser { name: u.name.clone(), public_key: u.public_key.clone() })
            .collect(),
        sso_public_key: settings.sso_public_key.clone(),
        registry_mirrors: settings.registry_mirrors.clone(),
        pause_image: settings.pause_image.clone(),
        dockerhub_token: settings.dockerhub_token.clone(),
    };
    files.extend(extras.files());

    let mut units = vec![
        virtio_mount("dockerfs", "/var/lib/docker"),
        virtio_mount("kubeletfs", "/var/lib/kubelet"),
        Unit::enabled("iscsid.service"),
        Unit::enabled("multipathd.service"),
    ];
    let labels = node_labels(cluster, node);
    let (docker_mount, kubelet_mount) = (mount_unit_name("/var/lib/docker"), mount_unit_name("/var/lib/kubelet"));
    units.push(Unit::new(
        KUBELET_UNIT,
        components.kubelet_unit(&KubeletUnit {
            node_labels: &labels,
            master: node.role == Role::Master,
            requires: &["docker.service", &kubelet_mount],
            after: &["docker.service", &docker_mount, &kubelet_mount],
        }),
    ));
    match node.role {
        Role::Master => {
            units.push(ignition::access::master_unit());
            if cluster.runs_etcd(node) {
                units.push(Unit::new(ETCD_UNIT, etcd_unit(cluster, &components)));
                units.push(Unit::new(automount_unit_name(ETCD_DATA_DIR), etcd_automount()));
                // Started by its automount on first access, not at boot.
                units.push(Unit { enabled: None, ..nine_p_mount(ETCD_SHARE_TAG, ETCD_DATA_DIR, "etcd's data") });
            }
        }
        Role::Worker => {
            for volume in &node.shape.host_volumes {
                let path = format!("/data/{}", volume.mount_tag);
                units.push(nine_p_mount(&volume.mount_tag, &path, &format!("host volume {}", volume.mount_tag)));
            }
        }
    }
    let proxy = &settings.proxy;
    if !proxy.http.is_empty() || !proxy.https.is_empty() {
        let mut environment = String::from("[Service]\n");
        for (key, value) in [("HTTP_PROXY", &proxy.http), ("HTTPS_PROXY", &proxy.https)] {
            if !value.is_empty() {
                environment.push_str(&format!("Environment=\"{key}={value}\"\n"));
            }
        }
        if !proxy.no_proxy.is_empty() {
            environment.push_str(&format!("Environment=\"NO_PROXY={}\"\n", proxy.no_proxy.join(",")));
        }
        for service in ["containerd.service", "docker.service", KUBELET_UNIT] {
            // kubelet's unit is ours: the drop-in joins it rather than naming the unit twice.
            ignition::add_dropin(&mut units, service, Dropin::new("10-proxy.conf", environment.clone()));
        }
    }
    for (service, dropin) in extras.dropins() {
        ignition::add_dropin(&mut units, service, dropin);
    }

    files.sort_by(|a, b| a.path.cmp(&b.path));
    let config = Config { files, filesystems: Vec::new(), units, users: extras.users(), kernel_arguments: Vec::new() };
    config.validate()?;
    Ok(config)
}

/// The shared Kubernetes components of `node` with KVM's certificate paths, no cloud provider,
/// the cluster's etcd (local on the master that runs it, else through the etcd domain) and the
/// API server flags the original sets.
fn components(cluster: &Cluster, node: &Node, settings: &NodeConfigSettings) -> Components {
    let tls = |cert: &str, suffix: &str| format!("{TLS_DIR}/{cert}-{suffix}.pem");
    Components {
        cluster_id: cluster.id.clone(),
        api_domain: cluster.api_domain.clone(),
        etcd_servers: if cluster.runs_etcd(node) {
            "https://127.0.0.1:2379".into()
        } else {
            format!("https://{}:443", cluster.etcd_domain)
        },
        registry: settings.registry.clone(),
        kubernetes_version: cluster.component("kubernetes").to_string(),
        etcd_version: cluster.component("etcd").to_string(),
        service_cidr: cluster.service_cidr.clone(),
        cluster_dns_ip: cluster.cluster_dns_ip.clone(),
        pod_cidr: cluster.pod_cidr.clone(),
        oidc: settings.oidc.clone(),
        conntrack_max_per_core: None,
        cloud_provider: None,
        service_account_issuer: None,
        extra_apiserver_args: vec!["--enable-priority-and-fairness=false".into()],
        etcd_quota_backend_bytes: None,
        terminated_pod_gc_threshold: None,
        allocate_node_cidrs: true,
        tls: TlsPaths {
            worker_crt: tls("worker", "crt"),
            worker_key: tls("worker", "key"),
            worker_ca: tls("worker", "ca"),
            api_crt: tls("api", "crt"),
            api_key: tls("api", "key"),
            api_ca: tls("api", "ca"),
            etcd_crt: tls("etcd", "crt"),
            etcd_key: tls("etcd", "key"),
            etcd_ca: tls("etcd", "ca"),
            service_account_key: tls("service-account", "key"),
            encryption_config: ENCRYPTION_CONFIG.into(),
        },
    }
}

/// The labels kubelet registers a KVM node with: its cluster and role, the provider, and the
/// Release and operator version its VM was built for (the cluster controller reads the Release
/// from the node to tell which nodes run the new one during an upgrade).
fn node_labels(cluster: &Cluster, node: &Node) -> BTreeMap<String, String> {
    let role = node.role.as_str();
    BTreeMap::from([
        (apis::labels::CLUSTER.to_string(), cluster.id.clone()),
        ("role".to_string(), role.to_string()),
        ("kubernetes.io/role".to_string(), role.to_string()),
        ("giantswarm.io/provider".to_string(), "kvm".to_string()),
        (apis::labels::RELEASE_VERSION.to_string(), cluster.release_version.clone()),
        (apis::labels::KVM_OPERATOR_VERSION.to_string(), cluster.operator_version.clone()),
    ])
}

/// etcd on the master that runs it, as the original runs it: a single member (non-HA), on every
/// address of the VM, its data on the 9p share, advertised as the etcd domain behind the
/// Ingress.
fn etcd_unit(cluster: &Cluster, components: &Components) -> String {
    let data = automount_unit_name(ETCD_DATA_DIR);
    components.etcd_unit(&EtcdMember {
        name: "etcd0",
        initial_cluster: "etcd0=https://127.0.0.1:2380",
        state: InitialClusterState::New,
        peer_url: "https://127.0.0.1:2380",
        client_url: &format!("https://{}:443", cluster.etcd_domain),
        listen_peer_urls: "https://127.0.0.1:2380",
        listen_client_urls: "https://0.0.0.0:2379",
        environment_file: None,
        requires: &["docker.service", &data],
    })
}

/// The node's Secret (type `Opaque`): `user_data` = base64(gzip(the config's canonical JSON)).
/// Its `Debug` prints the key bytes like any `Secret`; never log it.
pub fn node_secret(cluster: &Cluster, node: &Node, config: &Config) -> Secret {
    let mut labels = cluster.common_labels();
    labels.insert(apis::labels::MANAGED_BY.into(), names::OPERATOR.into());
    let user_data = ignition::gzip_base64(config.to_json().as_bytes());
    let secret = json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {
            "name": names::node_secret(node.role, &cluster.id, &node.id),
            "namespace": names::namespace(&cluster.id),
            "labels": labels,
        },
        "stringData": { names::USER_DATA_KEY: user_data },
    });
    let mut secret: Secret = serde_json::from_value(secret).expect("the Secret JSON has the Secret shape");
    // `data` rather than `stringData`: what the API server stores and returns, so that the
    // desired object compares equal to the stored one.
    secret.data = secret
        .string_data
        .take()
        .map(|d| d.into_iter().map(|(k, v)| (k, k8s_openapi::ByteString(v.into_bytes()))).collect());
    secret
}

/// The Ignition config inside a node Secret, for `render --decode` and tests.
pub fn decode_node_secret(secret: &Secret) -> Result<ignition::Parsed, IgnitionError> {
    let data = secret
        .data
        .as_ref()
        .and_then(|d| d.get(names::USER_DATA_KEY))
        .and_then(|b| std::str::from_utf8(&b.0).ok())
        .ok_or_else(|| IgnitionError::Decode {
            reason: format!("the Secret has no text {} key", names::USER_DATA_KEY),
        })?;
    ignition::parse(&ignition::gunzip_base64(data)?)
}

fn virtio_mount(serial: &str, path: &str) -> Unit {
    let description = format!("The VM disk {serial} on {path}");
    let device = format!("/dev/disk/by-id/virtio-{serial}");
    Mount {
        description: &description,
        requires: &[],
        after: &[],
        before: &["docker.service", "containerd.service", "kubelet.service"],
        what: &device,
        path,
        fs_type: "xfs",
        options: None,
        wanted_by: "local-fs.target",
    }
    .unit()
}

fn nine_p_mount(tag: &str, path: &str, what: &str) -> Unit {
    let description = format!("{what} shared by the host (9p tag {tag})");
    Mount {
        description: &description,
        requires: &[],
        after: &[],
        before: &["docker.service", "kubelet.service"],
        what: tag,
        path,
        fs_type: "9p",
        options: Some(NINE_P_OPTIONS),
        wanted_by: "local-fs.target",
    }
    .unit()
}

fn etcd_automount() -> String {
    format!(
        "[Unit]
Description=Mount etcd's data share on first access

[Automount]
Where={ETCD_DATA_DIR}

[Install]
WantedBy=local-fs.target
"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::fixtures;

    fn certs() -> BTreeMap<String, TlsAsset> {
        ["api", "calico-etcd-client", "etcd", "service-account", "worker"]
            .into_iter()
            .map(|name| {
                let asset = TlsAsset {
                    ca: format!("{name} CA").into_bytes(),
                    crt: format!("{name} CERT").into_bytes(),
                    key: format!("{name} PRIVATE KEY").into_bytes(),
                };
                (name.to_string(), asset)
            })
            .collect()
    }

    fn indexes() -> BTreeMap<String, i64> {
        BTreeMap::from([("ma1".into(), 3), ("ma2".into(), 1), ("ma3".into(), 2), ("wk1".into(), 5), ("wk2".into(), 4)])
    }

    fn render_node(id: &str, settings: &NodeConfigSettings) -> Result<Config, NodeConfigError> {
        let cluster = fixtures::cluster();
        let node = cluster.nodes.iter().find(|n| n.id == id).expect("node");
        let key = EncryptionKey::from_base64("c2VjcmV0LWVuY3J5cHRpb24ta2V5");
        render(&NodeConfigInput {
            cluster: &cluster,
            node,
            node_indexes: &indexes(),
            certs: &certs(),
            encryption_key: Some(&key),
            settings,
        })
    }

    fn parsed(config: &Config) -> ignition::Parsed {
        ignition::parse(config.to_json().as_bytes()).expect("parses")
    }

    #[test]
    fn a_master_gets_its_iqn_certs_encryption_and_etcd_share() {
        let config = render_node("ma1", &NodeConfigSettings::default()).expect("render");
        let doc = parsed(&config);
        assert_eq!(
            doc.text("/etc/iscsi/initiatorname.iscsi").as_deref(),
            Some("InitiatorName=iqn.2016-04.com.coreos.iscsi:giantswarm-qz7lt-master-3\n"),
            "ma1's allocated index, not its position"
        );
        for cert in MASTER_CERTS {
            assert_eq!(doc.text(&format!("/etc/kubernetes/ssl/{cert}-key.pem")), Some(format!("{cert} PRIVATE KEY")));
            assert_eq!(doc.modes[&format!("/etc/kubernetes/ssl/{cert}-key.pem")], 0o600);
        }
        // A master's kubelet authenticates with the worker certificate its config names.
        let kubelet_config = doc.text("/etc/kubernetes/config/kubelet.yaml").expect("kubelet config");
        assert!(kubelet_config.contains("/etc/kubernetes/ssl/worker-ca.pem"), "{kubelet_config}");
        assert!(doc.file("/etc/kubernetes/ssl/worker-key.pem").is_some());
        let encryption = doc.text(ENCRYPTION_CONFIG).expect("encryption config");
        assert!(encryption.contains("secret: c2VjcmV0LWVuY3J5cHRpb24ta2V5\n"), "{encryption}");
        assert_eq!(doc.modes[ENCRYPTION_CONFIG], 0o600);
        let mount = doc.unit("var-lib-etcd.mount").expect("etcd mount");
        assert!(mount.contains("What=etcdshare\nWhere=/var/lib/etcd\nType=9p\n"), "{mount}");
        assert!(mount.contains("msize=512000"), "{mount}");
        assert!(doc.unit("var-lib-etcd.automount").is_some_and(|u| u.contains("Where=/var/lib/etcd")));
        for disk in ["dockerfs", "kubeletfs"] {
            let unit = format!("var-lib-{}.mount", disk.trim_end_matches("fs"));
            let contents = doc.unit(&unit).unwrap_or_else(|| panic!("{unit}"));
            assert!(contents.contains(&format!("What=/dev/disk/by-id/virtio-{disk}\n")), "{contents}");
            assert!(contents.contains("Type=xfs\n"), "{contents}");
        }
        for enabled in ["iscsid.service", "multipathd.service"] {
            assert_eq!(doc.units[enabled]["enabled"], true);
        }
        assert_eq!(doc.document["passwd"]["users"][0]["name"], "ops");
    }

    #[test]
    fn masters_run_the_control_plane_and_etcd_and_every_node_kubelet_and_kube_proxy() {
        let settings = NodeConfigSettings {
            registry: "registry.example.org".into(),
            oidc: Some(Oidc {
                issuer_url: "https://dex.example.org".into(),
                client_id: "qz7lt".into(),
                username_claim: "email".into(),
                groups_claim: String::new(),
            }),
            ..NodeConfigSettings::default()
        };
        let master = parsed(&render_node("ma1", &settings).expect("render"));
        let apiserver = master.text("/etc/kubernetes/manifests/k8s-api-server.yaml").expect("API server");
        for flag in [
            "--enable-priority-and-fairness=false",
            "--oidc-issuer-url=https://dex.example.org",
            "--oidc-username-claim=email",
            "--etcd-servers=https://127.0.0.1:2379",
            "--service-cluster-ip-range=172.31.0.0/16",
            "--tls-cert-file=/etc/kubernetes/ssl/api-crt.pem",
            "--encryption-provider-config=/etc/kubernetes/encryption/k8s-encryption-config.yaml",
        ] {
            assert!(apiserver.contains(flag), "{flag} missing:\n{apiserver}");
        }
        assert!(!apiserver.contains("--cloud-provider"), "KVM has no cloud provider");
        assert!(apiserver.contains("image: registry.example.org/giantswarm/kube-apiserver:v1.29.9"), "{apiserver}");
        let etcd = master.unit(ETCD_UNIT).expect("etcd");
        assert!(etcd.contains("registry.example.org/giantswarm/etcd:v3.5.13"), "{etcd}");
        assert!(etcd.contains("--advertise-client-urls=https://etcd.qz7lt.k8s.gollum.example.net:443"), "{etcd}");
        assert!(etcd.contains("Requires=docker.service var-lib-etcd.automount\n"), "{etcd}");
        assert!(etcd.contains("--cert-file=/etc/kubernetes/ssl/etcd-crt.pem"), "{etcd}");
        let kubelet = master.unit(KUBELET_UNIT).expect("kubelet");
        assert!(kubelet.contains("register-with-taints=node-role.kubernetes.io/control-plane=:NoSchedule"));
        assert!(kubelet.contains("After=docker.service var-lib-docker.mount var-lib-kubelet.mount\n"), "{kubelet}");

        // The other masters run API servers on the first master's etcd, through the etcd
        // domain, and no etcd of their own: one cluster state, however many masters.
        let second = parsed(&render_node("ma2", &settings).expect("render"));
        let apiserver = second.text("/etc/kubernetes/manifests/k8s-api-server.yaml").expect("API server");
        assert!(apiserver.contains("--etcd-servers=https://etcd.qz7lt.k8s.gollum.example.net:443"), "{apiserver}");
        assert!(second.unit(ETCD_UNIT).is_none(), "one etcd member per cluster");
        assert!(second.unit("var-lib-etcd.mount").is_none() && second.unit("var-lib-etcd.automount").is_none());

        let worker = parsed(&render_node("wk1", &settings).expect("render"));
        assert!(worker.unit(ETCD_UNIT).is_none());
        assert!(worker.file("/etc/kubernetes/manifests/k8s-api-server.yaml").is_none());
        let kubelet = worker.unit(KUBELET_UNIT).expect("kubelet");
        assert!(
            kubelet.contains(
                "--node-labels=giantswarm.io/cluster=qz7lt,giantswarm.io/provider=kvm,kubernetes.io/role=worker,\
                 kvm-operator.giantswarm.io/version=4.3.9,release.giantswarm.io/version=20.1.0,role=worker\n"
            ),
            "{kubelet}"
        );
        assert!(!kubelet.contains("register-with-taints"));
        let config = worker.text("/etc/kubernetes/config/kubelet.yaml").expect("kubelet config");
        assert!(
            config.contains("  - 172.31.0.10\n") && config.contains("tlsCertFile: /etc/kubernetes/ssl/worker-crt.pem")
        );
        let proxy = worker.text(ignition::kubernetes::KUBE_PROXY_CONFIG).expect("kube-proxy");
        assert!(proxy.contains("clusterCIDR: 10.4.0.0/16"), "{proxy}");
    }

    #[test]
    fn a_worker_gets_its_host_volumes_and_only_its_certs() {
        let doc = parsed(&render_node("wk1", &NodeConfigSettings::default()).expect("render"));
        assert!(doc.text("/etc/iscsi/initiatorname.iscsi").is_some_and(|t| t.ends_with("giantswarm-qz7lt-worker-5\n")));
        let files: Vec<&str> = doc.files.keys().map(String::as_str).filter(|p| p.starts_with(TLS_DIR)).collect();
        assert_eq!(
            files,
            [
                "/etc/kubernetes/ssl/calico-etcd-client-ca.pem",
                "/etc/kubernetes/ssl/calico-etcd-client-crt.pem",
                "/etc/kubernetes/ssl/calico-etcd-client-key.pem",
                "/etc/kubernetes/ssl/worker-ca.pem",
                "/etc/kubernetes/ssl/worker-crt.pem",
                "/etc/kubernetes/ssl/worker-key.pem",
            ]
        );
        assert!(doc.file(ENCRYPTION_CONFIG).is_none(), "workers never see the encryption key");
        let scratch = doc.unit("data-scratch.mount").expect("host volume mount");
        assert!(scratch.contains("What=scratch\nWhere=/data/scratch\nType=9p\n"), "{scratch}");
        assert!(doc.unit("var-lib-etcd.mount").is_none());
    }

    #[test]
    fn proxy_mirrors_and_sso_key() {
        let settings = NodeConfigSettings {
            proxy: Proxy {
                http: "http://proxy.corp.example:3128".into(),
                https: String::new(),
                no_proxy: vec!["10.0.0.0/8".into(), ".svc".into()],
            },
            registry_mirrors: vec!["https://mirror.corp.example".into()],
            sso_public_key: "ssh-ed25519 AAAAsso sso-ca\n".into(),
            ..NodeConfigSettings::default()
        };
        let doc = parsed(&render_node("wk2", &settings).expect("render"));
        for service in ["containerd.service", "docker.service", "kubelet.service"] {
            let dropin = &doc.units[service]["dropins"][0];
            assert_eq!(dropin["name"], "10-proxy.conf");
            assert_eq!(
                dropin["contents"],
                "[Service]\nEnvironment=\"HTTP_PROXY=http://proxy.corp.example:3128\"\nEnvironment=\"NO_PROXY=10.0.0.0/8,.svc\"\n"
            );
            if service != KUBELET_UNIT {
                assert!(doc.units[service].get("enabled").is_none(), "a drop-in leaves the unit as the image has it");
            }
        }
        assert!(doc.unit(KUBELET_UNIT).is_some_and(|u| u.contains("/kubelet")), "kubelet's own unit keeps its drop-in");
        assert_eq!(
            doc.text("/etc/docker/daemon.json").as_deref(),
            Some("{\"registry-mirrors\":[\"https://mirror.corp.example\"]}\n")
        );
        assert_eq!(doc.text("/etc/ssh/trusted-user-ca-keys.pem").as_deref(), Some("ssh-ed25519 AAAAsso sso-ca\n"));
        let plain = parsed(&render_node("wk2", &NodeConfigSettings::default()).expect("render"));
        assert!(!plain.units.contains_key("docker.service") && plain.file("/etc/docker/daemon.json").is_none());
    }

    #[test]
    fn missing_inputs_are_named() {
        let cluster = fixtures::cluster();
        let master = &cluster.nodes[0];
        let settings = NodeConfigSettings::default();
        let mut certs = certs();
        certs.remove("service-account");
        let input = NodeConfigInput {
            cluster: &cluster,
            node: master,
            node_indexes: &indexes(),
            certs: &certs,
            encryption_key: None,
            settings: &settings,
        };
        assert_eq!(
            render(&input).unwrap_err().to_string(),
            "master node ma1 needs the \"service-account\" certificate: no Secret labelled \
             giantswarm.io/certificate=service-account and giantswarm.io/cluster=qz7lt was found"
        );
        let all = self::certs();
        let input = NodeConfigInput { certs: &all, ..input };
        assert!(matches!(render(&input), Err(NodeConfigError::MissingEncryptionKey { .. })));
        let worker = NodeConfigInput { node: &cluster.nodes[3], ..input.clone() };
        assert!(render(&worker).is_ok(), "workers need no encryption key");
        let empty = BTreeMap::new();
        let unindexed = NodeConfigInput { node_indexes: &empty, ..input };
        assert_eq!(render(&unindexed).unwrap_err(), NodeConfigError::MissingIndex { node: "ma1".into() });
    }

    #[test]
    fn the_node_secret_is_byte_stable_and_decodes() {
        let cluster = fixtures::cluster();
        let node = &cluster.nodes[4];
        let settings = NodeConfigSettings::default();
        let config = render_node("wk2", &settings).expect("render");
        let a = node_secret(&cluster, node, &config);
        let b = node_secret(&cluster, node, &render_node("wk2", &settings).expect("render"));
        assert_eq!(a, b, "same input, same bytes: no needless Secret write");
        assert_eq!(a.metadata.name.as_deref(), Some("worker-qz7lt-wk2"));
        assert_eq!(a.metadata.labels.clone().unwrap_or_default()["giantswarm.io/managed-by"], "kvm-operator");
        assert_eq!(a.type_.as_deref(), Some("Opaque"));
        let decoded = decode_node_secret(&a).expect("decodes");
        assert_eq!(decoded, parsed(&config));
        // Files are written in path order, whatever order the inputs came in (§14.6).
        let paths: Vec<&str> = decoded.document["storage"]["files"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|f| f["path"].as_str())
            .collect();
        let mut sorted = paths.clone();
        sorted.sort();
        assert_eq!(paths, sorted);
        let all = certs();
        let key = EncryptionKey::from_base64("k");
        let input = NodeConfigInput {
            cluster: &cluster,
            node,
            node_indexes: &indexes(),
            certs: &all,
            encryption_key: Some(&key),
            settings: &settings,
        };
        let printed = format!("{input:?}");
        assert!(!printed.contains("PRIVATE KEY") && printed.contains("***"), "{printed}");
    }
}

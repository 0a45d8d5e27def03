//! The node configs: the Ignition document a master or a node-pool worker fetches from the
//! cluster bucket at first boot.
//!
//! The launch template's user data is a small pointer config (`stacks::user_data`) that merges
//! the document rendered here from S3. It follows the layout of upstream's `k8scloudconfig`
//! templates plus the AWS extension (reference §6.1, §7.3), trimmed to what a node needs to
//! come up: the TLS assets, their decryption, kubelet, and on masters etcd and the control-plane
//! static pods. Flatcar reads Ignition spec **3.3.0**.
//!
//! # Secrets
//!
//! Every secret file (TLS keys and certificates, the encryption-provider config, service-account
//! keys) is shipped as `<path>.enc` holding raw KMS ciphertext. `decrypt-tls-assets.service`
//! decrypts each with `kms decrypt --ciphertext-blob fileb://<path>.enc` through [`AWS_WRAPPER`]
//! (the awscli container) before kubelet or etcd start, retrying every 5 s until KMS answers, as
//! upstream does, and failing the unit on an answer no retry changes (a key the node may not use,
//! a ciphertext of another key). A secret reaches `<path>` whole or not at all: it is written
//! beside it and renamed. Only the instance role may decrypt, so the object in S3 is useless to
//! anyone who reads it.
//!
//! # The node's scripts in tests
//!
//! The scripts (decryption, etcd's interface and volume, the launching hook, the hostname) read
//! the node's values by default and nothing else on a node. An emulated node overrides them from
//! the environment: `NODE_ROOT` puts every path they read or write, [`AWS_WRAPPER`] included,
//! below another directory, and `AWS_EC2_METADATA_SERVICE_ENDPOINT` names the metadata service,
//! as it does for the AWS CLI itself. `node_verify::harness` runs them that way against moto.
//!
//! # Rendering in two steps
//!
//! KMS ciphertext is random: encrypting the same secret twice gives different bytes. Upstream
//! therefore re-uploads every node config on every reconciliation (reference §7.3). Here
//! [`render`] builds a [`NodeConfig`] with the secrets still in plaintext, and
//! [`NodeConfig::content_hash`] digests that plaintext rendering. The operator stores the hash as
//! object metadata and seals and uploads only when it differs. [`NodeConfig::seal`] (a
//! synchronous encrypt function) or [`NodeConfig::secrets`] + [`NodeConfig::seal_with`] (the
//! ciphertexts computed elsewhere, e.g. by async KMS calls) produce the bytes to upload.
//!
//! The hash is SHA-256 over the whole rendering, the private keys included. It cannot be inverted,
//! and because the input always contains key material of at least 128 bits of entropy it also
//! cannot be used to confirm a guess about any part of the config; it says only "changed or not".
//!
//! No `Debug` output in this module ever shows secret plaintext.
//!
//! The Ignition document model (files, units, filesystems) and its JSON come from the shared
//! `ignition` crate, and so do the Kubernetes components (`ignition::kubernetes`: kubelet,
//! kube-proxy, etcd, the control-plane static pods), which kvm-operator's node configs use too.
//! This module decides what is AWS's own: the KMS decryption, the hostname from EC2, the worker
//! volumes, etcd's network interface and volume, and the TLS paths and unit order around them.

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::fmt;

use ignition::kubernetes::{Components, EtcdMember, KUBELET_UNIT, KubeletUnit, TlsPaths};
use ignition::{Config, File, Filesystem, Mount, Unit, mount_unit_name};
use serde_json::Value;
use sha2::{Digest, Sha256};

pub use ignition::IGNITION_VERSION;
pub use ignition::kubernetes::{CLUSTER_DOMAIN, ETCD_UNIT, InitialClusterState, KUBE_PROXY_CONFIG, Oidc};

/// The awscli image that decrypts the TLS assets, below the registry (reference §6.1).
pub const AWSCLI_IMAGE: &str = "giantswarm/awscli:1.18.3";

/// The AWS CLI the node's scripts call: a wrapper that runs [`AWSCLI_IMAGE`] on the host's
/// network (instance metadata and the instance role's credentials), sharing the current
/// directory for `fileb://` arguments.
pub const AWS_WRAPPER: &str = "/opt/bin/aws";
/// The unit by which an HA master completes its launching hook once it is healthy.
pub const LAUNCHING_HOOK_UNIT: &str = "master-instance-lifecycle-continue.service";
/// Its script.
pub const LAUNCHING_HOOK_SCRIPT: &str = "/opt/bin/master-instance-lifecycle-continue";
/// How long the launching-hook script waits for health before it gives up, in seconds: the
/// hook's heartbeat timeout (1,020 s) less a minute, so the script's verdict always comes before
/// Auto Scaling's default.
pub const LAUNCHING_HOOK_DEADLINE: u64 = crate::stacks::tccpn::LAUNCHING_HOOK_TIMEOUT - 60;
/// How often the launching-hook script checks health, in seconds (as the original: every 15 s).
pub const LAUNCHING_HOOK_INTERVAL: u64 = 15;
const _: () = assert!(LAUNCHING_HOOK_DEADLINE + LAUNCHING_HOOK_INTERVAL < crate::stacks::tccpn::LAUNCHING_HOOK_TIMEOUT);
/// The unit that attaches a master's etcd network interface and data volume at boot.
pub const ETCD_ATTACH_UNIT: &str = "etcd3-attach-dependencies.service";
/// The script [`ETCD_ATTACH_UNIT`] runs.
pub const ETCD_ATTACH_SCRIPT: &str = "/opt/bin/etcd3-attach-dependencies";
/// The mount unit of the etcd data volume on `/var/lib/etcd`.
pub const ETCD_MOUNT_UNIT: &str = "var-lib-etcd.mount";
/// Where [`ETCD_ATTACH_SCRIPT`] writes `ETCD_ENI_IP` and `ETCD_HOST_IP` for etcd's unit.
pub const ETCD_NETWORK_ENV: &str = "/run/etcd3/network.env";
/// The device the etcd volume is attached as (upstream's `/dev/xvdh`).
pub const ETCD_VOLUME_DEVICE: &str = "/dev/xvdh";
/// The filesystem label of the etcd volume.
pub const ETCD_VOLUME_LABEL: &str = "etcd";

/// A data volume of a node-pool worker: its launch template attaches it as `device`, and its
/// node config formats it (XFS, labelled `label`, on first boot) and mounts it on `mount` before
/// docker, containerd and kubelet start (upstream's worker volumes, reference §6.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkerVolume {
    /// The block device the launch template attaches.
    pub device: &'static str,
    /// The filesystem label.
    pub label: &'static str,
    /// Where it is mounted.
    pub mount: &'static str,
}

/// Docker's volume (`dockerVolumeSizeGB`).
pub const DOCKER_VOLUME: WorkerVolume = WorkerVolume { device: "/dev/xvdh", label: "docker", mount: "/var/lib/docker" };
/// Kubelet's volume (`kubeletVolumeSizeGB`).
pub const KUBELET_VOLUME: WorkerVolume =
    WorkerVolume { device: "/dev/xvdg", label: "kubelet", mount: "/var/lib/kubelet" };
/// The log volume.
pub const LOG_VOLUME: WorkerVolume = WorkerVolume { device: "/dev/xvdf", label: "log", mount: "/var/log" };
/// Containerd's volume.
pub const CONTAINERD_VOLUME: WorkerVolume =
    WorkerVolume { device: "/dev/xvdi", label: "containerd", mount: "/var/lib/containerd" };
/// Every worker volume, in the launch template's order.
pub const WORKER_VOLUMES: [WorkerVolume; 4] = [DOCKER_VOLUME, KUBELET_VOLUME, LOG_VOLUME, CONTAINERD_VOLUME];

/// Where the units expect the TLS assets and other secrets. The operator places its
/// [`NodeSecret`]s at these paths; the config references them whether or not they are present.
pub mod paths {
    /// Kubelet client certificate (all nodes).
    pub const WORKER_CRT: &str = "/etc/kubernetes/ssl/worker-crt.pem";
    /// Kubelet client key (all nodes).
    pub const WORKER_KEY: &str = "/etc/kubernetes/ssl/worker-key.pem";
    /// The cluster CA, as shipped with the worker certificate (all nodes).
    pub const WORKER_CA: &str = "/etc/kubernetes/ssl/worker-ca.pem";
    /// API server serving certificate (masters).
    pub const API_CRT: &str = "/etc/kubernetes/ssl/apiserver-crt.pem";
    /// API server serving key (masters).
    pub const API_KEY: &str = "/etc/kubernetes/ssl/apiserver-key.pem";
    /// The cluster CA, as shipped with the API certificate (masters).
    pub const API_CA: &str = "/etc/kubernetes/ssl/apiserver-ca.pem";
    /// etcd server and peer certificate (masters).
    pub const ETCD_CRT: &str = "/etc/kubernetes/ssl/etcd/server-crt.pem";
    /// etcd server and peer key (masters).
    pub const ETCD_KEY: &str = "/etc/kubernetes/ssl/etcd/server-key.pem";
    /// etcd CA (masters).
    pub const ETCD_CA: &str = "/etc/kubernetes/ssl/etcd/server-ca.pem";
    /// Service-account signing key (masters).
    pub const SERVICE_ACCOUNT_KEY: &str = "/etc/kubernetes/ssl/service-account-key.pem";
    /// The API server's encryption-provider config (masters).
    pub const ENCRYPTION_CONFIG: &str = "/etc/kubernetes/encryption/k8s-encryption-config.yaml";
    /// The public key of the IRSA service-account issuer (masters, with IRSA), as the original.
    pub const SERVICE_ACCOUNT_V2_PUB: &str = "/etc/kubernetes/ssl/service-account-v2-pub.pem";
    /// The signing key of the IRSA service-account issuer (masters, with IRSA), as the original.
    pub const SERVICE_ACCOUNT_V2_PRIV: &str = "/etc/kubernetes/ssl/service-account-v2-priv.pem";
}

/// What the node is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// A control-plane node running etcd and the control-plane static pods.
    Master {
        /// The master id: 0 for a single master, 1–3 in HA.
        id: u8,
        /// This member's etcd name ([`etcd_name`]).
        etcd_name: String,
        /// Every member as `name=https://name.<base>:2380`, comma-separated
        /// ([`etcd_initial_cluster`]).
        etcd_initial_cluster: String,
        /// `new` while the cluster is being created, then `existing`.
        initial_cluster_state: InitialClusterState,
    },
    /// A node-pool worker.
    Worker {
        /// The node pool (machine deployment) id.
        md_id: String,
    },
}

/// A file whose content must be encrypted before it leaves the operator.
#[derive(Clone, PartialEq, Eq)]
pub struct NodeSecret {
    /// The absolute path of the decrypted file on the node; the config carries `<path>.enc`.
    pub path: String,
    /// The content. Never printed.
    pub plaintext: Vec<u8>,
}

impl fmt::Debug for NodeSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NodeSecret").field("path", &self.path).field("plaintext", &"***").finish()
    }
}

/// Everything a node config depends on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeConfigInput {
    /// Master or worker, with the role's own settings.
    pub role: Role,
    /// The workload cluster id.
    pub cluster_id: String,
    /// The cluster's base domain, `<id>.k8s.<domain>` (etcd peers are `<etcd name>.<base>`).
    pub base_domain: String,
    /// The Kubernetes API host, `api.<base>`.
    pub api_domain: String,
    /// The etcd host behind the etcd load balancer, `etcd.<base>`.
    pub etcd_domain: String,
    /// The AWS region (KMS is called there).
    pub region: String,
    /// Kubernetes version, with or without a leading `v`.
    pub kubernetes_version: String,
    /// etcd version, with or without a leading `v`.
    pub etcd_version: String,
    /// Labels kubelet registers the node with; the role labels are added and win.
    pub node_labels: BTreeMap<String, String>,
    /// The Service CIDR.
    pub service_cidr: String,
    /// The cluster DNS address inside the Service CIDR (`.10`, reference §7.3).
    pub cluster_dns_ip: String,
    /// The pod CIDR.
    pub pod_cidr: String,
    /// OpenID Connect for the API server (masters), from the cluster's `spec.cluster.oidc`.
    pub oidc: Option<Oidc>,
    /// kube-proxy's `conntrack.maxPerCore`, from the cluster's
    /// `spec.cluster.kubeProxy.conntrackMaxPerCore`; kube-proxy's default (32768) when `None`,
    /// and `0` leaves the kernel's limit as it is.
    pub conntrack_max_per_core: Option<u32>,
    /// The registry images are pulled from, e.g. `quay.io`.
    pub registry: String,
    /// What a fleet may set beyond the defaults: etcd's quota, the pod garbage collection,
    /// Cilium's ENI mode, cgroups v1.
    pub tuning: NodeTuning,
    /// What the installation adds to every node: SSH users, the SSO CA, registry mirrors
    /// (shared with kvm-operator's nodes).
    pub extras: ignition::extras::NodeExtras,
    /// IAM roles for service accounts (masters): the public issuer's URLs, the signing one
    /// first, and the audiences it serves; its key pair is among the [`secrets`](Self::secrets)
    /// at [`paths::SERVICE_ACCOUNT_V2_PUB`] and [`paths::SERVICE_ACCOUNT_V2_PRIV`].
    pub irsa: Option<Irsa>,
    /// The secret files, shipped encrypted.
    pub secrets: Vec<NodeSecret>,
}

/// The settings of [`NodeConfigInput::tuning`]; each is the components' default when unset.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeTuning {
    /// etcd's `--quota-backend-bytes` (masters).
    pub etcd_quota_backend_bytes: Option<u64>,
    /// The controller manager's `--terminated-pod-gc-threshold` (masters).
    pub terminated_pod_gc_threshold: Option<u32>,
    /// Cilium in ENI mode assigns pod addresses itself: the controller manager allocates no
    /// node CIDRs.
    pub cilium_eni: bool,
    /// The node boots with cgroups v1 (systemd's legacy hierarchy, as kernel arguments) instead
    /// of v2; its kubelet registers it with `cgroups.giantswarm.io/version=v1` (else `v2`).
    pub cgroup_v1: bool,
}

/// The kernel arguments that boot a Flatcar node with cgroups v1.
pub const CGROUP_V1_KERNEL_ARGUMENTS: [&str; 2] =
    ["systemd.unified_cgroup_hierarchy=0", "systemd.legacy_systemd_cgroup_controller"];

/// The node label that says which cgroups version a node runs, `v1` or `v2`.
pub const CGROUPS_VERSION_LABEL: &str = "cgroups.giantswarm.io/version";

/// A master's public service-account issuer (IAM roles for service accounts).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Irsa {
    /// The issuer URLs, the signing one first (`crate::irsa::Issuer::urls`).
    pub issuers: Vec<String>,
    /// The audiences besides the API server's own (`crate::irsa::sts_audience`).
    pub audiences: Vec<String>,
}

/// Why a node config cannot be rendered or sealed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IgnitionError {
    /// A path is unusable or used twice (the shared document model's checks).
    #[error(transparent)]
    Config(#[from] ignition::IgnitionError),
    /// [`NodeConfig::seal_with`] got a different number of ciphertexts than there are secrets.
    #[error("{got} ciphertexts for {expected} secrets")]
    CiphertextCount {
        /// The number of secrets.
        expected: usize,
        /// The number of ciphertexts given.
        got: usize,
    },
}

/// The etcd member name of a master: `etcd<id>` (`etcd0` for a single master, `etcd1`–`etcd3`
/// in HA; reference §6.2).
pub fn etcd_name(master_id: u8) -> String {
    format!("etcd{master_id}")
}

/// The `--initial-cluster` value for `master_count` masters: `etcd0=https://etcd0.<base>:2380`
/// for one, `etcd1=…,etcd2=…,etcd3=…` for HA (reference §6.2).
pub fn etcd_initial_cluster(base_domain: &str, master_count: u8) -> String {
    let ids: Vec<u8> = if master_count <= 1 { vec![0] } else { (1..=master_count).collect() };
    ids.into_iter()
        .map(|id| {
            let name = etcd_name(id);
            format!("{name}=https://{name}.{base_domain}:2380")
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// A rendered node config with its secrets still in plaintext: hash it, then seal it.
#[derive(Clone)]
pub struct NodeConfig {
    /// The Ignition document without the secret files.
    document: Value,
    secrets: Vec<NodeSecret>,
}

impl fmt::Debug for NodeConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let count = |pointer: &str| self.document.pointer(pointer).and_then(Value::as_array).map_or(0, Vec::len);
        f.debug_struct("NodeConfig")
            .field("files", &count("/storage/files"))
            .field("units", &count("/systemd/units"))
            .field("secrets", &self.secrets.iter().map(|s| s.path.as_str()).collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl NodeConfig {
    /// The secrets in the order [`NodeConfig::seal_with`] expects their ciphertexts.
    pub fn secrets(&self) -> &[NodeSecret] {
        &self.secrets
    }

    /// SHA-256 (lower-case hex) over the plaintext rendering, secrets included: equal for equal
    /// inputs, different when anything changes. Independent of JSON key order.
    pub fn content_hash(&self) -> String {
        let mut hasher = Sha256::new();
        hasher.update(b"node-config/v1\n");
        let canonical = ignition::canonical_json(&self.document);
        hasher.update((canonical.len() as u64).to_be_bytes());
        hasher.update(canonical.as_bytes());
        for secret in &self.secrets {
            // Length prefixes keep ("ab","c") and ("a","bc") apart.
            hasher.update((secret.path.len() as u64).to_be_bytes());
            hasher.update(secret.path.as_bytes());
            hasher.update((secret.plaintext.len() as u64).to_be_bytes());
            hasher.update(&secret.plaintext);
        }
        format!("{:x}", hasher.finalize())
    }

    /// The final Ignition JSON, each secret encrypted by `encrypt` (called once per secret, in
    /// [`NodeConfig::secrets`] order, with its plaintext).
    pub fn seal<E>(&self, mut encrypt: impl FnMut(&[u8]) -> Result<Vec<u8>, E>) -> Result<Vec<u8>, E> {
        let ciphertexts = self.secrets.iter().map(|s| encrypt(&s.plaintext)).collect::<Result<Vec<_>, E>>()?;
        Ok(self.assemble(ciphertexts))
    }

    /// The final Ignition JSON with the given ciphertexts, one per secret in
    /// [`NodeConfig::secrets`] order.
    pub fn seal_with(&self, ciphertexts: Vec<Vec<u8>>) -> Result<Vec<u8>, IgnitionError> {
        if ciphertexts.len() != self.secrets.len() {
            return Err(IgnitionError::CiphertextCount { expected: self.secrets.len(), got: ciphertexts.len() });
        }
        Ok(self.assemble(ciphertexts))
    }

    fn assemble(&self, ciphertexts: Vec<Vec<u8>>) -> Vec<u8> {
        let mut document = self.document.clone();
        let encrypted: Vec<Value> = self
            .secrets
            .iter()
            .zip(ciphertexts)
            .map(|(secret, ciphertext)| File::private(format!("{}.enc", secret.path), ciphertext).to_value())
            .collect();
        if let Some(files) = document.pointer_mut("/storage/files").and_then(Value::as_array_mut) {
            files.splice(0..0, encrypted);
        }
        document.to_string().into_bytes()
    }
}

/// Renders the node config for `input`.
pub fn render(input: &NodeConfigInput) -> Result<NodeConfig, IgnitionError> {
    let components = components(input);
    let mut files = vec![
        File::script("/opt/bin/decrypt-tls-assets", &decrypt_script(input)),
        File::script("/opt/bin/set-hostname", &set_hostname_script()),
        File::script(AWS_WRAPPER, &aws_wrapper(input)),
    ];
    files.extend(components.node_files());
    files.extend(input.extras.files());
    let mut units = vec![
        Unit::new("set-hostname.service", SET_HOSTNAME_UNIT),
        Unit::new("decrypt-tls-assets.service", decrypt_unit(input)),
        Unit::new(KUBELET_UNIT, kubelet_unit(input, &components)),
    ];
    let mut filesystems = Vec::new();
    if let Role::Worker { .. } = &input.role {
        for volume in WORKER_VOLUMES {
            filesystems.push(Filesystem {
                device: volume.device.into(),
                format: "xfs".into(),
                label: volume.label.into(),
                wipe_filesystem: true,
            });
            units.push(Unit::new(mount_unit_name(volume.mount), worker_mount_unit(volume)));
        }
    }
    if let Role::Master { id, etcd_name, etcd_initial_cluster, initial_cluster_state } = &input.role {
        files.push(File::script(ETCD_ATTACH_SCRIPT, &etcd_attach_script(input, *id)));
        units.push(Unit::new(ETCD_ATTACH_UNIT, etcd_attach_unit()));
        units.push(Unit::new(ETCD_MOUNT_UNIT, etcd_mount_unit()));
        units.push(Unit::new(
            ETCD_UNIT,
            etcd_unit(input, &components, etcd_name, etcd_initial_cluster, *initial_cluster_state),
        ));
        files.extend(components.master_files());
        files.extend(ignition::access::master_files(&components.tls));
        units.push(ignition::access::master_unit());
        // A single master has no launching hook (reference §5.6): nothing to complete.
        if *id != 0 {
            files.push(File::script(LAUNCHING_HOOK_SCRIPT, &launching_hook_script(input)));
            units.push(Unit::new(LAUNCHING_HOOK_UNIT, launching_hook_unit()));
        }
    }

    let mut seen = BTreeSet::new();
    let plain_paths = files.iter().map(|f| f.path.clone()).collect::<Vec<_>>();
    for secret in &input.secrets {
        ignition::check_path(&secret.path)?;
        // The decrypted file lands at `path` too, so it may not clash with a plain file either.
        for path in [secret.path.clone(), format!("{}.enc", secret.path)] {
            if !seen.insert(path.clone()) || plain_paths.contains(&path) {
                return Err(ignition::IgnitionError::DuplicatePath { path }.into());
            }
        }
    }

    for (service, dropin) in input.extras.dropins() {
        ignition::add_dropin(&mut units, service, dropin);
    }
    let kernel_arguments = if input.tuning.cgroup_v1 {
        CGROUP_V1_KERNEL_ARGUMENTS.iter().map(|a| a.to_string()).collect()
    } else {
        Vec::new()
    };
    let users = input.extras.users();
    let document = Config { files, filesystems, units, users, kernel_arguments }.to_value();
    Ok(NodeConfig { document, secrets: input.secrets.clone() })
}

/// The secrets a node needs (a master when `master`) from a cluster's cert-operator
/// certificates (certificate name → Secret key → bytes), placed at their [`paths`]: every
/// node's `worker`, and on masters `api`, `etcd` and the `service-account` key. The names of the
/// missing certificates (`<cert>` or `<cert>/<key>`) when any is missing.
pub fn secrets_for(
    master: bool,
    certs: &BTreeMap<String, BTreeMap<String, Vec<u8>>>,
) -> Result<Vec<NodeSecret>, Vec<String>> {
    let mut wanted: Vec<(&str, [(&str, &str); 3])> =
        vec![("worker", [("crt", paths::WORKER_CRT), ("key", paths::WORKER_KEY), ("ca", paths::WORKER_CA)])];
    if master {
        wanted.push(("api", [("crt", paths::API_CRT), ("key", paths::API_KEY), ("ca", paths::API_CA)]));
        wanted.push(("etcd", [("crt", paths::ETCD_CRT), ("key", paths::ETCD_KEY), ("ca", paths::ETCD_CA)]));
    }
    let mut missing = Vec::new();
    let mut out = Vec::new();
    for (cert, files) in wanted {
        match certs.get(cert) {
            Some(data) => {
                for (key, path) in files {
                    match data.get(key) {
                        Some(bytes) => out.push(NodeSecret { path: path.to_string(), plaintext: bytes.clone() }),
                        None => missing.push(format!("{cert}/{key}")),
                    }
                }
            }
            None => missing.push(cert.to_string()),
        }
    }
    if master {
        match certs.get("service-account").and_then(|d| d.get("key")) {
            Some(k) => out.push(NodeSecret { path: paths::SERVICE_ACCOUNT_KEY.to_string(), plaintext: k.clone() }),
            None => missing.push("service-account".into()),
        }
    }
    if missing.is_empty() { Ok(out) } else { Err(missing) }
}

// --- Ignition building blocks ---------------------------------------------------------------

// --- the decryption of the secrets ---------------------------------------------------------

/// The node's root in the node's scripts: empty on a node; only an emulated node (in tests) puts
/// its file system elsewhere, with `NODE_ROOT`. Every path a script reads or writes, and the AWS
/// CLI it calls ([`AWS_WRAPPER`]), is below it.
const ROOT_LINE: &str = r#"root="${NODE_ROOT:-}""#;

/// The instance metadata service in the node's scripts: EC2's address unless
/// `AWS_EC2_METADATA_SERVICE_ENDPOINT` (the variable the AWS CLI reads too) names another, asked
/// with IMDSv2 (a session token first); `metadata <path>` prints `/latest/meta-data/<path>`.
const METADATA_FUNCTION: &str = r#"imds="${AWS_EC2_METADATA_SERVICE_ENDPOINT:-http://169.254.169.254}"
imds="${imds%/}/latest"

metadata() {
  local token
  token="$(curl -sf --max-time 5 -X PUT "$imds/api/token" -H 'X-aws-ec2-metadata-token-ttl-seconds: 60')" || return 1
  curl -sf --max-time 5 -H "X-aws-ec2-metadata-token: $token" "$imds/meta-data/$1"
}
"#;

/// The KMS errors no retry changes: a key this node may not use, a ciphertext of another key or
/// none at all, a key disabled or being deleted.
const KMS_PERMANENT_ERRORS: &str =
    "AccessDenied|InvalidCiphertext|IncorrectKey|NotFoundException|DisabledException|KMSInvalidState|InvalidKeyUsage";

/// Decrypts every `<path>.enc` of the config into `<path>` with [`AWS_WRAPPER`]: into a temporary
/// file beside it, renamed into place once complete and removed on any failure, so no half-written
/// secret is ever at `<path>`. Retries every 5 s while KMS does not answer (the network may come
/// up after this unit); stops with status 1 on a [`KMS_PERMANENT_ERRORS`] answer, naming the file
/// and the error, so that the unit fails where `systemctl` shows it.
fn decrypt_script(input: &NodeConfigInput) -> String {
    let region = &input.region;
    let mut script = format!(
        r#"#!/bin/bash
# Decrypts every *.enc file of this node config with the cluster's KMS key; the instance role
# grants kms:Decrypt. Each file is written beside its target and renamed into place once whole.
# Retries while KMS cannot be reached; fails at once on an error no retry changes.
set -uo pipefail

{ROOT_LINE}
aws="$root{AWS_WRAPPER}"
region={region}
permanent='{KMS_PERMANENT_ERRORS}'
partial=""
errors="$(mktemp)" || exit 1
trap 'rm -f "$errors" ${{partial:+"$partial"}}' EXIT
trap 'exit 143' TERM INT

# Decrypts $1 (<path>.enc, below the root) into <path>. 0: done, 1: try again, 2: never.
decrypt() {{
  local enc="$root$1" out plaintext
  out="${{enc%.enc}}"
  if ! plaintext="$(cd "$(dirname "$enc")" && "$aws" kms decrypt --region "$region" \
    --ciphertext-blob "fileb://$(basename "$enc")" --output text --query Plaintext 2>"$errors")"; then
    if grep -Eq "$permanent" "$errors"; then
      echo "decrypting $1 failed: $(tr '\n' ' ' <"$errors")" >&2
      return 2
    fi
    echo "decrypting $1 failed, retrying in 5s: $(tr '\n' ' ' <"$errors")" >&2
    return 1
  fi
  partial="$(mktemp "$out.XXXXXX")" || return 1
  if printf '%s' "$plaintext" | base64 -d >"$partial" && chmod 0600 "$partial" && mv "$partial" "$out"; then
    partial=""
    return 0
  fi
  rm -f "$partial"
  partial=""
  return 1
}}

decrypt_until_done() {{
  local status
  while true; do
    decrypt "$1"
    status=$?
    case $status in
      0) return 0 ;;
      2) exit 1 ;;
    esac
    sleep 5
  done
}}

"#
    );
    for secret in &input.secrets {
        script.push_str(&format!("decrypt_until_done {}.enc\n", secret.path));
    }
    script
}

fn decrypt_unit(input: &NodeConfigInput) -> String {
    let before = match input.role {
        Role::Master { .. } => "kubelet.service etcd3.service",
        Role::Worker { .. } => "kubelet.service",
    };
    format!(
        "[Unit]
Description=Decrypt the TLS assets and other secrets with KMS
Requires=docker.service
After=docker.service network-online.target
Wants=network-online.target
Before={before}

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/opt/bin/decrypt-tls-assets

[Install]
WantedBy=multi-user.target
"
    )
}

// --- hostname ------------------------------------------------------------------------------

/// EC2's private DNS name is the Kubernetes node name (the drainer relies on it, §6.5), from the
/// metadata service ([`METADATA_FUNCTION`]), asked up to ten times.
fn set_hostname_script() -> String {
    format!(
        r#"#!/bin/bash
set -uo pipefail

{METADATA_FUNCTION}
for _ in 1 2 3 4 5 6 7 8 9 10; do
  if name="$(metadata local-hostname)" && [ -n "$name" ]; then
    exec hostnamectl set-hostname "$name"
  fi
  sleep 2
done
echo "no local-hostname from the instance metadata service at $imds" >&2
exit 1
"#
    )
}

const SET_HOSTNAME_UNIT: &str = "[Unit]
Description=Set the hostname to the EC2 private DNS name
Wants=network-online.target
After=network-online.target
Before=kubelet.service

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/opt/bin/set-hostname

[Install]
WantedBy=multi-user.target
";

// --- the Kubernetes components --------------------------------------------------------------

/// The shared components with AWS's TLS paths, `--cloud-provider=external` and etcd behind the
/// etcd load balancer.
fn components(input: &NodeConfigInput) -> Components {
    Components {
        cluster_id: input.cluster_id.clone(),
        api_domain: input.api_domain.clone(),
        etcd_servers: format!("https://{}:2379", input.etcd_domain),
        registry: input.registry.clone(),
        kubernetes_version: input.kubernetes_version.clone(),
        etcd_version: input.etcd_version.clone(),
        service_cidr: input.service_cidr.clone(),
        cluster_dns_ip: input.cluster_dns_ip.clone(),
        pod_cidr: input.pod_cidr.clone(),
        oidc: input.oidc.clone(),
        conntrack_max_per_core: input.conntrack_max_per_core,
        cloud_provider: Some("external".into()),
        service_account_issuer: input.irsa.as_ref().map(|irsa| ignition::kubernetes::ServiceAccountIssuer {
            issuers: irsa.issuers.clone(),
            audiences: irsa.audiences.clone(),
            public_key: paths::SERVICE_ACCOUNT_V2_PUB.into(),
            signing_key: paths::SERVICE_ACCOUNT_V2_PRIV.into(),
        }),
        extra_apiserver_args: Vec::new(),
        etcd_quota_backend_bytes: input.tuning.etcd_quota_backend_bytes,
        terminated_pod_gc_threshold: input.tuning.terminated_pod_gc_threshold,
        allocate_node_cidrs: !input.tuning.cilium_eni,
        tls: TlsPaths {
            worker_crt: paths::WORKER_CRT.into(),
            worker_key: paths::WORKER_KEY.into(),
            worker_ca: paths::WORKER_CA.into(),
            api_crt: paths::API_CRT.into(),
            api_key: paths::API_KEY.into(),
            api_ca: paths::API_CA.into(),
            etcd_crt: paths::ETCD_CRT.into(),
            etcd_key: paths::ETCD_KEY.into(),
            etcd_ca: paths::ETCD_CA.into(),
            service_account_key: paths::SERVICE_ACCOUNT_KEY.into(),
            encryption_config: paths::ENCRYPTION_CONFIG.into(),
        },
    }
}

/// The labels kubelet registers the node with: the input's, then the role's (which win).
fn node_labels(input: &NodeConfigInput) -> BTreeMap<String, String> {
    let mut labels = input.node_labels.clone();
    labels.insert("giantswarm.io/cluster".into(), input.cluster_id.clone());
    match &input.role {
        Role::Master { .. } => {
            labels.insert("role".into(), "master".into());
            labels.insert("kubernetes.io/role".into(), "master".into());
        }
        Role::Worker { md_id } => {
            labels.insert("role".into(), "worker".into());
            labels.insert("kubernetes.io/role".into(), "worker".into());
            labels.insert("giantswarm.io/machine-deployment".into(), md_id.clone());
            labels.insert(CGROUPS_VERSION_LABEL.into(), if input.tuning.cgroup_v1 { "v1" } else { "v2" }.into());
        }
    }
    labels
}

/// kubelet waits for the decrypted secrets and for the hostname (the EC2 private DNS name).
fn kubelet_unit(input: &NodeConfigInput, components: &Components) -> String {
    let labels = node_labels(input);
    components.kubelet_unit(&KubeletUnit {
        node_labels: &labels,
        master: matches!(input.role, Role::Master { .. }),
        requires: &["docker.service", "decrypt-tls-assets.service"],
        after: &["docker.service", "decrypt-tls-assets.service", "set-hostname.service"],
    })
}

fn worker_mount_unit(volume: WorkerVolume) -> String {
    let description = format!("{} volume", volume.label);
    let device = format!("/dev/disk/by-label/{}", volume.label);
    Mount {
        description: &description,
        requires: &[],
        after: &[],
        before: &["docker.service", "containerd.service", "kubelet.service"],
        what: &device,
        path: volume.mount,
        fs_type: "xfs",
        options: None,
        wanted_by: "local-fs.target",
    }
    .contents()
}

// --- masters: etcd and the control plane -----------------------------------------------------

/// etcd listens on the attached interface's address (which a replaced master takes over) and on
/// the host's, both written by [`ETCD_ATTACH_SCRIPT`]; peers reach it as `<name>.<base>`.
fn etcd_unit(
    input: &NodeConfigInput,
    components: &Components,
    name: &str,
    initial_cluster: &str,
    state: InitialClusterState,
) -> String {
    let peer = format!("https://{name}.{}", input.base_domain);
    components.etcd_unit(&EtcdMember {
        name,
        initial_cluster,
        state,
        peer_url: &format!("{peer}:2380"),
        client_url: &format!("{peer}:2379"),
        listen_peer_urls: "https://${ETCD_ENI_IP}:2380",
        listen_client_urls: "https://${ETCD_ENI_IP}:2379,https://${ETCD_HOST_IP}:2379,https://127.0.0.1:2379",
        environment_file: Some(ETCD_NETWORK_ENV),
        requires: &["docker.service", "decrypt-tls-assets.service", ETCD_ATTACH_UNIT, ETCD_MOUNT_UNIT],
    })
}

/// The etcd member's network interface and data volume live outside the instance (TCCPN creates
/// them, reference §6.1–6.2), so that a replaced master takes over the old one's etcd address
/// and data. This script finds both by their `Name` tags, attaches the interface as device 1 and
/// the volume as [`ETCD_VOLUME_DEVICE`], creates the filesystem only on a volume that has none,
/// routes the interface's address out of the interface itself, and writes the addresses etcd
/// listens on. Each step retries every 5 s until it succeeds: the interface and the volume stay
/// attached to the instance being replaced until EC2 has detached them.
fn etcd_attach_script(input: &NodeConfigInput, master_id: u8) -> String {
    let region = &input.region;
    let eni = crate::names::master_eni(&input.cluster_id, master_id);
    let volume = crate::names::master_etcd_volume(&input.cluster_id, master_id);
    format!(
        r#"#!/bin/bash
# Attaches this master's etcd network interface and data volume, found by their Name tags.
set -uo pipefail

{ROOT_LINE}
{METADATA_FUNCTION}
eni_name={eni}
volume_name={volume}
ec2_device={ETCD_VOLUME_DEVICE}
device="$root$ec2_device"
env_file="$root{ETCD_NETWORK_ENV}"
network_dir="$root/etc/systemd/network"

aws() {{
  "$root{AWS_WRAPPER}" --region {region} --output text "$@"
}}

# Runs "$@" until it succeeds, every 5s.
retry() {{
  until "$@"; do
    echo "$1 failed, retrying in 5s" >&2
    sleep 5
  done
}}

find_instance() {{
  instance="$(metadata instance-id)" && [ -n "$instance" ] &&
    host_ip="$(metadata local-ipv4)" && [ -n "$host_ip" ]
}}

attach_eni() {{
  local found attached_to
  found="$(aws ec2 describe-network-interfaces --filters "Name=tag:Name,Values=$eni_name" \
    --query 'NetworkInterfaces[0].[NetworkInterfaceId,Attachment.InstanceId,PrivateIpAddress,MacAddress]')" || return 1
  read -r eni_id attached_to eni_ip eni_mac <<<"$found"
  if [ -z "${{eni_id:-}}" ] || [ "$eni_id" = None ]; then
    echo "no network interface tagged Name=$eni_name" >&2
    return 1
  fi
  if [ "$attached_to" = "$instance" ]; then
    return 0
  fi
  if [ "$attached_to" != None ]; then
    echo "$eni_id is still attached to $attached_to" >&2
    return 1
  fi
  aws ec2 attach-network-interface --network-interface-id "$eni_id" --instance-id "$instance" --device-index 1 >/dev/null
}}

attach_volume() {{
  local found volume_id state attached_to
  found="$(aws ec2 describe-volumes --filters "Name=tag:Name,Values=$volume_name" \
    --query 'Volumes[0].[VolumeId,State,Attachments[0].InstanceId]')" || return 1
  read -r volume_id state attached_to <<<"$found"
  if [ -z "${{volume_id:-}}" ] || [ "$volume_id" = None ]; then
    echo "no volume tagged Name=$volume_name" >&2
    return 1
  fi
  if [ "$attached_to" = "$instance" ]; then
    return 0
  fi
  if [ "$state" != available ]; then
    echo "$volume_id is $state, attached to $attached_to" >&2
    return 1
  fi
  aws ec2 attach-volume --volume-id "$volume_id" --instance-id "$instance" --device "$ec2_device" >/dev/null
}}

# The volume's device (a block device, or udev's link to one) appears once EC2 attached it.
wait_for_device() {{
  [ -e "$device" ]
}}

# The filesystem is created only where blkid finds none (exit 2), never over etcd's data.
prepare_filesystem() {{
  blkid -p "$device" >/dev/null
  case $? in
    0) return 0 ;;
    2) mkfs.ext4 -L {ETCD_VOLUME_LABEL} "$device" ;;
    *) return 1 ;;
  esac
}}

# The interface's address answers on the interface and leaves through it.
configure_eni() {{
  mkdir -p "$network_dir" &&
    printf '%s\n' '[Match]' "MACAddress=$eni_mac" '' '[Network]' 'DHCP=ipv4' '' \
      '[DHCPv4]' 'RouteTable=100' 'RouteMetric=2048' '' \
      '[RoutingPolicyRule]' "From=$eni_ip/32" 'Table=100' >"$network_dir/10-etcd-eni.network" &&
    networkctl reload
}}

# grep reads all of ip's output (-q would stop at the match, and pipefail would then fail on
# ip's broken pipe); -F because an address's dots are not wildcards.
wait_for_eni_address() {{
  ip -4 -o addr show | grep -F " inet $eni_ip/" >/dev/null
}}

write_env() {{
  mkdir -p "$(dirname "$env_file")" &&
    printf 'ETCD_ENI_IP=%s\nETCD_HOST_IP=%s\n' "$eni_ip" "$host_ip" >"$env_file.tmp" &&
    mv "$env_file.tmp" "$env_file"
}}

retry find_instance
retry attach_eni
retry attach_volume
retry wait_for_device
retry prepare_filesystem
retry configure_eni
retry wait_for_eni_address
retry write_env
"#
    )
}

fn etcd_attach_unit() -> String {
    format!(
        "[Unit]
Description=Attach the etcd network interface and data volume
Requires=docker.service
After=docker.service network-online.target
Wants=network-online.target
Before={ETCD_MOUNT_UNIT} etcd3.service

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart={ETCD_ATTACH_SCRIPT}

[Install]
WantedBy=multi-user.target
"
    )
}

fn etcd_mount_unit() -> String {
    let device = format!("/dev/disk/by-label/{ETCD_VOLUME_LABEL}");
    Mount {
        description: "etcd data volume",
        requires: &[ETCD_ATTACH_UNIT],
        after: &[ETCD_ATTACH_UNIT],
        before: &["etcd3.service"],
        what: &device,
        path: "/var/lib/etcd",
        fs_type: "ext4",
        options: None,
        wanted_by: "multi-user.target",
    }
    .contents()
}

// --- the AWS CLI and the launching hook ------------------------------------------------------

fn aws_wrapper(input: &NodeConfigInput) -> String {
    format!(
        r#"#!/bin/bash
# The AWS CLI of this node's scripts: the awscli container on the host's network, so that it
# reaches the instance metadata service and the instance role's credentials. The current
# directory is shared, for fileb:// and file:// arguments.
exec docker run --rm --net=host -v "$PWD:$PWD" -w "$PWD" {}/{AWSCLI_IMAGE} "$@"
"#,
        input.registry
    )
}

/// Completes the HA masters' launching hook ([`tccpn::LAUNCHING_HOOK`]) once this master is
/// healthy: its etcd member answers `/health` with `"health":"true"` to the rendered etcd
/// certificate, and its API server answers `/readyz`. Checks every [`LAUNCHING_HOOK_INTERVAL`]
/// seconds and gives up after [`LAUNCHING_HOOK_DEADLINE`] with a log line, leaving the hook to
/// its timeout and default (`CONTINUE`). Calls the AWS CLI as [`AWS_WRAPPER`] and the metadata
/// service as [`METADATA_FUNCTION`] does. The node's values are defaults that an emulated node (in
/// tests) overrides from the environment, which the unit leaves alone: `NODE_ROOT`
/// ([`ROOT_LINE`]), `ETCD_HEALTH_URL`, `API_READYZ_URL` and `LAUNCHING_HOOK_INTERVAL`.
///
/// [`tccpn::LAUNCHING_HOOK`]: crate::stacks::tccpn::LAUNCHING_HOOK
fn launching_hook_script(input: &NodeConfigInput) -> String {
    let region = &input.region;
    let hook = crate::stacks::tccpn::LAUNCHING_HOOK;
    let (etcd_ca, etcd_crt, etcd_key, api_ca) = (paths::ETCD_CA, paths::ETCD_CRT, paths::ETCD_KEY, paths::API_CA);
    format!(
        r#"#!/bin/bash
# Completes this master's Auto Scaling launching hook {hook} once its etcd member and its API
# server are healthy, so that a master roll waits for health and no longer. Gives up before the
# hook's own timeout; Auto Scaling then continues by itself.
set -uo pipefail

{ROOT_LINE}
{METADATA_FUNCTION}
aws="$root{AWS_WRAPPER}"
hook={hook}
region={region}
interval="${{LAUNCHING_HOOK_INTERVAL:-{LAUNCHING_HOOK_INTERVAL}}}"
deadline=$((SECONDS + {LAUNCHING_HOOK_DEADLINE}))
etcd_health_url="${{ETCD_HEALTH_URL:-https://127.0.0.1:2379/health}}"
api_readyz_url="${{API_READYZ_URL:-https://127.0.0.1:443/readyz}}"

etcd_healthy() {{
  curl -sf --max-time 5 --cacert "$root{etcd_ca}" --cert "$root{etcd_crt}" --key "$root{etcd_key}" \
    "$etcd_health_url" | grep -Eq '"health": *"true"'
}}

api_ready() {{
  curl -sf --max-time 5 --cacert "$root{api_ca}" "$api_readyz_url" >/dev/null
}}

healthy() {{
  etcd_healthy && api_ready
}}

find_group() {{
  instance="$(metadata instance-id)" && [ -n "$instance" ] &&
    group="$("$aws" autoscaling describe-auto-scaling-instances --region "$region" --instance-ids "$instance" \
      --query 'AutoScalingInstances[0].AutoScalingGroupName' --output text)" &&
    [ -n "$group" ] && [ "$group" != None ]
}}

complete() {{
  "$aws" autoscaling complete-lifecycle-action --region "$region" --auto-scaling-group-name "$group" \
    --lifecycle-hook-name "$hook" --instance-id "$instance" --lifecycle-action-result CONTINUE
}}

# Runs "$@" every $interval seconds until it succeeds, or gives up at the deadline.
until_deadline() {{
  until "$@"; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      echo "giving up on $hook: $1 did not succeed in {LAUNCHING_HOOK_DEADLINE}s; Auto Scaling continues at the hook's timeout" >&2
      exit 1
    fi
    sleep "$interval"
  done
}}

until_deadline healthy
echo "etcd member and API server healthy"
until_deadline find_group
until_deadline complete
echo "completed $hook of $instance in $group"
"#
    )
}

fn launching_hook_unit() -> String {
    format!(
        "[Unit]
Description=Complete the launching hook once etcd and the API server are healthy
Wants=network-online.target
After=network-online.target etcd3.service kubelet.service

[Service]
Type=oneshot
RemainAfterExit=yes
TimeoutStartSec={}
ExecStart={LAUNCHING_HOOK_SCRIPT}

[Install]
WantedBy=multi-user.target
",
        LAUNCHING_HOOK_DEADLINE + 2 * LAUNCHING_HOOK_INTERVAL
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine as _;
    use base64::engine::general_purpose::STANDARD as BASE64;

    const API_KEY_PEM: &[u8] = b"-----BEGIN RSA PRIVATE KEY-----\nMIIEsecretapikey\n-----END RSA PRIVATE KEY-----\n";
    const WORKER_KEY_PEM: &[u8] = b"-----BEGIN EC PRIVATE KEY-----\nMHcworkerkeysecret\n-----END EC PRIVATE KEY-----\n";

    fn worker() -> NodeConfigInput {
        NodeConfigInput {
            role: Role::Worker { md_id: "g3j50".into() },
            cluster_id: "al9qy".into(),
            base_domain: "al9qy.k8s.gauss.eu-central-1.aws.gigantic.io".into(),
            api_domain: "api.al9qy.k8s.gauss.eu-central-1.aws.gigantic.io".into(),
            etcd_domain: "etcd.al9qy.k8s.gauss.eu-central-1.aws.gigantic.io".into(),
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
            tuning: NodeTuning::default(),
            extras: Default::default(),
            irsa: None,
            secrets: vec![
                NodeSecret { path: paths::WORKER_KEY.into(), plaintext: WORKER_KEY_PEM.to_vec() },
                NodeSecret { path: paths::WORKER_CRT.into(), plaintext: b"worker certificate".to_vec() },
            ],
        }
    }

    fn master(id: u8, masters: u8) -> NodeConfigInput {
        let mut input = worker();
        input.role = Role::Master {
            id,
            etcd_name: etcd_name(id),
            etcd_initial_cluster: etcd_initial_cluster(&input.base_domain, masters),
            initial_cluster_state: InitialClusterState::New,
        };
        input.secrets.push(NodeSecret { path: paths::API_KEY.into(), plaintext: API_KEY_PEM.to_vec() });
        input
    }

    #[test]
    fn a_master_with_irsa_signs_with_the_v2_key_as_the_public_issuer_and_ships_the_key_pair() {
        let mut input = master(0, 1);
        input.irsa = Some(Irsa {
            issuers: vec!["https://s3.eu-central-1.amazonaws.com/1-g8s-al9qy-oidc-pod-identity-v2".into()],
            audiences: vec!["sts.amazonaws.com".into()],
        });
        for path in [paths::SERVICE_ACCOUNT_V2_PUB, paths::SERVICE_ACCOUNT_V2_PRIV] {
            input.secrets.push(NodeSecret { path: path.into(), plaintext: b"v2 key".to_vec() });
        }
        let config = render(&input).expect("render");
        let sealed =
            config.seal(|_| Ok::<_, std::convert::Infallible>(b"sealed".to_vec())).unwrap_or_else(|e| match e {});
        let parsed = ::ignition::parse(&sealed).expect("parse");
        let manifest = parsed.text("/etc/kubernetes/manifests/k8s-api-server.yaml").expect("the API server");
        for flag in [
            "--service-account-issuer=https://s3.eu-central-1.amazonaws.com/1-g8s-al9qy-oidc-pod-identity-v2",
            "--service-account-signing-key-file=/etc/kubernetes/ssl/service-account-v2-priv.pem",
            "--service-account-key-file=/etc/kubernetes/ssl/service-account-v2-pub.pem",
            "--api-audiences=sts.amazonaws.com,https://api.al9qy.k8s.gauss.eu-central-1.aws.gigantic.io",
        ] {
            assert!(manifest.contains(flag), "{flag}: {manifest}");
        }
        for path in [paths::SERVICE_ACCOUNT_V2_PUB, paths::SERVICE_ACCOUNT_V2_PRIV] {
            assert!(parsed.files.contains_key(&format!("{path}.enc")), "{path} is shipped encrypted");
        }
        let plain = render(&master(0, 1))
            .expect("render")
            .seal(|_| Ok::<_, std::convert::Infallible>(vec![]))
            .unwrap_or_else(|e| match e {});
        assert!(!String::from_utf8_lossy(&plain).contains("service-account-v2"), "only with IRSA");
    }

    /// A stand-in for KMS: deterministic, reversible, and sharing no byte run with the input.
    fn fake_encrypt(plaintext: &[u8]) -> Result<Vec<u8>, std::convert::Infallible> {
        let mut out = b"KMS1".to_vec();
        out.extend(plaintext.iter().map(|b| b ^ 0xA5));
        Ok(out)
    }

    fn sealed(input: &NodeConfigInput) -> Value {
        let config = render(input).expect("render");
        let bytes = config.seal(fake_encrypt).unwrap_or_else(|never| match never {});
        serde_json::from_slice(&bytes).expect("sealed config is JSON")
    }

    fn files(doc: &Value) -> BTreeMap<String, Vec<u8>> {
        doc["storage"]["files"]
            .as_array()
            .expect("files")
            .iter()
            .map(|f| {
                let source = f["contents"]["source"].as_str().expect("source");
                let b64 = source.strip_prefix("data:;base64,").expect("base64 data URL");
                (f["path"].as_str().expect("path").to_owned(), BASE64.decode(b64).expect("valid base64"))
            })
            .collect()
    }

    fn units(doc: &Value) -> BTreeMap<String, String> {
        doc["systemd"]["units"]
            .as_array()
            .expect("units")
            .iter()
            .map(|u| {
                (u["name"].as_str().expect("name").to_owned(), u["contents"].as_str().expect("contents").to_owned())
            })
            .collect()
    }

    fn contains(haystack: &[u8], needle: &[u8]) -> bool {
        haystack.windows(needle.len()).any(|w| w == needle)
    }

    #[test]
    fn the_sealed_config_is_ignition_3_3_0() {
        let doc = sealed(&worker());
        assert_eq!(doc["ignition"]["version"], "3.3.0");
        for f in doc["storage"]["files"].as_array().expect("files") {
            assert!(f["path"].as_str().is_some_and(|p| p.starts_with('/')), "{f}");
            assert!(f["mode"].as_u64().is_some(), "{f}");
        }
        let units = units(&doc);
        assert!(units.contains_key("decrypt-tls-assets.service"));
        assert!(units.contains_key("kubelet.service"));
        assert!(units.contains_key("set-hostname.service"));
    }

    #[test]
    fn secrets_travel_only_as_ciphertext() {
        let input = master(0, 1);
        let bytes = render(&input).expect("render").seal(fake_encrypt).unwrap_or_else(|never| match never {});
        let doc: Value = serde_json::from_slice(&bytes).expect("JSON");
        let files = files(&doc);
        for secret in &input.secrets {
            let enc =
                files.get(&format!("{}.enc", secret.path)).unwrap_or_else(|| panic!("{}.enc missing", secret.path));
            assert_eq!(enc, &fake_encrypt(&secret.plaintext).unwrap_or_else(|never| match never {}));
            assert!(!files.contains_key(&secret.path), "{} shipped in the clear", secret.path);
            assert!(!contains(&bytes, &secret.plaintext), "plaintext of {} in the sealed bytes", secret.path);
            assert!(
                !contains(&bytes, BASE64.encode(&secret.plaintext).as_bytes()),
                "base64 plaintext of {}",
                secret.path
            );
            for content in files.values() {
                assert!(!contains(content, &secret.plaintext), "plaintext of {} inside a file", secret.path);
            }
        }
        // The decrypt script names each encrypted file and the KMS call that decrypts it.
        let script = String::from_utf8(files["/opt/bin/decrypt-tls-assets"].clone()).expect("utf-8");
        for secret in &input.secrets {
            assert!(script.contains(&format!("\ndecrypt_until_done {}.enc\n", secret.path)), "{script}");
        }
        assert!(script.contains(r#""$aws" kms decrypt --region "$region""#), "{script}");
        assert!(script.contains("region=eu-central-1\n"), "{script}");
        assert!(script.contains(r#"aws="$root/opt/bin/aws""#), "{script}");
        assert!(!script.contains("docker"), "the scripts call the AWS CLI through its wrapper only: {script}");
    }

    #[test]
    fn seal_with_takes_ciphertexts_computed_elsewhere() {
        let config = render(&worker()).expect("render");
        let ciphertexts: Vec<Vec<u8>> = config.secrets().iter().map(|s| s.path.as_bytes().to_vec()).collect();
        let doc: Value = serde_json::from_slice(&config.seal_with(ciphertexts).expect("seal")).expect("JSON");
        assert_eq!(files(&doc)[&format!("{}.enc", paths::WORKER_KEY)], paths::WORKER_KEY.as_bytes());

        assert_eq!(config.seal_with(vec![vec![1]]), Err(IgnitionError::CiphertextCount { expected: 2, got: 1 }));
    }

    #[test]
    fn a_failing_encryption_fails_the_seal() {
        let config = render(&worker()).expect("render");
        let mut calls = 0;
        let result = config.seal(|_| {
            calls += 1;
            Err::<Vec<u8>, _>("kms unavailable")
        });
        assert_eq!(result, Err("kms unavailable"));
        assert_eq!(calls, 1, "encryption goes on after a failure");
    }

    #[test]
    fn the_hash_is_stable_and_follows_every_input() {
        let base = render(&worker()).expect("render").content_hash();
        assert_eq!(base.len(), 64);
        assert!(base.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
        assert_eq!(render(&worker()).expect("render").content_hash(), base, "two renders differ");

        // Sealing twice gives different bytes (KMS is random) but the hash does not move.
        let config = render(&worker()).expect("render");
        let a = config.seal_with(vec![vec![1], vec![2]]).expect("seal");
        let b = config.seal_with(vec![vec![3], vec![4]]).expect("seal");
        assert_ne!(a, b);
        assert_eq!(config.content_hash(), base);

        type Change = fn(&mut NodeConfigInput);
        let changes: [(&str, Change); 6] = [
            ("secret content", |i| i.secrets[0].plaintext.push(b'\n')),
            ("secret path", |i| i.secrets[1].path = "/etc/kubernetes/ssl/other.pem".into()),
            ("node label", |i| drop(i.node_labels.insert("team".into(), "red".into()))),
            ("kubernetes version", |i| i.kubernetes_version = "1.33.5".into()),
            ("node pool", |i| i.role = Role::Worker { md_id: "zz9zz".into() }),
            ("region", |i| i.region = "eu-west-1".into()),
        ];
        for (what, change) in changes {
            let mut input = worker();
            change(&mut input);
            assert_ne!(render(&input).expect("render").content_hash(), base, "{what} did not change the hash");
        }
    }

    #[test]
    fn oidc_becomes_the_api_servers_flags() {
        let apiserver = |input: &NodeConfigInput| {
            let files = files(&sealed(input));
            String::from_utf8(files["/etc/kubernetes/manifests/k8s-api-server.yaml"].clone()).expect("utf-8")
        };
        let plain = apiserver(&master(0, 1));
        assert!(!plain.contains("--oidc-"), "no OIDC without spec.cluster.oidc");
        let mut input = master(0, 1);
        input.oidc = Some(Oidc {
            issuer_url: "https://dex.example.com".into(),
            client_id: "dex-k8s".into(),
            username_claim: "email".into(),
            groups_claim: String::new(),
        });
        let with = apiserver(&input);
        for flag in
            ["--oidc-issuer-url=https://dex.example.com", "--oidc-client-id=dex-k8s", "--oidc-username-claim=email"]
        {
            assert!(with.contains(&format!("        - {flag}\n")), "{flag} missing:\n{with}");
        }
        assert!(!with.contains("--oidc-groups-claim"), "an empty claim is left to the API server's default");
        assert_ne!(
            render(&input).expect("render").content_hash(),
            render(&master(0, 1)).expect("render").content_hash()
        );
    }

    #[test]
    fn a_fleets_tuning_reaches_etcd_the_controller_manager_the_kernel_and_the_labels() {
        let tuning = NodeTuning {
            etcd_quota_backend_bytes: Some(8_589_934_592),
            terminated_pod_gc_threshold: Some(500),
            cilium_eni: true,
            cgroup_v1: true,
        };
        let controller_manager = |doc: &Value| {
            String::from_utf8(files(doc)["/etc/kubernetes/manifests/k8s-controller-manager.yaml"].clone())
                .expect("utf-8")
        };
        let plain = sealed(&master(0, 1));
        assert!(!units(&plain)[ETCD_UNIT].contains("--quota-backend-bytes"), "etcd's default without a quota");
        assert!(!controller_manager(&plain).contains("--terminated-pod-gc-threshold"));
        assert!(controller_manager(&plain).contains("--allocate-node-cidrs=true"));
        assert!(plain.get("kernelArguments").is_none());

        let mut input = master(0, 1);
        input.tuning = tuning.clone();
        let tuned = sealed(&input);
        assert!(
            units(&tuned)[ETCD_UNIT].contains(" \\\n  --quota-backend-bytes=8589934592\n"),
            "{}",
            units(&tuned)[ETCD_UNIT]
        );
        let manager = controller_manager(&tuned);
        assert!(manager.contains("        - --terminated-pod-gc-threshold=500\n"), "{manager}");
        assert!(!manager.contains("--allocate-node-cidrs") && !manager.contains("--cluster-cidr"), "{manager}");

        let plain_worker = sealed(&worker());
        assert!(plain_worker.get("kernelArguments").is_none());
        assert!(units(&plain_worker)[KUBELET_UNIT].contains("cgroups.giantswarm.io/version=v2"));
        let mut input = worker();
        input.tuning = tuning;
        let tuned = sealed(&input);
        assert_eq!(
            tuned["kernelArguments"],
            serde_json::json!({"shouldExist": ["systemd.unified_cgroup_hierarchy=0", "systemd.legacy_systemd_cgroup_controller"]})
        );
        assert!(
            units(&tuned)[KUBELET_UNIT].contains("cgroups.giantswarm.io/version=v1"),
            "{}",
            units(&tuned)[KUBELET_UNIT]
        );
    }

    #[test]
    fn masters_and_workers_differ() {
        let worker_doc = sealed(&worker());
        let master_doc = sealed(&master(0, 1));
        let (worker_units, master_units) = (units(&worker_doc), units(&master_doc));
        let (worker_files, master_files) = (files(&worker_doc), files(&master_doc));

        assert!(!worker_units.contains_key("etcd3.service"));
        assert!(master_units.contains_key("etcd3.service"));
        for manifest in ["k8s-api-server.yaml", "k8s-controller-manager.yaml", "k8s-scheduler.yaml"] {
            let path = format!("/etc/kubernetes/manifests/{manifest}");
            assert!(master_files.contains_key(&path), "master lacks {path}");
            assert!(!worker_files.contains_key(&path), "worker has {path}");
        }
        let apiserver =
            String::from_utf8(master_files["/etc/kubernetes/manifests/k8s-api-server.yaml"].clone()).expect("utf-8");
        assert!(apiserver.contains("--etcd-servers=https://etcd.al9qy.k8s.gauss.eu-central-1.aws.gigantic.io:2379"));
        assert!(apiserver.contains("--service-cluster-ip-range=172.31.0.0/16"));
        assert!(apiserver.contains("image: quay.io/giantswarm/kube-apiserver:v1.33.4"));

        let worker_kubelet = &worker_units["kubelet.service"];
        assert!(
            worker_kubelet.contains(
                "--node-labels=cgroups.giantswarm.io/version=v2,giantswarm.io/cluster=al9qy,\
                 giantswarm.io/machine-deployment=g3j50,kubernetes.io/role=worker,role=worker,team=blue"
            ),
            "{worker_kubelet}"
        );
        assert!(!worker_kubelet.contains("register-with-taints"));
        let master_kubelet = &master_units["kubelet.service"];
        assert!(master_kubelet.contains("role=master"), "{master_kubelet}");
        assert!(master_kubelet.contains("--register-with-taints=node-role.kubernetes.io/control-plane=:NoSchedule"));
        assert!(master_units["decrypt-tls-assets.service"].contains("Before=kubelet.service etcd3.service"));

        let kubelet_config =
            String::from_utf8(worker_files["/etc/kubernetes/config/kubelet.yaml"].clone()).expect("utf-8");
        assert!(kubelet_config.contains("  - 172.31.0.10\n"), "{kubelet_config}");
    }

    #[test]
    fn workers_format_and_mount_their_volumes_before_the_runtimes_start() {
        let worker_doc = sealed(&worker());
        let master_doc = sealed(&master(0, 1));
        let filesystems = worker_doc["storage"]["filesystems"].as_array().expect("worker filesystems");
        let by_device: BTreeMap<&str, &Value> =
            filesystems.iter().map(|f| (f["device"].as_str().expect("device"), f)).collect();
        let units = units(&worker_doc);
        for (volume, unit_name) in [
            (DOCKER_VOLUME, "var-lib-docker.mount"),
            (KUBELET_VOLUME, "var-lib-kubelet.mount"),
            (LOG_VOLUME, "var-log.mount"),
            (CONTAINERD_VOLUME, "var-lib-containerd.mount"),
        ] {
            let fs = by_device.get(volume.device).unwrap_or_else(|| panic!("{} is not formatted", volume.device));
            assert_eq!((fs["format"].as_str(), fs["label"].as_str()), (Some("xfs"), Some(volume.label)));
            let mount = units.get(unit_name).unwrap_or_else(|| panic!("{unit_name} missing"));
            assert!(mount.contains(&format!("What=/dev/disk/by-label/{}\nWhere={}\n", volume.label, volume.mount)));
            assert!(mount.contains("Before=docker.service containerd.service kubelet.service\n"), "{mount}");
        }
        assert_eq!(filesystems.len(), WORKER_VOLUMES.len());
        // A master's only data volume is etcd's, attached and formatted by its own unit.
        assert!(master_doc["storage"].get("filesystems").is_none());
        assert!(!self::units(&master_doc).contains_key("var-lib-docker.mount"));
    }

    #[test]
    fn kube_proxy_runs_on_every_node_with_the_clusters_conntrack_limit() {
        let config = |input: &NodeConfigInput| {
            String::from_utf8(files(&sealed(input))[KUBE_PROXY_CONFIG].clone()).expect("utf-8")
        };
        let default = config(&worker());
        assert!(default.contains("clusterCIDR: 10.2.0.0/16\n"), "{default}");
        assert!(!default.contains("conntrack"), "kube-proxy's own default when unset: {default}");
        let mut input = worker();
        input.conntrack_max_per_core = Some(131_072);
        assert!(config(&input).contains("conntrack:\n  maxPerCore: 131072\n"));
        input.conntrack_max_per_core = Some(0);
        assert!(config(&input).contains("  maxPerCore: 0\n"), "0 leaves the kernel's limit");
        for doc in [sealed(&worker()), sealed(&master(1, 3))] {
            let manifest =
                String::from_utf8(files(&doc)["/etc/kubernetes/manifests/kube-proxy.yaml"].clone()).expect("utf-8");
            assert!(manifest.contains("image: quay.io/giantswarm/kube-proxy:v1.33.4"), "{manifest}");
            assert!(manifest.contains(&format!("--config={KUBE_PROXY_CONFIG}")), "{manifest}");
            let kubeconfig =
                String::from_utf8(files(&doc)["/etc/kubernetes/kubeconfig/kube-proxy.yaml"].clone()).expect("utf-8");
            assert!(kubeconfig.contains(paths::WORKER_KEY), "kube-proxy uses the node's own client key");
        }
    }

    #[test]
    fn etcd_names_its_initial_cluster_for_one_and_three_masters() {
        let base = "al9qy.k8s.example.com";
        assert_eq!(etcd_initial_cluster(base, 1), "etcd0=https://etcd0.al9qy.k8s.example.com:2380");
        assert_eq!(
            etcd_initial_cluster(base, 3),
            "etcd1=https://etcd1.al9qy.k8s.example.com:2380,\
             etcd2=https://etcd2.al9qy.k8s.example.com:2380,\
             etcd3=https://etcd3.al9qy.k8s.example.com:2380"
        );

        let single = units(&sealed(&master(0, 1)))["etcd3.service"].clone();
        assert!(single.contains("--name=etcd0 "), "{single}");
        assert!(
            single.contains("--initial-cluster=etcd0=https://etcd0.al9qy.k8s.gauss.eu-central-1.aws.gigantic.io:2380 ")
        );
        assert!(single.contains("--initial-cluster-state=new "), "{single}");
        assert!(
            single.contains(
                "--initial-advertise-peer-urls=https://etcd0.al9qy.k8s.gauss.eu-central-1.aws.gigantic.io:2380"
            )
        );
        assert!(single.contains("quay.io/giantswarm/etcd:v3.5.21"), "{single}");

        let mut second = master(2, 3);
        if let Role::Master { initial_cluster_state, .. } = &mut second.role {
            *initial_cluster_state = InitialClusterState::Existing;
        }
        let ha = units(&sealed(&second))["etcd3.service"].clone();
        assert!(ha.contains("--name=etcd2 "), "{ha}");
        assert!(ha.contains(&format!("--initial-cluster={} ", etcd_initial_cluster(&second.base_domain, 3))), "{ha}");
        assert!(ha.contains("--initial-cluster-state=existing "), "{ha}");
    }

    /// The `After=` units of `unit`.
    fn after(unit: &str) -> Vec<String> {
        unit.lines()
            .filter_map(|l| l.strip_prefix("After="))
            .flat_map(|l| l.split_whitespace().map(str::to_owned))
            .collect()
    }

    #[test]
    fn masters_attach_their_etcd_interface_and_volume_before_etcd_starts() {
        let doc = sealed(&master(2, 3));
        let units = units(&doc);
        let files = files(&doc);
        let attach = units.get("etcd3-attach-dependencies.service").expect("attach unit");
        let mount = units.get("var-lib-etcd.mount").expect("etcd volume mount unit");
        let etcd = &units["etcd3.service"];

        // Order: network and docker, then the attachment, then the mount, then etcd.
        for dep in ["docker.service", "network-online.target"] {
            assert!(after(attach).contains(&dep.to_owned()), "{attach}");
        }
        assert!(attach.contains("ExecStart=/opt/bin/etcd3-attach-dependencies\n"), "{attach}");
        assert!(attach.contains("Type=oneshot"), "{attach}");
        assert!(mount.contains("Requires=etcd3-attach-dependencies.service\n"), "{mount}");
        assert_eq!(after(mount), ["etcd3-attach-dependencies.service"], "{mount}");
        assert!(mount.contains("What=/dev/disk/by-label/etcd\nWhere=/var/lib/etcd\n"), "{mount}");
        for dep in ["decrypt-tls-assets.service", "etcd3-attach-dependencies.service", "var-lib-etcd.mount"] {
            assert!(after(etcd).contains(&dep.to_owned()), "etcd does not start after {dep}: {etcd}");
            let requires = etcd.lines().find(|l| l.starts_with("Requires=")).unwrap_or_default();
            assert!(requires.contains(dep), "etcd does not require {dep}: {etcd}");
        }

        // The names looked up are the ones TCCPN tags master 2's interface and volume with.
        let script = String::from_utf8(files["/opt/bin/etcd3-attach-dependencies"].clone()).expect("utf-8");
        assert!(script.contains("eni_name=al9qy-master2-eni\n"), "{script}");
        assert!(script.contains("volume_name=al9qy-master2-etcd\n"), "{script}");
        assert!(script.contains(r#"--filters "Name=tag:Name,Values=$eni_name""#), "{script}");
        assert!(script.contains(r#"--filters "Name=tag:Name,Values=$volume_name""#), "{script}");
        assert!(script.contains("attach-network-interface") && script.contains("--device-index 1"), "{script}");
        assert!(script.contains("attach-volume") && script.contains("ec2_device=/dev/xvdh\n"), "{script}");
        assert!(script.contains(r#""$root/opt/bin/aws" --region eu-central-1"#), "{script}");
        assert!(!script.contains("docker") && !script.contains("imds=http"), "{script}");
        // Every step retries; the attachments come before the device is used.
        let steps: Vec<&str> = script.lines().filter_map(|l| l.strip_prefix("retry ")).collect();
        assert_eq!(
            steps,
            [
                "find_instance",
                "attach_eni",
                "attach_volume",
                "wait_for_device",
                "prepare_filesystem",
                "configure_eni",
                "wait_for_eni_address",
                "write_env"
            ],
            "{script}"
        );
        assert!(script.contains("sleep 5"), "{script}");
        // The volume is formatted only when it has no filesystem: never over etcd's data.
        assert!(script.contains("2) mkfs.ext4 -L etcd \"$device\" ;;"), "{script}");
        assert_eq!(script.matches("mkfs").count(), 1, "{script}");

        // etcd listens on the interface's address, whatever instance it runs on.
        assert!(etcd.contains("EnvironmentFile=/run/etcd3/network.env\n"), "{etcd}");
        assert!(etcd.contains("--listen-peer-urls=https://${ETCD_ENI_IP}:2380 "), "{etcd}");
        assert!(etcd.contains("--listen-client-urls=https://${ETCD_ENI_IP}:2379,"), "{etcd}");
        assert!(!etcd.contains("0.0.0.0"), "{etcd}");
        assert!(script.contains("ETCD_ENI_IP=%s"), "{script}");

        // Workers have none of it.
        let worker_doc = sealed(&worker());
        assert!(!self::units(&worker_doc).contains_key("etcd3-attach-dependencies.service"));
        assert!(!self::units(&worker_doc).contains_key("var-lib-etcd.mount"));
        assert!(!self::files(&worker_doc).contains_key("/opt/bin/etcd3-attach-dependencies"));
    }

    #[test]
    fn debug_output_never_shows_secrets() {
        let input = master(1, 3);
        let config = render(&input).expect("render");
        for printed in [format!("{input:?}"), format!("{config:?}"), format!("{:?}", config.secrets())] {
            assert!(!printed.contains("secretapikey"), "{printed}");
            assert!(!printed.contains("workerkeysecret"), "{printed}");
            assert!(printed.contains(paths::API_KEY), "paths are fine to show: {printed}");
        }
    }

    #[test]
    fn ha_masters_complete_their_launching_hook_once_healthy_and_a_single_master_does_not() {
        let single = sealed(&master(0, 1));
        assert!(!units(&single).contains_key(LAUNCHING_HOOK_UNIT));
        assert!(!files(&single).contains_key(LAUNCHING_HOOK_SCRIPT));
        assert!(!units(&sealed(&worker())).contains_key(LAUNCHING_HOOK_UNIT));
        for id in 1..=3 {
            let doc = sealed(&master(id, 3));
            let unit = units(&doc).get(LAUNCHING_HOOK_UNIT).cloned().expect("hook unit");
            assert!(unit.contains(&format!("ExecStart={LAUNCHING_HOOK_SCRIPT}\n")), "{unit}");
            assert!(unit.contains("After=network-online.target etcd3.service kubelet.service\n"), "{unit}");
            // The node's values are the script's defaults: the unit overrides nothing.
            assert!(!unit.contains("Environment"), "{unit}");
            // The unit outlives the script's own deadline, which comes before the hook's timeout.
            assert!(unit.contains("TimeoutStartSec=990\n"), "{unit}");
            let script = String::from_utf8(files(&doc)[LAUNCHING_HOOK_SCRIPT].clone()).expect("utf-8");
            for needle in [
                "hook=ControlPlaneLaunching\n",
                "deadline=$((SECONDS + 960))",
                r#"--cacert "$root/etc/kubernetes/ssl/etcd/server-ca.pem" --cert "$root/etc/kubernetes/ssl/etcd/server-crt.pem""#,
                "${ETCD_HEALTH_URL:-https://127.0.0.1:2379/health}",
                "${API_READYZ_URL:-https://127.0.0.1:443/readyz}",
                r#""$aws" autoscaling complete-lifecycle-action"#,
                r#"aws="$root/opt/bin/aws""#,
                "until_deadline healthy\n",
                "${AWS_EC2_METADATA_SERVICE_ENDPOINT:-http://169.254.169.254}",
            ] {
                assert!(script.contains(needle), "{needle} missing:\n{script}");
            }
            // Health comes first: nothing is completed before it passes.
            assert!(script.find("until_deadline healthy\n") < script.find("until_deadline complete\n"), "{script}");
        }
    }

    #[test]
    fn the_scripts_pass_shellcheck() {
        let mut no_secrets = worker();
        no_secrets.secrets.clear();
        for (input, path) in [(master(1, 3), LAUNCHING_HOOK_SCRIPT), (worker(), AWS_WRAPPER)] {
            let files = files(&sealed(&input));
            let dir = tempfile::tempdir().expect("tempdir");
            let script = dir.path().join("script");
            std::fs::write(&script, &files[path]).expect("write script");
            let out = std::process::Command::new("shellcheck").arg(&script).output().expect("run shellcheck");
            assert!(out.status.success(), "{path} fails shellcheck:\n{}", String::from_utf8_lossy(&out.stdout));
        }
    }

    #[test]
    fn the_scripts_parse_as_bash() {
        let mut no_secrets = worker();
        no_secrets.secrets.clear();
        for (input, path) in [
            (master(0, 1), "/opt/bin/decrypt-tls-assets"),
            (no_secrets, "/opt/bin/decrypt-tls-assets"),
            (worker(), "/opt/bin/set-hostname"),
            (master(1, 3), "/opt/bin/etcd3-attach-dependencies"),
            (master(1, 3), LAUNCHING_HOOK_SCRIPT),
            (worker(), AWS_WRAPPER),
        ] {
            let files = files(&sealed(&input));
            let dir = tempfile::tempdir().expect("tempdir");
            let script = dir.path().join("script");
            std::fs::write(&script, &files[path]).expect("write script");
            let status = std::process::Command::new("bash").arg("-n").arg(&script).status().expect("run bash");
            assert!(status.success(), "{path} does not parse:\n{}", String::from_utf8_lossy(&files[path]));
        }
    }

    #[test]
    fn unusable_secret_paths_are_refused() {
        for path in ["relative/key.pem", "/etc/kubernetes/ssl/my key.pem", "/etc/$(reboot).pem", "/", "/etc/ssl/"] {
            let mut input = worker();
            input.secrets[0].path = path.into();
            assert_eq!(
                render(&input).map(drop),
                Err(ignition::IgnitionError::InvalidPath { path: path.into() }.into()),
                "{path}"
            );
        }

        let mut twice = worker();
        twice.secrets[1].path = twice.secrets[0].path.clone();
        assert_eq!(
            render(&twice).map(drop),
            Err(ignition::IgnitionError::DuplicatePath { path: paths::WORKER_KEY.into() }.into())
        );

        let mut clash = worker();
        clash.secrets[0].path = "/opt/bin/decrypt-tls-assets".into();
        assert!(matches!(render(&clash), Err(IgnitionError::Config(ignition::IgnitionError::DuplicatePath { .. }))));
    }
}

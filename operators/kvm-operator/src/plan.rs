//! Pure: every object the cluster controller puts into the management cluster for a
//! KVMConfig, from the objects it reads (its Release, the certificate and encryption-key
//! Secrets, its stored node indexes) — used by `render` on the objects of files, and by the
//! cluster controller on the objects it reads from the API server, so that both build the same.
//!
//! The objects come from `kvm_objects`; this module assembles them in the order the controller
//! applies them ([`ClusterObjects`]) and finds a cluster's Secrets ([`ClusterSecrets`]).

use std::collections::BTreeMap;
use std::path::Path;

use apis::kvm::KVMConfig;
use apis::labels;
use apis::release::{Release, release_name};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, PersistentVolumeClaim, Secret, Service, ServiceAccount};
use k8s_openapi::api::networking::v1::Ingress;
use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleBinding};
use kube::ResourceExt;
use kvm_objects::cluster::{Cluster, InputError};
use kvm_objects::ignition::{
    EncryptionKey, MASTER_CERTS, NodeConfigError, NodeConfigInput, TlsAsset, WORKER_CERTS, node_secret, render,
};
use kvm_objects::node_index::allocate;

use crate::config::OperatorConfig;

/// The label of a cert-operator Secret naming its certificate (`api`, `etcd`, `worker`, …).
pub const CERTIFICATE_LABEL: &str = node_lifecycle::clients::CERTIFICATE_LABEL;
/// The label of the randomkeys Secret; value [`ENCRYPTION`].
pub const RANDOMKEY_LABEL: &str = "giantswarm.io/randomkey";
/// The randomkey (label value and data key) of the API server's encryption key.
pub const ENCRYPTION: &str = "encryption";

/// Why `render` cannot print a cluster. Each names the file or object and the fix.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// A file could not be read.
    #[error("reading {path}: {message}")]
    Read {
        /// The file.
        path: String,
        /// The I/O error.
        message: String,
    },
    /// A file or one of its documents could not be parsed.
    #[error("{path}: {message}")]
    Parse {
        /// The file.
        path: String,
        /// What is wrong, naming the document.
        message: String,
    },
    /// The files hold no KVMConfig.
    #[error("no KVMConfig (provider.giantswarm.io) in the given files: add the cluster's objects")]
    NoClusters,
    /// A KVMConfig's Release is not among the files.
    #[error(
        "KVMConfig {object}: label {} names Release {release}, which is not in the given files: add it or fix the label",
        labels::RELEASE_VERSION
    )]
    ReleaseNotFound {
        /// `namespace/name` of the KVMConfig.
        object: String,
        /// The Release's name.
        release: String,
    },
    /// The KVMConfig (or its Release) is invalid, as the controller would report it.
    #[error(transparent)]
    Input(#[from] InputError),
    /// A node config cannot be rendered, or fails its checks.
    #[error(transparent)]
    NodeConfig(#[from] BuildError),
}

/// Why [`build`] makes no objects: a node config that cannot be rendered, or one that fails
/// the checks every node config passes ([`node_verify::verify`]). Either way nothing is applied.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// A node config cannot be rendered.
    #[error(transparent)]
    Render(#[from] NodeConfigError),
    /// A rendered node config fails its checks.
    #[error(transparent)]
    Invalid(#[from] node_verify::Invalid),
}

/// The reason of `Ready=False` and of the Warning event when [`build`] fails.
pub const NODE_CONFIG_INVALID: &str = "NodeConfigInvalid";

/// The objects of a set of CR files that matter here; every other kind is skipped.
#[derive(Debug, Clone, Default)]
pub struct Objects {
    /// `KVMConfig`s (`provider.giantswarm.io`).
    pub configs: Vec<KVMConfig>,
    /// `Release`s (`release.giantswarm.io`).
    pub releases: Vec<Release>,
    /// `Secret`s: the certificate and encryption-key Secrets are looked for among them.
    pub secrets: Vec<Secret>,
}

impl Objects {
    /// Add the objects of one file's text (multi-document YAML or JSON).
    pub fn add_yaml(&mut self, text: &str, source: &Path) -> Result<(), PlanError> {
        let path = source.display().to_string();
        let documents: Vec<serde_json::Value> = serde_saphyr::from_multiple(text)
            .map_err(|e| PlanError::Parse { path: path.clone(), message: format!("not valid YAML: {e}") })?;
        for (index, document) in documents.into_iter().enumerate() {
            if document.is_null() {
                continue;
            }
            let api_version = document.get("apiVersion").and_then(|v| v.as_str()).unwrap_or_default().to_string();
            let kind = document.get("kind").and_then(|v| v.as_str()).unwrap_or_default().to_string();
            let decode = |document| PlanError::Parse {
                path: path.clone(),
                message: format!("document {} ({kind}): {document}", index + 1),
            };
            match (api_version.split_once('/').map(|(g, _)| g).unwrap_or_default(), kind.as_str()) {
                ("provider.giantswarm.io", "KVMConfig") => {
                    self.configs.push(serde_json::from_value(document).map_err(decode)?)
                }
                ("release.giantswarm.io", "Release") => {
                    self.releases.push(serde_json::from_value(document).map_err(decode)?)
                }
                ("", "Secret") if api_version == "v1" => {
                    self.secrets.push(serde_json::from_value(document).map_err(decode)?)
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// A cluster's certificates and encryption key, found among Secrets by their labels
/// (`giantswarm.io/cluster=<id>` and `giantswarm.io/certificate=<name>` with keys `ca`, `crt`,
/// `key`; `giantswarm.io/randomkey=encryption` with key `encryption`). Its `Debug` prints no key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterSecrets {
    /// The certificates by name.
    pub certs: BTreeMap<String, TlsAsset>,
    /// The API server's encryption key.
    pub encryption_key: Option<EncryptionKey>,
}

impl ClusterSecrets {
    /// The Secrets of cluster `id` among `secrets`. A certificate Secret without all three keys
    /// counts as missing, so that the error names it.
    pub fn find(secrets: &[Secret], id: &str) -> Self {
        let mut found = Self::default();
        for secret in secrets.iter().filter(|s| s.labels().get(labels::CLUSTER).map(String::as_str) == Some(id)) {
            let data = secret.data.clone().unwrap_or_default();
            let bytes = |key: &str| data.get(key).map(|b| b.0.clone()).filter(|b| !b.is_empty());
            if let Some(cert) = secret.labels().get(CERTIFICATE_LABEL)
                && let (Some(ca), Some(crt), Some(key)) = (bytes("ca"), bytes("crt"), bytes("key"))
            {
                found.certs.insert(cert.clone(), TlsAsset { ca, crt, key });
            }
            if secret.labels().get(RANDOMKEY_LABEL).map(String::as_str) == Some(ENCRYPTION)
                && let Some(key) = bytes(ENCRYPTION).and_then(|b| String::from_utf8(b).ok())
            {
                found.encryption_key = Some(EncryptionKey::from_base64(key.trim()));
            }
        }
        found
    }
}

/// The Release component versions by name.
pub fn components(release: &Release) -> BTreeMap<String, String> {
    release.spec.components.iter().map(|c| (c.name.clone(), c.version.clone())).collect()
}

/// Everything the cluster controller applies for a cluster, in the order it applies them.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterObjects {
    /// Namespace `<id>`.
    pub namespace: Namespace,
    /// ServiceAccount `<id>/<id>`.
    pub service_account: ServiceAccount,
    /// ClusterRoleBindings `<id>` and `<id>-psp`.
    pub bindings: [ClusterRoleBinding; 2],
    /// The operator's own RoleBinding in namespace `<id>`, when it runs with a workload role
    /// ([`kvm_objects::access::OperatorAccess`]).
    pub operator_binding: Option<RoleBinding>,
    /// One node-config Secret per node, masters first.
    pub node_secrets: Vec<Secret>,
    /// The masters' etcd PVCs. The controller adds the workers' host-volume PVCs, which are
    /// sized by PersistentVolumes of the management cluster
    /// ([`kvm_objects::deployment::host_volume_pvcs`]).
    pub pvcs: Vec<PersistentVolumeClaim>,
    /// One Deployment per node, masters first.
    pub deployments: Vec<Deployment>,
    /// `master` and `worker`.
    pub services: Vec<Service>,
    /// `api` and `etcd`.
    pub ingresses: Vec<Ingress>,
}

/// The pure checks every node config passes before it is applied ([`node_verify::verify`]).
pub fn verify_node_config(node: &str, config: &ignition::Config) -> Result<(), BuildError> {
    Ok(node_verify::verify(node, &config.to_json())?)
}

/// What the cluster controller records when [`build`] fails: `Ready=False` with reason
/// [`NODE_CONFIG_INVALID`] and a Warning event, naming `object` and then the node, each file or
/// unit and each problem.
pub fn refusal(object: String, e: &BuildError) -> operatorkit::error::InvalidInput {
    let message = match e {
        BuildError::Render(e) => e.to_string(),
        BuildError::Invalid(e) => format!("{e}; nothing is applied and no node is replaced until every config passes"),
    };
    operatorkit::error::InvalidInput { object, reason: NODE_CONFIG_INVALID, message }
}

/// Build every object of `cluster`, its node configs from `secrets` and `indexes` (which must
/// hold every node: [`allocate`] first). Every node config is verified
/// ([`node_verify::verify`]) before any object is returned, so a config that fails is never
/// applied and the nodes already running keep theirs.
pub fn build(
    cluster: &Cluster,
    indexes: &BTreeMap<String, i64>,
    secrets: &ClusterSecrets,
    config: &OperatorConfig,
) -> Result<ClusterObjects, BuildError> {
    let node_secrets = cluster
        .nodes
        .iter()
        .map(|node| {
            let input = NodeConfigInput {
                cluster,
                node,
                node_indexes: indexes,
                certs: &secrets.certs,
                encryption_key: secrets.encryption_key.as_ref(),
                settings: &config.node_config,
            };
            let node_config = render(&input)?;
            verify_node_config(&node.id, &node_config)?;
            Ok(node_secret(cluster, node, &node_config))
        })
        .collect::<Result<_, BuildError>>()?;
    let desired = kvm_objects::desired(cluster);
    Ok(ClusterObjects {
        namespace: kvm_objects::access::namespace(cluster),
        service_account: kvm_objects::access::service_account(cluster),
        bindings: kvm_objects::access::cluster_role_bindings(cluster, &config.roles),
        operator_binding: config.access.as_ref().map(|a| kvm_objects::access::operator_role_binding(&cluster.id, a)),
        node_secrets,
        pvcs: desired.etcd_pvcs,
        deployments: desired.deployments,
        services: desired.services,
        ingresses: desired.ingresses,
    })
}

/// What `render` prints for one KVMConfig.
#[derive(Debug, Clone)]
pub struct ClusterPlan {
    /// The cluster id.
    pub cluster: String,
    /// The Release's name.
    pub release: String,
    /// The Release's `kvm-operator` component, if any.
    pub release_operator: Option<String>,
    /// The node indexes: the stored ones, completed as the controller would.
    pub node_indexes: BTreeMap<String, i64>,
    /// Certificates (and `encryption`) that were not in the files and were replaced by
    /// placeholders.
    pub placeholders: Vec<String>,
    /// Host-volume PVCs, which are sized by their PersistentVolumes at run time and not printed.
    pub host_volume_pvcs: Vec<String>,
    /// The objects.
    pub objects: ClusterObjects,
}

impl ClusterPlan {
    /// A warning when the Release routes this cluster to another kvm-operator version.
    pub fn version_warning(&self, version: &str) -> Option<String> {
        match self.release_operator.as_deref() {
            Some(v) if v == version => None,
            Some(v) => Some(format!(
                "Release {} names kvm-operator {v}: kvm-operator {version} would not reconcile cluster {}",
                self.release, self.cluster
            )),
            None => Some(format!(
                "Release {} has no kvm-operator component: no kvm-operator would reconcile cluster {}",
                self.release, self.cluster
            )),
        }
    }
}

/// The placeholder of a certificate that is not in the files: recognisable, never a real key.
fn placeholder(cert: &str) -> TlsAsset {
    let text =
        |part: &str| format!("placeholder: the {part} of certificate {cert}, read from its Secret at run time\n");
    TlsAsset { ca: text("CA").into_bytes(), crt: text("certificate").into_bytes(), key: text("key").into_bytes() }
}

/// The plan of every KVMConfig among `objects`, in file order. Certificates and the encryption
/// key not in the files are replaced by placeholders, and listed.
pub fn plan(objects: &Objects, config: &OperatorConfig) -> Result<Vec<ClusterPlan>, PlanError> {
    if objects.configs.is_empty() {
        return Err(PlanError::NoClusters);
    }
    objects.configs.iter().map(|kvm| plan_cluster(objects, kvm, config)).collect()
}

fn plan_cluster(objects: &Objects, kvm: &KVMConfig, config: &OperatorConfig) -> Result<ClusterPlan, PlanError> {
    let object = format!("{}/{}", kvm.namespace().unwrap_or_default(), kvm.name_any());
    let Some(label) = kvm.labels().get(labels::RELEASE_VERSION).filter(|v| !v.is_empty()) else {
        return Err(InputError::MissingLabel {
            name: kvm.name_any(),
            label: labels::RELEASE_VERSION,
            what: "release the cluster runs",
        }
        .into());
    };
    let release_name = release_name(label);
    let release = objects
        .releases
        .iter()
        .find(|r| r.name_any() == release_name)
        .ok_or_else(|| PlanError::ReleaseNotFound { object, release: release_name.clone() })?;
    let cluster = Cluster::new(kvm, &release_name, &components(release), &config.settings)?;
    let ids: Vec<&str> = cluster.nodes.iter().map(|n| n.id.as_str()).collect();
    let node_indexes = allocate(&kvm.node_indexes(), &ids).indexes;

    let mut secrets = ClusterSecrets::find(&objects.secrets, &cluster.id);
    let mut placeholders = Vec::new();
    for cert in MASTER_CERTS.iter().chain(&WORKER_CERTS) {
        if !secrets.certs.contains_key(*cert) {
            secrets.certs.insert(cert.to_string(), placeholder(cert));
            placeholders.push(cert.to_string());
        }
    }
    placeholders.sort();
    placeholders.dedup();
    if secrets.encryption_key.is_none() {
        secrets.encryption_key = Some(EncryptionKey::from_base64("placeholder-read-from-the-randomkey-secret"));
        placeholders.push(ENCRYPTION.to_string());
    }
    let host_volume_pvcs = cluster
        .nodes
        .iter()
        .flat_map(|n| {
            n.shape.host_volumes.iter().map(|v| kvm_objects::names::host_volume_pvc(&cluster.id, &n.id, &v.mount_tag))
        })
        .collect();
    let objects = build(&cluster, &node_indexes, &secrets, config)?;
    Ok(ClusterPlan {
        cluster: cluster.id.clone(),
        release: release_name,
        release_operator: release.component_version("kvm-operator").map(str::to_string),
        node_indexes,
        placeholders,
        host_volume_pvcs,
        objects,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kvm_objects::cluster::Role;
    use kvm_objects::ignition::NodeConfigSettings;
    use kvm_objects::node_index::allocate;

    const FIXTURE: &str = include_str!("../../../crates/apis/tests/fixtures/kvmconfig-qz7lt.yaml");

    fn first_master_config() -> (String, ignition::Config) {
        let kvm: KVMConfig = serde_saphyr::from_str(FIXTURE).unwrap_or_else(|e| panic!("{e}"));
        let components = BTreeMap::from([
            ("containerlinux".to_string(), "3815.2.5".to_string()),
            ("kubernetes".to_string(), "1.29.9".to_string()),
            ("etcd".to_string(), "3.5.13".to_string()),
        ]);
        let settings = kvm_objects::cluster::Settings {
            operator_version: "4.0.0".into(),
            dns_servers: vec!["10.99.0.53".into()],
            ntp_servers: vec![],
            images: Default::default(),
        };
        let cluster = Cluster::new(&kvm, "v20.1.0", &components, &settings).unwrap_or_else(|e| panic!("{e}"));
        let ids: Vec<&str> = cluster.nodes.iter().map(|n| n.id.as_str()).collect();
        let indexes = allocate(&BTreeMap::new(), &ids).indexes;
        let certs = MASTER_CERTS.iter().map(|c| (c.to_string(), placeholder(c))).collect();
        let key = EncryptionKey::from_base64("a2V5");
        let node = cluster.nodes.iter().find(|n| n.role == Role::Master).unwrap_or_else(|| panic!("a master"));
        let input = NodeConfigInput {
            cluster: &cluster,
            node,
            node_indexes: &indexes,
            certs: &certs,
            encryption_key: Some(&key),
            settings: &NodeConfigSettings::default(),
        };
        (node.id.clone(), render(&input).unwrap_or_else(|e| panic!("{e}")))
    }

    #[test]
    fn a_rendered_config_passes_the_step() {
        let (node, config) = first_master_config();
        verify_node_config(&node, &config).unwrap_or_else(|e| panic!("{e}"));
    }

    /// No field of a KVMConfig or Release makes a config fail a check (the checks are what the
    /// renderer is tested against), so the step is proven on a rendered config broken by hand.
    #[test]
    fn a_config_that_fails_a_check_is_refused_naming_the_node_the_file_and_the_problem() {
        let (node, mut config) = first_master_config();
        let kubelet = config
            .files
            .iter_mut()
            .find(|f| f.path == ignition::kubernetes::KUBELET_CONFIG)
            .unwrap_or_else(|| panic!("kubelet's config"));
        kubelet.contents = String::from_utf8_lossy(&kubelet.contents).replace("clientCAFile:", "clientCaFile:").into();
        let err = verify_node_config(&node, &config).expect_err("an unknown field fails the check");
        let refused = refusal("KVMConfig default/qz7lt".into(), &err);
        assert_eq!(refused.reason, "NodeConfigInvalid");
        assert_eq!(
            refused.message,
            format!(
                "the node config of {node} fails its checks: node {node}: /etc/kubernetes/config/kubelet.yaml: \
                 KubeletConfiguration of Kubernetes v1.29.9: unknown field authentication.x509.clientCaFile \
                 (ComponentConfig); nothing is applied and no node is replaced until every config passes"
            )
        );
    }
}

//! The typed input every builder reads: a validated [`KVMConfig`], the versions of its Release
//! and the operator's own settings, checked once ([`Cluster::new`]) so that no builder has to
//! deal with a half-valid object.
//!
//! The original zipped `spec.cluster.masters` with `spec.kvm.masters` by position and crashed on
//! a length mismatch (reference §14.1); here a mismatch is a [`InputError::Invalid`] naming the
//! field, and the pairing happens once, into [`Node`]s.

use std::collections::BTreeMap;
use std::fmt;

use apis::kvm::{KVMConfig, KVMConfigSpecKVMNode, StorageType};
use apis::labels;
use apis::validation::FieldError;

/// A node's role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    /// A control-plane node: etcd and the API server.
    Master,
    /// A worker node.
    Worker,
}

impl Role {
    /// `master` or `worker`: the `app` label, the name prefix, the MC node label `role`.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Master => "master",
            Role::Worker => "worker",
        }
    }

    /// The role of a name or label value.
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "master" => Some(Role::Master),
            "worker" => Some(Role::Worker),
            _ => None,
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One workload-cluster node: its id and VM shape.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// Master or worker.
    pub role: Role,
    /// The node id, stable across rollouts.
    pub id: String,
    /// The VM shape from `spec.kvm.<role>s[position]`.
    pub shape: KVMConfigSpecKVMNode,
}

/// A release component version the node pods are annotated with (reference §5.2).
pub const ANNOTATED_COMPONENTS: [&str; 4] = ["calico", "containerlinux", "etcd", "kubernetes"];

/// The operator's settings that shape the node pods (its flags and its own version).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settings {
    /// The version of the running operator: the version labels and annotations of the
    /// Deployments, pods and PVCs it writes. Not the KVMConfig's
    /// `kvm-operator.giantswarm.io/version` label, which anyone may set to anything; the objects
    /// say which operator wrote them.
    pub operator_version: String,
    /// DNS servers of the VMs (`DNS_SERVERS`); at least one.
    pub dns_servers: Vec<String>,
    /// NTP servers of the VMs (`NTP_SERVERS`).
    pub ntp_servers: Vec<String>,
    /// The images of the node pods' containers.
    pub images: crate::deployment::NodePodImages,
}

/// A validated cluster: everything the builders need.
#[derive(Debug, Clone, PartialEq)]
pub struct Cluster {
    /// The cluster id: namespace and name prefix.
    pub id: String,
    /// The KVMConfig's UID: the namespace `<id>`, its ServiceAccount and the ClusterRoleBindings
    /// carry it, and nothing is deleted without it ([`apis::cluster_id`]).
    pub owner_uid: String,
    /// The customer (organization) id.
    pub customer: String,
    /// The workload cluster's API host.
    pub api_domain: String,
    /// The workload cluster's etcd host.
    pub etcd_domain: String,
    /// The API server's port.
    pub api_port: i32,
    /// The flannel VNI (it picks the node pods' host ports).
    pub vni: i64,
    /// Where masters keep etcd's data.
    pub storage: StorageType,
    /// The running operator's version ([`Settings::operator_version`]).
    pub operator_version: String,
    /// The release version (label `release.giantswarm.io/version`).
    pub release_version: String,
    /// The Release's component versions by name; `containerlinux` is always present.
    pub components: BTreeMap<String, String>,
    /// Masters first, then workers, each in the order of the spec.
    pub nodes: Vec<Node>,
    /// The `worker` Service's port mappings, as in the spec.
    pub port_mappings: Vec<apis::kvm::KVMConfigSpecKVMPortMapping>,
    /// Users who may log in to the nodes over SSH.
    pub ssh_users: Vec<apis::kvm::ClusterKubernetesSSHUser>,
    /// The operator's settings.
    pub settings: Settings,
    /// The Service CIDR, `spec.cluster.kubernetes.api.clusterIPRange`.
    pub service_cidr: String,
    /// The cluster DNS address, `spec.cluster.kubernetes.dns.ip`.
    pub cluster_dns_ip: String,
    /// The pod CIDR, `spec.cluster.calico.subnet`/`cidr`.
    pub pod_cidr: String,
}

/// Why a cluster's objects cannot be built. Every variant names what to fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InputError {
    /// The spec has problems (see [`KVMConfig::validate`]).
    #[error("KVMConfig {name} is invalid: {}", .errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Invalid {
        /// The object's name.
        name: String,
        /// Every problem.
        errors: Vec<FieldError>,
    },
    /// A required label is missing or empty.
    #[error("KVMConfig {name} has no {label} label; set it to the {what}")]
    MissingLabel {
        /// The object's name.
        name: String,
        /// The label.
        label: &'static str,
        /// What its value is.
        what: &'static str,
    },
    /// The Release does not name a component the nodes need.
    #[error("Release {release} has no {component} component; add it to spec.components")]
    MissingComponent {
        /// The Release's name.
        release: String,
        /// The component.
        component: &'static str,
    },
    /// A field the node configs need is empty.
    #[error("KVMConfig {name} has no {field}; set it to {what}")]
    MissingField {
        /// The object's name.
        name: String,
        /// The field's path.
        field: &'static str,
        /// What its value is.
        what: &'static str,
    },
    /// The operator has no DNS servers for the VMs.
    #[error("no DNS servers are configured for the VMs; set the operator's DNS servers")]
    NoDnsServers,
}

impl InputError {
    /// What is wrong and the fix, without naming the KVMConfig: for messages that name it
    /// already (a condition on it, an event about it).
    pub fn detail(&self) -> String {
        match self {
            InputError::Invalid { errors, .. } => errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "),
            InputError::MissingLabel { label, what, .. } => format!("label {label} is missing: set it to the {what}"),
            InputError::MissingField { field, what, .. } => format!("{field} is empty: set it to {what}"),
            InputError::MissingComponent { .. } | InputError::NoDnsServers => self.to_string(),
        }
    }
}

impl Cluster {
    /// Check `config` and pair its node lists. `components` are the component versions of the
    /// Release its `release.giantswarm.io/version` label names (`release` is that Release's
    /// name, for messages).
    pub fn new(
        config: &KVMConfig,
        release: &str,
        components: &BTreeMap<String, String>,
        settings: &Settings,
    ) -> Result<Self, InputError> {
        let name = config.metadata.name.clone().unwrap_or_default();
        config.validate().map_err(|errors| InputError::Invalid { name: name.clone(), errors })?;
        let label = |label: &'static str, what: &'static str| {
            config
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(label))
                .filter(|v| !v.is_empty())
                .cloned()
                .ok_or(InputError::MissingLabel { name: name.clone(), label, what })
        };
        let release_version = label(labels::RELEASE_VERSION, "release the cluster runs")?;
        // No silent fallback versions: the nodes run what the Release names, or nothing.
        for component in ["containerlinux", "kubernetes", "etcd"] {
            if components.get(component).is_none_or(|v| v.is_empty()) {
                return Err(InputError::MissingComponent { release: release.to_string(), component });
            }
        }
        if settings.dns_servers.is_empty() {
            return Err(InputError::NoDnsServers);
        }
        let spec = &config.spec;
        let required = |value: &str, field: &'static str, what: &'static str| {
            if value.is_empty() {
                Err(InputError::MissingField { name: name.clone(), field, what })
            } else {
                Ok(value.to_string())
            }
        };
        let kubernetes = &spec.cluster.kubernetes;
        let service_cidr = required(
            &kubernetes.api.cluster_ip_range,
            "spec.cluster.kubernetes.api.clusterIPRange",
            "the Service CIDR",
        )?;
        let cluster_dns_ip = required(
            &kubernetes.dns.ip,
            "spec.cluster.kubernetes.dns.ip",
            "the cluster DNS address in the Service CIDR",
        )?;
        let pod_subnet =
            required(&spec.cluster.calico.subnet, "spec.cluster.calico.subnet", "the pod network's address")?;
        let pair = |role, ids: &[apis::kvm::ClusterNode], shapes: &[KVMConfigSpecKVMNode]| -> Vec<Node> {
            ids.iter().zip(shapes).map(|(n, s)| Node { role, id: n.id.clone(), shape: s.clone() }).collect()
        };
        let mut nodes = pair(Role::Master, &spec.cluster.masters, &spec.kvm.masters);
        nodes.extend(pair(Role::Worker, &spec.cluster.workers, &spec.kvm.workers));
        Ok(Self {
            id: spec.cluster.id.clone(),
            owner_uid: config.metadata.uid.clone().unwrap_or_default(),
            customer: spec.cluster.customer.id.clone(),
            api_domain: spec.cluster.kubernetes.api.domain.clone(),
            etcd_domain: spec.cluster.etcd.domain.clone(),
            api_port: spec.cluster.kubernetes.api.secure_port as i32,
            vni: spec.kvm.network.flannel.vni,
            storage: spec.kvm.k8s_kvm.storage_type,
            operator_version: settings.operator_version.clone(),
            release_version,
            components: components.clone(),
            nodes,
            port_mappings: spec.kvm.port_mappings.clone(),
            ssh_users: spec.cluster.kubernetes.ssh.user_list.clone(),
            settings: settings.clone(),
            service_cidr,
            cluster_dns_ip,
            pod_cidr: format!("{pod_subnet}/{}", spec.cluster.calico.cidr),
        })
    }

    /// The nodes of one role.
    pub fn nodes(&self, role: Role) -> impl Iterator<Item = &Node> {
        self.nodes.iter().filter(move |n| n.role == role)
    }

    /// The master that runs the cluster's etcd: the first of `spec.cluster.masters`. A cluster
    /// has one etcd member, as the original's (non-HA); its other masters run API servers on
    /// it, through the etcd domain. One etcd per master would be one cluster state per master,
    /// behind one load-balanced API.
    pub fn etcd_master(&self) -> Option<&Node> {
        self.nodes(Role::Master).next()
    }

    /// Whether `node` is [`Cluster::etcd_master`].
    pub fn runs_etcd(&self, node: &Node) -> bool {
        node.role == Role::Master && self.etcd_master().is_some_and(|m| m.id == node.id)
    }

    /// The version of a component of the Release; [`Cluster::new`] checked that `containerlinux`,
    /// `kubernetes` and `etcd` are there.
    pub fn component(&self, name: &str) -> &str {
        self.components.get(name).map(String::as_str).unwrap_or_default()
    }

    /// The Flatcar version of the VMs.
    pub fn containerlinux_version(&self) -> &str {
        self.components.get("containerlinux").map(String::as_str).unwrap_or_default()
    }

    /// The labels every object of the cluster carries (legacy and current spellings).
    pub fn common_labels(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            ("cluster".to_string(), self.id.clone()),
            ("customer".to_string(), self.customer.clone()),
            (labels::CLUSTER.to_string(), self.id.clone()),
            (labels::ORGANIZATION.to_string(), self.customer.clone()),
        ])
    }
}

#[cfg(test)]
pub(crate) mod fixtures {
    //! Shared test fixtures: a cluster `qz7lt` of three masters and two workers, read from the
    //! YAML fixture of `apis`' CRD tests (deliberately unlike any default).
    use super::*;

    pub(crate) const KVMCONFIG: &str = include_str!("../../apis/tests/fixtures/kvmconfig-qz7lt.yaml");

    pub(crate) fn config() -> KVMConfig {
        serde_saphyr::from_str(KVMCONFIG).expect("fixture parses")
    }

    pub(crate) fn components() -> BTreeMap<String, String> {
        BTreeMap::from([
            ("calico".into(), "3.26.4".into()),
            ("containerlinux".into(), "3815.2.5".into()),
            ("etcd".into(), "3.5.13".into()),
            ("kubernetes".into(), "1.29.9".into()),
            ("cert-exporter".into(), "2.9.0".into()),
        ])
    }

    pub(crate) fn settings() -> Settings {
        Settings {
            // Unlike the KVMConfig's label (4.0.0), so that reading the label instead fails.
            operator_version: "4.3.9".into(),
            dns_servers: vec!["10.99.0.53".into(), "10.99.1.53".into()],
            ntp_servers: vec!["10.99.0.123".into()],
            images: Default::default(),
        }
    }

    pub(crate) fn cluster() -> Cluster {
        Cluster::new(&config(), "v20.1.0", &components(), &settings()).expect("valid fixture")
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::*;
    use super::*;

    #[test]
    fn pairs_nodes_by_position_masters_first() {
        let cluster = cluster();
        let ids: Vec<_> = cluster.nodes.iter().map(|n| (n.role, n.id.as_str(), n.shape.cpus)).collect();
        assert_eq!(
            ids,
            [
                (Role::Master, "ma1", 2),
                (Role::Master, "ma2", 2),
                (Role::Master, "ma3", 2),
                (Role::Worker, "wk1", 6),
                (Role::Worker, "wk2", 4)
            ]
        );
        assert_eq!((cluster.operator_version.as_str(), cluster.release_version.as_str()), ("4.3.9", "20.1.0"));
        assert_eq!(cluster.containerlinux_version(), "3815.2.5");
        assert_eq!(cluster.storage, StorageType::PersistentVolume);
    }

    #[test]
    fn bad_input_names_the_fix_instead_of_crashing() {
        let mut config = config();
        config.spec.kvm.workers.pop();
        let error = Cluster::new(&config, "v20.1.0", &components(), &settings()).unwrap_err();
        assert!(error.to_string().starts_with("KVMConfig qz7lt is invalid: spec.kvm.workers: "), "{error}");

        let mut components = components();
        components.remove("containerlinux");
        let error = Cluster::new(&super::fixtures::config(), "v20.1.0", &components, &settings()).unwrap_err();
        assert_eq!(error.to_string(), "Release v20.1.0 has no containerlinux component; add it to spec.components");
        let mut components = super::fixtures::components();
        components.remove("etcd");
        let error = Cluster::new(&super::fixtures::config(), "v20.1.0", &components, &settings()).unwrap_err();
        assert_eq!(error.to_string(), "Release v20.1.0 has no etcd component; add it to spec.components");

        let mut no_dns = super::fixtures::config();
        no_dns.spec.cluster.kubernetes.dns.ip = String::new();
        let error = Cluster::new(&no_dns, "v20.1.0", &super::fixtures::components(), &settings()).unwrap_err();
        assert_eq!(
            error.to_string(),
            "KVMConfig qz7lt has no spec.cluster.kubernetes.dns.ip; set it to the cluster DNS address in the Service CIDR"
        );

        let mut unlabelled = super::fixtures::config();
        unlabelled.metadata.labels.as_mut().map(|l| l.remove(labels::RELEASE_VERSION));
        let error = Cluster::new(&unlabelled, "v20.1.0", &super::fixtures::components(), &settings()).unwrap_err();
        assert!(matches!(error, InputError::MissingLabel { label: labels::RELEASE_VERSION, .. }), "{error}");

        let error =
            Cluster::new(&super::fixtures::config(), "v20.1.0", &super::fixtures::components(), &Settings::default())
                .unwrap_err();
        assert_eq!(error, InputError::NoDnsServers);
    }
}

//! The pure planner behind `aws-operator render`: from the objects of CR files and the settings
//! the operator would have, every stack each cluster would get — name, account, tags and
//! template — with the cluster and node-pool CIDRs. Nothing here reads a file or calls AWS or
//! Kubernetes: [`crate::render`] reads the files and the flags and prints what [`plan`] returns,
//! and the tests call [`plan`] on fixtures.
//!
//! The templates are built by the same `aws_stacks` render functions, from parameters assembled
//! the way the controllers assemble them (shared builders such as
//! [`tccp_params`](crate::controllers::cluster::stacks::tccp_params) and
//! [`PoolStacks`](crate::controllers::node_pool::PoolStacks)), and carry the `TemplateHash`
//! output the operator adds before sending.
//!
//! # What cannot be known offline
//!
//! Values that exist only once AWS has created something are flags with placeholder defaults
//! (the account ids, the management VPC's CIDR and route tables) or placeholders that say where
//! the operator reads them: a stack output is rendered as `<output VPCID of cluster-al9qy-tccp>`,
//! the key ARN as `<ARN of KMS key alias/al9qy>`, the management VPC id as
//! `<VPC tagged Name=gauss>`. Without `--ami-file` the image is `ami-<flatcar version>`.
//!
//! # IPAM
//!
//! Cluster and node-pool CIDRs are allocated with [`aws_stacks::ipam::free`] over the objects
//! given: a CIDR already recorded (`status.provider.network.cidr` of an AWSCluster, annotation
//! `machine-deployment.giantswarm.io/subnet` of an AWSMachineDeployment) is kept and reserved,
//! and the others are allocated in the daemon's order: the clusters first (in file order), then
//! each cluster's node pools in name order, from the cluster's NetworkPool or `--ipam-range`.
//! The daemon allocates a node pool only once its cluster has its CIDR and every pool of the
//! cluster whose name sorts before it has one, so for a cluster created from one file both give
//! the same ranges. The subnets that already exist in the tenant account, which the operator
//! reserves too, are unknown here.
//!
//! # Validation
//!
//! The same checks the controllers make before touching AWS — the objects' `validate()`, the
//! cluster label, the Release and its `kubernetes`, `etcd`, `containerlinux` and `aws-operator`
//! components, the NetworkPool — fail the command with a message naming the object, the field and
//! the fix.
//!
//! A Release that names another `aws-operator` version than this binary's is rendered, with a
//! warning (on stderr and as a `# WARNING:` line of the output): the daemon of this version
//! would leave that cluster to the daemon of the version the Release names.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use apis::aws::{AWSCluster, AWSControlPlane, AWSMachineDeployment, NetworkPool};
use apis::labels;
use apis::release::Release;
use aws_stacks::cfn::{MAX_TEMPLATE_BODY_BYTES, Template};
use aws_stacks::ipam::{self, Ipv4Net};
use aws_stacks::names::{self, Account, StackKind};
use aws_stacks::stacks::{self, CpRouteTable, tccp, tccpf, tccpi, tccpn, tcnp, tcnpf};
use aws_stacks::state::TEMPLATE_HASH_OUTPUT;
use kube::ResourceExt;
use serde::de::DeserializeOwned;

use crate::config::{AmiError, AmiMap, OperatorConfig};
use crate::controllers;
use operatorkit::error::InvalidInput;

/// Why nothing (or not everything) could be rendered.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
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
    /// A flag has an unusable value.
    #[error("--{flag} {value}: {message}")]
    Flag {
        /// The flag, without dashes.
        flag: &'static str,
        /// The value given.
        value: String,
        /// What is wrong and how to fix it.
        message: String,
    },
    /// An object is invalid or incomplete, as the controllers would report it.
    #[error(transparent)]
    Invalid(#[from] InvalidInput),
    /// The AMI file has no image for a version and region.
    #[error(transparent)]
    Ami(#[from] AmiError),
    /// The files hold no AWSCluster (nor AWSConfig, for `render`).
    #[error("no AWSCluster (infrastructure.giantswarm.io) in the given files: add the cluster's objects")]
    NoClusters,
    /// `--stack` names no rendered stack.
    #[error("--stack {name}: no such stack; the files give {}", .available.join(", "))]
    UnknownStack {
        /// The name asked for.
        name: String,
        /// The names of every rendered stack.
        available: Vec<String>,
    },
    /// A template is over CloudFormation's inline limit in an account without a bucket.
    #[error(
        "the template of stack {name} is {bytes} bytes, over CloudFormation's {MAX_TEMPLATE_BODY_BYTES}, and the management account has no bucket to upload it to"
    )]
    TooLarge {
        /// The stack.
        name: String,
        /// The compact template size.
        bytes: usize,
    },
}

// ---------------------------------------------------------------------------------------------
// Input objects
// ---------------------------------------------------------------------------------------------

/// The objects read from the files, in file order.
#[derive(Debug, Clone, Default)]
pub struct Objects {
    /// AWSClusters.
    pub clusters: Vec<AWSCluster>,
    /// AWSControlPlanes.
    pub control_planes: Vec<AWSControlPlane>,
    /// AWSMachineDeployments.
    pub machine_deployments: Vec<AWSMachineDeployment>,
    /// NetworkPools.
    pub network_pools: Vec<NetworkPool>,
    /// Releases.
    pub releases: Vec<Release>,
    /// Cluster API `Cluster`s of a fleet (`crate::capi`).
    pub capi_clusters: Vec<apis::capi::Cluster>,
    /// `G8sControlPlane`s of a fleet.
    pub g8s_control_planes: Vec<apis::capi::G8sControlPlane>,
    /// Cluster API `MachineDeployment`s of a fleet.
    pub capi_machine_deployments: Vec<apis::capi::MachineDeployment>,
    /// Legacy `AWSConfig`s (`provider.giantswarm.io`): their stacks are rendered as the legacy
    /// resource set ([`crate::controllers::legacy`]) builds them.
    pub aws_configs: Vec<apis::aws_config::AWSConfig>,
    /// ConfigMaps: a cluster's `<id>-irsa-cloudfront` names the issuer its roles trust.
    pub config_maps: Vec<k8s_openapi::api::core::v1::ConfigMap>,
}

impl Objects {
    /// Parse a multi-document YAML text and add the objects of the kinds read here; `source`
    /// names the text in errors.
    pub fn add_yaml(&mut self, text: &str, source: &Path) -> Result<(), RenderError> {
        let path = source.display().to_string();
        let documents: Vec<serde_json::Value> = serde_saphyr::from_multiple(text)
            .map_err(|e| RenderError::Parse { path: path.clone(), message: format!("not valid YAML: {e}") })?;
        // `kubectl get` of several objects prints one `v1` `List`: its items count as documents.
        let documents = documents.into_iter().flat_map(|d| match (d.get("apiVersion"), d.get("kind")) {
            (Some(v), Some(k)) if v == "v1" && k == "List" => {
                d.get("items").and_then(|i| i.as_array()).cloned().unwrap_or_default()
            }
            _ => vec![d],
        });
        for (index, document) in documents.enumerate() {
            if document.is_null() {
                continue;
            }
            let api_version = document.get("apiVersion").and_then(|v| v.as_str()).unwrap_or_default().to_string();
            let group = api_version.split_once('/').map(|(g, _)| g);
            let kind = document.get("kind").and_then(|v| v.as_str()).unwrap_or_default().to_string();
            let at = Location { path: &path, index: index + 1, kind: &kind };
            match (group, kind.as_str()) {
                (Some("infrastructure.giantswarm.io"), "AWSCluster") => self.clusters.push(at.decode(document)?),
                (Some("infrastructure.giantswarm.io"), "AWSControlPlane") => {
                    self.control_planes.push(at.decode(document)?)
                }
                (Some("infrastructure.giantswarm.io"), "AWSMachineDeployment") => {
                    self.machine_deployments.push(at.decode(document)?)
                }
                (Some("infrastructure.giantswarm.io"), "NetworkPool") => self.network_pools.push(at.decode(document)?),
                (Some("release.giantswarm.io"), "Release") => self.releases.push(at.decode(document)?),
                (Some("cluster.x-k8s.io"), "Cluster") => self.capi_clusters.push(at.decode(document)?),
                (Some("cluster.x-k8s.io"), "MachineDeployment") => {
                    self.capi_machine_deployments.push(at.decode(document)?)
                }
                (Some("infrastructure.giantswarm.io"), "G8sControlPlane") => {
                    self.g8s_control_planes.push(at.decode(document)?)
                }
                (Some("provider.giantswarm.io"), "AWSConfig") => self.aws_configs.push(at.decode(document)?),
                (None, "ConfigMap") if api_version == "v1" => self.config_maps.push(at.decode(document)?),
                _ => {}
            }
        }
        Ok(())
    }

    /// The Cluster API `Cluster` of `cluster` (same namespace and name), checked as the daemon
    /// checks it (`crate::capi::cluster_of`).
    fn capi_cluster_of(&self, cluster: &AWSCluster) -> Result<Option<&apis::capi::Cluster>, InvalidInput> {
        let capi = self.capi_clusters.iter().find(|c| same_place(*c, cluster));
        if let Some(Err(errors)) = capi.map(apis::capi::Cluster::validate) {
            return Err(operatorkit::error::field_errors(capi.expect("found"), errors));
        }
        Ok(capi)
    }

    /// The `G8sControlPlane` of `cp`, labelled with its cluster and control plane (the one named
    /// like it first), checked (`crate::capi::g8s_control_plane_of`).
    fn g8s_of(&self, cp: &AWSControlPlane, id: &str) -> Result<Option<&apis::capi::G8sControlPlane>, InvalidInput> {
        let mut found: Vec<&apis::capi::G8sControlPlane> = self
            .g8s_control_planes
            .iter()
            .filter(|g| g.namespace() == cp.namespace())
            .filter(|g| g.labels().get(labels::CLUSTER).map(String::as_str) == Some(id))
            .filter(|g| g.labels().get(labels::CONTROL_PLANE) == Some(&cp.name_any()))
            .collect();
        found.sort_by_key(|g| (g.name_any() != cp.name_any(), g.name_any()));
        match found.first() {
            Some(g) => match g.replicas() {
                Ok(_) => Ok(Some(*g)),
                Err(e) => Err(operatorkit::error::field_errors(*g, vec![e])),
            },
            None => Ok(None),
        }
    }

    /// The Cluster API `MachineDeployment`s of node pool `md` of cluster `id`, by their labels.
    fn capi_machine_deployments_of(&self, md: &AWSMachineDeployment, id: &str) -> Vec<apis::capi::MachineDeployment> {
        self.capi_machine_deployments
            .iter()
            .filter(|m| m.namespace() == md.namespace())
            .filter(|m| m.labels().get(labels::CLUSTER).map(String::as_str) == Some(id))
            .filter(|m| m.labels().get(labels::MACHINE_DEPLOYMENT) == Some(&md.name_any()))
            .cloned()
            .collect()
    }

    fn control_planes_of<'a>(&'a self, cluster: &'a AWSCluster) -> impl Iterator<Item = &'a AWSControlPlane> {
        self.control_planes.iter().filter(move |o| belongs_to(*o, cluster))
    }

    fn node_pools_of<'a>(&'a self, cluster: &'a AWSCluster) -> impl Iterator<Item = &'a AWSMachineDeployment> {
        self.machine_deployments.iter().filter(move |o| belongs_to(*o, cluster))
    }

    /// The AWSCluster of a control plane or node pool: same namespace, named by the cluster
    /// label (as `controllers::lookup::cluster_of` finds it).
    fn cluster_of<K: kube::Resource<DynamicType = ()>>(&self, obj: &K) -> Result<&AWSCluster, InvalidInput> {
        let id = controllers::lookup::cluster_id(obj)?;
        let ns = obj.namespace().unwrap_or_default();
        self.clusters.iter().find(|c| c.name_any() == id && c.namespace().unwrap_or_default() == ns).ok_or_else(|| {
            InvalidInput {
                object: controllers::status::describe(obj),
                reason: "ClusterNotFound",
                message: format!(
                    "label {} names AWSCluster {ns}/{id}, which is not in the given files: add it or fix the label",
                    labels::CLUSTER
                ),
            }
        })
    }

    /// The Release named by an object's version label, with the components the operator needs
    /// (the checks and messages of `controllers::lookup::release_of`).
    fn release_of<K: kube::Resource<DynamicType = ()>>(&self, obj: &K) -> Result<&Release, InvalidInput> {
        let Some(version) = obj.labels().get(labels::RELEASE_VERSION) else {
            return Err(InvalidInput {
                object: controllers::status::describe(obj),
                reason: "MissingReleaseLabel",
                message: format!(
                    "label {} is missing: set it to the release the cluster runs",
                    labels::RELEASE_VERSION
                ),
            });
        };
        let Some(release) = self.releases.iter().find(|r| r.name_any() == format!("v{version}")) else {
            return Err(InvalidInput {
                object: controllers::status::describe(obj),
                reason: "ReleaseNotFound",
                message: format!(
                    "Release v{version} is not in the given files: add its file or fix label {}",
                    labels::RELEASE_VERSION
                ),
            });
        };
        controllers::lookup::check_components(obj, version, release)?;
        Ok(release)
    }
}

/// Where a document came from, for parse errors.
struct Location<'a> {
    path: &'a str,
    index: usize,
    kind: &'a str,
}

impl Location<'_> {
    fn decode<T: DeserializeOwned>(&self, document: serde_json::Value) -> Result<T, RenderError> {
        let name = document.pointer("/metadata/name").and_then(|v| v.as_str()).unwrap_or("<unnamed>").to_string();
        serde_json::from_value(document).map_err(|e| RenderError::Parse {
            path: self.path.to_string(),
            message: format!("document {} ({} {name}): {e}", self.index, self.kind),
        })
    }
}

/// Whether `a` and `b` have the same namespace and name.
fn same_place<A: kube::Resource, B: kube::Resource>(a: &A, b: &B) -> bool {
    a.meta().name == b.meta().name && a.meta().namespace == b.meta().namespace
}

fn belongs_to<K: kube::Resource<DynamicType = ()>>(obj: &K, cluster: &AWSCluster) -> bool {
    obj.labels().get(labels::CLUSTER).map(String::as_str) == Some(cluster.name_any().as_str())
        && obj.namespace() == cluster.namespace()
}

// ---------------------------------------------------------------------------------------------
// Settings
// ---------------------------------------------------------------------------------------------

/// What the operator would know from its flags and from AWS, for rendering.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The operator settings the controllers read (version, installation, IPAM, Route53).
    pub config: OperatorConfig,
    /// The tenant account id.
    pub tenant_account_id: String,
    /// The management-cluster account id.
    pub control_plane_account_id: String,
    /// AMIs; `None` renders `ami-<flatcar version>`.
    pub amis: Option<AmiMap>,
    /// The management VPC's CIDR; `None` renders a placeholder.
    pub control_plane_vpc_cidr: Option<String>,
    /// The management VPC's route tables to route into the cluster.
    pub route_tables: Vec<CpRouteTable>,
}

impl Settings {
    fn ami(&self, flatcar: &str, region: &str) -> Result<String, AmiError> {
        match &self.amis {
            Some(amis) => amis.lookup(flatcar, region),
            None => Ok(format!("ami-{flatcar}")),
        }
    }

    /// The management VPC's id, CIDR and route tables, as the cluster controller looks them up.
    fn control_plane_network(&self) -> (String, String, Vec<CpRouteTable>) {
        let vpc = format!("VPC tagged Name={}", self.config.installation);
        let cidr = self.control_plane_vpc_cidr.clone().unwrap_or_else(|| format!("<CIDR of {vpc}>"));
        let tables = if self.route_tables.is_empty() {
            let table = format!("<route table of {vpc}>");
            vec![CpRouteTable { id: table.clone(), name: table }]
        } else {
            self.route_tables.clone()
        };
        (format!("<{vpc}>"), cidr, tables)
    }
}

// ---------------------------------------------------------------------------------------------
// Plan
// ---------------------------------------------------------------------------------------------

/// How a CIDR was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CidrSource {
    /// Already recorded on the object (status or annotation).
    Recorded,
    /// Allocated now from this range.
    Allocated(Ipv4Net),
}

/// The CIDR of a cluster or node pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allocation {
    /// `Kind namespace/name`.
    pub object: String,
    /// The CIDR.
    pub cidr: Ipv4Net,
    /// Where it came from.
    pub source: CidrSource,
}

impl std::fmt::Display for Allocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.source {
            CidrSource::Recorded => write!(f, "{}: CIDR {} (recorded)", self.object, self.cidr),
            CidrSource::Allocated(range) => write!(f, "{}: CIDR {} (allocated from {range})", self.object, self.cidr),
        }
    }
}

/// How CloudFormation would receive a template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    /// As `TemplateBody`.
    Inline,
    /// Uploaded to the cluster bucket and passed as `TemplateURL` (over 51,200 bytes).
    S3 {
        /// The bucket.
        bucket: String,
        /// The object key.
        key: String,
    },
    /// Over the limit in an account without a bucket: the operator would fail.
    TooLarge,
}

/// One stack as the operator would apply it.
#[derive(Debug, Clone)]
pub struct PlannedStack {
    /// The stack name.
    pub name: String,
    /// The kind; for a legacy stack, the kind it is built from
    /// ([`LegacyStack::counterpart`](aws_stacks::stacks::legacy::LegacyStack::counterpart)),
    /// which lives in the same account.
    pub kind: StackKind,
    /// The account id the stack is created in.
    pub account_id: String,
    /// The stack tags, in the order they are sent.
    pub tags: Vec<(String, String)>,
    /// The template, `TemplateHash` output included.
    pub template: Template,
    /// The template hash (the `TemplateHash` output).
    pub hash: String,
    /// The cluster bucket in the stack's account, for templates over the inline limit; `None`
    /// in the management account.
    pub bucket: Option<String>,
}

impl PlannedStack {
    fn new(
        kind: StackKind,
        name: String,
        account_id: &str,
        tags: Vec<(String, String)>,
        template: Template,
        canonical_hash: Option<String>,
        bucket: Option<&str>,
    ) -> Self {
        // As `stack_ops::ensure`: the hash is recorded as an output of the template it describes.
        let mut template = template;
        let hash = aws_stacks::cfn::stack_hash(&canonical_hash.unwrap_or_else(|| template.hash()), &tags);
        template.output(
            TEMPLATE_HASH_OUTPUT,
            serde_json::Value::String(hash.clone()),
            Some("sha256 of this template without this output, and of the stack tags"),
        );
        Self {
            name,
            kind,
            account_id: account_id.to_string(),
            tags,
            template,
            hash,
            bucket: bucket.map(str::to_string),
        }
    }

    /// `tenant` or `management`.
    pub fn account_label(&self) -> &'static str {
        match self.kind.account() {
            Account::Tenant => "tenant",
            Account::ControlPlane => "management",
        }
    }

    /// Size of the compact template body in bytes.
    pub fn body_len(&self) -> usize {
        self.template.body_len()
    }

    /// How the template would reach CloudFormation.
    pub fn delivery(&self) -> Delivery {
        if self.body_len() <= MAX_TEMPLATE_BODY_BYTES {
            return Delivery::Inline;
        }
        match &self.bucket {
            Some(bucket) => {
                Delivery::S3 { bucket: bucket.clone(), key: format!("cloudformation/{}/{}.json", self.name, self.hash) }
            }
            None => Delivery::TooLarge,
        }
    }
}

/// Everything one cluster would get.
#[derive(Debug, Clone)]
pub struct ClusterPlan {
    /// `AWSCluster namespace/name`.
    pub cluster: String,
    /// The region.
    pub region: String,
    /// The Release name, `vX.Y.Z`.
    pub release: String,
    /// The `aws-operator` version the Release names.
    pub operator: String,
    /// The CIDRs of the cluster and its node pools.
    pub cidrs: Vec<Allocation>,
    /// The stacks, in creation order.
    pub stacks: Vec<PlannedStack>,
}

/// The stacks of every cluster in `objects`, in file order; the first invalid object stops it.
pub fn plan(objects: &Objects, settings: &Settings) -> Result<Vec<ClusterPlan>, RenderError> {
    if objects.clusters.is_empty() {
        return Err(RenderError::NoClusters);
    }
    // Control planes and node pools must find their cluster, as the controllers would.
    for cp in &objects.control_planes {
        objects.cluster_of(cp)?;
    }
    for md in &objects.machine_deployments {
        objects.cluster_of(md)?;
    }
    let mut ipam = Ipam::new(objects, settings)?;
    let cluster_cidrs = objects.clusters.iter().map(|c| ipam.cluster(c)).collect::<Result<Vec<_>, _>>()?;
    let mut plans = Vec::new();
    for (cluster, cidr) in objects.clusters.iter().zip(cluster_cidrs) {
        // In name order, as the daemon allocates them (`controllers::node_pool::Ipam`).
        let mut pools: Vec<&AWSMachineDeployment> = objects.node_pools_of(cluster).collect();
        pools.sort_by_key(|md| md.name_any());
        let pools = pools
            .into_iter()
            .map(|md| Ok((md, ipam.node_pool(md, cluster)?)))
            .collect::<Result<Vec<_>, RenderError>>()?;
        plans.push(plan_cluster(objects, settings, cluster, cidr, pools)?);
    }
    Ok(plans)
}

/// The three stacks of every legacy `AWSConfig` in `objects`, in file order, as the legacy
/// resource set would render them (`aws_stacks::stacks::legacy::inputs`); the first invalid
/// object stops it. What only AWS knows (the management VPC's block, route-table ids and zone,
/// the KMS key, the cluster zone's name servers) is a `<placeholder>` unless a flag gives it.
pub fn plan_legacy(objects: &Objects, settings: &Settings) -> Result<Vec<ClusterPlan>, RenderError> {
    use aws_stacks::stacks::legacy::{self, LegacyStack, guest_main, host_main, host_setup, inputs};
    let mut plans = Vec::new();
    for config in &objects.aws_configs {
        if let Err(errors) = config.validate() {
            return Err(operatorkit::error::field_errors(config, errors).into());
        }
        let id = config.cluster_id().to_string();
        let tenant = settings.tenant_account_id.as_str();
        let cp_account = settings.control_plane_account_id.as_str();
        let (_, cp_cidr, flagged_tables) = settings.control_plane_network();
        // The release the controller routes the object to (its label, else the one given Release
        // whose aws-operator component is the object's own version); none known renders as empty.
        let release = match config.labels().get(labels::RELEASE_VERSION).filter(|v| !v.trim().is_empty()) {
            Some(label) => label.clone(),
            None => crate::controllers::legacy::release_version_of(config, &objects.releases).unwrap_or_default(),
        };
        let host_setup_name = legacy::stack_name(&id, LegacyStack::HostSetup);
        let mut installation = inputs::Installation {
            installation: settings.config.installation.clone(),
            operator_version: settings.config.version.clone(),
            release_version: release.clone(),
            kubernetes_version: String::new(),
            etcd_version: String::new(),
            route53_enabled: settings.config.route53_enabled,
            tenant_account_id: tenant.to_string(),
            management_account_id: cp_account.to_string(),
            management_vpc_cidr: cp_cidr,
            peer_role_arn: String::new(),
            kms_key_arn: format!("<ARN of KMS key {}>", names::kms_alias(&id)),
            imds_http_tokens: stacks::imds_http_tokens(
                config.annotations().get(labels::AWS_METADATA_V2).map(String::as_str),
            )
            .to_string(),
            registry: String::new(),
            extras: Default::default(),
        };
        let common = inputs::common(config, &installation);
        let invalid_input = |errors| -> RenderError { operatorkit::error::field_errors(config, errors).into() };
        let mut planned = Vec::new();

        let setup = host_setup::render(&inputs::host_setup_params(config, &installation).map_err(invalid_input)?);
        installation.peer_role_arn = expected_outputs(&setup, &host_setup_name)
            .remove("PeerRoleARN")
            .unwrap_or_else(|| format!("<output PeerRoleARN of {host_setup_name}>"));
        let tags = legacy::legacy_stack_tags(&common, LegacyStack::HostSetup);
        let kind = LegacyStack::HostSetup.counterpart();
        planned.push(PlannedStack::new(kind, host_setup_name, cp_account, tags, setup, None, None));

        let name = legacy::stack_name(&id, LegacyStack::GuestMain);
        let params = inputs::guest_main_params(config, &installation, None).map_err(invalid_input)?;
        let guest = guest_main::render(&params)
            .map_err(|e| invalid(config, "InvalidSpec", format!("the guest-main template cannot be built: {e}")))?;
        let outputs = expected_outputs(&guest, &name);
        let tags = legacy::legacy_stack_tags(&common, LegacyStack::GuestMain);
        let bucket = names::bucket(tenant, &id);
        let kind = LegacyStack::GuestMain.counterpart();
        planned.push(PlannedStack::new(kind, name.clone(), tenant, tags, guest, None, Some(&bucket)));

        // The route tables `spec.aws.vpc.routeTableNames` names: a `--route-table` of that name
        // gives its id.
        let route_tables = config
            .spec
            .aws
            .vpc
            .route_table_names
            .iter()
            .map(|table| {
                flagged_tables
                    .iter()
                    .find(|t| &t.name == table)
                    .cloned()
                    .unwrap_or_else(|| CpRouteTable { id: format!("<route table named {table}>"), name: table.clone() })
            })
            .collect();
        let main = host_main::render(&host_main::Params {
            common: common.clone(),
            peering_connection_id: outputs
                .get("VPCPeeringConnectionID")
                .cloned()
                .unwrap_or_else(|| format!("<output VPCPeeringConnectionID of {name}>")),
            route_tables,
            private_subnets: params
                .zones
                .iter()
                .map(|z| tccpf::PrivateSubnet { az: z.name.clone(), cidr: z.private_cidr.clone() })
                .collect(),
            delegation: Some(host_main::Delegation {
                parent_zone_id: format!("<hosted zone {}>", common.base_domain),
                name_servers: vec![format!("<name servers of {}>", common.tenant_domain())],
            }),
        });
        let name = legacy::stack_name(&id, LegacyStack::HostMain);
        let tags = legacy::legacy_stack_tags(&common, LegacyStack::HostMain);
        let kind = LegacyStack::HostMain.counterpart();
        planned.push(PlannedStack::new(kind, name, cp_account, tags, main, None, None));

        plans.push(ClusterPlan {
            cluster: format!("AWSConfig {}/{}", config.namespace().unwrap_or_default(), config.name_any()),
            region: config.spec.aws.region.clone(),
            release,
            operator: config
                .labels()
                .get(labels::AWS_OPERATOR_VERSION)
                .cloned()
                .unwrap_or_else(|| config.spec.version_bundle.version.clone()),
            cidrs: Vec::new(),
            stacks: planned,
        });
    }
    Ok(plans)
}

/// The outputs a stack would have once created: literal values as rendered, everything AWS
/// assigns as `<output KEY of STACK>`.
fn expected_outputs(template: &Template, stack: &str) -> BTreeMap<String, String> {
    template
        .outputs
        .iter()
        .map(|(key, output)| {
            let value = match &output.value {
                serde_json::Value::String(s) => s.clone(),
                _ => format!("<output {key} of {stack}>"),
            };
            (key.clone(), value)
        })
        .collect()
}

fn invalid<K: kube::Resource<DynamicType = ()>>(obj: &K, reason: &'static str, message: String) -> InvalidInput {
    InvalidInput { object: controllers::status::describe(obj), reason, message }
}

fn plan_cluster(
    objects: &Objects,
    settings: &Settings,
    cluster: &AWSCluster,
    cidr: Allocation,
    pools: Vec<(&AWSMachineDeployment, Allocation)>,
) -> Result<ClusterPlan, RenderError> {
    let id = cluster.name_any();
    let region = cluster.spec.provider.region.clone();
    // The checks of the cluster controller's `inputs`.
    if let Err(errors) = cluster.spec.validate() {
        return Err(operatorkit::error::field_errors(cluster, errors).into());
    }
    if controllers::lookup::cluster_id(cluster)? != id {
        return Err(invalid(
            cluster,
            "InvalidClusterLabel",
            format!("label {} must equal the AWSCluster's name", labels::CLUSTER),
        )
        .into());
    }
    let release = objects.release_of(cluster)?;
    let control_planes: Vec<&AWSControlPlane> = objects.control_planes_of(cluster).collect();
    let control_plane = match control_planes.as_slice() {
        [cp] => *cp,
        [] => {
            return Err(invalid(
                cluster,
                "MissingControlPlane",
                format!(
                    "no AWSControlPlane labelled {}={id} in this namespace in the given files: add it; its availability zones shape the cluster network",
                    labels::CLUSTER
                ),
            )
            .into());
        }
        [_, second, ..] => {
            return Err(invalid(
                *second,
                "DuplicateControlPlane",
                format!("cluster {id} already has an AWSControlPlane; a cluster has exactly one: remove one or fix label {}", labels::CLUSTER),
            )
            .into());
        }
    };
    if let Err(errors) = control_plane.validate(&region) {
        return Err(operatorkit::error::field_errors(control_plane, errors).into());
    }
    let cp_release = objects.release_of(control_plane)?;
    for (md, _) in &pools {
        if let Err(errors) = md.validate(&region) {
            return Err(operatorkit::error::field_errors(*md, errors).into());
        }
        objects.release_of(*md)?;
    }

    // With the Cluster API objects' values where the cluster's own are unset (`crate::capi`).
    let capi = objects.capi_cluster_of(cluster)?;
    let (effective, _) = crate::capi::effective_cluster(cluster, capi);
    let cluster = &effective;
    let g8s = objects.g8s_of(control_plane, &id)?;
    let (replicas, _) = crate::capi::master_replicas(control_plane, g8s);

    let tenant = settings.tenant_account_id.as_str();
    let cp_account = settings.control_plane_account_id.as_str();
    let common = crate::controllers::lookup::common(&settings.config, cluster, release);
    let bucket = names::bucket(tenant, &id);
    let key_arn = format!("<ARN of KMS key {}>", names::kms_alias(&id));
    let (cp_vpc, cp_cidr, cp_tables) = settings.control_plane_network();
    let mut stacks = Vec::new();

    // TCCPI: the peering role in the management account.
    let name = names::stack_name(&id, StackKind::Tccpi, None);
    let template = tccpi::render(&tccpi::Params { common: common.clone(), tenant_account_id: tenant.to_string() });
    let peer_role = expected_outputs(&template, &name)
        .remove("PeerRoleARN")
        .unwrap_or_else(|| format!("<output PeerRoleARN of {name}>"));
    let tags = stacks::stack_tags(&common, StackKind::Tccpi, None);
    stacks.push(PlannedStack::new(StackKind::Tccpi, name, cp_account, tags, template, None, None));

    // TCCP: the zones of the control plane and of every node pool (as the cluster controller's `stacks::desired_azs`).
    let name = names::stack_name(&id, StackKind::Tccp, None);
    let azs: Vec<String> = control_plane
        .spec
        .availability_zones
        .iter()
        .chain(pools.iter().flat_map(|(md, _)| md.spec.provider.availability_zones.iter()))
        .filter(|az| az.starts_with(region.as_str()))
        .cloned()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let layout = ipam::tccp_layout(cidr.cidr, None, &azs).map_err(|e| {
        invalid(
            cluster,
            "InvalidAvailabilityZones",
            format!("the control plane and node pools name zones {}: {e}", azs.join(", ")),
        )
    })?;
    let peer = tccp::ControlPlaneVpc {
        account_id: cp_account.to_string(),
        vpc_id: cp_vpc.clone(),
        cidr: cp_cidr.clone(),
        peer_role_arn: peer_role,
    };
    let access_logs = tccp::access_logs(
        cluster.annotations().get(labels::AWS_LOAD_BALANCER_ACCESS_LOGS).map(String::as_str),
        tenant,
        &id,
    );
    // The management cluster's NAT addresses are looked up when the cluster is reconciled.
    let nat = [format!("<Elastic IPs tagged giantswarm.io/installation={}>", settings.config.installation)];
    let (allowlist, _) = crate::controllers::cluster::stacks::allowlist(&settings.config.api_allowlist, &nat);
    let params =
        crate::controllers::cluster::stacks::tccp_params(&common, cidr.cidr, &layout, peer, allowlist, access_logs);
    let template = tccp::render(&params);
    let outputs = tccp::Outputs::from_outputs(&expected_outputs(&template, &name), &azs).map_err(|e| {
        invalid(
            cluster,
            "MissingOutput",
            format!("the rendered stack {name} lacks an output the other stacks read: {e}"),
        )
    })?;
    let tags = stacks::stack_tags(&common, StackKind::Tccp, None);
    stacks.push(PlannedStack::new(StackKind::Tccp, name, tenant, tags, template, None, Some(&bucket)));

    // TCCPF: routes from the management VPC into the private subnets.
    let name = names::stack_name(&id, StackKind::Tccpf, None);
    let template = tccpf::render(&tccpf::Params {
        common: common.clone(),
        peering_connection_id: outputs.vpc_peering_connection_id.clone(),
        route_tables: cp_tables.clone(),
        private_subnets: layout
            .iter()
            .map(|a| tccpf::PrivateSubnet { az: a.name.clone(), cidr: a.private.to_string() })
            .collect(),
    });
    let tags = stacks::stack_tags(&common, StackKind::Tccpf, None);
    stacks.push(PlannedStack::new(StackKind::Tccpf, name, cp_account, tags, template, None, None));

    // TCCPN: the masters, with the control plane's own Release (as its controller reads it).
    let issuer_name = aws_stacks::irsa::configmap_name(&id);
    let issuer = objects
        .config_maps
        .iter()
        .find(|c| c.metadata.name.as_deref() == Some(issuer_name.as_str()) && c.namespace() == cluster.namespace())
        .map(|c| c.data.clone().unwrap_or_default());
    let masters = Masters { cp: control_plane, replicas, release: cp_release, issuer };
    stacks.push(plan_masters(settings, cluster, &masters, &outputs, &bucket, &key_arn)?);

    // TCNP and TCNPF per node pool.
    let mut cidrs = vec![cidr.clone()];
    // Each pool admits the others' security groups, known only once their stacks exist.
    let pool_stacks: Vec<String> =
        pools.iter().map(|(md, _)| names::stack_name(&id, StackKind::Tcnp, Some(&md.name_any()))).collect();
    for (md, pool_cidr) in pools {
        let own = names::stack_name(&id, StackKind::Tcnp, Some(&md.name_any()));
        let peers: Vec<String> = pool_stacks
            .iter()
            .filter(|stack| **stack != own)
            .map(|stack| format!("<output SecurityGroupID of {stack}>"))
            .collect();
        let md_release = objects.release_of(md)?;
        let pool = PoolInputs {
            outputs: &outputs,
            cluster_cidr: cidr.cidr,
            cp_cidr: &cp_cidr,
            cp_tables: &cp_tables,
            bucket: &bucket,
            key_arn: &key_arn,
            cilium_eni: crate::capi::tuning(capi, &objects.capi_machine_deployments_of(md, &id)).cilium_eni,
        };
        stacks.extend(plan_node_pool(settings, cluster, md, md_release, pool_cidr.cidr, &pool, &peers)?);
        cidrs.push(pool_cidr);
    }
    Ok(ClusterPlan {
        cluster: controllers::status::describe(cluster),
        region,
        release: release.name_any(),
        operator: release.component_version(crate::daemon::COMPONENT).unwrap_or_default().to_string(),
        cidrs,
        stacks,
    })
}

impl ClusterPlan {
    /// Why the daemon of version `own` would not create this plan: the Release names another
    /// `aws-operator` version, whose daemon reconciles the cluster (with its own templates).
    pub fn version_warning(&self, own: &str) -> Option<String> {
        (self.operator != own).then(|| {
            format!(
                "{}: Release {} names aws-operator {}, this is aws-operator {own}: its daemon leaves the cluster to aws-operator {}, whose stacks may differ from these; render with that version",
                self.cluster, self.release, self.operator, self.operator
            )
        })
    }
}

/// A control plane with its master count (`crate::capi::master_replicas`) and Release.
struct Masters<'a> {
    cp: &'a AWSControlPlane,
    replicas: i32,
    release: &'a Release,
    /// The data of the cluster's `<id>-irsa-cloudfront` ConfigMap, when among the files.
    issuer: Option<BTreeMap<String, String>>,
}

fn plan_masters(
    settings: &Settings,
    cluster: &AWSCluster,
    masters: &Masters<'_>,
    outputs: &tccp::Outputs,
    bucket: &str,
    key_arn: &str,
) -> Result<PlannedStack, RenderError> {
    let (cp, release) = (masters.cp, masters.release);
    let configmap = masters.issuer.as_ref();
    let id = cluster.name_any();
    let region = &cluster.spec.provider.region;
    let flatcar = release.component_version("containerlinux").unwrap_or_default();
    let ami = settings.ami(flatcar, region)?;
    let subnets: Vec<(String, String)> = cp
        .spec
        .availability_zones
        .iter()
        .filter_map(|az| outputs.az(az).map(|o| (az.clone(), o.private_subnet_id.clone())))
        .collect();
    let replicas = u32::try_from(masters.replicas).unwrap_or(0);
    let masters = crate::controllers::control_plane::masters_of(cp, replicas, &subnets)
        .map_err(|e| invalid(cp, "InvalidSpec", e))?;
    let etcd_volume = crate::controllers::control_plane::etcd_volume(cp).map_err(|e| invalid(cp, "InvalidSpec", e))?;
    let common = crate::controllers::lookup::common(&settings.config, cluster, release);
    // IAM roles for service accounts: the issuer the cluster's `<id>-irsa-cloudfront` ConfigMap
    // names when it is among the files (a CloudFront distribution), else the S3 issuer.
    let annotation = cluster.annotations().get(aws_stacks::irsa::ANNOTATION).map(String::as_str);
    let major = crate::controllers::cluster::irsa::release_major(release);
    let irsa = aws_stacks::irsa::enabled(annotation, major)
        .map_err(|e| invalid(cluster, crate::controllers::cluster::irsa::IRSA_INVALID, e))?
        .then(|| crate::controllers::cluster::irsa::issuer(cluster, &settings.tenant_account_id, configmap).ok())
        .flatten();
    let params = |is_update: bool| tccpn::Params {
        common: common.clone(),
        masters: masters.clone(),
        instance_type: cp.spec.instance_type.clone(),
        image_id: ami.clone(),
        imds_http_tokens: stacks::imds_http_tokens(cp.annotations().get(labels::AWS_METADATA_V2).map(String::as_str))
            .into(),
        master_security_group_id: outputs.master_security_group_id.clone(),
        bucket: bucket.to_string(),
        kms_key_arn: key_arn.to_string(),
        hosted_zone_id: outputs.hosted_zone_id.clone(),
        internal_hosted_zone_id: outputs.internal_hosted_zone_id.clone(),
        etcd_volume,
        is_update,
        irsa: irsa.clone(),
    };
    // As the control-plane controller: the hash is that of the update form; a stack that does
    // not exist yet is created in the create form.
    let canonical = tccpn::render(&params(true)).hash();
    let tags = stacks::stack_tags(&common, StackKind::Tccpn, Some(&cp.name_any()));
    let name = names::stack_name(&id, StackKind::Tccpn, None);
    Ok(PlannedStack::new(
        StackKind::Tccpn,
        name,
        &settings.tenant_account_id,
        tags,
        tccpn::render(&params(false)),
        Some(canonical),
        Some(bucket),
    ))
}

/// What a node pool's stacks read from the cluster's.
struct PoolInputs<'a> {
    outputs: &'a tccp::Outputs,
    cluster_cidr: Ipv4Net,
    cp_cidr: &'a str,
    cp_tables: &'a [CpRouteTable],
    bucket: &'a str,
    key_arn: &'a str,
    /// Cilium in ENI mode, as the cluster's `Cluster` says.
    cilium_eni: bool,
}

fn plan_node_pool(
    settings: &Settings,
    cluster: &AWSCluster,
    obj: &AWSMachineDeployment,
    release: &Release,
    pool_net: Ipv4Net,
    inputs: &PoolInputs<'_>,
    peers: &[String],
) -> Result<[PlannedStack; 2], RenderError> {
    let id = cluster.name_any();
    let md = obj.name_any();
    let region = &cluster.spec.provider.region;
    let ami = settings.ami(crate::controllers::node_pool::pool_flatcar(obj, release), region)?;
    let common = crate::controllers::lookup::common(&settings.config, cluster, release);
    let layout = ipam::node_pool_layout(pool_net, &obj.spec.provider.availability_zones)
        .map_err(|e| invalid(obj, "InvalidSpec", e.to_string()))?;
    let (pool_cidr, cluster_cidr) = (pool_net.to_string(), inputs.cluster_cidr.to_string());
    let pool = crate::controllers::node_pool::PoolStacks {
        cluster,
        pool: obj,
        common: &common,
        layout: &layout,
        pool_cidr: &pool_cidr,
        outputs: inputs.outputs,
        cluster_cidr: &cluster_cidr,
        cp_cidr: inputs.cp_cidr,
        cp_tables: inputs.cp_tables,
        ami: &ami,
        bucket: inputs.bucket,
        key_arn: inputs.key_arn,
        peer_security_groups: peers,
        alike: &settings.config.alike_instances,
        cilium_eni: inputs.cilium_eni,
    };
    // A new auto scaling group has no live desired capacity: 0, clamped to `min`.
    let params = pool.tcnp(0);
    let tenant = &settings.tenant_account_id;
    let name = names::stack_name(&id, StackKind::Tcnp, Some(&md));
    let tags = stacks::stack_tags(&common, StackKind::Tcnp, Some(&md));
    let tcnp = PlannedStack::new(StackKind::Tcnp, name, tenant, tags, tcnp::render(&params), None, Some(inputs.bucket));

    let name = names::stack_name(&id, StackKind::Tcnpf, Some(&md));
    let template = tcnpf::render(&pool.tcnpf());
    let tags = stacks::stack_tags(&common, StackKind::Tcnpf, None);
    let tcnpf =
        PlannedStack::new(StackKind::Tcnpf, name, &settings.control_plane_account_id, tags, template, None, None);
    Ok([tcnp, tcnpf])
}

// ---------------------------------------------------------------------------------------------
// IPAM
// ---------------------------------------------------------------------------------------------

/// Allocation over the given objects: recorded CIDRs are reserved up front, and each new
/// allocation is reserved for the next one, as the lock serialises them in the operator.
struct Ipam<'a> {
    objects: &'a Objects,
    settings: &'a Settings,
    reserved: Vec<Ipv4Net>,
}

impl<'a> Ipam<'a> {
    fn new(objects: &'a Objects, settings: &'a Settings) -> Result<Self, RenderError> {
        let mut reserved = Vec::new();
        for cluster in &objects.clusters {
            if let Some(cidr) = recorded_cluster_cidr(cluster)? {
                reserved.push(cidr);
            }
        }
        for md in &objects.machine_deployments {
            if let Some(cidr) = recorded_pool_cidr(md)? {
                reserved.push(cidr);
            }
        }
        Ok(Self { objects, settings, reserved })
    }

    fn cluster(&mut self, cluster: &AWSCluster) -> Result<Allocation, RenderError> {
        if let Some(cidr) = recorded_cluster_cidr(cluster)? {
            return Ok(Allocation {
                object: controllers::status::describe(cluster),
                cidr,
                source: CidrSource::Recorded,
            });
        }
        let range = self.range_for(cluster)?;
        self.allocate(cluster, range)
    }

    fn node_pool(&mut self, md: &AWSMachineDeployment, cluster: &AWSCluster) -> Result<Allocation, RenderError> {
        if let Some(cidr) = recorded_pool_cidr(md)? {
            return Ok(Allocation { object: controllers::status::describe(md), cidr, source: CidrSource::Recorded });
        }
        let range = self.range_for(cluster)?;
        self.allocate(md, range)
    }

    fn allocate<K: kube::Resource<DynamicType = ()>>(
        &mut self,
        obj: &K,
        range: Ipv4Net,
    ) -> Result<Allocation, RenderError> {
        let mask = crate::ipam::mask_of(obj, self.settings.config.subnet_mask_bits);
        let cidr = ipam::free(range, mask, &self.reserved)
            .map_err(|e| invalid(obj, "IpamExhausted", format!("no free /{mask} in {range}: {e}")))?;
        self.reserved.push(cidr);
        Ok(Allocation { object: controllers::status::describe(obj), cidr, source: CidrSource::Allocated(range) })
    }

    /// The cluster's NetworkPool range, else `--ipam-range` (as `ipam::range_for_cluster`,
    /// with the same overlap checks).
    fn range_for(&self, cluster: &AWSCluster) -> Result<Ipv4Net, RenderError> {
        let default = self.settings.config.ipam_range.parse::<Ipv4Net>().map_err(|e| RenderError::Flag {
            flag: "ipam-range",
            value: self.settings.config.ipam_range.clone(),
            message: e.to_string(),
        })?;
        let Some(pool_name) = cluster.network_pool() else {
            return Ok(default);
        };
        let ns = cluster.namespace();
        let Some(pool) = self.objects.network_pools.iter().find(|p| p.name_any() == pool_name && p.namespace() == ns)
        else {
            return Err(invalid(
                cluster,
                "NetworkPoolNotFound",
                format!("spec.provider.nodes.networkPool names NetworkPool {pool_name}, which is not in the given files for this namespace: add it or remove the field"),
            )
            .into());
        };
        if let Err(errors) = pool.validate() {
            return Err(operatorkit::error::field_errors(pool, errors).into());
        }
        let range: Ipv4Net = pool.spec.cidr_block.parse().map_err(|e| {
            invalid(pool, "InvalidNetworkPool", format!("spec.cidrBlock {}: {e}", pool.spec.cidr_block))
        })?;
        for other in &self.objects.network_pools {
            if other.name_any() == pool.name_any() && other.namespace() == pool.namespace() {
                continue;
            }
            if let Ok(o) = other.spec.cidr_block.parse::<Ipv4Net>()
                && o.overlaps(&range)
            {
                return Err(invalid(
                    pool,
                    "OverlappingNetworkPool",
                    format!(
                        "spec.cidrBlock {range} overlaps NetworkPool {}/{} ({o}): give each pool its own range",
                        other.namespace().unwrap_or_default(),
                        other.name_any()
                    ),
                )
                .into());
            }
        }
        if default.overlaps(&range) {
            return Err(invalid(
                pool,
                "OverlappingNetworkPool",
                format!(
                    "spec.cidrBlock {range} overlaps the operator's default range {default}: choose a range outside it"
                ),
            )
            .into());
        }
        Ok(range)
    }
}

fn recorded_cluster_cidr(cluster: &AWSCluster) -> Result<Option<Ipv4Net>, InvalidInput> {
    cluster
        .cidr()
        .map(|cidr| {
            cidr.parse().map_err(|e| {
                invalid(
                    cluster,
                    "InvalidStatus",
                    format!("status.provider.network.cidr {cidr}: {e}; remove it to allocate a new one"),
                )
            })
        })
        .transpose()
}

fn recorded_pool_cidr(md: &AWSMachineDeployment) -> Result<Option<Ipv4Net>, InvalidInput> {
    md.annotations()
        .get(labels::MACHINE_DEPLOYMENT_SUBNET)
        .map(|cidr| {
            cidr.parse().map_err(|e| {
                invalid(
                    md,
                    "InvalidAnnotation",
                    format!(
                        "annotation {} {cidr}: {e}; remove it to allocate a new one",
                        labels::MACHINE_DEPLOYMENT_SUBNET
                    ),
                )
            })
        })
        .transpose()
}

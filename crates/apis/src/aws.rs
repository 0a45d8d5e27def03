//! The AWS custom resources of `infrastructure.giantswarm.io/v1alpha3`, reconciled by
//! aws-operator: [`AWSCluster`], [`AWSControlPlane`], [`AWSMachineDeployment`] and
//! [`NetworkPool`].
//!
//! The JSON shapes follow `giantswarm/apiextensions` (`pkg/apis/infrastructure/v1alpha3`), so
//! objects written for the Go operator are read unchanged; field names keep upstream's spelling
//! (`dockerVolumeSizeGB`, `vpcID`, `issuerURL`). Two deliberate additions:
//!
//! - every kind with a status carries `metav1.Condition`s and a [`StackStatus`] per
//!   CloudFormation stack, so a person sees what the operator is waiting for without reading
//!   its logs;
//! - [`AWSControlPlaneSpec::replicas`] holds the master count, which upstream read from a
//!   separate `G8sControlPlane` object.
//!
//! # Validation
//!
//! What a schema can check is in the CRD, so the API server answers bad input with a 422 that
//! names the field: CIDR blocks ([`CIDR_PATTERN`]), instance types ([`INSTANCE_TYPE_PATTERN`]),
//! availability zones ([`AVAILABILITY_ZONE_PATTERN`]), regions ([`REGION_PATTERN`]), numeric
//! ranges and the replica count. What needs more than one field (an availability zone outside
//! the cluster's region, `min > max`, a CIDR block with host bits set) is checked by the pure
//! `validate` functions, which return every problem at once as [`FieldError`]s.

use std::collections::BTreeSet;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::cluster_status::StatusCluster;
use crate::go::null_as_default;
pub use crate::validation::{CIDR_PATTERN, FieldError};
use crate::validation::{check_cidr, into_result};

/// An EC2 instance type: a lower-case family with a generation digit, a dot and a size, e.g.
/// `m5.xlarge`, `c6gn.16xlarge`, `u-6tb1.metal`.
pub const INSTANCE_TYPE_PATTERN: &str = r"^[a-z][a-z0-9-]*[0-9][a-z0-9-]*\.[a-z0-9]+$";

/// An AWS availability zone: a region and a zone letter, e.g. `eu-central-1a`,
/// `us-gov-west-1b`; Local Zones such as `us-west-2-lax-1a` too.
pub const AVAILABILITY_ZONE_PATTERN: &str = r"^[a-z]{2}(-[a-z]+)+-[0-9]+(-[a-z]+-[0-9]+)?[a-z]$";

/// An AWS region, e.g. `eu-central-1`, `us-gov-west-1`.
pub const REGION_PATTERN: &str = r"^[a-z]{2}(-[a-z]+)+-[0-9]+$";

/// The condition type that says whether an object is fully reconciled.
pub const CONDITION_READY: &str = "Ready";

// ---------------------------------------------------------------------------------------------
// Shared status parts
// ---------------------------------------------------------------------------------------------

/// The AWS account a CloudFormation stack lives in.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum StackAccount {
    /// The workload cluster's own account.
    Tenant,
    /// The account of the management cluster.
    ControlPlane,
}

/// The last observed state of one CloudFormation stack that belongs to an object.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StackStatus {
    /// The stack name, e.g. `cluster-al9qy-tccp`.
    pub name: String,
    /// The short stack kind: `tccpi`, `tccp`, `tccpf`, `tccpn`, `tcnp` or `tcnpf`.
    pub kind: String,
    /// The account the stack is created in.
    pub account: StackAccount,
    /// The CloudFormation stack status, e.g. `CREATE_COMPLETE`, `UPDATE_ROLLBACK_COMPLETE`.
    pub status: String,
    /// CloudFormation's reason for the status, when it gives one (failures do).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// When the status last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// Failed attempts since the stack was last usable and current: updates rolled back,
    /// creates rolled back, deletes failed. Kept here so that the backoff between retries
    /// survives a restart of the operator; absent when nothing failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempts: Option<u32>,
    /// An update of this stack that waits for approval (the cluster's
    /// `aws-operator.giantswarm.io/update-approval` annotation): what it would change and the
    /// plan hash to approve it with. Absent when no update waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_update: Option<PendingUpdate>,
    /// The plan hash of the last update of this stack run by approval, so that an approval left
    /// on the object after it ran is not taken for a stale one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied_plan: Option<String>,
}

/// A stack update that waits for approval, as CloudFormation's change set describes it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PendingUpdate {
    /// The plan hash: approve the update by annotating the object with
    /// `aws-operator.giantswarm.io/approved-plan: <planHash>`. A stable hash of the stack name
    /// and the desired template (with its tags), so a changed desired state is a new plan.
    pub plan_hash: String,
    /// The change set that holds the update, in the stack's account.
    pub change_set: String,
    /// Resources the update adds.
    pub added: u32,
    /// Resources the update modifies.
    pub modified: u32,
    /// Resources the update removes.
    pub removed: u32,
    /// Resources CloudFormation replaces (a new physical resource), with `True` or
    /// `Conditional` as CloudFormation says.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replacements: Vec<PlannedReplacement>,
    /// Auto Scaling groups whose instances the update replaces (a rolling update).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub instance_rolls: Vec<String>,
}

/// One resource a pending update replaces.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlannedReplacement {
    /// The logical id in the template.
    pub logical_id: String,
    /// The resource type, e.g. `AWS::EC2::SecurityGroup`.
    pub resource_type: String,
    /// `True` or `Conditional`.
    pub replacement: String,
}

/// Check that every availability zone lies in `region` and none is listed twice.
fn check_zones(field: &str, zones: &[String], region: &str, errors: &mut Vec<FieldError>) {
    let mut seen = BTreeSet::new();
    for (i, zone) in zones.iter().enumerate() {
        let path = format!("{field}[{i}]");
        check_zone(&path, zone, region, errors);
        if !seen.insert(zone.as_str()) {
            errors.push(FieldError::new(&path, zone, "availability zone is listed twice; list each zone once"));
        }
    }
}

/// Check that one availability zone lies in `region`.
fn check_zone(field: &str, zone: &str, region: &str, errors: &mut Vec<FieldError>) {
    if !zone_in_region(zone, region) {
        errors.push(FieldError::new(
            field,
            zone,
            format!("availability zone is not in the cluster's region {region}; use a zone such as {region}a"),
        ));
    }
}

/// Whether `zone` is a zone of `region`: the region name followed by a zone letter
/// (`eu-central-1a`) or a Local Zone suffix (`us-west-2-lax-1a`). A plain prefix test would
/// accept `eu-central-10a` for `eu-central-1`.
fn zone_in_region(zone: &str, region: &str) -> bool {
    match zone.strip_prefix(region) {
        Some(rest) if rest.starts_with('-') => rest.len() > 1,
        Some(rest) => !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_lowercase()),
        None => false,
    }
}

// ---------------------------------------------------------------------------------------------
// AWSCluster
// ---------------------------------------------------------------------------------------------

/// The desired state of a workload cluster's AWS infrastructure: network, DNS, credentials.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "infrastructure.giantswarm.io",
    version = "v1alpha3",
    kind = "AWSCluster",
    plural = "awsclusters",
    namespaced,
    status = "AWSClusterStatus",
    category = "giantswarm",
    category = "aws",
    doc = "A workload cluster on AWS: its network, DNS zone and the account it runs in.",
    printcolumn = r#"{"name":"Region","type":"string","jsonPath":".spec.provider.region","description":"AWS region"}"#,
    printcolumn = r#"{"name":"CIDR","type":"string","jsonPath":".status.provider.network.cidr","description":"Cluster CIDR allocated by IPAM"}"#,
    printcolumn = r#"{"name":"Release","type":"string","jsonPath":".metadata.labels.release\\.giantswarm\\.io/version","description":"Giant Swarm release"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status","description":"Whether the cluster's infrastructure is reconciled"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct AWSClusterSpec {
    /// Cluster-wide settings.
    pub cluster: AWSClusterSpecCluster,
    /// AWS settings.
    pub provider: AWSClusterSpecProvider,
}

/// The `AWSCluster` CRD as the charts ship it: the derived one, with a root rule that its name,
/// the cluster id, has the format of one ([`crate::cluster_id::NAME_RULE`]). The label
/// `giantswarm.io/cluster` must equal the name; CEL cannot read labels, so the operator checks
/// that.
pub fn cluster_crd() -> k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::ValidationRule;
    use kube::CustomResourceExt;
    let mut crd = AWSCluster::crd();
    for version in &mut crd.spec.versions {
        if let Some(schema) = version.schema.as_mut().and_then(|s| s.open_api_v3_schema.as_mut()) {
            schema.x_kubernetes_validations.get_or_insert_with(Vec::new).push(ValidationRule {
                rule: crate::cluster_id::NAME_RULE.to_string(),
                message: Some(crate::cluster_id::NAME_RULE_MESSAGE.to_string()),
                reason: Some("FieldValueInvalid".to_string()),
                ..ValidationRule::default()
            });
        }
    }
    crd
}

/// `spec.cluster` of an `AWSCluster`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AWSClusterSpecCluster {
    /// Free text that helps people tell clusters apart.
    #[serde(default)]
    pub description: String,
    /// DNS settings.
    pub dns: AWSClusterSpecClusterDNS,
    /// kube-proxy settings.
    #[serde(default)]
    pub kube_proxy: AWSClusterSpecClusterKubeProxy,
    /// OpenID Connect authentication for the workload cluster's API server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oidc: Option<AWSClusterSpecClusterOIDC>,
    /// When disruptive work may run, and how much at once; at any time, without limit, when
    /// absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maintenance: Option<crate::maintenance::Maintenance>,
}

/// `spec.cluster.dns`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AWSClusterSpecClusterDNS {
    /// The base domain, e.g. `gauss.eu-central-1.aws.gigantic.io`; the cluster's zone is
    /// `<id>.k8s.<domain>` and its API `api.<id>.k8s.<domain>`.
    #[schemars(length(min = 1))]
    pub domain: String,
}

/// `spec.cluster.kubeProxy`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AWSClusterSpecClusterKubeProxy {
    /// kube-proxy's `--conntrack-max-per-core`; its default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub conntrack_max_per_core: Option<i32>,
}

/// `spec.cluster.oidc`: become the API server's `--oidc-*` flags.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AWSClusterSpecClusterOIDC {
    /// The issuer URL (`--oidc-issuer-url`).
    #[serde(rename = "issuerURL", default)]
    pub issuer_url: String,
    /// The client ID (`--oidc-client-id`).
    #[serde(rename = "clientID", default)]
    pub client_id: String,
    /// Which token claims name users and groups.
    #[serde(default)]
    pub claims: AWSClusterSpecClusterOIDCClaims,
}

/// `spec.cluster.oidc.claims`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AWSClusterSpecClusterOIDCClaims {
    /// The claim holding the user name (`--oidc-username-claim`).
    #[serde(default)]
    pub username: String,
    /// The claim holding the groups (`--oidc-groups-claim`).
    #[serde(default)]
    pub groups: String,
}

/// `spec.provider` of an `AWSCluster`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AWSClusterSpecProvider {
    /// The Secret holding the IAM role ARN of the workload cluster's account.
    pub credential_secret: AWSClusterSpecProviderCredentialSecret,
    /// Deprecated: the cluster's `AWSControlPlane` wins.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub master: Option<AWSClusterSpecProviderMaster>,
    /// Where the cluster's CIDR is allocated from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<AWSClusterSpecProviderNodes>,
    /// Pod networking.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pods: Option<AWSClusterSpecProviderPods>,
    /// The AWS region, e.g. `eu-central-1`.
    #[schemars(regex(pattern = REGION_PATTERN))]
    pub region: String,
}

/// `spec.provider.credentialSecret`: a reference to a Secret whose key `aws.awsoperator.arn`
/// is the role aws-operator assumes in the workload cluster's account.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AWSClusterSpecProviderCredentialSecret {
    /// The Secret name, e.g. `credential-al9qy`.
    #[schemars(length(min = 1))]
    pub name: String,
    /// The Secret namespace, e.g. `giantswarm`.
    #[schemars(length(min = 1))]
    pub namespace: String,
}

/// `spec.provider.master` (deprecated).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AWSClusterSpecProviderMaster {
    /// The master's availability zone.
    #[schemars(regex(pattern = AVAILABILITY_ZONE_PATTERN))]
    pub availability_zone: String,
    /// The master's instance type.
    #[schemars(regex(pattern = INSTANCE_TYPE_PATTERN))]
    pub instance_type: String,
}

/// `spec.provider.nodes`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AWSClusterSpecProviderNodes {
    /// The name of a `NetworkPool` in the same namespace to allocate the cluster CIDR from,
    /// instead of the operator's default range.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_pool: Option<String>,
}

/// `spec.provider.pods`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AWSClusterSpecProviderPods {
    /// The pod CIDR: the cluster CIDR of the controller manager and of kube-proxy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = CIDR_PATTERN))]
    pub cidr_block: Option<String>,
    /// Deprecated, and without effect: AWS-CNI's external source NAT. These clusters run
    /// Cilium, not AWS-CNI. Accepted and kept as written so that existing manifests apply
    /// unchanged; the operator says once, in an event, that it has no effect.
    #[serde(default, rename = "externalSNAT", skip_serializing_if = "Option::is_none")]
    pub external_snat: Option<bool>,
}

/// The observed state of an `AWSCluster`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AWSClusterStatus {
    /// Lifecycle conditions and version history, written by cluster-operator; aws-operator
    /// reads `Created` from here.
    #[serde(default, deserialize_with = "null_as_default")]
    pub cluster: StatusCluster,
    /// What aws-operator allocated and created.
    #[serde(default, deserialize_with = "null_as_default")]
    pub provider: AWSClusterStatusProvider,
    /// Conditions of the reconciliation; `Ready` says whether every stack is in place.
    #[serde(default, skip_serializing_if = "Vec::is_empty", deserialize_with = "null_as_default")]
    pub conditions: Vec<Condition>,
    /// The cluster's CloudFormation stacks.
    #[serde(default, skip_serializing_if = "Vec::is_empty", deserialize_with = "null_as_default")]
    pub stacks: Vec<StackStatus>,
    /// Where the workload cluster's API server is reached, once its DNS record exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane_endpoint: Option<ControlPlaneEndpoint>,
    /// What the last drift detection of the cluster's stacks found (written by the drift
    /// detector; absent while detection is off or has not completed yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift: Option<DriftStatus>,
}

/// `status.drift` of an `AWSCluster`: the result of the last CloudFormation drift detection of
/// the cluster's stacks. Bounded: at most a few resources per stack and a few differences per
/// resource are listed, the rest counted in `omitted*`; values are shortened, and those that
/// could hold secrets (user data, node configs) are redacted.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DriftStatus {
    /// When the last detection of every stack completed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_detection_time: Option<Time>,
    /// The stacks found drifted (empty: every stack checked is in sync).
    #[serde(default, skip_serializing_if = "Vec::is_empty", deserialize_with = "null_as_default")]
    pub stacks: Vec<StackDrift>,
}

/// One drifted stack.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StackDrift {
    /// The stack name, e.g. `cluster-al9qy-tccp`.
    pub name: String,
    /// The short stack kind: `tccp`, `tcnp`, ….
    pub kind: String,
    /// CloudFormation's id of the detection that found the drift.
    pub detection_id: String,
    /// How many of the stack's resources drifted (modified or deleted), as CloudFormation
    /// counts them.
    pub drifted_resources: u32,
    /// The drifted resources (at most a few; see `omittedResources`).
    #[serde(default, skip_serializing_if = "Vec::is_empty", deserialize_with = "null_as_default")]
    pub resources: Vec<ResourceDrift>,
    /// Drifted resources not listed, to keep the status small.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub omitted_resources: u32,
}

/// One drifted resource of a stack.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceDrift {
    /// The resource's logical id in the template, e.g. `MasterSecurityGroup`.
    pub logical_id: String,
    /// The resource type, e.g. `AWS::EC2::SecurityGroup`.
    #[serde(rename = "type")]
    pub resource_type: String,
    /// The resource's physical id, e.g. `sg-0abc`, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub physical_id: Option<String>,
    /// `MODIFIED` or `DELETED`.
    pub status: String,
    /// The properties that differ from the template (for `MODIFIED`).
    #[serde(default, skip_serializing_if = "Vec::is_empty", deserialize_with = "null_as_default")]
    pub differences: Vec<PropertyDrift>,
    /// Differences not listed, to keep the status small.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub omitted_differences: u32,
}

/// One property of a resource that differs from its template.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PropertyDrift {
    /// The property's path, e.g. `/SecurityGroupIngress/2` or `/MaxSize`.
    pub path: String,
    /// The value the template sets (`null` for a value added by hand).
    pub expected: String,
    /// The value found (`null` for a value removed by hand).
    pub actual: String,
    /// `ADD` (a value added to a list), `REMOVE` or `NOT_EQUAL`.
    #[serde(rename = "type")]
    pub difference_type: String,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// `status.provider` of an `AWSCluster`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AWSClusterStatusProvider {
    /// The cluster's network.
    #[serde(default, deserialize_with = "null_as_default")]
    pub network: AWSClusterStatusProviderNetwork,
}

/// `status.provider.network`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AWSClusterStatusProviderNetwork {
    /// The cluster CIDR allocated by IPAM; never changes once set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cidr: Option<String>,
    /// The workload cluster's VPC id, e.g. `vpc-0abc`.
    #[serde(rename = "vpcID", default, skip_serializing_if = "Option::is_none")]
    pub vpc_id: Option<String>,
}

/// The workload cluster's API endpoint.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ControlPlaneEndpoint {
    /// The host name, `api.<id>.k8s.<domain>`.
    pub host: String,
    /// The port, 443.
    pub port: i32,
}

impl AWSClusterSpec {
    /// Checks a schema cannot do: the deprecated master's zone lies in the region and its pod
    /// CIDR has no host bits set. Returns every problem found.
    pub fn validate(&self) -> Result<(), Vec<FieldError>> {
        let mut errors = Vec::new();
        let region = &self.provider.region;
        if let Some(master) = &self.provider.master {
            check_zone("spec.provider.master.availabilityZone", &master.availability_zone, region, &mut errors);
        }
        if let Some(cidr) = self.provider.pods.as_ref().and_then(|p| p.cidr_block.as_deref()) {
            check_cidr("spec.provider.pods.cidrBlock", cidr, &mut errors);
        }
        into_result(errors)
    }
}

impl AWSCluster {
    /// See [`AWSClusterSpec::validate`].
    pub fn validate(&self) -> Result<(), Vec<FieldError>> {
        self.spec.validate()
    }

    /// The cluster CIDR allocated by IPAM, if any.
    pub fn cidr(&self) -> Option<&str> {
        self.status.as_ref().and_then(|s| s.provider.network.cidr.as_deref()).filter(|c| !c.is_empty())
    }

    /// The pod CIDR, if one is set.
    pub fn pod_cidr(&self) -> Option<&str> {
        self.spec.provider.pods.as_ref().and_then(|p| p.cidr_block.as_deref())
    }

    /// The name of the [`NetworkPool`] to allocate the cluster CIDR from, if any.
    pub fn network_pool(&self) -> Option<&str> {
        self.spec.provider.nodes.as_ref().and_then(|n| n.network_pool.as_deref()).filter(|n| !n.is_empty())
    }

    /// The deprecated fields this object sets, each with why it has no effect. They are
    /// accepted so that manifests written for the original apply unchanged.
    pub fn ignored_fields(&self) -> Vec<(&'static str, &'static str)> {
        let mut ignored = Vec::new();
        if self.spec.provider.pods.as_ref().is_some_and(|p| p.external_snat.is_some()) {
            ignored.push((
                "spec.provider.pods.externalSNAT",
                "it configured AWS-CNI's external source NAT, and these clusters run Cilium",
            ));
        }
        ignored
    }
}

// ---------------------------------------------------------------------------------------------
// AWSControlPlane
// ---------------------------------------------------------------------------------------------

/// The desired control plane (masters and etcd) of a workload cluster.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "infrastructure.giantswarm.io",
    version = "v1alpha3",
    kind = "AWSControlPlane",
    plural = "awscontrolplanes",
    namespaced,
    status = "AWSControlPlaneStatus",
    category = "giantswarm",
    category = "aws",
    doc = "The control plane of a workload cluster on AWS: master instances and their zones.",
    printcolumn = r#"{"name":"Cluster","type":"string","jsonPath":".metadata.labels.giantswarm\\.io/cluster","description":"The cluster this control plane belongs to"}"#,
    printcolumn = r#"{"name":"Instance type","type":"string","jsonPath":".spec.instanceType","description":"EC2 instance type of the masters"}"#,
    printcolumn = r#"{"name":"Replicas","type":"integer","jsonPath":".spec.replicas","description":"Number of masters"}"#,
    printcolumn = r#"{"name":"Zones","type":"string","jsonPath":".spec.availabilityZones","priority":1,"description":"Availability zones of the masters"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status","description":"Whether the control plane is reconciled"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": MASTER_COUNT_RULE,
        "message": "spec.replicas cannot go down: removing masters deletes their etcd volumes and data. A control plane may go from 1 master to 3, not back; fewer masters need a new cluster restored from an etcd backup",
        "fieldPath": ".replicas",
        "reason": "FieldValueForbidden"
    },
    {
        "rule": MASTER_ZONES_RULE,
        "message": "spec.availabilityZones cannot move an existing master to another zone: that replaces its etcd volume and network interface and deletes its data. Keep the existing masters' zones in their places (one zone may be extended to three, keeping it first); moving masters needs a new cluster restored from an etcd backup",
        "fieldPath": ".availabilityZones",
        "reason": "FieldValueForbidden"
    }
]))]
pub struct AWSControlPlaneSpec {
    /// The masters' availability zones: one, or three for high availability (two are
    /// tolerated: the third master wraps around to the first zone).
    #[schemars(length(min = 1, max = 3), inner(regex(pattern = AVAILABILITY_ZONE_PATTERN)))]
    pub availability_zones: Vec<String>,
    /// The masters' EC2 instance type, e.g. `m5.xlarge`.
    #[schemars(regex(pattern = INSTANCE_TYPE_PATTERN))]
    pub instance_type: String,
    /// The number of masters, 1 or 3. When absent: 3 if three zones are listed, else 1
    /// ([`AWSControlPlaneSpec::master_replicas`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = [1, 3]))]
    pub replicas: Option<i32>,
}

/// CEL transition rule of [`AWSControlPlaneSpec`]: the master count
/// ([`AWSControlPlaneSpec::master_replicas`]) never goes down, because a master removed takes its
/// etcd volume with it.
pub const MASTER_COUNT_RULE: &str = "(has(self.replicas) ? self.replicas : (size(self.availabilityZones) == 3 ? 3 : 1)) >= (has(oldSelf.replicas) ? oldSelf.replicas : (size(oldSelf.availabilityZones) == 3 ? 3 : 1))";

/// CEL transition rule of [`AWSControlPlaneSpec`]: every existing master keeps its zone. The
/// k-th master sits in zone `k mod len(zones)` (as aws-operator lays them out), and its etcd
/// volume and interface cannot change zone without being replaced.
pub const MASTER_ZONES_RULE: &str = "[0, 1, 2].all(k, k >= (has(oldSelf.replicas) ? oldSelf.replicas : (size(oldSelf.availabilityZones) == 3 ? 3 : 1)) || k >= (has(self.replicas) ? self.replicas : (size(self.availabilityZones) == 3 ? 3 : 1)) || self.availabilityZones[k % size(self.availabilityZones)] == oldSelf.availabilityZones[k % size(oldSelf.availabilityZones)])";

/// The observed state of an `AWSControlPlane`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AWSControlPlaneStatus {
    /// Conditions of the reconciliation; `Ready` says whether the masters are up.
    #[serde(default, skip_serializing_if = "Vec::is_empty", deserialize_with = "null_as_default")]
    pub conditions: Vec<Condition>,
    /// The control plane's CloudFormation stacks.
    #[serde(default, skip_serializing_if = "Vec::is_empty", deserialize_with = "null_as_default")]
    pub stacks: Vec<StackStatus>,
    /// Where the control plane's stacks live, recorded by aws-operator before it creates any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account: Option<RecordedAccount>,
}

/// `status.account` of an `AWSControlPlane` or `AWSMachineDeployment`: the tenant role and
/// region its stacks are created with, written by aws-operator (status is a subresource a
/// tenant is not granted), so that the stacks can still be found and deleted if the AWSCluster
/// disappears first. Annotations are never trusted for this: anyone who may edit the object may
/// set them.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RecordedAccount {
    /// The ARN of the tenant role (an ARN, not a credential).
    pub tenant_role_arn: String,
    /// The region of the stacks.
    pub region: String,
    /// The UID of the AWSCluster the stacks were created for.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cluster_uid: String,
}

impl AWSControlPlaneSpec {
    /// The number of masters: `replicas` when set, else 3 when three zones are listed (one
    /// master per zone), else 1.
    pub fn master_replicas(&self) -> i32 {
        self.replicas.unwrap_or(if self.availability_zones.len() == 3 { 3 } else { 1 })
    }

    /// Checks a schema cannot do: every zone lies in the cluster's `region` and none is listed
    /// twice. Returns every problem found.
    pub fn validate(&self, region: &str) -> Result<(), Vec<FieldError>> {
        let mut errors = Vec::new();
        check_zones("spec.availabilityZones", &self.availability_zones, region, &mut errors);
        into_result(errors)
    }
}

impl AWSControlPlane {
    /// See [`AWSControlPlaneSpec::validate`].
    pub fn validate(&self, region: &str) -> Result<(), Vec<FieldError>> {
        self.spec.validate(region)
    }
}

// ---------------------------------------------------------------------------------------------
// AWSMachineDeployment
// ---------------------------------------------------------------------------------------------

/// The desired state of a node pool: an autoscaling group of workers in one or more zones.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "infrastructure.giantswarm.io",
    version = "v1alpha3",
    kind = "AWSMachineDeployment",
    plural = "awsmachinedeployments",
    namespaced,
    status = "AWSMachineDeploymentStatus",
    category = "giantswarm",
    category = "aws",
    doc = "A node pool of a workload cluster on AWS.",
    printcolumn = r#"{"name":"Cluster","type":"string","jsonPath":".metadata.labels.giantswarm\\.io/cluster","description":"The cluster this node pool belongs to"}"#,
    printcolumn = r#"{"name":"Description","type":"string","jsonPath":".spec.nodePool.description","description":"What the node pool is for"}"#,
    printcolumn = r#"{"name":"Instance type","type":"string","jsonPath":".spec.provider.worker.instanceType","description":"EC2 instance type of the workers"}"#,
    printcolumn = r#"{"name":"Min","type":"integer","jsonPath":".spec.nodePool.scaling.min","description":"Minimum number of workers"}"#,
    printcolumn = r#"{"name":"Max","type":"integer","jsonPath":".spec.nodePool.scaling.max","description":"Maximum number of workers"}"#,
    printcolumn = r#"{"name":"Subnet","type":"string","jsonPath":".metadata.annotations.machine-deployment\\.giantswarm\\.io/subnet","description":"Node pool CIDR allocated by IPAM"}"#,
    printcolumn = r#"{"name":"Zones","type":"string","jsonPath":".spec.provider.availabilityZones","priority":1,"description":"Availability zones of the workers"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status","description":"Whether the node pool is reconciled"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct AWSMachineDeploymentSpec {
    /// Provider-independent node pool settings.
    pub node_pool: AWSMachineDeploymentSpecNodePool,
    /// AWS settings.
    pub provider: AWSMachineDeploymentSpecProvider,
}

/// `spec.nodePool`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AWSMachineDeploymentSpecNodePool {
    /// Free text that helps people tell node pools apart.
    #[serde(default)]
    pub description: String,
    /// Volumes of each worker.
    pub machine: AWSMachineDeploymentSpecNodePoolMachine,
    /// Autoscaling bounds.
    pub scaling: AWSMachineDeploymentSpecNodePoolScaling,
    /// Replace nodes older than this, one at a time, inside the cluster's maintenance windows:
    /// a number and a unit such as `30d` or `720h`, at least a day. Never when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_node_age: Option<String>,
}

/// `spec.nodePool.machine`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct AWSMachineDeploymentSpecNodePoolMachine {
    /// Size of the Docker (container runtime) volume in GB.
    #[serde(rename = "dockerVolumeSizeGB")]
    #[schemars(range(min = 1))]
    pub docker_volume_size_gb: i32,
    /// Size of the kubelet volume in GB.
    #[serde(rename = "kubeletVolumeSizeGB")]
    #[schemars(range(min = 1))]
    pub kubelet_volume_size_gb: i32,
}

/// `spec.nodePool.scaling`: the autoscaling group's bounds.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AWSMachineDeploymentSpecNodePoolScaling {
    /// The fewest workers.
    #[schemars(range(min = 0))]
    pub min: i32,
    /// The most workers; at least `min`.
    #[schemars(range(min = 0))]
    pub max: i32,
}

/// `spec.provider` of an `AWSMachineDeployment`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AWSMachineDeploymentSpecProvider {
    /// The workers' availability zones; the pool's CIDR is split among them.
    #[schemars(length(min = 1), inner(regex(pattern = AVAILABILITY_ZONE_PATTERN)))]
    pub availability_zones: Vec<String>,
    /// How on-demand and spot instances are mixed; absent means on-demand only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_distribution: Option<AWSMachineDeploymentSpecInstanceDistribution>,
    /// The workers' instance type.
    pub worker: AWSMachineDeploymentSpecProviderWorker,
}

/// `spec.provider.instanceDistribution`: the autoscaling group's instances distribution.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AWSMachineDeploymentSpecInstanceDistribution {
    /// How many of the workers are on-demand before any is spot.
    #[serde(default)]
    #[schemars(range(min = 0))]
    pub on_demand_base_capacity: i32,
    /// The percentage of on-demand workers above the base capacity; the rest are spot. Absent
    /// means 100.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 100))]
    pub on_demand_percentage_above_base_capacity: Option<i32>,
}

/// `spec.provider.worker`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AWSMachineDeploymentSpecProviderWorker {
    /// The workers' EC2 instance type, e.g. `m5.2xlarge`.
    #[schemars(regex(pattern = INSTANCE_TYPE_PATTERN))]
    pub instance_type: String,
    /// Whether the autoscaling group may also launch similar instance types (the operator's
    /// "alike" list), which makes spot capacity easier to get.
    #[serde(default)]
    pub use_alike_instance_types: bool,
}

/// The observed state of an `AWSMachineDeployment`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AWSMachineDeploymentStatus {
    /// What runs in AWS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<AWSMachineDeploymentStatusProvider>,
    /// Conditions of the reconciliation; `Ready` says whether the node pool's stacks are in place.
    #[serde(default, skip_serializing_if = "Vec::is_empty", deserialize_with = "null_as_default")]
    pub conditions: Vec<Condition>,
    /// The node pool's CloudFormation stacks.
    #[serde(default, skip_serializing_if = "Vec::is_empty", deserialize_with = "null_as_default")]
    pub stacks: Vec<StackStatus>,
    /// Where the node pool's stacks live, recorded by aws-operator before it creates any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub account: Option<RecordedAccount>,
}

/// `status.provider` of an `AWSMachineDeployment`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AWSMachineDeploymentStatusProvider {
    /// The running workers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker: Option<AWSMachineDeploymentStatusProviderWorker>,
}

/// `status.provider.worker`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AWSMachineDeploymentStatusProviderWorker {
    /// The distinct instance types of the running workers.
    #[serde(default, deserialize_with = "null_as_default")]
    pub instance_types: Vec<String>,
    /// How many running workers are spot instances.
    #[serde(default)]
    pub spot_instances: i32,
}

impl AWSMachineDeploymentSpec {
    /// Checks a schema cannot do: every zone lies in the cluster's `region` and none is listed
    /// twice, and `scaling.min` is at most `scaling.max`. Returns every problem found.
    pub fn validate(&self, region: &str) -> Result<(), Vec<FieldError>> {
        let mut errors = Vec::new();
        check_zones("spec.provider.availabilityZones", &self.provider.availability_zones, region, &mut errors);
        let scaling = &self.node_pool.scaling;
        if scaling.min > scaling.max {
            errors.push(FieldError::new(
                "spec.nodePool.scaling.min",
                scaling.min,
                format!("must not exceed scaling.max ({}); lower min or raise max", scaling.max),
            ));
        }
        into_result(errors)
    }
}

/// The log volume's size when a node pool does not set it (upstream's).
pub const DEFAULT_LOG_VOLUME_GB: u32 = 15;
/// The largest EBS gp3 volume, GiB.
const MAX_VOLUME_GB: u32 = 16_384;

impl AWSMachineDeployment {
    /// [`AWSMachineDeploymentSpec::validate`], and the volume size annotations.
    pub fn validate(&self, region: &str) -> Result<(), Vec<FieldError>> {
        let mut errors = self.spec.validate(region).err().unwrap_or_default();
        errors.extend(self.log_volume_gb().err());
        errors.extend(self.containerd_volume_gb().err());
        into_result(errors)
    }

    /// The log volume's size in GiB: annotation `alpha.aws.giantswarm.io/logging-volume-size`,
    /// else [`DEFAULT_LOG_VOLUME_GB`].
    pub fn log_volume_gb(&self) -> Result<u32, FieldError> {
        self.volume_annotation(crate::labels::AWS_LOGGING_VOLUME_SIZE, DEFAULT_LOG_VOLUME_GB)
    }

    /// Containerd's volume size in GiB: annotation
    /// `alpha.aws.giantswarm.io/containerd-volume-size`, else the docker volume's size.
    pub fn containerd_volume_gb(&self) -> Result<u32, FieldError> {
        let docker = self.spec.node_pool.machine.docker_volume_size_gb.max(1) as u32;
        self.volume_annotation(crate::labels::AWS_CONTAINERD_VOLUME_SIZE, docker)
    }

    fn volume_annotation(&self, key: &str, default: u32) -> Result<u32, FieldError> {
        let Some(value) = self.metadata.annotations.as_ref().and_then(|a| a.get(key)) else {
            return Ok(default);
        };
        match value.trim().parse::<u32>() {
            Ok(gib) if (1..=MAX_VOLUME_GB).contains(&gib) => Ok(gib),
            _ => Err(FieldError::new(
                format!("metadata.annotations[{key}]"),
                value,
                format!("must be a whole number of GiB from 1 to {MAX_VOLUME_GB}; remove it for {default}"),
            )),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// NetworkPool
// ---------------------------------------------------------------------------------------------

/// An address range that clusters referencing it allocate their CIDR from, instead of the
/// operator's default range (e.g. to avoid a range already used by a peered network).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[kube(
    group = "infrastructure.giantswarm.io",
    version = "v1alpha3",
    kind = "NetworkPool",
    plural = "networkpools",
    namespaced,
    category = "giantswarm",
    category = "aws",
    doc = "An address range that workload clusters allocate their CIDR from.",
    printcolumn = r#"{"name":"CIDR","type":"string","jsonPath":".spec.cidrBlock","description":"The range clusters allocate from"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct NetworkPoolSpec {
    /// The range, e.g. `10.10.0.0/16`.
    #[schemars(regex(pattern = CIDR_PATTERN))]
    pub cidr_block: String,
}

impl NetworkPoolSpec {
    /// Checks a schema cannot do: the range has no host bits set.
    pub fn validate(&self) -> Result<(), Vec<FieldError>> {
        let mut errors = Vec::new();
        check_cidr("spec.cidrBlock", &self.cidr_block, &mut errors);
        into_result(errors)
    }
}

impl NetworkPool {
    /// See [`NetworkPoolSpec::validate`].
    pub fn validate(&self) -> Result<(), Vec<FieldError>> {
        self.spec.validate()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::CustomResourceExt;
    use serde_json::json;

    fn matches(pattern: &str, value: &str) -> bool {
        regex::Regex::new(pattern).is_ok_and(|re| re.is_match(value))
    }

    #[test]
    fn cidr_pattern() {
        for ok in ["10.1.0.0/16", "0.0.0.0/0", "255.255.255.255/32", "192.168.10.0/24", "10.2.0.0/9"] {
            assert!(matches(CIDR_PATTERN, ok), "{ok} should match");
        }
        for bad in [
            "10.1.0.0",
            "10.1.0.0/33",
            "256.1.0.0/16",
            "10.1.0/16",
            "10.01.0.0/16",
            "10.1.0.0/016",
            " 10.1.0.0/16",
            "::/0",
        ] {
            assert!(!matches(CIDR_PATTERN, bad), "{bad} should not match");
        }
    }

    #[test]
    fn instance_type_pattern() {
        for ok in [
            "m5.xlarge",
            "c6gn.16xlarge",
            "u-6tb1.metal",
            "t3.nano",
            "mac2-m2pro.metal",
            "x2iedn.32xlarge",
            "r7a.medium",
        ] {
            assert!(matches(INSTANCE_TYPE_PATTERN, ok), "{ok} should match");
        }
        for bad in ["m5", "M5.XL", "m5..large", "m5.large!", "m.large", ".large", "m5.", "m5.large.x", ""] {
            assert!(!matches(INSTANCE_TYPE_PATTERN, bad), "{bad} should not match");
        }
    }

    #[test]
    fn zone_and_region_patterns() {
        for ok in ["eu-central-1a", "us-gov-west-1b", "ap-southeast-2c", "us-west-2-lax-1a"] {
            assert!(matches(AVAILABILITY_ZONE_PATTERN, ok), "{ok} should match");
        }
        for bad in ["eu-central-1", "eu-central-1A", "eucentral1a", "eu-central-a", "EU-central-1a", "eu-central-1ab1"]
        {
            assert!(!matches(AVAILABILITY_ZONE_PATTERN, bad), "{bad} should not match");
        }
        for ok in ["eu-central-1", "us-gov-west-1", "cn-north-1"] {
            assert!(matches(REGION_PATTERN, ok), "{ok} should match");
        }
        for bad in ["eu-central-1a", "eu-central", "Eu-central-1", "eu_central_1"] {
            assert!(!matches(REGION_PATTERN, bad), "{bad} should not match");
        }
    }

    fn control_plane(zones: &[&str], replicas: Option<i32>) -> AWSControlPlaneSpec {
        AWSControlPlaneSpec {
            availability_zones: zones.iter().map(|z| z.to_string()).collect(),
            instance_type: "m5.xlarge".into(),
            replicas,
        }
    }

    #[test]
    fn master_replicas_default_to_one_per_zone_for_three_zones() {
        assert_eq!(control_plane(&["eu-central-1a"], None).master_replicas(), 1);
        assert_eq!(control_plane(&["eu-central-1a", "eu-central-1b"], None).master_replicas(), 1);
        assert_eq!(control_plane(&["eu-central-1a", "eu-central-1b", "eu-central-1c"], None).master_replicas(), 3);
        assert_eq!(control_plane(&["eu-central-1a"], Some(3)).master_replicas(), 3);
        assert_eq!(control_plane(&["eu-central-1a", "eu-central-1b", "eu-central-1c"], Some(1)).master_replicas(), 1);
    }

    #[test]
    fn control_plane_zones_must_lie_in_the_region() {
        assert_eq!(control_plane(&["eu-central-1a", "eu-central-1b"], None).validate("eu-central-1"), Ok(()));
        let errors = control_plane(&["eu-central-1a", "eu-west-1b", "eu-central-10a", "eu-central-1a"], None)
            .validate("eu-central-1")
            .unwrap_err();
        let fields: Vec<_> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["spec.availabilityZones[1]", "spec.availabilityZones[2]", "spec.availabilityZones[3]"]);
        assert_eq!(
            errors[0].to_string(),
            "spec.availabilityZones[1]: invalid value \"eu-west-1b\": availability zone is not in the cluster's \
             region eu-central-1; use a zone such as eu-central-1a"
        );
        assert!(errors[2].message.contains("listed twice"), "{}", errors[2]);
        // Local Zones belong to their parent region.
        assert_eq!(control_plane(&["us-west-2-lax-1a"], None).validate("us-west-2"), Ok(()));
    }

    fn machine_deployment(zones: &[&str], min: i32, max: i32) -> AWSMachineDeploymentSpec {
        AWSMachineDeploymentSpec {
            node_pool: AWSMachineDeploymentSpecNodePool {
                description: "default".into(),
                machine: AWSMachineDeploymentSpecNodePoolMachine {
                    docker_volume_size_gb: 100,
                    kubelet_volume_size_gb: 100,
                },
                scaling: AWSMachineDeploymentSpecNodePoolScaling { min, max },
                max_node_age: None,
            },
            provider: AWSMachineDeploymentSpecProvider {
                availability_zones: zones.iter().map(|z| z.to_string()).collect(),
                instance_distribution: None,
                worker: AWSMachineDeploymentSpecProviderWorker {
                    instance_type: "m5.2xlarge".into(),
                    use_alike_instance_types: false,
                },
            },
        }
    }

    #[test]
    fn node_pool_scaling_and_zones() {
        assert_eq!(machine_deployment(&["eu-central-1a"], 3, 3).validate("eu-central-1"), Ok(()));
        let errors = machine_deployment(&["us-east-1a"], 5, 3).validate("eu-central-1").unwrap_err();
        let fields: Vec<_> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["spec.provider.availabilityZones[0]", "spec.nodePool.scaling.min"]);
        assert_eq!(errors[1].value, "5");
        assert_eq!(errors[1].message, "must not exceed scaling.max (3); lower min or raise max");
    }

    #[test]
    fn volume_size_annotations_default_and_are_checked() {
        let mut md = AWSMachineDeployment::new("np001", machine_deployment(&["eu-central-1a"], 1, 3));
        assert_eq!((md.log_volume_gb(), md.containerd_volume_gb()), (Ok(15), Ok(100)), "defaults: 15 and docker's");
        let annotations = md.metadata.annotations.get_or_insert_with(Default::default);
        annotations.insert(crate::labels::AWS_LOGGING_VOLUME_SIZE.into(), "30".into());
        annotations.insert(crate::labels::AWS_CONTAINERD_VOLUME_SIZE.into(), "250".into());
        assert_eq!((md.log_volume_gb(), md.containerd_volume_gb()), (Ok(30), Ok(250)));
        assert_eq!(md.validate("eu-central-1"), Ok(()));
        for bad in ["0", "-5", "15GB", "20000"] {
            let annotations = md.metadata.annotations.get_or_insert_with(Default::default);
            annotations.insert(crate::labels::AWS_LOGGING_VOLUME_SIZE.into(), bad.into());
            let errors = md.validate("eu-central-1").unwrap_err();
            assert_eq!(errors.len(), 1, "{bad}: {errors:?}");
            assert_eq!(errors[0].field, "metadata.annotations[alpha.aws.giantswarm.io/logging-volume-size]");
            assert_eq!(errors[0].value, bad);
            assert!(errors[0].message.contains("remove it for 15"), "{}", errors[0].message);
        }
    }

    #[test]
    fn cidr_blocks_must_not_have_host_bits() {
        let pool = NetworkPoolSpec { cidr_block: "10.10.0.0/16".into() };
        assert_eq!(pool.validate(), Ok(()));
        let errors = NetworkPoolSpec { cidr_block: "10.10.3.0/16".into() }.validate().unwrap_err();
        assert_eq!(errors[0].field, "spec.cidrBlock");
        assert_eq!(errors[0].message, "host bits are set; use the network address 10.10.0.0/16");
        assert!(NetworkPoolSpec { cidr_block: "0.0.0.0/0".into() }.validate().is_ok());
        assert!(NetworkPoolSpec { cidr_block: "10.0.0.1/32".into() }.validate().is_ok());
        assert!(NetworkPoolSpec { cidr_block: "10.0.0.0".into() }.validate().is_err());
    }

    fn cluster(value: serde_json::Value) -> AWSCluster {
        serde_json::from_value(value).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn cluster_validation_reports_every_problem() {
        let mut c = cluster(json!({
            "apiVersion": "infrastructure.giantswarm.io/v1alpha3", "kind": "AWSCluster",
            "metadata": {"name": "al9qy", "namespace": "org-acme"},
            "spec": {
                "cluster": {"description": "prod", "dns": {"domain": "gauss.eu-central-1.aws.gigantic.io"}},
                "provider": {
                    "credentialSecret": {"name": "credential-al9qy", "namespace": "giantswarm"},
                    "pods": {"cidrBlock": "10.2.0.0/16"},
                    "region": "eu-central-1"
                }
            }
        }));
        assert_eq!(c.validate(), Ok(()));
        c.spec.provider.pods =
            Some(AWSClusterSpecProviderPods { cidr_block: Some("10.2.1.0/16".into()), ..Default::default() });
        c.spec.provider.master = Some(AWSClusterSpecProviderMaster {
            availability_zone: "eu-west-1a".into(),
            instance_type: "m5.xlarge".into(),
        });
        let errors = c.validate().unwrap_err();
        let fields: Vec<_> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["spec.provider.master.availabilityZone", "spec.provider.pods.cidrBlock"]);
    }

    #[test]
    fn reads_go_written_objects_with_upstream_field_names() {
        let c = cluster(json!({
            "apiVersion": "infrastructure.giantswarm.io/v1alpha3", "kind": "AWSCluster",
            "metadata": {"name": "al9qy"},
            "spec": {
                "cluster": {
                    "description": "", "dns": {"domain": "example.com"}, "kubeProxy": {"conntrackMaxPerCore": 0},
                    "oidc": {"issuerURL": "https://dex.example.com", "clientID": "dex-k8s", "claims": {"username": "email", "groups": "groups"}}
                },
                "provider": {
                    "credentialSecret": {"name": "credential-al9qy", "namespace": "giantswarm"},
                    "master": {"availabilityZone": "eu-central-1a", "instanceType": "m5.xlarge"},
                    "nodes": {"networkPool": "pool-a"},
                    "pods": {"cidrBlock": "10.2.0.0/16", "externalSNAT": true},
                    "region": "eu-central-1"
                }
            },
            "status": {
                "cluster": {"conditions": [{"lastTransitionTime": "2020-01-01T00:00:00Z", "status": "True", "type": "Created"}],
                            "versions": null},
                "provider": {"network": {"cidr": "10.1.0.0/24", "vpcID": "vpc-0abc"}}
            }
        }));
        assert_eq!(c.spec.cluster.oidc.as_ref().map(|o| o.issuer_url.as_str()), Some("https://dex.example.com"));
        assert_eq!(c.cidr(), Some("10.1.0.0/24"));
        assert_eq!(c.pod_cidr(), Some("10.2.0.0/16"));
        assert_eq!(c.network_pool(), Some("pool-a"));
        let status = c.status.as_ref();
        assert_eq!(status.and_then(|s| s.provider.network.vpc_id.as_deref()), Some("vpc-0abc"));
        assert!(status.is_some_and(|s| s.cluster.has_condition(crate::cluster_status::ClusterCondition::Created)));

        // And writes them back under the same names.
        let written = serde_json::to_value(&c.spec).unwrap_or_default();
        assert_eq!(written["cluster"]["oidc"]["clientID"], "dex-k8s");
        assert_eq!(
            written["provider"]["pods"],
            json!({"cidrBlock": "10.2.0.0/16", "externalSNAT": true}),
            "the deprecated externalSNAT is kept as written"
        );
        let md = serde_json::to_value(machine_deployment(&["eu-central-1a"], 1, 2)).unwrap_or_default();
        assert_eq!(md["nodePool"]["machine"], json!({"dockerVolumeSizeGB": 100, "kubeletVolumeSizeGB": 100}));
        let network = AWSClusterStatusProviderNetwork { cidr: None, vpc_id: Some("vpc-1".into()) };
        assert_eq!(serde_json::to_value(network).unwrap_or_default(), json!({"vpcID": "vpc-1"}));
    }

    #[test]
    fn external_snat_is_accepted_and_named_as_ignored() {
        let mut c = cluster(json!({
            "apiVersion": "infrastructure.giantswarm.io/v1alpha3", "kind": "AWSCluster",
            "metadata": {"name": "al9qy"},
            "spec": {
                "cluster": {"dns": {"domain": "example.com"}},
                "provider": {
                    "credentialSecret": {"name": "credential-al9qy", "namespace": "giantswarm"},
                    "pods": {"externalSNAT": false},
                    "region": "eu-central-1"
                }
            }
        }));
        assert_eq!(c.ignored_fields().iter().map(|(f, _)| *f).collect::<Vec<_>>(), ["spec.provider.pods.externalSNAT"]);
        c.spec.provider.pods =
            Some(AWSClusterSpecProviderPods { cidr_block: Some("10.2.0.0/16".into()), ..Default::default() });
        assert!(c.ignored_fields().is_empty());
    }

    #[test]
    fn stack_status_shape() {
        let stack = StackStatus {
            name: "cluster-al9qy-tccpi".into(),
            kind: "tccpi".into(),
            account: StackAccount::ControlPlane,
            status: "CREATE_COMPLETE".into(),
            reason: None,
            last_transition_time: None,
            attempts: None,
            pending_update: None,
            applied_plan: None,
        };
        assert_eq!(
            serde_json::to_value(&stack).unwrap_or_default(),
            json!({"name": "cluster-al9qy-tccpi", "kind": "tccpi", "account": "controlPlane", "status": "CREATE_COMPLETE"})
        );
    }

    /// The OpenAPI schema of a CRD's first version, as JSON.
    fn schema(
        crd: &k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    ) -> serde_json::Value {
        let version = &crd.spec.versions[0];
        serde_json::to_value(version.schema.as_ref().and_then(|s| s.open_api_v3_schema.as_ref())).unwrap_or_default()
    }

    #[test]
    fn schemas_carry_the_validation() {
        let cp = schema(&AWSControlPlane::crd());
        let spec = &cp["properties"]["spec"]["properties"];
        assert_eq!(spec["availabilityZones"]["minItems"], 1);
        assert_eq!(spec["availabilityZones"]["maxItems"], 3);
        assert_eq!(spec["availabilityZones"]["items"]["pattern"], AVAILABILITY_ZONE_PATTERN);
        assert_eq!(spec["instanceType"]["pattern"], INSTANCE_TYPE_PATTERN);
        assert_eq!(spec["replicas"]["enum"], json!([1, 3]));
        let rules: Vec<&str> = cp["properties"]["spec"]["x-kubernetes-validations"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r["rule"].as_str())
            .collect();
        assert_eq!(rules, [MASTER_COUNT_RULE, MASTER_ZONES_RULE]);

        let md = schema(&AWSMachineDeployment::crd());
        let spec = &md["properties"]["spec"]["properties"];
        assert_eq!(spec["nodePool"]["properties"]["scaling"]["properties"]["min"]["minimum"], 0.0);
        assert_eq!(spec["nodePool"]["properties"]["machine"]["properties"]["dockerVolumeSizeGB"]["minimum"], 1.0);
        let distribution = &spec["provider"]["properties"]["instanceDistribution"]["properties"];
        assert_eq!(distribution["onDemandPercentageAboveBaseCapacity"]["maximum"], 100.0);
        assert_eq!(distribution["onDemandBaseCapacity"]["default"], 0);

        let cluster = schema(&cluster_crd());
        let rules: Vec<&str> = cluster["x-kubernetes-validations"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r["rule"].as_str())
            .collect();
        assert_eq!(rules, [crate::cluster_id::NAME_RULE]);
        let provider = &cluster["properties"]["spec"]["properties"]["provider"]["properties"];
        assert_eq!(provider["pods"]["properties"]["cidrBlock"]["pattern"], CIDR_PATTERN);
        assert_eq!(provider["region"]["pattern"], REGION_PATTERN);
        let pool = schema(&NetworkPool::crd());
        assert_eq!(pool["properties"]["spec"]["properties"]["cidrBlock"]["pattern"], CIDR_PATTERN);
    }

    #[test]
    fn crds_are_namespaced_with_status_where_there_is_one() {
        for (crd, name, status) in [
            (AWSCluster::crd(), "awsclusters.infrastructure.giantswarm.io", true),
            (AWSControlPlane::crd(), "awscontrolplanes.infrastructure.giantswarm.io", true),
            (AWSMachineDeployment::crd(), "awsmachinedeployments.infrastructure.giantswarm.io", true),
            (NetworkPool::crd(), "networkpools.infrastructure.giantswarm.io", false),
        ] {
            assert_eq!(crd.metadata.name.as_deref(), Some(name));
            assert_eq!(crd.spec.scope, "Namespaced");
            let has_status = crd.spec.versions[0].subresources.as_ref().and_then(|s| s.status.as_ref()).is_some();
            assert_eq!(has_status, status, "{name}");
        }
        let columns: Vec<_> = AWSCluster::crd().spec.versions[0]
            .additional_printer_columns
            .iter()
            .flatten()
            .map(|c| c.name.clone())
            .collect();
        assert_eq!(columns, ["Region", "CIDR", "Release", "Ready", "Age"]);
    }
}

//! The legacy AWS custom resource of `provider.giantswarm.io/v1alpha1`: [`AWSConfig`], one per
//! workload cluster of the generation before node pools (a single master, one worker group, the
//! `guest-main`, `host-setup` and `host-main` stacks).
//!
//! The JSON shape follows `giantswarm/apiextensions` (`pkg/apis/provider/v1alpha1/aws_types.go`
//! and its CRD), so objects written by Giant Swarm's tooling are read and stored unchanged:
//! every field of the original `awsconfigs` CRD is in the schema (including the `api`, `etcd`
//! and `ingress` blocks the original deprecated), with upstream's spelling (`imageID`,
//! `dockerVolumeSizeGB`, `privateSubnetCidr`, `peerId`). `spec.cluster` is the provider-independent
//! block the [`KVMConfig`](crate::kvm::KVMConfig) has too, built from the same types.
//!
//! # Validation
//!
//! The original CRD declared no constraints (it preserved unknown fields), so the schema here
//! rejects only what no Go operator could have used either: malformed cluster and node ids and
//! CIDR blocks, negative sizes and timeouts. [`AWSConfig::validate`] checks what the legacy
//! resource set needs to build the stacks (one master, at least one worker, an AMI and an
//! instance type for each, an availability zone with its two subnets inside the VPC, the
//! management VPC to peer with) and names the field and the fix for each problem, where the Go
//! operator indexed `masters[0]` and `workers[0]` and crashed on an empty list.

use std::net::Ipv4Addr;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::cluster_status::StatusCluster;
use crate::go::null_as_default;
use crate::kvm::{
    CLUSTER_ID_MAX_LENGTH, CLUSTER_ID_PATTERN, ClusterCalico, ClusterCustomer, ClusterDocker, ClusterEtcd,
    ClusterKubernetes, ClusterNode, ClusterScaling,
};
use crate::validation::{FieldError, check_cidr, into_result, parse_cidr};

/// The CIDR fields of `spec.aws.vpc`: an IPv4 CIDR block, or `""` as Go wrote unset strings.
pub const OPTIONAL_CIDR_PATTERN: &str = r"^$|^((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])/(3[0-2]|[12]?[0-9])$";
/// The docker volume of a worker when `dockerVolumeSizeGB` is 0, in GB (the original's default).
pub const DEFAULT_DOCKER_VOLUME_SIZE_GB: i64 = 100;
/// The idle timeout of a load balancer when its `idleTimeoutSeconds` is 0 (the original's default).
pub const DEFAULT_ELB_IDLE_TIMEOUT_SECONDS: i64 = 60;

/// A workload cluster of the legacy AWS generation: one master instance and one worker group.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "provider.giantswarm.io",
    version = "v1alpha1",
    kind = "AWSConfig",
    plural = "awsconfigs",
    namespaced,
    status = "AWSConfigStatus",
    category = "giantswarm",
    category = "aws",
    doc = "A workload cluster on AWS of the generation before node pools: one master instance and one worker \
           Auto Scaling group, in the stacks guest-main, host-setup and host-main.",
    printcolumn = r#"{"name":"Region","type":"string","jsonPath":".spec.aws.region","description":"AWS region"}"#,
    printcolumn = r#"{"name":"Workers","type":"integer","jsonPath":".spec.cluster.scaling.max","description":"Largest worker count"}"#,
    printcolumn = r#"{"name":"Release","type":"string","jsonPath":".metadata.labels.release\\.giantswarm\\.io/version","description":"Giant Swarm release"}"#,
    printcolumn = r#"{"name":"Operator","type":"string","jsonPath":".metadata.labels.aws-operator\\.giantswarm\\.io/version","description":"aws-operator version that reconciles the cluster"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct AWSConfigSpec {
    /// Provider-independent cluster settings.
    pub cluster: AWSConfigSpecCluster,
    /// AWS settings: region, availability zone, network, node shapes, DNS zones.
    #[serde(default, deserialize_with = "null_as_default")]
    pub aws: AWSConfigSpecAWS,
    /// The version bundle of the operator that reconciled the cluster before Releases; the
    /// `aws-operator.giantswarm.io/version` label wins when both are set.
    #[serde(default, deserialize_with = "null_as_default")]
    pub version_bundle: AWSConfigSpecVersionBundle,
}

/// `spec.cluster`: upstream's provider-independent `Cluster` block.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AWSConfigSpecCluster {
    /// Calico settings of the workload cluster.
    #[serde(default, deserialize_with = "null_as_default")]
    pub calico: ClusterCalico,
    /// The customer (organization) that owns the cluster.
    #[serde(default, deserialize_with = "null_as_default")]
    pub customer: ClusterCustomer,
    /// Docker settings of the nodes.
    #[serde(default, deserialize_with = "null_as_default")]
    pub docker: ClusterDocker,
    /// etcd settings.
    #[serde(default, deserialize_with = "null_as_default")]
    pub etcd: ClusterEtcd,
    /// The cluster id: the management-cluster namespace of its objects and a part of the names
    /// of its AWS resources, e.g. `p3x7d`.
    #[schemars(regex(pattern = CLUSTER_ID_PATTERN), length(min = 1, max = CLUSTER_ID_MAX_LENGTH))]
    pub id: String,
    /// Kubernetes settings.
    pub kubernetes: ClusterKubernetes,
    /// The master node ids (one).
    #[serde(default, deserialize_with = "null_as_default")]
    pub masters: Vec<ClusterNode>,
    /// The worker count bounds of the cluster-autoscaler.
    #[serde(default, deserialize_with = "null_as_default")]
    pub scaling: ClusterScaling,
    /// Deprecated and unused.
    #[serde(default)]
    pub version: String,
    /// The worker node ids.
    #[serde(default, deserialize_with = "null_as_default")]
    pub workers: Vec<ClusterNode>,
}

/// `spec.aws`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AWSConfigSpecAWS {
    /// The API load balancer; deprecated upstream, its idle timeout is still honoured.
    #[serde(default, deserialize_with = "null_as_default")]
    pub api: AWSConfigSpecAWSComponent,
    /// The availability zone of the master and of the first subnets, e.g. `eu-central-1a`.
    #[serde(default)]
    pub az: String,
    /// How many availability zones the workers spread over; the zones themselves and their
    /// subnets are in `status.aws.availabilityZones` once allocated. 0 means the single zone
    /// of `az`.
    #[serde(default)]
    #[schemars(range(min = 0, max = 4))]
    pub availability_zones: i64,
    /// The Secret with the IAM role to assume in the cluster's AWS account; empty for the
    /// management account's default.
    #[serde(default, deserialize_with = "null_as_default")]
    pub credential_secret: AWSConfigCredentialSecret,
    /// The etcd load balancer; deprecated upstream, its idle timeout is still honoured.
    #[serde(default, deserialize_with = "null_as_default")]
    pub etcd: AWSConfigSpecAWSComponent,
    /// Hosted zones of the management account under which the cluster's zone `<id>.k8s.<name>`
    /// is delegated.
    #[serde(default, deserialize_with = "null_as_default")]
    pub hosted_zones: AWSConfigSpecAWSHostedZones,
    /// The ingress load balancer; deprecated upstream, its idle timeout is still honoured.
    #[serde(default, deserialize_with = "null_as_default")]
    pub ingress: AWSConfigSpecAWSComponent,
    /// The master's shape (one entry).
    #[serde(default, deserialize_with = "null_as_default")]
    pub masters: Vec<AWSConfigSpecAWSNode>,
    /// The AWS region, e.g. `eu-central-1`.
    #[serde(default)]
    pub region: String,
    /// The cluster's VPC and the management VPC it peers with.
    #[serde(default, deserialize_with = "null_as_default")]
    pub vpc: AWSConfigSpecAWSVPC,
    /// One entry per worker; the worker group's size is their count and its shape the first
    /// entry's.
    #[serde(default, deserialize_with = "null_as_default")]
    pub workers: Vec<AWSConfigSpecAWSNode>,
}

/// `spec.aws.api`, `spec.aws.etcd` and `spec.aws.ingress`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AWSConfigSpecAWSComponent {
    /// Deprecated and unused: the zones are `spec.aws.hostedZones`.
    #[serde(default)]
    pub hosted_zones: String,
    /// The component's load balancer.
    #[serde(default, deserialize_with = "null_as_default")]
    pub elb: AWSConfigSpecAWSELB,
}

/// A load balancer's settings.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AWSConfigSpecAWSELB {
    /// Seconds an idle connection is kept open; 0 for the default (60).
    #[serde(default)]
    #[schemars(range(min = 0, max = 4000))]
    pub idle_timeout_seconds: i64,
}

/// `spec.aws.credentialSecret`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AWSConfigCredentialSecret {
    /// The Secret's name.
    #[serde(default)]
    pub name: String,
    /// The Secret's namespace.
    #[serde(default)]
    pub namespace: String,
}

/// `spec.aws.hostedZones`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AWSConfigSpecAWSHostedZones {
    /// The zone of `api.<id>.k8s.<name>`.
    #[serde(default, deserialize_with = "null_as_default")]
    pub api: AWSConfigSpecAWSHostedZonesZone,
    /// The zone of `etcd.<id>.k8s.<name>`.
    #[serde(default, deserialize_with = "null_as_default")]
    pub etcd: AWSConfigSpecAWSHostedZonesZone,
    /// The zone of `ingress.<id>.k8s.<name>` and `*.<id>.k8s.<name>`.
    #[serde(default, deserialize_with = "null_as_default")]
    pub ingress: AWSConfigSpecAWSHostedZonesZone,
}

/// One hosted zone of `spec.aws.hostedZones`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AWSConfigSpecAWSHostedZonesZone {
    /// The zone name, e.g. `gauss.eu-central-1.aws.gigantic.io`.
    #[serde(default)]
    pub name: String,
}

/// A master's or worker's shape.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AWSConfigSpecAWSNode {
    /// The AMI, e.g. `ami-0a1b2c3d4e5f67890`.
    #[serde(rename = "imageID", default)]
    pub image_id: String,
    /// The EC2 instance type, e.g. `m5.xlarge`.
    #[serde(default)]
    pub instance_type: String,
    /// The docker volume in GB; 0 for the default (100).
    #[serde(rename = "dockerVolumeSizeGB", default)]
    #[schemars(range(min = 0, max = 16384))]
    pub docker_volume_size_gb: i64,
}

/// `spec.aws.vpc`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AWSConfigSpecAWSVPC {
    /// The cluster VPC's CIDR block, e.g. `10.1.0.0/16`.
    #[serde(default)]
    #[schemars(regex(pattern = OPTIONAL_CIDR_PATTERN))]
    pub cidr: String,
    /// The private subnet of `spec.aws.az` (masters, workers, internal load balancers).
    #[serde(default)]
    #[schemars(regex(pattern = OPTIONAL_CIDR_PATTERN))]
    pub private_subnet_cidr: String,
    /// The public subnet of `spec.aws.az` (NAT gateway, internet-facing load balancers).
    #[serde(default)]
    #[schemars(regex(pattern = OPTIONAL_CIDR_PATTERN))]
    pub public_subnet_cidr: String,
    /// The `Name` tags of the management VPC's route tables that get a route to the cluster's
    /// private subnets through the peering.
    #[serde(default, deserialize_with = "null_as_default")]
    pub route_table_names: Vec<String>,
    /// The management VPC the cluster's VPC peers with, e.g. `vpc-0a1b2c3d`.
    #[serde(default)]
    pub peer_id: String,
}

/// `spec.versionBundle`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AWSConfigSpecVersionBundle {
    /// The operator version that reconciled the cluster before the version label, e.g. `4.2.0`.
    #[serde(default)]
    pub version: String,
}

/// `status` of an [`AWSConfig`].
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AWSConfigStatus {
    /// `metav1.Condition`s: `Ready` (bad input names the field and the fix here) and
    /// `ReleaseResolved`, as for every kind the operators reconcile. New here: the original's
    /// lifecycle is in `cluster.conditions`, which stays as it was.
    #[serde(default, deserialize_with = "null_as_default", skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition>,
    /// What was allocated on AWS.
    #[serde(default, deserialize_with = "null_as_default")]
    pub aws: AWSConfigStatusAWS,
    /// The cluster lifecycle, network, nodes and versions.
    #[serde(default, deserialize_with = "null_as_default")]
    pub cluster: StatusCluster,
    /// The cluster's CloudFormation stacks (`host-setup`, `guest-main`, `host-main`), as for the
    /// node-pools kinds. New here.
    #[serde(default, skip_serializing_if = "Vec::is_empty", deserialize_with = "null_as_default")]
    pub stacks: Vec<crate::aws::StackStatus>,
}

/// `status.aws`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AWSConfigStatusAWS {
    /// The availability zones of the cluster and their subnets, in allocation order.
    #[serde(default, deserialize_with = "null_as_default")]
    pub availability_zones: Vec<AWSConfigStatusAWSAvailabilityZone>,
    /// The worker Auto Scaling group.
    #[serde(default, deserialize_with = "null_as_default")]
    pub auto_scaling_group: AWSConfigStatusAWSAutoScalingGroup,
}

/// `status.aws.autoScalingGroup`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AWSConfigStatusAWSAutoScalingGroup {
    /// The group's name.
    #[serde(default)]
    pub name: String,
}

/// One entry of `status.aws.availabilityZones`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AWSConfigStatusAWSAvailabilityZone {
    /// The zone, e.g. `eu-central-1b`.
    #[serde(default)]
    pub name: String,
    /// Its subnets.
    #[serde(default, deserialize_with = "null_as_default")]
    pub subnet: AWSConfigStatusAWSAvailabilityZoneSubnet,
}

/// `status.aws.availabilityZones[].subnet`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AWSConfigStatusAWSAvailabilityZoneSubnet {
    /// The private subnet.
    #[serde(default, deserialize_with = "null_as_default")]
    pub private: AWSConfigSubnet,
    /// The public subnet.
    #[serde(default, deserialize_with = "null_as_default")]
    pub public: AWSConfigSubnet,
}

/// A subnet's CIDR block.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AWSConfigSubnet {
    /// E.g. `10.1.0.0/25`.
    #[serde(default)]
    pub cidr: String,
}

/// An availability zone of a legacy cluster and its two subnets, as the stacks use them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LegacyZone {
    /// The zone, e.g. `eu-central-1a`.
    pub name: String,
    /// The private subnet's CIDR block.
    pub private_cidr: String,
    /// The public subnet's CIDR block.
    pub public_cidr: String,
    /// Where the zone was read from, for error messages.
    pub source: ZoneSource,
}

/// Where a [`LegacyZone`] was read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ZoneSource {
    /// `spec.aws.az` and the subnets of `spec.aws.vpc`.
    Spec,
    /// The entry of `status.aws.availabilityZones` at this index.
    Status(usize),
}

impl ZoneSource {
    /// The fields of the zone's name, private subnet and public subnet.
    pub fn fields(self) -> [String; 3] {
        match self {
            ZoneSource::Spec => {
                ["spec.aws.az".into(), "spec.aws.vpc.privateSubnetCidr".into(), "spec.aws.vpc.publicSubnetCidr".into()]
            }
            ZoneSource::Status(i) => {
                let p = format!("status.aws.availabilityZones[{i}]");
                [format!("{p}.name"), format!("{p}.subnet.private.cidr"), format!("{p}.subnet.public.cidr")]
            }
        }
    }
}

impl AWSConfig {
    /// See [`AWSConfigSpec::validate_with_zones`].
    pub fn validate(&self) -> Result<(), Vec<FieldError>> {
        self.spec.validate_with_zones(&self.zones(), self.vpc_cidr())
    }

    /// The cluster id (`spec.cluster.id`).
    pub fn cluster_id(&self) -> &str {
        &self.spec.cluster.id
    }

    /// The cluster's availability zones and subnets: `status.aws.availabilityZones` once they
    /// are allocated, else the single zone `spec.aws.az` with the subnets of `spec.aws.vpc`.
    /// The first zone holds the master.
    pub fn zones(&self) -> Vec<LegacyZone> {
        let allocated = self.status.as_ref().map(|s| s.aws.availability_zones.as_slice()).unwrap_or_default();
        if !allocated.is_empty() {
            return allocated
                .iter()
                .enumerate()
                .map(|(i, z)| LegacyZone {
                    name: z.name.clone(),
                    private_cidr: z.subnet.private.cidr.clone(),
                    public_cidr: z.subnet.public.cidr.clone(),
                    source: ZoneSource::Status(i),
                })
                .collect();
        }
        let aws = &self.spec.aws;
        vec![LegacyZone {
            name: aws.az.clone(),
            private_cidr: aws.vpc.private_subnet_cidr.clone(),
            public_cidr: aws.vpc.public_subnet_cidr.clone(),
            source: ZoneSource::Spec,
        }]
    }

    /// The VPC's CIDR block and the field it was read from: `status.cluster.network.cidr` once
    /// allocated, else `spec.aws.vpc.cidr`.
    pub fn vpc_cidr(&self) -> (&'static str, &str) {
        match self.status.as_ref().map(|s| s.cluster.network.cidr.as_str()) {
            Some(cidr) if !cidr.is_empty() => ("status.cluster.network.cidr", cidr),
            _ => ("spec.aws.vpc.cidr", &self.spec.aws.vpc.cidr),
        }
    }
}

impl AWSConfigSpec {
    /// Every problem that stops the legacy resource set from building the cluster's stacks, with
    /// the field, the value and the fix, given the zones the cluster uses ([`AWSConfig::zones`]).
    /// `vpc` is the field and value of the VPC's CIDR block ([`AWSConfig::vpc_cidr`]).
    pub fn validate_with_zones(&self, zones: &[LegacyZone], vpc: (&str, &str)) -> Result<(), Vec<FieldError>> {
        let mut errors = Vec::new();
        if let Err(e) = crate::cluster_id::check("spec.cluster.id", &self.cluster.id) {
            errors.push(e);
        }
        let aws = &self.aws;
        if aws.region.is_empty() || !is_region(&aws.region) {
            errors.push(FieldError::new(
                "spec.aws.region",
                &aws.region,
                "set the AWS region of the cluster, such as eu-central-1",
            ));
        }
        match aws.masters.len() {
            1 => check_node("spec.aws.masters[0]", &aws.masters[0], &mut errors),
            0 => errors.push(FieldError::new(
                "spec.aws.masters",
                "[]",
                "a legacy cluster has exactly one master; add one entry with imageID and instanceType",
            )),
            n => errors.push(FieldError::new(
                "spec.aws.masters",
                format!("{n} entries"),
                "a legacy cluster has exactly one master; keep one entry, or move the cluster to node pools \
                 (aws-operator migrate) for three masters",
            )),
        }
        if aws.workers.is_empty() {
            errors.push(FieldError::new(
                "spec.aws.workers",
                "[]",
                "a legacy cluster needs at least one worker; add an entry with imageID and instanceType",
            ));
        }
        // The worker group has one shape, the first entry's, as in the original.
        if let Some(first) = aws.workers.first() {
            check_node("spec.aws.workers[0]", first, &mut errors);
        }
        let (vpc_field, vpc_value) = vpc;
        let vpc_cidr = if vpc_value.is_empty() { None } else { Some(vpc_value) };
        match vpc_cidr {
            None => errors.push(FieldError::new(
                vpc_field,
                "",
                "set the CIDR block of the cluster's VPC, such as 10.1.0.0/16",
            )),
            Some(cidr) => check_cidr(vpc_field, cidr, &mut errors),
        }
        if !is_match(&aws.vpc.peer_id, "vpc-") {
            errors.push(FieldError::new(
                "spec.aws.vpc.peerId",
                &aws.vpc.peer_id,
                "set the id of the management cluster's VPC to peer with, such as vpc-0a1b2c3d",
            ));
        }
        for (i, name) in aws.vpc.route_table_names.iter().enumerate() {
            if name.trim().is_empty() {
                errors.push(FieldError::new(
                    format!("spec.aws.vpc.routeTableNames[{i}]"),
                    name,
                    "name a route table of the management VPC by its Name tag, or remove the entry",
                ));
            }
        }
        for zone in zones {
            let [az_field, private_field, public_field] = zone.source.fields();
            if !zone.name.starts_with(aws.region.as_str()) || zone.name.len() <= aws.region.len() {
                errors.push(FieldError::new(
                    &az_field,
                    &zone.name,
                    format!("set an availability zone of region {:?}, such as {}a", aws.region, aws.region),
                ));
            }
            let mut subnets = Vec::new();
            for (field, cidr) in [(&private_field, &zone.private_cidr), (&public_field, &zone.public_cidr)] {
                if cidr.is_empty() {
                    errors.push(FieldError::new(
                        field,
                        "",
                        "set the subnet's CIDR block, a part of spec.aws.vpc.cidr such as 10.1.0.0/25",
                    ));
                    continue;
                }
                let before = errors.len();
                check_cidr(field, cidr, &mut errors);
                let Some(subnet) = parse_cidr(cidr).filter(|_| errors.len() == before) else { continue };
                if let Some(vpc) = vpc_cidr.and_then(parse_cidr)
                    && !contains(vpc, subnet)
                {
                    errors.push(FieldError::new(
                        field,
                        cidr,
                        format!("the subnet is outside the VPC; use a part of {vpc_field} {vpc_value}"),
                    ));
                }
                subnets.push(subnet);
            }
            if let [private, public] = subnets[..]
                && (contains(private, public) || contains(public, private))
            {
                errors.push(FieldError::new(
                    &public_field,
                    &zone.public_cidr,
                    format!(
                        "overlaps the private subnet {}; give the public and the private subnet separate parts of the VPC",
                        zone.private_cidr
                    ),
                ));
            }
        }
        // The cluster has one zone, `<id>.k8s.<name>`, under the API's zone name; the original let
        // the three differ, and no installation did.
        let zones = &aws.hosted_zones;
        for (name, zone) in [("etcd", &zones.etcd), ("ingress", &zones.ingress)] {
            if !zone.name.is_empty() && !zones.api.name.is_empty() && zone.name != zones.api.name {
                errors.push(FieldError::new(
                    format!("spec.aws.hostedZones.{name}.name"),
                    &zone.name,
                    format!(
                        "the cluster's records live in one zone under spec.aws.hostedZones.api.name {:?}; set the same \
                         name here or leave it empty",
                        zones.api.name
                    ),
                ));
            }
        }
        for (name, component) in [("api", &aws.api), ("etcd", &aws.etcd), ("ingress", &aws.ingress)] {
            let seconds = component.elb.idle_timeout_seconds;
            if !(0..=4000).contains(&seconds) {
                errors.push(FieldError::new(
                    format!("spec.aws.{name}.elb.idleTimeoutSeconds"),
                    seconds,
                    "must be from 1 to 4000 seconds, or 0 for the default of 60",
                ));
            }
        }
        let labels = &self.cluster.kubernetes.kubelet.labels;
        if labels
            .split(',')
            .map(str::trim)
            .any(|entry| !entry.is_empty() && entry.split_once('=').is_none_or(|(key, _)| key.trim().is_empty()))
        {
            errors.push(FieldError::new(
                "spec.cluster.kubernetes.kubelet.labels",
                labels,
                "must be comma-separated key=value pairs, such as giantswarm.io/provider=aws,team=blue",
            ));
        }
        let api = &self.cluster.kubernetes.api;
        if api.domain.is_empty() {
            errors.push(FieldError::new(
                "spec.cluster.kubernetes.api.domain",
                "",
                "set the workload cluster's API host name, such as api.p3x7d.k8s.gauss.eu-central-1.aws.gigantic.io",
            ));
        }
        into_result(errors)
    }
}

/// The node labels of `spec.cluster.kubernetes.kubelet.labels`: comma-separated `key=value`
/// pairs, e.g. `giantswarm.io/provider=aws,ip=10.1.2.3`; empty entries are skipped, and an entry
/// without `=` is an error of [`AWSConfig::validate`].
pub fn kubelet_labels(labels: &str) -> std::collections::BTreeMap<String, String> {
    labels
        .split(',')
        .map(str::trim)
        .filter_map(|entry| entry.split_once('='))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect()
}

/// The idle timeout of a component's load balancer, the default for 0.
pub fn idle_timeout(component: &AWSConfigSpecAWSComponent) -> i64 {
    match component.elb.idle_timeout_seconds {
        0 => DEFAULT_ELB_IDLE_TIMEOUT_SECONDS,
        n => n,
    }
}

/// The docker volume of a node in GB, the default for 0.
pub fn docker_volume_size_gb(node: &AWSConfigSpecAWSNode) -> i64 {
    match node.docker_volume_size_gb {
        0 => DEFAULT_DOCKER_VOLUME_SIZE_GB,
        n => n,
    }
}

fn check_node(field: &str, node: &AWSConfigSpecAWSNode, errors: &mut Vec<FieldError>) {
    if !is_match(&node.image_id, "ami-") {
        errors.push(FieldError::new(
            format!("{field}.imageID"),
            &node.image_id,
            "set the node's AMI id, such as ami-0a1b2c3d4e5f67890 (a Flatcar image of the region)",
        ));
    }
    if !is_instance_type(&node.instance_type) {
        errors.push(FieldError::new(
            format!("{field}.instanceType"),
            &node.instance_type,
            "set an EC2 instance type, such as m5.xlarge",
        ));
    }
    if node.docker_volume_size_gb < 0 {
        errors.push(FieldError::new(
            format!("{field}.dockerVolumeSizeGB"),
            node.docker_volume_size_gb,
            "must be a size in GB of 0 or more (0 for the default of 100)",
        ));
    }
}

/// `<prefix>` followed by 8 to 17 lower-case hex digits: an EC2 id.
fn is_match(value: &str, prefix: &str) -> bool {
    value.strip_prefix(prefix).is_some_and(|hex| {
        (8..=17).contains(&hex.len()) && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// `family.size`, e.g. `m5.xlarge`, `c6gn.16xlarge`.
fn is_instance_type(value: &str) -> bool {
    let ok = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    value.split_once('.').is_some_and(|(family, size)| ok(family) && ok(size))
}

/// `xx-name-N`, e.g. `eu-central-1`, `cn-north-1`, `us-gov-west-1`.
fn is_region(value: &str) -> bool {
    let parts: Vec<&str> = value.split('-').collect();
    parts.len() >= 3
        && parts.last().is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        && parts[..parts.len() - 1].iter().all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_lowercase()))
}

fn contains(outer: (Ipv4Addr, u32), inner: (Ipv4Addr, u32)) -> bool {
    let mask = |prefix: u32| u32::MAX.checked_shl(32 - prefix).unwrap_or(0);
    inner.1 >= outer.1 && u32::from(inner.0) & mask(outer.1) == u32::from(outer.0) & mask(outer.1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::CustomResourceExt;

    /// The shape Giant Swarm's API stored: Go's empty values and `null` lists.
    const GO_WRITTEN: &str = r#"{
        "apiVersion": "provider.giantswarm.io/v1alpha1", "kind": "AWSConfig",
        "metadata": {"name": "r8v2k", "namespace": "default"},
        "spec": {
            "aws": {
                "api": {"elb": {"idleTimeoutSeconds": 0}, "hostedZones": ""},
                "availabilityZones": 0, "az": "eu-central-1a",
                "credentialSecret": {"name": "", "namespace": ""},
                "etcd": {"elb": {"idleTimeoutSeconds": 0}, "hostedZones": ""},
                "hostedZones": {"api": {"name": "gauss.eu-central-1.aws.gigantic.io"}, "etcd": {"name": ""}, "ingress": {"name": ""}},
                "ingress": {"elb": {"idleTimeoutSeconds": 0}, "hostedZones": ""},
                "masters": [{"imageID": "ami-0123456789abcdef0", "instanceType": "m5.large", "dockerVolumeSizeGB": 0}],
                "region": "eu-central-1",
                "vpc": {"cidr": "10.5.0.0/16", "peerId": "vpc-0a1b2c3d", "privateSubnetCidr": "10.5.0.0/17",
                        "publicSubnetCidr": "10.5.128.0/17", "routeTableNames": null},
                "workers": [{"imageID": "ami-0123456789abcdef0", "instanceType": "m5.xlarge", "dockerVolumeSizeGB": 0}]
            },
            "cluster": {
                "calico": {"cidr": 16, "mtu": 1430, "subnet": "192.168.0.0"}, "customer": {"id": "acme"},
                "docker": {"daemon": {"cidr": "172.17.0.1/16"}},
                "etcd": {"altNames": "", "domain": "etcd.r8v2k.k8s.gauss.eu-central-1.aws.gigantic.io", "port": 2379, "prefix": "giantswarm.io"},
                "id": "r8v2k",
                "kubernetes": {
                    "api": {"clusterIPRange": "172.31.0.0/16", "domain": "api.r8v2k.k8s.gauss.eu-central-1.aws.gigantic.io", "securePort": 443},
                    "cloudProvider": "aws", "dns": {"ip": "172.31.0.10"}, "domain": "cluster.local",
                    "ingressController": {"docker": {"image": ""}, "domain": "", "wildcardDomain": "", "insecurePort": 30010, "securePort": 30011},
                    "kubelet": {"altNames": "", "domain": "", "labels": "", "port": 10250},
                    "networkSetup": {"docker": {"image": ""}, "kubeProxy": {"conntrackMaxPerCore": 0}},
                    "ssh": {"userList": null}
                },
                "masters": [{"id": "m1"}], "scaling": {"max": 1, "min": 1}, "version": "", "workers": null
            },
            "versionBundle": {"version": "3.1.1"}
        },
        "status": {"aws": {"availabilityZones": null, "autoScalingGroup": {"name": ""}},
                   "cluster": {"conditions": null, "network": {"cidr": ""}, "nodes": null, "versions": null}}
    }"#;

    fn go_written() -> AWSConfig {
        serde_json::from_str(GO_WRITTEN).unwrap_or_else(|e| panic!("{e}"))
    }

    fn fields(errors: &[FieldError]) -> Vec<&str> {
        errors.iter().map(|e| e.field.as_str()).collect()
    }

    #[test]
    fn reads_go_written_objects_and_their_defaults() {
        let config = go_written();
        assert_eq!(config.validate(), Ok(()));
        assert!(config.spec.aws.vpc.route_table_names.is_empty());
        assert_eq!(idle_timeout(&config.spec.aws.api), DEFAULT_ELB_IDLE_TIMEOUT_SECONDS);
        assert_eq!(docker_volume_size_gb(&config.spec.aws.workers[0]), DEFAULT_DOCKER_VOLUME_SIZE_GB);
        assert_eq!(
            kubelet_labels("giantswarm.io/provider=aws, team = blue,,"),
            std::collections::BTreeMap::from([
                ("giantswarm.io/provider".to_owned(), "aws".to_owned()),
                ("team".to_owned(), "blue".to_owned())
            ])
        );
        assert_eq!(config.vpc_cidr(), ("spec.aws.vpc.cidr", "10.5.0.0/16"));
        assert_eq!(
            config.zones(),
            [LegacyZone {
                name: "eu-central-1a".into(),
                private_cidr: "10.5.0.0/17".into(),
                public_cidr: "10.5.128.0/17".into(),
                source: ZoneSource::Spec,
            }]
        );
        let written = serde_json::to_value(&config.spec).unwrap_or_default();
        assert_eq!(written["aws"]["masters"][0]["imageID"], "ami-0123456789abcdef0");
        assert_eq!(written["aws"]["vpc"]["privateSubnetCidr"], "10.5.0.0/17");
        assert_eq!(written["aws"]["workers"][0]["dockerVolumeSizeGB"], 0);
    }

    #[test]
    fn what_the_original_crashed_on_is_named_with_its_fix() {
        let mut config = go_written();
        config.spec.aws.masters.clear();
        config.spec.aws.workers.clear();
        let errors = config.validate().unwrap_err();
        assert_eq!(fields(&errors), ["spec.aws.masters", "spec.aws.workers"]);
        assert!(errors[0].message.contains("exactly one master"), "{}", errors[0]);
        assert!(errors[1].message.contains("at least one worker"), "{}", errors[1]);

        let mut three = go_written();
        three.spec.aws.masters = vec![three.spec.aws.masters[0].clone(); 3];
        let errors = three.validate().unwrap_err();
        assert_eq!(errors[0].value, "3 entries");
        assert!(errors[0].message.contains("aws-operator migrate"), "{}", errors[0]);
    }

    #[test]
    fn node_shapes_region_and_peering_are_checked() {
        let mut config = go_written();
        config.spec.aws.region = "Frankfurt".into();
        config.spec.aws.masters[0].image_id = "".into();
        config.spec.aws.workers[0].instance_type = "xlarge".into();
        config.spec.aws.workers[0].docker_volume_size_gb = -5;
        config.spec.aws.vpc.peer_id = "vpc-XYZ".into();
        config.spec.aws.ingress.elb.idle_timeout_seconds = 5000;
        config.spec.aws.hosted_zones.api.name = "gauss.eu-central-1.aws.gigantic.io".into();
        config.spec.aws.hosted_zones.ingress.name = "other.example.com".into();
        config.spec.cluster.kubernetes.api.domain = "".into();
        config.spec.cluster.kubernetes.kubelet.labels = "team=blue,oops".into();
        let errors = config.validate().unwrap_err();
        assert_eq!(
            fields(&errors),
            [
                "spec.aws.region",
                "spec.aws.masters[0].imageID",
                "spec.aws.workers[0].instanceType",
                "spec.aws.workers[0].dockerVolumeSizeGB",
                "spec.aws.vpc.peerId",
                // The zone no longer belongs to the (invalid) region.
                "spec.aws.az",
                "spec.aws.hostedZones.ingress.name",
                "spec.aws.ingress.elb.idleTimeoutSeconds",
                "spec.cluster.kubernetes.kubelet.labels",
                "spec.cluster.kubernetes.api.domain",
            ]
        );
        assert_eq!(
            errors[1].to_string(),
            "spec.aws.masters[0].imageID: invalid value \"\": set the node's AMI id, such as \
             ami-0a1b2c3d4e5f67890 (a Flatcar image of the region)"
        );
    }

    #[test]
    fn subnets_must_be_parts_of_the_vpc_and_apart() {
        let mut config = go_written();
        config.spec.aws.vpc.private_subnet_cidr = "10.6.0.0/17".into();
        config.spec.aws.vpc.public_subnet_cidr = "10.5.0.1/24".into();
        let errors = config.validate().unwrap_err();
        assert_eq!(fields(&errors), ["spec.aws.vpc.privateSubnetCidr", "spec.aws.vpc.publicSubnetCidr"]);
        assert_eq!(errors[0].message, "the subnet is outside the VPC; use a part of spec.aws.vpc.cidr 10.5.0.0/16");
        assert_eq!(errors[1].message, "host bits are set; use the network address 10.5.0.0/24");

        config.spec.aws.vpc.private_subnet_cidr = "10.5.0.0/17".into();
        config.spec.aws.vpc.public_subnet_cidr = "10.5.64.0/18".into();
        let errors = config.validate().unwrap_err();
        assert_eq!(fields(&errors), ["spec.aws.vpc.publicSubnetCidr"]);
        assert!(errors[0].message.starts_with("overlaps the private subnet 10.5.0.0/17"), "{}", errors[0]);

        config.spec.aws.vpc.cidr = String::new();
        config.spec.aws.vpc.public_subnet_cidr = String::new();
        let errors = config.validate().unwrap_err();
        assert_eq!(fields(&errors), ["spec.aws.vpc.cidr", "spec.aws.vpc.publicSubnetCidr"]);
    }

    #[test]
    fn allocated_zones_are_named_by_their_status_field() {
        let mut config = go_written();
        let status = config.status.get_or_insert_default();
        status.cluster.network.cidr = "10.9.0.0/16".into();
        status.aws.availability_zones = vec![AWSConfigStatusAWSAvailabilityZone {
            name: "eu-west-1a".into(),
            subnet: AWSConfigStatusAWSAvailabilityZoneSubnet {
                private: AWSConfigSubnet { cidr: "10.9.0.0/19".into() },
                public: AWSConfigSubnet { cidr: "10.5.32.0/19".into() },
            },
        }];
        let errors = config.validate().unwrap_err();
        assert_eq!(
            fields(&errors),
            ["status.aws.availabilityZones[0].name", "status.aws.availabilityZones[0].subnet.public.cidr"]
        );
        assert!(errors[1].message.contains("status.cluster.network.cidr 10.9.0.0/16"), "{}", errors[1]);
    }

    #[test]
    fn the_schema_has_every_field_of_the_original_crd() {
        let crd = AWSConfig::crd();
        assert_eq!(crd.metadata.name.as_deref(), Some("awsconfigs.provider.giantswarm.io"));
        assert_eq!(crd.spec.scope, "Namespaced");
        let schema =
            serde_json::to_value(crd.spec.versions[0].schema.as_ref().and_then(|s| s.open_api_v3_schema.as_ref()))
                .unwrap_or_default();
        let spec = &schema["properties"]["spec"]["properties"];
        let keys = |v: &serde_json::Value| -> Vec<String> {
            v["properties"].as_object().map(|o| o.keys().cloned().collect()).unwrap_or_default()
        };
        assert_eq!(
            keys(&spec["aws"]),
            [
                "api",
                "availabilityZones",
                "az",
                "credentialSecret",
                "etcd",
                "hostedZones",
                "ingress",
                "masters",
                "region",
                "vpc",
                "workers"
            ]
        );
        assert_eq!(
            keys(&spec["aws"]["properties"]["vpc"]),
            ["cidr", "peerId", "privateSubnetCidr", "publicSubnetCidr", "routeTableNames"]
        );
        assert_eq!(
            keys(&spec["aws"]["properties"]["masters"]["items"]),
            ["dockerVolumeSizeGB", "imageID", "instanceType"]
        );
        assert_eq!(keys(&spec["aws"]["properties"]["api"]), ["elb", "hostedZones"]);
        assert_eq!(
            keys(&spec["cluster"]),
            ["calico", "customer", "docker", "etcd", "id", "kubernetes", "masters", "scaling", "version", "workers"]
        );
        assert_eq!(keys(&spec["versionBundle"]), ["version"]);
        let status = &schema["properties"]["status"]["properties"];
        assert_eq!(keys(&status["aws"]), ["autoScalingGroup", "availabilityZones"]);
        assert_eq!(spec["aws"]["properties"]["vpc"]["properties"]["cidr"]["pattern"], OPTIONAL_CIDR_PATTERN);
    }
}

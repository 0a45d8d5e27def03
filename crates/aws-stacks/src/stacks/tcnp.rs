//! TCNP, `cluster-<id>-tcnp-<md>`, tenant account (reference §5.7): one node pool.
//!
//! The pool CIDR becomes a secondary block of the TCCP VPC; per AZ the pool gets a private
//! subnet whose route table sends the internet through that AZ's TCCP NAT gateway and the
//! management VPC through the peering. Plus an S3 gateway endpoint on those route tables, the
//! pool's security group and its rules towards the control plane, AWS-CNI and the other pools,
//! a launch template, the auto scaling group with its `NodePool` termination hook, and IAM.
//!
//! The security group gets no `GroupName` (the `Name` tag reads `<id>-worker`): group names are
//! unique per VPC and every pool of the cluster lives in the same VPC.
//!
//! [`rolling_update`] computes the auto scaling group's size and rolling-update settings from
//! the live group and the update annotations (§5.7.1).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::{Common, MissingOutput, az_suffix, required, user_data, version_outputs};
use crate::cfn::{self, Resource, Template};
use crate::ignition;
use crate::names::{self, StackKind};

/// Logical ID of the pool CIDR's association with the VPC.
pub const VPC_CIDR_BLOCK: &str = "VpcCidrBlock";
/// Logical ID of the pool's S3 gateway endpoint.
pub const S3_ENDPOINT: &str = "VPCS3Endpoint";
/// Logical ID of the pool's security group.
pub const SECURITY_GROUP: &str = "GeneralSecurityGroup";
/// Output listing the peer pools' security groups the pool's group admits: a pool being deleted
/// waits until no other pool lists its group (AWS refuses to delete a referenced group).
pub const PEER_SECURITY_GROUPS_OUTPUT: &str = "PeerSecurityGroups";
/// Logical ID of the launch template.
pub const LAUNCH_TEMPLATE: &str = "NodePoolLaunchTemplate";
/// Logical ID of the auto scaling group.
pub const ASG: &str = "NodePoolAutoScalingGroup";
/// Logical ID of the workers' IAM role.
pub const ROLE: &str = "NodePoolRole";
/// Logical ID of the workers' inline policy.
pub const POLICY: &str = "NodePoolRolePolicy";
/// Logical ID of the workers' instance profile.
pub const INSTANCE_PROFILE: &str = "NodePoolInstanceProfile";
/// The termination hook completed by the drainer.
pub const TERMINATING_HOOK: &str = "NodePool";
/// How long [`TERMINATING_HOOK`] holds a leaving worker before AWS continues without the
/// drainer, in seconds.
pub const TERMINATING_HOOK_TIMEOUT: u64 = 3600;

/// Annotation (on the machine deployment, else the cluster) overriding `MaxBatchSize`.
pub const MAX_BATCH_SIZE_ANNOTATION: &str = "alpha.aws.giantswarm.io/update-max-batch-size";
/// Annotation (on the machine deployment, else the cluster) overriding `PauseTime`.
pub const PAUSE_TIME_ANNOTATION: &str = "alpha.aws.giantswarm.io/update-pause-time";
/// Pause between batches when no valid annotation is set.
pub const DEFAULT_PAUSE_TIME: &str = "PT10M";

/// One AZ of the pool (computed by the operator, §7.6).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TcnpAz {
    /// The AZ name.
    pub name: String,
    /// The pool subnet of this AZ, a split of the pool CIDR.
    pub subnet_cidr: String,
    /// The TCCP NAT gateway of this AZ (`NATGatewayID<Az>` output).
    pub nat_gateway_id: String,
}

/// Security groups of the TCCP stack the pool's rules refer to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TccpSecurityGroups {
    /// `MasterSecurityGroupID`.
    pub master: String,
    /// `APIInternalELBSecurityGroupID`.
    pub api_internal_elb: String,
    /// `AWSCNISecurityGroupID` when AWS-CNI is in use; `None` leaves the pod rules out.
    pub aws_cni: Option<String>,
}

/// What the pool's instances look like.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeInstance {
    /// The AMI.
    pub image_id: String,
    /// The primary instance type.
    pub instance_type: String,
    /// Docker's volume ([`ignition::DOCKER_VOLUME`]), GiB.
    pub docker_volume_gb: u32,
    /// Kubelet's volume ([`ignition::KUBELET_VOLUME`]), GiB.
    pub kubelet_volume_gb: u32,
    /// The log volume ([`ignition::LOG_VOLUME`]), GiB; upstream's 15.
    pub log_volume_gb: u32,
    /// Containerd's volume ([`ignition::CONTAINERD_VOLUME`]), GiB; upstream gives it the docker
    /// size.
    pub containerd_volume_gb: u32,
    /// IMDS `HttpTokens`: `required` or `optional`; see [`imds_http_tokens`](super::imds_http_tokens).
    pub imds_http_tokens: String,
}

/// An instance type the auto scaling group may use besides the primary one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceOverride {
    /// The instance type.
    pub instance_type: String,
    /// Capacity units one instance counts for.
    pub weighted_capacity: Option<u32>,
}

/// On-demand / spot mix of the pool.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InstanceDistribution {
    /// On-demand instances before any spot.
    pub on_demand_base_capacity: u32,
    /// Percentage of on-demand above the base (100 = no spot).
    pub on_demand_percentage_above_base_capacity: u32,
    /// Alike instance types; empty uses only the primary type.
    pub overrides: Vec<InstanceOverride>,
}

/// Size and rolling-update settings of the auto scaling group (§5.7.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RollingUpdate {
    /// `DesiredCapacity`: the live desired capacity clamped to `[min, max]`, so an autoscaled
    /// pool keeps its size through an update.
    pub desired: u32,
    /// Instances replaced per batch.
    pub max_batch_size: u32,
    /// Instances kept in service during a batch: `desired − max_batch_size`, at least 0.
    pub min_instances_in_service: u32,
    /// Pause between batches, ISO-8601.
    pub pause_time: String,
}

impl RollingUpdate {
    /// The pause between batches; `None` if [`RollingUpdate::pause_time`] is not a duration
    /// this module writes.
    pub fn pause(&self) -> Option<std::time::Duration> {
        pause_seconds(&self.pause_time).map(std::time::Duration::from_secs)
    }
}

/// Whether a node pool's subnets are tagged for internal load balancers, from the annotation
/// `alpha.aws.giantswarm.io/internal-elb`: present with any value but `false` (the original
/// read its presence; Giant Swarm's tooling sets `""`).
pub fn internal_elb_subnets(annotation: Option<&str>) -> bool {
    annotation.is_some_and(|v| !v.trim().eq_ignore_ascii_case("false"))
}

/// Computes the rolling-update settings (§5.7.1).
///
/// * `desired = max(min, min(current_desired, max))`; pass 0 when the group does not exist yet.
/// * `max_batch_annotation`: an integer > 0 is used as is; a float in (0, 1] is a ratio of
///   `desired`, rounded half up, at least 1; anything else is ignored. Default: 10 % of
///   `desired`, rounded, at least 1.
/// * `pause_annotation`: an ISO-8601 duration `PT[nH][nM][nS]` of at most one hour; anything
///   else is ignored. Default `PT10M`.
pub fn rolling_update(
    min: u32,
    max: u32,
    current_desired: u32,
    max_batch_annotation: Option<&str>,
    pause_annotation: Option<&str>,
) -> RollingUpdate {
    let desired = min.max(current_desired.min(max));
    let ratio = |r: f64| ((r * f64::from(desired) + 0.5).floor() as u32).max(1);
    let max_batch_size =
        max_batch_annotation.and_then(|raw| parse_max_batch(raw.trim(), ratio)).unwrap_or_else(|| ratio(0.1));
    let pause_time = pause_annotation
        .map(str::trim)
        .filter(|raw| pause_seconds(raw).is_some_and(|s| s > 0 && s <= 3600))
        .unwrap_or(DEFAULT_PAUSE_TIME)
        .to_owned();
    RollingUpdate {
        desired,
        max_batch_size,
        min_instances_in_service: desired.saturating_sub(max_batch_size),
        pause_time,
    }
}

/// A rolling-update annotation that [`rolling_update`] ignored, and why: the pool's status
/// names it, since the default applies in its place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnnotationProblem {
    /// The annotation key.
    pub annotation: &'static str,
    /// Its value as given.
    pub value: String,
    /// What is wrong and what it accepts.
    pub problem: String,
}

/// The rolling-update annotations [`rolling_update`] ignores, in annotation order: a batch size
/// that is neither an integer above 0 nor a ratio in (0, 1], and a pause that is not an
/// ISO-8601 `PT[nH][nM][nS]` duration above 0 and at most one hour.
pub fn annotation_problems(
    max_batch_annotation: Option<&str>,
    pause_annotation: Option<&str>,
) -> Vec<AnnotationProblem> {
    let mut problems = Vec::new();
    if let Some(raw) = max_batch_annotation
        && parse_max_batch(raw.trim(), |_| 1).is_none()
    {
        problems.push(AnnotationProblem {
            annotation: MAX_BATCH_SIZE_ANNOTATION,
            value: raw.to_string(),
            problem: "expected an integer above 0 (instances) or a ratio in (0, 1] of the desired capacity, such as \"2\" or \"0.25\"".into(),
        });
    }
    if let Some(raw) = pause_annotation {
        let problem = match pause_seconds(raw.trim()) {
            None => Some("expected an ISO-8601 duration such as \"PT5M\" or \"PT1H\""),
            Some(0) => Some("expected a pause above zero, such as \"PT5M\""),
            Some(s) if s > 3600 => Some("the pause is over its bound of one hour (\"PT1H\")"),
            Some(_) => None,
        };
        if let Some(problem) = problem {
            problems.push(AnnotationProblem {
                annotation: PAUSE_TIME_ANNOTATION,
                value: raw.to_string(),
                problem: problem.into(),
            });
        }
    }
    problems
}

fn parse_max_batch(raw: &str, ratio: impl Fn(f64) -> u32) -> Option<u32> {
    if let Ok(n) = raw.parse::<u32>()
        && n > 0
    {
        return Some(n);
    }
    match raw.parse::<f64>() {
        Ok(r) if r > 0.0 && r <= 1.0 => Some(ratio(r)),
        _ => None,
    }
}

/// Seconds of an ISO-8601 time duration `PT[nH][nM][nS]` (integers), or `None` if malformed.
pub fn pause_seconds(raw: &str) -> Option<u64> {
    let mut rest = raw.strip_prefix("PT")?;
    if rest.is_empty() {
        return None;
    }
    let mut total = 0u64;
    let mut last_unit = 0;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit())?;
        if digits == 0 {
            return None;
        }
        let value: u64 = rest[..digits].parse().ok()?;
        let unit = rest[digits..].chars().next()?;
        let (rank, factor) = match unit {
            'H' => (1, 3600),
            'M' => (2, 60),
            'S' => (3, 1),
            _ => return None,
        };
        // Units must appear at most once, in H, M, S order.
        if rank <= last_unit {
            return None;
        }
        last_unit = rank;
        total = total.checked_add(value.checked_mul(factor)?)?;
        rest = &rest[digits + 1..];
    }
    Some(total)
}

/// Inputs of the TCNP template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Params {
    /// Cluster-wide inputs.
    pub common: Common,
    /// The node pool (machine deployment) ID.
    pub node_pool_id: String,
    /// The pool CIDR (annotation `machine-deployment.giantswarm.io/subnet`).
    pub pool_cidr: String,
    /// The pool's AZs, sorted by name.
    pub azs: Vec<TcnpAz>,
    /// TCCP `VPCID`.
    pub vpc_id: String,
    /// The cluster CIDR (allowed to reach NFS on the nodes).
    pub vpc_cidr: String,
    /// TCCP `VPCPeeringConnectionID`.
    pub peering_connection_id: String,
    /// The management VPC CIDR.
    pub cp_vpc_cidr: String,
    /// TCCP security groups.
    pub tccp_security_groups: TccpSecurityGroups,
    /// Security groups of the cluster's other active pools; each gets a mutual-access rule.
    pub other_pool_security_groups: Vec<String>,
    /// Instance shape.
    pub instance: NodeInstance,
    /// `MinSize`.
    pub min_size: u32,
    /// `MaxSize`.
    pub max_size: u32,
    /// Desired size and rolling-update settings, from [`rolling_update`].
    pub rolling_update: RollingUpdate,
    /// On-demand / spot mix.
    pub distribution: InstanceDistribution,
    /// Tag the subnets `kubernetes.io/role/internal-elb=1` (internal load balancers may use them).
    pub internal_elb_subnets: bool,
    /// Cilium in ENI mode: grants the workers the ENI actions Cilium's operator needs.
    pub cilium_eni: bool,
    /// The cluster bucket holding the node configs.
    pub bucket: String,
    /// ARN of the cluster KMS key (workers may only decrypt).
    pub kms_key_arn: String,
}

/// `gs-cluster-<id>-role-<md>`.
pub fn role_name(cluster_id: &str, node_pool_id: &str) -> String {
    format!("gs-cluster-{cluster_id}-role-{node_pool_id}")
}

/// `gs-cluster-<id>-policy-<md>`.
pub fn policy_name(cluster_id: &str, node_pool_id: &str) -> String {
    format!("gs-cluster-{cluster_id}-policy-{node_pool_id}")
}

/// `gs-cluster-<id>-profile-<md>`.
pub fn instance_profile_name(cluster_id: &str, node_pool_id: &str) -> String {
    format!("gs-cluster-{cluster_id}-profile-{node_pool_id}")
}

/// `<id>-<md>-LaunchTemplate`.
pub fn launch_template_name(cluster_id: &str, node_pool_id: &str) -> String {
    format!("{cluster_id}-{node_pool_id}-LaunchTemplate")
}

pub(crate) fn ebs(device: &str, size: u32) -> Value {
    json!({
        "DeviceName": device,
        "Ebs": { "DeleteOnTermination": true, "Encrypted": true, "VolumeSize": size, "VolumeType": "gp3" },
    })
}

fn rule(target: Value, source: Value, description: &str) -> Resource {
    Resource::new(
        "AWS::EC2::SecurityGroupIngress",
        json!({
            "GroupId": target,
            "SourceSecurityGroupId": source,
            "IpProtocol": "-1",
            "Description": description,
        }),
    )
}

fn tcp(port: u16, cidr: &str, description: &str) -> Value {
    json!({ "IpProtocol": "tcp", "FromPort": port, "ToPort": port, "CidrIp": cidr, "Description": description })
}

/// Renders the TCNP template.
pub fn render(p: &Params) -> Template {
    let c = &p.common;
    let cid = c.cluster_id.as_str();
    let md = p.node_pool_id.as_str();
    let mut t = Template::new(format!("Tenant cluster {cid} node pool {md} (tcnp)."));

    t.add(
        VPC_CIDR_BLOCK,
        Resource::new("AWS::EC2::VPCCidrBlock", json!({ "VpcId": p.vpc_id, "CidrBlock": p.pool_cidr })),
    );

    let mut subnets = Vec::new();
    let mut route_tables = Vec::new();
    let mut nat_routes = Vec::new();
    for az in &p.azs {
        let s = az_suffix(&az.name);
        let subnet = format!("PrivateSubnet{s}");
        let rt = format!("PrivateRouteTable{s}");
        let name = format!("{cid}-private-{md}");
        let mut tags = vec![
            ("Name", name.as_str()),
            ("giantswarm.io/availability-zone", az.name.as_str()),
            ("giantswarm.io/subnet-type", "private"),
            ("sigs.k8s.io/cluster-api-provider-aws/role", "private"),
        ];
        if p.internal_elb_subnets {
            tags.push(("kubernetes.io/role/internal-elb", "1"));
        }
        t.add(
            subnet.clone(),
            Resource::new(
                "AWS::EC2::Subnet",
                json!({
                    "VpcId": p.vpc_id,
                    "CidrBlock": az.subnet_cidr,
                    "AvailabilityZone": az.name,
                    "MapPublicIpOnLaunch": false,
                    "Tags": cfn::tags(&tags),
                }),
            )
            // The subnet lies in the pool CIDR, which must be associated first.
            .depends_on([VPC_CIDR_BLOCK]),
        );
        t.add(
            rt.clone(),
            Resource::new(
                "AWS::EC2::RouteTable",
                json!({
                    "VpcId": p.vpc_id,
                    "Tags": cfn::tags(&[
                        ("Name", name.as_str()),
                        ("giantswarm.io/availability-zone", az.name.as_str()),
                        ("giantswarm.io/route-table-type", "private"),
                    ]),
                }),
            ),
        );
        t.add(
            format!("PrivateSubnetRouteTableAssociation{s}"),
            Resource::new(
                "AWS::EC2::SubnetRouteTableAssociation",
                json!({ "RouteTableId": cfn::r#ref(&rt), "SubnetId": cfn::r#ref(&subnet) }),
            ),
        );
        let nat_route = format!("NATRoute{s}");
        t.add(
            nat_route.clone(),
            Resource::new(
                "AWS::EC2::Route",
                json!({ "RouteTableId": cfn::r#ref(&rt), "DestinationCidrBlock": "0.0.0.0/0", "NatGatewayId": az.nat_gateway_id }),
            ),
        );
        t.add(
            format!("VPCPeeringRoute{s}"),
            Resource::new(
                "AWS::EC2::Route",
                json!({
                    "RouteTableId": cfn::r#ref(&rt),
                    "DestinationCidrBlock": p.cp_vpc_cidr,
                    "VpcPeeringConnectionId": p.peering_connection_id,
                }),
            ),
        );
        subnets.push(cfn::r#ref(&subnet));
        route_tables.push(cfn::r#ref(&rt));
        nat_routes.push(nat_route);
    }

    t.add(
        S3_ENDPOINT,
        Resource::new(
            "AWS::EC2::VPCEndpoint",
            json!({
                "VpcId": p.vpc_id,
                "ServiceName": format!("com.amazonaws.{}.s3", c.region),
                "VpcEndpointType": "Gateway",
                "RouteTableIds": route_tables,
                "PolicyDocument": cfn::policy_document(vec![json!({
                    "Effect": "Allow",
                    "Principal": "*",
                    "Action": "s3:*",
                    "Resource": c.s3_arn("*"),
                })]),
            }),
        ),
    );

    add_security_group(&mut t, p);
    add_launch_template(&mut t, p);
    add_asg(&mut t, p, subnets, nat_routes);
    add_iam(&mut t, p);

    version_outputs(&mut t, c);
    t.output("DockerVolumeSizeGB", json!(p.instance.docker_volume_gb.to_string()), None);
    t.output("InstanceImage", json!(p.instance.image_id), None);
    t.output("InstanceType", json!(p.instance.instance_type), None);
    t.output("SecurityGroupID", cfn::r#ref(SECURITY_GROUP), Some("The pool's security group, for peer-pool rules"));
    t.output(
        PEER_SECURITY_GROUPS_OUTPUT,
        json!(p.other_pool_security_groups.join(",")),
        Some("The peer pools' security groups this pool admits, comma-separated"),
    );
    t.output(
        "AutoScalingGroupName",
        cfn::r#ref(ASG),
        Some("The pool's Auto Scaling group, for its live desired capacity"),
    );
    t
}

fn add_security_group(t: &mut Template, p: &Params) {
    let cid = p.common.cluster_id.as_str();
    let cp = p.cp_vpc_cidr.as_str();
    let from_cp = "Administration and monitoring from the management cluster";
    t.add(
        SECURITY_GROUP,
        Resource::new(
            "AWS::EC2::SecurityGroup",
            json!({
                "GroupDescription": format!("{cid} node pool {}", p.node_pool_id),
                "VpcId": p.vpc_id,
                "SecurityGroupIngress": [
                    tcp(22, cp, from_cp),
                    tcp(4194, cp, from_cp),
                    tcp(10250, cp, from_cp),
                    tcp(10300, cp, from_cp),
                    tcp(10301, cp, from_cp),
                    tcp(2049, &p.vpc_cidr, "NFS from the cluster"),
                ],
                "Tags": cfn::tags(&[("Name", format!("{cid}-worker"))]),
            }),
        ),
    );
    let me = cfn::r#ref(SECURITY_GROUP);
    let sgs = &p.tccp_security_groups;
    t.add(
        "PoolToInternalAPIRule",
        Resource::new(
            "AWS::EC2::SecurityGroupIngress",
            json!({
                "GroupId": sgs.api_internal_elb,
                "SourceSecurityGroupId": me,
                "IpProtocol": "tcp",
                "FromPort": 443,
                "ToPort": 443,
                "Description": "Kubernetes API from the node pool",
            }),
        ),
    );
    t.add("PoolToMasterRule", rule(json!(sgs.master), me.clone(), "All traffic from the node pool"));
    t.add("MasterToPoolRule", rule(me.clone(), json!(sgs.master), "All traffic from the masters"));
    t.add("PoolToPoolRule", rule(me.clone(), me.clone(), "All traffic within the node pool"));
    if let Some(cni) = &sgs.aws_cni {
        t.add("PoolToAWSCNIRule", rule(json!(cni), me.clone(), "All traffic from the node pool to pods"));
        t.add("AWSCNIToPoolRule", rule(me.clone(), json!(cni), "All traffic from pods"));
    }
    for other in &p.other_pool_security_groups {
        // The description carries the peer group ID: upstream identifies these rules by it.
        t.add(
            names::logical_id(&["NodePoolToNodePoolRule", other]),
            rule(me.clone(), json!(other), &format!("All traffic from node pool security group {other}")),
        );
    }
}

fn add_launch_template(t: &mut Template, p: &Params) {
    let c = &p.common;
    let cid = c.cluster_id.as_str();
    let i = &p.instance;
    t.add(
        LAUNCH_TEMPLATE,
        Resource::new(
            "AWS::EC2::LaunchTemplate",
            json!({
                "LaunchTemplateName": launch_template_name(cid, &p.node_pool_id),
                "LaunchTemplateData": {
                    "BlockDeviceMappings": [
                        ebs(ignition::DOCKER_VOLUME.device, i.docker_volume_gb),
                        ebs(ignition::KUBELET_VOLUME.device, i.kubelet_volume_gb),
                        ebs(ignition::LOG_VOLUME.device, i.log_volume_gb),
                        ebs(ignition::CONTAINERD_VOLUME.device, i.containerd_volume_gb),
                    ],
                    "IamInstanceProfile": { "Name": cfn::r#ref(INSTANCE_PROFILE) },
                    "ImageId": i.image_id,
                    "InstanceType": i.instance_type,
                    "MetadataOptions": { "HttpTokens": i.imds_http_tokens, "HttpPutResponseHopLimit": 2 },
                    "Monitoring": { "Enabled": true },
                    "NetworkInterfaces": [{
                        "AssociatePublicIpAddress": false,
                        "DeviceIndex": 0,
                        "Groups": [cfn::r#ref(SECURITY_GROUP)],
                    }],
                    "TagSpecifications": [{
                        "ResourceType": "instance",
                        "Tags": cfn::tags(&[(names::tags::RELEASE, c.release_version.as_str())]),
                    }],
                    "UserData": user_data(&p.bucket, &names::node_pool_config_key(&c.operator_version, cid, &p.node_pool_id)),
                },
            }),
        ),
    );
}

fn add_asg(t: &mut Template, p: &Params, subnets: Vec<Value>, nat_routes: Vec<String>) {
    let c = &p.common;
    let cid = c.cluster_id.as_str();
    let md = p.node_pool_id.as_str();
    let d = &p.distribution;
    let ru = &p.rolling_update;
    let mut launch_template = json!({
        "LaunchTemplateSpecification": {
            "LaunchTemplateId": cfn::r#ref(LAUNCH_TEMPLATE),
            "Version": cfn::get_att(LAUNCH_TEMPLATE, "LatestVersionNumber"),
        },
    });
    if !d.overrides.is_empty() {
        launch_template["Overrides"] = Value::Array(
            d.overrides
                .iter()
                .map(|o| {
                    let mut v = json!({ "InstanceType": o.instance_type });
                    if let Some(w) = o.weighted_capacity {
                        v["WeightedCapacity"] = json!(w.to_string());
                    }
                    v
                })
                .collect(),
        );
    }
    let spot_pools = d.overrides.len().clamp(1, 20);
    let mut tags = super::tccpn::asg_tags(
        c,
        &[("Name", format!("{cid}-worker")), (names::tags::MACHINE_DEPLOYMENT, md.to_owned())],
        StackKind::Tcnp,
    );
    if let Value::Array(list) = &mut tags {
        // Cluster-autoscaler discovery; only on the group, not on instances.
        list.push(
            json!({ "Key": format!("k8s.io/cluster-autoscaler/{cid}"), "Value": "true", "PropagateAtLaunch": false }),
        );
        list.push(json!({
            "Key": format!("k8s.io/cluster-autoscaler/node-template/label/{}", names::tags::MACHINE_DEPLOYMENT),
            "Value": md,
            "PropagateAtLaunch": false,
        }));
    }
    let azs: Vec<&str> = p.azs.iter().map(|a| a.name.as_str()).collect();
    t.add(
        ASG,
        Resource::new(
            "AWS::AutoScaling::AutoScalingGroup",
            json!({
                "VPCZoneIdentifier": subnets,
                "AvailabilityZones": azs,
                "MinSize": p.min_size.to_string(),
                "MaxSize": p.max_size.to_string(),
                "DesiredCapacity": ru.desired.to_string(),
                "MixedInstancesPolicy": {
                    "InstancesDistribution": {
                        "OnDemandBaseCapacity": d.on_demand_base_capacity,
                        "OnDemandPercentageAboveBaseCapacity": d.on_demand_percentage_above_base_capacity,
                        "SpotAllocationStrategy": "lowest-price",
                        "SpotInstancePools": spot_pools,
                    },
                    "LaunchTemplate": launch_template,
                },
                // Inline so that the hook also fires when the whole group is deleted.
                "LifecycleHookSpecificationList": [{
                    "LifecycleHookName": TERMINATING_HOOK,
                    "LifecycleTransition": "autoscaling:EC2_INSTANCE_TERMINATING",
                    "HeartbeatTimeout": TERMINATING_HOOK_TIMEOUT,
                    "DefaultResult": "CONTINUE",
                }],
                "HealthCheckGracePeriod": 10,
                "MetricsCollection": [{ "Granularity": "1Minute" }],
                "Tags": tags,
            }),
        )
        // Nodes fetch their config from S3 at boot: the routes must exist first.
        .depends_on(nat_routes)
        .update_policy(json!({
            "AutoScalingRollingUpdate": {
                "MinInstancesInService": ru.min_instances_in_service.to_string(),
                "MaxBatchSize": ru.max_batch_size.to_string(),
                "PauseTime": ru.pause_time,
            },
        })),
    );
}

fn add_iam(t: &mut Template, p: &Params) {
    let c = &p.common;
    let cid = c.cluster_id.as_str();
    let md = p.node_pool_id.as_str();
    t.add(
        ROLE,
        Resource::new(
            "AWS::IAM::Role",
            json!({
                "RoleName": role_name(cid, md),
                "AssumeRolePolicyDocument": cfn::policy_document(vec![json!({
                    "Effect": "Allow",
                    "Principal": { "Service": c.ec2_principal() },
                    "Action": "sts:AssumeRole",
                })]),
            }),
        ),
    );
    // What the worker's own components use: Ignition reads its config from the bucket
    // (HeadBucket, then GetObject), the decryption unit decrypts with the cluster's key, the
    // kubelet pulls from ECR. Nothing on a worker attaches volumes or manages file systems;
    // workloads that do get their own roles through the cluster's IAM manager.
    let mut statements = worker_statements(c, &p.kms_key_arn, &p.bucket);
    if p.tccp_security_groups.aws_cni.is_some() || p.cilium_eni {
        // The pod network's IPAM (AWS-CNI, or Cilium in ENI mode) runs with the node's role.
        // "Actions defined by Amazon EC2" (Service Authorization Reference): the Describe
        // actions it reads instances, subnets and interfaces with support no resource type.
        statements.push(cfn::allow(
            &[
                "ec2:DescribeInstances",
                "ec2:DescribeInstanceTypes",
                "ec2:DescribeNetworkInterfaces",
                "ec2:DescribeSecurityGroups",
                "ec2:DescribeSubnets",
                "ec2:DescribeVpcs",
            ],
            json!("*"),
        ));
        // Interfaces, subnets and security groups of the cluster's VPC only.
        statements.push(cfn::allow_if(
            &[
                "ec2:AssignPrivateIpAddresses",
                "ec2:UnassignPrivateIpAddresses",
                "ec2:AttachNetworkInterface",
                "ec2:CreateNetworkInterface",
                "ec2:DeleteNetworkInterface",
                "ec2:DetachNetworkInterface",
                "ec2:ModifyNetworkInterfaceAttribute",
            ],
            json!([c.arn("ec2", "network-interface/*"), c.arn("ec2", "subnet/*"), c.arn("ec2", "security-group/*")]),
            json!({ "ArnEquals": { "ec2:Vpc": c.arn("ec2", &format!("vpc/{}", p.vpc_id)) } }),
        ));
        // The instance side of attaching and detaching: the cluster's instances only.
        statements.push(cfn::allow_if(
            &["ec2:AttachNetworkInterface", "ec2:DetachNetworkInterface", "ec2:ModifyNetworkInterfaceAttribute"],
            c.arn("ec2", "instance/*"),
            c.tagged_with_cluster(),
        ));
        // Tags the IPAM puts on the interfaces it creates.
        statements.push(cfn::allow_if(
            &["ec2:CreateTags"],
            c.arn("ec2", "network-interface/*"),
            json!({ "StringEquals": { "ec2:CreateAction": "CreateNetworkInterface" } }),
        ));
    }
    t.add(
        POLICY,
        Resource::new(
            "AWS::IAM::Policy",
            json!({
                "PolicyName": policy_name(cid, md),
                "Roles": [cfn::r#ref(ROLE)],
                "PolicyDocument": cfn::policy_document(statements),
            }),
        ),
    );
    t.add(
        INSTANCE_PROFILE,
        Resource::new(
            "AWS::IAM::InstanceProfile",
            json!({ "InstanceProfileName": instance_profile_name(cid, md), "Roles": [cfn::r#ref(ROLE)] }),
        ),
    );
}

/// What every worker's own components use, whatever its group: Ignition reads its config from
/// the bucket (HeadBucket, then GetObject), the decryption unit decrypts with the cluster's key,
/// the kubelet pulls from ECR.
pub(crate) fn worker_statements(c: &Common, kms_key_arn: &str, bucket: &str) -> Vec<Value> {
    let mut statements = vec![
        cfn::allow(&["kms:Decrypt"], json!(kms_key_arn)),
        cfn::allow(&["s3:ListBucket"], json!(c.s3_arn(bucket))),
        cfn::allow(&["s3:GetObject"], json!(c.s3_arn(&format!("{bucket}/*")))),
    ];
    statements.extend(super::ecr_pull(c));
    statements
}

/// The TCNP stack outputs, typed; change detection compares them with the desired state (§5.9).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outputs {
    /// `DockerVolumeSizeGB`.
    pub docker_volume_size_gb: String,
    /// `InstanceImage`.
    pub instance_image: String,
    /// `InstanceType`.
    pub instance_type: String,
    /// `OperatorVersion`.
    pub operator_version: String,
    /// `ReleaseVersion`.
    pub release_version: String,
    /// `SecurityGroupID`, the pool's security group (absent on stacks rendered before it existed).
    pub security_group_id: Option<String>,
    /// `PeerSecurityGroups`: the other pools' groups this pool admits (empty when absent).
    pub peer_security_groups: Vec<String>,
}

impl Outputs {
    /// Parses `DescribeStacks` outputs.
    pub fn from_outputs(outputs: &BTreeMap<String, String>) -> Result<Self, MissingOutput> {
        Ok(Outputs {
            docker_volume_size_gb: required(outputs, "DockerVolumeSizeGB")?,
            instance_image: required(outputs, "InstanceImage")?,
            instance_type: required(outputs, "InstanceType")?,
            operator_version: required(outputs, "OperatorVersion")?,
            release_version: required(outputs, "ReleaseVersion")?,
            security_group_id: outputs.get("SecurityGroupID").cloned(),
            peer_security_groups: outputs
                .get(PEER_SECURITY_GROUPS_OUTPUT)
                .map(|s| s.split(',').filter(|g| !g.is_empty()).map(str::to_owned).collect())
                .unwrap_or_default(),
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::stacks::testdata;

    #[test]
    fn the_internal_elb_annotation_is_read_by_its_presence() {
        assert!(!internal_elb_subnets(None));
        assert!(internal_elb_subnets(Some("")), "Giant Swarm's tooling sets an empty value");
        assert!(internal_elb_subnets(Some("true")));
        assert!(!internal_elb_subnets(Some(" False ")));
    }

    /// Node pool `g3j50` of §14.2: `10.1.1.0/24` split over 1a and 1b.
    pub fn params() -> Params {
        Params {
            common: testdata::common(),
            node_pool_id: "g3j50".into(),
            pool_cidr: "10.1.1.0/24".into(),
            azs: vec![
                TcnpAz {
                    name: "eu-central-1a".into(),
                    subnet_cidr: "10.1.1.0/25".into(),
                    nat_gateway_id: "nat-a".into(),
                },
                TcnpAz {
                    name: "eu-central-1b".into(),
                    subnet_cidr: "10.1.1.128/25".into(),
                    nat_gateway_id: "nat-b".into(),
                },
            ],
            vpc_id: "vpc-tenant".into(),
            vpc_cidr: "10.1.0.0/24".into(),
            peering_connection_id: "pcx-1".into(),
            cp_vpc_cidr: "10.0.0.0/16".into(),
            tccp_security_groups: TccpSecurityGroups {
                master: "sg-master".into(),
                api_internal_elb: "sg-internal-api".into(),
                aws_cni: Some("sg-aws-cni".into()),
            },
            other_pool_security_groups: vec!["sg-0other".into()],
            instance: NodeInstance {
                image_id: "ami-0flatcar".into(),
                instance_type: "m5.2xlarge".into(),
                docker_volume_gb: 100,
                kubelet_volume_gb: 50,
                log_volume_gb: 15,
                containerd_volume_gb: 100,
                imds_http_tokens: "required".into(),
            },
            min_size: 3,
            max_size: 10,
            rolling_update: rolling_update(3, 10, 5, None, None),
            distribution: InstanceDistribution {
                on_demand_base_capacity: 0,
                on_demand_percentage_above_base_capacity: 100,
                overrides: Vec::new(),
            },
            internal_elb_subnets: true,
            cilium_eni: false,
            bucket: "123456789012-g8s-al9qy".into(),
            kms_key_arn: "arn:aws:kms:eu-central-1:123456789012:key/k1".into(),
        }
    }

    #[test]
    fn rolling_update_defaults() {
        // 10 % of 5 rounds to 1 (0.5 rounds half up to 1; minimum 1 anyway).
        assert_eq!(
            rolling_update(3, 10, 5, None, None),
            RollingUpdate { desired: 5, max_batch_size: 1, min_instances_in_service: 4, pause_time: "PT10M".into() }
        );
        // 10 % of 25 = 2.5 rounds half up to 3.
        let r = rolling_update(1, 30, 25, None, None);
        assert_eq!((r.desired, r.max_batch_size, r.min_instances_in_service), (25, 3, 22));
    }

    #[test]
    fn desired_is_the_live_size_clamped_to_min_and_max() {
        assert_eq!(rolling_update(3, 10, 0, None, None).desired, 3, "a new group starts at min");
        assert_eq!(rolling_update(3, 10, 7, None, None).desired, 7, "an autoscaled size is kept");
        assert_eq!(rolling_update(3, 10, 12, None, None).desired, 10, "above max is cut to max");
    }

    #[test]
    fn max_batch_annotation_as_count_or_ratio() {
        assert_eq!(rolling_update(1, 20, 10, Some("4"), None).max_batch_size, 4);
        assert_eq!(rolling_update(1, 20, 10, Some("25"), None).max_batch_size, 25, "integers are used verbatim");
        assert_eq!(rolling_update(1, 20, 10, Some("0.25"), None).max_batch_size, 3, "2.5 rounds half up");
        assert_eq!(rolling_update(1, 20, 10, Some("1.0"), None).max_batch_size, 10);
        assert!(annotation_problems(Some("4"), Some("PT5M")).is_empty());
        assert!(annotation_problems(Some("0.5"), Some("PT1H")).is_empty());
        let problems = annotation_problems(Some("1.5"), Some("PT2H"));
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert_eq!(problems[0].annotation, MAX_BATCH_SIZE_ANNOTATION);
        assert_eq!(problems[1].annotation, PAUSE_TIME_ANNOTATION);
        assert!(problems[1].problem.contains("one hour"), "{problems:?}");
        for bad in ["0", "-1", "ten", ""] {
            assert_eq!(annotation_problems(Some(bad), None).len(), 1, "{bad}");
        }
        for bad in ["10m", "PT", "PT0S", "PT5X"] {
            assert_eq!(annotation_problems(None, Some(bad)).len(), 1, "{bad}");
        }
        assert_eq!(rolling_update(1, 20, 2, Some("0.1"), None).max_batch_size, 1, "at least one");
        for invalid in ["0", "-3", "1.5", "abc", "", "0.0"] {
            assert_eq!(rolling_update(1, 20, 10, Some(invalid), None).max_batch_size, 1, "{invalid:?} is ignored");
        }
        let r = rolling_update(1, 20, 10, Some("25"), None);
        assert_eq!(r.min_instances_in_service, 0, "never below zero");
    }

    #[test]
    fn pause_annotation_must_be_an_iso_duration_of_at_most_an_hour() {
        for valid in ["PT5M", "PT1H", "PT30S", "PT1M30S", "PT59M59S"] {
            assert_eq!(rolling_update(1, 3, 1, None, Some(valid)).pause_time, valid);
        }
        for invalid in ["PT2H", "PT61M", "5m", "P1D", "PT", "PT0S", "PTM", "PT5M1H", "PT1.5M", "PT5X"] {
            assert_eq!(rolling_update(1, 3, 1, None, Some(invalid)).pause_time, "PT10M", "{invalid:?}");
        }
    }

    #[test]
    fn inventory_and_section_14_2_cidrs() {
        let t = render(&params());
        assert_eq!(t.resources[VPC_CIDR_BLOCK].properties["CidrBlock"], "10.1.1.0/24");
        assert_eq!(t.resources[VPC_CIDR_BLOCK].properties["VpcId"], "vpc-tenant");
        assert_eq!(t.ids_of_type("AWS::EC2::Subnet"), vec!["PrivateSubnetEuCentral1a", "PrivateSubnetEuCentral1b"]);
        assert_eq!(t.resources["PrivateSubnetEuCentral1a"].properties["CidrBlock"], "10.1.1.0/25");
        assert_eq!(t.resources["PrivateSubnetEuCentral1b"].properties["CidrBlock"], "10.1.1.128/25");
        assert_eq!(t.resources["PrivateSubnetEuCentral1b"].depends_on, vec![VPC_CIDR_BLOCK]);
        assert_eq!(t.resources["NATRouteEuCentral1b"].properties["NatGatewayId"], "nat-b");
        assert_eq!(t.resources["VPCPeeringRouteEuCentral1a"].properties["DestinationCidrBlock"], "10.0.0.0/16");
        assert_eq!(t.resources["VPCPeeringRouteEuCentral1a"].properties["VpcPeeringConnectionId"], "pcx-1");
        assert_eq!(t.ids_of_type("AWS::EC2::SubnetRouteTableAssociation").len(), 2);
        assert_eq!(t.ids_of_type("AWS::EC2::VPCEndpoint"), vec![S3_ENDPOINT]);
        assert_eq!(t.resources[ROLE].properties["RoleName"], "gs-cluster-al9qy-role-g3j50");
        assert_eq!(t.resources[INSTANCE_PROFILE].properties["InstanceProfileName"], "gs-cluster-al9qy-profile-g3j50");
        assert_eq!(t.resources[POLICY].properties["PolicyName"], "gs-cluster-al9qy-policy-g3j50");
        assert_eq!(t.resources[LAUNCH_TEMPLATE].properties["LaunchTemplateName"], "al9qy-g3j50-LaunchTemplate");
        assert_eq!(t.resources[SECURITY_GROUP].properties["Tags"][0]["Value"], "al9qy-worker");
        assert!(t.resources[SECURITY_GROUP].properties.get("GroupName").is_none());
    }

    #[test]
    fn security_group_rules() {
        let t = render(&params());
        for id in [
            "PoolToInternalAPIRule",
            "PoolToMasterRule",
            "MasterToPoolRule",
            "PoolToPoolRule",
            "PoolToAWSCNIRule",
            "AWSCNIToPoolRule",
        ] {
            assert!(t.resource(id).is_some(), "{id}");
        }
        let peer = &t.resources["NodePoolToNodePoolRuleSg0other"].properties;
        assert_eq!(peer["SourceSecurityGroupId"], "sg-0other");
        assert_eq!(peer["GroupId"], cfn::r#ref(SECURITY_GROUP));
        assert!(peer["Description"].as_str().is_some_and(|d| d.contains("sg-0other")));
        assert_eq!(t.outputs[PEER_SECURITY_GROUPS_OUTPUT].value, "sg-0other");
        assert_eq!(t.resources["PoolToInternalAPIRule"].properties["GroupId"], "sg-internal-api");
        assert_eq!(t.resources["PoolToInternalAPIRule"].properties["FromPort"], 443);

        let mut p = params();
        p.tccp_security_groups.aws_cni = None;
        p.other_pool_security_groups.clear();
        let t = render(&p);
        assert!(t.resource("PoolToAWSCNIRule").is_none());
        assert!(t.ids_of_type("AWS::EC2::SecurityGroupIngress").iter().all(|id| !id.starts_with("NodePoolToNodePool")));
    }

    #[test]
    fn asg_sizes_hook_tags_and_update_policy() {
        let mut p = params();
        p.rolling_update = rolling_update(3, 10, 8, Some("0.5"), Some("PT5M"));
        let t = render(&p);
        let asg = &t.resources[ASG];
        assert_eq!(asg.properties["MinSize"], "3");
        assert_eq!(asg.properties["MaxSize"], "10");
        assert_eq!(asg.properties["DesiredCapacity"], "8");
        let policy = &asg.update_policy.as_ref().expect("update policy")["AutoScalingRollingUpdate"];
        assert_eq!(policy["MaxBatchSize"], "4");
        assert_eq!(policy["MinInstancesInService"], "4");
        assert_eq!(policy["PauseTime"], "PT5M");
        let hook = &asg.properties["LifecycleHookSpecificationList"][0];
        assert_eq!(hook["LifecycleHookName"], "NodePool");
        assert_eq!(hook["HeartbeatTimeout"], 3600);
        assert_eq!(asg.properties["HealthCheckGracePeriod"], 10);
        let tags = asg.properties["Tags"].as_array().cloned().unwrap_or_default();
        let tag = |k: &str| tags.iter().find(|t| t["Key"] == k).cloned();
        assert_eq!(tag("Name").map(|t| t["Value"].clone()), Some(json!("al9qy-worker")));
        assert_eq!(tag("k8s.io/cluster-autoscaler/al9qy").map(|t| t["Value"].clone()), Some(json!("true")));
        assert_eq!(
            tag("k8s.io/cluster-autoscaler/node-template/label/giantswarm.io/machine-deployment")
                .map(|t| t["Value"].clone()),
            Some(json!("g3j50"))
        );
        assert_eq!(tag("giantswarm.io/machine-deployment").map(|t| t["PropagateAtLaunch"].clone()), Some(json!(true)));
        assert_eq!(asg.depends_on, vec!["NATRouteEuCentral1a", "NATRouteEuCentral1b"]);
        let dist = &asg.properties["MixedInstancesPolicy"]["InstancesDistribution"];
        assert_eq!(dist["SpotInstancePools"], 1);
        assert_eq!(dist["SpotAllocationStrategy"], "lowest-price");
    }

    #[test]
    fn alike_instance_types_become_overrides() {
        let mut p = params();
        p.distribution.overrides = vec![
            InstanceOverride { instance_type: "m5.2xlarge".into(), weighted_capacity: Some(1) },
            InstanceOverride { instance_type: "m5a.2xlarge".into(), weighted_capacity: None },
        ];
        let t = render(&p);
        let mip = &t.resources[ASG].properties["MixedInstancesPolicy"];
        assert_eq!(
            mip["LaunchTemplate"]["Overrides"][0],
            json!({ "InstanceType": "m5.2xlarge", "WeightedCapacity": "1" })
        );
        assert_eq!(mip["LaunchTemplate"]["Overrides"][1], json!({ "InstanceType": "m5a.2xlarge" }));
        assert_eq!(mip["InstancesDistribution"]["SpotInstancePools"], 2);
    }

    #[test]
    fn launch_template_volumes_and_user_data() {
        let t = render(&params());
        let data = &t.resources[LAUNCH_TEMPLATE].properties["LaunchTemplateData"];
        let volumes: Vec<(Value, Value)> = data["BlockDeviceMappings"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|b| (b["DeviceName"].clone(), b["Ebs"]["VolumeSize"].clone()))
            .collect();
        assert_eq!(
            volumes,
            vec![
                (json!("/dev/xvdh"), json!(100)),
                (json!("/dev/xvdg"), json!(50)),
                (json!("/dev/xvdf"), json!(15)),
                (json!("/dev/xvdi"), json!(100)),
            ]
        );
        assert_eq!(data["Monitoring"]["Enabled"], true);
        assert_eq!(data["MetadataOptions"]["HttpTokens"], "required");
        assert_eq!(
            data["UserData"],
            user_data("123456789012-g8s-al9qy", "version/16.1.1/cloudconfig/v_6_1_0/cluster-al9qy-tcnp-g3j50")
        );
    }

    #[test]
    fn the_worker_role_grants_what_the_worker_uses() {
        let statements = |p: &Params| -> Vec<Value> {
            render(p).resources[POLICY].properties["PolicyDocument"]["Statement"]
                .as_array()
                .expect("statements")
                .clone()
        };
        let actions = |all: &[Value]| -> Vec<String> {
            all.iter()
                .flat_map(|s| {
                    s["Action"].as_array().expect("actions").iter().map(|a| a.as_str().expect("action").to_owned())
                })
                .collect()
        };
        let mut p = params();
        p.tccp_security_groups.aws_cni = None;
        p.cilium_eni = false;
        let plain = statements(&p);
        assert_eq!(
            actions(&plain),
            [
                "kms:Decrypt",
                "s3:ListBucket",
                "s3:GetObject",
                "ecr:GetAuthorizationToken",
                "ecr:BatchCheckLayerAvailability",
                "ecr:GetDownloadUrlForLayer",
                "ecr:BatchGetImage"
            ]
        );
        let cni = statements(&params());
        let eni = cni.iter().find(|s| s["Action"][0] == "ec2:AssignPrivateIpAddresses").expect("ENI statement");
        assert_eq!(
            eni["Condition"]["ArnEquals"]["ec2:Vpc"],
            cfn::sub("arn:aws:ec2:eu-central-1:${AWS::AccountId}:vpc/vpc-tenant"),
            "interfaces of the cluster's VPC only"
        );
        assert!(!actions(&cni).iter().any(|a| a.contains("Volume") || a.contains("Snapshot") || a.ends_with('*')));
    }

    #[test]
    fn outputs_for_change_detection() {
        let t = render(&params());
        assert_eq!(t.outputs["DockerVolumeSizeGB"].value, "100");
        assert_eq!(t.outputs["InstanceImage"].value, "ami-0flatcar");
        assert_eq!(t.outputs["InstanceType"].value, "m5.2xlarge");
        assert_eq!(t.outputs["OperatorVersion"].value, "16.1.1");
        assert_eq!(t.outputs["ReleaseVersion"].value, "18.2.0");
        let map: BTreeMap<String, String> = [
            ("DockerVolumeSizeGB", "100"),
            ("InstanceImage", "ami-1"),
            ("InstanceType", "m5.large"),
            ("OperatorVersion", "16.1.1"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        assert_eq!(Outputs::from_outputs(&map), Err(MissingOutput("ReleaseVersion".into())));
    }
}

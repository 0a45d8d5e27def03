//! TCCP, `cluster-<id>-tccp`, tenant account (reference §5.2, §5.4): the cluster's network.
//!
//! The VPC with its peering to the management VPC, per availability zone a public, a private and
//! (with AWS-CNI) a pod subnet with their route tables, a NAT gateway per AZ, the three classic
//! load balancers, the four security groups and, when Route53 is managed, the public and private
//! hosted zones with their records.
//!
//! Everything later stacks need is exported as stack **outputs** (VPC, peering, security groups,
//! per-AZ subnets and NAT gateways, hosted zones), so the operator reads one `DescribeStacks`
//! instead of describing EC2; [`Outputs::from_outputs`] parses them.
//!
//! Deliberate differences from upstream, each forced by keeping the template inside what both
//! CloudFormation and the moto emulator accept:
//!
//! * DNS names for the load balancers are `CNAME` records to the ELB DNS name rather than alias
//!   `A` records: an alias needs `Fn::GetAtt <elb>.CanonicalHostedZoneNameID`, which the
//!   emulator does not implement. Resolution is the same for clients.
//! * No `HostedZoneNameServers` output (it needs `GetAtt NameServers`); it only served the
//!   bridge-zone delegation, which is out of scope.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::{Common, MissingOutput, az_suffix, required, version_outputs};
use crate::cfn::{self, Resource, Template};
use crate::{ipam, names};

/// Logical ID of the VPC.
pub const VPC: &str = "VPC";
/// Logical ID of the secondary CIDR block for the AWS-CNI pod network.
pub const VPC_CIDR_BLOCK_AWS_CNI: &str = "VPCCidrBlockAWSCNI";
/// Logical ID of the peering to the management VPC.
pub const PEERING: &str = "VPCPeeringConnection";
/// Logical ID of the S3 gateway endpoint.
pub const S3_ENDPOINT: &str = "VPCS3Endpoint";
/// Logical ID of the internet gateway.
pub const INTERNET_GATEWAY: &str = "InternetGateway";
/// Logical ID of the internet gateway's attachment to the VPC.
pub const GATEWAY_ATTACHMENT: &str = "VPCGatewayAttachment";
/// Logical ID of the hardening egress rule on the VPC's default security group.
pub const DEFAULT_SG_EGRESS: &str = "VPCDefaultSecurityGroupEgress";
/// Logical ID of the public API load balancer (`<id>-api`).
pub const API_ELB: &str = "ApiLoadBalancer";
/// Logical ID of the internal API load balancer (`<id>-api-internal`).
pub const API_INTERNAL_ELB: &str = "ApiInternalLoadBalancer";
/// Logical ID of the etcd load balancer (`<id>-etcd`).
pub const ETCD_ELB: &str = "EtcdLoadBalancer";
/// Logical ID of the masters' security group.
pub const MASTER_SG: &str = "MasterSecurityGroup";
/// Logical ID of the etcd load balancer's security group.
pub const ETCD_ELB_SG: &str = "EtcdELBSecurityGroup";
/// Logical ID of the internal API load balancer's security group.
pub const API_INTERNAL_ELB_SG: &str = "APIInternalELBSecurityGroup";
/// Logical ID of the AWS-CNI pods' security group.
pub const AWS_CNI_SG: &str = "AWSCNISecurityGroup";
/// Logical ID of the public hosted zone.
pub const HOSTED_ZONE: &str = "HostedZone";
/// Logical ID of the private hosted zone.
pub const INTERNAL_HOSTED_ZONE: &str = "InternalHostedZone";

/// The ranges allowed to reach the internal API when no private whitelist is set: RFC 1918,
/// carrier-grade NAT and `198.19.0.0/16` (§5.4).
pub const PRIVATE_RANGES: [&str; 5] =
    ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "198.19.0.0/16"];

/// Ports masters accept from the management VPC: cadvisor, etcd backup, kubelet, node-exporter,
/// kube-state-metrics, SSH.
const MASTER_PORTS_FROM_CP: [u16; 6] = [4194, 2379, 10250, 10300, 10301, 22];

/// One availability zone of the TCCP layout (computed by the operator's IPAM, §7.6).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TccpAz {
    /// The AZ name, e.g. `eu-central-1a`.
    pub name: String,
    /// The public subnet, a `/27` of the cluster CIDR.
    pub public_cidr: String,
    /// The private subnet, the `/27` after the public one.
    pub private_cidr: String,
    /// The AWS-CNI pod subnet in the pod CIDR; only rendered when [`Params::pod_cidr`] is set.
    pub aws_cni_cidr: Option<String>,
}

/// The management cluster's side of the peering.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControlPlaneVpc {
    /// The management account ID (`PeerOwnerId`).
    pub account_id: String,
    /// The management VPC ID (`PeerVpcId`).
    pub vpc_id: String,
    /// The management VPC CIDR, routed through the peering and allowed on admin ports.
    pub cidr: String,
    /// ARN of the TCCPI peer-access role (`PeerRoleArn`).
    pub peer_role_arn: String,
}

/// Optional API whitelisting (§5.4). `None` keeps the defaults: public API open to the world,
/// internal API open to the private ranges.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApiWhitelist {
    /// CIDRs allowed on the public API besides the management VPC, the cluster CIDR and the
    /// cluster's own NAT addresses; the caller adds the management cluster's NAT `/32`s here.
    pub public: Option<Vec<String>>,
    /// CIDRs allowed on the internal API besides the management VPC, cluster and pod CIDRs.
    pub private: Option<Vec<String>>,
}

/// Inputs of the TCCP template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Params {
    /// Cluster-wide inputs.
    pub common: Common,
    /// The cluster CIDR (`status.provider.network.cidr`), the VPC's primary block.
    pub vpc_cidr: String,
    /// The AWS-CNI pod CIDR when AWS-CNI is in use: added as a secondary VPC block, with one
    /// aws-cni subnet per AZ and the AWS-CNI security-group rules.
    pub pod_cidr: Option<String>,
    /// The AZ layout, sorted by name. Never shrinks (§5.4).
    pub azs: Vec<TccpAz>,
    /// The peer side.
    pub control_plane: ControlPlaneVpc,
    /// API whitelisting.
    pub whitelist: ApiWhitelist,
    /// The bucket the three load balancers write their access logs into (under
    /// [`names::ELB_ACCESS_LOG_PREFIX`]), or `None` to write none; see [`access_logs`].
    pub access_logs: Option<String>,
}

/// Where the load balancers' access logs go: the cluster's access-log bucket, unless the
/// AWSCluster's annotation `alpha.aws.giantswarm.io/load-balancer-access-logs` says `false`.
pub fn access_logs(annotation: Option<&str>, tenant_account_id: &str, cluster_id: &str) -> Option<String> {
    match annotation.map(str::trim) {
        Some("false") => None,
        _ => Some(names::access_log_bucket(tenant_account_id, cluster_id)),
    }
}

/// Output key of an AZ's public subnet ID: `PublicSubnetID<Az>`.
pub fn public_subnet_output(az: &str) -> String {
    format!("PublicSubnetID{}", az_suffix(az))
}

/// Output key of an AZ's private subnet ID: `PrivateSubnetID<Az>`.
pub fn private_subnet_output(az: &str) -> String {
    format!("PrivateSubnetID{}", az_suffix(az))
}

/// Output key of an AZ's AWS-CNI subnet ID: `AWSCNISubnetID<Az>`.
pub fn aws_cni_subnet_output(az: &str) -> String {
    format!("AWSCNISubnetID{}", az_suffix(az))
}

/// Output key of an AZ's public subnet CIDR: `PublicSubnetCIDR<Az>`.
pub fn public_subnet_cidr_output(az: &str) -> String {
    format!("PublicSubnetCIDR{}", az_suffix(az))
}

/// Output key of an AZ's private subnet CIDR: `PrivateSubnetCIDR<Az>`.
pub fn private_subnet_cidr_output(az: &str) -> String {
    format!("PrivateSubnetCIDR{}", az_suffix(az))
}

/// Output key of an AZ's AWS-CNI subnet CIDR: `AWSCNISubnetCIDR<Az>`.
pub fn aws_cni_subnet_cidr_output(az: &str) -> String {
    format!("AWSCNISubnetCIDR{}", az_suffix(az))
}

/// The zone layout a deployed TCCP stack was rendered with, read from its outputs: the anchor
/// for [`ipam::tccp_layout_preserving`], so that adding a zone never moves a subnet. The
/// `AvailabilityZones` output lists the zones, and the `*SubnetCIDR<Az>` outputs their blocks. A
/// stack rendered before those outputs existed was laid out by [`ipam::tccp_layout`] over
/// exactly the zones it lists, which is computed again here. No zones: an empty layout.
pub fn deployed_layout(
    outputs: &BTreeMap<String, String>,
    cluster_cidr: ipam::Ipv4Net,
    pod_cidr: Option<ipam::Ipv4Net>,
) -> Result<Vec<ipam::TccpAz>, ipam::IpamError> {
    let zones: Vec<String> = outputs
        .get("AvailabilityZones")
        .map(|s| s.split(',').filter(|a| !a.is_empty()).map(str::to_owned).collect())
        .unwrap_or_default();
    if zones.is_empty() {
        return Ok(Vec::new());
    }
    let recorded = |zone: &String| {
        let public = outputs.get(&public_subnet_cidr_output(zone))?;
        let private = outputs.get(&private_subnet_cidr_output(zone))?;
        Some((public, private, outputs.get(&aws_cni_subnet_cidr_output(zone))))
    };
    if !zones.iter().all(|z| recorded(z).is_some()) {
        return ipam::tccp_layout(cluster_cidr, pod_cidr, &zones);
    }
    zones
        .iter()
        .filter_map(|zone| recorded(zone).map(|r| (zone, r)))
        .map(|(zone, (public, private, aws_cni))| {
            Ok(ipam::TccpAz {
                name: zone.clone(),
                public: public.parse()?,
                private: private.parse()?,
                aws_cni: aws_cni.map(|c| c.parse()).transpose()?,
            })
        })
        .collect()
}

/// Output key of an AZ's NAT gateway ID: `NATGatewayID<Az>`.
pub fn nat_gateway_output(az: &str) -> String {
    format!("NATGatewayID{}", az_suffix(az))
}

fn ingress(protocol: &str, from: i32, to: i32, cidr: Value, description: &str) -> Value {
    json!({ "IpProtocol": protocol, "FromPort": from, "ToPort": to, "CidrIp": cidr, "Description": description })
}

pub(crate) fn tcp(port: u16, cidr: impl Into<Value>, description: &str) -> Value {
    ingress("tcp", i32::from(port), i32::from(port), cidr.into(), description)
}

/// A standalone ingress rule from one security group into another; standalone because inline
/// rules that reference each other's groups would form a dependency cycle.
pub(crate) fn sg_rule(
    target: &str,
    source: &str,
    protocol: &str,
    ports: Option<(u16, u16)>,
    description: &str,
) -> Resource {
    let mut props = json!({
        "GroupId": cfn::r#ref(target),
        "SourceSecurityGroupId": cfn::r#ref(source),
        "IpProtocol": protocol,
        "Description": description,
    });
    // Ports are meaningless (and ignored) for protocol `-1`, so they are only set with ports.
    if let Some((from, to)) = ports {
        props["FromPort"] = json!(from);
        props["ToPort"] = json!(to);
    }
    Resource::new("AWS::EC2::SecurityGroupIngress", props)
}

pub(crate) fn classic_elb(
    access_logs: Option<&str>,
    name: String,
    internet_facing: bool,
    subnets: Vec<Value>,
    security_group: &str,
    port: u16,
    health_target: &str,
) -> Resource {
    let port = port.to_string();
    let mut lb = Resource::new(
        "AWS::ElasticLoadBalancing::LoadBalancer",
        json!({
            "LoadBalancerName": name,
            "Scheme": if internet_facing { "internet-facing" } else { "internal" },
            "Subnets": subnets,
            "SecurityGroups": [cfn::r#ref(security_group)],
            "CrossZone": true,
            "ConnectionSettings": { "IdleTimeout": 1200 },
            "HealthCheck": {
                "Target": health_target,
                "Interval": "5",
                "Timeout": "3",
                "HealthyThreshold": "2",
                "UnhealthyThreshold": "2",
            },
            "Listeners": [{
                "LoadBalancerPort": port,
                "Protocol": "TCP",
                "InstancePort": port,
                "InstanceProtocol": "TCP",
            }],
        }),
    );
    if let Some(bucket) = access_logs {
        lb.properties["AccessLoggingPolicy"] = json!({
            "Enabled": true,
            "S3BucketName": bucket,
            "S3BucketPrefix": names::ELB_ACCESS_LOG_PREFIX,
            "EmitInterval": 60,
        });
    }
    // Real AWS refuses an internet-facing ELB in a VPC without an attached gateway.
    if internet_facing { lb.depends_on([GATEWAY_ATTACHMENT]) } else { lb }
}

/// What a record of TCCP points at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordTarget {
    /// The DNS name of the load balancer with this logical ID.
    LoadBalancer(&'static str),
    /// `ingress.<base>`, the ingress controller's name.
    Ingress,
}

/// One record set of TCCP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordSetSpec {
    /// Its logical ID.
    pub logical_id: &'static str,
    /// The logical ID of its zone ([`HOSTED_ZONE`] or [`INTERNAL_HOSTED_ZONE`]).
    pub zone: &'static str,
    /// Its name below the cluster's domain: `api` is `api.<id>.k8s.<domain>.`.
    pub label: &'static str,
    /// What it points at.
    pub target: RecordTarget,
}

/// The type of every record set of TCCP.
pub const RECORD_TYPE: &str = "CNAME";

/// The record sets TCCP creates in the cluster's zones (the teardown leaves these to the stack).
pub const RECORD_SETS: [RecordSetSpec; 7] = [
    RecordSetSpec {
        logical_id: "ApiRecordSet",
        zone: HOSTED_ZONE,
        label: "api",
        target: RecordTarget::LoadBalancer(API_ELB),
    },
    RecordSetSpec {
        logical_id: "ApiInternalRecordSet",
        zone: HOSTED_ZONE,
        label: "internal-api",
        target: RecordTarget::LoadBalancer(API_INTERNAL_ELB),
    },
    RecordSetSpec {
        logical_id: "EtcdRecordSet",
        zone: HOSTED_ZONE,
        label: "etcd",
        target: RecordTarget::LoadBalancer(ETCD_ELB),
    },
    RecordSetSpec {
        logical_id: "IngressWildcardRecordSet",
        zone: HOSTED_ZONE,
        label: "*",
        target: RecordTarget::Ingress,
    },
    RecordSetSpec {
        logical_id: "InternalApiRecordSet",
        zone: INTERNAL_HOSTED_ZONE,
        label: "api",
        target: RecordTarget::LoadBalancer(API_INTERNAL_ELB),
    },
    RecordSetSpec {
        logical_id: "InternalEtcdRecordSet",
        zone: INTERNAL_HOSTED_ZONE,
        label: "etcd",
        target: RecordTarget::LoadBalancer(ETCD_ELB),
    },
    RecordSetSpec {
        logical_id: "InternalIngressWildcardRecordSet",
        zone: INTERNAL_HOSTED_ZONE,
        label: "*",
        target: RecordTarget::Ingress,
    },
];

pub(crate) fn record(zone: &str, name: String, target: Value) -> Resource {
    Resource::new(
        "AWS::Route53::RecordSet",
        json!({
            "HostedZoneId": cfn::r#ref(zone),
            "Name": name,
            "Type": RECORD_TYPE,
            "TTL": "300",
            "ResourceRecords": [target],
        }),
    )
}

/// Renders the TCCP template.
pub fn render(p: &Params) -> Template {
    let c = &p.common;
    let id = c.cluster_id.as_str();
    let cni = p.pod_cidr.is_some();
    let mut t = Template::new(format!("Tenant cluster {id} control plane network (tccp)."));

    t.add(
        VPC,
        Resource::new(
            "AWS::EC2::VPC",
            json!({
                "CidrBlock": p.vpc_cidr,
                "EnableDnsSupport": true,
                "EnableDnsHostnames": true,
                "InstanceTenancy": "default",
                "Tags": cfn::tags(&[("Name", id)]),
            }),
        ),
    );
    if let Some(pod_cidr) = &p.pod_cidr {
        t.add(
            VPC_CIDR_BLOCK_AWS_CNI,
            Resource::new("AWS::EC2::VPCCidrBlock", json!({ "VpcId": cfn::r#ref(VPC), "CidrBlock": pod_cidr })),
        );
    }
    t.add(
        PEERING,
        Resource::new(
            "AWS::EC2::VPCPeeringConnection",
            json!({
                "VpcId": cfn::r#ref(VPC),
                "PeerVpcId": p.control_plane.vpc_id,
                // A JSON string: an account ID with leading zeros must not become a number.
                "PeerOwnerId": p.control_plane.account_id,
                "PeerRoleArn": p.control_plane.peer_role_arn,
                "Tags": cfn::tags(&[("Name", id)]),
            }),
        ),
    );
    t.add(INTERNET_GATEWAY, Resource::new("AWS::EC2::InternetGateway", json!({ "Tags": cfn::tags(&[("Name", id)]) })));
    t.add(
        GATEWAY_ATTACHMENT,
        Resource::new(
            "AWS::EC2::VPCGatewayAttachment",
            json!({ "VpcId": cfn::r#ref(VPC), "InternetGatewayId": cfn::r#ref(INTERNET_GATEWAY) }),
        ),
    );
    // Upstream's compliance artefact: a no-op egress rule on the default security group.
    t.add(
        DEFAULT_SG_EGRESS,
        Resource::new(
            "AWS::EC2::SecurityGroupEgress",
            json!({
                "GroupId": cfn::get_att(VPC, "DefaultSecurityGroup"),
                "IpProtocol": "-1",
                "CidrIp": "127.0.0.1/32",
                "Description": "Restrict the default security group to loopback.",
            }),
        ),
    );

    let mut endpoint_route_tables = Vec::new();
    let mut public_subnets = Vec::new();
    let mut private_subnets = Vec::new();
    for az in &p.azs {
        let s = az_suffix(&az.name);
        let public_rt = format!("PublicRouteTable{s}");
        let private_rt = format!("PrivateRouteTable{s}");
        let public_subnet = format!("PublicSubnet{s}");
        let private_subnet = format!("PrivateSubnet{s}");
        let nat = format!("NATGateway{s}");
        let eip = format!("NATEIP{s}");

        add_subnet(&mut t, c, &az.name, "public", &public_subnet, &az.public_cidr, &public_rt, None);
        add_subnet(&mut t, c, &az.name, "private", &private_subnet, &az.private_cidr, &private_rt, None);
        t.add(
            format!("PublicInternetGatewayRoute{s}"),
            Resource::new(
                "AWS::EC2::Route",
                json!({
                    "RouteTableId": cfn::r#ref(&public_rt),
                    "DestinationCidrBlock": "0.0.0.0/0",
                    "GatewayId": cfn::r#ref(INTERNET_GATEWAY),
                }),
            )
            .depends_on([GATEWAY_ATTACHMENT]),
        );
        t.add(
            eip.clone(),
            Resource::new(
                "AWS::EC2::EIP",
                json!({ "Domain": "vpc", "Tags": cfn::tags(&[("Name", id), ("giantswarm.io/availability-zone", &az.name)]) }),
            )
            .depends_on([GATEWAY_ATTACHMENT]),
        );
        t.add(
            nat.clone(),
            Resource::new(
                "AWS::EC2::NatGateway",
                json!({
                    "AllocationId": cfn::get_att(&eip, "AllocationId"),
                    "SubnetId": cfn::r#ref(&public_subnet),
                    "Tags": cfn::tags(&[("Name", id), ("giantswarm.io/availability-zone", &az.name)]),
                }),
            ),
        );
        t.add(format!("PrivateNATRoute{s}"), nat_route(&private_rt, &nat));
        t.add(
            format!("VPCPeeringRoute{s}"),
            Resource::new(
                "AWS::EC2::Route",
                json!({
                    "RouteTableId": cfn::r#ref(&private_rt),
                    "DestinationCidrBlock": p.control_plane.cidr,
                    "VpcPeeringConnectionId": cfn::r#ref(PEERING),
                }),
            ),
        );
        endpoint_route_tables.push(cfn::r#ref(&public_rt));
        endpoint_route_tables.push(cfn::r#ref(&private_rt));
        if let (true, Some(cni_cidr)) = (cni, &az.aws_cni_cidr) {
            let cni_rt = format!("AWSCNIRouteTable{s}");
            let cni_subnet = format!("AWSCNISubnet{s}");
            add_subnet(&mut t, c, &az.name, "aws-cni", &cni_subnet, cni_cidr, &cni_rt, Some(VPC_CIDR_BLOCK_AWS_CNI));
            t.add(format!("AWSCNINATRoute{s}"), nat_route(&cni_rt, &nat));
            endpoint_route_tables.push(cfn::r#ref(&cni_rt));
            t.output(aws_cni_subnet_output(&az.name), cfn::r#ref(&cni_subnet), None);
            t.output(aws_cni_subnet_cidr_output(&az.name), json!(cni_cidr), None);
        }
        t.output(public_subnet_output(&az.name), cfn::r#ref(&public_subnet), None);
        t.output(private_subnet_output(&az.name), cfn::r#ref(&private_subnet), None);
        // The blocks as rendered: the next render keeps them (`deployed_layout`).
        t.output(public_subnet_cidr_output(&az.name), json!(az.public_cidr), None);
        t.output(private_subnet_cidr_output(&az.name), json!(az.private_cidr), None);
        t.output(nat_gateway_output(&az.name), cfn::r#ref(&nat), None);
        public_subnets.push(cfn::r#ref(&public_subnet));
        private_subnets.push(cfn::r#ref(&private_subnet));
    }

    t.add(
        S3_ENDPOINT,
        Resource::new(
            "AWS::EC2::VPCEndpoint",
            json!({
                "VpcId": cfn::r#ref(VPC),
                "ServiceName": format!("com.amazonaws.{}.s3", c.region),
                "VpcEndpointType": "Gateway",
                "RouteTableIds": endpoint_route_tables,
                "PolicyDocument": cfn::policy_document(vec![json!({
                    "Sid": format!("{id}-vpc-s3-endpoint-policy-bucket"),
                    "Effect": "Allow",
                    "Principal": "*",
                    "Action": "s3:*",
                    "Resource": c.s3_arn("*"),
                })]),
            }),
        ),
    );

    add_security_groups(&mut t, p);

    let [api_name, api_internal_name, etcd_name] = names::load_balancers(id);
    let logs = p.access_logs.as_deref();
    t.add(API_ELB, classic_elb(logs, api_name, true, public_subnets, MASTER_SG, 443, "HTTP:8089/healthz"));
    t.add(
        API_INTERNAL_ELB,
        classic_elb(
            logs,
            api_internal_name,
            false,
            private_subnets.clone(),
            API_INTERNAL_ELB_SG,
            443,
            "HTTP:8089/healthz",
        ),
    );
    t.add(ETCD_ELB, classic_elb(logs, etcd_name, false, private_subnets, ETCD_ELB_SG, 2379, "TCP:2379"));

    if c.route53_enabled {
        add_route53(&mut t, c);
    }

    version_outputs(&mut t, c);
    t.output("VPCID", cfn::r#ref(VPC), Some("Tenant cluster VPC"));
    t.output("VPCPeeringConnectionID", cfn::r#ref(PEERING), Some("Peering to the management cluster VPC"));
    t.output("MasterSecurityGroupID", cfn::r#ref(MASTER_SG), None);
    t.output("EtcdELBSecurityGroupID", cfn::r#ref(ETCD_ELB_SG), None);
    t.output("APIInternalELBSecurityGroupID", cfn::r#ref(API_INTERNAL_ELB_SG), None);
    t.output("AWSCNISecurityGroupID", cfn::r#ref(AWS_CNI_SG), None);
    t.output("APIServerPublicLoadBalancer", cfn::get_att(API_ELB, "DNSName"), Some("DNS name of the public API ELB"));
    let az_names: Vec<&str> = p.azs.iter().map(|a| a.name.as_str()).collect();
    t.output("AvailabilityZones", json!(az_names.join(",")), Some("AZs of the layout, comma-separated"));
    t
}

fn nat_route(route_table: &str, nat: &str) -> Resource {
    Resource::new(
        "AWS::EC2::Route",
        json!({
            "RouteTableId": cfn::r#ref(route_table),
            "DestinationCidrBlock": "0.0.0.0/0",
            "NatGatewayId": cfn::r#ref(nat),
        }),
    )
}

/// A subnet with its route table and association; `kind` is `public`, `private` or `aws-cni`.
#[allow(clippy::too_many_arguments)]
fn add_subnet(
    t: &mut Template,
    c: &Common,
    az: &str,
    kind: &str,
    subnet_id: &str,
    cidr: &str,
    route_table_id: &str,
    depends_on: Option<&str>,
) {
    let id = c.cluster_id.as_str();
    let name = format!("{id}-{kind}-{az}");
    let mut tags =
        vec![("Name", name.as_str()), ("giantswarm.io/availability-zone", az), ("giantswarm.io/subnet-type", kind)];
    match kind {
        "public" => {
            tags.push(("kubernetes.io/role/elb", "1"));
            tags.push(("sigs.k8s.io/cluster-api-provider-aws/role", "public"));
        }
        "private" => {
            tags.push(("kubernetes.io/role/internal-elb", "1"));
            tags.push(("sigs.k8s.io/cluster-api-provider-aws/role", "private"));
        }
        _ => {}
    }
    let subnet = Resource::new(
        "AWS::EC2::Subnet",
        json!({
            "VpcId": cfn::r#ref(VPC),
            "CidrBlock": cidr,
            "AvailabilityZone": az,
            "MapPublicIpOnLaunch": false,
            "Tags": cfn::tags(&tags),
        }),
    );
    // A subnet in a secondary block can only be created once the block is associated.
    t.add(subnet_id, if let Some(dep) = depends_on { subnet.depends_on([dep]) } else { subnet });
    t.add(
        route_table_id,
        Resource::new(
            "AWS::EC2::RouteTable",
            json!({
                "VpcId": cfn::r#ref(VPC),
                "Tags": cfn::tags(&[
                    ("Name", name.as_str()),
                    ("giantswarm.io/availability-zone", az),
                    ("giantswarm.io/route-table-type", kind),
                ]),
            }),
        ),
    );
    t.add(
        format!("{subnet_id}RouteTableAssociation"),
        Resource::new(
            "AWS::EC2::SubnetRouteTableAssociation",
            json!({ "RouteTableId": cfn::r#ref(route_table_id), "SubnetId": cfn::r#ref(subnet_id) }),
        ),
    );
}

fn add_security_groups(t: &mut Template, p: &Params) {
    let c = &p.common;
    let id = c.cluster_id.as_str();
    let cp_cidr = p.control_plane.cidr.as_str();
    let sg = |name: String, description: &str, ingress: Vec<Value>| {
        Resource::new(
            "AWS::EC2::SecurityGroup",
            json!({
                "GroupDescription": description,
                "VpcId": cfn::r#ref(VPC),
                "SecurityGroupIngress": ingress,
                "Tags": cfn::tags(&[("Name", name)]),
            }),
        )
    };

    let mut master = Vec::new();
    match &p.whitelist.public {
        None => master.push(tcp(443, "0.0.0.0/0", "Kubernetes API from anywhere")),
        Some(extra) => {
            master.push(tcp(443, cp_cidr, "Kubernetes API from the management cluster"));
            master.push(tcp(443, p.vpc_cidr.as_str(), "Kubernetes API from the cluster"));
            for cidr in extra {
                master.push(tcp(443, cidr.as_str(), "Kubernetes API from a whitelisted range"));
            }
            for az in &p.azs {
                let eip = cfn::r#ref(&format!("NATEIP{}", az_suffix(&az.name)));
                master.push(tcp(443, cfn::join("", vec![eip, json!("/32")]), "Kubernetes API from the cluster's NAT"));
            }
        }
    }
    for port in MASTER_PORTS_FROM_CP {
        master.push(tcp(port, cp_cidr, "Monitoring and administration from the management cluster"));
    }
    t.add(MASTER_SG, sg(format!("{id}-master"), &format!("{id} masters"), master));

    t.add(
        ETCD_ELB_SG,
        sg(
            format!("{id}-etcd-elb"),
            &format!("{id} etcd load balancer"),
            vec![tcp(2379, "0.0.0.0/0", "etcd from anywhere"), tcp(2379, cp_cidr, "etcd from the management cluster")],
        ),
    );

    let internal: Vec<Value> = match &p.whitelist.private {
        None => PRIVATE_RANGES.iter().map(|r| tcp(443, *r, "Kubernetes API from private ranges")).collect(),
        Some(extra) => {
            let mut v = vec![
                tcp(443, cp_cidr, "Kubernetes API from the management cluster"),
                tcp(443, p.vpc_cidr.as_str(), "Kubernetes API from the cluster"),
            ];
            if let Some(pods) = &p.pod_cidr {
                v.push(tcp(443, pods.as_str(), "Kubernetes API from pods"));
            }
            v.extend(extra.iter().map(|cidr| tcp(443, cidr.as_str(), "Kubernetes API from a whitelisted range")));
            v
        }
    };
    t.add(API_INTERNAL_ELB_SG, sg(format!("{id}-internal-api"), &format!("{id} internal API load balancer"), internal));
    t.add(AWS_CNI_SG, sg(format!("{id}-aws-cni"), &format!("{id} AWS-CNI pods"), Vec::new()));

    t.add("MasterIngressFromMaster", sg_rule(MASTER_SG, MASTER_SG, "-1", None, "All traffic between masters"));
    t.add(
        "MasterIngressFromAPIInternalELB",
        sg_rule(MASTER_SG, API_INTERNAL_ELB_SG, "tcp", Some((8089, 8089)), "API health check from the internal ELB"),
    );
    t.add("MasterIngressFromEtcdELB", sg_rule(MASTER_SG, ETCD_ELB_SG, "tcp", Some((2379, 2379)), "etcd from its ELB"));
    if p.pod_cidr.is_some() {
        t.add("MasterIngressFromAWSCNI", sg_rule(MASTER_SG, AWS_CNI_SG, "-1", None, "All traffic from pods"));
        t.add("AWSCNIIngressFromMaster", sg_rule(AWS_CNI_SG, MASTER_SG, "-1", None, "All traffic from masters"));
        t.add("AWSCNIIngressFromAWSCNI", sg_rule(AWS_CNI_SG, AWS_CNI_SG, "-1", None, "All traffic between pods"));
    }
}

fn add_route53(t: &mut Template, c: &Common) {
    let base = c.tenant_domain();
    let zone_name = format!("{base}.");
    t.add(
        HOSTED_ZONE,
        Resource::new(
            "AWS::Route53::HostedZone",
            json!({ "Name": zone_name, "HostedZoneConfig": { "Comment": format!("Tenant cluster {} public zone", c.cluster_id) } }),
        ),
    );
    t.add(
        INTERNAL_HOSTED_ZONE,
        Resource::new(
            "AWS::Route53::HostedZone",
            json!({
                "Name": zone_name,
                "HostedZoneConfig": { "Comment": format!("Tenant cluster {} private zone", c.cluster_id) },
                "VPCs": [{ "VPCId": cfn::r#ref(VPC), "VPCRegion": c.region }],
            }),
        ),
    );
    for set in RECORD_SETS {
        let target = match set.target {
            RecordTarget::LoadBalancer(lb) => cfn::get_att(lb, "DNSName"),
            RecordTarget::Ingress => json!(format!("ingress.{base}.")),
        };
        t.add(set.logical_id, record(set.zone, format!("{}.{base}.", set.label), target));
    }
    t.output("HostedZoneID", cfn::r#ref(HOSTED_ZONE), Some("Public hosted zone of the cluster"));
    t.output("InternalHostedZoneID", cfn::r#ref(INTERNAL_HOSTED_ZONE), Some("Private hosted zone of the cluster"));
}

/// The IDs of one AZ's resources, read from the outputs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AzOutputs {
    /// The AZ name.
    pub name: String,
    /// `PublicSubnetID<Az>`.
    pub public_subnet_id: String,
    /// `PrivateSubnetID<Az>`.
    pub private_subnet_id: String,
    /// `NATGatewayID<Az>`.
    pub nat_gateway_id: String,
    /// `AWSCNISubnetID<Az>`, present only with AWS-CNI.
    pub aws_cni_subnet_id: Option<String>,
}

/// The TCCP stack outputs, typed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outputs {
    /// `OperatorVersion`: the operator version that last rendered the stack.
    pub operator_version: String,
    /// `ReleaseVersion`.
    pub release_version: String,
    /// `VPCID`.
    pub vpc_id: String,
    /// `VPCPeeringConnectionID`.
    pub vpc_peering_connection_id: String,
    /// `MasterSecurityGroupID`.
    pub master_security_group_id: String,
    /// `EtcdELBSecurityGroupID`.
    pub etcd_elb_security_group_id: String,
    /// `APIInternalELBSecurityGroupID`.
    pub api_internal_elb_security_group_id: String,
    /// `AWSCNISecurityGroupID`.
    pub aws_cni_security_group_id: String,
    /// Per requested AZ, in the order asked for.
    pub azs: Vec<AzOutputs>,
    /// `HostedZoneID`; absent when Route53 is not managed.
    pub hosted_zone_id: Option<String>,
    /// `InternalHostedZoneID`; absent when Route53 is not managed (upstream tolerates its absence).
    pub internal_hosted_zone_id: Option<String>,
    /// `APIServerPublicLoadBalancer`, the public API ELB's DNS name (absence tolerated upstream).
    pub api_server_public_load_balancer: Option<String>,
    /// `AvailabilityZones`: the AZs the stack was rendered with.
    pub availability_zones: Vec<String>,
}

impl Outputs {
    /// Parses `DescribeStacks` outputs. `azs` are the AZs whose subnets the caller needs; each
    /// must have its subnet and NAT outputs. The Route53 outputs are optional here because
    /// whether they are required depends on the installation; callers with Route53 enabled check
    /// [`Outputs::hosted_zone_id`] themselves.
    pub fn from_outputs<S: AsRef<str>>(outputs: &BTreeMap<String, String>, azs: &[S]) -> Result<Self, MissingOutput> {
        let azs = azs
            .iter()
            .map(|az| {
                let az = az.as_ref();
                Ok(AzOutputs {
                    name: az.to_owned(),
                    public_subnet_id: required(outputs, &public_subnet_output(az))?,
                    private_subnet_id: required(outputs, &private_subnet_output(az))?,
                    nat_gateway_id: required(outputs, &nat_gateway_output(az))?,
                    aws_cni_subnet_id: outputs.get(&aws_cni_subnet_output(az)).cloned(),
                })
            })
            .collect::<Result<Vec<_>, MissingOutput>>()?;
        Ok(Outputs {
            operator_version: required(outputs, "OperatorVersion")?,
            release_version: required(outputs, "ReleaseVersion")?,
            vpc_id: required(outputs, "VPCID")?,
            vpc_peering_connection_id: required(outputs, "VPCPeeringConnectionID")?,
            master_security_group_id: required(outputs, "MasterSecurityGroupID")?,
            etcd_elb_security_group_id: required(outputs, "EtcdELBSecurityGroupID")?,
            api_internal_elb_security_group_id: required(outputs, "APIInternalELBSecurityGroupID")?,
            aws_cni_security_group_id: required(outputs, "AWSCNISecurityGroupID")?,
            azs,
            hosted_zone_id: outputs.get("HostedZoneID").cloned(),
            internal_hosted_zone_id: outputs.get("InternalHostedZoneID").cloned(),
            api_server_public_load_balancer: outputs.get("APIServerPublicLoadBalancer").cloned(),
            availability_zones: outputs
                .get("AvailabilityZones")
                .map(|s| s.split(',').filter(|a| !a.is_empty()).map(str::to_owned).collect())
                .unwrap_or_default(),
        })
    }

    /// The outputs of one AZ, if it was requested.
    pub fn az(&self, name: &str) -> Option<&AzOutputs> {
        self.azs.iter().find(|a| a.name == name)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::stacks::testdata;

    /// The §14.2 layout: cluster `10.1.0.0/24`, AZs 1a and 1b, pods `10.2.0.0/16`.
    pub fn params() -> Params {
        Params {
            common: testdata::common(),
            vpc_cidr: "10.1.0.0/24".into(),
            pod_cidr: Some("10.2.0.0/16".into()),
            azs: vec![
                TccpAz {
                    name: "eu-central-1a".into(),
                    public_cidr: "10.1.0.0/27".into(),
                    private_cidr: "10.1.0.32/27".into(),
                    aws_cni_cidr: Some("10.2.0.0/18".into()),
                },
                TccpAz {
                    name: "eu-central-1b".into(),
                    public_cidr: "10.1.0.64/27".into(),
                    private_cidr: "10.1.0.96/27".into(),
                    aws_cni_cidr: Some("10.2.64.0/18".into()),
                },
            ],
            control_plane: ControlPlaneVpc {
                account_id: "000111222333".into(),
                vpc_id: "vpc-0cp".into(),
                cidr: "10.0.0.0/16".into(),
                peer_role_arn: "arn:aws:iam::000111222333:role/al9qy-vpc-peer-access".into(),
            },
            whitelist: ApiWhitelist::default(),
            access_logs: access_logs(None, "123456789012", "al9qy"),
        }
    }

    fn prop<'a>(t: &'a Template, id: &str, key: &str) -> &'a Value {
        &t.resource(id).unwrap_or_else(|| panic!("resource {id} missing")).properties[key]
    }

    fn tag<'a>(t: &'a Template, id: &str, key: &str) -> Option<&'a str> {
        prop(t, id, "Tags").as_array()?.iter().find(|tag| tag["Key"] == key).and_then(|tag| tag["Value"].as_str())
    }

    #[test]
    fn inventory_per_az_and_cluster_wide() {
        let t = render(&params());
        assert_eq!(t.ids_of_type("AWS::EC2::VPC"), vec![VPC]);
        assert_eq!(t.ids_of_type("AWS::EC2::VPCCidrBlock"), vec![VPC_CIDR_BLOCK_AWS_CNI]);
        assert_eq!(t.ids_of_type("AWS::EC2::NatGateway"), vec!["NATGatewayEuCentral1a", "NATGatewayEuCentral1b"]);
        assert_eq!(t.ids_of_type("AWS::EC2::EIP").len(), 2);
        assert_eq!(t.ids_of_type("AWS::EC2::Subnet").len(), 6);
        assert_eq!(t.ids_of_type("AWS::EC2::RouteTable").len(), 6);
        assert_eq!(t.ids_of_type("AWS::EC2::SubnetRouteTableAssociation").len(), 6);
        // Per AZ: IGW route, two NAT routes, one peering route.
        assert_eq!(t.ids_of_type("AWS::EC2::Route").len(), 8);
        assert_eq!(
            t.ids_of_type("AWS::EC2::SecurityGroup"),
            vec![API_INTERNAL_ELB_SG, AWS_CNI_SG, ETCD_ELB_SG, MASTER_SG]
        );
        assert_eq!(t.ids_of_type("AWS::ElasticLoadBalancing::LoadBalancer"), vec![API_INTERNAL_ELB, API_ELB, ETCD_ELB]);
        assert_eq!(t.ids_of_type("AWS::Route53::HostedZone"), vec![HOSTED_ZONE, INTERNAL_HOSTED_ZONE]);
        assert_eq!(t.ids_of_type("AWS::Route53::RecordSet").len(), 7);
        for forbidden in ["Fn::Cidr", "Fn::GetAZs", "AWS::KMS::", "AWS::S3::", "ManagedPolicyArns", "RecordSetGroup"] {
            assert!(!t.to_json().contains(forbidden), "{forbidden} must not appear");
        }
    }

    #[test]
    fn section_14_2_cidrs_land_in_the_right_subnets() {
        let t = render(&params());
        assert_eq!(prop(&t, VPC, "CidrBlock"), "10.1.0.0/24");
        assert_eq!(prop(&t, VPC_CIDR_BLOCK_AWS_CNI, "CidrBlock"), "10.2.0.0/16");
        for (id, cidr, az) in [
            ("PublicSubnetEuCentral1a", "10.1.0.0/27", "eu-central-1a"),
            ("PrivateSubnetEuCentral1a", "10.1.0.32/27", "eu-central-1a"),
            ("AWSCNISubnetEuCentral1a", "10.2.0.0/18", "eu-central-1a"),
            ("PublicSubnetEuCentral1b", "10.1.0.64/27", "eu-central-1b"),
            ("PrivateSubnetEuCentral1b", "10.1.0.96/27", "eu-central-1b"),
            ("AWSCNISubnetEuCentral1b", "10.2.64.0/18", "eu-central-1b"),
        ] {
            assert_eq!(prop(&t, id, "CidrBlock"), cidr, "{id}");
            assert_eq!(prop(&t, id, "AvailabilityZone"), az, "{id}");
        }
        assert_eq!(
            t.resource("AWSCNISubnetEuCentral1a").map(|r| r.depends_on.clone()),
            Some(vec![VPC_CIDR_BLOCK_AWS_CNI.to_owned()])
        );
    }

    #[test]
    fn subnets_and_route_tables_carry_upstream_tags() {
        let t = render(&params());
        assert_eq!(tag(&t, "PublicSubnetEuCentral1a", "giantswarm.io/subnet-type"), Some("public"));
        assert_eq!(tag(&t, "PublicSubnetEuCentral1a", "kubernetes.io/role/elb"), Some("1"));
        assert_eq!(tag(&t, "PrivateSubnetEuCentral1b", "kubernetes.io/role/internal-elb"), Some("1"));
        assert_eq!(tag(&t, "PrivateSubnetEuCentral1b", "sigs.k8s.io/cluster-api-provider-aws/role"), Some("private"));
        assert_eq!(tag(&t, "AWSCNISubnetEuCentral1a", "giantswarm.io/subnet-type"), Some("aws-cni"));
        assert_eq!(tag(&t, "PrivateRouteTableEuCentral1a", "Name"), Some("al9qy-private-eu-central-1a"));
        assert_eq!(tag(&t, "PrivateRouteTableEuCentral1a", "giantswarm.io/route-table-type"), Some("private"));
        assert_eq!(tag(&t, MASTER_SG, "Name"), Some("al9qy-master"));
        assert_eq!(tag(&t, ETCD_ELB_SG, "Name"), Some("al9qy-etcd-elb"));
        assert_eq!(tag(&t, API_INTERNAL_ELB_SG, "Name"), Some("al9qy-internal-api"));
        assert_eq!(tag(&t, AWS_CNI_SG, "Name"), Some("al9qy-aws-cni"));
        assert_eq!(prop(&t, "PublicSubnetEuCentral1a", "MapPublicIpOnLaunch"), false);
    }

    #[test]
    fn routes_go_to_the_right_targets() {
        let t = render(&params());
        assert_eq!(prop(&t, "PublicInternetGatewayRouteEuCentral1a", "GatewayId"), &cfn::r#ref(INTERNET_GATEWAY));
        assert_eq!(prop(&t, "PrivateNATRouteEuCentral1b", "NatGatewayId"), &cfn::r#ref("NATGatewayEuCentral1b"));
        assert_eq!(prop(&t, "PrivateNATRouteEuCentral1b", "RouteTableId"), &cfn::r#ref("PrivateRouteTableEuCentral1b"));
        assert_eq!(prop(&t, "AWSCNINATRouteEuCentral1a", "NatGatewayId"), &cfn::r#ref("NATGatewayEuCentral1a"));
        assert_eq!(prop(&t, "VPCPeeringRouteEuCentral1a", "DestinationCidrBlock"), "10.0.0.0/16");
        assert_eq!(prop(&t, "VPCPeeringRouteEuCentral1a", "VpcPeeringConnectionId"), &cfn::r#ref(PEERING));
        assert_eq!(prop(&t, "NATGatewayEuCentral1a", "SubnetId"), &cfn::r#ref("PublicSubnetEuCentral1a"));
        assert_eq!(prop(&t, S3_ENDPOINT, "RouteTableIds").as_array().map(Vec::len), Some(6));
        assert_eq!(prop(&t, S3_ENDPOINT, "ServiceName"), "com.amazonaws.eu-central-1.s3");
        assert_eq!(prop(&t, PEERING, "PeerOwnerId"), "000111222333");
        assert_eq!(prop(&t, PEERING, "PeerVpcId"), "vpc-0cp");
    }

    #[test]
    fn load_balancers_log_into_the_access_log_bucket_unless_turned_off() {
        let t = render(&params());
        for elb in [API_ELB, API_INTERNAL_ELB, ETCD_ELB] {
            assert_eq!(
                prop(&t, elb, "AccessLoggingPolicy"),
                &json!({
                    "Enabled": true,
                    "S3BucketName": "123456789012-g8s-al9qy-access-logs",
                    "S3BucketPrefix": "elb",
                    "EmitInterval": 60,
                }),
                "{elb}"
            );
        }
        assert_eq!(access_logs(Some(" false "), "123456789012", "al9qy"), None);
        assert!(access_logs(Some("no"), "123456789012", "al9qy").is_some(), "only `false` turns them off");
        let mut off = params();
        off.access_logs = None;
        let t = render(&off);
        for elb in [API_ELB, API_INTERNAL_ELB, ETCD_ELB] {
            assert!(t.resources[elb].properties.get("AccessLoggingPolicy").is_none(), "{elb}");
        }
    }

    #[test]
    fn load_balancers_have_upstream_names_and_checks() {
        let t = render(&params());
        assert_eq!(prop(&t, API_ELB, "LoadBalancerName"), "al9qy-api");
        assert_eq!(prop(&t, API_ELB, "Scheme"), "internet-facing");
        assert_eq!(prop(&t, API_ELB, "HealthCheck")["Target"], "HTTP:8089/healthz");
        assert_eq!(prop(&t, API_ELB, "Subnets")[0], cfn::r#ref("PublicSubnetEuCentral1a"));
        assert_eq!(prop(&t, API_INTERNAL_ELB, "LoadBalancerName"), "al9qy-api-internal");
        assert_eq!(prop(&t, API_INTERNAL_ELB, "Scheme"), "internal");
        assert_eq!(prop(&t, API_INTERNAL_ELB, "Subnets")[1], cfn::r#ref("PrivateSubnetEuCentral1b"));
        assert_eq!(prop(&t, ETCD_ELB, "LoadBalancerName"), "al9qy-etcd");
        assert_eq!(prop(&t, ETCD_ELB, "Listeners")[0]["LoadBalancerPort"], "2379");
        assert_eq!(prop(&t, ETCD_ELB, "HealthCheck")["Target"], "TCP:2379");
        assert_eq!(prop(&t, ETCD_ELB, "ConnectionSettings")["IdleTimeout"], 1200);
    }

    #[test]
    fn without_aws_cni_there_is_no_pod_network() {
        let mut p = params();
        p.pod_cidr = None;
        let t = render(&p);
        assert!(t.ids_of_type("AWS::EC2::VPCCidrBlock").is_empty());
        assert_eq!(t.ids_of_type("AWS::EC2::Subnet").len(), 4);
        assert!(t.resource("MasterIngressFromAWSCNI").is_none());
        assert!(t.resource(AWS_CNI_SG).is_some(), "the AWS-CNI group always exists");
        assert!(!t.outputs.contains_key("AWSCNISubnetIDEuCentral1a"));
    }

    #[test]
    fn route53_off_drops_zones_records_and_their_outputs() {
        let mut p = params();
        p.common.route53_enabled = false;
        let t = render(&p);
        assert!(t.ids_of_type("AWS::Route53::HostedZone").is_empty());
        assert!(t.ids_of_type("AWS::Route53::RecordSet").is_empty());
        assert!(!t.outputs.contains_key("HostedZoneID"));
        assert!(!t.outputs.contains_key("InternalHostedZoneID"));
        assert!(t.outputs.contains_key("APIServerPublicLoadBalancer"));
    }

    #[test]
    fn dns_records_point_at_the_load_balancers() {
        let t = render(&params());
        assert_eq!(prop(&t, HOSTED_ZONE, "Name"), "al9qy.k8s.gauss.eu-central-1.aws.gigantic.io.");
        assert_eq!(prop(&t, "ApiRecordSet", "Name"), "api.al9qy.k8s.gauss.eu-central-1.aws.gigantic.io.");
        assert_eq!(prop(&t, "ApiRecordSet", "ResourceRecords")[0], cfn::get_att(API_ELB, "DNSName"));
        assert_eq!(prop(&t, "InternalApiRecordSet", "HostedZoneId"), &cfn::r#ref(INTERNAL_HOSTED_ZONE));
        assert_eq!(prop(&t, "InternalApiRecordSet", "ResourceRecords")[0], cfn::get_att(API_INTERNAL_ELB, "DNSName"));
        assert_eq!(
            prop(&t, "IngressWildcardRecordSet", "ResourceRecords")[0],
            "ingress.al9qy.k8s.gauss.eu-central-1.aws.gigantic.io."
        );
    }

    #[test]
    fn master_group_is_open_by_default_and_narrowed_by_a_whitelist() {
        let t = render(&params());
        let rules = prop(&t, MASTER_SG, "SecurityGroupIngress").as_array().cloned().unwrap_or_default();
        assert!(rules.iter().any(|r| r["FromPort"] == 443 && r["CidrIp"] == "0.0.0.0/0"));
        for port in MASTER_PORTS_FROM_CP {
            assert!(rules.iter().any(|r| r["FromPort"] == port && r["CidrIp"] == "10.0.0.0/16"), "port {port}");
        }
        let internal = prop(&t, API_INTERNAL_ELB_SG, "SecurityGroupIngress").as_array().cloned().unwrap_or_default();
        assert_eq!(internal.len(), PRIVATE_RANGES.len());

        let mut p = params();
        p.whitelist =
            ApiWhitelist { public: Some(vec!["203.0.113.0/24".into()]), private: Some(vec!["192.0.2.0/24".into()]) };
        let t = render(&p);
        let rules = prop(&t, MASTER_SG, "SecurityGroupIngress").as_array().cloned().unwrap_or_default();
        assert!(!rules.iter().any(|r| r["CidrIp"] == "0.0.0.0/0"));
        assert!(rules.iter().any(|r| r["FromPort"] == 443 && r["CidrIp"] == "203.0.113.0/24"));
        let nat_rule = cfn::join("", vec![cfn::r#ref("NATEIPEuCentral1b"), json!("/32")]);
        assert!(rules.iter().any(|r| r["CidrIp"] == nat_rule));
        let internal = prop(&t, API_INTERNAL_ELB_SG, "SecurityGroupIngress").as_array().cloned().unwrap_or_default();
        let cidrs: Vec<_> = internal.iter().map(|r| r["CidrIp"].clone()).collect();
        assert_eq!(
            cidrs,
            vec![json!("10.0.0.0/16"), json!("10.1.0.0/24"), json!("10.2.0.0/16"), json!("192.0.2.0/24")]
        );
    }

    #[test]
    fn outputs_cover_what_later_stacks_need() {
        let t = render(&params());
        for key in [
            "OperatorVersion",
            "ReleaseVersion",
            "VPCID",
            "VPCPeeringConnectionID",
            "MasterSecurityGroupID",
            "EtcdELBSecurityGroupID",
            "APIInternalELBSecurityGroupID",
            "AWSCNISecurityGroupID",
            "PublicSubnetIDEuCentral1a",
            "PrivateSubnetIDEuCentral1b",
            "NATGatewayIDEuCentral1b",
            "AWSCNISubnetIDEuCentral1a",
            "HostedZoneID",
            "InternalHostedZoneID",
            "APIServerPublicLoadBalancer",
            "AvailabilityZones",
        ] {
            assert!(t.outputs.contains_key(key), "output {key} missing");
        }
        assert_eq!(t.outputs["OperatorVersion"].value, "16.1.1");
        assert_eq!(t.outputs["AvailabilityZones"].value, "eu-central-1a,eu-central-1b");
        assert_eq!(t.outputs["PrivateSubnetIDEuCentral1b"].value, cfn::r#ref("PrivateSubnetEuCentral1b"));
    }

    fn describe_stacks_outputs() -> BTreeMap<String, String> {
        [
            ("OperatorVersion", "16.1.1"),
            ("ReleaseVersion", "18.2.0"),
            ("VPCID", "vpc-1"),
            ("VPCPeeringConnectionID", "pcx-1"),
            ("MasterSecurityGroupID", "sg-m"),
            ("EtcdELBSecurityGroupID", "sg-e"),
            ("APIInternalELBSecurityGroupID", "sg-i"),
            ("AWSCNISecurityGroupID", "sg-c"),
            ("PublicSubnetIDEuCentral1a", "subnet-pub-a"),
            ("PrivateSubnetIDEuCentral1a", "subnet-priv-a"),
            ("NATGatewayIDEuCentral1a", "nat-a"),
            ("AWSCNISubnetIDEuCentral1a", "subnet-cni-a"),
            ("HostedZoneID", "Z1"),
            ("AvailabilityZones", "eu-central-1a"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
    }

    #[test]
    fn outputs_parse_into_typed_values() {
        let o = Outputs::from_outputs(&describe_stacks_outputs(), &["eu-central-1a"]).expect("complete outputs");
        assert_eq!(o.vpc_id, "vpc-1");
        assert_eq!(o.vpc_peering_connection_id, "pcx-1");
        assert_eq!(o.master_security_group_id, "sg-m");
        let az = o.az("eu-central-1a").expect("az");
        assert_eq!(az.private_subnet_id, "subnet-priv-a");
        assert_eq!(az.nat_gateway_id, "nat-a");
        assert_eq!(az.aws_cni_subnet_id.as_deref(), Some("subnet-cni-a"));
        assert_eq!(o.hosted_zone_id.as_deref(), Some("Z1"));
        assert_eq!(o.internal_hosted_zone_id, None, "tolerated when missing");
        assert_eq!(o.availability_zones, vec!["eu-central-1a"]);
    }

    /// The outputs CloudFormation reports for a rendered template: literal values only.
    fn literal_outputs(t: &Template) -> BTreeMap<String, String> {
        t.outputs.iter().filter_map(|(k, o)| Some((k.clone(), o.value.as_str()?.to_owned()))).collect()
    }

    #[test]
    fn adding_a_zone_that_sorts_first_keeps_the_deployed_subnets() {
        let cluster: ipam::Ipv4Net = "10.1.5.0/24".parse().expect("cidr");
        let zones = |z: &[&str]| z.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let params_for = |layout: &[ipam::TccpAz]| Params {
            azs: layout
                .iter()
                .map(|a| TccpAz {
                    name: a.name.clone(),
                    public_cidr: a.public.to_string(),
                    private_cidr: a.private.to_string(),
                    aws_cni_cidr: None,
                })
                .collect(),
            pod_cidr: None,
            ..params()
        };
        let first = ipam::tccp_layout(cluster, None, &zones(&["eu-central-1b", "eu-central-1c"])).expect("layout");
        let deployed = literal_outputs(&render(&params_for(&first)));
        assert_eq!(deployed["PublicSubnetCIDREuCentral1b"], "10.1.5.0/27");
        assert_eq!(deployed["PrivateSubnetCIDREuCentral1c"], "10.1.5.96/27");
        assert_eq!(deployed_layout(&deployed, cluster, None), Ok(first.clone()));

        let wanted = zones(&["eu-central-1a", "eu-central-1b", "eu-central-1c"]);
        let anchor = deployed_layout(&deployed, cluster, None).expect("deployed layout");
        let second = ipam::tccp_layout_preserving(cluster, None, &wanted, &anchor).expect("layout");
        for old in &first {
            assert_eq!(second.iter().find(|a| a.name == old.name), Some(old), "{} moved", old.name);
        }
        let new = second.iter().find(|a| a.name == "eu-central-1a").expect("new zone");
        assert_eq!((new.public.to_string(), new.private.to_string()), ("10.1.5.128/27".into(), "10.1.5.160/27".into()));

        // The next render reads the mixed layout back as it is.
        let again = literal_outputs(&render(&params_for(&second)));
        assert_eq!(deployed_layout(&again, cluster, None), Ok(second));
    }

    #[test]
    fn a_stack_without_cidr_outputs_was_laid_out_by_sorted_zones() {
        let cluster: ipam::Ipv4Net = "10.1.0.0/24".parse().expect("cidr");
        let mut outputs = describe_stacks_outputs();
        outputs.insert("AvailabilityZones".into(), "eu-central-1c,eu-central-1b".into());
        let zones = vec!["eu-central-1b".to_owned(), "eu-central-1c".to_owned()];
        assert_eq!(deployed_layout(&outputs, cluster, None), ipam::tccp_layout(cluster, None, &zones));
        outputs.remove("AvailabilityZones");
        assert_eq!(deployed_layout(&outputs, cluster, None), Ok(Vec::new()));
    }

    #[test]
    fn a_missing_required_output_is_named_in_the_error() {
        let err = Outputs::from_outputs(&describe_stacks_outputs(), &["eu-central-1a", "eu-central-1b"]).unwrap_err();
        assert_eq!(err, MissingOutput("PublicSubnetIDEuCentral1b".into()));
        let mut partial = describe_stacks_outputs();
        partial.remove("VPCPeeringConnectionID");
        let err = Outputs::from_outputs(&partial, &["eu-central-1a"]).unwrap_err();
        assert_eq!(err.0, "VPCPeeringConnectionID");
    }
}

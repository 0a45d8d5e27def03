//! `cluster-<id>-guest-main`, the cluster's account: everything of a legacy cluster.
//!
//! * The network, load balancers, hosted zones and records are the node-pools
//!   [`tccp`] template for the cluster's zones: VPC, peering to the management VPC, internet
//!   gateway, per zone a public and a private subnet with route tables and a NAT gateway, the
//!   S3 endpoint, the API (public and internal) and etcd load balancers, their security groups.
//! * The master is a one-master [`tccpn`] template linked in ([`Template::link`]): a one-instance
//!   Auto Scaling group in the first zone with a launch template (docker, kubelet, log and
//!   containerd volumes), its etcd volume and network interface, its IAM role and the roles pods
//!   get through the IAM manager. See the [module docs](super) for why this replaces the
//!   original's `AWS::EC2::Instance`.
//! * The workers are one Auto Scaling group over every zone's private subnet, from a launch
//!   template (see [`super`] for why not a launch configuration), registered in the ingress load
//!   balancer, with a terminating lifecycle hook for draining and the original's rolling update
//!   ([`rolling_update`]).
//! * The ingress load balancer (HTTP and HTTPS to the ingress controller's node ports), its
//!   security group, the workers' security group and the rules between masters and workers.
//!
//! The load balancers' idle timeouts come from `spec.aws.{api,etcd,ingress}.elb`.

use serde_json::{Value, json};

use crate::cfn::{self, CombineError, Resource, Template, placeholder};
use crate::ignition;
use crate::names;
use crate::stacks::{Common, az_suffix, tccp, tccpn, tcnp, user_data};

use super::{LegacyStack, worker_config_key};

/// Logical ID of the workers' security group.
pub const WORKER_SG: &str = "WorkerSecurityGroup";
/// Logical ID of the ingress load balancer's security group.
pub const INGRESS_SG: &str = "IngressSecurityGroup";
/// Logical ID of the ingress load balancer.
pub const INGRESS_ELB: &str = "IngressLoadBalancer";
/// Logical ID of the workers' launch template.
pub const WORKER_LAUNCH_TEMPLATE: &str = "WorkerLaunchTemplate";
/// Logical ID of the workers' Auto Scaling group.
pub const WORKER_ASG: &str = "WorkerAutoScalingGroup";
/// Logical ID of the workers' role.
pub const WORKER_ROLE: &str = "WorkerRole";
/// Logical ID of the workers' policy.
pub const WORKER_POLICY: &str = "WorkerRolePolicy";
/// Logical ID of the workers' instance profile.
pub const WORKER_INSTANCE_PROFILE: &str = "WorkerInstanceProfile";
/// Logical ID of the master's `etcd0` record (the node-pools stack calls it `EtcdRecordSet`,
/// which here is `etcd.<id>`, the etcd load balancer's).
pub const MASTER_ETCD_RECORD: &str = "MasterEtcdRecordSet";
/// The workers' group name: the node-pool id in their IAM names and their
/// `giantswarm.io/machine-deployment` label.
pub const WORKER_GROUP: &str = "worker";
/// The records `guest-main` holds beyond TCCP's ([`tccp::RECORD_SETS`]), with Route53 on: the
/// ingress record in both zones and the master's `etcd0` record. The teardown keeps them, as
/// the stack's own, when it deletes what the cluster left in its zones.
pub const OWN_RECORDS: [(crate::leftovers::Zone, &str, &str); 3] = [
    (crate::leftovers::Zone::Public, "ingress", "CNAME"),
    (crate::leftovers::Zone::Internal, "ingress", "CNAME"),
    (crate::leftovers::Zone::Internal, "etcd0", "A"),
];
/// The rolling update's pause between batches (the original's).
pub const WORKER_PAUSE: &str = "PT15M";
/// The kubelet volume of a worker, GiB.
pub const KUBELET_VOLUME_GB: u32 = 100;
/// The log volume of a worker, GiB.
pub const LOG_VOLUME_GB: u32 = 15;

/// One instance shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeShape {
    /// The AMI.
    pub image_id: String,
    /// The EC2 instance type.
    pub instance_type: String,
}

/// The worker group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workers {
    /// The workers' shape (the first entry of `spec.aws.workers`).
    pub shape: NodeShape,
    /// Docker's volume (and containerd's), GiB.
    pub docker_volume_gb: u32,
    /// The group's bounds and its size now.
    pub min_size: u32,
    /// See [`Workers::min_size`].
    pub max_size: u32,
    /// See [`Workers::min_size`]; also what the rolling update is computed from.
    pub desired: u32,
}

/// Idle timeouts of the load balancers, in seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdleTimeouts {
    /// The public and internal API load balancers.
    pub api: u32,
    /// The etcd load balancer.
    pub etcd: u32,
    /// The ingress load balancer.
    pub ingress: u32,
}

/// The ingress controller's node ports on the workers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IngressPorts {
    /// Behind port 80, e.g. 30010.
    pub insecure: u16,
    /// Behind port 443, e.g. 30011.
    pub secure: u16,
}

/// Inputs of the `guest-main` template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Params {
    /// Cluster-wide inputs.
    pub common: Common,
    /// The VPC's CIDR block.
    pub vpc_cidr: String,
    /// The zones and their subnets; the master is in the first. `aws_cni_cidr` is not used.
    pub zones: Vec<tccp::TccpAz>,
    /// The management side of the peering (its role is `host-setup`'s).
    pub control_plane: tccp::ControlPlaneVpc,
    /// Where the load balancers write their access logs, if anywhere.
    pub access_logs: Option<String>,
    /// The master's shape.
    pub master: NodeShape,
    /// The workers.
    pub workers: Workers,
    /// IMDS `HttpTokens` of every node.
    pub imds_http_tokens: String,
    /// The cluster bucket holding the node configs.
    pub bucket: String,
    /// ARN of the cluster KMS key.
    pub kms_key_arn: String,
    /// Idle timeouts of the load balancers.
    pub idle_timeouts: IdleTimeouts,
    /// The ingress controller's node ports.
    pub ingress_ports: IngressPorts,
}

/// Why the template could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GuestMainError {
    /// No availability zone: the master needs one.
    #[error("a legacy cluster needs an availability zone for its master")]
    NoZone,
    /// The parts do not fit together (a defect of the templates, caught by the tests).
    #[error("joining the guest-main parts: {0}")]
    Combine(#[from] CombineError),
}

/// The workers' rolling update as the original computed it from the current size: at most 30 %
/// of the workers replaced per batch (at least one), 70 % kept in service, but never so many
/// that no instance could be replaced within the group's maximum.
pub fn rolling_update(desired: u32, max_size: u32) -> tcnp::RollingUpdate {
    let max_batch_size = ((desired * 3 + 5) / 10).max(1);
    let min_instances_in_service = ((desired * 7 + 5) / 10).min(max_size.saturating_sub(1));
    tcnp::RollingUpdate { desired, max_batch_size, min_instances_in_service, pause_time: WORKER_PAUSE.to_owned() }
}

/// Renders the `guest-main` template.
pub fn render(p: &Params) -> Result<Template, GuestMainError> {
    let c = &p.common;
    let cid = c.cluster_id.as_str();
    let master_zone = p.zones.first().ok_or(GuestMainError::NoZone)?;

    let mut t = tccp::render(&tccp::Params {
        common: c.clone(),
        vpc_cidr: p.vpc_cidr.clone(),
        pod_cidr: None,
        azs: p.zones.iter().map(|z| tccp::TccpAz { aws_cni_cidr: None, ..z.clone() }).collect(),
        control_plane: p.control_plane.clone(),
        whitelist: tccp::ApiWhitelist::default(),
        access_logs: p.access_logs.clone(),
    });
    t.description =
        format!("Legacy cluster {cid}: network, master, workers, load balancers, DNS and IAM (guest-main).");
    // Nodes fetch their configs from S3 at boot: the routes and the endpoint must exist first.
    let mut boot_dependencies: Vec<String> =
        p.zones.iter().map(|z| format!("PrivateNATRoute{}", az_suffix(&z.name))).collect();
    boot_dependencies.push(tccp::S3_ENDPOINT.to_owned());

    t.absorb(master(p, master_zone, &boot_dependencies)?)?;
    add_security_groups(&mut t, p);
    add_ingress_load_balancer(&mut t, p);
    add_workers(&mut t, p, &boot_dependencies);
    for (elb, seconds) in [
        (tccp::API_ELB, p.idle_timeouts.api),
        (tccp::API_INTERNAL_ELB, p.idle_timeouts.api),
        (tccp::ETCD_ELB, p.idle_timeouts.etcd),
        (INGRESS_ELB, p.idle_timeouts.ingress),
    ] {
        if let Some(lb) = t.resources.get_mut(elb) {
            lb.properties["ConnectionSettings"]["IdleTimeout"] = json!(seconds);
        }
    }
    if c.route53_enabled {
        let base = c.tenant_domain();
        for (id, zone) in
            [("IngressRecordSet", tccp::HOSTED_ZONE), ("InternalIngressRecordSet", tccp::INTERNAL_HOSTED_ZONE)]
        {
            t.add(id, tccp::record(zone, format!("ingress.{base}."), cfn::get_att(INGRESS_ELB, "DNSName")));
        }
    }

    t.output("MasterImageID", json!(p.master.image_id), Some("AMI of the master"));
    t.output("WorkerImageID", json!(p.workers.shape.image_id), Some("AMI of the workers"));
    t.output("WorkerInstanceType", json!(p.workers.shape.instance_type), Some("Instance type of the workers"));
    t.output(
        "WorkerDockerVolumeSizeGB",
        json!(p.workers.docker_volume_gb.to_string()),
        Some("Docker volume of the workers"),
    );
    t.output("WorkerASGName", cfn::r#ref(WORKER_ASG), Some("Auto Scaling group of the workers"));
    t.link()?;
    Ok(t)
}

/// The one-master TCCPN part, rendered with placeholders for what is now in this template,
/// tagged as `guest-main`'s, waiting for the load balancers it registers in.
fn master(p: &Params, zone: &tccp::TccpAz, boot_dependencies: &[String]) -> Result<Template, CombineError> {
    let c = &p.common;
    let route53 = c.route53_enabled;
    let mut part = tccpn::render(&tccpn::Params {
        common: c.clone(),
        masters: vec![tccpn::Master {
            id: 0,
            az: zone.name.clone(),
            subnet_id: placeholder(&format!("PrivateSubnet{}", az_suffix(&zone.name))),
            etcd_snapshot_id: None,
        }],
        instance_type: p.master.instance_type.clone(),
        image_id: p.master.image_id.clone(),
        imds_http_tokens: p.imds_http_tokens.clone(),
        master_security_group_id: placeholder(tccp::MASTER_SG),
        bucket: p.bucket.clone(),
        kms_key_arn: p.kms_key_arn.clone(),
        hosted_zone_id: route53.then(|| placeholder(tccp::HOSTED_ZONE)),
        internal_hosted_zone_id: route53.then(|| placeholder(tccp::INTERNAL_HOSTED_ZONE)),
        etcd_volume: tccpn::EtcdVolumePerformance::default(),
        is_update: false,
        irsa: None,
    });
    if route53 {
        part.rename("EtcdRecordSet", MASTER_ETCD_RECORD)?;
    }
    if let Some(instance_type) = part.outputs.remove("InstanceType") {
        part.outputs.insert("MasterInstanceType".to_owned(), instance_type);
    }
    part.outputs.remove("MasterReplicas");
    let asg_id = tccpn::asg_id(0);
    if let Some(asg) = part.resources.remove(&asg_id) {
        let mut asg = asg
            .depends_on([tccp::API_ELB, tccp::API_INTERNAL_ELB, tccp::ETCD_ELB])
            .depends_on(boot_dependencies.iter().cloned());
        retag(&mut asg.properties["Tags"]);
        part.add(asg_id, asg);
    }
    Ok(part)
}

/// Sets `giantswarm.io/stack` of an Auto Scaling group's tags to `guest-main`.
fn retag(tags: &mut Value) {
    for tag in tags.as_array_mut().into_iter().flatten() {
        if tag["Key"] == names::tags::STACK {
            tag["Value"] = json!(LegacyStack::GuestMain.as_str());
        }
    }
}

fn add_security_groups(t: &mut Template, p: &Params) {
    let cid = p.common.cluster_id.as_str();
    let cp = p.control_plane.cidr.as_str();
    let from_cp = "Administration and monitoring from the management cluster";
    let sg = |name: String, description: String, ingress: Vec<Value>| {
        Resource::new(
            "AWS::EC2::SecurityGroup",
            json!({
                "GroupDescription": description,
                "VpcId": cfn::r#ref(tccp::VPC),
                "SecurityGroupIngress": ingress,
                "Tags": cfn::tags(&[("Name", name)]),
            }),
        )
    };
    let mut worker: Vec<Value> =
        [22, 4194, 10250, 10300, 10301].into_iter().map(|port| tccp::tcp(port, cp, from_cp)).collect();
    worker.push(tccp::tcp(2049, p.vpc_cidr.as_str(), "NFS from the cluster"));
    t.add(WORKER_SG, sg(format!("{cid}-worker"), format!("{cid} workers"), worker));
    t.add(
        INGRESS_SG,
        sg(
            format!("{cid}-ingress"),
            format!("{cid} ingress load balancer"),
            vec![tccp::tcp(80, "0.0.0.0/0", "HTTP from anywhere"), tccp::tcp(443, "0.0.0.0/0", "HTTPS from anywhere")],
        ),
    );
    let ports = p.ingress_ports;
    let rules = [
        ("WorkerIngressFromMaster", WORKER_SG, tccp::MASTER_SG, "-1", None, "All traffic from the masters"),
        ("MasterIngressFromWorker", tccp::MASTER_SG, WORKER_SG, "-1", None, "All traffic from the workers"),
        ("WorkerIngressFromWorker", WORKER_SG, WORKER_SG, "-1", None, "All traffic between workers"),
        (
            "APIInternalELBIngressFromWorker",
            tccp::API_INTERNAL_ELB_SG,
            WORKER_SG,
            "tcp",
            Some((443, 443)),
            "Kubernetes API from the workers",
        ),
        (
            "WorkerIngressFromIngressELBHTTP",
            WORKER_SG,
            INGRESS_SG,
            "tcp",
            Some((ports.insecure, ports.insecure)),
            "HTTP from the ingress load balancer",
        ),
        (
            "WorkerIngressFromIngressELBHTTPS",
            WORKER_SG,
            INGRESS_SG,
            "tcp",
            Some((ports.secure, ports.secure)),
            "HTTPS from the ingress load balancer",
        ),
    ];
    for (id, target, source, protocol, range, description) in rules {
        t.add(id, tccp::sg_rule(target, source, protocol, range, description));
    }
}

fn add_ingress_load_balancer(t: &mut Template, p: &Params) {
    let cid = p.common.cluster_id.as_str();
    let ports = p.ingress_ports;
    let public_subnets: Vec<Value> =
        p.zones.iter().map(|z| cfn::r#ref(&format!("PublicSubnet{}", az_suffix(&z.name)))).collect();
    let mut lb = tccp::classic_elb(
        p.access_logs.as_deref(),
        format!("{cid}-ingress"),
        true,
        public_subnets,
        INGRESS_SG,
        80,
        &format!("TCP:{}", ports.insecure),
    );
    let listener = |port: u16, instance_port: u16| {
        json!({
            "LoadBalancerPort": port.to_string(),
            "Protocol": "TCP",
            "InstancePort": instance_port.to_string(),
            "InstanceProtocol": "TCP",
        })
    };
    lb.properties["Listeners"] = json!([listener(80, ports.insecure), listener(443, ports.secure)]);
    t.add(INGRESS_ELB, lb);
}

fn add_workers(t: &mut Template, p: &Params, boot_dependencies: &[String]) {
    let c = &p.common;
    let cid = c.cluster_id.as_str();
    let w = &p.workers;

    t.add(
        WORKER_ROLE,
        Resource::new(
            "AWS::IAM::Role",
            json!({
                "RoleName": tcnp::role_name(cid, WORKER_GROUP),
                "AssumeRolePolicyDocument": cfn::policy_document(vec![json!({
                    "Effect": "Allow",
                    "Principal": { "Service": c.ec2_principal() },
                    "Action": "sts:AssumeRole",
                })]),
            }),
        ),
    );
    t.add(
        WORKER_POLICY,
        Resource::new(
            "AWS::IAM::Policy",
            json!({
                "PolicyName": tcnp::policy_name(cid, WORKER_GROUP),
                "Roles": [cfn::r#ref(WORKER_ROLE)],
                "PolicyDocument": cfn::policy_document(tcnp::worker_statements(c, &p.kms_key_arn, &p.bucket)),
            }),
        ),
    );
    t.add(
        WORKER_INSTANCE_PROFILE,
        Resource::new(
            "AWS::IAM::InstanceProfile",
            json!({
                "InstanceProfileName": tcnp::instance_profile_name(cid, WORKER_GROUP),
                "Roles": [cfn::r#ref(WORKER_ROLE)],
            }),
        ),
    );

    t.add(
        WORKER_LAUNCH_TEMPLATE,
        Resource::new(
            "AWS::EC2::LaunchTemplate",
            json!({
                "LaunchTemplateName": format!("{cid}-worker-launch-template"),
                "LaunchTemplateData": {
                    "BlockDeviceMappings": [
                        tcnp::ebs(ignition::DOCKER_VOLUME.device, w.docker_volume_gb),
                        tcnp::ebs(ignition::KUBELET_VOLUME.device, KUBELET_VOLUME_GB),
                        tcnp::ebs(ignition::LOG_VOLUME.device, LOG_VOLUME_GB),
                        tcnp::ebs(ignition::CONTAINERD_VOLUME.device, w.docker_volume_gb),
                    ],
                    "IamInstanceProfile": { "Name": cfn::r#ref(WORKER_INSTANCE_PROFILE) },
                    "ImageId": w.shape.image_id,
                    "InstanceType": w.shape.instance_type,
                    "MetadataOptions": { "HttpTokens": p.imds_http_tokens, "HttpPutResponseHopLimit": 2 },
                    "Monitoring": { "Enabled": true },
                    "NetworkInterfaces": [{
                        "AssociatePublicIpAddress": false,
                        "DeviceIndex": 0,
                        "Groups": [cfn::r#ref(WORKER_SG)],
                    }],
                    "TagSpecifications": [{
                        "ResourceType": "instance",
                        "Tags": cfn::tags(&[(names::tags::RELEASE, c.release_version.as_str())]),
                    }],
                    "UserData": user_data(&p.bucket, &worker_config_key(&c.operator_version, cid)),
                },
            }),
        ),
    );

    let mut tags = tccpn::asg_tags_of_stack(c, &[("Name", format!("{cid}-worker"))], LegacyStack::GuestMain.as_str());
    if let Value::Array(list) = &mut tags {
        // Cluster-autoscaler discovery; only on the group, not on instances.
        list.push(
            json!({ "Key": format!("k8s.io/cluster-autoscaler/{cid}"), "Value": "true", "PropagateAtLaunch": false }),
        );
    }
    let ru = rolling_update(w.desired, w.max_size);
    let subnets: Vec<Value> =
        p.zones.iter().map(|z| cfn::r#ref(&format!("PrivateSubnet{}", az_suffix(&z.name)))).collect();
    let zones: Vec<&str> = p.zones.iter().map(|z| z.name.as_str()).collect();
    t.add(
        WORKER_ASG,
        Resource::new(
            "AWS::AutoScaling::AutoScalingGroup",
            json!({
                "VPCZoneIdentifier": subnets,
                "AvailabilityZones": zones,
                "MinSize": w.min_size.to_string(),
                "MaxSize": w.max_size.to_string(),
                "DesiredCapacity": w.desired.to_string(),
                "MixedInstancesPolicy": {
                    "LaunchTemplate": {
                        "LaunchTemplateSpecification": {
                            "LaunchTemplateId": cfn::r#ref(WORKER_LAUNCH_TEMPLATE),
                            "Version": cfn::get_att(WORKER_LAUNCH_TEMPLATE, "LatestVersionNumber"),
                        },
                    },
                },
                "LoadBalancerNames": [cfn::r#ref(INGRESS_ELB)],
                // Inline so that the hook also fires when the whole group is deleted.
                "LifecycleHookSpecificationList": [{
                    "LifecycleHookName": tcnp::TERMINATING_HOOK,
                    "LifecycleTransition": "autoscaling:EC2_INSTANCE_TERMINATING",
                    "HeartbeatTimeout": tcnp::TERMINATING_HOOK_TIMEOUT,
                    "DefaultResult": "CONTINUE",
                }],
                "HealthCheckGracePeriod": 10,
                "MetricsCollection": [{ "Granularity": "1Minute" }],
                "Tags": tags,
            }),
        )
        .depends_on(boot_dependencies.iter().cloned())
        .update_policy(json!({
            "AutoScalingRollingUpdate": {
                "MinInstancesInService": ru.min_instances_in_service.to_string(),
                "MaxBatchSize": ru.max_batch_size.to_string(),
                "PauseTime": ru.pause_time,
            },
        })),
    );
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::stacks::testdata;

    #[test]
    fn the_records_beyond_tccps_are_the_ones_the_teardown_keeps() {
        let t = render(&params()).unwrap_or_else(|e| panic!("{e}"));
        let base = params().common.tenant_domain();
        let mut own: Vec<(crate::leftovers::Zone, String, String)> = Vec::new();
        for id in t.ids_of_type("AWS::Route53::RecordSet") {
            if tccp::RECORD_SETS.iter().any(|set| set.logical_id == id) {
                continue;
            }
            let props = &t.resources[id].properties;
            let zone = if props["HostedZoneId"] == cfn::r#ref(tccp::HOSTED_ZONE) {
                crate::leftovers::Zone::Public
            } else {
                crate::leftovers::Zone::Internal
            };
            let name = props["Name"].as_str().unwrap_or_default();
            let label = name.strip_suffix(&format!(".{base}.")).unwrap_or(name).to_string();
            own.push((zone, label, props["Type"].as_str().unwrap_or_default().to_string()));
        }
        own.sort();
        let mut kept: Vec<_> = OWN_RECORDS.iter().map(|(z, l, t)| (*z, l.to_string(), t.to_string())).collect();
        kept.sort();
        assert_eq!(own, kept);
    }

    /// A legacy cluster in two zones with Route53: `p3x7d`-like, in the shared test cluster's
    /// names.
    pub fn params() -> Params {
        Params {
            common: testdata::common(),
            vpc_cidr: "10.11.0.0/16".into(),
            zones: vec![
                tccp::TccpAz {
                    name: "eu-central-1b".into(),
                    private_cidr: "10.11.0.0/19".into(),
                    public_cidr: "10.11.32.0/19".into(),
                    aws_cni_cidr: None,
                },
                tccp::TccpAz {
                    name: "eu-central-1c".into(),
                    private_cidr: "10.11.64.0/19".into(),
                    public_cidr: "10.11.96.0/19".into(),
                    aws_cni_cidr: None,
                },
            ],
            control_plane: tccp::ControlPlaneVpc {
                account_id: "000111222333".into(),
                vpc_id: "vpc-04d7e8f9a0b1c2d3e".into(),
                cidr: "10.0.0.0/16".into(),
                peer_role_arn: "arn:aws:iam::000111222333:role/al9qy-vpc-peer-access".into(),
            },
            access_logs: Some("123456789012-g8s-al9qy-access-logs".into()),
            master: NodeShape { image_id: "ami-0f8ab3c2d1e4f5a6b".into(), instance_type: "m4.xlarge".into() },
            workers: Workers {
                shape: NodeShape { image_id: "ami-0f8ab3c2d1e4f5a6b".into(), instance_type: "m4.2xlarge".into() },
                docker_volume_gb: 150,
                min_size: 3,
                max_size: 6,
                desired: 4,
            },
            imds_http_tokens: "required".into(),
            bucket: "123456789012-g8s-al9qy".into(),
            kms_key_arn: "arn:aws:kms:eu-central-1:123456789012:key/0a1b2c3d".into(),
            idle_timeouts: IdleTimeouts { api: 120, etcd: 60, ingress: 60 },
            ingress_ports: IngressPorts { insecure: 30010, secure: 30011 },
        }
    }

    fn rendered() -> Template {
        render(&params()).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Every `Ref`, `GetAtt` and `${…}` of `value`.
    fn references(value: &Value, out: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                for (k, v) in map {
                    match (k.as_str(), v) {
                        ("Ref", Value::String(id)) => out.push(id.clone()),
                        ("Fn::GetAtt", Value::Array(parts)) => out.extend(parts[0].as_str().map(str::to_owned)),
                        ("Fn::Sub", Value::String(text)) => {
                            out.extend(text.split("${").skip(1).filter_map(|s| s.split('}').next()).map(str::to_owned))
                        }
                        _ => references(v, out),
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|v| references(v, out)),
            _ => {}
        }
    }

    #[test]
    fn every_reference_names_a_resource_of_the_stack() {
        let t = rendered();
        let body = t.to_value();
        let mut refs = Vec::new();
        references(&body, &mut refs);
        let missing: Vec<&String> =
            refs.iter().filter(|r| !r.starts_with("AWS::") && !t.resources.contains_key(r.as_str())).collect();
        assert!(missing.is_empty(), "{missing:?}");
        assert!(!t.to_json().contains("\"${"), "no placeholder is left as a literal");
    }

    #[test]
    fn the_master_is_the_node_pools_single_master_in_the_first_zone_linked_to_this_stack() {
        let t = rendered();
        let asg = &t.resources[&tccpn::asg_id(0)];
        assert_eq!(asg.properties["VPCZoneIdentifier"], json!([{ "Ref": "PrivateSubnetEuCentral1b" }]));
        assert_eq!(asg.properties["AvailabilityZones"], json!(["eu-central-1b"]));
        assert_eq!((asg.properties["MinSize"].as_str(), asg.properties["MaxSize"].as_str()), (Some("1"), Some("1")));
        // A replacement terminates the old master first, so the new one can attach the volume.
        assert_eq!(
            asg.update_policy.as_ref().map(|u| &u["AutoScalingRollingUpdate"]["MinInstancesInService"]),
            Some(&json!("0"))
        );
        for lb in
            [tccp::API_ELB, tccp::API_INTERNAL_ELB, tccp::ETCD_ELB, "PrivateNATRouteEuCentral1b", tccp::S3_ENDPOINT]
        {
            assert!(asg.depends_on.iter().any(|d| d == lb), "the master waits for {lb}");
        }
        let stack_tag =
            asg.properties["Tags"].as_array().and_then(|tags| tags.iter().find(|t| t["Key"] == "giantswarm.io/stack"));
        assert_eq!(stack_tag.map(|t| &t["Value"]), Some(&json!("guest-main")));
        let volume = &t.resources[&tccpn::etcd_volume_id(0)];
        assert_eq!(volume.properties["AvailabilityZone"], "eu-central-1b");
        assert_eq!(volume.deletion_policy, Some(cfn::DeletionPolicy::Snapshot));
        let eni = &t.resources[&tccpn::eni_id(0)];
        assert_eq!(eni.properties["GroupSet"], json!([{ "Ref": "MasterSecurityGroup" }]));
        assert_eq!(eni.properties["SubnetId"], json!({ "Ref": "PrivateSubnetEuCentral1b" }));
        let record = &t.resources[MASTER_ETCD_RECORD];
        assert_eq!(record.properties["Name"], "etcd0.al9qy.k8s.gauss.eu-central-1.aws.gigantic.io.");
        assert_eq!(record.properties["HostedZoneId"], json!({ "Ref": "InternalHostedZone" }));
        assert_eq!(
            t.resources["EtcdRecordSet"].properties["Name"],
            "etcd.al9qy.k8s.gauss.eu-central-1.aws.gigantic.io."
        );
        // The Route53 manager may change the cluster's own zones, now referenced in the stack.
        let manager = serde_json::to_string(&t.resources[tccpn::ROUTE53_MANAGER_ROLE].properties).unwrap_or_default();
        assert!(manager.contains(r#"{"Fn::Sub":"arn:aws:route53:::hostedzone/${InternalHostedZone}"}"#), "{manager}");
        assert_eq!(t.outputs["MasterInstanceType"].value, "m4.xlarge");
        assert!(!t.outputs.contains_key("MasterReplicas"));
    }

    #[test]
    fn workers_are_one_group_over_every_private_subnet_behind_the_ingress_load_balancer() {
        let t = rendered();
        assert!(t.ids_of_type("AWS::AutoScaling::LaunchConfiguration").is_empty());
        let asg = &t.resources[WORKER_ASG];
        assert_eq!(
            asg.properties["VPCZoneIdentifier"],
            json!([{ "Ref": "PrivateSubnetEuCentral1b" }, { "Ref": "PrivateSubnetEuCentral1c" }])
        );
        assert_eq!(asg.properties["LoadBalancerNames"], json!([{ "Ref": INGRESS_ELB }]));
        assert_eq!(
            (
                asg.properties["MinSize"].as_str(),
                asg.properties["MaxSize"].as_str(),
                asg.properties["DesiredCapacity"].as_str()
            ),
            (Some("3"), Some("6"), Some("4"))
        );
        assert_eq!(asg.properties["LifecycleHookSpecificationList"][0]["HeartbeatTimeout"], 3600);
        assert_eq!(asg.properties["HealthCheckGracePeriod"], 10);
        let update = &asg.update_policy.as_ref().map(|u| u["AutoScalingRollingUpdate"].clone()).unwrap_or_default();
        assert_eq!((update["MaxBatchSize"].as_str(), update["MinInstancesInService"].as_str()), (Some("1"), Some("3")));
        assert_eq!(update["PauseTime"], "PT15M");
        let lt = &t.resources[WORKER_LAUNCH_TEMPLATE].properties["LaunchTemplateData"];
        assert_eq!(lt["BlockDeviceMappings"][0]["DeviceName"], "/dev/xvdh");
        assert_eq!(lt["BlockDeviceMappings"][0]["Ebs"]["VolumeSize"], 150);
        assert_eq!(lt["BlockDeviceMappings"][0]["Ebs"]["Encrypted"], true);
        assert_eq!(lt["MetadataOptions"]["HttpTokens"], "required");
        assert_eq!(t.resources[WORKER_ROLE].properties["RoleName"], "gs-cluster-al9qy-role-worker");
        let ingress = &t.resources[INGRESS_ELB].properties;
        assert_eq!(ingress["LoadBalancerName"], "al9qy-ingress");
        assert_eq!(ingress["Scheme"], "internet-facing");
        assert_eq!(ingress["Listeners"][1]["InstancePort"], "30011");
        assert_eq!(ingress["HealthCheck"]["Target"], "TCP:30010");
        assert_eq!(ingress["ConnectionSettings"]["IdleTimeout"], 60);
        assert_eq!(t.resources[tccp::API_ELB].properties["ConnectionSettings"]["IdleTimeout"], 120);
        assert_eq!(
            t.resources["IngressRecordSet"].properties["ResourceRecords"],
            json!([{ "Fn::GetAtt": [INGRESS_ELB, "DNSName"] }])
        );
        assert_eq!(t.resources["WorkerIngressFromIngressELBHTTPS"].properties["FromPort"], 30011);
    }

    #[test]
    fn the_original_rolling_update() {
        let ru = |desired, max| {
            let r = rolling_update(desired, max);
            (r.max_batch_size, r.min_instances_in_service)
        };
        assert_eq!(ru(10, 10), (3, 7));
        assert_eq!(ru(3, 3), (1, 2));
        assert_eq!(ru(5, 5), (2, 4), "half up: 1.5 → 2, 3.5 → 4");
        // One worker in a group of at most one: nobody can stay in service while it is replaced.
        assert_eq!(ru(1, 1), (1, 0));
        assert_eq!(ru(0, 2), (1, 0));
    }

    #[test]
    fn without_zones_nothing_is_rendered_and_without_route53_no_zone_is_referenced() {
        let mut p = params();
        p.zones.clear();
        assert_eq!(render(&p), Err(GuestMainError::NoZone));
        let mut p = params();
        p.common.route53_enabled = false;
        let t = render(&p).unwrap_or_else(|e| panic!("{e}"));
        assert!(t.ids_of_type("AWS::Route53::HostedZone").is_empty());
        assert!(t.ids_of_type("AWS::Route53::RecordSet").is_empty());
        assert!(!t.to_json().contains("HostedZone\"}"));
    }
}

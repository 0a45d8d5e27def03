//! TCCPN, `cluster-<id>-tccpn`, tenant account (reference §5.6): the control-plane nodes.
//!
//! Per master: a network interface whose fixed address is the etcd peer address, the etcd data
//! volume, a launch template and a one-instance auto scaling group. The interface and the volume
//! live outside the instance so that a replaced master re-attaches them and etcd keeps its
//! identity and data. Plus the masters' IAM role, policy and instance profile and the helper
//! roles (IAM manager, AWS Load Balancer Controller, Route53 manager).
//!
//! Master IDs follow upstream's `hamaster` mapping: `[0]` for one master, `[1, 2, 3]` for three
//! ([`master_ids`]). Logical IDs drop the suffix for IDs 0 and 1 (`MasterEni`) and carry it for
//! 2 and 3 (`MasterEni2`), so going from one to three masters keeps the first master's
//! resources, while AWS-side names carry the ID itself (`<id>-master0-eni`).
//!
//! On **updates** the auto scaling groups are chained with `DependsOn` (master 2 after 1, 3 after
//! 2), so CloudFormation rolls them one at a time and etcd keeps quorum; on creation they start
//! together. The lifecycle hooks that let a new master join etcd before it counts as in service,
//! and let the drainer drain a leaving one, exist only with three masters: draining the only
//! master would take the API down.
//!
//! Differences from upstream: the user data is a minimal Ignition 3.3.0 pointer to the S3 node
//! config (see [`super::user_data`]); IRSA trust for the helper roles is not rendered.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::{Common, MissingOutput, required, user_data, version_outputs};
use crate::cfn::{self, Resource, Template};
use crate::names::{self, StackKind};

/// Logical ID of the masters' IAM role.
pub const ROLE: &str = "ControlPlaneNodesRole";
/// Logical ID of the masters' inline IAM policy.
pub const POLICY: &str = "ControlPlaneNodesRolePolicy";
/// Logical ID of the masters' instance profile.
pub const INSTANCE_PROFILE: &str = "ControlPlaneNodesInstanceProfile";
/// Logical ID of the IAM manager role.
pub const IAM_MANAGER_ROLE: &str = "IAMManagerRole";
/// Logical ID of the AWS Load Balancer Controller role.
pub const ALB_CONTROLLER_ROLE: &str = "ALBControllerRole";
/// Logical ID of the Route53 manager role.
pub const ROUTE53_MANAGER_ROLE: &str = "Route53ManagerRole";

/// Lifecycle hook completed by a new master once its etcd member is healthy.
pub const LAUNCHING_HOOK: &str = "ControlPlaneLaunching";
/// How long [`LAUNCHING_HOOK`] holds a new master before AWS continues without it, in seconds.
pub const LAUNCHING_HOOK_TIMEOUT: u64 = 1020;
/// Lifecycle hook the drainer completes after draining a leaving master.
pub const TERMINATING_HOOK: &str = "ControlPlane";
/// How long [`TERMINATING_HOOK`] holds a leaving master before AWS continues without the
/// drainer, in seconds.
pub const TERMINATING_HOOK_TIMEOUT: u64 = 900;

/// Size of the etcd volume and of each data volume, GiB.
/// The pause after each master of a rolling update (ISO-8601; part of every deployed template,
/// so changing it rolls every cluster's masters).
pub const MASTER_PAUSE: &str = "PT2M";
/// [`MASTER_PAUSE`] in seconds: a maintenance window shorter than it could not hold one
/// master's replacement.
pub const MASTER_PAUSE_SECONDS: u64 = 120;
const VOLUME_GIB: u32 = 100;

/// One control-plane node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Master {
    /// The master ID: 0 for a single master, 1–3 with three.
    pub id: u8,
    /// The master's AZ.
    pub az: String,
    /// The TCCP private subnet of that AZ.
    pub subnet_id: String,
    /// Snapshot to restore the etcd volume from (legacy migration; IDs 0/1 only upstream).
    pub etcd_snapshot_id: Option<String>,
}

/// The provisioned IOPS a gp3 volume takes; below it, gp3's baseline.
const GP3_IOPS: std::ops::RangeInclusive<u32> = 3000..=16000;
/// The throughput in MiB/s a gp3 volume takes; below it, gp3's baseline.
const GP3_THROUGHPUT: std::ops::RangeInclusive<u32> = 125..=1000;

/// Optional etcd volume performance, from annotations; out-of-range values are left out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EtcdVolumePerformance {
    /// Provisioned IOPS; rendered only within 3000–16000.
    pub iops: Option<u32>,
    /// Throughput in MiB/s; rendered only within 125–1000.
    pub throughput: Option<u32>,
}

impl EtcdVolumePerformance {
    /// The performance the annotations `iops` (`alpha.aws.giantswarm.io/ebs-volume-iops`) and
    /// `throughput` (`…/ebs-volume-throughput`) ask for, or what is wrong with them and how to
    /// fix it: gp3 takes 3000 to 16000 IOPS and 125 to 1000 MiB/s, and at most 0.25 MiB/s per
    /// provisioned IOPS (Amazon EBS User Guide, "General Purpose SSD volumes").
    pub fn from_annotations(iops: Option<&str>, throughput: Option<&str>) -> Result<Self, String> {
        fn number(key: &str, value: Option<&str>, range: std::ops::RangeInclusive<u32>) -> Result<Option<u32>, String> {
            let Some(value) = value.map(str::trim) else { return Ok(None) };
            match value.parse::<u32>() {
                Ok(n) if range.contains(&n) => Ok(Some(n)),
                _ => Err(format!(
                    "annotation {key}: {value:?} is not a whole number from {} to {} (gp3 volumes); set one in that range or remove the annotation",
                    range.start(),
                    range.end()
                )),
            }
        }
        let iops = number("alpha.aws.giantswarm.io/ebs-volume-iops", iops, GP3_IOPS)?;
        let throughput = number("alpha.aws.giantswarm.io/ebs-volume-throughput", throughput, GP3_THROUGHPUT)?;
        if let Some(tp) = throughput {
            let provisioned = iops.unwrap_or(*GP3_IOPS.start());
            if tp * 4 > provisioned {
                return Err(format!(
                    "annotation alpha.aws.giantswarm.io/ebs-volume-throughput: {tp} MiB/s needs at least {} IOPS (gp3 allows 0.25 MiB/s per IOPS), the volumes have {provisioned}; raise alpha.aws.giantswarm.io/ebs-volume-iops or lower the throughput",
                    tp * 4
                ));
            }
        }
        Ok(EtcdVolumePerformance { iops, throughput })
    }
}

/// Inputs of the TCCPN template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Params {
    /// Cluster-wide inputs.
    pub common: Common,
    /// The masters, in order; see [`masters`].
    pub masters: Vec<Master>,
    /// EC2 instance type of the masters.
    pub instance_type: String,
    /// The AMI (§7.5).
    pub image_id: String,
    /// IMDS `HttpTokens`: `required` or `optional`; see [`imds_http_tokens`](super::imds_http_tokens).
    pub imds_http_tokens: String,
    /// TCCP `MasterSecurityGroupID`.
    pub master_security_group_id: String,
    /// The cluster bucket holding the node configs.
    pub bucket: String,
    /// ARN of the cluster KMS key.
    pub kms_key_arn: String,
    /// TCCP `HostedZoneID`, when Route53 is managed.
    pub hosted_zone_id: Option<String>,
    /// TCCP `InternalHostedZoneID`, when Route53 is managed; receives the `etcd<n>` records.
    pub internal_hosted_zone_id: Option<String>,
    /// etcd volume performance.
    pub etcd_volume: EtcdVolumePerformance,
    /// Whether the stack already exists: chains the auto scaling groups so masters roll one at
    /// a time.
    pub is_update: bool,
    /// The cluster's service-account issuer when it has IAM roles for service accounts: the
    /// roles of [`crate::irsa::TRUSTED_SERVICE_ACCOUNTS`] also trust its OIDC providers.
    pub irsa: Option<crate::irsa::Issuer>,
}

/// A replica count other than 1 or 3.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("control planes have 1 or 3 masters, not {0}")]
pub struct UnsupportedReplicas(pub u32);

/// Why masters could not be laid out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MasterLayoutError {
    /// See [`UnsupportedReplicas`].
    #[error(transparent)]
    Replicas(#[from] UnsupportedReplicas),
    /// No AZ was given.
    #[error("the control plane has no availability zone")]
    NoAvailabilityZone,
}

/// Master IDs for a replica count: `[0]` for one, `[1, 2, 3]` for three.
pub fn master_ids(replicas: u32) -> Result<Vec<u8>, UnsupportedReplicas> {
    match replicas {
        1 => Ok(vec![0]),
        3 => Ok(vec![1, 2, 3]),
        other => Err(UnsupportedReplicas(other)),
    }
}

/// The masters for a replica count over the control plane's AZs, given as `(az, private subnet
/// ID)`: the k-th master goes to AZ `k mod len`, so three masters over one AZ share it and three
/// over three AZs spread out.
pub fn masters(replicas: u32, azs: &[(String, String)]) -> Result<Vec<Master>, MasterLayoutError> {
    let ids = master_ids(replicas)?;
    if azs.is_empty() {
        return Err(MasterLayoutError::NoAvailabilityZone);
    }
    Ok(ids
        .into_iter()
        .enumerate()
        .map(|(k, id)| {
            let (az, subnet_id) = &azs[k % azs.len()];
            Master { id, az: az.clone(), subnet_id: subnet_id.clone(), etcd_snapshot_id: None }
        })
        .collect())
}

/// Logical-ID suffix of a master: none for 0 and 1, the ID for 2 and 3 (upstream naming).
pub fn logical_suffix(id: u8) -> String {
    if id <= 1 { String::new() } else { id.to_string() }
}

/// `gs-cluster-<id>-role-tccpn`.
pub fn role_name(cluster_id: &str) -> String {
    format!("gs-cluster-{cluster_id}-role-tccpn")
}

/// `gs-cluster-<id>-policy-tccpn`.
pub fn policy_name(cluster_id: &str) -> String {
    format!("gs-cluster-{cluster_id}-policy-tccpn")
}

/// `gs-cluster-<id>-profile-tccpn`.
pub fn instance_profile_name(cluster_id: &str) -> String {
    format!("gs-cluster-{cluster_id}-profile-tccpn")
}

/// Logical ID of master `id`'s auto scaling group.
pub fn asg_id(id: u8) -> String {
    format!("ControlPlaneNodeAutoScalingGroup{}", logical_suffix(id))
}

/// Logical ID of master `id`'s network interface.
pub fn eni_id(id: u8) -> String {
    format!("MasterEni{}", logical_suffix(id))
}

/// Logical ID of master `id`'s etcd volume.
pub fn etcd_volume_id(id: u8) -> String {
    format!("EtcdVolume{}", logical_suffix(id))
}

/// Logical ID of master `id`'s launch template.
pub fn launch_template_id(id: u8) -> String {
    format!("ControlPlaneNodeLaunchTemplate{}", logical_suffix(id))
}

fn ebs(device: &str) -> Value {
    json!({
        "DeviceName": device,
        "Ebs": { "DeleteOnTermination": true, "Encrypted": true, "VolumeSize": VOLUME_GIB, "VolumeType": "gp3" },
    })
}

/// Renders the TCCPN template.
pub fn render(p: &Params) -> Template {
    let c = &p.common;
    let cid = c.cluster_id.as_str();
    let ha = p.masters.len() == 3;
    let mut t = Template::new(format!("Tenant cluster {cid} control plane nodes (tccpn)."));
    let elbs = names::load_balancers(cid);
    let base_domain = c.tenant_domain();

    let mut previous_asg: Option<String> = None;
    for m in &p.masters {
        let n = m.id;
        let eni = eni_id(n);
        let volume = etcd_volume_id(n);
        let lt = launch_template_id(n);
        let asg = asg_id(n);

        t.add(
            eni.clone(),
            Resource::new(
                "AWS::EC2::NetworkInterface",
                json!({
                    "SubnetId": m.subnet_id,
                    "GroupSet": [p.master_security_group_id],
                    "Description": format!("{cid} master{n} etcd interface"),
                    "Tags": cfn::tags(&[
                        ("Name", names::master_eni(cid, n).as_str()),
                        // AWS-CNI must not manage the etcd interface.
                        ("node.k8s.amazonaws.com/no_manage", "true"),
                    ]),
                }),
            ),
        );

        let mut vol = json!({
            "AvailabilityZone": m.az,
            "Size": VOLUME_GIB,
            "VolumeType": "gp3",
            "Encrypted": true,
            "Tags": cfn::tags(&[("Name", names::master_etcd_volume(cid, n))]),
        });
        if let Some(snapshot) = &m.etcd_snapshot_id {
            vol["SnapshotId"] = json!(snapshot);
        }
        if let Some(iops) = p.etcd_volume.iops.filter(|i| GP3_IOPS.contains(i)) {
            vol["Iops"] = json!(iops);
        }
        if let Some(tp) = p.etcd_volume.throughput.filter(|t| GP3_THROUGHPUT.contains(t)) {
            vol["Throughput"] = json!(tp);
        }
        // A volume that leaves the stack, or that an update would replace, is snapshotted
        // first: etcd's data outlives a mistaken edit or deletion. The control-plane
        // controller refuses the edits that would replace one ([`etcd_replacements`]); this is
        // the second line.
        t.add(
            volume.clone(),
            Resource::new("AWS::EC2::Volume", vol)
                .deletion_policy(cfn::DeletionPolicy::Snapshot)
                .update_replace_policy(cfn::DeletionPolicy::Snapshot),
        );

        t.add(
            lt.clone(),
            Resource::new(
                "AWS::EC2::LaunchTemplate",
                json!({
                    "LaunchTemplateName": format!("{cid}-master{n}-launch-template"),
                    "LaunchTemplateData": {
                        "BlockDeviceMappings": [ebs("/dev/xvdc"), ebs("/dev/xvdg"), ebs("/dev/xvdf"), ebs("/dev/xvdi")],
                        "IamInstanceProfile": { "Name": cfn::r#ref(INSTANCE_PROFILE) },
                        "ImageId": p.image_id,
                        "InstanceType": p.instance_type,
                        "MetadataOptions": { "HttpTokens": p.imds_http_tokens, "HttpPutResponseHopLimit": 2 },
                        "Monitoring": { "Enabled": false },
                        "NetworkInterfaces": [{
                            "AssociatePublicIpAddress": false,
                            "DeviceIndex": 0,
                            "Groups": [p.master_security_group_id],
                        }],
                        "TagSpecifications": [{
                            "ResourceType": "instance",
                            "Tags": cfn::tags(&[(names::tags::RELEASE, c.release_version.as_str())]),
                        }],
                        "UserData": user_data(&p.bucket, &names::master_config_key(&c.operator_version, cid, n)),
                    },
                }),
            ),
        );

        let mut asg_props = json!({
            "VPCZoneIdentifier": [m.subnet_id],
            "AvailabilityZones": [m.az],
            "MinSize": "1",
            "MaxSize": "1",
            "DesiredCapacity": "1",
            "MixedInstancesPolicy": {
                "LaunchTemplate": {
                    "LaunchTemplateSpecification": {
                        "LaunchTemplateId": cfn::r#ref(&lt),
                        "Version": cfn::get_att(&lt, "LatestVersionNumber"),
                    },
                },
            },
            "LoadBalancerNames": [elbs[1], elbs[0], elbs[2]],
            "HealthCheckGracePeriod": 60,
            "MetricsCollection": [{ "Granularity": "1Minute" }],
            "Tags": asg_tags(c, &[("Name", format!("{cid}-master"))], StackKind::Tccpn),
        });
        if ha {
            asg_props["LifecycleHookSpecificationList"] = json!([
                {
                    "LifecycleHookName": LAUNCHING_HOOK,
                    "LifecycleTransition": "autoscaling:EC2_INSTANCE_LAUNCHING",
                    "HeartbeatTimeout": LAUNCHING_HOOK_TIMEOUT,
                    "DefaultResult": "CONTINUE",
                },
                {
                    "LifecycleHookName": TERMINATING_HOOK,
                    "LifecycleTransition": "autoscaling:EC2_INSTANCE_TERMINATING",
                    "HeartbeatTimeout": TERMINATING_HOOK_TIMEOUT,
                    "DefaultResult": "CONTINUE",
                },
            ]);
        }
        let mut deps = vec![eni.clone(), volume];
        if p.is_update {
            deps.extend(previous_asg.take());
        }
        t.add(
            asg.clone(),
            Resource::new("AWS::AutoScaling::AutoScalingGroup", asg_props).depends_on(deps).update_policy(json!({
                "AutoScalingRollingUpdate": { "MinInstancesInService": "0", "MaxBatchSize": "1", "PauseTime": MASTER_PAUSE },
            })),
        );
        previous_asg = Some(asg);

        if let (true, Some(zone)) = (c.route53_enabled, &p.internal_hosted_zone_id) {
            t.add(
                format!("EtcdRecordSet{}", logical_suffix(n)),
                Resource::new(
                    "AWS::Route53::RecordSet",
                    json!({
                        "HostedZoneId": zone,
                        "Name": format!("etcd{n}.{base_domain}."),
                        "Type": "A",
                        "TTL": "60",
                        "ResourceRecords": [cfn::get_att(&eni, "PrimaryPrivateIpAddress")],
                    }),
                ),
            );
        }
    }

    add_iam(&mut t, p);

    version_outputs(&mut t, c);
    t.output("InstanceType", json!(p.instance_type), Some("Instance type of the masters"));
    t.output("MasterReplicas", json!(p.masters.len().to_string()), Some("Number of masters"));
    t
}

/// ASG tags: the given ones plus the operator's identity tags, all propagated to instances.
/// CloudFormation also propagates stack tags, but the drainer's instance lookup should not
/// depend on that alone.
pub(crate) fn asg_tags(c: &Common, extra: &[(&str, String)], kind: StackKind) -> Value {
    asg_tags_of_stack(c, extra, kind.as_str())
}

/// [`asg_tags`] with the `giantswarm.io/stack` value `stack`.
pub(crate) fn asg_tags_of_stack(c: &Common, extra: &[(&str, String)], stack: &str) -> Value {
    let mut pairs: Vec<(String, String)> = extra.iter().map(|(k, v)| ((*k).to_owned(), v.clone())).collect();
    pairs.push((names::tags::CLUSTER.to_owned(), c.cluster_id.clone()));
    pairs.push((names::tags::INSTALLATION.to_owned(), c.installation.clone()));
    pairs.push((names::tags::STACK.to_owned(), stack.to_owned()));
    Value::Array(pairs.into_iter().map(|(k, v)| json!({ "Key": k, "Value": v, "PropagateAtLaunch": true })).collect())
}

fn trust(principal: Value) -> Value {
    cfn::policy_document(vec![json!({ "Effect": "Allow", "Principal": principal, "Action": "sts:AssumeRole" })])
}

/// The trust of role `logical_id`: `principal` may assume it, and with IAM roles for service
/// accounts the service accounts the role is for ([`crate::irsa::trust_statements`]).
fn trust_with_irsa(p: &Params, logical_id: &str, principal: Value) -> Value {
    let mut statements = vec![json!({ "Effect": "Allow", "Principal": principal, "Action": "sts:AssumeRole" })];
    if let (Some(issuer), Some((_, accounts))) =
        (&p.irsa, crate::irsa::TRUSTED_SERVICE_ACCOUNTS.iter().find(|(role, _)| *role == logical_id))
    {
        statements.extend(crate::irsa::trust_statements(issuer, &p.common.partition, &p.common.region, accounts));
    }
    cfn::policy_document(statements)
}

fn add_iam(t: &mut Template, p: &Params) {
    let c = &p.common;
    let cid = c.cluster_id.as_str();
    t.add(
        ROLE,
        Resource::new(
            "AWS::IAM::Role",
            json!({
                "RoleName": role_name(cid),
                "AssumeRolePolicyDocument": trust(json!({ "Service": c.ec2_principal() })),
            }),
        ),
    );
    let mut statements = vec![
        // The decryption unit decrypts the TLS assets; attaching the etcd volume, encrypted
        // with the same key, needs a grant for EC2.
        cfn::allow(&["kms:Decrypt", "kms:DescribeKey"], json!(p.kms_key_arn)),
        cfn::allow_if(
            &["kms:CreateGrant", "kms:ListGrants", "kms:RevokeGrant"],
            json!(p.kms_key_arn),
            json!({ "Bool": { "kms:GrantIsForAWSResource": "true" } }),
        ),
        // Ignition reads the node config (HeadBucket, then GetObject).
        cfn::allow(&["s3:ListBucket"], json!(c.s3_arn(&p.bucket))),
        cfn::allow(&["s3:GetObject"], json!(c.s3_arn(&format!("{}/*", p.bucket)))),
        // "Actions defined by Amazon EC2", "Actions defined by Amazon EC2 Auto Scaling" and
        // "Actions defined by Elastic Load Balancing" (Service Authorization Reference): these
        // Describe actions support no resource type. The etcd attach unit finds its volume and
        // interface, the launching hook its group; the cloud controller manager reads the rest.
        cfn::allow(
            &[
                "ec2:DescribeAvailabilityZones",
                "ec2:DescribeInstances",
                "ec2:DescribeInstanceTopology",
                "ec2:DescribeNetworkInterfaces",
                "ec2:DescribeRegions",
                "ec2:DescribeRouteTables",
                "ec2:DescribeSecurityGroups",
                "ec2:DescribeSubnets",
                "ec2:DescribeVolumes",
                "ec2:DescribeVpcs",
                "autoscaling:DescribeAutoScalingGroups",
                "autoscaling:DescribeAutoScalingInstances",
                "autoscaling:DescribeTags",
                "elasticloadbalancing:DescribeListeners",
                "elasticloadbalancing:DescribeLoadBalancerAttributes",
                "elasticloadbalancing:DescribeLoadBalancerPolicies",
                "elasticloadbalancing:DescribeLoadBalancers",
                "elasticloadbalancing:DescribeTargetGroups",
                "elasticloadbalancing:DescribeTargetHealth",
            ],
            json!("*"),
        ),
        // The etcd attach unit: the master's own etcd volume and interface, both the cluster's.
        cfn::allow_if(
            &["ec2:AttachVolume", "ec2:AttachNetworkInterface"],
            json!([c.arn("ec2", "instance/*"), c.arn("ec2", "volume/*"), c.arn("ec2", "network-interface/*")]),
            c.tagged_with_cluster(),
        ),
        // A master completes only its cluster's hooks (its own launching hook).
        cfn::allow_if(
            &["autoscaling:CompleteLifecycleAction"],
            c.arn("autoscaling", "autoScalingGroup:*:autoScalingGroupName/*"),
            json!({ "StringEquals": { format!("autoscaling:ResourceTag/{}", names::tags::CLUSTER): cid } }),
        ),
    ];
    statements.extend(super::ecr_pull(c));
    statements.extend(cloud_controller_statements(c));
    // Pods get AWS roles through the IAM manager; the masters run it.
    statements.push(cfn::allow(&["sts:AssumeRole"], cfn::get_att(IAM_MANAGER_ROLE, "Arn")));
    t.add(
        POLICY,
        Resource::new(
            "AWS::IAM::Policy",
            json!({
                "PolicyName": policy_name(cid),
                "Roles": [cfn::r#ref(ROLE)],
                "PolicyDocument": cfn::policy_document(statements),
            }),
        ),
    );
    t.add(
        INSTANCE_PROFILE,
        Resource::new(
            "AWS::IAM::InstanceProfile",
            json!({ "InstanceProfileName": instance_profile_name(cid), "Roles": [cfn::r#ref(ROLE)] }),
        ),
    );

    // Pods get AWS roles through the IAM manager (kiam-style): masters assume it, it assumes
    // the per-purpose roles below.
    t.add(
        IAM_MANAGER_ROLE,
        Resource::new(
            "AWS::IAM::Role",
            json!({
                "RoleName": format!("{cid}-IAMManager-Role"),
                "AssumeRolePolicyDocument": trust(json!({ "AWS": cfn::get_att(ROLE, "Arn") })),
                "Policies": [{
                    "PolicyName": format!("{cid}-IAMManager-Policy"),
                    // The cluster's own roles only: `<id>-…` and `gs-<id>-…`.
                    "PolicyDocument": cfn::policy_document(vec![cfn::allow(
                        &["sts:AssumeRole"],
                        json!([
                            cfn::sub(&format!("arn:{}:iam::${{AWS::AccountId}}:role/{cid}-*", c.partition)),
                            cfn::sub(&format!("arn:{}:iam::${{AWS::AccountId}}:role/gs-{cid}-*", c.partition)),
                        ]),
                    )]),
                }],
            }),
        ),
    );
    let manager_trust =
        trust_with_irsa(p, ALB_CONTROLLER_ROLE, json!({ "AWS": cfn::get_att(IAM_MANAGER_ROLE, "Arn") }));
    t.add(
        ALB_CONTROLLER_ROLE,
        Resource::new(
            "AWS::IAM::Role",
            json!({
                "RoleName": format!("gs-{cid}-ALBController-Role"),
                "AssumeRolePolicyDocument": manager_trust,
                "Policies": [{
                    "PolicyName": format!("gs-{cid}-ALBController-Policy"),
                    "PolicyDocument": cfn::policy_document(alb_controller_statements(c)),
                }],
            }),
        ),
    );
    if c.route53_enabled {
        let zones: Vec<String> = [&p.hosted_zone_id, &p.internal_hosted_zone_id]
            .into_iter()
            .flatten()
            .map(|z| format!("arn:{}:route53:::hostedzone/{z}", c.partition))
            .collect();
        let mut statements = vec![
            // "Actions defined by Amazon Route 53" (Service Authorization Reference): listing
            // hosted zones supports no resource type.
            cfn::allow(&["route53:ListHostedZones", "route53:ListHostedZonesByName"], json!("*")),
            cfn::allow(&["route53:GetChange"], json!(format!("arn:{}:route53:::change/*", c.partition))),
        ];
        if !zones.is_empty() {
            statements.push(cfn::allow(
                &["route53:ChangeResourceRecordSets", "route53:ListResourceRecordSets"],
                json!(zones),
            ));
        }
        t.add(
            ROUTE53_MANAGER_ROLE,
            Resource::new(
                "AWS::IAM::Role",
                json!({
                    "RoleName": format!("{cid}-Route53Manager-Role"),
                    "AssumeRolePolicyDocument": trust_with_irsa(
                        p,
                        ROUTE53_MANAGER_ROLE,
                        json!({ "AWS": cfn::get_att(IAM_MANAGER_ROLE, "Arn") }),
                    ),
                    "Policies": [{
                        "PolicyName": format!("{cid}-Route53Manager-Policy"),
                        "PolicyDocument": cfn::policy_document(statements),
                    }],
                }),
            ),
        );
    }
}

/// The cloud controller manager (`--cloud-provider=external`) runs on the masters with their
/// role: it routes pod CIDRs, and gives Services of type LoadBalancer their load balancers and
/// security groups. Everything it changes carries the cluster's tag
/// `kubernetes.io/cluster/<id>`; what it creates it tags in the same request.
fn cloud_controller_statements(c: &Common) -> Vec<Value> {
    let cluster_tag = names::tags::kubernetes_cluster(&c.cluster_id);
    let tagged = json!({ "Null": { format!("aws:ResourceTag/{cluster_tag}"): "false" } });
    let tagging = json!({ "Null": { format!("aws:RequestTag/{cluster_tag}"): "false" } });
    vec![
        cfn::allow_if(
            &[
                "ec2:AuthorizeSecurityGroupIngress",
                "ec2:RevokeSecurityGroupIngress",
                "ec2:DeleteSecurityGroup",
                "ec2:CreateRoute",
                "ec2:DeleteRoute",
                "ec2:ModifyInstanceAttribute",
                "ec2:CreateTags",
            ],
            json!([c.arn("ec2", "security-group/*"), c.arn("ec2", "route-table/*"), c.arn("ec2", "instance/*")]),
            tagged.clone(),
        ),
        cfn::allow_if(
            &["ec2:CreateSecurityGroup", "ec2:CreateTags"],
            json!([c.arn("ec2", "security-group/*"), c.arn("ec2", "vpc/*")]),
            tagging.clone(),
        ),
        cfn::allow_if(
            &[
                "elasticloadbalancing:CreateLoadBalancer",
                "elasticloadbalancing:CreateTargetGroup",
                "elasticloadbalancing:AddTags",
            ],
            json!([c.arn("elasticloadbalancing", "loadbalancer/*"), c.arn("elasticloadbalancing", "targetgroup/*")]),
            tagging,
        ),
        cfn::allow_if(
            &[
                "elasticloadbalancing:ApplySecurityGroupsToLoadBalancer",
                "elasticloadbalancing:AttachLoadBalancerToSubnets",
                "elasticloadbalancing:ConfigureHealthCheck",
                "elasticloadbalancing:CreateListener",
                "elasticloadbalancing:CreateLoadBalancerListeners",
                "elasticloadbalancing:CreateLoadBalancerPolicy",
                "elasticloadbalancing:DeleteListener",
                "elasticloadbalancing:DeleteLoadBalancer",
                "elasticloadbalancing:DeleteLoadBalancerListeners",
                "elasticloadbalancing:DeleteTargetGroup",
                "elasticloadbalancing:DeregisterInstancesFromLoadBalancer",
                "elasticloadbalancing:DeregisterTargets",
                "elasticloadbalancing:DetachLoadBalancerFromSubnets",
                "elasticloadbalancing:ModifyListener",
                "elasticloadbalancing:ModifyLoadBalancerAttributes",
                "elasticloadbalancing:ModifyTargetGroup",
                "elasticloadbalancing:RegisterInstancesWithLoadBalancer",
                "elasticloadbalancing:RegisterTargets",
                "elasticloadbalancing:SetLoadBalancerPoliciesForBackendServer",
                "elasticloadbalancing:SetLoadBalancerPoliciesOfListener",
            ],
            json!([c.arn("elasticloadbalancing", "loadbalancer/*"), c.arn("elasticloadbalancing", "targetgroup/*")]),
            tagged,
        ),
        cfn::allow_if(
            &["iam:CreateServiceLinkedRole"],
            json!(format!(
                "arn:{}:iam::*:role/aws-service-role/elasticloadbalancing.amazonaws.com/AWSServiceRoleForElasticLoadBalancing",
                c.partition
            )),
            json!({ "StringEquals": { "iam:AWSServiceName": "elasticloadbalancing.amazonaws.com" } }),
        ),
    ]
}

/// The AWS Load Balancer Controller's role, after the policy the controller publishes, with
/// every change bound to the load balancers, target groups and security groups it tags
/// `elbv2.k8s.aws/cluster: <id>`, or to the cluster's own security groups.
fn alb_controller_statements(c: &Common) -> Vec<Value> {
    let cid = c.cluster_id.as_str();
    let ours = json!({ "StringEquals": { "aws:ResourceTag/elbv2.k8s.aws/cluster": cid } });
    let creating = json!({ "StringEquals": { "aws:RequestTag/elbv2.k8s.aws/cluster": cid } });
    let elb = json!([
        c.arn("elasticloadbalancing", "loadbalancer/app/*/*"),
        c.arn("elasticloadbalancing", "loadbalancer/net/*/*"),
        c.arn("elasticloadbalancing", "targetgroup/*/*"),
    ]);
    vec![
        // "Actions defined by Amazon EC2", "… by Elastic Load Balancing V2", "… by AWS
        // Certificate Manager", "… by Identity And Access Management" and "… by AWS Shield"
        // (Service Authorization Reference): these reads, Shield's CreateProtection and ELB's
        // SetWebAcl support no resource type.
        cfn::allow(
            &[
                "ec2:DescribeAccountAttributes",
                "ec2:DescribeAddresses",
                "ec2:DescribeAvailabilityZones",
                "ec2:DescribeCoipPools",
                "ec2:DescribeInstances",
                "ec2:DescribeInternetGateways",
                "ec2:DescribeNetworkInterfaces",
                "ec2:DescribeSecurityGroups",
                "ec2:DescribeSubnets",
                "ec2:DescribeTags",
                "ec2:DescribeVpcPeeringConnections",
                "ec2:DescribeVpcs",
                "elasticloadbalancing:DescribeListenerCertificates",
                "elasticloadbalancing:DescribeListeners",
                "elasticloadbalancing:DescribeLoadBalancerAttributes",
                "elasticloadbalancing:DescribeLoadBalancers",
                "elasticloadbalancing:DescribeRules",
                "elasticloadbalancing:DescribeSSLPolicies",
                "elasticloadbalancing:DescribeTags",
                "elasticloadbalancing:DescribeTargetGroupAttributes",
                "elasticloadbalancing:DescribeTargetGroups",
                "elasticloadbalancing:DescribeTargetHealth",
                "elasticloadbalancing:SetWebAcl",
                "acm:ListCertificates",
                "iam:ListServerCertificates",
                "shield:CreateProtection",
                "shield:GetSubscriptionState",
            ],
            json!("*"),
        ),
        // Reads of what an Ingress or Service names: certificates, user pools, web ACLs,
        // protections and customer-owned IP pools of the cluster's account.
        cfn::allow(
            &[
                "acm:DescribeCertificate",
                "cognito-idp:DescribeUserPoolClient",
                "ec2:GetCoipPoolUsage",
                "iam:GetServerCertificate",
                "shield:DescribeProtection",
                "waf-regional:GetWebACL",
                "waf-regional:GetWebACLForResource",
                "wafv2:GetWebACL",
                "wafv2:GetWebACLForResource",
            ],
            json!([
                c.arn("acm", "certificate/*"),
                c.arn("cognito-idp", "userpool/*"),
                c.arn("ec2", "coip-pool/*"),
                cfn::sub(&format!("arn:{}:iam::${{AWS::AccountId}}:server-certificate/*", c.partition)),
                cfn::sub(&format!("arn:{}:shield::${{AWS::AccountId}}:protection/*", c.partition)),
                c.arn("waf-regional", "webacl/*"),
                c.arn("wafv2", "regional/webacl/*/*"),
                c.arn("elasticloadbalancing", "loadbalancer/app/*/*"),
            ]),
        ),
        cfn::allow_if(
            &["iam:CreateServiceLinkedRole"],
            json!(format!(
                "arn:{}:iam::*:role/aws-service-role/elasticloadbalancing.amazonaws.com/AWSServiceRoleForElasticLoadBalancing",
                c.partition
            )),
            json!({ "StringEquals": { "iam:AWSServiceName": "elasticloadbalancing.amazonaws.com" } }),
        ),
        // Security groups: created tagged, then changed only while they carry the tag; ingress
        // also on the cluster's own groups, which admit the load balancers' traffic.
        cfn::allow_if(
            &["ec2:CreateSecurityGroup", "ec2:CreateTags"],
            json!([c.arn("ec2", "security-group/*"), c.arn("ec2", "vpc/*")]),
            creating.clone(),
        ),
        cfn::allow_if(
            &[
                "ec2:AuthorizeSecurityGroupIngress",
                "ec2:RevokeSecurityGroupIngress",
                "ec2:DeleteSecurityGroup",
                "ec2:CreateTags",
                "ec2:DeleteTags",
            ],
            c.arn("ec2", "security-group/*"),
            ours.clone(),
        ),
        cfn::allow_if(
            &["ec2:AuthorizeSecurityGroupIngress", "ec2:RevokeSecurityGroupIngress"],
            c.arn("ec2", "security-group/*"),
            json!({ "Null": { format!("aws:ResourceTag/{}", names::tags::kubernetes_cluster(cid)): "false" } }),
        ),
        // Load balancers and target groups: created tagged, then changed while tagged.
        cfn::allow_if(
            &[
                "elasticloadbalancing:CreateLoadBalancer",
                "elasticloadbalancing:CreateTargetGroup",
                "elasticloadbalancing:AddTags",
            ],
            elb.clone(),
            creating,
        ),
        cfn::allow_if(
            &[
                "elasticloadbalancing:AddTags",
                "elasticloadbalancing:DeleteLoadBalancer",
                "elasticloadbalancing:DeleteTargetGroup",
                "elasticloadbalancing:ModifyLoadBalancerAttributes",
                "elasticloadbalancing:ModifyTargetGroup",
                "elasticloadbalancing:ModifyTargetGroupAttributes",
                "elasticloadbalancing:RemoveTags",
                "elasticloadbalancing:SetIpAddressType",
                "elasticloadbalancing:SetSecurityGroups",
                "elasticloadbalancing:SetSubnets",
            ],
            elb,
            ours,
        ),
        // Listeners, rules and targets of load balancers in the cluster's account and region.
        cfn::allow(
            &[
                "elasticloadbalancing:AddListenerCertificates",
                "elasticloadbalancing:CreateListener",
                "elasticloadbalancing:CreateRule",
                "elasticloadbalancing:DeleteListener",
                "elasticloadbalancing:DeleteRule",
                "elasticloadbalancing:DeregisterTargets",
                "elasticloadbalancing:ModifyListener",
                "elasticloadbalancing:ModifyRule",
                "elasticloadbalancing:RegisterTargets",
                "elasticloadbalancing:RemoveListenerCertificates",
            ],
            json!([
                c.arn("elasticloadbalancing", "loadbalancer/*"),
                c.arn("elasticloadbalancing", "listener/*"),
                c.arn("elasticloadbalancing", "listener-rule/*"),
                c.arn("elasticloadbalancing", "targetgroup/*/*"),
            ]),
        ),
        cfn::allow(
            &[
                "waf-regional:AssociateWebACL",
                "waf-regional:DisassociateWebACL",
                "wafv2:AssociateWebACL",
                "wafv2:DisassociateWebACL",
                "shield:DeleteProtection",
            ],
            json!([
                c.arn("elasticloadbalancing", "loadbalancer/app/*/*"),
                c.arn("waf-regional", "webacl/*"),
                c.arn("wafv2", "regional/webacl/*/*"),
                cfn::sub(&format!("arn:{}:shield::${{AWS::AccountId}}:protection/*", c.partition)),
            ]),
        ),
    ]
}

/// A master's etcd volume or interface that deploying a template would replace or remove.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EtcdReplacement {
    /// The logical ID in the deployed stack, e.g. `EtcdVolume2`.
    pub logical_id: String,
    /// What would happen to it, e.g. `moves from zone eu-central-1a to eu-central-1b`.
    pub change: String,
}

impl std::fmt::Display for EtcdReplacement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.logical_id, self.change)
    }
}

/// The etcd volumes and interfaces of the `deployed` TCCPN template (as `GetTemplate` returns
/// it) that the `desired` template would replace or remove: a volume whose zone changes, an
/// interface whose subnet changes (both properties force a replacement), or either one gone
/// from the template (fewer masters). Each of them is an etcd member's data or its peer
/// address; losing one loses the member. Empty when deploying `desired` keeps them all.
pub fn etcd_replacements(deployed: &Value, desired: &Template) -> Vec<EtcdReplacement> {
    let Some(resources) = deployed.get("Resources").and_then(Value::as_object) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (logical_id, resource) in resources {
        // The properties whose change replaces the resource: a volume's zone and the snapshot
        // it was created from, an interface's subnet.
        let properties: &[&str] = match resource.get("Type").and_then(Value::as_str) {
            Some("AWS::EC2::Volume") if logical_id.starts_with("EtcdVolume") => &["AvailabilityZone", "SnapshotId"],
            Some("AWS::EC2::NetworkInterface") if logical_id.starts_with("MasterEni") => &["SubnetId"],
            _ => continue,
        };
        let Some(r) = desired.resource(logical_id) else {
            let change = "would be deleted (the master count went down)".to_string();
            out.push(EtcdReplacement { logical_id: logical_id.clone(), change });
            continue;
        };
        let text = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or("none").to_string();
        let changed = properties.iter().find_map(|property| {
            let before = resource.get("Properties").and_then(|p| p.get(*property));
            (r.property(property) != before).then(|| match *property {
                "AvailabilityZone" => {
                    format!("would move from zone {} to {}", text(before), text(r.property(property)))
                }
                "SnapshotId" => format!(
                    "would be recreated from snapshot {} instead of {} (annotation {})",
                    text(r.property(property)),
                    text(before),
                    apis::labels::ETCD_SNAPSHOT_ID
                ),
                _ => format!("would move from subnet {} to {}", text(before), text(r.property(property))),
            })
        });
        if let Some(change) = changed {
            out.push(EtcdReplacement { logical_id: logical_id.clone(), change });
        }
    }
    out
}

/// The TCCPN stack outputs, typed; change detection compares them with the desired state (§5.9).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outputs {
    /// `InstanceType`.
    pub instance_type: String,
    /// `MasterReplicas`, as rendered.
    pub master_replicas: String,
    /// `OperatorVersion`.
    pub operator_version: String,
    /// `ReleaseVersion`.
    pub release_version: String,
}

impl Outputs {
    /// Parses `DescribeStacks` outputs; every key is required.
    pub fn from_outputs(outputs: &BTreeMap<String, String>) -> Result<Self, MissingOutput> {
        Ok(Outputs {
            instance_type: required(outputs, "InstanceType")?,
            master_replicas: required(outputs, "MasterReplicas")?,
            operator_version: required(outputs, "OperatorVersion")?,
            release_version: required(outputs, "ReleaseVersion")?,
        })
    }

    /// `MasterReplicas` as a number; `None` when the stack holds something unparsable, which
    /// change detection treats as "differs".
    pub fn replicas(&self) -> Option<u32> {
        self.master_replicas.parse().ok()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::stacks::testdata;

    #[test]
    fn with_irsa_the_alb_controller_and_route53_manager_roles_trust_the_issuer_and_nothing_else_does() {
        let trust_of =
            |t: &Template, role: &str| t.resources[role].properties["AssumeRolePolicyDocument"]["Statement"].clone();
        let plain = render(&params(1));
        assert_eq!(trust_of(&plain, ALB_CONTROLLER_ROLE).as_array().map(Vec::len), Some(1), "the IAM manager only");
        let mut p = params(1);
        p.irsa = Some(crate::irsa::Issuer {
            domain: "d1a2.cloudfront.net".into(),
            alias: Some("irsa.al9qy.example.com".into()),
        });
        let t = render(&p);
        for (role, accounts) in crate::irsa::TRUSTED_SERVICE_ACCOUNTS {
            let statements = trust_of(&t, role);
            let statements = statements.as_array().cloned().unwrap_or_default();
            assert_eq!(statements.len(), 3, "{role}: the IAM manager, then the alias and the domain");
            assert_eq!(statements[0]["Action"], "sts:AssumeRole");
            for (statement, host) in statements[1..].iter().zip(["irsa.al9qy.example.com", "d1a2.cloudfront.net"]) {
                assert_eq!(statement["Action"], "sts:AssumeRoleWithWebIdentity", "{role}");
                assert_eq!(statement["Condition"]["StringLike"][format!("{host}:sub")], accounts, "{role}");
                assert_eq!(
                    statement["Condition"]["StringEquals"][format!("{host}:aud")],
                    "sts.amazonaws.com",
                    "{role}"
                );
            }
        }
        for role in [ROLE, IAM_MANAGER_ROLE] {
            assert_eq!(trust_of(&t, role), trust_of(&plain, role), "{role} is not for service accounts");
        }
    }

    #[test]
    fn the_etcd_volume_annotations_are_read_and_bad_values_name_the_annotation_and_the_fix() {
        let read = EtcdVolumePerformance::from_annotations;
        assert_eq!(read(None, None), Ok(EtcdVolumePerformance::default()));
        assert_eq!(
            read(Some("6000"), Some("500")),
            Ok(EtcdVolumePerformance { iops: Some(6000), throughput: Some(500) })
        );
        assert_eq!(read(None, Some("750")), Ok(EtcdVolumePerformance { iops: None, throughput: Some(750) }));
        let err = read(Some("fast"), None).unwrap_err();
        assert!(err.contains("ebs-volume-iops") && err.contains("3000 to 16000"), "{err}");
        let err = read(Some("20000"), None).unwrap_err();
        assert!(err.contains("\"20000\""), "{err}");
        let err = read(None, Some("100")).unwrap_err();
        assert!(err.contains("ebs-volume-throughput") && err.contains("125 to 1000"), "{err}");
        let err = read(None, Some("1000")).unwrap_err();
        assert!(err.contains("needs at least 4000 IOPS") && err.contains("raise"), "{err}");

        // What is read reaches each master's etcd volume.
        let mut p = params(3);
        p.etcd_volume = read(Some("6000"), Some("500")).expect("valid");
        let t = render(&p).to_value();
        for n in 0..3 {
            let vol = &t["Resources"][etcd_volume_id(n)]["Properties"];
            assert_eq!((vol["Iops"].as_u64(), vol["Throughput"].as_u64()), (Some(6000), Some(500)), "master {n}");
        }
    }

    pub fn params(replicas: u32) -> Params {
        let azs: Vec<(String, String)> = ["a", "b", "c"]
            .into_iter()
            .take(replicas as usize)
            .map(|s| (format!("eu-central-1{s}"), format!("subnet-priv-{s}")))
            .collect();
        Params {
            common: testdata::common(),
            masters: masters(replicas, &azs).expect("valid layout"),
            instance_type: "m5.xlarge".into(),
            image_id: "ami-0flatcar".into(),
            imds_http_tokens: "required".into(),
            master_security_group_id: "sg-master".into(),
            bucket: "123456789012-g8s-al9qy".into(),
            kms_key_arn: "arn:aws:kms:eu-central-1:123456789012:key/k1".into(),
            hosted_zone_id: Some("Z1PUBLIC".into()),
            internal_hosted_zone_id: Some("Z2PRIVATE".into()),
            etcd_volume: EtcdVolumePerformance::default(),
            is_update: false,
            irsa: None,
        }
    }

    #[test]
    fn master_ids_follow_hamaster() {
        assert_eq!(master_ids(1), Ok(vec![0]));
        assert_eq!(master_ids(3), Ok(vec![1, 2, 3]));
        assert_eq!(master_ids(2), Err(UnsupportedReplicas(2)));
        assert_eq!(masters(3, &[]), Err(MasterLayoutError::NoAvailabilityZone));
        let one_az = masters(3, &[("eu-central-1a".into(), "subnet-a".into())]).expect("layout");
        assert!(one_az.iter().all(|m| m.az == "eu-central-1a" && m.subnet_id == "subnet-a"));
        let spread =
            masters(3, &params(3).masters.iter().map(|m| (m.az.clone(), m.subnet_id.clone())).collect::<Vec<_>>())
                .expect("layout");
        assert_eq!(
            spread.iter().map(|m| m.az.as_str()).collect::<Vec<_>>(),
            ["eu-central-1a", "eu-central-1b", "eu-central-1c"]
        );
    }

    #[test]
    fn single_master_inventory_and_names() {
        let t = render(&params(1));
        assert_eq!(t.ids_of_type("AWS::EC2::NetworkInterface"), vec!["MasterEni"]);
        assert_eq!(t.ids_of_type("AWS::EC2::Volume"), vec!["EtcdVolume"]);
        assert_eq!(t.ids_of_type("AWS::EC2::LaunchTemplate"), vec!["ControlPlaneNodeLaunchTemplate"]);
        assert_eq!(t.ids_of_type("AWS::AutoScaling::AutoScalingGroup"), vec!["ControlPlaneNodeAutoScalingGroup"]);
        assert_eq!(t.ids_of_type("AWS::IAM::InstanceProfile"), vec![INSTANCE_PROFILE]);
        assert_eq!(t.ids_of_type("AWS::IAM::Role").len(), 4);
        let eni = &t.resources["MasterEni"].properties;
        assert_eq!(eni["Tags"][0]["Value"], "al9qy-master0-eni");
        assert_eq!(eni["Tags"][1], json!({ "Key": "node.k8s.amazonaws.com/no_manage", "Value": "true" }));
        assert_eq!(eni["GroupSet"], json!(["sg-master"]));
        assert_eq!(t.resources["EtcdVolume"].properties["Tags"][0]["Value"], "al9qy-master0-etcd");
        let lt = &t.resources["ControlPlaneNodeLaunchTemplate"].properties;
        assert_eq!(lt["LaunchTemplateName"], "al9qy-master0-launch-template");
        assert_eq!(t.resources[ROLE].properties["RoleName"], "gs-cluster-al9qy-role-tccpn");
        assert_eq!(t.resources[INSTANCE_PROFILE].properties["InstanceProfileName"], "gs-cluster-al9qy-profile-tccpn");
        assert_eq!(t.resources[POLICY].properties["PolicyName"], "gs-cluster-al9qy-policy-tccpn");
        let asg = &t.resources["ControlPlaneNodeAutoScalingGroup"];
        assert!(asg.properties.get("LifecycleHookSpecificationList").is_none(), "no hooks on a single master");
        assert_eq!(t.outputs["MasterReplicas"].value, "1");
    }

    #[test]
    fn three_masters_get_suffixes_hooks_and_spread_over_azs() {
        let t = render(&params(3));
        assert_eq!(t.ids_of_type("AWS::EC2::NetworkInterface"), vec!["MasterEni", "MasterEni2", "MasterEni3"]);
        assert_eq!(
            t.ids_of_type("AWS::AutoScaling::AutoScalingGroup"),
            vec![
                "ControlPlaneNodeAutoScalingGroup",
                "ControlPlaneNodeAutoScalingGroup2",
                "ControlPlaneNodeAutoScalingGroup3"
            ]
        );
        assert_eq!(t.resources["MasterEni"].properties["Tags"][0]["Value"], "al9qy-master1-eni");
        assert_eq!(t.resources["MasterEni3"].properties["Tags"][0]["Value"], "al9qy-master3-eni");
        assert_eq!(t.resources["EtcdVolume2"].properties["AvailabilityZone"], "eu-central-1b");
        assert_eq!(
            t.resources["ControlPlaneNodeAutoScalingGroup3"].properties["VPCZoneIdentifier"],
            json!(["subnet-priv-c"])
        );
        let hooks = &t.resources["ControlPlaneNodeAutoScalingGroup2"].properties["LifecycleHookSpecificationList"];
        assert_eq!(hooks[0]["LifecycleHookName"], LAUNCHING_HOOK);
        assert_eq!(hooks[0]["HeartbeatTimeout"], 1020);
        assert_eq!(hooks[1]["LifecycleHookName"], TERMINATING_HOOK);
        assert_eq!(hooks[1]["LifecycleTransition"], "autoscaling:EC2_INSTANCE_TERMINATING");
        assert_eq!(hooks[1]["HeartbeatTimeout"], 900);
        // The masters may complete lifecycle actions only on groups of their own cluster.
        let statements =
            t.resources[POLICY].properties["PolicyDocument"]["Statement"].as_array().cloned().unwrap_or_default();
        let completing: Vec<_> = statements
            .iter()
            .filter(|st| {
                st["Action"].as_array().into_iter().flatten().any(|a| a == "autoscaling:CompleteLifecycleAction")
            })
            .collect();
        assert_eq!(completing.len(), 1, "{statements:?}");
        assert_eq!(
            completing[0]["Condition"],
            json!({ "StringEquals": { "autoscaling:ResourceTag/giantswarm.io/cluster": "al9qy" } })
        );
        assert_eq!(t.outputs["MasterReplicas"].value, "3");
        assert_eq!(t.ids_of_type("AWS::Route53::RecordSet"), vec!["EtcdRecordSet", "EtcdRecordSet2", "EtcdRecordSet3"]);
        assert_eq!(
            t.resources["EtcdRecordSet2"].properties["Name"],
            "etcd2.al9qy.k8s.gauss.eu-central-1.aws.gigantic.io."
        );
        assert_eq!(t.resources["EtcdRecordSet2"].properties["HostedZoneId"], "Z2PRIVATE");
        assert_eq!(
            t.resources["EtcdRecordSet2"].properties["ResourceRecords"][0],
            cfn::get_att("MasterEni2", "PrimaryPrivateIpAddress")
        );
    }

    #[test]
    fn etcd_volumes_are_snapshotted_when_they_leave_or_are_replaced() {
        let v = render(&params(3)).to_value();
        for id in ["EtcdVolume", "EtcdVolume2", "EtcdVolume3"] {
            assert_eq!(v["Resources"][id]["DeletionPolicy"], "Snapshot", "{id}");
            assert_eq!(v["Resources"][id]["UpdateReplacePolicy"], "Snapshot", "{id}");
        }
        assert!(v["Resources"]["MasterEni"].get("DeletionPolicy").is_none());
    }

    #[test]
    fn etcd_replacements_name_moved_and_removed_members() {
        let deployed = render(&params(3)).to_value();
        assert_eq!(etcd_replacements(&deployed, &render(&params(3))), vec![]);
        // Another instance type replaces instances, not etcd members.
        let mut bigger = params(3);
        bigger.instance_type = "m5.2xlarge".into();
        assert_eq!(etcd_replacements(&deployed, &render(&bigger)), vec![]);

        // Three to one: members 2 and 3 go; the first keeps its logical IDs and zone.
        let ids: Vec<String> =
            etcd_replacements(&deployed, &render(&params(1))).into_iter().map(|r| r.logical_id).collect();
        assert_eq!(ids, ["EtcdVolume2", "EtcdVolume3", "MasterEni2", "MasterEni3"]);

        // Zones rotated: every member moves.
        let mut rotated = params(3);
        let azs = [
            ("eu-central-1b", "subnet-priv-b"),
            ("eu-central-1c", "subnet-priv-c"),
            ("eu-central-1a", "subnet-priv-a"),
        ]
        .map(|(a, s)| (a.to_string(), s.to_string()));
        rotated.masters = masters(3, &azs).expect("layout");
        let found = etcd_replacements(&deployed, &render(&rotated));
        assert_eq!(found.len(), 6, "{found:?}");
        assert_eq!(found[0].to_string(), "EtcdVolume would move from zone eu-central-1a to eu-central-1b");

        // One to three keeps the first member where it is.
        let one = render(&params(1)).to_value();
        assert_eq!(etcd_replacements(&one, &render(&params(3))), vec![]);

        // A volume made from a snapshot stays while the snapshot stays; without it, it would be
        // recreated empty.
        let mut restored = params(1);
        restored.masters[0].etcd_snapshot_id = Some("snap-0a1b2c3d".into());
        let from_snapshot = render(&restored).to_value();
        assert_eq!(etcd_replacements(&from_snapshot, &render(&restored)), vec![]);
        let found = etcd_replacements(&from_snapshot, &render(&params(1)));
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(
            found[0].to_string(),
            format!(
                "EtcdVolume would be recreated from snapshot none instead of snap-0a1b2c3d (annotation {})",
                apis::labels::ETCD_SNAPSHOT_ID
            )
        );
    }

    #[test]
    fn asgs_chain_only_on_updates() {
        let create = render(&params(3));
        assert_eq!(create.resources["ControlPlaneNodeAutoScalingGroup2"].depends_on, vec!["MasterEni2", "EtcdVolume2"]);
        let mut p = params(3);
        p.is_update = true;
        let update = render(&p);
        assert_eq!(update.resources["ControlPlaneNodeAutoScalingGroup"].depends_on, vec!["MasterEni", "EtcdVolume"]);
        assert_eq!(
            update.resources["ControlPlaneNodeAutoScalingGroup2"].depends_on,
            vec!["MasterEni2", "EtcdVolume2", "ControlPlaneNodeAutoScalingGroup"]
        );
        assert_eq!(
            update.resources["ControlPlaneNodeAutoScalingGroup3"].depends_on,
            vec!["MasterEni3", "EtcdVolume3", "ControlPlaneNodeAutoScalingGroup2"]
        );
    }

    #[test]
    fn asg_rolls_one_master_at_a_time_behind_the_three_elbs() {
        let t = render(&params(1));
        let asg = &t.resources["ControlPlaneNodeAutoScalingGroup"];
        let policy = &asg.update_policy.as_ref().expect("update policy")["AutoScalingRollingUpdate"];
        assert_eq!(policy["MinInstancesInService"], "0");
        assert_eq!(policy["MaxBatchSize"], "1");
        assert_eq!(policy["PauseTime"], "PT2M");
        assert_eq!(super::super::tcnp::pause_seconds(MASTER_PAUSE), Some(MASTER_PAUSE_SECONDS));
        assert_eq!(asg.properties["LoadBalancerNames"], json!(["al9qy-api-internal", "al9qy-api", "al9qy-etcd"]));
        assert_eq!(asg.properties["MinSize"], "1");
        assert_eq!(asg.properties["MaxSize"], "1");
        assert_eq!(asg.properties["HealthCheckGracePeriod"], 60);
        assert_eq!(
            asg.properties["Tags"][0],
            json!({ "Key": "Name", "Value": "al9qy-master", "PropagateAtLaunch": true })
        );
    }

    #[test]
    fn launch_template_carries_volumes_imds_and_the_s3_pointer() {
        let t = render(&params(1));
        let data = &t.resources["ControlPlaneNodeLaunchTemplate"].properties["LaunchTemplateData"];
        let devices: Vec<_> =
            data["BlockDeviceMappings"].as_array().into_iter().flatten().map(|b| b["DeviceName"].clone()).collect();
        assert_eq!(devices, vec![json!("/dev/xvdc"), json!("/dev/xvdg"), json!("/dev/xvdf"), json!("/dev/xvdi")]);
        assert!(
            data["BlockDeviceMappings"]
                .as_array()
                .into_iter()
                .flatten()
                .all(|b| b["Ebs"]["Encrypted"] == true && b["Ebs"]["VolumeSize"] == 100)
        );
        assert_eq!(data["MetadataOptions"], json!({ "HttpTokens": "required", "HttpPutResponseHopLimit": 2 }));
        assert_eq!(data["ImageId"], "ami-0flatcar");
        assert_eq!(data["InstanceType"], "m5.xlarge");
        assert_eq!(data["Monitoring"]["Enabled"], false);
        assert_eq!(
            data["UserData"],
            user_data("123456789012-g8s-al9qy", "version/16.1.1/cloudconfig/v_6_1_0/cluster-al9qy-tccpn-0")
        );
        assert_eq!(
            data["TagSpecifications"][0]["Tags"][0],
            json!({ "Key": "giantswarm.io/release", "Value": "18.2.0" })
        );
    }

    #[test]
    fn etcd_volume_performance_only_within_bounds() {
        let mut p = params(1);
        p.etcd_volume = EtcdVolumePerformance { iops: Some(4000), throughput: Some(2000) };
        let t = render(&p);
        let v = &t.resources["EtcdVolume"].properties;
        assert_eq!(v["Iops"], 4000);
        assert!(v.get("Throughput").is_none());
        assert_eq!(v["Size"], 100);
        assert_eq!(v["VolumeType"], "gp3");
    }

    /// Every `Allow` statement of the role or policy `id`.
    fn statements(t: &Template, id: &str) -> Vec<Value> {
        let props = &t.resources[id].properties;
        let docs: Vec<&Value> = match props.get("Policies") {
            Some(policies) => policies.as_array().expect("policies").iter().map(|p| &p["PolicyDocument"]).collect(),
            None => vec![&props["PolicyDocument"]],
        };
        docs.into_iter().flat_map(|d| d["Statement"].as_array().expect("statements").clone()).collect()
    }

    fn actions(statement: &Value) -> Vec<&str> {
        statement["Action"].as_array().expect("actions").iter().map(|a| a.as_str().expect("action")).collect()
    }

    #[test]
    fn roles_change_only_what_carries_the_clusters_tags() {
        let t = render(&params(3));
        for id in [POLICY, IAM_MANAGER_ROLE, ALB_CONTROLLER_ROLE, ROUTE53_MANAGER_ROLE] {
            for st in statements(&t, id) {
                // On `*` only reads and the few actions without a resource type, never a wildcard action.
                if st["Resource"] == "*" {
                    assert!(st.get("Condition").is_none(), "{id}: {st}");
                    for a in actions(&st) {
                        let verb = a.split(':').nth(1).expect("service:verb");
                        assert!(
                            !verb.contains('*')
                                && (verb.starts_with("Describe")
                                    || verb.starts_with("List")
                                    || verb.starts_with("Get")
                                    || ["SetWebAcl", "CreateProtection"].contains(&verb)),
                            "{id}: {a} on *"
                        );
                    }
                }
            }
        }
        let master = statements(&t, POLICY);
        let attach = master.iter().find(|s| actions(s).contains(&"ec2:AttachVolume")).expect("attach statement");
        assert_eq!(attach["Condition"]["StringEquals"]["aws:ResourceTag/giantswarm.io/cluster"], "al9qy");
        let hook = master.iter().find(|s| actions(s).contains(&"autoscaling:CompleteLifecycleAction")).expect("hook");
        assert_eq!(actions(hook), ["autoscaling:CompleteLifecycleAction"]);
        assert_eq!(hook["Condition"]["StringEquals"]["autoscaling:ResourceTag/giantswarm.io/cluster"], "al9qy");
        let manager = statements(&t, IAM_MANAGER_ROLE);
        assert_eq!(
            manager[0]["Resource"],
            json!([
                cfn::sub("arn:aws:iam::${AWS::AccountId}:role/al9qy-*"),
                cfn::sub("arn:aws:iam::${AWS::AccountId}:role/gs-al9qy-*"),
            ]),
            "the IAM manager assumes the cluster's roles only"
        );
    }

    #[test]
    fn route53_off_drops_etcd_records_and_the_route53_role() {
        let mut p = params(3);
        p.common.route53_enabled = false;
        let t = render(&p);
        assert!(t.ids_of_type("AWS::Route53::RecordSet").is_empty());
        assert!(t.resource(ROUTE53_MANAGER_ROLE).is_none());
    }

    #[test]
    fn outputs_round_trip() {
        let t = render(&params(3));
        let map: BTreeMap<String, String> =
            t.outputs.iter().map(|(k, o)| (k.clone(), o.value.as_str().unwrap_or_default().to_owned())).collect();
        let o = Outputs::from_outputs(&map).expect("outputs");
        assert_eq!(o.instance_type, "m5.xlarge");
        assert_eq!(o.replicas(), Some(3));
        assert_eq!(o.operator_version, "16.1.1");
        assert_eq!(o.release_version, "18.2.0");
        let mut partial = map.clone();
        partial.remove("InstanceType");
        assert_eq!(Outputs::from_outputs(&partial), Err(MissingOutput("InstanceType".into())));
    }
}

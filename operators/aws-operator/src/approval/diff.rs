//! The diff of a deployed and a desired template: resources added, removed and modified with
//! the property paths that differ, and whether CloudFormation replaces them
//! ([`replacement_properties`]).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

/// What happens to one resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub enum ChangeAction {
    /// Created.
    Add,
    /// Deleted.
    Remove,
    /// Changed.
    Modify,
}

/// Whether CloudFormation replaces a resource (a new physical resource, the old one deleted).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub enum Replacement {
    /// Updated in place.
    False,
    /// Replaced if a value only known at update time changes (a reference to a replaced
    /// resource, an attribute).
    Conditional,
    /// Replaced.
    True,
}

impl Replacement {
    /// CloudFormation's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Replacement::False => "False",
            Replacement::Conditional => "Conditional",
            Replacement::True => "True",
        }
    }
}

/// One resource's change between the deployed and the desired template.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ResourceChange {
    /// The logical id.
    pub logical_id: String,
    /// The resource type (the desired one; the deployed one for a removal).
    pub resource_type: String,
    /// Added, removed or modified.
    pub action: ChangeAction,
    /// The paths that differ, from the resource's root (`Properties.LaunchTemplateData.ImageId`,
    /// `UpdatePolicy.AutoScalingRollingUpdate.MaxBatchSize`); a path that changes only because
    /// it references a changed resource ends in ` (via <logical id>)`.
    pub paths: Vec<String>,
    /// Whether CloudFormation replaces it (modifications only).
    pub replacement: Replacement,
    /// Whether the update replaces the instances of this Auto Scaling group: its launch
    /// template, launch configuration, subnets or instance mix change and its `UpdatePolicy`
    /// rolls or replaces instances.
    pub replaces_instances: bool,
}

/// The properties whose change makes CloudFormation replace a resource ("Update requires:
/// Replacement" in AWS's resource reference), for the types the operator's templates use.
/// A type not listed is taken to update in place.
pub fn replacement_properties(resource_type: &str) -> &'static [&'static str] {
    match resource_type {
        "AWS::AutoScaling::AutoScalingGroup" => &["AutoScalingGroupName", "InstanceId"],
        "AWS::AutoScaling::LifecycleHook" => &["AutoScalingGroupName", "LifecycleHookName"],
        "AWS::EC2::EIP" => &["Domain", "TransferAddress"],
        "AWS::EC2::InternetGateway" => &[],
        "AWS::EC2::LaunchTemplate" => &["LaunchTemplateName"],
        "AWS::EC2::NatGateway" => &["AllocationId", "ConnectivityType", "PrivateIpAddress", "SubnetId"],
        "AWS::EC2::NetworkInterface" => &["InterfaceType", "PrivateIpAddress", "SubnetId"],
        "AWS::EC2::Route" => {
            &["DestinationCidrBlock", "DestinationIpv6CidrBlock", "DestinationPrefixListId", "RouteTableId"]
        }
        "AWS::EC2::RouteTable" => &["VpcId"],
        "AWS::EC2::SecurityGroup" => &["GroupDescription", "GroupName", "VpcId"],
        "AWS::EC2::SecurityGroupIngress" | "AWS::EC2::SecurityGroupEgress" => &[
            "CidrIp",
            "CidrIpv6",
            "DestinationSecurityGroupId",
            "FromPort",
            "GroupId",
            "GroupName",
            "IpProtocol",
            "SourcePrefixListId",
            "SourceSecurityGroupId",
            "SourceSecurityGroupName",
            "SourceSecurityGroupOwnerId",
            "ToPort",
        ],
        "AWS::EC2::Subnet" => &["AvailabilityZone", "AvailabilityZoneId", "CidrBlock", "Ipv6CidrBlock", "VpcId"],
        "AWS::EC2::SubnetRouteTableAssociation" => &["SubnetId"],
        "AWS::EC2::VPC" => &["CidrBlock", "Ipv4IpamPoolId", "Ipv4NetmaskLength"],
        "AWS::EC2::VPCCidrBlock" => &["AmazonProvidedIpv6CidrBlock", "CidrBlock", "VpcId"],
        "AWS::EC2::VPCEndpoint" => &["ServiceName", "VpcEndpointType", "VpcId"],
        "AWS::EC2::VPCGatewayAttachment" => &[],
        "AWS::EC2::VPCPeeringConnection" => &["PeerOwnerId", "PeerRegion", "PeerRoleArn", "PeerVpcId", "VpcId"],
        "AWS::EC2::Volume" => &["AvailabilityZone", "Encrypted", "KmsKeyId", "OutpostArn", "SnapshotId"],
        "AWS::ElasticLoadBalancing::LoadBalancer" => &["LoadBalancerName", "Scheme"],
        "AWS::ElasticLoadBalancingV2::LoadBalancer" => &["Name", "Scheme", "Type"],
        "AWS::ElasticLoadBalancingV2::TargetGroup" => &["Name", "Port", "Protocol", "TargetType", "VpcId"],
        "AWS::IAM::InstanceProfile" => &["InstanceProfileName", "Path"],
        "AWS::IAM::Role" => &["Path", "RoleName"],
        "AWS::IAM::Policy" => &[],
        "AWS::IAM::ManagedPolicy" => &["ManagedPolicyName", "Path"],
        "AWS::Route53::HostedZone" => &["Name"],
        "AWS::Route53::RecordSet" => &["HostedZoneId", "HostedZoneName", "Name"],
        "AWS::S3::Bucket" => &["BucketName", "ObjectLockEnabled"],
        _ => &[],
    }
}

/// Properties of an Auto Scaling group whose change replaces its instances under a rolling or
/// replacing `UpdatePolicy`.
const INSTANCE_PROPERTIES: &[&str] =
    &["LaunchConfigurationName", "LaunchTemplate", "MixedInstancesPolicy", "VPCZoneIdentifier"];

fn resources(template: &Value) -> BTreeMap<&str, &Value> {
    template
        .get("Resources")
        .and_then(Value::as_object)
        .map(|m| m.iter().map(|(k, v)| (k.as_str(), v)).collect())
        .unwrap_or_default()
}

fn type_of(resource: &Value) -> String {
    resource.get("Type").and_then(Value::as_str).unwrap_or("?").to_string()
}

/// The paths under `prefix` where `a` and `b` differ. Objects are compared key by key, arrays
/// element by element when their lengths match (else the array itself is the path).
fn diff_paths(prefix: &str, a: &Value, b: &Value, out: &mut Vec<String>) {
    let join = |key: &str| if prefix.is_empty() { key.to_string() } else { format!("{prefix}.{key}") };
    match (a, b) {
        (Value::Object(x), Value::Object(y)) if !is_intrinsic(a) && !is_intrinsic(b) => {
            let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                match (x.get(k), y.get(k)) {
                    (Some(p), Some(q)) => diff_paths(&join(k), p, q, out),
                    _ => out.push(join(k)),
                }
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (p, q)) in x.iter().zip(y).enumerate() {
                diff_paths(&format!("{prefix}[{i}]"), p, q, out);
            }
        }
        _ if a != b => out.push(prefix.to_string()),
        _ => {}
    }
}

/// Whether `v` is an intrinsic function (`{"Ref": …}`, `{"Fn::…": …}`): compared as a whole.
fn is_intrinsic(v: &Value) -> bool {
    v.as_object().is_some_and(|m| m.len() == 1 && m.keys().all(|k| k == "Ref" || k.starts_with("Fn::")))
}

/// The logical ids `v` references: by `Ref` (its physical id) and by `Fn::GetAtt` (an
/// attribute), each with whether it is an attribute.
fn references(v: &Value, out: &mut Vec<(String, bool)>) {
    match v {
        Value::Object(m) => {
            if let Some(Value::String(id)) = m.get("Ref") {
                out.push((id.clone(), false));
            }
            match m.get("Fn::GetAtt") {
                Some(Value::Array(a)) => {
                    if let Some(Value::String(id)) = a.first() {
                        out.push((id.clone(), true));
                    }
                }
                Some(Value::String(s)) => {
                    if let Some((id, _)) = s.split_once('.') {
                        out.push((id.to_string(), true));
                    }
                }
                _ => {}
            }
            if let Some(Value::String(s)) = m.get("Fn::Sub") {
                // `${Name}` and `${Name.Attribute}` in a substitution string.
                for part in s.split("${").skip(1) {
                    if let Some((name, _)) = part.split_once('}') {
                        match name.split_once('.') {
                            Some((id, _)) => out.push((id.to_string(), true)),
                            None => out.push((name.to_string(), false)),
                        }
                    }
                }
            }
            for value in m.values() {
                references(value, out);
            }
        }
        Value::Array(a) => a.iter().for_each(|x| references(x, out)),
        _ => {}
    }
}

/// The top-level property a path (`Properties.X.Y`) is under.
fn property_of(path: &str) -> Option<&str> {
    let rest = path.strip_prefix("Properties.")?;
    Some(rest.split(['.', '[', ' ']).next().unwrap_or(rest))
}

fn replacement_of(resource_type: &str, paths: &[String]) -> Replacement {
    let replacing = replacement_properties(resource_type);
    let mut verdict = Replacement::False;
    for path in paths {
        let Some(prop) = property_of(path) else { continue };
        if !replacing.contains(&prop) {
            continue;
        }
        // A value that changes only through a reference is known at update time only.
        let dynamic = path.ends_with(')') && path.contains(" (via ");
        verdict = verdict.max(if dynamic { Replacement::Conditional } else { Replacement::True });
    }
    verdict
}

fn rolls_instances(resource: &Value, paths: &[String]) -> bool {
    let policy = resource.get("UpdatePolicy");
    let rolling = policy.is_some_and(|p| {
        p.get("AutoScalingRollingUpdate").is_some()
            || p.get("AutoScalingReplacingUpdate")
                .and_then(|r| r.get("WillReplace"))
                .is_some_and(|w| w == &Value::Bool(true) || w == "true")
    });
    rolling && paths.iter().filter_map(|p| property_of(p)).any(|p| INSTANCE_PROPERTIES.contains(&p))
}

/// The resources that differ between the `deployed` and the `desired` template (CloudFormation
/// JSON), sorted by logical id.
///
/// A resource whose own text is unchanged is still modified when a property references a
/// resource that changes under it: an attribute (`Fn::GetAtt`) of a modified resource (a launch
/// template's `LatestVersionNumber` after its data changed) or the physical id (`Ref`) of a
/// replaced one. Those paths end in ` (via <logical id>)`, and a replacing property changed
/// that way makes the replacement `Conditional`, as CloudFormation reports it.
pub fn template_diff(deployed: &Value, desired: &Value) -> Vec<ResourceChange> {
    let (old, new) = (resources(deployed), resources(desired));
    let mut changes: BTreeMap<String, ResourceChange> = BTreeMap::new();
    for (id, res) in &new {
        let Some(before) = old.get(id) else {
            changes.insert(
                id.to_string(),
                ResourceChange {
                    logical_id: id.to_string(),
                    resource_type: type_of(res),
                    action: ChangeAction::Add,
                    paths: Vec::new(),
                    replacement: Replacement::False,
                    replaces_instances: false,
                },
            );
            continue;
        };
        let mut paths = Vec::new();
        diff_paths("", before, res, &mut paths);
        if !paths.is_empty() {
            let resource_type = type_of(res);
            // A new type is a new resource.
            let replacement = if type_of(before) != resource_type {
                Replacement::True
            } else {
                replacement_of(&resource_type, &paths)
            };
            changes.insert(
                id.to_string(),
                ResourceChange {
                    logical_id: id.to_string(),
                    resource_type,
                    action: ChangeAction::Modify,
                    replaces_instances: rolls_instances(res, &paths),
                    paths,
                    replacement,
                },
            );
        }
    }
    for (id, res) in &old {
        if !new.contains_key(id) {
            changes.insert(
                id.to_string(),
                ResourceChange {
                    logical_id: id.to_string(),
                    resource_type: type_of(res),
                    action: ChangeAction::Remove,
                    paths: Vec::new(),
                    replacement: Replacement::False,
                    replaces_instances: false,
                },
            );
        }
    }
    // Propagate through references until nothing more changes (each round adds at least one
    // path, and paths are finite).
    loop {
        let mut added = false;
        for (id, res) in &new {
            let Some(props) = res.get("Properties").and_then(Value::as_object) else { continue };
            if changes.get(*id).is_some_and(|c| c.action == ChangeAction::Add) {
                continue;
            }
            for (prop, value) in props {
                let mut refs = Vec::new();
                references(value, &mut refs);
                for (target, attribute) in refs {
                    let Some(changed) = changes.get(&target) else { continue };
                    let moves = match changed.action {
                        ChangeAction::Modify => attribute || changed.replacement != Replacement::False,
                        ChangeAction::Add | ChangeAction::Remove => false,
                    };
                    if !moves {
                        continue;
                    }
                    let path = format!("Properties.{prop} (via {target})");
                    let entry = changes.entry(id.to_string()).or_insert_with(|| ResourceChange {
                        logical_id: id.to_string(),
                        resource_type: type_of(res),
                        action: ChangeAction::Modify,
                        paths: Vec::new(),
                        replacement: Replacement::False,
                        replaces_instances: false,
                    });
                    let direct = format!("Properties.{prop}");
                    if entry.paths.iter().any(|p| p == &path || p == &direct || p.starts_with(&format!("{direct}."))) {
                        continue;
                    }
                    entry.paths.push(path);
                    entry.paths.sort();
                    entry.replacement = replacement_of(&entry.resource_type, &entry.paths);
                    entry.replaces_instances = rolls_instances(res, &entry.paths);
                    added = true;
                }
            }
        }
        if !added {
            break;
        }
    }
    changes.into_values().collect()
}

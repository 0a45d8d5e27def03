//! CloudFormation drift detection of one stack, and the service calls that put drifted
//! resources back as their template says.
//!
//! Detection is CloudFormation's own (`DetectStackDrift`, then
//! `DescribeStackDriftDetectionStatus` until it completes, then `DescribeStackResourceDrifts`):
//! it knows each resource type's properties and which of them matter. The calls are separate
//! from the stack state machine's [`super::cloudformation::CloudFormation`] trait because they
//! change nothing in a stack and run on their own schedule ([`crate::controllers::drift`]). What they return is
//! recorded and remedied by the pure [`crate::drift::findings`].
//!
//! Remediation does not go through CloudFormation: an `UpdateStack` with the template already
//! deployed changes nothing ("No updates are to be performed"), because CloudFormation compares
//! the new template with the *old template*, not with the resources. So the expected values are
//! written back through each service's own API: a rule added by hand is revoked, a rule removed
//! by hand authorised again, a deleted or redirected route created or replaced, an Auto Scaling
//! group's sizes set back.

use aws_sdk_cloudformation::types::{StackDriftDetectionStatus, StackResourceDriftStatus};
use aws_sdk_ec2::types::{IpPermission, IpRange, Ipv6Range, PrefixListId, UserIdGroupPair};
use serde_json::Value;

use super::{AccountClients, AwsError, api_error};
use crate::drift::findings::{Difference, ResourceReport};

/// How a `DetectStackDrift` call went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Started {
    /// The detection runs; its id.
    Detection(String),
    /// CloudFormation refused to detect drift on the stack now (it is gone, or in a status
    /// where drift is not detected, such as mid-update); its message.
    Refused(String),
}

/// Start drift detection on stack `name` (`DetectStackDrift`).
pub async fn start(aws: &AccountClients, name: &str) -> Result<Started, AwsError> {
    match aws.cfn_client.detect_stack_drift().stack_name(name).send().await {
        Ok(out) => match out.stack_drift_detection_id().filter(|id| !id.is_empty()) {
            Some(id) => Ok(Started::Detection(id.to_string())),
            None => Ok(Started::Refused("DetectStackDrift returned no detection id".into())),
        },
        Err(e) => match api_error("CloudFormation", "DetectStackDrift", e) {
            AwsError::Api { code, message, .. } if code == "ValidationError" => Ok(Started::Refused(message)),
            other => Err(other),
        },
    }
}

/// Where a detection stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Detection {
    /// Still running.
    InProgress,
    /// Done: how many resources drifted (modified or deleted).
    Complete {
        /// `DriftedStackResourceCount`.
        drifted: u32,
    },
    /// CloudFormation could not complete it; its reason.
    Failed(String),
}

/// The state of detection `id` (`DescribeStackDriftDetectionStatus`).
pub async fn status(aws: &AccountClients, id: &str) -> Result<Detection, AwsError> {
    let out = aws
        .cfn_client
        .describe_stack_drift_detection_status()
        .stack_drift_detection_id(id)
        .send()
        .await
        .map_err(|e| api_error("CloudFormation", "DescribeStackDriftDetectionStatus", e))?;
    Ok(match out.detection_status() {
        Some(StackDriftDetectionStatus::DetectionInProgress) => Detection::InProgress,
        Some(StackDriftDetectionStatus::DetectionComplete) => {
            Detection::Complete { drifted: u32::try_from(out.drifted_stack_resource_count().unwrap_or(0)).unwrap_or(0) }
        }
        other => Detection::Failed(out.detection_status_reason().map_or_else(
            || other.map_or("no detection status", StackDriftDetectionStatus::as_str).to_string(),
            str::to_string,
        )),
    })
}

/// The drifted resources (modified or deleted) of stack `name`'s latest completed detection
/// (`DescribeStackResourceDrifts`, every page).
pub async fn drifted_resources(aws: &AccountClients, name: &str) -> Result<Vec<ResourceReport>, AwsError> {
    let pages = aws
        .cfn_client
        .describe_stack_resource_drifts()
        .stack_name(name)
        .stack_resource_drift_status_filters(StackResourceDriftStatus::Modified)
        .stack_resource_drift_status_filters(StackResourceDriftStatus::Deleted)
        .into_paginator()
        .send()
        .try_collect()
        .await
        .map_err(|e| api_error("CloudFormation", "DescribeStackResourceDrifts", e))?;
    Ok(pages
        .iter()
        .flat_map(|p| p.stack_resource_drifts())
        .map(|d| ResourceReport {
            logical_id: d.logical_resource_id().unwrap_or_default().to_string(),
            resource_type: d.resource_type().unwrap_or_default().to_string(),
            physical_id: d.physical_resource_id().map(str::to_string),
            status: d
                .stack_resource_drift_status()
                .map(StackResourceDriftStatus::as_str)
                .unwrap_or_default()
                .to_string(),
            expected: d.expected_properties().and_then(|p| serde_json::from_str(p).ok()).unwrap_or(Value::Null),
            differences: d
                .property_differences()
                .iter()
                .map(|p| Difference {
                    path: p.property_path().unwrap_or_default().to_string(),
                    expected: p.expected_value().unwrap_or_default().to_string(),
                    actual: p.actual_value().unwrap_or_default().to_string(),
                    kind: p.difference_type().map(|t| t.as_str()).unwrap_or_default().to_string(),
                })
                .collect(),
        })
        .collect())
}

/// A security-group rule as a template writes it (`{"IpProtocol": "tcp", "FromPort": 22,
/// "ToPort": 22, "CidrIp": "203.0.113.0/24"}`) as the EC2 API takes it; `None` for a rule
/// without a protocol or a peer.
pub fn ip_permission(rule: &Value) -> Option<IpPermission> {
    let text = |key: &str| rule.get(key).and_then(|v| v.as_str().map(str::to_string).or_else(|| Some(v.to_string())));
    let port = |key: &str| {
        rule.get(key).and_then(|v| v.as_i64().or_else(|| v.as_str().and_then(|s| s.parse().ok()))).map(|p| p as i32)
    };
    let protocol = text("IpProtocol")?;
    let description = rule.get("Description").and_then(Value::as_str).map(str::to_string);
    let mut permission = IpPermission::builder().ip_protocol(&protocol);
    if protocol != "-1" {
        permission = permission.set_from_port(port("FromPort")).set_to_port(port("ToPort"));
    }
    let peer = |key: &str| rule.get(key).and_then(Value::as_str).filter(|s| !s.is_empty());
    if let Some(cidr) = peer("CidrIp") {
        permission = permission.ip_ranges(IpRange::builder().cidr_ip(cidr).set_description(description).build());
    } else if let Some(cidr) = peer("CidrIpv6") {
        permission = permission.ipv6_ranges(Ipv6Range::builder().cidr_ipv6(cidr).set_description(description).build());
    } else if let Some(group) = peer("SourceSecurityGroupId").or_else(|| peer("DestinationSecurityGroupId")) {
        permission = permission
            .user_id_group_pairs(UserIdGroupPair::builder().group_id(group).set_description(description).build());
    } else if let Some(list) = peer("SourcePrefixListId").or_else(|| peer("DestinationPrefixListId")) {
        permission = permission
            .prefix_list_ids(PrefixListId::builder().prefix_list_id(list).set_description(description).build());
    } else {
        return None;
    }
    Some(permission.build())
}

/// Revoke (`authorize == false`) or authorise again a rule of group `group`: ingress, or egress
/// with `egress`.
pub async fn set_rule(
    aws: &AccountClients,
    group: &str,
    permission: IpPermission,
    egress: bool,
    authorize: bool,
) -> Result<(), AwsError> {
    let done = match (egress, authorize) {
        (false, false) => aws
            .ec2
            .revoke_security_group_ingress()
            .group_id(group)
            .ip_permissions(permission)
            .send()
            .await
            .map(drop)
            .map_err(|e| api_error("EC2", "RevokeSecurityGroupIngress", e)),
        (false, true) => aws
            .ec2
            .authorize_security_group_ingress()
            .group_id(group)
            .ip_permissions(permission)
            .send()
            .await
            .map(drop)
            .map_err(|e| api_error("EC2", "AuthorizeSecurityGroupIngress", e)),
        (true, false) => aws
            .ec2
            .revoke_security_group_egress()
            .group_id(group)
            .ip_permissions(permission)
            .send()
            .await
            .map(drop)
            .map_err(|e| api_error("EC2", "RevokeSecurityGroupEgress", e)),
        (true, true) => aws
            .ec2
            .authorize_security_group_egress()
            .group_id(group)
            .ip_permissions(permission)
            .send()
            .await
            .map(drop)
            .map_err(|e| api_error("EC2", "AuthorizeSecurityGroupEgress", e)),
    };
    match done {
        // Already as wanted (another remediation, or the person who changed it undid it).
        Err(e) if matches!(e.code(), "InvalidPermission.Duplicate" | "InvalidPermission.NotFound") => Ok(()),
        other => other,
    }
}

/// The route targets of `AWS::EC2::Route` the operator's templates use.
const ROUTE_TARGETS: [&str; 4] = ["GatewayId", "NatGatewayId", "VpcPeeringConnectionId", "VpcEndpointId"];

/// Create the route an `AWS::EC2::Route`'s `expected` properties describe, or with `replace`
/// point the existing route at the target they name.
pub async fn put_route(aws: &AccountClients, expected: &Value, replace: bool) -> Result<(), String> {
    let field = |key: &str| expected.get(key).and_then(Value::as_str).map(str::to_string);
    let table = field("RouteTableId").ok_or("the template names no RouteTableId")?;
    let destination = field("DestinationCidrBlock").ok_or("the route has no DestinationCidrBlock")?;
    let Some((target, id)) = ROUTE_TARGETS.iter().find_map(|k| field(k).map(|v| (*k, v))) else {
        return Err(format!("the route's target is none of {}", ROUTE_TARGETS.join(", ")));
    };
    macro_rules! send {
        ($call:expr, $op:literal) => {{
            let call = $call.route_table_id(&table).destination_cidr_block(&destination);
            let call = match target {
                "GatewayId" => call.gateway_id(&id),
                "NatGatewayId" => call.nat_gateway_id(&id),
                "VpcPeeringConnectionId" => call.vpc_peering_connection_id(&id),
                _ => call.vpc_endpoint_id(&id),
            };
            call.send().await.map(drop).map_err(|e| api_error("EC2", $op, e).to_string())
        }};
    }
    if replace { send!(aws.ec2.replace_route(), "ReplaceRoute") } else { send!(aws.ec2.create_route(), "CreateRoute") }
}

/// Set Auto Scaling group `name`'s sizes back (`UpdateAutoScalingGroup`); `None` leaves one as
/// it is.
pub async fn set_group_sizes(
    aws: &AccountClients,
    name: &str,
    min: Option<i32>,
    max: Option<i32>,
    desired: Option<i32>,
) -> Result<(), AwsError> {
    aws.autoscaling
        .update_auto_scaling_group()
        .auto_scaling_group_name(name)
        .set_min_size(min)
        .set_max_size(max)
        .set_desired_capacity(desired)
        .send()
        .await
        .map(drop)
        .map_err(|e| api_error("AutoScaling", "UpdateAutoScalingGroup", e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_template_rule_becomes_the_permission_the_api_takes() {
        let p =
            ip_permission(&json!({"IpProtocol": "tcp", "FromPort": 22, "ToPort": "22", "CidrIp": "203.0.113.0/24"}))
                .expect("a rule");
        assert_eq!((p.ip_protocol(), p.from_port(), p.to_port()), (Some("tcp"), Some(22), Some(22)));
        assert_eq!(p.ip_ranges()[0].cidr_ip(), Some("203.0.113.0/24"));

        let p = ip_permission(&json!({"IpProtocol": "-1", "SourceSecurityGroupId": "sg-0b", "Description": "peers"}))
            .expect("a rule");
        assert_eq!((p.from_port(), p.to_port()), (None, None), "no ports for all protocols");
        assert_eq!(p.user_id_group_pairs()[0].group_id(), Some("sg-0b"));
        assert_eq!(p.user_id_group_pairs()[0].description(), Some("peers"));

        assert_eq!(ip_permission(&json!({"IpProtocol": "tcp", "FromPort": 1, "ToPort": 1})), None, "no peer");
        assert_eq!(ip_permission(&json!({"CidrIp": "10.0.0.0/8"})), None, "no protocol");
    }
}

//! TCCPI, `cluster-<id>-tccpi`, management-cluster account (reference §5.3).
//!
//! One IAM role, `<id>-vpc-peer-access`, that the tenant account may assume and whose only right
//! is to accept VPC peering connections. The TCCP stack passes its ARN as `PeerRoleArn`, which
//! lets CloudFormation in the tenant account accept the peering on the management side.
//! Upstream creates this stack once and never updates it.

use serde_json::json;

use super::Common;
use crate::cfn::{self, Resource, Template};
use crate::names;

/// Logical ID of the peer-access role.
pub const PEER_ROLE: &str = "PeerRole";

/// Inputs of the TCCPI template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Params {
    /// Cluster-wide inputs.
    pub common: Common,
    /// The tenant account allowed to assume the role.
    pub tenant_account_id: String,
}

/// Renders the TCCPI template.
pub fn render(p: &Params) -> Template {
    let c = &p.common;
    let role_name = names::peer_access_role(&c.cluster_id);
    let mut t = Template::new(format!("Tenant cluster {} VPC peering access role (tccpi).", c.cluster_id));
    t.add(
        PEER_ROLE,
        Resource::new(
            "AWS::IAM::Role",
            json!({
                "RoleName": role_name,
                "AssumeRolePolicyDocument": cfn::policy_document(vec![json!({
                    "Effect": "Allow",
                    "Principal": { "AWS": format!("arn:{}:iam::{}:root", c.partition, p.tenant_account_id) },
                    "Action": "sts:AssumeRole",
                })]),
                "Policies": [{
                    "PolicyName": role_name,
                    "PolicyDocument": cfn::policy_document(vec![
                        // The management account's VPCs, and only peerings the tenant
                        // account requested.
                        cfn::allow(&["ec2:AcceptVpcPeeringConnection"], c.arn("ec2", "vpc/*")),
                        cfn::allow_if(
                            &["ec2:AcceptVpcPeeringConnection"],
                            c.arn("ec2", "vpc-peering-connection/*"),
                            json!({ "ArnLike": { "ec2:RequesterVpc": format!(
                                "arn:{}:ec2:{}:{}:vpc/*",
                                c.partition, c.region, p.tenant_account_id
                            ) } }),
                        ),
                    ]),
                }],
            }),
        ),
    );
    t.output("PeerRoleARN", cfn::get_att(PEER_ROLE, "Arn"), Some("ARN of the VPC peering access role"));
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stacks::testdata;

    #[test]
    fn renders_only_the_peer_access_role() {
        let t = render(&Params { common: testdata::common(), tenant_account_id: "123456789012".into() });
        assert_eq!(t.resources.len(), 1);
        let role = t.resource(PEER_ROLE).expect("role");
        assert_eq!(role.r#type, "AWS::IAM::Role");
        assert_eq!(role.properties["RoleName"], "al9qy-vpc-peer-access");
        assert_eq!(
            role.properties["AssumeRolePolicyDocument"]["Statement"][0]["Principal"]["AWS"],
            "arn:aws:iam::123456789012:root"
        );
        let statement = &role.properties["Policies"][0]["PolicyDocument"]["Statement"][0];
        assert_eq!(statement["Action"], json!(["ec2:AcceptVpcPeeringConnection"]));
        let peering = &role.properties["Policies"][0]["PolicyDocument"]["Statement"][1];
        assert_eq!(
            peering["Condition"]["ArnLike"]["ec2:RequesterVpc"], "arn:aws:ec2:eu-central-1:123456789012:vpc/*",
            "only peerings the tenant account requested"
        );
        assert_eq!(t.outputs["PeerRoleARN"].value, cfn::get_att(PEER_ROLE, "Arn"));
    }
}

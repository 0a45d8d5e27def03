//! `cluster-<id>-host-main`, management account: routes from the management VPC's route tables
//! to the cluster's private subnets through the peering (the node-pools [`tccpf`] routes, with
//! the same stable logical IDs), and the delegation of the cluster's zone
//! `<id>.k8s.<zone>` from the management account's zone by an `NS` record.
//!
//! The route tables are the ones `spec.aws.vpc.routeTableNames` names, looked up by their `Name`
//! tag; the name servers are those of the `guest-main` hosted zone, read through Route53 (the
//! template cannot read them across accounts).

use serde_json::json;

use crate::cfn::{Resource, Template};
use crate::stacks::{Common, CpRouteTable, tccpf};

/// Logical ID of the delegation record.
pub const DELEGATION: &str = "DelegationRecordSet";

/// The delegation of the cluster's zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delegation {
    /// The management account's hosted zone of `spec.aws.hostedZones.api.name`.
    pub parent_zone_id: String,
    /// The name servers of the cluster's public zone.
    pub name_servers: Vec<String>,
}

/// Inputs of the `host-main` template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Params {
    /// Cluster-wide inputs.
    pub common: Common,
    /// The peering `guest-main` created (`VPCPeeringConnectionID` output).
    pub peering_connection_id: String,
    /// The management VPC's route tables named by `spec.aws.vpc.routeTableNames`.
    pub route_tables: Vec<CpRouteTable>,
    /// The cluster's private subnets.
    pub private_subnets: Vec<tccpf::PrivateSubnet>,
    /// The delegation, when Route53 is managed.
    pub delegation: Option<Delegation>,
}

/// Renders the `host-main` template.
pub fn render(p: &Params) -> Template {
    let mut t = tccpf::render(&tccpf::Params {
        common: p.common.clone(),
        peering_connection_id: p.peering_connection_id.clone(),
        route_tables: p.route_tables.clone(),
        private_subnets: p.private_subnets.clone(),
    });
    t.description = format!(
        "Legacy cluster {} routes and DNS delegation in the management account (host-main).",
        p.common.cluster_id
    );
    if let (true, Some(d)) = (p.common.route53_enabled, &p.delegation)
        && !d.name_servers.is_empty()
    {
        t.resources.remove(tccpf::PLACEHOLDER);
        t.add(
            DELEGATION,
            Resource::new(
                "AWS::Route53::RecordSet",
                json!({
                    "HostedZoneId": d.parent_zone_id,
                    "Name": format!("{}.", p.common.tenant_domain()),
                    "Type": "NS",
                    "TTL": "300",
                    "ResourceRecords": d.name_servers,
                }),
            ),
        );
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stacks::testdata;

    fn params() -> Params {
        Params {
            common: testdata::common(),
            peering_connection_id: "pcx-0fedcba9".into(),
            route_tables: testdata::cp_route_tables(),
            private_subnets: vec![tccpf::PrivateSubnet { az: "eu-central-1b".into(), cidr: "10.11.0.0/19".into() }],
            delegation: Some(Delegation {
                parent_zone_id: "Z0MANAGEMENT".into(),
                name_servers: vec!["ns-1.awsdns-01.org.".into(), "ns-2.awsdns-02.net.".into()],
            }),
        }
    }

    #[test]
    fn routes_to_the_private_subnet_from_every_named_route_table_and_the_delegation() {
        let t = render(&params());
        assert_eq!(
            t.ids_of_type("AWS::EC2::Route"),
            ["PrivateRouteEuCentral1bRtb0aaa", "PrivateRouteEuCentral1bRtb0bbb"]
        );
        let route = &t.resources["PrivateRouteEuCentral1bRtb0bbb"].properties;
        assert_eq!(route["RouteTableId"], "rtb-0bbb");
        assert_eq!(route["DestinationCidrBlock"], "10.11.0.0/19");
        assert_eq!(route["VpcPeeringConnectionId"], "pcx-0fedcba9");
        let ns = &t.resources[DELEGATION].properties;
        assert_eq!(ns["Name"], "al9qy.k8s.gauss.eu-central-1.aws.gigantic.io.");
        assert_eq!(ns["Type"], "NS");
        assert_eq!(ns["HostedZoneId"], "Z0MANAGEMENT");
        assert_eq!(ns["ResourceRecords"][1], "ns-2.awsdns-02.net.");
        assert!(t.resource(tccpf::PLACEHOLDER).is_none());
    }

    #[test]
    fn without_route53_or_route_tables_the_stack_stays_valid() {
        let mut p = params();
        p.common.route53_enabled = false;
        p.route_tables.clear();
        let t = render(&p);
        assert!(t.resource(DELEGATION).is_none());
        assert!(t.resource(tccpf::PLACEHOLDER).is_some(), "a template needs one resource");
        p.common.route53_enabled = true;
        let t = render(&p);
        assert!(t.resource(DELEGATION).is_some());
        assert!(t.resource(tccpf::PLACEHOLDER).is_none());
    }
}

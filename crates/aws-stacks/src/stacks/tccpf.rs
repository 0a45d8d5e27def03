//! TCCPF, `cluster-<id>-tccpf`, management-cluster account (reference §5.5).
//!
//! Routes from every management-cluster route table to every TCCP private subnet through the
//! VPC peering, so the management cluster reaches the tenant's masters and etcd.
//!
//! Upstream updates this stack in two phases (first without routes, then with them) because its
//! route logical IDs were positional (`PrivateRoute<i>`) and CloudFormation could not re-order
//! them when AZs changed. Here a route's logical ID is derived from the AZ and the management
//! route table ID, so it is stable when AZs are added; [`render_without_routes`] still provides
//! the first phase for callers that keep the upstream update sequence. The Route53 delegation
//! into the management cluster's zone (bridge zone) is out of scope.

use serde_json::json;

use super::{Common, CpRouteTable, add_peering_routes, version_outputs};
use crate::cfn::{Resource, Template};
use crate::names;

/// Logical ID of the placeholder resource of a template without routes: CloudFormation requires
/// at least one resource, and a wait-condition handle creates nothing billable.
pub const PLACEHOLDER: &str = "NoRoutesPlaceholder";

/// A TCCP private subnet to route to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrivateSubnet {
    /// The AZ name.
    pub az: String,
    /// The subnet CIDR, a `/27` of the cluster CIDR.
    pub cidr: String,
}

/// Inputs of the TCCPF template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Params {
    /// Cluster-wide inputs.
    pub common: Common,
    /// The peering created by TCCP (`VPCPeeringConnectionID` output).
    pub peering_connection_id: String,
    /// The management VPC's route tables.
    pub route_tables: Vec<CpRouteTable>,
    /// The TCCP private subnets.
    pub private_subnets: Vec<PrivateSubnet>,
}

/// Logical ID of the route to `az`'s private subnet in `route_table`.
pub fn route_id(az: &str, route_table: &CpRouteTable) -> String {
    names::logical_id(&["PrivateRoute", az, &route_table.id])
}

/// Renders the full TCCPF template.
pub fn render(p: &Params) -> Template {
    let mut t = base(p);
    let subnets = p.private_subnets.iter().map(|s| (s.az.as_str(), s.cidr.as_str()));
    add_peering_routes(&mut t, subnets, &p.route_tables, &p.peering_connection_id, route_id);
    t
}

/// Renders the first phase of the two-phase update: the same stack without any route.
pub fn render_without_routes(p: &Params) -> Template {
    let mut t = base(p);
    add_placeholder(&mut t);
    t
}

fn base(p: &Params) -> Template {
    let mut t =
        Template::new(format!("Tenant cluster {} routes from the management VPC (tccpf).", p.common.cluster_id));
    version_outputs(&mut t, &p.common);
    t
}

pub(super) fn add_placeholder(t: &mut Template) {
    t.add(PLACEHOLDER, Resource::new("AWS::CloudFormation::WaitConditionHandle", json!({})));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stacks::testdata;

    fn params() -> Params {
        Params {
            common: testdata::common(),
            peering_connection_id: "pcx-0123".into(),
            route_tables: testdata::cp_route_tables(),
            private_subnets: vec![
                PrivateSubnet { az: "eu-central-1a".into(), cidr: "10.1.0.32/27".into() },
                PrivateSubnet { az: "eu-central-1b".into(), cidr: "10.1.0.96/27".into() },
            ],
        }
    }

    #[test]
    fn one_route_per_route_table_and_private_subnet() {
        let t = render(&params());
        assert_eq!(
            t.ids_of_type("AWS::EC2::Route"),
            vec![
                "PrivateRouteEuCentral1aRtb0aaa",
                "PrivateRouteEuCentral1aRtb0bbb",
                "PrivateRouteEuCentral1bRtb0aaa",
                "PrivateRouteEuCentral1bRtb0bbb",
            ]
        );
        let r = &t.resources["PrivateRouteEuCentral1bRtb0aaa"].properties;
        assert_eq!(r["RouteTableId"], "rtb-0aaa");
        assert_eq!(r["DestinationCidrBlock"], "10.1.0.96/27", "§14.2: second AZ's private /27");
        assert_eq!(r["VpcPeeringConnectionId"], "pcx-0123");
        assert!(t.resource(PLACEHOLDER).is_none());
        assert_eq!(t.outputs["OperatorVersion"].value, "16.1.1");
    }

    #[test]
    fn adding_an_az_keeps_existing_route_ids() {
        let before = render(&params());
        let mut p = params();
        p.private_subnets.insert(0, PrivateSubnet { az: "eu-central-1c".into(), cidr: "10.1.0.160/27".into() });
        let after = render(&p);
        for id in before.ids_of_type("AWS::EC2::Route") {
            assert_eq!(before.resources[id], after.resources[id], "{id} must be untouched");
        }
        assert_eq!(after.ids_of_type("AWS::EC2::Route").len(), 6);
    }

    #[test]
    fn first_phase_has_no_routes_but_stays_a_valid_template() {
        let t = render_without_routes(&params());
        assert!(t.ids_of_type("AWS::EC2::Route").is_empty());
        assert_eq!(t.resources.len(), 1);
        assert!(t.resource(PLACEHOLDER).is_some());
        let mut empty = params();
        empty.route_tables.clear();
        assert!(render(&empty).resource(PLACEHOLDER).is_some());
    }
}

//! TCNPF, `cluster-<id>-tcnpf-<md>`, management-cluster account (reference §5.8).
//!
//! Routes from every management-cluster route table to every private subnet of one node pool
//! through the VPC peering. Created once and never updated, deleted with the pool. Logical IDs
//! are `VPCPeeringRoute-<az>-<route table>` sanitised; upstream used the route table's `Name`
//! tag, which need not be unique, so the route table ID is used instead.

use super::{Common, CpRouteTable, add_peering_routes, version_outputs};
use crate::cfn::Template;
use crate::names;

/// One private subnet of the pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolSubnet {
    /// The AZ name.
    pub az: String,
    /// The subnet CIDR, a split of the pool CIDR.
    pub cidr: String,
}

/// Inputs of the TCNPF template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Params {
    /// Cluster-wide inputs.
    pub common: Common,
    /// The node pool (machine deployment) ID.
    pub node_pool_id: String,
    /// The peering created by TCCP.
    pub peering_connection_id: String,
    /// The management VPC's route tables.
    pub route_tables: Vec<CpRouteTable>,
    /// The pool's private subnets.
    pub subnets: Vec<PoolSubnet>,
}

/// Logical ID of the route to `az`'s pool subnet in `route_table`.
pub fn route_id(az: &str, route_table: &CpRouteTable) -> String {
    names::logical_id(&["VPCPeeringRoute", az, &route_table.id])
}

/// Renders the TCNPF template.
pub fn render(p: &Params) -> Template {
    let mut t = Template::new(format!(
        "Tenant cluster {} node pool {} routes from the management VPC (tcnpf).",
        p.common.cluster_id, p.node_pool_id
    ));
    // A pool always has at least one zone; the placeholder only keeps a degenerate input valid.
    let subnets = p.subnets.iter().map(|s| (s.az.as_str(), s.cidr.as_str()));
    add_peering_routes(&mut t, subnets, &p.route_tables, &p.peering_connection_id, route_id);
    version_outputs(&mut t, &p.common);
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stacks::testdata;

    #[test]
    fn routes_the_pool_subnets_of_section_14_2() {
        let t = render(&Params {
            common: testdata::common(),
            node_pool_id: "g3j50".into(),
            peering_connection_id: "pcx-0123".into(),
            route_tables: testdata::cp_route_tables(),
            subnets: vec![
                PoolSubnet { az: "eu-central-1a".into(), cidr: "10.1.1.0/25".into() },
                PoolSubnet { az: "eu-central-1b".into(), cidr: "10.1.1.128/25".into() },
            ],
        });
        assert_eq!(t.ids_of_type("AWS::EC2::Route").len(), 4);
        let r = &t.resources["VPCPeeringRouteEuCentral1bRtb0bbb"].properties;
        assert_eq!(r["RouteTableId"], "rtb-0bbb");
        assert_eq!(r["DestinationCidrBlock"], "10.1.1.128/25");
        assert_eq!(r["VpcPeeringConnectionId"], "pcx-0123");
        assert!(t.description.contains("g3j50"));
    }
}

//! `cluster-<id>-host-setup`, management account: the role the cluster's account assumes to
//! accept the VPC peering. It is the node-pools [`tccpi`] role, unchanged; only the description
//! differs, and, like TCCPI, the stack is created once and never updated.

use crate::cfn::Template;
use crate::stacks::tccpi;

pub use crate::stacks::tccpi::{PEER_ROLE, Params};

/// Renders the `host-setup` template.
pub fn render(p: &Params) -> Template {
    let mut t = tccpi::render(p);
    t.description = format!("Legacy cluster {} VPC peering access role (host-setup).", p.common.cluster_id);
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stacks::testdata;

    #[test]
    fn the_peer_role_of_the_node_pools_stacks() {
        let p = Params { common: testdata::common(), tenant_account_id: "210987654321".into() };
        let t = render(&p);
        assert_eq!(t.resources, tccpi::render(&p).resources);
        assert_eq!(t.resources[PEER_ROLE].properties["RoleName"], "al9qy-vpc-peer-access");
        assert!(t.description.contains("host-setup"));
        assert!(t.outputs.contains_key("PeerRoleARN"));
    }
}

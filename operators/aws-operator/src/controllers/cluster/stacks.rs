//! Step 4, `stacks`: TCCPI and TCCPF in the management account, TCCP in the tenant account,
//! from the cluster CIDR, the zones of the control plane and every node pool, and the management
//! VPC.

use std::sync::Arc;

use apis::aws::AWSCluster;
use aws_stacks::ipam::{self, Ipv4Net};
use aws_stacks::names::{self, StackKind};
use aws_stacks::stacks::{tccp, tccpf, tccpi};
use kube::ResourceExt;
use operatorkit::{Outcome, Resource, ResourceError, resource};

use super::ClusterState;
use crate::aws::AccountClients;
use crate::context::Shared;
use crate::controllers;
use crate::stack_ops::{DesiredStack, Gate, Progress, UpdateWhen};

/// The desired AZs of TCCP: the control plane's, every node pool's, and those already deployed
/// (the set never shrinks, reference §13 item 6).
async fn desired_azs(shared: &Shared, obj: &AWSCluster, deployed: &[String]) -> Result<Vec<String>, ResourceError> {
    let ns = obj.namespace().unwrap_or_default();
    let id = obj.name_any();
    let control_planes = controllers::lookup::control_planes(shared, &ns, &id).await?;
    let node_pools = controllers::lookup::node_pools(shared, &ns, &id).await?;
    Ok(crate::quota::cluster_zones(&obj.spec.provider.region, deployed, &control_planes, &node_pools))
}

/// The management VPC and its route tables, memoised per region.
pub async fn control_plane_network(
    shared: &Shared,
    cp: &AccountClients,
) -> Result<(String, String, Vec<(String, String)>), ResourceError> {
    if let Some(n) = shared.memo.lock().control_plane_network.get(&cp.cache_key()) {
        return Ok(n.clone());
    }
    let Some((vpc, cidr)) = crate::aws::ec2::control_plane_vpc(cp, &shared.config.installation).await? else {
        return Err(ResourceError::msg(
            "ControlPlaneVPCNotFound",
            format!(
                "no VPC tagged Name={} in the management account {} ({}): check --installation",
                shared.config.installation, cp.account_id, cp.region
            ),
        ));
    };
    let tables =
        crate::aws::ec2::control_plane_route_tables(cp, &vpc, &shared.config.control_plane_route_tables).await?;
    let n = (vpc, cidr, tables);
    shared.memo.lock().control_plane_network.insert(cp.cache_key(), n.clone());
    Ok(n)
}

/// How long the management cluster's NAT addresses are used before they are looked up again.
const MANAGEMENT_NAT_TTL: std::time::Duration = std::time::Duration::from_secs(600);

/// The management cluster's NAT addresses (`/32`s), looked up only when the public allowlist is
/// on, and remembered for [`MANAGEMENT_NAT_TTL`] per management account when some were found.
async fn management_nat(shared: &Shared, cp: &AccountClients) -> Result<Vec<String>, ResourceError> {
    if shared.config.api_allowlist.public.is_none() {
        return Ok(Vec::new());
    }
    if let Some((at, addresses)) = shared.memo.lock().management_nat.get(&cp.cache_key())
        && at.elapsed() < MANAGEMENT_NAT_TTL
    {
        return Ok(addresses.clone());
    }
    let addresses = crate::aws::ec2::management_nat_addresses(cp, &shared.config.installation).await?;
    if !addresses.is_empty() {
        shared.memo.lock().management_nat.insert(cp.cache_key(), (std::time::Instant::now(), addresses.clone()));
    }
    Ok(addresses)
}

/// The allowlists TCCP gets: the configured ones, the management cluster's NAT addresses added to
/// an enabled public list. With no management NAT address the public list is dropped, leaving
/// the public API open as without an allowlist: narrowed without them, the API would refuse the
/// management cluster, which reaches it from those addresses. `None` in the second place says
/// the public list was dropped so.
pub fn allowlist(
    configured: &tccp::ApiWhitelist,
    management_nat: &[String],
) -> (tccp::ApiWhitelist, Option<&'static str>) {
    let mut effective = configured.clone();
    let mut dropped = None;
    if let Some(public) = &mut effective.public {
        if management_nat.is_empty() {
            effective.public = None;
            dropped = Some(
                "the public API allowlist is on, but no Elastic IP of the management account is tagged with the installation",
            );
        } else {
            public.extend(management_nat.iter().cloned());
            public.sort();
            public.dedup();
        }
    }
    (effective, dropped)
}

/// The TCCPI, TCCP and TCCPF stacks.
#[derive(Debug)]
pub struct Stacks;

impl Resource<AWSCluster, ClusterState> for Stacks {
    fn name(&self) -> &str {
        "stacks"
    }

    async fn ensure_created(&self, state: &mut ClusterState, obj: &AWSCluster) -> resource::Result<Outcome> {
        let shared = state.shared.clone();
        let id = obj.name_any();
        let Some(cidr) = state.status.provider.network.cidr.clone() else {
            return state.wait(obj, "waiting for the cluster CIDR").await;
        };
        let (tenant, cp) = state.accounts()?;
        let (tenant, cp) = (Arc::new(tenant.clone()), Arc::new(cp.clone()));
        let Some(release) = state.release.clone() else {
            return Err(ResourceError::msg("Internal", "the Release was not resolved"));
        };
        // With the `Cluster`'s values where the AWSCluster leaves them unset (`crate::capi`).
        let effective = state.effective.clone().unwrap_or_else(|| obj.clone());
        let common = controllers::lookup::common(&shared.config, &effective, &release);
        let recorded = |name: &str| obj.status.as_ref().and_then(|s| s.stacks.iter().find(|e| e.name == name).cloned());
        let bucket = names::bucket(&tenant.account_id, &id);
        let entries = obj.status.as_ref().map(|s| s.stacks.clone()).unwrap_or_default();
        let gate = Gate::new(obj, obj, &entries, crate::approval::UpdateKind::Other);

        // TCCPI: the peering role in the management account; never updated.
        let name = names::stack_name(&id, StackKind::Tccpi, None);
        let template =
            tccpi::render(&tccpi::Params { common: common.clone(), tenant_account_id: tenant.account_id.clone() });
        let desired = DesiredStack {
            kind: StackKind::Tccpi,
            name: name.clone(),
            template,
            tags: aws_stacks::stacks::stack_tags(&common, StackKind::Tccpi, None),
            update: UpdateWhen::Never,
            canonical_hash: None,
        };
        let (progress, entry) =
            crate::stack_ops::ensure(&shared, &cp, obj, desired, None, recorded(&name).as_ref()).await?;
        state.stacks.push(entry);
        let Progress::Ready(tccpi_view) = progress else {
            return state.stack_not_ready(obj, &name, progress).await;
        };
        let Some(peer_role) = tccpi_view.outputs.get("PeerRoleARN").cloned() else {
            return Err(ResourceError::msg("MissingOutput", format!("stack {name} has no PeerRoleARN output")));
        };

        // TCCP: the tenant network.
        let name = names::stack_name(&id, StackKind::Tccp, None);
        let deployed: Vec<String> = recorded(&name).and(None::<Vec<String>>).unwrap_or_default();
        let observed = shared.stacks.get(&tenant.cache_key(), tenant.cfn.as_ref(), &name).await?;
        let deployed_azs: Vec<String> = observed
            .as_ref()
            .and_then(|v| v.outputs.get("AvailabilityZones"))
            .map(|s| s.split(',').filter(|a| !a.is_empty()).map(str::to_string).collect())
            .unwrap_or(deployed);
        let azs = desired_azs(&shared, obj, &deployed_azs).await?;
        if azs.is_empty() {
            return state.wait(obj, "waiting for an AWSControlPlane naming the availability zones").await;
        }
        let cluster_cidr: Ipv4Net = cidr
            .parse()
            .map_err(|e| ResourceError::msg("InvalidStatus", format!("status.provider.network.cidr {cidr}: {e}")))?;
        // The deployed layout is the anchor: a new zone takes a free block and no existing
        // subnet moves, whatever the zone's name sorts as.
        let deployed_layout = match &observed {
            Some(view) => tccp::deployed_layout(&view.outputs, cluster_cidr, None)
                .map_err(|e| ResourceError::msg("InvalidOutput", format!("stack {name}: {e}")))?,
            None => Vec::new(),
        };
        let layout = ipam::tccp_layout_preserving(cluster_cidr, None, &azs, &deployed_layout).map_err(|e| {
            ResourceError::msg("InvalidAvailabilityZones", format!("{}: {e}", controllers::status::describe(obj)))
                .permanent()
        })?;
        let (cp_vpc, cp_cidr, cp_tables) = control_plane_network(&shared, &cp).await?;
        let control_plane = tccp::ControlPlaneVpc {
            account_id: cp.account_id.clone(),
            vpc_id: cp_vpc,
            cidr: cp_cidr,
            peer_role_arn: peer_role,
        };
        let access_logs = tccp::access_logs(
            obj.annotations().get(apis::labels::AWS_LOAD_BALANCER_ACCESS_LOGS).map(String::as_str),
            &tenant.account_id,
            &id,
        );
        let nat = management_nat(&shared, &cp).await?;
        let (allowlist, dropped) = allowlist(&shared.config.api_allowlist, &nat);
        if let Some(why) = dropped {
            let key = format!("{}/{id}", obj.namespace().unwrap_or_default());
            if shared.memo.lock().management_nat_missing.insert(key) {
                let message = format!(
                    "{why} (giantswarm.io/installation={}, account {}): the public API stays open to everywhere until the management cluster's NAT Elastic IPs carry that tag",
                    shared.config.installation, cp.account_id
                );
                tracing::warn!(cluster = %id, "{message}");
                shared.warning(obj, "ManagementNATNotFound", message).await;
            }
        } else {
            shared.memo.lock().management_nat_missing.remove(&format!("{}/{id}", obj.namespace().unwrap_or_default()));
        }
        let params = tccp_params(&common, cluster_cidr, &layout, control_plane, allowlist, access_logs);
        let desired = DesiredStack {
            kind: StackKind::Tccp,
            name: name.clone(),
            template: tccp::render(&params),
            tags: aws_stacks::stacks::stack_tags(&common, StackKind::Tccp, None),
            update: UpdateWhen::Now,
            canonical_hash: None,
        };
        let (progress, entry) = crate::stack_ops::ensure_gated(
            &shared,
            &tenant,
            obj,
            desired,
            Some(&bucket),
            recorded(&name).as_ref(),
            Some(&gate),
        )
        .await?;
        state.stacks.push(entry);
        let Progress::Ready(view) = progress else {
            return state.stack_not_ready(obj, &name, progress).await;
        };
        let outputs = tccp::Outputs::from_outputs(&view.outputs, &azs)
            .map_err(|e| ResourceError::msg("MissingOutput", format!("stack {name}: {e}")))?;
        state.status.provider.network.vpc_id = Some(outputs.vpc_id.clone());

        // TCCPF: routes from the management VPC into the tenant's private subnets.
        let name = names::stack_name(&id, StackKind::Tccpf, None);
        let params = tccpf::Params {
            common: common.clone(),
            peering_connection_id: outputs.vpc_peering_connection_id.clone(),
            route_tables: cp_tables
                .iter()
                .map(|(id, name)| aws_stacks::stacks::CpRouteTable { id: id.clone(), name: name.clone() })
                .collect(),
            private_subnets: layout
                .iter()
                .map(|a| tccpf::PrivateSubnet { az: a.name.clone(), cidr: a.private.to_string() })
                .collect(),
        };
        state.tccp = Some(outputs);
        let desired = DesiredStack {
            kind: StackKind::Tccpf,
            name: name.clone(),
            template: tccpf::render(&params),
            tags: aws_stacks::stacks::stack_tags(&common, StackKind::Tccpf, None),
            update: UpdateWhen::Now,
            canonical_hash: None,
        };
        let (progress, entry) =
            crate::stack_ops::ensure_gated(&shared, &cp, obj, desired, None, recorded(&name).as_ref(), Some(&gate))
                .await?;
        state.stacks.push(entry);
        if !matches!(progress, Progress::Ready(_)) {
            return state.stack_not_ready(obj, &name, progress).await;
        }
        Ok(Outcome::proceed())
    }

    async fn ensure_deleted(&self, _: &mut ClusterState, _: &AWSCluster) -> resource::Result<Outcome> {
        Ok(Outcome::proceed())
    }
}

/// TCCP's parameters from the cluster CIDR and its zone layout (`ipam::tccp_layout`), for the
/// controller and `aws-operator render` alike. No AWS-CNI pod block: releases from 19 on run
/// Cilium.
pub fn tccp_params(
    common: &aws_stacks::stacks::Common,
    cluster_cidr: Ipv4Net,
    layout: &[ipam::TccpAz],
    control_plane: tccp::ControlPlaneVpc,
    whitelist: tccp::ApiWhitelist,
    access_logs: Option<String>,
) -> tccp::Params {
    tccp::Params {
        common: common.clone(),
        vpc_cidr: cluster_cidr.to_string(),
        pod_cidr: None,
        azs: layout
            .iter()
            .map(|a| tccp::TccpAz {
                name: a.name.clone(),
                public_cidr: a.public.to_string(),
                private_cidr: a.private.to_string(),
                aws_cni_cidr: a.aws_cni.map(|c| c.to_string()),
            })
            .collect(),
        control_plane,
        whitelist,
        access_logs,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_management_nat_addresses_join_an_enabled_public_allowlist_and_none_found_leaves_it_open() {
        let configured = tccp::ApiWhitelist {
            public: Some(vec!["203.0.113.0/24".into()]),
            private: Some(vec!["192.0.2.0/24".into()]),
        };
        let nat = ["198.51.100.9/32".to_string(), "198.51.100.1/32".to_string()];
        let (effective, dropped) = allowlist(&configured, &nat);
        assert_eq!(dropped, None);
        assert_eq!(
            effective.public.as_deref(),
            Some(&["198.51.100.1/32".to_string(), "198.51.100.9/32".into(), "203.0.113.0/24".into()][..])
        );
        assert_eq!(effective.private, configured.private, "the internal API takes no NAT address");
        // Narrowed without the management cluster's addresses, the API would refuse it.
        let (effective, dropped) = allowlist(&configured, &[]);
        assert_eq!(effective.public, None);
        assert!(dropped.is_some_and(|why| why.contains("no Elastic IP")));
        assert_eq!(effective.private, configured.private);
        // Off: nothing changes, whatever the addresses.
        assert_eq!(allowlist(&tccp::ApiWhitelist::default(), &nat), (tccp::ApiWhitelist::default(), None));
    }
}

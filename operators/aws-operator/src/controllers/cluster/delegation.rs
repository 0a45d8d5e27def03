//! Step 5, `delegation`: the cluster zone's NS record in the installation's intermediate zone,
//! and its removal at teardown.

use apis::aws::AWSCluster;
use aws_stacks::names;
use kube::ResourceExt;
use operatorkit::{Outcome, Resource, ResourceError, resource};

use super::ClusterState;
use crate::aws::AccountClients;
use crate::context::{Delegated, Shared};

/// Delegates the cluster's zone `<id>.k8s.<domain>` from the installation's intermediate zone
/// `k8s.<domain>` in the management account: an NS record naming the zone's name servers, TTL
/// 300, upserted through the management account's credentials (upstream's `bridgezone`). An
/// installation without an intermediate zone is skipped, with one event per process and
/// cluster, and looked at again after the stack listing's expiry ([`Shared::intermediate_zone`]:
/// one lookup per installation, not per cluster). Done once per process and cluster zone; the
/// teardown removes the record.
#[derive(Debug)]
pub struct Delegation;

impl Resource<AWSCluster, ClusterState> for Delegation {
    fn name(&self) -> &str {
        "delegation"
    }

    async fn ensure_created(&self, state: &mut ClusterState, obj: &AWSCluster) -> resource::Result<Outcome> {
        let shared = state.shared.clone();
        let Some(zone_id) = state.tccp.as_ref().and_then(|o| o.hosted_zone_id.clone()) else {
            // Route53 is off, or TCCP is not there yet.
            return Ok(Outcome::proceed());
        };
        let (tenant, cp) = state.accounts()?;
        let id = obj.name_any();
        let memo_key = format!("{}/{id}", cp.cache_key());
        let (settled, skipped_before) = match shared.memo.lock().delegations.get(&memo_key) {
            Some(Delegated::Zone(z)) => (*z == zone_id, false),
            Some(Delegated::Skipped(at)) => (at.elapsed() < shared.config.stack_listing_ttl, true),
            None => (false, false),
        };
        if settled {
            return Ok(Outcome::proceed());
        }
        let (name, parent) = delegation_zones(obj);
        let Some(parent_id) = shared.intermediate_zone(cp, &parent).await? else {
            shared.memo.lock().delegations.insert(memo_key, Delegated::Skipped(std::time::Instant::now()));
            if skipped_before {
                // Announced once per process and cluster: a repeat would be an event write per
                // period for every cluster of such an installation.
                return Ok(Outcome::proceed());
            }
            shared
                .event(
                    obj,
                    "DelegationSkipped",
                    format!(
                        "the management account {} has no hosted zone {parent}: zone {name} is not delegated",
                        cp.account_id
                    ),
                )
                .await;
            return Ok(Outcome::proceed());
        };
        let servers = shared.zone_name_servers(tenant, &zone_id).await?;
        if servers.is_empty() {
            return Err(ResourceError::msg(
                "DelegationFailed",
                format!("hosted zone {zone_id} ({name}) has no name servers to delegate to"),
            ));
        }
        let sorted = |mut v: Vec<String>| {
            v.iter_mut().for_each(|s| *s = s.trim_end_matches('.').to_string());
            v.sort();
            v
        };
        let current = crate::aws::route53::ns_record(cp, &parent_id, &name).await?;
        if current.map(sorted) != Some(sorted(servers.clone())) {
            crate::aws::route53::change_ns_record(cp, &parent_id, &name, &servers, false).await?;
            shared.event(obj, "ZoneDelegated", format!("zone {name} delegated from {parent}")).await;
        }
        shared.memo.lock().delegations.insert(memo_key, Delegated::Zone(zone_id));
        Ok(Outcome::proceed())
    }

    async fn ensure_deleted(&self, _: &mut ClusterState, _: &AWSCluster) -> resource::Result<Outcome> {
        // The teardown removes the record, after the node pools and the control plane.
        Ok(Outcome::proceed())
    }
}

/// The cluster's zone `<id>.k8s.<domain>` and the intermediate zone `k8s.<domain>` it is
/// delegated from.
fn delegation_zones(obj: &AWSCluster) -> (String, String) {
    let domain = &obj.spec.cluster.dns.domain;
    (names::tenant_base_domain(&obj.name_any(), domain), format!("k8s.{domain}"))
}

/// Remove the cluster zone's NS record from the intermediate zone, if both exist.
pub(super) async fn remove_delegation(
    shared: &Shared,
    cp: &AccountClients,
    obj: &AWSCluster,
) -> Result<(), ResourceError> {
    let (name, parent) = delegation_zones(obj);
    let Some(parent_id) = crate::aws::route53::hosted_zone_by_name(cp, &parent).await? else {
        return Ok(());
    };
    if let Some(values) = crate::aws::route53::ns_record(cp, &parent_id, &name).await? {
        crate::aws::route53::change_ns_record(cp, &parent_id, &name, &values, true).await?;
        shared.event(obj, "DelegationRemoved", format!("zone {name} is no longer delegated from {parent}")).await;
    }
    shared.memo.lock().delegations.remove(&format!("{}/{}", cp.cache_key(), obj.name_any()));
    Ok(())
}

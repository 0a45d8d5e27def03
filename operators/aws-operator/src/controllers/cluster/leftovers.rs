//! Teardown step before TCCP: delete what the workload cluster created in its tenant account
//! outside CloudFormation (load balancers and their target groups and security groups,
//! unattached interfaces, volumes, records in its zones, extra peerings of its VPC), which would
//! otherwise make the deletion of TCCP fail (reference §4.1 steps 27–33, §12).
//!
//! What counts as a leftover is decided by [`aws_stacks::leftovers::select`]; this module lists,
//! deletes and reports. Deletions that AWS refuses because something still uses the resource
//! (`DependencyViolation`, `ResourceInUse`, …, see [`aws_stacks::leftovers::in_use`]) are tried
//! again on the next reconcile and named in the cluster's `Ready` condition meanwhile; every
//! deletion emits a Normal event `LeftoverDeleted` naming the resource. TCCP is deleted only
//! after a pass that finds nothing left.

use std::collections::HashMap;

use apis::aws::AWSCluster;
use aws_sdk_route53::types::ResourceRecordSet;
use aws_stacks::leftovers::{self, Cluster, Found, RecordSet, Zone};
use aws_stacks::names;
use aws_stacks::state::StackView;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::ResourceExt;
use kube::runtime::events::EventType;
use operatorkit::ResourceError;

use crate::aws::{AccountClients, AwsError};
use crate::context::Shared;

/// What a pass found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Cleanup {
    /// Nothing is left: TCCP can be deleted.
    Clean,
    /// Leftovers were deleted, or are in use and wait: why the teardown waits, for the status.
    Pending {
        /// The `Ready` reason: `DeletingLeftovers`, or `LeftoversInUse` when a deletion was
        /// refused.
        reason: &'static str,
        /// What was deleted and what waits.
        message: String,
    },
}

/// How many in-use resources the status names; the rest are counted.
const NAMED_IN_STATUS: usize = 5;

/// One pass: list, select, delete. `tccp` is the cluster's TCCP stack as last listed, whose
/// outputs name the VPC, the peering it owns and the zones; without it only volumes are looked
/// for (the VPC and zones went with the stack).
pub(super) async fn clean_up(
    shared: &Shared,
    tenant: &AccountClients,
    obj: &AWSCluster,
    tccp: Option<&StackView>,
) -> Result<Cleanup, ResourceError> {
    let recorded_vpc = obj.status.as_ref().and_then(|s| s.provider.network.vpc_id.clone());
    let domain = &obj.spec.cluster.dns.domain;
    clean_up_cluster(shared, tenant, obj, &obj.name_any(), domain, recorded_vpc, tccp, &[]).await
}

/// [`clean_up`] for cluster `id` under `<id>.k8s.<domain>` of either kind: `network` is the stack
/// holding its VPC (TCCP, or a legacy cluster's `guest-main`, which has the same outputs), and
/// `recorded_vpc` the VPC its status recorded, `stack_records` the records that stack holds
/// beyond TCCP's ([`leftovers::Cluster::stack_records`]).
#[allow(clippy::too_many_arguments)]
pub(crate) async fn clean_up_cluster<K>(
    shared: &Shared,
    tenant: &AccountClients,
    obj: &K,
    id: &str,
    domain: &str,
    recorded_vpc: Option<String>,
    network: Option<&StackView>,
    stack_records: &[(Zone, &'static str, &'static str)],
) -> Result<Cleanup, ResourceError>
where
    K: kube::Resource<DynamicType = ()>,
{
    let tccp = network;
    let id = id.to_string();
    let outputs = tccp.map(|v| &v.outputs);
    let output = |key: &str| outputs.and_then(|o| o.get(key)).filter(|v| !v.is_empty()).cloned();
    let vpc_id = tccp.and(output("VPCID").or(recorded_vpc));
    let cluster = Cluster {
        id: id.clone(),
        vpc_id: vpc_id.clone(),
        peering_id: output("VPCPeeringConnectionID"),
        domain: names::tenant_base_domain(&id, domain),
        stack_records: stack_records.to_vec(),
    };
    let zones: Vec<(Zone, String)> = [(Zone::Public, "HostedZoneID"), (Zone::Internal, "InternalHostedZoneID")]
        .into_iter()
        .filter_map(|(zone, key)| Some((zone, output(key)?)))
        .collect();

    let mut found = Found::default();
    if let Some(vpc) = &vpc_id {
        found.load_balancers = crate::aws::elb::load_balancers(tenant).await?;
        found.target_groups = crate::aws::elb::target_groups(tenant).await?;
        found.security_groups = crate::aws::ec2::security_groups(tenant, vpc).await?;
        found.network_interfaces = crate::aws::ec2::network_interfaces(tenant, vpc).await?;
        found.peerings = crate::aws::ec2::peerings(tenant, vpc).await?;
    }
    found.volumes = crate::aws::ec2::cluster_volumes(tenant, &id).await?;
    // The records as listed, to delete them exactly as they are.
    let mut listed: HashMap<RecordKey, (String, ResourceRecordSet)> = HashMap::new();
    for (zone, zone_id) in &zones {
        let records = match crate::aws::route53::record_sets(tenant, zone_id).await {
            Ok(r) => r,
            // The stack's deletion took the zone already.
            Err(e) if e.code() == "NoSuchHostedZone" => continue,
            Err(e) => return Err(e.into()),
        };
        for r in records {
            let set = RecordSet {
                zone: *zone,
                name: r.name().to_string(),
                record_type: r.r#type().as_str().to_string(),
                set_identifier: r.set_identifier().map(str::to_string),
            };
            listed.insert(key(&set), (zone_id.clone(), r));
            found.record_sets.push(set);
        }
    }

    let left = leftovers::select(&cluster, &found);
    if left.is_empty() {
        return Ok(Cleanup::Clean);
    }
    let mut pass = Pass { shared, obj, deleted: 0, in_use: Vec::new() };
    for lb in &left.load_balancers {
        let kind = if lb.v2 { "load balancer (v2)" } else { "classic load balancer" };
        let subject = Subject {
            service: "elasticloadbalancing",
            kind: "LoadBalancer",
            what: kind,
            name: &lb.name,
            detach: false,
        };
        pass.settle(subject, crate::aws::elb::delete_load_balancer(tenant, lb).await).await?;
    }
    for tg in &left.target_groups {
        let subject = Subject {
            service: "elasticloadbalancing",
            kind: "TargetGroup",
            what: "target group",
            name: &tg.name,
            detach: false,
        };
        pass.settle(subject, crate::aws::elb::delete_target_group(tenant, &tg.arn).await).await?;
    }
    for eni in &left.network_interfaces {
        let subject = Subject {
            service: "ec2",
            kind: "NetworkInterface",
            what: "network interface",
            name: &eni.id,
            detach: false,
        };
        pass.settle(subject, crate::aws::ec2::delete_network_interface(tenant, &eni.id).await).await?;
    }
    for sg in &left.security_groups {
        let name = format!("{} ({})", sg.id, sg.name);
        let subject =
            Subject { service: "ec2", kind: "SecurityGroup", what: "security group", name: &name, detach: false };
        pass.settle(subject, crate::aws::ec2::delete_security_group(tenant, &sg.id).await).await?;
    }
    for d in &left.detach {
        let name = format!("{} from instance {}{}", d.volume_id, d.instance_id, if d.force { " (forced)" } else { "" });
        let subject = Subject { service: "ec2", kind: "Volume", what: "volume", name: &name, detach: true };
        let detached = crate::aws::ec2::detach_volume(tenant, &d.volume_id, &d.instance_id, d.force).await;
        pass.settle(subject, detached).await?;
    }
    for volume in &left.volumes {
        let subject = Subject { service: "ec2", kind: "Volume", what: "volume", name: &volume.id, detach: false };
        pass.settle(subject, crate::aws::ec2::delete_volume(tenant, &volume.id).await).await?;
    }
    for set in &left.record_sets {
        let Some((zone_id, record)) = listed.get(&key(set)) else { continue };
        let name = format!("{} {} in zone {zone_id}", set.record_type, set.name.replace("\\052", "*"));
        let subject = Subject { service: "route53", kind: "RecordSet", what: "record", name: &name, detach: false };
        pass.settle(subject, crate::aws::route53::delete_record_set(tenant, zone_id, record).await).await?;
    }
    for peering in &left.peerings {
        let subject =
            Subject { service: "ec2", kind: "VpcPeeringConnection", what: "peering", name: &peering.id, detach: false };
        pass.settle(subject, crate::aws::ec2::delete_peering(tenant, &peering.id).await).await?;
    }
    Ok(pass.outcome())
}

/// What identifies a record set in the cluster's zones: zone, name, type, set identifier.
type RecordKey = (Zone, String, String, Option<String>);

fn key(set: &RecordSet) -> RecordKey {
    (set.zone, set.name.clone(), set.record_type.clone(), set.set_identifier.clone())
}

/// A leftover being deleted, for events and the status.
struct Subject<'a> {
    /// The AWS service, for the event's related object.
    service: &'static str,
    /// The resource kind, for the event's related object.
    kind: &'static str,
    /// How a person calls it.
    what: &'static str,
    /// Its name or id.
    name: &'a str,
    /// Detached, not deleted (a volume still attached to an instance).
    detach: bool,
}

/// What one pass did so far.
struct Pass<'a, K> {
    shared: &'a Shared,
    obj: &'a K,
    deleted: usize,
    in_use: Vec<String>,
}

impl<K: kube::Resource<DynamicType = ()>> Pass<'_, K> {
    /// Record the result of one deletion: an event when it is done, a note when the resource is
    /// in use, the error otherwise (the reconcile is retried with backoff).
    async fn settle(&mut self, subject: Subject<'_>, result: Result<(), AwsError>) -> Result<(), ResourceError> {
        match result {
            Ok(()) => {
                self.deleted += 1;
                let related = ObjectReference {
                    api_version: Some(format!("{}.amazonaws.com/v1", subject.service)),
                    kind: Some(subject.kind.to_string()),
                    name: Some(subject.name.to_string()),
                    ..ObjectReference::default()
                };
                let (verb, reason, action) = if subject.detach {
                    ("detached", "LeftoverDetached", "Detach")
                } else {
                    ("deleted", "LeftoverDeleted", "Delete")
                };
                let note = format!("{verb} {} {}, left by the cluster outside its stacks", subject.what, subject.name);
                self.shared.publish(self.obj, EventType::Normal, reason, action, Some(related), note).await;
                Ok(())
            }
            Err(e) if leftovers::already_gone(e.code()) => Ok(()),
            Err(AwsError::Api { code, message, .. }) if leftovers::in_use(&code) => {
                tracing::info!(cluster = %self.obj.name_any(), what = subject.what, name = subject.name, %code, "leftover in use; retried later");
                self.in_use.push(format!("{} {} ({code}: {message})", subject.what, subject.name));
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    }

    fn outcome(self) -> Cleanup {
        pending(self.deleted, &self.in_use)
    }
}

/// The outcome of a pass that deleted `deleted` resources and found `in_use` ones still in use
/// (at least one of the two): what the `Ready` condition says.
fn pending(deleted: usize, in_use: &[String]) -> Cleanup {
    if in_use.is_empty() {
        return Cleanup::Pending {
            reason: "DeletingLeftovers",
            message: format!(
                "deleted {deleted} resources the cluster left outside its stacks; looking again before deleting the stacks"
            ),
        };
    }
    let mut named = in_use.iter().take(NAMED_IN_STATUS).cloned().collect::<Vec<_>>().join("; ");
    if in_use.len() > NAMED_IN_STATUS {
        named.push_str(&format!("; and {} more", in_use.len() - NAMED_IN_STATUS));
    }
    Cleanup::Pending {
        reason: "LeftoversInUse",
        message: format!(
            "deleted {deleted} resources the cluster left outside its stacks; still in use, tried again: {named}"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_names_the_resources_in_use_and_counts_the_rest() {
        let in_use: Vec<String> =
            (1..=7).map(|n| format!("security group sg-{n} (DependencyViolation: in use)")).collect();
        let Cleanup::Pending { reason, message } = pending(3, &in_use) else { panic!("a pass with leftovers") };
        assert_eq!(reason, "LeftoversInUse");
        assert!(message.starts_with("deleted 3 resources"), "{message}");
        assert!(message.contains("sg-1 ") && message.contains("sg-5 ") && !message.contains("sg-6"), "{message}");
        assert!(message.ends_with("; and 2 more"), "{message}");

        let Cleanup::Pending { reason, message } = pending(2, &[]) else { panic!("a pass that deleted") };
        assert_eq!(reason, "DeletingLeftovers");
        assert!(message.starts_with("deleted 2 resources"), "{message}");
    }
}

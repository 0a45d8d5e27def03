//! What a workload cluster leaves behind in its tenant account outside CloudFormation, and which
//! of it the operator deletes before it deletes TCCP (reference §4.1 steps 27–33, §12 "Orphaned
//! resources blocking deletion").
//!
//! Inside the cluster, the Kubernetes cloud provider and its controllers create AWS resources
//! through their own APIs: a `Service` of type `LoadBalancer` becomes a classic or v2 load
//! balancer with its target groups and a security group, a `PersistentVolume` an EBS volume,
//! external-dns writes records into the cluster's zones, the AWS CNI leaves network interfaces,
//! and people peer the cluster's VPC with others. None of that belongs to a stack, and each of
//! it keeps TCCP from being deleted: a subnet with an interface in it, a VPC with a security
//! group or a peering, a zone with records cannot be deleted.
//!
//! The decision of what to delete is made here, from plain descriptions of what the edge found,
//! so that it can be tested without AWS. The rules, one per kind:
//!
//! * **Ownership.** Load balancers, target groups, security groups and volumes count only when
//!   tagged `kubernetes.io/cluster/<id>=owned`, the tag the cloud provider puts on what it
//!   creates for the cluster (`shared` means someone else owns it).
//! * **Not a stack's.** The stacks' own resources carry the same `owned` tag (stack tags are
//!   copied onto every resource, see [`crate::stacks::stack_tags`]), so anything tagged
//!   [`STACK`](crate::names::tags::STACK) or [`CLOUDFORMATION_STACK`] is left to its stack.
//! * **In the cluster's VPC.** Everything that lives in a VPC counts only in the cluster's one;
//!   without a known VPC, none of it is touched.
//! * **Interfaces** count when `available` (attached ones belong to something running) and not
//!   requester-managed (those belong to an AWS service, which deletes them itself; deleting them
//!   is refused). They need no tag: the AWS CNI's leftover interfaces carry none that names the
//!   cluster, and an unattached interface in a VPC about to be deleted serves nobody.
//! * **Volumes** count when `available`. One still attached (`in-use`) is first detached from
//!   its instance ([`Leftovers::detach`]): by then the cluster's masters and workers are gone,
//!   so the instance is someone else's, and a volume the cluster owns must not outlive it.
//!   The first request is a plain detach; an attachment still `detaching` on a later pass is
//!   detached with force. The instance itself is never stopped.
//! * **Records** count in the cluster's two zones, except the zone apex's `NS` and `SOA` (the
//!   zone's own) and the records TCCP itself creates ([`crate::stacks::tccp::RECORD_SETS`]).
//! * **Peerings** count when the cluster's VPC is either side, except the one TCCP creates to the
//!   management VPC, and those already gone or going (`deleted`, `deleting`, `rejected`,
//!   `failed`, `expired`).

use std::collections::BTreeMap;

use crate::names;
use crate::stacks::tccp;

/// The tag CloudFormation puts on every resource of a stack.
pub const CLOUDFORMATION_STACK: &str = "aws:cloudformation:stack-name";

/// The tags of a resource.
pub type Tags = BTreeMap<String, String>;

/// The cluster whose leftovers are looked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cluster {
    /// The cluster id.
    pub id: String,
    /// The cluster's VPC (TCCP's `VPCID`), if known.
    pub vpc_id: Option<String>,
    /// TCCP's peering to the management VPC (`VPCPeeringConnectionID`), if known.
    pub peering_id: Option<String>,
    /// The cluster's zone name `<id>.k8s.<domain>`, without the trailing dot.
    pub domain: String,
    /// Records the network stack holds beyond TCCP's own ([`crate::stacks::tccp::RECORD_SETS`]):
    /// zone, label under the cluster's zone, type. A legacy `guest-main` holds
    /// [`guest_main::OWN_RECORDS`](crate::stacks::legacy::guest_main::OWN_RECORDS).
    pub stack_records: Vec<(Zone, &'static str, &'static str)>,
}

/// A classic (`v1`) or v2 load balancer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadBalancer {
    /// Classic: the name; v2: the ARN. What the delete call takes.
    pub id: String,
    /// The name, for events.
    pub name: String,
    /// Whether it is a v2 (application, network, gateway) load balancer.
    pub v2: bool,
    /// Its VPC.
    pub vpc_id: Option<String>,
    /// Its tags.
    pub tags: Tags,
}

/// A v2 target group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetGroup {
    /// Its ARN.
    pub arn: String,
    /// Its name.
    pub name: String,
    /// Its VPC (none for a Lambda target group).
    pub vpc_id: Option<String>,
    /// Its tags.
    pub tags: Tags,
}

/// An EC2 security group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecurityGroup {
    /// Its id.
    pub id: String,
    /// Its name.
    pub name: String,
    /// Its VPC.
    pub vpc_id: Option<String>,
    /// Its tags.
    pub tags: Tags,
}

/// An elastic network interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkInterface {
    /// Its id.
    pub id: String,
    /// Its VPC.
    pub vpc_id: Option<String>,
    /// `available`, `in-use`, `attaching`, …
    pub status: String,
    /// Whether an AWS service manages it (a load balancer's, a NAT gateway's, an endpoint's).
    pub requester_managed: bool,
    /// Its tags.
    pub tags: Tags,
}

/// An EBS volume.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Volume {
    /// Its id.
    pub id: String,
    /// `available`, `in-use`, `creating`, `deleting`, …
    pub state: String,
    /// Its tags.
    pub tags: Tags,
    /// Its attachments to instances.
    pub attachments: Vec<VolumeAttachment>,
}

/// A volume's attachment to an instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeAttachment {
    /// The instance.
    pub instance_id: String,
    /// `attaching`, `attached`, `detaching`, `detached`, …
    pub state: String,
}

/// A volume of the cluster to detach from an instance before it can be deleted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Detach {
    /// The volume.
    pub volume_id: String,
    /// The instance it is attached to.
    pub instance_id: String,
    /// Whether to force it: a detach asked for before has not finished.
    pub force: bool,
}

/// Which of the cluster's two zones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Zone {
    /// The public zone (TCCP `HostedZoneID`).
    Public,
    /// The private zone (TCCP `InternalHostedZoneID`).
    Internal,
}

/// A Route53 record set, by what identifies it in its zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordSet {
    /// The zone it is in.
    pub zone: Zone,
    /// Its name as Route53 lists it (fully qualified, `*` written `\052`).
    pub name: String,
    /// Its type: `A`, `CNAME`, `NS`, …
    pub record_type: String,
    /// Its set identifier (weighted, latency, … records), if any.
    pub set_identifier: Option<String>,
}

/// A VPC peering connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peering {
    /// Its id.
    pub id: String,
    /// The requester's VPC.
    pub requester_vpc_id: Option<String>,
    /// The accepter's VPC.
    pub accepter_vpc_id: Option<String>,
    /// `active`, `pending-acceptance`, `deleted`, …
    pub status: String,
    /// Its tags.
    pub tags: Tags,
}

/// What the edge found in the tenant account (for the VPC-bound kinds: in the cluster's VPC or
/// all of the account; the selection filters either way).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Found {
    /// Classic and v2 load balancers.
    pub load_balancers: Vec<LoadBalancer>,
    /// v2 target groups.
    pub target_groups: Vec<TargetGroup>,
    /// Security groups.
    pub security_groups: Vec<SecurityGroup>,
    /// Network interfaces.
    pub network_interfaces: Vec<NetworkInterface>,
    /// Volumes.
    pub volumes: Vec<Volume>,
    /// The record sets of the cluster's zones.
    pub record_sets: Vec<RecordSet>,
    /// Peerings.
    pub peerings: Vec<Peering>,
}

/// The leftovers to delete, each kind in the order it must go: the load balancers before the
/// target groups they use and the security groups their interfaces carry; the interfaces before
/// the security groups they carry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Leftovers {
    /// Load balancers.
    pub load_balancers: Vec<LoadBalancer>,
    /// Target groups.
    pub target_groups: Vec<TargetGroup>,
    /// Network interfaces.
    pub network_interfaces: Vec<NetworkInterface>,
    /// Security groups.
    pub security_groups: Vec<SecurityGroup>,
    /// Volumes to detach first: deleted on a later pass, once `available`.
    pub detach: Vec<Detach>,
    /// Volumes.
    pub volumes: Vec<Volume>,
    /// Record sets.
    pub record_sets: Vec<RecordSet>,
    /// Peerings.
    pub peerings: Vec<Peering>,
}

impl Leftovers {
    /// Whether nothing is left.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many resources are left.
    pub fn len(&self) -> usize {
        self.load_balancers.len()
            + self.target_groups.len()
            + self.network_interfaces.len()
            + self.security_groups.len()
            + self.detach.len()
            + self.volumes.len()
            + self.record_sets.len()
            + self.peerings.len()
    }
}

/// Whether `tags` say the cluster owns the resource.
fn owned(cluster: &Cluster, tags: &Tags) -> bool {
    tags.get(&names::tags::kubernetes_cluster(&cluster.id)).is_some_and(|v| v == "owned")
}

/// Whether `tags` say a stack created the resource.
pub fn stack_managed(tags: &Tags) -> bool {
    tags.contains_key(names::tags::STACK) || tags.contains_key(CLOUDFORMATION_STACK)
}

/// Whether `vpc` is the cluster's VPC (never, when that is unknown).
fn in_vpc(cluster: &Cluster, vpc: Option<&String>) -> bool {
    cluster.vpc_id.is_some() && vpc == cluster.vpc_id.as_ref()
}

/// Owned by the cluster, not a stack's, and in its VPC.
fn cloud_provider_resource(cluster: &Cluster, tags: &Tags, vpc: Option<&String>) -> bool {
    owned(cluster, tags) && !stack_managed(tags) && in_vpc(cluster, vpc)
}

/// A record name as written in a template: `\052` (how Route53 lists `*`) as `*`, lower case,
/// with one trailing dot.
fn canonical_record_name(name: &str) -> String {
    format!("{}.", name.replace("\\052", "*").trim_end_matches('.').to_ascii_lowercase())
}

/// Whether the record set is one the cluster's zone or TCCP keeps.
fn kept_record(cluster: &Cluster, r: &RecordSet) -> bool {
    let name = canonical_record_name(&r.name);
    let apex = canonical_record_name(&cluster.domain);
    if name == apex && (r.record_type == "NS" || r.record_type == "SOA") {
        return true;
    }
    let zone_logical_id = match r.zone {
        Zone::Public => tccp::HOSTED_ZONE,
        Zone::Internal => tccp::INTERNAL_HOSTED_ZONE,
    };
    let own = cluster.stack_records.iter().any(|(zone, label, record_type)| {
        *zone == r.zone
            && r.record_type == *record_type
            && r.set_identifier.is_none()
            && name == canonical_record_name(&format!("{label}.{}", cluster.domain))
    });
    own || tccp::RECORD_SETS.iter().any(|set| {
        set.zone == zone_logical_id
            && r.record_type == tccp::RECORD_TYPE
            && r.set_identifier.is_none()
            && name == canonical_record_name(&format!("{}.{}", set.label, cluster.domain))
    })
}

/// The states of a peering that is gone or going.
const PEERING_ENDED: &[&str] = &["deleted", "deleting", "rejected", "failed", "expired"];

/// Select the leftovers of `cluster` among what was `found`, in deletion order.
pub fn select(cluster: &Cluster, found: &Found) -> Leftovers {
    let mut out = Leftovers {
        load_balancers: found
            .load_balancers
            .iter()
            .filter(|lb| cloud_provider_resource(cluster, &lb.tags, lb.vpc_id.as_ref()))
            .cloned()
            .collect(),
        target_groups: found
            .target_groups
            .iter()
            .filter(|tg| cloud_provider_resource(cluster, &tg.tags, tg.vpc_id.as_ref()))
            .cloned()
            .collect(),
        network_interfaces: found
            .network_interfaces
            .iter()
            .filter(|eni| {
                in_vpc(cluster, eni.vpc_id.as_ref())
                    && eni.status == "available"
                    && !eni.requester_managed
                    && !stack_managed(&eni.tags)
            })
            .cloned()
            .collect(),
        security_groups: found
            .security_groups
            .iter()
            // The VPC's default group goes with the VPC and can not be deleted before.
            .filter(|sg| sg.name != "default" && cloud_provider_resource(cluster, &sg.tags, sg.vpc_id.as_ref()))
            .cloned()
            .collect(),
        detach: found
            .volumes
            .iter()
            .filter(|v| v.state == "in-use" && owned(cluster, &v.tags) && !stack_managed(&v.tags))
            .flat_map(|v| {
                v.attachments.iter().filter(|a| a.state != "detached").map(|a| Detach {
                    volume_id: v.id.clone(),
                    instance_id: a.instance_id.clone(),
                    force: a.state == "detaching",
                })
            })
            .collect(),
        volumes: found
            .volumes
            .iter()
            .filter(|v| v.state == "available" && owned(cluster, &v.tags) && !stack_managed(&v.tags))
            .cloned()
            .collect(),
        record_sets: found.record_sets.iter().filter(|r| !kept_record(cluster, r)).cloned().collect(),
        peerings: found
            .peerings
            .iter()
            .filter(|p| {
                (in_vpc(cluster, p.requester_vpc_id.as_ref()) || in_vpc(cluster, p.accepter_vpc_id.as_ref()))
                    && cluster.peering_id.as_deref() != Some(p.id.as_str())
                    && !stack_managed(&p.tags)
                    && !PEERING_ENDED.contains(&p.status.as_str())
            })
            .cloned()
            .collect(),
    };
    // Stable order, whatever order the listings came in.
    out.load_balancers.sort_by(|a, b| a.id.cmp(&b.id));
    out.target_groups.sort_by(|a, b| a.arn.cmp(&b.arn));
    out.network_interfaces.sort_by(|a, b| a.id.cmp(&b.id));
    out.security_groups.sort_by(|a, b| a.id.cmp(&b.id));
    out.detach.sort_by(|a, b| (&a.volume_id, &a.instance_id).cmp(&(&b.volume_id, &b.instance_id)));
    out.volumes.sort_by(|a, b| a.id.cmp(&b.id));
    out.record_sets.sort_by(|a, b| (a.zone, &a.name, &a.record_type).cmp(&(b.zone, &b.name, &b.record_type)));
    out.peerings.sort_by(|a, b| a.id.cmp(&b.id));
    out
}

/// Whether an AWS error code says the resource is still in use by another one, which goes
/// away on its own (a deleted load balancer's interfaces, a detaching volume): the deletion is
/// tried again on a later reconcile.
pub fn in_use(code: &str) -> bool {
    matches!(
        code,
        "DependencyViolation"
            | "ResourceInUse"
            | "InvalidGroup.InUse"
            | "InvalidNetworkInterface.InUse"
            | "VolumeInUse"
            | "IncorrectState"
    )
}

/// Whether an AWS error code says the resource is gone already (deleted by its owner or by a
/// concurrent reconcile since it was listed).
pub fn already_gone(code: &str) -> bool {
    matches!(
        code,
        "InvalidGroup.NotFound"
            | "InvalidNetworkInterfaceID.NotFound"
            | "InvalidVolume.NotFound"
            | "InvalidVpcPeeringConnectionID.NotFound"
            | "InvalidVpcPeeringConnectionId.NotFound"
            | "LoadBalancerNotFound"
            | "TargetGroupNotFound"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "x7k2p";
    const VPC: &str = "vpc-0cluster";

    fn cluster() -> Cluster {
        Cluster {
            id: ID.into(),
            vpc_id: Some(VPC.into()),
            peering_id: Some("pcx-0stack".into()),
            domain: "x7k2p.k8s.gauss.eu-central-1.aws.gigantic.io".into(),
            stack_records: Vec::new(),
        }
    }

    fn tags(pairs: &[(&str, &str)]) -> Tags {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn owned_tags() -> Tags {
        tags(&[("kubernetes.io/cluster/x7k2p", "owned"), ("kubernetes.io/service-name", "default/web")])
    }

    fn stack_tags() -> Tags {
        tags(&[("kubernetes.io/cluster/x7k2p", "owned"), ("giantswarm.io/stack", "tccp")])
    }

    fn lb(id: &str, v2: bool, vpc: &str, tags: Tags) -> LoadBalancer {
        LoadBalancer { id: id.into(), name: id.into(), v2, vpc_id: Some(vpc.into()), tags }
    }

    fn record(zone: Zone, name: &str, record_type: &str) -> RecordSet {
        RecordSet { zone, name: name.into(), record_type: record_type.into(), set_identifier: None }
    }

    fn ids<T>(items: &[T], id: impl Fn(&T) -> &str) -> Vec<String> {
        items.iter().map(|i| id(i).to_string()).collect()
    }

    #[test]
    fn load_balancers_owned_by_the_cluster_in_its_vpc_and_not_a_stacks_are_leftovers() {
        let found = Found {
            load_balancers: vec![
                lb("a1b2c3-web", false, VPC, owned_tags()),
                lb("arn:aws:elasticloadbalancing:eu-central-1:1:loadbalancer/net/k8s-nlb/1", true, VPC, owned_tags()),
                // TCCP's API load balancer: owned through the stack tags.
                lb("x7k2p-api", false, VPC, stack_tags()),
                // Another cluster's, and one shared with this cluster.
                lb("other", false, VPC, tags(&[("kubernetes.io/cluster/zz9zz", "owned")])),
                lb("shared", false, VPC, tags(&[("kubernetes.io/cluster/x7k2p", "shared")])),
                // Tagged for this cluster id in a VPC that is not the cluster's.
                lb("elsewhere", false, "vpc-0other", owned_tags()),
                lb("cfn", true, VPC, tags(&[("kubernetes.io/cluster/x7k2p", "owned"), (CLOUDFORMATION_STACK, "s")])),
            ],
            ..Found::default()
        };
        let left = select(&cluster(), &found);
        assert_eq!(
            ids(&left.load_balancers, |l| &l.id),
            ["a1b2c3-web", "arn:aws:elasticloadbalancing:eu-central-1:1:loadbalancer/net/k8s-nlb/1"]
        );
        assert_eq!(left.len(), 2);
    }

    #[test]
    fn without_a_known_vpc_nothing_vpc_bound_is_touched() {
        let found = Found {
            load_balancers: vec![lb("a1b2c3-web", false, VPC, owned_tags())],
            network_interfaces: vec![NetworkInterface {
                id: "eni-1".into(),
                vpc_id: Some(VPC.into()),
                status: "available".into(),
                requester_managed: false,
                tags: Tags::new(),
            }],
            volumes: vec![Volume {
                id: "vol-1".into(),
                state: "available".into(),
                tags: owned_tags(),
                attachments: Vec::new(),
            }],
            ..Found::default()
        };
        let left = select(&Cluster { vpc_id: None, ..cluster() }, &found);
        assert!(left.load_balancers.is_empty() && left.network_interfaces.is_empty());
        // A volume is bound to no VPC: its tag alone decides.
        assert_eq!(ids(&left.volumes, |v| &v.id), ["vol-1"]);
    }

    #[test]
    fn target_groups_and_security_groups_follow_the_same_ownership() {
        let tg = |arn: &str, vpc: &str, tags: Tags| TargetGroup {
            arn: arn.into(),
            name: arn.into(),
            vpc_id: Some(vpc.into()),
            tags,
        };
        let sg = |id: &str, name: &str, tags: Tags| SecurityGroup {
            id: id.into(),
            name: name.into(),
            vpc_id: Some(VPC.into()),
            tags,
        };
        let found = Found {
            target_groups: vec![
                tg("tg-b", VPC, owned_tags()),
                tg("tg-a", VPC, owned_tags()),
                tg("tg-x", VPC, stack_tags()),
            ],
            security_groups: vec![
                sg("sg-elb", "k8s-elb-a1b2c3", owned_tags()),
                sg("sg-master", "x7k2p-master", stack_tags()),
                sg("sg-default", "default", owned_tags()),
                sg("sg-user", "user", Tags::new()),
            ],
            ..Found::default()
        };
        let left = select(&cluster(), &found);
        assert_eq!(ids(&left.target_groups, |t| &t.arn), ["tg-a", "tg-b"], "sorted");
        assert_eq!(ids(&left.security_groups, |s| &s.id), ["sg-elb"]);
    }

    #[test]
    fn only_unattached_interfaces_of_the_vpc_that_no_service_or_stack_manages_are_leftovers() {
        let eni = |id: &str, vpc: &str, status: &str, requester_managed: bool, tags: Tags| NetworkInterface {
            id: id.into(),
            vpc_id: Some(vpc.into()),
            status: status.into(),
            requester_managed,
            tags,
        };
        let found = Found {
            network_interfaces: vec![
                eni("eni-cni", VPC, "available", false, tags(&[("node.k8s.amazonaws.com/instance_id", "i-1")])),
                eni("eni-attached", VPC, "in-use", false, Tags::new()),
                eni("eni-elb", VPC, "available", true, Tags::new()),
                eni("eni-master", VPC, "available", false, tags(&[("giantswarm.io/stack", "tccpn")])),
                eni("eni-other-vpc", "vpc-0other", "available", false, Tags::new()),
            ],
            ..Found::default()
        };
        assert_eq!(ids(&select(&cluster(), &found).network_interfaces, |e| &e.id), ["eni-cni"]);
    }

    #[test]
    fn available_volumes_tagged_for_the_cluster_are_deleted_and_attached_ones_detached_first() {
        let vol = |id: &str, state: &str, tags: Tags, attachment: Option<&str>| Volume {
            id: id.into(),
            state: state.into(),
            tags,
            attachments: attachment
                .map(|s| VolumeAttachment { instance_id: format!("i-{id}"), state: s.into() })
                .into_iter()
                .collect(),
        };
        let found = Found {
            volumes: vec![
                vol("vol-pv", "available", owned_tags(), None),
                vol("vol-attached", "in-use", owned_tags(), Some("attached")),
                vol("vol-stuck", "in-use", owned_tags(), Some("detaching")),
                vol("vol-etcd", "available", stack_tags(), None),
                vol("vol-etcd-attached", "in-use", stack_tags(), Some("attached")),
                vol("vol-other", "available", tags(&[("kubernetes.io/cluster/zz9zz", "owned")]), None),
                vol(
                    "vol-other-attached",
                    "in-use",
                    tags(&[("kubernetes.io/cluster/zz9zz", "owned")]),
                    Some("attached"),
                ),
                vol("vol-untagged", "available", Tags::new(), None),
            ],
            ..Found::default()
        };
        let left = select(&cluster(), &found);
        assert_eq!(ids(&left.volumes, |v| &v.id), ["vol-pv"]);
        assert_eq!(
            left.detach,
            [
                Detach { volume_id: "vol-attached".into(), instance_id: "i-vol-attached".into(), force: false },
                Detach { volume_id: "vol-stuck".into(), instance_id: "i-vol-stuck".into(), force: true },
            ]
        );
        assert_eq!(left.len(), 3);
    }

    #[test]
    fn records_other_than_the_zone_apex_and_tccps_own_are_leftovers() {
        let base = "x7k2p.k8s.gauss.eu-central-1.aws.gigantic.io.";
        let found = Found {
            record_sets: vec![
                record(Zone::Public, base, "NS"),
                record(Zone::Public, base, "SOA"),
                record(Zone::Internal, base, "NS"),
                record(Zone::Internal, base, "SOA"),
                record(Zone::Public, &format!("api.{base}"), "CNAME"),
                record(Zone::Public, &format!("internal-api.{base}"), "CNAME"),
                record(Zone::Public, &format!("etcd.{base}"), "CNAME"),
                record(Zone::Public, &format!("\\052.{base}"), "CNAME"),
                record(Zone::Internal, &format!("api.{base}"), "CNAME"),
                record(Zone::Internal, &format!("etcd.{base}"), "CNAME"),
                record(Zone::Internal, &format!("\\052.{base}"), "CNAME"),
                // external-dns: an A record, its TXT ownership record, a record on the apex.
                record(Zone::Public, &format!("shop.{base}"), "A"),
                record(Zone::Public, &format!("shop.{base}"), "TXT"),
                record(Zone::Public, base, "TXT"),
                // A delegation of a sub-zone is not the zone's own NS.
                record(Zone::Public, &format!("team.{base}"), "NS"),
                // TCCP writes no internal-api record in the private zone, and only CNAMEs.
                record(Zone::Internal, &format!("internal-api.{base}"), "CNAME"),
                record(Zone::Public, &format!("api.{base}"), "A"),
            ],
            ..Found::default()
        };
        let left = select(&cluster(), &found);
        let got: Vec<(Zone, String, String)> =
            left.record_sets.iter().map(|r| (r.zone, r.name.clone(), r.record_type.clone())).collect();
        assert_eq!(
            got,
            vec![
                (Zone::Public, format!("api.{base}"), "A".to_string()),
                (Zone::Public, format!("shop.{base}"), "A".to_string()),
                (Zone::Public, format!("shop.{base}"), "TXT".to_string()),
                (Zone::Public, format!("team.{base}"), "NS".to_string()),
                (Zone::Public, base.to_string(), "TXT".to_string()),
                (Zone::Internal, format!("internal-api.{base}"), "CNAME".to_string()),
            ]
        );
    }

    #[test]
    fn peerings_of_the_vpc_other_than_tccps_and_ended_ones_are_leftovers() {
        let pcx = |id: &str, requester: &str, accepter: &str, status: &str, tags: Tags| Peering {
            id: id.into(),
            requester_vpc_id: Some(requester.into()),
            accepter_vpc_id: Some(accepter.into()),
            status: status.into(),
            tags,
        };
        let found = Found {
            peerings: vec![
                pcx("pcx-0stack", VPC, "vpc-0mc", "active", Tags::new()),
                pcx("pcx-tagged", VPC, "vpc-0mc", "active", tags(&[("giantswarm.io/stack", "tccp")])),
                pcx("pcx-out", VPC, "vpc-0db", "active", Tags::new()),
                pcx("pcx-in", "vpc-0db", VPC, "pending-acceptance", Tags::new()),
                pcx("pcx-done", VPC, "vpc-0db", "deleted", Tags::new()),
                pcx("pcx-rejected", VPC, "vpc-0db", "rejected", Tags::new()),
                pcx("pcx-unrelated", "vpc-0a", "vpc-0b", "active", Tags::new()),
            ],
            ..Found::default()
        };
        assert_eq!(ids(&select(&cluster(), &found).peerings, |p| &p.id), ["pcx-in", "pcx-out"]);
    }

    #[test]
    fn error_codes_tell_in_use_from_gone_from_failures() {
        assert!(in_use("DependencyViolation") && in_use("ResourceInUse") && in_use("VolumeInUse"));
        assert!(already_gone("InvalidGroup.NotFound") && already_gone("LoadBalancerNotFound"));
        for code in ["AccessDenied", "UnauthorizedOperation", "Throttling", "Transport"] {
            assert!(!in_use(code) && !already_gone(code), "{code}");
        }
    }
}

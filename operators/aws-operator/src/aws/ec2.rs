//! The EC2 and Auto Scaling calls the operator makes: the account's subnets (reserved by IPAM),
//! the management VPC and its route tables, the masters' addresses, a node pool's capacity and
//! its running instances; and, for the teardown's leftovers, the security groups, interfaces, volumes and peerings of a
//! cluster with their deletion.

use std::collections::BTreeMap;

use crate::aws::{AccountClients, AwsError, api_error};

/// Every subnet CIDR of the account and region (IPAM reserves them).
pub async fn subnet_cidrs(aws: &AccountClients) -> Result<Vec<String>, AwsError> {
    let pages = aws
        .ec2
        .describe_subnets()
        .into_paginator()
        .send()
        .try_collect()
        .await
        .map_err(|e| api_error("EC2", "DescribeSubnets", e))?;
    Ok(pages.iter().flat_map(|p| p.subnets()).filter_map(|s| s.cidr_block().map(str::to_string)).collect())
}

/// The management cluster's VPC: `(id, cidr)` of the VPC tagged `Name=<installation>`.
pub async fn control_plane_vpc(aws: &AccountClients, installation: &str) -> Result<Option<(String, String)>, AwsError> {
    let out = aws
        .ec2
        .describe_vpcs()
        .filters(aws_sdk_ec2::types::Filter::builder().name("tag:Name").values(installation).build())
        .send()
        .await
        .map_err(|e| api_error("EC2", "DescribeVpcs", e))?;
    Ok(out.vpcs().first().and_then(|v| Some((v.vpc_id()?.to_string(), v.cidr_block()?.to_string()))))
}

/// The public addresses of the management cluster's NAT gateways: its Elastic IPs tagged
/// `giantswarm.io/installation=<installation>`, as `/32`s, sorted (the original's
/// `natgatewayaddresses`).
pub async fn management_nat_addresses(aws: &AccountClients, installation: &str) -> Result<Vec<String>, AwsError> {
    let out = aws
        .ec2
        .describe_addresses()
        .filters(
            aws_sdk_ec2::types::Filter::builder()
                .name(format!("tag:{}", aws_stacks::names::tags::INSTALLATION))
                .values(installation)
                .build(),
        )
        .send()
        .await
        .map_err(|e| api_error("EC2", "DescribeAddresses", e))?;
    let mut addresses: Vec<String> =
        out.addresses().iter().filter_map(|a| a.public_ip()).map(|ip| format!("{ip}/32")).collect();
    addresses.sort();
    addresses.dedup();
    Ok(addresses)
}

/// The management VPC's route tables as `(id, Name tag)`: those named in `names` when given,
/// else every route table of the VPC except the main one.
pub async fn control_plane_route_tables(
    aws: &AccountClients,
    vpc_id: &str,
    names: &[String],
) -> Result<Vec<(String, String)>, AwsError> {
    let mut call = aws
        .ec2
        .describe_route_tables()
        .filters(aws_sdk_ec2::types::Filter::builder().name("vpc-id").values(vpc_id).build());
    if !names.is_empty() {
        call = call
            .filters(aws_sdk_ec2::types::Filter::builder().name("tag:Name").set_values(Some(names.to_vec())).build());
    }
    let out = call.send().await.map_err(|e| api_error("EC2", "DescribeRouteTables", e))?;
    let mut tables: Vec<(String, String)> = out
        .route_tables()
        .iter()
        .filter(|t| !names.is_empty() || !t.associations().iter().any(|a| a.main().unwrap_or(false)))
        .filter_map(|t| {
            let name =
                t.tags().iter().find(|tag| tag.key() == Some("Name")).and_then(|tag| tag.value()).unwrap_or_default();
            Some((t.route_table_id()?.to_string(), name.to_string()))
        })
        .collect();
    tables.sort();
    Ok(tables)
}

/// Private IPs of the running master instances of a cluster (tag `Name=<id>-master`).
pub async fn master_ips(aws: &AccountClients, cluster_id: &str) -> Result<Vec<String>, AwsError> {
    Ok(running_masters(aws, &format!("{cluster_id}-master")).await?.remove(cluster_id).unwrap_or_default())
}

/// Private IPs of the running master instances of every cluster of the account (tag
/// `Name=<id>-master`), by cluster id: one paginated `DescribeInstances` for all of them.
pub async fn all_master_ips(aws: &AccountClients) -> Result<BTreeMap<String, Vec<String>>, AwsError> {
    running_masters(aws, "*-master").await
}

/// The private IPs, sorted and without repeats, of the running instances whose `Name` tag
/// matches `name` (an EC2 filter value, `*` a wildcard) and ends in `-master`, by the cluster id
/// before that suffix.
async fn running_masters(aws: &AccountClients, name: &str) -> Result<BTreeMap<String, Vec<String>>, AwsError> {
    let pages = aws
        .ec2
        .describe_instances()
        .filters(filter("tag:Name", name))
        .filters(filter("instance-state-name", "running"))
        .into_paginator()
        .send()
        .try_collect()
        .await
        .map_err(|e| api_error("EC2", "DescribeInstances", e))?;
    let mut by_cluster: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for i in pages.iter().flat_map(|p| p.reservations()).flat_map(|r| r.instances()) {
        let name = i.tags().iter().find(|t| t.key() == Some("Name")).and_then(|t| t.value()).unwrap_or_default();
        if let (Some(id), Some(ip)) = (name.strip_suffix("-master"), i.private_ip_address()) {
            by_cluster.entry(id.to_string()).or_default().push(ip.to_string());
        }
    }
    for ips in by_cluster.values_mut() {
        ips.sort();
        ips.dedup();
    }
    Ok(by_cluster)
}

/// Auto Scaling group `name` as Auto Scaling describes it, `None` when it does not exist.
pub async fn describe_group(
    aws: &AccountClients,
    name: &str,
) -> Result<Option<aws_sdk_autoscaling::types::AutoScalingGroup>, AwsError> {
    let out = aws
        .autoscaling
        .describe_auto_scaling_groups()
        .auto_scaling_group_names(name)
        .send()
        .await
        .map_err(|e| api_error("AutoScaling", "DescribeAutoScalingGroups", e))?;
    Ok(out.auto_scaling_groups.and_then(|groups| groups.into_iter().next()))
}

/// The desired capacity, min and max of an Auto Scaling group, `None` when it does not exist.
pub async fn asg_capacity(aws: &AccountClients, name: &str) -> Result<Option<(i32, i32, i32)>, AwsError> {
    Ok(describe_group(aws, name).await?.map(|g| {
        (g.desired_capacity().unwrap_or_default(), g.min_size().unwrap_or_default(), g.max_size().unwrap_or_default())
    }))
}

/// One instance of an Auto Scaling group, as EC2 describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupInstance {
    /// Its instance type, e.g. `m5.xlarge`.
    pub instance_type: String,
    /// Whether it runs on spot capacity (EC2's `InstanceLifecycle` is `spot`).
    pub spot: bool,
}

/// The pending and running instances of Auto Scaling group `group` (by the
/// `aws:autoscaling:groupName` tag Auto Scaling puts on each): one call for both their types
/// and their lifecycle, which the group's own description lacks.
pub async fn group_instances(aws: &AccountClients, group: &str) -> Result<Vec<GroupInstance>, AwsError> {
    let pages = aws
        .ec2
        .describe_instances()
        .filters(filter("tag:aws:autoscaling:groupName", group))
        .filters(
            aws_sdk_ec2::types::Filter::builder()
                .name("instance-state-name")
                .values("pending")
                .values("running")
                .build(),
        )
        .into_paginator()
        .send()
        .try_collect()
        .await
        .map_err(|e| api_error("EC2", "DescribeInstances", e))?;
    Ok(pages
        .iter()
        .flat_map(|p| p.reservations())
        .flat_map(|r| r.instances())
        .map(|i| GroupInstance {
            instance_type: i.instance_type().map(|t| t.as_str().to_string()).unwrap_or_default(),
            spot: i.instance_lifecycle().is_some_and(|l| l.as_str() == "spot"),
        })
        .collect())
}

/// Put the cluster autoscaler's discovery tag ([`crate::upgrade::AUTOSCALER_ENABLED_TAG`]) on
/// Auto Scaling group `name` (`enabled`), or take it off.
pub async fn set_autoscaler_enabled(aws: &AccountClients, name: &str, enabled: bool) -> Result<(), AwsError> {
    let tag = aws_sdk_autoscaling::types::Tag::builder()
        .key(crate::upgrade::AUTOSCALER_ENABLED_TAG)
        .resource_id(name)
        .resource_type("auto-scaling-group")
        .value("true")
        .propagate_at_launch(false)
        .build();
    if enabled {
        aws.autoscaling
            .create_or_update_tags()
            .tags(tag)
            .send()
            .await
            .map_err(|e| api_error("AutoScaling", "CreateOrUpdateTags", e))?;
    } else {
        aws.autoscaling.delete_tags().tags(tag).send().await.map_err(|e| api_error("AutoScaling", "DeleteTags", e))?;
    }
    Ok(())
}

/// The tags of an EC2 resource as a map.
fn tag_map(tags: &[aws_sdk_ec2::types::Tag]) -> aws_stacks::leftovers::Tags {
    tags.iter().filter_map(|t| Some((t.key()?.to_string(), t.value().unwrap_or_default().to_string()))).collect()
}

fn filter(name: &str, value: impl Into<String>) -> aws_sdk_ec2::types::Filter {
    aws_sdk_ec2::types::Filter::builder().name(name).values(value).build()
}

/// The security groups of VPC `vpc_id`.
pub async fn security_groups(
    aws: &AccountClients,
    vpc_id: &str,
) -> Result<Vec<aws_stacks::leftovers::SecurityGroup>, AwsError> {
    let pages = aws
        .ec2
        .describe_security_groups()
        .filters(filter("vpc-id", vpc_id))
        .into_paginator()
        .send()
        .try_collect()
        .await
        .map_err(|e| api_error("EC2", "DescribeSecurityGroups", e))?;
    Ok(pages
        .iter()
        .flat_map(|p| p.security_groups())
        .filter_map(|g| {
            Some(aws_stacks::leftovers::SecurityGroup {
                id: g.group_id()?.to_string(),
                name: g.group_name().unwrap_or_default().to_string(),
                vpc_id: g.vpc_id().map(str::to_string),
                tags: tag_map(g.tags()),
            })
        })
        .collect())
}

/// The network interfaces of VPC `vpc_id`.
pub async fn network_interfaces(
    aws: &AccountClients,
    vpc_id: &str,
) -> Result<Vec<aws_stacks::leftovers::NetworkInterface>, AwsError> {
    let pages = aws
        .ec2
        .describe_network_interfaces()
        .filters(filter("vpc-id", vpc_id))
        .into_paginator()
        .send()
        .try_collect()
        .await
        .map_err(|e| api_error("EC2", "DescribeNetworkInterfaces", e))?;
    Ok(pages
        .iter()
        .flat_map(|p| p.network_interfaces())
        .filter_map(|n| {
            Some(aws_stacks::leftovers::NetworkInterface {
                id: n.network_interface_id()?.to_string(),
                vpc_id: n.vpc_id().map(str::to_string),
                status: n.status().map(|s| s.as_str().to_string()).unwrap_or_default(),
                requester_managed: n.requester_managed().unwrap_or(false),
                tags: tag_map(n.tag_set()),
            })
        })
        .collect())
}

/// The volumes tagged `kubernetes.io/cluster/<cluster_id>=owned`.
pub async fn cluster_volumes(
    aws: &AccountClients,
    cluster_id: &str,
) -> Result<Vec<aws_stacks::leftovers::Volume>, AwsError> {
    let tag = format!("tag:{}", aws_stacks::names::tags::kubernetes_cluster(cluster_id));
    let pages = aws
        .ec2
        .describe_volumes()
        .filters(filter(&tag, "owned"))
        .into_paginator()
        .send()
        .try_collect()
        .await
        .map_err(|e| api_error("EC2", "DescribeVolumes", e))?;
    Ok(pages
        .iter()
        .flat_map(|p| p.volumes())
        .filter_map(|v| {
            Some(aws_stacks::leftovers::Volume {
                id: v.volume_id()?.to_string(),
                state: v.state().map(|s| s.as_str().to_string()).unwrap_or_default(),
                tags: tag_map(v.tags()),
                attachments: v
                    .attachments()
                    .iter()
                    .filter_map(|a| {
                        Some(aws_stacks::leftovers::VolumeAttachment {
                            instance_id: a.instance_id()?.to_string(),
                            state: a.state().map(|s| s.as_str().to_string()).unwrap_or_default(),
                        })
                    })
                    .collect(),
            })
        })
        .collect())
}

/// The peering connections with VPC `vpc_id` on either side.
pub async fn peerings(aws: &AccountClients, vpc_id: &str) -> Result<Vec<aws_stacks::leftovers::Peering>, AwsError> {
    let mut out: Vec<aws_stacks::leftovers::Peering> = Vec::new();
    // Filters are ANDed: one listing per side.
    for side in ["requester-vpc-info.vpc-id", "accepter-vpc-info.vpc-id"] {
        let pages = aws
            .ec2
            .describe_vpc_peering_connections()
            .filters(filter(side, vpc_id))
            .into_paginator()
            .send()
            .try_collect()
            .await
            .map_err(|e| api_error("EC2", "DescribeVpcPeeringConnections", e))?;
        for p in pages.iter().flat_map(|p| p.vpc_peering_connections()) {
            let Some(id) = p.vpc_peering_connection_id() else { continue };
            if out.iter().any(|seen| seen.id == id) {
                continue;
            }
            out.push(aws_stacks::leftovers::Peering {
                id: id.to_string(),
                requester_vpc_id: p.requester_vpc_info().and_then(|i| i.vpc_id()).map(str::to_string),
                accepter_vpc_id: p.accepter_vpc_info().and_then(|i| i.vpc_id()).map(str::to_string),
                status: p.status().and_then(|s| s.code()).map(|c| c.as_str().to_string()).unwrap_or_default(),
                tags: tag_map(p.tags()),
            });
        }
    }
    Ok(out)
}

/// Delete security group `id`.
pub async fn delete_security_group(aws: &AccountClients, id: &str) -> Result<(), AwsError> {
    aws.ec2
        .delete_security_group()
        .group_id(id)
        .send()
        .await
        .map_err(|e| api_error("EC2", "DeleteSecurityGroup", e))?;
    Ok(())
}

/// Delete network interface `id`.
pub async fn delete_network_interface(aws: &AccountClients, id: &str) -> Result<(), AwsError> {
    aws.ec2
        .delete_network_interface()
        .network_interface_id(id)
        .send()
        .await
        .map_err(|e| api_error("EC2", "DeleteNetworkInterface", e))?;
    Ok(())
}

/// Detach volume `id` from instance `instance`, with `force` when a detach asked for before has
/// not finished.
pub async fn detach_volume(aws: &AccountClients, id: &str, instance: &str, force: bool) -> Result<(), AwsError> {
    aws.ec2
        .detach_volume()
        .volume_id(id)
        .instance_id(instance)
        .force(force)
        .send()
        .await
        .map_err(|e| api_error("EC2", "DetachVolume", e))?;
    Ok(())
}

/// Delete volume `id`.
pub async fn delete_volume(aws: &AccountClients, id: &str) -> Result<(), AwsError> {
    aws.ec2.delete_volume().volume_id(id).send().await.map_err(|e| api_error("EC2", "DeleteVolume", e))?;
    Ok(())
}

/// Delete peering connection `id` (either side may).
pub async fn delete_peering(aws: &AccountClients, id: &str) -> Result<(), AwsError> {
    aws.ec2
        .delete_vpc_peering_connection()
        .vpc_peering_connection_id(id)
        .send()
        .await
        .map_err(|e| api_error("EC2", "DeleteVpcPeeringConnection", e))?;
    Ok(())
}

//! The EC2 and Auto Scaling reads the operator needs: the account's subnets (reserved by IPAM),
//! the management VPC and its route tables, the masters' addresses and a node pool's capacity.

use crate::aws::{AccountClients, AwsError, api_error};

/// Every subnet CIDR of the account and region (IPAM reserves them).
pub async fn subnet_cidrs(aws: &AccountClients) -> Result<Vec<String>, AwsError> {
    let mut out = Vec::new();
    let mut token = None;
    loop {
        let page = aws
            .ec2
            .describe_subnets()
            .set_next_token(token.take())
            .send()
            .await
            .map_err(|e| api_error("EC2", "DescribeSubnets", e))?;
        out.extend(page.subnets().iter().filter_map(|s| s.cidr_block().map(str::to_string)));
        match page.next_token() {
            Some(t) if !t.is_empty() => token = Some(t.to_string()),
            _ => return Ok(out),
        }
    }
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
    let mut ips = Vec::new();
    let mut token = None;
    loop {
        let page = aws
            .ec2
            .describe_instances()
            .filters(
                aws_sdk_ec2::types::Filter::builder().name("tag:Name").values(format!("{cluster_id}-master")).build(),
            )
            .filters(aws_sdk_ec2::types::Filter::builder().name("instance-state-name").values("running").build())
            .set_next_token(token.take())
            .send()
            .await
            .map_err(|e| api_error("EC2", "DescribeInstances", e))?;
        for r in page.reservations() {
            ips.extend(r.instances().iter().filter_map(|i| i.private_ip_address().map(str::to_string)));
        }
        match page.next_token() {
            Some(t) if !t.is_empty() => token = Some(t.to_string()),
            _ => break,
        }
    }
    ips.sort();
    ips.dedup();
    Ok(ips)
}

/// The desired capacity, min and max of an Auto Scaling group, `None` when it does not exist.
pub async fn asg_capacity(aws: &AccountClients, name: &str) -> Result<Option<(i32, i32, i32)>, AwsError> {
    let out = aws
        .autoscaling
        .describe_auto_scaling_groups()
        .auto_scaling_group_names(name)
        .send()
        .await
        .map_err(|e| api_error("AutoScaling", "DescribeAutoScalingGroups", e))?;
    Ok(out.auto_scaling_groups().first().map(|g| {
        (g.desired_capacity().unwrap_or_default(), g.min_size().unwrap_or_default(), g.max_size().unwrap_or_default())
    }))
}

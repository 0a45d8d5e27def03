//! Elastic Load Balancing, classic and v2: the load balancers and target groups the cluster's
//! cloud provider created, listed with their tags for the teardown's leftovers
//! ([`aws_stacks::leftovers`]), and their deletion.

use aws_stacks::leftovers::{LoadBalancer, Tags, TargetGroup};

use crate::aws::{AccountClients, AwsError, api_error};

/// How many resources one `DescribeTags` call takes, in both APIs.
const TAGS_PER_CALL: usize = 20;

/// Every classic and v2 load balancer of the account and region, with its tags.
pub async fn load_balancers(aws: &AccountClients) -> Result<Vec<LoadBalancer>, AwsError> {
    let mut out = classic_load_balancers(aws).await?;
    out.extend(v2_load_balancers(aws).await?);
    Ok(out)
}

async fn classic_load_balancers(aws: &AccountClients) -> Result<Vec<LoadBalancer>, AwsError> {
    let mut found = Vec::new();
    let mut marker = None;
    loop {
        let page = aws
            .elb
            .describe_load_balancers()
            .set_marker(marker.take())
            .send()
            .await
            .map_err(|e| api_error("ELB", "DescribeLoadBalancers", e))?;
        for lb in page.load_balancer_descriptions() {
            if let Some(name) = lb.load_balancer_name() {
                found.push((name.to_string(), lb.vpc_id().map(str::to_string)));
            }
        }
        match page.next_marker() {
            Some(m) if !m.is_empty() => marker = Some(m.to_string()),
            _ => break,
        }
    }
    let mut out = Vec::with_capacity(found.len());
    for chunk in found.chunks(TAGS_PER_CALL) {
        let described = aws
            .elb
            .describe_tags()
            .set_load_balancer_names(Some(chunk.iter().map(|(n, _)| n.clone()).collect()))
            .send()
            .await
            .map_err(|e| api_error("ELB", "DescribeTags", e))?;
        for (name, vpc_id) in chunk {
            let tags: Tags = described
                .tag_descriptions()
                .iter()
                .filter(|d| d.load_balancer_name() == Some(name.as_str()))
                .flat_map(|d| d.tags())
                .map(|t| (t.key().to_string(), t.value().unwrap_or_default().to_string()))
                .collect();
            out.push(LoadBalancer { id: name.clone(), name: name.clone(), v2: false, vpc_id: vpc_id.clone(), tags });
        }
    }
    Ok(out)
}

async fn v2_load_balancers(aws: &AccountClients) -> Result<Vec<LoadBalancer>, AwsError> {
    let mut found = Vec::new();
    let mut marker = None;
    loop {
        let page = aws
            .elbv2
            .describe_load_balancers()
            .set_marker(marker.take())
            .send()
            .await
            .map_err(|e| api_error("ELBv2", "DescribeLoadBalancers", e))?;
        for lb in page.load_balancers() {
            if let Some(arn) = lb.load_balancer_arn() {
                found.push((
                    arn.to_string(),
                    lb.load_balancer_name().unwrap_or(arn).to_string(),
                    lb.vpc_id().map(str::to_string),
                ));
            }
        }
        match page.next_marker() {
            Some(m) if !m.is_empty() => marker = Some(m.to_string()),
            _ => break,
        }
    }
    Ok(with_v2_tags(aws, found)
        .await?
        .into_iter()
        .map(|(arn, name, vpc_id, tags)| LoadBalancer { id: arn, name, v2: true, vpc_id, tags })
        .collect())
}

/// Every v2 target group of the account and region, with its tags.
pub async fn target_groups(aws: &AccountClients) -> Result<Vec<TargetGroup>, AwsError> {
    let mut found = Vec::new();
    let mut marker = None;
    loop {
        let page = aws
            .elbv2
            .describe_target_groups()
            .set_marker(marker.take())
            .send()
            .await
            .map_err(|e| api_error("ELBv2", "DescribeTargetGroups", e))?;
        for tg in page.target_groups() {
            if let Some(arn) = tg.target_group_arn() {
                found.push((
                    arn.to_string(),
                    tg.target_group_name().unwrap_or(arn).to_string(),
                    tg.vpc_id().map(str::to_string),
                ));
            }
        }
        match page.next_marker() {
            Some(m) if !m.is_empty() => marker = Some(m.to_string()),
            _ => break,
        }
    }
    Ok(with_v2_tags(aws, found)
        .await?
        .into_iter()
        .map(|(arn, name, vpc_id, tags)| TargetGroup { arn, name, vpc_id, tags })
        .collect())
}

/// v2 resources as `(arn, name, vpc)`, each with its tags.
async fn with_v2_tags(
    aws: &AccountClients,
    found: Vec<(String, String, Option<String>)>,
) -> Result<Vec<(String, String, Option<String>, Tags)>, AwsError> {
    let arns: Vec<String> = found.iter().map(|(arn, _, _)| arn.clone()).collect();
    let mut tags = std::collections::HashMap::new();
    for chunk in arns.chunks(TAGS_PER_CALL) {
        let described = aws
            .elbv2
            .describe_tags()
            .set_resource_arns(Some(chunk.to_vec()))
            .send()
            .await
            .map_err(|e| api_error("ELBv2", "DescribeTags", e))?;
        for d in described.tag_descriptions() {
            if let Some(arn) = d.resource_arn() {
                let these: Tags = d
                    .tags()
                    .iter()
                    .filter_map(|t| Some((t.key()?.to_string(), t.value().unwrap_or_default().to_string())))
                    .collect();
                tags.insert(arn.to_string(), these);
            }
        }
    }
    Ok(found
        .into_iter()
        .map(|(arn, name, vpc_id)| {
            let these = tags.remove(&arn).unwrap_or_default();
            (arn, name, vpc_id, these)
        })
        .collect())
}

/// Delete a classic (by name) or v2 (by ARN) load balancer.
pub async fn delete_load_balancer(aws: &AccountClients, lb: &LoadBalancer) -> Result<(), AwsError> {
    if lb.v2 {
        aws.elbv2
            .delete_load_balancer()
            .load_balancer_arn(&lb.id)
            .send()
            .await
            .map_err(|e| api_error("ELBv2", "DeleteLoadBalancer", e))?;
    } else {
        aws.elb
            .delete_load_balancer()
            .load_balancer_name(&lb.id)
            .send()
            .await
            .map_err(|e| api_error("ELB", "DeleteLoadBalancer", e))?;
    }
    Ok(())
}

/// Delete a v2 target group.
pub async fn delete_target_group(aws: &AccountClients, arn: &str) -> Result<(), AwsError> {
    aws.elbv2
        .delete_target_group()
        .target_group_arn(arn)
        .send()
        .await
        .map_err(|e| api_error("ELBv2", "DeleteTargetGroup", e))?;
    Ok(())
}

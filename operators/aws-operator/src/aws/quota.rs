//! The account limits and usage the quota preflight ([`crate::quota`]) checks, as AWS reports
//! them: CloudFormation `DescribeAccountLimits` (`StackLimit`) and the account's stacks (from
//! the shared `DescribeStacks` listing, [`StackCache`]), Auto Scaling `DescribeAccountLimits`
//! (the group limit and the current count), Service Quotas `GetServiceQuota` (VPCs per region,
//! NAT gateways per zone; `GetAWSDefaultServiceQuota` where no applied value is recorded) with
//! EC2 `DescribeVpcs`, `DescribeNatGateways` and `DescribeSubnets` (the zones of their subnets),
//! and EC2 `DescribeAccountAttributes` (`vpc-max-elastic-ips`) with `DescribeAddresses`.

use std::collections::BTreeMap;

use aws_sdk_ec2::types::{AccountAttributeName, Filter, NatGatewayState};
use operatorkit::ResourceError;

use super::cloudformation::StackCache;
use super::{AccountClients, api_error};
use crate::quota::{Headroom, Quota};

/// The headroom of `aws`'s account for `quotas`. A limit AWS does not answer is left out (and so
/// not checked); a failed call is an error.
pub async fn headroom(
    aws: &AccountClients,
    stacks_cache: &StackCache,
    quotas: &[Quota],
) -> Result<Vec<Headroom>, ResourceError> {
    let mut out = Vec::new();
    // NAT gateways are counted once for every zone asked about.
    let mut nat_gateways: Option<(Option<u64>, BTreeMap<String, u64>)> = None;
    for quota in quotas {
        let found = match quota {
            Quota::Stacks => stacks(aws, stacks_cache).await?,
            Quota::AutoScalingGroups => groups(aws).await?,
            Quota::Vpcs => match service_quota(aws, "vpc", crate::quota::VPCS_PER_REGION).await? {
                Some(limit) => Some((limit, vpcs(aws).await?)),
                None => None,
            },
            Quota::ElasticIps => match elastic_ip_limit(aws).await? {
                Some(limit) => Some((limit, addresses(aws).await?)),
                None => None,
            },
            Quota::NatGateways(zone) => {
                if nat_gateways.is_none() {
                    let limit = service_quota(aws, "vpc", crate::quota::NAT_GATEWAYS_PER_ZONE).await?;
                    let used = match limit {
                        Some(_) => nat_gateways_by_zone(aws).await?,
                        None => BTreeMap::new(),
                    };
                    nat_gateways = Some((limit, used));
                }
                nat_gateways
                    .as_ref()
                    .and_then(|(limit, used)| limit.map(|limit| (limit, used.get(zone).copied().unwrap_or(0))))
            }
        };
        out.extend(found.map(|(limit, used)| Headroom {
            quota: quota.clone(),
            account: aws.account_id.clone(),
            limit,
            used,
        }));
    }
    Ok(out)
}

/// The value of quota `code` of service `service` applied to the account (`GetServiceQuota`),
/// else its default (`GetAWSDefaultServiceQuota`: AWS records no applied value for some quotas
/// never raised, and answers `NoSuchResourceException`); `None` when AWS knows neither.
async fn service_quota(aws: &AccountClients, service: &str, code: &str) -> Result<Option<u64>, ResourceError> {
    let applied = aws.service_quotas.get_service_quota().service_code(service).quota_code(code).send().await;
    let value = match applied {
        Ok(out) => out.quota().and_then(|q| q.value()),
        Err(e) if e.as_service_error().is_some_and(|e| e.is_no_such_resource_exception()) => {
            let default =
                aws.service_quotas.get_aws_default_service_quota().service_code(service).quota_code(code).send().await;
            match default {
                Ok(out) => out.quota().and_then(|q| q.value()),
                Err(e) if e.as_service_error().is_some_and(|e| e.is_no_such_resource_exception()) => None,
                Err(e) => return Err(api_error("ServiceQuotas", "GetAWSDefaultServiceQuota", e).into()),
            }
        }
        Err(e) => return Err(api_error("ServiceQuotas", "GetServiceQuota", e).into()),
    };
    // Quota values are whole counts sent as doubles.
    Ok(value.filter(|v| v.is_finite() && *v >= 0.0).map(|v| v.floor() as u64))
}

/// The VPCs of the account in the region (the default VPC included: it counts).
async fn vpcs(aws: &AccountClients) -> Result<u64, ResourceError> {
    let pages = aws
        .ec2
        .describe_vpcs()
        .into_paginator()
        .send()
        .try_collect()
        .await
        .map_err(|e| api_error("EC2", "DescribeVpcs", e))?;
    Ok(pages.iter().map(|p| p.vpcs().len() as u64).sum())
}

/// `vpc-max-elastic-ips` of `DescribeAccountAttributes`.
async fn elastic_ip_limit(aws: &AccountClients) -> Result<Option<u64>, ResourceError> {
    let out = aws
        .ec2
        .describe_account_attributes()
        .attribute_names(AccountAttributeName::from("vpc-max-elastic-ips"))
        .send()
        .await
        .map_err(|e| api_error("EC2", "DescribeAccountAttributes", e))?;
    Ok(out
        .account_attributes()
        .iter()
        .find(|a| a.attribute_name() == Some("vpc-max-elastic-ips"))
        .and_then(|a| a.attribute_values().first())
        .and_then(|v| v.attribute_value())
        .and_then(|v| v.trim().parse().ok()))
}

/// The Elastic IP addresses allocated in the account and region.
async fn addresses(aws: &AccountClients) -> Result<u64, ResourceError> {
    let out = aws
        .ec2
        .describe_addresses()
        .filters(Filter::builder().name("domain").values("vpc").build())
        .send()
        .await
        .map_err(|e| api_error("EC2", "DescribeAddresses", e))?;
    Ok(out.addresses().len() as u64)
}

/// The NAT gateways that count against the quota (pending, available or deleting) per zone of
/// their subnets.
async fn nat_gateways_by_zone(aws: &AccountClients) -> Result<BTreeMap<String, u64>, ResourceError> {
    let pages = aws
        .ec2
        .describe_nat_gateways()
        .into_paginator()
        .send()
        .try_collect()
        .await
        .map_err(|e| api_error("EC2", "DescribeNatGateways", e))?;
    let counted = [NatGatewayState::Pending, NatGatewayState::Available, NatGatewayState::Deleting];
    let subnets: Vec<String> = pages
        .iter()
        .flat_map(|p| p.nat_gateways())
        .filter(|g| g.state().is_some_and(|s| counted.contains(s)))
        .filter_map(|g| g.subnet_id().map(str::to_string))
        .collect();
    if subnets.is_empty() {
        return Ok(BTreeMap::new());
    }
    let mut unique = subnets.clone();
    unique.sort();
    unique.dedup();
    let pages = aws
        .ec2
        .describe_subnets()
        .filters(Filter::builder().name("subnet-id").set_values(Some(unique)).build())
        .into_paginator()
        .send()
        .try_collect()
        .await
        .map_err(|e| api_error("EC2", "DescribeSubnets", e))?;
    let zone_of: BTreeMap<&str, &str> =
        pages.iter().flat_map(|p| p.subnets()).filter_map(|s| Some((s.subnet_id()?, s.availability_zone()?))).collect();
    let mut by_zone = BTreeMap::new();
    for subnet in &subnets {
        if let Some(zone) = zone_of.get(subnet.as_str()) {
            *by_zone.entry((*zone).to_string()).or_insert(0) += 1;
        }
    }
    Ok(by_zone)
}

/// `StackLimit` and the stacks that count against it (every stack not yet deleted).
async fn stacks(aws: &AccountClients, cache: &StackCache) -> Result<Option<(u64, u64)>, ResourceError> {
    let limits = aws
        .cfn_client
        .describe_account_limits()
        .send()
        .await
        .map_err(|e| api_error("CloudFormation", "DescribeAccountLimits", e))?;
    let Some(limit) = limits
        .account_limits()
        .iter()
        .find(|l| l.name() == Some("StackLimit"))
        .and_then(|l| l.value())
        .and_then(|v| u64::try_from(v).ok())
    else {
        return Ok(None);
    };
    let used = cache.count(&aws.cache_key(), aws.cfn.as_ref()).await? as u64;
    Ok(Some((limit, used)))
}

/// `MaxNumberOfAutoScalingGroups` and `NumberOfAutoScalingGroups`.
async fn groups(aws: &AccountClients) -> Result<Option<(u64, u64)>, ResourceError> {
    let limits = aws
        .autoscaling
        .describe_account_limits()
        .send()
        .await
        .map_err(|e| api_error("AutoScaling", "DescribeAccountLimits", e))?;
    Ok(match (limits.max_number_of_auto_scaling_groups(), limits.number_of_auto_scaling_groups()) {
        (Some(limit), Some(used)) => Some((u64::try_from(limit).unwrap_or(0), u64::try_from(used).unwrap_or(0))),
        _ => None,
    })
}

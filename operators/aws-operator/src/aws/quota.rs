//! The account limits and usage the quota preflight ([`crate::quota`]) checks, as AWS reports
//! them: CloudFormation `DescribeAccountLimits` (`StackLimit`) and the account's stacks (from
//! the shared `DescribeStacks` listing, [`StackCache`]), Auto Scaling `DescribeAccountLimits` (the group limit and the current count).

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
    for quota in quotas {
        let found = match quota {
            Quota::Stacks => stacks(aws, stacks_cache).await?,
            Quota::AutoScalingGroups => groups(aws).await?,
        };
        out.extend(found.map(|(limit, used)| Headroom { quota: *quota, account: aws.account_id.clone(), limit, used }));
    }
    Ok(out)
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

//! The Auto Scaling instances the drainers watch: one batched, cached listing per account, and
//! the private DNS names of the instances once described.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::{AccountClients, AwsError, api_error};
use crate::drainers::plan::{GroupInstance, LifecycleState};

/// Instances per `DescribeInstances` call.
const DESCRIBE_BATCH: usize = 100;

/// The Auto Scaling instances of each account, read in one batched listing
/// ([`list_instances`]: `DescribeAutoScalingGroups` without names) shared by every control plane and node pool of
/// the account, and the private DNS names of instances once described (they never change).
///
/// Each reader says how old a listing it accepts: the drainers accept one as old as
/// `--drainer-poll-seconds` for an owner that is steady and settled, and one as old as
/// `--drainer-active-poll-seconds` otherwise. A steady account therefore costs one paginated
/// Auto Scaling read per drainer poll, whatever its number of clusters (not one per owner's
/// poll), and no EC2 call: `DescribeInstances` runs only for instances newly found waiting,
/// batched.
#[derive(Debug, Default)]
pub struct InstanceCache {
    entries: Mutex<HashMap<String, Arc<tokio::sync::Mutex<Entry>>>>,
}

#[derive(Debug, Default)]
struct Entry {
    read: Option<Instant>,
    instances: Vec<GroupInstance>,
    dns: BTreeMap<String, String>,
    /// Owners seen without waiting instances or DrainerConfigs: their DrainerConfigs are not
    /// listed again until one of their instances waits.
    settled: HashSet<String>,
}

impl InstanceCache {
    fn entry(&self, account: &str) -> Arc<tokio::sync::Mutex<Entry>> {
        self.entries.lock().entry(account.to_string()).or_default().clone()
    }

    /// The instances of `aws`'s account and region, listed again when the last listing is
    /// `max_age` old or older (or was invalidated).
    pub async fn instances(&self, aws: &AccountClients, max_age: Duration) -> Result<Vec<GroupInstance>, AwsError> {
        let entry = self.entry(&aws.cache_key());
        let mut e = entry.lock().await;
        if e.read.is_none_or(|t| t.elapsed() >= max_age) {
            e.instances = list_instances(aws).await?;
            e.read = Some(Instant::now());
        }
        Ok(e.instances.clone())
    }

    /// The known private DNS names of the account's instances.
    pub async fn dns(&self, aws: &AccountClients) -> BTreeMap<String, String> {
        self.entry(&aws.cache_key()).lock().await.dns.clone()
    }

    /// Describes `ids` (batched) and remembers their private DNS names; an instance EC2 does not
    /// know any more gets an empty name.
    pub async fn describe(&self, aws: &AccountClients, ids: &[String]) -> Result<(), AwsError> {
        let mut found = BTreeMap::new();
        for batch in ids.chunks(DESCRIBE_BATCH) {
            let pages = aws
                .ec2
                .describe_instances()
                .filters(
                    aws_sdk_ec2::types::Filter::builder().name("instance-id").set_values(Some(batch.to_vec())).build(),
                )
                .into_paginator()
                .send()
                .try_collect()
                .await
                .map_err(|e| api_error("EC2", "DescribeInstances", e))?;
            for i in pages.iter().flat_map(|p| p.reservations()).flat_map(|r| r.instances()) {
                if let Some(id) = i.instance_id() {
                    found.insert(id.to_string(), i.private_dns_name().unwrap_or_default().to_string());
                }
            }
        }
        let entry = self.entry(&aws.cache_key());
        let mut e = entry.lock().await;
        for id in ids {
            e.dns.insert(id.clone(), found.remove(id).unwrap_or_default());
        }
        Ok(())
    }

    /// Forget the account's listing: the next read lists again (after a completion, so that the
    /// next pass sees the instance leave).
    pub fn invalidate(&self, account: &str) {
        if let Ok(mut e) = self.entry(account).try_lock() {
            e.read = None;
        }
    }

    pub async fn is_settled(&self, account: &str, owner: &str) -> bool {
        self.entry(account).lock().await.settled.contains(owner)
    }

    pub async fn set_settled(&self, account: &str, owner: &str, settled: bool) {
        let entry = self.entry(account);
        let mut e = entry.lock().await;
        if settled {
            e.settled.insert(owner.to_string());
        } else {
            e.settled.remove(owner);
        }
    }
}

/// Every Auto Scaling instance of the account and region, with its group and lifecycle state:
/// the groups as `DescribeAutoScalingGroups` pages them (100 a page, the API's most), each with its
/// instances. A page per 100 groups, where `DescribeAutoScalingInstances` takes a page per 50
/// instances: a listing costs a fraction of the calls once pools have more than one node.
pub async fn list_instances(aws: &AccountClients) -> Result<Vec<GroupInstance>, AwsError> {
    let pages = aws
        .autoscaling
        .describe_auto_scaling_groups()
        .max_records(100)
        .into_paginator()
        .send()
        .try_collect()
        .await
        .map_err(|e| api_error("AutoScaling", "DescribeAutoScalingGroups", e))?;
    Ok(pages
        .iter()
        .flat_map(|p| p.auto_scaling_groups())
        .flat_map(|g| {
            g.instances().iter().map(|i| GroupInstance {
                instance_id: i.instance_id().unwrap_or_default().to_string(),
                group: g.auto_scaling_group_name().unwrap_or_default().to_string(),
                state: LifecycleState::parse(i.lifecycle_state().map_or("", |s| s.as_str())),
            })
        })
        .collect())
}

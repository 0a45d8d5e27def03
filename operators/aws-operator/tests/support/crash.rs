//! Crash tests: the operator killed while it works (its runtime dropped with every task wherever
//! it is, [`Fixture::kill_operator`]), and what must hold after a restart: one key, one VPC, no
//! duplicate stacks.

use std::collections::BTreeMap;
use std::time::Duration;

use aws_operator::aws::AccountClients;
use motoenv::LoggedRequest;

use super::Fixture;

/// The access key the fixture's operator signs with: its calls in moto's request log.
pub const OPERATOR_KEY: &str = "AKIATESTOPERATOR";

/// Moto's request log. The read blocks: the runtime (multi-threaded) moves its other tasks off
/// this thread meanwhile.
pub async fn request_log(f: &Fixture) -> anyhow::Result<Vec<LoggedRequest>> {
    Ok(tokio::task::block_in_place(|| f.moto.request_log())?)
}

/// A write as the kill points count it: service, action, account, how many stacks the operator
/// had created or deleted before it (successful `CreateStack` and `DeleteStack` calls since the
/// kills began), and whether it is the first or a later write of the same kind in one run (1 or
/// 2): the writes each stage repeats (a bucket's settings) are new points again once another
/// stack exists or is gone.
type WriteStep = (String, String, String, usize, usize);

/// KMS operations that change nothing in AWS, though the request log counts them as writes.
const CRYPTO: [&str; 4] = ["Encrypt", "Decrypt", "GenerateDataKey", "GenerateDataKeyWithoutPlaintext"];

/// A `CreateStack` or `DeleteStack` call that succeeded.
fn is_stack_operation(r: &LoggedRequest) -> bool {
    matches!(r.action.as_str(), "CreateStack" | "DeleteStack") && (200..300).contains(&r.status)
}

/// The operator's writes in `log` (from the start of the kills), each with its step and its index
/// in `log`; `run` is the index where the current run's requests begin.
fn write_steps(log: &[LoggedRequest], run: usize) -> Vec<(WriteStep, usize)> {
    let mut stacks_done = 0;
    let mut ranks: BTreeMap<(String, String, String, usize, bool), usize> = BTreeMap::new();
    let mut steps = Vec::new();
    for (index, r) in log.iter().enumerate() {
        if r.principal != OPERATOR_KEY {
            continue;
        }
        if r.is_write() && !(r.service == "kms" && CRYPTO.contains(&r.action.as_str())) {
            let kind = (r.service.clone(), r.action.clone(), r.account.clone(), stacks_done);
            // Ranks count within the current run (the requests from `run` on).
            let rank = ranks.entry((kind.0.clone(), kind.1.clone(), kind.2.clone(), kind.3, index >= run)).or_default();
            *rank += 1;
            steps.push(((kind.0, kind.1, kind.2, kind.3, (*rank).min(2)), index));
        }
        if is_stack_operation(r) {
            stacks_done += 1;
        }
    }
    steps
}

/// Where a kill landed.
#[derive(Debug)]
pub struct Kill {
    /// The write it landed at, or the time after the start when no new write was left.
    pub at: String,
    /// Successful stack operations before it (since the kills began).
    pub stack_operations: usize,
    /// Whether the work was done already when the operator was killed (`done`).
    pub after_the_work: bool,
}

/// Start the operator `kills` times and kill it each time at the first AWS write that no earlier
/// run reached: a write of a service, action and account that no earlier run made with as many
/// stacks created or deleted before it (or made once where this run makes it again). A restarted
/// operator repeats or skips what earlier runs did, so each kill lands further into the work, at
/// a write moto has received and may not have answered yet: the first key, bucket and stack
/// calls, and the writes of each stage again as the stacks come (or go). Once the work's
/// `stack_operations` stack operations are all done, few new writes are left: later runs are
/// killed at a random moment of their first 250 ms instead, while the restarted operator
/// re-reads the cluster. A run with no new write within `patience` is killed then. After each
/// kill, `done` tells whether the work was complete already.
pub async fn kill_during_work(
    f: &mut Fixture,
    kills: usize,
    stack_operations: usize,
    patience: Duration,
    done: impl AsyncFn(&Fixture) -> anyhow::Result<bool>,
) -> anyhow::Result<Vec<Kill>> {
    let first = request_log(f).await?.len();
    let mut reached: std::collections::BTreeSet<WriteStep> = Default::default();
    let mut landed = Vec::new();
    for _ in 0..kills {
        let log = request_log(f).await?;
        let start = log.len();
        let run = start - first;
        let stacks_done = log[first..].iter().filter(|r| r.principal == OPERATOR_KEY && is_stack_operation(r)).count();
        f.start_operator().await?;
        let started = tokio::time::Instant::now();
        if stacks_done >= stack_operations {
            let delay = Duration::from_millis(rand::random_range(20..250));
            tokio::time::sleep(delay).await;
            f.kill_operator().await;
            let after_the_work = done(f).await?;
            landed.push(Kill {
                at: format!("{} ms after the start", delay.as_millis()),
                stack_operations: stacks_done,
                after_the_work,
            });
            continue;
        }
        let (at, stack_operations) = loop {
            let log = request_log(f).await?;
            let since = &log[first.min(log.len())..];
            let new = write_steps(since, run).into_iter().find(|(step, i)| *i >= run && !reached.contains(step));
            if let Some((step, i)) = new {
                f.kill_operator().await;
                let at = format!(
                    "{} {}{} in account {} (answered: {})",
                    step.0,
                    step.1,
                    if step.4 > 1 { " again" } else { "" },
                    if step.2.is_empty() { "of the operator's key" } else { &step.2 },
                    match since[i].status {
                        0 => "not yet".to_string(),
                        status => status.to_string(),
                    }
                );
                // Everything this run wrote up to the kill counts as reached.
                let log = request_log(f).await?;
                reached.extend(
                    write_steps(&log[first.min(log.len())..], run)
                        .into_iter()
                        .filter(|(_, i)| *i >= run)
                        .map(|(s, _)| s),
                );
                break (at, step.3);
            }
            if started.elapsed() > patience {
                f.kill_operator().await;
                break (format!("no new write within {patience:?}"), stacks_done);
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        let after_the_work = done(f).await?;
        landed.push(Kill { at, stack_operations, after_the_work });
    }
    Ok(landed)
}

/// The KMS keys of cluster `id` in `tenant` (tagged with it; moto also creates an untagged
/// default key of its own when encrypted EBS volumes are launched) that are not scheduled for
/// deletion, and a description of every key, for failure messages.
pub async fn usable_cluster_keys(tenant: &AccountClients, id: &str) -> anyhow::Result<(usize, Vec<String>)> {
    let keys = tenant.kms.list_keys().send().await?;
    let (mut usable, mut detail) = (0, Vec::new());
    for k in keys.keys() {
        let key_id = k.key_id().unwrap_or_default();
        let meta = tenant.kms.describe_key().key_id(key_id).send().await?;
        let tags = tenant.kms.list_resource_tags().key_id(key_id).send().await?;
        let ours = tags.tags().iter().any(|t| t.tag_key() == "giantswarm.io/cluster" && t.tag_value() == id);
        if ours && meta.key_metadata().is_some_and(|m| m.deletion_date().is_none()) {
            usable += 1;
        }
        detail.push(format!(
            "{key_id}: tags {:?} state {:?} deletion {:?}",
            tags.tags(),
            meta.key_metadata().and_then(|m| m.key_state()),
            meta.key_metadata().and_then(|m| m.deletion_date())
        ));
    }
    Ok((usable, detail))
}

/// The aliases `alias/<id>` in `tenant`.
pub async fn cluster_key_aliases(tenant: &AccountClients, id: &str) -> anyhow::Result<usize> {
    let aliases = tenant.kms.list_aliases().send().await?;
    let alias = aws_stacks::names::kms_alias(id);
    Ok(aliases.aliases().iter().filter(|a| a.alias_name() == Some(alias.as_str())).count())
}

/// The VPCs tagged with cluster `id` in `tenant`.
pub async fn cluster_vpcs(tenant: &AccountClients, id: &str) -> anyhow::Result<Vec<String>> {
    let vpcs = tenant.ec2.describe_vpcs().send().await?;
    Ok(vpcs
        .vpcs()
        .iter()
        .filter(|v| v.tags().iter().any(|t| t.key() == Some("giantswarm.io/cluster") && t.value() == Some(id)))
        .filter_map(|v| v.vpc_id().map(str::to_string))
        .collect())
}

/// Every stack CloudFormation lists in `aws` (`ListStacks`: deleted ones too), by name, with
/// their statuses.
pub async fn listed_stacks(aws: &AccountClients) -> anyhow::Result<BTreeMap<String, Vec<String>>> {
    let mut stacks: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut token = None;
    loop {
        let page = aws.cfn_client.list_stacks().set_next_token(token).send().await?;
        for s in page.stack_summaries() {
            let status = s.stack_status().map(|s| s.as_str().to_string()).unwrap_or_default();
            stacks.entry(s.stack_name().unwrap_or_default().to_string()).or_default().push(status);
        }
        token = page.next_token().map(str::to_string);
        if token.is_none() {
            return Ok(stacks);
        }
    }
}

/// The operator's `CreateStack` calls in `log` that moto answered with success, by account.
pub fn stack_creates(log: &[LoggedRequest]) -> BTreeMap<String, usize> {
    let mut creates = BTreeMap::new();
    for r in log {
        if r.principal == OPERATOR_KEY && r.action == "CreateStack" && (200..300).contains(&r.status) {
            *creates.entry(r.account.clone()).or_default() += 1;
        }
    }
    creates
}

//! Auto Scaling for the unhealthy-node terminator and max-age replacement: which instances are
//! in service in their group (and since when), and terminating one in its group so that the
//! group replaces it.

use std::collections::BTreeMap;

use super::{AccountClients, AwsError, api_error};

/// Instance ids per `DescribeAutoScalingInstances` call (the API's limit).
const DESCRIBE_BATCH: usize = 50;

/// The lifecycle state in its group of each of `ids` that is in an Auto Scaling group
/// (`InService`, `Terminating:Wait`, …); an instance AWS does not know, or that is in no group,
/// is absent.
pub async fn group_states(aws: &AccountClients, ids: &[String]) -> Result<BTreeMap<String, String>, AwsError> {
    let mut out = BTreeMap::new();
    for batch in ids.chunks(DESCRIBE_BATCH) {
        let page = aws
            .autoscaling
            .describe_auto_scaling_instances()
            .set_instance_ids(Some(batch.to_vec()))
            .send()
            .await
            .map_err(|e| api_error("AutoScaling", "DescribeAutoScalingInstances", e))?;
        for i in page.auto_scaling_instances() {
            if let (Some(id), Some(state)) = (i.instance_id(), i.lifecycle_state()) {
                out.insert(id.to_string(), state.to_string());
            }
        }
    }
    Ok(out)
}

/// What came of [`terminate_in_group`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Termination {
    /// The group terminates the instance and launches a replacement (its desired capacity is
    /// kept); the group's name.
    Started {
        /// The instance's Auto Scaling group.
        group: String,
    },
    /// The instance is no longer in a group (gone, or leaving already): nothing to do.
    Gone,
}

/// Terminate `instance` in its Auto Scaling group without decrementing the group's desired
/// capacity (`ShouldDecrementDesiredCapacity=false`), so the group launches a replacement.
/// The group's terminating lifecycle hook, if any, still holds the instance until the drainers
/// completed its drain.
pub async fn terminate_in_group(aws: &AccountClients, instance: &str) -> Result<Termination, AwsError> {
    let done = aws
        .autoscaling
        .terminate_instance_in_auto_scaling_group()
        .instance_id(instance)
        .should_decrement_desired_capacity(false)
        .send()
        .await
        .map_err(|e| api_error("AutoScaling", "TerminateInstanceInAutoScalingGroup", e));
    match done {
        Ok(out) => {
            let group = out.activity().and_then(|a| a.auto_scaling_group_name()).unwrap_or_default().to_string();
            Ok(Termination::Started { group })
        }
        // AWS answers an instance that is in no group (or no longer exists) with a validation
        // error; the caller checked just before that it was in service, so it went meanwhile.
        Err(e) if e.code() == "ValidationError" => Ok(Termination::Gone),
        Err(e) => Err(e),
    }
}

/// The instances of Auto Scaling group `group` with their lifecycle state and EC2 launch time
/// (Unix seconds), for max-age replacement; empty when the group does not exist. An instance
/// EC2 no longer describes is left out.
pub async fn group_instances(aws: &AccountClients, group: &str) -> Result<Vec<(String, String, i64)>, AwsError> {
    let out = aws
        .autoscaling
        .describe_auto_scaling_groups()
        .auto_scaling_group_names(group)
        .send()
        .await
        .map_err(|e| api_error("AutoScaling", "DescribeAutoScalingGroups", e))?;
    let states: BTreeMap<String, String> = out
        .auto_scaling_groups()
        .iter()
        .flat_map(|g| g.instances())
        .filter_map(|i| Some((i.instance_id()?.to_string(), i.lifecycle_state()?.as_str().to_string())))
        .collect();
    if states.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<String> = states.keys().cloned().collect();
    let mut launched = BTreeMap::new();
    for batch in ids.chunks(DESCRIBE_BATCH) {
        let page = aws
            .ec2
            .describe_instances()
            .set_instance_ids(Some(batch.to_vec()))
            .send()
            .await
            .map_err(|e| api_error("EC2", "DescribeInstances", e))?;
        for i in page.reservations().iter().flat_map(|r| r.instances()) {
            if let (Some(id), Some(at)) = (i.instance_id(), i.launch_time()) {
                launched.insert(id.to_string(), at.secs());
            }
        }
    }
    Ok(states
        .into_iter()
        .filter_map(|(id, state)| {
            let at = *launched.get(&id)?;
            Some((id, state, at))
        })
        .collect())
}

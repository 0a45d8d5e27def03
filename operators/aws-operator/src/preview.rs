//! `aws-operator plan`: what the operator would change in the live stacks of the clusters in
//! some CR files, shown through CloudFormation change sets and the operator's own template diff,
//! without changing anything.
//!
//! The desired stacks come from the same pure planner as `aws-operator render` ([`crate::plan`]),
//! with what it cannot know offline read from AWS as the daemon reads it: the account ids (STS),
//! the management VPC and its route tables (EC2), the stack outputs a template references
//! (`DescribeStacks`) and the cluster's key (KMS). For each stack that exists and differs, a
//! change set of type `UPDATE` is created (named explicitly: moto would make a `CREATE` change
//! set and a second stack), waited for and described; every change set the command made is
//! deleted before it exits, on errors too.
//!
//! Exit codes: 0 no stack would change, 2 some stack would be created or updated, 1 an error.
//!
//! What the live view does not change: a node pool's group keeps its deployed desired capacity
//! (the daemon sends the live one), so an autoscaled pool does not show its size as a change;
//! a stack whose resources are unchanged and whose outputs differ is reported as unchanged.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use aws_stacks::names::{self, Account, StackKind};
use aws_stacks::state::TEMPLATE_HASH_OUTPUT;
use serde_json::Value;

use crate::approval::{ChangeSetChange, ResourceChange, template_diff};
use crate::aws::cloudformation::StackRequest;
use crate::aws::{AccountClients, AwsFactory};
use crate::plan::{Objects, PlannedStack, Settings, plan};
use crate::render::{AwsArgs, PlanningArgs, RenderArgs};

/// The exit code when some stack would change.
pub const EXIT_CHANGES: u8 = 2;

/// How `aws-operator plan` prints.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OutputFormat {
    /// Lines for people.
    #[default]
    Text,
    /// One JSON document.
    Json,
}

/// Arguments of `aws-operator plan`: render's planning flags and the daemon's AWS flags.
#[derive(clap::Args, Debug, Clone)]
pub struct PlanArgs {
    /// YAML files with AWSCluster, AWSControlPlane, AWSMachineDeployment, NetworkPool and
    /// Release objects (as `kubectl get -o yaml` gives them: the recorded CIDRs are kept).
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// The operator's settings the stacks depend on, as for `render` (`--installation` names
    /// the management VPC by its Name tag).
    #[command(flatten)]
    pub planning: PlanningArgs,
    /// How to reach AWS: the daemon's flags.
    #[command(flatten)]
    pub aws: crate::config::AwsAccessArgs,
    /// Role to assume in the clusters' tenant account, as their credential Secret names it
    /// (`aws.awsoperator.arn`); none: the tenant account is the management account.
    #[arg(long)]
    pub tenant_role_arn: Option<String>,
    /// Plan only the stack with this name.
    #[arg(long, value_name = "NAME")]
    pub stack: Option<String>,
    /// `text` or `json`.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,
    /// How long to wait for CloudFormation to compute a change set.
    #[arg(long, default_value_t = 120)]
    pub wait_seconds: u64,
}

/// What would happen to one stack.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StackPlan {
    /// The stack name.
    pub stack: String,
    /// `tenant` or `controlPlane`.
    pub account: String,
    /// `unchanged`, `create` or `update`.
    pub action: &'static str,
    /// CloudFormation's resource changes (updates only).
    pub changes: Vec<ChangeSetChange>,
    /// The operator's own diff of the deployed and the desired template (updates only).
    pub diff: Vec<ResourceChange>,
}

impl StackPlan {
    /// Whether the stack would change.
    pub fn changes_anything(&self) -> bool {
        self.action != "unchanged"
    }
}

/// Replace the placeholders the offline planner leaves in `value` (`<output KEY of STACK>`,
/// `<ARN of KMS key alias/ID>`, `<VPC tagged Name=X>`, …) with what `known` holds for their
/// text; unknown ones stay. Pure, so the live plan and its tests share it.
pub fn resolve_placeholders(value: &mut Value, known: &BTreeMap<String, String>) {
    match value {
        Value::String(s) if s.contains('<') => {
            let mut out = String::with_capacity(s.len());
            let mut rest = s.as_str();
            while let Some(start) = rest.find('<') {
                out.push_str(&rest[..start]);
                let tail = &rest[start + 1..];
                match tail.find('>').map(|end| (&tail[..end], end)) {
                    Some((inner, end)) if known.contains_key(inner) => {
                        out.push_str(&known[inner]);
                        rest = &tail[end + 1..];
                    }
                    _ => {
                        out.push('<');
                        rest = tail;
                    }
                }
            }
            out.push_str(rest);
            *s = out;
        }
        Value::Array(items) => items.iter_mut().for_each(|v| resolve_placeholders(v, known)),
        Value::Object(map) => map.values_mut().for_each(|v| resolve_placeholders(v, known)),
        _ => {}
    }
}

/// Keep the deployed `DesiredCapacity` of every Auto Scaling group of `desired` that `deployed`
/// has too: the daemon sends a pool's live desired capacity, not the planner's minimum.
pub fn keep_deployed_capacity(desired: &mut Value, deployed: &Value) {
    let Some(resources) = desired.get_mut("Resources").and_then(Value::as_object_mut) else { return };
    for (id, resource) in resources {
        if resource.get("Type").and_then(Value::as_str) != Some("AWS::AutoScaling::AutoScalingGroup") {
            continue;
        }
        let live = deployed.pointer(&format!("/Resources/{id}/Properties/DesiredCapacity")).cloned();
        if let (Some(live), Some(props)) = (live, resource.get_mut("Properties").and_then(Value::as_object_mut)) {
            props.insert("DesiredCapacity".into(), live);
        }
    }
}

/// Run `aws-operator plan`; the exit code is 0 (no changes) or [`EXIT_CHANGES`].
pub async fn run(args: &PlanArgs, out: &mut impl Write) -> anyhow::Result<u8> {
    let factory = AwsFactory::new(args.aws.settings(Some(Duration::from_secs(60)))).await?;
    let cp = factory.control_plane(&args.aws.region).await.context("the management account")?;
    let tenant = match &args.tenant_role_arn {
        Some(arn) => factory.tenant(arn, &args.aws.region).await.context("the tenant account")?,
        None => cp.clone(),
    };
    let (vpc, vpc_cidr) =
        crate::aws::ec2::control_plane_vpc(&cp, &args.planning.installation).await?.with_context(|| {
            format!("no VPC tagged Name={} in the management account: check --installation", args.planning.installation)
        })?;
    let tables = crate::aws::ec2::control_plane_route_tables(&cp, &vpc, &args.aws.route_tables).await?;
    let render = RenderArgs {
        files: args.files.clone(),
        aws: Box::new(AwsArgs {
            tenant_account_id: tenant.account_id.clone(),
            control_plane_account_id: cp.account_id.clone(),
            control_plane_vpc_cidr: Some(vpc_cidr),
            route_tables: tables.iter().map(|(id, name)| format!("{id}={name}")).collect(),
        }),
        planning: args.planning.clone(),
        stack: args.stack.clone(),
        summary: false,
    };
    let settings = Settings::from_args(&render)?;
    let objects = Objects::load(&args.files)?;
    let plans = plan(&objects, &settings)?;
    anyhow::ensure!(!plans.is_empty(), "no AWSCluster in the given files: nothing to plan");
    for p in &plans {
        anyhow::ensure!(
            p.region == args.aws.region,
            "{} is in region {}: plan the clusters of one region at a time with --region",
            p.cluster,
            p.region
        );
    }

    let mut made: Vec<(AccountClients, String, String)> = Vec::new();
    let result = plan_stacks(args, &plans, &cp, &tenant, &vpc, &mut made).await;
    // Every change set made is deleted, whatever happened.
    let mut cleanup = Vec::new();
    for (clients, stack, change_set) in &made {
        if let Err(e) = clients.cfn.delete_change_set(stack, change_set).await {
            cleanup.push(format!("change set {change_set} of stack {stack}: {e}"));
        }
    }
    let results = result?;
    anyhow::ensure!(cleanup.is_empty(), "deleting the change sets this command made failed: {}", cleanup.join("; "));

    let changed = results.iter().flat_map(|(_, stacks)| stacks).any(StackPlan::changes_anything);
    match args.output {
        OutputFormat::Json => {
            let doc: Vec<Value> = results
                .iter()
                .map(|(cluster, stacks)| serde_json::json!({"cluster": cluster, "stacks": stacks}))
                .collect();
            writeln!(
                out,
                "{}",
                serde_json::to_string_pretty(&serde_json::json!({"clusters": doc, "changes": changed}))?
            )?;
        }
        OutputFormat::Text => write_text(out, &results)?,
    }
    Ok(if changed { EXIT_CHANGES } else { 0 })
}

async fn plan_stacks(
    args: &PlanArgs,
    plans: &[crate::plan::ClusterPlan],
    cp: &AccountClients,
    tenant: &AccountClients,
    vpc: &str,
    made: &mut Vec<(AccountClients, String, String)>,
) -> anyhow::Result<Vec<(String, Vec<StackPlan>)>> {
    let mut results = Vec::new();
    for cluster in plans {
        // What the planner could not know, from the live stacks and the key.
        let mut known = BTreeMap::new();
        known.insert(format!("VPC tagged Name={}", args.planning.installation), vpc.to_string());
        let mut live = BTreeMap::new();
        for stack in &cluster.stacks {
            let clients = clients_of(stack, cp, tenant);
            let view = clients.cfn.describe(&stack.name).await?;
            if let Some(view) = &view {
                for (key, value) in &view.outputs {
                    known.insert(format!("output {key} of {}", stack.name), value.clone());
                }
            }
            live.insert(stack.name.clone(), view.is_some());
            if stack.kind == StackKind::Tccp
                && let Some(id) = stack.name.strip_prefix("cluster-").and_then(|s| s.strip_suffix("-tccp"))
            {
                let alias = names::kms_alias(id);
                if let Some((arn, _)) = crate::aws::kms::describe_key(tenant, &alias).await? {
                    known.insert(format!("ARN of KMS key {alias}"), arn);
                }
            }
        }
        let mut stacks = Vec::new();
        for stack in cluster.stacks.iter().filter(|s| args.stack.as_ref().is_none_or(|n| n == &s.name)) {
            let clients = clients_of(stack, cp, tenant);
            let account = match stack.kind.account() {
                Account::Tenant => "tenant",
                Account::ControlPlane => "controlPlane",
            };
            let mut entry = StackPlan {
                stack: stack.name.clone(),
                account: account.into(),
                action: "unchanged",
                changes: Vec::new(),
                diff: Vec::new(),
            };
            if !live.get(&stack.name).copied().unwrap_or(false) {
                entry.action = "create";
                stacks.push(entry);
                continue;
            }
            let deployed = clients.cfn.template(&stack.name).await?.unwrap_or_default();
            let deployed: Value = serde_json::from_str(&deployed)
                .with_context(|| format!("the deployed template of stack {} is not JSON", stack.name))?;
            let mut desired = stack.template.to_value();
            resolve_placeholders(&mut desired, &known);
            keep_deployed_capacity(&mut desired, &deployed);
            entry.diff = template_diff(&deployed, &desired);
            if entry.diff.is_empty() {
                stacks.push(entry);
                continue;
            }
            entry.action = "update";
            entry.changes = change_set(args, clients, stack, &desired, made).await?;
            stacks.push(entry);
        }
        results.push((cluster.cluster.clone(), stacks));
    }
    Ok(results)
}

fn clients_of<'a>(stack: &PlannedStack, cp: &'a AccountClients, tenant: &'a AccountClients) -> &'a AccountClients {
    match stack.kind.account() {
        Account::Tenant => tenant,
        Account::ControlPlane => cp,
    }
}

/// Create an `UPDATE` change set of `stack` to `desired`, wait for it and return its changes;
/// the change set is recorded in `made` as soon as it is asked for.
async fn change_set(
    args: &PlanArgs,
    clients: &AccountClients,
    stack: &PlannedStack,
    desired: &Value,
    made: &mut Vec<(AccountClients, String, String)>,
) -> anyhow::Result<Vec<ChangeSetChange>> {
    let mut desired = desired.clone();
    // The hash output describes the template as resolved here, not the planner's.
    if let Some(outputs) = desired.get_mut("Outputs").and_then(Value::as_object_mut) {
        outputs.remove(TEMPLATE_HASH_OUTPUT);
    }
    let body = serde_json::to_string(&desired)?;
    anyhow::ensure!(
        body.len() <= aws_stacks::cfn::MAX_TEMPLATE_BODY_BYTES,
        "the template of stack {} is {} bytes, over the {} a change set takes inline",
        stack.name,
        body.len(),
        aws_stacks::cfn::MAX_TEMPLATE_BODY_BYTES
    );
    let nonce: u32 = rand::random();
    let name = format!("aws-operator-plan-{}-{nonce:08x}", stack.name);
    let request = StackRequest {
        name: stack.name.clone(),
        template_body: Some(body),
        template_url: None,
        tags: stack.tags.iter().cloned().collect(),
        named_iam: !matches!(stack.kind, StackKind::Tcnpf | StackKind::Tccpf),
        termination_protection: true,
    };
    made.push((clients.clone(), stack.name.clone(), name.clone()));
    clients.cfn.create_change_set(&request, &name).await?;
    let deadline = Instant::now() + Duration::from_secs(args.wait_seconds);
    loop {
        let view = clients
            .cfn
            .describe_change_set(&stack.name, &name)
            .await?
            .with_context(|| format!("the change set {name} of stack {} vanished", stack.name))?;
        if !view.computing() {
            if view.status == "FAILED" {
                let reason = view.status_reason.unwrap_or_default();
                // CloudFormation fails a change set that changes nothing.
                anyhow::ensure!(
                    reason.contains("didn't contain changes") || reason.contains("No updates"),
                    "the change set {name} of stack {} failed: {reason}",
                    stack.name
                );
            }
            return Ok(view.changes);
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "the change set {name} of stack {} was not computed in time",
            stack.name
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

fn write_text(out: &mut impl Write, results: &[(String, Vec<StackPlan>)]) -> std::io::Result<()> {
    for (cluster, stacks) in results {
        writeln!(out, "# {cluster}")?;
        for s in stacks {
            match s.action {
                "unchanged" => writeln!(out, "= {} ({}): no changes", s.stack, s.account)?,
                "create" => writeln!(out, "+ {} ({}): would be created", s.stack, s.account)?,
                _ => {
                    let count = |a: &str| s.changes.iter().filter(|c| c.action == a).count();
                    writeln!(
                        out,
                        "~ {} ({}): {} added, {} modified, {} removed",
                        s.stack,
                        s.account,
                        count("Add"),
                        count("Modify"),
                        count("Remove")
                    )?;
                    for c in &s.changes {
                        let own = s.diff.iter().find(|d| d.logical_id == c.logical_id);
                        let sign = match c.action.as_str() {
                            "Add" => "+",
                            "Remove" => "-",
                            _ => "~",
                        };
                        let replacement = match (&c.replacement, own) {
                            (Some(r), _) => format!("replacement {r} (CloudFormation)"),
                            (None, Some(o)) => format!("replacement {} (estimated)", o.replacement.as_str()),
                            (None, None) => "replacement unknown".into(),
                        };
                        let rolls = if own.is_some_and(|o| o.replaces_instances) { ", replaces instances" } else { "" };
                        writeln!(out, "    {sign} {} ({}): {replacement}{rolls}", c.logical_id, c.resource_type)?;
                        let paths = if c.paths.is_empty() {
                            own.map(|o| o.paths.clone()).unwrap_or_default()
                        } else {
                            c.paths.clone()
                        };
                        for p in paths {
                            writeln!(out, "        {p}")?;
                        }
                    }
                    // What the diff sees and the change set does not list.
                    for d in s.diff.iter().filter(|d| !s.changes.iter().any(|c| c.logical_id == d.logical_id)) {
                        writeln!(
                            out,
                            "    ? {} ({}): {:?} in the template diff only",
                            d.logical_id, d.resource_type, d.action
                        )?;
                        for p in &d.paths {
                            writeln!(out, "        {p}")?;
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn placeholders_are_resolved_inside_strings_and_unknown_ones_stay() {
        let known = BTreeMap::from([
            ("output VPCID of cluster-a1b2c-tccp".to_string(), "vpc-1".to_string()),
            ("ARN of KMS key alias/a1b2c".to_string(), "arn:aws:kms:k".to_string()),
        ]);
        let mut v = json!({"Resources": {"A": {"Properties": {
            "VpcId": "<output VPCID of cluster-a1b2c-tccp>",
            "Key": ["x <ARN of KMS key alias/a1b2c> y", 3],
            "Other": "<output Nope of s> and a < b",
        }}}});
        resolve_placeholders(&mut v, &known);
        let p = &v["Resources"]["A"]["Properties"];
        assert_eq!(p["VpcId"], "vpc-1");
        assert_eq!(p["Key"][0], "x arn:aws:kms:k y");
        assert_eq!(p["Other"], "<output Nope of s> and a < b");
    }

    #[test]
    fn a_group_keeps_its_deployed_desired_capacity() {
        let deployed = json!({"Resources": {"G": {"Type": "AWS::AutoScaling::AutoScalingGroup", "Properties": {"DesiredCapacity": "4"}}}});
        let mut desired = json!({"Resources": {
            "G": {"Type": "AWS::AutoScaling::AutoScalingGroup", "Properties": {"DesiredCapacity": "1", "MaxSize": "5"}},
            "New": {"Type": "AWS::AutoScaling::AutoScalingGroup", "Properties": {"DesiredCapacity": "1"}}
        }});
        keep_deployed_capacity(&mut desired, &deployed);
        assert_eq!(desired["Resources"]["G"]["Properties"]["DesiredCapacity"], "4");
        assert_eq!(desired["Resources"]["New"]["Properties"]["DesiredCapacity"], "1", "a new group has none deployed");
        assert!(
            template_diff(&deployed, &desired).iter().all(|c| c.logical_id != "G" || c.paths == ["Properties.MaxSize"])
        );
    }
}

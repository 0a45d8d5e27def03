//! The approval gate on a legacy cluster, against moto and testenv: an `AWSConfig` that asks for
//! approval (`aws-operator.giantswarm.io/update-approval: required`) is created at once (creates
//! never wait), and its Release upgrade then waits: `guest-main`'s update is held as a change
//! set, with its plan in `status.stacks` and the `UpdatePending` condition naming the command
//! that approves it; a malformed approval runs nothing and is named; the approved plan runs, the
//! master is replaced, and `host-main` waits for its own plan in turn. The node-pools clusters'
//! gate, through the same code.

mod support;

use std::time::Duration;

use apis::aws_config::AWSConfig;
use aws_operator::approval::{APPROVED_PLAN, UPDATE_APPROVAL, UPDATE_PENDING};
use aws_stacks::stacks::legacy::{self, LegacyStack};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::Api;
use kube::api::{Patch, PatchParams};
use support::legacy::{apply, installation_zone, legacy_cluster, relabel, wait_created};
use support::*;

const ID: &str = "lgap1";

fn condition(c: &AWSConfig, type_: &str) -> Option<Condition> {
    c.status.as_ref()?.conditions.iter().find(|c| c.type_ == type_).cloned()
}

fn pending(c: &AWSConfig, stack: &str) -> Option<apis::aws::PendingUpdate> {
    c.status.as_ref()?.stacks.iter().find(|e| e.name == stack).and_then(|e| e.pending_update.clone())
}

async fn annotate(api: &Api<AWSConfig>, key: &str, value: &str) -> anyhow::Result<()> {
    let patch = serde_json::json!({"metadata": {"annotations": {key: value}}});
    api.patch(ID, &PatchParams::default(), &Patch::Merge(&patch)).await?;
    Ok(())
}

/// The `TemplateHash` output of `stack` in `aws`.
async fn deployed_hash(aws: &aws_operator::aws::AccountClients, stack: &str) -> anyhow::Result<String> {
    let view = aws.cfn.describe(stack).await?.ok_or_else(|| anyhow::anyhow!("no stack {stack}"))?;
    Ok(view.outputs.get("TemplateHash").cloned().unwrap_or_default())
}

/// The master group's instances.
async fn masters(tenant: &aws_operator::aws::AccountClients) -> anyhow::Result<Vec<String>> {
    let groups = tenant.autoscaling.describe_auto_scaling_groups().send().await?;
    Ok(groups
        .auto_scaling_groups()
        .iter()
        .filter(|g| g.tags().iter().any(|t| t.key() == Some("Name") && t.value() == Some(&format!("{ID}-master"))))
        .flat_map(|g| g.instances().iter().filter_map(|i| i.instance_id().map(str::to_owned)))
        .collect())
}

/// Wait until `stack`'s update waits for approval; its plan.
async fn held(f: &Fixture, api: &Api<AWSConfig>, stack: &str) -> anyhow::Result<(Condition, apis::aws::PendingUpdate)> {
    let waited = eventually(60, &format!("{stack}'s update to wait for approval"), || async {
        let c = api.get(ID).await?;
        Ok(match (condition(&c, UPDATE_PENDING), pending(&c, stack)) {
            (Some(cond), Some(plan)) if cond.status == "True" => Some((cond, plan)),
            _ => None,
        })
    })
    .await;
    match waited {
        Ok(w) => Ok(w),
        Err(e) => {
            let status = api.get(ID).await.ok().and_then(|c| serde_json::to_string(&c.status).ok());
            anyhow::bail!("{e}\n{status:?}\n{}", dump(&f.client).await)
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_upgrade_waits_for_its_approved_plans() -> anyhow::Result<()> {
    let mut f = Fixture::start_with(motoenv::Launcher::from_env().time_scale(0.002)).await?;
    f.apply_basics().await?;
    f.release("20.1.0", FLATCAR_NEXT, VERSION).await?;
    f.credential_secret(ID).await?;
    let cp = f.control_plane_clients().await?;
    let tenant = f.tenant_clients().await?;
    installation_zone(&cp).await?;
    let mut config = legacy_cluster(&f, ID).await?;
    config.metadata.annotations.get_or_insert_default().insert(UPDATE_APPROVAL.into(), "required".into());
    f.start_operator().await?;
    apply(&f, &config).await?;
    wait_created(&f, ID, 300).await?;
    let api: Api<AWSConfig> = Api::namespaced(f.client.clone(), NS);
    let guest = legacy::stack_name(ID, LegacyStack::GuestMain);
    let host = legacy::stack_name(ID, LegacyStack::HostMain);
    let guest_before = deployed_hash(&tenant, &guest).await?;
    let host_before = deployed_hash(&cp, &host).await?;
    let master_before = masters(&tenant).await?;
    assert_eq!(master_before.len(), 1, "{master_before:?}");

    // The upgrade waits: guest-main's plan, and the command that approves it.
    relabel(&f, ID, "20.1.0", VERSION).await?;
    let (cond, plan) = held(&f, &api, &guest).await?;
    assert_eq!(cond.reason, "AwaitingApproval", "{cond:?}");
    let command =
        format!("kubectl annotate awsconfigs.provider.giantswarm.io -n {NS} {ID} {APPROVED_PLAN}={}", plan.plan_hash);
    assert!(cond.message.contains(&command), "{cond:?}");
    assert!(
        plan.instance_rolls.iter().any(|g| g.contains("ControlPlane"))
            && plan.instance_rolls.contains(&"WorkerAutoScalingGroup".to_string()),
        "the master's and the workers' groups roll: {plan:?}"
    );
    let c = api.get(ID).await?;
    let ready_cond = condition(&c, "Ready").expect("Ready");
    assert_eq!((ready_cond.status.as_str(), ready_cond.reason.as_str()), ("False", UPDATE_PENDING), "{ready_cond:?}");

    // A malformed approval runs nothing, and says what to write.
    annotate(&api, APPROVED_PLAN, "looks-good").await?;
    let invalid = eventually(30, "the InvalidApproval condition", || async {
        let c = api.get(ID).await?;
        Ok(condition(&c, UPDATE_PENDING).filter(|c| c.reason == "InvalidApproval"))
    })
    .await?;
    assert!(invalid.message.contains(APPROVED_PLAN) && invalid.message.contains(&plan.plan_hash), "{invalid:?}");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(deployed_hash(&tenant, &guest).await?, guest_before, "guest-main waited");
    assert_eq!(masters(&tenant).await?, master_before, "nothing rolled");

    // The approved plan runs and the master is replaced. host-main's update (its outputs name
    // the Release) is approved in turn if it waits for its own plan.
    annotate(&api, APPROVED_PLAN, &plan.plan_hash).await?;
    let updated = eventually(120, "the cluster to be Updated with nothing pending", || async {
        let c = api.get(ID).await?;
        if let Some(host_plan) = pending(&c, &host) {
            let approved = c.metadata.annotations.as_ref().and_then(|a| a.get(APPROVED_PLAN)).cloned();
            if approved.as_deref() != Some(host_plan.plan_hash.as_str()) {
                annotate(&api, APPROVED_PLAN, &host_plan.plan_hash).await?;
            }
        }
        let lifecycle = c.status.as_ref().map(|s| s.cluster.clone()).unwrap_or_default();
        let done = lifecycle.has_condition(apis::cluster_status::ClusterCondition::Updated)
            && condition(&c, UPDATE_PENDING).is_some_and(|c| c.status == "False")
            && ready(c.status.as_ref().map(|s| &s.conditions));
        Ok(done.then_some(()))
    })
    .await;
    if let Err(e) = updated {
        let status = api.get(ID).await.ok().and_then(|c| serde_json::to_string(&c.status).ok());
        anyhow::bail!("{e}\n{status:?}\n{}", dump(&f.client).await);
    }
    assert_ne!(deployed_hash(&tenant, &guest).await?, guest_before, "guest-main runs the new template");
    assert_ne!(deployed_hash(&cp, &host).await?, host_before, "host-main runs the new template");
    let after = masters(&tenant).await?;
    assert!(after.len() == 1 && after != master_before, "the master was replaced: {master_before:?} → {after:?}");
    Ok(())
}

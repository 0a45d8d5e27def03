//! The approval gate against moto and testenv: a Release upgrade of a cluster whose AWSCluster
//! asks for approval (`aws-operator.giantswarm.io/update-approval: required`) waits with a
//! summary in status, refuses approvals that are not the pending plan, and rolls once the plan
//! hash is approved; a scaling-only change needs no approval.

mod support;

use std::time::Duration;

use apis::aws::{AWSCluster, AWSControlPlane, AWSMachineDeployment, PendingUpdate};
use aws_operator::approval::{APPROVED_PLAN, UPDATE_APPROVAL, UPDATE_PENDING};
use aws_stacks::names::{StackKind, stack_name};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};
use support::*;

const ID: &str = "apr01";

fn condition(conds: Option<&Vec<Condition>>, type_: &str) -> Option<Condition> {
    conds?.iter().find(|c| c.type_ == type_).cloned()
}

async fn warning(client: &kube::Client, name: &str, reason: &str) -> anyhow::Result<Option<String>> {
    let events: Api<Event> = Api::namespaced(client.clone(), NS);
    Ok(events.list(&ListParams::default()).await?.items.into_iter().find_map(|e| {
        (e.type_.as_deref() == Some("Warning")
            && e.reason.as_deref() == Some(reason)
            && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .then_some(e.note)
        .flatten()
    }))
}

async fn annotate<K>(api: &Api<K>, name: &str, key: &str, value: &str) -> anyhow::Result<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let patch = serde_json::json!({"metadata": {"annotations": {key: value}}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await?;
    Ok(())
}

/// The deployed template hash (the `TemplateHash` output) and template body of `stack`.
async fn deployed(tenant: &aws_operator::aws::AccountClients, stack: &str) -> anyhow::Result<(String, String)> {
    let view = tenant.cfn.describe(stack).await?.ok_or_else(|| anyhow::anyhow!("no stack {stack}"))?;
    let hash = view.outputs.get("TemplateHash").cloned().unwrap_or_default();
    let body = tenant.cfn.template(stack).await?.unwrap_or_default();
    Ok((hash, body))
}

/// Cluster `id` (control plane cp001 with one master, pool np001) created by the operator and
/// Ready, with Release 20.1.0 (a newer Flatcar) there to upgrade to; its objects' APIs.
async fn ready_cluster(
    id: &str,
) -> anyhow::Result<(Fixture, Api<AWSCluster>, Api<AWSControlPlane>, Api<AWSMachineDeployment>)> {
    let mut f = Fixture::start_with(motoenv::Launcher::from_env().time_scale(0.002)).await?;
    f.apply_basics().await?;
    f.release("20.1.0", FLATCAR_NEXT, VERSION).await?;
    f.credential_secret(id).await?;
    f.cluster(id).await?;
    f.control_plane(id, "cp001", &["eu-central-1a"], 1).await?;
    f.node_pool(id, "np001", &["eu-central-1a"], 1, 2).await?;
    f.start_operator().await?;
    let clusters: Api<AWSCluster> = Api::namespaced(f.client.clone(), NS);
    let cps: Api<AWSControlPlane> = Api::namespaced(f.client.clone(), NS);
    let mds: Api<AWSMachineDeployment> = Api::namespaced(f.client.clone(), NS);
    let created = eventually(60, "the cluster to be Ready", || async {
        let c = clusters.get(id).await?;
        Ok(ready(c.status.as_ref().map(|s| &s.conditions)).then_some(()))
    })
    .await;
    if let Err(e) = created {
        anyhow::bail!("{e}\n{}", dump(&f.client).await);
    }
    Ok((f, clusters, cps, mds))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgrade_waits_for_the_approved_plan_and_scaling_needs_no_approval() -> anyhow::Result<()> {
    let (f, clusters, cps, mds) = ready_cluster(ID).await?;
    let tenant = f.tenant_clients().await?;
    let tccpn = stack_name(ID, StackKind::Tccpn, None);
    let tcnp = stack_name(ID, StackKind::Tcnp, Some("np001"));
    let before_tccpn = deployed(&tenant, &tccpn).await?;
    let before_tcnp = deployed(&tenant, &tcnp).await?;

    // The gate on, then the upgrade: a new Flatcar changes the masters' and the pool's stacks.
    annotate(&clusters, ID, UPDATE_APPROVAL, "required").await?;
    let patch = Patch::Merge(serde_json::json!({"metadata": {"labels": {"release.giantswarm.io/version": "20.1.0"}}}));
    clusters.patch(ID, &PatchParams::default(), &patch).await?;
    cps.patch("cp001", &PatchParams::default(), &patch).await?;
    mds.patch("np001", &PatchParams::default(), &patch).await?;

    let pending_of = |stacks: Option<Vec<apis::aws::StackStatus>>, name: &str| {
        stacks.and_then(|s| s.into_iter().find(|e| e.name == name)).and_then(|e| e.pending_update)
    };
    let waited = eventually(40, "both updates to wait for approval", || async {
        let cp = cps.get("cp001").await?;
        let md = mds.get("np001").await?;
        let cp_on = condition(cp.status.as_ref().map(|s| &s.conditions), UPDATE_PENDING);
        let md_on = condition(md.status.as_ref().map(|s| &s.conditions), UPDATE_PENDING);
        let cp_plan = pending_of(cp.status.map(|s| s.stacks), &tccpn);
        let md_plan = pending_of(md.status.map(|s| s.stacks), &tcnp);
        Ok(match (cp_on, md_on, cp_plan, md_plan) {
            (Some(a), Some(b), Some(p), Some(q)) if a.status == "True" && b.status == "True" => Some((a, b, p, q)),
            _ => None,
        })
    })
    .await;
    let (cp_cond, md_cond, cp_plan, md_plan): (Condition, Condition, PendingUpdate, PendingUpdate) = match waited {
        Ok(w) => w,
        Err(e) => anyhow::bail!("{e}\n{}", dump(&f.client).await),
    };
    // The summaries: the launch template gets a new version, the group rolls its instances.
    assert_eq!(md_cond.reason, "AwaitingApproval", "{md_cond:?}");
    assert!(md_cond.message.contains(&md_plan.plan_hash), "{md_cond:?}");
    assert!(
        md_cond.message.contains(&format!(
            "kubectl annotate awsmachinedeployments.infrastructure.giantswarm.io -n {NS} np001 {APPROVED_PLAN}={}",
            md_plan.plan_hash
        )),
        "{md_cond:?}"
    );
    assert_eq!((md_plan.added, md_plan.removed), (0, 0), "{md_plan:?}");
    assert!(md_plan.modified >= 2, "the launch template and the group: {md_plan:?}");
    assert_eq!(md_plan.instance_rolls, ["NodePoolAutoScalingGroup"], "{md_plan:?}");
    assert!(cp_plan.modified >= 1 && !cp_plan.instance_rolls.is_empty(), "the master's group rolls: {cp_plan:?}");
    assert!(cp_cond.message.contains(&cp_plan.plan_hash), "{cp_cond:?}");
    assert_ne!(cp_plan.plan_hash, md_plan.plan_hash);
    // The change sets exist; no stack was updated.
    let cs = tenant.cfn.describe_change_set(&tcnp, &md_plan.change_set).await?;
    assert!(cs.is_some_and(|c| c.executable()), "the pool's change set is ready to execute");
    assert_eq!(deployed(&tenant, &tccpn).await?, before_tccpn, "the masters' stack is unchanged");
    assert_eq!(deployed(&tenant, &tcnp).await?, before_tcnp, "the pool's stack is unchanged");

    // A stale approval (the masters' plan on the pool) and a malformed one run nothing.
    annotate(&mds, "np001", APPROVED_PLAN, &cp_plan.plan_hash).await?;
    let note = eventually(20, "a StaleApproval warning", || warning(&f.client, "np001", "StaleApproval")).await?;
    assert!(note.contains(&cp_plan.plan_hash) && note.contains(&md_plan.plan_hash), "{note}");
    let stale = eventually(20, "the StaleApproval condition", || async {
        let md = mds.get("np001").await?;
        Ok(condition(md.status.as_ref().map(|s| &s.conditions), UPDATE_PENDING).filter(|c| c.reason == "StaleApproval"))
    })
    .await?;
    assert_eq!(stale.status, "True");
    annotate(&cps, "cp001", APPROVED_PLAN, "looks-good").await?;
    let invalid = eventually(20, "the InvalidApproval condition", || async {
        let cp = cps.get("cp001").await?;
        Ok(condition(cp.status.as_ref().map(|s| &s.conditions), UPDATE_PENDING)
            .filter(|c| c.reason == "InvalidApproval"))
    })
    .await?;
    assert!(invalid.message.contains(APPROVED_PLAN) && invalid.message.contains("\"looks-good\""), "{invalid:?}");
    assert!(invalid.message.contains(&cp_plan.plan_hash), "the fix names the plan: {invalid:?}");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(deployed(&tenant, &tccpn).await?, before_tccpn, "a malformed approval ran nothing");
    assert_eq!(deployed(&tenant, &tcnp).await?, before_tcnp, "a stale approval ran nothing");

    // The right hashes: both stacks update and the cluster ends Updated.
    annotate(&cps, "cp001", APPROVED_PLAN, &cp_plan.plan_hash).await?;
    annotate(&mds, "np001", APPROVED_PLAN, &md_plan.plan_hash).await?;
    let updated = eventually(50, "the cluster to be Updated with no update pending", || async {
        let c = clusters.get(ID).await?;
        let cp = cps.get("cp001").await?;
        let md = mds.get("np001").await?;
        let lifecycle = c.status.as_ref().map(|s| s.cluster.clone()).unwrap_or_default();
        let latest_updated = lifecycle.has_condition(apis::cluster_status::ClusterCondition::Updated)
            && lifecycle.conditions.first().is_none_or(|c| c.type_ != "Updating");
        let none_pending = [cp.status.as_ref().map(|s| &s.conditions), md.status.as_ref().map(|s| &s.conditions)]
            .into_iter()
            .all(|conds| condition(conds, UPDATE_PENDING).is_some_and(|c| c.status == "False"));
        Ok((latest_updated && none_pending && ready(c.status.as_ref().map(|s| &s.conditions))).then_some(()))
    })
    .await;
    if let Err(e) = updated {
        anyhow::bail!("{e}\n{}", dump(&f.client).await);
    }
    let after_tcnp = deployed(&tenant, &tcnp).await?;
    assert_ne!(after_tcnp.0, before_tcnp.0, "the pool's stack runs the new template");
    assert_ne!(deployed(&tenant, &tccpn).await?.0, before_tccpn.0, "the masters' stack runs the new template");
    let md = mds.get("np001").await?;
    let entry = md.status.and_then(|s| s.stacks.into_iter().find(|e| e.name == tcnp)).expect("the pool's entry");
    assert_eq!(entry.applied_plan.as_deref(), Some(md_plan.plan_hash.as_str()));
    assert!(entry.pending_update.is_none());

    // Scaling only: a new maximum applies at once, with the gate on.
    let patch = Patch::Merge(serde_json::json!({"spec": {"nodePool": {"scaling": {"max": 3}}}}));
    mds.patch("np001", &PatchParams::default(), &patch).await?;
    eventually(30, "the pool's group to allow three instances", || async {
        let body = tenant.cfn.template(&tcnp).await?.unwrap_or_default();
        let t: serde_json::Value = serde_json::from_str(&body)?;
        let max = t["Resources"]["NodePoolAutoScalingGroup"]["Properties"]["MaxSize"].clone();
        Ok((max == serde_json::json!("3") || max == serde_json::json!(3)).then_some(()))
    })
    .await?;
    let md = mds.get("np001").await?;
    let pending = condition(md.status.as_ref().map(|s| &s.conditions), UPDATE_PENDING);
    assert!(pending.is_some_and(|c| c.status == "False"), "scaling waited for nothing");
    Ok(())
}

/// The approval gate with a maintenance window: an upgrade outside the window is planned at
/// once (its plans readable and approvable ahead), waits for the window once approved, and runs
/// exactly the approved change sets when the window opens.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_is_approved_ahead_of_the_window_and_runs_when_it_opens() -> anyhow::Result<()> {
    const ID: &str = "apr02";
    let (f, clusters, cps, mds) = ready_cluster(ID).await?;
    let clock = f.shared.clone().expect("the operator runs").clock.clone();
    let tenant = f.tenant_clients().await?;
    let tccpn = stack_name(ID, StackKind::Tccpn, None);
    let tcnp = stack_name(ID, StackKind::Tcnp, Some("np001"));
    let before = (deployed(&tenant, &tccpn).await?, deployed(&tenant, &tcnp).await?);

    // Mondays 02:00 in Berlin for 4 hours; the clock on a Wednesday. The gate on, then the
    // upgrade.
    clock.set("2026-12-02T12:00:00Z".parse()?);
    let window = serde_json::json!({"timeZone": "Europe/Berlin", "windows": [{"days": ["Mon"], "start": "02:00", "duration": "4h"}]});
    let patch = serde_json::json!({"spec": {"cluster": {"maintenance": window}}});
    clusters.patch(ID, &PatchParams::default(), &Patch::Merge(&patch)).await?;
    annotate(&clusters, ID, UPDATE_APPROVAL, "required").await?;
    let patch = Patch::Merge(serde_json::json!({"metadata": {"labels": {"release.giantswarm.io/version": "20.1.0"}}}));
    clusters.patch(ID, &PatchParams::default(), &patch).await?;
    cps.patch("cp001", &PatchParams::default(), &patch).await?;
    mds.patch("np001", &PatchParams::default(), &patch).await?;

    // Both plans are made at once, though the window is closed: `UpdatePending` says what waits
    // for approval, `Ready` that the window is awaited.
    let conditions = || async {
        let cp = cps.get("cp001").await?;
        let md = mds.get("np001").await?;
        let of = |conds: Option<&Vec<Condition>>| {
            (condition(conds, UPDATE_PENDING).map(|c| c.reason), condition(conds, "Ready").map(|c| c.reason))
        };
        let plans = (
            pending_plan(cp.status.as_ref().map(|s| &s.stacks), &tccpn),
            pending_plan(md.status.as_ref().map(|s| &s.stacks), &tcnp),
        );
        anyhow::Ok((
            of(cp.status.as_ref().map(|s| &s.conditions)),
            of(md.status.as_ref().map(|s| &s.conditions)),
            plans,
        ))
    };
    let waiting = (Some("AwaitingApproval".to_string()), Some("WaitingForMaintenanceWindow".to_string()));
    let planned = eventually(40, "both plans made ahead of the window", || async {
        let (cp, md, plans) = conditions().await?;
        Ok(match plans {
            (Some(a), Some(b)) if cp == waiting && md == waiting => Some((a, b)),
            _ => None,
        })
    })
    .await;
    let (cp_plan, md_plan) = match planned {
        Ok(p) => p,
        Err(e) => anyhow::bail!("{e}: {:?}\n{}", conditions().await.ok(), dump(&f.client).await),
    };

    // Approved ahead: nothing runs while the window is closed.
    annotate(&cps, "cp001", APPROVED_PLAN, &cp_plan).await?;
    annotate(&mds, "np001", APPROVED_PLAN, &md_plan).await?;
    let approved = (Some("Approved".to_string()), Some("WaitingForMaintenanceWindow".to_string()));
    eventually(30, "both plans approved and waiting for the window", || async {
        let (cp, md, _) = conditions().await?;
        Ok((cp == approved && md == approved).then_some(()))
    })
    .await?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!((deployed(&tenant, &tccpn).await?, deployed(&tenant, &tcnp).await?), before, "nothing ran");

    // The window opens: the approved change sets run, and the cluster ends Updated.
    clock.set("2026-12-07T01:00:30Z".parse()?);
    let updated = eventually(60, "the cluster to be Updated with no update pending", || async {
        let c = clusters.get(ID).await?;
        let lifecycle = c.status.as_ref().map(|s| s.cluster.clone()).unwrap_or_default();
        let latest_updated = lifecycle.has_condition(apis::cluster_status::ClusterCondition::Updated)
            && lifecycle.conditions.first().is_none_or(|c| c.type_ != "Updating");
        let (cp, md, plans) = conditions().await?;
        let none_pending = cp.0.as_deref() == Some("NoUpdatePending") && md.0.as_deref() == Some("NoUpdatePending");
        Ok((latest_updated && none_pending && plans == (None, None)).then_some(()))
    })
    .await;
    if let Err(e) = updated {
        anyhow::bail!("{e}: {:?}\n{}", conditions().await.ok(), dump(&f.client).await);
    }
    let md = mds.get("np001").await?;
    let entry = md.status.and_then(|s| s.stacks.into_iter().find(|e| e.name == tcnp)).expect("the pool's entry");
    assert_eq!(entry.applied_plan.as_deref(), Some(md_plan.as_str()), "the approved plan ran");
    assert_ne!(deployed(&tenant, &tccpn).await?.0, before.0.0, "the masters' stack runs the new template");
    Ok(())
}

/// The plan hash pending for `stack` among `stacks`.
fn pending_plan(stacks: Option<&Vec<apis::aws::StackStatus>>, stack: &str) -> Option<String> {
    stacks?.iter().find(|e| e.name == stack)?.pending_update.as_ref().map(|p| p.plan_hash.clone())
}

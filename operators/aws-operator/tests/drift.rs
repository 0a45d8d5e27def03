//! The drift detector against moto (correction 18, drift detection) and testenv: a cluster whose
//! stacks are as their templates say is `Drifted=False`; an ingress rule added by hand with
//! boto3, as another principal, to the cluster's master security group in the tenant account
//! shows up at the next detection as `Drifted=True` with the rule as an `ADD` difference of the
//! TCCP stack's `MasterSecurityGroup`, a `StackDrifted` event and the drifted-resources metric;
//! annotating the cluster for remediation revokes that rule (and only that rule), detects
//! again, removes the annotation, and returns the condition to `False`. Then a node pool's Auto
//! Scaling group resized by hand shows up as a `NOT_EQUAL` `MaxSize` of TCNP, and is set back.
//! And the per-account budget holds, measured on the emulator's request log.

mod support;

use std::time::Duration;

use apis::aws::AWSCluster;
use aws_operator::aws::AccountClients;
use aws_operator::config::DriftSettings;
use aws_operator::drift::findings::{DRIFTED, REMEDIATE_ANNOTATION};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};
use support::*;

/// The hand-made rule's source range.
const HAND_MADE: &str = "203.0.113.0/24";

/// Every 3 s, a detection lasting 1 s (moto at a time scale of 0.1), plenty of budget.
fn settings() -> DriftSettings {
    DriftSettings { interval: Duration::from_secs(3), per_account_per_minute: 60, poll: Duration::from_millis(300) }
}

fn drifted(cluster: &AWSCluster) -> Option<&Condition> {
    cluster.status.as_ref()?.conditions.iter().find(|c| c.type_ == DRIFTED)
}

/// The ingress rules of group `id` as `(protocol, from port, CIDR)`.
async fn ingress(tenant: &AccountClients, id: &str) -> anyhow::Result<Vec<(String, i32, String)>> {
    let out = tenant.ec2.describe_security_groups().group_ids(id).send().await?;
    let mut rules = Vec::new();
    for p in out.security_groups().iter().flat_map(|g| g.ip_permissions()) {
        for r in p.ip_ranges() {
            rules.push((
                p.ip_protocol().unwrap_or_default().to_string(),
                p.from_port().unwrap_or(-1),
                r.cidr_ip().unwrap_or_default().to_string(),
            ));
        }
    }
    rules.sort();
    Ok(rules)
}

/// Add an SSH rule from [`HAND_MADE`] to group `group` of `account`, with boto3, as someone
/// else than the operator would (another access key).
fn open_ssh_by_hand(f: &Fixture, account: &str, group: &str) -> anyhow::Result<()> {
    let script = format!(
        r#"
import boto3
ec2 = boto3.client("ec2", region_name="{REGION}", endpoint_url="{endpoint}",
                   aws_access_key_id="AKIASOMEONEELSE0001", aws_secret_access_key="x")
ec2.meta.events.register("before-sign.*.*", lambda request, **_: request.headers.__setitem__("x-moto-account-id", "{account}"))
ec2.authorize_security_group_ingress(GroupId="{group}", IpPermissions=[{{
    "IpProtocol": "tcp", "FromPort": 22, "ToPort": 22, "IpRanges": [{{"CidrIp": "{HAND_MADE}"}}]}}])
"#,
        endpoint = f.moto.endpoint(),
    );
    let python = motoenv::Launcher::from_env().python().to_path_buf();
    let out = std::process::Command::new(python).arg("-c").arg(script).output()?;
    anyhow::ensure!(out.status.success(), "boto3: {}", String::from_utf8_lossy(&out.stderr));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_rule_added_and_a_group_resized_by_hand_are_reported_and_remediated() -> anyhow::Result<()> {
    let mut f = Fixture::start_with(motoenv::Launcher::from_env().time_scale(0.1)).await?;
    f.apply_basics().await?;
    let id = "d1r7x";
    f.credential_secret(id).await?;
    f.cluster(id).await?;
    f.control_plane(id, "cp001", &["eu-central-1a"], 1).await?;
    f.node_pool(id, "np001", &["eu-central-1a"], 1, 2).await?;
    f.drift = Some(settings());
    f.start_operator().await?;
    let clusters: Api<AWSCluster> = Api::namespaced(f.client.clone(), NS);

    // Untouched, every stack is in sync. (A detection that ran while the cluster was still
    // being created skipped the stacks not made yet, or mid-operation: wait for one that
    // checked every kind.)
    let drift_state = f.drift_state.clone().expect("the operator runs");
    let kinds = ["tccpi", "tccp", "tccpf", "tccpn", "tcnp", "tcnpf"];
    let in_sync = eventually(300, "a detection of every stack finding the cluster in sync", || async {
        let c = clusters.get(id).await?;
        let done = support::ready(c.status.as_ref().map(|s| &s.conditions))
            && drifted(&c).is_some_and(|d| d.status == "False" && d.reason == "InSync")
            && kinds.iter().all(|kind| drift_state.metrics().detections(kind, "in_sync") >= 1);
        Ok(done.then_some(c))
    })
    .await;
    let in_sync = match in_sync {
        Ok(c) => c,
        Err(e) => anyhow::bail!("{e}\n{}", dump(&f.client).await),
    };
    let drift = in_sync.status.as_ref().and_then(|s| s.drift.clone()).expect("status.drift");
    assert!(drift.last_detection_time.is_some() && drift.stacks.is_empty(), "{drift:?}");
    for kind in kinds {
        assert_eq!(drift_state.metrics().detections(kind, "drifted"), 0, "{kind} was never found drifted");
    }

    // Someone opens SSH on the masters by hand.
    let tenant = f.tenant_clients().await?;
    let tccp = aws_stacks::names::stack_name(id, aws_stacks::names::StackKind::Tccp, None);
    let stack = tenant.cfn.describe(&tccp).await?.expect("TCCP exists");
    let group = stack.outputs.get("MasterSecurityGroupID").expect("the master group output").clone();
    let template_rules = ingress(&tenant, &group).await?;
    open_ssh_by_hand(&f, &f.tenant_account, &group)?;
    assert!(ingress(&tenant, &group).await?.contains(&("tcp".into(), 22, HAND_MADE.into())));

    let reported = eventually(60, "Drifted=True naming the hand-made rule", || async {
        let c = clusters.get(id).await?;
        Ok(drifted(&c).is_some_and(|d| d.status == "True").then_some(c))
    })
    .await?;
    let condition = drifted(&reported).expect("the condition");
    assert_eq!(condition.reason, "StacksDrifted");
    assert!(
        condition.message.starts_with(&format!("1 resource changed outside CloudFormation in {tccp} (1)")),
        "{}",
        condition.message
    );
    let drift = reported.status.as_ref().and_then(|s| s.drift.clone()).expect("status.drift");
    assert_eq!(drift.stacks.len(), 1, "{drift:?}");
    let s = &drift.stacks[0];
    assert_eq!((s.name.as_str(), s.kind.as_str(), s.drifted_resources), (tccp.as_str(), "tccp", 1));
    let r = &s.resources[0];
    assert_eq!(
        (r.logical_id.as_str(), r.resource_type.as_str(), r.physical_id.as_deref(), r.status.as_str()),
        ("MasterSecurityGroup", "AWS::EC2::SecurityGroup", Some(group.as_str()), "MODIFIED")
    );
    assert_eq!(r.differences.len(), 1, "{r:?}");
    let d = &r.differences[0];
    assert_eq!((d.difference_type.as_str(), d.expected.as_str()), ("ADD", "null"));
    assert!(d.path.starts_with("/SecurityGroupIngress/"), "{d:?}");
    let rule: serde_json::Value = serde_json::from_str(&d.actual)?;
    assert_eq!(rule, serde_json::json!({"IpProtocol": "tcp", "FromPort": 22, "ToPort": 22, "CidrIp": HAND_MADE}));
    assert_eq!(drift_state.metrics().drifted("tccp"), 1);
    assert_eq!(drift_state.metrics().drifted("tcnp"), 0);
    let events: Api<Event> = Api::namespaced(f.client.clone(), NS);
    let warned = events.list(&ListParams::default()).await?.items.into_iter().any(|e| {
        e.reason.as_deref() == Some("StackDrifted")
            && e.type_.as_deref() == Some("Warning")
            && e.note
                .as_deref()
                .is_some_and(|n| n.contains("MasterSecurityGroup") && n.contains("ADD /SecurityGroupIngress/"))
    });
    assert!(warned, "a StackDrifted warning names the resource and the difference");

    // Remediation on request: the rule is revoked, the template's rules stay.
    let patch = serde_json::json!({"metadata": {"annotations": {REMEDIATE_ANNOTATION: "true"}}});
    clusters.patch(id, &PatchParams::default(), &Patch::Merge(&patch)).await?;
    eventually(60, "Drifted=False and the annotation removed after remediation", || async {
        let c = clusters.get(id).await?;
        let done = drifted(&c).is_some_and(|d| d.status == "False" && d.reason == "InSync")
            && !c.metadata.annotations.as_ref().is_some_and(|a| a.contains_key(REMEDIATE_ANNOTATION));
        Ok(done.then_some(()))
    })
    .await?;
    assert_eq!(ingress(&tenant, &group).await?, template_rules, "only the hand-made rule is gone");
    assert_eq!(drift_state.metrics().drifted("tccp"), 0);
    let remediated = events.list(&ListParams::default()).await?.items.into_iter().any(|e| {
        e.reason.as_deref() == Some("DriftRemediated")
            && e.note.as_deref().is_some_and(|n| n.contains("MasterSecurityGroup"))
    });
    assert!(remediated, "a DriftRemediated event names what was put back");

    // A node pool's group resized by hand: a NOT_EQUAL MaxSize in TCNP, set back on request.
    let tcnp = aws_stacks::names::stack_name(id, aws_stacks::names::StackKind::Tcnp, Some("np001"));
    let pool = tenant.cfn.describe(&tcnp).await?.expect("TCNP exists");
    let asg = pool.outputs.get("AutoScalingGroupName").expect("the pool's group output").clone();
    tenant.autoscaling.update_auto_scaling_group().auto_scaling_group_name(&asg).max_size(7).send().await?;
    let resized = eventually(60, "Drifted=True naming the group's MaxSize", || async {
        let c = clusters.get(id).await?;
        Ok(drifted(&c).is_some_and(|d| d.status == "True").then_some(c))
    })
    .await?;
    let drift = resized.status.as_ref().and_then(|s| s.drift.clone()).expect("status.drift");
    let s = drift.stacks.iter().find(|s| s.name == tcnp).expect("the pool's stack drifted");
    let r = &s.resources[0];
    assert_eq!(
        (r.resource_type.as_str(), r.physical_id.as_deref()),
        ("AWS::AutoScaling::AutoScalingGroup", Some(asg.as_str()))
    );
    assert_eq!(
        r.differences
            .iter()
            .map(|d| (d.path.as_str(), d.expected.as_str(), d.actual.as_str(), d.difference_type.as_str()))
            .collect::<Vec<_>>(),
        [("/MaxSize", "2", "7", "NOT_EQUAL")]
    );
    assert_eq!(drift_state.metrics().drifted("tcnp"), 1);
    clusters.patch(id, &PatchParams::default(), &Patch::Merge(&patch)).await?;
    eventually(60, "Drifted=False after the group's remediation", || async {
        let c = clusters.get(id).await?;
        let done = drifted(&c).is_some_and(|d| d.status == "False")
            && !c.metadata.annotations.as_ref().is_some_and(|a| a.contains_key(REMEDIATE_ANNOTATION));
        Ok(done.then_some(()))
    })
    .await?;
    let groups = tenant.autoscaling.describe_auto_scaling_groups().auto_scaling_group_names(&asg).send().await?;
    assert_eq!(groups.auto_scaling_groups()[0].max_size(), Some(2), "MaxSize is the template's again");
    Ok(())
}

/// The per-account budget: at 3 detections a minute, a cluster's four tenant stacks take a
/// third of a minute to be checked (three at once, the fourth 20 s later), while the management
/// account's two stacks, with their own budget, are not held back; and in no window does an
/// account see more `DetectStackDrift` calls than the bucket allows.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn detections_stay_within_each_accounts_budget() -> anyhow::Result<()> {
    let mut f = Fixture::start_with(motoenv::Launcher::from_env().time_scale(0.1)).await?;
    f.apply_basics().await?;
    let id = "b4dg7";
    f.credential_secret(id).await?;
    f.cluster(id).await?;
    f.control_plane(id, "cp001", &["eu-central-1a"], 1).await?;
    f.node_pool(id, "np001", &["eu-central-1a"], 1, 2).await?;
    let per_minute = 3;
    f.drift = Some(DriftSettings { per_account_per_minute: per_minute, ..settings() });
    f.start_operator().await?;
    let drift_state = f.drift_state.clone().expect("the operator runs");
    let kinds = ["tccpi", "tccp", "tccpf", "tccpn", "tcnp", "tcnpf"];
    let checked = eventually(120, "every stack kind detected in sync", || async {
        Ok(kinds.iter().all(|kind| drift_state.metrics().detections(kind, "in_sync") >= 1).then_some(()))
    })
    .await;
    if let Err(e) = checked {
        anyhow::bail!("{e}\n{}", dump(&f.client).await);
    }

    // The operator's calls per signing key: one assumed-role key per account.
    let mut per_key: std::collections::BTreeMap<String, Vec<f64>> = Default::default();
    for r in f.moto.request_log()?.into_iter().filter(|r| r.action == "DetectStackDrift") {
        per_key.entry(r.key).or_default().push(r.time);
    }
    assert_eq!(per_key.len(), 2, "the tenant and the management account: {per_key:?}");
    let capacity = f64::from(per_minute);
    for (key, mut times) in per_key.clone() {
        times.sort_by(f64::total_cmp);
        for (i, start) in times.iter().enumerate() {
            for (j, end) in times.iter().enumerate().skip(i) {
                // Calls i..=j, within `end - start` seconds: at most the bucket plus its refill
                // (and one for the clocks' rounding).
                let allowed = capacity + (end - start) * capacity / 60.0 + 1.0;
                assert!((j - i + 1) as f64 <= allowed, "{key}: {} calls in {:.1} s: {times:?}", j - i + 1, end - start);
            }
        }
    }
    let tenant = per_key.values().find(|t| t.len() >= 4).expect("the tenant's four stacks");
    let first = tenant.iter().copied().fold(f64::INFINITY, f64::min);
    let fourth = {
        let mut t = tenant.clone();
        t.sort_by(f64::total_cmp);
        t[3]
    };
    assert!(fourth - first >= 15.0, "the fourth tenant detection waited for a token: {tenant:?}");
    Ok(())
}

//! `aws-operator describe` against the operator's own world (testenv and moto, the operator
//! running): the tree of a healthy cluster (and of the same with AWS unreachable), of an upgrade
//! that cannot start (a Flatcar without an AMI), of an upgrade waiting for approval, approved and
//! waiting for the maintenance window, and rolling its masters once the window opens. Each output is compared with a text fixture
//! in `tests/fixtures/describe/` that names the condition each line must show; ages, instance
//! ids, node names, plan hashes and account ids are normalised. `UPDATE_FIXTURES=1` rewrites the fixtures.
//!
//! A stack that CloudFormation fails is shown from recorded objects in
//! `a_failed_stack_shows_its_status_reason_and_attempts`: the emulator fails no stack by itself.

mod support;

use std::path::PathBuf;
use std::time::Duration;

use apis::aws::{AWSCluster, AWSControlPlane, AWSMachineDeployment};
use aws_operator::approval::{APPROVED_PLAN, UPDATE_APPROVAL};
use aws_operator::aws::AwsFactory;
use aws_operator::describe::{ClusterObjects, Instances, describe, tree};
use kube::Api;
use kube::api::{Patch, PatchParams};
use node_lifecycle::describe::{DescribeArgs, Output, write};
use support::*;

const ID: &str = "dsc01";

/// `text` with what differs between runs replaced: the SINCE column's ages, instance ids, plan
/// hashes, account ids, why credentials could not be loaded from an unreachable endpoint (refused
/// at once, or timed out once the retries' backoff outlasts the operation timeout, depending on
/// the machine's load); runs of spaces (the alignment, which follows the widest cell) made one.
fn normalise(text: &str) -> String {
    let unreachable = regex::Regex::new(r"loading credentials: (dispatch failure:|request has timed)…").expect("regex");
    let text = &unreachable.replace_all(text, "loading credentials: <cause>…");
    let age = regex::Regex::new(r"  \d+[smhd](  |$)").expect("regex");
    let instance = regex::Regex::new(r"\bi-[0-9a-f]{8,17}\b").expect("regex");
    let hash = regex::Regex::new(r"\b[0-9a-f]{16}\b").expect("regex");
    let account = regex::Regex::new(r"\b\d{12}\b").expect("regex");
    let node = regex::Regex::new(r"\bip-\d+-\d+-\d+-\d+\b").expect("regex");
    let spaces = regex::Regex::new(r" {2,}").expect("regex");
    text.lines()
        .map(|l| {
            // The tree's indentation stays; the columns after the name are made one space run.
            let start = l.find(|c: char| !matches!(c, ' ' | '│' | '├' | '└' | '─')).unwrap_or(l.len());
            let (tree, rest) = l.split_at(start);
            let rest = age.replace_all(rest, "  <age>$1");
            let rest = instance.replace_all(&rest, "i-<id>");
            let rest = hash.replace_all(&rest, "<plan>");
            let rest = account.replace_all(&rest, "<account>");
            let rest = node.replace_all(&rest, "ip-<address>");
            format!("{tree}{}", spaces.replace_all(&rest, "  ").trim_end())
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

fn fixture_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/describe").join(name)
}

/// Compare `text`, normalised, with fixture `name` (or write it with `UPDATE_FIXTURES=1`).
fn assert_fixture(name: &str, text: &str) {
    let got = normalise(text);
    let path = fixture_path(name);
    if std::env::var_os("UPDATE_FIXTURES").is_some() {
        std::fs::create_dir_all(path.parent().expect("a directory")).expect("fixture directory");
        std::fs::write(&path, &got).expect("fixture written");
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(got, want, "describe output differs from {}; the output was:\n{text}", path.display());
}

fn flags() -> DescribeArgs {
    DescribeArgs { name: Some(ID.into()), namespace: Some(NS.into()), all_namespaces: false, output: Output::Text }
}

async fn describe_text(f: &Fixture, aws: &Result<AwsFactory, String>) -> anyhow::Result<String> {
    let now = f.shared.as_ref().map(|s| s.clock.now()).unwrap_or_else(jiff::Timestamp::now);
    let mut out = Vec::new();
    describe(&f.client, &flags(), aws, &mut out, now, false).await?;
    Ok(String::from_utf8(out)?)
}

async fn annotate<K>(api: &Api<K>, name: &str, key: &str, value: &str) -> anyhow::Result<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let patch = serde_json::json!({"metadata": {"annotations": {key: value}}});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await?;
    Ok(())
}

async fn relabel(f: &Fixture, release: &str) -> anyhow::Result<()> {
    let patch = Patch::Merge(serde_json::json!({"metadata": {"labels": {"release.giantswarm.io/version": release}}}));
    Api::<AWSCluster>::namespaced(f.client.clone(), NS).patch(ID, &PatchParams::default(), &patch).await?;
    Api::<AWSControlPlane>::namespaced(f.client.clone(), NS).patch("cp001", &PatchParams::default(), &patch).await?;
    Api::<AWSMachineDeployment>::namespaced(f.client.clone(), NS)
        .patch("np001", &PatchParams::default(), &patch)
        .await?;
    Ok(())
}

/// Wait until `describe` (normalised) shows every line of `needles`, then return its output.
async fn shows(f: &Fixture, aws: &Result<AwsFactory, String>, what: &str, needles: &[&str]) -> anyhow::Result<String> {
    // Shown, and still the same a second later: a state, not a moment of a transition.
    let found = eventually(90, what, || async {
        let text = describe_text(f, aws).await?;
        let n = normalise(&text);
        if !needles.iter().all(|needle| n.contains(needle)) {
            return Ok(None);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        Ok((normalise(&describe_text(f, aws).await?) == n).then_some(text))
    })
    .await;
    match found {
        Ok(text) => Ok(text),
        Err(e) => {
            anyhow::bail!(
                "{e}\nlast output:\n{}\n{}",
                describe_text(f, aws).await.unwrap_or_default(),
                dump(&f.client).await
            )
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_follows_a_cluster_from_healthy_through_a_blocked_and_an_approved_upgrade() -> anyhow::Result<()> {
    let mut f = Fixture::start_with(motoenv::Launcher::from_env().time_scale(0.002)).await?;
    f.apply_basics().await?;
    f.release("20.1.0", FLATCAR_NEXT, VERSION).await?;
    f.release("20.0.9", "9999.0.0", VERSION).await?;
    f.credential_secret(ID).await?;
    f.cluster(ID).await?;
    f.control_plane(ID, "cp001", &["eu-central-1a"], 1).await?;
    f.node_pool(ID, "np001", &["eu-central-1a"], 1, 2).await?;
    f.start_operator().await?;
    let aws: Result<AwsFactory, String> =
        Ok(AwsFactory::new(factory_settings(&f.moto, &f.cp_account)).await.map_err(|e| anyhow::anyhow!("{e}"))?);

    // Healthy: every object Ready, every stack complete, the instances in service.
    let healthy = shows(
        &f,
        &aws,
        "a healthy cluster",
        &["AWSCluster/org-acme/dsc01  True", "AWSMachineDeployment/np001  True", "Instance/i-<id>  True  InService"],
    )
    .await?;
    assert_fixture("healthy.txt", &healthy);

    // AWS unreachable: the tree from the management cluster, and a line saying what is missing.
    let mut unreachable = factory_settings(&f.moto, &f.cp_account);
    unreachable.endpoint_url = Some("http://127.0.0.1:9".into());
    unreachable.operation_timeout = Some(Duration::from_secs(5));
    let unreachable = Ok(AwsFactory::new(unreachable).await.map_err(|e| anyhow::anyhow!("{e}"))?);
    assert_fixture("healthy-aws-unreachable.txt", &describe_text(&f, &unreachable).await?);

    // An upgrade that cannot start: the Release's Flatcar has no AMI here.
    relabel(&f, "20.0.9").await?;
    let blocked = shows(
        &f,
        &aws,
        "the control plane and the pool refusing a Release without an AMI",
        &[
            "AWSCluster/org-acme/dsc01  False  WaitingForNodes",
            "AWSControlPlane/cp001  False  AmiNotFound",
            "AWSMachineDeployment/np001  False  AmiNotFound",
        ],
    )
    .await?;
    assert_fixture("ami-not-found.txt", &blocked);

    // An upgrade outside the maintenance window, with approval required: both plans wait for a
    // person, and the cluster's window line says when it opens.
    let clock = f.shared.clone().expect("the operator runs").clock.clone();
    clock.set("2026-12-02T12:00:00Z".parse()?);
    let clusters: Api<AWSCluster> = Api::namespaced(f.client.clone(), NS);
    let window = serde_json::json!({"timeZone": "Europe/Berlin", "windows": [{"days": ["Mon"], "start": "02:00", "duration": "4h"}]});
    let patch = serde_json::json!({"spec": {"cluster": {"maintenance": window}}});
    clusters.patch(ID, &PatchParams::default(), &Patch::Merge(&patch)).await?;
    annotate(&clusters, ID, UPDATE_APPROVAL, "required").await?;
    relabel(&f, "20.1.0").await?;
    let waiting = shows(
        &f,
        &aws,
        "both updates waiting for approval",
        &[
            "AWSCluster/org-acme/dsc01  False  WaitingForNodes",
            "AWSControlPlane/cp001  False  UpdatePending: AwaitingApproval",
            "AWSMachineDeployment/np001  False  UpdatePending: AwaitingApproval",
        ],
    )
    .await?;
    assert_fixture("awaiting-approval.txt", &waiting);

    // Approved: mid-upgrade, each plan waits for the window.
    let cps: Api<AWSControlPlane> = Api::namespaced(f.client.clone(), NS);
    let mds: Api<AWSMachineDeployment> = Api::namespaced(f.client.clone(), NS);
    let plan_of = |stacks: Option<Vec<apis::aws::StackStatus>>| {
        stacks.unwrap_or_default().into_iter().find_map(|s| s.pending_update.map(|p| p.plan_hash))
    };
    let cp_plan = plan_of(cps.get("cp001").await?.status.map(|s| s.stacks)).expect("the masters' plan");
    let md_plan = plan_of(mds.get("np001").await?.status.map(|s| s.stacks)).expect("the pool's plan");
    annotate(&cps, "cp001", APPROVED_PLAN, &cp_plan).await?;
    annotate(&mds, "np001", APPROVED_PLAN, &md_plan).await?;
    let approved = shows(
        &f,
        &aws,
        "both updates approved and waiting for the window",
        &[
            "AWSCluster/org-acme/dsc01  False  WaitingForNodes",
            "Plan/<plan>  True  Approved",
            "AWSControlPlane/cp001  False  WaitingForMaintenanceWindow",
            "AWSMachineDeployment/np001  False  WaitingForMaintenanceWindow",
        ],
    )
    .await?;
    assert_fixture("approved-waiting-for-window.txt", &approved);

    // The window opens: the approved change sets run, masters first. The old master waits on
    // its terminating hook for a drain that cannot reach the workload cluster (none runs here),
    // and the pool waits for the masters.
    clock.set("2026-12-07T01:00:30Z".parse()?);
    let rolling = shows(
        &f,
        &aws,
        "the masters rolling, the old one draining",
        &["Instance/i-<id>  False  Terminating:Wait", "Drain/", "Draining: WorkloadClusterUnreachable"],
    )
    .await?;
    assert_fixture("mid-upgrade.txt", &rolling);
    Ok(())
}

/// A stack whose update CloudFormation rolled back, as the operator records it, with the retry
/// count and CloudFormation's reason, and a drifted stack beside it.
#[test]
fn a_failed_stack_shows_its_status_reason_and_attempts() {
    let cluster: AWSCluster = serde_json::from_value(serde_json::json!({
        "apiVersion": "infrastructure.giantswarm.io/v1alpha3", "kind": "AWSCluster",
        "metadata": {"name": "f41l3", "namespace": NS, "labels": Fixture::labels("f41l3", &[])},
        "spec": {
            "cluster": {"description": "test", "dns": {"domain": "gauss.eu-central-1.aws.gigantic.io"}},
            "provider": {"credentialSecret": {"name": "credential-f41l3", "namespace": "giantswarm"}, "region": REGION}
        },
        "status": {
            "conditions": [
                {"type": "Ready", "status": "True", "reason": "WaitingForNodes", "message": "", "lastTransitionTime": "2026-12-02T11:00:00Z"},
                {"type": "Drifted", "status": "True", "reason": "ResourcesDrifted", "message": "1 resource of cluster-f41l3-tccp drifted", "lastTransitionTime": "2026-12-02T11:30:00Z"}
            ],
            "stacks": [{"name": "cluster-f41l3-tccp", "kind": "tccp", "account": "tenant", "status": "CREATE_COMPLETE"}],
            "drift": {"lastDetectionTime": "2026-12-02T11:30:00Z", "stacks": [{"name": "cluster-f41l3-tccp", "kind": "tccp", "detectionId": "d-1", "driftedResources": 1,
                "resources": [{"logicalId": "MasterSecurityGroup", "type": "AWS::EC2::SecurityGroup", "status": "MODIFIED"}]}]}
        }
    }))
    .expect("AWSCluster");
    let pool: AWSMachineDeployment = serde_json::from_value(serde_json::json!({
        "apiVersion": "infrastructure.giantswarm.io/v1alpha3", "kind": "AWSMachineDeployment",
        "metadata": {"name": "np001", "namespace": NS, "labels": Fixture::labels("f41l3", &[])},
        "spec": {
            "nodePool": {"description": "pool", "machine": {"dockerVolumeSizeGB": 100, "kubeletVolumeSizeGB": 100}, "scaling": {"min": 1, "max": 3}},
            "provider": {"availabilityZones": ["eu-central-1a"], "worker": {"instanceType": "m5.2xlarge", "useAlikeInstanceTypes": false}}
        },
        "status": {
            "conditions": [{"type": "Ready", "status": "False", "reason": "StackUpdateFailed", "message": "stack cluster-f41l3-tcnp-np001: UPDATE_ROLLBACK_COMPLETE; retrying in 4m", "lastTransitionTime": "2026-12-02T11:50:00Z"}],
            "stacks": [{"name": "cluster-f41l3-tcnp-np001", "kind": "tcnp", "account": "tenant", "status": "UPDATE_ROLLBACK_COMPLETE",
                "reason": "The following resource(s) failed to update: [NodePoolAutoScalingGroup].", "attempts": 2, "lastTransitionTime": "2026-12-02T11:50:00Z"}]
        }
    }))
    .expect("AWSMachineDeployment");
    let objects = ClusterObjects { cluster, control_planes: vec![], node_pools: vec![pool], drains: vec![] };
    let instances = Instances::from([(
        "cluster-f41l3-tcnp-np001".to_string(),
        Err("AWS not reachable: STS AssumeRole: AccessDenied: not authorized".to_string()),
    )]);
    let now: jiff::Timestamp = "2026-12-02T12:00:00Z".parse().expect("time");
    let mut out = Vec::new();
    write(&mut out, &[tree(&objects, &instances, now)], Output::Text, now, false).expect("written");
    assert_fixture("failed-stack.txt", &String::from_utf8(out).expect("UTF-8"));
}

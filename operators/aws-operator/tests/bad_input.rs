//! Invalid objects: the CRD schema rejects what it can; the rest gets a `Ready=False` condition
//! naming the field and the fix and a Warning event, nothing is created in AWS, and the operator
//! keeps running.

mod support;

use apis::aws::{AWSCluster, AWSControlPlane, AWSMachineDeployment};
use apis::release::Release;
use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::{ListParams, PostParams};
use support::*;

fn condition(
    conds: Option<&Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition>>,
    type_: &str,
) -> Option<(String, String, String)> {
    conds?.iter().find(|c| c.type_ == type_).map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

async fn warning_for(client: &kube::Client, name: &str, reason: &str) -> anyhow::Result<Option<String>> {
    let events: Api<Event> = Api::namespaced(client.clone(), NS);
    Ok(events
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .find(|e| {
            e.type_.as_deref() == Some("Warning")
                && e.reason.as_deref() == Some(reason)
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
        })
        .and_then(|e| e.note))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_objects_get_a_condition_and_an_event_and_touch_nothing_in_aws() -> anyhow::Result<()> {
    let mut f = Fixture::start().await?;
    f.apply_basics().await?;
    // A Release without containerlinux, and one without aws-operator.
    let releases: Api<Release> = Api::all(f.client.clone());
    for (name, comps) in [
        (
            "v20.0.1",
            serde_json::json!([{"name": "kubernetes", "version": "1.34.2"}, {"name": "aws-operator", "version": VERSION}]),
        ),
        (
            "v20.0.2",
            serde_json::json!([{"name": "kubernetes", "version": "1.34.2"}, {"name": "containerlinux", "version": FLATCAR}]),
        ),
    ] {
        let r: Release = serde_json::from_value(serde_json::json!({
            "apiVersion": "release.giantswarm.io/v1alpha1", "kind": "Release", "metadata": {"name": name},
            "spec": {"state": "active", "date": "2026-10-01T12:00:00Z", "components": comps}
        }))?;
        releases.create(&PostParams::default(), &r).await?;
    }
    f.start_operator().await?;
    let clusters: Api<AWSCluster> = Api::namespaced(f.client.clone(), NS);

    // 1. The schema rejects a bad CIDR and a malformed instance type.
    let mut bad: AWSCluster = serde_json::from_value(serde_json::json!({
        "apiVersion": "infrastructure.giantswarm.io/v1alpha3", "kind": "AWSCluster",
        "metadata": {"name": "bad01", "namespace": NS, "labels": Fixture::labels("bad01", &[])},
        "spec": {"cluster": {"dns": {"domain": "example.com"}},
                 "provider": {"credentialSecret": {"name": "x", "namespace": "giantswarm"}, "region": REGION, "pods": {"cidrBlock": "10.2.0.0/33"}}}
    }))?;
    let err = clusters.create(&PostParams::default(), &bad).await.expect_err("bad CIDR must be rejected");
    assert!(err.to_string().contains("cidrBlock"), "{err}");
    bad.spec.provider.pods = None;
    let cps: Api<AWSControlPlane> = Api::namespaced(f.client.clone(), NS);
    let bad_cp: AWSControlPlane = serde_json::from_value(serde_json::json!({
        "apiVersion": "infrastructure.giantswarm.io/v1alpha3", "kind": "AWSControlPlane",
        "metadata": {"name": "badcp", "namespace": NS, "labels": Fixture::labels("bad01", &[])},
        "spec": {"availabilityZones": ["eu-central-1a"], "instanceType": "m5..large"}
    }))?;
    let err = cps.create(&PostParams::default(), &bad_cp).await.expect_err("malformed instance type must be rejected");
    assert!(err.to_string().contains("instanceType"), "{err}");

    // 2. A missing credential Secret.
    f.cluster("nocred").await?;
    // 3. Releases without containerlinux / without aws-operator.
    for (id, release) in [("nocl1", "20.0.1"), ("noop1", "20.0.2")] {
        f.credential_secret(id).await?;
        let mut c: AWSCluster = serde_json::from_value(serde_json::json!({
            "apiVersion": "infrastructure.giantswarm.io/v1alpha3", "kind": "AWSCluster",
            "metadata": {"name": id, "namespace": NS, "labels": Fixture::labels(id, &[])},
            "spec": {"cluster": {"dns": {"domain": "example.com"}},
                     "provider": {"credentialSecret": {"name": format!("credential-{id}"), "namespace": "giantswarm"}, "region": REGION}}
        }))?;
        c.metadata.labels.get_or_insert_default().insert("release.giantswarm.io/version".into(), release.into());
        clusters.create(&PostParams::default(), &c).await?;
    }
    // 4. An AZ outside the cluster's region.
    // (Without credentials, so that the cluster itself stops before AWS.)
    f.cluster("wrongaz").await?;
    f.control_plane("wrongaz", "cpwrong", &["eu-west-1a"], 1).await?;
    // 5. Overlapping NetworkPools.
    let pools: Api<apis::aws::NetworkPool> = Api::namespaced(f.client.clone(), NS);
    for (name, cidr) in [("pool-a", "10.10.0.0/16"), ("pool-b", "10.10.128.0/17")] {
        let p: apis::aws::NetworkPool = serde_json::from_value(serde_json::json!({
            "apiVersion": "infrastructure.giantswarm.io/v1alpha3", "kind": "NetworkPool",
            "metadata": {"name": name, "namespace": NS}, "spec": {"cidrBlock": cidr}
        }))?;
        pools.create(&PostParams::default(), &p).await?;
    }
    f.credential_secret("overlap").await?;
    let c: AWSCluster = serde_json::from_value(serde_json::json!({
        "apiVersion": "infrastructure.giantswarm.io/v1alpha3", "kind": "AWSCluster",
        "metadata": {"name": "overlap", "namespace": NS, "labels": Fixture::labels("overlap", &[])},
        "spec": {"cluster": {"dns": {"domain": "example.com"}},
                 "provider": {"credentialSecret": {"name": "credential-overlap", "namespace": "giantswarm"}, "region": REGION, "nodes": {"networkPool": "pool-b"}}}
    }))?;
    clusters.create(&PostParams::default(), &c).await?;

    let expect = [
        ("nocred", "Ready", "CredentialSecretNotFound", "credential-nocred"),
        ("nocl1", "Ready", "InvalidRelease", "containerlinux"),
        ("noop1", "ReleaseResolved", "", "aws-operator"),
        ("overlap", "Ready", "OverlappingNetworkPool", "pool-a"),
    ];
    for (name, type_, reason, mentions) in expect {
        let (status, got_reason, message) = eventually(60, &format!("a {type_} condition on {name}"), || async {
            let c = clusters.get(name).await?;
            Ok(condition(c.status.as_ref().map(|s| &s.conditions), type_)
                .filter(|(s, r, _)| s == "False" && (reason.is_empty() || r == reason)))
        })
        .await?;
        assert_eq!(status, "False");
        assert!(message.contains(mentions), "{name}: {got_reason}: {message}");
        if !reason.is_empty() {
            let note = eventually(30, &format!("a Warning event on {name}"), || async {
                warning_for(&f.client, name, reason).await
            })
            .await?;
            assert!(note.contains(mentions), "{name}: {note}");
        }
    }
    let (_, reason, message) = eventually(60, "a Ready condition on cpwrong", || async {
        let c = cps.get("cpwrong").await?;
        Ok(condition(c.status.as_ref().map(|s| &s.conditions), "Ready")
            .filter(|(s, r, _)| s == "False" && r == "InvalidSpec"))
    })
    .await?;
    assert!(message.contains("spec.availabilityZones[0]") && message.contains("eu-west-1a"), "{reason}: {message}");

    // Nothing exists in either account: no stacks, no buckets, no keys.
    let tenant = f.tenant_clients().await?;
    let cp = f.control_plane_clients().await?;
    assert!(tenant.cfn.describe_all().await?.is_empty(), "tenant stacks");
    assert!(cp.cfn.describe_all().await?.is_empty(), "management stacks");
    assert!(tenant.s3.list_buckets().send().await?.buckets().is_empty(), "buckets");
    assert!(
        tenant
            .kms
            .list_aliases()
            .send()
            .await?
            .aliases()
            .iter()
            .all(|a| !a.alias_name().unwrap_or_default().starts_with("alias/n")),
        "keys"
    );
    // The operator is still running: no invalid object crashed it.
    assert!(f.operator_alive(), "the operator stopped");
    f.kill_operator().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_on_an_existing_cluster_deletes_nothing_in_aws() -> anyhow::Result<()> {
    let mut f = Fixture::start().await?;
    f.apply_basics().await?;
    // A Release without containerlinux, to move the cluster to.
    let releases: Api<Release> = Api::all(f.client.clone());
    let r: Release = serde_json::from_value(serde_json::json!({
        "apiVersion": "release.giantswarm.io/v1alpha1", "kind": "Release", "metadata": {"name": "v20.0.1"},
        "spec": {"state": "active", "date": "2026-10-01T12:00:00Z", "components": [
            {"name": "kubernetes", "version": "1.34.2"}, {"name": "aws-operator", "version": VERSION}]}
    }))?;
    releases.create(&PostParams::default(), &r).await?;
    let id = "exist";
    f.credential_secret(id).await?;
    f.cluster(id).await?;
    f.start_operator().await?;
    // The cluster exists in AWS: its key, its buckets and its first stack.
    let tenant = f.tenant_clients().await?;
    let cp = f.control_plane_clients().await?;
    let tccpi = format!("cluster-{id}-tccpi");
    let inventory = || async {
        let cp_stacks: Vec<String> = cp.cfn.describe_all().await?.into_iter().map(|s| s.name).collect();
        let buckets: Vec<String> = tenant
            .s3
            .list_buckets()
            .send()
            .await?
            .buckets()
            .iter()
            .filter_map(|b| b.name().map(str::to_string))
            .collect();
        let key = tenant.kms.describe_key().key_id(format!("alias/{id}")).send().await?;
        let key_state = key.key_metadata().and_then(|m| m.key_state()).map(|s| s.as_str().to_string());
        Ok::<_, anyhow::Error>((cp_stacks, buckets, key_state))
    };
    // A node pool whose hand-set subnet annotation overlaps the cluster's own range is refused
    // before any of its stacks: a condition naming the annotation and the cluster, a Warning.
    let clusters: Api<AWSCluster> = Api::namespaced(f.client.clone(), NS);
    let cluster_cidr = eventually(60, "the cluster CIDR in status", || async {
        Ok(clusters.get(id).await?.status.and_then(|s| s.provider.network.cidr))
    })
    .await?;
    let pool: AWSMachineDeployment = serde_json::from_value(serde_json::json!({
        "apiVersion": "infrastructure.giantswarm.io/v1alpha3", "kind": "AWSMachineDeployment",
        "metadata": {"name": "npovr", "namespace": NS,
                     "labels": Fixture::labels(id, &[("giantswarm.io/machine-deployment", "npovr")]),
                     "annotations": {"machine-deployment.giantswarm.io/subnet": cluster_cidr}},
        "spec": {
            "nodePool": {"description": "pool", "machine": {"dockerVolumeSizeGB": 100, "kubeletVolumeSizeGB": 100}, "scaling": {"min": 1, "max": 2}},
            "provider": {"availabilityZones": ["eu-central-1a"], "worker": {"instanceType": "m5.2xlarge", "useAlikeInstanceTypes": false}}
        }
    }))?;
    let pools: Api<AWSMachineDeployment> = Api::namespaced(f.client.clone(), NS);
    pools.create(&PostParams::default(), &pool).await?;
    let (_, _, message) = eventually(90, "Ready=False OverlappingSubnet on npovr", || async {
        let md = pools.get("npovr").await?;
        Ok(condition(md.status.as_ref().map(|s| &s.conditions), "Ready")
            .filter(|(s, r, _)| s == "False" && r == "OverlappingSubnet"))
    })
    .await?;
    assert!(
        message.contains("machine-deployment.giantswarm.io/subnet") && message.contains(&cluster_cidr),
        "{message}"
    );
    let note = eventually(30, "a Warning event on npovr", || async {
        warning_for(&f.client, "npovr", "OverlappingSubnet").await
    })
    .await?;
    assert!(note.contains(&cluster_cidr), "{note}");
    let pool_stacks = |stacks: Vec<aws_stacks::state::StackView>| {
        stacks.into_iter().map(|s| s.name).filter(|n| n.contains("npovr")).collect::<Vec<_>>()
    };
    assert!(pool_stacks(tenant.cfn.describe_all().await?).is_empty(), "no TCNP for a refused pool");
    assert!(pool_stacks(cp.cfn.describe_all().await?).is_empty(), "no TCNPF for a refused pool");
    pools.delete("npovr", &Default::default()).await?;

    let before = eventually(120, "the cluster's first stack, bucket and key", || async {
        let inv = inventory().await.ok();
        // The config and access-log buckets, and the service-account issuer's (Release 20 has
        // IAM roles for service accounts).
        Ok(inv.filter(|(stacks, buckets, _)| stacks.contains(&tccpi) && buckets.len() == 3))
    })
    .await;
    let before = match before {
        Ok(b) => b,
        Err(e) => anyhow::bail!("{e}\n{}", dump(&f.client).await),
    };

    // Bad input: a Release without containerlinux, and then a broken credential Secret.
    let relabel = serde_json::json!({"metadata": {"labels": {"release.giantswarm.io/version": "20.0.1"}}});
    clusters.patch(id, &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&relabel)).await?;
    eventually(60, "Ready=False InvalidRelease", || async {
        let c = clusters.get(id).await?;
        Ok(condition(c.status.as_ref().map(|s| &s.conditions), "Ready")
            .filter(|(s, r, _)| s == "False" && r == "InvalidRelease"))
    })
    .await?;
    // The credential Secret is held while the cluster uses it, so it cannot go away; it can be
    // broken. A role ARN that is no ARN stops the operator before AWS.
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(f.client.clone(), "giantswarm");
    let broken = serde_json::json!({"data": {"aws.awsoperator.arn": "bm90LWFuLWFybg=="}}); // "not-an-arn"
    secrets
        .patch(&format!("credential-{id}"), &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&broken))
        .await?;
    let relabel = serde_json::json!({"metadata": {"labels": {"release.giantswarm.io/version": "20.0.0"}}});
    clusters.patch(id, &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&relabel)).await?;
    eventually(60, "Ready=False InvalidCredentialSecret", || async {
        let c = clusters.get(id).await?;
        Ok(condition(c.status.as_ref().map(|s| &s.conditions), "Ready")
            .filter(|(s, r, _)| s == "False" && r == "InvalidCredentialSecret"))
    })
    .await?;
    // Let the operator retry the bad input a while: nothing it had created is gone.
    tokio::time::sleep(std::time::Duration::from_secs(5)).await;
    let after = inventory().await?;
    // Nothing that existed is gone (a reconcile in flight when the input went bad may still
    // have created the next stack).
    let gone_stacks: Vec<_> = before.0.iter().filter(|s| !after.0.contains(s)).collect();
    let gone_buckets: Vec<_> = before.1.iter().filter(|b| !after.1.contains(b)).collect();
    assert!(gone_stacks.is_empty() && gone_buckets.is_empty(), "deleted: {gone_stacks:?} {gone_buckets:?}");
    assert_eq!(after.2, before.2, "the key changed state");
    assert_eq!(after.2.as_deref(), Some("Enabled"), "the key is not scheduled for deletion");
    let stack = cp.cfn.describe(&tccpi).await?.expect("TCCPI exists");
    assert!(stack.status.is_usable(), "{:?}", stack.status);
    assert!(f.operator_alive(), "the operator stopped");
    f.kill_operator().await;
    Ok(())
}

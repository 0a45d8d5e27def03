//! A node config that fails its checks, end to end against testenv and moto: a running cluster
//! relabelled to a Release whose Kubernetes the checks do not know (1.35, for which no
//! `KubeletConfiguration` field list is kept) gets `Ready=False` with reason `NodeConfigInvalid`
//! on its control plane and its node pool, naming the node, the file and the problem, with a
//! Warning event each; no node config is uploaded to S3, neither node stack is updated, no
//! instance is touched, and the instances running stay.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use apis::aws::{AWSCluster, AWSControlPlane, AWSMachineDeployment};
use apis::release::Release;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use support::*;

const ID: &str = "ncv01";

fn now() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or_default()
}

/// Every node config in the tenant account's buckets, with its ETag.
async fn objects(tenant: &aws_operator::aws::AccountClients) -> anyhow::Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for bucket in tenant.s3.list_buckets().send().await?.buckets() {
        let Some(bucket) = bucket.name() else { continue };
        let listed = tenant.s3.list_objects_v2().bucket(bucket).send().await?;
        for object in listed.contents().iter().filter(|o| o.key().is_some_and(|k| k.contains("/cloudconfig/"))) {
            out.insert(
                format!("{bucket}/{}", object.key().unwrap_or_default()),
                object.e_tag().unwrap_or_default().to_string(),
            );
        }
    }
    Ok(out)
}

/// The running instances of the tenant account.
async fn running(tenant: &aws_operator::aws::AccountClients) -> anyhow::Result<BTreeSet<String>> {
    let out = tenant.ec2.describe_instances().send().await?;
    Ok(out
        .reservations()
        .iter()
        .flat_map(|r| r.instances())
        .filter(|i| i.state().and_then(|s| s.name()).is_some_and(|n| n.as_str() == "running"))
        .filter_map(|i| i.instance_id().map(str::to_string))
        .collect())
}

/// The stacks of the cluster's nodes (the masters' and the pool's) with their status, last update
/// and template hash: what an update of either would change.
async fn node_stacks(tenant: &aws_operator::aws::AccountClients) -> anyhow::Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for name in [format!("cluster-{ID}-tccpn"), format!("cluster-{ID}-tcnp-np001")] {
        let described = tenant.cfn_client.describe_stacks().stack_name(&name).send().await?;
        for stack in described.stacks() {
            let hash = stack
                .outputs()
                .iter()
                .find(|o| o.output_key() == Some(aws_stacks::state::TEMPLATE_HASH_OUTPUT))
                .and_then(|o| o.output_value());
            out.insert(
                name.clone(),
                format!("{:?} updated {:?} template {hash:?}", stack.stack_status(), stack.last_updated_time()),
            );
        }
    }
    Ok(out)
}

/// `Ready=False` with `reason` on `object`'s conditions, its message.
fn refused(
    conditions: Option<&Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition>>,
    reason: &str,
) -> Option<String> {
    conditions?
        .iter()
        .find(|c| c.type_ == "Ready" && c.status == "False" && c.reason == reason)
        .map(|c| c.message.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_whose_node_configs_fail_their_checks_is_refused_and_nothing_running_is_replaced()
-> anyhow::Result<()> {
    let mut f = Fixture::start().await?;
    f.apply_basics().await?;
    f.credential_secret(ID).await?;
    f.cluster(ID).await?;
    f.control_plane(ID, "cp001", &["eu-central-1a"], 1).await?;
    f.node_pool(ID, "np001", &["eu-central-1a"], 1, 2).await?;
    f.start_operator().await?;
    let clusters: Api<AWSCluster> = Api::namespaced(f.client.clone(), NS);
    let up = eventually(300, "the cluster to be Ready", || async {
        let c = clusters.get(ID).await?;
        Ok(ready(c.status.as_ref().map(|s| &s.conditions)).then_some(()))
    })
    .await;
    if let Err(e) = up {
        anyhow::bail!("{e}\n{}", dump(&f.client).await);
    }
    // The same Release but for Kubernetes 1.35.0.
    let release: Release = serde_json::from_value(serde_json::json!({
        "apiVersion": "release.giantswarm.io/v1alpha1", "kind": "Release", "metadata": {"name": "v20.0.5"},
        "spec": {"state": "active", "date": "2026-10-01T12:00:00Z", "components": [
            {"name": "kubernetes", "version": "1.35.0"},
            {"name": "etcd", "version": "3.5.16"},
            {"name": "containerlinux", "version": FLATCAR},
            {"name": "aws-operator", "version": VERSION}
        ]}
    }))?;
    Api::<Release>::all(f.client.clone()).create(&PostParams::default(), &release).await?;
    // The operator stopped while the three objects are relabelled, so that it sees them
    // relabelled together, as one `kubectl label` of them would leave them.
    f.kill_operator().await;
    let tenant = f.tenant_clients().await?;
    let objects_before = objects(&tenant).await?;
    assert_eq!(objects_before.len(), 2, "a master's and a worker's config were uploaded: {objects_before:?}");
    let stacks_before = node_stacks(&tenant).await?;
    assert_eq!(stacks_before.len(), 2, "{stacks_before:?}");
    let instances = running(&tenant).await?;
    assert_eq!(instances.len(), 2, "one master and one worker run: {instances:?}");

    let since = now();
    let patch = Patch::Merge(serde_json::json!({"metadata": {"labels": {"release.giantswarm.io/version": "20.0.5"}}}));
    let pp = PatchParams::default();
    clusters.patch(ID, &pp, &patch).await?;
    let cps: Api<AWSControlPlane> = Api::namespaced(f.client.clone(), NS);
    let mds: Api<AWSMachineDeployment> = Api::namespaced(f.client.clone(), NS);
    cps.patch("cp001", &pp, &patch).await?;
    mds.patch("np001", &pp, &patch).await?;
    f.start_operator().await?;

    let refusals = eventually(120, "NodeConfigInvalid on the control plane and the node pool", || async {
        let cp = refused(cps.get("cp001").await?.status.as_ref().map(|s| &s.conditions), "NodeConfigInvalid");
        let md = refused(mds.get("np001").await?.status.as_ref().map(|s| &s.conditions), "NodeConfigInvalid");
        Ok(cp.zip(md))
    })
    .await;
    let (cp_message, md_message) = match refusals {
        Ok(m) => m,
        Err(e) => anyhow::bail!("{e}\n{}", dump(&f.client).await),
    };
    for (message, node) in [(&cp_message, "node master-0"), (&md_message, "node worker-np001")] {
        for part in [
            node,
            "/etc/kubernetes/config/kubelet.yaml",
            "KubeletConfiguration of Kubernetes v1.35.0: no field list is kept for 1.35",
            "nothing is uploaded and no node is replaced",
        ] {
            assert!(message.contains(part), "{part:?} in {message}");
        }
    }
    for (name, node) in [("cp001", "master-0"), ("np001", "worker-np001")] {
        let notes = warnings(&f.client, name, "NodeConfigInvalid").await?;
        assert!(notes.iter().any(|n| n.contains(node) && n.contains("kubelet.yaml")), "{name}: {notes:?}");
    }

    // A while later: nothing of the nodes was written in AWS, and the same instances run.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let writes: Vec<String> = f
        .moto
        .request_log()?
        .into_iter()
        .filter(|r| r.time >= since && r.is_write())
        .filter(|r| matches!(r.service.as_str(), "s3" | "kms" | "ec2" | "autoscaling"))
        .map(|r| format!("{} {} in {}", r.service, r.action, r.account))
        .collect();
    assert_eq!(writes, Vec::<String>::new(), "no node config, key, instance or group written");
    assert_eq!(node_stacks(&tenant).await?, stacks_before, "the masters' and the pool's stacks were not updated");
    assert_eq!(objects(&tenant).await?, objects_before, "the bucket is as it was");
    assert_eq!(running(&tenant).await?, instances, "the same instances run");
    f.kill_operator().await;
    Ok(())
}

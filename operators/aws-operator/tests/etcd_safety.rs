//! etcd safety against testenv and moto: edits of a running control plane that would replace a
//! master's etcd volume or interface (its zones, fewer masters) are refused by the API server's
//! transition rules, naming the field; an object that got past them (a CRD from before the
//! rules) is refused by the operator, which deploys nothing. The volumes are checked through
//! EC2's own API, the stack writes through moto's request log.

mod support;

use std::collections::BTreeMap;

use apis::aws::AWSControlPlane;
use aws_sdk_ec2::types::Filter;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;
use support::*;

const CP: &str = "cpetcd";
const ZONES: [&str; 3] = ["eu-central-1a", "eu-central-1b", "eu-central-1c"];

/// Name tag → (volume ID, zone) of the cluster's etcd volumes.
async fn etcd_volumes(f: &Fixture, id: &str) -> anyhow::Result<BTreeMap<String, (String, String)>> {
    let tenant = f.tenant_clients().await?;
    let names: Vec<String> = [1, 2, 3].map(|n| aws_stacks::names::master_etcd_volume(id, n)).into();
    let out = tenant
        .ec2
        .describe_volumes()
        .filters(Filter::builder().name("tag:Name").set_values(Some(names)).build())
        .send()
        .await?;
    Ok(out
        .volumes()
        .iter()
        .map(|v| {
            let name = v.tags().iter().find(|t| t.key() == Some("Name")).and_then(|t| t.value()).unwrap_or_default();
            let id = v.volume_id().unwrap_or_default();
            (name.to_owned(), (id.to_owned(), v.availability_zone().unwrap_or_default().to_owned()))
        })
        .collect())
}

fn spec_patch(zones: &[&str], replicas: i32) -> Patch<serde_json::Value> {
    Patch::Merge(json!({"spec": {"availabilityZones": zones, "replicas": replicas}}))
}

/// The API server's answer to an edit it refuses.
async fn refused(cps: &Api<AWSControlPlane>, patch: &Patch<serde_json::Value>) -> anyhow::Result<String> {
    match cps.patch(CP, &PatchParams::default(), patch).await {
        Err(kube::Error::Api(e)) if e.code == 422 => Ok(e.message),
        other => anyhow::bail!("the edit was not refused with 422: {other:?}"),
    }
}

/// The `Ready` condition once it is `False` with `reason` and its message names `needle`.
async fn not_ready(cps: &Api<AWSControlPlane>, reason: &str, needle: &str) -> anyhow::Result<String> {
    eventually(60, &format!("Ready=False {reason} naming {needle}"), || async {
        let cp = cps.get(CP).await?;
        let cond = cp.status.as_ref().and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready")).cloned();
        Ok(cond.filter(|c| c.status == "False" && c.reason == reason && c.message.contains(needle)).map(|c| c.message))
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zone_and_master_count_edits_leave_the_etcd_volumes_alone() -> anyhow::Result<()> {
    let mut f = Fixture::start().await?;
    f.apply_basics().await?;
    let id = "etcd3";
    f.credential_secret(id).await?;
    f.cluster(id).await?;
    f.control_plane(id, CP, &ZONES, 3).await?;
    f.start_operator().await?;
    let cps: Api<AWSControlPlane> = Api::namespaced(f.client.clone(), NS);
    if let Err(e) = eventually(240, "the control plane to be Ready", || async {
        Ok(ready(cps.get(CP).await?.status.as_ref().map(|s| &s.conditions)).then_some(()))
    })
    .await
    {
        anyhow::bail!("{e}\n{}", dump(&f.client).await);
    }
    let before = etcd_volumes(&f, id).await?;
    let zones: Vec<&str> = before.values().map(|(_, az)| az.as_str()).collect();
    assert_eq!(zones, ZONES, "one etcd volume per master and zone: {before:?}");

    // The API server refuses both edits and names the field.
    let rotated = ["eu-central-1b", "eu-central-1c", "eu-central-1a"];
    let message = refused(&cps, &spec_patch(&rotated, 3)).await?;
    assert!(message.contains("spec.availabilityZones: Forbidden"), "{message}");
    assert!(message.contains("cannot move an existing master to another zone"), "{message}");
    let message = refused(&cps, &spec_patch(&["eu-central-1a"], 1)).await?;
    assert!(message.contains("spec.replicas: Forbidden: spec.replicas cannot go down"), "{message}");
    // Edits that move no member are still allowed (checked as dry runs: nothing to roll out).
    let dry_run = PatchParams { dry_run: true, ..Default::default() };
    cps.patch(CP, &dry_run, &Patch::Merge(json!({"spec": {"instanceType": "m5.2xlarge"}}))).await?;
    cps.patch(CP, &dry_run, &spec_patch(&["eu-central-1a", "eu-central-1b", "eu-central-1c"], 3)).await?;

    // An object that gets past the rules (its CRD predates them): the operator refuses it,
    // Ready=False, and deploys nothing.
    let crds: Api<CustomResourceDefinition> = Api::all(f.client.clone());
    let mut crd = crds.get("awscontrolplanes.infrastructure.giantswarm.io").await?;
    for version in &mut crd.spec.versions {
        if let Some(spec) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
            .and_then(|s| s.properties.as_mut())
            .and_then(|p| p.get_mut("spec"))
        {
            spec.x_kubernetes_validations = None;
        }
    }
    crds.replace(&crd.metadata.name.clone().unwrap_or_default(), &PostParams::default(), &crd).await?;
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_secs_f64();
    eventually(20, "the CRD without its rules to be served", || async {
        Ok(cps.patch(CP, &PatchParams::default(), &spec_patch(&["eu-central-1a"], 1)).await.ok().map(|_| ()))
    })
    .await?;
    let message = not_ready(&cps, "EtcdReplacementRefused", "EtcdVolume3 would be deleted").await?;
    assert!(message.contains("spec.replicas") && message.contains("nothing was deployed"), "{message}");
    assert!(message.contains("EtcdVolume2 would be deleted"), "{message}");
    cps.patch(CP, &PatchParams::default(), &spec_patch(&rotated, 3)).await?;
    let message =
        not_ready(&cps, "EtcdReplacementRefused", "EtcdVolume would move from zone eu-central-1a to eu-central-1b")
            .await?;
    assert!(message.contains("spec.availabilityZones"), "{message}");
    // A few more reconciles go by without a stack write.
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let stack_writes: Vec<String> = f
        .moto
        .request_log()?
        .into_iter()
        .filter(|r| r.time >= since && r.service == "cloudformation" && r.is_write())
        .map(|r| r.action)
        .collect();
    assert!(stack_writes.is_empty(), "stack writes after the refused edits: {stack_writes:?}");
    assert_eq!(etcd_volumes(&f, id).await?, before, "the etcd volumes changed");

    // Set back to what is deployed, the control plane is Ready again.
    cps.patch(CP, &PatchParams::default(), &spec_patch(&ZONES, 3)).await?;
    if let Err(e) = eventually(60, "the control plane to be Ready again", || async {
        Ok(ready(cps.get(CP).await?.status.as_ref().map(|s| &s.conditions)).then_some(()))
    })
    .await
    {
        anyhow::bail!("{e}\n{}", dump(&f.client).await);
    }
    assert_eq!(etcd_volumes(&f, id).await?, before, "the etcd volumes changed");
    f.kill_operator().await;
    Ok(())
}

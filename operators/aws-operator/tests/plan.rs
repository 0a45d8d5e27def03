//! `aws-operator plan`, the binary, against a cluster the operator created in moto: the
//! cluster's own objects plan no change (exit 0); the same objects on a Release with a new
//! Flatcar plan updates of the masters' and the pool's stacks (exit 2), in text and JSON, and
//! no change set is left behind.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use apis::aws::{AWSCluster, AWSControlPlane, AWSMachineDeployment};
use apis::release::Release;
use aws_stacks::names::{StackKind, stack_name};
use kube::Api;
use support::*;

const ID: &str = "pln01";

/// The cluster's objects and both Releases as one multi-document file, labelled `release`.
async fn cr_file(f: &Fixture, dir: &Path, release: &str) -> anyhow::Result<PathBuf> {
    let mut docs: Vec<serde_json::Value> = Vec::new();
    let relabel = |mut v: serde_json::Value| {
        v["metadata"]["labels"]["release.giantswarm.io/version"] = serde_json::json!(release);
        v
    };
    docs.push(relabel(serde_json::to_value(Api::<AWSCluster>::namespaced(f.client.clone(), NS).get(ID).await?)?));
    docs.push(relabel(serde_json::to_value(
        Api::<AWSControlPlane>::namespaced(f.client.clone(), NS).get("cp001").await?,
    )?));
    docs.push(relabel(serde_json::to_value(
        Api::<AWSMachineDeployment>::namespaced(f.client.clone(), NS).get("np001").await?,
    )?));
    for name in ["v20.0.0", "v20.1.0"] {
        docs.push(serde_json::to_value(Api::<Release>::all(f.client.clone()).get(name).await?)?);
    }
    // The issuer the cluster's roles trust (its CloudFront distribution), as the operator wrote it.
    let issuer = Api::<k8s_openapi::api::core::v1::ConfigMap>::namespaced(f.client.clone(), NS)
        .get(&format!("{ID}-irsa-cloudfront"))
        .await?;
    docs.push(serde_json::to_value(issuer)?);
    // As `kubectl get … -o yaml` prints several objects: one List.
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": docs});
    let path = dir.join(format!("cluster-{release}.yaml"));
    std::fs::write(&path, serde_json::to_string_pretty(&list)?)?;
    Ok(path)
}

/// Run the binary's `plan` on `file`: exit code and stdout (stderr in the error).
fn plan(f: &Fixture, ami_file: &Path, file: &Path, extra: &[&str]) -> anyhow::Result<(i32, String)> {
    let out = Command::new(env!("CARGO_BIN_EXE_aws-operator"))
        .arg("plan")
        .args(["--installation", &f.installation, "--region", REGION])
        .args(["--aws-endpoint-url", &f.moto.endpoint()])
        .args(["--control-plane-role-arn", &format!("arn:aws:iam::{}:role/aws-operator", f.cp_account)])
        .args(["--tenant-role-arn", &f.tenant_role()])
        .arg("--ami-file")
        .arg(ami_file)
        .args(extra)
        .arg(file)
        .env("AWS_ACCESS_KEY_ID", "AKIAPLANCOMMAND")
        .env("AWS_SECRET_ACCESS_KEY", "secret")
        .env_remove("AWS_PROFILE")
        .output()?;
    let stdout = String::from_utf8(out.stdout)?;
    let code = out.status.code().unwrap_or(-1);
    anyhow::ensure!(code == 0 || code == 2, "plan failed ({code}): {}\n{stdout}", String::from_utf8_lossy(&out.stderr));
    Ok((code, stdout))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_prints_the_pending_upgrade_and_leaves_no_change_set() -> anyhow::Result<()> {
    let mut f = Fixture::start().await?;
    f.apply_basics().await?;
    f.release("20.1.0", FLATCAR_NEXT, VERSION).await?;
    f.credential_secret(ID).await?;
    f.cluster(ID).await?;
    f.control_plane(ID, "cp001", &["eu-central-1a"], 1).await?;
    f.node_pool(ID, "np001", &["eu-central-1a"], 1, 2).await?;
    f.start_operator().await?;
    let clusters: Api<AWSCluster> = Api::namespaced(f.client.clone(), NS);
    let created = eventually(60, "the cluster to be Ready", || async {
        let c = clusters.get(ID).await?;
        Ok(ready(c.status.as_ref().map(|s| &s.conditions)).then_some(()))
    })
    .await;
    if let Err(e) = created {
        anyhow::bail!("{e}\n{}", dump(&f.client).await);
    }
    // The plan reads AWS alone: nothing reconciles meanwhile.
    f.kill_operator().await;

    let dir = tempfile::tempdir()?;
    let ami_file = dir.path().join("ami.json");
    std::fs::write(
        &ami_file,
        format!(
            r#"{{"{FLATCAR}": {{"{REGION}": "ami-0a1b2c3d4e5f60001"}}, "{FLATCAR_NEXT}": {{"{REGION}": "ami-0a1b2c3d4e5f60002"}}}}"#
        ),
    )?;
    let tccpn = stack_name(ID, StackKind::Tccpn, None);
    let tcnp = stack_name(ID, StackKind::Tcnp, Some("np001"));

    // As deployed: nothing to do.
    let current = cr_file(&f, dir.path(), "20.0.0").await?;
    let (code, out) = plan(&f, &ami_file, &current, &[])?;
    assert_eq!(code, 0, "{out}");
    assert!(out.contains(&format!("= {tcnp} (tenant): no changes")), "{out}");
    assert!(!out.contains("~ "), "{out}");

    // On the new Release: the masters' and the pool's launch templates change, their groups roll.
    let next = cr_file(&f, dir.path(), "20.1.0").await?;
    let (code, out) = plan(&f, &ami_file, &next, &[])?;
    assert_eq!(code, 2, "{out}");
    let pool = out.split(&format!("~ {tcnp} (tenant): ")).nth(1).unwrap_or_default();
    assert!(pool.starts_with("0 added, 2 modified, 0 removed"), "{out}");
    assert!(pool.contains("~ NodePoolLaunchTemplate (AWS::EC2::LaunchTemplate)"), "{out}");
    assert!(pool.contains("Properties.LaunchTemplateData.ImageId"), "{out}");
    assert!(pool.contains("~ NodePoolAutoScalingGroup (AWS::AutoScaling::AutoScalingGroup)"), "{out}");
    assert!(pool.contains("replaces instances"), "{out}");
    assert!(out.contains(&format!("~ {tccpn} (tenant): ")), "{out}");

    let (code, json) = plan(&f, &ami_file, &next, &["--output", "json"])?;
    assert_eq!(code, 2);
    let doc: serde_json::Value = serde_json::from_str(&json)?;
    assert_eq!(doc["changes"], true);
    let stacks = doc["clusters"][0]["stacks"].as_array().cloned().unwrap_or_default();
    let pool = stacks.iter().find(|s| s["stack"] == tcnp.as_str()).cloned().unwrap_or_default();
    assert_eq!(pool["action"], "update", "{json}");
    let lt =
        pool["diff"].as_array().and_then(|d| d.iter().find(|c| c["logical_id"] == "NodePoolLaunchTemplate")).cloned();
    assert!(lt.is_some_and(|c| c["paths"].to_string().contains("ImageId")), "{json}");

    // No change set is left, in either account; the stacks are as they were.
    let (tenant, cp) = (f.tenant_clients().await?, f.control_plane_clients().await?);
    for kind in
        [StackKind::Tccpi, StackKind::Tccp, StackKind::Tccpf, StackKind::Tccpn, StackKind::Tcnp, StackKind::Tcnpf]
    {
        let owner = matches!(kind, StackKind::Tcnp | StackKind::Tcnpf).then_some("np001");
        let name = stack_name(ID, kind, owner);
        for clients in [&tenant, &cp] {
            let listed = clients.cfn.change_sets(&name).await?;
            assert!(listed.is_empty(), "change sets of {name} left behind: {listed:?}");
        }
    }
    let view = tenant.cfn.describe(&tcnp).await?.expect("the pool's stack");
    assert_eq!(view.status.as_str(), "CREATE_COMPLETE", "plan changed nothing");
    Ok(())
}

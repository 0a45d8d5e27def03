//! The daemon binary as a pod runs it: the kubelet's SIGTERM stops it cleanly, and it hands its
//! leader Lease over at once (empty holder) instead of leaving it to expire; and it runs the drain
//! executor, so that a DrainerConfig of its version drains a workload-cluster node with no
//! node-operator.

mod support;

use std::time::Duration;

use apis::drainer::{CONDITION_DRAINED, DrainerConfig};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Secret};
use kube::Api;
use kube::api::PostParams;
use support::*;
use workload_sim::{Machine, Workload, WorkloadCluster};

/// The daemon binary against the fixture's testenv and moto.
fn daemon(f: &Fixture, ami: &std::path::Path) -> anyhow::Result<tokio::process::Child> {
    Ok(tokio::process::Command::new(env!("CARGO_BIN_EXE_aws-operator"))
        .args(["daemon", "--listen", "127.0.0.1:0", "--installation", &f.installation, "--region", REGION])
        .args(["--control-plane-role-arn", &format!("arn:aws:iam::{}:role/aws-operator", f.cp_account)])
        .args(["--aws-endpoint-url", &f.moto.endpoint(), "--ami-file"])
        .arg(ami)
        .args(["--leader-election-namespace", "giantswarm"])
        .env("KUBECONFIG", f.env.kubeconfig_path())
        .env("AWS_ACCESS_KEY_ID", "AKIASHUTDOWN")
        .env("AWS_SECRET_ACCESS_KEY", "secret")
        .env("RUST_LOG", "warn")
        .kill_on_drop(true)
        .spawn()?)
}

fn ami_file() -> anyhow::Result<tempfile::NamedTempFile> {
    let ami = tempfile::NamedTempFile::new()?;
    std::fs::write(ami.path(), format!(r#"{{"{FLATCAR}": {{"{REGION}": "ami-0a1b2c3d4e5f60001"}}}}"#))?;
    Ok(ami)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_the_daemon_and_releases_its_lease() -> anyhow::Result<()> {
    let f = Fixture::start().await?;
    f.apply_basics().await?;
    let ami = ami_file()?;
    let mut daemon = daemon(&f, ami.path())?;

    let leases: Api<Lease> = Api::namespaced(f.client.clone(), "giantswarm");
    let name = aws_operator::daemon::lease_name(VERSION);
    let holder = |lease: Option<Lease>| lease.and_then(|l| l.spec?.holder_identity).filter(|h| !h.is_empty());
    eventually(60, "the daemon to hold its Lease", || async { Ok(holder(leases.get_opt(&name).await?)) }).await?;

    let pid = daemon.id().expect("the daemon is running");
    let kill = std::process::Command::new("kill").args(["-TERM", &pid.to_string()]).status()?;
    assert!(kill.success(), "kill -TERM {pid}: {kill:?}");
    let exited = tokio::time::timeout(Duration::from_secs(20), daemon.wait())
        .await
        .map_err(|_| anyhow::anyhow!("the daemon was still running 20 s after SIGTERM"))??;
    assert!(exited.success(), "the daemon exits cleanly on SIGTERM: {exited:?}");
    let lease = leases.get(&name).await?;
    assert_eq!(holder(Some(lease.clone())), None, "the Lease is released: {:?}", lease.spec);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_drains_the_nodes_its_drainer_configs_name() -> anyhow::Result<()> {
    let f = Fixture::start().await?;
    f.apply_basics().await?;
    let wc = WorkloadCluster::start().await?;
    wc.add_machine(&Machine::new("wc-node-1")).await?;
    let workload = Workload::new("web", "web", 3).max_unavailable(1);
    wc.deploy(&workload).await?;
    wc.wait_ready("web", "web", 3).await?;
    wc.add_machine(&Machine::new("wc-node-2")).await?;
    let id = "drn01";
    wc.install_kubeconfig(&Api::<Secret>::namespaced(f.client.clone(), NS), NS, id).await?;
    let ami = ami_file()?;
    let _daemon = daemon(&f, ami.path())?;

    let dc: DrainerConfig = serde_json::from_value(serde_json::json!({
        "apiVersion": "core.giantswarm.io/v1alpha1", "kind": "DrainerConfig",
        "metadata": {"name": "wc-node-1", "namespace": NS,
                     "labels": {"aws-operator.giantswarm.io/version": VERSION, apis::labels::CLUSTER: id}},
        "spec": {"guest": {"cluster": {"api": {"endpoint": format!("api.{id}.k8s.example.com")}, "id": id},
                           "node": {"name": "wc-node-1"}},
                 "versionBundle": {"version": VERSION}}
    }))?;
    let dcs: Api<DrainerConfig> = Api::namespaced(f.client.clone(), NS);
    dcs.create(&PostParams::default(), &dc).await?;
    let drained = eventually(90, "the DrainerConfig to be Drained", || async {
        Ok(dcs.get("wc-node-1").await?.status.filter(|s| s.has_condition(CONDITION_DRAINED)))
    })
    .await?;
    assert_eq!(drained.evicted_pods, 3, "{drained:?}");
    let node = Api::<Node>::all(wc.client()).get("wc-node-1").await?;
    assert_eq!(node.spec.and_then(|s| s.unschedulable), Some(true), "the drained node is cordoned");
    assert!(wc.pods_on("wc-node-1").await?.is_empty(), "no workload pod is left on the node");
    Ok(())
}

//! The daemon as a pod runs it: the kubelet's SIGTERM stops it cleanly, and it hands its leader
//! Lease over at once (empty holder) instead of leaving it to expire.

mod support;

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_the_daemon_and_releases_its_lease() -> anyhow::Result<()> {
    let f = Fixture::start().await?;
    f.apply_basics().await?;
    let ami = tempfile::NamedTempFile::new()?;
    std::fs::write(ami.path(), format!(r#"{{"{FLATCAR}": {{"{REGION}": "ami-0a1b2c3d4e5f60001"}}}}"#))?;
    let mut daemon = tokio::process::Command::new(env!("CARGO_BIN_EXE_aws-operator"))
        .args(["daemon", "--listen", "127.0.0.1:0", "--installation", &f.installation, "--region", REGION])
        .args(["--control-plane-role-arn", &format!("arn:aws:iam::{}:role/aws-operator", f.cp_account)])
        .args(["--aws-endpoint-url", &f.moto.endpoint(), "--ami-file"])
        .arg(ami.path())
        .args(["--leader-election-namespace", "giantswarm"])
        .env("KUBECONFIG", f.env.kubeconfig_path())
        .env("AWS_ACCESS_KEY_ID", "AKIASHUTDOWN")
        .env("AWS_SECRET_ACCESS_KEY", "secret")
        .env("RUST_LOG", "warn")
        .kill_on_drop(true)
        .spawn()?;

    let leases: Api<Lease> = Api::namespaced(f.client.clone(), "giantswarm");
    let name = aws_operator::operator::lease_name(VERSION);
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

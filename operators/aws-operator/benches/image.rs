//! Figures of the aws-operator image built from this (release-profile) binary with
//! `tools/images/build-image.sh`: its uncompressed size, the cold start of its entrypoint from
//! the unpacked root filesystem to `/readyz` (target ≤ 1 s), and the resident memory at idle
//! with no clusters. Needs root, buildah (`make image-tools`) and Helm (`make venv`).
//!
//! The daemon runs as the chart's pod would (`packaging::pod`): the chart installed into a
//! testenv serving TLS with RBAC, the container's arguments and environment from the rendered
//! Deployment, the ServiceAccount's token and CA at the standard paths, the root filesystem
//! read-only, chroot as uid 65532. Each start is the leader (the previous holder's Lease is
//! deleted), as the one replica of a fresh install would be.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, DeleteParams};
use packaging::image::{OciImage, RootfsProcess};
use packaging::pod::ContainerRun;

const NAMESPACE: &str = "giantswarm";
const VALUES: &str = "ci/minimal-values.yaml";
const RUNS: usize = 5;

fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").map(|m| m.uid() == 0).unwrap_or(false)
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// The chart's pod, started on a free port; its /readyz port.
fn start(
    env: &testenv::TestEnv,
    image: &OciImage,
    rootfs: &std::path::Path,
    rendered: &[serde_json::Value],
    run: usize,
) -> Result<(RootfsProcess, u16)> {
    let port = free_port()?;
    let container = ContainerRun::from_rendered(rendered, &format!("aws-operator-bench-{run}"))?
        .listening_on(&format!("127.0.0.1:{port}"));
    Ok((container.start(env.handle(), image, rootfs)?, port))
}

fn main() -> Result<()> {
    if std::env::args().any(|a| a == "--list") {
        return Ok(());
    }
    ensure!(is_root(), "the image benchmark runs the image with chroot: run it as root");
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let dir = tempfile::tempdir()?;
    // IMAGE_BINARY: measure another build (e.g. `make images`' release binary) with this driver.
    let binary = std::env::var_os("IMAGE_BINARY")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_aws-operator")));
    println!("image/aws-operator from {}", binary.display());
    let image = packaging::image::build("aws-operator", &binary, &dir.path().join("image"))?;
    let rootfs = dir.path().join("rootfs");
    image.unpack(&rootfs)?;
    let stripped = std::fs::metadata(rootfs.join("usr/local/bin/aws-operator"))?.len();
    println!(
        "image/aws-operator size: {:.1} MiB uncompressed ({} bytes; target ≤ 40 MiB), stripped binary {:.1} MiB",
        mib(image.size),
        image.size,
        mib(stripped)
    );

    let env = runtime.block_on(testenv::TestEnv::builder().secure().start())?;
    packaging::helm_against(
        env.kubeconfig_path(),
        &packaging::chart_dir("aws-operator"),
        &["install", "aws-operator", ".", "--namespace", NAMESPACE, "--create-namespace", "--values", VALUES],
    )?;
    let rendered = packaging::helm_template("aws-operator", &[VALUES], &[])?;
    let lease = format!("aws-operator-{}", env!("CARGO_PKG_VERSION"));
    let leases: Api<Lease> = Api::namespaced(env.client(), NAMESPACE);
    let fresh = |leases: &Api<Lease>| -> Result<()> {
        runtime.block_on(async {
            match leases.delete(&lease, &DeleteParams::default()).await {
                Ok(_) => Ok(()),
                Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
                Err(e) => Err(e).context("deleting the leader Lease"),
            }
        })
    };

    let mut starts = Vec::new();
    for run in 0..RUNS {
        fresh(&leases)?;
        let (mut operator, port) = start(&env, &image, &rootfs, &rendered, run)?;
        starts.push(operator.wait_ready(port, Duration::from_secs(60))?);
    }
    starts.sort();
    println!(
        "image/aws-operator cold start rootfs -> /readyz (TLS testenv, ServiceAccount token, read-only rootfs, uid 65532, {RUNS} runs): median {:.0} ms, min {:.0} ms, max {:.0} ms (target ≤ 1000 ms)",
        starts[RUNS / 2].as_secs_f64() * 1000.0,
        starts[0].as_secs_f64() * 1000.0,
        starts[RUNS - 1].as_secs_f64() * 1000.0
    );
    fresh(&leases)?;
    let (mut operator, port) = start(&env, &image, &rootfs, &rendered, RUNS)?;
    operator.wait_ready(port, Duration::from_secs(60))?;
    std::thread::sleep(Duration::from_secs(10));
    println!(
        "image/aws-operator idle RSS (leader, no clusters, 10 s after ready): {:.1} MiB",
        mib(operator.rss_bytes().unwrap_or_default())
    );
    drop(operator);
    drop(env);
    Ok(())
}

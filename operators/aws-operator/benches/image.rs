//! Figures of the aws-operator image built from this (release-profile) binary with
//! `tools/images/build-image.sh`: its uncompressed size, the cold start of its entrypoint from
//! the unpacked root filesystem (chroot, uid 65532) to `/readyz` against testenv, and the
//! resident memory at idle with no clusters. Needs root and buildah (`make image-tools`).
//!
//! testenv serves plain HTTP here, so the operator finds it through a kubeconfig written into
//! the root filesystem (`KUBECONFIG`), not through the in-cluster token and CA.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use packaging::image::{OciImage, RootfsProcess};

const NONROOT: u32 = 65532;

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

fn start(image: &OciImage, rootfs: &std::path::Path, listen: u16) -> Result<RootfsProcess> {
    let config = image.config()?;
    let entrypoint = config["Entrypoint"][0].as_str().context("entrypoint")?.to_string();
    let mut env: Vec<(String, String)> = config["Env"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str()?.split_once('=').map(|(k, v)| (k.to_string(), v.to_string())))
        .collect();
    env.push(("KUBECONFIG".into(), "/etc/kubeconfig".into()));
    env.push(("HOME".into(), "/home/nonroot".into()));
    let args = vec![
        "daemon".to_string(),
        format!("--listen=127.0.0.1:{listen}"),
        "--installation=bench".into(),
        "--ami-file=/etc/aws-operator/ami.json".into(),
    ];
    Ok(packaging::image::run_in_rootfs(rootfs, NONROOT, NONROOT, &entrypoint, &args, &env)?)
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
        "image/aws-operator size: {:.1} MiB uncompressed ({} bytes), stripped binary {:.1} MiB",
        mib(image.size),
        image.size,
        mib(stripped)
    );

    let env = runtime.block_on(async {
        let env = testenv::TestEnv::start().await?;
        let crds: Api<CustomResourceDefinition> = Api::all(env.client());
        for crd in apis::all_crds() {
            crds.create(&PostParams::default(), &crd).await?;
        }
        anyhow::Ok(env)
    })?;
    std::fs::create_dir_all(rootfs.join("etc/aws-operator"))?;
    std::fs::write(
        rootfs.join("etc/aws-operator/ami.json"),
        r#"{"4230.2.4": {"eu-central-1": "ami-0123456789abcdef0"}}"#,
    )?;
    std::fs::copy(env.kubeconfig_path(), rootfs.join("etc/kubeconfig"))?;
    // As a mounted Secret would be: readable by the pod's user.
    std::os::unix::fs::chown(rootfs.join("etc/kubeconfig"), Some(NONROOT), Some(NONROOT))?;

    let mut starts = Vec::new();
    for _ in 0..5 {
        let listen = free_port()?;
        let mut operator = start(&image, &rootfs, listen)?;
        starts.push(operator.wait_ready(listen, Duration::from_secs(60))?);
    }
    starts.sort();
    println!(
        "image/aws-operator cold start rootfs -> /readyz (chroot, uid 65532, 5 runs): median {:.0} ms, min {:.0} ms, max {:.0} ms",
        starts[2].as_secs_f64() * 1000.0,
        starts[0].as_secs_f64() * 1000.0,
        starts[4].as_secs_f64() * 1000.0
    );
    let listen = free_port()?;
    let mut operator = start(&image, &rootfs, listen)?;
    operator.wait_ready(listen, Duration::from_secs(60))?;
    std::thread::sleep(Duration::from_secs(10));
    println!(
        "image/aws-operator idle RSS (no clusters, 10 s after ready): {:.1} MiB",
        mib(operator.rss_bytes().unwrap_or_default())
    );
    drop(operator);
    drop(env);
    Ok(())
}

//! The aws-operator image, tested from the inside. `tools/images/build-image.sh` builds it from
//! the binary under test (the release pipeline and `make images` use the same Containerfile with
//! the release binary); the test unpacks it, checks what it holds, and runs its entrypoint from
//! the root filesystem with chroot as uid 65532 and only the image's environment.
//!
//! Then it runs the daemon as the chart's pod would run: the chart installed by Helm into a
//! testenv that serves TLS and authorizes with RBAC, the container's arguments and environment
//! from the rendered Deployment, the AMI ConfigMap as its file, the ServiceAccount's token and
//! CA at the standard paths, the root filesystem mounted read-only with a tmpfs on `/tmp` (the
//! chart's `emptyDir`). It must answer `/readyz` with 200, having been refused nothing, and
//! take the leader Lease the chart's Role names.
//!
//! The image's size budget (40 MiB) is checked by `make images` on the release binary; this
//! binary is a debug build (stripped, it is larger).

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use std::time::Duration;

use anyhow::{Context, Result, ensure};
use packaging::image::OciImage;
use packaging::pod::{ContainerRun, NONROOT};

/// Whether this process runs as root (chroot needs it; CI runs as root).
fn is_root() -> bool {
    std::fs::metadata("/proc/self").map(|m| m.uid() == 0).unwrap_or(false)
}

/// Every regular file of a root filesystem, relative to it.
fn files(root: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir)? {
            let entry = entry?;
            let kind = entry.file_type()?;
            if kind.is_dir() {
                stack.push(entry.path());
            } else if kind.is_file() {
                out.push(entry.path().strip_prefix(root)?.to_path_buf());
            }
        }
    }
    Ok(out)
}

/// The stripped binary, shared libraries, CA certificates and passwd files; no shell nor any
/// other program; user, entrypoint and OCI labels set.
fn check_contents(image: &OciImage, rootfs: &Path) -> Result<()> {
    let config = image.config()?;
    assert_eq!(config["User"], "65532:65532");
    assert_eq!(config["Entrypoint"], serde_json::json!(["/usr/local/bin/aws-operator"]));
    let labels = &config["Labels"];
    assert_eq!(
        labels["org.opencontainers.image.version"],
        env!("CARGO_PKG_VERSION"),
        "the image carries the crate version"
    );
    assert_eq!(labels["org.opencontainers.image.licenses"], "Apache-2.0");
    assert!(labels["org.opencontainers.image.source"].as_str().unwrap_or_default().starts_with("https://"));
    assert!(labels["org.opencontainers.image.revision"].as_str().is_some_and(|r| !r.is_empty()));

    let binary = rootfs.join("usr/local/bin/aws-operator");
    let meta = std::fs::metadata(&binary)?;
    assert_eq!(meta.uid(), 0, "the binary belongs to root, so uid 65532 cannot change it");
    assert_eq!(meta.permissions().mode() & 0o222, 0, "the binary is read-only");
    let sections = Command::new("readelf").arg("-S").arg(&binary).output()?;
    let sections = String::from_utf8_lossy(&sections.stdout);
    let debug_info = [".symtab", ".debug_info", ".debug_line"].into_iter().find(|s| sections.contains(s));
    assert!(debug_info.is_none(), "the binary is not stripped: it has {debug_info:?}");

    for file in files(rootfs)? {
        let name = file.to_string_lossy();
        let executable = std::fs::metadata(rootfs.join(&file))?.permissions().mode() & 0o111 != 0;
        let allowed = name == "usr/local/bin/aws-operator" || name.contains(".so");
        assert!(!executable || allowed, "{name}: an executable besides the operator and its libraries");
        assert!(!name.ends_with("/sh") && !name.ends_with("bash") && !name.ends_with("busybox"), "{name}: a shell");
        let writable_by_nonroot = std::fs::metadata(rootfs.join(&file))?.uid() == NONROOT;
        assert!(!writable_by_nonroot, "{name} belongs to uid 65532: the root filesystem must not be its to change");
    }
    let passwd = std::fs::read_to_string(rootfs.join("etc/passwd"))?;
    assert!(passwd.lines().any(|l| l.starts_with("nonroot:x:65532:65532:")), "{passwd}");
    assert!(rootfs.join("etc/ssl/certs/ca-certificates.crt").is_file());
    Ok(())
}

#[test]
fn the_image_holds_only_the_stripped_operator_and_its_daemon_reaches_readyz_as_the_charts_pod() -> Result<()> {
    ensure!(is_root(), "this test unpacks an image and runs it with chroot: it needs root, as CI has");
    let dir = tempfile::tempdir()?;
    let binary = PathBuf::from(env!("CARGO_BIN_EXE_aws-operator"));
    let image = packaging::image::build("aws-operator", &binary, &dir.path().join("image"))?;
    let rootfs = dir.path().join("rootfs");
    image.unpack(&rootfs)?;
    check_contents(&image, &rootfs)?;

    // The entrypoint runs from the image alone (its loader, libraries and certificates), as the
    // image's user, with the image's environment.
    let entrypoint = image.entrypoint()?;
    let env = image.env()?;
    let out = Command::new("chroot")
        .arg(format!("--userspec={NONROOT}:{NONROOT}"))
        .arg(&rootfs)
        .arg(entrypoint)
        .arg("--version")
        .env_clear()
        .envs(env)
        .output()?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the entrypoint failed in its rootfs: {}{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stdout.trim(), format!("aws-operator {}", env!("CARGO_PKG_VERSION")));

    the_daemon_reaches_readyz_as_the_charts_pod(&image, &rootfs)
}

/// The chart's pod, run from the image's root filesystem against a secure testenv.
fn the_daemon_reaches_readyz_as_the_charts_pod(image: &OciImage, rootfs: &Path) -> Result<()> {
    const NAMESPACE: &str = "giantswarm";
    const VALUES: &str = "ci/minimal-values.yaml";
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let env = runtime.block_on(testenv::TestEnv::builder().secure().start())?;
    // The chart as an administrator installs it (no simulation: nothing runs its Deployment).
    packaging::helm_against(
        env.kubeconfig_path(),
        &packaging::chart_dir("aws-operator"),
        &["install", "aws-operator", ".", "--namespace", NAMESPACE, "--create-namespace", "--values", VALUES],
    )?;
    let rendered = packaging::helm_template("aws-operator", &[VALUES], &[])?;
    let deployment = rendered.iter().find(|o| o["kind"] == "Deployment").context("a Deployment")?;
    let pod_name = format!("{}-7d9f8c6b5-x2x4z", deployment["metadata"]["name"].as_str().unwrap_or_default());
    let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let container = ContainerRun::from_rendered(&rendered, &pod_name)?.listening_on(&format!("127.0.0.1:{port}"));
    assert!(container.args.iter().any(|a| a == "daemon"), "{:?}", container.args);

    let mut daemon = container.start(env.handle(), image, rootfs)?;
    let took = daemon.wait_ready(port, Duration::from_secs(60))?;
    eprintln!("/readyz answered 200 after {took:?}");

    // Everything it asked for, it asked for as the chart's ServiceAccount, and RBAC allowed.
    let user = format!("system:serviceaccount:{NAMESPACE}:{}", container.service_account);
    let log = env.handle().access_log_of(&user);
    ensure!(!log.is_empty(), "no request of {user} reached the server");
    let refused: Vec<String> = log
        .iter()
        .filter(|r| !r.allowed)
        .map(|r| {
            format!("{} {}/{} {:?}", r.attributes.verb, r.attributes.group, r.attributes.resource, r.attributes.name)
        })
        .collect();
    ensure!(refused.is_empty(), "RBAC refused the chart's ServiceAccount: {refused:?}\n{}", daemon.log());
    // The leader Lease the chart's Role names, held by this pod.
    let lease = format!("aws-operator-{}", env!("CARGO_PKG_VERSION"));
    let leases: kube::Api<k8s_openapi::api::coordination::v1::Lease> = kube::Api::namespaced(env.client(), NAMESPACE);
    let start = std::time::Instant::now();
    loop {
        let holder =
            runtime.block_on(leases.get_opt(&lease))?.and_then(|l| l.spec?.holder_identity).unwrap_or_default();
        if holder.starts_with(&pod_name) {
            break;
        }
        ensure!(
            start.elapsed() < Duration::from_secs(30),
            "Lease {lease} held by {holder:?}, not {pod_name}:\n{}",
            daemon.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // Still ready on its read-only root filesystem, leading.
    ensure!(packaging::image::http_status(port, "/readyz") == Some(200), "{}", daemon.log());
    drop(daemon);
    Ok(())
}

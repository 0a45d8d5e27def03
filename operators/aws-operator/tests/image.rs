//! The aws-operator image, tested from the inside. `tools/images/build-image.sh` builds it from
//! the binary under test (the release pipeline and `make images` use the same Containerfile with
//! the release binary); the test unpacks it, checks what it holds, and runs its entrypoint from
//! the root filesystem with chroot as uid 65532 and only the image's environment. The image's
//! size budget (40 MiB) is checked by `make images` on the release binary; this binary is a
//! debug build (stripped, it is larger).

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Result, ensure};
use packaging::image::OciImage;

const NONROOT: u32 = 65532;

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
fn the_image_holds_only_the_stripped_operator_and_runs_as_nonroot_from_its_rootfs() -> Result<()> {
    ensure!(is_root(), "this test unpacks an image and runs it with chroot: it needs root, as CI has");
    let dir = tempfile::tempdir()?;
    let binary = PathBuf::from(env!("CARGO_BIN_EXE_aws-operator"));
    let image = packaging::image::build("aws-operator", &binary, &dir.path().join("image"))?;
    let rootfs = dir.path().join("rootfs");
    image.unpack(&rootfs)?;
    check_contents(&image, &rootfs)?;

    // The entrypoint runs from the image alone (its loader, libraries and certificates), as the
    // image's user, with the image's environment.
    let config = image.config()?;
    let entrypoint = config["Entrypoint"][0].as_str().unwrap_or_default();
    let env: Vec<(String, String)> = config["Env"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str()?.split_once('=').map(|(k, v)| (k.to_string(), v.to_string())))
        .collect();
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
    Ok(())
}

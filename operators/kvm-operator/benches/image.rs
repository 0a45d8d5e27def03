//! Figures of the kvm-operator image built from this (release-profile) binary with
//! `tools/images/build-image.sh`: its uncompressed size, the cold start of its entrypoint from
//! the unpacked root filesystem to `/readyz` (target ≤ 1 s), and the resident memory at idle
//! with no clusters (`packaging::proof::image_figures`). Needs root, buildah
//! (`make image-tools`) and Helm (`make venv`).
//!
//! The daemon runs as the chart's pod would (`packaging::pod`): the chart installed into a
//! testenv serving TLS with RBAC, the container's arguments and environment from the rendered
//! Deployment, the ServiceAccount's token and CA at the standard paths, the root filesystem
//! read-only, chroot as uid 65532. Each start is the leader (the previous holder's Lease is
//! deleted), as the one replica of a fresh install would be.

use std::path::PathBuf;

use anyhow::{Result, ensure};

fn main() -> Result<()> {
    if std::env::args().any(|a| a == "--list") {
        return Ok(());
    }
    ensure!(packaging::proof::is_root(), "the image benchmark runs the image with chroot: run it as root");
    // IMAGE_BINARY: measure another build (e.g. `make images`' release binary) with this driver.
    let binary = std::env::var_os("IMAGE_BINARY")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_kvm-operator")));
    packaging::proof::image_figures("kvm-operator", &binary, env!("CARGO_PKG_VERSION"), 5)?;
    Ok(())
}

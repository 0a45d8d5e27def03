//! Figures of the kvm-operator image built from this (release-profile) binary with
//! `tools/images/build-image.sh`: its uncompressed size, the cold start of its entrypoint from
//! the unpacked root filesystem to `/readyz` (target ≤ 1 s), and the resident memory at idle
//! with no clusters (`packaging::proof::image_figures`). Needs root, buildah
//! (`make image-tools`) and Helm (`make venv`). `IMAGE_BINARY=<path>` measures another build
//! (e.g. `make images`' release binary).
//!
//! The daemon runs as the chart's pod would (`packaging::pod`): the chart installed into a
//! testenv serving TLS with RBAC, the container's arguments and environment from the rendered
//! Deployment, the ServiceAccount's token and CA at the standard paths, the root filesystem
//! read-only, chroot as uid 65532. Each start is the leader (the previous holder's Lease is
//! deleted), as the one replica of a fresh install would be.

fn main() -> anyhow::Result<()> {
    let binary = std::path::Path::new(env!("CARGO_BIN_EXE_kvm-operator"));
    packaging::proof::image_bench_main("kvm-operator", binary, env!("CARGO_PKG_VERSION"))?;
    Ok(())
}

//! The kvm-operator image, tested from the inside, as aws-operator's is
//! (`packaging::proof`): `tools/images/build-image.sh` builds it from the binary under test with
//! `operators/kvm-operator/Containerfile`; the test unpacks it, checks that it holds only the
//! stripped operator, its libraries, CA certificates and passwd files, and runs its entrypoint
//! from the root filesystem with chroot as uid 65532 and only the image's environment.
//!
//! Then it runs the daemon as the chart's pod would run: the kvm-operator chart installed by
//! Helm into a testenv serving TLS with RBAC, the container's arguments and environment from the
//! rendered Deployment, the ServiceAccount's token and CA at the standard paths, the root
//! filesystem read-only with a tmpfs on `/tmp`. It must answer `/readyz` with 200, having been
//! refused nothing by the chart's RBAC, and take the leader Lease the chart's Role names.

use std::path::Path;

#[test]
fn the_image_holds_only_the_stripped_operator_and_its_daemon_reaches_readyz_as_the_charts_pod() -> anyhow::Result<()> {
    let binary = Path::new(env!("CARGO_BIN_EXE_kvm-operator"));
    let took = packaging::proof::prove_image("kvm-operator", binary, env!("CARGO_PKG_VERSION"))?;
    eprintln!("/readyz answered 200 after {took:?}");
    Ok(())
}

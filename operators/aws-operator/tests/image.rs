//! The aws-operator image, tested from the inside. `tools/images/build-image.sh` builds it from
//! the binary under test (the release pipeline and `make images` use the same Containerfile with
//! the release binary); the test unpacks it, checks what it holds, and runs its entrypoint from
//! the root filesystem with chroot as uid 65532 and only the image's environment.
//!
//! Then it runs the daemon as the chart's pod would run (`packaging::proof`): the chart
//! installed by Helm into a testenv that serves TLS and authorizes with RBAC, the container's
//! arguments and environment from the rendered Deployment, the AMI ConfigMap as its file, the
//! ServiceAccount's token and CA at the standard paths, the root filesystem mounted read-only
//! with a tmpfs on `/tmp` (the chart's `emptyDir`). It must answer `/readyz` with 200, having
//! been refused nothing, and take the leader Lease the chart's Role names.
//!
//! The image's size budget (40 MiB) is checked by `make images` on the release binary; this
//! binary is a debug build (stripped, it is larger).

use std::path::Path;

#[test]
fn the_image_holds_only_the_stripped_operator_and_its_daemon_reaches_readyz_as_the_charts_pod() -> anyhow::Result<()> {
    let binary = Path::new(env!("CARGO_BIN_EXE_aws-operator"));
    let took = packaging::proof::prove_image("aws-operator", binary, env!("CARGO_PKG_VERSION"))?;
    eprintln!("/readyz answered 200 after {took:?}");
    Ok(())
}

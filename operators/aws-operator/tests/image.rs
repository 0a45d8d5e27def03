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

use std::path::PathBuf;

use anyhow::{Result, ensure};
use packaging::proof::{ChartPod, check_contents, entrypoint_version, is_root};

const OPERATOR: &str = "aws-operator";
const VERSION: &str = env!("CARGO_PKG_VERSION");

#[test]
fn the_image_holds_only_the_stripped_operator_and_its_daemon_reaches_readyz_as_the_charts_pod() -> Result<()> {
    ensure!(is_root(), "this test unpacks an image and runs it with chroot: it needs root, as CI has");
    let dir = tempfile::tempdir()?;
    let binary = PathBuf::from(env!("CARGO_BIN_EXE_aws-operator"));
    let image = packaging::image::build(OPERATOR, &binary, &dir.path().join("image"))?;
    let rootfs = dir.path().join("rootfs");
    image.unpack(&rootfs)?;
    check_contents(&image, &rootfs, OPERATOR, VERSION)?;
    assert_eq!(entrypoint_version(&image, &rootfs)?, format!("{OPERATOR} {VERSION}"));

    let pod = ChartPod::start(OPERATOR)?;
    let took = pod.prove_ready_and_leading(&image, &rootfs, VERSION)?;
    eprintln!("/readyz answered 200 after {took:?}");
    Ok(())
}

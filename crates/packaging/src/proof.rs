//! What every operator image must prove, shared by the image tests and benchmarks of both
//! operators so that each proves the same: the image holds only the stripped operator, its
//! libraries, CA certificates and passwd files ([`check_contents`]); its entrypoint runs from
//! the unpacked root filesystem as uid 65532 ([`entrypoint_version`]); and the chart's pod,
//! run from it against a TLS testenv with the chart installed, reaches `/readyz` as the chart's
//! ServiceAccount, refused nothing, and takes the Lease the chart's Role names
//! ([`ChartPod::start`], [`ChartPod::prove_ready_and_leading`]). [`image_figures`] measures
//! what `make bench` reports of an image.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, DeleteParams};
use serde_json::Value;

use crate::Error;
use crate::image::{OciImage, RootfsProcess, http_status};
use crate::pod::{ContainerRun, NONROOT};

/// The namespace the charts are installed into by these proofs.
pub const NAMESPACE: &str = "giantswarm";
/// The values set the proofs install each chart with (every chart has one).
pub const VALUES: &str = "ci/minimal-values.yaml";

/// Whether this process runs as root (chroot, mounts and image unpacking need it; CI runs as
/// root).
pub fn is_root() -> bool {
    std::fs::metadata("/proc/self").map(|m| m.uid() == 0).unwrap_or(false)
}

fn failed(what: String) -> Error {
    Error::Image(what)
}

/// Every regular file of a root filesystem, relative to it.
pub fn regular_files(root: &Path) -> Result<Vec<PathBuf>, Error> {
    let io = |p: &Path| {
        let p = p.display().to_string();
        move |e| Error::Io(p, e)
    };
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).map_err(io(&dir))? {
            let entry = entry.map_err(io(&dir))?;
            let kind = entry.file_type().map_err(io(&entry.path()))?;
            if kind.is_dir() {
                stack.push(entry.path());
            } else if kind.is_file() {
                out.push(entry.path().strip_prefix(root).unwrap_or(&entry.path()).to_path_buf());
            }
        }
    }
    Ok(out)
}

/// The image of `operator` at `version`, unpacked in `rootfs`, holds the stripped binary (owned
/// by root, read-only), shared libraries, CA certificates and passwd files, and no shell nor any
/// other program; its user is 65532, its entrypoint the binary, and its OCI labels set.
pub fn check_contents(image: &OciImage, rootfs: &Path, operator: &str, version: &str) -> Result<(), Error> {
    let config = image.config()?;
    let mut problems = Vec::new();
    let mut check = |ok: bool, what: String| {
        if !ok {
            problems.push(what);
        }
    };
    check(config["User"] == "65532:65532", format!("User is {}, not 65532:65532", config["User"]));
    let binary_path = format!("/usr/local/bin/{operator}");
    check(
        config["Entrypoint"] == serde_json::json!([binary_path]),
        format!("Entrypoint is {}, not [{binary_path}]", config["Entrypoint"]),
    );
    let labels = &config["Labels"];
    check(
        labels["org.opencontainers.image.version"] == version,
        format!("label version is {}, the crate's is {version}", labels["org.opencontainers.image.version"]),
    );
    check(labels["org.opencontainers.image.licenses"] == "Apache-2.0", "label licenses is not Apache-2.0".into());
    check(
        labels["org.opencontainers.image.source"].as_str().unwrap_or_default().starts_with("https://"),
        "label source is not an https URL".into(),
    );
    check(
        labels["org.opencontainers.image.revision"].as_str().is_some_and(|r| !r.is_empty()),
        "label revision is empty".into(),
    );

    let binary = rootfs.join(binary_path.trim_start_matches('/'));
    let meta = std::fs::metadata(&binary).map_err(|e| Error::Io(binary.display().to_string(), e))?;
    check(meta.uid() == 0, "the binary does not belong to root: uid 65532 could change it".into());
    check(meta.permissions().mode() & 0o222 == 0, "the binary is writable".into());
    let sections =
        Command::new("readelf").arg("-S").arg(&binary).output().map_err(|e| Error::Io("readelf".into(), e))?;
    let sections = String::from_utf8_lossy(&sections.stdout);
    if let Some(section) = [".symtab", ".debug_info", ".debug_line"].into_iter().find(|s| sections.contains(s)) {
        check(false, format!("the binary is not stripped: it has {section}"));
    }
    let own = binary_path.trim_start_matches('/');
    for file in regular_files(rootfs)? {
        let name = file.to_string_lossy().into_owned();
        let meta = std::fs::metadata(rootfs.join(&file)).map_err(|e| Error::Io(name.clone(), e))?;
        let executable = meta.permissions().mode() & 0o111 != 0;
        check(
            !executable || name == own || name.contains(".so"),
            format!("{name}: an executable besides the operator"),
        );
        check(
            !name.ends_with("/sh") && !name.ends_with("bash") && !name.ends_with("busybox"),
            format!("{name}: a shell"),
        );
        check(
            meta.uid() != NONROOT,
            format!("{name} belongs to uid 65532: the root filesystem must not be its to change"),
        );
    }
    let passwd = std::fs::read_to_string(rootfs.join("etc/passwd")).unwrap_or_default();
    check(passwd.lines().any(|l| l.starts_with("nonroot:x:65532:65532:")), format!("no nonroot user: {passwd}"));
    check(rootfs.join("etc/ssl/certs/ca-certificates.crt").is_file(), "no CA certificates".into());
    if problems.is_empty() { Ok(()) } else { Err(failed(format!("the {operator} image: {problems:#?}"))) }
}

/// What `<entrypoint> --version` prints when run from the image alone (its loader, libraries and
/// certificates), as the image's user, with only the image's environment.
pub fn entrypoint_version(image: &OciImage, rootfs: &Path) -> Result<String, Error> {
    let out = Command::new("chroot")
        .arg(format!("--userspec={NONROOT}:{NONROOT}"))
        .arg(rootfs)
        .arg(image.entrypoint()?)
        .arg("--version")
        .env_clear()
        .envs(image.env()?)
        .output()
        .map_err(|e| Error::Io("chroot".into(), e))?;
    let stdout = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() {
        return Err(failed(format!(
            "the entrypoint failed in its rootfs: {}{stdout}",
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(stdout)
}

/// A TLS testenv with RBAC where `chart` is installed by Helm as an administrator (no
/// simulation: nothing runs its Deployment), and the chart's render, from which its pod is run.
pub struct ChartPod {
    /// The server (dropped before the runtime that serves it).
    pub env: testenv::TestEnv,
    /// The chart's objects, rendered with [`VALUES`] for [`NAMESPACE`].
    pub rendered: Vec<Value>,
    chart: String,
    /// The runtime serving testenv.
    pub runtime: tokio::runtime::Runtime,
}

impl std::fmt::Debug for ChartPod {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChartPod").field("chart", &self.chart).field("server", &self.env.base_url()).finish()
    }
}

impl ChartPod {
    /// Start the server and install `chart` into it.
    pub fn start(chart: &str) -> Result<ChartPod, Error> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| Error::Io("tokio runtime".into(), e))?;
        let env = runtime
            .block_on(testenv::TestEnv::builder().secure().start())
            .map_err(|e| failed(format!("testenv: {e}")))?;
        crate::helm_against(
            env.kubeconfig_path(),
            &crate::chart_dir(chart),
            &["install", chart, ".", "--namespace", NAMESPACE, "--create-namespace", "--values", VALUES],
        )?;
        let rendered = crate::helm_template(chart, &[VALUES], &[])?;
        Ok(ChartPod { env, rendered, chart: chart.to_string(), runtime })
    }

    /// The chart's container as pod `pod_name`, listening on `127.0.0.1:<port>`.
    pub fn container(&self, pod_name: &str, port: u16) -> Result<ContainerRun, Error> {
        Ok(ContainerRun::from_rendered(&self.rendered, pod_name)?.listening_on(&format!("127.0.0.1:{port}")))
    }

    /// The leader-election Lease the chart's Role names: `<chart>-<appVersion>`.
    pub fn lease_name(&self, version: &str) -> String {
        format!("{}-{version}", self.chart)
    }

    /// Delete the leader Lease, so that the next start leads at once, as the one replica of a
    /// fresh install would.
    pub fn forget_leader(&self, version: &str) -> Result<(), Error> {
        let leases: Api<Lease> = Api::namespaced(self.env.client(), NAMESPACE);
        match self.runtime.block_on(leases.delete(&self.lease_name(version), &DeleteParams::default())) {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
            Err(e) => Err(failed(format!("deleting the leader Lease: {e}"))),
        }
    }

    /// Run the chart's pod from `rootfs` (the unpacked `image`) and prove it: `/readyz` answers
    /// 200, every request it made was its ServiceAccount's and RBAC refused none, it holds the
    /// Lease the chart's Role names, and it is still ready. Returns the time to `/readyz`.
    pub fn prove_ready_and_leading(&self, image: &OciImage, rootfs: &Path, version: &str) -> Result<Duration, Error> {
        let deployment = self
            .rendered
            .iter()
            .find(|o| o["kind"] == "Deployment")
            .ok_or_else(|| failed("the chart renders no Deployment".into()))?;
        let pod_name = format!("{}-7d9f8c6b5-x2x4z", deployment["metadata"]["name"].as_str().unwrap_or_default());
        let port = free_port()?;
        let container = self.container(&pod_name, port)?;
        if !container.args.iter().any(|a| a == "daemon") {
            return Err(failed(format!("the chart's container does not run the daemon: {:?}", container.args)));
        }
        let mut daemon = container.start(self.env.handle(), image, rootfs)?;
        let took = daemon.wait_ready(port, Duration::from_secs(60))?;

        let user = format!("system:serviceaccount:{NAMESPACE}:{}", container.service_account);
        let log = self.env.handle().access_log_of(&user);
        if log.is_empty() {
            return Err(failed(format!("no request of {user} reached the server")));
        }
        let refused = crate::rbac::refusals(&log);
        if !refused.is_empty() {
            return Err(failed(format!("RBAC refused the chart's ServiceAccount: {refused:?}\n{}", daemon.log())));
        }
        let lease = self.lease_name(version);
        let leases: Api<Lease> = Api::namespaced(self.env.client(), NAMESPACE);
        let start = Instant::now();
        loop {
            let holder = self
                .runtime
                .block_on(leases.get_opt(&lease))
                .map_err(|e| failed(format!("reading Lease {lease}: {e}")))?
                .and_then(|l| l.spec?.holder_identity)
                .unwrap_or_default();
            if holder.starts_with(&pod_name) {
                break;
            }
            if start.elapsed() > Duration::from_secs(30) {
                return Err(failed(format!("Lease {lease} held by {holder:?}, not {pod_name}:\n{}", daemon.log())));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        if http_status(port, "/readyz") != Some(200) {
            return Err(failed(format!("/readyz no longer answers 200 while leading:\n{}", daemon.log())));
        }
        Ok(took)
    }
}

/// The whole proof of `operator`'s image built from `binary` (crate version `version`) with
/// `tools/images/build-image.sh`: unpacked, it holds what [`check_contents`] allows; its
/// entrypoint prints `<operator> <version>` from the root filesystem alone; and the chart's pod
/// run from it reaches `/readyz`, refused nothing, and leads
/// ([`ChartPod::prove_ready_and_leading`]). Returns the time to `/readyz`. Needs root, buildah
/// and Helm.
pub fn prove_image(operator: &str, binary: &Path, version: &str) -> Result<Duration, Error> {
    if !is_root() {
        return Err(failed(
            "the image proof unpacks an image and runs it with chroot: it needs root, as CI has".into(),
        ));
    }
    let dir = tempfile::tempdir().map_err(|e| Error::Io("temporary directory".into(), e))?;
    let image = crate::image::build(operator, binary, &dir.path().join("image"))?;
    let rootfs = dir.path().join("rootfs");
    image.unpack(&rootfs)?;
    check_contents(&image, &rootfs, operator, version)?;
    let printed = entrypoint_version(&image, &rootfs)?;
    if printed != format!("{operator} {version}") {
        return Err(failed(format!("the entrypoint's --version printed {printed:?}, not \"{operator} {version}\"")));
    }
    ChartPod::start(operator)?.prove_ready_and_leading(&image, &rootfs, version)
}

/// The `main` of an operator's image benchmark (`benches/image.rs`, `harness = false`): nothing
/// for `--list`; otherwise [`image_figures`] of the binary `IMAGE_BINARY` names (e.g. `make
/// images`' release binary), else of `default_binary`, with 5 cold starts.
pub fn image_bench_main(operator: &str, default_binary: &Path, version: &str) -> Result<(), Error> {
    if std::env::args().any(|a| a == "--list") {
        return Ok(());
    }
    if !is_root() {
        return Err(failed("the image benchmark runs the image with chroot: run it as root".into()));
    }
    let binary = std::env::var_os("IMAGE_BINARY").map(PathBuf::from).unwrap_or_else(|| default_binary.to_path_buf());
    image_figures(operator, &binary, version, 5)
}

/// A free TCP port on 127.0.0.1.
pub fn free_port() -> Result<u16, Error> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| Error::Io("binding a free port".into(), e))
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// Print the figures of `operator`'s image built from `binary` (crate version `version`): its
/// uncompressed size, the cold start of its entrypoint from the unpacked root filesystem to
/// `/readyz` as the chart's pod (median of `runs`, each the leader of a fresh Lease), and its
/// resident memory 10 s after ready with no clusters. Needs root, buildah and Helm.
pub fn image_figures(operator: &str, binary: &Path, version: &str, runs: usize) -> Result<(), Error> {
    let dir = tempfile::tempdir().map_err(|e| Error::Io("temporary directory".into(), e))?;
    println!("image/{operator} from {}", binary.display());
    let image = crate::image::build(operator, binary, &dir.path().join("image"))?;
    let rootfs = dir.path().join("rootfs");
    image.unpack(&rootfs)?;
    let stripped_path = rootfs.join("usr/local/bin").join(operator);
    let stripped = std::fs::metadata(&stripped_path).map_err(|e| Error::Io(stripped_path.display().to_string(), e))?;
    println!(
        "image/{operator} size: {:.1} MiB uncompressed ({} bytes; target ≤ 40 MiB), stripped binary {:.1} MiB",
        mib(image.size),
        image.size,
        mib(stripped.len())
    );

    let pod = ChartPod::start(operator)?;
    let start = |run: usize| -> Result<(RootfsProcess, u16), Error> {
        pod.forget_leader(version)?;
        let port = free_port()?;
        let container = pod.container(&format!("{operator}-bench-{run}"), port)?;
        Ok((container.start(pod.env.handle(), &image, &rootfs)?, port))
    };
    let mut starts = Vec::new();
    for run in 0..runs.max(1) {
        let (mut process, port) = start(run)?;
        starts.push(process.wait_ready(port, Duration::from_secs(60))?);
    }
    starts.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "image/{operator} cold start rootfs -> /readyz (TLS testenv, ServiceAccount token, read-only rootfs, uid 65532, {} runs): median {:.0} ms, min {:.0} ms, max {:.0} ms (target ≤ 1000 ms)",
        starts.len(),
        ms(starts[starts.len() / 2]),
        ms(starts[0]),
        ms(starts[starts.len() - 1])
    );
    let (mut process, port) = start(runs.max(1))?;
    process.wait_ready(port, Duration::from_secs(60))?;
    std::thread::sleep(Duration::from_secs(10));
    println!(
        "image/{operator} idle RSS (leader, no clusters, 10 s after ready): {:.1} MiB",
        mib(process.rss_bytes().unwrap_or_default())
    );
    Ok(())
}

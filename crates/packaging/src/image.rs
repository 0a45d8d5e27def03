//! Container images built by `tools/images/build-image.sh` (buildah, offline base): build one
//! from a binary, unpack its root filesystem, read its configuration. The image tests of each
//! operator use these to run the entrypoint from the unpacked root filesystem.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::{Error, repo_root};

/// An image in an OCI layout directory.
#[derive(Debug, Clone)]
pub struct OciImage {
    /// The layout directory (`index.json`, `blobs/`).
    pub layout: PathBuf,
    /// Uncompressed size in bytes (the layers' tar streams).
    pub size: u64,
}

/// Build the image of `operator` from `binary` with `tools/images/build-image.sh`, into `out`.
pub fn build(operator: &str, binary: &Path, out: &Path) -> Result<OciImage, Error> {
    let script = repo_root().join("tools/images/build-image.sh");
    let output = Command::new(&script)
        .arg(operator)
        .arg(binary)
        .arg(out)
        .output()
        .map_err(|e| Error::Io(script.display().to_string(), e))?;
    if !output.status.success() {
        return Err(Error::Image(format!(
            "build-image.sh {operator} failed: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )));
    }
    let size_file = out.join(format!("{operator}.size"));
    let size = std::fs::read_to_string(&size_file)
        .map_err(|e| Error::Io(size_file.display().to_string(), e))?
        .trim()
        .parse()
        .map_err(|e| Error::Image(format!("{}: {e}", size_file.display())))?;
    Ok(OciImage { layout: out.join(format!("{operator}.oci")), size })
}

impl OciImage {
    fn blob(&self, digest: &str) -> PathBuf {
        let (algorithm, hex) = digest.split_once(':').unwrap_or(("sha256", digest));
        self.layout.join("blobs").join(algorithm).join(hex)
    }

    fn json(&self, path: &Path) -> Result<Value, Error> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::Io(path.display().to_string(), e))?;
        serde_json::from_str(&text).map_err(|e| Error::Image(format!("{}: {e}", path.display())))
    }

    /// The image manifest.
    pub fn manifest(&self) -> Result<Value, Error> {
        let index = self.json(&self.layout.join("index.json"))?;
        let digest = index["manifests"][0]["digest"]
            .as_str()
            .ok_or_else(|| Error::Image("index.json names no manifest".into()))?;
        self.json(&self.blob(digest))
    }

    /// The image configuration's `config` (User, Entrypoint, Cmd, Env, Labels).
    pub fn config(&self) -> Result<Value, Error> {
        let manifest = self.manifest()?;
        let digest =
            manifest["config"]["digest"].as_str().ok_or_else(|| Error::Image("the manifest names no config".into()))?;
        Ok(self.json(&self.blob(digest))?["config"].clone())
    }

    /// The image configuration's `Env`, as name and value pairs.
    pub fn env(&self) -> Result<Vec<(String, String)>, Error> {
        Ok(self.config()?["Env"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str()?.split_once('=').map(|(k, v)| (k.to_string(), v.to_string())))
            .collect())
    }

    /// The image configuration's entrypoint program.
    pub fn entrypoint(&self) -> Result<String, Error> {
        self.config()?["Entrypoint"][0]
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| Error::Image("the image has no entrypoint".into()))
    }

    /// Extract the layers, in order, into `dest` (created). Whiteouts are not applied: the
    /// images built here have none (a base and one COPY).
    pub fn unpack(&self, dest: &Path) -> Result<(), Error> {
        std::fs::create_dir_all(dest).map_err(|e| Error::Io(dest.display().to_string(), e))?;
        let manifest = self.manifest()?;
        for layer in manifest["layers"].as_array().into_iter().flatten() {
            let digest = layer["digest"].as_str().unwrap_or_default();
            let status = Command::new("tar")
                .arg("-xf")
                .arg(self.blob(digest))
                .arg("-C")
                .arg(dest)
                .arg("--same-owner")
                .arg("--numeric-owner")
                .status()
                .map_err(|e| Error::Io("tar".into(), e))?;
            if !status.success() {
                return Err(Error::Image(format!("extracting layer {digest} failed")));
            }
        }
        Ok(())
    }
}

/// A process started from an unpacked root filesystem; killed when dropped. Its standard error
/// goes to a file (a pipe nobody reads would stall a daemon that logs).
#[derive(Debug)]
pub struct RootfsProcess {
    child: std::process::Child,
    log: PathBuf,
}

impl Drop for RootfsProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.log);
    }
}

/// The absolute path of program `name` on this process's `PATH`.
fn program(name: &str) -> Result<PathBuf, Error> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
        .ok_or_else(|| Error::Image(format!("{name} is not on PATH")))
}

/// Start `entrypoint args…` from the root filesystem `rootfs` as a pod with
/// `readOnlyRootFilesystem` and an `emptyDir` on `/tmp` runs it: in a private mount namespace
/// where `rootfs` is mounted read-only and `/tmp` is a fresh tmpfs, with chroot as `uid:gid`,
/// with only the environment `env` (a container's), standard error to a file. The process keeps
/// the id this returns (each step execs the next). Needs root.
pub fn run_in_rootfs(
    rootfs: &Path,
    uid: u32,
    gid: u32,
    entrypoint: &str,
    args: &[String],
    env: &[(String, String)],
) -> Result<RootfsProcess, Error> {
    // Programs by absolute path: the environment is the container's, without PATH.
    let (mount, chroot) = (program("mount")?, program("chroot")?);
    static RUNS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let run = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let log = std::env::temp_dir().join(format!("rootfs-process-{}-{run}.log", std::process::id()));
    let log_file = std::fs::File::create(&log).map_err(|e| Error::Io(log.display().to_string(), e))?;
    let script = r#"set -e
mount="$1" chroot="$2" root="$3"
shift 3
"$mount" --bind "$root" "$root"
"$mount" -o remount,bind,ro "$root"
"$mount" -t tmpfs -o size=64m,mode=1777 tmpfs "$root/tmp"
exec "$chroot" "$@""#;
    let child = Command::new(program("unshare")?)
        .args(["--mount", "--propagation", "private", "/bin/sh", "-c", script, "sh"])
        .arg(&mount)
        .arg(&chroot)
        .arg(rootfs)
        .arg(format!("--userspec={uid}:{gid}"))
        .arg(rootfs)
        .arg(entrypoint)
        .args(args)
        .env_clear()
        .envs(env.iter().cloned())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(log_file.try_clone().map_err(|e| Error::Io(log.display().to_string(), e))?)
        .spawn()
        .map_err(|e| Error::Io("unshare".into(), e))?;
    Ok(RootfsProcess { child, log })
}

/// The status code of a plain HTTP/1.1 GET of `path` on 127.0.0.1:`port`, or None when nothing
/// answers.
pub fn http_status(port: u16, path: &str) -> Option<u16> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(std::time::Duration::from_secs(5))).ok()?;
    write!(stream, "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    response.split_whitespace().nth(1)?.parse().ok()
}

impl RootfsProcess {
    /// The process id (that of the entrypoint: each step before it execs the next).
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// What the process wrote to standard error so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Wait until `GET /readyz` on `port` answers 200; an error with the process's standard
    /// error when it exits first, or when `timeout` passes.
    pub fn wait_ready(&mut self, port: u16, timeout: std::time::Duration) -> Result<std::time::Duration, Error> {
        let start = std::time::Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().map_err(|e| Error::Io("wait".into(), e))? {
                return Err(Error::Image(format!(
                    "the entrypoint exited with {status} before /readyz answered 200:\n{}",
                    self.log()
                )));
            }
            if http_status(port, "/readyz") == Some(200) {
                return Ok(start.elapsed());
            }
            if start.elapsed() > timeout {
                return Err(Error::Image(format!(
                    "/readyz did not answer 200 within {timeout:?} (/readyz: {:?}); the entrypoint's log:\n{}",
                    http_status(port, "/readyz"),
                    self.log()
                )));
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// The resident set size of the process (VmRSS of the entrypoint), in bytes.
    pub fn rss_bytes(&self) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
        let kb: u64 = status.lines().find(|l| l.starts_with("VmRSS:"))?.split_whitespace().nth(1)?.parse().ok()?;
        Some(kb * 1024)
    }
}

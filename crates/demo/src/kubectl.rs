//! Runs the `kubectl` binary against the demo's API server, echoing each command line first, so
//! that what the demo shows is exactly what a person would type.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use anyhow::{Context, bail};
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

/// A `kubectl` binary bound to one kubeconfig.
#[derive(Clone, Debug)]
pub struct Kubectl {
    bin: String,
    kubeconfig: PathBuf,
}

impl Kubectl {
    /// `bin` with `KUBECONFIG=kubeconfig`.
    pub fn new(bin: impl Into<String>, kubeconfig: &Path) -> Self {
        Self { bin: bin.into(), kubeconfig: kubeconfig.to_path_buf() }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.bin);
        // A discovery cache of its own: the default one under $HOME would mix API servers of
        // earlier runs, which listened on other ports.
        cmd.env("KUBECONFIG", &self.kubeconfig)
            .env("KUBECACHEDIR", self.kubeconfig.with_extension("cache"))
            .args(args)
            .kill_on_drop(true);
        cmd
    }

    /// Run `kubectl args…` with its output on the terminal.
    pub async fn run(&self, args: &[&str]) -> anyhow::Result<()> {
        self.run_with_stdin(args, None).await
    }

    /// Run `kubectl args…`, feeding `stdin` (for `apply -f -`) when given.
    pub async fn run_with_stdin(&self, args: &[&str], stdin: Option<&str>) -> anyhow::Result<()> {
        println!("$ kubectl {}", args.join(" "));
        let mut cmd = self.command(args);
        if stdin.is_some() {
            cmd.stdin(Stdio::piped());
        }
        let mut child = cmd.spawn().with_context(|| format!("cannot run {}", self.bin))?;
        if let Some(input) = stdin {
            let mut pipe = child.stdin.take().context("kubectl has no stdin pipe")?;
            pipe.write_all(input.as_bytes()).await.context("writing kubectl's stdin")?;
            // Closing the pipe is kubectl's end of input.
            drop(pipe);
        }
        let status = child.wait().await.with_context(|| format!("waiting for {}", self.bin))?;
        if !status.success() {
            bail!("kubectl {} failed with {status}", args.join(" "));
        }
        Ok(())
    }

    /// Run `kubectl args…` and print only the header and the last `lines` lines of its output,
    /// noting how many were left out (event lists grow long).
    pub async fn run_tail(&self, args: &[&str], lines: usize) -> anyhow::Result<()> {
        println!("$ kubectl {}", args.join(" "));
        print!("{}", self.tail(args, lines).await?);
        Ok(())
    }

    /// What [`Kubectl::run_tail`] prints after the command line.
    pub async fn tail(&self, args: &[&str], lines: usize) -> anyhow::Result<String> {
        let out = self.command(args).output().await.with_context(|| format!("cannot run {}", self.bin))?;
        if !out.status.success() {
            bail!(
                "kubectl {} failed with {}: {}",
                args.join(" "),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        let text = String::from_utf8_lossy(&out.stdout);
        if text.trim().is_empty() {
            // "No resources found …" is written to stderr.
            return Ok(format!("{}\n", String::from_utf8_lossy(&out.stderr).trim()));
        }
        let all: Vec<&str> = text.lines().collect();
        Ok(match all.split_first() {
            Some((header, rest)) if rest.len() > lines => {
                let mut shown = format!("{header}\n… {} earlier lines left out\n", rest.len() - lines);
                for line in &rest[rest.len() - lines..] {
                    shown.push_str(line);
                    shown.push('\n');
                }
                shown
            }
            _ => text.into_owned(),
        })
    }
}

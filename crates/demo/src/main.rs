//! `make demo`: start a local API server (testenv), install the project's CRDs, apply sample
//! objects and show them with kubectl, printing each step.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Parser;

#[derive(Parser, Debug)]
#[command(about = "Run the local demo")]
struct Args {
    /// Keep the API server running after the demo, until Ctrl-C.
    #[arg(long)]
    keep: bool,
    /// The kubectl binary to use.
    #[arg(long, env = "KUBECTL", default_value = "kubectl")]
    kubectl: String,
    /// Directory with sample manifests.
    #[arg(long, default_value = "docs/examples")]
    examples: PathBuf,
}

fn step(title: &str) {
    println!("\n\x1b[1m==> {title}\x1b[0m");
}

fn kubectl(bin: &str, kubeconfig: &Path, args: &[&str], stdin: Option<&str>) -> anyhow::Result<()> {
    println!("$ kubectl {}", args.join(" "));
    let mut cmd = Command::new(bin);
    cmd.env("KUBECONFIG", kubeconfig).env("KUBECACHEDIR", kubeconfig.with_extension("cache")).args(args);
    let status = match stdin {
        None => cmd.status().with_context(|| format!("cannot run {bin}"))?,
        Some(input) => {
            use std::io::Write;
            let mut child =
                cmd.stdin(std::process::Stdio::piped()).spawn().with_context(|| format!("cannot run {bin}"))?;
            child.stdin.take().context("kubectl stdin")?.write_all(input.as_bytes())?;
            child.wait()?
        }
    };
    if !status.success() {
        bail!("kubectl {} failed with {status}", args.join(" "));
    }
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    step("Starting testenv, an in-process Kubernetes API server with a simulated three-node cluster");
    let env = testenv::TestEnv::builder().simulation(testenv::SimConfig::with_nodes(3)).start().await?;
    let kc = env.kubeconfig_path().to_path_buf();
    println!("API server: {}\nkubeconfig: {}", env.base_url(), kc.display());
    let k = |a: &[&str]| kubectl(&args.kubectl, &kc, a, None);

    // kubectl is a blocking child process; run it off the runtime that serves the API.
    let run = {
        let kubectl_bin = args.kubectl.clone();
        let kc = kc.clone();
        let examples = args.examples.clone();
        tokio::task::spawn_blocking(move || -> anyhow::Result<()> {
            let k = |a: &[&str]| kubectl(&kubectl_bin, &kc, a, None);
            k(&["version"])?;
            step("Installing the project's CustomResourceDefinitions (generated from the Rust types)");
            let crds = apis::to_yaml(&apis::all_crds()).map_err(anyhow::Error::msg)?;
            kubectl(&kubectl_bin, &kc, &["apply", "-f", "-"], Some(&crds))?;
            k(&["wait", "--for=condition=Established", "crd", "--all", "--timeout=30s"])?;
            k(&["api-resources", "--api-group=release.giantswarm.io"])?;
            step("Applying the sample Release");
            let sample = examples.join("release-v20.0.0.yaml");
            k(&["apply", "-f", &sample.display().to_string()])?;
            step("Showing it");
            k(&["get", "releases", "-o", "wide"])?;
            k(&["describe", "release", "v20.0.0"])?;
            step("A workload on the simulated nodes: a Deployment, its PodDisruptionBudget and a Service");
            k(&["get", "nodes"])?;
            k(&["apply", "-f", &examples.join("web.yaml").display().to_string()])?;
            k(&["rollout", "status", "deployment/web", "--timeout=60s"])?;
            k(&["get", "pods", "-o", "wide"])?;
            k(&["get", "endpoints", "web"])?;
            step("Draining node-1: the evictions honour the PodDisruptionBudget");
            k(&["drain", "node-1", "--ignore-daemonsets", "--timeout=60s"])?;
            k(&["get", "nodes"])?;
            k(&["get", "pods", "-o", "wide"])?;
            k(&["get", "pdb", "web"])?;
            Ok(())
        })
    };
    run.await.context("the demo task panicked")??;
    let _ = k;
    if args.keep {
        step("The API server keeps running; in another shell:");
        println!("export KUBECONFIG={}\nkubectl get releases", kc.display());
        tokio::signal::ctrl_c().await?;
    }
    tokio::time::sleep(Duration::from_millis(10)).await;
    step("Done");
    Ok(())
}

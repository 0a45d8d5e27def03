//! The simulation demo (`--simulation`): testenv with three simulated nodes, the project's CRDs,
//! the sample Release, a workload rollout and a node drain that honours a PodDisruptionBudget.

use std::path::Path;

use crate::kubectl::Kubectl;
use crate::step;

/// Run the simulation demo; with `keep`, serve until Ctrl-C afterwards.
pub async fn run(kubectl_bin: &str, examples: &Path, keep: bool) -> anyhow::Result<()> {
    step("Starting testenv, an in-process Kubernetes API server with a simulated three-node cluster");
    let env = testenv::TestEnv::builder().simulation(testenv::SimConfig::with_nodes(3)).start().await?;
    let kc = env.kubeconfig_path().to_path_buf();
    println!("API server: {}\nkubeconfig: {}", env.base_url(), kc.display());
    let k = Kubectl::new(kubectl_bin, &kc);
    k.run(&["version"]).await?;

    step("Installing the project's CustomResourceDefinitions (generated from the Rust types)");
    let crds = apis::to_yaml(&apis::all_crds()).map_err(anyhow::Error::msg)?;
    k.run_with_stdin(&["apply", "-f", "-"], Some(&crds)).await?;
    k.run(&["wait", "--for=condition=Established", "crd", "--all", "--timeout=30s"]).await?;
    k.run(&["api-resources", "--api-group=release.giantswarm.io"]).await?;

    step("Applying the sample Release");
    let release = examples.join("release-v20.0.0.yaml").display().to_string();
    k.run(&["apply", "-f", &release]).await?;
    step("Showing it");
    k.run(&["get", "releases", "-o", "wide"]).await?;
    k.run(&["describe", "release", "v20.0.0"]).await?;

    step("A workload on the simulated nodes: a Deployment, its PodDisruptionBudget and a Service");
    k.run(&["get", "nodes"]).await?;
    let web = examples.join("web.yaml").display().to_string();
    k.run(&["apply", "-f", &web]).await?;
    k.run(&["rollout", "status", "deployment/web", "--timeout=60s"]).await?;
    k.run(&["get", "pods", "-o", "wide"]).await?;
    k.run(&["get", "endpoints", "web"]).await?;

    step("Draining node-1: the evictions honour the PodDisruptionBudget");
    k.run(&["drain", "node-1", "--ignore-daemonsets", "--timeout=60s"]).await?;
    k.run(&["get", "nodes"]).await?;
    k.run(&["get", "pods", "-o", "wide"]).await?;
    k.run(&["get", "pdb", "web"]).await?;

    if keep {
        step("The API server keeps running until Ctrl-C; in another shell:");
        println!("export KUBECONFIG={}\nkubectl get releases", kc.display());
        tokio::signal::ctrl_c().await?;
    }
    step("Done");
    Ok(())
}

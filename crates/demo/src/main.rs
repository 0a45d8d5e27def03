//! `make demo`: aws-operator creates a workload cluster in emulated AWS accounts (moto) from a
//! local management cluster (testenv), printing each step; see [`aws`]. `--kvm` runs kvm-operator
//! instead: a cluster of KVM node pods on a simulated management cluster, created and then
//! upgraded with a rolling update ([`kvm`]). `--simulation` runs the earlier demo: testenv's
//! simulated nodes with a workload rollout and a drain.

mod aws;
mod inventory;
mod kubectl;
mod kvm;
mod manifest;
mod simulation;

use std::path::PathBuf;

use clap::Parser;

#[derive(Parser, Debug)]
#[command(about = "Run the local demo: aws-operator against testenv and moto")]
struct Args {
    /// Keep everything running after the demo, until Ctrl-C.
    #[arg(long)]
    keep: bool,
    /// Run the simulation demo instead: simulated nodes, a workload rollout and a drain.
    #[arg(long)]
    simulation: bool,
    /// Run the kvm-operator demo instead: a cluster of KVM node pods, created and upgraded.
    #[arg(long, conflicts_with = "simulation")]
    kvm: bool,
    /// The kubectl binary to use.
    #[arg(long, env = "KUBECTL", default_value = "kubectl")]
    kubectl: String,
    /// Directory with sample manifests [default: the checkout's `docs/examples`].
    #[arg(long)]
    examples: Option<PathBuf>,
}

/// Print a step's title, in bold on a terminal without `NO_COLOR`, as plain text otherwise.
fn step(title: &str) {
    use std::io::IsTerminal as _;
    if operatorkit::logging::colour(std::io::stdout().is_terminal()) {
        println!("\n\x1b[1m==> {title}\x1b[0m");
    } else {
        println!("\n==> {title}");
    }
}

/// Print the Secrets of cluster `cluster_id` in `namespace` that the operator issued.
async fn print_issued(client: &kube::Client, namespace: &str, cluster_id: &str) -> anyhow::Result<()> {
    let secrets: kube::Api<k8s_openapi::api::core::v1::Secret> = kube::Api::namespaced(client.clone(), namespace);
    let listed = secrets
        .list(&kube::api::ListParams::default().labels(&format!("{}={cluster_id}", apis::labels::CLUSTER)))
        .await?;
    let issued: Vec<String> =
        listed.items.iter().filter(|s| pki::secret::issued_here(s)).filter_map(|s| s.metadata.name.clone()).collect();
    println!("the operator issued the cluster's CAs, certificates and encryption key: {}", issued.join(", "));
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    // The operator's logs only on request (`RUST_LOG=aws_operator=debug`): the demo's own
    // output is the story; logs are for finding out why a step stalls.
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .init();
    }
    let examples = args.examples.unwrap_or_else(|| motoenv::workspace_root().join("docs/examples"));
    // Shorter paths in the output; a missing directory is reported where a file is read.
    let examples = examples.canonicalize().unwrap_or(examples);
    if args.kvm {
        return kvm::run(&args.kubectl, &examples, args.keep).await;
    }
    if args.simulation {
        return simulation::run(&args.kubectl, &examples, args.keep).await;
    }
    aws::run(aws::Options { kubectl: args.kubectl, examples, keep: args.keep }).await
}

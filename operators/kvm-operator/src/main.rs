//! The kvm-operator binary: `daemon` reconciles KVMConfigs; `render` prints the objects a set of CR files would produce in the
//! management cluster, without touching it; `describe` shows the tree of a cluster.

use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "kvm-operator",
    version,
    about = "Runs workload clusters whose nodes are KVM virtual machines in pods of the management cluster"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Reconcile KVMConfig objects, and drain the nodes DrainerConfigs of this version name.
    Daemon(Box<kvm_operator::config::DaemonArgs>),
    /// Print the objects (Namespace, RBAC, node Secrets, PVCs, Deployments, Services, Ingresses)
    /// the given CR files would produce, without touching Kubernetes.
    Render(Box<kvm_operator::render::RenderArgs>),
    /// Show the tree of a cluster (or of every cluster with `-A`): the KVMConfig, its master and
    /// worker node pods and their drains, each with the condition that matters. Reads the
    /// management cluster as the daemon does; never writes.
    Describe(Box<node_lifecycle::describe::DescribeArgs>),
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    operatorkit::logging::init();
    let cli = Cli::parse();
    match cli.command {
        Command::Render(args) => kvm_operator::render::run(&args, &mut std::io::stdout()),
        Command::Describe(args) => kvm_operator::describe::run(&args).await,
        Command::Daemon(args) => kvm_operator::daemon::serve(*args).await,
    }
}

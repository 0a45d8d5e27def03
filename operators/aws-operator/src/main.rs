//! The aws-operator binary: `daemon` reconciles clusters; `render` prints the stacks a set of
//! CR files would produce without touching AWS; `plan` shows what would change in their live
//! stacks (exit code 0: nothing, 2: changes);
//! `describe` shows the tree of a cluster; `migrate` plans a legacy cluster's move to node pools.

use aws_operator::config::DaemonArgs;
use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(name = "aws-operator", version, about = "Provisions workload clusters on AWS through CloudFormation")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Reconcile AWSCluster, AWSControlPlane and AWSMachineDeployment objects, and drain the
    /// nodes DrainerConfigs name.
    Daemon(Box<DaemonArgs>),
    /// Print the stacks and templates the given CR files would produce, without touching AWS.
    Render(aws_operator::render::RenderArgs),
    /// Show what the operator would change in the live stacks of the clusters in the given CR
    /// files, through CloudFormation change sets it deletes again; exit code 0 when nothing
    /// would change, 2 when something would.
    Plan(Box<aws_operator::preview::PlanArgs>),
    /// Show the tree of a cluster (or of every cluster with `-A`): the cluster, its control
    /// plane and node pools, their stacks and instances, each with the condition that matters.
    /// Reads the management cluster and AWS as the daemon does; never writes.
    Describe(Box<aws_operator::describe::DescribeArgs>),
    /// Print the node-pools objects (AWSCluster, AWSControlPlane, AWSMachineDeployment) that
    /// would take a legacy AWSConfig cluster over, and the ordered plan of the move with the ids
    /// of its live resources. Reads the object (a file or a name), its credential Secret and
    /// AWS; plans only, never writes.
    Migrate(Box<aws_operator::migrate::MigrateArgs>),
}

#[tokio::main]
async fn main() -> anyhow::Result<std::process::ExitCode> {
    operatorkit::logging::init();
    let cli = Cli::parse();
    match cli.command {
        Command::Render(args) => aws_operator::render::run(&args, &mut std::io::stdout()).map(|()| Default::default()),
        Command::Plan(args) => aws_operator::preview::run(&args, &mut std::io::stdout()).await.map(Into::into),
        Command::Describe(args) => aws_operator::describe::run(&args).await.map(|()| Default::default()),
        Command::Migrate(args) => {
            aws_operator::migrate::run(&args, &mut std::io::stdout()).await.map(|()| Default::default())
        }
        Command::Daemon(args) => aws_operator::daemon::serve(*args).await.map(|()| Default::default()),
    }
}

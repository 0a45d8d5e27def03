//! The aws-operator binary: `daemon` reconciles clusters; `render` prints the stacks a set of
//! CR files would produce without touching AWS.

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
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    operatorkit::logging::init();
    let cli = Cli::parse();
    match cli.command {
        Command::Render(args) => aws_operator::render::run(&args, &mut std::io::stdout()),
        Command::Daemon(args) => aws_operator::daemon::serve(*args).await,
    }
}

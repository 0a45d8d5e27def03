//! `aws-operator render`: the stacks a set of CR files would produce (work in progress).

use std::io::Write;
use std::path::PathBuf;

/// Arguments of `aws-operator render`.
#[derive(clap::Args, Debug)]
pub struct RenderArgs {
    /// YAML files with AWSCluster, AWSControlPlane, AWSMachineDeployment and Release objects.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
}

/// Print the plan.
pub fn run(args: &RenderArgs, out: &mut impl Write) -> anyhow::Result<()> {
    writeln!(out, "{} files", args.files.len())?;
    Ok(())
}

//! `aws-operator render`: the CloudFormation stacks a set of CR files would produce, printed
//! without touching AWS or Kubernetes.
//!
//! The files are multi-document YAML (or JSON) as they would be applied with `kubectl`, or the
//! `List` that `kubectl get … -o yaml` prints for several objects. Of
//! their objects, `AWSCluster`, `AWSControlPlane`, `AWSMachineDeployment`, `NetworkPool`
//! (`infrastructure.giantswarm.io`), `Release` (`release.giantswarm.io`) and the legacy
//! `AWSConfig` (`provider.giantswarm.io`) are read; every other kind (Namespaces, Secrets, …)
//! is skipped. A legacy cluster's stacks are `host-setup`, `guest-main` and `host-main`
//! ([`crate::plan::plan_legacy`]); no controller creates them yet.
//!
//! For every cluster the stacks are printed in the order the controllers create them — TCCPI,
//! TCCP, TCCPF (AWSCluster), TCCPN (AWSControlPlane), then TCNP and TCNPF per node pool
//! (AWSMachineDeployment) — each with its name, account, tags and template. The templates are
//! built by the same `aws_stacks` render functions, from parameters assembled the way the
//! controllers assemble them, and carry the `TemplateHash` output the operator adds before
//! sending, so their sizes are the sizes CloudFormation would see. What cannot be known offline,
//! how CIDRs are allocated and what is validated: see [`crate::plan`].
//!
//! This module is the command's edge: it reads the files ([`Objects::load`]) and the flags
//! ([`Settings::from_args`]), calls the pure planner ([`crate::plan`]) and prints.

use std::io::Write;
use std::path::PathBuf;

use aws_stacks::cfn::MAX_TEMPLATE_BODY_BYTES;
use aws_stacks::ipam::Ipv4Net;
use aws_stacks::stacks::CpRouteTable;

use crate::config::{AmiMap, OperatorConfig};
use crate::plan::{Delivery, Objects, PlannedStack, RenderError, Settings, plan, plan_legacy};

/// Arguments of `aws-operator render`.
#[derive(clap::Args, Debug, Clone)]
pub struct RenderArgs {
    /// YAML files with AWSCluster, AWSControlPlane, AWSMachineDeployment, NetworkPool,
    /// Release and legacy AWSConfig objects; other kinds are skipped.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// What the operator would learn from AWS.
    #[command(flatten)]
    pub aws: Box<AwsArgs>,
    /// The operator's settings the stacks depend on.
    #[command(flatten)]
    pub planning: PlanningArgs,
    /// Print only the stack with this name.
    #[arg(long, value_name = "NAME")]
    pub stack: Option<String>,
    /// Print only names, accounts, resource counts and template sizes.
    #[arg(long)]
    pub summary: bool,
}

/// The operator settings the planned stacks depend on: the flags `aws-operator render` and
/// `aws-operator plan` share.
#[derive(clap::Args, Debug, Clone)]
pub struct PlanningArgs {
    /// Installation (management cluster) name.
    #[arg(long, default_value = "gauss")]
    pub installation: String,
    /// IPAM range for cluster and node-pool CIDRs (clusters naming a NetworkPool use its range).
    #[arg(long, default_value = "10.1.0.0/16")]
    pub ipam_range: String,
    /// Size (mask bits) of cluster and node-pool CIDRs, unless annotated otherwise.
    #[arg(long, default_value_t = 24)]
    pub subnet_mask_bits: u8,
    /// The AMI file, `{"<flatcarVersion>": {"<region>": "ami-…"}}`; without it the image is
    /// `ami-<flatcar version>`.
    #[arg(long)]
    pub ami_file: Option<PathBuf>,
    /// The operator version written into the stacks (`OperatorVersion` output, node-config keys).
    #[arg(long, default_value = env!("CARGO_PKG_VERSION"))]
    pub operator_version: String,
    /// Whether hosted zones and records are managed.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub route53_enabled: bool,
    /// Instance types alike to each instance type, as JSON: `{"m5.xlarge": [{"InstanceType":
    /// "m5.xlarge", "WeightedCapacity": 1}, …]}`; used by node pools with
    /// `useAlikeInstanceTypes`.
    #[arg(long, env = "AWS_OPERATOR_ALIKE_INSTANCES", default_value = "", value_parser = crate::config::AlikeInstances::parse)]
    pub alike_instances: crate::config::AlikeInstances,
}

/// The flags of `aws-operator render` for what the operator would learn from AWS: account ids
/// from STS, the management VPC from EC2. Boxed in [`RenderArgs`] to keep the command enum of
/// the binary small.
#[derive(clap::Args, Debug, Clone)]
pub struct AwsArgs {
    /// The tenant (workload cluster) account id.
    #[arg(long, default_value = "000000000000")]
    pub tenant_account_id: String,
    /// The management-cluster account id.
    #[arg(long, default_value = "111111111111")]
    pub control_plane_account_id: String,
    /// CIDR of the management VPC (default: a placeholder).
    #[arg(long)]
    pub control_plane_vpc_cidr: Option<String>,
    /// A route table of the management VPC to route into the cluster, as `ID=NAME`; repeatable
    /// (default: one placeholder table). A legacy cluster routes from the tables its
    /// `spec.aws.vpc.routeTableNames` names, with the ids given here.
    #[arg(long = "route-table", value_name = "ID=NAME")]
    pub route_tables: Vec<String>,
}

impl Objects {
    /// Read and parse every file, in order.
    pub fn load(paths: &[PathBuf]) -> Result<Self, RenderError> {
        let mut objects = Objects::default();
        for path in paths {
            let text = std::fs::read_to_string(path)
                .map_err(|e| RenderError::Read { path: path.display().to_string(), message: e.to_string() })?;
            objects.add_yaml(&text, path)?;
        }
        Ok(objects)
    }
}

impl Settings {
    /// The settings of `aws-operator render`'s flags (the AMI file, if one is named, is read).
    pub fn from_args(args: &RenderArgs) -> Result<Self, RenderError> {
        let flag = |flag: &'static str, value: &str, message: String| RenderError::Flag {
            flag,
            value: value.to_string(),
            message,
        };
        for (name, id) in [
            ("tenant-account-id", &args.aws.tenant_account_id),
            ("control-plane-account-id", &args.aws.control_plane_account_id),
        ] {
            if id.len() != 12 || !id.bytes().all(|b| b.is_ascii_digit()) {
                return Err(flag(name, id, "an AWS account id has 12 digits".into()));
            }
        }
        if let Err(e) = args.planning.ipam_range.parse::<Ipv4Net>() {
            return Err(flag("ipam-range", &args.planning.ipam_range, e.to_string()));
        }
        if !(16..=28).contains(&args.planning.subnet_mask_bits) {
            return Err(flag(
                "subnet-mask-bits",
                &args.planning.subnet_mask_bits.to_string(),
                "use a mask from 16 to 28".into(),
            ));
        }
        if let Some(cidr) = &args.aws.control_plane_vpc_cidr
            && let Err(e) = cidr.parse::<Ipv4Net>()
        {
            return Err(flag("control-plane-vpc-cidr", cidr, e.to_string()));
        }
        let route_tables = args
            .aws
            .route_tables
            .iter()
            .map(|raw| match raw.split_once('=') {
                Some((id, name)) if !id.is_empty() => Ok(CpRouteTable { id: id.to_string(), name: name.to_string() }),
                _ => Err(flag("route-table", raw, "write it as ID=NAME, e.g. rtb-0abc=gauss_private_0".into())),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let amis = args.planning.ami_file.as_deref().map(AmiMap::load).transpose()?;
        Ok(Settings {
            config: OperatorConfig {
                version: args.planning.operator_version.clone(),
                installation: args.planning.installation.clone(),
                ipam_range: args.planning.ipam_range.clone(),
                subnet_mask_bits: args.planning.subnet_mask_bits,
                route53_enabled: args.planning.route53_enabled,
                alike_instances: args.planning.alike_instances.clone(),
                ..OperatorConfig::default()
            },
            tenant_account_id: args.aws.tenant_account_id.clone(),
            control_plane_account_id: args.aws.control_plane_account_id.clone(),
            amis,
            control_plane_vpc_cidr: args.aws.control_plane_vpc_cidr.clone(),
            route_tables,
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Output
// ---------------------------------------------------------------------------------------------

/// Render the files and print the stacks (or one stack, or a summary) to `out`.
///
/// Everything is validated and rendered before the first line is written, so invalid input
/// prints nothing but the error. A closed output (`render … | head`) ends the command quietly.
pub fn run(args: &RenderArgs, out: &mut impl Write) -> anyhow::Result<()> {
    match write_plans(args, out) {
        Err(e) if e.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe) => {
            Ok(())
        }
        other => other,
    }
}

fn write_plans(args: &RenderArgs, out: &mut impl Write) -> anyhow::Result<()> {
    let settings = Settings::from_args(args)?;
    let objects = Objects::load(&args.files)?;
    // Legacy clusters alone need no AWSCluster.
    let mut plans = if objects.clusters.is_empty() && !objects.aws_configs.is_empty() {
        Vec::new()
    } else {
        plan(&objects, &settings)?
    };
    plans.extend(plan_legacy(&objects, &settings)?);
    let warnings: Vec<String> = plans.iter().filter_map(|p| p.version_warning(&settings.config.version)).collect();
    for warning in &warnings {
        // On stderr too: a warning only in the output would vanish into a pipe.
        eprintln!("warning: {warning}");
    }

    if let Some(wanted) = &args.stack {
        let Some(stack) = plans.iter().flat_map(|p| &p.stacks).find(|s| &s.name == wanted) else {
            let available = plans.iter().flat_map(|p| p.stacks.iter().map(|s| s.name.clone())).collect();
            return Err(RenderError::UnknownStack { name: wanted.clone(), available }.into());
        };
        if args.summary {
            write_summary_header(out)?;
            write_summary_line(out, stack)?;
        } else {
            write_stack(out, stack)?;
        }
        return check_sizes(std::iter::once(stack));
    }

    for (i, cluster) in plans.iter().enumerate() {
        if i > 0 {
            writeln!(out)?;
        }
        writeln!(
            out,
            "# {}: region {}, Release {}, operator {}, installation {}",
            cluster.cluster, cluster.region, cluster.release, settings.config.version, settings.config.installation
        )?;
        if let Some(warning) = cluster.version_warning(&settings.config.version) {
            writeln!(out, "# WARNING: {warning}")?;
        }
        for cidr in &cluster.cidrs {
            writeln!(out, "# {cidr}")?;
        }
        if args.summary {
            write_summary_header(out)?;
            for stack in &cluster.stacks {
                write_summary_line(out, stack)?;
            }
        } else {
            for stack in &cluster.stacks {
                writeln!(out)?;
                write_stack(out, stack)?;
            }
        }
    }
    check_sizes(plans.iter().flat_map(|p| &p.stacks))
}

fn check_sizes<'a>(mut stacks: impl Iterator<Item = &'a PlannedStack>) -> anyhow::Result<()> {
    match stacks.find(|s| s.delivery() == Delivery::TooLarge) {
        Some(s) => Err(RenderError::TooLarge { name: s.name.clone(), bytes: s.body_len() }.into()),
        None => Ok(()),
    }
}

fn delivery_text(stack: &PlannedStack) -> String {
    match stack.delivery() {
        Delivery::Inline => "inline".into(),
        Delivery::S3 { bucket, key } => format!("S3 s3://{bucket}/{key} (over {MAX_TEMPLATE_BODY_BYTES} bytes)"),
        Delivery::TooLarge => format!("TOO LARGE (over {MAX_TEMPLATE_BODY_BYTES} bytes, no bucket in this account)"),
    }
}

fn write_stack(out: &mut impl Write, stack: &PlannedStack) -> std::io::Result<()> {
    writeln!(out, "=== stack {}", stack.name)?;
    writeln!(out, "account: {} {}", stack.account_label(), stack.account_id)?;
    writeln!(out, "tags:")?;
    for (k, v) in &stack.tags {
        writeln!(out, "  {k}: {v}")?;
    }
    writeln!(
        out,
        "template: {} resources, {} bytes, {}",
        stack.template.resources.len(),
        stack.body_len(),
        delivery_text(stack)
    )?;
    writeln!(out, "{}", stack.template.to_json_pretty())
}

fn write_summary_header(out: &mut impl Write) -> std::io::Result<()> {
    writeln!(out, "{:<40} {:<25} {:>9} {:>8}  TEMPLATE", "STACK", "ACCOUNT", "RESOURCES", "BYTES")
}

fn write_summary_line(out: &mut impl Write, stack: &PlannedStack) -> std::io::Result<()> {
    writeln!(
        out,
        "{:<40} {:<25} {:>9} {:>8}  {}",
        stack.name,
        format!("{} {}", stack.account_label(), stack.account_id),
        stack.template.resources.len(),
        stack.body_len(),
        delivery_text(stack)
    )
}

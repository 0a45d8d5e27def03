//! The aws-operator binary: `daemon` reconciles clusters; `render` prints the stacks a set of
//! CR files would produce without touching AWS.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use aws_operator::aws::{AwsFactory, AwsSettings};
use aws_operator::context::{AmiMap, OperatorConfig, Shared};
use aws_operator::operator::{self, RunSettings};
use clap::{Parser, Subcommand};
use node_lifecycle::drain::{Drainer, DrainerSettings};
use operatorkit::leader::{LeaderElectionConfig, LeaderElector};
use operatorkit::{Leadership, Metrics, Readiness, Server};
use prometheus_client::registry::Registry;
use tokio_util::sync::CancellationToken;

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

#[derive(clap::Args, Debug)]
struct DaemonArgs {
    /// Address of /metrics, /healthz and /readyz.
    #[arg(long, env = "AWS_OPERATOR_LISTEN", default_value = "0.0.0.0:8000")]
    listen: SocketAddr,
    /// Installation (management cluster) name; the management VPC carries it as its Name tag.
    #[arg(long, env = "AWS_OPERATOR_INSTALLATION")]
    installation: String,
    /// Region used for the management account when a cluster names none.
    #[arg(long, env = "AWS_REGION", default_value = "eu-central-1")]
    region: String,
    /// Role to assume in the management-cluster account (none: use the operator's credentials).
    #[arg(long, env = "AWS_OPERATOR_CONTROL_PLANE_ROLE_ARN")]
    control_plane_role_arn: Option<String>,
    /// One endpoint for every AWS service (an emulator or a proxy).
    #[arg(long, env = "AWS_ENDPOINT_URL")]
    aws_endpoint_url: Option<String>,
    /// Extra PEM CA certificates to trust for AWS endpoints.
    #[arg(long, env = "AWS_CA_BUNDLE")]
    aws_ca_bundle: Option<PathBuf>,
    /// The AMI file: `{"<flatcarVersion>": {"<region>": "ami-…"}}`.
    #[arg(long, env = "AWS_OPERATOR_AMI_FILE")]
    ami_file: PathBuf,
    /// How often the AMI file is read again, in seconds (a mounted ConfigMap changes in place).
    #[arg(long, default_value_t = 30)]
    ami_reload_seconds: u64,
    /// IPAM range for cluster and node-pool CIDRs.
    #[arg(long, default_value = "10.1.0.0/16")]
    ipam_range: String,
    /// Size (mask bits) of cluster and node-pool CIDRs.
    #[arg(long, default_value_t = 24)]
    subnet_mask_bits: u8,
    /// Manage hosted zones and records.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    route53_enabled: bool,
    /// Name tags of the management VPC's route tables to route into tenant clusters (default:
    /// every non-main route table of that VPC).
    #[arg(long, value_delimiter = ',')]
    route_tables: Vec<String>,
    /// Image registry of the node images.
    #[arg(long, default_value = "gsoci.azurecr.io")]
    registry: String,
    /// Parallel reconciles per controller.
    #[arg(long, default_value_t = 8)]
    concurrency: u16,
    /// Resync period in seconds.
    #[arg(long, default_value_t = 300)]
    resync_seconds: u64,
    /// Requeue interval while stacks transition, in seconds.
    #[arg(long, default_value_t = 10)]
    poll_seconds: u64,
    /// Instance types alike to each instance type, as JSON: `{"m5.xlarge": [{"InstanceType":
    /// "m5.xlarge", "WeightedCapacity": 1}, …]}`; used by node pools with
    /// `useAlikeInstanceTypes`.
    #[arg(long, env = "AWS_OPERATOR_ALIKE_INSTANCES", default_value = "", value_parser = aws_operator::context::AlikeInstances::parse)]
    alike_instances: aws_operator::context::AlikeInstances,
    /// Namespace of the certificate Secrets of every cluster (default: each cluster's own).
    #[arg(long)]
    certificates_namespace: Option<String>,
    /// Elect a leader among the replicas of this operator version; only the leader writes.
    #[arg(long, env = "AWS_OPERATOR_LEADER_ELECTION", default_value_t = true, action = clap::ArgAction::Set)]
    leader_election: bool,
    /// Namespace of the leader election Lease.
    #[arg(long, env = "POD_NAMESPACE", default_value = "giantswarm")]
    leader_election_namespace: String,
    /// Name of the leader election Lease (default: `aws-operator-<version>`, one per version).
    #[arg(long)]
    leader_election_name: Option<String>,
    /// How long an account's stack listing (`DescribeStacks`) is used before it is listed again,
    /// in seconds.
    #[arg(long, default_value_t = 600)]
    stack_listing_ttl_seconds: u64,
    /// How often the master Endpoints are refreshed from EC2, in seconds.
    #[arg(long, default_value_t = 900)]
    endpoints_refresh_seconds: u64,
    /// How long a node drain may take before it ends with `Timeout`, in seconds, for
    /// DrainerConfigs without the `drainer.giantswarm.io/timeout` annotation.
    #[arg(long, default_value_t = 3600)]
    drain_timeout_seconds: u64,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    operatorkit::logging::init();
    let cli = Cli::parse();
    match cli.command {
        Command::Render(args) => aws_operator::render::run(&args, &mut std::io::stdout()),
        Command::Daemon(args) => daemon(*args).await,
    }
}

async fn daemon(args: DaemonArgs) -> anyhow::Result<()> {
    let client = kube::Client::try_default().await.context("connecting to the management cluster")?;
    let amis = AmiMap::load(&args.ami_file)?;
    let version = OperatorConfig::default().version;
    let elector = if args.leader_election {
        let lease = args.leader_election_name.clone().unwrap_or_else(|| operator::lease_name(&version));
        let config = LeaderElectionConfig {
            // The controllers have stopped (and with them every write) when the lease is
            // released, so a standby may start at once.
            release_on_cancel: true,
            ..LeaderElectionConfig::new(&args.leader_election_namespace, lease)
        };
        Some(LeaderElector::new(client.clone(), config).context("leader election")?)
    } else {
        None
    };
    let leadership = elector.as_ref().map_or_else(Leadership::always, LeaderElector::leadership);
    let aws = AwsFactory::new(AwsSettings {
        default_region: args.region.clone(),
        endpoint_url: args.aws_endpoint_url.clone(),
        ca_bundle: args.aws_ca_bundle.clone(),
        control_plane_role_arn: args.control_plane_role_arn.clone(),
        credentials: None,
        operation_timeout: None,
    })
    .await?
    .gated_by(leadership.clone());
    let config = OperatorConfig {
        installation: args.installation.clone(),
        ipam_range: args.ipam_range.clone(),
        subnet_mask_bits: args.subnet_mask_bits,
        route53_enabled: args.route53_enabled,
        control_plane_route_tables: args.route_tables.clone(),
        registry: args.registry.clone(),
        poll: Duration::from_secs(args.poll_seconds.max(1)),
        certificates_namespace: args.certificates_namespace.clone(),
        alike_instances: args.alike_instances.clone(),
        stack_listing_ttl: Duration::from_secs(args.stack_listing_ttl_seconds),
        endpoints_refresh: Duration::from_secs(args.endpoints_refresh_seconds),
        ..OperatorConfig::default()
    };
    let mut registry = Registry::default();
    let metrics = Metrics::new(&mut registry);
    if let Some(elector) = &elector {
        elector.register_metrics(&mut registry);
    }
    let readiness = Readiness::new();
    // The drain executor: the DrainerConfigs labelled with this version, so that a platform
    // needs no node-operator.
    let drain_settings = DrainerSettings {
        timeout: Duration::from_secs(args.drain_timeout_seconds.max(1)),
        ..DrainerSettings::new("aws-operator", semver::Version::parse(&version).context("the operator's version")?)
    };
    let drainer = Drainer::builder(leadership.gate(client.clone()), drain_settings, &mut registry)
        .metrics(&metrics)
        .readiness(&readiness)
        .leadership(leadership.clone())
        .build()
        .context("the drain executor")?;
    let shared = Shared::new(leadership.gate(client), aws, config, amis, &mut registry);
    let shutdown = CancellationToken::new();
    let server = Server::bind(args.listen, Arc::new(registry), readiness.clone()).await?;
    tracing::info!(addr = ?server.local_addr(), version = %shared.config.version, "aws-operator starting");
    let serving = tokio::spawn(server.serve(shutdown.clone()));
    tokio::spawn(shared.amis.clone().watch(
        args.ami_file.clone(),
        Duration::from_secs(args.ami_reload_seconds.max(1)),
        shutdown.clone(),
    ));
    // The election stops after the controllers, so that releasing the lease comes last.
    let stop_election = CancellationToken::new();
    let election = elector.map(|elector| tokio::spawn(elector.run(stop_election.clone())));
    let stop = shutdown.clone();
    tokio::spawn(async move {
        terminated().await;
        tracing::info!("stopping: the controllers finish their reconciles, then the leader Lease is released");
        stop.cancel();
    });
    let (controllers, ()) = tokio::join!(
        operator::run(
            shared,
            &metrics,
            &readiness,
            RunSettings { concurrency: args.concurrency, resync: Duration::from_secs(args.resync_seconds), leadership },
            shutdown.clone(),
        ),
        drainer.run(shutdown.clone()),
    );
    controllers?;
    shutdown.cancel();
    stop_election.cancel();
    if let Some(election) = election {
        match election.await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => tracing::warn!(%error, "leader election ended with an error"),
            Err(error) => tracing::warn!(%error, "leader election task failed"),
        }
    }
    let _ = serving.await;
    Ok(())
}

/// Ctrl-C, or SIGTERM: what the kubelet sends a container before it kills it, so that a pod's
/// operator stops cleanly and hands its Lease over at once instead of after it expires.
async fn terminated() {
    #[cfg(unix)]
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        }
        Err(error) => {
            tracing::warn!(%error, "cannot listen for SIGTERM; stopping on Ctrl-C only");
            let _ = tokio::signal::ctrl_c().await;
        }
    }
    #[cfg(not(unix))]
    let _ = tokio::signal::ctrl_c().await;
}

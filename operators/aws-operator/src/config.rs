//! The operator's settings: the flags of `aws-operator daemon` ([`DaemonArgs`]), the settings the
//! controllers read ([`OperatorConfig`]), and the two file- or flag-backed tables, the AMIs by
//! Flatcar version and region ([`AmiMap`]) and the instance types alike to each type
//! ([`AlikeInstances`]).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// The Release component this operator is.
pub const COMPONENT: &str = "aws-operator";

/// The flags of `aws-operator daemon`.
#[derive(clap::Args, Debug)]
pub struct DaemonArgs {
    /// Address of /metrics, /healthz and /readyz.
    #[arg(long, env = "AWS_OPERATOR_LISTEN", default_value = "0.0.0.0:8000")]
    pub listen: SocketAddr,
    /// Installation (management cluster) name; the management VPC carries it as its Name tag.
    #[arg(long, env = "AWS_OPERATOR_INSTALLATION")]
    pub installation: String,
    /// How the operator reaches AWS (the flags `plan` shares).
    #[command(flatten)]
    pub aws: AwsAccessArgs,
    /// The AMI file: `{"<flatcarVersion>": {"<region>": "ami-…"}}`.
    #[arg(long, env = "AWS_OPERATOR_AMI_FILE")]
    pub ami_file: PathBuf,
    /// How often the AMI file is read again, in seconds (a mounted ConfigMap changes in place).
    #[arg(long, default_value_t = 30)]
    pub ami_reload_seconds: u64,
    /// IPAM range for cluster and node-pool CIDRs.
    #[arg(long, default_value = "10.1.0.0/16")]
    pub ipam_range: String,
    /// Size (mask bits) of cluster and node-pool CIDRs.
    #[arg(long, default_value_t = 24)]
    pub subnet_mask_bits: u8,
    /// Manage hosted zones and records.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub route53_enabled: bool,
    /// Image registry of the node images.
    #[arg(long, default_value = "gsoci.azurecr.io")]
    pub registry: String,
    /// The Service CIDR of every workload cluster (the API server's
    /// `--service-cluster-ip-range`); its first address is in the API server's certificate and
    /// its `.10` is the cluster DNS. An IPv4 CIDR of /24 or wider.
    #[arg(long, default_value = DEFAULT_SERVICE_CIDR, value_parser = parse_service_cidr)]
    pub service_cidr: String,
    /// SSH users of every node, `name:public key` entries separated by commas (`alice:ssh-ed25519
    /// AAAA… alice`), in the groups `sudo` and `docker`.
    #[arg(long, env = "AWS_OPERATOR_SSH_USERS", default_value = "", value_parser = parse_ssh_users)]
    pub ssh_users: SshUsers,
    /// The SSO CA's public key, trusted for SSH user certificates on the nodes.
    #[arg(long, default_value = "")]
    pub sso_public_key: String,
    /// Docker registry mirrors of the nodes, comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub registry_mirrors: Vec<String>,
    /// The pod sandbox ("pause") image of every node: containerd's `sandbox_image` (kubelet
    /// runs pods through containerd); empty: containerd's own.
    #[arg(long, default_value = "")]
    pub pause_image: String,
    /// The Docker Hub credential of every node, for image pulls from `docker.io`: the base64 of
    /// `<user>:<access token>` (the original's `dockerhubToken`), written to containerd's and
    /// Docker's configuration on the node. A secret: pass it by the environment variable, from a
    /// Secret.
    #[arg(
        long,
        env = "AWS_OPERATOR_DOCKERHUB_TOKEN",
        default_value = "",
        hide_env_values = true,
        hide_default_value = true
    )]
    pub dockerhub_token: ignition::extras::DockerhubToken,
    /// Tag the cluster's S3 buckets (`PutBucketTagging`) with the cluster's tags. `false` for
    /// regions and partitions where S3 refuses bucket tagging.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub s3_bucket_tagging: bool,
    /// Days after which the access logs in each cluster's access-log bucket expire (its
    /// lifecycle rule `ExpirationLogs`); a change reaches the buckets of existing clusters.
    #[arg(long, default_value_t = DEFAULT_ACCESS_LOG_EXPIRATION_DAYS, value_parser = clap::value_parser!(i32).range(1..=36500))]
    pub access_log_expiration_days: i32,
    /// Narrow the public Kubernetes API of every workload cluster (its master security group)
    /// to `--public-api-allowlist-cidrs`, the management VPC, the cluster's own CIDR and NAT
    /// addresses, and the management cluster's NAT addresses (Elastic IPs tagged
    /// `giantswarm.io/installation=<installation>`); off: open to everywhere.
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set)]
    pub public_api_allowlist_enabled: bool,
    /// IPv4 CIDRs allowed on the public Kubernetes API besides those above, comma-separated;
    /// only with `--public-api-allowlist-enabled=true`.
    #[arg(long, value_delimiter = ',', value_parser = parse_allowlist_cidr)]
    pub public_api_allowlist_cidrs: Vec<String>,
    /// Narrow the internal Kubernetes API of every workload cluster (its internal load
    /// balancer) to `--private-api-allowlist-cidrs`, the management VPC and the cluster's own
    /// CIDRs; off: open to the private ranges (RFC 1918, 100.64.0.0/10, 198.19.0.0/16).
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set)]
    pub private_api_allowlist_enabled: bool,
    /// IPv4 CIDRs allowed on the internal Kubernetes API besides those above,
    /// comma-separated; only with `--private-api-allowlist-enabled=true`.
    #[arg(long, value_delimiter = ',', value_parser = parse_allowlist_cidr)]
    pub private_api_allowlist_cidrs: Vec<String>,
    /// Parallel reconciles per controller.
    #[arg(long, default_value_t = 8)]
    pub concurrency: u16,
    /// Resync period in seconds.
    #[arg(long, default_value_t = 300)]
    pub resync_seconds: u64,
    /// Requeue interval while stacks transition, in seconds.
    #[arg(long, default_value_t = 10)]
    pub poll_seconds: u64,
    /// Instance types alike to each instance type, as JSON: `{"m5.xlarge": [{"InstanceType":
    /// "m5.xlarge", "WeightedCapacity": 1}, …]}`; used by node pools with
    /// `useAlikeInstanceTypes`.
    #[arg(long, env = "AWS_OPERATOR_ALIKE_INSTANCES", default_value = "", value_parser = AlikeInstances::parse)]
    pub alike_instances: AlikeInstances,
    /// Namespace of the certificate Secrets of every cluster (default: each cluster's own).
    #[arg(long)]
    pub certificates_namespace: Option<String>,
    /// Namespaces besides a cluster's own that may hold its credential Secret, comma-separated
    /// or repeated; a Secret there serves only the organisation its `giantswarm.io/organization`
    /// label names (empty: each cluster's own namespace only).
    #[arg(long, env = "AWS_OPERATOR_CREDENTIAL_NAMESPACES", value_delimiter = ',', default_value = "giantswarm")]
    pub credential_namespaces: Vec<String>,
    /// Elect a leader among the replicas of this operator version; only the leader writes.
    #[arg(long, env = "AWS_OPERATOR_LEADER_ELECTION", default_value_t = true, action = clap::ArgAction::Set)]
    pub leader_election: bool,
    /// Namespace of the leader election Lease.
    #[arg(long, env = "POD_NAMESPACE", default_value = "giantswarm")]
    pub leader_election_namespace: String,
    /// Name of the leader election Lease (default: `aws-operator-<version>`, one per version).
    #[arg(long)]
    pub leader_election_name: Option<String>,
    /// Share the clusters among the replicas instead of leaving them to the leader: each
    /// replica holds its own shard Lease (named after its pod, `POD_NAME`) and reconciles the
    /// clusters assigned to it; the leader assigns them. Implies leader election.
    #[arg(long, env = "AWS_OPERATOR_SHARDING", default_value_t = false, action = clap::ArgAction::Set)]
    pub sharding: bool,
    /// How clusters are assigned to shards: `labels` (a shard label on each object, any API
    /// server) or `namespace-ranges` (hash ranges of the namespace in the watches' shardSelector;
    /// Kubernetes 1.36+ with `ShardedListAndWatch`, one cluster per namespace).
    #[arg(long, default_value_t = operatorkit::sharding::ShardingMode::Labels)]
    pub sharding_mode: operatorkit::sharding::ShardingMode,
    /// How often each control plane and node pool of a steady cluster looks for instances
    /// waiting on a terminating lifecycle hook, in seconds; also how old the account's shared
    /// listing of Auto Scaling instances they read may be.
    #[arg(long, default_value_t = 120)]
    pub drainer_poll_seconds: u64,
    /// How often a control plane or node pool whose stack is changing (a rolling update, a
    /// delete) or whose instances wait on a terminating hook looks again, in seconds: how soon a
    /// node starts to drain after its instance starts to wait.
    #[arg(long, default_value_t = 2)]
    pub drainer_active_poll_seconds: u64,
    /// How long an account's stack listing (`DescribeStacks`) is used before it is listed again,
    /// in seconds.
    #[arg(long, default_value_t = 600)]
    pub stack_listing_ttl_seconds: u64,
    /// How often the master Endpoints are refreshed from EC2, in seconds.
    #[arg(long, default_value_t = 900)]
    pub endpoints_refresh_seconds: u64,
    /// How long the API server's answer to which Cluster API kinds it serves (`Cluster`,
    /// `MachineDeployment`, `G8sControlPlane`) is used before it is asked again, in seconds:
    /// CRDs installed or removed while the operator runs are seen within this time.
    #[arg(long, default_value_t = 60)]
    pub capi_discovery_seconds: u64,
    /// How long a node drain may take before it ends with `Timeout`, in seconds, for
    /// DrainerConfigs without the `drainer.giantswarm.io/timeout` annotation.
    #[arg(long, default_value_t = 3600)]
    pub drain_timeout_seconds: u64,
    /// Terminate the instances of workload-cluster nodes that stay NotReady in every cluster
    /// whose AWSCluster does not opt out with the annotation
    /// `alpha.node.giantswarm.io/terminate-unhealthy: "false"`. With `false`, only in clusters
    /// annotated with another value.
    #[arg(long, env = "AWS_OPERATOR_TERMINATE_UNHEALTHY_NODES", default_value_t = true, action = clap::ArgAction::Set)]
    pub terminate_unhealthy_nodes: bool,
    /// How long a workload-cluster node must be NotReady before its instance is terminated, in
    /// seconds.
    #[arg(long, default_value_t = 900)]
    pub unhealthy_node_threshold_seconds: u64,
    /// How long after terminating an unhealthy node's instance no other node of the cluster is
    /// terminated, in seconds.
    #[arg(long, default_value_t = 600)]
    pub unhealthy_node_cooldown_seconds: u64,
    /// How often the unhealthy-node terminator looks at each cluster's nodes, in seconds (it
    /// also looks when a NotReady node is due).
    #[arg(long, default_value_t = 180)]
    pub unhealthy_node_resync_seconds: u64,
    /// At most this many clusters roll (replace instances) at once, across every replica and
    /// version of the operator; 0: no limit. Slots are Leases in the operator's namespace.
    #[arg(long, default_value_t = 0)]
    pub max_rolling_clusters: u32,
    /// How often CloudFormation drift detection runs on each cluster's stacks, in seconds; 0
    /// turns drift detection off.
    #[arg(long, env = "AWS_OPERATOR_DRIFT_DETECTION_INTERVAL_SECONDS", default_value_t = 3600)]
    pub drift_detection_interval_seconds: u64,
    /// How many drift detections (`DetectStackDrift`) the operator starts per AWS account and
    /// region per minute, across all clusters.
    #[arg(long, default_value_t = 10)]
    pub drift_detections_per_account_per_minute: u32,
    /// AWS read requests (`Describe*`, `List*`, `Get*`, S3 `GET`, …) per second per AWS
    /// account and region, shared by every replica and version of the operator; 0: no limit.
    /// The default is EC2's own limit of non-mutating calls.
    #[arg(long, default_value_t = 20.0)]
    pub aws_read_requests_per_second: f64,
    /// AWS write requests (stack operations, hook completions, terminations, uploads, …) per
    /// second per AWS account and region, shared like the reads, with a bucket of their own; 0:
    /// no limit. The default is EC2's own limit of mutating calls.
    #[arg(long, default_value_t = 5.0)]
    pub aws_write_requests_per_second: f64,
    /// How many seconds' worth of requests may be saved up and sent at once (the burst).
    #[arg(long, default_value_t = 5)]
    pub aws_request_burst_seconds: u64,
    /// How long a replica that stops renewing its request-budget Lease still counts as sharing
    /// the budget, in seconds: its share goes back to the others within this time.
    #[arg(long, default_value_t = 15)]
    pub aws_request_budget_lease_seconds: u64,
}

/// How `aws-operator daemon` and `aws-operator plan` reach AWS: the flags both take, with the
/// same names, environment variables and meanings. Credentials come from the environment (the
/// SDK's default chain).
#[derive(clap::Args, Debug, Clone)]
pub struct AwsAccessArgs {
    /// Region of the management account, used for clusters that name none (`plan`: the
    /// clusters' region too).
    #[arg(long, env = "AWS_REGION", default_value = "eu-central-1")]
    pub region: String,
    /// Role to assume in the management-cluster account (none: use the credentials there).
    #[arg(long, env = "AWS_OPERATOR_CONTROL_PLANE_ROLE_ARN")]
    pub control_plane_role_arn: Option<String>,
    /// The ExternalId of every AssumeRole of a tenant role: one per installation, required by
    /// the tenant roles' trust policies (none: AssumeRole without one).
    #[arg(long, env = "AWS_OPERATOR_TENANT_ROLE_EXTERNAL_ID")]
    pub tenant_role_external_id: Option<String>,
    /// One endpoint for every AWS service (an emulator or a proxy).
    #[arg(long, env = "AWS_ENDPOINT_URL")]
    pub aws_endpoint_url: Option<String>,
    /// Extra PEM CA certificates to trust for AWS endpoints.
    #[arg(long, env = "AWS_CA_BUNDLE")]
    pub aws_ca_bundle: Option<PathBuf>,
    /// Name tags of the management VPC's route tables to route into tenant clusters,
    /// comma-separated or repeated (default: every non-main route table of that VPC).
    #[arg(long, env = "AWS_OPERATOR_ROUTE_TABLES", value_delimiter = ',')]
    pub route_tables: Vec<String>,
}

impl AwsAccessArgs {
    /// The client settings of these flags; `operation_timeout` bounds each AWS call.
    pub fn settings(&self, operation_timeout: Option<Duration>) -> AwsSettings {
        AwsSettings {
            default_region: self.region.clone(),
            endpoint_url: self.aws_endpoint_url.clone(),
            ca_bundle: self.aws_ca_bundle.clone(),
            control_plane_role_arn: self.control_plane_role_arn.clone(),
            credentials: None,
            operation_timeout,
            tenant_external_id: self.tenant_role_external_id.clone().filter(|s| !s.is_empty()),
        }
    }
}

/// How the operator reaches AWS.
#[derive(Clone, Debug, Default)]
pub struct AwsSettings {
    /// The region used when a cluster names none.
    pub default_region: String,
    /// One endpoint for every service (an emulator, a VPC endpoint proxy); `None` for AWS.
    pub endpoint_url: Option<String>,
    /// Extra PEM CA certificates to trust (for an endpoint with a private CA).
    pub ca_bundle: Option<PathBuf>,
    /// The role in the management-cluster account; `None` uses the operator's credentials there.
    pub control_plane_role_arn: Option<String>,
    /// Explicit credentials; `None` uses the default chain.
    pub credentials: Option<aws_credential_types::Credentials>,
    /// Per-call timeout.
    pub operation_timeout: Option<Duration>,
    /// The `ExternalId` every AssumeRole of a tenant role carries (`--tenant-role-external-id`):
    /// one per installation, required by the tenant role's trust policy, so that a role ARN named
    /// in some Secret is assumed only by the installation its account trusts.
    pub tenant_external_id: Option<String>,
}

/// The AWS request budget per account and region (`--aws-*-requests-per-second`,
/// `--aws-request-burst-seconds`, `--aws-request-budget-lease-seconds`, and
/// `--drift-detections-per-account-per-minute` for drift detections): the rates of the whole
/// operator, which its live replicas split evenly (see `crate::aws::budget`).
#[derive(Clone, Debug, PartialEq)]
pub struct BudgetSettings {
    /// Read requests per second; 0: no limit.
    pub read_per_second: f64,
    /// Write requests per second; 0: no limit.
    pub write_per_second: f64,
    /// How many seconds' worth of requests may be saved up.
    pub burst: Duration,
    /// Drift detections started per minute.
    pub detections_per_minute: u32,
    /// A replica whose Lease stops changing for this long no longer shares the budget.
    pub lease_duration: Duration,
}

impl Default for BudgetSettings {
    /// EC2's own per-account limits (20 reads and 5 writes a second), a 5 s burst, ten drift
    /// detections a minute, client-go's 15 s lease.
    fn default() -> Self {
        Self {
            read_per_second: 20.0,
            write_per_second: 5.0,
            burst: Duration::from_secs(5),
            detections_per_minute: 10,
            lease_duration: Duration::from_secs(15),
        }
    }
}

impl BudgetSettings {
    /// The settings of `args`.
    pub fn new(args: &DaemonArgs) -> Self {
        Self {
            read_per_second: args.aws_read_requests_per_second.max(0.0),
            write_per_second: args.aws_write_requests_per_second.max(0.0),
            burst: Duration::from_secs(args.aws_request_burst_seconds.max(1)),
            detections_per_minute: args.drift_detections_per_account_per_minute.max(1),
            lease_duration: Duration::from_secs(args.aws_request_budget_lease_seconds.max(3)),
        }
    }

    /// No limit on requests, `per_minute` drift detections: a process that shares no budget.
    pub fn detections_only(per_minute: u32) -> Self {
        Self {
            read_per_second: 0.0,
            write_per_second: 0.0,
            detections_per_minute: per_minute.max(1),
            ..Self::default()
        }
    }
}

/// The drift detector's settings (`--drift-detection-*`, `--drift-detections-*`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DriftSettings {
    /// How often each cluster's stacks are checked; zero: never.
    pub interval: Duration,
    /// `DetectStackDrift` calls per account and region per minute.
    pub per_account_per_minute: u32,
    /// How often a running detection's status is asked for.
    pub poll: Duration,
}

impl Default for DriftSettings {
    /// Hourly, ten detections per account per minute, polled every 10 s.
    fn default() -> Self {
        Self { interval: Duration::from_secs(3600), per_account_per_minute: 10, poll: Duration::from_secs(10) }
    }
}

impl DriftSettings {
    /// The settings of `args`.
    pub fn new(args: &DaemonArgs) -> Self {
        Self {
            interval: Duration::from_secs(args.drift_detection_interval_seconds),
            per_account_per_minute: args.drift_detections_per_account_per_minute.max(1),
            ..Self::default()
        }
    }

    /// Whether drift detection runs at all.
    pub fn enabled(&self) -> bool {
        !self.interval.is_zero()
    }
}

/// The unhealthy-node terminator's settings (`--terminate-unhealthy-nodes`,
/// `--unhealthy-node-*`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnhealthySettings {
    /// On in every cluster that does not opt out (`true`), or only in those that opt in.
    pub all_clusters: bool,
    /// The NotReady threshold and the cooldown.
    pub limits: node_lifecycle::unhealthy::Limits,
    /// How often each cluster is looked at without a reason.
    pub resync: Duration,
}

impl Default for UnhealthySettings {
    /// On by default, as in the original; 15 min NotReady, 10 min cooldown, 3 min resync
    /// (reference §4.5).
    fn default() -> Self {
        Self {
            all_clusters: true,
            limits: node_lifecycle::unhealthy::Limits::default(),
            resync: Duration::from_secs(180),
        }
    }
}

impl UnhealthySettings {
    /// The settings of `args`.
    pub fn new(args: &DaemonArgs) -> Self {
        Self {
            all_clusters: args.terminate_unhealthy_nodes,
            limits: node_lifecycle::unhealthy::Limits::from_secs(
                args.unhealthy_node_threshold_seconds,
                args.unhealthy_node_cooldown_seconds,
            ),
            resync: Duration::from_secs(args.unhealthy_node_resync_seconds.max(1)),
        }
    }
}

/// The operator's settings (flags of `aws-operator daemon`).
#[derive(Clone, Debug)]
pub struct OperatorConfig {
    /// This operator's version: it reconciles objects whose Release names this version of the
    /// `aws-operator` component, and it is written into every stack's `OperatorVersion` output.
    pub version: String,
    /// The installation (management cluster) name: tags, the management VPC's `Name` tag and
    /// the IPAM lock owner.
    pub installation: String,
    /// The range cluster and node-pool CIDRs are allocated from when no NetworkPool is named.
    pub ipam_range: String,
    /// The size of cluster and node-pool CIDRs (mask bits), unless annotated otherwise.
    pub subnet_mask_bits: u8,
    /// Whether hosted zones and records are managed.
    pub route53_enabled: bool,
    /// `Name` tags of the management VPC's route tables to route into tenant clusters; empty
    /// means every non-main route table of that VPC.
    pub control_plane_route_tables: Vec<String>,
    /// The namespace holding the IPAM lock annotation.
    pub lock_namespace: String,
    /// The image registry nodes pull from.
    pub registry: String,
    /// The Service CIDR of every workload cluster (`--service-cidr`).
    pub service_cidr: String,
    /// The settings of each cluster's S3 buckets.
    pub buckets: BucketSettings,
    /// The API allowlists of every cluster (`--public-api-allowlist-*`,
    /// `--private-api-allowlist-*`), without the management cluster's NAT addresses, which the
    /// cluster step adds to an enabled public list.
    pub api_allowlist: aws_stacks::stacks::tccp::ApiWhitelist,
    /// What every node gets besides the cluster's own (`--ssh-users`, `--sso-public-key`,
    /// `--registry-mirrors`, `--pause-image`, `--dockerhub-token`).
    pub node_extras: ignition::extras::NodeExtras,
    /// How often the master Endpoints are refreshed from EC2.
    pub endpoints_refresh: Duration,
    /// How long an account's stack listing is used before it is listed again.
    pub stack_listing_ttl: Duration,
    /// How long the discovery of the served Cluster API kinds is used before the API server is
    /// asked again (`--capi-discovery-seconds`; the Cluster API reader in `capi` uses it).
    pub capi_discovery_ttl: Duration,
    /// How long the view of a transitioning stack is used before it is described again.
    pub stack_busy_ttl: Duration,
    /// The requeue interval while a stack or a prerequisite is pending.
    pub poll: Duration,
    /// How often each control plane and node pool looks for instances waiting on a terminating
    /// lifecycle hook (reference §4.4: the drainer controllers resynced every 2 minutes).
    pub drainer_poll: Duration,
    /// How often an owner whose stack is changing, or whose instances wait, looks again; also
    /// how long an account's Auto Scaling listing is shared.
    pub drainer_active_poll: Duration,
    /// How long a node drain may take (`--drain-timeout-seconds`); a drain for a lifecycle hook
    /// gets less when the hook would time out first.
    pub drain_timeout: Duration,
    /// Templates larger than this many bytes are uploaded to the cluster bucket and passed to
    /// CloudFormation by URL. CloudFormation's own inline limit; only tests lower it, to send
    /// templates of ordinary size down that path.
    pub template_body_limit: usize,
    /// The namespace of every cluster's certificate Secrets; `None`: each cluster's own.
    pub certificates_namespace: Option<String>,
    /// The namespaces besides a cluster's own that may hold its credential Secret, each Secret
    /// serving the organisation its `giantswarm.io/organization` label names
    /// (`crate::controllers::lookup::tenant_role`).
    pub credential_namespaces: Vec<String>,
    /// The instance types a node pool with `useAlikeInstanceTypes` may also run on.
    pub alike_instances: AlikeInstances,
    /// The unhealthy-node terminator's settings.
    pub unhealthy: UnhealthySettings,
    /// At most this many clusters roll at once (`--max-rolling-clusters`); 0: no limit.
    pub max_rolling_clusters: u32,
    /// The namespace of the rollout-slot Leases (`crate::rollout`): the operator's own.
    pub slot_namespace: String,
    /// The drift detector's settings.
    pub drift: DriftSettings,
}

/// The SSH users of `--ssh-users`, parsed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SshUsers(pub Vec<ignition::extras::SshUser>);

/// Parse `--ssh-users` (the original's `name:key,…` list).
pub fn parse_ssh_users(value: &str) -> Result<SshUsers, String> {
    ignition::extras::parse_ssh_users(value).map(SshUsers)
}

/// The settings of each cluster's two S3 buckets (`--s3-bucket-tagging`,
/// `--access-log-expiration-days`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BucketSettings {
    /// Whether the buckets are tagged (S3 refuses bucket tagging in some regions).
    pub tagging: bool,
    /// Days after which access logs expire.
    pub access_log_expiration_days: i32,
}

impl Default for BucketSettings {
    fn default() -> Self {
        Self { tagging: true, access_log_expiration_days: DEFAULT_ACCESS_LOG_EXPIRATION_DAYS }
    }
}

/// Days after which access logs expire by default (the original's `s3AccessLogsExpiration`).
pub const DEFAULT_ACCESS_LOG_EXPIRATION_DAYS: i32 = 365;

/// The instance types alike to an instance type (`--alike-instances`, reference §10): for each
/// primary type, the types its node pools' Auto Scaling groups may launch instead, with their
/// capacity weights. A node pool with `spec.provider.worker.useAlikeInstanceTypes` gets its
/// type's list as the group's overrides; a type without a list runs on itself alone.
///
/// The format is the original's: `{"m5.xlarge": [{"InstanceType": "m5.xlarge",
/// "WeightedCapacity": 1}, {"InstanceType": "m4.xlarge", "WeightedCapacity": 1}]}`; a list
/// names the primary type too, as the group's overrides replace it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AlikeInstances(BTreeMap<String, Vec<aws_stacks::stacks::tcnp::InstanceOverride>>);

impl AlikeInstances {
    /// Parse the flag's JSON; the error names the entry that is wrong.
    pub fn parse(json: &str) -> Result<Self, String> {
        #[derive(serde::Deserialize)]
        #[serde(rename_all = "PascalCase", deny_unknown_fields)]
        struct Entry {
            instance_type: String,
            weighted_capacity: Option<u32>,
        }
        if json.trim().is_empty() {
            return Ok(Self::default());
        }
        let map: BTreeMap<String, Vec<Entry>> = serde_json::from_str(json).map_err(|e| {
            format!("--alike-instances must be a JSON object of instance type to [{{\"InstanceType\", \"WeightedCapacity\"}}]: {e}")
        })?;
        let mut out = BTreeMap::new();
        for (primary, entries) in map {
            if entries.is_empty() || entries.len() > 20 {
                return Err(format!(
                    "--alike-instances: {primary} lists {} instance types; an Auto Scaling group takes 1 to 20",
                    entries.len()
                ));
            }
            let overrides = entries
                .into_iter()
                .map(|e| aws_stacks::stacks::tcnp::InstanceOverride {
                    instance_type: e.instance_type,
                    weighted_capacity: e.weighted_capacity,
                })
                .collect();
            out.insert(primary, overrides);
        }
        Ok(Self(out))
    }

    /// The overrides of a node pool of `instance_type` that asks for alike types.
    pub fn overrides(&self, instance_type: &str) -> Vec<aws_stacks::stacks::tcnp::InstanceOverride> {
        self.0.get(instance_type).cloned().unwrap_or_default()
    }
}

impl OperatorConfig {
    /// The configuration of `aws-operator daemon` from its flags. Pure, so that each flag's
    /// way into the configuration is tested.
    pub fn from_args(args: &DaemonArgs) -> Self {
        OperatorConfig {
            installation: args.installation.clone(),
            ipam_range: args.ipam_range.clone(),
            subnet_mask_bits: args.subnet_mask_bits,
            route53_enabled: args.route53_enabled,
            control_plane_route_tables: args.aws.route_tables.clone(),
            registry: args.registry.clone(),
            service_cidr: args.service_cidr.clone(),
            node_extras: ignition::extras::NodeExtras {
                ssh_users: args.ssh_users.0.clone(),
                sso_public_key: args.sso_public_key.clone(),
                registry_mirrors: args.registry_mirrors.iter().filter(|m| !m.is_empty()).cloned().collect(),
                pause_image: args.pause_image.trim().to_string(),
                dockerhub_token: args.dockerhub_token.clone(),
            },
            api_allowlist: aws_stacks::stacks::tccp::ApiWhitelist {
                public: args.public_api_allowlist_enabled.then(|| args.public_api_allowlist_cidrs.clone()),
                private: args.private_api_allowlist_enabled.then(|| args.private_api_allowlist_cidrs.clone()),
            },
            buckets: BucketSettings {
                tagging: args.s3_bucket_tagging,
                access_log_expiration_days: args.access_log_expiration_days,
            },
            poll: Duration::from_secs(args.poll_seconds.max(1)),
            drainer_poll: Duration::from_secs(args.drainer_poll_seconds.max(1)),
            drainer_active_poll: Duration::from_secs(args.drainer_active_poll_seconds.max(1)),
            drain_timeout: Duration::from_secs(args.drain_timeout_seconds.max(1)),
            certificates_namespace: args.certificates_namespace.clone(),
            credential_namespaces: args.credential_namespaces.iter().filter(|n| !n.is_empty()).cloned().collect(),
            alike_instances: args.alike_instances.clone(),
            stack_listing_ttl: Duration::from_secs(args.stack_listing_ttl_seconds),
            endpoints_refresh: Duration::from_secs(args.endpoints_refresh_seconds),
            capi_discovery_ttl: Duration::from_secs(args.capi_discovery_seconds.max(1)),
            unhealthy: UnhealthySettings::new(args),
            max_rolling_clusters: args.max_rolling_clusters,
            slot_namespace: args.leader_election_namespace.clone(),
            drift: DriftSettings::new(args),
            ..OperatorConfig::default()
        }
    }
}

impl Default for OperatorConfig {
    fn default() -> Self {
        Self {
            version: env!("CARGO_PKG_VERSION").to_string(),
            installation: "gauss".into(),
            ipam_range: "10.1.0.0/16".into(),
            subnet_mask_bits: 24,
            route53_enabled: true,
            control_plane_route_tables: Vec::new(),
            lock_namespace: "giantswarm".into(),
            registry: "gsoci.azurecr.io".into(),
            service_cidr: DEFAULT_SERVICE_CIDR.into(),
            buckets: BucketSettings::default(),
            api_allowlist: Default::default(),
            node_extras: Default::default(),
            endpoints_refresh: Duration::from_secs(900),
            stack_listing_ttl: Duration::from_secs(600),
            capi_discovery_ttl: Duration::from_secs(60),
            stack_busy_ttl: Duration::from_secs(5),
            poll: Duration::from_secs(10),
            drainer_poll: Duration::from_secs(120),
            drainer_active_poll: Duration::from_secs(2),
            drain_timeout: Duration::from_secs(3600),
            template_body_limit: aws_stacks::cfn::MAX_TEMPLATE_BODY_BYTES,
            certificates_namespace: None,
            credential_namespaces: vec!["giantswarm".into()],
            alike_instances: AlikeInstances::default(),
            unhealthy: UnhealthySettings::default(),
            max_rolling_clusters: 0,
            slot_namespace: "giantswarm".into(),
            drift: DriftSettings::default(),
        }
    }
}

/// The Service CIDR of workload clusters unless `--service-cidr` says otherwise (the original's
/// chart default).
pub const DEFAULT_SERVICE_CIDR: &str = "172.31.0.0/16";

/// `--service-cidr`: an IPv4 CIDR of /24 or wider, so that its `.1` (the API server's Service)
/// and its `.10` (the cluster DNS) exist.
pub fn parse_service_cidr(value: &str) -> Result<String, String> {
    match value.parse::<aws_stacks::ipam::Ipv4Net>() {
        Ok(net) if net.prefix() <= 24 => Ok(net.to_string()),
        Ok(net) => {
            Err(format!("--service-cidr {net} is narrower than /24; give a /24 or wider range such as 172.31.0.0/16"))
        }
        Err(e) => Err(format!("--service-cidr {value:?} is no IPv4 CIDR ({e}); give one such as 172.31.0.0/16")),
    }
}

/// One CIDR of `--public-api-allowlist-cidrs` or `--private-api-allowlist-cidrs`: an IPv4
/// network address with its prefix length (a security group rule takes nothing else).
pub fn parse_allowlist_cidr(value: &str) -> Result<String, String> {
    let value = value.trim();
    value.parse::<aws_stacks::ipam::Ipv4Net>().map(|net| net.to_string()).map_err(|e| {
        format!("{value:?} is no IPv4 CIDR ({e}); give network addresses with a prefix length, comma-separated, such as 203.0.113.0/24,198.51.100.7/32")
    })
}

/// The daemon's checks of its flags beyond what each flag's parser checks: a Docker Hub token
/// that is no `<user>:<access token>` pair (named without its value), and a CIDR list given
/// without its `--*-api-allowlist-enabled=true`, where the operator would leave the API open
/// while the list says it is narrowed.
pub fn check_args(args: &DaemonArgs) -> Result<(), String> {
    args.dockerhub_token.validate().map_err(|e| format!("--dockerhub-token: {e}"))?;
    for (flag, rate) in [
        ("aws-read-requests-per-second", args.aws_read_requests_per_second),
        ("aws-write-requests-per-second", args.aws_write_requests_per_second),
    ] {
        if !rate.is_finite() || rate < 0.0 {
            return Err(format!("--{flag} {rate}: give a number of requests per second, or 0 for no limit"));
        }
    }
    for (side, enabled, cidrs) in [
        ("public", args.public_api_allowlist_enabled, &args.public_api_allowlist_cidrs),
        ("private", args.private_api_allowlist_enabled, &args.private_api_allowlist_cidrs),
    ] {
        if !enabled && !cidrs.is_empty() {
            return Err(format!(
                "--{side}-api-allowlist-cidrs {} is set but the {side} allowlist is off: add --{side}-api-allowlist-enabled=true, or drop the CIDRs",
                cidrs.join(",")
            ));
        }
    }
    Ok(())
}

/// AMIs by Flatcar version and region, from the mounted `ami.json`
/// (`{"<flatcarVersion>": {"<region>": "ami-…"}}`, reference §7.5).
///
/// The file is a ConfigMap mounted into the pod, which Kubernetes updates in place when the
/// ConfigMap changes: [`AmiMap::watch`] reloads it while the operator runs. Clones share the
/// content, so every controller sees a reload at once.
#[derive(Clone, Debug, Default)]
pub struct AmiMap(Arc<parking_lot::RwLock<AmiTable>>);

type AmiTable = BTreeMap<String, BTreeMap<String, String>>;

/// A missing AMI.
#[derive(Debug, thiserror::Error)]
pub enum AmiError {
    /// The file could not be read or parsed.
    #[error("AMI file {path}: {message}")]
    File {
        /// The path.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// No entry for the version and region.
    #[error(
        "no AMI for Flatcar {version} in {region}: add it to the AMI file, or use a Release whose containerlinux version has one"
    )]
    Missing {
        /// The Flatcar version.
        version: String,
        /// The region.
        region: String,
    },
}

impl operatorkit::ErrorKind for AmiError {
    fn kind(&self) -> std::borrow::Cow<'static, str> {
        std::borrow::Cow::Borrowed("AmiNotFound")
    }
    fn is_retryable(&self) -> bool {
        false
    }
}

impl AmiMap {
    /// Parse the JSON document.
    pub fn from_json(json: &str) -> Result<Self, AmiError> {
        serde_json::from_str(json)
            .map(|table| AmiMap(Arc::new(parking_lot::RwLock::new(table))))
            .map_err(|e| AmiError::File { path: "<inline>".into(), message: e.to_string() })
    }

    /// Read the mounted file.
    pub fn load(path: &Path) -> Result<Self, AmiError> {
        Ok(AmiMap(Arc::new(parking_lot::RwLock::new(read_table(path)?))))
    }

    /// The AMI of `version` in `region`.
    pub fn lookup(&self, version: &str, region: &str) -> Result<String, AmiError> {
        self.0
            .read()
            .get(version)
            .and_then(|r| r.get(region))
            .cloned()
            .ok_or_else(|| AmiError::Missing { version: version.into(), region: region.into() })
    }

    /// Read `path` again; replace the content if it parses and differs. Returns whether it
    /// changed. An unreadable or invalid file leaves the content as it was.
    pub fn reload(&self, path: &Path) -> Result<bool, AmiError> {
        let table = read_table(path)?;
        let mut current = self.0.write();
        if *current == table {
            return Ok(false);
        }
        *current = table;
        Ok(true)
    }

    /// Reload from `path` every `every` until `shutdown`: a changed file is used from the next
    /// reconcile on (logged at info); a broken one is logged once as a warning and the last good
    /// content kept. Polling rather than file events, because a mounted ConfigMap changes by an
    /// atomic swap of a symlinked directory, which file watches on the file itself miss.
    pub async fn watch(self, path: std::path::PathBuf, every: Duration, shutdown: tokio_util::sync::CancellationToken) {
        let mut last_error: Option<String> = None;
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(every) => {}
            }
            match self.reload(&path) {
                Ok(true) => {
                    last_error = None;
                    tracing::info!(path = %path.display(), "the AMI file changed; using its new content");
                }
                Ok(false) => last_error = None,
                Err(e) => {
                    let message = e.to_string();
                    if last_error.as_ref() != Some(&message) {
                        tracing::warn!(error = %message, "cannot reload the AMI file; keeping its last good content");
                        last_error = Some(message);
                    }
                }
            }
        }
    }
}

fn read_table(path: &Path) -> Result<AmiTable, AmiError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| AmiError::File { path: path.display().to_string(), message: e.to_string() })?;
    serde_json::from_str(&text).map_err(|e| AmiError::File { path: path.display().to_string(), message: e.to_string() })
}

#[cfg(test)]
mod tests {

    /// `aws-operator daemon` with `flags` besides the required ones.
    fn daemon_args(flags: &[&str]) -> Result<DaemonArgs, clap::Error> {
        #[derive(clap::Parser, Debug)]
        struct Cli {
            #[command(flatten)]
            args: DaemonArgs,
        }
        use clap::Parser as _;
        let required = ["aws-operator", "--installation", "gauss", "--ami-file", "/etc/aws-operator/ami.json"];
        Cli::try_parse_from(required.iter().chain(flags)).map(|c| c.args)
    }

    #[test]
    fn the_installations_node_additions_and_bucket_settings_come_from_the_flags() {
        let config = OperatorConfig::from_args(&daemon_args(&[]).expect("defaults"));
        assert_eq!(config.node_extras, ignition::extras::NodeExtras::default(), "nothing by default");
        assert_eq!(config.buckets, BucketSettings { tagging: true, access_log_expiration_days: 365 });
        let args = daemon_args(&[
            "--ssh-users",
            "alice:ssh-ed25519 AAAAa alice,bob:ssh-rsa AAAAb bob",
            "--sso-public-key",
            "ssh-ed25519 AAAAsso sso-ca",
            "--registry-mirrors",
            "https://mirror-a.example.com,https://mirror-b.example.com",
            "--s3-bucket-tagging=false",
            "--access-log-expiration-days",
            "30",
        ])
        .expect("valid flags");
        let config = OperatorConfig::from_args(&args);
        let names: Vec<&str> = config.node_extras.ssh_users.iter().map(|u| u.name.as_str()).collect();
        assert_eq!(names, ["alice", "bob"]);
        assert_eq!(config.node_extras.sso_public_key, "ssh-ed25519 AAAAsso sso-ca");
        assert_eq!(
            config.node_extras.registry_mirrors,
            ["https://mirror-a.example.com", "https://mirror-b.example.com"]
        );
        assert_eq!(config.buckets, BucketSettings { tagging: false, access_log_expiration_days: 30 });
        // A malformed user list stops the daemon at its flags, naming the entry and the fix.
        let err = daemon_args(&["--ssh-users", "alice"]).expect_err("no key").to_string();
        assert!(err.contains("alice") && err.contains("name:public-key"), "{err}");
        let err = daemon_args(&["--access-log-expiration-days", "0"]).expect_err("no expiry").to_string();
        assert!(err.contains("access-log-expiration-days"), "{err}");
    }

    #[test]
    fn the_capi_discovery_period_comes_from_its_flag() {
        let config = OperatorConfig::from_args(&daemon_args(&[]).expect("defaults"));
        assert_eq!(config.capi_discovery_ttl, Duration::from_secs(60));
        assert_eq!(config.capi_discovery_ttl, OperatorConfig::default().capi_discovery_ttl);
        let config = OperatorConfig::from_args(&daemon_args(&["--capi-discovery-seconds", "5"]).expect("valid"));
        assert_eq!(config.capi_discovery_ttl, Duration::from_secs(5));
        // Zero would ask the API server on every read: at least a second.
        let config = OperatorConfig::from_args(&daemon_args(&["--capi-discovery-seconds", "0"]).expect("valid"));
        assert_eq!(config.capi_discovery_ttl, Duration::from_secs(1));
    }

    #[test]
    fn the_pause_image_and_the_docker_hub_token_come_from_the_flags_and_a_bad_token_is_not_repeated() {
        // `alice:dckr_pat_secret`.
        let token = "YWxpY2U6ZGNrcl9wYXRfc2VjcmV0";
        let args =
            daemon_args(&["--pause-image", "gsoci.azurecr.io/giantswarm/pause:3.10", "--dockerhub-token", token])
                .expect("valid flags");
        assert_eq!(check_args(&args), Ok(()));
        let config = OperatorConfig::from_args(&args);
        assert_eq!(config.node_extras.pause_image, "gsoci.azurecr.io/giantswarm/pause:3.10");
        assert_eq!(config.node_extras.dockerhub_token, ignition::extras::DockerhubToken::parse(token).expect("valid"));
        assert!(!format!("{args:?}{config:?}").contains(token), "Debug shows the token");
        // A token that is no user:token pair stops the daemon, naming the flag, not the value.
        let bad = "c2VjcmV0LXdpdGhvdXQtdXNlcg";
        let args = daemon_args(&["--dockerhub-token", bad]).expect("flags take any value");
        let err = check_args(&args).expect_err("not a pair");
        assert!(err.starts_with("--dockerhub-token: ") && !err.contains(bad), "{err}");
    }

    #[test]
    fn the_api_allowlists_come_from_the_flags_and_a_bad_cidr_stops_the_daemon_naming_the_flag() {
        let config = OperatorConfig::from_args(&daemon_args(&[]).expect("defaults"));
        assert_eq!(config.api_allowlist, aws_stacks::stacks::tccp::ApiWhitelist::default(), "open by default");
        let args = daemon_args(&[
            "--public-api-allowlist-enabled=true",
            "--public-api-allowlist-cidrs",
            "203.0.113.0/24, 198.51.100.7/32",
            "--private-api-allowlist-enabled=true",
        ])
        .expect("valid flags");
        assert_eq!(check_args(&args), Ok(()));
        let config = OperatorConfig::from_args(&args);
        assert_eq!(
            config.api_allowlist,
            aws_stacks::stacks::tccp::ApiWhitelist {
                public: Some(vec!["203.0.113.0/24".into(), "198.51.100.7/32".into()]),
                // Enabled without CIDRs: the management VPC and the cluster's own ranges only.
                private: Some(Vec::new()),
            }
        );
        for bad in ["203.0.113.0/33", "example.com", "203.0.113.5/24", "2001:db8::/32"] {
            let err = daemon_args(&["--public-api-allowlist-enabled=true", "--public-api-allowlist-cidrs", bad])
                .expect_err(bad)
                .to_string();
            assert!(err.contains("--public-api-allowlist-cidrs") && err.contains("such as 203.0.113.0/24"), "{err}");
        }
        let err = daemon_args(&["--private-api-allowlist-cidrs", "10.0.0.0/300"]).expect_err("bad").to_string();
        assert!(err.contains("--private-api-allowlist-cidrs"), "{err}");
        // A list without its switch would leave the API open while saying otherwise.
        let args = daemon_args(&["--private-api-allowlist-cidrs", "192.0.2.0/24"]).expect("parses");
        let err = check_args(&args).expect_err("off");
        assert!(err.contains("--private-api-allowlist-enabled=true"), "{err}");
    }

    #[test]
    fn the_service_cidr_must_be_an_ipv4_range_of_a_24_or_wider() {
        assert_eq!(parse_service_cidr("172.31.0.0/16"), Ok("172.31.0.0/16".to_string()));
        assert_eq!(parse_service_cidr("10.96.0.0/24"), Ok("10.96.0.0/24".to_string()));
        let err = parse_service_cidr("10.96.0.0/25").unwrap_err();
        assert!(err.contains("narrower than /24"), "{err}");
        let err = parse_service_cidr("172.31.0.1/16").unwrap_err();
        assert!(err.contains("no IPv4 CIDR"), "{err}");
        let err = parse_service_cidr("fd00::/108").unwrap_err();
        assert!(err.contains("--service-cidr"), "{err}");
    }

    use super::*;

    #[tokio::test]
    async fn the_ami_file_is_reloaded_while_running_and_a_broken_one_is_ignored() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("ami.json");
        let write = |json: &str| {
            // As Kubernetes updates a mounted ConfigMap: a new file swapped in atomically.
            let tmp = dir.path().join("ami.json.tmp");
            std::fs::write(&tmp, json).expect("writable");
            std::fs::rename(&tmp, &path).expect("renamable");
        };
        write(r#"{"4230.2.4": {"eu-central-1": "ami-0000000000000000a"}}"#);
        let amis = AmiMap::load(&path).expect("a valid file");
        let shutdown = tokio_util::sync::CancellationToken::new();
        let watching = tokio::spawn(amis.clone().watch(path.clone(), Duration::from_millis(20), shutdown.clone()));
        assert!(matches!(amis.lookup("4230.2.5", "eu-central-1"), Err(AmiError::Missing { .. })));

        write(r#"{"4230.2.5": {"eu-central-1": "ami-0000000000000000b"}}"#);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while amis.lookup("4230.2.5", "eu-central-1").is_err() {
            assert!(tokio::time::Instant::now() < deadline, "the new AMI file was never read");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(amis.lookup("4230.2.4", "eu-central-1").is_err(), "the old content is replaced");

        write("{ not json");
        assert!(amis.reload(&path).is_err());
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(amis.lookup("4230.2.5", "eu-central-1").ok().as_deref(), Some("ami-0000000000000000b"));
        shutdown.cancel();
        watching.await.expect("the watch stops on shutdown");
    }
}

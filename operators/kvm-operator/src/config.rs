//! The operator's settings: the flags of `kvm-operator daemon` ([`DaemonArgs`], named as
//! aws-operator's where they mean the same), the flags that shape what the controllers build
//! ([`ClusterArgs`], shared by `daemon` and `render`, so that `render` prints what the daemon
//! would write) and the settings the builders read ([`OperatorConfig`]).

use std::net::SocketAddr;

use kvm_objects::access::{ClusterRoles, OperatorAccess};
use kvm_objects::cluster::Settings;
use kvm_objects::deployment::NodePodImages;
use kvm_objects::ignition::{NodeConfigSettings, Oidc, Proxy};

/// The cluster controller's name: its finalizer's suffix and the reporter of its events. The
/// controllers' names are settings, read by the context and the node controllers' helpers,
/// which publish events in their names.
pub const CLUSTER_CONTROLLER: &str = "kvm-operator-cluster-controller";
/// The drainer's name.
pub const DRAINER_CONTROLLER: &str = "kvm-operator-drainer-controller";
/// The deleter's name.
pub const DELETER_CONTROLLER: &str = "kvm-operator-deleter-controller";
/// The unhealthy-node terminator's name.
pub const TERMINATOR_CONTROLLER: &str = "kvm-operator-unhealthy-nodes-terminator";

/// The flags of `kvm-operator daemon`.
#[derive(clap::Args, Debug)]
pub struct DaemonArgs {
    /// Address of /metrics, /healthz and /readyz.
    #[arg(long, env = "KVM_OPERATOR_LISTEN", default_value = "0.0.0.0:8000")]
    pub listen: SocketAddr,
    /// Parallel reconciles per controller.
    #[arg(long, default_value_t = 8)]
    pub concurrency: u16,
    /// Resync period in seconds.
    #[arg(long, default_value_t = 300)]
    pub resync_seconds: u64,
    /// Requeue interval while a cluster converges (pods starting, teardown), in seconds.
    #[arg(long, default_value_t = 10)]
    pub poll_seconds: u64,
    /// Namespace of the certificate Secrets of every cluster (default: each cluster's own).
    #[arg(long)]
    pub certificates_namespace: Option<String>,
    /// Elect a leader among the replicas of this operator version; only the leader writes.
    #[arg(long, env = "KVM_OPERATOR_LEADER_ELECTION", default_value_t = true, action = clap::ArgAction::Set)]
    pub leader_election: bool,
    /// Namespace of the leader election Lease.
    #[arg(long, env = "POD_NAMESPACE", default_value = "giantswarm")]
    pub leader_election_namespace: String,
    /// Name of the leader election Lease (default: `kvm-operator-<version>`, one per version).
    #[arg(long)]
    pub leader_election_name: Option<String>,
    /// Share the clusters among the replicas instead of leaving them to the leader: each
    /// replica holds its own shard Lease (named after its pod, `POD_NAME`) and reconciles the
    /// clusters assigned to it; the leader assigns them. Implies leader election.
    #[arg(long, env = "KVM_OPERATOR_SHARDING", default_value_t = false, action = clap::ArgAction::Set)]
    pub sharding: bool,
    /// How clusters are assigned to shards: `labels` (a shard label on each object, any API
    /// server) or `namespace-ranges` (hash ranges of the namespace in the watches' shardSelector;
    /// Kubernetes 1.36+ with `ShardedListAndWatch`, one cluster per namespace).
    #[arg(long, default_value_t = operatorkit::sharding::ShardingMode::Labels)]
    pub sharding_mode: operatorkit::sharding::ShardingMode,
    /// At most this many clusters replace nodes (a rolling update, a max-age replacement) at
    /// once, across every replica and version of the operator; 0: no limit. Slots are Leases in
    /// the operator's namespace.
    #[arg(long, default_value_t = 0)]
    pub max_rolling_clusters: u32,
    /// How long a node drain may take before it ends with `Timeout`, in seconds, for
    /// DrainerConfigs without the `drainer.giantswarm.io/timeout` annotation.
    #[arg(long, default_value_t = 3600)]
    pub drain_timeout_seconds: u64,
    /// The flags of the workload-cluster node controllers.
    #[command(flatten)]
    pub nodes: NodeArgs,
    /// The flags that shape the clusters' objects.
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

/// The flags of the controllers that act on workload-cluster nodes: the deleter, the node
/// watcher and the unhealthy-node terminator.
#[derive(clap::Args, Debug, Clone)]
pub struct NodeArgs {
    /// Replace the node pods of workload-cluster nodes that stay NotReady, in every cluster.
    /// Without it, only in clusters whose KVMConfig carries the annotation
    /// `node.giantswarm.io/terminate-unhealthy`.
    #[arg(long, env = "KVM_OPERATOR_TERMINATE_UNHEALTHY_NODES", default_value_t = false, action = clap::ArgAction::Set)]
    pub terminate_unhealthy_nodes: bool,
    /// How long a workload-cluster node must be NotReady before its node pod is replaced, in
    /// seconds.
    #[arg(long, default_value_t = 900)]
    pub unhealthy_node_threshold_seconds: u64,
    /// How long after replacing an unhealthy node no other node of the cluster is replaced, in
    /// seconds.
    #[arg(long, default_value_t = 600)]
    pub unhealthy_node_cooldown_seconds: u64,
    /// How often the deleter looks for workload-cluster nodes left over from gone node pods, in
    /// seconds.
    #[arg(long, default_value_t = 120)]
    pub deleter_resync_seconds: u64,
}

impl Default for NodeArgs {
    fn default() -> Self {
        Self {
            terminate_unhealthy_nodes: false,
            unhealthy_node_threshold_seconds: 900,
            unhealthy_node_cooldown_seconds: 600,
            deleter_resync_seconds: 120,
        }
    }
}

/// The settings of the workload-cluster node controllers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSettings {
    /// Replace unhealthy nodes in every cluster, not only the annotated ones.
    pub terminate_unhealthy: bool,
    /// The unhealthy-node thresholds.
    pub limits: node_lifecycle::unhealthy::Limits,
    /// The deleter's resync period.
    pub deleter_resync: std::time::Duration,
    /// How often a node watcher compares every node pod with its node even without events.
    pub watcher_resync: std::time::Duration,
    /// How soon a node watcher whose workload cluster cannot be reached tries again.
    pub watcher_retry: std::time::Duration,
}

impl NodeSettings {
    /// The settings of `args`.
    pub fn new(args: &NodeArgs) -> Self {
        use std::time::Duration;
        Self {
            terminate_unhealthy: args.terminate_unhealthy_nodes,
            limits: node_lifecycle::unhealthy::Limits::from_secs(
                args.unhealthy_node_threshold_seconds,
                args.unhealthy_node_cooldown_seconds,
            ),
            deleter_resync: Duration::from_secs(args.deleter_resync_seconds.max(1)),
            watcher_resync: Duration::from_secs(300),
            watcher_retry: Duration::from_secs(10),
        }
    }
}

impl Default for NodeSettings {
    fn default() -> Self {
        Self::new(&NodeArgs::default())
    }
}

/// The flags that shape a cluster's objects: the VMs' DNS and NTP servers, the ClusterRoles the
/// node pods are bound to, and what goes into every node config.
#[derive(clap::Args, Debug, Clone)]
pub struct ClusterArgs {
    /// DNS servers of the VMs (`DNS_SERVERS` of the node pods); at least one, comma-separated.
    /// Required by the daemon; `render` uses a placeholder without it.
    #[arg(long, env = "KVM_OPERATOR_DNS_SERVERS", value_delimiter = ',')]
    pub dns_servers: Vec<String>,
    /// NTP servers of the VMs (`NTP_SERVERS`), comma-separated.
    #[arg(long, env = "KVM_OPERATOR_NTP_SERVERS", value_delimiter = ',')]
    pub ntp_servers: Vec<String>,
    /// The ClusterRole that binding `<cluster id>` gives the node pods' ServiceAccount.
    #[arg(long, default_value = "kvm-operator")]
    pub cluster_role_general: String,
    /// The pod-security ClusterRole that binding `<cluster id>-psp` gives it.
    #[arg(long, default_value = "kvm-operator-psp")]
    pub cluster_role_psp: String,
    /// The ClusterRole of the operator's own rights in each cluster's namespace (creating and
    /// removing its Deployments, Pods, Services, claims, Ingresses, ServiceAccount and
    /// Endpoints), bound there by a RoleBinding the operator writes after the namespace. Empty:
    /// no RoleBinding (the operator holds those rights some other way). Needs
    /// `--service-account`.
    #[arg(long, default_value = "", requires = "service_account")]
    pub workload_cluster_role: String,
    /// The operator's own ServiceAccount, `<namespace>/<name>`: the subject of the RoleBinding
    /// of `--workload-cluster-role`.
    #[arg(long, default_value = "")]
    pub service_account: String,
    /// `HTTP_PROXY` of the nodes' docker, containerd and kubelet.
    #[arg(long, default_value = "")]
    pub http_proxy: String,
    /// `HTTPS_PROXY` of the nodes' docker, containerd and kubelet.
    #[arg(long, default_value = "")]
    pub https_proxy: String,
    /// `NO_PROXY` entries, comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub no_proxy: Vec<String>,
    /// Docker registry mirrors of the nodes, comma-separated.
    #[arg(long, value_delimiter = ',')]
    pub registry_mirrors: Vec<String>,
    /// The SSO CA's public key, trusted for SSH user certificates on the nodes.
    #[arg(long, default_value = "")]
    pub sso_public_key: String,
    /// The pod sandbox ("pause") image of the nodes: containerd's `sandbox_image` (kubelet
    /// runs pods through containerd); empty: containerd's own.
    #[arg(long, default_value = "")]
    pub pause_image: String,
    /// The Docker Hub credential of the nodes, for image pulls from `docker.io`: the base64 of
    /// `<user>:<access token>` (the original's `service.registry.dockerhubToken`), written to
    /// containerd's and Docker's configuration on the node. A secret: pass it by the
    /// environment variable, from a Secret. `render` prints a placeholder in its place.
    #[arg(
        long,
        env = "KVM_OPERATOR_DOCKERHUB_TOKEN",
        default_value = "",
        hide_env_values = true,
        hide_default_value = true
    )]
    pub dockerhub_token: ignition::extras::DockerhubToken,
    /// The node pods' VM container (k8s-kvm) image.
    #[arg(long, default_value = kvm_objects::deployment::K8S_KVM_IMAGE)]
    pub k8s_kvm_image: String,
    /// The node pods' endpoint-updater sidecar image.
    #[arg(long, default_value = kvm_objects::deployment::ENDPOINT_UPDATER_IMAGE)]
    pub endpoint_updater_image: String,
    /// The node pods' health-check sidecar image.
    #[arg(long, default_value = kvm_objects::deployment::HEALTH_IMAGE)]
    pub health_image: String,
    /// The node pods' shutdown-deferrer sidecar image.
    #[arg(long, default_value = kvm_objects::deployment::SHUTDOWN_DEFERRER_IMAGE)]
    pub shutdown_deferrer_image: String,
    /// Image registry of the node images (the Kubernetes components and etcd).
    #[arg(long, default_value = kvm_objects::ignition::DEFAULT_REGISTRY)]
    pub registry: String,
    /// The workload clusters' API servers trust this OpenID Connect issuer (`--oidc-issuer-url`);
    /// none when not set.
    #[arg(long, requires = "oidc_client_id")]
    pub oidc_issuer_url: Option<String>,
    /// The OpenID Connect client ID (`--oidc-client-id`); required with an issuer.
    #[arg(long, requires = "oidc_issuer_url")]
    pub oidc_client_id: Option<String>,
    /// The claim that names the user (`--oidc-username-claim`); the API server's default when
    /// empty.
    #[arg(long, default_value = "")]
    pub oidc_username_claim: String,
    /// The claim that lists the user's groups (`--oidc-groups-claim`); none when empty.
    #[arg(long, default_value = "")]
    pub oidc_groups_claim: String,
}

/// The operator's settings, as the builders read them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperatorConfig {
    /// This operator's version: it reconciles the KVMConfigs whose Release names this version of
    /// the `kvm-operator` component.
    pub version: String,
    /// The node pods' settings.
    pub settings: Settings,
    /// What goes into every node config.
    pub node_config: NodeConfigSettings,
    /// The ClusterRoles of the two bindings.
    pub roles: ClusterRoles,
    /// The operator's RoleBinding in each cluster's namespace, if any.
    pub access: Option<OperatorAccess>,
    /// How many clusters may replace nodes at once.
    pub rollout: RolloutLimits,
}

/// The management cluster's rollout limit: at most `max_rolling_clusters` clusters replace
/// nodes at once, across every replica and version (`--max-rolling-clusters`; 0: no limit),
/// counted in rollout-slot Leases in `slot_namespace` (the operator's own).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RolloutLimits {
    /// At most this many clusters at once; 0: no limit.
    pub max_rolling_clusters: u32,
    /// The namespace of the slot Leases.
    pub slot_namespace: String,
}

impl Default for RolloutLimits {
    fn default() -> Self {
        Self { max_rolling_clusters: 0, slot_namespace: "giantswarm".into() }
    }
}

/// The DNS server `render` puts into the node pods when `--dns-servers` is not given: an
/// address of TEST-NET-1 (RFC 5737), which no network routes.
pub const PLACEHOLDER_DNS_SERVER: &str = "192.0.2.53";

impl ClusterArgs {
    /// The daemon's check: the settings only an install knows are given.
    pub fn require_install_settings(&self) -> Result<(), String> {
        if self.dns_servers.is_empty() {
            return Err("--dns-servers is required: the DNS servers of the VMs, comma-separated (chart value operator.dnsServers, or KVM_OPERATOR_DNS_SERVERS)".into());
        }
        self.dockerhub_token.validate().map_err(|e| format!("--dockerhub-token: {e}"))?;
        Ok(())
    }

    /// For `render`: these flags with placeholders for the install settings not given and for the
    /// secret ones (the Docker Hub token), and the
    /// placeholders used, as `--flag=value`.
    pub fn with_placeholders(&self) -> (ClusterArgs, Vec<String>) {
        let mut args = self.clone();
        let mut used = Vec::new();
        if args.dns_servers.is_empty() {
            args.dns_servers = vec![PLACEHOLDER_DNS_SERVER.to_string()];
            used.push(format!("--dns-servers={PLACEHOLDER_DNS_SERVER}"));
        }
        // The token is a secret: never printed, a placeholder in its place.
        if !args.dockerhub_token.is_empty() {
            args.dockerhub_token = ignition::extras::DockerhubToken::placeholder();
            used.push("--dockerhub-token=<placeholder>".to_string());
        }
        (args, used)
    }

    /// The operator's RoleBinding in each cluster's namespace, from `--workload-cluster-role`
    /// and `--service-account`.
    pub fn access(&self) -> Result<Option<OperatorAccess>, String> {
        if self.workload_cluster_role.is_empty() {
            return Ok(None);
        }
        OperatorAccess::new(&self.workload_cluster_role, &self.service_account).map(Some)
    }
}

impl OperatorConfig {
    /// The settings of `args` for operator `version` (the operator's RoleBinding aside:
    /// [`ClusterArgs::access`]).
    pub fn new(version: &str, args: &ClusterArgs) -> Self {
        let list = |values: &[String]| values.iter().map(|v| v.trim().to_string()).filter(|v| !v.is_empty()).collect();
        Self {
            version: version.to_string(),
            settings: Settings {
                operator_version: version.to_string(),
                dns_servers: list(&args.dns_servers),
                ntp_servers: list(&args.ntp_servers),
                images: NodePodImages {
                    endpoint_updater: args.endpoint_updater_image.clone(),
                    k8s_kvm: args.k8s_kvm_image.clone(),
                    health: args.health_image.clone(),
                    shutdown_deferrer: args.shutdown_deferrer_image.clone(),
                },
            },
            node_config: NodeConfigSettings {
                proxy: Proxy {
                    http: args.http_proxy.clone(),
                    https: args.https_proxy.clone(),
                    no_proxy: list(&args.no_proxy),
                },
                registry_mirrors: list(&args.registry_mirrors),
                sso_public_key: args.sso_public_key.clone(),
                pause_image: args.pause_image.trim().to_string(),
                dockerhub_token: args.dockerhub_token.clone(),
                registry: args.registry.clone(),
                oidc: args.oidc_issuer_url.as_ref().zip(args.oidc_client_id.as_ref()).map(|(issuer, client)| Oidc {
                    issuer_url: issuer.clone(),
                    client_id: client.clone(),
                    username_claim: args.oidc_username_claim.clone(),
                    groups_claim: args.oidc_groups_claim.clone(),
                }),
            },
            roles: ClusterRoles { general: args.cluster_role_general.clone(), psp: args.cluster_role_psp.clone() },
            access: None,
            rollout: RolloutLimits::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cluster flags of `flags`.
    fn cluster_args(flags: &[&str]) -> ClusterArgs {
        #[derive(clap::Parser, Debug)]
        struct Cli {
            #[command(flatten)]
            args: ClusterArgs,
        }
        use clap::Parser as _;
        Cli::try_parse_from(["kvm-operator", "--dns-servers", "10.0.0.53"].iter().chain(flags)).expect("flags").args
    }

    #[test]
    fn the_pause_image_and_the_docker_hub_token_reach_the_node_configs_and_a_bad_token_is_not_repeated() {
        // `alice:dckr_pat_secret`.
        let token = "YWxpY2U6ZGNrcl9wYXRfc2VjcmV0";
        let args = cluster_args(&["--pause-image", "registry.example/pause:3.10", "--dockerhub-token", token]);
        assert_eq!(args.require_install_settings(), Ok(()));
        let config = OperatorConfig::new("1.0.0", &args);
        assert_eq!(config.node_config.pause_image, "registry.example/pause:3.10");
        assert_eq!(config.node_config.dockerhub_token, ignition::extras::DockerhubToken::parse(token).expect("valid"));
        assert!(!format!("{args:?}{config:?}").contains(token), "Debug shows the token");
        // `render` never carries the real token.
        let (rendered, placeholders) = args.with_placeholders();
        assert_eq!(rendered.dockerhub_token, ignition::extras::DockerhubToken::placeholder());
        assert_eq!(placeholders, ["--dockerhub-token=<placeholder>"]);
        let bad = "c2VjcmV0LXdpdGhvdXQtdXNlcg";
        let err = cluster_args(&["--dockerhub-token", bad]).require_install_settings().expect_err("not a pair");
        assert!(err.starts_with("--dockerhub-token: ") && !err.contains(bad), "{err}");
    }
}

//! From an [`AWSConfig`] to the inputs of its stacks and node configs: what the legacy resource
//! set renders, as pure functions. What the object does not say (the installation, the accounts,
//! the Release's versions, the KMS key, the peering role) comes in [`Installation`].
//!
//! Each function takes an object that passed [`AWSConfig::validate`] and returns its problems
//! otherwise, so a caller cannot render from bad input.

use std::collections::BTreeMap;

use apis::aws_config::{self, AWSConfig};
use apis::validation::FieldError;

use super::guest_main::{self, IdleTimeouts, IngressPorts, NodeShape, WORKER_GROUP, Workers};
use super::host_setup;
use super::worker_config_key;
use crate::ignition::{InitialClusterState, NodeConfigInput, NodeSecret, Role, etcd_initial_cluster, etcd_name};
use crate::names;
use crate::stacks::{Common, tccp};

/// The ingress controller's node ports when `spec.cluster.kubernetes.ingressController` leaves
/// them 0 (the original's).
pub const DEFAULT_INGRESS_PORTS: IngressPorts = IngressPorts { insecure: 30010, secure: 30011 };

/// What the operator knows beyond the object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installation {
    /// The installation name, for the `giantswarm.io/installation` tag.
    pub installation: String,
    /// The operator version rendering (outputs and node config keys).
    pub operator_version: String,
    /// The cluster's Release version.
    pub release_version: String,
    /// The Release's Kubernetes version.
    pub kubernetes_version: String,
    /// The Release's etcd version.
    pub etcd_version: String,
    /// Whether hosted zones and records are managed.
    pub route53_enabled: bool,
    /// The cluster's AWS account (the credential Secret's).
    pub tenant_account_id: String,
    /// The management account.
    pub management_account_id: String,
    /// The management VPC's CIDR block.
    pub management_vpc_cidr: String,
    /// ARN of the `host-setup` peering role (its `PeerRoleARN` output).
    pub peer_role_arn: String,
    /// ARN of the cluster's KMS key.
    pub kms_key_arn: String,
    /// IMDS `HttpTokens` of the nodes ([`crate::stacks::imds_http_tokens`]).
    pub imds_http_tokens: String,
    /// The registry images are pulled from.
    pub registry: String,
    /// What the installation adds to every node; the cluster's SSH users are added to it.
    pub extras: ignition::extras::NodeExtras,
}

/// The zone under which the cluster's zone `<id>.k8s.<zone>` lives: `spec.aws.hostedZones.api.name`,
/// else what `spec.cluster.kubernetes.api.domain` (`api.<id>.k8s.<zone>`) says.
pub fn zone(config: &AWSConfig) -> String {
    let named = &config.spec.aws.hosted_zones.api.name;
    if !named.is_empty() {
        return named.trim_end_matches('.').to_owned();
    }
    let prefix = format!("api.{}.k8s.", config.cluster_id());
    config.spec.cluster.kubernetes.api.domain.strip_prefix(&prefix).unwrap_or_default().to_owned()
}

/// The inputs every stack shares.
pub fn common(config: &AWSConfig, inst: &Installation) -> Common {
    let region = config.spec.aws.region.clone();
    Common {
        cluster_id: config.cluster_id().to_owned(),
        cluster_uid: config.metadata.uid.clone().unwrap_or_default(),
        installation: inst.installation.clone(),
        organization: config.spec.cluster.customer.id.clone(),
        operator_version: inst.operator_version.clone(),
        release_version: inst.release_version.clone(),
        partition: names::partition(&region).to_owned(),
        region,
        base_domain: zone(config),
        route53_enabled: inst.route53_enabled,
        cloud_tags: BTreeMap::new(),
    }
}

/// The `host-setup` inputs.
pub fn host_setup_params(config: &AWSConfig, inst: &Installation) -> Result<host_setup::Params, Vec<FieldError>> {
    config.validate()?;
    Ok(host_setup::Params { common: common(config, inst), tenant_account_id: inst.tenant_account_id.clone() })
}

/// The worker group's bounds and size: `spec.cluster.scaling` when set (the cluster-autoscaler's
/// range), else the count of `spec.aws.workers`; the size now is the live group's, kept inside
/// the bounds, or the count for a new group.
pub fn worker_sizes(config: &AWSConfig, live_desired: Option<u32>) -> (u32, u32, u32) {
    let count = u32::try_from(config.spec.aws.workers.len()).unwrap_or(u32::MAX);
    let scaling = &config.spec.cluster.scaling;
    let min = if scaling.min > 0 { u32::try_from(scaling.min).unwrap_or(count) } else { count };
    let max = u32::try_from(scaling.max).unwrap_or(0).max(count).max(min);
    let desired = live_desired.unwrap_or(count).clamp(min, max);
    (min, max, desired)
}

/// The `guest-main` inputs; `live_desired` is the worker group's desired capacity now, if it
/// exists, so an update keeps the size the cluster-autoscaler chose.
pub fn guest_main_params(
    config: &AWSConfig,
    inst: &Installation,
    live_desired: Option<u32>,
) -> Result<guest_main::Params, Vec<FieldError>> {
    config.validate()?;
    let aws = &config.spec.aws;
    let id = config.cluster_id();
    let (min_size, max_size, desired) = worker_sizes(config, live_desired);
    let worker = &aws.workers[0];
    let ingress = &config.spec.cluster.kubernetes.ingress_controller;
    let port = |value: i64, default: u16| u16::try_from(value).ok().filter(|p| *p > 0).unwrap_or(default);
    let seconds = |component| u32::try_from(aws_config::idle_timeout(component)).unwrap_or(60);
    Ok(guest_main::Params {
        common: common(config, inst),
        vpc_cidr: config.vpc_cidr().1.to_owned(),
        zones: config
            .zones()
            .into_iter()
            .map(|z| tccp::TccpAz {
                name: z.name,
                private_cidr: z.private_cidr,
                public_cidr: z.public_cidr,
                aws_cni_cidr: None,
            })
            .collect(),
        control_plane: tccp::ControlPlaneVpc {
            account_id: inst.management_account_id.clone(),
            vpc_id: aws.vpc.peer_id.clone(),
            cidr: inst.management_vpc_cidr.clone(),
            peer_role_arn: inst.peer_role_arn.clone(),
        },
        access_logs: Some(names::access_log_bucket(&inst.tenant_account_id, id)),
        master: NodeShape {
            image_id: aws.masters[0].image_id.clone(),
            instance_type: aws.masters[0].instance_type.clone(),
        },
        workers: Workers {
            shape: NodeShape { image_id: worker.image_id.clone(), instance_type: worker.instance_type.clone() },
            docker_volume_gb: u32::try_from(aws_config::docker_volume_size_gb(worker)).unwrap_or(100),
            min_size,
            max_size,
            desired,
        },
        imds_http_tokens: inst.imds_http_tokens.clone(),
        bucket: names::bucket(&inst.tenant_account_id, id),
        kms_key_arn: inst.kms_key_arn.clone(),
        idle_timeouts: IdleTimeouts {
            api: seconds(&aws.api),
            etcd: seconds(&aws.etcd),
            ingress: seconds(&aws.ingress),
        },
        ingress_ports: IngressPorts {
            insecure: port(ingress.insecure_port, DEFAULT_INGRESS_PORTS.insecure),
            secure: port(ingress.secure_port, DEFAULT_INGRESS_PORTS.secure),
        },
    })
}

/// Which node a config is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LegacyNode {
    /// The master; `existing` once its etcd member has joined (any update after creation).
    Master {
        /// Whether the cluster's etcd exists already.
        existing: bool,
    },
    /// Every worker (one config for the group).
    Worker,
}

/// The S3 key of `node`'s config, the one its launch template's user data names.
pub fn config_key(config: &AWSConfig, inst: &Installation, node: LegacyNode) -> String {
    match node {
        LegacyNode::Master { .. } => names::master_config_key(&inst.operator_version, config.cluster_id(), 0),
        LegacyNode::Worker => worker_config_key(&inst.operator_version, config.cluster_id()),
    }
}

/// The node config input of `node`, with its secret files (see
/// [`secrets_for`](crate::ignition::secrets_for)): the cluster's networks, domains, labels,
/// kube-proxy setting and SSH users from `spec.cluster`.
pub fn node_config_input(
    config: &AWSConfig,
    inst: &Installation,
    node: LegacyNode,
    secrets: Vec<NodeSecret>,
) -> Result<NodeConfigInput, Vec<FieldError>> {
    config.validate()?;
    let cluster = &config.spec.cluster;
    let id = config.cluster_id();
    let zone = zone(config);
    let base = names::tenant_base_domain(id, &zone);
    let role = match node {
        LegacyNode::Master { existing } => Role::Master {
            id: 0,
            etcd_name: etcd_name(0),
            etcd_initial_cluster: etcd_initial_cluster(&base, 1),
            initial_cluster_state: if existing { InitialClusterState::Existing } else { InitialClusterState::New },
        },
        LegacyNode::Worker => Role::Worker { md_id: WORKER_GROUP.to_owned() },
    };
    let kubernetes = &cluster.kubernetes;
    let etcd_domain =
        if cluster.etcd.domain.is_empty() { names::etcd_host(id, &zone) } else { cluster.etcd.domain.clone() };
    let mut extras = inst.extras.clone();
    extras.ssh_users.extend(
        kubernetes
            .ssh
            .user_list
            .iter()
            .map(|u| ignition::extras::SshUser { name: u.name.clone(), public_key: u.public_key.clone() }),
    );
    Ok(NodeConfigInput {
        role,
        cluster_id: id.to_owned(),
        base_domain: base,
        api_domain: kubernetes.api.domain.clone(),
        etcd_domain,
        region: config.spec.aws.region.clone(),
        kubernetes_version: inst.kubernetes_version.clone(),
        etcd_version: inst.etcd_version.clone(),
        node_labels: aws_config::kubelet_labels(&kubernetes.kubelet.labels),
        service_cidr: kubernetes.api.cluster_ip_range.clone(),
        cluster_dns_ip: kubernetes.dns.ip.clone(),
        pod_cidr: format!("{}/{}", cluster.calico.subnet, cluster.calico.cidr),
        oidc: None,
        conntrack_max_per_core: u32::try_from(kubernetes.network_setup.kube_proxy.conntrack_max_per_core)
            .ok()
            .filter(|n| *n > 0),
        registry: inst.registry.clone(),
        tuning: Default::default(),
        extras,
        irsa: None,
        secrets,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The fixture of the apis crate: a legacy cluster as Giant Swarm's API wrote it.
    pub const FIXTURE: &str = include_str!("../../../../apis/tests/fixtures/awsconfig-p3x7d.yaml");

    pub fn fixture() -> AWSConfig {
        serde_saphyr::from_str(FIXTURE).unwrap_or_else(|e| panic!("fixture: {e}"))
    }

    pub fn installation() -> Installation {
        Installation {
            installation: "tyrell".into(),
            operator_version: "16.2.0".into(),
            release_version: "6.3.0".into(),
            kubernetes_version: "1.33.4".into(),
            etcd_version: "3.5.21".into(),
            route53_enabled: true,
            tenant_account_id: "210987654321".into(),
            management_account_id: "000111222333".into(),
            management_vpc_cidr: "10.0.0.0/16".into(),
            peer_role_arn: "arn:aws:iam::000111222333:role/p3x7d-vpc-peer-access".into(),
            kms_key_arn: "arn:aws:kms:eu-west-1:210987654321:key/5e6f7a8b".into(),
            imds_http_tokens: "required".into(),
            registry: "quay.io".into(),
            extras: Default::default(),
        }
    }

    #[test]
    fn the_fixture_renders_its_stacks_with_what_it_says() {
        let config = fixture();
        let p = guest_main_params(&config, &installation(), None).unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(p.common.cluster_id, "p3x7d");
        assert_eq!(p.common.organization, "initech");
        assert_eq!(p.common.tenant_domain(), "p3x7d.k8s.tyrell.eu-west-1.aws.gigantic.io");
        assert_eq!(p.vpc_cidr, "10.11.0.0/16");
        assert_eq!(p.zones.len(), 1);
        assert_eq!((p.zones[0].name.as_str(), p.zones[0].private_cidr.as_str()), ("eu-west-1b", "10.11.0.0/19"));
        assert_eq!(p.control_plane.vpc_id, "vpc-04d7e8f9a0b1c2d3e");
        assert_eq!(p.master.instance_type, "m4.xlarge");
        assert_eq!((p.workers.min_size, p.workers.max_size, p.workers.desired), (3, 3, 3));
        assert_eq!(p.workers.docker_volume_gb, 150);
        assert_eq!(p.idle_timeouts, IdleTimeouts { api: 120, etcd: 60, ingress: 60 });
        assert_eq!(p.bucket, "210987654321-g8s-p3x7d");

        let t = guest_main::render(&p).unwrap_or_else(|e| panic!("{e}"));
        let asg = &t.resources[guest_main::WORKER_ASG].properties;
        assert_eq!(asg["DesiredCapacity"], "3");
        assert_eq!(asg["AvailabilityZones"], serde_json::json!(["eu-west-1b"]));
        let lt = &t.resources[guest_main::WORKER_LAUNCH_TEMPLATE].properties["LaunchTemplateData"];
        assert_eq!(lt["InstanceType"], "m4.2xlarge");
        assert_eq!(lt["ImageId"], "ami-0f8ab3c2d1e4f5a6b");
        assert_eq!(t.resources[tccp::API_ELB].properties["ConnectionSettings"]["IdleTimeout"], 120);
        assert_eq!(t.resources[tccp::VPC].properties["CidrBlock"], "10.11.0.0/16");
        assert_eq!(
            t.resources[tccp::PEERING].properties["PeerRoleArn"],
            "arn:aws:iam::000111222333:role/p3x7d-vpc-peer-access"
        );

        let setup = host_setup_params(&config, &installation()).unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(
            host_setup::render(&setup).resources[host_setup::PEER_ROLE].properties["RoleName"],
            "p3x7d-vpc-peer-access"
        );
    }

    #[test]
    fn the_autoscaler_range_and_the_live_size_are_kept() {
        let mut config = fixture();
        config.spec.cluster.scaling.min = 2;
        config.spec.cluster.scaling.max = 8;
        assert_eq!(worker_sizes(&config, None), (2, 8, 3));
        assert_eq!(worker_sizes(&config, Some(6)), (2, 8, 6));
        assert_eq!(worker_sizes(&config, Some(12)), (2, 8, 8));
        config.spec.cluster.scaling.max = 0;
        config.spec.cluster.scaling.min = 0;
        assert_eq!(worker_sizes(&config, Some(1)), (3, 3, 3));
    }

    #[test]
    fn bad_input_renders_nothing_and_names_the_field() {
        let mut config = fixture();
        config.spec.aws.workers.clear();
        let errors = guest_main_params(&config, &installation(), None).unwrap_err();
        assert_eq!(errors[0].field, "spec.aws.workers");
        assert!(node_config_input(&config, &installation(), LegacyNode::Worker, Vec::new()).is_err());
        assert!(host_setup_params(&config, &installation()).is_err());
    }

    #[test]
    fn node_configs_carry_the_clusters_own_settings() {
        let config = fixture();
        let master = node_config_input(&config, &installation(), LegacyNode::Master { existing: false }, Vec::new())
            .unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(master.base_domain, "p3x7d.k8s.tyrell.eu-west-1.aws.gigantic.io");
        assert_eq!(master.api_domain, "api.p3x7d.k8s.tyrell.eu-west-1.aws.gigantic.io");
        assert_eq!(master.etcd_domain, "etcd.p3x7d.k8s.tyrell.eu-west-1.aws.gigantic.io");
        assert_eq!(master.pod_cidr, "192.168.0.0/16");
        assert_eq!(master.service_cidr, "172.31.0.0/16");
        assert_eq!(master.cluster_dns_ip, "172.31.0.10");
        assert_eq!(master.node_labels["giantswarm.io/provider"], "aws");
        assert_eq!(master.extras.ssh_users[0].name, "joe");
        assert_eq!(master.conntrack_max_per_core, None);
        match &master.role {
            Role::Master { id, etcd_initial_cluster, initial_cluster_state, .. } => {
                assert_eq!(*id, 0);
                assert_eq!(etcd_initial_cluster, "etcd0=https://etcd0.p3x7d.k8s.tyrell.eu-west-1.aws.gigantic.io:2380");
                assert_eq!(*initial_cluster_state, InitialClusterState::New);
            }
            other => panic!("{other:?}"),
        }
        let worker = node_config_input(&config, &installation(), LegacyNode::Worker, Vec::new())
            .unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(worker.role, Role::Worker { md_id: WORKER_GROUP.into() });
        assert_eq!(
            config_key(&config, &installation(), LegacyNode::Worker),
            "version/16.2.0/cloudconfig/v_6_1_0/cluster-p3x7d-guest-main-worker"
        );
        assert_eq!(
            config_key(&config, &installation(), LegacyNode::Master { existing: true }),
            "version/16.2.0/cloudconfig/v_6_1_0/cluster-p3x7d-tccpn-0"
        );
    }
}

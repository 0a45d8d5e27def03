//! `aws-operator migrate`: how a legacy cluster (`AWSConfig`) moves to node pools.
//!
//! It prints the node-pools objects that take the cluster over (`AWSCluster`, `AWSControlPlane`,
//! `AWSMachineDeployment`, as `aws-operator render` and `kubectl apply` take them) and the
//! ordered plan: what is kept as it is, what is recreated or replaced, and the steps, with the
//! ids of the resources the legacy stacks hold. It plans only: every step that changes
//! something is a command for a person to run, or the operator's own reconcile once the objects
//! are applied.
//!
//! The middle is pure ([`migrate`]): the `AWSConfig` and what AWS holds for it ([`Live`]) become
//! the objects and the plan ([`Migration`]), tested from fixtures. The edge ([`run`]) reads the
//! object from a file (as `render` does) or from the management cluster (as `describe` does),
//! the credential Secret as the daemon does ([`crate::controllers::lookup::credential_role_in`]),
//! and the legacy stacks' resources through CloudFormation, Auto Scaling, KMS and S3.
//!
//! # What is kept, what is not, and why
//!
//! * **Kept in place:** the KMS key `alias/<id>` and the buckets `<account>-g8s-<id>` and
//!   `<account>-g8s-<id>-access-logs`. They live outside the stacks, and the `AWSCluster`'s
//!   encryption step finds them by the same names. The cluster id, the DNS names
//!   (`api.<id>.k8s.<zone>`, …) and the certificate Secrets of the id stay too.
//! * **Recreated:** the VPC with its subnets, gateways and peering, the hosted zones, and the load
//!   balancers. The operator creates TCCP with `CreateStack` and never imports resources, and
//!   even a hand-made CloudFormation import could not take the network over: an imported
//!   resource must match its template, and TCCP lays the VPC block out differently from the
//!   legacy subnets (the plan names both layouts), while new subnets cannot be added beside the
//!   old ones in the same blocks. The internal hosted zone is bound to the VPC. So the new
//!   cluster gets a new VPC with the same CIDR block, and new zones with the same names, which
//!   TCCPF delegates.
//! * **Replaced:** the master and the worker group. The node-pools stacks claim the same names
//!   as the legacy stacks (the master's IAM role `gs-cluster-<id>-role-tccpn`, the load
//!   balancers `<id>-api`, `<id>-api-internal`, `<id>-etcd`, the peering role
//!   `<id>-vpc-peer-access`), so they can only be created once the legacy stacks are gone: the
//!   cluster is down between the workers' drain and the new nodes.
//! * **etcd's data** is carried by EBS snapshots: one of the live volume before anything, as
//!   the fallback, and one after the master stopped, from which the new master's etcd volume is
//!   created (the `AWSControlPlane` annotation `aws-operator.giantswarm.io/etcd-snapshot-id`).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;
use apis::aws::{AWSCluster, AWSControlPlane, AWSMachineDeployment};
use apis::aws_config::{self, AWSConfig};
use apis::labels;
use aws_stacks::ipam::{self, Ipv4Net};
use aws_stacks::names;
use aws_stacks::stacks::legacy::{self, LegacyStack, guest_main, inputs};
use aws_stacks::stacks::{tccp, tccpn, tcnp};
use kube::ResourceExt;
use serde::Serialize;
use serde_json::json;

use crate::aws::{AccountClients, AwsFactory, api_error};

/// What `aws-operator migrate` prints.
#[derive(clap::ValueEnum, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum MigrateOutput {
    /// The plan as `#` comments, then the objects: one YAML file for `render` and `kubectl`.
    #[default]
    All,
    /// Only the objects, as YAML.
    Objects,
    /// Only the plan, as text.
    Plan,
    /// Objects and plan as one JSON document.
    Json,
}

/// Arguments of `aws-operator migrate`.
#[derive(clap::Args, Debug, Clone)]
pub struct MigrateArgs {
    /// A file with the AWSConfig (as `kubectl get awsconfig -o yaml` prints it), or the name of
    /// an AWSConfig in the management cluster.
    pub source: String,
    /// The AWSConfig's namespace, when `source` is a name (default: the kubeconfig's).
    #[arg(short, long)]
    pub namespace: Option<String>,
    /// `all` (plan as comments, then objects), `objects`, `plan` or `json`.
    #[arg(short, long, value_enum, default_value_t = MigrateOutput::All)]
    pub output: MigrateOutput,
    /// Namespaces besides a cluster's own that may hold its credential Secret (the daemon's
    /// flag).
    #[arg(long, env = "AWS_OPERATOR_CREDENTIAL_NAMESPACES", value_delimiter = ',', default_value = "giantswarm")]
    pub credential_namespaces: Vec<String>,
    /// How to reach AWS: the daemon's flags.
    #[command(flatten)]
    pub aws: crate::config::AwsAccessArgs,
}

/// Which account a stack is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Account {
    /// The cluster's account.
    Tenant,
    /// The management account.
    Management,
}

/// One resource of a live stack.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LiveResource {
    /// The logical id.
    pub logical_id: String,
    /// The CloudFormation type.
    pub resource_type: String,
    /// The physical id (empty while being created).
    pub physical_id: String,
}

/// A legacy stack as CloudFormation holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LiveStack {
    /// The stack name.
    pub name: String,
    /// Its account.
    pub account: Account,
    /// Its status, e.g. `CREATE_COMPLETE`.
    pub status: String,
    /// Its resources.
    pub resources: Vec<LiveResource>,
}

/// What AWS holds of a legacy cluster.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Live {
    /// The cluster's account id.
    pub tenant_account_id: String,
    /// The management account id.
    pub management_account_id: String,
    /// The stacks found (missing ones are absent).
    pub stacks: Vec<LiveStack>,
    /// The key id behind `alias/<id>`, if there is one.
    pub kms_key_id: Option<String>,
    /// The cluster's buckets that exist.
    pub buckets: Vec<String>,
    /// Instance ids in service in the master's group.
    pub master_instances: Vec<String>,
    /// Instance ids in service in the worker group.
    pub worker_instances: Vec<String>,
}

impl Live {
    fn stack(&self, stack: LegacyStack, id: &str) -> Option<&LiveStack> {
        let name = legacy::stack_name(id, stack);
        self.stacks.iter().find(|s| s.name == name)
    }
}

/// Who runs a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Actor {
    /// A person, with the commands given.
    You,
    /// The operator, once the objects are applied.
    Operator,
}

/// One step of the plan, in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Step {
    /// Who runs it.
    pub by: Actor,
    /// What it does, in one line.
    pub title: String,
    /// Why, and what to check before the next step.
    pub detail: String,
    /// The commands, for a person's steps.
    pub commands: Vec<String>,
}

/// What happens to one resource of the legacy cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Disposition {
    /// What it is, e.g. `VPC` or `etcd volume`.
    pub what: String,
    /// Its id in AWS.
    pub id: String,
    /// What takes its place, or how it is kept.
    pub how: String,
}

/// The objects and the plan of one legacy cluster's move to node pools.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Migration {
    /// The cluster id.
    pub cluster_id: String,
    /// The objects taking the cluster over, in the order to apply them.
    pub cluster: AWSCluster,
    /// See [`Migration::cluster`].
    pub control_plane: AWSControlPlane,
    /// See [`Migration::cluster`].
    pub node_pool: AWSMachineDeployment,
    /// What is kept as it is.
    pub kept: Vec<Disposition>,
    /// What is created anew beside or after the legacy resource (the network, the zones, the load
    /// balancers).
    pub recreated: Vec<Disposition>,
    /// The nodes, replaced by new ones.
    pub replaced: Vec<Disposition>,
    /// The steps, in order.
    pub steps: Vec<Step>,
    /// What the node-pools cluster does differently.
    pub differences: Vec<String>,
}

/// Why no plan can be made.
#[derive(Debug, thiserror::Error)]
pub enum MigrateError {
    /// The object is invalid: each field and its fix.
    #[error("{0}")]
    Invalid(#[from] operatorkit::error::InvalidInput),
    /// A legacy stack, or a resource in it, is missing or not settled.
    #[error("AWSConfig {object}: {message}")]
    NotLive {
        /// `namespace/name`.
        object: String,
        /// What is missing and what to do.
        message: String,
    },
}

/// The legacy master's id in its stacks (one master, id 0, as a one-master control plane's).
const MASTER: u8 = 0;

/// The objects and the plan for `config`, given what AWS holds for it.
pub fn migrate(config: &AWSConfig, live: &Live) -> Result<Migration, MigrateError> {
    if let Err(errors) = config.validate() {
        return Err(operatorkit::error::field_errors(config, errors).into());
    }
    let id = config.cluster_id().to_string();
    let ns = config.namespace().unwrap_or_default();
    let object = format!("{ns}/{}", config.name_any());
    let not_live = |message: String| MigrateError::NotLive { object: object.clone(), message };

    // The three stacks must be there and settled: a plan from half a cluster would be wrong.
    for stack in [LegacyStack::HostSetup, LegacyStack::GuestMain, LegacyStack::HostMain] {
        let name = legacy::stack_name(&id, stack);
        match live.stack(stack, &id) {
            None => {
                return Err(not_live(format!(
                    "stack {name} does not exist: migrate moves a created legacy cluster; wait until the AWSConfig's status.cluster.conditions say Created"
                )));
            }
            Some(s)
                if !(s.status.ends_with("_COMPLETE")
                    && !s.status.contains("ROLLBACK")
                    && !s.status.contains("DELETE")) =>
            {
                return Err(not_live(format!(
                    "stack {name} is {}: migrate needs it CREATE_COMPLETE or UPDATE_COMPLETE; wait for the operator, or fix the stack first",
                    s.status
                )));
            }
            Some(_) => {}
        }
    }
    let guest = live.stack(LegacyStack::GuestMain, &id).expect("checked above");
    let guest_name = guest.name.clone();
    let resource = |logical: &str| -> Result<String, MigrateError> {
        guest
            .resources
            .iter()
            .find(|r| r.logical_id == logical && !r.physical_id.is_empty())
            .map(|r| r.physical_id.clone())
            .ok_or_else(|| {
                not_live(format!(
                    "stack {guest_name} has no resource {logical}: it was not created by this operator's legacy resource set; migrate reads only stacks it built"
                ))
            })
    };
    let vpc = resource(tccp::VPC)?;
    let peering = resource(tccp::PEERING)?;
    let master_group = resource(&tccpn::asg_id(MASTER))?;
    let etcd_volume = resource(&tccpn::etcd_volume_id(MASTER))?;
    let master_eni = resource(&tccpn::eni_id(MASTER))?;
    let worker_group = resource(guest_main::WORKER_ASG)?;
    let zone_ids = [tccp::HOSTED_ZONE, tccp::INTERNAL_HOSTED_ZONE]
        .map(|logical| guest.resources.iter().find(|r| r.logical_id == logical).map(|r| r.physical_id.clone()));
    let Some(key) = live.kms_key_id.clone() else {
        return Err(not_live(format!(
            "there is no KMS key {} in account {}: the legacy cluster is not complete",
            names::kms_alias(&id),
            live.tenant_account_id
        )));
    };
    let Some(master_instance) = live.master_instances.first().cloned() else {
        return Err(not_live(format!(
            "the master's group {master_group} has no instance in service: migrate starts from a running master, so that etcd's data is known to be whole; let the operator bring it back first"
        )));
    };

    let zones = config.zones();
    let (_, vpc_cidr) = config.vpc_cidr();
    let region = config.spec.aws.region.clone();
    let base_domain = inputs::zone(config);
    let tenant_domain = names::tenant_base_domain(&id, &base_domain);
    let master = &config.spec.aws.masters[0];
    let worker = &config.spec.aws.workers[0];
    let (min, max, _) = inputs::worker_sizes(config, None);
    let organization =
        config.labels().get(labels::ORGANIZATION).cloned().unwrap_or_else(|| config.spec.cluster.customer.id.clone());
    // `plan_for` sets the label from the Release the controller routes the object to when the
    // object names only its own version.
    let release = config.labels().get(labels::RELEASE_VERSION).cloned().unwrap_or_default();
    let cp_name = node_id(config.spec.cluster.masters.first().map(|m| m.id.as_str()), "m", &id);
    let np_name = node_id(config.spec.cluster.workers.first().map(|w| w.id.as_str()), "w", &id);
    let object_labels = |extra: &[(&str, &str)]| {
        let mut l: BTreeMap<String, String> = BTreeMap::from([
            (labels::CLUSTER.to_string(), id.clone()),
            (labels::ORGANIZATION.to_string(), organization.clone()),
            (labels::RELEASE_VERSION.to_string(), release.clone()),
        ]);
        if let Some(v) = config.labels().get(labels::AWS_OPERATOR_VERSION) {
            l.insert(labels::AWS_OPERATOR_VERSION.to_string(), v.clone());
        }
        l.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        l
    };
    let conntrack = config.spec.cluster.kubernetes.network_setup.kube_proxy.conntrack_max_per_core;

    let cluster: AWSCluster = serde_json::from_value(json!({
        "apiVersion": "infrastructure.giantswarm.io/v1alpha3",
        "kind": "AWSCluster",
        "metadata": {
            "name": id,
            "namespace": ns,
            "labels": object_labels(&[]),
            // Applied paused, so that the operator starts from the VPC block written into the
            // status (step 8), not from a new allocation.
            "annotations": {labels::OPERATORKIT_PAUSED: "true"},
        },
        "spec": {
            "cluster": {
                "description": format!("{id}, moved from AWSConfig {object}"),
                "dns": {"domain": base_domain},
                "kubeProxy": if conntrack > 0 { json!({"conntrackMaxPerCore": conntrack}) } else { json!({}) },
            },
            "provider": {
                "credentialSecret": {
                    "name": config.spec.aws.credential_secret.name,
                    "namespace": config.spec.aws.credential_secret.namespace,
                },
                "master": {"availabilityZone": zones[0].name, "instanceType": master.instance_type},
                "region": region,
            },
        },
        "status": {"provider": {"network": {"cidr": vpc_cidr}}},
    }))
    .expect("an AWSCluster");
    let control_plane: AWSControlPlane = serde_json::from_value(json!({
        "apiVersion": "infrastructure.giantswarm.io/v1alpha3",
        "kind": "AWSControlPlane",
        "metadata": {
            "name": cp_name,
            "namespace": ns,
            "labels": object_labels(&[(labels::CONTROL_PLANE, &cp_name)]),
        },
        "spec": {"availabilityZones": [zones[0].name], "instanceType": master.instance_type, "replicas": 1},
    }))
    .expect("an AWSControlPlane");
    let docker_gb = aws_config::docker_volume_size_gb(worker);
    let node_pool: AWSMachineDeployment = serde_json::from_value(json!({
        "apiVersion": "infrastructure.giantswarm.io/v1alpha3",
        "kind": "AWSMachineDeployment",
        "metadata": {
            "name": np_name,
            "namespace": ns,
            "labels": object_labels(&[(labels::MACHINE_DEPLOYMENT, &np_name)]),
        },
        "spec": {
            "nodePool": {
                "description": format!("the workers of legacy cluster {id}"),
                "machine": {"dockerVolumeSizeGB": docker_gb, "kubeletVolumeSizeGB": guest_main::KUBELET_VOLUME_GB},
                "scaling": {"min": min, "max": max},
            },
            "provider": {
                "availabilityZones": zones.iter().map(|z| z.name.clone()).collect::<Vec<_>>(),
                "worker": {"instanceType": worker.instance_type, "useAlikeInstanceTypes": false},
            },
        },
    }))
    .expect("an AWSMachineDeployment");

    // The network: TCCP's layout of the same block, against the legacy subnets.
    let tccp_layout = vpc_cidr
        .parse::<Ipv4Net>()
        .ok()
        .and_then(|net| ipam::tccp_layout(net, None, &zones.iter().map(|z| z.name.clone()).collect::<Vec<_>>()).ok())
        .unwrap_or_default();
    let legacy_layout: Vec<String> =
        zones.iter().map(|z| format!("{}: public {}, private {}", z.name, z.public_cidr, z.private_cidr)).collect();
    let new_layout: Vec<String> =
        tccp_layout.iter().map(|z| format!("{}: public {}, private {}", z.name, z.public, z.private)).collect();
    let same_layout = legacy_layout == new_layout;
    let network_why = if same_layout {
        format!(
            "TCCP lays {vpc_cidr} out as the legacy subnets are ({}), but the operator creates TCCP with CreateStack and never imports resources",
            legacy_layout.join("; ")
        )
    } else {
        format!(
            "the legacy subnets ({}) are not TCCP's layout of {vpc_cidr} ({}): an imported subnet must match its template, and TCCP's subnets cannot be added beside the legacy ones in the same blocks; the operator never imports resources either",
            legacy_layout.join("; "),
            new_layout.join("; ")
        )
    };

    let tenant = &live.tenant_account_id;
    let buckets = [names::bucket(tenant, &id), names::access_log_bucket(tenant, &id)];
    let mut kept = vec![Disposition {
        what: "KMS key".into(),
        id: key.clone(),
        how: format!(
            "kept: the AWSCluster's encryption step finds it by its alias {} and encrypts the new node configs with it",
            names::kms_alias(&id)
        ),
    }];
    for bucket in &buckets {
        if live.buckets.contains(bucket) {
            kept.push(Disposition {
                what: "S3 bucket".into(),
                id: bucket.clone(),
                how: "kept: the AWSCluster's encryption step finds it by its name".into(),
            });
        }
    }
    kept.push(Disposition {
        what: "cluster id".into(),
        id: id.clone(),
        how: format!(
            "kept: the namespace {id} is handed over (step 7); the DNS names under {tenant_domain} and the certificate Secrets labelled {}={id} stay the cluster's",
            labels::CLUSTER
        ),
    });

    let mut recreated = vec![
        Disposition {
            what: "VPC".into(),
            id: vpc.clone(),
            how: format!("recreated by TCCP with the same block {vpc_cidr}: {network_why}"),
        },
        Disposition {
            what: "VPC peering".into(),
            id: peering.clone(),
            how: "recreated by TCCP between the new VPC and the management VPC; TCCPF routes the management route tables through it".into(),
        },
    ];
    for (what, zone) in [("public hosted zone", &zone_ids[0]), ("internal hosted zone", &zone_ids[1])] {
        if let Some(zone) = zone {
            let how = if what.starts_with("internal") {
                format!(
                    "recreated by TCCP as {tenant_domain}, bound to the new VPC (a private zone belongs to its VPC)"
                )
            } else {
                format!(
                    "recreated by TCCP as {tenant_domain}; TCCPF delegates it from {base_domain}, replacing host-main's delegation"
                )
            };
            recreated.push(Disposition { what: what.into(), id: zone.clone(), how });
        }
    }
    for (logical, name) in [
        (tccp::API_ELB, names::load_balancers(&id)[0].clone()),
        (tccp::API_INTERNAL_ELB, names::load_balancers(&id)[1].clone()),
        (tccp::ETCD_ELB, names::load_balancers(&id)[2].clone()),
    ] {
        if guest.resources.iter().any(|r| r.logical_id == logical) {
            recreated.push(Disposition {
                what: "load balancer".into(),
                id: name,
                how: "recreated by TCCP under the same name, once guest-main's is gone".into(),
            });
        }
    }

    let mut replaced = vec![
        Disposition {
            what: "master".into(),
            id: master_instance.clone(),
            how: format!(
                "replaced by TCCPN's master 0 ({}) in {}, with the same IAM role {}",
                master.instance_type,
                zones[0].name,
                tccpn::role_name(&id)
            ),
        },
        Disposition {
            what: "etcd volume".into(),
            id: etcd_volume.clone(),
            how: "snapshotted twice (steps 1 and 5); TCCPN's etcd volume is created from the second snapshot".into(),
        },
        Disposition {
            what: "etcd network interface".into(),
            id: master_eni.clone(),
            how: "replaced by TCCPN's, in the new VPC's private subnet".into(),
        },
        Disposition {
            what: "master group".into(),
            id: master_group.clone(),
            how: "replaced by TCCPN's one-instance group".into(),
        },
        Disposition {
            what: "worker group".into(),
            id: worker_group.clone(),
            how: format!(
                "replaced by node pool {np_name} (TCNP): {} in {}, {min} to {max} workers",
                worker.instance_type,
                zones.iter().map(|z| z.name.as_str()).collect::<Vec<_>>().join(", ")
            ),
        },
    ];
    replaced.extend(live.worker_instances.iter().map(|w| Disposition {
        what: "worker".into(),
        id: w.clone(),
        how: format!("drained through the drainers (step 2), then replaced by a node of {np_name}"),
    }));

    let aws = format!("aws --region {region}");
    let cp_account = &live.management_account_id;
    let stack = |s: LegacyStack| legacy::stack_name(&id, s);
    let workers_list =
        if live.worker_instances.is_empty() { "none".to_string() } else { live.worker_instances.join(", ") };
    let steps = vec![
        Step {
            by: Actor::You,
            title: format!("Snapshot the etcd volume {etcd_volume} of master {master_instance}, before anything else"),
            detail: "The fallback: a crash-consistent copy of etcd while the cluster still runs. Wait until the snapshot is completed.".into(),
            commands: vec![
                format!(
                    "{aws} ec2 create-snapshot --volume-id {etcd_volume} --description 'etcd of cluster {id} before the move to node pools' --tag-specifications 'ResourceType=snapshot,Tags=[{{Key={},Value={id}}}]'",
                    labels::CLUSTER
                ),
                format!("{aws} ec2 wait snapshot-completed --filters Name=volume-id,Values={etcd_volume}"),
            ],
        },
        Step {
            by: Actor::You,
            title: format!("Drain the workers ({workers_list}) through the drainers"),
            detail: format!(
                "Emptying the group {worker_group} makes each worker wait on the terminating hook {}; the operator's drainers drain its node through a DrainerConfig and then let the instance go. Workloads stop here: the node-pools stacks claim the legacy stacks' names (IAM role {}, load balancers {}, peering role {}), so they can only be created once those are gone. Wait until the group has no instance.",
                tcnp::TERMINATING_HOOK,
                tccpn::role_name(&id),
                names::load_balancers(&id).join(", "),
                names::peer_access_role(&id)
            ),
            commands: vec![
                format!("{aws} autoscaling update-auto-scaling-group --auto-scaling-group-name {worker_group} --min-size 0 --max-size 0 --desired-capacity 0"),
                format!("kubectl get drainerconfigs -n {ns} -l {}={id}", labels::CLUSTER),
                format!("{aws} autoscaling describe-auto-scaling-groups --auto-scaling-group-names {worker_group} --query 'AutoScalingGroups[0].Instances'"),
            ],
        },
        Step {
            by: Actor::You,
            title: format!("Pause AWSConfig {object}"),
            detail: "From here the operator leaves the legacy cluster alone: its teardown would delete the KMS key and the buckets the node-pools cluster keeps.".into(),
            commands: vec![format!("kubectl annotate awsconfig -n {ns} {} {}=true", config.name_any(), labels::OPERATORKIT_PAUSED)],
        },
        Step {
            by: Actor::You,
            title: format!("Stop the master {master_instance}"),
            detail: format!(
                "etcd stops with it and its volume {etcd_volume} is detached whole; the group never deletes the volume. The group's terminating hook {} holds the instance up to {} minutes.",
                tccpn::TERMINATING_HOOK,
                tccpn::TERMINATING_HOOK_TIMEOUT / 60
            ),
            commands: vec![
                format!("{aws} autoscaling update-auto-scaling-group --auto-scaling-group-name {master_group} --min-size 0 --max-size 0 --desired-capacity 0"),
                format!("{aws} ec2 wait instance-terminated --instance-ids {master_instance}"),
            ],
        },
        Step {
            by: Actor::You,
            title: format!("Snapshot the etcd volume {etcd_volume} again, now that etcd is stopped"),
            detail: format!(
                "This snapshot holds etcd's last write; the new master's etcd volume is created from it (step 8, the AWSControlPlane's annotation {}).",
                labels::ETCD_SNAPSHOT_ID
            ),
            commands: vec![
                format!(
                    "{aws} ec2 create-snapshot --volume-id {etcd_volume} --description 'etcd of cluster {id} for its node-pools master' --query SnapshotId --output text"
                ),
                format!("{aws} ec2 wait snapshot-completed --snapshot-ids <the SnapshotId above>"),
            ],
        },
        Step {
            by: Actor::You,
            title: "Delete the legacy stacks, host-main first".into(),
            detail: format!(
                "{} (management account {cp_account}) takes the routes into the cluster and the delegation; {} (account {tenant}) the VPC {vpc}, the peering {peering}, the zones, load balancers and groups, keeping a last snapshot of {etcd_volume} by its deletion policy; {} (management account) the peering role. Load balancers and security groups that the cluster's Services created outside the stacks keep guest-main from being deleted: delete them first.",
                stack(LegacyStack::HostMain),
                stack(LegacyStack::GuestMain),
                stack(LegacyStack::HostSetup)
            ),
            commands: vec![
                format!("{aws} cloudformation delete-stack --stack-name {}  # management account {cp_account}", stack(LegacyStack::HostMain)),
                format!("{aws} cloudformation wait stack-delete-complete --stack-name {}  # management account", stack(LegacyStack::HostMain)),
                format!("{aws} cloudformation delete-stack --stack-name {}  # account {tenant}", stack(LegacyStack::GuestMain)),
                format!("{aws} cloudformation wait stack-delete-complete --stack-name {}  # account {tenant}", stack(LegacyStack::GuestMain)),
                format!("{aws} cloudformation delete-stack --stack-name {}  # management account {cp_account}", stack(LegacyStack::HostSetup)),
                format!("{aws} cloudformation wait stack-delete-complete --stack-name {}  # management account", stack(LegacyStack::HostSetup)),
            ],
        },
        Step {
            by: Actor::You,
            title: format!("Remove AWSConfig {object} without its teardown, and hand the cluster id over"),
            detail: format!(
                "Without its finalizer the object goes and deletes nothing: the key, the buckets and the certificate Secrets stay. The namespace {id} keeps the label {}={id}; without the label {} the AWSCluster adopts it.",
                labels::CLUSTER,
                labels::CLUSTER_UID
            ),
            commands: vec![
                format!("kubectl patch awsconfig -n {ns} {} --type=merge -p '{{\"metadata\":{{\"finalizers\":null}}}}'", config.name_any()),
                format!("kubectl delete awsconfig -n {ns} {}", config.name_any()),
                format!("kubectl label namespace {id} {}- && kubectl annotate namespace {id} {}-", labels::CLUSTER_UID, labels::CLUSTER_OWNER),
            ],
        },
        Step {
            by: Actor::You,
            title: "Apply the node-pools objects, name the etcd snapshot, record the VPC block, unpause".into(),
            detail: format!(
                "The AWSCluster is applied paused: the operator takes the VPC block {vpc_cidr} from its status instead of allocating one, and the control plane {cp_name} waits for the cluster's network, by which time it names the snapshot of step 5. Keep the annotation: without it the etcd volume would be recreated empty, which the operator refuses."
            ),
            commands: vec![
                "kubectl apply --validate=strict -f migrated.yaml".into(),
                format!("kubectl annotate awscontrolplane -n {ns} {cp_name} {}=<the snapshot of step 5>", labels::ETCD_SNAPSHOT_ID),
                format!(
                    "kubectl patch awscluster -n {ns} {id} --subresource=status --type=merge -p '{{\"status\":{{\"provider\":{{\"network\":{{\"cidr\":\"{vpc_cidr}\"}}}}}}}}'"
                ),
                format!("kubectl annotate awscluster -n {ns} {id} {}-", labels::OPERATORKIT_PAUSED),
            ],
        },
        Step {
            by: Actor::Operator,
            title: "The operator builds the node-pools cluster".into(),
            detail: format!(
                "TCCPI, TCCP (a new VPC {vpc_cidr}, the zones {tenant_domain}), TCCPF (routes and delegation), TCCPN (master 0, its etcd volume from the snapshot of step 5), TCNP for node pool {np_name}; the key {key} and the buckets are used as they are. Follow it with `aws-operator describe {id} -n {ns}`."
            ),
            commands: Vec::new(),
        },
    ];

    let mut differences = vec![
        format!(
            "Images: the node-pools nodes boot the Release's Flatcar image from the operator's AMI map, not spec.aws.masters[0].imageID / spec.aws.workers[0].imageID ({}).",
            master.image_id
        ),
        format!(
            "Ingress: guest-main's ingress load balancer (ports 80 and 443 to node ports {} and {}) has no node-pools counterpart; the ingress controller's Service of type LoadBalancer takes its place.",
            config.spec.cluster.kubernetes.ingress_controller.insecure_port,
            config.spec.cluster.kubernetes.ingress_controller.secure_port
        ),
        "Load balancer idle timeouts (spec.aws.{api,etcd,ingress}.elb.idleTimeoutSeconds) are the node-pools defaults."
            .to_string(),
    ];
    if !config.spec.cluster.kubernetes.kubelet.labels.is_empty() {
        differences.push(format!(
            "Kubelet labels ({}) are not carried over; the node pool's nodes carry {}={np_name}.",
            config.spec.cluster.kubernetes.kubelet.labels,
            labels::MACHINE_DEPLOYMENT
        ));
    }
    if !config.spec.cluster.kubernetes.ssh.user_list.is_empty() {
        differences.push("SSH users (spec.cluster.kubernetes.ssh.userList) come from the installation's node extras, not from the cluster.".to_string());
    }

    Ok(Migration { cluster_id: id, cluster, control_plane, node_pool, kept, recreated, replaced, steps, differences })
}

/// The name of a node-pools object from a legacy node id when it is one (`[a-z0-9]{5}`), else
/// `<prefix>` and the cluster id's first four characters.
fn node_id(legacy: Option<&str>, prefix: &str, cluster_id: &str) -> String {
    match legacy {
        Some(id) if id.len() == 5 && id.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()) => id.to_string(),
        _ => format!("{prefix}{}", cluster_id.chars().take(4).collect::<String>()),
    }
}

impl Migration {
    /// The objects, as the YAML documents `kubectl apply` and `aws-operator render` read.
    pub fn objects_yaml(&self) -> anyhow::Result<String> {
        let mut out = String::new();
        for doc in [
            serde_json::to_value(&self.cluster)?,
            serde_json::to_value(&self.control_plane)?,
            serde_json::to_value(&self.node_pool)?,
        ] {
            out.push_str("---\n");
            out.push_str(&serde_saphyr::to_string(&doc)?);
        }
        Ok(out)
    }

    /// The plan, as text for people.
    pub fn plan_text(&self) -> String {
        let mut out =
            format!("Moving legacy cluster {} to node pools (plan only: nothing has been changed)\n", self.cluster_id);
        let section = |out: &mut String, title: &str, items: &[Disposition]| {
            out.push_str(&format!("\n{title}:\n"));
            for d in items {
                out.push_str(&format!("  {} {}: {}\n", d.what, d.id, d.how));
            }
        };
        section(&mut out, "Kept", &self.kept);
        section(&mut out, "Recreated", &self.recreated);
        section(&mut out, "Replaced", &self.replaced);
        out.push_str("\nSteps:\n");
        for (n, step) in self.steps.iter().enumerate() {
            let by = match step.by {
                Actor::You => "you",
                Actor::Operator => "the operator",
            };
            out.push_str(&format!("  {}. [{by}] {}\n     {}\n", n + 1, step.title, step.detail));
            for c in &step.commands {
                out.push_str(&format!("       $ {c}\n"));
            }
        }
        out.push_str("\nWhat the node-pools cluster does differently:\n");
        for d in &self.differences {
            out.push_str(&format!("  - {d}\n"));
        }
        out
    }

    /// What `output` asks for.
    pub fn write(&self, output: MigrateOutput, out: &mut dyn Write) -> anyhow::Result<()> {
        match output {
            MigrateOutput::All => {
                for line in self.plan_text().lines() {
                    writeln!(out, "# {line}")?;
                }
                write!(out, "{}", self.objects_yaml()?)?;
            }
            MigrateOutput::Objects => write!(out, "{}", self.objects_yaml()?)?,
            MigrateOutput::Plan => write!(out, "{}", self.plan_text())?,
            MigrateOutput::Json => writeln!(out, "{}", serde_json::to_string_pretty(self)?)?,
        }
        Ok(())
    }
}

/// The AWSConfig `source` names: the one in file `source` (as `render` reads files), or the one
/// named `source` in `namespace` of the management cluster.
pub async fn read_config(source: &str, namespace: Option<&str>, client: &kube::Client) -> anyhow::Result<AWSConfig> {
    let path = Path::new(source);
    if path.is_file() {
        let objects = crate::plan::Objects::load(&[PathBuf::from(path)])?;
        let mut configs = objects.aws_configs;
        return match configs.len() {
            1 => Ok(configs.remove(0)),
            0 => anyhow::bail!(
                "{source} holds no AWSConfig (provider.giantswarm.io/v1alpha1): give the file the legacy cluster's object, as `kubectl get awsconfig <name> -o yaml` prints it"
            ),
            n => anyhow::bail!(
                "{source} holds {n} AWSConfigs ({}): migrate moves one cluster; give a file with one, or its name",
                configs.iter().map(ResourceExt::name_any).collect::<Vec<_>>().join(", ")
            ),
        };
    }
    let is_name = !source.is_empty()
        && source.len() <= 63
        && source.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if !is_name {
        anyhow::bail!(
            "{source}: no such file, and not an AWSConfig name (lower-case letters, digits and '-'): give the file or the object's name"
        );
    }
    let ns = namespace.map(str::to_string).unwrap_or_else(|| client.default_namespace().to_string());
    let api: kube::Api<AWSConfig> = kube::Api::namespaced(client.clone(), &ns);
    match api.get_opt(source).await.context("reading the AWSConfig")? {
        Some(c) => Ok(c),
        None => anyhow::bail!(
            "no AWSConfig {source} in namespace {ns} (and no such file): list them with `kubectl get awsconfigs -A`, and name the namespace with -n"
        ),
    }
}

/// The resources of stack `name`, or `None` when there is no such stack.
async fn stack_of(aws: &AccountClients, name: &str, account: Account) -> anyhow::Result<Option<LiveStack>> {
    let described = match aws.cfn_client.describe_stacks().stack_name(name).send().await {
        Ok(out) => out,
        Err(e) => {
            let e = api_error("CloudFormation", "DescribeStacks", e);
            if e.code() == "ValidationError" {
                return Ok(None);
            }
            return Err(e.into());
        }
    };
    let Some(stack) = described.stacks().first() else { return Ok(None) };
    let status = stack.stack_status().map(|s| s.as_str().to_string()).unwrap_or_default();
    let mut resources = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let page = aws
            .cfn_client
            .list_stack_resources()
            .stack_name(name)
            .set_next_token(token.take())
            .send()
            .await
            .map_err(|e| api_error("CloudFormation", "ListStackResources", e))?;
        resources.extend(page.stack_resource_summaries().iter().map(|r| LiveResource {
            logical_id: r.logical_resource_id().unwrap_or_default().to_string(),
            resource_type: r.resource_type().unwrap_or_default().to_string(),
            physical_id: r.physical_resource_id().unwrap_or_default().to_string(),
        }));
        match page.next_token() {
            Some(t) if !t.is_empty() => token = Some(t.to_string()),
            _ => break,
        }
    }
    Ok(Some(LiveStack { name: name.to_string(), account, status, resources }))
}

/// The instances in service of Auto Scaling group `name`.
async fn in_service(aws: &AccountClients, name: &str) -> anyhow::Result<Vec<String>> {
    let group = crate::aws::ec2::describe_group(aws, name).await?;
    let mut ids: Vec<String> = group
        .iter()
        .flat_map(|g| g.instances())
        .filter(|i| i.lifecycle_state().is_some_and(|s| s.as_str() == "InService"))
        .filter_map(|i| i.instance_id().map(str::to_string))
        .collect();
    ids.sort();
    Ok(ids)
}

/// What AWS holds of `config`'s cluster: its stacks, key, buckets and nodes, read in the tenant
/// account (`tenant`) and the management account (`cp`).
pub async fn read_live(config: &AWSConfig, tenant: &AccountClients, cp: &AccountClients) -> anyhow::Result<Live> {
    let id = config.cluster_id();
    let mut live = Live {
        tenant_account_id: tenant.account_id.clone(),
        management_account_id: cp.account_id.clone(),
        ..Live::default()
    };
    for (stack, aws, account) in [
        (LegacyStack::HostSetup, cp, Account::Management),
        (LegacyStack::GuestMain, tenant, Account::Tenant),
        (LegacyStack::HostMain, cp, Account::Management),
    ] {
        if let Some(s) = stack_of(aws, &legacy::stack_name(id, stack), account).await? {
            live.stacks.push(s);
        }
    }
    let group = |logical: &str| {
        live.stack(LegacyStack::GuestMain, id)
            .and_then(|s| s.resources.iter().find(|r| r.logical_id == logical))
            .map(|r| r.physical_id.clone())
            .filter(|p| !p.is_empty())
    };
    let (masters, workers) = (group(&tccpn::asg_id(MASTER)), group(guest_main::WORKER_ASG));
    if let Some(g) = masters {
        live.master_instances = in_service(tenant, &g).await?;
    }
    if let Some(g) = workers {
        live.worker_instances = in_service(tenant, &g).await?;
    }
    live.kms_key_id = match tenant.kms.describe_key().key_id(names::kms_alias(id)).send().await {
        Ok(out) => out.key_metadata().map(|m| m.key_id().to_string()),
        Err(e) => {
            let e = api_error("KMS", "DescribeKey", e);
            if e.code() != "NotFoundException" {
                return Err(e.into());
            }
            None
        }
    };
    for bucket in [names::bucket(&tenant.account_id, id), names::access_log_bucket(&tenant.account_id, id)] {
        match tenant.s3.head_bucket().bucket(&bucket).send().await {
            Ok(_) => live.buckets.push(bucket),
            Err(e) => {
                let e = api_error("S3", "HeadBucket", e);
                if !matches!(e.code(), "NotFound" | "NoSuchBucket" | "404") {
                    return Err(e.into());
                }
            }
        }
    }
    Ok(live)
}

/// Read `args.source`, its credential Secret and AWS, and return the plan.
pub async fn plan_for(args: &MigrateArgs, client: &kube::Client, factory: &AwsFactory) -> anyhow::Result<Migration> {
    let mut config = read_config(&args.source, args.namespace.as_deref(), client).await?;
    if let Err(errors) = config.validate() {
        return Err(MigrateError::from(operatorkit::error::field_errors(&config, errors)).into());
    }
    // The node-pools objects carry the release the cluster runs: the one the controller routes
    // the AWSConfig to, also when it is told by the object's own version, not a label.
    if config.labels().get(labels::RELEASE_VERSION).is_none_or(|v| v.trim().is_empty()) {
        let releases = kube::Api::<apis::release::Release>::all(client.clone())
            .list(&Default::default())
            .await
            .context("listing the Releases")?
            .items;
        let release = crate::controllers::legacy::release_version_of(&config, &releases).map_err(|message| {
            MigrateError::NotLive {
                object: format!("{}/{}", config.namespace().unwrap_or_default(), config.name_any()),
                message,
            }
        })?;
        config.labels_mut().insert(labels::RELEASE_VERSION.to_string(), release);
    }
    let cs = &config.spec.aws.credential_secret;
    let allowed: Vec<String> = args.credential_namespaces.iter().filter(|n| !n.is_empty()).cloned().collect();
    let role = crate::controllers::lookup::credential_role_in(
        client,
        &allowed,
        &config,
        "spec.aws.credentialSecret",
        &cs.namespace,
        &cs.name,
    )
    .await
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    let region = &config.spec.aws.region;
    let tenant = factory.tenant(&role, region).await.context("the cluster's account")?;
    let cp = factory.control_plane(region).await.context("the management account")?;
    let live = read_live(&config, &tenant, &cp).await?;
    Ok(migrate(&config, &live)?)
}

/// `aws-operator migrate`: to standard output, reaching the management cluster as the daemon
/// does (`KUBECONFIG`, else the pod's service account) and AWS with the daemon's flags.
pub async fn run(args: &MigrateArgs, out: &mut dyn Write) -> anyhow::Result<()> {
    let client = kube::Client::try_default().await.context("connecting to the management cluster")?;
    let factory = AwsFactory::new(args.aws.settings(Some(Duration::from_secs(30)))).await?;
    let migration = plan_for(args, &client, &factory).await?;
    migration.write(args.output, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIXTURE: &str = include_str!("../../../crates/apis/tests/fixtures/awsconfig-p3x7d.yaml");

    fn fixture() -> AWSConfig {
        serde_saphyr::from_str(FIXTURE).expect("the fixture parses")
    }

    fn resource(logical: &str, kind: &str, physical: &str) -> LiveResource {
        LiveResource { logical_id: logical.into(), resource_type: kind.into(), physical_id: physical.into() }
    }

    /// What AWS would hold for the fixture, with deliberately distinct ids.
    fn live() -> Live {
        let stack = |s: LegacyStack, account, resources| LiveStack {
            name: legacy::stack_name("p3x7d", s),
            account,
            status: "CREATE_COMPLETE".into(),
            resources,
        };
        Live {
            tenant_account_id: "222233334444".into(),
            management_account_id: "555566667777".into(),
            stacks: vec![
                stack(LegacyStack::HostSetup, Account::Management, vec![]),
                stack(
                    LegacyStack::GuestMain,
                    Account::Tenant,
                    vec![
                        resource("VPC", "AWS::EC2::VPC", "vpc-0aa11"),
                        resource("VPCPeeringConnection", "AWS::EC2::VPCPeeringConnection", "pcx-0bb22"),
                        resource(
                            "ControlPlaneNodeAutoScalingGroup",
                            "AWS::AutoScaling::AutoScalingGroup",
                            "master-asg-cc33",
                        ),
                        resource("EtcdVolume", "AWS::EC2::Volume", "vol-0dd44"),
                        resource("MasterEni", "AWS::EC2::NetworkInterface", "eni-0ee55"),
                        resource("WorkerAutoScalingGroup", "AWS::AutoScaling::AutoScalingGroup", "worker-asg-ff66"),
                        resource("HostedZone", "AWS::Route53::HostedZone", "Z0PUBLIC77"),
                        resource("InternalHostedZone", "AWS::Route53::HostedZone", "Z0PRIVATE88"),
                        resource("ApiLoadBalancer", "AWS::ElasticLoadBalancing::LoadBalancer", "p3x7d-api"),
                    ],
                ),
                stack(LegacyStack::HostMain, Account::Management, vec![]),
            ],
            kms_key_id: Some("1234abcd-key".into()),
            buckets: vec!["222233334444-g8s-p3x7d".into()],
            master_instances: vec!["i-0master99".into()],
            worker_instances: vec!["i-0worker1".into(), "i-0worker2".into(), "i-0worker3".into()],
        }
    }

    #[test]
    fn the_objects_carry_the_legacy_clusters_identity_shape_and_scaling() {
        let m = migrate(&fixture(), &live()).expect("a plan");
        let c = &m.cluster;
        assert_eq!(c.name_any(), "p3x7d");
        assert_eq!(c.namespace().as_deref(), Some("default"));
        assert_eq!(c.labels()[labels::RELEASE_VERSION], "6.3.0");
        assert_eq!(c.labels()[labels::ORGANIZATION], "initech");
        assert_eq!(c.spec.provider.region, "eu-west-1");
        assert_eq!(c.spec.provider.credential_secret.name, "credential-p3x7d");
        assert_eq!(c.spec.provider.credential_secret.namespace, "giantswarm");
        assert_eq!(c.spec.cluster.dns.domain, "tyrell.eu-west-1.aws.gigantic.io");
        assert_eq!(c.cidr(), Some("10.11.0.0/16"));
        let master = c.spec.provider.master.as_ref().expect("the master");
        assert_eq!((master.availability_zone.as_str(), master.instance_type.as_str()), ("eu-west-1b", "m4.xlarge"));

        let cp = &m.control_plane;
        assert_eq!(cp.name_any(), "m0k2q");
        assert_eq!(cp.spec.availability_zones, ["eu-west-1b"]);
        assert_eq!(cp.spec.instance_type, "m4.xlarge");
        assert_eq!(cp.spec.replicas, Some(1));
        assert_eq!(cp.labels()[labels::CLUSTER], "p3x7d");

        let np = &m.node_pool;
        assert_eq!(np.name_any(), "w1h6c");
        assert_eq!((np.spec.node_pool.scaling.min, np.spec.node_pool.scaling.max), (3, 3));
        assert_eq!(np.spec.node_pool.machine.docker_volume_size_gb, 150);
        assert_eq!(np.spec.provider.worker.instance_type, "m4.2xlarge");
        assert_eq!(np.spec.provider.availability_zones, ["eu-west-1b"]);
        for (kind, result) in [
            ("AWSCluster", c.validate()),
            ("AWSControlPlane", cp.validate("eu-west-1")),
            ("AWSMachineDeployment", np.validate("eu-west-1")),
        ] {
            assert_eq!(result, Ok(()), "{kind} is valid");
        }
    }

    #[test]
    fn the_plan_names_the_live_ids_and_orders_the_etcd_steps() {
        let m = migrate(&fixture(), &live()).expect("a plan");
        let ids = |list: &[Disposition]| list.iter().map(|d| d.id.clone()).collect::<Vec<_>>();
        assert_eq!(ids(&m.kept), ["1234abcd-key", "222233334444-g8s-p3x7d", "p3x7d"]);
        assert_eq!(ids(&m.recreated), ["vpc-0aa11", "pcx-0bb22", "Z0PUBLIC77", "Z0PRIVATE88", "p3x7d-api"]);
        assert_eq!(
            ids(&m.replaced),
            [
                "i-0master99",
                "vol-0dd44",
                "eni-0ee55",
                "master-asg-cc33",
                "worker-asg-ff66",
                "i-0worker1",
                "i-0worker2",
                "i-0worker3"
            ]
        );
        // The legacy subnets are not TCCP's layout of the block: the VPC cannot be imported.
        assert!(m.recreated[0].how.contains("private 10.11.0.0/19"), "{}", m.recreated[0].how);
        assert!(m.recreated[0].how.contains("public 10.11.0.0/19, private 10.11.32.0/19"), "{}", m.recreated[0].how);

        let text: Vec<String> = m.steps.iter().map(|s| format!("{} {}", s.title, s.commands.join(" "))).collect();
        let at = |needle: &str| {
            text.iter().position(|t| t.contains(needle)).unwrap_or_else(|| panic!("no step with {needle}: {text:#?}"))
        };
        // The first snapshot comes before anything; the drain before the pause; the master stops
        // before the second snapshot; the stacks go before the objects are applied.
        assert_eq!(at("create-snapshot --volume-id vol-0dd44"), 0);
        assert!(at("worker-asg-ff66") < at(labels::OPERATORKIT_PAUSED));
        assert!(at("--auto-scaling-group-name master-asg-cc33") > at(labels::OPERATORKIT_PAUSED));
        assert!(at("Stop the master i-0master99") < at("Snapshot the etcd volume vol-0dd44 again"));
        assert!(at("Snapshot the etcd volume vol-0dd44 again") < at(labels::ETCD_SNAPSHOT_ID));
        let deleted: Vec<&str> = m.steps[at("delete-stack")]
            .commands
            .iter()
            .filter(|c| c.contains(" delete-stack "))
            .filter_map(|c| c.split_whitespace().nth(6))
            .collect();
        assert_eq!(deleted, ["cluster-p3x7d-host-main", "cluster-p3x7d-guest-main", "cluster-p3x7d-host-setup"]);
        assert!(at("cluster-p3x7d-guest-main") < at("kubectl apply"));
        assert_eq!(m.steps.last().map(|s| s.by), Some(Actor::Operator));
    }

    #[test]
    fn a_config_whose_subnets_are_tccps_layout_is_still_recreated_and_says_why() {
        let mut config = fixture();
        config.spec.aws.vpc.public_subnet_cidr = "10.11.0.0/19".into();
        config.spec.aws.vpc.private_subnet_cidr = "10.11.32.0/19".into();
        let m = migrate(&config, &live()).expect("a plan");
        assert!(m.recreated[0].how.contains("never imports"), "{}", m.recreated[0].how);
        assert!(!m.recreated[0].how.contains("not TCCP's layout"), "{}", m.recreated[0].how);
    }

    #[test]
    fn bad_input_and_missing_stacks_name_the_field_or_stack_and_the_fix() {
        let mut config = fixture();
        config.spec.aws.masters.clear();
        let err = migrate(&config, &live()).expect_err("no master").to_string();
        assert!(err.contains("spec.aws.masters"), "{err}");

        let mut half = live();
        half.stacks.retain(|s| !s.name.ends_with("host-main"));
        let err = migrate(&fixture(), &half).expect_err("no host-main").to_string();
        assert!(err.contains("stack cluster-p3x7d-host-main does not exist"), "{err}");

        let mut rolling = live();
        rolling.stacks[1].status = "UPDATE_IN_PROGRESS".into();
        let err = migrate(&fixture(), &rolling).expect_err("guest-main busy").to_string();
        assert!(err.contains("cluster-p3x7d-guest-main is UPDATE_IN_PROGRESS"), "{err}");

        let mut stopped = live();
        stopped.master_instances.clear();
        let err = migrate(&fixture(), &stopped).expect_err("no master running").to_string();
        assert!(err.contains("master-asg-cc33 has no instance in service"), "{err}");
    }

    #[test]
    fn the_printed_file_is_the_plan_as_comments_then_three_objects() {
        let m = migrate(&fixture(), &live()).expect("a plan");
        let mut out = Vec::new();
        m.write(MigrateOutput::All, &mut out).expect("written");
        let text = String::from_utf8(out).expect("utf-8");
        let (comments, yaml): (Vec<&str>, Vec<&str>) = text.lines().partition(|l| l.starts_with('#'));
        assert!(comments.iter().any(|l| l.contains("vol-0dd44")));
        let mut objects = crate::plan::Objects::default();
        objects.add_yaml(&yaml.join("\n"), Path::new("migrated.yaml")).expect("render reads it");
        assert_eq!(
            (objects.clusters.len(), objects.control_planes.len(), objects.machine_deployments.len()),
            (1, 1, 1)
        );
        assert_eq!(objects.clusters[0].annotations().get(labels::OPERATORKIT_PAUSED).map(String::as_str), Some("true"));
    }
}

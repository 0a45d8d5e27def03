//! What every controller of the operator shares ([`Shared`]): the configuration, the Kubernetes
//! and AWS clients, the workload-cluster clients, the caches and memos, the event recorder and
//! the metrics.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use apis::release::Release;
use kube::runtime::events::EventType;
use node_lifecycle::clients::{ClientOptions, WorkloadClients};
use operatorkit::Events;
use parking_lot::Mutex;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::aws::AwsFactory;
use crate::aws::cloudformation::StackCache;
use crate::config::{AmiMap, OperatorConfig};

/// The finalizer on every Secret the operator reads for a cluster (its credential Secret, its
/// certificate and encryption Secrets), so that none goes while the cluster needs it.
pub const SECRET_FINALIZER: &str = "aws-operator.giantswarm.io/secret-in-use";

/// Labels of the per-stack-operation metrics.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StackOpLabels {
    /// `tccpi`, `tccp`, …
    pub stack: String,
    /// `create`, `update`, `delete`, `lift_protection`, `continue_rollback`, `describe`.
    pub operation: String,
    /// `success` or `error`.
    pub result: String,
}

/// Metrics of stack operations.
#[derive(Clone, Debug)]
pub struct StackMetrics {
    /// `aws_operator_stack_operations_total`.
    pub operations: Family<StackOpLabels, Counter>,
    /// `aws_operator_stack_operation_duration_seconds`.
    pub duration: Family<StackOpLabels, Histogram>,
    /// `aws_operator_stack_transitions_total`.
    pub transitions: Family<StackOpLabels, Counter>,
}

impl StackMetrics {
    /// Register the metrics.
    pub fn new(registry: &mut Registry) -> Self {
        let m = Self {
            operations: Family::default(),
            duration: Family::new_with_constructor(|| Histogram::new(exponential_buckets(0.01, 2.0, 12))),
            transitions: Family::default(),
        };
        operatorkit::metrics::register(
            registry,
            "aws_operator_stack_operations",
            "CloudFormation calls per stack kind, operation and result",
            m.operations.clone(),
        );
        operatorkit::metrics::register(
            registry,
            "aws_operator_stack_operation_duration_seconds",
            "Duration of CloudFormation calls per stack kind and operation",
            m.duration.clone(),
        );
        operatorkit::metrics::register(
            registry,
            "aws_operator_stack_transitions",
            "Observed stack status changes per stack kind (operation = the new status)",
            m.transitions.clone(),
        );
        m
    }
}

/// The `role` label of the unhealthy-node metrics.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RoleLabels {
    /// `master` or `worker`.
    pub role: String,
}

/// Metrics of the unhealthy-node terminator.
#[derive(Clone, Debug, Default)]
pub struct UnhealthyMetrics {
    /// `aws_operator_unhealthy_nodes_terminated_total`.
    pub terminated: Family<RoleLabels, Counter>,
    /// `aws_operator_unhealthy_nodes_held_total`.
    pub held: Counter,
    /// `aws_operator_unhealthy_nodes_unreplaceable_total`.
    pub unreplaceable: Counter,
}

impl UnhealthyMetrics {
    /// Register the metrics.
    pub fn new(registry: &mut Registry) -> Self {
        let m = Self::default();
        operatorkit::metrics::register(
            registry,
            "aws_operator_unhealthy_nodes_terminated",
            "Instances terminated in their Auto Scaling group because their workload-cluster node stayed NotReady, by role",
            m.terminated.clone(),
        );
        operatorkit::metrics::register(
            registry,
            "aws_operator_unhealthy_nodes_held",
            "Unhealthy nodes held back by the circuit breaker or the cooldown, counted per run",
            m.held.clone(),
        );
        operatorkit::metrics::register(
            registry,
            "aws_operator_unhealthy_nodes_unreplaceable",
            "Unhealthy nodes skipped because their spec.providerID names no instance, counted per run",
            m.unreplaceable.clone(),
        );
        m
    }

    /// Instances terminated so far for nodes of `role`.
    pub fn terminated(&self, role: &str) -> u64 {
        self.terminated.get_or_create(&RoleLabels { role: role.into() }).get()
    }
}

/// The management VPC: id, CIDR, and route tables as `(id, Name tag)`.
pub type ControlPlaneNetwork = (String, String, Vec<(String, String)>);

/// Process-lifetime memory of things that are expensive to look up and never change
/// while they exist.
#[derive(Debug, Default)]
pub struct Memo {
    /// Key ARN per cluster id.
    pub keys: HashMap<String, String>,
    /// The tags last made sure of on a cluster's key and buckets, per cluster id (as
    /// [`Memo::keys`]): a change of the cluster's cloud tags updates them in place.
    pub resource_tags: HashMap<String, std::collections::BTreeMap<String, String>>,
    /// Content hash per `bucket/key` of the node configs uploaded or verified by this process.
    pub uploads: HashMap<String, String>,
    /// Management VPC `(id, cidr)` and route tables per region.
    pub control_plane_network: HashMap<String, ControlPlaneNetwork>,
    /// When the addresses the master Endpoints of a cluster were last refreshed from were read.
    pub endpoints_refreshed: HashMap<String, Instant>,
    /// Per account cache key: the running masters' private addresses of all its clusters, by
    /// cluster id, and when they were read ([`crate::aws::ec2::all_master_ips`]).
    pub master_addresses: HashMap<String, (Instant, std::collections::BTreeMap<String, Vec<String>>)>,
    /// The last stack status announced by an event, per `account/region/stack`: a status write
    /// that the cache does not show yet must not announce the same transition twice.
    pub stack_status: HashMap<String, String>,
    /// Per `<management account/region>/<cluster id>`: the cluster zone whose delegation is in
    /// place, or when the delegation was last skipped for want of an intermediate zone.
    pub delegations: HashMap<String, Delegated>,
    /// Per `<management account/region>/<zone name>`: the installation's intermediate zone id
    /// (`None` when the account has no such zone) and when it was looked up.
    pub intermediate_zones: HashMap<String, (Instant, Option<String>)>,
    /// Per hosted zone id: the name servers Route53 assigned to it, which never change.
    pub name_servers: HashMap<String, Vec<String>>,
    /// Auto Scaling group (`<account cache key>/<group>`) → whether this process last put the
    /// cluster autoscaler's tag on it (`true`) or took it off (`false`); a group not in here
    /// gets the tag written once.
    pub autoscaler: HashMap<String, bool>,
    /// When the unhealthy-node terminator last terminated an instance, per `<namespace>/<name>`
    /// of the AWSCluster: the annotation that keeps it across restarts may reach the cache
    /// after the next run started, and the cooldown must hold in between.
    pub unhealthy_terminations: HashMap<String, jiff::Timestamp>,
    /// The objects (`<Kind>/<namespace>/<name>`) this process knows to hold no rollout slot
    /// ([`crate::rollout`]): their release reads no Lease until they acquire again.
    pub rollout_released: std::collections::HashSet<String>,
    /// Instances this process terminated for their age, per Auto Scaling group
    /// (`<account cache key>/<group>`): never counted again while a listing still shows them.
    pub max_age_replaced: HashMap<String, std::collections::BTreeSet<String>>,
    /// Per `account/region/stack`: the last approval problem (a stale or malformed approval)
    /// announced by a Warning event, so that each is announced once, not on every look.
    pub approval_notes: HashMap<String, String>,
    /// Per `<account cache key>/<stack>`: whether the update from the deployed template hash
    /// (first) to the desired one (second) replaces instances, so that a pool that waits reads
    /// its deployed template once, not on every look.
    pub update_rolls: HashMap<String, (String, String, bool)>,
    /// The management cluster's NAT addresses per management account (cache key), with when
    /// they were looked up; only lists that found addresses are kept.
    pub management_nat: HashMap<String, (Instant, Vec<String>)>,
    /// The clusters (`<namespace>/<name>`) told by a Warning event that their public API stays
    /// open because no management NAT address was found; told again after a restart.
    pub management_nat_missing: std::collections::HashSet<String>,
}

/// What [`Memo::delegations`] remembers of one cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delegated {
    /// The NS record for this cluster zone id is in place.
    Zone(String),
    /// The installation has no intermediate zone; looked at this instant.
    Skipped(Instant),
}

impl Memo {
    /// Forget what this process remembers of cluster `id` (tenant account `account`, bucket
    /// `bucket`) once it is deleted, so that a cluster re-created with the same id is built
    /// from scratch: its key looked up again, its node configs uploaded again.
    pub fn forget_cluster(&mut self, account: &str, bucket: &str, id: &str) {
        let cluster = format!("{account}/{id}");
        self.keys.remove(&cluster);
        self.resource_tags.remove(&cluster);
        self.endpoints_refreshed.remove(&cluster);
        self.delegations.retain(|key, _| !key.ends_with(&format!("/{id}")));
        self.unhealthy_terminations.retain(|key, _| !key.ends_with(&format!("/{id}")));
        let prefix = format!("{bucket}/");
        self.uploads.retain(|key, _| !key.starts_with(&prefix));
    }
}

/// Everything the controllers share.
pub struct Shared {
    /// The management cluster.
    pub client: kube::Client,
    /// AWS access.
    pub aws: AwsFactory,
    /// Settings.
    pub config: OperatorConfig,
    /// DescribeStacks per account.
    pub stacks: StackCache,
    /// Auto Scaling instances per account, for the drainers.
    pub instances: crate::aws::instances::InstanceCache,
    /// AMIs.
    pub amis: AmiMap,
    /// Metrics.
    pub metrics: StackMetrics,
    /// The unhealthy-node terminator's metrics.
    pub unhealthy: UnhealthyMetrics,
    /// Workload-cluster clients, one cached per cluster: the process's one cache, which the
    /// drain executor keeps current ([`node_lifecycle::drain::DrainerBuilder::clients`]).
    pub workload_clients: WorkloadClients,
    /// Memoised lookups.
    pub memo: Mutex<Memo>,
    /// `aws_operator_max_age_replacements_total`: instances terminated for their node pool's
    /// `maxNodeAge`.
    pub max_age_replacements: Counter,
    /// The time the controllers go by for maintenance windows and node ages: the system's;
    /// tests move it ([`node_lifecycle::maintenance::Clock::set`]).
    pub clock: node_lifecycle::maintenance::Clock,
    /// Which Cluster API kinds the management cluster serves ([`crate::capi`]).
    pub capi: crate::capi::CapiApis,
    events: Events,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared").field("config", &self.config).finish_non_exhaustive()
    }
}

impl Shared {
    /// Assemble the shared state.
    pub fn new(
        client: kube::Client,
        aws: AwsFactory,
        config: OperatorConfig,
        amis: AmiMap,
        registry: &mut Registry,
    ) -> Arc<Self> {
        let events = Events::new(client.clone(), &format!("aws-operator-{}", config.version));
        // The controllers' writes to workload clusters are fenced as their AWS calls are.
        let workload_clients = WorkloadClients::new(client.clone(), ClientOptions::for_operator("aws-operator"))
            .gated_by(aws.leadership().clone());
        let capi = crate::capi::CapiApis::new(client.clone(), config.capi_discovery_ttl);
        Arc::new(Self {
            capi,
            client,
            aws,
            stacks: StackCache::new(config.stack_listing_ttl, config.stack_busy_ttl),
            instances: crate::aws::instances::InstanceCache::default(),
            config,
            amis,
            metrics: StackMetrics::new(registry),
            unhealthy: UnhealthyMetrics::new(registry),
            workload_clients,
            memo: Mutex::new(Memo::default()),
            max_age_replacements: {
                let counter = Counter::default();
                operatorkit::metrics::register(
                    registry,
                    "aws_operator_max_age_replacements",
                    "Instances terminated in their Auto Scaling group because they were older than their node pool's maxNodeAge",
                    counter.clone(),
                );
                counter
            },
            clock: node_lifecycle::maintenance::Clock::system(),
            events,
        })
    }

    /// Publish a Normal event on `obj`; a failure to publish is logged, never returned.
    pub async fn event<K>(&self, obj: &K, reason: &str, note: String)
    where
        K: kube::Resource<DynamicType = ()>,
    {
        self.publish(obj, EventType::Normal, reason, "Reconcile", None, note).await;
    }

    /// Publish a Warning event on `obj`.
    pub async fn warning<K>(&self, obj: &K, reason: &str, note: String)
    where
        K: kube::Resource<DynamicType = ()>,
    {
        self.publish(obj, EventType::Warning, reason, "Reconcile", None, note).await;
    }

    /// Publish an event on `obj` with its `action` and `related` object. The recorder folds an
    /// event into an earlier one with the same type, reason, action, object and related object
    /// (only its count grows, its note stays the first one), so whatever tells two events apart
    /// must be in one of those fields.
    pub async fn publish<K>(
        &self,
        obj: &K,
        type_: EventType,
        reason: &str,
        action: &str,
        related: Option<k8s_openapi::api::core::v1::ObjectReference>,
        note: String,
    ) where
        K: kube::Resource<DynamicType = ()>,
    {
        self.events.publish(&obj.object_ref(&()), type_, reason, action, related, &note).await;
    }

    /// The id of the installation's intermediate zone `name` (`k8s.<domain>`) in the management
    /// account `cp`, `None` when the account has no such zone. Looked up in Route53 at most once
    /// per `--stack-listing-ttl-seconds` per management account and zone, whatever the number of
    /// clusters delegated from it: an installation without the zone costs one lookup per period,
    /// not one per cluster, and one with it a lookup per period for the clusters being created.
    pub async fn intermediate_zone(
        &self,
        cp: &crate::aws::AccountClients,
        name: &str,
    ) -> Result<Option<String>, crate::aws::AwsError> {
        let key = format!("{}/{name}", cp.cache_key());
        if let Some((at, id)) = self.memo.lock().intermediate_zones.get(&key)
            && at.elapsed() < self.config.stack_listing_ttl
        {
            return Ok(id.clone());
        }
        let id = crate::aws::route53::hosted_zone_by_name(cp, name).await?;
        self.memo.lock().intermediate_zones.insert(key, (Instant::now(), id.clone()));
        Ok(id)
    }

    /// The name servers of the tenant's hosted zone `zone_id`, read from Route53 once per
    /// process: a zone's delegation set never changes.
    pub async fn zone_name_servers(
        &self,
        tenant: &crate::aws::AccountClients,
        zone_id: &str,
    ) -> Result<Vec<String>, crate::aws::AwsError> {
        if let Some(servers) = self.memo.lock().name_servers.get(zone_id) {
            return Ok(servers.clone());
        }
        let servers = crate::aws::route53::zone_name_servers(tenant, zone_id).await?;
        if !servers.is_empty() {
            let mut memo = self.memo.lock();
            // Deleted clusters' zones are not tracked: the memo starts over when it is larger
            // than any installation's number of zones.
            if memo.name_servers.len() >= 8192 {
                memo.name_servers.clear();
            }
            memo.name_servers.insert(zone_id.to_string(), servers.clone());
        }
        Ok(servers)
    }

    /// The Release named `v<version>`.
    pub async fn release(&self, version: &str) -> Result<Option<Release>, kube::Error> {
        let api: kube::Api<Release> = kube::Api::all(self.client.clone());
        api.get_opt(&format!("v{version}")).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forgetting_a_cluster_clears_its_uploads_key_and_endpoints_only() {
        let mut memo = Memo::default();
        memo.keys.insert("111/eu-central-1/a1b2c".into(), "arn:key".into());
        memo.keys.insert("111/eu-central-1/other".into(), "arn:other".into());
        memo.endpoints_refreshed.insert("111/eu-central-1/a1b2c".into(), Instant::now());
        memo.uploads.insert("111-g8s-a1b2c/version/16.2.0/cloudconfig/master-0".into(), "h1".into());
        memo.uploads.insert("111-g8s-a1b2c/version/16.2.0/cloudconfig/worker".into(), "h2".into());
        memo.uploads.insert("111-g8s-a1b2cd/version/16.2.0/cloudconfig/worker".into(), "h3".into());
        memo.forget_cluster("111/eu-central-1", "111-g8s-a1b2c", "a1b2c");
        assert_eq!(memo.keys.keys().collect::<Vec<_>>(), ["111/eu-central-1/other"]);
        assert!(memo.endpoints_refreshed.is_empty());
        assert_eq!(memo.uploads.keys().collect::<Vec<_>>(), ["111-g8s-a1b2cd/version/16.2.0/cloudconfig/worker"]);
    }
}

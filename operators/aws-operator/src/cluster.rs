//! The AWSCluster controller: per cluster, the KMS key, the bucket pair, the cluster CIDR, the
//! TCCPI / TCCP / TCCPF stacks, the `master` Service and Endpoints, and the cluster's status.
//!
//! Resources, in order (each one stops the reconcile until its prerequisite exists, and the
//! object is requeued instead of waiting):
//!
//! 1. `inputs` — validates the spec, resolves the Release and the two AWS accounts. Bad input
//!    stops here with a `Ready=False` condition and a Warning event, before anything is touched
//!    in AWS.
//! 2. `ipam` — allocates the cluster CIDR under the IPAM lock and writes it to
//!    `status.provider.network.cidr`.
//! 3. `encryption` — the key `alias/<id>` and the buckets `<account>-g8s-<id>[-access-logs]`.
//! 4. `stacks` — TCCPI (management account), TCCP (tenant), TCCPF (management account).
//! 5. `delegation` — the NS record of the cluster zone in the installation's intermediate zone
//!    (management account), when Route53 is on.
//! 6. `master` — namespace `<id>`, Service and Endpoints `master`.
//! 7. `status` — conditions, stack states, `controlPlaneEndpoint`, `vpcID`.
//!
//! Deletion (`teardown`, last): deletes the cluster's AWSControlPlanes and
//! AWSMachineDeployments and waits until they are gone, removes the zone delegation, then deletes
//! TCCP (tenant) and after it
//! TCCPF and TCCPI (management account), empties and deletes the buckets, schedules the key for
//! deletion, removes the namespace and releases the credential and certificate Secrets (held
//! since creation, see `held_secrets`); the finalizer is held until all of that is done.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use apis::aws::{
    AWSCluster, AWSClusterStatus, AWSControlPlane, AWSMachineDeployment, ControlPlaneEndpoint,
    StackStatus as StatusEntry,
};
use apis::cluster_status::ClusterCondition;
use apis::release::Release;
use aws_stacks::ipam::{self, Ipv4Net};
use aws_stacks::names::{self, StackKind};
use aws_stacks::stacks::{self, tccp, tccpf, tccpi};
use k8s_openapi::api::core::v1::{Endpoints, Namespace, Service};
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use operatorkit::{Outcome, Resource, ResourceError, resource};

use crate::aws::AccountClients;
use crate::aws::stacks::{Deletion, DesiredStack, Progress};
use crate::common::{self, READY};
use crate::context::{Delegated, Shared};
use operatorkit::held_secrets;

/// The controller's name (and finalizer suffix).
pub const CONTROLLER: &str = "aws-operator-cluster-controller";

/// What the resources of one AWSCluster reconcile share.
#[derive(Debug)]
pub struct ClusterState {
    shared: Arc<Shared>,
    release: Option<Release>,
    tenant: Option<Arc<AccountClients>>,
    cp: Option<Arc<AccountClients>>,
    status: AWSClusterStatus,
    stacks: Vec<StatusEntry>,
    waiting: Option<String>,
    /// A failure being retried: the `Ready` reason and message.
    failure: Option<(&'static str, String)>,
    tccp: Option<tccp::Outputs>,
    /// The teardown completed in an earlier reconcile ([`TEARDOWN_COMPLETE`]).
    torn_down: bool,
}

impl ClusterState {
    /// A fresh state for `obj`.
    pub fn new(shared: Arc<Shared>, obj: &AWSCluster) -> Self {
        Self {
            shared,
            release: None,
            tenant: None,
            cp: None,
            status: obj.status.clone().unwrap_or_default(),
            stacks: Vec::new(),
            waiting: None,
            failure: None,
            tccp: None,
            torn_down: false,
        }
    }

    fn accounts(&self) -> Result<(&AccountClients, &AccountClients), ResourceError> {
        match (&self.tenant, &self.cp) {
            (Some(t), Some(c)) => Ok((t, c)),
            _ => Err(ResourceError::msg("Internal", "AWS clients were not set up")),
        }
    }

    /// Stop the reconcile to wait for `why`, after writing the status: what the cluster waits
    /// for and the stacks seen so far are visible while it waits (the `status` resource does
    /// not run after a stop).
    async fn wait(&mut self, obj: &AWSCluster, why: impl Into<String>) -> resource::Result<Outcome> {
        self.waiting.get_or_insert_with(|| why.into());
        write_cluster_status(self, obj).await?;
        Ok(Outcome::cancel_reconciliation().requeue_after(self.shared.config.poll))
    }

    /// Stop the reconcile at stack `name`, which is not ready.
    async fn stack_not_ready(&mut self, obj: &AWSCluster, name: &str, progress: Progress) -> resource::Result<Outcome> {
        match progress {
            Progress::Retrying { reason, message, retry_after } => {
                self.waiting = Some(message.clone());
                self.failure = Some((reason, message));
                write_cluster_status(self, obj).await?;
                Ok(Outcome::cancel_reconciliation().requeue_after(retry_after))
            }
            Progress::Ready(_) | Progress::Pending => self.wait(obj, format!("stack {name} is not ready")).await,
        }
    }
}

/// Record invalid input in the status; the returned error becomes the Warning event.
async fn reject(state: &mut ClusterState, obj: &AWSCluster, err: ResourceError) -> ResourceError {
    let (status, err) = common::reject(&state.shared, obj, obj.status.as_ref(), err).await;
    state.status = status;
    err
}

/// Validates and resolves the inputs.
#[derive(Debug)]
pub struct Inputs;

impl Resource<AWSCluster, ClusterState> for Inputs {
    fn name(&self) -> &str {
        "inputs"
    }

    async fn ensure_created(&self, state: &mut ClusterState, obj: &AWSCluster) -> resource::Result<Outcome> {
        let shared = state.shared.clone();
        let checked = async {
            if let Err(errors) = obj.spec.validate() {
                return Err(common::field_errors(obj, errors).into());
            }
            if common::cluster_id(obj)? != obj.name_any() {
                return Err(common::InvalidInput {
                    object: common::describe(obj),
                    reason: "InvalidClusterLabel",
                    message: format!("label {} must equal the AWSCluster's name", apis::labels::CLUSTER),
                }
                .into());
            }
            let release = common::release_of(&shared, obj).await?;
            let (tenant, cp) = common::clients(&shared, obj).await?;
            Ok::<_, ResourceError>((release, tenant, cp))
        }
        .await;
        match checked {
            Ok((release, tenant, cp)) => {
                // The credential Secret stays until the teardown no longer needs it.
                let cs = &obj.spec.provider.credential_secret;
                held_secrets::hold(&shared.client, &cs.namespace, &cs.name, common::SECRET_FINALIZER).await?;
                state.release = Some(release);
                state.tenant = Some(tenant);
                state.cp = Some(cp);
                Ok(Outcome::proceed())
            }
            Err(e) if !e.is_retryable() => Err(reject(state, obj, e).await),
            Err(e) => Err(e),
        }
    }

    async fn ensure_deleted(&self, state: &mut ClusterState, obj: &AWSCluster) -> resource::Result<Outcome> {
        // A teardown that completed needs nothing more from AWS: its Secrets may be gone already
        // (released just before the finalizer could be removed, by a crash or a conflict).
        if torn_down(obj) {
            state.torn_down = true;
            return Ok(Outcome::proceed());
        }
        // Deleting needs the accounts but not a valid spec or Release.
        match common::clients(&state.shared, obj).await {
            Ok((tenant, cp)) => {
                state.tenant = Some(tenant);
                state.cp = Some(cp);
                Ok(Outcome::proceed())
            }
            Err(e) if !e.is_retryable() => {
                // The cache may not show the completed teardown yet: its credential Secret is
                // gone because this process released it. Ask the API server before reporting.
                let api: Api<AWSCluster> =
                    Api::namespaced(state.shared.client.clone(), &obj.namespace().unwrap_or_default());
                if api.get_opt(&obj.name_any()).await?.is_some_and(|fresh| torn_down(&fresh)) {
                    state.torn_down = true;
                    return Ok(Outcome::proceed());
                }
                Err(reject(state, obj, e).await)
            }
            Err(e) => Err(e),
        }
    }
}

/// Allocates the cluster CIDR.
#[derive(Debug)]
pub struct Ipam;

impl Resource<AWSCluster, ClusterState> for Ipam {
    fn name(&self) -> &str {
        "ipam"
    }

    async fn ensure_created(&self, state: &mut ClusterState, obj: &AWSCluster) -> resource::Result<Outcome> {
        if state.status.provider.network.cidr.is_some() {
            return Ok(Outcome::proceed());
        }
        let shared = state.shared.clone();
        let range = match crate::ipam::range_for_cluster(&shared, obj).await {
            Ok(r) => r,
            Err(e) if !e.is_retryable() => return Err(reject(state, obj, e).await),
            Err(e) => return Err(e),
        };
        let (tenant, _) = state.accounts()?;
        let mask = crate::ipam::mask_of(obj, shared.config.subnet_mask_bits);
        let cidr = match crate::ipam::allocate(&shared, tenant, crate::ipam::Owner::Cluster(obj), range, mask).await? {
            crate::ipam::Allocation::Busy => return state.wait(obj, "waiting for the IPAM lock").await,
            crate::ipam::Allocation::Existing(cidr) => cidr,
            crate::ipam::Allocation::Allocated(cidr) => {
                shared.event(obj, "CIDRAllocated", format!("cluster CIDR {cidr} allocated from {range}")).await;
                cidr.to_string()
            }
        };
        state.status.provider.network.cidr = Some(cidr);
        Ok(Outcome::proceed())
    }

    async fn ensure_deleted(&self, _: &mut ClusterState, _: &AWSCluster) -> resource::Result<Outcome> {
        Ok(Outcome::proceed())
    }
}

/// The KMS key and the buckets.
#[derive(Debug)]
pub struct Encryption;

impl Resource<AWSCluster, ClusterState> for Encryption {
    fn name(&self) -> &str {
        "encryption"
    }

    async fn ensure_created(&self, state: &mut ClusterState, obj: &AWSCluster) -> resource::Result<Outcome> {
        let shared = state.shared.clone();
        let id = obj.name_any();
        let (tenant, _) = state.accounts()?;
        let memo_key = format!("{}/{id}", tenant.cache_key());
        if shared.memo.lock().keys.contains_key(&memo_key) {
            return Ok(Outcome::proceed());
        }
        let tags = common::base_tags(&shared, obj, &id);
        let arn = crate::aws::kms::ensure_key(tenant, &id, &tags).await?;
        crate::aws::s3::ensure_buckets(tenant, &id, &tags).await?;
        shared.memo.lock().keys.insert(memo_key, arn);
        Ok(Outcome::proceed())
    }

    async fn ensure_deleted(&self, _: &mut ClusterState, _: &AWSCluster) -> resource::Result<Outcome> {
        Ok(Outcome::proceed())
    }
}

/// The desired AZs of TCCP: the control plane's, every node pool's, and those already deployed
/// (the set never shrinks, reference §13 item 6).
async fn desired_azs(shared: &Shared, obj: &AWSCluster, deployed: &[String]) -> Result<Vec<String>, ResourceError> {
    let ns = obj.namespace().unwrap_or_default();
    let id = obj.name_any();
    let mut azs: BTreeSet<String> = deployed.iter().cloned().collect();
    for cp in common::control_planes(shared, &ns, &id).await? {
        azs.extend(cp.spec.availability_zones.iter().cloned());
    }
    for md in common::node_pools(shared, &ns, &id).await? {
        if md.metadata.deletion_timestamp.is_none() {
            azs.extend(md.spec.provider.availability_zones.iter().cloned());
        }
    }
    let region = &obj.spec.provider.region;
    Ok(azs.into_iter().filter(|az| az.starts_with(region.as_str())).collect())
}

/// The management VPC and its route tables, memoised per region.
pub async fn control_plane_network(
    shared: &Shared,
    cp: &AccountClients,
) -> Result<(String, String, Vec<(String, String)>), ResourceError> {
    if let Some(n) = shared.memo.lock().control_plane_network.get(&cp.cache_key()) {
        return Ok(n.clone());
    }
    let Some((vpc, cidr)) = crate::aws::ec2::control_plane_vpc(cp, &shared.config.installation).await? else {
        return Err(ResourceError::msg(
            "ControlPlaneVPCNotFound",
            format!(
                "no VPC tagged Name={} in the management account {} ({}): check --installation",
                shared.config.installation, cp.account_id, cp.region
            ),
        ));
    };
    let tables =
        crate::aws::ec2::control_plane_route_tables(cp, &vpc, &shared.config.control_plane_route_tables).await?;
    let n = (vpc, cidr, tables);
    shared.memo.lock().control_plane_network.insert(cp.cache_key(), n.clone());
    Ok(n)
}

/// The TCCPI, TCCP and TCCPF stacks.
#[derive(Debug)]
pub struct Stacks;

impl Resource<AWSCluster, ClusterState> for Stacks {
    fn name(&self) -> &str {
        "stacks"
    }

    async fn ensure_created(&self, state: &mut ClusterState, obj: &AWSCluster) -> resource::Result<Outcome> {
        let shared = state.shared.clone();
        let id = obj.name_any();
        let Some(cidr) = state.status.provider.network.cidr.clone() else {
            return state.wait(obj, "waiting for the cluster CIDR").await;
        };
        let (tenant, cp) = state.accounts()?;
        let (tenant, cp) = (Arc::new(tenant.clone()), Arc::new(cp.clone()));
        let Some(release) = state.release.clone() else {
            return Err(ResourceError::msg("Internal", "the Release was not resolved"));
        };
        let common = common::common(&shared.config, obj, &release);
        let recorded = |name: &str| obj.status.as_ref().and_then(|s| s.stacks.iter().find(|e| e.name == name).cloned());
        let bucket = names::bucket(&tenant.account_id, &id);

        // TCCPI: the peering role in the management account; never updated.
        let name = names::stack_name(&id, StackKind::Tccpi, None);
        let template =
            tccpi::render(&tccpi::Params { common: common.clone(), tenant_account_id: tenant.account_id.clone() });
        let desired = DesiredStack {
            kind: StackKind::Tccpi,
            name: name.clone(),
            template,
            tags: stacks::stack_tags(&common, StackKind::Tccpi, None),
            may_update: false,
            canonical_hash: None,
        };
        let (progress, entry) =
            crate::aws::stacks::ensure(&shared, &cp, obj, desired, None, recorded(&name).as_ref()).await?;
        state.stacks.push(entry);
        let Progress::Ready(tccpi_view) = progress else {
            return state.stack_not_ready(obj, &name, progress).await;
        };
        let Some(peer_role) = tccpi_view.outputs.get("PeerRoleARN").cloned() else {
            return Err(ResourceError::msg("MissingOutput", format!("stack {name} has no PeerRoleARN output")));
        };

        // TCCP: the tenant network.
        let name = names::stack_name(&id, StackKind::Tccp, None);
        let deployed: Vec<String> = recorded(&name).and(None::<Vec<String>>).unwrap_or_default();
        let observed = shared.stacks.get(&tenant.cache_key(), tenant.cfn.as_ref(), &name).await?;
        let deployed_azs: Vec<String> = observed
            .as_ref()
            .and_then(|v| v.outputs.get("AvailabilityZones"))
            .map(|s| s.split(',').filter(|a| !a.is_empty()).map(str::to_string).collect())
            .unwrap_or(deployed);
        let azs = desired_azs(&shared, obj, &deployed_azs).await?;
        if azs.is_empty() {
            return state.wait(obj, "waiting for an AWSControlPlane naming the availability zones").await;
        }
        let cluster_cidr: Ipv4Net = cidr
            .parse()
            .map_err(|e| ResourceError::msg("InvalidStatus", format!("status.provider.network.cidr {cidr}: {e}")))?;
        // The deployed layout is the anchor: a new zone takes a free block and no existing
        // subnet moves, whatever the zone's name sorts as.
        let deployed_layout = match &observed {
            Some(view) => tccp::deployed_layout(&view.outputs, cluster_cidr, None)
                .map_err(|e| ResourceError::msg("InvalidOutput", format!("stack {name}: {e}")))?,
            None => Vec::new(),
        };
        let layout = ipam::tccp_layout_preserving(cluster_cidr, None, &azs, &deployed_layout).map_err(|e| {
            ResourceError::msg("InvalidAvailabilityZones", format!("{}: {e}", common::describe(obj))).permanent()
        })?;
        let (cp_vpc, cp_cidr, cp_tables) = control_plane_network(&shared, &cp).await?;
        let control_plane = tccp::ControlPlaneVpc {
            account_id: cp.account_id.clone(),
            vpc_id: cp_vpc,
            cidr: cp_cidr,
            peer_role_arn: peer_role,
        };
        let params = tccp_params(&common, cluster_cidr, &layout, control_plane);
        let desired = DesiredStack {
            kind: StackKind::Tccp,
            name: name.clone(),
            template: tccp::render(&params),
            tags: stacks::stack_tags(&common, StackKind::Tccp, None),
            may_update: true,
            canonical_hash: None,
        };
        let (progress, entry) =
            crate::aws::stacks::ensure(&shared, &tenant, obj, desired, Some(&bucket), recorded(&name).as_ref()).await?;
        state.stacks.push(entry);
        let Progress::Ready(view) = progress else {
            return state.stack_not_ready(obj, &name, progress).await;
        };
        let outputs = tccp::Outputs::from_outputs(&view.outputs, &azs)
            .map_err(|e| ResourceError::msg("MissingOutput", format!("stack {name}: {e}")))?;
        state.status.provider.network.vpc_id = Some(outputs.vpc_id.clone());

        // TCCPF: routes from the management VPC into the tenant's private subnets.
        let name = names::stack_name(&id, StackKind::Tccpf, None);
        let params = tccpf::Params {
            common: common.clone(),
            peering_connection_id: outputs.vpc_peering_connection_id.clone(),
            route_tables: cp_tables
                .iter()
                .map(|(id, name)| stacks::CpRouteTable { id: id.clone(), name: name.clone() })
                .collect(),
            private_subnets: layout
                .iter()
                .map(|a| tccpf::PrivateSubnet { az: a.name.clone(), cidr: a.private.to_string() })
                .collect(),
        };
        state.tccp = Some(outputs);
        let desired = DesiredStack {
            kind: StackKind::Tccpf,
            name: name.clone(),
            template: tccpf::render(&params),
            tags: stacks::stack_tags(&common, StackKind::Tccpf, None),
            may_update: true,
            canonical_hash: None,
        };
        let (progress, entry) =
            crate::aws::stacks::ensure(&shared, &cp, obj, desired, None, recorded(&name).as_ref()).await?;
        state.stacks.push(entry);
        if !matches!(progress, Progress::Ready(_)) {
            return state.stack_not_ready(obj, &name, progress).await;
        }
        Ok(Outcome::proceed())
    }

    async fn ensure_deleted(&self, _: &mut ClusterState, _: &AWSCluster) -> resource::Result<Outcome> {
        Ok(Outcome::proceed())
    }
}

/// Delegates the cluster's zone `<id>.k8s.<domain>` from the installation's intermediate zone
/// `k8s.<domain>` in the management account: an NS record naming the zone's name servers, TTL
/// 300, upserted through the management account's credentials (upstream's `bridgezone`). An
/// installation without an intermediate zone is skipped with an event, and looked at again after
/// the stack listing's expiry. Done once per process and cluster zone; the teardown removes the
/// record.
#[derive(Debug)]
pub struct Delegation;

impl Resource<AWSCluster, ClusterState> for Delegation {
    fn name(&self) -> &str {
        "delegation"
    }

    async fn ensure_created(&self, state: &mut ClusterState, obj: &AWSCluster) -> resource::Result<Outcome> {
        let shared = state.shared.clone();
        let Some(zone_id) = state.tccp.as_ref().and_then(|o| o.hosted_zone_id.clone()) else {
            // Route53 is off, or TCCP is not there yet.
            return Ok(Outcome::proceed());
        };
        let (tenant, cp) = state.accounts()?;
        let id = obj.name_any();
        let memo_key = format!("{}/{id}", cp.cache_key());
        let settled = match shared.memo.lock().delegations.get(&memo_key) {
            Some(Delegated::Zone(z)) => *z == zone_id,
            Some(Delegated::Skipped(at)) => at.elapsed() < shared.config.stack_listing_ttl,
            None => false,
        };
        if settled {
            return Ok(Outcome::proceed());
        }
        let (name, parent) = delegation_zones(obj);
        let Some(parent_id) = crate::aws::route53::hosted_zone_by_name(cp, &parent).await? else {
            shared.memo.lock().delegations.insert(memo_key, Delegated::Skipped(std::time::Instant::now()));
            shared
                .event(
                    obj,
                    "DelegationSkipped",
                    format!(
                        "the management account {} has no hosted zone {parent}: zone {name} is not delegated",
                        cp.account_id
                    ),
                )
                .await;
            return Ok(Outcome::proceed());
        };
        let servers = crate::aws::route53::zone_name_servers(tenant, &zone_id).await?;
        if servers.is_empty() {
            return Err(ResourceError::msg(
                "DelegationFailed",
                format!("hosted zone {zone_id} ({name}) has no name servers to delegate to"),
            ));
        }
        let sorted = |mut v: Vec<String>| {
            v.iter_mut().for_each(|s| *s = s.trim_end_matches('.').to_string());
            v.sort();
            v
        };
        let current = crate::aws::route53::ns_record(cp, &parent_id, &name).await?;
        if current.map(sorted) != Some(sorted(servers.clone())) {
            crate::aws::route53::change_ns_record(cp, &parent_id, &name, &servers, false).await?;
            shared.event(obj, "ZoneDelegated", format!("zone {name} delegated from {parent}")).await;
        }
        shared.memo.lock().delegations.insert(memo_key, Delegated::Zone(zone_id));
        Ok(Outcome::proceed())
    }

    async fn ensure_deleted(&self, _: &mut ClusterState, _: &AWSCluster) -> resource::Result<Outcome> {
        // The teardown removes the record, after the node pools and the control plane.
        Ok(Outcome::proceed())
    }
}

/// The cluster's zone `<id>.k8s.<domain>` and the intermediate zone `k8s.<domain>` it is
/// delegated from.
fn delegation_zones(obj: &AWSCluster) -> (String, String) {
    let domain = &obj.spec.cluster.dns.domain;
    (names::tenant_base_domain(&obj.name_any(), domain), format!("k8s.{domain}"))
}

/// Remove the cluster zone's NS record from the intermediate zone, if both exist.
async fn remove_delegation(shared: &Shared, cp: &AccountClients, obj: &AWSCluster) -> Result<(), ResourceError> {
    let (name, parent) = delegation_zones(obj);
    let Some(parent_id) = crate::aws::route53::hosted_zone_by_name(cp, &parent).await? else {
        return Ok(());
    };
    if let Some(values) = crate::aws::route53::ns_record(cp, &parent_id, &name).await? {
        crate::aws::route53::change_ns_record(cp, &parent_id, &name, &values, true).await?;
        shared.event(obj, "DelegationRemoved", format!("zone {name} is no longer delegated from {parent}")).await;
    }
    shared.memo.lock().delegations.remove(&format!("{}/{}", cp.cache_key(), obj.name_any()));
    Ok(())
}

/// Namespace `<id>`, Service and Endpoints `master` in the management cluster.
#[derive(Debug)]
pub struct Master;

impl Resource<AWSCluster, ClusterState> for Master {
    fn name(&self) -> &str {
        "master"
    }

    async fn ensure_created(&self, state: &mut ClusterState, obj: &AWSCluster) -> resource::Result<Outcome> {
        let shared = state.shared.clone();
        let id = obj.name_any();
        let (tenant, _) = state.accounts()?;
        let org = obj.labels().get(apis::labels::ORGANIZATION).cloned().unwrap_or_default();
        let pp = PatchParams::apply("aws-operator").force();
        let ns: Api<Namespace> = Api::all(shared.client.clone());
        let ns_obj = serde_json::json!({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": id, "labels": {"giantswarm.io/cluster": id, "giantswarm.io/organization": org}}
        });
        ns.patch(&id, &pp, &Patch::Apply(&ns_obj)).await?;
        let domain = &obj.spec.cluster.dns.domain;
        let svc: Api<Service> = Api::namespaced(shared.client.clone(), &id);
        let svc_obj = serde_json::json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {
                "name": "master",
                "labels": {"app": "master", "giantswarm.io/cluster": id, "giantswarm.io/organization": org},
                "annotations": {
                    "giantswarm.io/etcd-domain": format!("{}:2379", names::etcd_host(&id, domain)),
                    "giantswarm.io/prometheus-cluster": id,
                }
            },
            "spec": {"ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 443}]}
        });
        svc.patch("master", &pp, &Patch::Apply(&svc_obj)).await?;
        // Endpoints are refreshed from EC2 at most every `endpoints_refresh`, so idle clusters
        // do not cost a DescribeInstances per resync.
        let memo_key = format!("{}/{id}", tenant.cache_key());
        let due = shared
            .memo
            .lock()
            .endpoints_refreshed
            .get(&memo_key)
            .is_none_or(|t| t.elapsed() >= shared.config.endpoints_refresh);
        if due {
            let ips = crate::aws::ec2::master_ips(tenant, &id).await?;
            if !ips.is_empty() {
                let ep: Api<Endpoints> = Api::namespaced(shared.client.clone(), &id);
                let ep_obj = serde_json::json!({
                    "apiVersion": "v1", "kind": "Endpoints",
                    "metadata": {"name": "master", "labels": {"app": "master", "cluster": id, "customer": org}},
                    "subsets": [{
                        "addresses": ips.iter().map(|ip| serde_json::json!({"ip": ip})).collect::<Vec<_>>(),
                        "ports": [{"name": "https", "port": 443, "protocol": "TCP"}]
                    }]
                });
                ep.patch("master", &pp, &Patch::Apply(&ep_obj)).await?;
                shared.memo.lock().endpoints_refreshed.insert(memo_key, std::time::Instant::now());
            }
        }
        Ok(Outcome::proceed())
    }

    async fn ensure_deleted(&self, _: &mut ClusterState, _: &AWSCluster) -> resource::Result<Outcome> {
        Ok(Outcome::proceed())
    }
}

/// TCCP's parameters from the cluster CIDR and its zone layout (`ipam::tccp_layout`), for the
/// controller and `aws-operator render` alike. No AWS-CNI pod block: releases from 19 on run
/// Cilium.
pub fn tccp_params(
    common: &stacks::Common,
    cluster_cidr: Ipv4Net,
    layout: &[ipam::TccpAz],
    control_plane: tccp::ControlPlaneVpc,
) -> tccp::Params {
    tccp::Params {
        common: common.clone(),
        vpc_cidr: cluster_cidr.to_string(),
        pod_cidr: None,
        azs: layout
            .iter()
            .map(|a| tccp::TccpAz {
                name: a.name.clone(),
                public_cidr: a.public.to_string(),
                private_cidr: a.private.to_string(),
                aws_cni_cidr: a.aws_cni.map(|c| c.to_string()),
            })
            .collect(),
        control_plane,
        whitelist: Default::default(),
    }
}

/// The `Ready` reason while the cluster's own stacks are ready and its control plane or node
/// pools are not.
const WAITING_FOR_NODES: &str = "WaitingForNodes";

/// Writes the status: conditions, stacks, endpoint.
#[derive(Debug)]
pub struct Status;

impl Resource<AWSCluster, ClusterState> for Status {
    fn name(&self) -> &str {
        "status"
    }

    async fn ensure_created(&self, state: &mut ClusterState, obj: &AWSCluster) -> resource::Result<Outcome> {
        write_cluster_status(state, obj).await?;
        // Waiting only for the control plane and node pools needs no polling: every change of
        // theirs requeues the cluster (the controller watches them). Anything else of its own
        // that is not ready yet is looked at again after the poll interval.
        // A lifecycle `Updating` set after the fact is closed by the next reconcile.
        let ready = &state.status.conditions.iter().find(|c| c.type_ == READY);
        let updating = state.status.cluster.has_condition(ClusterCondition::Updating);
        match ready {
            Some(c) if (c.status == "True" && !updating) || c.reason == WAITING_FOR_NODES => Ok(Outcome::proceed()),
            _ => Ok(Outcome::proceed().requeue_after(state.shared.config.poll)),
        }
    }

    async fn ensure_deleted(&self, _: &mut ClusterState, _: &AWSCluster) -> resource::Result<Outcome> {
        Ok(Outcome::proceed())
    }
}

/// Whether a recorded stack status is an update under way (requested, in progress, or rolled
/// back and waiting to be tried again).
fn update_under_way(entry: &StatusEntry) -> bool {
    entry.status == crate::aws::stacks::UPDATE_REQUESTED
        || (entry.status.starts_with("UPDATE_") && entry.status.ends_with("_IN_PROGRESS"))
        || (entry.status == "UPDATE_ROLLBACK_COMPLETE" && entry.attempts.is_some())
}

/// Advance the Giant Swarm lifecycle of a cluster that is `ready` (or not) from the stack
/// entries of the cluster, its control plane and its node pools, and return the condition set,
/// if any.
///
/// `Creating` until the first time the cluster is ready, then `Created`. After that, any stack
/// update, whether caused by a new operator version or by a change of the spec (a node pool
/// scaled, a zone added), sets `Updating`, and the cluster being ready again with no update
/// under way sets `Updated` and records the operator version. An update that began and ended
/// between two looks at the cluster (its stack `UPDATE_COMPLETE` after the last lifecycle
/// change) still sets `Updating`, closed on the next reconcile.
pub fn advance_lifecycle<'a>(
    lifecycle: &mut apis::cluster_status::StatusCluster,
    ready: bool,
    stacks: impl IntoIterator<Item = &'a StatusEntry>,
    version: &str,
    now: jiff::Timestamp,
) -> Option<ClusterCondition> {
    if lifecycle.conditions.is_empty() {
        lifecycle.set_condition(ClusterCondition::Creating, now);
        return Some(ClusterCondition::Creating);
    }
    if !lifecycle.has_condition(ClusterCondition::Created) {
        if ready {
            lifecycle.set_condition(ClusterCondition::Created, now);
            lifecycle.add_version(version, now);
            return Some(ClusterCondition::Created);
        }
        return None;
    }
    let last_change = [ClusterCondition::Created, ClusterCondition::Updating, ClusterCondition::Updated]
        .into_iter()
        .filter_map(|c| lifecycle.condition(c).map(|c| c.last_transition_time.0))
        .max();
    let (mut under_way, mut completed_since) = (false, false);
    for entry in stacks {
        under_way |= update_under_way(entry);
        completed_since |= entry.status == "UPDATE_COMPLETE"
            && entry.last_transition_time.as_ref().is_some_and(|t| last_change.is_none_or(|l| t.0 > l));
    }
    if lifecycle.has_condition(ClusterCondition::Updating) {
        if ready && !under_way {
            lifecycle.set_condition(ClusterCondition::Updated, now);
            lifecycle.add_version(version, now);
            return Some(ClusterCondition::Updated);
        }
        return None;
    }
    if under_way || completed_since {
        lifecycle.set_condition(ClusterCondition::Updating, now);
        return Some(ClusterCondition::Updating);
    }
    None
}

/// Compute and write the cluster status. Also called when a resource stopped the reconcile to
/// wait, so progress is visible.
pub async fn write_cluster_status(state: &mut ClusterState, obj: &AWSCluster) -> Result<(), ResourceError> {
    let shared = state.shared.clone();
    let id = obj.name_any();
    let now = jiff::Timestamp::now();
    let mut status = state.status.clone();
    status.control_plane_endpoint =
        Some(ControlPlaneEndpoint { host: names::api_host(&id, &obj.spec.cluster.dns.domain), port: 443 });
    // Keeps the entries of stacks this reconcile did not reach.
    common::merge_stacks(&mut status.stacks, &state.stacks);
    // The whole cluster is created when its own stacks and those of its control plane and node
    // pools are usable.
    let ns = obj.namespace().unwrap_or_default();
    let cps = common::control_planes(&shared, &ns, &id).await?;
    let mds = common::node_pools(&shared, &ns, &id).await?;
    let children_ready = !cps.is_empty()
        && cps.iter().all(|c| {
            c.status.as_ref().is_some_and(|s| operatorkit::conditions::is_status_condition_true(&s.conditions, READY))
        })
        && mds.iter().all(|m| {
            m.status.as_ref().is_some_and(|s| operatorkit::conditions::is_status_condition_true(&s.conditions, READY))
        });
    let own_ready = state.waiting.is_none()
        && status.stacks.len() >= 3
        && status.stacks.iter().all(|s| crate::aws::stacks::usable(&s.status));
    let updating = status.stacks.iter().any(update_under_way);
    let (ready, reason, message) = if own_ready && children_ready {
        (true, "ClusterReady", "every stack of the cluster, its control plane and its node pools is ready".to_string())
    } else if let Some((reason, message)) = &state.failure {
        (false, *reason, message.clone())
    } else if own_ready {
        (
            false,
            WAITING_FOR_NODES,
            "the cluster network is ready; waiting for the control plane and node pools".to_string(),
        )
    } else if updating {
        (false, "StacksUpdating", state.waiting.clone().unwrap_or_else(|| "stacks are updating".into()))
    } else {
        (false, "StacksCreating", state.waiting.clone().unwrap_or_else(|| "stacks are being created".into()))
    };
    common::set_condition(&mut status.conditions, READY, ready, reason, message, obj.metadata.generation);
    // The Giant Swarm lifecycle conditions.
    let lifecycle = &mut status.cluster;
    lifecycle.id.clone_from(&id);
    if let Some(cidr) = &status.provider.network.cidr {
        lifecycle.network.cidr.clone_from(cidr);
    }
    let children_stacks = cps
        .iter()
        .filter_map(|c| c.status.as_ref())
        .flat_map(|s| &s.stacks)
        .chain(mds.iter().filter_map(|m| m.status.as_ref()).flat_map(|s| &s.stacks));
    let changed =
        advance_lifecycle(lifecycle, ready, status.stacks.iter().chain(children_stacks), &shared.config.version, now);
    common::write_status(&shared, obj, obj.status.as_ref(), &status).await?;
    if let Some(condition) = changed {
        shared
            .event(
                obj,
                &format!("Cluster{condition}"),
                format!("cluster {id} is {}", condition.as_str().to_lowercase()),
            )
            .await;
    }
    state.status = status;
    Ok(())
}

/// Ordered deletion.
#[derive(Debug)]
pub struct Teardown;

impl Resource<AWSCluster, ClusterState> for Teardown {
    fn name(&self) -> &str {
        "teardown"
    }

    async fn ensure_created(&self, _: &mut ClusterState, _: &AWSCluster) -> resource::Result<Outcome> {
        Ok(Outcome::proceed())
    }

    async fn ensure_deleted(&self, state: &mut ClusterState, obj: &AWSCluster) -> resource::Result<Outcome> {
        let shared = state.shared.clone();
        if state.torn_down {
            release_secrets(&shared, obj).await?;
            return Ok(Outcome::proceed());
        }
        let id = obj.name_any();
        let ns = obj.namespace().unwrap_or_default();
        let (tenant, cp) = state.accounts()?;
        let (tenant, cp) = (tenant.clone(), cp.clone());
        let keep = |state: &mut ClusterState, why: String| {
            state.waiting = Some(why);
            Outcome::cancel_reconciliation().keep_finalizer().requeue_after(shared.config.poll)
        };
        let mut status = deleting_status(obj);
        // Node pools and the control plane go first. Deleting the AWSCluster deletes them:
        // explicitly, not through owner references, since Kubernetes' default (background)
        // deletion would wait for the cluster to be gone before deleting them, while the
        // cluster's teardown waits for them.
        let mds = common::node_pools(&shared, &ns, &id).await?;
        let cps = common::control_planes(&shared, &ns, &id).await?;
        if !mds.is_empty() || !cps.is_empty() {
            delete_children(&shared, obj, &mds, &cps).await?;
            common::write_status(&shared, obj, obj.status.as_ref(), &status).await?;
            return Ok(keep(
                state,
                format!("waiting for {} node pools and {} control planes to be deleted", mds.len(), cps.len()),
            ));
        }
        if shared.config.route53_enabled {
            remove_delegation(&shared, &cp, obj).await?;
        }
        // Tenant stacks before management-account stacks.
        for (aws, kind) in [(&tenant, StackKind::Tccp), (&cp, StackKind::Tccpf), (&cp, StackKind::Tccpi)] {
            let name = names::stack_name(&id, kind, None);
            let recorded = status.stacks.iter().find(|e| e.name == name).cloned();
            let (deletion, entry) =
                crate::aws::stacks::delete(&shared, aws, obj, kind, &name, recorded.as_ref()).await?;
            let (out, failed) = match deletion {
                Deletion::Gone => (None, None),
                Deletion::Pending => (Some(keep(state, format!("deleting stack {name}"))), None),
                Deletion::Failed { message, retry_after } => {
                    (Some(Outcome::cancel_reconciliation().keep_finalizer().requeue_after(retry_after)), Some(message))
                }
            };
            common::record_deletion(&shared, obj, obj.status.as_ref(), &mut status, entry, failed).await?;
            if let Some(out) = out {
                return Ok(out);
            }
        }
        if !crate::aws::s3::delete_buckets(&tenant, &id).await? {
            return Ok(keep(state, "emptying the cluster bucket".into()));
        }
        crate::aws::kms::schedule_key_deletion(&tenant, &id).await?;
        // A cluster re-created with the same id in this process starts from nothing: its new
        // bucket gets every node config again.
        shared.memo.lock().forget_cluster(&tenant.cache_key(), &names::bucket(&tenant.account_id, &id), &id);
        let nsapi: Api<Namespace> = Api::all(shared.client.clone());
        match nsapi.delete(&id, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(e.into()),
        }
        // Recorded before the Secrets go, so that a later reconcile (the finalizer removal lost a
        // race, or the process stopped here) finishes without them.
        common::set_condition(
            &mut status.conditions,
            common::READY,
            false,
            TEARDOWN_COMPLETE,
            "every AWS resource of the cluster is deleted or scheduled for deletion; releasing its Secrets",
            obj.metadata.generation,
        );
        common::write_status(&shared, obj, obj.status.as_ref(), &status).await?;
        release_secrets(&shared, obj).await?;
        shared
            .event(
                obj,
                "ClusterDeleted",
                format!("cluster {id}: stacks, buckets and key are gone or scheduled for deletion"),
            )
            .await;
        Ok(Outcome::proceed())
    }
}

/// The `Ready` reason of a cluster whose teardown is complete and whose Secrets are released.
pub const TEARDOWN_COMPLETE: &str = "TeardownComplete";

/// Whether the cluster's teardown completed (see [`TEARDOWN_COMPLETE`]).
fn torn_down(obj: &AWSCluster) -> bool {
    obj.metadata.deletion_timestamp.is_some()
        && obj
            .status
            .as_ref()
            .is_some_and(|s| s.conditions.iter().any(|c| c.type_ == common::READY && c.reason == TEARDOWN_COMPLETE))
}

/// Delete the cluster's control planes and node pools that are not being deleted yet.
async fn delete_children(
    shared: &Shared,
    obj: &AWSCluster,
    mds: &[AWSMachineDeployment],
    cps: &[AWSControlPlane],
) -> Result<(), ResourceError> {
    let ns = obj.namespace().unwrap_or_default();
    let deleted = |r: Result<_, kube::Error>| match r {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e),
    };
    let mut names = Vec::new();
    let md_api: Api<AWSMachineDeployment> = Api::namespaced(shared.client.clone(), &ns);
    for md in mds.iter().filter(|m| m.metadata.deletion_timestamp.is_none()) {
        deleted(md_api.delete(&md.name_any(), &DeleteParams::default()).await.map(drop))?;
        names.push(format!("AWSMachineDeployment {}", md.name_any()));
    }
    let cp_api: Api<AWSControlPlane> = Api::namespaced(shared.client.clone(), &ns);
    for cp in cps.iter().filter(|c| c.metadata.deletion_timestamp.is_none()) {
        deleted(cp_api.delete(&cp.name_any(), &DeleteParams::default()).await.map(drop))?;
        names.push(format!("AWSControlPlane {}", cp.name_any()));
    }
    if !names.is_empty() {
        shared.event(obj, "DeletingChildren", format!("deleting {} with the cluster", names.join(", "))).await;
    }
    Ok(())
}

/// Release the credential Secret (unless another cluster uses it), the certificate Secrets and
/// the encryption-provider config Secret.
async fn release_secrets(shared: &Shared, obj: &AWSCluster) -> Result<(), ResourceError> {
    let cs = &obj.spec.provider.credential_secret;
    let clusters: Api<AWSCluster> = Api::all(shared.client.clone());
    let shared_with_others = clusters.list(&Default::default()).await?.items.iter().any(|c| {
        c.metadata.uid != obj.metadata.uid
            && c.spec.provider.credential_secret.name == cs.name
            && c.spec.provider.credential_secret.namespace == cs.namespace
    });
    if !shared_with_others {
        held_secrets::release(&shared.client, &cs.namespace, &cs.name, common::SECRET_FINALIZER).await?;
    }
    let ns = obj.namespace().unwrap_or_default();
    let certs_ns = crate::node_config::certificates_namespace(shared, &ns);
    for secret in crate::node_config::certificate_secrets(shared, certs_ns, &obj.name_any()).await? {
        held_secrets::release(&shared.client, certs_ns, &secret.name_any(), common::SECRET_FINALIZER).await?;
    }
    let encryption = crate::node_config::encryption_config_secret(&obj.name_any());
    held_secrets::release(&shared.client, certs_ns, &encryption, common::SECRET_FINALIZER).await?;
    Ok(())
}

/// The status of a cluster being deleted: lifecycle `Deleting`, `Ready=False` (reason
/// `Deleting`). Written with the first stack entry, or alone while the children go first.
fn deleting_status(obj: &AWSCluster) -> AWSClusterStatus {
    let mut status = obj.status.clone().unwrap_or_default();
    let now = jiff::Timestamp::now();
    operatorkit::conditions::mark_cluster_deleting(&mut status.cluster, now);
    common::set_condition(
        &mut status.conditions,
        READY,
        false,
        "Deleting",
        "the cluster is being deleted",
        obj.metadata.generation,
    );
    status
}

/// Stack name → status of a cluster's own stacks, for tests and the CLI.
pub fn stack_states(obj: &AWSCluster) -> BTreeMap<String, String> {
    obj.status
        .as_ref()
        .map(|s| s.stacks.iter().map(|e| (e.name.clone(), e.status.clone())).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use apis::aws::StackAccount;
    use apis::cluster_status::StatusCluster;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;

    fn t(secs: i64) -> jiff::Timestamp {
        jiff::Timestamp::from_second(1_800_000_000 + secs).unwrap_or_default()
    }

    fn stack(name: &str, status: &str, at: i64) -> StatusEntry {
        StatusEntry {
            name: name.into(),
            kind: "tcnp".into(),
            account: StackAccount::Tenant,
            status: status.into(),
            reason: None,
            last_transition_time: Some(Time(t(at))),
            attempts: None,
        }
    }

    fn latest(l: &StatusCluster) -> Vec<&str> {
        l.conditions.iter().map(|c| c.type_.as_str()).collect()
    }

    #[test]
    fn every_stack_update_is_updating_then_updated() {
        let mut l = StatusCluster::default();
        let created = [stack("tccp", "CREATE_COMPLETE", 5)];
        assert_eq!(advance_lifecycle(&mut l, false, &created, "16.2.0", t(0)), Some(ClusterCondition::Creating));
        assert_eq!(advance_lifecycle(&mut l, false, &created, "16.2.0", t(5)), None);
        assert_eq!(advance_lifecycle(&mut l, true, &created, "16.2.0", t(10)), Some(ClusterCondition::Created));
        assert_eq!(l.latest_version(), Some("16.2.0"));
        assert_eq!(advance_lifecycle(&mut l, true, &created, "16.2.0", t(20)), None, "nothing changed");

        // A node pool's stack is updated (no version change): Updating while it runs, Updated
        // once the cluster is ready again.
        let updating = [created[0].clone(), stack("tcnp-np1", crate::aws::stacks::UPDATE_REQUESTED, 30)];
        assert_eq!(advance_lifecycle(&mut l, false, &updating, "16.2.0", t(30)), Some(ClusterCondition::Updating));
        let in_progress = [created[0].clone(), stack("tcnp-np1", "UPDATE_IN_PROGRESS", 35)];
        assert_eq!(advance_lifecycle(&mut l, true, &in_progress, "16.2.0", t(35)), None, "still under way");
        let done = [created[0].clone(), stack("tcnp-np1", "UPDATE_COMPLETE", 40)];
        assert_eq!(advance_lifecycle(&mut l, false, &done, "16.2.0", t(40)), None, "not ready yet");
        assert_eq!(advance_lifecycle(&mut l, true, &done, "16.2.0", t(45)), Some(ClusterCondition::Updated));
        assert_eq!(latest(&l), ["Updated", "Created"]);
        assert_eq!(advance_lifecycle(&mut l, true, &done, "16.2.0", t(50)), None, "the same update counts once");

        // An update that began and ended between two looks still shows, then closes.
        let unseen = [created[0].clone(), stack("tcnp-np1", "UPDATE_COMPLETE", 60)];
        assert_eq!(advance_lifecycle(&mut l, true, &unseen, "16.2.0", t(61)), Some(ClusterCondition::Updating));
        assert_eq!(advance_lifecycle(&mut l, true, &unseen, "16.2.0", t(62)), Some(ClusterCondition::Updated));

        // A new operator version updates the stacks: its version is recorded when done.
        let upgrade = [stack("tccp", "UPDATE_IN_PROGRESS", 70)];
        assert_eq!(advance_lifecycle(&mut l, false, &upgrade, "16.3.0", t(70)), Some(ClusterCondition::Updating));
        let upgraded = [stack("tccp", "UPDATE_COMPLETE", 80)];
        assert_eq!(advance_lifecycle(&mut l, true, &upgraded, "16.3.0", t(81)), Some(ClusterCondition::Updated));
        assert_eq!(l.latest_version(), Some("16.3.0"));

        // A rolled-back update being retried is still an update under way.
        let mut failed = stack("tccp", "UPDATE_ROLLBACK_COMPLETE", 90);
        failed.attempts = Some(1);
        assert_eq!(advance_lifecycle(&mut l, false, &[failed], "16.3.0", t(90)), Some(ClusterCondition::Updating));
    }
}

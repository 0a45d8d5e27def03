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
//! 5. `master` — namespace `<id>`, Service and Endpoints `master`.
//! 6. `status` — conditions, stack states, `controlPlaneEndpoint`, `vpcID`.
//!
//! Deletion (`teardown`, last): deletes the cluster's AWSControlPlanes and
//! AWSMachineDeployments and waits until they are gone, then deletes TCCP (tenant) and after it
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
use crate::common::{self, READY};
use crate::context::Shared;
use crate::stack_ops::{self, Deletion, DesiredStack, Progress};
use crate::{held_secrets, ipam_lock};

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
    tccp: Option<tccp::Outputs>,
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
            tccp: None,
        }
    }

    fn accounts(&self) -> Result<(&AccountClients, &AccountClients), ResourceError> {
        match (&self.tenant, &self.cp) {
            (Some(t), Some(c)) => Ok((t, c)),
            _ => Err(ResourceError::msg("Internal", "AWS clients were not set up")),
        }
    }

    fn wait(&mut self, why: impl Into<String>) -> Outcome {
        self.waiting.get_or_insert_with(|| why.into());
        Outcome::cancel_reconciliation().requeue_after(self.shared.config.poll)
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
                held_secrets::hold(&shared.client, &cs.namespace, &cs.name, held_secrets::FINALIZER).await?;
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
        // Deleting needs the accounts but not a valid spec or Release.
        match common::clients(&state.shared, obj).await {
            Ok((tenant, cp)) => {
                state.tenant = Some(tenant);
                state.cp = Some(cp);
                Ok(Outcome::proceed())
            }
            Err(e) if !e.is_retryable() => Err(reject(state, obj, e).await),
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
        let range = match ipam_lock::range_for_cluster(&shared, obj).await {
            Ok(r) => r,
            Err(e) if !e.is_retryable() => return Err(reject(state, obj, e).await),
            Err(e) => return Err(e),
        };
        let (tenant, _) = state.accounts()?;
        let mask = ipam_lock::mask_of(obj, shared.config.subnet_mask_bits);
        let Some(lock) = ipam_lock::acquire(&shared).await? else {
            return Ok(state.wait("waiting for the IPAM lock"));
        };
        let result = async {
            let reserved = ipam_lock::reserved(&shared, tenant).await?;
            let cidr = ipam::free(range, mask, &reserved).map_err(|e| {
                ResourceError::msg(
                    "IpamExhausted",
                    format!("{}: no free /{mask} in {range}: {e}", common::describe(obj)),
                )
            })?;
            let api: Api<AWSCluster> = Api::namespaced(shared.client.clone(), &obj.namespace().unwrap_or_default());
            let patch = serde_json::json!({"status": {"provider": {"network": {"cidr": cidr.to_string()}}}});
            api.patch_status(&obj.name_any(), &PatchParams::default(), &Patch::Merge(&patch)).await?;
            Ok::<_, ResourceError>(cidr)
        }
        .await;
        lock.release(&shared).await;
        let cidr = result?;
        shared.event(obj, "CIDRAllocated", format!("cluster CIDR {cidr} allocated from {range}")).await;
        state.status.provider.network.cidr = Some(cidr.to_string());
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
        let arn = crate::services::ensure_key(tenant, &id, &tags).await?;
        crate::services::ensure_buckets(tenant, &id, &tags).await?;
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
    let Some((vpc, cidr)) = crate::services::control_plane_vpc(cp, &shared.config.installation).await? else {
        return Err(ResourceError::msg(
            "ControlPlaneVPCNotFound",
            format!(
                "no VPC tagged Name={} in the management account {} ({}): check --installation",
                shared.config.installation, cp.account_id, cp.region
            ),
        ));
    };
    let tables =
        crate::services::control_plane_route_tables(cp, &vpc, &shared.config.control_plane_route_tables).await?;
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
            return Ok(state.wait("waiting for the cluster CIDR"));
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
        let (progress, entry) = stack_ops::ensure(&shared, &cp, obj, desired, None, recorded(&name).as_ref()).await?;
        state.stacks.push(entry);
        let Progress::Ready(tccpi_view) = progress else {
            return Ok(state.wait(format!("stack {name} is not ready")));
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
            return Ok(state.wait("waiting for an AWSControlPlane naming the availability zones"));
        }
        let cluster_cidr: Ipv4Net = cidr
            .parse()
            .map_err(|e| ResourceError::msg("InvalidStatus", format!("status.provider.network.cidr {cidr}: {e}")))?;
        let layout = ipam::tccp_layout(cluster_cidr, None, &azs).map_err(|e| {
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
            stack_ops::ensure(&shared, &tenant, obj, desired, Some(&bucket), recorded(&name).as_ref()).await?;
        state.stacks.push(entry);
        let Progress::Ready(view) = progress else {
            return Ok(state.wait(format!("stack {name} is not ready")));
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
        let (progress, entry) = stack_ops::ensure(&shared, &cp, obj, desired, None, recorded(&name).as_ref()).await?;
        state.stacks.push(entry);
        if !matches!(progress, Progress::Ready(_)) {
            return Ok(state.wait(format!("stack {name} is not ready")));
        }
        Ok(Outcome::proceed())
    }

    async fn ensure_deleted(&self, _: &mut ClusterState, _: &AWSCluster) -> resource::Result<Outcome> {
        Ok(Outcome::proceed())
    }
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
            let ips = crate::services::master_ips(tenant, &id).await?;
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
        let ready = &state.status.conditions.iter().find(|c| c.type_ == READY);
        match ready {
            Some(c) if c.status == "True" || c.reason == WAITING_FOR_NODES => Ok(Outcome::proceed()),
            _ => Ok(Outcome::proceed().requeue_after(state.shared.config.poll)),
        }
    }

    async fn ensure_deleted(&self, _: &mut ClusterState, _: &AWSCluster) -> resource::Result<Outcome> {
        Ok(Outcome::proceed())
    }
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
    if !state.stacks.is_empty() {
        let mut stacks = state.stacks.clone();
        // Keep the entries of stacks this reconcile did not reach.
        for old in &status.stacks {
            if !stacks.iter().any(|s| s.name == old.name) {
                stacks.push(old.clone());
            }
        }
        stacks.sort_by(|a, b| a.name.cmp(&b.name));
        status.stacks = stacks;
    }
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
        && status.stacks.iter().all(|s| stack_ops::usable(&s.status));
    let updating = status.stacks.iter().any(|s| s.status.starts_with("UPDATE_") && s.status.ends_with("_IN_PROGRESS"));
    let (ready, reason, message) = if own_ready && children_ready {
        (true, "ClusterReady", "every stack of the cluster, its control plane and its node pools is ready".to_string())
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
    if lifecycle.conditions.is_empty() {
        lifecycle.set_condition(ClusterCondition::Creating, now);
    }
    if ready && !lifecycle.has_condition(ClusterCondition::Created) {
        lifecycle.set_condition(ClusterCondition::Created, now);
        lifecycle.add_version(&shared.config.version, now);
    } else if lifecycle.has_condition(ClusterCondition::Created) {
        let latest = lifecycle.latest_version().map(str::to_string);
        if updating || latest.as_deref() != Some(shared.config.version.as_str()) {
            if !ready {
                lifecycle.set_condition(ClusterCondition::Updating, now);
            } else {
                lifecycle.set_condition(ClusterCondition::Updated, now);
                lifecycle.add_version(&shared.config.version, now);
            }
        }
    }
    common::write_status(&shared, obj, obj.status.as_ref(), &status).await?;
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
        let id = obj.name_any();
        let ns = obj.namespace().unwrap_or_default();
        let (tenant, cp) = state.accounts()?;
        let (tenant, cp) = (tenant.clone(), cp.clone());
        let keep = |state: &mut ClusterState, why: String| {
            state.waiting = Some(why);
            Outcome::cancel_reconciliation().keep_finalizer().requeue_after(shared.config.poll)
        };
        mark_deleting(&shared, obj).await?;
        // Node pools and the control plane go first. Deleting the AWSCluster deletes them:
        // explicitly, not through owner references, since Kubernetes' default (background)
        // deletion would wait for the cluster to be gone before deleting them, while the
        // cluster's teardown waits for them.
        let mds = common::node_pools(&shared, &ns, &id).await?;
        let cps = common::control_planes(&shared, &ns, &id).await?;
        if !mds.is_empty() || !cps.is_empty() {
            delete_children(&shared, obj, &mds, &cps).await?;
            return Ok(keep(
                state,
                format!("waiting for {} node pools and {} control planes to be deleted", mds.len(), cps.len()),
            ));
        }
        // Tenant stacks before management-account stacks.
        for (aws, kind) in [(&tenant, StackKind::Tccp), (&cp, StackKind::Tccpf), (&cp, StackKind::Tccpi)] {
            let name = names::stack_name(&id, kind, None);
            match stack_ops::delete(&shared, aws, obj, kind, &name).await? {
                Deletion::Gone => {}
                Deletion::Pending => return Ok(keep(state, format!("deleting stack {name}"))),
                Deletion::Failed { message, retry_after } => {
                    common::mark_not_ready(&shared, obj, obj.status.as_ref(), "StackDeleteFailed", message).await?;
                    return Ok(Outcome::cancel_reconciliation().keep_finalizer().requeue_after(retry_after));
                }
            }
        }
        if !crate::services::delete_buckets(&tenant, &id).await? {
            return Ok(keep(state, "emptying the cluster bucket".into()));
        }
        crate::services::schedule_key_deletion(&tenant, &id).await?;
        // A cluster re-created with the same id in this process starts from nothing: its new
        // bucket gets every node config again.
        shared.memo.lock().forget_cluster(&tenant.cache_key(), &names::bucket(&tenant.account_id, &id), &id);
        let nsapi: Api<Namespace> = Api::all(shared.client.clone());
        match nsapi.delete(&id, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(e.into()),
        }
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

/// Release the credential Secret (unless another cluster uses it) and the certificate Secrets.
async fn release_secrets(shared: &Shared, obj: &AWSCluster) -> Result<(), ResourceError> {
    let cs = &obj.spec.provider.credential_secret;
    let clusters: Api<AWSCluster> = Api::all(shared.client.clone());
    let shared_with_others = clusters.list(&Default::default()).await?.items.iter().any(|c| {
        c.metadata.uid != obj.metadata.uid
            && c.spec.provider.credential_secret.name == cs.name
            && c.spec.provider.credential_secret.namespace == cs.namespace
    });
    if !shared_with_others {
        held_secrets::release(&shared.client, &cs.namespace, &cs.name, held_secrets::FINALIZER).await?;
    }
    let ns = obj.namespace().unwrap_or_default();
    let certs_ns = crate::node_config::certificates_namespace(shared, &ns);
    for secret in crate::node_config::certificate_secrets(shared, certs_ns, &obj.name_any()).await? {
        held_secrets::release(&shared.client, certs_ns, &secret.name_any(), held_secrets::FINALIZER).await?;
    }
    Ok(())
}

async fn mark_deleting(shared: &Shared, obj: &AWSCluster) -> Result<(), ResourceError> {
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
    common::write_status(shared, obj, obj.status.as_ref(), &status).await?;
    Ok(())
}

/// Stack name → status of a cluster's own stacks, for tests and the CLI.
pub fn stack_states(obj: &AWSCluster) -> BTreeMap<String, String> {
    obj.status
        .as_ref()
        .map(|s| s.stacks.iter().map(|e| (e.name.clone(), e.status.clone())).collect())
        .unwrap_or_default()
}

//! The KVMConfig controller: per cluster, its inputs, node indexes, the objects kvm-operator
//! puts into the management cluster, its status and, on deletion, the ordered teardown.
//!
//! Resources, in order:
//!
//! 1. `inputs` — dereference and validate: the Release (`v<release label>`), the cluster's
//!    certificate and encryption-key Secrets (in its namespace or `--certificates-namespace`),
//!    the spec. Bad input stops here with `Ready=False` naming the field and the fix, and a
//!    Warning event; nothing is written or deleted.
//! 2. `node-indexes` — `status.kvm.nodeIndexes`: stable, lowest free from 1, written only when
//!    it changes.
//! 3. `workload-cluster` ([`workload`]) — the workload cluster's Nodes, through the
//!    `<id>-kubeconfig` Secret; a cluster not reachable yet is waited for, not an error.
//! 4. `objects` ([`apply`]) — namespace `<id>`, ServiceAccount, the two ClusterRoleBindings, the
//!    node Secrets, the etcd PVCs, the Deployments (new ones created, those of removed nodes
//!    deleted one at a time, changed ones replaced one at a time, masters first, workers only
//!    while every workload-cluster master is schedulable: [`kvm_objects::rolling`]), Services
//!    and Ingresses, by server-side apply; an object whose desired state is unchanged is not
//!    written, and while the cluster waits only its Deployments are read again.
//! 5. `status` — `Ready` (what the cluster waits for) and `status.cluster`
//!    ([`kvm_objects::lifecycle`]): `Creating` → `Created`, `Updating` → `Updated` on a new
//!    Release, the nodes as the workload cluster reports them, the releases the cluster
//!    converged to. Written only when it changed, so an idle resync writes nothing.
//!
//! Deletion ([`teardown`]): `Deleting`, then the Deployments, and once their pods are gone the
//! PVCs, Services, Ingresses and the namespace, and last the two ClusterRoleBindings (which the
//! original leaked); the finalizer is held until all of it is gone.

use std::sync::Arc;

use apis::cluster_status::ClusterCondition;
use apis::kvm::{KVMConfig, KVMConfigStatus};
use apis::labels;
use apis::release::{Release, release_name};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Secret};
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, Resource as _, ResourceExt};
use kvm_objects::cluster::{Cluster, InputError};
use kvm_objects::ignition::{MASTER_CERTS, WORKER_CERTS};
use node_lifecycle::disruption;
use operatorkit::error::InvalidInput;
use operatorkit::status::{READY, describe, reject, set_condition, write_status};
use operatorkit::{Outcome, Resource, ResourceError, ResourceSet, resource};
use semver::VersionReq;

use crate::context::Shared;
use crate::plan::{ClusterSecrets, components};

pub mod apply;
pub mod certificates;
pub mod maintenance;
pub mod teardown;
pub mod workload;

/// The controller's name (and finalizer suffix).
pub const CONTROLLER: &str = crate::config::CLUSTER_CONTROLLER;

/// The resource set `name` for the Releases `requirement` matches: the steps in the order they
/// run.
pub fn resource_set(shared: Arc<Shared>, name: String, requirement: VersionReq) -> ResourceSet<KVMConfig> {
    ResourceSet::builder(name, requirement, move |obj: Arc<KVMConfig>, _| {
        let shared = shared.clone();
        async move { Ok(ClusterState::new(shared, &obj)) }
    })
    .resource(Inputs)
    .resource(NodeIndexes)
    .resource(workload::WorkloadNodes)
    .resource(apply::Objects)
    .resource(Status)
    .resource(teardown::Teardown)
    .build()
}

/// What the resources of one KVMConfig reconcile share.
#[derive(Debug)]
pub struct ClusterState {
    shared: Arc<Shared>,
    /// The status as this reconcile leaves it.
    status: KVMConfigStatus,
    cluster: Option<Cluster>,
    secrets: ClusterSecrets,
    /// The workers' host-volume PVCs, sized by their PersistentVolumes.
    host_volume_pvcs: Vec<PersistentVolumeClaim>,
    /// What the cluster still waits for, for `Ready`'s message.
    waiting: Option<String>,
    /// The workload cluster's Nodes; `None` when they could not be read.
    wc_nodes: Option<Vec<k8s_openapi::api::core::v1::Node>>,
    /// Why the workload cluster could not be read.
    wc_problem: Option<String>,
    /// The cluster's maintenance settings, read with its inputs.
    maintenance: Option<maintenance::Settings>,
    /// Why a disruptive step waits, when it does: `Ready`'s reason and when to look again.
    hold: Option<maintenance::Hold>,
    /// When to look again at a settled cluster (the next node to come of age).
    look_again: Option<std::time::Duration>,
}

impl ClusterState {
    /// A fresh state for `obj`.
    pub fn new(shared: Arc<Shared>, obj: &KVMConfig) -> Self {
        Self {
            shared,
            status: obj.status.clone().unwrap_or_default(),
            cluster: None,
            secrets: ClusterSecrets::default(),
            host_volume_pvcs: Vec::new(),
            waiting: None,
            wc_nodes: None,
            wc_problem: None,
            maintenance: None,
            hold: None,
            look_again: None,
        }
    }

    fn maintenance(&self) -> Result<&maintenance::Settings, ResourceError> {
        self.maintenance.as_ref().ok_or_else(|| {
            ResourceError::from(InvalidInput {
                object: "KVMConfig".into(),
                reason: "InputsNotRead",
                message: "the cluster's maintenance settings were not read before its objects".into(),
            })
        })
    }

    fn cluster(&self) -> Result<&Cluster, ResourceError> {
        self.cluster.as_ref().ok_or_else(|| {
            ResourceError::from(InvalidInput {
                object: "KVMConfig".into(),
                reason: "InputsNotRead",
                message: "the cluster's inputs were not read before its objects".into(),
            })
        })
    }
}

/// The reason of an [`InputError`] in `Ready`.
fn reason(error: &InputError) -> &'static str {
    match error {
        InputError::Invalid { .. } | InputError::MissingField { .. } => "InvalidSpec",
        InputError::MissingLabel { .. } => "MissingLabel",
        InputError::MissingComponent { .. } => "InvalidRelease",
        InputError::NoDnsServers => "NoDnsServers",
    }
}

/// Read and check everything the cluster's objects are built from.
async fn read_inputs(shared: &Shared, obj: &KVMConfig) -> Result<ReadInputs, ResourceError> {
    let invalid = |reason: &'static str, message: String| InvalidInput { object: describe(obj), reason, message };
    let Some(label) = obj.labels().get(labels::RELEASE_VERSION).filter(|v| !v.is_empty()) else {
        return Err(invalid(
            "MissingReleaseLabel",
            format!("label {} is missing: set it to the release the cluster runs", labels::RELEASE_VERSION),
        )
        .into());
    };
    // The id names the namespace and the bindings: checked, then claimed, before anything is
    // issued or built for it.
    if let Err(e) = apis::cluster_id::check("spec.cluster.id", &obj.spec.cluster.id) {
        return Err(node_lifecycle::claims::invalid(describe(obj), &e).into());
    }
    let name = release_name(label);
    let Some(release) = Api::<Release>::all(shared.client.clone()).get_opt(&name).await? else {
        return Err(invalid(
            "ReleaseNotFound",
            format!("Release {name} does not exist: create it or fix label {}", labels::RELEASE_VERSION),
        )
        .into());
    };
    let cluster = Cluster::new(obj, &name, &components(&release), &shared.config.settings).map_err(|e| match e {
        // The shared form of field errors: the object is named once, by the event and condition.
        InputError::Invalid { errors, .. } => operatorkit::error::field_errors(obj, errors),
        other => invalid(reason(&other), other.detail()),
    })?;
    // The workers' host volumes: each claims the one local PersistentVolume of its mount tag.
    let tags = kvm_objects::deployment::host_volume_tags(&cluster);
    let host_volume_pvcs = if tags.is_empty() {
        Vec::new()
    } else {
        let selector = format!("{} in ({})", kvm_objects::names::keys::MOUNT_TAG, tags.join(","));
        let volumes =
            Api::<PersistentVolume>::all(shared.client.clone()).list(&ListParams::default().labels(&selector)).await?;
        kvm_objects::deployment::host_volume_pvcs(&cluster, &volumes.items)
            .map_err(|e| invalid("HostVolumeUnavailable", e.to_string()))?
    };
    // Claimed once every check that writes nothing passed, and before anything is issued.
    claim(shared, obj, &cluster).await?;
    let namespace = shared.certificates_namespace.clone().unwrap_or_else(|| obj.namespace().unwrap_or_default());
    let certificates = certificates::issue(&shared.client, &namespace, &cluster).await?;
    let listed = Api::<Secret>::namespaced(shared.client.clone(), &namespace)
        .list(&ListParams::default().labels(&format!("{}={}", labels::CLUSTER, cluster.id)))
        .await?;
    let secrets = ClusterSecrets::find(&listed.items, &cluster.id);
    let needed: Vec<&str> = if cluster.nodes(kvm_objects::cluster::Role::Worker).next().is_some() {
        MASTER_CERTS.iter().chain(&WORKER_CERTS).copied().collect()
    } else {
        MASTER_CERTS.to_vec()
    };
    let mut missing: Vec<&str> = needed.into_iter().filter(|c| !secrets.certs.contains_key(*c)).collect();
    missing.sort();
    missing.dedup();
    if !missing.is_empty() {
        return Err(invalid(
            "MissingCertificates",
            format!(
                "no complete certificate Secret (keys ca, crt, key) labelled {}={} and giantswarm.io/certificate=<name> in namespace {namespace} for: {}; create them (cert-operator does) or set --certificates-namespace",
                labels::CLUSTER,
                cluster.id,
                missing.join(", ")
            ),
        )
        .into());
    }
    if secrets.encryption_key.is_none() {
        return Err(invalid(
            "MissingEncryptionKey",
            format!(
                "no Secret labelled {}={} and giantswarm.io/randomkey=encryption with key encryption in namespace {namespace}: create it (the randomkeys producer does)",
                labels::CLUSTER,
                cluster.id
            ),
        )
        .into());
    }
    Ok(ReadInputs { cluster, secrets, host_volume_pvcs, certificates })
}

/// The KVMConfig as the owner of its id ([`apis::cluster_id`]). Node indexes in its status,
/// which only the operator writes, prove an earlier version reconciled it.
pub fn owner(obj: &KVMConfig) -> apis::cluster_id::Owner {
    let reconciled_before = obj.status.as_ref().is_some_and(|s| !s.kvm.node_indexes.is_empty());
    apis::cluster_id::Owner::of(obj, &obj.spec.cluster.id, reconciled_before)
}

/// Claim the cluster's id: the namespace `<id>`, labelled with the KVMConfig's UID.
async fn claim(shared: &Shared, obj: &KVMConfig, cluster: &Cluster) -> Result<(), ResourceError> {
    let owner = owner(obj);
    let labels = cluster.common_labels();
    match node_lifecycle::claims::claim(&shared.client, &owner, &labels, true).await? {
        node_lifecycle::claims::Claim::Held => Ok(()),
        node_lifecycle::claims::Claim::InUse { holder } => {
            Err(node_lifecycle::claims::in_use(describe(obj), &owner, "spec.cluster.id", &holder).into())
        }
        node_lifecycle::claims::Claim::Free => Err(ResourceError::msg("Internal", "the cluster id was not claimed")),
    }
}

/// What [`read_inputs`] found.
struct ReadInputs {
    cluster: Cluster,
    secrets: ClusterSecrets,
    host_volume_pvcs: Vec<PersistentVolumeClaim>,
    /// What the certificate step wrote, and when it renews next.
    certificates: node_lifecycle::pki_secrets::Ensured,
}

/// Step 1: dereference and validate.
#[derive(Debug)]
pub struct Inputs;

impl Resource<KVMConfig, ClusterState> for Inputs {
    fn name(&self) -> &str {
        "inputs"
    }

    async fn ensure_created(&self, state: &mut ClusterState, obj: &KVMConfig) -> resource::Result<Outcome> {
        match read_inputs(&state.shared, obj).await {
            Ok(ReadInputs { cluster, secrets, host_volume_pvcs, certificates }) => {
                state.cluster = Some(cluster);
                state.secrets = secrets;
                state.host_volume_pvcs = host_volume_pvcs;
                state.maintenance = Some(maintenance::Settings::of(obj));
                for (reason, note) in certificates.events() {
                    state.shared.events.normal(&obj.object_ref(&()), "Reconcile", reason, note).await;
                }
                // Looked at again when the next certificate is due for renewal.
                Ok(match certificates.renew_in(std::time::SystemTime::now()) {
                    Some(after) => Outcome::proceed().requeue_after(after),
                    None => Outcome::proceed(),
                })
            }
            Err(e) if !e.is_retryable() => {
                let (status, e) = reject(&state.shared.client, obj, obj.status.as_ref(), e).await;
                state.status = status;
                Err(e)
            }
            Err(e) => Err(e),
        }
    }

    async fn ensure_deleted(&self, _: &mut ClusterState, _: &KVMConfig) -> resource::Result<Outcome> {
        // The teardown needs nothing but the cluster id: a cluster whose Release or Secrets are
        // gone can still be deleted.
        Ok(Outcome::proceed())
    }
}

/// Step 2: `status.kvm.nodeIndexes`.
#[derive(Debug)]
pub struct NodeIndexes;

impl Resource<KVMConfig, ClusterState> for NodeIndexes {
    fn name(&self) -> &str {
        "node-indexes"
    }

    async fn ensure_created(&self, state: &mut ClusterState, obj: &KVMConfig) -> resource::Result<Outcome> {
        let cluster = state.cluster()?;
        let ids: Vec<&str> = cluster.nodes.iter().map(|n| n.id.as_str()).collect();
        let allocation = kvm_objects::node_index::allocate(&state.status.kvm.node_indexes, &ids);
        if allocation.indexes != state.status.kvm.node_indexes {
            // Persisted before anything is built from them: a crash after this write finds
            // the same indexes again, never duplicates.
            // A merge patch merges maps: the ids of removed nodes are set to null to go.
            let mut entries: serde_json::Map<String, serde_json::Value> =
                state.status.kvm.node_indexes.keys().map(|id| (id.clone(), serde_json::Value::Null)).collect();
            entries.extend(allocation.indexes.iter().map(|(id, index)| (id.clone(), (*index).into())));
            let patch = serde_json::json!({ "status": { "kvm": { "nodeIndexes": entries } } });
            Api::<KVMConfig>::namespaced(state.shared.client.clone(), &obj.namespace().unwrap_or_default())
                .patch_status(&obj.name_any(), &PatchParams::default(), &Patch::Merge(&patch))
                .await?;
            state.status.kvm.node_indexes = allocation.indexes;
        }
        Ok(Outcome::proceed())
    }

    async fn ensure_deleted(&self, _: &mut ClusterState, _: &KVMConfig) -> resource::Result<Outcome> {
        Ok(Outcome::proceed())
    }
}

/// Step 5: `Ready` and the cluster lifecycle.
#[derive(Debug)]
pub struct Status;

impl Resource<KVMConfig, ClusterState> for Status {
    fn name(&self) -> &str {
        "status"
    }

    async fn ensure_created(&self, state: &mut ClusterState, obj: &KVMConfig) -> resource::Result<Outcome> {
        let generation = obj.metadata.generation;
        let now = jiff::Timestamp::now();
        let cluster = state.cluster()?;
        let mut status = state.status.clone();
        if status.cluster.id.is_empty() {
            status.cluster.id.clone_from(&cluster.id);
        }
        match &state.waiting {
            Some(why) => {
                let reason = state.hold.as_ref().map_or("Converging", |h| h.reason);
                set_condition(&mut status.conditions, READY, false, reason, why.clone(), generation);
            }
            None => {
                set_condition(
                    &mut status.conditions,
                    READY,
                    true,
                    "Reconciled",
                    "every object of the cluster is in place and every node Deployment is available",
                    generation,
                );
            }
        }
        let set = kvm_objects::lifecycle::advance(
            &mut status.cluster,
            cluster,
            state.wc_nodes.as_deref(),
            state.waiting.is_none(),
            now,
        );
        if let Some(condition) = set {
            tracing::info!(cluster = %cluster.id, release = %cluster.release_version, %condition, "cluster lifecycle");
        }
        // Settled: created, not updating, and the release it runs recorded. Until then the
        // pods and the workload cluster, which this controller does not watch, are looked at
        // again after the poll interval.
        let lifecycle = &status.cluster;
        let settled = lifecycle.has_condition(ClusterCondition::Created)
            && !lifecycle.has_condition(ClusterCondition::Updating)
            && lifecycle.has_version(&cluster.release_version);
        // The maintenance settings: a condition naming each problem (and a Warning when one
        // appears); a problem holds disruptive work only.
        let problems = state.maintenance.as_ref().map_or(Ok(()), |m| m.problems(obj));
        let before = obj.status.as_ref().map_or(&[][..], |s| s.conditions.as_slice());
        let new_problem = disruption::set_settings_condition(&mut status.conditions, before, &problems, generation);
        let outcome = if state.waiting.is_some() || !settled {
            let retry = state.hold.as_ref().and_then(|h| h.retry_after).unwrap_or(state.shared.poll);
            Outcome::proceed().requeue_after(retry.min(state.shared.poll))
        } else if let Some(after) = state.look_again {
            Outcome::proceed().requeue_after(after)
        } else {
            Outcome::proceed()
        };
        write_status(&state.shared.client, obj, obj.status.as_ref(), &status).await?;
        if let Some(message) = new_problem {
            state
                .shared
                .events
                .warning(&obj.object_ref(&()), "Reconcile", disruption::INVALID_MAINTENANCE, message)
                .await;
        }
        if let Some(condition) = set {
            let note = condition.event_note(&cluster.id);
            state.shared.events.normal(&obj.object_ref(&()), "Reconcile", &condition.event_reason(), note).await;
        }
        state.status = status;
        Ok(outcome)
    }

    async fn ensure_deleted(&self, _: &mut ClusterState, _: &KVMConfig) -> resource::Result<Outcome> {
        Ok(Outcome::proceed())
    }
}

/// The key of a KVMConfig in the operator's memory of applied objects: `namespace/name`.
pub fn cache_key(obj: &KVMConfig) -> String {
    format!("{}/{}", obj.namespace().unwrap_or_default(), obj.name_any())
}

/// The labels selecting the objects of cluster `id` that this operator manages.
pub fn managed_selector(id: &str) -> String {
    format!("{}={id},{}={}", labels::CLUSTER, labels::MANAGED_BY, kvm_objects::names::OPERATOR)
}

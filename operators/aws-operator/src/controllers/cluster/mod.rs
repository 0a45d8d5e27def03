//! The AWSCluster controller: per cluster, the KMS key, the bucket pair, the cluster CIDR, the
//! TCCPI / TCCP / TCCPF stacks, the `master` Service and Endpoints, and the cluster's status.
//!
//! Resources, in order (each one stops the reconcile until its prerequisite exists, and the
//! object is requeued instead of waiting):
//!
//! Steps 1, 3 and 4 are in this file; each larger step has its own file, named after it
//! ([`certificates`], [`quota`], [`stacks`], [`delegation`], [`master`], [`status`], [`teardown`] with
//! [`leftovers`]).
//!
//! 1. `inputs` — validates the spec, resolves the Release and the two AWS accounts. Bad input
//!    stops here with a `Ready=False` condition and a Warning event, before anything is touched
//!    in AWS.
//! 2. `certificates` — the cluster's CAs, certificates and encryption-provider config, issued
//!    where absent and renewed when due ([`certificates`]); a certificate Secret someone else
//!    wrote that fails its checks stops here with `Ready=False` `CertificateInvalid`.
//! 3. `ipam` — allocates the cluster CIDR under the IPAM lock and writes it to
//!    `status.provider.network.cidr`.
//!    Then `quota` — before the cluster's first stack, whether it fits in its accounts' limits
//!    (CloudFormation stacks, Auto Scaling groups); one that does not waits with `Ready=False`
//!    `QuotaExceeded` and nothing is created in AWS ([`quota`]).
//! 4. `encryption` — the key `alias/<id>` and the buckets `<account>-g8s-<id>[-access-logs]`.
//!    Then `irsa`: for a cluster with IAM roles for service accounts, its public
//!    service-account issuer and the ConfigMap naming it ([`irsa`]).
//! 5. `stacks` — TCCPI (management account), TCCP (tenant), TCCPF (management account).
//! 6. `delegation` — the NS record of the cluster zone in the installation's intermediate zone
//!    (management account), when Route53 is on.
//! 7. `master` — namespace `<id>`, Service and Endpoints `master`.
//! 8. `status` — conditions, stack states, `controlPlaneEndpoint`, `vpcID`.
//!
//! Deletion (`teardown`, last): deletes the cluster's AWSControlPlanes and
//! AWSMachineDeployments and waits until they are gone, removes the zone delegation, deletes what
//! the cluster created outside its stacks ([`leftovers`]: load balancers, target groups, security
//! groups, unattached interfaces, volumes, zone records, extra peerings) and waits until a pass
//! finds none, then deletes TCCP (tenant) and after it
//! TCCPF and TCCPI (management account), empties and deletes the buckets, schedules the key for
//! deletion, removes the namespace and releases the credential and certificate Secrets (held
//! since creation, see [`operatorkit::held_secrets`]); the finalizer is held until all of that is done.

use std::sync::Arc;

use apis::aws::{AWSCluster, AWSClusterStatus, StackStatus as StatusEntry};
use apis::release::Release;
use aws_stacks::stacks::tccp;
use kube::{Api, ResourceExt};
use operatorkit::{Outcome, Resource, ResourceError, ResourceSet, resource};
use semver::VersionReq;

use crate::aws::AccountClients;
use crate::context::Shared;
use crate::controllers;
use crate::stack_ops::Progress;
use operatorkit::held_secrets;

pub mod certificates;
pub mod delegation;
pub mod irsa;
pub mod leftovers;
pub mod master;
pub mod quota;
pub mod stacks;
pub mod status;
pub mod teardown;

use self::certificates::Certificates;
use self::delegation::Delegation;
use self::master::Master;
use self::quota::QuotaPreflight;
use self::stacks::Stacks;
use self::status::{Status, write_cluster_status};
use self::teardown::{Teardown, torn_down};

/// The controller's name (and finalizer suffix).
pub const CONTROLLER: &str = "aws-operator-cluster-controller";

/// The resource set `name` for the Releases `requirement` matches: the steps in the order they
/// run.
pub fn resource_set(shared: Arc<Shared>, name: String, requirement: VersionReq) -> ResourceSet<AWSCluster> {
    controllers::resource_set(shared, name, requirement, ClusterState::new)
        .resource(Inputs)
        .resource(Certificates)
        .resource(Ipam)
        .resource(QuotaPreflight)
        .resource(Encryption)
        .resource(self::irsa::PublishIssuer)
        .resource(Stacks)
        .resource(Delegation)
        .resource(Master)
        .resource(Status)
        .resource(Teardown)
        .build()
}

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
    /// Nothing of the cluster being deleted is its own: the teardown deletes nothing.
    not_owned: bool,
    /// The cluster's `Cluster` (Cluster API), when there is one ([`crate::capi`]).
    capi: Option<apis::capi::Cluster>,
    /// The cluster as it is built: with the `Cluster`'s values where its own are unset
    /// ([`crate::capi::effective_cluster`]).
    effective: Option<AWSCluster>,
    /// The `Cluster`'s values its own fields override.
    overridden: Vec<crate::capi::Overridden>,
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
            not_owned: false,
            capi: None,
            effective: None,
            overridden: Vec::new(),
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
            Progress::AwaitingApproval { message } => {
                self.failure = Some((crate::approval::UPDATE_PENDING, message.clone()));
                self.wait(obj, message).await
            }
            Progress::Ready(_) | Progress::Pending => self.wait(obj, format!("stack {name} is not ready")).await,
        }
    }
}

/// Record invalid input in the status; the returned error becomes the Warning event.
async fn reject(state: &mut ClusterState, obj: &AWSCluster, err: ResourceError) -> ResourceError {
    let (status, err) = controllers::status::reject(&state.shared.client, obj, obj.status.as_ref(), err).await;
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
                return Err(operatorkit::error::field_errors(obj, errors).into());
            }
            check_id(obj)?;
            if controllers::lookup::cluster_id(obj)? != obj.name_any() {
                return Err(operatorkit::error::InvalidInput {
                    object: controllers::status::describe(obj),
                    reason: "InvalidClusterLabel",
                    message: format!("label {} must equal the AWSCluster's name", apis::labels::CLUSTER),
                }
                .into());
            }
            let capi = crate::capi::cluster_of(&shared.client, &shared.capi, obj).await?;
            let release = controllers::lookup::release_of(&shared, obj).await?;
            let (tenant, cp) = controllers::lookup::clients(&shared, obj).await?;
            Ok::<_, ResourceError>((release, tenant, cp, capi))
        }
        .await;
        let checked = match checked {
            // The id is claimed last, once nothing else stops the cluster, and before anything
            // is created or held for it.
            Ok(inputs) => match claim(&shared, obj).await {
                Ok(()) => Ok(inputs),
                Err(e) => Err(e),
            },
            Err(e) => Err(e),
        };
        match checked {
            Ok((release, tenant, cp, capi)) => {
                // The credential Secret stays until the teardown no longer needs it.
                let cs = &obj.spec.provider.credential_secret;
                held_secrets::hold(&shared.client, &cs.namespace, &cs.name, crate::context::SECRET_FINALIZER).await?;
                state.release = Some(release);
                state.tenant = Some(tenant);
                state.cp = Some(cp);
                let (effective, overridden) = crate::capi::effective_cluster(obj, capi.as_ref());
                state.effective = Some(effective);
                state.overridden = overridden;
                state.capi = capi;
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
        // Only what this object owns is deleted: nothing when another object holds its id, or
        // when it never claimed one and so created nothing.
        if let Some(why) = not_owned(&state.shared, obj).await? {
            state
                .shared
                .event(obj, "NothingDeleted", format!("nothing of cluster {} is deleted: {why}", obj.name_any()))
                .await;
            state.not_owned = true;
            return Ok(Outcome::proceed());
        }
        // Deleting needs the accounts but not a valid spec or Release.
        match controllers::lookup::clients(&state.shared, obj).await {
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

/// The cluster id's format, on the label (the name's is the CRD's rule, and the label must equal
/// the name).
fn check_id(obj: &AWSCluster) -> Result<(), ResourceError> {
    let id = controllers::lookup::cluster_id(obj)?;
    apis::cluster_id::check(&format!("metadata.labels[{}]", apis::labels::CLUSTER), &id)
        .and_then(|()| apis::cluster_id::check("metadata.name", &obj.name_any()))
        .map_err(|e| node_lifecycle::claims::invalid(controllers::status::describe(obj), &e).into())
}

/// Claim the cluster's id: the namespace `<id>`, labelled with the AWSCluster's UID.
async fn claim(shared: &Shared, obj: &AWSCluster) -> Result<(), ResourceError> {
    let owner = controllers::lookup::owner(obj);
    let labels = controllers::lookup::namespace_labels(obj);
    match node_lifecycle::claims::claim(&shared.client, &owner, &labels, true).await? {
        node_lifecycle::claims::Claim::Held => Ok(()),
        node_lifecycle::claims::Claim::InUse { holder } => {
            Err(node_lifecycle::claims::in_use(controllers::status::describe(obj), &owner, "metadata.name", &holder)
                .into())
        }
        node_lifecycle::claims::Claim::Free => Err(ResourceError::msg("Internal", "the cluster id was not claimed")),
    }
}

/// Why nothing of a cluster being deleted is its own, if so: its id is not one, another object
/// holds it, or it holds no claim and its status shows nothing was created (no cluster CIDR).
/// A cluster that holds no claim but whose status shows it was reconciled goes on with its
/// teardown: its namespace is gone already (a teardown interrupted after deleting it).
async fn not_owned(shared: &Shared, obj: &AWSCluster) -> Result<Option<String>, ResourceError> {
    if let Err(e) = check_id(obj) {
        return Ok(Some(e.to_string()));
    }
    if controllers::lookup::cluster_id(obj)? != obj.name_any() {
        return Ok(Some(format!("label {} differs from the name: nothing was created", apis::labels::CLUSTER)));
    }
    let owner = controllers::lookup::owner(obj);
    Ok(match node_lifecycle::claims::claim(&shared.client, &owner, &Default::default(), false).await? {
        node_lifecycle::claims::Claim::Held => None,
        node_lifecycle::claims::Claim::Free if owner.reconciled_before => None,
        node_lifecycle::claims::Claim::Free => Some("it never held its cluster id, so nothing was created".into()),
        node_lifecycle::claims::Claim::InUse { holder } => Some(format!("cluster id {} is held by {holder}", owner.id)),
    })
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
        // With the `Cluster`'s cloud tags where the AWSCluster sets none (`crate::capi`).
        let effective = state.effective.as_ref().unwrap_or(obj);
        let tags = controllers::lookup::base_tags(&shared, effective, &id);
        ensure_encryption(&shared, tenant, obj, &id, tags).await?;
        Ok(Outcome::proceed())
    }

    async fn ensure_deleted(&self, _: &mut ClusterState, _: &AWSCluster) -> resource::Result<Outcome> {
        Ok(Outcome::proceed())
    }
}

/// The key `alias/<id>` and the buckets `<account>-g8s-<id>[-access-logs]` of cluster `id` in
/// its account, created when missing, with `tags` updated in place when they changed (a Normal
/// event `TagsUpdated` on `obj`); the key's ARN. Remembered for the life of the process, so a
/// steady cluster costs no AWS call. Both cluster kinds, node pools and legacy, use it.
pub async fn ensure_encryption<K>(
    shared: &Shared,
    tenant: &AccountClients,
    obj: &K,
    id: &str,
    tags: std::collections::BTreeMap<String, String>,
) -> Result<String, ResourceError>
where
    K: kube::Resource<DynamicType = ()>,
{
    let memo_key = format!("{}/{id}", tenant.cache_key());
    let known = shared.memo.lock().keys.get(&memo_key).cloned();
    let arn = match known {
        Some(arn) if shared.memo.lock().resource_tags.get(&memo_key) == Some(&tags) => return Ok(arn),
        Some(arn) => arn,
        None => {
            let arn = crate::aws::kms::ensure_key(tenant, id, &tags).await?;
            crate::aws::s3::ensure_buckets(tenant, id, &tags, &arn, &shared.config.buckets).await?;
            shared.memo.lock().keys.insert(memo_key.clone(), arn.clone());
            arn
        }
    };
    // Tags set at creation, or changed since (a cloud-tag label added, changed or removed):
    // updated in place on the key and the buckets.
    let mut changed = crate::aws::kms::ensure_tags(tenant, &arn, &tags).await?;
    if shared.config.buckets.tagging {
        changed |= crate::aws::s3::ensure_bucket_tags(tenant, id, &tags).await?;
    }
    if changed {
        shared.event(obj, "TagsUpdated", format!("the tags of the key and the buckets of cluster {id}")).await;
    }
    shared.memo.lock().resource_tags.insert(memo_key, tags);
    Ok(arn)
}

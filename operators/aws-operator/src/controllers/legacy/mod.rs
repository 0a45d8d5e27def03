//! The AWSConfig controller: a legacy cluster (reference §11), one `AWSConfig` per cluster, in the
//! three stacks `host-setup`, `guest-main` and `host-main`.
//!
//! It is a second resource set beside the node-pools one, routed the same way: the cluster's
//! `release.giantswarm.io/version` label names a Release, whose `aws-operator` component picks
//! this operator's set ([`operatorkit::router`]), so one process reconciles both kinds of cluster,
//! each by its own set. An AWSConfig without that label, as Giant Swarm's tooling wrote them, is
//! routed by the operator version it names itself ([`version_of`]: the label
//! `aws-operator.giantswarm.io/version`, else `spec.versionBundle.version`), and runs the one
//! Release whose `aws-operator` component is that version. Either way the set reads the Release
//! the router resolved (`ReconcileMeta::release`), never a second lookup of its own. The parts both kinds have are the node-pools cluster's functions, not
//! copies: the credential check ([`controllers::lookup::credential_role`]), the certificates
//! ([`cluster::certificates::issue_names`]), the key and buckets
//! ([`cluster::ensure_encryption`]), node config build and upload ([`crate::node_config`]), the
//! stack state machine ([`crate::stack_ops`], with templates over CloudFormation's inline limit
//! delivered through the cluster bucket), the lifecycle conditions
//! ([`cluster::status::advance_lifecycle`]), the leftovers cleanup
//! ([`cluster::leftovers::clean_up_cluster`]) and the claim of the cluster id.
//!
//! Resources, in order:
//!
//! 1. `inputs` — dereference and validate: [`AWSConfig::validate`] (every field the stacks
//!    need), the Release, the credential Secret `spec.aws.credentialSecret`, the management VPC
//!    `spec.aws.vpc.peerId` (it must be the installation's), then the claim of the cluster id.
//!    Bad input stops here with `Ready=False` and a Warning event naming the field and the fix;
//!    nothing is created in AWS.
//! 2. `certificates` — the cluster's PKI and encryption key, as for a node-pools cluster.
//! 3. `encryption` — the key `alias/<id>` and the buckets `<account>-g8s-<id>[-access-logs]`.
//! 4. `nodeconfigs` — the master's and the workers' node configs, encrypted and uploaded.
//! 5. `drainers` — the worker group's terminating lifecycle hook met by the shared drainers
//!    ([`crate::drainers`]): each leaving worker's node is drained through a DrainerConfig before
//!    its instance goes; while the cluster is deleted, waiting workers go at once. It runs
//!    before the stacks, so a rolling `guest-main` update, which holds the stack while its old
//!    workers wait, is drained too.
//! 6. `stacks` — `host-setup` (management account: the peering role), `guest-main` (the
//!    cluster's account), `host-main` (management account: the peering routes and the zone
//!    delegation), each waiting for the one before ([`stacks`]). Updates of `guest-main` and
//!    `host-main` pass the node-pools clusters' approval gate ([`crate::approval`]), set by the
//!    object's own annotations.
//! 7. `master` — the namespace's Service and Endpoints `master`, the node-pools cluster's.
//! 8. `status` — `Ready`, the lifecycle `Creating` → `Created` (→ `Updating` → `Updated`), the
//!    versions, the zones and VPC block in `status.aws` and `status.cluster.network`.
//!
//! Deletion ([`stacks::Teardown`]): `host-main`, then what the cluster left outside its stacks,
//! `guest-main`, `host-setup`, the buckets, the key, the claim and the Secrets; the finalizer is
//! held until all of that is done. An object that never held its cluster id created nothing,
//! and deletes nothing.

use std::sync::Arc;

use apis::aws::StackStatus as StatusEntry;
use apis::aws_config::{AWSConfig, AWSConfigStatus};
use apis::cluster_status::ClusterCondition;
use apis::release::Release;
use aws_stacks::names;
use aws_stacks::stacks::legacy::inputs::{self, Installation, LegacyNode};
use kube::{Api, ResourceExt};
use operatorkit::error::InvalidInput;
use operatorkit::{
    ObjectVersion, Outcome, ReconcileMeta, Resource, ResourceError, ResourceSet, held_secrets, resource,
};
use semver::VersionReq;

use crate::aws::AccountClients;
use crate::context::Shared;
use crate::controllers::{self, cluster};
use crate::stack_ops::Progress;

pub mod stacks;

use self::stacks::{Stacks, Teardown};

/// The controller's name (and finalizer suffix).
pub const CONTROLLER: &str = "aws-operator-legacy-cluster-controller";

/// The `Ready` reason of a legacy cluster whose stacks are all usable.
pub const CLUSTER_READY: &str = "ClusterReady";

/// The field of `spec.versionBundle.version`, as messages name it.
pub const VERSION_BUNDLE_FIELD: &str = "spec.versionBundle.version";

/// The operator version an AWSConfig names itself, for routing it when it has no
/// `release.giantswarm.io/version` label: the label `aws-operator.giantswarm.io/version` when
/// set (what selected the operator from 2019 on), else `spec.versionBundle.version` (the key
/// since 2017); none when both are empty. The release label, when set, wins over both.
pub fn version_of(config: &AWSConfig) -> Option<ObjectVersion> {
    let label = config.labels().get(apis::labels::AWS_OPERATOR_VERSION).filter(|v| !v.trim().is_empty());
    if let Some(version) = label {
        return Some(ObjectVersion {
            field: format!("metadata.labels[{}]", apis::labels::AWS_OPERATOR_VERSION),
            version: version.clone(),
        });
    }
    let bundle = &config.spec.version_bundle.version;
    (!bundle.trim().is_empty())
        .then(|| ObjectVersion { field: VERSION_BUNDLE_FIELD.to_string(), version: bundle.clone() })
}

/// The release an AWSConfig runs, resolved as the controller routes it (`operatorkit`'s router,
/// with this module's [`version_of`] as the version source): its `release.giantswarm.io/version`
/// label when set, else the one Release among `releases` whose `aws-operator` component is the
/// version the object names itself. Returns the release's version (`20.0.0`), or the reason none
/// can be told, naming the field and the fix. For the commands that read AWSConfigs outside the
/// controller (`migrate`, `plan`), so that they see the release the controller would.
pub fn release_version_of(config: &AWSConfig, releases: &[Release]) -> Result<String, String> {
    let any = VersionReq::STAR;
    let router = operatorkit::Router::new("aws-operator", operatorkit::Routing::Release, [("any".to_string(), any)])
        .map_err(|e| e.to_string())?;
    let releases: std::collections::BTreeMap<String, Arc<Release>> =
        releases.iter().map(|r| (r.name_any(), Arc::new(r.clone()))).collect();
    let labels = config.labels().clone();
    match router.route_object(&labels, version_of(config).as_ref(), &releases) {
        operatorkit::Route::Matched { release: Some(release), .. } => Ok(release.trim_start_matches('v').to_string()),
        operatorkit::Route::Matched { release: None, .. } | operatorkit::Route::NoMatch { .. } => Err(format!(
            "no release can be told: set label {} to the release the cluster runs",
            apis::labels::RELEASE_VERSION
        )),
        operatorkit::Route::Unroutable(why) => Err(why.to_string()),
    }
}

/// The resource set `name` for the Releases `requirement` matches: the steps in the order they
/// run.
pub fn resource_set(shared: Arc<Shared>, name: String, requirement: VersionReq) -> ResourceSet<AWSConfig> {
    ResourceSet::builder(name, requirement, move |obj: Arc<AWSConfig>, meta: ReconcileMeta| {
        let shared = shared.clone();
        async move { Ok(LegacyState::new(shared, &obj, meta.release)) }
    })
    .resource(Inputs)
    .resource(Certificates)
    .resource(Encryption)
    .resource(NodeConfigs)
    .resource(Drainers)
    .resource(Stacks)
    .resource(Master)
    .resource(Status)
    .resource(Teardown)
    .build()
}

/// What the resources of one AWSConfig reconcile share.
#[derive(Debug)]
pub struct LegacyState {
    shared: Arc<Shared>,
    /// The name of the Release the router resolved (`v20.0.0`).
    routed_release: Option<String>,
    release: Option<Release>,
    tenant: Option<Arc<AccountClients>>,
    cp: Option<Arc<AccountClients>>,
    /// The management VPC's id and CIDR block.
    management_vpc: Option<(String, String)>,
    /// The cluster key's ARN.
    key_arn: Option<String>,
    status: AWSConfigStatus,
    stacks: Vec<StatusEntry>,
    waiting: Option<String>,
    /// A failure being retried: the `Ready` reason and message.
    failure: Option<(&'static str, String)>,
    /// The teardown completed in an earlier reconcile.
    torn_down: bool,
    /// Nothing of the cluster being deleted is its own: the teardown deletes nothing.
    not_owned: bool,
}

impl LegacyState {
    /// A fresh state for `obj`, routed with Release `routed_release`.
    pub fn new(shared: Arc<Shared>, obj: &AWSConfig, routed_release: Option<String>) -> Self {
        Self {
            shared,
            routed_release,
            release: None,
            tenant: None,
            cp: None,
            management_vpc: None,
            key_arn: None,
            status: obj.status.clone().unwrap_or_default(),
            stacks: Vec::new(),
            waiting: None,
            failure: None,
            torn_down: false,
            not_owned: false,
        }
    }

    fn accounts(&self) -> Result<(Arc<AccountClients>, Arc<AccountClients>), ResourceError> {
        match (&self.tenant, &self.cp) {
            (Some(t), Some(c)) => Ok((t.clone(), c.clone())),
            _ => Err(ResourceError::msg("Internal", "AWS clients were not set up")),
        }
    }

    /// What the templates and node configs need beyond the object.
    fn installation(&self, obj: &AWSConfig) -> Result<Installation, ResourceError> {
        let (tenant, cp) = self.accounts()?;
        let (Some(release), Some((_, cidr))) = (&self.release, &self.management_vpc) else {
            return Err(ResourceError::msg("Internal", "the inputs were not resolved"));
        };
        let config = &self.shared.config;
        Ok(Installation {
            installation: config.installation.clone(),
            operator_version: config.version.clone(),
            release_version: release.name_any().trim_start_matches('v').to_string(),
            kubernetes_version: release.component_version("kubernetes").unwrap_or_default().to_string(),
            etcd_version: release.component_version("etcd").unwrap_or_default().to_string(),
            route53_enabled: config.route53_enabled,
            tenant_account_id: tenant.account_id.clone(),
            management_account_id: cp.account_id.clone(),
            management_vpc_cidr: cidr.clone(),
            peer_role_arn: String::new(),
            kms_key_arn: self.key_arn.clone().unwrap_or_default(),
            imds_http_tokens: aws_stacks::stacks::imds_http_tokens(
                obj.annotations().get(apis::labels::AWS_METADATA_V2).map(String::as_str),
            )
            .to_string(),
            registry: config.registry.clone(),
            extras: config.node_extras.clone(),
        })
    }

    /// Stop the reconcile to wait for `why`, after writing the status.
    async fn wait(&mut self, obj: &AWSConfig, why: impl Into<String>) -> resource::Result<Outcome> {
        self.waiting.get_or_insert_with(|| why.into());
        write_legacy_status(self, obj).await?;
        Ok(Outcome::cancel_reconciliation().requeue_after(self.shared.config.poll))
    }

    /// Stop the reconcile at stack `name`, which is not ready.
    async fn stack_not_ready(&mut self, obj: &AWSConfig, name: &str, progress: Progress) -> resource::Result<Outcome> {
        match progress {
            Progress::Retrying { reason, message, retry_after } => {
                self.waiting = Some(message.clone());
                self.failure = Some((reason, message));
                write_legacy_status(self, obj).await?;
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
async fn reject(state: &mut LegacyState, obj: &AWSConfig, err: ResourceError) -> ResourceError {
    let (status, err) = controllers::status::reject(&state.shared.client, obj, obj.status.as_ref(), err).await;
    state.status = status;
    err
}

/// The cluster id's owner: this AWSConfig. A status with lifecycle conditions, which only the
/// operator writes, proves it was reconciled before.
fn owner(obj: &AWSConfig) -> apis::cluster_id::Owner {
    let reconciled_before = obj.status.as_ref().is_some_and(|s| !s.cluster.conditions.is_empty());
    apis::cluster_id::Owner::of(obj, obj.cluster_id(), reconciled_before)
}

/// The namespace `<id>` carries the organisation, as for a node-pools cluster.
fn namespace_labels(obj: &AWSConfig) -> std::collections::BTreeMap<String, String> {
    let org =
        obj.labels().get(apis::labels::ORGANIZATION).cloned().unwrap_or_else(|| obj.spec.cluster.customer.id.clone());
    std::collections::BTreeMap::from([(apis::labels::ORGANIZATION.to_string(), org)])
}

/// The legacy cluster as the drainers' owner of its worker group.
fn drainer_owner(shared: &Shared, obj: &AWSConfig) -> crate::drainers::plan::Owner {
    use crate::drainers::plan::{Owner, OwnerKind, drain_timeout};
    use aws_stacks::stacks::tcnp;
    Owner {
        cluster_id: obj.cluster_id().to_string(),
        namespace: obj.namespace().unwrap_or_default(),
        api_endpoint: obj.spec.cluster.kubernetes.api.domain.clone(),
        kind: OwnerKind::LegacyCluster,
        operator_version: shared.config.version.clone(),
        hook: tcnp::TERMINATING_HOOK.to_string(),
        drain_timeout: drain_timeout(
            shared.config.drain_timeout,
            std::time::Duration::from_secs(tcnp::TERMINATING_HOOK_TIMEOUT),
        ),
    }
}

/// The drainers of the worker group (`guest-main`'s `WorkerAutoScalingGroup`).
#[derive(Debug)]
pub struct Drainers;

impl Drainers {
    async fn pass(state: &LegacyState, obj: &AWSConfig, deleting: bool) -> resource::Result<Outcome> {
        use aws_stacks::stacks::legacy::{self, LegacyStack, guest_main};
        let Some(tenant) = state.tenant.clone() else { return Ok(Outcome::proceed()) };
        let stack = legacy::stack_name(obj.cluster_id(), LegacyStack::GuestMain);
        let workers = format!("{stack}-{}-", guest_main::WORKER_ASG);
        let owner = drainer_owner(&state.shared, obj);
        Ok(crate::drainers::owner_step(&state.shared, &tenant, obj, &owner, &stack, &workers, deleting, deleting).await)
    }
}

impl Resource<AWSConfig, LegacyState> for Drainers {
    fn name(&self) -> &str {
        "drainers"
    }

    async fn ensure_created(&self, state: &mut LegacyState, obj: &AWSConfig) -> resource::Result<Outcome> {
        Self::pass(state, obj, false).await
    }

    /// Waiting workers go at once: the cluster goes with them. The finalizer stays while any
    /// still waits, so `guest-main`'s deletion is not held for the hook's hour.
    async fn ensure_deleted(&self, state: &mut LegacyState, obj: &AWSConfig) -> resource::Result<Outcome> {
        if state.not_owned {
            return Ok(Outcome::proceed());
        }
        Self::pass(state, obj, true).await
    }
}

/// Validates and resolves the inputs.
#[derive(Debug)]
pub struct Inputs;

impl Resource<AWSConfig, LegacyState> for Inputs {
    fn name(&self) -> &str {
        "inputs"
    }

    async fn ensure_created(&self, state: &mut LegacyState, obj: &AWSConfig) -> resource::Result<Outcome> {
        let shared = state.shared.clone();
        let checked = async {
            if let Err(errors) = obj.validate() {
                return Err(operatorkit::error::field_errors(obj, errors).into());
            }
            let release = controllers::lookup::routed_release(&shared, obj, state.routed_release.as_deref()).await?;
            let cs = &obj.spec.aws.credential_secret;
            let role =
                controllers::lookup::credential_role(&shared, obj, "spec.aws.credentialSecret", &cs.namespace, &cs.name)
                    .await?;
            let (tenant, cp) = controllers::lookup::clients_of_role(&shared, &role, &obj.spec.aws.region).await?;
            let (vpc, cidr, _) = cluster::stacks::control_plane_network(&shared, &cp).await?;
            if obj.spec.aws.vpc.peer_id != vpc {
                return Err(InvalidInput {
                    object: controllers::status::describe(obj),
                    reason: "InvalidPeerVPC",
                    message: format!(
                        "spec.aws.vpc.peerId is {:?}, but the management VPC (tagged Name={} in account {}, {}) is {vpc}: set spec.aws.vpc.peerId to {vpc}",
                        obj.spec.aws.vpc.peer_id, shared.config.installation, cp.account_id, cp.region
                    ),
                }
                .into());
            }
            // The id is claimed last, once nothing else stops the cluster, and before anything
            // is created for it.
            let owner = owner(obj);
            match node_lifecycle::claims::claim(&shared.client, &owner, &namespace_labels(obj), true).await? {
                node_lifecycle::claims::Claim::Held => {}
                node_lifecycle::claims::Claim::InUse { holder } => {
                    let object = controllers::status::describe(obj);
                    return Err(node_lifecycle::claims::in_use(object, &owner, "spec.cluster.id", &holder).into());
                }
                node_lifecycle::claims::Claim::Free => {
                    return Err(ResourceError::msg("Internal", "the cluster id was not claimed"));
                }
            }
            Ok::<_, ResourceError>((release, tenant, cp, (vpc, cidr)))
        }
        .await;
        match checked {
            Ok((release, tenant, cp, management_vpc)) => {
                // The credential Secret stays until the teardown no longer needs it.
                let cs = &obj.spec.aws.credential_secret;
                held_secrets::hold(&shared.client, &cs.namespace, &cs.name, crate::context::SECRET_FINALIZER).await?;
                state.release = Some(release);
                state.tenant = Some(tenant);
                state.cp = Some(cp);
                state.management_vpc = Some(management_vpc);
                Ok(Outcome::proceed())
            }
            Err(e) if !e.is_retryable() => Err(reject(state, obj, e).await),
            Err(e) => Err(e),
        }
    }

    async fn ensure_deleted(&self, state: &mut LegacyState, obj: &AWSConfig) -> resource::Result<Outcome> {
        if stacks::torn_down(obj) {
            state.torn_down = true;
            return Ok(Outcome::proceed());
        }
        // Only what this object owns is deleted: nothing when another object holds its id, or
        // when it never claimed one and so created nothing (bad input from the start).
        let owner = owner(obj);
        let why = match node_lifecycle::claims::claim(&state.shared.client, &owner, &Default::default(), false).await? {
            node_lifecycle::claims::Claim::Held => None,
            node_lifecycle::claims::Claim::Free if owner.reconciled_before => None,
            node_lifecycle::claims::Claim::Free => {
                Some("it never held its cluster id, so nothing was created".to_string())
            }
            node_lifecycle::claims::Claim::InUse { holder } => {
                Some(format!("cluster id {} is held by {holder}", owner.id))
            }
        };
        if let Some(why) = why {
            let note = format!("nothing of cluster {} is deleted: {why}", obj.cluster_id());
            state.shared.event(obj, "NothingDeleted", note).await;
            state.not_owned = true;
            return Ok(Outcome::proceed());
        }
        // Deleting needs the accounts but not a valid spec.
        let cs = &obj.spec.aws.credential_secret;
        let shared = state.shared.clone();
        let clients = async {
            let role = controllers::lookup::credential_role(
                &shared,
                obj,
                "spec.aws.credentialSecret",
                &cs.namespace,
                &cs.name,
            )
            .await?;
            controllers::lookup::clients_of_role(&shared, &role, &obj.spec.aws.region).await
        }
        .await;
        match clients {
            Ok((tenant, cp)) => {
                state.tenant = Some(tenant);
                state.cp = Some(cp);
                Ok(Outcome::proceed())
            }
            Err(e) if !e.is_retryable() => {
                // The cache may not show the completed teardown yet: its credential Secret is
                // gone because this process released it. Ask the API server before reporting.
                let api: Api<AWSConfig> =
                    Api::namespaced(state.shared.client.clone(), &obj.namespace().unwrap_or_default());
                if api.get_opt(&obj.name_any()).await?.is_some_and(|fresh| stacks::torn_down(&fresh)) {
                    state.torn_down = true;
                    return Ok(Outcome::proceed());
                }
                Err(reject(state, obj, e).await)
            }
            Err(e) => Err(e),
        }
    }
}

/// The cluster's certificates and encryption key, as for a node-pools cluster.
#[derive(Debug)]
pub struct Certificates;

impl Resource<AWSConfig, LegacyState> for Certificates {
    fn name(&self) -> &str {
        "certificates"
    }

    async fn ensure_created(&self, state: &mut LegacyState, obj: &AWSConfig) -> resource::Result<Outcome> {
        let shared = state.shared.clone();
        let ns = obj.namespace().unwrap_or_default();
        let certs_ns = crate::node_config::certificates_namespace(&shared, &ns);
        let names = cluster::certificates::names_for(
            obj.cluster_id().to_string(),
            &inputs::zone(obj),
            &obj.spec.cluster.kubernetes.api.cluster_ip_range,
        );
        match cluster::certificates::issue_names(&shared.client, certs_ns, &names, false).await {
            Ok(ensured) => Ok(cluster::certificates::issued(&shared, obj, &ensured).await),
            Err(e) if !e.is_retryable() => Err(reject(state, obj, e).await),
            Err(e) => Err(e),
        }
    }

    async fn ensure_deleted(&self, _: &mut LegacyState, _: &AWSConfig) -> resource::Result<Outcome> {
        Ok(Outcome::proceed())
    }
}

/// The KMS key and the buckets, as for a node-pools cluster.
#[derive(Debug)]
pub struct Encryption;

impl Resource<AWSConfig, LegacyState> for Encryption {
    fn name(&self) -> &str {
        "encryption"
    }

    async fn ensure_created(&self, state: &mut LegacyState, obj: &AWSConfig) -> resource::Result<Outcome> {
        let shared = state.shared.clone();
        let (tenant, _) = state.accounts()?;
        let id = obj.cluster_id();
        let tags = controllers::lookup::base_tags(&shared, obj, id);
        state.key_arn = Some(cluster::ensure_encryption(&shared, &tenant, obj, id, tags).await?);
        Ok(Outcome::proceed())
    }

    async fn ensure_deleted(&self, _: &mut LegacyState, _: &AWSConfig) -> resource::Result<Outcome> {
        Ok(Outcome::proceed())
    }
}

/// The master's and the workers' node configs, encrypted with the cluster key into the cluster
/// bucket, where their launch templates' user data points.
#[derive(Debug)]
pub struct NodeConfigs;

impl Resource<AWSConfig, LegacyState> for NodeConfigs {
    fn name(&self) -> &str {
        "nodeconfigs"
    }

    async fn ensure_created(&self, state: &mut LegacyState, obj: &AWSConfig) -> resource::Result<Outcome> {
        let shared = state.shared.clone();
        let (tenant, _) = state.accounts()?;
        let id = obj.cluster_id().to_string();
        let inst = state.installation(obj)?;
        let ns = obj.namespace().unwrap_or_default();
        let certs_ns = crate::node_config::certificates_namespace(&shared, &ns);
        let certs = crate::node_config::certificates(&shared, certs_ns, &id).await?;
        let (mut master, worker) = match (
            crate::node_config::secrets_for(true, &certs),
            crate::node_config::secrets_for(false, &certs),
        ) {
            (Ok(m), Ok(w)) => (m, w),
            (Err(missing), _) | (_, Err(missing)) => {
                let why = format!(
                    "waiting for certificate Secrets in namespace {certs_ns} labelled giantswarm.io/cluster={id},giantswarm.io/certificate=<name>: missing {}",
                    missing.join(", ")
                );
                return state.wait(obj, why).await;
            }
        };
        match crate::node_config::encryption_config(&shared, certs_ns, &id).await? {
            Some(config) => master.push(config),
            None => {
                let why = format!(
                    "waiting for Secret {certs_ns}/{} with key {} (the API server's encryption-provider config)",
                    crate::node_config::encryption_config_secret(&id),
                    crate::node_config::ENCRYPTION_CONFIG_KEY
                );
                return state.wait(obj, why).await;
            }
        }
        let created = state.status.cluster.has_condition(ClusterCondition::Created);
        let bucket = names::bucket(&tenant.account_id, &id);
        // Both configs are built and verified before either is uploaded.
        let mut configs = Vec::with_capacity(2);
        for (node, secrets, label) in
            [(LegacyNode::Master { existing: created }, master, "master-0"), (LegacyNode::Worker, worker, "worker")]
        {
            let input = inputs::node_config_input(obj, &inst, node, secrets)
                .map_err(|errors| ResourceError::from(operatorkit::error::field_errors(obj, errors)))?;
            let config = match crate::node_config::build(&controllers::status::describe(obj), label, &input) {
                Ok(config) => config,
                Err(e) => return Err(reject(state, obj, e).await),
            };
            configs.push((inputs::config_key(obj, &inst, node), config));
        }
        let Some(key_arn) = state.key_arn.clone() else {
            return Err(ResourceError::msg("Internal", "the cluster key was not resolved"));
        };
        for (key, config) in &configs {
            if crate::node_config::upload(&shared, &tenant, &key_arn, &bucket, key, config).await? {
                shared.event(obj, "NodeConfigUploaded", format!("s3://{bucket}/{key}")).await;
            }
        }
        Ok(Outcome::proceed())
    }

    async fn ensure_deleted(&self, _: &mut LegacyState, _: &AWSConfig) -> resource::Result<Outcome> {
        Ok(Outcome::proceed())
    }
}

/// The namespace `<id>`'s Service and Endpoints `master` (the master's address behind
/// `<id>-api`, for Prometheus), as the original made for legacy clusters: the node-pools
/// cluster's ([`cluster::master::ensure_master_objects`]).
#[derive(Debug)]
pub struct Master;

impl Resource<AWSConfig, LegacyState> for Master {
    fn name(&self) -> &str {
        "master"
    }

    async fn ensure_created(&self, state: &mut LegacyState, obj: &AWSConfig) -> resource::Result<Outcome> {
        let (tenant, _) = state.accounts()?;
        let org = namespace_labels(obj).remove(apis::labels::ORGANIZATION).unwrap_or_default();
        let uid = obj.uid().unwrap_or_default();
        let zone = inputs::zone(obj);
        cluster::master::ensure_master_objects(&state.shared, &tenant, obj.cluster_id(), &org, &uid, &zone).await?;
        Ok(Outcome::proceed())
    }

    async fn ensure_deleted(&self, _: &mut LegacyState, _: &AWSConfig) -> resource::Result<Outcome> {
        Ok(Outcome::proceed())
    }
}

/// Conditions, lifecycle, versions.
#[derive(Debug)]
pub struct Status;

impl Resource<AWSConfig, LegacyState> for Status {
    fn name(&self) -> &str {
        "status"
    }

    async fn ensure_created(&self, state: &mut LegacyState, obj: &AWSConfig) -> resource::Result<Outcome> {
        write_legacy_status(state, obj).await?;
        let ready =
            operatorkit::conditions::is_status_condition_true(&state.status.conditions, controllers::status::READY);
        let updating = state.status.cluster.has_condition(ClusterCondition::Updating);
        if ready && !updating {
            Ok(Outcome::proceed())
        } else {
            Ok(Outcome::proceed().requeue_after(state.shared.config.poll))
        }
    }

    async fn ensure_deleted(&self, _: &mut LegacyState, _: &AWSConfig) -> resource::Result<Outcome> {
        Ok(Outcome::proceed())
    }
}

/// Compute and write the status: `Ready` once the three stacks are usable, the lifecycle
/// conditions with their events, the zones and the VPC block the stacks were built from (which
/// win over the spec from then on, `AWSConfig::zones`). Also called when a resource stopped the
/// reconcile to wait, so progress is visible.
pub async fn write_legacy_status(state: &mut LegacyState, obj: &AWSConfig) -> Result<(), ResourceError> {
    let shared = state.shared.clone();
    let id = obj.cluster_id().to_string();
    let mut status = state.status.clone();
    controllers::stack_entries::merge_stacks(&mut status.stacks, &state.stacks);
    let ready = state.waiting.is_none()
        && state.failure.is_none()
        && status.stacks.len() >= aws_stacks::stacks::legacy::LegacyStack::ALL.len()
        && status.stacks.iter().all(|s| crate::stack_ops::usable(&s.status));
    let updating = status.stacks.iter().any(|s| s.status.starts_with("UPDATE_") && s.status.ends_with("IN_PROGRESS"));
    let (reason, message) = if ready {
        (CLUSTER_READY, "every stack of the cluster is ready".to_string())
    } else if let Some((reason, message)) = &state.failure {
        (*reason, message.clone())
    } else if updating {
        ("StacksUpdating", state.waiting.clone().unwrap_or_else(|| "stacks are updating".into()))
    } else {
        ("StacksCreating", state.waiting.clone().unwrap_or_else(|| "stacks are being created".into()))
    };
    let ready_type = controllers::status::READY;
    controllers::status::set_condition(
        &mut status.conditions,
        ready_type,
        ready,
        reason,
        message,
        obj.metadata.generation,
    );
    crate::approval::set_update_pending(&mut status.conditions, obj, &status.stacks);
    let lifecycle = &mut status.cluster;
    lifecycle.id.clone_from(&id);
    let changed = cluster::status::advance_lifecycle(
        lifecycle,
        ready,
        status.stacks.iter(),
        &shared.config.version,
        jiff::Timestamp::now(),
    );
    if ready {
        // What the stacks were built from, kept: later edits of `spec.aws.az` or `spec.aws.vpc`
        // do not move a running cluster's network.
        if status.aws.availability_zones.is_empty() {
            status.aws.availability_zones = obj
                .zones()
                .into_iter()
                .map(|z| apis::aws_config::AWSConfigStatusAWSAvailabilityZone {
                    name: z.name,
                    subnet: apis::aws_config::AWSConfigStatusAWSAvailabilityZoneSubnet {
                        private: apis::aws_config::AWSConfigSubnet { cidr: z.private_cidr },
                        public: apis::aws_config::AWSConfigSubnet { cidr: z.public_cidr },
                    },
                })
                .collect();
        }
        if status.cluster.network.cidr.is_empty() {
            status.cluster.network.cidr = obj.vpc_cidr().1.to_string();
        }
    }
    controllers::status::write_status(&shared.client, obj, obj.status.as_ref(), &status).await?;
    if let Some(condition) = changed {
        shared.event(obj, &condition.event_reason(), condition.event_note(&id)).await;
    }
    state.status = status;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(labels: &[(&str, &str)], bundle: &str) -> AWSConfig {
        let mut spec = apis::aws_config::AWSConfigSpec::default();
        spec.version_bundle.version = bundle.to_string();
        let mut config = AWSConfig::new("p3x7d", spec);
        config.metadata.labels = Some(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect());
        config
    }

    fn release(name: &str, aws_operator: &str) -> Release {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "release.giantswarm.io/v1alpha1", "kind": "Release",
            "metadata": {"name": name},
            "spec": {"date": "2026-01-01T00:00:00Z", "state": "active",
                     "components": [{"name": "aws-operator", "version": aws_operator}]}
        }))
        .expect("a Release")
    }

    #[test]
    fn the_commands_see_the_release_the_controller_routes_an_awsconfig_to() {
        let releases = [release("v20.0.0", "16.2.0"), release("v19.3.0", "14.24.1")];
        let labelled = config(&[(apis::labels::RELEASE_VERSION, "19.3.0")], "16.2.0");
        assert_eq!(release_version_of(&labelled, &releases), Ok("19.3.0".into()), "the release label wins");
        let bundle = config(&[], "16.2.0");
        assert_eq!(release_version_of(&bundle, &releases), Ok("20.0.0".into()), "the version bundle's Release");
        let none = config(&[], "4.7.0");
        let err = release_version_of(&none, &releases).expect_err("no Release gives 4.7.0");
        assert!(err.contains(VERSION_BUNDLE_FIELD) && err.contains("4.7.0"), "{err}");
        let two = [release("v20.0.0", "16.2.0"), release("v20.0.1", "16.2.0")];
        let err = release_version_of(&bundle, &two).expect_err("two Releases give 16.2.0");
        assert!(err.contains("v20.0.0") && err.contains("v20.0.1"), "{err}");
        let err = release_version_of(&config(&[], ""), &releases).expect_err("no version at all");
        assert!(err.contains(apis::labels::RELEASE_VERSION), "{err}");
    }

    #[test]
    fn the_version_label_wins_over_the_version_bundle_and_empty_values_name_nothing() {
        let label = format!("metadata.labels[{}]", apis::labels::AWS_OPERATOR_VERSION);
        let both = version_of(&config(&[(apis::labels::AWS_OPERATOR_VERSION, "16.2.0")], "4.7.0"));
        assert_eq!(both, Some(ObjectVersion { field: label, version: "16.2.0".into() }));
        let bundle = version_of(&config(&[(apis::labels::AWS_OPERATOR_VERSION, " ")], "4.7.0"));
        assert_eq!(bundle, Some(ObjectVersion { field: VERSION_BUNDLE_FIELD.into(), version: "4.7.0".into() }));
        assert_eq!(version_of(&config(&[], "")), None);
    }
}

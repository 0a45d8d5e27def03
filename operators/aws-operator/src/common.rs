//! Lookups and status helpers the three controllers share.

use std::collections::BTreeMap;
use std::sync::Arc;

use apis::aws::{AWSCluster, AWSControlPlane, AWSMachineDeployment, FieldError, StackStatus};
use apis::labels;
use apis::release::Release;
use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use operatorkit::conditions::{ConditionStatus, DesiredCondition, set_status_condition};
use serde::Serialize;
use serde::de::DeserializeOwned;

use operatorkit::{ReleaseCondition, ResourceError, StatusHook, Unroutable};

use crate::aws::AccountClients;
use crate::context::Shared;

/// The data key of the credential Secret holding the tenant role ARN.
pub const ROLE_ARN_KEY: &str = "aws.awsoperator.arn";

/// The finalizer this operator puts on the Secrets a cluster uses
/// ([`operatorkit::held_secrets`]), until the cluster's teardown is complete.
pub const SECRET_FINALIZER: &str = "aws-operator.giantswarm.io/secret-in-use";

/// The `Ready` condition type.
pub const READY: &str = "Ready";

/// Why an object cannot be reconciled as written: the message names the object, the field and
/// the fix. Reported as a `Ready=False` condition and a Warning event; never retried quickly,
/// never deletes anything.
#[derive(Debug, thiserror::Error)]
#[error("{object}: {message}")]
pub struct InvalidInput {
    /// `Kind namespace/name`.
    pub object: String,
    /// The condition reason (PascalCase).
    pub reason: &'static str,
    /// What is wrong and how to fix it.
    pub message: String,
}

impl operatorkit::ErrorKind for InvalidInput {
    fn kind(&self) -> std::borrow::Cow<'static, str> {
        std::borrow::Cow::Borrowed(self.reason)
    }
    fn is_retryable(&self) -> bool {
        false
    }
}

/// `Kind namespace/name` of an object.
pub fn describe<K: kube::Resource<DynamicType = ()>>(obj: &K) -> String {
    format!("{} {}/{}", K::kind(&()), obj.namespace().unwrap_or_default(), obj.name_any())
}

/// Turn field errors into one [`InvalidInput`].
pub fn field_errors<K: kube::Resource<DynamicType = ()>>(obj: &K, errors: Vec<FieldError>) -> InvalidInput {
    InvalidInput {
        object: describe(obj),
        reason: "InvalidSpec",
        message: errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "),
    }
}

/// The cluster id of an object: its `giantswarm.io/cluster` label.
pub fn cluster_id<K: kube::Resource<DynamicType = ()>>(obj: &K) -> Result<String, InvalidInput> {
    obj.labels().get(labels::CLUSTER).cloned().filter(|s| !s.is_empty()).ok_or_else(|| InvalidInput {
        object: describe(obj),
        reason: "MissingClusterLabel",
        message: format!("label {} is missing: set it to the id of the cluster the object belongs to", labels::CLUSTER),
    })
}

/// The Release of an object, with the components the operator needs
/// ([`REQUIRED_COMPONENTS`]).
pub async fn release_of<K: kube::Resource<DynamicType = ()>>(
    shared: &Shared,
    obj: &K,
) -> Result<Release, ResourceError> {
    let Some(version) = obj.labels().get(labels::RELEASE_VERSION) else {
        return Err(InvalidInput {
            object: describe(obj),
            reason: "MissingReleaseLabel",
            message: format!("label {} is missing: set it to the release the cluster runs", labels::RELEASE_VERSION),
        }
        .into());
    };
    let Some(release) = shared.release(version).await? else {
        return Err(InvalidInput {
            object: describe(obj),
            reason: "ReleaseNotFound",
            message: format!("Release v{version} does not exist: create it or fix label {}", labels::RELEASE_VERSION),
        }
        .into());
    };
    check_components(obj, version, &release)?;
    Ok(release)
}

/// The Release components every node config is built from. None has a fallback version: a
/// Release without one is bad input, not a cluster on some version the operator picked.
pub const REQUIRED_COMPONENTS: [&str; 4] = ["containerlinux", "aws-operator", "kubernetes", "etcd"];

/// Every [`REQUIRED_COMPONENTS`] is in Release v`version`, else an [`InvalidInput`] naming the
/// first one missing.
pub fn check_components<K: kube::Resource<DynamicType = ()>>(
    obj: &K,
    version: &str,
    release: &Release,
) -> Result<(), InvalidInput> {
    match REQUIRED_COMPONENTS.into_iter().find(|needed| component(release, needed).is_none()) {
        None => Ok(()),
        Some(needed) => Err(InvalidInput {
            object: describe(obj),
            reason: "InvalidRelease",
            message: format!(
                "Release v{version} has no {needed} component (spec.components): add it to the Release or use another release"
            ),
        }),
    }
}

/// A component version of a Release.
pub fn component<'a>(release: &'a Release, name: &str) -> Option<&'a str> {
    release.spec.components.iter().find(|c| c.name == name).map(|c| c.version.as_str())
}

/// The tenant role ARN from the AWSCluster's credential Secret.
pub async fn tenant_role(shared: &Shared, cluster: &AWSCluster) -> Result<String, ResourceError> {
    let cs = &cluster.spec.provider.credential_secret;
    let api: Api<Secret> = Api::namespaced(shared.client.clone(), &cs.namespace);
    let Some(secret) = api.get_opt(&cs.name).await? else {
        return Err(InvalidInput {
            object: describe(cluster),
            reason: "CredentialSecretNotFound",
            message: format!(
                "spec.provider.credentialSecret names Secret {}/{}, which does not exist: create it with key {ROLE_ARN_KEY} holding the tenant role ARN",
                cs.namespace, cs.name
            ),
        }
        .into());
    };
    let arn = secret
        .data
        .as_ref()
        .and_then(|d| d.get(ROLE_ARN_KEY))
        .and_then(|b| String::from_utf8(b.0.clone()).ok())
        .map(|s| s.trim().to_string())
        .filter(|s| s.starts_with("arn:") && s.contains(":role/"));
    arn.ok_or_else(|| {
        InvalidInput {
            object: describe(cluster),
            reason: "InvalidCredentialSecret",
            message: format!(
                "Secret {}/{} has no valid {ROLE_ARN_KEY} key: set it to the ARN of the role to assume in the tenant account (arn:aws:iam::<account>:role/<name>)",
                cs.namespace, cs.name
            ),
        }
        .into()
    })
}

/// The tenant and management-account clients of a cluster.
pub async fn clients(
    shared: &Shared,
    cluster: &AWSCluster,
) -> Result<(Arc<AccountClients>, Arc<AccountClients>), ResourceError> {
    let role = tenant_role(shared, cluster).await?;
    clients_of_role(shared, &role, &cluster.spec.provider.region).await
}

/// The tenant (reached through `role`) and management-account clients in `region`.
pub async fn clients_of_role(
    shared: &Shared,
    role: &str,
    region: &str,
) -> Result<(Arc<AccountClients>, Arc<AccountClients>), ResourceError> {
    let tenant = shared.aws.tenant(role, region).await?;
    let cp = shared.aws.control_plane(region).await?;
    Ok((tenant, cp))
}

/// Annotation on an AWSControlPlane or AWSMachineDeployment: the role ARN of the tenant account
/// its stacks are created in (an ARN, not a credential).
pub const TENANT_ROLE_ANNOTATION: &str = "aws-operator.giantswarm.io/tenant-role-arn";
/// Annotation on an AWSControlPlane or AWSMachineDeployment: the region of its stacks.
pub const REGION_ANNOTATION: &str = "aws-operator.giantswarm.io/region";

/// Record on a control plane or node pool where its stacks live (role and region), before it
/// creates any, so that it can still find and delete them if its AWSCluster disappears.
pub async fn remember_account<K>(shared: &Shared, obj: &K, role: &str, region: &str) -> Result<(), kube::Error>
where
    K: NamespacedObject,
{
    let annotations = obj.annotations();
    let recorded = |key: &str, value: &str| annotations.get(key).is_some_and(|v| v == value);
    if recorded(TENANT_ROLE_ANNOTATION, role) && recorded(REGION_ANNOTATION, region) {
        return Ok(());
    }
    let api: Api<K> = Api::namespaced(shared.client.clone(), &obj.namespace().unwrap_or_default());
    let patch =
        serde_json::json!({"metadata": {"annotations": {TENANT_ROLE_ANNOTATION: role, REGION_ANNOTATION: region}}});
    api.patch(&obj.name_any(), &PatchParams::default(), &Patch::Merge(&patch)).await?;
    Ok(())
}

/// In which account a stack of a control plane or node pool lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Account {
    /// The tenant account.
    Tenant,
    /// The management-cluster account.
    ControlPlane,
}

/// Delete the stacks of a control plane or node pool whose AWSCluster is gone, in order. They
/// are looked up in the accounts it recorded ([`remember_account`]) by name and tags (cluster
/// id and stack kind), so nothing but its own stacks is touched. Returns `proceed` once none is
/// left, and an outcome that keeps the finalizer while any exists.
///
/// Without recorded accounts the object never created anything, unless its status lists stacks
/// (an object of an older version): then the finalizer stays, with `Ready=False` saying how to
/// go on, since dropping it would leak what those stacks hold.
pub async fn delete_orphaned_stacks<K, St>(
    shared: &Shared,
    obj: &K,
    current: Option<&St>,
    cluster_id: &str,
    stacks: &[(Account, aws_stacks::names::StackKind, String)],
    recorded_stacks: &[String],
) -> Result<operatorkit::Outcome, ResourceError>
where
    K: NamespacedObject,
    St: WithConditions,
{
    use crate::aws::stacks::Deletion;
    let keep = || operatorkit::Outcome::cancel_reconciliation().keep_finalizer().requeue_after(shared.config.poll);
    let annotations = obj.annotations();
    let (Some(role), Some(region)) = (annotations.get(TENANT_ROLE_ANNOTATION), annotations.get(REGION_ANNOTATION))
    else {
        if recorded_stacks.is_empty() {
            return Ok(operatorkit::Outcome::proceed());
        }
        let message = format!(
            "AWSCluster {cluster_id} is gone and the account of stacks {} is unknown: restore the AWSCluster (and its credential Secret) so they can be deleted, or delete them by hand and then remove the finalizers",
            recorded_stacks.join(", ")
        );
        mark_not_ready(shared, obj, current, "ClusterNotFound", message).await?;
        return Ok(keep());
    };
    let (tenant, cp) = clients_of_role(shared, role, region).await?;
    // One status across the stacks: a stack found gone keeps its entry's update when the next
    // stack's deletion writes the status again.
    let mut status = current.cloned().unwrap_or_default();
    let mut written = current.cloned();
    for (account, kind, name) in stacks {
        let aws = match account {
            Account::Tenant => &tenant,
            Account::ControlPlane => &cp,
        };
        let tags = aws_stacks::names::tags::CLUSTER;
        let ours = aws.cfn.describe_all().await?.into_iter().any(|v| {
            &v.name == name
                && v.tags.get(tags).map(String::as_str) == Some(cluster_id)
                && v.tags.get(aws_stacks::names::tags::STACK).map(String::as_str) == Some(kind.as_str())
        });
        if !ours {
            continue;
        }
        let recorded = status.stacks_mut().iter().find(|e| &e.name == name).cloned();
        let (deletion, entry) = crate::aws::stacks::delete(shared, aws, obj, *kind, name, recorded.as_ref()).await?;
        let (out, failed) = match deletion {
            Deletion::Gone => (None, None),
            Deletion::Pending => (Some(keep()), None),
            Deletion::Failed { message, retry_after } => (
                Some(operatorkit::Outcome::cancel_reconciliation().keep_finalizer().requeue_after(retry_after)),
                Some(message),
            ),
        };
        record_deletion(shared, obj, written.as_ref(), &mut status, entry, failed).await?;
        written = Some(status.clone());
        if let Some(out) = out {
            return Ok(out);
        }
    }
    Ok(operatorkit::Outcome::proceed())
}

/// The AWSCluster of a control plane or node pool (same namespace, named by the cluster label).
pub async fn cluster_of<K: kube::Resource<DynamicType = ()>>(
    shared: &Shared,
    obj: &K,
) -> Result<Option<AWSCluster>, ResourceError> {
    let id = cluster_id(obj)?;
    let api: Api<AWSCluster> = Api::namespaced(shared.client.clone(), &obj.namespace().unwrap_or_default());
    Ok(api.get_opt(&id).await?)
}

/// The control planes of a cluster.
pub async fn control_planes(
    shared: &Shared,
    namespace: &str,
    cluster: &str,
) -> Result<Vec<AWSControlPlane>, kube::Error> {
    let api: Api<AWSControlPlane> = Api::namespaced(shared.client.clone(), namespace);
    Ok(api.list(&ListParams::default().labels(&format!("{}={cluster}", labels::CLUSTER))).await?.items)
}

/// The node pools of a cluster.
pub async fn node_pools(
    shared: &Shared,
    namespace: &str,
    cluster: &str,
) -> Result<Vec<AWSMachineDeployment>, kube::Error> {
    let api: Api<AWSMachineDeployment> = Api::namespaced(shared.client.clone(), namespace);
    Ok(api.list(&ListParams::default().labels(&format!("{}={cluster}", labels::CLUSTER))).await?.items)
}

/// Set a condition in a list; `true` when it changed.
pub fn set_condition(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: bool,
    reason: &str,
    message: impl Into<String>,
    generation: Option<i64>,
) -> bool {
    set_status_condition(
        conditions,
        DesiredCondition::new(type_, ConditionStatus::from(status), reason)
            .message(message)
            .observed_generation(generation),
        jiff::Timestamp::now(),
    )
}

/// The objects the controllers write status, annotations and finalizers on: namespaced kinds
/// that deserialize.
pub trait NamespacedObject:
    kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
    + Clone
    + DeserializeOwned
    + std::fmt::Debug
{
}

impl<T> NamespacedObject for T where
    T: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
{
}

/// A status with upstream `metav1.Condition`s and stack entries.
pub trait WithConditions: Default + Clone + Serialize + PartialEq {
    /// The conditions.
    fn conditions_mut(&mut self) -> &mut Vec<Condition>;
    /// The stack entries.
    fn stacks_mut(&mut self) -> &mut Vec<StackStatus>;
}

macro_rules! with_conditions {
    ($($status:ty),*) => {$(
        impl WithConditions for $status {
            fn conditions_mut(&mut self) -> &mut Vec<Condition> {
                &mut self.conditions
            }
            fn stacks_mut(&mut self) -> &mut Vec<StackStatus> {
                &mut self.stacks
            }
        }
    )*};
}

with_conditions!(apis::aws::AWSClusterStatus, apis::aws::AWSControlPlaneStatus, apis::aws::AWSMachineDeploymentStatus);

/// Merge one reconcile's stack entries into the recorded ones, by name.
pub fn merge_stacks(recorded: &mut Vec<StackStatus>, seen: &[StackStatus]) {
    for s in seen {
        match recorded.iter_mut().find(|r| r.name == s.name) {
            Some(r) => *r = s.clone(),
            None => recorded.push(s.clone()),
        }
    }
    recorded.sort_by(|a, b| a.name.cmp(&b.name));
}

/// Record a stack entry of the delete path in `status` and write it; while a delete failed,
/// also `Ready=False` (reason `StackDeleteFailed`) with `failed` as the message.
pub async fn record_deletion<K, St>(
    shared: &Shared,
    obj: &K,
    current: Option<&St>,
    status: &mut St,
    entry: StackStatus,
    failed: Option<String>,
) -> Result<(), kube::Error>
where
    K: NamespacedObject,
    St: WithConditions,
{
    merge_stacks(status.stacks_mut(), &[entry]);
    if let Some(message) = failed {
        set_condition(status.conditions_mut(), READY, false, "StackDeleteFailed", message, obj.meta().generation);
    }
    write_status(shared, obj, current, status).await
}

/// Set `Ready=False` with `reason` and `message` on the object's current status, write it, and
/// return the status written.
pub async fn mark_not_ready<K, St>(
    shared: &Shared,
    obj: &K,
    current: Option<&St>,
    reason: &str,
    message: String,
) -> Result<St, kube::Error>
where
    K: NamespacedObject,
    St: WithConditions,
{
    let mut status = current.cloned().unwrap_or_default();
    set_condition(status.conditions_mut(), READY, false, reason, message, obj.meta().generation);
    write_status(shared, obj, current, &status).await?;
    Ok(status)
}

/// Record invalid input as `Ready=False` (reason = the error's kind) and hand the error back: it
/// becomes the Warning event. A failed status write is logged, never returned, so the input error
/// is what the user sees.
pub async fn reject<K, St>(shared: &Shared, obj: &K, current: Option<&St>, err: ResourceError) -> (St, ResourceError)
where
    K: NamespacedObject,
    St: WithConditions,
{
    match mark_not_ready(shared, obj, current, err.kind(), err.inner().to_string()).await {
        Ok(status) => (status, err),
        Err(e) => {
            tracing::warn!(error = %e, object = describe(obj), "writing the status of an invalid object failed");
            (current.cloned().unwrap_or_default(), err)
        }
    }
}

/// Merge-patch `.status` of an object when it differs from what the object carries.
pub async fn write_status<K, St>(
    shared: &Shared,
    obj: &K,
    current: Option<&St>,
    desired: &St,
) -> Result<(), kube::Error>
where
    K: NamespacedObject,
    St: Serialize + PartialEq,
{
    if current == Some(desired) {
        return Ok(());
    }
    let api: Api<K> = Api::namespaced(shared.client.clone(), &obj.namespace().unwrap_or_default());
    let patch = serde_json::json!({ "status": desired });
    api.patch_status(&obj.name_any(), &PatchParams::default(), &Patch::Merge(&patch)).await?;
    Ok(())
}

/// Base AWS tags of a cluster's direct resources (key, bucket).
pub fn base_tags(shared: &Shared, cluster: &AWSCluster, id: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (aws_stacks::names::tags::kubernetes_cluster(id), "owned".to_string()),
        (aws_stacks::names::tags::CLUSTER.to_string(), id.to_string()),
        (aws_stacks::names::tags::INSTALLATION.to_string(), shared.config.installation.clone()),
        (
            aws_stacks::names::tags::ORGANIZATION.to_string(),
            cluster.labels().get(labels::ORGANIZATION).cloned().unwrap_or_default(),
        ),
    ])
}

/// The `stacks::Common` inputs of a cluster's templates.
pub fn common(
    config: &crate::context::OperatorConfig,
    cluster: &AWSCluster,
    release: &Release,
) -> aws_stacks::stacks::Common {
    let id = cluster.name_any();
    let region = cluster.spec.provider.region.clone();
    aws_stacks::stacks::Common {
        cluster_id: id,
        installation: config.installation.clone(),
        organization: cluster.labels().get(labels::ORGANIZATION).cloned().unwrap_or_default(),
        operator_version: config.version.clone(),
        release_version: release.name_any().trim_start_matches('v').to_string(),
        partition: aws_stacks::names::partition(&region).into(),
        region,
        base_domain: cluster.spec.cluster.dns.domain.clone(),
        route53_enabled: config.route53_enabled,
        cloud_tags: cloud_tags(cluster),
    }
}

/// The label prefix of cloud tags: `tag.provider.giantswarm.io/<key>: <value>` on the AWSCluster
/// becomes the tag `<key>=<value>` on the cluster's tenant stacks (and so on their resources).
pub const CLOUD_TAG_PREFIX: &str = "tag.provider.giantswarm.io/";

/// The cloud tags of a cluster, from its labels.
pub fn cloud_tags(cluster: &AWSCluster) -> BTreeMap<String, String> {
    cluster
        .labels()
        .iter()
        .filter_map(|(k, v)| Some((k.strip_prefix(CLOUD_TAG_PREFIX)?.to_owned(), v.clone())))
        .filter(|(k, _)| !k.is_empty())
        .collect()
}

/// The ARN of the cluster key, remembered for the life of the process once seen usable, so that
/// steady-state reconciles of control planes and node pools make no KMS call.
pub async fn cluster_key(
    shared: &Shared,
    tenant: &AccountClients,
    cluster_id: &str,
) -> Result<Option<String>, crate::aws::AwsError> {
    let memo_key = format!("{}/{cluster_id}", tenant.cache_key());
    if let Some(arn) = shared.memo.lock().keys.get(&memo_key) {
        return Ok(Some(arn.clone()));
    }
    match crate::aws::kms::describe_key(tenant, &aws_stacks::names::kms_alias(cluster_id)).await? {
        Some((arn, true)) => Ok(Some(arn)),
        _ => Ok(None),
    }
}

/// How many failed reconciles in a row make an error persistent enough for `Ready`: one
/// transient failure (a throttled call, a dropped connection) must not make `Ready` flap, an
/// error that stays (a denied AssumeRole, throttling beyond the client's retries, a missing AMI)
/// must show. With operatorkit's backoff and the AWS client's own retries, five attempts span
/// from a few seconds to minutes.
pub const PERSISTENT_AFTER: u32 = 5;

/// An object of one of the operator's kinds, with its status.
pub trait WithStatus: NamespacedObject + Serialize + Send + Sync + 'static {
    /// The status type.
    type Status: WithConditions + Send + Sync;
    /// The status, if any.
    fn status(&self) -> Option<&Self::Status>;
}

macro_rules! with_status {
    ($($kind:ty => $status:ty),*) => {$(
        impl WithStatus for $kind {
            type Status = $status;
            fn status(&self) -> Option<&$status> {
                self.status.as_ref()
            }
        }
    )*};
}

with_status!(
    AWSCluster => apis::aws::AWSClusterStatus,
    AWSControlPlane => apis::aws::AWSControlPlaneStatus,
    AWSMachineDeployment => apis::aws::AWSMachineDeploymentStatus
);

/// The operator's status hook: routing problems go to `ReleaseResolved` (operatorkit's
/// [`ReleaseCondition`]); an error that fails [`PERSISTENT_AFTER`] reconciles in a row goes to
/// `Ready=False`, with the error's kind as the reason and its message. The next reconcile that
/// gets through writes `Ready` from what it finds again.
pub struct StatusReport<K> {
    shared: Arc<Shared>,
    release: ReleaseCondition<K>,
}

impl<K> StatusReport<K> {
    /// The hook of one controller.
    pub fn new(shared: Arc<Shared>) -> Self {
        let release = ReleaseCondition::new(shared.client.clone());
        Self { shared, release }
    }
}

impl<K> std::fmt::Debug for StatusReport<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatusReport").finish_non_exhaustive()
    }
}

/// Whether the `consecutive`-th failure in a row is reported in `Ready`.
pub fn persistent(consecutive: u32) -> bool {
    consecutive >= PERSISTENT_AFTER
}

impl<K: WithStatus> StatusHook<K> for StatusReport<K> {
    fn unroutable<'a>(&'a self, obj: &'a K, problem: &'a Unroutable) -> BoxFuture<'a, Result<(), ResourceError>> {
        self.release.unroutable(obj, problem)
    }

    fn routed<'a>(
        &'a self,
        obj: &'a K,
        set: &'a str,
        version: &'a semver::Version,
    ) -> BoxFuture<'a, Result<(), ResourceError>> {
        self.release.routed(obj, set, version)
    }

    fn failed<'a>(
        &'a self,
        obj: &'a K,
        kind: &'a str,
        message: &'a str,
        consecutive: u32,
    ) -> BoxFuture<'a, Result<(), ResourceError>> {
        Box::pin(async move {
            if persistent(consecutive) {
                mark_not_ready(&self.shared, obj, obj.status(), kind, message.to_string()).await?;
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cloud_tags_come_from_the_cluster_labels_with_the_prefix() {
        let cluster: AWSCluster = serde_json::from_value(serde_json::json!({
            "apiVersion": "infrastructure.giantswarm.io/v1alpha3", "kind": "AWSCluster",
            "metadata": {"name": "al9qy", "namespace": "org-acme", "labels": {
                "tag.provider.giantswarm.io/cost-center": "blue",
                "tag.provider.giantswarm.io/": "no key",
                "giantswarm.io/organization": "acme"
            }},
            "spec": {
                "cluster": {"description": "d", "dns": {"domain": "example.com"}},
                "provider": {"credentialSecret": {"name": "c", "namespace": "giantswarm"}, "region": "eu-central-1"}
            }
        }))
        .expect("AWSCluster");
        assert_eq!(cloud_tags(&cluster), BTreeMap::from([("cost-center".to_owned(), "blue".to_owned())]));
    }
}

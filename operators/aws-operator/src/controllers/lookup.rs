//! What the controllers look up and check before they build anything: the objects' validity
//! (as [`InvalidInput`]), their Release, the tenant role and the AWS clients of a cluster, a
//! cluster's control planes and node pools, and the inputs every template of a cluster shares
//! (tags, [`aws_stacks::stacks::Common`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use apis::aws::{AWSCluster, AWSControlPlane, AWSMachineDeployment};
use apis::labels;
use apis::release::Release;
use k8s_openapi::api::core::v1::Secret;
use kube::api::ListParams;
use kube::{Api, ResourceExt};
use operatorkit::ResourceError;
use operatorkit::error::InvalidInput;

use super::status::describe;
use crate::aws::AccountClients;
use crate::context::Shared;

/// The data key of the credential Secret holding the tenant role ARN.
pub const ROLE_ARN_KEY: &str = "aws.awsoperator.arn";

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

/// The Release the router resolved for `obj` (`name`, `v20.0.0`; from its release label or, for a
/// kind routed by a version of its own, the one Release giving `aws-operator` that version), with
/// the components the operator needs. Without a name, the release label's ([`release_of`]).
pub async fn routed_release<K: kube::Resource<DynamicType = ()>>(
    shared: &Shared,
    obj: &K,
    name: Option<&str>,
) -> Result<Release, ResourceError> {
    let Some(name) = name else {
        return release_of(shared, obj).await;
    };
    let version = name.trim_start_matches('v');
    let Some(release) = shared.release(version).await? else {
        return Err(InvalidInput {
            object: describe(obj),
            reason: "ReleaseNotFound",
            message: format!("Release {name} was deleted while the object was routed to it: create it again"),
        }
        .into());
    };
    check_components(obj, version, &release)?;
    Ok(release)
}

/// Every [`REQUIRED_COMPONENTS`] is in Release v`version`, else an [`InvalidInput`] naming the
/// first one missing.
pub fn check_components<K: kube::Resource<DynamicType = ()>>(
    obj: &K,
    version: &str,
    release: &Release,
) -> Result<(), InvalidInput> {
    match REQUIRED_COMPONENTS.into_iter().find(|needed| release.component_version(needed).is_none()) {
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

/// The `Ready` reason of a cluster whose credential Secret lies where it may not be read.
pub const CREDENTIAL_NOT_ALLOWED: &str = "CredentialNotAllowed";

/// The organisation of the objects in `namespace`: `<org>` for `org-<org>` (the namespaces
/// organisations are given), none for any other.
pub fn organization_of_namespace(namespace: &str) -> Option<&str> {
    namespace.strip_prefix("org-").filter(|o| !o.is_empty())
}

/// Whether a cluster in `cluster_namespace` may use the credential Secret in `secret_namespace`
/// whose `giantswarm.io/organization` label is `secret_organization` (`None`: the namespace is
/// not one of `allowed`, so the Secret is not read at all). A cluster's own namespace is always
/// allowed; a namespace the installation names (`allowed`) only for the organisation the
/// Secret's label names, which must be the organisation of the cluster's namespace. `Err`
/// holds why not.
pub fn credential_allowed(
    cluster_namespace: &str,
    secret_namespace: &str,
    secret_organization: Option<&str>,
    allowed: &[String],
) -> Result<(), String> {
    if secret_namespace == cluster_namespace {
        return Ok(());
    }
    if !allowed.iter().any(|n| n == secret_namespace) {
        return Err(format!(
            "namespace {secret_namespace} is neither the cluster's own ({cluster_namespace}) nor one the installation names for credentials ({}): put the Secret in {cluster_namespace}",
            if allowed.is_empty() { "none".to_string() } else { allowed.join(", ") }
        ));
    }
    let Some(org) = organization_of_namespace(cluster_namespace) else {
        return Err(format!(
            "namespace {cluster_namespace} belongs to no organisation (org-<name>), so no shared credential serves it: put the Secret in {cluster_namespace}"
        ));
    };
    match secret_organization {
        Some(label) if label == org => Ok(()),
        Some(label) => Err(format!(
            "it serves organisation {label} (label {}), not {org}: use a Secret labelled {}={org}",
            labels::ORGANIZATION,
            labels::ORGANIZATION
        )),
        None => Err(format!(
            "it names no organisation: an administrator labels it {}={org} to let organisation {org} use it",
            labels::ORGANIZATION
        )),
    }
}

/// The tenant role ARN from the AWSCluster's credential Secret, once the Secret is one the
/// cluster may use ([`credential_allowed`]); a Secret elsewhere is not read.
pub async fn tenant_role(shared: &Shared, cluster: &AWSCluster) -> Result<String, ResourceError> {
    let cs = &cluster.spec.provider.credential_secret;
    credential_role(shared, cluster, "spec.provider.credentialSecret", &cs.namespace, &cs.name).await
}

/// The tenant role ARN from the credential Secret `namespace/name` that `field` of `cluster`
/// names, once the Secret is one the cluster may use ([`credential_allowed`]); a Secret
/// elsewhere is not read.
pub async fn credential_role<K: kube::Resource<DynamicType = ()>>(
    shared: &Shared,
    cluster: &K,
    field: &str,
    namespace: &str,
    name: &str,
) -> Result<String, ResourceError> {
    credential_role_in(&shared.client, &shared.config.credential_namespaces, cluster, field, namespace, name).await
}

/// [`credential_role`] through `client`, with `allowed` the namespaces besides the cluster's own
/// that may hold credential Secrets: for the commands that read a cluster as the daemon does.
pub async fn credential_role_in<K: kube::Resource<DynamicType = ()>>(
    client: &kube::Client,
    allowed: &[String],
    cluster: &K,
    field: &str,
    namespace: &str,
    name: &str,
) -> Result<String, ResourceError> {
    let cluster_ns = cluster.namespace().unwrap_or_default();
    let refuse = |why: String| -> ResourceError {
        InvalidInput {
            object: describe(cluster),
            reason: CREDENTIAL_NOT_ALLOWED,
            message: format!("{field} names Secret {namespace}/{name}, which this cluster may not use: {why}"),
        }
        .into()
    };
    if namespace != cluster_ns && !allowed.iter().any(|a| a == namespace) {
        credential_allowed(&cluster_ns, namespace, None, allowed).map_err(refuse)?;
    }
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let secret = api.get_opt(name).await?;
    if let Some(secret) = &secret {
        let org = secret.labels().get(labels::ORGANIZATION).map(String::as_str);
        credential_allowed(&cluster_ns, namespace, org, allowed).map_err(refuse)?;
    }
    let Some(secret) = secret else {
        return Err(InvalidInput {
            object: describe(cluster),
            reason: "CredentialSecretNotFound",
            message: format!(
                "{field} names Secret {namespace}/{name}, which does not exist: create it with key {ROLE_ARN_KEY} holding the tenant role ARN"
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
                "Secret {namespace}/{name} has no valid {ROLE_ARN_KEY} key: set it to the ARN of the role to assume in the tenant account (arn:aws:iam::<account>:role/<name>)"
            ),
        }
        .into()
    })
}

/// What a control plane or node pool of `cluster` records about where its stacks live, its
/// tenant role being `role`.
pub fn recorded_account(cluster: &AWSCluster, role: String) -> apis::aws::RecordedAccount {
    apis::aws::RecordedAccount {
        tenant_role_arn: role,
        region: cluster.spec.provider.region.clone(),
        cluster_uid: cluster.uid().unwrap_or_default(),
    }
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

/// The AWSCluster of a control plane or node pool (same namespace, named by the cluster label).
pub async fn cluster_of<K: kube::Resource<DynamicType = ()>>(
    shared: &Shared,
    obj: &K,
) -> Result<Option<AWSCluster>, ResourceError> {
    let id = cluster_id(obj)?;
    let api: Api<AWSCluster> = Api::namespaced(shared.client.clone(), &obj.namespace().unwrap_or_default());
    Ok(api.get_opt(&id).await?)
}

/// The AWSCluster as the owner of its id: the namespace `<id>` claims the id for it, and
/// everything it owns outside AWS carries its UID ([`apis::cluster_id`]). A status with a
/// cluster CIDR, which only the operator writes, proves an earlier version reconciled it.
pub fn owner(cluster: &AWSCluster) -> apis::cluster_id::Owner {
    let reconciled_before = cluster.status.as_ref().is_some_and(|s| s.provider.network.cidr.is_some());
    apis::cluster_id::Owner::of(cluster, &cluster.name_any(), reconciled_before)
}

/// The labels of the namespace `<id>` besides the owner's: the organisation, as the original set
/// it.
pub fn namespace_labels(cluster: &AWSCluster) -> BTreeMap<String, String> {
    let org = cluster.labels().get(labels::ORGANIZATION).cloned().unwrap_or_default();
    BTreeMap::from([(labels::ORGANIZATION.to_string(), org)])
}

/// Whether `cluster` holds the claim of its id (adopting an earlier version's namespace if it
/// may), never creating it: `Ok(None)` while it holds no claim yet, an error naming the holder
/// when another object holds it.
pub async fn claim_held<K: kube::Resource<DynamicType = ()>>(
    shared: &Shared,
    obj: &K,
    cluster: &AWSCluster,
) -> Result<Option<()>, ResourceError> {
    let owner = owner(cluster);
    match node_lifecycle::claims::claim(&shared.client, &owner, &BTreeMap::new(), false).await? {
        node_lifecycle::claims::Claim::Held => Ok(Some(())),
        node_lifecycle::claims::Claim::Free => Ok(None),
        node_lifecycle::claims::Claim::InUse { holder } => Err(node_lifecycle::claims::in_use(
            describe(obj),
            &owner,
            &format!("label {} of AWSCluster {}/{}", labels::CLUSTER, owner.namespace, owner.name),
            &holder,
        )
        .into()),
    }
}

/// How the operator reaches `cluster`'s workload cluster: its Secrets in the cluster's
/// namespace (`<id>-kubeconfig`, else the `api` certificate) and its API host.
pub fn workload_cluster(cluster: &AWSCluster) -> node_lifecycle::clients::ClusterRef {
    let id = cluster.name_any();
    let api = aws_stacks::names::api_host(&id, &cluster.spec.cluster.dns.domain);
    node_lifecycle::clients::ClusterRef::new(cluster.namespace().unwrap_or_default(), id, api)
}

/// The Nodes of `cluster`'s workload cluster, or why they could not be read (no credentials,
/// nothing answering, refused): the upgrade gates hold on any of these and say which.
pub async fn workload_nodes(
    shared: &Shared,
    cluster: &AWSCluster,
) -> Result<Vec<k8s_openapi::api::core::v1::Node>, String> {
    let wc = shared.workload_clients.client_for(&workload_cluster(cluster)).await.map_err(|e| e.to_string())?;
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(wc.client());
    nodes.list(&ListParams::default()).await.map(|l| l.items).map_err(|e| wc.error(e).to_string())
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

/// The AWS tags of a cluster's direct resources (key, buckets, OIDC provider): its cloud tags
/// ([`cloud_tags`]) and the operator's own, which win over a cloud tag of the same key.
pub fn base_tags<K: kube::ResourceExt>(shared: &Shared, cluster: &K, id: &str) -> BTreeMap<String, String> {
    let mut tags = cloud_tags(cluster);
    tags.extend(BTreeMap::from([
        (aws_stacks::names::tags::kubernetes_cluster(id), "owned".to_string()),
        (aws_stacks::names::tags::CLUSTER.to_string(), id.to_string()),
        (aws_stacks::names::tags::INSTALLATION.to_string(), shared.config.installation.clone()),
        (
            aws_stacks::names::tags::ORGANIZATION.to_string(),
            cluster.labels().get(labels::ORGANIZATION).cloned().unwrap_or_default(),
        ),
    ]));
    tags
}

/// The `stacks::Common` inputs of a cluster's templates.
pub fn common(
    config: &crate::config::OperatorConfig,
    cluster: &AWSCluster,
    release: &Release,
) -> aws_stacks::stacks::Common {
    let id = cluster.name_any();
    let region = cluster.spec.provider.region.clone();
    aws_stacks::stacks::Common {
        cluster_id: id,
        cluster_uid: cluster.uid().unwrap_or_default(),
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
/// (or its Cluster API `Cluster`, `crate::capi`) becomes the tag `<key>=<value>` on the
/// cluster's tenant stacks (and so on their resources).
pub use apis::capi::CLOUD_TAG_PREFIX;

/// The cloud tags of a cluster, from its labels.
pub fn cloud_tags<K: kube::ResourceExt>(cluster: &K) -> BTreeMap<String, String> {
    apis::capi::cloud_tags(cluster.labels())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_credential_is_allowed_from_the_own_namespace_or_a_named_one_for_its_organisation() {
        let named = vec!["giantswarm".to_string()];
        assert_eq!(credential_allowed("org-acme", "org-acme", None, &[]), Ok(()));
        assert_eq!(credential_allowed("org-acme", "giantswarm", Some("acme"), &named), Ok(()));
        // Another organisation's credential in a named namespace.
        let err = credential_allowed("org-evil", "giantswarm", Some("acme"), &named).unwrap_err();
        assert!(err.contains("serves organisation acme") && err.contains("not evil"), "{err}");
        // Unlabelled: it serves nobody but its own namespace.
        assert!(
            credential_allowed("org-acme", "giantswarm", None, &named).unwrap_err().contains("names no organisation")
        );
        // Another organisation's namespace, or one the installation does not name.
        let err = credential_allowed("org-evil", "org-acme", Some("evil"), &named).unwrap_err();
        assert!(err.contains("neither the cluster's own") && err.contains("put the Secret in org-evil"), "{err}");
        assert!(credential_allowed("org-acme", "giantswarm", Some("acme"), &[]).is_err());
        // A namespace of no organisation gets no shared credential.
        assert!(credential_allowed("default", "giantswarm", Some("default"), &named).is_err());
    }

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

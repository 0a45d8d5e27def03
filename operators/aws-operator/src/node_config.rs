//! Node configs: rendered per master and per node pool, their secrets encrypted with the cluster
//! key, uploaded to the cluster bucket — and uploaded only when their content changed.
//!
//! KMS ciphertext is different on every call, so comparing uploaded bytes would re-upload every
//! config on every reconcile (upstream did, reference §7.3). Instead each object carries the
//! sha256 of its *plaintext* rendering as metadata, and this process remembers what it uploaded
//! or verified: an unchanged config costs nothing after the first check.
//!
//! Secrets are the cluster's certificate Secrets, found by label (`giantswarm.io/cluster=<id>`,
//! `giantswarm.io/certificate=<name>`, keys `ca`, `crt`, `key`, as cert-operator writes them) in
//! one namespace only: the cluster's own, or the one `--certificates-namespace` names. A label is
//! no proof of ownership: anyone who may create a Secret in some namespace could otherwise put
//! certificates into another cluster's nodes. Masters also get the API server's
//! encryption-provider config, from Secret `<id>-encryption-provider-config` in the same
//! namespace. Every one of these Secrets is held by a finalizer until the cluster is gone
//! (`operatorkit::held_secrets`).

use std::collections::BTreeMap;

use apis::aws::AWSCluster;
use apis::release::Release;
use aws_stacks::ignition::{self, NodeConfigInput, NodeSecret, Oidc, Role, paths};
use k8s_openapi::api::core::v1::Secret;
use kube::api::ListParams;
use kube::{Api, ResourceExt};
use operatorkit::ResourceError;

use crate::aws::AccountClients;
use crate::context::Shared;
use crate::controllers::lookup::component;

/// The certificate label.
pub const CERTIFICATE_LABEL: &str = "giantswarm.io/certificate";

/// The namespace of a cluster's certificate Secrets: the configured one, else the cluster's.
pub fn certificates_namespace<'a>(shared: &'a Shared, cluster_namespace: &'a str) -> &'a str {
    shared.config.certificates_namespace.as_deref().unwrap_or(cluster_namespace)
}

/// The certificate Secrets of a cluster in `namespace` ([`certificates_namespace`]), held by the
/// [`SECRET_FINALIZER`](crate::controllers::SECRET_FINALIZER) from now on: certificate name →
/// (key → bytes).
pub async fn certificates(
    shared: &Shared,
    namespace: &str,
    cluster_id: &str,
) -> Result<BTreeMap<String, BTreeMap<String, Vec<u8>>>, kube::Error> {
    let secrets = certificate_secrets(shared, namespace, cluster_id).await?;
    operatorkit::held_secrets::hold_all(&shared.client, &secrets, crate::controllers::SECRET_FINALIZER).await?;
    let mut out = BTreeMap::new();
    for s in secrets {
        let Some(name) = s.metadata.labels.as_ref().and_then(|l| l.get(CERTIFICATE_LABEL)).cloned() else { continue };
        let data = s.data.unwrap_or_default().into_iter().map(|(k, v)| (k, v.0)).collect();
        out.insert(name, data);
    }
    Ok(out)
}

/// The Secret holding a cluster's API server encryption-provider config, in the certificates'
/// namespace: `<id>-encryption-provider-config`, key [`ENCRYPTION_CONFIG_KEY`], as the
/// encryption-provider operator writes it (reference §7.3).
pub fn encryption_config_secret(cluster_id: &str) -> String {
    format!("{cluster_id}-encryption-provider-config")
}

/// The key of the encryption-provider config in its Secret.
pub const ENCRYPTION_CONFIG_KEY: &str = "encryption";

/// The masters' encryption-provider config (an `EncryptionConfiguration` document), held by the
/// finalizer like the certificates; `None` while its Secret or key is missing.
pub async fn encryption_config(
    shared: &Shared,
    namespace: &str,
    cluster_id: &str,
) -> Result<Option<NodeSecret>, kube::Error> {
    let name = encryption_config_secret(cluster_id);
    let api: Api<Secret> = Api::namespaced(shared.client.clone(), namespace);
    let Some(secret) = api.get_opt(&name).await? else { return Ok(None) };
    operatorkit::held_secrets::hold_all(
        &shared.client,
        std::slice::from_ref(&secret),
        crate::controllers::SECRET_FINALIZER,
    )
    .await?;
    Ok(secret
        .data
        .and_then(|mut d| d.remove(ENCRYPTION_CONFIG_KEY))
        .filter(|v| !v.0.is_empty())
        .map(|v| NodeSecret { path: paths::ENCRYPTION_CONFIG.to_string(), plaintext: v.0 }))
}

/// The certificate Secrets of cluster `cluster_id` in `namespace`, and only there.
pub async fn certificate_secrets(
    shared: &Shared,
    namespace: &str,
    cluster_id: &str,
) -> Result<Vec<Secret>, kube::Error> {
    let api: Api<Secret> = Api::namespaced(shared.client.clone(), namespace);
    let selector = format!("{}={cluster_id},{CERTIFICATE_LABEL}", apis::labels::CLUSTER);
    Ok(api.list(&ListParams::default().labels(&selector)).await?.items)
}

/// The secrets a node of `role` needs, or the names of the missing certificates.
pub fn secrets_for(
    master: bool,
    certs: &BTreeMap<String, BTreeMap<String, Vec<u8>>>,
) -> Result<Vec<NodeSecret>, Vec<String>> {
    let mut wanted: Vec<(&str, [(&str, &str); 3])> =
        vec![("worker", [("crt", paths::WORKER_CRT), ("key", paths::WORKER_KEY), ("ca", paths::WORKER_CA)])];
    if master {
        wanted.push(("api", [("crt", paths::API_CRT), ("key", paths::API_KEY), ("ca", paths::API_CA)]));
        wanted.push(("etcd", [("crt", paths::ETCD_CRT), ("key", paths::ETCD_KEY), ("ca", paths::ETCD_CA)]));
    }
    let mut missing = Vec::new();
    let mut out = Vec::new();
    for (cert, files) in wanted {
        match certs.get(cert) {
            Some(data) => {
                for (key, path) in files {
                    match data.get(key) {
                        Some(bytes) => out.push(NodeSecret { path: path.to_string(), plaintext: bytes.clone() }),
                        None => missing.push(format!("{cert}/{key}")),
                    }
                }
            }
            None => missing.push(cert.to_string()),
        }
    }
    if master {
        match certs.get("service-account").and_then(|d| d.get("key")) {
            Some(k) => out.push(NodeSecret { path: paths::SERVICE_ACCOUNT_KEY.to_string(), plaintext: k.clone() }),
            None => missing.push("service-account".into()),
        }
    }
    if missing.is_empty() { Ok(out) } else { Err(missing) }
}

/// The pod CIDR of a cluster without `spec.provider.pods.cidrBlock`.
pub const DEFAULT_POD_CIDR: &str = "100.64.0.0/12";

/// The common inputs of a node config of `cluster`: its id, domain and region, the Release's
/// versions, the pod CIDR of `spec.provider.pods.cidrBlock` ([`DEFAULT_POD_CIDR`] without one),
/// and the API server's OIDC flags of `spec.cluster.oidc`.
pub fn input(
    shared: &Shared,
    release: &Release,
    cluster: &AWSCluster,
    role: Role,
    node_labels: BTreeMap<String, String>,
    secrets: Vec<NodeSecret>,
) -> NodeConfigInput {
    let cluster_id = cluster.name_any();
    let domain = &cluster.spec.cluster.dns.domain;
    NodeConfigInput {
        role,
        base_domain: aws_stacks::names::tenant_base_domain(&cluster_id, domain),
        api_domain: aws_stacks::names::api_host(&cluster_id, domain),
        etcd_domain: aws_stacks::names::etcd_host(&cluster_id, domain),
        cluster_id,
        region: cluster.spec.provider.region.clone(),
        // Both are checked when the Release is read (`controllers::lookup::check_components`).
        kubernetes_version: component(release, "kubernetes").unwrap_or_default().to_string(),
        etcd_version: component(release, "etcd").unwrap_or_default().to_string(),
        node_labels,
        service_cidr: "172.31.0.0/16".into(),
        cluster_dns_ip: "172.31.0.10".into(),
        pod_cidr: cluster.pod_cidr().unwrap_or(DEFAULT_POD_CIDR).to_string(),
        oidc: cluster.spec.cluster.oidc.as_ref().map(|o| Oidc {
            issuer_url: o.issuer_url.clone(),
            client_id: o.client_id.clone(),
            username_claim: o.claims.username.clone(),
            groups_claim: o.claims.groups.clone(),
        }),
        // The schema keeps it at 0 or more.
        conntrack_max_per_core: cluster.spec.cluster.kube_proxy.conntrack_max_per_core.map(|n| n.max(0) as u32),
        registry: shared.config.registry.clone(),
        secrets,
    }
}

/// Upload the config to `bucket/key` unless an identical one is there. Returns `true` when it
/// uploaded.
pub async fn upload(
    shared: &Shared,
    aws: &AccountClients,
    key_arn: &str,
    bucket: &str,
    key: &str,
    input: &NodeConfigInput,
) -> Result<bool, ResourceError> {
    let config =
        ignition::render(input).map_err(|e| ResourceError::msg("NodeConfigInvalid", e.to_string()).permanent())?;
    let hash = config.content_hash();
    let memo_key = format!("{bucket}/{key}");
    if shared.memo.lock().uploads.get(&memo_key) == Some(&hash) {
        return Ok(false);
    }
    if crate::aws::s3::object_hash(aws, bucket, key).await?.as_deref() == Some(hash.as_str()) {
        shared.memo.lock().uploads.insert(memo_key, hash);
        return Ok(false);
    }
    let mut ciphertexts = Vec::with_capacity(config.secrets().len());
    for secret in config.secrets() {
        ciphertexts.push(crate::aws::kms::encrypt(aws, key_arn, &secret.plaintext).await?);
    }
    let body = config.seal_with(ciphertexts).map_err(|e| ResourceError::msg("NodeConfigInvalid", e.to_string()))?;
    crate::aws::s3::put_object(aws, bucket, key, body, &hash, "application/json").await?;
    shared.memo.lock().uploads.insert(memo_key, hash);
    Ok(true)
}

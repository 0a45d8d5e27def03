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
//! (`operatorkit::held_secrets`). Where a cluster brings none, the AWSCluster controller issues
//! them before anything reads them (`controllers::cluster::certificates`).
//!
//! Every config is rendered and verified ([`build`]: the pure checks of `node_verify`) before
//! any is uploaded; one that fails is never uploaded, its stack is not updated, and the object
//! gets `Ready=False` with reason [`NODE_CONFIG_INVALID`] naming the node, the file or unit and
//! the problem.

use std::collections::BTreeMap;

use apis::aws::AWSCluster;
use apis::release::Release;
use aws_stacks::ignition::{self, NodeConfigInput, NodeSecret, Oidc, Role, paths};
use k8s_openapi::api::core::v1::Secret;
use kube::api::ListParams;
use kube::{Api, ResourceExt};
use operatorkit::ResourceError;

use crate::aws::AccountClients;
use crate::context::{SECRET_FINALIZER, Shared};

/// The certificate label.
pub const CERTIFICATE_LABEL: &str = pki::secret::CERTIFICATE_LABEL;

/// The namespace of a cluster's certificate Secrets: the configured one, else the cluster's.
pub fn certificates_namespace<'a>(shared: &'a Shared, cluster_namespace: &'a str) -> &'a str {
    shared.config.certificates_namespace.as_deref().unwrap_or(cluster_namespace)
}

/// The certificate Secrets of a cluster in `namespace` ([`certificates_namespace`]), held by the
/// [`SECRET_FINALIZER`] from now on: certificate name →
/// (key → bytes).
pub async fn certificates(
    shared: &Shared,
    namespace: &str,
    cluster_id: &str,
) -> Result<BTreeMap<String, BTreeMap<String, Vec<u8>>>, kube::Error> {
    let secrets = certificate_secrets(shared, namespace, cluster_id).await?;
    operatorkit::held_secrets::hold_all(&shared.client, &secrets, SECRET_FINALIZER).await?;
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
/// encryption-provider operator writes it (reference §7.3) and as the operator issues it.
pub fn encryption_config_secret(cluster_id: &str) -> String {
    pki::secret::encryption_provider_config_secret_name(cluster_id)
}

/// The key of the encryption-provider config in its Secret.
pub const ENCRYPTION_CONFIG_KEY: &str = pki::secret::ENCRYPTION_KEY;

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
    operatorkit::held_secrets::hold_all(&shared.client, std::slice::from_ref(&secret), SECRET_FINALIZER).await?;
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

pub use aws_stacks::ignition::secrets_for;

/// The cluster DNS address of a Service CIDR: its network address with `.10` as the last octet
/// (`172.31.0.0/16` → `172.31.0.10`), as the original's node configs had it.
pub fn cluster_dns_ip(service_cidr: &str) -> String {
    let network = service_cidr.split('/').next().unwrap_or_default();
    match network.rsplit_once('.') {
        Some((head, _)) => format!("{head}.10"),
        None => network.to_string(),
    }
}

/// The pod CIDR of a cluster without `spec.provider.pods.cidrBlock`.
pub const DEFAULT_POD_CIDR: &str = "100.64.0.0/12";

/// The common inputs of a node config of `cluster`: its id, domain and region, the Release's
/// versions, the pod CIDR of `spec.provider.pods.cidrBlock` ([`DEFAULT_POD_CIDR`] without one),
/// the API server's OIDC flags of `spec.cluster.oidc`, kube-proxy's conntrack limit of
/// `spec.cluster.kubeProxy.conntrackMaxPerCore`, and the image `registry` and `service_cidr` of
/// the operator's settings (`--service-cidr`; its `.10` is the cluster DNS). Pure, so that each
/// field's way from the CR into the node config is tested.
pub fn input(
    registry: &str,
    service_cidr: &str,
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
        kubernetes_version: release.component_version("kubernetes").unwrap_or_default().to_string(),
        etcd_version: release.component_version("etcd").unwrap_or_default().to_string(),
        node_labels,
        service_cidr: service_cidr.into(),
        cluster_dns_ip: cluster_dns_ip(service_cidr),
        pod_cidr: cluster.pod_cidr().unwrap_or(DEFAULT_POD_CIDR).to_string(),
        oidc: cluster.spec.cluster.oidc.as_ref().map(|o| Oidc {
            issuer_url: o.issuer_url.clone(),
            client_id: o.client_id.clone(),
            username_claim: o.claims.username.clone(),
            groups_claim: o.claims.groups.clone(),
        }),
        // The schema keeps it at 0 or more.
        conntrack_max_per_core: cluster.spec.cluster.kube_proxy.conntrack_max_per_core.map(|n| n.max(0) as u32),
        registry: registry.to_string(),
        // The fleet's Cluster API objects set it, when they are there (`crate::capi`).
        tuning: Default::default(),
        extras: Default::default(),
        irsa: None,
        secrets,
    }
}

/// The reason of `Ready=False` and of the Warning event when a node config cannot be rendered
/// or fails its checks.
pub const NODE_CONFIG_INVALID: &str = "NodeConfigInvalid";

/// What stands in for every secret's ciphertext in the document [`verify`] checks: the checks
/// read no secret, and no plaintext reaches them.
const SEALED: &[u8] = b"sealed";

/// Render the config of `node` (`master-<id>`, `worker-<pool>`) and verify it: the pure step
/// before any upload. A config that cannot be rendered or fails a check is a permanent
/// [`NODE_CONFIG_INVALID`] error naming `object`, the node, each file or unit and each problem.
pub fn build(object: &str, node: &str, input: &NodeConfigInput) -> Result<ignition::NodeConfig, ResourceError> {
    let config = ignition::render(input)
        .map_err(|e| ResourceError::msg(NODE_CONFIG_INVALID, format!("{object}: node {node}: {e}")).permanent())?;
    verify(object, node, &config)?;
    Ok(config)
}

/// Run `node_verify`'s pure checks on a rendered config, its secrets sealed as [`SEALED`].
pub fn verify(object: &str, node: &str, config: &ignition::NodeConfig) -> Result<(), ResourceError> {
    let sealed = config.seal(|_| Ok::<_, std::convert::Infallible>(SEALED.to_vec())).unwrap_or_else(|e| match e {});
    verify_json(object, node, &String::from_utf8_lossy(&sealed))
}

/// [`verify`] on a sealed Ignition document.
pub fn verify_json(object: &str, node: &str, json: &str) -> Result<(), ResourceError> {
    node_verify::verify(node, json).map_err(|invalid| {
        ResourceError::msg(
            NODE_CONFIG_INVALID,
            format!(
                "{object}: {invalid}; nothing is uploaded and no node is replaced until a config passes \
                 (the Release's component versions decide the flags and fields each component accepts)"
            ),
        )
        .permanent()
    })
}

/// Upload the built config to `bucket/key` unless an identical one is there. Returns `true`
/// when it uploaded.
pub async fn upload(
    shared: &Shared,
    aws: &AccountClients,
    key_arn: &str,
    bucket: &str,
    key: &str,
    config: &ignition::NodeConfig,
) -> Result<bool, ResourceError> {
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
    let body = config.seal_with(ciphertexts).map_err(|e| ResourceError::msg(NODE_CONFIG_INVALID, e.to_string()))?;
    crate::aws::s3::put_object(aws, bucket, key, body, &hash, "application/json").await?;
    shared.memo.lock().uploads.insert(memo_key, hash);
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn release() -> Release {
        serde_json::from_value(json!({
            "apiVersion": "release.giantswarm.io/v1alpha1", "kind": "Release",
            "metadata": {"name": "v20.1.3"},
            "spec": {"date": "2026-01-01T00:00:00Z", "state": "active", "components": [
                {"name": "kubernetes", "version": "1.31.7"},
                {"name": "etcd", "version": "3.5.17"},
                {"name": "containerlinux", "version": "4230.2.4"},
                {"name": "aws-operator", "version": "16.2.0"}
            ]}
        }))
        .unwrap_or_else(|e| panic!("{e}"))
    }

    /// A master's input at the fixture's Release, with a placeholder for every file the
    /// controllers place.
    fn master_input() -> NodeConfigInput {
        let certs: BTreeMap<String, BTreeMap<String, Vec<u8>>> = ["worker", "api", "etcd", "service-account"]
            .into_iter()
            .map(|c| {
                (c.to_string(), ["ca", "crt", "key"].into_iter().map(|k| (k.to_string(), b"pem".to_vec())).collect())
            })
            .collect();
        let mut secrets = secrets_for(true, &certs).unwrap_or_else(|m| panic!("{m:?}"));
        secrets.push(NodeSecret { path: paths::ENCRYPTION_CONFIG.into(), plaintext: b"config".to_vec() });
        let role = Role::Master {
            id: 2,
            etcd_name: ignition::etcd_name(2),
            etcd_initial_cluster: ignition::etcd_initial_cluster(
                &aws_stacks::names::tenant_base_domain("zq4kx", "k8s.example.com"),
                3,
            ),
            initial_cluster_state: ignition::InitialClusterState::New,
        };
        let cluster = cluster(json!({"dns": {"domain": "k8s.example.com"}}), None);
        input("quay.io", "172.31.0.0/16", &release(), &cluster, role, BTreeMap::new(), secrets)
    }

    #[test]
    fn a_rendered_config_is_verified_before_it_is_uploaded() {
        let input = master_input();
        let config = build("AWSControlPlane org-umbra/a2b4c", "master-2", &input).unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(config.content_hash(), ignition::render(&input).unwrap_or_else(|e| panic!("{e}")).content_hash());
    }

    /// No field of the CRs makes a config fail a check (the checks are what the renderer is
    /// tested against), so the step is proven on a rendered config broken by hand.
    #[test]
    fn a_config_that_fails_a_check_is_refused_naming_the_node_the_file_and_the_problem() {
        let config =
            build("AWSControlPlane org-umbra/a2b4c", "master-2", &master_input()).unwrap_or_else(|e| panic!("{e:?}"));
        let sealed =
            config.seal(|_| Ok::<_, std::convert::Infallible>(b"sealed".to_vec())).unwrap_or_else(|e| match e {});
        let mut doc: serde_json::Value = serde_json::from_slice(&sealed).unwrap_or_else(|e| panic!("{e}"));
        for file in doc["storage"]["files"].as_array_mut().into_iter().flatten() {
            if file["path"] == "/etc/kubernetes/manifests/k8s-api-server.yaml" {
                let text = ::ignition::decode_data_url(file["contents"]["source"].as_str().unwrap_or_default())
                    .unwrap_or_else(|e| panic!("{e}"));
                let text = String::from_utf8_lossy(&text).replace("--allow-privileged=true", "--allow-privilged=true");
                file["contents"]["source"] = ::ignition::data_url(text.as_bytes()).into();
            }
        }
        let err = verify_json("AWSControlPlane org-umbra/a2b4c", "master-2", &doc.to_string())
            .expect_err("an unknown flag fails the check");
        assert_eq!(err.kind(), NODE_CONFIG_INVALID);
        assert!(!err.is_retryable(), "nothing changes until the operator or the Release does");
        let message = err.inner().to_string();
        assert!(
            message.starts_with(
                "AWSControlPlane org-umbra/a2b4c: the node config of master-2 fails its checks: node master-2: \
                 /etc/kubernetes/manifests/k8s-api-server.yaml: kube-apiserver v1.31.7 has no flag --allow-privilged (Flag)"
            ),
            "{message}"
        );
        assert!(!message.contains("pem") && !message.contains("sealed"), "no file content: {message}");
    }

    fn cluster(cluster: serde_json::Value, provider_pods: Option<serde_json::Value>) -> AWSCluster {
        let mut provider = json!({
            "credentialSecret": {"name": "credential-zq4kx", "namespace": "org-umbra"},
            "region": "ap-southeast-2"
        });
        if let Some(pods) = provider_pods {
            provider["pods"] = pods;
        }
        serde_json::from_value(json!({
            "apiVersion": "infrastructure.giantswarm.io/v1alpha3", "kind": "AWSCluster",
            "metadata": {"name": "zq4kx", "namespace": "org-umbra"},
            "spec": {"cluster": cluster, "provider": provider}
        }))
        .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn the_pod_cidr_oidc_and_conntrack_of_the_cluster_reach_the_node_config() {
        let c = cluster(
            json!({
                "description": "umbra", "dns": {"domain": "umbra.example.org"},
                "kubeProxy": {"conntrackMaxPerCore": 131072},
                "oidc": {"issuerURL": "https://sso.umbra.example.org", "clientID": "umbra-k8s",
                         "claims": {"username": "preferred_username", "groups": "roles"}}
            }),
            Some(json!({"cidrBlock": "10.96.0.0/13"})),
        );
        let input = input(
            "registry.umbra.example.org",
            "10.112.0.0/16",
            &release(),
            &c,
            Role::Worker { md_id: "p7f2a".into() },
            BTreeMap::new(),
            vec![],
        );
        assert_eq!(input.pod_cidr, "10.96.0.0/13");
        assert_eq!(
            input.oidc,
            Some(Oidc {
                issuer_url: "https://sso.umbra.example.org".into(),
                client_id: "umbra-k8s".into(),
                username_claim: "preferred_username".into(),
                groups_claim: "roles".into(),
            })
        );
        assert_eq!(input.conntrack_max_per_core, Some(131072));
        assert_eq!(input.registry, "registry.umbra.example.org");
        assert_eq!((input.service_cidr.as_str(), input.cluster_dns_ip.as_str()), ("10.112.0.0/16", "10.112.0.10"));
        assert_eq!((input.kubernetes_version.as_str(), input.etcd_version.as_str()), ("1.31.7", "3.5.17"));
        assert_eq!((input.cluster_id.as_str(), input.region.as_str()), ("zq4kx", "ap-southeast-2"));
    }

    #[test]
    fn without_them_the_node_config_takes_the_defaults() {
        let c = cluster(json!({"description": "", "dns": {"domain": "umbra.example.org"}}), None);
        let input = input(
            "quay.io",
            "172.31.0.0/16",
            &release(),
            &c,
            Role::Worker { md_id: "p7f2a".into() },
            BTreeMap::new(),
            vec![],
        );
        assert_eq!(input.pod_cidr, DEFAULT_POD_CIDR);
        assert_eq!(input.oidc, None);
        assert_eq!(input.conntrack_max_per_core, None);
    }
}

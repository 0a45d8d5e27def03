//! Step `irsa`: IAM roles for service accounts (`aws_stacks::irsa`). For a cluster that has
//! them, the operator publishes its public service-account issuer and names it:
//!
//! 1. the key pair `<id>-service-account-v2` comes from the `certificates` step (issued where
//!    absent; one the original wrote is used as it is);
//! 2. the issuer is the one ConfigMap `<id>-irsa-cloudfront` names (a CloudFront distribution
//!    set up before, say); without one, outside China from Release 18 on, the cluster's CloudFront
//!    distribution in front of the issuer bucket (`crate::aws::cloudfront`, found again or
//!    created), `https://<id>.cloudfront.net`; else the issuer bucket served by S3,
//!    `https://s3.<region>.amazonaws.com/<account>-g8s-<id>-oidc-pod-identity-v2`;
//! 3. the discovery document and the JWKS of the public key (`pki::service_account_v2`) are
//!    uploaded to that bucket as `application/json`, each only when its content changed; the
//!    bucket is readable by the distribution only where one fronts it, else by anyone
//!    (`aws_stacks::irsa::IssuerReader`);
//! 4. an IAM OIDC provider per issuer host in the tenant account, with the STS audience
//!    (`crate::aws::iam`; one that exists is used as it is);
//! 5. the ConfigMap `<id>-irsa-cloudfront` is written where absent, `domain` naming the issuer
//!    and, for a distribution, `arn`, `distributionId` and `originAccessControlId` (one someone
//!    else wrote is never changed).
//!
//! The key pair's Secret is held by the `secret-in-use` finalizer from its first read on, like
//! the cluster's other Secrets, and released at the end of the cluster's teardown.
//!
//! The control plane waits for the ConfigMap and the Secret ([`master_inputs`]) before its
//! masters sign tokens as the issuer and its roles trust it.
//!
//! Bad input stops here with `Ready=False` and a Warning event naming the field and the fix: an
//! annotation value that does not mean "on", a ConfigMap without `domain`, a public key that
//! cannot be published.

use std::collections::BTreeMap;

use apis::aws::AWSCluster;
use apis::release::Release;
use aws_stacks::ignition::{Irsa as NodeIrsa, NodeSecret, paths};
use aws_stacks::irsa::{self, Issuer};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, ResourceExt};
use operatorkit::{Outcome, Resource, ResourceError, resource};
use pki::service_account_v2::{self as sa, DISCOVERY_PATH, JWKS_PATH};

use super::{ClusterState, reject};
use crate::context::Shared;
use crate::controllers;

/// The `Ready` reason of a cluster whose IRSA annotation, ConfigMap or key cannot be used.
pub const IRSA_INVALID: &str = "IrsaInvalid";

/// The label of the ConfigMap the operator wrote, so that its teardown deletes that one only.
pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";

/// At the cluster's teardown, once its buckets are gone: the CloudFront distribution of its
/// issuer that carries its tag goes, one step per call (`Some(what it waits for)` until it is
/// gone: disabling, deploying, deleting), then the origin access identity the original's
/// distribution read the bucket through (its ConfigMap's `originAccessIdentityId`); then the IAM OIDC providers of its issuer that carry its
/// tag go, the ConfigMap the operator wrote goes (one someone else wrote stays), and this process
/// forgets what it published.
pub async fn forget(
    shared: &Shared,
    cluster: &AWSCluster,
    tenant: &crate::aws::AccountClients,
) -> Result<Option<String>, ResourceError> {
    let id = cluster.name_any();
    let api: Api<ConfigMap> = Api::namespaced(shared.client.clone(), &cluster.namespace().unwrap_or_default());
    let name = irsa::configmap_name(&id);
    let data = configmap_data(shared, cluster).await?;
    // The distribution, where the region has CloudFront.
    if !cluster.spec.provider.region.starts_with("cn-") {
        let known =
            data.as_ref().and_then(|d| d.get(irsa::DISTRIBUTION_ID_KEY)).map(|d| d.trim()).filter(|d| !d.is_empty());
        if let crate::aws::cloudfront::DistributionDeletion::Pending(what) =
            crate::aws::cloudfront::delete_distribution(tenant, &id, known).await?
        {
            return Ok(Some(what));
        }
        // The original's distribution read the bucket through an origin access identity.
        let identity = data
            .as_ref()
            .and_then(|d| d.get(irsa::ORIGIN_ACCESS_IDENTITY_KEY))
            .map(|i| i.trim())
            .filter(|i| !i.is_empty());
        if let Some(identity) = identity
            && let crate::aws::cloudfront::DistributionDeletion::Pending(what) =
                crate::aws::cloudfront::delete_origin_access_identity(tenant, &id, identity).await?
        {
            return Ok(Some(what));
        }
    }
    let prefix = format!("{}/", irsa::bucket(&tenant.account_id, &id));
    shared.memo.lock().uploads.retain(|key, _| !key.starts_with(&prefix));
    // The OIDC providers of every host the issuer had, where they carry the cluster's tag.
    if let Ok(issuer) = issuer(cluster, &tenant.account_id, data.as_ref()) {
        for host in issuer.hosts() {
            crate::aws::iam::delete_oidc_provider(tenant, host, &id).await?;
        }
    }
    let ours = api
        .get_opt(&name)
        .await?
        .is_some_and(|cm| cm.labels().get(MANAGED_BY).map(String::as_str) == Some(crate::config::COMPONENT));
    if ours {
        match api.delete(&name, &Default::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(None)
}

/// The major version of a Release (`v20.1.3` → 20); 0 when its name is not a version.
pub fn release_major(release: &Release) -> u64 {
    release.name_any().trim_start_matches('v').split('.').next().and_then(|m| m.parse().ok()).unwrap_or(0)
}

/// Whether `cluster` at `release` has IRSA; the message naming the annotation and the fix when
/// its value is not one that means "on".
pub fn enabled(cluster: &AWSCluster, release: &Release) -> Result<bool, String> {
    irsa::enabled(cluster.annotations().get(irsa::ANNOTATION).map(String::as_str), release_major(release))
        .map_err(|e| format!("{}: {e}", controllers::status::describe(cluster)))
}

/// The issuer of `cluster` in account `account_id`: the one its ConfigMap names (`Some` data),
/// else the S3-served issuer bucket.
pub fn issuer(
    cluster: &AWSCluster,
    account_id: &str,
    configmap: Option<&BTreeMap<String, String>>,
) -> Result<Issuer, String> {
    let id = cluster.name_any();
    match configmap {
        Some(data) => {
            let name = format!("{}/{}", cluster.namespace().unwrap_or_default(), irsa::configmap_name(&id));
            Issuer::from_data(&name, data)
        }
        None => Ok(Issuer {
            domain: irsa::s3_issuer_host(&cluster.spec.provider.region, &irsa::bucket(account_id, &id)),
            alias: None,
        }),
    }
}

/// The documents `issuer` serves for the public key `public_pem`: (object key, JSON).
pub fn documents(issuer: &Issuer, public_pem: &str) -> Result<Vec<(&'static str, Vec<u8>)>, sa::PublicKeyError> {
    let jwk = sa::public_jwk(public_pem)?;
    let signing = issuer.urls().into_iter().next().unwrap_or_default();
    let discovery = sa::discovery_document(&signing, &[jwk.algorithm]);
    Ok(vec![
        (DISCOVERY_PATH, serde_json::to_vec_pretty(&discovery).unwrap_or_default()),
        (JWKS_PATH, serde_json::to_vec_pretty(&sa::jwks(&[jwk])).unwrap_or_default()),
    ])
}

async fn configmap_data(
    shared: &Shared,
    cluster: &AWSCluster,
) -> Result<Option<BTreeMap<String, String>>, kube::Error> {
    let api: Api<ConfigMap> = Api::namespaced(shared.client.clone(), &cluster.namespace().unwrap_or_default());
    Ok(api.get_opt(&irsa::configmap_name(&cluster.name_any())).await?.map(|cm| cm.data.unwrap_or_default()))
}

/// The key pair's Secret: (public PEM, private PEM); `None` while it is missing. The Secret is
/// held by the `secret-in-use` finalizer from now on, like the cluster's other Secrets.
async fn key_pair(
    shared: &Shared,
    namespace: &str,
    cluster_id: &str,
) -> Result<Option<(Vec<u8>, Vec<u8>)>, kube::Error> {
    let api: Api<Secret> = Api::namespaced(shared.client.clone(), namespace);
    let Some(secret) = api.get_opt(&sa::secret_name(cluster_id)).await? else { return Ok(None) };
    operatorkit::held_secrets::hold_all(
        &shared.client,
        std::slice::from_ref(&secret),
        crate::context::SECRET_FINALIZER,
    )
    .await?;
    let data = secret.data.unwrap_or_default();
    let get = |k: &str| data.get(k).map(|v| v.0.clone()).filter(|v| !v.is_empty());
    Ok(get(sa::PUBLIC_KEY).zip(get(sa::PRIVATE_KEY)))
}

/// What the masters of a cluster need for IRSA.
#[derive(Debug)]
pub enum MasterInputs {
    /// The cluster has no IRSA.
    Off,
    /// Something is not there yet, or not usable: why (names the object and the fix).
    Waiting(String),
    /// The issuer, and the node config's share of it (its URLs, audiences and key pair files).
    Ready {
        /// The issuer the roles trust.
        issuer: Issuer,
        /// The API server's issuer settings.
        node: NodeIrsa,
        /// The key pair, at its paths on the masters.
        secrets: Vec<NodeSecret>,
    },
}

/// The control plane's view: the issuer from the ConfigMap the cluster's `irsa` step (or
/// someone before it) wrote, and the key pair from `<id>-service-account-v2` in the
/// certificates' namespace `certs_ns`.
pub async fn master_inputs(
    shared: &Shared,
    cluster: &AWSCluster,
    release: &Release,
    certs_ns: &str,
) -> Result<MasterInputs, kube::Error> {
    let id = cluster.name_any();
    match enabled(cluster, release) {
        Ok(false) => return Ok(MasterInputs::Off),
        Ok(true) => {}
        Err(why) => return Ok(MasterInputs::Waiting(why)),
    }
    let namespace = cluster.namespace().unwrap_or_default();
    let Some(data) = configmap_data(shared, cluster).await? else {
        return Ok(MasterInputs::Waiting(format!(
            "waiting for ConfigMap {namespace}/{} naming the service-account issuer",
            irsa::configmap_name(&id)
        )));
    };
    let issuer = match Issuer::from_data(&format!("{namespace}/{}", irsa::configmap_name(&id)), &data) {
        Ok(issuer) => issuer,
        Err(why) => return Ok(MasterInputs::Waiting(why)),
    };
    let Some((public, private)) = key_pair(shared, certs_ns, &id).await? else {
        return Ok(MasterInputs::Waiting(format!(
            "waiting for Secret {certs_ns}/{} with keys {} and {} (the service-account issuer's key pair)",
            sa::secret_name(&id),
            sa::PUBLIC_KEY,
            sa::PRIVATE_KEY
        )));
    };
    let node = NodeIrsa { issuers: issuer.urls(), audiences: vec![irsa::sts_audience(&cluster.spec.provider.region)] };
    let secrets = vec![
        NodeSecret { path: paths::SERVICE_ACCOUNT_V2_PUB.into(), plaintext: public },
        NodeSecret { path: paths::SERVICE_ACCOUNT_V2_PRIV.into(), plaintext: private },
    ];
    Ok(MasterInputs::Ready { issuer, node, secrets })
}

/// Publishes the issuer of a cluster with IRSA.
#[derive(Debug)]
pub struct PublishIssuer;

impl Resource<AWSCluster, ClusterState> for PublishIssuer {
    fn name(&self) -> &str {
        "irsa"
    }

    async fn ensure_created(&self, state: &mut ClusterState, obj: &AWSCluster) -> resource::Result<Outcome> {
        let shared = state.shared.clone();
        let Some(release) = state.release.clone() else {
            return Err(ResourceError::msg("Internal", "the Release was not resolved"));
        };
        let invalid = |message: String| ResourceError::msg(IRSA_INVALID, message).permanent();
        match enabled(obj, &release) {
            Ok(true) => {}
            Ok(false) => return Ok(Outcome::proceed()),
            Err(message) => return Err(reject(state, obj, invalid(message)).await),
        }
        let id = obj.name_any();
        let namespace = obj.namespace().unwrap_or_default();
        let certs_ns = crate::node_config::certificates_namespace(&shared, &namespace).to_string();
        let Some((public, _)) = key_pair(&shared, &certs_ns, &id).await? else {
            return state.wait(obj, format!("waiting for Secret {certs_ns}/{}", sa::secret_name(&id))).await;
        };
        let (tenant, _) = state.accounts()?;
        let tenant = tenant.clone();
        let bucket = irsa::bucket(&tenant.account_id, &id);
        let existing = configmap_data(&shared, obj).await?;
        // The ConfigMap to write where there is none: the cluster's distribution's, where
        // CloudFront serves the issuer, else the S3-served issuer's.
        let written = match &existing {
            Some(_) => None,
            None if irsa::cloudfront(&obj.spec.provider.region, release_major(&release)) => {
                let tags = controllers::lookup::base_tags(&shared, obj, &id);
                let reference = obj.uid().unwrap_or_else(|| id.clone());
                let (distribution, created) =
                    crate::aws::cloudfront::ensure_distribution(&tenant, &id, &reference, &bucket, &tags).await?;
                if created {
                    let note = format!("CloudFront distribution {} ({})", distribution.id, distribution.domain);
                    shared.event(obj, "DistributionCreated", note).await;
                }
                let mut data = BTreeMap::from([
                    (irsa::DOMAIN_KEY.to_string(), distribution.domain.clone()),
                    (irsa::ARN_KEY.to_string(), distribution.arn.clone()),
                    (irsa::DISTRIBUTION_ID_KEY.to_string(), distribution.id.clone()),
                ]);
                if let Some(oac) = &distribution.origin_access_control {
                    data.insert(irsa::ORIGIN_ACCESS_CONTROL_KEY.to_string(), oac.clone());
                }
                Some(data)
            }
            None => Some(BTreeMap::from([(
                irsa::DOMAIN_KEY.to_string(),
                irsa::s3_issuer_host(&obj.spec.provider.region, &bucket),
            )])),
        };
        let data = existing.as_ref().or(written.as_ref());
        let issuer = match issuer(obj, &tenant.account_id, data) {
            Ok(issuer) => issuer,
            Err(message) => return Err(reject(state, obj, invalid(message)).await),
        };
        let reader = data.map(irsa::IssuerReader::from_data).unwrap_or(irsa::IssuerReader::Anyone);
        let documents = match documents(&issuer, &String::from_utf8_lossy(&public)) {
            Ok(documents) => documents,
            Err(e) => {
                let message = format!(
                    "{}: Secret {certs_ns}/{}: {e}; put the issuer's public key there, or delete the Secret to have a new key pair issued (tokens signed with the old key are then refused)",
                    controllers::status::describe(obj),
                    sa::secret_name(&id)
                );
                return Err(reject(state, obj, invalid(message)).await);
            }
        };
        // Unchanged documents and policy cost nothing after this process verified them once.
        let digest = |body: &[u8]| {
            use sha2::Digest as _;
            format!("{:x}", sha2::Sha256::digest(body))
        };
        let policy_key = format!("{bucket}/bucket-policy");
        let policy = crate::aws::s3::issuer_bucket_policy(&bucket, &tenant.region, &reader);
        let policy_settled = shared.memo.lock().uploads.get(&policy_key) == Some(&digest(policy.as_bytes()));
        let settled = policy_settled
            && documents
                .iter()
                .all(|(key, body)| shared.memo.lock().uploads.get(&format!("{bucket}/{key}")) == Some(&digest(body)));
        if !settled {
            let tags = controllers::lookup::base_tags(&shared, obj, &id);
            crate::aws::s3::ensure_issuer_bucket(&tenant, &bucket, &tags, &shared.config.buckets, &reader).await?;
            shared.memo.lock().uploads.insert(policy_key, digest(policy.as_bytes()));
            for (key, body) in &documents {
                if crate::aws::s3::ensure_public_object(&tenant, &bucket, key, body.clone(), "application/json").await?
                {
                    shared.event(obj, "IssuerPublished", format!("s3://{bucket}/{key}")).await;
                }
                shared.memo.lock().uploads.insert(format!("{bucket}/{key}"), digest(body));
            }
        }
        // An IAM OIDC provider per issuer host, for the STS audience.
        let audience = irsa::sts_audience(&obj.spec.provider.region);
        for host in issuer.hosts() {
            let memo_key = format!("{bucket}/oidc-provider/{host}");
            if shared.memo.lock().uploads.get(&memo_key) == Some(&audience) {
                continue;
            }
            let tags = controllers::lookup::base_tags(&shared, obj, &id);
            if crate::aws::iam::ensure_oidc_provider(&tenant, host, &audience, &tags).await? {
                shared.event(obj, "OIDCProviderCreated", format!("IAM OIDC provider https://{host}")).await;
            }
            shared.memo.lock().uploads.insert(memo_key, audience.clone());
        }
        if let Some(data) = written {
            let api: Api<ConfigMap> = Api::namespaced(shared.client.clone(), &namespace);
            let cm = ConfigMap {
                metadata: ObjectMeta {
                    name: Some(irsa::configmap_name(&id)),
                    namespace: Some(namespace.clone()),
                    labels: Some(BTreeMap::from([
                        (apis::labels::CLUSTER.to_string(), id.clone()),
                        (MANAGED_BY.to_string(), crate::config::COMPONENT.to_string()),
                    ])),
                    ..ObjectMeta::default()
                },
                data: Some(data),
                ..ConfigMap::default()
            };
            match api.create(&PostParams::default(), &cm).await {
                Ok(_) => {
                    let note = format!("service-account issuer https://{}", issuer.domain);
                    shared.event(obj, "IssuerNamed", note).await;
                }
                Err(kube::Error::Api(status)) if status.code == 409 => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(Outcome::proceed())
    }

    async fn ensure_deleted(&self, _: &mut ClusterState, _: &AWSCluster) -> resource::Result<Outcome> {
        Ok(Outcome::proceed())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documents_name_the_signing_issuer_and_carry_the_key() {
        let pair = pki::service_account_v2::SigningKeyPair::generate().expect("key");
        let issuer = Issuer { domain: "d1a2.cloudfront.net".into(), alias: Some("irsa.x1.example.com".into()) };
        let docs = documents(&issuer, &pair.public_pem).expect("documents");
        let discovery: serde_json::Value = serde_json::from_slice(&docs[0].1).expect("JSON");
        assert_eq!(docs[0].0, ".well-known/openid-configuration");
        assert_eq!(discovery["issuer"], "https://irsa.x1.example.com");
        assert_eq!(discovery["jwks_uri"], "https://irsa.x1.example.com/keys.json");
        let keys: serde_json::Value = serde_json::from_slice(&docs[1].1).expect("JSON");
        assert_eq!(docs[1].0, "keys.json");
        assert_eq!(keys["keys"][0]["kty"], "EC");
        assert!(!String::from_utf8_lossy(&docs[1].1).contains("\"d\""), "no private part");
    }
}

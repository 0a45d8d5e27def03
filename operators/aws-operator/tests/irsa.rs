//! IAM roles for service accounts, end to end on moto: the operator issues the cluster's
//! service-account key pair, publishes its issuer in S3 behind a CloudFront distribution (the
//! cluster's Release is 20, outside China), creates the IAM OIDC provider and makes the ALB
//! controller's role trust it. A token signed with the key from the operator's Secret, as the
//! masters' API servers sign them, is then accepted by STS `AssumeRoleWithWebIdentity` (moto,
//! with the token checks of `tools/moto/server.py`'s correction 23, which fetches the issuer's
//! documents through the distribution as CloudFront reads its origin) for that role, and refused
//! for another audience; the discovery document and JWKS read from the bucket validate the token
//! with a JWT library; the first master's node config names it in `--service-account-issuer`.
//! CloudFront's and S3's own APIs show the distribution with the bucket as
//! its origin and the bucket closed to the public; IAM's shows the provider's thumbprint. The
//! distribution is found again, not duplicated, when its ConfigMap is lost across a restart, and
//! the cluster's deletion removes it (disabled, deployed, deleted) and its origin access control,
//! and releases the key pair's Secret, which the `secret-in-use` finalizer held until then.
//! A distribution irsa-operator set up (its origin access identity, its ConfigMap) is kept and
//! read through, and deleted with the cluster, its identity too.
//!
//! Bad input: an annotation value that does not mean "on" is refused with `Ready=False` and a
//! Warning event naming the annotation and the fix.

mod support;

use std::time::{SystemTime, UNIX_EPOCH};

use apis::aws::{AWSCluster, AWSControlPlane};
use aws_operator::context::SECRET_FINALIZER;
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use support::*;

/// The object `key` of `bucket`, as JSON.
async fn object(f: &Fixture, bucket: &str, key: &str) -> anyhow::Result<serde_json::Value> {
    let tenant = f.tenant_clients().await?;
    let out = tenant.s3.get_object().bucket(bucket).key(key).send().await?;
    assert_eq!(out.content_type(), Some("application/json"), "{key}");
    Ok(serde_json::from_slice(&out.body.collect().await?.into_bytes())?)
}

/// The CloudFront distributions of the tenant account whose comment names cluster `id`: (id,
/// domain).
async fn distributions_of(f: &Fixture, id: &str) -> anyhow::Result<Vec<(String, String)>> {
    let tenant = f.tenant_clients().await?;
    let listed = tenant.cloudfront.list_distributions().send().await?;
    Ok(listed
        .distribution_list()
        .map(|l| l.items())
        .unwrap_or_default()
        .iter()
        .filter(|d| d.comment().ends_with(&format!("cluster {id}")))
        .map(|d| (d.id().to_string(), d.domain_name().to_string()))
        .collect())
}

/// A service-account token of `sub` for `audience`, signed as the masters sign them.
fn token(key_pem: &[u8], kid: &str, issuer: &str, sub: &str, audience: &str) -> anyhow::Result<String> {
    let now = SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs();
    let mut header = Header::new(Algorithm::ES256);
    header.kid = Some(kid.to_string());
    let claims = serde_json::json!({
        "iss": issuer, "sub": sub, "aud": [audience], "iat": now, "nbf": now, "exp": now + 600,
        "kubernetes.io": {"namespace": "kube-system", "serviceaccount": {"name": "aws-load-balancer-controller"}},
    });
    Ok(jsonwebtoken::encode(&header, &claims, &EncodingKey::from_ec_pem(key_pem)?)?)
}

/// STS as a pod calls it: unsigned, with the token only.
async fn assume(f: &Fixture, role: &str, token: &str) -> Result<String, String> {
    use aws_smithy_http_client::tls;
    let http = aws_smithy_http_client::Builder::new()
        .tls_provider(tls::Provider::Rustls(tls::rustls_provider::CryptoMode::Ring))
        .build_https();
    let conf = aws_sdk_sts::Config::builder()
        .behavior_version(aws_config::BehaviorVersion::latest())
        .http_client(http)
        .region(aws_sdk_sts::config::Region::new(REGION))
        .endpoint_url(f.moto.endpoint())
        .build();
    let sts = aws_sdk_sts::Client::from_conf(conf);
    match sts
        .assume_role_with_web_identity()
        .role_arn(role)
        .role_session_name("irsa")
        .web_identity_token(token)
        .send()
        .await
    {
        Ok(out) => Ok(out.assumed_role_user().map(|u| u.arn().to_string()).unwrap_or_default()),
        Err(e) => Err(aws_sdk_sts::error::DisplayErrorContext(&e).to_string()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_signed_with_the_clusters_key_assumes_the_alb_controller_role_through_the_published_issuer()
-> anyhow::Result<()> {
    let mut f = Fixture::start().await?;
    f.apply_basics().await?;
    let id = "irs01";
    f.credential_secret(id).await?;
    f.cluster(id).await?;
    f.control_plane(id, "cpi01", &["eu-central-1a"], 1).await?;
    f.start_operator().await?;

    let cps: Api<AWSControlPlane> = Api::namespaced(f.client.clone(), NS);
    if let Err(e) = eventually(200, "the control plane to be Ready", || async {
        Ok(ready(cps.get("cpi01").await?.status.as_ref().map(|s| &s.conditions)).then_some(()))
    })
    .await
    {
        anyhow::bail!("{e}\n{}", dump(&f.client).await);
    }

    // What the operator wrote: the key pair, held like the cluster's other Secrets, and the
    // ConfigMap naming the issuer, the cluster's CloudFront distribution.
    let secrets = Api::<Secret>::namespaced(f.client.clone(), NS);
    let secret_name = format!("{id}-service-account-v2");
    let secret = secrets.get(&secret_name).await?;
    assert!(secret.metadata.finalizers.clone().unwrap_or_default().contains(&SECRET_FINALIZER.to_string()), "held");
    let data = secret.data.unwrap_or_default();
    let key_pem = data.get("key").map(|k| k.0.clone()).expect("the private key");
    let configmaps = Api::<ConfigMap>::namespaced(f.client.clone(), NS);
    let configmap = configmaps.get(&format!("{id}-irsa-cloudfront")).await?.data.unwrap_or_default();
    let domain = configmap.get("domain").cloned().expect("domain");
    let distribution_id = configmap.get("distributionId").cloned().expect("distributionId");
    let bucket = format!("{}-g8s-{id}-oidc-pod-identity-v2", f.tenant_account);
    assert!(domain.ends_with(".cloudfront.net"), "{domain}");
    let issuer = format!("https://{domain}");

    // CloudFront's view: one distribution, enabled, the bucket its origin, read through the
    // origin access control the ConfigMap names, tagged for the cluster.
    let tenant = f.tenant_clients().await?;
    let got = tenant.cloudfront.get_distribution().id(&distribution_id).send().await?;
    let distribution = got.distribution().expect("the distribution");
    assert_eq!(distribution.domain_name(), domain);
    assert_eq!(configmap.get("arn").map(String::as_str), Some(distribution.arn()));
    let config = distribution.distribution_config().expect("its configuration");
    assert!(config.enabled());
    let origins = config.origins().expect("origins").items();
    assert_eq!(origins.len(), 1);
    assert_eq!(origins[0].domain_name(), format!("{bucket}.s3.{REGION}.amazonaws.com"));
    assert_eq!(origins[0].origin_access_control_id(), configmap.get("originAccessControlId").map(String::as_str));
    let tags = tenant.cloudfront.list_tags_for_resource().resource(distribution.arn()).send().await?;
    assert!(
        tags.tags().expect("tags").items().iter().any(|t| t.key() == "giantswarm.io/cluster" && t.value() == Some(id)),
        "tagged for the cluster"
    );
    assert_eq!(distributions_of(&f, id).await?, vec![(distribution_id.clone(), domain.clone())]);

    // S3's view: the bucket is not public; its policy lets that distribution read, nobody else.
    let block = tenant.s3.get_public_access_block().bucket(&bucket).send().await?;
    let block = block.public_access_block_configuration().expect("a public access block");
    assert_eq!(
        (
            block.block_public_acls(),
            block.ignore_public_acls(),
            block.block_public_policy(),
            block.restrict_public_buckets()
        ),
        (Some(true), Some(true), Some(true), Some(true))
    );
    let status = tenant.s3.get_bucket_policy_status().bucket(&bucket).send().await?;
    assert_eq!(status.policy_status().and_then(|s| s.is_public()), Some(false), "the bucket policy is not public");
    let policy: serde_json::Value =
        serde_json::from_str(tenant.s3.get_bucket_policy().bucket(&bucket).send().await?.policy().unwrap_or_default())?;
    let readers: Vec<&serde_json::Value> = policy["Statement"]
        .as_array()
        .expect("statements")
        .iter()
        .filter(|st| st["Effect"] == "Allow" && st["Action"] == "s3:GetObject")
        .collect();
    assert_eq!(readers.len(), 1, "{policy}");
    assert_eq!(readers[0]["Principal"], serde_json::json!({"Service": "cloudfront.amazonaws.com"}));
    assert_eq!(readers[0]["Condition"]["StringEquals"]["AWS:SourceArn"], distribution.arn());

    // IAM's view: the provider of the CloudFront issuer, with the STS audience and thumbprint.
    let provider = tenant
        .iam
        .get_open_id_connect_provider()
        .open_id_connect_provider_arn(format!("arn:aws:iam::{}:oidc-provider/{domain}", f.tenant_account))
        .send()
        .await?;
    assert_eq!(provider.client_id_list(), ["sts.amazonaws.com"]);
    assert_eq!(provider.thumbprint_list(), ["9e99a48a9960b14926bb7f3b02e22da2b0ab7280"]);

    // The masters sign as the CloudFront issuer: the API server's flags in the first master's
    // node config, as uploaded for it.
    let config_key = aws_stacks::names::master_config_key(VERSION, id, 0);
    let cluster_bucket = aws_stacks::names::bucket(&f.tenant_account, id);
    let config = tenant.s3.get_object().bucket(&cluster_bucket).key(&config_key).send().await?;
    let config: serde_json::Value = serde_json::from_slice(&config.body.collect().await?.into_bytes())?;
    let mut texts = vec![config.to_string()];
    for file in config["storage"]["files"].as_array().into_iter().flatten() {
        if let Some(source) = file["contents"]["source"].as_str() {
            texts.extend(ignition::decode_data_url(source).ok().map(|b| String::from_utf8_lossy(&b).into_owned()));
        }
    }
    let flag = format!("--service-account-issuer={issuer}");
    assert!(texts.iter().any(|t| t.contains(&flag)), "no {flag} in {config_key}");

    // The issuer's documents, from its bucket.
    let discovery = object(&f, &bucket, ".well-known/openid-configuration").await?;
    assert_eq!(discovery["issuer"], issuer.as_str());
    assert_eq!(discovery["jwks_uri"], format!("{issuer}/keys.json").as_str());
    let jwks: JwkSet = serde_json::from_value(object(&f, &bucket, "keys.json").await?)?;
    assert_eq!(jwks.keys.len(), 1);
    let jwk = &jwks.keys[0];
    let kid = jwk.common.key_id.clone().expect("kid");

    let sub = "system:serviceaccount:kube-system:aws-load-balancer-controller";
    let good = token(&key_pem, &kid, &issuer, sub, "sts.amazonaws.com")?;
    let other_audience = token(&key_pem, &kid, &issuer, sub, "https://vault.example.com")?;

    // The published JWKS validates the token, and only for its issuer and audience.
    let mut validation = Validation::new(Algorithm::ES256);
    validation.set_issuer(&[issuer.as_str()]);
    validation.set_audience(&["sts.amazonaws.com"]);
    let decoding = DecodingKey::from_jwk(jwk)?;
    let claims = jsonwebtoken::decode::<serde_json::Value>(&good, &decoding, &validation)?.claims;
    assert_eq!(claims["sub"], sub);
    assert!(jsonwebtoken::decode::<serde_json::Value>(&other_audience, &decoding, &validation).is_err());
    let stranger = pki::service_account_v2::SigningKeyPair::generate()?;
    let forged = token(stranger.private_key.expose_pem().as_bytes(), &kid, &issuer, sub, "sts.amazonaws.com")?;
    assert!(jsonwebtoken::decode::<serde_json::Value>(&forged, &decoding, &validation).is_err());

    // STS: the ALB controller's role trusts the issuer's OIDC provider for its service account.
    let role = format!("arn:aws:iam::{}:role/gs-{id}-ALBController-Role", f.tenant_account);
    let assumed = assume(&f, &role, &good).await.map_err(|e| anyhow::anyhow!("refused: {e}"))?;
    assert!(assumed.ends_with("/irsa"), "{assumed}");
    let refused = assume(&f, &role, &other_audience).await.expect_err("another audience");
    assert!(refused.contains("InvalidIdentityToken") && refused.contains("audience"), "{refused}");
    let refused = assume(&f, &role, &forged).await.expect_err("a key the issuer does not publish");
    assert!(refused.contains("InvalidIdentityToken"), "{refused}");
    let app = token(&key_pem, &kid, &issuer, "system:serviceaccount:default:app", "sts.amazonaws.com")?;
    let refused = assume(&f, &role, &app).await.expect_err("another service account");
    assert!(refused.contains("AccessDenied"), "{refused}");

    // The ConfigMap lost while the operator is down: the distribution is found again by its
    // comment and tag, not created twice.
    f.kill_operator().await;
    configmaps.delete(&format!("{id}-irsa-cloudfront"), &DeleteParams::default()).await?;
    f.start_operator().await?;
    let again = eventually(120, "the ConfigMap written again", || async {
        Ok(configmaps.get_opt(&format!("{id}-irsa-cloudfront")).await?.and_then(|c| c.data))
    })
    .await?;
    assert_eq!(again.get("distributionId"), Some(&distribution_id));
    assert_eq!(distributions_of(&f, id).await?, vec![(distribution_id.clone(), domain.clone())]);

    // The key pair cannot be deleted under the running cluster.
    secrets.delete(&secret_name, &DeleteParams::default()).await?;
    let held = secrets.get(&secret_name).await?;
    assert!(held.metadata.deletion_timestamp.is_some(), "deletion requested");
    assert!(assume(&f, &role, &good).await.is_ok(), "the issuer still works");

    // The cluster's deletion: the distribution goes (disabled, deployed, deleted), then its
    // origin access control; the Secret is released (and, its deletion requested, gone).
    Api::<AWSCluster>::namespaced(f.client.clone(), NS).delete(id, &DeleteParams::default()).await?;
    let gone = eventually(300, "the cluster to be gone", || async {
        Ok(Api::<AWSCluster>::namespaced(f.client.clone(), NS).get_opt(id).await?.is_none().then_some(()))
    })
    .await;
    if let Err(e) = gone {
        anyhow::bail!("{e}\n{}", dump(&f.client).await);
    }
    assert_eq!(distributions_of(&f, id).await?, vec![], "no distribution left");
    let controls = tenant.cloudfront.list_origin_access_controls().send().await?;
    let left: Vec<&str> = controls
        .origin_access_control_list()
        .map(|l| l.items())
        .unwrap_or_default()
        .iter()
        .map(|c| c.name())
        .filter(|n| n.starts_with(id))
        .collect();
    assert!(left.is_empty(), "origin access controls left: {left:?}");
    assert!(secrets.get_opt(&secret_name).await?.is_none(), "the key pair's Secret released and gone");
    f.kill_operator().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_irsa_annotation_meaning_off_is_refused_naming_the_annotation_and_the_fix() -> anyhow::Result<()> {
    let mut f = Fixture::start().await?;
    f.apply_basics().await?;
    let id = "irs02";
    f.credential_secret(id).await?;
    f.cluster(id).await?;
    let clusters: Api<AWSCluster> = Api::namespaced(f.client.clone(), NS);
    let annotation = serde_json::json!({"metadata": {"annotations": {
        "alpha.aws.giantswarm.io/iam-roles-for-service-accounts": "false"}}});
    clusters.patch(id, &PatchParams::default(), &Patch::Merge(&annotation)).await?;
    f.start_operator().await?;

    let message = eventually(120, "the cluster to be refused", || async {
        let c = clusters.get(id).await?;
        let conds = c.status.as_ref().map(|s| &s.conditions);
        let refused = conds.and_then(|cs| cs.iter().find(|c| c.type_ == "Ready" && c.reason == "IrsaInvalid"));
        Ok(refused.map(|c| c.message.clone()))
    })
    .await?;
    assert!(
        message.contains("annotation alpha.aws.giantswarm.io/iam-roles-for-service-accounts is \"false\""),
        "{message}"
    );
    assert!(message.contains("remove it"), "{message}");
    let events: Api<Event> = Api::namespaced(f.client.clone(), NS);
    let warned = eventually(60, "a Warning event", || async {
        Ok(events
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .find(|e| e.type_.as_deref() == Some("Warning") && e.reason.as_deref() == Some("IrsaInvalid")))
    })
    .await?;
    assert!(warned.note.unwrap_or_default().contains("iam-roles-for-service-accounts"));
    // Nothing was created for it: no issuer bucket.
    let tenant = f.tenant_clients().await?;
    let bucket = format!("{}-g8s-{id}-oidc-pod-identity-v2", f.tenant_account);
    assert!(tenant.s3.head_bucket().bucket(&bucket).send().await.is_err(), "no bucket for a refused cluster");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_distribution_the_original_set_up_is_kept_read_through_its_identity_and_deleted_with_the_cluster()
-> anyhow::Result<()> {
    use aws_sdk_cloudfront::types::{
        CloudFrontOriginAccessIdentityConfig, DefaultCacheBehavior, DistributionConfig, DistributionConfigWithTags,
        Origin, Origins, S3OriginConfig, Tag, Tags, ViewerProtocolPolicy,
    };

    let mut f = Fixture::start().await?;
    f.apply_basics().await?;
    let id = "irs03";
    f.credential_secret(id).await?;
    f.cluster(id).await?;
    f.control_plane(id, "cpi03", &["eu-central-1a"], 1).await?;

    // What irsa-operator left: its origin access identity, its distribution reading the issuer
    // bucket through it, tagged for the cluster, and the ConfigMap naming them.
    let tenant = f.tenant_clients().await?;
    let comment = format!("Created by irsa-operator for cluster {id}");
    let identity = tenant
        .cloudfront
        .create_cloud_front_origin_access_identity()
        .cloud_front_origin_access_identity_config(
            CloudFrontOriginAccessIdentityConfig::builder()
                .caller_reference(format!("access-identity-cluster-{id}"))
                .comment(&comment)
                .build()?,
        )
        .send()
        .await?;
    let identity_id = identity.cloud_front_origin_access_identity().expect("identity").id().to_string();
    let bucket = format!("{}-g8s-{id}-oidc-pod-identity-v2", f.tenant_account);
    let origin_domain = format!("{bucket}.s3.{REGION}.amazonaws.com");
    let origin = Origin::builder()
        .id(&origin_domain)
        .domain_name(&origin_domain)
        .s3_origin_config(
            S3OriginConfig::builder()
                .origin_access_identity(format!("origin-access-identity/cloudfront/{identity_id}"))
                .build(),
        )
        .build()?;
    let config = DistributionConfig::builder()
        .caller_reference(format!("distribution-cluster-{id}"))
        .comment(&comment)
        .enabled(true)
        .origins(Origins::builder().quantity(1).items(origin).build()?)
        .default_cache_behavior(
            DefaultCacheBehavior::builder()
                .target_origin_id(&origin_domain)
                .viewer_protocol_policy(ViewerProtocolPolicy::RedirectToHttps)
                .cache_policy_id("4135ea2d-6df8-44a3-9df3-4b5a84be39ad")
                .build()?,
        )
        .build()?;
    let created = tenant
        .cloudfront
        .create_distribution_with_tags()
        .distribution_config_with_tags(
            DistributionConfigWithTags::builder()
                .distribution_config(config)
                .tags(Tags::builder().items(Tag::builder().key("giantswarm.io/cluster").value(id).build()?).build())
                .build(),
        )
        .send()
        .await?;
    let distribution = created.distribution().expect("distribution");
    let (distribution_id, domain) = (distribution.id().to_string(), distribution.domain_name().to_string());
    let written: std::collections::BTreeMap<String, String> = [
        ("arn", distribution.arn()),
        ("domain", domain.as_str()),
        ("distributionId", distribution_id.as_str()),
        ("originAccessIdentityId", identity_id.as_str()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let configmaps = Api::<ConfigMap>::namespaced(f.client.clone(), NS);
    let cm: ConfigMap = serde_json::from_value(serde_json::json!({
        "metadata": {"name": format!("{id}-irsa-cloudfront")}, "data": written,
    }))?;
    configmaps.create(&Default::default(), &cm).await?;
    f.start_operator().await?;

    let cps: Api<AWSControlPlane> = Api::namespaced(f.client.clone(), NS);
    if let Err(e) = eventually(200, "the control plane to be Ready", || async {
        Ok(ready(cps.get("cpi03").await?.status.as_ref().map(|s| &s.conditions)).then_some(()))
    })
    .await
    {
        anyhow::bail!("{e}\n{}", dump(&f.client).await);
    }

    // The ConfigMap is as the original wrote it; no second distribution; the bucket is readable
    // by the original's identity only.
    let kept = configmaps.get(&format!("{id}-irsa-cloudfront")).await?.data.unwrap_or_default();
    assert_eq!(kept, written);
    assert_eq!(distributions_of(&f, id).await?, vec![(distribution_id.clone(), domain.clone())]);
    let status = tenant.s3.get_bucket_policy_status().bucket(&bucket).send().await?;
    assert_eq!(status.policy_status().and_then(|s| s.is_public()), Some(false), "the bucket policy is not public");
    let policy: serde_json::Value =
        serde_json::from_str(tenant.s3.get_bucket_policy().bucket(&bucket).send().await?.policy().unwrap_or_default())?;
    let readers: Vec<&serde_json::Value> =
        policy["Statement"].as_array().expect("statements").iter().filter(|st| st["Effect"] == "Allow").collect();
    assert_eq!(readers.len(), 1, "{policy}");
    assert_eq!(
        readers[0]["Principal"]["AWS"],
        format!("arn:aws:iam::cloudfront:user/CloudFront Origin Access Identity {identity_id}")
    );

    // STS reads the issuer through the original's distribution.
    let secret = Api::<Secret>::namespaced(f.client.clone(), NS).get(&format!("{id}-service-account-v2")).await?;
    let key_pem = secret.data.unwrap_or_default().get("key").map(|k| k.0.clone()).expect("the private key");
    let jwks: JwkSet = serde_json::from_value(object(&f, &bucket, "keys.json").await?)?;
    let kid = jwks.keys[0].common.key_id.clone().expect("kid");
    let issuer = format!("https://{domain}");
    let sub = "system:serviceaccount:kube-system:aws-load-balancer-controller";
    let good = token(&key_pem, &kid, &issuer, sub, "sts.amazonaws.com")?;
    let role = format!("arn:aws:iam::{}:role/gs-{id}-ALBController-Role", f.tenant_account);
    assume(&f, &role, &good).await.map_err(|e| anyhow::anyhow!("refused: {e}"))?;

    // The cluster's deletion removes the distribution and then the identity; the ConfigMap,
    // which the operator did not write, stays.
    Api::<AWSCluster>::namespaced(f.client.clone(), NS).delete(id, &DeleteParams::default()).await?;
    let gone = eventually(300, "the cluster to be gone", || async {
        Ok(Api::<AWSCluster>::namespaced(f.client.clone(), NS).get_opt(id).await?.is_none().then_some(()))
    })
    .await;
    if let Err(e) = gone {
        anyhow::bail!("{e}\n{}", dump(&f.client).await);
    }
    assert_eq!(distributions_of(&f, id).await?, vec![], "no distribution left");
    let identity = tenant.cloudfront.get_cloud_front_origin_access_identity().id(&identity_id).send().await;
    let code = identity.err().map(|e| aws_sdk_cloudfront::error::ProvideErrorMetadata::code(&e).map(str::to_string));
    assert_eq!(code, Some(Some("NoSuchCloudFrontOriginAccessIdentity".to_string())), "the identity is gone");
    assert!(configmaps.get_opt(&format!("{id}-irsa-cloudfront")).await?.is_some(), "the original's ConfigMap stays");
    f.kill_operator().await;
    Ok(())
}

//! CloudFront: the distribution in front of a cluster's service-account issuer bucket (IAM roles
//! for service accounts, `aws_stacks::irsa`), as irsa-operator set it up: one distribution per
//! cluster, origin the issuer bucket's regional S3 domain, read through an origin access control
//! (so the bucket grants `s3:GetObject` to that distribution only), the AWS-managed
//! `CachingDisabled` cache policy (a new key is served at once), HTTPS only, CloudFront's own
//! certificate and domain, tagged for the cluster.
//!
//! A distribution is found again by its comment (`aws_stacks::irsa::is_distribution_comment`:
//! the operator's, or irsa-operator's) and the cluster's tag, so one created before a restart,
//! or by irsa-operator, is used instead of a second one. Its deletion never waits in the
//! reconcile loop: [`delete_distribution`] takes one step (disable, or delete once the disabled
//! distribution is deployed) and says whether it is done.

use std::collections::BTreeMap;

use aws_sdk_cloudfront::types::{
    DefaultCacheBehavior, DistributionConfig, DistributionConfigWithTags, Origin, OriginAccessControlConfig,
    OriginAccessControlOriginTypes, OriginAccessControlSigningBehaviors, OriginAccessControlSigningProtocols, Origins,
    S3OriginConfig, Tag, Tags, ViewerCertificate, ViewerProtocolPolicy,
};
use aws_stacks::irsa;

use crate::aws::{AccountClients, AwsError, api_error};

/// AWS's managed cache policy `Managed-CachingDisabled`: every request reaches the bucket.
pub const CACHING_DISABLED_POLICY: &str = "4135ea2d-6df8-44a3-9df3-4b5a84be39ad";

/// A cluster's issuer distribution, as CloudFront lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuerDistribution {
    /// The distribution id.
    pub id: String,
    /// Its ARN, which the bucket policy names.
    pub arn: String,
    /// Its domain, `<id>.cloudfront.net`: the issuer's host.
    pub domain: String,
    /// The origin access control its origin reads the bucket with (none for the original's,
    /// which used an origin access identity).
    pub origin_access_control: Option<String>,
}

fn setup(e: impl std::fmt::Display) -> AwsError {
    AwsError::Setup(e.to_string())
}

/// The distribution of cluster `cluster_id`'s issuer: one whose comment is the cluster's and
/// that carries its `giantswarm.io/cluster` tag (ListDistributions carries no tags).
pub async fn find_distribution(aws: &AccountClients, cluster_id: &str) -> Result<Option<IssuerDistribution>, AwsError> {
    let mut marker: Option<String> = None;
    loop {
        let out = aws
            .cloudfront
            .list_distributions()
            .set_marker(marker.clone())
            .send()
            .await
            .map_err(|e| api_error("CloudFront", "ListDistributions", e))?;
        let Some(list) = out.distribution_list() else { return Ok(None) };
        for d in list.items() {
            if !irsa::is_distribution_comment(d.comment(), cluster_id) {
                continue;
            }
            let tags = aws
                .cloudfront
                .list_tags_for_resource()
                .resource(d.arn())
                .send()
                .await
                .map_err(|e| api_error("CloudFront", "ListTagsForResource", e))?;
            let ours = tags.tags().is_some_and(|t| {
                t.items().iter().any(|t| t.key() == aws_stacks::names::tags::CLUSTER && t.value() == Some(cluster_id))
            });
            if ours {
                let origin = d.origins().and_then(|o| o.items().first());
                return Ok(Some(IssuerDistribution {
                    id: d.id().to_string(),
                    arn: d.arn().to_string(),
                    domain: d.domain_name().to_string(),
                    origin_access_control: origin
                        .and_then(|o| o.origin_access_control_id())
                        .filter(|id| !id.is_empty())
                        .map(str::to_string),
                }));
            }
        }
        match list.next_marker().filter(|m| !m.is_empty() && list.is_truncated()) {
            Some(next) => marker = Some(next.to_string()),
            None => return Ok(None),
        }
    }
}

/// The id of the origin access control named `name`, if there is one.
async fn find_origin_access_control(aws: &AccountClients, name: &str) -> Result<Option<String>, AwsError> {
    let mut marker: Option<String> = None;
    loop {
        let out = aws
            .cloudfront
            .list_origin_access_controls()
            .set_marker(marker.clone())
            .send()
            .await
            .map_err(|e| api_error("CloudFront", "ListOriginAccessControls", e))?;
        let Some(list) = out.origin_access_control_list() else { return Ok(None) };
        if let Some(found) = list.items().iter().find(|c| c.name() == name) {
            return Ok(Some(found.id().to_string()));
        }
        match list.next_marker().filter(|m| !m.is_empty() && list.is_truncated()) {
            Some(next) => marker = Some(next.to_string()),
            None => return Ok(None),
        }
    }
}

/// The origin access control of cluster `cluster_id`'s distribution, created where missing.
async fn ensure_origin_access_control(aws: &AccountClients, cluster_id: &str) -> Result<String, AwsError> {
    let name = irsa::origin_access_control_name(cluster_id);
    if let Some(id) = find_origin_access_control(aws, &name).await? {
        return Ok(id);
    }
    let config = OriginAccessControlConfig::builder()
        .name(&name)
        .description(format!("reads the service-account issuer bucket of cluster {cluster_id}"))
        .signing_protocol(OriginAccessControlSigningProtocols::Sigv4)
        .signing_behavior(OriginAccessControlSigningBehaviors::Always)
        .origin_access_control_origin_type(OriginAccessControlOriginTypes::S3)
        .build()
        .map_err(setup)?;
    let out = aws
        .cloudfront
        .create_origin_access_control()
        .origin_access_control_config(config)
        .send()
        .await
        .map_err(|e| api_error("CloudFront", "CreateOriginAccessControl", e))?;
    out.origin_access_control()
        .map(|c| c.id().to_string())
        .ok_or_else(|| setup("CloudFront CreateOriginAccessControl answered no origin access control"))
}

/// The configuration of cluster `cluster_id`'s distribution in front of `bucket` (in the
/// clients' region), reading it with origin access control `oac`.
fn distribution_config(
    aws: &AccountClients,
    cluster_id: &str,
    caller_reference: &str,
    bucket: &str,
    oac: &str,
) -> Result<DistributionConfig, AwsError> {
    let origin_domain = irsa::s3_origin_domain(&aws.region, bucket);
    let origin = Origin::builder()
        .id(&origin_domain)
        .domain_name(&origin_domain)
        .origin_access_control_id(oac)
        // With an origin access control, the origin access identity stays empty.
        .s3_origin_config(S3OriginConfig::builder().origin_access_identity("").build())
        .build()
        .map_err(setup)?;
    DistributionConfig::builder()
        .caller_reference(caller_reference)
        .comment(irsa::distribution_comment(cluster_id))
        .enabled(true)
        .origins(Origins::builder().quantity(1).items(origin).build().map_err(setup)?)
        .default_cache_behavior(
            DefaultCacheBehavior::builder()
                .target_origin_id(&origin_domain)
                .viewer_protocol_policy(ViewerProtocolPolicy::RedirectToHttps)
                .cache_policy_id(CACHING_DISABLED_POLICY)
                .build()
                .map_err(setup)?,
        )
        .viewer_certificate(ViewerCertificate::builder().cloud_front_default_certificate(true).build())
        .build()
        .map_err(setup)
}

/// Make sure cluster `cluster_id` has its issuer distribution in front of `bucket`: the one
/// [`find_distribution`] finds, else a new one (and its origin access control) tagged with
/// `tags`. `caller_reference` makes the creation request idempotent (the AWSCluster's UID).
/// Returns the distribution and whether it was created now.
pub async fn ensure_distribution(
    aws: &AccountClients,
    cluster_id: &str,
    caller_reference: &str,
    bucket: &str,
    tags: &BTreeMap<String, String>,
) -> Result<(IssuerDistribution, bool), AwsError> {
    if let Some(found) = find_distribution(aws, cluster_id).await? {
        return Ok((found, false));
    }
    let oac = ensure_origin_access_control(aws, cluster_id).await?;
    let config = distribution_config(aws, cluster_id, caller_reference, bucket, &oac)?;
    let tags: Vec<Tag> = tags.iter().filter_map(|(k, v)| Tag::builder().key(k).value(v).build().ok()).collect();
    let with_tags = DistributionConfigWithTags::builder()
        .distribution_config(config)
        .tags(Tags::builder().set_items(Some(tags)).build())
        .build();
    let out = aws
        .cloudfront
        .create_distribution_with_tags()
        .distribution_config_with_tags(with_tags)
        .send()
        .await
        .map_err(|e| api_error("CloudFront", "CreateDistributionWithTags", e))?;
    let d =
        out.distribution().ok_or_else(|| setup("CloudFront CreateDistributionWithTags answered no distribution"))?;
    Ok((
        IssuerDistribution {
            id: d.id().to_string(),
            arn: d.arn().to_string(),
            domain: d.domain_name().to_string(),
            origin_access_control: Some(oac),
        },
        true,
    ))
}

/// One step of the deletion of a cluster's issuer distribution.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DistributionDeletion {
    /// No distribution (and no origin access control) of the cluster is left.
    Gone,
    /// Not yet: what it is waiting for (CloudFront deploys a disabled distribution in minutes).
    Pending(String),
}

/// One step of deleting cluster `cluster_id`'s issuer distribution, `known` (from its ConfigMap)
/// or the one [`find_distribution`] finds; a distribution that does not carry the cluster's tag
/// is left alone. An enabled distribution is disabled; a disabled one is deleted once CloudFront
/// has deployed it (AWS refuses `DeleteDistribution` before, `DistributionNotDisabled`); then
/// the cluster's origin access control goes.
pub async fn delete_distribution(
    aws: &AccountClients,
    cluster_id: &str,
    known: Option<&str>,
) -> Result<DistributionDeletion, AwsError> {
    let id = match known {
        Some(id) if tagged_for(aws, id, cluster_id).await? => Some(id.to_string()),
        _ => find_distribution(aws, cluster_id).await?.map(|d| d.id),
    };
    if let Some(id) = id {
        let got = match aws.cloudfront.get_distribution().id(&id).send().await {
            Ok(got) => Some(got),
            Err(e) => {
                let e = api_error("CloudFront", "GetDistribution", e);
                if e.code() != "NoSuchDistribution" {
                    return Err(e);
                }
                None
            }
        };
        if let Some(got) = got {
            let etag = got.e_tag().unwrap_or_default().to_string();
            let Some(d) = got.distribution() else { return Ok(DistributionDeletion::Gone) };
            let enabled = d.distribution_config().is_some_and(|c| c.enabled());
            if enabled {
                let Some(config) = d.distribution_config().cloned() else {
                    return Err(setup("CloudFront GetDistribution answered no configuration"));
                };
                let mut disabled = config;
                disabled.enabled = false;
                aws.cloudfront
                    .update_distribution()
                    .id(&id)
                    .if_match(&etag)
                    .distribution_config(disabled)
                    .send()
                    .await
                    .map_err(|e| api_error("CloudFront", "UpdateDistribution", e))?;
                return Ok(DistributionDeletion::Pending(format!("disabling CloudFront distribution {id}")));
            }
            if d.status() != "Deployed" {
                return Ok(DistributionDeletion::Pending(format!(
                    "waiting for disabled CloudFront distribution {id} to be deployed (status {})",
                    d.status()
                )));
            }
            match aws.cloudfront.delete_distribution().id(&id).if_match(&etag).send().await {
                Ok(_) => {}
                Err(e) => {
                    let e = api_error("CloudFront", "DeleteDistribution", e);
                    match e.code() {
                        "NoSuchDistribution" => {}
                        "DistributionNotDisabled" | "PreconditionFailed" => {
                            return Ok(DistributionDeletion::Pending(format!("deleting CloudFront distribution {id}")));
                        }
                        _ => return Err(e),
                    }
                }
            }
        }
    }
    let name = irsa::origin_access_control_name(cluster_id);
    if let Some(oac) = find_origin_access_control(aws, &name).await? {
        let etag = aws
            .cloudfront
            .get_origin_access_control()
            .id(&oac)
            .send()
            .await
            .map_err(|e| api_error("CloudFront", "GetOriginAccessControl", e))?
            .e_tag()
            .unwrap_or_default()
            .to_string();
        match aws.cloudfront.delete_origin_access_control().id(&oac).if_match(etag).send().await {
            Ok(_) => {}
            Err(e) => {
                let e = api_error("CloudFront", "DeleteOriginAccessControl", e);
                match e.code() {
                    "NoSuchOriginAccessControl" => {}
                    "OriginAccessControlInUse" => {
                        return Ok(DistributionDeletion::Pending(format!("deleting origin access control {name}")));
                    }
                    _ => return Err(e),
                }
            }
        }
    }
    Ok(DistributionDeletion::Gone)
}

/// Delete origin access identity `id`, which the original's distribution of cluster `cluster_id`
/// read the bucket through, once that distribution is gone; one whose comment is not the
/// cluster's (irsa-operator gave it its distribution's comment) is left alone.
pub async fn delete_origin_access_identity(
    aws: &AccountClients,
    cluster_id: &str,
    id: &str,
) -> Result<DistributionDeletion, AwsError> {
    let got = match aws.cloudfront.get_cloud_front_origin_access_identity().id(id).send().await {
        Ok(got) => got,
        Err(e) => {
            let e = api_error("CloudFront", "GetCloudFrontOriginAccessIdentity", e);
            return if e.code() == "NoSuchCloudFrontOriginAccessIdentity" {
                Ok(DistributionDeletion::Gone)
            } else {
                Err(e)
            };
        }
    };
    let comment = got
        .cloud_front_origin_access_identity()
        .and_then(|i| i.cloud_front_origin_access_identity_config())
        .map(|c| c.comment())
        .unwrap_or_default();
    if !irsa::is_distribution_comment(comment, cluster_id) {
        return Ok(DistributionDeletion::Gone);
    }
    let etag = got.e_tag().unwrap_or_default().to_string();
    match aws.cloudfront.delete_cloud_front_origin_access_identity().id(id).if_match(etag).send().await {
        Ok(_) => Ok(DistributionDeletion::Gone),
        Err(e) => {
            let e = api_error("CloudFront", "DeleteCloudFrontOriginAccessIdentity", e);
            match e.code() {
                "NoSuchCloudFrontOriginAccessIdentity" => Ok(DistributionDeletion::Gone),
                "CloudFrontOriginAccessIdentityInUse" | "PreconditionFailed" => {
                    Ok(DistributionDeletion::Pending(format!("deleting CloudFront origin access identity {id}")))
                }
                _ => Err(e),
            }
        }
    }
}

/// Whether distribution `id` carries cluster `cluster_id`'s tag; `false` when it is gone.
async fn tagged_for(aws: &AccountClients, id: &str, cluster_id: &str) -> Result<bool, AwsError> {
    let got = match aws.cloudfront.get_distribution().id(id).send().await {
        Ok(got) => got,
        Err(e) => {
            let e = api_error("CloudFront", "GetDistribution", e);
            return if e.code() == "NoSuchDistribution" { Ok(false) } else { Err(e) };
        }
    };
    let Some(arn) = got.distribution().map(|d| d.arn().to_string()) else { return Ok(false) };
    let tags = aws
        .cloudfront
        .list_tags_for_resource()
        .resource(arn)
        .send()
        .await
        .map_err(|e| api_error("CloudFront", "ListTagsForResource", e))?;
    Ok(tags.tags().is_some_and(|t| {
        t.items().iter().any(|t| t.key() == aws_stacks::names::tags::CLUSTER && t.value() == Some(cluster_id))
    }))
}

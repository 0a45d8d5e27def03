//! ACM: the certificate of the service-account issuer's alias `irsa.<id>.k8s.<domain>`
//! (`aws_stacks::irsa::alias`), as irsa-operator requested it: in us-east-1 (CloudFront takes
//! no other region's), validated by DNS through the cluster's zone, tagged for the cluster. A
//! certificate is found again by its domain and the cluster's `giantswarm.io/cluster` tag, so a
//! restart never requests a second one, and one someone else requested is never touched.

use std::collections::BTreeMap;

use aws_sdk_acm::types::{CertificateStatus, Tag, ValidationMethod};

use crate::aws::{AccountClients, AwsError, api_error};

/// A certificate of the alias, as ACM describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AliasCertificate {
    /// Its ARN, which the distribution's viewer certificate names.
    pub arn: String,
    /// `ISSUED` once validated; `PENDING_VALIDATION` before.
    pub status: CertificateStatus,
    /// The CNAME record that validates it (name, value); ACM fills it in some seconds after the
    /// request.
    pub validation: Option<(String, String)>,
}

/// Whether certificate `arn` carries cluster `cluster_id`'s tag.
async fn tagged_for(aws: &AccountClients, arn: &str, cluster_id: &str) -> Result<bool, AwsError> {
    let tags = aws
        .acm
        .list_tags_for_certificate()
        .certificate_arn(arn)
        .send()
        .await
        .map_err(|e| api_error("ACM", "ListTagsForCertificate", e))?;
    Ok(tags.tags().iter().any(|t| t.key() == aws_stacks::names::tags::CLUSTER && t.value() == Some(cluster_id)))
}

/// The ARNs of the certificates for `domain` that carry cluster `cluster_id`'s tag, whatever
/// their status.
pub async fn certificates_of(aws: &AccountClients, domain: &str, cluster_id: &str) -> Result<Vec<String>, AwsError> {
    let mut found = Vec::new();
    let mut token: Option<String> = None;
    loop {
        let page = aws
            .acm
            .list_certificates()
            .set_next_token(token.take())
            .send()
            .await
            .map_err(|e| api_error("ACM", "ListCertificates", e))?;
        for c in page.certificate_summary_list() {
            let (Some(name), Some(arn)) = (c.domain_name(), c.certificate_arn()) else { continue };
            if name == domain && tagged_for(aws, arn, cluster_id).await? {
                found.push(arn.to_string());
            }
        }
        match page.next_token().filter(|t| !t.is_empty()) {
            Some(next) => token = Some(next.to_string()),
            None => return Ok(found),
        }
    }
}

/// ACM's view of certificate `arn`.
pub async fn describe(aws: &AccountClients, arn: &str) -> Result<AliasCertificate, AwsError> {
    let out = aws
        .acm
        .describe_certificate()
        .certificate_arn(arn)
        .send()
        .await
        .map_err(|e| api_error("ACM", "DescribeCertificate", e))?;
    let detail = out
        .certificate()
        .ok_or_else(|| AwsError::Setup(format!("ACM DescribeCertificate of {arn}: no certificate")))?;
    let validation = detail
        .domain_validation_options()
        .first()
        .and_then(|o| o.resource_record())
        .map(|r| (r.name().to_string(), r.value().to_string()));
    Ok(AliasCertificate {
        arn: arn.to_string(),
        status: detail.status().cloned().unwrap_or(CertificateStatus::PendingValidation),
        validation,
    })
}

/// The certificate of cluster `cluster_id` for `domain` that is issued or may still be: the one
/// found ([`certificates_of`], a failed or expired one passed over), else one requested now with
/// DNS validation, tagged with `tags`; `idempotency` (alphanumeric, the AWSCluster's UID) makes
/// a repeated request within the hour answer the same certificate. Returns it and whether it was
/// requested now.
pub async fn ensure_certificate(
    aws: &AccountClients,
    domain: &str,
    cluster_id: &str,
    idempotency: &str,
    tags: &BTreeMap<String, String>,
) -> Result<(AliasCertificate, bool), AwsError> {
    for arn in certificates_of(aws, domain, cluster_id).await? {
        let cert = describe(aws, &arn).await?;
        if matches!(cert.status, CertificateStatus::Issued | CertificateStatus::PendingValidation) {
            return Ok((cert, false));
        }
    }
    let token: String = idempotency.chars().filter(char::is_ascii_alphanumeric).take(32).collect();
    let tags: Vec<Tag> = tags.iter().filter_map(|(k, v)| Tag::builder().key(k).value(v).build().ok()).collect();
    let out = aws
        .acm
        .request_certificate()
        .domain_name(domain)
        .validation_method(ValidationMethod::Dns)
        .set_idempotency_token((!token.is_empty()).then_some(token))
        .set_tags(Some(tags))
        .send()
        .await
        .map_err(|e| api_error("ACM", "RequestCertificate", e))?;
    let arn = out
        .certificate_arn()
        .ok_or_else(|| AwsError::Setup("ACM RequestCertificate answered no certificate".into()))?
        .to_string();
    Ok((describe(aws, &arn).await?, true))
}

/// Delete the certificates for `domain` that carry cluster `cluster_id`'s tag. `Ok(Some(arn))`
/// while one is still in use (by a distribution that is not gone yet).
pub async fn delete_certificates(
    aws: &AccountClients,
    domain: &str,
    cluster_id: &str,
) -> Result<Option<String>, AwsError> {
    for arn in certificates_of(aws, domain, cluster_id).await? {
        if let Err(e) = aws.acm.delete_certificate().certificate_arn(&arn).send().await {
            let e = api_error("ACM", "DeleteCertificate", e);
            match e.code() {
                "ResourceNotFoundException" => {}
                "ResourceInUseException" => return Ok(Some(arn)),
                _ => return Err(e),
            }
        }
    }
    Ok(None)
}

//! IAM: the OIDC providers of clusters' service-account issuers (IAM roles for service
//! accounts), one per issuer host, in the tenant account, as the original had them.
//!
//! A provider is found by its ARN, which IAM derives from its URL
//! (`aws_stacks::irsa::provider_arn`), so one that exists already for the host (the original's,
//! a person's) is used as it is: it gets the STS audience among its client ids when it lacks it,
//! and is never replaced. Its thumbprint list is `aws_stacks::irsa::ISSUER_THUMBPRINT`, the
//! well-known thumbprint of the root CA at the top of S3's and CloudFront's chains (an existing
//! provider without any thumbprint gets it); IAM itself checks issuers on S3 and CloudFront
//! against its library of trusted root CAs.

use std::collections::BTreeMap;

use aws_sdk_iam::types::Tag;

use crate::aws::{AccountClients, AwsError, api_error};

/// Make sure the OIDC provider of `host` (`https://<host>`) exists with `client_id` among its
/// client ids. Returns `true` when it created it.
pub async fn ensure_oidc_provider(
    aws: &AccountClients,
    host: &str,
    client_id: &str,
    tags: &BTreeMap<String, String>,
) -> Result<bool, AwsError> {
    let arn = aws_stacks::irsa::provider_arn(aws_stacks::names::partition(&aws.region), &aws.account_id, host);
    match aws.iam.get_open_id_connect_provider().open_id_connect_provider_arn(&arn).send().await {
        Ok(found) => {
            if found.thumbprint_list().is_empty() {
                aws.iam
                    .update_open_id_connect_provider_thumbprint()
                    .open_id_connect_provider_arn(&arn)
                    .thumbprint_list(aws_stacks::irsa::ISSUER_THUMBPRINT)
                    .send()
                    .await
                    .map_err(|e| api_error("IAM", "UpdateOpenIDConnectProviderThumbprint", e))?;
            }
            if !found.client_id_list().iter().any(|c| c == client_id) {
                aws.iam
                    .add_client_id_to_open_id_connect_provider()
                    .open_id_connect_provider_arn(&arn)
                    .client_id(client_id)
                    .send()
                    .await
                    .map_err(|e| api_error("IAM", "AddClientIDToOpenIDConnectProvider", e))?;
            }
            Ok(false)
        }
        Err(e) => {
            let e = api_error("IAM", "GetOpenIDConnectProvider", e);
            if e.code() != "NoSuchEntity" {
                return Err(e);
            }
            let tags: Vec<Tag> = tags.iter().filter_map(|(k, v)| Tag::builder().key(k).value(v).build().ok()).collect();
            match aws
                .iam
                .create_open_id_connect_provider()
                .url(format!("https://{host}"))
                .client_id_list(client_id)
                .thumbprint_list(aws_stacks::irsa::ISSUER_THUMBPRINT)
                .set_tags(Some(tags))
                .send()
                .await
            {
                Ok(_) => Ok(true),
                Err(e) => {
                    let e = api_error("IAM", "CreateOpenIDConnectProvider", e);
                    if e.code() == "EntityAlreadyExists" { Ok(false) } else { Err(e) }
                }
            }
        }
    }
}

/// Delete the OIDC provider of `host` if it carries the cluster tag of `cluster_id` (one the
/// cluster's operator, or the original, created for it); another is left alone.
pub async fn delete_oidc_provider(aws: &AccountClients, host: &str, cluster_id: &str) -> Result<(), AwsError> {
    let arn = aws_stacks::irsa::provider_arn(aws_stacks::names::partition(&aws.region), &aws.account_id, host);
    let found = match aws.iam.get_open_id_connect_provider().open_id_connect_provider_arn(&arn).send().await {
        Ok(found) => found,
        Err(e) => {
            let e = api_error("IAM", "GetOpenIDConnectProvider", e);
            return if e.code() == "NoSuchEntity" { Ok(()) } else { Err(e) };
        }
    };
    let ours = found.tags().iter().any(|t| t.key() == aws_stacks::names::tags::CLUSTER && t.value() == cluster_id);
    if !ours {
        return Ok(());
    }
    match aws.iam.delete_open_id_connect_provider().open_id_connect_provider_arn(&arn).send().await {
        Ok(_) => Ok(()),
        Err(e) => {
            let e = api_error("IAM", "DeleteOpenIDConnectProvider", e);
            if e.code() == "NoSuchEntity" { Ok(()) } else { Err(e) }
        }
    }
}

/// The managed policies attached to role `role`, by ARN; none when the role does not exist.
pub async fn attached_policies(aws: &AccountClients, role: &str) -> Result<Vec<String>, AwsError> {
    let pages = aws.iam.list_attached_role_policies().role_name(role).into_paginator().send().try_collect().await;
    match pages {
        Ok(pages) => Ok(pages
            .iter()
            .flat_map(|p| p.attached_policies())
            .filter_map(|p| p.policy_arn().map(str::to_string))
            .collect()),
        Err(e) => {
            let e = api_error("IAM", "ListAttachedRolePolicies", e);
            if e.code() == "NoSuchEntity" { Ok(Vec::new()) } else { Err(e) }
        }
    }
}

/// Detach managed policy `arn` from role `role`; one already detached, or a role already gone,
/// is done.
pub async fn detach_policy(aws: &AccountClients, role: &str, arn: &str) -> Result<(), AwsError> {
    match aws.iam.detach_role_policy().role_name(role).policy_arn(arn).send().await {
        Ok(_) => Ok(()),
        Err(e) => {
            let e = api_error("IAM", "DetachRolePolicy", e);
            if e.code() == "NoSuchEntity" { Ok(()) } else { Err(e) }
        }
    }
}

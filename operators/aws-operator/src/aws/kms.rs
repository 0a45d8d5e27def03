//! The cluster's KMS key: found again by its alias or, if the operator died between `CreateKey`
//! and `CreateAlias`, by its cluster tag, so that a create is safe to repeat after a crash at
//! any point; and the encryption of node-config secrets with it.

use std::collections::BTreeMap;

use aws_sdk_kms::types::{KeyState, Tag as KmsTag};

use crate::aws::{AccountClients, AwsError, api_error};

/// The tag that marks a key as the key of a cluster (used to find a key whose alias was never
/// created because the operator stopped in between).
pub const KEY_CLUSTER_TAG: &str = "giantswarm.io/cluster";

/// The cluster key: found by alias, created (rotation on, then alias) when missing. A key
/// pending deletion does not count: its alias is moved to a new key, as upstream does.
pub async fn ensure_key(
    aws: &AccountClients,
    cluster_id: &str,
    tags: &BTreeMap<String, String>,
) -> Result<String, AwsError> {
    let alias = aws_stacks::names::kms_alias(cluster_id);
    if let Some((arn, usable)) = describe_key(aws, &alias).await? {
        if usable {
            sweep_orphan_keys(aws, cluster_id, &arn).await?;
            return Ok(arn);
        }
        aws.kms.delete_alias().alias_name(&alias).send().await.map_err(|e| api_error("KMS", "DeleteAlias", e))?;
    }
    // A key created by an earlier attempt that stopped before its alias existed.
    let key_id = match find_tagged_key(aws, cluster_id).await? {
        Some(id) => id,
        None => {
            let kms_tags = tags
                .iter()
                .filter_map(|(k, v)| KmsTag::builder().tag_key(k).tag_value(v).build().ok())
                .chain(KmsTag::builder().tag_key(KEY_CLUSTER_TAG).tag_value(cluster_id).build().ok())
                .collect::<Vec<_>>();
            let created = aws
                .kms
                .create_key()
                .description(format!("Encrypts the node configs of cluster {cluster_id}"))
                .set_tags(Some(kms_tags))
                .send()
                .await
                .map_err(|e| api_error("KMS", "CreateKey", e))?;
            created
                .key_metadata()
                .map(|m| m.key_id().to_string())
                .ok_or_else(|| AwsError::Setup("KMS CreateKey returned no key".into()))?
        }
    };
    // Rotation before the alias, so that a key found by its alias always rotates.
    aws.kms.enable_key_rotation().key_id(&key_id).send().await.map_err(|e| api_error("KMS", "EnableKeyRotation", e))?;
    match aws.kms.create_alias().alias_name(&alias).target_key_id(&key_id).send().await {
        Ok(_) => {}
        Err(e) => {
            let e = api_error("KMS", "CreateAlias", e);
            if e.code() != "AlreadyExistsException" {
                return Err(e);
            }
        }
    }
    match describe_key(aws, &alias).await? {
        Some((arn, true)) => {
            sweep_orphan_keys(aws, cluster_id, &arn).await?;
            Ok(arn)
        }
        _ => Err(AwsError::Setup(format!("the key behind {alias} is not usable after creation"))),
    }
}

/// Make the key's tags `tags`, updated in place: changed values are put (`TagResource`) and
/// tags no longer desired removed (`UntagResource`), as CloudFormation does to the stacks'
/// resources; [`KEY_CLUSTER_TAG`] stays. Returns whether anything changed.
pub async fn ensure_tags(
    aws: &AccountClients,
    key_arn: &str,
    tags: &BTreeMap<String, String>,
) -> Result<bool, AwsError> {
    let mut current = BTreeMap::new();
    let mut marker = None;
    loop {
        let page = aws
            .kms
            .list_resource_tags()
            .key_id(key_arn)
            .set_marker(marker.take())
            .send()
            .await
            .map_err(|e| api_error("KMS", "ListResourceTags", e))?;
        current.extend(page.tags().iter().map(|t| (t.tag_key().to_string(), t.tag_value().to_string())));
        match page.next_marker() {
            Some(m) if page.truncated() => marker = Some(m.to_string()),
            _ => break,
        }
    }
    let put: Vec<KmsTag> = tags
        .iter()
        .filter(|(k, v)| current.get(*k) != Some(*v))
        .filter_map(|(k, v)| KmsTag::builder().tag_key(k).tag_value(v).build().ok())
        .collect();
    let remove: Vec<String> =
        current.keys().filter(|k| !tags.contains_key(*k) && k.as_str() != KEY_CLUSTER_TAG).cloned().collect();
    if !put.is_empty() {
        aws.kms
            .tag_resource()
            .key_id(key_arn)
            .set_tags(Some(put.clone()))
            .send()
            .await
            .map_err(|e| api_error("KMS", "TagResource", e))?;
    }
    if !remove.is_empty() {
        aws.kms
            .untag_resource()
            .key_id(key_arn)
            .set_tag_keys(Some(remove.clone()))
            .send()
            .await
            .map_err(|e| api_error("KMS", "UntagResource", e))?;
    }
    Ok(!put.is_empty() || !remove.is_empty())
}

/// `(arn, usable)` of the key behind `alias`, `None` when the alias does not exist.
pub async fn describe_key(aws: &AccountClients, alias: &str) -> Result<Option<(String, bool)>, AwsError> {
    match aws.kms.describe_key().key_id(alias).send().await {
        Ok(out) => Ok(out.key_metadata().map(|m| {
            let usable = m.deletion_date().is_none()
                && !matches!(m.key_state(), Some(KeyState::PendingDeletion) | Some(KeyState::PendingReplicaDeletion));
            (m.arn().unwrap_or_default().to_string(), usable)
        })),
        Err(e) => {
            let e = api_error("KMS", "DescribeKey", e);
            if e.code() == "NotFoundException" { Ok(None) } else { Err(e) }
        }
    }
}

/// Schedule the deletion of keys tagged for the cluster that are not behind its alias. KMS has no
/// idempotency token: a `CreateKey` in flight when the operator stopped can complete after the
/// next process looked for it and created its own. Called when a process first sees the cluster's
/// key, so such an orphan lives at most until the next restart.
async fn sweep_orphan_keys(aws: &AccountClients, cluster_id: &str, keep_arn: &str) -> Result<(), AwsError> {
    for (id, arn) in unaliased_keys(aws).await? {
        if arn != keep_arn && is_live_cluster_key(aws, &id, cluster_id).await? {
            tracing::warn!(cluster = cluster_id, key = id, "scheduling the deletion of an orphaned cluster key");
            aws.kms
                .schedule_key_deletion()
                .key_id(&id)
                .pending_window_in_days(7)
                .send()
                .await
                .map_err(|e| api_error("KMS", "ScheduleKeyDeletion", e))?;
        }
    }
    Ok(())
}

async fn find_tagged_key(aws: &AccountClients, cluster_id: &str) -> Result<Option<String>, AwsError> {
    for (id, _) in unaliased_keys(aws).await? {
        if is_live_cluster_key(aws, &id, cluster_id).await? {
            return Ok(Some(id));
        }
    }
    Ok(None)
}

/// Keys without an alias, as `(id, arn)`: candidates for a cluster key whose alias was never
/// created. Keys behind an alias belong to a cluster (or to AWS) and need no tag lookup.
async fn unaliased_keys(aws: &AccountClients) -> Result<Vec<(String, String)>, AwsError> {
    let mut aliased = std::collections::HashSet::new();
    let mut marker = None;
    loop {
        let page = aws
            .kms
            .list_aliases()
            .set_marker(marker.take())
            .send()
            .await
            .map_err(|e| api_error("KMS", "ListAliases", e))?;
        aliased.extend(page.aliases().iter().filter_map(|a| a.target_key_id().map(str::to_string)));
        match page.next_marker() {
            Some(m) if page.truncated() => marker = Some(m.to_string()),
            _ => break,
        }
    }
    let mut out = Vec::new();
    let mut marker = None;
    loop {
        let page =
            aws.kms.list_keys().set_marker(marker.take()).send().await.map_err(|e| api_error("KMS", "ListKeys", e))?;
        for key in page.keys() {
            if let (Some(id), Some(arn)) = (key.key_id(), key.key_arn())
                && !aliased.contains(id)
            {
                out.push((id.to_string(), arn.to_string()));
            }
        }
        match page.next_marker() {
            Some(m) if page.truncated() => marker = Some(m.to_string()),
            _ => return Ok(out),
        }
    }
}

/// Whether key `id` carries the cluster tag of `cluster_id` and is not pending deletion. A key
/// whose policy does not let the operator read it (another team's key in a shared account) is
/// not the cluster's: the operator's keys keep the default policy. It is skipped, and said so
/// once per key and process.
async fn is_live_cluster_key(aws: &AccountClients, id: &str, cluster_id: &str) -> Result<bool, AwsError> {
    let tags = match aws.kms.list_resource_tags().key_id(id).send().await {
        Ok(tags) => tags,
        Err(e) => return skip_unreadable(api_error("KMS", "ListResourceTags", e), id),
    };
    if !tags.tags().iter().any(|t| t.tag_key() == KEY_CLUSTER_TAG && t.tag_value() == cluster_id) {
        return Ok(false);
    }
    let meta = match aws.kms.describe_key().key_id(id).send().await {
        Ok(meta) => meta,
        Err(e) => return skip_unreadable(api_error("KMS", "DescribeKey", e), id),
    };
    Ok(meta.key_metadata().is_some_and(|m| m.deletion_date().is_none()))
}

/// `Ok(false)` for a key the operator may not read, the error otherwise.
fn skip_unreadable(error: AwsError, id: &str) -> Result<bool, AwsError> {
    if error.code() != "AccessDeniedException" {
        return Err(error);
    }
    static REPORTED: std::sync::LazyLock<parking_lot::Mutex<std::collections::HashSet<String>>> =
        std::sync::LazyLock::new(Default::default);
    if REPORTED.lock().insert(id.to_string()) {
        tracing::info!(key = id, "skipping a KMS key whose policy does not let the operator read it");
    }
    Ok(false)
}

/// Schedule the deletion of the cluster key (7 days, the minimum) and remove its alias.
pub async fn schedule_key_deletion(aws: &AccountClients, cluster_id: &str) -> Result<(), AwsError> {
    let alias = aws_stacks::names::kms_alias(cluster_id);
    if let Some((arn, usable)) = describe_key(aws, &alias).await? {
        if usable {
            // The key id, not the ARN: the last path segment of the ARN.
            let key_id = arn.rsplit('/').next().unwrap_or(&arn).to_string();
            aws.kms
                .schedule_key_deletion()
                .key_id(&key_id)
                .pending_window_in_days(7)
                .send()
                .await
                .map_err(|e| api_error("KMS", "ScheduleKeyDeletion", e))?;
        }
        aws.kms.delete_alias().alias_name(&alias).send().await.map_err(|e| api_error("KMS", "DeleteAlias", e))?;
    }
    Ok(())
}

/// KMS `Encrypt` of one secret with the cluster key. The plaintext never leaves this function
/// except as ciphertext.
pub async fn encrypt(aws: &AccountClients, key_arn: &str, plaintext: &[u8]) -> Result<Vec<u8>, AwsError> {
    let out = aws
        .kms
        .encrypt()
        .key_id(key_arn)
        .plaintext(aws_sdk_kms::primitives::Blob::new(plaintext))
        .send()
        .await
        .map_err(|e| api_error("KMS", "Encrypt", e))?;
    out.ciphertext_blob()
        .map(|b| b.as_ref().to_vec())
        .ok_or_else(|| AwsError::Setup("KMS Encrypt returned no ciphertext".into()))
}

//! The direct (non-CloudFormation) AWS calls: the cluster's KMS key, its S3 bucket and node
//! configs, and the EC2 / Auto Scaling reads the operator needs.
//!
//! Every create here is idempotent and safe to repeat after a crash at any point: the key is
//! found again by its alias or, if the operator died between `CreateKey` and `CreateAlias`, by its
//! cluster tag; buckets tolerate "already owned by you"; objects carry the hash of their
//! plaintext so an unchanged config is never uploaded twice.

use std::collections::BTreeMap;

use aws_sdk_kms::types::{KeyState, Tag as KmsTag};
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{
    BucketLifecycleConfiguration, BucketLocationConstraint, CreateBucketConfiguration, Delete, ExpirationStatus,
    LifecycleExpiration, LifecycleRule, LifecycleRuleFilter, ObjectIdentifier, PublicAccessBlockConfiguration,
    ServerSideEncryption, ServerSideEncryptionByDefault, ServerSideEncryptionConfiguration, ServerSideEncryptionRule,
    Tag as S3Tag, Tagging,
};

use crate::aws::{AccountClients, AwsError, api_error};

/// The object metadata key holding the sha256 of a node config's plaintext.
pub const CONTENT_HASH_METADATA: &str = "content-sha256";

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

/// Whether key `id` carries the cluster tag of `cluster_id` and is not pending deletion.
async fn is_live_cluster_key(aws: &AccountClients, id: &str, cluster_id: &str) -> Result<bool, AwsError> {
    let tags =
        aws.kms.list_resource_tags().key_id(id).send().await.map_err(|e| api_error("KMS", "ListResourceTags", e))?;
    if !tags.tags().iter().any(|t| t.tag_key() == KEY_CLUSTER_TAG && t.tag_value() == cluster_id) {
        return Ok(false);
    }
    let meta = aws.kms.describe_key().key_id(id).send().await.map_err(|e| api_error("KMS", "DescribeKey", e))?;
    Ok(meta.key_metadata().is_some_and(|m| m.deletion_date().is_none()))
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

/// Days after which the access logs expire.
pub const ACCESS_LOG_EXPIRATION_DAYS: i32 = 365;

/// The bucket policy denying every request that does not use TLS, with the ARNs of the
/// region's partition (a policy naming `arn:aws:` is refused in `aws-cn` and `aws-us-gov`).
pub fn tls_only_policy(bucket: &str, region: &str) -> String {
    let arn = format!("arn:{}:s3:::{bucket}", aws_stacks::names::partition(region));
    serde_json::json!({
        "Version": "2012-10-17",
        "Statement": [{
            "Sid": "DenyInsecureTransport",
            "Effect": "Deny",
            "Principal": {"AWS": "*"},
            "Action": "s3:*",
            "Resource": [arn.clone(), format!("{arn}/*")],
            "Condition": {"Bool": {"aws:SecureTransport": "false"}}
        }]
    })
    .to_string()
}

/// The cluster bucket and its access-log bucket, with default encryption, a TLS-only policy, a
/// public access block, access logging and a lifecycle on the logs (reference §7.2). Every call is
/// idempotent; the whole sequence runs again only when a bucket is missing.
pub async fn ensure_buckets(
    aws: &AccountClients,
    cluster_id: &str,
    tags: &BTreeMap<String, String>,
) -> Result<String, AwsError> {
    let bucket = aws_stacks::names::bucket(&aws.account_id, cluster_id);
    let logs = aws_stacks::names::access_log_bucket(&aws.account_id, cluster_id);
    // The last step of the sequence is the access logging of the config bucket: when it is in
    // place, every earlier step completed (a crash in between repeats the idempotent sequence).
    if bucket_exists(aws, &bucket).await? && bucket_exists(aws, &logs).await? {
        let logging = aws
            .s3
            .get_bucket_logging()
            .bucket(&bucket)
            .send()
            .await
            .map_err(|e| api_error("S3", "GetBucketLogging", e))?;
        if logging.logging_enabled().is_some() {
            return Ok(bucket);
        }
    }
    for name in [&logs, &bucket] {
        create_bucket(aws, name).await?;
        let tagging = Tagging::builder()
            .set_tag_set(Some(tags.iter().filter_map(|(k, v)| S3Tag::builder().key(k).value(v).build().ok()).collect()))
            .build()
            .map_err(|e| AwsError::Setup(e.to_string()))?;
        aws.s3
            .put_bucket_tagging()
            .bucket(name)
            .tagging(tagging)
            .send()
            .await
            .map_err(|e| api_error("S3", "PutBucketTagging", e))?;
        let sse = ServerSideEncryptionConfiguration::builder()
            .rules(
                ServerSideEncryptionRule::builder()
                    .apply_server_side_encryption_by_default(
                        ServerSideEncryptionByDefault::builder()
                            .sse_algorithm(ServerSideEncryption::Aes256)
                            .build()
                            .map_err(|e| AwsError::Setup(e.to_string()))?,
                    )
                    .build(),
            )
            .build()
            .map_err(|e| AwsError::Setup(e.to_string()))?;
        aws.s3
            .put_bucket_encryption()
            .bucket(name)
            .server_side_encryption_configuration(sse)
            .send()
            .await
            .map_err(|e| api_error("S3", "PutBucketEncryption", e))?;
        aws.s3
            .put_public_access_block()
            .bucket(name)
            .public_access_block_configuration(
                PublicAccessBlockConfiguration::builder()
                    .block_public_acls(true)
                    .block_public_policy(true)
                    .ignore_public_acls(true)
                    .restrict_public_buckets(true)
                    .build(),
            )
            .send()
            .await
            .map_err(|e| api_error("S3", "PutPublicAccessBlock", e))?;
        aws.s3
            .put_bucket_policy()
            .bucket(name)
            .policy(tls_only_policy(name, &aws.region))
            .send()
            .await
            .map_err(|e| api_error("S3", "PutBucketPolicy", e))?;
    }
    // S3 log delivery writes into the log bucket.
    let log_delivery = "uri=\"http://acs.amazonaws.com/groups/s3/LogDelivery\"";
    aws.s3
        .put_bucket_acl()
        .bucket(&logs)
        .grant_write(log_delivery)
        .grant_read_acp(log_delivery)
        .send()
        .await
        .map_err(|e| api_error("S3", "PutBucketAcl", e))?;
    let expire = LifecycleRule::builder()
        .id("ExpirationLogs")
        .status(ExpirationStatus::Enabled)
        .filter(LifecycleRuleFilter::builder().prefix("").build())
        .expiration(LifecycleExpiration::builder().days(ACCESS_LOG_EXPIRATION_DAYS).build())
        .build()
        .map_err(|e| AwsError::Setup(e.to_string()))?;
    aws.s3
        .put_bucket_lifecycle_configuration()
        .bucket(&logs)
        .lifecycle_configuration(
            BucketLifecycleConfiguration::builder()
                .rules(expire)
                .build()
                .map_err(|e| AwsError::Setup(e.to_string()))?,
        )
        .send()
        .await
        .map_err(|e| api_error("S3", "PutBucketLifecycleConfiguration", e))?;
    // Abort incomplete uploads in the config bucket too: it only ever holds small objects.
    let abort = LifecycleRule::builder()
        .id("AbortIncompleteUploads")
        .status(ExpirationStatus::Enabled)
        .filter(LifecycleRuleFilter::builder().prefix("").build())
        .abort_incomplete_multipart_upload(
            aws_sdk_s3::types::AbortIncompleteMultipartUpload::builder().days_after_initiation(1).build(),
        )
        .build()
        .map_err(|e| AwsError::Setup(e.to_string()))?;
    aws.s3
        .put_bucket_lifecycle_configuration()
        .bucket(&bucket)
        .lifecycle_configuration(
            BucketLifecycleConfiguration::builder().rules(abort).build().map_err(|e| AwsError::Setup(e.to_string()))?,
        )
        .send()
        .await
        .map_err(|e| api_error("S3", "PutBucketLifecycleConfiguration", e))?;
    aws.s3
        .put_bucket_logging()
        .bucket(&bucket)
        .bucket_logging_status(
            aws_sdk_s3::types::BucketLoggingStatus::builder()
                .logging_enabled(
                    aws_sdk_s3::types::LoggingEnabled::builder()
                        .target_bucket(&logs)
                        .target_prefix(format!("{bucket}/"))
                        .build()
                        .map_err(|e| AwsError::Setup(e.to_string()))?,
                )
                .build(),
        )
        .send()
        .await
        .map_err(|e| api_error("S3", "PutBucketLogging", e))?;
    Ok(bucket)
}

async fn bucket_exists(aws: &AccountClients, bucket: &str) -> Result<bool, AwsError> {
    match aws.s3.head_bucket().bucket(bucket).send().await {
        Ok(_) => Ok(true),
        Err(e) => {
            if e.raw_response().is_some_and(|r| r.status().as_u16() == 404) {
                return Ok(false);
            }
            let e = api_error("S3", "HeadBucket", e);
            if e.code() == "NotFound" || e.code() == "NoSuchBucket" { Ok(false) } else { Err(e) }
        }
    }
}

async fn create_bucket(aws: &AccountClients, bucket: &str) -> Result<(), AwsError> {
    let mut call = aws.s3.create_bucket().bucket(bucket);
    // The Go SDK set the location constraint from the client region; the Rust SDK does not.
    if aws.region != "us-east-1" {
        call = call.create_bucket_configuration(
            CreateBucketConfiguration::builder()
                .location_constraint(BucketLocationConstraint::from(aws.region.as_str()))
                .build(),
        );
    }
    match call.send().await {
        Ok(_) => Ok(()),
        Err(e) => {
            let e = api_error("S3", "CreateBucket", e);
            if e.code() == "BucketAlreadyOwnedByYou" { Ok(()) } else { Err(e) }
        }
    }
}

/// The content hash stored with an object, `None` when the object does not exist.
pub async fn object_hash(aws: &AccountClients, bucket: &str, key: &str) -> Result<Option<String>, AwsError> {
    match aws.s3.head_object().bucket(bucket).key(key).send().await {
        Ok(out) => Ok(Some(out.metadata().and_then(|m| m.get(CONTENT_HASH_METADATA)).cloned().unwrap_or_default())),
        Err(e) => {
            if e.raw_response().is_some_and(|r| r.status().as_u16() == 404) {
                return Ok(None);
            }
            let e = api_error("S3", "HeadObject", e);
            if e.code() == "NotFound" || e.code() == "NoSuchKey" { Ok(None) } else { Err(e) }
        }
    }
}

/// Upload an object with its content hash.
pub async fn put_object(
    aws: &AccountClients,
    bucket: &str,
    key: &str,
    body: Vec<u8>,
    content_hash: &str,
    content_type: &str,
) -> Result<(), AwsError> {
    aws.s3
        .put_object()
        .bucket(bucket)
        .key(key)
        .content_type(content_type)
        .metadata(CONTENT_HASH_METADATA, content_hash)
        .body(ByteStream::from(body))
        .send()
        .await
        .map(|_| ())
        .map_err(|e| api_error("S3", "PutObject", e))
}

/// Empty and delete the cluster bucket and its log bucket. Returns `false` while objects remain
/// after three rounds (the caller keeps its finalizer and comes back).
pub async fn delete_buckets(aws: &AccountClients, cluster_id: &str) -> Result<bool, AwsError> {
    let bucket = aws_stacks::names::bucket(&aws.account_id, cluster_id);
    let logs = aws_stacks::names::access_log_bucket(&aws.account_id, cluster_id);
    for name in [&bucket, &logs] {
        if !bucket_exists(aws, name).await? {
            continue;
        }
        let mut emptied = false;
        for _ in 0..3 {
            let listing =
                aws.s3.list_objects_v2().bucket(name).send().await.map_err(|e| api_error("S3", "ListObjectsV2", e))?;
            let keys: Vec<ObjectIdentifier> = listing
                .contents()
                .iter()
                .filter_map(|o| ObjectIdentifier::builder().set_key(o.key().map(str::to_string)).build().ok())
                .collect();
            if keys.is_empty() {
                emptied = true;
                break;
            }
            aws.s3
                .delete_objects()
                .bucket(name)
                .delete(
                    Delete::builder()
                        .set_objects(Some(keys))
                        .quiet(true)
                        .build()
                        .map_err(|e| AwsError::Setup(e.to_string()))?,
                )
                .send()
                .await
                .map_err(|e| api_error("S3", "DeleteObjects", e))?;
        }
        if !emptied {
            return Ok(false);
        }
        match aws.s3.delete_bucket().bucket(name).send().await {
            Ok(_) => {}
            Err(e) => {
                let e = api_error("S3", "DeleteBucket", e);
                if e.code() != "NoSuchBucket" {
                    return Err(e);
                }
            }
        }
    }
    Ok(true)
}

/// Every subnet CIDR of the account and region (IPAM reserves them).
pub async fn subnet_cidrs(aws: &AccountClients) -> Result<Vec<String>, AwsError> {
    let mut out = Vec::new();
    let mut token = None;
    loop {
        let page = aws
            .ec2
            .describe_subnets()
            .set_next_token(token.take())
            .send()
            .await
            .map_err(|e| api_error("EC2", "DescribeSubnets", e))?;
        out.extend(page.subnets().iter().filter_map(|s| s.cidr_block().map(str::to_string)));
        match page.next_token() {
            Some(t) if !t.is_empty() => token = Some(t.to_string()),
            _ => return Ok(out),
        }
    }
}

/// The management cluster's VPC: `(id, cidr)` of the VPC tagged `Name=<installation>`.
pub async fn control_plane_vpc(aws: &AccountClients, installation: &str) -> Result<Option<(String, String)>, AwsError> {
    let out = aws
        .ec2
        .describe_vpcs()
        .filters(aws_sdk_ec2::types::Filter::builder().name("tag:Name").values(installation).build())
        .send()
        .await
        .map_err(|e| api_error("EC2", "DescribeVpcs", e))?;
    Ok(out.vpcs().first().and_then(|v| Some((v.vpc_id()?.to_string(), v.cidr_block()?.to_string()))))
}

/// The management VPC's route tables as `(id, Name tag)`: those named in `names` when given,
/// else every route table of the VPC except the main one.
pub async fn control_plane_route_tables(
    aws: &AccountClients,
    vpc_id: &str,
    names: &[String],
) -> Result<Vec<(String, String)>, AwsError> {
    let mut call = aws
        .ec2
        .describe_route_tables()
        .filters(aws_sdk_ec2::types::Filter::builder().name("vpc-id").values(vpc_id).build());
    if !names.is_empty() {
        call = call
            .filters(aws_sdk_ec2::types::Filter::builder().name("tag:Name").set_values(Some(names.to_vec())).build());
    }
    let out = call.send().await.map_err(|e| api_error("EC2", "DescribeRouteTables", e))?;
    let mut tables: Vec<(String, String)> = out
        .route_tables()
        .iter()
        .filter(|t| !names.is_empty() || !t.associations().iter().any(|a| a.main().unwrap_or(false)))
        .filter_map(|t| {
            let name =
                t.tags().iter().find(|tag| tag.key() == Some("Name")).and_then(|tag| tag.value()).unwrap_or_default();
            Some((t.route_table_id()?.to_string(), name.to_string()))
        })
        .collect();
    tables.sort();
    Ok(tables)
}

/// Private IPs of the running master instances of a cluster (tag `Name=<id>-master`).
pub async fn master_ips(aws: &AccountClients, cluster_id: &str) -> Result<Vec<String>, AwsError> {
    let mut ips = Vec::new();
    let mut token = None;
    loop {
        let page = aws
            .ec2
            .describe_instances()
            .filters(
                aws_sdk_ec2::types::Filter::builder().name("tag:Name").values(format!("{cluster_id}-master")).build(),
            )
            .filters(aws_sdk_ec2::types::Filter::builder().name("instance-state-name").values("running").build())
            .set_next_token(token.take())
            .send()
            .await
            .map_err(|e| api_error("EC2", "DescribeInstances", e))?;
        for r in page.reservations() {
            ips.extend(r.instances().iter().filter_map(|i| i.private_ip_address().map(str::to_string)));
        }
        match page.next_token() {
            Some(t) if !t.is_empty() => token = Some(t.to_string()),
            _ => break,
        }
    }
    ips.sort();
    ips.dedup();
    Ok(ips)
}

/// The desired capacity, min and max of an Auto Scaling group, `None` when it does not exist.
pub async fn asg_capacity(aws: &AccountClients, name: &str) -> Result<Option<(i32, i32, i32)>, AwsError> {
    let out = aws
        .autoscaling
        .describe_auto_scaling_groups()
        .auto_scaling_group_names(name)
        .send()
        .await
        .map_err(|e| api_error("AutoScaling", "DescribeAutoScalingGroups", e))?;
    Ok(out.auto_scaling_groups().first().map(|g| {
        (g.desired_capacity().unwrap_or_default(), g.min_size().unwrap_or_default(), g.max_size().unwrap_or_default())
    }))
}

/// The TTL of a cluster's NS delegation record (upstream's).
pub const DELEGATION_TTL: i64 = 300;

/// `name` as Route53 writes it, fully qualified: with one trailing dot.
fn fqdn(name: &str) -> String {
    format!("{}.", name.trim_end_matches('.'))
}

/// The public hosted zone named `name` (with or without the trailing dot) in the account: its
/// id without the `/hostedzone/` prefix, or `None`.
pub async fn hosted_zone_by_name(aws: &AccountClients, name: &str) -> Result<Option<String>, AwsError> {
    let wanted = fqdn(name);
    let page = aws
        .route53
        .list_hosted_zones_by_name()
        .dns_name(&wanted)
        // A private zone of the same name may come first.
        .max_items(10)
        .send()
        .await
        .map_err(|e| api_error("Route53", "ListHostedZonesByName", e))?;
    // The listing starts at `wanted` in DNS order: the first zone is it, or a later one.
    Ok(page
        .hosted_zones()
        .iter()
        .find(|z| z.name() == wanted && !z.config().is_some_and(|c| c.private_zone()))
        .map(|z| z.id().trim_start_matches("/hostedzone/").to_string()))
}

/// The name servers Route53 assigned to hosted zone `zone_id`.
pub async fn zone_name_servers(aws: &AccountClients, zone_id: &str) -> Result<Vec<String>, AwsError> {
    let zone =
        aws.route53.get_hosted_zone().id(zone_id).send().await.map_err(|e| api_error("Route53", "GetHostedZone", e))?;
    Ok(zone.delegation_set().map(|d| d.name_servers().to_vec()).unwrap_or_default())
}

/// The NS record `name` in zone `zone_id`: its values, or `None`.
pub async fn ns_record(aws: &AccountClients, zone_id: &str, name: &str) -> Result<Option<Vec<String>>, AwsError> {
    use aws_sdk_route53::types::RrType;
    let wanted = fqdn(name);
    let page = aws
        .route53
        .list_resource_record_sets()
        .hosted_zone_id(zone_id)
        .start_record_name(&wanted)
        .start_record_type(RrType::Ns)
        .max_items(1)
        .send()
        .await
        .map_err(|e| api_error("Route53", "ListResourceRecordSets", e))?;
    Ok(page
        .resource_record_sets()
        .iter()
        .find(|r| fqdn(r.name()) == wanted && *r.r#type() == RrType::Ns)
        .map(|r| r.resource_records().iter().map(|v| v.value().to_string()).collect()))
}

/// Upsert (`delete: false`) or delete the NS record `name` in zone `zone_id` with `values`,
/// TTL [`DELEGATION_TTL`]. A delete must name the record's current values.
pub async fn change_ns_record(
    aws: &AccountClients,
    zone_id: &str,
    name: &str,
    values: &[String],
    delete: bool,
) -> Result<(), AwsError> {
    use aws_sdk_route53::types::{Change, ChangeAction, ChangeBatch, ResourceRecord, ResourceRecordSet, RrType};
    let build = |what: &str| AwsError::Setup(format!("building the Route53 change of {name}: {what}"));
    let records = values
        .iter()
        .map(|v| ResourceRecord::builder().value(v).build().map_err(|e| build(&e.to_string())))
        .collect::<Result<Vec<_>, _>>()?;
    let set = ResourceRecordSet::builder()
        .name(fqdn(name))
        .r#type(RrType::Ns)
        .ttl(DELEGATION_TTL)
        .set_resource_records(Some(records))
        .build()
        .map_err(|e| build(&e.to_string()))?;
    let action = if delete { ChangeAction::Delete } else { ChangeAction::Upsert };
    let change =
        Change::builder().action(action).resource_record_set(set).build().map_err(|e| build(&e.to_string()))?;
    let batch = ChangeBatch::builder().changes(change).build().map_err(|e| build(&e.to_string()))?;
    aws.route53
        .change_resource_record_sets()
        .hosted_zone_id(zone_id)
        .change_batch(batch)
        .send()
        .await
        .map_err(|e| api_error("Route53", "ChangeResourceRecordSets", e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tls_only_policy_names_the_bucket_in_the_region_partition() {
        for (region, arn) in [
            ("eu-central-1", "arn:aws:s3:::b1"),
            ("cn-north-1", "arn:aws-cn:s3:::b1"),
            ("us-gov-west-1", "arn:aws-us-gov:s3:::b1"),
        ] {
            let policy: serde_json::Value = serde_json::from_str(&tls_only_policy("b1", region)).expect("JSON");
            let statement = &policy["Statement"][0];
            assert_eq!(statement["Resource"], serde_json::json!([arn, format!("{arn}/*")]), "{region}");
            assert_eq!(statement["Condition"]["Bool"]["aws:SecureTransport"], "false");
        }
    }
}

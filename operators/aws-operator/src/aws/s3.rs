//! The cluster's S3 buckets and node configs: buckets tolerate "already owned by you", so a
//! create is safe to repeat; objects carry the hash of their plaintext, so that an unchanged
//! config is never uploaded twice.

use std::collections::BTreeMap;

use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{
    BucketLifecycleConfiguration, BucketLocationConstraint, CreateBucketConfiguration, Delete, ExpirationStatus,
    LifecycleExpiration, LifecycleRule, LifecycleRuleFilter, ObjectIdentifier, PublicAccessBlockConfiguration,
    ServerSideEncryption, ServerSideEncryptionByDefault, ServerSideEncryptionConfiguration, ServerSideEncryptionRule,
    Tag as S3Tag, Tagging,
};

use crate::aws::{AccountClients, AwsError, api_error};
use aws_stacks::irsa::IssuerReader;

/// The id of the access-log bucket's lifecycle rule that expires the logs.
pub const LOG_EXPIRATION_RULE: &str = "ExpirationLogs";

/// The object metadata key holding the sha256 of a node config's plaintext.
pub const CONTENT_HASH_METADATA: &str = "content-sha256";

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

/// The config bucket's policy: [`tls_only_policy`], and every upload must be encrypted with
/// the cluster's key (SSE-KMS, header `x-amz-server-side-encryption-aws-kms-key-id` naming it);
/// an upload without the headers, with SSE-S3 or with another key is refused.
pub fn config_bucket_policy(bucket: &str, region: &str, kms_key_arn: &str) -> String {
    let arn = format!("arn:{}:s3:::{bucket}/*", aws_stacks::names::partition(region));
    let mut policy: serde_json::Value =
        serde_json::from_str(&tls_only_policy(bucket, region)).unwrap_or_else(|_| serde_json::json!({"Statement": []}));
    if let Some(statements) = policy["Statement"].as_array_mut() {
        for (sid, key, value) in [
            ("DenyUploadsWithoutSseKms", "s3:x-amz-server-side-encryption", "aws:kms"),
            ("DenyUploadsWithAnotherKey", "s3:x-amz-server-side-encryption-aws-kms-key-id", kms_key_arn),
        ] {
            statements.push(serde_json::json!({
                "Sid": sid,
                "Effect": "Deny",
                "Principal": {"AWS": "*"},
                "Action": "s3:PutObject",
                "Resource": arn,
                "Condition": {"StringNotEquals": {key: value}}
            }));
        }
    }
    policy.to_string()
}

/// The access-log bucket's policy: [`tls_only_policy`]; S3's log delivery
/// (`logging.s3.amazonaws.com`) may put objects under the config bucket's prefix, for that bucket
/// of this account only; Elastic Load Balancing's log delivery of the region may put the load
/// balancers' logs of this account under `elb/AWSLogs/<account>/`. Log delivery is granted by policy, not by ACL: new buckets have Object
/// Ownership `BucketOwnerEnforced`, which disables ACLs (AWS's default since April 2023).
pub fn access_log_policy(logs: &str, source_bucket: &str, account_id: &str, region: &str) -> String {
    let partition = aws_stacks::names::partition(region);
    let mut policy: serde_json::Value =
        serde_json::from_str(&tls_only_policy(logs, region)).unwrap_or_else(|_| serde_json::json!({"Statement": []}));
    if let Some(statements) = policy["Statement"].as_array_mut() {
        statements.push(serde_json::json!({
            "Sid": "S3ServerAccessLogsPolicy",
            "Effect": "Allow",
            "Principal": {"Service": "logging.s3.amazonaws.com"},
            "Action": ["s3:PutObject"],
            "Resource": format!("arn:{partition}:s3:::{logs}/{source_bucket}/*"),
            "Condition": {
                "ArnLike": {"aws:SourceArn": format!("arn:{partition}:s3:::{source_bucket}")},
                "StringEquals": {"aws:SourceAccount": account_id}
            }
        }));
        statements.push(serde_json::json!({
            "Sid": "LoadBalancerAccessLogs",
            "Effect": "Allow",
            "Principal": aws_stacks::names::elb_log_delivery_principal(region),
            "Action": ["s3:PutObject"],
            "Resource": format!(
                "arn:{partition}:s3:::{logs}/{}/AWSLogs/{account_id}/*",
                aws_stacks::names::ELB_ACCESS_LOG_PREFIX
            ),
        }));
    }
    policy.to_string()
}

/// The cluster bucket and its access-log bucket, with default encryption, a TLS-only policy, a
/// public access block, access logging and a lifecycle on the logs (reference §7.2). The config
/// bucket is encrypted with the cluster's key (SSE-KMS with a bucket key) and refuses uploads
/// without it; the access-log bucket keeps SSE-S3, the only encryption S3 server access logs and
/// load balancer access logs are delivered to. Neither is versioned (as the original). Every
/// call is idempotent; the whole sequence runs again only when a bucket is missing. On buckets
/// that exist, the policies and the config bucket's encryption are read and put only when they
/// differ, so buckets of earlier versions get them and a settled cluster costs reads only. The
/// buckets are tagged unless `settings` say otherwise (regions without bucket tagging), and the
/// access logs' expiry follows `settings` on existing buckets too.
pub async fn ensure_buckets(
    aws: &AccountClients,
    cluster_id: &str,
    tags: &BTreeMap<String, String>,
    kms_key_arn: &str,
    settings: &crate::config::BucketSettings,
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
            // Buckets of earlier versions lack the load balancers' log delivery; the stacks'
            // access logging needs it before the load balancers are created or updated.
            ensure_policy(aws, &logs, access_log_policy(&logs, &bucket, &aws.account_id, &aws.region)).await?;
            ensure_encryption(aws, &bucket, kms_key_arn).await?;
            ensure_policy(aws, &bucket, config_bucket_policy(&bucket, &aws.region, kms_key_arn)).await?;
            ensure_log_expiration(aws, &logs, settings.access_log_expiration_days).await?;
            return Ok(bucket);
        }
    }
    for name in [&logs, &bucket] {
        create_bucket(aws, name).await?;
        if settings.tagging {
            put_tags(aws, name, tags).await?;
        }
        put_encryption(aws, name, (name == &bucket).then_some(kms_key_arn)).await?;
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
        let policy = if name == &logs {
            access_log_policy(&logs, &bucket, &aws.account_id, &aws.region)
        } else {
            config_bucket_policy(name, &aws.region, kms_key_arn)
        };
        put_policy(aws, name, policy).await?;
    }
    put_log_expiration(aws, &logs, settings.access_log_expiration_days).await?;
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

/// Make the tags of the cluster's two buckets `tags` (`GetBucketTagging`, then
/// `PutBucketTagging` where they differ; S3 replaces a bucket's whole tag set). Returns whether
/// anything changed.
pub async fn ensure_bucket_tags(
    aws: &AccountClients,
    cluster_id: &str,
    tags: &BTreeMap<String, String>,
) -> Result<bool, AwsError> {
    let mut changed = false;
    for bucket in [
        aws_stacks::names::bucket(&aws.account_id, cluster_id),
        aws_stacks::names::access_log_bucket(&aws.account_id, cluster_id),
    ] {
        let current: BTreeMap<String, String> = match aws.s3.get_bucket_tagging().bucket(&bucket).send().await {
            Ok(out) => out.tag_set().iter().map(|t| (t.key().to_string(), t.value().to_string())).collect(),
            Err(e) => {
                let e = api_error("S3", "GetBucketTagging", e);
                if e.code() != "NoSuchTagSet" {
                    return Err(e);
                }
                BTreeMap::new()
            }
        };
        if &current != tags {
            put_tags(aws, &bucket, tags).await?;
            changed = true;
        }
    }
    Ok(changed)
}

/// Put `tags` on bucket `bucket`.
async fn put_tags(aws: &AccountClients, bucket: &str, tags: &BTreeMap<String, String>) -> Result<(), AwsError> {
    let tagging = Tagging::builder()
        .set_tag_set(Some(tags.iter().filter_map(|(k, v)| S3Tag::builder().key(k).value(v).build().ok()).collect()))
        .build()
        .map_err(|e| AwsError::Setup(e.to_string()))?;
    aws.s3
        .put_bucket_tagging()
        .bucket(bucket)
        .tagging(tagging)
        .send()
        .await
        .map_err(|e| api_error("S3", "PutBucketTagging", e))?;
    Ok(())
}

/// The rule `ExpirationLogs` of the access-log bucket `logs`: its objects expire after `days`.
async fn put_log_expiration(aws: &AccountClients, logs: &str, days: i32) -> Result<(), AwsError> {
    let expire = LifecycleRule::builder()
        .id(LOG_EXPIRATION_RULE)
        .status(ExpirationStatus::Enabled)
        .filter(LifecycleRuleFilter::builder().prefix("").build())
        .expiration(LifecycleExpiration::builder().days(days).build())
        .build()
        .map_err(|e| AwsError::Setup(e.to_string()))?;
    aws.s3
        .put_bucket_lifecycle_configuration()
        .bucket(logs)
        .lifecycle_configuration(
            BucketLifecycleConfiguration::builder()
                .rules(expire)
                .build()
                .map_err(|e| AwsError::Setup(e.to_string()))?,
        )
        .send()
        .await
        .map_err(|e| api_error("S3", "PutBucketLifecycleConfiguration", e))?;
    Ok(())
}

/// Put the access logs' expiry on an existing access-log bucket when it differs from `days`
/// (the setting changed, or the rule was removed by hand).
async fn ensure_log_expiration(aws: &AccountClients, logs: &str, days: i32) -> Result<(), AwsError> {
    let current = match aws.s3.get_bucket_lifecycle_configuration().bucket(logs).send().await {
        Ok(out) => out
            .rules()
            .iter()
            .find(|r| r.id() == Some(LOG_EXPIRATION_RULE))
            .and_then(|r| r.expiration())
            .and_then(|e| e.days()),
        Err(e) => {
            let e = api_error("S3", "GetBucketLifecycleConfiguration", e);
            if e.code() != "NoSuchLifecycleConfiguration" {
                return Err(e);
            }
            None
        }
    };
    if current != Some(days) {
        put_log_expiration(aws, logs, days).await?;
    }
    Ok(())
}

/// Default encryption: SSE-KMS with `kms_key` and a bucket key, or SSE-S3 without one.
async fn put_encryption(aws: &AccountClients, bucket: &str, kms_key: Option<&str>) -> Result<(), AwsError> {
    let default = match kms_key {
        Some(key) => {
            ServerSideEncryptionByDefault::builder().sse_algorithm(ServerSideEncryption::AwsKms).kms_master_key_id(key)
        }
        None => ServerSideEncryptionByDefault::builder().sse_algorithm(ServerSideEncryption::Aes256),
    };
    let sse = ServerSideEncryptionConfiguration::builder()
        .rules(
            ServerSideEncryptionRule::builder()
                .apply_server_side_encryption_by_default(default.build().map_err(|e| AwsError::Setup(e.to_string()))?)
                .bucket_key_enabled(kms_key.is_some())
                .build(),
        )
        .build()
        .map_err(|e| AwsError::Setup(e.to_string()))?;
    aws.s3
        .put_bucket_encryption()
        .bucket(bucket)
        .server_side_encryption_configuration(sse)
        .send()
        .await
        .map(|_| ())
        .map_err(|e| api_error("S3", "PutBucketEncryption", e))
}

/// Put `policy` on `bucket` unless the bucket has it already (compared as JSON documents).
async fn ensure_policy(aws: &AccountClients, bucket: &str, policy: String) -> Result<(), AwsError> {
    let current = match aws.s3.get_bucket_policy().bucket(bucket).send().await {
        Ok(out) => out.policy().and_then(|p| serde_json::from_str::<serde_json::Value>(p).ok()),
        Err(e) => {
            let e = api_error("S3", "GetBucketPolicy", e);
            if e.code() != "NoSuchBucketPolicy" {
                return Err(e);
            }
            None
        }
    };
    if current.is_some() && current == serde_json::from_str::<serde_json::Value>(&policy).ok() {
        return Ok(());
    }
    put_policy(aws, bucket, policy).await
}

/// SSE-KMS with `kms_key` and a bucket key as `bucket`'s default encryption, put only when the
/// bucket has another.
async fn ensure_encryption(aws: &AccountClients, bucket: &str, kms_key: &str) -> Result<(), AwsError> {
    let current = match aws.s3.get_bucket_encryption().bucket(bucket).send().await {
        Ok(out) => out.server_side_encryption_configuration().and_then(|c| c.rules().first()).cloned(),
        Err(e) => {
            let e = api_error("S3", "GetBucketEncryption", e);
            if e.code() != "ServerSideEncryptionConfigurationNotFoundError" {
                return Err(e);
            }
            None
        }
    };
    let settled = current.is_some_and(|rule| {
        let default = rule.apply_server_side_encryption_by_default();
        default.is_some_and(|d| d.sse_algorithm() == &ServerSideEncryption::AwsKms)
            && default.and_then(|d| d.kms_master_key_id()) == Some(kms_key)
            && rule.bucket_key_enabled() == Some(true)
    });
    if settled { Ok(()) } else { put_encryption(aws, bucket, Some(kms_key)).await }
}

async fn put_policy(aws: &AccountClients, bucket: &str, policy: String) -> Result<(), AwsError> {
    aws.s3
        .put_bucket_policy()
        .bucket(bucket)
        .policy(policy)
        .send()
        .await
        .map(|_| ())
        .map_err(|e| api_error("S3", "PutBucketPolicy", e))
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

/// Upload an object with its content hash, encrypted as the bucket's default encryption says
/// (SSE-KMS with the cluster's key for the config bucket), named in the request's headers, which
/// the config bucket's policy requires.
pub async fn put_object(
    aws: &AccountClients,
    bucket: &str,
    key: &str,
    body: Vec<u8>,
    content_hash: &str,
    content_type: &str,
) -> Result<(), AwsError> {
    let encryption = aws
        .s3
        .get_bucket_encryption()
        .bucket(bucket)
        .send()
        .await
        .map_err(|e| api_error("S3", "GetBucketEncryption", e))?;
    let kms_key = encryption
        .server_side_encryption_configuration()
        .and_then(|c| c.rules().first())
        .and_then(|r| r.apply_server_side_encryption_by_default())
        .filter(|d| d.sse_algorithm() == &ServerSideEncryption::AwsKms)
        .and_then(|d| d.kms_master_key_id())
        .map(str::to_string);
    let mut request = aws.s3.put_object();
    if let Some(kms_key) = kms_key {
        request = request
            .server_side_encryption(ServerSideEncryption::AwsKms)
            .ssekms_key_id(kms_key)
            .bucket_key_enabled(true);
    }
    request
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

/// The issuer bucket's policy, over TLS only: its objects are readable by `reader`, anyone (AWS
/// STS fetches the issuer's documents without credentials from a bucket S3 serves), or the
/// CloudFront distribution in front of it only: through its origin access control (the
/// CloudFront service principal, for requests of that distribution, `AWS:SourceArn`), or through
/// the original's origin access identity.
pub fn issuer_bucket_policy(bucket: &str, region: &str, reader: &IssuerReader) -> String {
    let mut policy: serde_json::Value =
        serde_json::from_str(&tls_only_policy(bucket, region)).expect("the TLS-only policy is JSON");
    let objects = format!("arn:{}:s3:::{bucket}/*", aws_stacks::names::partition(region));
    let read = match reader {
        IssuerReader::Anyone => serde_json::json!({
            "Sid": "PublicReadOfTheServiceAccountIssuer",
            "Effect": "Allow",
            "Principal": "*",
            "Action": "s3:GetObject",
            "Resource": objects,
        }),
        IssuerReader::Distribution { arn } => serde_json::json!({
            "Sid": "CloudFrontReadOfTheServiceAccountIssuer",
            "Effect": "Allow",
            "Principal": {"Service": "cloudfront.amazonaws.com"},
            "Action": "s3:GetObject",
            "Resource": objects,
            "Condition": {"StringEquals": {"AWS:SourceArn": arn}},
        }),
        IssuerReader::OriginAccessIdentity { id } => serde_json::json!({
            "Sid": "CloudFrontReadOfTheServiceAccountIssuer",
            "Effect": "Allow",
            "Principal": {"AWS": format!("arn:aws:iam::cloudfront:user/CloudFront Origin Access Identity {id}")},
            "Action": "s3:GetObject",
            "Resource": objects,
        }),
    };
    if let Some(statements) = policy["Statement"].as_array_mut() {
        statements.push(read);
    }
    policy.to_string()
}

/// The issuer bucket's public access block: ACLs blocked and ignored; public policies allowed
/// only when `reader` is anyone. Put only when the bucket's differs (a restarted operator
/// writes nothing to a settled bucket).
async fn put_issuer_access_block(aws: &AccountClients, bucket: &str, reader: &IssuerReader) -> Result<(), AwsError> {
    let private = *reader != IssuerReader::Anyone;
    let current = match aws.s3.get_public_access_block().bucket(bucket).send().await {
        Ok(out) => out.public_access_block_configuration().map(|c| {
            (c.block_public_acls(), c.ignore_public_acls(), c.block_public_policy(), c.restrict_public_buckets())
        }),
        Err(e) => {
            let e = api_error("S3", "GetPublicAccessBlock", e);
            if e.code() != "NoSuchPublicAccessBlockConfiguration" {
                return Err(e);
            }
            None
        }
    };
    if current == Some((Some(true), Some(true), Some(private), Some(private))) {
        return Ok(());
    }
    aws.s3
        .put_public_access_block()
        .bucket(bucket)
        .public_access_block_configuration(
            PublicAccessBlockConfiguration::builder()
                .block_public_acls(true)
                .ignore_public_acls(true)
                .block_public_policy(private)
                .restrict_public_buckets(private)
                .build(),
        )
        .send()
        .await
        .map(|_| ())
        .map_err(|e| api_error("S3", "PutPublicAccessBlock", e))
}

/// The bucket of a cluster's service-account issuer (`aws_stacks::irsa::bucket`): SSE-S3 (an
/// anonymous reader cannot use a KMS key), objects readable by `reader` through
/// [`issuer_bucket_policy`], ACLs blocked and ignored, public access blocked unless `reader` is
/// anyone; tagged unless `settings` say otherwise, as the cluster buckets. Every call is
/// idempotent; the creation sequence runs when the bucket is missing. The access block and the
/// policy are put in the order that never leaves a public policy in force for a private reader:
/// for anyone, the block is relaxed before the policy; else the policy goes first.
pub async fn ensure_issuer_bucket(
    aws: &AccountClients,
    bucket: &str,
    tags: &BTreeMap<String, String>,
    settings: &crate::config::BucketSettings,
    reader: &IssuerReader,
) -> Result<(), AwsError> {
    if !bucket_exists(aws, bucket).await? {
        create_bucket(aws, bucket).await?;
        if settings.tagging {
            put_tags(aws, bucket, tags).await?;
        }
        put_encryption(aws, bucket, None).await?;
    }
    let policy = issuer_bucket_policy(bucket, &aws.region, reader);
    if *reader == IssuerReader::Anyone {
        put_issuer_access_block(aws, bucket, reader).await?;
        ensure_policy(aws, bucket, policy).await
    } else {
        ensure_policy(aws, bucket, policy).await?;
        put_issuer_access_block(aws, bucket, reader).await
    }
}

/// Upload a public document of the issuer unless the object there has its content hash.
/// Returns `true` when it uploaded.
pub async fn ensure_public_object(
    aws: &AccountClients,
    bucket: &str,
    key: &str,
    body: Vec<u8>,
    content_type: &str,
) -> Result<bool, AwsError> {
    use sha2::Digest as _;
    let hash = format!("{:x}", sha2::Sha256::digest(&body));
    if object_hash(aws, bucket, key).await?.as_deref() == Some(hash.as_str()) {
        return Ok(false);
    }
    aws.s3
        .put_object()
        .bucket(bucket)
        .key(key)
        .content_type(content_type)
        .metadata(CONTENT_HASH_METADATA, &hash)
        .body(ByteStream::from(body))
        .send()
        .await
        .map_err(|e| api_error("S3", "PutObject", e))?;
    Ok(true)
}

/// Empty and delete the cluster bucket, its log bucket and its service-account issuer's bucket
/// (`aws_stacks::irsa::bucket`). Returns `false` while objects remain
/// after three rounds (the caller keeps its finalizer and comes back).
pub async fn delete_buckets(aws: &AccountClients, cluster_id: &str) -> Result<bool, AwsError> {
    let bucket = aws_stacks::names::bucket(&aws.account_id, cluster_id);
    let logs = aws_stacks::names::access_log_bucket(&aws.account_id, cluster_id);
    // The service-account issuer's bucket (IAM roles for service accounts), where there is one.
    let issuer = aws_stacks::irsa::bucket(&aws.account_id, cluster_id);
    for name in [&issuer, &bucket, &logs] {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_delivery_is_granted_by_policy_for_the_config_bucket_only() {
        let policy: serde_json::Value =
            serde_json::from_str(&access_log_policy("l1", "b1", "123456789012", "cn-north-1")).expect("JSON");
        assert_eq!(policy["Statement"][0]["Sid"], "DenyInsecureTransport");
        let delivery = &policy["Statement"][1];
        assert_eq!(delivery["Principal"]["Service"], "logging.s3.amazonaws.com");
        assert_eq!(delivery["Action"], serde_json::json!(["s3:PutObject"]));
        assert_eq!(delivery["Resource"], "arn:aws-cn:s3:::l1/b1/*");
        assert_eq!(delivery["Condition"]["ArnLike"]["aws:SourceArn"], "arn:aws-cn:s3:::b1");
        assert_eq!(delivery["Condition"]["StringEquals"]["aws:SourceAccount"], "123456789012");
        let elb = &policy["Statement"][2];
        assert_eq!(elb["Principal"]["AWS"], "arn:aws-cn:iam::638102146993:root");
        assert_eq!(elb["Action"], serde_json::json!(["s3:PutObject"]));
        assert_eq!(elb["Resource"], "arn:aws-cn:s3:::l1/elb/AWSLogs/123456789012/*");
    }

    #[test]
    fn the_config_bucket_refuses_uploads_without_the_clusters_key() {
        let key = "arn:aws:kms:eu-central-1:123456789012:key/k1";
        let policy: serde_json::Value =
            serde_json::from_str(&config_bucket_policy("b1", "eu-central-1", key)).expect("JSON");
        assert_eq!(policy["Statement"][0]["Sid"], "DenyInsecureTransport");
        for (statement, condition) in [
            (&policy["Statement"][1], serde_json::json!({"s3:x-amz-server-side-encryption": "aws:kms"})),
            (&policy["Statement"][2], serde_json::json!({"s3:x-amz-server-side-encryption-aws-kms-key-id": key})),
        ] {
            assert_eq!(statement["Effect"], "Deny");
            assert_eq!(statement["Action"], "s3:PutObject");
            assert_eq!(statement["Resource"], "arn:aws:s3:::b1/*");
            assert_eq!(statement["Condition"]["StringNotEquals"], condition);
        }
    }

    #[test]
    fn the_issuer_bucket_is_readable_by_the_distribution_only_when_cloudfront_fronts_it() {
        let arn = "arn:aws:cloudfront::123456789012:distribution/E1";
        let policy: serde_json::Value = serde_json::from_str(&issuer_bucket_policy(
            "b1",
            "eu-central-1",
            &IssuerReader::Distribution { arn: arn.into() },
        ))
        .expect("JSON");
        assert_eq!(policy["Statement"][0]["Sid"], "DenyInsecureTransport");
        let read = &policy["Statement"][1];
        assert_eq!(read["Principal"], serde_json::json!({"Service": "cloudfront.amazonaws.com"}));
        assert_eq!(read["Condition"]["StringEquals"]["AWS:SourceArn"], arn);
        assert_eq!(read["Resource"], "arn:aws:s3:::b1/*");
        assert!(!policy.to_string().contains("\"Principal\":\"*\""), "no public statement: {policy}");
        let oai: serde_json::Value = serde_json::from_str(&issuer_bucket_policy(
            "b1",
            "eu-central-1",
            &IssuerReader::OriginAccessIdentity { id: "E2IB".into() },
        ))
        .expect("JSON");
        assert_eq!(
            oai["Statement"][1]["Principal"]["AWS"],
            "arn:aws:iam::cloudfront:user/CloudFront Origin Access Identity E2IB"
        );
        let public: serde_json::Value =
            serde_json::from_str(&issuer_bucket_policy("b1", "cn-north-1", &IssuerReader::Anyone)).expect("JSON");
        assert_eq!(public["Statement"][1]["Principal"], "*");
        assert_eq!(public["Statement"][1]["Resource"], "arn:aws-cn:s3:::b1/*");
    }

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

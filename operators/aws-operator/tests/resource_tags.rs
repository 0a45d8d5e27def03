//! A cluster's cloud tags (labels `tag.provider.giantswarm.io/<key>`, on the AWSCluster or its
//! Cluster API `Cluster`) on the resources the operator creates itself, the KMS key and the two
//! buckets, read back through KMS ListResourceTags and S3 GetBucketTagging; a change of the labels
//! updates them in place: a new value replaces the old one, a removed label removes its tag.

mod support;

use std::collections::BTreeMap;

use apis::aws::AWSCluster;
use aws_operator::aws::AccountClients;
use kube::Api;
use kube::api::{Patch, PatchParams};
use support::*;

const ID: &str = "tags1";

/// The tags of the cluster key and of each of the cluster's buckets.
async fn tags(tenant: &AccountClients) -> anyhow::Result<Vec<BTreeMap<String, String>>> {
    let key = tenant.kms.describe_key().key_id(aws_stacks::names::kms_alias(ID)).send().await?;
    let key_id = key.key_metadata().map(|m| m.key_id().to_string()).expect("the cluster key");
    let listed = tenant.kms.list_resource_tags().key_id(&key_id).send().await?;
    let mut all = vec![listed.tags().iter().map(|t| (t.tag_key().to_string(), t.tag_value().to_string())).collect()];
    for bucket in [
        aws_stacks::names::bucket(&tenant.account_id, ID),
        aws_stacks::names::access_log_bucket(&tenant.account_id, ID),
    ] {
        let tagging = tenant.s3.get_bucket_tagging().bucket(&bucket).send().await?;
        all.push(tagging.tag_set().iter().map(|t| (t.key().to_string(), t.value().to_string())).collect());
    }
    Ok(all)
}

fn cloud(tags: &BTreeMap<String, String>) -> BTreeMap<&str, &str> {
    ["cost-center", "team"].into_iter().filter_map(|k| Some((k, tags.get(k)?.as_str()))).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cloud_tags_reach_the_key_and_the_buckets_and_follow_a_change_in_place() -> anyhow::Result<()> {
    let mut f = Fixture::start().await?;
    f.apply_basics().await?;
    f.credential_secret(ID).await?;
    f.cluster(ID).await?;
    let clusters: Api<AWSCluster> = Api::namespaced(f.client.clone(), NS);
    let label = |value: Option<&str>, team: Option<&str>| {
        serde_json::json!({"metadata": {"labels": {
            "tag.provider.giantswarm.io/cost-center": value,
            "tag.provider.giantswarm.io/team": team,
        }}})
    };
    clusters.patch(ID, &PatchParams::default(), &Patch::Merge(label(Some("blue"), Some("ops")))).await?;
    f.control_plane(ID, "cp001", &["eu-central-1a"], 1).await?;
    f.start_operator().await?;
    let tenant = f.tenant_clients().await?;

    let first = eventually(240, "the key and buckets to carry the cloud tags", || async {
        let all = match tags(&tenant).await {
            Ok(all) => all,
            Err(_) => return Ok(None),
        };
        Ok(all.iter().all(|t| cloud(t) == BTreeMap::from([("cost-center", "blue"), ("team", "ops")])).then_some(all))
    })
    .await;
    let first = match first {
        Ok(all) => all,
        Err(e) => anyhow::bail!("{e}\n{}", dump(&f.client).await),
    };
    // Beside the operator's own tags.
    for t in &first {
        assert_eq!(t.get("giantswarm.io/cluster").map(String::as_str), Some(ID), "{t:?}");
    }

    // A changed value and a removed label: updated in place on the same key and buckets.
    clusters.patch(ID, &PatchParams::default(), &Patch::Merge(label(Some("red"), None))).await?;
    let changed = eventually(240, "the key and buckets to follow the labels", || async {
        let all = tags(&tenant).await?;
        Ok(all.iter().all(|t| cloud(t) == BTreeMap::from([("cost-center", "red")])).then_some(all))
    })
    .await;
    if let Err(e) = changed {
        anyhow::bail!("{e}: {:?}\n{}", tags(&tenant).await?, dump(&f.client).await);
    }
    let keys = tenant.kms.list_aliases().send().await?;
    let cluster_aliases =
        keys.aliases().iter().filter(|a| a.alias_name() == Some(&aws_stacks::names::kms_alias(ID))).count();
    assert_eq!(cluster_aliases, 1, "the same key, not a new one");
    f.kill_operator().await;
    Ok(())
}

//! A legacy cluster (`AWSConfig`) whose operator is killed ten times while it creates the
//! cluster, each time at an AWS write no earlier run reached (moto has received it and may not
//! have answered), converges once the operator runs on: `Created`, with exactly one of each
//! stack (CloudFormation's `ListStacks`, deleted stacks included, and the `CreateStack` calls in
//! moto's request log), one key and alias, its two buckets, one VPC and one of each Secret.
//! Killed again while the cluster is deleted, the operator still deletes everything and
//! releases the finalizers.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use apis::aws_config::AWSConfig;
use aws_stacks::stacks::legacy::{self, LegacyStack};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{DeleteParams, ListParams};
use kube::{Api, ResourceExt};
use support::crash::*;
use support::legacy::*;
use support::*;

/// How long a run may go without a new write before it is killed anyway.
const PATIENCE: Duration = Duration::from_secs(20);

/// The Secrets of cluster `id` in the fixture's namespace: name → finalizers.
async fn cluster_secrets(f: &Fixture, id: &str) -> anyhow::Result<BTreeMap<String, Vec<String>>> {
    let secrets: Api<Secret> = Api::namespaced(f.client.clone(), NS);
    let listed = secrets.list(&ListParams::default().labels(&format!("giantswarm.io/cluster={id}"))).await?;
    Ok(listed.items.into_iter().map(|s| (s.name_any(), s.finalizers().to_vec())).collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_cluster_killed_ten_times_during_creation_converges_without_duplicates_and_deletes_cleanly()
-> anyhow::Result<()> {
    let mut f = Fixture::start().await?;
    f.apply_basics().await?;
    let id = "lcrash";
    f.credential_secret(id).await?;
    let cp = f.control_plane_clients().await?;
    let tenant = f.tenant_clients().await?;
    // The installation's zone: host-main delegates the cluster zone from it, one write more.
    let parent_zone = installation_zone(&cp).await?;
    let config = legacy_cluster(&f, id).await?;
    apply(&f, &config).await?;
    let api: Api<AWSConfig> = Api::namespaced(f.client.clone(), NS);

    let created_already =
        async |f: &Fixture| Ok(is_created(&Api::<AWSConfig>::namespaced(f.client.clone(), NS).get(id).await?));
    let kills = kill_during_work(&mut f, 10, 3, PATIENCE, created_already).await?;
    // Every kill at a write cut the creation short and every kill before the last stack landed
    // at a new write; the kills timed after a restart (once no new write is left) may come after
    // a fast creation finished, but most kills land during it. Each stage had its kills.
    let timed = |k: &&Kill| k.at.ends_with("after the start");
    let late: Vec<_> =
        kills.iter().filter(|k| !timed(k)).filter(|k| k.after_the_work || k.at.starts_with("no new write")).collect();
    assert!(late.is_empty(), "each kill at a write lands during the creation: {kills:#?}");
    let during = kills.iter().filter(|k| !k.after_the_work).count();
    assert!(during >= 7, "at least seven of the ten kills land during the creation: {kills:#?}");
    for stage in 0..3 {
        assert!(kills.iter().any(|k| k.stack_operations == stage), "a kill with {stage} stacks created: {kills:#?}");
    }

    f.start_operator().await?;
    let created = match wait_created(&f, id, 180).await {
        Ok(c) => c,
        Err(e) => anyhow::bail!("{e}\nkills: {kills:#?}"),
    };
    println!("legacy cluster {id} Created after ten kills, at: {kills:#?}");

    // One of each stack: live, and in everything CloudFormation ever listed (a stack created
    // twice would show a deleted copy), and one successful CreateStack each in moto's log.
    let name = |stack| legacy::stack_name(id, stack);
    assert_eq!(live_stacks(&cp).await?, [name(LegacyStack::HostMain), name(LegacyStack::HostSetup)]);
    assert_eq!(live_stacks(&tenant).await?, [name(LegacyStack::GuestMain)]);
    let once = |status: &str| vec![status.to_string()];
    assert_eq!(
        listed_stacks(&cp).await?,
        BTreeMap::from([
            (name(LegacyStack::HostMain), once("CREATE_COMPLETE")),
            (name(LegacyStack::HostSetup), once("CREATE_COMPLETE")),
        ]),
        "the management account's stacks, deleted ones included"
    );
    assert_eq!(
        listed_stacks(&tenant).await?,
        BTreeMap::from([(name(LegacyStack::GuestMain), once("CREATE_COMPLETE"))]),
        "the cluster account's stacks, deleted ones included"
    );
    let log = request_log(&f).await?;
    assert_eq!(
        stack_creates(&log),
        BTreeMap::from([(cp.account_id.clone(), 2), (tenant.account_id.clone(), 1)]),
        "one CreateStack per stack"
    );
    let mut recorded: Vec<_> = created.status.iter().flat_map(|s| &s.stacks).map(|s| s.name.clone()).collect();
    recorded.sort();
    assert_eq!(recorded, [name(LegacyStack::GuestMain), name(LegacyStack::HostMain), name(LegacyStack::HostSetup)]);

    // One key (a CreateKey cut short leaves a key that a later run schedules for deletion), one
    // alias, the two buckets, one VPC.
    let (usable, detail) = usable_cluster_keys(&tenant, id).await?;
    assert_eq!(usable, 1, "exactly one usable key: {detail:#?}");
    assert_eq!(cluster_key_aliases(&tenant, id).await?, 1);
    let bucket = aws_stacks::names::bucket(&tenant.account_id, id);
    let logs_bucket = aws_stacks::names::access_log_bucket(&tenant.account_id, id);
    let mut buckets: Vec<String> =
        tenant.s3.list_buckets().send().await?.buckets().iter().filter_map(|b| b.name().map(str::to_string)).collect();
    buckets.sort();
    assert_eq!(buckets, [bucket.clone(), logs_bucket.clone()]);
    let vpcs = cluster_vpcs(&tenant, id).await?;
    assert_eq!(vpcs.len(), 1, "one VPC for the cluster: {vpcs:?}");

    // One of each Secret: each certificate and certificate authority under its own name, every
    // certificate signed by an authority that is there (an authority issued again after a kill
    // would leave certificates of the old one), each held by the operator.
    let secrets: Api<Secret> = Api::namespaced(f.client.clone(), NS);
    let listed = secrets.list(&ListParams::default().labels(&format!("giantswarm.io/cluster={id}"))).await?;
    let mut by_certificate: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut by_authority: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut authorities = Vec::new();
    for s in &listed.items {
        let data = s.data.clone().unwrap_or_default();
        if let Some(cert) = s.labels().get("giantswarm.io/certificate") {
            by_certificate.entry(cert.clone()).or_default().push(s.name_any());
        }
        if let Some(authority) = s.labels().get("giantswarm.io/certificate-authority") {
            by_authority.entry(authority.clone()).or_default().push(s.name_any());
            authorities.extend(data.get("crt").cloned());
        }
    }
    let duplicated: Vec<_> = by_certificate.iter().chain(&by_authority).filter(|(_, n)| n.len() > 1).collect();
    assert!(duplicated.is_empty(), "one Secret per certificate and authority: {duplicated:?}");
    for cert in ["api", "etcd", "worker", "service-account"] {
        assert!(by_certificate.contains_key(cert), "the {cert} certificate: {by_certificate:?}");
    }
    assert_eq!(by_authority.keys().collect::<Vec<_>>(), ["cluster", "etcd"], "the two authorities");
    for s in listed.items.iter().filter(|s| s.labels().contains_key("giantswarm.io/certificate")) {
        let ca = s.data.as_ref().and_then(|d| d.get("ca"));
        assert!(ca.is_some_and(|ca| authorities.contains(ca)), "{} is signed by an authority there is", s.name_any());
    }
    // The Secrets the node configs are built from are held by the operator, each once.
    let held = cluster_secrets(&f, id).await?;
    let finalizer = aws_operator::context::SECRET_FINALIZER.to_string();
    for (secret, finalizers) in &held {
        let used =
            secret.ends_with("-encryption-provider-config") || by_certificate.values().flatten().any(|n| n == secret);
        let expected = if used { vec![finalizer.clone()] } else { vec![] };
        assert_eq!(finalizers, &expected, "the finalizers of Secret {secret}");
    }

    // Deleting, killed three more times at new writes: everything goes and the finalizers are
    // released.
    api.delete(id, &DeleteParams::default()).await?;
    f.kill_operator().await;
    let gone_already =
        async |f: &Fixture| Ok(Api::<AWSConfig>::namespaced(f.client.clone(), NS).get_opt(id).await?.is_none());
    let deletion_kills = kill_during_work(&mut f, 3, 3, PATIENCE, gone_already).await?;
    let late: Vec<_> = deletion_kills.iter().filter(|k| k.after_the_work).collect();
    assert!(late.is_empty(), "each kill lands during the deletion: {deletion_kills:#?}");
    f.start_operator().await?;
    let gone =
        eventually(180, "the AWSConfig to be gone", || async { Ok(api.get_opt(id).await?.is_none().then_some(())) })
            .await;
    if let Err(e) = gone {
        let left = api.get_opt(id).await?.map(|c| serde_json::to_string(&c.status).unwrap_or_default());
        anyhow::bail!("{e}\n{left:?}\nkills during the deletion: {deletion_kills:#?}\n{}", dump(&f.client).await);
    }
    assert!(live_stacks(&cp).await?.is_empty(), "host-setup and host-main are deleted");
    assert!(live_stacks(&tenant).await?.is_empty(), "guest-main is deleted");
    for (aws, stacks) in
        [(&cp, [LegacyStack::HostMain, LegacyStack::HostSetup].as_slice()), (&tenant, &[LegacyStack::GuestMain])]
    {
        let listed = listed_stacks(aws).await?;
        let expected: BTreeMap<_, _> = stacks.iter().map(|s| (name(*s), once("DELETE_COMPLETE"))).collect();
        assert_eq!(listed, expected, "each stack created once and deleted once");
    }
    assert!(cluster_vpcs(&tenant, id).await?.is_empty(), "the VPC is gone");
    for b in [&bucket, &logs_bucket] {
        assert!(tenant.s3.head_bucket().bucket(b).send().await.is_err(), "bucket {b} is gone");
    }
    let (usable, detail) = usable_cluster_keys(&tenant, id).await?;
    assert_eq!(usable, 0, "the key is scheduled for deletion: {detail:#?}");
    let cluster_zone = format!("{id}.k8s.{ZONE}");
    assert_eq!(aws_operator::aws::route53::ns_record(&cp, &parent_zone, &cluster_zone).await?, None);
    let held = cluster_secrets(&f, id).await?;
    assert!(held.values().all(Vec::is_empty), "no Secret of the cluster is held: {held:#?}");
    let credential = Api::<Secret>::namespaced(f.client.clone(), "giantswarm").get(&format!("credential-{id}")).await?;
    assert!(credential.finalizers().is_empty(), "the credential Secret is released: {:?}", credential.finalizers());
    f.kill_operator().await;
    Ok(())
}

//! Two replicas of the operator on one testenv and one moto, electing a leader on the Lease of
//! their version. Takeovers are forced while the cluster is being created, by cutting the
//! leader's link to the API server (its AWS access stays up, as in a partial network
//! partition). Each replica signs with its own access key id, so moto's request log tells their
//! calls apart: every AWS write must come from the leader of that moment, and the cluster must
//! end up complete, without duplicates.

mod support;

use std::sync::Arc;
use std::time::Duration;

use apis::aws::AWSCluster;
use aws_credential_types::Credentials;
use aws_operator::aws::{AwsFactory, AwsSettings};
use aws_operator::context::Shared;
use aws_operator::daemon;
use aws_operator::drift::DriftState;
use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use kube::runtime::watcher;
use operatorkit::Leadership;
use operatorkit::RunSettings;
use operatorkit::leader::{LeaderElectionConfig, LeaderElector};
use parking_lot::Mutex;
use prometheus_client::registry::Registry;
use support::*;
use testenv::Link;
use tokio_util::sync::CancellationToken;

const LEASE_NS: &str = "giantswarm";

/// One replica: its own elector (reaching the API server through a link the test can cut), its
/// own AWS credentials, caches and controllers.
struct Replica {
    identity: &'static str,
    key: &'static str,
    leadership: Leadership,
    link: Link,
    stop: CancellationToken,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Replica {
    async fn start(f: &Fixture, identity: &'static str, key: &'static str) -> anyhow::Result<Replica> {
        let link = Link::start(f.env.handle().addr()).await?;
        let election = LeaderElectionConfig {
            identity: identity.to_string(),
            lease_duration: Duration::from_secs(4),
            renew_deadline: Duration::from_millis(2500),
            retry_period: Duration::from_millis(500),
            ..LeaderElectionConfig::new(LEASE_NS, daemon::lease_name(VERSION))
        };
        let elector = LeaderElector::new(link.client(LEASE_NS)?, election)?;
        let leadership = elector.leadership();
        let settings = AwsSettings {
            credentials: Some(Credentials::new(key, "secret", None, None, "test")),
            ..factory_settings(&f.moto, &f.cp_account)
        };
        let aws = AwsFactory::new(settings).await?.gated_by(leadership.clone());
        let mut registry = Registry::default();
        let metrics = operatorkit::Metrics::new(&mut registry);
        let shared: Arc<Shared> = Shared::new(
            leadership.gate(f.client.clone()),
            aws,
            operator_config(f.installation.clone()),
            Fixture::amis(),
            &mut registry,
        );
        let drift_state = DriftState::new(&mut registry, &shared.config.drift);
        let stop = CancellationToken::new();
        let settings = RunSettings {
            concurrency: 4,
            resync: Duration::from_secs(300),
            leadership: leadership.clone(),
            sharding: None,
        };
        let (election_stop, controllers_stop) = (stop.clone(), stop.clone());
        let tasks = vec![
            tokio::spawn(async move {
                let _ = elector.run(election_stop).await;
            }),
            tokio::spawn(async move {
                let readiness = operatorkit::Readiness::new();
                if let Err(e) = daemon::run(shared, drift_state, &metrics, &readiness, settings, controllers_stop).await
                {
                    eprintln!("{identity} stopped: {e:#}");
                }
            }),
        ];
        Ok(Replica { identity, key, leadership, link, stop, tasks })
    }

    async fn stop(self) {
        self.stop.cancel();
        for task in self.tasks {
            let _ = tokio::time::timeout(Duration::from_secs(60), task).await;
        }
    }
}

/// One leadership term as the Lease recorded it: the holder, and when it acquired the lease
/// (seconds since the epoch, written by the holder before it started leading).
#[derive(Clone, Debug)]
struct Term {
    holder: String,
    acquired: f64,
}

/// Follow the Lease and record every change of holder (or re-acquisition).
fn record_terms(client: kube::Client, terms: Arc<Mutex<Vec<Term>>>) -> tokio::task::JoinHandle<()> {
    let api: Api<Lease> = Api::namespaced(client, LEASE_NS);
    let config = watcher::Config::default().fields(&format!("metadata.name={}", daemon::lease_name(VERSION)));
    tokio::spawn(async move {
        let mut events = std::pin::pin!(watcher::watcher(api, config));
        while let Some(event) = events.next().await {
            let leases = match event {
                Ok(watcher::Event::Apply(lease) | watcher::Event::InitApply(lease)) => vec![lease],
                _ => continue,
            };
            for lease in leases {
                let spec = lease.spec.unwrap_or_default();
                let (Some(holder), Some(acquired)) = (spec.holder_identity, spec.acquire_time) else { continue };
                let acquired = acquired.0.as_microsecond() as f64 / 1e6;
                let mut terms = terms.lock();
                if terms.last().is_none_or(|t| t.holder != holder || t.acquired != acquired) {
                    terms.push(Term { holder, acquired });
                }
            }
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn only_the_leader_of_the_moment_writes_to_aws_across_takeovers() -> anyhow::Result<()> {
    let f = Fixture::start().await?;
    f.apply_basics().await?;
    let id = "rep01";
    f.credential_secret(id).await?;
    let terms = Arc::new(Mutex::new(Vec::new()));
    let recorder = record_terms(f.client.clone(), terms.clone());
    let replicas = [
        Replica::start(&f, "replica-a", "AKIAREPLICAA").await?,
        Replica::start(&f, "replica-b", "AKIAREPLICAB").await?,
    ];
    f.cluster(id).await?;
    f.control_plane(id, "cp001", &["eu-central-1a"], 1).await?;
    f.node_pool(id, "np001", &["eu-central-1a"], 1, 3).await?;

    let writes_of = |key: &str| -> anyhow::Result<usize> {
        Ok(f.moto.request_log()?.iter().filter(|r| r.principal == key && r.is_write()).count())
    };
    let leader = || replicas.iter().position(|r| r.leadership.is_leader());
    const ROUNDS: usize = 3;
    let mut takeovers = 0;
    for round in 0..ROUNDS {
        let current = eventually(60, "a leader", || async { Ok(leader()) }).await?;
        let (from, to) = (&replicas[current], &replicas[1 - current]);
        // Cut the leader off in the middle of its work: once it has written to AWS this term.
        // The first leader must write; a later one may find nothing left to write (creation can
        // be complete, or waiting on CloudFormation, by then), and is cut off all the same.
        let before = writes_of(from.key)?;
        let wrote = eventually(
            if round == 0 { 120 } else { 45 },
            &format!("round {round}: {} writes to AWS", from.identity),
            || async { Ok((writes_of(from.key)? > before).then_some(())) },
        )
        .await;
        if round == 0 {
            wrote?;
        }
        from.link.set_cut(true);
        eventually(60, &format!("round {round}: {} takes over", to.identity), || async {
            Ok(to.leadership.is_leader().then_some(()))
        })
        .await?;
        from.link.set_cut(false);
        takeovers += 1;
    }

    let clusters: Api<AWSCluster> = Api::namespaced(f.client.clone(), NS);
    if let Err(e) = eventually(300, "the cluster to be Ready", || async {
        let c = clusters.get(id).await?;
        Ok(ready(c.status.as_ref().map(|s| &s.conditions)).then_some(()))
    })
    .await
    {
        anyhow::bail!("{e}\n{}", dump(&f.client).await);
    }
    let created_by = [writes_of(replicas[0].key)?, writes_of(replicas[1].key)?];
    for replica in replicas {
        replica.stop().await;
    }
    recorder.abort();

    // Every write arrived during a term of the replica that sent it.
    let terms = terms.lock().clone();
    let identity_of = |key: &str| match key {
        "AKIAREPLICAA" => "replica-a",
        "AKIAREPLICAB" => "replica-b",
        _ => "",
    };
    let log = f.moto.request_log()?;
    let writes: Vec<_> = log.iter().filter(|r| r.is_write() && !identity_of(&r.principal).is_empty()).collect();
    let misplaced: Vec<String> = writes
        .iter()
        .filter_map(|w| {
            let term = terms.iter().rev().find(|t| t.acquired <= w.time);
            let holder = term.map_or("nobody", |t| t.holder.as_str());
            (holder != identity_of(&w.principal))
                .then(|| format!("{} {} at {:.3} while {holder} led", w.principal, w.action, w.time))
        })
        .collect();
    assert!(misplaced.is_empty(), "writes outside their sender's term: {misplaced:#?}\nterms: {terms:#?}");
    assert_eq!(takeovers, ROUNDS);
    let holders: std::collections::BTreeSet<&str> = terms.iter().map(|t| t.holder.as_str()).collect();
    assert_eq!(holders.len(), 2, "both replicas led: {terms:?}");
    // The first leader always writes; whether a later one finds anything left to write depends on
    // how far creation got within the first term, so it is not asserted.
    assert!(created_by[0] + created_by[1] > 0, "the replicas wrote to AWS: {created_by:?}");

    // No duplicates: one of everything the cluster needs, in each account.
    let tenant = f.tenant_clients().await?;
    let cp = f.control_plane_clients().await?;
    let mut tenant_stacks: Vec<String> = tenant.cfn.describe_all().await?.into_iter().map(|s| s.name).collect();
    tenant_stacks.sort();
    assert_eq!(
        tenant_stacks,
        [format!("cluster-{id}-tccp"), format!("cluster-{id}-tccpn"), format!("cluster-{id}-tcnp-np001")]
    );
    let mut cp_stacks: Vec<String> = cp.cfn.describe_all().await?.into_iter().map(|s| s.name).collect();
    cp_stacks.sort();
    assert_eq!(
        cp_stacks,
        [format!("cluster-{id}-tccpf"), format!("cluster-{id}-tccpi"), format!("cluster-{id}-tcnpf-np001")]
    );
    let groups = tenant.autoscaling.describe_auto_scaling_groups().send().await?;
    assert_eq!(groups.auto_scaling_groups().len(), 2, "one group for the master, one for the pool");
    let keys = tenant.kms.list_aliases().send().await?;
    let aliases: Vec<&str> = keys.aliases().iter().filter_map(|a| a.alias_name()).filter(|a| a.contains(id)).collect();
    assert_eq!(aliases.len(), 1, "{aliases:?}");
    // Keys pending deletion are not the cluster's: KMS has no idempotency token, so a key whose
    // creation was cut short is swept (scheduled for deletion) once the cluster key is known.
    // The key AWS manages for EBS (`alias/aws/ebs`, made when the first encrypted volume is) is
    // not the operator's.
    let aws_managed: Vec<&str> = keys
        .aliases()
        .iter()
        .filter(|a| a.alias_name().is_some_and(|n| n.starts_with("alias/aws/")))
        .filter_map(|a| a.target_key_id())
        .collect();
    let mut live_keys = Vec::new();
    for key in tenant.kms.list_keys().send().await?.keys() {
        let id = key.key_id().unwrap_or_default();
        if aws_managed.contains(&id) {
            continue;
        }
        let described = tenant.kms.describe_key().key_id(id).send().await?;
        if described.key_metadata().is_some_and(|m| m.deletion_date().is_none()) {
            live_keys.push(id.to_string());
        }
    }
    let kms_calls: Vec<String> = log
        .iter()
        .filter(|r| r.service == "kms")
        .map(|r| format!("{:.3} {} {}", r.time, r.principal, r.action))
        .collect();
    assert_eq!(live_keys.len(), 1, "one live KMS key: {live_keys:?}\nKMS calls: {kms_calls:#?}\nterms: {terms:#?}");
    let buckets = tenant.s3.list_buckets().send().await?;
    let mut names: Vec<&str> = buckets.buckets().iter().filter_map(|b| b.name()).collect();
    names.sort_unstable();
    let bucket = aws_stacks::names::bucket(&tenant.account_id, id);
    assert_eq!(
        names,
        [bucket.clone(), format!("{bucket}-access-logs"), aws_stacks::irsa::bucket(&tenant.account_id, id)],
        "the cluster bucket, its log bucket and its service-account issuer's bucket"
    );
    let cidr = clusters.get(id).await?.status.and_then(|s| s.provider.network.cidr).unwrap_or_default();
    let vpcs = tenant
        .ec2
        .describe_vpcs()
        .filters(aws_sdk_ec2::types::Filter::builder().name("cidr").values(&cidr).build())
        .send()
        .await?;
    assert_eq!(vpcs.vpcs().len(), 1, "one VPC with the cluster CIDR {cidr}: {:?}", vpcs.vpcs());
    Ok(())
}

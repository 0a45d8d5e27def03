//! Three replicas of the operator sharing thirty clusters (`--sharding`), on one testenv and one
//! moto. Each cluster has its own tenant account, so moto's request log tells which cluster an
//! AWS call was for (the account of the role its key was issued for), and each replica signs with
//! its own access key, so the log tells which replica sent it. One replica is killed (no
//! shutdown: its shard Lease is not released) while the clusters are being created; its clusters
//! move to the others once its Lease expires.
//!
//! The replicas run as the ServiceAccount of the chart rendered with `sharding.enabled`, so its
//! RBAC is proven enough (no request refused).
//!
//! What must hold: every cluster is created; the objects of one cluster share one live shard at
//! the end; and every AWS write for a cluster comes from the replica that owned the cluster at
//! that moment — its shard label was on the cluster when the write arrived, and no two replicas
//! wrote for one cluster in overlapping intervals.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use apis::aws::{AWSCluster, AWSControlPlane};
use aws_credential_types::Credentials;
use aws_operator::aws::{AwsFactory, AwsSettings};
use aws_operator::context::Shared;
use aws_operator::daemon;
use aws_operator::drift::DriftState;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::api::PostParams;
use kube::runtime::watcher;
use kube::{Api, ResourceExt};
use operatorkit::RunSettings;
use operatorkit::leader::{LeaderElectionConfig, LeaderElector};
use operatorkit::sharding::{Sharding, ShardingConfig, cluster_key};
use parking_lot::Mutex;
use prometheus_client::registry::Registry;
use support::*;
use tokio_util::sync::CancellationToken;

const LEASE_NS: &str = "giantswarm";
const CLUSTERS: usize = 30;

fn ring() -> String {
    daemon::lease_name(VERSION)
}

/// One replica, in its own runtime, so that killing it stops every task at once (its shard
/// Lease is neither renewed nor released), as SIGKILL would.
struct Replica {
    shard: &'static str,
    sharding: Sharding,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Replica {
    async fn start(
        f: &Fixture,
        client: &kube::Client,
        shard: &'static str,
        key: &'static str,
    ) -> anyhow::Result<Replica> {
        let timing = |config: LeaderElectionConfig| LeaderElectionConfig {
            identity: shard.to_string(),
            lease_duration: Duration::from_secs(4),
            renew_deadline: Duration::from_millis(2500),
            retry_period: Duration::from_millis(500),
            ..config
        };
        let sharding = Sharding::new(
            client.clone(),
            ShardingConfig {
                shard: shard.to_string(),
                identity: shard.to_string(),
                lease_duration: Duration::from_secs(4),
                renew_deadline: Duration::from_millis(2500),
                retry_period: Duration::from_millis(500),
                ..ShardingConfig::new(LEASE_NS, ring())
            },
            cluster_key(),
        )?;
        let elector = LeaderElector::new(
            f.client.clone(),
            timing(LeaderElectionConfig::new(LEASE_NS, daemon::lease_name(VERSION))),
        )?;
        // The controllers write while this replica holds its shard; the leader assigns.
        let writes = sharding.held();
        let aws = AwsFactory::new(AwsSettings {
            credentials: Some(Credentials::new(key, "secret", None, None, "test")),
            ..factory_settings(&f.moto, &f.cp_account)
        })
        .await?
        .gated_by(writes.clone());
        let mut registry = Registry::default();
        let metrics = operatorkit::Metrics::new(&mut registry);
        sharding.register_metrics(&mut registry);
        let shared: Arc<Shared> = Shared::new(
            writes.gate(client.clone()),
            aws,
            operator_config(f.installation.clone()),
            Fixture::amis(),
            &mut registry,
        );
        let drift_state = DriftState::new(&mut registry, &shared.config.drift);
        let settings = RunSettings {
            concurrency: 4,
            resync: Duration::from_secs(300),
            leadership: elector.leadership(),
            sharding: Some(sharding.clone()),
        };
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
        let stop = CancellationToken::new();
        runtime.spawn({
            let stop = stop.clone();
            async move {
                let _ = elector.run(stop).await;
            }
        });
        runtime.spawn(async move {
            let readiness = operatorkit::Readiness::new();
            if let Err(e) = daemon::run(shared, drift_state, &metrics, &readiness, settings, stop).await {
                eprintln!("{shard} stopped: {e:#}");
            }
        });
        Ok(Replica { shard, sharding, runtime: Some(runtime) })
    }

    fn kill(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        self.kill();
    }
}

/// One observation of an AWSCluster's shard label, as the test's own watch received it.
#[derive(Clone, Debug)]
struct Seen {
    time: f64,
    cluster: String,
    shard: Option<String>,
}

fn now() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

/// Follow every AWSCluster and record each change of its shard label.
fn record_shards(client: kube::Client, seen: Arc<Mutex<Vec<Seen>>>) -> tokio::task::JoinHandle<()> {
    let label = ShardingConfig::new(LEASE_NS, ring()).shard_label();
    let api: Api<AWSCluster> = Api::namespaced(client, NS);
    tokio::spawn(async move {
        let mut last: BTreeMap<String, Option<String>> = BTreeMap::new();
        let mut events = std::pin::pin!(watcher::watcher(api, watcher::Config::default()));
        while let Some(event) = events.next().await {
            let (Ok(watcher::Event::Apply(c)) | Ok(watcher::Event::InitApply(c))) = event else { continue };
            let shard = c.labels().get(&label).cloned();
            let name = c.name_any();
            if last.get(&name) != Some(&shard) {
                last.insert(name.clone(), shard.clone());
                seen.lock().push(Seen { time: now(), cluster: name, shard });
            }
        }
    })
}

/// A cluster whose credential Secret names a role in its own tenant account.
async fn cluster_in_own_account(f: &Fixture, id: &str) -> anyhow::Result<String> {
    let account = motoenv::fresh_account_id();
    let secrets: Api<Secret> = Api::namespaced(f.client.clone(), "giantswarm");
    let s: Secret = serde_json::from_value(serde_json::json!({
        "metadata": {"name": format!("credential-{id}"), "namespace": "giantswarm", "labels": {"giantswarm.io/organization": "acme"}},
        "stringData": {"aws.awsoperator.arn": format!("arn:aws:iam::{account}:role/GiantSwarmAWSOperator")}
    }))?;
    secrets.create(&PostParams::default(), &s).await?;
    f.cluster(id).await?;
    f.control_plane(id, &format!("cp-{id}"), &["eu-central-1a"], 1).await?;
    Ok(account)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_shards_create_thirty_clusters_and_each_cluster_is_written_by_its_owner_only() -> anyhow::Result<()> {
    // The replicas run as the ServiceAccount of the chart installed with sharding on.
    let mut f = Fixture::start_secure().await?;
    f.apply_basics().await?;
    f.as_chart_service_account(&packaging::helm_template("aws-operator", &["ci/sharding-values.yaml"], &[])?).await?;
    let identity = f.service_account.clone().expect("the chart's identity");
    assert_eq!(identity.namespace, LEASE_NS);
    let client = f.env.handle().client_with_token(Some(&identity.token))?;
    let mut replicas = vec![
        Replica::start(&f, &client, "replica-a", "AKIASHARDA").await?,
        Replica::start(&f, &client, "replica-b", "AKIASHARDB").await?,
        Replica::start(&f, &client, "replica-c", "AKIASHARDC").await?,
    ];
    eventually(60, "every replica holds its shard", || async {
        Ok(replicas.iter().all(|r| r.sharding.held().is_leader()).then_some(()))
    })
    .await?;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let recorder = record_shards(f.client.clone(), seen.clone());

    let (started, started_at) = (Instant::now(), now());
    let mut account_of = BTreeMap::new();
    for i in 0..CLUSTERS {
        let id = format!("sh{i:03}");
        account_of.insert(cluster_in_own_account(&f, &id).await?, id);
    }
    // Kill replica-c while it is creating its clusters: once it has written to AWS.
    let writes_of = |key: &str| -> anyhow::Result<usize> {
        Ok(f.moto.request_log()?.iter().filter(|r| r.principal == key && r.is_write()).count())
    };
    eventually(120, "replica-c writes to AWS", || async { Ok((writes_of("AKIASHARDC")? >= 20).then_some(())) }).await?;
    replicas[2].kill();
    let killed_at = now();

    let clusters: Api<AWSCluster> = Api::namespaced(f.client.clone(), NS);
    let all_ready = eventually(600, "every cluster Ready", || async {
        let list = clusters.list(&Default::default()).await?;
        let ready_count = list.items.iter().filter(|c| ready(c.status.as_ref().map(|s| &s.conditions))).count();
        Ok((ready_count == CLUSTERS).then_some(()))
    })
    .await;
    if let Err(e) = all_ready {
        anyhow::bail!("{e}\n{}", dump(&f.client).await);
    }
    let took = started.elapsed();
    let refused = packaging::rbac::refusals(&f.env.handle().access_log_of(&identity.user));
    assert!(refused.is_empty(), "the chart's RBAC refused the replicas: {refused:#?}");
    let log = f.moto.request_log()?;
    recorder.abort();
    let seen = seen.lock().clone();

    // Ownership intervals from the recorded labels: [observed assigned, observed unassigned).
    // The end is the safe side: a shard lets go (or is declared dead) before the test can
    // observe the label change. The start may be observed a little after the owner's own
    // watch saw it, so a write is allowed up to 1 s before its owner's observed start.
    const START_SLACK: f64 = 1.0;
    let owner_at = |cluster: &str, shard: &str, t: f64| -> bool {
        let events: Vec<&Seen> = seen.iter().filter(|s| s.cluster == cluster).collect();
        events.iter().enumerate().any(|(i, s)| {
            let end = events.get(i + 1).map_or(f64::INFINITY, |n| n.time);
            s.shard.as_deref() == Some(shard) && s.time - START_SLACK <= t && t < end
        })
    };
    let shard_of = |key: &str| match key {
        "AKIASHARDA" => "replica-a",
        "AKIASHARDB" => "replica-b",
        "AKIASHARDC" => "replica-c",
        _ => "",
    };
    let mut misplaced = Vec::new();
    let mut overlapping = Vec::new();
    let mut moved = BTreeSet::new();
    let mut writes_per_replica: BTreeMap<&str, usize> = BTreeMap::new();
    for (account, cluster) in &account_of {
        let mut writes: Vec<_> = log.iter().filter(|r| &r.account == account && r.is_write()).collect();
        writes.sort_by(|a, b| a.time.total_cmp(&b.time));
        assert!(!writes.is_empty(), "{cluster}: no write in its account");
        for w in &writes {
            let shard = shard_of(&w.principal);
            *writes_per_replica.entry(shard).or_default() += 1;
            if !owner_at(cluster, shard, w.time) {
                misplaced.push(format!("{cluster}: {} {} at {:.3} by {shard}", w.service, w.action, w.time));
            }
        }
        // The writers of a cluster, in order: each replica's writes are one run, never
        // interleaved with another's.
        let mut runs: Vec<&str> = Vec::new();
        for w in &writes {
            if runs.last() != Some(&w.principal.as_str()) {
                runs.push(&w.principal);
            }
        }
        let distinct: BTreeSet<&&str> = runs.iter().collect();
        if distinct.len() != runs.len() {
            overlapping.push(format!("{cluster}: {runs:?}"));
        }
        if runs.len() > 1 {
            moved.insert(cluster.clone());
        }
    }
    let timeline = |cluster: &str| -> Vec<String> {
        seen.iter().filter(|s| s.cluster == cluster).map(|s| format!("{:.3} {:?}", s.time, s.shard)).collect()
    };
    assert!(
        misplaced.is_empty(),
        "writes by a replica that did not own the cluster then: {misplaced:#?}\n{:#?}",
        misplaced.first().map(|m| timeline(&m[..5]))
    );
    assert!(overlapping.is_empty(), "replicas took turns on a cluster: {overlapping:#?}");
    // Each cluster and its control plane end on one live shard.
    let label = ShardingConfig::new(LEASE_NS, ring()).shard_label();
    let cps: Api<AWSControlPlane> = Api::namespaced(f.client.clone(), NS);
    let mut per_shard: BTreeMap<String, usize> = BTreeMap::new();
    for c in clusters.list(&Default::default()).await?.items {
        let shard = c.labels().get(&label).cloned().unwrap_or_default();
        assert!(
            ["replica-a", "replica-b"].contains(&shard.as_str()),
            "{} is on {shard:?}, not a live shard",
            c.name_any()
        );
        let cp = cps.get(&format!("cp-{}", c.name_any())).await?;
        assert_eq!(cp.labels().get(&label), Some(&shard), "the control plane of {} shares its shard", c.name_any());
        *per_shard.entry(shard).or_default() += 1;
    }

    // Every replica worked, the killed one included, and its clusters moved.
    for r in &replicas {
        assert!(
            writes_per_replica.get(r.shard).copied().unwrap_or(0) > 0,
            "{} wrote nothing: {writes_per_replica:?}",
            r.shard
        );
    }
    assert!(!moved.is_empty(), "no cluster changed hands after replica-c was killed");
    eprintln!(
        "{CLUSTERS} clusters Ready after {:.1} s; replica-c killed at +{:.1} s; final shares {per_shard:?}; \
         AWS writes per replica {writes_per_replica:?}; {} clusters changed hands",
        took.as_secs_f64(),
        killed_at - started_at,
        moved.len()
    );
    Ok(())
}

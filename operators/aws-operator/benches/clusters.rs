//! `make bench`: 100 clusters with one master and one node pool each, against moto.
//!
//! The operator runs as its own process (`aws-operator daemon`), so its peak RSS is its own
//! (`VmHWM`). AWS calls are counted by a loopback proxy in front of moto: moto closes every
//! connection after one response, so one accepted connection is one call, and the proxy reads
//! each request to count `DescribeStacks` apart. Prints:
//! - the time from the first create until every AWSCluster is Ready (all stacks of the cluster,
//!   its control plane and node pool usable);
//! - `DescribeStacks` calls until then (target: linear in the cluster count);
//! - the operator's peak RSS;
//! - idle AWS calls per cluster per hour, and by service and action. The operator's periods
//!   (resync, stack listing expiry, Endpoints refresh, the drainers' steady poll) are all
//!   shortened by [`TIME_SCALE`], and the idle window with them: it
//!   lasts 20 minutes of simulated time, longer than every period, so that every cache expires
//!   in it at least once.
//!
//! `BENCH_CLUSTERS` changes the cluster count. `BENCH_LEGACY_CLUSTERS` (default 0) adds that many
//! legacy clusters (`AWSConfig`, the apis fixture `awsconfig-p3x7d.yaml` with a VPC block of its
//! own, in a cluster account of their own) reconciled by the same process; the time is then until
//! every AWSCluster is Ready and every AWSConfig is `Created`, and the AWS calls until then are
//! also given per kind of cluster, from moto's request log by account (the management account's
//! calls, for both kinds, apart).
//!
//! With 20 node-pools and 20 legacy clusters (`BENCH_CLUSTERS=20 BENCH_LEGACY_CLUSTERS=20`), built
//! in the `dev` profile (`cargo bench --profile dev`) on a shared two-core machine (load average
//! 8.6 to 12.6): all Ready and `Created` after 136 s, about 92 AWS calls per cluster (100 per
//! node-pools cluster and 66 per legacy cluster in their own accounts, about 380 in the
//! management account), peak RSS 82 MiB; the 20 node-pools clusters alone, 79.5 MiB. Details in
//! `docs/legacy-clusters.md`, "Figures".

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use apis::aws::AWSCluster;
use kube::Api;
use kube::api::{ListParams, PostParams};

/// The legacy cluster fixture, shared with the tests.
#[path = "../tests/support/legacy/config.rs"]
mod legacy_config;
mod support;

use support::*;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let clusters = env_count("BENCH_CLUSTERS", 100);
    let legacy = env_count("BENCH_LEGACY_CLUSTERS", 0);
    anyhow::ensure!(legacy <= 100, "BENCH_LEGACY_CLUSTERS: at most 100 (each has a VPC block 10.<100+i>.0.0/16)");
    let Backends { moto, calls, endpoint, env, client, cp_account } = Backends::start().await?;
    let tenant_account = motoenv::fresh_account_id();
    let legacy_account = motoenv::fresh_account_id();
    let installation = "bench";

    let management = management_vpc(&moto, &cp_account, installation).await?;
    let vpc_id = management.vpc_id.clone();
    if legacy > 0 {
        // The route table the legacy clusters' `spec.aws.vpc.routeTableNames` names.
        let factory = aws_operator::aws::AwsFactory::new(aws_settings(&moto, &cp_account)).await?;
        let cp = factory.control_plane(REGION).await?;
        let name = aws_sdk_ec2::types::Tag::builder().key("Name").value(format!("{installation}_private_0")).build();
        cp.ec2.create_tags().resources(&management.route_table_id).tags(name).send().await?;
    }

    // Namespaces, Release, credentials, clusters (the operator issues their certificates).
    apply_basics(&client).await?;
    let version = VERSION;
    let ami = ami_file()?;
    let mut daemon = support::daemon(&env, installation, &cp_account, &endpoint, ami.path())
        .args(["--listen", "127.0.0.1:0"])
        .spawn()?;
    let pid = daemon.id().unwrap_or_default();

    let creds: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(client.clone(), "giantswarm");
    let aws_clusters: Api<AWSCluster> = Api::namespaced(client.clone(), NAMESPACE);
    let start = Instant::now();
    for i in 0..clusters {
        create_cluster(&client, &format!("b{i:04}"), &tenant_account).await?;
    }
    let configs: Api<apis::aws_config::AWSConfig> = Api::namespaced(client.clone(), NAMESPACE);
    for i in 0..legacy {
        let id = format!("l{i:04}");
        creds
            .create(
                &PostParams::default(),
                &create(serde_json::json!({"metadata": {"name": format!("credential-{id}"), "labels": {"giantswarm.io/organization": "bench"}},
                    "stringData": {"aws.awsoperator.arn": format!("arn:aws:iam::{legacy_account}:role/GiantSwarmAWSOperator")}})),
            )
            .await?;
        // Each legacy cluster's own VPC block: the management route table gets a route to each.
        let config = legacy_config::awsconfig(&id, "org-bench", installation, REGION, &vpc_id, version)?;
        let mut config = serde_json::to_value(&config)?;
        let block = format!("10.{}.", 100 + i);
        let text = serde_json::to_string(&config)?
            .replace("10.11.", &block)
            .replace("\"giantswarm.io/organization\":\"acme\"", "\"giantswarm.io/organization\":\"bench\"");
        config = serde_json::from_str(&text)?;
        configs.create(&PostParams::default(), &create(config)).await?;
    }
    let deadline = Instant::now() + Duration::from_secs(1800);
    let mut last_progress = Instant::now();
    let created = loop {
        let list = aws_clusters.list(&ListParams::default()).await?;
        let ready = list.items.iter().filter(|c| is_ready(c)).count();
        let created = if legacy == 0 {
            0
        } else {
            let created = |c: &apis::aws_config::AWSConfig| {
                c.status.as_ref().is_some_and(|s| {
                    s.cluster.has_condition(apis::cluster_status::ClusterCondition::Created)
                        && s.conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True")
                })
            };
            configs.list(&ListParams::default()).await?.items.iter().filter(|c| created(c)).count()
        };
        if ready == clusters && created == legacy {
            break start.elapsed();
        }
        if last_progress.elapsed() >= Duration::from_secs(30) {
            last_progress = Instant::now();
            eprintln!(
                "  {:>5.0} s: {ready} of {clusters} Ready, {created} of {legacy} legacy Created, {} AWS calls ({} DescribeStacks)",
                start.elapsed().as_secs_f64(),
                calls.all.load(Ordering::Relaxed),
                calls.describe_stacks.load(Ordering::Relaxed)
            );
        }
        if Instant::now() > deadline {
            anyhow::bail!(
                "only {ready} of {clusters} clusters became Ready and {created} of {legacy} legacy clusters Created within 30 minutes"
            );
        }
        if let Some(status) = daemon.try_wait()? {
            anyhow::bail!("the operator exited with {status}");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let describe_during_creation = calls.describe_stacks.load(Ordering::Relaxed);
    let calls_during_creation = calls.all.load(Ordering::Relaxed);
    // The calls until then by account, from moto's log: each kind's cluster account, and the
    // management account both kinds use.
    let by_account = {
        let log = tokio::task::block_in_place(|| moto.request_log())?;
        let mut by_account = std::collections::BTreeMap::<String, u64>::new();
        for r in &log {
            *by_account.entry(r.account.clone()).or_default() += 1;
        }
        by_account
    };
    // Idle: let requeues drain for one resync, then count AWS calls over the idle window.
    tokio::time::sleep(Duration::from_secs(RESYNC_SECONDS / TIME_SCALE)).await;
    let before = calls.all.load(Ordering::Relaxed);
    let window = Duration::from_secs(IDLE_WINDOW_SECONDS / TIME_SCALE);
    let from = epoch_seconds();
    tokio::time::sleep(window).await;
    let idle_calls = calls.all.load(Ordering::Relaxed) - before;
    let idle_by_action = {
        let log = tokio::task::block_in_place(|| moto.request_log())?;
        calls_by_action(&log, from, epoch_seconds())
    };
    let simulated_hours = simulated_hours(window);
    let rss = peak_rss_mib(pid).unwrap_or(f64::NAN);
    if legacy == 0 {
        println!("aws-operator, {clusters} clusters (1 master, 1 node pool each) against moto:");
        println!("  all Ready after                 {:.1} s", created.as_secs_f64());
    } else {
        println!(
            "aws-operator, {clusters} node-pools clusters (1 master, 1 node pool each) and {legacy} legacy clusters against moto:"
        );
        println!("  all Ready and Created after     {:.1} s", created.as_secs_f64());
        let per = |account: &str, n: usize| by_account.get(account).copied().unwrap_or(0) as f64 / n.max(1) as f64;
        println!(
            "  AWS calls until then            {calls_during_creation} ({:.1} per cluster): {:.1} per node-pools cluster and {:.1} per legacy cluster in their own accounts, {} in the management account, {} before any role was assumed",
            calls_during_creation as f64 / (clusters + legacy) as f64,
            per(&tenant_account, clusters),
            per(&legacy_account, legacy),
            by_account.get(&cp_account).copied().unwrap_or(0),
            by_account.get("").copied().unwrap_or(0)
        );
    }
    println!(
        "  DescribeStacks until then       {describe_during_creation} ({:.1} per cluster; {calls_during_creation} AWS calls in all)",
        describe_during_creation as f64 / (clusters + legacy) as f64
    );
    println!("  operator peak RSS               {rss:.1} MiB");
    println!(
        "  idle AWS calls                  {:.2} per cluster per hour ({idle_calls} calls in {} s, = {} min simulated with periods shortened {TIME_SCALE}x)",
        idle_calls as f64 / (clusters + legacy) as f64 / simulated_hours,
        window.as_secs(),
        IDLE_WINDOW_SECONDS / 60
    );
    println!("  idle AWS calls by action        {}", per_cluster_hour(&idle_by_action, clusters + legacy, window));
    println!("  AWS calls in total              {}", calls.all.load(Ordering::Relaxed));
    let _ = daemon.kill().await;
    Ok(())
}

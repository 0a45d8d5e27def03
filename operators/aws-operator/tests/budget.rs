//! One AWS request budget per account and region, shared by the replicas: two replicas, each on
//! its own runtime with its own access key, its own member Lease in the management cluster and
//! its own AWS clients, send reads as fast as they can to one account. moto's request log shows
//! that together they stay within the budget; that a write waits for no read while reads are
//! saturated; and that when one replica dies (its runtime stops, its Lease is no longer renewed)
//! the survivor's share grows to the whole budget within the lease duration.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use aws_credential_types::Credentials;
use aws_operator::aws::AwsFactory;
use aws_operator::aws::budget::{DEFAULT_SCOPE, MEMBER_LABEL, MembershipConfig, RequestBudget};
use aws_operator::config::BudgetSettings;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use kube::api::PostParams;
use motoenv::LoggedRequest;
use operatorkit::Leadership;
use parking_lot::Mutex;
use support::*;
use tokio_util::sync::CancellationToken;

/// The whole operator's reads per second in the account.
const READS: f64 = 10.0;
/// The whole operator's writes per second in the account.
const WRITES: f64 = 2.0;
/// A member whose Lease stops changing for this long is dead.
const LEASE: Duration = Duration::from_secs(3);
/// Readers per replica: many more than its share of reads can serve.
const READERS: usize = 12;

fn now_epoch() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("after 1970").as_secs_f64()
}

/// One replica: a runtime of its own ("a process"), its budget, membership and load.
struct Replica {
    runtime: Option<tokio::runtime::Runtime>,
    budget: RequestBudget,
    /// How long each write took, from asking to answer.
    write_latencies: Arc<Mutex<Vec<Duration>>>,
}

impl Replica {
    /// Start a replica signing with `key`: `READERS` loops of `DescribeVpcs`, and with `writes`
    /// one `CreateTags` on the management VPC every 1.5 s (below its share of writes).
    async fn start(f: &Fixture, key: &str, vpc: &str, writes: bool) -> anyhow::Result<Replica> {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
        let budget = RequestBudget::new(&BudgetSettings {
            read_per_second: READS,
            write_per_second: WRITES,
            burst: Duration::from_secs(1),
            ..BudgetSettings::default()
        });
        let settings = aws_operator::aws::AwsSettings {
            credentials: Some(Credentials::new(key, "secret", None, None, "test")),
            ..factory_settings(&f.moto, &f.cp_account)
        };
        let kubeconfig = f.env.kubeconfig_path().to_path_buf();
        let membership =
            MembershipConfig::new("giantswarm", format!("{}_0001", key.to_ascii_lowercase())).lease_duration(LEASE);
        let write_latencies = Arc::new(Mutex::new(Vec::new()));
        let (b, latencies, vpc) = (budget.clone(), write_latencies.clone(), vpc.to_string());
        let (tx, rx) = tokio::sync::oneshot::channel::<anyhow::Result<()>>();
        runtime.spawn(async move {
            let started = async {
                let config = kube::Config::from_custom_kubeconfig(
                    kube::config::Kubeconfig::read_from(kubeconfig)?,
                    &Default::default(),
                )
                .await?;
                let client = kube::Client::try_from(config)?;
                tokio::spawn(b.clone().run_membership(
                    client,
                    membership,
                    Leadership::always(),
                    CancellationToken::new(),
                ));
                let aws = AwsFactory::new(settings).await?.budgeted(b);
                anyhow::Ok(aws.control_plane(REGION).await?)
            };
            let cp = match started.await {
                Ok(cp) => cp,
                Err(e) => {
                    let _ = tx.send(Err(e));
                    return;
                }
            };
            for _ in 0..READERS {
                let ec2 = cp.ec2.clone();
                tokio::spawn(async move {
                    loop {
                        let _ = ec2.describe_vpcs().send().await;
                    }
                });
            }
            if writes {
                let ec2 = cp.ec2.clone();
                tokio::spawn(async move {
                    for i in 0u32.. {
                        let tag = aws_sdk_ec2::types::Tag::builder().key("budget").value(i.to_string()).build();
                        let asked = Instant::now();
                        if ec2.create_tags().resources(&vpc).tags(tag).send().await.is_ok() {
                            latencies.lock().push(asked.elapsed());
                        }
                        tokio::time::sleep(Duration::from_millis(1500)).await;
                    }
                });
            }
            let _ = tx.send(Ok(()));
        });
        rx.await.map_err(|_| anyhow::anyhow!("replica {key} did not start"))??;
        Ok(Replica { runtime: Some(runtime), budget, write_latencies })
    }

    /// Die: every task stops where it is; the member Lease is not released.
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

/// The EC2 requests of `key` (any key when empty) that arrived in `[from, to)` and are reads
/// (`read`) or writes.
fn count(log: &[LoggedRequest], key: &str, read: bool, from: f64, to: f64) -> usize {
    log.iter()
        .filter(|r| r.service == "ec2" && (key.is_empty() || r.principal == key))
        .filter(|r| r.is_write() != read && r.time >= from && r.time < to)
        .count()
}

async fn management_vpc(f: &Fixture) -> anyhow::Result<String> {
    let cp = f.control_plane_clients().await?;
    let vpcs = cp.ec2.describe_vpcs().send().await?;
    let vpc = vpcs
        .vpcs()
        .iter()
        .find(|v| v.tags().iter().any(|t| t.value() == Some(f.installation.as_str())))
        .and_then(|v| v.vpc_id())
        .ok_or_else(|| anyhow::anyhow!("no management VPC"))?;
    Ok(vpc.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_share_one_budget_writes_pass_saturated_reads_and_a_survivor_takes_the_whole_budget()
-> anyhow::Result<()> {
    let f = Fixture::start().await?;
    f.apply_basics().await?;
    let vpc = management_vpc(&f).await?;
    let (key_a, key_b) = ("AKIABUDGETREPLICAA", "AKIABUDGETREPLICAB");
    let mut a = Replica::start(&f, key_a, &vpc, true).await?;
    let mut b = Replica::start(&f, key_b, &vpc, false).await?;
    eventually(30, "both replicas to count two members", || async {
        Ok((a.budget.members() == 2 && b.budget.members() == 2).then_some(()))
    })
    .await?;

    // Together, within the budget: what both send over a window of saturated reads.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let writes_before = a.write_latencies.lock().len();
    let (from, window) = (now_epoch(), 8.0);
    tokio::time::sleep(Duration::from_secs_f64(window)).await;
    let to = now_epoch();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let log = f.moto.request_log()?;
    let (reads_a, reads_b) = (count(&log, key_a, true, from, to), count(&log, key_b, true, from, to));
    let together = (reads_a + reads_b) as f64 / window;
    eprintln!(
        "two replicas: {together:.2} reads/s together ({:.2} + {:.2}) against a budget of {READS}/s",
        reads_a as f64 / window,
        reads_b as f64 / window
    );
    // The rate plus at most both shares' bursts (one second's worth of the budget), and a
    // request of slack per replica for the window's edges.
    assert!(
        (reads_a + reads_b) as f64 <= READS * window + READS + 2.0,
        "{reads_a} + {reads_b} reads in {window} s exceed a budget of {READS}/s"
    );
    // And the budget is used: each replica gets about its half.
    for (key, reads) in [(key_a, reads_a), (key_b, reads_b)] {
        assert!(
            reads as f64 >= 0.7 * READS / 2.0 * window,
            "{key}: {reads} reads in {window} s, less than its share of {READS}/s"
        );
    }

    // Writes pass while reads are saturated: none waited behind the reads.
    let latencies: Vec<Duration> = a.write_latencies.lock()[writes_before..].to_vec();
    let writes_logged = count(&log, key_a, false, from, to);
    eprintln!("writes during saturated reads: {writes_logged} in {window} s, slowest {:?}", latencies.iter().max());
    assert!(writes_logged >= 4, "only {writes_logged} writes in {window} s of saturated reads");
    assert!(
        latencies.iter().all(|l| *l < Duration::from_millis(700)),
        "a write waited behind saturated reads: {latencies:?}"
    );

    // B dies without releasing its Lease: A's share grows to the whole budget within the lease
    // duration (and the time it takes to notice).
    b.kill();
    let died = Instant::now();
    eventually(30, "the survivor to count one member", || async { Ok((a.budget.members() == 1).then_some(())) })
        .await?;
    let rose = died.elapsed();
    eprintln!("the survivor's share rose to the whole budget {rose:?} after the other replica died (lease {LEASE:?})");
    assert!(rose <= LEASE + Duration::from_secs(1), "the survivor's share rose only after {rose:?}");

    // The budget is not lost: the survivor alone now sends about the whole rate, and no more.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let from = now_epoch();
    tokio::time::sleep(Duration::from_secs_f64(window)).await;
    let to = now_epoch();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let log = f.moto.request_log()?;
    let alone = count(&log, key_a, true, from, to);
    eprintln!("the survivor alone: {:.2} reads/s against a budget of {READS}/s", alone as f64 / window);
    assert!(alone as f64 >= 0.8 * READS * window, "the survivor sent {alone} reads in {window} s");
    assert!(alone as f64 <= READS * window + READS + 1.0, "the survivor sent {alone} reads in {window} s");
    assert_eq!(count(&log, key_b, true, from, to), 0, "the dead replica still sent");
    a.kill();
    Ok(())
}

/// As the chart's ServiceAccount, with the chart's RBAC: a replica takes and renews its member
/// Lease, counts a Lease a vanished pod left behind until it is a lease duration old, deletes it
/// once it is stale, and releases its own on shutdown. RBAC refuses nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_charts_service_account_may_hold_count_and_clean_up_member_leases() -> anyhow::Result<()> {
    let mut f = Fixture::start_secure().await?;
    f.apply_basics().await?;
    f.as_chart_service_account(&packaging::helm_template("aws-operator", &["ci/minimal-values.yaml"], &[])?).await?;
    let sa = f.service_account.clone().expect("the chart's identity");
    let leases: Api<Lease> = Api::namespaced(f.client.clone(), &sa.namespace);
    let left: Lease = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "aws-operator-budget-vanished", "labels": {MEMBER_LABEL: DEFAULT_SCOPE}},
        "spec": {"holderIdentity": "vanished_0001", "leaseDurationSeconds": 3}
    }))?;
    leases.create(&PostParams::default(), &left).await?;

    let client = f.env.handle().client_with_token(Some(&sa.token))?;
    let budget = RequestBudget::new(&BudgetSettings::default());
    let config = MembershipConfig {
        stale_after: Duration::from_secs(6),
        ..MembershipConfig::new(&sa.namespace, "aws-operator-abc12_0001").lease_duration(LEASE)
    };
    let own = config.lease_name.clone();
    let holder = |lease: Option<Lease>| lease.and_then(|l| l.spec?.holder_identity).filter(|h| !h.is_empty());
    let stop = CancellationToken::new();
    let env = f.env.handle().clone();
    packaging::rbac::without_refusals(&env, &sa.user, async {
        let running = tokio::spawn(budget.clone().run_membership(client, config, Leadership::always(), stop.clone()));
        eventually(20, "its own Lease held", || async { Ok(holder(leases.get_opt(&own).await?)) }).await?;
        eventually(20, "the left Lease counted", || async { Ok((budget.members() == 2).then_some(())) }).await?;
        eventually(20, "the left Lease counted out", || async { Ok((budget.members() == 1).then_some(())) }).await?;
        eventually(20, "the stale Lease deleted", || async {
            Ok(leases.get_opt("aws-operator-budget-vanished").await?.is_none().then_some(()))
        })
        .await?;
        stop.cancel();
        running.await?;
        assert_eq!(holder(leases.get_opt(&own).await?), None, "its own Lease is released on shutdown");
        anyhow::Ok(())
    })
    .await?;
    Ok(())
}

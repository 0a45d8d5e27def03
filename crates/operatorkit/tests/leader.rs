//! Leader election against testenv: acquisition, standby, takeover, release, stepping down when
//! renewals fail, and the core promise — two replicas never lead at the same time.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, bail};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use operatorkit::leader::{LeaderElectionConfig, LeaderElector, Leadership};
use testenv::{Link, RequestMatch, TestEnv, Verb};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep, timeout};
use tokio_util::sync::CancellationToken;

type TestResult = anyhow::Result<()>;

const NAMESPACE: &str = "default";
const LEASE: &str = "operator-lock";
/// Leases as testenv's request counters name them.
const LEASES: &str = "leases.coordination.k8s.io";
/// How long any expected change may take on a loaded machine.
const WAIT: Duration = Duration::from_secs(30);

/// The short durations of these tests: 2 s lease, 1.5 s renew deadline, 200 ms retry period.
fn fast(identity: &str) -> LeaderElectionConfig {
    LeaderElectionConfig {
        identity: identity.to_string(),
        lease_duration: Duration::from_secs(2),
        renew_deadline: Duration::from_millis(1500),
        retry_period: Duration::from_millis(200),
        ..LeaderElectionConfig::new(NAMESPACE, LEASE)
    }
}

/// An elector running in its own task.
struct Replica {
    leadership: Leadership,
    shutdown: CancellationToken,
    task: JoinHandle<Result<(), operatorkit::leader::Error>>,
}

impl Replica {
    fn start(client: kube::Client, config: LeaderElectionConfig) -> anyhow::Result<Replica> {
        let elector = LeaderElector::new(client, config)?;
        Ok(Replica::spawn(elector))
    }

    fn spawn(elector: LeaderElector) -> Replica {
        let leadership = elector.leadership();
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(elector.run(shutdown.clone()));
        Replica { leadership, shutdown, task }
    }

    fn is_leader(&self) -> bool {
        self.leadership.is_leader()
    }

    async fn acquired(&self) -> TestResult {
        let mut leadership = self.leadership.clone();
        timeout(WAIT, leadership.acquired()).await.context("the replica never became leader")?;
        Ok(())
    }

    /// Shut the elector down and return what `run` returned.
    async fn stop(self) -> anyhow::Result<Result<(), operatorkit::leader::Error>> {
        self.shutdown.cancel();
        Ok(timeout(WAIT, self.task).await.context("the elector did not stop")??)
    }
}

async fn read_lease(client: &kube::Client) -> anyhow::Result<LeaseSpec> {
    let lease = Api::<Lease>::namespaced(client.clone(), NAMESPACE).get(LEASE).await?;
    lease.spec.context("the lease has no spec")
}

fn holder(spec: &LeaseSpec) -> &str {
    spec.holder_identity.as_deref().unwrap_or("")
}

/// Poll `check` until it holds, for at most [`WAIT`].
async fn eventually(what: &str, mut check: impl AsyncFnMut() -> anyhow::Result<bool>) -> TestResult {
    let deadline = Instant::now() + WAIT;
    loop {
        if check().await? {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("timed out after {WAIT:?} waiting until {what}");
        }
        sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_candidate_acquires_an_absent_lease_and_keeps_renewing_it() -> TestResult {
    let env = TestEnv::start().await?;
    let client = env.client();
    let elector = LeaderElector::new(client.clone(), fast("replica-a"))?;
    let mut registry = prometheus_client::registry::Registry::default();
    elector.register_metrics(&mut registry);
    let a = Replica::spawn(elector);
    a.acquired().await?;

    let first = read_lease(&client).await?;
    assert_eq!(holder(&first), "replica-a");
    assert_eq!(first.lease_duration_seconds, Some(2));
    assert_eq!(first.lease_transitions, Some(0));
    assert!(first.acquire_time.is_some());
    let first_renewal = first.renew_time.clone().context("no renewTime")?;

    // The leader renews: renewTime moves on, acquireTime and the transition count stay.
    eventually("the lease is renewed", async || {
        let spec = read_lease(&client).await?;
        Ok(spec.renew_time.as_ref().is_some_and(|t| t.0 > first_renewal.0))
    })
    .await?;
    let renewed = read_lease(&client).await?;
    assert_eq!(renewed.acquire_time, first.acquire_time);
    assert_eq!(renewed.lease_transitions, Some(0));
    assert!(a.is_leader());

    let mut metrics = String::new();
    prometheus_client::encoding::text::encode(&mut metrics, &registry)?;
    assert!(metrics.contains("leader_election_master_status{name=\"operator-lock\"} 1"), "{metrics}");

    assert!(a.stop().await?.is_ok());
    let mut metrics = String::new();
    prometheus_client::encoding::text::encode(&mut metrics, &registry)?;
    assert!(metrics.contains("leader_election_master_status{name=\"operator-lock\"} 0"), "{metrics}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn candidates_racing_for_an_absent_lease_elect_exactly_one() -> TestResult {
    let env = TestEnv::start().await?;
    let client = env.client();
    let replicas: Vec<Replica> = ["replica-a", "replica-b", "replica-c"]
        .into_iter()
        .map(|id| Replica::start(client.clone(), fast(id)))
        .collect::<Result<_, _>>()?;

    eventually("one candidate leads", async || Ok(replicas.iter().any(Replica::is_leader))).await?;
    // Watch them for a few lease durations: the others stay standby.
    let until = Instant::now() + Duration::from_secs(4);
    while Instant::now() < until {
        let leaders = replicas.iter().filter(|r| r.is_leader()).count();
        assert!(leaders <= 1, "{leaders} candidates lead at once");
        sleep(Duration::from_millis(5)).await;
    }
    let spec = read_lease(&client).await?;
    let leader = ["replica-a", "replica-b", "replica-c"]
        .into_iter()
        .zip(&replicas)
        .find(|(_, r)| r.is_leader())
        .map(|(id, _)| id)
        .context("nobody leads any more")?;
    assert_eq!(holder(&spec), leader);
    // Losing the create race (409 AlreadyExists) is not a change of holder.
    assert_eq!(spec.lease_transitions, Some(0));
    for replica in replicas {
        replica.stop().await??;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_stays_standby_while_the_leader_renews() -> TestResult {
    let env = TestEnv::start().await?;
    let client = env.client();
    // Roomier durations than `fast`, so that a slow machine does not make the leader miss a
    // renewal, which would be a legitimate takeover.
    let roomy = |id: &str| LeaderElectionConfig {
        lease_duration: Duration::from_secs(4),
        renew_deadline: Duration::from_secs(3),
        retry_period: Duration::from_millis(300),
        ..fast(id)
    };
    let a = Replica::start(client.clone(), roomy("replica-a"))?;
    a.acquired().await?;
    let b = Replica::start(client.clone(), roomy("replica-b"))?;

    // Two full lease durations and more: the standby would have taken an unrenewed lease.
    let until = Instant::now() + Duration::from_secs(10);
    while Instant::now() < until {
        assert!(!b.is_leader(), "the standby took the lease of a healthy leader");
        sleep(Duration::from_millis(20)).await;
    }
    assert!(a.is_leader());
    let spec = read_lease(&client).await?;
    assert_eq!(holder(&spec), "replica-a");
    assert_eq!(spec.lease_transitions, Some(0));
    a.stop().await??;
    b.stop().await??;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_aborted_elector_stops_leading() -> TestResult {
    let env = TestEnv::start().await?;
    let a = Replica::start(env.client(), fast("replica-a"))?;
    a.acquired().await?;
    // Nothing renews the lease any more, so the replica must not keep writing.
    a.task.abort();
    let mut leadership = a.leadership.clone();
    timeout(WAIT, leadership.lost()).await.context("an aborted elector still reports leadership")?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_takes_over_when_the_leader_stops() -> TestResult {
    let env = TestEnv::start().await?;
    let client = env.client();
    let a = Replica::start(client.clone(), fast("replica-a"))?;
    a.acquired().await?;
    let b = Replica::start(client.clone(), fast("replica-b"))?;
    let before = read_lease(&client).await?;

    let a_leadership = a.leadership.clone();
    assert!(a.stop().await?.is_ok());
    assert!(!a_leadership.is_leader(), "a stopped elector still reports leadership");

    // Without release the standby waits for the lease to expire, then takes it.
    b.acquired().await?;
    let after = read_lease(&client).await?;
    assert_eq!(holder(&after), "replica-b");
    assert_eq!(after.lease_transitions, Some(1));
    assert_ne!(after.acquire_time, before.acquire_time);
    b.stop().await??;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn release_on_cancel_hands_over_before_the_lease_expires() -> TestResult {
    let env = TestEnv::start().await?;
    let client = env.client();
    // A lease far longer than the wait: a standby leading within the wait proves the release.
    let slow = |id: &str| LeaderElectionConfig {
        lease_duration: Duration::from_secs(120),
        renew_deadline: Duration::from_secs(10),
        release_on_cancel: true,
        ..fast(id)
    };
    let a = Replica::start(client.clone(), slow("replica-a"))?;
    a.acquired().await?;
    let b = Replica::start(client.clone(), slow("replica-b"))?;
    // Let the standby see the lease, so that it is counting towards expiry.
    eventually("the standby has read the lease", async || Ok(env.handle().requests().get(Verb::Get, LEASES) >= 2))
        .await?;

    assert!(a.stop().await?.is_ok());
    b.acquired().await?;
    let spec = read_lease(&client).await?;
    assert_eq!(holder(&spec), "replica-b");
    assert_eq!(spec.lease_duration_seconds, Some(120));
    assert_eq!(spec.lease_transitions, Some(1));
    b.stop().await??;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_released_lease_names_no_holder_and_expires_in_a_second() -> TestResult {
    let env = TestEnv::start().await?;
    let client = env.client();
    let a = Replica::start(client.clone(), LeaderElectionConfig { release_on_cancel: true, ..fast("replica-a") })?;
    a.acquired().await?;
    assert!(a.stop().await?.is_ok());
    let spec = read_lease(&client).await?;
    assert_eq!(holder(&spec), "");
    assert_eq!(spec.lease_duration_seconds, Some(1));
    assert_eq!(spec.lease_transitions, Some(0));

    // Without release the lease keeps naming the stopped holder until it expires.
    let b = Replica::start(client.clone(), fast("replica-b"))?;
    b.acquired().await?;
    assert!(b.stop().await?.is_ok());
    let spec = read_lease(&client).await?;
    assert_eq!(holder(&spec), "replica-b");
    assert_eq!(spec.lease_transitions, Some(1));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_candidate_resumes_the_lease_it_still_holds() -> TestResult {
    let env = TestEnv::start().await?;
    let client = env.client();
    let long = || LeaderElectionConfig {
        lease_duration: Duration::from_secs(120),
        renew_deadline: Duration::from_secs(10),
        ..fast("replica-a")
    };
    let a = Replica::start(client.clone(), long())?;
    a.acquired().await?;
    let before = read_lease(&client).await?;
    a.stop().await??;

    // Same identity: the lease is "already ours", so it leads long before the lease expires,
    // and it is not a change of holder.
    let again = Replica::start(client.clone(), long())?;
    again.acquired().await?;
    let after = read_lease(&client).await?;
    assert_eq!(holder(&after), "replica-a");
    assert_eq!(after.lease_transitions, Some(0));
    assert_eq!(after.acquire_time, before.acquire_time);
    again.stop().await??;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conflicting_renewal_reads_the_lease_and_keeps_leading() -> TestResult {
    let env = TestEnv::start().await?;
    let client = env.client();
    let a = Replica::start(client.clone(), fast("replica-a"))?;
    a.acquired().await?;
    // Steady renewals need no reads: they update with the resourceVersion of the last write.
    let gets = env.handle().requests().get(Verb::Get, LEASES);
    let updates = env.handle().requests().get(Verb::Update, LEASES);
    eventually("three renewals", async || Ok(env.handle().requests().get(Verb::Update, LEASES) >= updates + 3)).await?;
    assert_eq!(env.handle().requests().get(Verb::Get, LEASES), gets);

    // A 409 sends the leader to read the lease; it is still its own, so it renews and leads on.
    env.handle().faults().fail_next(RequestMatch::new(Verb::Update, "leases"), 1, 409);
    eventually("the leader has read the lease", async || Ok(env.handle().requests().get(Verb::Get, LEASES) > gets))
        .await?;
    let renewed = read_lease(&client).await?.renew_time.context("no renewTime")?;
    eventually("a renewal after the conflict", async || {
        Ok(read_lease(&client).await?.renew_time.is_some_and(|t| t.0 > renewed.0))
    })
    .await?;
    assert!(a.is_leader());
    assert_eq!(read_lease(&client).await?.lease_transitions, Some(0));
    a.stop().await??;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_whose_renewals_fail_steps_down_before_its_lease_expires() -> TestResult {
    let env = TestEnv::start().await?;
    let client = env.client();
    // A lease much longer than the renew deadline: stepping down must happen well before it ends.
    let config = |id: &str| LeaderElectionConfig {
        lease_duration: Duration::from_secs(10),
        renew_deadline: Duration::from_secs(2),
        ..fast(id)
    };
    let a = Replica::start(client.clone(), config("replica-a"))?;
    a.acquired().await?;
    let b = Replica::start(client.clone(), config("replica-b"))?;

    env.handle().faults().fail_next(RequestMatch::new(Verb::Update, "leases"), usize::MAX, 500);
    // Reads still work; the last renewal that got through is the one the lease shows now.
    let last_renewal = read_lease(&client).await?.renew_time.context("no renewTime")?.0;
    let mut a_leadership = a.leadership.clone();
    timeout(WAIT, a_leadership.lost()).await.context("the leader kept leading without renewals")?;
    let stepped_down = jiff::Timestamp::now();
    // Generous bound: the renew deadline is 2 s, the lease 10 s.
    assert!(
        stepped_down < last_renewal + Duration::from_secs(10),
        "stepped down at {stepped_down}, after the lease renewed at {last_renewal} expired"
    );
    assert!(!b.is_leader());
    assert_eq!(holder(&read_lease(&client).await?), "replica-a");

    // Once the API server accepts writes again, exactly one of them leads.
    env.handle().faults().clear();
    eventually("a leader is elected again", async || Ok(a.is_leader() || b.is_leader())).await?;
    assert!(!(a.is_leader() && b.is_leader()));
    a.stop().await??;
    b.stop().await??;
    Ok(())
}

const LOG: &str = "leader-log";

/// What a controller of one replica does: while it leads, append its identity to a ConfigMap,
/// read-modify-write guarded by resourceVersion.
async fn writer(client: kube::Client, leadership: Leadership, identity: &'static str, stop: CancellationToken) {
    let api: Api<ConfigMap> = Api::namespaced(client, NAMESPACE);
    while !stop.is_cancelled() {
        if leadership.is_leader() {
            let append = async {
                let mut cm = api.get(LOG).await?;
                let data = cm.data.get_or_insert_with(BTreeMap::new);
                data.entry("log".into()).or_default().push_str(&format!("{identity}\n"));
                api.replace(LOG, &PostParams::default(), &cm).await
            };
            // Errors and timeouts are expected while this replica's link is cut.
            let _ = timeout(Duration::from_secs(1), append).await;
        }
        sleep(Duration::from_millis(20)).await;
    }
}

async fn log_entries(client: &kube::Client) -> anyhow::Result<Vec<String>> {
    let cm = Api::<ConfigMap>::namespaced(client.clone(), NAMESPACE).get(LOG).await?;
    let log = cm.data.unwrap_or_default().remove("log").unwrap_or_default();
    Ok(log.lines().map(str::to_string).collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_never_both_lead_across_takeovers() -> TestResult {
    const ROUNDS: usize = 4;
    let env = TestEnv::start().await?;
    let client = env.client();
    let cm = ConfigMap {
        metadata: kube::api::ObjectMeta { name: Some(LOG.into()), ..Default::default() },
        data: Some(BTreeMap::from([("log".to_string(), String::new())])),
        ..Default::default()
    };
    Api::<ConfigMap>::namespaced(client.clone(), NAMESPACE).create(&PostParams::default(), &cm).await?;

    let ids = ["replica-a", "replica-b"];
    let links = [Link::start(env.handle().addr()).await?, Link::start(env.handle().addr()).await?];
    let config = |id: &str| LeaderElectionConfig { lease_duration: Duration::from_secs(3), ..fast(id) };
    let replicas = [
        Replica::start(links[0].client(NAMESPACE)?, config(ids[0]))?,
        Replica::start(links[1].client(NAMESPACE)?, config(ids[1]))?,
    ];
    let stop = CancellationToken::new();
    let mut writers = Vec::new();
    for i in 0..2 {
        writers.push(tokio::spawn(writer(
            links[i].client(NAMESPACE)?,
            replicas[i].leadership.clone(),
            ids[i],
            stop.clone(),
        )));
    }
    let sampler = {
        let (a, b) = (replicas[0].leadership.clone(), replicas[1].leadership.clone());
        let stop = stop.clone();
        tokio::spawn(async move {
            let (mut samples, mut both) = (0u64, 0u64);
            while !stop.is_cancelled() {
                samples += 1;
                if a.is_leader() && b.is_leader() {
                    both += 1;
                }
                sleep(Duration::from_millis(1)).await;
            }
            (samples, both)
        })
    };

    let takeovers = async {
        for round in 0..ROUNDS {
            eventually("one replica leads", async || Ok(replicas.iter().any(Replica::is_leader))).await?;
            let leader = usize::from(replicas[1].is_leader());
            let other = 1 - leader;
            // Let the leader's controller write before cutting it off.
            eventually("the leader has written", async || {
                Ok(log_entries(&client).await?.last().is_some_and(|last| last == ids[leader]))
            })
            .await?;
            links[leader].set_cut(true);
            let takeover = format!("round {round}: {} takes over", ids[other]);
            eventually(&takeover, async || Ok(replicas[other].is_leader())).await?;
            links[leader].set_cut(false);
        }
        eventually("the last leader has written", async || {
            let leader = usize::from(replicas[1].is_leader());
            Ok(replicas[leader].is_leader() && log_entries(&client).await?.last().is_some_and(|l| l == ids[leader]))
        })
        .await
    }
    .await;

    stop.cancel();
    let (samples, both) = sampler.await?;
    for w in writers {
        w.await?;
    }
    // Overlap first: it explains a failed takeover better than the timeout does.
    assert_eq!(both, 0, "both replicas led at {both} of {samples} samples");
    takeovers?;
    assert!(samples > 1000, "only {samples} samples");

    let transitions = read_lease(&client).await?.lease_transitions.unwrap_or(0);
    assert!(transitions >= ROUNDS as i32, "{transitions} transitions after {ROUNDS} takeovers");
    // Every change of writer in the log needs a change of lease holder in between: a replica
    // that lost the lease wrote nothing after the next one started.
    let log = log_entries(&client).await?;
    let switches = log.windows(2).filter(|w| w[0] != w[1]).count();
    assert!(switches >= ROUNDS, "{switches} changes of writer in {log:?}");
    assert!(switches <= transitions as usize, "{switches} changes of writer but {transitions} lease transitions");
    for replica in replicas {
        replica.stop().await??;
    }
    Ok(())
}

/// A gated client sends writes only while its replica leads; reads and watches always pass, and
/// a refused write names the reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gated_client_refuses_writes_while_not_leading() -> TestResult {
    let env = TestEnv::start().await?;
    let (leading, rx) = watch::channel(true);
    let gated = Leadership::from_receiver(rx).gate(env.client());
    assert_eq!(gated.default_namespace(), env.client().default_namespace());
    let api: Api<ConfigMap> = Api::namespaced(gated, NAMESPACE);
    let cm = |name: &str| ConfigMap {
        metadata: kube::api::ObjectMeta { name: Some(name.into()), ..Default::default() },
        ..Default::default()
    };
    api.create(&PostParams::default(), &cm("while-leading")).await?;

    leading.send_replace(false);
    let refused = api.create(&PostParams::default(), &cm("after-losing")).await;
    match refused {
        Err(kube::Error::Service(source)) => {
            assert!(source.downcast_ref::<operatorkit::leader::NotLeader>().is_some(), "{source}")
        }
        other => bail!("a write after losing leadership was not refused: {other:?}"),
    }
    let deleted = api.delete("while-leading", &Default::default()).await;
    assert!(matches!(deleted, Err(kube::Error::Service(_))), "{deleted:?}");
    // Reads pass, and show that nothing was written.
    let names: Vec<String> =
        api.list(&Default::default()).await?.items.into_iter().filter_map(|c| c.metadata.name).collect();
    assert_eq!(names, ["while-leading"]);
    // API errors still come back as API errors.
    leading.send_replace(true);
    let conflict = api.create(&PostParams::default(), &cm("while-leading")).await;
    assert!(matches!(conflict, Err(kube::Error::Api(ref s)) if s.code == 409), "{conflict:?}");
    Ok(())
}

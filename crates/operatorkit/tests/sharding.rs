//! Sharded replicas on testenv: three (then five, then one) replicas of one controller in one
//! process, each with its own client, identity and shard Lease, over 300 objects in 150
//! clusters. Every reconcile is recorded as (replica, object, start, end). Through a replica
//! killed without releasing its Lease, a replica cut off from the API server and coming back,
//! a hand-edited shard label and rescaling 3 → 5 → 1, the test asserts that every object is
//! reconciled by the shard it is assigned to, that the objects of one cluster share a shard,
//! and that no object is ever reconciled by two replicas in overlapping intervals.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use operatorkit::leader::{LeaderElectionConfig, LeaderElector};
use operatorkit::sharding::{Sharding, ShardingConfig, ShardingMode, label_key, ranges};
use operatorkit::{Controller, Leadership, Outcome, Resource, ResourceSet, Routing, resource};
use parking_lot::Mutex;
use semver::{Version, VersionReq};
use testenv::{TestEnv, UserInfo};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

const NS: &str = "default";
const OPERATOR: &str = "sharding-test";
const RING: &str = "sharding-test";
const LEADER_LEASE: &str = "sharding-test-leader";
const VERSION_LABEL: &str = "sharding-test.giantswarm.io/version";
const CLUSTER: &str = "giantswarm.io/cluster";
const SHARD_LABEL: &str = "shard.operatorkit.giantswarm.io/sharding-test";
const DRAIN_LABEL: &str = "drain.operatorkit.giantswarm.io/sharding-test";
const OBJECTS: usize = 300;
const REPLICAS: [&str; 5] = ["replica-0", "replica-1", "replica-2", "replica-3", "replica-4"];
/// How long one reconcile takes, and how soon the object is reconciled again: each object is
/// being reconciled about a third of the time, so a move that did not wait for its old shard
/// would show up as overlapping intervals.
const RECONCILE: Duration = Duration::from_millis(60);
const REQUEUE: Duration = Duration::from_millis(150);
/// Long enough for a Lease to expire and everything to move, on a busy two-core machine.
const CONVERGE: Duration = Duration::from_secs(90);

/// One reconcile of one object by one replica.
#[derive(Clone, Debug)]
struct Record {
    replica: String,
    object: String,
    start: Instant,
    end: Instant,
}

type Log = Arc<Mutex<Vec<Record>>>;

/// Records the reconcile even if the replica is killed in the middle of it (the future is
/// dropped): the interval then ends at the kill.
struct Recording {
    replica: String,
    object: String,
    start: Instant,
    log: Log,
}

impl Drop for Recording {
    fn drop(&mut self) {
        self.log.lock().push(Record {
            replica: self.replica.clone(),
            object: std::mem::take(&mut self.object),
            start: self.start,
            end: Instant::now(),
        });
    }
}

/// The example resource: takes a little time, records itself, and asks to run again soon, so
/// that reconciles are running whenever a shard changes hands.
struct Recorder {
    replica: String,
    log: Log,
}

impl Resource<ConfigMap, ()> for Recorder {
    fn name(&self) -> &str {
        "recorder"
    }

    async fn ensure_created(&self, _: &mut (), obj: &ConfigMap) -> resource::Result<Outcome> {
        let _recording = Recording {
            replica: self.replica.clone(),
            object: obj.metadata.name.clone().unwrap_or_default(),
            start: Instant::now(),
            log: self.log.clone(),
        };
        tokio::time::sleep(RECONCILE).await;
        Ok(Outcome::proceed().requeue_after(REQUEUE))
    }

    async fn ensure_deleted(&self, _: &mut (), _: &ConfigMap) -> resource::Result<Outcome> {
        Ok(Outcome::proceed())
    }
}

/// Each replica's cache, by replica.
type Stores = Arc<Mutex<HashMap<String, kube::runtime::reflector::Store<ConfigMap>>>>;

fn token(replica: &str) -> String {
    format!("token-{replica}")
}

/// A running replica: a leader elector (for the sharder role), its sharding, one controller.
struct Replica {
    held: Leadership,
    controller_stop: CancellationToken,
    member_stop: CancellationToken,
    controller: JoinHandle<()>,
    member: Vec<JoinHandle<()>>,
}

impl Replica {
    async fn start(
        env: &TestEnv,
        name: &str,
        incarnation: u32,
        log: &Log,
        mode: ShardingMode,
        stores: &Stores,
    ) -> Replica {
        let client = env.handle().client_with_token(Some(&token(name))).expect("a replica client");
        let config = ShardingConfig {
            shard: name.to_string(),
            identity: format!("{name}_{incarnation}"),
            lease_duration: Duration::from_secs(2),
            renew_deadline: Duration::from_millis(1500),
            retry_period: Duration::from_millis(300),
            mode,
            ..ShardingConfig::new(NS, RING)
        };
        let sharding = Sharding::new(client.clone(), config, label_key(CLUSTER)).expect("valid sharding settings");
        let set = ResourceSet::with_default_state("v1", VersionReq::parse("^1").expect("requirement"))
            .resource(Recorder { replica: name.to_string(), log: log.clone() })
            .build();
        let controller = Controller::<ConfigMap>::builder(client.clone(), "sharding-test")
            .operator(OPERATOR)
            .routing(Routing::Legacy { version: Version::new(1, 0, 0) })
            .api(Api::all(client.clone()))
            // Unbounded: one replica can hold all the objects, each reconciling a third of the time.
            .concurrency(0)
            .sharding(&sharding)
            .resource_set(set)
            .build()
            .expect("the controller builds");
        let election = LeaderElectionConfig {
            identity: format!("{name}_{incarnation}"),
            lease_duration: Duration::from_secs(2),
            renew_deadline: Duration::from_millis(1500),
            retry_period: Duration::from_millis(300),
            release_on_cancel: true,
            ..LeaderElectionConfig::new(NS, LEADER_LEASE)
        };
        let elector = LeaderElector::new(client, election).expect("a valid election config");
        let controller_stop = CancellationToken::new();
        let member_stop = CancellationToken::new();
        let held = sharding.held();
        let leadership = elector.leadership();
        let member = vec![
            tokio::spawn({
                let stop = member_stop.clone();
                async move {
                    let _ = sharding.run(leadership, stop).await;
                }
            }),
            tokio::spawn({
                let stop = member_stop.clone();
                async move {
                    let _ = elector.run(stop).await;
                }
            }),
        ];
        let store = controller.store();
        stores.lock().insert(name.to_string(), store);
        let controller = tokio::spawn(controller.run(controller_stop.clone()));
        Replica { held, controller_stop, member_stop, controller, member }
    }

    /// SIGKILL: everything stops at once, nothing is released.
    fn kill(self) {
        self.controller.abort();
        for task in self.member {
            task.abort();
        }
    }

    /// A clean shutdown: the controller first, then the Leases are released.
    async fn stop(self) {
        self.controller_stop.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(30), self.controller).await;
        self.member_stop.cancel();
        for task in self.member {
            let _ = tokio::time::timeout(Duration::from_secs(30), task).await;
        }
    }
}

async fn eventually<F, Fut>(what: &str, within: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(), String>>,
{
    let deadline = Instant::now() + within;
    let mut report = Instant::now() + Duration::from_secs(3);
    loop {
        let outcome = check().await;
        match outcome {
            Ok(()) => return,
            Err(why) => {
                assert!(Instant::now() < deadline, "timed out waiting for {what}: {why}");
                if Instant::now() > report {
                    println!("still waiting for {what}: {why}");
                    report = Instant::now() + Duration::from_secs(3);
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Two objects per cluster, each cluster in its own namespace (so both modes keep a cluster's
/// objects together).
fn object(i: usize) -> ConfigMap {
    serde_json::from_value(serde_json::json!({
        "metadata": {
            "name": format!("object-{i:03}"),
            "namespace": cluster(i),
            "labels": {VERSION_LABEL: "1.0.0", CLUSTER: cluster(i)},
        },
    }))
    .expect("a ConfigMap")
}

/// A cluster id as Giant Swarm makes them: five random characters of `[a-z0-9]` (from a fixed
/// seed, so runs repeat). Random ids matter in the namespace mode: the API server hashes with
/// plain FNV-1a, which keeps names that differ only in their last characters (`cluster-001`,
/// `cluster-002`) in one narrow band of the hash space, so sequential names would all land in
/// one range.
fn cluster(i: usize) -> String {
    let mut z = (i as u64 / 2).wrapping_add(1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    let alphabet = b"abcdefghijklmnopqrstuvwxyz0123456789";
    (0..5).map(|k| alphabet[((z >> (k * 8)) % 36) as usize] as char).collect()
}

/// The shard an object belongs to: its label, or (namespace ranges) the range of `live` its
/// namespace hashes into.
fn owner(cm: &ConfigMap, mode: ShardingMode, live: &[&str]) -> Option<String> {
    match mode {
        ShardingMode::Labels => cm.metadata.labels.as_ref()?.get(SHARD_LABEL).cloned(),
        ShardingMode::NamespaceRanges => {
            let members: BTreeSet<String> = live.iter().map(|s| s.to_string()).collect();
            let namespace = cm.metadata.namespace.as_deref().unwrap_or_default();
            members
                .iter()
                .find(|m| ranges::range_of(&members, m).is_some_and(|r| ranges::contains(r, namespace)))
                .cloned()
        }
    }
}

/// Every object is assigned to one of `live` (and every one of `live` holds objects), not
/// draining, together with the other object of its cluster, and was reconciled by its shard
/// since `since`.
async fn converged(
    cms: &Api<ConfigMap>,
    log: &Log,
    live: &[&str],
    since: Instant,
    mode: ShardingMode,
    stores: &Stores,
) -> Result<(), String> {
    let objects = cms.list(&ListParams::default().labels(VERSION_LABEL)).await.map_err(|e| e.to_string())?;
    if objects.items.len() != OBJECTS {
        return Err(format!("{} objects", objects.items.len()));
    }
    let mut owners = HashMap::new();
    let mut clusters: HashMap<String, BTreeSet<String>> = HashMap::new();
    for cm in &objects.items {
        let labels = cm.metadata.labels.clone().unwrap_or_default();
        let name = cm.metadata.name.clone().unwrap_or_default();
        let Some(shard) = owner(cm, mode, live) else { return Err(format!("{name} is unassigned")) };
        let shard = &shard;
        if !live.contains(&shard.as_str()) {
            return Err(format!("{name} is on {shard}, not a live shard"));
        }
        if labels.contains_key(DRAIN_LABEL) {
            return Err(format!("{name} is draining"));
        }
        clusters.entry(labels.get(CLUSTER).cloned().unwrap_or_default()).or_default().insert(shard.clone());
        owners.insert(name, shard.clone());
    }
    let holding: BTreeSet<&str> = owners.values().map(String::as_str).collect();
    if holding != live.iter().copied().collect() {
        return Err(format!("the objects are on {holding:?}, not on every shard of {live:?}"));
    }
    if let Some((cluster, shards)) = clusters.iter().find(|(_, s)| s.len() > 1) {
        return Err(format!("the objects of {cluster} are on {shards:?}"));
    }
    let reconciled: BTreeSet<(String, String)> =
        log.lock().iter().filter(|r| r.start >= since).map(|r| (r.object.clone(), r.replica.clone())).collect();
    if mode == ShardingMode::NamespaceRanges {
        // The API server filters each replica's watch: its cache holds its own objects only.
        for shard in live {
            let cached: BTreeSet<String> = match stores.lock().get(*shard) {
                Some(store) => store.state().iter().filter_map(|o| o.metadata.name.clone()).collect(),
                None => return Err(format!("no cache for {shard}")),
            };
            let own: BTreeSet<String> =
                owners.iter().filter(|(_, s)| s.as_str() == *shard).map(|(n, _)| n.clone()).collect();
            if cached != own {
                return Err(format!(
                    "{shard} caches {} objects, {} of them not its own; it owns {}",
                    cached.len(),
                    cached.difference(&own).count(),
                    own.len()
                ));
            }
        }
    }
    for (name, shard) in &owners {
        if !reconciled.contains(&(name.clone(), shard.clone())) {
            let cached = stores.lock().get(shard.as_str()).map(|store| {
                store
                    .state()
                    .iter()
                    .find(|o| o.metadata.name.as_deref() == Some(name.as_str()))
                    .map(|o| o.metadata.labels.clone())
            });
            let recent: BTreeMap<String, usize> = log
                .lock()
                .iter()
                .filter(|r| r.end.elapsed() < Duration::from_secs(2))
                .fold(BTreeMap::new(), |mut m, r| {
                    *m.entry(r.replica.clone()).or_insert(0) += 1;
                    m
                });
            let missing = owners.iter().filter(|(n, s)| !reconciled.contains(&((*n).clone(), (*s).clone()))).count();
            return Err(format!(
                "{name} not yet reconciled by its shard {shard} ({missing} missing); in its cache: {cached:?}; reconciles in the last 2 s: {recent:?}"
            ));
        }
    }
    Ok(())
}

/// Pairs of reconciles of one object by two replicas whose intervals overlap.
fn overlaps(log: &[Record]) -> Vec<(Record, Record)> {
    let mut by_object: BTreeMap<&str, Vec<&Record>> = BTreeMap::new();
    for r in log {
        by_object.entry(r.object.as_str()).or_default().push(r);
    }
    let mut out = Vec::new();
    for records in by_object.values_mut() {
        records.sort_by_key(|r| r.start);
        // Sorted by start: a record overlaps an earlier one iff it starts before the latest
        // end so far of another replica.
        let mut latest: HashMap<&str, &Record> = HashMap::new();
        for r in records.iter() {
            for (replica, earlier) in &latest {
                if *replica != r.replica && earlier.end > r.start {
                    out.push(((*earlier).clone(), (*r).clone()));
                }
            }
            let entry = latest.entry(r.replica.as_str()).or_insert(r);
            if r.end > entry.end {
                *entry = r;
            }
        }
    }
    out
}

fn no_overlaps(log: &Log, after: &str) {
    let overlapping = overlaps(&log.lock());
    assert!(
        overlapping.is_empty(),
        "after {after}: {} overlapping reconciles, the first: {:?}",
        overlapping.len(),
        overlapping.first()
    );
}

#[test]
fn overlap_detection_finds_overlaps_and_only_them() {
    let t = Instant::now();
    let at = |ms: u64| t + Duration::from_millis(ms);
    let rec = |replica: &str, object: &str, start: u64, end: u64| Record {
        replica: replica.into(),
        object: object.into(),
        start: at(start),
        end: at(end),
    };
    let fine = [rec("a", "x", 0, 10), rec("b", "x", 10, 20), rec("a", "x", 25, 30), rec("b", "y", 0, 30)];
    assert!(overlaps(&fine).is_empty());
    let bad = [rec("a", "x", 0, 100), rec("a", "x", 5, 6), rec("b", "x", 50, 60)];
    assert_eq!(overlaps(&bad).len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_share_300_objects_through_kills_partitions_and_rescaling() {
    scenario(ShardingMode::Labels).await;
}

/// The same run with server-side sharded watches (KEP-5866) by namespace hash ranges.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_with_server_side_sharded_watches_by_namespace() {
    scenario(ShardingMode::NamespaceRanges).await;
}

/// A label naming no shard, set by hand on object-007, is corrected with a Warning event.
async fn hand_edited_label(admin: &kube::Client, log: &Log, mode: ShardingMode, stores: &Stores) {
    let cms: Api<ConfigMap> = Api::all(admin.clone());
    let edited = Instant::now();
    Api::<ConfigMap>::namespaced(admin.clone(), &cluster(7))
        .patch(
            "object-007",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"metadata": {"labels": {SHARD_LABEL: "replica-9"}}})),
        )
        .await
        .expect("the label is edited");
    eventually("the edited label is corrected", CONVERGE, || {
        converged(&cms, log, &["replica-0", "replica-2"], edited, mode, stores)
    })
    .await;
    let events: Api<Event> = Api::all(admin.clone());
    eventually("a ShardLabelCorrected event", CONVERGE, || {
        let events = events.clone();
        async move {
            let list = events.list(&ListParams::default()).await.map_err(|e| e.to_string())?;
            let found = list.items.iter().any(|e| {
                e.reason.as_deref() == Some("ShardLabelCorrected")
                    && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("object-007")
            });
            if found { Ok(()) } else { Err("no event yet".into()) }
        }
    })
    .await;
}

async fn scenario(mode: ShardingMode) {
    let mut builder =
        TestEnv::builder().authentication(true).sharded_list_and_watch(mode == ShardingMode::NamespaceRanges);
    for name in REPLICAS {
        builder = builder.static_token(token(name), UserInfo::new(name, &[]));
    }
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let env = builder.start().await.expect("testenv starts");
    let admin = env.client();
    let cms: Api<ConfigMap> = Api::all(admin.clone());
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(admin.clone());
    for i in 0..OBJECTS {
        if i % 2 == 0 {
            let ns =
                serde_json::from_value(serde_json::json!({"metadata": {"name": cluster(i)}})).expect("a Namespace");
            namespaces.create(&PostParams::default(), &ns).await.expect("a namespace is created");
        }
        Api::<ConfigMap>::namespaced(admin.clone(), &cluster(i))
            .create(&PostParams::default(), &object(i))
            .await
            .expect("an object is created");
    }
    let stores: Stores = Arc::new(Mutex::new(HashMap::new()));
    let log: Log = Arc::new(Mutex::new(Vec::new()));
    let mut incarnations: HashMap<&str, u32> = HashMap::new();
    let mut next = |name: &'static str| {
        let n = incarnations.entry(name).or_insert(0);
        *n += 1;
        *n
    };

    // Three replicas: everything assigned and reconciled, spread over all three.
    let since = Instant::now();
    let mut replicas = BTreeMap::new();
    for name in &REPLICAS[..3] {
        replicas.insert(*name, Replica::start(&env, name, next(name), &log, mode, &stores).await);
    }
    eventually("three shards", CONVERGE, || converged(&cms, &log, &REPLICAS[..3], since, mode, &stores)).await;
    no_overlaps(&log, "three replicas");
    println!("3 replicas: {:?}", since.elapsed());
    let spread: BTreeSet<String> = log.lock().iter().map(|r| r.replica.clone()).collect();
    assert_eq!(spread.len(), 3, "all three replicas work: {spread:?}");

    // Kill replica-1 without releasing anything: its objects move after its Lease expires.
    let killed = Instant::now();
    replicas.remove("replica-1").expect("replica-1 runs").kill();
    eventually("replica-1's objects move", CONVERGE, || {
        converged(&cms, &log, &["replica-0", "replica-2"], killed, mode, &stores)
    })
    .await;
    let rebalance = killed.elapsed();
    no_overlaps(&log, "a kill");

    // Cut replica-2 off: it stops (fenced) before its objects move to replica-0, and writes
    // nothing while cut off; healed, it rejoins and gets its share back.
    let partitioned = Instant::now();
    env.handle().faults().partition("replica-2");
    let held = replicas["replica-2"].held.clone();
    eventually("replica-2 is fenced", CONVERGE, || {
        let held = held.clone();
        async move { if held.is_leader() { Err("still holds its shard".into()) } else { Ok(()) } }
    })
    .await;
    let fenced = Instant::now();
    eventually("replica-2's objects move to replica-0", CONVERGE, || {
        converged(&cms, &log, &["replica-0"], partitioned, mode, &stores)
    })
    .await;
    let healed = Instant::now();
    env.handle().faults().heal("replica-2");
    eventually("replica-2 rejoins", CONVERGE, || {
        converged(&cms, &log, &["replica-0", "replica-2"], healed, mode, &stores)
    })
    .await;
    let while_fenced: Vec<Record> = log
        .lock()
        .iter()
        .filter(|r| r.replica == "replica-2" && r.start >= fenced && r.start < healed)
        .cloned()
        .collect();
    assert!(while_fenced.is_empty(), "replica-2 reconciled while fenced: {while_fenced:?}");
    no_overlaps(&log, "a partition");
    println!(
        "partition: fenced after {:?}, moved after {:?}, rejoined after {:?}",
        fenced - partitioned,
        healed - partitioned,
        healed.elapsed()
    );

    // A hand-edited label naming no shard is corrected, with a Warning event (label mode).
    if mode == ShardingMode::Labels {
        hand_edited_label(&admin, &log, mode, &stores).await;
    }

    // Scale out to five (replica-1 comes back as a new process of the same pod name).
    let scaled_out = Instant::now();
    for name in ["replica-1", "replica-3", "replica-4"] {
        replicas.insert(name, Replica::start(&env, name, next(name), &log, mode, &stores).await);
    }
    eventually("five shards", CONVERGE, || converged(&cms, &log, &REPLICAS, scaled_out, mode, &stores)).await;
    let rescale_out = scaled_out.elapsed();
    no_overlaps(&log, "scaling out");
    let owners: BTreeSet<String> = cms
        .list(&ListParams::default().labels(VERSION_LABEL))
        .await
        .expect("a list")
        .items
        .iter()
        .filter_map(|cm| owner(cm, mode, &REPLICAS))
        .collect();
    assert_eq!(owners.len(), 5, "all five shards hold objects: {owners:?}");

    // Scale in to one, cleanly: the four others release their Leases.
    let scaled_in = Instant::now();
    for name in ["replica-1", "replica-2", "replica-3", "replica-4"] {
        replicas.remove(name).expect("running").stop().await;
    }
    eventually("one shard", CONVERGE, || converged(&cms, &log, &["replica-0"], scaled_in, mode, &stores)).await;
    let rescale_in = scaled_in.elapsed();
    no_overlaps(&log, "scaling in");

    for (_, replica) in replicas {
        replica.stop().await;
    }
    no_overlaps(&log, "the whole run");
    let log = log.lock().clone();
    if mode == ShardingMode::Labels {
        let moved: Vec<Event> = Api::<Event>::all(admin)
            .list(&ListParams::default())
            .await
            .expect("events")
            .items
            .into_iter()
            .filter(|e| e.reason.as_deref() == Some("ShardMoved"))
            .collect();
        assert!(!moved.is_empty(), "moves are announced by events");
    }
    println!(
        "reconciles: {}; rebalance after a kill: {rebalance:?}; 3→5: {rescale_out:?}; 5→1: {rescale_in:?}",
        log.len()
    );
}

/// Namespace ranges on a server that does not serve `shardSelector` (the feature gate off, as
/// on servers before 1.36): the replica does not fall back to caching everything; its watch
/// fails, and nothing is reconciled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn namespace_ranges_refuse_a_server_that_ignores_shard_selectors() {
    let env = TestEnv::builder()
        .authentication(true)
        .static_token(token("replica-0"), UserInfo::new("replica-0", &[]))
        .start()
        .await
        .expect("testenv starts");
    let admin = env.client();
    for i in 0..4 {
        let ns =
            serde_json::from_value(serde_json::json!({"metadata": {"name": cluster(i * 2)}})).expect("a Namespace");
        Api::<k8s_openapi::api::core::v1::Namespace>::all(admin.clone())
            .create(&PostParams::default(), &ns)
            .await
            .expect("a namespace");
        Api::<ConfigMap>::namespaced(admin.clone(), &cluster(i * 2))
            .create(&PostParams::default(), &object(i * 2))
            .await
            .expect("an object");
    }
    let log: Log = Arc::new(Mutex::new(Vec::new()));
    let stores: Stores = Arc::new(Mutex::new(HashMap::new()));
    let replica = Replica::start(&env, "replica-0", 1, &log, ShardingMode::NamespaceRanges, &stores).await;
    let held = replica.held.clone();
    eventually("the shard Lease", CONVERGE, || {
        let held = held.clone();
        async move { if held.is_leader() { Ok(()) } else { Err("not yet".into()) } }
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let cached = stores.lock().get("replica-0").map(|s| s.state().len());
    assert_eq!(cached, Some(0), "nothing is cached from an unsharded list");
    assert!(log.lock().is_empty(), "nothing is reconciled: {:?}", log.lock().first());
    replica.stop().await;
}

/// `/readyz` turns ready once the shard holds its Lease, and the sharding metrics count what
/// happened: objects per shard, assignments, Lease renewals.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_and_metrics_follow_the_shard() {
    let env = TestEnv::start().await.expect("testenv starts");
    let client = env.client();
    for i in 0..6 {
        let ns =
            serde_json::from_value(serde_json::json!({"metadata": {"name": cluster(i * 2)}})).expect("a Namespace");
        Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .expect("a namespace");
        Api::<ConfigMap>::namespaced(client.clone(), &cluster(i * 2))
            .create(&PostParams::default(), &object(i * 2))
            .await
            .expect("an object");
    }
    let config = ShardingConfig {
        shard: "replica-0".into(),
        identity: "replica-0_1".into(),
        lease_duration: Duration::from_secs(2),
        renew_deadline: Duration::from_millis(1500),
        retry_period: Duration::from_millis(300),
        ..ShardingConfig::new(NS, RING)
    };
    let sharding = Sharding::new(client.clone(), config, label_key(CLUSTER)).expect("valid settings");
    let readiness = operatorkit::Readiness::new();
    sharding.readiness(&readiness);
    let mut registry = prometheus_client::registry::Registry::default();
    sharding.register_metrics(&mut registry);
    assert!(!readiness.is_ready(), "not ready before the shard holds its Lease");
    let set = ResourceSet::with_default_state("v1", VersionReq::parse("^1").expect("requirement"))
        .resource(Recorder { replica: "replica-0".into(), log: Arc::new(Mutex::new(Vec::new())) })
        .build();
    let controller = Controller::<ConfigMap>::builder(client.clone(), "sharding-test")
        .operator(OPERATOR)
        .routing(Routing::Legacy { version: Version::new(1, 0, 0) })
        .sharding(&sharding)
        .resource_set(set)
        .build()
        .expect("the controller builds");
    let shutdown = CancellationToken::new();
    let member = tokio::spawn(sharding.clone().run(Leadership::always(), shutdown.clone()));
    let running = tokio::spawn(controller.run(shutdown.clone()));
    eventually("ready", CONVERGE, || {
        let ready = readiness.is_ready();
        async move { if ready { Ok(()) } else { Err("not ready".into()) } }
    })
    .await;
    let cms: Api<ConfigMap> = Api::all(client.clone());
    eventually("every object assigned", CONVERGE, || {
        let cms = cms.clone();
        async move {
            let list = cms.list(&ListParams::default().labels(VERSION_LABEL)).await.map_err(|e| e.to_string())?;
            let assigned = list.items.iter().filter(|cm| owner(cm, ShardingMode::Labels, &[]).is_some()).count();
            if assigned == 6 { Ok(()) } else { Err(format!("{assigned} assigned")) }
        }
    })
    .await;
    // Two renewals at least, and a pass of the sharder after the last assignment.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).expect("metrics encode");
    let value = |prefix: &str| -> f64 {
        text.lines()
            .find(|l| l.starts_with(prefix))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(-1.0)
    };
    assert_eq!(value("operatorkit_sharding_lease_held{"), 1.0, "{text}");
    assert!(value("operatorkit_sharding_lease_renewals_total{") >= 2.0, "{text}");
    assert_eq!(value("operatorkit_sharding_objects{"), 6.0, "{text}");
    assert!(value("operatorkit_sharding_assignment_requests_total") >= 6.0, "{text}");
    shutdown.cancel();
    let _ = running.await;
    let _ = member.await;
    assert!(!readiness.is_ready(), "not ready after leaving the ring");
}

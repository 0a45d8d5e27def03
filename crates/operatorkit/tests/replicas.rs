//! Two replicas of one controller, each with its own Lease elector, over the same objects: at no
//! moment do both write, across several takeovers forced by failing lease renewals.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use operatorkit::leader::{LeaderElectionConfig, LeaderElector};
use operatorkit::{Controller, Leadership, Outcome, Resource, ResourceSet, resource};
use parking_lot::Mutex;
use semver::VersionReq;
use testenv::{RequestMatch, Verb};
use tokio_util::sync::CancellationToken;

const LEASE: &str = "replicas-test";

/// One write made by a replica, and whether the other replica was leading at that moment.
#[derive(Clone, Debug)]
struct Write {
    replica: &'static str,
    other_was_leading: bool,
}

/// A resource that writes to a ConfigMap per object on every reconcile and records each write
/// together with the other replica's leadership at that instant.
struct Writer {
    replica: &'static str,
    other: Leadership,
    client: kube::Client,
    log: Arc<Mutex<Vec<Write>>>,
}

impl Resource<ConfigMap, ()> for Writer {
    fn name(&self) -> &str {
        "writer"
    }

    async fn ensure_created(&self, _: &mut (), obj: &ConfigMap) -> resource::Result<Outcome> {
        let other_was_leading = self.other.is_leader();
        let cms: Api<ConfigMap> = Api::namespaced(self.client.clone(), NS);
        let name = format!("{}-written", obj.metadata.name.as_deref().unwrap_or_default());
        let body = ConfigMap {
            metadata: kube::api::ObjectMeta { name: Some(name.clone()), ..Default::default() },
            data: Some(BTreeMap::from([("writer".to_string(), self.replica.to_string())])),
            ..Default::default()
        };
        cms.patch(&name, &PatchParams::apply(self.replica).force(), &Patch::Apply(&body)).await?;
        self.log.lock().push(Write { replica: self.replica, other_was_leading });
        // Keep reconciling, so that writes are in flight whenever leadership moves.
        Ok(Outcome::proceed().requeue_after(Duration::from_millis(50)))
    }

    async fn ensure_deleted(&self, _: &mut (), _: &ConfigMap) -> resource::Result<Outcome> {
        Ok(Outcome::proceed())
    }
}

fn election(identity: &str) -> LeaderElectionConfig {
    LeaderElectionConfig {
        identity: identity.to_string(),
        lease_duration: Duration::from_secs(2),
        renew_deadline: Duration::from_millis(1500),
        retry_period: Duration::from_millis(200),
        ..LeaderElectionConfig::new(NS, LEASE)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_under_leader_election_never_both_write() {
    logs();
    let h = Harness::start().await;
    h.create_release("v20.0.0", "1.2.0").await;
    for i in 0..5 {
        h.create_cluster(&format!("cluster-{i}"), Some("20.0.0")).await;
    }

    let shutdown = CancellationToken::new();
    let log = Arc::new(Mutex::new(Vec::new()));
    let electors = [
        LeaderElector::new(h.client.clone(), election("replica-a")).expect("a valid election config"),
        LeaderElector::new(h.client.clone(), election("replica-b")).expect("a valid election config"),
    ];
    let leaderships = [electors[0].leadership(), electors[1].leadership()];
    let names = ["replica-a", "replica-b"];
    let mut tasks = Vec::new();
    for (i, elector) in electors.into_iter().enumerate() {
        let set = ResourceSet::with_default_state("v1", VersionReq::parse("^1").expect("requirement"))
            .resource(Writer {
                replica: names[i],
                other: leaderships[1 - i].clone(),
                client: h.client.clone(),
                log: log.clone(),
            })
            .build();
        let controller = Controller::<ConfigMap>::builder(h.client.clone(), "replicas-test")
            .operator(OPERATOR)
            .api(Api::namespaced(h.client.clone(), NS))
            .label_selector(SELECTOR)
            .leadership(leaderships[i].clone())
            .resource_set(set)
            .build()
            .expect("the controller builds");
        let election = shutdown.clone();
        tasks.push(tokio::spawn(async move {
            elector.run(election).await.expect("the elector runs until shutdown");
        }));
        tasks.push(tokio::spawn(controller.run(shutdown.clone())));
    }

    // Force takeovers: make lease renewals fail until the leader steps down and the lease
    // changes hands (or is re-acquired), several times over.
    let leases: Api<Lease> = Api::namespaced(h.client.clone(), NS);
    let holder =
        || async { leases.get_opt(LEASE).await.ok().flatten().and_then(|l| l.spec.and_then(|s| s.holder_identity)) };
    eventually("a first leader", || async { holder().await.is_some() }).await;
    for round in 0..3 {
        let writes_before = log.lock().len();
        eventually("writes under the current leader", || async { log.lock().len() > writes_before + 10 }).await;
        let leader = leaderships.iter().position(Leadership::is_leader);
        h.env.handle().faults().fail_next(RequestMatch::new(Verb::Update, "leases").named(LEASE), 40, 500);
        if let Some(i) = leader {
            eventually(&format!("round {round}: the leader steps down"), || async { !leaderships[i].is_leader() })
                .await;
        }
        eventually(&format!("round {round}: a leader again"), || async {
            leaderships.iter().any(Leadership::is_leader)
        })
        .await;
    }
    let writes_before = log.lock().len();
    eventually("writes after the last takeover", || async { log.lock().len() > writes_before + 10 }).await;
    shutdown.cancel();
    for task in tasks {
        let _ = tokio::time::timeout(WAIT, task).await;
    }

    let log = log.lock().clone();
    let overlapping: Vec<&Write> = log.iter().filter(|w| w.other_was_leading).collect();
    assert!(overlapping.is_empty(), "writes made while the other replica led: {overlapping:?}");
    let transitions = leases.get(LEASE).await.expect("the lease").spec.and_then(|s| s.lease_transitions).unwrap_or(0);
    assert!(log.len() > 40, "the replicas kept writing: {} writes", log.len());
    // Both replicas led at some point, unless the same one re-acquired the lease every round
    // (possible, as in client-go); the lease records every change of holder either way.
    let writers: std::collections::BTreeSet<&str> = log.iter().map(|w| w.replica).collect();
    assert_eq!(writers.len() as i32 > 1, transitions > 0, "writers {writers:?} vs {transitions} lease transitions");
}

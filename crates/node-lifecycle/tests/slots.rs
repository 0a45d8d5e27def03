//! Rollout slots on one API server shared by several users, as operator replicas share it:
//! racing users never hold more slots than the limit, a holder keeps its slot across calls and
//! gains members, the last member's release frees it, and a slot whose members are gone is
//! taken over.

use std::collections::BTreeSet;
use std::sync::Arc;

use node_lifecycle::slots::{Acquired, Slots};
use testenv::TestEnv;

const NS: &str = "default";

async fn always_alive(_: String) -> bool {
    true
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_users_never_hold_more_slots_than_the_limit() -> anyhow::Result<()> {
    let env = TestEnv::start().await?;
    // Two users (two replicas) with their own clients; eight holders race for two slots, each
    // through both users at once.
    let users =
        [Slots::new(env.client(), NS, "rolling-clusters", 2), Slots::new(env.client(), NS, "rolling-clusters", 2)];
    let users = Arc::new(users);
    let mut tasks = Vec::new();
    for i in 0..8 {
        for u in 0..2 {
            let users = users.clone();
            tasks.push(tokio::spawn(async move {
                let holder = format!("cluster-{i}");
                let got = users[u].acquire(&holder, &holder, always_alive).await;
                (holder, got)
            }));
        }
    }
    let mut winners = BTreeSet::new();
    for t in tasks {
        let (holder, got) = t.await?;
        if let Acquired::Held(_) = got? {
            winners.insert(holder);
        }
    }
    assert_eq!(winners.len(), 2, "two holders got the two slots: {winners:?}");
    let holders: BTreeSet<String> = users[0].holders().await?.into_iter().collect();
    assert_eq!(holders, winners, "the Leases name exactly the winners");

    // A winner asking again (from the other user) keeps its slot; a loser is told who holds them.
    let first = winners.iter().next().cloned().expect("a winner");
    assert!(matches!(users[1].acquire(&first, &first, always_alive).await?, Acquired::Held(_)));
    let loser = (0..8).map(|i| format!("cluster-{i}")).find(|h| !winners.contains(h)).expect("a loser");
    assert_eq!(
        users[0].acquire(&loser, &loser, always_alive).await?,
        Acquired::Busy(winners.iter().cloned().collect())
    );

    // A release frees the slot for the next one.
    users[1].release(&first, &first).await?;
    assert!(matches!(users[0].acquire(&loser, &loser, always_alive).await?, Acquired::Held(_)));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slot_is_freed_by_its_last_member_or_when_its_members_are_gone() -> anyhow::Result<()> {
    let env = TestEnv::start().await?;
    let slots = Slots::new(env.client(), NS, "rolling-clusters", 1);
    // A cluster's control plane and a pool both need the cluster's slot.
    assert!(slots.acquire("c1", "cp/c1", always_alive).await?.is_held());
    assert!(slots.acquire("c1", "pool/np1", always_alive).await?.is_held());
    slots.release("c1", "cp/c1").await?;
    assert_eq!(
        slots.acquire("c2", "pool/x", always_alive).await?,
        Acquired::Busy(vec!["c1".into()]),
        "np1 still rolls"
    );
    slots.release("c1", "pool/np1").await?;
    assert!(slots.holders().await?.is_empty(), "the last member freed it");
    assert!(slots.acquire("c2", "pool/x", always_alive).await?.is_held());
    // c2's member is deleted without releasing: the next one that finds the slot taken takes it.
    let gone = |m: String| async move { m != "pool/x" };
    assert!(slots.acquire("c3", "pool/y", gone).await?.is_held());
    assert_eq!(slots.holders().await?, ["c3"]);
    // Without a limit nothing is written.
    let unlimited = Slots::new(env.client(), NS, "rolling-pools", 0);
    assert_eq!(unlimited.acquire("p", "p", always_alive).await?, Acquired::Unlimited);
    assert!(Slots::new(env.client(), NS, "rolling-pools", 5).holders().await?.is_empty());
    Ok(())
}

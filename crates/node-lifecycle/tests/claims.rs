//! The claim of a cluster id against an API server: one holder per id, an earlier version's
//! namespace adopted only with proof, and nothing released that is not the holder's.

use std::collections::BTreeMap;

use apis::cluster_id::Owner;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::PostParams;
use kube::{Api, ResourceExt};
use node_lifecycle::claims::{Claim, claim, release};
use testenv::TestEnv;

fn owner(namespace: &str, uid: &str, reconciled_before: bool) -> Owner {
    Owner {
        kind: "KVMConfig".into(),
        namespace: namespace.into(),
        name: "qz7lt".into(),
        uid: uid.into(),
        id: "qz7lt".into(),
        reconciled_before,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_object_holds_an_id_and_only_it_releases_it() -> anyhow::Result<()> {
    let env = TestEnv::start().await?;
    let client = env.client();
    let nss: Api<Namespace> = Api::all(client.clone());
    let (acme, evil) = (owner("org-acme", "uid-acme", false), owner("org-evil", "uid-evil", false));
    let extra = BTreeMap::from([("giantswarm.io/organization".to_string(), "acme".to_string())]);

    assert_eq!(claim(&client, &acme, &extra, false).await?, Claim::Free, "looking creates nothing");
    assert!(nss.get_opt("qz7lt").await?.is_none());
    // Two claims at once: the API server lets one create the namespace.
    let none = BTreeMap::new();
    let (a, e) = tokio::join!(claim(&client, &acme, &extra, true), claim(&client, &evil, &none, true));
    let (a, e) = (a?, e?);
    assert!(matches!((&a, &e), (Claim::Held, Claim::InUse { .. }) | (Claim::InUse { .. }, Claim::Held)), "{a:?} {e:?}");
    let (holder, other) = if a == Claim::Held { (&acme, &evil) } else { (&evil, &acme) };
    let ns = nss.get("qz7lt").await?;
    assert_eq!(ns.labels().get("giantswarm.io/cluster-uid"), Some(&holder.uid));
    assert_eq!(ns.annotations().get("giantswarm.io/cluster-owner"), Some(&holder.describe()));
    assert_eq!(
        claim(&client, other, &BTreeMap::new(), true).await?,
        Claim::InUse { holder: holder.describe() },
        "the loser is told who holds the id"
    );
    assert_eq!(claim(&client, holder, &BTreeMap::new(), true).await?, Claim::Held, "held again, idempotently");

    // The other object's release leaves the namespace alone; the holder's deletes it.
    assert!(release(&client, other).await?, "nothing of the other object's is left");
    assert!(nss.get("qz7lt").await?.metadata.deletion_timestamp.is_none());
    release(&client, holder).await?;
    let gone = nss.get_opt("qz7lt").await?;
    assert!(gone.is_none_or(|ns| ns.metadata.deletion_timestamp.is_some()), "the holder's release deletes the claim");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_earlier_versions_namespace_is_adopted_only_with_proof_and_a_foreign_one_never() -> anyhow::Result<()> {
    let env = TestEnv::start().await?;
    let client = env.client();
    let nss: Api<Namespace> = Api::all(client.clone());
    for (name, labels) in [("qz7lt", serde_json::json!({"cluster": "qz7lt"})), ("kvm01", serde_json::json!({}))] {
        let ns: Namespace = serde_json::from_value(serde_json::json!({"metadata": {"name": name, "labels": labels}}))?;
        nss.create(&PostParams::default(), &ns).await?;
    }
    // A new object (no status the operator wrote) cannot take an earlier version's namespace.
    let newcomer = owner("org-evil", "uid-evil", false);
    assert!(matches!(claim(&client, &newcomer, &BTreeMap::new(), true).await?, Claim::InUse { .. }));
    assert!(release(&client, &newcomer).await?);
    assert!(nss.get_opt("qz7lt").await?.is_some(), "an unproven release deletes nothing");
    // The object the operator reconciled before adopts it: labelled with its UID from now on.
    let old = owner("default", "uid-old", true);
    assert_eq!(claim(&client, &old, &BTreeMap::new(), false).await?, Claim::Held);
    let ns = nss.get("qz7lt").await?;
    assert_eq!(ns.labels().get("giantswarm.io/cluster-uid").map(String::as_str), Some("uid-old"));
    assert_eq!(ns.labels().get("cluster").map(String::as_str), Some("qz7lt"), "what it carried stays");
    assert!(matches!(claim(&client, &newcomer, &BTreeMap::new(), true).await?, Claim::InUse { .. }));
    // A namespace that names no cluster is never anyone's, proof or not.
    let mut other = owner("default", "uid-old", true);
    other.id = "kvm01".into();
    assert!(matches!(claim(&client, &other, &BTreeMap::new(), true).await?, Claim::InUse { .. }));
    assert!(release(&client, &other).await?);
    assert!(nss.get("kvm01").await?.metadata.deletion_timestamp.is_none());
    Ok(())
}

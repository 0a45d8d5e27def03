//! A node config that fails its checks, end to end: the example cluster, created and running,
//! relabelled to a Release whose Kubernetes the checks do not know (1.35, for which no
//! `KubeletConfiguration` field list is kept) gets `Ready=False` with reason
//! `NodeConfigInvalid` naming the node, the file and the problem, and a Warning event; no node
//! Secret, Deployment or VM pod changes, and the cluster stays on its Release.

mod support;

use std::collections::BTreeMap;

use apis::cluster_status::ClusterCondition;
use apis::release::Release;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Pod, Secret};
use k8s_openapi::api::events::v1::Event;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use support::*;

/// Every object `api` lists, by name, with its resource version (which any write changes) and
/// its UID (which a replacement changes).
async fn versions<K>(api: &Api<K>) -> anyhow::Result<BTreeMap<String, (String, String)>>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    Ok(api
        .list(&ListParams::default())
        .await?
        .items
        .iter()
        .map(|o| (o.name_any(), (o.resource_version().unwrap_or_default(), o.uid().unwrap_or_default())))
        .collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_whose_node_configs_fail_their_checks_is_refused_and_nothing_running_is_replaced()
-> anyhow::Result<()> {
    let w = World::start().await?;
    let configs = w.configs();
    configs.create(&PostParams::default(), &kvm_config()).await?;
    let config = settled(&w, ClusterCondition::Created, "20.1.0", 8).await?;
    let master = config.spec.cluster.masters.first().map(|m| m.id.clone()).expect("a master");
    let (secrets, deployments, pods): (Api<Secret>, Api<Deployment>, Api<Pod>) = (
        Api::namespaced(w.client.clone(), ID),
        Api::namespaced(w.client.clone(), ID),
        Api::namespaced(w.client.clone(), ID),
    );
    let before = (versions(&secrets).await?, versions(&deployments).await?, versions(&pods).await?);
    assert_eq!(before.1.len(), 8, "a Deployment per node: {:?}", before.1.keys());

    // The example Release but for Kubernetes 1.35.0.
    Api::<Release>::all(w.client.clone()).create(&PostParams::default(), &release("20.2.0", "1.35.0")).await?;
    let patch = serde_json::json!({"metadata": {"labels": {"release.giantswarm.io/version": "20.2.0"}}});
    configs.patch(ID, &PatchParams::default(), &Patch::Merge(&patch)).await?;

    let (reason, message) = not_ready(&w, "NodeConfigInvalid").await?;
    assert_eq!(reason, "NodeConfigInvalid", "{message}");
    for part in [
        format!("node {master}: /etc/kubernetes/config/kubelet.yaml"),
        "KubeletConfiguration of Kubernetes v1.35.0: no field list is kept for 1.35".to_string(),
        "nothing is applied and no node is replaced".to_string(),
    ] {
        assert!(message.contains(&part), "{part:?} in {message}");
    }
    let events: Api<Event> = Api::namespaced(w.client.clone(), NS);
    let warning = eventually("a Warning event NodeConfigInvalid", 30, || async {
        Ok(events.list(&ListParams::default()).await?.items.into_iter().find(|e| {
            e.type_.as_deref() == Some("Warning")
                && e.reason.as_deref() == Some("NodeConfigInvalid")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(ID)
        }))
    })
    .await?;
    let note = warning.note.unwrap_or_default();
    assert!(note.contains("kubelet.yaml") && note.contains("1.35"), "{note}");

    // A few resyncs later: no node Secret, Deployment or pod was written or replaced, and the
    // cluster's nodes are still on the Release they run.
    tokio::time::sleep(RESYNC * 3).await;
    let after = (versions(&secrets).await?, versions(&deployments).await?, versions(&pods).await?);
    assert_eq!(after.0, before.0, "the node Secrets are as they were");
    assert_eq!(after.1, before.1, "the Deployments are as they were");
    assert_eq!(after.2, before.2, "the VM pods are as they were");
    let status = configs.get(ID).await?.status.unwrap_or_default();
    assert!(status.cluster.nodes.iter().all(|n| n.version == "20.1.0"), "{:?}", status.cluster.nodes);
    Ok(())
}

//! The management cluster's identity in a workload cluster can do what the operators do there
//! (drains, the node watch, node health, deleting a vanished VM's node) and nothing more.
//!
//! The workload cluster is a testenv that authorizes with RBAC. The RBAC objects are the bytes a
//! master writes and applies (`ignition::access::master_files`), applied the way its script does
//! (server-side apply to each object's path). The user and groups are those of the client
//! certificate in the `<id>-kubeconfig` Secret the operators issue, read from the certificate,
//! as kube-apiserver's x509 authenticator maps them; testenv authenticates by bearer token only,
//! so a static token stands for that certificate.

use std::time::{Duration, SystemTime};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod, Secret};
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::{DeleteParams, EvictParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use kube::{Api, Client};
use pki::ensure::{EncryptionFormat, EnsureRequest, plan};
use testenv::{TestEnv, UserInfo};

const TOKEN: &str = "management-cluster-client-certificate";

fn names() -> pki::ClusterNames {
    pki::ClusterNames {
        cluster_id: "m4cc3".into(),
        api_domain: "api.m4cc3.k8s.example.com".into(),
        internal_api_domain: None,
        etcd_domain: "etcd.m4cc3.k8s.example.com".into(),
        etcd_member_domains: Vec::new(),
        cluster_domain: "cluster.local".into(),
        service_cidr: "172.31.0.0/16".into(),
    }
}

/// The user and groups of the client certificate in the `<id>-kubeconfig` Secret the operators
/// issue for a cluster without Secrets.
fn issued_identity() -> (String, Vec<String>) {
    let names = names();
    let request = EnsureRequest {
        namespace: "org-access",
        names: &names,
        encryption: EncryptionFormat::ProviderConfig,
        options: pki::IssueOptions::at(SystemTime::now()),
        renewal: pki::RenewalPolicy::default(),
        kubeconfig_server: Some("https://api.m4cc3.k8s.example.com".into()),
    };
    let planned = plan(&[], &request).expect("plan");
    let secret: &Secret = planned
        .create
        .iter()
        .find(|s| s.metadata.name.as_deref() == Some("m4cc3-kubeconfig"))
        .expect("a kubeconfig Secret is issued");
    let (server, files) = pki::kubeconfig::read(secret).expect("a kubeconfig with embedded certificates");
    assert_eq!(server, "https://api.m4cc3.k8s.example.com");
    let info = pki::inspect(&files.crt).expect("the client certificate parses");
    (info.common_name.expect("a common name"), info.organizations)
}

/// A workload cluster with RBAC, the access a master applies, one node and a pod on it.
async fn workload_cluster(user: &str, groups: &[String]) -> anyhow::Result<(TestEnv, Client)> {
    let groups: Vec<&str> = groups.iter().map(String::as_str).collect();
    let env = TestEnv::builder().rbac(true).static_token(TOKEN, UserInfo::new(user, &groups)).start().await?;
    let admin = env.client();
    let tls = ignition::kubernetes::TlsPaths {
        worker_crt: String::new(),
        worker_key: String::new(),
        worker_ca: String::new(),
        api_crt: "/etc/kubernetes/ssl/apiserver-crt.pem".into(),
        api_key: "/etc/kubernetes/ssl/apiserver-key.pem".into(),
        api_ca: "/etc/kubernetes/ssl/apiserver-ca.pem".into(),
        etcd_crt: String::new(),
        etcd_key: String::new(),
        etcd_ca: String::new(),
        service_account_key: String::new(),
        encryption_config: String::new(),
    };
    let files = ignition::access::master_files(&tls);
    for (path, file) in ignition::access::objects() {
        let body = &files.iter().find(|f| f.path == file).expect("the master writes the object").contents;
        // What the master's script sends: PATCH application/apply-patch+yaml, forced.
        let request = http::Request::patch(format!(
            "/apis/rbac.authorization.k8s.io/v1/{path}?fieldManager=cluster-operators&force=true"
        ))
        .header("Content-Type", "application/apply-patch+yaml")
        .body(body.clone())?;
        admin.request_text(request).await?;
    }
    let node: Node = serde_json::from_value(serde_json::json!({"metadata": {"name": "worker-1"}}))?;
    Api::<Node>::all(admin.clone()).create(&PostParams::default(), &node).await?;
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "web-1", "namespace": "default"},
        "spec": {"nodeName": "worker-1", "containers": [{"name": "web", "image": "nginx"}]},
    }))?;
    Api::<Pod>::namespaced(admin.clone(), "default").create(&PostParams::default(), &pod).await?;
    let client = env.handle().client_with_token(Some(TOKEN))?;
    Ok((env, client))
}

fn refused<T: std::fmt::Debug>(result: Result<T, kube::Error>, what: &str) {
    match result {
        Err(kube::Error::Api(status)) if status.code == 403 => {}
        other => panic!("{what}: expected 403 Forbidden, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_management_identity_can_drain_watch_and_check_nodes_and_nothing_more() -> anyhow::Result<()> {
    let (user, groups) = issued_identity();
    assert!(!groups.iter().any(|g| g == "system:masters"), "never system:masters: {groups:?}");
    assert_eq!(groups, [ignition::access::GROUP]);
    let (env, wc) = workload_cluster(&user, &groups).await?;
    let nodes: Api<Node> = Api::all(wc.clone());
    let pods: Api<Pod> = Api::all(wc.clone());

    // What the operators do (node_lifecycle::clients, drain, the kvm node watcher and deleter).
    assert_eq!(nodes.list(&ListParams::default()).await?.items.len(), 1, "node health lists the nodes");
    // The node watch: its list, then a change that only its watch can bring.
    let mut watch = std::pin::pin!(watcher::watcher(nodes.clone(), watcher::Config::default()));
    let label = serde_json::json!({"metadata": {"labels": {"changed": "yes"}}});
    let mut changed = false;
    let watched = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(event) = watch.next().await {
            match event.map_err(|e| format!("the node watch failed: {e}"))? {
                watcher::Event::InitDone if !changed => {
                    changed = true;
                    let admin: Api<Node> = Api::all(env.client());
                    admin
                        .patch("worker-1", &PatchParams::default(), &Patch::Merge(&label))
                        .await
                        .map_err(|e| e.to_string())?;
                }
                watcher::Event::Apply(node)
                    if node.metadata.labels.as_ref().is_some_and(|l| l.contains_key("changed")) =>
                {
                    return Ok::<_, String>(());
                }
                _ => {}
            }
        }
        Err("the node watch ended".to_string())
    })
    .await?;
    watched.map_err(anyhow::Error::msg)?;
    assert!(nodes.get_opt("worker-1").await?.is_some(), "a drain reads its node");
    let cordon = serde_json::json!({"spec": {"unschedulable": true}});
    nodes.patch("worker-1", &PatchParams::default(), &Patch::Merge(cordon)).await?;
    let listed = pods.list(&ListParams::default().fields("spec.nodeName=worker-1")).await?;
    assert_eq!(listed.items.len(), 1, "a drain lists the node's pods");
    Api::<Pod>::namespaced(wc.clone(), "default").evict("web-1", &EvictParams::default()).await?;
    nodes.delete("worker-1", &DeleteParams::default()).await?;

    // Nothing more.
    let secrets: Api<Secret> = Api::namespaced(wc.clone(), "kube-system");
    refused(secrets.list(&ListParams::default()).await, "listing Secrets");
    refused(secrets.get_opt("anything").await, "reading a Secret");
    let pod_in_default: Api<Pod> = Api::namespaced(wc.clone(), "default");
    refused(pod_in_default.get_opt("web-1").await, "reading a pod");
    refused(pod_in_default.delete("web-1", &DeleteParams::default()).await, "deleting a pod");
    let patch = serde_json::json!({"metadata": {"labels": {"x": "y"}}});
    refused(pod_in_default.patch("web-1", &PatchParams::default(), &Patch::Merge(patch)).await, "patching a pod");
    let node: Node = serde_json::from_value(serde_json::json!({"metadata": {"name": "intruder"}}))?;
    refused(nodes.create(&PostParams::default(), &node).await, "creating a node");
    refused(Api::<ConfigMap>::all(wc.clone()).list(&ListParams::default()).await, "listing ConfigMaps");
    let binding: ClusterRoleBinding = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "escalate"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": ignition::access::GROUP}],
    }))?;
    refused(
        Api::<ClusterRoleBinding>::all(wc.clone()).create(&PostParams::default(), &binding).await,
        "binding itself to cluster-admin",
    );

    // And every rule of its role was needed.
    let unused: Vec<_> = env
        .handle()
        .unused_rules(&UserInfo::new(&user, &groups.iter().map(String::as_str).collect::<Vec<_>>()))
        .into_iter()
        .filter(|r| format!("{:?}", r.source).contains(ignition::access::CLUSTER_ROLE))
        .collect();
    assert!(unused.is_empty(), "rules no operation used: {unused:?}");
    Ok(())
}

//! The management cluster's identity in a workload cluster: granted by the master, usable for
//! what the operators do there (drains, the node watch, node health, deleting a vanished VM's
//! node) and nothing more; and granted by the operator itself where the masters predate it.
//!
//! The workload cluster is a testenv that serves with the cluster's issued `api` certificate,
//! authenticates client certificates of the cluster CA (as kube-apiserver's `--client-ca-file`)
//! and authorizes with RBAC. The PKI is the one the operators issue for a cluster without
//! Secrets (`pki::ensure::plan`), the master's config is the one kvm-operator renders
//! (`kvm_objects::ignition::render`), and the grant is that config's own script, run below a
//! temporary root as its unit runs it, with the master's `api` certificate. The management
//! identity is the client certificate of the issued `<id>-kubeconfig`, read by the operators'
//! own kubeconfig reader.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node, Pod, Secret};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::api::{DeleteParams, EvictParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use kube::{Api, Client};
use kvm_objects::cluster::{Cluster, Role, Settings};
use kvm_objects::ignition::{EncryptionKey, NodeConfigInput, TlsAsset, render};
use node_lifecycle::clients::{ClientOptions, ClusterRef, Sensitive, WorkloadClients, config_from_kubeconfig};
use pki::ensure::{EncryptionFormat, EnsureRequest, plan};
use testenv::{ServingCertificate, TestEnv, UserInfo};

const FIXTURE: &str = include_str!("../../apis/tests/fixtures/kvmconfig-qz7lt.yaml");
const NS: &str = "org-gollum";

/// The fixture's cluster, as kvm-operator reads it.
fn cluster() -> Cluster {
    let config: apis::kvm::KVMConfig = serde_saphyr::from_str(FIXTURE).expect("fixture");
    let components = BTreeMap::from([
        ("containerlinux".to_string(), "3815.2.5".to_string()),
        ("kubernetes".to_string(), "1.29.9".to_string()),
        ("etcd".to_string(), "3.5.13".to_string()),
    ]);
    let settings = Settings {
        operator_version: "4.0.0".into(),
        dns_servers: vec!["10.99.0.53".into()],
        ntp_servers: vec!["10.99.0.123".into()],
        images: Default::default(),
    };
    Cluster::new(&config, "v20.1.0", &components, &settings).expect("valid fixture")
}

fn names(cluster: &Cluster) -> pki::ClusterNames {
    pki::ClusterNames {
        cluster_id: cluster.id.clone(),
        api_domain: cluster.api_domain.clone(),
        internal_api_domain: None,
        etcd_domain: cluster.etcd_domain.clone(),
        etcd_member_domains: Vec::new(),
        cluster_domain: ignition::kubernetes::CLUSTER_DOMAIN.to_string(),
        service_cidr: cluster.service_cidr.clone(),
    }
}

/// `existing` and what the operators issue besides: the whole PKI and key, and the management
/// kubeconfig for `kubeconfig_server` when given.
fn issue(names: &pki::ClusterNames, existing: &[Secret], kubeconfig_server: Option<String>) -> Vec<Secret> {
    let request = EnsureRequest {
        namespace: NS,
        names,
        encryption: EncryptionFormat::RandomKey,
        options: pki::IssueOptions::at(SystemTime::now()),
        renewal: pki::RenewalPolicy::default(),
        kubeconfig_server,
        service_account_v2: false,
    };
    let planned = plan(existing, &request).expect("plan");
    existing.iter().cloned().chain(planned.create).collect()
}

fn label<'a>(secret: &'a Secret, key: &str) -> Option<&'a str> {
    secret.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

/// The certificate Secret `name` (`api`, `worker`, …) of the issued PKI.
fn certificate(secrets: &[Secret], name: &str) -> pki::CertificateFiles {
    let secret = secrets
        .iter()
        .find(|s| label(s, pki::secret::CERTIFICATE_LABEL) == Some(name))
        .unwrap_or_else(|| panic!("a {name} certificate is issued"));
    pki::secret::certificate_files(secret).expect("ca, crt and key")
}

/// The workload cluster's API server: the issued `api` certificate serves, the cluster CA
/// authenticates clients, RBAC authorizes. One node and a pod on it.
async fn workload_cluster(secrets: &[Secret]) -> anyhow::Result<TestEnv> {
    let api = certificate(secrets, "api");
    let env = TestEnv::builder()
        .rbac(true)
        .serving_certificate(ServingCertificate {
            ca_pem: api.ca.clone(),
            cert_pem: api.crt.clone(),
            key_pem: api.key.expose_pem().to_string(),
        })
        .client_ca(api.ca.clone())
        .start()
        .await?;
    let admin = env.client();
    let node: Node = serde_json::from_value(serde_json::json!({"metadata": {"name": "worker-1"}}))?;
    Api::<Node>::all(admin.clone()).create(&PostParams::default(), &node).await?;
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "web-1", "namespace": "default"},
        "spec": {"nodeName": "worker-1", "containers": [{"name": "web", "image": "nginx"}]},
    }))?;
    Api::<Pod>::namespaced(admin.clone(), "default").create(&PostParams::default(), &pod).await?;
    Ok(env)
}

/// The Secret `<id>-kubeconfig` among `secrets`.
fn kubeconfig_secret<'a>(secrets: &'a [Secret], cluster: &Cluster) -> &'a Secret {
    let name = pki::kubeconfig::secret_name(&cluster.id);
    secrets.iter().find(|s| s.metadata.name.as_deref() == Some(name.as_str())).expect("a kubeconfig Secret is issued")
}

/// The management identity: a client from the issued kubeconfig, as the operators read it.
async fn management_client(secret: &Secret) -> anyhow::Result<Client> {
    let value = secret.data.as_ref().and_then(|d| d.get(pki::kubeconfig::KEY)).expect("the kubeconfig");
    let config = config_from_kubeconfig(&Sensitive::new(value.0.clone())).await.map_err(anyhow::Error::msg)?;
    Ok(Client::try_from(config)?)
}

/// The user and groups of the issued kubeconfig's client certificate.
fn identity(secret: &Secret) -> (String, Vec<String>) {
    let (_, files) = pki::kubeconfig::read(secret).expect("a kubeconfig with embedded certificates");
    let info = pki::inspect(&files.crt).expect("the client certificate parses");
    (info.common_name.expect("a common name"), info.organizations)
}

/// The first master's config as kvm-operator renders it with the issued PKI, written below a
/// temporary root as Ignition writes it on the machine.
fn boot_master(cluster: &Cluster, secrets: &[Secret]) -> anyhow::Result<(node_verify_harness::Node, ignition::Parsed)> {
    let certs: BTreeMap<String, TlsAsset> = kvm_objects::ignition::MASTER_CERTS
        .iter()
        .map(|name| {
            let files = certificate(secrets, name);
            let asset = TlsAsset {
                ca: files.ca.into_bytes(),
                crt: files.crt.into_bytes(),
                key: files.key.expose_pem().as_bytes().to_vec(),
            };
            (name.to_string(), asset)
        })
        .collect();
    let key = secrets
        .iter()
        .find(|s| label(s, pki::secret::RANDOMKEY_LABEL).is_some())
        .and_then(|s| s.data.as_ref()?.get("encryption"))
        .map(|b| EncryptionKey::from_base64(String::from_utf8_lossy(&b.0).trim()))
        .expect("an encryption key is issued");
    let master = cluster.nodes.iter().find(|n| n.role == Role::Master).expect("a master");
    let ids: Vec<&str> = cluster.nodes.iter().map(|n| n.id.as_str()).collect();
    let indexes = kvm_objects::node_index::allocate(&BTreeMap::new(), &ids).indexes;
    let input = NodeConfigInput {
        cluster,
        node: master,
        node_indexes: &indexes,
        certs: &certs,
        encryption_key: Some(&key),
        settings: &Default::default(),
    };
    let config = render(&input)?.to_json();
    Ok((node_verify_harness::Node::boot(config.as_bytes(), "")?, ignition::parse(config.as_bytes())?))
}

/// Run what the master's unit `apply-management-access.service` runs (its `ExecStart`), with
/// the node's files below its root and the API server at `api_server`.
async fn run_master_grant(node: &node_verify_harness::Node, parsed: &ignition::Parsed, api_server: &str) {
    let unit = parsed.unit(ignition::access::UNIT).expect("the master has the unit");
    let exec = unit.lines().find_map(|l| l.strip_prefix("ExecStart=")).expect("ExecStart");
    let run = tokio::process::Command::new(node.path(exec))
        .env("NODE_ROOT", node.root())
        .env("API_SERVER_URL", api_server)
        .kill_on_drop(true)
        .output();
    // The script retries every 10 s until the API server takes the objects.
    let out = tokio::time::timeout(Duration::from_secs(25), run).await.expect("the grant finishes").expect("runs");
    assert!(out.status.success(), "{exec} failed: {}", String::from_utf8_lossy(&out.stderr));
}

fn refused<T: std::fmt::Debug>(result: Result<T, kube::Error>, what: &str) {
    match result {
        Err(kube::Error::Api(status)) if status.code == 403 => {}
        other => panic!("{what}: expected 403 Forbidden, got {other:?}"),
    }
}

/// The node watch: its list, then a change that only its watch can bring.
async fn watch_nodes(nodes: Api<Node>, admin: Client) -> anyhow::Result<()> {
    let mut watch = std::pin::pin!(watcher::watcher(nodes, watcher::Config::default()));
    let label = serde_json::json!({"metadata": {"labels": {"changed": "yes"}}});
    let mut changed = false;
    let watched = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(event) = watch.next().await {
            match event.map_err(|e| format!("the node watch failed: {e}"))? {
                watcher::Event::InitDone if !changed => {
                    changed = true;
                    Api::<Node>::all(admin.clone())
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
    watched.map_err(anyhow::Error::msg)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_master_grants_the_management_identity_what_drains_watches_and_checks_need_and_nothing_more()
-> anyhow::Result<()> {
    let cluster = cluster();
    let names = names(&cluster);
    let secrets = issue(&names, &[], None);
    let env = workload_cluster(&secrets).await?;

    // The master grants the access with its own script and its api certificate.
    let (master, parsed) = boot_master(&cluster, &secrets)?;
    run_master_grant(&master, &parsed, &env.base_url()).await;
    let api_user = pki::inspect(&certificate(&secrets, "api").crt).expect("parses").common_name.expect("a CN");
    let applied: std::collections::BTreeSet<_> =
        env.handle().access_log_of(&api_user).into_iter().map(|r| (r.attributes.resource, r.attributes.name)).collect();
    let role = ignition::access::CLUSTER_ROLE.to_string();
    assert_eq!(
        applied,
        [("clusterrolebindings".to_string(), role.clone()), ("clusterroles".to_string(), role)].into(),
        "the api certificate applied the objects"
    );

    // The operators' kubeconfig for this server, issued for the cluster as it now is.
    let secrets = issue(&names, &secrets, Some(env.base_url()));
    let kubeconfig = kubeconfig_secret(&secrets, &cluster);
    let (user, groups) = identity(kubeconfig);
    assert!(!groups.iter().any(|g| g == "system:masters"), "never system:masters: {groups:?}");
    assert_eq!(groups, [ignition::access::GROUP]);
    let wc = management_client(kubeconfig).await?;
    let me = wc
        .request_text(
            http::Request::post("/apis/authentication.k8s.io/v1/selfsubjectreviews")
                .header("Content-Type", "application/json")
                .body(br#"{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}"#.to_vec())?,
        )
        .await?;
    let me: serde_json::Value = serde_json::from_str(&me)?;
    assert_eq!(me["status"]["userInfo"]["username"], user.as_str(), "the client certificate authenticates: {me}");

    let nodes: Api<Node> = Api::all(wc.clone());
    let pods: Api<Pod> = Api::all(wc.clone());
    // What the operators do (node_lifecycle::clients, drain, the kvm node watcher and deleter).
    assert_eq!(nodes.list(&ListParams::default()).await?.items.len(), 1, "node health lists the nodes");
    watch_nodes(nodes.clone(), env.client()).await?;
    assert!(nodes.get_opt("worker-1").await?.is_some(), "a drain reads its node");
    let cordon = serde_json::json!({"spec": {"unschedulable": true}});
    nodes.patch("worker-1", &PatchParams::default(), &Patch::Merge(cordon)).await?;
    let listed = pods.list(&ListParams::default().fields("spec.nodeName=worker-1")).await?;
    assert_eq!(listed.items.len(), 1, "a drain lists the node's pods");
    Api::<Pod>::namespaced(wc.clone(), "default").evict("web-1", &EvictParams::default()).await?;
    nodes.delete("worker-1", &DeleteParams::default()).await?;

    // Nothing more.
    let secrets_api: Api<Secret> = Api::namespaced(wc.clone(), "kube-system");
    refused(secrets_api.list(&ListParams::default()).await, "listing Secrets");
    refused(secrets_api.get_opt("anything").await, "reading a Secret");
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

/// The management cluster holding `secrets` in [`NS`].
async fn management_cluster(secrets: &[Secret]) -> anyhow::Result<TestEnv> {
    let mc = TestEnv::start().await?;
    let namespace: Namespace = serde_json::from_value(serde_json::json!({"metadata": {"name": NS}}))?;
    Api::<Namespace>::all(mc.client()).create(&PostParams::default(), &namespace).await?;
    let api: Api<Secret> = Api::namespaced(mc.client(), NS);
    for secret in secrets {
        api.create(&PostParams::default(), secret).await?;
    }
    Ok(mc)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_whose_masters_predate_the_role_gets_it_from_the_operator_once_per_interval() -> anyhow::Result<()> {
    let cluster = cluster();
    let names = names(&cluster);
    // Masters that never applied the role; the kubeconfig issued afterwards.
    let secrets = issue(&names, &[], None);
    let env = workload_cluster(&secrets).await?;
    let secrets = issue(&names, &secrets, Some(env.base_url()));
    let kubeconfig = kubeconfig_secret(&secrets, &cluster);
    let (user, _) = identity(kubeconfig);
    let api_user = pki::inspect(&certificate(&secrets, "api").crt).expect("parses").common_name.expect("a CN");
    let bare = management_client(kubeconfig).await?;
    refused(Api::<Node>::all(bare).list(&ListParams::default()).await, "the management identity without its role");

    let mc = management_cluster(&secrets).await?;
    let options =
        ClientOptions { access_repair_interval: Duration::from_secs(2), ..ClientOptions::for_operator("kvm-operator") };
    let clients = WorkloadClients::new(mc.client(), options);
    let target = ClusterRef::new(NS, cluster.id.clone(), cluster.api_domain.clone());
    let wc = clients.client_for(&target).await?;
    assert_eq!(wc.secret(), kubeconfig.metadata.name.as_deref().unwrap_or_default(), "the management identity");

    // The node watch is refused, the operator grants the role, the watch goes on.
    watch_nodes(Api::all(wc.client()), env.client()).await?;
    assert_eq!(clients.access_repairs(), 1);
    let role = Api::<ClusterRole>::all(env.client()).get(ignition::access::CLUSTER_ROLE).await?;
    assert_eq!(serde_json::to_value(&role.rules)?, ignition::access::cluster_role()["rules"], "the master's rules");
    let managers: Vec<_> =
        role.metadata.managed_fields.unwrap_or_default().into_iter().filter_map(|m| m.manager).collect();
    assert_eq!(managers, ["kvm-operator"]);
    let binding = Api::<ClusterRoleBinding>::all(env.client()).get(ignition::access::CLUSTER_ROLE).await?;
    assert_eq!(serde_json::to_value(&binding.subjects)?, ignition::access::cluster_role_binding()["subjects"]);
    // A drain's operations, as the management identity.
    let nodes: Api<Node> = Api::all(wc.client());
    nodes
        .patch("worker-1", &PatchParams::default(), &Patch::Merge(serde_json::json!({"spec": {"unschedulable": true}})))
        .await?;
    Api::<Pod>::namespaced(wc.client(), "default").evict("web-1", &EvictParams::default()).await?;
    // The api certificate wrote the two objects and nothing else; the rest was the narrow identity.
    let by_api = env.handle().access_log_of(&api_user);
    assert!(
        by_api.iter().all(|r| matches!(r.attributes.resource.as_str(), "clusterroles" | "clusterrolebindings")),
        "{by_api:?}"
    );
    let patches: u64 = by_api.iter().filter(|r| r.attributes.verb == "patch").map(|r| r.count).sum();
    assert_eq!(patches, 2, "one apply each of the role and its binding: {by_api:?}");
    assert!(env.handle().access_log_of(&user).iter().any(|r| r.attributes.verb == "watch" && r.allowed));

    // Someone takes the binding away: refused again, and not repaired again within the interval.
    Api::<ClusterRoleBinding>::all(env.client())
        .delete(ignition::access::CLUSTER_ROLE, &DeleteParams::default())
        .await?;
    for _ in 0..5 {
        refused(nodes.list(&ListParams::default()).await, "within the interval");
    }
    assert_eq!(clients.access_repairs(), 1, "no repair loop");
    // After the interval, once more.
    tokio::time::sleep(Duration::from_millis(2100)).await;
    assert_eq!(nodes.list(&ListParams::default()).await?.items.len(), 1);
    assert_eq!(clients.access_repairs(), 2);
    // A request the role does not grant never triggers a repair.
    Api::<ClusterRoleBinding>::all(env.client())
        .delete(ignition::access::CLUSTER_ROLE, &DeleteParams::default())
        .await?;
    tokio::time::sleep(Duration::from_millis(2100)).await;
    refused(Api::<Secret>::all(wc.client()).list(&ListParams::default()).await, "Secrets");
    assert_eq!(clients.access_repairs(), 2, "Secrets are not the role's");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_in_a_cluster_whose_masters_predate_the_role_succeeds_after_one_repair() -> anyhow::Result<()> {
    use apis::drainer::{CONDITION_DRAINED, DrainerConfig};
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::CustomResourceExt;

    let cluster = cluster();
    let names = names(&cluster);
    let secrets = issue(&names, &[], None);
    let env = workload_cluster(&secrets).await?;
    let spare: Node = serde_json::from_value(serde_json::json!({"metadata": {"name": "worker-2"}}))?;
    Api::<Node>::all(env.client()).create(&PostParams::default(), &spare).await?;
    let secrets = issue(&names, &secrets, Some(env.base_url()));

    let mc = management_cluster(&secrets).await?;
    Api::<CustomResourceDefinition>::all(mc.client()).create(&PostParams::default(), &DrainerConfig::crd()).await?;
    let dcs: Api<DrainerConfig> = Api::namespaced(mc.client(), NS);
    tokio::time::timeout(Duration::from_secs(30), async {
        while dcs.list(&ListParams::default()).await.is_err() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await?;
    let mut registry = prometheus_client::registry::Registry::default();
    let mut settings = node_lifecycle::DrainerSettings::new("kvm-operator", semver::Version::new(4, 0, 0));
    settings.poll = Duration::from_millis(200);
    settings.retry = Duration::from_millis(500);
    let drainer = node_lifecycle::Drainer::builder(mc.client(), settings, &mut registry).build()?;
    let clients = drainer.clients().clone();
    let shutdown = tokio_util::sync::CancellationToken::new();
    let task = tokio::spawn(drainer.run(shutdown.clone()));

    let dc: DrainerConfig = serde_json::from_value(serde_json::json!({
        "apiVersion": "core.giantswarm.io/v1alpha1", "kind": "DrainerConfig",
        "metadata": {"name": "worker-2", "namespace": NS,
                     "labels": {"kvm-operator.giantswarm.io/version": "4.0.0", apis::labels::CLUSTER: cluster.id}},
        "spec": {"guest": {"cluster": {"api": {"endpoint": cluster.api_domain}, "id": cluster.id},
                           "node": {"name": "worker-2"}},
                 "versionBundle": {"version": "4.0.0"}}
    }))?;
    dcs.create(&PostParams::default(), &dc).await?;
    let drained = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            if let Ok(dc) = dcs.get("worker-2").await
                && let Some(c) = dc.status.as_ref().and_then(|s| s.condition(CONDITION_DRAINED))
            {
                return c.clone();
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await?;
    assert_eq!(drained.reason.as_deref(), Some("Drained"), "{drained:?}");
    let node = Api::<Node>::all(env.client()).get("worker-2").await?;
    assert_eq!(node.spec.and_then(|s| s.unschedulable), Some(true), "cordoned by the management identity");
    assert_eq!(clients.access_repairs(), 1, "one repair, then the drain went on");
    let role = Api::<ClusterRole>::all(env.client()).get(ignition::access::CLUSTER_ROLE).await?;
    let managers: Vec<_> =
        role.metadata.managed_fields.unwrap_or_default().into_iter().filter_map(|m| m.manager).collect();
    assert_eq!(managers, ["kvm-operator"], "named after the operator");
    shutdown.cancel();
    let _ = tokio::time::timeout(Duration::from_secs(30), task).await;
    Ok(())
}

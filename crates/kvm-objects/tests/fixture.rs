//! The whole desired state of one fixture cluster (`qz7lt`: three masters, two workers, etcd on
//! PVCs, one host volume), from the YAML a user writes to every object kvm-operator would put
//! into the management cluster, with the names of the reference's §6; and an API server
//! (testenv) accepts every one of them as built. testenv validates object metadata as
//! kube-apiserver does, not every rule of a pod spec, so the pod templates' labels,
//! annotations, selector and the names of volumes and containers are checked here with the same
//! rules.

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use apis::kvm::KVMConfig;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Endpoints, Namespace, PersistentVolumeClaim, Secret, Service};
use k8s_openapi::api::networking::v1::Ingress;
use kube::api::{Api, PostParams};
use kvm_objects::cluster::{Cluster, Role, Settings};
use kvm_objects::endpoints::{NodePod, desired_endpoints};
use kvm_objects::ignition::{
    EncryptionKey, NodeConfigInput, NodeConfigSettings, TlsAsset, decode_node_secret, node_secret, render,
};
use kvm_objects::node_index::allocate;
use kvm_objects::{desired, names};
use testenv::TestEnv;

fn cluster() -> Cluster {
    let config: KVMConfig =
        serde_saphyr::from_str(include_str!("../../apis/tests/fixtures/kvmconfig-qz7lt.yaml")).expect("fixture");
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

/// Node indexes first, then one node-config Secret per node, with the indexes.
fn node_secrets(cluster: &Cluster) -> (BTreeMap<String, i64>, Vec<Secret>) {
    let ids: Vec<&str> = cluster.nodes.iter().map(|n| n.id.as_str()).collect();
    let indexes = allocate(&BTreeMap::new(), &ids).indexes;
    let certs: BTreeMap<String, TlsAsset> = ["api", "calico-etcd-client", "etcd", "service-account", "worker"]
        .into_iter()
        .map(|c| (c.to_string(), TlsAsset { ca: b"ca".to_vec(), crt: b"crt".to_vec(), key: b"key".to_vec() }))
        .collect();
    let key = EncryptionKey::from_base64("a2V5");
    let settings = NodeConfigSettings::default();
    let maps = cluster
        .nodes
        .iter()
        .map(|node| {
            let input = NodeConfigInput {
                cluster,
                node,
                node_indexes: &indexes,
                certs: &certs,
                encryption_key: Some(&key),
                settings: &settings,
            };
            node_secret(cluster, node, &render(&input).expect("render"))
        })
        .collect();
    (indexes, maps)
}

fn names_of<T: k8s_openapi::Metadata<Ty = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta>>(
    objects: &[T],
) -> Vec<String> {
    objects.iter().filter_map(|o| o.metadata().name.clone()).collect()
}

#[test]
fn every_object_of_the_cluster_with_its_name() {
    let cluster = cluster();
    let objects = desired(&cluster);
    assert_eq!(names_of(&objects.deployments), ["master-ma1", "master-ma2", "master-ma3", "worker-wk1", "worker-wk2"]);
    // One etcd member, on the first master: one etcd PVC.
    assert_eq!(names_of(&objects.etcd_pvcs), ["pvc-master-etcd-qz7lt-ma1"]);
    assert_eq!(names_of(&objects.services), ["master", "worker"]);
    assert_eq!(names_of(&objects.ingresses), ["api", "etcd"]);
    let namespaces: Vec<_> = objects.deployments.iter().filter_map(|d| d.metadata.namespace.as_deref()).collect();
    assert!(namespaces.iter().all(|ns| *ns == "qz7lt"), "{namespaces:?}");
    assert_eq!(desired(&cluster), objects, "deterministic");

    let (indexes, secrets) = node_secrets(&cluster);
    for (secret, node) in secrets.iter().zip(&cluster.nodes) {
        let decoded = decode_node_secret(secret).expect("decode");
        let expected = names::iscsi_initiator(&cluster.id, node.role, indexes[&node.id]);
        assert_eq!(decoded.text("/etc/iscsi/initiatorname.iscsi"), Some(format!("InitiatorName={expected}\n")));
    }
    assert_eq!(
        names_of(&secrets),
        ["master-qz7lt-ma1", "master-qz7lt-ma2", "master-qz7lt-ma3", "worker-qz7lt-wk1", "worker-qz7lt-wk2"]
    );
    // Each Deployment mounts its own node's Secret.
    for (deployment, node) in objects.deployments.iter().zip(&cluster.nodes) {
        let volumes = deployment.spec.as_ref().and_then(|s| s.template.spec.as_ref()).and_then(|s| s.volumes.clone());
        let config = volumes.unwrap_or_default().into_iter().find(|v| v.name == "cloud-config").and_then(|v| v.secret);
        assert_eq!(config.and_then(|c| c.secret_name), Some(names::node_secret(node.role, &cluster.id, &node.id)));
    }
    assert_eq!(cluster.nodes(Role::Worker).count(), 2);
}

#[tokio::test]
async fn the_api_server_accepts_every_desired_object() -> Result<()> {
    let env = TestEnv::start().await?;
    let client = env.client();
    let cluster = cluster();
    let ns = cluster.id.clone();
    let namespace: Namespace = serde_json::from_value(serde_json::json!({"metadata": {"name": ns}}))?;
    Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &namespace).await?;
    let pp = PostParams::default();
    let objects = kvm_objects::desired(&cluster);
    for d in &objects.deployments {
        check_pod_template(d);
        Api::<Deployment>::namespaced(client.clone(), &ns)
            .create(&pp, d)
            .await
            .with_context(|| format!("{:?}", d.metadata.name))?;
    }
    for p in &objects.etcd_pvcs {
        Api::<PersistentVolumeClaim>::namespaced(client.clone(), &ns)
            .create(&pp, p)
            .await
            .with_context(|| format!("{:?}", p.metadata.name))?;
    }
    let mut created_services = Vec::new();
    for s in &objects.services {
        created_services.push(
            Api::<Service>::namespaced(client.clone(), &ns)
                .create(&pp, s)
                .await
                .with_context(|| format!("{:?}", s.metadata.name))?,
        );
    }
    for i in &objects.ingresses {
        Api::<Ingress>::namespaced(client.clone(), &ns)
            .create(&pp, i)
            .await
            .with_context(|| format!("{:?}", i.metadata.name))?;
    }

    for secret in node_secrets(&cluster).1 {
        let created = Api::<Secret>::namespaced(client.clone(), &ns)
            .create(&pp, &secret)
            .await
            .with_context(|| format!("{:?}", secret.metadata.name))?;
        assert_eq!(created.data, secret.data, "stored as built: an unchanged config compares equal");
    }

    let pod = |name: &str, ip: &str, ready: bool| NodePod {
        name: name.into(),
        namespace: ns.clone(),
        role: Role::Worker,
        vm_ip: ip.parse().ok(),
        pod_ready: ready,
        wc_node_ready: ready,
        terminating: false,
        containers_running: true,
        drained: false,
        etcd_member: false,
    };
    let worker =
        created_services.iter().find(|s| s.metadata.name.as_deref() == Some("worker")).context("worker Service")?;
    let endpoints = desired_endpoints(
        worker,
        &[pod("worker-wk1-5d8f-abcde", "10.7.9.11", true), pod("worker-wk2-5d8f-fghij", "10.7.10.11", false)],
    )
    .context("endpoints")?;
    let created = Api::<Endpoints>::namespaced(client.clone(), &ns).create(&pp, &endpoints).await?;
    assert_eq!(created.subsets, endpoints.subsets, "stored as computed");
    // The master Endpoints: the API port on every master, etcd's on the one that runs it.
    let master =
        created_services.iter().find(|s| s.metadata.name.as_deref() == Some("master")).context("master Service")?;
    let masters = [
        NodePod { role: Role::Master, etcd_member: true, ..pod("master-ma1-5d8f-abcde", "10.7.3.11", true) },
        NodePod { role: Role::Master, ..pod("master-ma2-5d8f-fghij", "10.7.4.11", true) },
    ];
    let endpoints = desired_endpoints(master, &masters).context("master endpoints")?;
    assert_eq!(endpoints.subsets.as_ref().map(Vec::len), Some(2));
    let created = Api::<Endpoints>::namespaced(client.clone(), &ns).create(&pp, &endpoints).await?;
    assert_eq!(created.subsets, endpoints.subsets, "stored as computed");
    Ok(())
}

/// The rules kube-apiserver applies to a Deployment's pod template that testenv leaves out.
fn check_pod_template(d: &Deployment) {
    use testenv::validation::{NameRule, validate_annotations, validate_label_selector, validate_labels};
    let name = d.metadata.name.clone().unwrap_or_default();
    let spec = d.spec.as_ref().expect("spec");
    let template = serde_json::to_value(&spec.template).expect("json");
    assert!(validate_labels(&template["metadata"]["labels"], "labels").is_empty(), "{name}: pod labels");
    assert!(
        validate_annotations(&template["metadata"]["annotations"], "annotations").is_empty(),
        "{name}: pod annotations"
    );
    let selector = serde_json::to_value(&spec.selector).expect("json");
    assert!(validate_label_selector(&selector, "selector").is_empty(), "{name}: selector");
    let pod = spec.template.spec.as_ref().expect("pod spec");
    let labels = spec.template.metadata.as_ref().and_then(|m| m.labels.clone()).unwrap_or_default();
    for (key, value) in spec.selector.match_labels.clone().unwrap_or_default() {
        assert_eq!(labels.get(&key), Some(&value), "{name}: the selector must match the template");
    }
    let dns_label = |what: &str, value: &str| {
        assert!(
            NameRule::Dns1123Label.validate(value, false).is_empty(),
            "{name}: {what} {value:?} is not a DNS label"
        );
    };
    for volume in pod.volumes.iter().flatten() {
        dns_label("volume", &volume.name);
    }
    for container in &pod.containers {
        dns_label("container", &container.name);
        for mount in container.volume_mounts.iter().flatten() {
            assert!(
                pod.volumes.iter().flatten().any(|v| v.name == mount.name),
                "{name}: mount of unknown volume {}",
                mount.name
            );
        }
    }
}

//! The whole desired state of one fixture cluster (`qz7lt`: three masters, two workers, etcd on
//! PVCs, one host volume), from the YAML a user writes to every object kvm-operator would put
//! into the management cluster, with the names of the reference's §6.

use std::collections::BTreeMap;

use apis::kvm::KVMConfig;
use kvm_objects::cluster::{Cluster, Role, Settings};
use kvm_objects::ignition::{NodeConfigInput, NodeConfigSettings, TlsAsset, config_map, decode_config_map, render};
use kvm_objects::node_index::allocate;
use kvm_objects::{desired, names};

fn cluster() -> Cluster {
    let config: KVMConfig =
        serde_saphyr::from_str(include_str!("../../apis/tests/fixtures/kvmconfig-qz7lt.yaml")).expect("fixture");
    let components = BTreeMap::from([
        ("containerlinux".to_string(), "3815.2.5".to_string()),
        ("kubernetes".to_string(), "1.29.9".to_string()),
    ]);
    let settings = Settings { dns_servers: vec!["10.99.0.53".into()], ntp_servers: vec![] };
    Cluster::new(&config, "v20.1.0", &components, &settings).expect("valid fixture")
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
    assert_eq!(
        names_of(&objects.etcd_pvcs),
        ["pvc-master-etcd-qz7lt-ma1", "pvc-master-etcd-qz7lt-ma2", "pvc-master-etcd-qz7lt-ma3"]
    );
    assert_eq!(names_of(&objects.services), ["master", "worker"]);
    assert_eq!(names_of(&objects.ingresses), ["api", "etcd"]);
    let namespaces: Vec<_> = objects.deployments.iter().filter_map(|d| d.metadata.namespace.as_deref()).collect();
    assert!(namespaces.iter().all(|ns| *ns == "qz7lt"), "{namespaces:?}");
    assert_eq!(desired(&cluster), objects, "deterministic");

    // Node indexes first, then one node config per node.
    let ids: Vec<&str> = cluster.nodes.iter().map(|n| n.id.as_str()).collect();
    let indexes = allocate(&BTreeMap::new(), &ids).indexes;
    let certs: BTreeMap<String, TlsAsset> = ["api", "calico-etcd-client", "etcd", "service-account", "worker"]
        .into_iter()
        .map(|c| (c.to_string(), TlsAsset { ca: b"ca".to_vec(), crt: b"crt".to_vec(), key: b"key".to_vec() }))
        .collect();
    let key = kvm_objects::ignition::EncryptionKey("a2V5".into());
    let settings = NodeConfigSettings::default();
    let mut config_maps = Vec::new();
    for node in &cluster.nodes {
        let input = NodeConfigInput {
            cluster: &cluster,
            node,
            node_indexes: &indexes,
            certs: &certs,
            encryption_key: Some(&key),
            settings: &settings,
        };
        let config = render(&input).expect("render");
        let map = config_map(&cluster, node, &config);
        let decoded = decode_config_map(&map).expect("decode");
        let expected = names::iscsi_initiator(&cluster.id, node.role, indexes[&node.id]);
        assert_eq!(decoded.text("/etc/iscsi/initiatorname.iscsi"), Some(format!("InitiatorName={expected}\n")));
        config_maps.push(map);
    }
    assert_eq!(
        names_of(&config_maps),
        ["master-qz7lt-ma1", "master-qz7lt-ma2", "master-qz7lt-ma3", "worker-qz7lt-wk1", "worker-qz7lt-wk2"]
    );
    // Each Deployment mounts its own node's ConfigMap.
    for (deployment, node) in objects.deployments.iter().zip(&cluster.nodes) {
        let volumes = deployment.spec.as_ref().and_then(|s| s.template.spec.as_ref()).and_then(|s| s.volumes.clone());
        let config =
            volumes.unwrap_or_default().into_iter().find(|v| v.name == "cloud-config").and_then(|v| v.config_map);
        assert_eq!(config.map(|c| c.name), Some(names::config_map(node.role, &cluster.id, &node.id)));
    }
    assert_eq!(cluster.nodes(Role::Worker).count(), 2);
}

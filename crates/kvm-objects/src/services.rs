//! The selector-less Services `master` and `worker` (reference §4.1.10). They have no selector
//! because their backends are VM IPs, not pod IPs (the node pods use the host network); the
//! operator writes their Endpoints itself ([`crate::endpoints`]).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Service;
use serde_json::json;

use crate::cluster::{Cluster, Role};
use crate::names::{self, keys};

/// The etcd client port behind the `master` Service and the `etcd` Ingress.
pub const ETCD_PORT: i32 = 2379;
/// The default `worker` ports when `spec.kvm.portMappings` is empty: `http` and `https`.
pub const DEFAULT_WORKER_PORTS: [(&str, i32); 2] = [("http", 30010), ("https", 30011)];

fn labels(cluster: &Cluster, role: Role) -> BTreeMap<String, String> {
    let mut labels = cluster.common_labels();
    labels.insert(keys::APP.into(), role.as_str().into());
    labels.insert(keys::VERSION_BUNDLE_LABEL.into(), cluster.operator_version.clone());
    labels
}

fn prometheus_annotations() -> BTreeMap<String, String> {
    BTreeMap::from([
        ("prometheus.io/path".to_string(), "/healthz".to_string()),
        ("prometheus.io/port".to_string(), "30010".to_string()),
        ("prometheus.io/scheme".to_string(), "http".to_string()),
        ("prometheus.io/scrape".to_string(), "true".to_string()),
    ])
}

/// The `master` Service: ClusterIP, ports `etcd` 2379 and `api` on the API port.
pub fn master_service(cluster: &Cluster) -> Service {
    let mut annotations = prometheus_annotations();
    annotations.insert("giantswarm.io/etcd-domain".into(), format!("{}:443", cluster.etcd_domain));
    annotations.insert("giantswarm.io/prometheus-cluster".into(), cluster.id.clone());
    let service = json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": names::MASTER_SERVICE,
            "namespace": names::namespace(&cluster.id),
            "labels": labels(cluster, Role::Master),
            "annotations": annotations,
        },
        "spec": {
            "type": "ClusterIP",
            "ports": [
                { "name": "etcd", "port": ETCD_PORT, "targetPort": ETCD_PORT, "protocol": "TCP" },
                { "name": "api", "port": cluster.api_port, "targetPort": cluster.api_port, "protocol": "TCP" },
            ],
        },
    });
    serde_json::from_value(service).expect("the Service JSON has the Service shape")
}

/// The `worker` Service: NodePort, one port per `spec.kvm.portMappings` entry (port =
/// targetPort), or `http` 30010 and `https` 30011 without fixed node ports.
pub fn worker_service(cluster: &Cluster) -> Service {
    let ports: Vec<_> = if cluster.port_mappings.is_empty() {
        DEFAULT_WORKER_PORTS
            .iter()
            .map(|(name, port)| json!({ "name": name, "port": port, "targetPort": port, "protocol": "TCP" }))
            .collect()
    } else {
        cluster
            .port_mappings
            .iter()
            .map(|m| {
                let mut port =
                    json!({ "name": m.name, "port": m.target_port, "targetPort": m.target_port, "protocol": "TCP" });
                if m.node_port != 0 {
                    port["nodePort"] = json!(m.node_port);
                }
                port
            })
            .collect()
    };
    let service = json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": names::WORKER_SERVICE,
            "namespace": names::namespace(&cluster.id),
            "labels": labels(cluster, Role::Worker),
            "annotations": prometheus_annotations(),
        },
        "spec": { "type": "NodePort", "ports": ports },
    });
    serde_json::from_value(service).expect("the Service JSON has the Service shape")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::fixtures;

    fn ports(service: &Service) -> Vec<(String, i32, Option<i32>)> {
        service
            .spec
            .as_ref()
            .and_then(|s| s.ports.clone())
            .unwrap_or_default()
            .into_iter()
            .map(|p| (p.name.unwrap_or_default(), p.port, p.node_port))
            .collect()
    }

    #[test]
    fn master_is_a_selector_less_cluster_ip_service() {
        let service = master_service(&fixtures::cluster());
        assert_eq!(service.metadata.name.as_deref(), Some("master"));
        assert_eq!(service.metadata.namespace.as_deref(), Some("qz7lt"));
        let spec = service.spec.as_ref().expect("spec");
        assert_eq!(spec.type_.as_deref(), Some("ClusterIP"));
        assert!(spec.selector.is_none(), "the operator writes the Endpoints");
        assert_eq!(ports(&service), [("etcd".into(), 2379, None), ("api".into(), 443, None)]);
        let annotations = service.metadata.annotations.clone().unwrap_or_default();
        assert_eq!(annotations["giantswarm.io/etcd-domain"], "etcd.qz7lt.k8s.gollum.example.net:443");
        assert_eq!(annotations["giantswarm.io/prometheus-cluster"], "qz7lt");
        assert_eq!(annotations["prometheus.io/port"], "30010");
        let labels = service.metadata.labels.clone().unwrap_or_default();
        assert_eq!((labels["app"].as_str(), labels["giantswarm.io/version-bundle"].as_str()), ("master", "4.3.9"));
    }

    #[test]
    fn worker_ports_come_from_the_mappings_or_the_defaults() {
        let cluster = fixtures::cluster();
        let service = worker_service(&cluster);
        let spec = service.spec.as_ref().expect("spec");
        assert_eq!(spec.type_.as_deref(), Some("NodePort"));
        assert!(spec.selector.is_none());
        assert_eq!(ports(&service), [("http".into(), 30010, Some(31080)), ("https".into(), 30011, Some(31443))]);
        let annotations = service.metadata.annotations.clone().unwrap_or_default();
        assert!(!annotations.contains_key("giantswarm.io/etcd-domain"));

        let mut defaults = cluster;
        defaults.port_mappings.clear();
        assert_eq!(ports(&worker_service(&defaults)), [("http".into(), 30010, None), ("https".into(), 30011, None)]);
    }
}

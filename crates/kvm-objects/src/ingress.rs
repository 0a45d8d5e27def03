//! The Ingresses `api` and `etcd` (reference §4.1.9): TLS passthrough through the management
//! cluster's nginx to the `master` Service, so that the workload cluster's API and etcd answer
//! on their own host names with their own certificates. `networking.k8s.io/v1` (the original
//! used the removed `v1beta1`). They are full desired objects, so an operator that compares
//! them with what exists also updates them (the original never did, §14.5).

use std::collections::BTreeMap;

use k8s_openapi::api::networking::v1::Ingress;
use serde_json::json;

use crate::cluster::Cluster;
use crate::names::{self, keys};
use crate::services::ETCD_PORT;

/// The annotation that makes nginx pass TLS through untouched.
pub const SSL_PASSTHROUGH: &str = "nginx.ingress.kubernetes.io/ssl-passthrough";
/// The ingress class of the management cluster's nginx.
pub const INGRESS_CLASS: &str = "nginx";

fn ingress(cluster: &Cluster, name: &str, host: &str, port: i32) -> Ingress {
    let mut labels = BTreeMap::from([
        ("cluster".to_string(), cluster.id.clone()),
        ("customer".to_string(), cluster.customer.clone()),
    ]);
    labels.insert(keys::APP.into(), "master".into());
    let ingress = json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {
            "name": name,
            "namespace": names::namespace(&cluster.id),
            "labels": labels,
            "annotations": { SSL_PASSTHROUGH: "true" },
        },
        "spec": {
            "ingressClassName": INGRESS_CLASS,
            "tls": [{ "hosts": [host] }],
            "rules": [{
                "host": host,
                "http": { "paths": [{
                    "path": "/",
                    "pathType": "Prefix",
                    "backend": { "service": { "name": names::MASTER_SERVICE, "port": { "number": port } } },
                }] },
            }],
        },
    });
    serde_json::from_value(ingress).expect("the Ingress JSON has the Ingress shape")
}

/// The `api` Ingress: the API host to the `master` Service's API port.
pub fn api_ingress(cluster: &Cluster) -> Ingress {
    ingress(cluster, names::API_INGRESS, &cluster.api_domain, cluster.api_port)
}

/// The `etcd` Ingress: the etcd host to the `master` Service's port 2379.
pub fn etcd_ingress(cluster: &Cluster) -> Ingress {
    ingress(cluster, names::ETCD_INGRESS, &cluster.etcd_domain, ETCD_PORT)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::fixtures;

    #[test]
    fn api_and_etcd_pass_tls_through_to_the_master_service() {
        let cluster = fixtures::cluster();
        for (ingress, name, host, port) in [
            (api_ingress(&cluster), "api", "api.qz7lt.k8s.gollum.example.net", 443),
            (etcd_ingress(&cluster), "etcd", "etcd.qz7lt.k8s.gollum.example.net", 2379),
        ] {
            assert_eq!(ingress.metadata.name.as_deref(), Some(name));
            assert_eq!(ingress.metadata.namespace.as_deref(), Some("qz7lt"));
            assert_eq!(ingress.metadata.annotations.clone().unwrap_or_default()[SSL_PASSTHROUGH], "true");
            assert_eq!(ingress.metadata.labels.clone().unwrap_or_default()["app"], "master");
            let spec = ingress.spec.as_ref().expect("spec");
            assert_eq!(spec.tls.as_ref().and_then(|t| t[0].hosts.clone()), Some(vec![host.to_string()]));
            let rule = &spec.rules.as_ref().expect("rules")[0];
            assert_eq!(rule.host.as_deref(), Some(host));
            let path = &rule.http.as_ref().expect("http").paths[0];
            let backend = path.backend.service.as_ref().expect("service backend");
            assert_eq!(backend.name, "master");
            assert_eq!(backend.port.as_ref().and_then(|p| p.number), Some(port));
        }
    }
}

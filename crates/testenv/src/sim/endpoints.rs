//! The Endpoints controller (`pkg/controller/endpoint`).
//!
//! For each Service with a selector (and not of type ExternalName), Endpoints of the same
//! name list the selected pods that have an IP: Ready pods under `addresses`, the others under
//! `notReadyAddresses` (all under `addresses` with `publishNotReadyAddresses`). Terminating
//! pods are left out (unless `publishNotReadyAddresses`), as are terminal ones. Ports come
//! from the Service's ports, with `targetPort` names resolved against the pods' container
//! ports (`podutil.FindPort`); a pod without the named port is left out for that port. The
//! subsets are packed as `RepackSubsets` packs them: addresses that offer the same ports share
//! a subset. Services without a selector are left alone; when a Service is deleted, the
//! Endpoints of its name are deleted, as upstream does.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    EndpointAddress, EndpointPort, EndpointSubset, Endpoints, ObjectReference, Pod, Service, ServicePort,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::runtime::{Runtime, Work};
use crate::api::Part;
use crate::api::eviction::{is_pod_ready, pod_phase};
use crate::store::ObjKey;

const MANAGER: &str = "kube-controller-manager";
const HEADLESS: &str = "service.kubernetes.io/headless";

/// Whether a Service with a selector selects a pod with these labels.
pub(super) fn selects(service: &Service, labels: Option<&BTreeMap<String, String>>) -> bool {
    let Some(selector) = service.spec.as_ref().and_then(|s| s.selector.as_ref()).filter(|s| !s.is_empty()) else {
        return false;
    };
    let empty = BTreeMap::new();
    let labels = labels.unwrap_or(&empty);
    selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

/// `podutil.FindPort`: the container port a Service port targets on a pod.
fn find_port(pod: &Pod, port: &ServicePort) -> Option<i32> {
    match port.target_port.as_ref() {
        None => Some(port.port),
        Some(IntOrString::Int(n)) => Some(*n),
        Some(IntOrString::String(name)) => {
            let protocol = port.protocol.as_deref().unwrap_or("TCP");
            let spec = pod.spec.as_ref()?;
            spec.containers.iter().flat_map(|c| c.ports.iter().flatten()).find_map(|p| {
                (p.name.as_deref() == Some(name.as_str()) && p.protocol.as_deref().unwrap_or("TCP") == protocol)
                    .then_some(p.container_port)
            })
        }
    }
}

/// The ordering and identity of an address within Endpoints: IP, then pod uid.
type AddressKey = (String, String);
/// The ordering and identity of a port: name, number, protocol.
type PortKey = (String, i32, String);
/// Which addresses a set of ports is offered by, and whether each is ready.
type Signature = Vec<(AddressKey, bool)>;
/// A subset being built: its ports and its addresses.
type Group = (Vec<EndpointPort>, Vec<(EndpointAddress, bool)>);

/// The subsets of a Service's Endpoints, packed and sorted.
pub(super) fn subsets<'a>(service: &Service, pods: impl Iterator<Item = &'a Pod>) -> Vec<EndpointSubset> {
    let spec = service.spec.clone().unwrap_or_default();
    let publish_unready = spec.publish_not_ready_addresses.unwrap_or(false);
    let service_name = service.metadata.name.clone().unwrap_or_default();
    let ports = spec.ports.clone().unwrap_or_default();
    // Port → address → (address, ready); ports of -1 stand for "no ports" (headless).
    let mut by_port: BTreeMap<PortKey, BTreeMap<AddressKey, (EndpointAddress, bool)>> = BTreeMap::new();
    let mut port_defs: BTreeMap<PortKey, EndpointPort> = BTreeMap::new();
    for pod in pods {
        if !selects(service, pod.metadata.labels.as_ref()) {
            continue;
        }
        let Some(ip) = pod.status.as_ref().and_then(|s| s.pod_ip.clone()).filter(|ip| !ip.is_empty()) else { continue };
        if (!publish_unready && pod.metadata.deletion_timestamp.is_some())
            || matches!(pod_phase(pod), "Succeeded" | "Failed")
        {
            continue;
        }
        let ready = publish_unready || is_pod_ready(pod);
        let pod_spec = pod.spec.clone().unwrap_or_default();
        let hostname = pod_spec.hostname.clone().filter(|_| {
            pod_spec.subdomain.as_deref() == Some(service_name.as_str())
                && pod.metadata.namespace == service.metadata.namespace
        });
        let address = EndpointAddress {
            ip: ip.clone(),
            hostname,
            node_name: pod_spec.node_name.clone(),
            target_ref: Some(ObjectReference {
                kind: Some("Pod".into()),
                namespace: pod.metadata.namespace.clone(),
                name: pod.metadata.name.clone(),
                uid: pod.metadata.uid.clone(),
                ..ObjectReference::default()
            }),
        };
        let address_key = (ip, pod.metadata.uid.clone().unwrap_or_default());
        if ports.is_empty() {
            if spec.cluster_ip.as_deref() == Some("None") {
                let key = (String::new(), -1, String::new());
                by_port.entry(key).or_default().insert(address_key, (address, ready));
            }
            continue;
        }
        for port in &ports {
            let Some(number) = find_port(pod, port) else { continue };
            let protocol = port.protocol.clone().unwrap_or_else(|| "TCP".into());
            let key = (port.name.clone().unwrap_or_default(), number, protocol.clone());
            port_defs.entry(key.clone()).or_insert_with(|| EndpointPort {
                name: port.name.clone(),
                port: number,
                protocol: Some(protocol),
                app_protocol: port.app_protocol.clone(),
            });
            by_port.entry(key).or_default().insert(address_key.clone(), (address.clone(), ready));
        }
    }
    // Addresses offering the same ports share a subset.
    let mut grouped: BTreeMap<Signature, Group> = BTreeMap::new();
    for (port, addresses) in by_port {
        let signature: Signature = addresses.iter().map(|(k, (_, ready))| (k.clone(), *ready)).collect();
        let entry = grouped.entry(signature).or_insert_with(|| (Vec::new(), addresses.into_values().collect()));
        if let Some(def) = port_defs.get(&port) {
            entry.0.push(def.clone());
        }
    }
    grouped
        .into_values()
        .map(|(ports, addresses)| {
            let (ready, unready): (Vec<_>, Vec<_>) = addresses.into_iter().partition(|(_, r)| *r);
            let list = |v: Vec<(EndpointAddress, bool)>| {
                let v: Vec<EndpointAddress> = v.into_iter().map(|(a, _)| a).collect();
                (!v.is_empty()).then_some(v)
            };
            EndpointSubset {
                addresses: list(ready),
                not_ready_addresses: list(unready),
                ports: (!ports.is_empty()).then_some(ports),
            }
        })
        .collect()
}

/// The labels of a Service's Endpoints.
fn endpoints_labels(service: &Service) -> Option<BTreeMap<String, String>> {
    let mut labels = service.metadata.labels.clone().unwrap_or_default();
    labels.remove(HEADLESS);
    if service.spec.as_ref().and_then(|s| s.cluster_ip.as_deref()) == Some("None") {
        labels.insert(HEADLESS.into(), String::new());
    }
    (!labels.is_empty()).then_some(labels)
}

impl Runtime {
    /// Converge the Endpoints of one Service.
    pub(super) fn sync_endpoints(&mut self, key: &ObjKey) {
        let def = self.defs.endpoints.clone();
        let Some(service) = self.cache.services.get(key).cloned() else {
            if let Some(existing) = self.cache.endpoints.get(key).cloned()
                && let Err(e) = self.delete(&def, key, existing.metadata.uid.as_deref(), None)
            {
                self.retry(Work::Endpoints(key.clone()), &e);
            }
            return;
        };
        let spec = service.spec.clone().unwrap_or_default();
        if spec.type_.as_deref() == Some("ExternalName") || spec.selector.as_ref().is_none_or(|s| s.is_empty()) {
            return;
        }
        let subsets = subsets(&service, self.cache.pods.in_namespace(&key.0).map(|(_, p)| p.as_ref()));
        let subsets = (!subsets.is_empty()).then_some(subsets);
        let labels = endpoints_labels(&service);
        let result = match self.cache.endpoints.get(key).cloned() {
            Some(current) if current.subsets == subsets && current.metadata.labels == labels => return,
            Some(current) => self
                .update::<Endpoints>(&def, key, current.metadata.uid.as_deref(), Part::Main, MANAGER, |ep| {
                    ep.subsets = subsets.clone();
                    ep.metadata.labels = labels.clone();
                })
                .map(|_| ()),
            None => {
                let endpoints = Endpoints {
                    metadata: ObjectMeta { name: Some(key.1.clone()), labels, ..ObjectMeta::default() },
                    subsets,
                };
                self.create(&def, &key.0, &endpoints, MANAGER).map(|_| ())
            }
        };
        match result {
            Ok(()) => {}
            // Gone meanwhile, or a terminating namespace: the next event decides.
            Err(e) if matches!(e.code, 403 | 404 | 409) => {}
            Err(e) => self.retry(Work::Endpoints(key.clone()), &e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn pod(name: &str, ip: &str, ready: bool, port_name: Option<&str>) -> Pod {
        let ports: Value = match port_name {
            Some(n) => json!([{"name": n, "containerPort": 8080, "protocol": "TCP"}]),
            None => json!([]),
        };
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}"), "labels": {"app": "web"}},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "ports": ports}]},
            "status": {"phase": "Running", "podIP": ip, "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]},
        }))
        .unwrap()
    }

    fn service(ports: Value) -> Service {
        serde_json::from_value(json!({"metadata": {"name": "web", "namespace": "ns"}, "spec": {"selector": {"app": "web"}, "ports": ports}})).unwrap()
    }

    #[test]
    fn ready_and_unready_pods_split_and_named_ports_resolve() {
        let svc = service(json!([{"name": "http", "port": 80, "targetPort": "http", "protocol": "TCP"}]));
        let pods = [
            pod("a", "10.0.0.2", true, Some("http")),
            pod("b", "10.0.0.3", false, Some("http")),
            pod("c", "10.0.0.4", true, None),
        ];
        let subsets = subsets(&svc, pods.iter());
        assert_eq!(subsets.len(), 1, "the pod without the named port is left out");
        let s = &subsets[0];
        let ips = |l: &Option<Vec<EndpointAddress>>| l.iter().flatten().map(|a| a.ip.clone()).collect::<Vec<_>>();
        assert_eq!(ips(&s.addresses), ["10.0.0.2"]);
        assert_eq!(ips(&s.not_ready_addresses), ["10.0.0.3"]);
        let port = &s.ports.as_ref().unwrap()[0];
        assert_eq!((port.name.as_deref(), port.port), (Some("http"), 8080));
        assert_eq!(s.addresses.as_ref().unwrap()[0].target_ref.as_ref().unwrap().name.as_deref(), Some("a"));
    }

    #[test]
    fn addresses_with_different_ports_get_their_own_subsets() {
        let svc = service(
            json!([{"name": "http", "port": 80, "targetPort": "http"}, {"name": "raw", "port": 81, "targetPort": 9000}]),
        );
        let pods = [pod("a", "10.0.0.2", true, Some("http")), pod("c", "10.0.0.4", true, None)];
        let subsets = subsets(&svc, pods.iter());
        assert_eq!(subsets.len(), 2);
        let shapes: Vec<(usize, usize)> =
            subsets.iter().map(|s| (s.addresses.iter().flatten().count(), s.ports.iter().flatten().count())).collect();
        assert!(shapes.contains(&(2, 1)), "both pods offer the numeric port: {shapes:?}");
        assert!(shapes.contains(&(1, 1)), "only one offers the named port: {shapes:?}");
    }

    #[test]
    fn selectorless_services_select_nothing() {
        let svc: Service =
            serde_json::from_value(json!({"metadata": {"name": "worker"}, "spec": {"ports": [{"port": 443}]}}))
                .unwrap();
        assert!(!selects(&svc, Some(&BTreeMap::from([("app".to_string(), "web".to_string())]))));
    }
}

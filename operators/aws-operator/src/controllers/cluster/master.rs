//! Step 6, `master`: namespace `<id>`, Service and Endpoints `master` in the management
//! cluster.

use apis::aws::AWSCluster;
use aws_stacks::names;
use k8s_openapi::api::core::v1::{Endpoints, Namespace, Service};
use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use operatorkit::{Outcome, Resource, ResourceError, resource};
use serde::Serialize;

use super::ClusterState;
use crate::aws::AccountClients;
use crate::context::Shared;

/// Namespace `<id>`, Service and Endpoints `master` in the management cluster.
#[derive(Debug)]
pub struct Master;

impl Resource<AWSCluster, ClusterState> for Master {
    fn name(&self) -> &str {
        "master"
    }

    async fn ensure_created(&self, state: &mut ClusterState, obj: &AWSCluster) -> resource::Result<Outcome> {
        let (tenant, _) = state.accounts()?;
        let org = obj.labels().get(apis::labels::ORGANIZATION).cloned().unwrap_or_default();
        let uid = obj.uid().unwrap_or_default();
        ensure_master_objects(&state.shared, tenant, &obj.name_any(), &org, &uid, &obj.spec.cluster.dns.domain).await?;
        Ok(Outcome::proceed())
    }

    async fn ensure_deleted(&self, _: &mut ClusterState, _: &AWSCluster) -> resource::Result<Outcome> {
        Ok(Outcome::proceed())
    }
}

/// Namespace `<id>` (labelled with the cluster, its organisation `org` and the uid `uid` of the
/// object that owns the cluster), the selector-less Service `master` (port 443, the etcd domain
/// under `zone` for Prometheus) and its Endpoints: the private addresses of the cluster's
/// masters in service behind `<id>-api`. The Endpoints are refreshed from EC2 once the addresses
/// they were last built from are `endpoints_refresh` old ([`master_addresses`]: one listing per
/// account and period, shared by its clusters), so idle clusters do not cost a DescribeInstances
/// per resync; with no master in service (mid-roll) the last ones are kept. A node-pools
/// cluster's and a legacy cluster's alike.
pub(crate) async fn ensure_master_objects(
    shared: &Shared,
    tenant: &AccountClients,
    id: &str,
    org: &str,
    uid: &str,
    zone: &str,
) -> Result<(), ResourceError> {
    let pp = PatchParams::apply("aws-operator").force();
    let ns: Api<Namespace> = Api::all(shared.client.clone());
    let ns_obj = serde_json::json!({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": id, "labels": {
            "giantswarm.io/cluster": id,
            "giantswarm.io/organization": org,
            apis::labels::CLUSTER_UID: uid,
        }}
    });
    if !holds(ns.get_opt(id).await?.as_ref(), &ns_obj) {
        ns.patch(id, &pp, &Patch::Apply(&ns_obj)).await?;
    }
    let svc: Api<Service> = Api::namespaced(shared.client.clone(), id);
    let svc_obj = serde_json::json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {
            "name": "master",
            "labels": {"app": "master", "giantswarm.io/cluster": id, "giantswarm.io/organization": org},
            "annotations": {
                "giantswarm.io/etcd-domain": format!("{}:2379", names::etcd_host(id, zone)),
                "giantswarm.io/prometheus-cluster": id,
            }
        },
        "spec": {"ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 443}]}
    });
    if !holds(svc.get_opt("master").await?.as_ref(), &svc_obj) {
        svc.patch("master", &pp, &Patch::Apply(&svc_obj)).await?;
    }
    let memo_key = format!("{}/{id}", tenant.cache_key());
    let due = shared
        .memo
        .lock()
        .endpoints_refreshed
        .get(&memo_key)
        .is_none_or(|t| t.elapsed() >= shared.config.endpoints_refresh);
    if due {
        let (read, ips) = master_addresses(shared, tenant, id).await?;
        if !ips.is_empty() {
            let ep: Api<Endpoints> = Api::namespaced(shared.client.clone(), id);
            let ep_obj = serde_json::json!({
                "apiVersion": "v1", "kind": "Endpoints",
                "metadata": {"name": "master", "labels": {"app": "master", "cluster": id, "customer": org}},
                "subsets": [{
                    "addresses": ips.iter().map(|ip| serde_json::json!({"ip": ip})).collect::<Vec<_>>(),
                    "ports": [{"name": "https", "port": 443, "protocol": "TCP"}]
                }]
            });
            if !holds(ep.get_opt("master").await?.as_ref(), &ep_obj) {
                ep.patch("master", &pp, &Patch::Apply(&ep_obj)).await?;
            }
            shared.memo.lock().endpoints_refreshed.insert(memo_key, read);
        }
    }
    Ok(())
}

/// The private addresses of cluster `id`'s running masters, and when they were read. They come
/// from the account's listing of every cluster's masters ([`crate::aws::ec2::all_master_ips`]),
/// read again once it is `endpoints_refresh` old and shared by all the account's clusters: the
/// clusters' refreshes fall due together, when the listing they were built from expires, and an
/// account of steady clusters costs one listing per period instead of one call per cluster. A
/// cluster missing from a current listing (its first master still starting, or mid-roll) is looked
/// up on its own.
async fn master_addresses(
    shared: &Shared,
    tenant: &AccountClients,
    id: &str,
) -> Result<(std::time::Instant, Vec<String>), ResourceError> {
    let account = tenant.cache_key();
    let current = shared
        .memo
        .lock()
        .master_addresses
        .get(&account)
        .filter(|(read, _)| read.elapsed() < shared.config.endpoints_refresh)
        .map(|(read, all)| (*read, all.get(id).cloned()));
    match current {
        Some((read, Some(ips))) => Ok((read, ips)),
        Some((_, None)) => Ok((std::time::Instant::now(), crate::aws::ec2::master_ips(tenant, id).await?)),
        None => {
            let all = crate::aws::ec2::all_master_ips(tenant).await?;
            let read = std::time::Instant::now();
            let ips = all.get(id).cloned().unwrap_or_default();
            shared.memo.lock().master_addresses.insert(account, (read, all));
            Ok((read, ips))
        }
    }
}

/// Whether `live` already holds everything `desired` (an apply configuration) sets: each field of
/// `desired` is in `live` with the same value (objects compared field by field, so fields other
/// managers added do not count; lists compared whole). Applying then would change nothing, so the
/// apply, a write to the API server, is skipped: an idle cluster writes nothing.
fn holds<K: Serialize>(live: Option<&K>, desired: &serde_json::Value) -> bool {
    live.and_then(|k| serde_json::to_value(k).ok()).is_some_and(|live| contains(&live, desired))
}

fn contains(live: &serde_json::Value, desired: &serde_json::Value) -> bool {
    match (live, desired) {
        (serde_json::Value::Object(l), serde_json::Value::Object(d)) => {
            d.iter().all(|(k, dv)| l.get(k).is_some_and(|lv| contains(lv, dv)))
        }
        (serde_json::Value::Array(l), serde_json::Value::Array(d)) => {
            l.len() == d.len() && l.iter().zip(d).all(|(lv, dv)| contains(lv, dv))
        }
        (l, d) => l == d,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{EndpointAddress, EndpointSubset};
    use serde_json::json;

    #[test]
    fn an_object_holding_every_applied_field_needs_no_apply_and_any_difference_does() {
        let desired = json!({
            "apiVersion": "v1", "kind": "Endpoints",
            "metadata": {"name": "master", "labels": {"app": "master"}},
            "subsets": [{"addresses": [{"ip": "10.1.0.5"}], "ports": [{"name": "https", "port": 443, "protocol": "TCP"}]}]
        });
        let mut live: Endpoints = serde_json::from_value(desired.clone()).expect("endpoints");
        live.metadata.resource_version = Some("7".into());
        live.metadata.labels.get_or_insert_default().insert("other".into(), "manager".into());
        assert!(holds(Some(&live), &desired), "fields other managers add do not count");
        assert!(!holds(None::<&Endpoints>, &desired), "a missing object is applied");
        let mut moved = live.clone();
        moved.subsets = Some(vec![EndpointSubset {
            addresses: Some(vec![EndpointAddress { ip: "10.1.0.6".into(), ..Default::default() }]),
            ..live.subsets.clone().unwrap_or_default()[0].clone()
        }]);
        assert!(!holds(Some(&moved), &desired), "a changed address is applied");
        let mut relabelled = live.clone();
        relabelled.metadata.labels.get_or_insert_default().insert("app".into(), "other".into());
        assert!(!holds(Some(&relabelled), &desired), "a changed label is applied");
        let mut two = live;
        if let Some(s) = two.subsets.as_mut() {
            s[0].addresses
                .get_or_insert_default()
                .push(EndpointAddress { ip: "10.1.0.7".into(), ..Default::default() });
        }
        assert!(!holds(Some(&two), &desired), "an extra address is applied away");
    }
}

//! Step 6, `master`: namespace `<id>`, Service and Endpoints `master` in the management
//! cluster.

use apis::aws::AWSCluster;
use aws_stacks::names;
use k8s_openapi::api::core::v1::{Endpoints, Namespace, Service};
use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use operatorkit::{Outcome, Resource, ResourceError, resource};

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
/// masters in service behind `<id>-api`. The Endpoints are refreshed from EC2 at most every
/// `endpoints_refresh`, so idle clusters do not cost a DescribeInstances per resync; with no
/// master in service (mid-roll) the last ones are kept. A node-pools cluster's and a legacy
/// cluster's alike.
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
    ns.patch(id, &pp, &Patch::Apply(&ns_obj)).await?;
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
    svc.patch("master", &pp, &Patch::Apply(&svc_obj)).await?;
    let memo_key = format!("{}/{id}", tenant.cache_key());
    let due = shared
        .memo
        .lock()
        .endpoints_refreshed
        .get(&memo_key)
        .is_none_or(|t| t.elapsed() >= shared.config.endpoints_refresh);
    if due {
        let ips = crate::aws::ec2::master_ips(tenant, id).await?;
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
            ep.patch("master", &pp, &Patch::Apply(&ep_obj)).await?;
            shared.memo.lock().endpoints_refreshed.insert(memo_key, std::time::Instant::now());
        }
    }
    Ok(())
}

//! The Cluster API objects a Giant Swarm fleet carries beside a cluster's own
//! ([`apis::capi`]): read when their CRDs are installed in the management cluster, skipped when
//! they are not, and `Cluster.spec.controlPlaneEndpoint` written.
//!
//! Which of the kinds the API server serves is found through API discovery ([`CapiApis`]),
//! looked at again once its answer is older than `--capi-discovery-seconds` (60 s by
//! default), so CRDs installed (or removed) while the operator runs are picked up without a
//! restart. A kind that is not served, or an object that
//! does not exist, reads as absent: the cluster is built from its own objects alone.
//!
//! What is read, and which value wins where both the cluster's own object and a CAPI object
//! set one (pure, in [`effective_cluster`] and [`master_replicas`]):
//!
//! | value | the own field (wins) | the CAPI field (used when the own is unset) |
//! | --- | --- | --- |
//! | master count | `AWSControlPlane.spec.replicas` | `G8sControlPlane.spec.replicas`, then 3 for three zones, else 1 |
//! | pod CIDR | `AWSCluster.spec.provider.pods.cidrBlock` | `Cluster` annotation `cilium.giantswarm.io/pod-cidr` |
//! | each cloud tag | `AWSCluster` label `tag.provider.giantswarm.io/<key>` | the same label on the `Cluster` |
//!
//! When both are set and differ, the own object's value is used and the object gets the
//! condition [`OVERRIDDEN`] naming both values and the one used, with a Warning event when it
//! appears or changes. The settings only the CAPI objects have ([`tuning`]): etcd's quota, the
//! pod garbage collection threshold, Cilium's IPAM mode (`Cluster`) and cgroups v1
//! (`MachineDeployment`). A value the operator cannot use stops the object's reconcile before
//! anything is built, as its own bad fields do, with `Ready=False` and a Warning event naming
//! the CAPI object, the field and the fix; nothing is deleted.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use apis::aws::{AWSCluster, AWSClusterSpecProviderPods, AWSControlPlane};
use apis::capi::{
    CAPI_GROUP, CAPI_VERSIONS, CLOUD_TAG_PREFIX, CiliumIpamMode, Cluster, G8sControlPlane, MachineDeployment,
};
use apis::labels;
use aws_stacks::ignition::NodeTuning;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Client, ResourceExt};
use operatorkit::ResourceError;
use parking_lot::Mutex;

use operatorkit::status::describe;

/// The group of [`G8sControlPlane`].
const G8S_GROUP: &str = "infrastructure.giantswarm.io";

/// The condition type (and Warning event reason) naming a value of a CAPI object that the
/// object's own field overrides.
pub const OVERRIDDEN: &str = "CAPIValueOverridden";

/// The kinds of the CAPI objects the API server serves, each at the version read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Served {
    /// `clusters.cluster.x-k8s.io`.
    pub cluster: Option<ApiResource>,
    /// `machinedeployments.cluster.x-k8s.io`.
    pub machine_deployment: Option<ApiResource>,
    /// `g8scontrolplanes.infrastructure.giantswarm.io`.
    pub g8s_control_plane: Option<ApiResource>,
}

/// API discovery of the CAPI kinds, each answer used for `ttl`.
pub struct CapiApis {
    client: Client,
    ttl: Duration,
    cache: Mutex<Option<(Instant, Arc<Served>)>>,
}

impl fmt::Debug for CapiApis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CapiApis").finish_non_exhaustive()
    }
}

impl CapiApis {
    /// Discovery through `client` (reads only; writes go through the controllers' client),
    /// asked again once an answer is `ttl` old.
    pub fn new(client: Client, ttl: Duration) -> Self {
        Self { client, ttl, cache: Mutex::new(None) }
    }

    /// The kinds served now (at most `ttl` old).
    pub async fn served(&self) -> Result<Arc<Served>, kube::Error> {
        if let Some((at, served)) = self.cache.lock().as_ref()
            && at.elapsed() < self.ttl
        {
            return Ok(served.clone());
        }
        let served = Arc::new(discover(&self.client).await?);
        *self.cache.lock() = Some((Instant::now(), served.clone()));
        Ok(served)
    }
}

/// Ask the API server which of the kinds it serves: [`CAPI_VERSIONS`] in their order for
/// `Cluster` and `MachineDeployment`, `v1alpha3` for `G8sControlPlane`.
async fn discover(client: &Client) -> Result<Served, kube::Error> {
    let groups = client.list_api_groups().await?;
    let mut served = Served::default();
    for group in groups.groups.iter().filter(|g| g.name == CAPI_GROUP || g.name == G8S_GROUP) {
        let wanted: &[&str] = if group.name == CAPI_GROUP { &CAPI_VERSIONS } else { &["v1alpha3"] };
        for version in wanted {
            if !group.versions.iter().any(|v| v.version == *version) {
                continue;
            }
            let resources = client.list_api_group_resources(&format!("{}/{version}", group.name)).await?;
            let find = |kind: &str| {
                resources.resources.iter().find(|r| r.kind == kind && !r.name.contains('/')).map(|r| {
                    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(&group.name, version, kind), &r.name)
                })
            };
            if group.name == CAPI_GROUP {
                served.cluster = served.cluster.take().or_else(|| find("Cluster"));
                served.machine_deployment = served.machine_deployment.take().or_else(|| find("MachineDeployment"));
            } else {
                served.g8s_control_plane = served.g8s_control_plane.take().or_else(|| find("G8sControlPlane"));
            }
        }
    }
    Ok(served)
}

/// The objects of `resource` in `namespace` whose labels match `selector`, parsed as `K`.
async fn list<K: kube::Resource + serde::de::DeserializeOwned>(
    client: &Client,
    resource: &ApiResource,
    namespace: &str,
    selector: &str,
) -> Result<Vec<K>, ResourceError> {
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, resource);
    let mut objects = api.list(&ListParams::default().labels(selector)).await?.items;
    objects.sort_by_key(|o| o.name_any());
    objects
        .into_iter()
        .map(|o| {
            o.try_parse::<K>().map_err(|e| ResourceError::msg("Internal", format!("reading {}: {e}", resource.kind)))
        })
        .collect()
}

/// The `Cluster` of `cluster` (same namespace and name), when its kind is served and it exists,
/// checked ([`Cluster::validate`]): a value the operator cannot use is an `InvalidInput` naming
/// the `Cluster`, the annotation and the fix.
pub async fn cluster_of(
    client: &Client,
    apis: &CapiApis,
    cluster: &AWSCluster,
) -> Result<Option<Cluster>, ResourceError> {
    let Some(resource) = apis.served().await?.cluster.clone() else { return Ok(None) };
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &cluster.namespace().unwrap_or_default(), &resource);
    let Some(object) = api.get_opt(&cluster.name_any()).await? else { return Ok(None) };
    let capi: Cluster =
        object.try_parse().map_err(|e| ResourceError::msg("Internal", format!("reading the Cluster: {e}")))?;
    if let Err(errors) = capi.validate() {
        return Err(operatorkit::error::field_errors(&capi, errors).into());
    }
    Ok(Some(capi))
}

/// The `G8sControlPlane` of control plane `cp`: labelled with its cluster and control plane, as
/// Giant Swarm's tooling labelled it (the one named like `cp` when several are), checked.
pub async fn g8s_control_plane_of(
    client: &Client,
    apis: &CapiApis,
    cp: &AWSControlPlane,
    cluster_id: &str,
) -> Result<Option<G8sControlPlane>, ResourceError> {
    let Some(resource) = apis.served().await?.g8s_control_plane.clone() else { return Ok(None) };
    let selector = format!("{}={cluster_id},{}={}", labels::CLUSTER, labels::CONTROL_PLANE, cp.name_any());
    let mut found: Vec<G8sControlPlane> =
        list(client, &resource, &cp.namespace().unwrap_or_default(), &selector).await?;
    let at = found.iter().position(|g| g.name_any() == cp.name_any()).unwrap_or(0);
    if found.is_empty() {
        return Ok(None);
    }
    let g8s = found.swap_remove(at);
    if let Err(error) = g8s.replicas() {
        return Err(operatorkit::error::field_errors(&g8s, vec![error]).into());
    }
    Ok(Some(g8s))
}

/// The `MachineDeployment`s of node pool `md` of cluster `cluster_id` in `namespace`: labelled
/// with both, as the original listed them.
pub async fn machine_deployments_of(
    client: &Client,
    apis: &CapiApis,
    namespace: &str,
    cluster_id: &str,
    md: &str,
) -> Result<Vec<MachineDeployment>, ResourceError> {
    let Some(resource) = apis.served().await?.machine_deployment.clone() else { return Ok(Vec::new()) };
    let selector = format!("{}={cluster_id},{}={md}", labels::CLUSTER, labels::MACHINE_DEPLOYMENT);
    list(client, &resource, namespace, &selector).await
}

/// Write `host:port` to `spec.controlPlaneEndpoint` of `capi` (a merge patch of that field
/// only), unless it holds it already. Returns whether it wrote.
pub async fn write_control_plane_endpoint(
    client: &Client,
    apis: &CapiApis,
    capi: &Cluster,
    host: &str,
    port: i32,
) -> Result<bool, ResourceError> {
    let current = capi.spec.control_plane_endpoint.as_ref();
    if current.is_some_and(|e| e.host == host && e.port == port) {
        return Ok(false);
    }
    let Some(resource) = apis.served().await?.cluster.clone() else { return Ok(false) };
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), &capi.namespace().unwrap_or_default(), &resource);
    let patch = serde_json::json!({"spec": {"controlPlaneEndpoint": {"host": host, "port": port}}});
    api.patch(&capi.name_any(), &PatchParams::default(), &Patch::Merge(&patch)).await?;
    Ok(true)
}

// ---------------------------------------------------------------------------------------------
// Pure: precedence and settings
// ---------------------------------------------------------------------------------------------

/// A value of a CAPI object that the own object's field overrides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overridden {
    /// The own field, with its object: `spec.replicas of AWSControlPlane org-acme/a2wax`.
    pub own: String,
    /// Its value, which is used.
    pub own_value: String,
    /// The CAPI field, with its object.
    pub capi: String,
    /// Its value, which is not used.
    pub capi_value: String,
}

impl fmt::Display for Overridden {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} is {} and {} is {}: {} is used (the first wins); set both alike, or remove the second",
            self.own, self.own_value, self.capi, self.capi_value, self.own_value
        )
    }
}

/// `cluster` as the operator builds it: its own fields, and where it leaves one unset, the
/// `Cluster`'s value — the pod CIDR of `cilium.giantswarm.io/pod-cidr` and each cloud tag — with
/// every value of the `Cluster` that one of its own overrides.
pub fn effective_cluster(cluster: &AWSCluster, capi: Option<&Cluster>) -> (AWSCluster, Vec<Overridden>) {
    let mut effective = cluster.clone();
    let mut overridden = Vec::new();
    let Some(capi) = capi else { return (effective, overridden) };
    let own = describe(cluster);
    let theirs = describe(capi);
    if let Ok(Some(pod_cidr)) = capi.cilium_pod_cidr() {
        match cluster.pod_cidr() {
            Some(own_cidr) if own_cidr != pod_cidr => overridden.push(Overridden {
                own: format!("spec.provider.pods.cidrBlock of {own}"),
                own_value: own_cidr.to_string(),
                capi: format!("annotation {} of {theirs}", apis::capi::CILIUM_POD_CIDR),
                capi_value: pod_cidr.to_string(),
            }),
            Some(_) => {}
            None => {
                let pods = effective.spec.provider.pods.get_or_insert_with(AWSClusterSpecProviderPods::default);
                pods.cidr_block = Some(pod_cidr.to_string());
            }
        }
    }
    let own_tags = apis::capi::cloud_tags(cluster.labels());
    for (key, value) in capi.cloud_tags() {
        let label = format!("{CLOUD_TAG_PREFIX}{key}");
        match own_tags.get(&key) {
            Some(own_value) if *own_value != value => overridden.push(Overridden {
                own: format!("label {label} of {own}"),
                own_value: own_value.clone(),
                capi: format!("label {label} of {theirs}"),
                capi_value: value,
            }),
            Some(_) => {}
            None => {
                effective.labels_mut().insert(label, value);
            }
        }
    }
    (effective, overridden)
}

/// The master count of `cp`: its `spec.replicas` when set, else the `G8sControlPlane`'s, else
/// 3 for three zones and 1 otherwise; with the `G8sControlPlane`'s value when `cp`'s overrides
/// it. `g8s` was checked ([`g8s_control_plane_of`]).
pub fn master_replicas(cp: &AWSControlPlane, g8s: Option<&G8sControlPlane>) -> (i32, Option<Overridden>) {
    let theirs = g8s.and_then(|g| g.replicas().ok().flatten());
    match (cp.spec.replicas, theirs) {
        (Some(own), Some(capi)) if own != capi => (
            own,
            Some(Overridden {
                own: format!("spec.replicas of {}", describe(cp)),
                own_value: own.to_string(),
                capi: format!("spec.replicas of {}", g8s.map(describe).unwrap_or_default()),
                capi_value: capi.to_string(),
            }),
        ),
        (Some(own), _) => (own, None),
        (None, Some(capi)) => (capi, None),
        (None, None) => (cp.spec.master_replicas(), None),
    }
}

/// The field a person edits to change the master count [`master_replicas`] gives: the
/// `G8sControlPlane`'s `spec.replicas` when the count is its, else the AWSControlPlane's.
pub fn master_replicas_field(cp: &AWSControlPlane, g8s: Option<&G8sControlPlane>) -> String {
    match (cp.spec.replicas, g8s) {
        (None, Some(g)) if g.replicas().ok().flatten().is_some() => format!("spec.replicas of {}", describe(g)),
        _ => "spec.replicas".to_string(),
    }
}

/// The node settings only the CAPI objects have: from the `Cluster` (checked) etcd's quota, the
/// pod garbage collection threshold and Cilium's IPAM mode; from the pool's
/// `MachineDeployment`s (workers) cgroups v1.
pub fn tuning(capi: Option<&Cluster>, machine_deployments: &[MachineDeployment]) -> NodeTuning {
    NodeTuning {
        etcd_quota_backend_bytes: capi.and_then(|c| c.etcd_quota_backend_bytes().ok().flatten()),
        terminated_pod_gc_threshold: capi.and_then(|c| c.terminated_pod_gc_threshold().ok().flatten()),
        cilium_eni: capi.is_some_and(|c| c.cilium_ipam_mode() == Ok(CiliumIpamMode::Eni)),
        cgroup_v1: machine_deployments.iter().any(MachineDeployment::cgroup_v1),
    }
}

/// Set [`OVERRIDDEN`]`=True` naming every overridden value, or drop the condition when none is.
/// Returns the note of a Warning event when the condition is new or says something else than
/// before, so the event is published once per change.
pub fn note_overridden(
    conditions: &mut Vec<Condition>,
    overridden: &[Overridden],
    generation: Option<i64>,
) -> Option<String> {
    if overridden.is_empty() {
        conditions.retain(|c| c.type_ != OVERRIDDEN);
        return None;
    }
    let message = overridden.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ");
    let changed =
        operatorkit::status::set_condition(conditions, OVERRIDDEN, true, "ValuesDisagree", message.clone(), generation);
    changed.then_some(message)
}

/// The fields of the `Cluster` accepted without effect, each with why (beside the own object's,
/// in its `FieldsIgnored` condition).
pub fn ignored_fields(capi: Option<&Cluster>) -> Vec<(String, &'static str)> {
    capi.map(|c| {
        c.ignored_fields().into_iter().map(|(field, why)| (format!("{field} of {}", describe(c)), why)).collect()
    })
    .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use serde_json::json;

    fn aws_cluster(pod_cidr: Option<&str>, labels: serde_json::Value) -> AWSCluster {
        let mut provider = json!({"credentialSecret": {"name": "credential-al9qy", "namespace": "giantswarm"}, "region": "eu-central-1"});
        if let Some(cidr) = pod_cidr {
            provider["pods"] = json!({"cidrBlock": cidr});
        }
        serde_json::from_value(json!({
            "apiVersion": "infrastructure.giantswarm.io/v1alpha3", "kind": "AWSCluster",
            "metadata": {"name": "al9qy", "namespace": "org-acme", "labels": labels},
            "spec": {"cluster": {"dns": {"domain": "example.com"}}, "provider": provider}
        }))
        .expect("an AWSCluster")
    }

    fn capi_cluster(annotations: serde_json::Value, labels: serde_json::Value) -> Cluster {
        serde_json::from_value(json!({
            "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster",
            "metadata": {"name": "al9qy", "namespace": "org-acme", "annotations": annotations, "labels": labels},
            "spec": {"infrastructureRef": {"kind": "AWSCluster", "name": "al9qy"}}
        }))
        .expect("a Cluster")
    }

    fn control_plane(zones: &[&str], replicas: Option<i32>) -> AWSControlPlane {
        serde_json::from_value(json!({
            "apiVersion": "infrastructure.giantswarm.io/v1alpha3", "kind": "AWSControlPlane",
            "metadata": {"name": "a2wax", "namespace": "org-acme"},
            "spec": {"availabilityZones": zones, "instanceType": "m5.xlarge", "replicas": replicas}
        }))
        .expect("an AWSControlPlane")
    }

    fn g8s(replicas: i32) -> G8sControlPlane {
        serde_json::from_value(json!({
            "apiVersion": "infrastructure.giantswarm.io/v1alpha3", "kind": "G8sControlPlane",
            "metadata": {"name": "a2wax", "namespace": "org-acme"}, "spec": {"replicas": replicas}
        }))
        .expect("a G8sControlPlane")
    }

    #[test]
    fn the_master_count_is_the_control_planes_then_the_g8s_control_planes_then_the_zones() {
        let one_zone = ["eu-central-1a"];
        let three = ["eu-central-1a", "eu-central-1b", "eu-central-1c"];
        assert_eq!(master_replicas(&control_plane(&one_zone, None), Some(&g8s(3))), (3, None));
        assert_eq!(master_replicas(&control_plane(&three, None), Some(&g8s(1))), (1, None));
        assert_eq!(master_replicas(&control_plane(&three, None), None), (3, None));
        assert_eq!(master_replicas(&control_plane(&one_zone, Some(3)), Some(&g8s(3))), (3, None));
        let (count, overridden) = master_replicas(&control_plane(&one_zone, Some(1)), Some(&g8s(3)));
        assert_eq!(count, 1);
        assert_eq!(master_replicas_field(&control_plane(&one_zone, Some(1)), Some(&g8s(3))), "spec.replicas");
        assert_eq!(
            master_replicas_field(&control_plane(&one_zone, None), Some(&g8s(3))),
            "spec.replicas of G8sControlPlane org-acme/a2wax"
        );
        assert_eq!(master_replicas_field(&control_plane(&three, None), None), "spec.replicas");
        let message = overridden.expect("a disagreement").to_string();
        assert_eq!(
            message,
            "spec.replicas of AWSControlPlane org-acme/a2wax is 1 and spec.replicas of G8sControlPlane \
             org-acme/a2wax is 3: 1 is used (the first wins); set both alike, or remove the second"
        );
    }

    #[test]
    fn the_clusters_pod_cidr_and_tags_fill_what_the_awscluster_leaves_unset_and_lose_where_it_sets_them() {
        let capi = capi_cluster(
            json!({"cilium.giantswarm.io/pod-cidr": "10.4.0.0/16"}),
            json!({"tag.provider.giantswarm.io/cost-center": "blue", "tag.provider.giantswarm.io/team": "ops"}),
        );
        let bare = aws_cluster(None, json!({"giantswarm.io/cluster": "al9qy"}));
        let (effective, overridden) = effective_cluster(&bare, Some(&capi));
        assert_eq!(effective.pod_cidr(), Some("10.4.0.0/16"));
        assert_eq!(
            apis::capi::cloud_tags(effective.labels()),
            BTreeMap::from([("cost-center".into(), "blue".into()), ("team".into(), "ops".into())])
        );
        assert!(overridden.is_empty());

        let own = aws_cluster(Some("10.2.0.0/16"), json!({"tag.provider.giantswarm.io/cost-center": "red"}));
        let (effective, overridden) = effective_cluster(&own, Some(&capi));
        assert_eq!(effective.pod_cidr(), Some("10.2.0.0/16"));
        assert_eq!(effective.labels().get("tag.provider.giantswarm.io/cost-center").map(String::as_str), Some("red"));
        assert_eq!(effective.labels().get("tag.provider.giantswarm.io/team").map(String::as_str), Some("ops"));
        let messages: Vec<String> = overridden.iter().map(ToString::to_string).collect();
        assert_eq!(messages.len(), 2, "{messages:?}");
        assert!(
            messages[0].starts_with(
                "spec.provider.pods.cidrBlock of AWSCluster org-acme/al9qy is 10.2.0.0/16 and annotation \
                 cilium.giantswarm.io/pod-cidr of Cluster org-acme/al9qy is 10.4.0.0/16: 10.2.0.0/16 is used"
            ),
            "{}",
            messages[0]
        );
        assert!(messages[1].contains("is red and label tag.provider.giantswarm.io/cost-center of Cluster"));
        // Without a Cluster the AWSCluster is as it is.
        let (unchanged, overridden) = effective_cluster(&bare, None);
        assert_eq!(serde_json::to_value(unchanged).ok(), serde_json::to_value(&bare).ok());
        assert!(overridden.is_empty());
    }

    #[test]
    fn the_settings_only_capi_objects_have_come_from_them() {
        let capi = capi_cluster(
            json!({
                "etcd.giantswarm.io/quota-backend-bytes": "8589934592",
                "controllermanager.giantswarm.io/terminated-pod-gc-threshold": "500",
                "cilium.giantswarm.io/ipam-mode": "eni"
            }),
            json!({}),
        );
        let md: MachineDeployment = serde_json::from_value(json!({
            "metadata": {"name": "g3j50", "namespace": "org-acme", "annotations": {"node.giantswarm.io/cgroupv1": ""}},
            "spec": {"clusterName": "al9qy"}
        }))
        .expect("a MachineDeployment");
        assert_eq!(
            tuning(Some(&capi), &[md]),
            NodeTuning {
                etcd_quota_backend_bytes: Some(8_589_934_592),
                terminated_pod_gc_threshold: Some(500),
                cilium_eni: true,
                cgroup_v1: true,
            }
        );
        assert_eq!(tuning(None, &[]), NodeTuning::default());
    }

    /// Of a `MachineDeployment` only [`apis::capi::CGROUP_V1`] is read, and an
    /// AWSMachineDeployment has no field for cgroups: the two cannot disagree, so an
    /// AWSMachineDeployment never gets [`OVERRIDDEN`]. Should its schema gain one, this fails
    /// until the precedence is written (as [`master_replicas`] does for the masters).
    #[test]
    fn a_machine_deployment_sets_nothing_its_awsmachinedeployment_sets() {
        use kube::CustomResourceExt as _;
        let schema = serde_json::to_string(&apis::aws::AWSMachineDeployment::crd()).expect("the CRD");
        for word in ["cgroup", "Cgroup", "CGroup"] {
            assert!(!schema.contains(word), "AWSMachineDeployment's schema names {word}");
        }
        // What a MachineDeployment sets reaches its pool's workers whatever the
        // AWSMachineDeployment holds: it is read from the MachineDeployments alone.
        let md: MachineDeployment = serde_json::from_value(json!({
            "metadata": {"name": "g3j50", "namespace": "org-acme", "labels": {"node.giantswarm.io/cgroupv1": "true"}},
            "spec": {"clusterName": "al9qy"}
        }))
        .expect("a MachineDeployment");
        assert!(tuning(None, std::slice::from_ref(&md)).cgroup_v1);
        assert!(!tuning(None, &[]).cgroup_v1);
    }

    #[test]
    fn a_disagreement_is_noted_once_and_forgotten_once_resolved() {
        let overridden = [Overridden {
            own: "spec.replicas of AWSControlPlane org-acme/a2wax".into(),
            own_value: "1".into(),
            capi: "spec.replicas of G8sControlPlane org-acme/a2wax".into(),
            capi_value: "3".into(),
        }];
        let mut conditions = Vec::new();
        let note = note_overridden(&mut conditions, &overridden, Some(1)).expect("a new condition");
        assert!(note.contains("1 is used"), "{note}");
        assert_eq!(conditions[0].type_, OVERRIDDEN);
        assert_eq!(note_overridden(&mut conditions, &overridden, Some(1)), None, "unchanged: no second event");
        assert_eq!(note_overridden(&mut conditions, &[], Some(2)), None);
        assert!(conditions.is_empty());
    }
}

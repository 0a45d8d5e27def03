//! The Cluster API objects of a Giant Swarm fleet, under the CRDs its management clusters had
//! (Cluster API v1.4.0's `Cluster` and `MachineDeployment`, Giant Swarm's `G8sControlPlane`;
//! the files in `tests/fixtures/capi` are theirs, unchanged): the API server accepts the objects
//! as the fleet's tooling wrote them, and the types read them whole, in each served version.

use anyhow::{Context, Result};
use apis::capi::{CiliumIpamMode, Cluster, G8sControlPlane, MachineDeployment};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use testenv::TestEnv;

/// The CRDs of the fixtures directory.
const CRD_FILES: [&str; 3] = [
    "cluster.x-k8s.io_clusters.yaml",
    "cluster.x-k8s.io_machinedeployments.yaml",
    "infrastructure.giantswarm.io_g8scontrolplanes.yaml",
];

/// The fleet the aws-operator end-to-end test applies.
const FLEET: &str = include_str!("../../../operators/aws-operator/tests/fixtures/fleet/al9qy.yaml");

async fn start() -> Result<(TestEnv, Client)> {
    let env = TestEnv::start().await?;
    let client = env.client();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for file in CRD_FILES {
        let path = format!("{}/tests/fixtures/capi/{file}", env!("CARGO_MANIFEST_DIR"));
        let crd: CustomResourceDefinition =
            serde_saphyr::from_str(&std::fs::read_to_string(&path)?).with_context(|| format!("parsing {path}"))?;
        crds.create(&PostParams::default(), &crd).await.with_context(|| format!("installing {file}"))?;
    }
    let namespace: Namespace = serde_json::from_value(json!({"metadata": {"name": "org-acme"}}))?;
    Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &namespace).await?;
    Ok((env, client))
}

/// Create `object` as written, in the version its `apiVersion` names, with every field it has.
async fn create_as_written(client: &Client, object: &Value) -> Result<DynamicObject> {
    let (group, version) = object["apiVersion"].as_str().unwrap_or_default().split_once('/').unwrap_or_default();
    let kind = object["kind"].as_str().unwrap_or_default();
    let plural = format!("{}s", kind.to_ascii_lowercase());
    let resource = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), &plural);
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "org-acme", &resource);
    let parsed: DynamicObject = serde_json::from_value(object.clone())?;
    api.create(&PostParams::default(), &parsed).await.with_context(|| format!("creating {kind}"))
}

fn fleet_objects(kinds: &[&str]) -> Result<Vec<Value>> {
    let documents: Vec<Value> = serde_saphyr::from_multiple(FLEET).context("parsing the fleet")?;
    Ok(documents.into_iter().filter(|d| kinds.contains(&d["kind"].as_str().unwrap_or_default())).collect())
}

#[tokio::test]
async fn the_fleets_capi_objects_are_accepted_and_read_whole() -> Result<()> {
    let (_env, client) = start().await?;
    for object in fleet_objects(&["Cluster", "G8sControlPlane", "MachineDeployment"])? {
        create_as_written(&client, &object).await?;
    }
    let cluster = Api::<Cluster>::namespaced(client.clone(), "org-acme").get("al9qy").await?;
    assert_eq!(cluster.etcd_quota_backend_bytes(), Ok(Some(8_589_934_592)));
    assert_eq!(cluster.terminated_pod_gc_threshold(), Ok(Some(500)));
    assert_eq!(cluster.cilium_ipam_mode(), Ok(CiliumIpamMode::Kubernetes));
    assert_eq!(cluster.cloud_tags().get("cost-center").map(String::as_str), Some("team-blue"));
    assert_eq!(cluster.spec.control_plane_endpoint, None);
    let g8s = Api::<G8sControlPlane>::namespaced(client.clone(), "org-acme").get("a2wax").await?;
    assert_eq!(g8s.replicas(), Ok(Some(3)));
    assert_eq!(g8s.spec.infrastructure_ref.as_ref().and_then(|r| r.kind.as_deref()), Some("AWSControlPlane"));
    let md = Api::<MachineDeployment>::namespaced(client.clone(), "org-acme").get("g3j50").await?;
    assert!(md.cgroup_v1());
    assert_eq!(md.spec.cluster_name.as_deref(), Some("al9qy"));
    Ok(())
}

#[tokio::test]
async fn a_v1alpha3_cluster_of_an_older_fleet_is_read_like_a_v1beta1_one() -> Result<()> {
    let (_env, client) = start().await?;
    // As Giant Swarm's tooling wrote it before Cluster API v1beta1.
    let old = json!({
        "apiVersion": "cluster.x-k8s.io/v1alpha3", "kind": "Cluster",
        "metadata": {
            "name": "x4j3p", "namespace": "org-acme",
            "annotations": {"etcd.giantswarm.io/quota-backend-bytes": "4294967296"},
            "labels": {"giantswarm.io/cluster": "x4j3p", "release.giantswarm.io/version": "16.0.0",
                       "cluster-operator.giantswarm.io/version": "3.10.0", "giantswarm.io/organization": "acme"}
        },
        "spec": {
            "controlPlaneEndpoint": {"host": "api.x4j3p.k8s.gauss.eu-central-1.aws.gigantic.io", "port": 443},
            "infrastructureRef": {"apiVersion": "infrastructure.giantswarm.io/v1alpha2", "kind": "AWSCluster",
                                  "name": "x4j3p", "namespace": "org-acme"}
        }
    });
    let stored = create_as_written(&client, &old).await?;
    let cluster: Cluster = stored.try_parse()?;
    assert_eq!(cluster.name_any(), "x4j3p");
    assert_eq!(cluster.etcd_quota_backend_bytes(), Ok(Some(4_294_967_296)));
    let endpoint = cluster.spec.control_plane_endpoint.expect("the endpoint");
    assert_eq!((endpoint.host.as_str(), endpoint.port), ("api.x4j3p.k8s.gauss.eu-central-1.aws.gigantic.io", 443));
    Ok(())
}

#[tokio::test]
async fn a_g8s_control_plane_with_two_masters_is_refused_by_its_crd() -> Result<()> {
    let (_env, client) = start().await?;
    let mut object = fleet_objects(&["G8sControlPlane"])?.remove(0);
    object["spec"]["replicas"] = json!(2);
    let err = create_as_written(&client, &object).await.expect_err("2 masters");
    assert!(format!("{err:#}").contains("spec.replicas"), "{err:#}");
    Ok(())
}

//! The AWS CRDs installed into an API server: the samples are accepted as written, and input a
//! schema can reject is refused with a 422 that names the field.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use apis::aws::{AWSCluster, AWSControlPlane, AWSMachineDeployment, NetworkPool};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use kube::{Client, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use testenv::TestEnv;

/// The sample objects of the specification (§14.3), as written there.
const SPEC_SAMPLES: &str = r#"
apiVersion: infrastructure.giantswarm.io/v1alpha3
kind: AWSCluster
metadata:
  name: al9qy
  namespace: org-acme
  labels:
    giantswarm.io/cluster: al9qy
    giantswarm.io/organization: acme
    release.giantswarm.io/version: 18.2.0
    aws-operator.giantswarm.io/version: 14.24.1
spec:
  cluster: {description: prod, dns: {domain: gauss.eu-central-1.aws.gigantic.io}}
  provider:
    credentialSecret: {name: credential-al9qy, namespace: giantswarm}
    pods: {cidrBlock: 10.2.0.0/16}
    region: eu-central-1
status:
  provider: {network: {cidr: 10.1.0.0/24, vpcID: vpc-0abc}}
---
apiVersion: infrastructure.giantswarm.io/v1alpha3
kind: AWSControlPlane
metadata: {name: a2wax, namespace: org-acme, labels: {giantswarm.io/cluster: al9qy, giantswarm.io/control-plane: a2wax, aws-operator.giantswarm.io/version: 14.24.1, release.giantswarm.io/version: 18.2.0}}
spec: {availabilityZones: [eu-central-1a], instanceType: m5.xlarge}
---
apiVersion: infrastructure.giantswarm.io/v1alpha3
kind: AWSMachineDeployment
metadata:
  name: g3j50
  namespace: org-acme
  labels: {giantswarm.io/cluster: al9qy, giantswarm.io/machine-deployment: g3j50, aws-operator.giantswarm.io/version: 14.24.1, release.giantswarm.io/version: 18.2.0}
  annotations: {machine-deployment.giantswarm.io/subnet: 10.1.1.0/24}
spec:
  nodePool: {description: default, machine: {dockerVolumeSizeGB: 100, kubeletVolumeSizeGB: 100}, scaling: {min: 3, max: 10}}
  provider:
    availabilityZones: [eu-central-1a, eu-central-1b]
    instanceDistribution: {onDemandBaseCapacity: 0, onDemandPercentageAboveBaseCapacity: 100}
    worker: {instanceType: m5.2xlarge, useAlikeInstanceTypes: false}
---
apiVersion: v1
kind: Namespace
metadata: {name: giantswarm}
---
apiVersion: v1
kind: Secret
metadata: {name: credential-al9qy, namespace: giantswarm}
data: {aws.awsoperator.arn: YXJuOmF3czppYW06OjEyMzQ1Njc4OTAxMjpyb2xlL0dpYW50U3dhcm1BV1NPcGVyYXRvcg==}
"#;

async fn start() -> Result<(TestEnv, Client)> {
    let env = TestEnv::start().await?;
    let client = env.client();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in apis::all_crds() {
        crds.create(&PostParams::default(), &crd)
            .await
            .with_context(|| format!("installing {:?}", crd.metadata.name))?;
    }
    Ok((env, client))
}

/// Create `object` (JSON) as a `K` in its namespace.
async fn create<K>(client: &Client, object: Value) -> Result<K, kube::Error>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope> + Clone + DeserializeOwned + Serialize + std::fmt::Debug,
    K::DynamicType: Default,
{
    let parsed: K = serde_json::from_value(object).map_err(kube::Error::SerdeError)?;
    let namespace = parsed.meta().namespace.clone().unwrap_or_else(|| "default".into());
    Api::<K>::namespaced(client.clone(), &namespace).create(&PostParams::default(), &parsed).await
}

/// Apply a multi-document YAML stream, in order, creating namespaces as needed.
async fn apply_yaml(client: &Client, yaml: &str) -> Result<Vec<String>> {
    let documents: Vec<Value> = serde_saphyr::from_multiple(yaml).context("parsing the YAML")?;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let mut created = Vec::new();
    for document in documents {
        let kind = document["kind"].as_str().unwrap_or_default().to_string();
        if let Some(ns) = document["metadata"]["namespace"].as_str()
            && namespaces.get_opt(ns).await?.is_none()
        {
            let object: Namespace = serde_json::from_value(json!({"metadata": {"name": ns}}))?;
            namespaces.create(&PostParams::default(), &object).await?;
        }
        let name = match kind.as_str() {
            "Namespace" => {
                let object: Namespace = serde_json::from_value(document)?;
                let name = object.metadata.name.clone().unwrap_or_default();
                if namespaces.get_opt(&name).await?.is_none() {
                    namespaces.create(&PostParams::default(), &object).await?;
                }
                name
            }
            "Secret" => create::<Secret>(client, document).await?.metadata.name.unwrap_or_default(),
            "AWSCluster" => create::<AWSCluster>(client, document).await?.metadata.name.unwrap_or_default(),
            "AWSControlPlane" => create::<AWSControlPlane>(client, document).await?.metadata.name.unwrap_or_default(),
            "AWSMachineDeployment" => {
                create::<AWSMachineDeployment>(client, document).await?.metadata.name.unwrap_or_default()
            }
            other => bail!("unexpected kind {other}"),
        };
        created.push(format!("{kind}/{name}"));
    }
    Ok(created)
}

/// The 422 of a rejected create, or a failure naming what happened instead.
fn expect_invalid<K: std::fmt::Debug>(result: Result<K, kube::Error>, field: &str) -> Result<String> {
    match result {
        Err(kube::Error::Api(status)) if status.code == 422 => {
            if !status.message.contains(field) {
                bail!("the 422 does not name {field}: {}", status.message);
            }
            Ok(status.message.clone())
        }
        Err(other) => bail!("expected a 422 naming {field}, got {other}"),
        Ok(object) => bail!("expected a 422 naming {field}, but the object was created: {object:?}"),
    }
}

fn control_plane(zones: Value, instance_type: &str, replicas: Option<i32>) -> Value {
    let mut spec = json!({"availabilityZones": zones, "instanceType": instance_type});
    if let Some(r) = replicas {
        spec["replicas"] = json!(r);
    }
    json!({
        "apiVersion": "infrastructure.giantswarm.io/v1alpha3", "kind": "AWSControlPlane",
        "metadata": {"name": "a2wax", "namespace": "default"},
        "spec": spec
    })
}

fn cluster(pod_cidr: &str, region: &str) -> Value {
    json!({
        "apiVersion": "infrastructure.giantswarm.io/v1alpha3", "kind": "AWSCluster",
        "metadata": {"name": "al9qy", "namespace": "default"},
        "spec": {
            "cluster": {"description": "prod", "dns": {"domain": "gauss.eu-central-1.aws.gigantic.io"}},
            "provider": {
                "credentialSecret": {"name": "credential-al9qy", "namespace": "giantswarm"},
                "pods": {"cidrBlock": pod_cidr},
                "region": region
            }
        }
    })
}

fn machine_deployment(min: i64, docker_gb: i64, percentage: i64) -> Value {
    json!({
        "apiVersion": "infrastructure.giantswarm.io/v1alpha3", "kind": "AWSMachineDeployment",
        "metadata": {"name": "g3j50", "namespace": "default"},
        "spec": {
            "nodePool": {"description": "default", "machine": {"dockerVolumeSizeGB": docker_gb, "kubeletVolumeSizeGB": 100},
                         "scaling": {"min": min, "max": 10}},
            "provider": {
                "availabilityZones": ["eu-central-1a"],
                "instanceDistribution": {"onDemandPercentageAboveBaseCapacity": percentage},
                "worker": {"instanceType": "m5.2xlarge"}
            }
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_specification_samples_are_accepted_as_written() -> Result<()> {
    let (_env, client) = start().await?;
    let created = apply_yaml(&client, SPEC_SAMPLES).await?;
    assert_eq!(created.len(), 5, "{created:?}");

    let md = Api::<AWSMachineDeployment>::namespaced(client.clone(), "org-acme").get("g3j50").await?;
    assert_eq!(md.spec.node_pool.machine.docker_volume_size_gb, 100);
    // Defaults from the schema and the types agree.
    assert_eq!(md.spec.provider.instance_distribution.map(|d| d.on_demand_base_capacity), Some(0));
    let cp = Api::<AWSControlPlane>::namespaced(client.clone(), "org-acme").get("a2wax").await?;
    assert_eq!(cp.spec.master_replicas(), 1);
    // Status is a subresource: what a create carries is dropped.
    let cluster = Api::<AWSCluster>::namespaced(client, "org-acme").get("al9qy").await?;
    assert_eq!(cluster.cidr(), None);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_documented_example_is_accepted_and_valid() -> Result<()> {
    let (_env, client) = start().await?;
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/examples/aws-cluster.yaml");
    let yaml = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let created = apply_yaml(&client, &yaml).await?;
    assert_eq!(
        created,
        [
            "Namespace/giantswarm",
            "Namespace/org-acme",
            "Secret/credential-al9qy",
            "AWSCluster/al9qy",
            "AWSControlPlane/a2wax",
            "AWSMachineDeployment/g3j50"
        ]
    );

    let cluster = Api::<AWSCluster>::namespaced(client.clone(), "org-acme").get("al9qy").await?;
    assert_eq!(cluster.validate(), Ok(()));
    let region = cluster.spec.provider.region.as_str();
    assert_eq!(region, "eu-central-1");
    let cp = Api::<AWSControlPlane>::namespaced(client.clone(), "org-acme").get("a2wax").await?;
    assert_eq!(cp.validate(region), Ok(()));
    assert_eq!(cp.spec.master_replicas(), 3);
    let md = Api::<AWSMachineDeployment>::namespaced(client.clone(), "org-acme").get("g3j50").await?;
    assert_eq!(md.validate(region), Ok(()));
    assert_eq!(md.labels().get(apis::labels::AWS_OPERATOR_VERSION).map(String::as_str), Some("16.2.0"));

    let secret = Api::<Secret>::namespaced(client, "giantswarm").get("credential-al9qy").await?;
    let arn = secret.data.as_ref().and_then(|d| d.get("aws.awsoperator.arn")).map(|b| b.0.clone());
    assert_eq!(arn.as_deref(), Some(&b"arn:aws:iam::222222222222:role/GiantSwarmAWSOperator"[..]));
    Ok(())
}

/// Manifests written for the original carry `spec.provider.pods.externalSNAT`: the schema keeps
/// it (a field it did not know would be pruned), and the typed object reads it back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_deprecated_external_snat_field_is_accepted_and_kept() -> Result<()> {
    use kube::api::{ApiResource, DynamicObject};
    let (_env, client) = start().await?;
    let mut object = cluster("10.2.0.0/16", "eu-central-1");
    object["spec"]["provider"]["pods"]["externalSNAT"] = json!(true);
    object["spec"]["provider"]["pods"]["notAField"] = json!(true);
    let resource = ApiResource::erase::<AWSCluster>(&());
    let dynamic: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &resource);
    dynamic.create(&PostParams::default(), &serde_json::from_value(object)?).await?;

    let stored = dynamic.get("al9qy").await?;
    assert_eq!(
        stored.data["spec"]["provider"]["pods"],
        json!({"cidrBlock": "10.2.0.0/16", "externalSNAT": true}),
        "externalSNAT is kept, and a field the schema does not know is pruned"
    );
    let typed = Api::<AWSCluster>::namespaced(client, "default").get("al9qy").await?;
    assert_eq!(typed.spec.provider.pods.as_ref().and_then(|p| p.external_snat), Some(true));
    assert_eq!(typed.validate(), Ok(()));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_cidr_instance_type_and_zone_are_rejected_naming_the_field() -> Result<()> {
    let (_env, client) = start().await?;

    for bad in ["10.2.0.0/33", "10.256.0.0/16", "10.2.0.0"] {
        let message = expect_invalid(
            create::<AWSCluster>(&client, cluster(bad, "eu-central-1")).await,
            "spec.provider.pods.cidrBlock",
        )?;
        assert!(message.contains(bad), "the message shows the value: {message}");
    }
    expect_invalid(
        create::<AWSCluster>(&client, cluster("10.2.0.0/16", "eu-central-1a")).await,
        "spec.provider.region",
    )?;

    for bad in ["m5", "M5.XL", "m5..large", "m5.large!"] {
        let cp = control_plane(json!(["eu-central-1a"]), bad, None);
        expect_invalid(create::<AWSControlPlane>(&client, cp).await, "spec.instanceType")?;
    }
    let cp = control_plane(json!(["eu-central-1a", "eu-central-1"]), "m5.xlarge", None);
    expect_invalid(create::<AWSControlPlane>(&client, cp).await, "spec.availabilityZones[1]")?;
    let cp = control_plane(json!([]), "m5.xlarge", None);
    expect_invalid(create::<AWSControlPlane>(&client, cp).await, "spec.availabilityZones")?;
    let cp =
        control_plane(json!(["eu-central-1a", "eu-central-1b", "eu-central-1c", "eu-central-1a"]), "m5.xlarge", None);
    expect_invalid(create::<AWSControlPlane>(&client, cp).await, "spec.availabilityZones")?;
    let cp = control_plane(json!(["eu-central-1a"]), "m5.xlarge", Some(2));
    expect_invalid(create::<AWSControlPlane>(&client, cp).await, "spec.replicas")?;

    expect_invalid(
        create::<AWSMachineDeployment>(&client, machine_deployment(-1, 100, 50)).await,
        "spec.nodePool.scaling.min",
    )?;
    expect_invalid(
        create::<AWSMachineDeployment>(&client, machine_deployment(1, 0, 50)).await,
        "spec.nodePool.machine.dockerVolumeSizeGB",
    )?;
    expect_invalid(
        create::<AWSMachineDeployment>(&client, machine_deployment(1, 100, 101)).await,
        "spec.provider.instanceDistribution.onDemandPercentageAboveBaseCapacity",
    )?;

    let pool = json!({
        "apiVersion": "infrastructure.giantswarm.io/v1alpha3", "kind": "NetworkPool",
        "metadata": {"name": "pool-a", "namespace": "default"},
        "spec": {"cidrBlock": "10.10.0.0/40"}
    });
    expect_invalid(create::<NetworkPool>(&client, pool).await, "spec.cidrBlock")?;

    // Nothing rejected was stored; the valid forms of the same objects are accepted.
    assert!(Api::<AWSControlPlane>::namespaced(client.clone(), "default").get_opt("a2wax").await?.is_none());
    create::<AWSCluster>(&client, cluster("10.2.0.0/16", "eu-central-1")).await?;
    create::<AWSControlPlane>(&client, control_plane(json!(["eu-central-1a"]), "c6gn.16xlarge", Some(3))).await?;
    create::<AWSMachineDeployment>(&client, machine_deployment(0, 1, 100)).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_awscluster_whose_name_is_not_a_cluster_id_is_refused() -> Result<()> {
    let (_env, client) = start().await?;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": "org-acme"}}))?)
        .await?;
    // The name is the cluster id, which names the cluster's namespace: an existing namespace,
    // an organisation's, or anything but a short lower-case id is refused.
    for name in ["kube-system", "org-acme", "9lives", "waytoolongid1"] {
        let mut object = cluster("10.2.0.0/16", "eu-central-1");
        object["metadata"]["name"] = json!(name);
        let message = expect_invalid(create::<AWSCluster>(&client, object).await, "cluster id")
            .with_context(|| format!("name {name}"))?;
        assert!(message.contains("metadata.name"), "{message}");
    }
    create::<AWSCluster>(&client, cluster("10.2.0.0/16", "eu-central-1")).await?;
    Ok(())
}

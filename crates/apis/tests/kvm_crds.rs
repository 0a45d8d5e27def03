//! The KVMConfig CRD installed into an API server: the fixture is accepted as written, and what
//! the schema can reject is refused with a 422 that names the field. (CEL rules are not
//! evaluated by testenv; `validate` covers them and its unit tests prove it.)

use anyhow::{Context, Result, bail};
use apis::kvm::KVMConfig;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use kube::{Client, CustomResourceExt};
use serde_json::{Value, json};
use testenv::TestEnv;

const FIXTURE: &str = include_str!("fixtures/kvmconfig-qz7lt.yaml");

async fn start() -> Result<(TestEnv, Client)> {
    let env = TestEnv::start().await?;
    let client = env.client();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &KVMConfig::crd()).await.context("installing the KVMConfig CRD")?;
    Ok((env, client))
}

fn fixture() -> Value {
    serde_saphyr::from_str(FIXTURE).expect("fixture parses")
}

async fn create(client: &Client, object: Value) -> Result<KVMConfig, kube::Error> {
    let parsed: KVMConfig = serde_json::from_value(object).map_err(kube::Error::SerdeError)?;
    Api::<KVMConfig>::namespaced(client.clone(), "default").create(&PostParams::default(), &parsed).await
}

/// The 422 of a rejected create, naming `field`.
fn expect_invalid(result: Result<KVMConfig, kube::Error>, field: &str) -> Result<()> {
    match result {
        Err(kube::Error::Api(status)) if status.code == 422 && status.message.contains(field) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 422 => {
            bail!("the 422 does not name {field}: {}", status.message)
        }
        Err(other) => bail!("expected a 422 naming {field}, got {other}"),
        Ok(_) => bail!("expected a 422 naming {field}, but the object was created"),
    }
}

#[tokio::test]
async fn the_fixture_is_accepted_and_reads_back() -> Result<()> {
    let (_env, client) = start().await?;
    let created = create(&client, fixture()).await?;
    assert_eq!(created.validate(), Ok(()));
    let read = Api::<KVMConfig>::namespaced(client, "default").get("qz7lt").await?;
    assert_eq!(read.spec, created.spec);
    assert_eq!(read.spec.kvm.workers[1].memory, "1536M");
    assert_eq!(read.spec.kvm.port_mappings[1].node_port, 31443);
    Ok(())
}

#[tokio::test]
async fn the_schema_refuses_bad_input() -> Result<()> {
    let (_env, client) = start().await?;
    type Edit = fn(&mut Value);
    let cases: [(&str, Edit); 10] = [
        ("spec.cluster.masters", |o| o["spec"]["cluster"]["masters"] = json!([])),
        ("spec.cluster.workers[1]", |o| o["spec"]["cluster"]["workers"][1]["id"] = json!("wk1")),
        ("spec.cluster.id", |o| o["spec"]["cluster"]["id"] = json!("far-too-long-id")),
        // A cluster id names the namespace of its objects: an existing namespace is no id.
        ("spec.cluster.id", |o| o["spec"]["cluster"]["id"] = json!("kube-system")),
        ("spec.cluster.id", |o| o["spec"]["cluster"]["id"] = json!("9lives")),
        ("spec.cluster.kubernetes.api.clusterIPRange", |o| {
            o["spec"]["cluster"]["kubernetes"]["api"]["clusterIPRange"] = json!("172.31.0.0")
        }),
        ("spec.kvm.workers[0].memory", |o| o["spec"]["kvm"]["workers"][0]["memory"] = json!("12Gi")),
        ("spec.kvm.network.flannel.vni", |o| o["spec"]["kvm"]["network"]["flannel"]["vni"] = json!(20000)),
        ("spec.kvm.portMappings[1]", |o| o["spec"]["kvm"]["portMappings"][1]["name"] = json!("http")),
        ("spec.kvm.masters[0].cpus", |o| o["spec"]["kvm"]["masters"][0]["cpus"] = json!(0)),
    ];
    for (field, edit) in cases {
        let mut object = fixture();
        edit(&mut object);
        expect_invalid(create(&client, object).await, field).with_context(|| format!("case {field}"))?;
    }
    Ok(())
}

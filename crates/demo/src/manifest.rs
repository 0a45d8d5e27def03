//! Builds what the demo applies with `kubectl apply -f -` from the sample in
//! `docs/examples/aws-cluster.yaml`: the same objects, with the credential Secret naming the
//! demo's tenant account and one node pool. No certificate or encryption-provider config Secret:
//! aws-operator issues the cluster's PKI and encryption key itself (`docs/pki.md`).

use anyhow::{Context, bail};
use serde_json::{Value, json};

/// The manifest to apply and the facts the demo needs about it.
#[derive(Debug, Clone)]
pub struct ClusterManifest {
    /// Multi-document YAML for `kubectl apply -f -`.
    pub yaml: String,
    /// The cluster id (the AWSCluster's name).
    pub cluster_id: String,
    /// The namespace of the cluster's objects.
    pub namespace: String,
    /// Names of the node pools kept (exactly one).
    pub node_pools: Vec<String>,
}

fn kind(doc: &Value) -> &str {
    doc["kind"].as_str().unwrap_or_default()
}

/// Rewrite the sample `example_yaml` for the demo: the AWSCluster's credential Secret names
/// `tenant_role_arn` and only the first AWSMachineDeployment is kept.
pub fn cluster_manifest(example_yaml: &str, tenant_role_arn: &str) -> anyhow::Result<ClusterManifest> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(example_yaml).context("parsing the sample cluster YAML")?;
    let docs: Vec<Value> = docs.into_iter().filter(|d| !d.is_null()).collect();

    let clusters: Vec<&Value> = docs.iter().filter(|d| kind(d) == "AWSCluster").collect();
    let [cluster] = clusters.as_slice() else {
        bail!("the sample must hold exactly one AWSCluster, it holds {}", clusters.len());
    };
    let cluster_id = cluster["metadata"]["name"].as_str().context("the AWSCluster has no name")?.to_string();
    let namespace = cluster["metadata"]["namespace"].as_str().unwrap_or("default").to_string();
    let secret_ref = &cluster["spec"]["provider"]["credentialSecret"];
    let (secret_name, secret_ns) = (
        secret_ref["name"].as_str().context("the AWSCluster names no credential Secret")?.to_string(),
        secret_ref["namespace"].as_str().unwrap_or("default").to_string(),
    );

    let mut out = Vec::with_capacity(docs.len());
    let mut node_pools = Vec::new();
    let mut credential_found = false;
    for mut doc in docs {
        match kind(&doc) {
            "Secret"
                if doc["metadata"]["name"].as_str() == Some(&secret_name)
                    && doc["metadata"]["namespace"].as_str().unwrap_or("default") == secret_ns =>
            {
                // stringData instead of the sample's base64 `data`, so the ARN reads as written.
                let meta = doc["metadata"].take();
                doc = json!({
                    "apiVersion": "v1", "kind": "Secret", "metadata": meta, "type": "Opaque",
                    "stringData": {"aws.awsoperator.arn": tenant_role_arn}
                });
                credential_found = true;
            }
            "AWSMachineDeployment" => {
                if !node_pools.is_empty() {
                    continue;
                }
                node_pools.push(doc["metadata"]["name"].as_str().unwrap_or_default().to_string());
            }
            _ => {}
        }
        out.push(doc);
    }
    if !credential_found {
        bail!("the sample holds no Secret {secret_ns}/{secret_name}, which its AWSCluster names");
    }
    if node_pools.is_empty() {
        bail!("the sample holds no AWSMachineDeployment");
    }
    let mut yaml = String::new();
    for doc in &out {
        yaml.push_str("---\n");
        yaml.push_str(&serde_saphyr::to_string(doc).context("writing the demo manifest")?);
    }
    Ok(ClusterManifest { yaml, cluster_id, namespace, node_pools })
}

/// The `aws-operator` component version of the Release in `release_yaml`, if it names one.
pub fn operator_version_of_release(release_yaml: &str) -> anyhow::Result<Option<String>> {
    let release: Value = serde_saphyr::from_str(release_yaml).context("parsing the sample Release")?;
    Ok(release["spec"]["components"].as_array().and_then(|components| {
        components
            .iter()
            .find(|c| c["name"].as_str() == Some(aws_operator::daemon::COMPONENT))
            .and_then(|c| c["version"].as_str().map(str::to_string))
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = include_str!("../../../docs/examples/aws-cluster.yaml");
    const ROLE: &str = "arn:aws:iam::512345000001:role/GiantSwarmAWSOperator";

    fn docs(yaml: &str) -> Vec<Value> {
        serde_saphyr::from_multiple::<Value>(yaml).expect("valid YAML").into_iter().filter(|d| !d.is_null()).collect()
    }

    #[test]
    fn the_credential_secret_names_the_demo_tenant_and_no_certificate_or_key_is_added() {
        let m = cluster_manifest(SAMPLE, ROLE).expect("manifest");
        assert_eq!(m.cluster_id, "al9qy");
        assert_eq!(m.namespace, "org-acme");
        let docs = docs(&m.yaml);
        let credential = docs
            .iter()
            .find(|d| kind(d) == "Secret" && d["metadata"]["name"] == "credential-al9qy")
            .expect("credential Secret");
        assert_eq!(credential["stringData"]["aws.awsoperator.arn"], ROLE);
        assert!(credential.get("data").is_none(), "the sample's ARN must not survive: {credential}");
        // The operator issues the certificates and the encryption key: the manifest brings none.
        let secrets: Vec<&str> =
            docs.iter().filter(|d| kind(d) == "Secret").filter_map(|d| d["metadata"]["name"].as_str()).collect();
        assert_eq!(secrets, ["credential-al9qy"]);
        assert!(docs.iter().any(|d| kind(d) == "AWSControlPlane"));
    }

    #[test]
    fn only_the_first_node_pool_is_kept() {
        let second = "---\napiVersion: infrastructure.giantswarm.io/v1alpha3\nkind: AWSMachineDeployment\nmetadata:\n  name: zzzzz\n  namespace: org-acme\n";
        let m = cluster_manifest(&format!("{SAMPLE}{second}"), ROLE).expect("manifest");
        assert_eq!(m.node_pools, ["g3j50"]);
        let pools = docs(&m.yaml).iter().filter(|d| kind(d) == "AWSMachineDeployment").count();
        assert_eq!(pools, 1);
    }

    #[test]
    fn a_sample_without_its_credential_secret_is_refused() {
        let secret = "kind: Secret\nmetadata:\n  name: credential-al9qy\n";
        assert!(SAMPLE.contains(secret), "the sample's credential Secret moved; update this test");
        let without: String = SAMPLE.replace(secret, "kind: Secret\nmetadata:\n  name: other\n");
        let err = cluster_manifest(&without, ROLE).expect_err("no credential Secret");
        assert!(err.to_string().contains("giantswarm/credential-al9qy"), "{err}");
    }

    #[test]
    fn the_release_names_this_operator_version() {
        let release = include_str!("../../../docs/examples/release-v20.0.0.yaml");
        let version = operator_version_of_release(release).expect("parses");
        assert!(version.is_some());
        assert_eq!(operator_version_of_release("spec: {components: []}").expect("parses"), None);
    }
}

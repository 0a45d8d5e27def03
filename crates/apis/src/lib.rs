//! Custom resource types of the cluster operators, and the generation of their CRD manifests.
//!
//! Every kind is a Rust type with `kube::CustomResource`; its CustomResourceDefinition, with
//! schema and printer columns, is generated from the type ([`all_crds`], `make crds`), so the
//! manifests shipped in the Helm charts can never drift from the code.
//!
//! Beside the kinds, [`cluster_id`] holds what both operators decide about cluster ids: their
//! format, whose claim a namespace `<id>` is, and what a cluster object may delete.
//!
//! ```
//! use apis::release::{Release, ReleaseSpec};
//! use kube::CustomResourceExt;
//!
//! let crd = Release::crd();
//! assert_eq!(crd.metadata.name.as_deref(), Some("releases.release.giantswarm.io"));
//! ```
#![forbid(unsafe_code)]

pub mod aws;
pub mod aws_config;
pub mod capi;
pub mod cluster_id;
pub mod cluster_status;
pub mod drainer;
pub mod go;
pub mod kvm;
pub mod labels;
pub mod maintenance;
pub mod release;
pub mod status;
pub mod validation;
pub mod versionbundle;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

/// Every CRD of the project, in a stable order.
pub fn all_crds() -> Vec<CustomResourceDefinition> {
    vec![
        release::Release::crd(),
        aws::cluster_crd(),
        aws::AWSControlPlane::crd(),
        aws::AWSMachineDeployment::crd(),
        aws::NetworkPool::crd(),
        aws_config::AWSConfig::crd(),
        kvm::KVMConfig::crd(),
        drainer::DrainerConfig::crd(),
    ]
}

/// The CRDs each operator's Helm chart ships in its `crds/` directory (`make chart-crds` writes
/// them; a test fails when a chart's files differ from the Rust types): the kinds the operator
/// reads or writes. Kinds shared by operators (`Release`) ship in each chart; Helm installs a CRD
/// only when it does not exist yet.
///
/// A chart listed here whose directory does not exist yet ([`OPTIONAL_CHARTS`]) is skipped by
/// `crdgen --charts` and by the drift test, so a kind can exist before its operator's chart.
pub fn chart_crds() -> Vec<(&'static str, Vec<CustomResourceDefinition>)> {
    vec![
        (
            "aws-operator",
            vec![
                release::Release::crd(),
                aws::cluster_crd(),
                aws::AWSControlPlane::crd(),
                aws::AWSMachineDeployment::crd(),
                aws::NetworkPool::crd(),
                // The legacy generation's clusters, one object per cluster.
                aws_config::AWSConfig::crd(),
                // The drain executor runs in the operator: a platform needs no node-operator.
                drainer::DrainerConfig::crd(),
            ],
        ),
        ("kvm-operator", vec![release::Release::crd(), kvm::KVMConfig::crd(), drainer::DrainerConfig::crd()]),
    ]
}

/// Charts of [`chart_crds`] that get their CRDs only once their directory exists.
pub const OPTIONAL_CHARTS: &[&str] = &["kvm-operator"];

/// The file of `crd` in a chart's `crds/` directory: `<plural>.<group>.yaml`.
pub fn chart_crd_file(crd: &CustomResourceDefinition) -> String {
    format!("{}.yaml", crd.metadata.name.as_deref().unwrap_or("unnamed"))
}

/// Render CRDs as one multi-document YAML stream.
pub fn to_yaml(crds: &[CustomResourceDefinition]) -> Result<String, String> {
    let mut out = String::new();
    for crd in crds {
        out.push_str("---\n");
        out.push_str(&serde_saphyr::to_string(crd).map_err(|e| e.to_string())?);
    }
    Ok(out)
}

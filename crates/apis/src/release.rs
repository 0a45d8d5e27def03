//! The `Release` custom resource (`release.giantswarm.io/v1alpha1`, cluster-scoped).
//!
//! A Release names the versions of everything a workload cluster runs. A cluster's
//! `release.giantswarm.io/version: X.Y.Z` label refers to the Release named `vX.Y.Z`; operators
//! read the version of the component named like themselves to choose the logic that handles
//! the cluster, so upgrading a cluster means relabelling it.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The pattern of Release names: `v` and a semantic version, e.g. `v20.1.0`.
pub const NAME_PATTERN: &str = r"^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[\.0-9a-zA-Z]*)?$";

/// The desired contents of a release.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "release.giantswarm.io",
    version = "v1alpha1",
    kind = "Release",
    plural = "releases",
    status = "ReleaseStatus",
    doc = "A release: the versions of everything a workload cluster runs.",
    printcolumn = r#"{"name":"Kubernetes version","type":"string","jsonPath":".spec.components[?(@.name==\"kubernetes\")].version","description":"Version of the kubernetes component in this release"}"#,
    printcolumn = r#"{"name":"State","type":"string","jsonPath":".spec.state","description":"State of the release"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".spec.date","description":"Time since release creation"}"#,
    printcolumn = r#"{"name":"Ready","type":"boolean","jsonPath":".status.ready","description":"Whether every component that must be deployed is deployed"}"#,
    printcolumn = r#"{"name":"InUse","type":"boolean","jsonPath":".status.inUse","description":"Whether a cluster uses this release"}"#,
    printcolumn = r#"{"name":"Release notes","type":"string","jsonPath":".metadata.annotations.giantswarm\\.io/release-notes","priority":1,"description":"Release notes for this release"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ReleaseSpec {
    /// Apps installed in clusters of this release.
    #[serde(default)]
    pub apps: Vec<ReleaseApp>,
    /// Components of the release; operators find their own version here.
    #[schemars(length(min = 1))]
    pub components: Vec<ReleaseComponent>,
    /// When the release became active.
    pub date: Time,
    /// When the release reaches end of life.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_of_life_date: Option<Time>,
    /// Lifecycle state.
    pub state: ReleaseState,
    /// A notice shown to users of this release.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notice: Option<String>,
}

/// A component of a release (an operator, Kubernetes itself, the OS image).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReleaseComponent {
    /// Component name, e.g. `aws-operator`, `kubernetes`, `containerlinux`.
    pub name: String,
    /// Semantic version of the component.
    #[schemars(regex(pattern = r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[\.0-9a-zA-Z]*)?$"))]
    pub version: String,
    /// App catalog the component is installed from.
    #[serde(default = "default_component_catalog")]
    pub catalog: String,
    /// Catalog version, if it differs from `version` (test builds carry a commit suffix).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
    /// Whether the release machinery deploys this component.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release_operator_deploy: Option<bool>,
}

/// An app of a release.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReleaseApp {
    /// App name.
    pub name: String,
    /// App version.
    #[schemars(regex(pattern = r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[\.0-9a-zA-Z]*)?$"))]
    pub version: String,
    /// Upstream version of what the app installs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub component_version: Option<String>,
    /// App catalog.
    #[serde(default = "default_app_catalog")]
    pub catalog: String,
    /// Apps this one depends on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<String>,
}

fn default_component_catalog() -> String {
    "control-plane-catalog".into()
}

fn default_app_catalog() -> String {
    "default".into()
}

/// Lifecycle state of a release.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ReleaseState {
    /// Available for new and existing clusters.
    Active,
    /// No longer offered for new clusters.
    Deprecated,
    /// Work in progress, not for production.
    Wip,
    /// Offered for early testing.
    Preview,
}

/// Observed state of a release.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReleaseStatus {
    /// Every component that must be deployed is deployed.
    #[serde(default)]
    pub ready: bool,
    /// Some cluster uses this release.
    #[serde(default)]
    pub in_use: bool,
}

impl Release {
    /// The version of the component called `name`.
    pub fn component_version(&self, name: &str) -> Option<&str> {
        self.spec.components.iter().find(|c| c.name == name).map(|c| c.version.as_str())
    }
}

/// The name of the Release that a `release.giantswarm.io/version` label value refers to.
pub fn release_name(version_label: &str) -> String {
    format!("v{}", version_label.trim_start_matches('v'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::CustomResourceExt;

    #[test]
    fn crd_is_cluster_scoped_with_status_and_columns() {
        let crd = Release::crd();
        assert_eq!(crd.spec.scope, "Cluster");
        let v = &crd.spec.versions[0];
        assert!(v.subresources.as_ref().and_then(|s| s.status.as_ref()).is_some());
        let cols: Vec<_> = v.additional_printer_columns.iter().flatten().map(|c| c.name.as_str()).collect();
        assert_eq!(cols, ["Kubernetes version", "State", "Age", "Ready", "InUse", "Release notes"]);
    }

    #[test]
    fn component_lookup_and_names() {
        let r: Release = serde_json::from_value(serde_json::json!({
            "apiVersion": "release.giantswarm.io/v1alpha1", "kind": "Release",
            "metadata": {"name": "v20.0.0"},
            "spec": {"components": [{"name": "aws-operator", "version": "16.0.0"}], "date": "2026-01-01T00:00:00Z", "state": "active"}
        }))
        .unwrap();
        assert_eq!(r.component_version("aws-operator"), Some("16.0.0"));
        assert_eq!(r.component_version("kvm-operator"), None);
        assert_eq!(r.spec.components[0].catalog, "control-plane-catalog");
        assert_eq!(release_name("20.0.0"), "v20.0.0");
        assert_eq!(release_name("v20.0.0"), "v20.0.0");
    }
}

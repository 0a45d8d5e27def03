//! Well-known labels and annotations.

/// The release a cluster runs: its value `X.Y.Z` names the `Release` `vX.Y.Z`.
pub const RELEASE_VERSION: &str = "release.giantswarm.io/version";
/// The cluster an object belongs to.
pub const CLUSTER: &str = "giantswarm.io/cluster";
/// The organization that owns a cluster.
pub const ORGANIZATION: &str = "giantswarm.io/organization";
/// Which tool manages an object.
pub const MANAGED_BY: &str = "giantswarm.io/managed-by";
/// Release notes link (Release annotation).
pub const RELEASE_NOTES: &str = "giantswarm.io/release-notes";
/// Pauses reconciliation (Cluster API convention).
pub const CAPI_PAUSED: &str = "cluster.x-k8s.io/paused";
/// Pauses reconciliation (operatorkit convention).
pub const OPERATORKIT_PAUSED: &str = "operatorkit.giantswarm.io/paused";

/// The label that pins an object to one version of an operator in legacy side-by-side mode,
/// e.g. `aws-operator.giantswarm.io/version`.
pub fn operator_version_label(operator: &str) -> String {
    format!("{operator}.giantswarm.io/version")
}

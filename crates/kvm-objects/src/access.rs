//! The cluster's namespace, its ServiceAccount and its two ClusterRoleBindings (reference
//! §4.1.3–§4.1.5): the node pods run as ServiceAccount `<id>` in namespace `<id>`, bound to the
//! operator's general and pod-security ClusterRoles, which gives their sidecars the pod-patch and
//! DrainerConfig access they need.
//!
//! The bindings are cluster-scoped, so namespace deletion does not remove them: the original
//! left them behind after every cluster (§10.3). Here they carry the cluster's labels and the
//! KVMConfig's UID, and the operator deletes them at the end of the teardown, when they carry
//! that UID.

use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleBinding};
use serde_json::json;

use crate::cluster::Cluster;
use crate::names;

/// The ClusterRoles the bindings refer to (the operator's flags).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterRoles {
    /// The general role: `<id>` binds it.
    pub general: String,
    /// The pod-security role: `<id>-psp` binds it.
    pub psp: String,
}

impl Default for ClusterRoles {
    /// The roles the chart installs: `kvm-operator` and `kvm-operator-psp`.
    fn default() -> Self {
        Self { general: names::OPERATOR.into(), psp: format!("{}-psp", names::OPERATOR) }
    }
}

/// The cluster's labels, the operator's, and the KVMConfig's UID: what the teardown checks
/// before it deletes any of these objects.
fn labels(cluster: &Cluster) -> std::collections::BTreeMap<String, String> {
    let mut labels = cluster.common_labels();
    labels.insert(apis::labels::MANAGED_BY.into(), names::OPERATOR.into());
    labels.insert(apis::labels::CLUSTER_UID.into(), cluster.owner_uid.clone());
    labels
}

/// Namespace `<id>`, holding every namespaced object of the cluster.
pub fn namespace(cluster: &Cluster) -> Namespace {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": { "name": names::namespace(&cluster.id), "labels": labels(cluster) },
    }))
    .expect("the Namespace JSON has the Namespace shape")
}

/// ServiceAccount `<id>` in namespace `<id>`: the node pods' identity.
pub fn service_account(cluster: &Cluster) -> ServiceAccount {
    serde_json::from_value(json!({
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {
            "name": names::namespace(&cluster.id),
            "namespace": names::namespace(&cluster.id),
            "labels": labels(cluster),
        },
    }))
    .expect("the ServiceAccount JSON has the ServiceAccount shape")
}

/// ClusterRoleBindings `<id>` (general role) and `<id>-psp` (pod-security role), both binding
/// ServiceAccount `<id>/<id>`.
pub fn cluster_role_bindings(cluster: &Cluster, roles: &ClusterRoles) -> [ClusterRoleBinding; 2] {
    let [general, psp] = names::cluster_role_bindings(&cluster.id);
    let mut labels = labels(cluster);
    labels.insert(names::keys::APP.into(), names::OPERATOR.into());
    let binding = |name: String, role: &str| {
        serde_json::from_value(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": { "name": name, "labels": labels },
            "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role },
            "subjects": [{
                "kind": "ServiceAccount",
                "name": names::namespace(&cluster.id),
                "namespace": names::namespace(&cluster.id),
            }],
        }))
        .expect("the ClusterRoleBinding JSON has the ClusterRoleBinding shape")
    };
    [binding(general, &roles.general), binding(psp, &roles.psp)]
}

/// The operator's own access to the namespaces of its clusters. The chart binds the operator
/// cluster-wide only to what it needs everywhere (watching, reading, the namespaces themselves);
/// what creates or removes workloads (Deployments, Pods, Services, claims, Ingresses,
/// ServiceAccounts, Endpoints) is a ClusterRole bound in each cluster's namespace by the
/// RoleBinding [`operator_role_binding`] describes, which the operator writes right after the
/// namespace. So the operator's ServiceAccount cannot create a workload in any other namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperatorAccess {
    /// The ClusterRole of the workload rights (`--workload-cluster-role`).
    pub cluster_role: String,
    /// The operator's ServiceAccount, `<namespace>/<name>` (`--service-account`).
    pub service_account_namespace: String,
    /// Its name.
    pub service_account_name: String,
}

impl OperatorAccess {
    /// Parse `<namespace>/<name>` of the operator's ServiceAccount, for `cluster_role`.
    pub fn new(cluster_role: &str, service_account: &str) -> Result<Self, String> {
        match service_account.split_once('/') {
            Some((ns, name))
                if !ns.is_empty() && !name.is_empty() && !name.contains('/') && !cluster_role.is_empty() =>
            {
                Ok(Self {
                    cluster_role: cluster_role.to_string(),
                    service_account_namespace: ns.to_string(),
                    service_account_name: name.to_string(),
                })
            }
            _ => Err(format!(
                "--service-account {service_account:?} with --workload-cluster-role {cluster_role:?}: give the operator's ServiceAccount as <namespace>/<name> and a ClusterRole name"
            )),
        }
    }
}

/// RoleBinding `<cluster role>` in namespace `<id>`: the operator's ServiceAccount gets the
/// workload ClusterRole there, and only there.
pub fn operator_role_binding(cluster_id: &str, access: &OperatorAccess) -> RoleBinding {
    serde_json::from_value(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {
            "name": access.cluster_role,
            "namespace": names::namespace(cluster_id),
            "labels": { apis::labels::CLUSTER: cluster_id, apis::labels::MANAGED_BY: names::OPERATOR },
        },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": access.cluster_role },
        "subjects": [{
            "kind": "ServiceAccount",
            "name": access.service_account_name,
            "namespace": access.service_account_namespace,
        }],
    }))
    .expect("the RoleBinding JSON has the RoleBinding shape")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::fixtures;

    #[test]
    fn the_namespace_and_the_bindings_carry_the_kvmconfigs_uid() {
        let mut cluster = fixtures::cluster();
        cluster.owner_uid = "uid-of-qz7lt".into();
        let uid = |labels: &Option<std::collections::BTreeMap<String, String>>| {
            labels.as_ref().and_then(|l| l.get(apis::labels::CLUSTER_UID)).cloned()
        };
        assert_eq!(uid(&namespace(&cluster).metadata.labels).as_deref(), Some("uid-of-qz7lt"));
        for binding in cluster_role_bindings(&cluster, &ClusterRoles::default()) {
            assert_eq!(uid(&binding.metadata.labels).as_deref(), Some("uid-of-qz7lt"));
        }
    }

    #[test]
    fn the_bindings_bind_the_clusters_service_account_to_the_operators_roles() {
        let cluster = fixtures::cluster();
        let roles = ClusterRoles { general: "kvm-general".into(), psp: "kvm-restricted".into() };
        let [general, psp] = cluster_role_bindings(&cluster, &roles);
        assert_eq!(general.metadata.name.as_deref(), Some("qz7lt"));
        assert_eq!(psp.metadata.name.as_deref(), Some("qz7lt-psp"));
        assert_eq!((general.role_ref.name.as_str(), psp.role_ref.name.as_str()), ("kvm-general", "kvm-restricted"));
        for binding in [&general, &psp] {
            let subject = &binding.subjects.as_ref().expect("subjects")[0];
            assert_eq!((subject.name.as_str(), subject.namespace.as_deref()), ("qz7lt", Some("qz7lt")));
            let labels = binding.metadata.labels.clone().unwrap_or_default();
            assert_eq!(labels["giantswarm.io/cluster"], "qz7lt", "found again by label at deletion");
        }
        let sa = service_account(&cluster);
        assert_eq!((sa.metadata.name.as_deref(), sa.metadata.namespace.as_deref()), (Some("qz7lt"), Some("qz7lt")));
        let ns = namespace(&cluster);
        assert_eq!(ns.metadata.name.as_deref(), Some("qz7lt"));
        assert_eq!(ns.metadata.labels.unwrap_or_default()["customer"], "globex");
    }

    #[test]
    fn the_operator_is_bound_to_its_workload_role_in_the_clusters_namespace_only() {
        let cluster = fixtures::cluster();
        let access =
            OperatorAccess::new("kvm-operator-workloads-4-0-0", "giantswarm/kvm-operator-4-0-0").expect("valid");
        let binding = operator_role_binding(&cluster.id, &access);
        assert_eq!(binding.metadata.namespace.as_deref(), Some("qz7lt"));
        assert_eq!(
            (binding.role_ref.kind.as_str(), binding.role_ref.name.as_str()),
            ("ClusterRole", "kvm-operator-workloads-4-0-0")
        );
        let subject = &binding.subjects.as_ref().expect("subjects")[0];
        assert_eq!((subject.name.as_str(), subject.namespace.as_deref()), ("kvm-operator-4-0-0", Some("giantswarm")));
        for bad in ["kvm-operator", "/kvm-operator", "giantswarm/", "a/b/c"] {
            let err = OperatorAccess::new("r", bad).expect_err(bad);
            assert!(err.contains("<namespace>/<name>"), "{err}");
        }
        assert!(OperatorAccess::new("", "giantswarm/kvm-operator").is_err());
    }
}

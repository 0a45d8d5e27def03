//! The management cluster's access to a workload cluster: the identity both operators use for
//! drains, the node watch and node health, and the RBAC that grants it exactly that, which every
//! master applies to its API server at boot.
//!
//! The operators reach the workload cluster with the kubeconfig Secret `<id>-kubeconfig`,
//! whose client certificate (issued by `pki` on the cluster CA) names user [`USER`] in group
//! [`GROUP`]. That group is bound by [`CLUSTER_ROLE`] to [`RULES`]:
//!
//! | Resource | Verbs | For |
//! | --- | --- | --- |
//! | `nodes` | get, list, watch | node health, the node watch, upgrade gates, a drain's node |
//! | `nodes` | patch | cordon and uncordon |
//! | `nodes` | delete | a NotReady node whose VM is gone (kvm-operator) |
//! | `pods` | list | the pods on a node being drained |
//! | `pods/eviction` | create | evicting them (PodDisruptionBudgets hold) |
//!
//! Nothing else: no Secrets, no pod deletion, no writes beyond those.
//!
//! A master writes the ClusterRole and ClusterRoleBinding ([`master_files`]) and applies them
//! with server-side apply to its own API server as `system:masters` (the `api` certificate),
//! again at every boot ([`master_unit`]), so a changed role reaches the cluster with the next
//! master roll. The operators apply the same two objects ([`cluster_role`],
//! [`cluster_role_binding`]) themselves when a cluster whose masters predate them refuses the
//! management identity (`node_lifecycle::clients`).
//!
//! The script reads the node's values by default and nothing else on a node; an emulated node
//! (in tests) overrides them from the environment, which the unit leaves alone: `NODE_ROOT`
//! puts every file it reads below another directory, and `API_SERVER_URL` names the API
//! server in place of the master's own at `https://127.0.0.1:443`.

use serde_json::{Value, json};

use crate::kubernetes::TlsPaths;
use crate::{File, Unit};

/// The user name of the management cluster's client certificate (its common name).
pub const USER: &str = "giantswarm:cluster-operators";
/// The group of the management cluster's client certificate (its organization).
pub const GROUP: &str = "giantswarm:cluster-operators";
/// The ClusterRole and ClusterRoleBinding that grant [`GROUP`] its access.
pub const CLUSTER_ROLE: &str = "giantswarm:cluster-operators";

/// The directory of the RBAC objects on a master.
pub const DIRECTORY: &str = "/etc/kubernetes/access";
/// The script that applies them.
pub const SCRIPT: &str = "/opt/bin/apply-management-access";
/// The unit that runs it.
pub const UNIT: &str = "apply-management-access.service";
/// The field manager of the master's apply.
pub const MASTER_FIELD_MANAGER: &str = "cluster-operators";

/// The rules of [`CLUSTER_ROLE`]: `(API group, resources, verbs)`.
pub const RULES: &[(&str, &[&str], &[&str])] = &[
    ("", &["nodes"], &["get", "list", "watch", "patch", "delete"]),
    ("", &["pods"], &["list"]),
    ("", &["pods/eviction"], &["create"]),
];

/// The ClusterRole granting [`RULES`].
pub fn cluster_role() -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": CLUSTER_ROLE, "labels": {"giantswarm.io/managed-by": "cluster-operators"}},
        "rules": RULES.iter().map(|(group, resources, verbs)| json!({
            "apiGroups": [group], "resources": resources, "verbs": verbs,
        })).collect::<Vec<_>>(),
    })
}

/// The ClusterRoleBinding of [`CLUSTER_ROLE`] to [`GROUP`].
pub fn cluster_role_binding() -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": CLUSTER_ROLE, "labels": {"giantswarm.io/managed-by": "cluster-operators"}},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": CLUSTER_ROLE},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": GROUP}],
    })
}

/// The files of the RBAC objects (JSON, which server-side apply takes as YAML) and the script
/// that applies them with the master's `api` certificate (`tls`).
pub fn master_files(tls: &TlsPaths) -> Vec<File> {
    vec![
        File::text(format!("{DIRECTORY}/clusterrole.json"), &format!("{:#}\n", cluster_role())),
        File::text(format!("{DIRECTORY}/clusterrolebinding.json"), &format!("{:#}\n", cluster_role_binding())),
        File::script(SCRIPT, &apply_script(tls)),
    ]
}

/// The object path under `/apis/rbac.authorization.k8s.io/v1/` and the file of each object, in
/// the order they are applied (the role before its binding).
pub fn objects() -> [(String, String); 2] {
    [
        (format!("clusterroles/{CLUSTER_ROLE}"), format!("{DIRECTORY}/clusterrole.json")),
        (format!("clusterrolebindings/{CLUSTER_ROLE}"), format!("{DIRECTORY}/clusterrolebinding.json")),
    ]
}

fn apply_script(tls: &TlsPaths) -> String {
    let mut applies = String::new();
    for (path, file) in objects() {
        applies.push_str(&format!("  apply '{path}' '{file}' &&\n"));
    }
    format!(
        r#"#!/bin/bash
# The management cluster's operators drain, watch and check this cluster's nodes as group
# {GROUP}; this grants the group exactly that, by server-side apply to the local API server
# with the control plane's certificate. Retried until the API server answers.
set -uo pipefail

root="${{NODE_ROOT:-}}"
api="${{API_SERVER_URL:-https://127.0.0.1:443}}"

apply() {{
  curl --fail --silent --show-error --max-time 30 \
    --cacert "$root{ca}" --cert "$root{crt}" --key "$root{key}" \
    --request PATCH --header 'Content-Type: application/apply-patch+yaml' \
    --data-binary "@$root$2" \
    "$api/apis/rbac.authorization.k8s.io/v1/$1?fieldManager={MASTER_FIELD_MANAGER}&force=true" >/dev/null
}}

until
{applies}  true
do
  echo "the API server does not take the management access yet; retrying in 10 s" >&2
  sleep 10
done
"#,
        ca = tls.api_ca,
        crt = tls.api_crt,
        key = tls.api_key,
    )
}

/// The unit that applies the RBAC objects once the API server's kubelet runs.
pub fn master_unit() -> Unit {
    Unit::new(
        UNIT,
        format!(
            "[Unit]\n\
             Description=Grant the management cluster's operators their access to this cluster\n\
             Wants=kubelet.service\n\
             After=kubelet.service\n\
             \n\
             [Service]\n\
             Type=oneshot\n\
             RemainAfterExit=yes\n\
             ExecStart={SCRIPT}\n\
             \n\
             [Install]\n\
             WantedBy=multi-user.target\n"
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_binding_names_the_role_and_the_group_and_the_role_grants_only_the_rules() {
        let binding = cluster_role_binding();
        assert_eq!(binding["roleRef"]["name"], CLUSTER_ROLE);
        assert_eq!(binding["subjects"][0]["name"], GROUP);
        let role = cluster_role();
        let rules = role["rules"].as_array().expect("rules");
        assert_eq!(rules.len(), RULES.len());
        assert!(rules.iter().all(|r| r["verbs"].as_array().is_some_and(|v| !v.iter().any(|v| v == "*"))));
    }
}

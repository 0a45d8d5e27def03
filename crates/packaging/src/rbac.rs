//! Least privilege, measured: which permissions a rendered chart grants its operator that a run
//! never used, read from testenv's access log (`testenv::Handle::access_log_of`); and the means
//! to run an operator as its chart's ServiceAccount ([`apply_chart_identity`]) and fail at its
//! first refused request ([`without_refusals`]).
//!
//! testenv's own `unused_rules` answers per rule; a rule granting four verbs on three resources
//! counts as used when one of its twelve permissions is. Here every rule is split into single
//! grants (one API group, one resource, one verb, with the rule's `resourceNames`), and each is
//! checked with the authorizer's own matching (`testenv::auth::rbac::rule_allows`) against
//! the requests it allowed, so an unneeded verb shows even beside needed ones.

use std::fmt;

use k8s_openapi::api::rbac::v1::PolicyRule;
use serde_json::Value;
use testenv::AccessRecord;
use testenv::auth::rbac::rule_allows;

use crate::Error;

/// One verb on one resource of one API group, as a rendered role grants it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Grant {
    /// `ClusterRole/<name>` or `Role/<namespace>/<name>`.
    pub role: String,
    /// The namespace a Role grants in; `None` for a ClusterRole (the charts bind theirs with
    /// ClusterRoleBindings, so it grants everywhere).
    pub namespace: Option<String>,
    /// The API group ("" for core).
    pub group: String,
    /// The resource, `<resource>/<subresource>` for a subresource.
    pub resource: String,
    /// The verb.
    pub verb: String,
    /// The objects it is limited to (empty: all).
    pub resource_names: Vec<String>,
}

impl fmt::Display for Grant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let group = if self.group.is_empty() { "core" } else { &self.group };
        write!(f, "{}: {} {group}/{}", self.role, self.verb, self.resource)?;
        if !self.resource_names.is_empty() {
            write!(f, " {:?}", self.resource_names)?;
        }
        Ok(())
    }
}

impl Grant {
    fn as_rule(&self) -> PolicyRule {
        PolicyRule {
            api_groups: Some(vec![self.group.clone()]),
            resources: Some(vec![self.resource.clone()]),
            verbs: vec![self.verb.clone()],
            resource_names: (!self.resource_names.is_empty()).then(|| self.resource_names.clone()),
            non_resource_urls: None,
        }
    }

    /// Whether `record`, an allowed request, used this grant.
    fn used_by(&self, record: &AccessRecord) -> bool {
        record.allowed
            && record.attributes.resource_request
            && self.namespace.as_deref().is_none_or(|ns| ns == record.attributes.namespace)
            && rule_allows(&self.as_rule(), &record.attributes)
    }
}

/// Every single grant of the ClusterRoles and Roles in `rendered` (a chart's objects).
pub fn grants(rendered: &[Value]) -> Result<Vec<Grant>, Error> {
    let mut out = Vec::new();
    for role in rendered.iter().filter(|o| o["kind"] == "ClusterRole" || o["kind"] == "Role") {
        let kind = role["kind"].as_str().unwrap_or_default();
        let name = role["metadata"]["name"].as_str().unwrap_or_default();
        let (label, namespace) = if kind == "Role" {
            let ns = role["metadata"]["namespace"].as_str().ok_or_else(|| {
                Error::Rbac(format!("Role {name} has no metadata.namespace: render the chart with --namespace"))
            })?;
            (format!("Role/{ns}/{name}"), Some(ns.to_string()))
        } else {
            (format!("ClusterRole/{name}"), None)
        };
        for (i, rule) in role["rules"].as_array().into_iter().flatten().enumerate() {
            let rule: PolicyRule = serde_json::from_value(rule.clone())
                .map_err(|e| Error::Rbac(format!("{label} rule {i} is not a PolicyRule: {e}")))?;
            if rule.non_resource_urls.is_some() {
                continue;
            }
            for group in rule.api_groups.iter().flatten() {
                for resource in rule.resources.iter().flatten() {
                    for verb in &rule.verbs {
                        out.push(Grant {
                            role: label.clone(),
                            namespace: namespace.clone(),
                            group: group.clone(),
                            resource: resource.clone(),
                            verb: verb.clone(),
                            resource_names: rule.resource_names.clone().unwrap_or_default(),
                        });
                    }
                }
            }
        }
    }
    out.sort();
    out.dedup();
    Ok(out)
}

/// The grants of `rendered` that none of the allowed requests in `records` used. Pass the
/// records of the operator's ServiceAccount alone (`access_log_of`): another user's requests
/// say nothing about what the operator needs.
pub fn unused_grants(rendered: &[Value], records: &[AccessRecord]) -> Result<Vec<Grant>, Error> {
    Ok(grants(rendered)?.into_iter().filter(|g| !records.iter().any(|r| g.used_by(r))).collect())
}

/// The ServiceAccount of a rendered chart, with the chart's RBAC applied to a cluster: who an
/// operator runs as to prove the chart's permissions are enough.
#[derive(Clone, Debug)]
pub struct ChartIdentity {
    /// `system:serviceaccount:<namespace>:<name>`, the user of its requests in the access log.
    pub user: String,
    /// A bearer token for it (one hour).
    pub token: String,
    /// The ServiceAccount's namespace: the chart's release namespace.
    pub namespace: String,
}

/// Create, as `admin`, the one ServiceAccount of `rendered` (a chart's objects; its namespace
/// too, when missing) and the chart's ClusterRoles, Roles and their bindings, and issue a token
/// for the ServiceAccount from `env`. Nothing else of the chart is applied.
pub async fn apply_chart_identity(
    admin: &kube::Client,
    env: &testenv::Handle,
    rendered: &[Value],
) -> Result<ChartIdentity, Error> {
    use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
    use kube::api::{Api, PostParams};

    let accounts: Vec<&Value> = rendered.iter().filter(|o| o["kind"] == "ServiceAccount").collect();
    let [account] = accounts.as_slice() else {
        return Err(Error::Rbac(format!("the render holds {} ServiceAccounts, expected one", accounts.len())));
    };
    let namespace = account["metadata"]["namespace"].as_str().unwrap_or("default").to_string();
    let name = account["metadata"]["name"].as_str().unwrap_or_default().to_string();
    let api_error = |what: String| move |e: kube::Error| Error::Rbac(format!("{what}: {e}"));
    let namespaces: Api<Namespace> = Api::all(admin.clone());
    if namespaces.get_opt(&namespace).await.map_err(api_error(format!("reading namespace {namespace}")))?.is_none() {
        let ns: Namespace = serde_json::from_value(serde_json::json!({"metadata": {"name": namespace}}))
            .map_err(|e| Error::Rbac(e.to_string()))?;
        namespaces
            .create(&PostParams::default(), &ns)
            .await
            .map_err(api_error(format!("creating namespace {namespace}")))?;
    }
    let pp = PostParams::default();
    for object in rendered {
        let kind = object["kind"].as_str().unwrap_or_default();
        let ns = object["metadata"]["namespace"].as_str().unwrap_or(&namespace);
        let what = format!("creating {kind} {}", object["metadata"]["name"].as_str().unwrap_or_default());
        let bad = |e: serde_json::Error| Error::Rbac(format!("the rendered {kind} does not decode: {e}"));
        match kind {
            "ServiceAccount" => {
                let o: ServiceAccount = serde_json::from_value(object.clone()).map_err(bad)?;
                Api::namespaced(admin.clone(), ns).create(&pp, &o).await.map(drop).map_err(api_error(what))?;
            }
            "Role" => {
                let o: Role = serde_json::from_value(object.clone()).map_err(bad)?;
                Api::namespaced(admin.clone(), ns).create(&pp, &o).await.map(drop).map_err(api_error(what))?;
            }
            "RoleBinding" => {
                let o: RoleBinding = serde_json::from_value(object.clone()).map_err(bad)?;
                Api::namespaced(admin.clone(), ns).create(&pp, &o).await.map(drop).map_err(api_error(what))?;
            }
            "ClusterRole" => {
                let o: ClusterRole = serde_json::from_value(object.clone()).map_err(bad)?;
                Api::all(admin.clone()).create(&pp, &o).await.map(drop).map_err(api_error(what))?;
            }
            "ClusterRoleBinding" => {
                let o: ClusterRoleBinding = serde_json::from_value(object.clone()).map_err(bad)?;
                Api::all(admin.clone()).create(&pp, &o).await.map(drop).map_err(api_error(what))?;
            }
            _ => {}
        }
    }
    let token = env
        .service_account_token(&namespace, &name, std::time::Duration::from_secs(3600))
        .map_err(|e| Error::Rbac(format!("a token for {namespace}/{name}: {e}")))?;
    Ok(ChartIdentity { user: format!("system:serviceaccount:{namespace}:{name}"), token, namespace })
}

/// The refused requests among `records`, one line each: verb, API group and resource,
/// namespace and name.
pub fn refusals(records: &[AccessRecord]) -> Vec<String> {
    records
        .iter()
        .filter(|r| !r.allowed)
        .map(|r| {
            let a = &r.attributes;
            let resource =
                if a.subresource.is_empty() { a.resource.clone() } else { format!("{}/{}", a.resource, a.subresource) };
            let group = if a.group.is_empty() { "core" } else { a.group.as_str() };
            format!("{} {group}/{resource} namespace={:?} name={:?}", a.verb, a.namespace, a.name)
        })
        .collect()
}

/// Run `scenario`, failing as soon as RBAC refuses `user` a request on `env` (the error names
/// the refused requests) rather than when the scenario times out waiting for what the refusal
/// prevented; checked once more when the scenario is done. The scenario's own error is kept as
/// its message.
pub async fn without_refusals<T, E: fmt::Display>(
    env: &testenv::Handle,
    user: &str,
    scenario: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, Error> {
    let refused = || refusals(&env.access_log_of(user));
    let polling = async {
        loop {
            let r = refused();
            if !r.is_empty() {
                return r;
            }
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
    };
    let out = tokio::select! {
        out = scenario => out.map_err(|e| Error::Scenario(format!("{e:#}"))),
        r = polling => return Err(Error::Refused(format!("RBAC refused {user}: {r:#?}"))),
    };
    let r = refused();
    if !r.is_empty() {
        return Err(Error::Refused(format!("RBAC refused {user}: {r:#?}")));
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use testenv::auth::Attributes;

    use super::*;

    fn rendered() -> Vec<Value> {
        vec![
            json!({"kind": "ClusterRole", "metadata": {"name": "op"}, "rules": [
                {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list", "watch"]},
                {"apiGroups": ["infrastructure.giantswarm.io"], "resources": ["awsclusters/status"], "verbs": ["patch"]},
            ]}),
            json!({"kind": "Role", "metadata": {"name": "op", "namespace": "ops"}, "rules": [
                {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
                {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": ["op-1"], "verbs": ["get", "update"]},
            ]}),
            json!({"kind": "ServiceAccount", "metadata": {"name": "op"}}),
        ]
    }

    fn request(
        verb: &str,
        group: &str,
        resource: &str,
        subresource: &str,
        namespace: &str,
        name: &str,
    ) -> AccessRecord {
        AccessRecord {
            user: "system:serviceaccount:ops:op".into(),
            attributes: Attributes {
                verb: verb.into(),
                resource_request: true,
                group: group.into(),
                version: "v1".into(),
                resource: resource.into(),
                subresource: subresource.into(),
                namespace: namespace.into(),
                name: name.into(),
                path: String::new(),
            },
            allowed: true,
            rule: None,
            count: 1,
        }
    }

    fn names(grants: &[Grant]) -> Vec<String> {
        grants.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn every_rule_is_split_into_single_grants() {
        let all = grants(&rendered()).unwrap();
        assert_eq!(all.len(), 7, "{:#?}", names(&all));
        assert!(names(&all).contains(&"Role/ops/op: get coordination.k8s.io/leases [\"op-1\"]".to_string()));
    }

    #[test]
    fn a_grant_is_unused_until_an_allowed_request_of_its_scope_and_name_uses_it() {
        let records = vec![
            request("get", "", "secrets", "", "cluster-a", "creds"),
            request("list", "", "secrets", "", "", ""),
            request("patch", "infrastructure.giantswarm.io", "awsclusters", "status", "org-x", "a1"),
            request("create", "coordination.k8s.io", "leases", "", "ops", ""),
            // Another Lease's name, another namespace, a refusal: none of them uses a grant.
            request("get", "coordination.k8s.io", "leases", "", "ops", "op-2"),
            request("update", "coordination.k8s.io", "leases", "", "elsewhere", "op-1"),
            AccessRecord { allowed: false, ..request("watch", "", "secrets", "", "", "") },
        ];
        let unused = unused_grants(&rendered(), &records).unwrap();
        assert_eq!(
            names(&unused),
            [
                "ClusterRole/op: watch core/secrets",
                "Role/ops/op: get coordination.k8s.io/leases [\"op-1\"]",
                "Role/ops/op: update coordination.k8s.io/leases [\"op-1\"]",
            ]
        );
        let mut all = records;
        all.push(request("watch", "", "secrets", "", "", ""));
        all.push(request("get", "coordination.k8s.io", "leases", "", "ops", "op-1"));
        all.push(request("update", "coordination.k8s.io", "leases", "", "ops", "op-1"));
        assert!(unused_grants(&rendered(), &all).unwrap().is_empty());
    }

    #[test]
    fn a_role_without_a_namespace_is_an_error_naming_it() {
        let role = json!({"kind": "Role", "metadata": {"name": "lease"}, "rules": []});
        let err = grants(&[role]).unwrap_err().to_string();
        assert!(err.contains("Role lease") && err.contains("--namespace"), "{err}");
    }
}

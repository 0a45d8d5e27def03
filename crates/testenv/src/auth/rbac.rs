//! RBAC authorization, as kube-apiserver's RBAC authorizer (`plugin/pkg/auth/authorizer/rbac`)
//! decides: ClusterRoleBindings first, then the RoleBindings of the request's namespace; the
//! first rule that covers the request allows it; nothing denies. ClusterRoles with an
//! `aggregationRule` get the rules of the ClusterRoles their selectors match, written into
//! the object by a controller, as kube-controller-manager's clusterrole-aggregation does.
//!
//! Refusals are kube-apiserver's `403 Forbidden` with its message and details. Every decision
//! is recorded in the [`AccessLog`], with the binding, role and rule that allowed it, so a
//! test can ask which granted rules a component never used.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, Subject};
use parking_lot::{Mutex, RwLock};
use serde_json::{Value, json};

use super::{Attributes, UserInfo};
use crate::api::{Api, Mutation, Part, WriteOptions};
use crate::error::ApiError;
use crate::selector::LabelSelector;

pub(crate) const GROUP: &str = "rbac.authorization.k8s.io";

/// An authorization decision.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Decision {
    /// Allowed (RBAC never denies: not allowed means no opinion, which refuses).
    pub allowed: bool,
    /// kube-apiserver's reason: which binding allowed it, or why bindings were broken.
    pub reason: String,
    /// The rule that allowed it.
    pub rule: Option<RuleRef>,
}

/// Where a granted rule comes from: a binding, its role, and the rule's index in the role.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RuleRef {
    /// `ClusterRoleBinding` or `RoleBinding`.
    pub binding_kind: String,
    /// The binding's namespace ("" for ClusterRoleBindings).
    pub binding_namespace: String,
    /// The binding's name.
    pub binding_name: String,
    /// `ClusterRole` or `Role`.
    pub role_kind: String,
    /// The role's name.
    pub role_name: String,
    /// The index of the rule in the role's `rules`.
    pub rule: usize,
}

/// A rule granted to a user, and where it comes from.
#[derive(Clone, Debug, PartialEq)]
pub struct GrantedRule {
    /// Where.
    pub source: RuleRef,
    /// The rule, as JSON (`apiGroups`, `resources`, `verbs`, …).
    pub rule: Value,
}

/// One kind of request a user made, and how often.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AccessRecord {
    /// The user's name.
    pub user: String,
    /// The request's attributes (verb, group, resource, subresource, namespace, name, path).
    pub attributes: Attributes,
    /// Whether it was allowed.
    pub allowed: bool,
    /// The rule that allowed it (none for privileged users and refusals).
    pub rule: Option<RuleRef>,
    /// How many such requests.
    pub count: u64,
}

type AccessKey = (String, Attributes, bool, Option<RuleRef>);

/// Who was allowed what, aggregated by identical requests (bounded by their variety, not
/// their number).
#[derive(Debug, Default)]
pub struct AccessLog {
    records: Mutex<HashMap<AccessKey, u64>>,
}

impl AccessLog {
    pub(crate) fn record(&self, user: &UserInfo, attrs: &Attributes, decision: &Decision) {
        let mut attrs = attrs.clone();
        if attrs.resource_request {
            attrs.path.clear();
        }
        let key = (user.name.clone(), attrs, decision.allowed, decision.rule.clone());
        *self.records.lock().entry(key).or_insert(0) += 1;
    }

    /// Every record, ordered by user, then attributes.
    pub fn records(&self) -> Vec<AccessRecord> {
        let mut out: Vec<AccessRecord> = self
            .records
            .lock()
            .iter()
            .map(|((user, attributes, allowed, rule), count)| AccessRecord {
                user: user.clone(),
                attributes: attributes.clone(),
                allowed: *allowed,
                rule: rule.clone(),
                count: *count,
            })
            .collect();
        out.sort_by(|a, b| {
            (&a.user, &a.attributes.namespace, &a.attributes.resource, &a.attributes.verb, &a.attributes.name).cmp(&(
                &b.user,
                &b.attributes.namespace,
                &b.attributes.resource,
                &b.attributes.verb,
                &b.attributes.name,
            ))
        });
        out
    }

    /// The records of one user.
    pub fn records_of(&self, user: &str) -> Vec<AccessRecord> {
        self.records().into_iter().filter(|r| r.user == user).collect()
    }

    /// Forget everything recorded so far.
    pub fn clear(&self) {
        self.records.lock().clear();
    }

    fn used_rules(&self, user: &str) -> HashSet<RuleRef> {
        self.records.lock().keys().filter(|(u, ..)| u == user).filter_map(|(_, _, _, r)| r.clone()).collect()
    }
}

/// The compiled policy at one point of the RBAC resources' history.
#[derive(Debug, Default)]
struct Policy {
    cluster_roles: HashMap<String, Arc<Vec<PolicyRule>>>,
    roles: HashMap<(String, String), Arc<Vec<PolicyRule>>>,
    cluster_bindings: Vec<ClusterRoleBinding>,
    role_bindings: BTreeMap<String, Vec<RoleBinding>>,
}

/// The RBAC authorizer: a policy compiled from the stored objects, rebuilt when they change.
#[derive(Debug, Default)]
pub struct Rbac {
    cache: RwLock<Option<([u64; 4], Arc<Policy>)>>,
}

fn storage_keys() -> [String; 4] {
    ["clusterroles", "clusterrolebindings", "roles", "rolebindings"].map(|r| format!("{r}.{GROUP}"))
}

fn list_all<T: serde::de::DeserializeOwned>(api: &Api, storage: &str) -> Vec<T> {
    let Ok(snap) = api.store.list(storage, None, None, None, None, &|_, _| true) else { return Vec::new() };
    snap.items.iter().filter_map(|(_, s)| serde_json::from_slice(&s.json).ok()).collect()
}

impl Rbac {
    fn policy(&self, api: &Api) -> Arc<Policy> {
        let keys = storage_keys();
        let stamp = [0, 1, 2, 3].map(|i| api.store.last_change(&keys[i]));
        if let Some((s, p)) = &*self.cache.read()
            && *s == stamp
        {
            return p.clone();
        }
        let mut policy = Policy::default();
        for cr in list_all::<ClusterRole>(api, &keys[0]) {
            let name = cr.metadata.name.unwrap_or_default();
            policy.cluster_roles.insert(name, Arc::new(cr.rules.unwrap_or_default()));
        }
        policy.cluster_bindings = list_all::<ClusterRoleBinding>(api, &keys[1]);
        for r in list_all::<Role>(api, &keys[2]) {
            let key = (r.metadata.namespace.unwrap_or_default(), r.metadata.name.unwrap_or_default());
            policy.roles.insert(key, Arc::new(r.rules.unwrap_or_default()));
        }
        for rb in list_all::<RoleBinding>(api, &keys[3]) {
            policy.role_bindings.entry(rb.metadata.namespace.clone().unwrap_or_default()).or_default().push(rb);
        }
        let policy = Arc::new(policy);
        *self.cache.write() = Some((stamp, policy.clone()));
        policy
    }

    /// Decide on a request.
    pub fn authorize(&self, api: &Api, user: &UserInfo, attrs: &Attributes) -> Decision {
        let policy = self.policy(api);
        let mut errors = Vec::new();
        let mut allowed = None;
        visit(&policy, user, &attrs.namespace, &mut errors, &mut |source, rules| {
            for (i, rule) in rules.iter().enumerate() {
                if rule_allows(rule, attrs) {
                    allowed = Some((source.describe(), source.rule_ref(i)));
                    return false;
                }
            }
            true
        });
        match allowed {
            Some((describe, rule)) => {
                Decision { allowed: true, reason: format!("RBAC: allowed by {describe}"), rule: Some(rule) }
            }
            None => {
                let reason = match errors.len() {
                    0 => String::new(),
                    1 => format!("RBAC: {}", errors[0]),
                    _ => format!("RBAC: [{}]", errors.join(", ")),
                };
                Decision { allowed: false, reason, rule: None }
            }
        }
    }

    /// Every rule that applies to `user` in `namespace` ("" for cluster-wide rules only), for
    /// SelfSubjectRulesReview.
    pub fn rules_for(&self, api: &Api, user: &UserInfo, namespace: &str) -> (Vec<PolicyRule>, Vec<String>) {
        let policy = self.policy(api);
        let mut errors = Vec::new();
        let mut out = Vec::new();
        visit(&policy, user, namespace, &mut errors, &mut |_, rules| {
            out.extend(rules.iter().cloned());
            true
        });
        (out, errors)
    }

    /// Every rule granted to `user` anywhere, with its source.
    pub fn granted(&self, api: &Api, user: &UserInfo) -> Vec<GrantedRule> {
        let policy = self.policy(api);
        let mut errors = Vec::new();
        let mut out = Vec::new();
        let mut namespaces: Vec<String> = vec![String::new()];
        namespaces.extend(policy.role_bindings.keys().cloned());
        for ns in namespaces {
            visit(&policy, user, &ns, &mut errors, &mut |source, rules| {
                if ns.is_empty() || source.binding_kind == "RoleBinding" {
                    for (i, r) in rules.iter().enumerate() {
                        out.push(GrantedRule {
                            source: source.rule_ref(i),
                            rule: serde_json::to_value(r).unwrap_or_default(),
                        });
                    }
                }
                true
            });
        }
        out.sort_by(|a, b| a.source.cmp(&b.source));
        out.dedup_by(|a, b| a.source == b.source);
        out
    }

    /// The rules of the role a binding in `namespace` names: a ClusterRole, or a Role of that
    /// namespace. `None` when it does not exist.
    pub fn role_rules(&self, api: &Api, kind: &str, namespace: &str, name: &str) -> Option<Arc<Vec<PolicyRule>>> {
        let policy = self.policy(api);
        match kind {
            "ClusterRole" => policy.cluster_roles.get(name).cloned(),
            _ => policy.roles.get(&(namespace.to_string(), name.to_string())).cloned(),
        }
    }

    /// The permissions of `rules` that `user` does not hold in `namespace` ("" for cluster-wide
    /// rules only), each as kube-apiserver prints it: its escalation check
    /// (`ConfirmNoEscalation`). A wildcard is held only by a rule with the same wildcard.
    pub fn missing_permissions(
        &self,
        api: &Api,
        user: &UserInfo,
        namespace: &str,
        rules: &[PolicyRule],
    ) -> Vec<String> {
        let mut missing = Vec::new();
        let list = |l: &Option<Vec<String>>| l.clone().unwrap_or_default();
        for rule in rules {
            for verb in &rule.verbs {
                if let Some(urls) = rule.non_resource_urls.as_ref().filter(|u| !u.is_empty()) {
                    for url in urls {
                        let attrs = Attributes { verb: verb.clone(), path: url.clone(), ..Attributes::default() };
                        if !self.authorize(api, user, &attrs).allowed {
                            missing.push(format!("{{NonResourceURLs:[{url:?}], Verbs:[{verb:?}]}}"));
                        }
                    }
                    continue;
                }
                let names = list(&rule.resource_names);
                let names = if names.is_empty() { vec![String::new()] } else { names };
                for group in list(&rule.api_groups) {
                    for resource in list(&rule.resources) {
                        let (resource, subresource) = match resource.split_once('/') {
                            Some((r, sub)) => (r.to_string(), sub.to_string()),
                            None => (resource.clone(), String::new()),
                        };
                        for name in &names {
                            let attrs = Attributes {
                                verb: verb.clone(),
                                resource_request: true,
                                group: group.clone(),
                                version: String::new(),
                                resource: resource.clone(),
                                subresource: subresource.clone(),
                                namespace: namespace.to_string(),
                                name: name.clone(),
                                path: String::new(),
                            };
                            if !self.authorize(api, user, &attrs).allowed {
                                let combined = if subresource.is_empty() {
                                    resource.clone()
                                } else {
                                    format!("{resource}/{subresource}")
                                };
                                let names =
                                    if name.is_empty() { String::new() } else { format!(", ResourceNames:[{name:?}]") };
                                missing.push(format!(
                                    "{{APIGroups:[{group:?}], Resources:[{combined:?}]{names}, Verbs:[{verb:?}]}}"
                                ));
                            }
                        }
                    }
                }
            }
        }
        missing
    }

    /// The rules granted to `user` that allowed none of its requests recorded in `log`.
    pub fn unused_rules(&self, api: &Api, user: &UserInfo, log: &AccessLog) -> Vec<GrantedRule> {
        let used = log.used_rules(&user.name);
        self.granted(api, user).into_iter().filter(|g| !used.contains(&g.source)).collect()
    }
}

/// Where rules come from while visiting.
struct Source<'a> {
    binding_kind: &'static str,
    binding_namespace: &'a str,
    binding_name: &'a str,
    role_kind: &'a str,
    role_name: &'a str,
    subject: &'a Subject,
}

impl Source<'_> {
    fn rule_ref(&self, rule: usize) -> RuleRef {
        RuleRef {
            binding_kind: self.binding_kind.into(),
            binding_namespace: self.binding_namespace.into(),
            binding_name: self.binding_name.into(),
            role_kind: self.role_kind.into(),
            role_name: self.role_name.into(),
            rule,
        }
    }

    /// As kube-apiserver describes a source in its reasons.
    fn describe(&self) -> String {
        let subject = match self.subject.kind.as_str() {
            "ServiceAccount" => {
                let ns = self.subject.namespace.as_deref().filter(|s| !s.is_empty()).unwrap_or(self.binding_namespace);
                format!("ServiceAccount {:?}", format!("{}/{ns}", self.subject.name))
            }
            kind => format!("{kind} {:?}", self.subject.name),
        };
        if self.binding_kind == "ClusterRoleBinding" {
            format!(
                "ClusterRoleBinding {:?} of {} {:?} to {subject}",
                self.binding_name, self.role_kind, self.role_name
            )
        } else {
            format!(
                "RoleBinding {:?} of {} {:?} to {subject}",
                format!("{}/{}", self.binding_name, self.binding_namespace),
                self.role_kind,
                self.role_name
            )
        }
    }
}

/// Visit the rules that apply to `user` in `namespace`, ClusterRoleBindings first; `f`
/// returns false to stop.
fn visit(
    policy: &Policy,
    user: &UserInfo,
    namespace: &str,
    errors: &mut Vec<String>,
    f: &mut dyn FnMut(&Source<'_>, &[PolicyRule]) -> bool,
) {
    for b in &policy.cluster_bindings {
        let Some(subject) = applies(b.subjects.as_deref().unwrap_or_default(), user, "") else { continue };
        let name = b.metadata.name.as_deref().unwrap_or("");
        let rules = match policy.cluster_roles.get(&b.role_ref.name) {
            Some(r) if b.role_ref.kind == "ClusterRole" => r,
            _ => {
                errors.push(format!("clusterrole.{GROUP} {:?} not found", b.role_ref.name));
                continue;
            }
        };
        let source = Source {
            binding_kind: "ClusterRoleBinding",
            binding_namespace: "",
            binding_name: name,
            role_kind: "ClusterRole",
            role_name: &b.role_ref.name,
            subject,
        };
        if !f(&source, rules) {
            return;
        }
    }
    if namespace.is_empty() {
        return;
    }
    for b in policy.role_bindings.get(namespace).into_iter().flatten() {
        let Some(subject) = applies(b.subjects.as_deref().unwrap_or_default(), user, namespace) else { continue };
        let name = b.metadata.name.as_deref().unwrap_or("");
        let rules = match b.role_ref.kind.as_str() {
            "ClusterRole" => policy.cluster_roles.get(&b.role_ref.name),
            _ => policy.roles.get(&(namespace.to_string(), b.role_ref.name.clone())),
        };
        let Some(rules) = rules else {
            let kind = if b.role_ref.kind == "ClusterRole" { "clusterrole" } else { "role" };
            errors.push(format!("{kind}.{GROUP} {:?} not found", b.role_ref.name));
            continue;
        };
        let source = Source {
            binding_kind: "RoleBinding",
            binding_namespace: namespace,
            binding_name: name,
            role_kind: &b.role_ref.kind,
            role_name: &b.role_ref.name,
            subject,
        };
        if !f(&source, rules) {
            return;
        }
    }
}

/// The first subject that names `user` (kube-apiserver's `appliesToUser`).
fn applies<'a>(subjects: &'a [Subject], user: &UserInfo, namespace: &str) -> Option<&'a Subject> {
    subjects.iter().find(|s| match s.kind.as_str() {
        "User" => s.name == user.name,
        "Group" => user.groups.contains(&s.name),
        "ServiceAccount" => {
            let ns = s.namespace.as_deref().filter(|n| !n.is_empty()).unwrap_or(namespace);
            !ns.is_empty() && super::service_account_username(ns, &s.name) == user.name
        }
        _ => false,
    })
}

/// Whether one rule covers a request (kube-apiserver's `RuleAllows`).
pub fn rule_allows(rule: &PolicyRule, attrs: &Attributes) -> bool {
    let has =
        |list: &Option<Vec<String>>, v: &str| list.as_deref().unwrap_or_default().iter().any(|x| x == "*" || x == v);
    if !rule.verbs.iter().any(|v| v == "*" || *v == attrs.verb) {
        return false;
    }
    if !attrs.resource_request {
        return rule.non_resource_urls.as_deref().unwrap_or_default().iter().any(|u| {
            u == "*" || *u == attrs.path || (u.ends_with('*') && attrs.path.starts_with(u.trim_end_matches('*')))
        });
    }
    if !has(&rule.api_groups, &attrs.group) {
        return false;
    }
    let combined = if attrs.subresource.is_empty() {
        attrs.resource.clone()
    } else {
        format!("{}/{}", attrs.resource, attrs.subresource)
    };
    let resource_ok = rule.resources.as_deref().unwrap_or_default().iter().any(|r| {
        r == "*"
            || *r == combined
            || (!attrs.subresource.is_empty() && r.strip_prefix("*/") == Some(attrs.subresource.as_str()))
    });
    if !resource_ok {
        return false;
    }
    match rule.resource_names.as_deref() {
        None | Some([]) => true,
        Some(names) => !attrs.name.is_empty() && names.contains(&attrs.name),
    }
}

/// kube-apiserver's 403 for a refused request (`responsewriters.Forbidden`).
pub fn forbidden(user: &UserInfo, attrs: &Attributes, reason: &str) -> ApiError {
    let what = if !attrs.resource_request {
        format!("User {:?} cannot {} path {:?}", user.name, attrs.verb, attrs.path)
    } else {
        let resource = if attrs.subresource.is_empty() {
            attrs.resource.clone()
        } else {
            format!("{}/{}", attrs.resource, attrs.subresource)
        };
        if attrs.namespace.is_empty() {
            format!(
                "User {:?} cannot {} resource {:?} in API group {:?} at the cluster scope",
                user.name, attrs.verb, resource, attrs.group
            )
        } else {
            format!(
                "User {:?} cannot {} resource {:?} in API group {:?} in the namespace {:?}",
                user.name, attrs.verb, resource, attrs.group, attrs.namespace
            )
        }
    };
    let what = what.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;");
    let err = if reason.is_empty() { what } else { format!("{what}: {reason}") };
    let (message, details) = if !attrs.resource_request || attrs.resource.is_empty() {
        (format!("forbidden: {err}"), json!({}))
    } else {
        let qualified =
            if attrs.group.is_empty() { attrs.resource.clone() } else { format!("{}.{}", attrs.resource, attrs.group) };
        let mut details = serde_json::Map::new();
        if !attrs.name.is_empty() {
            details.insert("name".into(), json!(attrs.name));
        }
        if !attrs.group.is_empty() {
            details.insert("group".into(), json!(attrs.group));
        }
        details.insert("kind".into(), json!(attrs.resource));
        let message = if attrs.name.is_empty() {
            format!("{qualified} is forbidden: {err}")
        } else {
            format!("{qualified} {:?} is forbidden: {err}", attrs.name)
        };
        (message, Value::Object(details))
    };
    ApiError { code: 403, reason: "Forbidden", message, details: Some(details) }
}

/// The ClusterRoles and ClusterRoleBindings kube-apiserver creates at start
/// (`plugin/pkg/auth/authorizer/rbac/bootstrappolicy`), reduced to what clients rely on: the
/// superuser, discovery, self reviews, public information, and the aggregated user-facing
/// roles `admin`, `edit` and `view`.
pub fn bootstrap_policy() -> Vec<Value> {
    let meta = |name: &str, extra: Value| {
        let mut labels = json!({"kubernetes.io/bootstrapping": "rbac-defaults"});
        if let (Some(l), Some(e)) = (labels.as_object_mut(), extra.as_object()) {
            l.extend(e.clone());
        }
        json!({"name": name, "labels": labels, "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"}})
    };
    let role = |name: &str, labels: Value, rules: Value| json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": meta(name, labels), "rules": rules});
    let aggregated = |name: &str, labels: Value, selectors: &[&str]| {
        let selectors: Vec<Value> = selectors.iter().map(|l| json!({"matchLabels": {*l: "true"}})).collect();
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": meta(name, labels),
               "aggregationRule": {"clusterRoleSelectors": selectors}})
    };
    let binding = |name: &str, role: &str, groups: &[&str]| {
        let subjects: Vec<Value> =
            groups.iter().map(|g| json!({"apiGroup": GROUP, "kind": "Group", "name": g})).collect();
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": meta(name, json!({})),
               "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": role}, "subjects": subjects})
    };
    let read = json!(["get", "list", "watch"]);
    let write = json!(["create", "delete", "deletecollection", "patch", "update"]);
    let workloads_core = json!([
        "pods",
        "pods/attach",
        "pods/exec",
        "pods/portforward",
        "pods/proxy",
        "configmaps",
        "endpoints",
        "persistentvolumeclaims",
        "replicationcontrollers",
        "replicationcontrollers/scale",
        "secrets",
        "serviceaccounts",
        "services",
        "services/proxy"
    ]);
    let view_core = json!([
        "pods",
        "pods/log",
        "pods/status",
        "configmaps",
        "endpoints",
        "persistentvolumeclaims",
        "persistentvolumeclaims/status",
        "replicationcontrollers",
        "replicationcontrollers/scale",
        "serviceaccounts",
        "services",
        "services/status",
        "bindings",
        "events",
        "limitranges",
        "namespaces/status",
        "resourcequotas",
        "resourcequotas/status",
        "namespaces"
    ]);
    let apps = json!([
        "daemonsets",
        "deployments",
        "deployments/scale",
        "replicasets",
        "replicasets/scale",
        "statefulsets",
        "statefulsets/scale"
    ]);
    vec![
        role(
            "cluster-admin",
            json!({}),
            json!([
                {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                {"nonResourceURLs": ["*"], "verbs": ["*"]},
            ]),
        ),
        role(
            "system:discovery",
            json!({}),
            json!([
                {"nonResourceURLs": ["/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi", "/openapi/*",
                                     "/readyz", "/version", "/version/"], "verbs": ["get"]},
            ]),
        ),
        role(
            "system:public-info-viewer",
            json!({}),
            json!([
                {"nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version", "/version/"], "verbs": ["get"]},
            ]),
        ),
        role(
            "system:basic-user",
            json!({}),
            json!([
                {"apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"], "verbs": ["create"]},
                {"apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"], "verbs": ["create"]},
            ]),
        ),
        role(
            "system:auth-delegator",
            json!({}),
            json!([
                {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
                {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]},
            ]),
        ),
        aggregated("admin", json!({}), &["rbac.authorization.k8s.io/aggregate-to-admin"]),
        aggregated(
            "edit",
            json!({"rbac.authorization.k8s.io/aggregate-to-admin": "true"}),
            &["rbac.authorization.k8s.io/aggregate-to-edit"],
        ),
        aggregated(
            "view",
            json!({"rbac.authorization.k8s.io/aggregate-to-edit": "true"}),
            &["rbac.authorization.k8s.io/aggregate-to-view"],
        ),
        role(
            "system:aggregate-to-admin",
            json!({"rbac.authorization.k8s.io/aggregate-to-admin": "true"}),
            json!([
                {"apiGroups": ["authorization.k8s.io"], "resources": ["localsubjectaccessreviews"], "verbs": ["create"]},
                {"apiGroups": [GROUP], "resources": ["rolebindings", "roles"], "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]},
            ]),
        ),
        role(
            "system:aggregate-to-edit",
            json!({"rbac.authorization.k8s.io/aggregate-to-edit": "true"}),
            json!([
                {"apiGroups": [""], "resources": workloads_core, "verbs": write},
                {"apiGroups": [""], "resources": ["serviceaccounts/token"], "verbs": ["create"]},
                {"apiGroups": ["apps"], "resources": apps, "verbs": write},
                {"apiGroups": ["batch"], "resources": ["cronjobs", "jobs"], "verbs": write},
                {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": write},
                {"apiGroups": ["networking.k8s.io"], "resources": ["ingresses", "networkpolicies"], "verbs": write},
                {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": write},
            ]),
        ),
        role(
            "system:aggregate-to-view",
            json!({"rbac.authorization.k8s.io/aggregate-to-view": "true"}),
            json!([
                {"apiGroups": [""], "resources": view_core, "verbs": read},
                {"apiGroups": ["apps"], "resources": apps, "verbs": read},
                {"apiGroups": ["batch"], "resources": ["cronjobs", "jobs"], "verbs": read},
                {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": read},
                {"apiGroups": ["networking.k8s.io"], "resources": ["ingresses", "networkpolicies"], "verbs": read},
            ]),
        ),
        binding("cluster-admin", "cluster-admin", &[super::SYSTEM_MASTERS]),
        binding("system:discovery", "system:discovery", &["system:authenticated"]),
        binding("system:basic-user", "system:basic-user", &["system:authenticated"]),
        binding(
            "system:public-info-viewer",
            "system:public-info-viewer",
            &["system:authenticated", "system:unauthenticated"],
        ),
    ]
}

/// Write the rules of aggregated ClusterRoles: the union, in order and without repeats, of
/// the rules of every ClusterRole one of their selectors matches.
pub fn aggregate(api: &Api) {
    let Some(def) = api.registry.get(GROUP, "v1", "clusterroles") else { return };
    let roles: Vec<ClusterRole> = list_all(api, &def.storage);
    let opts = WriteOptions { manager: "clusterrole-aggregation-controller".into(), ..Default::default() };
    for role in roles.iter().filter(|r| r.aggregation_rule.is_some()) {
        let name = role.metadata.name.clone().unwrap_or_default();
        let selectors: Vec<LabelSelector> = role
            .aggregation_rule
            .as_ref()
            .and_then(|a| a.cluster_role_selectors.clone())
            .unwrap_or_default()
            .iter()
            .filter_map(|s| serde_json::to_value(s).ok())
            .filter_map(|s| LabelSelector::from_label_selector(&s).ok())
            .collect();
        let mut rules: Vec<PolicyRule> = Vec::new();
        let mut sources: Vec<&ClusterRole> = roles
            .iter()
            .filter(|r| r.metadata.name.as_deref() != Some(name.as_str()))
            .filter(|r| {
                let labels: BTreeMap<String, String> = r.metadata.labels.clone().unwrap_or_default();
                selectors.iter().any(|s| s.matches(&labels))
            })
            .collect();
        sources.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        for source in sources {
            for rule in source.rules.iter().flatten() {
                if !rules.contains(rule) {
                    rules.push(rule.clone());
                }
            }
        }
        if role.rules.as_ref().is_some_and(|r| *r == rules) || (role.rules.is_none() && rules.is_empty()) {
            continue;
        }
        let rules = serde_json::to_value(&rules).unwrap_or_else(|_| json!([]));
        let result = api.guaranteed_update(&def, "", &name, Part::Main, &opts, false, |current| {
            let Some(current) = current else { return Err(ApiError::not_found(&def, &name)) };
            let mut value = current.clone();
            value["rules"] = rules.clone();
            Ok(Mutation { value, applied: false, precondition: None })
        });
        if let Err(e) = result {
            tracing::debug!(clusterrole = %name, error = %e, "cannot aggregate");
        }
    }
}

/// Run the aggregation controller until `stop` fires.
pub(crate) async fn run_aggregation(api: Arc<Api>, stop: tokio_util::sync::CancellationToken) {
    let storage = format!("clusterroles.{GROUP}");
    loop {
        let from = api.store.current_rv();
        aggregate(&api);
        let Ok(start) = api.store.watch_from(&storage, api.store.current_rv().max(from)) else { return };
        let mut notify = start.notify;
        tokio::select! {
            _ = stop.cancelled() => return,
            changed = notify.changed() => if changed.is_err() { return },
            // A change between aggregating and subscribing is caught by the next pass.
            _ = tokio::time::sleep(std::time::Duration::from_secs(2)) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(v: Value) -> PolicyRule {
        serde_json::from_value(v).unwrap()
    }

    fn res(verb: &str, group: &str, resource: &str, sub: &str, name: &str) -> Attributes {
        Attributes {
            verb: verb.into(),
            resource_request: true,
            group: group.into(),
            resource: resource.into(),
            subresource: sub.into(),
            namespace: "ns".into(),
            name: name.into(),
            ..Attributes::default()
        }
    }

    #[test]
    fn rules_match_like_kube_apiserver() {
        let r = rule(json!({"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get", "list"]}));
        assert!(rule_allows(&r, &res("get", "apps", "deployments", "", "d")));
        assert!(!rule_allows(&r, &res("delete", "apps", "deployments", "", "d")));
        assert!(!rule_allows(&r, &res("get", "", "deployments", "", "d")));
        assert!(!rule_allows(&r, &res("get", "apps", "deployments", "scale", "d")), "subresources need their own rule");
        let r = rule(json!({"apiGroups": [""], "resources": ["*/status"], "verbs": ["*"]}));
        assert!(rule_allows(&r, &res("patch", "", "pods", "status", "p")));
        assert!(!rule_allows(&r, &res("patch", "", "pods", "", "p")));
        let r = rule(
            json!({"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["lock"], "verbs": ["get", "update"]}),
        );
        assert!(rule_allows(&r, &res("get", "", "configmaps", "", "lock")));
        assert!(!rule_allows(&r, &res("get", "", "configmaps", "", "other")));
        assert!(!rule_allows(&r, &res("list", "", "configmaps", "", "")), "resourceNames never cover unnamed lists");
        let r = rule(json!({"nonResourceURLs": ["/healthz", "/apis/*"], "verbs": ["get"]}));
        let path = |p: &str| Attributes { verb: "get".into(), path: p.into(), ..Attributes::default() };
        assert!(rule_allows(&r, &path("/healthz")));
        assert!(rule_allows(&r, &path("/apis/apps/v1")));
        assert!(!rule_allows(&r, &path("/metrics")));
    }

    #[test]
    fn forbidden_bodies_are_kube_apiservers() {
        let user = UserInfo::new("system:serviceaccount:ns:sa", &[]);
        let e = forbidden(&user, &res("get", "apps", "deployments", "", "web"), "");
        assert_eq!(
            e.message,
            "deployments.apps \"web\" is forbidden: User \"system:serviceaccount:ns:sa\" cannot get resource \"deployments\" in API group \"apps\" in the namespace \"ns\""
        );
        assert_eq!(e.details, Some(json!({"name": "web", "group": "apps", "kind": "deployments"})));
        let mut a = res("list", "", "nodes", "", "");
        a.namespace.clear();
        let e = forbidden(&user, &a, "");
        assert_eq!(
            e.message,
            "nodes is forbidden: User \"system:serviceaccount:ns:sa\" cannot list resource \"nodes\" in API group \"\" at the cluster scope"
        );
        let path = Attributes { verb: "get".into(), path: "/metrics".into(), ..Attributes::default() };
        let e = forbidden(&user, &path, "");
        assert_eq!(e.message, "forbidden: User \"system:serviceaccount:ns:sa\" cannot get path \"/metrics\"");
        assert_eq!(e.details, Some(json!({})));
    }
}

//! The review APIs: kube-apiserver answers them from its authenticator and authorizer and
//! stores nothing. `SelfSubjectAccessReview` is `kubectl auth can-i`,
//! `SelfSubjectRulesReview` is `kubectl auth can-i --list`, `SelfSubjectReview` is
//! `kubectl auth whoami`; `SubjectAccessReview`, `LocalSubjectAccessReview` and `TokenReview`
//! serve components that delegate authentication and authorization.

use serde_json::{Map, Value, json};

use super::{Attributes, Security, UserInfo};
use crate::api::Api;
use crate::error::ApiError;
use crate::registry::ResourceDef;
use crate::schema::FieldError;

/// Answer a review of kind `def` created by `user` in `namespace` ("" for cluster scope).
pub fn create(
    api: &Api,
    security: &Security,
    def: &ResourceDef,
    namespace: &str,
    user: &UserInfo,
    body: Value,
) -> Result<Value, ApiError> {
    let mut out = body;
    let Some(obj) = out.as_object_mut() else {
        return Err(ApiError::bad_request("the request body must be a JSON object"));
    };
    obj.insert("kind".into(), json!(def.kind));
    obj.insert("apiVersion".into(), json!(def.api_version()));
    let md = obj.entry("metadata").or_insert_with(|| json!({}));
    if let Some(md) = md.as_object_mut() {
        md.entry("creationTimestamp").or_insert(Value::Null);
    }
    let spec = obj.get("spec").cloned().unwrap_or_else(|| json!({}));
    let status = match def.plural.as_str() {
        "selfsubjectreviews" => json!({"userInfo": user_info_json(user)}),
        "tokenreviews" => token_review(api, security, &spec),
        "selfsubjectrulesreviews" => rules_review(api, security, user, &spec),
        "selfsubjectaccessreviews" => {
            let attrs = attributes(def, &spec, "")?;
            access_status(api, security, user, &attrs)
        }
        "subjectaccessreviews" | "localsubjectaccessreviews" => {
            let attrs = attributes(def, &spec, namespace)?;
            let subject = subject(def, &spec)?;
            access_status(api, security, &subject, &attrs)
        }
        _ => return Err(ApiError::unknown_path()),
    };
    obj.insert("status".into(), status);
    Ok(out)
}

fn invalid(def: &ResourceDef, errors: &[FieldError]) -> ApiError {
    ApiError::invalid_kind(&def.group, &def.kind, "", errors)
}

/// The attributes an access review asks about.
fn attributes(def: &ResourceDef, spec: &Value, url_namespace: &str) -> Result<Attributes, ApiError> {
    let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    match (
        spec.get("resourceAttributes").filter(|v| !v.is_null()),
        spec.get("nonResourceAttributes").filter(|v| !v.is_null()),
    ) {
        (Some(r), None) => {
            let namespace = s(r, "namespace");
            if def.plural == "localsubjectaccessreviews" && namespace != url_namespace {
                return Err(invalid(
                    def,
                    &[FieldError::invalid(
                        "spec.resourceAttributes.namespace",
                        json!(namespace),
                        "must match metadata.namespace",
                    )],
                ));
            }
            Ok(Attributes {
                verb: s(r, "verb"),
                resource_request: true,
                group: s(r, "group"),
                version: s(r, "version"),
                resource: s(r, "resource"),
                subresource: s(r, "subresource"),
                namespace,
                name: s(r, "name"),
                path: String::new(),
            })
        }
        (None, Some(n)) => Ok(Attributes { verb: s(n, "verb"), path: s(n, "path"), ..Attributes::default() }),
        (Some(_), Some(_)) => Err(invalid(
            def,
            &[FieldError::invalid(
                "spec.nonResourceAttributes",
                json!(spec["nonResourceAttributes"].to_string()),
                "cannot be specified in combination with resourceAttributes",
            )],
        )),
        (None, None) => Err(invalid(
            def,
            &[FieldError::invalid(
                "spec.resourceAttributes",
                json!("null"),
                "exactly one of nonResourceAttributes or resourceAttributes must be specified",
            )],
        )),
    }
}

/// The user a SubjectAccessReview asks about.
fn subject(def: &ResourceDef, spec: &Value) -> Result<UserInfo, ApiError> {
    let name = spec.get("user").and_then(Value::as_str).unwrap_or("").to_string();
    let groups: Vec<String> = spec
        .get("groups")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|g| g.as_str().map(str::to_string)).collect())
        .unwrap_or_default();
    if name.is_empty() && groups.is_empty() {
        return Err(invalid(
            def,
            &[FieldError::invalid("spec.user", json!(""), "at least one of user or group must be specified")],
        ));
    }
    let extra = spec
        .get("extra")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| {
                    let vals = v.as_array().map(|a| a.iter().filter_map(|s| s.as_str().map(str::to_string)).collect());
                    (k.clone(), vals.unwrap_or_default())
                })
                .collect()
        })
        .unwrap_or_default();
    let uid = spec.get("uid").and_then(Value::as_str).unwrap_or("").to_string();
    Ok(UserInfo { name, uid, groups, extra })
}

fn access_status(api: &Api, security: &Security, user: &UserInfo, attrs: &Attributes) -> Value {
    let decision = security.authorize(api, user, attrs);
    let mut status = Map::new();
    status.insert("allowed".into(), json!(decision.allowed));
    if !decision.reason.is_empty() {
        status.insert("reason".into(), json!(decision.reason));
    }
    Value::Object(status)
}

fn user_info_json(user: &UserInfo) -> Value {
    let mut u = Map::new();
    u.insert("username".into(), json!(user.name));
    if !user.uid.is_empty() {
        u.insert("uid".into(), json!(user.uid));
    }
    if !user.groups.is_empty() {
        u.insert("groups".into(), json!(user.groups));
    }
    if !user.extra.is_empty() {
        u.insert("extra".into(), json!(user.extra));
    }
    Value::Object(u)
}

fn token_review(api: &Api, security: &Security, spec: &Value) -> Value {
    let token = spec.get("token").and_then(Value::as_str).unwrap_or("");
    match security.user_of_token(api, token) {
        Some(user) => json!({
            "authenticated": true,
            "user": user_info_json(&user),
            "audiences": [super::token::ISSUER],
        }),
        None => json!({"user": {}, "error": "[invalid bearer token, token lookup failed]"}),
    }
}

fn rules_review(api: &Api, security: &Security, user: &UserInfo, spec: &Value) -> Value {
    let namespace = spec.get("namespace").and_then(Value::as_str).unwrap_or("");
    let mut resource_rules = Vec::new();
    let mut non_resource_rules = Vec::new();
    if user.is_privileged() || security.rbac().is_none() {
        resource_rules.push(json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}));
        non_resource_rules.push(json!({"verbs": ["*"], "nonResourceURLs": ["*"]}));
    }
    let mut errors = Vec::new();
    if let Some(rbac) = security.rbac() {
        let (rules, errs) = rbac.rules_for(api, user, namespace);
        errors = errs;
        for r in rules {
            let r = serde_json::to_value(&r).unwrap_or_default();
            if r.get("nonResourceURLs").is_some() {
                non_resource_rules.push(json!({"verbs": r["verbs"], "nonResourceURLs": r["nonResourceURLs"]}));
            } else {
                let mut rule = json!({"verbs": r["verbs"], "apiGroups": r.get("apiGroups").cloned().unwrap_or(json!([])),
                                      "resources": r.get("resources").cloned().unwrap_or(json!([]))});
                if let Some(n) = r.get("resourceNames") {
                    rule["resourceNames"] = n.clone();
                }
                resource_rules.push(rule);
            }
        }
    }
    let mut status =
        json!({"resourceRules": resource_rules, "nonResourceRules": non_resource_rules, "incomplete": false});
    if !errors.is_empty() {
        status["evaluationError"] = json!(errors.join(", "));
    }
    status
}

//! API errors, rendered as the `Status` bodies kube-apiserver writes (checklist B1–B3).
//!
//! Clients classify errors by `reason` first and `code` second (kube-rs `kube-core` response
//! helpers, client-go `apierrors`), so both, the message texts and the `details` are kept as
//! apimachinery's `pkg/api/errors` builds them.

use serde_json::{Map, Value, json};

use crate::registry::ResourceDef;
use crate::schema::FieldError;

/// An error answered with a `Status` body.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{code} {reason}: {message}")]
pub struct ApiError {
    /// HTTP status code, also `Status.code`.
    pub code: u16,
    /// `Status.reason` (empty for plain internal errors).
    pub reason: &'static str,
    /// `Status.message`.
    pub message: String,
    /// `Status.details`, if any.
    pub details: Option<Value>,
}

fn details(name: &str, group: &str, kind: &str) -> Value {
    let mut d = Map::new();
    if !name.is_empty() {
        d.insert("name".into(), json!(name));
    }
    if !group.is_empty() {
        d.insert("group".into(), json!(group));
    }
    if !kind.is_empty() {
        d.insert("kind".into(), json!(kind));
    }
    Value::Object(d)
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: impl Into<String>) -> ApiError {
        ApiError { code, reason, message: message.into(), details: None }
    }

    fn with_details(mut self, details: Value) -> ApiError {
        self.details = Some(details);
        self
    }

    /// 404 for a missing object.
    pub fn not_found(def: &ResourceDef, name: &str) -> ApiError {
        Self::not_found_named(&def.group, &def.plural, name)
    }

    /// 404 for a missing object named by group and plural.
    pub fn not_found_named(group: &str, plural: &str, name: &str) -> ApiError {
        let qualified = if group.is_empty() { plural.to_string() } else { format!("{plural}.{group}") };
        ApiError::new(404, "NotFound", format!("{qualified} \"{name}\" not found"))
            .with_details(details(name, group, plural))
    }

    /// 404 for an unknown path or resource.
    pub fn unknown_path() -> ApiError {
        ApiError::new(404, "NotFound", "the server could not find the requested resource").with_details(json!({}))
    }

    /// 409 for a duplicate create.
    pub fn already_exists(def: &ResourceDef, name: &str, terminating: bool) -> ApiError {
        let prefix = if terminating { "object is being deleted: " } else { "" };
        ApiError::new(409, "AlreadyExists", format!("{prefix}{} \"{name}\" already exists", def.qualified()))
            .with_details(details(name, &def.group, &def.plural))
    }

    /// 409 for a write from a stale resourceVersion.
    pub fn conflict(def: &ResourceDef, name: &str) -> ApiError {
        Self::conflict_msg(
            def,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 409 Conflict with a custom explanation.
    pub fn conflict_msg(def: &ResourceDef, name: &str, why: &str) -> ApiError {
        ApiError::new(
            409,
            "Conflict",
            format!("Operation cannot be fulfilled on {} \"{name}\": {why}", def.qualified()),
        )
        .with_details(details(name, &def.group, &def.plural))
    }

    /// 409 Conflict with a plain message.
    pub fn conflict_plain(message: impl Into<String>) -> ApiError {
        ApiError::new(409, "Conflict", message)
    }

    /// 409 for a delete precondition that does not hold, as `rest.BeforeDelete` words it: the
    /// object is named by its kind.
    pub fn delete_precondition(def: &ResourceDef, name: &str, why: &str) -> ApiError {
        ApiError::new(
            409,
            "Conflict",
            format!("Operation cannot be fulfilled on {} \"{name}\": {why}", def.qualified_kind()),
        )
        .with_details(details(name, &def.group, &def.kind))
    }

    /// 409 for a server-side apply conflict.
    pub fn apply_conflict(message: String, causes: Vec<(String, String)>) -> ApiError {
        let causes: Vec<Value> = causes
            .into_iter()
            .map(|(message, field)| json!({"reason": "FieldManagerConflict", "message": message, "field": field}))
            .collect();
        ApiError::new(409, "Conflict", message).with_details(json!({ "causes": causes }))
    }

    /// 422 for an object that fails validation.
    pub fn invalid(def: &ResourceDef, name: &str, errors: &[FieldError]) -> ApiError {
        Self::invalid_kind(&def.group, &def.kind, name, errors)
    }

    /// 422 naming a kind explicitly (e.g. `ListOptions` in group `meta.k8s.io`).
    pub fn invalid_kind(group: &str, kind: &str, name: &str, errors: &[FieldError]) -> ApiError {
        let qualified = if group.is_empty() { kind.to_string() } else { format!("{kind}.{group}") };
        let list = match errors {
            [one] => one.message(),
            many => format!("[{}]", many.iter().map(FieldError::message).collect::<Vec<_>>().join(", ")),
        };
        let causes: Vec<Value> =
            errors.iter().map(|e| json!({"reason": e.reason(), "message": e.body(), "field": e.field})).collect();
        let mut d = details(name, group, kind);
        if let Value::Object(map) = &mut d {
            map.insert("causes".into(), Value::Array(causes));
        }
        ApiError::new(422, "Invalid", format!("{qualified} \"{name}\" is invalid: {list}")).with_details(d)
    }

    /// 422 with the generic message kube uses for failed JSON patches.
    pub fn unprocessable(message: impl Into<String>) -> ApiError {
        ApiError::new(422, "Invalid", message)
    }

    /// 400 for a malformed request.
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(400, "BadRequest", message)
    }

    /// 403 for a forbidden operation.
    pub fn forbidden(message: impl Into<String>) -> ApiError {
        ApiError::new(403, "Forbidden", message)
    }

    /// 403: create in a terminating namespace.
    pub fn namespace_terminating(def: &ResourceDef, name: &str, namespace: &str) -> ApiError {
        ApiError::new(
            403,
            "Forbidden",
            format!(
                "{} \"{name}\" is forbidden: unable to create new content in namespace {namespace} because it is being terminated",
                def.qualified()
            ),
        )
        .with_details(json!({
            "name": name, "group": def.group, "kind": def.plural,
            "causes": [{"reason": "NamespaceTerminating", "message": format!("namespace {namespace} is being terminated"), "field": "metadata.namespace"}]
        }))
    }

    /// 405 for an unsupported verb.
    pub fn method_not_allowed(verb: &str, def: &ResourceDef) -> ApiError {
        ApiError::new(
            405,
            "MethodNotAllowed",
            format!("{verb} is not supported on resources of kind \"{}\"", def.qualified()),
        )
        .with_details(json!({"group": def.group, "kind": def.plural}))
    }

    /// 406 when nothing in Accept can be produced.
    pub fn not_acceptable(message: impl Into<String>) -> ApiError {
        ApiError::new(406, "NotAcceptable", message)
    }

    /// 415 for an unknown patch or body type.
    pub fn unsupported_media_type(_content_type: &str) -> ApiError {
        ApiError::new(
            415,
            "UnsupportedMediaType",
            "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml",
        )
    }

    /// 413 for a request over a size or count limit.
    pub fn too_large(message: impl Into<String>) -> ApiError {
        ApiError::new(413, "RequestEntityTooLarge", message)
    }

    /// 410 for a resourceVersion or continue token older than the retained history.
    pub fn expired(message: impl Into<String>) -> ApiError {
        ApiError::new(410, "Expired", message)
    }

    /// 504 for a resourceVersion the server has not reached.
    pub fn too_large_rv(requested: u64, current: u64) -> ApiError {
        ApiError::new(504, "Timeout", format!("Too large resource version: {requested}, current: {current}"))
            .with_details(json!({
                "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
                "retryAfterSeconds": 1
            }))
    }

    /// 429, e.g. an eviction that would violate a PodDisruptionBudget.
    pub fn too_many_requests(message: impl Into<String>, causes: Vec<Value>) -> ApiError {
        let mut e = ApiError::new(429, "TooManyRequests", message);
        if !causes.is_empty() {
            e.details = Some(json!({ "causes": causes }));
        }
        e
    }

    /// 500 with reason InternalError.
    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(500, "InternalError", format!("Internal error occurred: {}", message.into()))
    }

    /// 500 InternalError with the message as given.
    pub fn internal_plain(message: impl Into<String>) -> ApiError {
        ApiError::new(500, "InternalError", message)
    }

    /// 500 with an empty reason: what kube-apiserver answers for plain errors.
    pub fn plain(message: impl Into<String>) -> ApiError {
        ApiError::new(500, "", message)
    }

    /// An arbitrary injected failure (fault injection).
    pub fn injected(code: u16) -> ApiError {
        let (reason, message) = match code {
            400 => ("BadRequest", "injected bad request"),
            401 => ("Unauthorized", "Unauthorized"),
            403 => ("Forbidden", "injected forbidden"),
            404 => ("NotFound", "the server could not find the requested resource"),
            409 => (
                "Conflict",
                "Operation cannot be fulfilled: the object has been modified; please apply your changes to the latest version and try again",
            ),
            410 => ("Expired", "injected expiry"),
            422 => ("Invalid", "injected validation failure"),
            429 => ("TooManyRequests", "the server has received too many requests and has asked us to try again later"),
            500 => ("InternalError", "Internal error occurred: injected failure"),
            503 => ("ServiceUnavailable", "the server is currently unable to handle the request"),
            504 => ("Timeout", "the server was unable to return a response in the time allotted"),
            _ => ("", "injected failure"),
        };
        ApiError::new(code, reason, message)
    }

    /// The `Status` object.
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "code": self.code,
        });
        if let Value::Object(map) = &mut status {
            if !self.reason.is_empty() {
                map.insert("reason".into(), json!(self.reason));
            }
            if let Some(d) = &self.details {
                map.insert("details".into(), d.clone());
            }
        }
        status
    }
}

/// A `Status` with `status: Success`, as DELETE answers for most kinds (F1).
pub fn success_status(def: &ResourceDef, name: &str, uid: &str) -> Value {
    let mut d = details(name, &def.group, &def.plural);
    if let Value::Object(map) = &mut d {
        map.insert("uid".into(), json!(uid));
    }
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": d,
    })
}

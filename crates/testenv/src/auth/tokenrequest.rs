//! `POST serviceaccounts/<name>/token`: the TokenRequest subresource (`kubectl create token`),
//! answering as kube-apiserver does: the request echoed with `status.token` and
//! `status.expirationTimestamp`, the audiences and expiration defaulted.

use serde_json::{Value, json};

use super::Security;
use super::token::{Claims, ISSUER};
use crate::api::{Api, format_time};
use crate::error::ApiError;
use crate::schema::FieldError;

/// The default lifetime of a token (`spec.expirationSeconds`).
pub const DEFAULT_EXPIRATION_SECONDS: i64 = 3600;
const MIN_EXPIRATION_SECONDS: i64 = 600;
const MAX_EXPIRATION_SECONDS: i64 = 1 << 32;

fn invalid(name: &str, field: &str, value: Value, why: &str) -> ApiError {
    ApiError::invalid_kind("authentication.k8s.io", "TokenRequest", name, &[FieldError::invalid(field, value, why)])
}

/// Issue a token for the ServiceAccount `namespace/name` as `request` (a TokenRequest) asks.
pub fn create(api: &Api, security: &Security, namespace: &str, name: &str, request: Value) -> Result<Value, ApiError> {
    if let Some(n) = request.pointer("/metadata/name").and_then(Value::as_str)
        && !n.is_empty()
        && n != name
    {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({n}) does not match the name on the URL ({name})"
        )));
    }
    let sa_def = api.registry.get("", "v1", "serviceaccounts").ok_or_else(ApiError::unknown_path)?;
    let sa = api.get_stored(&sa_def, namespace, name)?;
    let spec = request.get("spec").cloned().unwrap_or_else(|| json!({}));
    let expiration = spec.get("expirationSeconds").and_then(Value::as_i64).unwrap_or(DEFAULT_EXPIRATION_SECONDS);
    if expiration < MIN_EXPIRATION_SECONDS {
        return Err(invalid(
            name,
            "spec.expirationSeconds",
            json!(expiration),
            "may not specify a duration less than 10 minutes",
        ));
    }
    if expiration > MAX_EXPIRATION_SECONDS {
        return Err(invalid(
            name,
            "spec.expirationSeconds",
            json!(expiration),
            "may not specify a duration larger than 2^32 seconds",
        ));
    }
    let audiences: Vec<String> = spec
        .get("audiences")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_string)).collect::<Vec<_>>())
        .filter(|a| !a.is_empty())
        .unwrap_or_else(|| vec![ISSUER.to_string()]);
    let bound = match spec.get("boundObjectRef").filter(|v| !v.is_null()) {
        None => None,
        Some(r) => Some(bound_object(api, namespace, name, r)?),
    };
    let now = api.clock.now();
    let issued_at = now.as_second();
    let claims = Claims {
        namespace: namespace.to_string(),
        service_account: name.to_string(),
        service_account_uid: sa.meta.uid.clone(),
        audiences: audiences.clone(),
        issued_at,
        expires_at: issued_at + expiration,
        id: uuid::Uuid::new_v4().to_string(),
        bound_object: bound.clone(),
    };
    let token = security.issuer().issue(&claims).map_err(|e| ApiError::internal(e.to_string()))?;
    let expires = jiff::Timestamp::from_second(claims.expires_at).map_err(|e| ApiError::internal(e.to_string()))?;
    let bound_ref = match (&bound, spec.get("boundObjectRef")) {
        (Some(_), Some(r)) => r.clone(),
        _ => Value::Null,
    };
    Ok(json!({
        "kind": "TokenRequest",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"name": name, "namespace": namespace, "creationTimestamp": format_time(now)},
        "spec": {"audiences": audiences, "expirationSeconds": expiration, "boundObjectRef": bound_ref},
        "status": {"token": token, "expirationTimestamp": format_time(expires)},
    }))
}

/// The object a token is bound to: it must exist (and have the uid given, if any).
fn bound_object(api: &Api, namespace: &str, sa: &str, r: &Value) -> Result<(String, String, String), ApiError> {
    let kind = r.get("kind").and_then(Value::as_str).unwrap_or("");
    let name = r.get("name").and_then(Value::as_str).unwrap_or("");
    let uid = r.get("uid").and_then(Value::as_str).unwrap_or("");
    let plural = match kind {
        "Pod" => "pods",
        "Secret" => "secrets",
        "Node" => "nodes",
        other => {
            return Err(ApiError::bad_request(format!(
                "cannot bind token for serviceaccount {sa:?} to object of kind {other:?}: only Pod, Secret and Node are supported"
            )));
        }
    };
    let def = api.registry.get("", "v1", plural).ok_or_else(ApiError::unknown_path)?;
    let obj = api.get_stored(&def, namespace, name)?;
    if !uid.is_empty() && obj.meta.uid != uid {
        return Err(ApiError::conflict_plain(format!(
            "the UID in the bound object reference ({uid}) does not match the UID in record. The object might have been deleted and then recreated"
        )));
    }
    Ok((kind.to_string(), name.to_string(), obj.meta.uid.clone()))
}

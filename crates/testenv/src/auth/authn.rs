//! Authentication, as kube-apiserver's union of authenticators does it: the connection's client
//! certificate first (checked at the handshake, [`ClientCertificate`]), then bearer tokens:
//! static tokens (`--token-auth-file`) and ServiceAccount tokens (JWTs from TokenRequest). A
//! request without credentials is anonymous when anonymous requests are allowed, and otherwise
//! `401 Unauthorized`, as is any request whose token is not valid, and one whose client
//! certificate is invalid and that has no valid token.

use std::collections::HashMap;
use std::sync::Arc;

use http::HeaderMap;
use parking_lot::RwLock;

use super::UserInfo;
use super::tls::ClientCertificate;
use super::token::{Claims, ISSUER, Issuer};
use crate::api::Api;
use crate::error::ApiError;

/// A token in a static token file: the token and the user it stands for.
#[derive(Clone)]
pub struct StaticToken {
    /// The bearer token.
    pub token: String,
    /// Who presents it.
    pub user: UserInfo,
}

impl std::fmt::Debug for StaticToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StaticToken").field("token", &"***").field("user", &self.user.name).finish()
    }
}

/// Verified ServiceAccount tokens are cached by their text, as kube-apiserver caches token
/// authentication results: the signature is checked once, expiry and the account on every use.
const CACHE_LIMIT: usize = 4096;

/// The token authenticators of one server.
pub struct Authenticator {
    statics: HashMap<String, Arc<UserInfo>>,
    anonymous: bool,
    issuer: Arc<Issuer>,
    verified: RwLock<HashMap<String, Arc<Claims>>>,
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authenticator")
            .field("static_tokens", &self.statics.len())
            .field("anonymous", &self.anonymous)
            .finish()
    }
}

/// kube-apiserver's answer to a request it cannot authenticate.
pub fn unauthorized() -> ApiError {
    ApiError { code: 401, reason: "Unauthorized", message: "Unauthorized".into(), details: None }
}

impl Authenticator {
    /// Authenticators over static tokens and ServiceAccount tokens from `issuer`.
    pub fn new(statics: &[StaticToken], anonymous: bool, issuer: Arc<Issuer>) -> Authenticator {
        Authenticator {
            statics: statics.iter().map(|s| (s.token.clone(), Arc::new(s.user.clone()))).collect(),
            anonymous,
            issuer,
            verified: RwLock::new(HashMap::new()),
        }
    }

    /// Who makes a request with these headers on a connection whose client certificate said
    /// `peer`.
    pub fn authenticate(
        &self,
        api: &Api,
        peer: &ClientCertificate,
        headers: &HeaderMap,
    ) -> Result<Arc<UserInfo>, ApiError> {
        if let ClientCertificate::Verified(user) = peer {
            return Ok(user.clone());
        }
        let Some(value) = headers.get(http::header::AUTHORIZATION) else {
            // kube-apiserver adds the anonymous authenticator only behind a union that fails on
            // any error: an invalid certificate is never anonymous.
            return if self.anonymous && *peer == ClientCertificate::Absent {
                Ok(Arc::new(UserInfo::anonymous()))
            } else {
                Err(unauthorized())
            };
        };
        let value = value.to_str().map_err(|_| unauthorized())?;
        let token = match value.split_once(' ') {
            Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") => token.trim(),
            _ => return Err(unauthorized()),
        };
        if token.is_empty() {
            return Err(unauthorized());
        }
        if let Some(user) = self.statics.get(token) {
            return Ok(user.clone());
        }
        let claims = self.service_account_claims(token).ok_or_else(unauthorized)?;
        self.service_account_user(api, &claims).ok_or_else(unauthorized)
    }

    /// The claims of a ServiceAccount token whose signature, issuer and audience are valid.
    fn service_account_claims(&self, token: &str) -> Option<Arc<Claims>> {
        if let Some(c) = self.verified.read().get(token) {
            return Some(c.clone());
        }
        let claims = Arc::new(self.issuer.verify(token)?);
        if !claims.audiences.iter().any(|a| a == ISSUER) {
            return None;
        }
        let mut cache = self.verified.write();
        if cache.len() >= CACHE_LIMIT {
            cache.clear();
        }
        cache.insert(token.to_string(), claims.clone());
        Some(claims)
    }

    /// The user of valid claims: the token has not expired, and the ServiceAccount (and the
    /// object the token is bound to) still exist with the uids the token names.
    pub fn service_account_user(&self, api: &Api, claims: &Claims) -> Option<Arc<UserInfo>> {
        if api.clock.now().as_second() >= claims.expires_at {
            return None;
        }
        let sa_def = api.registry.get("", "v1", "serviceaccounts")?;
        let sa = api.store.get(&sa_def.storage, &(claims.namespace.clone(), claims.service_account.clone()))?;
        if sa.meta.deleting || (!claims.service_account_uid.is_empty() && sa.meta.uid != claims.service_account_uid) {
            return None;
        }
        if let Some((kind, name, uid)) = &claims.bound_object {
            let plural = match kind.as_str() {
                "Pod" => "pods",
                "Secret" => "secrets",
                _ => "nodes",
            };
            let def = api.registry.get("", "v1", plural)?;
            let ns = if def.namespaced { claims.namespace.clone() } else { String::new() };
            let obj = api.store.get(&def.storage, &(ns, name.clone()))?;
            if obj.meta.deleting || (!uid.is_empty() && &obj.meta.uid != uid) {
                return None;
            }
        }
        Some(Arc::new(UserInfo::service_account_from(claims)))
    }
}

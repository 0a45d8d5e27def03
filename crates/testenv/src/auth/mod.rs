//! Opt-in security, as kube-apiserver serves it: TLS with a generated CA (or a serving
//! certificate handed in), client-certificate authentication against client CAs
//! (`--client-ca-file`), bearer-token
//! authentication (static tokens and ServiceAccount tokens from TokenRequest), RBAC
//! authorization with kube-apiserver's 401 and 403 bodies, the access and identity reviews
//! (`kubectl auth can-i`, `kubectl auth whoami`), and Pod Security admission.
//!
//! Everything is off by default, so a plain `TestEnv` serves plain HTTP to anyone, as envtest
//! does. Operators ship RBAC and run under Pod Security, and only a server that says no can
//! prove that their manifests grant enough and no more: [`TestEnvBuilder::secure`] turns it on.
//!
//! Authentication is kube-apiserver's union: a valid client certificate of a client CA names the
//! user (common name) and its groups (organizations); otherwise the bearer token does; a
//! request with neither is anonymous if allowed. An invalid client certificate without a valid
//! token is `401`, even where anonymous requests are allowed ([`tls::Tls::verify_client`]).
//!
//! The request path calls [`Security::check`] once per request: authenticate, then authorize
//! the request's attributes (derived from the path as kube-apiserver's `RequestInfoFactory`
//! does, before the resource is even looked up), then record who was allowed by which rule in
//! the [`AccessLog`]. Two writes are authorized further, as kube-apiserver does once it knows
//! the object: a server-side apply that creates needs `create` as well as `patch`, and writing
//! a (Cluster)RoleBinding needs `bind` on its role or every permission the role grants
//! ([`Security::authorize_binding`], the escalation check).
//!
//! [`TestEnvBuilder::secure`]: crate::TestEnvBuilder::secure

pub mod authn;
pub mod incluster;
pub mod podsecurity;
pub mod rbac;
pub mod review;
pub mod tls;
pub mod token;
pub mod tokenrequest;

use std::collections::BTreeMap;
use std::sync::Arc;

use http::{HeaderMap, Method};

pub use authn::StaticToken;
pub use incluster::InClusterFiles;
pub use rbac::{AccessLog, AccessRecord, GrantedRule, RuleRef};
pub use tls::{ClientCertificate, ServingCertificate};

use crate::api::Api;
use crate::error::ApiError;
use crate::server::params::Query;
use crate::server::route::Route;

/// The user a request is made by, as kube-apiserver's `user.Info`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UserInfo {
    /// `system:serviceaccount:<ns>:<name>`, a static user's name, `system:anonymous`.
    pub name: String,
    /// A uid, if the authenticator knows one.
    pub uid: String,
    /// Groups, `system:authenticated` included for authenticated users.
    pub groups: Vec<String>,
    /// Extra attributes (a ServiceAccount token's credential id).
    pub extra: BTreeMap<String, Vec<String>>,
}

/// The group whose members RBAC never refuses (kube-apiserver's privileged group).
pub const SYSTEM_MASTERS: &str = "system:masters";

impl UserInfo {
    /// A user with a name and groups (`system:authenticated` is added).
    pub fn new(name: impl Into<String>, groups: &[&str]) -> UserInfo {
        let mut groups: Vec<String> = groups.iter().map(|g| g.to_string()).collect();
        if !groups.iter().any(|g| g == "system:authenticated") {
            groups.push("system:authenticated".into());
        }
        UserInfo { name: name.into(), groups, ..UserInfo::default() }
    }

    /// The administrator that `TestEnv`'s client and kubeconfig act as when authentication
    /// is on: a member of `system:masters`.
    pub fn admin() -> UserInfo {
        UserInfo::new("testenv-admin", &[SYSTEM_MASTERS])
    }

    /// Who makes every request when authentication is off: kube-apiserver's name for requests
    /// on its former insecure port, all-powerful.
    pub fn unsecured() -> UserInfo {
        UserInfo::new("system:unsecured", &[SYSTEM_MASTERS])
    }

    /// A request without credentials, when anonymous requests are allowed.
    pub fn anonymous() -> UserInfo {
        UserInfo {
            name: "system:anonymous".into(),
            groups: vec!["system:unauthenticated".into()],
            ..UserInfo::default()
        }
    }

    /// The user a ServiceAccount token authenticates as.
    pub fn service_account_from(claims: &token::Claims) -> UserInfo {
        let ns = &claims.namespace;
        let mut extra = BTreeMap::new();
        if !claims.id.is_empty() {
            extra.insert("authentication.kubernetes.io/credential-id".into(), vec![format!("JTI={}", claims.id)]);
        }
        if let Some((kind, name, uid)) = &claims.bound_object {
            let key = kind.to_lowercase();
            extra.insert(format!("authentication.kubernetes.io/{key}-name"), vec![name.clone()]);
            extra.insert(format!("authentication.kubernetes.io/{key}-uid"), vec![uid.clone()]);
        }
        UserInfo {
            name: service_account_username(ns, &claims.service_account),
            uid: claims.service_account_uid.clone(),
            groups: vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{ns}"),
                "system:authenticated".into(),
            ],
            extra,
        }
    }

    /// Whether RBAC is bypassed for this user.
    pub fn is_privileged(&self) -> bool {
        self.groups.iter().any(|g| g == SYSTEM_MASTERS)
    }
}

/// `system:serviceaccount:<ns>:<name>`.
pub fn service_account_username(namespace: &str, name: &str) -> String {
    format!("system:serviceaccount:{namespace}:{name}")
}

/// What an authorizer decides on, as kube-apiserver's `authorizer.Attributes`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Attributes {
    /// `get`, `list`, `watch`, `create`, … for resources; the lowercase HTTP method otherwise.
    pub verb: String,
    /// A resource request (else a non-resource URL).
    pub resource_request: bool,
    /// API group ("" for core).
    pub group: String,
    /// API version.
    pub version: String,
    /// Plural resource.
    pub resource: String,
    /// Subresource.
    pub subresource: String,
    /// Namespace ("" for cluster scope).
    pub namespace: String,
    /// Object name ("" for collections).
    pub name: String,
    /// The URL path (non-resource requests).
    pub path: String,
}

impl Attributes {
    /// The attributes of a request, as kube-apiserver's `RequestInfoFactory` derives them:
    /// list and watch with a `metadata.name` field selector name their object, and requests
    /// on a namespace object are in that namespace.
    pub fn of_request(method: &Method, path: &str, route: &Route, query: &Query) -> Attributes {
        let Route::Resource(rp) = route else {
            return Attributes {
                verb: method.as_str().to_lowercase(),
                path: path.to_string(),
                ..Attributes::default()
            };
        };
        let watch = rp.watch_prefix || query.flag("watch");
        let has_name = rp.name.is_some();
        let verb = match *method {
            Method::GET | Method::HEAD if watch => "watch",
            Method::GET | Method::HEAD if has_name => "get",
            Method::GET | Method::HEAD => "list",
            Method::POST => "create",
            Method::PUT => "update",
            Method::PATCH => "patch",
            Method::DELETE if has_name => "delete",
            Method::DELETE => "deletecollection",
            _ => "",
        };
        let mut name = rp.name.clone().unwrap_or_default();
        if (verb == "list" || verb == "watch")
            && name.is_empty()
            && let Some(sel) = query.get("fieldSelector")
        {
            name = exact_name(sel).unwrap_or_default();
        }
        let mut namespace = rp.namespace.clone().unwrap_or_default();
        if rp.resource == "namespaces" && namespace.is_empty() {
            namespace = name.clone();
        }
        Attributes {
            verb: verb.to_string(),
            resource_request: true,
            group: rp.group.clone(),
            version: rp.version.clone(),
            resource: rp.resource.clone(),
            subresource: rp.subresource.clone().unwrap_or_default(),
            namespace,
            name,
            path: path.to_string(),
        }
    }
}

/// The name a field selector requires exactly (`metadata.name=x`, alone or among others).
fn exact_name(selector: &str) -> Option<String> {
    selector.split(',').find_map(|term| {
        let (k, v) = term.split_once("==").or_else(|| term.split_once('='))?;
        (k.trim() == "metadata.name" && !k.ends_with('!')).then(|| v.trim().to_string())
    })
}

/// What a `TestEnv` turns on (all off by default).
#[derive(Clone, Default)]
pub struct SecurityConfig {
    /// Serve HTTPS with a generated CA.
    pub tls: bool,
    /// Serve HTTPS with this certificate instead of a generated one.
    pub serving: Option<ServingCertificate>,
    /// Authenticate client certificates of these CAs (PEM); implies TLS and authentication.
    pub client_cas: Vec<String>,
    /// Require bearer tokens (401 otherwise).
    pub authentication: bool,
    /// Authorize with RBAC (implies authentication).
    pub rbac: bool,
    /// Treat requests without credentials as `system:anonymous` instead of refusing them.
    pub anonymous: bool,
    /// Static tokens besides the administrator's.
    pub static_tokens: Vec<StaticToken>,
    /// The administrator's token (random when unset).
    pub admin_token: Option<String>,
}

impl std::fmt::Debug for SecurityConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecurityConfig")
            .field("tls", &self.tls)
            .field("serving", &self.serving)
            .field("client_cas", &self.client_cas.len())
            .field("authentication", &self.authentication)
            .field("rbac", &self.rbac)
            .field("anonymous", &self.anonymous)
            .field("static_tokens", &self.static_tokens)
            .field("admin_token", &self.admin_token.as_ref().map(|_| "***"))
            .finish()
    }
}

/// The security state of a running server.
pub struct Security {
    tls: Option<tls::Tls>,
    issuer: Arc<token::Issuer>,
    authn: Option<authn::Authenticator>,
    rbac: Option<rbac::Rbac>,
    admin_token: Option<String>,
    log: AccessLog,
}

impl std::fmt::Debug for Security {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Security")
            .field("tls", &self.tls.is_some())
            .field("authentication", &self.authn.is_some())
            .field("rbac", &self.rbac.is_some())
            .finish()
    }
}

/// Security that cannot be set up.
#[derive(Debug, thiserror::Error)]
pub enum SecurityError {
    /// Certificates.
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
    /// The token signing key.
    #[error(transparent)]
    Sign(#[from] token::SignError),
}

impl Security {
    /// Set up what `config` asks for.
    pub fn new(config: &SecurityConfig) -> Result<Security, SecurityError> {
        let issuer = Arc::new(token::Issuer::generate()?);
        let tls_on = config.tls || config.serving.is_some() || !config.client_cas.is_empty();
        let tls = if tls_on { Some(tls::Tls::new(config.serving.as_ref(), &config.client_cas)?) } else { None };
        let authentication = config.authentication || config.rbac || !config.client_cas.is_empty();
        let admin_token = authentication.then(|| config.admin_token.clone().unwrap_or_else(random_token));
        let authn = authentication.then(|| {
            let mut statics = config.static_tokens.clone();
            if let Some(t) = &admin_token {
                statics.push(StaticToken { token: t.clone(), user: UserInfo::admin() });
            }
            authn::Authenticator::new(&statics, config.anonymous, issuer.clone())
        });
        let rbac = config.rbac.then(rbac::Rbac::default);
        Ok(Security { tls, issuer, authn, rbac, admin_token, log: AccessLog::default() })
    }

    /// Whether requests are authenticated (and so carry a user).
    pub fn authenticating(&self) -> bool {
        self.authn.is_some()
    }

    /// The TLS setup, if serving HTTPS.
    pub fn tls(&self) -> Option<&tls::Tls> {
        self.tls.as_ref()
    }

    /// The ServiceAccount token signer.
    pub fn issuer(&self) -> &token::Issuer {
        &self.issuer
    }

    /// The RBAC authorizer, if on.
    pub fn rbac(&self) -> Option<&rbac::Rbac> {
        self.rbac.as_ref()
    }

    /// The administrator's bearer token, if authentication is on.
    pub fn admin_token(&self) -> Option<&str> {
        self.admin_token.as_deref()
    }

    /// Who was allowed what.
    pub fn access_log(&self) -> &AccessLog {
        &self.log
    }

    /// What the client certificate of a connection says (`chain` as the TLS handshake
    /// received it).
    pub fn client_certificate(&self, chain: Option<&[rustls::pki_types::CertificateDer<'_>]>) -> ClientCertificate {
        match &self.tls {
            Some(tls) => tls.verify_client(chain),
            None => ClientCertificate::Absent,
        }
    }

    /// Authenticate and authorize one request on a connection whose client certificate said
    /// `peer`: the user, or the 401/403 to answer.
    #[allow(clippy::too_many_arguments)]
    pub fn check(
        &self,
        api: &Api,
        peer: &ClientCertificate,
        headers: &HeaderMap,
        method: &Method,
        path: &str,
        route: &Route,
        query: &Query,
    ) -> Result<Arc<UserInfo>, ApiError> {
        let Some(authn) = &self.authn else { return Ok(Arc::new(UserInfo::unsecured())) };
        let user = authn.authenticate(api, peer, headers)?;
        let attrs = Attributes::of_request(method, path, route, query);
        let decision = self.authorize(api, &user, &attrs);
        self.log.record(&user, &attrs, &decision);
        if decision.allowed { Ok(user) } else { Err(rbac::forbidden(&user, &attrs, &decision.reason)) }
    }

    /// kube-apiserver's check on writing a RoleBinding or ClusterRoleBinding (`binding` is
    /// `clusterrolebindings` or `rolebindings`, in `namespace`, "" for cluster scope) that names
    /// the role `role_kind`/`role_name`: `user` may when RBAC allows it to `bind` that role
    /// (recorded in the access log, as the permission is then used), or when it already holds
    /// every permission the role grants; otherwise the 403 says which it lacks. Privileged users
    /// and servers without RBAC may always.
    #[allow(clippy::too_many_arguments)]
    pub fn authorize_binding(
        &self,
        api: &Api,
        user: &UserInfo,
        binding: &str,
        binding_name: &str,
        namespace: &str,
        role_kind: &str,
        role_name: &str,
    ) -> Result<(), ApiError> {
        let Some(rbac) = &self.rbac else { return Ok(()) };
        if user.is_privileged() {
            return Ok(());
        }
        let bind = Attributes {
            verb: "bind".into(),
            resource_request: true,
            group: rbac::GROUP.into(),
            version: "v1".into(),
            resource: if role_kind == "ClusterRole" { "clusterroles" } else { "roles" }.into(),
            subresource: String::new(),
            namespace: namespace.into(),
            name: role_name.into(),
            path: String::new(),
        };
        let decision = self.authorize(api, user, &bind);
        if decision.allowed {
            self.log.record(user, &bind, &decision);
            return Ok(());
        }
        let missing = match rbac.role_rules(api, role_kind, namespace, role_name) {
            Some(rules) => rbac.missing_permissions(api, user, namespace, &rules),
            None => vec![format!("{} {role_name:?} not found", role_kind.to_lowercase())],
        };
        if missing.is_empty() {
            return Ok(());
        }
        let groups = user.groups.iter().map(|g| format!("{g:?}")).collect::<Vec<_>>().join(" ");
        Err(ApiError::forbidden(format!(
            "{binding}.{} {binding_name:?} is forbidden: user {:?} (groups=[{groups}]) is attempting to grant RBAC permissions not currently held:\n{}",
            rbac::GROUP,
            user.name,
            missing.join("\n")
        )))
    }

    /// Decide on `attrs` for `user` (also what access reviews answer).
    pub fn authorize(&self, api: &Api, user: &UserInfo, attrs: &Attributes) -> rbac::Decision {
        if user.is_privileged() {
            return rbac::Decision { allowed: true, reason: String::new(), rule: None };
        }
        match &self.rbac {
            Some(rbac) => rbac.authorize(api, user, attrs),
            None => rbac::Decision { allowed: true, reason: String::new(), rule: None },
        }
    }

    /// The user of a token, as the authenticator sees it (TokenReview).
    pub fn user_of_token(&self, api: &Api, token: &str) -> Option<Arc<UserInfo>> {
        let authn = self.authn.as_ref()?;
        let mut headers = HeaderMap::new();
        headers.insert(http::header::AUTHORIZATION, http::HeaderValue::from_str(&format!("Bearer {token}")).ok()?);
        authn.authenticate(api, &ClientCertificate::Absent, &headers).ok().filter(|u| u.name != "system:anonymous")
    }
}

fn random_token() -> String {
    use rand::RngExt;
    let mut rng = rand::rng();
    (0..32).map(|_| char::from(b"abcdefghijklmnopqrstuvwxyz0123456789"[rng.random_range(0..36)])).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::route::route;

    fn attrs(method: Method, path_query: &str) -> Attributes {
        let (path, q) = path_query.split_once('?').unwrap_or((path_query, ""));
        Attributes::of_request(&method, path, &route(path), &Query::parse(Some(q)))
    }

    #[test]
    fn attributes_follow_request_info() {
        let a = attrs(Method::GET, "/api/v1/namespaces/ns/pods?fieldSelector=metadata.name%3Dp&watch=1");
        assert_eq!((a.verb.as_str(), a.name.as_str(), a.namespace.as_str()), ("watch", "p", "ns"));
        let a = attrs(Method::GET, "/api/v1/namespaces/team");
        assert_eq!((a.resource.as_str(), a.name.as_str(), a.namespace.as_str()), ("namespaces", "team", "team"));
        let a = attrs(Method::POST, "/api/v1/namespaces/ns/serviceaccounts/sa/token");
        assert_eq!((a.verb.as_str(), a.subresource.as_str(), a.name.as_str()), ("create", "token", "sa"));
        let a = attrs(Method::DELETE, "/apis/apps/v1/namespaces/ns/deployments");
        assert_eq!((a.verb.as_str(), a.group.as_str()), ("deletecollection", "apps"));
        let a = attrs(Method::GET, "/apis/apps/v1");
        assert!(!a.resource_request);
        assert_eq!((a.verb.as_str(), a.path.as_str()), ("get", "/apis/apps/v1"));
    }
}

//! The HTTP face of the API server: HTTP/1.1 on loopback, JSON everywhere. Plain HTTP without
//! authentication by default (checklist A1); TLS, authentication and RBAC when the builder asks
//! for them ([`crate::auth`]).

mod builtin_schemas;
mod discovery;
mod duplicates;
mod openapi;
pub mod params;
pub mod route;
mod watch;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Body as HttpBody, Frame, Incoming};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use crate::api::{
    Api, DeleteOptions, DeleteOutcome, FieldValidation, Part, PatchKind, ReadAt, WriteOptions, WriteOutcome,
};
use crate::error::{ApiError, success_status};
use crate::faults::{Faults, RequestInfo};
use crate::metrics::{Counters, Verb};
use crate::registry::{Flavor, ResourceDef};
use params::{Format, ListOptions, Query, negotiate};
use route::{ResourcePath, Route, decode_path, route};

/// Requests larger than this are refused, as kube-apiserver's 3 MiB limit does.
const MAX_BODY: usize = 3 * 1024 * 1024;

/// A response body: a complete buffer, or a stream of chunks (watches).
pub type Body = http_body_util::Either<Full<Bytes>, ChannelBody>;

/// A streamed body fed by a channel; the stream ends when the sender is dropped.
#[derive(Debug)]
pub struct ChannelBody(mpsc::Receiver<Bytes>);

impl HttpBody for ChannelBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.0.poll_recv(cx).map(|chunk| chunk.map(|b| Ok(Frame::data(b))))
    }
}

/// Server tunables.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// How often an idle watch with `allowWatchBookmarks` gets a BOOKMARK.
    pub bookmark_interval: Duration,
    /// The Kubernetes version `/version` reports.
    pub git_version: String,
    /// Whether `shardSelector` is served (the `ShardedListAndWatch` feature gate).
    pub sharded_list_and_watch: bool,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            bookmark_interval: Duration::from_secs(60),
            git_version: "v1.34.0".into(),
            sharded_list_and_watch: false,
        }
    }
}

/// Everything a request handler needs.
#[derive(Debug)]
pub struct ServerState {
    /// API semantics and storage.
    pub api: Arc<Api>,
    /// Fault injection.
    pub faults: Faults,
    /// Request counters.
    pub counters: Counters,
    /// Tunables.
    pub config: ServerConfig,
    /// The address served.
    pub addr: SocketAddr,
    /// Fires on shutdown.
    pub stop: CancellationToken,
    /// TLS, authentication and authorization (all off by default).
    pub security: Arc<crate::auth::Security>,
}

/// Serve connections from `listener` until `state.stop` fires.
pub async fn serve(listener: TcpListener, state: Arc<ServerState>) {
    loop {
        let accepted = tokio::select! {
            _ = state.stop.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        let (stream, _) = match accepted {
            Ok(s) => s,
            Err(e) => {
                warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let state = state.clone();
        tokio::spawn(async move {
            let Some(acceptor) = state.security.tls().map(|t| t.acceptor().clone()) else {
                return serve_connection(TokioIo::new(stream), state, Arc::default()).await;
            };
            let handshake = tokio::time::timeout(Duration::from_secs(10), acceptor.accept(stream));
            match handshake.await {
                Ok(Ok(stream)) => {
                    let peer = Arc::new(state.security.client_certificate(stream.get_ref().1.peer_certificates()));
                    serve_connection(TokioIo::new(stream), state, peer).await
                }
                Ok(Err(e)) => debug!(error = %e, "TLS handshake failed"),
                Err(_) => debug!("TLS handshake timed out"),
            }
        });
    }
}

/// Serve HTTP/1.1 on one connection until it ends or the server stops; `peer` is what its
/// client certificate said.
async fn serve_connection<I>(io: I, state: Arc<ServerState>, peer: Arc<crate::auth::ClientCertificate>)
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let stop = state.stop.clone();
    let service = hyper::service::service_fn(move |req| {
        let state = state.clone();
        let peer = peer.clone();
        async move { Ok::<_, Infallible>(state.handle(req, &peer).await) }
    });
    let conn = hyper::server::conn::http1::Builder::new().keep_alive(true).serve_connection(io, service);
    tokio::select! {
        _ = stop.cancelled() => {}
        res = conn => {
            if let Err(e) = res {
                debug!(error = %e, "connection ended with an error");
            }
        }
    }
}

/// A JSON response.
pub(crate) fn respond(code: u16, body: Bytes, content_type: &str, warnings: &[String]) -> Response<Body> {
    let mut resp = Response::new(http_body_util::Either::Left(Full::new(body)));
    *resp.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let headers = resp.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_str(content_type).unwrap_or(HeaderValue::from_static("application/json")),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache, private"));
    for w in warnings {
        let text = format!("299 - \"{}\"", w.replace('\\', "\\\\").replace('"', "\\\""));
        if let Ok(v) = HeaderValue::from_str(&text) {
            headers.append(header::WARNING, v);
        }
    }
    resp
}

pub(crate) fn respond_value(code: u16, value: &Value, warnings: &[String]) -> Response<Body> {
    respond(code, Bytes::from(serde_json::to_vec(value).unwrap_or_default()), "application/json", warnings)
}

pub(crate) fn error_response(e: &ApiError) -> Response<Body> {
    respond_value(e.code, &e.to_status(), &[])
}

fn header_str(req: &Request<Incoming>, name: header::HeaderName) -> Option<&str> {
    req.headers().get(name).and_then(|v| v.to_str().ok())
}

/// The field manager of a non-apply write: `fieldManager`, else the User-Agent's product.
fn manager_of(req: &Request<Incoming>, query: &Query) -> String {
    if let Some(m) = query.get("fieldManager").filter(|m| !m.is_empty()) {
        return m.to_string();
    }
    header_str(req, header::USER_AGENT)
        .and_then(|ua| ua.split('/').next())
        .filter(|s| !s.is_empty())
        .unwrap_or("unknown")
        .to_string()
}

/// Parse a request body as JSON, or YAML where the content type allows it.
pub(crate) fn decode_body(bytes: &[u8], content_type: &str) -> Result<Value, ApiError> {
    let essence = content_type.split(';').next().unwrap_or("").trim();
    if crate::protobuf::is_protobuf(content_type) {
        return crate::protobuf::decode(bytes);
    }
    if essence.contains("protobuf") || essence == "application/cbor" {
        return Err(ApiError::unsupported_media_type(content_type));
    }
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::bad_request("the request body is empty"));
    }
    match serde_json::from_slice::<Value>(bytes) {
        Ok(v) => Ok(v),
        Err(json_err) => {
            if essence.ends_with("yaml")
                && let Ok(text) = std::str::from_utf8(bytes)
            {
                return serde_saphyr::from_str::<Value>(text)
                    .map_err(|e| ApiError::bad_request(format!("error converting YAML to JSON: {e}")));
            }
            Err(ApiError::bad_request(format!("couldn't get version/kind; json parse error: {json_err}")))
        }
    }
}

impl ServerState {
    async fn handle(
        self: Arc<Self>,
        mut req: Request<Incoming>,
        peer: &crate::auth::ClientCertificate,
    ) -> Response<Body> {
        let started = Instant::now();
        let method = req.method().clone();
        let raw_path = req.uri().path().to_string();
        let path = decode_path(&raw_path);
        let query = Query::parse(req.uri().query());
        let route = route(&path);
        if self.security.authenticating() {
            match self.security.check(&self.api, peer, req.headers(), &method, &path, &route, &query) {
                Ok(user) => {
                    req.extensions_mut().insert(user);
                }
                Err(e) => {
                    debug!(method = %method, path = %raw_path, status = e.code, "request refused");
                    return error_response(&e);
                }
            }
        }
        let resp = match route {
            Route::Resource(rp) => match self.clone().resource(req, rp, query).await {
                Ok(r) => r,
                Err(e) => error_response(&e),
            },
            other => {
                self.counters.count_other();
                self.non_resource(other, &req)
            }
        };
        debug!(method = %method, path = %raw_path, status = resp.status().as_u16(), elapsed_us = started.elapsed().as_micros() as u64, "request");
        resp
    }

    /// Server-side apply of an object that does not exist creates it, and kube-apiserver
    /// authorizes that as `create` as well as the request's `patch` (its `createValidation`
    /// runs the authorizer with verb `create`), so a role with `patch` alone cannot create by
    /// apply. The decision is recorded in the access log like a request's.
    fn authorize_apply_create(
        &self,
        def: &ResourceDef,
        rp: &ResourcePath,
        ns: &str,
        name: &str,
        user: Option<&crate::auth::UserInfo>,
    ) -> Result<(), ApiError> {
        let Some(user) = user else { return Ok(()) };
        if !self.security.authenticating() || self.api.get(def, ns, name).is_ok() {
            return Ok(());
        }
        let attrs = crate::auth::Attributes {
            verb: "create".into(),
            resource_request: true,
            group: rp.group.clone(),
            version: rp.version.clone(),
            resource: rp.resource.clone(),
            subresource: String::new(),
            namespace: ns.to_string(),
            name: name.to_string(),
            path: String::new(),
        };
        let decision = self.security.authorize(&self.api, user, &attrs);
        self.security.access_log().record(user, &attrs, &decision);
        if decision.allowed { Ok(()) } else { Err(crate::auth::rbac::forbidden(user, &attrs, &decision.reason)) }
    }

    /// Writing a RoleBinding or ClusterRoleBinding: kube-apiserver's escalation check on the
    /// role it names (from `body`, else the stored binding's). Anything else passes.
    fn authorize_binding(
        &self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
        body: Option<&Value>,
        user: Option<&crate::auth::UserInfo>,
    ) -> Result<(), ApiError> {
        let Some(user) = user else { return Ok(()) };
        if def.group != "rbac.authorization.k8s.io"
            || !matches!(def.plural.as_str(), "rolebindings" | "clusterrolebindings")
        {
            return Ok(());
        }
        let stored;
        let role_ref = match body.and_then(|b| b.get("roleRef")) {
            Some(r) => r,
            None => match self.api.get(def, ns, name) {
                Ok(current) => {
                    stored = current;
                    match stored.get("roleRef") {
                        Some(r) => r,
                        None => return Ok(()),
                    }
                }
                Err(_) => return Ok(()),
            },
        };
        let kind = role_ref.get("kind").and_then(Value::as_str).unwrap_or_default();
        let role = role_ref.get("name").and_then(Value::as_str).unwrap_or_default();
        self.security.authorize_binding(&self.api, user, &def.plural, name, ns, kind, role)
    }

    fn non_resource(&self, route: Route, req: &Request<Incoming>) -> Response<Body> {
        let accept = header_str(req, header::ACCEPT);
        let result = match route {
            Route::Version => Ok(respond_value(200, &self.version(), &[])),
            Route::Health => Ok(respond(200, Bytes::from_static(b"ok"), "text/plain; charset=utf-8", &[])),
            Route::LegacyApiVersions => Ok(discovery::api_versions(self, accept)),
            Route::ApiGroups => Ok(discovery::api_groups(self, accept)),
            Route::ApiGroup(g) => discovery::api_group(self, &g),
            Route::ApiResources { group, version } => discovery::api_resources(self, &group, &version),
            Route::OpenApiV3Root => Ok(openapi::root(self)),
            Route::OpenApiV3 { group, version } => openapi::group_version(self, &group, &version),
            Route::OpenApiV2 => openapi::v2(self, accept),
            Route::Unknown | Route::Resource(_) => Err(ApiError::unknown_path()),
        };
        result.unwrap_or_else(|e| error_response(&e))
    }

    fn version(&self) -> Value {
        let v = &self.config.git_version;
        let minor = v.trim_start_matches('v').split('.').nth(1).unwrap_or("34").to_string();
        json!({
            "major": "1",
            "minor": minor,
            "gitVersion": v,
            "gitCommit": "0000000000000000000000000000000000000000",
            "gitTreeState": "clean",
            "buildDate": "2026-01-01T00:00:00Z",
            "goVersion": "go1.24.0",
            "compiler": "gc",
            "platform": "linux/amd64",
            "emulationMajor": "1",
            "emulationMinor": minor,
            "minCompatibilityMajor": "1",
            "minCompatibilityMinor": minor,
        })
    }

    async fn resource(
        self: Arc<Self>,
        req: Request<Incoming>,
        rp: ResourcePath,
        query: Query,
    ) -> Result<Response<Body>, ApiError> {
        let def = self.api.registry.get(&rp.group, &rp.version, &rp.resource).ok_or_else(ApiError::unknown_path)?;
        let method = req.method().clone();
        let has_name = rp.name.is_some();
        let is_watch = rp.watch_prefix || query.flag("watch");
        let verb = match (&method, has_name) {
            (&Method::GET, true) if is_watch => Verb::Watch,
            (&Method::GET, true) => Verb::Get,
            (&Method::GET, false) if is_watch => Verb::Watch,
            (&Method::GET, false) => Verb::List,
            (&Method::POST, false) => Verb::Create,
            (&Method::POST, true) if rp.subresource.is_some() => Verb::Create,
            (&Method::PUT, true) => Verb::Update,
            (&Method::PATCH, true) => Verb::Patch,
            (&Method::DELETE, true) => Verb::Delete,
            (&Method::DELETE, false) => Verb::DeleteCollection,
            _ => {
                let verb = method.as_str().to_lowercase();
                return Err(ApiError::method_not_allowed(&verb, &def));
            }
        };
        // Scope (A2): a namespaced resource outside a namespace only for list and watch;
        // a cluster-scoped one never under a namespace.
        if def.namespaced && rp.namespace.is_none() && !matches!(verb, Verb::List | Verb::Watch) {
            return Err(ApiError::unknown_path());
        }
        if !def.namespaced && rp.namespace.is_some() {
            return Err(ApiError::unknown_path());
        }
        if let Some(sub) = rp.subresource.as_deref() {
            let ok = match sub {
                "status" => def.status,
                "scale" => def.scale.is_some(),
                other => def.extra_subresources.contains(&other),
            };
            if !ok {
                return Err(ApiError::unknown_path());
            }
            if sub == "log" && verb != Verb::Get {
                return Err(ApiError::method_not_allowed(&method.as_str().to_lowercase(), &def));
            }
        }
        let qualified = def.qualified();
        let counted = match &rp.subresource {
            Some(sub) => format!("{qualified}/{sub}"),
            None => qualified.clone(),
        };
        self.counters.count(verb, &counted);
        let user = req.extensions().get::<Arc<crate::auth::UserInfo>>().cloned();
        let info = RequestInfo {
            verb,
            plural: &def.plural,
            qualified: &qualified,
            namespace: rp.namespace.as_deref(),
            name: rp.name.as_deref(),
            user: user.as_deref().map(|u| u.name.as_str()),
        };
        if let Some(delay) = self.faults.take_delay(&info) {
            tokio::time::sleep(delay).await;
        }
        if let Some(code) = self.faults.take_failure(&info) {
            return Err(ApiError::injected(code));
        }
        let mut warnings = Vec::new();
        if let Flavor::Custom(c) = &def.flavor
            && let Some(w) = &c.deprecation_warning
        {
            warnings.push(w.clone());
        }
        let accept = header_str(&req, header::ACCEPT).map(str::to_string);
        let content_type = header_str(&req, header::CONTENT_TYPE).unwrap_or("application/json").to_string();
        let manager = manager_of(&req, &query);
        let ns = rp.namespace.clone().unwrap_or_default();
        let name = rp.name.clone().unwrap_or_default();
        let req_user = user.clone();
        let body = if matches!(method, Method::POST | Method::PUT | Method::PATCH | Method::DELETE) {
            match Limited::new(req.into_body(), MAX_BODY).collect().await {
                Ok(b) => b.to_bytes(),
                Err(_) => return Err(ApiError::new_too_large()),
            }
        } else {
            Bytes::new()
        };
        if def.builtin_kind() == crate::registry::BuiltinKind::Review {
            // Reviews are create-only and answered, never stored.
            if verb != Verb::Create {
                return Err(ApiError::method_not_supported());
            }
            let user = req_user.unwrap_or_else(|| Arc::new(crate::auth::UserInfo::unsecured()));
            let value = decode_body(&body, &content_type)?;
            let out = crate::auth::review::create(&self.api, &self.security, &def, &ns, &user, value)?;
            return Ok(respond_value(201, &out, &warnings));
        }
        match verb {
            Verb::Get => self.get(&def, &rp, &ns, &name, accept.as_deref(), &query, warnings),
            Verb::List => self.list(&def, rp.namespace.as_deref(), accept.as_deref(), &query, warnings),
            Verb::Watch => {
                let mut opts = ListOptions::parse(&query, rp.watch_prefix)?;
                opts.watch = true;
                opts.shard = self.shard_selector(&query)?;
                if let Some(n) = &rp.name {
                    // Legacy single-object watch (E14): the same as a name field selector.
                    let sel = format!("metadata.name={n}");
                    opts.fields = crate::selector::FieldSelector::parse(&sel).map_err(ApiError::bad_request)?;
                }
                self.check_field_selector(&def, &opts.fields)?;
                let format = negotiate(accept.as_deref(), true, true, &query)?;
                Ok(watch::start(
                    self.clone(),
                    def,
                    rp.namespace.clone(),
                    opts,
                    format,
                    user.as_deref().map(|u| u.name.as_str()),
                ))
            }
            Verb::Create => {
                let opts = self.write_options(&query, manager, false, "CreateOptions")?;
                match rp.subresource.as_deref() {
                    Some("token") => {
                        let value = decode_body(&body, &content_type)?;
                        let out = crate::auth::tokenrequest::create(&self.api, &self.security, &ns, &name, value)?;
                        Ok(respond_value(201, &out, &warnings))
                    }
                    Some("eviction") => self.evict(&def, &ns, &name, &body, &content_type),
                    Some("binding") => self.bind(&def, &ns, &name, &body, &content_type, &opts),
                    _ => {
                        check_duplicates(&def, &body, &opts, &mut warnings)?;
                        let value = decode_body(&body, &content_type)?;
                        let name = value.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
                        self.authorize_binding(&def, &ns, name, Some(&value), req_user.as_deref())?;
                        let out = self.api.create(&def, &ns, value, &opts)?;
                        Ok(write_response(201, out, warnings))
                    }
                }
            }
            Verb::Update => {
                let opts = self.write_options(&query, manager, false, "UpdateOptions")?;
                check_duplicates(&def, &body, &opts, &mut warnings)?;
                let value = decode_body(&body, &content_type)?;
                if rp.subresource.as_deref() == Some("scale") {
                    return self.update_scale(&def, &ns, &name, |_| Ok(value.clone()), &opts, warnings);
                }
                let part = part_of(rp.subresource.as_deref());
                if rp.subresource.is_none() {
                    self.authorize_binding(&def, &ns, &name, Some(&value), req_user.as_deref())?;
                }
                let out = self.api.update(&def, &ns, &name, part, value, &opts)?;
                Ok(write_response(if out.created { 201 } else { 200 }, out, warnings))
            }
            Verb::Patch => {
                let kind = PatchKind::from_content_type(&content_type)
                    .ok_or_else(|| ApiError::unsupported_media_type(&content_type))?;
                let opts = self.write_options(&query, manager, kind == PatchKind::Apply, "PatchOptions")?;
                check_duplicates(&def, &body, &opts, &mut warnings)?;
                let patch = decode_body(&body, &content_type)?;
                if rp.subresource.as_deref() == Some("scale") {
                    if kind == PatchKind::Apply {
                        return Err(ApiError::unsupported_media_type(&content_type));
                    }
                    let shape = crate::shape::Shape::Untyped;
                    return self.update_scale(
                        &def,
                        &ns,
                        &name,
                        |scale| {
                            match kind {
                                PatchKind::Json => crate::patch::apply_json_patch(scale, &patch),
                                PatchKind::Merge => crate::patch::apply_merge_patch(scale, &patch),
                                _ => crate::patch::apply_strategic_merge_patch(scale, &patch, &shape),
                            }
                            .map_err(|e| ApiError::unprocessable(e.to_string()))
                        },
                        &opts,
                        warnings,
                    );
                }
                let part = part_of(rp.subresource.as_deref());
                if kind == PatchKind::Apply && rp.subresource.is_none() {
                    self.authorize_apply_create(&def, &rp, &ns, &name, req_user.as_deref())?;
                }
                if rp.subresource.is_none() {
                    // An applied binding names its role; other patches keep the stored one
                    // (roleRef is immutable).
                    let named = (kind == PatchKind::Apply).then_some(&patch);
                    self.authorize_binding(&def, &ns, &name, named, req_user.as_deref())?;
                }
                let out = self.api.patch(&def, &ns, &name, part, kind, &patch, &opts)?;
                Ok(write_response(if out.created { 201 } else { 200 }, out, warnings))
            }
            Verb::Delete => {
                let opts = delete_options(&body, &content_type, &query)?;
                match self.api.delete(&def, &ns, &name, &opts)? {
                    DeleteOutcome::Pending(obj) => {
                        let code = if opts.orphan_dependents == Some(false) { 202 } else { 200 };
                        Ok(respond_value(code, &obj, &warnings))
                    }
                    DeleteOutcome::Deleted(obj) => {
                        if def.builtin().is_some_and(|b| b.return_deleted_object) {
                            Ok(respond_value(200, &obj, &warnings))
                        } else {
                            let uid = obj.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or("");
                            Ok(respond_value(200, &success_status(&def, &name, uid), &warnings))
                        }
                    }
                }
            }
            Verb::DeleteCollection => {
                let opts = delete_options(&body, &content_type, &query)?;
                let lo = ListOptions::parse(&query, false)?;
                self.check_field_selector(&def, &lo.fields)?;
                let items = self.api.delete_collection(&def, rp.namespace.as_deref(), &lo.labels, &lo.fields, &opts)?;
                let list = json!({
                    "kind": def.list_kind,
                    "apiVersion": def.api_version(),
                    "metadata": {"resourceVersion": self.api.store.current_rv().to_string()},
                    "items": items,
                });
                Ok(respond_value(200, &list, &warnings))
            }
        }
    }

    fn write_options(&self, query: &Query, manager: String, apply: bool, kind: &str) -> Result<WriteOptions, ApiError> {
        let field_validation = FieldValidation::parse(query.get("fieldValidation").unwrap_or(""))?;
        let explicit = query.get("fieldManager").filter(|m| !m.is_empty()).map(str::to_string);
        Ok(WriteOptions {
            dry_run: query.dry_run(kind)?,
            // Apply requires an explicit manager (I1); other writes fall back to the user agent.
            manager: if apply { explicit.unwrap_or_default() } else { manager },
            field_validation,
            force: query.flag("force"),
        })
    }

    /// `shardSelector` when the feature gate is on (parsed and validated); ignored when off.
    fn shard_selector(&self, query: &Query) -> Result<Option<crate::shard::ShardSelector>, ApiError> {
        if !self.config.sharded_list_and_watch {
            return Ok(None);
        }
        match query.get("shardSelector") {
            Some(s) if !s.trim().is_empty() => crate::shard::ShardSelector::parse(s)
                .map(Some)
                .map_err(|e| ApiError::bad_request(format!("invalid shardSelector: {e}"))),
            _ => Ok(None),
        }
    }

    fn check_field_selector(&self, def: &ResourceDef, fields: &crate::selector::FieldSelector) -> Result<(), ApiError> {
        for f in fields.fields() {
            if !def.field_selectable(f) {
                return Err(if def.is_custom() {
                    ApiError::bad_request(format!("field label not supported: {f}"))
                } else {
                    ApiError::bad_request(format!(
                        "\"{f}\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
                    ))
                });
            }
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn get(
        &self,
        def: &ResourceDef,
        rp: &ResourcePath,
        ns: &str,
        name: &str,
        accept: Option<&str>,
        query: &Query,
        warnings: Vec<String>,
    ) -> Result<Response<Body>, ApiError> {
        // D8: a resourceVersion newer than the server cannot be served.
        if let Some(rv) = query.get("resourceVersion").filter(|s| !s.is_empty() && *s != "0") {
            let rv: u64 =
                rv.parse().map_err(|_| ApiError::bad_request(format!("invalid resource version \"{rv}\"")))?;
            let current = self.api.store.current_rv();
            if rv > current {
                return Err(ApiError::too_large_rv(rv, current));
            }
        }
        if rp.subresource.as_deref() == Some("scale") {
            let obj = self.api.get(def, ns, name)?;
            return Ok(respond_value(200, &scale_of(def, &obj), &warnings));
        }
        if rp.subresource.as_deref() == Some("log") {
            let pod = self.api.get(def, ns, name)?;
            crate::api::pod_log_container(&pod, name, query.get("container"))?;
            // Simulated containers write nothing: their log is empty.
            return Ok(respond(200, Bytes::new(), "text/plain", &warnings));
        }
        let format = negotiate(accept, false, false, query)?;
        let stored = self.api.get_stored(def, ns, name)?;
        match format {
            Format::Json => Ok(respond(200, self.api.present(def, &stored), "application/json", &warnings)),
            Format::PartialMeta => {
                let obj = self.api.present_value(def, &stored);
                Ok(respond_value_ct(
                    200,
                    &crate::table::partial_object_metadata(&obj),
                    format.content_type(),
                    &warnings,
                ))
            }
            Format::Table { include, .. } => {
                let obj = self.api.present_value(def, &stored);
                let (columns, rows) = self.table_rows(def, vec![obj], include);
                let rv = stored.meta.rv.to_string();
                let table = table_version(crate::table::table(&columns, rows, &rv, None, None, true), format);
                Ok(respond_value_ct(200, &table, format.content_type(), &warnings))
            }
            Format::PartialMetaList => {
                Err(ApiError::not_acceptable("PartialObjectMetadataList is only available for lists"))
            }
        }
    }

    fn list(
        &self,
        def: &ResourceDef,
        ns: Option<&str>,
        accept: Option<&str>,
        query: &Query,
        warnings: Vec<String>,
    ) -> Result<Response<Body>, ApiError> {
        let mut opts = ListOptions::parse(query, false)?;
        opts.shard = self.shard_selector(query)?;
        self.check_field_selector(def, &opts.fields)?;
        let format = negotiate(accept, true, false, query)?;
        let (at, after) = match &opts.continue_token {
            Some(token) => {
                let (rv, key) = crate::api::decode_continue(token)?;
                (ReadAt::Exact(rv), Some(key))
            }
            None => {
                let rv: Option<u64> = opts.resource_version.as_deref().and_then(|s| s.parse().ok());
                match (rv, opts.rv_match.as_deref()) {
                    (None | Some(0), _) => (ReadAt::Latest, None),
                    (Some(rv), Some("Exact")) => (ReadAt::Exact(rv), None),
                    (Some(rv), None) if opts.limit.is_some() => (ReadAt::Exact(rv), None),
                    (Some(rv), _) => {
                        // Not older than rv: the latest state, provided the server has reached rv.
                        let current = self.api.store.current_rv();
                        if rv > current {
                            return Err(ApiError::too_large_rv(rv, current));
                        }
                        (ReadAt::Latest, None)
                    }
                }
            }
        };
        let shard = opts.shard.as_ref();
        let in_shard = |key: &crate::store::ObjKey, s: &crate::store::Stored| {
            shard.is_none_or(|sel| sel.matches(&s.meta.uid, &key.0))
        };
        let result =
            self.api.list_where(def, ns, &opts.labels, &opts.fields, &in_shard, at, after.as_ref(), opts.limit)?;
        let rv = result.rv.to_string();
        let list_meta = |rv: &str, token: &Option<String>, remaining: Option<usize>| {
            let mut md = list_meta(rv, token, remaining);
            if let (Some(sel), Some(map)) = (shard, md.as_object_mut()) {
                map.insert("shardInfo".into(), json!({"selector": sel.source}));
            }
            md
        };
        match format {
            Format::Json => {
                let mut out = Vec::with_capacity(result.items.iter().map(|(_, b)| b.len() + 1).sum::<usize>() + 256);
                out.extend_from_slice(b"{\"kind\":");
                out.extend_from_slice(json!(def.list_kind).to_string().as_bytes());
                out.extend_from_slice(b",\"apiVersion\":");
                out.extend_from_slice(json!(def.api_version()).to_string().as_bytes());
                out.extend_from_slice(b",\"metadata\":");
                out.extend_from_slice(list_meta(&rv, &result.continue_token, result.remaining).to_string().as_bytes());
                out.extend_from_slice(b",\"items\":[");
                for (i, (_, item)) in result.items.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    out.extend_from_slice(item);
                }
                out.extend_from_slice(b"]}");
                Ok(respond(200, Bytes::from(out), "application/json", &warnings))
            }
            Format::PartialMetaList | Format::PartialMeta => {
                let items: Vec<Value> = result
                    .items
                    .iter()
                    .filter_map(|(_, b)| serde_json::from_slice::<Value>(b).ok())
                    .map(|o| crate::table::partial_object_metadata(&o))
                    .collect();
                let list = json!({
                    "kind": "PartialObjectMetadataList",
                    "apiVersion": "meta.k8s.io/v1",
                    "metadata": list_meta(&rv, &result.continue_token, result.remaining),
                    "items": items,
                });
                Ok(respond_value_ct(200, &list, Format::PartialMetaList.content_type(), &warnings))
            }
            Format::Table { include, .. } => {
                let objects: Vec<Value> =
                    result.items.iter().filter_map(|(_, b)| serde_json::from_slice(b).ok()).collect();
                let (columns, rows) = self.table_rows(def, objects, include);
                let remaining = result.remaining.map(|r| r as i64);
                let table = table_version(
                    crate::table::table(&columns, rows, &rv, result.continue_token.as_deref(), remaining, true),
                    format,
                );
                Ok(respond_value_ct(200, &table, format.content_type(), &warnings))
            }
        }
    }

    /// Columns and rows of a Table for `objects` (M1, J10).
    pub(crate) fn table_rows(
        &self,
        def: &ResourceDef,
        objects: Vec<Value>,
        include: crate::table::IncludeObject,
    ) -> (Vec<crate::table::Column>, Vec<(Vec<Value>, Value)>) {
        let columns = match &def.flavor {
            Flavor::Custom(c) if !c.columns.is_empty() => c.columns.clone(),
            Flavor::Custom(_) => crate::table::crd_columns(&[]),
            Flavor::Builtin(_) => {
                crate::table::builtin_columns(&def.group, &def.kind).unwrap_or_else(|| crate::table::crd_columns(&[]))
            }
        };
        let now = self.api.clock.now();
        let rows = objects
            .into_iter()
            .map(|obj| {
                let cells = crate::table::row_cells(&columns, &def.group, &def.kind, &obj, now);
                let object = match include {
                    crate::table::IncludeObject::None => Value::Null,
                    crate::table::IncludeObject::Metadata => crate::table::partial_object_metadata(&obj),
                    crate::table::IncludeObject::Object => obj,
                };
                (cells, object)
            })
            .collect();
        (columns, rows)
    }

    /// The autoscaling/v1 Scale of an object, then a write of its replicas (G5).
    fn update_scale(
        &self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
        change: impl Fn(&Value) -> Result<Value, ApiError>,
        opts: &WriteOptions,
        warnings: Vec<String>,
    ) -> Result<Response<Body>, ApiError> {
        let Some(scale_spec) = def.scale.clone() else { return Err(ApiError::unknown_path()) };
        let out = self.api.guaranteed_update(def, ns, name, Part::Main, opts, false, |current| {
            let Some(current) = current else { return Err(ApiError::not_found(def, name)) };
            let scale = scale_of(def, current);
            let new_scale = change(&scale)?;
            let precondition = new_scale
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_string);
            let replicas = new_scale.pointer("/spec/replicas").and_then(Value::as_i64).unwrap_or(0);
            if replicas < 0 {
                return Err(ApiError::invalid_kind(
                    "autoscaling",
                    "Scale",
                    name,
                    &[crate::schema::FieldError::invalid(
                        "spec.replicas",
                        json!(replicas),
                        "must be greater than or equal to 0",
                    )],
                ));
            }
            let mut value = current.clone();
            let path: Vec<&str> = scale_spec.spec_replicas_path.trim_start_matches('.').split('.').collect();
            crate::api::set_path(&mut value, &path, Some(json!(replicas)));
            Ok(crate::api::Mutation { value, applied: false, precondition })
        })?;
        Ok(respond_value(200, &scale_of(def, &out.object), &warnings))
    }

    /// POST pods/<name>/eviction: the API layer decides against PodDisruptionBudgets.
    fn evict(
        &self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
        body: &[u8],
        content_type: &str,
    ) -> Result<Response<Body>, ApiError> {
        let eviction = decode_body(body, content_type)?;
        if let Some(n) = eviction.pointer("/metadata/name").and_then(Value::as_str)
            && n != name
        {
            return Err(ApiError::bad_request(format!("name in URL does not match name in Eviction object: {n}")));
        }
        let opts = match eviction.get("deleteOptions") {
            Some(o) if !o.is_null() => DeleteOptions::from_json(o)?,
            _ => DeleteOptions::default(),
        };
        self.api.evict(def, ns, name, &opts)?;
        Ok(respond_value(
            201,
            &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
            &[],
        ))
    }

    /// POST pods/<name>/binding: assign a pod to a node, as the scheduler does.
    fn bind(
        &self,
        def: &ResourceDef,
        ns: &str,
        name: &str,
        body: &[u8],
        content_type: &str,
        opts: &WriteOptions,
    ) -> Result<Response<Body>, ApiError> {
        let binding = decode_body(body, content_type)?;
        self.api.bind(def, ns, name, &binding, opts)?;
        Ok(respond_value(
            201,
            &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
            &[],
        ))
    }
}

impl ApiError {
    /// 405 for a verb a resource does not serve at all (go-restful's answer).
    fn method_not_supported() -> ApiError {
        ApiError {
            code: 405,
            reason: "MethodNotAllowed",
            message: "the server does not allow this method on the requested resource".into(),
            details: Some(json!({})),
        }
    }

    fn new_too_large() -> ApiError {
        ApiError {
            code: 413,
            reason: "RequestEntityTooLarge",
            message: "Request entity too large: limit is 3145728".into(),
            details: None,
        }
    }
}

/// Duplicate keys in a JSON body: an error with `fieldValidation=Strict`, a warning with `Warn`.
fn check_duplicates(
    def: &ResourceDef,
    body: &[u8],
    opts: &WriteOptions,
    warnings: &mut Vec<String>,
) -> Result<(), ApiError> {
    if opts.field_validation == FieldValidation::Ignore {
        return Ok(());
    }
    let dups: Vec<String> =
        duplicates::duplicate_fields(body).into_iter().map(|p| format!("duplicate field \"{p}\"")).collect();
    if dups.is_empty() {
        return Ok(());
    }
    if opts.field_validation == FieldValidation::Strict {
        return Err(ApiError::bad_request(format!(
            "{kind} in version \"{v}\" cannot be handled as a {kind}: strict decoding error: {}",
            dups.join(", "),
            kind = def.kind,
            v = def.version
        )));
    }
    warnings.extend(dups);
    Ok(())
}

/// Tables answer in the meta.k8s.io version the client asked for.
pub(crate) fn table_version(mut table: Value, format: Format) -> Value {
    if let (Format::Table { v1beta1: true, .. }, Some(obj)) = (format, table.as_object_mut()) {
        obj.insert("apiVersion".into(), json!("meta.k8s.io/v1beta1"));
    }
    table
}

fn respond_value_ct(code: u16, value: &Value, content_type: &str, warnings: &[String]) -> Response<Body> {
    respond(code, Bytes::from(serde_json::to_vec(value).unwrap_or_default()), content_type, warnings)
}

fn write_response(code: u16, out: WriteOutcome, mut warnings: Vec<String>) -> Response<Body> {
    warnings.extend(out.warnings);
    respond_value(code, &out.object, &warnings)
}

fn part_of(sub: Option<&str>) -> Part {
    match sub {
        Some("status") => Part::Status,
        Some("finalize") => Part::Finalize,
        _ => Part::Main,
    }
}

fn list_meta(rv: &str, continue_token: &Option<String>, remaining: Option<usize>) -> Value {
    let mut md = serde_json::Map::new();
    md.insert("resourceVersion".into(), json!(rv));
    if let Some(c) = continue_token {
        md.insert("continue".into(), json!(c));
    }
    if let Some(r) = remaining {
        md.insert("remainingItemCount".into(), json!(r));
    }
    Value::Object(md)
}

/// DeleteOptions of a DELETE or deletecollection: a JSON body, or a protobuf one as client-go's
/// typed clients send for built-in kinds (Helm's release Secrets, `kubectl drain`), then the query.
fn delete_options(body: &[u8], content_type: &str, query: &Query) -> Result<DeleteOptions, ApiError> {
    let mut opts = if body.iter().all(u8::is_ascii_whitespace) {
        DeleteOptions::default()
    } else if crate::protobuf::is_protobuf(content_type) {
        let v = crate::protobuf::decode(body)?;
        if v.get("kind").and_then(Value::as_str) != Some("DeleteOptions") {
            return Err(ApiError::bad_request(format!(
                "couldn't decode DeleteOptions: the protobuf body holds {} {}",
                v.get("apiVersion").and_then(Value::as_str).unwrap_or(""),
                v.get("kind").and_then(Value::as_str).unwrap_or("")
            )));
        }
        DeleteOptions::from_json(&v)?
    } else {
        let v: Value = serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("couldn't decode DeleteOptions: {e}")))?;
        DeleteOptions::from_json(&v)?
    };
    // Options may also come as query parameters when the body is empty (A5).
    if let Some(p) = query.get("propagationPolicy") {
        opts.propagation = Some(crate::api::parse_policy(p)?);
    }
    if let Some(g) = query.get("gracePeriodSeconds") {
        opts.grace_period_seconds =
            Some(g.parse().map_err(|_| ApiError::bad_request(format!("invalid gracePeriodSeconds: {g}")))?);
    }
    if let Some(o) = query.get("orphanDependents") {
        opts.orphan_dependents = Some(o == "true");
    }
    if query.dry_run("DeleteOptions")? {
        opts.dry_run = true;
    }
    Ok(opts)
}

/// The autoscaling/v1 Scale view of an object.
fn scale_of(def: &ResourceDef, obj: &Value) -> Value {
    let Some(spec) = &def.scale else { return Value::Null };
    let get = |path: &str| obj.pointer(&format!("/{}", path.trim_start_matches('.').replace('.', "/"))).cloned();
    let selector = match &def.flavor {
        Flavor::Builtin(_) => obj
            .pointer("/spec/selector")
            .and_then(|s| crate::selector::LabelSelector::from_label_selector(s).ok())
            .map(|s| json!(s.to_string())),
        Flavor::Custom(_) => spec.label_selector_path.as_deref().and_then(get),
    };
    let mut status = serde_json::Map::new();
    status.insert("replicas".into(), get(&spec.status_replicas_path).unwrap_or(json!(0)));
    if let Some(s) = selector.filter(|s| s.as_str().is_some_and(|s| !s.is_empty())) {
        status.insert("selector".into(), s);
    }
    let md = obj.get("metadata").cloned().unwrap_or_else(|| json!({}));
    let meta: serde_json::Map<String, Value> = ["name", "namespace", "uid", "resourceVersion", "creationTimestamp"]
        .iter()
        .filter_map(|k| md.get(*k).map(|v| (k.to_string(), v.clone())))
        .collect();
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": meta,
        "spec": {"replicas": get(&spec.spec_replicas_path).unwrap_or(json!(0))},
        "status": status,
    })
}

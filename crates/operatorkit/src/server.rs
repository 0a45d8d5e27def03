//! The operator's HTTP endpoints: `/metrics`, `/healthz`, `/readyz` and `/version`.
//!
//! * `/metrics`: the injected Prometheus registry in the OpenMetrics text format.
//! * `/version`: the operator's name and version as JSON (`{"name": …, "version": …}`), set with
//!   [`Server::version`]; 404 when none was set. The originals served their version there.
//! * `/healthz`: 200 while the process serves requests (liveness).
//! * `/readyz`: 200 once every registered cache has synced (each controller registers its
//!   object cache and, in release mode, its Release cache), 503 before, with one line per check.
//!
//! The server never exits the process; it stops when its shutdown token is cancelled.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use parking_lot::RwLock;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// Readiness checks shared between controllers and the server. Cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct Readiness {
    checks: Arc<RwLock<BTreeMap<String, bool>>>,
}

impl Readiness {
    /// A new, empty set of checks (ready until something registers).
    pub fn new() -> Self {
        Self::default()
    }

    /// Register a check, initially not ready; the returned handle marks it ready.
    pub fn register(&self, name: impl Into<String>) -> ReadyFlag {
        let name = name.into();
        self.checks.write().insert(name.clone(), false);
        ReadyFlag { checks: self.checks.clone(), name }
    }

    /// Whether every check is ready.
    pub fn is_ready(&self) -> bool {
        self.checks.read().values().all(|ready| *ready)
    }

    /// One line per check: `ok <name>` or `waiting <name>`.
    pub fn report(&self) -> String {
        self.checks
            .read()
            .iter()
            .map(|(name, ready)| format!("{} {name}\n", if *ready { "ok" } else { "waiting" }))
            .collect()
    }
}

/// Marks one readiness check.
#[derive(Debug)]
pub struct ReadyFlag {
    checks: Arc<RwLock<BTreeMap<String, bool>>>,
    name: String,
}

impl ReadyFlag {
    /// Mark the check ready (or not).
    pub fn set(&self, ready: bool) {
        self.checks.write().insert(self.name.clone(), ready);
    }
}

/// Errors of the HTTP server.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The cause.
        source: std::io::Error,
    },
}

/// Serves `/metrics`, `/healthz`, `/readyz` and `/version`.
#[derive(Debug)]
pub struct Server {
    listener: TcpListener,
    registry: Arc<Registry>,
    readiness: Readiness,
    version: Option<String>,
}

impl Server {
    /// Bind `addr` (port 0 picks a free port).
    pub async fn bind(addr: SocketAddr, registry: Arc<Registry>, readiness: Readiness) -> Result<Server, ServerError> {
        let listener = TcpListener::bind(addr).await.map_err(|source| ServerError::Bind { addr, source })?;
        Ok(Server { listener, registry, readiness, version: None })
    }

    /// Serve `/version`: the operator's `name` and `version`.
    pub fn version(mut self, name: &str, version: &str) -> Self {
        self.version = Some(format!("{}\n", serde_json::json!({"name": name, "version": version})));
        self
    }

    /// The bound address.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.listener.local_addr().ok()
    }

    /// Serve until `shutdown` is cancelled.
    pub async fn serve(self, shutdown: CancellationToken) {
        let state = Arc::new((self.registry, self.readiness, self.version));
        loop {
            let accepted = tokio::select! {
                _ = shutdown.cancelled() => return,
                accepted = self.listener.accept() => accepted,
            };
            let stream = match accepted {
                Ok((stream, _)) => stream,
                Err(error) => {
                    tracing::warn!(%error, "cannot accept an HTTP connection");
                    continue;
                }
            };
            let state = state.clone();
            let shutdown = shutdown.clone();
            tokio::spawn(async move {
                let service = service_fn(move |req| {
                    let state = state.clone();
                    async move { Ok::<_, Infallible>(handle(&req, &state.0, &state.1, state.2.as_deref())) }
                });
                let conn = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service);
                tokio::pin!(conn);
                tokio::select! {
                    result = conn.as_mut() => {
                        if let Err(error) = result {
                            tracing::debug!(%error, "HTTP connection ended with an error");
                        }
                    }
                    _ = shutdown.cancelled() => conn.as_mut().graceful_shutdown(),
                }
            });
        }
    }
}

fn handle(
    req: &Request<Incoming>,
    registry: &Registry,
    readiness: &Readiness,
    version: Option<&str>,
) -> Response<Full<Bytes>> {
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return text(StatusCode::METHOD_NOT_ALLOWED, "only GET is served\n".into());
    }
    match req.uri().path() {
        "/metrics" => {
            let mut body = String::new();
            match prometheus_client::encoding::text::encode(&mut body, registry) {
                Ok(()) => Response::builder()
                    .header(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")
                    .body(Full::new(Bytes::from(body)))
                    .unwrap_or_default(),
                Err(_) => text(StatusCode::INTERNAL_SERVER_ERROR, "cannot encode the metrics\n".into()),
            }
        }
        "/healthz" => text(StatusCode::OK, "ok\n".into()),
        "/readyz" => {
            let status = if readiness.is_ready() { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
            text(status, readiness.report())
        }
        "/version" => match version {
            Some(body) => Response::builder()
                .header(header::CONTENT_TYPE, "application/json")
                .body(Full::new(Bytes::from(body.to_string())))
                .unwrap_or_default(),
            None => text(StatusCode::NOT_FOUND, "not found\n".into()),
        },
        _ => text(StatusCode::NOT_FOUND, "not found\n".into()),
    }
}

fn text(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "text/plain; charset=utf-8")
        .body(Full::new(Bytes::from(body)))
        .unwrap_or_default()
}

/// Ctrl-C, or SIGTERM: what the kubelet sends a container before it kills it, so that a pod's
/// operator stops cleanly and hands its Lease over at once instead of after it expires. The
/// operator binary awaits it; nothing here installs a handler by itself.
pub async fn terminated() {
    #[cfg(unix)]
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        }
        Err(error) => {
            tracing::warn!(%error, "cannot listen for SIGTERM; stopping on Ctrl-C only");
            let _ = tokio::signal::ctrl_c().await;
        }
    }
    #[cfg(not(unix))]
    let _ = tokio::signal::ctrl_c().await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readiness_waits_for_every_check() {
        let r = Readiness::new();
        assert!(r.is_ready());
        let a = r.register("objects");
        let b = r.register("releases");
        assert!(!r.is_ready());
        a.set(true);
        assert!(!r.is_ready());
        assert_eq!(r.report(), "ok objects\nwaiting releases\n");
        b.set(true);
        assert!(r.is_ready());
    }
}

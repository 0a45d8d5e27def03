//! Shared helpers of the conformance suite: a raw HTTP client for exact wire checks, a
//! line-oriented watch reader, Status assertions, and the custom resources the tests use.
//!
//! Every test starts its own `TestEnv`, so tests are independent and run in parallel.
#![allow(dead_code)]

use std::future::Future;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Method, Request};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use testenv::TestEnv;

/// How long a test waits for an expected watch event or response before failing.
pub const WAIT: Duration = Duration::from_secs(10);
/// How long a test listens to make sure that nothing (more) arrives.
pub const QUIET: Duration = Duration::from_millis(400);

/// Configmaps in `default`.
pub const CMS: &str = "/api/v1/namespaces/default/configmaps";
/// Foos in `default`.
pub const FOOS: &str = "/apis/example.com/v1/namespaces/default/foos";
/// CustomResourceDefinitions.
pub const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";

/// A response read to the end.
#[derive(Debug)]
pub struct Resp {
    /// HTTP status code.
    pub status: u16,
    /// Response headers.
    pub headers: HeaderMap,
    /// The whole body.
    pub body: Bytes,
}

impl Resp {
    /// The body as JSON (fails the test when it is not JSON).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("response body is not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }

    /// The body as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// A header as a string.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// All values of a header.
    pub fn header_all(&self, name: &str) -> Vec<String> {
        self.headers.get_all(name).iter().filter_map(|v| v.to_str().ok()).map(str::to_string).collect()
    }

    /// The Content-Type header.
    pub fn content_type(&self) -> &str {
        self.header("content-type").unwrap_or("")
    }

    /// Fail unless the status code is `code`, printing the body.
    #[track_caller]
    pub fn expect(&self, code: u16) -> &Self {
        assert_eq!(self.status, code, "unexpected status; body: {}", self.text());
        self
    }
}

/// A raw HTTP/1.1 client bound to one test server.
#[derive(Clone, Debug)]
pub struct Http {
    base: String,
    client: Client<HttpConnector, Full<Bytes>>,
}

impl Http {
    /// A client for `env`.
    pub fn new(env: &TestEnv) -> Http {
        Http::for_base(env.base_url())
    }

    /// A client for a base URL.
    pub fn for_base(base: String) -> Http {
        let client = Client::builder(TokioExecutor::new()).build_http();
        Http { base, client }
    }

    /// `http://127.0.0.1:<port>`.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// Send a request and return the response head and the unread body.
    pub async fn start(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<Vec<u8>>,
    ) -> http::Response<Incoming> {
        let mut req = Request::builder().method(method).uri(format!("{}{}", self.base, path));
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let req = req.body(Full::new(Bytes::from(body.unwrap_or_default()))).expect("a valid request");
        tokio::time::timeout(WAIT, self.client.request(req))
            .await
            .unwrap_or_else(|_| panic!("no response to {path} within {WAIT:?}"))
            .unwrap_or_else(|e| panic!("request to {path} failed: {e}"))
    }

    /// Send a request and read the whole response.
    pub async fn send(&self, method: Method, path: &str, headers: &[(&str, &str)], body: Option<Vec<u8>>) -> Resp {
        let resp = self.start(method, path, headers, body).await;
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let body = tokio::time::timeout(WAIT, resp.into_body().collect())
            .await
            .unwrap_or_else(|_| panic!("body of {path} not complete within {WAIT:?}"))
            .unwrap_or_else(|e| panic!("reading the body of {path} failed: {e}"))
            .to_bytes();
        Resp { status, headers, body }
    }

    /// GET.
    pub async fn get(&self, path: &str) -> Resp {
        self.send(Method::GET, path, &[], None).await
    }

    /// GET with an Accept header.
    pub async fn get_accept(&self, path: &str, accept: &str) -> Resp {
        self.send(Method::GET, path, &[("accept", accept)], None).await
    }

    /// POST a JSON body.
    pub async fn post(&self, path: &str, body: &Value) -> Resp {
        self.send(Method::POST, path, &[("content-type", "application/json")], Some(body.to_string().into_bytes()))
            .await
    }

    /// PUT a JSON body.
    pub async fn put(&self, path: &str, body: &Value) -> Resp {
        self.send(Method::PUT, path, &[("content-type", "application/json")], Some(body.to_string().into_bytes())).await
    }

    /// PATCH with a content type.
    pub async fn patch(&self, path: &str, content_type: &str, body: &Value) -> Resp {
        self.send(Method::PATCH, path, &[("content-type", content_type)], Some(body.to_string().into_bytes())).await
    }

    /// PATCH with `application/merge-patch+json`.
    pub async fn merge(&self, path: &str, body: &Value) -> Resp {
        self.patch(path, "application/merge-patch+json", body).await
    }

    /// PATCH with `application/json-patch+json`.
    pub async fn json_patch(&self, path: &str, body: &Value) -> Resp {
        self.patch(path, "application/json-patch+json", body).await
    }

    /// PATCH with `application/apply-patch+yaml` (server-side apply); `query` is appended.
    pub async fn apply(&self, path: &str, query: &str, body: &Value) -> Resp {
        self.patch(&format!("{path}?{query}"), "application/apply-patch+yaml", body).await
    }

    /// DELETE without a body.
    pub async fn delete(&self, path: &str) -> Resp {
        self.send(Method::DELETE, path, &[], None).await
    }

    /// DELETE with a DeleteOptions body.
    pub async fn delete_with(&self, path: &str, options: &Value) -> Resp {
        self.send(Method::DELETE, path, &[("content-type", "application/json")], Some(options.to_string().into_bytes()))
            .await
    }

    /// Open a watch (or any streamed response).
    pub async fn watch(&self, path: &str) -> Watch {
        self.watch_with(path, &[]).await
    }

    /// Open a watch with extra request headers.
    pub async fn watch_with(&self, path: &str, headers: &[(&str, &str)]) -> Watch {
        let resp = self.start(Method::GET, path, headers, None).await;
        Watch {
            status: resp.status().as_u16(),
            headers: resp.headers().clone(),
            body: resp.into_body(),
            buf: Vec::new(),
            ended: false,
            path: path.to_string(),
        }
    }

    /// Open a watch and read `n` events (or fewer if the stream ends or `timeout` passes).
    pub async fn watch_lines(&self, path: &str, n: usize, timeout: Duration) -> Vec<Value> {
        let mut w = self.watch(path).await;
        let deadline = tokio::time::Instant::now() + timeout;
        let mut out = Vec::new();
        while out.len() < n {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            match w.next_within(left).await {
                Next::Event(v) => out.push(v),
                Next::Timeout | Next::End => break,
            }
        }
        out
    }
}

/// What reading the next watch line produced.
#[derive(Debug)]
pub enum Next {
    /// One decoded line.
    Event(Value),
    /// Nothing arrived in time.
    Timeout,
    /// The server ended the stream.
    End,
}

/// An open streamed response, read line by line.
#[derive(Debug)]
pub struct Watch {
    /// HTTP status code.
    pub status: u16,
    /// Response headers.
    pub headers: HeaderMap,
    body: Incoming,
    buf: Vec<u8>,
    ended: bool,
    path: String,
}

impl Watch {
    /// The Content-Type header.
    pub fn content_type(&self) -> &str {
        self.headers.get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("")
    }

    /// The next raw line (without the newline), or why there is none.
    pub async fn next_line_within(&mut self, timeout: Duration) -> Result<String, Next> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Some(pos) = self.buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=pos).collect();
                return Ok(String::from_utf8_lossy(&line[..line.len() - 1]).into_owned());
            }
            if self.ended {
                assert!(
                    self.buf.iter().all(u8::is_ascii_whitespace),
                    "stream of {} ended inside a line: {}",
                    self.path,
                    String::from_utf8_lossy(&self.buf)
                );
                return Err(Next::End);
            }
            match tokio::time::timeout_at(deadline, self.body.frame()).await {
                Err(_) => return Err(Next::Timeout),
                Ok(None) => self.ended = true,
                Ok(Some(Err(_))) => self.ended = true,
                Ok(Some(Ok(frame))) => {
                    if let Some(data) = frame.data_ref() {
                        self.buf.extend_from_slice(data);
                    }
                }
            }
        }
    }

    /// The next event, or why there is none.
    pub async fn next_within(&mut self, timeout: Duration) -> Next {
        match self.next_line_within(timeout).await {
            Ok(line) => Next::Event(
                serde_json::from_str(&line).unwrap_or_else(|e| panic!("watch line is not JSON ({e}): {line}")),
            ),
            Err(n) => n,
        }
    }

    /// The next event; fails the test if none arrives within [`WAIT`].
    #[track_caller]
    pub fn next(&mut self) -> impl Future<Output = Value> + '_ {
        let caller = std::panic::Location::caller();
        async move {
            match self.next_within(WAIT).await {
                Next::Event(v) => v,
                other => panic!("{caller}: expected a watch event on {}, got {other:?}", self.path),
            }
        }
    }

    /// The next event that is not a BOOKMARK.
    pub async fn next_change(&mut self) -> Value {
        loop {
            let ev = self.next().await;
            if ev["type"] != "BOOKMARK" {
                return ev;
            }
        }
    }

    /// Fail if an event (other than a BOOKMARK) arrives within [`QUIET`].
    #[track_caller]
    pub fn expect_quiet(&mut self) -> impl Future<Output = ()> + '_ {
        let caller = std::panic::Location::caller();
        async move {
            let deadline = tokio::time::Instant::now() + QUIET;
            loop {
                let left = deadline.saturating_duration_since(tokio::time::Instant::now());
                match self.next_within(left).await {
                    Next::Event(v) if v["type"] == "BOOKMARK" => continue,
                    Next::Event(v) => {
                        panic!("{caller}: expected no event on {}, got {v}", self.path)
                    }
                    Next::Timeout => return,
                    Next::End => {
                        panic!("{caller}: expected the watch on {} to stay open", self.path)
                    }
                }
            }
        }
    }

    /// Fail unless the stream ends (after any further events, which are returned) within `timeout`.
    pub async fn expect_end(&mut self, timeout: Duration) -> Vec<Value> {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut rest = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            match self.next_within(left).await {
                Next::Event(v) => rest.push(v),
                Next::End => return rest,
                Next::Timeout => panic!("the watch on {} did not end within {timeout:?}; got {rest:?}", self.path),
            }
        }
    }
}

/// Start a server and a raw client for it.
pub async fn start() -> (TestEnv, Http) {
    let env = TestEnv::start().await.expect("the test server starts");
    let http = Http::new(&env);
    (env, http)
}

/// Fail unless `resp` is the Status kube-apiserver sends for an error: the HTTP code, `code`,
/// `reason` and the exact `message`. Returns the Status.
#[track_caller]
pub fn assert_status(resp: &Resp, code: u16, reason: &str, message: &str) -> Value {
    let body = resp.json();
    assert_eq!(resp.status, code, "HTTP status; body: {body}");
    assert_status_value(&body, code, reason, message);
    assert!(resp.content_type().starts_with("application/json"), "errors are JSON; got {:?}", resp.content_type());
    body
}

/// Like [`assert_status`] on a Status value (e.g. the object of a watch ERROR event).
#[track_caller]
pub fn assert_status_value(body: &Value, code: u16, reason: &str, message: &str) {
    assert_eq!(body["kind"], "Status", "{body}");
    assert_eq!(body["apiVersion"], "v1", "{body}");
    assert_eq!(body["metadata"], json!({}), "{body}");
    assert_eq!(body["status"], "Failure", "{body}");
    assert_eq!(body["code"], code, "{body}");
    if reason.is_empty() {
        assert!(body.get("reason").is_none_or(|r| r == ""), "no reason expected: {body}");
    } else {
        assert_eq!(body["reason"], reason, "{body}");
    }
    assert_eq!(body["message"], message, "{body}");
}

/// Fail unless `resp` has this code and reason (message not checked). Returns the Status.
#[track_caller]
pub fn assert_reason(resp: &Resp, code: u16, reason: &str) -> Value {
    let body = resp.json();
    assert_eq!(resp.status, code, "HTTP status; body: {body}");
    assert_eq!(body["kind"], "Status", "{body}");
    assert_eq!(body["code"], code, "{body}");
    assert_eq!(body["reason"], reason, "{body}");
    body
}

/// `metadata.resourceVersion` as a number.
#[track_caller]
pub fn rv(obj: &Value) -> u64 {
    obj["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_else(|| panic!("no resourceVersion in {obj}"))
        .parse()
        .unwrap_or_else(|_| panic!("resourceVersion is not decimal in {obj}"))
}

/// `metadata.resourceVersion` as the string on the wire.
#[track_caller]
pub fn rv_str(obj: &Value) -> String {
    obj["metadata"]["resourceVersion"].as_str().unwrap_or_else(|| panic!("no resourceVersion in {obj}")).to_string()
}

/// A ConfigMap body.
pub fn cm(name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data})
}

/// Create a ConfigMap in `default` and return it.
pub async fn create_cm(http: &Http, name: &str, data: Value) -> Value {
    let r = http.post(CMS, &cm(name, data)).await;
    r.expect(201);
    r.json()
}

/// Poll `f` until it returns `Some` or `timeout` passes (for controllers that run on a timer).
pub async fn eventually<T, F, Fut>(timeout: Duration, what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(tokio::time::Instant::now() < deadline, "timed out after {timeout:?} waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Await a future with the suite's timeout.
pub async fn within<T>(what: &str, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(WAIT, fut).await.unwrap_or_else(|_| panic!("timed out after {WAIT:?}: {what}"))
}

// ---------------------------------------------------------------------------------------------
// Custom resources

/// The spec of the suite's custom resource `Foo` (example.com/v1).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "example.com",
    version = "v1",
    kind = "Foo",
    namespaced,
    status = "FooStatus",
    shortname = "fo",
    printcolumn = r#"{"name":"Replicas","type":"integer","jsonPath":".spec.replicas"}"#,
    scale = r#"{"specReplicasPath":".spec.replicas","statusReplicasPath":".status.replicas","labelSelectorPath":".status.selector"}"#
)]
pub struct FooSpec {
    /// Desired replicas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// A free string.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub x: Option<String>,
    /// A colour.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub color: Option<String>,
    /// Tags (a set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<Vec<String>>,
}

/// The status of `Foo`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct FooStatus {
    /// Observed replicas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// Ready flag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready: Option<bool>,
    /// Label selector for /scale.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
}

/// The schema of `foos.example.com` v1: spec and status with a few list flavours (I7) and a
/// subtree that keeps unknown fields (J4).
pub fn foo_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "properties": {
                    "replicas": {"type": "integer", "format": "int32", "minimum": 0},
                    "x": {"type": "string"},
                    "color": {"type": "string"},
                    "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
                    "list": {"type": "array", "items": {"type": "string"}},
                    "entries": {
                        "type": "array",
                        "x-kubernetes-list-type": "map",
                        "x-kubernetes-list-map-keys": ["name"],
                        "items": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}, "value": {"type": "string"}}}
                    },
                    "settings": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
                }
            },
            "status": {
                "type": "object",
                "properties": {
                    "replicas": {"type": "integer", "format": "int32"},
                    "ready": {"type": "boolean"},
                    "selector": {"type": "string"},
                    "conditions": {
                        "type": "array",
                        "x-kubernetes-list-type": "map",
                        "x-kubernetes-list-map-keys": ["type"],
                        "items": {"type": "object", "required": ["type"], "properties": {"type": {"type": "string"}, "status": {"type": "string"}}}
                    }
                }
            }
        }
    })
}

/// The CRD `foos.example.com`: namespaced, status and scale subresources, printer columns,
/// short name `fo`, category `all`, selectable field `.spec.color`.
pub fn foo_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "foos.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "foos", "singular": "foo", "kind": "Foo", "listKind": "FooList", "shortNames": ["fo"], "categories": ["all"]},
            "versions": [{
                "name": "v1",
                "served": true,
                "storage": true,
                "subresources": {
                    "status": {},
                    "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas", "labelSelectorPath": ".status.selector"}
                },
                "additionalPrinterColumns": [
                    {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
                    {"name": "Color", "type": "string", "jsonPath": ".spec.color", "priority": 1}
                ],
                "selectableFields": [{"jsonPath": ".spec.color"}],
                "schema": {"openAPIV3Schema": foo_schema()}
            }]
        }
    })
}

/// A CRD without subresources: `bars.example.com` (namespaced), kind `Bar`, spec/status free
/// strings.
pub fn bar_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "bars.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "bars", "singular": "bar", "kind": "Bar"},
            "versions": [{
                "name": "v1",
                "served": true,
                "storage": true,
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "spec": {"type": "object", "properties": {"x": {"type": "string"}}},
                        "status": {"type": "object", "properties": {"phase": {"type": "string"}}}
                    }
                }}
            }]
        }
    })
}

/// A cluster-scoped CRD: `clusterfoos.example.com`, kind `ClusterFoo`.
pub fn cluster_foo_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "clusterfoos.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Cluster",
            "names": {"plural": "clusterfoos", "singular": "clusterfoo", "kind": "ClusterFoo"},
            "versions": [{
                "name": "v1",
                "served": true,
                "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object", "properties": {"x": {"type": "string"}}}}}}
            }]
        }
    })
}

/// Create a CRD and fail unless it is accepted (201) and Established.
pub async fn install_crd(http: &Http, crd: &Value) -> Value {
    let r = http.post(CRDS, crd).await;
    r.expect(201);
    let name = crd["metadata"]["name"].as_str().unwrap_or_default().to_string();
    // A real server establishes shortly after the create; wait for the condition as clients do.
    eventually(WAIT, "the CRD to be Established", || {
        let http = http.clone();
        let name = name.clone();
        async move {
            let crd = http.get(&format!("{CRDS}/{name}")).await.json();
            let established = crd["status"]["conditions"]
                .as_array()
                .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Established" && c["status"] == "True"));
            established.then_some(crd)
        }
    })
    .await
}

/// Install `foos.example.com`.
pub async fn install_foo(http: &Http) -> Value {
    install_crd(http, &foo_crd()).await
}

/// A Foo body.
pub fn foo(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Foo", "metadata": {"name": name}, "spec": spec})
}

/// Create a Foo in `default` and return it.
pub async fn create_foo(http: &Http, name: &str, spec: Value) -> Value {
    let r = http.post(FOOS, &foo(name, spec)).await;
    r.expect(201);
    r.json()
}

/// A server with `foos.example.com` installed.
pub async fn start_with_foo() -> (TestEnv, Http) {
    let (env, http) = start().await;
    install_foo(&http).await;
    (env, http)
}

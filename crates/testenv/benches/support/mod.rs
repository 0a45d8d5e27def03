//! What the benchmarks share: a `testenv serve` in its own process (so its RSS and CPU are its
//! own), `/proc` readings of that process, and a plain HTTP client.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::Value;

/// The HTTP client the benchmarks drive the server with.
pub type HttpClient = Client<HttpConnector, Full<Bytes>>;

/// A `testenv serve` child process, killed on drop.
pub struct Server {
    pub child: Child,
    pub url: String,
    _dir: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Start `testenv serve` on an ephemeral port with `extra` arguments, and wait for its URL.
pub fn start_server(extra: &[&str]) -> Server {
    let dir = tempfile::tempdir().expect("temp dir");
    let kubeconfig = dir.path().join("kubeconfig");
    let mut child = Command::new(env!("CARGO_BIN_EXE_testenv"))
        .args(["serve", "--port", "0"])
        .args(extra)
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start testenv serve");
    let stdout = child.stdout.take().expect("stdout");
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).expect("read the serving line");
    let url = line.split_whitespace().find(|w| w.starts_with("http://")).expect("serving URL").to_string();
    Server { child, url, _dir: dir }
}

/// A field of `/proc/<pid>/status` (e.g. `VmRSS:`, `VmHWM:`), in KiB.
pub fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// POST `body` as JSON and fail the benchmark unless the server accepts it.
pub async fn post(client: &HttpClient, url: &str, body: &Value) {
    post_as(client, url, body, None).await;
}

/// POST `body` as JSON with a bearer token, fail unless accepted, and return the response.
pub async fn post_as(client: &HttpClient, url: &str, body: &Value, token: Option<&str>) -> Value {
    let mut req = http::Request::post(url).header("content-type", "application/json");
    if let Some(t) = token {
        req = req.header("authorization", format!("Bearer {t}"));
    }
    let req = req.body(Full::new(Bytes::from(body.to_string()))).expect("request");
    let resp = client.request(req).await.expect("POST");
    let status = resp.status();
    let bytes = resp.into_body().collect().await.expect("body").to_bytes();
    assert!(status.is_success(), "POST {url}: {status} {}", String::from_utf8_lossy(&bytes));
    serde_json::from_slice(&bytes).unwrap_or(Value::Null)
}

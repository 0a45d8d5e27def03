//! For tests: the real tools a node runs its config with, and an emulated node that runs a
//! config's own scripts as a booted instance would. The operators do not link this crate; they
//! run the pure checks of `node-verify` only.
//!
//! [`tools`] runs `systemd-analyze verify` on every unit and drop-in of a config and `shellcheck`
//! on every script; the suite in `tests/` runs them, and `node_verify::check`, on every config
//! both operators render.
//!
//! The emulated node:
//! - [`Node::boot`] plays Ignition's file stage: it writes every file of a rendered config, with
//!   its mode, below a temporary root. The one file it replaces is the AWS CLI wrapper
//!   (`/opt/bin/aws`, which on a node runs the awscli container): below the root it is the real
//!   AWS CLI ([`motoenv::aws_cli`]). [`Node::script`] runs a script of the config with
//!   `NODE_ROOT` at that root, so every path the script reads or writes is below it.
//! - [`MetadataService`] is the instance metadata service of one instance on 127.0.0.1, IMDSv2
//!   only: a `PUT /latest/api/token` first, then reads carrying the token (instance id, zone,
//!   region, addresses, the identity document, the instance role's credentials). The scripts
//!   and the AWS CLI reach it through `AWS_EC2_METADATA_SERVICE_ENDPOINT`.
//! - [`HealthEndpoints`] answers etcd's `/health` and the API server's `/readyz` as the
//!   master's own etcd member and API server would, healthy or not as the test says.
//! - [`Node::dhcp_lease`] and [`Node::disk`] play what the VPC and the hypervisor do for an
//!   attached network interface and volume: the interface gets its address when
//!   systemd-networkd reloads (this machine runs no networkd: `networkctl` and `ip` of the
//!   emulated node are small programs that read the leases), and the volume is a file at its
//!   device path that the real `blkid` and `mkfs.ext4` work on.
//! - The emulated node's `hostnamectl set-hostname` writes `/etc/hostname` below the root, as
//!   systemd-hostnamed would; this machine's hostname is never touched.
//!
//! AWS itself is moto: [`Node::script`] points the CLI at it with `AWS_ENDPOINT_URL`. Nothing of
//! the scripts is copied or rewritten; what they do is checked through AWS's own API.

#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::fmt;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

pub mod tools;

/// The AWS CLI wrapper of a node config, replaced by the real CLI below the root.
pub const AWS_WRAPPER: &str = "/opt/bin/aws";

/// The credentials of an instance's role, as the metadata service hands them out.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// Access key id.
    pub access_key_id: String,
    /// Secret access key. Never printed.
    pub secret_access_key: String,
    /// Session token. Never printed.
    pub session_token: String,
    /// When they expire (ISO 8601), as STS said.
    pub expiration: String,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &"***")
            .field("session_token", &"***")
            .field("expiration", &self.expiration)
            .finish()
    }
}

/// What the metadata service of one instance says about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Instance {
    /// `i-…`.
    pub instance_id: String,
    /// The account the instance runs in.
    pub account_id: String,
    /// The region.
    pub region: String,
    /// The availability zone.
    pub availability_zone: String,
    /// The primary private address.
    pub local_ipv4: String,
    /// The private DNS name.
    pub local_hostname: String,
    /// The instance profile's role name.
    pub role: String,
    /// The role's credentials.
    pub credentials: Credentials,
}

/// One request the metadata service received.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetadataRequest {
    /// The HTTP method.
    pub method: String,
    /// The path.
    pub path: String,
    /// The status answered: 401 for a read without a valid token.
    pub status: u16,
}

/// An HTTP server on 127.0.0.1 answering one request per connection from a handler; stops when
/// dropped.
#[derive(Debug)]
struct Server {
    port: u16,
    stop: Arc<AtomicBool>,
    thread: Option<thread::JoinHandle<()>>,
}

/// What a handler answers: status, content type, body.
type Response = (u16, &'static str, String);

/// A request as the handler sees it: method, path, headers (lower-case names).
struct Request {
    method: String,
    path: String,
    headers: BTreeMap<String, String>,
}

impl Server {
    fn start(handler: impl Fn(&Request) -> Response + Send + 'static) -> io::Result<Server> {
        let listener = TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))?;
        listener.set_nonblocking(true)?;
        let port = listener.local_addr()?.port();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = thread::spawn(move || {
            while !stopped.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        // A client that misbehaves costs its own connection only.
                        let _ = serve_one(stream, &handler);
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => thread::sleep(Duration::from_millis(5)),
                    Err(_) => thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Ok(Server { port, stop, thread: Some(thread) })
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn serve_one(stream: TcpStream, handler: &impl Fn(&Request) -> Response) -> io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next().unwrap_or_default().to_owned(), parts.next().unwrap_or_default().to_owned());
    let mut headers = BTreeMap::new();
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header)? == 0 || header.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = header.split_once(':') {
            headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_owned());
        }
    }
    let length: usize = headers.get("content-length").and_then(|l| l.parse().ok()).unwrap_or(0);
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    let (status, content_type, body) = handler(&Request { method, path, headers });
    let reason = match status {
        200 => "OK",
        401 => "Unauthorized",
        404 => "Not Found",
        405 => "Method Not Allowed",
        _ => "Service Unavailable",
    };
    let mut stream = stream;
    write!(
        stream,
        "HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    stream.flush()
}

/// The instance metadata service of one instance, IMDSv2 only, on 127.0.0.1; stops when dropped.
#[derive(Debug)]
pub struct MetadataService {
    server: Server,
    requests: Arc<Mutex<Vec<MetadataRequest>>>,
}

impl MetadataService {
    /// Serves `instance`'s metadata.
    pub fn serve(instance: Instance) -> io::Result<MetadataService> {
        let requests = Arc::new(Mutex::new(Vec::new()));
        let log = requests.clone();
        let tokens = Mutex::new(Vec::<String>::new());
        let counter = AtomicU64::new(0);
        let server = Server::start(move |req| {
            let answer = metadata_answer(&instance, req, &tokens, &counter);
            if let Ok(mut log) = log.lock() {
                log.push(MetadataRequest { method: req.method.clone(), path: req.path.clone(), status: answer.0 });
            }
            answer
        })?;
        Ok(MetadataService { server, requests })
    }

    /// `http://127.0.0.1:PORT`, for `AWS_EC2_METADATA_SERVICE_ENDPOINT`.
    pub fn endpoint(&self) -> String {
        self.server.endpoint()
    }

    /// Every request so far, oldest first.
    pub fn requests(&self) -> Vec<MetadataRequest> {
        self.requests.lock().map(|r| r.clone()).unwrap_or_default()
    }
}

fn metadata_answer(instance: &Instance, req: &Request, tokens: &Mutex<Vec<String>>, counter: &AtomicU64) -> Response {
    const TEXT: &str = "text/plain";
    if req.path == "/latest/api/token" {
        if req.method != "PUT" {
            return (405, TEXT, String::new());
        }
        if !req.headers.contains_key("x-aws-ec2-metadata-token-ttl-seconds") {
            return (400, TEXT, "missing X-aws-ec2-metadata-token-ttl-seconds".into());
        }
        let token = format!("harness-token-{}-{}", std::process::id(), counter.fetch_add(1, Ordering::Relaxed));
        if let Ok(mut tokens) = tokens.lock() {
            tokens.push(token.clone());
        }
        return (200, TEXT, token);
    }
    let valid = req
        .headers
        .get("x-aws-ec2-metadata-token")
        .is_some_and(|t| tokens.lock().map(|tokens| tokens.contains(t)).unwrap_or(false));
    if !valid {
        return (401, TEXT, String::new());
    }
    if req.method != "GET" {
        return (405, TEXT, String::new());
    }
    let i = instance;
    let creds = format!("/latest/meta-data/iam/security-credentials/{}", i.role);
    let body = match req.path.trim_end_matches('/') {
        "/latest/meta-data/instance-id" => i.instance_id.clone(),
        "/latest/meta-data/placement/availability-zone" => i.availability_zone.clone(),
        "/latest/meta-data/placement/region" => i.region.clone(),
        "/latest/meta-data/local-ipv4" => i.local_ipv4.clone(),
        "/latest/meta-data/local-hostname" | "/latest/meta-data/hostname" => i.local_hostname.clone(),
        "/latest/meta-data/iam/security-credentials" => i.role.clone(),
        "/latest/dynamic/instance-identity/document" => serde_json::json!({
            "accountId": i.account_id,
            "architecture": "x86_64",
            "availabilityZone": i.availability_zone,
            "instanceId": i.instance_id,
            "instanceType": "m5.xlarge",
            "privateIp": i.local_ipv4,
            "region": i.region,
            "version": "2017-09-30",
        })
        .to_string(),
        path if path == creds => serde_json::json!({
            "Code": "Success",
            "Type": "AWS-HMAC",
            "AccessKeyId": i.credentials.access_key_id,
            "SecretAccessKey": i.credentials.secret_access_key,
            "Token": i.credentials.session_token,
            "Expiration": i.credentials.expiration,
        })
        .to_string(),
        _ => return (404, TEXT, String::new()),
    };
    (200, TEXT, body)
}

/// A master's own etcd `/health` and API server `/readyz` on 127.0.0.1, answering healthy while
/// their flags are set; stops when dropped.
#[derive(Debug)]
pub struct HealthEndpoints {
    server: Server,
    /// Whether etcd answers `{"health":"true"}` (else 503 with `"false"`).
    pub etcd: Arc<AtomicBool>,
    /// Whether `/readyz` answers 200 (else 500).
    pub api: Arc<AtomicBool>,
}

impl HealthEndpoints {
    /// Both unhealthy until their flags are set.
    pub fn serve() -> io::Result<HealthEndpoints> {
        let (etcd, api) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
        let (e, a) = (etcd.clone(), api.clone());
        let server = Server::start(move |req| match req.path.as_str() {
            "/health" if e.load(Ordering::SeqCst) => {
                (200, "application/json", r#"{"health":"true","reason":""}"#.into())
            }
            "/health" => (503, "application/json", r#"{"health":"false","reason":"no leader"}"#.into()),
            "/readyz" if a.load(Ordering::SeqCst) => (200, "text/plain", "ok".into()),
            "/readyz" => (500, "text/plain", "[-]etcd failed: reason withheld\nreadyz check failed".into()),
            _ => (404, "text/plain", String::new()),
        })?;
        Ok(HealthEndpoints { server, etcd, api })
    }

    /// For the hook script's `ETCD_HEALTH_URL`.
    pub fn etcd_health_url(&self) -> String {
        format!("{}/health", self.server.endpoint())
    }

    /// For the hook script's `API_READYZ_URL`.
    pub fn readyz_url(&self) -> String {
        format!("{}/readyz", self.server.endpoint())
    }
}

/// Everything that can go wrong booting an emulated node.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The config is not an Ignition document this harness can read.
    #[error("the node config does not parse: {0}")]
    Config(#[from] ignition::IgnitionError),
    /// The config has no file at a path the test asked for.
    #[error("the node config writes no {path}")]
    NoSuchFile {
        /// The path asked for.
        path: String,
    },
    /// Writing the root failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The operating-system error.
        source: io::Error,
    },
}

fn io_err(context: impl Into<String>) -> impl FnOnce(io::Error) -> Error {
    let context = context.into();
    move |source| Error::Io { context, source }
}

/// A node's file system below a temporary root, written from its config; removed when dropped.
#[derive(Debug)]
pub struct Node {
    dir: tempfile::TempDir,
    aws_endpoint: String,
}

/// `systemd-networkd` of the emulated node: `networkctl reload` gives every interface a
/// `.network` file matches (by `MACAddress=`) its DHCP lease from `$HARNESS_DIR/leases`.
const NETWORKCTL: &str = r#"#!/bin/bash
set -euo pipefail
if [ "$*" != reload ]; then
  echo "networkctl $*: the emulated node has reload only" >&2
  exit 1
fi
for file in "$NODE_ROOT"/etc/systemd/network/*.network; do
  [ -e "$file" ] || continue
  mac="$(sed -n 's/^MACAddress=//p' "$file")"
  while read -r lease_mac address; do
    if [ "${lease_mac,,}" = "${mac,,}" ] && ! grep -qx "$address" "$HARNESS_DIR/addresses" 2>/dev/null; then
      echo "$address" >>"$HARNESS_DIR/addresses"
    fi
  done <"$HARNESS_DIR/leases"
done
"#;

/// `ip -4 -o addr show` of the emulated node: the addresses networkd configured.
const IP: &str = r#"#!/bin/bash
set -euo pipefail
if [ "$*" != "-4 -o addr show" ]; then
  echo "ip $*: the emulated node has -4 -o addr show only" >&2
  exit 1
fi
echo "1: lo    inet 127.0.0.1/8 scope host lo"
n=2
while read -r address; do
  echo "$n: eth$((n - 2))    inet $address/24 scope global eth$((n - 2))"
  n=$((n + 1))
done < <(cat "$HARNESS_DIR/addresses" 2>/dev/null)
"#;

/// `hostnamectl` of the emulated node: `set-hostname NAME` does what systemd-hostnamed does for
/// it, writing the static hostname to `/etc/hostname` below the node's root (never this
/// machine's hostname).
const HOSTNAMECTL: &str = r#"#!/bin/bash
set -euo pipefail
if [ "$#" -ne 2 ] || [ "$1" != set-hostname ] || [ -z "$2" ]; then
  echo "hostnamectl $*: the emulated node has set-hostname NAME only" >&2
  exit 1
fi
mkdir -p "$NODE_ROOT/etc"
echo "$2" >"$NODE_ROOT/etc/hostname"
"#;

impl Node {
    /// Writes every file of `config` (sealed Ignition JSON) below a new root, with its mode, and
    /// the real AWS CLI at [`AWS_WRAPPER`]; its scripts will call AWS at `aws_endpoint` (moto).
    pub fn boot(config: &[u8], aws_endpoint: &str) -> Result<Node, Error> {
        use std::os::unix::fs::PermissionsExt as _;
        let parsed = ignition::parse(config)?;
        let dir = tempfile::Builder::new().prefix("node-").tempdir().map_err(io_err("creating the node's root"))?;
        let node = Node { dir, aws_endpoint: aws_endpoint.to_owned() };
        for (path, bytes) in &parsed.files {
            let target = node.path(path);
            if let Some(parent) = target.parent() {
                std::fs::create_dir_all(parent).map_err(io_err(format!("creating {}", parent.display())))?;
            }
            if path == AWS_WRAPPER {
                std::os::unix::fs::symlink(motoenv::aws_cli(), &target).map_err(io_err("linking the AWS CLI"))?;
                continue;
            }
            std::fs::write(&target, bytes).map_err(io_err(format!("writing {path}")))?;
            let mode = parsed.modes.get(path).copied().unwrap_or(0o644);
            std::fs::set_permissions(&target, std::fs::Permissions::from_mode(mode))
                .map_err(io_err(format!("chmod {path}")))?;
        }
        let bin = node.harness_dir().join("bin");
        std::fs::create_dir_all(&bin).map_err(io_err("creating the emulated node's tools"))?;
        for (name, text) in [("networkctl", NETWORKCTL), ("ip", IP), ("hostnamectl", HOSTNAMECTL)] {
            std::fs::write(bin.join(name), text).map_err(io_err(format!("writing {name}")))?;
            std::fs::set_permissions(bin.join(name), std::fs::Permissions::from_mode(0o755))
                .map_err(io_err(format!("chmod {name}")))?;
        }
        std::fs::write(node.harness_dir().join("leases"), "").map_err(io_err("writing the leases"))?;
        Ok(node)
    }

    /// The root.
    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    /// Where the node's `path` is on this machine.
    pub fn path(&self, path: &str) -> PathBuf {
        self.dir.path().join(path.trim_start_matches('/'))
    }

    /// What the emulation keeps beside the node's files (its tools, leases and addresses), and
    /// where a test may keep its own (a script's log).
    pub fn harness_dir(&self) -> PathBuf {
        self.dir.path().join(".harness")
    }

    /// The VPC's DHCP answer for the interface with `mac`: `address`.
    pub fn dhcp_lease(&self, mac: &str, address: &str) -> Result<(), Error> {
        let mut leases = std::fs::OpenOptions::new()
            .append(true)
            .open(self.harness_dir().join("leases"))
            .map_err(io_err("opening the leases"))?;
        writeln!(leases, "{mac} {address}").map_err(io_err("writing the leases"))
    }

    /// An empty disk of `mib` MiB at the node's `device` path, as the hypervisor shows an
    /// attached volume.
    pub fn disk(&self, device: &str, mib: u64) -> Result<PathBuf, Error> {
        let path = self.path(device);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(io_err(format!("creating {}", parent.display())))?;
        }
        let file = std::fs::File::create(&path).map_err(io_err(format!("creating {device}")))?;
        file.set_len(mib << 20).map_err(io_err(format!("sizing {device}")))?;
        Ok(path)
    }

    /// The config's script at `path`, to run as its unit would on this node: `NODE_ROOT` at the
    /// root, the metadata service at `metadata`, AWS at the node's endpoint, no credentials but
    /// the instance role's (no environment keys, no config or credentials files).
    pub fn script(&self, path: &str, metadata: &MetadataService) -> Result<Command, Error> {
        let script = self.path(path);
        if !script.is_file() {
            return Err(Error::NoSuchFile { path: path.to_owned() });
        }
        let mut command = Command::new(script);
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with("AWS_") {
                command.env_remove(key);
            }
        }
        let path_var = std::env::var("PATH").unwrap_or_default();
        command
            .current_dir(self.root())
            .env("NODE_ROOT", self.root())
            .env("HARNESS_DIR", self.harness_dir())
            // The node's sbin directories too: blkid and mkfs.ext4 are there.
            .env("PATH", format!("{}:{path_var}:/usr/sbin:/sbin", self.harness_dir().join("bin").display()))
            .env("HOME", self.harness_dir())
            .env("AWS_CONFIG_FILE", self.harness_dir().join("no-aws-config"))
            .env("AWS_SHARED_CREDENTIALS_FILE", self.harness_dir().join("no-aws-credentials"))
            .env("AWS_EC2_METADATA_SERVICE_ENDPOINT", metadata.endpoint())
            .env("AWS_ENDPOINT_URL", &self.aws_endpoint);
        Ok(command)
    }
}

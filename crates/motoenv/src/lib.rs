//! Starts moto, the AWS emulator, on loopback for tests, benchmarks and the demo.
//!
//! [`MotoServer::start`] runs `tools/moto/server.py` (moto with the corrections that test
//! fidelity needs: termination protection, cross-account VPC peering in templates, bucket
//! policies without condition evaluation — see that file) on an ephemeral port of 127.0.0.1
//! and waits until it answers. The server lives as long as the [`MotoServer`] value: `Drop`
//! kills it, and because the server watches its stdin (a pipe this process holds) it also exits
//! when the test process dies without running destructors.
//!
//! One server per test is cheap (about half a second to start, 50 MB idle). Within one server,
//! tests isolate themselves by AWS account rather than by resets, which wipe every account:
//! [`fresh_account_id`] hands out account ids that no other draw of this or any concurrently
//! running process returns, to be sent as moto's `x-moto-account-id` header or used in an
//! `sts:AssumeRole` ARN.
//!
//! ```no_run
//! let moto = motoenv::MotoServer::start()?;
//! let endpoint = moto.endpoint(); // "http://127.0.0.1:PORT", for the SDK's endpoint_url
//! let tenant = motoenv::fresh_account_id();
//! # let _ = (endpoint, tenant);
//! # Ok::<(), motoenv::Error>(())
//! ```
//!
//! The API is synchronous. `start` blocks for about a second (the Python interpreter importing
//! moto); async tests may call it directly or through `tokio::task::spawn_blocking`.
//!
//! The interpreter is `$MOTO_PYTHON` if set, else the workspace's `.venv/bin/python`, which
//! `make venv` creates with the pinned moto.
#![forbid(unsafe_code)]

use std::ffi::OsString;
use std::fs;
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How long [`MotoServer::start`] waits for the server to answer. The first start on a cold,
/// loaded machine imports moto from disk; half a second is typical, a minute is generous.
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(60);

/// The account moto uses when a request names none. [`fresh_account_id`] never returns it, so a
/// test that forgets to select its account does not silently share state with another.
pub const MOTO_DEFAULT_ACCOUNT_ID: &str = "123456789012";

/// The environment variable that overrides the Python interpreter.
pub const PYTHON_ENV: &str = "MOTO_PYTHON";

/// How long one HTTP exchange with the server may take.
const HTTP_TIMEOUT: Duration = Duration::from_secs(10);

/// Everything that can go wrong starting or talking to the server.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No Python interpreter at the expected place.
    #[error("no Python interpreter at {path}: run `make venv` (installs moto into .venv) or set {PYTHON_ENV}")]
    PythonNotFound {
        /// Where the interpreter was looked for.
        path: PathBuf,
    },
    /// The launcher script is missing from the workspace.
    #[error("the moto launcher {path} does not exist")]
    ScriptNotFound {
        /// Where the script was looked for.
        path: PathBuf,
    },
    /// The server process could not be spawned.
    #[error("spawning {python}: {source}")]
    Spawn {
        /// The interpreter that was run.
        python: PathBuf,
        /// The operating-system error.
        source: io::Error,
    },
    /// The server exited before it answered.
    #[error("the moto server exited with {status} before serving; its log ends with:\n{log_tail}")]
    Exited {
        /// Its exit status.
        status: ExitStatus,
        /// The last lines the server wrote to stdout and stderr.
        log_tail: String,
    },
    /// The server did not answer within the start-up timeout.
    #[error("the moto server did not answer within {waited:?}; its log ends with:\n{log_tail}")]
    Timeout {
        /// How long start-up waited.
        waited: Duration,
        /// The last lines the server wrote to stdout and stderr.
        log_tail: String,
    },
    /// A request to the server's `/moto-api/` failed or got a non-200 answer.
    #[error("{request} {path}: {reason}")]
    Http {
        /// The HTTP method.
        request: &'static str,
        /// The request path.
        path: &'static str,
        /// What went wrong.
        reason: String,
    },
    /// [`Launcher::time_scale`] was given a factor the server cannot use.
    #[error(
        "time scale {scale} is not a positive, finite number: use e.g. 1.0 (AWS timing) or 0.01 (a hundred times faster)"
    )]
    InvalidTimeScale {
        /// The factor given.
        scale: f64,
    },
    /// Local file-system trouble (the temporary directory for the port file and log).
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: &'static str,
        /// The operating-system error.
        source: io::Error,
    },
}

/// The workspace root, found at run time: the nearest directory holding `tools/moto/server.py`
/// above the running package's manifest directory (cargo and nextest set `CARGO_MANIFEST_DIR` for
/// the processes they start) or the current directory. The path this crate was compiled from is
/// the last resort only: a build cache shared by two checkouts would otherwise start the other
/// checkout's server.
pub fn workspace_root() -> PathBuf {
    let compiled = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let starts = [std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from), std::env::current_dir().ok()];
    find_workspace_root(starts.into_iter().flatten(), &compiled)
}

/// The first ancestor of any of `starts` (in order) that holds `tools/moto/server.py`; else two
/// levels above `compiled`.
fn find_workspace_root(starts: impl IntoIterator<Item = PathBuf>, compiled: &Path) -> PathBuf {
    starts
        .into_iter()
        .find_map(|start| {
            start.ancestors().find(|dir| dir.join("tools/moto/server.py").is_file()).map(Path::to_path_buf)
        })
        .unwrap_or_else(|| compiled.join("../.."))
}

/// The interpreter to use: `MOTO_PYTHON` when set and non-empty, else `<workspace>/.venv/bin/python`.
fn resolve_python(from_env: Option<OsString>, workspace: &Path) -> PathBuf {
    match from_env {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => workspace.join(".venv/bin/python"),
    }
}

/// The AWS CLI beside the interpreter (`make venv` installs it with moto): for tests that run
/// scripts calling `aws` against the server.
pub fn aws_cli() -> PathBuf {
    Launcher::from_env().python().with_file_name("aws")
}

/// How to start a server: which interpreter, which launcher script, how long to wait.
///
/// [`MotoServer::start`] is `Launcher::from_env().start()`; build one by hand to use another
/// interpreter or a shorter timeout.
#[derive(Debug, Clone)]
pub struct Launcher {
    python: PathBuf,
    script: PathBuf,
    startup_timeout: Duration,
    time_scale: Option<f64>,
    group_deletion_hooks: Option<bool>,
}

impl Launcher {
    /// The interpreter from `$MOTO_PYTHON` or the workspace `.venv`, the workspace's
    /// `tools/moto/server.py`, and [`DEFAULT_STARTUP_TIMEOUT`].
    pub fn from_env() -> Launcher {
        let workspace = workspace_root();
        Launcher::new(resolve_python(std::env::var_os(PYTHON_ENV), &workspace), workspace.join("tools/moto/server.py"))
    }

    /// A launcher running `script` with `python`.
    pub fn new(python: impl Into<PathBuf>, script: impl Into<PathBuf>) -> Launcher {
        Launcher {
            python: python.into(),
            script: script.into(),
            startup_timeout: DEFAULT_STARTUP_TIMEOUT,
            time_scale: None,
            group_deletion_hooks: None,
        }
    }

    /// Scales the server's emulated waits (`--time-scale`): Auto Scaling lifecycle hooks'
    /// heartbeat timeouts and rolling updates' pauses last `scale` times what AWS waits, so at
    /// 0.01 a 3600 s drain hook times out after 36 s. Unset, the server takes `$MOTO_TIME_SCALE`
    /// or AWS's timing (1.0). `scale` must be positive and finite; [`Launcher::start`] refuses
    /// anything else with [`Error::InvalidTimeScale`].
    pub fn time_scale(mut self, scale: f64) -> Launcher {
        self.time_scale = Some(scale);
        self
    }

    /// Whether a stack delete drains its Auto Scaling groups through their terminating
    /// lifecycle hooks, as CloudFormation does (`--group-deletion-hooks`). Unset, the server
    /// takes `$MOTO_GROUP_DELETION_HOOKS` or its default, off (instances go at once).
    pub fn group_deletion_hooks(mut self, on: bool) -> Launcher {
        self.group_deletion_hooks = Some(on);
        self
    }

    /// Waits at most `timeout` for the server to answer.
    pub fn startup_timeout(mut self, timeout: Duration) -> Launcher {
        self.startup_timeout = timeout;
        self
    }

    /// The interpreter this launcher runs.
    pub fn python(&self) -> &Path {
        &self.python
    }

    /// Spawns the server, waits until `GET /moto-api/` answers 200, and gives every account
    /// [`FLEET_NETWORK_QUOTAS`].
    pub fn start(&self) -> Result<MotoServer, Error> {
        if !self.python.is_file() {
            return Err(Error::PythonNotFound { path: self.python.clone() });
        }
        if !self.script.is_file() {
            return Err(Error::ScriptNotFound { path: self.script.clone() });
        }
        if let Some(scale) = self.time_scale
            && !(scale.is_finite() && scale > 0.0)
        {
            return Err(Error::InvalidTimeScale { scale });
        }
        let dir = tempfile::Builder::new()
            .prefix("motoenv-")
            .tempdir()
            .map_err(|source| Error::Io { context: "creating the server's temporary directory", source })?;
        let port_file = dir.path().join("port");
        let log_file = dir.path().join("server.log");
        let log =
            fs::File::create(&log_file).map_err(|source| Error::Io { context: "creating the server log", source })?;
        let log_err = log.try_clone().map_err(|source| Error::Io { context: "duplicating the server log", source })?;

        let mut child = Command::new(&self.python)
            .arg(&self.script)
            .args(["--host", "127.0.0.1", "--port", "0", "--port-file"])
            .arg(&port_file)
            .args(self.emulation_args())
            // moto prefers this variable over the per-request account header, which would put
            // every test into one account.
            .env_remove("MOTO_ACCOUNT_ID")
            .stdin(Stdio::piped())
            // A file, not a pipe: a pipe nobody drains would eventually block the server.
            .stdout(log)
            .stderr(log_err)
            .spawn()
            .map_err(|source| Error::Spawn { python: self.python.clone(), source })?;
        let stdin = child.stdin.take();
        // From here on `server` owns the process: an early return kills it in `Drop`.
        let mut server = MotoServer { child, stdin, port: 0, dir, log_file };

        let deadline = Instant::now() + self.startup_timeout;
        loop {
            if let Some(status) =
                server.child.try_wait().map_err(|source| Error::Io { context: "polling the server process", source })?
            {
                return Err(Error::Exited { status, log_tail: server.log_tail() });
            }
            if server.port == 0 {
                server.port = read_port(&port_file).unwrap_or(0);
            }
            if server.port != 0 && http(server.port, "GET", "/moto-api/").is_ok() {
                server.set_account_limits(ALL_ACCOUNTS, &FLEET_NETWORK_QUOTAS)?;
                return Ok(server);
            }
            if Instant::now() >= deadline {
                return Err(Error::Timeout { waited: self.startup_timeout, log_tail: server.log_tail() });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// The `account_limits` entry of the emulation that holds for every account without limits of
/// its own ([`MotoServer::set_account_limits`]).
pub const ALL_ACCOUNTS: &str = "*";

/// The network quotas every account of a started server has ([`ALL_ACCOUNTS`]), as a fleet's
/// accounts have them raised: VPCs per region (`L-F678F1CE`), Elastic IPs
/// (`vpc-max-elastic-ips`) and NAT gateways per zone (`L-FE5A380F`). AWS's defaults of 5, with
/// moto's default VPC counting as one, would hold four clusters per account and region;
/// `set_account_limits(ALL_ACCOUNTS, &[])` brings them back.
pub const FLEET_NETWORK_QUOTAS: [(&str, u64); 3] =
    [("L-F678F1CE", 1000), ("vpc-max-elastic-ips", 1000), ("L-FE5A380F", 1000)];

impl Launcher {
    /// The server flags for the emulation settings this launcher sets.
    fn emulation_args(&self) -> Vec<String> {
        let mut args = Vec::new();
        if let Some(scale) = self.time_scale {
            args.extend(["--time-scale".to_owned(), scale.to_string()]);
        }
        if let Some(on) = self.group_deletion_hooks {
            args.extend(["--group-deletion-hooks".to_owned(), on.to_string()]);
        }
        args
    }
}

/// The port from the launcher's port file, once it has been written (the launcher renames it
/// into place, so a present file is complete).
fn read_port(path: &Path) -> Option<u16> {
    fs::read_to_string(path).ok()?.trim().parse().ok().filter(|p| *p != 0)
}

/// One HTTP/1.1 request without a body to the server; `Ok` only for status 200.
///
/// moto's dev server closes every connection after one response, so reading to EOF is the whole
/// protocol; a client library would add nothing here.
fn http(port: u16, method: &'static str, path: &'static str) -> Result<Vec<u8>, Error> {
    http_with(port, method, path, "")
}

/// [`http`] with a JSON `body`.
fn http_with(port: u16, method: &'static str, path: &'static str, body: &str) -> Result<Vec<u8>, Error> {
    let fail = |reason: String| Error::Http { request: method, path, reason };
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let mut stream = TcpStream::connect_timeout(&addr, HTTP_TIMEOUT).map_err(|e| fail(e.to_string()))?;
    stream.set_read_timeout(Some(HTTP_TIMEOUT)).map_err(|e| fail(e.to_string()))?;
    stream.set_write_timeout(Some(HTTP_TIMEOUT)).map_err(|e| fail(e.to_string()))?;
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).map_err(|e| fail(e.to_string()))?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).map_err(|e| fail(e.to_string()))?;
    let status_line = response.split(|b| *b == b'\n').next().unwrap_or_default();
    let status_line = String::from_utf8_lossy(status_line);
    match status_line.split_whitespace().nth(1) {
        Some("200") => {
            // `Connection: close` and a `Content-Length`: the body is what follows the headers.
            let start = response.windows(4).position(|w| w == b"\r\n\r\n").map_or(response.len(), |i| i + 4);
            Ok(response.split_off(start))
        }
        Some(code) => Err(fail(format!("status {code}"))),
        None => Err(fail(format!("malformed status line {:?}", status_line.trim()))),
    }
}

/// One AWS request as the server received it (see [`MotoServer::request_log`]).
#[derive(Clone, Debug, PartialEq, serde::Deserialize)]
pub struct LoggedRequest {
    /// Arrival, in seconds since the Unix epoch (the machine's clock, shared with the tests).
    pub time: f64,
    /// The access key id that signed the request.
    pub key: String,
    /// The long-term access key behind `key`: keys issued by `sts:AssumeRole` are traced back
    /// to the key that assumed the role, so one operator's calls in every account share it.
    pub principal: String,
    /// The service of the signature's credential scope (`ec2`, `cloudformation`, `s3`, …).
    pub service: String,
    /// The operation (`CreateStack`, `CreateKey`, …); for REST services such as S3, the HTTP
    /// method.
    pub action: String,
    /// The HTTP method.
    pub method: String,
    /// For a key issued by `sts:AssumeRole`, the account of the role it was issued for; empty
    /// for long-term keys.
    #[serde(default)]
    pub account: String,
    /// Whether the server refused the request with a throttling error ([`MotoServer::throttle`]).
    #[serde(default)]
    pub throttled: bool,
    /// The `InstanceId` parameter of a query-protocol request (Auto Scaling's
    /// `CompleteLifecycleAction`, say); empty when it has none.
    #[serde(default)]
    pub instance: String,
    /// The HTTP status of the answer; 0 while it is being answered.
    #[serde(default)]
    pub status: u16,
}

impl LoggedRequest {
    /// Whether the request may change something: anything but reads (`Describe*`, `Get*`,
    /// `List*`, S3 `GET`/`HEAD`) and the STS calls that only hand out identities.
    pub fn is_write(&self) -> bool {
        let reads = ["Describe", "Get", "List", "Head", "GET", "HEAD"];
        let sts = ["AssumeRole", "GetCallerIdentity"];
        !(reads.iter().any(|r| self.action.starts_with(r)) || sts.contains(&self.action.as_str()))
    }
}

/// The emulation settings of a running server (see [`Launcher::time_scale`] and
/// [`Launcher::group_deletion_hooks`]).
#[derive(Clone, Debug, PartialEq, serde::Deserialize)]
pub struct Emulation {
    /// The factor applied to emulated waits (1.0 is AWS's timing).
    pub time_scale: f64,
    /// Whether a stack delete drains its Auto Scaling groups through their terminating hooks.
    pub group_deletion_hooks: bool,
    /// The share of AWS requests refused with the service's throttling error (0 to 1).
    #[serde(default)]
    pub throttle_share: f64,
}

/// A running moto server on 127.0.0.1, killed when dropped.
#[derive(Debug)]
pub struct MotoServer {
    child: Child,
    /// Held open so the server sees EOF, and exits, when this process goes away.
    stdin: Option<ChildStdin>,
    port: u16,
    /// Port file and log; removed after the process is gone (fields drop after `Drop::drop`).
    dir: tempfile::TempDir,
    log_file: PathBuf,
}

impl MotoServer {
    /// Starts a server with [`Launcher::from_env`] and waits until it answers.
    pub fn start() -> Result<MotoServer, Error> {
        Launcher::from_env().start()
    }

    /// The base URL for SDK clients: `http://127.0.0.1:PORT` (S3 clients need path-style
    /// addressing against it).
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The TCP port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The operating-system id of the server process.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Wipes every account and region (`POST /moto-api/reset`). Tests sharing a server should
    /// prefer fresh accounts: a reset also wipes what concurrent tests created.
    pub fn reset(&self) -> Result<(), Error> {
        http(self.port, "POST", "/moto-api/reset").map(drop)
    }

    /// Every AWS request the server received so far, oldest first (`GET /moto-api/request-log`,
    /// kept by `tools/moto/server.py`): who sent it, when, and which action it was.
    pub fn request_log(&self) -> Result<Vec<LoggedRequest>, Error> {
        const PATH: &str = "/moto-api/request-log";
        let body = http(self.port, "GET", PATH)?;
        serde_json::from_slice(&body).map_err(|e| Error::Http { request: "GET", path: PATH, reason: e.to_string() })
    }

    /// The server's emulation settings (`GET /moto-api/emulation`): the time scale and whether
    /// stack deletes drain their groups' terminating hooks.
    pub fn emulation(&self) -> Result<Emulation, Error> {
        const PATH: &str = "/moto-api/emulation";
        let body = http(self.port, "GET", PATH)?;
        serde_json::from_slice(&body).map_err(|e| Error::Http { request: "GET", path: PATH, reason: e.to_string() })
    }

    /// Refuses `share` (0 to 1) of the AWS requests from now on, picked at random, with each
    /// service's throttling error (`RequestLimitExceeded`, `SlowDown`, `ThrottlingException`,
    /// `Throttling`); 0 turns it off. Refused requests change nothing and are logged with
    /// [`LoggedRequest::throttled`].
    pub fn throttle(&self, share: f64) -> Result<Emulation, Error> {
        const PATH: &str = "/moto-api/emulation";
        let body = http_with(self.port, "POST", PATH, &format!("{{\"throttle_share\": {share}}}"))?;
        serde_json::from_slice(&body).map_err(|e| Error::Http { request: "POST", path: PATH, reason: e.to_string() })
    }

    /// Gives `account` (or every account without limits of its own, [`ALL_ACCOUNTS`]) the
    /// account limits `limits` in place of AWS's defaults, replacing any set before; an empty
    /// `limits` brings back the defaults (for an account, those of [`ALL_ACCOUNTS`]). Names as
    /// AWS answers them: `StackLimit`, `MaxNumberOfAutoScalingGroups`, ... of
    /// `DescribeAccountLimits`, `vpc-max-elastic-ips` of `DescribeAccountAttributes`, and the
    /// Service Quotas codes `L-F678F1CE` (VPCs per region) and `L-FE5A380F` (NAT gateways per
    /// zone). Limits are reported, not enforced.
    pub fn set_account_limits(&self, account: &str, limits: &[(&str, u64)]) -> Result<Emulation, Error> {
        const PATH: &str = "/moto-api/emulation";
        let named: serde_json::Map<String, serde_json::Value> =
            limits.iter().map(|(name, value)| ((*name).to_owned(), serde_json::Value::from(*value))).collect();
        let body = serde_json::json!({ "account_limits": { account: named } }).to_string();
        let body = http_with(self.port, "POST", PATH, &body)?;
        serde_json::from_slice(&body).map_err(|e| Error::Http { request: "POST", path: PATH, reason: e.to_string() })
    }

    /// The directory holding the server's log (`server.log`), for a failing test to inspect.
    pub fn log_dir(&self) -> &Path {
        self.dir.path()
    }

    /// The last lines of the server's output, for error messages.
    fn log_tail(&self) -> String {
        const LINES: usize = 20;
        let log = fs::read(&self.log_file).unwrap_or_default();
        let log = String::from_utf8_lossy(&log);
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(LINES)..].join("\n")
    }
}

impl Drop for MotoServer {
    fn drop(&mut self) {
        // Closing stdin alone would stop the server within half a second; killing makes the
        // stop immediate, and waiting reaps the process so no zombie outlives the value.
        drop(self.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Per-process draw counter for [`fresh_account_id`].
static DRAWS: AtomicU64 = AtomicU64::new(0);

/// Draws per process before [`fresh_account_id`] starts over (the low five digits).
const DRAWS_PER_CYCLE: u64 = 100_000;

/// A 12-digit AWS account id that no other call returns, in this process or in any process
/// running at the same time.
///
/// Layout: seven digits from the process id offset by 5,000,000 (Linux pids are at most
/// 4,194,304, so live processes never share them and the first digit is 5–9), then five digits
/// counting this process's draws from a starting point taken from the clock. The offset keeps
/// the result away from moto's default account `123456789012`; the clock start keeps a later
/// process that reuses a pid from repeating the ids its predecessor drew. A process repeats
/// itself only after 100,000 draws.
pub fn fresh_account_id() -> String {
    account_id_for(std::process::id(), clock_start(), DRAWS.fetch_add(1, Ordering::Relaxed))
}

/// The per-process starting point of the draw counter, from the clock, fixed at the first draw.
fn clock_start() -> u64 {
    static START: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *START.get_or_init(|| {
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
        u64::from(nanos / 1_000) % DRAWS_PER_CYCLE
    })
}

/// The pure part of [`fresh_account_id`].
fn account_id_for(pid: u32, start: u64, draw: u64) -> String {
    let pid_part = 5_000_000 + u64::from(pid) % 5_000_000;
    let draw_part = (start + draw) % DRAWS_PER_CYCLE;
    format!("{pid_part:07}{draw_part:05}")
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn python_comes_from_the_environment_or_the_workspace_venv() {
        let ws = Path::new("/ws");
        assert_eq!(resolve_python(Some("/opt/py".into()), ws), PathBuf::from("/opt/py"));
        assert_eq!(resolve_python(Some("".into()), ws), PathBuf::from("/ws/.venv/bin/python"));
        assert_eq!(resolve_python(None, ws), PathBuf::from("/ws/.venv/bin/python"));
    }

    #[test]
    fn the_workspace_is_the_running_checkout_not_the_one_compiled_from() {
        let tmp = std::env::temp_dir().join(format!("motoenv-root-{}", std::process::id()));
        let checkout = tmp.join("checkout");
        std::fs::create_dir_all(checkout.join("tools/moto")).unwrap();
        std::fs::create_dir_all(checkout.join("operators/aws-operator")).unwrap();
        std::fs::write(checkout.join("tools/moto/server.py"), "").unwrap();
        let compiled = Path::new("/elsewhere/crates/motoenv");
        let found = find_workspace_root([checkout.join("operators/aws-operator")], compiled);
        assert_eq!(found, checkout);
        let outside = tmp.join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        assert_eq!(find_workspace_root([outside, checkout.join("tools")], compiled), checkout);
        assert_eq!(find_workspace_root([tmp.join("outside")], compiled), compiled.join("../.."));
        std::fs::remove_dir_all(&tmp).unwrap();
    }

    #[test]
    fn account_ids_differ_between_processes_and_never_are_the_moto_default() {
        assert_ne!(account_id_for(1, 0, 0), account_id_for(2, 0, 0));
        assert_ne!(account_id_for(4_194_304, 99_999, 0), account_id_for(4_194_303, 99_999, 0));
        for pid in [0, 1, 1_234_567, 4_194_304] {
            for draw in [0, 89_012, 99_999] {
                let id = account_id_for(pid, 0, draw);
                assert_eq!(id.len(), 12, "{id}");
                assert!(id.bytes().all(|b| b.is_ascii_digit()), "{id}");
                assert!(id.starts_with(['5', '6', '7', '8', '9']), "{id}");
                assert_ne!(id, MOTO_DEFAULT_ACCOUNT_ID);
            }
        }
    }

    #[test]
    fn account_ids_wrap_within_the_process_part() {
        assert_eq!(account_id_for(42, 99_999, 1), "500004200000");
        assert_eq!(account_id_for(42, 0, 99_999), "500004299999");
    }
}

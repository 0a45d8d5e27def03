//! A master's rendered files and etcd unit, run with the real etcd binary and etcdctl under a
//! temporary root.
//!
//! What is remapped, and nothing else: every absolute path in etcd's flags goes under the root;
//! ports 2379 and 2380 become free ephemeral ports (so that tests run side by side); `0.0.0.0`
//! becomes `127.0.0.1` (tests listen on loopback only); the variables of the unit's
//! `EnvironmentFile=` are filled in as systemd does, from the file the test writes where a booted
//! node's attach script would.

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A booted master as etcd sees it: its files (the secrets decrypted) and its units.
pub struct Node {
    /// Every file by absolute path.
    pub files: BTreeMap<String, Vec<u8>>,
    /// The etcd unit's contents.
    pub etcd_unit: String,
    /// The API server's static pod manifest.
    pub apiserver_manifest: String,
    /// The values the unit's `EnvironmentFile=` holds on a booted node.
    pub environment: Vec<(&'static str, &'static str)>,
}

/// The words of the unit's `ExecStart=` after the etcd image's `etcd` command, and its
/// `EnvironmentFile=`.
pub fn etcd_command(unit: &str) -> (Vec<String>, Option<String>) {
    let joined = unit.replace("\\\n", " ");
    let exec = joined.lines().find_map(|l| l.strip_prefix("ExecStart=")).expect("the etcd unit has ExecStart=");
    let words: Vec<&str> = exec.split_whitespace().collect();
    // `<registry>/giantswarm/etcd:<version> etcd`: the image, then its command.
    let image = words
        .windows(2)
        .position(|w| !w[0].starts_with('/') && w[0].contains("/etcd:") && w[1] == "etcd")
        .unwrap_or_else(|| panic!("ExecStart runs no etcd image with the command etcd: {exec}"));
    let args = words[image + 2..].iter().map(|w| w.to_string()).collect();
    let environment_file = joined.lines().find_map(|l| l.strip_prefix("EnvironmentFile=")).map(str::to_string);
    (args, environment_file)
}

/// The value of `--<flag>=` among the API server's arguments in its manifest.
pub fn apiserver_flag(manifest: &str, flag: &str) -> String {
    let prefix = format!("- --{flag}=");
    manifest
        .lines()
        .find_map(|l| l.trim().strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("the API server has no --{flag}:\n{manifest}"))
        .to_string()
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port()
}

/// Ports and hosts of the node as the test runs it.
pub struct Remap {
    pub root: PathBuf,
    pub client_port: u16,
    pub peer_port: u16,
}

impl Remap {
    /// `path` under the root.
    pub fn path(&self, path: &str) -> PathBuf {
        assert!(path.starts_with('/'), "{path} is not absolute");
        self.root.join(&path[1..])
    }

    /// One flag value: an absolute path goes under the root; each URL gets the test's ports and
    /// loopback for the wildcard address.
    fn value(&self, value: &str) -> String {
        if value.starts_with('/') {
            return self.path(value).display().to_string();
        }
        value
            .split(',')
            .map(|part| {
                let mut part = part.replace("://0.0.0.0:", "://127.0.0.1:");
                for (from, to) in [(2379, self.client_port), (2380, self.peer_port)] {
                    if let Some(stripped) = part.strip_suffix(&format!(":{from}")) {
                        part = format!("{stripped}:{to}");
                    }
                }
                part
            })
            .collect::<Vec<_>>()
            .join(",")
    }

    /// An endpoint URL of the API server's `--etcd-servers` as the test reaches it: a host name
    /// only the cluster's DNS knows becomes loopback (the certificate's `127.0.0.1` name).
    pub fn endpoint(&self, url: &str) -> String {
        let remapped = self.value(url);
        let (scheme, rest) = remapped.split_once("://").expect("URL");
        let port = rest.rsplit_once(':').map(|(_, p)| p).expect("port");
        format!("{scheme}://127.0.0.1:{port}")
    }
}

/// Substitute `${NAME}` from `environment`.
fn expand(word: &str, environment: &BTreeMap<String, String>) -> String {
    let mut out = word.to_string();
    for (name, value) in environment {
        out = out.replace(&format!("${{{name}}}"), value);
    }
    assert!(!out.contains("${"), "{word} names a variable its EnvironmentFile does not set");
    out
}

/// etcd, stopped when dropped.
pub struct Etcd {
    child: Child,
    pub remap: Remap,
    pub log: PathBuf,
    pub args: Vec<String>,
    pub started: Instant,
    _root: tempfile::TempDir,
}

impl Drop for Etcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Etcd {
    /// Write the node's files under a new root and start `/usr/bin/etcd` with the unit's flags.
    pub fn start(node: &Node) -> Etcd {
        let root = tempfile::tempdir().expect("tempdir");
        let remap = Remap { root: root.path().to_path_buf(), client_port: free_port(), peer_port: free_port() };
        for (path, contents) in &node.files {
            let target = remap.path(path);
            std::fs::create_dir_all(target.parent().expect("parent")).expect("mkdir");
            std::fs::write(&target, contents).expect("write file");
            std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        }
        let (words, environment_file) = etcd_command(&node.etcd_unit);
        let mut environment = BTreeMap::new();
        if let Some(file) = environment_file {
            let target = remap.path(&file);
            std::fs::create_dir_all(target.parent().expect("parent")).expect("mkdir");
            let text: String = node.environment.iter().map(|(k, v)| format!("{k}={v}\n")).collect();
            std::fs::write(&target, text).expect("write environment file");
            for line in std::fs::read_to_string(&target).expect("read environment file").lines() {
                let (k, v) = line.split_once('=').expect("KEY=VALUE");
                environment.insert(k.to_string(), v.to_string());
            }
        }
        let args: Vec<String> = words
            .iter()
            .map(|word| {
                let word = expand(word, &environment);
                match word.split_once('=') {
                    Some((flag, value)) if flag.starts_with("--") => format!("{flag}={}", remap.value(value)),
                    _ => panic!("etcd argument {word:?} is not --flag=value"),
                }
            })
            .collect();
        let data_dir = args.iter().find_map(|a| a.strip_prefix("--data-dir=")).expect("--data-dir");
        std::fs::create_dir_all(Path::new(data_dir).parent().expect("parent")).expect("mkdir data parent");
        let log = remap.root.join("etcd.log");
        let out = std::fs::File::create(&log).expect("log");
        let started = Instant::now();
        let child = Command::new("/usr/bin/etcd")
            .args(&args)
            .stdout(Stdio::from(out.try_clone().expect("log")))
            .stderr(Stdio::from(out))
            .spawn()
            .expect("start /usr/bin/etcd (Debian etcd-server)");
        Etcd { child, remap, log, args, started, _root: root }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// `etcdctl` against `endpoint` with the client certificate files at these node paths.
    pub fn etcdctl(&self, endpoint: &str, tls: [&str; 3], args: &[&str]) -> Output {
        let [ca, crt, key] = tls.map(|p| self.remap.path(p).display().to_string());
        Command::new("etcdctl")
            .env("ETCDCTL_API", "3")
            .args(["--endpoints", endpoint, "--cacert", &ca, "--cert", &crt, "--key", &key])
            .args(["--dial-timeout=2s", "--command-timeout=3s"])
            .args(args)
            .output()
            .expect("run etcdctl (Debian etcd-client)")
    }

    /// Put `key`=`value` until etcd answers (at most 30 s); the time from start to the write.
    pub fn put_when_ready(&mut self, endpoint: &str, tls: [&str; 3], key: &str, value: &str) -> Duration {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let out = self.etcdctl(endpoint, tls, &["put", key, value]);
            if out.status.success() {
                return self.started.elapsed();
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("etcd exited with {status}; flags {:?}\n{}", self.args, self.log_text());
            }
            assert!(
                Instant::now() < deadline,
                "no write within 30 s: {}\nflags {:?}\n{}",
                String::from_utf8_lossy(&out.stderr),
                self.args,
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

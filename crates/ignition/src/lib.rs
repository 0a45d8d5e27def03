//! Ignition 3.3 node configs, shared by both operators: the document model ([`Config`], [`File`],
//! [`Unit`], [`Dropin`], [`Filesystem`]), its JSON, and the encodings a config travels in.
//!
//! Each operator decides *what* a node runs (aws-operator in `aws-stacks`, kvm-operator in
//! `kvm-objects`); this crate is the one place that decides *how* that is written down, so a
//! file, a unit or a drop-in looks the same in both and is checked the same way. The Kubernetes
//! components themselves (kubelet, kube-proxy, etcd and the control-plane static pods) are the
//! same on both providers too, and live in [`kubernetes`], with the provider's differences as
//! inputs.
//!
//! Rendering is deterministic: the same [`Config`] always gives the same bytes, and
//! [`gzip_base64`] writes a fixed gzip header (no timestamp, no file name), so an operator that
//! stores a config can compare bytes and skip writes when nothing changed.
//!
//! ```
//! use ignition::{Config, File, Unit, gzip_base64, gunzip_base64};
//!
//! let config = Config {
//!     files: vec![File::text("/etc/motd", "hello\n")],
//!     units: vec![Unit::enabled("iscsid.service"), Unit::new("motd.service", "[Service]\nType=oneshot\n")],
//!     ..Config::default()
//! };
//! let json = config.to_json();
//! assert!(json.starts_with(r#"{"ignition":{"version":"3.3.0"}"#));
//! let stored = gzip_base64(json.as_bytes());
//! assert_eq!(stored, gzip_base64(json.as_bytes()), "same input, same bytes");
//! assert_eq!(gunzip_base64(&stored).unwrap(), json.as_bytes());
//! let parsed = ignition::parse(json.as_bytes()).unwrap();
//! assert_eq!(parsed.file("/etc/motd"), Some(&b"hello\n"[..]));
//! ```
#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::fmt;
use std::io::{Read as _, Write as _};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Value, json};

pub mod access;
pub mod extras;
pub mod kubernetes;

/// The Ignition specification version Flatcar reads.
pub const IGNITION_VERSION: &str = "3.3.0";

/// The prefix of a file's `contents.source`: an RFC 2397 data URL with base64 content, which
/// carries any bytes.
pub const DATA_URL_PREFIX: &str = "data:;base64,";

/// Why a config cannot be built or read back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IgnitionError {
    /// A path is not absolute or has characters outside `[A-Za-z0-9._/-]` (paths end up in shell
    /// scripts and in systemd units, which must not need quoting).
    #[error("node-config path {path:?} must be absolute and use only A-Z a-z 0-9 . _ / -")]
    InvalidPath {
        /// The offending path.
        path: String,
    },
    /// Two files would have the same path; Ignition refuses such a config at boot.
    #[error("node-config path {path:?} is used twice")]
    DuplicatePath {
        /// The path used twice.
        path: String,
    },
    /// Stored config bytes are not what [`gzip_base64`] or [`Config::to_json`] write.
    #[error("node config cannot be decoded: {reason}")]
    Decode {
        /// What is wrong with the bytes.
        reason: String,
    },
}

/// A file the node writes at first boot, owned by root.
#[derive(Clone, PartialEq, Eq)]
pub struct File {
    /// The absolute path on the node.
    pub path: String,
    /// The file mode, e.g. `0o644`.
    pub mode: u32,
    /// The content, any bytes. Never printed: files may hold keys.
    pub contents: Vec<u8>,
}

impl fmt::Debug for File {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("File")
            .field("path", &self.path)
            .field("mode", &format_args!("{:o}", self.mode))
            .field("bytes", &self.contents.len())
            .finish()
    }
}

impl File {
    /// A file with any content and mode.
    pub fn new(path: impl Into<String>, mode: u32, contents: impl Into<Vec<u8>>) -> Self {
        Self { path: path.into(), mode, contents: contents.into() }
    }

    /// A world-readable text file (`0644`).
    pub fn text(path: impl Into<String>, contents: &str) -> Self {
        Self::new(path, 0o644, contents.as_bytes())
    }

    /// An executable script (`0755`).
    pub fn script(path: impl Into<String>, contents: &str) -> Self {
        Self::new(path, 0o755, contents.as_bytes())
    }

    /// A file only root may read (`0600`): keys, certificates, tokens.
    pub fn private(path: impl Into<String>, contents: impl Into<Vec<u8>>) -> Self {
        Self::new(path, 0o600, contents)
    }

    /// The Ignition JSON of this file (overwriting whatever the image has at the path).
    pub fn to_value(&self) -> Value {
        json!({
            "path": self.path,
            "mode": self.mode,
            "overwrite": true,
            "contents": { "source": data_url(&self.contents) },
        })
    }
}

/// A systemd unit: its own contents, or only drop-ins for a unit the image ships, or only
/// `enabled` for such a unit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unit {
    /// The unit name, e.g. `kubelet.service`.
    pub name: String,
    /// Whether the unit is enabled at boot; `None` leaves it as the image has it.
    pub enabled: Option<bool>,
    /// The unit file; `None` keeps the image's unit.
    pub contents: Option<String>,
    /// Drop-ins, written to `<name>.d/<dropin>`.
    pub dropins: Vec<Dropin>,
}

impl Unit {
    /// An enabled unit with its contents.
    pub fn new(name: impl Into<String>, contents: impl Into<String>) -> Self {
        Self { name: name.into(), enabled: Some(true), contents: Some(contents.into()), dropins: Vec::new() }
    }

    /// Enable a unit the image ships, e.g. `iscsid.service`.
    pub fn enabled(name: impl Into<String>) -> Self {
        Self { name: name.into(), enabled: Some(true), contents: None, dropins: Vec::new() }
    }

    /// Add drop-ins to a unit the image ships, leaving whether it is enabled as it is.
    pub fn dropins(name: impl Into<String>, dropins: Vec<Dropin>) -> Self {
        Self { name: name.into(), enabled: None, contents: None, dropins }
    }

    /// The Ignition JSON of this unit.
    pub fn to_value(&self) -> Value {
        let mut unit = json!({ "name": self.name });
        if let Some(enabled) = self.enabled {
            unit["enabled"] = Value::Bool(enabled);
        }
        if let Some(contents) = &self.contents {
            unit["contents"] = Value::String(contents.clone());
        }
        if !self.dropins.is_empty() {
            unit["dropins"] = self.dropins.iter().map(|d| json!({ "name": d.name, "contents": d.contents })).collect();
        }
        unit
    }
}

/// A systemd mount unit's contents: both operators mount their nodes' data disks and shares
/// with units of this one shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mount<'a> {
    /// `Description=`.
    pub description: &'a str,
    /// `Requires=`; omitted when empty.
    pub requires: &'a [&'a str],
    /// `After=`; omitted when empty.
    pub after: &'a [&'a str],
    /// `Before=`; omitted when empty.
    pub before: &'a [&'a str],
    /// `What=`: the device or 9p tag.
    pub what: &'a str,
    /// `Where=`: the mount point; it also names the unit ([`mount_unit_name`]).
    pub path: &'a str,
    /// `Type=`: the filesystem type.
    pub fs_type: &'a str,
    /// `Options=`; omitted when `None`.
    pub options: Option<&'a str>,
    /// `WantedBy=` of the `[Install]` section.
    pub wanted_by: &'a str,
}

impl Mount<'_> {
    /// The unit file.
    pub fn contents(&self) -> String {
        let mut unit = format!("[Unit]\nDescription={}\n", self.description);
        for (key, units) in [("Requires", self.requires), ("After", self.after), ("Before", self.before)] {
            if !units.is_empty() {
                unit.push_str(&format!("{key}={}\n", units.join(" ")));
            }
        }
        unit.push_str(&format!("\n[Mount]\nWhat={}\nWhere={}\nType={}\n", self.what, self.path, self.fs_type));
        if let Some(options) = self.options {
            unit.push_str(&format!("Options={options}\n"));
        }
        unit.push_str(&format!("\n[Install]\nWantedBy={}\n", self.wanted_by));
        unit
    }

    /// The enabled unit, named after its mount point.
    pub fn unit(&self) -> Unit {
        Unit::new(mount_unit_name(self.path), self.contents())
    }
}

/// A systemd drop-in of a [`Unit`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dropin {
    /// The drop-in file name, e.g. `10-proxy.conf`.
    pub name: String,
    /// The drop-in contents.
    pub contents: String,
}

impl Dropin {
    /// A drop-in.
    pub fn new(name: impl Into<String>, contents: impl Into<String>) -> Self {
        Self { name: name.into(), contents: contents.into() }
    }
}

/// Join `dropin` to unit `name` of `units`: to the unit when the config has it already (a unit
/// named twice is invalid Ignition), else as a unit of drop-ins only.
pub fn add_dropin(units: &mut Vec<Unit>, name: &str, dropin: Dropin) {
    match units.iter_mut().find(|u| u.name == name) {
        Some(unit) => unit.dropins.push(dropin),
        None => units.push(Unit::dropins(name, vec![dropin])),
    }
}

/// A filesystem Ignition creates on a block device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filesystem {
    /// The block device, e.g. `/dev/xvdh`.
    pub device: String,
    /// The filesystem type, e.g. `xfs`.
    pub format: String,
    /// The filesystem label.
    pub label: String,
    /// Whether an existing filesystem on the device is wiped.
    pub wipe_filesystem: bool,
}

impl Filesystem {
    /// The Ignition JSON of this filesystem.
    pub fn to_value(&self) -> Value {
        json!({
            "device": self.device,
            "format": self.format,
            "label": self.label,
            "wipeFilesystem": self.wipe_filesystem,
        })
    }
}

/// A login user with SSH keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    /// The user name.
    pub name: String,
    /// Public keys allowed to log in as the user.
    pub ssh_authorized_keys: Vec<String>,
    /// Supplementary groups, e.g. `sudo`, `docker`.
    pub groups: Vec<String>,
}

impl User {
    /// The Ignition JSON of this user.
    pub fn to_value(&self) -> Value {
        let mut user = json!({ "name": self.name, "sshAuthorizedKeys": self.ssh_authorized_keys });
        if !self.groups.is_empty() {
            user["groups"] = json!(self.groups);
        }
        user
    }
}

/// An Ignition 3.3 config: files, filesystems, systemd units and users.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Config {
    /// Files, in the order they are written.
    pub files: Vec<File>,
    /// Filesystems to create; omitted from the JSON when empty.
    pub filesystems: Vec<Filesystem>,
    /// systemd units.
    pub units: Vec<Unit>,
    /// Login users; `passwd` is omitted from the JSON when empty.
    pub users: Vec<User>,
    /// Kernel arguments the node must boot with (`kernelArguments.shouldExist`: Ignition adds
    /// those missing and reboots once, before anything else runs); omitted when empty.
    pub kernel_arguments: Vec<String>,
}

impl Config {
    /// Check every file path ([`check_path`]) and that no path is used twice.
    pub fn validate(&self) -> Result<(), IgnitionError> {
        let mut seen = std::collections::BTreeSet::new();
        for file in &self.files {
            check_path(&file.path)?;
            if !seen.insert(file.path.as_str()) {
                return Err(IgnitionError::DuplicatePath { path: file.path.clone() });
            }
        }
        Ok(())
    }

    /// The Ignition document as a JSON value.
    pub fn to_value(&self) -> Value {
        let mut storage = json!({ "files": self.files.iter().map(File::to_value).collect::<Vec<_>>() });
        if !self.filesystems.is_empty() {
            storage["filesystems"] = self.filesystems.iter().map(Filesystem::to_value).collect();
        }
        let mut document = json!({
            "ignition": { "version": IGNITION_VERSION },
            "storage": storage,
            "systemd": { "units": self.units.iter().map(Unit::to_value).collect::<Vec<_>>() },
        });
        if !self.users.is_empty() {
            document["passwd"] = json!({ "users": self.users.iter().map(User::to_value).collect::<Vec<_>>() });
        }
        if !self.kernel_arguments.is_empty() {
            document["kernelArguments"] = json!({ "shouldExist": self.kernel_arguments });
        }
        document
    }

    /// The Ignition document as compact JSON with object keys sorted at every level, so the
    /// bytes do not depend on how `serde_json` orders maps in a given build.
    pub fn to_json(&self) -> String {
        canonical_json(&self.to_value())
    }
}

/// A file's content as an RFC 2397 base64 data URL.
pub fn data_url(content: &[u8]) -> String {
    format!("{DATA_URL_PREFIX}{}", BASE64.encode(content))
}

/// The bytes of a data URL written by [`data_url`].
pub fn decode_data_url(source: &str) -> Result<Vec<u8>, IgnitionError> {
    let encoded = source
        .strip_prefix(DATA_URL_PREFIX)
        .ok_or_else(|| IgnitionError::Decode { reason: format!("{source:.20}… is not a base64 data URL") })?;
    BASE64.decode(encoded).map_err(|e| IgnitionError::Decode { reason: format!("data URL: {e}") })
}

/// Check that a path is absolute and uses only `A-Z a-z 0-9 . _ / -`, so that it can go into a
/// shell script or a systemd unit unquoted.
pub fn check_path(path: &str) -> Result<(), IgnitionError> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '/' | '-');
    if path.starts_with('/') && path.len() > 1 && !path.ends_with('/') && path.chars().all(allowed) {
        Ok(())
    } else {
        Err(IgnitionError::InvalidPath { path: path.to_owned() })
    }
}

/// A path escaped as `systemd-escape --path` escapes it (systemd's `unit_name_path_escape`):
/// the path is simplified (duplicate and trailing `/` removed), the root becomes `-`, each `/`
/// becomes `-`, a leading `.` and every byte outside `[A-Za-z0-9:_.]` become `\xNN`
/// (`/data/t4wzk-data` → `data-t4wzk\x2ddata`).
pub fn systemd_escape_path(path: &str) -> String {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty() && *p != ".").collect();
    if parts.is_empty() {
        return "-".to_owned();
    }
    let joined = parts.join("/");
    let mut out = String::with_capacity(joined.len());
    for (i, byte) in joined.bytes().enumerate() {
        match byte {
            b'/' => out.push('-'),
            b'.' if i == 0 => out.push_str("\\x2e"),
            b if b.is_ascii_alphanumeric() || matches!(b, b':' | b'_' | b'.') => out.push(b as char),
            b => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    out
}

/// The systemd mount unit name of an absolute path, escaped by [`systemd_escape_path`]
/// (`/var/lib/docker` → `var-lib-docker.mount`, `/data/a-b` → `data-a\x2db.mount`): systemd
/// refuses a mount unit whose name does not match its `Where=`.
pub fn mount_unit_name(path: &str) -> String {
    format!("{}.mount", systemd_escape_path(path))
}

/// The systemd automount unit name of a path (`/var/lib/etcd` → `var-lib-etcd.automount`),
/// escaped like [`mount_unit_name`].
pub fn automount_unit_name(path: &str) -> String {
    format!("{}.automount", systemd_escape_path(path))
}

/// JSON with object keys sorted at every level: equal values give equal strings, whatever
/// order their maps were built in.
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (key, value)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(value, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// base64(gzip(`bytes`)), as node configs are stored in ConfigMaps. The gzip header has no
/// modification time, no file name and the "unknown" OS byte, and the compression level is
/// fixed, so equal input gives equal output on every machine and every run.
pub fn gzip_base64(bytes: &[u8]) -> String {
    let mut encoder = flate2::GzBuilder::new()
        .mtime(0)
        .operating_system(255)
        .write(Vec::with_capacity(bytes.len() / 3 + 64), flate2::Compression::new(9));
    // Writing into a Vec cannot fail.
    let compressed = encoder.write_all(bytes).and_then(|()| encoder.finish()).unwrap_or_default();
    BASE64.encode(compressed)
}

/// The bytes [`gzip_base64`] encoded.
pub fn gunzip_base64(encoded: &str) -> Result<Vec<u8>, IgnitionError> {
    let compressed =
        BASE64.decode(encoded.trim()).map_err(|e| IgnitionError::Decode { reason: format!("base64: {e}") })?;
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(compressed.as_slice())
        .read_to_end(&mut out)
        .map_err(|e| IgnitionError::Decode { reason: format!("gzip: {e}") })?;
    Ok(out)
}

/// A config read back from its JSON: what tests and `render --decode` look at.
#[derive(Clone, PartialEq, Eq)]
pub struct Parsed {
    /// The whole document.
    pub document: Value,
    /// Every file's decoded content by path.
    pub files: BTreeMap<String, Vec<u8>>,
    /// Every file's mode by path.
    pub modes: BTreeMap<String, u32>,
    /// Every unit by name, as its JSON.
    pub units: BTreeMap<String, Value>,
}

impl fmt::Debug for Parsed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Parsed")
            .field("files", &self.files.keys().collect::<Vec<_>>())
            .field("units", &self.units.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl Parsed {
    /// A file's content.
    pub fn file(&self, path: &str) -> Option<&[u8]> {
        self.files.get(path).map(Vec::as_slice)
    }

    /// A file's content as text (lossy).
    pub fn text(&self, path: &str) -> Option<String> {
        self.file(path).map(|b| String::from_utf8_lossy(b).into_owned())
    }

    /// A unit's contents.
    pub fn unit(&self, name: &str) -> Option<&str> {
        self.units.get(name).and_then(|u| u["contents"].as_str())
    }
}

/// Read an Ignition JSON document: its files (data URLs decoded) and units.
pub fn parse(json: &[u8]) -> Result<Parsed, IgnitionError> {
    let document: Value =
        serde_json::from_slice(json).map_err(|e| IgnitionError::Decode { reason: format!("JSON: {e}") })?;
    let mut files = BTreeMap::new();
    let mut modes = BTreeMap::new();
    for file in document.pointer("/storage/files").and_then(Value::as_array).into_iter().flatten() {
        let path = file["path"].as_str().unwrap_or_default().to_owned();
        let source = file["contents"]["source"].as_str().unwrap_or_default();
        files.insert(path.clone(), decode_data_url(source)?);
        modes.insert(path, file["mode"].as_u64().unwrap_or_default() as u32);
    }
    let units = document
        .pointer("/systemd/units")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|u| (u["name"].as_str().unwrap_or_default().to_owned(), u.clone()))
        .collect();
    Ok(Parsed { document, files, modes, units })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Config {
        Config {
            files: vec![
                File::text("/etc/iscsi/initiatorname.iscsi", "InitiatorName=iqn.example\n"),
                File::script("/opt/bin/hello", "#!/bin/sh\necho hi\n"),
                File::private("/etc/kubernetes/ssl/key.pem", b"\x00\xffkey".to_vec()),
            ],
            filesystems: vec![],
            users: vec![],
            kernel_arguments: vec![],
            units: vec![
                Unit::new("var-lib-docker.mount", "[Mount]\nWhat=/dev/vdb\n"),
                Unit::enabled("iscsid.service"),
                Unit::dropins("kubelet.service", vec![Dropin::new("10-proxy.conf", "[Service]\nEnvironment=A=b\n")]),
            ],
        }
    }

    #[test]
    fn files_units_and_dropins_have_the_ignition_shape() {
        let doc = sample().to_value();
        assert_eq!(doc["ignition"]["version"], "3.3.0");
        assert!(doc["storage"].get("filesystems").is_none(), "no filesystems key without filesystems");
        assert!(doc.get("passwd").is_none(), "no passwd key without users");
        assert!(doc.get("kernelArguments").is_none(), "no kernelArguments key without arguments");
        assert_eq!(doc["storage"]["files"][0]["mode"], 0o644);
        assert_eq!(doc["storage"]["files"][1]["mode"], 0o755);
        assert_eq!(doc["storage"]["files"][2]["mode"], 0o600);
        assert_eq!(doc["storage"]["files"][0]["overwrite"], true);
        assert_eq!(
            doc["systemd"]["units"][1],
            json!({"name": "iscsid.service", "enabled": true}),
            "enabling an image's unit writes no contents"
        );
        assert_eq!(
            doc["systemd"]["units"][2],
            json!({"name": "kubelet.service", "dropins": [{"name": "10-proxy.conf", "contents": "[Service]\nEnvironment=A=b\n"}]})
        );
        let with_fs = Config {
            filesystems: vec![Filesystem {
                device: "/dev/xvdh".into(),
                format: "xfs".into(),
                label: "docker".into(),
                wipe_filesystem: true,
            }],
            ..sample()
        };
        assert_eq!(
            with_fs.to_value()["storage"]["filesystems"],
            json!([{"device": "/dev/xvdh", "format": "xfs", "label": "docker", "wipeFilesystem": true}])
        );
    }

    #[test]
    fn mount_units_have_one_shape() {
        let mount = Mount {
            description: "etcd data",
            requires: &["attach.service"],
            after: &["attach.service"],
            before: &["etcd.service"],
            what: "etcdshare",
            path: "/var/lib/etcd",
            fs_type: "9p",
            options: Some("trans=virtio"),
            wanted_by: "local-fs.target",
        };
        assert_eq!(
            mount.contents(),
            "[Unit]\nDescription=etcd data\nRequires=attach.service\nAfter=attach.service\nBefore=etcd.service\n\n\
             [Mount]\nWhat=etcdshare\nWhere=/var/lib/etcd\nType=9p\nOptions=trans=virtio\n\n\
             [Install]\nWantedBy=local-fs.target\n"
        );
        assert_eq!(mount.unit().name, "var-lib-etcd.mount");
        let bare = Mount { requires: &[], after: &[], before: &[], options: None, ..mount };
        assert_eq!(
            bare.contents(),
            "[Unit]\nDescription=etcd data\n\n[Mount]\nWhat=etcdshare\nWhere=/var/lib/etcd\nType=9p\n\n\
             [Install]\nWantedBy=local-fs.target\n"
        );
    }

    #[test]
    fn kernel_arguments_are_ones_that_should_exist() {
        let config = Config { kernel_arguments: vec!["systemd.unified_cgroup_hierarchy=0".into()], ..sample() };
        assert_eq!(
            config.to_value()["kernelArguments"],
            json!({"shouldExist": ["systemd.unified_cgroup_hierarchy=0"]})
        );
    }

    #[test]
    fn users_carry_their_keys_and_groups() {
        let config = Config {
            users: vec![User {
                name: "ops".into(),
                ssh_authorized_keys: vec!["ssh-ed25519 AAAA ops@example".into()],
                groups: vec!["sudo".into()],
            }],
            ..sample()
        };
        assert_eq!(
            config.to_value()["passwd"],
            json!({"users": [{"name": "ops", "sshAuthorizedKeys": ["ssh-ed25519 AAAA ops@example"], "groups": ["sudo"]}]})
        );
    }

    #[test]
    fn parse_reads_back_every_file_and_unit() {
        let parsed = parse(sample().to_json().as_bytes()).expect("parse");
        assert_eq!(parsed.file("/etc/kubernetes/ssl/key.pem"), Some(&b"\x00\xffkey"[..]), "any bytes survive");
        assert_eq!(parsed.modes["/opt/bin/hello"], 0o755);
        assert_eq!(parsed.unit("var-lib-docker.mount"), Some("[Mount]\nWhat=/dev/vdb\n"));
        assert_eq!(parsed.unit("iscsid.service"), None);
        assert!(parsed.units.contains_key("iscsid.service"));
        assert!(matches!(parse(b"{not json"), Err(IgnitionError::Decode { .. })));
        assert!(matches!(decode_data_url("https://example.com/x"), Err(IgnitionError::Decode { .. })));
    }

    #[test]
    fn json_is_canonical() {
        let json = sample().to_json();
        assert_eq!(json, sample().to_json());
        // Keys sorted at every level: "contents" < "mode" < "overwrite" < "path".
        let first = json.find(r#""contents":{"source""#).expect("contents");
        assert!(first < json.find(r#""mode":420"#).expect("mode"), "{json}");
        assert_eq!(canonical_json(&json!({"b": 1, "a": [{"d": 2, "c": 3}]})), r#"{"a":[{"c":3,"d":2}],"b":1}"#);
    }

    #[test]
    fn gzip_is_deterministic_and_round_trips() {
        let json = sample().to_json();
        let a = gzip_base64(json.as_bytes());
        assert_eq!(a, gzip_base64(json.as_bytes()));
        let raw = BASE64.decode(&a).expect("base64");
        // RFC 1952 header: magic, deflate, no flags, mtime 0, then the OS byte "unknown".
        assert_eq!(&raw[..10], &[0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 2, 255]);
        assert_eq!(gunzip_base64(&a).expect("gunzip"), json.as_bytes());
        assert!(raw.len() < json.len(), "compressed: {} vs {}", raw.len(), json.len());
        assert_ne!(a, gzip_base64(b"something else"));
        assert!(matches!(gunzip_base64("not base64!"), Err(IgnitionError::Decode { .. })));
        assert!(matches!(gunzip_base64(&BASE64.encode(b"plain")), Err(IgnitionError::Decode { .. })));
    }

    #[test]
    fn paths_are_checked() {
        assert_eq!(sample().validate(), Ok(()));
        for path in ["relative/key.pem", "/etc/my key.pem", "/etc/$(reboot).pem", "/", "/etc/ssl/"] {
            assert_eq!(check_path(path), Err(IgnitionError::InvalidPath { path: path.into() }), "{path}");
        }
        let mut twice = sample();
        twice.files.push(File::text("/opt/bin/hello", ""));
        assert_eq!(twice.validate(), Err(IgnitionError::DuplicatePath { path: "/opt/bin/hello".into() }));
        assert_eq!(mount_unit_name("/var/lib/docker"), "var-lib-docker.mount");
        assert_eq!(automount_unit_name("/var/lib/etcd"), "var-lib-etcd.automount");
        assert_eq!(mount_unit_name("/data/t4wzk-data"), "data-t4wzk\\x2ddata.mount");
        assert_eq!(automount_unit_name("/data/a-b"), "data-a\\x2db.automount");
    }

    /// The escaping is the one the real `systemd-escape --path` does.
    #[test]
    fn unit_names_match_systemd_escape() {
        let paths = ["/var/lib/docker", "/data/t4wzk-data", "/", "/a//b/", "/.hidden/x", "/a b/c\\d", "/x:y_z.w", "/ü"];
        for path in paths {
            let out =
                std::process::Command::new("systemd-escape").args(["--path", path]).output().expect("systemd-escape");
            assert!(out.status.success(), "systemd-escape --path {path:?}: {}", String::from_utf8_lossy(&out.stderr));
            let expected = String::from_utf8(out.stdout).expect("utf-8");
            assert_eq!(systemd_escape_path(path), expected.trim_end_matches('\n'), "{path:?}");
        }
    }

    #[test]
    fn debug_never_shows_file_contents() {
        let printed = format!("{:?}", sample());
        assert!(!printed.contains("echo hi"), "{printed}");
        assert!(printed.contains("/etc/kubernetes/ssl/key.pem"), "{printed}");
        assert!(!printed.contains("iqn.example"), "{printed}");
    }
}

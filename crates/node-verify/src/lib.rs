//! The checks every node config of both operators passes, in one place.
//!
//! [`check`] runs the pure checks, which read only the config's JSON and may run in an operator
//! before it stores a config:
//! - [`Check::Ignition`]: the document is Ignition 3.3.0 strictly ([`spec`]): no field the
//!   specification does not define, required fields present, file modes in `0..=0o7777`, URL
//!   schemes Ignition fetches, compression `""` or `gzip`.
//! - [`Check::UnitName`]: a mount or automount unit is named after its `Where=` as
//!   `systemd-escape --path` names it; systemd refuses the unit otherwise.
//! - [`Check::Reference`]: every path under `/etc/kubernetes`, `/opt/bin` and `/var/lib` that a
//!   file or unit of the config names is written by the config, is a directory of such a file,
//!   is made at boot from a `<path>.enc` the config writes and a file of the config names, is a
//!   mount point of one of its mount units, or is in [`ALLOWED_PATHS`] with its reason.
//! - [`Check::Manifest`]: every static pod manifest decodes as a v1 Pod and loses no field when
//!   encoded again.
//! - [`Check::ComponentConfig`] and [`Check::Flag`] ([`components`]): kubelet's and kube-proxy's
//!   configs decode strictly against their upstream fields, and every flag of the control plane,
//!   kubelet and etcd exists in the version the config runs; every etcd member names itself in
//!   its `--initial-cluster`, with the peer URLs it advertises.
//!
//! The real tools a node runs a config with (`systemd-analyze verify`, `shellcheck`), and the
//! emulated node that runs a config's own scripts against moto, are the crate
//! `node-verify-harness`, for tests: the operators link only these pure checks.
//!
//! Every [`Finding`] names the node, the file or unit, and the problem. [`verify`] is the step
//! both operators run on every config they render, before they store it: a config that fails is
//! never uploaded or applied.
#![forbid(unsafe_code)]

use std::collections::BTreeSet;
use std::fmt;

pub mod components;
pub mod spec;

/// Which check found a problem.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Check {
    /// The Ignition 3.3 specification.
    Ignition,
    /// Mount and automount unit names.
    UnitName,
    /// Paths a file or unit names.
    Reference,
    /// Static pod manifests decode strictly as Pods.
    Manifest,
    /// `KubeletConfiguration` and `KubeProxyConfiguration` decode strictly against their
    /// upstream fields.
    ComponentConfig,
    /// Every flag of a component exists in its version.
    Flag,
    /// `systemd-analyze verify`.
    Systemd,
    /// `shellcheck`.
    Shellcheck,
    /// TOML files parse (Python's `tomllib`).
    Toml,
}

/// One problem of one node's config.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Finding {
    /// The check that found it.
    pub check: Check,
    /// The node whose config it is.
    pub node: String,
    /// The file path or unit name, or `config` for the document as a whole.
    pub subject: String,
    /// What is wrong. Never a file's content: files may hold keys.
    pub problem: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "node {}: {}: {} ({:?})", self.node, self.subject, self.problem, self.check)
    }
}

impl Finding {
    /// A finding of `check` about `subject` of `node`'s config.
    pub fn new(check: Check, node: &str, subject: impl Into<String>, problem: impl Into<String>) -> Self {
        Self { check, node: node.to_owned(), subject: subject.into(), problem: problem.into() }
    }
}

/// The URL schemes Ignition 3.3 fetches a resource from.
pub const URL_SCHEMES: [&str; 7] = ["data", "http", "https", "s3", "tftp", "gs", "arn"];

/// The prefixes whose paths must be accounted for ([`Check::Reference`]).
pub const CHECKED_PREFIXES: [&str; 3] = ["/etc/kubernetes", "/opt/bin", "/var/lib"];

/// Paths (and everything below them) that a node config may name without writing them: what a
/// daemon or a mount makes at run time. Each with its reason.
pub const ALLOWED_PATHS: [(&str, &str); 9] = [
    ("/var/lib/kubelet", "kubelet's state directory: kubelet makes it and what is below it (pki, pods, plugins)"),
    ("/var/lib/etcd", "etcd's data directory: its volume's mount point, etcd makes what is below it"),
    ("/var/lib/docker", "docker's data root, made by docker on its volume"),
    ("/var/lib/containerd", "containerd's state, made by containerd"),
    ("/var/lib/cni", "CNI state, made by the CNI plugins"),
    ("/var/lib/calico", "Calico's state, made by calico-node"),
    ("/etc/kubernetes/manifests", "the static pod directory kubelet watches; kubelet makes it when empty"),
    ("/var/lib/dockershim", "dockershim's state, made by kubelet"),
    ("/var/log", "logs, made by the writers"),
];

/// A config's documents, read once for the checks.
struct Doc {
    files: Vec<(String, Option<String>)>,
    units: Vec<(String, Option<String>, Vec<Dropin>)>,
}

/// A drop-in's name and contents.
type Dropin = (String, String);

/// Run every pure check on one node's Ignition JSON.
pub fn check(node: &str, json: &str) -> Vec<Finding> {
    let mut findings = Vec::new();
    let parsed: spec::Config = match serde_json::from_str(json) {
        Ok(c) => c,
        Err(e) => {
            findings.push(Finding::new(Check::Ignition, node, "config", format!("not Ignition 3.3: {e}")));
            return findings;
        }
    };
    findings.extend(check_spec(node, &parsed));
    let doc = read(&parsed);
    findings.extend(check_unit_names(node, &doc));
    findings.extend(check_references(node, &doc));
    findings.extend(check_manifests(node, &doc));
    findings.extend(components::check_configs(node, &doc));
    findings.extend(components::check_flags(node, &doc));
    findings.extend(components::check_etcd_membership(node, &doc));
    findings
}

/// A node config that fails the pure checks: what an operator reports instead of storing it.
/// Its message names the node, each file or unit and each problem, never a file's content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    /// The node whose config it is.
    pub node: String,
    /// Every problem [`check`] found.
    pub findings: Vec<Finding>,
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let problems: Vec<String> = self.findings.iter().map(ToString::to_string).collect();
        write!(f, "the node config of {} fails its checks: {}", self.node, problems.join("; "))
    }
}

impl std::error::Error for Invalid {}

/// [`check`] as a step of an operator: `Ok` when the config passes every pure check.
pub fn verify(node: &str, json: &str) -> Result<(), Invalid> {
    let findings = check(node, json);
    if findings.is_empty() { Ok(()) } else { Err(Invalid { node: node.to_owned(), findings }) }
}

/// Where kubelet reads static pod manifests.
pub const MANIFEST_DIR: &str = "/etc/kubernetes/manifests/";

/// Every static pod manifest decodes as a `v1` Pod, and re-encoding the Pod gives the same
/// document: a field the Pod type does not know would be lost, and is named.
fn check_manifests(node: &str, doc: &Doc) -> Vec<Finding> {
    use k8s_openapi::api::core::v1::Pod;
    let mut out = Vec::new();
    for (path, text) in &doc.files {
        if !path.starts_with(MANIFEST_DIR) {
            continue;
        }
        let Some(text) = text else {
            out.push(Finding::new(Check::Manifest, node, path, "manifest is not UTF-8 text"));
            continue;
        };
        let value: serde_json::Value = match serde_saphyr::from_str(text) {
            Ok(v) => v,
            Err(e) => {
                out.push(Finding::new(Check::Manifest, node, path, format!("not YAML: {e}")));
                continue;
            }
        };
        if value["kind"] != "Pod" || value["apiVersion"] != "v1" {
            out.push(Finding::new(Check::Manifest, node, path, "not a v1 Pod"));
        }
        match serde_json::from_value::<Pod>(value.clone()) {
            Err(e) => out.push(Finding::new(Check::Manifest, node, path, format!("not a Pod: {e}"))),
            Ok(pod) => {
                let back = serde_json::to_value(&pod).unwrap_or_default();
                for lost in lost_fields(&value, &back, "") {
                    out.push(Finding::new(Check::Manifest, node, path, format!("unknown Pod field {lost}")));
                }
            }
        }
    }
    out
}

/// The fields of `original` that `decoded` lacks, as JSON paths.
fn lost_fields(original: &serde_json::Value, decoded: &serde_json::Value, at: &str) -> Vec<String> {
    use serde_json::Value;
    match (original, decoded) {
        (Value::Object(a), Value::Object(b)) => a
            .iter()
            .flat_map(|(k, v)| match b.get(k) {
                None if !v.is_null() => vec![format!("{at}.{k}")],
                None => vec![],
                Some(w) => lost_fields(v, w, &format!("{at}.{k}")),
            })
            .collect(),
        (Value::Array(a), Value::Array(b)) => {
            a.iter().zip(b).enumerate().flat_map(|(i, (v, w))| lost_fields(v, w, &format!("{at}[{i}]"))).collect()
        }
        _ => vec![],
    }
}

fn check_spec(node: &str, config: &spec::Config) -> Vec<Finding> {
    let mut out = Vec::new();
    if config.ignition.version != ignition::IGNITION_VERSION {
        out.push(Finding::new(
            Check::Ignition,
            node,
            "config",
            format!("ignition.version is {:?}, not {}", config.ignition.version, ignition::IGNITION_VERSION),
        ));
    }
    let resource = |subject: &str, r: &spec::Resource, out: &mut Vec<Finding>| {
        if let Some(c) = r.compression.as_deref()
            && !matches!(c, "" | "gzip")
        {
            out.push(Finding::new(
                Check::Ignition,
                node,
                subject,
                format!("compression {c:?} is not \"\" or \"gzip\""),
            ));
        }
        if let Some(source) = r.source.as_deref() {
            let scheme = source.split_once(':').map(|(s, _)| s).unwrap_or("");
            if !URL_SCHEMES.contains(&scheme) {
                out.push(Finding::new(
                    Check::Ignition,
                    node,
                    subject,
                    format!("source scheme {scheme:?} is not one of {}", URL_SCHEMES.join(", ")),
                ));
            } else if scheme == "data" && ignition::decode_data_url(source).is_err() && !source.starts_with("data:,") {
                out.push(Finding::new(Check::Ignition, node, subject, "data URL does not decode"));
            }
        }
    };
    let mode = |subject: &str, m: Option<i64>, out: &mut Vec<Finding>| {
        if let Some(m) = m
            && !(0..=0o7777).contains(&m)
        {
            out.push(Finding::new(Check::Ignition, node, subject, format!("mode {m:#o} is outside 0..=0o7777")));
        }
    };
    let mut paths = BTreeSet::new();
    if let Some(storage) = &config.storage {
        for file in storage.files.iter().flatten() {
            check_node_path(node, &file.path, &mut paths, &mut out);
            mode(&file.path, file.mode, &mut out);
            if let Some(c) = &file.contents {
                resource(&file.path, c, &mut out);
            }
            for a in file.append.iter().flatten() {
                resource(&file.path, a, &mut out);
            }
        }
        for dir in storage.directories.iter().flatten() {
            check_node_path(node, &dir.path, &mut paths, &mut out);
            mode(&dir.path, dir.mode, &mut out);
        }
        for link in storage.links.iter().flatten() {
            check_node_path(node, &link.path, &mut paths, &mut out);
            if link.target.is_none() {
                out.push(Finding::new(Check::Ignition, node, &link.path, "link has no target"));
            }
        }
        for fs in storage.filesystems.iter().flatten() {
            if !fs.device.starts_with('/') {
                out.push(Finding::new(Check::Ignition, node, &fs.device, "filesystem device is not an absolute path"));
            }
        }
    }
    let mut names = BTreeSet::new();
    for unit in config.systemd.iter().flat_map(|s| s.units.iter().flatten()) {
        if !names.insert(unit.name.as_str()) {
            out.push(Finding::new(Check::Ignition, node, &unit.name, "unit is listed twice"));
        }
        let suffixes = [
            ".service",
            ".mount",
            ".automount",
            ".timer",
            ".socket",
            ".path",
            ".target",
            ".swap",
            ".slice",
            ".scope",
            ".device",
        ];
        if !suffixes.iter().any(|s| unit.name.ends_with(s)) {
            out.push(Finding::new(Check::Ignition, node, &unit.name, "unit name has no systemd unit type suffix"));
        }
        for dropin in unit.dropins.iter().flatten() {
            if !dropin.name.ends_with(".conf") {
                out.push(Finding::new(
                    Check::Ignition,
                    node,
                    format!("{}.d/{}", unit.name, dropin.name),
                    "drop-in name does not end in .conf",
                ));
            }
        }
    }
    out
}

fn check_node_path(node: &str, path: &str, seen: &mut BTreeSet<String>, out: &mut Vec<Finding>) {
    if !path.starts_with('/') {
        out.push(Finding::new(Check::Ignition, node, path, "path is not absolute"));
    }
    if !seen.insert(path.to_owned()) {
        out.push(Finding::new(Check::Ignition, node, path, "path is written twice"));
    }
}

fn read(config: &spec::Config) -> Doc {
    let files = config
        .storage
        .iter()
        .flat_map(|s| s.files.iter().flatten())
        .map(|f| {
            let text = f
                .contents
                .as_ref()
                .and_then(|c| c.source.as_deref())
                .and_then(|s| ignition::decode_data_url(s).ok())
                .and_then(|b| String::from_utf8(b).ok());
            (f.path.clone(), text)
        })
        .collect();
    let units = config
        .systemd
        .iter()
        .flat_map(|s| s.units.iter().flatten())
        .map(|u| {
            let dropins =
                u.dropins.iter().flatten().map(|d| (d.name.clone(), d.contents.clone().unwrap_or_default())).collect();
            (u.name.clone(), u.contents.clone(), dropins)
        })
        .collect();
    Doc { files, units }
}

/// The value of `key=` in a unit file's section `[section]`.
fn unit_setting<'a>(contents: &'a str, section: &str, key: &str) -> Option<&'a str> {
    let mut current = "";
    for line in contents.lines().map(str::trim) {
        if let Some(s) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            current = s;
        } else if current == section
            && let Some((k, v)) = line.split_once('=')
            && k.trim() == key
        {
            return Some(v.trim());
        }
    }
    None
}

fn check_unit_names(node: &str, doc: &Doc) -> Vec<Finding> {
    let mut out = Vec::new();
    for (name, contents, _) in &doc.units {
        let (Some(contents), Some((stem, kind))) = (contents, name.rsplit_once('.')) else { continue };
        let section = match kind {
            "mount" => "Mount",
            "automount" => "Automount",
            _ => continue,
        };
        match unit_setting(contents, section, "Where") {
            None => out.push(Finding::new(Check::UnitName, node, name, format!("[{section}] has no Where="))),
            Some(path) => {
                let expected = ignition::systemd_escape_path(path);
                if stem != expected {
                    out.push(Finding::new(
                        Check::UnitName,
                        node,
                        name,
                        format!("Where={path} needs the unit name {expected}.{kind} (systemd-escape --path)"),
                    ));
                }
            }
        }
    }
    out
}

/// Every path under [`CHECKED_PREFIXES`] in `text`.
fn referenced_paths(text: &str) -> BTreeSet<String> {
    let token = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '/' | '-');
    let mut out = BTreeSet::new();
    for prefix in CHECKED_PREFIXES {
        for (at, _) in text.match_indices(prefix) {
            if text[..at].chars().next_back().is_some_and(|c| token(c) && c != '/') || text[..at].ends_with("//") {
                continue;
            }
            let rest = &text[at..];
            let end = rest.find(|c: char| !token(c)).unwrap_or(rest.len());
            let path = rest[..end].trim_end_matches(['/', '.']);
            // `/var/libfoo` is not below `/var/lib`.
            if path.len() > prefix.len() && !path[prefix.len()..].starts_with('/') {
                continue;
            }
            out.insert(path.to_owned());
        }
    }
    out
}

fn check_references(node: &str, doc: &Doc) -> Vec<Finding> {
    let written: BTreeSet<&str> = doc.files.iter().map(|(p, _)| p.as_str()).collect();
    let mut texts: Vec<(String, &str)> = Vec::new();
    for (path, text) in &doc.files {
        if let Some(text) = text {
            texts.push((path.clone(), text));
        }
    }
    let mut mount_points = BTreeSet::new();
    for (name, contents, dropins) in &doc.units {
        if let Some(c) = contents {
            texts.push((name.clone(), c));
            if let Some(w) = unit_setting(c, "Mount", "Where") {
                mount_points.insert(w.to_owned());
            }
        }
        for (d, c) in dropins {
            texts.push((format!("{name}.d/{d}"), c));
        }
    }
    let accounted = |path: &str, by: &str| -> bool {
        if CHECKED_PREFIXES.contains(&path) || written.contains(path) {
            return true;
        }
        if written.iter().any(|w| w.strip_prefix(path).is_some_and(|r| r.starts_with('/'))) {
            return true;
        }
        let enc = format!("{path}.enc");
        if written.contains(enc.as_str()) && texts.iter().any(|(subject, t)| subject != by && t.contains(&enc)) {
            return true;
        }
        if mount_points.iter().any(|m| m == path || m.strip_prefix(path).is_some_and(|r| r.starts_with('/'))) {
            return true;
        }
        ALLOWED_PATHS.iter().any(|(a, _)| path == *a || path.strip_prefix(a).is_some_and(|r| r.starts_with('/')))
    };
    let mut out = Vec::new();
    for (subject, text) in &texts {
        for path in referenced_paths(text) {
            if !accounted(&path, subject) {
                out.push(Finding::new(
                    Check::Reference,
                    node,
                    subject,
                    format!("names {path}, which the config neither writes nor makes"),
                ));
            }
        }
    }
    out
}

/// The shell scripts of a config: files starting with a `sh` or `bash` shebang, with their text.
pub fn scripts(json: &str) -> Vec<(String, String)> {
    let Ok(parsed) = ignition::parse(json.as_bytes()) else { return Vec::new() };
    parsed
        .files
        .into_iter()
        .filter_map(|(path, bytes)| String::from_utf8(bytes).ok().map(|t| (path, t)))
        .filter(|(_, t)| {
            let first = t.lines().next().unwrap_or("");
            first.starts_with("#!") && (first.ends_with("/sh") || first.contains("bash") || first.ends_with(" sh"))
        })
        .collect()
}

#[cfg(test)]
mod tests;

//! The Kubernetes components' own inputs: their component configs and their command-line flags,
//! each against what the version the config runs accepts.
//!
//! - [`Check::ComponentConfig`]: every `KubeletConfiguration` (`kubelet.config.k8s.io/v1beta1`)
//!   and `KubeProxyConfiguration` (`kubeproxy.config.k8s.io/v1alpha1`) a file holds decodes
//!   strictly against the fields of its upstream Go types at the node's Kubernetes minor: an
//!   unknown field, or a value of the wrong kind (a list where a string belongs), is named with
//!   its path. The field lists are `data/config/<kind>-<minor>.txt`, each with the upstream file
//!   and commit it was read from on its first line.
//! - [`Check::Flag`]: every flag given to kube-apiserver, kube-controller-manager,
//!   kube-scheduler, kube-proxy, kubelet and etcd, in a static pod's `command`/`args` or a unit's
//!   `ExecStart=`, is one the component's version documents. The version is the tag of the image
//!   the component runs from (`…/kube-apiserver:v1.31.7` is 1.31); the flag lists are
//!   `data/flags/<component>-<minor>.txt`, each naming its upstream source on its first line:
//!   the component's reference page in kubernetes/website at the commit that brought it up to
//!   that release (Kubernetes 1.29 to 1.34), and etcd-io/etcd's `config.go` (etcd 3.4 and
//!   3.5). No kubelet reference was generated for 1.31 and 1.33: those two lists are derived from the
//!   neighbouring references and the release notes, by the rule their header states.
//!   Upstream's reference hides deprecated flags, so a deprecated flag counts as unknown here:
//!   it is removed in a later minor (kube-apiserver's `--cloud-provider`, deprecated in 1.29,
//!   went in 1.33).
//!
//! Not checked is not passed. A component config of a Kubernetes minor without a field list is
//! a finding ([`config_minors`] names the minors kept), and so is a component run whose flags
//! no list covers: one of a version without a flag list ([`flag_minors`]), or one from an
//! image without a version tag. A field or flag its version lacks would stop the component, so
//! a Release of a version the lists do not know is refused rather than passed unchecked.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::LazyLock;

use serde_json::Value;

use crate::{Check, Doc, Finding};

/// The components whose flags are checked, as their binaries are named.
pub const COMPONENTS: [&str; 6] =
    ["kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy", "kubelet", "etcd"];

/// `(component, minor, list)`: every flag list, as `data/flags/<component>-<minor>.txt`.
const FLAG_FILES: [(&str, &str, &str); 32] = [
    ("etcd", "3.4", include_str!("../data/flags/etcd-3.4.txt")),
    ("etcd", "3.5", include_str!("../data/flags/etcd-3.5.txt")),
    ("kube-apiserver", "1.29", include_str!("../data/flags/kube-apiserver-1.29.txt")),
    ("kube-apiserver", "1.30", include_str!("../data/flags/kube-apiserver-1.30.txt")),
    ("kube-apiserver", "1.31", include_str!("../data/flags/kube-apiserver-1.31.txt")),
    ("kube-apiserver", "1.32", include_str!("../data/flags/kube-apiserver-1.32.txt")),
    ("kube-apiserver", "1.33", include_str!("../data/flags/kube-apiserver-1.33.txt")),
    ("kube-apiserver", "1.34", include_str!("../data/flags/kube-apiserver-1.34.txt")),
    ("kube-controller-manager", "1.29", include_str!("../data/flags/kube-controller-manager-1.29.txt")),
    ("kube-controller-manager", "1.30", include_str!("../data/flags/kube-controller-manager-1.30.txt")),
    ("kube-controller-manager", "1.31", include_str!("../data/flags/kube-controller-manager-1.31.txt")),
    ("kube-controller-manager", "1.32", include_str!("../data/flags/kube-controller-manager-1.32.txt")),
    ("kube-controller-manager", "1.33", include_str!("../data/flags/kube-controller-manager-1.33.txt")),
    ("kube-controller-manager", "1.34", include_str!("../data/flags/kube-controller-manager-1.34.txt")),
    ("kube-proxy", "1.29", include_str!("../data/flags/kube-proxy-1.29.txt")),
    ("kube-proxy", "1.30", include_str!("../data/flags/kube-proxy-1.30.txt")),
    ("kube-proxy", "1.31", include_str!("../data/flags/kube-proxy-1.31.txt")),
    ("kube-proxy", "1.32", include_str!("../data/flags/kube-proxy-1.32.txt")),
    ("kube-proxy", "1.33", include_str!("../data/flags/kube-proxy-1.33.txt")),
    ("kube-proxy", "1.34", include_str!("../data/flags/kube-proxy-1.34.txt")),
    ("kube-scheduler", "1.29", include_str!("../data/flags/kube-scheduler-1.29.txt")),
    ("kube-scheduler", "1.30", include_str!("../data/flags/kube-scheduler-1.30.txt")),
    ("kube-scheduler", "1.31", include_str!("../data/flags/kube-scheduler-1.31.txt")),
    ("kube-scheduler", "1.32", include_str!("../data/flags/kube-scheduler-1.32.txt")),
    ("kube-scheduler", "1.33", include_str!("../data/flags/kube-scheduler-1.33.txt")),
    ("kube-scheduler", "1.34", include_str!("../data/flags/kube-scheduler-1.34.txt")),
    ("kubelet", "1.29", include_str!("../data/flags/kubelet-1.29.txt")),
    ("kubelet", "1.30", include_str!("../data/flags/kubelet-1.30.txt")),
    ("kubelet", "1.31", include_str!("../data/flags/kubelet-1.31.txt")),
    ("kubelet", "1.32", include_str!("../data/flags/kubelet-1.32.txt")),
    ("kubelet", "1.33", include_str!("../data/flags/kubelet-1.33.txt")),
    ("kubelet", "1.34", include_str!("../data/flags/kubelet-1.34.txt")),
];

/// `(kind, minor, fields)`: every component-config field list, as
/// `data/config/<kubelet|kube-proxy>-<minor>.txt`.
const CONFIG_FILES: [(&str, &str, &str); 12] = [
    ("KubeletConfiguration", "1.29", include_str!("../data/config/kubelet-1.29.txt")),
    ("KubeletConfiguration", "1.30", include_str!("../data/config/kubelet-1.30.txt")),
    ("KubeletConfiguration", "1.31", include_str!("../data/config/kubelet-1.31.txt")),
    ("KubeletConfiguration", "1.32", include_str!("../data/config/kubelet-1.32.txt")),
    ("KubeletConfiguration", "1.33", include_str!("../data/config/kubelet-1.33.txt")),
    ("KubeletConfiguration", "1.34", include_str!("../data/config/kubelet-1.34.txt")),
    ("KubeProxyConfiguration", "1.29", include_str!("../data/config/kube-proxy-1.29.txt")),
    ("KubeProxyConfiguration", "1.30", include_str!("../data/config/kube-proxy-1.30.txt")),
    ("KubeProxyConfiguration", "1.31", include_str!("../data/config/kube-proxy-1.31.txt")),
    ("KubeProxyConfiguration", "1.32", include_str!("../data/config/kube-proxy-1.32.txt")),
    ("KubeProxyConfiguration", "1.33", include_str!("../data/config/kube-proxy-1.33.txt")),
    ("KubeProxyConfiguration", "1.34", include_str!("../data/config/kube-proxy-1.34.txt")),
];

/// The component configs checked: `(kind, apiVersion)`.
pub const CONFIG_KINDS: [(&str, &str); 2] = [
    ("KubeletConfiguration", "kubelet.config.k8s.io/v1beta1"),
    ("KubeProxyConfiguration", "kubeproxy.config.k8s.io/v1alpha1"),
];

/// One upstream list: where it came from (its first line) and its entries.
#[derive(Debug)]
pub struct List<T> {
    /// The source line, without its `# `.
    pub source: &'static str,
    /// The entries.
    pub entries: T,
}

type FlagLists = BTreeMap<(&'static str, &'static str), List<BTreeSet<&'static str>>>;
type FieldLists = BTreeMap<(&'static str, &'static str), List<BTreeMap<&'static str, &'static str>>>;

fn split(text: &'static str) -> (&'static str, impl Iterator<Item = &'static str>) {
    let mut lines = text.lines();
    let source = lines.next().unwrap_or_default().trim_start_matches('#').trim();
    (source, lines.map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')))
}

static FLAGS: LazyLock<FlagLists> = LazyLock::new(|| {
    FLAG_FILES
        .iter()
        .map(|(component, minor, text)| {
            let (source, lines) = split(text);
            ((*component, *minor), List { source, entries: lines.collect() })
        })
        .collect()
});

static FIELDS: LazyLock<FieldLists> = LazyLock::new(|| {
    CONFIG_FILES
        .iter()
        .map(|(kind, minor, text)| {
            let (source, lines) = split(text);
            let entries = lines.filter_map(|l| l.split_once(' ')).collect();
            ((*kind, *minor), List { source, entries })
        })
        .collect()
});

/// The flags `component` documents at `minor` (`1.31`, `3.5`), when a list is kept for it.
pub fn flag_list(component: &str, minor: &str) -> Option<&'static List<BTreeSet<&'static str>>> {
    FLAGS.iter().find(|((c, m), _)| *c == component && *m == minor).map(|(_, l)| l)
}

/// The fields of the component config `kind` at Kubernetes `minor`, by JSON path
/// (`authentication.x509.clientCAFile`, `reservedMemory[].numaNode`) with their kind.
pub fn config_fields(kind: &str, minor: &str) -> Option<&'static List<BTreeMap<&'static str, &'static str>>> {
    FIELDS.iter().find(|((k, m), _)| *k == kind && *m == minor).map(|(_, l)| l)
}

/// The Kubernetes minors whose `kind` fields are kept, oldest first.
pub fn config_minors(kind: &str) -> Vec<&'static str> {
    FIELDS.keys().filter(|(k, _)| *k == kind).map(|(_, m)| *m).collect()
}

/// The Kubernetes minors (or etcd's) whose `component` flags are kept, oldest first.
pub fn flag_minors(component: &str) -> Vec<&'static str> {
    FLAGS.keys().filter(|(c, _)| *c == component).map(|(_, m)| *m).collect()
}

/// `1.31` of `v1.31.7`, `1.31.7` or `v1.31.7-gs1`; `None` when it is no version.
pub fn minor(version: &str) -> Option<String> {
    let v = version.trim_start_matches('v');
    let mut parts = v.split('.');
    let (major, minor) = (parts.next()?, parts.next()?);
    let minor: String = minor.chars().take_while(char::is_ascii_digit).collect();
    (major.chars().all(|c| c.is_ascii_digit()) && !major.is_empty() && !minor.is_empty())
        .then(|| format!("{major}.{minor}"))
}

/// The tag of an image reference (`quay.io/giantswarm/etcd:v3.5.21` → `v3.5.21`).
fn image_tag(image: &str) -> Option<&str> {
    let image = image.split('@').next().unwrap_or(image);
    let (repo, tag) = image.rsplit_once(':')?;
    (!tag.contains('/') && !repo.is_empty()).then_some(tag)
}

/// One run of a component a config starts: where, which, at which version, with which flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    /// The manifest path or unit name.
    pub subject: String,
    /// The component ([`COMPONENTS`]).
    pub component: String,
    /// The image tag it runs from, when it runs from an image.
    pub version: Option<String>,
    /// The flags' names, without `--` and value, in order.
    pub flags: Vec<String>,
    /// The flags' values by name, as `--name=value` or `--name value` gives them (the last one
    /// given wins, as for the components' own flag parsing).
    pub values: BTreeMap<String, String>,
}

fn component_of(token: &str) -> Option<&'static str> {
    let base = token.rsplit('/').next().unwrap_or(token);
    COMPONENTS.iter().copied().find(|c| *c == base)
}

/// The values of the flags in `args`: `--name=value`, or `--name value` when the next token is
/// no flag.
fn flag_values<'a>(args: impl Iterator<Item = &'a str>) -> BTreeMap<String, String> {
    let args: Vec<&str> = args.collect();
    let mut out = BTreeMap::new();
    for (i, arg) in args.iter().enumerate() {
        let Some(flag) = arg.strip_prefix("--") else { continue };
        match flag.split_once('=') {
            Some((name, value)) => out.insert(name.to_string(), value.to_string()),
            None => match args.get(i + 1).filter(|next| !next.starts_with('-')) {
                Some(value) => out.insert(flag.to_string(), (*value).to_string()),
                None => continue,
            },
        };
    }
    out
}

fn flag_names<'a>(args: impl Iterator<Item = &'a str>) -> Vec<String> {
    args.filter_map(|a| a.strip_prefix("--"))
        .map(|a| a.split_once('=').map_or(a, |(name, _)| name).to_string())
        .filter(|name| !name.is_empty())
        .collect()
}

/// The `ExecStart=` command lines of a unit, continuation lines joined.
fn exec_starts(contents: &str) -> Vec<String> {
    let joined = contents.replace("\\\n", " ");
    joined
        .lines()
        .filter_map(|l| l.trim().strip_prefix("ExecStart="))
        .map(|l| l.trim_start_matches(['-', '@', '+', '!', ':']).to_string())
        .collect()
}

fn unit_invocations(name: &str, contents: &str) -> Vec<Invocation> {
    let mut out = Vec::new();
    for line in exec_starts(contents) {
        let tokens: Vec<&str> = line.split_whitespace().map(|t| t.trim_matches(['"', '\''])).collect();
        // The component is the command itself, or the command of an image (`docker run …
        // <image> <component> <flags>`); `--name kubelet` names a container, not a command.
        let found = tokens.iter().enumerate().find_map(|(i, t)| {
            let component = component_of(t)?;
            match i {
                0 => Some((i, component, None)),
                _ => image_tag(tokens[i - 1])
                    .filter(|_| !tokens[i - 1].starts_with('-'))
                    .map(|tag| (i, component, Some(tag.to_string()))),
            }
        });
        if let Some((at, component, version)) = found {
            out.push(Invocation {
                subject: name.to_string(),
                component: component.to_string(),
                version,
                flags: flag_names(tokens[at + 1..].iter().copied()),
                values: flag_values(tokens[at + 1..].iter().copied()),
            });
        }
    }
    out
}

fn manifest_invocations(path: &str, text: &str) -> Vec<Invocation> {
    let Ok(pod) = serde_saphyr::from_str::<Value>(text) else { return Vec::new() };
    let containers = ["initContainers", "containers"]
        .into_iter()
        .flat_map(|k| pod["spec"][k].as_array().cloned().unwrap_or_default());
    containers
        .filter_map(|c| {
            let strings = |v: &Value| -> Vec<String> {
                v.as_array()
                    .map(|a| a.iter().filter_map(|s| s.as_str().map(str::to_string)).collect())
                    .unwrap_or_default()
            };
            let (command, args) = (strings(&c["command"]), strings(&c["args"]));
            let component = component_of(command.first()?)?;
            let version = c["image"].as_str().and_then(image_tag).map(str::to_string);
            let given = || command.iter().skip(1).chain(args.iter()).map(String::as_str);
            let (flags, values) = (flag_names(given()), flag_values(given()));
            Some(Invocation { subject: path.to_string(), component: component.to_string(), version, flags, values })
        })
        .collect()
}

pub(crate) fn invocations_of(doc: &Doc) -> Vec<Invocation> {
    let mut out = Vec::new();
    for (path, text) in &doc.files {
        if let (true, Some(text)) = (path.starts_with(crate::MANIFEST_DIR), text) {
            out.extend(manifest_invocations(path, text));
        }
    }
    for (name, contents, dropins) in &doc.units {
        if let Some(c) = contents {
            out.extend(unit_invocations(name, c));
        }
        for (d, c) in dropins {
            out.extend(unit_invocations(&format!("{name}.d/{d}"), c));
        }
    }
    out
}

/// Every component run a config starts, with its flags: what [`Check::Flag`] checks.
pub fn invocations(json: &str) -> Vec<Invocation> {
    match serde_json::from_str::<crate::spec::Config>(json) {
        Ok(config) => invocations_of(&crate::read(&config)),
        Err(_) => Vec::new(),
    }
}

/// The version `run` runs at and the flag list of that version; or why its flags cannot be
/// checked: it runs from no tagged image, its tag is no version, or no list is kept for it.
fn list_of(run: &Invocation) -> Result<(&str, &'static List<BTreeSet<&'static str>>), String> {
    let component = &run.component;
    let Some(version) = run.version.as_deref() else {
        return Err(format!("{component} runs from no tagged image, so its flags cannot be checked"));
    };
    let Some(minor) = minor(version) else {
        return Err(format!("{component} {version}: the tag is no version, so its flags cannot be checked"));
    };
    let what = if component == "etcd" { "etcd" } else { "Kubernetes" };
    flag_list(component, &minor).map(|list| (version, list)).ok_or_else(|| {
        format!(
            "{component} {version}: no flag list is kept for {minor}, so its flags cannot be checked (kept: {}); \
             use a Release whose {what} is one of these",
            flag_minors(component).join(", ")
        )
    })
}

pub(crate) fn check_flags(node: &str, doc: &Doc) -> Vec<Finding> {
    let mut out = Vec::new();
    for run in invocations_of(doc) {
        match list_of(&run) {
            // Not checked is not passed: a flag its version lacks would stop the component.
            Err(why) => out.push(Finding::new(Check::Flag, node, &run.subject, why)),
            Ok((version, list)) => {
                for flag in run.flags.iter().filter(|f| !list.entries.contains(f.as_str())) {
                    out.push(Finding::new(
                        Check::Flag,
                        node,
                        &run.subject,
                        format!("{} {version} has no flag --{flag}", run.component),
                    ));
                }
            }
        }
    }
    out
}

/// Every etcd member a config starts names itself in its own initial cluster, with the peer URLs
/// it advertises: etcd refuses to start otherwise ("couldn't find local name … in the initial
/// cluster configuration", or its advertised URLs not matching the cluster's). URLs that the unit
/// fills in at run time (`$VAR`, `${VAR}`) are not compared.
pub(crate) fn check_etcd_membership(node: &str, doc: &Doc) -> Vec<Finding> {
    let mut out = Vec::new();
    for run in invocations_of(doc).into_iter().filter(|r| r.component == "etcd") {
        let (Some(name), Some(cluster)) = (run.values.get("name"), run.values.get("initial-cluster")) else {
            continue;
        };
        let urls: BTreeSet<&str> = cluster
            .split(',')
            .filter_map(|member| member.split_once('='))
            .filter(|(member, _)| member == name)
            .map(|(_, url)| url)
            .collect();
        if urls.is_empty() {
            out.push(Finding::new(
                Check::Flag,
                node,
                &run.subject,
                format!("etcd --name={name} is no member of its --initial-cluster={cluster}; etcd would not start"),
            ));
            continue;
        }
        let Some(advertised) = run.values.get("initial-advertise-peer-urls") else { continue };
        if advertised.contains('$') || urls.iter().any(|u| u.contains('$')) {
            continue;
        }
        let advertised: BTreeSet<&str> = advertised.split(',').collect();
        if advertised != urls {
            out.push(Finding::new(
                Check::Flag,
                node,
                &run.subject,
                format!(
                    "etcd {name} advertises peer URLs {} but its --initial-cluster gives it {}; etcd would not start",
                    advertised.into_iter().collect::<Vec<_>>().join(","),
                    urls.into_iter().collect::<Vec<_>>().join(",")
                ),
            ));
        }
    }
    out
}

/// The Kubernetes version a node runs: the image tag of its kubelet, else of its kube-proxy.
pub(crate) fn kubernetes_version(runs: &[Invocation]) -> Option<String> {
    ["kubelet", "kube-proxy"]
        .iter()
        .find_map(|c| runs.iter().find(|r| r.component == *c).and_then(|r| r.version.clone()))
}

pub(crate) fn check_configs(node: &str, doc: &Doc) -> Vec<Finding> {
    let version = kubernetes_version(&invocations_of(doc));
    let mut out = Vec::new();
    for (path, text) in &doc.files {
        let Some(text) = text else { continue };
        if !CONFIG_KINDS.iter().any(|(kind, _)| text.contains(kind)) {
            continue;
        }
        let Ok(value) = serde_saphyr::from_str::<Value>(text) else { continue };
        let Some((kind, api_version)) = CONFIG_KINDS.iter().find(|(kind, _)| value["kind"] == *kind) else {
            continue;
        };
        if value["apiVersion"] != *api_version {
            out.push(Finding::new(
                Check::ComponentConfig,
                node,
                path,
                format!("{kind} has apiVersion {}, not {api_version}", value["apiVersion"]),
            ));
            continue;
        }
        let Some(version) = version.as_deref() else {
            out.push(Finding::new(
                Check::ComponentConfig,
                node,
                path,
                format!("{kind} of a node whose Kubernetes version no kubelet or kube-proxy image tag says"),
            ));
            continue;
        };
        let Some(fields) = minor(version).and_then(|m| config_fields(kind, &m)) else {
            // Not checked is not passed: a config of a version whose fields are not known here
            // may hold a field that version lacks, and kubelet or kube-proxy would not start.
            out.push(Finding::new(
                Check::ComponentConfig,
                node,
                path,
                format!(
                    "{kind} of Kubernetes {version}: no field list is kept for {}, so it cannot be checked \
                     (kept: {}); use a Release whose Kubernetes is one of these",
                    minor(version).unwrap_or_else(|| format!("{version:?}, which is no version")),
                    config_minors(kind).join(", ")
                ),
            ));
            continue;
        };
        let mut problems = Vec::new();
        walk(&fields.entries, &value, "", &mut problems);
        for problem in problems {
            out.push(Finding::new(
                Check::ComponentConfig,
                node,
                path,
                format!("{kind} of Kubernetes {version}: {problem}"),
            ));
        }
    }
    out
}

/// Check `value` at `path` against `fields`, collecting each problem.
fn walk(fields: &BTreeMap<&str, &str>, value: &Value, path: &str, out: &mut Vec<String>) {
    let kind = if path.is_empty() {
        "object"
    } else {
        match fields.get(path) {
            Some(kind) => kind,
            None => {
                out.push(format!("unknown field {path}"));
                return;
            }
        }
    };
    if value.is_null() {
        return;
    }
    let fits = match kind {
        "object" | "object*" | "map" => value.is_object(),
        "list" => value.is_array(),
        "string" | "duration" => value.is_string(),
        "bool" => value.is_boolean(),
        "int" => value.is_i64() || value.is_u64(),
        "float" => value.is_number(),
        "quantity" => value.is_string() || value.is_number(),
        "duration-or-int" => value.is_string() || value.is_i64() || value.is_u64(),
        _ => true,
    };
    if !fits {
        out.push(format!("field {path} is {}, not {kind}", json_kind(value)));
        return;
    }
    match (kind, value) {
        ("object", Value::Object(map)) => {
            for (key, child) in map {
                let at = if path.is_empty() { key.clone() } else { format!("{path}.{key}") };
                walk(fields, child, &at, out);
            }
        }
        ("list", Value::Array(items)) => {
            for item in items {
                walk(fields, item, &format!("{path}[]"), out);
            }
        }
        _ => {}
    }
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a bool",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

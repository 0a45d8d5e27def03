//! Pod Security admission, as kube-apiserver's built-in `PodSecurity` plugin
//! (`k8s.io/pod-security-admission`) applies the Pod Security Standards from namespace labels:
//! `pod-security.kubernetes.io/enforce` rejects pods that violate its level, `…/warn` answers
//! with warnings; both name the level and version (`restricted:latest`). Workload kinds
//! (Deployments, Jobs, …) get the `warn` level's warnings for their pod templates; only pods
//! are rejected, as upstream documents.
//!
//! The checks and their texts are upstream's (`policy/check_*.go`), evaluated in the order of
//! their check ids, so a rejection reads word for word as kube-apiserver's. AppArmor and
//! Windows host-process checks are not implemented.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::error::ApiError;

/// A Pod Security Standard level.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// No restrictions.
    Privileged,
    /// Prevents known privilege escalations.
    Baseline,
    /// Hardened pods.
    Restricted,
}

impl Level {
    fn parse(s: &str) -> Level {
        match s {
            "privileged" => Level::Privileged,
            "baseline" => Level::Baseline,
            // Invalid values evaluate as the most restrictive level, as upstream does.
            _ => Level::Restricted,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Level::Privileged => "privileged",
            Level::Baseline => "baseline",
            Level::Restricted => "restricted",
        }
    }
}

/// A level and version from a namespace's labels for one mode (`enforce`, `warn`).
fn policy(labels: &BTreeMap<String, String>, mode: &str) -> Option<(Level, String)> {
    let level = labels.get(&format!("pod-security.kubernetes.io/{mode}"))?;
    let version = labels
        .get(&format!("pod-security.kubernetes.io/{mode}-version"))
        .cloned()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "latest".into());
    Some((Level::parse(level), version))
}

/// The pod spec and metadata of a pod or of a workload's pod template.
fn pod_spec<'a>(kind: &str, obj: &'a Value) -> Option<(&'a Value, &'a Value)> {
    let (md, spec) = match kind {
        "Pod" => (obj.get("metadata"), obj.get("spec")),
        "Deployment" | "ReplicaSet" | "StatefulSet" | "DaemonSet" | "Job" | "ReplicationController" => {
            (obj.pointer("/spec/template/metadata"), obj.pointer("/spec/template/spec"))
        }
        "CronJob" => (
            obj.pointer("/spec/jobTemplate/spec/template/metadata"),
            obj.pointer("/spec/jobTemplate/spec/template/spec"),
        ),
        "PodTemplate" => (obj.pointer("/template/metadata"), obj.pointer("/template/spec")),
        _ => return None,
    };
    Some((md.unwrap_or(&Value::Null), spec?))
}

/// Admit a write of `obj` (of `kind`) into a namespace with `labels`: `Err` rejects a pod that
/// violates the enforced level; warnings are added for the warn level.
pub fn admit(
    kind: &str,
    name: &str,
    labels: &BTreeMap<String, String>,
    obj: &Value,
    warnings: &mut Vec<String>,
) -> Result<(), ApiError> {
    let Some((_, spec)) = pod_spec(kind, obj) else { return Ok(()) };
    if kind == "Pod"
        && let Some((level, version)) = &policy(labels, "enforce")
    {
        let violations = evaluate(*level, spec);
        if !violations.is_empty() {
            let text = format!("violates PodSecurity \"{}:{version}\": {}", level.as_str(), violations.join(", "));
            return Err(ApiError {
                code: 403,
                reason: "Forbidden",
                message: format!("pods {name:?} is forbidden: {text}"),
                details: Some(serde_json::json!({"name": name, "kind": "pods"})),
            });
        }
    }
    if let Some((level, version)) = policy(labels, "warn") {
        let violations = evaluate(level, spec);
        if !violations.is_empty() {
            warnings.push(format!(
                "would violate PodSecurity \"{}:{version}\": {}",
                level.as_str(),
                violations.join(", ")
            ));
        }
    }
    Ok(())
}

/// The admission hook of the write path: pods and workloads of built-in kinds, when Pod
/// Security is on.
pub(crate) fn admit_write(
    api: &crate::api::Api,
    def: &crate::registry::ResourceDef,
    namespace: &str,
    name: &str,
    obj: &Value,
    warnings: &mut Vec<String>,
) -> Result<(), ApiError> {
    if !api.config.pod_security || def.is_custom() || pod_spec(&def.kind, obj).is_none() {
        return Ok(());
    }
    let ns_def = api.namespaces_def();
    let Some(ns) = api.store.get(&ns_def.storage, &(String::new(), namespace.to_string())) else { return Ok(()) };
    admit(&def.kind, name, &ns.meta.labels, obj, warnings)
}

/// The violations of `spec` against `level`, as upstream words them, in check-id order.
pub fn evaluate(level: Level, spec: &Value) -> Vec<String> {
    if level == Level::Privileged {
        return Vec::new();
    }
    let pod = Pod::new(spec);
    let restricted = level == Level::Restricted;
    // (check id, result), sorted by id below.
    let mut results: Vec<(&str, Option<String>)> = vec![
        ("hostNamespaces", pod.host_namespaces()),
        ("hostPathVolumes", pod.host_path_volumes()),
        ("hostPorts", pod.host_ports()),
        ("privileged", pod.privileged()),
        ("procMount", pod.proc_mount()),
        ("seLinuxOptions", pod.selinux()),
        ("sysctls", pod.sysctls()),
    ];
    if restricted {
        results.push(("allowPrivilegeEscalation", pod.allow_privilege_escalation()));
        results.push(("capabilities_restricted", pod.capabilities_restricted()));
        results.push(("restrictedVolumes", pod.restricted_volumes()));
        results.push(("runAsNonRoot", pod.run_as_non_root()));
        results.push(("runAsUser", pod.run_as_user()));
        results.push(("seccompProfile_restricted", pod.seccomp_restricted()));
    } else {
        results.push(("capabilities_baseline", pod.capabilities_baseline()));
        results.push(("seccompProfile_baseline", pod.seccomp_baseline()));
    }
    results.sort_by(|a, b| a.0.cmp(b.0));
    results.into_iter().filter_map(|(_, r)| r).collect()
}

struct Pod<'a> {
    spec: &'a Value,
    containers: Vec<&'a Value>,
}

fn quote_list(items: &[String]) -> String {
    items.iter().map(|s| format!("{s:?}")).collect::<Vec<_>>().join(", ")
}

/// `container "a"` or `containers "a", "b"`.
fn containers_phrase(names: &[String]) -> String {
    let noun = if names.len() == 1 { "container" } else { "containers" };
    format!("{noun} {}", quote_list(names))
}

fn with_detail(reason: &str, details: Vec<String>) -> Option<String> {
    if details.is_empty() { None } else { Some(format!("{reason} ({})", details.join("; "))) }
}

const BASELINE_CAPABILITIES: &[&str] = &[
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
];
const SAFE_SYSCTLS: &[&str] = &[
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
];
const RESTRICTED_VOLUMES: &[&str] =
    &["configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret"];

impl<'a> Pod<'a> {
    fn new(spec: &'a Value) -> Pod<'a> {
        let mut containers = Vec::new();
        for key in ["initContainers", "containers", "ephemeralContainers"] {
            if let Some(list) = spec.get(key).and_then(Value::as_array) {
                containers.extend(list.iter());
            }
        }
        Pod { spec, containers }
    }

    fn name(c: &Value) -> String {
        c.get("name").and_then(Value::as_str).unwrap_or("").to_string()
    }

    fn pod_sc(&self, path: &str) -> Option<&'a Value> {
        self.spec.get("securityContext")?.pointer(path).filter(|v| !v.is_null())
    }

    fn sc<'v>(c: &'v Value, path: &str) -> Option<&'v Value> {
        c.get("securityContext")?.pointer(path).filter(|v| !v.is_null())
    }

    fn names_where(&self, f: impl Fn(&Value) -> bool) -> Vec<String> {
        self.containers.iter().filter(|c| f(c)).map(|c| Self::name(c)).collect()
    }

    fn volumes(&self) -> Vec<&'a Value> {
        self.spec.get("volumes").and_then(Value::as_array).map(|v| v.iter().collect()).unwrap_or_default()
    }

    fn host_namespaces(&self) -> Option<String> {
        let set: Vec<String> = ["hostNetwork", "hostPID", "hostIPC"]
            .iter()
            .filter(|k| self.spec.get(**k).and_then(Value::as_bool) == Some(true))
            .map(|k| format!("{k}=true"))
            .collect();
        if set.is_empty() { None } else { Some(format!("host namespaces ({})", set.join(", "))) }
    }

    fn host_path_volumes(&self) -> Option<String> {
        let names: Vec<String> = self
            .volumes()
            .iter()
            .filter(|v| v.get("hostPath").is_some_and(|h| !h.is_null()))
            .map(|v| v.get("name").and_then(Value::as_str).unwrap_or("").to_string())
            .collect();
        if names.is_empty() {
            return None;
        }
        let noun = if names.len() == 1 { "volume" } else { "volumes" };
        Some(format!("hostPath volumes ({noun} {})", quote_list(&names)))
    }

    fn host_ports(&self) -> Option<String> {
        let mut names = Vec::new();
        let mut ports = Vec::new();
        for c in &self.containers {
            let mine: Vec<i64> = c
                .get("ports")
                .and_then(Value::as_array)
                .map(|ps| {
                    ps.iter().filter_map(|p| p.get("hostPort").and_then(Value::as_i64)).filter(|p| *p != 0).collect()
                })
                .unwrap_or_default();
            if !mine.is_empty() {
                names.push(Self::name(c));
                ports.extend(mine.iter().map(i64::to_string));
            }
        }
        if names.is_empty() {
            return None;
        }
        let (verb, noun) = if names.len() == 1 { ("uses", "container") } else { ("use", "containers") };
        let pnoun = if ports.len() == 1 { "hostPort" } else { "hostPorts" };
        Some(format!("hostPort ({noun} {} {verb} {pnoun} {})", quote_list(&names), ports.join(", ")))
    }

    fn privileged(&self) -> Option<String> {
        let names = self.names_where(|c| Self::sc(c, "/privileged").and_then(Value::as_bool) == Some(true));
        with_detail(
            "privileged",
            if names.is_empty() {
                vec![]
            } else {
                vec![format!("{} must not set securityContext.privileged=true", containers_phrase(&names))]
            },
        )
    }

    fn proc_mount(&self) -> Option<String> {
        let names =
            self.names_where(|c| Self::sc(c, "/procMount").and_then(Value::as_str).is_some_and(|m| m != "Default"));
        with_detail(
            "procMount",
            if names.is_empty() {
                vec![]
            } else {
                vec![format!("{} must not set securityContext.procMount to \"Unmasked\"", containers_phrase(&names))]
            },
        )
    }

    fn selinux(&self) -> Option<String> {
        let allowed_types = ["", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"];
        let bad = |o: Option<&Value>| {
            o.is_some_and(|o| {
                let t = o.get("type").and_then(Value::as_str).unwrap_or("");
                !allowed_types.contains(&t)
                    || o.get("user").and_then(Value::as_str).is_some_and(|s| !s.is_empty())
                    || o.get("role").and_then(Value::as_str).is_some_and(|s| !s.is_empty())
            })
        };
        let mut details = Vec::new();
        if bad(self.pod_sc("/seLinuxOptions")) {
            details.push("pod must not set securityContext.seLinuxOptions".to_string());
        }
        let names = self.names_where(|c| bad(Self::sc(c, "/seLinuxOptions")));
        if !names.is_empty() {
            details.push(format!("{} must not set securityContext.seLinuxOptions", containers_phrase(&names)));
        }
        with_detail("seLinuxOptions", details)
    }

    fn sysctls(&self) -> Option<String> {
        let bad: Vec<String> = self
            .pod_sc("/sysctls")
            .and_then(Value::as_array)
            .map(|s| {
                s.iter()
                    .filter_map(|x| x.get("name").and_then(Value::as_str))
                    .filter(|n| !SAFE_SYSCTLS.contains(n))
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        if bad.is_empty() { None } else { Some(format!("forbidden sysctls ({})", bad.join(", "))) }
    }

    fn added_capabilities(c: &Value) -> Vec<String> {
        Self::sc(c, "/capabilities/add")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_string)).collect())
            .unwrap_or_default()
    }

    fn capabilities_baseline(&self) -> Option<String> {
        let mut details = Vec::new();
        for c in &self.containers {
            let bad: Vec<String> = Self::added_capabilities(c)
                .into_iter()
                .filter(|cap| !BASELINE_CAPABILITIES.contains(&cap.as_str()))
                .collect();
            if !bad.is_empty() {
                details.push(format!(
                    "container {:?} must not include {} in securityContext.capabilities.add",
                    Self::name(c),
                    quote_list(&bad)
                ));
            }
        }
        with_detail("non-default capabilities", details)
    }

    fn capabilities_restricted(&self) -> Option<String> {
        let no_drop_all = self.names_where(|c| {
            !Self::sc(c, "/capabilities/drop")
                .and_then(Value::as_array)
                .is_some_and(|d| d.iter().any(|v| v.as_str() == Some("ALL")))
        });
        let mut details = Vec::new();
        if !no_drop_all.is_empty() {
            details.push(format!(
                "{} must set securityContext.capabilities.drop=[\"ALL\"]",
                containers_phrase(&no_drop_all)
            ));
        }
        for c in &self.containers {
            let bad: Vec<String> =
                Self::added_capabilities(c).into_iter().filter(|cap| cap != "NET_BIND_SERVICE").collect();
            if !bad.is_empty() {
                details.push(format!(
                    "container {:?} must not include {} in securityContext.capabilities.add",
                    Self::name(c),
                    quote_list(&bad)
                ));
            }
        }
        with_detail("unrestricted capabilities", details)
    }

    fn restricted_volumes(&self) -> Option<String> {
        let mut details = Vec::new();
        for v in self.volumes() {
            let name = v.get("name").and_then(Value::as_str).unwrap_or("");
            let Some(obj) = v.as_object() else { continue };
            if let Some(kind) = obj.keys().find(|k| *k != "name" && !RESTRICTED_VOLUMES.contains(&k.as_str())) {
                details.push(format!("volume {name:?} uses restricted volume type {kind:?}"));
            }
        }
        with_detail("restricted volume types", details)
    }

    fn allow_privilege_escalation(&self) -> Option<String> {
        let names =
            self.names_where(|c| Self::sc(c, "/allowPrivilegeEscalation").and_then(Value::as_bool) != Some(false));
        with_detail(
            "allowPrivilegeEscalation != false",
            if names.is_empty() {
                vec![]
            } else {
                vec![format!("{} must set securityContext.allowPrivilegeEscalation=false", containers_phrase(&names))]
            },
        )
    }

    fn run_as_non_root(&self) -> Option<String> {
        let pod = self.pod_sc("/runAsNonRoot").and_then(Value::as_bool);
        let mut details = Vec::new();
        if pod == Some(false) {
            details.push("pod must not set securityContext.runAsNonRoot=false".to_string());
        }
        let explicit_false = self.names_where(|c| Self::sc(c, "/runAsNonRoot").and_then(Value::as_bool) == Some(false));
        if !explicit_false.is_empty() {
            details.push(format!(
                "{} must not set securityContext.runAsNonRoot=false",
                containers_phrase(&explicit_false)
            ));
        }
        if pod != Some(true) {
            let unset = self.names_where(|c| Self::sc(c, "/runAsNonRoot").is_none());
            if !unset.is_empty() {
                details
                    .push(format!("pod or {} must set securityContext.runAsNonRoot=true", containers_phrase(&unset)));
            }
        }
        with_detail("runAsNonRoot != true", details)
    }

    fn run_as_user(&self) -> Option<String> {
        let mut details = Vec::new();
        if self.pod_sc("/runAsUser").and_then(Value::as_i64) == Some(0) {
            details.push("pod must not set runAsUser=0".to_string());
        }
        let names = self.names_where(|c| Self::sc(c, "/runAsUser").and_then(Value::as_i64) == Some(0));
        if !names.is_empty() {
            details.push(format!("{} must not set runAsUser=0", containers_phrase(&names)));
        }
        with_detail("runAsUser=0", details)
    }

    fn seccomp_type(v: Option<&Value>) -> Option<&str> {
        v.and_then(|p| p.get("type")).and_then(Value::as_str)
    }

    fn seccomp_baseline(&self) -> Option<String> {
        let mut details = Vec::new();
        if Self::seccomp_type(self.pod_sc("/seccompProfile")) == Some("Unconfined") {
            details.push("pod must not set securityContext.seccompProfile.type to \"Unconfined\"".to_string());
        }
        let names = self.names_where(|c| Self::seccomp_type(Self::sc(c, "/seccompProfile")) == Some("Unconfined"));
        if !names.is_empty() {
            details.push(format!(
                "{} must not set securityContext.seccompProfile.type to \"Unconfined\"",
                containers_phrase(&names)
            ));
        }
        with_detail("seccompProfile", details)
    }

    fn seccomp_restricted(&self) -> Option<String> {
        let ok = |t: Option<&str>| matches!(t, Some("RuntimeDefault" | "Localhost"));
        let pod = Self::seccomp_type(self.pod_sc("/seccompProfile"));
        let mut details = Vec::new();
        if let Some(t) = pod.filter(|t| !ok(Some(t))) {
            details.push(format!("pod must not set securityContext.seccompProfile.type to {t:?}"));
        }
        let mut bad: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for c in &self.containers {
            if let Some(t) = Self::seccomp_type(Self::sc(c, "/seccompProfile")).filter(|t| !ok(Some(t))) {
                bad.entry(t.to_string()).or_default().push(Self::name(c));
            }
        }
        for (t, names) in bad {
            details.push(format!(
                "{} must not set securityContext.seccompProfile.type to {t:?}",
                containers_phrase(&names)
            ));
        }
        if pod.is_none() {
            let unset = self.names_where(|c| Self::seccomp_type(Self::sc(c, "/seccompProfile")).is_none());
            if !unset.is_empty() {
                details.push(format!(
                    "pod or {} must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\"",
                    containers_phrase(&unset)
                ));
            }
        }
        with_detail("seccompProfile", details)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_plain_pod_violates_restricted_as_kube_apiserver_says() {
        let spec = json!({"containers": [{"name": "nginx", "image": "nginx"}]});
        assert_eq!(
            evaluate(Level::Restricted, &spec).join(", "),
            "allowPrivilegeEscalation != false (container \"nginx\" must set securityContext.allowPrivilegeEscalation=false), \
unrestricted capabilities (container \"nginx\" must set securityContext.capabilities.drop=[\"ALL\"]), \
runAsNonRoot != true (pod or container \"nginx\" must set securityContext.runAsNonRoot=true), \
seccompProfile (pod or container \"nginx\" must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\")"
        );
        assert!(evaluate(Level::Baseline, &spec).is_empty());
    }

    #[test]
    fn baseline_refuses_host_access_in_check_order() {
        let spec = json!({
            "hostNetwork": true,
            "containers": [{"name": "nginx", "securityContext": {"privileged": true}}],
            "volumes": [{"name": "host", "hostPath": {"path": "/"}}],
        });
        assert_eq!(
            evaluate(Level::Baseline, &spec).join(", "),
            "host namespaces (hostNetwork=true), hostPath volumes (volume \"host\"), privileged (container \"nginx\" must not set securityContext.privileged=true)"
        );
    }

    #[test]
    fn a_hardened_pod_passes_restricted() {
        let spec = json!({
            "securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{"name": "app", "securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}}],
            "volumes": [{"name": "cfg", "configMap": {"name": "x"}}],
        });
        assert!(evaluate(Level::Restricted, &spec).is_empty(), "{:?}", evaluate(Level::Restricted, &spec));
    }
}

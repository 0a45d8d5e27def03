//! Server-side printers for built-in kinds.
//!
//! These mirror `pkg/printers/internalversion/printers.go` of kubernetes/kubernetes: the
//! same columns (names, types, priorities) and the same cell rules, so that `kubectl get`
//! against this server prints what it prints against kube-apiserver. kube-apiserver calls
//! the printers with `GenerateOptions{Wide: true}`, so every row carries the wide columns
//! too and kubectl hides those with priority > 0 unless `-o wide` is given.
//!
//! Objects here are plain JSON. Where kube-apiserver would have defaulted a field before
//! storing it (Service `type` and port `protocol`, Secret `type`, workload `replicas`), a
//! missing field prints its default, because a real cluster never shows the undefaulted
//! form. Quantities are printed as stored (upstream prints the canonical form, which the
//! store is expected to have written).
//!
//! Role, ClusterRole and CustomResourceDefinition have no printer upstream: their storage
//! uses the default table convertor (`NAME`, `CREATED AT`), which [`builtin`] reports as
//! [`Builtin::Default`].

use std::collections::BTreeSet;

use jiff::Timestamp;
use serde_json::{Value, json};

use super::Column;
use super::duration::{age_of, human_duration_nanos, human_since, parse_timestamp};
use crate::selector::LabelSelector;

/// `metav1.ObjectMeta{}.SwaggerDoc()["name"]`.
pub(super) const NAME_DESCRIPTION: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";

/// `metav1.ObjectMeta{}.SwaggerDoc()["creationTimestamp"]`.
pub(super) const CREATION_TIMESTAMP_DESCRIPTION: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

const CONTAINERS_DESCRIPTION: &str = "Names of each container in the template.";
const IMAGES_DESCRIPTION: &str = "Images referenced by each container in the template.";

/// A printer: its column definitions and the function computing one row's cells.
#[derive(Clone, Copy)]
pub(super) struct Printer {
    pub(super) columns: fn() -> Vec<Column>,
    pub(super) cells: fn(&Value, Timestamp) -> Vec<Value>,
}

impl std::fmt::Debug for Printer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Printer").finish_non_exhaustive()
    }
}

/// How kube-apiserver renders a built-in kind as a table.
#[derive(Debug, Clone, Copy)]
pub(super) enum Builtin {
    /// A dedicated printer from `printers.go`.
    Printer(Printer),
    /// The default table convertor: `Name` and `Created At`.
    Default,
}

/// The table rendering for a built-in group/kind, `None` for kinds this module does not know.
pub(super) fn builtin(group: &str, kind: &str) -> Option<Builtin> {
    fn p(columns: fn() -> Vec<Column>, cells: fn(&Value, Timestamp) -> Vec<Value>) -> Option<Builtin> {
        Some(Builtin::Printer(Printer { columns, cells }))
    }
    match (group, kind) {
        ("", "Pod") => p(pod_columns, pod_cells),
        ("", "Namespace") => p(namespace_columns, namespace_cells),
        ("", "ConfigMap") => p(config_map_columns, config_map_cells),
        ("", "Secret") => p(secret_columns, secret_cells),
        ("", "ServiceAccount") => p(service_account_columns, service_account_cells),
        ("", "Service") => p(service_columns, service_cells),
        ("", "Endpoints") => p(endpoints_columns, endpoints_cells),
        ("", "Node") => p(node_columns, node_cells),
        ("", "Event") => p(event_columns, event_cells),
        ("events.k8s.io", "Event") => p(event_columns, events_v1_cells),
        ("", "PersistentVolumeClaim") => p(pvc_columns, pvc_cells),
        ("", "PersistentVolume") => p(pv_columns, pv_cells),
        ("apps", "Deployment") => p(deployment_columns, deployment_cells),
        ("apps", "ReplicaSet") => p(replica_set_columns, replica_set_cells),
        ("apps", "StatefulSet") => p(stateful_set_columns, stateful_set_cells),
        ("apps", "DaemonSet") => p(daemon_set_columns, daemon_set_cells),
        ("batch", "Job") => p(job_columns, job_cells),
        ("batch", "CronJob") => p(cron_job_columns, cron_job_cells),
        ("coordination.k8s.io", "Lease") => p(lease_columns, lease_cells),
        ("policy", "PodDisruptionBudget") => p(pdb_columns, pdb_cells),
        ("rbac.authorization.k8s.io", "RoleBinding") => p(role_binding_columns, role_binding_cells),
        ("rbac.authorization.k8s.io", "ClusterRoleBinding") => p(cluster_role_binding_columns, role_binding_cells),
        ("networking.k8s.io", "Ingress") => p(ingress_columns, ingress_cells),
        ("networking.k8s.io", "IngressClass") => p(ingress_class_columns, ingress_class_cells),
        ("networking.k8s.io", "NetworkPolicy") => p(network_policy_columns, network_policy_cells),
        ("discovery.k8s.io", "EndpointSlice") => p(endpoint_slice_columns, endpoint_slice_cells),
        ("storage.k8s.io", "StorageClass") => p(storage_class_columns, storage_class_cells),
        ("scheduling.k8s.io", "PriorityClass") => p(priority_class_columns, priority_class_cells),
        ("admissionregistration.k8s.io", "MutatingWebhookConfiguration" | "ValidatingWebhookConfiguration") => {
            p(webhook_columns, webhook_cells)
        }
        ("rbac.authorization.k8s.io", "Role" | "ClusterRole")
        | ("apiextensions.k8s.io", "CustomResourceDefinition") => Some(Builtin::Default),
        _ => None,
    }
}

// ---------------------------------------------------------------------------------------
// Column helpers

fn col(name: &str, type_: &str, priority: i32, description: &str) -> Column {
    Column {
        name: name.to_owned(),
        type_: type_.to_owned(),
        format: String::new(),
        description: description.to_owned(),
        priority,
        json_path: None,
    }
}

/// The `Name` column every printer starts with.
pub(super) fn name_column() -> Column {
    Column { format: "name".to_owned(), ..col("Name", "string", 0, NAME_DESCRIPTION) }
}

fn age_column() -> Column {
    col("Age", "string", 0, CREATION_TIMESTAMP_DESCRIPTION)
}

// ---------------------------------------------------------------------------------------
// JSON access helpers: missing or mistyped fields read as Go's zero values.

fn at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(v, |cur, key| cur.get(*key))
}

fn str_at<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    at(v, path).and_then(Value::as_str).unwrap_or("")
}

fn opt_str_at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    at(v, path).and_then(Value::as_str)
}

fn int_at(v: &Value, path: &[&str]) -> i64 {
    opt_int_at(v, path).unwrap_or(0)
}

fn opt_int_at(v: &Value, path: &[&str]) -> Option<i64> {
    at(v, path).and_then(|n| {
        n.as_i64()
            // Values beyond i64 cannot come from int32/int64 fields; saturate.
            .or_else(|| n.as_u64().map(|_| i64::MAX))
            .or_else(|| n.as_f64().map(|f| f as i64))
    })
}

fn bool_at(v: &Value, path: &[&str]) -> bool {
    at(v, path).and_then(Value::as_bool).unwrap_or(false)
}

fn arr_at<'a>(v: &'a Value, path: &[&str]) -> &'a [Value] {
    at(v, path).and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[])
}

fn len_at(v: &Value, path: &[&str]) -> i64 {
    let n = match at(v, path) {
        Some(Value::Object(m)) => m.len(),
        Some(Value::Array(a)) => a.len(),
        _ => 0,
    };
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn is_set(v: &Value, path: &[&str]) -> bool {
    at(v, path).is_some_and(|x| !x.is_null())
}

fn name_of(obj: &Value) -> Value {
    Value::String(str_at(obj, &["metadata", "name"]).to_owned())
}

fn age(obj: &Value, now: Timestamp) -> Value {
    Value::String(age_of(opt_str_at(obj, &["metadata", "creationTimestamp"]), now))
}

fn deleting(obj: &Value) -> bool {
    is_set(obj, &["metadata", "deletionTimestamp"])
}

fn s(text: impl Into<String>) -> Value {
    Value::String(text.into())
}

fn or_placeholder(text: &str, placeholder: &str) -> String {
    if text.is_empty() { placeholder.to_owned() } else { text.to_owned() }
}

/// `labels.FormatLabels`: sorted `k=v` pairs, or `<none>`.
fn format_labels(map: Option<&Value>) -> String {
    let pairs: Vec<String> = map
        .and_then(Value::as_object)
        .map(|m| {
            // Sort explicitly: the map may preserve insertion order.
            let sorted: std::collections::BTreeMap<&String, &Value> = m.iter().collect();
            sorted.into_iter().map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or(""))).collect()
        })
        .unwrap_or_default();
    if pairs.is_empty() { "<none>".to_owned() } else { pairs.join(",") }
}

/// `metav1.FormatLabelSelector`: the selector string, `<none>` when it selects
/// everything or nothing, `<error>` when it is invalid.
fn format_label_selector(selector: Option<&Value>) -> String {
    match LabelSelector::from_label_selector(selector.unwrap_or(&Value::Null)) {
        Ok(sel) => or_placeholder(&sel.to_string(), "<none>"),
        Err(_) => "<error>".to_owned(),
    }
}

/// `layoutContainerCells`: container names and images, comma separated.
fn container_cells(containers: &[Value]) -> (Value, Value) {
    let names: Vec<&str> = containers.iter().map(|c| str_at(c, &["name"])).collect();
    let images: Vec<&str> = containers.iter().map(|c| str_at(c, &["image"])).collect();
    (s(names.join(",")), s(images.join(",")))
}

/// A `resource.Quantity` as stored: strings as they are, numbers in decimal, `0` if absent.
fn quantity(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(q)) => q.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => "0".to_owned(),
    }
}

/// `net.JoinHostPort`.
fn join_host_port(host: &str, port: i64) -> String {
    if host.contains(':') { format!("[{host}]:{port}") } else { format!("{host}:{port}") }
}

/// `GetAccessModesAsString`: RWO, ROX, RWX, RWOP in that order, deduplicated.
fn access_modes(modes: &[Value]) -> String {
    let has = |m: &str| modes.iter().any(|v| v.as_str() == Some(m));
    let mut out = Vec::new();
    for (mode, short) in
        [("ReadWriteOnce", "RWO"), ("ReadOnlyMany", "ROX"), ("ReadWriteMany", "RWX"), ("ReadWriteOncePod", "RWOP")]
    {
        if has(mode) {
            out.push(short);
        }
    }
    out.join(",")
}

// ---------------------------------------------------------------------------------------
// Pods

fn pod_columns() -> Vec<Column> {
    vec![
        name_column(),
        col("Ready", "string", 0, "The aggregate readiness state of this pod for accepting traffic."),
        col("Status", "string", 0, "The aggregate status of the containers in this pod."),
        col(
            "Restarts",
            "string",
            0,
            "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
        ),
        age_column(),
        col("IP", "string", 1, "podIP address allocated to the pod."),
        col("Node", "string", 1, "NodeName indicates in which node this pod is scheduled."),
        col(
            "Nominated Node",
            "string",
            1,
            "nominatedNodeName is set only when this pod preempts other pods on the node.",
        ),
        col("Readiness Gates", "string", 1, "If specified, all readiness gates will be evaluated for pod readiness."),
    ]
}

fn has_condition(conditions: &[Value], type_: &str, status: &str) -> bool {
    conditions.iter().any(|c| str_at(c, &["type"]) == type_ && str_at(c, &["status"]) == status)
}

/// The later of two optional timestamps (Go compares against the zero time).
fn later(a: Option<Timestamp>, b: Option<Timestamp>) -> Option<Timestamp> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, y) => x.or(y),
    }
}

fn finished_at(status: &Value) -> Option<Timestamp> {
    opt_str_at(status, &["lastState", "terminated", "finishedAt"]).and_then(parse_timestamp)
}

fn pod_cells(pod: &Value, now: Timestamp) -> Vec<Value> {
    let spec = pod.get("spec").unwrap_or(&Value::Null);
    let status = pod.get("status").unwrap_or(&Value::Null);
    let init_containers = arr_at(spec, &["initContainers"]);
    let is_restartable = |name: &str| {
        init_containers.iter().any(|c| str_at(c, &["name"]) == name && str_at(c, &["restartPolicy"]) == "Always")
    };

    let mut restarts: i64 = 0;
    let mut restartable_init_restarts: i64 = 0;
    let mut total = len_at(spec, &["containers"]);
    let mut ready: i64 = 0;
    let mut last_restart: Option<Timestamp> = None;
    let mut last_restartable_init_restart: Option<Timestamp> = None;

    let phase = str_at(status, &["phase"]);
    let mut reason = phase.to_owned();
    if let Some(r) = opt_str_at(status, &["reason"]).filter(|r| !r.is_empty()) {
        reason = r.to_owned();
    }
    let conditions = arr_at(status, &["conditions"]);
    if conditions.iter().any(|c| str_at(c, &["type"]) == "PodScheduled" && str_at(c, &["reason"]) == "SchedulingGated")
    {
        reason = "SchedulingGated".to_owned();
    }

    total += init_containers.iter().filter(|c| str_at(c, &["restartPolicy"]) == "Always").count() as i64;

    let mut initializing = false;
    for (i, container) in arr_at(status, &["initContainerStatuses"]).iter().enumerate() {
        let restart_count = int_at(container, &["restartCount"]);
        restarts += restart_count;
        last_restart = later(last_restart, finished_at(container));
        let restartable = is_restartable(str_at(container, &["name"]));
        if restartable {
            restartable_init_restarts += restart_count;
            last_restartable_init_restart = later(last_restartable_init_restart, finished_at(container));
        }
        let terminated = at(container, &["state", "terminated"]).filter(|t| !t.is_null());
        let waiting = at(container, &["state", "waiting"]).filter(|w| !w.is_null());
        if terminated.is_some_and(|t| int_at(t, &["exitCode"]) == 0) {
            continue;
        }
        if restartable && bool_at(container, &["started"]) {
            if bool_at(container, &["ready"]) {
                ready += 1;
            }
            continue;
        }
        if let Some(t) = terminated {
            // Initialisation failed.
            let r = str_at(t, &["reason"]);
            reason = if r.is_empty() {
                let signal = int_at(t, &["signal"]);
                if signal != 0 {
                    format!("Init:Signal:{signal}")
                } else {
                    format!("Init:ExitCode:{}", int_at(t, &["exitCode"]))
                }
            } else {
                format!("Init:{r}")
            };
        } else if let Some(w) = waiting.filter(|w| {
            let r = str_at(w, &["reason"]);
            !r.is_empty() && r != "PodInitializing"
        }) {
            reason = format!("Init:{}", str_at(w, &["reason"]));
        } else {
            reason = format!("Init:{i}/{}", init_containers.len());
        }
        initializing = true;
        break;
    }

    if !initializing || has_condition(conditions, "Initialized", "True") {
        restarts = restartable_init_restarts;
        last_restart = last_restartable_init_restart;
        let mut has_running = false;
        for container in arr_at(status, &["containerStatuses"]).iter().rev() {
            restarts += int_at(container, &["restartCount"]);
            last_restart = later(last_restart, finished_at(container));
            let waiting_reason = opt_str_at(container, &["state", "waiting", "reason"]).unwrap_or("");
            let terminated = at(container, &["state", "terminated"]).filter(|t| !t.is_null());
            if !waiting_reason.is_empty() {
                reason = waiting_reason.to_owned();
            } else if let Some(t) = terminated {
                let r = str_at(t, &["reason"]);
                reason = if !r.is_empty() {
                    r.to_owned()
                } else if int_at(t, &["signal"]) != 0 {
                    format!("Signal:{}", int_at(t, &["signal"]))
                } else {
                    format!("ExitCode:{}", int_at(t, &["exitCode"]))
                };
            } else if bool_at(container, &["ready"]) && is_set(container, &["state", "running"]) {
                has_running = true;
                ready += 1;
            }
        }
        // A pod whose containers reported Completed but one still runs is Running again.
        if reason == "Completed" && has_running {
            reason =
                if has_condition(conditions, "Ready", "True") { "Running".to_owned() } else { "NotReady".to_owned() };
        }
    }

    if deleting(pod) && str_at(status, &["reason"]) == "NodeLost" {
        reason = "Unknown".to_owned();
    } else if deleting(pod) && phase != "Succeeded" && phase != "Failed" {
        reason = "Terminating".to_owned();
    }

    let restarts_text = match last_restart {
        Some(ts) if restarts != 0 => format!("{restarts} ({} ago)", human_since(ts, now)),
        _ => restarts.to_string(),
    };

    // Upstream reads podIPs only; the kubelet always writes podIP and podIPs together,
    // so falling back to podIP shows the same address for objects written by hand.
    let pod_ip = arr_at(status, &["podIPs"])
        .first()
        .map(|ip| str_at(ip, &["ip"]))
        .filter(|ip| !ip.is_empty())
        .or_else(|| opt_str_at(status, &["podIP"]).filter(|ip| !ip.is_empty()))
        .unwrap_or("<none>");
    let gates = arr_at(spec, &["readinessGates"]);
    let readiness_gates = if gates.is_empty() {
        "<none>".to_owned()
    } else {
        let true_conditions = gates
            .iter()
            .filter(|g| {
                let wanted = str_at(g, &["conditionType"]);
                conditions
                    .iter()
                    .find(|c| str_at(c, &["type"]) == wanted)
                    .is_some_and(|c| str_at(c, &["status"]) == "True")
            })
            .count();
        format!("{true_conditions}/{}", gates.len())
    };

    vec![
        name_of(pod),
        s(format!("{ready}/{total}")),
        s(reason),
        s(restarts_text),
        age(pod, now),
        s(pod_ip),
        s(or_placeholder(str_at(spec, &["nodeName"]), "<none>")),
        s(or_placeholder(str_at(status, &["nominatedNodeName"]), "<none>")),
        s(readiness_gates),
    ]
}

// ---------------------------------------------------------------------------------------
// Simple core kinds

fn namespace_columns() -> Vec<Column> {
    vec![name_column(), col("Status", "string", 0, "The status of the namespace"), age_column()]
}

fn namespace_cells(obj: &Value, now: Timestamp) -> Vec<Value> {
    vec![name_of(obj), s(str_at(obj, &["status", "phase"])), age(obj, now)]
}

fn config_map_columns() -> Vec<Column> {
    vec![name_column(), col("Data", "string", 0, "Data contains the configuration data."), age_column()]
}

fn config_map_cells(obj: &Value, now: Timestamp) -> Vec<Value> {
    let data = len_at(obj, &["data"]) + len_at(obj, &["binaryData"]);
    vec![name_of(obj), json!(data), age(obj, now)]
}

fn secret_columns() -> Vec<Column> {
    vec![
        name_column(),
        col("Type", "string", 0, "Used to facilitate programmatic handling of secret data."),
        col("Data", "string", 0, "Data contains the secret data."),
        age_column(),
    ]
}

fn secret_cells(obj: &Value, now: Timestamp) -> Vec<Value> {
    let type_ = or_placeholder(str_at(obj, &["type"]), "Opaque");
    vec![name_of(obj), s(type_), json!(len_at(obj, &["data"])), age(obj, now)]
}

fn service_account_columns() -> Vec<Column> {
    vec![
        name_column(),
        col(
            "Secrets",
            "string",
            0,
            "Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed to use.",
        ),
        age_column(),
    ]
}

fn service_account_cells(obj: &Value, now: Timestamp) -> Vec<Value> {
    vec![name_of(obj), json!(len_at(obj, &["secrets"])), age(obj, now)]
}

// ---------------------------------------------------------------------------------------
// Services and endpoints

fn service_columns() -> Vec<Column> {
    vec![
        name_column(),
        col("Type", "string", 0, "type determines how the Service is exposed."),
        col("Cluster-IP", "string", 0, "clusterIP is the IP address of the service."),
        col(
            "External-IP",
            "string",
            0,
            "externalIPs is a list of IP addresses for which nodes in the cluster will also accept traffic for this service.",
        ),
        col("Port(s)", "string", 0, "The list of ports that are exposed by this service."),
        age_column(),
        col(
            "Selector",
            "string",
            1,
            "Route service traffic to pods with label keys and values matching this selector.",
        ),
    ]
}

/// `loadBalancerStatusStringer` with `wide` (no clipping): unique IPs or hostnames.
fn load_balancer_addresses(ingress: &[Value]) -> String {
    let mut seen = Vec::new();
    for entry in ingress {
        let ip = str_at(entry, &["ip"]);
        let address = if ip.is_empty() { str_at(entry, &["hostname"]) } else { ip };
        if !address.is_empty() && !seen.contains(&address) {
            seen.push(address);
        }
    }
    seen.join(",")
}

fn service_cells(obj: &Value, now: Timestamp) -> Vec<Value> {
    let spec = obj.get("spec").unwrap_or(&Value::Null);
    let type_ = or_placeholder(str_at(spec, &["type"]), "ClusterIP");
    let cluster_ip = arr_at(spec, &["clusterIPs"])
        .first()
        .and_then(Value::as_str)
        .or_else(|| opt_str_at(spec, &["clusterIP"]))
        .filter(|ip| !ip.is_empty())
        .unwrap_or("<none>")
        .to_owned();
    let external: Vec<&str> = arr_at(spec, &["externalIPs"]).iter().filter_map(Value::as_str).collect();
    let external_ip = match type_.as_str() {
        "ClusterIP" | "NodePort" => {
            if external.is_empty() {
                "<none>".to_owned()
            } else {
                external.join(",")
            }
        }
        "LoadBalancer" => {
            let lb = load_balancer_addresses(arr_at(obj, &["status", "loadBalancer", "ingress"]));
            if !external.is_empty() {
                let mut all: Vec<&str> = if lb.is_empty() { Vec::new() } else { lb.split(',').collect() };
                all.extend(external.iter().copied());
                all.join(",")
            } else if !lb.is_empty() {
                lb
            } else {
                "<pending>".to_owned()
            }
        }
        "ExternalName" => str_at(spec, &["externalName"]).to_owned(),
        _ => "<unknown>".to_owned(),
    };
    let ports: Vec<String> = arr_at(spec, &["ports"])
        .iter()
        .map(|p| {
            let port = int_at(p, &["port"]);
            let protocol = or_placeholder(str_at(p, &["protocol"]), "TCP");
            let node_port = int_at(p, &["nodePort"]);
            if node_port > 0 { format!("{port}:{node_port}/{protocol}") } else { format!("{port}/{protocol}") }
        })
        .collect();
    vec![
        name_of(obj),
        s(type_),
        s(cluster_ip),
        s(external_ip),
        s(or_placeholder(&ports.join(","), "<none>")),
        age(obj, now),
        s(format_labels(spec.get("selector"))),
    ]
}

fn endpoints_columns() -> Vec<Column> {
    vec![
        name_column(),
        col("Endpoints", "string", 0, "The set of all endpoints is the union of all subsets."),
        age_column(),
    ]
}

/// `formatEndpoints` with all ports: at most three `ip:port` entries then `+ N more...`.
fn format_endpoints(obj: &Value) -> String {
    let subsets = arr_at(obj, &["subsets"]);
    if subsets.is_empty() {
        return "<none>".to_owned();
    }
    const MAX: usize = 3;
    let mut list: Vec<String> = Vec::new();
    let mut more = false;
    let mut count = 0usize;
    for subset in subsets {
        let addresses = arr_at(subset, &["addresses"]);
        let ports = arr_at(subset, &["ports"]);
        if ports.is_empty() {
            // Headless services may have no ports.
            count += addresses.len();
            for address in addresses {
                if list.len() == MAX {
                    more = true;
                    break;
                }
                list.push(str_at(address, &["ip"]).to_owned());
            }
            continue;
        }
        for port in ports {
            count += addresses.len();
            for address in addresses {
                if list.len() == MAX {
                    more = true;
                    break;
                }
                list.push(join_host_port(str_at(address, &["ip"]), int_at(port, &["port"])));
            }
        }
    }
    let joined = list.join(",");
    if more { format!("{joined} + {} more...", count.saturating_sub(MAX)) } else { joined }
}

fn endpoints_cells(obj: &Value, now: Timestamp) -> Vec<Value> {
    vec![name_of(obj), s(format_endpoints(obj)), age(obj, now)]
}

fn endpoint_slice_columns() -> Vec<Column> {
    vec![
        name_column(),
        col("AddressType", "string", 0, "addressType specifies the type of address carried by this EndpointSlice."),
        col("Ports", "string", 0, "ports specifies the list of network ports exposed by each endpoint in this slice."),
        col("Endpoints", "string", 0, "endpoints is a list of unique endpoints in this slice."),
        age_column(),
    ]
}

/// `listWithMoreString`.
fn list_with_more(list: &[String], more: bool, count: usize, max: usize) -> String {
    let joined = list.join(",");
    if more {
        return format!("{joined} + {} more...", count.saturating_sub(max));
    }
    or_placeholder(&joined, "<unset>")
}

fn endpoint_slice_cells(obj: &Value, now: Timestamp) -> Vec<Value> {
    const MAX: usize = 3;
    let ports = arr_at(obj, &["ports"]);
    let port_list: Vec<String> = ports
        .iter()
        .take(MAX)
        .map(|p| match opt_int_at(p, &["port"]) {
            Some(n) => n.to_string(),
            None => opt_str_at(p, &["name"]).map_or_else(|| "*".to_owned(), str::to_owned),
        })
        .collect();
    let addresses: Vec<&Value> = arr_at(obj, &["endpoints"]).iter().flat_map(|e| arr_at(e, &["addresses"])).collect();
    let address_list: Vec<String> = addresses.iter().take(MAX).map(|a| a.as_str().unwrap_or("").to_owned()).collect();
    vec![
        name_of(obj),
        s(str_at(obj, &["addressType"])),
        s(list_with_more(&port_list, ports.len() > MAX, ports.len(), MAX)),
        s(list_with_more(&address_list, addresses.len() > MAX, addresses.len(), MAX)),
        age(obj, now),
    ]
}

// ---------------------------------------------------------------------------------------
// Nodes

fn node_columns() -> Vec<Column> {
    vec![
        name_column(),
        col("Status", "string", 0, "The status of the node"),
        col("Roles", "string", 0, "The roles of the node"),
        age_column(),
        col("Version", "string", 0, "Kubelet Version reported by the node."),
        col("Internal-IP", "string", 1, "List of addresses reachable to the node."),
        col("External-IP", "string", 1, "List of addresses reachable to the node."),
        col(
            "OS-Image",
            "string",
            1,
            "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).",
        ),
        col(
            "Kernel-Version",
            "string",
            1,
            "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).",
        ),
        col(
            "Container-Runtime",
            "string",
            1,
            "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2).",
        ),
    ]
}

fn node_address(node: &Value, type_: &str) -> String {
    arr_at(node, &["status", "addresses"])
        .iter()
        .find(|a| str_at(a, &["type"]) == type_)
        .map_or_else(|| "<none>".to_owned(), |a| str_at(a, &["address"]).to_owned())
}

fn node_cells(node: &Value, now: Timestamp) -> Vec<Value> {
    let mut status: Vec<String> = Vec::new();
    // Upstream keeps the last condition of each type; only Ready is reported.
    if let Some(ready) = arr_at(node, &["status", "conditions"]).iter().rev().find(|c| str_at(c, &["type"]) == "Ready")
    {
        if str_at(ready, &["status"]) == "True" {
            status.push("Ready".to_owned());
        } else {
            status.push("NotReady".to_owned());
        }
    }
    if status.is_empty() {
        status.push("Unknown".to_owned());
    }
    if bool_at(node, &["spec", "unschedulable"]) {
        status.push("SchedulingDisabled".to_owned());
    }

    // Roles come from `node-role.kubernetes.io/<role>` keys and the `kubernetes.io/role`
    // value. Upstream emits them in map order; they are sorted here for stable output.
    let mut roles = BTreeSet::new();
    if let Some(labels) = at(node, &["metadata", "labels"]).and_then(Value::as_object) {
        for (k, v) in labels {
            if let Some(role) = k.strip_prefix("node-role.kubernetes.io/") {
                if !role.is_empty() {
                    roles.insert(role.to_owned());
                }
            } else if let Some(v) = v.as_str().filter(|v| k == "kubernetes.io/role" && !v.is_empty()) {
                roles.insert(v.to_owned());
            }
        }
    }
    let roles = or_placeholder(&roles.into_iter().collect::<Vec<_>>().join(","), "<none>");
    let info = |field: &str| s(or_placeholder(str_at(node, &["status", "nodeInfo", field]), "<unknown>"));
    vec![
        name_of(node),
        s(status.join(",")),
        s(roles),
        age(node, now),
        s(str_at(node, &["status", "nodeInfo", "kubeletVersion"])),
        s(node_address(node, "InternalIP")),
        s(node_address(node, "ExternalIP")),
        info("osImage"),
        info("kernelVersion"),
        info("containerRuntimeVersion"),
    ]
}

// ---------------------------------------------------------------------------------------
// Events

fn event_columns() -> Vec<Column> {
    vec![
        col("Last Seen", "string", 0, "The time at which the most recent occurrence of this event was recorded."),
        col("Type", "string", 0, "Type of this event (Normal, Warning), new types could be added in the future"),
        col(
            "Reason",
            "string",
            0,
            "This should be a short, machine understandable string that gives the reason for the transition into the object's current status.",
        ),
        col("Object", "string", 0, "The object that this event is about."),
        col(
            "Subobject",
            "string",
            1,
            "If referring to a piece of an object instead of an entire object, this string should contain a valid JSON/Go field access statement.",
        ),
        col(
            "Source",
            "string",
            1,
            "The component reporting this event. Should be a short machine understandable string.",
        ),
        col("Message", "string", 0, "A human-readable description of the status of this operation."),
        col(
            "First Seen",
            "string",
            1,
            "The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)",
        ),
        col("Count", "string", 1, "The number of times this event has occurred."),
        Column { priority: 1, ..name_column() },
    ]
}

/// `printEvent` on a core/v1 Event.
fn event_cells(obj: &Value, now: Timestamp) -> Vec<Value> {
    let event_time = opt_str_at(obj, &["eventTime"]);
    let first_timestamp = match opt_str_at(obj, &["firstTimestamp"]).and_then(parse_timestamp) {
        Some(ts) => human_since(ts, now),
        None => age_of(event_time, now),
    };
    let mut last_timestamp = match opt_str_at(obj, &["lastTimestamp"]).and_then(parse_timestamp) {
        Some(ts) => human_since(ts, now),
        None => first_timestamp.clone(),
    };
    let mut count = int_at(obj, &["count"]);
    if is_set(obj, &["series"]) {
        last_timestamp = age_of(opt_str_at(obj, &["series", "lastObservedTime"]), now);
        count = int_at(obj, &["series", "count"]);
    } else if count == 0 {
        // Singleton events written through events.k8s.io have no count.
        count = 1;
    }
    let kind = str_at(obj, &["involvedObject", "kind"]).to_lowercase();
    let involved_name = str_at(obj, &["involvedObject", "name"]);
    let target = if involved_name.is_empty() { kind } else { format!("{kind}/{involved_name}") };
    let first_non_empty = |a: &str, b: &str| {
        if a.is_empty() { b.to_owned() } else { a.to_owned() }
    };
    let component = first_non_empty(str_at(obj, &["source", "component"]), str_at(obj, &["reportingComponent"]));
    let instance = first_non_empty(str_at(obj, &["source", "host"]), str_at(obj, &["reportingInstance"]));
    let source = if instance.is_empty() { component } else { format!("{component}, {instance}") };
    vec![
        s(last_timestamp),
        s(str_at(obj, &["type"])),
        s(str_at(obj, &["reason"])),
        s(target),
        s(str_at(obj, &["involvedObject", "fieldPath"])),
        s(source),
        s(str_at(obj, &["message"]).trim()),
        s(first_timestamp),
        json!(count),
        name_of(obj),
    ]
}

/// events.k8s.io/v1 Events are the same objects as core/v1 Events upstream (one storage,
/// converted per version), so their table is the core one. Map the renamed fields back.
fn events_v1_cells(obj: &Value, now: Timestamp) -> Vec<Value> {
    let field = |path: &[&str]| at(obj, path).cloned().unwrap_or(Value::Null);
    let core = json!({
        "metadata": field(&["metadata"]),
        "involvedObject": field(&["regarding"]),
        "reason": field(&["reason"]),
        "message": field(&["note"]),
        "source": field(&["deprecatedSource"]),
        "firstTimestamp": field(&["deprecatedFirstTimestamp"]),
        "lastTimestamp": field(&["deprecatedLastTimestamp"]),
        "count": field(&["deprecatedCount"]),
        "type": field(&["type"]),
        "eventTime": field(&["eventTime"]),
        "series": field(&["series"]),
        "reportingComponent": field(&["reportingController"]),
        "reportingInstance": field(&["reportingInstance"]),
    });
    event_cells(&core, now)
}

// ---------------------------------------------------------------------------------------
// Storage

fn pvc_columns() -> Vec<Column> {
    vec![
        name_column(),
        col("Status", "string", 0, "phase represents the current phase of PersistentVolumeClaim."),
        col("Volume", "string", 0, "volumeName is the binding reference to the PersistentVolume backing this claim."),
        col("Capacity", "string", 0, "capacity represents the actual resources of the underlying volume."),
        col(
            "Access Modes",
            "string",
            0,
            "accessModes contains the actual access modes the volume backing the PVC has.",
        ),
        col("StorageClass", "string", 0, "StorageClass of the pvc"),
        col("VolumeAttributesClass", "string", 0, "VolumeAttributesClass of the pvc"),
        age_column(),
        col("VolumeMode", "string", 1, "volumeMode defines what type of volume is required by the claim."),
    ]
}

fn pvc_cells(obj: &Value, now: Timestamp) -> Vec<Value> {
    let phase = if deleting(obj) { "Terminating" } else { str_at(obj, &["status", "phase"]) };
    let volume_name = str_at(obj, &["spec", "volumeName"]);
    let (capacity, modes) = if volume_name.is_empty() {
        (String::new(), String::new())
    } else {
        (quantity(at(obj, &["status", "capacity", "storage"])), access_modes(arr_at(obj, &["status", "accessModes"])))
    };
    let class = opt_str_at(obj, &["metadata", "annotations", "volume.beta.kubernetes.io/storage-class"])
        .or_else(|| opt_str_at(obj, &["spec", "storageClassName"]))
        .unwrap_or("");
    vec![
        name_of(obj),
        s(phase),
        s(volume_name),
        s(capacity),
        s(modes),
        s(class),
        s(opt_str_at(obj, &["spec", "volumeAttributesClassName"]).unwrap_or("<unset>")),
        age(obj, now),
        s(opt_str_at(obj, &["spec", "volumeMode"]).unwrap_or("<unset>")),
    ]
}

fn pv_columns() -> Vec<Column> {
    vec![
        name_column(),
        col("Capacity", "string", 0, "capacity is the description of the persistent volume's resources and capacity."),
        col("Access Modes", "string", 0, "accessModes contains all ways the volume can be mounted."),
        col(
            "Reclaim Policy",
            "string",
            0,
            "persistentVolumeReclaimPolicy defines what happens to a persistent volume when released from its claim.",
        ),
        col(
            "Status",
            "string",
            0,
            "phase indicates if a volume is available, bound to a claim, or released by a claim.",
        ),
        col(
            "Claim",
            "string",
            0,
            "claimRef is part of a bi-directional binding between PersistentVolume and PersistentVolumeClaim.",
        ),
        col("StorageClass", "string", 0, "StorageClass of the pv"),
        col("VolumeAttributesClass", "string", 0, "VolumeAttributesClass of the pv"),
        col(
            "Reason",
            "string",
            0,
            "reason is a brief CamelCase string that describes any failure and is meant for machine parsing and tidy display in the CLI.",
        ),
        age_column(),
        col(
            "VolumeMode",
            "string",
            1,
            "volumeMode defines if a volume is intended to be used with a formatted filesystem or to remain in raw block state.",
        ),
    ]
}

fn pv_cells(obj: &Value, now: Timestamp) -> Vec<Value> {
    let claim = match at(obj, &["spec", "claimRef"]).filter(|c| !c.is_null()) {
        Some(c) => format!("{}/{}", str_at(c, &["namespace"]), str_at(c, &["name"])),
        None => String::new(),
    };
    let phase = if deleting(obj) { "Terminating" } else { str_at(obj, &["status", "phase"]) };
    let class = opt_str_at(obj, &["metadata", "annotations", "volume.beta.kubernetes.io/storage-class"])
        .unwrap_or_else(|| str_at(obj, &["spec", "storageClassName"]));
    vec![
        name_of(obj),
        s(quantity(at(obj, &["spec", "capacity", "storage"]))),
        s(access_modes(arr_at(obj, &["spec", "accessModes"]))),
        s(str_at(obj, &["spec", "persistentVolumeReclaimPolicy"])),
        s(phase),
        s(claim),
        s(class),
        s(opt_str_at(obj, &["spec", "volumeAttributesClassName"]).unwrap_or("<unset>")),
        s(str_at(obj, &["status", "reason"])),
        age(obj, now),
        s(opt_str_at(obj, &["spec", "volumeMode"]).unwrap_or("<unset>")),
    ]
}

fn storage_class_columns() -> Vec<Column> {
    vec![
        name_column(),
        col("Provisioner", "string", 0, "provisioner indicates the type of the provisioner."),
        col(
            "ReclaimPolicy",
            "string",
            0,
            "reclaimPolicy controls the reclaimPolicy for dynamically provisioned PersistentVolumes of this storage class.",
        ),
        col(
            "VolumeBindingMode",
            "string",
            0,
            "volumeBindingMode indicates how PersistentVolumeClaims should be provisioned and bound.",
        ),
        col(
            "AllowVolumeExpansion",
            "string",
            0,
            "allowVolumeExpansion shows whether the storage class allow volume expand.",
        ),
        age_column(),
    ]
}

fn storage_class_cells(obj: &Value, now: Timestamp) -> Vec<Value> {
    let is_default =
        ["storageclass.kubernetes.io/is-default-class", "storageclass.beta.kubernetes.io/is-default-class"]
            .iter()
            .any(|a| str_at(obj, &["metadata", "annotations", a]) == "true");
    let mut name = str_at(obj, &["metadata", "name"]).to_owned();
    if is_default {
        name.push_str(" (default)");
    }
    vec![
        s(name),
        s(str_at(obj, &["provisioner"])),
        s(opt_str_at(obj, &["reclaimPolicy"]).unwrap_or("Delete")),
        s(opt_str_at(obj, &["volumeBindingMode"]).unwrap_or("Immediate")),
        Value::Bool(bool_at(obj, &["allowVolumeExpansion"])),
        age(obj, now),
    ]
}

// ---------------------------------------------------------------------------------------
// Workloads

fn deployment_columns() -> Vec<Column> {
    vec![
        name_column(),
        col("Ready", "string", 0, "Number of the pod with ready state"),
        col(
            "Up-to-date",
            "string",
            0,
            "Total number of non-terminating pods targeted by this deployment that have the desired template spec.",
        ),
        col(
            "Available",
            "string",
            0,
            "Total number of available non-terminating pods (ready for at least minReadySeconds) targeted by this deployment.",
        ),
        age_column(),
        col("Containers", "string", 1, CONTAINERS_DESCRIPTION),
        col("Images", "string", 1, IMAGES_DESCRIPTION),
        col("Selector", "string", 1, "Label selector for pods."),
    ]
}

/// `spec.replicas` as a defaulted object has it (1 when absent).
fn desired_replicas(obj: &Value) -> i64 {
    opt_int_at(obj, &["spec", "replicas"]).unwrap_or(1)
}

fn deployment_cells(obj: &Value, now: Timestamp) -> Vec<Value> {
    let (names, images) = container_cells(arr_at(obj, &["spec", "template", "spec", "containers"]));
    // Unlike the other workloads, Deployment prints `selector.String()` without `<none>`.
    let selector = match LabelSelector::from_label_selector(at(obj, &["spec", "selector"]).unwrap_or(&Value::Null)) {
        Ok(sel) => sel.to_string(),
        Err(_) => "<invalid>".to_owned(),
    };
    vec![
        name_of(obj),
        s(format!("{}/{}", int_at(obj, &["status", "readyReplicas"]), desired_replicas(obj))),
        json!(int_at(obj, &["status", "updatedReplicas"])),
        json!(int_at(obj, &["status", "availableReplicas"])),
        age(obj, now),
        names,
        images,
        s(selector),
    ]
}

fn replica_set_columns() -> Vec<Column> {
    vec![
        name_column(),
        col("Desired", "integer", 0, "Replicas is the number of desired pods."),
        col("Current", "integer", 0, "Replicas is the most recently observed number of non-terminating pods."),
        col(
            "Ready",
            "integer",
            0,
            "The number of non-terminating pods targeted by this ReplicaSet with a Ready Condition.",
        ),
        age_column(),
        col("Containers", "string", 1, CONTAINERS_DESCRIPTION),
        col("Images", "string", 1, IMAGES_DESCRIPTION),
        col("Selector", "string", 1, "Selector is a label query over pods that should match the replica count."),
    ]
}

fn replica_set_cells(obj: &Value, now: Timestamp) -> Vec<Value> {
    let (names, images) = container_cells(arr_at(obj, &["spec", "template", "spec", "containers"]));
    vec![
        name_of(obj),
        json!(desired_replicas(obj)),
        json!(int_at(obj, &["status", "replicas"])),
        json!(int_at(obj, &["status", "readyReplicas"])),
        age(obj, now),
        names,
        images,
        s(format_label_selector(at(obj, &["spec", "selector"]))),
    ]
}

fn stateful_set_columns() -> Vec<Column> {
    vec![
        name_column(),
        col("Ready", "string", 0, "Number of the pod with ready state"),
        age_column(),
        col("Containers", "string", 1, CONTAINERS_DESCRIPTION),
        col("Images", "string", 1, IMAGES_DESCRIPTION),
    ]
}

fn stateful_set_cells(obj: &Value, now: Timestamp) -> Vec<Value> {
    let (names, images) = container_cells(arr_at(obj, &["spec", "template", "spec", "containers"]));
    vec![
        name_of(obj),
        s(format!("{}/{}", int_at(obj, &["status", "readyReplicas"]), desired_replicas(obj))),
        age(obj, now),
        names,
        images,
    ]
}

fn daemon_set_columns() -> Vec<Column> {
    vec![
        name_column(),
        col("Desired", "integer", 0, "The total number of nodes that should be running the daemon pod."),
        col(
            "Current",
            "integer",
            0,
            "The number of nodes that are running at least 1 daemon pod and are supposed to run the daemon pod.",
        ),
        col(
            "Ready",
            "integer",
            0,
            "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running with a Ready Condition.",
        ),
        col("Up-to-date", "integer", 0, "The total number of nodes that are running updated daemon pod."),
        col(
            "Available",
            "integer",
            0,
            "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and available.",
        ),
        col(
            "Node Selector",
            "string",
            0,
            "NodeSelector is a selector which must be true for the pod to fit on a node.",
        ),
        age_column(),
        col("Containers", "string", 1, CONTAINERS_DESCRIPTION),
        col("Images", "string", 1, IMAGES_DESCRIPTION),
        col("Selector", "string", 1, "A label query over pods that are managed by the daemon set."),
    ]
}

fn daemon_set_cells(obj: &Value, now: Timestamp) -> Vec<Value> {
    let (names, images) = container_cells(arr_at(obj, &["spec", "template", "spec", "containers"]));
    let status = |f: &str| json!(int_at(obj, &["status", f]));
    vec![
        name_of(obj),
        status("desiredNumberScheduled"),
        status("currentNumberScheduled"),
        status("numberReady"),
        status("updatedNumberScheduled"),
        status("numberAvailable"),
        s(format_labels(at(obj, &["spec", "template", "spec", "nodeSelector"]))),
        age(obj, now),
        names,
        images,
        s(format_label_selector(at(obj, &["spec", "selector"]))),
    ]
}

fn job_columns() -> Vec<Column> {
    vec![
        name_column(),
        col("Status", "string", 0, "Status of the job."),
        col("Completions", "string", 0, "The number of pods which reached phase Succeeded."),
        col("Duration", "string", 0, "Time required to complete the job."),
        age_column(),
        col("Containers", "string", 1, CONTAINERS_DESCRIPTION),
        col("Images", "string", 1, IMAGES_DESCRIPTION),
        col("Selector", "string", 1, "A label query over pods that should match the pod count."),
    ]
}

/// `hasJobCondition`: the first condition of that type decides.
fn job_condition(obj: &Value, type_: &str) -> bool {
    arr_at(obj, &["status", "conditions"])
        .iter()
        .find(|c| str_at(c, &["type"]) == type_)
        .is_some_and(|c| str_at(c, &["status"]) == "True")
}

fn job_cells(obj: &Value, now: Timestamp) -> Vec<Value> {
    let succeeded = int_at(obj, &["status", "succeeded"]);
    let completions = match opt_int_at(obj, &["spec", "completions"]) {
        Some(c) => format!("{succeeded}/{c}"),
        None => {
            let parallelism = int_at(obj, &["spec", "parallelism"]);
            if parallelism > 1 { format!("{succeeded}/1 of {parallelism}") } else { format!("{succeeded}/1") }
        }
    };
    let start = opt_str_at(obj, &["status", "startTime"]).and_then(parse_timestamp);
    let completion = opt_str_at(obj, &["status", "completionTime"]).and_then(parse_timestamp);
    let duration = match (start, completion) {
        (None, _) => String::new(),
        (Some(st), None) => human_since(st, now),
        (Some(st), Some(done)) => human_duration_nanos(done.as_nanosecond() - st.as_nanosecond()),
    };
    let status = if job_condition(obj, "Complete") {
        "Complete"
    } else if job_condition(obj, "Failed") {
        "Failed"
    } else if deleting(obj) {
        "Terminating"
    } else if job_condition(obj, "Suspended") {
        "Suspended"
    } else if job_condition(obj, "FailureTarget") {
        "FailureTarget"
    } else {
        "Running"
    };
    let (names, images) = container_cells(arr_at(obj, &["spec", "template", "spec", "containers"]));
    vec![
        name_of(obj),
        s(status),
        s(completions),
        s(duration),
        age(obj, now),
        names,
        images,
        s(format_label_selector(at(obj, &["spec", "selector"]))),
    ]
}

fn cron_job_columns() -> Vec<Column> {
    vec![
        name_column(),
        col("Schedule", "string", 0, "The schedule in Cron format."),
        col("Timezone", "string", 0, "The time zone name for the given schedule."),
        col("Suspend", "boolean", 0, "This flag tells the controller to suspend subsequent executions."),
        col("Active", "integer", 0, "A list of pointers to currently running jobs."),
        col("Last Schedule", "string", 0, "Information when was the last time the job was successfully scheduled."),
        age_column(),
        col("Containers", "string", 1, CONTAINERS_DESCRIPTION),
        col("Images", "string", 1, IMAGES_DESCRIPTION),
        col("Selector", "string", 1, "A label query over pods that should match the pod count."),
    ]
}

fn cron_job_cells(obj: &Value, now: Timestamp) -> Vec<Value> {
    // printBoolPtr: the cell is text even though the column is typed boolean.
    let suspend = match at(obj, &["spec", "suspend"]).and_then(Value::as_bool) {
        Some(true) => "True",
        Some(false) => "False",
        None => "<unset>",
    };
    let last_schedule = match opt_str_at(obj, &["status", "lastScheduleTime"]) {
        Some(ts) => age_of(Some(ts), now),
        None => "<none>".to_owned(),
    };
    let template = at(obj, &["spec", "jobTemplate", "spec"]).unwrap_or(&Value::Null);
    let (names, images) = container_cells(arr_at(template, &["template", "spec", "containers"]));
    vec![
        name_of(obj),
        s(str_at(obj, &["spec", "schedule"])),
        s(opt_str_at(obj, &["spec", "timeZone"]).unwrap_or("<none>")),
        s(suspend),
        json!(len_at(obj, &["status", "active"])),
        s(last_schedule),
        age(obj, now),
        names,
        images,
        s(format_label_selector(template.get("selector"))),
    ]
}

fn pdb_columns() -> Vec<Column> {
    vec![
        name_column(),
        col("Min Available", "string", 0, "The minimum number of pods that must be available."),
        col("Max Unavailable", "string", 0, "The maximum number of pods that may be unavailable."),
        col("Allowed Disruptions", "integer", 0, "Calculated number of pods that may be disrupted at this time."),
        age_column(),
    ]
}

/// An `IntOrString` as `intstr.String()` prints it, `N/A` when unset.
fn int_or_string(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => "N/A".to_owned(),
    }
}

fn pdb_cells(obj: &Value, now: Timestamp) -> Vec<Value> {
    vec![
        name_of(obj),
        s(int_or_string(at(obj, &["spec", "minAvailable"]))),
        s(int_or_string(at(obj, &["spec", "maxUnavailable"]))),
        json!(int_at(obj, &["status", "disruptionsAllowed"])),
        age(obj, now),
    ]
}

fn priority_class_columns() -> Vec<Column> {
    vec![
        name_column(),
        col("Value", "integer", 0, "value represents the integer value of this priority class."),
        col(
            "Global-Default",
            "boolean",
            0,
            "globalDefault specifies whether this PriorityClass should be considered as the default priority for pods that do not have any priority class.",
        ),
        age_column(),
        col("PreemptionPolicy", "string", 0, "preemptionPolicy is the Policy for preempting pods with lower priority."),
    ]
}

fn priority_class_cells(obj: &Value, now: Timestamp) -> Vec<Value> {
    vec![
        name_of(obj),
        json!(int_at(obj, &["value"])),
        Value::Bool(bool_at(obj, &["globalDefault"])),
        age(obj, now),
        s(str_at(obj, &["preemptionPolicy"])),
    ]
}

// ---------------------------------------------------------------------------------------
// Coordination, RBAC, networking, admission

fn lease_columns() -> Vec<Column> {
    vec![
        name_column(),
        col("Holder", "string", 0, "holderIdentity contains the identity of the holder of a current lease."),
        age_column(),
    ]
}

fn lease_cells(obj: &Value, now: Timestamp) -> Vec<Value> {
    vec![name_of(obj), s(str_at(obj, &["spec", "holderIdentity"])), age(obj, now)]
}

fn binding_columns(what: &str) -> Vec<Column> {
    vec![
        name_column(),
        col(
            "Role",
            "string",
            0,
            "RoleRef can reference a Role in the current namespace or a ClusterRole in the global namespace.",
        ),
        age_column(),
        col("Users", "string", 1, &format!("Users in the {what}")),
        col("Groups", "string", 1, &format!("Groups in the {what}")),
        col("ServiceAccounts", "string", 1, &format!("ServiceAccounts in the {what}")),
    ]
}

fn role_binding_columns() -> Vec<Column> {
    binding_columns("roleBinding")
}

fn cluster_role_binding_columns() -> Vec<Column> {
    binding_columns("clusterRoleBinding")
}

fn role_binding_cells(obj: &Value, now: Timestamp) -> Vec<Value> {
    let role = format!("{}/{}", str_at(obj, &["roleRef", "kind"]), str_at(obj, &["roleRef", "name"]));
    let (mut users, mut groups, mut service_accounts) = (Vec::new(), Vec::new(), Vec::new());
    for subject in arr_at(obj, &["subjects"]) {
        let name = str_at(subject, &["name"]);
        match str_at(subject, &["kind"]) {
            "ServiceAccount" => service_accounts.push(format!("{}/{name}", str_at(subject, &["namespace"]))),
            "User" => users.push(name.to_owned()),
            "Group" => groups.push(name.to_owned()),
            _ => {}
        }
    }
    vec![
        name_of(obj),
        s(role),
        age(obj, now),
        s(users.join(", ")),
        s(groups.join(", ")),
        s(service_accounts.join(", ")),
    ]
}

fn ingress_columns() -> Vec<Column> {
    vec![
        name_column(),
        col(
            "Class",
            "string",
            0,
            "The name of the IngressClass resource that should be used for additional configuration",
        ),
        col("Hosts", "string", 0, "Hosts that incoming requests are matched against before the ingress rule"),
        col("Address", "string", 0, "Address is a list containing ingress points for the load-balancer"),
        col("Ports", "string", 0, "Ports of TLS configurations that open"),
        age_column(),
    ]
}

/// `formatHosts`: up to three hosts, `*` when none is named.
fn format_hosts(rules: &[Value]) -> String {
    const MAX: usize = 3;
    let mut list = Vec::new();
    let mut more = false;
    for rule in rules {
        if list.len() == MAX {
            more = true;
        }
        let host = str_at(rule, &["host"]);
        if !more && !host.is_empty() {
            list.push(host);
        }
    }
    if list.is_empty() {
        return "*".to_owned();
    }
    let joined = list.join(",");
    if more { format!("{joined} + {} more...", rules.len().saturating_sub(MAX)) } else { joined }
}

fn ingress_cells(obj: &Value, now: Timestamp) -> Vec<Value> {
    let ports = if arr_at(obj, &["spec", "tls"]).is_empty() { "80" } else { "80, 443" };
    vec![
        name_of(obj),
        s(opt_str_at(obj, &["spec", "ingressClassName"]).unwrap_or("<none>")),
        s(format_hosts(arr_at(obj, &["spec", "rules"]))),
        s(load_balancer_addresses(arr_at(obj, &["status", "loadBalancer", "ingress"]))),
        s(ports),
        age(obj, now),
    ]
}

fn ingress_class_columns() -> Vec<Column> {
    vec![
        name_column(),
        col("Controller", "string", 0, "Controller that is responsible for handling this class"),
        col("Parameters", "string", 0, "A reference to a resource with additional parameters"),
        age_column(),
    ]
}

fn ingress_class_cells(obj: &Value, now: Timestamp) -> Vec<Value> {
    let parameters = match at(obj, &["spec", "parameters"]).filter(|p| !p.is_null()) {
        Some(p) => {
            let mut text = str_at(p, &["kind"]).to_owned();
            if let Some(group) = opt_str_at(p, &["apiGroup"]) {
                text = format!("{text}.{group}");
            }
            format!("{text}/{}", str_at(p, &["name"]))
        }
        None => "<none>".to_owned(),
    };
    vec![name_of(obj), s(str_at(obj, &["spec", "controller"])), s(parameters), age(obj, now)]
}

fn network_policy_columns() -> Vec<Column> {
    vec![
        name_column(),
        col("Pod-Selector", "string", 0, "podSelector selects the pods to which this NetworkPolicy object applies."),
        age_column(),
    ]
}

fn network_policy_cells(obj: &Value, now: Timestamp) -> Vec<Value> {
    // podSelector is not a pointer upstream: absent means the empty selector.
    let empty = json!({});
    let selector = at(obj, &["spec", "podSelector"]).filter(|p| !p.is_null()).unwrap_or(&empty);
    vec![name_of(obj), s(format_label_selector(Some(selector))), age(obj, now)]
}

fn webhook_columns() -> Vec<Column> {
    vec![
        name_column(),
        col("Webhooks", "integer", 0, "Webhooks indicates the number of webhooks registered in this configuration"),
        age_column(),
    ]
}

fn webhook_cells(obj: &Value, now: Timestamp) -> Vec<Value> {
    vec![name_of(obj), json!(len_at(obj, &["webhooks"])), age(obj, now)]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> Timestamp {
        "2024-05-01T12:00:00Z".parse().unwrap()
    }

    fn cells(group: &str, kind: &str, obj: Value) -> Vec<Value> {
        match builtin(group, kind) {
            Some(Builtin::Printer(p)) => {
                let out = (p.cells)(&obj, now());
                assert_eq!(out.len(), (p.columns)().len(), "cells must match columns");
                out
            }
            other => panic!("no printer for {group}/{kind}: {other:?}"),
        }
    }

    fn header(group: &str, kind: &str) -> Vec<String> {
        match builtin(group, kind) {
            Some(Builtin::Printer(p)) => {
                (p.columns)().into_iter().filter(|c| c.priority == 0).map(|c| c.name.to_uppercase()).collect()
            }
            other => panic!("no printer for {group}/{kind}: {other:?}"),
        }
    }

    fn pod(status: Value) -> Value {
        json!({
            "metadata": {"name": "p", "creationTimestamp": "2024-05-01T11:55:00Z"},
            "spec": {"containers": [{"name": "a"}, {"name": "b"}]},
            "status": status
        })
    }

    #[test]
    fn test_every_printer_has_as_many_cells_as_columns_for_an_empty_object() {
        let kinds = [
            ("", "Pod"),
            ("", "Namespace"),
            ("", "ConfigMap"),
            ("", "Secret"),
            ("", "ServiceAccount"),
            ("", "Service"),
            ("", "Endpoints"),
            ("", "Node"),
            ("", "Event"),
            ("events.k8s.io", "Event"),
            ("", "PersistentVolumeClaim"),
            ("", "PersistentVolume"),
            ("apps", "Deployment"),
            ("apps", "ReplicaSet"),
            ("apps", "StatefulSet"),
            ("apps", "DaemonSet"),
            ("batch", "Job"),
            ("batch", "CronJob"),
            ("coordination.k8s.io", "Lease"),
            ("policy", "PodDisruptionBudget"),
            ("rbac.authorization.k8s.io", "RoleBinding"),
            ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
            ("networking.k8s.io", "Ingress"),
            ("networking.k8s.io", "IngressClass"),
            ("networking.k8s.io", "NetworkPolicy"),
            ("discovery.k8s.io", "EndpointSlice"),
            ("storage.k8s.io", "StorageClass"),
            ("scheduling.k8s.io", "PriorityClass"),
            ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"),
        ];
        for (g, k) in kinds {
            for obj in [json!({}), json!(null), json!({"spec": 1, "status": "x", "metadata": []})] {
                cells(g, k, obj);
            }
        }
    }

    #[test]
    fn test_headers_match_kubectl_output() {
        assert_eq!(header("", "Namespace"), ["NAME", "STATUS", "AGE"]);
        assert_eq!(header("", "ConfigMap"), ["NAME", "DATA", "AGE"]);
        assert_eq!(header("", "Secret"), ["NAME", "TYPE", "DATA", "AGE"]);
        assert_eq!(header("", "ServiceAccount"), ["NAME", "SECRETS", "AGE"]);
        assert_eq!(header("", "Service"), ["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE"]);
        assert_eq!(header("", "Endpoints"), ["NAME", "ENDPOINTS", "AGE"]);
        assert_eq!(header("", "Pod"), ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]);
        assert_eq!(header("", "Node"), ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]);
        assert_eq!(header("apps", "Deployment"), ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]);
        assert_eq!(header("apps", "ReplicaSet"), ["NAME", "DESIRED", "CURRENT", "READY", "AGE"]);
        assert_eq!(header("coordination.k8s.io", "Lease"), ["NAME", "HOLDER", "AGE"]);
        assert_eq!(
            header("policy", "PodDisruptionBudget"),
            ["NAME", "MIN AVAILABLE", "MAX UNAVAILABLE", "ALLOWED DISRUPTIONS", "AGE"]
        );
        assert_eq!(header("", "Event"), ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]);
        assert_eq!(header("rbac.authorization.k8s.io", "RoleBinding"), ["NAME", "ROLE", "AGE"]);
        assert_eq!(header("networking.k8s.io", "Ingress"), ["NAME", "CLASS", "HOSTS", "ADDRESS", "PORTS", "AGE"]);
    }

    #[test]
    fn test_pod_wide_columns_have_priority_one() {
        let Some(Builtin::Printer(p)) = builtin("", "Pod") else { panic!() };
        let wide: Vec<String> = (p.columns)().into_iter().filter(|c| c.priority == 1).map(|c| c.name).collect();
        assert_eq!(wide, ["IP", "Node", "Nominated Node", "Readiness Gates"]);
    }

    #[test]
    fn test_role_cluster_role_and_crd_use_default_convertor() {
        assert!(matches!(builtin("rbac.authorization.k8s.io", "Role"), Some(Builtin::Default)));
        assert!(matches!(builtin("rbac.authorization.k8s.io", "ClusterRole"), Some(Builtin::Default)));
        assert!(matches!(builtin("apiextensions.k8s.io", "CustomResourceDefinition"), Some(Builtin::Default)));
        assert!(builtin("example.com", "Foo").is_none());
        assert!(builtin("apps", "Pod").is_none());
    }

    #[test]
    fn test_pending_pod_without_statuses() {
        let c = cells("", "Pod", pod(json!({"phase": "Pending"})));
        assert_eq!(c[0], json!("p"));
        assert_eq!(c[1], json!("0/2"));
        assert_eq!(c[2], json!("Pending"));
        assert_eq!(c[3], json!("0"));
        assert_eq!(c[4], json!("5m"));
        assert_eq!(&c[5..], [json!("<none>"), json!("<none>"), json!("<none>"), json!("<none>")]);
    }

    #[test]
    fn test_pod_container_creating_reason_comes_from_waiting_state() {
        let c = cells(
            "",
            "Pod",
            pod(json!({"phase": "Pending", "containerStatuses": [
                {"name": "a", "ready": false, "restartCount": 0, "state": {"waiting": {"reason": "ContainerCreating"}}},
                {"name": "b", "ready": false, "restartCount": 0, "state": {"waiting": {"reason": "ContainerCreating"}}}
            ]})),
        );
        assert_eq!(c[1], json!("0/2"));
        assert_eq!(c[2], json!("ContainerCreating"));
    }

    #[test]
    fn test_running_pod_counts_ready_containers_and_shows_ip_and_node() {
        let mut p = pod(json!({"phase": "Running", "podIPs": [{"ip": "10.0.0.5"}], "containerStatuses": [
            {"name": "a", "ready": true, "restartCount": 1, "state": {"running": {}},
             "lastState": {"terminated": {"finishedAt": "2024-05-01T11:58:00Z"}}},
            {"name": "b", "ready": false, "restartCount": 2, "state": {"running": {}}}
        ]}));
        p["spec"]["nodeName"] = json!("node-1");
        let c = cells("", "Pod", p);
        assert_eq!(c[1], json!("1/2"));
        assert_eq!(c[2], json!("Running"));
        assert_eq!(c[3], json!("3 (2m ago)"));
        assert_eq!(c[5], json!("10.0.0.5"));
        assert_eq!(c[6], json!("node-1"));
    }

    #[test]
    fn test_succeeded_pod_shows_completed() {
        let c = cells(
            "",
            "Pod",
            pod(json!({"phase": "Succeeded", "containerStatuses": [
                {"name": "a", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}
            ]})),
        );
        assert_eq!(c[2], json!("Completed"));
    }

    #[test]
    fn test_completed_container_next_to_running_one_shows_running_or_not_ready() {
        let statuses = json!([
            {"name": "a", "ready": true, "state": {"running": {}}},
            {"name": "b", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}
        ]);
        let mut status = json!({"phase": "Running", "containerStatuses": statuses});
        assert_eq!(cells("", "Pod", pod(status.clone()))[2], json!("NotReady"));
        status["conditions"] = json!([{"type": "Ready", "status": "True"}]);
        assert_eq!(cells("", "Pod", pod(status))[2], json!("Running"));
    }

    #[test]
    fn test_terminated_container_without_reason_shows_exit_code_or_signal() {
        let c = cells(
            "",
            "Pod",
            pod(
                json!({"phase": "Running", "containerStatuses": [{"name": "a", "state": {"terminated": {"exitCode": 137}}}]}),
            ),
        );
        assert_eq!(c[2], json!("ExitCode:137"));
        let c = cells(
            "",
            "Pod",
            pod(
                json!({"phase": "Running", "containerStatuses": [{"name": "a", "state": {"terminated": {"exitCode": 1, "signal": 9}}}]}),
            ),
        );
        assert_eq!(c[2], json!("Signal:9"));
    }

    #[test]
    fn test_deleting_pod_shows_terminating_unless_terminal() {
        let mut p = pod(json!({"phase": "Running"}));
        p["metadata"]["deletionTimestamp"] = json!("2024-05-01T11:59:00Z");
        assert_eq!(cells("", "Pod", p.clone())[2], json!("Terminating"));
        p["status"]["phase"] = json!("Succeeded");
        assert_eq!(cells("", "Pod", p.clone())[2], json!("Succeeded"));
        p["status"] = json!({"phase": "Running", "reason": "NodeLost"});
        assert_eq!(cells("", "Pod", p)[2], json!("Unknown"));
    }

    #[test]
    fn test_init_container_progress_and_failures() {
        let mut p = pod(json!({"phase": "Pending", "initContainerStatuses": [
            {"name": "i1", "state": {"terminated": {"exitCode": 0}}},
            {"name": "i2", "state": {"running": {}}}
        ]}));
        p["spec"]["initContainers"] = json!([{"name": "i1"}, {"name": "i2"}]);
        assert_eq!(cells("", "Pod", p.clone())[2], json!("Init:1/2"));
        p["status"]["initContainerStatuses"][1]["state"] = json!({"waiting": {"reason": "CrashLoopBackOff"}});
        assert_eq!(cells("", "Pod", p.clone())[2], json!("Init:CrashLoopBackOff"));
        p["status"]["initContainerStatuses"][1]["state"] = json!({"terminated": {"exitCode": 3}});
        assert_eq!(cells("", "Pod", p)[2], json!("Init:ExitCode:3"));
    }

    #[test]
    fn test_restartable_init_container_counts_as_container() {
        let mut p = pod(json!({"phase": "Running", "initContainerStatuses": [
            {"name": "side", "started": true, "ready": true, "state": {"running": {}}}
        ], "containerStatuses": [
            {"name": "a", "ready": true, "state": {"running": {}}},
            {"name": "b", "ready": true, "state": {"running": {}}}
        ]}));
        p["spec"]["initContainers"] = json!([{"name": "side", "restartPolicy": "Always"}]);
        let c = cells("", "Pod", p);
        assert_eq!(c[1], json!("3/3"));
        assert_eq!(c[2], json!("Running"));
    }

    #[test]
    fn test_scheduling_gated_pod() {
        let c = cells(
            "",
            "Pod",
            pod(
                json!({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]}),
            ),
        );
        assert_eq!(c[2], json!("SchedulingGated"));
    }

    #[test]
    fn test_pod_readiness_gates() {
        let mut p = pod(
            json!({"phase": "Running", "conditions": [{"type": "g1", "status": "True"}, {"type": "g2", "status": "False"}]}),
        );
        p["spec"]["readinessGates"] = json!([{"conditionType": "g1"}, {"conditionType": "g2"}]);
        assert_eq!(cells("", "Pod", p)[8], json!("1/2"));
    }

    #[test]
    fn test_node_status_roles_and_addresses() {
        let node = json!({
            "metadata": {"name": "n1", "creationTimestamp": "2024-04-30T12:00:00Z",
                         "labels": {"node-role.kubernetes.io/control-plane": "", "kubernetes.io/role": "worker", "node-role.kubernetes.io/": ""}},
            "spec": {"unschedulable": true},
            "status": {"conditions": [{"type": "Ready", "status": "True"}],
                       "nodeInfo": {"kubeletVersion": "v1.34.0"},
                       "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}]}
        });
        let c = cells("", "Node", node);
        assert_eq!(c[1], json!("Ready,SchedulingDisabled"));
        assert_eq!(c[2], json!("control-plane,worker"));
        assert_eq!(c[3], json!("24h"));
        assert_eq!(c[4], json!("v1.34.0"));
        assert_eq!(
            &c[5..],
            [json!("10.0.0.1"), json!("<none>"), json!("<unknown>"), json!("<unknown>"), json!("<unknown>")]
        );
    }

    #[test]
    fn test_node_not_ready_and_unknown() {
        let c = cells("", "Node", json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}}));
        assert_eq!(c[1], json!("NotReady"));
        let c = cells("", "Node", json!({"status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}}));
        assert_eq!(c[1], json!("NotReady"));
        let c = cells("", "Node", json!({}));
        assert_eq!(c[1], json!("Unknown"));
        assert_eq!(c[2], json!("<none>"));
        assert_eq!(c[3], json!("<unknown>"));
    }

    #[test]
    fn test_service_cluster_ip_ports_and_selector() {
        let svc = json!({
            "metadata": {"name": "web"},
            "spec": {"type": "NodePort", "clusterIPs": ["10.96.0.10"],
                     "ports": [{"port": 80, "protocol": "TCP", "nodePort": 30080}, {"port": 53, "protocol": "UDP"}],
                     "selector": {"b": "2", "a": "1"}}
        });
        let c = cells("", "Service", svc);
        assert_eq!(c[1], json!("NodePort"));
        assert_eq!(c[2], json!("10.96.0.10"));
        assert_eq!(c[3], json!("<none>"));
        assert_eq!(c[4], json!("80:30080/TCP,53/UDP"));
        assert_eq!(c[6], json!("a=1,b=2"));
    }

    #[test]
    fn test_service_defaults_and_load_balancer() {
        let c = cells("", "Service", json!({"spec": {"clusterIP": "None", "ports": [{"port": 443}]}}));
        assert_eq!(c[1], json!("ClusterIP"));
        assert_eq!(c[2], json!("None"));
        assert_eq!(c[4], json!("443/TCP"));
        assert_eq!(c[6], json!("<none>"));
        let c = cells("", "Service", json!({"spec": {"type": "LoadBalancer"}}));
        assert_eq!(c[3], json!("<pending>"));
        assert_eq!(c[4], json!("<none>"));
        let c = cells(
            "",
            "Service",
            json!({"spec": {"type": "LoadBalancer", "externalIPs": ["1.2.3.4"]},
                   "status": {"loadBalancer": {"ingress": [{"ip": "5.6.7.8"}, {"hostname": "lb.example"}]}}}),
        );
        assert_eq!(c[3], json!("5.6.7.8,lb.example,1.2.3.4"));
        let c = cells("", "Service", json!({"spec": {"type": "ExternalName", "externalName": "db.example"}}));
        assert_eq!(c[3], json!("db.example"));
    }

    #[test]
    fn test_endpoints_lists_three_then_more() {
        let ep = json!({"subsets": [
            {"addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}], "ports": [{"port": 80}, {"port": 443}]}
        ]});
        assert_eq!(cells("", "Endpoints", ep)[1], json!("10.0.0.1:80,10.0.0.2:80,10.0.0.1:443 + 1 more..."));
        assert_eq!(cells("", "Endpoints", json!({}))[1], json!("<none>"));
        let headless = json!({"subsets": [{"addresses": [{"ip": "fd00::1"}]}]});
        assert_eq!(cells("", "Endpoints", headless)[1], json!("fd00::1"));
        let v6 = json!({"subsets": [{"addresses": [{"ip": "fd00::1"}], "ports": [{"port": 80}]}]});
        assert_eq!(cells("", "Endpoints", v6)[1], json!("[fd00::1]:80"));
    }

    #[test]
    fn test_config_map_and_secret_data_counts() {
        let c = cells("", "ConfigMap", json!({"data": {"a": "1", "b": "2"}, "binaryData": {"c": "AA=="}}));
        assert_eq!(c[1], json!(3));
        let c = cells("", "Secret", json!({"data": {"a": "MQ=="}}));
        assert_eq!(c[1], json!("Opaque"));
        assert_eq!(c[2], json!(1));
        let c = cells("", "Secret", json!({"type": "kubernetes.io/tls"}));
        assert_eq!(c[1], json!("kubernetes.io/tls"));
        assert_eq!(c[2], json!(0));
    }

    #[test]
    fn test_namespace_and_service_account() {
        let c = cells("", "Namespace", json!({"metadata": {"name": "default"}, "status": {"phase": "Active"}}));
        assert_eq!(c, [json!("default"), json!("Active"), json!("<unknown>")]);
        let c = cells("", "ServiceAccount", json!({"secrets": [{"name": "s"}]}));
        assert_eq!(c[1], json!(1));
    }

    #[test]
    fn test_deployment_ready_and_selector() {
        let d = json!({
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"spec": {"containers": [{"name": "web", "image": "nginx"}, {"name": "side", "image": "busybox"}]}}},
            "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2}
        });
        let c = cells("apps", "Deployment", d);
        assert_eq!(&c[1..4], [json!("2/3"), json!(3), json!(2)]);
        assert_eq!(&c[5..], [json!("web,side"), json!("nginx,busybox"), json!("app=web")]);
        let c = cells("apps", "Deployment", json!({}));
        assert_eq!(c[1], json!("0/1"));
        assert_eq!(c[7], json!(""));
    }

    #[test]
    fn test_replica_set_counts_and_selector() {
        let rs = json!({
            "spec": {"replicas": 2, "selector": {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["b", "a"]}]}},
            "status": {"replicas": 2, "readyReplicas": 1}
        });
        let c = cells("apps", "ReplicaSet", rs);
        assert_eq!(&c[1..4], [json!(2), json!(2), json!(1)]);
        assert_eq!(c[7], json!("tier in (a,b)"));
        assert_eq!(cells("apps", "ReplicaSet", json!({}))[7], json!("<none>"));
        let bad = json!({"spec": {"selector": {"matchExpressions": [{"key": "k", "operator": "In"}]}}});
        assert_eq!(cells("apps", "ReplicaSet", bad)[7], json!("<error>"));
    }

    #[test]
    fn test_job_status_completions_and_duration() {
        let job = json!({
            "spec": {"completions": 3},
            "status": {"succeeded": 3, "startTime": "2024-05-01T11:00:00Z", "completionTime": "2024-05-01T11:02:03Z",
                       "conditions": [{"type": "Complete", "status": "True"}]}
        });
        let c = cells("batch", "Job", job);
        assert_eq!(&c[1..4], [json!("Complete"), json!("3/3"), json!("2m3s")]);
        let c =
            cells("batch", "Job", json!({"spec": {"parallelism": 2}, "status": {"startTime": "2024-05-01T11:59:00Z"}}));
        assert_eq!(&c[1..4], [json!("Running"), json!("0/1 of 2"), json!("60s")]);
        let c = cells("batch", "Job", json!({}));
        assert_eq!(&c[1..4], [json!("Running"), json!("0/1"), json!("")]);
    }

    #[test]
    fn test_cron_job_cells() {
        let cj = json!({"spec": {"schedule": "*/5 * * * *", "suspend": false}, "status": {"active": [{}]}});
        let c = cells("batch", "CronJob", cj);
        assert_eq!(&c[1..6], [json!("*/5 * * * *"), json!("<none>"), json!("False"), json!(1), json!("<none>")]);
    }

    #[test]
    fn test_pdb_int_or_string_values() {
        let c = cells(
            "policy",
            "PodDisruptionBudget",
            json!({"spec": {"minAvailable": 2}, "status": {"disruptionsAllowed": 1}}),
        );
        assert_eq!(&c[1..4], [json!("2"), json!("N/A"), json!(1)]);
        let c = cells("policy", "PodDisruptionBudget", json!({"spec": {"maxUnavailable": "25%"}}));
        assert_eq!(&c[1..4], [json!("N/A"), json!("25%"), json!(0)]);
    }

    #[test]
    fn test_lease_holder() {
        let c = cells("coordination.k8s.io", "Lease", json!({"spec": {"holderIdentity": "pod-a"}}));
        assert_eq!(c[1], json!("pod-a"));
        assert_eq!(cells("coordination.k8s.io", "Lease", json!({}))[1], json!(""));
    }

    #[test]
    fn test_core_event_cells() {
        let ev = json!({
            "metadata": {"name": "foo.17a"},
            "involvedObject": {"kind": "Pod", "name": "p", "fieldPath": "spec.containers{a}"},
            "reason": "Started", "message": " Started container a\n", "type": "Normal",
            "source": {"component": "kubelet", "host": "node-1"},
            "firstTimestamp": "2024-05-01T11:00:00Z", "lastTimestamp": "2024-05-01T11:59:30Z", "count": 4
        });
        let c = cells("", "Event", ev);
        assert_eq!(
            c,
            [
                json!("30s"),
                json!("Normal"),
                json!("Started"),
                json!("pod/p"),
                json!("spec.containers{a}"),
                json!("kubelet, node-1"),
                json!("Started container a"),
                json!("60m"),
                json!(4),
                json!("foo.17a")
            ]
        );
    }

    #[test]
    fn test_event_with_series_and_event_time_only() {
        let ev = json!({
            "involvedObject": {"kind": "Node"},
            "eventTime": "2024-05-01T11:50:00.000000Z",
            "series": {"count": 7, "lastObservedTime": "2024-05-01T11:59:00.000000Z"},
            "reportingComponent": "ctrl", "reportingInstance": "ctrl-0"
        });
        let c = cells("", "Event", ev);
        assert_eq!(c[0], json!("60s"));
        assert_eq!(c[3], json!("node"));
        assert_eq!(c[5], json!("ctrl, ctrl-0"));
        assert_eq!(c[7], json!("10m"));
        assert_eq!(c[8], json!(7));
        let c = cells("", "Event", json!({"involvedObject": {"kind": "Pod", "name": "x"}}));
        assert_eq!(c[0], json!("<unknown>"));
        assert_eq!(c[8], json!(1));
    }

    #[test]
    fn test_events_v1_event_maps_renamed_fields() {
        let ev = json!({
            "metadata": {"name": "e"},
            "regarding": {"kind": "Deployment", "name": "web"},
            "note": "Scaled up", "reason": "ScalingReplicaSet", "type": "Normal",
            "eventTime": "2024-05-01T11:59:00.000000Z",
            "reportingController": "deployment-controller", "reportingInstance": ""
        });
        let c = cells("events.k8s.io", "Event", ev);
        assert_eq!(c[0], json!("60s"));
        assert_eq!(c[3], json!("deployment/web"));
        assert_eq!(c[5], json!("deployment-controller"));
        assert_eq!(c[6], json!("Scaled up"));
        assert_eq!(c[9], json!("e"));
    }

    #[test]
    fn test_role_binding_subjects() {
        let rb = json!({
            "roleRef": {"kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "User", "name": "alice"}, {"kind": "Group", "name": "devs"},
                         {"kind": "ServiceAccount", "name": "sa", "namespace": "ns"}, {"kind": "User", "name": "bob"}]
        });
        let c = cells("rbac.authorization.k8s.io", "ClusterRoleBinding", rb);
        assert_eq!(c[1], json!("ClusterRole/view"));
        assert_eq!(&c[3..], [json!("alice, bob"), json!("devs"), json!("ns/sa")]);
    }

    #[test]
    fn test_pvc_bound_and_pending() {
        let pvc = json!({
            "spec": {"volumeName": "pv-1", "storageClassName": "standard"},
            "status": {"phase": "Bound", "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteMany", "ReadWriteOnce"]}
        });
        let c = cells("", "PersistentVolumeClaim", pvc);
        assert_eq!(
            &c[1..7],
            [json!("Bound"), json!("pv-1"), json!("1Gi"), json!("RWO,RWX"), json!("standard"), json!("<unset>")]
        );
        assert_eq!(c[8], json!("<unset>"));
        let c = cells(
            "",
            "PersistentVolumeClaim",
            json!({"status": {"phase": "Pending"}, "spec": {"resources": {"requests": {"storage": "5Gi"}}}}),
        );
        assert_eq!(&c[1..6], [json!("Pending"), json!(""), json!(""), json!(""), json!("")]);
    }

    #[test]
    fn test_pv_claim_and_terminating() {
        let pv = json!({
            "metadata": {"deletionTimestamp": "2024-05-01T11:00:00Z", "annotations": {"volume.beta.kubernetes.io/storage-class": "old"}},
            "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadOnlyMany"], "persistentVolumeReclaimPolicy": "Retain",
                     "claimRef": {"namespace": "ns", "name": "data"}, "storageClassName": "new", "volumeMode": "Filesystem"},
            "status": {"phase": "Bound"}
        });
        let c = cells("", "PersistentVolume", pv);
        assert_eq!(
            c[1..9],
            [
                json!("10Gi"),
                json!("ROX"),
                json!("Retain"),
                json!("Terminating"),
                json!("ns/data"),
                json!("old"),
                json!("<unset>"),
                json!("")
            ]
        );
        assert_eq!(c[10], json!("Filesystem"));
        assert_eq!(cells("", "PersistentVolume", json!({}))[1], json!("0"));
    }

    #[test]
    fn test_ingress_hosts_address_ports() {
        let ing = json!({
            "spec": {"ingressClassName": "nginx", "tls": [{}],
                     "rules": [{"host": "a.example"}, {}, {"host": "b.example"}, {"host": "c.example"}, {"host": "d.example"}]},
            "status": {"loadBalancer": {"ingress": [{"ip": "1.1.1.1"}]}}
        });
        let c = cells("networking.k8s.io", "Ingress", ing);
        assert_eq!(
            &c[1..5],
            [json!("nginx"), json!("a.example,b.example,c.example + 2 more..."), json!("1.1.1.1"), json!("80, 443")]
        );
        let c = cells("networking.k8s.io", "Ingress", json!({"spec": {"rules": [{}]}}));
        assert_eq!(&c[1..5], [json!("<none>"), json!("*"), json!(""), json!("80")]);
    }

    #[test]
    fn test_stateful_and_daemon_sets() {
        let c = cells("apps", "StatefulSet", json!({"spec": {"replicas": 3}, "status": {"readyReplicas": 3}}));
        assert_eq!(c[1], json!("3/3"));
        let ds = json!({"spec": {"template": {"spec": {"nodeSelector": {"kubernetes.io/os": "linux"}}}},
                        "status": {"desiredNumberScheduled": 2, "numberReady": 1}});
        let c = cells("apps", "DaemonSet", ds);
        assert_eq!(&c[1..7], [json!(2), json!(0), json!(1), json!(0), json!(0), json!("kubernetes.io/os=linux")]);
    }

    #[test]
    fn test_storage_class_default_marker_and_defaults() {
        let sc = json!({"metadata": {"name": "standard", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
                        "provisioner": "rancher.io/local-path"});
        let c = cells("storage.k8s.io", "StorageClass", sc);
        assert_eq!(
            &c[..5],
            [
                json!("standard (default)"),
                json!("rancher.io/local-path"),
                json!("Delete"),
                json!("Immediate"),
                json!(false)
            ]
        );
    }

    #[test]
    fn test_misc_printers() {
        let c = cells("scheduling.k8s.io", "PriorityClass", json!({"value": 1000, "globalDefault": true}));
        assert_eq!(&c[1..3], [json!(1000), json!(true)]);
        let c = cells("networking.k8s.io", "NetworkPolicy", json!({"spec": {"podSelector": {}}}));
        assert_eq!(c[1], json!("<none>"));
        let c = cells(
            "networking.k8s.io",
            "IngressClass",
            json!({"spec": {"controller": "k8s.io/nginx",
            "parameters": {"kind": "Params", "apiGroup": "example.com", "name": "p"}}}),
        );
        assert_eq!(&c[1..3], [json!("k8s.io/nginx"), json!("Params.example.com/p")]);
        let c = cells(
            "discovery.k8s.io",
            "EndpointSlice",
            json!({"addressType": "IPv4",
            "ports": [{"port": 80}, {"name": "http"}, {}], "endpoints": [{"addresses": ["10.0.0.1"]}]}),
        );
        assert_eq!(&c[1..4], [json!("IPv4"), json!("80,http,*"), json!("10.0.0.1")]);
        let c = cells("discovery.k8s.io", "EndpointSlice", json!({}));
        assert_eq!(&c[2..4], [json!("<unset>"), json!("<unset>")]);
        let c = cells("admissionregistration.k8s.io", "MutatingWebhookConfiguration", json!({"webhooks": [{}, {}]}));
        assert_eq!(c[1], json!(2));
    }
}

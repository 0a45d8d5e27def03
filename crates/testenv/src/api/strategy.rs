//! Per-kind rules: what kube-apiserver's `PrepareForCreate`, `PrepareForUpdate`, defaulting and
//! validation do for the built-in kinds this server serves.
//!
//! Defaulting follows `pkg/apis/*/v1/defaults.go` for the fields that clients and tests commonly
//! observe (pod and pod-template defaults, Deployment strategy, Service ports and cluster IPs);
//! it is not exhaustive.

use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicU32, Ordering};

use serde_json::{Map, Value, json};

use super::Api;
use super::write::set_path;
use crate::error::ApiError;
use crate::registry::{BuiltinKind, ResourceDef};
use crate::schema::FieldError;
use crate::store::Stored;

/// Cluster IPs are handed out from 10.96.0.0/12, as kubeadm's default service CIDR.
static NEXT_CLUSTER_IP: AtomicU32 = AtomicU32::new(10);

fn allocate_cluster_ip() -> String {
    let n = NEXT_CLUSTER_IP.fetch_add(1, Ordering::Relaxed) % (1 << 20);
    let base = u32::from(Ipv4Addr::new(10, 96, 0, 0));
    Ipv4Addr::from(base + n).to_string()
}

impl Api {
    /// Reset and default an object being created (`PrepareForCreate` + defaulting).
    pub(crate) fn prepare_create(&self, def: &ResourceDef, body: &mut Value) -> Result<(), ApiError> {
        if def.is_custom() {
            if def.status
                && let Some(obj) = body.as_object_mut()
            {
                obj.remove("status");
            }
            return Ok(());
        }
        let Some(obj) = body.as_object_mut() else { return Ok(()) };
        match (def.group.as_str(), def.kind.as_str()) {
            ("", "Namespace") => {
                let spec = obj.entry("spec").or_insert_with(|| json!({}));
                if let Some(spec) = spec.as_object_mut() {
                    spec.insert("finalizers".into(), json!(["kubernetes"]));
                }
                obj.insert("status".into(), json!({"phase": "Active"}));
            }
            ("", "Pod") => {
                if let Some(spec) = obj.get_mut("spec") {
                    default_pod_spec(spec);
                }
                let qos = qos_class(obj.get("spec"));
                obj.insert("status".into(), json!({"phase": "Pending", "qosClass": qos}));
            }
            ("", "Service") => {
                if let Some(spec) = obj.get_mut("spec") {
                    default_service_spec(spec);
                }
                obj.insert("status".into(), json!({"loadBalancer": {}}));
            }
            ("", "Secret") => {
                fold_string_data(obj)?;
                obj.entry("type").or_insert_with(|| json!("Opaque"));
            }
            ("", "PersistentVolumeClaim") | ("", "PersistentVolume") => {
                obj.insert("status".into(), json!({"phase": "Pending"}));
            }
            ("apps", "Deployment") => {
                if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
                    spec.entry("replicas").or_insert_with(|| json!(1));
                    spec.entry("revisionHistoryLimit").or_insert_with(|| json!(10));
                    spec.entry("progressDeadlineSeconds").or_insert_with(|| json!(600));
                    let strategy = spec.entry("strategy").or_insert_with(|| json!({}));
                    if let Some(s) = strategy.as_object_mut() {
                        s.entry("type").or_insert_with(|| json!("RollingUpdate"));
                        if s.get("type").and_then(Value::as_str) == Some("RollingUpdate") {
                            let ru = s.entry("rollingUpdate").or_insert_with(|| json!({}));
                            if let Some(ru) = ru.as_object_mut() {
                                ru.entry("maxSurge").or_insert_with(|| json!("25%"));
                                ru.entry("maxUnavailable").or_insert_with(|| json!("25%"));
                            }
                        }
                    }
                    default_template(spec);
                }
                obj.remove("status");
            }
            ("apps", "ReplicaSet") | ("apps", "StatefulSet") => {
                if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
                    spec.entry("replicas").or_insert_with(|| json!(1));
                    default_template(spec);
                }
                obj.remove("status");
            }
            ("apps", "DaemonSet") => {
                if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
                    default_template(spec);
                }
                obj.remove("status");
            }
            ("policy", "PodDisruptionBudget") | ("networking.k8s.io", "Ingress") => {
                obj.remove("status");
            }
            ("batch", "Job") => {
                prepare_job(obj);
                obj.remove("status");
            }
            ("autoscaling", "HorizontalPodAutoscaler") => {
                if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
                    default_hpa_spec(spec);
                }
                obj.remove("status");
            }
            ("apiextensions.k8s.io", "CustomResourceDefinition") => {
                self.prepare_crd(body, None)?;
            }
            _ => {}
        }
        Ok(())
    }

    /// Kind-specific rules for updates of the main resource or a subresource.
    pub(crate) fn prepare_update_kind(&self, def: &ResourceDef, old: &Value, new: &mut Value) -> Result<(), ApiError> {
        match (def.group.as_str(), def.kind.as_str()) {
            ("", "Secret") => {
                if let Some(obj) = new.as_object_mut() {
                    fold_string_data(obj)?;
                }
            }
            ("", "Service") => {
                // clusterIP is immutable once allocated; keep it when the client omits it.
                if let Some(ip) = old.get("spec").and_then(|s| s.get("clusterIP")).cloned()
                    && new.get("spec").and_then(|s| s.get("clusterIP")).is_none()
                {
                    set_path(new, &["spec", "clusterIP"], Some(ip));
                    let ips = old.get("spec").and_then(|s| s.get("clusterIPs")).cloned();
                    set_path(new, &["spec", "clusterIPs"], ips);
                }
                if let Some(spec) = new.get_mut("spec") {
                    default_service_spec(spec);
                }
            }
            ("", "Pod") => {
                if let Some(spec) = new.get_mut("spec") {
                    default_pod_spec(spec);
                }
            }
            ("apiextensions.k8s.io", "CustomResourceDefinition") => {
                self.prepare_crd(new, Some(old))?;
            }
            _ => {}
        }
        Ok(())
    }

    /// Validation beyond decoding, for the built-ins where clients rely on it.
    pub(crate) fn validate_builtin(
        &self,
        def: &ResourceDef,
        value: &Value,
        old: Option<&Value>,
        name: &str,
    ) -> Result<(), ApiError> {
        let mut errors = Vec::new();
        match (def.group.as_str(), def.kind.as_str()) {
            ("", "ConfigMap") | ("", "Secret") => {
                if let Some(old) = old
                    && old.get("immutable").and_then(Value::as_bool) == Some(true)
                {
                    for field in ["data", "binaryData"] {
                        if old.get(field) != value.get(field) {
                            errors.push(FieldError::forbidden(field, "field is immutable when `immutable` is set"));
                        }
                    }
                    if value.get("immutable").and_then(Value::as_bool) != Some(true) {
                        errors.push(FieldError::forbidden("immutable", "field is immutable when `immutable` is set"));
                    }
                }
            }
            ("coordination.k8s.io", "Lease") => {
                if let Some(d) = value.get("spec").and_then(|s| s.get("leaseDurationSeconds")).and_then(Value::as_i64)
                    && d <= 0
                {
                    errors.push(FieldError::invalid("spec.leaseDurationSeconds", json!(d), "must be greater than 0"));
                }
            }
            ("batch", "Job") => validate_job(value, &mut errors),
            ("autoscaling", "HorizontalPodAutoscaler") => validate_hpa(value, &mut errors),
            ("apps", "Deployment") | ("apps", "ReplicaSet") => {
                if let Some(r) = value.get("spec").and_then(|s| s.get("replicas")).and_then(Value::as_i64)
                    && r < 0
                {
                    errors.push(FieldError::invalid("spec.replicas", json!(r), "must be greater than or equal to 0"));
                }
                let selector = value.get("spec").and_then(|s| s.get("selector"));
                if selector.is_none_or(Value::is_null) {
                    errors.push(FieldError::required("spec.selector", ""));
                } else if let Some(sel) = selector {
                    match crate::selector::LabelSelector::from_label_selector(sel) {
                        Err(e) => errors.push(FieldError::invalid("spec.selector", sel.clone(), e)),
                        Ok(s) => {
                            let labels = value
                                .pointer("/spec/template/metadata/labels")
                                .and_then(Value::as_object)
                                .map(|m| {
                                    m.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string())).collect()
                                })
                                .unwrap_or_default();
                            if !s.matches(&labels) {
                                errors.push(FieldError::invalid(
                                    "spec.template.metadata.labels",
                                    value.pointer("/spec/template/metadata/labels").cloned().unwrap_or(Value::Null),
                                    "`selector` does not match template `labels`",
                                ));
                            }
                        }
                    }
                }
            }
            _ => {}
        }
        if errors.is_empty() { Ok(()) } else { Err(ApiError::invalid(def, name, &errors)) }
    }

    /// Work after an object was written: CRDs become served resources.
    pub(crate) fn after_write(&self, def: &ResourceDef, stored: &Stored) {
        if def.builtin_kind() == BuiltinKind::CustomResourceDefinition {
            self.sync_crd(&stored.value());
        }
    }

    /// Work after an object was removed from storage.
    pub(crate) fn after_removal(&self, def: &ResourceDef, stored: &Stored) {
        if def.builtin_kind() == BuiltinKind::CustomResourceDefinition
            && let Some(name) = stored.value().pointer("/metadata/name").and_then(Value::as_str)
        {
            self.registry.remove_crd(name);
        }
    }
}

/// Secrets: `stringData` is merged into base64 `data` and dropped.
fn fold_string_data(obj: &mut Map<String, Value>) -> Result<(), ApiError> {
    use base64::Engine;
    let Some(string_data) = obj.remove("stringData") else { return Ok(()) };
    let Value::Object(sd) = string_data else {
        return Err(ApiError::bad_request(
            "Secret in version \"v1\" cannot be handled as a Secret: stringData must be a map of strings",
        ));
    };
    let data = obj.entry("data").or_insert_with(|| json!({}));
    if !data.is_object() {
        *data = json!({});
    }
    if let Some(data) = data.as_object_mut() {
        for (k, v) in sd {
            let Some(s) = v.as_str() else {
                return Err(ApiError::bad_request(format!(
                    "Secret in version \"v1\" cannot be handled as a Secret: stringData.{k} must be a string"
                )));
            };
            data.insert(k, json!(base64::engine::general_purpose::STANDARD.encode(s)));
        }
    }
    Ok(())
}

fn default_template(spec: &mut Map<String, Value>) {
    if let Some(pod_spec) = spec.get_mut("template").and_then(|t| t.get_mut("spec")) {
        default_pod_spec(pod_spec);
    }
}

/// The labels the Job controller selects its pods by (`batch.kubernetes.io/controller-uid`),
/// with the legacy `controller-uid`/`job-name` pair kube-apiserver still writes.
pub(crate) const JOB_UID_LABEL: &str = "batch.kubernetes.io/controller-uid";
const JOB_NAME_LABEL: &str = "batch.kubernetes.io/job-name";

/// Job defaults (`pkg/apis/batch/v1/defaults.go`) and the generated selector
/// (`generateSelectorIfNeeded` in `pkg/registry/batch/job/strategy.go`).
fn prepare_job(obj: &mut Map<String, Value>) {
    let meta =
        |key: &str| obj.get("metadata").and_then(|m| m.get(key)).and_then(Value::as_str).unwrap_or("").to_string();
    let (uid, name) = (meta("uid"), meta("name"));
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else { return };
    if spec.get("completions").is_none_or(Value::is_null) && spec.get("parallelism").is_none_or(Value::is_null) {
        spec.insert("completions".into(), json!(1));
        spec.insert("parallelism".into(), json!(1));
    }
    spec.entry("parallelism").or_insert_with(|| json!(1));
    spec.entry("backoffLimit").or_insert_with(|| json!(6));
    spec.entry("completionMode").or_insert_with(|| json!("NonIndexed"));
    spec.entry("suspend").or_insert_with(|| json!(false));
    spec.entry("podReplacementPolicy").or_insert_with(|| json!("TerminatingOrFailed"));
    if spec.get("manualSelector").and_then(Value::as_bool) != Some(true) && !uid.is_empty() {
        spec.insert("selector".into(), json!({"matchLabels": {JOB_UID_LABEL: uid}}));
        let template = spec.entry("template").or_insert_with(|| json!({}));
        let mut labels = vec![(JOB_UID_LABEL, uid.clone()), ("controller-uid", uid.clone())];
        if !name.is_empty() {
            labels.push((JOB_NAME_LABEL, name.clone()));
            labels.push(("job-name", name));
        }
        for (key, value) in labels {
            set_path(template, &["metadata", "labels", key], Some(json!(value)));
        }
    }
    default_template(spec);
}

/// `ValidateJobSpec` for what clients commonly get wrong.
fn validate_job(job: &Value, errors: &mut Vec<FieldError>) {
    let spec = job.get("spec").cloned().unwrap_or(Value::Null);
    for field in ["parallelism", "completions", "backoffLimit", "activeDeadlineSeconds", "ttlSecondsAfterFinished"] {
        if let Some(n) = spec.get(field).and_then(Value::as_i64)
            && n < 0
        {
            errors.push(FieldError::invalid(format!("spec.{field}"), json!(n), "must be greater than or equal to 0"));
        }
    }
    let restart = spec.pointer("/template/spec/restartPolicy").and_then(Value::as_str).unwrap_or("");
    if restart != "OnFailure" && restart != "Never" {
        errors.push(FieldError::not_supported(
            "spec.template.spec.restartPolicy",
            json!(restart),
            &["OnFailure", "Never"],
        ));
    }
    match spec.get("selector").filter(|s| !s.is_null()) {
        None => errors.push(FieldError::required("spec.selector", "")),
        Some(sel) => {
            if let Ok(selector) = crate::selector::LabelSelector::from_label_selector(sel) {
                let labels = spec
                    .pointer("/template/metadata/labels")
                    .and_then(Value::as_object)
                    .map(|m| m.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string())).collect())
                    .unwrap_or_default();
                if !selector.matches(&labels) {
                    errors.push(FieldError::invalid(
                        "spec.template.metadata.labels",
                        spec.pointer("/template/metadata/labels").cloned().unwrap_or(Value::Null),
                        "`selector` does not match template `labels`",
                    ));
                }
            }
        }
    }
}

/// HorizontalPodAutoscaler defaults (`pkg/apis/autoscaling/v2/defaults.go`).
fn default_hpa_spec(spec: &mut Map<String, Value>) {
    spec.entry("minReplicas").or_insert_with(|| json!(1));
    if spec.get("metrics").is_none_or(Value::is_null) {
        spec.insert(
            "metrics".into(),
            json!([{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]),
        );
    }
    if let Some(behavior) = spec.get_mut("behavior").and_then(Value::as_object_mut) {
        let up = behavior.entry("scaleUp").or_insert_with(|| json!({}));
        if let Some(up) = up.as_object_mut() {
            up.entry("stabilizationWindowSeconds").or_insert_with(|| json!(0));
            up.entry("selectPolicy").or_insert_with(|| json!("Max"));
            up.entry("policies").or_insert_with(|| {
                json!([{"type": "Pods", "value": 4, "periodSeconds": 15}, {"type": "Percent", "value": 100, "periodSeconds": 15}])
            });
        }
        let down = behavior.entry("scaleDown").or_insert_with(|| json!({}));
        if let Some(down) = down.as_object_mut() {
            down.entry("stabilizationWindowSeconds").or_insert_with(|| json!(300));
            down.entry("selectPolicy").or_insert_with(|| json!("Max"));
            down.entry("policies").or_insert_with(|| json!([{"type": "Percent", "value": 100, "periodSeconds": 15}]));
        }
    }
}

/// `ValidateHorizontalPodAutoscalerSpec` for the replica bounds and the target.
fn validate_hpa(hpa: &Value, errors: &mut Vec<FieldError>) {
    let spec = hpa.get("spec").cloned().unwrap_or(Value::Null);
    let min = spec.get("minReplicas").and_then(Value::as_i64);
    let max = spec.get("maxReplicas").and_then(Value::as_i64).unwrap_or(0);
    if let Some(min) = min
        && min < 1
    {
        errors.push(FieldError::invalid("spec.minReplicas", json!(min), "must be greater than or equal to 1"));
    }
    if max < 1 {
        errors.push(FieldError::invalid("spec.maxReplicas", json!(max), "must be greater than or equal to 1"));
    }
    if let Some(min) = min
        && max >= 1
        && min > max
    {
        errors.push(FieldError::invalid(
            "spec.maxReplicas",
            json!(max),
            "must be greater than or equal to `minReplicas`",
        ));
    }
    for field in ["kind", "name"] {
        let value = spec.pointer(&format!("/scaleTargetRef/{field}")).and_then(Value::as_str).unwrap_or("");
        if value.is_empty() {
            errors.push(FieldError::required(format!("spec.scaleTargetRef.{field}"), ""));
        }
    }
}

/// Pod spec defaults (`pkg/apis/core/v1/defaults.go`).
fn default_pod_spec(spec: &mut Value) {
    let Some(spec) = spec.as_object_mut() else { return };
    spec.entry("restartPolicy").or_insert_with(|| json!("Always"));
    spec.entry("terminationGracePeriodSeconds").or_insert_with(|| json!(30));
    spec.entry("dnsPolicy").or_insert_with(|| json!("ClusterFirst"));
    spec.entry("schedulerName").or_insert_with(|| json!("default-scheduler"));
    spec.entry("securityContext").or_insert_with(|| json!({}));
    spec.entry("enableServiceLinks").or_insert_with(|| json!(true));
    for list in ["containers", "initContainers"] {
        if let Some(containers) = spec.get_mut(list).and_then(Value::as_array_mut) {
            for c in containers.iter_mut().filter_map(Value::as_object_mut) {
                c.entry("terminationMessagePath").or_insert_with(|| json!("/dev/termination-log"));
                c.entry("terminationMessagePolicy").or_insert_with(|| json!("File"));
                let image = c.get("image").and_then(Value::as_str).unwrap_or("");
                let policy = if image_tag_is_latest(image) { "Always" } else { "IfNotPresent" };
                c.entry("imagePullPolicy").or_insert_with(|| json!(policy));
                if let Some(ports) = c.get_mut("ports").and_then(Value::as_array_mut) {
                    for p in ports.iter_mut().filter_map(Value::as_object_mut) {
                        p.entry("protocol").or_insert_with(|| json!("TCP"));
                    }
                }
            }
        }
    }
}

fn image_tag_is_latest(image: &str) -> bool {
    if image.contains('@') {
        return false;
    }
    let last = image.rsplit('/').next().unwrap_or(image);
    match last.rsplit_once(':') {
        Some((_, tag)) => tag == "latest",
        None => true,
    }
}

/// QoS class as `pkg/apis/core/helper/qos` computes it, for cpu and memory.
fn qos_class(spec: Option<&Value>) -> &'static str {
    let Some(containers) = spec.and_then(|s| s.get("containers")).and_then(Value::as_array) else {
        return "BestEffort";
    };
    let mut any = false;
    let mut guaranteed = !containers.is_empty();
    for c in containers {
        let requests = c.pointer("/resources/requests").and_then(Value::as_object);
        let limits = c.pointer("/resources/limits").and_then(Value::as_object);
        for res in ["cpu", "memory"] {
            let r = requests.and_then(|m| m.get(res));
            let l = limits.and_then(|m| m.get(res));
            if r.is_some() || l.is_some() {
                any = true;
            }
            // Requests default to limits when only limits are set.
            if l.is_none() || (r.is_some() && r != l) {
                guaranteed = false;
            }
        }
    }
    if !any {
        "BestEffort"
    } else if guaranteed {
        "Guaranteed"
    } else {
        "Burstable"
    }
}

/// Service defaults: type, session affinity, port protocol and targetPort, IP families, and a
/// cluster IP for ClusterIP/NodePort/LoadBalancer services.
fn default_service_spec(spec: &mut Value) {
    let Some(spec) = spec.as_object_mut() else { return };
    spec.entry("type").or_insert_with(|| json!("ClusterIP"));
    spec.entry("sessionAffinity").or_insert_with(|| json!("None"));
    let ty = spec.get("type").and_then(Value::as_str).unwrap_or("ClusterIP").to_string();
    if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
        for p in ports.iter_mut().filter_map(Value::as_object_mut) {
            p.entry("protocol").or_insert_with(|| json!("TCP"));
            if !p.contains_key("targetPort")
                && let Some(port) = p.get("port").cloned()
            {
                p.insert("targetPort".into(), port);
            }
        }
    }
    if ty != "ExternalName" {
        if !spec.contains_key("clusterIP") {
            let ip = allocate_cluster_ip();
            spec.insert("clusterIP".into(), json!(ip));
        }
        if !spec.contains_key("clusterIPs")
            && let Some(ip) = spec.get("clusterIP").cloned()
        {
            spec.insert("clusterIPs".into(), json!([ip]));
        }
        spec.entry("ipFamilies").or_insert_with(|| json!(["IPv4"]));
        spec.entry("ipFamilyPolicy").or_insert_with(|| json!("SingleStack"));
        spec.entry("internalTrafficPolicy").or_insert_with(|| json!("Cluster"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qos_classes() {
        assert_eq!(qos_class(Some(&json!({"containers": [{"name": "a"}]}))), "BestEffort");
        let g = json!({"containers": [{"resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]});
        assert_eq!(qos_class(Some(&g)), "Guaranteed");
        let b = json!({"containers": [{"resources": {"requests": {"cpu": "1"}}}]});
        assert_eq!(qos_class(Some(&b)), "Burstable");
    }

    #[test]
    fn image_pull_policy_default_depends_on_tag() {
        assert!(image_tag_is_latest("nginx"));
        assert!(image_tag_is_latest("nginx:latest"));
        assert!(!image_tag_is_latest("nginx:1.27"));
        assert!(!image_tag_is_latest("registry:5000/nginx@sha256:abc"));
        assert!(image_tag_is_latest("registry:5000/nginx"));
    }

    #[test]
    fn service_defaults_fill_ports_and_cluster_ip() {
        let mut spec = json!({"ports": [{"port": 443}]});
        default_service_spec(&mut spec);
        assert_eq!(spec["ports"][0]["protocol"], "TCP");
        assert_eq!(spec["ports"][0]["targetPort"], 443);
        assert!(spec["clusterIP"].as_str().unwrap().starts_with("10."));
        assert_eq!(spec["clusterIPs"][0], spec["clusterIP"]);
        let mut headless = json!({"clusterIP": "None"});
        default_service_spec(&mut headless);
        assert_eq!(headless["clusterIP"], "None");
    }

    #[test]
    fn string_data_is_folded_into_data() {
        let mut obj = json!({"stringData": {"k": "v"}}).as_object().unwrap().clone();
        fold_string_data(&mut obj).unwrap();
        assert_eq!(obj["data"]["k"], "dg==");
        assert!(!obj.contains_key("stringData"));
    }
}

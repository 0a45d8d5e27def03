//! Decoding of Kubernetes protobuf request bodies, for the kinds that kubectl's typed clients
//! write with `Content-Type: application/vnd.kubernetes.protobuf` (checklist A6).
//!
//! client-go's generated clients send protobuf for built-in kinds: `kubectl drain` posts
//! Evictions that way, and `kubectl create namespace|configmap|secret|serviceaccount|service|
//! role|clusterrole|rolebinding|clusterrolebinding|poddisruptionbudget|deployment` the objects
//! they build; Helm and `kubectl drain --disable-eviction` send DeleteOptions with their DELETEs.
//! Everything else kubectl does (apply, patch, label, delete, create -f) uses JSON.
//! This module decodes the envelope (`k8s\0` + `runtime.Unknown`) and, driven by small field
//! tables transcribed from the upstream `generated.proto` files, the messages of those kinds into
//! the same JSON the server would have received. Other kinds answer 415, naming what is
//! supported, and so does a message with a non-empty field the tables do not know: the server
//! refuses a body rather than silently drop part of it.

use base64::Engine;
use serde_json::{Map, Value, json};

use crate::error::ApiError;

/// The magic prefix of Kubernetes protobuf payloads.
const MAGIC: &[u8] = b"k8s\0";
const MAX_DEPTH: usize = 32;

#[derive(Clone, Copy, Debug)]
enum Ty {
    Str,
    Int64,
    Int32,
    /// A `*int32` in Go: present means set, so `0` is kept.
    OptInt32,
    /// A `*bool` in Go: present means set, so `false` is kept.
    Bool,
    /// A plain `bool` with `omitempty` in Go: `false` is the zero value and is dropped.
    Flag,
    IntOrString,
    Time,
    Msg(&'static Desc),
    MapStr,
    MapBytes,
    RepeatedStr,
    RepeatedMsg(&'static Desc),
    FieldsV1,
}

#[derive(Debug)]
struct Desc(&'static str, &'static [(u32, &'static str, Ty)]);

static OWNER_REFERENCE: Desc = Desc(
    "OwnerReference",
    &[
        (5, "apiVersion", Ty::Str),
        (1, "kind", Ty::Str),
        (3, "name", Ty::Str),
        (4, "uid", Ty::Str),
        (6, "controller", Ty::Bool),
        (7, "blockOwnerDeletion", Ty::Bool),
    ],
);
static MANAGED_FIELDS_ENTRY: Desc = Desc(
    "ManagedFieldsEntry",
    &[
        (1, "manager", Ty::Str),
        (2, "operation", Ty::Str),
        (3, "apiVersion", Ty::Str),
        (4, "time", Ty::Time),
        (6, "fieldsType", Ty::Str),
        (7, "fieldsV1", Ty::FieldsV1),
        (8, "subresource", Ty::Str),
    ],
);
static OBJECT_META: Desc = Desc(
    "ObjectMeta",
    &[
        (1, "name", Ty::Str),
        (2, "generateName", Ty::Str),
        (3, "namespace", Ty::Str),
        (4, "selfLink", Ty::Str),
        (5, "uid", Ty::Str),
        (6, "resourceVersion", Ty::Str),
        (7, "generation", Ty::Int64),
        (8, "creationTimestamp", Ty::Time),
        (9, "deletionTimestamp", Ty::Time),
        (10, "deletionGracePeriodSeconds", Ty::Int64),
        (11, "labels", Ty::MapStr),
        (12, "annotations", Ty::MapStr),
        (13, "ownerReferences", Ty::RepeatedMsg(&OWNER_REFERENCE)),
        (14, "finalizers", Ty::RepeatedStr),
        (17, "managedFields", Ty::RepeatedMsg(&MANAGED_FIELDS_ENTRY)),
    ],
);
static PRECONDITIONS: Desc = Desc("Preconditions", &[(1, "uid", Ty::Str), (2, "resourceVersion", Ty::Str)]);
static DELETE_OPTIONS: Desc = Desc(
    "DeleteOptions",
    &[
        (1, "gracePeriodSeconds", Ty::Int64),
        (2, "preconditions", Ty::Msg(&PRECONDITIONS)),
        (3, "orphanDependents", Ty::Bool),
        (4, "propagationPolicy", Ty::Str),
        (5, "dryRun", Ty::RepeatedStr),
        (6, "ignoreStoreReadErrorWithClusterBreakingPotential", Ty::Bool),
    ],
);
static EVICTION: Desc =
    Desc("Eviction", &[(1, "metadata", Ty::Msg(&OBJECT_META)), (2, "deleteOptions", Ty::Msg(&DELETE_OPTIONS))]);
static CONFIG_MAP: Desc = Desc(
    "ConfigMap",
    &[
        (1, "metadata", Ty::Msg(&OBJECT_META)),
        (2, "data", Ty::MapStr),
        (3, "binaryData", Ty::MapBytes),
        (4, "immutable", Ty::Bool),
    ],
);
static SECRET: Desc = Desc(
    "Secret",
    &[
        (1, "metadata", Ty::Msg(&OBJECT_META)),
        (2, "data", Ty::MapBytes),
        (3, "type", Ty::Str),
        (4, "stringData", Ty::MapStr),
        (5, "immutable", Ty::Bool),
    ],
);
static NAMESPACE_SPEC: Desc = Desc("NamespaceSpec", &[(1, "finalizers", Ty::RepeatedStr)]);
static NAMESPACE: Desc =
    Desc("Namespace", &[(1, "metadata", Ty::Msg(&OBJECT_META)), (2, "spec", Ty::Msg(&NAMESPACE_SPEC))]);
static OBJECT_REFERENCE: Desc = Desc(
    "ObjectReference",
    &[
        (1, "kind", Ty::Str),
        (2, "namespace", Ty::Str),
        (3, "name", Ty::Str),
        (4, "uid", Ty::Str),
        (5, "apiVersion", Ty::Str),
        (6, "resourceVersion", Ty::Str),
        (7, "fieldPath", Ty::Str),
    ],
);
static LOCAL_OBJECT_REFERENCE: Desc = Desc("LocalObjectReference", &[(1, "name", Ty::Str)]);
static SERVICE_ACCOUNT: Desc = Desc(
    "ServiceAccount",
    &[
        (1, "metadata", Ty::Msg(&OBJECT_META)),
        (2, "secrets", Ty::RepeatedMsg(&OBJECT_REFERENCE)),
        (3, "imagePullSecrets", Ty::RepeatedMsg(&LOCAL_OBJECT_REFERENCE)),
        (4, "automountServiceAccountToken", Ty::Bool),
    ],
);
static BINDING: Desc =
    Desc("Binding", &[(1, "metadata", Ty::Msg(&OBJECT_META)), (2, "target", Ty::Msg(&OBJECT_REFERENCE))]);
static LABEL_SELECTOR_REQUIREMENT: Desc =
    Desc("LabelSelectorRequirement", &[(1, "key", Ty::Str), (2, "operator", Ty::Str), (3, "values", Ty::RepeatedStr)]);
static LABEL_SELECTOR: Desc = Desc(
    "LabelSelector",
    &[(1, "matchLabels", Ty::MapStr), (2, "matchExpressions", Ty::RepeatedMsg(&LABEL_SELECTOR_REQUIREMENT))],
);
static POLICY_RULE: Desc = Desc(
    "PolicyRule",
    &[
        (1, "verbs", Ty::RepeatedStr),
        (2, "apiGroups", Ty::RepeatedStr),
        (3, "resources", Ty::RepeatedStr),
        (4, "resourceNames", Ty::RepeatedStr),
        (5, "nonResourceURLs", Ty::RepeatedStr),
    ],
);
static SUBJECT: Desc =
    Desc("Subject", &[(1, "kind", Ty::Str), (2, "apiGroup", Ty::Str), (3, "name", Ty::Str), (4, "namespace", Ty::Str)]);
static ROLE_REF: Desc = Desc("RoleRef", &[(1, "apiGroup", Ty::Str), (2, "kind", Ty::Str), (3, "name", Ty::Str)]);
static AGGREGATION_RULE: Desc =
    Desc("AggregationRule", &[(1, "clusterRoleSelectors", Ty::RepeatedMsg(&LABEL_SELECTOR))]);
static ROLE: Desc =
    Desc("Role", &[(1, "metadata", Ty::Msg(&OBJECT_META)), (2, "rules", Ty::RepeatedMsg(&POLICY_RULE))]);
static CLUSTER_ROLE: Desc = Desc(
    "ClusterRole",
    &[
        (1, "metadata", Ty::Msg(&OBJECT_META)),
        (2, "rules", Ty::RepeatedMsg(&POLICY_RULE)),
        (3, "aggregationRule", Ty::Msg(&AGGREGATION_RULE)),
    ],
);
static ROLE_BINDING: Desc = Desc(
    "RoleBinding",
    &[
        (1, "metadata", Ty::Msg(&OBJECT_META)),
        (2, "subjects", Ty::RepeatedMsg(&SUBJECT)),
        (3, "roleRef", Ty::Msg(&ROLE_REF)),
    ],
);
static SERVICE_PORT: Desc = Desc(
    "ServicePort",
    &[
        (1, "name", Ty::Str),
        (2, "protocol", Ty::Str),
        (3, "port", Ty::Int32),
        (4, "targetPort", Ty::IntOrString),
        (5, "nodePort", Ty::Int32),
        (6, "appProtocol", Ty::Str),
    ],
);
static CLIENT_IP_CONFIG: Desc = Desc("ClientIPConfig", &[(1, "timeoutSeconds", Ty::Int32)]);
static SESSION_AFFINITY_CONFIG: Desc = Desc("SessionAffinityConfig", &[(1, "clientIP", Ty::Msg(&CLIENT_IP_CONFIG))]);
static SERVICE_SPEC: Desc = Desc(
    "ServiceSpec",
    &[
        (1, "ports", Ty::RepeatedMsg(&SERVICE_PORT)),
        (2, "selector", Ty::MapStr),
        (3, "clusterIP", Ty::Str),
        (4, "type", Ty::Str),
        (5, "externalIPs", Ty::RepeatedStr),
        (7, "sessionAffinity", Ty::Str),
        (8, "loadBalancerIP", Ty::Str),
        (9, "loadBalancerSourceRanges", Ty::RepeatedStr),
        (10, "externalName", Ty::Str),
        (11, "externalTrafficPolicy", Ty::Str),
        (12, "healthCheckNodePort", Ty::Int32),
        (13, "publishNotReadyAddresses", Ty::Flag),
        (14, "sessionAffinityConfig", Ty::Msg(&SESSION_AFFINITY_CONFIG)),
        (17, "ipFamilyPolicy", Ty::Str),
        (18, "clusterIPs", Ty::RepeatedStr),
        (19, "ipFamilies", Ty::RepeatedStr),
        (20, "allocateLoadBalancerNodePorts", Ty::Bool),
        (21, "loadBalancerClass", Ty::Str),
        (22, "internalTrafficPolicy", Ty::Str),
        (23, "trafficDistribution", Ty::Str),
    ],
);
/// Status is written by controllers, never sent on create; an empty one is skipped.
static EMPTY_STATUS: Desc = Desc("Status", &[]);
static SERVICE: Desc = Desc(
    "Service",
    &[
        (1, "metadata", Ty::Msg(&OBJECT_META)),
        (2, "spec", Ty::Msg(&SERVICE_SPEC)),
        (3, "status", Ty::Msg(&EMPTY_STATUS)),
    ],
);
static PDB_SPEC: Desc = Desc(
    "PodDisruptionBudgetSpec",
    &[
        (1, "minAvailable", Ty::IntOrString),
        (2, "selector", Ty::Msg(&LABEL_SELECTOR)),
        (3, "maxUnavailable", Ty::IntOrString),
        (4, "unhealthyPodEvictionPolicy", Ty::Str),
    ],
);
static PDB: Desc = Desc(
    "PodDisruptionBudget",
    &[(1, "metadata", Ty::Msg(&OBJECT_META)), (2, "spec", Ty::Msg(&PDB_SPEC)), (3, "status", Ty::Msg(&EMPTY_STATUS))],
);
static BOUND_OBJECT_REFERENCE: Desc = Desc(
    "BoundObjectReference",
    &[(1, "kind", Ty::Str), (2, "apiVersion", Ty::Str), (3, "name", Ty::Str), (4, "uid", Ty::Str)],
);
static TOKEN_REQUEST_SPEC: Desc = Desc(
    "TokenRequestSpec",
    &[
        (1, "audiences", Ty::RepeatedStr),
        (4, "expirationSeconds", Ty::Int64),
        (3, "boundObjectRef", Ty::Msg(&BOUND_OBJECT_REFERENCE)),
    ],
);
static TOKEN_REQUEST: Desc = Desc(
    "TokenRequest",
    &[
        (1, "metadata", Ty::Msg(&OBJECT_META)),
        (2, "spec", Ty::Msg(&TOKEN_REQUEST_SPEC)),
        (3, "status", Ty::Msg(&EMPTY_STATUS)),
    ],
);
static TOKEN_REVIEW_SPEC: Desc = Desc("TokenReviewSpec", &[(1, "token", Ty::Str), (2, "audiences", Ty::RepeatedStr)]);
static TOKEN_REVIEW: Desc = Desc(
    "TokenReview",
    &[
        (1, "metadata", Ty::Msg(&OBJECT_META)),
        (2, "spec", Ty::Msg(&TOKEN_REVIEW_SPEC)),
        (3, "status", Ty::Msg(&EMPTY_STATUS)),
    ],
);
static SELF_SUBJECT_REVIEW: Desc =
    Desc("SelfSubjectReview", &[(1, "metadata", Ty::Msg(&OBJECT_META)), (2, "status", Ty::Msg(&EMPTY_STATUS))]);
static RESOURCE_ATTRIBUTES: Desc = Desc(
    "ResourceAttributes",
    &[
        (1, "namespace", Ty::Str),
        (2, "verb", Ty::Str),
        (3, "group", Ty::Str),
        (4, "version", Ty::Str),
        (5, "resource", Ty::Str),
        (6, "subresource", Ty::Str),
        (7, "name", Ty::Str),
    ],
);
static NON_RESOURCE_ATTRIBUTES: Desc = Desc("NonResourceAttributes", &[(1, "path", Ty::Str), (2, "verb", Ty::Str)]);
static SELF_SUBJECT_ACCESS_REVIEW_SPEC: Desc = Desc(
    "SelfSubjectAccessReviewSpec",
    &[
        (1, "resourceAttributes", Ty::Msg(&RESOURCE_ATTRIBUTES)),
        (2, "nonResourceAttributes", Ty::Msg(&NON_RESOURCE_ATTRIBUTES)),
    ],
);
static SELF_SUBJECT_ACCESS_REVIEW: Desc = Desc(
    "SelfSubjectAccessReview",
    &[
        (1, "metadata", Ty::Msg(&OBJECT_META)),
        (2, "spec", Ty::Msg(&SELF_SUBJECT_ACCESS_REVIEW_SPEC)),
        (3, "status", Ty::Msg(&EMPTY_STATUS)),
    ],
);
static SUBJECT_ACCESS_REVIEW_SPEC: Desc = Desc(
    "SubjectAccessReviewSpec",
    &[
        (1, "resourceAttributes", Ty::Msg(&RESOURCE_ATTRIBUTES)),
        (2, "nonResourceAttributes", Ty::Msg(&NON_RESOURCE_ATTRIBUTES)),
        (3, "user", Ty::Str),
        (4, "groups", Ty::RepeatedStr),
        (6, "uid", Ty::Str),
    ],
);
static SUBJECT_ACCESS_REVIEW: Desc = Desc(
    "SubjectAccessReview",
    &[
        (1, "metadata", Ty::Msg(&OBJECT_META)),
        (2, "spec", Ty::Msg(&SUBJECT_ACCESS_REVIEW_SPEC)),
        (3, "status", Ty::Msg(&EMPTY_STATUS)),
    ],
);
static SELF_SUBJECT_RULES_REVIEW_SPEC: Desc = Desc("SelfSubjectRulesReviewSpec", &[(1, "namespace", Ty::Str)]);
static SELF_SUBJECT_RULES_REVIEW: Desc = Desc(
    "SelfSubjectRulesReview",
    &[
        (1, "metadata", Ty::Msg(&OBJECT_META)),
        (2, "spec", Ty::Msg(&SELF_SUBJECT_RULES_REVIEW_SPEC)),
        (3, "status", Ty::Msg(&EMPTY_STATUS)),
    ],
);
static TYPE_META: Desc = Desc("TypeMeta", &[(1, "apiVersion", Ty::Str), (2, "kind", Ty::Str)]);

static CONTAINER_PORT: Desc = Desc(
    "ContainerPort",
    &[
        (1, "name", Ty::Str),
        (2, "hostPort", Ty::Int32),
        (3, "containerPort", Ty::Int32),
        (4, "protocol", Ty::Str),
        (5, "hostIP", Ty::Str),
    ],
);
static ENV_VAR: Desc = Desc("EnvVar", &[(1, "name", Ty::Str), (2, "value", Ty::Str)]);
/// What `kubectl create deployment|job` put into a container; anything else is refused.
static CONTAINER: Desc = Desc(
    "Container",
    &[
        (1, "name", Ty::Str),
        (2, "image", Ty::Str),
        (3, "command", Ty::RepeatedStr),
        (4, "args", Ty::RepeatedStr),
        (5, "workingDir", Ty::Str),
        (6, "ports", Ty::RepeatedMsg(&CONTAINER_PORT)),
        (7, "env", Ty::RepeatedMsg(&ENV_VAR)),
        (13, "terminationMessagePath", Ty::Str),
        (14, "imagePullPolicy", Ty::Str),
        (16, "stdin", Ty::Flag),
        (17, "stdinOnce", Ty::Flag),
        (18, "tty", Ty::Flag),
        (20, "terminationMessagePolicy", Ty::Str),
    ],
);
static POD_SPEC: Desc = Desc(
    "PodSpec",
    &[
        (2, "containers", Ty::RepeatedMsg(&CONTAINER)),
        (3, "restartPolicy", Ty::Str),
        (6, "dnsPolicy", Ty::Str),
        (7, "nodeSelector", Ty::MapStr),
        (8, "serviceAccountName", Ty::Str),
        (10, "nodeName", Ty::Str),
        (11, "hostNetwork", Ty::Flag),
        (19, "schedulerName", Ty::Str),
        (20, "initContainers", Ty::RepeatedMsg(&CONTAINER)),
    ],
);
static POD_TEMPLATE_SPEC: Desc =
    Desc("PodTemplateSpec", &[(1, "metadata", Ty::Msg(&OBJECT_META)), (2, "spec", Ty::Msg(&POD_SPEC))]);
static ROLLING_UPDATE_DEPLOYMENT: Desc =
    Desc("RollingUpdateDeployment", &[(1, "maxUnavailable", Ty::IntOrString), (2, "maxSurge", Ty::IntOrString)]);
static DEPLOYMENT_STRATEGY: Desc =
    Desc("DeploymentStrategy", &[(1, "type", Ty::Str), (2, "rollingUpdate", Ty::Msg(&ROLLING_UPDATE_DEPLOYMENT))]);
static DEPLOYMENT_SPEC: Desc = Desc(
    "DeploymentSpec",
    &[
        (1, "replicas", Ty::OptInt32),
        (2, "selector", Ty::Msg(&LABEL_SELECTOR)),
        (3, "template", Ty::Msg(&POD_TEMPLATE_SPEC)),
        (4, "strategy", Ty::Msg(&DEPLOYMENT_STRATEGY)),
        (5, "minReadySeconds", Ty::Int32),
        (6, "revisionHistoryLimit", Ty::OptInt32),
        (7, "paused", Ty::Flag),
        (9, "progressDeadlineSeconds", Ty::OptInt32),
    ],
);
static DEPLOYMENT: Desc = Desc(
    "Deployment",
    &[
        (1, "metadata", Ty::Msg(&OBJECT_META)),
        (2, "spec", Ty::Msg(&DEPLOYMENT_SPEC)),
        (3, "status", Ty::Msg(&EMPTY_STATUS)),
    ],
);

/// The kinds whose protobuf bodies are understood.
const SUPPORTED: &[(&str, &str, &Desc)] = &[
    ("policy/v1", "Eviction", &EVICTION),
    ("v1", "ConfigMap", &CONFIG_MAP),
    ("v1", "Secret", &SECRET),
    ("v1", "Namespace", &NAMESPACE),
    ("v1", "ServiceAccount", &SERVICE_ACCOUNT),
    ("v1", "Binding", &BINDING),
    ("v1", "Service", &SERVICE),
    ("rbac.authorization.k8s.io/v1", "Role", &ROLE),
    ("rbac.authorization.k8s.io/v1", "ClusterRole", &CLUSTER_ROLE),
    ("rbac.authorization.k8s.io/v1", "RoleBinding", &ROLE_BINDING),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", &ROLE_BINDING),
    ("policy/v1", "PodDisruptionBudget", &PDB),
    ("apps/v1", "Deployment", &DEPLOYMENT),
    ("meta.k8s.io/v1", "DeleteOptions", &DELETE_OPTIONS),
    ("v1", "DeleteOptions", &DELETE_OPTIONS),
    ("authentication.k8s.io/v1", "TokenRequest", &TOKEN_REQUEST),
    ("authentication.k8s.io/v1", "TokenReview", &TOKEN_REVIEW),
    ("authentication.k8s.io/v1", "SelfSubjectReview", &SELF_SUBJECT_REVIEW),
    ("authorization.k8s.io/v1", "SelfSubjectAccessReview", &SELF_SUBJECT_ACCESS_REVIEW),
    ("authorization.k8s.io/v1", "SubjectAccessReview", &SUBJECT_ACCESS_REVIEW),
    ("authorization.k8s.io/v1", "LocalSubjectAccessReview", &SUBJECT_ACCESS_REVIEW),
    ("authorization.k8s.io/v1", "SelfSubjectRulesReview", &SELF_SUBJECT_RULES_REVIEW),
];

/// Whether a Content-Type is Kubernetes protobuf.
pub fn is_protobuf(content_type: &str) -> bool {
    content_type.split(';').next().unwrap_or("").trim() == "application/vnd.kubernetes.protobuf"
}

/// Decode a protobuf request body into the JSON object it stands for.
pub fn decode(body: &[u8]) -> Result<Value, ApiError> {
    let rest = body
        .strip_prefix(MAGIC)
        .ok_or_else(|| ApiError::bad_request("protobuf body does not start with the Kubernetes magic prefix"))?;
    let mut api_version = String::new();
    let mut kind = String::new();
    let mut raw: &[u8] = &[];
    let mut r = Reader(rest);
    while let Some((field, wire)) = r.key()? {
        match (field, wire) {
            (1, 2) => {
                let tm = decode_message(r.bytes()?, &TYPE_META, 0)?;
                api_version = tm.get("apiVersion").and_then(Value::as_str).unwrap_or("").to_string();
                kind = tm.get("kind").and_then(Value::as_str).unwrap_or("").to_string();
            }
            (2, 2) => raw = r.bytes()?,
            _ => r.skip(wire)?,
        }
    }
    let Some((_, _, desc)) = SUPPORTED.iter().find(|(v, k, _)| *v == api_version && *k == kind) else {
        let names: Vec<String> = SUPPORTED.iter().map(|(v, k, _)| format!("{v} {k}")).collect();
        return Err(ApiError {
            code: 415,
            reason: "UnsupportedMediaType",
            message: format!(
                "protobuf request bodies are supported only for {}; send {api_version} {kind} as application/json",
                names.join(", ")
            ),
            details: None,
        });
    };
    let mut obj = decode_message(raw, desc, 0)?;
    if let Some(map) = obj.as_object_mut() {
        map.insert("apiVersion".into(), json!(api_version));
        map.insert("kind".into(), json!(kind));
    }
    Ok(obj)
}

fn bad(what: &str) -> ApiError {
    ApiError::bad_request(format!("malformed protobuf body: {what}"))
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Result<u64, ApiError> {
        let mut v: u64 = 0;
        for i in 0..10 {
            let (&b, rest) = self.0.split_first().ok_or_else(|| bad("truncated varint"))?;
            self.0 = rest;
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(bad("varint too long"))
    }

    fn key(&mut self) -> Result<Option<(u32, u8)>, ApiError> {
        if self.0.is_empty() {
            return Ok(None);
        }
        let k = self.varint()?;
        let field = u32::try_from(k >> 3).map_err(|_| bad("field number"))?;
        Ok(Some((field, (k & 7) as u8)))
    }

    fn bytes(&mut self) -> Result<&'a [u8], ApiError> {
        let len = usize::try_from(self.varint()?).map_err(|_| bad("length"))?;
        if len > self.0.len() {
            return Err(bad("truncated field"));
        }
        let (head, tail) = self.0.split_at(len);
        self.0 = tail;
        Ok(head)
    }

    /// Skip a field and say whether it carried anything: a non-zero scalar, or bytes that are
    /// not an empty message (Go writes an empty `status: {phase: ""}` as a nested message of
    /// zero-valued fields, which carries nothing).
    fn skip_counting(&mut self, wire: u8) -> Result<bool, ApiError> {
        match wire {
            0 => self.varint().map(|v| v != 0),
            2 => self.bytes().map(|b| !is_zero_message(b, 0)),
            _ => self.skip(wire).map(|()| true),
        }
    }

    fn skip(&mut self, wire: u8) -> Result<(), ApiError> {
        match wire {
            0 => self.varint().map(|_| ()),
            1 => self.advance(8),
            2 => self.bytes().map(|_| ()),
            5 => self.advance(4),
            _ => Err(bad("unsupported wire type")),
        }
    }

    fn advance(&mut self, n: usize) -> Result<(), ApiError> {
        if n > self.0.len() {
            return Err(bad("truncated field"));
        }
        self.0 = &self.0[n..];
        Ok(())
    }
}

fn utf8(b: &[u8]) -> Result<String, ApiError> {
    String::from_utf8(b.to_vec()).map_err(|_| bad("string is not UTF-8"))
}

fn decode_message(buf: &[u8], desc: &Desc, depth: usize) -> Result<Value, ApiError> {
    if depth > MAX_DEPTH {
        return Err(bad("nested too deeply"));
    }
    let mut out = Map::new();
    let mut r = Reader(buf);
    while let Some((field, wire)) = r.key()? {
        let Some((_, name, ty)) = desc.1.iter().find(|(n, _, _)| *n == field) else {
            // Go's marshaller writes zero values of fields it has, so an unknown field that is
            // empty carries nothing. One with content would be lost: refuse the body instead.
            if r.skip_counting(wire)? {
                return Err(unknown_field(desc, field));
            }
            continue;
        };
        let name = name.to_string();
        match (ty, wire) {
            // Go's marshaller writes zero-valued scalars; JSON's `omitempty` would drop them.
            (Ty::Str, 2) => {
                let s = utf8(r.bytes()?)?;
                if !s.is_empty() {
                    out.insert(name, json!(s));
                }
            }
            (Ty::Int64, 0) => {
                let n = r.varint()? as i64;
                if n != 0 {
                    out.insert(name, json!(n));
                }
            }
            (Ty::Int32, 0) => {
                // Negative int32 values are sign-extended to ten bytes on the wire.
                let n = r.varint()? as i64 as i32;
                if n != 0 {
                    out.insert(name, json!(n));
                }
            }
            (Ty::OptInt32, 0) => {
                out.insert(name, json!(r.varint()? as i64 as i32));
            }
            (Ty::Bool, 0) => {
                out.insert(name, json!(r.varint()? != 0));
            }
            (Ty::Flag, 0) => {
                if r.varint()? != 0 {
                    out.insert(name, json!(true));
                }
            }
            (Ty::IntOrString, 2) => {
                out.insert(name, decode_int_or_string(r.bytes()?)?);
            }
            (Ty::Time, 2) => {
                let t = decode_time(r.bytes()?)?;
                out.insert(name, t);
            }
            (Ty::Msg(d), 2) => {
                out.insert(name, decode_message(r.bytes()?, d, depth + 1)?);
            }
            (Ty::MapStr | Ty::MapBytes, 2) => {
                let (k, v) = decode_entry(r.bytes()?, matches!(ty, Ty::MapBytes))?;
                let map = out.entry(name).or_insert_with(|| json!({}));
                if let Some(m) = map.as_object_mut() {
                    m.insert(k, v);
                }
            }
            (Ty::RepeatedStr, 2) => {
                let s = utf8(r.bytes()?)?;
                push(&mut out, name, json!(s));
            }
            (Ty::RepeatedMsg(d), 2) => {
                let m = decode_message(r.bytes()?, d, depth + 1)?;
                push(&mut out, name, m);
            }
            (Ty::FieldsV1, 2) => {
                // FieldsV1 { raw = 1 } holds JSON.
                let mut fr = Reader(r.bytes()?);
                while let Some((f, w)) = fr.key()? {
                    if (f, w) == (1, 2) {
                        let v: Value = serde_json::from_slice(fr.bytes()?).map_err(|_| bad("fieldsV1 is not JSON"))?;
                        out.insert(name.clone(), v);
                    } else {
                        fr.skip(w)?;
                    }
                }
            }
            (_, w) => return Err(bad(&format!("field {name} has wire type {w}"))),
        }
    }
    Ok(Value::Object(out))
}

/// `intstr.IntOrString { type = 1 (0 = Int, 1 = String); intVal = 2; strVal = 3 }` as the
/// JSON number or string it stands for.
fn decode_int_or_string(buf: &[u8]) -> Result<Value, ApiError> {
    let mut r = Reader(buf);
    let (mut is_string, mut int_val, mut str_val) = (false, 0i32, String::new());
    while let Some((f, w)) = r.key()? {
        match (f, w) {
            (1, 0) => is_string = r.varint()? == 1,
            (2, 0) => int_val = r.varint()? as i64 as i32,
            (3, 2) => str_val = utf8(r.bytes()?)?,
            _ => r.skip(w)?,
        }
    }
    Ok(if is_string { json!(str_val) } else { json!(int_val) })
}

/// Whether `buf` parses as a message whose fields are all zero values, recursively. Bytes that
/// do not parse as a message count as content.
fn is_zero_message(buf: &[u8], depth: usize) -> bool {
    if depth > MAX_DEPTH {
        return false;
    }
    let mut r = Reader(buf);
    loop {
        match r.key() {
            Ok(None) => return true,
            Ok(Some((_, 0))) => {
                if !matches!(r.varint(), Ok(0)) {
                    return false;
                }
            }
            Ok(Some((_, 2))) => match r.bytes() {
                Ok(b) if b.is_empty() || is_zero_message(b, depth + 1) => {}
                _ => return false,
            },
            _ => return false,
        }
    }
}

fn unknown_field(desc: &Desc, field: u32) -> ApiError {
    ApiError {
        code: 415,
        reason: "UnsupportedMediaType",
        message: format!(
            "the protobuf {} carries field {field}, which this server does not decode; send the object as application/json",
            desc.0
        ),
        details: None,
    }
}

fn push(out: &mut Map<String, Value>, name: String, v: Value) {
    let list = out.entry(name).or_insert_with(|| json!([]));
    if let Some(a) = list.as_array_mut() {
        a.push(v);
    }
}

fn decode_entry(buf: &[u8], bytes_value: bool) -> Result<(String, Value), ApiError> {
    let mut r = Reader(buf);
    let mut key = String::new();
    let mut value = json!("");
    while let Some((f, w)) = r.key()? {
        match (f, w) {
            (1, 2) => key = utf8(r.bytes()?)?,
            (2, 2) => {
                let b = r.bytes()?;
                value = if bytes_value {
                    json!(base64::engine::general_purpose::STANDARD.encode(b))
                } else {
                    json!(utf8(b)?)
                };
            }
            _ => r.skip(w)?,
        }
    }
    Ok((key, value))
}

fn decode_time(buf: &[u8]) -> Result<Value, ApiError> {
    let mut r = Reader(buf);
    let mut seconds: i64 = 0;
    while let Some((f, w)) = r.key()? {
        match (f, w) {
            (1, 0) => seconds = r.varint()? as i64,
            _ => r.skip(w)?,
        }
    }
    let t = jiff::Timestamp::from_second(seconds).map_err(|_| bad("time out of range"))?;
    Ok(json!(crate::api::format_time(t)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn varint(mut v: u64, out: &mut Vec<u8>) {
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                out.push(b);
                return;
            }
            out.push(b | 0x80);
        }
    }

    fn field_bytes(field: u32, bytes: &[u8], out: &mut Vec<u8>) {
        varint(u64::from(field) << 3 | 2, out);
        varint(bytes.len() as u64, out);
        out.extend_from_slice(bytes);
    }

    fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
        let mut tm = Vec::new();
        field_bytes(1, api_version.as_bytes(), &mut tm);
        field_bytes(2, kind.as_bytes(), &mut tm);
        let mut unknown = Vec::new();
        field_bytes(1, &tm, &mut unknown);
        field_bytes(2, raw, &mut unknown);
        let mut out = MAGIC.to_vec();
        out.extend(unknown);
        out
    }

    #[test]
    fn decodes_an_eviction_with_delete_options() {
        let mut meta = Vec::new();
        field_bytes(1, b"web-0", &mut meta);
        field_bytes(2, b"", &mut meta);
        field_bytes(3, b"shop", &mut meta);
        let mut opts = Vec::new();
        varint(1 << 3, &mut opts);
        varint(30, &mut opts);
        let mut raw = Vec::new();
        field_bytes(1, &meta, &mut raw);
        field_bytes(2, &opts, &mut raw);
        let v = decode(&envelope("policy/v1", "Eviction", &raw)).unwrap();
        assert_eq!(
            v,
            json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "web-0", "namespace": "shop"}, "deleteOptions": {"gracePeriodSeconds": 30}})
        );
    }

    #[test]
    fn decodes_maps_and_bytes() {
        let mut entry = Vec::new();
        field_bytes(1, b"k", &mut entry);
        field_bytes(2, b"\x00\x01", &mut entry);
        let mut raw = Vec::new();
        field_bytes(2, &entry, &mut raw);
        field_bytes(3, b"Opaque", &mut raw);
        let v = decode(&envelope("v1", "Secret", &raw)).unwrap();
        assert_eq!(v["data"]["k"], "AAE=");
        assert_eq!(v["type"], "Opaque");
    }

    #[test]
    fn decodes_a_deployment_as_kubectl_create_builds_it() {
        let mut container = Vec::new();
        field_bytes(1, b"nginx", &mut container);
        field_bytes(2, b"nginx:1.27", &mut container);
        let mut port = Vec::new();
        field_varint(3, 8080, &mut port);
        field_bytes(6, &port, &mut container);
        field_bytes(8, &[], &mut container); // an empty ResourceRequirements
        let mut pod_spec = Vec::new();
        field_bytes(2, &container, &mut pod_spec);
        field_bytes(3, b"", &mut pod_spec);
        let mut template = Vec::new();
        field_bytes(2, &pod_spec, &mut template);
        let mut spec = Vec::new();
        field_varint(1, 0, &mut spec); // replicas: 0, set explicitly
        field_bytes(3, &template, &mut spec);
        field_bytes(4, &[], &mut spec);
        let mut raw = Vec::new();
        field_bytes(2, &spec, &mut raw);
        let v = decode(&envelope("apps/v1", "Deployment", &raw)).unwrap();
        assert_eq!(v["spec"]["replicas"], 0, "an explicit zero is kept");
        let c = &v["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(c, &json!({"name": "nginx", "image": "nginx:1.27", "ports": [{"containerPort": 8080}]}));
        assert_eq!(v["spec"]["strategy"], json!({}));
    }

    #[test]
    fn unsupported_kinds_and_garbage_are_refused() {
        let e = decode(&envelope("batch/v1", "Job", &[])).unwrap_err();
        assert_eq!(e.code, 415);
        assert!(e.message.contains("policy/v1 Eviction"));
        assert_eq!(decode(b"nope").unwrap_err().code, 400);
        let mut truncated = envelope("v1", "ConfigMap", &[0x0a, 0x05, b'a']);
        truncated.truncate(truncated.len());
        assert_eq!(decode(&truncated).unwrap_err().code, 400);
    }

    fn field_varint(field: u32, v: u64, out: &mut Vec<u8>) {
        varint(u64::from(field) << 3, out);
        varint(v, out);
    }

    #[test]
    fn decodes_a_service_with_int_and_named_target_ports() {
        let mut by_number = Vec::new();
        field_bytes(1, b"https", &mut by_number);
        field_bytes(2, b"TCP", &mut by_number);
        field_varint(3, 443, &mut by_number);
        let mut target = Vec::new();
        field_varint(1, 0, &mut target);
        field_varint(2, 6443, &mut target);
        field_bytes(4, &target, &mut by_number);
        let mut by_name = Vec::new();
        field_varint(3, 80, &mut by_name);
        let mut named = Vec::new();
        field_varint(1, 1, &mut named);
        field_bytes(3, b"http", &mut named);
        field_bytes(4, &named, &mut by_name);
        let mut spec = Vec::new();
        field_bytes(1, &by_number, &mut spec);
        field_bytes(1, &by_name, &mut spec);
        field_bytes(4, b"ClusterIP", &mut spec);
        field_varint(13, 0, &mut spec);
        let mut raw = Vec::new();
        field_bytes(2, &spec, &mut raw);
        field_bytes(3, b"", &mut raw);
        let v = decode(&envelope("v1", "Service", &raw)).unwrap();
        assert_eq!(
            v["spec"],
            json!({"ports": [{"name": "https", "protocol": "TCP", "port": 443, "targetPort": 6443}, {"port": 80, "targetPort": "http"}], "type": "ClusterIP"})
        );
        assert!(v.get("status").is_none() || v["status"] == json!({}));
    }

    #[test]
    fn decodes_a_role_binding_and_a_pdb() {
        let mut subject = Vec::new();
        field_bytes(1, b"ServiceAccount", &mut subject);
        field_bytes(3, b"robot", &mut subject);
        field_bytes(4, b"team-a", &mut subject);
        let mut role_ref = Vec::new();
        field_bytes(1, b"rbac.authorization.k8s.io", &mut role_ref);
        field_bytes(2, b"Role", &mut role_ref);
        field_bytes(3, b"reader", &mut role_ref);
        let mut raw = Vec::new();
        field_bytes(2, &subject, &mut raw);
        field_bytes(3, &role_ref, &mut raw);
        let v = decode(&envelope("rbac.authorization.k8s.io/v1", "RoleBinding", &raw)).unwrap();
        assert_eq!(v["subjects"], json!([{"kind": "ServiceAccount", "name": "robot", "namespace": "team-a"}]));
        assert_eq!(v["roleRef"]["name"], "reader");

        let mut percent = Vec::new();
        field_varint(1, 1, &mut percent);
        field_bytes(3, b"50%", &mut percent);
        let mut entry = Vec::new();
        field_bytes(1, b"app", &mut entry);
        field_bytes(2, b"web", &mut entry);
        let mut selector = Vec::new();
        field_bytes(1, &entry, &mut selector);
        let mut spec = Vec::new();
        field_bytes(1, &percent, &mut spec);
        field_bytes(2, &selector, &mut spec);
        let mut raw = Vec::new();
        field_bytes(2, &spec, &mut raw);
        let v = decode(&envelope("policy/v1", "PodDisruptionBudget", &raw)).unwrap();
        assert_eq!(v["spec"], json!({"minAvailable": "50%", "selector": {"matchLabels": {"app": "web"}}}));
    }

    #[test]
    fn negative_int32_values_survive_sign_extension() {
        let mut port = Vec::new();
        field_varint(3, (-1i64) as u64, &mut port);
        let mut spec = Vec::new();
        field_bytes(1, &port, &mut spec);
        let mut raw = Vec::new();
        field_bytes(2, &spec, &mut raw);
        let v = decode(&envelope("v1", "Service", &raw)).unwrap();
        assert_eq!(v["spec"]["ports"][0]["port"], -1);
    }

    #[test]
    fn unknown_fields_are_skipped_when_empty_and_refused_when_not() {
        let mut raw = Vec::new();
        field_bytes(2, b"", &mut raw);
        field_varint(9, 0, &mut raw);
        assert!(decode(&envelope("v1", "ConfigMap", &raw)).is_ok());
        let mut empty_status = Vec::new();
        field_bytes(1, b"", &mut empty_status);
        let mut raw = Vec::new();
        field_bytes(9, &empty_status, &mut raw);
        assert!(decode(&envelope("v1", "ConfigMap", &raw)).is_ok(), "a message of empty fields carries nothing");
        let mut raw = Vec::new();
        field_bytes(9, b"payload", &mut raw);
        let e = decode(&envelope("v1", "ConfigMap", &raw)).unwrap_err();
        assert_eq!(e.code, 415);
        assert!(e.message.contains("ConfigMap carries field 9"), "{}", e.message);
    }
}

//! Shapes of the built-in kinds, transcribed from the markers on the upstream Go types
//! (`k8s.io/api`, `k8s.io/apimachinery`, `k8s.io/apiextensions-apiserver`):
//!
//! * `+listType=map` / `+listMapKey=...` (with `patchMergeKey` for strategic merge patch)
//!   become [`Shape::list_map`]; the first key is always the `patchMergeKey`;
//! * `+listType=set` (or `patchStrategy:"merge"` on a list of scalars) becomes [`Shape::set`];
//! * `+mapType=atomic` becomes [`Shape::Atomic`]; other `map[string]T` fields are
//!   [`Shape::map_of`] (tracked per key);
//! * `+listType=atomic` and unmarked lists need no declaration: anything undeclared is
//!   [`Shape::Untyped`], whose lists are atomic.
//!
//! Nested structs are declared where they contain keyed lists or maps, or are commonly set
//! by clients, so that server-side apply tracks them field by field like apiserver does.
//! Scalars are left undeclared: an untyped scalar is owned and replaced as a whole, which is
//! what a declared one would be.
//!
//! Two markers are worth calling out because they surprise people: `Node.spec.taints` is
//! atomic, and `Endpoints.subsets` is atomic. `Node.status.addresses` only has a
//! `patchMergeKey` (`type`) upstream; it is keyed by `type` here, which is what both strategic
//! merge patch and structured-merge-diff's conversion of that marker do.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, LazyLock};

use crate::shape::Shape;

/// A struct with the given declared fields.
fn st<const N: usize>(fields: [(&str, Shape); N]) -> Shape {
    Shape::structure(fields)
}

/// A struct whose fields are all scalars or atomic lists (nothing to declare).
fn plain() -> Shape {
    Shape::Struct { fields: BTreeMap::new(), other: None }
}

/// `map[string]string` and other maps tracked per key.
fn string_map() -> Shape {
    Shape::map_of(Shape::Atomic)
}

/// The ubiquitous `conditions` list: `+listType=map +listMapKey=type`.
fn conditions() -> Shape {
    Shape::list_map(plain(), &["type"])
}

/// `metav1.LabelSelector`: `matchLabels` per key, `matchExpressions` atomic.
fn label_selector() -> Shape {
    st([("matchLabels", string_map())])
}

fn build_object_meta() -> Shape {
    let scalars = [
        "name",
        "generateName",
        "namespace",
        "selfLink",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
    ];
    let mut fields: BTreeMap<String, Arc<Shape>> =
        scalars.iter().map(|name| (name.to_string(), Arc::new(Shape::Atomic))).collect();
    let declared = [
        ("labels", string_map()),
        ("annotations", string_map()),
        // +listType=set, patchStrategy=merge
        ("finalizers", Shape::set()),
        // +listType=map +listMapKey=uid, patchMergeKey=uid
        ("ownerReferences", Shape::list_map(plain(), &["uid"])),
        // +listType=atomic
        ("managedFields", Shape::Atomic),
    ];
    for (name, shape) in declared {
        fields.insert(name.to_string(), Arc::new(shape));
    }
    Shape::Struct { fields, other: None }
}

static OBJECT_META: LazyLock<Arc<Shape>> = LazyLock::new(|| Arc::new(build_object_meta()));

/// The shape of `metav1.ObjectMeta`: labels and annotations per key, finalizers a set,
/// ownerReferences keyed by `uid`, managedFields atomic.
pub fn object_meta_shape() -> Arc<Shape> {
    Arc::clone(&OBJECT_META)
}

fn meta() -> Shape {
    object_meta_shape().as_ref().clone()
}

/// A top-level object: apiVersion, kind, metadata and the given fields.
fn root<const N: usize>(fields: [(&str, Shape); N]) -> Shape {
    let mut all = vec![("apiVersion", Shape::Atomic), ("kind", Shape::Atomic), ("metadata", meta())];
    all.extend(fields);
    Shape::structure(all)
}

// ---------------------------------------------------------------------------------------
// core/v1 building blocks

/// `ResourceRequirements`: limits/requests per resource, claims keyed by `name`.
fn resource_requirements() -> Shape {
    st([("limits", string_map()), ("requests", string_map()), ("claims", Shape::list_map(plain(), &["name"]))])
}

/// Probe and lifecycle handlers: their lists (`exec.command`, `httpGet.httpHeaders`) are atomic.
fn handler() -> Shape {
    st([("exec", plain()), ("httpGet", plain()), ("tcpSocket", plain()), ("grpc", plain()), ("sleep", plain())])
}

fn env_var() -> Shape {
    st([(
        "valueFrom",
        st([
            ("configMapKeyRef", plain()),
            ("secretKeyRef", plain()),
            ("fieldRef", plain()),
            ("resourceFieldRef", plain()),
            ("fileKeyRef", plain()),
        ]),
    )])
}

/// `Container` (also used for init and ephemeral containers, which share these markers).
fn container() -> Shape {
    st([
        // +listType=map +listMapKey=containerPort +listMapKey=protocol, patchMergeKey=containerPort
        ("ports", Shape::list_map(plain(), &["containerPort", "protocol"])),
        // +listType=map +listMapKey=name, patchMergeKey=name
        ("env", Shape::list_map(env_var(), &["name"])),
        // +listType=map +listMapKey=mountPath, patchMergeKey=mountPath
        ("volumeMounts", Shape::list_map(plain(), &["mountPath"])),
        // +listType=map +listMapKey=devicePath, patchMergeKey=devicePath
        ("volumeDevices", Shape::list_map(plain(), &["devicePath"])),
        ("resources", resource_requirements()),
        ("livenessProbe", handler()),
        ("readinessProbe", handler()),
        ("startupProbe", handler()),
        ("lifecycle", st([("postStart", handler()), ("preStop", handler())])),
        (
            "securityContext",
            st([
                ("capabilities", plain()),
                ("seLinuxOptions", plain()),
                ("seccompProfile", plain()),
                ("appArmorProfile", plain()),
                ("windowsOptions", plain()),
            ]),
        ),
    ])
}

fn pvc_spec() -> Shape {
    st([
        ("resources", st([("limits", string_map()), ("requests", string_map())])),
        ("selector", label_selector()),
        ("dataSource", plain()),
        ("dataSourceRef", plain()),
    ])
}

/// `Volume`: the name plus one volume source; the sources' item lists are atomic.
fn volume() -> Shape {
    st([
        ("configMap", plain()),
        ("secret", plain()),
        ("emptyDir", plain()),
        ("hostPath", plain()),
        ("persistentVolumeClaim", plain()),
        ("projected", plain()),
        ("downwardAPI", plain()),
        ("nfs", plain()),
        ("image", plain()),
        ("csi", st([("volumeAttributes", string_map()), ("nodePublishSecretRef", plain())])),
        ("ephemeral", st([("volumeClaimTemplate", st([("metadata", meta()), ("spec", pvc_spec())]))])),
    ])
}

fn pod_spec() -> Shape {
    st([
        // +listType=map +listMapKey=name, patchMergeKey=name (all three container lists)
        ("containers", Shape::list_map(container(), &["name"])),
        ("initContainers", Shape::list_map(container(), &["name"])),
        ("ephemeralContainers", Shape::list_map(container(), &["name"])),
        // +listType=map +listMapKey=name, patchStrategy=merge,retainKeys
        ("volumes", Shape::list_map(volume(), &["name"])),
        ("imagePullSecrets", Shape::list_map(plain(), &["name"])),
        // +listType=map +listMapKey=ip; hostnames atomic
        ("hostAliases", Shape::list_map(plain(), &["ip"])),
        // +listType=map +listMapKey=topologyKey +listMapKey=whenUnsatisfiable
        (
            "topologySpreadConstraints",
            Shape::list_map(st([("labelSelector", label_selector())]), &["topologyKey", "whenUnsatisfiable"]),
        ),
        ("schedulingGates", Shape::list_map(plain(), &["name"])),
        ("resourceClaims", Shape::list_map(plain(), &["name"])),
        // +mapType=atomic
        ("nodeSelector", Shape::Atomic),
        ("overhead", string_map()),
        ("resources", resource_requirements()),
        (
            "affinity",
            st([
                ("nodeAffinity", st([("requiredDuringSchedulingIgnoredDuringExecution", plain())])),
                ("podAffinity", plain()),
                ("podAntiAffinity", plain()),
            ]),
        ),
        (
            "securityContext",
            st([
                ("seLinuxOptions", plain()),
                ("seccompProfile", plain()),
                ("appArmorProfile", plain()),
                ("windowsOptions", plain()),
            ]),
        ),
        ("dnsConfig", plain()),
        ("os", plain()),
        // tolerations, readinessGates: +listType=atomic (undeclared)
    ])
}

fn pod_status() -> Shape {
    st([
        ("conditions", conditions()),
        // +listType=map +listMapKey=ip, patchMergeKey=ip
        ("podIPs", Shape::list_map(plain(), &["ip"])),
        ("hostIPs", Shape::list_map(plain(), &["ip"])),
        ("resourceClaimStatuses", Shape::list_map(plain(), &["name"])),
        // containerStatuses, initContainerStatuses, ephemeralContainerStatuses: atomic
    ])
}

fn pod_template() -> Shape {
    st([("metadata", meta()), ("spec", pod_spec())])
}

/// Deployment and ReplicaSet share their spec's structure (strategy only exists on the former).
fn workload(with_strategy: bool) -> Shape {
    let mut spec = vec![("selector", label_selector()), ("template", pod_template())];
    if with_strategy {
        spec.push(("strategy", st([("rollingUpdate", plain())])));
    }
    root([("spec", Shape::structure(spec)), ("status", st([("conditions", conditions())]))])
}

fn core_event() -> Shape {
    root([("involvedObject", plain()), ("related", plain()), ("source", plain()), ("series", plain())])
}

fn events_v1_event() -> Shape {
    root([("regarding", plain()), ("related", plain()), ("series", plain()), ("deprecatedSource", plain())])
}

fn build_shapes() -> HashMap<(&'static str, &'static str), Arc<Shape>> {
    let mut shapes: HashMap<(&'static str, &'static str), Shape> = HashMap::new();

    // core/v1
    shapes.insert(
        ("", "Namespace"),
        // spec.finalizers: +listType=atomic
        root([("spec", plain()), ("status", st([("conditions", conditions())]))]),
    );
    shapes.insert(("", "ConfigMap"), root([("data", string_map()), ("binaryData", string_map())]));
    shapes.insert(("", "Secret"), root([("data", string_map()), ("stringData", string_map())]));
    shapes.insert(
        ("", "Service"),
        root([
            (
                "spec",
                st([
                    // +listType=map +listMapKey=port +listMapKey=protocol, patchMergeKey=port
                    ("ports", Shape::list_map(plain(), &["port", "protocol"])),
                    // +mapType=atomic
                    ("selector", Shape::Atomic),
                    ("sessionAffinityConfig", st([("clientIP", plain())])),
                ]),
            ),
            ("status", st([("loadBalancer", plain()), ("conditions", conditions())])),
        ]),
    );
    // subsets: +listType=atomic
    shapes.insert(("", "Endpoints"), root([]));
    shapes.insert(("", "Pod"), root([("spec", pod_spec()), ("status", pod_status())]));
    shapes.insert(("", "PodTemplate"), root([("template", pod_template())]));
    shapes.insert(
        ("", "Node"),
        root([
            (
                "spec",
                // podCIDRs: +listType=set; taints: +listType=atomic
                st([("podCIDRs", Shape::set()), ("configSource", plain())]),
            ),
            (
                "status",
                st([
                    ("addresses", Shape::list_map(plain(), &["type"])),
                    ("conditions", conditions()),
                    ("capacity", string_map()),
                    ("allocatable", string_map()),
                    ("daemonEndpoints", st([("kubeletEndpoint", plain())])),
                    ("nodeInfo", plain()),
                    ("config", plain()),
                    ("features", plain()),
                ]),
            ),
        ]),
    );
    shapes.insert(("", "Event"), core_event());
    shapes.insert(
        ("", "ServiceAccount"),
        // secrets: +listType=map +listMapKey=name; imagePullSecrets: +listType=atomic
        root([("secrets", Shape::list_map(plain(), &["name"]))]),
    );
    shapes.insert(
        ("", "PersistentVolumeClaim"),
        root([
            ("spec", pvc_spec()),
            (
                "status",
                st([
                    ("capacity", string_map()),
                    ("conditions", conditions()),
                    ("allocatedResources", string_map()),
                    ("allocatedResourceStatuses", string_map()),
                    ("modifyVolumeStatus", plain()),
                ]),
            ),
        ]),
    );
    shapes.insert(
        ("", "PersistentVolume"),
        root([
            (
                "spec",
                st([
                    ("capacity", string_map()),
                    ("claimRef", plain()),
                    ("nodeAffinity", st([("required", plain())])),
                    ("csi", st([("volumeAttributes", string_map()), ("nodePublishSecretRef", plain())])),
                    ("hostPath", plain()),
                    ("local", plain()),
                    ("nfs", plain()),
                ]),
            ),
            ("status", plain()),
        ]),
    );

    // apps/v1
    shapes.insert(("apps", "Deployment"), workload(true));
    shapes.insert(("apps", "ReplicaSet"), workload(false));

    // networking.k8s.io/v1: rules and tls are atomic
    shapes.insert(
        ("networking.k8s.io", "Ingress"),
        root([
            ("spec", st([("defaultBackend", st([("service", st([("port", plain())])), ("resource", plain())]))])),
            ("status", st([("loadBalancer", plain())])),
        ]),
    );
    // ingress, egress and policyTypes are atomic
    shapes.insert(("networking.k8s.io", "NetworkPolicy"), root([("spec", st([("podSelector", label_selector())]))]));

    // rbac.authorization.k8s.io/v1: rules and subjects are atomic
    shapes.insert(("rbac.authorization.k8s.io", "ClusterRole"), root([("aggregationRule", plain())]));
    shapes.insert(("rbac.authorization.k8s.io", "Role"), root([]));
    shapes.insert(("rbac.authorization.k8s.io", "RoleBinding"), root([("roleRef", plain())]));
    shapes.insert(("rbac.authorization.k8s.io", "ClusterRoleBinding"), root([("roleRef", plain())]));

    // coordination.k8s.io/v1: all spec fields are scalars
    shapes.insert(("coordination.k8s.io", "Lease"), root([("spec", plain())]));

    // policy/v1
    shapes.insert(
        ("policy", "PodDisruptionBudget"),
        root([
            ("spec", st([("selector", label_selector())])),
            ("status", st([("conditions", conditions()), ("disruptedPods", string_map())])),
        ]),
    );

    // autoscaling/v2: metrics and currentMetrics are atomic
    shapes.insert(
        ("autoscaling", "HorizontalPodAutoscaler"),
        root([
            (
                "spec",
                st([("scaleTargetRef", plain()), ("behavior", st([("scaleUp", plain()), ("scaleDown", plain())]))]),
            ),
            ("status", st([("conditions", conditions())])),
        ]),
    );

    // events.k8s.io/v1
    shapes.insert(("events.k8s.io", "Event"), events_v1_event());

    // apiextensions.k8s.io/v1: versions is atomic; schemas are untyped content
    shapes.insert(
        ("apiextensions.k8s.io", "CustomResourceDefinition"),
        root([
            (
                "spec",
                st([
                    ("names", plain()),
                    ("conversion", st([("webhook", st([("clientConfig", st([("service", plain())]))]))])),
                ]),
            ),
            ("status", st([("conditions", conditions()), ("acceptedNames", plain())])),
        ]),
    );

    shapes.into_iter().map(|(k, v)| (k, Arc::new(v))).collect()
}

static SHAPES: LazyLock<HashMap<(&'static str, &'static str), Arc<Shape>>> = LazyLock::new(build_shapes);

/// What unknown kinds get: the metadata shape, everything else untyped.
static UNKNOWN: LazyLock<Arc<Shape>> = LazyLock::new(|| Arc::new(root([])));

/// The shape of a built-in kind (`group` is `""` or `"core"` for the core group). Unknown
/// kinds get a struct with the metadata shape and untyped everything else.
pub fn builtin_shape(group: &str, kind: &str) -> Arc<Shape> {
    let group = if group == "core" { "" } else { group };
    SHAPES.get(&(group, kind)).map(Arc::clone).unwrap_or_else(|| Arc::clone(&UNKNOWN))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shape::ListKind;

    fn at<'s>(shape: &'s Shape, path: &[&str]) -> &'s Shape {
        path.iter().fold(shape, |s, step| if *step == "[]" { s.item() } else { s.field(step) })
    }

    fn keys(shape: &Shape) -> Vec<String> {
        match shape.list_kind() {
            ListKind::Map { keys, .. } => keys.clone(),
            _ => Vec::new(),
        }
    }

    #[test]
    fn test_object_meta_markers() {
        let m = object_meta_shape();
        assert_eq!(m.field("labels"), &Shape::map_of(Shape::Atomic));
        assert_eq!(m.field("annotations"), &Shape::map_of(Shape::Atomic));
        assert_eq!(m.field("finalizers").list_kind(), &ListKind::Set);
        assert_eq!(keys(m.field("ownerReferences")), vec!["uid"]);
        assert_eq!(m.field("managedFields"), &Shape::Atomic);
    }

    #[test]
    fn test_pod_containers_are_keyed_by_name_with_keyed_ports() {
        let pod = builtin_shape("", "Pod");
        for list in ["containers", "initContainers", "ephemeralContainers"] {
            assert_eq!(keys(at(&pod, &["spec", list])), vec!["name"], "{list}");
        }
        let ports = at(&pod, &["spec", "containers", "[]", "ports"]);
        assert_eq!(keys(ports), vec!["containerPort", "protocol"]);
        match ports.list_kind() {
            ListKind::Map { merge_key, .. } => assert_eq!(merge_key, "containerPort"),
            other => panic!("ports should be a map list, got {other:?}"),
        }
        assert_eq!(keys(at(&pod, &["spec", "containers", "[]", "env"])), vec!["name"]);
        assert_eq!(keys(at(&pod, &["spec", "containers", "[]", "volumeMounts"])), vec!["mountPath"]);
        assert_eq!(keys(at(&pod, &["spec", "volumes"])), vec!["name"]);
        assert_eq!(keys(at(&pod, &["spec", "imagePullSecrets"])), vec!["name"]);
        assert_eq!(keys(at(&pod, &["spec", "hostAliases"])), vec!["ip"]);
        assert_eq!(keys(at(&pod, &["spec", "topologySpreadConstraints"])), vec!["topologyKey", "whenUnsatisfiable"]);
        assert_eq!(at(&pod, &["spec", "tolerations"]).list_kind(), &ListKind::Atomic);
        assert_eq!(at(&pod, &["spec", "nodeSelector"]), &Shape::Atomic);
        assert_eq!(keys(at(&pod, &["status", "conditions"])), vec!["type"]);
        assert_eq!(at(&pod, &["status", "containerStatuses"]).list_kind(), &ListKind::Atomic);
    }

    #[test]
    fn test_workloads_embed_the_pod_template() {
        for kind in ["Deployment", "ReplicaSet"] {
            let shape = builtin_shape("apps", kind);
            assert_eq!(keys(at(&shape, &["spec", "template", "spec", "containers"])), vec!["name"]);
            assert_eq!(at(&shape, &["spec", "template", "metadata", "labels"]), &Shape::map_of(Shape::Atomic));
            assert_eq!(keys(at(&shape, &["status", "conditions"])), vec!["type"]);
        }
    }

    #[test]
    fn test_service_node_and_other_kinds() {
        let svc = builtin_shape("", "Service");
        assert_eq!(keys(at(&svc, &["spec", "ports"])), vec!["port", "protocol"]);
        assert_eq!(at(&svc, &["spec", "selector"]), &Shape::Atomic);
        let node = builtin_shape("core", "Node");
        assert_eq!(keys(at(&node, &["status", "addresses"])), vec!["type"]);
        assert_eq!(keys(at(&node, &["status", "conditions"])), vec!["type"]);
        assert_eq!(at(&node, &["spec", "podCIDRs"]).list_kind(), &ListKind::Set);
        assert_eq!(at(&node, &["spec", "taints"]).list_kind(), &ListKind::Atomic);
        let ep = builtin_shape("", "Endpoints");
        assert_eq!(at(&ep, &["subsets"]).list_kind(), &ListKind::Atomic);
        let pdb = builtin_shape("policy", "PodDisruptionBudget");
        assert_eq!(keys(at(&pdb, &["status", "conditions"])), vec!["type"]);
        let pvc = builtin_shape("", "PersistentVolumeClaim");
        assert_eq!(at(&pvc, &["spec", "accessModes"]).list_kind(), &ListKind::Atomic);
        let role = builtin_shape("rbac.authorization.k8s.io", "ClusterRole");
        assert_eq!(at(&role, &["rules"]).list_kind(), &ListKind::Atomic);
        let sa = builtin_shape("", "ServiceAccount");
        assert_eq!(keys(at(&sa, &["secrets"])), vec!["name"]);
        let crd = builtin_shape("apiextensions.k8s.io", "CustomResourceDefinition");
        assert_eq!(keys(at(&crd, &["status", "conditions"])), vec!["type"]);
        assert_eq!(at(&crd, &["spec", "versions"]).list_kind(), &ListKind::Atomic);
        for (group, kind) in [("", "Event"), ("events.k8s.io", "Event"), ("coordination.k8s.io", "Lease")] {
            assert!(Arc::ptr_eq(&builtin_shape(group, kind), &builtin_shape(group, kind)));
            assert_ne!(builtin_shape(group, kind), builtin_shape("example.com", "Foo"), "{group}/{kind}");
        }
    }

    #[test]
    fn test_unknown_kind_is_metadata_plus_untyped() {
        let shape = builtin_shape("example.com", "Foo");
        assert_eq!(shape.field("metadata"), object_meta_shape().as_ref());
        assert_eq!(shape.field("spec"), &Shape::Untyped);
        assert!(Arc::ptr_eq(&shape, &builtin_shape("other.io", "Bar")));
    }
}

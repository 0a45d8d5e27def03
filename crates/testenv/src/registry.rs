//! The resources the server serves: the built-in kinds, and the custom resources of every
//! established CustomResourceDefinition.
//!
//! A [`ResourceDef`] describes one served group/version/resource: its names, scope, verbs and
//! subresources, and the strategy that the API layer follows when writing it (generation rules,
//! status handling, graceful deletion, how it is decoded). Several versions of one resource share
//! one storage (its [`StorageKey`]).

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::RwLock;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use crate::schema::StructuralSchema;
use crate::shape::Shape;
use crate::store::StorageKey;
use crate::table::Column;

/// Where the replica count and selector of a `/scale` subresource live.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScaleSpec {
    /// e.g. `.spec.replicas`.
    pub spec_replicas_path: String,
    /// e.g. `.status.replicas`.
    pub status_replicas_path: String,
    /// e.g. `.status.selector`; optional.
    pub label_selector_path: Option<String>,
}

/// Per-kind behaviour of built-in resources.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BuiltinKind {
    /// namespaces
    Namespace,
    /// pods
    Pod,
    /// nodes
    Node,
    /// core/v1 events, and events.k8s.io/v1 events stored with them
    Event,
    /// events.k8s.io/v1 events (converted to and from core/v1 storage)
    EventV1,
    /// customresourcedefinitions
    CustomResourceDefinition,
    /// services
    Service,
    /// secrets
    Secret,
    /// The access and identity reviews (`selfsubjectaccessreviews`, `tokenreviews`, …):
    /// create-only, answered by the authorizer and authenticator, never stored.
    Review,
    /// Every other built-in kind: stored as decoded, no special rules.
    Plain,
}

/// The strategy of a built-in resource.
#[derive(Clone, Debug)]
pub struct Builtin {
    /// Which special rules apply.
    pub kind: BuiltinKind,
    /// Whether `metadata.generation` is maintained (bumped on spec changes).
    pub has_generation: bool,
    /// DELETE answers with the deleted object rather than a Status.
    pub return_deleted_object: bool,
    /// PUT on a missing object creates it.
    pub allow_create_on_update: bool,
    /// Decodes a request body into the canonical stored form: a round trip through the
    /// k8s-openapi type, which drops unknown fields and rejects wrong types as a typed decoder does.
    pub decode: fn(Value) -> Result<Value, String>,
    /// Fields (besides `metadata.name`/`metadata.namespace`) that field selectors may use.
    pub selectable_fields: &'static [&'static str],
}

/// What is particular to a custom resource version.
#[derive(Clone, Debug)]
pub struct Custom {
    /// The name of the CRD (`foos.example.com`).
    pub crd_name: String,
    /// The compiled schema of this version, if it has one.
    pub schema: Option<StructuralSchema>,
    /// Printer columns (Name first).
    pub columns: Vec<Column>,
    /// Bumped whenever the CRD changes: objects stored under an older epoch are re-defaulted on read.
    pub epoch: u64,
    /// The CRD is being deleted: creates are refused.
    pub terminating: bool,
    /// The deprecation warning of this version, if deprecated.
    pub deprecation_warning: Option<String>,
    /// `selectableFields` JSON paths (without leading dot), usable in field selectors.
    pub selectable_fields: Vec<String>,
    /// The storage version.
    pub storage_version: String,
    /// Whether the schema has any `default` (then reads re-default objects of older epochs).
    pub has_defaults: bool,
}

/// The strategy family of a resource.
#[derive(Clone, Debug)]
pub enum Flavor {
    /// A built-in kind.
    Builtin(Builtin),
    /// A custom resource.
    Custom(Custom),
}

/// One served group/version/resource.
#[derive(Clone, Debug)]
pub struct ResourceDef {
    /// API group, "" for core.
    pub group: String,
    /// API version.
    pub version: String,
    /// Plural resource name, e.g. `configmaps`.
    pub plural: String,
    /// Singular name, e.g. `configmap`.
    pub singular: String,
    /// Kind, e.g. `ConfigMap`.
    pub kind: String,
    /// List kind, e.g. `ConfigMapList`.
    pub list_kind: String,
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
    /// Short names for kubectl.
    pub short_names: Vec<String>,
    /// Categories (`all`).
    pub categories: Vec<String>,
    /// Storage shared by all versions of this resource.
    pub storage: StorageKey,
    /// Whether `/status` is served.
    pub status: bool,
    /// `/scale`, if served.
    pub scale: Option<ScaleSpec>,
    /// Other subresources (`eviction`, `binding`, `finalize`).
    pub extra_subresources: Vec<&'static str>,
    /// Merge shape for strategic merge patch and server-side apply.
    pub shape: Arc<Shape>,
    /// Built-in or custom strategy.
    pub flavor: Flavor,
}

impl ResourceDef {
    /// `apiVersion` of this version: `v1` or `group/version`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() { self.version.clone() } else { format!("{}/{}", self.group, self.version) }
    }

    /// The resource as errors name it: `configmaps`, `deployments.apps`, `foos.example.com`.
    pub fn qualified(&self) -> String {
        if self.group.is_empty() { self.plural.clone() } else { format!("{}.{}", self.plural, self.group) }
    }

    /// The kind as `Invalid` errors name it: `ConfigMap`, `Deployment.apps`, `Foo.example.com`.
    pub fn qualified_kind(&self) -> String {
        if self.group.is_empty() { self.kind.clone() } else { format!("{}.{}", self.kind, self.group) }
    }

    /// Whether this is a custom resource.
    pub fn is_custom(&self) -> bool {
        matches!(self.flavor, Flavor::Custom(_))
    }

    /// The built-in strategy, if built in.
    pub fn builtin(&self) -> Option<&Builtin> {
        match &self.flavor {
            Flavor::Builtin(b) => Some(b),
            Flavor::Custom(_) => None,
        }
    }

    /// The custom resource details, if custom.
    pub fn custom(&self) -> Option<&Custom> {
        match &self.flavor {
            Flavor::Custom(c) => Some(c),
            Flavor::Builtin(_) => None,
        }
    }

    /// Which built-in rules apply (`Plain` for custom resources).
    pub fn builtin_kind(&self) -> BuiltinKind {
        self.builtin().map(|b| b.kind).unwrap_or(BuiltinKind::Plain)
    }

    /// Whether `metadata.generation` is maintained.
    pub fn has_generation(&self) -> bool {
        match &self.flavor {
            Flavor::Builtin(b) => b.has_generation,
            Flavor::Custom(_) => true,
        }
    }

    /// Whether field selectors may use `field`.
    pub fn field_selectable(&self, field: &str) -> bool {
        if field == "metadata.name" || field == "metadata.namespace" {
            return true;
        }
        match &self.flavor {
            Flavor::Builtin(b) => b.selectable_fields.contains(&field),
            Flavor::Custom(c) => c.selectable_fields.iter().any(|f| f == field),
        }
    }

    /// The verbs discovery advertises.
    pub fn verbs(&self) -> Vec<&'static str> {
        let mut verbs = vec!["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"];
        if self.builtin_kind() == BuiltinKind::Namespace {
            verbs.retain(|v| *v != "deletecollection");
        }
        if self.builtin_kind() == BuiltinKind::Review {
            verbs = vec!["create"];
        }
        verbs
    }
}

/// Registry contents.
#[derive(Debug, Default)]
struct Inner {
    defs: Vec<Arc<ResourceDef>>,
    by_gvr: HashMap<(String, String, String), Arc<ResourceDef>>,
    /// Which served definitions come from which CRD.
    crds: HashMap<String, Vec<Arc<ResourceDef>>>,
    /// Changes whenever the set of served resources changes (discovery, OpenAPI hashes).
    generation: u64,
}

/// The set of served resources.
#[derive(Debug)]
pub struct Registry {
    inner: RwLock<Inner>,
    changes: tokio::sync::watch::Sender<u64>,
}

impl Default for Registry {
    fn default() -> Self {
        Self::new()
    }
}

impl Registry {
    /// A registry with every built-in kind.
    pub fn new() -> Registry {
        let mut inner = Inner::default();
        for def in builtin_defs() {
            let def = Arc::new(def);
            inner.by_gvr.insert((def.group.clone(), def.version.clone(), def.plural.clone()), def.clone());
            inner.defs.push(def);
        }
        Registry { inner: RwLock::new(inner), changes: tokio::sync::watch::Sender::new(0) }
    }

    /// Notified whenever the set of served resources changes.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// Look up a served resource.
    pub fn get(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceDef>> {
        self.inner.read().by_gvr.get(&(group.to_string(), version.to_string(), plural.to_string())).cloned()
    }

    /// Every served resource, in registration order.
    pub fn all(&self) -> Vec<Arc<ResourceDef>> {
        self.inner.read().defs.clone()
    }

    /// The generation of the served set, for discovery and OpenAPI hashes.
    pub fn generation(&self) -> u64 {
        self.inner.read().generation
    }

    /// The preferred served definition of a storage key (for internal writes by controllers).
    pub fn for_storage(&self, storage: &str) -> Option<Arc<ResourceDef>> {
        let inner = self.inner.read();
        // Prefer the storage version of custom resources, the core form for built-ins.
        inner
            .defs
            .iter()
            .filter(|d| &*d.storage == storage)
            .find(|d| match &d.flavor {
                Flavor::Custom(c) => c.storage_version == d.version,
                Flavor::Builtin(b) => b.kind != BuiltinKind::EventV1,
            })
            .cloned()
    }

    /// Find the definition of a kind by apiVersion and kind.
    pub fn by_kind(&self, api_version: &str, kind: &str) -> Option<Arc<ResourceDef>> {
        let inner = self.inner.read();
        inner.defs.iter().find(|d| d.kind == kind && d.api_version() == api_version).cloned()
    }

    /// Names already claimed (plural, singular, short names, kind, list kind) in `group` by
    /// anything other than the CRD `except`.
    pub fn names_in_group(&self, group: &str, except: &str) -> Vec<(String, NameUse)> {
        let inner = self.inner.read();
        let mut out = Vec::new();
        for def in inner.defs.iter().filter(|d| d.group == group) {
            if def.custom().is_some_and(|c| c.crd_name == except) {
                continue;
            }
            out.push((def.plural.clone(), NameUse::Plural));
            out.push((def.singular.clone(), NameUse::Singular));
            for s in &def.short_names {
                out.push((s.clone(), NameUse::ShortName));
            }
            out.push((def.kind.clone(), NameUse::Kind));
            out.push((def.list_kind.clone(), NameUse::ListKind));
        }
        out
    }

    /// Serve the versions of a CRD (replacing what it served before).
    pub fn set_crd(&self, crd_name: &str, defs: Vec<ResourceDef>) {
        let mut inner = self.inner.write();
        Self::remove_locked(&mut inner, crd_name);
        let defs: Vec<_> = defs.into_iter().map(Arc::new).collect();
        for def in &defs {
            inner.by_gvr.insert((def.group.clone(), def.version.clone(), def.plural.clone()), def.clone());
            inner.defs.push(def.clone());
        }
        inner.crds.insert(crd_name.to_string(), defs);
        inner.generation += 1;
        self.changes.send_replace(inner.generation);
    }

    /// Stop serving a CRD's resources.
    pub fn remove_crd(&self, crd_name: &str) {
        let mut inner = self.inner.write();
        Self::remove_locked(&mut inner, crd_name);
        inner.generation += 1;
        self.changes.send_replace(inner.generation);
    }

    /// What a CRD serves now.
    pub fn crd_defs(&self, crd_name: &str) -> Vec<Arc<ResourceDef>> {
        self.inner.read().crds.get(crd_name).cloned().unwrap_or_default()
    }

    fn remove_locked(inner: &mut Inner, crd_name: &str) {
        if let Some(old) = inner.crds.remove(crd_name) {
            for def in old {
                inner.by_gvr.remove(&(def.group.clone(), def.version.clone(), def.plural.clone()));
                inner.defs.retain(|d| !Arc::ptr_eq(d, &def));
            }
        }
    }
}

/// How a name is used, for CRD name-conflict checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NameUse {
    /// A plural resource name.
    Plural,
    /// A singular name.
    Singular,
    /// A short name.
    ShortName,
    /// A kind.
    Kind,
    /// A list kind.
    ListKind,
}

fn roundtrip<T: DeserializeOwned + Serialize>(value: Value) -> Result<Value, String> {
    let typed: T = serde_json::from_value(value).map_err(|e| e.to_string())?;
    serde_json::to_value(typed).map_err(|e| e.to_string())
}

/// Reviews are answered, not stored: their bodies pass as sent.
fn review_body(value: Value) -> Result<Value, String> {
    Ok(value)
}

/// The row of a review kind (access reviews, SelfSubjectReview, TokenReview): created only,
/// never stored, its body answered as it comes.
fn review(group: &'static str, kind: &'static str, plural: &'static str, namespaced: bool) -> B {
    B {
        group,
        version: "v1",
        plural,
        singular: plural.strip_suffix('s').unwrap_or(plural),
        kind,
        namespaced,
        short: &[],
        all: false,
        status: false,
        scale: false,
        extra: &[],
        bkind: BuiltinKind::Review,
        generation: false,
        return_deleted: false,
        create_on_update: false,
        decode: review_body,
        fields: &[],
    }
}

/// One row of the built-in table.
struct B {
    group: &'static str,
    version: &'static str,
    plural: &'static str,
    singular: &'static str,
    kind: &'static str,
    namespaced: bool,
    short: &'static [&'static str],
    all: bool,
    status: bool,
    scale: bool,
    extra: &'static [&'static str],
    bkind: BuiltinKind,
    generation: bool,
    return_deleted: bool,
    create_on_update: bool,
    decode: fn(Value) -> Result<Value, String>,
    fields: &'static [&'static str],
}

const POD_FIELDS: &[&str] = &[
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.nominatedNodeName",
];
const EVENT_FIELDS: &[&str] = &[
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
];

fn builtin_defs() -> Vec<ResourceDef> {
    use BuiltinKind as K;
    use k8s_openapi::api::{
        apps::v1 as apps, coordination::v1 as coord, core::v1 as core, networking::v1 as net, policy::v1 as policy,
        rbac::v1 as rbac,
    };
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1 as apiext;
    let none: &'static [&'static str] = &[];
    let rows = [
        B {
            group: "",
            version: "v1",
            plural: "namespaces",
            singular: "namespace",
            kind: "Namespace",
            namespaced: false,
            short: &["ns"],
            all: false,
            status: true,
            scale: false,
            extra: &["finalize"],
            bkind: K::Namespace,
            generation: false,
            return_deleted: true,
            create_on_update: false,
            decode: roundtrip::<core::Namespace>,
            fields: &["status.phase"],
        },
        B {
            group: "",
            version: "v1",
            plural: "configmaps",
            singular: "configmap",
            kind: "ConfigMap",
            namespaced: true,
            short: &["cm"],
            all: false,
            status: false,
            scale: false,
            extra: none,
            bkind: K::Plain,
            generation: false,
            return_deleted: false,
            create_on_update: false,
            decode: roundtrip::<core::ConfigMap>,
            fields: none,
        },
        B {
            group: "",
            version: "v1",
            plural: "secrets",
            singular: "secret",
            kind: "Secret",
            namespaced: true,
            short: none,
            all: false,
            status: false,
            scale: false,
            extra: none,
            bkind: K::Secret,
            generation: false,
            return_deleted: false,
            create_on_update: false,
            decode: roundtrip::<core::Secret>,
            fields: &["type"],
        },
        B {
            group: "",
            version: "v1",
            plural: "services",
            singular: "service",
            kind: "Service",
            namespaced: true,
            short: &["svc"],
            all: true,
            status: true,
            scale: false,
            extra: none,
            bkind: K::Service,
            generation: false,
            return_deleted: true,
            create_on_update: true,
            decode: roundtrip::<core::Service>,
            fields: &["spec.clusterIP", "spec.type"],
        },
        B {
            group: "",
            version: "v1",
            plural: "endpoints",
            singular: "endpoints",
            kind: "Endpoints",
            namespaced: true,
            short: &["ep"],
            all: false,
            status: false,
            scale: false,
            extra: none,
            bkind: K::Plain,
            generation: false,
            return_deleted: false,
            create_on_update: true,
            decode: roundtrip::<core::Endpoints>,
            fields: none,
        },
        B {
            group: "",
            version: "v1",
            plural: "pods",
            singular: "pod",
            kind: "Pod",
            namespaced: true,
            short: &["po"],
            all: true,
            status: true,
            scale: false,
            extra: &["eviction", "binding", "log"],
            bkind: K::Pod,
            generation: true,
            return_deleted: true,
            create_on_update: false,
            decode: roundtrip::<core::Pod>,
            fields: POD_FIELDS,
        },
        B {
            group: "",
            version: "v1",
            plural: "nodes",
            singular: "node",
            kind: "Node",
            namespaced: false,
            short: &["no"],
            all: false,
            status: true,
            scale: false,
            extra: none,
            bkind: K::Node,
            generation: false,
            return_deleted: false,
            create_on_update: false,
            decode: roundtrip::<core::Node>,
            fields: &["spec.unschedulable"],
        },
        B {
            group: "",
            version: "v1",
            plural: "events",
            singular: "event",
            kind: "Event",
            namespaced: true,
            short: &["ev"],
            all: false,
            status: false,
            scale: false,
            extra: none,
            bkind: K::Event,
            generation: false,
            return_deleted: false,
            create_on_update: true,
            decode: roundtrip::<core::Event>,
            fields: EVENT_FIELDS,
        },
        B {
            group: "",
            version: "v1",
            plural: "serviceaccounts",
            singular: "serviceaccount",
            kind: "ServiceAccount",
            namespaced: true,
            short: &["sa"],
            all: false,
            status: false,
            scale: false,
            extra: &["token"],
            bkind: K::Plain,
            generation: false,
            return_deleted: true,
            create_on_update: false,
            decode: roundtrip::<core::ServiceAccount>,
            fields: none,
        },
        B {
            group: "",
            version: "v1",
            plural: "persistentvolumeclaims",
            singular: "persistentvolumeclaim",
            kind: "PersistentVolumeClaim",
            namespaced: true,
            short: &["pvc"],
            all: false,
            status: true,
            scale: false,
            extra: none,
            bkind: K::Plain,
            generation: false,
            return_deleted: false,
            create_on_update: false,
            decode: roundtrip::<core::PersistentVolumeClaim>,
            fields: none,
        },
        B {
            group: "",
            version: "v1",
            plural: "persistentvolumes",
            singular: "persistentvolume",
            kind: "PersistentVolume",
            namespaced: false,
            short: &["pv"],
            all: false,
            status: true,
            scale: false,
            extra: none,
            bkind: K::Plain,
            generation: false,
            return_deleted: false,
            create_on_update: false,
            decode: roundtrip::<core::PersistentVolume>,
            fields: none,
        },
        B {
            group: "apps",
            version: "v1",
            plural: "deployments",
            singular: "deployment",
            kind: "Deployment",
            namespaced: true,
            short: &["deploy"],
            all: true,
            status: true,
            scale: true,
            extra: none,
            bkind: K::Plain,
            generation: true,
            return_deleted: false,
            create_on_update: false,
            decode: roundtrip::<apps::Deployment>,
            fields: none,
        },
        B {
            group: "apps",
            version: "v1",
            plural: "replicasets",
            singular: "replicaset",
            kind: "ReplicaSet",
            namespaced: true,
            short: &["rs"],
            all: true,
            status: true,
            scale: true,
            extra: none,
            bkind: K::Plain,
            generation: true,
            return_deleted: false,
            create_on_update: false,
            decode: roundtrip::<apps::ReplicaSet>,
            fields: &["status.replicas"],
        },
        B {
            group: "apps",
            version: "v1",
            plural: "statefulsets",
            singular: "statefulset",
            kind: "StatefulSet",
            namespaced: true,
            short: &["sts"],
            all: true,
            status: true,
            scale: true,
            extra: none,
            bkind: K::Plain,
            generation: true,
            return_deleted: false,
            create_on_update: false,
            decode: roundtrip::<apps::StatefulSet>,
            fields: none,
        },
        B {
            group: "apps",
            version: "v1",
            plural: "daemonsets",
            singular: "daemonset",
            kind: "DaemonSet",
            namespaced: true,
            short: &["ds"],
            all: true,
            status: true,
            scale: false,
            extra: none,
            bkind: K::Plain,
            generation: true,
            return_deleted: false,
            create_on_update: false,
            decode: roundtrip::<apps::DaemonSet>,
            fields: none,
        },
        B {
            group: "batch",
            version: "v1",
            plural: "jobs",
            singular: "job",
            kind: "Job",
            namespaced: true,
            short: none,
            all: true,
            status: true,
            scale: false,
            extra: none,
            bkind: K::Plain,
            generation: true,
            return_deleted: false,
            create_on_update: false,
            decode: roundtrip::<k8s_openapi::api::batch::v1::Job>,
            fields: &["status.successful"],
        },
        B {
            group: "autoscaling",
            version: "v2",
            plural: "horizontalpodautoscalers",
            singular: "horizontalpodautoscaler",
            kind: "HorizontalPodAutoscaler",
            namespaced: true,
            short: &["hpa"],
            all: true,
            status: true,
            scale: false,
            extra: none,
            bkind: K::Plain,
            generation: false,
            return_deleted: false,
            create_on_update: false,
            decode: roundtrip::<k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler>,
            fields: none,
        },
        B {
            group: "networking.k8s.io",
            version: "v1",
            plural: "ingresses",
            singular: "ingress",
            kind: "Ingress",
            namespaced: true,
            short: &["ing"],
            all: false,
            status: true,
            scale: false,
            extra: none,
            bkind: K::Plain,
            generation: true,
            return_deleted: false,
            create_on_update: false,
            decode: roundtrip::<net::Ingress>,
            fields: none,
        },
        B {
            group: "networking.k8s.io",
            version: "v1",
            plural: "networkpolicies",
            singular: "networkpolicy",
            kind: "NetworkPolicy",
            namespaced: true,
            short: &["netpol"],
            all: false,
            status: false,
            scale: false,
            extra: none,
            bkind: K::Plain,
            generation: true,
            return_deleted: false,
            create_on_update: false,
            decode: roundtrip::<net::NetworkPolicy>,
            fields: none,
        },
        B {
            group: "rbac.authorization.k8s.io",
            version: "v1",
            plural: "clusterroles",
            singular: "clusterrole",
            kind: "ClusterRole",
            namespaced: false,
            short: none,
            all: false,
            status: false,
            scale: false,
            extra: none,
            bkind: K::Plain,
            generation: false,
            return_deleted: false,
            create_on_update: true,
            decode: roundtrip::<rbac::ClusterRole>,
            fields: none,
        },
        B {
            group: "rbac.authorization.k8s.io",
            version: "v1",
            plural: "clusterrolebindings",
            singular: "clusterrolebinding",
            kind: "ClusterRoleBinding",
            namespaced: false,
            short: none,
            all: false,
            status: false,
            scale: false,
            extra: none,
            bkind: K::Plain,
            generation: false,
            return_deleted: false,
            create_on_update: true,
            decode: roundtrip::<rbac::ClusterRoleBinding>,
            fields: none,
        },
        B {
            group: "rbac.authorization.k8s.io",
            version: "v1",
            plural: "roles",
            singular: "role",
            kind: "Role",
            namespaced: true,
            short: none,
            all: false,
            status: false,
            scale: false,
            extra: none,
            bkind: K::Plain,
            generation: false,
            return_deleted: false,
            create_on_update: true,
            decode: roundtrip::<rbac::Role>,
            fields: none,
        },
        B {
            group: "rbac.authorization.k8s.io",
            version: "v1",
            plural: "rolebindings",
            singular: "rolebinding",
            kind: "RoleBinding",
            namespaced: true,
            short: none,
            all: false,
            status: false,
            scale: false,
            extra: none,
            bkind: K::Plain,
            generation: false,
            return_deleted: false,
            create_on_update: true,
            decode: roundtrip::<rbac::RoleBinding>,
            fields: none,
        },
        B {
            group: "coordination.k8s.io",
            version: "v1",
            plural: "leases",
            singular: "lease",
            kind: "Lease",
            namespaced: true,
            short: none,
            all: false,
            status: false,
            scale: false,
            extra: none,
            bkind: K::Plain,
            generation: false,
            return_deleted: false,
            create_on_update: false,
            decode: roundtrip::<coord::Lease>,
            fields: none,
        },
        B {
            group: "policy",
            version: "v1",
            plural: "poddisruptionbudgets",
            singular: "poddisruptionbudget",
            kind: "PodDisruptionBudget",
            namespaced: true,
            short: &["pdb"],
            all: false,
            status: true,
            scale: false,
            extra: none,
            bkind: K::Plain,
            generation: true,
            return_deleted: false,
            create_on_update: false,
            decode: roundtrip::<policy::PodDisruptionBudget>,
            fields: none,
        },
        B {
            group: "events.k8s.io",
            version: "v1",
            plural: "events",
            singular: "event",
            kind: "Event",
            namespaced: true,
            short: &["ev"],
            all: false,
            status: false,
            scale: false,
            extra: none,
            bkind: K::EventV1,
            generation: false,
            return_deleted: false,
            create_on_update: true,
            decode: roundtrip::<k8s_openapi::api::events::v1::Event>,
            fields: EVENT_FIELDS,
        },
        B {
            group: "apiextensions.k8s.io",
            version: "v1",
            plural: "customresourcedefinitions",
            singular: "customresourcedefinition",
            kind: "CustomResourceDefinition",
            namespaced: false,
            short: &["crd", "crds"],
            all: false,
            status: true,
            scale: false,
            extra: none,
            bkind: K::CustomResourceDefinition,
            generation: true,
            return_deleted: true,
            create_on_update: false,
            decode: roundtrip::<apiext::CustomResourceDefinition>,
            fields: none,
        },
        review("authorization.k8s.io", "SelfSubjectAccessReview", "selfsubjectaccessreviews", false),
        review("authorization.k8s.io", "SelfSubjectRulesReview", "selfsubjectrulesreviews", false),
        review("authorization.k8s.io", "SubjectAccessReview", "subjectaccessreviews", false),
        review("authorization.k8s.io", "LocalSubjectAccessReview", "localsubjectaccessreviews", true),
        review("authentication.k8s.io", "SelfSubjectReview", "selfsubjectreviews", false),
        review("authentication.k8s.io", "TokenReview", "tokenreviews", false),
    ];
    rows.into_iter()
        .map(|b| {
            let storage: StorageKey = if b.group.is_empty() || b.bkind == K::EventV1 {
                b.plural.into()
            } else {
                format!("{}.{}", b.plural, b.group).into()
            };
            ResourceDef {
                group: b.group.into(),
                version: b.version.into(),
                plural: b.plural.into(),
                singular: b.singular.into(),
                kind: b.kind.into(),
                list_kind: format!("{}List", b.kind),
                namespaced: b.namespaced,
                short_names: b.short.iter().map(|s| s.to_string()).collect(),
                categories: if b.all { vec!["all".into()] } else { vec![] },
                storage,
                status: b.status,
                scale: b.scale.then(|| ScaleSpec {
                    spec_replicas_path: ".spec.replicas".into(),
                    status_replicas_path: ".status.replicas".into(),
                    label_selector_path: Some(".status.selector".into()),
                }),
                extra_subresources: b.extra.to_vec(),
                shape: crate::builtin_shapes::builtin_shape(b.group, b.kind),
                flavor: Flavor::Builtin(Builtin {
                    kind: b.bkind,
                    has_generation: b.generation,
                    return_deleted_object: b.return_deleted,
                    allow_create_on_update: b.create_on_update,
                    decode: b.decode,
                    selectable_fields: b.fields,
                }),
            }
        })
        .collect()
}

/// Convert a stored core/v1 Event to its events.k8s.io/v1 form (upstream
/// `pkg/apis/events/v1` conversions).
pub fn event_core_to_v1(core: &Value) -> Value {
    let mut out = Map::new();
    out.insert("apiVersion".into(), json!("events.k8s.io/v1"));
    out.insert("kind".into(), json!("Event"));
    let renames = [
        ("metadata", "metadata"),
        ("eventTime", "eventTime"),
        ("series", "series"),
        ("reportingComponent", "reportingController"),
        ("reportingInstance", "reportingInstance"),
        ("action", "action"),
        ("reason", "reason"),
        ("involvedObject", "regarding"),
        ("related", "related"),
        ("message", "note"),
        ("type", "type"),
        ("source", "deprecatedSource"),
        ("firstTimestamp", "deprecatedFirstTimestamp"),
        ("lastTimestamp", "deprecatedLastTimestamp"),
        ("count", "deprecatedCount"),
    ];
    for (from, to) in renames {
        if let Some(v) = core.get(from)
            && !v.is_null()
        {
            out.insert(to.into(), v.clone());
        }
    }
    Value::Object(out)
}

/// Convert an events.k8s.io/v1 Event to the core/v1 storage form.
pub fn event_v1_to_core(v1: &Value) -> Value {
    let mut out = Map::new();
    out.insert("apiVersion".into(), json!("v1"));
    out.insert("kind".into(), json!("Event"));
    let renames = [
        ("metadata", "metadata"),
        ("eventTime", "eventTime"),
        ("series", "series"),
        ("reportingController", "reportingComponent"),
        ("reportingInstance", "reportingInstance"),
        ("action", "action"),
        ("reason", "reason"),
        ("regarding", "involvedObject"),
        ("related", "related"),
        ("note", "message"),
        ("type", "type"),
        ("deprecatedSource", "source"),
        ("deprecatedFirstTimestamp", "firstTimestamp"),
        ("deprecatedLastTimestamp", "lastTimestamp"),
        ("deprecatedCount", "count"),
    ];
    for (from, to) in renames {
        if let Some(v) = v1.get(from)
            && !v.is_null()
        {
            out.insert(to.into(), v.clone());
        }
    }
    // kubectl describe prints `source.component`; upstream's conversion fills it from the
    // reporting controller when the deprecated source is absent.
    if !out.contains_key("source")
        && let Some(rc) = v1.get("reportingController").and_then(Value::as_str)
    {
        let mut source = Map::new();
        source.insert("component".into(), json!(rc));
        if let Some(host) = v1.get("reportingInstance").and_then(Value::as_str) {
            source.insert("host".into(), json!(host));
        }
        out.insert("source".into(), Value::Object(source));
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_are_served_with_qualified_names() {
        let reg = Registry::new();
        let cm = reg.get("", "v1", "configmaps").unwrap();
        assert_eq!(cm.qualified(), "configmaps");
        assert_eq!(cm.api_version(), "v1");
        let d = reg.get("apps", "v1", "deployments").unwrap();
        assert_eq!(d.qualified(), "deployments.apps");
        assert_eq!(d.qualified_kind(), "Deployment.apps");
        assert!(d.scale.is_some());
        assert!(reg.get("", "v1", "foos").is_none());
    }

    #[test]
    fn both_event_apis_share_storage() {
        let reg = Registry::new();
        let core = reg.get("", "v1", "events").unwrap();
        let v1 = reg.get("events.k8s.io", "v1", "events").unwrap();
        assert_eq!(core.storage, v1.storage);
        assert_eq!(reg.for_storage("events").unwrap().group, "");
    }

    #[test]
    fn event_conversion_round_trips() {
        let v1 = json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "e", "namespace": "default"},
            "eventTime": "2026-01-01T00:00:00.000000Z",
            "reportingController": "ctl", "reportingInstance": "ctl-1",
            "action": "Reconcile", "reason": "Created", "type": "Normal", "note": "made it",
            "regarding": {"kind": "Foo", "name": "x"},
            "series": {"count": 2, "lastObservedTime": "2026-01-01T00:00:01.000000Z"}
        });
        let core = event_v1_to_core(&v1);
        assert_eq!(core["message"], "made it");
        assert_eq!(core["involvedObject"]["name"], "x");
        assert_eq!(core["source"]["component"], "ctl");
        let back = event_core_to_v1(&core);
        assert_eq!(back["note"], "made it");
        assert_eq!(back["regarding"], v1["regarding"]);
        assert_eq!(back["series"], v1["series"]);
        assert_eq!(back["deprecatedSource"]["component"], "ctl");
    }

    #[test]
    fn typed_decode_drops_unknown_fields_and_rejects_wrong_types() {
        let reg = Registry::new();
        let cm = reg.get("", "v1", "configmaps").unwrap();
        let decode = cm.builtin().unwrap().decode;
        let out = decode(
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"k": "v"}, "bogus": 1}),
        )
        .unwrap();
        assert!(out.get("bogus").is_none());
        assert_eq!(out["data"]["k"], "v");
        assert!(decode(json!({"metadata": {"name": "a"}, "data": {"k": 5}})).is_err());
    }
}

//! Shared test harness: a testenv with the Release CRD, "clusters" modelled as labelled
//! ConfigMaps, and scriptable resources that record every call and write idempotent side effects
//! (one ConfigMap per object and resource).

#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use apis::release::Release;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, CustomResourceExt};
use operatorkit::{Controller, Leadership, Outcome, Resource, ResourceError, ResourceSet, resource};
use parking_lot::Mutex;
use semver::VersionReq;
use testenv::TestEnv;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub const OPERATOR: &str = "test-operator";
pub const NS: &str = "default";
pub const CLUSTER_LABEL: &str = "test.giantswarm.io/cluster";
pub const SELECTOR: &str = "test.giantswarm.io/cluster=true";
pub const RELEASE_LABEL: &str = "release.giantswarm.io/version";
pub const WAIT: Duration = Duration::from_secs(30);

/// Poll `check` until it holds, for up to 30 s.
pub async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        if check().await {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Let the controller run for a while, for assertions that something does NOT happen.
pub async fn settle() {
    tokio::time::sleep(Duration::from_millis(1500)).await;
}

pub struct Harness {
    pub env: TestEnv,
    pub client: Client,
}

impl Harness {
    pub async fn start() -> Harness {
        let env = TestEnv::start().await.expect("testenv starts");
        let client = env.client();
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        crds.create(&PostParams::default(), &Release::crd()).await.expect("the Release CRD installs");
        Harness { env, client }
    }

    pub fn cms(&self) -> Api<ConfigMap> {
        Api::namespaced(self.client.clone(), NS)
    }

    pub fn releases(&self) -> Api<Release> {
        Api::all(self.client.clone())
    }

    /// Create the Release `name` giving the operator `version`.
    pub async fn create_release(&self, name: &str, version: &str) {
        self.releases().create(&PostParams::default(), &release(name, version)).await.expect("the Release is created");
    }

    /// Change the operator's version in an existing Release.
    pub async fn set_release_version(&self, name: &str, version: &str) {
        let patch = serde_json::json!({"spec": {"components": [{"name": OPERATOR, "version": version}]}});
        self.releases()
            .patch(name, &PatchParams::default(), &Patch::Merge(patch))
            .await
            .expect("the Release is patched");
    }

    /// Create a cluster object, optionally labelled with a release.
    pub async fn create_cluster(&self, name: &str, release: Option<&str>) {
        self.cms().create(&PostParams::default(), &cluster(name, release)).await.expect("the cluster is created");
    }

    pub async fn get(&self, name: &str) -> Option<ConfigMap> {
        self.cms().get_opt(name).await.expect("GET works")
    }

    pub async fn finalizers(&self, name: &str) -> Option<Vec<String>> {
        self.get(name).await.map(|cm| cm.metadata.finalizers.unwrap_or_default())
    }

    pub async fn has_finalizer(&self, name: &str, finalizer: &str) -> bool {
        self.finalizers(name).await.is_some_and(|f| f.iter().any(|x| x == finalizer))
    }

    pub async fn delete(&self, name: &str) {
        self.cms().delete(name, &DeleteParams::default()).await.expect("DELETE works");
    }

    pub async fn label(&self, name: &str, key: &str, value: Option<&str>) {
        let patch = serde_json::json!({"metadata": {"labels": {key: value}}});
        self.cms().patch(name, &PatchParams::default(), &Patch::Merge(patch)).await.expect("the label is set");
    }

    pub async fn annotate(&self, name: &str, key: &str, value: Option<&str>) {
        let patch = serde_json::json!({"metadata": {"annotations": {key: value}}});
        self.cms().patch(name, &PatchParams::default(), &Patch::Merge(patch)).await.expect("the annotation is set");
    }

    /// Warning events about `object`, as (reason, note).
    pub async fn warnings(&self, object: &str) -> Vec<(String, String)> {
        let events: Api<Event> = Api::namespaced(self.client.clone(), NS);
        let list = events.list(&ListParams::default()).await.expect("events list");
        list.items
            .into_iter()
            .filter(|e| e.type_.as_deref() == Some("Warning"))
            .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(object))
            .map(|e| (e.reason.unwrap_or_default(), e.note.unwrap_or_default()))
            .collect()
    }

    /// The side-effect ConfigMap that `resource` keeps for `object`, if it exists.
    pub async fn side_effect(&self, object: &str, resource: &str) -> Option<ConfigMap> {
        self.cms().get_opt(&side_effect_name(object, resource)).await.expect("GET works")
    }
}

pub fn release(name: &str, version: &str) -> Release {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "release.giantswarm.io/v1alpha1", "kind": "Release",
        "metadata": {"name": name},
        "spec": {
            "components": [{"name": OPERATOR, "version": version}, {"name": "kubernetes", "version": "1.34.0"}],
            "date": "2026-01-01T00:00:00Z",
            "state": "active"
        }
    }))
    .expect("a valid Release")
}

pub fn cluster(name: &str, release: Option<&str>) -> ConfigMap {
    let mut labels = BTreeMap::from([(CLUSTER_LABEL.to_string(), "true".to_string())]);
    if let Some(r) = release {
        labels.insert(RELEASE_LABEL.to_string(), r.to_string());
    }
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.into());
    cm.metadata.labels = Some(labels);
    cm.data = Some(BTreeMap::from([("spec".to_string(), "v".to_string())]));
    cm
}

pub fn side_effect_name(object: &str, resource: &str) -> String {
    format!("fx-{object}-{resource}")
}

/// Which path a call was on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    Create,
    Delete,
}

/// One recorded call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Call {
    pub object: String,
    pub set: String,
    pub resource: String,
    pub phase: Phase,
    /// The resources that ran before this one in the same reconcile (the shared state).
    pub state: Vec<String>,
}

/// What a resource does on a call.
#[derive(Clone, Debug)]
pub enum Behaviour {
    Proceed,
    Fail,
    CancelResource,
    CancelReconciliation,
    KeepFinalizer,
    /// Write the side effect, then never return: a crash point (the test aborts the controller).
    Hang,
    /// Never return, before writing the side effect.
    HangBefore,
    /// Signal that the call started, take a second, then proceed.
    Slow,
}

/// The calls made, the side effects written, and the scripted behaviours.
#[derive(Default)]
pub struct Script {
    calls: Mutex<Vec<Call>>,
    /// Side-effect ConfigMaps actually created (201), per (object, resource).
    created: Mutex<HashMap<(String, String), usize>>,
    /// Side-effect ConfigMaps actually deleted, per (object, resource).
    deleted: Mutex<HashMap<(String, String), usize>>,
    behaviours: Mutex<HashMap<(String, Phase), Behaviour>>,
    /// The objects whose calls reached a hang or slow point since the last `clear`.
    hung: Mutex<Vec<String>>,
    /// Side-effect writes attempted: (object, resource, whether the write succeeded).
    written: Mutex<Vec<(String, String, bool)>>,
}

impl Script {
    pub fn new() -> Arc<Script> {
        Arc::new(Script::default())
    }

    pub fn set(&self, resource: &str, phase: Phase, behaviour: Behaviour) {
        self.behaviours.lock().insert((resource.to_string(), phase), behaviour);
    }

    pub fn clear(&self) {
        self.behaviours.lock().clear();
        self.hung.lock().clear();
    }

    fn behaviour(&self, resource: &str, phase: Phase) -> Behaviour {
        self.behaviours.lock().get(&(resource.to_string(), phase)).cloned().unwrap_or(Behaviour::Proceed)
    }

    pub fn calls(&self) -> Vec<Call> {
        self.calls.lock().clone()
    }

    pub fn calls_for(&self, object: &str) -> Vec<Call> {
        self.calls().into_iter().filter(|c| c.object == object).collect()
    }

    pub fn count(&self, object: &str, resource: &str, phase: Phase) -> usize {
        self.calls().iter().filter(|c| c.object == object && c.resource == resource && c.phase == phase).count()
    }

    /// Whether each side-effect write of `resource` on `object` succeeded, in order.
    pub fn writes_of(&self, object: &str, resource: &str) -> Vec<bool> {
        self.written.lock().iter().filter(|(o, r, _)| o == object && r == resource).map(|(_, _, ok)| *ok).collect()
    }

    pub fn created(&self, object: &str, resource: &str) -> usize {
        self.created.lock().get(&(object.to_string(), resource.to_string())).copied().unwrap_or(0)
    }

    pub fn deleted(&self, object: &str, resource: &str) -> usize {
        self.deleted.lock().get(&(object.to_string(), resource.to_string())).copied().unwrap_or(0)
    }

    /// Wait until some resource hung (since the last `clear`).
    pub async fn wait_for_hang(&self) {
        eventually("a resource to reach its crash point", || async { !self.hung.lock().is_empty() }).await;
    }

    /// Wait until a resource hung on `object` (since the last `clear`). Other objects may hang
    /// too: a restarted controller reconciles every cached object with the same script.
    pub async fn wait_for_hang_of(&self, object: &str) {
        eventually(&format!("a resource to reach its crash point on {object}"), || async {
            self.hung.lock().iter().any(|o| o == object)
        })
        .await;
    }
}

/// A resource that records its calls in a [`Script`], keeps a side-effect ConfigMap per object,
/// and behaves as scripted.
pub struct Step {
    pub name: String,
    pub set: String,
    pub script: Arc<Script>,
    pub client: Client,
    pub side_effects: bool,
}

#[derive(Debug, thiserror::Error)]
#[error("step {0} failed as scripted")]
pub struct Scripted(String);

impl operatorkit::ErrorKind for Scripted {
    fn kind(&self) -> std::borrow::Cow<'static, str> {
        "ScriptedFailure".into()
    }
}

impl Step {
    async fn call(&self, state: &mut Vec<String>, obj: &ConfigMap, phase: Phase) -> resource::Result<Outcome> {
        let object = obj.metadata.name.clone().unwrap_or_default();
        self.script.calls.lock().push(Call {
            object: object.clone(),
            set: self.set.clone(),
            resource: self.name.clone(),
            phase,
            state: state.clone(),
        });
        state.push(self.name.clone());
        let behaviour = self.script.behaviour(&self.name, phase);
        match behaviour {
            Behaviour::Fail => return Err(Scripted(self.name.clone()).into()),
            Behaviour::HangBefore => {
                self.script.hung.lock().push(object.clone());
                std::future::pending::<()>().await;
            }
            Behaviour::Slow => {
                self.script.hung.lock().push(object.clone());
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            _ => {}
        }
        if self.side_effects {
            let written = self.side_effect(&object, phase).await;
            self.script.written.lock().push((object.clone(), self.name.clone(), written.is_ok()));
            written?;
        }
        Ok(match behaviour {
            Behaviour::Proceed | Behaviour::Fail | Behaviour::HangBefore | Behaviour::Slow => Outcome::proceed(),
            Behaviour::CancelResource => Outcome::cancel_resource(),
            Behaviour::CancelReconciliation => Outcome::cancel_reconciliation(),
            Behaviour::KeepFinalizer => Outcome::proceed().keep_finalizer(),
            Behaviour::Hang => {
                self.script.hung.lock().push(object.clone());
                std::future::pending::<()>().await;
                Outcome::proceed()
            }
        })
    }

    /// Idempotent: create the side-effect ConfigMap if absent / delete it if present.
    async fn side_effect(&self, object: &str, phase: Phase) -> Result<(), ResourceError> {
        let cms: Api<ConfigMap> = Api::namespaced(self.client.clone(), NS);
        let name = side_effect_name(object, &self.name);
        let key = (object.to_string(), self.name.clone());
        match phase {
            Phase::Create => {
                let mut cm = ConfigMap::default();
                cm.metadata.name = Some(name);
                cm.data = Some(BTreeMap::from([("set".to_string(), self.set.clone())]));
                match cms.create(&PostParams::default(), &cm).await {
                    Ok(_) => *self.script.created.lock().entry(key).or_insert(0) += 1,
                    Err(kube::Error::Api(s)) if s.code == 409 => {}
                    Err(e) => return Err(e.into()),
                }
            }
            Phase::Delete => match cms.delete(&name, &DeleteParams::default()).await {
                Ok(_) => *self.script.deleted.lock().entry(key).or_insert(0) += 1,
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(e.into()),
            },
        }
        Ok(())
    }
}

impl Resource<ConfigMap, Vec<String>> for Step {
    fn name(&self) -> &str {
        &self.name
    }

    async fn ensure_created(&self, state: &mut Vec<String>, obj: &ConfigMap) -> resource::Result<Outcome> {
        self.call(state, obj, Phase::Create).await
    }

    async fn ensure_deleted(&self, state: &mut Vec<String>, obj: &ConfigMap) -> resource::Result<Outcome> {
        self.call(state, obj, Phase::Delete).await
    }
}

/// A set named `name` for `requirement` with the given steps.
pub fn set(h: &Harness, script: &Arc<Script>, name: &str, requirement: &str, steps: &[&str]) -> ResourceSet<ConfigMap> {
    set_writing_through(h.client.clone(), script, name, requirement, steps)
}

/// [`set`] whose steps write their side effects through `client`.
pub fn set_writing_through(
    client: Client,
    script: &Arc<Script>,
    name: &str,
    requirement: &str,
    steps: &[&str],
) -> ResourceSet<ConfigMap> {
    let mut builder =
        ResourceSet::with_default_state(name, VersionReq::parse(requirement).expect("a valid requirement"));
    for step in steps {
        builder = builder.resource(Step {
            name: step.to_string(),
            set: name.to_string(),
            script: script.clone(),
            client: client.clone(),
            side_effects: true,
        });
    }
    builder.build()
}

/// A controller over the cluster ConfigMaps of the default namespace.
pub fn controller(
    h: &Harness,
    name: &str,
    sets: Vec<ResourceSet<ConfigMap>>,
) -> operatorkit::ControllerBuilder<ConfigMap> {
    let mut b = Controller::<ConfigMap>::builder(h.client.clone(), name)
        .operator(OPERATOR)
        .api(Api::namespaced(h.client.clone(), NS))
        .label_selector(SELECTOR)
        .leadership(Leadership::always());
    for s in sets {
        b = b.resource_set(s);
    }
    b
}

/// A running controller.
pub struct Running {
    pub shutdown: CancellationToken,
    pub task: JoinHandle<()>,
}

impl Running {
    /// Graceful stop: wait for the controller to finish.
    pub async fn stop(self) {
        self.shutdown.cancel();
        tokio::time::timeout(WAIT, self.task)
            .await
            .expect("the controller stops")
            .expect("the controller task ends cleanly");
    }

    /// Crash: abort the controller at once, mid-reconcile.
    pub async fn crash(self) {
        self.task.abort();
        let _ = self.task.await;
    }
}

pub fn spawn(controller: Controller<ConfigMap>) -> Running {
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(controller.run(shutdown.clone()));
    Running { shutdown, task }
}

/// Route logs to the test output when `RUST_LOG` is set.
pub fn logs() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

//! A complete operatorkit controller in one file.
//!
//! It watches ConfigMaps labelled `example.giantswarm.io/greet=true` and, for each one, keeps a
//! companion ConfigMap `<name>-greeting` saying hello to the name in its `data.name`. Two
//! resources share a typed per-reconcile state: `greeting` computes the text and writes the
//! companion, `announce` reads the text from the state and logs it. Deleting the input deletes
//! the companion first (the controller's finalizer guarantees it).
//!
//! ```sh
//! cargo run -p operatorkit --example configmap_controller
//! ```
//!
//! By default it starts its own in-process API server (testenv), so it needs no cluster; set
//! `KUBECONFIG` and `EXAMPLE_USE_CLUSTER=1` to run it against a real one.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use apis::release::Release;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, PostParams};
use kube::{Client, CustomResourceExt, ResourceExt};
use operatorkit::{Controller, Metrics, Outcome, Readiness, Resource, ResourceSet, Server, resource};
use prometheus_client::registry::Registry;
use semver::VersionReq;
use tokio_util::sync::CancellationToken;

const OPERATOR: &str = "greeting-operator";

/// What the resources of one reconcile share.
#[derive(Default)]
struct State {
    greeting: Option<String>,
}

/// Keeps `<name>-greeting` in line with the input.
struct Greeting {
    client: Client,
}

impl Greeting {
    /// The pure part: what the companion should say.
    fn desired(input: &ConfigMap) -> String {
        let who = input.data.as_ref().and_then(|d| d.get("name")).map_or("world", String::as_str);
        format!("Hello, {who}!")
    }
}

impl Resource<ConfigMap, State> for Greeting {
    fn name(&self) -> &str {
        "greeting"
    }

    async fn ensure_created(&self, state: &mut State, input: &ConfigMap) -> resource::Result<Outcome> {
        let text = Self::desired(input);
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), &input.namespace().unwrap_or_default());
        let name = format!("{}-greeting", input.name_any());
        let mut companion = api.get_opt(&name).await?.unwrap_or_default();
        // Never write an unchanged object.
        if companion.data.as_ref().and_then(|d| d.get("greeting")) != Some(&text) {
            companion.metadata.name = Some(name);
            companion.data = Some(BTreeMap::from([("greeting".to_string(), text.clone())]));
            if companion.metadata.resource_version.is_some() {
                api.replace(&companion.name_any(), &PostParams::default(), &companion).await?;
            } else {
                api.create(&PostParams::default(), &companion).await?;
            }
        }
        state.greeting = Some(text);
        Ok(Outcome::proceed())
    }

    async fn ensure_deleted(&self, _: &mut State, input: &ConfigMap) -> resource::Result<Outcome> {
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), &input.namespace().unwrap_or_default());
        match api.delete(&format!("{}-greeting", input.name_any()), &DeleteParams::default()).await {
            Ok(_) => Ok(Outcome::proceed()),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(Outcome::proceed()),
            Err(e) => Err(e.into()),
        }
    }
}

/// Logs what `greeting` computed: the state is shared, typed, and per reconcile.
struct Announce;

impl Resource<ConfigMap, State> for Announce {
    fn name(&self) -> &str {
        "announce"
    }

    async fn ensure_created(&self, state: &mut State, input: &ConfigMap) -> resource::Result<Outcome> {
        tracing::info!(object = input.name_any(), greeting = state.greeting.as_deref(), "greeted");
        Ok(Outcome::proceed())
    }

    async fn ensure_deleted(&self, _: &mut State, input: &ConfigMap) -> resource::Result<Outcome> {
        tracing::info!(object = input.name_any(), "said goodbye");
        Ok(Outcome::proceed())
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()))
        .init();

    // A cluster: testenv unless asked for a real one.
    let (client, _env) = if std::env::var_os("EXAMPLE_USE_CLUSTER").is_some() {
        (Client::try_default().await?, None)
    } else {
        let env = testenv::TestEnv::start().await?;
        (env.client(), Some(env))
    };

    // The Release CRD and one Release naming this operator's version 1.4.0.
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    if crds.get_opt("releases.release.giantswarm.io").await?.is_none() {
        crds.create(&PostParams::default(), &Release::crd()).await?;
    }
    let releases: Api<Release> = Api::all(client.clone());
    let release: Release = serde_json::from_value(serde_json::json!({
        "apiVersion": "release.giantswarm.io/v1alpha1", "kind": "Release", "metadata": {"name": "v1.0.0"},
        "spec": {"components": [{"name": OPERATOR, "version": "1.4.0"}], "date": "2026-01-01T00:00:00Z", "state": "active"}
    }))?;
    if releases.get_opt("v1.0.0").await?.is_none() {
        releases.create(&PostParams::default(), &release).await?;
    }

    // The controller: one resource set for operator versions 1.x, metrics and readiness.
    let set = ResourceSet::with_default_state("v1", VersionReq::parse("^1")?)
        .resource(Greeting { client: client.clone() })
        .resource(Announce)
        .build();
    let mut registry = Registry::default();
    let metrics = Metrics::new(&mut registry);
    let readiness = Readiness::new();
    let controller = Controller::<ConfigMap>::builder(client.clone(), "greeting-controller")
        .operator(OPERATOR)
        .label_selector("example.giantswarm.io/greet=true")
        .resource_set(set)
        .metrics(&metrics)
        .readiness(&readiness)
        .build()?;
    let shutdown = CancellationToken::new();
    let server = Server::bind("127.0.0.1:0".parse()?, Arc::new(registry), readiness).await?;
    tracing::info!(addr = ?server.local_addr(), "serving /metrics, /healthz and /readyz");
    let serving = tokio::spawn(server.serve(shutdown.clone()));
    let running = tokio::spawn(controller.run(shutdown.clone()));

    // Use it: create an input, read the greeting, delete the input.
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let input: ConfigMap = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "gophers", "labels": {"example.giantswarm.io/greet": "true", "release.giantswarm.io/version": "1.0.0"}},
        "data": {"name": "Rustaceans"}
    }))?;
    cms.create(&PostParams::default(), &input).await?;
    let greeting = wait_for(|| async { cms.get_opt("gophers-greeting").await.ok().flatten() }).await?;
    println!(
        "gophers-greeting says: {}",
        greeting.data.unwrap_or_default().get("greeting").cloned().unwrap_or_default()
    );
    println!("finalizers on the input: {:?}", cms.get("gophers").await?.finalizers());

    cms.delete("gophers", &DeleteParams::default()).await?;
    wait_for(|| async { cms.get_opt("gophers").await.ok().filter(Option::is_none).map(|_| ()) }).await?;
    println!("input deleted; companion exists: {}", cms.get_opt("gophers-greeting").await?.is_some());

    shutdown.cancel();
    running.await?;
    serving.await?;
    Ok(())
}

/// Poll `f` until it returns something, for up to 30 s.
async fn wait_for<T, F, Fut>(f: F) -> anyhow::Result<T>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            if let Some(v) = f().await {
                return v;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .context("timed out")
}

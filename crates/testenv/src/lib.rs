//! # testenv
//!
//! An in-process Kubernetes API server for tests: an HTTP server on `127.0.0.1` that behaves
//! like kube-apiserver backed by etcd for everything operators and `kubectl` rely on, so that
//! kube-rs controllers can be tested end to end without a cluster.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use k8s_openapi::api::core::v1::ConfigMap;
//! use kube::api::{Api, PostParams};
//!
//! let env = testenv::TestEnv::start().await?;
//! let cms: Api<ConfigMap> = Api::namespaced(env.client(), "default");
//! let mut cm = ConfigMap::default();
//! cm.metadata.name = Some("hello".into());
//! cms.create(&PostParams::default(), &cm).await?;
//! // `kubectl --kubeconfig <path> get configmaps` works too.
//! println!("{}", env.kubeconfig_path().display());
//! # Ok(()) }
//! ```
//!
//! What it implements, and how faithfully, is listed item by item in `docs/testenv.md`. In
//! short: discovery and OpenAPI v3, one global resourceVersion with optimistic concurrency, lists
//! with selectors and consistent pagination, watches with exact replay, bookmarks, streaming
//! lists and `410 Expired`, finalizers and deletion with garbage collection and namespace
//! termination, JSON, merge, strategic merge and server-side apply patches, and
//! CustomResourceDefinitions with structural schemas, defaulting, pruning, validation, status
//! and scale subresources, printer columns and several versions. Tests can inject faults,
//! compact history and read request counters through [`Handle`]. With
//! [`TestEnvBuilder::simulation`], a cluster simulation ([`sim`]) rolls out Deployments,
//! schedules pods onto simulated nodes, runs them and keeps Endpoints and disruption budgets.
//!
//! Security is opt-in ([`auth`]): [`TestEnvBuilder::secure`] serves HTTPS, requires credentials
//! and authorizes with RBAC like a production kube-apiserver. Credentials are bearer tokens
//! (static, ServiceAccount) and, with [`TestEnvBuilder::client_ca`], client certificates of a CA
//! (kube-apiserver's `--client-ca-file`: user = the subject's common name, groups = its
//! organizations). With [`TestEnvBuilder::serving_certificate`] the server presents a cluster's
//! own API server certificate, so that kubeconfigs issued for that cluster work against it as
//! they are:
//!
//! ```no_run
//! # async fn demo(cluster_ca: String, api_crt: String, api_key: String) -> Result<(), Box<dyn std::error::Error>> {
//! let env = testenv::TestEnv::builder()
//!     .rbac(true)
//!     .serving_certificate(testenv::ServingCertificate {
//!         ca_pem: cluster_ca.clone(),
//!         cert_pem: api_crt,
//!         key_pem: api_key,
//!     })
//!     .client_ca(cluster_ca)
//!     .start()
//!     .await?;
//! // A kubeconfig with client-certificate-data and client-key-data reaches env.base_url().
//! # Ok(()) }
//! ```
#![forbid(unsafe_code)]

pub mod api;
pub mod auth;
pub mod builtin_shapes;
mod controllers;
pub mod error;
pub mod faults;
pub mod link;
pub mod metrics;
pub mod patch;
pub mod protobuf;
pub mod registry;
pub mod schema;
pub mod selector;
pub mod server;
pub mod shape;
pub mod shard;
pub mod sim;
pub mod ssa;
pub mod store;
pub mod table;
pub mod validation;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

pub use api::ApiConfig;
pub use auth::{
    AccessRecord, ClientCertificate, GrantedRule, InClusterFiles, RuleRef, SecurityConfig, ServingCertificate,
    StaticToken, UserInfo,
};
pub use faults::{Faults, RequestMatch};
pub use link::Link;
pub use metrics::{RequestCounts, Verb};
pub use server::ServerConfig;
pub use sim::{
    COMPLETION_ANNOTATION, CompletionPolicy, EXIT_CODE_ANNOTATION, NodeSpec, READINESS_ANNOTATION, ReadinessPolicy,
    SimConfig, SimError, Simulation, TerminationPolicy,
};
pub use store::Retention;

/// Errors starting a test environment.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The listening socket could not be opened.
    #[error("cannot listen on 127.0.0.1:{port}: {source}")]
    Bind {
        /// The requested port (0 = any).
        port: u16,
        /// The cause.
        source: std::io::Error,
    },
    /// The kubeconfig file could not be written.
    #[error("cannot write the kubeconfig file {path}: {source}")]
    Kubeconfig {
        /// Where.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The kube client could not be built.
    #[error("cannot build a kube client: {0}")]
    Client(String),
    /// The cluster simulation could not start (its initial nodes could not be created).
    #[error("cannot start the cluster simulation: {0}")]
    Simulation(#[from] SimError),
    /// TLS or token signing could not be set up.
    #[error(transparent)]
    Security(#[from] auth::SecurityError),
    /// A ServiceAccount token could not be issued.
    #[error("cannot issue a token for {namespace}/{name}: {source}")]
    Token {
        /// The ServiceAccount's namespace.
        namespace: String,
        /// The ServiceAccount's name.
        name: String,
        /// What the API answered.
        source: Box<error::ApiError>,
    },
    /// In-cluster files could not be written.
    #[error("cannot write the in-cluster files under {path}: {source}")]
    InClusterFiles {
        /// The root directory.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
}

/// Configures and starts a [`TestEnv`].
#[derive(Clone, Debug, Default)]
pub struct TestEnvBuilder {
    port: u16,
    retention: Retention,
    api: ApiConfig,
    server: ServerConfig,
    kubeconfig: Option<PathBuf>,
    simulation: Option<SimConfig>,
    security: SecurityConfig,
}

impl TestEnvBuilder {
    /// Listen on this port instead of an ephemeral one.
    pub fn port(mut self, port: u16) -> Self {
        self.port = port;
        self
    }

    /// How much watch history is kept (default: 5 minutes, at most 200,000 events).
    pub fn history(mut self, max_age: Duration, max_events: usize) -> Self {
        self.retention = Retention { max_age, max_events };
        self
    }

    /// Run the garbage collector (default: on).
    pub fn garbage_collector(mut self, on: bool) -> Self {
        self.api.garbage_collector = on;
        self
    }

    /// Run the namespace controller (default: on). Off, terminating namespaces stay
    /// Terminating forever, as in envtest.
    pub fn namespace_controller(mut self, on: bool) -> Self {
        self.api.namespace_controller = on;
        self
    }

    /// Give every namespace a `default` ServiceAccount and, when serving TLS, the
    /// `kube-root-ca.crt` ConfigMap holding the serving CA under `ca.crt`, as
    /// kube-controller-manager's service-account controller and root-CA publisher do (default:
    /// on). They are created right after their namespace and again when deleted; off, a new
    /// namespace is empty, as in envtest.
    pub fn namespace_defaults(mut self, on: bool) -> Self {
        self.api.namespace_defaults = on;
        self
    }

    /// Interval of BOOKMARK events on idle watches that allow them (default: 60 s).
    pub fn bookmark_interval(mut self, every: Duration) -> Self {
        self.server.bookmark_interval = every;
        self
    }

    /// Serve KEP-5866's `shardSelector` on lists and watches, as kube-apiserver 1.36 does
    /// with the `ShardedListAndWatch` feature gate (default: off). Off, the parameter is
    /// ignored as an older server ignores it: the full collection, without `shardInfo`. See
    /// [`shard`].
    pub fn sharded_list_and_watch(mut self, on: bool) -> Self {
        self.server.sharded_list_and_watch = on;
        self
    }

    /// Run the cluster simulation (default: off): controllers for Deployments, ReplicaSets,
    /// Endpoints and PodDisruptionBudgets, a scheduler, and simulated nodes with kubelets.
    /// See [`sim`].
    pub fn simulation(mut self, config: SimConfig) -> Self {
        self.simulation = Some(config);
        self
    }

    /// Behave like a production kube-apiserver: serve HTTPS with a generated CA (written to
    /// the kubeconfig), require bearer tokens, authorize with RBAC, and admit pods under Pod
    /// Security. The kubeconfig and [`TestEnv::client`] act as an administrator in
    /// `system:masters`; ServiceAccounts get tokens from TokenRequest. See [`auth`].
    pub fn secure(self) -> Self {
        self.tls(true).rbac(true).pod_security(true)
    }

    /// Serve HTTPS with a generated CA (default: off).
    pub fn tls(mut self, on: bool) -> Self {
        self.security.tls = on;
        self
    }

    /// Serve HTTPS with `serving` instead of a generated certificate: a cluster's own API server
    /// certificate (valid for `127.0.0.1`), so that clients configured for that cluster (its CA,
    /// its client certificates) reach this server unchanged. [`Handle::ca_pem`] is then its CA.
    pub fn serving_certificate(mut self, serving: ServingCertificate) -> Self {
        self.security.serving = Some(serving);
        self
    }

    /// Authenticate client certificates issued by `ca_pem` (kube-apiserver's
    /// `--client-ca-file`; may be given more than once). Implies TLS and authentication. The
    /// server then requests, but does not require, a client certificate: one of this CA for
    /// client authentication makes the request's user its subject's common name, with its
    /// organizations as groups; any other certificate is refused with `401 Unauthorized` unless
    /// the request carries a valid token. Tokens keep working.
    pub fn client_ca(mut self, ca_pem: impl Into<String>) -> Self {
        self.security.client_cas.push(ca_pem.into());
        self
    }

    /// Require bearer tokens; requests without valid ones get `401 Unauthorized` (default:
    /// off). Without RBAC every authenticated user may do everything.
    pub fn authentication(mut self, on: bool) -> Self {
        self.security.authentication = on;
        self
    }

    /// Authorize requests with RBAC; implies authentication (default: off). The bootstrap
    /// ClusterRoles and bindings (`cluster-admin`, `admin`, `edit`, `view`, discovery, basic
    /// user) are created at start.
    pub fn rbac(mut self, on: bool) -> Self {
        self.security.rbac = on;
        self
    }

    /// With authentication on, treat requests without credentials as `system:anonymous`
    /// instead of answering 401 (kube-apiserver's `--anonymous-auth`; default: off).
    pub fn anonymous(mut self, on: bool) -> Self {
        self.security.anonymous = on;
        self
    }

    /// A static bearer token for `user` (kube-apiserver's `--token-auth-file`).
    pub fn static_token(mut self, token: impl Into<String>, user: UserInfo) -> Self {
        self.security.static_tokens.push(StaticToken { token: token.into(), user });
        self
    }

    /// The administrator's bearer token (default: random).
    pub fn admin_token(mut self, token: impl Into<String>) -> Self {
        self.security.admin_token = Some(token.into());
        self
    }

    /// Admit pods under Pod Security from their namespace's `pod-security.kubernetes.io/*`
    /// labels (default: off). See [`auth::podsecurity`].
    pub fn pod_security(mut self, on: bool) -> Self {
        self.api.pod_security = on;
        self
    }

    /// Write the kubeconfig here instead of a temporary file.
    pub fn kubeconfig(mut self, path: impl Into<PathBuf>) -> Self {
        self.kubeconfig = Some(path.into());
        self
    }

    /// Start the server on the current tokio runtime.
    pub async fn start(self) -> Result<TestEnv, Error> {
        let listener = TcpListener::bind(("127.0.0.1", self.port))
            .await
            .map_err(|source| Error::Bind { port: self.port, source })?;
        let addr = listener.local_addr().map_err(|source| Error::Bind { port: self.port, source })?;
        let security = Arc::new(auth::Security::new(&self.security)?);
        let mut api = self.api;
        api.root_ca = security.tls().map(|t| t.ca_pem().to_string());
        let handle = Handle::serve(listener, addr, self.retention, api, self.server, self.simulation, security)?;
        let (kubeconfig_file, kubeconfig_path) = match self.kubeconfig {
            Some(path) => {
                std::fs::write(&path, handle.kubeconfig())
                    .map_err(|source| Error::Kubeconfig { path: path.clone(), source })?;
                (None, path)
            }
            None => {
                let file = tempfile::Builder::new()
                    .prefix("testenv-kubeconfig-")
                    .suffix(".yaml")
                    .tempfile()
                    .map_err(|source| Error::Kubeconfig { path: std::env::temp_dir(), source })?;
                std::fs::write(file.path(), handle.kubeconfig())
                    .map_err(|source| Error::Kubeconfig { path: file.path().to_path_buf(), source })?;
                let path = file.path().to_path_buf();
                (Some(file), path)
            }
        };
        let client = handle.client()?;
        Ok(TestEnv { handle, client, kubeconfig_path, _kubeconfig_file: kubeconfig_file })
    }
}

/// A running API server with a client and a kubeconfig. Dropping it stops the server.
pub struct TestEnv {
    handle: Handle,
    client: kube::Client,
    kubeconfig_path: PathBuf,
    _kubeconfig_file: Option<tempfile::NamedTempFile>,
}

impl TestEnv {
    /// Start with the defaults: an ephemeral port, garbage collector and namespace controller on.
    pub async fn start() -> Result<TestEnv, Error> {
        TestEnvBuilder::default().start().await
    }

    /// Configure before starting.
    pub fn builder() -> TestEnvBuilder {
        TestEnvBuilder::default()
    }

    /// A kube client for this server.
    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// `http://127.0.0.1:<port>` (`https://` with TLS).
    pub fn base_url(&self) -> String {
        self.handle.base_url()
    }

    /// A kubeconfig file pointing at this server (removed on drop unless chosen by the builder).
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig_path
    }

    /// Test controls: faults, counters, compaction, clock, stop.
    pub fn handle(&self) -> &Handle {
        &self.handle
    }

    /// The cluster simulation, if the builder enabled it.
    pub fn sim(&self) -> Option<&Simulation> {
        self.handle.sim()
    }

    /// Stop the server now (also done on drop).
    pub fn stop(&self) {
        self.handle.stop();
    }
}

impl std::fmt::Debug for TestEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestEnv")
            .field("base_url", &self.base_url())
            .field("kubeconfig", &self.kubeconfig_path)
            .finish()
    }
}

impl Drop for TestEnv {
    fn drop(&mut self) {
        self.handle.stop();
    }
}

/// Controls of a running server. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Handle {
    state: Arc<server::ServerState>,
    sim: Option<Simulation>,
}

impl Handle {
    fn serve(
        listener: TcpListener,
        addr: SocketAddr,
        retention: Retention,
        api_config: ApiConfig,
        server_config: ServerConfig,
        simulation: Option<SimConfig>,
        security: Arc<auth::Security>,
    ) -> Result<Handle, Error> {
        let stop = CancellationToken::new();
        let store = Arc::new(store::Store::new(retention));
        let (hints_tx, hints_rx) = tokio::sync::mpsc::unbounded_channel();
        store.set_hints(hints_tx);
        let registry = Arc::new(registry::Registry::new());
        let mut core = api::Api::new(store, registry, api_config.clone());
        let (reap_tx, reap_rx) = tokio::sync::mpsc::unbounded_channel();
        if api_config.pod_grace_reaper {
            core.reaper = Some(reap_tx);
        }
        let core = Arc::new(core);
        bootstrap(&core);
        if security.rbac().is_some() {
            bootstrap_rbac(&core);
            auth::rbac::aggregate(&core);
            tokio::spawn(auth::rbac::run_aggregation(core.clone(), stop.clone()));
        }
        tokio::spawn(controllers::run(core.clone(), hints_rx, stop.clone()));
        tokio::spawn(controllers::run_reaper(core.clone(), reap_rx, stop.clone()));
        let sim = match simulation {
            Some(config) => match Simulation::start(core.clone(), config, stop.clone()) {
                Ok(sim) => Some(sim),
                Err(e) => {
                    stop.cancel();
                    return Err(e.into());
                }
            },
            None => None,
        };
        let state = Arc::new(server::ServerState {
            api: core,
            faults: Faults::default(),
            counters: metrics::Counters::default(),
            config: server_config,
            addr,
            stop,
            security,
        });
        tokio::spawn(server::serve(listener, state.clone()));
        Ok(Handle { state, sim })
    }

    /// `http://127.0.0.1:<port>` (`https://` with TLS).
    pub fn base_url(&self) -> String {
        let scheme = if self.state.security.tls().is_some() { "https" } else { "http" };
        format!("{scheme}://{}", self.state.addr)
    }

    /// A kubeconfig for this server: its CA and the administrator's token when secure.
    pub fn kubeconfig(&self) -> String {
        let security = &self.state.security;
        kubeconfig_yaml_with(&self.base_url(), security.tls().map(|t| t.ca_pem()), security.admin_token())
    }

    /// A kubeconfig for this server, trusting its CA and presenting the client certificate
    /// `cert_pem` with its key `key_pem` (embedded, as `client-certificate-data` and
    /// `client-key-data`).
    pub fn kubeconfig_with_certificate(&self, cert_pem: &str, key_pem: &str) -> String {
        use base64::Engine;
        let b64 = |text: &str| base64::engine::general_purpose::STANDARD.encode(text);
        let plain = kubeconfig_yaml_with(&self.base_url(), self.state.security.tls().map(|t| t.ca_pem()), None);
        plain.replace(
            "  user: {}\n",
            &format!(
                "  user:\n    client-certificate-data: {}\n    client-key-data: {}\n",
                b64(cert_pem),
                b64(key_pem)
            ),
        )
    }

    /// The socket address served.
    pub fn addr(&self) -> SocketAddr {
        self.state.addr
    }

    /// A new kube client for this server (as the administrator when authentication is on).
    pub fn client(&self) -> Result<kube::Client, Error> {
        self.client_with_token(self.state.security.admin_token())
    }

    /// A new kube client that presents `token` (none: no credentials) and trusts the
    /// server's CA.
    pub fn client_with_token(&self, token: Option<&str>) -> Result<kube::Client, Error> {
        let url = self.base_url().parse().map_err(|e: http::uri::InvalidUri| Error::Client(e.to_string()))?;
        let mut config = kube::Config::new(url);
        config.default_namespace = "default".into();
        if let Some(tls) = self.state.security.tls() {
            config.root_cert = Some(vec![tls.ca_der().to_vec()]);
        }
        if let Some(token) = token {
            config.auth_info =
                serde_json::from_value(json!({"token": token})).map_err(|e| Error::Client(e.to_string()))?;
        }
        kube::Client::try_from(config).map_err(|e| Error::Client(e.to_string()))
    }

    /// The administrator's bearer token, when authentication is on.
    pub fn admin_token(&self) -> Option<String> {
        self.state.security.admin_token().map(str::to_string)
    }

    /// The CA certificate (PEM) that signed the serving certificate, when serving TLS.
    pub fn ca_pem(&self) -> Option<String> {
        self.state.security.tls().map(|t| t.ca_pem().to_string())
    }

    /// A token for the ServiceAccount `namespace/name`, as TokenRequest issues it (the
    /// account must exist; the token stops working when it expires on the server's clock or
    /// when the account is deleted).
    pub fn service_account_token(&self, namespace: &str, name: &str, lifetime: Duration) -> Result<String, Error> {
        let request = json!({"spec": {"expirationSeconds": lifetime.as_secs()}});
        let err = |source| Error::Token { namespace: namespace.into(), name: name.into(), source: Box::new(source) };
        let out =
            auth::tokenrequest::create(&self.state.api, &self.state.security, namespace, name, request).map_err(err)?;
        Ok(out.pointer("/status/token").and_then(serde_json::Value::as_str).unwrap_or_default().to_string())
    }

    /// Write what a pod of the ServiceAccount `namespace/name` gets from the kubelet under
    /// `root` (`var/run/secrets/kubernetes.io/serviceaccount/{token,ca.crt,namespace}`), with a
    /// one-hour token, and return the environment to run it with. With `root` = `/` (or a
    /// chroot, or a private mount namespace), `kube::Config::incluster()` connects here.
    pub fn write_incluster_files(&self, root: &Path, namespace: &str, name: &str) -> Result<InClusterFiles, Error> {
        let token = self.service_account_token(namespace, name, Duration::from_secs(3600))?;
        let ca = self.ca_pem().unwrap_or_default();
        let dir = auth::incluster::write(root, &token, &ca, namespace)
            .map_err(|source| Error::InClusterFiles { path: root.to_path_buf(), source })?;
        Ok(InClusterFiles {
            dir,
            host: self.addr().ip().to_string(),
            port: self.addr().port(),
            namespace: namespace.into(),
        })
    }

    /// TLS, authentication and authorization state.
    pub fn security(&self) -> &auth::Security {
        &self.state.security
    }

    /// Who made which requests, and which RBAC rule allowed each (authentication on).
    pub fn access_log(&self) -> Vec<AccessRecord> {
        self.state.security.access_log().records()
    }

    /// The requests of one user (e.g. `system:serviceaccount:ns:name`).
    pub fn access_log_of(&self, user: &str) -> Vec<AccessRecord> {
        self.state.security.access_log().records_of(user)
    }

    /// The RBAC rules granted to `user` that allowed none of its requests so far: what a
    /// least-privilege review would remove. Empty without RBAC.
    pub fn unused_rules(&self, user: &UserInfo) -> Vec<GrantedRule> {
        match self.state.security.rbac() {
            Some(rbac) => rbac.unused_rules(&self.state.api, user, self.state.security.access_log()),
            None => Vec::new(),
        }
    }

    /// Fault injection: failures, delays, closing watches.
    pub fn faults(&self) -> &Faults {
        &self.state.faults
    }

    /// Requests served so far, per verb and resource.
    pub fn requests(&self) -> RequestCounts {
        self.state.counters.snapshot()
    }

    /// Reset the request counters.
    pub fn reset_requests(&self) {
        self.state.counters.reset();
    }

    /// Drop all watch history: watches and exact reads from any earlier resourceVersion now get
    /// `410 Expired`. Returns the compaction point.
    pub fn compact(&self) -> u64 {
        self.state.api.store.compact_now()
    }

    /// End open watches (of one resource, plural or `plural.group`, or all) cleanly.
    pub fn close_watches(&self, resource: Option<&str>) -> usize {
        self.state.faults.close_watches(resource)
    }

    /// The current global resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.state.api.store.current_rv()
    }

    /// Move the server's clock forward (timestamps it writes, ages in tables).
    pub fn advance_clock(&self, by: Duration) {
        self.state.api.clock.advance(by);
    }

    /// Direct access to the API semantics, for in-process controllers such as a cluster
    /// simulation. Writes through it behave as HTTP writes do, without the HTTP.
    pub fn api(&self) -> &Arc<api::Api> {
        &self.state.api
    }

    /// The cluster simulation, if enabled.
    pub fn sim(&self) -> Option<&Simulation> {
        self.sim.as_ref()
    }

    /// Stop serving; open connections and watches end.
    pub fn stop(&self) {
        self.state.stop.cancel();
    }

    /// Resolves when the server stops.
    pub async fn stopped(&self) {
        self.state.stop.cancelled().await;
    }
}

/// Namespaces every cluster has, with their defaults.
fn bootstrap(core: &api::Api) {
    let ns = core.namespaces_def();
    let opts = api::WriteOptions { manager: "kube-apiserver".into(), ..Default::default() };
    for name in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name}}});
        if let Err(e) = core.create(&ns, "", body, &opts) {
            tracing::error!(namespace = name, error = %e, "cannot create a bootstrap namespace");
        }
        // Before the server answers, so that a client starts from a quiet server.
        controllers::ensure_namespace_defaults(core, name);
    }
}

/// The bootstrap RBAC policy kube-apiserver creates at start.
fn bootstrap_rbac(core: &api::Api) {
    let opts = api::WriteOptions { manager: "kube-apiserver".into(), ..Default::default() };
    for obj in auth::rbac::bootstrap_policy() {
        let kind = obj["kind"].as_str().unwrap_or_default();
        let plural = if kind == "ClusterRole" { "clusterroles" } else { "clusterrolebindings" };
        let Some(def) = core.registry.get("rbac.authorization.k8s.io", "v1", plural) else { continue };
        if let Err(e) = core.create(&def, "", obj.clone(), &opts) {
            tracing::error!(kind, name = %obj["metadata"]["name"], error = %e, "cannot create the bootstrap RBAC policy");
        }
    }
}

/// A kubeconfig for a server at `url`, trusting `ca_pem` and presenting `token` when given.
pub fn kubeconfig_yaml_with(url: &str, ca_pem: Option<&str>, token: Option<&str>) -> String {
    use base64::Engine;
    let ca = ca_pem
        .map(|pem| {
            format!("\n    certificate-authority-data: {}", base64::engine::general_purpose::STANDARD.encode(pem))
        })
        .unwrap_or_default();
    let user = token.map(|t| format!("\n    token: {t}")).unwrap_or_else(|| " {}".into());
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: testenv\n  cluster:\n    server: {url}{ca}\nusers:\n- name: testenv\n  user:{user}\ncontexts:\n- name: testenv\n  context:\n    cluster: testenv\n    user: testenv\n    namespace: default\ncurrent-context: testenv\n"
    )
}

/// A kubeconfig for a server at `url`.
pub fn kubeconfig_yaml(url: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: testenv\n  cluster:\n    server: {url}\nusers:\n- name: testenv\n  user: {{}}\ncontexts:\n- name: testenv\n  context:\n    cluster: testenv\n    user: testenv\n    namespace: default\ncurrent-context: testenv\n"
    )
}

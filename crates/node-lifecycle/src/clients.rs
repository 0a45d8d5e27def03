//! Clients for workload clusters, resolved from management-cluster Secrets and cached.
//!
//! Both operators act inside the workload cluster (WC): they cordon and drain its nodes and read
//! their readiness. A client for cluster `<id>` comes from, in this order:
//!
//! 1. the Cluster API convention: Secret `<id>-kubeconfig`, key `value`, in the cluster's
//!    namespace (a kubeconfig; file references, `exec` and auth-provider plugins are refused,
//!    since a Secret must not make the operator read its files or run commands);
//! 2. the cert-operator Secrets: labels `giantswarm.io/cluster=<id>` and
//!    `giantswarm.io/certificate=<name>` (`api` unless configured), keys `ca`, `crt` and `key`,
//!    with the cluster's API endpoint as the server.
//!
//! One client is cached per cluster. [`WorkloadClients::run`] follows the metadata of the
//! management cluster's Secrets (no Secret data crosses that watch) and drops a cached client
//! whose Secret changed or went away, so the next call builds it anew: a rotated kubeconfig
//! takes effect at the next reconcile. [`WorkloadClients::forget`] drops a cluster's client when
//! the cluster is gone.
//!
//! A client from a kubeconfig Secret that the operators issued (the management identity) grants
//! itself its role where the workload cluster refuses it: see [`crate::access`].
//!
//! Every client has connect and request timeouts, so an unreachable WC costs a worker seconds,
//! never forever. Errors are typed: [`WorkloadClusterError::is_not_ready`] tells the normal
//! "not reachable yet" of a cluster being created from a real failure. No error, log line or
//! `Debug` output carries key material: Secret bytes are held in [`Sensitive`], and parse errors
//! are reported by position and cause, never by echoing content.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Node, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, ListParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::PartialObjectMeta;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Client, Config};
use operatorkit::Leadership;
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use crate::access::{AccessRepair, RepairingClient};

/// The key of the kubeconfig in a `<id>-kubeconfig` Secret (Cluster API convention).
pub const KUBECONFIG_KEY: &str = "value";
/// The label naming a cert-operator certificate.
pub const CERTIFICATE_LABEL: &str = "giantswarm.io/certificate";
/// The cert-operator certificate used by default.
pub const DEFAULT_CERTIFICATE: &str = "api";

/// Which workload cluster: its id, the management-cluster namespace holding its Secrets, and
/// its API endpoint (a host name, or a URL), used with cert-operator Secrets.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClusterRef {
    /// The namespace of the cluster's Secrets.
    pub namespace: String,
    /// The cluster id, e.g. `al9qy`.
    pub id: String,
    /// The API server, e.g. `api.al9qy.k8s.example.com` (https is assumed without a scheme).
    pub api_endpoint: String,
}

impl ClusterRef {
    /// A cluster reference.
    pub fn new(namespace: impl Into<String>, id: impl Into<String>, api_endpoint: impl Into<String>) -> Self {
        Self { namespace: namespace.into(), id: id.into(), api_endpoint: api_endpoint.into() }
    }

    /// The name of the Cluster API kubeconfig Secret, `<id>-kubeconfig`.
    pub fn kubeconfig_secret(&self) -> String {
        format!("{}-kubeconfig", self.id)
    }

    fn key(&self) -> (String, String) {
        (self.namespace.clone(), self.id.clone())
    }
}

/// Private bytes (keys, kubeconfigs): `Debug` prints `***`, and there is no `Display`.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Sensitive(Vec<u8>);

impl Sensitive {
    /// Wrap bytes.
    pub fn new(bytes: Vec<u8>) -> Self {
        Self(bytes)
    }

    /// The bytes, for the one place that needs them.
    pub fn expose(&self) -> &[u8] {
        &self.0
    }
}

impl std::fmt::Debug for Sensitive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("***")
    }
}

/// Timeouts and the cert-operator certificate to use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientOptions {
    /// How long a TCP (and TLS) connection may take.
    pub connect_timeout: Duration,
    /// How long a request may wait for its response.
    pub request_timeout: Duration,
    /// The cert-operator certificate (`giantswarm.io/certificate` label) for clusters without a
    /// kubeconfig Secret.
    pub certificate: String,
    /// The field manager of the operator's own writes of the management identity's role
    /// ([`crate::access`]): the operator's name.
    pub field_manager: String,
    /// How often the management identity's role is applied to one cluster at most.
    pub access_repair_interval: Duration,
}

impl Default for ClientOptions {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(15),
            certificate: DEFAULT_CERTIFICATE.to_string(),
            field_manager: ignition::access::MASTER_FIELD_MANAGER.to_string(),
            access_repair_interval: Duration::from_secs(10 * 60),
        }
    }
}

impl ClientOptions {
    /// The defaults, for `operator` (its name is the field manager of its writes).
    pub fn for_operator(operator: &str) -> Self {
        Self { field_manager: operator.to_string(), ..Self::default() }
    }
}

/// Why a workload-cluster client cannot be had, or a request to it failed.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadClusterError {
    /// Neither kind of Secret exists (yet): normal while a cluster is created.
    #[error(
        "workload cluster {cluster} has no credentials yet: neither Secret {namespace}/{kubeconfig_secret} nor a Secret labelled giantswarm.io/cluster={cluster},giantswarm.io/certificate={certificate} exists in namespace {namespace}"
    )]
    NoCredentials {
        /// The cluster id.
        cluster: String,
        /// The namespace searched.
        namespace: String,
        /// The kubeconfig Secret's name.
        kubeconfig_secret: String,
        /// The certificate label value searched.
        certificate: String,
    },
    /// A Secret exists but cannot give a client; someone must fix it.
    #[error(
        "workload cluster {cluster}: Secret {namespace}/{secret} is unusable: {problem}; fix the Secret (the client is rebuilt when it changes)"
    )]
    InvalidSecret {
        /// The cluster id.
        cluster: String,
        /// The Secret's namespace.
        namespace: String,
        /// The Secret's name.
        secret: String,
        /// What is wrong, without the Secret's content.
        problem: String,
    },
    /// Nothing answered, or not in time, or the API server is not serving yet (5xx).
    #[error(
        "workload cluster {cluster} is not reachable at {server} (credentials from Secret {namespace}/{secret}): {problem}"
    )]
    Unreachable {
        /// The cluster id.
        cluster: String,
        /// The Secret's namespace.
        namespace: String,
        /// The Secret the client came from.
        secret: String,
        /// The server URL.
        server: String,
        /// The transport error.
        problem: String,
    },
    /// The API server answered, and refused (401, 403, or another unexpected status).
    #[error(
        "workload cluster {cluster} at {server} refused a request (credentials from Secret {namespace}/{secret}): {code} {message}"
    )]
    Rejected {
        /// The cluster id.
        cluster: String,
        /// The Secret's namespace.
        namespace: String,
        /// The Secret the client came from.
        secret: String,
        /// The server URL.
        server: String,
        /// The HTTP status.
        code: u16,
        /// The API server's message.
        message: String,
    },
    /// Reading the Secrets from the management cluster failed.
    #[error(
        "cannot read the Secrets of workload cluster {cluster} in namespace {namespace} from the management cluster: {source}"
    )]
    Management {
        /// The cluster id.
        cluster: String,
        /// The namespace.
        namespace: String,
        /// The management-cluster error.
        #[source]
        source: kube::Error,
    },
}

impl WorkloadClusterError {
    /// Whether this is the normal state of a cluster that is not up yet (no credentials yet,
    /// nothing answering): worth a condition and a retry, not an error report.
    pub fn is_not_ready(&self) -> bool {
        matches!(self, Self::NoCredentials { .. } | Self::Unreachable { .. })
    }

    /// A PascalCase reason for conditions and events.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::NoCredentials { .. } => "WorkloadClusterCredentialsMissing",
            Self::InvalidSecret { .. } => "KubeconfigInvalid",
            Self::Unreachable { .. } => "WorkloadClusterUnreachable",
            Self::Rejected { .. } => "WorkloadClusterRejected",
            Self::Management { .. } => "ManagementClusterError",
        }
    }
}

impl operatorkit::ErrorKind for WorkloadClusterError {
    fn kind(&self) -> std::borrow::Cow<'static, str> {
        self.reason().into()
    }

    fn is_retryable(&self) -> bool {
        !matches!(self, Self::InvalidSecret { .. })
    }
}

/// A client for one workload cluster, with what is needed to describe its failures.
#[derive(Clone)]
pub struct WorkloadClient {
    client: Client,
    cluster: ClusterRef,
    secret: String,
    server: String,
}

impl std::fmt::Debug for WorkloadClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkloadClient")
            .field("cluster", &self.cluster.id)
            .field("secret", &self.secret)
            .field("server", &self.server)
            .finish_non_exhaustive()
    }
}

impl WorkloadClient {
    /// The kube client.
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// The cluster.
    pub fn cluster(&self) -> &ClusterRef {
        &self.cluster
    }

    /// The Secret the client was built from.
    pub fn secret(&self) -> &str {
        &self.secret
    }

    /// The server URL.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// Describe a failed request to this cluster: transport failures and 5xx are
    /// [`WorkloadClusterError::Unreachable`], other statuses [`WorkloadClusterError::Rejected`].
    pub fn error(&self, error: kube::Error) -> WorkloadClusterError {
        let cluster = self.cluster.id.clone();
        let namespace = self.cluster.namespace.clone();
        let secret = self.secret.clone();
        let server = self.server.clone();
        match error {
            kube::Error::Api(status) if status.code >= 500 => WorkloadClusterError::Unreachable {
                cluster,
                namespace,
                secret,
                server,
                problem: format!("{} {}", status.code, status.message),
            },
            kube::Error::Api(status) => WorkloadClusterError::Rejected {
                cluster,
                namespace,
                secret,
                server,
                code: status.code,
                message: status.message,
            },
            other => {
                WorkloadClusterError::Unreachable { cluster, namespace, secret, server, problem: other.to_string() }
            }
        }
    }
}

struct Entry {
    client: WorkloadClient,
    /// The resourceVersion of the Secret the client came from.
    resource_version: String,
}

#[derive(Default)]
struct Cache {
    clients: HashMap<(String, String), Entry>,
    /// The latest resourceVersion seen by the Secret watch, per (namespace, Secret name), for
    /// the Secrets clients are built from. A cached client whose Secret moved on is rebuilt.
    seen: HashMap<(String, String), String>,
}

/// Workload-cluster clients, one cached per cluster. Cheap to clone.
///
/// Writes are fenced per request, as the management-cluster and AWS clients are: the clients
/// handed out send a `POST`, `PUT`, `PATCH` or `DELETE` only while the [`Leadership`] of
/// [`WorkloadClients::gated_by`] holds, so a replica that lost its lease in the middle of a
/// drain makes no further cordon or eviction.
#[derive(Clone)]
pub struct WorkloadClients {
    mc: Client,
    options: ClientOptions,
    cache: Arc<Mutex<Cache>>,
    fence: Leadership,
    repair: Arc<AccessRepair>,
}

impl std::fmt::Debug for WorkloadClients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkloadClients")
            .field("options", &self.options)
            .field("cached", &self.cache.lock().clients.len())
            .finish_non_exhaustive()
    }
}

impl WorkloadClients {
    /// Clients resolved through the management-cluster client `mc`.
    pub fn new(mc: Client, options: ClientOptions) -> Self {
        let repair = Arc::new(AccessRepair::new(mc.clone(), options.clone()));
        Self { mc, options, cache: Arc::default(), fence: Leadership::always(), repair }
    }

    /// The same cache, handing out clients whose writes go through only while `leadership`
    /// holds (checked as each request is sent).
    pub fn gated_by(&self, leadership: Leadership) -> Self {
        Self { fence: leadership, ..self.clone() }
    }

    /// `client` with its writes fenced by this view's leadership.
    fn fenced(&self, mut client: WorkloadClient) -> WorkloadClient {
        client.client = self.fence.gate(client.client);
        client
    }

    /// The options.
    pub fn options(&self) -> &ClientOptions {
        &self.options
    }

    /// How many times the management identity's role was applied to a workload cluster that
    /// refused it ([`crate::access`]).
    pub fn access_repairs(&self) -> u64 {
        self.repair.applied()
    }

    /// How many clients are cached.
    pub fn cached(&self) -> usize {
        self.cache.lock().clients.len()
    }

    /// Drop the cached client of a cluster that is gone (or whose client must be rebuilt).
    pub fn forget(&self, cluster: &ClusterRef) {
        if self.cache.lock().clients.remove(&cluster.key()).is_some() {
            tracing::debug!(cluster = %cluster.id, namespace = %cluster.namespace, "workload-cluster client dropped");
        }
    }

    /// Keep only the cached clients of clusters for which `keep` holds.
    pub fn retain(&self, mut keep: impl FnMut(&ClusterRef) -> bool) {
        self.cache.lock().clients.retain(|_, e| keep(&e.client.cluster));
    }

    /// The client for `cluster`: cached, or built from its Secrets (one GET, and one LIST when
    /// there is no kubeconfig Secret).
    pub async fn client_for(&self, cluster: &ClusterRef) -> Result<WorkloadClient, WorkloadClusterError> {
        {
            let cache = self.cache.lock();
            if let Some(entry) = cache.clients.get(&cluster.key()) {
                let secret = (cluster.namespace.clone(), entry.client.secret.clone());
                let current = cache.seen.get(&secret).is_none_or(|rv| *rv == entry.resource_version);
                if current && entry.client.cluster.api_endpoint == cluster.api_endpoint {
                    return Ok(self.fenced(entry.client.clone()));
                }
            }
        }
        let (client, resource_version) = self.build(cluster).await?;
        tracing::debug!(cluster = %cluster.id, secret = %client.secret, server = %client.server, "workload-cluster client built");
        self.cache.lock().clients.insert(cluster.key(), Entry { client: client.clone(), resource_version });
        Ok(self.fenced(client))
    }

    async fn build(&self, cluster: &ClusterRef) -> Result<(WorkloadClient, String), WorkloadClusterError> {
        let secrets: Api<Secret> = Api::namespaced(self.mc.clone(), &cluster.namespace);
        let management = |source| WorkloadClusterError::Management {
            cluster: cluster.id.clone(),
            namespace: cluster.namespace.clone(),
            source,
        };
        let name = cluster.kubeconfig_secret();
        if let Some(secret) = secrets.get_opt(&name).await.map_err(management)? {
            let invalid = |problem: String| WorkloadClusterError::InvalidSecret {
                cluster: cluster.id.clone(),
                namespace: cluster.namespace.clone(),
                secret: name.clone(),
                problem,
            };
            let kubeconfig = secret_value(&secret, KUBECONFIG_KEY).map_err(&invalid)?;
            let config = config_from_kubeconfig(&kubeconfig).await.map_err(&invalid)?;
            let mut client = self.finish(cluster, &name, config).map_err(invalid)?;
            // The management identity of a kubeconfig issued here: its role may be missing.
            if pki::secret::issued_here(&secret) {
                client.client = RepairingClient::wrap(
                    client.client,
                    self.repair.clone(),
                    cluster.clone(),
                    client.server.clone(),
                    self.fence.clone(),
                );
            }
            return Ok((client, secret.metadata.resource_version.unwrap_or_default()));
        }
        let selector =
            format!("{}={},{}={}", apis::labels::CLUSTER, cluster.id, CERTIFICATE_LABEL, self.options.certificate);
        let found = secrets.list(&ListParams::default().labels(&selector)).await.map_err(management)?;
        let Some(secret) = found.items.into_iter().min_by(|a, b| a.metadata.name.cmp(&b.metadata.name)) else {
            return Err(WorkloadClusterError::NoCredentials {
                cluster: cluster.id.clone(),
                namespace: cluster.namespace.clone(),
                kubeconfig_secret: name,
                certificate: self.options.certificate.clone(),
            });
        };
        let secret_name = secret.metadata.name.clone().unwrap_or_default();
        let invalid = |problem: String| WorkloadClusterError::InvalidSecret {
            cluster: cluster.id.clone(),
            namespace: cluster.namespace.clone(),
            secret: secret_name.clone(),
            problem,
        };
        let certs = CertificateSecret::from_secret(&secret).map_err(&invalid)?;
        let config = config_from_certificates(&cluster.api_endpoint, &certs).await.map_err(&invalid)?;
        let client = self.finish(cluster, &secret_name, config).map_err(invalid)?;
        Ok((client, secret.metadata.resource_version.unwrap_or_default()))
    }

    fn finish(&self, cluster: &ClusterRef, secret: &str, mut config: Config) -> Result<WorkloadClient, String> {
        config.connect_timeout = Some(self.options.connect_timeout);
        config.read_timeout = Some(self.options.request_timeout);
        config.write_timeout = Some(self.options.request_timeout);
        config.reset_reader_on_write = true;
        // kube's built-in retry of 429/503/504 would wait inside the caller (an eviction refused
        // by a disruption budget is a 429): callers retry by requeueing instead.
        config.default_retry = false;
        let server = config.cluster_url.to_string();
        let client = Client::try_from(config).map_err(|e| describe_client_error(&e))?;
        Ok(WorkloadClient { client, cluster: cluster.clone(), secret: secret.to_string(), server })
    }

    /// The workload cluster's client and its Nodes, or `None` when the cluster cannot be
    /// reached (no credentials yet, nothing answering: the normal state of a cluster being
    /// created). A caller judging node health skips its run then: a NotReady node in an
    /// unreachable cluster cannot be told from a network problem. A cluster that refuses the
    /// credentials, or a Secret that gives no client, is an error.
    pub async fn reachable_nodes(
        &self,
        cluster: &ClusterRef,
    ) -> Result<Option<(WorkloadClient, Vec<Node>)>, WorkloadClusterError> {
        let wc = match self.client_for(cluster).await {
            Ok(wc) => wc,
            Err(e) if e.is_not_ready() => {
                tracing::debug!(cluster = %cluster.id, error = %e, "workload cluster not reachable yet");
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
        match Api::<Node>::all(wc.client()).list(&ListParams::default()).await {
            Ok(list) => Ok(Some((wc, list.items))),
            Err(e) => {
                let e = wc.error(e);
                if e.is_not_ready() {
                    tracing::debug!(cluster = %cluster.id, error = %e, "workload cluster not reachable");
                    return Ok(None);
                }
                Err(e)
            }
        }
    }

    /// Follow the management cluster's Secret metadata until `shutdown`, dropping cached clients
    /// whose Secret changed or went away. Without it, cached clients are never rebuilt.
    pub async fn run(self, shutdown: CancellationToken) {
        // Metadata only: Secret data never crosses this watch.
        let api: Api<PartialObjectMeta<Secret>> = Api::all(self.mc.clone());
        let certificate = self.options.certificate.clone();
        let events = watcher::watcher(api, watcher::Config::default()).default_backoff();
        let mut events = std::pin::pin!(events);
        loop {
            let event = tokio::select! {
                () = shutdown.cancelled() => return,
                event = events.next() => event,
            };
            match event {
                None => return,
                Some(Err(error)) => tracing::debug!(%error, "Secret watch failed; retrying"),
                Some(Ok(Event::Apply(meta) | Event::InitApply(meta))) => {
                    self.secret_changed(&meta.metadata, &certificate, false)
                }
                Some(Ok(Event::Delete(meta))) => self.secret_changed(&meta.metadata, &certificate, true),
                Some(Ok(Event::Init | Event::InitDone)) => {}
            }
        }
    }

    fn secret_changed(&self, meta: &ObjectMeta, certificate: &str, deleted: bool) {
        let Some(cluster) = credential_secret_cluster(meta, certificate) else { return };
        let namespace = meta.namespace.clone().unwrap_or_default();
        let name = meta.name.clone().unwrap_or_default();
        let rv = meta.resource_version.clone().unwrap_or_default();
        let mut cache = self.cache.lock();
        let key = (namespace.clone(), cluster);
        let stale = cache.clients.get(&key).is_some_and(|e| deleted || (e.client.secret == name && e.resource_version != rv))
            // A kubeconfig Secret that appears takes precedence over the certificates in use.
            || (name.ends_with("-kubeconfig") && cache.clients.get(&key).is_some_and(|e| e.client.secret != name));
        if deleted {
            cache.seen.remove(&(namespace, name));
        } else {
            cache.seen.insert((namespace, name), rv);
        }
        if stale {
            cache.clients.remove(&key);
            tracing::info!(cluster = %key.1, namespace = %key.0, "workload-cluster Secret changed; the client will be rebuilt");
        }
    }
}

/// The cluster id a credential Secret belongs to, if it is one: `<id>-kubeconfig`, or labelled
/// with the cluster and the configured certificate.
fn credential_secret_cluster(meta: &ObjectMeta, certificate: &str) -> Option<String> {
    let name = meta.name.as_deref()?;
    if let Some(id) = name.strip_suffix("-kubeconfig").filter(|id| !id.is_empty()) {
        return Some(id.to_string());
    }
    let labels = meta.labels.as_ref()?;
    (labels.get(CERTIFICATE_LABEL).map(String::as_str) == Some(certificate))
        .then(|| labels.get(apis::labels::CLUSTER).cloned())
        .flatten()
}

/// The three PEM documents of a cert-operator Secret.
#[derive(Clone, Debug, Default)]
pub struct CertificateSecret {
    /// The cluster CA (`ca`).
    pub ca: Sensitive,
    /// The client certificate (`crt`).
    pub crt: Sensitive,
    /// The client's private key (`key`).
    pub key: Sensitive,
}

impl CertificateSecret {
    /// The keys `ca`, `crt` and `key` of a cert-operator Secret, or which is missing.
    pub fn from_secret(secret: &Secret) -> Result<Self, String> {
        Ok(Self {
            ca: secret_value(secret, "ca")?,
            crt: secret_value(secret, "crt")?,
            key: secret_value(secret, "key")?,
        })
    }
}

/// One key of a Secret, or a message naming the key (never the content).
fn secret_value(secret: &Secret, key: &str) -> Result<Sensitive, String> {
    if let Some(value) = secret.data.as_ref().and_then(|d| d.get(key)) {
        return Ok(Sensitive::new(value.0.clone()));
    }
    if let Some(value) = secret.string_data.as_ref().and_then(|d| d.get(key)) {
        return Ok(Sensitive::new(value.clone().into_bytes()));
    }
    Err(format!("key `{key}` is missing"))
}

/// A client configuration from a kubeconfig Secret value. Refuses what would make the operator
/// read files or run programs named by a Secret.
pub async fn config_from_kubeconfig(value: &Sensitive) -> Result<Config, String> {
    let text = std::str::from_utf8(value.expose()).map_err(|_| format!("key `{KUBECONFIG_KEY}` is not UTF-8 text"))?;
    // serde errors can quote the offending value; report only where the problem is.
    let kubeconfig = Kubeconfig::from_yaml(text).map_err(|_| {
        format!("key `{KUBECONFIG_KEY}` is not a kubeconfig (expected YAML with clusters, users and a current context)")
    })?;
    for auth in kubeconfig.auth_infos.iter().filter_map(|a| a.auth_info.as_ref()) {
        if auth.exec.is_some() || auth.auth_provider.is_some() {
            return Err(
                "the kubeconfig uses an exec or auth-provider plugin; use embedded client certificates or a token"
                    .into(),
            );
        }
        if auth.client_certificate.is_some() || auth.client_key.is_some() || auth.token_file.is_some() {
            return Err(
                "the kubeconfig refers to files; embed the data (client-certificate-data, client-key-data, token)"
                    .into(),
            );
        }
    }
    if kubeconfig.clusters.iter().filter_map(|c| c.cluster.as_ref()).any(|c| c.certificate_authority.is_some()) {
        return Err("the kubeconfig refers to a CA file; embed it as certificate-authority-data".into());
    }
    if kubeconfig.clusters.is_empty() {
        return Err("the kubeconfig names no cluster".into());
    }
    Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| describe_kubeconfig_error(&e))
}

/// A client configuration from cert-operator PEMs and the cluster's API endpoint.
pub async fn config_from_certificates(api_endpoint: &str, certs: &CertificateSecret) -> Result<Config, String> {
    if api_endpoint.trim().is_empty() {
        return Err("the cluster's API endpoint is empty".into());
    }
    let server = if api_endpoint.contains("://") {
        api_endpoint.to_string()
    } else {
        format!("https://{}", api_endpoint.trim())
    };
    for (key, value) in [("ca", &certs.ca), ("crt", &certs.crt), ("key", &certs.key)] {
        if !value.expose().windows(10).any(|w| w == b"-----BEGIN") {
            return Err(format!("key `{key}` is not PEM"));
        }
    }
    let b64 = |s: &Sensitive| base64::engine::general_purpose::STANDARD.encode(s.expose());
    let kubeconfig: Kubeconfig = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "wc", "cluster": {"server": server, "certificate-authority-data": b64(&certs.ca)}}],
        "users": [{"name": "wc", "user": {"client-certificate-data": b64(&certs.crt), "client-key-data": b64(&certs.key)}}],
        "contexts": [{"name": "wc", "context": {"cluster": "wc", "user": "wc"}}],
        "current-context": "wc",
    }))
    .map_err(|_| "the certificates do not form a kubeconfig".to_string())?;
    Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| describe_kubeconfig_error(&e))
}

/// A kubeconfig loading error, by kind only: some variants would carry file content.
fn describe_kubeconfig_error(error: &kube::config::KubeconfigError) -> String {
    use kube::config::KubeconfigError as E;
    match error {
        E::CurrentContextNotSet => "the kubeconfig sets no current context".into(),
        E::LoadContext(name) => format!("the kubeconfig has no context `{name}`"),
        E::LoadClusterOfContext(name) => format!("the kubeconfig has no cluster `{name}`"),
        E::ParseClusterUrl(_) => "the kubeconfig's server is not a URL".into(),
        E::MissingClusterUrl => "the kubeconfig's cluster has no server".into(),
        _ => "the kubeconfig's certificates or credentials cannot be loaded".into(),
    }
}

/// A client construction error (TLS material), by kind only.
fn describe_client_error(error: &kube::Error) -> String {
    match error {
        kube::Error::Auth(_) => "the credentials cannot be loaded".into(),
        _ => "the certificates or key cannot be loaded (not valid PEM, or the key does not match)".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;
    use std::collections::BTreeMap;

    fn secret(name: &str, data: &[(&str, &str)]) -> Secret {
        Secret {
            metadata: ObjectMeta { name: Some(name.into()), namespace: Some("al9qy".into()), ..Default::default() },
            data: Some(data.iter().map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec()))).collect()),
            ..Default::default()
        }
    }

    #[test]
    fn sensitive_bytes_never_print() {
        let s = Sensitive::new(b"-----BEGIN PRIVATE KEY-----abc".to_vec());
        assert_eq!(format!("{s:?}"), "***");
        let certs = CertificateSecret { ca: s.clone(), crt: s.clone(), key: s };
        assert!(!format!("{certs:?}").contains("PRIVATE"));
    }

    #[tokio::test]
    async fn kubeconfig_problems_name_the_problem_not_the_content() {
        let garbage = Sensitive::new(b"clusters: [PRIVATE-KEY-MATERIAL".to_vec());
        let error = config_from_kubeconfig(&garbage).await.unwrap_err();
        assert!(error.contains("not a kubeconfig"), "{error}");
        assert!(!error.contains("PRIVATE"), "{error}");

        let exec = "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://x\nusers:\n- name: u\n  user:\n    exec:\n      command: /bin/sh\n      apiVersion: client.authentication.k8s.io/v1\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\n";
        let error = config_from_kubeconfig(&Sensitive::new(exec.into())).await.unwrap_err();
        assert!(error.contains("exec"), "{error}");

        let no_context = "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: http://127.0.0.1:1\nusers: []\ncontexts: []\n";
        let error = config_from_kubeconfig(&Sensitive::new(no_context.into())).await.unwrap_err();
        assert!(error.contains("context"), "{error}");

        let good = testenv::kubeconfig_yaml("http://127.0.0.1:1");
        let config = config_from_kubeconfig(&Sensitive::new(good.into())).await.unwrap();
        assert_eq!(config.cluster_url.to_string(), "http://127.0.0.1:1/");
    }

    #[tokio::test]
    async fn certificate_secrets_must_hold_pem_and_an_endpoint() {
        let key = Sensitive::new(b"-----BEGIN PRIVATE KEY-----\nnot really\n-----END PRIVATE KEY-----\n".to_vec());
        let certs = CertificateSecret { ca: Sensitive::new(b"junk".to_vec()), crt: key.clone(), key: key.clone() };
        let error = config_from_certificates("api.al9qy.example.com", &certs).await.unwrap_err();
        assert_eq!(error, "key `ca` is not PEM");
        let error = config_from_certificates(" ", &CertificateSecret::default()).await.unwrap_err();
        assert!(error.contains("endpoint"), "{error}");
        // PEM-shaped garbage is refused when the client is built, without quoting it.
        let certs = CertificateSecret { ca: key.clone(), crt: key.clone(), key };
        if let Ok(config) = config_from_certificates("api.al9qy.example.com", &certs).await {
            assert_eq!(config.cluster_url.to_string(), "https://api.al9qy.example.com/");
            if let Err(e) = Client::try_from(config) {
                assert!(!describe_client_error(&e).contains("not really"));
            }
        }
    }

    #[test]
    fn secret_values_name_the_missing_key() {
        let s = secret("al9qy-api", &[("ca", "x"), ("crt", "y")]);
        assert_eq!(secret_value(&s, "key").unwrap_err(), "key `key` is missing");
        assert_eq!(secret_value(&s, "ca").unwrap().expose(), b"x");
    }

    #[test]
    fn credential_secrets_are_recognised_by_name_or_labels() {
        let mut meta = ObjectMeta { name: Some("al9qy-kubeconfig".into()), ..Default::default() };
        assert_eq!(credential_secret_cluster(&meta, "api").as_deref(), Some("al9qy"));
        meta.name = Some("random".into());
        assert_eq!(credential_secret_cluster(&meta, "api"), None);
        meta.labels = Some(BTreeMap::from([
            (apis::labels::CLUSTER.to_string(), "al9qy".to_string()),
            (CERTIFICATE_LABEL.to_string(), "api".to_string()),
        ]));
        assert_eq!(credential_secret_cluster(&meta, "api").as_deref(), Some("al9qy"));
        assert_eq!(credential_secret_cluster(&meta, "worker"), None);
    }

    #[test]
    fn request_failures_are_classified() {
        let config = Config::new("http://127.0.0.1:1".parse().unwrap());
        let wc = WorkloadClient {
            client: tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap()
                .block_on(async { Client::try_from(config).unwrap() }),
            cluster: ClusterRef::new("al9qy", "al9qy", "api.example.com"),
            secret: "al9qy-kubeconfig".into(),
            server: "http://127.0.0.1:1/".into(),
        };
        let status = |code: u16| {
            kube::Error::Api(Box::new(kube::core::Status { code, message: "nope".into(), ..Default::default() }))
        };
        let e = wc.error(status(503));
        assert!(e.is_not_ready(), "{e}");
        let e = wc.error(status(403));
        assert!(!e.is_not_ready());
        assert_eq!(e.reason(), "WorkloadClusterRejected");
        assert!(e.to_string().contains("al9qy-kubeconfig"), "{e}");
    }
}

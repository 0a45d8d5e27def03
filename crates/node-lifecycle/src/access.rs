//! The management identity's access to a workload cluster, granted by the operator where the
//! cluster's masters have not granted it yet.
//!
//! The operators reach a workload cluster with the client certificate of the `<id>-kubeconfig`
//! Secret they issue, for group [`ignition::access::GROUP`]. Each master grants that group its
//! role at boot ([`ignition::access`]). A cluster whose PKI was issued before the management
//! kubeconfig existed gets the kubeconfig at once but the role only when its masters roll; until
//! then every drain and node watch would be refused with 403 and wait for its timeout.
//!
//! So the clients built from an issued kubeconfig carry [`RepairingClient`]: when the workload
//! cluster answers `403 Forbidden` to a request that the role grants ([`granted_by_role`], from
//! the request's method and path, as kube-apiserver derives its authorization attributes), the
//! operator applies the same ClusterRole and ClusterRoleBinding ([`ignition::access::cluster_role`],
//! [`ignition::access::cluster_role_binding`]) by server-side apply with the cluster's `api`
//! certificate, under its own field manager ([`crate::ClientOptions::field_manager`]), and sends
//! the refused request once more with the management identity. The `api` client exists for
//! those two requests only; nothing else runs under it.
//!
//! A cluster is repaired at most once per [`crate::ClientOptions::access_repair_interval`]: a
//! cluster that keeps refusing (a role edited by hand, an admission webhook) gets its 403s, not
//! a loop of applies. Each repair is logged (cluster, namespace, Secret names, outcome; never
//! key material).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use http::{Method, Request, Response, StatusCode};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::client::Body;
use kube::{Client, Config};
use operatorkit::Leadership;
use parking_lot::Mutex;

use crate::clients::{CERTIFICATE_LABEL, CertificateSecret, ClientOptions, ClusterRef, config_from_certificates};

/// Whether the management identity's role grants the request `method` `path_and_query`: its
/// authorization attributes (API group, resource and subresource, verb), derived as
/// kube-apiserver's `RequestInfoFactory` does, match one of [`ignition::access::RULES`].
pub fn granted_by_role(method: &Method, path_and_query: &str) -> bool {
    let (path, query) = path_and_query.split_once('?').unwrap_or((path_and_query, ""));
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, rest) = match segments.as_slice() {
        ["api", _version, rest @ ..] => ("", rest),
        ["apis", group, _version, rest @ ..] => (*group, rest),
        _ => return false,
    };
    let rest = match rest {
        ["namespaces", _namespace, more @ ..] if !more.is_empty() => more,
        other => other,
    };
    let (resource, name, subresource) = match rest {
        [resource] => (*resource, None, None),
        [resource, name] => (*resource, Some(*name), None),
        [resource, name, sub] => (*resource, Some(*name), Some(*sub)),
        _ => return false,
    };
    let watch = query.split('&').any(|kv| kv == "watch=true" || kv == "watch=1");
    let verb = match (method, name) {
        (&Method::GET, _) if watch => "watch",
        (&Method::GET, Some(_)) => "get",
        (&Method::GET, None) => "list",
        (&Method::POST, _) => "create",
        (&Method::PUT, _) => "update",
        (&Method::PATCH, _) => "patch",
        (&Method::DELETE, Some(_)) => "delete",
        _ => return false,
    };
    let resource = match subresource {
        Some(sub) => format!("{resource}/{sub}"),
        None => resource.to_string(),
    };
    ignition::access::RULES
        .iter()
        .any(|(g, resources, verbs)| *g == group && resources.contains(&resource.as_str()) && verbs.contains(&verb))
}

/// Grants the management identity its role in workload clusters, at most once per interval
/// per cluster. Shared by every client of one [`crate::WorkloadClients`].
pub struct AccessRepair {
    mc: Client,
    options: ClientOptions,
    last: Mutex<HashMap<(String, String), Instant>>,
    applied: Mutex<u64>,
}

impl std::fmt::Debug for AccessRepair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccessRepair").field("clusters", &self.last.lock().len()).finish_non_exhaustive()
    }
}

impl AccessRepair {
    /// Repairs through the management-cluster client `mc` (which reads the `api` certificate
    /// Secrets).
    pub fn new(mc: Client, options: ClientOptions) -> Self {
        Self { mc, options, last: Mutex::default(), applied: Mutex::default() }
    }

    /// How many repairs have applied the role (all clusters).
    pub fn applied(&self) -> u64 {
        *self.applied.lock()
    }

    /// Grant the role in `cluster`, whose API server is `server`, unless that was tried within
    /// the interval: whether it was applied now (and the refused request is worth repeating).
    /// The role's writes go through only while `fence` holds (the leadership of the clients'
    /// view that built the refused client).
    pub async fn grant(&self, cluster: &ClusterRef, server: &str, fence: &Leadership) -> bool {
        {
            let mut last = self.last.lock();
            let key = (cluster.namespace.clone(), cluster.id.clone());
            if last.get(&key).is_some_and(|at| at.elapsed() < self.options.access_repair_interval) {
                tracing::debug!(cluster = %cluster.id, "management access refused again; repaired recently, not again");
                return false;
            }
            last.insert(key, Instant::now());
        }
        match self.apply(cluster, server, fence).await {
            Ok(secret) => {
                *self.applied.lock() += 1;
                tracing::info!(
                    cluster = %cluster.id,
                    namespace = %cluster.namespace,
                    secret = %secret,
                    role = ignition::access::CLUSTER_ROLE,
                    field_manager = %self.options.field_manager,
                    "the workload cluster refused the management identity an operation its role grants; applied the role and its binding with the cluster's api certificate"
                );
                true
            }
            Err(problem) => {
                tracing::warn!(
                    cluster = %cluster.id,
                    namespace = %cluster.namespace,
                    %problem,
                    "the workload cluster refuses the management identity, and its role cannot be applied"
                );
                false
            }
        }
    }

    /// Apply the role and its binding with the `api` certificate; the Secret used.
    async fn apply(&self, cluster: &ClusterRef, server: &str, fence: &Leadership) -> Result<String, String> {
        let selector = format!(
            "{}={},{}={}",
            apis::labels::CLUSTER,
            cluster.id,
            CERTIFICATE_LABEL,
            crate::clients::DEFAULT_CERTIFICATE
        );
        let secrets = Api::<Secret>::namespaced(self.mc.clone(), &cluster.namespace)
            .list(&ListParams::default().labels(&selector))
            .await
            .map_err(|e| format!("cannot list the Secrets labelled {selector}: {e}"))?;
        let secret = secrets
            .items
            .into_iter()
            .min_by(|a, b| a.metadata.name.cmp(&b.metadata.name))
            .ok_or_else(|| format!("no Secret labelled {selector} in namespace {}", cluster.namespace))?;
        let name = secret.metadata.name.clone().unwrap_or_default();
        let certs = CertificateSecret::from_secret(&secret).map_err(|p| format!("Secret {name}: {p}"))?;
        let mut config: Config =
            config_from_certificates(server, &certs).await.map_err(|p| format!("Secret {name}: {p}"))?;
        config.connect_timeout = Some(self.options.connect_timeout);
        config.read_timeout = Some(self.options.request_timeout);
        config.write_timeout = Some(self.options.request_timeout);
        let admin = fence.gate(Client::try_from(config).map_err(|e| format!("a client from Secret {name}: {e}"))?);
        let params = PatchParams::apply(&self.options.field_manager).force();
        let role = ignition::access::cluster_role();
        let binding = ignition::access::cluster_role_binding();
        Api::<ClusterRole>::all(admin.clone())
            .patch(ignition::access::CLUSTER_ROLE, &params, &Patch::Apply(&role))
            .await
            .map_err(|e| format!("applying ClusterRole {}: {e}", ignition::access::CLUSTER_ROLE))?;
        Api::<ClusterRoleBinding>::all(admin)
            .patch(ignition::access::CLUSTER_ROLE, &params, &Patch::Apply(&binding))
            .await
            .map_err(|e| format!("applying ClusterRoleBinding {}: {e}", ignition::access::CLUSTER_ROLE))?;
        Ok(name)
    }
}

/// The service of a client built from an issued kubeconfig: a request its role grants that is
/// refused with 403 makes [`AccessRepair::grant`] apply the role, and is then sent once more.
#[derive(Clone)]
pub struct RepairingClient {
    inner: Client,
    repair: Arc<AccessRepair>,
    cluster: ClusterRef,
    server: String,
    fence: Leadership,
}

impl std::fmt::Debug for RepairingClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RepairingClient").field("cluster", &self.cluster.id).field("server", &self.server).finish()
    }
}

impl RepairingClient {
    /// `inner` (the management identity's client of `cluster` at `server`), repaired by `repair`
    /// while `fence` holds.
    pub fn wrap(
        inner: Client,
        repair: Arc<AccessRepair>,
        cluster: ClusterRef,
        server: String,
        fence: Leadership,
    ) -> Client {
        let namespace = inner.default_namespace().to_string();
        Client::new(RepairingClient { inner, repair, cluster, server, fence }, namespace)
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A copy of `request` to send again, when its body can be copied.
fn copy(request: &Request<Body>) -> Option<Request<Body>> {
    let body = request.body().try_clone()?;
    let mut again = Request::builder().method(request.method().clone()).uri(request.uri().clone());
    *again.headers_mut()? = request.headers().clone();
    again.body(body).ok()
}

impl tower_service::Service<Request<Body>> for RepairingClient {
    type Response = Response<Body>;
    type Error = BoxError;
    type Future = futures::future::BoxFuture<'static, Result<Self::Response, BoxError>>;

    fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), BoxError>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let path = request.uri().path_and_query().map(|p| p.as_str().to_string()).unwrap_or_default();
        let again = granted_by_role(request.method(), &path).then(|| copy(&request)).flatten();
        let this = self.clone();
        Box::pin(async move {
            let response = this.inner.send(request).await.map_err(|e| Box::new(e) as BoxError)?;
            if response.status() != StatusCode::FORBIDDEN {
                return Ok(response);
            }
            let Some(again) = again else { return Ok(response) };
            if !this.repair.grant(&this.cluster, &this.server, &this.fence).await {
                return Ok(response);
            }
            this.inner.send(again).await.map_err(|e| Box::new(e) as BoxError)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_requests_the_role_grants_are_those_of_drains_watches_and_health() {
        let granted = [
            (Method::GET, "/api/v1/nodes"),
            (Method::GET, "/api/v1/nodes?watch=true&resourceVersion=7"),
            (Method::GET, "/api/v1/nodes/worker-1"),
            (Method::PATCH, "/api/v1/nodes/worker-1"),
            (Method::DELETE, "/api/v1/nodes/worker-1"),
            (Method::GET, "/api/v1/pods?fieldSelector=spec.nodeName%3Dworker-1"),
            (Method::POST, "/api/v1/namespaces/default/pods/web-1/eviction"),
        ];
        for (method, path) in granted {
            assert!(granted_by_role(&method, path), "{method} {path}");
        }
        let refused = [
            (Method::GET, "/api/v1/namespaces/default/pods/web-1"),
            (Method::DELETE, "/api/v1/namespaces/default/pods/web-1"),
            (Method::GET, "/api/v1/namespaces/kube-system/secrets"),
            (Method::POST, "/api/v1/nodes"),
            (Method::PUT, "/api/v1/nodes/worker-1"),
            (Method::PATCH, "/api/v1/nodes/worker-1/status"),
            (Method::GET, "/apis/apps/v1/nodes"),
            (Method::POST, "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings"),
            (Method::GET, "/version"),
        ];
        for (method, path) in refused {
            assert!(!granted_by_role(&method, path), "{method} {path}");
        }
    }
}

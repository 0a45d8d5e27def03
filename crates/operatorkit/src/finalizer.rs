//! The controller's finalizer: `operatorkit.giantswarm.io/<controller name>`.
//!
//! One finalizer per controller, so several controllers (and operators) can hold one object and
//! each finishes its own deletion. The name is operatorkit's, so Go operators can be replaced in
//! place: objects they hold are released by the Rust controller of the same name.
//!
//! Both writes are JSON patches guarded by the cached object's `resourceVersion`:
//!
//! * add: `test /metadata/resourceVersion`, then `add /metadata/finalizers` (when the list is
//!   absent or empty) or `add /metadata/finalizers/-`;
//! * remove: `test /metadata/resourceVersion`, `test /metadata/finalizers/<i>` = ours, `remove
//!   /metadata/finalizers/<i>`.
//!
//! A concurrent change by anyone (another controller adding or removing its own finalizer)
//! makes the test fail with 422 (or 409) instead of silently dropping their finalizer, which
//! Go's unguarded `replace` of the whole list could do. The controller then requeues at once;
//! by then the watch has usually delivered the newer object to the cache.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// The prefix of every operatorkit finalizer.
pub const FINALIZER_PREFIX: &str = "operatorkit.giantswarm.io/";

/// The finalizer of the controller called `controller`.
pub fn finalizer_name(controller: &str) -> String {
    format!("{FINALIZER_PREFIX}{controller}")
}

/// Whether `meta` carries `finalizer`.
pub fn has_finalizer(meta: &ObjectMeta, finalizer: &str) -> bool {
    meta.finalizers.as_ref().is_some_and(|f| f.iter().any(|x| x == finalizer))
}

/// The JSON patch that adds `finalizer`, or `None` if it is already there.
pub fn add_patch(meta: &ObjectMeta, finalizer: &str) -> Option<Value> {
    if has_finalizer(meta, finalizer) {
        return None;
    }
    let mut ops = guard(meta);
    if meta.finalizers.as_ref().is_none_or(|f| f.is_empty()) {
        ops.push(json!({"op": "add", "path": "/metadata/finalizers", "value": [finalizer]}));
    } else {
        ops.push(json!({"op": "add", "path": "/metadata/finalizers/-", "value": finalizer}));
    }
    Some(Value::Array(ops))
}

/// The JSON patch that removes `finalizer`, or `None` if it is not there.
pub fn remove_patch(meta: &ObjectMeta, finalizer: &str) -> Option<Value> {
    let index = meta.finalizers.as_ref()?.iter().position(|f| f == finalizer)?;
    let path = format!("/metadata/finalizers/{index}");
    let mut ops = guard(meta);
    ops.push(json!({"op": "test", "path": path, "value": finalizer}));
    ops.push(json!({"op": "remove", "path": path}));
    Some(Value::Array(ops))
}

fn guard(meta: &ObjectMeta) -> Vec<Value> {
    match &meta.resource_version {
        Some(rv) => vec![json!({"op": "test", "path": "/metadata/resourceVersion", "value": rv})],
        None => Vec::new(),
    }
}

/// Whether a failed guarded patch lost a race against a newer version of the object (the cache
/// was stale), rather than failing for a reason a retry cannot fix.
pub fn is_stale(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 409 || status.code == 422)
}

/// Send a JSON patch (such as [`add_patch`] or [`remove_patch`] made) to the object `K` named by
/// `meta`: for holding objects other than the controller's own with a finalizer.
pub async fn json_patch<K>(client: &Client, meta: &ObjectMeta, patch: &Value) -> Result<K, kube::Error>
where
    K: kube::Resource<DynamicType = ()> + DeserializeOwned + Clone + std::fmt::Debug,
{
    send_patch(client, meta, None, "application/json-patch+json", patch).await
}

/// Send a patch of `content_type` to the object `K` named by `meta`, or to its `subresource`.
/// Built by hand so it works for namespaced and cluster-scoped kinds alike, which `kube::Api`'s
/// scope-typed constructors cannot do for a generic `K`.
pub(crate) async fn send_patch<K>(
    client: &Client,
    meta: &ObjectMeta,
    subresource: Option<&str>,
    content_type: &str,
    patch: &Value,
) -> Result<K, kube::Error>
where
    K: kube::Resource<DynamicType = ()> + DeserializeOwned + Clone + std::fmt::Debug,
{
    let name = meta.name.as_deref().unwrap_or_default();
    let mut url = format!("{}/{}", K::url_path(&(), meta.namespace.as_deref()), name);
    if let Some(sub) = subresource {
        url.push('/');
        url.push_str(sub);
    }
    let body = serde_json::to_vec(patch).map_err(kube::Error::SerdeError)?;
    let request = http::Request::patch(url)
        .header(http::header::CONTENT_TYPE, content_type)
        .header(http::header::ACCEPT, "application/json")
        .body(body)
        .map_err(kube::Error::HttpError)?;
    client.request::<K>(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(finalizers: Option<&[&str]>) -> ObjectMeta {
        ObjectMeta {
            name: Some("a".into()),
            resource_version: Some("42".into()),
            finalizers: finalizers.map(|f| f.iter().map(|s| s.to_string()).collect()),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn name_is_operatorkit_compatible() {
        assert_eq!(
            finalizer_name("aws-operator-cluster-controller"),
            "operatorkit.giantswarm.io/aws-operator-cluster-controller"
        );
    }

    #[test]
    fn add_creates_the_list_or_appends_after_a_version_test() {
        let f = "operatorkit.giantswarm.io/c";
        assert_eq!(
            add_patch(&meta(None), f).unwrap(),
            json!([
                {"op": "test", "path": "/metadata/resourceVersion", "value": "42"},
                {"op": "add", "path": "/metadata/finalizers", "value": [f]}
            ])
        );
        assert_eq!(
            add_patch(&meta(Some(&[])), f).unwrap()[1],
            json!({"op": "add", "path": "/metadata/finalizers", "value": [f]})
        );
        assert_eq!(
            add_patch(&meta(Some(&["other"])), f).unwrap()[1],
            json!({"op": "add", "path": "/metadata/finalizers/-", "value": f})
        );
        assert_eq!(add_patch(&meta(Some(&["other", f])), f), None);
    }

    #[test]
    fn remove_tests_version_and_value_before_removing_by_index() {
        let f = "operatorkit.giantswarm.io/c";
        assert_eq!(
            remove_patch(&meta(Some(&["x", f, "y"])), f).unwrap(),
            json!([
                {"op": "test", "path": "/metadata/resourceVersion", "value": "42"},
                {"op": "test", "path": "/metadata/finalizers/1", "value": f},
                {"op": "remove", "path": "/metadata/finalizers/1"}
            ])
        );
        assert_eq!(remove_patch(&meta(Some(&["x"])), f), None);
        assert_eq!(remove_patch(&meta(None), f), None);
    }
}

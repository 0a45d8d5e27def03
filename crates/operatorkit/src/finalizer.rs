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

/// [`add_patch`] as the request body, serialised without building a [`Value`] first: the
/// controller adds its finalizer to every new object.
pub(crate) fn add_patch_body(meta: &ObjectMeta, finalizer: &str) -> Option<Vec<u8>> {
    #[derive(serde::Serialize)]
    #[serde(untagged)]
    enum Val<'a> {
        One(&'a str),
        List([&'a str; 1]),
    }
    #[derive(serde::Serialize)]
    struct Op<'a> {
        op: &'a str,
        path: &'a str,
        value: Val<'a>,
    }
    if has_finalizer(meta, finalizer) {
        return None;
    }
    let mut ops = Vec::with_capacity(2);
    if let Some(rv) = &meta.resource_version {
        ops.push(Op { op: "test", path: "/metadata/resourceVersion", value: Val::One(rv) });
    }
    ops.push(if meta.finalizers.as_ref().is_none_or(|f| f.is_empty()) {
        Op { op: "add", path: "/metadata/finalizers", value: Val::List([finalizer]) }
    } else {
        Op { op: "add", path: "/metadata/finalizers/-", value: Val::One(finalizer) }
    });
    serde_json::to_vec(&ops).ok()
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
/// `meta`: for holding objects other than the controller's own with a finalizer. Returns the
/// object as written, without `managedFields`.
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
    let body = serde_json::to_vec(patch).map_err(kube::Error::SerdeError)?;
    send_patch_body(client, meta, subresource, content_type, body).await
}

/// The content type of JSON patches.
pub(crate) const JSON_PATCH: &str = "application/json-patch+json";

/// [`send_patch`] with the body already serialised.
pub(crate) async fn send_patch_body<K>(
    client: &Client,
    meta: &ObjectMeta,
    subresource: Option<&str>,
    content_type: &str,
    body: Vec<u8>,
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
    let request = http::Request::patch(url)
        .header(http::header::CONTENT_TYPE, content_type)
        .header(http::header::ACCEPT, "application/json")
        .body(body)
        .map_err(kube::Error::HttpError)?;
    let text = client.request_text(request).await?;
    let mut obj: K = serde_json::from_str(without_managed_fields(&text).as_ref()).map_err(kube::Error::SerdeError)?;
    obj.meta_mut().managed_fields = None;
    Ok(obj)
}

/// The object `json` without `metadata.managedFields`, which no caller reads (the controller's
/// cache drops them too) and which are most of the cost of parsing a written object: the
/// entries' `fieldsV1` trees become maps of maps. The text is only cut, never rewritten, and
/// anything unexpected leaves it whole (the caller then drops the parsed field).
fn without_managed_fields(json: &str) -> std::borrow::Cow<'_, str> {
    match managed_fields_span(json.as_bytes()) {
        Some((start, end)) => {
            let mut cut = String::with_capacity(json.len() - (end - start));
            cut.push_str(&json[..start]);
            cut.push_str(&json[end..]);
            std::borrow::Cow::Owned(cut)
        }
        None => std::borrow::Cow::Borrowed(json),
    }
}

/// The bytes to remove for `metadata.managedFields` of the object `b`: the member and one
/// comma next to it.
fn managed_fields_span(b: &[u8]) -> Option<(usize, usize)> {
    let mut i = skip_ws(b, 0);
    if b.get(i) != Some(&b'{') {
        return None;
    }
    i += 1;
    loop {
        let (key, value) = member(b, i)?;
        let end = skip_value(b, value)?;
        if &b[key.0..key.1] == b"metadata" {
            return member_span(b, value, b"managedFields");
        }
        i = skip_ws(b, end);
        match b.get(i)? {
            b',' => i += 1,
            _ => return None,
        }
    }
}

/// Within the object starting at `i`, the span of the member called `name`, with a comma.
fn member_span(b: &[u8], i: usize, name: &[u8]) -> Option<(usize, usize)> {
    let mut i = skip_ws(b, i);
    if b.get(i) != Some(&b'{') {
        return None;
    }
    i += 1;
    let mut previous_comma = None;
    loop {
        let start = skip_ws(b, i);
        let (key, value) = member(b, start)?;
        let end = skip_value(b, value)?;
        let after = skip_ws(b, end);
        if &b[key.0..key.1] == name {
            return match (b.get(after)?, previous_comma) {
                // `"managedFields": [..],` : the member and the comma after it.
                (b',', _) => Some((start, after + 1)),
                // The last member: the comma before it.
                (b'}', Some(comma)) => Some((comma, end)),
                (b'}', None) => Some((start, end)),
                _ => None,
            };
        }
        match b.get(after)? {
            b',' => {
                previous_comma = Some(after);
                i = after + 1;
            }
            _ => return None,
        }
    }
}

/// The member starting at `i` (after whitespace): the key's bytes between its quotes, and
/// where its value starts.
fn member(b: &[u8], i: usize) -> Option<((usize, usize), usize)> {
    let i = skip_ws(b, i);
    if b.get(i) != Some(&b'"') {
        return None;
    }
    let end = skip_string(b, i)?;
    let colon = skip_ws(b, end);
    if b.get(colon) != Some(&b':') {
        return None;
    }
    Some(((i + 1, end - 1), skip_ws(b, colon + 1)))
}

fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while b.get(i).is_some_and(|c| matches!(c, b' ' | b'\t' | b'\n' | b'\r')) {
        i += 1;
    }
    i
}

/// The end of the string whose opening quote is at `i`.
fn skip_string(b: &[u8], mut i: usize) -> Option<usize> {
    i += 1;
    loop {
        match b.get(i)? {
            b'\\' => i += 2,
            b'"' => return Some(i + 1),
            _ => i += 1,
        }
    }
}

/// The end of the JSON value starting at `i`.
fn skip_value(b: &[u8], i: usize) -> Option<usize> {
    match b.get(i)? {
        b'"' => skip_string(b, i),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut i = i;
            loop {
                match b.get(i)? {
                    b'"' => {
                        i = skip_string(b, i)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(i + 1);
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
        }
        _ => {
            let mut i = i;
            while b.get(i).is_some_and(|c| !matches!(c, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r')) {
                i += 1;
            }
            Some(i)
        }
    }
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
    fn managed_fields_are_cut_from_written_objects_and_nothing_else() {
        use k8s_openapi::api::core::v1::ConfigMap;
        let managed = r#"[{"manager":"m","operation":"Update","fieldsV1":{"f:data":{".":{},"f:a}":{}}}}]"#;
        let cases = [
            // In the middle, first, last and only member of metadata; odd spacing; strings
            // holding the name, braces and escaped quotes.
            format!(
                r#"{{"kind":"ConfigMap","metadata":{{"name":"a","managedFields":{managed},"resourceVersion":"7"}},"data":{{"managedFields":"}}\"]"}}}}"#
            ),
            format!(r#"{{"metadata":{{"managedFields":{managed},"name":"a"}},"data":{{"k":"v"}}}}"#),
            format!(r#"{{ "metadata" : {{ "name" : "a" , "managedFields" : {managed} }} , "data":{{}}}}"#),
            format!(r#"{{"data":{{"x":"{{\"metadata\":1}}"}},"metadata":{{"managedFields":{managed}}}}}"#),
        ];
        for json in &cases {
            let cut = without_managed_fields(json);
            assert!(matches!(cut, std::borrow::Cow::Owned(_)), "{json}");
            assert!(!cut.contains("\"manager\""), "{cut}");
            let mut expected: serde_json::Value = serde_json::from_str(json).unwrap();
            expected["metadata"].as_object_mut().unwrap().remove("managedFields");
            assert_eq!(serde_json::from_str::<serde_json::Value>(&cut).unwrap(), expected, "{json}");
            let cm: ConfigMap = serde_json::from_str(&cut).unwrap();
            assert!(cm.metadata.managed_fields.is_none());
        }
        // Nothing to cut, or not an object as expected: the text stays as it is.
        for json in [r#"{"metadata":{"name":"a"},"data":{"managedFields":"x"}}"#, "[1]", r#"{"metadata":"#] {
            assert!(matches!(without_managed_fields(json), std::borrow::Cow::Borrowed(_)), "{json}");
        }
    }

    #[test]
    fn the_add_body_is_the_add_patch() {
        let f = "operatorkit.giantswarm.io/c";
        let mut unversioned = meta(Some(&["other"]));
        unversioned.resource_version = None;
        for m in [meta(None), meta(Some(&[])), meta(Some(&["other"])), meta(Some(&["other", f])), unversioned] {
            let body = add_patch_body(&m, f).map(|b| serde_json::from_slice::<Value>(&b).unwrap());
            assert_eq!(body, add_patch(&m, f), "{m:?}");
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

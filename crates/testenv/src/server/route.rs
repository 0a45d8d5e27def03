//! URL paths to routes, as apiserver's `RequestInfoFactory` resolves them.

/// What a path addresses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    /// `/version`
    Version,
    /// `/healthz`, `/livez`, `/readyz` (and their sub-paths)
    Health,
    /// `/api`
    LegacyApiVersions,
    /// `/apis`
    ApiGroups,
    /// `/apis/<group>`
    ApiGroup(String),
    /// `/api/v1` or `/apis/<group>/<version>`
    ApiResources {
        /// Group ("" for core).
        group: String,
        /// Version.
        version: String,
    },
    /// `/openapi/v3`
    OpenApiV3Root,
    /// `/openapi/v3/<api/v1 | apis/g/v>`
    OpenApiV3 {
        /// Group ("" for core).
        group: String,
        /// Version.
        version: String,
    },
    /// `/openapi/v2`
    OpenApiV2,
    /// A resource path.
    Resource(ResourcePath),
    /// Anything else.
    Unknown,
}

/// A resource request path.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ResourcePath {
    /// Group ("" for core).
    pub group: String,
    /// Version.
    pub version: String,
    /// Namespace from `namespaces/<ns>/...`.
    pub namespace: Option<String>,
    /// Plural resource.
    pub resource: String,
    /// Object name.
    pub name: Option<String>,
    /// Subresource (`status`, `scale`, `eviction`, `finalize`, `binding`).
    pub subresource: Option<String>,
    /// The deprecated `/watch/` prefix was used.
    pub watch_prefix: bool,
}

/// Subresources of namespace objects: `/api/v1/namespaces/<name>/<sub>` addresses the namespace
/// itself, not a resource inside it.
const NAMESPACE_SUBRESOURCES: &[&str] = &["status", "finalize"];

/// Resolve a (percent-decoded) path.
pub fn route(path: &str) -> Route {
    let trimmed = path.trim_end_matches('/');
    let parts: Vec<&str> = trimmed.split('/').filter(|s| !s.is_empty()).collect();
    match parts.as_slice() {
        ["version"] => Route::Version,
        ["healthz" | "livez" | "readyz", ..] => Route::Health,
        ["api"] => Route::LegacyApiVersions,
        ["apis"] => Route::ApiGroups,
        ["apis", group] => Route::ApiGroup(group.to_string()),
        ["api", version] => Route::ApiResources { group: String::new(), version: version.to_string() },
        ["apis", group, version] => Route::ApiResources { group: group.to_string(), version: version.to_string() },
        ["openapi", "v3"] => Route::OpenApiV3Root,
        ["openapi", "v3", "api", version] => Route::OpenApiV3 { group: String::new(), version: version.to_string() },
        ["openapi", "v3", "apis", group, version] => {
            Route::OpenApiV3 { group: group.to_string(), version: version.to_string() }
        }
        ["openapi", "v2"] | ["swagger.json"] => Route::OpenApiV2,
        ["api", version, rest @ ..] => resource_route("", version, rest),
        ["apis", group, version, rest @ ..] => resource_route(group, version, rest),
        _ => Route::Unknown,
    }
}

fn resource_route(group: &str, version: &str, rest: &[&str]) -> Route {
    let mut rp = ResourcePath { group: group.to_string(), version: version.to_string(), ..ResourcePath::default() };
    let mut rest = rest;
    if let ["watch", tail @ ..] = rest {
        rp.watch_prefix = true;
        rest = tail;
    }
    if let ["namespaces", ns, tail @ ..] = rest
        && !tail.is_empty()
        && !(tail.len() == 1 && NAMESPACE_SUBRESOURCES.contains(&tail[0]))
    {
        rp.namespace = Some(ns.to_string());
        rest = tail;
    }
    match rest {
        [resource] => rp.resource = resource.to_string(),
        [resource, name] => {
            rp.resource = resource.to_string();
            rp.name = Some(name.to_string());
        }
        [resource, name, sub] => {
            rp.resource = resource.to_string();
            rp.name = Some(name.to_string());
            rp.subresource = Some(sub.to_string());
        }
        _ => return Route::Unknown,
    }
    if rp.resource.is_empty() || rp.name.as_deref() == Some("") {
        return Route::Unknown;
    }
    Route::Resource(rp)
}

/// Percent-decode a path.
pub fn decode_path(raw: &str) -> String {
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2]))
        {
            out.push(h * 16 + l);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(path: &str) -> ResourcePath {
        match route(path) {
            Route::Resource(r) => r,
            other => panic!("{path}: {other:?}"),
        }
    }

    #[test]
    fn core_and_group_paths() {
        let r = res("/api/v1/namespaces/default/configmaps/a");
        assert_eq!(
            (r.group.as_str(), r.namespace.as_deref(), r.resource.as_str(), r.name.as_deref()),
            ("", Some("default"), "configmaps", Some("a"))
        );
        let r = res("/apis/apps/v1/namespaces/x/deployments/d/scale");
        assert_eq!(r.subresource.as_deref(), Some("scale"));
        let r = res("/apis/example.com/v1/foos");
        assert_eq!((r.namespace, r.name), (None, None));
    }

    #[test]
    fn namespace_objects_and_their_subresources() {
        let r = res("/api/v1/namespaces/foo");
        assert_eq!((r.resource.as_str(), r.name.as_deref(), r.namespace), ("namespaces", Some("foo"), None));
        let r = res("/api/v1/namespaces/foo/finalize");
        assert_eq!((r.name.as_deref(), r.subresource.as_deref()), (Some("foo"), Some("finalize")));
        let r = res("/api/v1/namespaces/foo/status");
        assert_eq!((r.name.as_deref(), r.subresource.as_deref()), (Some("foo"), Some("status")));
        let r = res("/api/v1/namespaces/foo/pods");
        assert_eq!((r.namespace.as_deref(), r.resource.as_str()), (Some("foo"), "pods"));
    }

    #[test]
    fn watch_prefix_and_discovery() {
        let r = res("/api/v1/watch/namespaces/a/pods");
        assert!(r.watch_prefix);
        assert_eq!(route("/apis/apps/v1"), Route::ApiResources { group: "apps".into(), version: "v1".into() });
        assert_eq!(route("/api/v1/"), Route::ApiResources { group: "".into(), version: "v1".into() });
        assert_eq!(route("/openapi/v3/apis/apps/v1"), Route::OpenApiV3 { group: "apps".into(), version: "v1".into() });
        assert_eq!(route("/nope"), Route::Unknown);
        assert_eq!(route("/api/v1/a/b/c/d"), Route::Unknown);
    }

    #[test]
    fn percent_decoding() {
        assert_eq!(decode_path("/a%3Ab/%zz%2"), "/a:b/%zz%2");
    }
}

//! Query parameters and Accept negotiation.

use std::collections::HashMap;
use std::time::Duration;

use serde_json::json;

use crate::error::ApiError;
use crate::schema::FieldError;
use crate::selector::{FieldSelector, LabelSelector};
use crate::table::IncludeObject;

/// Decoded query parameters (the last value of a repeated key wins, except where noted).
#[derive(Debug, Default)]
pub struct Query {
    params: HashMap<String, String>,
    dry_run: Vec<String>,
}

impl Query {
    /// Parse a raw query string.
    pub fn parse(raw: Option<&str>) -> Query {
        let mut q = Query::default();
        if let Some(raw) = raw {
            for (k, v) in form_urlencoded::parse(raw.as_bytes()) {
                if k == "dryRun" {
                    q.dry_run.push(v.to_string());
                }
                q.params.insert(k.into_owned(), v.into_owned());
            }
        }
        q
    }

    /// A parameter.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.params.get(key).map(String::as_str)
    }

    /// A boolean parameter (`true`, `1`).
    pub fn flag(&self, key: &str) -> bool {
        matches!(self.get(key), Some("true" | "1" | "True"))
    }

    /// `dryRun`: only `All` is accepted (C11).
    pub fn dry_run(&self, kind: &str) -> Result<bool, ApiError> {
        for v in &self.dry_run {
            if v != "All" {
                return Err(ApiError::invalid_kind(
                    "meta.k8s.io",
                    kind,
                    "",
                    &[FieldError::not_supported("dryRun", json!(v), &["All"])],
                ));
            }
        }
        Ok(!self.dry_run.is_empty())
    }
}

/// List and watch options, validated as apimachinery's `ValidateListOptions` does.
#[derive(Debug)]
pub struct ListOptions {
    /// `labelSelector`.
    pub labels: LabelSelector,
    /// `fieldSelector`.
    pub fields: FieldSelector,
    /// `limit` (0 = none).
    pub limit: Option<usize>,
    /// `continue`.
    pub continue_token: Option<String>,
    /// `resourceVersion`.
    pub resource_version: Option<String>,
    /// `resourceVersionMatch`.
    pub rv_match: Option<String>,
    /// `watch`.
    pub watch: bool,
    /// `allowWatchBookmarks`.
    pub bookmarks: bool,
    /// `sendInitialEvents`.
    pub send_initial_events: Option<bool>,
    /// `timeoutSeconds`.
    pub timeout: Option<Duration>,
    /// `shardSelector` (KEP-5866), set by the server when its feature gate is on.
    pub shard: Option<crate::shard::ShardSelector>,
}

impl ListOptions {
    /// Parse and validate.
    pub fn parse(q: &Query, watch_prefix: bool) -> Result<ListOptions, ApiError> {
        let labels = match q.get("labelSelector") {
            Some(s) if !s.is_empty() => LabelSelector::parse(s)
                .map_err(|e| ApiError::bad_request(format!("unable to parse requirement: {e}")))?,
            _ => LabelSelector::everything(),
        };
        let fields = match q.get("fieldSelector") {
            Some(s) if !s.is_empty() => FieldSelector::parse(s).map_err(ApiError::bad_request)?,
            _ => FieldSelector::everything(),
        };
        let limit = match q.get("limit") {
            Some(s) if !s.is_empty() => {
                let n: i64 = s.parse().map_err(|_| ApiError::bad_request(format!("invalid limit: {s}")))?;
                usize::try_from(n).ok().filter(|n| *n > 0)
            }
            _ => None,
        };
        let timeout = match q.get("timeoutSeconds") {
            Some(s) if !s.is_empty() => {
                let n: i64 = s.parse().map_err(|_| ApiError::bad_request(format!("invalid timeoutSeconds: {s}")))?;
                Some(Duration::from_secs(u64::try_from(n).unwrap_or(0)))
            }
            _ => None,
        };
        let send_initial_events = match q.get("sendInitialEvents") {
            Some("true" | "1") => Some(true),
            Some("false" | "0") => Some(false),
            _ => None,
        };
        let opts = ListOptions {
            labels,
            fields,
            limit,
            continue_token: q.get("continue").filter(|s| !s.is_empty()).map(str::to_string),
            resource_version: q.get("resourceVersion").filter(|s| !s.is_empty()).map(str::to_string),
            rv_match: q.get("resourceVersionMatch").filter(|s| !s.is_empty()).map(str::to_string),
            watch: watch_prefix || q.flag("watch"),
            bookmarks: q.flag("allowWatchBookmarks"),
            send_initial_events,
            timeout,
            shard: None,
        };
        opts.validate()?;
        Ok(opts)
    }

    fn validate(&self) -> Result<(), ApiError> {
        let mut errs = Vec::new();
        let rv = self.resource_version.as_deref();
        if let Some(m) = self.rv_match.as_deref() {
            if self.watch {
                if self.send_initial_events.is_none() {
                    errs.push(FieldError::forbidden(
                        "resourceVersionMatch",
                        "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
                    ));
                }
                if m != "NotOlderThan" {
                    errs.push(FieldError::not_supported("resourceVersionMatch", json!(m), &["NotOlderThan"]));
                }
            } else {
                if rv.is_none() {
                    errs.push(FieldError::forbidden(
                        "resourceVersionMatch",
                        "resourceVersionMatch is forbidden unless resourceVersion is provided",
                    ));
                }
                if self.continue_token.is_some() {
                    errs.push(FieldError::forbidden(
                        "resourceVersionMatch",
                        "resourceVersionMatch is forbidden when continue is provided",
                    ));
                }
                match m {
                    "Exact" if rv == Some("0") => errs.push(FieldError::forbidden(
                        "resourceVersionMatch",
                        "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
                    )),
                    "Exact" | "NotOlderThan" => {}
                    other => errs.push(FieldError::not_supported(
                        "resourceVersionMatch",
                        json!(other),
                        &["Exact", "NotOlderThan"],
                    )),
                }
            }
        }
        if let Some(sie) = self.send_initial_events {
            if !self.watch {
                errs.push(FieldError::forbidden("sendInitialEvents", "sendInitialEvents is forbidden for list"));
            } else {
                if self.rv_match.as_deref() != Some("NotOlderThan") {
                    errs.push(FieldError::forbidden(
                        "resourceVersionMatch",
                        "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
                    ));
                }
                if sie && !self.bookmarks {
                    errs.push(FieldError::forbidden(
                        "allowWatchBookmarks",
                        "sendInitialEvents requires setting allowWatchBookmarks to true",
                    ));
                }
            }
        }
        if !errs.is_empty() {
            return Err(ApiError::invalid_kind("meta.k8s.io", "ListOptions", "", &errs));
        }
        if self.continue_token.is_some() && !self.watch && rv.is_some_and(|r| r != "0") {
            return Err(ApiError::bad_request("specifying resource version is not allowed when using continue"));
        }
        if let Some(rv) = rv
            && rv.parse::<u64>().is_err()
        {
            return Err(ApiError::bad_request(format!("invalid resource version \"{rv}\"")));
        }
        Ok(())
    }
}

/// The representation a client asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// The object itself.
    Json,
    /// `as=Table` (meta.k8s.io v1 or v1beta1).
    Table {
        /// `includeObject`.
        include: IncludeObject,
        /// The Table apiVersion requested.
        v1beta1: bool,
    },
    /// `as=PartialObjectMetadata` (single objects and watch events).
    PartialMeta,
    /// `as=PartialObjectMetadataList`.
    PartialMetaList,
}

impl Format {
    /// The response Content-Type.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Json => "application/json",
            Format::Table { v1beta1: false, .. } => "application/json;as=Table;v=v1;g=meta.k8s.io",
            Format::Table { v1beta1: true, .. } => "application/json;as=Table;v=v1beta1;g=meta.k8s.io",
            Format::PartialMeta => "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io",
            Format::PartialMetaList => "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io",
        }
    }
}

/// One entry of an Accept header.
#[derive(Debug, PartialEq, Eq)]
pub struct MediaType<'a> {
    /// `type/subtype`.
    pub essence: &'a str,
    /// Parameters.
    pub params: Vec<(&'a str, &'a str)>,
}

impl<'a> MediaType<'a> {
    /// A parameter's value.
    pub fn param(&self, k: &str) -> Option<&'a str> {
        self.params.iter().find(|(key, _)| *key == k).map(|(_, v)| *v)
    }
}

/// Split an Accept header into media types, in client order.
pub fn parse_accept(accept: &str) -> Vec<MediaType<'_>> {
    accept
        .split(',')
        .filter_map(|part| {
            let mut pieces = part.split(';').map(str::trim);
            let essence = pieces.next().filter(|e| !e.is_empty())?;
            let params =
                pieces.filter_map(|p| p.split_once('=')).map(|(k, v)| (k.trim(), v.trim().trim_matches('"'))).collect();
            Some(MediaType { essence, params })
        })
        .collect()
}

/// Choose a representation (A6, A7, M2). `list` tells whether a collection is returned.
pub fn negotiate(accept: Option<&str>, list: bool, watch: bool, query: &Query) -> Result<Format, ApiError> {
    let Some(accept) = accept.filter(|a| !a.trim().is_empty()) else { return Ok(Format::Json) };
    let include = match query.get("includeObject") {
        Some("None") => IncludeObject::None,
        Some("Object") => IncludeObject::Object,
        _ => IncludeObject::Metadata,
    };
    for mt in parse_accept(accept) {
        let json_like = matches!(mt.essence, "application/json" | "*/*" | "application/*");
        if !json_like {
            continue;
        }
        match mt.param("as") {
            None => return Ok(Format::Json),
            Some("Table") if mt.param("g") == Some("meta.k8s.io") => {
                return Ok(Format::Table { include, v1beta1: mt.param("v") == Some("v1beta1") });
            }
            // Watch events of a metadata-only watch are PartialObjectMetadata each.
            Some("PartialObjectMetadata") if mt.param("g") == Some("meta.k8s.io") && (!list || watch) => {
                return Ok(Format::PartialMeta);
            }
            Some("PartialObjectMetadataList") if mt.param("g") == Some("meta.k8s.io") && list && !watch => {
                return Ok(Format::PartialMetaList);
            }
            _ => continue,
        }
    }
    Err(ApiError::not_acceptable(format!(
        "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf; requested {accept}"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Query {
        Query::parse(Some(s))
    }

    #[test]
    fn protobuf_first_accept_gets_json() {
        let f = negotiate(Some("application/vnd.kubernetes.protobuf,application/json"), true, false, &q("")).unwrap();
        assert_eq!(f, Format::Json);
    }

    #[test]
    fn table_and_metadata_forms() {
        let f = negotiate(
            Some("application/json;as=Table;v=v1;g=meta.k8s.io,application/json"),
            true,
            false,
            &q("includeObject=Object"),
        )
        .unwrap();
        assert_eq!(f, Format::Table { include: IncludeObject::Object, v1beta1: false });
        let f =
            negotiate(Some("application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"), true, false, &q(""))
                .unwrap();
        assert_eq!(f, Format::PartialMetaList);
        // The list form on a single object is not acceptable.
        let e =
            negotiate(Some("application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"), false, false, &q(""))
                .unwrap_err();
        assert_eq!(e.code, 406);
        assert_eq!(
            negotiate(Some("application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"), true, true, &q(""))
                .unwrap(),
            Format::PartialMeta
        );
    }

    #[test]
    fn list_option_validation() {
        assert_eq!(ListOptions::parse(&q("resourceVersionMatch=Exact"), false).unwrap_err().code, 422);
        assert_eq!(
            ListOptions::parse(&q("resourceVersion=0&resourceVersionMatch=Exact"), false).unwrap_err().code,
            422
        );
        assert_eq!(ListOptions::parse(&q("sendInitialEvents=true"), false).unwrap_err().code, 422);
        assert_eq!(ListOptions::parse(&q("continue=abc&resourceVersion=5"), false).unwrap_err().code, 400);
        assert_eq!(
            ListOptions::parse(&q("watch=true&resourceVersionMatch=NotOlderThan"), false).unwrap_err().code,
            422
        );
        let ok = ListOptions::parse(
            &q("watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true"),
            false,
        )
        .unwrap();
        assert!(ok.watch && ok.bookmarks && ok.send_initial_events == Some(true));
        let ok =
            ListOptions::parse(&q("limit=500&resourceVersion=0&resourceVersionMatch=NotOlderThan"), false).unwrap();
        assert_eq!(ok.limit, Some(500));
        assert_eq!(ListOptions::parse(&q("resourceVersion=abc"), false).unwrap_err().code, 400);
    }

    #[test]
    fn dry_run_accepts_only_all() {
        assert!(q("dryRun=All").dry_run("CreateOptions").unwrap());
        assert!(!q("").dry_run("CreateOptions").unwrap());
        assert_eq!(q("dryRun=Some").dry_run("CreateOptions").unwrap_err().code, 422);
    }
}

//! Request counters, per verb and resource, that tests and benchmarks read from the handle.

use std::collections::BTreeMap;
use std::fmt;

use parking_lot::Mutex;

/// The Kubernetes API verbs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Verb {
    /// GET of one object (or subresource).
    Get,
    /// GET of a collection.
    List,
    /// GET of a collection with `watch=true`.
    Watch,
    /// POST.
    Create,
    /// PUT.
    Update,
    /// PATCH.
    Patch,
    /// DELETE of one object.
    Delete,
    /// DELETE of a collection.
    DeleteCollection,
}

impl Verb {
    /// The name kube-apiserver uses (audit logs, RBAC).
    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Watch => "watch",
            Verb::Create => "create",
            Verb::Update => "update",
            Verb::Patch => "patch",
            Verb::Delete => "delete",
            Verb::DeleteCollection => "deletecollection",
        }
    }

    /// Whether the verb changes state.
    pub fn is_write(self) -> bool {
        matches!(self, Verb::Create | Verb::Update | Verb::Patch | Verb::Delete | Verb::DeleteCollection)
    }
}

impl fmt::Display for Verb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A snapshot of the request counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestCounts {
    /// Requests per (verb, qualified resource), e.g. (Patch, "configmaps").
    pub by_resource: BTreeMap<(Verb, String), u64>,
    /// Requests to non-resource paths (discovery, OpenAPI, version).
    pub other: u64,
}

impl RequestCounts {
    /// Requests of `verb` over all resources.
    pub fn verb(&self, verb: Verb) -> u64 {
        self.by_resource.iter().filter(|((v, _), _)| *v == verb).map(|(_, n)| n).sum()
    }

    /// Requests of `verb` on `resource`.
    pub fn get(&self, verb: Verb, resource: &str) -> u64 {
        self.by_resource.get(&(verb, resource.to_string())).copied().unwrap_or(0)
    }

    /// All writes.
    pub fn writes(&self) -> u64 {
        self.by_resource.iter().filter(|((v, _), _)| v.is_write()).map(|(_, n)| n).sum()
    }

    /// All resource requests.
    pub fn total(&self) -> u64 {
        self.by_resource.values().sum()
    }

    /// The difference to an earlier snapshot.
    pub fn since(&self, earlier: &RequestCounts) -> RequestCounts {
        let by_resource = self
            .by_resource
            .iter()
            .map(|(k, v)| (k.clone(), v - earlier.by_resource.get(k).copied().unwrap_or(0)))
            .filter(|(_, v)| *v > 0)
            .collect();
        RequestCounts { by_resource, other: self.other - earlier.other }
    }
}

/// Live counters.
#[derive(Debug, Default)]
pub struct Counters {
    inner: Mutex<RequestCounts>,
}

impl Counters {
    pub(crate) fn count(&self, verb: Verb, resource: &str) {
        *self.inner.lock().by_resource.entry((verb, resource.to_string())).or_default() += 1;
    }

    pub(crate) fn count_other(&self) {
        self.inner.lock().other += 1;
    }

    /// A snapshot.
    pub fn snapshot(&self) -> RequestCounts {
        self.inner.lock().clone()
    }

    /// Reset to zero.
    pub fn reset(&self) {
        *self.inner.lock() = RequestCounts::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_differences() {
        let c = Counters::default();
        c.count(Verb::Create, "configmaps");
        let before = c.snapshot();
        c.count(Verb::Create, "configmaps");
        c.count(Verb::Get, "pods");
        let after = c.snapshot();
        assert_eq!(after.get(Verb::Create, "configmaps"), 2);
        assert_eq!(after.writes(), 2);
        let d = after.since(&before);
        assert_eq!(d.total(), 2);
        assert_eq!(d.verb(Verb::Get), 1);
    }
}

//! Fault injection for tests: make the next requests that match fail, slow them down, or cut
//! open watches.

use std::time::Duration;

use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use crate::metrics::Verb;

/// Which requests a rule applies to. `None` fields match anything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestMatch {
    /// The verb.
    pub verb: Option<Verb>,
    /// The plural resource name (`configmaps`), optionally qualified by group (`deployments.apps`).
    pub resource: Option<String>,
    /// The namespace.
    pub namespace: Option<String>,
    /// The object name.
    pub name: Option<String>,
    /// The authenticated user's name (authentication on), e.g. one replica's static user: to
    /// cut one client off while the others go on.
    pub user: Option<String>,
}

impl RequestMatch {
    /// Requests of `verb` on `resource`.
    pub fn new(verb: Verb, resource: &str) -> RequestMatch {
        RequestMatch { verb: Some(verb), resource: Some(resource.to_string()), ..RequestMatch::default() }
    }

    /// Any verb on `resource`.
    pub fn resource(resource: &str) -> RequestMatch {
        RequestMatch { resource: Some(resource.to_string()), ..RequestMatch::default() }
    }

    /// Also require this object name.
    pub fn named(mut self, name: &str) -> RequestMatch {
        self.name = Some(name.to_string());
        self
    }

    /// Requests of the authenticated user `user`, whatever they ask.
    pub fn user(user: &str) -> RequestMatch {
        RequestMatch { user: Some(user.to_string()), ..RequestMatch::default() }
    }

    /// Also require this namespace.
    pub fn in_namespace(mut self, namespace: &str) -> RequestMatch {
        self.namespace = Some(namespace.to_string());
        self
    }

    pub(crate) fn matches(&self, req: &RequestInfo<'_>) -> bool {
        self.verb.is_none_or(|v| v == req.verb)
            && self.resource.as_deref().is_none_or(|r| r == req.plural || r == req.qualified)
            && self.namespace.as_deref().is_none_or(|n| Some(n) == req.namespace)
            && self.name.as_deref().is_none_or(|n| Some(n) == req.name)
            && self.user.as_deref().is_none_or(|u| Some(u) == req.user)
    }
}

/// What the fault layer knows of a request.
#[derive(Debug)]
pub(crate) struct RequestInfo<'a> {
    pub verb: Verb,
    pub plural: &'a str,
    pub qualified: &'a str,
    pub namespace: Option<&'a str>,
    pub name: Option<&'a str>,
    pub user: Option<&'a str>,
}

#[derive(Debug)]
struct FailRule {
    matcher: RequestMatch,
    remaining: usize,
    status: u16,
}

#[derive(Debug)]
struct DelayRule {
    matcher: RequestMatch,
    delay: Duration,
    remaining: Option<usize>,
}

#[derive(Debug)]
struct OpenWatch {
    plural: String,
    qualified: String,
    user: Option<String>,
    token: CancellationToken,
}

/// The fault injection state of one server.
#[derive(Debug, Default)]
pub struct Faults {
    fails: Mutex<Vec<FailRule>>,
    delays: Mutex<Vec<DelayRule>>,
    watches: Mutex<Vec<OpenWatch>>,
}

impl Faults {
    /// Fail the next `count` requests that match with HTTP `status` (and the reason kube-apiserver
    /// uses for it, e.g. 409 Conflict, 429 TooManyRequests, 500 InternalError).
    pub fn fail_next(&self, matcher: RequestMatch, count: usize, status: u16) {
        self.fails.lock().push(FailRule { matcher, remaining: count, status });
    }

    /// Delay matching requests by `delay`; `count` limits how many (`None`: until cleared).
    pub fn delay(&self, matcher: RequestMatch, delay: Duration, count: Option<usize>) {
        self.delays.lock().push(DelayRule { matcher, delay, remaining: count });
    }

    /// Remove every failure and delay rule.
    pub fn clear(&self) {
        self.fails.lock().clear();
        self.delays.lock().clear();
    }

    /// End every open watch on `resource` (plural or qualified; `None`: all) cleanly, as a
    /// server restart or load balancer would. Returns how many were closed.
    pub fn close_watches(&self, resource: Option<&str>) -> usize {
        let mut watches = self.watches.lock();
        watches.retain(|w| !w.token.is_cancelled());
        let mut n = 0;
        for w in watches.iter() {
            if resource.is_none_or(|r| r == w.plural || r == w.qualified) {
                w.token.cancel();
                n += 1;
            }
        }
        n
    }

    /// Cut the user `user` off from the server, as a network partition would: every request it
    /// makes fails with `503 ServiceUnavailable` and its open watches end, until [`heal`]ed.
    /// The user must be authenticated (a static token, say), so the server knows who asks.
    ///
    /// [`heal`]: Self::heal
    pub fn partition(&self, user: &str) {
        self.fail_next(RequestMatch::user(user), usize::MAX, 503);
        let mut watches = self.watches.lock();
        watches.retain(|w| !w.token.is_cancelled());
        for w in watches.iter().filter(|w| w.user.as_deref() == Some(user)) {
            w.token.cancel();
        }
    }

    /// End a [`partition`](Self::partition) of `user`: its requests are served again.
    pub fn heal(&self, user: &str) {
        self.fails.lock().retain(|r| r.matcher != RequestMatch::user(user));
    }

    /// Number of watches currently open.
    pub fn open_watches(&self) -> usize {
        let mut watches = self.watches.lock();
        watches.retain(|w| !w.token.is_cancelled());
        watches.len()
    }

    pub(crate) fn register_watch(&self, plural: &str, qualified: &str, user: Option<&str>, token: CancellationToken) {
        let mut watches = self.watches.lock();
        watches.retain(|w| !w.token.is_cancelled());
        watches.push(OpenWatch {
            plural: plural.to_string(),
            qualified: qualified.to_string(),
            user: user.map(str::to_string),
            token,
        });
    }

    /// The injected failure status for this request, consuming one use of the rule.
    pub(crate) fn take_failure(&self, req: &RequestInfo<'_>) -> Option<u16> {
        let mut fails = self.fails.lock();
        let rule = fails.iter_mut().find(|r| r.remaining > 0 && r.matcher.matches(req))?;
        rule.remaining -= 1;
        let status = rule.status;
        fails.retain(|r| r.remaining > 0);
        Some(status)
    }

    /// The injected delay for this request.
    pub(crate) fn take_delay(&self, req: &RequestInfo<'_>) -> Option<Duration> {
        let mut delays = self.delays.lock();
        let rule = delays.iter_mut().find(|r| r.remaining != Some(0) && r.matcher.matches(req))?;
        if let Some(n) = &mut rule.remaining {
            *n -= 1;
        }
        let delay = rule.delay;
        delays.retain(|r| r.remaining != Some(0));
        Some(delay)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(verb: Verb) -> RequestInfo<'static> {
        RequestInfo {
            verb,
            plural: "configmaps",
            qualified: "configmaps",
            namespace: Some("default"),
            name: Some("a"),
            user: Some("replica-a"),
        }
    }

    #[test]
    fn failures_are_consumed_in_order() {
        let f = Faults::default();
        f.fail_next(RequestMatch::new(Verb::Update, "configmaps"), 2, 500);
        assert_eq!(f.take_failure(&info(Verb::Get)), None);
        assert_eq!(f.take_failure(&info(Verb::Update)), Some(500));
        assert_eq!(f.take_failure(&info(Verb::Update)), Some(500));
        assert_eq!(f.take_failure(&info(Verb::Update)), None);
    }

    #[test]
    fn matchers_narrow_by_name_and_namespace() {
        let f = Faults::default();
        f.fail_next(RequestMatch::resource("configmaps").named("b"), 1, 409);
        assert_eq!(f.take_failure(&info(Verb::Get)), None);
        f.fail_next(RequestMatch::resource("configmaps").in_namespace("default"), 1, 409);
        assert_eq!(f.take_failure(&info(Verb::Get)), Some(409));
    }

    #[test]
    fn close_watches_cancels_matching_tokens() {
        let f = Faults::default();
        let a = CancellationToken::new();
        let b = CancellationToken::new();
        f.register_watch("configmaps", "configmaps", None, a.clone());
        f.register_watch("deployments", "deployments.apps", None, b.clone());
        assert_eq!(f.close_watches(Some("deployments.apps")), 1);
        assert!(b.is_cancelled() && !a.is_cancelled());
        assert_eq!(f.open_watches(), 1);
    }

    #[test]
    fn a_partition_cuts_off_one_user_until_healed() {
        let f = Faults::default();
        let own = CancellationToken::new();
        let other = CancellationToken::new();
        f.register_watch("configmaps", "configmaps", Some("replica-a"), own.clone());
        f.register_watch("configmaps", "configmaps", Some("replica-b"), other.clone());
        f.partition("replica-a");
        assert!(own.is_cancelled() && !other.is_cancelled());
        for _ in 0..1000 {
            assert_eq!(f.take_failure(&info(Verb::Get)), Some(503));
        }
        let other_user = RequestInfo { user: Some("replica-b"), ..info(Verb::Get) };
        assert_eq!(f.take_failure(&other_user), None);
        f.heal("replica-a");
        assert_eq!(f.take_failure(&info(Verb::Get)), None);
    }
}

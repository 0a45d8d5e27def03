//! The pure part of a drain: which pods to evict, what to do next given the recorded progress,
//! and how long to back off. No I/O and no clock: the caller passes `now`, so every decision is
//! unit-tested from fixtures.

use std::collections::HashSet;
use std::time::Duration;

use apis::drainer::{BlockedPod, DrainPod, DrainerConfigStatus};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// The annotation the kubelet puts on mirror pods of static pods.
pub const MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";
/// Pods of this namespace go last, as node-operator did: the cluster's own services (DNS,
/// networking) keep serving the workloads that are still being moved.
pub const SYSTEM_NAMESPACE: &str = "kube-system";

/// What a drain does with a pod on the node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Disposition {
    /// Evict it.
    Evict,
    /// Leave it: a DaemonSet would start it again on the same node.
    SkipDaemonSet,
    /// Leave it: a mirror pod of a static pod cannot be evicted.
    SkipMirror,
}

/// Whether a drain evicts `pod`.
pub fn disposition(pod: &Pod) -> Disposition {
    let meta = &pod.metadata;
    if meta.annotations.as_ref().is_some_and(|a| a.contains_key(MIRROR_ANNOTATION)) {
        return Disposition::SkipMirror;
    }
    let daemon = meta.owner_references.iter().flatten().any(|o| o.kind == "DaemonSet" && o.controller == Some(true));
    if daemon { Disposition::SkipDaemonSet } else { Disposition::Evict }
}

/// A pod that the drain must see go, as observed on the node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodePod {
    /// The pod.
    pub pod: DrainPod,
    /// Whether it has a deletionTimestamp already.
    pub deleting: bool,
}

impl NodePod {
    /// The evictable pods of a pod list (DaemonSet and mirror pods left out).
    pub fn evictable(pods: &[Pod]) -> Vec<NodePod> {
        pods.iter()
            .filter(|p| disposition(p) == Disposition::Evict)
            .map(|p| NodePod {
                pod: DrainPod {
                    namespace: p.metadata.namespace.clone().unwrap_or_default(),
                    name: p.metadata.name.clone().unwrap_or_default(),
                    uid: p.metadata.uid.clone().unwrap_or_default(),
                },
                deleting: p.metadata.deletion_timestamp.is_some(),
            })
            .collect()
    }
}

/// Exponential backoff for refused evictions, with a per-pod jitter so that many drains refused
/// by one budget do not retry in lockstep.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backoff {
    /// The delay after the first refusal.
    pub initial: Duration,
    /// The longest delay.
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self { initial: Duration::from_secs(1), max: Duration::from_secs(30) }
    }
}

impl Backoff {
    /// The delay after `attempts` refusals (≥ 1) of the pod with `uid`: `initial × 2^(n-1)`
    /// capped at `max`, plus up to 25 % jitter derived from the UID (deterministic, so tests
    /// can rely on it).
    pub fn delay(&self, attempts: u32, uid: &str) -> Duration {
        let exponent = attempts.saturating_sub(1).min(20);
        let base = self.initial.saturating_mul(1u32 << exponent).min(self.max);
        // FNV-1a of the UID picks a jitter of 0–25 %.
        let hash = uid.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
        let jitter = base.mul_f64((hash % 1000) as f64 / 4000.0);
        base + jitter
    }
}

/// How a drain proceeds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// At most this many evictions at once per node.
    pub per_node: usize,
    /// How soon to look again while pods are terminating.
    pub poll: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self { per_node: 5, poll: Duration::from_secs(1) }
    }
}

/// The next step of a drain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// No evictable pod is left on the node: the drain is done.
    pub done: bool,
    /// Pods with an accepted eviction (or deleting anyway) that still exist.
    pub terminating: Vec<DrainPod>,
    /// Refused pods that still exist and are not deleting.
    pub blocked: Vec<BlockedPod>,
    /// Pods to evict now, at most [`Limits::per_node`].
    pub evict: Vec<DrainPod>,
    /// When to look again if nothing else happens.
    pub requeue: Duration,
}

/// Decide the next step from the recorded progress and the evictable pods now on the node.
/// A recorded pod is gone when no pod with its UID exists.
pub fn plan(status: &DrainerConfigStatus, pods: &[NodePod], now: Timestamp, limits: Limits) -> Plan {
    let existing: HashSet<&str> = pods.iter().map(|p| p.pod.uid.as_str()).collect();
    let mut terminating: Vec<DrainPod> =
        status.terminating_pods.iter().filter(|p| existing.contains(p.uid.as_str())).cloned().collect();
    for p in pods.iter().filter(|p| p.deleting) {
        if !terminating.iter().any(|t| t.uid == p.pod.uid) {
            terminating.push(p.pod.clone());
        }
    }
    let terminating_uids: HashSet<String> = terminating.iter().map(|p| p.uid.clone()).collect();
    let blocked: Vec<BlockedPod> = status
        .blocked_pods
        .iter()
        .filter(|b| existing.contains(b.pod.uid.as_str()) && !terminating_uids.contains(&b.pod.uid))
        .cloned()
        .collect();
    let waiting: Vec<&NodePod> = pods.iter().filter(|p| !terminating_uids.contains(&p.pod.uid)).collect();
    if waiting.is_empty() && terminating.is_empty() {
        return Plan { done: true, terminating, blocked, evict: Vec::new(), requeue: Duration::ZERO };
    }
    let retry_at = |uid: &str| blocked.iter().find(|b| b.pod.uid == uid).map(|b| b.retry_at.0);
    let system_only = waiting.iter().all(|p| p.pod.namespace == SYSTEM_NAMESPACE);
    let mut eligible: Vec<&DrainPod> = waiting
        .iter()
        .filter(|p| system_only || p.pod.namespace != SYSTEM_NAMESPACE)
        .filter(|p| retry_at(&p.pod.uid).is_none_or(|at| at <= now))
        .map(|p| &p.pod)
        .collect();
    // Ordered by a hash of the pod's UID, not by name: drains of many nodes at once would all
    // try the same workloads first (their pods share names' prefixes), use up those workloads'
    // disruption budgets and leave the other budgets idle. A stable order per pod keeps each
    // node's attempts deterministic.
    eligible.sort_by_key(|p| (spread(&p.uid), p.namespace.clone(), p.name.clone()));
    // Slow start: one eviction on a node's first step, then one more per pod evicted, up to
    // the per-node limit. Many drains at once share the workloads' disruption budgets: a node
    // reconciled early would otherwise take `per_node` of them before the others had one.
    let cap = limits.per_node.min(1 + status.evicted_pods as usize).max(1);
    let evict: Vec<DrainPod> = eligible.into_iter().take(cap).cloned().collect();

    let next_retry = blocked
        .iter()
        .filter(|b| !evict.iter().any(|e| e.uid == b.pod.uid))
        .map(|b| duration_until(now, b.retry_at.0))
        .min();
    let requeue = if !evict.is_empty() || !terminating.is_empty() {
        next_retry.map_or(limits.poll, |r| r.min(limits.poll))
    } else {
        next_retry.unwrap_or(limits.poll)
    };
    Plan { done: false, terminating, blocked, evict, requeue: requeue.max(Duration::from_millis(50)) }
}

/// A stable, well-mixed rank of a pod UID (SipHash with fixed keys).
fn spread(uid: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    uid.hash(&mut h);
    h.finish()
}

/// How an eviction request ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EvictionResult {
    /// 201: the pod is being deleted.
    Evicted,
    /// 404: the pod was gone already.
    Gone,
    /// 429 (a disruption budget), 5xx, or another refusal: tried again after a backoff.
    Refused {
        /// The HTTP status (0 for transport failures).
        code: u16,
        /// The API server's message.
        message: String,
    },
}

impl EvictionResult {
    /// The `result` label of the evictions metric.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Evicted => "evicted",
            Self::Gone => "gone",
            Self::Refused { code: 429, .. } => "disruption_budget",
            Self::Refused { code, .. } if *code >= 500 || *code == 0 => "error",
            Self::Refused { .. } => "refused",
        }
    }
}

/// Record eviction results in the status: accepted pods become terminating, refused ones get
/// their next attempt time.
pub fn record(
    status: &mut DrainerConfigStatus,
    plan: &Plan,
    results: &[(DrainPod, EvictionResult)],
    now: Timestamp,
    backoff: Backoff,
) {
    status.terminating_pods = plan.terminating.clone();
    status.blocked_pods = plan.blocked.clone();
    for (pod, result) in results {
        match result {
            EvictionResult::Evicted => {
                status.blocked_pods.retain(|b| b.pod.uid != pod.uid);
                status.terminating_pods.push(pod.clone());
                status.evicted_pods = status.evicted_pods.saturating_add(1);
            }
            EvictionResult::Gone => status.blocked_pods.retain(|b| b.pod.uid != pod.uid),
            EvictionResult::Refused { code, message } => {
                let attempts = status.blocked_pods.iter().find(|b| b.pod.uid == pod.uid).map_or(0, |b| b.attempts) + 1;
                let retry_at = now.checked_add(backoff.delay(attempts, &pod.uid)).unwrap_or(now);
                let reason = if message.is_empty() { format!("eviction refused with {code}") } else { message.clone() };
                status.blocked_pods.retain(|b| b.pod.uid != pod.uid);
                status.blocked_pods.push(BlockedPod { pod: pod.clone(), reason, attempts, retry_at: Time(retry_at) });
            }
        }
    }
    status.terminating_pods.sort();
    status.blocked_pods.sort_by(|a, b| a.pod.cmp(&b.pod));
}

/// The timeout of a drain from its annotation value (`90s`, `10m`, `1h30m`), or why it is not one.
pub fn parse_timeout(value: &str) -> Result<Duration, String> {
    let value = value.trim();
    let mut total = Duration::ZERO;
    let mut number = String::new();
    let mut any = false;
    for c in value.chars() {
        if c.is_ascii_digit() {
            number.push(c);
            continue;
        }
        let n: u64 = number.parse().map_err(|_| format!("`{value}` is not a duration such as 90s, 10m or 1h"))?;
        number.clear();
        total += match c {
            's' => Duration::from_secs(n),
            'm' => Duration::from_secs(n * 60),
            'h' => Duration::from_secs(n * 3600),
            _ => return Err(format!("`{value}` is not a duration such as 90s, 10m or 1h")),
        };
        any = true;
    }
    if !number.is_empty() || !any || total.is_zero() {
        return Err(format!("`{value}` is not a positive duration such as 90s, 10m or 1h"));
    }
    Ok(total)
}

/// A summary of the pods a timed-out drain left, for its message.
pub fn describe_blocked(status: &DrainerConfigStatus) -> String {
    let mut names: Vec<String> = status
        .blocked_pods
        .iter()
        .map(|b| format!("{}/{} ({})", b.pod.namespace, b.pod.name, b.reason))
        .chain(status.terminating_pods.iter().map(|p| format!("{}/{} (terminating)", p.namespace, p.name)))
        .collect();
    let total = names.len();
    names.truncate(10);
    let more = if total > 10 { format!(" and {} more", total - 10) } else { String::new() };
    if names.is_empty() { "no pod was left".into() } else { format!("pods left: {}{more}", names.join(", ")) }
}

fn duration_until(now: Timestamp, at: Timestamp) -> Duration {
    Duration::try_from(at.duration_since(now)).unwrap_or(Duration::ZERO)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(value: serde_json::Value) -> Pod {
        serde_json::from_value(value).unwrap()
    }

    fn dp(ns: &str, name: &str) -> DrainPod {
        DrainPod { namespace: ns.into(), name: name.into(), uid: format!("uid-{ns}-{name}") }
    }

    fn on_node(pods: &[DrainPod]) -> Vec<NodePod> {
        pods.iter().map(|p| NodePod { pod: p.clone(), deleting: false }).collect()
    }

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + secs).unwrap()
    }

    #[test]
    fn daemonset_and_mirror_pods_are_skipped() {
        let ds = pod(json!({"metadata": {"name": "cilium-x", "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "cilium", "uid": "1", "controller": true}]}}));
        let mirror = pod(json!({"metadata": {"name": "kube-apiserver-n1", "annotations": {MIRROR_ANNOTATION: "abc"}}}));
        let rs = pod(json!({"metadata": {"name": "web-1", "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "2", "controller": true}]}}));
        let bare = pod(json!({"metadata": {"name": "bare"}}));
        assert_eq!(disposition(&ds), Disposition::SkipDaemonSet);
        assert_eq!(disposition(&mirror), Disposition::SkipMirror);
        assert_eq!(disposition(&rs), Disposition::Evict);
        assert_eq!(disposition(&bare), Disposition::Evict);
        assert_eq!(NodePod::evictable(&[ds, mirror, rs, bare]).len(), 2);
    }

    #[test]
    fn nodes_draining_at_once_start_with_different_workloads() {
        // 20 nodes, each with one pod of each of 20 workloads named alike on every node: the
        // first pod each node tries is spread over the workloads, not the same one everywhere.
        let limits = Limits { per_node: 1, poll: Duration::from_secs(1) };
        let mut first = HashSet::new();
        for node in 0..20 {
            let pods: Vec<DrainPod> = (0..20)
                .map(|w| DrainPod {
                    namespace: "web".into(),
                    name: format!("workload-{w:02}-pod"),
                    uid: format!("uid-node{node}-workload{w}"),
                })
                .collect();
            let p = plan(&DrainerConfigStatus::default(), &on_node(&pods), at(0), limits);
            first.insert(p.evict[0].name.clone());
        }
        assert!(first.len() >= 8, "20 nodes start with only {} distinct workloads: {first:?}", first.len());
    }

    #[test]
    fn an_empty_node_is_drained() {
        let p = plan(&DrainerConfigStatus::default(), &[], at(0), Limits::default());
        assert!(p.done);
    }

    #[test]
    fn evicts_at_most_per_node_and_workloads_before_kube_system() {
        let pods = [dp("kube-system", "coredns"), dp("web", "b"), dp("web", "a"), dp("api", "z")];
        let limits = Limits { per_node: 2, poll: Duration::from_secs(1) };
        // Slow start: one on the first step, then up to the limit once a pod was evicted.
        let first = plan(&DrainerConfigStatus::default(), &on_node(&pods), at(0), limits);
        assert_eq!(first.evict.len(), 1, "{:?}", first.evict);
        let started = DrainerConfigStatus { evicted_pods: 1, ..Default::default() };
        let p = plan(&started, &on_node(&pods), at(0), limits);
        assert!(!p.done);
        assert_eq!(p.evict.len(), 2, "{:?}", p.evict);
        assert!(p.evict.iter().all(|e| e.namespace != "kube-system"), "{:?}", p.evict);
        let ramped = DrainerConfigStatus { evicted_pods: 7, ..Default::default() };
        assert_eq!(plan(&ramped, &on_node(&pods), at(0), limits).evict.len(), 2, "never over the limit");
        // The same pods are picked in the same order every time (a stable order per pod).
        let again = plan(&started, &on_node(&pods), at(0), limits);
        assert_eq!(again.evict, p.evict);
        // Once only kube-system is left, it goes too.
        let p = plan(&DrainerConfigStatus::default(), &on_node(&pods[..1]), at(0), limits);
        assert_eq!(p.evict, [dp("kube-system", "coredns")]);
    }

    #[test]
    fn a_pod_is_gone_when_its_uid_is_gone() {
        let mut status = DrainerConfigStatus { terminating_pods: vec![dp("web", "a")], ..Default::default() };
        // The same name with a new UID is a new pod (a StatefulSet's replacement): not terminating.
        let replacement = DrainPod { uid: "new".into(), ..dp("web", "a") };
        let p = plan(&status, &on_node(std::slice::from_ref(&replacement)), at(0), Limits::default());
        assert!(p.terminating.is_empty());
        assert_eq!(p.evict, [replacement]);
        // The old UID still there: wait, evict nothing else, look again after the poll interval.
        let p = plan(&status, &on_node(&[dp("web", "a")]), at(0), Limits::default());
        assert_eq!(p.terminating, [dp("web", "a")]);
        assert!(p.evict.is_empty());
        assert_eq!(p.requeue, Limits::default().poll);
        status.terminating_pods.clear();
        let deleting = [NodePod { pod: dp("web", "a"), deleting: true }];
        let p = plan(&status, &deleting, at(0), Limits::default());
        assert_eq!(p.terminating, [dp("web", "a")], "a pod deleted by someone else is waited for, not evicted");
        assert!(!p.done);
    }

    #[test]
    fn refused_pods_wait_for_their_retry_time() {
        let mut status = DrainerConfigStatus::default();
        let pods = [dp("web", "a"), dp("web", "b")];
        let p = plan(&status, &on_node(&pods), at(0), Limits::default());
        let results = vec![
            (dp("web", "a"), EvictionResult::Evicted),
            (dp("web", "b"), EvictionResult::Refused { code: 429, message: "budget web needs 9".into() }),
        ];
        let backoff = Backoff::default();
        record(&mut status, &p, &results, at(0), backoff);
        assert_eq!(status.evicted_pods, 1);
        assert_eq!(status.terminating_pods, [dp("web", "a")]);
        assert_eq!(status.blocked_pods.len(), 1);
        assert_eq!(status.blocked_pods[0].attempts, 1);
        assert_eq!(status.blocked_pods[0].reason, "budget web needs 9");

        // Before the retry time b is not evicted again; a is awaited.
        let p = plan(&status, &on_node(&pods), at(0), Limits::default());
        assert!(p.evict.is_empty());
        assert!(p.requeue <= Limits::default().poll);
        // a is gone; b's retry time has come.
        let p = plan(&status, &on_node(&pods[1..]), at(2), Limits::default());
        assert_eq!(p.evict, [dp("web", "b")]);
        record(
            &mut status,
            &p,
            &[(dp("web", "b"), EvictionResult::Refused { code: 429, message: String::new() })],
            at(2),
            backoff,
        );
        assert_eq!(status.blocked_pods[0].attempts, 2);
        assert!(status.terminating_pods.is_empty());
        // Only a blocked pod left: requeue at its retry time, not earlier.
        let p = plan(&status, &on_node(&pods[1..]), at(2), Limits::default());
        let wait = p.requeue;
        assert!(wait >= Duration::from_secs(2) && wait <= Duration::from_millis(2500), "{wait:?}");
        // b goes: drained.
        let p = plan(&status, &[], at(10), Limits::default());
        assert!(p.done);
        assert!(p.blocked.is_empty());
    }

    #[test]
    fn backoff_doubles_to_the_cap_with_bounded_jitter() {
        let b = Backoff { initial: Duration::from_secs(1), max: Duration::from_secs(8) };
        for (attempts, base) in [(1, 1), (2, 2), (3, 4), (4, 8), (10, 8), (u32::MAX, 8)] {
            let d = b.delay(attempts, "pod-uid");
            let base = Duration::from_secs(base);
            assert!(d >= base && d <= base.mul_f64(1.25), "{attempts}: {d:?}");
        }
        assert_eq!(b.delay(3, "x"), b.delay(3, "x"), "deterministic");
        assert_ne!(b.delay(3, "x"), b.delay(3, "y"), "spread across pods");
        assert_eq!(EvictionResult::Refused { code: 429, message: String::new() }.label(), "disruption_budget");
        assert_eq!(EvictionResult::Refused { code: 503, message: String::new() }.label(), "error");
    }

    #[test]
    fn timeouts_parse_and_bad_ones_are_explained() {
        assert_eq!(parse_timeout("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_timeout("1h30m"), Ok(Duration::from_secs(5400)));
        for bad in ["", "10", "abc", "0s", "5d"] {
            let e = parse_timeout(bad).unwrap_err();
            assert!(e.contains("90s"), "{bad}: {e}");
        }
    }

    #[test]
    fn blocked_pods_are_named_in_the_summary() {
        let status = DrainerConfigStatus {
            blocked_pods: vec![BlockedPod {
                pod: dp("web", "a"),
                reason: "budget".into(),
                attempts: 3,
                retry_at: Time(at(0)),
            }],
            ..Default::default()
        };
        assert_eq!(describe_blocked(&status), "pods left: web/a (budget)");
    }
}

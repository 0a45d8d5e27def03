//! The second mode: server-side sharded watches by namespace hash ranges (KEP-5866).
//!
//! Each live shard owns one contiguous slice of the 64-bit FNV-1a hash space of
//! `metadata.namespace` (shard *i* of *n*, by name: `[i·2⁶⁴/n, (i+1)·2⁶⁴/n)`), and its watches
//! carry `shardSelector=shardRange(object.metadata.namespace, …)`, so the API server sends each
//! replica only its namespaces. Nothing is labelled and there is no sharder: the hash decides.
//!
//! When membership changes, ranges change without a drain label to hand over, so the replicas
//! agree through their shard Leases instead. A replica that computes new members first
//! *shrinks*: it stops starting reconciles outside its new range and waits for those running
//! to end; then it writes the members it adopted into its Lease
//! (`operatorkit.giantswarm.io/ring-members`); it *grows* into its new range only once every
//! live shard's Lease names the same members. A shard whose Lease expired is fenced, so it is
//! not waited for. A replica that lost its Lease starts over with no range.
//!
//! The API server must serve `shardSelector` (Kubernetes 1.36 with the `ShardedListAndWatch`
//! feature gate). One that ignores it answers lists without `metadata.shardInfo`; the watch then
//! fails with [`ShardSelectorIgnored`] instead of caching everything.

use std::collections::BTreeSet;
use std::sync::Arc;

use futures::future::BoxFuture;
use http_body_util::BodyExt;
use parking_lot::Mutex;
use tokio::sync::watch;

use super::ring::fnv1a64;

/// The Lease annotation that names the members a shard has adopted.
pub const MEMBERS_ANNOTATION: &str = "operatorkit.giantswarm.io/ring-members";

/// A half-open slice `[start, end)` of the 64-bit hash space.
pub type HashRange = (u128, u128);

/// The slice of `shard` among `members` (sorted, deduplicated), if it is one of them.
pub fn range_of(members: &BTreeSet<String>, shard: &str) -> Option<HashRange> {
    let n = members.len() as u128;
    let i = members.iter().position(|m| m == shard)? as u128;
    let space: u128 = 1 << 64;
    Some((i * space / n, (i + 1) * space / n))
}

/// Whether `namespace` hashes into `range`.
pub fn contains(range: HashRange, namespace: &str) -> bool {
    let h = u128::from(fnv1a64(namespace.as_bytes()));
    range.0 <= h && h < range.1
}

/// The hash of a namespace, as the server computes it.
pub fn hash(namespace: &str) -> u128 {
    u128::from(fnv1a64(namespace.as_bytes()))
}

/// `a ∩ b`, if not empty.
pub fn intersect(a: HashRange, b: HashRange) -> Option<HashRange> {
    let range = (a.0.max(b.0), a.1.min(b.1));
    (range.0 < range.1).then_some(range)
}

/// The `shardSelector` of a range.
pub fn selector(range: HashRange) -> String {
    format!("shardRange(object.metadata.namespace, '{:#x}', '{:#x}')", range.0, range.1)
}

/// What a replica may do, published by the coordinator to its controllers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct RangeView {
    /// The slice its watches select (the adopted one).
    pub owned: Option<HashRange>,
    /// The slice it may start reconciles in (narrower than `owned` while shrinking).
    pub allowed: Option<HashRange>,
}

/// The namespace hashes of one controller's running reconciles (a hash once per reconcile).
pub(crate) type RunningHashes = Arc<Mutex<Vec<u128>>>;

/// The shared state of one replica's ranges.
#[derive(Clone)]
pub(crate) struct Ranges {
    pub view: watch::Sender<RangeView>,
    /// Per controller: the namespace hashes of the reconciles running now.
    pub running: Arc<Mutex<Vec<RunningHashes>>>,
}

impl Ranges {
    pub(crate) fn new() -> Self {
        Self { view: watch::channel(RangeView::default()).0, running: Arc::new(Mutex::new(Vec::new())) }
    }

    /// Whether no reconcile outside `range` runs now.
    pub(crate) fn settled_within(&self, range: Option<HashRange>) -> bool {
        self.running
            .lock()
            .iter()
            .all(|set| set.lock().iter().all(|h| range.is_some_and(|(start, end)| start <= *h && *h < end)))
    }
}

/// The API server answered a sharded list without `metadata.shardInfo`: it does not serve
/// `shardSelector` (older than Kubernetes 1.36, or the `ShardedListAndWatch` feature gate is
/// off), and would send every object to every replica.
#[derive(Debug, thiserror::Error)]
#[error(
    "the API server ignored shardSelector (no metadata.shardInfo in the list response): it needs Kubernetes 1.36 or later with the ShardedListAndWatch feature gate; use label sharding instead"
)]
pub struct ShardSelectorIgnored;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A client whose list and watch requests carry the current `shardSelector`, and whose list
/// responses must echo it.
#[derive(Clone)]
pub(crate) struct ShardSelectingClient {
    pub inner: kube::Client,
    pub view: watch::Receiver<RangeView>,
}

impl ShardSelectingClient {
    pub(crate) fn client(inner: kube::Client, view: watch::Receiver<RangeView>) -> kube::Client {
        let namespace = inner.default_namespace().to_string();
        kube::Client::new(ShardSelectingClient { inner, view }, namespace)
    }
}

impl tower_service::Service<http::Request<kube::client::Body>> for ShardSelectingClient {
    type Response = http::Response<kube::client::Body>;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<Self::Response, BoxError>>;

    fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), BoxError>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut request: http::Request<kube::client::Body>) -> Self::Future {
        let inner = self.inner.clone();
        let owned = self.view.borrow().owned;
        Box::pin(async move {
            if request.method() != http::Method::GET {
                return inner.send(request).await.map_err(|e| Box::new(e) as BoxError);
            }
            // No range adopted yet: an empty range selects nothing, which is what this
            // replica owns.
            let range = owned.unwrap_or((0, 0));
            let sel = if range.0 < range.1 { selector(range) } else { selector((0, 1)) };
            let uri = request.uri().to_string();
            let joined = if uri.contains('?') { '&' } else { '?' };
            let encoded: String = form_urlencoded_byte_serialize(&sel);
            let watch = uri.contains("watch=true") || uri.contains("watch=1");
            *request.uri_mut() =
                format!("{uri}{joined}shardSelector={encoded}").parse().map_err(|e| Box::new(e) as BoxError)?;
            let response = inner.send(request).await.map_err(|e| Box::new(e) as BoxError)?;
            if watch || !response.status().is_success() {
                return Ok(response);
            }
            let (parts, body) = response.into_parts();
            let bytes = body.collect().await.map_err(|e| Box::new(e) as BoxError)?.to_bytes();
            let echoed = serde_json::from_slice::<serde_json::Value>(&bytes)
                .ok()
                .and_then(|v| v.pointer("/metadata/shardInfo/selector").and_then(|s| s.as_str().map(str::to_string)));
            if echoed.as_deref() != Some(sel.as_str()) {
                return Err(Box::new(ShardSelectorIgnored) as BoxError);
            }
            Ok(http::Response::from_parts(parts, kube::client::Body::from(bytes.to_vec())))
        })
    }
}

/// Percent-encode a query value (RFC 3986 unreserved characters stay).
fn form_urlencoded_byte_serialize(value: &str) -> String {
    let mut out = String::with_capacity(value.len() * 3);
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Keep this replica's range in step with the ring: shrink, acknowledge, then grow (see the
/// module documentation). Runs until aborted.
pub(crate) async fn coordinate(
    config: super::ShardingConfig,
    client: kube::Client,
    held: crate::leader::Leadership,
    ranges: Ranges,
    annotations: Arc<Mutex<std::collections::BTreeMap<String, String>>>,
) {
    use futures::StreamExt;
    use k8s_openapi::api::coordination::v1::Lease;
    use kube::runtime::WatchStreamExt;
    use kube::runtime::reflector;
    use kube::runtime::watcher::{self, Event};

    let api: kube::Api<Lease> = kube::Api::namespaced(client, &config.namespace);
    let writer = reflector::store::Writer::<Lease>::default();
    let leases = writer.as_reader();
    let changed = Arc::new(tokio::sync::Notify::new());
    let synced = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let lease_config = watcher::Config::default().labels(&format!("{}={}", super::RING_LABEL, config.ring));
    let notify = changed.clone();
    let flag = synced.clone();
    let stream = watcher::watcher(api.clone(), lease_config).default_backoff().reflect(writer);
    let driver = tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(event) = stream.next().await {
            if matches!(event, Ok(Event::InitDone)) {
                flag.store(true, std::sync::atomic::Ordering::SeqCst);
            }
            notify.notify_one();
        }
    });
    let _driver = super::sharder::AbortOnDrop(driver);

    let mut members = super::sharder::Membership::default();
    let mut adopted: Option<HashRange> = None;
    let publish = |owned: Option<HashRange>, allowed: Option<HashRange>| {
        ranges.view.send_if_modified(|view| {
            let next = RangeView { owned, allowed };
            let changed = *view != next;
            *view = next;
            changed
        });
    };
    loop {
        tokio::select! {
            () = changed.notified() => {}
            () = tokio::time::sleep(config.retry_period) => {}
        }
        if !synced.load(std::sync::atomic::Ordering::SeqCst) {
            continue;
        }
        let live = members.refresh(&config, &leases, &api).await;
        if !held.is_leader() || !live.contains(&config.shard) {
            // Fenced, or not yet in the ring: no range; after taking the Lease back the
            // others must acknowledge again before this replica works.
            if adopted.take().is_some() {
                tracing::info!(ring = %config.ring, shard = %config.shard, "shard Lease lost; giving up the hash range");
            }
            publish(None, None);
            annotations.lock().remove(MEMBERS_ANNOTATION);
            continue;
        }
        let target = range_of(&live, &config.shard);
        if target == adopted {
            continue;
        }
        // Shrink: no new reconcile outside the new range, and wait for those running.
        let allowed = match (adopted, target) {
            (Some(a), Some(t)) => intersect(a, t),
            _ => None,
        };
        publish(adopted, allowed);
        if !ranges.settled_within(target) {
            continue;
        }
        // Acknowledge the members this replica now works for.
        let value = live.iter().cloned().collect::<Vec<_>>().join(",");
        annotations.lock().insert(MEMBERS_ANNOTATION.to_string(), value.clone());
        // Grow once every live shard acknowledged the same members.
        let agreed = live.iter().all(|shard| {
            leases.state().iter().any(|lease| {
                lease.metadata.name.as_deref() == Some(shard.as_str())
                    && lease.metadata.annotations.as_ref().and_then(|a| a.get(MEMBERS_ANNOTATION)) == Some(&value)
            })
        });
        if !agreed {
            continue;
        }
        tracing::info!(ring = %config.ring, shard = %config.shard, members = %value, range = ?target, "adopted a new hash range");
        adopted = target;
        publish(target, target);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn ranges_tile_the_hash_space_in_name_order() {
        let m = members(&["c", "a", "b"]);
        let ranges: Vec<HashRange> = ["a", "b", "c"].iter().filter_map(|s| range_of(&m, s)).collect();
        assert_eq!(ranges[0].0, 0);
        assert_eq!(ranges[2].1, 1 << 64);
        assert_eq!(ranges[0].1, ranges[1].0);
        assert_eq!(ranges[1].1, ranges[2].0);
        assert_eq!(range_of(&m, "d"), None);
        let namespaces: Vec<String> = (0..3000).map(|i| format!("cluster-{i}")).collect();
        for ns in &namespaces {
            assert_eq!(ranges.iter().filter(|r| contains(**r, ns)).count(), 1, "{ns}");
        }
    }

    #[test]
    fn selectors_use_the_kep_syntax() {
        assert_eq!(selector((0, 1 << 63)), "shardRange(object.metadata.namespace, '0x0', '0x8000000000000000')");
        assert_eq!(intersect((0, 10), (5, 20)), Some((5, 10)));
        assert_eq!(intersect((0, 5), (5, 20)), None);
        assert_eq!(form_urlencoded_byte_serialize("a b'(,)"), "a%20b%27%28%2C%29");
    }
}

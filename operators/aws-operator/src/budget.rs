//! Pure: the arithmetic of the AWS request budget that every replica of every operator version
//! shares per account and region ([`crate::aws::budget`] is its edge).
//!
//! * **Kinds.** A request is a [`Kind::Read`] or a [`Kind::Write`] ([`classify`]); each has its
//!   own [`TokenBucket`], so reads never take a write's token and a write never waits behind a
//!   read. Drift detections ([`Kind::Detection`], `DetectStackDrift` starts) have a third, slow
//!   bucket of their own per minute; the calls a detection makes also take read tokens.
//! * **Shares.** A budget is the rate of the whole operator in one account and region. Each of
//!   the `n` live replicas spends `1/n` of it: rate and burst alike ([`Limit::share`]), so that
//!   together they stay within the rate whatever each one's load.
//! * **Members.** A replica is live while its Lease is renewed. Liveness is judged from when a
//!   renewal was *observed* on this replica's own clock ([`Members`]), never by comparing
//!   another machine's clock: a Lease that stops changing for its lease duration is dead, and its
//!   share goes back to the others.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// What a request does to the account, for the bucket it takes a token from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// Changes nothing: `Describe*`, `List*`, `Get*`, S3 `GET`, KMS `Decrypt`, ….
    Read,
    /// Anything else: stack operations, hook completions, terminations, uploads.
    Write,
    /// The start of a CloudFormation drift detection (the drift detector's own rate).
    Detection,
}

impl Kind {
    /// The `kind` label of the metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Read => "read",
            Kind::Write => "write",
            Kind::Detection => "detection",
        }
    }
}

/// Operation name prefixes that change nothing in the account. `Detect` (drift detection)
/// examines resources without changing them; KMS' cryptographic calls read the key.
const READ_PREFIXES: &[&str] = &[
    "Describe",
    "List",
    "Get",
    "Head",
    "Validate",
    "Estimate",
    "Detect",
    "Lookup",
    "Search",
    "Decrypt",
    "Encrypt",
    "GenerateDataKey",
    "Verify",
];

/// Whether the operation named `operation` (`DescribeStacks`, `CreateStack`, …) is a read.
pub fn is_read_operation(operation: &str) -> bool {
    READ_PREFIXES.iter().any(|p| operation.starts_with(p))
}

/// The kind of one HTTP request to AWS, from what the wire carries: the JSON protocol's
/// `X-Amz-Target` (`TrentService.Decrypt`), else the query protocol's `Action=` in the form body
/// (EC2, CloudFormation, Auto Scaling, IAM, ELB), else the REST method (S3, Route53,
/// CloudFront: `GET` and `HEAD` read, everything else writes).
pub fn classify(method: &str, target: Option<&str>, body: Option<&[u8]>) -> Kind {
    let operation =
        target.map(|t| t.rsplit('.').next().unwrap_or(t).to_string()).or_else(|| body.and_then(query_action));
    match operation {
        Some(op) if is_read_operation(&op) => Kind::Read,
        Some(_) => Kind::Write,
        None if method.eq_ignore_ascii_case("GET") || method.eq_ignore_ascii_case("HEAD") => Kind::Read,
        None => Kind::Write,
    }
}

/// The `Action` parameter of a form-encoded query-protocol body.
fn query_action(body: &[u8]) -> Option<String> {
    let body = std::str::from_utf8(body).ok()?;
    body.split('&').find_map(|pair| pair.strip_prefix("Action=")).map(str::to_string)
}

/// The rate of one bucket of the whole operator in one account and region.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Limit {
    /// Tokens added per second.
    pub per_second: f64,
    /// Tokens saved up at most (the burst).
    pub capacity: f64,
}

impl Limit {
    /// `per_second` with a burst of `burst` worth of tokens (at least one token).
    pub fn new(per_second: f64, burst: Duration) -> Self {
        Self { per_second, capacity: (per_second * burst.as_secs_f64()).max(1.0) }
    }

    /// `per_minute` with a burst of a minute's worth: drift detection's rate.
    pub fn per_minute(per_minute: u32) -> Self {
        let capacity = f64::from(per_minute.max(1));
        Self { per_second: capacity / 60.0, capacity }
    }

    /// One of `members` replicas' share: the rate and the burst divided evenly. The burst stays
    /// at least one token, or a replica could never send anything.
    pub fn share(self, members: usize) -> Self {
        let n = members.max(1) as f64;
        Self { per_second: self.per_second / n, capacity: (self.capacity / n).max(1.0) }
    }
}

/// A token bucket: `per_second` tokens a second, at most `capacity` saved up. Time is passed in.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    limit: Limit,
    tokens: f64,
    at: Instant,
}

impl TokenBucket {
    /// A full bucket at `now`.
    pub fn new(limit: Limit, now: Instant) -> Self {
        Self { limit, tokens: limit.capacity, at: now }
    }

    /// The limit the bucket fills at.
    pub fn limit(&self) -> Limit {
        self.limit
    }

    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.limit.per_second).min(self.limit.capacity);
        self.at = now.max(self.at);
    }

    /// Take a token at `now`, or say how long until one is there.
    pub fn take(&mut self, now: Instant) -> Result<(), Duration> {
        self.refill(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Ok(())
        } else if self.limit.per_second <= 0.0 {
            Err(Duration::from_secs(60))
        } else {
            Err(Duration::from_secs_f64((1.0 - self.tokens) / self.limit.per_second))
        }
    }

    /// Fill at `limit` from `now` on (the number of replicas changed): what was earned so far
    /// at the old rate is kept, up to the new capacity.
    pub fn set_limit(&mut self, limit: Limit, now: Instant) {
        self.refill(now);
        self.limit = limit;
        self.tokens = self.tokens.min(limit.capacity);
    }
}

/// The members of a budget as this replica observed their Leases: each Lease's last renewal
/// marker (its `resourceVersion`) and when this replica first saw that marker.
#[derive(Debug, Clone, Default)]
pub struct Members {
    seen: HashMap<String, (String, Instant)>,
}

/// One member Lease as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberLease {
    /// The Lease's name.
    pub name: String,
    /// Whether someone holds it (a released Lease has no holder).
    pub held: bool,
    /// Changes with every renewal: the Lease's `resourceVersion`.
    pub marker: String,
}

impl Members {
    /// Record a listing of the member Leases made at `now`; Leases no longer listed are
    /// forgotten.
    pub fn observe(&mut self, leases: &[MemberLease], now: Instant) {
        let mut seen = HashMap::with_capacity(leases.len());
        for lease in leases.iter().filter(|l| l.held) {
            let since = match self.seen.get(&lease.name) {
                Some((marker, at)) if *marker == lease.marker => *at,
                _ => now,
            };
            seen.insert(lease.name.clone(), (lease.marker.clone(), since));
        }
        self.seen = seen;
    }

    /// The Leases renewed within `lease_duration` before `now`, as observed.
    pub fn live(&self, now: Instant, lease_duration: Duration) -> Vec<&str> {
        let mut live: Vec<&str> = self
            .seen
            .iter()
            .filter(|(_, (_, at))| now.saturating_duration_since(*at) < lease_duration)
            .map(|(name, _)| name.as_str())
            .collect();
        live.sort_unstable();
        live
    }

    /// How many replicas share the budget at `now`: the live Leases, with `own` counted
    /// whether or not the listing already showed it (a replica that spends is a member).
    pub fn count(&self, own: &str, now: Instant, lease_duration: Duration) -> usize {
        let live = self.live(now, lease_duration);
        live.len() + usize::from(!live.contains(&own))
    }

    /// The Leases not renewed for `stale_after` (as observed), for clean-up.
    pub fn stale(&self, now: Instant, stale_after: Duration) -> Vec<(String, String)> {
        let mut stale: Vec<(String, String)> = self
            .seen
            .iter()
            .filter(|(_, (_, at))| now.saturating_duration_since(*at) >= stale_after)
            .map(|(name, (marker, _))| (name.clone(), marker.clone()))
            .collect();
        stale.sort();
        stale
    }
}

/// A Lease name for the member Lease of the replica `identity` (a pod name): `prefix-identity`,
/// lowercased, with every character a Lease name cannot hold replaced by `-`, at most 253
/// characters.
pub fn member_lease_name(prefix: &str, identity: &str) -> String {
    let mut name: String = format!("{prefix}-{identity}")
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '.' { c } else { '-' })
        .collect();
    name.truncate(253);
    name.trim_end_matches(['-', '.']).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(name: &str, marker: &str) -> MemberLease {
        MemberLease { name: name.into(), held: true, marker: marker.into() }
    }

    #[test]
    fn requests_are_read_or_write_by_their_operation() {
        // Query protocol: EC2, CloudFormation, Auto Scaling, IAM, ELB.
        let form = |a: &str| format!("Action={a}&Version=2011-01-01&StackName=x");
        assert_eq!(classify("POST", None, Some(form("DescribeStacks").as_bytes())), Kind::Read);
        assert_eq!(classify("POST", None, Some(form("CreateStack").as_bytes())), Kind::Write);
        assert_eq!(classify("POST", None, Some(form("CompleteLifecycleAction").as_bytes())), Kind::Write);
        assert_eq!(classify("POST", None, Some(form("TerminateInstanceInAutoScalingGroup").as_bytes())), Kind::Write);
        assert_eq!(classify("POST", None, Some(form("DetectStackDrift").as_bytes())), Kind::Read);
        assert_eq!(classify("POST", None, Some(b"Version=1&Action=ListStacks")), Kind::Read);
        // JSON protocol: the target names the operation, whatever the method.
        assert_eq!(classify("POST", Some("TrentService.Decrypt"), Some(b"{}")), Kind::Read);
        assert_eq!(classify("POST", Some("TrentService.ScheduleKeyDeletion"), Some(b"{}")), Kind::Write);
        // REST: the method.
        assert_eq!(classify("GET", None, Some(b"")), Kind::Read);
        assert_eq!(classify("HEAD", None, None), Kind::Read);
        assert_eq!(classify("PUT", None, None), Kind::Write);
        assert_eq!(classify("DELETE", None, Some(b"")), Kind::Write);
        // A body that is no form (S3's XML) is judged by its method.
        assert_eq!(classify("POST", None, Some(b"<Delete><Object/></Delete>")), Kind::Write);
    }

    #[test]
    fn a_bucket_refills_at_its_rate_up_to_its_burst_and_says_how_long_to_wait() {
        let start = Instant::now();
        let mut bucket = TokenBucket::new(Limit::new(2.0, Duration::from_secs(2)), start);
        for _ in 0..4 {
            assert!(bucket.take(start).is_ok());
        }
        let wait = bucket.take(start).expect_err("a burst of 4");
        assert_eq!(wait, Duration::from_millis(500));
        // One second later two tokens are back, and only two.
        let later = start + Duration::from_secs(1);
        assert!(bucket.take(later).is_ok());
        assert!(bucket.take(later).is_ok());
        assert!(bucket.take(later).is_err());
        // Saved up at most the burst.
        let much_later = start + Duration::from_secs(3600);
        for _ in 0..4 {
            assert!(bucket.take(much_later).is_ok());
        }
        assert!(bucket.take(much_later).is_err());
    }

    #[test]
    fn drift_detections_fill_per_minute() {
        let start = Instant::now();
        let mut bucket = TokenBucket::new(Limit::per_minute(2), start);
        assert!(bucket.take(start).is_ok());
        assert!(bucket.take(start).is_ok());
        let wait = bucket.take(start).expect_err("two a minute");
        assert_eq!(wait.as_secs(), 30);
        assert!(bucket.take(start + Duration::from_secs(30)).is_ok());
    }

    #[test]
    fn shares_divide_rate_and_burst_and_sum_to_the_whole() {
        let whole = Limit::new(20.0, Duration::from_secs(5));
        assert_eq!(whole.share(0), whole);
        assert_eq!(whole.share(1), whole);
        let third = whole.share(3);
        assert!((third.per_second * 3.0 - 20.0).abs() < 1e-9);
        assert!((third.capacity * 3.0 - 100.0).abs() < 1e-9);
        // Never below one token of burst.
        assert_eq!(Limit::new(1.0, Duration::from_secs(1)).share(4).capacity, 1.0);
    }

    #[test]
    fn a_changed_share_keeps_what_was_earned_up_to_the_new_burst() {
        let start = Instant::now();
        let whole = Limit::new(10.0, Duration::from_secs(1));
        let mut bucket = TokenBucket::new(whole.share(2), start);
        for _ in 0..5 {
            assert!(bucket.take(start).is_ok());
        }
        assert!(bucket.take(start).is_err());
        // The other replica died: from now on this one fills at the whole rate.
        let t1 = start + Duration::from_millis(200);
        bucket.set_limit(whole.share(1), t1); // 1 token earned at 5/s
        let t2 = t1 + Duration::from_millis(400); // 4 more at 10/s
        for _ in 0..5 {
            assert!(bucket.take(t2).is_ok());
        }
        assert!(bucket.take(t2).is_err());
        // A third replica joins: the saved tokens are cut to the smaller burst.
        let t3 = t2 + Duration::from_secs(10);
        bucket.set_limit(whole.share(3), t3);
        for _ in 0..3 {
            assert!(bucket.take(t3).is_ok());
        }
        assert!(bucket.take(t3).is_err());
    }

    #[test]
    fn a_member_is_live_while_its_lease_changes_and_dead_a_lease_duration_after_it_stopped() {
        let lease_duration = Duration::from_secs(15);
        let t0 = Instant::now();
        let mut members = Members::default();
        members.observe(&[lease("b-pod-a", "1"), lease("b-pod-b", "7")], t0);
        assert_eq!(members.live(t0, lease_duration), ["b-pod-a", "b-pod-b"]);
        assert_eq!(members.count("b-pod-a", t0, lease_duration), 2);
        // pod-a renews, pod-b does not.
        let t1 = t0 + Duration::from_secs(10);
        members.observe(&[lease("b-pod-a", "2"), lease("b-pod-b", "7")], t1);
        let t2 = t0 + Duration::from_secs(15);
        members.observe(&[lease("b-pod-a", "3"), lease("b-pod-b", "7")], t2);
        assert_eq!(members.live(t2, lease_duration), ["b-pod-a"]);
        assert_eq!(members.count("b-pod-a", t2, lease_duration), 1);
        // pod-b renews again: live again.
        let t3 = t2 + Duration::from_secs(1);
        members.observe(&[lease("b-pod-a", "3"), lease("b-pod-b", "8")], t3);
        assert_eq!(members.count("b-pod-a", t3, lease_duration), 2);
        // A released Lease (no holder) is no member; one's own Lease counts before it is listed.
        members.observe(&[MemberLease { held: false, ..lease("b-pod-b", "9") }], t3);
        assert_eq!(members.count("b-pod-a", t3, lease_duration), 1);
        assert_eq!(members.count("b-pod-c", t3, lease_duration), 1);
        members.observe(&[lease("b-pod-a", "3")], t3);
        assert_eq!(members.count("b-pod-c", t3, lease_duration), 2);
    }

    #[test]
    fn leases_unrenewed_for_long_are_stale() {
        let t0 = Instant::now();
        let mut members = Members::default();
        members.observe(&[lease("b-old", "4"), lease("b-new", "1")], t0);
        let t1 = t0 + Duration::from_secs(3600);
        members.observe(&[lease("b-old", "4"), lease("b-new", "2")], t1);
        assert_eq!(members.stale(t1, Duration::from_secs(3600)), [("b-old".to_string(), "4".to_string())]);
    }

    #[test]
    fn member_lease_names_are_valid_lease_names() {
        assert_eq!(
            member_lease_name("aws-operator-budget", "Aws-Operator-7d9f_00ff12"),
            "aws-operator-budget-aws-operator-7d9f-00ff12"
        );
        assert_eq!(member_lease_name("b", &"x".repeat(400)).len(), 253);
        assert_eq!(member_lease_name("b", "pod_"), "b-pod");
    }
}

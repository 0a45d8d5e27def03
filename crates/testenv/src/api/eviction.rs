//! The eviction subresource (`POST pods/<name>/eviction`, policy/v1 `Eviction`) and the
//! PodDisruptionBudget arithmetic it shares with the disruption controller of the cluster
//! simulation.
//!
//! The decision follows `pkg/registry/core/pod/storage/eviction.go`:
//!
//! * Pods that are Pending, Succeeded, Failed or already being deleted are deleted without
//!   looking at budgets (`canIgnorePDB`).
//! * More than one matching budget is a 500 (`This pod has more than one
//!   PodDisruptionBudget, ...`); none means a plain deletion.
//! * A pod that is not Ready may go when the budget says `unhealthyPodEvictionPolicy:
//!   AlwaysAllow`, or under the default `IfHealthyBudget` when the budget is met without it
//!   (`currentHealthy >= desiredHealthy > 0`).
//! * Otherwise one disruption must be allowed; if none is, the answer is 429 TooManyRequests
//!   `Cannot evict pod as it would violate the pod's disruption budget.` with the cause
//!   `The disruption budget <name> needs <n> healthy pods and has <m> currently`.
//!
//! One deliberate difference: kube-apiserver decides from the budget's *status*, which the
//! disruption controller in kube-controller-manager keeps, and answers 429 "still being
//! processed" while that status lags behind the budget's generation. Here the figures are
//! computed from the store at the moment of the eviction, with the controller's own rules
//! (`DisruptionController.trySync`), so evictions are decided correctly with or without the
//! cluster simulation running. Decisions are serialised by one lock, and an allowed
//! disruption is recorded in the budget's status (`disruptionsAllowed` decremented, the pod
//! added to `disruptedPods`) as upstream's guarded update does, whenever a controller
//! maintains that status. Two concurrent evictions therefore never both spend a budget of one.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, OwnerReference, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::{Value, json};

use super::{Api, DeleteOptions, DeleteOutcome, Mutation, Part, WriteOptions};
use crate::error::ApiError;
use crate::registry::ResourceDef;
use crate::selector::LabelSelector;
use crate::store::Stored;

/// How long an eviction recorded in `disruptedPods` keeps the pod out of `currentHealthy`
/// while its deletion is not yet observed (`DeletionTimeout` of the disruption controller).
pub const DISRUPTED_POD_TIMEOUT: Duration = Duration::from_secs(120);

/// The condition type the disruption controller maintains on budgets.
pub const DISRUPTION_ALLOWED: &str = "DisruptionAllowed";

const TOO_MANY_REQUESTS: &str = "Cannot evict pod as it would violate the pod's disruption budget.";
const MULTIPLE_BUDGETS: &str =
    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.";
/// Attempts when a pod changes between the decision and its deletion (`EvictionsRetry`).
const EVICTION_ATTEMPTS: usize = 20;
/// The field manager of status writes made on behalf of the disruption controller.
const MANAGER: &str = "kube-controller-manager";

/// The figures of a budget, as its status reports them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BudgetFigures {
    /// `expectedPods`: the scale of the pods' controllers, or the number of pods.
    pub expected_pods: i32,
    /// `desiredHealthy`: how many pods must stay Ready.
    pub desired_healthy: i32,
    /// `currentHealthy`: Ready pods that are neither deleting nor recently evicted.
    pub current_healthy: i32,
    /// `disruptionsAllowed`: how many more pods may be evicted now.
    pub disruptions_allowed: i32,
}

/// What the disruption controller computes for one budget.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Budget {
    /// The figures.
    pub figures: BudgetFigures,
    /// The entries of `disruptedPods` still in effect.
    pub disrupted_pods: BTreeMap<String, Time>,
    /// When the earliest of those entries expires: the budget must be recomputed then.
    pub recheck_at: Option<jiff::Timestamp>,
}

/// `intstr.GetScaledValueFromIntOrPercent`: an integer as is, or a percentage of `total`
/// rounded up or down.
pub fn scaled_value(value: &IntOrString, total: i32, round_up: bool) -> Result<i32, String> {
    match value {
        IntOrString::Int(i) => Ok(*i),
        IntOrString::String(s) => {
            let Some(number) = s.strip_suffix('%') else {
                return Err("invalid value for IntOrString: invalid type: string is not a percentage".into());
            };
            let percent: i64 =
                number.parse().map_err(|e| format!("invalid value for IntOrString: invalid value \"{s}\": {e}"))?;
            let product = percent * i64::from(total);
            let scaled = if round_up {
                product.div_euclid(100) + i64::from(product.rem_euclid(100) != 0)
            } else {
                product.div_euclid(100)
            };
            i32::try_from(scaled).map_err(|_| format!("invalid value for IntOrString: {s} of {total} is out of range"))
        }
    }
}

/// `podutil.IsPodReady`: the Ready condition is True.
pub fn is_pod_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The pod's phase, `Pending` when it has none yet.
pub fn pod_phase(pod: &Pod) -> &str {
    pod.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or("Pending")
}

/// The owner reference with `controller: true`, if any (`metav1.GetControllerOf`).
pub fn controller_of(owners: Option<&Vec<OwnerReference>>) -> Option<&OwnerReference> {
    owners?.iter().find(|o| o.controller == Some(true))
}

/// `apimeta.SetStatusCondition`: add or update the condition of `type_`, moving its
/// transition time only when its status changes. Returns whether anything changed.
pub fn set_status_condition(conditions: &mut Vec<Condition>, wanted: Condition) -> bool {
    match conditions.iter_mut().find(|c| c.type_ == wanted.type_) {
        None => {
            conditions.push(wanted);
            true
        }
        Some(existing) => {
            let mut changed = false;
            if existing.status != wanted.status {
                existing.status = wanted.status;
                existing.last_transition_time = wanted.last_transition_time;
                changed = true;
            }
            if existing.reason != wanted.reason {
                existing.reason = wanted.reason;
                changed = true;
            }
            if existing.message != wanted.message {
                existing.message = wanted.message;
                changed = true;
            }
            if existing.observed_generation != wanted.observed_generation {
                existing.observed_generation = wanted.observed_generation;
                changed = true;
            }
            changed
        }
    }
}

/// `canIgnorePDB`: pods that already caused their disruption, or never ran.
fn can_ignore_budget(pod: &Pod) -> bool {
    matches!(pod_phase(pod), "Succeeded" | "Failed" | "Pending") || pod.metadata.deletion_timestamp.is_some()
}

/// `shouldEnforceResourceVersion`: pin the deletion to the pod version the decision saw,
/// unless the pod is terminal or already being deleted.
fn pin_version(pod: &Pod) -> bool {
    !matches!(pod_phase(pod), "Succeeded" | "Failed") && pod.metadata.deletion_timestamp.is_none()
}

/// The selector of a budget. In policy/v1 a missing selector selects nothing and an empty
/// one selects every pod of the namespace.
fn budget_selector(pdb: &PodDisruptionBudget) -> LabelSelector {
    let raw = pdb.spec.as_ref().and_then(|s| s.selector.as_ref()).map(serde_json::to_value);
    match raw {
        Some(Ok(v)) => LabelSelector::from_label_selector(&v).unwrap_or_else(|_| LabelSelector::nothing()),
        _ => LabelSelector::nothing(),
    }
}

fn decode<T: serde::de::DeserializeOwned>(stored: &Stored) -> Result<T, ApiError> {
    serde_json::from_slice(&stored.json).map_err(|e| ApiError::internal(format!("stored object does not decode: {e}")))
}

fn whole_seconds(t: jiff::Timestamp) -> Time {
    // metav1.Time has second precision; keep in-memory values equal to what a read returns.
    Time(jiff::Timestamp::from_second(t.as_second()).unwrap_or(t))
}

/// What the checks allow.
enum Verdict {
    /// Delete, pinned to the pod version the decision was made on.
    DeletePinned,
    /// Delete as requested (a disruption was recorded, or no budget applies).
    Delete,
}

impl Api {
    fn builtin_def(&self, group: &str, version: &str, plural: &str) -> Result<Arc<ResourceDef>, ApiError> {
        self.registry
            .get(group, version, plural)
            .ok_or_else(|| ApiError::internal(format!("the built-in resource {plural} is not served")))
    }

    /// `POST pods/<name>/eviction`: delete the pod if its disruption budget allows it.
    pub fn evict(
        &self,
        def: &ResourceDef,
        namespace: &str,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<DeleteOutcome, ApiError> {
        let _serialised = self.eviction_lock.lock();
        let caller_pinned = opts.precondition_rv.is_some();
        let mut conflict = None;
        for _ in 0..EVICTION_ATTEMPTS {
            let stored = self.get_stored(def, namespace, name)?;
            let pod: Pod = decode(&stored)?;
            let verdict = if can_ignore_budget(&pod) {
                if pin_version(&pod) { Verdict::DeletePinned } else { Verdict::Delete }
            } else {
                self.budget_verdict(namespace, name, &pod, opts.dry_run)?
            };
            let mut delete = opts.clone();
            if matches!(verdict, Verdict::DeletePinned) && !caller_pinned {
                delete.precondition_rv = Some(stored.meta.rv.to_string());
            }
            match self.delete(def, namespace, name, &delete) {
                // The pod changed since the decision (it may have become Ready): decide again.
                Err(e) if e.code == 409 && !caller_pinned && delete.precondition_rv.is_some() => conflict = Some(e),
                other => return other,
            }
        }
        Err(conflict.unwrap_or_else(|| ApiError::conflict(def, name)))
    }

    /// The budget checks of an eviction of a Running pod.
    fn budget_verdict(&self, namespace: &str, name: &str, pod: &Pod, dry_run: bool) -> Result<Verdict, ApiError> {
        let labels = pod.metadata.labels.clone().unwrap_or_default();
        let mut budgets = self.budgets_for(namespace, &labels)?;
        let pdb = match budgets.len() {
            0 => return Ok(Verdict::Delete),
            1 => budgets.remove(0),
            _ => return Err(ApiError::plain(MULTIPLE_BUDGETS)),
        };
        let pdb_name = pdb.metadata.name.clone().unwrap_or_default();
        let ready = is_pod_ready(pod);
        let policy = pdb.spec.as_ref().and_then(|s| s.unhealthy_pod_eviction_policy.as_deref());
        if !ready && policy == Some("AlwaysAllow") {
            return Ok(Verdict::DeletePinned);
        }
        let budget = self.disruption_budget(&pdb, self.clock.now());
        let figures = match &budget {
            Ok(b) => b.figures,
            // A budget that cannot be computed allows nothing (the controller's failSafe).
            Err(_) => pdb
                .status
                .as_ref()
                .map(|s| BudgetFigures {
                    expected_pods: s.expected_pods,
                    desired_healthy: s.desired_healthy,
                    current_healthy: s.current_healthy,
                    disruptions_allowed: 0,
                })
                .unwrap_or_default(),
        };
        if !ready && figures.current_healthy >= figures.desired_healthy && figures.desired_healthy > 0 {
            return Ok(Verdict::DeletePinned);
        }
        if figures.disruptions_allowed <= 0 {
            return Err(ApiError::too_many_requests(
                TOO_MANY_REQUESTS,
                vec![json!({
                    "reason": "DisruptionBudget",
                    "message": format!(
                        "The disruption budget {pdb_name} needs {} healthy pods and has {} currently",
                        figures.desired_healthy, figures.current_healthy
                    ),
                })],
            ));
        }
        if let Ok(budget) = budget
            && !dry_run
        {
            self.record_disruption(&pdb, name, budget)?;
        }
        Ok(Verdict::Delete)
    }

    /// The budgets in `namespace` whose selector matches `labels`.
    fn budgets_for(
        &self,
        namespace: &str,
        labels: &BTreeMap<String, String>,
    ) -> Result<Vec<PodDisruptionBudget>, ApiError> {
        let def = self.builtin_def("policy", "v1", "poddisruptionbudgets")?;
        let snapshot = self
            .store
            .list(&def.storage, Some(namespace), None, None, None, &|_, _| true)
            .map_err(|e| ApiError::internal(e.to_string()))?;
        let mut out = Vec::new();
        for (_, stored) in snapshot.items {
            let pdb: PodDisruptionBudget = decode(&stored)?;
            if budget_selector(&pdb).matches(labels) {
                out.push(pdb);
            }
        }
        Ok(out)
    }

    /// After an allowed eviction: decrement `disruptionsAllowed` and note the pod in
    /// `disruptedPods`, if a disruption controller maintains the status (`checkAndDecrement`).
    fn record_disruption(&self, pdb: &PodDisruptionBudget, pod_name: &str, budget: Budget) -> Result<(), ApiError> {
        let Some(old) = pdb.status.as_ref().filter(|s| s.observed_generation.is_some()) else { return Ok(()) };
        let now = whole_seconds(self.clock.now());
        let mut status = status_from_budget(old, pdb.metadata.generation, &budget);
        status.disruptions_allowed -= 1;
        status.disrupted_pods.get_or_insert_with(BTreeMap::new).insert(pod_name.to_string(), now.clone());
        update_allowed_condition(&mut status, now);
        self.write_budget_status(pdb, &status)
    }

    fn write_budget_status(
        &self,
        pdb: &PodDisruptionBudget,
        status: &PodDisruptionBudgetStatus,
    ) -> Result<(), ApiError> {
        let def = self.builtin_def("policy", "v1", "poddisruptionbudgets")?;
        let namespace = pdb.metadata.namespace.as_deref().unwrap_or("");
        let name = pdb.metadata.name.as_deref().unwrap_or("");
        let uid = pdb.metadata.uid.clone();
        let status = serde_json::to_value(status).map_err(|e| ApiError::internal(e.to_string()))?;
        let opts = WriteOptions { manager: MANAGER.into(), ..WriteOptions::default() };
        self.guaranteed_update(&def, namespace, name, Part::Status, &opts, false, |current| {
            let Some(current) = current else { return Err(ApiError::not_found(&def, name)) };
            if current.pointer("/metadata/uid").and_then(Value::as_str) != uid.as_deref() {
                return Err(ApiError::not_found(&def, name));
            }
            let mut value = current.clone();
            super::set_path(&mut value, &["status"], Some(status.clone()));
            Ok(Mutation { value, applied: false, precondition: None })
        })?;
        Ok(())
    }

    /// Recompute and store the status of budget `namespace/name`, as the disruption controller
    /// does on every change of the budget, its pods or their controllers. Returns when the
    /// budget must be looked at again (an entry of `disruptedPods` expires), if ever.
    pub fn sync_disruption_status(&self, namespace: &str, name: &str) -> Result<Option<jiff::Timestamp>, ApiError> {
        let _serialised = self.eviction_lock.lock();
        let def = self.builtin_def("policy", "v1", "poddisruptionbudgets")?;
        let Ok(stored) = self.get_stored(&def, namespace, name) else { return Ok(None) };
        let pdb: PodDisruptionBudget = decode(&stored)?;
        if pdb.metadata.deletion_timestamp.is_some() {
            return Ok(None);
        }
        let now = self.clock.now();
        let old = pdb.status.clone().unwrap_or_default();
        let (status, recheck) = match self.disruption_budget(&pdb, now) {
            Ok(budget) => {
                let mut status = status_from_budget(&old, pdb.metadata.generation, &budget);
                update_allowed_condition(&mut status, whole_seconds(now));
                (status, budget.recheck_at)
            }
            Err(message) => {
                // failSafe: keep the figures, allow nothing, say why.
                let mut status = old.clone();
                status.disruptions_allowed = 0;
                let mut conditions = status.conditions.take().unwrap_or_default();
                set_status_condition(
                    &mut conditions,
                    Condition {
                        type_: DISRUPTION_ALLOWED.into(),
                        status: "False".into(),
                        reason: "SyncFailed".into(),
                        message,
                        observed_generation: status.observed_generation,
                        last_transition_time: whole_seconds(now),
                    },
                );
                status.conditions = Some(conditions);
                (status, None)
            }
        };
        if pdb.status.as_ref() != Some(&status) {
            self.write_budget_status(&pdb, &status)?;
        }
        Ok(recheck)
    }

    /// The figures of a budget from the current store state (`DisruptionController.trySync`).
    /// `Err` carries the reason the controller could not compute them.
    pub fn disruption_budget(&self, pdb: &PodDisruptionBudget, now: jiff::Timestamp) -> Result<Budget, String> {
        let namespace = pdb.metadata.namespace.as_deref().unwrap_or("");
        let pods = self.pods_of_budget(namespace, &budget_selector(pdb)).map_err(|e| e.message)?;
        let (expected_pods, desired_healthy) = self.expected_and_desired(pdb, &pods)?;
        let recorded = pdb.status.as_ref().and_then(|s| s.disrupted_pods.as_ref());
        let (disrupted_pods, recheck_at) = disrupted_pod_map(&pods, recorded, now);
        let current_healthy = count_healthy(&pods, &disrupted_pods);
        let mut disruptions_allowed = current_healthy - desired_healthy;
        // A budget whose pods are not known yet allows nothing (`updatePdbStatus`).
        if expected_pods <= 0 || disruptions_allowed <= 0 {
            disruptions_allowed = 0;
        }
        Ok(Budget {
            figures: BudgetFigures { expected_pods, desired_healthy, current_healthy, disruptions_allowed },
            disrupted_pods,
            recheck_at,
        })
    }

    fn pods_of_budget(&self, namespace: &str, selector: &LabelSelector) -> Result<Vec<Pod>, ApiError> {
        let def = self.builtin_def("", "v1", "pods")?;
        let snapshot = self
            .store
            .list(&def.storage, Some(namespace), None, None, None, &|_, s| selector.matches(&s.meta.labels))
            .map_err(|e| ApiError::internal(e.to_string()))?;
        snapshot.items.iter().map(|(_, s)| decode(s)).collect()
    }

    /// `getExpectedPodCount`: `(expectedPods, desiredHealthy)`.
    fn expected_and_desired(&self, pdb: &PodDisruptionBudget, pods: &[Pod]) -> Result<(i32, i32), String> {
        let spec = pdb.spec.clone().unwrap_or_default();
        if let Some(max_unavailable) = &spec.max_unavailable {
            let expected = self.expected_scale(pods)?;
            let unavailable = scaled_value(max_unavailable, expected, true)?;
            return Ok((expected, (expected - unavailable).max(0)));
        }
        match &spec.min_available {
            Some(IntOrString::Int(n)) => Ok((i32::try_from(pods.len()).unwrap_or(i32::MAX), *n)),
            Some(percent @ IntOrString::String(_)) => {
                let expected = self.expected_scale(pods)?;
                Ok((expected, scaled_value(percent, expected, true)?))
            }
            None => Ok((0, 0)),
        }
    }

    /// `getExpectedScale`: the sum of the scales of the pods' controllers; a pod of a
    /// Deployment counts the Deployment, not its ReplicaSet. Pods without a controller are
    /// not counted.
    fn expected_scale(&self, pods: &[Pod]) -> Result<i32, String> {
        let mut scales: BTreeMap<String, i32> = BTreeMap::new();
        for pod in pods {
            let Some(controller) = controller_of(pod.metadata.owner_references.as_ref()) else { continue };
            let namespace = pod.metadata.namespace.as_deref().unwrap_or("");
            let name = pod.metadata.name.as_deref().unwrap_or("");
            let (uid, scale) = self
                .controller_scale(namespace, &controller.uid)
                .ok_or_else(|| format!("found no controllers for pod \"{name}\""))?;
            scales.insert(uid, scale);
        }
        Ok(scales.values().sum())
    }

    /// The uid and scale of the controller with `uid`, following a ReplicaSet up to its
    /// Deployment; `None` if it is missing or has no scale.
    fn controller_scale(&self, namespace: &str, uid: &str) -> Option<(String, i32)> {
        let (storage, key, stored) = self.store.get_by_uid(uid)?;
        if key.0 != namespace {
            return None;
        }
        let value = stored.value();
        if &*storage == "replicasets.apps"
            && let Some(owner) = stored.meta.owners.iter().find(|o| o.controller)
            && owner.kind == "Deployment"
            && owner.api_version.starts_with("apps/")
        {
            return self.controller_scale(namespace, &owner.uid);
        }
        let def = self.registry.for_storage(&storage)?;
        let path = def.scale.as_ref()?.spec_replicas_path.replace('.', "/");
        let replicas = value.pointer(&path).and_then(Value::as_i64).unwrap_or(0);
        Some((uid.to_string(), i32::try_from(replicas).unwrap_or(i32::MAX)))
    }
}

/// `buildDisruptedPodMap`: the recorded evictions that still keep a pod out of the healthy
/// count, and when the earliest of them expires.
fn disrupted_pod_map(
    pods: &[Pod],
    recorded: Option<&BTreeMap<String, Time>>,
    now: jiff::Timestamp,
) -> (BTreeMap<String, Time>, Option<jiff::Timestamp>) {
    let mut out = BTreeMap::new();
    let mut recheck: Option<jiff::Timestamp> = None;
    let Some(recorded) = recorded else { return (out, recheck) };
    let timeout = jiff::SignedDuration::try_from(DISRUPTED_POD_TIMEOUT).unwrap_or_default();
    for pod in pods {
        if pod.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let Some(name) = pod.metadata.name.as_deref() else { continue };
        let Some(at) = recorded.get(name) else { continue };
        let expires = at.0.checked_add(timeout).unwrap_or(at.0);
        if expires > now {
            recheck = Some(recheck.map_or(expires, |r| r.min(expires)));
            out.insert(name.to_string(), at.clone());
        }
    }
    (out, recheck)
}

/// `countHealthyPods`: Ready pods that are neither being deleted nor recently evicted
/// (`disrupted` holds only the evictions still in effect).
fn count_healthy(pods: &[Pod], disrupted: &BTreeMap<String, Time>) -> i32 {
    let healthy = pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| !disrupted.contains_key(p.metadata.name.as_deref().unwrap_or("")))
        .filter(|p| is_pod_ready(p))
        .count();
    i32::try_from(healthy).unwrap_or(i32::MAX)
}

/// The status `updatePdbStatus` writes for computed figures; conditions are carried over for
/// [`update_allowed_condition`].
fn status_from_budget(
    old: &PodDisruptionBudgetStatus,
    generation: Option<i64>,
    budget: &Budget,
) -> PodDisruptionBudgetStatus {
    PodDisruptionBudgetStatus {
        conditions: old.conditions.clone(),
        current_healthy: budget.figures.current_healthy,
        desired_healthy: budget.figures.desired_healthy,
        disrupted_pods: (!budget.disrupted_pods.is_empty()).then(|| budget.disrupted_pods.clone()),
        disruptions_allowed: budget.figures.disruptions_allowed,
        expected_pods: budget.figures.expected_pods,
        observed_generation: generation,
    }
}

/// `pdbhelper.UpdateDisruptionAllowedCondition`.
fn update_allowed_condition(status: &mut PodDisruptionBudgetStatus, now: Time) {
    let (state, reason) =
        if status.disruptions_allowed > 0 { ("True", "SufficientPods") } else { ("False", "InsufficientPods") };
    let mut conditions = status.conditions.take().unwrap_or_default();
    set_status_condition(
        &mut conditions,
        Condition {
            type_: DISRUPTION_ALLOWED.into(),
            status: state.into(),
            reason: reason.into(),
            message: String::new(),
            observed_generation: status.observed_generation,
            last_transition_time: now,
        },
    );
    status.conditions = Some(conditions);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pct(s: &str) -> IntOrString {
        IntOrString::String(s.into())
    }

    #[test]
    fn percentages_scale_with_upstream_rounding() {
        assert_eq!(scaled_value(&IntOrString::Int(3), 10, true), Ok(3));
        assert_eq!(scaled_value(&pct("25%"), 10, true), Ok(3));
        assert_eq!(scaled_value(&pct("25%"), 10, false), Ok(2));
        assert_eq!(scaled_value(&pct("50%"), 4, true), Ok(2));
        assert_eq!(scaled_value(&pct("0%"), 7, true), Ok(0));
        assert!(scaled_value(&pct("25"), 10, true).unwrap_err().contains("not a percentage"));
        assert!(scaled_value(&pct("x%"), 10, true).is_err());
    }

    fn pod(name: &str, ready: bool, deleting: bool) -> Pod {
        serde_json::from_value(json!({
            "metadata": {
                "name": name,
                "deletionTimestamp": if deleting { json!("2024-01-01T00:00:00Z") } else { Value::Null },
            },
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]},
        }))
        .unwrap()
    }

    #[test]
    fn healthy_pods_exclude_unready_deleting_and_recently_evicted() {
        let now = jiff::Timestamp::from_second(1_000_000).unwrap();
        let pods = [pod("a", true, false), pod("b", false, false), pod("c", true, true), pod("d", true, false)];
        let recent = Time(jiff::Timestamp::from_second(1_000_000 - 60).unwrap());
        let stale = Time(jiff::Timestamp::from_second(1_000_000 - 600).unwrap());
        let recorded = BTreeMap::from([("d".to_string(), recent.clone()), ("a".to_string(), stale)]);
        let (disrupted, recheck) = disrupted_pod_map(&pods, Some(&recorded), now);
        // The stale entry is dropped; the recent one keeps `d` out until it expires.
        assert_eq!(disrupted.keys().collect::<Vec<_>>(), ["d"]);
        assert_eq!(recheck, Some(jiff::Timestamp::from_second(1_000_000 + 60).unwrap()));
        assert_eq!(count_healthy(&pods, &disrupted), 1);
    }

    #[test]
    fn conditions_keep_their_transition_time_while_status_holds() {
        let t1 = Time(jiff::Timestamp::from_second(1).unwrap());
        let t2 = Time(jiff::Timestamp::from_second(2).unwrap());
        let cond = |status: &str, reason: &str, at: &Time| Condition {
            type_: DISRUPTION_ALLOWED.into(),
            status: status.into(),
            reason: reason.into(),
            message: String::new(),
            observed_generation: Some(1),
            last_transition_time: at.clone(),
        };
        let mut list = Vec::new();
        assert!(set_status_condition(&mut list, cond("True", "SufficientPods", &t1)));
        assert!(!set_status_condition(&mut list, cond("True", "SufficientPods", &t2)));
        assert_eq!(list[0].last_transition_time, t1);
        assert!(set_status_condition(&mut list, cond("False", "InsufficientPods", &t2)));
        assert_eq!(list[0].last_transition_time, t2);
        assert_eq!(list.len(), 1);
    }
}

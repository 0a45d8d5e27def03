//! The Deployment controller (`pkg/controller/deployment` and
//! `pkg/controller/deployment/util`).
//!
//! * ReplicaSets: the new one is the owned ReplicaSet whose template equals the Deployment's
//!   apart from the `pod-template-hash` label; it is created as `<deployment>-<hash>`, with
//!   the hash (FNV-32a of the template and `collisionCount`, encoded as `SafeEncodeString`
//!   does) as a label of the ReplicaSet, its selector and its pod template; a name taken by a
//!   different template bumps `status.collisionCount`. Revisions
//!   (`deployment.kubernetes.io/revision`), the `desired-replicas`/`max-replicas` annotations
//!   and the Deployment's own annotations are kept on ReplicaSets as upstream keeps them.
//! * RollingUpdate: `maxSurge` (rounded up) and `maxUnavailable` (rounded down) resolved as
//!   `ResolveFenceposts` does; new pods are added while the total stays within
//!   `replicas + maxSurge`, old ones removed (unhealthy first) while at least
//!   `replicas - maxUnavailable` stay available. Recreate: old ReplicaSets go to zero, the
//!   new one is created only once no old pod runs (terminating pods count as running).
//! * Scaling a Deployment mid-rollout scales its active ReplicaSets proportionally.
//! * Status: `observedGeneration`, `replicas`, `updatedReplicas`, `readyReplicas`,
//!   `availableReplicas`, `unavailableReplicas`, and the conditions `Available`
//!   (`MinimumReplicasAvailable`/`MinimumReplicasUnavailable`) and `Progressing`
//!   (`NewReplicaSetCreated`, `FoundNewReplicaSet`, `ReplicaSetUpdated`,
//!   `NewReplicaSetAvailable`, `ProgressDeadlineExceeded`, `DeploymentPaused`,
//!   `DeploymentResumed`) with upstream's messages; `progressDeadlineSeconds` is checked
//!   when it passes.
//! * Old ReplicaSets beyond `revisionHistoryLimit` are deleted once a rollout completes.
//!
//! Not done: rollbacks through the deprecated `rollbackTo`, events, and adoption of orphaned
//! ReplicaSets matching the selector.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentCondition, DeploymentStatus, ReplicaSet, ReplicaSetSpec};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::runtime::{Runtime, Work};
use crate::api::Part;
use crate::api::eviction::{pod_phase, scaled_value};
use crate::error::ApiError;
use crate::store::ObjKey;

const MANAGER: &str = "kube-controller-manager";
/// The label that ties ReplicaSets and pods to one template of a Deployment.
pub const POD_TEMPLATE_HASH: &str = "pod-template-hash";
const REVISION: &str = "deployment.kubernetes.io/revision";
const REVISION_HISTORY: &str = "deployment.kubernetes.io/revision-history";
const DESIRED_REPLICAS: &str = "deployment.kubernetes.io/desired-replicas";
const MAX_REPLICAS: &str = "deployment.kubernetes.io/max-replicas";
/// Deployment annotations that are not copied to ReplicaSets (`skipCopyAnnotation`).
const NOT_COPIED: [&str; 6] = [
    "kubectl.kubernetes.io/last-applied-configuration",
    REVISION,
    REVISION_HISTORY,
    DESIRED_REPLICAS,
    MAX_REPLICAS,
    "deprecated.deployment.rollback.to",
];

/// FNV-32a, as Go's `hash/fnv`.
fn fnv32a(data: &[u8], mut hash: u32) -> u32 {
    for b in data {
        hash ^= u32::from(*b);
        hash = hash.wrapping_mul(16_777_619);
    }
    hash
}

/// `rand.SafeEncodeString`: each byte mapped onto an alphabet without vowels.
fn safe_encode(s: &str) -> String {
    const ALPHANUMS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    s.bytes().map(|b| ALPHANUMS[usize::from(b) % ALPHANUMS.len()] as char).collect()
}

/// `controller.ComputeHash`: the pod-template-hash of a template and collision count.
/// Upstream hashes Go's printed form of the struct; the JSON form is hashed here, so values
/// differ from a real cluster's while keeping every property clients rely on.
pub(super) fn pod_template_hash(template: &PodTemplateSpec, collision_count: Option<i32>) -> String {
    let json = serde_json::to_vec(template).unwrap_or_default();
    let mut hash = fnv32a(&json, 2_166_136_261);
    if let Some(count) = collision_count {
        let mut bytes = [0u8; 8];
        bytes[..4].copy_from_slice(&count.to_le_bytes());
        hash = fnv32a(&bytes, hash);
    }
    safe_encode(&hash.to_string())
}

/// `EqualIgnoreHash`: templates equal apart from the pod-template-hash label.
pub(super) fn equal_ignore_hash(a: &PodTemplateSpec, b: &PodTemplateSpec) -> bool {
    let strip = |t: &PodTemplateSpec| {
        let mut t = t.clone();
        let meta = t.metadata.get_or_insert_with(Default::default);
        if let Some(labels) = meta.labels.as_mut() {
            labels.remove(POD_TEMPLATE_HASH);
        }
        if meta.labels.as_ref().is_some_and(BTreeMap::is_empty) {
            meta.labels = None;
        }
        t
    };
    strip(a) == strip(b)
}

fn replicas_of(d: &Deployment) -> i32 {
    d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
}

fn rs_replicas(rs: &ReplicaSet) -> i32 {
    rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
}

fn rs_available(rs: &ReplicaSet) -> i32 {
    rs.status.as_ref().and_then(|s| s.available_replicas).unwrap_or(0)
}

fn annotation<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.annotations.as_ref()?.get(key).map(String::as_str)
}

fn revision(rs: &ReplicaSet) -> i64 {
    annotation(&rs.metadata, REVISION).and_then(|r| r.parse().ok()).unwrap_or(0)
}

fn is_rolling(d: &Deployment) -> bool {
    d.spec.as_ref().and_then(|s| s.strategy.as_ref()).and_then(|s| s.type_.as_deref()).unwrap_or("RollingUpdate")
        == "RollingUpdate"
}

/// `ResolveFenceposts`: (maxSurge rounded up, maxUnavailable rounded down), never both zero.
pub(super) fn resolve_fenceposts(
    max_surge: Option<&IntOrString>,
    max_unavailable: Option<&IntOrString>,
    desired: i32,
) -> (i32, i32) {
    let zero = IntOrString::Int(0);
    let surge = scaled_value(max_surge.unwrap_or(&zero), desired, true).unwrap_or(0);
    let unavailable = scaled_value(max_unavailable.unwrap_or(&zero), desired, false).unwrap_or(0);
    if surge == 0 && unavailable == 0 { (0, 1) } else { (surge, unavailable) }
}

fn fenceposts(d: &Deployment) -> (i32, i32) {
    let rolling = d.spec.as_ref().and_then(|s| s.strategy.as_ref()).and_then(|s| s.rolling_update.as_ref());
    resolve_fenceposts(
        rolling.and_then(|r| r.max_surge.as_ref()),
        rolling.and_then(|r| r.max_unavailable.as_ref()),
        replicas_of(d),
    )
}

/// `MaxSurge`.
fn max_surge(d: &Deployment) -> i32 {
    if !is_rolling(d) { 0 } else { fenceposts(d).0 }
}

/// `MaxUnavailable`.
fn max_unavailable(d: &Deployment) -> i32 {
    let replicas = replicas_of(d);
    if !is_rolling(d) || replicas == 0 {
        return 0;
    }
    fenceposts(d).1.min(replicas)
}

/// `NewRSNewReplicas`: how far the new ReplicaSet may grow now.
pub(super) fn new_rs_new_replicas(d: &Deployment, all: &[Arc<ReplicaSet>], new_replicas: i32) -> i32 {
    let replicas = replicas_of(d);
    if !is_rolling(d) {
        return replicas;
    }
    let surge = d
        .spec
        .as_ref()
        .and_then(|s| s.strategy.as_ref())
        .and_then(|s| s.rolling_update.as_ref())
        .and_then(|r| r.max_surge.as_ref())
        .map(|s| scaled_value(s, replicas, true).unwrap_or(0))
        .unwrap_or(0);
    let current: i32 = all.iter().map(|rs| rs_replicas(rs)).sum();
    let max_total = replicas + surge;
    if current >= max_total {
        return new_replicas;
    }
    let scale_up = (max_total - current).min(replicas - new_replicas);
    new_replicas + scale_up
}

fn by_creation(a: &ReplicaSet, b: &ReplicaSet) -> Ordering {
    let created = |rs: &ReplicaSet| rs.metadata.creation_timestamp.as_ref().map(|t| t.0);
    created(a).cmp(&created(b)).then_with(|| a.metadata.name.cmp(&b.metadata.name))
}

/// What scaling old ReplicaSets down during a rolling update does: `(old ReplicaSet, new size)`.
pub(super) fn scale_down_old(d: &Deployment, old: &[Arc<ReplicaSet>], new: &ReplicaSet) -> Vec<(Arc<ReplicaSet>, i32)> {
    let mut old: Vec<(Arc<ReplicaSet>, i32)> =
        old.iter().filter(|rs| rs_replicas(rs) > 0).map(|rs| (rs.clone(), rs_replicas(rs))).collect();
    old.sort_by(|a, b| by_creation(&a.0, &b.0));
    let old_pods: i32 = old.iter().map(|(_, n)| n).sum();
    if old_pods == 0 {
        return Vec::new();
    }
    let all_pods = old_pods + rs_replicas(new);
    let min_available = replicas_of(d) - max_unavailable(d);
    let new_unavailable = rs_replicas(new) - rs_available(new);
    let max_scaled_down = all_pods - min_available - new_unavailable;
    if max_scaled_down <= 0 {
        return Vec::new();
    }
    // cleanupUnhealthyReplicas: unavailable old pods go first, within the allowance.
    let mut cleaned = 0;
    for (rs, size) in old.iter_mut() {
        if cleaned >= max_scaled_down {
            break;
        }
        let unhealthy = *size - rs_available(rs);
        if *size == 0 || unhealthy <= 0 {
            continue;
        }
        let down = (max_scaled_down - cleaned).min(unhealthy);
        *size -= down;
        cleaned += down;
    }
    // scaleDownOldReplicaSetsForRollingUpdate: then available ones, keeping minAvailable.
    let available: i32 = old.iter().map(|(rs, _)| rs_available(rs)).sum::<i32>() + rs_available(new);
    if available > min_available {
        let total = available - min_available;
        let mut done = 0;
        for (_, size) in old.iter_mut() {
            if done >= total {
                break;
            }
            if *size == 0 {
                continue;
            }
            let down = (*size).min(total - done);
            *size -= down;
            done += down;
        }
    }
    old.into_iter().filter(|(rs, size)| *size != rs_replicas(rs)).collect()
}

/// `getReplicaSetFraction`.
fn fraction(rs: &ReplicaSet, d: &Deployment) -> i32 {
    let replicas = replicas_of(d);
    if replicas == 0 {
        return -rs_replicas(rs);
    }
    let deployment_replicas = replicas + max_surge(d);
    let annotated = annotation(&rs.metadata, MAX_REPLICAS)
        .and_then(|v| v.parse::<i32>().ok())
        .unwrap_or_else(|| d.status.as_ref().and_then(|s| s.replicas).unwrap_or(0));
    if annotated == 0 {
        return 0;
    }
    let size = f64::from(rs_replicas(rs)) * f64::from(deployment_replicas) / f64::from(annotated);
    // integer.RoundToInt32: half away from zero.
    size.round() as i32 - rs_replicas(rs)
}

/// `DeploymentController.scale`: the ReplicaSets to resize when the Deployment's replicas
/// changed, as `(ReplicaSet, new size)`; sizes equal to the current ones refresh annotations.
pub(super) fn scale_plan(
    d: &Deployment,
    new: Option<&Arc<ReplicaSet>>,
    old: &[Arc<ReplicaSet>],
) -> Vec<(Arc<ReplicaSet>, i32)> {
    let replicas = replicas_of(d);
    let mut old_sorted: Vec<Arc<ReplicaSet>> = old.to_vec();
    old_sorted.sort_by(|a, b| by_creation(b, a));
    let mut all: Vec<Arc<ReplicaSet>> = old_sorted.clone();
    all.extend(new.cloned());
    let active: Vec<Arc<ReplicaSet>> = all.iter().filter(|rs| rs_replicas(rs) > 0).cloned().collect();
    // FindActiveOrLatest.
    let active_or_latest = match active.len() {
        0 => new.cloned().or_else(|| old_sorted.first().cloned()),
        1 => active.first().cloned(),
        _ => None,
    };
    if let Some(rs) = active_or_latest {
        return if rs_replicas(&rs) == replicas { Vec::new() } else { vec![(rs, replicas)] };
    }
    // IsSaturated: the new ReplicaSet carries the whole Deployment.
    if let Some(new) = new
        && rs_replicas(new) == replicas
        && annotation(&new.metadata, DESIRED_REPLICAS).and_then(|v| v.parse::<i32>().ok()) == Some(replicas)
        && rs_available(new) == replicas
    {
        return old.iter().filter(|rs| rs_replicas(rs) > 0).map(|rs| (rs.clone(), 0)).collect();
    }
    if !is_rolling(d) {
        return Vec::new();
    }
    let current: i32 = active.iter().map(|rs| rs_replicas(rs)).sum();
    let allowed = if replicas > 0 { replicas + max_surge(d) } else { 0 };
    let to_add = allowed - current;
    let mut active = active;
    let created = |rs: &ReplicaSet| rs.metadata.creation_timestamp.as_ref().map(|t| t.0);
    if to_add > 0 {
        // ReplicaSetsBySizeNewer.
        active.sort_by(|a, b| rs_replicas(b).cmp(&rs_replicas(a)).then_with(|| created(b).cmp(&created(a))));
    } else {
        // ReplicaSetsBySizeOlder.
        active.sort_by(|a, b| rs_replicas(b).cmp(&rs_replicas(a)).then_with(|| created(a).cmp(&created(b))));
    }
    let mut added = 0;
    let mut sizes: Vec<i32> = Vec::with_capacity(active.len());
    for rs in &active {
        let proportion = if to_add == 0 || rs_replicas(rs) == 0 || to_add == added {
            0
        } else {
            let f = fraction(rs, d);
            let left = to_add - added;
            if to_add > 0 { f.min(left) } else { f.max(left) }
        };
        sizes.push(rs_replicas(rs) + proportion);
        added += proportion;
    }
    if let Some(first) = sizes.first_mut()
        && to_add != 0
    {
        *first = (*first + to_add - added).max(0);
    }
    active.into_iter().zip(sizes).collect()
}

fn nz(n: i32) -> Option<i32> {
    (n != 0).then_some(n)
}

fn condition<'a>(status: &'a DeploymentStatus, type_: &str) -> Option<&'a DeploymentCondition> {
    status.conditions.as_ref()?.iter().find(|c| c.type_ == type_)
}

fn new_condition(type_: &str, status: &str, reason: &str, message: String, now: &Time) -> DeploymentCondition {
    DeploymentCondition {
        type_: type_.into(),
        status: status.into(),
        reason: Some(reason.into()),
        message: Some(message),
        last_update_time: Some(now.clone()),
        last_transition_time: Some(now.clone()),
    }
}

/// `SetDeploymentCondition`: same status and reason change nothing; same status keeps the
/// transition time; the condition moves to the end.
fn set_condition(status: &mut DeploymentStatus, mut wanted: DeploymentCondition) {
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    if let Some(current) = conditions.iter().find(|c| c.type_ == wanted.type_) {
        if current.status == wanted.status && current.reason == wanted.reason {
            return;
        }
        if current.status == wanted.status {
            wanted.last_transition_time = current.last_transition_time.clone();
        }
    }
    conditions.retain(|c| c.type_ != wanted.type_);
    conditions.push(wanted);
}

fn remove_condition(status: &mut DeploymentStatus, type_: &str) {
    if let Some(conditions) = status.conditions.as_mut() {
        conditions.retain(|c| c.type_ != type_);
    }
}

fn has_progress_deadline(d: &Deployment) -> bool {
    d.spec.as_ref().and_then(|s| s.progress_deadline_seconds).is_some_and(|s| s != i32::MAX)
}

/// `calculateStatus`.
pub(super) fn calculate_status(
    all: &[Arc<ReplicaSet>],
    new: Option<&ReplicaSet>,
    d: &Deployment,
    now: &Time,
) -> DeploymentStatus {
    let sum = |f: &dyn Fn(&ReplicaSet) -> i32| all.iter().map(|rs| f(rs)).sum::<i32>();
    let actual = |rs: &ReplicaSet| rs.status.as_ref().map(|s| s.replicas).unwrap_or(0);
    let available = sum(&rs_available);
    let unavailable = (sum(&rs_replicas) - available).max(0);
    let old = d.status.clone().unwrap_or_default();
    let mut status = DeploymentStatus {
        observed_generation: d.metadata.generation,
        replicas: nz(sum(&actual)),
        updated_replicas: nz(new.map(actual).unwrap_or(0)),
        ready_replicas: nz(sum(&|rs| rs.status.as_ref().and_then(|s| s.ready_replicas).unwrap_or(0))),
        available_replicas: nz(available),
        unavailable_replicas: nz(unavailable),
        collision_count: old.collision_count,
        conditions: old.conditions,
        terminating_replicas: None,
    };
    if available >= replicas_of(d) - max_unavailable(d) {
        let c = new_condition(
            "Available",
            "True",
            "MinimumReplicasAvailable",
            "Deployment has minimum availability.".into(),
            now,
        );
        set_condition(&mut status, c);
    } else {
        let c = new_condition(
            "Available",
            "False",
            "MinimumReplicasUnavailable",
            "Deployment does not have minimum availability.".into(),
            now,
        );
        set_condition(&mut status, c);
    }
    status
}

/// `DeploymentComplete`.
fn complete(d: &Deployment, status: &DeploymentStatus) -> bool {
    let replicas = replicas_of(d);
    status.updated_replicas.unwrap_or(0) == replicas
        && status.replicas.unwrap_or(0) == replicas
        && status.available_replicas.unwrap_or(0) == replicas
        && status.observed_generation >= d.metadata.generation
}

/// `DeploymentProgressing`.
fn progressing(d: &Deployment, new: &DeploymentStatus) -> bool {
    let old = d.status.clone().unwrap_or_default();
    let get = |v: Option<i32>| v.unwrap_or(0);
    let old_old = get(old.replicas) - get(old.updated_replicas);
    let new_old = get(new.replicas) - get(new.updated_replicas);
    get(new.updated_replicas) > get(old.updated_replicas)
        || new_old < old_old
        || get(new.ready_replicas) > get(old.ready_replicas)
        || get(new.available_replicas) > get(old.available_replicas)
}

/// When the Progressing condition's deadline passes, if a rollout is under way.
fn deadline(d: &Deployment, status: &DeploymentStatus) -> Option<jiff::Timestamp> {
    let seconds = d.spec.as_ref()?.progress_deadline_seconds?;
    let c = condition(status, "Progressing")?;
    let since = c.last_update_time.as_ref()?.0;
    since.checked_add(jiff::SignedDuration::from_secs(i64::from(seconds))).ok()
}

/// `DeploymentTimedOut`.
fn timed_out(d: &Deployment, status: &DeploymentStatus, now: jiff::Timestamp) -> bool {
    if !has_progress_deadline(d) {
        return false;
    }
    match condition(status, "Progressing").and_then(|c| c.reason.as_deref()) {
        None => false,
        Some("NewReplicaSetAvailable") => false,
        Some("ProgressDeadlineExceeded") => true,
        Some(_) => deadline(d, status).is_some_and(|at| at < now),
    }
}

/// `syncRolloutStatus`: the status with the Progressing condition brought up to date.
pub(super) fn rollout_status(
    all: &[Arc<ReplicaSet>],
    new: Option<&ReplicaSet>,
    d: &Deployment,
    now: &Time,
) -> DeploymentStatus {
    let mut status = calculate_status(all, new, d, now);
    if !has_progress_deadline(d) {
        remove_condition(&mut status, "Progressing");
    }
    let old = d.status.clone().unwrap_or_default();
    let current = condition(&old, "Progressing");
    let is_complete = status.replicas == status.updated_replicas
        && current.is_some_and(|c| c.reason.as_deref() == Some("NewReplicaSetAvailable"));
    if has_progress_deadline(d) && !is_complete {
        let name = new.and_then(|rs| rs.metadata.name.clone());
        let subject = |what: &str| match &name {
            Some(n) => format!("ReplicaSet \"{n}\" {what}."),
            None => format!("Deployment \"{}\" {what}.", d.metadata.name.as_deref().unwrap_or("")),
        };
        if complete(d, &status) {
            let c = new_condition(
                "Progressing",
                "True",
                "NewReplicaSetAvailable",
                subject("has successfully progressed"),
                now,
            );
            set_condition(&mut status, c);
        } else if progressing(d, &status) {
            let mut c = new_condition("Progressing", "True", "ReplicaSetUpdated", subject("is progressing"), now);
            if let Some(current) = current
                && current.status == "True"
            {
                c.last_transition_time = current.last_transition_time.clone();
            }
            remove_condition(&mut status, "Progressing");
            set_condition(&mut status, c);
        } else if timed_out(d, &status, now.0) {
            let c = new_condition(
                "Progressing",
                "False",
                "ProgressDeadlineExceeded",
                subject("has timed out progressing"),
                now,
            );
            set_condition(&mut status, c);
        }
    }
    status
}

/// `copyDeploymentAnnotationsToReplicaSet` plus the revision: the annotations the new
/// ReplicaSet should have, or `None` when it has them already.
fn new_rs_annotations(d: &Deployment, rs: &ReplicaSet, new_revision: i64) -> Option<BTreeMap<String, String>> {
    let mut annotations = rs.metadata.annotations.clone().unwrap_or_default();
    let mut changed = false;
    for (k, v) in d.metadata.annotations.iter().flatten() {
        if NOT_COPIED.contains(&k.as_str()) || annotations.get(k) == Some(v) {
            continue;
        }
        annotations.insert(k.clone(), v.clone());
        changed = true;
    }
    let old_revision = annotations.get(REVISION).cloned();
    match old_revision.as_deref().map(str::parse::<i64>) {
        Some(Err(_)) => return changed.then_some(annotations),
        Some(Ok(old)) if old >= new_revision => {}
        _ => {
            annotations.insert(REVISION.into(), new_revision.to_string());
            changed = true;
            // Rolling back to this ReplicaSet: remember the revisions it had.
            if let Some(old) = old_revision {
                let history = match annotations.get(REVISION_HISTORY) {
                    Some(h) if !h.is_empty() => format!("{h},{old}"),
                    _ => old,
                };
                annotations.insert(REVISION_HISTORY.into(), history);
            }
        }
    }
    changed.then_some(annotations)
}

/// `SetReplicasAnnotations` on a copy; `None` if already set.
fn replicas_annotations(rs: &ReplicaSet, desired: i32, max: i32) -> Option<BTreeMap<String, String>> {
    let mut annotations = rs.metadata.annotations.clone().unwrap_or_default();
    let d = annotations.insert(DESIRED_REPLICAS.into(), desired.to_string());
    let m = annotations.insert(MAX_REPLICAS.into(), max.to_string());
    (d.as_deref() != Some(&desired.to_string()) || m.as_deref() != Some(&max.to_string())).then_some(annotations)
}

/// The new ReplicaSet for the Deployment's current template.
fn new_replicaset(d: &Deployment, hash: &str, replicas: i32, revision: i64) -> ReplicaSet {
    let spec = d.spec.clone().unwrap_or_default();
    let mut template = spec.template.clone();
    let meta = template.metadata.get_or_insert_with(Default::default);
    meta.labels.get_or_insert_with(BTreeMap::new).insert(POD_TEMPLATE_HASH.into(), hash.into());
    let labels = meta.labels.clone();
    let mut selector = spec.selector.clone();
    selector.match_labels.get_or_insert_with(BTreeMap::new).insert(POD_TEMPLATE_HASH.into(), hash.into());
    let name = d.metadata.name.clone().unwrap_or_default();
    let mut annotations: BTreeMap<String, String> = d
        .metadata
        .annotations
        .iter()
        .flatten()
        .filter(|(k, _)| !NOT_COPIED.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    annotations.insert(REVISION.into(), revision.to_string());
    let replicas_total = replicas_of(d);
    annotations.insert(DESIRED_REPLICAS.into(), replicas_total.to_string());
    annotations.insert(MAX_REPLICAS.into(), (replicas_total + max_surge(d)).to_string());
    ReplicaSet {
        metadata: ObjectMeta {
            name: Some(format!("{name}-{hash}")),
            namespace: d.metadata.namespace.clone(),
            labels,
            annotations: Some(annotations),
            owner_references: Some(vec![OwnerReference {
                api_version: "apps/v1".into(),
                kind: "Deployment".into(),
                name,
                uid: d.metadata.uid.clone().unwrap_or_default(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..ObjectMeta::default()
        },
        spec: Some(ReplicaSetSpec {
            replicas: Some(replicas),
            min_ready_seconds: spec.min_ready_seconds,
            selector,
            template: Some(template),
        }),
        status: None,
    }
}

/// The ReplicaSets of a Deployment, split into the new one (if any) and the old ones.
struct Split {
    new: Option<Arc<ReplicaSet>>,
    old: Vec<Arc<ReplicaSet>>,
}

/// Whether a sync step wrote something (the resulting events bring the Deployment back).
enum Step<T> {
    Continue(T),
    Wrote,
}

impl Runtime {
    /// Converge one Deployment.
    pub(super) fn sync_deployment(&mut self, key: &ObjKey) {
        let Some(d) = self.cache.deployments.get(key).cloned() else { return };
        let Some(uid) = d.metadata.uid.clone() else { return };
        let owned: Vec<Arc<ReplicaSet>> = self
            .cache
            .replicasets_by_controller
            .get(&uid)
            .filter_map(|k| self.cache.replicasets.get(k).cloned())
            .collect();
        if let Err(e) = self.reconcile_deployment(key, &d, owned)
            && e.code != 404
        {
            self.retry(Work::Deployment(key.clone()), &e);
        }
    }

    fn reconcile_deployment(
        &mut self,
        key: &ObjKey,
        d: &Deployment,
        owned: Vec<Arc<ReplicaSet>>,
    ) -> Result<(), ApiError> {
        if d.metadata.deletion_timestamp.is_some() {
            let Step::Continue(split) = self.split(key, d, owned, false)? else { return Ok(()) };
            return self.write_status(key, d, calculate_status(&all(&split), split.new.as_deref(), d, &self.now()));
        }
        if self.paused_condition(key, d)? {
            return Ok(());
        }
        let paused = d.spec.as_ref().and_then(|s| s.paused).unwrap_or(false);
        if paused || self.is_scaling_event(d, &owned) {
            return self.sync_scale(key, d, owned, paused);
        }
        if is_rolling(d) { self.rollout_rolling(key, d, owned) } else { self.rollout_recreate(key, d, owned) }
    }

    /// `checkPausedConditions`: true if it wrote the status.
    fn paused_condition(&mut self, key: &ObjKey, d: &Deployment) -> Result<bool, ApiError> {
        if !has_progress_deadline(d) {
            return Ok(false);
        }
        let mut status = d.status.clone().unwrap_or_default();
        let reason = condition(&status, "Progressing").and_then(|c| c.reason.clone());
        if reason.as_deref() == Some("ProgressDeadlineExceeded") {
            return Ok(false);
        }
        let paused = d.spec.as_ref().and_then(|s| s.paused).unwrap_or(false);
        let paused_condition = reason.as_deref() == Some("DeploymentPaused");
        let now = self.now();
        let wanted = if paused && !paused_condition {
            new_condition("Progressing", "Unknown", "DeploymentPaused", "Deployment is paused".into(), &now)
        } else if !paused && paused_condition {
            new_condition("Progressing", "Unknown", "DeploymentResumed", "Deployment is resumed".into(), &now)
        } else {
            return Ok(false);
        };
        set_condition(&mut status, wanted);
        self.write_status(key, d, status)?;
        Ok(true)
    }

    /// `isScalingEvent`: an active ReplicaSet was sized for other replicas than the Deployment's.
    fn is_scaling_event(&self, d: &Deployment, owned: &[Arc<ReplicaSet>]) -> bool {
        let replicas = replicas_of(d);
        owned.iter().filter(|rs| rs_replicas(rs) > 0).any(|rs| {
            annotation(&rs.metadata, DESIRED_REPLICAS)
                .and_then(|v| v.parse::<i32>().ok())
                .is_some_and(|n| n != replicas)
        })
    }

    /// `getAllReplicaSetsAndSyncRevision`: find (or, with `create`, make) the new ReplicaSet
    /// and keep revisions and annotations current.
    fn split(
        &mut self,
        key: &ObjKey,
        d: &Deployment,
        mut owned: Vec<Arc<ReplicaSet>>,
        create: bool,
    ) -> Result<Step<Split>, ApiError> {
        let template = d.spec.as_ref().map(|s| s.template.clone()).unwrap_or_default();
        owned.sort_by(|a, b| by_creation(a, b));
        let position = owned.iter().position(|rs| {
            rs.spec.as_ref().and_then(|s| s.template.as_ref()).is_some_and(|t| equal_ignore_hash(t, &template))
        });
        let new = position.map(|i| owned.remove(i));
        let old = owned;
        let new_revision = old.iter().map(|rs| revision(rs)).max().unwrap_or(0) + 1;
        let rs_def = self.defs.replicasets.clone();
        if let Some(rs) = new {
            let annotations = new_rs_annotations(d, &rs, new_revision);
            let min_ready = d.spec.as_ref().and_then(|s| s.min_ready_seconds);
            let min_ready_changed = rs.spec.as_ref().and_then(|s| s.min_ready_seconds) != min_ready;
            if annotations.is_some() || min_ready_changed {
                let rs_key = (key.0.clone(), rs.metadata.name.clone().unwrap_or_default());
                self.update::<ReplicaSet>(&rs_def, &rs_key, rs.metadata.uid.as_deref(), Part::Main, MANAGER, |r| {
                    if let Some(a) = &annotations {
                        r.metadata.annotations = Some(a.clone());
                    }
                    r.spec.get_or_insert_with(Default::default).min_ready_seconds = min_ready;
                })?;
                return Ok(Step::Wrote);
            }
            let rs_revision = annotation(&rs.metadata, REVISION).unwrap_or("").to_string();
            if self.set_revision(key, d, &rs_revision)? {
                return Ok(Step::Wrote);
            }
            let status = d.status.clone().unwrap_or_default();
            if has_progress_deadline(d) && condition(&status, "Progressing").is_none() {
                let mut status = status;
                let message = format!("Found new replica set \"{}\"", rs.metadata.name.as_deref().unwrap_or(""));
                set_condition(
                    &mut status,
                    new_condition("Progressing", "True", "FoundNewReplicaSet", message, &self.now()),
                );
                self.write_status(key, d, status)?;
                return Ok(Step::Wrote);
            }
            return Ok(Step::Continue(Split { new: Some(rs), old }));
        }
        if !create {
            return Ok(Step::Continue(Split { new: None, old }));
        }
        let collision_count = d.status.as_ref().and_then(|s| s.collision_count);
        let hash = pod_template_hash(&template, collision_count);
        let replicas = new_rs_new_replicas(d, &old, 0);
        let rs = new_replicaset(d, &hash, replicas, new_revision);
        let name = rs.metadata.name.clone().unwrap_or_default();
        match self.create(&rs_def, &key.0, &rs, MANAGER) {
            Ok(_) => {}
            Err(e) if e.code == 409 => {
                // Taken by another template or owner: a hash collision (`collisionCount`).
                let mut status = d.status.clone().unwrap_or_default();
                status.collision_count = Some(collision_count.unwrap_or(0) + 1);
                self.write_status(key, d, status)?;
                return Ok(Step::Wrote);
            }
            Err(e) => return Err(e),
        }
        self.set_revision(key, d, &new_revision.to_string())?;
        if has_progress_deadline(d) {
            let mut status = d.status.clone().unwrap_or_default();
            let c = new_condition(
                "Progressing",
                "True",
                "NewReplicaSetCreated",
                format!("Created new replica set \"{name}\""),
                &self.now(),
            );
            set_condition(&mut status, c);
            self.write_status(key, d, status)?;
        }
        Ok(Step::Wrote)
    }

    /// `SetDeploymentRevision`; true if it wrote.
    fn set_revision(&mut self, key: &ObjKey, d: &Deployment, revision: &str) -> Result<bool, ApiError> {
        if annotation(&d.metadata, REVISION).unwrap_or("") == revision {
            return Ok(false);
        }
        let def = self.defs.deployments.clone();
        let revision = revision.to_string();
        self.update::<Deployment>(&def, key, d.metadata.uid.as_deref(), Part::Main, MANAGER, |dep| {
            dep.metadata.annotations.get_or_insert_with(BTreeMap::new).insert(REVISION.into(), revision.clone());
        })?;
        Ok(true)
    }

    /// Resize a ReplicaSet, refreshing its replicas annotations (`scaleReplicaSet`).
    fn scale(&mut self, d: &Deployment, rs: &ReplicaSet, size: i32) -> Result<(), ApiError> {
        let replicas = replicas_of(d);
        let annotations = replicas_annotations(rs, replicas, replicas + max_surge(d));
        if rs_replicas(rs) == size && annotations.is_none() {
            return Ok(());
        }
        let def = self.defs.replicasets.clone();
        let key = (rs.metadata.namespace.clone().unwrap_or_default(), rs.metadata.name.clone().unwrap_or_default());
        self.update::<ReplicaSet>(&def, &key, rs.metadata.uid.as_deref(), Part::Main, MANAGER, |r| {
            r.spec.get_or_insert_with(Default::default).replicas = Some(size);
            if let Some(a) = &annotations {
                r.metadata.annotations = Some(a.clone());
            }
        })?;
        Ok(())
    }

    /// `DeploymentController.sync`: proportional scaling, then the plain status.
    fn sync_scale(
        &mut self,
        key: &ObjKey,
        d: &Deployment,
        owned: Vec<Arc<ReplicaSet>>,
        paused: bool,
    ) -> Result<(), ApiError> {
        let Step::Continue(split) = self.split(key, d, owned, false)? else { return Ok(()) };
        let plan = scale_plan(d, split.new.as_ref(), &split.old);
        if !plan.is_empty() {
            for (rs, size) in plan {
                self.scale(d, &rs, size)?;
            }
            return Ok(());
        }
        if paused {
            self.cleanup(d, &split.old)?;
        }
        let status = calculate_status(&all(&split), split.new.as_deref(), d, &self.now());
        self.write_status(key, d, status)
    }

    /// `rolloutRolling`.
    fn rollout_rolling(&mut self, key: &ObjKey, d: &Deployment, owned: Vec<Arc<ReplicaSet>>) -> Result<(), ApiError> {
        let Step::Continue(split) = self.split(key, d, owned, true)? else { return Ok(()) };
        let Some(new) = split.new.clone() else { return Ok(()) };
        let replicas = replicas_of(d);
        let all = all(&split);
        // reconcileNewReplicaSet.
        let current = rs_replicas(&new);
        let target = if current > replicas { replicas } else { new_rs_new_replicas(d, &all, current) };
        if target != current {
            return self.scale(d, &new, target);
        }
        // reconcileOldReplicaSets.
        let plan = scale_down_old(d, &split.old, &new);
        if !plan.is_empty() {
            for (rs, size) in plan {
                self.scale(d, &rs, size)?;
            }
            return Ok(());
        }
        if complete(d, &d.status.clone().unwrap_or_default()) {
            self.cleanup(d, &split.old)?;
        }
        self.sync_rollout_status(key, d, &all, Some(&new))
    }

    /// `rolloutRecreate`.
    fn rollout_recreate(&mut self, key: &ObjKey, d: &Deployment, owned: Vec<Arc<ReplicaSet>>) -> Result<(), ApiError> {
        let Step::Continue(split) = self.split(key, d, owned.clone(), false)? else { return Ok(()) };
        let active_old: Vec<Arc<ReplicaSet>> = split.old.iter().filter(|rs| rs_replicas(rs) > 0).cloned().collect();
        if !active_old.is_empty() {
            for rs in active_old {
                self.scale(d, &rs, 0)?;
            }
            return Ok(());
        }
        if self.old_pods_running(&split) {
            return self.sync_rollout_status(key, d, &all(&split), split.new.as_deref());
        }
        let Some(new) = split.new.clone() else {
            // Every old pod is gone: create the new ReplicaSet at full size.
            self.split(key, d, owned, true)?;
            return Ok(());
        };
        if rs_replicas(&new) != replicas_of(d) {
            return self.scale(d, &new, replicas_of(d));
        }
        if complete(d, &d.status.clone().unwrap_or_default()) {
            self.cleanup(d, &split.old)?;
        }
        self.sync_rollout_status(key, d, &all(&split), Some(&new))
    }

    /// `oldPodsRunning`: an old ReplicaSet still reports pods, or one of its pods (terminating
    /// ones included) has not reached a terminal phase.
    fn old_pods_running(&self, split: &Split) -> bool {
        if split.old.iter().any(|rs| rs.status.as_ref().is_some_and(|s| s.replicas > 0)) {
            return true;
        }
        split.old.iter().filter_map(|rs| rs.metadata.uid.as_deref()).any(|uid| {
            self.cache
                .pods_by_controller
                .get(uid)
                .filter_map(|k| self.cache.pods.get(k))
                .any(|p| !matches!(pod_phase(p), "Succeeded" | "Failed"))
        })
    }

    /// `cleanupDeployment`: delete the oldest empty ReplicaSets beyond `revisionHistoryLimit`.
    fn cleanup(&mut self, d: &Deployment, old: &[Arc<ReplicaSet>]) -> Result<(), ApiError> {
        let Some(limit) = d.spec.as_ref().and_then(|s| s.revision_history_limit) else { return Ok(()) };
        let mut alive: Vec<&Arc<ReplicaSet>> =
            old.iter().filter(|rs| rs.metadata.deletion_timestamp.is_none()).collect();
        let excess = i32::try_from(alive.len()).unwrap_or(i32::MAX) - limit;
        if excess <= 0 {
            return Ok(());
        }
        alive.sort_by(|a, b| revision(a).cmp(&revision(b)).then_with(|| by_creation(a, b)));
        let def = self.defs.replicasets.clone();
        for rs in alive.into_iter().take(usize::try_from(excess).unwrap_or(0)) {
            let status = rs.status.clone().unwrap_or_default();
            if status.replicas != 0 || rs_replicas(rs) != 0 || rs.metadata.generation > status.observed_generation {
                continue;
            }
            let key = (rs.metadata.namespace.clone().unwrap_or_default(), rs.metadata.name.clone().unwrap_or_default());
            self.delete(&def, &key, rs.metadata.uid.as_deref(), None)?;
        }
        Ok(())
    }

    /// `syncRolloutStatus`, and a check when the progress deadline passes.
    fn sync_rollout_status(
        &mut self,
        key: &ObjKey,
        d: &Deployment,
        all: &[Arc<ReplicaSet>],
        new: Option<&ReplicaSet>,
    ) -> Result<(), ApiError> {
        let status = rollout_status(all, new, d, &self.now());
        if has_progress_deadline(d)
            && !complete(d, &status)
            && condition(&status, "Progressing").and_then(|c| c.reason.as_deref()) != Some("ProgressDeadlineExceeded")
            && let Some(at) = deadline(d, &status)
        {
            self.at(at.checked_add(jiff::SignedDuration::from_secs(1)).unwrap_or(at), Work::Deployment(key.clone()));
        }
        self.write_status(key, d, status)
    }

    fn write_status(&mut self, key: &ObjKey, d: &Deployment, status: DeploymentStatus) -> Result<(), ApiError> {
        if d.status.as_ref() == Some(&status) {
            return Ok(());
        }
        let def = self.defs.deployments.clone();
        self.update::<Deployment>(&def, key, d.metadata.uid.as_deref(), Part::Status, MANAGER, |dep| {
            dep.status = Some(status.clone())
        })?;
        Ok(())
    }
}

fn all(split: &Split) -> Vec<Arc<ReplicaSet>> {
    let mut all = split.old.clone();
    all.extend(split.new.clone());
    all
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn deployment(v: Value) -> Deployment {
        serde_json::from_value(v).unwrap()
    }

    fn rs(name: &str, replicas: i32, available: i32, created: &str) -> Arc<ReplicaSet> {
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": name, "creationTimestamp": created},
                "spec": {"replicas": replicas, "selector": {}},
                "status": {"replicas": replicas, "availableReplicas": available},
            }))
            .unwrap(),
        )
    }

    fn rolling(replicas: i32, surge: Value, unavailable: Value) -> Deployment {
        deployment(json!({
            "metadata": {"name": "web", "generation": 1},
            "spec": {"replicas": replicas, "selector": {}, "template": {},
                "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": surge, "maxUnavailable": unavailable}}},
        }))
    }

    #[test]
    fn fenceposts_round_surge_up_and_unavailable_down() {
        let p = |s: &str| IntOrString::String(s.into());
        assert_eq!(resolve_fenceposts(Some(&p("25%")), Some(&p("25%")), 10), (3, 2));
        assert_eq!(resolve_fenceposts(Some(&p("25%")), Some(&p("25%")), 1), (1, 0));
        assert_eq!(resolve_fenceposts(Some(&IntOrString::Int(0)), Some(&p("10%")), 5), (0, 1), "never both zero");
        let d = rolling(3, json!(0), json!("50%"));
        assert_eq!(max_unavailable(&d), 1);
        assert_eq!(max_surge(&d), 0);
    }

    #[test]
    fn rolling_update_surges_then_scales_old_down_within_availability() {
        // 3 replicas, maxSurge 1, maxUnavailable 0: one new pod at a time.
        let d = rolling(3, json!(1), json!(0));
        let old = rs("web-old", 3, 3, "2024-01-01T00:00:00Z");
        assert_eq!(new_rs_new_replicas(&d, std::slice::from_ref(&old), 0), 1);
        let new = rs("web-new", 1, 0, "2024-01-02T00:00:00Z");
        assert_eq!(new_rs_new_replicas(&d, &[old.clone(), new.clone()], 1), 1, "at the surge limit");
        assert!(scale_down_old(&d, std::slice::from_ref(&old), &new).is_empty(), "the new pod is not available yet");
        let new = rs("web-new", 1, 1, "2024-01-02T00:00:00Z");
        let plan = scale_down_old(&d, std::slice::from_ref(&old), &new);
        assert_eq!(
            plan.iter().map(|(r, n)| (r.metadata.name.clone().unwrap(), *n)).collect::<Vec<_>>(),
            [("web-old".to_string(), 2)]
        );
    }

    #[test]
    fn unhealthy_old_pods_go_first() {
        let d = rolling(4, json!(0), json!(1));
        let old = rs("web-old", 4, 2, "2024-01-01T00:00:00Z");
        let new = rs("web-new", 0, 0, "2024-01-02T00:00:00Z");
        // maxScaledDown = 4 - 3 - 0 = 1: one unavailable pod may go.
        let plan = scale_down_old(&d, &[old], &new);
        assert_eq!(plan[0].1, 3);
    }

    #[test]
    fn proportional_scaling_splits_by_size() {
        // Scaling 10 → 15 mid-rollout, maxSurge 3 (old max 13): the sets grow proportionally.
        let d = deployment(json!({
            "metadata": {"name": "web"},
            "spec": {"replicas": 15, "selector": {}, "template": {},
                "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 3, "maxUnavailable": 2}}},
        }));
        let with_max = |name: &str, replicas: i32, created: &str| {
            Arc::new(serde_json::from_value::<ReplicaSet>(json!({
                "metadata": {"name": name, "creationTimestamp": created, "annotations": {MAX_REPLICAS: "13", DESIRED_REPLICAS: "10"}},
                "spec": {"replicas": replicas, "selector": {}},
            })).unwrap())
        };
        let old = with_max("old", 8, "2024-01-01T00:00:00Z");
        let new = with_max("new", 5, "2024-01-02T00:00:00Z");
        let plan = scale_plan(&d, Some(&new), &[old]);
        let sizes: BTreeMap<String, i32> = plan.iter().map(|(r, n)| (r.metadata.name.clone().unwrap(), *n)).collect();
        assert_eq!(sizes.values().sum::<i32>(), 18, "replicas + maxSurge");
        assert_eq!(sizes["old"], 11);
        assert_eq!(sizes["new"], 7);
    }

    #[test]
    fn template_hash_is_stable_and_ignores_its_own_label() {
        let t: PodTemplateSpec = serde_json::from_value(
            json!({"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}),
        )
        .unwrap();
        let h = pod_template_hash(&t, None);
        assert_eq!(h, pod_template_hash(&t, None));
        assert_ne!(h, pod_template_hash(&t, Some(1)), "collisionCount changes the hash");
        assert!(h.chars().all(|c| "bcdfghjklmnpqrstvwxz2456789".contains(c)));
        let mut labelled = t.clone();
        labelled.metadata.as_mut().unwrap().labels.as_mut().unwrap().insert(POD_TEMPLATE_HASH.into(), h);
        assert!(equal_ignore_hash(&t, &labelled));
        let mut changed = t.clone();
        changed.spec.as_mut().unwrap().containers[0].image = Some("nginx:2".into());
        assert!(!equal_ignore_hash(&t, &changed));
    }

    #[test]
    fn status_reports_availability_and_progress() {
        let d = deployment(json!({
            "metadata": {"name": "web", "generation": 2},
            "spec": {"replicas": 2, "selector": {}, "template": {}, "progressDeadlineSeconds": 600,
                "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}}},
            "status": {"observedGeneration": 1, "conditions": [{"type": "Progressing", "status": "True", "reason": "NewReplicaSetCreated",
                "lastUpdateTime": "2024-01-01T00:00:00Z", "lastTransitionTime": "2024-01-01T00:00:00Z"}]},
        }));
        let now = Time(jiff::Timestamp::from_second(1_800_000_000).unwrap());
        let mut new: ReplicaSet = (*rs("web-abc", 2, 2, "2024-01-01T00:00:00Z")).clone();
        new.status.as_mut().unwrap().ready_replicas = Some(2);
        let new = Arc::new(new);
        let status = rollout_status(std::slice::from_ref(&new), Some(&new), &d, &now);
        assert_eq!(status.observed_generation, Some(2));
        assert_eq!(
            (status.replicas, status.updated_replicas, status.ready_replicas, status.available_replicas),
            (Some(2), Some(2), Some(2), Some(2))
        );
        assert_eq!(status.unavailable_replicas, None, "zero is omitted");
        let types: Vec<_> = status
            .conditions
            .as_ref()
            .unwrap()
            .iter()
            .map(|c| (c.type_.as_str(), c.reason.as_deref().unwrap()))
            .collect();
        assert_eq!(types, [("Available", "MinimumReplicasAvailable"), ("Progressing", "NewReplicaSetAvailable")]);
        let progressing = condition(&status, "Progressing").unwrap();
        assert_eq!(progressing.message.as_deref(), Some("ReplicaSet \"web-abc\" has successfully progressed."));
        assert_eq!(
            progressing.last_transition_time.as_ref().unwrap().0.as_second(),
            1_704_067_200,
            "status stayed True"
        );

        // Nothing moves for longer than the deadline: the rollout times out.
        let mut d = d;
        let old = d.status.as_mut().unwrap();
        (old.replicas, old.updated_replicas) = (Some(2), Some(2));
        let stuck = rs("web-abc", 2, 0, "2024-01-01T00:00:00Z");
        let status = rollout_status(std::slice::from_ref(&stuck), Some(&stuck), &d, &now);
        let progressing = condition(&status, "Progressing").unwrap();
        assert_eq!(
            (progressing.status.as_str(), progressing.reason.as_deref()),
            ("False", Some("ProgressDeadlineExceeded"))
        );
        assert_eq!(condition(&status, "Available").unwrap().status, "False");
    }
}

//! The Job controller (`pkg/controller/job`) and the TTL-after-finished controller
//! (`pkg/controller/ttlafterfinished`), for `NonIndexed` Jobs.
//!
//! * Pods are created from the template (`generateName: <job>-`, a controller owner reference)
//!   until `parallelism` run at once, and no more than the `completions` still missing; a Job
//!   without `completions` runs `parallelism` pods until one succeeds. Surplus pods are deleted.
//!   Pods being deleted are replaced at once (`podReplacementPolicy: TerminatingOrFailed`).
//!   A suspended Job runs no pods.
//! * Finished pods are counted once into `status.succeeded` and `status.failed`; the counts
//!   stay when the pods go. (Upstream keeps a `batch.kubernetes.io/job-tracking` finalizer on
//!   its pods so that a pod deleted before it was counted is still counted; this controller
//!   sees every pod change in order and does without it.)
//! * The Job succeeds when `completions` pods succeeded (without `completions`: when one did
//!   and none runs): conditions `SuccessCriteriaMet` and `Complete`, `completionTime`.
//!   It fails when more pods failed than `backoffLimit` (`OnFailure` pods: when their container
//!   restarts reach it), or when it ran longer than `activeDeadlineSeconds`: its running pods
//!   are deleted, conditions `FailureTarget` and `Failed` with upstream's reasons and messages.
//! * A finished Job with `ttlSecondsAfterFinished` is deleted (foreground) that long after it
//!   finished.
//!
//! `completionMode: Indexed`, `backoffLimitPerIndex`, `podFailurePolicy` and `successPolicy`
//! are not simulated: such Jobs are stored and run as `NonIndexed` ones.

use std::collections::HashSet;
use std::sync::Arc;

use k8s_openapi::api::batch::v1::{Job, JobCondition, JobStatus, UncountedTerminatedPods};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};

use super::runtime::{Runtime, Work};
use crate::api::eviction::{is_pod_ready, pod_phase};
use crate::api::{DeleteOptions, Part, PropagationPolicy};
use crate::store::ObjKey;

const MANAGER: &str = "kube-controller-manager";
/// At most this many pods are created or deleted per sync.
const BURST: usize = 500;

/// What a sync decided about a Job's pods and status.
#[derive(Debug, PartialEq)]
pub(super) struct Plan {
    /// Pods to create.
    pub create: usize,
    /// Pods to delete (uids of active pods).
    pub delete: Vec<String>,
    /// The status to write.
    pub status: JobStatus,
    /// Pods counted by this status for the first time.
    pub counted: Vec<String>,
    /// When to look again (deadline).
    pub wake: Option<jiff::Timestamp>,
}

fn condition(type_: &str, reason: &str, message: &str, now: &Time) -> JobCondition {
    JobCondition {
        type_: type_.into(),
        status: "True".into(),
        reason: Some(reason.into()),
        message: Some(message.into()),
        last_probe_time: Some(now.clone()),
        last_transition_time: Some(now.clone()),
    }
}

/// Whether the Job has finished (a `Complete` or `Failed` condition is True), and when.
pub(super) fn finished_at(job: &Job) -> Option<jiff::Timestamp> {
    let status = job.status.as_ref()?;
    let finished = status
        .conditions
        .as_ref()?
        .iter()
        .find(|c| (c.type_ == "Complete" || c.type_ == "Failed") && c.status == "True")?;
    Some(
        status
            .completion_time
            .as_ref()
            .or(finished.last_transition_time.as_ref())
            .map(|t| t.0)
            .unwrap_or(jiff::Timestamp::UNIX_EPOCH),
    )
}

fn restarts(pod: &Pod) -> i32 {
    let status = pod.status.as_ref();
    [status.and_then(|s| s.container_statuses.as_ref()), status.and_then(|s| s.init_container_statuses.as_ref())]
        .into_iter()
        .flatten()
        .flatten()
        .map(|c| c.restart_count)
        .sum()
}

/// Decide what to do with an unfinished Job and its pods. `counted` holds the uids of pods
/// that the Job's status counts already.
pub(super) fn plan(job: &Job, pods: &[Arc<Pod>], counted: &HashSet<String>, now: &Time) -> Plan {
    let spec = job.spec.clone().unwrap_or_default();
    let old = job.status.clone().unwrap_or_default();
    let uid = |p: &Pod| p.metadata.uid.clone().unwrap_or_default();
    let mut active: Vec<&Arc<Pod>> = Vec::new();
    let mut new_succeeded = Vec::new();
    let mut new_failed = Vec::new();
    let mut terminating = 0;
    for pod in pods {
        match pod_phase(pod) {
            "Succeeded" if !counted.contains(&uid(pod)) => new_succeeded.push(uid(pod)),
            "Failed" if !counted.contains(&uid(pod)) => new_failed.push(uid(pod)),
            "Succeeded" | "Failed" => {}
            _ if pod.metadata.deletion_timestamp.is_some() => terminating += 1,
            _ => active.push(pod),
        }
    }
    let succeeded = old.succeeded.unwrap_or(0) + i32::try_from(new_succeeded.len()).unwrap_or(i32::MAX);
    let mut failed = old.failed.unwrap_or(0) + i32::try_from(new_failed.len()).unwrap_or(i32::MAX);
    let suspended = spec.suspend == Some(true);
    let start_time = old.start_time.clone().or_else(|| (!suspended).then(|| now.clone()));
    let backoff_limit = spec.backoff_limit.unwrap_or(6);
    let on_failure = spec.template.spec.as_ref().and_then(|s| s.restart_policy.as_deref()) == Some("OnFailure");
    let restarted: i32 = active.iter().map(|p| restarts(p)).sum();
    let past_backoff_on_failure =
        on_failure && if backoff_limit == 0 { restarted > 0 } else { restarted >= backoff_limit };
    let deadline = spec.active_deadline_seconds.zip(start_time.as_ref()).map(|(seconds, start)| {
        start.0.checked_add(jiff::SignedDuration::from_secs(seconds)).unwrap_or(jiff::Timestamp::MAX)
    });
    let failure = if failed > backoff_limit || past_backoff_on_failure {
        Some(("BackoffLimitExceeded", "Job has reached the specified backoff limit"))
    } else if deadline.is_some_and(|d| d <= now.0) && !suspended {
        Some(("DeadlineExceeded", "Job was active longer than specified deadline"))
    } else {
        None
    };
    let complete = match spec.completions {
        Some(completions) => succeeded >= completions,
        None => succeeded >= 1 && active.is_empty(),
    };

    let mut conditions = old.conditions.clone().unwrap_or_default();
    let mut completion_time = old.completion_time.clone();
    let mut create = 0;
    let mut delete: Vec<String> = Vec::new();
    let mut wake = None;
    if let Some((reason, message)) = failure {
        // The running pods are deleted and count as failed.
        delete = active.iter().map(|p| uid(p)).collect();
        failed += i32::try_from(delete.len()).unwrap_or(0);
        conditions.push(condition("FailureTarget", reason, message, now));
        conditions.push(condition("Failed", reason, message, now));
    } else if complete {
        delete = active.iter().map(|p| uid(p)).collect();
        let message = "Reached expected number of succeeded pods";
        conditions.push(condition("SuccessCriteriaMet", "CompletionsReached", message, now));
        conditions.push(condition("Complete", "CompletionsReached", message, now));
        completion_time = Some(now.clone());
    } else {
        let parallelism = usize::try_from(spec.parallelism.unwrap_or(1)).unwrap_or(0);
        let wanted = if suspended {
            0
        } else {
            match spec.completions {
                Some(completions) => {
                    parallelism.min(usize::try_from(completions.saturating_sub(succeeded)).unwrap_or(0))
                }
                // Without completions, once one succeeded the rest are left to finish.
                None if succeeded > 0 => active.len(),
                None => parallelism,
            }
        };
        if active.len() < wanted {
            create = (wanted - active.len()).min(BURST);
        } else if active.len() > wanted {
            // The newest go first.
            let mut order = active.clone();
            order.sort_by_key(|p| std::cmp::Reverse(p.metadata.creation_timestamp.as_ref().map(|t| t.0)));
            delete = order.into_iter().take((active.len() - wanted).min(BURST)).map(|p| uid(p)).collect();
        }
        wake = deadline.filter(|_| !suspended);
    }
    let running = if failure.is_some() || complete { 0 } else { active.len() - delete.len() + create };
    let ready = if failure.is_some() || complete {
        0
    } else {
        active.iter().filter(|p| is_pod_ready(p) && !delete.contains(&uid(p))).count()
    };
    let count = |n: usize| i32::try_from(n).unwrap_or(i32::MAX);
    let nonzero = |n: i32| (n > 0).then_some(n);
    let status = JobStatus {
        start_time,
        completion_time,
        active: nonzero(count(running)),
        succeeded: nonzero(succeeded),
        failed: nonzero(failed),
        ready: Some(count(ready)),
        terminating: Some(terminating + count(delete.len())),
        conditions: (!conditions.is_empty()).then_some(conditions),
        uncounted_terminated_pods: Some(UncountedTerminatedPods::default()),
        ..old
    };
    Plan { create, delete, status, counted: new_succeeded.into_iter().chain(new_failed).collect(), wake }
}

/// The pod a Job creates (`controller.GetPodFromTemplate`).
fn pod_from_template(job: &Job) -> Pod {
    let template = job.spec.as_ref().map(|s| s.template.clone()).unwrap_or_default();
    let meta = template.metadata.unwrap_or_default();
    let name = job.metadata.name.clone().unwrap_or_default();
    Pod {
        metadata: ObjectMeta {
            generate_name: Some(format!("{name}-")),
            namespace: job.metadata.namespace.clone(),
            labels: meta.labels,
            annotations: meta.annotations,
            finalizers: meta.finalizers,
            owner_references: Some(vec![OwnerReference {
                api_version: "batch/v1".into(),
                kind: "Job".into(),
                name,
                uid: job.metadata.uid.clone().unwrap_or_default(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..ObjectMeta::default()
        },
        spec: template.spec,
        status: None,
    }
}

impl Runtime {
    /// Converge one Job.
    pub(super) fn sync_job(&mut self, key: &ObjKey) {
        let Some(job) = self.cache.jobs.get(key).cloned() else { return };
        let Some(uid) = job.metadata.uid.clone() else { return };
        if job.metadata.deletion_timestamp.is_some() {
            return;
        }
        if let Some(finished) = finished_at(&job) {
            self.expire_job(key, &job, &uid, finished);
            return;
        }
        let pods: Vec<Arc<Pod>> =
            self.cache.pods_by_controller.get(&uid).filter_map(|k| self.cache.pods.get(k).cloned()).collect();
        let plan = plan(&job, &pods, &self.counted, &self.now());
        let pods_def = self.defs.pods.clone();
        if plan.create > 0 {
            let pod = pod_from_template(&job);
            for _ in 0..plan.create {
                if let Err(e) = self.create(&pods_def, &key.0, &pod, MANAGER) {
                    self.retry(Work::Job(key.clone()), &e);
                    return;
                }
            }
        }
        for pod in pods.iter().filter(|p| p.metadata.uid.as_ref().is_some_and(|u| plan.delete.contains(u))) {
            let pod_key = (key.0.clone(), pod.metadata.name.clone().unwrap_or_default());
            if let Err(e) = self.delete(&pods_def, &pod_key, pod.metadata.uid.as_deref(), None) {
                self.retry(Work::Job(key.clone()), &e);
                return;
            }
        }
        if let Some(at) = plan.wake {
            self.at(at, Work::Job(key.clone()));
        }
        if job.status.as_ref() != Some(&plan.status) {
            let def = self.defs.jobs.clone();
            let status = plan.status.clone();
            if let Err(e) =
                self.update::<Job>(&def, key, Some(&uid), Part::Status, MANAGER, |j| j.status = Some(status.clone()))
            {
                if e.code != 404 {
                    self.retry(Work::Job(key.clone()), &e);
                }
                return;
            }
        }
        self.counted.extend(plan.counted);
    }

    /// `ttlSecondsAfterFinished`: delete the finished Job when its time is up.
    fn expire_job(&mut self, key: &ObjKey, job: &Job, uid: &str, finished: jiff::Timestamp) {
        let Some(ttl) = job.spec.as_ref().and_then(|s| s.ttl_seconds_after_finished) else { return };
        let at = finished.checked_add(jiff::SignedDuration::from_secs(i64::from(ttl))).unwrap_or(jiff::Timestamp::MAX);
        if at > self.api.clock.now() {
            self.at(at, Work::Job(key.clone()));
            return;
        }
        let opts = DeleteOptions {
            precondition_uid: Some(uid.to_string()),
            propagation: Some(PropagationPolicy::Foreground),
            ..DeleteOptions::default()
        };
        match self.api.delete(&self.defs.jobs, &key.0, &key.1, &opts) {
            Ok(_) => {}
            Err(e) if e.code == 404 || e.code == 409 => {}
            Err(e) => self.retry(Work::Job(key.clone()), &e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn job(spec: Value) -> Job {
        let mut spec = spec;
        spec["template"] = json!({"spec": {"restartPolicy": "Never", "containers": [{"name": "c"}]}});
        serde_json::from_value(json!({"metadata": {"name": "j", "uid": "job-uid"}, "spec": spec})).unwrap()
    }

    fn pod(uid: &str, phase: &str) -> Arc<Pod> {
        Arc::new(
            serde_json::from_value(json!({"metadata": {"name": uid, "uid": uid}, "status": {"phase": phase}})).unwrap(),
        )
    }

    fn now() -> Time {
        Time(jiff::Timestamp::from_second(1000).unwrap())
    }

    fn types(status: &JobStatus) -> Vec<&str> {
        status.conditions.iter().flatten().map(|c| c.type_.as_str()).collect()
    }

    #[test]
    fn parallelism_is_capped_by_the_completions_still_missing() {
        let j = job(json!({"completions": 3, "parallelism": 2}));
        let p = plan(&j, &[], &HashSet::new(), &now());
        assert_eq!(p.create, 2);
        assert_eq!(p.status.active, Some(2));
        assert_eq!(p.status.start_time, Some(now()));

        let pods = [pod("a", "Succeeded"), pod("b", "Succeeded"), pod("c", "Running")];
        let p = plan(&j, &pods, &HashSet::new(), &now());
        assert_eq!((p.create, p.status.active, p.status.succeeded), (0, Some(1), Some(2)));
        assert_eq!(p.counted, ["a", "b"]);
    }

    #[test]
    fn completions_reached_complete_the_job_once() {
        let j = job(json!({"completions": 1, "parallelism": 1}));
        let p = plan(&j, &[pod("a", "Succeeded")], &HashSet::new(), &now());
        assert_eq!(types(&p.status), ["SuccessCriteriaMet", "Complete"]);
        assert_eq!(p.status.completion_time, Some(now()));
        assert_eq!(p.status.succeeded, Some(1));
        assert_eq!(p.status.active, None);
        let mut done = j.clone();
        done.status = Some(p.status);
        assert_eq!(finished_at(&done), Some(now().0));
    }

    #[test]
    fn counted_pods_are_not_counted_again() {
        let mut j = job(json!({"completions": 2, "parallelism": 1}));
        j.status = Some(JobStatus { succeeded: Some(1), ..JobStatus::default() });
        let counted: HashSet<String> = ["a".to_string()].into();
        let p = plan(&j, &[pod("a", "Succeeded")], &counted, &now());
        assert_eq!(p.status.succeeded, Some(1));
        assert_eq!(p.create, 1);
    }

    #[test]
    fn failures_beyond_the_backoff_limit_fail_the_job_and_stop_its_pods() {
        let j = job(json!({"completions": 5, "parallelism": 2, "backoffLimit": 1}));
        let pods = [pod("a", "Failed"), pod("b", "Running")];
        let p = plan(&j, &pods, &HashSet::new(), &now());
        assert_eq!((p.create, p.status.failed), (1, Some(1)), "one failure is within the limit");
        let pods = [pod("a", "Failed"), pod("b", "Failed"), pod("c", "Running")];
        let p = plan(&j, &pods, &HashSet::new(), &now());
        assert_eq!(types(&p.status), ["FailureTarget", "Failed"]);
        let failed = p.status.conditions.as_ref().unwrap().last().unwrap();
        assert_eq!(failed.reason.as_deref(), Some("BackoffLimitExceeded"));
        assert_eq!(failed.message.as_deref(), Some("Job has reached the specified backoff limit"));
        assert_eq!(p.delete, ["c"]);
        assert_eq!(p.status.failed, Some(3));
        assert_eq!(p.status.active, None);
    }

    #[test]
    fn the_active_deadline_fails_the_job() {
        let mut j = job(json!({"completions": 1, "activeDeadlineSeconds": 10}));
        let p = plan(&j, &[], &HashSet::new(), &now());
        assert_eq!(p.wake, Some(jiff::Timestamp::from_second(1010).unwrap()));
        j.status = Some(JobStatus {
            start_time: Some(Time(jiff::Timestamp::from_second(900).unwrap())),
            ..JobStatus::default()
        });
        let p = plan(&j, &[pod("a", "Running")], &HashSet::new(), &now());
        let failed = p.status.conditions.as_ref().unwrap().last().unwrap();
        assert_eq!(failed.reason.as_deref(), Some("DeadlineExceeded"));
        assert_eq!(p.delete, ["a"]);
    }

    #[test]
    fn without_completions_one_success_ends_the_job_when_the_rest_stopped() {
        let j = job(json!({"parallelism": 2}));
        let p = plan(&j, &[pod("a", "Succeeded"), pod("b", "Running")], &HashSet::new(), &now());
        assert!(types(&p.status).is_empty());
        assert_eq!((p.create, p.delete.len()), (0, 0));
        let p = plan(&j, &[pod("a", "Succeeded"), pod("b", "Succeeded")], &HashSet::new(), &now());
        assert_eq!(types(&p.status), ["SuccessCriteriaMet", "Complete"]);
    }

    #[test]
    fn a_suspended_job_runs_nothing() {
        let j = job(json!({"completions": 1, "suspend": true}));
        let p = plan(&j, &[pod("a", "Running")], &HashSet::new(), &now());
        assert_eq!(p.delete, ["a"]);
        assert_eq!(p.status.start_time, None);
    }
}

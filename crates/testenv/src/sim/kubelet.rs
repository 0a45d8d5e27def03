//! The kubelet of simulated nodes: what `pkg/kubelet` reports for the pods bound to its node.
//!
//! * A bound pod starts at once: phase `Running`, `startTime`, `hostIP`, a `podIP` from the
//!   node's pod CIDR (the node's own address for `hostNetwork` pods), running container
//!   statuses, completed init containers, and the conditions `PodReadyToStartContainers`,
//!   `Initialized`, `ContainersReady` and `Ready` (`pkg/kubelet/status/generate.go`).
//! * Containers are Ready according to the [`ReadinessPolicy`]; the pod is Ready when they are
//!   and every readiness gate's condition, written by someone else, is `True`
//!   (`GeneratePodReadyCondition`, with its `ContainersNotReady` and `ReadinessGatesNotReady`
//!   reasons and messages). A NotReady node makes its pods unready, as the node lifecycle
//!   controller's `MarkPodsNotReady` does.
//! * Pods with `restartPolicy` `Never` or `OnFailure` complete by their [`CompletionPolicy`]:
//!   containers terminated with the exit code, phase `Succeeded` (all 0) or `Failed`; an
//!   `OnFailure` pod that exits non-zero is restarted in place after a back-off instead.
//! * Deletion: the containers stop by the [`TerminationPolicy`] (exit code 143) and the kubelet
//!   deletes the pod with grace 0. With `FullGracePeriod` the API layer's grace reaper deletes
//!   it when its grace period ends; if finalizers keep it, the kubelet reports what a kubelet
//!   reports after killing the containers: terminated (exit code 137), unready, phase `Failed`.
//! * Pods on a node with a `NoExecute` taint they do not tolerate are deleted, at once or
//!   after the shortest matching `tolerationSeconds` (the taint eviction controller).

use std::collections::BTreeSet;
use std::hash::{Hash, Hasher};
use std::net::Ipv4Addr;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStatus, HostIP, Node, Pod, PodCondition,
    PodIP, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::runtime::{Runtime, Work};
use super::{
    COMPLETION_ANNOTATION, CompletionPolicy, EXIT_CODE_ANNOTATION, READINESS_ANNOTATION, ReadinessPolicy, SimNode,
    TerminationPolicy,
};
use crate::api::Part;
use crate::api::eviction::pod_phase;
use crate::store::ObjKey;

const MANAGER: &str = "kubelet";
/// The exit code of a container killed at the end of its grace period (SIGKILL).
const KILLED: i32 = 137;
/// The exit code of a container that stopped on SIGTERM.
const STOPPED: i32 = 143;
/// Conditions the kubelet owns, in the order it reports them.
const KUBELET_CONDITIONS: [&str; 4] = ["PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady"];

/// Whether a pod's containers are Ready now, and if not, when they will be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Readiness {
    pub ready: bool,
    pub at: Option<jiff::Timestamp>,
}

/// Decide container readiness: a NotReady node, then the test's override, then the policy.
pub(super) fn readiness(
    policy: ReadinessPolicy,
    overridden: Option<bool>,
    node_ready: bool,
    started: jiff::Timestamp,
    now: jiff::Timestamp,
) -> Readiness {
    if !node_ready {
        return Readiness { ready: false, at: None };
    }
    if let Some(ready) = overridden {
        return Readiness { ready, at: None };
    }
    match policy {
        ReadinessPolicy::Immediate => Readiness { ready: true, at: None },
        ReadinessPolicy::Never | ReadinessPolicy::Manual => Readiness { ready: false, at: None },
        ReadinessPolicy::After(delay) => {
            let delay = jiff::SignedDuration::try_from(delay).unwrap_or(jiff::SignedDuration::MAX);
            let at = started.checked_add(delay).unwrap_or(jiff::Timestamp::MAX);
            if at <= now { Readiness { ready: true, at: None } } else { Readiness { ready: false, at: Some(at) } }
        }
    }
}

/// The pod's own policy (annotation), else the default.
fn policy_of(pod: &Pod, default: ReadinessPolicy) -> ReadinessPolicy {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(READINESS_ANNOTATION))
        .and_then(|v| ReadinessPolicy::parse(v))
        .unwrap_or(default)
}

/// A stable 64-hex-digit identifier (container and image IDs) derived from `parts`.
pub(super) fn hex_id(parts: &[&str]) -> String {
    (0..4u8)
        .map(|round| {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            round.hash(&mut h);
            parts.hash(&mut h);
            format!("{:016x}", h.finish())
        })
        .collect()
}

/// `docker.io/library/nginx@sha256:…` for `nginx:1.27`.
fn image_id(image: &str) -> String {
    let repository = match image.rsplit_once('@') {
        Some((repo, _)) => repo,
        None => match image.rsplit_once(':') {
            Some((repo, tag)) if !tag.contains('/') => repo,
            _ => image,
        },
    };
    let qualified = match repository.split_once('/') {
        None => format!("docker.io/library/{repository}"),
        Some((host, _)) if host.contains('.') || host.contains(':') || host == "localhost" => repository.to_string(),
        Some(_) => format!("docker.io/{repository}"),
    };
    format!("{qualified}@sha256:{}", hex_id(&[image]))
}

/// Add or replace a condition, keeping its transition time while its status holds.
pub(super) fn set_pod_condition(conditions: &mut Vec<PodCondition>, mut wanted: PodCondition) {
    match conditions.iter_mut().find(|c| c.type_ == wanted.type_) {
        Some(existing) => {
            if existing.status == wanted.status {
                wanted.last_transition_time = existing.last_transition_time.clone();
            }
            *existing = wanted;
        }
        None => conditions.push(wanted),
    }
}

fn condition(type_: &str, ready: bool, reason: Option<String>, message: Option<String>, now: &Time) -> PodCondition {
    PodCondition {
        type_: type_.into(),
        status: if ready { "True" } else { "False" }.into(),
        reason,
        message,
        last_transition_time: Some(now.clone()),
        last_probe_time: None,
        observed_generation: None,
    }
}

/// The kubelet's conditions first, in its order, then the rest as they were.
fn order_conditions(conditions: &mut [PodCondition]) {
    conditions
        .sort_by_key(|c| KUBELET_CONDITIONS.iter().position(|t| *t == c.type_).unwrap_or(KUBELET_CONDITIONS.len()));
}

/// `GeneratePodReadyCondition`: Ready needs ready containers and every readiness gate True.
fn ready_condition(pod: &Pod, conditions: &[PodCondition], containers: &Option<String>, now: &Time) -> PodCondition {
    if let Some(message) = containers {
        return condition("Ready", false, Some("ContainersNotReady".into()), Some(message.clone()), now);
    }
    let gates = pod.spec.as_ref().and_then(|s| s.readiness_gates.as_ref()).map(Vec::as_slice).unwrap_or(&[]);
    let unready: Vec<String> = gates
        .iter()
        .filter_map(|gate| match conditions.iter().find(|c| c.type_ == gate.condition_type) {
            None => Some(format!(
                "corresponding condition of pod readiness gate \"{}\" does not exist.",
                gate.condition_type
            )),
            Some(c) if c.status != "True" => Some(format!(
                "the status of pod readiness gate \"{}\" is not \"True\", but {}",
                gate.condition_type, c.status
            )),
            Some(_) => None,
        })
        .collect();
    if unready.is_empty() {
        condition("Ready", true, None, None, now)
    } else {
        condition("Ready", false, Some("ReadinessGatesNotReady".into()), Some(unready.join(", ")), now)
    }
}

/// The status of a running pod.
pub(super) fn running_status(
    pod: &Pod,
    host_ip: Ipv4Addr,
    pod_ip: Ipv4Addr,
    containers_ready: bool,
    now: &Time,
) -> PodStatus {
    let old = pod.status.clone().unwrap_or_default();
    let started = old.start_time.clone().unwrap_or_else(|| now.clone());
    let uid = pod.metadata.uid.as_deref().unwrap_or("");
    let spec = pod.spec.clone().unwrap_or_default();
    let previous = |list: &Option<Vec<ContainerStatus>>, name: &str| {
        list.as_ref().and_then(|l| l.iter().find(|s| s.name == name)).cloned()
    };
    let containers: Vec<ContainerStatus> = spec
        .containers
        .iter()
        .map(|c| {
            let image = c.image.clone().unwrap_or_default();
            let before = previous(&old.container_statuses, &c.name);
            let since = before.clone().and_then(|s| s.state?.running?.started_at).unwrap_or_else(|| started.clone());
            ContainerStatus {
                name: c.name.clone(),
                image_id: image_id(&image),
                image,
                container_id: Some(format!("containerd://{}", hex_id(&[uid, &c.name]))),
                ready: containers_ready,
                started: Some(true),
                restart_count: before.as_ref().map_or(0, |s| s.restart_count),
                state: Some(ContainerState {
                    running: Some(ContainerStateRunning { started_at: Some(since) }),
                    ..ContainerState::default()
                }),
                last_state: Some(before.and_then(|s| s.last_state).unwrap_or_default()),
                ..ContainerStatus::default()
            }
        })
        .collect();
    let init: Vec<ContainerStatus> = spec
        .init_containers
        .iter()
        .flatten()
        .map(|c| {
            let image = c.image.clone().unwrap_or_default();
            let id = format!("containerd://{}", hex_id(&[uid, &c.name]));
            ContainerStatus {
                name: c.name.clone(),
                image_id: image_id(&image),
                image,
                container_id: Some(id.clone()),
                ready: true,
                started: Some(false),
                restart_count: 0,
                state: Some(ContainerState {
                    terminated: Some(ContainerStateTerminated {
                        container_id: Some(id),
                        exit_code: 0,
                        reason: Some("Completed".into()),
                        started_at: Some(started.clone()),
                        finished_at: Some(started.clone()),
                        ..ContainerStateTerminated::default()
                    }),
                    ..ContainerState::default()
                }),
                last_state: Some(ContainerState::default()),
                ..ContainerStatus::default()
            }
        })
        .collect();

    let unready_message = (!containers_ready).then(|| {
        let names: Vec<&str> = spec.containers.iter().map(|c| c.name.as_str()).collect();
        format!("containers with unready status: [{}]", names.join(" "))
    });
    let mut conditions = old.conditions.clone().unwrap_or_default();
    set_pod_condition(&mut conditions, condition("PodReadyToStartContainers", true, None, None, now));
    set_pod_condition(&mut conditions, condition("Initialized", true, None, None, now));
    let containers_condition = condition(
        "ContainersReady",
        containers_ready,
        unready_message.as_ref().map(|_| "ContainersNotReady".to_string()),
        unready_message.clone(),
        now,
    );
    set_pod_condition(&mut conditions, containers_condition);
    let ready = ready_condition(pod, &conditions, &unready_message, now);
    set_pod_condition(&mut conditions, ready);
    order_conditions(&mut conditions);

    PodStatus {
        phase: Some("Running".into()),
        conditions: Some(conditions),
        host_ip: Some(host_ip.to_string()),
        host_ips: Some(vec![HostIP { ip: host_ip.to_string() }]),
        pod_ip: Some(pod_ip.to_string()),
        pod_ips: Some(vec![PodIP { ip: pod_ip.to_string() }]),
        start_time: Some(started),
        container_statuses: Some(containers),
        init_container_statuses: (!init.is_empty()).then_some(init),
        ..old
    }
}

/// The restart policy of a pod (`Always` when unset).
fn restart_policy(pod: &Pod) -> &str {
    pod.spec.as_ref().and_then(|s| s.restart_policy.as_deref()).unwrap_or("Always")
}

/// The pod's own completion policy (annotation), else the default.
fn completion_policy_of(pod: &Pod, default: CompletionPolicy) -> CompletionPolicy {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(COMPLETION_ANNOTATION))
        .and_then(|v| CompletionPolicy::parse(v))
        .unwrap_or(default)
}

/// When a running pod's containers exit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Exit {
    /// Now, with this exit code.
    Now(i32),
    /// Later.
    At(jiff::Timestamp),
}

/// Whether the containers of a pod that is not restarted have exited (by the
/// [`CompletionPolicy`] and [`EXIT_CODE_ANNOTATION`]); `None` for pods that run on.
fn completion_of(pod: &Pod, policy: CompletionPolicy, started: jiff::Timestamp, now: jiff::Timestamp) -> Option<Exit> {
    if restart_policy(pod) == "Always" {
        return None;
    }
    let at = match policy {
        CompletionPolicy::Never => return None,
        CompletionPolicy::Immediate => started,
        CompletionPolicy::After(delay) => {
            started.checked_add(jiff::SignedDuration::try_from(delay).ok()?).unwrap_or(jiff::Timestamp::MAX)
        }
    };
    if at > now {
        return Some(Exit::At(at));
    }
    let code = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(EXIT_CODE_ANNOTATION))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    Some(Exit::Now(code))
}

/// The status after an `OnFailure` pod's containers exited with `code` and were restarted.
fn restarted_status(pod: &Pod, code: i32, now: &Time) -> PodStatus {
    let mut status = pod.status.clone().unwrap_or_default();
    if let Some(list) = status.container_statuses.as_mut() {
        for s in list.iter_mut() {
            let started_at = s.state.as_ref().and_then(|st| st.running.as_ref()).and_then(|r| r.started_at.clone());
            s.last_state = Some(ContainerState {
                terminated: Some(ContainerStateTerminated {
                    container_id: s.container_id.clone(),
                    exit_code: code,
                    reason: Some("Error".into()),
                    started_at,
                    finished_at: Some(now.clone()),
                    ..ContainerStateTerminated::default()
                }),
                ..ContainerState::default()
            });
            s.restart_count += 1;
            s.state = Some(ContainerState {
                running: Some(ContainerStateRunning { started_at: Some(now.clone()) }),
                ..ContainerState::default()
            });
        }
    }
    status
}

/// The status after the containers stopped with `code`: killed at the end of the grace
/// period ([`KILLED`]), stopped on SIGTERM ([`STOPPED`]), or exited by themselves. The pod is
/// `Succeeded` when every container exited with 0, else `Failed`.
fn terminated_status(pod: &Pod, code: i32, now: &Time) -> PodStatus {
    let old = pod.status.clone().unwrap_or_default();
    let containers: Option<Vec<ContainerStatus>> = old.container_statuses.clone().map(|list| {
        list.into_iter()
            .map(|s| {
                let started_at = s.state.as_ref().and_then(|st| st.running.as_ref()).and_then(|r| r.started_at.clone());
                let terminated = match s.state.as_ref().and_then(|st| st.terminated.clone()) {
                    Some(t) => t,
                    None => ContainerStateTerminated {
                        container_id: s.container_id.clone(),
                        exit_code: code,
                        reason: Some(if code == 0 { "Completed" } else { "Error" }.into()),
                        started_at,
                        finished_at: Some(now.clone()),
                        ..ContainerStateTerminated::default()
                    },
                };
                ContainerStatus {
                    ready: false,
                    started: Some(false),
                    state: Some(ContainerState { terminated: Some(terminated), ..ContainerState::default() }),
                    ..s
                }
            })
            .collect()
    });
    let mut conditions = old.conditions.clone().unwrap_or_default();
    for type_ in ["Ready", "ContainersReady"] {
        set_pod_condition(&mut conditions, condition(type_, false, Some("PodCompleted".into()), None, now));
    }
    set_pod_condition(&mut conditions, condition("PodReadyToStartContainers", false, None, None, now));
    order_conditions(&mut conditions);
    let succeeded = containers.as_ref().is_some_and(|l| !l.is_empty())
        && containers
            .iter()
            .flatten()
            .all(|s| s.state.as_ref().and_then(|st| st.terminated.as_ref()).is_some_and(|t| t.exit_code == 0));
    let phase = if succeeded { "Succeeded" } else { "Failed" };
    PodStatus { phase: Some(phase.into()), conditions: Some(conditions), container_statuses: containers, ..old }
}

/// Whether a toleration tolerates a taint (`Toleration.ToleratesTaint`).
pub(super) fn tolerates(
    toleration: &k8s_openapi::api::core::v1::Toleration,
    taint: &k8s_openapi::api::core::v1::Taint,
) -> bool {
    if toleration.effect.as_deref().is_some_and(|e| !e.is_empty() && e != taint.effect) {
        return false;
    }
    if toleration.key.as_deref().is_some_and(|k| !k.is_empty() && k != taint.key) {
        return false;
    }
    match toleration.operator.as_deref().unwrap_or("Equal") {
        "Exists" => true,
        "Equal" | "" => toleration.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or(""),
        _ => false,
    }
}

/// When the taint eviction controller deletes a pod from a node: `Some(None)` at once,
/// `Some(Some(t))` at `t`, `None` never.
fn noexecute_deadline(pod: &Pod, node: &Node, now: jiff::Timestamp) -> Option<Option<jiff::Timestamp>> {
    let taints: Vec<_> = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .map(|t| t.iter().filter(|t| t.effect == "NoExecute").collect())
        .unwrap_or_default();
    if taints.is_empty() {
        return None;
    }
    let tolerations = pod.spec.as_ref().and_then(|s| s.tolerations.clone()).unwrap_or_default();
    let mut deadline: Option<jiff::Timestamp> = None;
    for taint in taints {
        let matching: Vec<_> = tolerations.iter().filter(|t| tolerates(t, taint)).collect();
        if matching.is_empty() {
            return Some(None);
        }
        // The shortest tolerationSeconds of the tolerations used; none means forever.
        if let Some(seconds) = matching.iter().filter_map(|t| t.toleration_seconds).min() {
            let since = taint.time_added.as_ref().map(|t| t.0).unwrap_or(now);
            let at = since.checked_add(jiff::SignedDuration::from_secs(seconds.max(0))).unwrap_or(since);
            deadline = Some(deadline.map_or(at, |d| d.min(at)));
        }
    }
    deadline.map(|at| if at <= now { None } else { Some(at) })
}

impl Runtime {
    /// Bring the status of one pod of a simulated node in line with the simulation.
    pub(super) fn sync_pod(&mut self, key: &ObjKey) {
        let Some(pod) = self.cache.pods.get(key).cloned() else { return };
        let Some(node_name) = pod.spec.as_ref().and_then(|s| s.node_name.clone()).filter(|n| !n.is_empty()) else {
            return;
        };
        let (sim, policy, overridden) = {
            let control = self.shared.control.lock();
            let Some(sim) = control.nodes.get(&node_name).cloned() else { return };
            let overridden = pod.metadata.uid.as_ref().and_then(|u| control.pod_ready.get(u)).copied();
            (sim, policy_of(&pod, control.readiness), overridden)
        };
        let completion = completion_policy_of(&pod, self.shared.config.completion);
        let Some(node) = self.cache.nodes.get(&(String::new(), node_name.clone())).cloned() else { return };
        let uid = pod.metadata.uid.clone();
        let now = self.now();
        if pod.metadata.deletion_timestamp.is_some() {
            self.stop_pod(key, &pod, uid.as_deref(), &now);
            return;
        }
        if matches!(pod_phase(&pod), "Succeeded" | "Failed") {
            return;
        }
        match noexecute_deadline(&pod, &node, now.0) {
            Some(None) => {
                if let Err(e) = self.delete(&self.defs.pods.clone(), key, uid.as_deref(), None) {
                    self.retry(Work::Kubelet(key.clone()), &e);
                }
                return;
            }
            Some(Some(at)) => self.at(at, Work::Kubelet(key.clone())),
            None => {}
        }
        let host_network = pod.spec.as_ref().and_then(|s| s.host_network).unwrap_or(false);
        let pod_ip = if host_network {
            Some(sim.address)
        } else {
            pod.status
                .as_ref()
                .and_then(|s| s.pod_ip.as_deref())
                .and_then(|ip| ip.parse().ok())
                .or_else(|| self.free_ip(&node_name, &sim, key))
        };
        let Some(pod_ip) = pod_ip else {
            tracing::warn!(node = %node_name, pod = ?key, "the node's pod CIDR is full; the pod stays Pending");
            return;
        };
        // When this kubelet started the pod, to the instant: `startTime` has whole seconds,
        // too coarse for sub-second readiness delays.
        let clock = self.api.clock.now();
        let fallback = pod.status.as_ref().and_then(|s| s.start_time.as_ref()).map(|t| t.0).unwrap_or(clock);
        let started = *self.started.entry(uid.clone().unwrap_or_default()).or_insert(fallback);
        let readiness = readiness(policy, overridden, sim.ready, started, clock);
        match completion_of(&pod, completion, started, clock) {
            Some(Exit::Now(code)) => {
                let restart = code != 0 && restart_policy(&pod) == "OnFailure";
                let run = |p: &Pod| {
                    let mut running = p.clone();
                    running.status = Some(running_status(p, sim.address, pod_ip, readiness.ready, &now));
                    running
                };
                if restart {
                    // The containers are restarted after a back-off (1 s, doubling per restart,
                    // at most 5 minutes) and run again for as long as the first time.
                    let restarts = pod
                        .status
                        .as_ref()
                        .and_then(|s| s.container_statuses.as_ref())
                        .and_then(|l| l.first())
                        .map_or(0, |c| c.restart_count);
                    let backoff = jiff::SignedDuration::from_secs((1i64 << restarts.clamp(0, 9)).min(300));
                    let next = clock.checked_add(backoff).unwrap_or(clock);
                    self.started.insert(uid.clone().unwrap_or_default(), next);
                    self.write_pod_status(key, uid.as_deref(), |p| restarted_status(&run(p), code, &now));
                    if let Some(Exit::At(at)) = completion_of(&pod, completion, next, clock) {
                        self.at(at, Work::Kubelet(key.clone()));
                    }
                } else {
                    self.write_pod_status(key, uid.as_deref(), |p| terminated_status(&run(p), code, &now));
                }
                return;
            }
            Some(Exit::At(at)) => self.at(at, Work::Kubelet(key.clone())),
            None => {}
        }
        if let Some(at) = readiness.at {
            self.at(at, Work::Kubelet(key.clone()));
        }
        self.write_pod_status(key, uid.as_deref(), |p| running_status(p, sim.address, pod_ip, readiness.ready, &now));
    }

    /// A pod being deleted: its containers stop by the [`TerminationPolicy`], the kubelet
    /// reports them terminated and deletes the pod (grace 0). With the full grace period, the
    /// API layer's grace reaper deletes it when the period ends.
    fn stop_pod(&mut self, key: &ObjKey, pod: &Pod, uid: Option<&str>, now: &Time) {
        let terminal = matches!(pod_phase(pod), "Succeeded" | "Failed");
        let grace = pod.metadata.deletion_grace_period_seconds.unwrap_or(0);
        if grace == 0 {
            // A zero grace period means the grace period is over: the containers were killed.
            if !terminal {
                self.write_pod_status(key, uid, |p| terminated_status(p, KILLED, now));
            }
            return;
        }
        let stop_after = match self.shared.config.termination {
            TerminationPolicy::FullGracePeriod => return,
            TerminationPolicy::Immediate => std::time::Duration::ZERO,
            TerminationPolicy::After(delay) => delay,
        };
        let deleted_at = pod
            .metadata
            .deletion_timestamp
            .as_ref()
            .map(|t| t.0)
            .and_then(|t| t.checked_sub(jiff::SignedDuration::from_secs(grace)).ok())
            .unwrap_or(now.0);
        let stop_at = deleted_at
            .checked_add(jiff::SignedDuration::try_from(stop_after).unwrap_or(jiff::SignedDuration::MAX))
            .unwrap_or(jiff::Timestamp::MAX);
        if pod.metadata.deletion_timestamp.as_ref().is_some_and(|end| stop_at >= end.0) {
            return;
        }
        if stop_at > self.api.clock.now() {
            self.at(stop_at, Work::Kubelet(key.clone()));
            return;
        }
        if !terminal {
            self.write_pod_status(key, uid, |p| terminated_status(p, STOPPED, now));
        }
        if let Err(e) = self.delete(&self.defs.pods.clone(), key, uid, Some(0)) {
            self.retry(Work::Kubelet(key.clone()), &e);
        }
    }

    /// Write the status `compute` derives from the pod, unless the cached pod has it already.
    /// It is derived again from the pod as stored, so that conditions others wrote meanwhile
    /// (readiness gates) are kept.
    fn write_pod_status(&mut self, key: &ObjKey, uid: Option<&str>, compute: impl Fn(&Pod) -> PodStatus) {
        let Some(cached) = self.cache.pods.get(key).cloned() else { return };
        if cached.status.as_ref() == Some(&compute(&cached)) {
            return;
        }
        let pods = self.defs.pods.clone();
        let result = self.update::<Pod>(&pods, key, uid, Part::Status, MANAGER, |pod| pod.status = Some(compute(pod)));
        if let Err(e) = result
            && e.code != 404
        {
            self.retry(Work::Kubelet(key.clone()), &e);
        }
    }

    /// The lowest free address of a node's /24 pod CIDR (`.1` is the bridge).
    fn free_ip(&self, node: &str, sim: &SimNode, this: &ObjKey) -> Option<Ipv4Addr> {
        let used: BTreeSet<Ipv4Addr> = self
            .cache
            .pods_by_node
            .get(node)
            .filter(|k| *k != this)
            .filter_map(|k| self.cache.pods.get(k))
            .filter_map(|p: &Arc<Pod>| p.status.as_ref()?.pod_ip.as_deref()?.parse().ok())
            .collect();
        let base = u32::from(sim.pod_cidr);
        (2..255).map(|host| Ipv4Addr::from(base + host)).find(|ip| !used.contains(ip))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::time::Duration;

    fn ts(s: i64) -> jiff::Timestamp {
        jiff::Timestamp::from_second(s).unwrap()
    }

    fn pod(v: serde_json::Value) -> Pod {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn readiness_follows_node_then_override_then_policy() {
        let after = ReadinessPolicy::After(Duration::from_secs(5));
        assert!(!readiness(ReadinessPolicy::Immediate, Some(true), false, ts(0), ts(0)).ready);
        assert!(!readiness(ReadinessPolicy::Immediate, Some(false), true, ts(0), ts(0)).ready);
        assert!(readiness(ReadinessPolicy::Never, Some(true), true, ts(0), ts(0)).ready);
        assert!(!readiness(ReadinessPolicy::Manual, None, true, ts(0), ts(0)).ready);
        assert_eq!(readiness(after, None, true, ts(10), ts(12)), Readiness { ready: false, at: Some(ts(15)) });
        assert_eq!(readiness(after, None, true, ts(10), ts(15)), Readiness { ready: true, at: None });
    }

    #[test]
    fn ready_waits_for_readiness_gates() {
        let now = Time(ts(100));
        let p = pod(json!({
            "metadata": {"name": "p", "uid": "u"},
            "spec": {"containers": [{"name": "a", "image": "nginx:1.27"}], "readinessGates": [{"conditionType": "example.com/gate"}]},
        }));
        let ip = Ipv4Addr::new(10, 244, 0, 2);
        let host = Ipv4Addr::new(172, 18, 0, 2);
        let status = running_status(&p, host, ip, true, &now);
        let ready = status.conditions.as_ref().unwrap().iter().find(|c| c.type_ == "Ready").unwrap().clone();
        assert_eq!(ready.status, "False");
        assert_eq!(ready.reason.as_deref(), Some("ReadinessGatesNotReady"));
        assert_eq!(
            ready.message.as_deref(),
            Some("corresponding condition of pod readiness gate \"example.com/gate\" does not exist.")
        );
        let cs = &status.container_statuses.as_ref().unwrap()[0];
        assert!(cs.ready);
        assert_eq!(cs.image_id.split('@').next(), Some("docker.io/library/nginx"));
        assert_eq!(status.pod_ip.as_deref(), Some("10.244.0.2"));

        // The gate's condition, written by someone else, turns True: the pod is Ready, and
        // the conditions the kubelet does not own are kept.
        let mut gated = p.clone();
        let mut with_gate = status.clone();
        with_gate.conditions.as_mut().unwrap().push(condition("example.com/gate", true, None, None, &now));
        gated.status = Some(with_gate);
        let status = running_status(&gated, host, ip, true, &Time(ts(200)));
        let conditions = status.conditions.unwrap();
        let ready = conditions.iter().find(|c| c.type_ == "Ready").unwrap();
        assert_eq!(ready.status, "True");
        assert_eq!(ready.last_transition_time, Some(Time(ts(200))));
        let initialized = conditions.iter().find(|c| c.type_ == "Initialized").unwrap();
        assert_eq!(initialized.last_transition_time, Some(now), "unchanged conditions keep their transition time");
        assert!(conditions.iter().any(|c| c.type_ == "example.com/gate"));
        let types: Vec<&str> = conditions.iter().map(|c| c.type_.as_str()).collect();
        assert_eq!(types, ["PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "example.com/gate"]);
    }

    #[test]
    fn unready_containers_are_named() {
        let p = pod(json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "a"}, {"name": "b"}]}}));
        let status = running_status(&p, Ipv4Addr::LOCALHOST, Ipv4Addr::LOCALHOST, false, &Time(ts(1)));
        let ready = status.conditions.unwrap().into_iter().find(|c| c.type_ == "Ready").unwrap();
        assert_eq!(ready.reason.as_deref(), Some("ContainersNotReady"));
        assert_eq!(ready.message.as_deref(), Some("containers with unready status: [a b]"));
    }

    #[test]
    fn killed_containers_report_exit_137() {
        let p = pod(json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "a"}]}}));
        let running = running_status(&p, Ipv4Addr::LOCALHOST, Ipv4Addr::LOCALHOST, true, &Time(ts(1)));
        let mut p2 = p.clone();
        p2.status = Some(running);
        let done = terminated_status(&p2, KILLED, &Time(ts(9)));
        assert_eq!(done.phase.as_deref(), Some("Failed"));
        let t = done.container_statuses.unwrap()[0].state.clone().unwrap().terminated.unwrap();
        assert_eq!(t.exit_code, 137);
        assert_eq!(t.started_at, Some(Time(ts(1))));
        assert_eq!(t.finished_at, Some(Time(ts(9))));
    }

    #[test]
    fn tolerations_match_taints() {
        let taint: k8s_openapi::api::core::v1::Taint =
            serde_json::from_value(json!({"key": "k", "value": "v", "effect": "NoSchedule"})).unwrap();
        let t = |v: serde_json::Value| -> k8s_openapi::api::core::v1::Toleration { serde_json::from_value(v).unwrap() };
        assert!(tolerates(&t(json!({"key": "k", "value": "v"})), &taint));
        assert!(tolerates(&t(json!({"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"})), &taint));
        assert!(tolerates(&t(json!({"key": "k", "operator": "Exists"})), &taint));
        assert!(tolerates(&t(json!({"operator": "Exists"})), &taint));
        assert!(!tolerates(&t(json!({"key": "k", "value": "w"})), &taint));
        assert!(!tolerates(&t(json!({"key": "k", "operator": "Exists", "effect": "NoExecute"})), &taint));
        assert!(!tolerates(&t(json!({"key": "other", "operator": "Exists"})), &taint));
    }

    #[test]
    fn noexecute_taints_evict_unless_tolerated() {
        let node: Node = serde_json::from_value(json!({"metadata": {"name": "n"}, "spec": {"taints": [
            {"key": "k", "effect": "NoExecute", "timeAdded": "1970-01-01T00:01:40Z"}
        ]}}))
        .unwrap();
        let plain = pod(json!({"metadata": {"name": "p"}, "spec": {"containers": []}}));
        assert_eq!(noexecute_deadline(&plain, &node, ts(100)), Some(None));
        let forever = pod(
            json!({"metadata": {"name": "p"}, "spec": {"containers": [], "tolerations": [{"key": "k", "operator": "Exists"}]}}),
        );
        assert_eq!(noexecute_deadline(&forever, &node, ts(100)), None);
        let timed = pod(
            json!({"metadata": {"name": "p"}, "spec": {"containers": [], "tolerations": [{"key": "k", "operator": "Exists", "tolerationSeconds": 30}]}}),
        );
        assert_eq!(noexecute_deadline(&timed, &node, ts(110)), Some(Some(ts(130))));
        assert_eq!(noexecute_deadline(&timed, &node, ts(131)), Some(None));
    }
}

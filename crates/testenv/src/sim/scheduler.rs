//! The scheduler: kube-scheduler's default filters, in their order, for pods with
//! `schedulerName: default-scheduler`.
//!
//! | Plugin | Rule | Reason counted per node |
//! | --- | --- | --- |
//! | NodeUnschedulable | cordoned nodes, unless the pod tolerates `node.kubernetes.io/unschedulable:NoSchedule` | `node(s) were unschedulable` |
//! | TaintToleration | every `NoSchedule`/`NoExecute` taint tolerated (`Exists`/`Equal`) | `node(s) had untolerated taint {key: value}` |
//! | NodeAffinity | `nodeSelector` and required node affinity | `node(s) didn't match Pod's node affinity/selector` |
//! | NodeResourcesFit | cpu and memory requests and the pod count against allocatable | `Insufficient cpu`, `Insufficient memory`, `Too many pods` |
//! | PodTopologySpread | `topologySpreadConstraints` with `whenUnsatisfiable: DoNotSchedule`: the skew (matching pods in the node's domain, plus the pod if it matches, minus the fewest in any domain) at most `maxSkew`; nodes counted that pass the pod's node affinity and carry every such constraint's key; `minDomains`, `matchLabelKeys` | `node(s) didn't match pod topology spread constraints`, `… (missing required label)` |
//! | InterPodAffinity | required pod affinity and anti-affinity, both ways, per topology key | `node(s) didn't match pod affinity rules`, `node(s) didn't match pod anti-affinity rules`, `node(s) didn't satisfy existing pods anti-affinity rules` |
//!
//! Among the nodes that fit, the one with the fewest pods matching the pod's
//! `ScheduleAnyway` spread constraints in its domains wins (PodTopologySpread's scoring, without
//! its weights), then the one with the fewest pods (ties by name), which spreads pods as the
//! default scoring does for equal pods. A pod that fits nowhere gets
//! `PodScheduled=False`, reason `Unschedulable`, and the scheduler's message
//! (`0/3 nodes are available: 1 node(s) were unschedulable, 2 node(s) didn't match pod
//! anti-affinity rules.`, reasons sorted as `FitError.Error` sorts them); it is retried when
//! nodes or the placement of pods change. Binding goes through `pods/binding` semantics.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Node, NodeSelectorRequirement, Pod, PodAffinityTerm, PodCondition, Taint};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde_json::json;

use super::kubelet::{set_pod_condition, tolerates};
use super::runtime::{Runtime, Work};
use crate::api::Part;
use crate::api::eviction::pod_phase;
use crate::selector::LabelSelector;
use crate::store::ObjKey;

const MANAGER: &str = "kube-scheduler";
const SCHEDULER_NAME: &str = "default-scheduler";

const UNSCHEDULABLE: &str = "node(s) were unschedulable";
const NODE_AFFINITY: &str = "node(s) didn't match Pod's node affinity/selector";
const AFFINITY: &str = "node(s) didn't match pod affinity rules";
const ANTI_AFFINITY: &str = "node(s) didn't match pod anti-affinity rules";
const EXISTING_ANTI_AFFINITY: &str = "node(s) didn't satisfy existing pods anti-affinity rules";
const SPREAD: &str = "node(s) didn't match pod topology spread constraints";
const SPREAD_LABEL: &str = "node(s) didn't match pod topology spread constraints (missing required label)";

/// A Kubernetes quantity in thousandths (`100m` → 100, `1Gi` → 1073741824000), rounded up.
pub(super) fn milli(quantity: &str) -> Option<i128> {
    let q = quantity.trim();
    let end = q.find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-')).unwrap_or(q.len());
    let (number, suffix) = q.split_at(end);
    let (mantissa, exponent): (&str, i32) = match suffix {
        "" => (number, 0),
        "n" => (number, -9),
        "u" => (number, -6),
        "m" => (number, -3),
        "k" => (number, 3),
        "M" => (number, 6),
        "G" => (number, 9),
        "T" => (number, 12),
        "P" => (number, 15),
        "E" => (number, 18),
        "Ki" | "Mi" | "Gi" | "Ti" | "Pi" | "Ei" => {
            let power = match suffix {
                "Ki" => 10,
                "Mi" => 20,
                "Gi" => 30,
                "Ti" => 40,
                "Pi" => 50,
                _ => 60,
            };
            let base = milli(number)?;
            return base.checked_mul(1i128 << power);
        }
        s if s.starts_with(['e', 'E']) => (number, s[1..].parse().ok()?),
        _ => return None,
    };
    let negative = mantissa.starts_with('-');
    let digits = mantissa.trim_start_matches(['+', '-']);
    let (whole, fraction) = digits.split_once('.').unwrap_or((digits, ""));
    if whole.is_empty() && fraction.is_empty() {
        return None;
    }
    let all: String = format!("{whole}{fraction}");
    let mut value: i128 = if all.is_empty() { 0 } else { all.parse().ok()? };
    // value × 10^(exponent + 3 − len(fraction)), rounded up.
    let scale = exponent + 3 - i32::try_from(fraction.len()).ok()?;
    if scale >= 0 {
        value = value.checked_mul(10i128.checked_pow(u32::try_from(scale).ok()?)?)?;
    } else {
        let divisor = 10i128.checked_pow(u32::try_from(-scale).ok()?)?;
        value = value / divisor + i128::from(value % divisor != 0);
    }
    Some(if negative { -value } else { value })
}

/// What a pod asks of a node: cpu and memory requests in thousandths.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Requests {
    pub cpu: i128,
    pub memory: i128,
}

/// `resource.PodRequests`: the sum of the containers' requests (limits when requests are not
/// set), at least the largest init container's, plus the pod overhead.
pub(super) fn pod_requests(pod: &Pod) -> Requests {
    let Some(spec) = &pod.spec else { return Requests::default() };
    let of = |c: &k8s_openapi::api::core::v1::Container, name: &str| -> i128 {
        let resources = c.resources.as_ref();
        let pick = |m: Option<&BTreeMap<String, Quantity>>| m.and_then(|m| m.get(name)).and_then(|q| milli(&q.0));
        pick(resources.and_then(|r| r.requests.as_ref()))
            .or_else(|| pick(resources.and_then(|r| r.limits.as_ref())))
            .unwrap_or(0)
    };
    let sum = |name: &str| spec.containers.iter().map(|c| of(c, name)).sum::<i128>();
    let init = |name: &str| spec.init_containers.iter().flatten().map(|c| of(c, name)).max().unwrap_or(0);
    let overhead = |name: &str| spec.overhead.as_ref().and_then(|o| o.get(name)).and_then(|q| milli(&q.0)).unwrap_or(0);
    Requests {
        cpu: sum("cpu").max(init("cpu")) + overhead("cpu"),
        memory: sum("memory").max(init("memory")) + overhead("memory"),
    }
}

fn selector_of(selector: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>) -> LabelSelector {
    match selector.map(serde_json::to_value) {
        Some(Ok(v)) => LabelSelector::from_label_selector(&v).unwrap_or_else(|_| LabelSelector::nothing()),
        _ => LabelSelector::nothing(),
    }
}

fn labels(obj: Option<&BTreeMap<String, String>>) -> BTreeMap<String, String> {
    obj.cloned().unwrap_or_default()
}

/// `NodeSelectorRequirement` against a set of labels (or the node's fields).
fn requirement_matches(req: &NodeSelectorRequirement, values_of: &BTreeMap<String, String>) -> bool {
    let value = values_of.get(&req.key);
    let values = req.values.as_deref().unwrap_or_default();
    match req.operator.as_str() {
        "In" => value.is_some_and(|v| values.contains(v)),
        "NotIn" => value.is_none_or(|v| !values.contains(v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" | "Lt" => {
            let (Some(v), Some(bound)) =
                (value.and_then(|v| v.parse::<i64>().ok()), values.first().and_then(|b| b.parse::<i64>().ok()))
            else {
                return false;
            };
            if req.operator == "Gt" { v > bound } else { v < bound }
        }
        _ => false,
    }
}

/// NodeAffinity: `nodeSelector` and every required node affinity term (ORed).
fn node_affinity_fits(pod: &Pod, node: &Node) -> bool {
    let node_labels = labels(node.metadata.labels.as_ref());
    let spec = pod.spec.as_ref();
    if let Some(selector) = spec.and_then(|s| s.node_selector.as_ref())
        && !selector.iter().all(|(k, v)| node_labels.get(k) == Some(v))
    {
        return false;
    }
    let required = spec
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|a| a.required_during_scheduling_ignored_during_execution.as_ref());
    let Some(required) = required else { return true };
    let fields = BTreeMap::from([("metadata.name".to_string(), node.metadata.name.clone().unwrap_or_default())]);
    required.node_selector_terms.iter().any(|term| {
        let exprs = term.match_expressions.as_deref().unwrap_or_default();
        let field_exprs = term.match_fields.as_deref().unwrap_or_default();
        (!exprs.is_empty() || !field_exprs.is_empty())
            && exprs.iter().all(|r| requirement_matches(r, &node_labels))
            && field_exprs.iter().all(|r| requirement_matches(r, &fields))
    })
}

/// TaintToleration: the first `NoSchedule`/`NoExecute` taint the pod does not tolerate.
fn untolerated_taint<'a>(pod: &Pod, node: &'a Node) -> Option<&'a Taint> {
    let tolerations = pod.spec.as_ref().and_then(|s| s.tolerations.as_deref()).unwrap_or_default();
    node.spec.as_ref()?.taints.as_ref()?.iter().find(|taint| {
        (taint.effect == "NoSchedule" || taint.effect == "NoExecute")
            && !tolerations.iter().any(|t| tolerates(t, taint))
    })
}

/// NodeUnschedulable.
fn cordoned(pod: &Pod, node: &Node) -> bool {
    if !node.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false) {
        return false;
    }
    let taint = Taint {
        key: "node.kubernetes.io/unschedulable".into(),
        effect: "NoSchedule".into(),
        value: None,
        time_added: None,
    };
    let tolerations = pod.spec.as_ref().and_then(|s| s.tolerations.as_deref()).unwrap_or_default();
    !tolerations.iter().any(|t| tolerates(t, &taint))
}

/// One required pod (anti-)affinity term, resolved.
struct Term {
    selector: LabelSelector,
    namespaces: Namespaces,
    topology_key: String,
}

/// The namespaces a term applies to.
enum Namespaces {
    Listed(Vec<String>),
    /// Listed ones plus those whose labels the selector matches.
    Selected(Vec<String>, LabelSelector),
}

/// `AffinityTerm.Matches`: the pod is in one of the term's namespaces and has matching labels.
fn term_matches(term: &Term, pod: &Pod, namespace_labels: &mut impl FnMut(&str) -> BTreeMap<String, String>) -> bool {
    let ns = pod.metadata.namespace.as_deref().unwrap_or("");
    let in_namespace = match &term.namespaces {
        Namespaces::Listed(list) => list.iter().any(|n| n == ns),
        Namespaces::Selected(list, selector) => list.iter().any(|n| n == ns) || selector.matches(&namespace_labels(ns)),
    };
    in_namespace && term.selector.matches(&labels(pod.metadata.labels.as_ref()))
}

fn terms_of(pod: &Pod, anti: bool) -> Vec<Term> {
    let affinity = pod.spec.as_ref().and_then(|s| s.affinity.as_ref());
    let raw: &[PodAffinityTerm] = if anti {
        affinity
            .and_then(|a| a.pod_anti_affinity.as_ref())
            .and_then(|a| a.required_during_scheduling_ignored_during_execution.as_deref())
            .unwrap_or_default()
    } else {
        affinity
            .and_then(|a| a.pod_affinity.as_ref())
            .and_then(|a| a.required_during_scheduling_ignored_during_execution.as_deref())
            .unwrap_or_default()
    };
    let own = pod.metadata.namespace.clone().unwrap_or_default();
    raw.iter()
        .map(|t| {
            let listed = t.namespaces.clone().unwrap_or_default();
            let namespaces = match &t.namespace_selector {
                Some(sel) => Namespaces::Selected(listed, selector_of(Some(sel))),
                None if listed.is_empty() => Namespaces::Listed(vec![own.clone()]),
                None => Namespaces::Listed(listed),
            };
            Term { selector: selector_of(t.label_selector.as_ref()), namespaces, topology_key: t.topology_key.clone() }
        })
        .collect()
}

/// Counts per (topology key, value) that InterPodAffinity's PreFilter computes.
#[derive(Default)]
struct AffinityCounts {
    affinity: HashMap<(String, String), usize>,
    anti_affinity: HashMap<(String, String), usize>,
    existing_anti_affinity: HashMap<(String, String), usize>,
}

/// One topology spread constraint of the pod, resolved (`matchLabelKeys` merged into the
/// selector with the pod's values).
struct Spread {
    max_skew: i32,
    topology_key: String,
    /// `DoNotSchedule` (a filter), else `ScheduleAnyway` (a score).
    hard: bool,
    min_domains: usize,
    selector: LabelSelector,
    /// Whether the pod itself matches the selector (it counts where it lands).
    self_match: bool,
}

fn spreads_of(pod: &Pod) -> Vec<Spread> {
    let pod_labels = labels(pod.metadata.labels.as_ref());
    let constraints = pod.spec.as_ref().and_then(|s| s.topology_spread_constraints.as_deref()).unwrap_or_default();
    constraints
        .iter()
        .map(|c| {
            let mut selector = c.label_selector.clone();
            for key in c.match_label_keys.iter().flatten() {
                if let Some(value) = pod_labels.get(key) {
                    let s = selector.get_or_insert_with(Default::default);
                    s.match_labels.get_or_insert_with(Default::default).insert(key.clone(), value.clone());
                }
            }
            let selector = selector_of(selector.as_ref());
            Spread {
                max_skew: c.max_skew,
                topology_key: c.topology_key.clone(),
                hard: c.when_unsatisfiable == "DoNotSchedule",
                min_domains: c.min_domains.map_or(1, |m| m.max(1) as usize),
                self_match: selector.matches(&pod_labels),
                selector,
            }
        })
        .collect()
}

/// What PodTopologySpread's PreFilter and PreScore count: matching pods per (topology key,
/// value) over the nodes that count, and per hard constraint the fewest in any domain.
#[derive(Default)]
struct SpreadCounts {
    /// Per constraint (by index), matching pods per topology value.
    per_constraint: Vec<BTreeMap<String, usize>>,
}

impl SpreadCounts {
    /// The fewest matching pods in a domain of constraint `i` (0 when there are fewer domains
    /// than `minDomains`).
    fn min(&self, i: usize, spread: &Spread) -> usize {
        let domains = &self.per_constraint[i];
        if domains.len() < spread.min_domains { 0 } else { domains.values().copied().min().unwrap_or(0) }
    }
}

/// The view of the cluster one scheduling attempt needs.
struct Attempt<'a> {
    pod: &'a Pod,
    affinity_terms: Vec<Term>,
    anti_affinity_terms: Vec<Term>,
    counts: AffinityCounts,
    spreads: Vec<Spread>,
    spread_counts: SpreadCounts,
    requests: Requests,
}

/// PodTopologySpread's Filter: the hard constraints' skew on `node`.
fn spread_fits(attempt: &Attempt<'_>, node_labels: &BTreeMap<String, String>) -> Result<(), Vec<String>> {
    for (i, spread) in attempt.spreads.iter().enumerate().filter(|(_, s)| s.hard) {
        let Some(value) = node_labels.get(&spread.topology_key) else {
            return Err(vec![SPREAD_LABEL.into()]);
        };
        let matching = attempt.spread_counts.per_constraint[i].get(value).copied().unwrap_or(0);
        let skew = (matching + usize::from(spread.self_match)) as i64 - attempt.spread_counts.min(i, spread) as i64;
        if skew > i64::from(spread.max_skew) {
            return Err(vec![SPREAD.into()]);
        }
    }
    Ok(())
}

/// PodTopologySpread's Score, unweighted: matching pods in the node's domains of the soft
/// constraints (fewer is better); a node without one of their keys ranks last, as upstream
/// scores it lowest.
fn spread_score(attempt: &Attempt<'_>, node: &Node) -> usize {
    let node_labels = labels(node.metadata.labels.as_ref());
    let mut score = 0;
    for (i, spread) in attempt.spreads.iter().enumerate().filter(|(_, s)| !s.hard) {
        let Some(value) = node_labels.get(&spread.topology_key) else { return usize::MAX };
        score += attempt.spread_counts.per_constraint[i].get(value).copied().unwrap_or(0);
    }
    score
}

/// Why a node does not fit, one or more reasons.
fn filter(attempt: &Attempt<'_>, node: &Node, used: &NodeUse) -> Result<(), Vec<String>> {
    let pod = attempt.pod;
    if cordoned(pod, node) {
        return Err(vec![UNSCHEDULABLE.into()]);
    }
    if let Some(taint) = untolerated_taint(pod, node) {
        return Err(vec![format!(
            "node(s) had untolerated taint {{{}: {}}}",
            taint.key,
            taint.value.as_deref().unwrap_or("")
        )]);
    }
    if !node_affinity_fits(pod, node) {
        return Err(vec![NODE_AFFINITY.into()]);
    }
    let allocatable = node.status.as_ref().and_then(|s| s.allocatable.as_ref().or(s.capacity.as_ref()));
    let capacity = |name: &str| allocatable.and_then(|a| a.get(name)).and_then(|q| milli(&q.0));
    let mut insufficient = Vec::new();
    if let Some(pods) = capacity("pods")
        && (used.pods + 1) * 1000 > pods
    {
        insufficient.push("Too many pods".to_string());
    }
    if attempt.requests.cpu > 0
        && let Some(cpu) = capacity("cpu")
        && used.requests.cpu + attempt.requests.cpu > cpu
    {
        insufficient.push("Insufficient cpu".to_string());
    }
    if attempt.requests.memory > 0
        && let Some(memory) = capacity("memory")
        && used.requests.memory + attempt.requests.memory > memory
    {
        insufficient.push("Insufficient memory".to_string());
    }
    if !insufficient.is_empty() {
        return Err(insufficient);
    }
    let node_labels = labels(node.metadata.labels.as_ref());
    spread_fits(attempt, &node_labels)?;
    // satisfyPodAffinity.
    let mut pods_exist = true;
    for term in &attempt.affinity_terms {
        match node_labels.get(&term.topology_key) {
            Some(value) => {
                if attempt.counts.affinity.get(&(term.topology_key.clone(), value.clone())).copied().unwrap_or(0) == 0 {
                    pods_exist = false;
                }
            }
            None => return Err(vec![AFFINITY.into()]),
        }
    }
    if !(pods_exist || attempt.counts.affinity.is_empty() && matches_own_terms(attempt)) {
        return Err(vec![AFFINITY.into()]);
    }
    // satisfyPodAntiAffinity.
    for term in &attempt.anti_affinity_terms {
        if let Some(value) = node_labels.get(&term.topology_key)
            && attempt.counts.anti_affinity.get(&(term.topology_key.clone(), value.clone())).copied().unwrap_or(0) > 0
        {
            return Err(vec![ANTI_AFFINITY.into()]);
        }
    }
    // satisfyExistingPodsAntiAffinity.
    if node_labels
        .iter()
        .any(|(k, v)| attempt.counts.existing_anti_affinity.get(&(k.clone(), v.clone())).copied().unwrap_or(0) > 0)
    {
        return Err(vec![EXISTING_ANTI_AFFINITY.into()]);
    }
    Ok(())
}

/// The first pod of a group with affinity to itself may go anywhere its topology exists.
fn matches_own_terms(attempt: &Attempt<'_>) -> bool {
    let pod_labels = labels(attempt.pod.metadata.labels.as_ref());
    let ns = attempt.pod.metadata.namespace.as_deref().unwrap_or("");
    attempt.affinity_terms.iter().all(|t| {
        let in_ns = match &t.namespaces {
            Namespaces::Listed(list) | Namespaces::Selected(list, _) => list.iter().any(|n| n == ns),
        };
        in_ns && t.selector.matches(&pod_labels)
    })
}

/// What the pods already on a node use.
#[derive(Default)]
struct NodeUse {
    pods: i128,
    requests: Requests,
}

/// `FitError.Error`: `0/N nodes are available: <count> <reason>, ….`
pub(super) fn fit_error(nodes: usize, reasons: &BTreeMap<String, usize>) -> String {
    let mut parts: Vec<String> = reasons.iter().map(|(reason, n)| format!("{n} {reason}")).collect();
    parts.sort();
    format!("0/{nodes} nodes are available: {}.", parts.join(", "))
}

impl Runtime {
    /// Place one pending pod, or record why it fits nowhere.
    pub(super) fn schedule(&mut self, key: &ObjKey) {
        let Some(pod) = self.cache.pods.get(key).cloned() else {
            self.unschedulable.remove(key);
            return;
        };
        let spec = pod.spec.clone().unwrap_or_default();
        let bound = spec.node_name.as_deref().is_some_and(|n| !n.is_empty());
        if bound
            || pod.metadata.deletion_timestamp.is_some()
            || spec.scheduler_name.as_deref().unwrap_or(SCHEDULER_NAME) != SCHEDULER_NAME
            || matches!(pod_phase(&pod), "Succeeded" | "Failed")
        {
            self.unschedulable.remove(key);
            return;
        }
        if spec.scheduling_gates.as_ref().is_some_and(|g| !g.is_empty()) {
            // Removing the gates is a pod update, which brings the pod back here.
            self.unschedulable.remove(key);
            let message = "Scheduling is blocked due to non-empty scheduling gates";
            return self.set_unschedulable(key, &pod, "SchedulingGated", message);
        }
        let nodes: Vec<Arc<Node>> = self.cache.nodes.iter().map(|(_, n)| n.clone()).collect();
        if nodes.is_empty() {
            self.unschedulable.insert(key.clone());
            return self.set_unschedulable(key, &pod, "Unschedulable", "no nodes available to schedule pods");
        }
        let attempt = self.attempt(&pod);
        let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
        let mut best: Option<((usize, i128), String)> = None;
        for node in &nodes {
            let name = node.metadata.name.clone().unwrap_or_default();
            let used = self.node_use(&name);
            match filter(&attempt, node, &used) {
                Ok(()) => {
                    let rank = (spread_score(&attempt, node), used.pods);
                    if best.as_ref().is_none_or(|(best_rank, _)| rank < *best_rank) {
                        best = Some((rank, name));
                    }
                }
                Err(why) => {
                    for reason in why {
                        *reasons.entry(reason).or_default() += 1;
                    }
                }
            }
        }
        let Some((_, node)) = best else {
            self.unschedulable.insert(key.clone());
            return self.set_unschedulable(key, &pod, "Unschedulable", &fit_error(nodes.len(), &reasons));
        };
        self.unschedulable.remove(key);
        let binding = json!({
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": key.1, "namespace": key.0, "uid": pod.metadata.uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        });
        let opts = crate::api::WriteOptions { manager: MANAGER.into(), ..Default::default() };
        match self.api.bind(&self.defs.pods, &key.0, &key.1, &binding, &opts) {
            Ok(()) => {}
            // Bound or deleted meanwhile: the pod's next event says what to do.
            Err(e) if e.code == 404 || e.code == 409 => {}
            Err(e) => self.retry(Work::Schedule(key.clone()), &e),
        }
    }

    fn set_unschedulable(&mut self, key: &ObjKey, pod: &Pod, reason: &str, message: &str) {
        let mut status = pod.status.clone().unwrap_or_default();
        let mut conditions = status.conditions.take().unwrap_or_default();
        set_pod_condition(
            &mut conditions,
            PodCondition {
                type_: "PodScheduled".into(),
                status: "False".into(),
                reason: Some(reason.into()),
                message: Some(message.into()),
                last_transition_time: Some(self.now()),
                last_probe_time: None,
                observed_generation: None,
            },
        );
        status.conditions = Some(conditions);
        let uid = pod.metadata.uid.clone();
        if self.cache.pods.get(key).and_then(|p| p.status.as_ref()) == Some(&status) {
            return;
        }
        let pods = self.defs.pods.clone();
        let result = self.update::<Pod>(&pods, key, uid.as_deref(), Part::Status, MANAGER, |p| {
            // Only the condition: the kubelet may be writing the rest.
            let current = p.status.get_or_insert_with(Default::default);
            let mut list = current.conditions.take().unwrap_or_default();
            if let Some(c) = status.conditions.as_ref().and_then(|c| c.iter().find(|c| c.type_ == "PodScheduled")) {
                set_pod_condition(&mut list, c.clone());
            }
            current.conditions = Some(list);
        });
        if let Err(e) = result
            && e.code != 404
        {
            self.retry(Work::Schedule(key.clone()), &e);
        }
    }

    /// Requests and pod count of the non-terminal pods bound to a node.
    fn node_use(&self, node: &str) -> NodeUse {
        let mut used = NodeUse::default();
        for key in self.cache.pods_by_node.get(node) {
            let Some(pod) = self.cache.pods.get(key) else { continue };
            if matches!(pod_phase(pod), "Succeeded" | "Failed") {
                continue;
            }
            let r = pod_requests(pod);
            used.pods += 1;
            used.requests.cpu += r.cpu;
            used.requests.memory += r.memory;
        }
        used
    }

    /// PreFilter: resolve the pod's terms and count matching pods per topology pair.
    fn attempt<'a>(&self, pod: &'a Pod) -> Attempt<'a> {
        let affinity_terms = terms_of(pod, false);
        let anti_affinity_terms = terms_of(pod, true);
        let mut counts = AffinityCounts::default();
        let mut namespace_cache: HashMap<String, BTreeMap<String, String>> = HashMap::new();
        let api = self.api.clone();
        let ns_def = api.namespaces_def();
        let mut namespace_labels = |ns: &str| {
            namespace_cache
                .entry(ns.to_string())
                .or_insert_with(|| {
                    api.store
                        .get(&ns_def.storage, &(String::new(), ns.to_string()))
                        .map(|s| s.meta.labels.clone())
                        .unwrap_or_default()
                })
                .clone()
        };
        for (_, existing) in self.cache.pods.iter() {
            let Some(node_name) = existing.spec.as_ref().and_then(|s| s.node_name.as_deref()).filter(|n| !n.is_empty())
            else {
                continue;
            };
            if matches!(pod_phase(existing), "Succeeded" | "Failed") {
                continue;
            }
            let existing_anti = terms_of(existing, true);
            if affinity_terms.is_empty() && anti_affinity_terms.is_empty() && existing_anti.is_empty() {
                continue;
            }
            let Some(node) = self.cache.nodes.get(&(String::new(), node_name.to_string())) else { continue };
            let node_labels = labels(node.metadata.labels.as_ref());
            let add = |map: &mut HashMap<(String, String), usize>, key: &str| {
                if let Some(value) = node_labels.get(key) {
                    *map.entry((key.to_string(), value.clone())).or_default() += 1;
                }
            };
            if !affinity_terms.is_empty()
                && affinity_terms.iter().all(|t| term_matches(t, existing, &mut namespace_labels))
            {
                for t in &affinity_terms {
                    add(&mut counts.affinity, &t.topology_key);
                }
            }
            for t in &anti_affinity_terms {
                if term_matches(t, existing, &mut namespace_labels) {
                    add(&mut counts.anti_affinity, &t.topology_key);
                }
            }
            for t in &existing_anti {
                if term_matches(t, pod, &mut namespace_labels) {
                    add(&mut counts.existing_anti_affinity, &t.topology_key);
                }
            }
        }
        let spreads = spreads_of(pod);
        let spread_counts = self.spread_counts(pod, &spreads);
        Attempt {
            pod,
            affinity_terms,
            anti_affinity_terms,
            counts,
            spreads,
            spread_counts,
            requests: pod_requests(pod),
        }
    }

    /// PodTopologySpread's PreFilter and PreScore counts: for each constraint, the pods in the
    /// pod's namespace, not terminating, matching its selector, per domain of the nodes that
    /// pass the pod's node affinity (`nodeAffinityPolicy: Honor`; taints are ignored, as
    /// `nodeTaintsPolicy` defaults) and carry the key (for hard constraints: every hard
    /// constraint's key). A domain without such pods counts zero.
    fn spread_counts(&self, pod: &Pod, spreads: &[Spread]) -> SpreadCounts {
        let mut counts = SpreadCounts { per_constraint: vec![BTreeMap::new(); spreads.len()] };
        if spreads.is_empty() {
            return counts;
        }
        let ns = pod.metadata.namespace.as_deref().unwrap_or("");
        for (_, node) in self.cache.nodes.iter() {
            if !node_affinity_fits(pod, node) {
                continue;
            }
            let node_labels = labels(node.metadata.labels.as_ref());
            let has_hard_keys = spreads.iter().filter(|s| s.hard).all(|s| node_labels.contains_key(&s.topology_key));
            let name = node.metadata.name.clone().unwrap_or_default();
            let pods: Vec<BTreeMap<String, String>> = self
                .cache
                .pods_by_node
                .get(&name)
                .filter_map(|key| self.cache.pods.get(key))
                .filter(|p| p.metadata.namespace.as_deref() == Some(ns) && p.metadata.deletion_timestamp.is_none())
                .filter(|p| !matches!(pod_phase(p), "Succeeded" | "Failed"))
                .map(|p| labels(p.metadata.labels.as_ref()))
                .collect();
            for (i, spread) in spreads.iter().enumerate() {
                let Some(value) = node_labels.get(&spread.topology_key) else { continue };
                if spread.hard && !has_hard_keys {
                    continue;
                }
                let matching = pods.iter().filter(|l| spread.selector.matches(l)).count();
                *counts.per_constraint[i].entry(value.clone()).or_default() += matching;
            }
        }
        counts
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    #[test]
    fn quantities_parse_to_thousandths() {
        assert_eq!(milli("100m"), Some(100));
        assert_eq!(milli("2"), Some(2000));
        assert_eq!(milli("0.5"), Some(500));
        assert_eq!(milli("1Ki"), Some(1024 * 1000));
        assert_eq!(milli("1.5Gi"), Some(3 * (1i128 << 29) * 1000));
        assert_eq!(milli("1k"), Some(1_000_000));
        assert_eq!(milli("1e3"), Some(1_000_000));
        assert_eq!(milli("1n"), Some(1), "rounded up");
        assert_eq!(milli("110"), Some(110_000));
        assert_eq!(milli("1x"), None);
        assert_eq!(milli(""), None);
    }

    fn node(v: Value) -> Node {
        serde_json::from_value(v).unwrap()
    }
    fn pod(v: Value) -> Pod {
        serde_json::from_value(v).unwrap()
    }

    fn attempt(p: &Pod) -> Attempt<'_> {
        Attempt {
            pod: p,
            affinity_terms: terms_of(p, false),
            anti_affinity_terms: terms_of(p, true),
            counts: AffinityCounts::default(),
            spreads: spreads_of(p),
            spread_counts: SpreadCounts { per_constraint: vec![BTreeMap::new(); spreads_of(p).len()] },
            requests: pod_requests(p),
        }
    }

    #[test]
    fn a_hard_spread_constraint_bounds_the_skew_and_needs_its_key() {
        let p = pod(json!({"metadata": {"name": "w", "namespace": "d", "labels": {"app": "w", "v": "2"}}, "spec": {
            "containers": [{"name": "c"}],
            "topologySpreadConstraints": [
                {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
                 "labelSelector": {"matchLabels": {"app": "w"}}, "matchLabelKeys": ["v"]},
                {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "ScheduleAnyway",
                 "labelSelector": {"matchLabels": {"app": "w"}}},
            ],
        }}));
        let mut a = attempt(&p);
        assert!(a.spreads[0].hard && !a.spreads[1].hard);
        assert!(a.spreads[0].self_match);
        // matchLabelKeys: only pods of the same `v` count.
        assert!(
            !a.spreads[0].selector.matches(&BTreeMap::from([("app".into(), "w".into()), ("v".into(), "1".into())]))
        );
        a.spread_counts.per_constraint[0] = BTreeMap::from([("a".into(), 1), ("b".into(), 0)]);
        let zone = |z: &str| BTreeMap::from([("zone".to_string(), z.to_string())]);
        assert_eq!(spread_fits(&a, &zone("a")), Err(vec![SPREAD.to_string()]), "1 + 1 - 0 > 1");
        assert_eq!(spread_fits(&a, &zone("b")), Ok(()));
        assert_eq!(spread_fits(&a, &BTreeMap::new()), Err(vec![SPREAD_LABEL.to_string()]));
        // minDomains above the domains counted makes the minimum zero.
        a.spread_counts.per_constraint[0] = BTreeMap::from([("a".into(), 1), ("b".into(), 1)]);
        assert_eq!(spread_fits(&a, &zone("a")), Ok(()));
        a.spreads[0].min_domains = 3;
        assert_eq!(spread_fits(&a, &zone("a")), Err(vec![SPREAD.to_string()]));
        // The soft constraint scores the node's domain.
        a.spread_counts.per_constraint[1] = BTreeMap::from([("n1".into(), 2), ("n2".into(), 0)]);
        let n = |name: &str| node(json!({"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}}}));
        assert_eq!((spread_score(&a, &n("n1")), spread_score(&a, &n("n2"))), (2, 0));
        assert_eq!(spread_score(&a, &node(json!({"metadata": {"name": "n3"}}))), usize::MAX);
    }

    #[test]
    fn filters_report_the_first_failing_plugin() {
        let p = pod(json!({"metadata": {"name": "p", "namespace": "ns"}, "spec": {
            "containers": [{"name": "a", "resources": {"requests": {"cpu": "3"}}}],
            "nodeSelector": {"role": "worker"},
        }}));
        let fit = node(
            json!({"metadata": {"name": "n", "labels": {"role": "worker"}}, "status": {"allocatable": {"cpu": "4", "pods": "110"}}}),
        );
        assert!(filter(&attempt(&p), &fit, &NodeUse::default()).is_ok());
        let busy = NodeUse { pods: 1, requests: Requests { cpu: 2000, memory: 0 } };
        assert_eq!(filter(&attempt(&p), &fit, &busy), Err(vec!["Insufficient cpu".to_string()]));
        let wrong = node(json!({"metadata": {"name": "n", "labels": {"role": "master"}}}));
        assert_eq!(filter(&attempt(&p), &wrong, &NodeUse::default()), Err(vec![NODE_AFFINITY.to_string()]));
        let tainted = node(
            json!({"metadata": {"name": "n", "labels": {"role": "master"}}, "spec": {"taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}]}}),
        );
        assert_eq!(
            filter(&attempt(&p), &tainted, &NodeUse::default()),
            Err(vec!["node(s) had untolerated taint {k: v}".to_string()])
        );
        let cordoned = node(
            json!({"metadata": {"name": "n"}, "spec": {"unschedulable": true, "taints": [{"key": "k", "effect": "NoSchedule"}]}}),
        );
        assert_eq!(filter(&attempt(&p), &cordoned, &NodeUse::default()), Err(vec![UNSCHEDULABLE.to_string()]));
    }

    #[test]
    fn required_node_affinity_ors_terms_and_ands_expressions() {
        let p = pod(json!({"metadata": {"name": "p"}, "spec": {"containers": [], "affinity": {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}, {"key": "gpu", "operator": "DoesNotExist"}]},
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["special"]}]},
            ]}
        }}}}));
        assert!(node_affinity_fits(&p, &node(json!({"metadata": {"name": "x", "labels": {"zone": "a"}}}))));
        assert!(!node_affinity_fits(
            &p,
            &node(json!({"metadata": {"name": "x", "labels": {"zone": "a", "gpu": "1"}}}))
        ));
        assert!(node_affinity_fits(&p, &node(json!({"metadata": {"name": "special"}}))));
        assert!(!node_affinity_fits(&p, &node(json!({"metadata": {"name": "x", "labels": {"zone": "b"}}}))));
    }

    #[test]
    fn anti_affinity_blocks_a_shared_topology() {
        let p = pod(
            json!({"metadata": {"name": "p", "namespace": "ns", "labels": {"app": "w"}}, "spec": {"containers": [], "affinity": {"podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [{"labelSelector": {"matchLabels": {"app": "w"}}, "topologyKey": "kubernetes.io/hostname"}]
            }}}}),
        );
        let mut a = attempt(&p);
        a.counts.anti_affinity.insert(("kubernetes.io/hostname".into(), "n1".into()), 1);
        let n1 = node(json!({"metadata": {"name": "n1", "labels": {"kubernetes.io/hostname": "n1"}}}));
        let n2 = node(json!({"metadata": {"name": "n2", "labels": {"kubernetes.io/hostname": "n2"}}}));
        assert_eq!(filter(&a, &n1, &NodeUse::default()), Err(vec![ANTI_AFFINITY.to_string()]));
        assert!(filter(&a, &n2, &NodeUse::default()).is_ok());
        let other = pod(json!({"metadata": {"name": "o", "namespace": "other", "labels": {"app": "w"}}}));
        let term = &a.anti_affinity_terms[0];
        assert!(!term_matches(term, &other, &mut |_| BTreeMap::new()), "terms default to the pod's namespace");
    }

    #[test]
    fn fit_errors_read_like_kube_schedulers() {
        let reasons = BTreeMap::from([(ANTI_AFFINITY.to_string(), 1)]);
        assert_eq!(fit_error(1, &reasons), "0/1 nodes are available: 1 node(s) didn't match pod anti-affinity rules.");
        let reasons = BTreeMap::from([(UNSCHEDULABLE.to_string(), 2), ("Insufficient cpu".to_string(), 1)]);
        assert_eq!(
            fit_error(3, &reasons),
            "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) were unschedulable."
        );
    }

    #[test]
    fn requests_fall_back_to_limits_and_count_init_containers() {
        let p = pod(json!({"metadata": {"name": "p"}, "spec": {
            "containers": [{"name": "a", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}, {"name": "b", "resources": {"requests": {"cpu": "500m"}}}],
            "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "2"}}}],
        }}));
        assert_eq!(pod_requests(&p), Requests { cpu: 2000, memory: (1i128 << 30) * 1000 });
    }
}

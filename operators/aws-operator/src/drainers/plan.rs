//! Pure: what the drainers do for one control plane or node pool, from what was read.
//!
//! The edge reads the Auto Scaling instances of the owner's groups, the private DNS names of
//! instances newly found waiting, and the owner's DrainerConfigs; [`plan`] decides which
//! DrainerConfigs to create and delete and which lifecycle actions to complete. Nothing here
//! waits or calls anything, so every rule is tested from fixtures below.
//!
//! The rules (reference §6.5, with two changes noted):
//!
//! * an instance in `Terminating:Wait` gets one DrainerConfig, named by its private DNS name
//!   (its workload-cluster node's name) and labelled so that the drain executor of this
//!   operator version selects it;
//! * its lifecycle action is completed (`CONTINUE`) once its DrainerConfig says `Drained` or
//!   `Timeout`; an instance without a DNS name (it never joined) is completed at once;
//! * while the cluster is being deleted nothing is drained: every waiting instance is completed
//!   at once (upstream created DrainerConfigs and completed them on the next loop);
//! * a DrainerConfig is deleted once its instance no longer waits (completed, timed out by its
//!   hook, or gone), not in the same pass as the completion: a completion that fails leaves the
//!   DrainerConfig, and its drained state, in place for the retry (upstream deleted at once);
//! * a DrainerConfig whose name is a waiting instance's node but whose instance label differs
//!   (the node name was reused) is deleted, and the right one created on a later pass.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use apis::drainer::{
    DrainerConfig, DrainerConfigSpec, DrainerConfigSpecGuest, DrainerConfigSpecGuestCluster,
    DrainerConfigSpecGuestClusterAPI, DrainerConfigSpecGuestNode, DrainerConfigSpecVersionBundle, TIMEOUT_ANNOTATION,
};
use apis::labels;
use kube::ResourceExt;
use kube::api::ObjectMeta;

/// The label (and, as upstream, annotation) naming the EC2 instance a DrainerConfig drains.
pub const INSTANCE_LABEL: &str = labels::AWS_OPERATOR_INSTANCE;

/// The version node-operator's DrainerConfigs carried in `spec.versionBundle.version`.
pub const DRAINER_VERSION_BUNDLE: &str = "0.2.0";

/// The Auto Scaling lifecycle state of an instance, as far as the drainers care.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LifecycleState {
    /// `Terminating:Wait`: held by a terminating hook until completed or timed out.
    TerminatingWait,
    /// `Pending:Wait`: held by a launching hook (the masters complete it themselves).
    PendingWait,
    /// Any other state (`InService`, `Terminating:Proceed`, `Terminated`, …).
    Other(String),
}

impl LifecycleState {
    /// Parses Auto Scaling's `LifecycleState` string.
    pub fn parse(state: &str) -> Self {
        match state {
            "Terminating:Wait" => LifecycleState::TerminatingWait,
            "Pending:Wait" => LifecycleState::PendingWait,
            other => LifecycleState::Other(other.to_string()),
        }
    }
}

/// One instance of one of the owner's Auto Scaling groups.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupInstance {
    /// The EC2 instance id.
    pub instance_id: String,
    /// The Auto Scaling group's name.
    pub group: String,
    /// Its lifecycle state.
    pub state: LifecycleState,
}

/// Whose instances these are: one control plane or one node pool of a cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Owner {
    /// The cluster id (`giantswarm.io/cluster`), e.g. `al9qy`.
    pub cluster_id: String,
    /// The namespace the owner and its DrainerConfigs live in.
    pub namespace: String,
    /// The workload cluster's API host name, e.g. `api.al9qy.k8s.example.com`.
    pub api_endpoint: String,
    /// Which kind of owner, with its id.
    pub kind: OwnerKind,
    /// This operator's version: the drain executor selects DrainerConfigs by it.
    pub operator_version: String,
    /// The terminating lifecycle hook of the owner's groups (`ControlPlane` or `NodePool`).
    pub hook: String,
    /// How long a drain of this owner's nodes may take: the operator's drain timeout, or less
    /// when the hook would time out first ([`drain_timeout`]).
    pub drain_timeout: Duration,
}

/// How long before a terminating hook times out its drain ends: the drain then reports
/// `Timeout` and the operator completes the action itself, with a Warning, instead of AWS
/// continuing on its own while the node is still being drained.
pub const HOOK_MARGIN: Duration = Duration::from_secs(60);

/// The drain timeout for a hook of `hook_timeout`: `configured`, but at most the hook's timeout
/// less [`HOOK_MARGIN`] (and at least a tenth of the hook's timeout, for very short hooks).
pub fn drain_timeout(configured: Duration, hook_timeout: Duration) -> Duration {
    let before_the_hook = hook_timeout.saturating_sub(HOOK_MARGIN).max(hook_timeout / 10);
    configured.min(before_the_hook)
}

/// The kind of group owner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OwnerKind {
    /// An `AWSControlPlane` (label `giantswarm.io/control-plane`).
    ControlPlane(String),
    /// An `AWSMachineDeployment` (label `giantswarm.io/machine-deployment`).
    NodePool(String),
    /// The worker group of a legacy `AWSConfig` cluster: the cluster's only drained group, so
    /// its DrainerConfigs carry the cluster label and no other owner label.
    LegacyCluster,
}

impl Owner {
    /// The labels every DrainerConfig of this owner carries; selecting by them lists exactly
    /// this owner's DrainerConfigs.
    pub fn labels(&self) -> BTreeMap<String, String> {
        let mut labels = BTreeMap::from([
            (labels::AWS_OPERATOR_VERSION.to_string(), self.operator_version.clone()),
            (labels::CLUSTER.to_string(), self.cluster_id.clone()),
        ]);
        match &self.kind {
            OwnerKind::ControlPlane(id) => labels.insert(labels::CONTROL_PLANE.to_string(), id.clone()),
            OwnerKind::NodePool(id) => labels.insert(labels::MACHINE_DEPLOYMENT.to_string(), id.clone()),
            OwnerKind::LegacyCluster => None,
        };
        labels
    }

    /// The label selector for [`Owner::labels`], e.g. for a LIST of DrainerConfigs.
    pub fn selector(&self) -> String {
        self.labels().iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",")
    }

    /// The DrainerConfig asking to drain `node`, the node of `instance_id`.
    pub fn drainer_config(&self, node: &str, instance_id: &str) -> DrainerConfig {
        let mut labels = self.labels();
        labels.insert(INSTANCE_LABEL.to_string(), instance_id.to_string());
        let spec = DrainerConfigSpec {
            guest: DrainerConfigSpecGuest {
                cluster: DrainerConfigSpecGuestCluster {
                    api: DrainerConfigSpecGuestClusterAPI { endpoint: self.api_endpoint.clone() },
                    id: self.cluster_id.clone(),
                },
                node: DrainerConfigSpecGuestNode { name: node.to_string() },
            },
            version_bundle: DrainerConfigSpecVersionBundle { version: DRAINER_VERSION_BUNDLE.to_string() },
        };
        DrainerConfig {
            metadata: ObjectMeta {
                name: Some(node.to_string()),
                namespace: Some(self.namespace.clone()),
                labels: Some(labels),
                annotations: Some(BTreeMap::from([
                    (INSTANCE_LABEL.to_string(), instance_id.to_string()),
                    (TIMEOUT_ANNOTATION.to_string(), format!("{}s", self.drain_timeout.as_secs().max(1))),
                ])),
                ..ObjectMeta::default()
            },
            spec,
            status: None,
        }
    }
}

/// Why a lifecycle action is completed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompletionReason {
    /// The node was drained.
    Drained,
    /// Draining timed out; the instance goes anyway.
    DrainTimeout,
    /// The cluster is being deleted: nothing is drained.
    ClusterDeleting,
    /// The instance has no private DNS name, so no node to drain.
    NoNode,
}

impl CompletionReason {
    /// The event reason for a completion.
    pub fn event_reason(self) -> &'static str {
        match self {
            CompletionReason::Drained => "NodeDrained",
            CompletionReason::DrainTimeout => "NodeDrainTimeout",
            CompletionReason::ClusterDeleting => "NodeReleasedForDeletion",
            CompletionReason::NoNode => "InstanceWithoutNode",
        }
    }

    /// Whether the completion deserves a Warning rather than a Normal event.
    pub fn is_warning(self) -> bool {
        self == CompletionReason::DrainTimeout
    }
}

/// One `CompleteLifecycleAction(CONTINUE)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Completion {
    /// The instance.
    pub instance_id: String,
    /// Its Auto Scaling group.
    pub group: String,
    /// The terminating hook holding it.
    pub hook: String,
    /// Its node, when it has one.
    pub node: Option<String>,
    /// Why it is completed now.
    pub reason: CompletionReason,
}

/// What to do for one owner.
#[derive(Clone, Debug, Default)]
pub struct Plan {
    /// Waiting instances whose private DNS name is not known yet: describe them (one batched
    /// `DescribeInstances`) and plan again.
    pub describe: Vec<String>,
    /// DrainerConfigs to create.
    pub create: Vec<DrainerConfig>,
    /// Lifecycle actions to complete.
    pub complete: Vec<Completion>,
    /// Names of DrainerConfigs to delete.
    pub delete: Vec<String>,
    /// Instances still held by a terminating hook after this plan (draining, or about to be
    /// completed): the owner's finalizer stays while any is.
    pub waiting: usize,
}

impl Plan {
    /// Whether the plan changes nothing and nothing waits.
    pub fn is_idle(&self) -> bool {
        self.describe.is_empty()
            && self.create.is_empty()
            && self.complete.is_empty()
            && self.delete.is_empty()
            && self.waiting == 0
    }
}

/// Plans the drainers of `owner`.
///
/// `instances` are the owner's groups' instances; `dns` maps instance ids to their private DNS
/// names as far as known (an empty name: the instance has none); `existing` are the owner's
/// DrainerConfigs (selected by [`Owner::selector`]); `deleting` says whether the cluster is
/// being deleted.
pub fn plan(
    owner: &Owner,
    instances: &[GroupInstance],
    dns: &BTreeMap<String, String>,
    existing: &[DrainerConfig],
    deleting: bool,
) -> Plan {
    let mut out = Plan::default();
    let by_instance: BTreeMap<&str, &DrainerConfig> =
        existing.iter().filter_map(|dc| Some((dc.labels().get(INSTANCE_LABEL)?.as_str(), dc))).collect();
    let by_name: BTreeMap<String, &DrainerConfig> = existing.iter().map(|dc| (dc.name_any(), dc)).collect();
    let waiting: Vec<&GroupInstance> =
        instances.iter().filter(|i| i.state == LifecycleState::TerminatingWait).collect();
    let waiting_ids: BTreeSet<&str> = waiting.iter().map(|i| i.instance_id.as_str()).collect();
    let mut stale = BTreeSet::new();

    for instance in &waiting {
        out.waiting += 1;
        let id = instance.instance_id.as_str();
        let complete = |reason, node: Option<&str>| Completion {
            instance_id: id.to_string(),
            group: instance.group.clone(),
            hook: owner.hook.clone(),
            node: node.map(str::to_string),
            reason,
        };
        if let Some(dc) = by_instance.get(id) {
            let node = dc.spec.guest.node.name.as_str();
            let reason = if deleting {
                Some(CompletionReason::ClusterDeleting)
            } else if dc.status.as_ref().is_some_and(|s| s.is_drained()) {
                Some(CompletionReason::Drained)
            } else if dc.status.as_ref().is_some_and(|s| s.timed_out()) {
                Some(CompletionReason::DrainTimeout)
            } else {
                None
            };
            if let Some(reason) = reason {
                out.complete.push(complete(reason, Some(node)));
            }
            continue;
        }
        if deleting {
            out.complete.push(complete(CompletionReason::ClusterDeleting, dns.get(id).map(String::as_str)));
            continue;
        }
        match dns.get(id).map(String::as_str) {
            None => out.describe.push(id.to_string()),
            Some("") => out.complete.push(complete(CompletionReason::NoNode, None)),
            Some(node) => match by_name.get(node) {
                // The node name is taken by a DrainerConfig for another instance: it goes first.
                Some(other) => {
                    stale.insert(other.name_any());
                }
                None => out.create.push(owner.drainer_config(node, id)),
            },
        }
    }

    for dc in existing {
        let instance = dc.labels().get(INSTANCE_LABEL).map(String::as_str);
        let gone = instance.is_none_or(|id| !waiting_ids.contains(id));
        if gone || stale.contains(&dc.name_any()) {
            out.delete.push(dc.name_any());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use apis::drainer::{CONDITION_DRAINED, CONDITION_TIMEOUT, DrainerConfigStatus, DrainerConfigStatusCondition};
    use jiff::Timestamp;

    fn owner() -> Owner {
        Owner {
            cluster_id: "zq7e1".into(),
            namespace: "org-acme".into(),
            api_endpoint: "api.zq7e1.k8s.example.org".into(),
            kind: OwnerKind::NodePool("p4k2m".into()),
            operator_version: "16.2.0".into(),
            hook: "NodePool".into(),
            drain_timeout: Duration::from_secs(3540),
        }
    }

    #[test]
    fn a_drain_ends_before_its_hook_times_out() {
        let hour = Duration::from_secs(3600);
        // Masters: the 900 s hook would let AWS continue while the 3600 s drain still runs.
        assert_eq!(drain_timeout(hour, Duration::from_secs(900)), Duration::from_secs(840));
        assert_eq!(drain_timeout(hour, hour), Duration::from_secs(3540));
        // A shorter configured timeout stays.
        assert_eq!(drain_timeout(Duration::from_secs(300), Duration::from_secs(900)), Duration::from_secs(300));
        // A hook shorter than the margin still leaves the drain some time.
        assert_eq!(drain_timeout(hour, Duration::from_secs(30)), Duration::from_secs(3));
        let cp = Owner { drain_timeout: Duration::from_secs(840), ..owner() };
        let dc = cp.drainer_config("ip-10-1-2-3.eu-central-1.compute.internal", "i-0aaa");
        assert_eq!(dc.annotations()[TIMEOUT_ANNOTATION], "840s");
        assert_eq!(node_lifecycle::drain::plan::parse_timeout("840s"), Ok(Duration::from_secs(840)));
    }

    fn instance(id: &str, state: &str) -> GroupInstance {
        GroupInstance {
            instance_id: id.into(),
            group: "cluster-zq7e1-tcnp-p4k2m-NodePoolAutoScalingGroup-X1".into(),
            state: LifecycleState::parse(state),
        }
    }

    fn dns(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(i, d)| (i.to_string(), d.to_string())).collect()
    }

    fn with_condition(mut dc: DrainerConfig, type_: &str) -> DrainerConfig {
        dc.status = Some(DrainerConfigStatus {
            conditions: vec![DrainerConfigStatusCondition::holds(type_, Timestamp::UNIX_EPOCH)],
            ..DrainerConfigStatus::default()
        });
        dc
    }

    const NODE_A: &str = "ip-10-9-3-17.eu-west-1.compute.internal";
    const NODE_B: &str = "ip-10-9-4-201.eu-west-1.compute.internal";

    #[test]
    fn a_waiting_instance_with_a_known_node_gets_a_drainer_config_the_executor_selects() {
        let instances = [instance("i-0aaa", "Terminating:Wait"), instance("i-0bbb", "InService")];
        let p = plan(&owner(), &instances, &dns(&[("i-0aaa", NODE_A)]), &[], false);
        assert_eq!(p.create.len(), 1);
        let dc = &p.create[0];
        assert_eq!(dc.name_any(), NODE_A);
        assert_eq!(dc.namespace().as_deref(), Some("org-acme"));
        assert_eq!(dc.spec.guest.node.name, NODE_A);
        assert_eq!(dc.spec.guest.cluster.id, "zq7e1");
        assert_eq!(dc.spec.guest.cluster.api.endpoint, "api.zq7e1.k8s.example.org");
        let l = dc.labels();
        assert_eq!(l.get("aws-operator.giantswarm.io/version").map(String::as_str), Some("16.2.0"));
        assert_eq!(l.get("giantswarm.io/cluster").map(String::as_str), Some("zq7e1"));
        assert_eq!(l.get("giantswarm.io/machine-deployment").map(String::as_str), Some("p4k2m"));
        assert_eq!(l.get(INSTANCE_LABEL).map(String::as_str), Some("i-0aaa"));
        assert!(p.complete.is_empty() && p.delete.is_empty() && p.describe.is_empty());
        assert_eq!(p.waiting, 1);
    }

    #[test]
    fn a_control_plane_owner_labels_its_drainer_configs_by_control_plane() {
        let cp = Owner { kind: OwnerKind::ControlPlane("m8xw2".into()), hook: "ControlPlane".into(), ..owner() };
        let dc = cp.drainer_config(NODE_A, "i-0aaa");
        assert_eq!(dc.labels().get("giantswarm.io/control-plane").map(String::as_str), Some("m8xw2"));
        assert!(!dc.labels().contains_key("giantswarm.io/machine-deployment"));
        assert_eq!(
            cp.selector(),
            "aws-operator.giantswarm.io/version=16.2.0,giantswarm.io/cluster=zq7e1,giantswarm.io/control-plane=m8xw2"
        );
        // The selector matches what it creates.
        assert!(cp.labels().iter().all(|(k, v)| dc.labels().get(k) == Some(v)));
    }

    #[test]
    fn only_newly_waiting_instances_without_a_drainer_config_are_described() {
        let existing = [owner().drainer_config(NODE_A, "i-0aaa")];
        let instances = [
            instance("i-0aaa", "Terminating:Wait"),
            instance("i-0ccc", "Terminating:Wait"),
            instance("i-0ddd", "InService"),
            instance("i-0eee", "Pending:Wait"),
        ];
        let p = plan(&owner(), &instances, &BTreeMap::new(), &existing, false);
        assert_eq!(p.describe, vec!["i-0ccc".to_string()]);
        assert!(p.create.is_empty() && p.complete.is_empty() && p.delete.is_empty());
        assert_eq!(p.waiting, 2);
    }

    #[test]
    fn drained_and_timed_out_drains_complete_their_instances_and_keep_the_drainer_config() {
        let existing = [
            with_condition(owner().drainer_config(NODE_A, "i-0aaa"), CONDITION_DRAINED),
            with_condition(owner().drainer_config(NODE_B, "i-0bbb"), CONDITION_TIMEOUT),
        ];
        let instances = [instance("i-0aaa", "Terminating:Wait"), instance("i-0bbb", "Terminating:Wait")];
        let p = plan(&owner(), &instances, &BTreeMap::new(), &existing, false);
        let got: Vec<_> = p.complete.iter().map(|c| (c.instance_id.as_str(), c.reason, c.hook.as_str())).collect();
        assert_eq!(
            got,
            vec![
                ("i-0aaa", CompletionReason::Drained, "NodePool"),
                ("i-0bbb", CompletionReason::DrainTimeout, "NodePool")
            ]
        );
        assert!(p.complete[1].reason.is_warning() && !p.complete[0].reason.is_warning());
        assert_eq!(p.complete[0].group, instances[0].group);
        assert_eq!(p.complete[0].node.as_deref(), Some(NODE_A));
        assert!(p.delete.is_empty(), "deleted only once the instance no longer waits");
        assert!(p.create.is_empty());
    }

    #[test]
    fn a_drain_in_progress_changes_nothing() {
        let existing = [owner().drainer_config(NODE_A, "i-0aaa")];
        let p = plan(&owner(), &[instance("i-0aaa", "Terminating:Wait")], &BTreeMap::new(), &existing, false);
        assert!(p.describe.is_empty() && p.create.is_empty() && p.complete.is_empty() && p.delete.is_empty());
        assert_eq!(p.waiting, 1);
        assert!(!p.is_idle(), "a waiting instance holds the finalizer");
    }

    #[test]
    fn drainer_configs_of_instances_no_longer_waiting_are_deleted() {
        let existing = [
            with_condition(owner().drainer_config(NODE_A, "i-0aaa"), CONDITION_DRAINED),
            owner().drainer_config(NODE_B, "i-0bbb"),
        ];
        // i-0aaa was completed and proceeds; i-0bbb is gone altogether.
        let p = plan(&owner(), &[instance("i-0aaa", "Terminating:Proceed")], &BTreeMap::new(), &existing, false);
        assert_eq!(p.delete, vec![NODE_A.to_string(), NODE_B.to_string()]);
        assert!(p.complete.is_empty() && p.create.is_empty());
        assert_eq!(p.waiting, 0);
    }

    #[test]
    fn a_cluster_being_deleted_completes_every_waiting_instance_at_once_without_draining() {
        let existing = [owner().drainer_config(NODE_A, "i-0aaa")];
        let instances = [instance("i-0aaa", "Terminating:Wait"), instance("i-0bbb", "Terminating:Wait")];
        let p = plan(&owner(), &instances, &BTreeMap::new(), &existing, true);
        let got: Vec<_> = p.complete.iter().map(|c| (c.instance_id.as_str(), c.reason)).collect();
        assert_eq!(
            got,
            vec![("i-0aaa", CompletionReason::ClusterDeleting), ("i-0bbb", CompletionReason::ClusterDeleting)]
        );
        assert!(p.create.is_empty() && p.describe.is_empty(), "nothing is drained or described");
        assert!(p.delete.is_empty());
    }

    #[test]
    fn an_instance_without_a_dns_name_is_completed_at_once() {
        let p = plan(&owner(), &[instance("i-0aaa", "Terminating:Wait")], &dns(&[("i-0aaa", "")]), &[], false);
        assert_eq!(p.complete.len(), 1);
        assert_eq!(p.complete[0].reason, CompletionReason::NoNode);
        assert!(p.create.is_empty());
    }

    #[test]
    fn a_node_name_taken_by_another_instances_drainer_config_is_freed_first() {
        // A stale DrainerConfig for an instance that is gone, named like the new instance's node.
        let existing = [with_condition(owner().drainer_config(NODE_A, "i-0old"), CONDITION_DRAINED)];
        let p =
            plan(&owner(), &[instance("i-0new", "Terminating:Wait")], &dns(&[("i-0new", NODE_A)]), &existing, false);
        assert_eq!(p.delete, vec![NODE_A.to_string()]);
        assert!(p.complete.is_empty(), "the old instance's Drained does not complete the new one");
        assert!(p.create.is_empty(), "created on the next pass, once the name is free");
    }

    #[test]
    fn a_drainer_config_node_operator_finished_completes_its_instance() {
        // As node-operator (or an older aws-operator) leaves it: conditions only.
        let dc: DrainerConfig = serde_json::from_value(serde_json::json!({
            "apiVersion": "core.giantswarm.io/v1alpha1", "kind": "DrainerConfig",
            "metadata": {"name": NODE_B, "namespace": "org-acme", "labels": {
                "aws-operator.giantswarm.io/version": "16.2.0", "giantswarm.io/cluster": "zq7e1",
                "giantswarm.io/machine-deployment": "p4k2m", "aws-operator.giantswarm.io/instance": "i-0bbb"}},
            "spec": {"guest": {"cluster": {"api": {"endpoint": "api.zq7e1.k8s.example.org"}, "id": "zq7e1"},
                               "node": {"name": NODE_B}},
                     "versionBundle": {"version": "0.2.0"}},
            "status": {"conditions": [{"lastHeartbeatTime": "2026-01-02T03:04:05Z",
                                       "lastTransitionTime": "2026-01-02T03:04:05Z",
                                       "status": "True", "type": "Drained"}]}
        }))
        .expect("fixture");
        let p = plan(&owner(), &[instance("i-0bbb", "Terminating:Wait")], &BTreeMap::new(), &[dc], false);
        assert_eq!(p.complete.len(), 1);
        assert_eq!((p.complete[0].instance_id.as_str(), p.complete[0].reason), ("i-0bbb", CompletionReason::Drained));
    }

    #[test]
    fn a_drainer_config_without_an_instance_label_is_deleted() {
        let mut dc = owner().drainer_config(NODE_A, "i-0aaa");
        dc.metadata.labels.as_mut().map(|l| l.remove(INSTANCE_LABEL));
        let p = plan(&owner(), &[], &BTreeMap::new(), &[dc], false);
        assert_eq!(p.delete, vec![NODE_A.to_string()]);
        assert!(plan(&owner(), &[], &BTreeMap::new(), &[], false).is_idle());
    }
}

//! Release upgrades of node pools, as pure decisions (reference §5.7.1, §15.2).
//!
//! A cluster relabelled to a new Release is handed to the operator of that Release's
//! `aws-operator` version, whose templates differ (the node config path holds the version, the
//! AMI follows the Release): TCCP and TCCPF update at once, TCCPN next, and its masters roll one
//! at a time. A node pool's stack waits until the masters are done, then rolls in batches:
//!
//! - **Masters first.** The pool's update waits until TCCPN is settled and reports this
//!   operator's version, and — when the pool itself still runs another version, that is during
//!   an upgrade — until every master node of the workload cluster carries this version's
//!   `aws-operator.giantswarm.io/version` label and at least as many masters are Ready as the
//!   control plane has. A stack that says it is done is not enough: the nodes show that the new
//!   masters joined. An unreachable workload cluster holds the pool, since masters that cannot
//!   be seen cannot be trusted to carry workers.
//! - **Scaling is never held.** A change that only moves the group's minimum or maximum
//!   (the deployed template equals the desired one rendered with the live minimum and maximum)
//!   applies at once and rolls nothing.
//! - **The cluster autoscaler steps aside.** Before a pool's stack update that replaces
//!   instances, the group's `k8s.io/cluster-autoscaler/enabled` tag is removed, so the
//!   autoscaler does not fight the roll; once the stack is current again the tag is put back.
//!
//! Everything here is a function of what the controller observed; the reads and writes are the
//! controller's ([`crate::controllers::node_pool`]).

use k8s_openapi::api::core::v1::Node;

/// The Auto Scaling group tag the cluster autoscaler discovers groups by; off during a roll.
pub const AUTOSCALER_ENABLED_TAG: &str = "k8s.io/cluster-autoscaler/enabled";

/// The `Ready` reason of a pool whose update waits for the masters.
pub const WAITING_FOR_MASTERS: &str = "WaitingForMasters";

/// How a pool's deployed stack differs from the desired one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// Not at all.
    None,
    /// Only in the group's minimum or maximum size.
    ScalingOnly,
    /// In what replaces no instance: security-group rules (a new pool's peer rule), tags,
    /// outputs. The controller tells it from [`Change::Update`] by the templates' own diff
    /// ([`crate::approval::template_diff`]); [`change`] never returns it.
    InPlace,
    /// In anything else, or in what replaces instances: the launch template, the network…
    Update,
}

/// Classify a pool's change from three template hashes: the deployed one, the desired one, and
/// the desired one rendered with the group's live minimum and maximum (`None` when the group's
/// size could not be read).
pub fn change(deployed: Option<&str>, desired: &str, desired_at_live_size: Option<&str>) -> Change {
    match deployed {
        Some(d) if d == desired => Change::None,
        Some(d) if desired_at_live_size == Some(d) => Change::ScalingOnly,
        _ => Change::Update,
    }
}

/// One master node of a workload cluster, as the upgrade sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MasterNode {
    /// The node's name.
    pub name: String,
    /// Its `aws-operator.giantswarm.io/version` label.
    pub version: Option<String>,
    /// Whether its `Ready` condition is `True`.
    pub ready: bool,
}

/// The master nodes among `nodes`: those labelled `node-role.kubernetes.io/control-plane`,
/// `node-role.kubernetes.io/master` or `kubernetes.io/role=master`, sorted by name.
pub fn master_nodes(nodes: &[Node]) -> Vec<MasterNode> {
    let mut masters: Vec<MasterNode> = nodes
        .iter()
        .filter(|n| n.metadata.deletion_timestamp.is_none())
        .filter_map(|n| {
            let labels = n.metadata.labels.as_ref()?;
            let master = labels.contains_key("node-role.kubernetes.io/control-plane")
                || labels.contains_key("node-role.kubernetes.io/master")
                || labels.get("kubernetes.io/role").is_some_and(|r| r == "master");
            master.then(|| MasterNode {
                name: n.metadata.name.clone().unwrap_or_default(),
                version: labels.get(apis::labels::AWS_OPERATOR_VERSION).cloned(),
                ready: n
                    .status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True")),
            })
        })
        .collect();
    masters.sort_by(|a, b| a.name.cmp(&b.name));
    masters
}

/// What the masters' side looks like to a pool that wants to update.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Masters {
    /// Whether TCCPN is settled (`CREATE_COMPLETE`, `UPDATE_COMPLETE`).
    pub stack_usable: bool,
    /// TCCPN's `OperatorVersion` output.
    pub stack_version: Option<String>,
    /// How many masters the control plane has.
    pub replicas: usize,
    /// The workload cluster's master nodes, or why they could not be read; `None` when they
    /// were not looked at ([`nodes_needed`] said no).
    pub nodes: Option<Result<Vec<MasterNode>, String>>,
}

/// Whether a pool's update needs to see the master nodes: only while the pool runs another
/// operator version than this one (an upgrade). A pool already on this version changes for
/// other reasons (a sibling pool, an instance type), with masters that already run it.
pub fn nodes_needed(own_version: &str, pool_version: Option<&str>) -> bool {
    pool_version != Some(own_version)
}

impl Masters {
    /// For a decision that does not look at the masters (no update, or scaling only).
    pub fn none() -> Self {
        Self { stack_usable: false, stack_version: None, replicas: 0, nodes: None }
    }
}

/// `Ok` when a pool may update now; else why it waits, for its `Ready` message.
pub fn masters_gate(own_version: &str, masters: &Masters) -> Result<(), String> {
    if !masters.stack_usable {
        return Err(format!("waiting for the masters to run version {own_version}: their stack is not settled"));
    }
    match masters.stack_version.as_deref() {
        Some(v) if v == own_version => {}
        Some(v) => {
            return Err(format!("waiting for the masters to run version {own_version}: their stack runs version {v}"));
        }
        None => {
            return Err(format!("waiting for the masters to run version {own_version}: their stack has no version"));
        }
    }
    let nodes = match &masters.nodes {
        None => return Ok(()),
        Some(Err(why)) => {
            return Err(format!("waiting for the masters to run version {own_version}: {why}"));
        }
        Some(Ok(nodes)) => nodes,
    };
    let stale: Vec<&str> =
        nodes.iter().filter(|n| n.version.as_deref() != Some(own_version)).map(|n| n.name.as_str()).collect();
    if !stale.is_empty() {
        return Err(format!(
            "waiting for the masters to run version {own_version}: master nodes {} do not carry it yet",
            stale.join(", ")
        ));
    }
    let ready = nodes.iter().filter(|n| n.ready).count();
    if ready < masters.replicas {
        return Err(format!(
            "waiting for the masters to run version {own_version}: {ready} of {} master nodes are Ready",
            masters.replicas
        ));
    }
    Ok(())
}

/// What the pool controller does with its stack this reconcile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Nothing to change: the autoscaler tag belongs on the group.
    Current,
    /// Apply a change that replaces no instance (scaling, rules, tags) now; nothing rolls, no
    /// window, rollout slot or master is waited for, the autoscaler's tag stays.
    InPlace,
    /// Update the stack, which replaces instances: the tag comes off first.
    Roll,
    /// Wait for the masters (the `Ready` message).
    Hold(String),
}

/// The decision for a pool's stack.
pub fn decide(change: Change, own_version: &str, masters: &Masters) -> Decision {
    match change {
        Change::None => Decision::Current,
        Change::ScalingOnly | Change::InPlace => Decision::InPlace,
        Change::Update => match masters_gate(own_version, masters) {
            Ok(()) => Decision::Roll,
            Err(why) => Decision::Hold(why),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(name: &str, labels: serde_json::Value, ready: &str) -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": name, "labels": labels},
            "status": {"conditions": [{"type": "Ready", "status": ready}]}
        }))
        .expect("node")
    }

    fn masters(nodes: Option<Result<Vec<MasterNode>, String>>) -> Masters {
        Masters { stack_usable: true, stack_version: Some("16.2.0".into()), replicas: 3, nodes }
    }

    fn master(name: &str, version: &str, ready: bool) -> MasterNode {
        MasterNode { name: name.into(), version: Some(version.into()), ready }
    }

    #[test]
    fn a_change_is_classified_by_the_three_hashes() {
        assert_eq!(change(Some("a"), "a", None), Change::None);
        assert_eq!(change(Some("a"), "b", Some("a")), Change::ScalingOnly, "only min or max moved");
        assert_eq!(change(Some("a"), "b", Some("c")), Change::Update);
        assert_eq!(change(Some("a"), "b", None), Change::Update, "an unknown live size is an update");
        assert_eq!(change(None, "b", None), Change::Update);
    }

    #[test]
    fn master_nodes_are_found_by_any_of_the_role_labels() {
        let nodes = [
            node(
                "m2",
                json!({"node-role.kubernetes.io/control-plane": "", "aws-operator.giantswarm.io/version": "16.2.0"}),
                "True",
            ),
            node("m1", json!({"kubernetes.io/role": "master"}), "False"),
            node("w1", json!({"kubernetes.io/role": "worker", "aws-operator.giantswarm.io/version": "16.1.0"}), "True"),
            node("m3", json!({"node-role.kubernetes.io/master": ""}), "True"),
        ];
        let found = master_nodes(&nodes);
        assert_eq!(
            found,
            vec![
                MasterNode { name: "m1".into(), version: None, ready: false },
                MasterNode { name: "m2".into(), version: Some("16.2.0".into()), ready: true },
                MasterNode { name: "m3".into(), version: None, ready: true },
            ]
        );
    }

    #[test]
    fn a_pool_on_another_version_waits_for_every_master_node_of_this_one() {
        assert!(nodes_needed("16.2.0", Some("16.1.0")));
        assert!(nodes_needed("16.2.0", None));
        assert!(!nodes_needed("16.2.0", Some("16.2.0")));

        let all_new = vec![master("a", "16.2.0", true), master("b", "16.2.0", true), master("c", "16.2.0", true)];
        assert_eq!(masters_gate("16.2.0", &masters(Some(Ok(all_new.clone())))), Ok(()));
        // One master still on the old version: held, and named.
        let mut one_old = all_new.clone();
        one_old[1].version = Some("16.1.0".into());
        let why = masters_gate("16.2.0", &masters(Some(Ok(one_old)))).expect_err("held");
        assert!(why.contains("master nodes b do not carry it"), "{why}");
        // The third new master not Ready (or not registered) yet: held.
        let mut not_ready = all_new.clone();
        not_ready[2].ready = false;
        let why = masters_gate("16.2.0", &masters(Some(Ok(not_ready)))).expect_err("held");
        assert!(why.contains("2 of 3 master nodes are Ready"), "{why}");
        let why = masters_gate("16.2.0", &masters(Some(Ok(all_new[..2].to_vec())))).expect_err("held");
        assert!(why.contains("2 of 3"), "{why}");
        // An unreachable workload cluster holds the pool.
        let why = masters_gate("16.2.0", &masters(Some(Err("the workload cluster is unreachable".into()))))
            .expect_err("held");
        assert!(why.contains("unreachable"), "{why}");
        // No node evidence needed (the pool already runs this version).
        assert_eq!(masters_gate("16.2.0", &masters(None)), Ok(()));
    }

    #[test]
    fn the_masters_stack_must_be_settled_on_this_version() {
        let unsettled = Masters { stack_usable: false, ..masters(None) };
        assert!(masters_gate("16.2.0", &unsettled).expect_err("held").contains("not settled"));
        let old = Masters { stack_version: Some("16.1.0".into()), ..masters(None) };
        assert!(masters_gate("16.2.0", &old).expect_err("held").contains("runs version 16.1.0"));
        let none = Masters { stack_version: None, ..masters(None) };
        assert!(masters_gate("16.2.0", &none).is_err());
    }

    #[test]
    fn scaling_and_in_place_changes_are_never_held_and_updates_roll_only_behind_the_masters() {
        let held = Masters { stack_usable: false, ..masters(None) };
        assert_eq!(decide(Change::None, "16.2.0", &held), Decision::Current);
        assert_eq!(decide(Change::ScalingOnly, "16.2.0", &held), Decision::InPlace);
        assert_eq!(decide(Change::InPlace, "16.2.0", &held), Decision::InPlace);
        assert!(matches!(decide(Change::Update, "16.2.0", &held), Decision::Hold(_)));
        assert_eq!(decide(Change::Update, "16.2.0", &masters(None)), Decision::Roll);
    }
}

//! Plan and approve, as pure functions: what a stack update would change, and whether the
//! operator may run it now.
//!
//! A platform team that wants to see an upgrade before it happens sets the cluster's
//! [`UPDATE_APPROVAL`] annotation. From then on, instead of updating a stack of that cluster
//! (TCCP and TCCPF of the AWSCluster, TCCPN of the AWSControlPlane, TCNP of each
//! AWSMachineDeployment), the operator creates a CloudFormation change set, records a summary of
//! it in the owning object's status with a [plan hash](plan_hash), and waits. Annotating the
//! object with [`APPROVED_PLAN`]` = <hash>` runs exactly that change set. The decision is
//! [`decide`]; the reads and writes are [`crate::stack_ops`]'s.
//!
//! Besides CloudFormation's own account of a change set, [`template_diff`] compares the deployed
//! and the desired template: resources added, removed and modified with the property paths that
//! differ, and whether CloudFormation will replace them, from the properties AWS's resource
//! reference marks "Update requires: Replacement" ([`replacement_properties`]). The change set
//! is the authority on counts; the diff supplies the paths, and the replacement verdict where
//! the change set gives none.

use std::collections::BTreeMap;

use apis::aws::{PendingUpdate, PlannedReplacement, StackStatus as StatusEntry};
use sha2::{Digest, Sha256};

mod diff;

pub use diff::{ChangeAction, Replacement, ResourceChange, replacement_properties, template_diff};

/// The AWSCluster annotation that turns the gate on: `required` (every stack update but a
/// scaling-only one waits for approval) or `strict` (scaling too). Absent: updates run at once.
pub const UPDATE_APPROVAL: &str = "aws-operator.giantswarm.io/update-approval";

/// The annotation that approves a pending update, on the object that owns the stack: the
/// AWSCluster (TCCP, TCCPF), the AWSControlPlane (TCCPN) or the AWSMachineDeployment (TCNP).
pub const APPROVED_PLAN: &str = "aws-operator.giantswarm.io/approved-plan";

/// The condition that shows a stack update waiting for approval.
pub const UPDATE_PENDING: &str = "UpdatePending";

/// How many hex digits a plan hash has.
pub const PLAN_HASH_LEN: usize = 16;

/// The gate's setting for a cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Setting {
    /// No gate: updates run at once (the default).
    #[default]
    Off,
    /// Updates wait for approval, except changes of a pool's minimum or maximum size.
    Required,
    /// Every update waits for approval.
    Strict,
}

/// The setting of the cluster with these annotations. An unknown value turns the gate on in
/// its strictest form (nothing runs unapproved) and is returned as `Err` with a message naming
/// the annotation and its values.
pub fn setting(annotations: &BTreeMap<String, String>) -> (Setting, Option<String>) {
    match annotations.get(UPDATE_APPROVAL).map(|v| v.trim()) {
        None | Some("") | Some("off") => (Setting::Off, None),
        Some("required") => (Setting::Required, None),
        Some("strict") => (Setting::Strict, None),
        Some(other) => (
            Setting::Strict,
            Some(format!(
                "annotation {UPDATE_APPROVAL}={other:?} is not a setting: use \"required\" (scaling needs no approval), \"strict\" (every update needs approval) or remove it (no approval); until then every update waits for approval"
            )),
        ),
    }
}

/// What the owning object's [`APPROVED_PLAN`] annotation says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Approval {
    /// No annotation.
    None,
    /// A plan hash.
    Plan(String),
    /// A value that is not a plan hash.
    Malformed(String),
}

/// Read the [`APPROVED_PLAN`] annotation.
pub fn approval(annotations: &BTreeMap<String, String>) -> Approval {
    match annotations.get(APPROVED_PLAN).map(|v| v.trim()) {
        None | Some("") => Approval::None,
        Some(v) if is_plan_hash(v) => Approval::Plan(v.to_string()),
        Some(v) => Approval::Malformed(v.to_string()),
    }
}

/// Whether `s` has the form of a plan hash: [`PLAN_HASH_LEN`] lowercase hex digits.
pub fn is_plan_hash(s: &str) -> bool {
    s.len() == PLAN_HASH_LEN && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The plan hash of updating stack `stack` to the template whose stack hash (template and tags,
/// [`aws_stacks::cfn::stack_hash`]) is `desired_hash`. The operator's stacks take no
/// CloudFormation parameters: everything is rendered into the template, so the template hash
/// covers them.
pub fn plan_hash(stack: &str, desired_hash: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(b"plan/v1\n");
    hasher.update(stack.as_bytes());
    hasher.update(b"\n");
    hasher.update(desired_hash.as_bytes());
    hasher.finalize().iter().take(PLAN_HASH_LEN / 2).map(|b| format!("{b:02x}")).collect()
}

/// The name of the change set that holds plan `plan` of stack `stack` (change set names are
/// looked up per stack; the hash makes one per plan, so a plan's change set is found again).
pub fn change_set_name(stack: &str, plan: &str) -> String {
    format!("aws-operator-{stack}-{plan}")
}

/// What kind of update a stack would get.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpdateKind {
    /// Only a node pool's minimum or maximum size changes ([`crate::upgrade::Change::ScalingOnly`]).
    ScalingOnly,
    /// No resource changes: the change set and the template diff list none (only the stack's
    /// outputs change, such as its template hash).
    OutputsOnly,
    /// Anything else.
    Other,
}

/// Why an update waits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hold {
    /// Not approved yet (or the object carries the approval of an earlier plan that already ran).
    Unapproved,
    /// The object approves a plan that is not the pending one and never ran: refused.
    Stale {
        /// The approved hash.
        approved: String,
    },
    /// The approval annotation is not a plan hash.
    Malformed {
        /// Its value.
        value: String,
    },
}

/// What to do with a stack whose template differs from the desired one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// No gate applies: update the stack as without one (`UpdateStack`).
    Update,
    /// Make (or keep) the plan's change set, record its summary, and wait.
    Hold(Hold),
    /// The pending plan is approved: execute its change set.
    Execute,
}

/// Decide what to do with an update of plan `plan`: `setting` is the cluster's, `kind` the
/// update's, `approval` the owning object's annotation, and `applied` the plans already run by
/// approval on this object's stacks.
pub fn decide(setting: Setting, kind: UpdateKind, plan: &str, approval: &Approval, applied: &[String]) -> Action {
    match (setting, kind) {
        (Setting::Off, _) | (Setting::Required, UpdateKind::ScalingOnly | UpdateKind::OutputsOnly) => {
            return Action::Update;
        }
        _ => {}
    }
    match approval {
        Approval::Plan(p) if p == plan => Action::Execute,
        Approval::Plan(p) if applied.iter().any(|a| a == p) => Action::Hold(Hold::Unapproved),
        Approval::Plan(p) => Action::Hold(Hold::Stale { approved: p.clone() }),
        Approval::Malformed(v) => Action::Hold(Hold::Malformed { value: v.clone() }),
        Approval::None => Action::Hold(Hold::Unapproved),
    }
}

/// How `kubectl` names the kind of `K` unambiguously: `<plural>.<group>` (Giant Swarm's and
/// Cluster API's AWSCluster share a kind name).
pub fn kubectl_resource<K: kube::Resource<DynamicType = ()>>() -> String {
    match K::group(&()).as_ref() {
        "" => K::plural(&()).to_string(),
        group => format!("{}.{group}", K::plural(&())),
    }
}

/// The `kubectl annotate` command that approves `plan` on the object `resource` (plural and
/// group, e.g. `awsclusters.infrastructure.giantswarm.io`) `namespace/name`.
pub fn approve_command(resource: &str, namespace: &str, name: &str, plan: &str) -> String {
    format!("kubectl annotate {resource} -n {namespace} {name} {APPROVED_PLAN}={plan} --overwrite")
}

/// The message of a malformed approval: names the annotation and the fix.
pub fn malformed_message(value: &str, approve: Option<&str>) -> String {
    let fix = match approve {
        Some(cmd) => format!("approve the pending update with: {cmd}"),
        None => format!(
            "set it to the planHash of a pending update (status.stacks[].pendingUpdate) or remove {APPROVED_PLAN}"
        ),
    };
    format!(
        "annotation {APPROVED_PLAN}={value:?} is not a plan hash ({PLAN_HASH_LEN} lowercase hex digits); nothing runs until it is fixed: {fix}"
    )
}

/// One change of a CloudFormation change set, as `DescribeChangeSet` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize)]
pub struct ChangeSetChange {
    /// `Add`, `Modify`, `Remove`, `Import` or `Dynamic`.
    pub action: String,
    /// The logical id.
    pub logical_id: String,
    /// The resource type.
    pub resource_type: String,
    /// `True`, `Conditional` or `False`; `None` when CloudFormation does not say.
    pub replacement: Option<String>,
    /// The changed property paths CloudFormation lists (`Details[].Target`), when it lists them.
    pub paths: Vec<String>,
}

/// The summary recorded in status for plan `plan`, held in change set `change_set`:
/// CloudFormation's counts and replacements, with the diff's verdict for a resource the change
/// set does not give one for.
pub fn summarize(plan: &str, change_set: &str, cfn: &[ChangeSetChange], own: &[ResourceChange]) -> PendingUpdate {
    let count = |action: &str| cfn.iter().filter(|c| c.action == action).count() as u32;
    let own_of = |id: &str| own.iter().find(|c| c.logical_id == id);
    let mut replacements = Vec::new();
    for c in cfn.iter().filter(|c| c.action == "Modify") {
        let verdict = match c.replacement.as_deref() {
            Some(r) => r.to_string(),
            None => own_of(&c.logical_id).map_or("False", |o| o.replacement.as_str()).to_string(),
        };
        if verdict == "True" || verdict == "Conditional" {
            replacements.push(PlannedReplacement {
                logical_id: c.logical_id.clone(),
                resource_type: c.resource_type.clone(),
                replacement: verdict,
            });
        }
    }
    let instance_rolls = own
        .iter()
        .filter(|o| o.replaces_instances && cfn.iter().any(|c| c.logical_id == o.logical_id))
        .map(|o| o.logical_id.clone())
        .collect();
    PendingUpdate {
        plan_hash: plan.to_string(),
        change_set: change_set.to_string(),
        added: count("Add"),
        modified: count("Modify"),
        removed: count("Remove"),
        replacements,
        instance_rolls,
    }
}

/// One line about a pending update: counts, replacements, instance rolls.
pub fn describe(stack: &str, p: &PendingUpdate) -> String {
    let mut s = format!("stack {stack}: {} added, {} modified, {} removed", p.added, p.modified, p.removed);
    if !p.replacements.is_empty() {
        let r: Vec<String> = p
            .replacements
            .iter()
            .map(|r| format!("{} ({}, {})", r.logical_id, r.resource_type, r.replacement))
            .collect();
        s.push_str(&format!("; replaces {}", r.join(", ")));
    }
    if !p.instance_rolls.is_empty() {
        s.push_str(&format!("; replaces the instances of {}", p.instance_rolls.join(", ")));
    }
    s
}

/// The `UpdatePending` condition of an object from its annotations and stack entries:
/// `(status, reason, message)`, or `None` to leave the condition as it is absent and nothing is
/// pending (objects that never used the gate carry no such condition). `approve` gives the
/// approval command for a plan hash.
pub fn update_pending_condition(
    annotations: &BTreeMap<String, String>,
    stacks: &[StatusEntry],
    had_condition: bool,
    approve: impl Fn(&str) -> String,
) -> Option<(bool, &'static str, String)> {
    let pending: Vec<(&str, &PendingUpdate)> =
        stacks.iter().filter_map(|s| s.pending_update.as_ref().map(|p| (s.name.as_str(), p))).collect();
    let approval = approval(annotations);
    let setting_problem = setting(annotations).1;
    if let Some((stack, p)) = pending.first() {
        let command = approve(&p.plan_hash);
        let summary = describe(stack, p);
        let (reason, message) = match &approval {
            Approval::Malformed(v) => {
                ("InvalidApproval", format!("{summary}; {}", malformed_message(v, Some(&command))))
            }
            Approval::Plan(a) if a != &p.plan_hash && !stacks.iter().any(|s| s.applied_plan.as_deref() == Some(a)) => (
                "StaleApproval",
                format!(
                    "{summary}; the approved plan {a} is not the pending plan {}: nothing runs; approve with: {command}",
                    p.plan_hash
                ),
            ),
            Approval::Plan(a) if a == &p.plan_hash => (
                "Approved",
                format!(
                    "{summary}; plan {} is approved and runs once nothing else holds it (a maintenance window, a rollout slot, the masters: see Ready)",
                    p.plan_hash
                ),
            ),
            _ => ("AwaitingApproval", format!("{summary}; plan {}; approve with: {command}", p.plan_hash)),
        };
        let message = match setting_problem {
            Some(problem) => format!("{message}; {problem}"),
            None => message,
        };
        return Some((true, reason, message));
    }
    if let Approval::Malformed(v) = &approval {
        return Some((false, "InvalidApproval", malformed_message(v, None)));
    }
    if let Some(problem) = setting_problem {
        return Some((false, "InvalidSetting", problem));
    }
    had_condition.then(|| (false, "NoUpdatePending", "no stack update waits for approval".to_string()))
}

/// Set the `UpdatePending` condition of `obj` from its annotations and `stacks` (its status's
/// stack entries) into `conditions` ([`update_pending_condition`]).
pub fn set_update_pending<K: kube::Resource<DynamicType = ()>>(
    conditions: &mut Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition>,
    obj: &K,
    stacks: &[StatusEntry],
) {
    use kube::ResourceExt;
    let had = conditions.iter().any(|c| c.type_ == UPDATE_PENDING);
    let resource = kubectl_resource::<K>();
    let (namespace, name) = (obj.namespace().unwrap_or_default(), obj.name_any());
    let approve = |plan: &str| approve_command(&resource, &namespace, &name, plan);
    if let Some((on, reason, message)) = update_pending_condition(obj.annotations(), stacks, had, approve) {
        crate::controllers::status::set_condition(
            conditions,
            UPDATE_PENDING,
            on,
            reason,
            message,
            obj.meta().generation,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn ann(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn the_setting_is_off_unless_annotated_and_an_unknown_value_fails_closed() {
        assert_eq!(setting(&ann(&[])), (Setting::Off, None));
        assert_eq!(setting(&ann(&[(UPDATE_APPROVAL, "required")])), (Setting::Required, None));
        assert_eq!(setting(&ann(&[(UPDATE_APPROVAL, "strict")])), (Setting::Strict, None));
        let (s, problem) = setting(&ann(&[(UPDATE_APPROVAL, "yes")]));
        assert_eq!(s, Setting::Strict);
        let problem = problem.unwrap_or_default();
        assert!(problem.contains(UPDATE_APPROVAL) && problem.contains("\"required\""), "{problem}");
    }

    #[test]
    fn plan_hashes_are_stable_short_hex_and_differ_per_stack_and_template() {
        let a = plan_hash("cluster-a1b2c-tccp", "abc");
        assert_eq!(a, plan_hash("cluster-a1b2c-tccp", "abc"));
        assert!(is_plan_hash(&a), "{a}");
        assert_ne!(a, plan_hash("cluster-a1b2c-tccpf", "abc"));
        assert_ne!(a, plan_hash("cluster-a1b2c-tccp", "abd"));
        assert!(!is_plan_hash("ABCDEF0123456789"), "upper case is not a plan hash");
        assert!(!is_plan_hash("yes"));
        assert_eq!(approval(&ann(&[(APPROVED_PLAN, &a)])), Approval::Plan(a.clone()));
        assert_eq!(approval(&ann(&[(APPROVED_PLAN, "approve")])), Approval::Malformed("approve".into()));
        assert_eq!(approval(&ann(&[])), Approval::None);
    }

    #[test]
    fn the_decision_covers_every_setting_kind_and_approval() {
        let plan = "0123456789abcdef";
        let other = "fedcba9876543210";
        let ok = Approval::Plan(plan.into());
        let stale = Approval::Plan(other.into());
        let bad = Approval::Malformed("yes".into());
        use UpdateKind::*;
        assert_eq!(decide(Setting::Off, Other, plan, &Approval::None, &[]), Action::Update);
        assert_eq!(decide(Setting::Off, Other, plan, &stale, &[]), Action::Update, "off ignores approvals");
        assert_eq!(decide(Setting::Required, ScalingOnly, plan, &Approval::None, &[]), Action::Update);
        assert_eq!(decide(Setting::Required, OutputsOnly, plan, &Approval::None, &[]), Action::Update);
        assert_eq!(decide(Setting::Strict, OutputsOnly, plan, &Approval::None, &[]), Action::Hold(Hold::Unapproved));
        assert_eq!(decide(Setting::Strict, ScalingOnly, plan, &Approval::None, &[]), Action::Hold(Hold::Unapproved));
        assert_eq!(decide(Setting::Required, Other, plan, &Approval::None, &[]), Action::Hold(Hold::Unapproved));
        assert_eq!(decide(Setting::Required, Other, plan, &ok, &[]), Action::Execute);
        assert_eq!(decide(Setting::Strict, ScalingOnly, plan, &ok, &[]), Action::Execute);
        assert_eq!(
            decide(Setting::Required, Other, plan, &stale, &[]),
            Action::Hold(Hold::Stale { approved: other.into() })
        );
        // The approval of a plan that already ran is old, not stale.
        assert_eq!(decide(Setting::Required, Other, plan, &stale, &[other.into()]), Action::Hold(Hold::Unapproved));
        assert_eq!(
            decide(Setting::Required, Other, plan, &bad, &[]),
            Action::Hold(Hold::Malformed { value: "yes".into() })
        );
    }

    /// A node pool's stack, with the image, the group's name and an extra rule as given.
    fn pool(image: &str, group_name: Option<&str>, rule: bool) -> Value {
        let mut group = json!({
            "Type": "AWS::AutoScaling::AutoScalingGroup",
            "Properties": {
                "MaxSize": "3",
                "LaunchTemplate": {
                    "LaunchTemplateId": {"Ref": "LaunchTemplate"},
                    "Version": {"Fn::GetAtt": ["LaunchTemplate", "LatestVersionNumber"]}
                },
                "VPCZoneIdentifier": [{"Ref": "Subnet"}]
            },
            "UpdatePolicy": {"AutoScalingRollingUpdate": {"MaxBatchSize": "1"}}
        });
        if let Some(n) = group_name {
            group["Properties"]["AutoScalingGroupName"] = json!(n);
        }
        let mut t = json!({"Resources": {
            "LaunchTemplate": {"Type": "AWS::EC2::LaunchTemplate", "Properties": {
                "LaunchTemplateName": "g3j50-lt",
                "LaunchTemplateData": {"ImageId": image, "InstanceType": "m5.xlarge"}
            }},
            "AutoScalingGroup": group,
            "Subnet": {"Type": "AWS::EC2::Subnet", "Properties": {"CidrBlock": "10.1.2.0/26", "VpcId": "vpc-1"}},
            "Lifecycle": {"Type": "AWS::AutoScaling::LifecycleHook", "Properties": {
                "AutoScalingGroupName": {"Ref": "AutoScalingGroup"}, "HeartbeatTimeout": 3600
            }}
        }});
        if rule {
            t["Resources"]["Rule"] = json!({"Type": "AWS::EC2::SecurityGroupIngress", "Properties": {"FromPort": 22}});
        }
        t
    }

    #[test]
    fn a_new_image_modifies_the_launch_template_in_place_and_rolls_the_group_through_its_version() {
        let diff = template_diff(&pool("ami-1", None, false), &pool("ami-2", None, false));
        let ids: Vec<(&str, ChangeAction)> = diff.iter().map(|c| (c.logical_id.as_str(), c.action)).collect();
        assert_eq!(ids, [("AutoScalingGroup", ChangeAction::Modify), ("LaunchTemplate", ChangeAction::Modify)]);
        let lt = &diff[1];
        assert_eq!(lt.paths, ["Properties.LaunchTemplateData.ImageId"]);
        assert_eq!(lt.replacement, Replacement::False, "a launch template gets a new version");
        let group = &diff[0];
        assert_eq!(group.paths, ["Properties.LaunchTemplate (via LaunchTemplate)"]);
        assert_eq!(group.replacement, Replacement::False);
        assert!(group.replaces_instances, "the rolling update replaces the group's instances");
        // The hook references the group by Ref: the group is not replaced, so the hook is not
        // touched.
        assert!(diff.iter().all(|c| c.logical_id != "Lifecycle"));
    }

    #[test]
    fn a_renamed_group_is_replaced_and_what_references_it_conditionally_so() {
        let diff = template_diff(&pool("ami-1", Some("a"), true), &pool("ami-1", Some("b"), false));
        let by_id: BTreeMap<&str, &ResourceChange> = diff.iter().map(|c| (c.logical_id.as_str(), c)).collect();
        let group = by_id["AutoScalingGroup"];
        assert_eq!(group.replacement, Replacement::True);
        assert_eq!(group.paths, ["Properties.AutoScalingGroupName"]);
        assert!(!group.replaces_instances, "the name is not an instance property");
        let hook = by_id["Lifecycle"];
        assert_eq!(hook.paths, ["Properties.AutoScalingGroupName (via AutoScalingGroup)"]);
        assert_eq!(hook.replacement, Replacement::Conditional);
        assert_eq!(by_id["Rule"].action, ChangeAction::Remove);
        // And back: the rule is added.
        let back = template_diff(&pool("ami-1", Some("b"), false), &pool("ami-1", Some("b"), true));
        assert_eq!(back.len(), 1);
        assert_eq!((back[0].logical_id.as_str(), back[0].action), ("Rule", ChangeAction::Add));
    }

    #[test]
    fn only_scaling_changes_touch_the_group_alone_and_arrays_diff_by_element() {
        let mut desired = pool("ami-1", None, false);
        desired["Resources"]["AutoScalingGroup"]["Properties"]["MaxSize"] = json!("5");
        let diff = template_diff(&pool("ami-1", None, false), &desired);
        assert_eq!(diff.len(), 1);
        assert_eq!(diff[0].paths, ["Properties.MaxSize"]);
        assert!(!diff[0].replaces_instances, "a new maximum launches nothing");
        let mut subnets = pool("ami-1", None, false);
        subnets["Resources"]["Subnet"]["Properties"]["CidrBlock"] = json!("10.1.3.0/26");
        let diff = template_diff(&pool("ami-1", None, false), &subnets);
        let by_id: BTreeMap<&str, &ResourceChange> = diff.iter().map(|c| (c.logical_id.as_str(), c)).collect();
        assert_eq!(by_id["Subnet"].replacement, Replacement::True);
        let group = by_id["AutoScalingGroup"];
        assert_eq!(group.paths, ["Properties.VPCZoneIdentifier (via Subnet)"]);
        assert!(group.replaces_instances, "a replaced subnet moves the instances");
        assert!(template_diff(&pool("ami-1", None, false), &pool("ami-1", None, false)).is_empty());
    }

    #[test]
    fn the_summary_counts_what_cloudformation_lists_and_fills_in_replacements_it_does_not_give() {
        let own = template_diff(&pool("ami-1", Some("a"), true), &pool("ami-2", Some("b"), false));
        let cfn = vec![
            ChangeSetChange {
                action: "Modify".into(),
                logical_id: "LaunchTemplate".into(),
                resource_type: "AWS::EC2::LaunchTemplate".into(),
                replacement: Some("False".into()),
                paths: vec![],
            },
            ChangeSetChange {
                action: "Modify".into(),
                logical_id: "AutoScalingGroup".into(),
                resource_type: "AWS::AutoScaling::AutoScalingGroup".into(),
                replacement: None,
                paths: vec![],
            },
            ChangeSetChange {
                action: "Modify".into(),
                logical_id: "Lifecycle".into(),
                resource_type: "AWS::AutoScaling::LifecycleHook".into(),
                replacement: Some("Conditional".into()),
                paths: vec![],
            },
            ChangeSetChange {
                action: "Remove".into(),
                logical_id: "Rule".into(),
                resource_type: "AWS::EC2::SecurityGroupIngress".into(),
                replacement: None,
                paths: vec![],
            },
        ];
        let s = summarize("0123456789abcdef", "cs", &cfn, &own);
        assert_eq!((s.added, s.modified, s.removed), (0, 3, 1));
        let r: Vec<(&str, &str)> =
            s.replacements.iter().map(|r| (r.logical_id.as_str(), r.replacement.as_str())).collect();
        assert_eq!(r, [("AutoScalingGroup", "True"), ("Lifecycle", "Conditional")]);
        assert_eq!(s.instance_rolls, ["AutoScalingGroup"], "the launch template's new version rolls the group");
        let line = describe("cluster-a1b2c-tcnp-g3j50", &s);
        assert!(
            line.contains("0 added, 3 modified, 1 removed")
                && line.contains("AutoScalingGroup (AWS::AutoScaling::AutoScalingGroup, True)"),
            "{line}"
        );
    }

    fn entry(name: &str, pending: Option<&str>, applied: Option<&str>) -> StatusEntry {
        StatusEntry {
            name: name.into(),
            kind: "tcnp".into(),
            account: apis::aws::StackAccount::Tenant,
            status: "UPDATE_COMPLETE".into(),
            reason: None,
            last_transition_time: None,
            attempts: None,
            pending_update: pending.map(|p| PendingUpdate {
                plan_hash: p.into(),
                change_set: "cs".into(),
                modified: 2,
                ..Default::default()
            }),
            applied_plan: applied.map(str::to_string),
        }
    }

    #[test]
    fn the_condition_names_the_plan_the_command_and_what_is_wrong_with_an_approval() {
        let approve = |h: &str| format!("approve {h}");
        let plan = "0123456789abcdef";
        let pending = [entry("s", Some(plan), None)];
        let (on, reason, message) = update_pending_condition(&ann(&[]), &pending, false, approve).unwrap_or_default();
        assert!(on);
        assert_eq!(reason, "AwaitingApproval");
        assert!(message.contains(&format!("approve {plan}")) && message.contains("2 modified"), "{message}");
        let stale = ann(&[(APPROVED_PLAN, "fedcba9876543210")]);
        let (_, reason, message) = update_pending_condition(&stale, &pending, false, approve).unwrap_or_default();
        assert_eq!(reason, "StaleApproval", "{message}");
        let old = [entry("s", Some(plan), Some("fedcba9876543210"))];
        assert_eq!(update_pending_condition(&stale, &old, false, approve).map(|c| c.1), Some("AwaitingApproval"));
        // Approved, and held by something else (a window): said so, with no command to run.
        let approved = ann(&[(APPROVED_PLAN, plan)]);
        let (on, reason, message) = update_pending_condition(&approved, &pending, false, approve).unwrap_or_default();
        assert_eq!((on, reason), (true, "Approved"), "{message}");
        assert!(message.contains("is approved") && !message.contains("approve "), "{message}");
        let bad = ann(&[(APPROVED_PLAN, "lgtm")]);
        let (_, reason, message) = update_pending_condition(&bad, &pending, false, approve).unwrap_or_default();
        assert_eq!(reason, "InvalidApproval");
        assert!(
            message.contains(APPROVED_PLAN)
                && message.contains("\"lgtm\"")
                && message.contains(&format!("approve {plan}")),
            "{message}"
        );
        // Nothing pending.
        let none = [entry("s", None, None)];
        assert_eq!(update_pending_condition(&ann(&[]), &none, false, approve), None, "never used: no condition");
        assert_eq!(
            update_pending_condition(&ann(&[]), &none, true, approve).map(|c| (c.0, c.1)),
            Some((false, "NoUpdatePending"))
        );
        assert_eq!(
            update_pending_condition(&bad, &none, false, approve).map(|c| (c.0, c.1)),
            Some((false, "InvalidApproval"))
        );
    }
}

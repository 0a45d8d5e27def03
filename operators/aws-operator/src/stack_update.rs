//! Pure: what an update of a stack is and whether it may run now. The caller says when the
//! update may run ([`UpdateWhen`]: now, later, never); the approval gate of the stack ([`Gate`],
//! over [`crate::approval`]) says whether it waits for a person; [`Update`] combines the two into
//! what the stack operations ([`crate::stack_ops`]) do: whether the state machine may update the
//! stack at all, and which way the update goes ([`Route`]).

use apis::aws::StackStatus as StatusEntry;

use crate::approval;

/// When an existing stack may be updated to its desired template.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpdateWhen {
    /// Now.
    Now,
    /// Not yet: something else holds it (the masters, a closed maintenance window, a rollout
    /// slot). Under the approval gate the update is planned all the same, so that its plan can
    /// be read and approved ahead; the approved change set runs once the update may.
    Later,
    /// Never: the stack is created once and kept as it is (TCCPI, TCNPF).
    Never,
}

/// The approval gate of one stack update ([`crate::approval`]): the cluster's setting and the
/// owning object's approval.
#[derive(Debug, Clone)]
pub struct Gate {
    /// The cluster's setting.
    pub setting: approval::Setting,
    /// A problem with the setting's value, repeated in the pending message.
    pub setting_problem: Option<String>,
    /// The owning object's approval annotation.
    pub approval: approval::Approval,
    /// The plans already run by approval on the owning object's stacks.
    pub applied: Vec<String>,
    /// Whether the update only scales.
    pub kind: approval::UpdateKind,
    /// How to approve: `kubectl annotate <resource> -n <namespace> <name>` without the value.
    resource: (String, String, String),
}

impl Gate {
    /// The gate for a stack of `obj` in cluster `cluster` (whose annotations hold the setting:
    /// the AWSCluster, or a legacy cluster's AWSConfig, which is both); `stacks` are `obj`'s
    /// recorded stack entries.
    pub fn new<C: kube::Resource, K: kube::Resource<DynamicType = ()>>(
        cluster: &C,
        obj: &K,
        stacks: &[StatusEntry],
        kind: approval::UpdateKind,
    ) -> Self {
        use kube::ResourceExt;
        let (setting, setting_problem) = approval::setting(cluster.annotations());
        Gate {
            setting,
            setting_problem,
            approval: approval::approval(obj.annotations()),
            applied: stacks.iter().filter_map(|s| s.applied_plan.clone()).collect(),
            kind,
            resource: (approval::kubectl_resource::<K>(), obj.namespace().unwrap_or_default(), obj.name_any()),
        }
    }

    /// What the gate says about updating stack `stack` to the stack hash `desired_hash`.
    pub fn decide(&self, stack: &str, desired_hash: &str) -> approval::Action {
        self.decide_as(self.kind, stack, desired_hash)
    }

    /// What the gate would say of an update of `kind`.
    pub fn decide_as(&self, kind: approval::UpdateKind, stack: &str, desired_hash: &str) -> approval::Action {
        let plan = approval::plan_hash(stack, desired_hash);
        approval::decide(self.setting, kind, &plan, &self.approval, &self.applied)
    }

    /// Whether an update of `stack` to `desired_hash` would wait for approval (for a caller that
    /// prepares an update before it runs, as a node pool turns the autoscaler off).
    pub fn holds(&self, stack: &str, desired_hash: &str) -> bool {
        matches!(self.decide(stack, desired_hash), approval::Action::Hold(_))
    }

    /// Whether the update of `stack` to `desired_hash` runs because its plan was approved (not
    /// because it needs no approval).
    pub fn approved(&self, stack: &str, desired_hash: &str) -> bool {
        self.decide(stack, desired_hash) == approval::Action::Execute
    }

    /// Whether an update that changes nothing but outputs runs without approval.
    pub fn outputs_only_runs(&self, stack: &str, desired_hash: &str) -> bool {
        self.decide_as(approval::UpdateKind::OutputsOnly, stack, desired_hash) == approval::Action::Update
    }

    /// The command that approves `plan`.
    pub fn approve_command(&self, plan: &str) -> String {
        let (resource, namespace, name) = &self.resource;
        approval::approve_command(resource, namespace, name, plan)
    }
}

/// Which way an update of a stack that differs from its desired template goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// Approved, and held by something else: the approved change set waits as it is.
    KeepApproved,
    /// Through a change set: held for approval, or the approved one executed.
    ChangeSet,
    /// `UpdateStack`, at once.
    Direct,
}

/// What the stack operations do about an update of one stack this reconcile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Update {
    /// What the approval gate says (an ungated update is [`approval::Action::Update`]).
    pub action: approval::Action,
    /// When the caller lets the update run.
    pub when: UpdateWhen,
}

impl Update {
    /// The update of `stack` to the stack hash `desired_hash`, which the caller lets run
    /// `when`, under `gate` if the stack has one.
    pub fn decide(gate: Option<&Gate>, when: UpdateWhen, stack: &str, desired_hash: &str) -> Self {
        Self { action: gate.map_or(approval::Action::Update, |g| g.decide(stack, desired_hash)), when }
    }

    /// Whether the gate holds or has approved it: it goes through a change set.
    pub fn gated(&self) -> bool {
        self.action != approval::Action::Update
    }

    /// Whether the caller lets it run now.
    pub fn may_run(&self) -> bool {
        self.when == UpdateWhen::Now
    }

    /// Whether the state machine may update the stack: the update runs now, or it waits and the
    /// gate plans it ahead.
    pub fn may_update(&self) -> bool {
        self.may_run() || (self.when == UpdateWhen::Later && self.gated())
    }

    /// Which way the update goes; `observed`: the stack is there.
    pub fn route(&self, observed: bool) -> Route {
        match (&self.action, self.may_run()) {
            (approval::Action::Execute, false) if observed => Route::KeepApproved,
            (approval::Action::Hold(_) | approval::Action::Execute, _) => Route::ChangeSet,
            (approval::Action::Update, _) => Route::Direct,
        }
    }

    /// Whether a change set recorded for the stack stays: only while the update is planned
    /// (`updating`) and goes through one. Any other (the gate went off, the desired state went
    /// back to the deployed one, the update runs another way) is deleted, not left behind.
    pub fn keeps_change_set(&self, updating: bool) -> bool {
        updating && self.gated()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use approval::{Action, Approval, Hold, Setting, UpdateKind};

    const STACK: &str = "cluster-q7m2x-tcnp-p4kz1";
    const HASH: &str = "4f1c0ffee";

    fn gate(setting: Setting, approval: Approval, kind: UpdateKind) -> Gate {
        Gate {
            setting,
            setting_problem: None,
            approval,
            applied: Vec::new(),
            kind,
            resource: ("awsmachinedeployment".into(), "org-acme".into(), "p4kz1".into()),
        }
    }

    fn plan() -> String {
        approval::plan_hash(STACK, HASH)
    }

    #[test]
    fn without_a_gate_an_update_runs_when_the_caller_lets_it_and_never_through_a_change_set() {
        let now = Update::decide(None, UpdateWhen::Now, STACK, HASH);
        assert_eq!((now.may_update(), now.route(true), now.keeps_change_set(true)), (true, Route::Direct, false));
        let later = Update::decide(None, UpdateWhen::Later, STACK, HASH);
        assert!(!later.may_update(), "held by the caller, and nothing to plan ahead");
        let never = Update::decide(None, UpdateWhen::Never, STACK, HASH);
        assert!(!never.may_update());
    }

    #[test]
    fn a_held_update_is_planned_ahead_as_a_change_set_even_while_the_caller_holds_it() {
        let required = gate(Setting::Required, Approval::None, UpdateKind::Other);
        for when in [UpdateWhen::Now, UpdateWhen::Later] {
            let update = Update::decide(Some(&required), when, STACK, HASH);
            assert_eq!(update.action, Action::Hold(Hold::Unapproved));
            assert!(update.may_update(), "{when:?}");
            assert_eq!(update.route(true), Route::ChangeSet);
            assert!(update.keeps_change_set(true));
            assert!(!update.keeps_change_set(false), "no update planned: its change set goes");
        }
        let never = Update::decide(Some(&required), UpdateWhen::Never, STACK, HASH);
        assert!(!never.may_update(), "a stack kept as it is is never updated, gate or not");
    }

    #[test]
    fn an_approved_update_waits_as_it_is_while_held_and_runs_its_change_set_when_let() {
        let approved = gate(Setting::Required, Approval::Plan(plan()), UpdateKind::Other);
        let held = Update::decide(Some(&approved), UpdateWhen::Later, STACK, HASH);
        assert_eq!(held.action, Action::Execute);
        assert_eq!(held.route(true), Route::KeepApproved);
        assert_eq!(held.route(false), Route::ChangeSet, "no stack to keep it on");
        let let_run = Update::decide(Some(&approved), UpdateWhen::Now, STACK, HASH);
        assert_eq!(let_run.route(true), Route::ChangeSet);
        assert!(approved.approved(STACK, HASH));
    }

    #[test]
    fn scaling_and_outputs_need_no_approval_unless_the_setting_is_strict() {
        let required = gate(Setting::Required, Approval::None, UpdateKind::ScalingOnly);
        let scaling = Update::decide(Some(&required), UpdateWhen::Now, STACK, HASH);
        assert_eq!((scaling.gated(), scaling.route(true)), (false, Route::Direct));
        assert!(required.outputs_only_runs(STACK, HASH));
        let strict = gate(Setting::Strict, Approval::None, UpdateKind::ScalingOnly);
        assert!(Update::decide(Some(&strict), UpdateWhen::Now, STACK, HASH).gated());
        assert!(!strict.outputs_only_runs(STACK, HASH));
        assert!(strict.holds(STACK, HASH));
        let off = gate(Setting::Off, Approval::None, UpdateKind::Other);
        assert!(!off.holds(STACK, HASH));
    }

    #[test]
    fn a_stale_approval_holds_and_names_the_plan_it_approved() {
        let stale = gate(Setting::Required, Approval::Plan("0123abcd".into()), UpdateKind::Other);
        let update = Update::decide(Some(&stale), UpdateWhen::Now, STACK, HASH);
        assert_eq!(update.action, Action::Hold(Hold::Stale { approved: "0123abcd".into() }));
        assert_eq!(update.route(true), Route::ChangeSet);
        assert!(stale.approve_command(&plan()).contains(&plan()), "{}", stale.approve_command(&plan()));
    }
}

//! The three stacks of a legacy `AWSConfig` cluster (reference §11), the generation before node
//! pools: one master, one worker group.
//!
//! | module | stack | account | what it holds |
//! |---|---|---|---|
//! | [`host_setup`] | `cluster-<id>-host-setup` | management | the VPC peering access role |
//! | [`guest_main`] | `cluster-<id>-guest-main` | the cluster's | network, master, workers, load balancers, DNS, IAM |
//! | [`host_main`] | `cluster-<id>-host-main` | management | peering routes and the DNS delegation |
//!
//! The stacks are built from the node-pools stacks' parts, not beside them, so that a legacy
//! cluster's network, master and IAM are exactly a node-pools cluster's, tested and linted once:
//! `host-setup` is [`tccpi`](super::tccpi)'s role, `host-main` is [`tccpf`](super::tccpf)'s
//! routes plus the NS delegation, and `guest-main` is [`tccp`](super::tccp)'s network joined
//! with a one-master [`tccpn`](super::tccpn) through [`Template::link`](crate::cfn::Template::link),
//! plus the worker group, the ingress load balancer and their security groups.
//!
//! # Choices
//!
//! * **Workers use a launch template, not a launch configuration.** The original's worker group
//!   used `AWS::AutoScaling::LaunchConfiguration`. Accounts created on or after 2024-10-01 cannot
//!   create launch configurations by any means (CloudFormation included), and no instance type
//!   added since 2023-01-01 is supported in them (Amazon EC2 Auto Scaling User Guide, "Auto
//!   Scaling launch configurations"), so a template with one fails in a new account and ages in
//!   an old one. The launch template
//!   carries the same settings (AMI, instance type, encrypted volumes, user data), plus IMDSv2
//!   and the node-pools workers' volume layout, so worker node configs are shared too.
//! * **The master is a one-instance Auto Scaling group with its own etcd volume and network
//!   interface, not an `AWS::EC2::Instance` with `DisableApiTermination`.** The original attached
//!   its etcd volume with an `AWS::EC2::VolumeAttachment`. When an update replaces an instance
//!   (a new AMI or instance type), CloudFormation creates the new instance and its attachment
//!   *before* it deletes the old ones, and a volume attached to the running old master cannot be
//!   attached to the new one: the update fails, or the operator has to detach by hand, with
//!   `DisableApiTermination` to undo first. With the group, a rolling update with no instance in
//!   service terminates the old master first; the new one attaches the same volume (kept with a
//!   snapshot policy) and the same interface, hence the same etcd peer address, in the same
//!   zone. This is how node-pools masters keep etcd's data across replacement, and the same
//!   node config does the attaching.
//! * **Workers carry `giantswarm.io/machine-deployment=worker`**, the label of a node-pools
//!   worker, so they get the node-pools worker's node config (volumes, units, checks) unchanged;
//!   a legacy cluster has no `AWSMachineDeployment`, so nothing reads it as one.
//! * **Names.** The master's launch template, role and instance profile keep the node-pools names
//!   (`gs-cluster-<id>-role-tccpn`, …) because they are the node-pools parts; the
//!   `giantswarm.io/stack` tag says `guest-main`. The stacks are new stacks: a `guest-main`
//!   stack created by the Go operator has other logical IDs and must not be updated with these
//!   templates (CloudFormation would replace its resources).

use super::{Common, stack_tags};
use crate::names::{self, StackKind};

pub mod guest_main;
pub mod host_main;
pub mod host_setup;
pub mod inputs;

/// One of the three stacks of a legacy cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LegacyStack {
    /// `host-setup`, management account.
    HostSetup,
    /// `guest-main`, the cluster's account.
    GuestMain,
    /// `host-main`, management account.
    HostMain,
}

impl LegacyStack {
    /// Every stack, in creation order.
    pub const ALL: [LegacyStack; 3] = [LegacyStack::HostSetup, LegacyStack::GuestMain, LegacyStack::HostMain];

    /// The short name, used in the stack name and the `giantswarm.io/stack` tag.
    pub fn as_str(self) -> &'static str {
        match self {
            LegacyStack::HostSetup => "host-setup",
            LegacyStack::GuestMain => "guest-main",
            LegacyStack::HostMain => "host-main",
        }
    }

    /// The account the stack is created in.
    pub fn account(self) -> names::Account {
        match self {
            LegacyStack::GuestMain => names::Account::Tenant,
            LegacyStack::HostSetup | LegacyStack::HostMain => names::Account::ControlPlane,
        }
    }

    /// The node-pools stack whose part this stack is built from (in the same account).
    pub fn counterpart(self) -> StackKind {
        match self {
            LegacyStack::HostSetup => StackKind::Tccpi,
            LegacyStack::GuestMain => StackKind::Tccp,
            LegacyStack::HostMain => StackKind::Tccpf,
        }
    }
}

/// `cluster-<id>-<stack>`, e.g. `cluster-p3x7d-guest-main`.
pub fn stack_name(cluster_id: &str, stack: LegacyStack) -> String {
    format!("cluster-{cluster_id}-{}", stack.as_str())
}

/// The tags of a legacy stack: those of its node-pools counterpart ([`stack_tags`]), with
/// `giantswarm.io/stack` naming the legacy stack.
pub fn legacy_stack_tags(common: &Common, stack: LegacyStack) -> Vec<(String, String)> {
    let mut tags = stack_tags(common, stack.counterpart(), None);
    for (key, value) in &mut tags {
        if key == names::tags::STACK {
            *value = stack.as_str().to_owned();
        }
    }
    tags
}

/// The S3 key of the legacy workers' node config:
/// `version/<operator>/cloudconfig/<v>/cluster-<id>-guest-main-worker`. The master's is the
/// node-pools master's ([`names::master_config_key`] with id 0).
pub fn worker_config_key(operator_version: &str, cluster_id: &str) -> String {
    format!(
        "version/{operator_version}/cloudconfig/{}/cluster-{cluster_id}-guest-main-worker",
        names::CLOUD_CONFIG_VERSION
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stacks::testdata;

    #[test]
    fn names_and_tags() {
        assert_eq!(stack_name("p3x7d", LegacyStack::GuestMain), "cluster-p3x7d-guest-main");
        assert_eq!(stack_name("p3x7d", LegacyStack::HostSetup), "cluster-p3x7d-host-setup");
        assert_eq!(stack_name("p3x7d", LegacyStack::HostMain), "cluster-p3x7d-host-main");
        assert_eq!(LegacyStack::HostMain.account(), names::Account::ControlPlane);
        let tags: std::collections::BTreeMap<_, _> =
            legacy_stack_tags(&testdata::common(), LegacyStack::GuestMain).into_iter().collect();
        assert_eq!(tags["giantswarm.io/stack"], "guest-main");
        assert_eq!(tags["giantswarm.io/cluster"], "al9qy");
        assert_eq!(tags["cost-center"], "blue", "the cluster's account gets the cloud tags");
        let host: std::collections::BTreeMap<_, _> =
            legacy_stack_tags(&testdata::common(), LegacyStack::HostMain).into_iter().collect();
        assert_eq!(host["giantswarm.io/stack"], "host-main");
        assert!(!host.contains_key("cost-center"));
        assert_eq!(
            worker_config_key("4.7.0", "p3x7d"),
            "version/4.7.0/cloudconfig/v_6_1_0/cluster-p3x7d-guest-main-worker"
        );
    }
}

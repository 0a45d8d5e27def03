//! aws-operator: provisions workload clusters on AWS through CloudFormation.
//!
//! # Layout
//!
//! Each thing is found by its name. The top level is the same in kvm-operator; only the provider
//! edge (`aws/` here) and the controllers differ.
//!
//! | module | what it holds |
//! | --- | --- |
//! | `main.rs` | the binary: the `daemon`, `render`, `plan`, `describe` and `migrate` commands and their dispatch, nothing else |
//! | [`daemon`] | the wiring: flags → configuration → [`context::Shared`] → the controllers (node-pools and legacy) and the drain executor, leader election, the `/metrics` `/healthz` `/readyz` server, signals |
//! | [`config`] | flags and file-backed settings: [`config::DaemonArgs`], [`config::OperatorConfig`], the AMI map, the alike instance types |
//! | [`context`] | [`context::Shared`]: what every controller shares — clients, caches, memos, metrics, events |
//! | [`render`] | the `render` command's edge: reads the CR files and flags, calls [`plan`], prints |
//! | [`describe`] | the `describe` command: the tree of a cluster from its objects and its instances in AWS, over the shared output of [`node_lifecycle::describe`] |
//! | [`migrate`] | the `migrate` command: a legacy `AWSConfig` cluster's node-pools objects and the ordered plan of its move, from the object and its stacks' resources in AWS |
//! | [`preview`] | the `plan` command's edge: the planner's stacks against the live ones, through change sets and [`approval::template_diff`] |
//! | [`plan`] | pure: the stacks and CIDRs a set of objects would get, as the controllers build them |
//! | [`controllers`] | one module per controller ([`controllers::cluster`], [`controllers::control_plane`], [`controllers::node_pool`], [`controllers::unhealthy`], [`controllers::legacy`] for legacy `AWSConfig` clusters) and their shared helpers ([`controllers::lookup`], [`controllers::stack_entries`]; the status lifecycle is [`operatorkit::status`], shared with kvm-operator) |
//! | [`aws`] | the AWS edge: clients and roles, CloudFormation (trait, SDK, fake, `DescribeStacks` cache), the drainers' instance listing, KMS, S3, EC2, Auto Scaling, Route53, classic and v2 load balancers (for the leftovers of a deleted cluster) |
//! | [`stack_ops`] | the stack operations: one step of the stack state machine per reconcile against one account, timed, counted and announced by events |
//! | [`drainers`] | terminating lifecycle hooks and DrainerConfigs: the pure plan ([`drainers::plan`]) of what to create, complete and delete |
//! | [`drift`] | drift detection's state (its share of the request budget, the metrics, the rounds running) behind the handle [`drift::DriftState`], the remediation calls, and the pure record of what a detection found ([`drift::findings`]) |
//! | [`stack_update`] | pure: what a stack update is and whether it may run now — when the caller lets it, the approval gate of the stack, and which way it goes |
//! | [`approval`] | pure: plan and approve — the gate's decision, plan hashes, the diff of a deployed and a desired template |
//! | [`upgrade`] | pure: how a node pool follows a Release upgrade — masters first, scaling never held, the cluster autoscaler off during a roll |
//! | [`maintenance`] | pure: whether a disruptive step waits for the cluster's maintenance window, and what the status says |
//! | [`budget`] | pure: the AWS request budget's arithmetic — read and write kinds, token buckets, each replica's share, which member Leases are live |
//! | [`quota`] | pure: what one cluster needs of its accounts' limits, whether it fits the headroom AWS reports, and what a cluster that does not fit is told |
//! | [`rollout`] | rollout limits: the Lease slots of clusters and node pools that roll |
//! | [`ipam`] | the IPAM lock and the allocation of cluster and node-pool CIDRs |
//! | [`node_config`] | node configs: certificates, encryption with the cluster key, upload when changed |
//! | [`capi`] | the Cluster API objects a fleet carries beside a cluster's own (`Cluster`, `G8sControlPlane`, `MachineDeployment`): discovered, read, their values' precedence, `Cluster.spec.controlPlaneEndpoint` written |
//!
//! Elsewhere: the desired state as pure functions in `aws_stacks` (names, IPAM arithmetic, the
//! six templates, Ignition, the stack state machine [`aws_stacks::state`], and the choice of
//! what a deleted cluster left outside its stacks [`aws_stacks::leftovers`]); what any operator
//! needs in `operatorkit` (controllers, conditions, [`operatorkit::held_secrets`],
//! [`operatorkit::logging`]).
//!
//! # Layers
//!
//! Every import points down this table: a module may use its own layer and the layers above it
//! in the table, never one below. `tests/architecture.rs` reads the crate's imports and holds
//! the code to this table, and to no circle between the modules it names.
//!
//! | layer | modules | what decides, what does |
//! | --- | --- | --- |
//! | 1. settings | [`config`] | flags and settings, read once |
//! | 2. policy | [`approval`], [`upgrade`], [`maintenance`], [`quota`], [`stack_update`], [`drainers::plan`], [`drift::findings`], [`budget`] | pure decisions, tested from fixtures: what a stack update is and whether it may run, the upgrade order, the maintenance window, whether a cluster fits its accounts' limits, what the drainers create and complete, what a drift detection found and what remediation puts back |
//! | 3. edge | [`aws`], [`capi`] | the AWS calls: clients, caching, paging, error mapping; it decides nothing and is handed the policy's answers. The Cluster API objects beside a cluster's own: discovery of their kinds, reading them, which of their values counts |
//! | 4. context | [`context`] | what every controller shares: clients, caches, settings, metrics |
//! | 5. subsystems | [`stack_ops`], [`drainers`], [`drift`], [`rollout`], [`ipam`], [`node_config`] | the state and I/O of one concern each, reached through a handle it owns |
//! | 6. controller helpers | [`controllers`], [`controllers::lookup`], [`controllers::stack_entries`] | what every controller uses: the resource set, dereferencing, stack entries |
//! | 7. controllers | [`controllers::cluster`], [`controllers::control_plane`], [`controllers::node_pool`], [`controllers::drift`], [`controllers::unhealthy`], [`controllers::max_age`], [`controllers::legacy`] | dereference, validate, build, apply, status |
//! | 8. commands | [`daemon`], [`render`], [`preview`], [`plan`], [`describe`], [`migrate`] | the wiring of the daemon, and the `render`, `plan`, `describe` and `migrate` commands with their planner |
//!
//! # The shape of a reconcile
//!
//! A controller module starts with its per-reconcile state and `resource_set`, which lists its
//! resources in the order they run. Read top-down, the resources go:
//!
//! 1. **dereference** — read what the object names: its Release, its AWSCluster, the credential
//!    Secret, the AWS clients of the two accounts ([`controllers::lookup`]);
//! 2. **validate** — bad input stops here with `Ready=False` and a Warning event, before anything
//!    is touched in AWS ([`operatorkit::error::InvalidInput`], [`operatorkit::status::reject`]);
//! 3. **build** — pure: template parameters and templates from `aws_stacks`;
//! 4. **apply** — through [`stack_ops`] and [`aws`]: each stack one step of the state machine per reconcile, and
//!    a requeue instead of a wait;
//! 5. **status** — conditions and stack entries, written only when they change
//!    ([`operatorkit::status`]).
//!
//! Deletion runs the same resources' delete paths, in the same order.
//!
//! # Why the render planner is a module here and not in `aws_stacks`
//!
//! The stack state machine depends on nothing but CloudFormation's statuses, so it lives in
//! `aws_stacks`. The render planner, though pure, validates and assembles exactly as the
//! controllers do: it shares their checks ([`controllers::lookup`]), their parameter builders and
//! the operator's settings ([`config::OperatorConfig`]). In `aws_stacks` it would pull those in
//! as well and make the template crate depend on the CRD types, so it stays here as a module
//! without I/O ([`plan`]), next to what it mirrors.
#![forbid(unsafe_code)]

pub mod approval;
pub mod aws;
pub mod budget;
pub mod capi;
pub mod config;
pub mod context;
pub mod controllers;
pub mod daemon;
pub mod describe;
pub mod drainers;
pub mod drift;
pub mod ipam;
pub mod maintenance;
pub mod migrate;
pub mod node_config;
pub mod plan;
pub mod preview;
pub mod quota;
pub mod render;
pub mod rollout;
pub mod stack_ops;
pub mod stack_update;
pub mod upgrade;

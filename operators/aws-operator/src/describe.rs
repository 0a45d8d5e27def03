//! `aws-operator describe`: the tree of a cluster, read from the management cluster and AWS,
//! never written to.
//!
//! ```text
//! NAME                                     READY  REASON                           SINCE  MESSAGE
//! AWSCluster/org-acme/a1b2c                True   StacksComplete                   12m
//! ├─Stack/cluster-a1b2c-tccpi              True   CREATE_COMPLETE                  14m
//! ├─AWSControlPlane/cp001                  True   UpdatePending: AwaitingApproval  1m     approve plan 3f2a… with kubectl annotate …
//! │ └─Stack/cluster-a1b2c-tccpn            True   UPDATE_COMPLETE                  9m
//! │   ├─Plan/3f2a…                         False  AwaitingApproval                        1 to add, 2 to change, 0 to remove; rolls ControlPlaneNodeAutoScalingGroup
//! │   └─Instance/i-0a1b…                   True   InService
//! └─AWSMachineDeployment/np001             …
//! ```
//!
//! The walk is pure ([`tree`]): the cluster's objects ([`ClusterObjects`]) and what AWS said
//! about their instances ([`Instances`]) become [`Line`]s; the shared output and the choice of
//! each line's condition are in [`node_lifecycle::describe`], as for kvm-operator. The edge
//! ([`run`]) reads the objects through the kubeconfig the daemon uses and the instances through
//! the daemon's AWS flags, in the tenant account each control plane and node pool recorded; where
//! AWS cannot be reached the line says so and the rest is still shown.

use std::collections::BTreeMap;
use std::io::Write;
use std::time::Duration;

use anyhow::Context as _;
use apis::aws::{AWSCluster, AWSControlPlane, AWSMachineDeployment, StackStatus};
use apis::drainer::DrainerConfig;
use jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use node_lifecycle::describe::{self as shared, DescribeArgs as Flags, Line, Readiness, Scope};

use crate::aws::AwsFactory;
use crate::drainers::plan::{GroupInstance, LifecycleState};

/// The condition that asks for a person, shown before anything else: an update that waits for
/// approval (once approved, `Ready` says what it waits for next).
fn asks(c: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition) -> bool {
    c.type_ == crate::approval::UPDATE_PENDING && c.status == "True" && c.reason == AWAITING_APPROVAL
}

/// The `UpdatePending` reason of an update that waits for approval.
const AWAITING_APPROVAL: &str = "AwaitingApproval";

/// The conditions besides `Ready` a ready object's line shows when they hold: drift.
const NOTABLE: &[&str] = &[crate::drift::findings::DRIFTED];

/// Arguments of `aws-operator describe`: the shared flags and the daemon's AWS flags.
#[derive(clap::Args, Debug, Clone)]
pub struct DescribeArgs {
    /// Which clusters and how to print them.
    #[command(flatten)]
    pub describe: Flags,
    /// How to reach AWS: the daemon's flags (credentials from the environment, as the daemon's).
    #[command(flatten)]
    pub aws: crate::config::AwsAccessArgs,
}

/// One cluster's objects in the management cluster.
#[derive(Debug, Clone)]
pub struct ClusterObjects {
    /// The cluster.
    pub cluster: AWSCluster,
    /// Its control planes.
    pub control_planes: Vec<AWSControlPlane>,
    /// Its node pools.
    pub node_pools: Vec<AWSMachineDeployment>,
    /// The drains of its nodes.
    pub drains: Vec<DrainerConfig>,
}

/// What AWS said about the Auto Scaling instances of the stacks, by stack name: the instances of
/// the groups the stack created, or why they could not be read.
pub type Instances = BTreeMap<String, Result<Vec<GroupInstance>, String>>;

/// The tree of one cluster at `now`.
pub fn tree(objects: &ClusterObjects, instances: &Instances, now: Timestamp) -> Line {
    let cluster = &objects.cluster;
    let status = cluster.status.clone().unwrap_or_default();
    let name = format!("{}/{}", cluster.namespace().unwrap_or_default(), cluster.name_any());
    let mut root = Line::from_conditions("AWSCluster", name, &status.conditions, &asks, NOTABLE);
    root.children.extend(shared::maintenance_line(
        "spec.cluster.maintenance",
        cluster.spec.cluster.maintenance.as_ref(),
        now,
    ));
    let drift = status.drift.as_ref();
    let no_approval = None;
    root.children.extend(status.stacks.iter().map(|s| stack_line(s, no_approval, drift, instances)));
    for cp in &objects.control_planes {
        let status = cp.status.clone().unwrap_or_default();
        let mut line = Line::from_conditions("AWSControlPlane", cp.name_any(), &status.conditions, &asks, NOTABLE);
        let approved = cp.annotations().get(crate::approval::APPROVED_PLAN).map(String::as_str);
        line.children.extend(status.stacks.iter().map(|s| stack_line(s, approved, drift, instances)));
        root.children.push(line);
    }
    for md in &objects.node_pools {
        let status = md.status.clone().unwrap_or_default();
        let mut line = Line::from_conditions("AWSMachineDeployment", md.name_any(), &status.conditions, &asks, NOTABLE);
        let scaling = &md.spec.node_pool.scaling;
        if line.message.is_empty() {
            line.message = format!("scaling {}–{}", scaling.min, scaling.max);
        }
        let approved = md.annotations().get(crate::approval::APPROVED_PLAN).map(String::as_str);
        line.children.extend(status.stacks.iter().map(|s| stack_line(s, approved, drift, instances)));
        root.children.push(line);
    }
    root.children.extend(objects.drains.iter().map(shared::drain_line));
    root
}

/// A stack's line: its CloudFormation status, an update waiting for approval (or approved, when
/// its object's `approved` plan is this one), its drift, and the instances of its Auto Scaling
/// groups.
fn stack_line(
    entry: &StackStatus,
    approved: Option<&str>,
    drift: Option<&apis::aws::DriftStatus>,
    instances: &Instances,
) -> Line {
    let status = entry.status.as_str();
    let ready = if status.contains("FAILED") || status.contains("ROLLBACK") {
        Readiness::False
    } else if status.ends_with("_COMPLETE") {
        Readiness::True
    } else {
        // Requested or in progress: not there yet, nothing wrong.
        Readiness::False
    };
    let mut message = entry.reason.clone().unwrap_or_default();
    if let Some(n) = entry.attempts {
        message = format!("failed attempts: {n}; {message}").trim_end_matches("; ").to_string();
    }
    let mut line = Line::new("Stack", entry.name.clone())
        .ready(ready)
        .reason(status)
        .since(entry.last_transition_time.as_ref().map(|t| t.0))
        .message(message);
    if let Some(p) = &entry.pending_update {
        let rolls = if p.instance_rolls.is_empty() {
            String::new()
        } else {
            format!("; rolls {}", p.instance_rolls.join(", "))
        };
        let summary = format!("{} to add, {} to change, {} to remove{rolls}", p.added, p.modified, p.removed);
        let plan = Line::new("Plan", p.plan_hash.clone());
        line.children.push(if approved == Some(p.plan_hash.as_str()) {
            plan.ready(Readiness::True)
                .reason("Approved")
                .message(format!("{summary}; runs when nothing else holds it"))
        } else {
            plan.ready(Readiness::False).reason(AWAITING_APPROVAL).message(summary)
        });
    }
    if let Some(d) = drift.and_then(|d| d.stacks.iter().find(|s| s.name == entry.name && s.drifted_resources > 0)) {
        let ids: Vec<&str> = d.resources.iter().map(|r| r.logical_id.as_str()).collect();
        line.children.push(
            Line::new("Drift", entry.name.clone())
                .ready(Readiness::False)
                .reason("Drifted")
                .since(drift.and_then(|d| d.last_detection_time.as_ref()).map(|t| t.0))
                .message(format!("{} resources drifted: {}", d.drifted_resources, ids.join(", "))),
        );
    }
    match instances.get(&entry.name) {
        Some(Ok(list)) => line.children.extend(list.iter().map(instance_line)),
        Some(Err(why)) => line.children.push(
            Line::new("Instances", entry.name.clone())
                .ready(Readiness::Unknown)
                .reason("AWSUnreachable")
                .message(why.clone()),
        ),
        None => {}
    }
    line
}

fn instance_line(i: &GroupInstance) -> Line {
    let (ready, state) = match &i.state {
        LifecycleState::TerminatingWait => (Readiness::False, "Terminating:Wait"),
        LifecycleState::PendingWait => (Readiness::False, "Pending:Wait"),
        LifecycleState::Other(s) if s == "InService" => (Readiness::True, s.as_str()),
        LifecycleState::Other(s) => (Readiness::False, s.as_str()),
    };
    let message = match &i.state {
        LifecycleState::TerminatingWait => "draining: held by the terminating hook until its node is drained",
        LifecycleState::PendingWait => "booting: held by the launching hook",
        _ => "",
    };
    Line::new("Instance", i.instance_id.clone()).ready(ready).reason(state).message(message)
}

/// Whether the stack `entry` may have Auto Scaling groups to show (the masters' and node pools'
/// stacks, in the tenant account).
fn has_groups(entry: &StackStatus) -> bool {
    matches!(entry.kind.as_str(), "tccpn" | "tcnp") && entry.account == apis::aws::StackAccount::Tenant
}

/// The instances of the groups of each stack of `objects` that has some: one listing per
/// tenant account and region, as each control plane and node pool recorded it.
async fn read_instances(factory: &Result<AwsFactory, String>, objects: &ClusterObjects) -> Instances {
    let mut wanted: Vec<(Option<apis::aws::RecordedAccount>, &StackStatus)> = Vec::new();
    for cp in &objects.control_planes {
        let status = cp.status.as_ref();
        for s in status.map(|s| s.stacks.as_slice()).unwrap_or_default().iter().filter(|s| has_groups(s)) {
            wanted.push((status.and_then(|s| s.account.clone()), s));
        }
    }
    for md in &objects.node_pools {
        let status = md.status.as_ref();
        for s in status.map(|s| s.stacks.as_slice()).unwrap_or_default().iter().filter(|s| has_groups(s)) {
            wanted.push((status.and_then(|s| s.account.clone()), s));
        }
    }
    let mut listings: BTreeMap<(String, String), Result<Vec<GroupInstance>, String>> = BTreeMap::new();
    let mut out = Instances::new();
    for (account, stack) in wanted {
        let Some(account) = account else {
            out.insert(stack.name.clone(), Err("the tenant account is not recorded yet".into()));
            continue;
        };
        let key = (account.tenant_role_arn.clone(), account.region.clone());
        if !listings.contains_key(&key) {
            let listing = match factory {
                Err(e) => Err(e.clone()),
                Ok(f) => match f.tenant(&account.tenant_role_arn, &account.region).await {
                    Ok(clients) => crate::aws::instances::list_instances(&clients).await.map_err(|e| e.to_string()),
                    Err(e) => Err(e.to_string()),
                },
            };
            listings.insert(key.clone(), listing.map_err(|e| format!("AWS not reachable: {e}")));
        }
        let prefix = format!("{}-", stack.name);
        let of_stack = listings[&key]
            .as_ref()
            .map(|all| all.iter().filter(|i| i.group.starts_with(&prefix)).cloned().collect())
            .map_err(Clone::clone);
        out.insert(stack.name.clone(), of_stack);
    }
    out
}

/// Read the clusters `flags` select through `client`, with their objects.
pub async fn read_clusters(client: &kube::Client, flags: &Flags) -> anyhow::Result<Vec<ClusterObjects>> {
    let scope = flags.scope(client.default_namespace());
    let clusters: Api<AWSCluster> = match &scope {
        Scope::All => Api::all(client.clone()),
        Scope::Namespace(ns) => Api::namespaced(client.clone(), ns),
    };
    let mut found: Vec<AWSCluster> = clusters.list(&ListParams::default()).await.context("listing AWSClusters")?.items;
    found.retain(|c| flags.selects(&c.name_any()));
    if let (Some(name), true) = (&flags.name, found.is_empty()) {
        let place = match &scope {
            Scope::All => "any namespace".to_string(),
            Scope::Namespace(ns) => format!("namespace {ns}"),
        };
        anyhow::bail!("no AWSCluster {name} in {place}; list them with `kubectl get awsclusters -A`");
    }
    found.sort_by_key(|c| (c.namespace(), c.name_any()));
    let mut out = Vec::new();
    for cluster in found {
        let ns = cluster.namespace().unwrap_or_default();
        let id = cluster.name_any();
        let selector = ListParams::default().labels(&format!("{}={id}", apis::labels::CLUSTER));
        let mut control_planes = Api::<AWSControlPlane>::namespaced(client.clone(), &ns)
            .list(&selector)
            .await
            .context("listing AWSControlPlanes")?
            .items;
        control_planes.sort_by_key(|o| o.name_any());
        let mut node_pools = Api::<AWSMachineDeployment>::namespaced(client.clone(), &ns)
            .list(&selector)
            .await
            .context("listing AWSMachineDeployments")?
            .items;
        node_pools.sort_by_key(|o| o.name_any());
        let mut drains: Vec<DrainerConfig> = Api::<DrainerConfig>::namespaced(client.clone(), &ns)
            .list(&ListParams::default())
            .await
            .context("listing DrainerConfigs")?
            .items
            .into_iter()
            .filter(|d| d.spec.guest.cluster.id == id)
            .collect();
        drains.sort_by_key(|o| o.name_any());
        out.push(ClusterObjects { cluster, control_planes, node_pools, drains });
    }
    Ok(out)
}

/// Describe the clusters `flags` select, read through `client` and through `aws` (or why AWS
/// cannot be reached), to `out` at `now`, coloured iff `colour`.
pub async fn describe(
    client: &kube::Client,
    flags: &Flags,
    aws: &Result<AwsFactory, String>,
    out: &mut dyn Write,
    now: Timestamp,
    colour: bool,
) -> anyhow::Result<()> {
    let objects = read_clusters(client, flags).await?;
    let mut trees = Vec::new();
    for o in &objects {
        let instances = read_instances(aws, o).await;
        trees.push(tree(o, &instances, now));
    }
    shared::write(out, &trees, flags.output, now, colour)?;
    Ok(())
}

/// `aws-operator describe`: to standard output, reaching the management cluster as the daemon
/// does (`KUBECONFIG`, else the pod's service account) and AWS with the daemon's flags.
pub async fn run(args: &DescribeArgs) -> anyhow::Result<()> {
    use std::io::IsTerminal;
    let client = kube::Client::try_default().await.context("connecting to the management cluster")?;
    // Each AWS call is bounded, so an unreachable endpoint costs seconds, not minutes.
    let aws = AwsFactory::new(args.aws.settings(Some(Duration::from_secs(15)))).await.map_err(|e| e.to_string());
    let stdout = std::io::stdout();
    let colour = operatorkit::logging::colour(stdout.is_terminal());
    describe(&client, &args.describe, &aws, &mut stdout.lock(), Timestamp::now(), colour).await
}

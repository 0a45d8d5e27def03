//! The nodes of a cluster's EC2 instances in a simulated workload cluster, playing what real
//! instances do when they boot: each running instance of the cluster's groups registers a WC node
//! named after its private DNS name, with `spec.providerID` `aws:///<zone>/<instance>`, its role
//! (a master's group is TCCPN's) and the `aws-operator.giantswarm.io/version` label of the node
//! config its launch template points at (the version is part of the config's S3 key); a master
//! waiting on its launching hook (`ControlPlaneLaunching`) completes it once its node is Ready,
//! as a master's `master-instance-lifecycle-continue` unit does once etcd joined. A node goes
//! when its instance has left its group.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use aws_operator::aws::AccountClients;
use base64::Engine as _;
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use tokio_util::sync::CancellationToken;
use workload_sim::{Machine, WorkloadCluster};

/// One instance of the cluster, as the bridge saw it.
#[derive(Clone, Debug)]
pub struct Seen {
    /// Instance id.
    pub instance: String,
    /// Its group.
    pub group: String,
    /// Whether it is a master.
    pub master: bool,
    /// Its Auto Scaling lifecycle state.
    pub lifecycle: String,
    /// Its node's name.
    pub node: String,
    /// The operator version of its node config.
    pub version: String,
}

/// A running bridge; stops when dropped.
pub struct NodeBridge {
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
    seen: Arc<parking_lot::Mutex<Vec<Seen>>>,
    errors: Arc<parking_lot::Mutex<Vec<String>>>,
}

impl Drop for NodeBridge {
    fn drop(&mut self) {
        self.stop.cancel();
        self.task.abort();
    }
}

impl NodeBridge {
    /// Follow cluster `id`'s groups in `tenant` every `period`, into `wc`.
    pub fn start(wc: Arc<WorkloadCluster>, tenant: Arc<AccountClients>, id: &str, period: Duration) -> NodeBridge {
        let stop = CancellationToken::new();
        let seen = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let errors = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let (s, id, seen2, errors2) = (stop.clone(), id.to_string(), seen.clone(), errors.clone());
        let task = tokio::spawn(async move {
            let mut versions = HashMap::new();
            while !s.is_cancelled() {
                match sync(&wc, &tenant, &id, &mut versions).await {
                    Ok(now) => *seen2.lock() = now,
                    Err(e) => {
                        let mut errors = errors2.lock();
                        errors.push(format!("{e:#}"));
                        let keep = errors.len().saturating_sub(20);
                        errors.drain(..keep);
                    }
                }
                tokio::select! {
                    () = s.cancelled() => {}
                    () = tokio::time::sleep(period) => {}
                }
            }
        });
        NodeBridge { stop, task, seen, errors }
    }

    /// The cluster's instances at the last pass.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().clone()
    }

    /// The last errors of failed passes, for failure messages.
    pub fn errors(&self) -> Vec<String> {
        self.errors.lock().clone()
    }
}

/// One pass: the machines of the cluster's instances, and the launching hooks of Ready masters.
async fn sync(
    wc: &WorkloadCluster,
    tenant: &AccountClients,
    id: &str,
    versions: &mut HashMap<(String, String), String>,
) -> anyhow::Result<Vec<Seen>> {
    let groups = tenant.autoscaling.describe_auto_scaling_groups().send().await.context("DescribeAutoScalingGroups")?;
    let mut members = Vec::new();
    for group in groups.auto_scaling_groups() {
        let tag =
            |key: &str| group.tags().iter().find(|t| t.key() == Some(key)).and_then(|t| t.value()).map(str::to_string);
        if tag("giantswarm.io/cluster").as_deref() != Some(id) {
            continue;
        }
        let master = tag("giantswarm.io/stack").as_deref() == Some("tccpn");
        let name = group.auto_scaling_group_name().unwrap_or_default().to_string();
        for i in group.instances() {
            let lt = i.launch_template().map(|t| {
                (t.launch_template_id().unwrap_or_default().to_string(), t.version().unwrap_or_default().to_string())
            });
            members.push((
                i.instance_id().unwrap_or_default().to_string(),
                name.clone(),
                master,
                i.lifecycle_state().map(|s| s.as_str().to_string()).unwrap_or_default(),
                i.availability_zone().unwrap_or_default().to_string(),
                lt,
            ));
        }
    }
    if members.is_empty() {
        wc.sync_machines(&[]).await?;
        return Ok(Vec::new());
    }
    let ids: Vec<String> = members.iter().map(|m| m.0.clone()).collect();
    let described =
        tenant.ec2.describe_instances().set_instance_ids(Some(ids)).send().await.context("DescribeInstances")?;
    let running: HashMap<String, String> = described
        .reservations()
        .iter()
        .flat_map(|r| r.instances())
        .filter(|i| i.state().and_then(|s| s.name()).is_some_and(|n| n.as_str() == "running"))
        .filter_map(|i| Some((i.instance_id()?.to_string(), i.private_dns_name()?.to_string())))
        .collect();
    let mut seen = Vec::new();
    let mut machines = Vec::new();
    for (instance, group, master, lifecycle, zone, lt) in members {
        let Some(node) = running.get(&instance).filter(|n| !n.is_empty()) else { continue };
        let version = match lt {
            Some(key) => match versions.get(&key) {
                Some(v) => v.clone(),
                None => {
                    let v = config_version(tenant, &key.0, &key.1).await?;
                    versions.insert(key, v.clone());
                    v
                }
            },
            None => String::new(),
        };
        let role = if master { "master" } else { "worker" };
        let mut machine = Machine::new(node)
            .provider_id(format!("aws:///{zone}/{instance}"))
            .label("kubernetes.io/role", role)
            .label("aws-operator.giantswarm.io/version", &version);
        if master {
            machine = machine.label("node-role.kubernetes.io/control-plane", "");
        }
        machines.push(machine);
        seen.push(Seen { instance, group, master, lifecycle, node: node.clone(), version });
    }
    wc.sync_machines(&machines).await?;
    // A master waiting on its launching hook goes on once its node is Ready.
    let nodes: Api<Node> = Api::all(wc.client());
    for s in seen.iter().filter(|s| s.master && s.lifecycle == "Pending:Wait") {
        let ready = nodes
            .get_opt(&s.node)
            .await?
            .and_then(|n| n.status)
            .and_then(|st| st.conditions)
            .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
        if ready {
            let done = tenant
                .autoscaling
                .complete_lifecycle_action()
                .auto_scaling_group_name(&s.group)
                .lifecycle_hook_name(aws_stacks::stacks::tccpn::LAUNCHING_HOOK)
                .instance_id(&s.instance)
                .lifecycle_action_result("CONTINUE")
                .send()
                .await;
            if let Err(e) = done {
                eprintln!("bridge: CompleteLifecycleAction for {}: {e:?}", s.instance);
            }
        }
    }
    Ok(seen)
}

/// The operator version in the node config key of a launch template version's user data
/// (`…/version/<version>/cloudconfig/…`).
async fn config_version(tenant: &AccountClients, template: &str, version: &str) -> anyhow::Result<String> {
    let out = tenant
        .ec2
        .describe_launch_template_versions()
        .launch_template_id(template)
        .versions(version)
        .send()
        .await
        .context("DescribeLaunchTemplateVersions")?;
    let data = out
        .launch_template_versions()
        .first()
        .and_then(|v| v.launch_template_data())
        .and_then(|d| d.user_data())
        .unwrap_or_default();
    let text = String::from_utf8(base64::engine::general_purpose::STANDARD.decode(data)?)?;
    let version = text
        .split("/version/")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .with_context(|| format!("no node config version in the user data of {template} v{version}: {text}"))?;
    Ok(version.to_string())
}

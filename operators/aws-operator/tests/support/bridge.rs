//! The nodes of a cluster's EC2 instances in a simulated workload cluster, playing what a
//! hypervisor and kubelet do when instances boot: each running instance of the cluster's groups
//! registers a WC node named after its private DNS name, with `spec.providerID`
//! `aws:///<zone>/<instance>`, its role (a master's group is TCCPN's) and the
//! `aws-operator.giantswarm.io/version` label of the node config its launch template points at
//! (the version is part of the config's S3 key). A node goes when its instance has left its group.
//!
//! A master waiting on its launching hook (`ControlPlaneLaunching`) is completed by the product:
//! the hook script of the node config the operator uploaded (fetched from S3, as the instance's
//! Ignition does) runs on an emulated node (`node_verify_harness`) with the real AWS CLI, the
//! instance's metadata served on loopback, and its etcd and API server health answering healthy
//! once the bridge has made its node Ready.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::Context as _;
use aws_operator::aws::AccountClients;
use base64::Engine as _;
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use node_verify_harness::{Credentials, HealthEndpoints, Instance, MetadataService, Node as EmulatedNode};
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
    /// Its availability zone.
    pub zone: String,
    /// Its private address.
    pub address: String,
    /// Where its node config is in S3: (bucket, key).
    pub config: Option<(String, String)>,
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
    /// Follow cluster `id`'s groups in `tenant` every `period`, into `wc`; the masters' hook
    /// scripts call AWS at `aws_endpoint` (moto).
    pub fn start(
        wc: Arc<WorkloadCluster>,
        tenant: Arc<AccountClients>,
        aws_endpoint: &str,
        id: &str,
        period: Duration,
    ) -> NodeBridge {
        let stop = CancellationToken::new();
        let seen = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let errors = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let (s, id, seen2, errors2) = (stop.clone(), id.to_string(), seen.clone(), errors.clone());
        let aws_endpoint = aws_endpoint.to_string();
        let task = tokio::spawn(async move {
            let mut versions = HashMap::new();
            let mut hooks = Hooks::default();
            while !s.is_cancelled() {
                let result = sync(&wc, &tenant, &id, &mut versions).await;
                let result = match result {
                    Ok((now, nodes)) => hooks.pass(&tenant, &aws_endpoint, &id, &now, &nodes).await.map(|problems| {
                        errors2.lock().extend(problems);
                        now
                    }),
                    Err(e) => Err(e),
                };
                match result {
                    Ok(now) => *seen2.lock() = now,
                    Err(e) => {
                        eprintln!("bridge: {e:#}");
                        errors2.lock().push(format!("{e:#}"));
                    }
                }
                {
                    let mut errors = errors2.lock();
                    let keep = errors.len().saturating_sub(20);
                    errors.drain(..keep);
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

/// One pass: the machines of the cluster's instances; the instances seen, and the names of the
/// Ready nodes.
async fn sync(
    wc: &WorkloadCluster,
    tenant: &AccountClients,
    id: &str,
    configs: &mut HashMap<(String, String), (String, String)>,
) -> anyhow::Result<(Vec<Seen>, HashSet<String>)> {
    let groups = tenant.autoscaling.describe_auto_scaling_groups().send().await.context("DescribeAutoScalingGroups")?;
    let mut members = Vec::new();
    for group in groups.auto_scaling_groups() {
        let tag =
            |key: &str| group.tags().iter().find(|t| t.key() == Some(key)).and_then(|t| t.value()).map(str::to_string);
        if tag("giantswarm.io/cluster").as_deref() != Some(id) {
            continue;
        }
        // A node-pools master group (TCCPN's) or a legacy cluster's, both named `<id>-master`.
        let master = tag("giantswarm.io/stack").as_deref() == Some("tccpn")
            || tag("Name").is_some_and(|name| name == format!("{id}-master"));
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
        return Ok((Vec::new(), HashSet::new()));
    }
    let ids: Vec<String> = members.iter().map(|m| m.0.clone()).collect();
    let described =
        tenant.ec2.describe_instances().set_instance_ids(Some(ids)).send().await.context("DescribeInstances")?;
    let running: HashMap<String, (String, String)> = described
        .reservations()
        .iter()
        .flat_map(|r| r.instances())
        .filter(|i| i.state().and_then(|s| s.name()).is_some_and(|n| n.as_str() == "running"))
        .filter_map(|i| {
            let dns = i.private_dns_name()?.to_string();
            Some((i.instance_id()?.to_string(), (dns, i.private_ip_address().unwrap_or_default().to_string())))
        })
        .collect();
    let mut seen = Vec::new();
    let mut machines = Vec::new();
    for (instance, group, master, lifecycle, zone, lt) in members {
        let Some((node, address)) = running.get(&instance).filter(|(n, _)| !n.is_empty()) else { continue };
        let config = match lt {
            Some(key) => match configs.get(&key) {
                Some(c) => Some(c.clone()),
                None => {
                    let c = config_location(tenant, &key.0, &key.1).await?;
                    configs.insert(key, c.clone());
                    Some(c)
                }
            },
            None => None,
        };
        let version = config.as_ref().map(|(_, key)| config_version(key)).transpose()?.unwrap_or_default();
        let role = if master { "master" } else { "worker" };
        let mut machine = Machine::new(node)
            .provider_id(format!("aws:///{zone}/{instance}"))
            .label("kubernetes.io/role", role)
            .label("aws-operator.giantswarm.io/version", &version);
        if master {
            machine = machine.label("node-role.kubernetes.io/control-plane", "");
        }
        machines.push(machine);
        seen.push(Seen {
            instance,
            group,
            master,
            lifecycle,
            node: node.clone(),
            version,
            zone,
            address: address.clone(),
            config,
        });
    }
    wc.sync_machines(&machines).await?;
    let nodes: Api<Node> = Api::all(wc.client());
    let ready = nodes
        .list(&Default::default())
        .await?
        .items
        .into_iter()
        .filter(|n| {
            n.status
                .as_ref()
                .and_then(|st| st.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        })
        .filter_map(|n| n.metadata.name)
        .collect();
    Ok((seen, ready))
}

/// The node config location, `(bucket, key)`, in a launch template version's user data (the
/// pointer config merging `s3://<bucket>/<key>`).
async fn config_location(tenant: &AccountClients, template: &str, version: &str) -> anyhow::Result<(String, String)> {
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
    let pointer: serde_json::Value = serde_json::from_str(&text).context("user data")?;
    let source = pointer
        .pointer("/ignition/config/merge/0/source")
        .and_then(|s| s.as_str())
        .with_context(|| format!("no merged config in the user data of {template} v{version}: {text}"))?;
    let (bucket, key) = source
        .strip_prefix("s3://")
        .and_then(|rest| rest.split_once('/'))
        .with_context(|| format!("not an S3 URL in the user data of {template} v{version}: {source}"))?;
    Ok((bucket.to_string(), key.to_string()))
}

/// The operator version in a node config key (`…/version/<version>/cloudconfig/…`).
fn config_version(key: &str) -> anyhow::Result<String> {
    let version = key
        .split("version/")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .with_context(|| format!("no node config version in the key {key}"))?;
    Ok(version.to_string())
}

/// One master's launching-hook script, running on its emulated node.
struct HookRun {
    /// The emulated node; the script's output is `hook.log` in its harness directory.
    node: EmulatedNode,
    _metadata: MetadataService,
    health: HealthEndpoints,
    child: std::process::Child,
    /// When its node was first Ready (its health endpoints healthy).
    healthy_since: Option<std::time::Instant>,
}

impl Drop for HookRun {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The masters' launching-hook scripts: started for each master in `Pending:Wait`, their health
/// following their nodes' readiness, until they exit.
#[derive(Default)]
struct Hooks {
    running: HashMap<String, HookRun>,
    /// Instances whose script completed the hook.
    completed: HashSet<String>,
}

impl Hooks {
    /// One pass over the instances `seen` and the `ready` nodes; the scripts that failed, with
    /// their logs.
    async fn pass(
        &mut self,
        tenant: &AccountClients,
        aws_endpoint: &str,
        cluster: &str,
        seen: &[Seen],
        ready: &HashSet<String>,
    ) -> anyhow::Result<Vec<String>> {
        let mut problems = Vec::new();
        let present: HashSet<&str> = seen.iter().map(|s| s.instance.as_str()).collect();
        self.running.retain(|instance, _| present.contains(instance.as_str()));
        for s in seen.iter().filter(|s| s.master && s.lifecycle == "Pending:Wait") {
            if self.running.contains_key(&s.instance) || self.completed.contains(&s.instance) {
                continue;
            }
            let Some((bucket, key)) = &s.config else { continue };
            let run = start_hook(tenant, aws_endpoint, cluster, s, bucket, key)
                .await
                .with_context(|| format!("starting the launching-hook script of {}", s.instance))?;
            self.running.insert(s.instance.clone(), run);
        }
        let mut finished = Vec::new();
        for (instance, run) in &mut self.running {
            let node_ready = seen.iter().any(|s| &s.instance == instance && ready.contains(&s.node));
            run.health.etcd.store(node_ready, Ordering::SeqCst);
            run.health.api.store(node_ready, Ordering::SeqCst);
            if node_ready && run.healthy_since.is_none() {
                run.healthy_since = Some(std::time::Instant::now());
            }
            if let Some(status) = run.child.try_wait()? {
                let log = std::fs::read_to_string(run.node.harness_dir().join("hook.log")).unwrap_or_default();
                if status.success() {
                    let after = run.healthy_since.map(|t| t.elapsed());
                    eprintln!(
                        "bridge: the launching-hook script of {instance} completed the hook {after:?} after health passed"
                    );
                    self.completed.insert(instance.clone());
                } else {
                    let problem = format!("the launching-hook script of {instance} failed ({status}): {log}");
                    eprintln!("bridge: {problem}");
                    problems.push(problem);
                }
                finished.push(instance.clone());
            }
        }
        for instance in finished {
            self.running.remove(&instance);
        }
        Ok(problems)
    }
}

/// Boots master `s`'s node config from S3 on an emulated node and starts its launching-hook
/// script there, with `s`'s metadata and TCCPN's master role's credentials as the instance role's.
async fn start_hook(
    tenant: &AccountClients,
    aws_endpoint: &str,
    cluster: &str,
    s: &Seen,
    bucket: &str,
    key: &str,
) -> anyhow::Result<HookRun> {
    let (node, metadata) = boot_master(tenant, aws_endpoint, cluster, s, bucket, key).await?;
    let health = HealthEndpoints::serve()?;
    let mut script = node.script(aws_stacks::ignition::LAUNCHING_HOOK_SCRIPT, &metadata)?;
    let log = std::fs::File::create(node.harness_dir().join("hook.log"))?;
    script
        .env("ETCD_HEALTH_URL", health.etcd_health_url())
        .env("API_READYZ_URL", health.readyz_url())
        .env("LAUNCHING_HOOK_INTERVAL", "1")
        .stdout(log.try_clone()?)
        .stderr(log);
    let child = script.spawn().context("spawning the launching-hook script")?;
    Ok(HookRun { node, _metadata: metadata, health, child, healthy_since: None })
}

/// Runs master `s`'s etcd attach script (`ETCD_ATTACH_SCRIPT`) of its node config in S3 on an
/// emulated node, as master `master_id`'s instance runs it at boot: the product's script finds
/// the etcd volume and interface by their Name tags and attaches them with the real AWS CLI,
/// retrying while they are still attached elsewhere. What the hypervisor does is played here:
/// the attached volume's disk and the interface's DHCP lease (from EC2's description of it).
/// The script's output, once it succeeded within `timeout`.
pub async fn attach_etcd(
    tenant: &AccountClients,
    aws_endpoint: &str,
    cluster: &str,
    master_id: u8,
    s: &Seen,
    timeout: Duration,
) -> anyhow::Result<String> {
    let (bucket, key) = s.config.clone().with_context(|| format!("no node config for {}", s.instance))?;
    let (node, metadata) = boot_master(tenant, aws_endpoint, cluster, s, &bucket, &key).await?;
    node.disk(aws_stacks::ignition::ETCD_VOLUME_DEVICE, 64)?;
    let eni_name = aws_stacks::names::master_eni(cluster, master_id);
    let enis = tenant
        .ec2
        .describe_network_interfaces()
        .filters(aws_sdk_ec2::types::Filter::builder().name("tag:Name").values(&eni_name).build())
        .send()
        .await
        .context("DescribeNetworkInterfaces")?;
    let eni = enis.network_interfaces().first().with_context(|| format!("no interface {eni_name}"))?;
    node.dhcp_lease(eni.mac_address().unwrap_or_default(), eni.private_ip_address().unwrap_or_default())?;
    let log_path = node.harness_dir().join("attach.log");
    let log = std::fs::File::create(&log_path)?;
    let mut child = node
        .script(aws_stacks::ignition::ETCD_ATTACH_SCRIPT, &metadata)?
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()
        .context("spawning the etcd attach script")?;
    let deadline = std::time::Instant::now() + timeout;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break Some(status);
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let output = std::fs::read_to_string(&log_path).unwrap_or_default();
    match status {
        Some(status) if status.success() => Ok(output),
        Some(status) => anyhow::bail!("the etcd attach script of {} failed ({status}): {output}", s.instance),
        None => anyhow::bail!("the etcd attach script of {} did not finish in {timeout:?}: {output}", s.instance),
    }
}

/// Master `s`'s node config from S3 on an emulated node, with `s`'s metadata and TCCPN's master
/// role's credentials (a legacy master's role is the same) as the instance role's.
async fn boot_master(
    tenant: &AccountClients,
    aws_endpoint: &str,
    cluster: &str,
    s: &Seen,
    bucket: &str,
    key: &str,
) -> anyhow::Result<(EmulatedNode, MetadataService)> {
    let object = tenant.s3.get_object().bucket(bucket).key(key).send().await.context("GetObject")?;
    let config = object.body.collect().await.context("reading the node config")?.into_bytes();
    // The instance role's credentials: TCCPN's master role in the tenant account, assumed with a
    // key of the nodes' own, so that moto's request log tells the node's calls from the operator's.
    let role = aws_stacks::stacks::tccpn::role_name(cluster);
    let http = tenant.ec2.config().http_client().context("the tenant clients' HTTP client")?;
    let sts = aws_sdk_sts::Client::from_conf(
        aws_sdk_sts::Config::builder()
            .behavior_version_latest()
            .http_client(http)
            .endpoint_url(aws_endpoint)
            .region(aws_sdk_sts::config::Region::new(tenant.region.clone()))
            .credentials_provider(aws_credential_types::Credentials::new(
                "AKIATESTMASTERNODES",
                "secret",
                None,
                None,
                "bridge",
            ))
            .build(),
    );
    let assumed = sts
        .assume_role()
        .role_arn(format!("arn:aws:iam::{}:role/{role}", tenant.account_id))
        .role_session_name(&s.instance)
        .send()
        .await
        .context("AssumeRole of the master role")?;
    let creds = assumed.credentials().context("AssumeRole without credentials")?;
    let instance = Instance {
        instance_id: s.instance.clone(),
        account_id: tenant.account_id.clone(),
        region: tenant.region.clone(),
        availability_zone: s.zone.clone(),
        local_ipv4: s.address.clone(),
        local_hostname: s.node.clone(),
        role,
        credentials: Credentials {
            access_key_id: creds.access_key_id().to_string(),
            secret_access_key: creds.secret_access_key().to_string(),
            session_token: creds.session_token().to_string(),
            expiration: creds.expiration().fmt(aws_smithy_types::date_time::Format::DateTime)?,
        },
    };
    let node = EmulatedNode::boot(&config, aws_endpoint)?;
    let metadata = MetadataService::serve(instance)?;
    Ok((node, metadata))
}

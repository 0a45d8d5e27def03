//! A workload cluster fixture: testenv as the management cluster, moto as AWS (one management
//! account and one tenant account per fixture, reached by AssumeRole), and the operator running
//! in-process so a test can stop it at any point and start it again.
#![allow(dead_code)]

pub mod bridge;
pub mod crash;
pub mod legacy;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use apis::aws::{AWSCluster, AWSControlPlane, AWSMachineDeployment};
use apis::release::Release;
use aws_credential_types::Credentials;
use aws_operator::aws::{AccountClients, AwsFactory, AwsSettings};
use aws_operator::config::{AmiMap, DriftSettings, OperatorConfig, UnhealthySettings};
use aws_operator::context::Shared;
use aws_operator::daemon;
use aws_operator::drift::DriftState;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use motoenv::MotoServer;
use node_lifecycle::drain::{Drainer, DrainerSettings};
use operatorkit::leader::{LeaderElectionConfig, LeaderElector};
use operatorkit::sharding::{Sharding, ShardingConfig, cluster_key};
use operatorkit::{Leadership, RunSettings};
use prometheus_client::registry::Registry;
use testenv::TestEnv;
use tokio_util::sync::CancellationToken;

pub const REGION: &str = "eu-central-1";
pub const NS: &str = "org-acme";
pub const FLATCAR: &str = "4230.2.4";
/// A newer Flatcar, with its own AMI in [`Fixture::amis`], for upgrades.
pub const FLATCAR_NEXT: &str = "4230.2.5";
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The operator version an upgrade hands a cluster to: the next minor of this one.
pub fn next_version() -> String {
    let v = semver::Version::parse(VERSION).expect("the crate version is semver");
    format!("{}.{}.0", v.major, v.minor + 1)
}
/// The installation's ExternalId of tenant AssumeRoles (`--tenant-role-external-id`).
pub const TENANT_EXTERNAL_ID: &str = "gauss-external-id";

/// A change to the settings of the operators a [`Fixture`] spawns.
pub type Configure = Arc<dyn Fn(&mut OperatorConfig) + Send + Sync>;

pub struct Fixture {
    pub moto: MotoServer,
    pub env: TestEnv,
    pub client: Client,
    pub cp_account: String,
    pub tenant_account: String,
    pub installation: String,
    running: Option<OperatorProcess>,
    pub shared: Option<Arc<Shared>>,
    /// The running operator's drift detection state.
    pub drift_state: Option<DriftState>,
    pub registry: Option<Registry>,
    /// Set by [`Fixture::as_chart_service_account`]: the operator runs as the chart's
    /// ServiceAccount (its token) with the chart's leader election, instead of as the
    /// administrator.
    pub service_account: Option<packaging::rbac::ChartIdentity>,
    /// The operator's drainer poll interval, when not the default.
    pub drainer_poll: Option<Duration>,
    /// The operator's active drainer poll interval, when not the default.
    pub drainer_active_poll: Option<Duration>,
    /// The operator's stack listing expiry (`--stack-listing-ttl-seconds`), when not the
    /// default: also how often a skipped delegation is looked at again.
    pub stack_listing_ttl: Option<Duration>,
    /// The unhealthy-node terminator's settings, when not the fixture's (off unless a cluster
    /// opts in: the fixture's clusters have no workload cluster to reach unless a test starts
    /// one).
    pub unhealthy: Option<UnhealthySettings>,
    /// The operator's `--max-rolling-clusters` (0: no limit).
    pub max_rolling_clusters: u32,
    /// Run the operators spawned from now on with `--sharding`: each holds a shard Lease named
    /// after its access key (lower case) in the chart's namespace, with short Lease settings
    /// (4 s lease, 2.5 s renew deadline, 0.5 s retry), beside the leader Lease.
    pub sharded: bool,
    /// The drift detector's settings, when not the fixture's (off).
    pub drift: Option<DriftSettings>,
    /// The controllers' resync period (`--resync-seconds`): 300 s unless a test waits for one.
    pub resync: Duration,
    /// Settings of the operators spawned from now on, besides the fixture's (for example an
    /// installation setting such as the API allowlists).
    pub configure: Option<Configure>,
}

/// A test that fails with the operator still running drops the fixture inside its async body,
/// where a runtime may not be dropped: stop the operator's runtime in the background instead, so
/// that the test reports its own failure rather than a panic in `Drop`.
impl Drop for Fixture {
    fn drop(&mut self) {
        if let Some(mut process) = self.running.take() {
            process.kill();
        }
    }
}

/// An operator running in the test process on its own runtime ([`Fixture::spawn_operator`]).
pub struct OperatorProcess {
    token: CancellationToken,
    handle: tokio::task::JoinHandle<()>,
    runtime: Option<tokio::runtime::Runtime>,
    /// What its controllers share.
    pub shared: Arc<Shared>,
    /// Its drift detection state.
    pub drift_state: DriftState,
}

impl OperatorProcess {
    /// Stop it abruptly: its runtime is dropped with every task wherever it is.
    pub fn kill(&mut self) {
        self.token.cancel();
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl Drop for OperatorProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

pub fn factory_settings(moto: &MotoServer, cp_account: &str) -> AwsSettings {
    AwsSettings {
        default_region: REGION.into(),
        endpoint_url: Some(moto.endpoint()),
        ca_bundle: None,
        control_plane_role_arn: Some(format!("arn:aws:iam::{cp_account}:role/aws-operator")),
        credentials: Some(Credentials::new("AKIATESTOPERATOR", "secret", None, None, "test")),
        operation_timeout: Some(Duration::from_secs(60)),
        tenant_external_id: Some(TENANT_EXTERNAL_ID.into()),
    }
}

impl Fixture {
    /// testenv as an open API server (no authentication, no RBAC) and moto.
    pub async fn start() -> anyhow::Result<Fixture> {
        Self::start_on(TestEnv::start().await?).await
    }

    /// Like [`Fixture::start`], with moto started by `moto` (e.g. with its emulation settings).
    pub async fn start_with(moto: motoenv::Launcher) -> anyhow::Result<Fixture> {
        Self::start_on_with(TestEnv::start().await?, moto).await
    }

    /// testenv as a production API server (TLS, bearer tokens, RBAC, Pod Security) and moto.
    /// The fixture's client is the administrator; the operator runs as the administrator too
    /// until [`Fixture::as_chart_service_account`].
    pub async fn start_secure() -> anyhow::Result<Fixture> {
        Self::start_on(TestEnv::builder().secure().start().await?).await
    }

    /// Like [`Fixture::start_secure`], with moto started by `moto` (e.g. with its emulation
    /// settings).
    pub async fn start_secure_with(moto: motoenv::Launcher) -> anyhow::Result<Fixture> {
        Self::start_on_with(TestEnv::builder().secure().start().await?, moto).await
    }

    async fn start_on(env: TestEnv) -> anyhow::Result<Fixture> {
        Self::start_on_with(env, motoenv::Launcher::from_env()).await
    }

    async fn start_on_with(env: TestEnv, launcher: motoenv::Launcher) -> anyhow::Result<Fixture> {
        // The operator's log goes to the test's output, which the runner shows when it fails.
        let filter = std::env::var("RUST_LOG").unwrap_or_else(|_| "aws_operator=info".to_string());
        let _ = tracing_subscriber::fmt()
            .with_test_writer()
            .with_ansi(false)
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .try_init();
        let moto = tokio::task::spawn_blocking(move || launcher.start()).await??;
        let client = env.client();
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        for crd in apis::all_crds() {
            crds.create(&PostParams::default(), &crd).await?;
        }
        let cp_account = motoenv::fresh_account_id();
        let tenant_account = motoenv::fresh_account_id();
        let installation = format!("inst{}", &cp_account[7..]);
        let f = Fixture {
            moto,
            env,
            client,
            cp_account,
            tenant_account,
            installation,
            running: None,
            shared: None,
            drift_state: None,
            registry: None,
            service_account: None,
            drainer_poll: None,
            drainer_active_poll: None,
            stack_listing_ttl: None,
            unhealthy: None,
            max_rolling_clusters: 0,
            sharded: false,
            drift: None,
            resync: Duration::from_secs(300),
            configure: None,
        };
        // The management cluster's VPC with one route table, in the management account.
        let cp = f.control_plane_clients().await?;
        let vpc = cp.ec2.create_vpc().cidr_block("10.0.0.0/16").send().await?;
        let vpc_id = vpc.vpc().and_then(|v| v.vpc_id()).unwrap_or_default().to_string();
        let name_tag = aws_sdk_ec2::types::Tag::builder().key("Name").value(&f.installation).build();
        cp.ec2.create_tags().resources(&vpc_id).tags(name_tag).send().await?;
        let rt = cp.ec2.create_route_table().vpc_id(&vpc_id).send().await?;
        let rt_id = rt.route_table().and_then(|r| r.route_table_id()).unwrap_or_default().to_string();
        let rt_tag =
            aws_sdk_ec2::types::Tag::builder().key("Name").value(format!("{}_private_0", f.installation)).build();
        cp.ec2.create_tags().resources(&rt_id).tags(rt_tag).send().await?;
        Ok(f)
    }

    pub async fn control_plane_clients(&self) -> anyhow::Result<Arc<AccountClients>> {
        let factory = AwsFactory::new(factory_settings(&self.moto, &self.cp_account)).await?;
        Ok(factory.control_plane(REGION).await?)
    }

    pub async fn tenant_clients(&self) -> anyhow::Result<Arc<AccountClients>> {
        let factory = AwsFactory::new(factory_settings(&self.moto, &self.cp_account)).await?;
        Ok(factory.tenant(&self.tenant_role(), REGION).await?)
    }

    pub fn tenant_role(&self) -> String {
        format!("arn:aws:iam::{}:role/GiantSwarmAWSOperator", self.tenant_account)
    }

    pub fn amis() -> AmiMap {
        AmiMap::from_json(&format!(
            r#"{{"{FLATCAR}": {{"{REGION}": "ami-0a1b2c3d4e5f60001"}}, "{FLATCAR_NEXT}": {{"{REGION}": "ami-0a1b2c3d4e5f60002"}}}}"#
        ))
        .expect("static AMI JSON")
    }

    /// Release `v<version>` with `flatcar` and `aws_operator` (the operator version that
    /// reconciles its clusters).
    pub async fn release(&self, version: &str, flatcar: &str, aws_operator: &str) -> anyhow::Result<()> {
        let release: Release = serde_json::from_value(serde_json::json!({
            "apiVersion": "release.giantswarm.io/v1alpha1", "kind": "Release", "metadata": {"name": format!("v{version}")},
            "spec": {"state": "active", "date": "2026-10-01T12:00:00Z", "components": [
                {"name": "kubernetes", "version": "1.34.2"},
                {"name": "etcd", "version": "3.5.16"},
                {"name": "containerlinux", "version": flatcar},
                {"name": "aws-operator", "version": aws_operator}
            ]}
        }))?;
        Api::<Release>::all(self.client.clone()).create(&PostParams::default(), &release).await?;
        Ok(())
    }

    /// Relabel cluster `id`'s objects (its control plane `cp` and node pools `pools`) to
    /// Release `release`, run by operator `version`: how a cluster is handed to another
    /// operator version in an upgrade.
    pub async fn relabel(
        &self,
        id: &str,
        cp: &str,
        pools: &[&str],
        release: &str,
        version: &str,
    ) -> anyhow::Result<()> {
        let patch = Patch::Merge(serde_json::json!({"metadata": {"labels": {
            "release.giantswarm.io/version": release,
            "aws-operator.giantswarm.io/version": version,
        }}}));
        let pp = PatchParams::default();
        Api::<AWSCluster>::namespaced(self.client.clone(), NS).patch(id, &pp, &patch).await?;
        Api::<AWSControlPlane>::namespaced(self.client.clone(), NS).patch(cp, &pp, &patch).await?;
        for pool in pools {
            Api::<AWSMachineDeployment>::namespaced(self.client.clone(), NS).patch(pool, &pp, &patch).await?;
        }
        Ok(())
    }

    /// The fixture as the chart's ServiceAccount, with its RBAC and its drain executor (a
    /// request the chart does not grant fails the run under `packaging::rbac::without_refusals`),
    /// on a moto started by `moto`, polling for waiting instances every second.
    pub async fn start_as_chart(moto: motoenv::Launcher) -> anyhow::Result<Fixture> {
        let rendered = packaging::helm_template("aws-operator", &["ci/minimal-values.yaml"], &[])?;
        let mut f = Fixture::start_secure_with(moto).await?;
        f.apply_basics().await?;
        f.as_chart_service_account(&rendered).await?;
        f.drainer_poll = Some(Duration::from_secs(1));
        Ok(f)
    }

    /// Create the ServiceAccount, ClusterRoles, Roles and their bindings of `rendered` (a render
    /// of the chart) as the administrator, and run the operator from now on as that
    /// ServiceAccount, with leader election on the Lease the chart's Role names and the drain
    /// executor beside the controllers, as `aws-operator daemon` runs in the chart's pod.
    pub async fn as_chart_service_account(&mut self, rendered: &[serde_json::Value]) -> anyhow::Result<()> {
        self.service_account =
            Some(packaging::rbac::apply_chart_identity(&self.client, self.env.handle(), rendered).await?);
        Ok(())
    }

    /// Start the operator (again), on its own runtime, as its own "process": every task it
    /// spawns lives on that runtime and dies with it.
    pub async fn start_operator(&mut self) -> anyhow::Result<()> {
        let process = self.spawn_operator(VERSION, "AKIATESTOPERATOR").await?;
        self.shared = Some(process.shared.clone());
        self.drift_state = Some(process.drift_state.clone());
        self.running = Some(process);
        Ok(())
    }

    /// An operator of `version` signing its AWS calls with `access_key`, on its own runtime,
    /// as its own "process", with the drain executor beside its controllers; several can run
    /// side by side (operator versions, as a platform runs them). As the chart's ServiceAccount
    /// after [`Fixture::as_chart_service_account`], with the chart's leader election.
    pub async fn spawn_operator(&self, version: &str, access_key: &str) -> anyhow::Result<OperatorProcess> {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
        let settings = AwsSettings {
            credentials: Some(Credentials::new(access_key, "secret", None, None, "test")),
            ..factory_settings(&self.moto, &self.cp_account)
        };
        let installation = self.installation.clone();
        let client = match &self.service_account {
            Some(sa) => self.env.handle().client_with_token(Some(&sa.token))?,
            None => Client::try_from(
                kube::Config::from_custom_kubeconfig(
                    kube::config::Kubeconfig::read_from(self.env.kubeconfig_path())?,
                    &Default::default(),
                )
                .await?,
            )?,
        };
        let lease_namespace = self.service_account.as_ref().map(|sa| sa.namespace.clone());
        let drainer_poll = self.drainer_poll;
        let drainer_active_poll = self.drainer_active_poll;
        let stack_listing_ttl = self.stack_listing_ttl;
        let unhealthy = self.unhealthy.clone();
        let max_rolling_clusters = self.max_rolling_clusters;
        // As the chart's pod: its rollout slots in its own namespace, as `--leader-election-namespace`.
        let slot_namespace = lease_namespace.clone();
        let drift = self.drift.clone();
        let resync = self.resync;
        let configure = self.configure.clone();
        let shard = self.sharded.then(|| access_key.to_ascii_lowercase());
        let version = version.to_string();
        let token = CancellationToken::new();
        let t = token.clone();
        let (tx, rx) = tokio::sync::oneshot::channel();
        let handle = runtime.spawn(async move {
            let mut registry = Registry::default();
            let metrics = operatorkit::Metrics::new(&mut registry);
            let readiness = operatorkit::Readiness::new();
            // As the chart's pod: leader election on the chart's Lease.
            let (leadership, election) = match lease_namespace {
                Some(namespace) => {
                    let config = LeaderElectionConfig {
                        release_on_cancel: true,
                        ..LeaderElectionConfig::new(namespace, daemon::lease_name(&version))
                    };
                    let elector = match LeaderElector::new(client.clone(), config) {
                        Ok(e) => e,
                        Err(e) => return eprintln!("operator leader election: {e}"),
                    };
                    (elector.leadership(), Some(tokio::spawn(elector.run(t.clone()))))
                }
                None => (Leadership::always(), None),
            };
            // Sharded (`--sharding`): the controllers write while this replica holds its shard;
            // the leader assigns the shards and runs the drain executor.
            let sharding = match shard {
                Some(shard) => {
                    let namespace = slot_namespace.clone().unwrap_or_else(|| "giantswarm".into());
                    let config = ShardingConfig {
                        shard: shard.clone(),
                        identity: shard,
                        lease_duration: Duration::from_secs(4),
                        renew_deadline: Duration::from_millis(2500),
                        retry_period: Duration::from_millis(500),
                        ..ShardingConfig::new(namespace, daemon::lease_name(&version))
                    };
                    match Sharding::new(client.clone(), config, cluster_key()) {
                        Ok(s) => Some(s),
                        Err(e) => return eprintln!("operator sharding: {e}"),
                    }
                }
                None => None,
            };
            let writes = sharding.as_ref().map_or_else(|| leadership.clone(), Sharding::held);
            let aws = match AwsFactory::new(settings).await {
                Ok(a) => a.gated_by(writes.clone()),
                Err(e) => return eprintln!("operator AWS: {e}"),
            };
            let mut config = OperatorConfig { version: version.clone(), ..operator_config(installation) };
            if let Some(poll) = drainer_poll {
                config.drainer_poll = poll;
            }
            if let Some(poll) = drainer_active_poll {
                config.drainer_active_poll = poll;
            }
            if let Some(ttl) = stack_listing_ttl {
                config.stack_listing_ttl = ttl;
            }
            if let Some(unhealthy) = unhealthy {
                config.unhealthy = unhealthy;
            }
            config.max_rolling_clusters = max_rolling_clusters;
            if let Some(namespace) = slot_namespace {
                config.slot_namespace = namespace;
            }
            if let Some(drift) = drift {
                config.drift = drift;
            }
            if let Some(configure) = configure {
                configure(&mut config);
            }
            let drift_state = DriftState::new(&mut registry, &config.drift);
            let shared = Shared::new(writes.gate(client.clone()), aws, config, Fixture::amis(), &mut registry);
            // The drain executor takes the DrainerConfigs of this version, through the
            // operator's workload-cluster clients.
            let settings = DrainerSettings::new(
                "aws-operator",
                semver::Version::parse(&version).expect("the operator version is semver"),
            );
            let drainer = match Drainer::builder(leadership.gate(client), settings, &mut registry)
                .metrics(&metrics)
                .readiness(&readiness)
                .leadership(leadership.clone())
                .clients(shared.workload_clients.clone())
                .build()
            {
                Ok(d) => d,
                Err(e) => return eprintln!("operator drain executor: {e}"),
            };
            let _ = tx.send((shared.clone(), drift_state.clone()));
            let controllers = daemon::run(
                shared,
                drift_state,
                &metrics,
                &readiness,
                RunSettings { concurrency: 4, resync, leadership, sharding },
                t.clone(),
            );
            let (result, ()) = tokio::join!(controllers, drainer.run(t.clone()));
            if let Err(e) = result {
                eprintln!("operator stopped: {e:#}");
            }
            if let Some(election) = election {
                let _ = election.await;
            }
        });
        let (shared, drift_state) = rx.await.map_err(|_| anyhow::anyhow!("the operator {access_key} did not start"))?;
        Ok(OperatorProcess { token, handle, runtime: Some(runtime), shared, drift_state })
    }

    /// Stop the operator abruptly: its runtime is dropped with every task wherever it is.
    pub async fn kill_operator(&mut self) {
        if let Some(mut process) = self.running.take() {
            process.kill();
        }
        self.shared = None;
    }

    /// Whether the operator task is still running.
    pub fn operator_alive(&self) -> bool {
        self.running.as_ref().is_some_and(|p| !p.handle.is_finished())
    }

    pub async fn apply_basics(&self) -> anyhow::Result<()> {
        let nss: Api<Namespace> = Api::all(self.client.clone());
        for ns in ["giantswarm", NS] {
            let obj: Namespace = serde_json::from_value(serde_json::json!({"metadata": {"name": ns}}))?;
            let _ = nss.create(&PostParams::default(), &obj).await;
        }
        let releases: Api<Release> = Api::all(self.client.clone());
        let release: Release = serde_json::from_value(serde_json::json!({
            "apiVersion": "release.giantswarm.io/v1alpha1", "kind": "Release", "metadata": {"name": "v20.0.0"},
            "spec": {"state": "active", "date": "2026-10-01T12:00:00Z", "components": [
                {"name": "kubernetes", "version": "1.34.2"},
                {"name": "etcd", "version": "3.5.16"},
                {"name": "containerlinux", "version": FLATCAR},
                {"name": "aws-operator", "version": VERSION}
            ]}
        }))?;
        let _ = releases.create(&PostParams::default(), &release).await;
        Ok(())
    }

    pub async fn credential_secret(&self, id: &str) -> anyhow::Result<()> {
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), "giantswarm");
        let s: Secret = serde_json::from_value(serde_json::json!({
            "metadata": {"name": format!("credential-{id}"), "namespace": "giantswarm", "labels": {"giantswarm.io/organization": "acme"}},
            "stringData": {"aws.awsoperator.arn": self.tenant_role()}
        }))?;
        secrets.create(&PostParams::default(), &s).await?;
        Ok(())
    }

    pub fn labels(id: &str, extra: &[(&str, &str)]) -> BTreeMap<String, String> {
        let mut l = BTreeMap::from([
            ("giantswarm.io/cluster".to_string(), id.to_string()),
            ("giantswarm.io/organization".to_string(), "acme".to_string()),
            ("release.giantswarm.io/version".to_string(), "20.0.0".to_string()),
            ("aws-operator.giantswarm.io/version".to_string(), VERSION.to_string()),
        ]);
        for (k, v) in extra {
            l.insert(k.to_string(), v.to_string());
        }
        l
    }

    pub async fn cluster(&self, id: &str) -> anyhow::Result<()> {
        let obj: AWSCluster = serde_json::from_value(serde_json::json!({
            "apiVersion": "infrastructure.giantswarm.io/v1alpha3", "kind": "AWSCluster",
            "metadata": {"name": id, "namespace": NS, "labels": Self::labels(id, &[])},
            "spec": {
                "cluster": {"description": "test", "dns": {"domain": "gauss.eu-central-1.aws.gigantic.io"}},
                "provider": {"credentialSecret": {"name": format!("credential-{id}"), "namespace": "giantswarm"}, "region": REGION}
            }
        }))?;
        Api::<AWSCluster>::namespaced(self.client.clone(), NS).create(&PostParams::default(), &obj).await?;
        Ok(())
    }

    pub async fn control_plane(&self, id: &str, name: &str, azs: &[&str], replicas: i32) -> anyhow::Result<()> {
        let obj: AWSControlPlane = serde_json::from_value(serde_json::json!({
            "apiVersion": "infrastructure.giantswarm.io/v1alpha3", "kind": "AWSControlPlane",
            "metadata": {"name": name, "namespace": NS, "labels": Self::labels(id, &[("giantswarm.io/control-plane", name)])},
            "spec": {"availabilityZones": azs, "instanceType": "m5.xlarge", "replicas": replicas}
        }))?;
        Api::<AWSControlPlane>::namespaced(self.client.clone(), NS).create(&PostParams::default(), &obj).await?;
        Ok(())
    }

    pub async fn node_pool(&self, id: &str, name: &str, azs: &[&str], min: i32, max: i32) -> anyhow::Result<()> {
        let obj: AWSMachineDeployment = serde_json::from_value(serde_json::json!({
            "apiVersion": "infrastructure.giantswarm.io/v1alpha3", "kind": "AWSMachineDeployment",
            "metadata": {"name": name, "namespace": NS, "labels": Self::labels(id, &[("giantswarm.io/machine-deployment", name)])},
            "spec": {
                "nodePool": {"description": "pool", "machine": {"dockerVolumeSizeGB": 100, "kubeletVolumeSizeGB": 100}, "scaling": {"min": min, "max": max}},
                "provider": {"availabilityZones": azs, "worker": {"instanceType": "m5.2xlarge", "useAlikeInstanceTypes": false}}
            }
        }))?;
        Api::<AWSMachineDeployment>::namespaced(self.client.clone(), NS).create(&PostParams::default(), &obj).await?;
        Ok(())
    }
}

/// The settings every test operator runs with.
pub fn operator_config(installation: String) -> OperatorConfig {
    OperatorConfig {
        installation,
        poll: Duration::from_millis(500),
        route53_enabled: true,
        // TCCP (about 25 kB) goes through the cluster bucket and `TemplateURL`, the path
        // templates over CloudFormation's 51,200 bytes take; the others stay inline.
        template_body_limit: TEMPLATE_BODY_LIMIT,
        // The fixture's clusters have no workload cluster to reach (their API hosts do not
        // resolve): the terminator acts only on clusters that opt in, or with `Fixture::unhealthy`.
        unhealthy: UnhealthySettings { all_clusters: false, ..UnhealthySettings::default() },
        // Off unless a test turns it on (`Fixture::drift`): detections add CloudFormation calls
        // that the call-counting tests do not expect.
        drift: DriftSettings { interval: Duration::ZERO, ..DriftSettings::default() },
        ..OperatorConfig::default()
    }
}

/// The lifecycle state of `instance` in Auto Scaling, `None` once it left its group.
pub async fn lifecycle_state(tenant: &AccountClients, instance: &str) -> anyhow::Result<Option<String>> {
    let out = tenant.autoscaling.describe_auto_scaling_instances().instance_ids(instance).send().await?;
    Ok(out.auto_scaling_instances().first().and_then(|i| i.lifecycle_state()).map(str::to_string))
}

/// The EC2 state of `instance` (`running`, `terminated`, …).
pub async fn ec2_state(tenant: &AccountClients, instance: &str) -> anyhow::Result<String> {
    let out = tenant.ec2.describe_instances().instance_ids(instance).send().await?;
    let state = out
        .reservations()
        .iter()
        .flat_map(|r| r.instances())
        .find_map(|i| i.state().and_then(|s| s.name()).map(|n| n.as_str().to_string()));
    Ok(state.unwrap_or_default())
}

/// Poll `f` until it returns `Some`, for at most `secs` seconds.
/// The inline template limit the fixture's operator runs with.
pub const TEMPLATE_BODY_LIMIT: usize = 20_000;

pub async fn eventually<T, F, Fut>(secs: u64, what: &str, mut f: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Option<T>>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    let mut last_err = None;
    loop {
        match f().await {
            Ok(Some(v)) => return Ok(v),
            Ok(None) => {}
            Err(e) => last_err = Some(e),
        }
        if tokio::time::Instant::now() > deadline {
            anyhow::bail!("timed out waiting for {what} (last error: {last_err:?})");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Wait up to `secs` for cluster `id` to be `Updated` to operator version `next` and Ready, with
/// `count` instances that the bridge sees, none of `old` among them, all `InService` on `next`.
pub async fn updated_with_every_instance_replaced(
    f: &Fixture,
    bridge: &bridge::NodeBridge,
    id: &str,
    old: &std::collections::BTreeSet<String>,
    count: usize,
    next: &str,
    secs: u64,
) -> anyhow::Result<()> {
    let clusters: Api<AWSCluster> = Api::namespaced(f.client.clone(), NS);
    let converged = eventually(secs, "the cluster to be Updated with every instance replaced", || async {
        let c = clusters.get(id).await?;
        let lifecycle = c.status.as_ref().map(|s| s.cluster.clone()).unwrap_or_default();
        let seen = bridge.seen();
        let all_new = seen.len() == count
            && seen.iter().all(|s| !old.contains(&s.instance) && s.version == next && s.lifecycle == "InService");
        Ok((lifecycle.has_condition(apis::cluster_status::ClusterCondition::Updated)
            && lifecycle.versions.iter().any(|v| v.semver == next)
            && ready(c.status.as_ref().map(|s| &s.conditions))
            && all_new)
            .then_some(()))
    })
    .await;
    if let Err(e) = converged {
        anyhow::bail!("{e}\n{:#?}\nbridge: {:?}\n{}", bridge.seen(), bridge.errors(), dump(&f.client).await);
    }
    Ok(())
}

/// No instance of `tenant` waits on a terminating hook, and no DrainerConfig is left.
pub async fn nothing_left_terminating(f: &Fixture, tenant: &AccountClients) -> anyhow::Result<()> {
    let instances = tenant.autoscaling.describe_auto_scaling_instances().send().await?;
    let stuck: Vec<_> = instances
        .auto_scaling_instances()
        .iter()
        .filter(|i| i.lifecycle_state().is_some_and(|s| s.starts_with("Terminating")))
        .collect();
    assert!(stuck.is_empty(), "instances still terminating: {stuck:?}");
    eventually(30, "no DrainerConfig left", || async {
        let drainers: Api<apis::drainer::DrainerConfig> = Api::namespaced(f.client.clone(), NS);
        Ok(drainers.list(&kube::api::ListParams::default()).await?.items.is_empty().then_some(()))
    })
    .await
}

/// The notes of the Warning events of `reason` about object `name` in the fixture's namespace.
pub async fn warnings(client: &Client, name: &str, reason: &str) -> anyhow::Result<Vec<String>> {
    event_notes(client, name, "Warning", Some(reason)).await
}

/// The notes of the events of type `type_` (`Normal`, `Warning`) about object `name` in the
/// fixture's namespace: of `reason` only, when given.
pub async fn event_notes(
    client: &Client,
    name: &str,
    type_: &str,
    reason: Option<&str>,
) -> anyhow::Result<Vec<String>> {
    Ok(events_about(client, name)
        .await?
        .into_iter()
        .filter(|e| e.type_.as_deref() == Some(type_) && reason.is_none_or(|r| e.reason.as_deref() == Some(r)))
        .filter_map(|e| e.note)
        .collect())
}

/// The events about object `name` in the fixture's namespace.
pub async fn events_about(client: &Client, name: &str) -> anyhow::Result<Vec<k8s_openapi::api::events::v1::Event>> {
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(client.clone(), NS);
    Ok(events
        .list(&kube::api::ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .collect())
}

/// Waits up to 300 s for AWSCluster `id` in [`NS`] to be Ready, and returns it; on a timeout the
/// error carries a dump of the management cluster.
pub async fn wait_ready(f: &Fixture, id: &str) -> anyhow::Result<AWSCluster> {
    let clusters: Api<AWSCluster> = Api::namespaced(f.client.clone(), NS);
    let result = eventually(300, &format!("cluster {id} to be Ready"), || async {
        let c = clusters.get(id).await?;
        Ok(ready(c.status.as_ref().map(|s| &s.conditions)).then_some(c))
    })
    .await;
    match result {
        Ok(c) => Ok(c),
        Err(e) => anyhow::bail!("{e}\n{}", dump(&f.client).await),
    }
}

pub fn ready(conds: Option<&Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition>>) -> bool {
    conds.is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

pub fn ready_message(conds: Option<&Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition>>) -> String {
    conds
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .map(|c| format!("{}: {}", c.reason, c.message))
        .unwrap_or_default()
}

/// The statuses of every cluster object, for failure messages.
pub async fn dump(client: &Client) -> String {
    let mut out = String::new();
    if let Ok(l) = Api::<AWSCluster>::namespaced(client.clone(), NS).list(&Default::default()).await {
        for o in l.items {
            out.push_str(&format!(
                "AWSCluster {}: {}\n",
                o.metadata.name.clone().unwrap_or_default(),
                serde_json::to_string(&o.status).unwrap_or_default()
            ));
        }
    }
    if let Ok(l) = Api::<AWSControlPlane>::namespaced(client.clone(), NS).list(&Default::default()).await {
        for o in l.items {
            out.push_str(&format!(
                "AWSControlPlane {}: {}\n",
                o.metadata.name.clone().unwrap_or_default(),
                serde_json::to_string(&o.status).unwrap_or_default()
            ));
        }
    }
    if let Ok(l) = Api::<AWSMachineDeployment>::namespaced(client.clone(), NS).list(&Default::default()).await {
        for o in l.items {
            out.push_str(&format!(
                "AWSMachineDeployment {}: {}\n",
                o.metadata.name.clone().unwrap_or_default(),
                serde_json::to_string(&o.status).unwrap_or_default()
            ));
        }
    }
    if let Ok(l) =
        Api::<k8s_openapi::api::events::v1::Event>::namespaced(client.clone(), NS).list(&Default::default()).await
    {
        for e in l.items.iter().filter(|e| e.type_.as_deref() == Some("Warning")) {
            out.push_str(&format!(
                "Warning {:?} {:?}: {:?}\n",
                e.regarding.as_ref().and_then(|r| r.name.clone()),
                e.reason,
                e.note
            ));
        }
    }
    out
}

/// When each instance's node was drained (Unix seconds), from the DrainerConfigs of `NS` as
/// they change, until the returned task is aborted.
pub fn record_drained(
    client: &Client,
) -> (Arc<parking_lot::Mutex<BTreeMap<String, f64>>>, tokio::task::JoinHandle<()>) {
    use futures::StreamExt as _;
    use kube::ResourceExt as _;
    use kube::runtime::{WatchStreamExt as _, watcher};
    let drained_at: Arc<parking_lot::Mutex<BTreeMap<String, f64>>> = Arc::default();
    let (recorded, dcs) = (drained_at.clone(), Api::<apis::drainer::DrainerConfig>::namespaced(client.clone(), NS));
    let task = tokio::spawn(async move {
        let now = || {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs_f64())
                .unwrap_or_default()
        };
        let mut stream = std::pin::pin!(watcher(dcs, watcher::Config::default()).default_backoff().applied_objects());
        while let Some(item) = stream.next().await {
            let Ok(dc) = item else { continue };
            let instance = dc.labels().get("aws-operator.giantswarm.io/instance").cloned();
            if let (Some(instance), true) = (instance, dc.status.as_ref().is_some_and(|s| s.is_drained())) {
                recorded.lock().entry(instance).or_insert_with(now);
            }
        }
    });
    (drained_at, task)
}

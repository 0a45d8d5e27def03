//! What every controller of the operator shares: configuration, AWS access, caches, events and
//! metrics.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use apis::release::Release;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use parking_lot::Mutex;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::aws::AwsFactory;
use crate::aws::cloudformation::StackCache;

/// The operator's settings (flags of `aws-operator daemon`).
#[derive(Clone, Debug)]
pub struct OperatorConfig {
    /// This operator's version: it reconciles objects whose Release names this version of the
    /// `aws-operator` component, and it is written into every stack's `OperatorVersion` output.
    pub version: String,
    /// The installation (management cluster) name: tags, the management VPC's `Name` tag and
    /// the IPAM lock owner.
    pub installation: String,
    /// The range cluster and node-pool CIDRs are allocated from when no NetworkPool is named.
    pub ipam_range: String,
    /// The size of cluster and node-pool CIDRs (mask bits), unless annotated otherwise.
    pub subnet_mask_bits: u8,
    /// Whether hosted zones and records are managed.
    pub route53_enabled: bool,
    /// `Name` tags of the management VPC's route tables to route into tenant clusters; empty
    /// means every non-main route table of that VPC.
    pub control_plane_route_tables: Vec<String>,
    /// The namespace holding the IPAM lock annotation.
    pub lock_namespace: String,
    /// The image registry nodes pull from.
    pub registry: String,
    /// How often the master Endpoints are refreshed from EC2.
    pub endpoints_refresh: Duration,
    /// How long an account's stack listing is used before it is listed again.
    pub stack_listing_ttl: Duration,
    /// How long the view of a transitioning stack is used before it is described again.
    pub stack_busy_ttl: Duration,
    /// The requeue interval while a stack or a prerequisite is pending.
    pub poll: Duration,
    /// Templates larger than this many bytes are uploaded to the cluster bucket and passed to
    /// CloudFormation by URL. CloudFormation's own inline limit; only tests lower it, to send
    /// templates of ordinary size down that path.
    pub template_body_limit: usize,
    /// The namespace of every cluster's certificate Secrets; `None`: each cluster's own.
    pub certificates_namespace: Option<String>,
    /// The instance types a node pool with `useAlikeInstanceTypes` may also run on.
    pub alike_instances: AlikeInstances,
}

/// The instance types alike to an instance type (`--alike-instances`, reference §10): for each
/// primary type, the types its node pools' Auto Scaling groups may launch instead, with their
/// capacity weights. A node pool with `spec.provider.worker.useAlikeInstanceTypes` gets its
/// type's list as the group's overrides; a type without a list runs on itself alone.
///
/// The format is the original's: `{"m5.xlarge": [{"InstanceType": "m5.xlarge",
/// "WeightedCapacity": 1}, {"InstanceType": "m4.xlarge", "WeightedCapacity": 1}]}`; a list
/// names the primary type too, as the group's overrides replace it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AlikeInstances(BTreeMap<String, Vec<aws_stacks::stacks::tcnp::InstanceOverride>>);

impl AlikeInstances {
    /// Parse the flag's JSON; the error names the entry that is wrong.
    pub fn parse(json: &str) -> Result<Self, String> {
        #[derive(serde::Deserialize)]
        #[serde(rename_all = "PascalCase", deny_unknown_fields)]
        struct Entry {
            instance_type: String,
            weighted_capacity: Option<u32>,
        }
        if json.trim().is_empty() {
            return Ok(Self::default());
        }
        let map: BTreeMap<String, Vec<Entry>> = serde_json::from_str(json).map_err(|e| {
            format!("--alike-instances must be a JSON object of instance type to [{{\"InstanceType\", \"WeightedCapacity\"}}]: {e}")
        })?;
        let mut out = BTreeMap::new();
        for (primary, entries) in map {
            if entries.is_empty() || entries.len() > 20 {
                return Err(format!(
                    "--alike-instances: {primary} lists {} instance types; an Auto Scaling group takes 1 to 20",
                    entries.len()
                ));
            }
            let overrides = entries
                .into_iter()
                .map(|e| aws_stacks::stacks::tcnp::InstanceOverride {
                    instance_type: e.instance_type,
                    weighted_capacity: e.weighted_capacity,
                })
                .collect();
            out.insert(primary, overrides);
        }
        Ok(Self(out))
    }

    /// The overrides of a node pool of `instance_type` that asks for alike types.
    pub fn overrides(&self, instance_type: &str) -> Vec<aws_stacks::stacks::tcnp::InstanceOverride> {
        self.0.get(instance_type).cloned().unwrap_or_default()
    }
}

impl Default for OperatorConfig {
    fn default() -> Self {
        Self {
            version: env!("CARGO_PKG_VERSION").to_string(),
            installation: "gauss".into(),
            ipam_range: "10.1.0.0/16".into(),
            subnet_mask_bits: 24,
            route53_enabled: true,
            control_plane_route_tables: Vec::new(),
            lock_namespace: "giantswarm".into(),
            registry: "gsoci.azurecr.io".into(),
            endpoints_refresh: Duration::from_secs(900),
            stack_listing_ttl: Duration::from_secs(600),
            stack_busy_ttl: Duration::from_secs(5),
            poll: Duration::from_secs(10),
            template_body_limit: aws_stacks::cfn::MAX_TEMPLATE_BODY_BYTES,
            certificates_namespace: None,
            alike_instances: AlikeInstances::default(),
        }
    }
}

/// AMIs by Flatcar version and region, from the mounted `ami.json`
/// (`{"<flatcarVersion>": {"<region>": "ami-…"}}`, reference §7.5).
///
/// The file is a ConfigMap mounted into the pod, which Kubernetes updates in place when the
/// ConfigMap changes: [`AmiMap::watch`] reloads it while the operator runs. Clones share the
/// content, so every controller sees a reload at once.
#[derive(Clone, Debug, Default)]
pub struct AmiMap(Arc<parking_lot::RwLock<AmiTable>>);

type AmiTable = BTreeMap<String, BTreeMap<String, String>>;

/// A missing AMI.
#[derive(Debug, thiserror::Error)]
pub enum AmiError {
    /// The file could not be read or parsed.
    #[error("AMI file {path}: {message}")]
    File {
        /// The path.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// No entry for the version and region.
    #[error(
        "no AMI for Flatcar {version} in {region}: add it to the AMI file, or use a Release whose containerlinux version has one"
    )]
    Missing {
        /// The Flatcar version.
        version: String,
        /// The region.
        region: String,
    },
}

impl operatorkit::ErrorKind for AmiError {
    fn kind(&self) -> std::borrow::Cow<'static, str> {
        std::borrow::Cow::Borrowed("AmiNotFound")
    }
    fn is_retryable(&self) -> bool {
        false
    }
}

impl AmiMap {
    /// Parse the JSON document.
    pub fn from_json(json: &str) -> Result<Self, AmiError> {
        serde_json::from_str(json)
            .map(|table| AmiMap(Arc::new(parking_lot::RwLock::new(table))))
            .map_err(|e| AmiError::File { path: "<inline>".into(), message: e.to_string() })
    }

    /// Read the mounted file.
    pub fn load(path: &Path) -> Result<Self, AmiError> {
        Ok(AmiMap(Arc::new(parking_lot::RwLock::new(read_table(path)?))))
    }

    /// The AMI of `version` in `region`.
    pub fn lookup(&self, version: &str, region: &str) -> Result<String, AmiError> {
        self.0
            .read()
            .get(version)
            .and_then(|r| r.get(region))
            .cloned()
            .ok_or_else(|| AmiError::Missing { version: version.into(), region: region.into() })
    }

    /// Read `path` again; replace the content if it parses and differs. Returns whether it
    /// changed. An unreadable or invalid file leaves the content as it was.
    pub fn reload(&self, path: &Path) -> Result<bool, AmiError> {
        let table = read_table(path)?;
        let mut current = self.0.write();
        if *current == table {
            return Ok(false);
        }
        *current = table;
        Ok(true)
    }

    /// Reload from `path` every `every` until `shutdown`: a changed file is used from the next
    /// reconcile on (logged at info); a broken one is logged once as a warning and the last good
    /// content kept. Polling rather than file events, because a mounted ConfigMap changes by an
    /// atomic swap of a symlinked directory, which file watches on the file itself miss.
    pub async fn watch(self, path: std::path::PathBuf, every: Duration, shutdown: tokio_util::sync::CancellationToken) {
        let mut last_error: Option<String> = None;
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(every) => {}
            }
            match self.reload(&path) {
                Ok(true) => {
                    last_error = None;
                    tracing::info!(path = %path.display(), "the AMI file changed; using its new content");
                }
                Ok(false) => last_error = None,
                Err(e) => {
                    let message = e.to_string();
                    if last_error.as_ref() != Some(&message) {
                        tracing::warn!(error = %message, "cannot reload the AMI file; keeping its last good content");
                        last_error = Some(message);
                    }
                }
            }
        }
    }
}

fn read_table(path: &Path) -> Result<AmiTable, AmiError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| AmiError::File { path: path.display().to_string(), message: e.to_string() })?;
    serde_json::from_str(&text).map_err(|e| AmiError::File { path: path.display().to_string(), message: e.to_string() })
}

/// Labels of the per-stack-operation metrics.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StackOpLabels {
    /// `tccpi`, `tccp`, …
    pub stack: String,
    /// `create`, `update`, `delete`, `lift_protection`, `continue_rollback`, `describe`.
    pub operation: String,
    /// `success` or `error`.
    pub result: String,
}

/// Metrics of stack operations.
#[derive(Clone, Debug)]
pub struct StackMetrics {
    /// `aws_operator_stack_operations_total`.
    pub operations: Family<StackOpLabels, Counter>,
    /// `aws_operator_stack_operation_duration_seconds`.
    pub duration: Family<StackOpLabels, Histogram>,
    /// `aws_operator_stack_transitions_total`.
    pub transitions: Family<StackOpLabels, Counter>,
}

impl StackMetrics {
    /// Register the metrics.
    pub fn new(registry: &mut Registry) -> Self {
        let m = Self {
            operations: Family::default(),
            duration: Family::new_with_constructor(|| Histogram::new(exponential_buckets(0.01, 2.0, 12))),
            transitions: Family::default(),
        };
        registry.register(
            "aws_operator_stack_operations",
            "CloudFormation calls per stack kind, operation and result",
            m.operations.clone(),
        );
        registry.register(
            "aws_operator_stack_operation_duration_seconds",
            "Duration of CloudFormation calls per stack kind and operation",
            m.duration.clone(),
        );
        registry.register(
            "aws_operator_stack_transitions",
            "Observed stack status changes per stack kind (operation = the new status)",
            m.transitions.clone(),
        );
        m
    }
}

/// The management VPC: id, CIDR, and route tables as `(id, Name tag)`.
pub type ControlPlaneNetwork = (String, String, Vec<(String, String)>);

/// Process-lifetime memory of things that are expensive to look up and never change
/// while they exist.
#[derive(Debug, Default)]
pub struct Memo {
    /// Key ARN per cluster id.
    pub keys: HashMap<String, String>,
    /// Content hash per `bucket/key` of the node configs uploaded or verified by this process.
    pub uploads: HashMap<String, String>,
    /// Management VPC `(id, cidr)` and route tables per region.
    pub control_plane_network: HashMap<String, ControlPlaneNetwork>,
    /// When the master Endpoints of a cluster were last refreshed.
    pub endpoints_refreshed: HashMap<String, Instant>,
    /// The last stack status announced by an event, per `account/region/stack`: a status write
    /// that the cache does not show yet must not announce the same transition twice.
    pub stack_status: HashMap<String, String>,
    /// Per `<management account/region>/<cluster id>`: the cluster zone whose delegation is in
    /// place, or when the delegation was last skipped for want of an intermediate zone.
    pub delegations: HashMap<String, Delegated>,
}

/// What [`Memo::delegations`] remembers of one cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delegated {
    /// The NS record for this cluster zone id is in place.
    Zone(String),
    /// The installation has no intermediate zone; looked at this instant.
    Skipped(Instant),
}

impl Memo {
    /// Forget what this process remembers of cluster `id` (tenant account `account`, bucket
    /// `bucket`) once it is deleted, so that a cluster re-created with the same id is built
    /// from scratch: its key looked up again, its node configs uploaded again.
    pub fn forget_cluster(&mut self, account: &str, bucket: &str, id: &str) {
        let cluster = format!("{account}/{id}");
        self.keys.remove(&cluster);
        self.endpoints_refreshed.remove(&cluster);
        self.delegations.retain(|key, _| !key.ends_with(&format!("/{id}")));
        let prefix = format!("{bucket}/");
        self.uploads.retain(|key, _| !key.starts_with(&prefix));
    }
}

/// Everything the controllers share.
pub struct Shared {
    /// The management cluster.
    pub client: kube::Client,
    /// AWS access.
    pub aws: AwsFactory,
    /// Settings.
    pub config: OperatorConfig,
    /// DescribeStacks per account.
    pub stacks: StackCache,
    /// AMIs.
    pub amis: AmiMap,
    /// Metrics.
    pub metrics: StackMetrics,
    /// Memoised lookups.
    pub memo: Mutex<Memo>,
    recorder: Recorder,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared").field("config", &self.config).finish_non_exhaustive()
    }
}

impl Shared {
    /// Assemble the shared state.
    pub fn new(
        client: kube::Client,
        aws: AwsFactory,
        config: OperatorConfig,
        amis: AmiMap,
        registry: &mut Registry,
    ) -> Arc<Self> {
        let recorder = Recorder::new(
            client.clone(),
            Reporter { controller: format!("aws-operator-{}", config.version), instance: None },
        );
        Arc::new(Self {
            client,
            aws,
            stacks: StackCache::new(config.stack_listing_ttl, config.stack_busy_ttl),
            config,
            amis,
            metrics: StackMetrics::new(registry),
            memo: Mutex::new(Memo::default()),
            recorder,
        })
    }

    /// Publish a Normal event on `obj`; a failure to publish is logged, never returned.
    pub async fn event<K>(&self, obj: &K, reason: &str, note: String)
    where
        K: kube::Resource<DynamicType = ()>,
    {
        self.publish(obj, EventType::Normal, reason, "Reconcile", None, note).await;
    }

    /// Publish a Warning event on `obj`.
    pub async fn warning<K>(&self, obj: &K, reason: &str, note: String)
    where
        K: kube::Resource<DynamicType = ()>,
    {
        self.publish(obj, EventType::Warning, reason, "Reconcile", None, note).await;
    }

    /// Publish an event on `obj` with its `action` and `related` object. The recorder folds an
    /// event into an earlier one with the same type, reason, action, object and related object
    /// (only its count grows, its note stays the first one), so whatever tells two events apart
    /// must be in one of those fields.
    pub async fn publish<K>(
        &self,
        obj: &K,
        type_: EventType,
        reason: &str,
        action: &str,
        related: Option<k8s_openapi::api::core::v1::ObjectReference>,
        note: String,
    ) where
        K: kube::Resource<DynamicType = ()>,
    {
        let reference = obj.object_ref(&());
        let event = Event {
            type_,
            reason: reason.to_string(),
            note: Some(note),
            action: action.to_string(),
            secondary: related,
        };
        if let Err(e) = self.recorder.publish(&event, &reference).await {
            tracing::warn!(error = %e, reason, "publishing an event failed");
        }
    }

    /// The Release named `v<version>`.
    pub async fn release(&self, version: &str) -> Result<Option<Release>, kube::Error> {
        let api: kube::Api<Release> = kube::Api::all(self.client.clone());
        api.get_opt(&format!("v{version}")).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forgetting_a_cluster_clears_its_uploads_key_and_endpoints_only() {
        let mut memo = Memo::default();
        memo.keys.insert("111/eu-central-1/a1b2c".into(), "arn:key".into());
        memo.keys.insert("111/eu-central-1/other".into(), "arn:other".into());
        memo.endpoints_refreshed.insert("111/eu-central-1/a1b2c".into(), Instant::now());
        memo.uploads.insert("111-g8s-a1b2c/version/16.2.0/cloudconfig/master-0".into(), "h1".into());
        memo.uploads.insert("111-g8s-a1b2c/version/16.2.0/cloudconfig/worker".into(), "h2".into());
        memo.uploads.insert("111-g8s-a1b2cd/version/16.2.0/cloudconfig/worker".into(), "h3".into());
        memo.forget_cluster("111/eu-central-1", "111-g8s-a1b2c", "a1b2c");
        assert_eq!(memo.keys.keys().collect::<Vec<_>>(), ["111/eu-central-1/other"]);
        assert!(memo.endpoints_refreshed.is_empty());
        assert_eq!(memo.uploads.keys().collect::<Vec<_>>(), ["111-g8s-a1b2cd/version/16.2.0/cloudconfig/worker"]);
    }

    #[tokio::test]
    async fn the_ami_file_is_reloaded_while_running_and_a_broken_one_is_ignored() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("ami.json");
        let write = |json: &str| {
            // As Kubernetes updates a mounted ConfigMap: a new file swapped in atomically.
            let tmp = dir.path().join("ami.json.tmp");
            std::fs::write(&tmp, json).expect("writable");
            std::fs::rename(&tmp, &path).expect("renamable");
        };
        write(r#"{"4230.2.4": {"eu-central-1": "ami-0000000000000000a"}}"#);
        let amis = AmiMap::load(&path).expect("a valid file");
        let shutdown = tokio_util::sync::CancellationToken::new();
        let watching = tokio::spawn(amis.clone().watch(path.clone(), Duration::from_millis(20), shutdown.clone()));
        assert!(matches!(amis.lookup("4230.2.5", "eu-central-1"), Err(AmiError::Missing { .. })));

        write(r#"{"4230.2.5": {"eu-central-1": "ami-0000000000000000b"}}"#);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while amis.lookup("4230.2.5", "eu-central-1").is_err() {
            assert!(tokio::time::Instant::now() < deadline, "the new AMI file was never read");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(amis.lookup("4230.2.4", "eu-central-1").is_err(), "the old content is replaced");

        write("{ not json");
        assert!(amis.reload(&path).is_err());
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(amis.lookup("4230.2.5", "eu-central-1").ok().as_deref(), Some("ami-0000000000000000b"));
        shutdown.cancel();
        watching.await.expect("the watch stops on shutdown");
    }
}

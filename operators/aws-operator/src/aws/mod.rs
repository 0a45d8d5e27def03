//! The AWS edge: every call the operator makes to AWS goes through this module.
//!
//! | module | what it holds |
//! | --- | --- |
//! | this one | credentials, the two roles assumed per cluster, the service clients of one account ([`AccountClients`], [`AwsFactory`]) |
//! | [`cloudformation`] | the [`CloudFormation`] trait, its SDK implementation, an in-memory fake, the `DescribeStacks` cache |
//! | [`kms`] | the cluster key and the encryption of node-config secrets |
//! | [`s3`] | the cluster buckets and the node-config objects |
//! | [`ec2`] | EC2 and Auto Scaling reads: subnets, the management VPC, master addresses, pool capacity |
//! | [`drift`] | CloudFormation drift detection of a stack, and writing drifted security-group rules, routes and group sizes back |
//! | [`autoscaling`] | the unhealthy-node terminator's Auto Scaling calls: instances' states in their groups, terminating one in its group |
//! | [`instances`] | the drainers' Auto Scaling instances: one batched listing per account and poll, the instances' private DNS names |
//! | [`route53`] | the cluster zone's NS delegation, the records left in the cluster's zones |
//! | [`iam`] | the IAM OIDC providers of the clusters' service-account issuers |
//! | [`cloudfront`] | the CloudFront distributions in front of the service-account issuers' buckets |
//! | [`quota`] | the account limits and usage the quota preflight checks: CloudFormation and Auto Scaling `DescribeAccountLimits`, the account's stacks, Service Quotas (VPCs, NAT gateways per zone), EC2 `DescribeAccountAttributes` (Elastic IPs) and the network's usage |
//! | [`elb`] | classic and v2 load balancers and target groups the cluster's cloud provider left |
//! | [`budget`] | the request budget per account and region that every replica shares: the HTTP client every request waits at for its token, the member Leases |
//!
//! The operator's credentials come from the standard chain (environment, shared config file,
//! web identity / IRSA, container or instance metadata) or are given explicitly. With them it
//! assumes the management-cluster role (flag `--aws-control-plane-role-arn`) for the
//! management-account stacks, and the tenant role named by the credential Secret of each
//! AWSCluster (key `aws.awsoperator.arn`) for the tenant stacks, the key, the bucket and the node
//! configs (reference §7.4). Account ids come from STS `GetCallerIdentity` with each role's
//! credentials. Clients are cached per role and region for the life of the process; the
//! assumed-role credentials refresh themselves.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use aws_config::BehaviorVersion;
use aws_config::timeout::TimeoutConfig;
use aws_credential_types::provider::SharedCredentialsProvider;
use aws_sdk_cloudformation::error::ProvideErrorMetadata;
use aws_smithy_http_client::tls;
use aws_smithy_types::error::display::DisplayErrorContext;
use parking_lot::Mutex;

use self::budget::RequestBudget;
use self::cloudformation::{CloudFormation, SdkCloudFormation};

pub mod autoscaling;
pub mod budget;
pub mod cloudformation;
pub mod cloudfront;
pub mod drift;
pub mod ec2;
pub mod elb;
pub mod iam;
pub mod instances;
pub mod kms;
pub mod quota;
pub mod route53;
pub mod s3;

pub use crate::config::AwsSettings;

/// A failure to reach or use AWS outside CloudFormation.
#[derive(Debug, thiserror::Error)]
pub enum AwsError {
    /// Setting up clients failed.
    #[error("AWS setup: {0}")]
    Setup(String),
    /// An API call failed.
    #[error("{service} {operation}: {code}: {message}")]
    Api {
        /// The service.
        service: &'static str,
        /// The operation.
        operation: &'static str,
        /// The AWS error code (or `Transport`).
        code: String,
        /// The message.
        message: String,
    },
}

impl AwsError {
    /// The AWS error code.
    pub fn code(&self) -> &str {
        match self {
            AwsError::Setup(_) => "Setup",
            AwsError::Api { code, .. } => code,
        }
    }
}

impl operatorkit::ErrorKind for AwsError {
    fn kind(&self) -> std::borrow::Cow<'static, str> {
        std::borrow::Cow::Borrowed(match self {
            AwsError::Setup(_) => "AwsSetupFailed",
            AwsError::Api { code, .. } if code == "AccessDenied" || code == "AccessDeniedException" => {
                "AwsAccessDenied"
            }
            AwsError::Api { .. } => "AwsApiError",
        })
    }
}

/// Attempts per AWS call, the first included: a throttled or transiently failed call is
/// retried at most this often, with jittered exponential backoff, then fails into the
/// reconcile's own error backoff.
pub const MAX_ATTEMPTS: u32 = 5;

/// The SDK's adaptive retry mode: standard retries (throttling errors such as `Throttling`,
/// `RequestLimitExceeded` and `SlowDown`, 5xx and timeouts, with a retry quota) plus a
/// client-side rate limiter that slows every call of the process down after a throttling
/// answer, bounded by [`MAX_ATTEMPTS`].
pub fn retry_config() -> aws_config::retry::RetryConfig {
    aws_config::retry::RetryConfig::adaptive().with_max_attempts(MAX_ATTEMPTS)
}

/// Convert an SDK error into an [`AwsError`].
pub fn api_error<E, R>(
    service: &'static str,
    operation: &'static str,
    err: aws_sdk_s3::error::SdkError<E, R>,
) -> AwsError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    let (code, message) = match err.as_service_error() {
        Some(e) => (
            e.code().unwrap_or("Unknown").to_string(),
            e.message().map(str::to_string).unwrap_or_else(|| DisplayErrorContext(&err).to_string()),
        ),
        None => ("Transport".to_string(), DisplayErrorContext(&err).to_string()),
    };
    AwsError::Api { service, operation, code, message }
}

/// The clients of one account in one region.
#[derive(Clone)]
pub struct AccountClients {
    /// The account id, from STS.
    pub account_id: String,
    /// The region.
    pub region: String,
    /// CloudFormation.
    pub cfn: Arc<dyn CloudFormation>,
    /// CloudFormation's SDK client, for the calls outside the stack state machine (drift
    /// detection, [`drift`]).
    pub cfn_client: aws_sdk_cloudformation::Client,
    /// EC2.
    pub ec2: aws_sdk_ec2::Client,
    /// S3.
    pub s3: aws_sdk_s3::Client,
    /// KMS.
    pub kms: aws_sdk_kms::Client,
    /// Auto Scaling.
    pub autoscaling: aws_sdk_autoscaling::Client,
    /// Route53 (a global service: the region only signs the requests).
    pub route53: aws_sdk_route53::Client,
    /// Classic Elastic Load Balancing.
    pub elb: aws_sdk_elasticloadbalancing::Client,
    /// Elastic Load Balancing v2.
    pub elbv2: aws_sdk_elasticloadbalancingv2::Client,
    /// IAM (a global service: the region only signs the requests).
    pub iam: aws_sdk_iam::Client,
    /// CloudFront (a global service: the region only signs the requests).
    pub cloudfront: aws_sdk_cloudfront::Client,
    /// Service Quotas (the quota preflight's reads).
    pub service_quotas: aws_sdk_servicequotas::Client,
}

impl std::fmt::Debug for AccountClients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccountClients").field("account_id", &self.account_id).field("region", &self.region).finish()
    }
}

impl AccountClients {
    /// The key naming this account and region in caches.
    pub fn cache_key(&self) -> String {
        format!("{}/{}", self.account_id, self.region)
    }
}

/// A role (`None`: the operator's own credentials) and a region.
/// Role (none: the operator's own credentials), region, and whether the role is a tenant's (its
/// AssumeRole carries the installation's ExternalId).
type ClientKey = (Option<String>, String, bool);

/// Refuses every AWS call of a replica that does not hold the leader election lease, checked
/// just before each attempt is sent (retries included), so that a replica that lost the lease
/// mid-reconcile sends nothing more to AWS. STS calls (the role assumptions behind the
/// clients' credentials) are not gated: they change nothing in an account.
#[derive(Clone, Debug)]
struct LeaderGate(operatorkit::Leadership);

impl aws_sdk_ec2::config::Intercept for LeaderGate {
    fn name(&self) -> &'static str {
        "LeaderGate"
    }

    fn read_before_transmit(
        &self,
        _: &aws_sdk_ec2::config::interceptors::BeforeTransmitInterceptorContextRef<'_>,
        _: &aws_sdk_ec2::config::RuntimeComponents,
        _: &mut aws_sdk_ec2::config::ConfigBag,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        Ok(self.0.check()?)
    }
}

/// Builds and caches [`AccountClients`] per assumed role and region.
pub struct AwsFactory {
    settings: AwsSettings,
    base: aws_config::SdkConfig,
    gate: LeaderGate,
    budget: Option<RequestBudget>,
    clients: Mutex<HashMap<ClientKey, Arc<AccountClients>>>,
    // One in-flight setup per key, so that concurrent reconciles do not assume a role twice.
    setup: Mutex<HashMap<ClientKey, Arc<tokio::sync::Mutex<()>>>>,
}

impl std::fmt::Debug for AwsFactory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AwsFactory").field("endpoint_url", &self.settings.endpoint_url).finish()
    }
}

impl AwsFactory {
    /// Load the operator's own credentials and build the HTTP client.
    pub async fn new(settings: AwsSettings) -> Result<Self, AwsError> {
        let mut trust = tls::TrustStore::default();
        if let Some(path) = &settings.ca_bundle {
            let pem = std::fs::read(path)
                .map_err(|e| AwsError::Setup(format!("reading the CA bundle {}: {e}", path.display())))?;
            trust = trust.with_pem_certificate(pem);
        }
        let tls_context = tls::TlsContext::builder()
            .with_trust_store(trust)
            .build()
            .map_err(|e| AwsError::Setup(format!("TLS setup: {e}")))?;
        let http = aws_smithy_http_client::Builder::new()
            .tls_provider(tls::Provider::Rustls(tls::rustls_provider::CryptoMode::Ring))
            .tls_context(tls_context)
            .build_https();
        let mut loader = aws_config::defaults(BehaviorVersion::latest())
            .http_client(http)
            .region(aws_config::Region::new(settings.default_region.clone()))
            .timeout_config(
                TimeoutConfig::builder()
                    .operation_timeout(settings.operation_timeout.unwrap_or(Duration::from_secs(60)))
                    .connect_timeout(Duration::from_secs(5))
                    .build(),
            )
            .retry_config(retry_config());
        if let Some(url) = &settings.endpoint_url {
            loader = loader.endpoint_url(url);
        }
        if let Some(creds) = &settings.credentials {
            loader = loader.credentials_provider(creds.clone());
        }
        let base = loader.load().await;
        Ok(Self {
            settings,
            base,
            gate: LeaderGate(operatorkit::Leadership::always()),
            budget: None,
            clients: Mutex::new(HashMap::new()),
            setup: Mutex::new(HashMap::new()),
        })
    }

    /// Send AWS calls only while `leadership` holds (checked before every attempt). Call before
    /// the first client is built; the default is to always send.
    pub fn gated_by(mut self, leadership: operatorkit::Leadership) -> Self {
        self.gate = LeaderGate(leadership);
        self
    }

    /// Send every request of the accounts' clients (retries included) only with a token of
    /// `budget` ([`budget`]). Call before the first client is built; the default is no budget.
    pub fn budgeted(mut self, budget: RequestBudget) -> Self {
        self.budget = Some(budget);
        self
    }

    /// The request budget ([`Self::budgeted`]).
    pub fn budget(&self) -> Option<&RequestBudget> {
        self.budget.as_ref()
    }

    /// The leadership the calls are fenced by ([`Self::gated_by`]).
    pub fn leadership(&self) -> &operatorkit::Leadership {
        &self.gate.0
    }

    /// The settings.
    pub fn settings(&self) -> &AwsSettings {
        &self.settings
    }

    /// The management-cluster account in `region`.
    pub async fn control_plane(&self, region: &str) -> Result<Arc<AccountClients>, AwsError> {
        self.clients_for(self.settings.control_plane_role_arn.clone(), region, false).await
    }

    /// The tenant account reached through `role_arn`, in `region`.
    pub async fn tenant(&self, role_arn: &str, region: &str) -> Result<Arc<AccountClients>, AwsError> {
        self.clients_for(Some(role_arn.to_string()), region, true).await
    }

    /// Clients of account `account_id` in `region` with the operator's own credentials and
    /// `cfn` as their CloudFormation: for tests and benchmarks that drive the stack operations
    /// against [`cloudformation::FakeCloudFormation`]. Builds no connection.
    pub fn with_cloudformation(&self, account_id: &str, region: &str, cfn: Arc<dyn CloudFormation>) -> AccountClients {
        let conf = self.base.to_builder().region(aws_config::Region::new(region.to_string())).build();
        AccountClients {
            account_id: account_id.to_string(),
            region: region.to_string(),
            cfn,
            cfn_client: aws_sdk_cloudformation::Client::new(&conf),
            ec2: aws_sdk_ec2::Client::new(&conf),
            s3: aws_sdk_s3::Client::new(&conf),
            kms: aws_sdk_kms::Client::new(&conf),
            autoscaling: aws_sdk_autoscaling::Client::new(&conf),
            route53: aws_sdk_route53::Client::new(&conf),
            elb: aws_sdk_elasticloadbalancing::Client::new(&conf),
            elbv2: aws_sdk_elasticloadbalancingv2::Client::new(&conf),
            iam: aws_sdk_iam::Client::new(&conf),
            cloudfront: aws_sdk_cloudfront::Client::new(&conf),
            service_quotas: aws_sdk_servicequotas::Client::new(&conf),
        }
    }

    async fn clients_for(
        &self,
        role: Option<String>,
        region: &str,
        tenant: bool,
    ) -> Result<Arc<AccountClients>, AwsError> {
        let key = (role.clone(), region.to_string(), tenant);
        if let Some(c) = self.clients.lock().get(&key) {
            return Ok(c.clone());
        }
        let gate = self.setup.lock().entry(key.clone()).or_default().clone();
        let _guard = gate.lock().await;
        if let Some(c) = self.clients.lock().get(&key) {
            return Ok(c.clone());
        }
        let region_v = aws_config::Region::new(region.to_string());
        let mut conf = self.base.to_builder().region(region_v.clone());
        if let Some(role) = &role {
            let mut builder = aws_config::sts::AssumeRoleProvider::builder(role)
                .session_name("aws-operator")
                .region(region_v)
                .configure(&self.base);
            if let Some(external_id) = self.settings.tenant_external_id.as_ref().filter(|_| tenant) {
                builder = builder.external_id(external_id);
            }
            let provider = builder.build().await;
            conf = conf.credentials_provider(SharedCredentialsProvider::new(provider));
        }
        let conf = conf.build();
        let sts = aws_sdk_sts::Client::new(&conf);
        let identity = sts.get_caller_identity().send().await.map_err(|e| api_error("STS", "GetCallerIdentity", e))?;
        let account_id = identity
            .account()
            .map(str::to_string)
            .ok_or_else(|| AwsError::Setup("STS GetCallerIdentity returned no account".into()))?;
        // Every request from here on is the account's: it waits for the account's budget.
        let conf = match (&self.budget, conf.http_client()) {
            (Some(budget), Some(http)) => {
                conf.to_builder().http_client(budget.http_client(http, &account_id, region)).build()
            }
            _ => conf,
        };
        let gate = &self.gate;
        let s3_conf = aws_sdk_s3::config::Builder::from(&conf)
            .force_path_style(self.settings.endpoint_url.is_some())
            .interceptor(gate.clone())
            .build();
        let cfn_conf = aws_sdk_cloudformation::config::Builder::from(&conf).interceptor(gate.clone()).build();
        let ec2_conf = aws_sdk_ec2::config::Builder::from(&conf).interceptor(gate.clone()).build();
        let kms_conf = aws_sdk_kms::config::Builder::from(&conf).interceptor(gate.clone()).build();
        let asg_conf = aws_sdk_autoscaling::config::Builder::from(&conf).interceptor(gate.clone()).build();
        let route53_conf = aws_sdk_route53::config::Builder::from(&conf).interceptor(gate.clone()).build();
        let elb_conf = aws_sdk_elasticloadbalancing::config::Builder::from(&conf).interceptor(gate.clone()).build();
        let elbv2_conf = aws_sdk_elasticloadbalancingv2::config::Builder::from(&conf).interceptor(gate.clone()).build();
        let iam_conf = aws_sdk_iam::config::Builder::from(&conf).interceptor(gate.clone()).build();
        let cloudfront_conf = aws_sdk_cloudfront::config::Builder::from(&conf).interceptor(gate.clone()).build();
        let quotas_conf = aws_sdk_servicequotas::config::Builder::from(&conf).interceptor(gate.clone()).build();
        let clients = Arc::new(AccountClients {
            account_id,
            region: region.to_string(),
            cfn: Arc::new(SdkCloudFormation::new(aws_sdk_cloudformation::Client::from_conf(cfn_conf.clone()))),
            cfn_client: aws_sdk_cloudformation::Client::from_conf(cfn_conf),
            ec2: aws_sdk_ec2::Client::from_conf(ec2_conf),
            s3: aws_sdk_s3::Client::from_conf(s3_conf),
            kms: aws_sdk_kms::Client::from_conf(kms_conf),
            autoscaling: aws_sdk_autoscaling::Client::from_conf(asg_conf),
            route53: aws_sdk_route53::Client::from_conf(route53_conf),
            elb: aws_sdk_elasticloadbalancing::Client::from_conf(elb_conf),
            elbv2: aws_sdk_elasticloadbalancingv2::Client::from_conf(elbv2_conf),
            iam: aws_sdk_iam::Client::from_conf(iam_conf),
            cloudfront: aws_sdk_cloudfront::Client::from_conf(cloudfront_conf),
            service_quotas: aws_sdk_servicequotas::Client::from_conf(quotas_conf),
        });
        self.clients.lock().insert(key, clients.clone());
        Ok(clients)
    }
}

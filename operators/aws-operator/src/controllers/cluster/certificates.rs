//! Step 2, `certificates`: a cluster's PKI and encryption key, issued by the operator when the
//! cluster brings none (`node_lifecycle::pki_secrets`, the same for both operators).
//!
//! The Secrets are those the node configs read ([`crate::node_config`]): the cert-operator
//! certificate Secrets and `<id>-encryption-provider-config`, in the certificates' namespace
//! (the cluster's, or `--certificates-namespace`). What is missing is issued, what the operator
//! issued is renewed when due, and a Secret someone else wrote (cert-operator's) is only checked:
//! when it fails, the cluster is `Ready=False` `CertificateInvalid` and nothing is replaced.

use apis::aws::AWSCluster;
use aws_stacks::names;
use kube::ResourceExt;
use node_lifecycle::pki_secrets::{Ensured, reconcile};
use operatorkit::{Outcome, Resource, ResourceError, resource};
use pki::ClusterNames;
use pki::ensure::{EncryptionFormat, EnsureRequest};

use super::{ClusterState, reject};

/// The etcd member names a master may advertise: `etcd0` (one master), `etcd1`–`etcd3` (three),
/// all four so that going from one master to three keeps the certificate.
const ETCD_MEMBERS: std::ops::RangeInclusive<u8> = 0..=3;

/// The names of an AWS cluster's certificates: the API, internal API and etcd hosts under
/// `<id>.k8s.<spec.cluster.dns.domain>`, each etcd member's host, and the Service CIDR the node
/// configs give the API server (`service_cidr`, the operator's `--service-cidr`).
pub fn names(cluster: &AWSCluster, service_cidr: &str) -> ClusterNames {
    names_for(cluster.name_any(), &cluster.spec.cluster.dns.domain, service_cidr)
}

/// The names of the certificates of cluster `id` under `<id>.k8s.<domain>` (either cluster kind).
pub fn names_for(id: String, domain: &str, service_cidr: &str) -> ClusterNames {
    let base = names::tenant_base_domain(&id, domain);
    ClusterNames {
        api_domain: names::api_host(&id, domain),
        internal_api_domain: Some(format!("internal-api.{base}")),
        etcd_domain: names::etcd_host(&id, domain),
        etcd_member_domains: ETCD_MEMBERS.map(|n| format!("{}.{base}", aws_stacks::ignition::etcd_name(n))).collect(),
        cluster_domain: aws_stacks::ignition::CLUSTER_DOMAIN.to_string(),
        service_cidr: service_cidr.to_string(),
        cluster_id: id,
    }
}

/// Issue what is missing of `cluster`'s Secrets in `namespace`, renew what is due; a Secret
/// someone else wrote that fails its checks is `CertificateInvalid`
/// ([`node_lifecycle::pki_secrets::reconcile`]).
pub async fn issue(
    client: &kube::Client,
    namespace: &str,
    cluster: &AWSCluster,
    service_cidr: &str,
    service_account_v2: bool,
) -> Result<Ensured, ResourceError> {
    issue_names(client, namespace, &names(cluster, service_cidr), service_account_v2).await
}

/// [`issue`] for the certificates `names` (either cluster kind).
pub async fn issue_names(
    client: &kube::Client,
    namespace: &str,
    names: &ClusterNames,
    service_account_v2: bool,
) -> Result<Ensured, ResourceError> {
    let request = EnsureRequest {
        namespace,
        names,
        encryption: EncryptionFormat::ProviderConfig,
        options: pki::IssueOptions::at(std::time::SystemTime::now()),
        renewal: pki::RenewalPolicy::default(),
        // The management cluster's own access (drains, node health), as its clients reach it.
        kubeconfig_server: Some(format!("https://{}", names.api_domain)),
        service_account_v2,
    };
    reconcile(client, &request).await
}

/// The cluster's certificates and encryption key, before anything needs them.
#[derive(Debug)]
pub struct Certificates;

impl Resource<AWSCluster, ClusterState> for Certificates {
    fn name(&self) -> &str {
        "certificates"
    }

    async fn ensure_created(&self, state: &mut ClusterState, obj: &AWSCluster) -> resource::Result<Outcome> {
        let shared = state.shared.clone();
        let cluster_ns = obj.namespace().unwrap_or_default();
        let namespace = crate::node_config::certificates_namespace(&shared, &cluster_ns);
        // IAM roles for service accounts need the issuer's key pair too.
        let irsa = match state.release.as_ref().map(|release| super::irsa::enabled(obj, release)) {
            Some(Ok(on)) => on,
            Some(Err(message)) => {
                let err = ResourceError::msg(super::irsa::IRSA_INVALID, message).permanent();
                return Err(reject(state, obj, err).await);
            }
            None => false,
        };
        match issue(&shared.client, namespace, obj, &shared.config.service_cidr, irsa).await {
            Ok(ensured) => Ok(issued(&shared, obj, &ensured).await),
            Err(e) if !e.is_retryable() => Err(reject(state, obj, e).await),
            Err(e) => Err(e),
        }
    }

    async fn ensure_deleted(&self, _: &mut ClusterState, _: &AWSCluster) -> resource::Result<Outcome> {
        Ok(Outcome::proceed())
    }
}

/// The events of what was issued or renewed for `obj`, and the outcome: looked at again when
/// the next certificate is due for renewal (either cluster kind).
pub async fn issued<K>(shared: &crate::context::Shared, obj: &K, ensured: &Ensured) -> Outcome
where
    K: kube::Resource<DynamicType = ()>,
{
    for (reason, note) in ensured.events() {
        shared.event(obj, reason, note).await;
    }
    match ensured.renew_in(std::time::SystemTime::now()) {
        Some(after) => Outcome::proceed().requeue_after(after),
        None => Outcome::proceed(),
    }
}

//! A cluster's PKI and encryption key, issued by the operator when the cluster brings none
//! (`node_lifecycle::pki_secrets`, the same for both operators).

use kvm_objects::cluster::Cluster;
use node_lifecycle::pki_secrets::{Ensured, reconcile};
use operatorkit::ResourceError;
use pki::ClusterNames;
use pki::ensure::{EncryptionFormat, EnsureRequest};

/// The names of a KVM cluster's certificates: the API and etcd domains of its spec, the Service
/// CIDR of `spec.cluster.kubernetes.api.clusterIPRange`. Its etcd members advertise loopback
/// only, and it has no internal API name.
pub fn names(cluster: &Cluster) -> ClusterNames {
    ClusterNames {
        cluster_id: cluster.id.clone(),
        api_domain: cluster.api_domain.clone(),
        internal_api_domain: None,
        etcd_domain: cluster.etcd_domain.clone(),
        etcd_member_domains: Vec::new(),
        cluster_domain: ignition::kubernetes::CLUSTER_DOMAIN.to_string(),
        service_cidr: cluster.service_cidr.clone(),
    }
}

/// Issue what is missing of `cluster`'s Secrets in `namespace`, renew what is due; a Secret
/// someone else wrote that fails its checks is `CertificateInvalid`
/// ([`node_lifecycle::pki_secrets::reconcile`]).
pub async fn issue(client: &kube::Client, namespace: &str, cluster: &Cluster) -> Result<Ensured, ResourceError> {
    let names = names(cluster);
    let request = EnsureRequest {
        namespace,
        names: &names,
        encryption: EncryptionFormat::RandomKey,
        options: pki::IssueOptions::at(std::time::SystemTime::now()),
        renewal: pki::RenewalPolicy::default(),
        // The management cluster's own access (drains, the node watch, node health), at the
        // endpoint its clients use.
        kubeconfig_server: Some(format!("https://{}", super::workload::api_endpoint(cluster))),
        service_account_v2: false,
    };
    reconcile(client, &request).await
}

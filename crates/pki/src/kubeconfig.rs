//! The management cluster's kubeconfig for a workload cluster: Secret `<id>-kubeconfig`, key
//! `value` (the Cluster API convention, which `node_lifecycle::clients` reads first), holding a
//! client certificate of the cluster CA for user and group
//! [`ignition::access::GROUP`], the narrowest identity the operators' drains, node watch and
//! node health need. The masters bind that group to its role ([`ignition::access`]).
//!
//! The kubeconfig is JSON (which every kubeconfig reader takes as YAML) with the certificates
//! embedded, so that reading it makes the reader open no file.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::check::CertificateFiles;
use crate::issue::{Authority, IssuedCertificate, LeafProfile, PrivateKey, Usage};
use crate::secret::{CLUSTER_LABEL, ISSUED_BY, ISSUED_BY_LABEL};

/// The certificate's name in events and in [`IssuedCertificate::name`].
pub const NAME: &str = "kubeconfig";
/// The Secret key of the kubeconfig (Cluster API convention).
pub const KEY: &str = "value";

/// `<cluster id>-kubeconfig`.
pub fn secret_name(cluster_id: &str) -> String {
    format!("{cluster_id}-kubeconfig")
}

/// The client certificate's profile: cluster CA, client only, CN and O the management
/// identity, no names.
pub fn profile() -> LeafProfile {
    LeafProfile {
        name: NAME.to_string(),
        authority: Authority::Cluster,
        usage: Usage::Client,
        common_name: ignition::access::USER.to_string(),
        organizations: vec![ignition::access::GROUP.to_string()],
        dns_names: Vec::new(),
        ip_addresses: Vec::new(),
    }
}

/// The kubeconfig for `server` (an `https://` URL) with `cert` embedded.
pub fn kubeconfig(server: &str, cert: &IssuedCertificate) -> String {
    let b64 = |text: &str| BASE64.encode(text.as_bytes());
    let config = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "workload", "cluster": {
            "server": server,
            "certificate-authority-data": b64(&cert.ca_pem),
        }}],
        "users": [{"name": ignition::access::USER, "user": {
            "client-certificate-data": b64(&cert.crt_pem),
            "client-key-data": b64(cert.key.expose_pem()),
        }}],
        "contexts": [{"name": "workload", "context": {"cluster": "workload", "user": ignition::access::USER}}],
        "current-context": "workload",
    });
    format!("{config:#}\n")
}

/// The Secret `<cluster id>-kubeconfig` for `server` with `cert`.
pub fn kubeconfig_secret(namespace: &str, cluster_id: &str, server: &str, cert: &IssuedCertificate) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(secret_name(cluster_id)),
            namespace: Some(namespace.to_string()),
            labels: Some(
                [(CLUSTER_LABEL, cluster_id), (ISSUED_BY_LABEL, ISSUED_BY)]
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..ObjectMeta::default()
        },
        type_: Some("Opaque".into()),
        data: Some([(KEY.to_string(), ByteString(kubeconfig(server, cert).into_bytes()))].into()),
        ..Secret::default()
    }
}

/// The server and the certificate files of a kubeconfig this crate wrote; `None` when it is
/// not one (edited by hand, or not JSON): the caller issues it again.
pub fn read(secret: &Secret) -> Option<(String, CertificateFiles)> {
    let value = secret.data.as_ref()?.get(KEY)?;
    let config: serde_json::Value = serde_json::from_slice(&value.0).ok()?;
    let text = |v: &serde_json::Value| -> Option<String> { String::from_utf8(BASE64.decode(v.as_str()?).ok()?).ok() };
    let cluster = &config["clusters"][0]["cluster"];
    let user = &config["users"][0]["user"];
    Some((
        cluster["server"].as_str()?.to_string(),
        CertificateFiles {
            ca: text(&cluster["certificate-authority-data"])?,
            crt: text(&user["client-certificate-data"])?,
            key: PrivateKey::from_pem(text(&user["client-key-data"])?),
        },
    ))
}

//! `kvm-operator render`: the objects a set of CR files would produce in the management
//! cluster, printed as YAML (one document per object) without touching Kubernetes.
//!
//! The files are multi-document YAML (or JSON) as they would be applied with `kubectl`. Of
//! their objects, `KVMConfig` (`provider.giantswarm.io`), `Release` (`release.giantswarm.io`)
//! and `Secret` (`v1`: the cluster's certificates and encryption key) are read; every other kind
//! is skipped. The flags that shape the objects are the daemon's ([`ClusterArgs`]).
//!
//! For every cluster the objects are printed in the order the cluster controller applies them:
//! Namespace, ServiceAccount, the two ClusterRoleBindings, the node Secrets, the etcd PVCs, the
//! Deployments, the Services and the Ingresses. Each cluster starts with a comment naming its
//! Release, its node indexes, the certificates that were not in the files (placeholders are
//! rendered in their place, so the node configs can be read without real keys) and the
//! host-volume PVCs, which are sized by their PersistentVolumes at run time.
//!
//! With `--decode`, a node Secret's `user_data` is printed as its Ignition document under
//! `stringData` instead of base64(gzip(JSON)) under `data`, with each file's content as text
//! (`contents.text`) instead of a data URL: readable, but not what is stored. Certificates from
//! the files are printed as they are, private keys included.
//!
//! This module is the command's edge: it reads the files and flags, calls the pure planner
//! ([`crate::plan`]) and prints.

use std::io::Write;
use std::path::PathBuf;

use k8s_openapi::api::core::v1::Secret;
use kvm_objects::ignition::decode_node_secret;
use serde::Serialize;
use serde_json::{Value, json};

use crate::config::{ClusterArgs, OperatorConfig};
use crate::plan::{ClusterPlan, Objects, PlanError, plan};

/// Arguments of `kvm-operator render`.
#[derive(clap::Args, Debug, Clone)]
pub struct RenderArgs {
    /// YAML files with KVMConfig, Release and Secret objects; other kinds are skipped.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// The operator version to check the Release against: a Release naming another version of the
    /// `kvm-operator` component gets a warning, since this version would not reconcile it.
    #[arg(long, default_value = env!("CARGO_PKG_VERSION"))]
    pub operator_version: String,
    /// Print the node Secrets' Ignition decoded (as `stringData`), not as stored.
    #[arg(long)]
    pub decode: bool,
    /// The flags that shape the objects, as the daemon takes them.
    #[command(flatten)]
    pub cluster: ClusterArgs,
}

impl Objects {
    /// Read and parse every file, in order.
    pub fn load(paths: &[PathBuf]) -> Result<Self, PlanError> {
        let mut objects = Objects::default();
        for path in paths {
            let text = std::fs::read_to_string(path)
                .map_err(|e| PlanError::Read { path: path.display().to_string(), message: e.to_string() })?;
            objects.add_yaml(&text, path)?;
        }
        Ok(objects)
    }
}

/// Render the files and print the objects to `out`.
///
/// Everything is validated and rendered before the first line is written, so invalid input
/// prints nothing but the error. A closed output (`render … | head`) ends the command quietly.
pub fn run(args: &RenderArgs, out: &mut impl Write) -> anyhow::Result<()> {
    match write_plans(args, out) {
        Err(e) if e.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe) => {
            Ok(())
        }
        other => other,
    }
}

fn write_plans(args: &RenderArgs, out: &mut impl Write) -> anyhow::Result<()> {
    // Install settings not given are placeholders, said on stderr and in every header.
    let (cluster_args, install_placeholders) = args.cluster.with_placeholders();
    if !install_placeholders.is_empty() {
        eprintln!(
            "note: install settings not given or secret, rendered with placeholders: {}",
            install_placeholders.join(" ")
        );
    }
    let config = OperatorConfig {
        access: cluster_args.access().map_err(anyhow::Error::msg)?,
        ..OperatorConfig::new(&args.operator_version, &cluster_args)
    };
    let objects = Objects::load(&args.files)?;
    let plans = plan(&objects, &config)?;
    let mut text = String::new();
    for cluster in &plans {
        if let Some(warning) = cluster.version_warning(&config.version) {
            // On stderr too: a warning only in the output would vanish into a pipe.
            eprintln!("warning: {warning}");
        }
        text.push_str(&header(cluster, &config.version));
        if !install_placeholders.is_empty() {
            text.push_str(&format!(
                "# install settings not given or secret, rendered with placeholders: {}\n",
                install_placeholders.join(" ")
            ));
        }
        for document in documents(cluster, args.decode)? {
            text.push_str("---\n");
            text.push_str(&serde_saphyr::to_string(&document)?);
        }
    }
    out.write_all(text.as_bytes())?;
    Ok(())
}

fn header(cluster: &ClusterPlan, version: &str) -> String {
    let mut lines = vec![format!("# {}: Release {}, operator {version}", cluster.cluster, cluster.release)];
    if let Some(warning) = cluster.version_warning(version) {
        lines.push(format!("# WARNING: {warning}"));
    }
    let indexes: Vec<String> = cluster.node_indexes.iter().map(|(id, i)| format!("{id}={i}")).collect();
    lines.push(format!("# node indexes: {}", indexes.join(", ")));
    if !cluster.placeholders.is_empty() {
        lines.push(format!(
            "# not in the files, rendered as placeholders: {} (add the cluster's Secrets to the files to render them)",
            cluster.placeholders.join(", ")
        ));
    }
    if !cluster.host_volume_pvcs.is_empty() {
        lines.push(format!(
            "# not printed, sized by their PersistentVolumes at run time: PVCs {}",
            cluster.host_volume_pvcs.join(", ")
        ));
    }
    lines.iter().map(|l| format!("{l}\n")).collect()
}

fn value(object: &impl Serialize) -> anyhow::Result<Value> {
    Ok(serde_json::to_value(object)?)
}

/// The cluster's objects as documents, in apply order.
fn documents(cluster: &ClusterPlan, decode: bool) -> anyhow::Result<Vec<Value>> {
    let o = &cluster.objects;
    let mut documents = vec![value(&o.namespace)?];
    if let Some(binding) = &o.operator_binding {
        documents.push(value(binding)?);
    }
    documents.push(value(&o.service_account)?);
    for binding in &o.bindings {
        documents.push(value(binding)?);
    }
    for secret in &o.node_secrets {
        documents.push(if decode { decoded(secret)? } else { value(secret)? });
    }
    for object in &o.pvcs {
        documents.push(value(object)?);
    }
    for object in &o.deployments {
        documents.push(value(object)?);
    }
    for object in &o.services {
        documents.push(value(object)?);
    }
    for object in &o.ingresses {
        documents.push(value(object)?);
    }
    Ok(documents)
}

/// A node Secret with its Ignition document under `stringData.user_data`, each file's content
/// as text under `contents.text` instead of its data URL under `contents.source`.
fn decoded(secret: &Secret) -> anyhow::Result<Value> {
    let mut parsed = decode_node_secret(secret)?;
    for file in parsed.document["storage"]["files"].as_array_mut().into_iter().flatten() {
        let text =
            file["path"].as_str().and_then(|p| parsed.files.get(p)).map(|c| String::from_utf8_lossy(c).into_owned());
        if let (Some(text), Some(contents)) = (text, file.get_mut("contents").and_then(Value::as_object_mut)) {
            contents.remove("source");
            contents.insert("text".into(), Value::String(text));
        }
    }
    let mut document = value(secret)?;
    if let Some(map) = document.as_object_mut() {
        map.remove("data");
        map.insert(
            "stringData".into(),
            json!({ kvm_objects::names::USER_DATA_KEY: serde_json::to_string_pretty(&parsed.document)? }),
        );
    }
    Ok(document)
}

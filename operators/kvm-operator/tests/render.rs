//! `kvm-operator render`: every object of the example cluster in the order the controller
//! applies them, Secrets from the files instead of placeholders, `--decode`, stored node
//! indexes, and the errors a user gets for invalid input. Nothing here needs Kubernetes.

use std::path::{Path, PathBuf};
use std::process::Command;

use clap::Parser;
use kvm_operator::render::{self, RenderArgs};
use serde_json::Value;

#[derive(Parser, Debug)]
struct Cli {
    #[command(flatten)]
    args: RenderArgs,
}

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/examples")
}

fn cluster_yaml() -> PathBuf {
    examples().join("kvm-cluster.yaml")
}

fn release_yaml() -> PathBuf {
    examples().join("kvm-release-v20.1.0.yaml")
}

fn args(extra: &[&str], files: &[&Path]) -> RenderArgs {
    let mut argv: Vec<String> = vec!["render".into()];
    if !extra.contains(&"--dns-servers") {
        argv.extend(["--dns-servers".into(), "10.61.0.53,10.61.1.53".into()]);
    }
    argv.extend(extra.iter().map(|s| s.to_string()));
    argv.extend(files.iter().map(|p| p.display().to_string()));
    Cli::try_parse_from(argv).expect("valid arguments").args
}

fn render(extra: &[&str], files: &[&Path]) -> anyhow::Result<String> {
    let mut out = Vec::new();
    render::run(&args(extra, files), &mut out)?;
    Ok(String::from_utf8(out)?)
}

fn documents(text: &str) -> Vec<Value> {
    serde_saphyr::from_multiple::<Value>(text)
        .expect("the output is YAML")
        .into_iter()
        .filter(|d| !d.is_null())
        .collect()
}

fn kind_and_name(document: &Value) -> (String, String) {
    (
        document["kind"].as_str().unwrap_or_default().to_string(),
        document["metadata"]["name"].as_str().unwrap_or_default().to_string(),
    )
}

/// The example with `from` replaced by `to`, written to a temporary file.
fn edited(dir: &tempfile::TempDir, source: &Path, from: &str, to: &str) -> PathBuf {
    let text = std::fs::read_to_string(source).expect("example readable");
    assert!(text.contains(from), "the example no longer contains {from:?}");
    let path = dir.path().join(source.file_name().expect("file name"));
    std::fs::write(&path, text.replacen(from, to, 1)).expect("temp file writable");
    path
}

#[test]
fn the_example_renders_every_object_in_apply_order() -> anyhow::Result<()> {
    let out = render(&[], &[&cluster_yaml(), &release_yaml()])?;
    let objects: Vec<_> = documents(&out).iter().map(kind_and_name).collect();
    let expected: Vec<(String, String)> = [
        ("Namespace", "x7k2p"),
        ("ServiceAccount", "x7k2p"),
        ("ClusterRoleBinding", "x7k2p"),
        ("ClusterRoleBinding", "x7k2p-psp"),
        ("Secret", "master-x7k2p-m1a"),
        ("Secret", "master-x7k2p-m2b"),
        ("Secret", "master-x7k2p-m3c"),
        ("Secret", "worker-x7k2p-w1a"),
        ("Secret", "worker-x7k2p-w2b"),
        ("Secret", "worker-x7k2p-w3c"),
        ("Secret", "worker-x7k2p-w4d"),
        ("Secret", "worker-x7k2p-w5e"),
        ("PersistentVolumeClaim", "pvc-master-etcd-x7k2p-m1a"),
        ("Deployment", "master-m1a"),
        ("Deployment", "master-m2b"),
        ("Deployment", "master-m3c"),
        ("Deployment", "worker-w1a"),
        ("Deployment", "worker-w2b"),
        ("Deployment", "worker-w3c"),
        ("Deployment", "worker-w4d"),
        ("Deployment", "worker-w5e"),
        ("Service", "master"),
        ("Service", "worker"),
        ("Ingress", "api"),
        ("Ingress", "etcd"),
    ]
    .iter()
    .map(|(k, n)| (k.to_string(), n.to_string()))
    .collect();
    assert_eq!(objects, expected);

    let docs = documents(&out);
    for document in docs.iter().filter(|d| d["kind"] != "Namespace" && d["kind"] != "ClusterRoleBinding") {
        assert_eq!(document["metadata"]["namespace"], "x7k2p", "{:?}", kind_and_name(document));
    }
    let secret = docs.iter().find(|d| d["kind"] == "Secret").expect("a node Secret");
    assert_eq!(secret["type"], "Opaque");
    assert!(secret["data"]["user_data"].is_string() && secret.get("stringData").is_none());
    let deployment = docs.iter().find(|d| d["kind"] == "Deployment").expect("a Deployment");
    let env = &deployment["spec"]["template"]["spec"]["containers"];
    assert!(env.to_string().contains("10.61.0.53,10.61.1.53"), "DNS servers reach the node pods");
    assert!(out.starts_with("# x7k2p: Release v20.1.0, operator 4.0.0\n"), "{out}");
    assert!(out.contains("# node indexes: m1a=1, m2b=2, m3c=3, w1a=4, w2b=5, w3c=6, w4d=7, w5e=8\n"), "{out}");
    assert!(
        out.contains("rendered as placeholders: api, calico-etcd-client, etcd, service-account, worker, encryption"),
        "{out}"
    );
    // The same files give the same bytes: nothing in the output depends on time or order.
    assert_eq!(render(&[], &[&cluster_yaml(), &release_yaml()])?, out);
    Ok(())
}

const SECRETS: &str = r#"
apiVersion: v1
kind: Secret
metadata:
  name: x7k2p-encryption
  namespace: default
  labels: {giantswarm.io/cluster: x7k2p, giantswarm.io/randomkey: encryption}
stringData: {}
data: {encryption: Zm9vYmFya2V5}
"#;

fn cert_secret(cert: &str) -> String {
    use base64::Engine;
    let b64 = |s: String| base64::engine::general_purpose::STANDARD.encode(s);
    format!(
        "---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: x7k2p-{cert}\n  namespace: default\n  labels: {{giantswarm.io/cluster: x7k2p, giantswarm.io/certificate: {cert}}}\ndata:\n  ca: {}\n  crt: {}\n  key: {}\n",
        b64(format!("CA OF {cert}\n")),
        b64(format!("CRT OF {cert}\n")),
        b64(format!("KEY OF {cert}\n")),
    )
}

#[test]
fn secrets_in_the_files_replace_the_placeholders_and_decode() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let secrets = dir.path().join("secrets.yaml");
    let mut text = SECRETS.to_string();
    for cert in ["api", "calico-etcd-client", "etcd", "service-account", "worker"] {
        text.push_str(&cert_secret(cert));
    }
    std::fs::write(&secrets, text)?;
    let out = render(&["--decode"], &[&cluster_yaml(), &release_yaml(), &secrets])?;
    assert!(!out.contains("placeholder"), "{out}");
    let docs = documents(&out);
    let master = docs.iter().find(|d| d["metadata"]["name"] == "master-x7k2p-m1a").expect("master Secret");
    assert!(master.get("data").is_none(), "decoded: stringData only");
    let ignition: Value = serde_json::from_str(master["stringData"]["user_data"].as_str().expect("text"))?;
    let files: Vec<&str> =
        ignition["storage"]["files"].as_array().into_iter().flatten().filter_map(|f| f["path"].as_str()).collect();
    assert!(files.contains(&"/etc/kubernetes/ssl/api-key.pem"), "{files:?}");
    assert!(files.contains(&"/etc/kubernetes/encryption/k8s-encryption-config.yaml"), "{files:?}");
    let worker = docs.iter().find(|d| d["metadata"]["name"] == "worker-x7k2p-w5e").expect("worker Secret");
    let ignition: Value = serde_json::from_str(worker["stringData"]["user_data"].as_str().expect("text"))?;
    let text = ignition.to_string();
    assert!(text.contains("/etc/kubernetes/ssl/worker-crt.pem") && !text.contains("api-key.pem"), "{text}");
    assert!(
        text.contains("InitiatorName=iqn.2016-04.com.coreos.iscsi:giantswarm-x7k2p-worker-8"),
        "the iSCSI initiator carries the node index, as text: {text}"
    );
    assert!(text.contains("CRT OF worker"), "file contents as text");

    // Only one certificate missing: only it is a placeholder.
    let partial = dir.path().join("partial.yaml");
    std::fs::write(&partial, format!("{SECRETS}{}", cert_secret("api")))?;
    let out = render(&[], &[&cluster_yaml(), &release_yaml(), &partial])?;
    assert!(out.contains("rendered as placeholders: calico-etcd-client, etcd, service-account, worker ("), "{out}");
    Ok(())
}

#[test]
fn stored_node_indexes_are_kept_and_the_rest_allocated_lowest_free() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let cluster = edited(
        &dir,
        &cluster_yaml(),
        "    network: {flannel: {vni: 12}}\n",
        "    network: {flannel: {vni: 12}}\nstatus:\n  kvm:\n    nodeIndexes: {w3c: 1, m1a: 5, gone: 2}\n",
    );
    let out = render(&[], &[&cluster, &release_yaml()])?;
    // `gone` is freed, but reusable only from the next pass (as the controller allocates).
    assert!(out.contains("# node indexes: m1a=5, m2b=3, m3c=4, w1a=6, w2b=7, w3c=1, w4d=8, w5e=9\n"), "{out}");
    Ok(())
}

#[test]
fn bad_input_names_the_object_the_field_and_the_fix() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let error = render(&[], &[&cluster_yaml()]).expect_err("no Release");
    assert_eq!(
        error.to_string(),
        "KVMConfig org-acme/x7k2p: label release.giantswarm.io/version names Release v20.1.0, which is not in the given files: add it or fix the label"
    );

    let release = edited(&dir, &release_yaml(), "    - name: containerlinux\n      version: 4230.2.4\n", "");
    let error = render(&[], &[&cluster_yaml(), &release]).expect_err("no containerlinux");
    assert_eq!(error.to_string(), "Release v20.1.0 has no containerlinux component; add it to spec.components");

    let cluster =
        edited(&dir, &cluster_yaml(), "      - {cpus: 4, memory: 8G, disk: 40, dockerVolumeSizeGB: 50}\n", "");
    let error = render(&[], &[&cluster, &release_yaml()]).expect_err("lists of different lengths");
    assert!(error.to_string().starts_with("KVMConfig x7k2p is invalid: spec.kvm.workers"), "{error}");

    let error = render(&["--dns-servers", " "], &[&cluster_yaml(), &release_yaml()]).expect_err("no DNS");
    assert_eq!(error.to_string(), "no DNS servers are configured for the VMs; set the operator's DNS servers");

    let error = render(&[], &[&release_yaml()]).expect_err("no cluster");
    assert!(error.to_string().starts_with("no KVMConfig"), "{error}");
    Ok(())
}

#[test]
fn a_release_of_another_operator_version_renders_with_a_warning() -> anyhow::Result<()> {
    let out = render(&["--operator-version", "4.1.0"], &[&cluster_yaml(), &release_yaml()])?;
    assert!(
        out.contains(
            "# WARNING: Release v20.1.0 names kvm-operator 4.0.0: kvm-operator 4.1.0 would not reconcile cluster x7k2p\n"
        ),
        "{out}"
    );
    Ok(())
}

#[test]
fn the_binary_renders_and_fails_with_a_message() -> anyhow::Result<()> {
    let bin = env!("CARGO_BIN_EXE_kvm-operator");
    let ok = Command::new(bin)
        .args(["render", "--dns-servers", "10.61.0.53"])
        .arg(cluster_yaml())
        .arg(release_yaml())
        .output()?;
    assert!(ok.status.success(), "{}", String::from_utf8_lossy(&ok.stderr));
    assert_eq!(documents(&String::from_utf8(ok.stdout)?).len(), 25);

    let failed = Command::new(bin).args(["render", "--dns-servers", "10.61.0.53"]).arg(cluster_yaml()).output()?;
    assert!(!failed.status.success());
    assert!(failed.stdout.is_empty(), "nothing printed on invalid input");
    let stderr = String::from_utf8(failed.stderr)?;
    assert!(stderr.contains("names Release v20.1.0, which is not in the given files"), "{stderr}");

    // A preview needs no install settings: the DNS servers are a placeholder, said so.
    let preview = Command::new(bin).arg("render").arg(cluster_yaml()).arg(release_yaml()).output()?;
    assert!(preview.status.success(), "{}", String::from_utf8_lossy(&preview.stderr));
    let stderr = String::from_utf8(preview.stderr)?;
    assert!(stderr.contains("rendered with placeholders: --dns-servers=192.0.2.53"), "{stderr}");
    let stdout = String::from_utf8(preview.stdout)?;
    assert!(
        stdout
            .contains("# install settings not given or secret, rendered with placeholders: --dns-servers=192.0.2.53\n"),
        "{stdout}"
    );
    assert!(stdout.contains("192.0.2.53"), "the placeholder reaches the node pods");

    // The daemon needs them: it names the flag and stops before connecting anywhere.
    let daemon = Command::new(bin).arg("daemon").env_remove("KVM_OPERATOR_DNS_SERVERS").output()?;
    assert!(!daemon.status.success());
    assert!(String::from_utf8(daemon.stderr)?.contains("--dns-servers is required"), "the required flag is named");
    Ok(())
}

#[test]
fn the_docker_hub_token_is_never_printed_and_the_pause_image_reaches_containerd() -> anyhow::Result<()> {
    // `alice:dckr_pat_secret`.
    let token = "YWxpY2U6ZGNrcl9wYXRfc2VjcmV0";
    let flags = ["--decode", "--dockerhub-token", token, "--pause-image", "registry.example/pause:3.10"];
    let out = render(&flags, &[&cluster_yaml(), &release_yaml()])?;
    assert!(!out.contains(token), "the token is printed");
    assert!(out.contains("--dockerhub-token=<placeholder>"), "the placeholder is named");
    let docs = documents(&out);
    let worker = docs.iter().find(|d| d["metadata"]["name"] == "worker-x7k2p-w5e").expect("worker Secret");
    let ignition: Value = serde_json::from_str(worker["stringData"]["user_data"].as_str().expect("text"))?;
    let file =
        |path: &str| ignition["storage"]["files"].as_array().into_iter().flatten().find(|f| f["path"] == path).cloned();
    let containerd = file("/etc/containerd/config.toml").expect("containerd's configuration");
    let text = containerd["contents"]["text"].as_str().expect("text");
    assert!(text.contains("sandbox_image = \"registry.example/pause:3.10\""), "{text}");
    assert!(text.contains(&format!("auth = \"{}\"", base64_placeholder())), "{text}");
    assert_eq!(containerd["mode"], 0o600);
    Ok(())
}

/// The placeholder token `render` prints, `placeholder:placeholder` in base64.
fn base64_placeholder() -> &'static str {
    "cGxhY2Vob2xkZXI6cGxhY2Vob2xkZXI="
}

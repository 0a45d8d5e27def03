//! A cluster's PKI and encryption key, issued by the operator: a cluster that brings no
//! certificate or encryption Secret reaches Ready on what the operator issued, and a
//! certificate Secret someone else wrote that fails its checks is reported, never replaced.
//! Neither path lets key material into the operator's log, its events or the status.

mod support;

use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use apis::aws::AWSCluster;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::{ListParams, PostParams};
use parking_lot::Mutex;
use support::*;

/// The operator's log, at debug level, kept in memory.
#[derive(Clone, Default)]
struct Log(Arc<Mutex<Vec<u8>>>);

impl Write for Log {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Log {
    /// Capture the log of this test process (each test runs in its own process under nextest;
    /// the fixture's own subscriber then stays unset).
    fn capture() -> Self {
        let log = Log::default();
        let writer = log.clone();
        let _ = tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .with_env_filter(tracing_subscriber::EnvFilter::new(
                "aws_operator=debug,node_lifecycle=debug,operatorkit=debug,pki=debug",
            ))
            .try_init();
        log
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock()).into_owned()
    }
}

/// The events about `name` in the fixture's namespace.
async fn events_of(f: &Fixture, name: &str) -> anyhow::Result<Vec<Event>> {
    let events: Api<Event> = Api::namespaced(f.client.clone(), NS);
    Ok(events
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .collect())
}

/// The cluster's Secrets in the fixture's namespace, by name.
async fn secrets_of(f: &Fixture, id: &str) -> anyhow::Result<Vec<Secret>> {
    let secrets: Api<Secret> = Api::namespaced(f.client.clone(), NS);
    Ok(secrets.list(&ListParams::default().labels(&format!("giantswarm.io/cluster={id}"))).await?.items)
}

fn text(secret: &Secret, key: &str) -> String {
    secret
        .data
        .as_ref()
        .and_then(|d| d.get(key))
        .map(|b| String::from_utf8_lossy(&b.0).into_owned())
        .unwrap_or_default()
}

/// Lines of key material that must never leave the Secrets: the base64 body lines of every
/// private key, and every AES key of an encryption config.
fn key_material(secrets: &[Secret]) -> Vec<String> {
    let mut out = Vec::new();
    for secret in secrets {
        for key in ["key", "encryption"] {
            let value = text(secret, key);
            for line in value.lines().map(str::trim) {
                let line = line.strip_prefix("secret: ").unwrap_or(line);
                if line.len() >= 24 && !line.starts_with("-----") && !line.contains(' ') {
                    out.push(line.to_string());
                }
            }
        }
    }
    out
}

/// Assert that no line of `material` appears in `where_`.
fn assert_no_key_material(material: &[String], where_: &str, text: &str) {
    assert!(!material.is_empty(), "there is key material to look for");
    assert!(!text.contains("PRIVATE KEY"), "a private key in {where_}");
    for line in material {
        assert!(!text.contains(line.as_str()), "key material in {where_}");
    }
}

fn labelled_issued(secret: &Secret) -> bool {
    secret.metadata.labels.as_ref().and_then(|l| l.get("pki.giantswarm.io/issued-by")).map(String::as_str)
        == Some("cluster-operators")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_without_secrets_reaches_ready_on_issued_certificates_and_keeps_them_across_restarts()
-> anyhow::Result<()> {
    let log = Log::capture();
    let mut f = Fixture::start().await?;
    f.apply_basics().await?;
    let id = "pki01";
    f.credential_secret(id).await?;
    f.cluster(id).await?;
    f.control_plane(id, "cp001", &["eu-central-1a"], 1).await?;
    f.node_pool(id, "np001", &["eu-central-1a"], 1, 2).await?;
    let started = std::time::Instant::now();
    f.start_operator().await?;
    let clusters: Api<AWSCluster> = Api::namespaced(f.client.clone(), NS);
    let ready = eventually(300, "the cluster to be Ready", || async {
        let c = clusters.get(id).await?;
        Ok(ready(c.status.as_ref().map(|s| &s.conditions)).then_some(()))
    })
    .await;
    if let Err(e) = ready {
        anyhow::bail!("{e}\n{}", dump(&f.client).await);
    }
    println!("Ready on issued certificates after {:?}", started.elapsed());

    // Two CAs, five certificates, the encryption-provider config, the management cluster's
    // kubeconfig and the service-account issuer's key pair (Release 20 has IAM roles for service
    // accounts), all issued here.
    let secrets = secrets_of(&f, id).await?;
    let mut names: Vec<String> = secrets.iter().filter_map(|s| s.metadata.name.clone()).collect();
    names.sort();
    let mut want: Vec<String> = pki::CERTIFICATES.iter().map(|c| format!("{id}-{c}")).collect();
    want.extend([
        format!("{id}-cluster-ca"),
        format!("{id}-etcd-ca"),
        format!("{id}-encryption-provider-config"),
        format!("{id}-kubeconfig"),
        format!("{id}-service-account-v2"),
    ]);
    want.sort();
    assert_eq!(names, want);
    assert!(secrets.iter().all(labelled_issued), "every Secret carries the issued-by label");

    // Each certificate passes the checks of its role, for the names the node configs use, and
    // was signed by the cluster's own CA of its kind.
    let cluster = clusters.get(id).await?;
    let profiles = pki::leaf_profiles(&aws_operator::controllers::cluster::certificates::names(
        &cluster,
        aws_operator::config::DEFAULT_SERVICE_CIDR,
    ))?;
    let by_name = |name: String| secrets.iter().find(|s| s.metadata.name.as_deref() == Some(name.as_str()));
    for profile in &profiles {
        let secret = by_name(format!("{id}-{}", profile.name)).expect("issued");
        let files = pki::secret::certificate_files(secret).expect("ca, crt and key");
        pki::check(&files, profile, SystemTime::now()).map_err(|e| anyhow::anyhow!("{}: {e}", profile.name))?;
        let ca = by_name(format!("{id}-{}-ca", profile.authority.as_str())).expect("its CA");
        assert_eq!(files.ca, text(ca, "crt"), "{} carries its CA", profile.name);
    }
    let api = pki::secret::certificate_files(by_name(format!("{id}-api")).expect("api")).expect("files");
    let info = pki::inspect(&api.crt).map_err(|e| anyhow::anyhow!("{e}"))?;
    for name in [
        format!("api.{id}.k8s.gauss.eu-central-1.aws.gigantic.io"),
        format!("internal-api.{id}.k8s.gauss.eu-central-1.aws.gigantic.io"),
        "kubernetes.default.svc.cluster.local".to_string(),
    ] {
        assert!(info.dns_names.contains(&name), "the API certificate names {name}: {:?}", info.dns_names);
    }
    assert!(info.ip_addresses.contains(&"172.31.0.1".parse()?), "the kubernetes Service address");

    // One Normal event names what was issued.
    let events = events_of(&f, id).await?;
    let issued: Vec<&Event> = events.iter().filter(|e| e.reason.as_deref() == Some("CertificatesIssued")).collect();
    assert!(!issued.is_empty(), "a CertificatesIssued event");
    assert!(issued.iter().all(|e| e.type_.as_deref() == Some("Normal")));
    assert!(issued.iter().any(|e| e.note.as_deref().unwrap_or_default().contains(&format!("{id}-cluster-ca"))));

    // A restarted operator reads them again and writes none of them.
    let versions = |secrets: &[Secret]| -> Vec<(Option<String>, Option<String>)> {
        secrets.iter().map(|s| (s.metadata.name.clone(), s.metadata.resource_version.clone())).collect()
    };
    let before = versions(&secrets);
    f.kill_operator().await;
    f.start_operator().await?;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let after = secrets_of(&f, id).await?;
    let data = |secrets: &[Secret]| -> Vec<(Option<String>, Option<_>)> {
        secrets.iter().map(|s| (s.metadata.name.clone(), s.data.clone())).collect()
    };
    assert_eq!(data(&after), data(&secrets), "the restarted operator issued nothing again");
    assert_eq!(versions(&after), before, "and wrote none of the Secrets");

    // Key material stays in the Secrets.
    let material = key_material(&secrets);
    let status = serde_json::to_string(&clusters.get(id).await?.status)?;
    assert_no_key_material(&material, "the AWSCluster's status", &status);
    let all_events: Api<Event> = Api::namespaced(f.client.clone(), NS);
    let notes = serde_json::to_string(&all_events.list(&ListParams::default()).await?.items)?;
    assert_no_key_material(&material, "the events", &notes);
    let logged = log.text();
    assert!(logged.contains(id), "the operator's log was captured");
    assert_no_key_material(&material, "the operator's log", &logged);
    f.kill_operator().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_certificate_someone_else_wrote_is_certificate_invalid_and_is_not_replaced() -> anyhow::Result<()> {
    let log = Log::capture();
    let mut f = Fixture::start().await?;
    f.apply_basics().await?;
    let id = "pki02";
    f.credential_secret(id).await?;
    f.cluster(id).await?;
    // The cluster's certificates as cert-operator writes them (no issued-by label, no CA
    // Secrets), but the api Secret holds the worker's key.
    let clusters: Api<AWSCluster> = Api::namespaced(f.client.clone(), NS);
    let cluster = clusters.get(id).await?;
    let names =
        aws_operator::controllers::cluster::certificates::names(&cluster, aws_operator::config::DEFAULT_SERVICE_CIDR);
    let issued = pki::issue_cluster_pki(&names, &pki::IssueOptions::at(SystemTime::now()))?;
    let worker_key = issued.certificates.iter().find(|c| c.name == "worker").expect("worker").key.clone();
    let secrets: Api<Secret> = Api::namespaced(f.client.clone(), NS);
    for cert in &issued.certificates {
        let mut cert = cert.clone();
        if cert.name == "api" {
            cert.key = worker_key.clone();
        }
        let mut secret = pki::secret::certificate_secret(NS, id, &cert);
        secret.metadata.labels.as_mut().map(|l| l.remove("pki.giantswarm.io/issued-by"));
        secrets.create(&PostParams::default(), &secret).await?;
    }
    let broken_before = secrets.get(&format!("{id}-api")).await?;
    f.start_operator().await?;

    let message = eventually(60, "Ready=False CertificateInvalid", || async {
        let c = clusters.get(id).await?;
        Ok(c.status
            .and_then(|s| s.conditions.into_iter().find(|c| c.type_ == "Ready"))
            .and_then(|c| (c.status == "False" && c.reason == "CertificateInvalid").then_some(c.message)))
    })
    .await;
    let message = match message {
        Ok(m) => m,
        Err(e) => anyhow::bail!("{e}\n{}", dump(&f.client).await),
    };
    // The Secret, the field and the fix.
    for part in [
        format!("Secret {NS}/{id}-api"),
        "key \"key\"".to_string(),
        "store the certificate with its own key".to_string(),
        "does not replace a Secret it did not issue".to_string(),
    ] {
        assert!(message.contains(&part), "{part:?} in {message:?}");
    }
    let warning = eventually(30, "a CertificateInvalid Warning event", || async {
        Ok(events_of(&f, id)
            .await?
            .into_iter()
            .find(|e| e.type_.as_deref() == Some("Warning") && e.reason.as_deref() == Some("CertificateInvalid")))
    })
    .await?;
    assert!(warning.note.unwrap_or_default().contains(&format!("{id}-api")), "the event names the Secret");

    // The operator keeps retrying and still replaces nothing: the broken Secret is as it was, no
    // CA was issued beside cert-operator's certificates, and nothing was built in AWS.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let broken_after = secrets.get(&format!("{id}-api")).await?;
    assert_eq!(broken_after.data, broken_before.data, "the broken Secret is left as it is");
    assert_eq!(broken_after.metadata.labels, broken_before.metadata.labels);
    let now = secrets_of(&f, id).await?;
    assert!(
        !now.iter().any(|s| s.metadata.name.as_deref().is_some_and(|n| n.ends_with("-ca"))),
        "no CA is issued for a cluster that brings its own certificates"
    );
    let cp = f.control_plane_clients().await?;
    assert!(cp.cfn.describe_all().await?.is_empty(), "no stack before the certificates are valid");

    // Key material stays in the Secrets.
    let material = key_material(&now);
    let status = serde_json::to_string(&clusters.get(id).await?.status)?;
    assert_no_key_material(&material, "the AWSCluster's status", &status);
    let all_events: Api<Event> = Api::namespaced(f.client.clone(), NS);
    let notes = serde_json::to_string(&all_events.list(&ListParams::default()).await?.items)?;
    assert_no_key_material(&material, "the events", &notes);
    let logged = log.text();
    assert!(logged.contains("CertificateInvalid"), "the operator logged the failure");
    assert_no_key_material(&material, "the operator's log", &logged);
    f.kill_operator().await;
    Ok(())
}

/// What must never change once written: each CA certificate and the encryption config.
fn never_replaced(secrets: &[Secret]) -> Vec<(String, String)> {
    secrets
        .iter()
        .filter_map(|s| {
            let name = s.metadata.name.clone()?;
            let key = if name.ends_with("-ca") {
                "crt"
            } else if name.ends_with("-encryption-provider-config") {
                "encryption"
            } else if name.ends_with("-service-account-v2") {
                "pub"
            } else {
                return None;
            };
            Some((name, text(s, key)))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_ten_times_during_issuance_each_cluster_ends_with_one_ca_of_each_kind_and_one_key() -> anyhow::Result<()>
{
    let mut f = Fixture::start().await?;
    f.apply_basics().await?;
    let ids: Vec<String> = (1..=6).map(|n| format!("pkk{n:02}")).collect();
    for id in &ids {
        f.credential_secret(id).await?;
        f.cluster(id).await?;
    }
    let all_secrets: Api<Secret> = Api::namespaced(f.client.clone(), NS);
    let issued = || async {
        let listed = all_secrets.list(&ListParams::default().labels("pki.giantswarm.io/issued-by")).await?;
        anyhow::Ok(listed.items.len())
    };
    // The first CA and key each cluster got: a restart must read them, never write others.
    let mut first_seen: std::collections::BTreeMap<String, String> = Default::default();
    let mut kills = Vec::new();
    for round in 0..10 {
        // Killed at varied points of issuance: once 1 to 4 more Secrets are stored than at the
        // start (or after two seconds, if the operator issues nothing more by then).
        let at_start = issued().await?;
        f.start_operator().await?;
        let started = std::time::Instant::now();
        let wanted = at_start + 1 + round % 4;
        while issued().await? < wanted && started.elapsed() < Duration::from_secs(2) {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        f.kill_operator().await;
        let mut stored = 0;
        for id in &ids {
            let secrets = secrets_of(&f, id).await?;
            stored += secrets.len();
            for (name, value) in never_replaced(&secrets) {
                let first = first_seen.entry(name.clone()).or_insert_with(|| value.clone());
                assert!(*first == value, "{name} was written a second time after a restart (kills: {kills:?})");
            }
        }
        kills.push((started.elapsed().as_millis(), stored));
    }
    println!("killed after (ms, Secrets stored by then): {kills:?}");
    // Two CAs, the kubeconfig, the encryption key and the service-account issuer's key pair.
    let per_cluster = pki::CERTIFICATES.len() + 5;
    let during = kills.iter().filter(|(_, stored)| *stored > 0 && *stored < ids.len() * per_cluster).count();
    assert!(during >= 5, "at least five kills came during issuance: {kills:?}");

    f.start_operator().await?;
    for id in &ids {
        eventually(120, "the cluster's PKI to be complete", || async {
            Ok((secrets_of(&f, id).await?.len() == per_cluster).then_some(()))
        })
        .await?;
        let secrets = secrets_of(&f, id).await?;
        let by_name = |name: String| secrets.iter().find(|s| s.metadata.name.as_deref() == Some(name.as_str()));
        let authorities: Vec<&Secret> = secrets
            .iter()
            .filter(|s| {
                s.metadata.labels.as_ref().is_some_and(|l| l.contains_key("giantswarm.io/certificate-authority"))
            })
            .collect();
        assert_eq!(authorities.len(), 2, "{id}: one cluster CA and one etcd CA");
        let keys = secrets.iter().filter(|s| s.data.as_ref().is_some_and(|d| d.contains_key("encryption"))).count();
        assert_eq!(keys, 1, "{id}: one encryption key");
        for (name, value) in never_replaced(&secrets) {
            // (Compared, not printed: the values are keys.)
            let first = first_seen.get(&name).unwrap_or(&value);
            assert!(*first == value, "{name} is not the one first written");
        }
        // Every certificate is of its cluster's one CA of its kind.
        let cluster = Api::<AWSCluster>::namespaced(f.client.clone(), NS).get(id).await?;
        let names = aws_operator::controllers::cluster::certificates::names(
            &cluster,
            aws_operator::config::DEFAULT_SERVICE_CIDR,
        );
        for profile in pki::leaf_profiles(&names)? {
            let files = pki::secret::certificate_files(by_name(format!("{id}-{}", profile.name)).expect("issued"))
                .expect("ca, crt and key");
            let ca = by_name(format!("{id}-{}-ca", profile.authority.as_str())).expect("its CA");
            assert_eq!(files.ca, text(ca, "crt"), "{id}: {} is of its CA", profile.name);
            pki::check(&files, &profile, SystemTime::now())
                .map_err(|e| anyhow::anyhow!("{id} {}: {e}", profile.name))?;
        }
        let (_, kubeconfig) = pki::kubeconfig::read(by_name(format!("{id}-kubeconfig")).expect("kubeconfig"))
            .expect("the kubeconfig embeds its certificates");
        assert_eq!(kubeconfig.ca, text(by_name(format!("{id}-cluster-ca")).expect("CA"), "crt"), "{id}: kubeconfig");
    }
    f.kill_operator().await;
    Ok(())
}

//! The operator's plan for a cluster's Secrets, applied to an in-memory store with the API
//! server's create and update semantics (a create of an existing name conflicts; an update with
//! a stale resourceVersion conflicts).

mod support;

use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use pki::ensure::{EncryptionFormat, EnsurePlan, EnsureRequest, plan};
use pki::secret::{self, issued_here};
use pki::{CertificateProblem, IssueOptions, Lifetimes, RenewalPolicy, Serials};
use support::{aws_names, now};

fn request<'a>(names: &'a pki::ClusterNames, at: std::time::SystemTime, format: EncryptionFormat) -> EnsureRequest<'a> {
    EnsureRequest {
        namespace: "org-umbra",
        names,
        encryption: format,
        options: IssueOptions { now: at, lifetimes: Lifetimes::default(), serials: Serials::Random },
        renewal: RenewalPolicy::default(),
        kubeconfig_server: Some(format!("https://{}", names.api_domain)),
        service_account_v2: false,
    }
}

#[derive(Default)]
struct Store {
    secrets: Vec<Secret>,
    version: u64,
    writes: usize,
}

impl Store {
    fn find(&self, name: &str) -> Option<usize> {
        self.secrets.iter().position(|s| s.metadata.name.as_deref() == Some(name))
    }

    /// Apply `plan`, stopping (as a killed process would) after `budget` writes.
    fn apply(&mut self, plan: &EnsurePlan, budget: usize) {
        for secret in plan.create.iter().chain(&plan.replace).take(budget) {
            let name = secret.metadata.name.clone().expect("name");
            self.version += 1;
            let mut stored = secret.clone();
            stored.metadata.resource_version = Some(self.version.to_string());
            match (self.find(&name), &secret.metadata.resource_version) {
                (None, None) => self.secrets.push(stored),
                (Some(_), None) => {} // 409 AlreadyExists: another run created it
                (Some(i), Some(version)) if self.secrets[i].metadata.resource_version.as_ref() == Some(version) => {
                    self.secrets[i] = stored
                }
                _ => {} // 409 Conflict: stale
            }
            self.writes += 1;
        }
    }

    fn named(&self, name: &str) -> &Secret {
        &self.secrets[self.find(name).unwrap_or_else(|| panic!("{name} is missing"))]
    }

    fn data(&self, name: &str, key: &str) -> String {
        String::from_utf8(self.named(name).data.as_ref().expect("data")[key].0.clone()).expect("utf-8")
    }
}

const ALL: [&str; 9] = [
    "al9qy-cluster-ca",
    "al9qy-etcd-ca",
    "al9qy-api",
    "al9qy-calico-etcd-client",
    "al9qy-etcd",
    "al9qy-service-account",
    "al9qy-worker",
    "al9qy-kubeconfig",
    "al9qy-encryption-provider-config",
];

/// The Secret key that changes when `name` is issued again.
fn key_of(name: &str) -> &'static str {
    match name {
        n if n.ends_with("kubeconfig") => "value",
        n if n.ends_with("config") => "encryption",
        _ => "crt",
    }
}

fn names_of(secrets: &[Secret]) -> Vec<&str> {
    secrets.iter().filter_map(|s| s.metadata.name.as_deref()).collect()
}

/// Every leaf names the CA that its CA Secret holds.
fn assert_consistent(store: &Store) {
    for (leaf, ca) in [
        ("al9qy-api", "al9qy-cluster-ca"),
        ("al9qy-worker", "al9qy-cluster-ca"),
        ("al9qy-service-account", "al9qy-cluster-ca"),
        ("al9qy-etcd", "al9qy-etcd-ca"),
        ("al9qy-calico-etcd-client", "al9qy-etcd-ca"),
    ] {
        assert_eq!(store.data(leaf, "ca"), store.data(ca, "crt"), "{leaf} is not of {ca}");
    }
    let (_, files) = pki::kubeconfig::read(store.named("al9qy-kubeconfig")).expect("our kubeconfig");
    assert_eq!(files.ca, store.data("al9qy-cluster-ca", "crt"), "the kubeconfig is not of the cluster CA");
}

#[test]
fn a_cluster_without_secrets_gets_its_cas_then_its_certificates_then_its_key() {
    let names = aws_names();
    let plan = plan(&[], &request(&names, now(), EncryptionFormat::ProviderConfig)).expect("plan");
    assert_eq!(names_of(&plan.create), ALL);
    assert!(plan.replace.is_empty() && plan.foreign_problems.is_empty());
    assert!(plan.create.iter().all(issued_here));
    let printed = format!("{plan:?}");
    assert!(!printed.contains("PRIVATE KEY") && !printed.contains("aescbc"), "{printed}");

    let mut store = Store::default();
    store.apply(&plan, usize::MAX);
    assert_consistent(&store);
    let again =
        pki::ensure::plan(&store.secrets, &request(&names, now(), EncryptionFormat::ProviderConfig)).expect("plan");
    assert!(again.is_empty(), "{again:?}");
    // Due at two thirds of the leaves' validity: from five minutes before issuance to a year
    // after it.
    let due = now() - Duration::from_secs(300) + Duration::from_secs(365 * 86_400 + 300) * 2 / 3;
    assert_eq!(again.next_renewal, Some(due));
}

#[test]
fn a_process_killed_at_any_write_leaves_exactly_one_ca_of_each_kind_and_one_key() {
    let names = aws_names();
    for kill_after in 0..ALL.len() {
        let mut store = Store::default();
        // Killed after `kill_after` writes, restarted, killed again after one more, restarted.
        let first = plan(&store.secrets, &request(&names, now(), EncryptionFormat::ProviderConfig)).expect("plan");
        store.apply(&first, kill_after);
        let second = plan(&store.secrets, &request(&names, now(), EncryptionFormat::ProviderConfig)).expect("plan");
        store.apply(&second, 1);
        let third = plan(&store.secrets, &request(&names, now(), EncryptionFormat::ProviderConfig)).expect("plan");
        store.apply(&third, usize::MAX);

        let mut stored = names_of(&store.secrets);
        stored.sort();
        let mut all = ALL.to_vec();
        all.sort();
        assert_eq!(stored, all, "killed after {kill_after} writes");
        assert_consistent(&store);
        let settled = plan(&store.secrets, &request(&names, now(), EncryptionFormat::ProviderConfig)).expect("plan");
        assert!(settled.is_empty(), "killed after {kill_after}: {settled:?}");
        // A CA written before the kill is the one that stays.
        if kill_after >= 1 {
            let first_ca = &first.create[0].data.as_ref().expect("data")["crt"].0;
            assert_eq!(
                store.data("al9qy-cluster-ca", "crt").as_bytes(),
                first_ca.as_slice(),
                "killed after {kill_after}"
            );
        }
    }
}

#[test]
fn certificates_issued_here_are_renewed_at_two_thirds_and_the_cas_and_key_stay() {
    let names = aws_names();
    let mut store = Store::default();
    store.apply(&plan(&[], &request(&names, now(), EncryptionFormat::ProviderConfig)).expect("plan"), usize::MAX);
    let before: Vec<(String, String)> = ALL.iter().map(|n| (n.to_string(), store.data(n, key_of(n)))).collect();

    let early = plan(
        &store.secrets,
        &request(&names, now() + Duration::from_secs(240 * 86_400), EncryptionFormat::ProviderConfig),
    )
    .expect("plan");
    assert!(early.is_empty(), "{early:?}");

    let later = now() + Duration::from_secs(245 * 86_400);
    let renew = plan(&store.secrets, &request(&names, later, EncryptionFormat::ProviderConfig)).expect("plan");
    assert!(renew.create.is_empty(), "{renew:?}");
    assert_eq!(names_of(&renew.replace), &ALL[2..8]);
    store.apply(&renew, usize::MAX);
    for (name, old) in &before {
        let unchanged = name.ends_with("-ca") || name.ends_with("provider-config");
        assert_eq!(&store.data(name, key_of(name)) == old, unchanged, "{name}");
    }
    assert_consistent(&store);
    assert!(plan(&store.secrets, &request(&names, later, EncryptionFormat::ProviderConfig)).expect("plan").is_empty());
}

#[test]
fn secrets_someone_else_wrote_are_never_written_and_their_problems_are_named() {
    let names = aws_names();
    let mut store = Store::default();
    store.apply(&plan(&[], &request(&names, now(), EncryptionFormat::ProviderConfig)).expect("plan"), usize::MAX);
    // cert-operator's api Secret (no issued-by label) whose key is the worker's; and an
    // encryption config from the encryption-provider operator.
    let worker_key = store.named("al9qy-worker").data.as_ref().expect("data")["key"].clone();
    for name in ["al9qy-api", "al9qy-encryption-provider-config"] {
        let i = store.find(name).expect("stored");
        store.secrets[i].metadata.labels.as_mut().expect("labels").remove(secret::ISSUED_BY_LABEL);
    }
    let i = store.find("al9qy-api").expect("api");
    store.secrets[i].data.as_mut().expect("data").insert("key".into(), worker_key);

    let later = now() + Duration::from_secs(300 * 86_400);
    let plan = plan(&store.secrets, &request(&names, later, EncryptionFormat::ProviderConfig)).expect("plan");
    assert!(!names_of(&plan.replace).contains(&"al9qy-api"), "{plan:?}");
    assert!(!names_of(&plan.create).iter().any(|n| n.contains("encryption")), "{plan:?}");
    assert_eq!(plan.foreign_problems.len(), 1, "{plan:?}");
    let problem = &plan.foreign_problems[0];
    assert_eq!((problem.secret.as_str(), problem.certificate.as_str()), ("al9qy-api", "api"));
    assert_eq!(problem.problem, CertificateProblem::KeyMismatch);
    // The others, ours, are renewed as usual.
    assert_eq!(
        names_of(&plan.replace),
        ["al9qy-calico-etcd-client", "al9qy-etcd", "al9qy-service-account", "al9qy-worker"]
    );
}

#[test]
fn a_replaced_ca_reissues_every_certificate_it_signs_and_an_unreadable_one_stops_everything() {
    let names = aws_names();
    let mut store = Store::default();
    store.apply(&plan(&[], &request(&names, now(), EncryptionFormat::ProviderConfig)).expect("plan"), usize::MAX);
    // The etcd CA Secret deleted: a new etcd CA, and both etcd leaves from it; the cluster CA's
    // leaves stay.
    let i = store.find("al9qy-etcd-ca").expect("etcd ca");
    store.secrets.remove(i);
    let plan1 = plan(&store.secrets, &request(&names, now(), EncryptionFormat::ProviderConfig)).expect("plan");
    assert_eq!(names_of(&plan1.create), ["al9qy-etcd-ca"], "the kubeconfig is of the cluster CA: it stays");
    assert_eq!(names_of(&plan1.replace), ["al9qy-calico-etcd-client", "al9qy-etcd"]);
    store.apply(&plan1, usize::MAX);
    assert_consistent(&store);

    let i = store.find("al9qy-cluster-ca").expect("cluster ca");
    store.secrets[i].data.as_mut().expect("data").insert("key".into(), k8s_openapi::ByteString(b"garbage".to_vec()));
    let err =
        plan(&store.secrets, &request(&names, now(), EncryptionFormat::ProviderConfig)).expect_err("unreadable CA");
    assert_eq!(err, pki::PkiError::Authority { authority: "cluster", problem: CertificateProblem::UnreadableKey });
}

#[test]
fn kvm_clusters_get_the_randomkey_secret_once() {
    let names = aws_names();
    let first = plan(&[], &request(&names, now(), EncryptionFormat::RandomKey)).expect("plan");
    let key = first.create.last().expect("key");
    assert_eq!(key.metadata.name.as_deref(), Some("al9qy-encryption"));
    let labels = key.metadata.labels.as_ref().expect("labels");
    assert_eq!(labels.get("giantswarm.io/randomkey").map(String::as_str), Some("encryption"));
    let value = String::from_utf8(key.data.as_ref().expect("data")["encryption"].0.clone()).expect("utf-8");
    assert_eq!(value.len(), 44, "32 bytes, base64");

    // A randomkey Secret of another name (the randomkeys producer's) counts as the key.
    let mut theirs = key.clone();
    theirs.metadata.name = Some("al9qy-randomkeys".into());
    theirs.metadata.labels.as_mut().expect("labels").remove(secret::ISSUED_BY_LABEL);
    let again = plan(&[theirs], &request(&names, now(), EncryptionFormat::RandomKey)).expect("plan");
    assert!(!names_of(&again.create).contains(&"al9qy-encryption"), "{again:?}");
}

#[test]
fn a_cluster_that_brings_its_own_certificates_gets_none_issued() {
    let names = aws_names();
    // cert-operator's api certificate, from a PKI of its own.
    let theirs = pki::issue_cluster_pki(&names, &IssueOptions::at(now())).expect("theirs");
    let mut api = secret::certificate_secret("org-umbra", "al9qy", theirs.certificate("api").expect("api"));
    api.metadata.labels.as_mut().expect("labels").remove(secret::ISSUED_BY_LABEL);
    let plan = plan(&[api.clone()], &request(&names, now(), EncryptionFormat::ProviderConfig)).expect("plan");
    assert_eq!(names_of(&plan.create), ["al9qy-encryption-provider-config"], "only the key: {plan:?}");
    assert_eq!(plan.missing, ["calico-etcd-client", "etcd", "service-account", "worker"]);
    assert!(plan.foreign_problems.is_empty(), "{plan:?}");

    // A placeholder is reported, and still nothing is issued beside it.
    api.data.as_mut().expect("data").insert("crt".into(), k8s_openapi::ByteString(b"api crt".to_vec()));
    let plan = pki::ensure::plan(&[api], &request(&names, now(), EncryptionFormat::ProviderConfig)).expect("plan");
    assert_eq!(plan.foreign_problems.len(), 1);
    assert_eq!(plan.foreign_problems[0].problem, CertificateProblem::Unreadable { field: "crt" });
    assert_eq!(plan.missing.len(), 4);
    assert!(!names_of(&plan.create).iter().any(|n| n.ends_with("-ca")), "{plan:?}");
}

#[test]
fn the_management_kubeconfig_is_a_client_of_the_cluster_ca_in_the_narrow_group_and_is_kept_current() {
    let names = aws_names();
    let mut store = Store::default();
    store.apply(&plan(&[], &request(&names, now(), EncryptionFormat::ProviderConfig)).expect("plan"), usize::MAX);
    let secret = store.named("al9qy-kubeconfig").clone();
    let labels = secret.metadata.labels.as_ref().expect("labels");
    assert_eq!(labels.get("giantswarm.io/cluster").map(String::as_str), Some("al9qy"));
    assert!(issued_here(&secret));
    assert_eq!(secret.data.as_ref().expect("data").keys().collect::<Vec<_>>(), ["value"], "Cluster API's key");
    let (server, files) = pki::kubeconfig::read(&secret).expect("readable");
    assert_eq!(server, format!("https://{}", names.api_domain));
    let info = pki::check(&files, &pki::kubeconfig::profile(), now()).expect("passes its checks");
    assert_eq!(info.common_name.as_deref(), Some(ignition::access::USER));
    assert_eq!(info.organizations, [ignition::access::GROUP], "never system:masters");
    assert!(info.dns_names.is_empty() && info.ip_addresses.is_empty(), "a client names no host");

    // Another API server: issued again, in place.
    let mut moved = request(&names, now(), EncryptionFormat::ProviderConfig);
    moved.kubeconfig_server = Some("https://api.al9qy.k8s.example.org".into());
    let again = plan(&store.secrets, &moved).expect("plan");
    assert!(again.create.is_empty(), "{again:?}");
    assert_eq!(names_of(&again.replace), ["al9qy-kubeconfig"]);
    store.apply(&again, usize::MAX);
    assert_eq!(
        pki::kubeconfig::read(store.named("al9qy-kubeconfig")).expect("read").0,
        "https://api.al9qy.k8s.example.org"
    );
    assert!(plan(&store.secrets, &moved).expect("plan").is_empty());

    // Someone else's (Cluster API's, without labels): used as it is, never written.
    let i = store.find("al9qy-kubeconfig").expect("stored");
    store.secrets[i].metadata.labels = None;
    let theirs = plan(
        &store.secrets,
        &request(&names, now() + Duration::from_secs(300 * 86_400), EncryptionFormat::ProviderConfig),
    )
    .expect("plan");
    assert!(
        !names_of(&theirs.replace).contains(&"al9qy-kubeconfig")
            && !names_of(&theirs.create).contains(&"al9qy-kubeconfig"),
        "{theirs:?}"
    );

    // None asked for: none issued.
    let mut without = request(&names, now(), EncryptionFormat::ProviderConfig);
    without.kubeconfig_server = None;
    assert!(!names_of(&plan(&[], &without).expect("plan").create).contains(&"al9qy-kubeconfig"));
}

#[test]
fn the_irsa_signing_key_is_generated_once_and_one_someone_else_wrote_is_kept() {
    let names = aws_names();
    let irsa = |at| EnsureRequest { service_account_v2: true, ..request(&names, at, EncryptionFormat::ProviderConfig) };
    let without = plan(&[], &request(&names, now(), EncryptionFormat::ProviderConfig)).expect("plan");
    assert!(!names_of(&without.create).contains(&"al9qy-service-account-v2"), "only for clusters with IRSA");

    let first = plan(&[], &irsa(now())).expect("plan");
    assert_eq!(names_of(&first.create).last(), Some(&"al9qy-encryption-provider-config"));
    assert!(names_of(&first.create).contains(&"al9qy-service-account-v2"));
    let mut store = Store::default();
    store.apply(&first, usize::MAX);
    let public = store.data("al9qy-service-account-v2", "pub");
    let jwk = pki::service_account_v2::public_jwk(&public).expect("the public key is publishable");
    assert_eq!(jwk.algorithm, "ES256");
    assert!(store.data("al9qy-service-account-v2", "key").starts_with("-----BEGIN PRIVATE KEY-----"));
    assert!(!format!("{first:?}").contains("PRIVATE KEY"));

    // A year later nothing is renewed that the key signs: it stays.
    let later = plan(&store.secrets, &irsa(now() + Duration::from_secs(400 * 86_400))).expect("plan");
    assert!(!names_of(&later.create).contains(&"al9qy-service-account-v2"));
    assert!(!names_of(&later.replace).contains(&"al9qy-service-account-v2"));

    // The original's Secret has no label at all: found by name and kept as it is.
    let mut foreign = store.named("al9qy-service-account-v2").clone();
    foreign.metadata.labels = None;
    let others: Vec<Secret> = store
        .secrets
        .iter()
        .filter(|s| s.metadata.name.as_deref() != Some("al9qy-service-account-v2"))
        .cloned()
        .collect();
    let with_foreign = [others, vec![foreign]].concat();
    let kept = plan(&with_foreign, &irsa(now())).expect("plan");
    assert!(kept.is_empty(), "{kept:?}");
}

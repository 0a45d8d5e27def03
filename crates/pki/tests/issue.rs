//! A cluster's PKI, read back with x509-parser: the names, usages, validity and serials of every
//! certificate; the Secrets in cert-operator's format; renewal and the checks of Secrets that
//! someone else wrote.

mod support;

use std::net::IpAddr;
use std::time::{Duration, SystemTime};

use pki::secret::{self, ISSUED_BY, ISSUED_BY_LABEL};
use pki::{
    Authority, CertificateFiles, CertificateProblem, Renewal, RenewalPolicy, Usage, check, inspect, issue_cluster_pki,
    leaf_profiles, renewal,
};
use support::{aws_names, fixed_options, now};

fn ip(s: &str) -> IpAddr {
    s.parse().expect("ip")
}

#[test]
fn every_certificate_has_the_names_usages_and_validity_of_its_role() {
    let names = aws_names();
    let pki = issue_cluster_pki(&names, &fixed_options()).expect("issue");
    let day = Duration::from_secs(86_400);
    let start = now() - Duration::from_secs(300);

    for (ca, cn, serial) in [(&pki.cluster_ca, "al9qy cluster CA", "64"), (&pki.etcd_ca, "al9qy etcd CA", "65")] {
        let info = inspect(ca.certificate_pem()).expect("CA");
        assert!(info.is_ca, "{cn}");
        assert_eq!(info.common_name.as_deref(), Some(cn));
        assert_eq!((info.not_before, info.not_after), (start, now() + day * 3650), "{cn}");
        assert_eq!(info.serial, serial, "{cn}");
    }
    assert_ne!(pki.cluster_ca.certificate_pem(), pki.etcd_ca.certificate_pem());

    let api = inspect(&pki.certificate("api").expect("api").crt_pem).expect("api");
    assert_eq!(
        api.dns_names,
        [
            "api.al9qy.k8s.gauss.eu-central-1.aws.gigantic.io",
            "internal-api.al9qy.k8s.gauss.eu-central-1.aws.gigantic.io",
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
            "localhost",
        ]
    );
    assert_eq!(api.ip_addresses, [ip("172.31.0.1"), ip("127.0.0.1")]);
    assert_eq!(api.organizations, ["system:masters"]);
    assert!(api.server_auth && api.client_auth && !api.is_ca);

    let etcd = inspect(&pki.certificate("etcd").expect("etcd").crt_pem).expect("etcd");
    assert_eq!(
        etcd.dns_names,
        [
            "etcd.al9qy.k8s.gauss.eu-central-1.aws.gigantic.io",
            "etcd0.al9qy.k8s.gauss.eu-central-1.aws.gigantic.io",
            "etcd1.al9qy.k8s.gauss.eu-central-1.aws.gigantic.io",
            "localhost",
        ]
    );
    assert_eq!(etcd.ip_addresses, [ip("127.0.0.1")]);
    assert!(etcd.server_auth && etcd.client_auth);

    let worker = inspect(&pki.certificate("worker").expect("worker").crt_pem).expect("worker");
    assert_eq!(worker.organizations, ["system:nodes"]);
    assert!(worker.server_auth && worker.client_auth);

    for client_only in ["calico-etcd-client", "service-account"] {
        let info = inspect(&pki.certificate(client_only).expect(client_only).crt_pem).expect(client_only);
        assert!(info.client_auth && !info.server_auth, "{client_only}");
        assert!(info.dns_names.is_empty(), "{client_only}");
    }

    // The leaves take the serials after the CAs', in CERTIFICATES order, and live one year.
    assert_eq!(pki.certificates.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(), pki::CERTIFICATES);
    for (index, cert) in pki.certificates.iter().enumerate() {
        let info = inspect(&cert.crt_pem).expect("leaf");
        assert_eq!(info.serial, format!("{:x}", 102 + index), "{}", cert.name);
        assert_eq!((info.not_before, info.not_after), (start, now() + day * 365), "{}", cert.name);
    }

    // Each leaf passes every check against its own profile and names its own CA.
    for profile in leaf_profiles(&names).expect("profiles") {
        let cert = pki.certificate(&profile.name).expect("issued");
        assert_eq!(cert.ca_pem, pki.authority(profile.authority).certificate_pem(), "{}", profile.name);
        let files = CertificateFiles { ca: cert.ca_pem.clone(), crt: cert.crt_pem.clone(), key: cert.key.clone() };
        check(&files, &profile, now()).unwrap_or_else(|e| panic!("{}: {e}", profile.name));
    }
}

#[test]
fn the_etcd_certificates_come_from_the_etcd_ca_and_the_rest_from_the_cluster_ca() {
    let profiles = leaf_profiles(&aws_names()).expect("profiles");
    let by: Vec<(&str, Authority, Usage)> = profiles.iter().map(|p| (p.name.as_str(), p.authority, p.usage)).collect();
    assert_eq!(
        by,
        [
            ("api", Authority::Cluster, Usage::ServerAndClient),
            ("calico-etcd-client", Authority::Etcd, Usage::Client),
            ("etcd", Authority::Etcd, Usage::ServerAndClient),
            ("service-account", Authority::Cluster, Usage::Client),
            ("worker", Authority::Cluster, Usage::ServerAndClient),
        ]
    );
}

#[test]
fn the_secrets_have_cert_operators_names_labels_and_keys_and_are_marked_as_issued_here() {
    let pki = issue_cluster_pki(&aws_names(), &fixed_options()).expect("issue");
    let secrets = pki.secrets("org-umbra", "al9qy");
    let names: Vec<&str> = secrets.iter().filter_map(|s| s.metadata.name.as_deref()).collect();
    assert_eq!(
        names,
        [
            "al9qy-cluster-ca",
            "al9qy-etcd-ca",
            "al9qy-api",
            "al9qy-calico-etcd-client",
            "al9qy-etcd",
            "al9qy-service-account",
            "al9qy-worker"
        ]
    );
    for s in &secrets {
        assert_eq!(s.metadata.namespace.as_deref(), Some("org-umbra"));
        assert!(secret::issued_here(s), "{:?}", s.metadata.name);
        let labels = s.metadata.labels.as_ref().expect("labels");
        assert_eq!(labels.get("giantswarm.io/cluster").map(String::as_str), Some("al9qy"));
    }
    for s in &secrets[2..] {
        let labels = s.metadata.labels.as_ref().expect("labels");
        let cert = labels.get("giantswarm.io/certificate").expect("certificate label");
        assert_eq!(s.metadata.name.as_deref(), Some(format!("al9qy-{cert}").as_str()));
        let keys: Vec<&str> = s.data.as_ref().expect("data").keys().map(String::as_str).collect();
        assert_eq!(keys, ["ca", "crt", "key"]);
        let files = secret::certificate_files(s).expect("files");
        let issued = pki.certificate(cert).expect("issued");
        assert_eq!((files.ca.as_str(), files.crt.as_str()), (issued.ca_pem.as_str(), issued.crt_pem.as_str()));
        assert_eq!(files.key, issued.key);
    }
    // CA Secrets are not certificate Secrets: the operators' label search does not find them.
    for s in &secrets[..2] {
        assert!(!s.metadata.labels.as_ref().expect("labels").contains_key("giantswarm.io/certificate"));
    }
    // A Secret someone else wrote is not ours.
    let mut foreign = secrets[2].clone();
    foreign.metadata.labels.as_mut().expect("labels").remove(ISSUED_BY_LABEL);
    assert!(!secret::issued_here(&foreign));
    foreign.metadata.labels.as_mut().expect("labels").insert(ISSUED_BY_LABEL.into(), format!("{ISSUED_BY}-not"));
    assert!(!secret::issued_here(&foreign));
}

#[test]
fn a_ca_read_back_from_its_secret_issues_leaves_that_its_old_certificate_verifies() {
    let names = aws_names();
    let pki = issue_cluster_pki(&names, &fixed_options()).expect("issue");
    let secret = secret::authority_secret("org-umbra", "al9qy", &pki.etcd_ca);
    let etcd_ca = secret::authority_from_secret(&secret, Authority::Etcd).expect("read back");
    let profile = leaf_profiles(&names).expect("profiles").into_iter().find(|p| p.name == "etcd").expect("etcd");
    let renewed = etcd_ca.issue(&profile, &fixed_options(), 7).expect("renew");
    assert_ne!(renewed.key, pki.certificate("etcd").expect("etcd").key, "a renewed leaf has a new key");
    let files = CertificateFiles {
        ca: pki.etcd_ca.certificate_pem().to_string(),
        crt: renewed.crt_pem.clone(),
        key: renewed.key.clone(),
    };
    check(&files, &profile, now()).expect("the old CA certificate verifies the new leaf");

    // A CA Secret whose key is another CA's is refused.
    let mut mixed = secret.clone();
    let other = secret::authority_secret("org-umbra", "al9qy", &pki.cluster_ca);
    mixed.data.as_mut().expect("data").insert("key".into(), other.data.expect("data")["key"].clone());
    assert!(matches!(
        secret::authority_from_secret(&mixed, Authority::Etcd),
        Err(pki::PkiError::Authority { authority: "etcd", problem: CertificateProblem::KeyMismatch })
    ));
    // A leaf is not a CA.
    let leaf = pki.certificate("api").expect("api");
    assert!(matches!(
        pki::CertificateAuthority::from_pem(Authority::Cluster, &leaf.crt_pem, leaf.key.expose_pem()),
        Err(pki::PkiError::Authority { problem: CertificateProblem::NotACa, .. })
    ));
}

#[test]
fn bad_certificate_secrets_are_named_for_what_is_wrong() {
    let names = aws_names();
    let pki = issue_cluster_pki(&names, &fixed_options()).expect("issue");
    let profiles = leaf_profiles(&names).expect("profiles");
    let profile = |name: &str| profiles.iter().find(|p| p.name == name).expect("profile").clone();
    let files = |name: &str| {
        let c = pki.certificate(name).expect("issued");
        CertificateFiles { ca: c.ca_pem.clone(), crt: c.crt_pem.clone(), key: c.key.clone() }
    };

    let mut swapped = files("api");
    swapped.key = pki.certificate("worker").expect("worker").key.clone();
    assert_eq!(check(&swapped, &profile("api"), now()), Err(CertificateProblem::KeyMismatch));

    let mut wrong_ca = files("etcd");
    wrong_ca.ca = pki.cluster_ca.certificate_pem().to_string();
    assert_eq!(check(&wrong_ca, &profile("etcd"), now()), Err(CertificateProblem::NotIssuedByCa));

    let mut leaf_as_ca = files("api");
    leaf_as_ca.ca = files("worker").crt;
    assert_eq!(check(&leaf_as_ca, &profile("api"), now()), Err(CertificateProblem::NotACa));

    let late = now() + Duration::from_secs(366 * 86_400);
    assert!(matches!(check(&files("api"), &profile("api"), late), Err(CertificateProblem::Expired { .. })));
    let early = now() - Duration::from_secs(3_600);
    assert!(matches!(check(&files("api"), &profile("api"), early), Err(CertificateProblem::NotYetValid { .. })));

    let mut more_names = profile("api");
    more_names.dns_names.push("api.elsewhere.example.com".into());
    assert_eq!(
        check(&files("api"), &more_names, now()),
        Err(CertificateProblem::MissingName { name: "api.elsewhere.example.com".into() })
    );
    let mut more_ips = profile("api");
    more_ips.ip_addresses.push(ip("10.96.0.1"));
    assert_eq!(
        check(&files("api"), &more_ips, now()),
        Err(CertificateProblem::MissingName { name: "10.96.0.1".into() })
    );

    let mut as_server = profile("calico-etcd-client");
    as_server.usage = Usage::Server;
    assert_eq!(
        check(&files("calico-etcd-client"), &as_server, now()),
        Err(CertificateProblem::MissingUsage { usage: "serverAuth" })
    );

    let mut garbage = files("api");
    garbage.crt = "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END CERTIFICATE-----\n".into();
    assert_eq!(check(&garbage, &profile("api"), now()), Err(CertificateProblem::Unreadable { field: "crt" }));
    let mut no_key = files("api");
    no_key.key = pki::PrivateKey::from_pem("not a key");
    assert_eq!(check(&no_key, &profile("api"), now()), Err(CertificateProblem::UnreadableKey));

    // Messages name the Secret key and the fix, and carry no key material.
    let message = CertificateProblem::KeyMismatch.to_string();
    assert!(message.contains("\"key\"") && message.contains("\"crt\""), "{message}");
    for problem in
        [CertificateProblem::KeyMismatch, CertificateProblem::NotIssuedByCa, CertificateProblem::UnreadableKey]
    {
        assert!(!problem.to_string().contains("BEGIN"), "{problem}");
    }
}

#[test]
fn an_issued_certificate_is_due_for_renewal_at_two_thirds_of_its_year() {
    let pki = issue_cluster_pki(&aws_names(), &fixed_options()).expect("issue");
    let info = inspect(&pki.certificate("worker").expect("worker").crt_pem).expect("worker");
    let policy = RenewalPolicy::default();
    let lifetime = info.not_after.duration_since(info.not_before).expect("lifetime");
    let due = info.not_before + lifetime * 2 / 3;
    assert_eq!(renewal(&info, now(), &policy), Renewal::NotYet { renew_at: due });
    assert_eq!(renewal(&info, due - Duration::from_secs(1), &policy), Renewal::NotYet { renew_at: due });
    assert_eq!(renewal(&info, due, &policy), Renewal::Due);
    assert_eq!(renewal(&info, info.not_after, &policy), Renewal::Expired);
}

#[test]
fn private_keys_never_reach_debug_output() {
    let pki = issue_cluster_pki(&aws_names(), &fixed_options()).expect("issue");
    let printed = format!("{pki:?}");
    assert!(!printed.contains("PRIVATE KEY"), "{printed}");
    assert!(printed.contains("***"));
    for cert in &pki.certificates {
        assert!(cert.key.expose_pem().starts_with("-----BEGIN PRIVATE KEY-----"), "{}", cert.name);
        let files = CertificateFiles { ca: cert.ca_pem.clone(), crt: cert.crt_pem.clone(), key: cert.key.clone() };
        assert!(!format!("{files:?}").contains("PRIVATE KEY"));
    }
}

#[test]
fn names_that_cannot_be_issued_are_refused_naming_the_field() {
    let mut names = aws_names();
    names.etcd_domain = "etcd..example.com".into();
    let err = issue_cluster_pki(&names, &fixed_options()).expect_err("bad name");
    assert!(err.to_string().starts_with("etcd_domain \"etcd..example.com\""), "{err}");
    let mut names = aws_names();
    names.service_cidr = "172.31.0.0".into();
    assert!(matches!(issue_cluster_pki(&names, &fixed_options()), Err(pki::PkiError::ServiceCidr { .. })));
}

#[test]
fn random_serials_differ_between_issuances() {
    let options = pki::IssueOptions::at(SystemTime::now());
    let (a, b) =
        (issue_cluster_pki(&aws_names(), &options).expect("a"), issue_cluster_pki(&aws_names(), &options).expect("b"));
    let serial = |p: &pki::ClusterPki| inspect(p.cluster_ca.certificate_pem()).expect("ca").serial;
    assert_ne!(serial(&a), serial(&b));
    assert_eq!(serial(&a).len(), 32, "16 bytes");
}

//! Real TLS handshakes (rustls, the same verifier kube-rs and the operators use) with the issued
//! certificates: the API server's certificate validates for every name clients use, and each CA
//! accepts only the clients of its own role.

mod support;

use pki::{ClusterPki, issue_cluster_pki};
use support::{Client, Server, aws_names, fixed_options, handshake};

fn pki() -> ClusterPki {
    issue_cluster_pki(&aws_names(), &fixed_options()).expect("issue")
}

fn server<'a>(pki: &'a ClusterPki, name: &str, client_ca: Option<&'a str>) -> Server<'a> {
    let cert = pki.certificate(name).expect("issued");
    Server { crt: &cert.crt_pem, key: cert.key.expose_pem(), client_ca }
}

fn identity<'a>(pki: &'a ClusterPki, name: &str) -> Option<(&'a str, &'a str)> {
    let cert = pki.certificate(name).expect("issued");
    Some((cert.crt_pem.as_str(), cert.key.expose_pem()))
}

#[test]
fn the_api_servers_certificate_validates_for_every_name_clients_use() {
    let pki = pki();
    let cluster_ca = pki.cluster_ca.certificate_pem();
    let api = server(&pki, "api", None);
    for name in [
        "api.al9qy.k8s.gauss.eu-central-1.aws.gigantic.io",
        "internal-api.al9qy.k8s.gauss.eu-central-1.aws.gigantic.io",
        "kubernetes",
        "kubernetes.default",
        "kubernetes.default.svc",
        "kubernetes.default.svc.cluster.local",
        "localhost",
        "172.31.0.1",
        "127.0.0.1",
    ] {
        handshake(&api, &Client { ca: cluster_ca, name, identity: None }).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    // A name it was not issued for, and a client that trusts only the etcd CA, fail.
    for (ca, name) in [
        (cluster_ca, "kubernetes.default.svc.cluster.example"),
        (cluster_ca, "172.31.0.2"),
        (pki.etcd_ca.certificate_pem(), "kubernetes.default.svc"),
    ] {
        let err = handshake(&api, &Client { ca, name, identity: None }).expect_err(name);
        assert!(matches!(err, rustls::Error::InvalidCertificate(_)), "{name}: {err}");
    }
}

#[test]
fn the_api_server_accepts_the_clients_of_the_cluster_ca_only() {
    let pki = pki();
    let cluster_ca = pki.cluster_ca.certificate_pem();
    let api = server(&pki, "api", Some(cluster_ca));
    for client in ["worker", "api", "service-account"] {
        handshake(&api, &Client { ca: cluster_ca, name: "kubernetes.default.svc", identity: identity(&pki, client) })
            .unwrap_or_else(|e| panic!("{client}: {e}"));
    }
    for client in ["etcd", "calico-etcd-client"] {
        let err = handshake(
            &api,
            &Client { ca: cluster_ca, name: "kubernetes.default.svc", identity: identity(&pki, client) },
        )
        .expect_err(client);
        assert!(matches!(err, rustls::Error::InvalidCertificate(_)), "{client}: {err}");
    }
}

#[test]
fn etcd_accepts_its_own_clients_and_refuses_the_workers_certificate() {
    let pki = pki();
    let etcd_ca = pki.etcd_ca.certificate_pem();
    let etcd = server(&pki, "etcd", Some(etcd_ca));
    for name in [
        "etcd.al9qy.k8s.gauss.eu-central-1.aws.gigantic.io",
        "etcd0.al9qy.k8s.gauss.eu-central-1.aws.gigantic.io",
        "127.0.0.1",
    ] {
        // The API server's etcd client certificate (--etcd-certfile) and calico's.
        for client in ["etcd", "calico-etcd-client"] {
            handshake(&etcd, &Client { ca: etcd_ca, name, identity: identity(&pki, client) })
                .unwrap_or_else(|e| panic!("{client} to {name}: {e}"));
        }
    }
    let name = "127.0.0.1";
    for client in ["worker", "api"] {
        let err = handshake(&etcd, &Client { ca: etcd_ca, name, identity: identity(&pki, client) }).expect_err(client);
        assert!(matches!(err, rustls::Error::InvalidCertificate(_)), "{client}: {err}");
    }
    let err = handshake(&etcd, &Client { ca: etcd_ca, name, identity: None }).expect_err("no client certificate");
    assert!(matches!(err, rustls::Error::NoCertificatesPresented), "{err}");
}

#[test]
fn a_client_only_certificate_cannot_serve() {
    let pki = pki();
    let etcd_ca = pki.etcd_ca.certificate_pem();
    let calico = server(&pki, "calico-etcd-client", None);
    let err = handshake(&calico, &Client { ca: etcd_ca, name: "calico-etcd-client", identity: None })
        .expect_err("a client certificate as server");
    assert!(matches!(err, rustls::Error::InvalidCertificate(_)), "{err}");
}

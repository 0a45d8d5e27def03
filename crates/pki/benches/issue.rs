//! Benchmark of the issuer (`make bench`, `cargo bench -p pki`): one cluster's whole PKI (two
//! CAs and five leaf certificates, each with a new P-256 key), issued 100 times; and the checks an
//! operator runs on five certificate Secrets that someone else wrote.
//!
//! Printed: the median and the slowest issuance, and the median time to check all five.

use std::time::{Duration, Instant, SystemTime};

use pki::{CertificateFiles, ClusterNames, IssueOptions, check, issue_cluster_pki, leaf_profiles};

const ROUNDS: usize = 100;

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn main() {
    let names = ClusterNames {
        cluster_id: "b3nch".into(),
        api_domain: "api.b3nch.k8s.example.com".into(),
        internal_api_domain: Some("internal-api.b3nch.k8s.example.com".into()),
        etcd_domain: "etcd.b3nch.k8s.example.com".into(),
        etcd_member_domains: (0..=3).map(|n| format!("etcd{n}.b3nch.k8s.example.com")).collect(),
        cluster_domain: "cluster.local".into(),
        service_cidr: "172.31.0.0/16".into(),
    };
    let options = IssueOptions::at(SystemTime::now());
    let mut issue_times = Vec::with_capacity(ROUNDS);
    let mut last = None;
    for _ in 0..ROUNDS {
        let start = Instant::now();
        last = Some(issue_cluster_pki(&names, &options).expect("issue"));
        issue_times.push(start.elapsed());
    }
    let pki = last.expect("issued");
    let profiles = leaf_profiles(&names).expect("profiles");
    let mut check_times = Vec::with_capacity(ROUNDS);
    for _ in 0..ROUNDS {
        let start = Instant::now();
        for profile in &profiles {
            let cert = pki.certificate(&profile.name).expect("issued");
            let files = CertificateFiles { ca: cert.ca_pem.clone(), crt: cert.crt_pem.clone(), key: cert.key.clone() };
            check(&files, profile, SystemTime::now()).expect("valid");
        }
        check_times.push(start.elapsed());
    }
    let slowest = issue_times.iter().max().copied().unwrap_or_default();
    println!(
        "pki: one cluster's PKI (2 CAs, {} leaves, P-256): median {:?}, slowest {:?} over {ROUNDS} issuances",
        profiles.len(),
        median(issue_times),
        slowest
    );
    println!("pki: checking {} certificate Secrets: median {:?}", profiles.len(), median(check_times));
}

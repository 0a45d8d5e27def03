//! The daemon binary as a pod runs it, against testenv: it becomes ready (`/readyz`), serves
//! `/metrics`, holds the Lease of its version, and the kubelet's SIGTERM stops it cleanly and
//! hands the Lease over at once (empty holder) instead of leaving it to expire.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::PostParams;
use testenv::TestEnv;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A plain HTTP/1.0 GET on loopback: the status code and the body.
async fn get(port: u16, path: &str) -> anyhow::Result<(u16, String)> {
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    stream.write_all(format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").as_bytes()).await?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await?;
    let code = response.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = response.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    Ok((code, body))
}

async fn eventually<T, F, Fut>(seconds: u64, what: &str, mut check: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Option<T>>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(seconds);
    loop {
        if let Ok(Some(value)) = check().await {
            return Ok(value);
        }
        if tokio::time::Instant::now() > deadline {
            anyhow::bail!("timed out waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_becomes_ready_and_sigterm_stops_it_and_releases_its_lease() -> anyhow::Result<()> {
    let env = TestEnv::start().await?;
    let client = env.client();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in apis::all_crds() {
        crds.create(&PostParams::default(), &crd).await?;
    }
    let ns: Namespace = serde_json::from_value(serde_json::json!({"metadata": {"name": "giantswarm"}}))?;
    Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &ns).await?;

    // A free loopback port for the daemon's server. Another test's server may take it between
    // the probe and the daemon's bind (the daemon then exits, and that server may answer
    // /readyz): a daemon that exits is started again on another port, and the port counts as
    // the daemon's only once its /metrics names the cluster controller.
    let mut attempt = 0;
    let (mut daemon, port) = loop {
        attempt += 1;
        let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let mut daemon = tokio::process::Command::new(env!("CARGO_BIN_EXE_kvm-operator"))
            .args(["daemon", "--listen", &format!("127.0.0.1:{port}"), "--dns-servers", "10.61.0.53"])
            .args(["--leader-election-namespace", "giantswarm"])
            .env("KUBECONFIG", env.kubeconfig_path())
            .env("RUST_LOG", "warn")
            .kill_on_drop(true)
            .spawn()?;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        let ours = loop {
            if daemon.try_wait()?.is_some() {
                break false;
            }
            let last = match get(port, "/metrics").await {
                Ok((200, metrics)) if metrics.contains("kvm-operator-cluster-controller") => break true,
                Ok((code, body)) => format!("{code}: {}", body.chars().take(300).collect::<String>()),
                Err(e) => e.to_string(),
            };
            anyhow::ensure!(
                tokio::time::Instant::now() < deadline,
                "port {port}: /metrics did not name the cluster controller in 60 s; last answer {last}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        if ours {
            break (daemon, port);
        }
        anyhow::ensure!(attempt < 5, "the daemon exited at start {attempt} times");
    };

    eventually(60, "/readyz to answer 200", || async { Ok((get(port, "/readyz").await?.0 == 200).then_some(())) })
        .await?;
    let (code, healthz) = get(port, "/healthz").await?;
    assert_eq!(code, 200, "{healthz}");
    // A controller's series appear once it has started; readiness comes with the first list.
    eventually(60, "the cluster controller's metrics", || async {
        let (code, metrics) = get(port, "/metrics").await?;
        Ok((code == 200 && metrics.contains("kvm-operator-cluster-controller")).then_some(()))
    })
    .await?;

    let leases: Api<Lease> = Api::namespaced(client.clone(), "giantswarm");
    let name = kvm_operator::daemon::lease_name(env!("CARGO_PKG_VERSION"));
    assert_eq!(name, "kvm-operator-4.0.0");
    let holder = |lease: Option<Lease>| lease.and_then(|l| l.spec?.holder_identity).filter(|h| !h.is_empty());
    eventually(60, "the daemon to hold its Lease", || async { Ok(holder(leases.get_opt(&name).await?)) }).await?;

    let pid = daemon.id().expect("the daemon is running");
    let kill = std::process::Command::new("kill").args(["-TERM", &pid.to_string()]).status()?;
    assert!(kill.success(), "kill -TERM {pid}: {kill:?}");
    let exited = tokio::time::timeout(Duration::from_secs(20), daemon.wait())
        .await
        .map_err(|_| anyhow::anyhow!("the daemon was still running 20 s after SIGTERM"))??;
    assert!(exited.success(), "the daemon exits cleanly on SIGTERM: {exited:?}");
    let lease = leases.get(&name).await?;
    assert_eq!(holder(Some(lease.clone())), None, "the Lease is released: {:?}", lease.spec);
    Ok(())
}

//! The AWSConfig CRD installed into an API server with kubectl, as a platform team does: a
//! legacy cluster as Giant Swarm's API wrote it (`tests/fixtures/awsconfig-p3x7d.yaml`, every
//! field of the Go type) is applied with the real kubectl under strict field validation, so a
//! field the schema lacked would be refused, and reads back whole through the typed API.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use apis::aws_config::{AWSConfig, ZoneSource};
use kube::{Api, CustomResourceExt};
use serde_json::Value;
use testenv::TestEnv;

const FIXTURE: &str = include_str!("fixtures/awsconfig-p3x7d.yaml");

/// The system kubectl on `env`, as its administrator, with a discovery cache of its own.
async fn kubectl(env: &TestEnv, home: &Path, args: &[&str], stdin: &str) -> Result<String> {
    use tokio::io::AsyncWriteExt as _;
    let bin = std::env::var_os("KUBECTL").map_or_else(|| PathBuf::from("/usr/bin/kubectl"), PathBuf::from);
    let mut child = tokio::process::Command::new(&bin)
        .arg("--kubeconfig")
        .arg(env.kubeconfig_path())
        .arg("--cache-dir")
        .arg(home.join("cache"))
        .args(args)
        .env_remove("KUBECONFIG")
        .env("HOME", home)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {}", bin.display()))?;
    let mut input = child.stdin.take().context("kubectl's stdin")?;
    input.write_all(stdin.as_bytes()).await?;
    drop(input);
    let out = tokio::time::timeout(Duration::from_secs(90), child.wait_with_output()).await??;
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    ensure!(out.status.success(), "kubectl {args:?} failed: {stderr}\n{stdout}");
    Ok(stdout.into_owned())
}

async fn with_crd() -> Result<(TestEnv, tempfile::TempDir)> {
    let env = TestEnv::start().await?;
    let home = tempfile::tempdir()?;
    let crd = apis::to_yaml(&[AWSConfig::crd()]).map_err(anyhow::Error::msg)?;
    kubectl(&env, home.path(), &["apply", "--validate=strict", "-f", "-"], &crd).await?;
    kubectl(
        &env,
        home.path(),
        &["wait", "--for=condition=Established", "--timeout=60s", "crd/awsconfigs.provider.giantswarm.io"],
        "",
    )
    .await?;
    Ok((env, home))
}

#[tokio::test]
async fn a_legacy_cluster_as_its_tooling_wrote_it_is_accepted_strictly_and_reads_back_whole() -> Result<()> {
    let (env, home) = with_crd().await?;
    let applied = kubectl(&env, home.path(), &["apply", "--validate=strict", "-f", "-"], FIXTURE).await?;
    ensure!(applied.contains("awsconfig.provider.giantswarm.io/p3x7d created"), "{applied}");

    let config = Api::<AWSConfig>::namespaced(env.client(), "default").get("p3x7d").await?;
    assert_eq!(config.cluster_id(), "p3x7d");
    assert_eq!(config.validate(), Ok(()));
    let aws = &config.spec.aws;
    assert_eq!(aws.region, "eu-west-1");
    assert_eq!(aws.az, "eu-west-1b");
    assert_eq!(aws.api.elb.idle_timeout_seconds, 120);
    assert_eq!(aws.hosted_zones.ingress.name, "tyrell.eu-west-1.aws.gigantic.io");
    assert_eq!(aws.credential_secret.name, "credential-p3x7d");
    assert_eq!(aws.vpc.route_table_names, ["tyrell_private_0", "tyrell_private_1"]);
    assert_eq!(aws.vpc.peer_id, "vpc-04d7e8f9a0b1c2d3e");
    assert_eq!(aws.workers.len(), 3);
    assert_eq!(aws.workers[2].docker_volume_size_gb, 150);
    assert_eq!(aws.masters[0].image_id, "ami-0f8ab3c2d1e4f5a6b");
    assert_eq!(config.spec.version_bundle.version, "4.7.0");
    assert_eq!(config.spec.cluster.kubernetes.ssh.user_list[0].name, "joe");
    let zones = config.zones();
    assert_eq!(zones.len(), 1);
    assert_eq!((zones[0].private_cidr.as_str(), zones[0].source), ("10.11.0.0/19", ZoneSource::Spec));

    // Nothing the tooling wrote was dropped: the stored object holds every field of the file.
    let stored = kubectl(&env, home.path(), &["get", "awsconfig", "p3x7d", "-n", "default", "-o", "json"], "").await?;
    let stored: Value = serde_json::from_str(&stored)?;
    let written: Value = serde_saphyr::from_str(FIXTURE)?;
    assert_eq!(stored["spec"], written["spec"]);
    // And the typed API writes it back the same way.
    assert_eq!(serde_json::to_value(&config.spec)?, written["spec"]);
    Ok(())
}

#[tokio::test]
async fn a_field_the_original_never_had_is_refused_by_strict_validation() -> Result<()> {
    let (env, home) = with_crd().await?;
    let typo = FIXTURE.replace("    availabilityZones: 1", "    availabilityZone: 1");
    let err = kubectl(&env, home.path(), &["apply", "--validate=strict", "-f", "-"], &typo).await.unwrap_err();
    ensure!(err.to_string().contains("availabilityZone"), "{err:#}");
    Ok(())
}

#[tokio::test]
async fn the_status_the_original_wrote_is_stored_and_read() -> Result<()> {
    let (env, home) = with_crd().await?;
    kubectl(&env, home.path(), &["apply", "--validate=strict", "-f", "-"], FIXTURE).await?;
    let status = r#"{"status": {"aws": {"autoScalingGroup": {"name": "p3x7d-worker"},
        "availabilityZones": [{"name": "eu-west-1b", "subnet": {"private": {"cidr": "10.11.0.0/19"}, "public": {"cidr": "10.11.32.0/19"}}},
                              {"name": "eu-west-1c", "subnet": {"private": {"cidr": "10.11.64.0/19"}, "public": {"cidr": "10.11.96.0/19"}}}]},
        "cluster": {"conditions": [{"lastTransitionTime": "2019-03-04T10:00:00Z", "status": "True", "type": "Created"}],
                    "network": {"cidr": "10.11.0.0/16"}, "nodes": null, "resources": null,
                    "scaling": {"desiredCapacity": 3}, "versions": [{"date": "2019-03-04T10:00:00Z", "lastTransitionTime": "2019-03-04T10:00:00Z", "semver": "4.7.0"}]}}}"#;
    kubectl(
        &env,
        home.path(),
        &["patch", "awsconfig", "p3x7d", "-n", "default", "--subresource=status", "--type=merge", "-p", status],
        "",
    )
    .await?;
    let config = Api::<AWSConfig>::namespaced(env.client(), "default").get("p3x7d").await?;
    let s = config.status.as_ref().context("status")?;
    assert_eq!(s.aws.auto_scaling_group.name, "p3x7d-worker");
    assert_eq!(s.cluster.versions[0].semver, "4.7.0");
    let zones = config.zones();
    assert_eq!(zones.iter().map(|z| z.name.as_str()).collect::<Vec<_>>(), ["eu-west-1b", "eu-west-1c"]);
    assert_eq!(zones[1].source, ZoneSource::Status(1));
    assert_eq!(config.vpc_cidr(), ("status.cluster.network.cidr", "10.11.0.0/16"));
    assert_eq!(config.validate(), Ok(()));
    Ok(())
}

//! A Giant Swarm fleet moves in unchanged: its management cluster has the Cluster API CRDs
//! (`tests/fixtures/capi` of the apis crate: Cluster API v1.4.0's `Cluster` and
//! `MachineDeployment`, Giant Swarm's `G8sControlPlane`), and its cluster is the objects its
//! tooling wrote (`tests/fixtures/fleet/al9qy.yaml`), applied with the real kubectl under strict
//! validation. The operator runs as the chart's ServiceAccount (a refused request fails the run)
//! and brings the cluster to `Created` on moto; AWS's own APIs show what the CAPI objects set:
//! the master count of the `G8sControlPlane`, the `Cluster`'s etcd quota, garbage-collection
//! threshold and cloud tag (on the stacks, the KMS key and the buckets), the
//! `MachineDeployment`'s cgroups v1. kubectl shows the
//! `Cluster.spec.controlPlaneEndpoint` the operator wrote.
//!
//! The other tests here: the CAPI CRDs installed while the operator runs, a CAPI value the
//! cluster's own field overrides, and a CAPI value the operator cannot use.

mod support;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use apis::aws::{AWSCluster, AWSControlPlane};
use base64::Engine as _;
use kube::Api;
use kube::api::{Patch, PatchParams};
use support::*;

const ID: &str = "al9qy";

/// The fleet's objects as its tooling wrote them, for the operator under test.
fn fleet() -> String {
    include_str!("fixtures/fleet/al9qy.yaml").replace("${AWS_OPERATOR_VERSION}", VERSION)
}

/// The directory of the Cluster API CRDs.
fn capi_crds() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../crates/apis/tests/fixtures/capi")
}

/// The system kubectl on the fixture's API server, as its administrator, with a discovery cache
/// of its own.
struct Kubectl {
    kubeconfig: PathBuf,
    home: tempfile::TempDir,
}

impl Kubectl {
    fn new(f: &Fixture) -> anyhow::Result<Self> {
        Ok(Self { kubeconfig: f.env.kubeconfig_path().to_path_buf(), home: tempfile::tempdir()? })
    }

    /// `kubectl args…` with `stdin`; its stdout, or an error with its stderr.
    async fn run(&self, args: &[&str], stdin: Option<&str>) -> anyhow::Result<String> {
        use tokio::io::AsyncWriteExt as _;
        let bin = std::env::var_os("KUBECTL").map_or_else(|| PathBuf::from("/usr/bin/kubectl"), PathBuf::from);
        let mut child = tokio::process::Command::new(&bin)
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(self.home.path().join("cache"))
            .args(args)
            .env_remove("KUBECONFIG")
            .env("HOME", self.home.path())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        let mut input = child.stdin.take().expect("stdin");
        input.write_all(stdin.unwrap_or_default().as_bytes()).await?;
        drop(input);
        let out = tokio::time::timeout(Duration::from_secs(90), child.wait_with_output()).await??;
        let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        anyhow::ensure!(out.status.success(), "kubectl {args:?} failed: {stderr}\n{stdout}");
        Ok(stdout.into_owned())
    }
}

/// A management cluster with the fleet's CRDs (installed with kubectl, as a platform team
/// does), its namespaces, Release and credential Secret.
async fn management_cluster(f: &Fixture, kubectl: &Kubectl) -> anyhow::Result<()> {
    f.apply_basics().await?;
    f.credential_secret(ID).await?;
    let dir = capi_crds();
    let dir = dir.to_str().expect("a UTF-8 path");
    kubectl.run(&["apply", "--validate=strict", "-f", dir], None).await?;
    kubectl.run(&["wait", "--for=condition=Established", "--timeout=60s", "-f", dir], None).await?;
    Ok(())
}

/// The Ignition document of node config `key` in the cluster's bucket.
async fn node_config(tenant: &aws_operator::aws::AccountClients, key: &str) -> anyhow::Result<serde_json::Value> {
    let bucket = aws_stacks::names::bucket(&tenant.account_id, ID);
    let body = tenant.s3.get_object().bucket(bucket).key(key).send().await?.body.collect().await?.into_bytes();
    Ok(serde_json::from_slice(&body)?)
}

/// The contents of unit `name` of a node config.
fn unit<'a>(config: &'a serde_json::Value, name: &str) -> &'a str {
    config["systemd"]["units"]
        .as_array()
        .and_then(|units| units.iter().find(|u| u["name"] == name))
        .and_then(|u| u["contents"].as_str())
        .unwrap_or_else(|| panic!("no unit {name}"))
}

/// The contents of the plain file at `path` of a node config.
fn file(config: &serde_json::Value, path: &str) -> String {
    let source = config["storage"]["files"]
        .as_array()
        .and_then(|files| files.iter().find(|f| f["path"] == path))
        .and_then(|f| f["contents"]["source"].as_str())
        .unwrap_or_else(|| panic!("no file {path}"));
    let data = source.split_once(',').map(|(_, d)| d).unwrap_or_default();
    String::from_utf8(base64::engine::general_purpose::STANDARD.decode(data).expect("base64")).expect("UTF-8")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_as_its_tooling_wrote_it_is_created_with_what_its_capi_objects_set() -> anyhow::Result<()> {
    let rendered = packaging::helm_template("aws-operator", &["ci/minimal-values.yaml"], &[])?;
    let mut f = Fixture::start_secure().await?;
    // A change of a CAPI object is acted on at the next resync, as in the original.
    f.resync = Duration::from_secs(10);
    let kubectl = Kubectl::new(&f)?;
    management_cluster(&f, &kubectl).await?;
    let applied = kubectl.run(&["apply", "--validate=strict", "-f", "-"], Some(&fleet())).await?;
    for object in [
        "cluster.cluster.x-k8s.io/al9qy created",
        "awscluster.infrastructure.giantswarm.io/al9qy created",
        "g8scontrolplane.infrastructure.giantswarm.io/a2wax created",
        "awscontrolplane.infrastructure.giantswarm.io/a2wax created",
        "machinedeployment.cluster.x-k8s.io/g3j50 created",
        "awsmachinedeployment.infrastructure.giantswarm.io/g3j50 created",
    ] {
        assert!(applied.contains(object), "{object} missing:\n{applied}");
    }

    f.as_chart_service_account(&rendered).await?;
    let (env, user) = (f.env.handle().clone(), f.service_account.clone().expect("the chart's identity").user);
    let scenario = async {
        f.start_operator().await?;
        let clusters: Api<AWSCluster> = Api::namespaced(f.client.clone(), NS);
        let created = eventually(240, "the fleet's cluster to be Created", || async {
            let c = clusters.get(ID).await?;
            let status = c.status.clone().unwrap_or_default();
            Ok((ready(Some(&status.conditions))
                && status.cluster.has_condition(apis::cluster_status::ClusterCondition::Created))
            .then_some(status))
        })
        .await;
        let status = match created {
            Ok(s) => s,
            Err(e) => anyhow::bail!("{e}\n{}", dump(&f.client).await),
        };
        assert!(
            !status.conditions.iter().any(|c| c.type_ == aws_operator::capi::OVERRIDDEN),
            "the fleet's own and CAPI values agree: {:?}",
            status.conditions
        );
        let tenant = f.tenant_clients().await?;

        // The master count of the G8sControlPlane (its AWSControlPlane sets none and lists one
        // zone, which alone would make one master): three masters, in three groups.
        let stacks = tenant.cfn.describe_all().await?;
        let tccpn = stacks.iter().find(|s| s.name == format!("cluster-{ID}-tccpn")).expect("TCCPN");
        assert_eq!(tccpn.outputs.get("MasterReplicas").map(String::as_str), Some("3"));
        let groups = tenant.autoscaling.describe_auto_scaling_groups().send().await?;
        let of_tccpn = |g: &&aws_sdk_autoscaling::types::AutoScalingGroup| {
            g.tags().iter().any(|t| t.key() == Some("giantswarm.io/stack") && t.value() == Some("tccpn"))
        };
        let master_groups = groups.auto_scaling_groups().iter().filter(of_tccpn).count();
        let listed: Vec<_> = groups
            .auto_scaling_groups()
            .iter()
            .map(|g| {
                let stack = g.tags().iter().find(|t| t.key() == Some("giantswarm.io/stack"));
                (g.auto_scaling_group_name(), stack.and_then(|t| t.value()))
            })
            .collect();
        assert_eq!(master_groups, 3, "three masters' groups: {listed:?}");

        // The Cluster's cloud tag, on the tenant stacks (CloudFormation puts it on their
        // resources).
        for kind in ["tccp", "tccpn", "tcnp-g3j50"] {
            let stack = stacks.iter().find(|s| s.name == format!("cluster-{ID}-{kind}")).expect("the stack");
            assert_eq!(stack.tags.get("cost-center").map(String::as_str), Some("team-blue"), "{kind}");
        }
        // And on the cluster's KMS key and both its buckets, which the operator creates itself.
        let key = tenant.kms.describe_key().key_id(aws_stacks::names::kms_alias(ID)).send().await?;
        let key_id = key.key_metadata().map(|m| m.key_id().to_string()).expect("the cluster key");
        let key_tags = tenant.kms.list_resource_tags().key_id(&key_id).send().await?;
        assert!(
            key_tags.tags().iter().any(|t| t.tag_key() == "cost-center" && t.tag_value() == "team-blue"),
            "{:?}",
            key_tags.tags()
        );
        for bucket in [
            aws_stacks::names::bucket(&tenant.account_id, ID),
            aws_stacks::names::access_log_bucket(&tenant.account_id, ID),
        ] {
            let tagging = tenant.s3.get_bucket_tagging().bucket(&bucket).send().await?;
            assert!(
                tagging.tag_set().iter().any(|t| t.key() == "cost-center" && t.value() == "team-blue"),
                "{bucket}: {:?}",
                tagging.tag_set()
            );
        }

        // The Cluster's etcd quota and garbage-collection threshold, in every master's config.
        for master in 1..=3 {
            let config = node_config(&tenant, &aws_stacks::names::master_config_key(VERSION, ID, master)).await?;
            let etcd = unit(&config, aws_stacks::ignition::ETCD_UNIT);
            assert!(etcd.contains("--quota-backend-bytes=8589934592"), "master {master}: {etcd}");
            let manager = file(&config, "/etc/kubernetes/manifests/k8s-controller-manager.yaml");
            assert!(manager.contains("- --terminated-pod-gc-threshold=500\n"), "master {master}: {manager}");
        }
        // The MachineDeployment's cgroups v1, in its pool's config.
        let worker = node_config(&tenant, &aws_stacks::names::node_pool_config_key(VERSION, ID, "g3j50")).await?;
        assert_eq!(
            worker["kernelArguments"]["shouldExist"],
            serde_json::json!(["systemd.unified_cgroup_hierarchy=0", "systemd.legacy_systemd_cgroup_controller"])
        );
        assert!(unit(&worker, "kubelet.service").contains("cgroups.giantswarm.io/version=v1"));

        // The Cluster says where the API server is, as the original wrote it.
        let endpoint = kubectl
            .run(
                &["get", "clusters.cluster.x-k8s.io", ID, "-n", NS, "-o", "jsonpath={.spec.controlPlaneEndpoint}"],
                None,
            )
            .await?;
        let endpoint: serde_json::Value = serde_json::from_str(&endpoint)?;
        assert_eq!(
            endpoint,
            serde_json::json!({"host": format!("api.{ID}.k8s.gauss.eu-central-1.aws.gigantic.io"), "port": 443})
        );

        // Three masters down to one through the G8sControlPlane, where the count is set: at the
        // next resync, refused before anything is deployed, naming that object's field, and the
        // masters stay.
        let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_secs_f64();
        kubectl
            .run(
                &["patch", "g8scontrolplanes", "a2wax", "-n", NS, "--type=merge", "-p", r#"{"spec":{"replicas":1}}"#],
                None,
            )
            .await?;
        let cps: Api<AWSControlPlane> = Api::namespaced(f.client.clone(), NS);
        let refused = eventually(90, "the control plane to refuse the drop to one master", || async {
            let conditions = cps.get("a2wax").await?.status.map(|s| s.conditions).unwrap_or_default();
            Ok(conditions.into_iter().find(|c| c.type_ == "Ready" && c.reason == "EtcdReplacementRefused"))
        })
        .await?;
        assert_eq!(refused.status, "False");
        for part in
            ["spec.replicas of G8sControlPlane org-acme/a2wax", "EtcdVolume3 would be deleted", "nothing was deployed"]
        {
            assert!(refused.message.contains(part), "{part} missing: {}", refused.message);
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
        let stack_writes: Vec<String> = f
            .moto
            .request_log()?
            .into_iter()
            .filter(|r| r.time >= since && r.service == "cloudformation" && r.is_write())
            .map(|r| r.action)
            .collect();
        assert!(stack_writes.is_empty(), "stack writes after the refused drop: {stack_writes:?}");
        let groups = tenant.autoscaling.describe_auto_scaling_groups().send().await?;
        assert_eq!(groups.auto_scaling_groups().iter().filter(of_tccpn).count(), 3, "the three masters stay");
        Ok::<_, anyhow::Error>(())
    };
    packaging::rbac::without_refusals(&env, &user, scenario).await?;
    f.kill_operator().await;
    Ok(())
}

/// The Warning events about `name` in the fixture's namespace, as `reason: note`.
async fn warnings(f: &Fixture, name: &str) -> anyhow::Result<Vec<String>> {
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(f.client.clone(), NS);
    Ok(events
        .list(&Default::default())
        .await?
        .items
        .into_iter()
        .filter(|e| e.type_.as_deref() == Some("Warning"))
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .map(|e| format!("{}: {}", e.reason.unwrap_or_default(), e.note.unwrap_or_default()))
        .collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_count_set_twice_differently_is_the_control_planes_and_says_so() -> anyhow::Result<()> {
    let mut f = Fixture::start().await?;
    let kubectl = Kubectl::new(&f)?;
    management_cluster(&f, &kubectl).await?;
    // The fleet, its AWSControlPlane with a master count of its own that the G8sControlPlane
    // contradicts.
    let fleet = fleet().replace("  instanceType: m5.xlarge\n---", "  instanceType: m5.xlarge\n  replicas: 1\n---");
    assert!(fleet.contains("replicas: 1"), "the fleet's AWSControlPlane changed");
    kubectl.run(&["apply", "--validate=strict", "-f", "-"], Some(&fleet)).await?;
    f.start_operator().await?;

    let cps: Api<AWSControlPlane> = Api::namespaced(f.client.clone(), NS);
    let condition = eventually(90, "the control plane to name the disagreement", || async {
        let cp = cps.get("a2wax").await?;
        let conditions = cp.status.map(|s| s.conditions).unwrap_or_default();
        Ok(conditions.into_iter().find(|c| c.type_ == aws_operator::capi::OVERRIDDEN))
    })
    .await;
    let condition = match condition {
        Ok(c) => c,
        Err(e) => anyhow::bail!("{e}\n{}", dump(&f.client).await),
    };
    let want = "spec.replicas of AWSControlPlane org-acme/a2wax is 1 and spec.replicas of G8sControlPlane \
                org-acme/a2wax is 3: 1 is used";
    assert!(condition.status == "True" && condition.message.starts_with(want), "{condition:?}");
    let events = warnings(&f, "a2wax").await?;
    assert!(events.iter().any(|e| e.starts_with(&format!("CAPIValueOverridden: {want}"))), "{events:?}");

    // Alike, the condition goes.
    let patch = serde_json::json!({"spec": {"replicas": 3}});
    cps.patch("a2wax", &PatchParams::default(), &Patch::Merge(&patch)).await?;
    eventually(90, "the condition to go", || async {
        let cp = cps.get("a2wax").await?;
        let conditions = cp.status.map(|s| s.conditions).unwrap_or_default();
        Ok((!conditions.iter().any(|c| c.type_ == aws_operator::capi::OVERRIDDEN)).then_some(()))
    })
    .await?;
    f.kill_operator().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_etcd_quota_the_operator_cannot_use_stops_the_cluster_naming_the_cluster_field_and_fix() -> anyhow::Result<()>
{
    let mut f = Fixture::start().await?;
    let kubectl = Kubectl::new(&f)?;
    management_cluster(&f, &kubectl).await?;
    let fleet = fleet().replace("quota-backend-bytes: \"8589934592\"", "quota-backend-bytes: 8Gi");
    assert!(fleet.contains("quota-backend-bytes: 8Gi"), "the fleet's Cluster changed");
    kubectl.run(&["apply", "--validate=strict", "-f", "-"], Some(&fleet)).await?;
    f.start_operator().await?;

    let clusters: Api<AWSCluster> = Api::namespaced(f.client.clone(), NS);
    let ready = eventually(90, "the cluster to be refused", || async {
        let c = clusters.get(ID).await?;
        let conditions = c.status.map(|s| s.conditions).unwrap_or_default();
        Ok(conditions
            .into_iter()
            .find(|c| c.type_ == "Ready" && c.status == "False" && c.message.contains("quota-backend-bytes")))
    })
    .await?;
    for part in [
        "Cluster org-acme/al9qy",
        "metadata.annotations[etcd.giantswarm.io/quota-backend-bytes]",
        "\"8Gi\"",
        "such as 8589934592",
    ] {
        assert!(ready.message.contains(part), "{part} missing: {}", ready.message);
    }
    let events = warnings(&f, ID).await?;
    assert!(events.iter().any(|e| e.contains("etcd.giantswarm.io/quota-backend-bytes")), "{events:?}");
    // Nothing was created for it, and nothing of the fleet was deleted.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let tenant = f.tenant_clients().await?;
    assert!(tenant.cfn.describe_all().await?.is_empty(), "no stack for a refused cluster");
    let names = kubectl.run(&["get", "clusters.cluster.x-k8s.io", "-n", NS, "-o", "name"], None).await?;
    assert_eq!(names.trim(), format!("cluster.cluster.x-k8s.io/{ID}"));
    f.kill_operator().await;
    Ok(())
}

/// The fleet's documents of kinds whose group is `group`, joined again.
fn fleet_of_group(fleet: &str, group: &str) -> String {
    fleet
        .split("\n---\n")
        .filter(|doc| doc.lines().any(|l| l.starts_with("apiVersion: ") && l.contains(group)))
        .collect::<Vec<_>>()
        .join("\n---\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capi_crds_installed_while_the_operator_runs_are_picked_up_without_a_restart() -> anyhow::Result<()> {
    let mut f = Fixture::start().await?;
    // The CAPI objects are read at each reconcile of the cluster's own (a steady cluster's at
    // each resync), with the served kinds looked up again every `--capi-discovery-seconds`.
    f.resync = Duration::from_secs(5);
    f.configure = Some(Arc::new(|c: &mut aws_operator::config::OperatorConfig| {
        c.capi_discovery_ttl = Duration::from_secs(3);
    }));
    let kubectl = Kubectl::new(&f)?;
    f.apply_basics().await?;
    f.credential_secret(ID).await?;
    // The fleet's own objects, with a master count of the AWSControlPlane's own (the
    // G8sControlPlane applied later says 3, which then loses and is named).
    let fleet = fleet().replace("  instanceType: m5.xlarge\n---", "  instanceType: m5.xlarge\n  replicas: 1\n---");
    let own = fleet_of_group(&fleet, "infrastructure.giantswarm.io/v1alpha3");
    let own: String =
        own.split("\n---\n").filter(|d| !d.contains("kind: G8sControlPlane")).collect::<Vec<_>>().join("\n---\n");
    let capi = format!(
        "{}\n---\n{}",
        fleet_of_group(&fleet, "cluster.x-k8s.io/v1beta1"),
        fleet.split("\n---\n").find(|d| d.contains("kind: G8sControlPlane")).expect("the G8sControlPlane")
    );
    assert_eq!(own.matches("kind: AWS").count(), 3, "{own}");
    assert_eq!(capi.matches("\nkind: ").count() + usize::from(capi.starts_with("kind: ")), 3, "{capi}");
    kubectl.run(&["apply", "--validate=strict", "-f", "-"], Some(&own)).await?;
    f.start_operator().await?;

    // Without the CRDs the cluster is built from its own objects alone.
    let clusters: Api<AWSCluster> = Api::namespaced(f.client.clone(), NS);
    let created = eventually(240, "the cluster to be Created without the CAPI CRDs", || async {
        let c = clusters.get(ID).await?;
        let status = c.status.clone().unwrap_or_default();
        Ok((ready(Some(&status.conditions))
            && status.cluster.has_condition(apis::cluster_status::ClusterCondition::Created))
        .then_some(()))
    })
    .await;
    if let Err(e) = created {
        anyhow::bail!("{e}\n{}", dump(&f.client).await);
    }
    let tenant = f.tenant_clients().await?;
    let tccp_tag = |stacks: &[aws_stacks::state::StackView]| {
        stacks.iter().find(|s| s.name == format!("cluster-{ID}-tccp")).and_then(|s| s.tags.get("cost-center").cloned())
    };
    assert_eq!(tccp_tag(&tenant.cfn.describe_all().await?), None, "no Cluster, no cloud tag");

    // A platform team installs the CRDs, and its tooling the CAPI objects, while the operator
    // runs.
    let dir = capi_crds();
    let dir = dir.to_str().expect("a UTF-8 path");
    kubectl.run(&["apply", "--validate=strict", "-f", dir], None).await?;
    kubectl.run(&["wait", "--for=condition=Established", "--timeout=60s", "-f", dir], None).await?;
    kubectl.run(&["apply", "--validate=strict", "-f", "-"], Some(&capi)).await?;

    // The operator reads them: it writes the Cluster's endpoint, names the G8sControlPlane's
    // master count that the AWSControlPlane's overrides, and puts the Cluster's cloud tag on the
    // tenant stacks.
    let endpoint = eventually(60, "the Cluster's spec.controlPlaneEndpoint", || async {
        let out = kubectl
            .run(
                &["get", "clusters.cluster.x-k8s.io", ID, "-n", NS, "-o", "jsonpath={.spec.controlPlaneEndpoint}"],
                None,
            )
            .await?;
        Ok((!out.trim().is_empty()).then(|| serde_json::from_str::<serde_json::Value>(&out)).transpose()?)
    })
    .await?;
    assert_eq!(
        endpoint,
        serde_json::json!({"host": format!("api.{ID}.k8s.gauss.eu-central-1.aws.gigantic.io"), "port": 443})
    );
    let cps: Api<AWSControlPlane> = Api::namespaced(f.client.clone(), NS);
    let overridden = eventually(60, "the control plane to name the G8sControlPlane's count", || async {
        let conditions = cps.get("a2wax").await?.status.map(|s| s.conditions).unwrap_or_default();
        Ok(conditions.into_iter().find(|c| c.type_ == aws_operator::capi::OVERRIDDEN))
    })
    .await?;
    assert!(
        overridden.message.starts_with(
            "spec.replicas of AWSControlPlane org-acme/a2wax is 1 and spec.replicas of G8sControlPlane \
             org-acme/a2wax is 3: 1 is used"
        ),
        "{overridden:?}"
    );
    eventually(180, "the Cluster's cloud tag on the TCCP stack", || async {
        Ok((tccp_tag(&tenant.cfn.describe_all().await?).as_deref() == Some("team-blue")).then_some(()))
    })
    .await?;
    f.kill_operator().await;
    Ok(())
}

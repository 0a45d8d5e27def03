//! End to end against testenv and moto: create a cluster with three masters and two node pools,
//! scale one pool, delete everything. Every check goes through the service's own API, never the
//! stack status alone.
//!
//! The operator runs as the aws-operator chart's ServiceAccount, with the chart's rendered RBAC
//! applied to a testenv that authenticates and authorizes like a production API server, and
//! with the chart's leader election and drain executor: least privilege, proven. A refused
//! request fails the run at once, naming it (a second test drops one rule of the chart to show
//! it), and every grant of the chart the run never used fails it too, unless
//! [`UNUSED_BY_DESIGN`] names it and says why.

mod support;

use std::collections::BTreeMap;

use apis::aws::{AWSCluster, AWSControlPlane, AWSMachineDeployment};
use base64::Engine;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use support::*;

async fn stacks_of(
    aws: &aws_operator::aws::AccountClients,
) -> anyhow::Result<BTreeMap<String, aws_stacks::state::StackView>> {
    Ok(aws.cfn.describe_all().await?.into_iter().map(|s| (s.name.clone(), s)).collect())
}

/// The CIDR lines of `aws-operator render --summary` over the cluster's objects as they are in
/// the API, without their status and recorded ranges (as the user's files would be).
/// The node config `key` of `bucket`: checks that `secret` is not in it as plain text, and returns
/// the file whose path ends with `suffix`, decrypted with the cluster key.
async fn decrypted_file(
    tenant: &aws_operator::aws::AccountClients,
    bucket: &str,
    key: &str,
    suffix: &str,
    secret: &str,
) -> anyhow::Result<String> {
    let body = tenant.s3.get_object().bucket(bucket).key(key).send().await?.body.collect().await?.into_bytes();
    let text = String::from_utf8(body.to_vec())?;
    assert!(!text.contains(secret), "plaintext secret in {key}");
    let config: serde_json::Value = serde_json::from_str(&text)?;
    let files = config["storage"]["files"].as_array().cloned().unwrap_or_default();
    let Some(file) = files.iter().find(|f| f["path"].as_str().is_some_and(|p| p.ends_with(suffix))) else {
        anyhow::bail!("{key} has no file ending with {suffix}");
    };
    let source = file["contents"]["source"].as_str().unwrap_or_default();
    let b64 = source.split_once(',').map(|(_, d)| d).unwrap_or_default();
    let ciphertext = base64::engine::general_purpose::STANDARD.decode(b64)?;
    let plain = tenant.kms.decrypt().ciphertext_blob(aws_sdk_kms::primitives::Blob::new(ciphertext)).send().await?;
    Ok(String::from_utf8(plain.plaintext().map(|b| b.as_ref().to_vec()).unwrap_or_default())?)
}

async fn render_summary(f: &Fixture, id: &str) -> anyhow::Result<Vec<String>> {
    fn document<K: serde::Serialize>(obj: &K) -> anyhow::Result<String> {
        let mut v = serde_json::to_value(obj)?;
        v.as_object_mut().map(|o| o.remove("status"));
        let meta = &mut v["metadata"];
        for field in ["managedFields", "resourceVersion", "uid", "creationTimestamp", "generation", "finalizers"] {
            meta.as_object_mut().map(|m| m.remove(field));
        }
        meta["annotations"].as_object_mut().map(|a| a.remove("machine-deployment.giantswarm.io/subnet"));
        Ok(format!("---\n{}\n", serde_json::to_string_pretty(&v)?))
    }
    let mut yaml = String::new();
    let release = Api::<apis::release::Release>::all(f.client.clone()).get("v20.0.0").await?;
    yaml.push_str(&document(&release)?);
    yaml.push_str(&document(&Api::<AWSCluster>::namespaced(f.client.clone(), NS).get(id).await?)?);
    for cp in Api::<AWSControlPlane>::namespaced(f.client.clone(), NS).list(&Default::default()).await? {
        yaml.push_str(&document(&cp)?);
    }
    for md in Api::<AWSMachineDeployment>::namespaced(f.client.clone(), NS).list(&Default::default()).await? {
        yaml.push_str(&document(&md)?);
    }
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("cluster.yaml");
    std::fs::write(&file, yaml)?;
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_aws-operator"))
        .arg("render")
        .arg("--summary")
        .arg(&file)
        .output()?;
    anyhow::ensure!(out.status.success(), "render failed: {}", String::from_utf8_lossy(&out.stderr));
    Ok(String::from_utf8(out.stdout)?
        .lines()
        .filter_map(|l| l.strip_prefix("# "))
        .filter(|l| l.contains(": CIDR "))
        .map(|l| l.split(" (allocated").next().unwrap_or(l).to_string())
        .collect())
}

/// The chart's grants the end-to-end run does not use, and why each stays in the chart. Each
/// entry is `(grant as packaging::rbac::Grant prints it after the role, reason)`; the test fails when one of
/// them is used after all (the entry is stale) as well as when another grant is unused.
const UNUSED_BY_DESIGN: &[(&str, &str)] = &[
    (
        "patch core/namespaces",
        "the cluster's namespace is applied only when its labels differ from what the id claim created \
         it with (an organisation label changed, a label removed by hand); this run changes none",
    ),
    (
        "get provider.giantswarm.io/awsconfigs",
        "a legacy cluster being deleted is read fresh when its credential Secret is gone; this run has no \
         legacy cluster, tests/legacy_stacks.rs runs them",
    ),
    ("patch provider.giantswarm.io/awsconfigs", "the finalizer of a legacy cluster; as above"),
    ("patch provider.giantswarm.io/awsconfigs/status", "the status of a legacy cluster; as above"),
    (
        "get infrastructure.giantswarm.io/networkpools",
        "read when a cluster names a NetworkPool (spec.provider.nodes.networkPool) to allocate from; \
         this cluster allocates from the operator's range; tests/bad_input.rs runs the NetworkPool path",
    ),
    (
        "list infrastructure.giantswarm.io/networkpools",
        "a named NetworkPool is checked against every other for overlap; as above",
    ),
    (
        "patch core.giantswarm.io/drainerconfigs",
        "the drain executor's finalizer on a DrainerConfig; this run drains no node (no workload-cluster \
         API to drain), node-lifecycle's drain tests do",
    ),
    (
        "patch core.giantswarm.io/drainerconfigs/status",
        "the drain executor's progress and result on a DrainerConfig; as above",
    ),
    (
        "create core.giantswarm.io/drainerconfigs",
        "the drainers ask for a node's drain when a terminating lifecycle hook holds its instance; this \
         run's groups lose no instance while the cluster lives, tests/drainers.rs runs that path as the \
         chart's ServiceAccount",
    ),
    ("delete core.giantswarm.io/drainerconfigs", "the drainers' DrainerConfig goes once its instance did; as above"),
    (
        "list coordination.k8s.io/leases",
        "rollout slots (--max-rolling-clusters, maxRollingNodePools) are read before a roll; this run sets no \
         limit, tests/maintenance.rs runs the cluster limit as the chart's ServiceAccount (their create and \
         update are leader election's too)",
    ),
    ("delete coordination.k8s.io/leases", "a rollout slot is freed once its last member is done; as above"),
    (
        "get cluster.x-k8s.io/clusters",
        "a fleet's Cluster API objects are read when their CRDs are installed; this management cluster has \
         none, tests/fleet.rs applies a whole fleet with them as the chart's ServiceAccount",
    ),
    ("patch cluster.x-k8s.io/clusters", "a Cluster's spec.controlPlaneEndpoint; as above"),
    ("list cluster.x-k8s.io/machinedeployments", "a node pool's MachineDeployment; as above"),
    ("list infrastructure.giantswarm.io/g8scontrolplanes", "a control plane's G8sControlPlane; as above"),
];

/// The chart's objects as `helm template` renders them with its minimal values.
fn rendered_chart() -> anyhow::Result<Vec<serde_json::Value>> {
    Ok(packaging::helm_template("aws-operator", &["ci/minimal-values.yaml"], &[])?)
}

/// The fixture on a secure testenv, the operator to run as the ServiceAccount of `rendered`
/// with its RBAC.
async fn secure_fixture(rendered: &[serde_json::Value]) -> anyhow::Result<Fixture> {
    let mut f = Fixture::start_secure().await?;
    f.apply_basics().await?;
    f.as_chart_service_account(rendered).await?;
    Ok(f)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_scale_and_delete_a_cluster_as_the_charts_service_account_using_every_grant() -> anyhow::Result<()> {
    let rendered = rendered_chart()?;
    let mut f = secure_fixture(&rendered).await?;
    let (env, user) = (f.env.handle().clone(), f.service_account.clone().expect("the chart's identity").user);
    packaging::rbac::without_refusals(&env, &user, create_scale_and_delete(&mut f)).await?;
    f.kill_operator().await;

    let log = env.access_log_of(&user);
    // "ClusterRole/<name>: verb group/resource" without the role, whose name carries the version.
    let unused: Vec<String> = packaging::rbac::unused_grants(&rendered, &log)?
        .iter()
        .map(|g| g.to_string().split_once(": ").map(|(_, grant)| grant.to_string()).unwrap_or_default())
        .collect();
    let allowed: Vec<&str> = UNUSED_BY_DESIGN.iter().map(|(grant, _)| *grant).collect();
    let surplus: Vec<&String> = unused.iter().filter(|g| !allowed.contains(&g.as_str())).collect();
    assert!(
        surplus.is_empty(),
        "the chart grants what the operator never used: {surplus:#?}\nevery unused grant: {unused:#?}"
    );
    let stale: Vec<&&str> = allowed.iter().filter(|g| !unused.iter().any(|u| u == *g)).collect();
    assert!(stale.is_empty(), "UNUSED_BY_DESIGN names grants the run used (or the chart no longer has): {stale:#?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permission_missing_from_the_chart_fails_the_run_naming_the_refused_request() -> anyhow::Result<()> {
    // The chart without the rule that lets the operator manage each cluster's namespace.
    let mut rendered = rendered_chart()?;
    let role = rendered.iter_mut().find(|o| o["kind"] == "ClusterRole").expect("the chart's ClusterRole");
    let rules = role["rules"].as_array_mut().expect("rules");
    let before = rules.len();
    rules.retain(|r| !r["resources"].as_array().is_some_and(|rs| rs.iter().any(|x| x == "namespaces")));
    assert_eq!(rules.len(), before - 1, "the chart grants namespaces in one rule");

    let mut f = secure_fixture(&rendered).await?;
    let (env, user) = (f.env.handle().clone(), f.service_account.clone().expect("the chart's identity").user);
    let started = std::time::Instant::now();
    let err = packaging::rbac::without_refusals(&env, &user, create_scale_and_delete(&mut f))
        .await
        .expect_err("the run must fail");
    assert!(matches!(err, packaging::Error::Refused(_)), "{err}");
    let message = err.to_string();
    assert!(
        message.contains("RBAC refused system:serviceaccount:giantswarm:aws-operator-")
            && message.contains("core/namespaces"),
        "{message}"
    );
    // It fails at the refusal, not at the scenario's timeout.
    assert!(started.elapsed() < std::time::Duration::from_secs(60), "took {:?}: {message}", started.elapsed());
    f.kill_operator().await;
    Ok(())
}

/// Create a cluster with three masters and two node pools, scale one pool, delete everything.
async fn create_scale_and_delete(f: &mut Fixture) -> anyhow::Result<()> {
    let id = "e2e01";
    f.credential_secret(id).await?;
    f.cluster(id).await?;
    f.control_plane(id, "cp001", &["eu-central-1a", "eu-central-1b", "eu-central-1c"], 3).await?;
    f.node_pool(id, "np001", &["eu-central-1a", "eu-central-1b"], 2, 5).await?;
    f.node_pool(id, "np002", &["eu-central-1c"], 1, 3).await?;
    // The installation's intermediate zone, in the management account: the cluster zone is
    // delegated from it.
    let parent_zone = "k8s.gauss.eu-central-1.aws.gigantic.io";
    let cp = f.control_plane_clients().await?;
    let created = cp.route53.create_hosted_zone().name(parent_zone).caller_reference(id).send().await?;
    let parent_id =
        created.hosted_zone().map(|z| z.id().trim_start_matches("/hostedzone/").to_string()).unwrap_or_default();
    let delegation = |parent_id: String| {
        let cp = cp.clone();
        async move {
            let sets = cp.route53.list_resource_record_sets().hosted_zone_id(parent_id).send().await?;
            Ok::<_, anyhow::Error>(
                sets.resource_record_sets()
                    .iter()
                    .find(|r| {
                        r.name().trim_end_matches('.') == format!("{id}.{parent_zone}") && r.r#type().as_str() == "NS"
                    })
                    .map(|r| {
                        let mut values: Vec<String> =
                            r.resource_records().iter().map(|v| v.value().to_string()).collect();
                        values.sort();
                        (r.ttl(), values)
                    }),
            )
        }
    };
    f.start_operator().await?;
    let f = &*f;

    let clusters: Api<AWSCluster> = Api::namespaced(f.client.clone(), NS);
    let cluster = match eventually(150, "the cluster to be Ready", || async {
        let c = clusters.get(id).await?;
        Ok(ready(c.status.as_ref().map(|s| &s.conditions)).then_some(c))
    })
    .await
    {
        Ok(c) => c,
        Err(e) => anyhow::bail!("{e}\n{}", dump(&f.client).await),
    };
    let status = cluster.status.clone().unwrap_or_default();
    assert!(status.cluster.has_condition(apis::cluster_status::ClusterCondition::Created), "{status:?}");
    let cidr = status.provider.network.cidr.clone().expect("cluster CIDR");
    assert_eq!((status.cluster.id.as_str(), status.cluster.network.cidr.as_str()), (id, cidr.as_str()));
    // `aws-operator render` of the same objects, with nothing recorded, plans the ranges the
    // daemon allocated: the cluster's first, then its pools in name order.
    let planned = render_summary(f, id).await?;
    let mds: Api<AWSMachineDeployment> = Api::namespaced(f.client.clone(), NS);
    let mut allocated = vec![format!("AWSCluster {NS}/{id}: CIDR {cidr}")];
    for pool in ["np001", "np002"] {
        let md = mds.get(pool).await?;
        let subnet = md.annotations().get("machine-deployment.giantswarm.io/subnet").cloned().unwrap_or_default();
        allocated.push(format!("AWSMachineDeployment {NS}/{pool}: CIDR {subnet}"));
    }
    assert_eq!(planned, allocated, "render's plan and the daemon's ranges differ");
    assert_eq!(cidr, "10.1.0.0/24", "the cluster allocates before its pools");
    let endpoint = status.control_plane_endpoint.clone().expect("controlPlaneEndpoint");
    assert_eq!(endpoint.host, format!("api.{id}.k8s.gauss.eu-central-1.aws.gigantic.io"));

    // Every kind of stack, in the right account, with tags and outputs.
    let tenant = f.tenant_clients().await?;
    assert_eq!(tenant.account_id, f.tenant_account);
    assert_eq!(cp.account_id, f.cp_account);
    let tenant_stacks = stacks_of(&tenant).await?;
    let cp_stacks = stacks_of(&cp).await?;
    let want_tenant = [
        format!("cluster-{id}-tccp"),
        format!("cluster-{id}-tccpn"),
        format!("cluster-{id}-tcnp-np001"),
        format!("cluster-{id}-tcnp-np002"),
    ];
    let want_cp = [
        format!("cluster-{id}-tccpi"),
        format!("cluster-{id}-tccpf"),
        format!("cluster-{id}-tcnpf-np001"),
        format!("cluster-{id}-tcnpf-np002"),
    ];
    for name in &want_tenant {
        let s = tenant_stacks
            .get(name)
            .unwrap_or_else(|| panic!("tenant stack {name} missing: {:?}", tenant_stacks.keys()));
        assert_eq!(s.tags.get(&format!("kubernetes.io/cluster/{id}")).map(String::as_str), Some("owned"), "{name}");
        assert_eq!(s.tags.get("giantswarm.io/cluster").map(String::as_str), Some(id), "{name}");
        assert_eq!(s.outputs.get("OperatorVersion").map(String::as_str), Some(VERSION), "{name}");
        assert!(s.template_hash().is_some(), "{name} has a TemplateHash output");
        assert!(s.termination_protection, "{name} is protected");
    }
    for name in &want_cp {
        assert!(cp_stacks.contains_key(name), "management stack {name} missing: {:?}", cp_stacks.keys());
        assert!(!tenant_stacks.contains_key(name), "{name} must not be in the tenant account");
    }
    assert_eq!(tenant_stacks[&want_tenant[1]].outputs.get("MasterReplicas").map(String::as_str), Some("3"));

    // The VPC, subnets and ASGs through EC2 and Auto Scaling.
    let vpc_id = status.provider.network.vpc_id.clone().expect("vpcID");
    let vpcs = tenant.ec2.describe_vpcs().vpc_ids(&vpc_id).send().await?;
    assert_eq!(vpcs.vpcs().first().and_then(|v| v.cidr_block()), Some(cidr.as_str()));
    let subnets = tenant
        .ec2
        .describe_subnets()
        .filters(aws_sdk_ec2::types::Filter::builder().name("vpc-id").values(&vpc_id).build())
        .send()
        .await?;
    let cidrs: Vec<&str> = subnets.subnets().iter().filter_map(|s| s.cidr_block()).collect();
    // Reference §14.2: the /24 splits in four /26, each halved into public and private /27.
    let third = cidr.split('.').nth(2).unwrap_or_default().to_string();
    for last in ["0/27", "32/27", "64/27", "96/27", "128/27", "160/27"] {
        let want = format!("10.1.{third}.{last}");
        assert!(cidrs.contains(&want.as_str()), "subnet {want} missing: {cidrs:?}");
    }
    let asgs = tenant.autoscaling.describe_auto_scaling_groups().send().await?;
    let groups = asgs.auto_scaling_groups();
    let names: Vec<(&str, Option<&str>)> = groups
        .iter()
        .map(|g| {
            let stack =
                g.tags().iter().find(|t| t.key() == Some("aws:cloudformation:stack-name")).and_then(|t| t.value());
            (g.auto_scaling_group_name().unwrap_or_default(), stack)
        })
        .collect();
    if groups.len() != 5 {
        let listed: Vec<(String, String)> =
            tenant.cfn.describe_all().await?.into_iter().map(|s| (s.name, s.status.as_str().to_string())).collect();
        panic!(
            "want 5 groups for three masters and two pools: {names:?}\nstacks: {listed:?}\n{}",
            dump(&f.client).await
        );
    }
    let mds: Api<AWSMachineDeployment> = Api::namespaced(f.client.clone(), NS);
    let np1 = mds.get("np001").await?;
    let pool_cidr =
        np1.metadata.annotations.as_ref().and_then(|a| a.get("machine-deployment.giantswarm.io/subnet")).cloned();
    assert!(pool_cidr.is_some(), "node pool CIDR annotation");
    let np2 = mds.get("np002").await?;
    let pool2 =
        np2.metadata.annotations.as_ref().and_then(|a| a.get("machine-deployment.giantswarm.io/subnet")).cloned();
    assert_ne!(pool_cidr.as_deref(), Some(cidr.as_str()));
    assert_ne!(pool2.as_deref(), Some(cidr.as_str()));
    assert_ne!(pool_cidr, pool2);

    // The bucket holds node configs whose secrets decrypt with the cluster key.
    let bucket = format!("{}-g8s-{id}", f.tenant_account);
    let objects = tenant.s3.list_objects_v2().bucket(&bucket).send().await?;
    let keys: Vec<String> = objects.contents().iter().filter_map(|o| o.key().map(str::to_string)).collect();
    for n in 1..=3 {
        let k = format!("version/{VERSION}/cloudconfig/v_6_1_0/cluster-{id}-tccpn-{n}");
        assert!(keys.contains(&k), "{k} missing: {keys:?}");
    }
    // TCCP is larger than the fixture's inline limit: it went to the bucket and by URL.
    let tccp_template = format!(
        "cloudformation/cluster-{id}-tccp/{}.json",
        tenant_stacks[&want_tenant[0]].template_hash().unwrap_or_default()
    );
    assert!(keys.contains(&tccp_template), "{tccp_template} missing: {keys:?}");
    let uploaded = tenant.s3.get_object().bucket(&bucket).key(&tccp_template).send().await?.body.collect().await?;
    assert!(uploaded.into_bytes().len() > TEMPLATE_BODY_LIMIT, "the uploaded TCCP template is over the inline limit");
    // A node pool's template is under the limit: it is sent inline.
    assert!(
        !keys.iter().any(|k| k.starts_with(&format!("cloudformation/cluster-{id}-tcnp-"))),
        "TCNP is sent inline: {keys:?}"
    );
    let worker_key = format!("version/{VERSION}/cloudconfig/v_6_1_0/cluster-{id}-tcnp-np001");
    assert!(keys.contains(&worker_key), "{worker_key} missing: {keys:?}");
    // The operator issued the cluster's certificates and encryption key: the node configs carry
    // exactly what its Secrets hold.
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(f.client.clone(), NS);
    let secret_text = |secret: k8s_openapi::api::core::v1::Secret, key: &str| -> anyhow::Result<String> {
        let labels = secret.metadata.labels.clone().unwrap_or_default();
        anyhow::ensure!(
            labels.get("pki.giantswarm.io/issued-by").map(String::as_str) == Some("cluster-operators"),
            "{:?} was issued by the operator",
            secret.metadata.name
        );
        let data = secret.data.unwrap_or_default();
        Ok(String::from_utf8(data.get(key).map(|b| b.0.clone()).unwrap_or_default())?)
    };
    let worker_private_key = secret_text(secrets.get(&format!("{id}-worker")).await?, "key")?;
    assert!(worker_private_key.contains("-----BEGIN PRIVATE KEY-----"), "a PEM key was issued");
    let plain = decrypted_file(&tenant, &bucket, &worker_key, "worker-key.pem.enc", &worker_private_key).await?;
    assert_eq!(plain, worker_private_key, "the worker key of the node config is the issued one");
    // A master's config carries the API server's encryption-provider config, sealed the same way.
    let master_key = format!("version/{VERSION}/cloudconfig/v_6_1_0/cluster-{id}-tccpn-1");
    let encryption_config = secret_text(secrets.get(&format!("{id}-encryption-provider-config")).await?, "encryption")?;
    let aes_key = encryption_config
        .lines()
        .find_map(|l| l.trim().strip_prefix("secret: "))
        .map(str::to_string)
        .unwrap_or_default();
    assert_eq!(base64::engine::general_purpose::STANDARD.decode(&aes_key)?.len(), 32, "a 32-byte AES key");
    let plain = decrypted_file(&tenant, &bucket, &master_key, "k8s-encryption-config.yaml.enc", &aes_key).await?;
    assert!(plain.contains("kind: EncryptionConfiguration"), "an EncryptionConfiguration");
    assert_eq!(plain, encryption_config, "the master carries the issued encryption-provider config");
    let key = tenant.kms.describe_key().key_id(format!("alias/{id}")).send().await?;
    let key_id = key.key_metadata().map(|m| m.key_id().to_string()).unwrap_or_default();
    let rotation = tenant.kms.get_key_rotation_status().key_id(&key_id).send().await?;
    assert!(rotation.key_rotation_enabled(), "key rotation");
    let policy = tenant.s3.get_bucket_policy().bucket(&bucket).send().await?;
    let policy = policy.policy().unwrap_or_default();
    assert!(policy.contains("aws:SecureTransport"));
    assert!(policy.contains("DenyUploadsWithoutSseKms") && policy.contains("DenyUploadsWithAnotherKey"), "{policy}");
    let pab = tenant.s3.get_public_access_block().bucket(&bucket).send().await?;
    assert!(pab.public_access_block_configuration().is_some_and(|c| c.block_public_acls() == Some(true)));
    // The config bucket is encrypted with the cluster's key, and the node configs with it.
    let key_arn = key.key_metadata().and_then(|m| m.arn()).unwrap_or_default().to_string();
    let encryption = tenant.s3.get_bucket_encryption().bucket(&bucket).send().await?;
    let rule = encryption.server_side_encryption_configuration().and_then(|c| c.rules().first()).expect("a rule");
    let default = rule.apply_server_side_encryption_by_default().expect("default encryption");
    assert_eq!(default.sse_algorithm().as_str(), "aws:kms");
    assert_eq!(default.kms_master_key_id(), Some(key_arn.as_str()), "the cluster's key");
    assert_eq!(rule.bucket_key_enabled(), Some(true), "bucket key on");
    let stored = tenant.s3.head_object().bucket(&bucket).key(&worker_key).send().await?;
    assert_eq!(stored.ssekms_key_id(), Some(key_arn.as_str()), "the node config is stored with the cluster's key");
    // The bucket policy refuses uploads without the cluster's key, whoever makes them.
    for (what, sse, key) in [
        ("no encryption header", None, None),
        ("SSE-S3", Some(aws_sdk_s3::types::ServerSideEncryption::Aes256), None),
        (
            "another KMS key",
            Some(aws_sdk_s3::types::ServerSideEncryption::AwsKms),
            Some("arn:aws:kms:eu-west-1:000000000000:key/other"),
        ),
    ] {
        let refused = tenant
            .s3
            .put_object()
            .bucket(&bucket)
            .key("unencrypted-probe")
            .body(b"{}".to_vec().into())
            .set_server_side_encryption(sse)
            .set_ssekms_key_id(key.map(str::to_string))
            .send()
            .await;
        let status = refused.as_ref().err().and_then(|e| e.raw_response()).map(|r| r.status().as_u16());
        assert_eq!(status, Some(403), "an upload with {what} is refused: {refused:?}");
    }

    // The cluster zone is delegated from the intermediate zone: NS with its name servers, TTL 300.
    let zone_id = tenant_stacks[&want_tenant[0]].outputs.get("HostedZoneID").cloned().expect("HostedZoneID");
    let zone = tenant.route53.get_hosted_zone().id(&zone_id).send().await?;
    let mut servers: Vec<String> = zone.delegation_set().map(|d| d.name_servers().to_vec()).unwrap_or_default();
    servers.sort();
    assert!(!servers.is_empty(), "the cluster zone has name servers");
    assert_eq!(delegation(parent_id.clone()).await?, Some((Some(300), servers)), "the NS delegation");

    // Management-cluster objects.
    let svc: Api<k8s_openapi::api::core::v1::Service> = Api::namespaced(f.client.clone(), id);
    assert!(svc.get_opt("master").await?.is_some(), "Service master");

    // Scale np001: only its stack updates.
    let hashes = |stacks: &BTreeMap<String, aws_stacks::state::StackView>| -> BTreeMap<String, Option<String>> {
        stacks.iter().map(|(k, v)| (k.clone(), v.template_hash().map(str::to_string))).collect()
    };
    // Ready is not the end of every update: each pool admits the other once both exist, which
    // may update the first pool's stack after the cluster is Ready. Start from settled stacks.
    // Settled means converged: every pool's stack admits the other pool's group, and nothing
    // changed over 3 s.
    let admits_each_other = |stacks: &BTreeMap<String, aws_stacks::state::StackView>| {
        let pools: Vec<_> = stacks.iter().filter(|(n, _)| n.contains("-tcnp-")).collect();
        pools.len() == 2
            && pools.iter().all(|(name, view)| {
                let peers = view.outputs.get("PeerSecurityGroups").cloned().unwrap_or_default();
                pools.iter().filter(|(other, _)| other != name).all(|(_, other)| {
                    other.outputs.get("SecurityGroupID").is_some_and(|g| peers.split(',').any(|p| p.trim() == g))
                })
            })
    };
    let settled = eventually(120, "the pools to admit each other and the stacks to settle", || async {
        let before = stacks_of(&tenant).await?;
        let (t1, c1) = (hashes(&before), hashes(&stacks_of(&cp).await?));
        tokio::time::sleep(std::time::Duration::from_secs(3)).await;
        let after = stacks_of(&tenant).await?;
        let (t2, c2) = (hashes(&after), hashes(&stacks_of(&cp).await?));
        let unusable: Vec<_> =
            after.iter().filter(|(_, v)| !v.status.is_usable()).map(|(n, v)| format!("{n} {:?}", v.status)).collect();
        if t1 == t2 && c1 == c2 && unusable.is_empty() && admits_each_other(&after) {
            return Ok(Some((t2, c2)));
        }
        // Why not yet, for the timeout's message.
        let peers: Vec<_> = after
            .iter()
            .filter(|(n, _)| n.contains("-tcnp-"))
            .map(|(n, v)| {
                format!(
                    "{n}: group {:?} admits {:?}",
                    v.outputs.get("SecurityGroupID"),
                    v.outputs.get("PeerSecurityGroups")
                )
            })
            .collect();
        anyhow::bail!(
            "tenant stacks changed: {}, management stacks changed: {}, not usable: {unusable:?}, pools: {peers:?}",
            t1 != t2,
            c1 != c2
        )
    })
    .await?;
    let (before_tenant, before_cp) = settled;
    mds.patch(
        "np001",
        &PatchParams::default(),
        &Patch::Merge(&serde_json::json!({"spec": {"nodePool": {"scaling": {"max": 7}}}})),
    )
    .await?;
    let np_stack = format!("cluster-{id}-tcnp-np001");
    let updated = eventually(120, "the pool stack to update", || async {
        let s = stacks_of(&tenant).await?;
        Ok((s.get(&np_stack).and_then(|v| v.template_hash().map(str::to_string)) != before_tenant[&np_stack])
            .then_some(s))
    })
    .await?;
    // Let the operator settle, then compare.
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let after_views = stacks_of(&tenant).await?;
    let after_tenant = hashes(&after_views);
    let after_cp = hashes(&stacks_of(&cp).await?);
    for (name, hash) in &before_tenant {
        if name != &np_stack {
            assert_eq!(
                after_tenant.get(name),
                Some(hash),
                "{name} must not change when np001 scales; its outputs now: {:?}",
                after_views.get(name).map(|v| &v.outputs)
            );
        }
    }
    assert_eq!(after_cp, before_cp, "management stacks must not change when np001 scales");
    let asg_name = updated[&np_stack].outputs.get("AutoScalingGroupName").cloned().unwrap_or_default();
    let asg = tenant.autoscaling.describe_auto_scaling_groups().auto_scaling_group_names(&asg_name).send().await?;
    assert_eq!(asg.auto_scaling_groups().first().and_then(|g| g.max_size()), Some(7));

    // Delete the cluster: the operator deletes its node pools and control plane with it.
    let cps: Api<AWSControlPlane> = Api::namespaced(f.client.clone(), NS);
    clusters.delete(id, &DeleteParams::default()).await?;
    let gone = eventually(120, "every object to be gone", || async {
        let left = clusters.get_opt(id).await?.is_some() as usize
            + cps.get_opt("cp001").await?.is_some() as usize
            + mds.get_opt("np001").await?.is_some() as usize
            + mds.get_opt("np002").await?.is_some() as usize;
        Ok((left == 0).then_some(()))
    })
    .await;
    if let Err(e) = gone {
        anyhow::bail!(
            "{e}\n{}\ntenant stacks: {:?}\ncp stacks: {:?}",
            dump(&f.client).await,
            stacks_of(&tenant).await.map(|m| m.into_iter().map(|(k, v)| (k, v.status)).collect::<Vec<_>>()),
            stacks_of(&cp).await.map(|m| m.keys().cloned().collect::<Vec<_>>())
        );
    }
    assert_eq!(delegation(parent_id).await?, None, "the delegation is removed with the cluster");
    assert!(stacks_of(&tenant).await?.is_empty(), "tenant stacks left");
    assert!(stacks_of(&cp).await?.is_empty(), "management stacks left");
    let buckets = tenant.s3.list_buckets().send().await?;
    assert!(buckets.buckets().iter().all(|b| !b.name().unwrap_or_default().contains(id)), "buckets left");
    let key = tenant.kms.describe_key().key_id(&key_id).send().await?;
    assert_eq!(key.key_metadata().and_then(|m| m.key_state()), Some(&aws_sdk_kms::types::KeyState::PendingDeletion));
    Ok(())
}

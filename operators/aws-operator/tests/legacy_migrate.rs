//! `aws-operator migrate` against a legacy cluster the operator built on moto: the fixture
//! `AWSConfig` is applied and the operator's legacy resource set creates its key, buckets and
//! three stacks; then the real binary plans the cluster's move to node pools, from the object's
//! name (read from the management cluster) and from a file (as `kubectl get -o yaml` prints it).
//! The ids in the plan are checked against what each service's own API reports: the VPC and the
//! peering (EC2), the KMS key (KMS), the bucket (S3), the hosted zones (Route53), the master and
//! the workers (EC2, by their instance types), the etcd volume (EC2, by its name tag), the
//! groups (Auto Scaling). The printed objects pass `aws-operator render` and are accepted by the
//! API server through `kubectl apply --validate=strict`. Bad input names the field or object
//! and the fix, with the exit code of any failed command.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use aws_sdk_ec2::types::Filter;
use aws_stacks::names;
use serde_json::Value;
use support::legacy::{apply, installation_zone, legacy_cluster, wait_created};
use support::*;

/// Run the binary with `args` as a person would: the fixture's kubeconfig, moto's endpoint, the
/// daemon's AWS flags and a key of its own. Exit code, stdout, stderr.
fn aws_operator(f: &Fixture, args: &[&str]) -> anyhow::Result<(i32, String, String)> {
    let out = Command::new(env!("CARGO_BIN_EXE_aws-operator"))
        .args(args)
        .args(["--region", REGION])
        .args(["--aws-endpoint-url", &f.moto.endpoint()])
        .args(["--control-plane-role-arn", &format!("arn:aws:iam::{}:role/aws-operator", f.cp_account)])
        .args(["--tenant-role-external-id", TENANT_EXTERNAL_ID])
        .env("KUBECONFIG", f.env.kubeconfig_path())
        .env("AWS_ACCESS_KEY_ID", "AKIAMIGRATECOMMAND")
        .env("AWS_SECRET_ACCESS_KEY", "secret")
        .env_remove("AWS_PROFILE")
        .env_remove("AWS_OPERATOR_CREDENTIAL_NAMESPACES")
        .output()?;
    Ok((out.status.code().unwrap_or(-1), String::from_utf8(out.stdout)?, String::from_utf8(out.stderr)?))
}

/// `migrate args… -o json`, which must succeed: the plan as JSON.
fn migrate_json(f: &Fixture, args: &[&str]) -> anyhow::Result<Value> {
    let mut all = vec!["migrate"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--output", "json"]);
    let (code, stdout, stderr) = aws_operator(f, &all)?;
    anyhow::ensure!(code == 0, "migrate {args:?} failed ({code}): {stderr}");
    Ok(serde_json::from_str(&stdout)?)
}

/// The ids of the plan's `section` entries that are `what`.
fn ids(plan: &Value, section: &str, what: &str) -> Vec<String> {
    plan[section]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|d| d["what"] == what)
        .filter_map(|d| d["id"].as_str().map(str::to_string))
        .collect()
}

/// The system kubectl on the fixture's API server, with a cache of its own.
fn kubectl(f: &Fixture, home: &Path, args: &[&str]) -> anyhow::Result<String> {
    let bin = std::env::var_os("KUBECTL").map_or_else(|| PathBuf::from("/usr/bin/kubectl"), PathBuf::from);
    let out = Command::new(bin)
        .arg("--kubeconfig")
        .arg(f.env.kubeconfig_path())
        .arg("--cache-dir")
        .arg(home.join("cache"))
        .args(args)
        .env_remove("KUBECONFIG")
        .env("HOME", home)
        .output()?;
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    anyhow::ensure!(out.status.success(), "kubectl {args:?} failed: {stderr}\n{stdout}");
    Ok(stdout.into_owned())
}

/// Running instances of `instance_type` in the account, sorted.
async fn running(aws: &aws_operator::aws::AccountClients, instance_type: &str) -> anyhow::Result<Vec<String>> {
    let out = aws
        .ec2
        .describe_instances()
        .filters(Filter::builder().name("instance-state-name").values("running").build())
        .filters(Filter::builder().name("instance-type").values(instance_type).build())
        .send()
        .await?;
    let mut ids: Vec<String> = out
        .reservations()
        .iter()
        .flat_map(|r| r.instances())
        .filter_map(|i| i.instance_id().map(str::to_string))
        .collect();
    ids.sort();
    Ok(ids)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrate_plans_a_live_legacy_cluster_with_its_real_ids_and_prints_objects_render_and_the_api_accept()
-> anyhow::Result<()> {
    let mut f = Fixture::start().await?;
    f.apply_basics().await?;
    let id = "m4g8r";
    f.credential_secret(id).await?;
    let cp = f.control_plane_clients().await?;
    let tenant = f.tenant_clients().await?;
    installation_zone(&cp).await?;
    let config = legacy_cluster(&f, id).await?;
    f.start_operator().await?;
    apply(&f, &config).await?;
    wait_created(&f, id, 300).await?;

    // From the object's name, read from the management cluster.
    let plan = migrate_json(&f, &[id, "-n", NS])?;
    println!("{}", serde_json::to_string_pretty(&plan["steps"])?);

    // The VPC of the cluster's block and its peering, through EC2.
    let vpcs = tenant
        .ec2
        .describe_vpcs()
        .filters(Filter::builder().name("cidr").values("10.11.0.0/16").build())
        .send()
        .await?;
    let vpc: Vec<String> = vpcs.vpcs().iter().filter_map(|v| v.vpc_id().map(str::to_string)).collect();
    assert_eq!(vpc.len(), 1, "one VPC holds the cluster's block: {vpc:?}");
    assert_eq!(ids(&plan, "recreated", "VPC"), vpc);
    let peerings = tenant
        .ec2
        .describe_vpc_peering_connections()
        .filters(Filter::builder().name("requester-vpc-info.vpc-id").values(&vpc[0]).build())
        .filters(Filter::builder().name("status-code").values("active").build())
        .send()
        .await?;
    let peering: Vec<String> = peerings
        .vpc_peering_connections()
        .iter()
        .filter_map(|p| p.vpc_peering_connection_id().map(str::to_string))
        .collect();
    assert_eq!(ids(&plan, "recreated", "VPC peering"), peering);

    // The key behind the cluster's alias, through KMS; the bucket, through S3.
    let key = tenant.kms.describe_key().key_id(names::kms_alias(id)).send().await?;
    let key_id = key.key_metadata().map(|m| m.key_id().to_string()).unwrap_or_default();
    assert!(!key_id.is_empty());
    assert_eq!(ids(&plan, "kept", "KMS key"), [key_id]);
    let buckets = tenant.s3.list_buckets().send().await?;
    let ours: Vec<String> = buckets
        .buckets()
        .iter()
        .filter_map(|b| b.name().map(str::to_string))
        .filter(|b| b.starts_with(&names::bucket(&f.tenant_account, id)))
        .collect();
    assert!(ours.contains(&names::bucket(&f.tenant_account, id)), "the cluster bucket exists: {ours:?}");
    let mut kept_buckets = ids(&plan, "kept", "S3 bucket");
    kept_buckets.sort();
    let mut ours = ours;
    ours.sort();
    assert_eq!(kept_buckets, ours);

    // The cluster's zones, public and private, through Route53.
    let zone_name = format!("{}.", names::tenant_base_domain(id, support::legacy::ZONE));
    let zones = tenant.route53.list_hosted_zones_by_name().dns_name(&zone_name).send().await?;
    let mut public = Vec::new();
    let mut private = Vec::new();
    // moto's CloudFormation creates both zones without their VPC binding, so a zone is told
    // apart by where its `api` record points: the public or the internal API load balancer,
    // as Elastic Load Balancing names them.
    let elbs = tenant.elb.describe_load_balancers().load_balancer_names(format!("{id}-api")).send().await?;
    let public_api = elbs.load_balancer_descriptions()[0].dns_name().unwrap_or_default().to_string();
    for z in zones.hosted_zones().iter().filter(|z| z.name() == zone_name) {
        let zid = z.id().trim_start_matches("/hostedzone/").to_string();
        let records = tenant.route53.list_resource_record_sets().hosted_zone_id(&zid).send().await?;
        let api = records
            .resource_record_sets()
            .iter()
            .find(|r| r.name() == format!("api.{zone_name}"))
            .and_then(|r| r.resource_records().first())
            .map(|r| r.value().to_string())
            .unwrap_or_default();
        if api.trim_end_matches('.') == public_api.trim_end_matches('.') {
            public.push(zid);
        } else {
            private.push(zid);
        }
    }
    assert_eq!((public.len(), private.len()), (1, 1), "a public and an internal zone {zone_name}");
    let strip =
        |v: Vec<String>| v.into_iter().map(|z| z.trim_start_matches("/hostedzone/").to_string()).collect::<Vec<_>>();
    assert_eq!(strip(ids(&plan, "recreated", "public hosted zone")), public);
    assert_eq!(strip(ids(&plan, "recreated", "internal hosted zone")), private);

    // The master and the workers, through EC2 by their shapes (m4.xlarge and m4.2xlarge in the
    // fixture); the etcd volume by its name tag; the groups through Auto Scaling.
    let master = running(&tenant, "m4.xlarge").await?;
    assert_eq!(master.len(), 1, "one master: {master:?}");
    assert_eq!(ids(&plan, "replaced", "master"), master);
    let workers = running(&tenant, "m4.2xlarge").await?;
    assert_eq!(workers.len(), 3, "three workers: {workers:?}");
    assert_eq!(ids(&plan, "replaced", "worker"), workers);
    let volumes = tenant
        .ec2
        .describe_volumes()
        .filters(Filter::builder().name("tag:Name").values(names::master_etcd_volume(id, 0)).build())
        .send()
        .await?;
    let volume: Vec<String> = volumes.volumes().iter().filter_map(|v| v.volume_id().map(str::to_string)).collect();
    assert_eq!(volume.len(), 1, "one etcd volume: {volume:?}");
    assert_eq!(ids(&plan, "replaced", "etcd volume"), volume);
    for (what, instances) in [("master group", &master), ("worker group", &workers)] {
        let group = ids(&plan, "replaced", what);
        let described =
            tenant.autoscaling.describe_auto_scaling_groups().auto_scaling_group_names(&group[0]).send().await?;
        let mut members: Vec<String> = described
            .auto_scaling_groups()
            .iter()
            .flat_map(|g| g.instances())
            .filter_map(|i| i.instance_id().map(str::to_string))
            .collect();
        members.sort();
        assert_eq!(&members, instances, "{what} {} holds them", group[0]);
    }

    // The steps name those ids, in the order that keeps etcd's data: a snapshot of the live
    // volume first, the master stopped before the second one, the stacks deleted before the
    // objects are applied.
    let steps: Vec<String> = plan["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .map(|s| format!("{} {}", s["title"].as_str().unwrap_or_default(), s["commands"]))
        .collect();
    let at = |needle: &str| steps.iter().position(|s| s.contains(needle)).unwrap_or(usize::MAX);
    assert_eq!(at(&format!("ec2 create-snapshot --volume-id {}", volume[0])), 0, "{steps:#?}");
    assert!(
        at(&format!("--auto-scaling-group-name {}", ids(&plan, "replaced", "worker group")[0]))
            < at("operatorkit.giantswarm.io/paused=true")
    );
    assert!(at(&format!("instance-terminated --instance-ids {}", master[0])) < at("etcd is stopped"));
    assert!(at("delete-stack") < at("kubectl apply"));
    assert!(at("kubectl apply") < steps.len());

    // From a file, as `kubectl get -o yaml` prints the object: the same plan.
    let dir = tempfile::tempdir()?;
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home)?;
    let file = dir.path().join("awsconfig.yaml");
    std::fs::write(&file, kubectl(&f, &home, &["get", "awsconfig", "-n", NS, id, "-o", "yaml"])?)?;
    let from_file = migrate_json(&f, &[file.to_str().expect("utf-8 path")])?;
    assert_eq!(from_file, plan, "the file and the name give the same plan");

    // As the original's tooling wrote it before Releases: no release or version label, this
    // operator's version in `spec.versionBundle.version`. The plan is the same, and the objects
    // carry the Release the controller routes such an object to (v20.0.0 gives aws-operator this
    // version).
    let mut unlabelled: Value =
        serde_json::from_str(&kubectl(&f, &home, &["get", "awsconfig", "-n", NS, id, "-o", "json"])?)?;
    let labels = unlabelled["metadata"]["labels"].as_object_mut().expect("labels");
    labels.remove(apis::labels::RELEASE_VERSION);
    labels.remove(apis::labels::AWS_OPERATOR_VERSION);
    unlabelled["spec"]["versionBundle"]["version"] = Value::from(VERSION);
    let bundle_file = dir.path().join("awsconfig-unlabelled.json");
    std::fs::write(&bundle_file, serde_json::to_string(&unlabelled)?)?;
    let by_bundle = migrate_json(&f, &[bundle_file.to_str().expect("utf-8 path")])?;
    assert_eq!(by_bundle["steps"], plan["steps"], "the version bundle gives the same plan");
    let (code, printed_by_bundle, stderr) = aws_operator(&f, &["migrate", bundle_file.to_str().expect("utf-8 path")])?;
    assert_eq!(code, 0, "{stderr}");
    let release_lines: Vec<&str> =
        printed_by_bundle.lines().filter(|l| l.contains(apis::labels::RELEASE_VERSION)).collect();
    assert_eq!(release_lines.len(), 3, "the three objects carry a release label:\n{printed_by_bundle}");
    assert!(
        release_lines.iter().all(|l| l.contains("20.0.0")),
        "the objects carry the routed release: {release_lines:?}"
    );
    // A version bundle no Release gives: refused, naming the field and the fix.
    unlabelled["spec"]["versionBundle"]["version"] = Value::from("4.7.0");
    std::fs::write(&bundle_file, serde_json::to_string(&unlabelled)?)?;
    let (code, stdout, stderr) = aws_operator(&f, &["migrate", bundle_file.to_str().expect("utf-8 path")])?;
    assert_eq!((code, stdout.as_str()), (1, ""), "{stderr}");
    assert!(stderr.contains("spec.versionBundle.version") && stderr.contains("4.7.0"), "{stderr}");

    // The printed file (plan as comments, then the objects) passes `render`, with the Release
    // as the management cluster holds it, and the API server accepts the objects under strict
    // validation.
    let (code, printed, stderr) = aws_operator(&f, &["migrate", id, "-n", NS])?;
    assert_eq!(code, 0, "{stderr}");
    let migrated = dir.path().join("migrated.yaml");
    std::fs::write(&migrated, &printed)?;
    let release = dir.path().join("release.yaml");
    std::fs::write(&release, kubectl(&f, &home, &["get", "release", "v20.0.0", "-o", "yaml"])?)?;
    let render = Command::new(env!("CARGO_BIN_EXE_aws-operator"))
        .args(["render", "--summary", "--installation", &f.installation])
        .arg(&migrated)
        .arg(&release)
        .output()?;
    let rendered = String::from_utf8(render.stdout)?;
    assert!(render.status.success(), "render: {}\n{rendered}", String::from_utf8_lossy(&render.stderr));
    for stack in [
        format!("cluster-{id}-tccpi"),
        format!("cluster-{id}-tccp"),
        format!("cluster-{id}-tccpf"),
        format!("cluster-{id}-tccpn"),
        format!("cluster-{id}-tcnp-w1h6c"),
    ] {
        assert!(rendered.contains(&stack), "render plans {stack}:\n{rendered}");
    }
    assert!(rendered.contains("10.11.0.0/16 (recorded)"), "the VPC block is the legacy cluster's:\n{rendered}");

    // The operator is stopped first: this proves the objects are valid, not the migration.
    f.kill_operator().await;
    kubectl(&f, &home, &["apply", "--validate=strict", "-f", migrated.to_str().expect("utf-8 path")])?;
    let listed =
        kubectl(&f, &home, &["get", "awsclusters,awscontrolplanes,awsmachinedeployments", "-n", NS, "-o", "name"])?;
    for object in [
        format!("awscluster.infrastructure.giantswarm.io/{id}"),
        "awscontrolplane.infrastructure.giantswarm.io/m0k2q".into(),
        "awsmachinedeployment.infrastructure.giantswarm.io/w1h6c".into(),
    ] {
        assert!(listed.contains(&object), "{object} applied:\n{listed}");
    }

    // Bad input: an unknown name, and a file whose object lacks its master. Both fail with the
    // object or field and the fix, and nothing is printed on stdout.
    let (code, stdout, stderr) = aws_operator(&f, &["migrate", "nosuch", "-n", NS])?;
    assert_eq!((code, stdout.as_str()), (1, ""), "{stderr}");
    assert!(stderr.contains("no AWSConfig nosuch in namespace org-acme"), "{stderr}");
    let broken = dir.path().join("broken.yaml");
    let text = std::fs::read_to_string(&file)?;
    let start = text.find("    masters:\n").expect("the masters");
    let end = start + text[start..].find("    region:").expect("the region after the masters");
    std::fs::write(&broken, format!("{}    masters: []\n{}", &text[..start], &text[end..]))?;
    let (code, stdout, stderr) = aws_operator(&f, &["migrate", broken.to_str().expect("utf-8 path")])?;
    assert_eq!((code, stdout.as_str()), (1, ""), "{stderr}");
    assert!(stderr.contains("spec.aws.masters"), "{stderr}");
    Ok(())
}

//! `aws-operator render`: the stacks of the example cluster, the summary, `--stack`, IPAM over
//! the given objects, and the errors a user gets for invalid input. Nothing here needs AWS or
//! Kubernetes.

use std::path::{Path, PathBuf};
use std::process::Command;

use aws_operator::plan::{self, CidrSource, Delivery, Objects, Settings};
use aws_operator::render::{self, RenderArgs};
use clap::Parser;

#[derive(Parser, Debug)]
struct Cli {
    #[command(flatten)]
    args: RenderArgs,
}

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/examples")
}

fn cluster_yaml() -> PathBuf {
    examples().join("aws-cluster.yaml")
}

fn release_yaml() -> PathBuf {
    examples().join("release-v20.0.0.yaml")
}

fn args(extra: &[&str], files: &[&Path]) -> RenderArgs {
    let mut argv: Vec<String> = vec!["render".into()];
    argv.extend(extra.iter().map(|s| s.to_string()));
    argv.extend(files.iter().map(|p| p.display().to_string()));
    Cli::try_parse_from(argv).expect("valid arguments").args
}

fn render(extra: &[&str], files: &[&Path]) -> anyhow::Result<String> {
    let mut out = Vec::new();
    render::run(&args(extra, files), &mut out)?;
    Ok(String::from_utf8(out)?)
}

/// The example cluster with `from` replaced by `to`, written to a temporary file.
fn edited_cluster(dir: &tempfile::TempDir, from: &str, to: &str) -> PathBuf {
    let text = std::fs::read_to_string(cluster_yaml()).expect("example readable");
    assert!(text.contains(from), "the example no longer contains {from:?}");
    let path = dir.path().join("cluster.yaml");
    std::fs::write(&path, text.replacen(from, to, 1)).expect("temp file writable");
    path
}

const EXPECTED: [(&str, &str); 6] = [
    ("cluster-al9qy-tccpi", "management 111111111111"),
    ("cluster-al9qy-tccp", "tenant 000000000000"),
    ("cluster-al9qy-tccpf", "management 111111111111"),
    ("cluster-al9qy-tccpn", "tenant 000000000000"),
    ("cluster-al9qy-tcnp-g3j50", "tenant 000000000000"),
    ("cluster-al9qy-tcnpf-g3j50", "management 111111111111"),
];

#[test]
fn the_example_renders_six_stacks_in_creation_order() -> anyhow::Result<()> {
    let objects = Objects::load(&[cluster_yaml(), release_yaml()])?;
    let settings = Settings::from_args(&args(&[], &[&cluster_yaml()]))?;
    let plans = plan::plan(&objects, &settings)?;
    assert_eq!(plans.len(), 1);
    let plan = &plans[0];
    assert_eq!(plan.cluster, "AWSCluster org-acme/al9qy");
    assert_eq!(plan.release, "v20.0.0");
    let names: Vec<&str> = plan.stacks.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, EXPECTED.map(|(n, _)| n));
    for (stack, (_, account)) in plan.stacks.iter().zip(EXPECTED) {
        assert_eq!(format!("{} {}", stack.account_label(), stack.account_id), account, "{}", stack.name);
        assert!(stack.tags.contains(&("giantswarm.io/installation".into(), "gauss".into())), "{}", stack.name);
        assert!(stack.tags.contains(&("giantswarm.io/cluster".into(), "al9qy".into())), "{}", stack.name);
        assert!(stack.template.outputs.contains_key("TemplateHash"), "{}", stack.name);
    }
    // IPAM: the lowest /24 of the default range for the cluster, the next for the node pool.
    let cidrs: Vec<String> = plan.cidrs.iter().map(|a| a.cidr.to_string()).collect();
    assert_eq!(cidrs, ["10.1.0.0/24", "10.1.1.0/24"]);
    assert!(plan.cidrs.iter().all(|a| matches!(a.source, CidrSource::Allocated(_))));

    let out = render(&[], &[&cluster_yaml(), &release_yaml()])?;
    let positions: Vec<usize> = EXPECTED
        .iter()
        .map(|(name, _)| {
            out.find(&format!("=== stack {name}\n")).unwrap_or_else(|| panic!("{name} missing in:\n{out}"))
        })
        .collect();
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "stacks out of order: {positions:?}");
    // Values only AWS knows are placeholders naming where they come from.
    assert!(out.contains("<output VPCID of cluster-al9qy-tccp>"), "{out}");
    assert!(out.contains("<output VPCPeeringConnectionID of cluster-al9qy-tccp>"));
    assert!(out.contains("<ARN of KMS key alias/al9qy>"));
    assert!(out.contains("\"ami-4230.2.4\""), "the default AMI placeholder names the Flatcar version");
    assert!(out.contains("\"10.1.0.0/24\""));
    assert!(out.contains("\"OperatorVersion\""));
    assert!(out.contains(env!("CARGO_PKG_VERSION")));
    Ok(())
}

#[test]
fn flags_reach_the_templates() -> anyhow::Result<()> {
    let ami = examples().join("ami.json");
    let flags = [
        "--ami-file",
        ami.to_str().unwrap_or_default(),
        "--tenant-account-id",
        "222222222222",
        "--installation",
        "nimbus",
        "--ipam-range",
        "10.50.0.0/16",
        "--operator-version",
        "16.3.0",
        "--control-plane-vpc-cidr",
        "10.0.0.0/16",
        "--route-table",
        "rtb-0aaa=nimbus_private_0",
    ];
    let out = render(&flags, &[&cluster_yaml(), &release_yaml()])?;
    assert!(out.contains("\"ami-0a1b2c3d4e5f60001\""), "the eu-central-1 AMI of ami.json");
    assert!(!out.contains("ami-4230.2.4"));
    assert!(out.contains("account: tenant 222222222222"));
    assert!(out.contains("222222222222-g8s-al9qy"), "the cluster bucket is named after the tenant account");
    assert!(out.contains("giantswarm.io/installation: nimbus"));
    assert!(out.contains("\"10.50.0.0/24\""));
    assert!(out.contains("\"16.3.0\""));
    assert!(out.contains("\"rtb-0aaa\""));
    assert!(out.contains("\"10.0.0.0/16\""));
    Ok(())
}

#[test]
fn alike_instance_types_reach_the_node_pool_group_only_when_asked_for() -> anyhow::Result<()> {
    let alike = r#"{"m5.2xlarge": [{"InstanceType": "m5.2xlarge", "WeightedCapacity": 1}, {"InstanceType": "m5a.2xlarge", "WeightedCapacity": 1}]}"#;
    let flags = ["--alike-instances", alike, "--stack", "cluster-al9qy-tcnp-g3j50"];
    // The example pool does not ask for them: no overrides.
    let out = render(&flags, &[&cluster_yaml(), &release_yaml()])?;
    assert!(!out.contains("m5a.2xlarge"), "overrides without useAlikeInstanceTypes:\n{out}");
    let dir = tempfile::tempdir()?;
    let path = edited_cluster(&dir, "useAlikeInstanceTypes: false", "useAlikeInstanceTypes: true");
    let out = render(&flags, &[&path, &release_yaml()])?;
    let json_start = out.find('{').expect("a template");
    let template: serde_json::Value = serde_json::from_str(&out[json_start..])?;
    let group = template["Resources"]
        .as_object()
        .and_then(|r| r.values().find(|v| v["Type"] == "AWS::AutoScaling::AutoScalingGroup"))
        .expect("the node pool's group");
    let overrides = &group["Properties"]["MixedInstancesPolicy"]["LaunchTemplate"]["Overrides"];
    let types: Vec<&str> =
        overrides.as_array().into_iter().flatten().filter_map(|o| o["InstanceType"].as_str()).collect();
    assert_eq!(types, ["m5.2xlarge", "m5a.2xlarge"], "{overrides}");
    assert_eq!(group["Properties"]["MixedInstancesPolicy"]["InstancesDistribution"]["SpotInstancePools"], 2);

    // A malformed list is refused naming the flag.
    let cluster = cluster_yaml().display().to_string();
    let err = Cli::try_parse_from(["render", "--alike-instances", r#"{"m5.2xlarge": "m5a"}"#, &cluster])
        .expect_err("a malformed list");
    assert!(err.to_string().contains("--alike-instances"), "{err}");
    Ok(())
}

/// The sizes of the block devices of the node pool's launch template, by device name.
fn pool_volume_sizes(out: &str) -> anyhow::Result<std::collections::BTreeMap<String, u64>> {
    let json_start = out.find('{').expect("a template");
    let template: serde_json::Value = serde_json::from_str(&out[json_start..])?;
    let launch_template = template["Resources"]
        .as_object()
        .and_then(|r| r.values().find(|v| v["Type"] == "AWS::EC2::LaunchTemplate"))
        .expect("the node pool's launch template");
    Ok(launch_template["Properties"]["LaunchTemplateData"]["BlockDeviceMappings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| Some((m["DeviceName"].as_str()?.to_string(), m["Ebs"]["VolumeSize"].as_u64()?)))
        .collect())
}

#[test]
fn volume_size_annotations_reach_the_node_pools_launch_template() -> anyhow::Result<()> {
    let flags = ["--stack", "cluster-al9qy-tcnp-g3j50"];
    // Without annotations: the log volume 15 GiB, containerd the docker volume's 100 GiB.
    let sizes = pool_volume_sizes(&render(&flags, &[&cluster_yaml(), &release_yaml()])?)?;
    assert_eq!((sizes.get("/dev/xvdf"), sizes.get("/dev/xvdi")), (Some(&15), Some(&100)), "{sizes:?}");
    let dir = tempfile::tempdir()?;
    let annotated = edited_cluster(
        &dir,
        "  name: g3j50\n  namespace: org-acme\n",
        "  name: g3j50\n  namespace: org-acme\n  annotations:\n    alpha.aws.giantswarm.io/logging-volume-size: \"40\"\n    alpha.aws.giantswarm.io/containerd-volume-size: \"250\"\n",
    );
    let sizes = pool_volume_sizes(&render(&flags, &[&annotated, &release_yaml()])?)?;
    assert_eq!((sizes.get("/dev/xvdf"), sizes.get("/dev/xvdi")), (Some(&40), Some(&250)), "{sizes:?}");
    Ok(())
}

#[test]
fn summary_lists_names_accounts_counts_and_sizes() -> anyhow::Result<()> {
    let out = render(&["--summary"], &[&cluster_yaml(), &release_yaml()])?;
    assert!(!out.contains('{'), "no template in the summary:\n{out}");
    assert!(out.contains("STACK") && out.contains("RESOURCES") && out.contains("BYTES"));
    assert!(out.contains("# AWSCluster org-acme/al9qy: CIDR 10.1.0.0/24 (allocated from 10.1.0.0/16)"), "{out}");
    assert!(out.contains("# AWSMachineDeployment org-acme/g3j50: CIDR 10.1.1.0/24 (allocated from 10.1.0.0/16)"));

    let objects = Objects::load(&[cluster_yaml(), release_yaml()])?;
    let settings = Settings::from_args(&args(&[], &[&cluster_yaml()]))?;
    let plan = plan::plan(&objects, &settings)?.remove(0);
    for stack in &plan.stacks {
        let line = out
            .lines()
            .find(|l| l.split_whitespace().next() == Some(stack.name.as_str()))
            .unwrap_or_else(|| panic!("no line for {}:\n{out}", stack.name));
        let fields: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(fields[1], stack.account_label(), "{line}");
        assert_eq!(fields[2], stack.account_id, "{line}");
        assert_eq!(fields[3], stack.template.resources.len().to_string(), "{line}");
        assert_eq!(fields[4], stack.body_len().to_string(), "{line}");
        let expected = match stack.delivery() {
            Delivery::Inline => "inline",
            Delivery::S3 { .. } => "S3",
            Delivery::TooLarge => "TOO",
        };
        assert_eq!(fields[5], expected, "{line}");
        if stack.body_len() > 51_200 {
            assert!(line.contains("s3://000000000000-g8s-al9qy/cloudformation/"), "{line}");
        }
    }
    Ok(())
}

#[test]
fn one_stack_is_printed_alone() -> anyhow::Result<()> {
    let out = render(&["--stack", "cluster-al9qy-tcnpf-g3j50"], &[&cluster_yaml(), &release_yaml()])?;
    assert_eq!(out.matches("=== stack").count(), 1, "{out}");
    assert!(out.starts_with("=== stack cluster-al9qy-tcnpf-g3j50\naccount: management 111111111111\n"), "{out}");
    let json = &out[out.find('{').unwrap_or(0)..];
    let template: serde_json::Value = serde_json::from_str(json)?;
    assert_eq!(template["AWSTemplateFormatVersion"], "2010-09-09");

    let err = render(&["--stack", "cluster-al9qy-nope"], &[&cluster_yaml(), &release_yaml()]).unwrap_err().to_string();
    assert!(err.contains("--stack cluster-al9qy-nope: no such stack"), "{err}");
    assert!(err.contains("cluster-al9qy-tccpn"), "the error lists the stacks there are: {err}");
    Ok(())
}

#[test]
fn recorded_cidrs_are_kept_and_reserved() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    // The cluster already has 10.1.1.0/24 in its status: it keeps it, and the node pool gets
    // the lowest free block, below it.
    let text = std::fs::read_to_string(cluster_yaml())?;
    let text = text.replacen(
        "    region: eu-central-1\n",
        "    region: eu-central-1\nstatus:\n  provider:\n    network:\n      cidr: 10.1.1.0/24\n",
        1,
    );
    let path = dir.path().join("cluster.yaml");
    std::fs::write(&path, text)?;
    let objects = Objects::load(&[path.clone(), release_yaml()])?;
    let settings = Settings::from_args(&args(&[], &[&path]))?;
    let plan = plan::plan(&objects, &settings)?.remove(0);
    assert_eq!(plan.cidrs[0].cidr.to_string(), "10.1.1.0/24");
    assert_eq!(plan.cidrs[0].source, CidrSource::Recorded);
    assert_eq!(plan.cidrs[1].cidr.to_string(), "10.1.0.0/24");

    // A node pool annotated with its subnet keeps it.
    let annotated = edited_cluster(
        &dir,
        "  name: g3j50\n",
        "  name: g3j50\n  annotations:\n    machine-deployment.giantswarm.io/subnet: 10.1.7.0/24\n",
    );
    let out = render(&["--summary"], &[&annotated, &release_yaml()])?;
    assert!(out.contains("# AWSMachineDeployment org-acme/g3j50: CIDR 10.1.7.0/24 (recorded)"), "{out}");
    assert!(out.contains("# AWSCluster org-acme/al9qy: CIDR 10.1.0.0/24 (allocated"), "{out}");
    Ok(())
}

#[test]
fn a_network_pool_gives_the_range() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let path = edited_cluster(&dir, "    pods:\n", "    nodes:\n      networkPool: blue\n    pods:\n");
    let pool = dir.path().join("pool.yaml");
    std::fs::write(
        &pool,
        "apiVersion: infrastructure.giantswarm.io/v1alpha3\nkind: NetworkPool\nmetadata:\n  name: blue\n  namespace: org-acme\nspec:\n  cidrBlock: 10.20.0.0/16\n",
    )?;
    let out = render(&["--summary"], &[&path, &pool, &release_yaml()])?;
    assert!(out.contains("CIDR 10.20.0.0/24 (allocated from 10.20.0.0/16)"), "{out}");

    // Without the pool's file, the error says what to add.
    let err = render(&["--summary"], &[&path, &release_yaml()]).unwrap_err().to_string();
    assert!(err.contains("AWSCluster org-acme/al9qy: spec.provider.nodes.networkPool names NetworkPool blue"), "{err}");
    Ok(())
}

#[test]
fn a_zone_outside_the_region_names_object_field_and_fix() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let path = edited_cluster(&dir, "eu-central-1b, eu-central-1c]", "eu-central-1b, us-east-1c]");
    let err = render(&[], &[&path, &release_yaml()]).unwrap_err().to_string();
    assert!(err.starts_with("AWSControlPlane org-acme/a2wax: "), "{err}");
    assert!(err.contains("spec.availabilityZones[2]"), "{err}");
    assert!(err.contains("us-east-1c"), "{err}");
    assert!(err.contains("use a zone such as eu-central-1a"), "{err}");
    Ok(())
}

#[test]
fn release_problems_are_reported() -> anyhow::Result<()> {
    // No Release file at all.
    let err = render(&[], &[&cluster_yaml()]).unwrap_err().to_string();
    assert!(err.contains("AWSCluster org-acme/al9qy"), "{err}");
    assert!(err.contains("Release v20.0.0 is not in the given files"), "{err}");

    // A Release without the containerlinux component.
    let dir = tempfile::tempdir()?;
    let text = std::fs::read_to_string(release_yaml())?;
    let text = text.replacen("    - name: containerlinux\n      version: 4230.2.4\n", "", 1);
    let release = dir.path().join("release.yaml");
    std::fs::write(&release, text)?;
    let err = render(&[], &[&cluster_yaml(), &release]).unwrap_err().to_string();
    assert!(err.contains("Release v20.0.0 has no containerlinux component (spec.components)"), "{err}");

    // Without kubernetes or etcd: no fallback version, the same error.
    let original = std::fs::read_to_string(release_yaml())?;
    for (component, lines) in [
        ("kubernetes", "    - name: kubernetes\n      version: 1.34.2\n"),
        ("etcd", "    - name: etcd\n      version: 3.5.21\n"),
    ] {
        assert!(original.contains(lines), "the example Release has {component}");
        std::fs::write(&release, original.replacen(lines, "", 1))?;
        let err = render(&[], &[&cluster_yaml(), &release]).unwrap_err().to_string();
        assert!(err.contains(&format!("Release v20.0.0 has no {component} component (spec.components)")), "{err}");
    }
    Ok(())
}

#[test]
fn other_input_errors_are_clear() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    // A node pool whose min exceeds max.
    let path = edited_cluster(&dir, "      min: 3\n", "      min: 30\n");
    let err = render(&[], &[&path, &release_yaml()]).unwrap_err().to_string();
    assert!(err.contains("AWSMachineDeployment org-acme/g3j50: spec.nodePool.scaling.min"), "{err}");

    // An AMI file without the region.
    let amis = dir.path().join("ami.json");
    std::fs::write(&amis, r#"{"4230.2.4": {"us-east-1": "ami-0a1b2c3d4e5f60002"}}"#)?;
    let err = render(&["--ami-file", amis.to_str().unwrap_or_default()], &[&cluster_yaml(), &release_yaml()])
        .unwrap_err()
        .to_string();
    assert!(err.contains("no AMI for Flatcar 4230.2.4 in eu-central-1"), "{err}");

    // A document that is not an AWSCluster.
    let broken = dir.path().join("broken.yaml");
    std::fs::write(
        &broken,
        "apiVersion: infrastructure.giantswarm.io/v1alpha3\nkind: AWSCluster\nmetadata:\n  name: x\nspec: {}\n",
    )?;
    let err = render(&[], &[&broken]).unwrap_err().to_string();
    assert!(err.contains("broken.yaml: document 1 (AWSCluster x)"), "{err}");

    // No cluster at all.
    let err = render(&[], &[&release_yaml()]).unwrap_err().to_string();
    assert!(err.contains("no AWSCluster"), "{err}");

    // A bad flag.
    let err = render(&["--tenant-account-id", "12"], &[&cluster_yaml(), &release_yaml()]).unwrap_err().to_string();
    assert!(err.contains("--tenant-account-id 12: an AWS account id has 12 digits"), "{err}");
    Ok(())
}

#[test]
fn the_binary_renders_and_fails_with_a_message() -> anyhow::Result<()> {
    let bin = env!("CARGO_BIN_EXE_aws-operator");
    let ok = Command::new(bin).arg("render").arg("--summary").arg(cluster_yaml()).arg(release_yaml()).output()?;
    let stdout = String::from_utf8(ok.stdout)?;
    assert!(ok.status.success(), "stderr: {}", String::from_utf8_lossy(&ok.stderr));
    for (name, _) in EXPECTED {
        assert!(stdout.contains(name), "{name} missing in:\n{stdout}");
    }

    let dir = tempfile::tempdir()?;
    let path = edited_cluster(&dir, "eu-central-1b, eu-central-1c]", "eu-central-1b, us-east-1c]");
    let bad = Command::new(bin).arg("render").arg(&path).arg(release_yaml()).output()?;
    assert!(!bad.status.success());
    assert!(bad.stdout.is_empty(), "nothing is printed for invalid input");
    let stderr = String::from_utf8(bad.stderr)?;
    assert!(stderr.contains("AWSControlPlane org-acme/a2wax: spec.availabilityZones[2]"), "{stderr}");
    Ok(())
}

#[test]
fn a_release_of_another_operator_version_renders_with_a_warning() -> anyhow::Result<()> {
    let own = env!("CARGO_PKG_VERSION");
    let out = render(&[], &[&cluster_yaml(), &release_yaml()])?;
    assert!(!out.contains("WARNING"), "the example's Release names this version:\n{out}");

    let dir = tempfile::tempdir()?;
    let text = std::fs::read_to_string(release_yaml())?;
    let from = format!("    - name: aws-operator\n      version: {own}\n");
    assert!(text.contains(&from), "the example Release no longer names aws-operator {own}");
    let release = dir.path().join("release.yaml");
    std::fs::write(&release, text.replacen(&from, "    - name: aws-operator\n      version: 16.1.0\n", 1))?;
    let out = render(&["--summary"], &[&cluster_yaml(), &release])?;
    let warning = format!(
        "# WARNING: AWSCluster org-acme/al9qy: Release v20.0.0 names aws-operator 16.1.0, this is aws-operator {own}"
    );
    assert!(out.contains(&warning), "{out}");
    // Still rendered: the warning is no error.
    assert!(out.contains("cluster-al9qy-tccpn"), "{out}");

    let bin = env!("CARGO_BIN_EXE_aws-operator");
    let run = Command::new(bin).arg("render").arg("--summary").arg(cluster_yaml()).arg(&release).output()?;
    assert!(run.status.success());
    let stderr = String::from_utf8(run.stderr)?;
    assert!(
        stderr.contains("warning: AWSCluster org-acme/al9qy: Release v20.0.0 names aws-operator 16.1.0"),
        "{stderr}"
    );
    Ok(())
}

#[test]
fn a_fleets_capi_objects_reach_the_stacks_as_the_daemon_reads_them() -> anyhow::Result<()> {
    // The fleet the end-to-end test applies: its G8sControlPlane says three masters, its
    // AWSControlPlane lists one zone and no count; its Cluster carries a cloud tag.
    let dir = tempfile::tempdir()?;
    let fleet = dir.path().join("fleet.yaml");
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fleet/al9qy.yaml"))?;
    std::fs::write(&fleet, text.replace("${AWS_OPERATOR_VERSION}", env!("CARGO_PKG_VERSION")))?;
    let objects = Objects::load(&[fleet.clone(), release_yaml()])?;
    let settings = Settings::from_args(&args(&[], &[&fleet]))?;
    let plans = plan::plan(&objects, &settings)?;
    let tccpn = plans[0].stacks.iter().find(|s| s.name == "cluster-al9qy-tccpn").expect("TCCPN");
    assert_eq!(tccpn.template.outputs["MasterReplicas"].value, "3");
    for stack in plans[0].stacks.iter().filter(|s| s.account_label() == "tenant") {
        assert!(stack.tags.contains(&("cost-center".into(), "team-blue".into())), "{}: {:?}", stack.name, stack.tags);
    }

    // Without the CAPI objects: one master, no tag.
    let own_only = dir.path().join("own.yaml");
    let documents: Vec<&str> = text
        .split("\n---\n")
        .filter(|d| !d.contains("apiVersion: cluster.x-k8s.io/") && !d.contains("kind: G8sControlPlane"))
        .collect();
    std::fs::write(&own_only, documents.join("\n---\n").replace("${AWS_OPERATOR_VERSION}", env!("CARGO_PKG_VERSION")))?;
    let plans = plan::plan(&Objects::load(&[own_only, release_yaml()])?, &settings)?;
    let tccpn = plans[0].stacks.iter().find(|s| s.name == "cluster-al9qy-tccpn").expect("TCCPN");
    assert_eq!(tccpn.template.outputs["MasterReplicas"].value, "1");
    assert!(plans[0].stacks.iter().all(|s| !s.tags.iter().any(|(k, _)| k == "cost-center")));
    Ok(())
}

/// A legacy cluster as Giant Swarm's API wrote it (the apis fixture) renders alone, without an
/// AWSCluster or Release: its three stacks in their accounts, from what the object says, with
/// the route table a flag names.
#[test]
fn a_legacy_awsconfig_renders_its_three_stacks() -> anyhow::Result<()> {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../crates/apis/tests/fixtures/awsconfig-p3x7d.yaml");
    let summary = render(&["--summary"], &[&fixture])?;
    let lines: Vec<(&str, String)> = summary
        .lines()
        .filter(|l| l.starts_with("cluster-"))
        .map(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            (words[0], format!("{} {}", words[1], words[2]))
        })
        .collect();
    assert_eq!(
        lines,
        [
            ("cluster-p3x7d-host-setup", "management 111111111111".to_string()),
            ("cluster-p3x7d-guest-main", "tenant 000000000000".to_string()),
            ("cluster-p3x7d-host-main", "management 111111111111".to_string()),
        ],
        "{summary}"
    );
    assert!(summary.contains("# AWSConfig default/p3x7d: region eu-west-1, Release 6.3.0"), "{summary}");

    let guest = render(&["--stack", "cluster-p3x7d-guest-main"], &[&fixture])?;
    let json: serde_json::Value = serde_json::from_str(&guest[guest.find('{').expect("a template")..])?;
    let workers = &json["Resources"]["WorkerAutoScalingGroup"]["Properties"];
    assert_eq!(workers["DesiredCapacity"], "3");
    assert_eq!(json["Resources"]["VPC"]["Properties"]["CidrBlock"], "10.11.0.0/16");
    assert_eq!(
        json["Resources"]["VPCPeeringConnection"]["Properties"]["PeerRoleArn"],
        "<output PeerRoleARN of cluster-p3x7d-host-setup>"
    );
    assert!(guest.contains("giantswarm.io/stack: guest-main"), "the stack tags");

    let main = render(
        &["--stack", "cluster-p3x7d-host-main", "--route-table", "rtb-0123456789abcdef0=tyrell_private_0"],
        &[&fixture],
    )?;
    let json: serde_json::Value = serde_json::from_str(&main[main.find('{').expect("a template")..])?;
    let tables: Vec<&str> = json["Resources"]
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(_, r)| r["Type"] == "AWS::EC2::Route")
        .filter_map(|(_, r)| r["Properties"]["RouteTableId"].as_str())
        .collect();
    assert_eq!(tables, ["<route table named tyrell_private_1>", "rtb-0123456789abcdef0"]);

    // An object the legacy stacks cannot be built from renders nothing and names the field.
    let dir = tempfile::tempdir()?;
    let broken = dir.path().join("awsconfig.yaml");
    let text = std::fs::read_to_string(&fixture)?;
    std::fs::write(&broken, text.replace("    az: eu-west-1b", "    az: us-east-1a"))?;
    let err = render(&[], &[&broken]).unwrap_err().to_string();
    assert!(err.contains("spec.aws.az: invalid value \"us-east-1a\""), "{err}");
    Ok(())
}

//! The aws node configs' own scripts, run as an instance would run them: below an emulated
//! node's root (`node_verify_harness`), with the real AWS CLI against moto, and the instance
//! metadata service (IMDSv2, the instance role's credentials) served by the test. What the
//! scripts did is read back through AWS's own API and moto's request log.

mod support;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use aws_stacks::ignition::{
    ETCD_ATTACH_SCRIPT, ETCD_NETWORK_ENV, ETCD_VOLUME_DEVICE, LAUNCHING_HOOK_SCRIPT, LAUNCHING_HOOK_UNIT,
    NodeConfigInput, render,
};
use base64::Engine as _;
use motoenv::MotoServer;
use node_verify_harness::{Credentials, HealthEndpoints, Instance, MetadataService, Node};
use serde_json::Value;
use support::{CLUSTER, REGION, input, master};

const DECRYPT_SCRIPT: &str = "/opt/bin/decrypt-tls-assets";
const HOSTNAME_SCRIPT: &str = "/opt/bin/set-hostname";
const ZONE: &str = "eu-central-1a";

/// One fresh account of moto, reached with the AWS CLI.
struct Account<'a> {
    moto: &'a MotoServer,
    id: String,
    /// The test's own credentials in the account (an operator, not the node).
    operator: Credentials,
}

impl<'a> Account<'a> {
    fn new(moto: &'a MotoServer) -> Account<'a> {
        let id = motoenv::fresh_account_id();
        let operator = assume_role(moto, &id, "GiantSwarmAWSOperator");
        Account { moto, id, operator }
    }

    /// `aws <args> --output json` with the operator's credentials.
    fn cli(&self, args: &[&str]) -> Value {
        let out = cli(self.moto, Some(&self.operator), args);
        if out.stdout.is_empty() { Value::Null } else { serde_json::from_slice(&out.stdout).expect("JSON") }
    }

    /// A KMS key of the account.
    fn kms_key(&self) -> String {
        self.cli(&["kms", "create-key"])["KeyMetadata"]["KeyId"].as_str().expect("key id").to_owned()
    }

    /// `plaintext` encrypted with `key` by KMS.
    fn encrypt(&self, key: &str, plaintext: &[u8]) -> Vec<u8> {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("plaintext");
        std::fs::write(&file, plaintext).expect("write");
        let blob = format!("fileb://{}", file.display());
        let out = self.cli(&["kms", "encrypt", "--key-id", key, "--plaintext", &blob]);
        let text = out["CiphertextBlob"].as_str().expect("ciphertext");
        base64::engine::general_purpose::STANDARD.decode(text).expect("base64")
    }

    /// The metadata of `instance`, described through EC2, with the master role's credentials.
    fn instance(&self, instance: &str) -> Instance {
        let described = self.cli(&["ec2", "describe-instances", "--instance-ids", instance]);
        let i = &described["Reservations"][0]["Instances"][0];
        Instance {
            instance_id: instance.to_owned(),
            account_id: self.id.clone(),
            region: REGION.into(),
            availability_zone: i["Placement"]["AvailabilityZone"].as_str().unwrap_or(ZONE).to_owned(),
            local_ipv4: i["PrivateIpAddress"].as_str().expect("private address").to_owned(),
            local_hostname: i["PrivateDnsName"].as_str().expect("private DNS name").to_owned(),
            role: format!("{CLUSTER}-master-role"),
            credentials: assume_role(self.moto, &self.id, &format!("{CLUSTER}-master-role")),
        }
    }

    /// The metadata of an instance that is not in EC2 (the decryption needs none).
    fn unlisted_instance(&self) -> Instance {
        Instance {
            instance_id: "i-0a1b2c3d4e5f60718".into(),
            account_id: self.id.clone(),
            region: REGION.into(),
            availability_zone: ZONE.into(),
            local_ipv4: "10.0.0.4".into(),
            local_hostname: "ip-10-0-0-4.eu-central-1.compute.internal".into(),
            role: format!("{CLUSTER}-master-role"),
            credentials: assume_role(self.moto, &self.id, &format!("{CLUSTER}-master-role")),
        }
    }

    /// A VPC with one subnet in [`ZONE`].
    fn subnet(&self) -> String {
        let vpc = self.cli(&["ec2", "create-vpc", "--cidr-block", "10.0.0.0/16"]);
        let vpc = vpc["Vpc"]["VpcId"].as_str().expect("vpc id");
        let subnet = self.cli(&[
            "ec2",
            "create-subnet",
            "--vpc-id",
            vpc,
            "--cidr-block",
            "10.0.0.0/20",
            "--availability-zone",
            ZONE,
        ]);
        subnet["Subnet"]["SubnetId"].as_str().expect("subnet id").to_owned()
    }

    /// The requests moto received since `since` (seconds since the epoch) signed by the
    /// instance role's `key`: (time, action).
    fn requests_by(&self, key: &str, since: f64) -> Vec<(f64, String)> {
        let log = self.moto.request_log().expect("request log");
        log.into_iter().filter(|r| r.time >= since && r.key == key).map(|r| (r.time, r.action)).collect()
    }
}

/// Runs the AWS CLI against moto, without any credentials of this machine.
fn cli(moto: &MotoServer, creds: Option<&Credentials>, args: &[&str]) -> Output {
    let mut command = Command::new(motoenv::aws_cli());
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("AWS_") {
            command.env_remove(key);
        }
    }
    command
        .args(args)
        .args(["--region", REGION, "--output", "json"])
        .env("AWS_ENDPOINT_URL", moto.endpoint())
        .env("AWS_CONFIG_FILE", "/nonexistent")
        .env("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
        .env("AWS_EC2_METADATA_DISABLED", "true");
    match creds {
        Some(c) => command
            .env("AWS_ACCESS_KEY_ID", &c.access_key_id)
            .env("AWS_SECRET_ACCESS_KEY", &c.secret_access_key)
            .env("AWS_SESSION_TOKEN", &c.session_token),
        // moto's STS answers any long-term key.
        None => command.env("AWS_ACCESS_KEY_ID", "AKIAHARNESSTEST00000").env("AWS_SECRET_ACCESS_KEY", "harness"),
    };
    let out = command.output().expect("run the AWS CLI (make venv installs it)");
    assert!(out.status.success(), "aws {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
    out
}

fn assume_role(moto: &MotoServer, account: &str, role: &str) -> Credentials {
    let arn = format!("arn:aws:iam::{account}:role/{role}");
    let out = cli(moto, None, &["sts", "assume-role", "--role-arn", &arn, "--role-session-name", "harness"]);
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let c = &v["Credentials"];
    let field = |name: &str| c[name].as_str().expect(name).to_owned();
    Credentials {
        access_key_id: field("AccessKeyId"),
        secret_access_key: field("SecretAccessKey"),
        session_token: field("SessionToken"),
        expiration: field("Expiration"),
    }
}

/// The sealed config of `input`, every secret encrypted by `encrypt` (run in parallel).
fn sealed(input: &NodeConfigInput, encrypt: impl Fn(usize, &[u8]) -> Vec<u8> + Sync) -> Vec<u8> {
    let config = render(input).expect("render");
    let ciphertexts: Vec<Vec<u8>> = std::thread::scope(|s| {
        let handles: Vec<_> = config
            .secrets()
            .iter()
            .enumerate()
            .map(|(i, secret)| {
                let encrypt = &encrypt;
                s.spawn(move || encrypt(i, &secret.plaintext))
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("encrypt")).collect()
    });
    config.seal_with(ciphertexts).expect("seal")
}

/// Runs `command` until it exits or `limit` passes (then kills it and fails the test).
fn run(mut command: Command, limit: Duration) -> (Output, Duration) {
    let started = Instant::now();
    let mut child = command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn the script");
    loop {
        if child.try_wait().expect("wait").is_some() {
            return (child.wait_with_output().expect("output"), started.elapsed());
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().expect("output");
            panic!(
                "the script ran longer than {limit:?}\nstdout: {}\nstderr: {}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn now() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_secs_f64()
}

/// Every file below `dir` that the config did not write, other than the `expected` ones.
fn strays(node: &Node, config: &[u8], expected: &BTreeSet<String>) -> Vec<String> {
    let written: BTreeSet<String> = ignition::parse(config).expect("parse").files.into_keys().collect();
    let mut out = Vec::new();
    let mut stack = vec![node.path("/etc/kubernetes")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("read_dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let on_node = format!("/{}", path.strip_prefix(node.root()).expect("below the root").display());
            if !written.contains(&on_node) && !expected.contains(&on_node) {
                out.push(on_node);
            }
        }
    }
    out
}

fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path).expect("metadata").permissions().mode() & 0o7777
}

#[test]
fn the_decrypt_unit_turns_every_enc_file_into_its_secret_with_the_clusters_key() {
    let moto = MotoServer::start().expect("moto (make venv)");
    let aws = Account::new(&moto);
    let key = aws.kms_key();
    let input = input(master(1, 3));
    let config = sealed(&input, |_, p| aws.encrypt(&key, p));
    let node = Node::boot(&config, &moto.endpoint()).expect("boot");
    let metadata = MetadataService::serve(aws.unlisted_instance()).expect("metadata");

    let (out, took) = run(node.script(DECRYPT_SCRIPT, &metadata).expect("script"), Duration::from_secs(120));
    assert!(out.status.success(), "decrypt failed: {}", String::from_utf8_lossy(&out.stderr));
    eprintln!("decrypt: the {} secrets of a master in {took:?}", input.secrets.len());

    for secret in &input.secrets {
        let file = node.path(&secret.path);
        assert_eq!(std::fs::read(&file).expect(&secret.path), secret.plaintext, "{}", secret.path);
        assert_eq!(mode(&file), 0o600, "{}", secret.path);
    }
    let decrypted: BTreeSet<String> = input.secrets.iter().map(|s| s.path.clone()).collect();
    assert_eq!(strays(&node, &config, &decrypted), Vec::<String>::new(), "files left besides the secrets");
    // The CLI took the instance role's credentials from the metadata service, IMDSv2 only.
    let requests = metadata.requests();
    assert!(requests.iter().any(|r| r.method == "PUT" && r.path == "/latest/api/token"), "{requests:?}");
    let role = format!("/latest/meta-data/iam/security-credentials/{CLUSTER}-master-role");
    assert!(requests.iter().any(|r| r.path == role && r.status == 200), "{requests:?}");
    assert!(requests.iter().all(|r| r.status != 401), "a read without a token: {requests:?}");
}

#[test]
fn the_decrypt_unit_fails_loudly_and_leaves_nothing_half_written_with_a_wrong_key() {
    let moto = MotoServer::start().expect("moto (make venv)");
    let aws = Account::new(&moto);
    let key = aws.kms_key();
    // Another cluster's key, in another account: this node's role may not use it.
    let other = Account::new(&moto);
    let foreign = other.kms_key();
    let input = input(master(2, 3));
    let last = input.secrets.len() - 1;
    // Every secret but the last with the cluster's key; the last with the foreign one.
    let config = sealed(&input, |i, p| if i == last { other.encrypt(&foreign, p) } else { aws.encrypt(&key, p) });
    let node = Node::boot(&config, &moto.endpoint()).expect("boot");
    let metadata = MetadataService::serve(aws.unlisted_instance()).expect("metadata");

    let (out, took) = run(node.script(DECRYPT_SCRIPT, &metadata).expect("script"), Duration::from_secs(120));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "a wrong key fails the unit: {stderr}");
    let failed = &input.secrets[last].path;
    assert!(stderr.contains(&format!("decrypting {failed}.enc failed")), "{stderr}");
    assert!(stderr.contains("AccessDenied"), "{stderr}");
    assert!(!stderr.contains("retrying"), "a wrong key is not retried: {stderr}");
    eprintln!("decrypt with a wrong key: failed in {took:?}");
    assert!(!node.path(failed).exists(), "{failed} written from a wrong key");
    for secret in &input.secrets[..last] {
        assert_eq!(std::fs::read(node.path(&secret.path)).expect(&secret.path), secret.plaintext);
    }
    let decrypted: BTreeSet<String> = input.secrets[..last].iter().map(|s| s.path.clone()).collect();
    assert_eq!(strays(&node, &config, &decrypted), Vec::<String>::new(), "half-written or temporary files left");

    // Not a ciphertext at all: KMS refuses it (InvalidCiphertextException); nothing is written.
    let garbage = sealed(&input, |_, p| p.iter().rev().copied().collect());
    let node = Node::boot(&garbage, &moto.endpoint()).expect("boot");
    let (out, _) = run(node.script(DECRYPT_SCRIPT, &metadata).expect("script"), Duration::from_secs(120));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("InvalidCiphertext"), "{stderr}");
    assert_eq!(strays(&node, &garbage, &BTreeSet::new()), Vec::<String>::new(), "files left from garbage");
}

#[test]
fn the_attach_script_attaches_the_masters_interface_and_volume_and_does_it_once() {
    let moto = MotoServer::start().expect("moto (make venv)");
    let aws = Account::new(&moto);
    let subnet = aws.subnet();
    // What TCCPN creates for master 1: its etcd interface and volume, found by their Name tags.
    let eni_name = aws_stacks::names::master_eni(CLUSTER, 1);
    let volume_name = aws_stacks::names::master_etcd_volume(CLUSTER, 1);
    let eni = aws.cli(&[
        "ec2",
        "create-network-interface",
        "--subnet-id",
        &subnet,
        "--tag-specifications",
        &format!("ResourceType=network-interface,Tags=[{{Key=Name,Value={eni_name}}}]"),
    ]);
    let (eni_id, eni_ip, eni_mac) = (
        eni["NetworkInterface"]["NetworkInterfaceId"].as_str().expect("id").to_owned(),
        eni["NetworkInterface"]["PrivateIpAddress"].as_str().expect("ip").to_owned(),
        eni["NetworkInterface"]["MacAddress"].as_str().expect("mac").to_owned(),
    );
    let volume = aws.cli(&[
        "ec2",
        "create-volume",
        "--size",
        "10",
        "--availability-zone",
        ZONE,
        "--tag-specifications",
        &format!("ResourceType=volume,Tags=[{{Key=Name,Value={volume_name}}}]"),
    ]);
    let volume_id = volume["VolumeId"].as_str().expect("volume id").to_owned();
    let run_out = aws.cli(&["ec2", "run-instances", "--image-id", "ami-0a1b2c3d4e5f60718", "--subnet-id", &subnet]);
    let instance_id = run_out["Instances"][0]["InstanceId"].as_str().expect("instance id").to_owned();
    let instance = aws.instance(&instance_id);
    let host_ip = instance.local_ipv4.clone();
    let node_key = instance.credentials.access_key_id.clone();

    let input = input(master(1, 3));
    let config = sealed(&input, |_, p| p.to_vec());
    let node = Node::boot(&config, &moto.endpoint()).expect("boot");
    let disk = node.disk(ETCD_VOLUME_DEVICE, 64).expect("disk");
    node.dhcp_lease(&eni_mac, &eni_ip).expect("lease");
    let metadata = MetadataService::serve(instance).expect("metadata");

    let first = now();
    let (out, took) = run(node.script(ETCD_ATTACH_SCRIPT, &metadata).expect("script"), Duration::from_secs(120));
    assert!(out.status.success(), "attach failed: {}", String::from_utf8_lossy(&out.stderr));
    eprintln!("attach: interface, volume, filesystem and addresses in {took:?}");

    // EC2 says both are attached to this instance: the interface as device 1, the volume as xvdh.
    let volumes = aws.cli(&["ec2", "describe-volumes", "--volume-ids", &volume_id]);
    let attachment = &volumes["Volumes"][0]["Attachments"][0];
    assert_eq!(attachment["InstanceId"], instance_id.as_str(), "{volumes}");
    assert_eq!(attachment["Device"], ETCD_VOLUME_DEVICE, "{volumes}");
    assert_eq!(volumes["Volumes"][0]["State"], "in-use", "{volumes}");
    let enis = aws.cli(&["ec2", "describe-network-interfaces", "--network-interface-ids", &eni_id]);
    let attachment = &enis["NetworkInterfaces"][0]["Attachment"];
    assert_eq!(attachment["InstanceId"], instance_id.as_str(), "{enis}");
    assert_eq!(attachment["DeviceIndex"], 1, "{enis}");
    let attached: Vec<String> = aws.requests_by(&node_key, first).into_iter().map(|(_, a)| a).collect();
    for action in ["AttachNetworkInterface", "AttachVolume"] {
        assert_eq!(attached.iter().filter(|a| *a == action).count(), 1, "{action} by the node's role: {attached:?}");
    }

    // The volume got its filesystem, etcd its addresses, networkd the interface's routing.
    let blkid = Command::new("blkid").arg("-p").arg(&disk).output().expect("blkid");
    let blkid = String::from_utf8_lossy(&blkid.stdout).into_owned();
    assert!(blkid.contains(r#"LABEL="etcd""#) && blkid.contains(r#"TYPE="ext4""#), "{blkid}");
    let env = std::fs::read_to_string(node.path(ETCD_NETWORK_ENV)).expect("network env");
    assert_eq!(env, format!("ETCD_ENI_IP={eni_ip}\nETCD_HOST_IP={host_ip}\n"));
    let network = std::fs::read_to_string(node.path("/etc/systemd/network/10-etcd-eni.network")).expect("network");
    assert!(network.contains(&format!("MACAddress={eni_mac}\n")), "{network}");
    assert!(network.contains(&format!("From={eni_ip}/32\n")), "{network}");

    // A restart finds everything in place: no attachment, no new filesystem.
    let second = now();
    let (out, took) = run(node.script(ETCD_ATTACH_SCRIPT, &metadata).expect("script"), Duration::from_secs(120));
    assert!(out.status.success(), "attach again failed: {}", String::from_utf8_lossy(&out.stderr));
    eprintln!("attach again: {took:?}");
    let again: Vec<String> = aws.requests_by(&node_key, second).into_iter().map(|(_, a)| a).collect();
    assert!(again.iter().all(|a| a.starts_with("Describe")), "a restart changed something: {again:?}");
    let blkid_again = Command::new("blkid").arg("-p").arg(&disk).output().expect("blkid");
    assert_eq!(String::from_utf8_lossy(&blkid_again.stdout), blkid, "the filesystem was made again");
    assert_eq!(std::fs::read_to_string(node.path(ETCD_NETWORK_ENV)).expect("env"), env);
}

/// The Auto Scaling instance's lifecycle state.
fn lifecycle_state(aws: &Account, instance: &str) -> String {
    let out = aws.cli(&["autoscaling", "describe-auto-scaling-instances", "--instance-ids", instance]);
    out["AutoScalingInstances"][0]["LifecycleState"].as_str().unwrap_or_default().to_owned()
}

#[test]
fn the_launching_hook_completes_only_after_etcd_and_the_api_server_are_healthy() {
    let moto = MotoServer::start().expect("moto (make venv)");
    let aws = Account::new(&moto);
    let subnet = aws.subnet();
    // A master group with TCCPN's launching hook: its instance waits in Pending:Wait.
    let hook = aws_stacks::stacks::tccpn::LAUNCHING_HOOK;
    let timeout = aws_stacks::stacks::tccpn::LAUNCHING_HOOK_TIMEOUT;
    aws.cli(&[
        "ec2",
        "create-launch-template",
        "--launch-template-name",
        "al9qy-master1",
        "--launch-template-data",
        r#"{"ImageId":"ami-0a1b2c3d4e5f60718","InstanceType":"m5.xlarge"}"#,
    ]);
    aws.cli(&[
        "autoscaling",
        "create-auto-scaling-group",
        "--auto-scaling-group-name",
        "al9qy-tccpn-master1",
        "--launch-template",
        "LaunchTemplateName=al9qy-master1",
        "--min-size",
        "1",
        "--max-size",
        "1",
        "--desired-capacity",
        "1",
        "--vpc-zone-identifier",
        &subnet,
        "--lifecycle-hook-specification-list",
        &format!(
            "LifecycleHookName={hook},LifecycleTransition=autoscaling:EC2_INSTANCE_LAUNCHING,HeartbeatTimeout={timeout},DefaultResult=CONTINUE"
        ),
    ]);
    let groups = aws.cli(&["autoscaling", "describe-auto-scaling-groups"]);
    let instance_id =
        groups["AutoScalingGroups"][0]["Instances"][0]["InstanceId"].as_str().expect("instance").to_owned();
    assert_eq!(lifecycle_state(&aws, &instance_id), "Pending:Wait");
    let instance = aws.instance(&instance_id);
    let node_key = instance.credentials.access_key_id.clone();

    let config = sealed(&input(master(1, 3)), |_, p| p.to_vec());
    let node = Node::boot(&config, &moto.endpoint()).expect("boot");
    let metadata = MetadataService::serve(instance).expect("metadata");
    let health = HealthEndpoints::serve().expect("health");
    let mut script = node.script(LAUNCHING_HOOK_SCRIPT, &metadata).expect("script");
    script
        .env("ETCD_HEALTH_URL", health.etcd_health_url())
        .env("API_READYZ_URL", health.readyz_url())
        .env("LAUNCHING_HOOK_INTERVAL", "1");
    let started = now();
    let running = std::thread::spawn(move || run(script, Duration::from_secs(120)));

    // Neither healthy, then etcd alone: the hook stays.
    std::thread::sleep(Duration::from_secs(3));
    health.etcd.store(true, Ordering::SeqCst);
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(lifecycle_state(&aws, &instance_id), "Pending:Wait", "completed before the API server was ready");
    let early = aws.requests_by(&node_key, started);
    assert!(early.iter().all(|(_, a)| a != "CompleteLifecycleAction"), "{early:?}");
    assert!(!running.is_finished(), "the script ended before health passed");

    // Both healthy: the script completes the hook.
    let healthy_at = now();
    health.api.store(true, Ordering::SeqCst);
    let (out, _) = running.join().expect("script thread");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "hook script failed: {stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains(&format!("completed {hook} of {instance_id} in al9qy-tccpn-master1")), "{stdout}");
    let completions: Vec<f64> = aws
        .requests_by(&node_key, started)
        .into_iter()
        .filter(|(_, a)| a == "CompleteLifecycleAction")
        .map(|(t, _)| t)
        .collect();
    assert_eq!(completions.len(), 1, "one completion by the node's role");
    assert!(completions[0] >= healthy_at, "completed before health passed");
    eprintln!("launching hook: completed {:.2}s after health passed", completions[0] - healthy_at);
    let deadline = Instant::now() + Duration::from_secs(10);
    while lifecycle_state(&aws, &instance_id) != "InService" {
        assert!(Instant::now() < deadline, "the instance did not go InService");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_single_master_has_no_launching_hook_to_complete() {
    let config = sealed(&input(master(0, 1)), |_, p| p.to_vec());
    let parsed = ignition::parse(&config).expect("parse");
    assert!(!parsed.units.contains_key(LAUNCHING_HOOK_UNIT));
    assert!(!parsed.files.contains_key(LAUNCHING_HOOK_SCRIPT), "a single master runs a launching-hook script");
    // An HA master does.
    let ha = ignition::parse(&sealed(&input(master(3, 3)), |_, p| p.to_vec())).expect("parse");
    assert!(ha.units.contains_key(LAUNCHING_HOOK_UNIT) && ha.files.contains_key(LAUNCHING_HOOK_SCRIPT));
}

/// The hostname unit of a worker, on an instance EC2 launched: its name is EC2's private DNS
/// name, read from the metadata service with IMDSv2, and set with `hostnamectl`.
#[test]
fn the_hostname_unit_names_the_node_after_its_ec2_private_dns_name() {
    let moto = MotoServer::start().expect("moto (make venv)");
    let aws = Account::new(&moto);
    let subnet = aws.subnet();
    let run_out = aws.cli(&["ec2", "run-instances", "--image-id", "ami-0a1b2c3d4e5f60718", "--subnet-id", &subnet]);
    let instance_id = run_out["Instances"][0]["InstanceId"].as_str().expect("instance id").to_owned();
    let instance = aws.instance(&instance_id);
    let name = instance.local_hostname.clone();
    assert!(name.ends_with(".compute.internal"), "EC2's private DNS name: {name}");

    let config = sealed(&input(aws_stacks::ignition::Role::Worker { md_id: "g3j50".into() }), |_, p| p.to_vec());
    let node = Node::boot(&config, &moto.endpoint()).expect("boot");
    let metadata = MetadataService::serve(instance).expect("metadata");
    let (out, took) = run(node.script(HOSTNAME_SCRIPT, &metadata).expect("script"), Duration::from_secs(60));
    assert!(out.status.success(), "set-hostname failed: {}", String::from_utf8_lossy(&out.stderr));
    eprintln!("hostname: set from the metadata service in {took:?}");
    let set = std::fs::read_to_string(node.path("/etc/hostname")).expect("/etc/hostname");
    assert_eq!(set.trim_end(), name);
    // A token first, then the name with it: nothing was read without one.
    let requests = metadata.requests();
    let asked: Vec<(&str, &str, u16)> =
        requests.iter().map(|r| (r.method.as_str(), r.path.as_str(), r.status)).collect();
    assert_eq!(
        asked,
        [("PUT", "/latest/api/token", 200), ("GET", "/latest/meta-data/local-hostname", 200)],
        "{requests:?}"
    );
}

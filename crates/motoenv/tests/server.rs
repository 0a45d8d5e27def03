//! The server lifecycle against a real moto: start, answer, reset, stop; plus the launcher's
//! corrections, checked by `tools/moto/probe_patches.py`.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use motoenv::{Emulation, Error, Launcher, MotoServer, fresh_account_id};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Whether a process with this id still exists (a reaped child disappears from /proc).
fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Runs an inline boto3 program against the server on `port` and returns its trimmed stdout;
/// panics (failing the test) if it does not exit 0.
fn python(code: &str, port: u16) -> String {
    let out = Command::new(Launcher::from_env().python())
        .args(["-c", code, &port.to_string()])
        .output()
        .expect("running the Python interpreter");
    assert!(out.status.success(), "{}\n{}", out.status, String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

const LIST_BUCKETS: &str = r#"
import sys, boto3
s3 = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{sys.argv[1]}", region_name="us-east-1",
                  aws_access_key_id="AKIATEST", aws_secret_access_key="test")
print(",".join(sorted(b["Name"] for b in s3.list_buckets()["Buckets"])))
"#;

const CREATE_BUCKET: &str = r#"
import sys, boto3
s3 = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{sys.argv[1]}", region_name="us-east-1",
                  aws_access_key_id="AKIATEST", aws_secret_access_key="test")
s3.create_bucket(Bucket="motoenv-reset-probe")
"#;

#[test]
fn two_servers_run_side_by_side_and_dropping_one_stops_only_it() -> Result<(), Error> {
    let a = std::thread::spawn(MotoServer::start);
    let b = std::thread::spawn(MotoServer::start);
    let a = a.join().expect("start thread panicked")?;
    let b = b.join().expect("start thread panicked")?;

    assert_ne!(a.port(), b.port());
    assert_ne!(a.pid(), b.pid());
    assert_eq!(a.endpoint(), format!("http://127.0.0.1:{}", a.port()));
    // A server keeps its state to itself.
    python(CREATE_BUCKET, a.port());
    assert_eq!(python(LIST_BUCKETS, a.port()), "motoenv-reset-probe");
    assert_eq!(python(LIST_BUCKETS, b.port()), "");

    let (pid, port) = (a.pid(), a.port());
    assert!(alive(pid));
    drop(a);
    assert!(!alive(pid), "the server process {pid} outlived its MotoServer");
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err(), "port {port} still accepts");

    // The other server is untouched.
    b.reset()?;
    assert!(alive(b.pid()));
    Ok(())
}

#[test]
fn reset_wipes_the_server_state() -> Result<(), Error> {
    let moto = MotoServer::start()?;
    python(CREATE_BUCKET, moto.port());
    assert_eq!(python(LIST_BUCKETS, moto.port()), "motoenv-reset-probe");
    moto.reset()?;
    assert_eq!(python(LIST_BUCKETS, moto.port()), "");
    Ok(())
}

#[test]
fn the_launcher_corrections_hold() -> Result<(), Error> {
    let moto = MotoServer::start()?;
    let out = Command::new(Launcher::from_env().python())
        .arg(workspace().join("tools/moto/probe_patches.py"))
        .arg(moto.port().to_string())
        .output()
        .map_err(|source| Error::Io { context: "running probe_patches.py", source })?;
    assert!(
        out.status.success(),
        "probe_patches.py failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

/// Terminates the one instance of a group whose terminating hook has a 30 s heartbeat timeout
/// and prints how many seconds it stayed in `Terminating:Wait` (or that it never waited).
const HOOK_TIMEOUT: &str = r#"
import sys, time, boto3
kw = dict(endpoint_url=f"http://127.0.0.1:{sys.argv[1]}", region_name="eu-west-1",
          aws_access_key_id="AKIATEST", aws_secret_access_key="test")
ec2, asg = boto3.client("ec2", **kw), boto3.client("autoscaling", **kw)
subnet = ec2.describe_subnets()["Subnets"][0]["SubnetId"]
asg.create_launch_configuration(LaunchConfigurationName="lc", ImageId="ami-12c6146b", InstanceType="t3.micro")
asg.create_auto_scaling_group(AutoScalingGroupName="g", LaunchConfigurationName="lc", MinSize=0, MaxSize=1,
                              DesiredCapacity=1, VPCZoneIdentifier=subnet)
asg.put_lifecycle_hook(LifecycleHookName="drain", AutoScalingGroupName="g", HeartbeatTimeout=30,
                       LifecycleTransition="autoscaling:EC2_INSTANCE_TERMINATING", DefaultResult="CONTINUE")
instance = asg.describe_auto_scaling_groups()["AutoScalingGroups"][0]["Instances"][0]["InstanceId"]
asg.terminate_instance_in_auto_scaling_group(InstanceId=instance, ShouldDecrementDesiredCapacity=True)
start, waited = time.time(), False
while time.time() - start < 60:
    found = asg.describe_auto_scaling_instances(InstanceIds=[instance])["AutoScalingInstances"]
    if not found or found[0]["LifecycleState"] != "Terminating:Wait":
        break
    waited = True
    time.sleep(0.05)
print(round(time.time() - start, 2) if waited else "never waited")
"#;

#[test]
fn the_launcher_sets_the_emulation_settings_and_they_shrink_hook_timeouts() -> Result<(), Error> {
    let moto = Launcher::from_env().time_scale(0.01).group_deletion_hooks(true).start()?;
    assert_eq!(moto.emulation()?, Emulation { time_scale: 0.01, group_deletion_hooks: true, throttle_share: 0.0 });
    // A 30 s heartbeat timeout lasts 0.3 s at this scale (AWS's timing would exceed the
    // script's 60 s limit).
    let out = python(HOOK_TIMEOUT, moto.port());
    let waited: f64 = out.parse().unwrap_or_else(|_| panic!("the hook did not hold the instance: {out}"));
    assert!(waited < 10.0, "the instance waited {waited} s in Terminating:Wait");

    let moto = Launcher::from_env().time_scale(2.5).group_deletion_hooks(false).start()?;
    assert_eq!(moto.emulation()?, Emulation { time_scale: 2.5, group_deletion_hooks: false, throttle_share: 0.0 });
    assert_eq!(moto.throttle(0.2)?.throttle_share, 0.2);
    assert!(moto.throttle(1.5).is_err(), "a share above 1 is refused");
    assert_eq!(moto.emulation()?.throttle_share, 0.2, "and changes nothing");
    Ok(())
}

#[test]
fn a_time_scale_that_is_not_positive_is_refused_before_starting() {
    for scale in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        let err = Launcher::from_env().time_scale(scale).start().expect_err("started with a bad time scale");
        assert!(matches!(err, Error::InvalidTimeScale { .. }), "{err:?}");
        assert!(err.to_string().contains("positive"), "{err}");
    }
}

/// Waits up to `limit` for the port file a launcher writes once it serves.
fn wait_for_port_file(path: &Path, limit: Duration) {
    let deadline = Instant::now() + limit;
    while !path.exists() {
        assert!(Instant::now() < deadline, "the server never wrote its port");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits up to 30 s for a process to be gone (or a zombie awaiting its parent).
fn wait_gone(pid: u32, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while alive(pid) && !is_zombie(pid) {
        assert!(Instant::now() < deadline, "{what} {pid} kept running");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn the_server_exits_when_its_parent_dies() -> Result<(), Box<dyn std::error::Error>> {
    // A parent shell starts the launcher with stdin from a pipe whose writer outlives the shell,
    // and is then killed without any cleanup: the orphaned server must notice by its parent id.
    let dir = tempfile::tempdir()?;
    let port_file = dir.path().join("port");
    let server_pid_file = dir.path().join("server.pid");
    let writer_pid_file = dir.path().join("writer.pid");
    let mut parent = Command::new("sh")
        .arg("-c")
        .arg(r#"sh -c 'echo $$ > "$0"; exec sleep 600' "$4" | "$1" "$2" --port 0 --port-file "$3" >/dev/null 2>&1 & echo $! > "$5"; wait"#)
        .arg("sh")
        .arg(Launcher::from_env().python())
        .arg(workspace().join("tools/moto/server.py"))
        .arg(&port_file)
        .arg(&writer_pid_file)
        .arg(&server_pid_file)
        .spawn()?;

    wait_for_port_file(&port_file, Duration::from_secs(60));
    let server_pid: u32 = std::fs::read_to_string(&server_pid_file)?.trim().parse()?;
    let writer_pid: u32 = std::fs::read_to_string(&writer_pid_file)?.trim().parse()?;
    assert!(alive(server_pid));
    parent.kill()?;
    parent.wait()?;
    wait_gone(server_pid, "the orphaned server");
    // The pipe's writer was only there to keep stdin open; it is ours to stop.
    Command::new("kill").arg(writer_pid.to_string()).status()?;
    Ok(())
}

#[test]
fn the_server_exits_when_its_stdin_closes() -> Result<(), Box<dyn std::error::Error>> {
    // What happens when the test process dies: the kernel closes the pipe, the server reads EOF.
    let dir = tempfile::tempdir()?;
    let port_file = dir.path().join("port");
    let mut server = Command::new(Launcher::from_env().python())
        .arg(workspace().join("tools/moto/server.py"))
        .args(["--port", "0", "--port-file"])
        .arg(&port_file)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()?;
    wait_for_port_file(&port_file, Duration::from_secs(60));
    drop(server.stdin.take());
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(status) = server.try_wait()? {
            assert!(status.success(), "{status}");
            return Ok(());
        }
        if Instant::now() > deadline {
            server.kill()?;
            server.wait()?;
            panic!("the server ignored the end of its stdin");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// An exited process not yet reaped by its (new) parent.
fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| s.rsplit(')').next().is_some_and(|rest| rest.trim_start().starts_with('Z')))
        .unwrap_or(true)
}

#[test]
fn a_missing_interpreter_says_how_to_install_one() {
    let err = Launcher::new("/nonexistent/motoenv/python", workspace().join("tools/moto/server.py"))
        .start()
        .expect_err("started without an interpreter");
    assert!(matches!(err, Error::PythonNotFound { .. }), "{err:?}");
    assert!(err.to_string().contains("make venv"), "{err}");
}

#[test]
fn a_server_that_dies_at_start_is_reported_with_its_output() {
    // `sh script` on a script that fails: the launcher must report the exit, not wait a minute.
    let dir = tempfile::tempdir().expect("tempdir");
    let script = dir.path().join("broken.sh");
    std::fs::write(&script, "echo moto internals changed >&2\nexit 3\n").expect("write script");
    let err = Launcher::new("/bin/sh", &script)
        .startup_timeout(Duration::from_secs(60))
        .start()
        .expect_err("a failing script started");
    match err {
        Error::Exited { status, log_tail } => {
            assert_eq!(status.code(), Some(3));
            assert!(log_tail.contains("moto internals changed"), "{log_tail}");
        }
        other => panic!("expected Exited, got {other:?}"),
    }
}

#[test]
fn account_ids_do_not_repeat() {
    let ids: Vec<String> = (0..10_000).map(|_| fresh_account_id()).collect();
    let unique: HashSet<&String> = ids.iter().collect();
    assert_eq!(unique.len(), ids.len());
    for id in &ids {
        assert_eq!(id.len(), 12, "{id}");
        assert!(id.bytes().all(|b| b.is_ascii_digit()), "{id}");
        assert_ne!(id, motoenv::MOTO_DEFAULT_ACCOUNT_ID);
    }
}

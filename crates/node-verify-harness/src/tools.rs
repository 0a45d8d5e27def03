//! The real tools a node runs its config with: `systemd-analyze verify` on every unit and
//! drop-in, `shellcheck` on every shell script, and Python's `tomllib` (the TOML 1.0 reader of
//! the standard library) on every TOML file, such as containerd's configuration. For tests: they
//! run processes and write a temporary directory.

use std::process::Command;

use node_verify::{Check, Finding};

/// What only a booted node has, so `systemd-analyze verify` on this machine may report it
/// missing: the node's binaries (under `/opt/bin`, or from the image) and the units the image
/// ships (`docker.service`, `containerd.service`, ...). A message line is ignored when it holds
/// every substring of one entry; each entry with its reason.
pub const SYSTEMD_IGNORED: [(&[&str], &str); 2] = [
    (&["is not executable: No such file or directory"], "a binary the node's image or config provides"),
    (&["Unit ", " not found."], "a dependency unit the node's image ships"),
];

fn ignored(line: &str) -> bool {
    line.trim().is_empty() || SYSTEMD_IGNORED.iter().any(|(parts, _)| parts.iter().all(|p| line.contains(p)))
}

/// What stands in for a unit the image ships (`containerd.service`, `docker.service`) when the
/// config has only drop-ins for it: a service of no settings, so that `systemd-analyze verify`
/// reads the drop-ins and reports what is wrong in them.
const IMAGE_UNIT_STAND_IN: &str = "[Service]\nExecStart=/bin/true\n";

/// Run `systemd-analyze verify --man=no --generators=no` on every unit of the config, with its
/// drop-ins beside it in the unit search path; a unit of drop-ins only is verified on
/// [`IMAGE_UNIT_STAND_IN`].
pub fn systemd_analyze(node: &str, json: &str) -> Vec<Finding> {
    let parsed = match ignition::parse(json.as_bytes()) {
        Ok(p) => p,
        Err(e) => return vec![Finding::new(Check::Systemd, node, "config", e.to_string())],
    };
    let dir = match tempfile::tempdir() {
        Ok(d) => d,
        Err(e) => return vec![Finding::new(Check::Systemd, node, "config", format!("temp dir: {e}"))],
    };
    let mut out = Vec::new();
    let mut paths = Vec::new();
    for (name, unit) in &parsed.units {
        let stand_in = unit["dropins"].as_array().is_some_and(|d| !d.is_empty()).then_some(IMAGE_UNIT_STAND_IN);
        if let Some(contents) = unit["contents"].as_str().or(stand_in) {
            let path = dir.path().join(name);
            if let Err(e) = std::fs::write(&path, contents) {
                out.push(Finding::new(Check::Systemd, node, name, format!("write: {e}")));
            }
            paths.push((name.clone(), path));
        }
        if let Some(dropins) = unit["dropins"].as_array() {
            let d = dir.path().join(format!("{name}.d"));
            let _ = std::fs::create_dir_all(&d);
            for dropin in dropins {
                let (Some(n), Some(c)) = (dropin["name"].as_str(), dropin["contents"].as_str()) else { continue };
                let _ = std::fs::write(d.join(n), c);
            }
        }
    }
    for (name, path) in paths {
        let result = Command::new("systemd-analyze")
            .args(["verify", "--man=no", "--generators=no"])
            .arg(&path)
            .env("SYSTEMD_UNIT_PATH", format!("{}:", dir.path().display()))
            .env("SYSTEMD_LOG_COLOR", "0")
            .output();
        match result {
            Err(e) => out.push(Finding::new(Check::Systemd, node, &name, format!("systemd-analyze: {e}"))),
            Ok(o) => {
                let text = String::from_utf8_lossy(&o.stderr).into_owned() + &String::from_utf8_lossy(&o.stdout);
                let dir_prefix = format!("{}/", dir.path().display());
                for line in text.lines().filter(|l| !ignored(l)) {
                    out.push(Finding::new(Check::Systemd, node, &name, line.replace(&dir_prefix, "")));
                }
            }
        }
    }
    out
}

/// Run `shellcheck` on every shell script of the config.
pub fn shellcheck(node: &str, json: &str) -> Vec<Finding> {
    let mut out = Vec::new();
    for (path, text) in node_verify::scripts(json) {
        let result = Command::new("shellcheck")
            .args(["--format=gcc", "-"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .and_then(|mut child| {
                use std::io::Write as _;
                if let Some(mut stdin) = child.stdin.take() {
                    stdin.write_all(text.as_bytes())?;
                }
                child.wait_with_output()
            });
        match result {
            Err(e) => out.push(Finding::new(Check::Shellcheck, node, &path, format!("shellcheck: {e}"))),
            Ok(o) if !o.status.success() => {
                let report = String::from_utf8_lossy(&o.stdout).replace("-:", "line ");
                out.push(Finding::new(Check::Shellcheck, node, &path, report.trim().to_owned()));
            }
            Ok(_) => {}
        }
    }
    out
}

/// Parse every `.toml` file of the config with Python's `tomllib` (`python3`, 3.11 or later):
/// containerd refuses to start on a configuration that is not TOML.
pub fn toml(node: &str, json: &str) -> Vec<Finding> {
    let parsed = match ignition::parse(json.as_bytes()) {
        Ok(p) => p,
        Err(e) => return vec![Finding::new(Check::Toml, node, "config", e.to_string())],
    };
    let mut out = Vec::new();
    for (path, contents) in parsed.files.iter().filter(|(p, _)| p.ends_with(".toml")) {
        let result = Command::new("python3")
            .args(["-c", "import sys, tomllib; tomllib.load(sys.stdin.buffer)"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .and_then(|mut child| {
                use std::io::Write as _;
                if let Some(mut stdin) = child.stdin.take() {
                    stdin.write_all(contents)?;
                }
                child.wait_with_output()
            });
        match result {
            Err(e) => out.push(Finding::new(Check::Toml, node, path, format!("python3: {e}"))),
            Ok(o) if !o.status.success() => {
                // The last line names the problem and its place; the file may hold a credential,
                // and tomllib's messages quote none of it.
                let report = String::from_utf8_lossy(&o.stderr);
                out.push(Finding::new(Check::Toml, node, path, report.trim().lines().last().unwrap_or("").to_owned()));
            }
            Ok(_) => {}
        }
    }
    out
}

//! The real tools a node runs its config with: `systemd-analyze verify` on every unit and
//! drop-in, `shellcheck` on every shell script. For tests: they run processes and write a
//! temporary directory.

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

/// Run `systemd-analyze verify --man=no --generators=no` on every unit of the config that has
/// contents, with its drop-ins beside it in the unit search path.
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
        if let Some(contents) = unit["contents"].as_str() {
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

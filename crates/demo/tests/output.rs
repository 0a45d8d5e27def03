//! The demo's output where there is no terminal (a pipe, a file, CI's log): plain text, no
//! escape codes, its steps readable as they come.

use std::process::{Command, Stdio};

#[test]
fn piped_output_carries_no_escape_codes() -> anyhow::Result<()> {
    let out = Command::new(env!("CARGO_BIN_EXE_demo"))
        .arg("--simulation")
        .env_remove("NO_COLOR")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()?;
    let stdout = String::from_utf8(out.stdout)?;
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let first = stdout.lines().find(|l| !l.is_empty()).unwrap_or_default();
    assert!(first.starts_with("==> Starting testenv"), "the first step comes first, plainly: {first:?}");
    assert!(stdout.contains("\n==> Done"), "{stdout}");
    assert!(!stdout.contains('\x1b'), "escape codes on a pipe: {stdout}");
    assert!(!String::from_utf8_lossy(&out.stderr).contains('\x1b'), "escape codes on stderr");
    Ok(())
}

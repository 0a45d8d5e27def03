//! Every runnable package builds each crate with the features of the whole workspace's build, so
//! that `cargo run -p <package>` after `make test` (or the other way round) compiles nothing
//! again but the package itself.
//!
//! The graphs come from `cargo tree --offline`: no network, and the lock file as committed.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A crate ("name version") and the union of the features it is built with in one graph.
type Features = BTreeMap<String, BTreeSet<String>>;

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn cargo(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO")).args(args).current_dir(workspace_root()).output().expect("cargo runs");
    assert!(out.status.success(), "cargo {} failed: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("cargo prints UTF-8")
}

/// The features of every crate in the graph that `selection` (`--workspace` or `-p <name>`) builds
/// over `edges`.
fn features(selection: &[&str], edges: &str) -> Features {
    let mut args = vec!["tree", "--locked", "--offline", "--prefix", "none", "-e", edges, "-f", "{p}|{f}"];
    args.extend_from_slice(selection);
    let mut graph = Features::new();
    for line in cargo(&args).lines() {
        let Some((package, features)) = line.split_once('|') else { continue };
        // "name v1.2.3 (/path)" for path crates, then " (*)" where cargo tree elides a repeat.
        let package = package.split(" (").next().unwrap_or(package).trim().to_string();
        let features = features.split(" (").next().unwrap_or(features);
        let entry = graph.entry(package).or_default();
        entry.extend(features.split(',').map(str::trim).filter(|f| !f.is_empty()).map(String::from));
    }
    graph
}

/// The packages that people run: those with a binary (their graph is the normal and build
/// dependencies) and those with examples (built with the dev-dependencies too).
fn runnable() -> Vec<(String, &'static str)> {
    let metadata: serde_json::Value =
        serde_json::from_str(&cargo(&["metadata", "--no-deps", "--offline", "--locked", "--format-version", "1"]))
            .expect("cargo metadata is JSON");
    let mut out = Vec::new();
    for package in metadata["packages"].as_array().into_iter().flatten() {
        let kinds: BTreeSet<&str> = package["targets"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|t| t["kind"].as_array().into_iter().flatten().filter_map(|k| k.as_str()))
            .collect();
        let name = package["name"].as_str().unwrap_or_default().to_string();
        if kinds.contains("example") {
            out.push((name, "normal,build,dev"));
        } else if kinds.contains("bin") {
            out.push((name, "normal,build"));
        }
    }
    out
}

#[test]
fn every_runnable_package_builds_its_crates_with_the_workspace_features() {
    let workspace = features(&["--workspace"], "normal,build,dev");
    let members: BTreeSet<String> = runnable().into_iter().map(|(name, _)| name).collect();
    assert!(
        members.contains("aws-operator") && members.contains("testenv"),
        "the runnable packages were not found: {members:?}"
    );
    let mut differences = Vec::new();
    for (package, edges) in runnable() {
        for (krate, own) in features(&["-p", &package], edges) {
            let all = &workspace[&krate];
            let missing: Vec<&String> = all.difference(&own).collect();
            if !missing.is_empty() {
                differences.push(format!("{package} builds {krate} without {missing:?}"));
            }
        }
    }
    assert!(
        differences.is_empty(),
        "these crates would be compiled again for `cargo run -p <package>` after the workspace's build. \
         Give crates/workspace-hack the features (a workspace crate's own feature cannot be unified \
         there: move what the feature adds into a crate of its own), and make the package depend on \
         workspace-hack:\n  {}",
        differences.join("\n  ")
    );
}

#[test]
fn runnable_packages_depend_on_workspace_hack() {
    for (package, edges) in runnable() {
        let graph = features(&["-p", &package], edges);
        assert!(
            graph.keys().any(|k| k.starts_with("workspace-hack ")),
            "{package} is run by people but does not depend on workspace-hack"
        );
    }
}

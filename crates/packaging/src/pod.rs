//! A chart's operator pod run from its image's root filesystem, outside any cluster, the way
//! the kubelet would run it: the container's arguments and environment from the rendered
//! Deployment (field references resolved), its ConfigMap volumes as files, the ServiceAccount's
//! token and CA at the standard paths, and `KUBERNETES_SERVICE_HOST`/`PORT` pointing at a
//! (TLS) testenv. So the image tests and benchmarks prove what the chart and the image do
//! together, not what a test chose to pass.

use std::os::unix::fs::chown;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::Error;
use crate::image::{OciImage, RootfsProcess};

/// The uid and gid the charts' pods run as (`runAsUser`, `runAsGroup`, `fsGroup`).
pub const NONROOT: u32 = 65532;

/// What the kubelet would start for the first container of a rendered Deployment.
#[derive(Debug, Clone, PartialEq)]
pub struct ContainerRun {
    /// The container's `args` (after the image's entrypoint).
    pub args: Vec<String>,
    /// The container's `env`, with `metadata.name` and `metadata.namespace` references
    /// resolved.
    pub env: Vec<(String, String)>,
    /// Files of the pod's ConfigMap volumes: path in the container, content.
    pub files: Vec<(PathBuf, String)>,
    /// The pod's ServiceAccount.
    pub service_account: String,
    /// The pod's namespace.
    pub namespace: String,
}

impl ContainerRun {
    /// The container of the one Deployment in `objects` (a chart's render) as pod `pod_name`
    /// in the Deployment's namespace. An environment variable from a Secret, or a reference
    /// this cannot resolve, is an error naming it: the caller must not run a pod that differs
    /// from the chart's.
    pub fn from_rendered(objects: &[Value], pod_name: &str) -> Result<ContainerRun, Error> {
        let bad = |what: String| Error::Image(format!("the rendered chart: {what}"));
        let deployments: Vec<&Value> = objects.iter().filter(|o| o["kind"] == "Deployment").collect();
        let [deployment] = deployments.as_slice() else {
            return Err(bad(format!("{} Deployments, expected one", deployments.len())));
        };
        let namespace = deployment["metadata"]["namespace"].as_str().unwrap_or("default").to_string();
        let pod = &deployment["spec"]["template"]["spec"];
        let container = &pod["containers"][0];
        let strings = |v: &Value| -> Vec<String> {
            v.as_array().into_iter().flatten().filter_map(|a| a.as_str().map(str::to_string)).collect()
        };
        let args = strings(&container["args"]);
        let mut env = Vec::new();
        for e in container["env"].as_array().into_iter().flatten() {
            let name = e["name"].as_str().unwrap_or_default().to_string();
            let value = if let Some(v) = e["value"].as_str() {
                v.to_string()
            } else {
                match e.pointer("/valueFrom/fieldRef/fieldPath").and_then(Value::as_str) {
                    Some("metadata.name") => pod_name.to_string(),
                    Some("metadata.namespace") => namespace.clone(),
                    _ => {
                        return Err(bad(format!(
                            "env {name} comes from {}, which is not resolved here",
                            e["valueFrom"]
                        )));
                    }
                }
            };
            env.push((name, value));
        }
        let mut files = Vec::new();
        for mount in container["volumeMounts"].as_array().into_iter().flatten() {
            let volume = pod["volumes"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|v| v["name"] == mount["name"])
                .ok_or_else(|| bad(format!("volume {} is mounted but not declared", mount["name"])))?;
            let Some(config_map) = volume.pointer("/configMap/name").and_then(Value::as_str) else { continue };
            let data = objects
                .iter()
                .find(|o| o["kind"] == "ConfigMap" && o["metadata"]["name"] == config_map)
                .map(|o| o["data"].clone())
                .ok_or_else(|| bad(format!("ConfigMap {config_map} is mounted but not rendered")))?;
            let dir = PathBuf::from(mount["mountPath"].as_str().unwrap_or_default());
            for (key, value) in data.as_object().into_iter().flatten() {
                files.push((dir.join(key), value.as_str().unwrap_or_default().to_string()));
            }
        }
        let service_account = pod["serviceAccountName"].as_str().unwrap_or("default").to_string();
        Ok(ContainerRun { args, env, files, service_account, namespace })
    }

    /// The same with `--listen=<addr>` instead of the chart's listen address (the host's
    /// network is shared, and the chart's port may be taken).
    pub fn listening_on(mut self, addr: &str) -> ContainerRun {
        for a in &mut self.args {
            if a.starts_with("--listen=") {
                *a = format!("--listen={addr}");
            }
        }
        self
    }

    /// Start the entrypoint of `image` from `rootfs` (unpacked) as this container against the
    /// secure testenv `env`: the ConfigMap files, the ServiceAccount's token, CA and namespace
    /// are written into `rootfs` (owned by uid 65532, as `fsGroup` makes them readable), and the
    /// process runs with chroot as uid 65532 on the read-only `rootfs`
    /// ([`crate::image::run_in_rootfs`]) with the image's environment, the container's, `HOME`
    /// from the image's passwd, and `KUBERNETES_SERVICE_HOST`/`PORT`.
    pub fn start(&self, env: &testenv::Handle, image: &OciImage, rootfs: &Path) -> Result<RootfsProcess, Error> {
        // Where the kubelet mounts volumes; written through a symlink it would land on the host.
        for dir in ["var", "var/run", "etc"] {
            let path = rootfs.join(dir);
            if path.symlink_metadata().is_ok_and(|m| m.file_type().is_symlink()) {
                return Err(Error::Image(format!(
                    "{} is a symlink: resolve it inside the rootfs first",
                    path.display()
                )));
            }
        }
        for (path, content) in &self.files {
            let host = rootfs.join(path.strip_prefix("/").unwrap_or(path));
            std::fs::create_dir_all(host.parent().unwrap_or(rootfs)).map_err(io(&host))?;
            std::fs::write(&host, content).map_err(io(&host))?;
        }
        let files = env
            .write_incluster_files(rootfs, &self.namespace, &self.service_account)
            .map_err(|e| Error::Image(format!("the ServiceAccount's token: {e}")))?;
        for file in [files.token_path(), files.ca_path(), files.dir.join("namespace")] {
            chown(&file, Some(NONROOT), Some(NONROOT)).map_err(io(&file))?;
        }
        let mut vars = image.env()?;
        vars.push(("HOME".into(), "/home/nonroot".into()));
        vars.extend(self.env.iter().cloned());
        vars.extend(files.env());
        crate::image::run_in_rootfs(rootfs, NONROOT, NONROOT, &image.entrypoint()?, &self.args, &vars)
    }
}

/// An I/O error on `path`.
fn io(path: &Path) -> impl FnOnce(std::io::Error) -> Error + use<> {
    let path = path.display().to_string();
    move |e| Error::Io(path, e)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn rendered(env: Value) -> Vec<Value> {
        vec![
            json!({"kind": "ConfigMap", "metadata": {"name": "op-1-0-0"}, "data": {"ami.json": "{}"}}),
            json!({
                "kind": "Deployment",
                "metadata": {"name": "op-1-0-0", "namespace": "ops"},
                "spec": {"template": {"spec": {
                    "serviceAccountName": "op-1-0-0",
                    "containers": [{
                        "name": "op",
                        "args": ["daemon", "--listen=0.0.0.0:8000", "--installation=x"],
                        "env": env,
                        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}, {"name": "amis", "mountPath": "/etc/op"}],
                    }],
                    "volumes": [{"name": "tmp", "emptyDir": {}}, {"name": "amis", "configMap": {"name": "op-1-0-0"}}],
                }}},
            }),
        ]
    }

    #[test]
    fn the_container_is_run_as_rendered_with_field_references_resolved() {
        let env = json!([
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
            {"name": "RUST_LOG", "value": "info"},
        ]);
        let run = ContainerRun::from_rendered(&rendered(env), "op-1-0-0-abc").unwrap().listening_on("127.0.0.1:9");
        assert_eq!(run.args, ["daemon", "--listen=127.0.0.1:9", "--installation=x"]);
        let pairs = |v: &[(&str, &str)]| v.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect::<Vec<_>>();
        assert_eq!(run.env, pairs(&[("POD_NAME", "op-1-0-0-abc"), ("POD_NAMESPACE", "ops"), ("RUST_LOG", "info")]));
        assert_eq!(run.files, vec![(PathBuf::from("/etc/op/ami.json"), "{}".to_string())]);
        assert_eq!((run.service_account.as_str(), run.namespace.as_str()), ("op-1-0-0", "ops"));
    }

    #[test]
    fn a_secret_reference_is_refused_by_name() {
        let env = json!([{"name": "AWS_SECRET_ACCESS_KEY", "valueFrom": {"secretKeyRef": {"name": "c", "key": "k"}}}]);
        let err = ContainerRun::from_rendered(&rendered(env), "p").unwrap_err().to_string();
        assert!(err.contains("AWS_SECRET_ACCESS_KEY") && err.contains("secretKeyRef"), "{err}");
    }
}

//! The files and environment a pod's containers get from the kubelet, so that an operator
//! started outside a cluster connects through `kube::Config::incluster()` exactly as it would
//! inside one: `KUBERNETES_SERVICE_HOST`/`KUBERNETES_SERVICE_PORT`, and `token`, `ca.crt` and
//! `namespace` in `/var/run/secrets/kubernetes.io/serviceaccount` under a root directory of the
//! caller's choice (a chroot, or a private mount namespace).

use std::path::{Path, PathBuf};

/// Where the kubelet mounts the ServiceAccount volume.
pub const SERVICE_ACCOUNT_DIR: &str = "var/run/secrets/kubernetes.io/serviceaccount";

/// What [`crate::Handle::write_incluster_files`] wrote.
#[derive(Clone)]
pub struct InClusterFiles {
    /// The directory holding `token`, `ca.crt` and `namespace`.
    pub dir: PathBuf,
    /// `KUBERNETES_SERVICE_HOST` (`127.0.0.1`).
    pub host: String,
    /// `KUBERNETES_SERVICE_PORT`.
    pub port: u16,
    /// The ServiceAccount's namespace.
    pub namespace: String,
}

impl std::fmt::Debug for InClusterFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InClusterFiles")
            .field("dir", &self.dir)
            .field("host", &self.host)
            .field("port", &self.port)
            .field("namespace", &self.namespace)
            .finish()
    }
}

impl InClusterFiles {
    /// The environment variables a container gets.
    pub fn env(&self) -> Vec<(String, String)> {
        vec![
            ("KUBERNETES_SERVICE_HOST".into(), self.host.clone()),
            ("KUBERNETES_SERVICE_PORT".into(), self.port.to_string()),
            ("KUBERNETES_SERVICE_PORT_HTTPS".into(), self.port.to_string()),
        ]
    }

    /// The token file.
    pub fn token_path(&self) -> PathBuf {
        self.dir.join("token")
    }

    /// The CA file.
    pub fn ca_path(&self) -> PathBuf {
        self.dir.join("ca.crt")
    }
}

/// Write the ServiceAccount volume's files under `root` (owner-only permissions on the token).
pub(crate) fn write(root: &Path, token: &str, ca_pem: &str, namespace: &str) -> std::io::Result<PathBuf> {
    let dir = root.join(SERVICE_ACCOUNT_DIR);
    std::fs::create_dir_all(&dir)?;
    let token_path = dir.join("token");
    std::fs::write(&token_path, token)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&token_path, std::fs::Permissions::from_mode(0o600))?;
    }
    std::fs::write(dir.join("ca.crt"), ca_pem)?;
    std::fs::write(dir.join("namespace"), namespace)?;
    Ok(dir)
}

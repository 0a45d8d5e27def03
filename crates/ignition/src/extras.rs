//! What an installation adds to every node of both operators: people's SSH users, the SSO CA
//! trusted for SSH user certificates, Docker registry mirrors, the pod sandbox ("pause") image
//! and the Docker Hub credential.
//!
//! kvm-operator takes the SSH users from the KVMConfig (`spec.cluster.kubernetes.ssh.userList`),
//! aws-operator from its `--ssh-users` setting (the original's `user:key,…` list); both take the
//! SSO key (`--sso-public-key`), the mirrors (`--registry-mirrors`), the pause image
//! (`--pause-image`) and the Docker Hub token (`--dockerhub-token`) from their settings. The
//! files, units and users are written here once, so a node of either provider gets the same
//! ones.
//!
//! # Container runtimes
//!
//! kubelet talks to containerd through CRI (its default endpoint, `/run/containerd/containerd.sock`),
//! so the pod sandbox image and the registry credential of pods are containerd's: with a pause
//! image or a Docker Hub token set, the node gets its own containerd configuration
//! ([`CONTAINERD_CONFIG`], Flatcar's defaults plus `sandbox_image`, the `docker.io` mirrors and
//! the `docker.io` and `registry-1.docker.io` auth, as the original's `k8scloudconfig` wrote it)
//! and a drop-in pointing containerd at it ([`CONTAINERD_CONFIG_DROPIN`], Flatcar's documented
//! way). Without either, containerd keeps Flatcar's configuration. The Docker Hub token also
//! goes to Docker's client configuration ([`DOCKER_CLIENT_CONFIG`]) for the images Docker
//! pulls itself (kubelet's own container).
//!
//! The token is a secret: [`DockerhubToken`]'s `Debug` prints `***`, the files that carry it are
//! readable by root only, and a malformed token is refused without being repeated.

use std::fmt;

use base64::Engine as _;
use serde_json::json;

use crate::{Dropin, File, User};

/// Where the SSO CA's public key lands on a node.
pub const SSO_CA_KEYS: &str = "/etc/ssh/trusted-user-ca-keys.pem";

/// The sshd drop-in that trusts [`SSO_CA_KEYS`] for user certificates.
pub const SSHD_TRUSTED_CA_DROPIN: &str = "/etc/ssh/sshd_config.d/10-trusted-user-ca-keys.conf";

/// Docker's daemon configuration, holding the registry mirrors.
pub const DOCKER_DAEMON_CONFIG: &str = "/etc/docker/daemon.json";

/// Docker's client configuration of root, holding the Docker Hub credential.
pub const DOCKER_CLIENT_CONFIG: &str = "/root/.docker/config.json";

/// containerd's configuration when the node has its own ([`NodeExtras::files`]).
pub const CONTAINERD_CONFIG: &str = "/etc/containerd/config.toml";

/// The drop-in of `containerd.service` that points containerd at [`CONTAINERD_CONFIG`].
pub const CONTAINERD_CONFIG_DROPIN: &str = "10-use-custom-config.conf";

/// The registry hosts the Docker Hub credential is for: Docker's index name and the hosts
/// containerd resolves `docker.io` to.
const DOCKER_HUB_INDEX: &str = "https://index.docker.io/v1/";
const DOCKER_HUB_HOSTS: [&str; 2] = ["docker.io", "registry-1.docker.io"];

/// The Docker Hub credential of every node: the `auth` value of a Docker configuration, the
/// base64 of `<user>:<access token>` (the original's `service.registry.dockerhubToken`). Empty:
/// none. Its `Debug` never shows it.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct DockerhubToken(String);

impl fmt::Debug for DockerhubToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_empty() { "DockerhubToken(none)" } else { "DockerhubToken(***)" })
    }
}

impl DockerhubToken {
    /// The token `value`: empty, or the base64 of `<user>:<access token>`. The error names what
    /// is wrong and the fix, never the value.
    pub fn parse(value: &str) -> Result<Self, String> {
        let token = Self(value.trim().to_string());
        token.validate()?;
        Ok(token)
    }

    /// Whether the token is empty or the base64 of `<user>:<access token>`; the error names what
    /// is wrong and the fix, never the value. Flags take the token unchecked ([`FromStr`]
    /// never fails: a parser's error would repeat the value), so a daemon calls this at start.
    ///
    /// [`FromStr`]: std::str::FromStr
    pub fn validate(&self) -> Result<(), String> {
        if self.0.is_empty() {
            return Ok(());
        }
        const FIX: &str = "give the base64 of <user>:<access token>, as `printf %s user:token | base64 -w0` prints it";
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(&self.0)
            .map_err(|_| format!("the Docker Hub token is not base64: {FIX}"))?;
        let text = String::from_utf8(decoded).map_err(|_| format!("the Docker Hub token is not text: {FIX}"))?;
        match text.split_once(':') {
            Some((user, secret)) if !user.is_empty() && !secret.is_empty() => Ok(()),
            _ => Err(format!("the Docker Hub token decodes to no <user>:<access token> pair: {FIX}")),
        }
    }

    /// A token of the right form that is nobody's (`placeholder:placeholder`), printed where
    /// a command shows a node config without its secrets.
    pub fn placeholder() -> Self {
        Self(base64::engine::general_purpose::STANDARD.encode("placeholder:placeholder"))
    }

    /// Whether no token is set.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl std::str::FromStr for DockerhubToken {
    type Err = std::convert::Infallible;

    /// The value as it is, trimmed: check it with [`DockerhubToken::validate`].
    fn from_str(value: &str) -> Result<Self, Self::Err> {
        Ok(Self(value.trim().to_string()))
    }
}

/// A person's SSH login on the nodes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SshUser {
    /// The user name.
    pub name: String,
    /// The user's SSH public key (`ssh-ed25519 AAAA… comment`).
    pub public_key: String,
}

/// What an installation adds to every node; nothing when empty (the default).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeExtras {
    /// SSH users, each in the groups `sudo` and `docker`.
    pub ssh_users: Vec<SshUser>,
    /// The SSO CA's public key, trusted for SSH user certificates; none when empty.
    pub sso_public_key: String,
    /// Docker registry mirrors (Docker's, and containerd's for `docker.io` when the node has
    /// its own containerd configuration).
    pub registry_mirrors: Vec<String>,
    /// The pod sandbox image (containerd's `sandbox_image`); containerd's own when empty.
    pub pause_image: String,
    /// The Docker Hub credential of image pulls from `docker.io`; none when empty.
    pub dockerhub_token: DockerhubToken,
}

impl NodeExtras {
    /// The files: Docker's mirrors, the SSO CA key and the sshd drop-in trusting it, and with a
    /// pause image or a Docker Hub token containerd's configuration; with a token, Docker's
    /// client configuration. The files holding the token are readable by root only.
    pub fn files(&self) -> Vec<File> {
        let mut files = Vec::new();
        if !self.registry_mirrors.is_empty() {
            let daemon = json!({ "registry-mirrors": self.registry_mirrors });
            files.push(File::text(DOCKER_DAEMON_CONFIG, &format!("{daemon}\n")));
        }
        if self.own_containerd_config() {
            let config = self.containerd_config();
            files.push(if self.dockerhub_token.is_empty() {
                File::text(CONTAINERD_CONFIG, &config)
            } else {
                File::private(CONTAINERD_CONFIG, config)
            });
        }
        if !self.dockerhub_token.is_empty() {
            let auths = json!({ "auths": { DOCKER_HUB_INDEX: { "auth": self.dockerhub_token.0 } } });
            files.push(File::private(DOCKER_CLIENT_CONFIG, format!("{auths}\n")));
        }
        if !self.sso_public_key.trim().is_empty() {
            files.push(File::text(SSO_CA_KEYS, &format!("{}\n", self.sso_public_key.trim())));
            files.push(File::text(SSHD_TRUSTED_CA_DROPIN, &format!("TrustedUserCAKeys {SSO_CA_KEYS}\n")));
        }
        files
    }

    /// The drop-ins on units the image ships: containerd's, pointing it at
    /// [`CONTAINERD_CONFIG`] when the node has its own. Join them to a renderer's units with
    /// [`crate::add_dropin`].
    pub fn dropins(&self) -> Vec<(&'static str, Dropin)> {
        if !self.own_containerd_config() {
            return Vec::new();
        }
        let contents = format!("[Service]\nEnvironment=CONTAINERD_CONFIG={CONTAINERD_CONFIG}\n");
        vec![("containerd.service", Dropin::new(CONTAINERD_CONFIG_DROPIN, contents))]
    }

    /// Whether the node needs its own containerd configuration.
    fn own_containerd_config(&self) -> bool {
        !self.pause_image.trim().is_empty() || !self.dockerhub_token.is_empty()
    }

    /// containerd's configuration (version 2): Flatcar's defaults (systemd cgroups, runc v2),
    /// the sandbox image, the `docker.io` mirrors and the Docker Hub auth.
    fn containerd_config(&self) -> String {
        // A JSON string is a TOML basic string: the same quotes and escapes.
        let quoted = |s: &str| serde_json::Value::String(s.to_string()).to_string();
        let cri = "plugins.\"io.containerd.grpc.v1.cri\"";
        let mut config = format!(
            "version = 2\nroot = \"/var/lib/containerd\"\nstate = \"/run/containerd\"\nsubreaper = true\noom_score = -999\n\n\
             [grpc]\naddress = \"/run/containerd/containerd.sock\"\nuid = 0\ngid = 0\n\n\
             [{cri}.containerd.runtimes.runc]\nruntime_type = \"io.containerd.runc.v2\"\n\n\
             [{cri}.containerd.runtimes.runc.options]\nSystemdCgroup = true\n"
        );
        if !self.pause_image.trim().is_empty() {
            config.push_str(&format!("\n[{cri}]\nsandbox_image = {}\n", quoted(self.pause_image.trim())));
        }
        if !self.registry_mirrors.is_empty() {
            let endpoints = self.registry_mirrors.iter().map(|m| quoted(m)).collect::<Vec<_>>().join(", ");
            config.push_str(&format!("\n[{cri}.registry.mirrors.\"docker.io\"]\nendpoint = [{endpoints}]\n"));
        }
        if !self.dockerhub_token.is_empty() {
            for host in DOCKER_HUB_HOSTS {
                config.push_str(&format!(
                    "\n[{cri}.registry.configs.\"{host}\".auth]\nauth = {}\n",
                    quoted(&self.dockerhub_token.0)
                ));
            }
        }
        config
    }

    /// The SSH users, in the groups `sudo` and `docker`.
    pub fn users(&self) -> Vec<User> {
        self.ssh_users
            .iter()
            .map(|u| User {
                name: u.name.clone(),
                ssh_authorized_keys: vec![u.public_key.clone()],
                groups: vec!["sudo".into(), "docker".into()],
            })
            .collect()
    }
}

/// Parse the original's SSH user list, `name:public key` entries separated by commas
/// (`alice:ssh-ed25519 AAAA… alice,bob:ssh-rsa AAAA… bob`). An entry without a name or a key, or
/// with a name that is not a login name, is an error naming it and the fix.
pub fn parse_ssh_users(list: &str) -> Result<Vec<SshUser>, String> {
    list.split(',')
        .map(str::trim)
        .filter(|entry| !entry.is_empty())
        .map(|entry| {
            let (name, key) = entry.split_once(':').ok_or_else(|| {
                format!("SSH user {entry:?} has no key: write name:public-key, e.g. alice:ssh-ed25519 AAAA… alice")
            })?;
            let (name, key) = (name.trim(), key.trim());
            let valid_name = !name.is_empty()
                && name.len() <= 32
                && name.chars().next().is_some_and(|c| c.is_ascii_lowercase() || c == '_')
                && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-');
            if !valid_name {
                return Err(format!(
                    "SSH user name {name:?} is not a login name: use lower-case letters, digits, - and _, starting with a letter"
                ));
            }
            if key.split_whitespace().count() < 2 || !key.starts_with("ssh-") && !key.starts_with("ecdsa-") {
                return Err(format!(
                    "SSH user {name}: {key:?} is not an SSH public key: write its type and key, e.g. ssh-ed25519 AAAA… {name}"
                ));
            }
            Ok(SshUser { name: name.to_string(), public_key: key.to_string() })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_is_added_by_default() {
        let extras = NodeExtras::default();
        assert!(extras.files().is_empty());
        assert!(extras.users().is_empty());
    }

    #[test]
    fn mirrors_sso_key_and_users_become_files_and_users() {
        let extras = NodeExtras {
            ssh_users: vec![SshUser { name: "alice".into(), public_key: "ssh-ed25519 AAAAa alice".into() }],
            sso_public_key: " ssh-ed25519 AAAAsso sso-ca\n".into(),
            registry_mirrors: vec!["https://mirror.example.com".into()],
            ..NodeExtras::default()
        };
        let files = extras.files();
        let text = |path: &str| {
            let f = files.iter().find(|f| f.path == path).unwrap_or_else(|| panic!("{path}"));
            String::from_utf8(f.contents.clone()).expect("text")
        };
        assert_eq!(text(DOCKER_DAEMON_CONFIG), "{\"registry-mirrors\":[\"https://mirror.example.com\"]}\n");
        assert_eq!(text(SSO_CA_KEYS), "ssh-ed25519 AAAAsso sso-ca\n");
        assert_eq!(text(SSHD_TRUSTED_CA_DROPIN), format!("TrustedUserCAKeys {SSO_CA_KEYS}\n"));
        let users = extras.users();
        assert_eq!(users.len(), 1);
        assert_eq!(users[0].name, "alice");
        assert_eq!(users[0].ssh_authorized_keys, ["ssh-ed25519 AAAAa alice"]);
        assert_eq!(users[0].groups, ["sudo", "docker"]);
    }

    /// `alice:dckr_pat_secret`, as the token is given.
    const TOKEN: &str = "YWxpY2U6ZGNrcl9wYXRfc2VjcmV0";

    #[test]
    fn a_pause_image_and_a_docker_hub_token_give_containerd_and_docker_their_configuration() {
        let extras = NodeExtras {
            registry_mirrors: vec!["https://mirror.example.com".into()],
            pause_image: "registry.example.com/giantswarm/pause:3.10".into(),
            dockerhub_token: DockerhubToken::parse(TOKEN).expect("valid"),
            ..NodeExtras::default()
        };
        let files = extras.files();
        let file = |path: &str| files.iter().find(|f| f.path == path).unwrap_or_else(|| panic!("{path}"));
        let containerd = String::from_utf8(file(CONTAINERD_CONFIG).contents.clone()).expect("text");
        assert!(
            containerd.contains("[plugins.\"io.containerd.grpc.v1.cri\"]\nsandbox_image = \"registry.example.com/giantswarm/pause:3.10\"\n"),
            "{containerd}"
        );
        for host in ["docker.io", "registry-1.docker.io"] {
            let auth = format!(
                "[plugins.\"io.containerd.grpc.v1.cri\".registry.configs.\"{host}\".auth]\nauth = \"{TOKEN}\"\n"
            );
            assert!(containerd.contains(&auth), "{containerd}");
        }
        assert!(containerd.contains("endpoint = [\"https://mirror.example.com\"]"), "{containerd}");
        assert!(containerd.contains("SystemdCgroup = true"), "Flatcar's defaults stay: {containerd}");
        let docker: serde_json::Value = serde_json::from_slice(&file(DOCKER_CLIENT_CONFIG).contents).expect("JSON");
        assert_eq!(docker, json!({"auths": {"https://index.docker.io/v1/": {"auth": TOKEN}}}));
        // Root only, for the files with the token.
        assert_eq!((file(CONTAINERD_CONFIG).mode, file(DOCKER_CLIENT_CONFIG).mode), (0o600, 0o600));
        let dropins = extras.dropins();
        assert_eq!(dropins.len(), 1);
        assert_eq!(dropins[0].0, "containerd.service");
        assert_eq!(dropins[0].1.contents, format!("[Service]\nEnvironment=CONTAINERD_CONFIG={CONTAINERD_CONFIG}\n"));
        // The pause image alone: containerd's configuration, readable, and no credential.
        let pause_only = NodeExtras { pause_image: "pause:3.10".into(), ..NodeExtras::default() };
        let files = pause_only.files();
        assert_eq!(files.iter().map(|f| (f.path.as_str(), f.mode)).collect::<Vec<_>>(), [(CONTAINERD_CONFIG, 0o644)]);
        assert!(!String::from_utf8_lossy(&files[0].contents).contains("auth"));
        // Neither: containerd keeps the image's configuration.
        let mirrors_only = NodeExtras { registry_mirrors: vec!["https://m.example".into()], ..NodeExtras::default() };
        assert!(mirrors_only.dropins().is_empty());
        assert!(mirrors_only.files().iter().all(|f| f.path == DOCKER_DAEMON_CONFIG));
    }

    #[test]
    fn the_docker_hub_token_is_checked_and_never_repeated() {
        let secret_looking = "bm90LWEtcGFpcg"; // base64, but of no user:token pair
        for bad in ["not base64!", secret_looking, "Og==" /* ":" */] {
            let err = DockerhubToken::parse(bad).expect_err(bad);
            assert!(err.contains("printf %s user:token | base64 -w0"), "{err}");
            assert!(!err.contains(bad), "the error repeats the value: {err}");
        }
        assert_eq!(DockerhubToken::parse(""), Ok(DockerhubToken::default()));
        let token = DockerhubToken::parse(TOKEN).expect("valid");
        assert_eq!(format!("{token:?}"), "DockerhubToken(***)");
        let extras = NodeExtras { dockerhub_token: token, ..NodeExtras::default() };
        assert!(!format!("{extras:?}").contains(TOKEN));
    }

    #[test]
    fn the_ssh_user_list_is_the_originals() {
        let users = parse_ssh_users("alice:ssh-ed25519 AAAAa alice, bob:ssh-rsa AAAAb bob@example").expect("valid");
        assert_eq!(
            users,
            [
                SshUser { name: "alice".into(), public_key: "ssh-ed25519 AAAAa alice".into() },
                SshUser { name: "bob".into(), public_key: "ssh-rsa AAAAb bob@example".into() },
            ]
        );
        assert_eq!(parse_ssh_users(""), Ok(Vec::new()));
        for (bad, says) in [
            ("alice", "has no key"),
            (":ssh-ed25519 AAAA x", "not a login name"),
            ("Alice:ssh-ed25519 AAAA x", "not a login name"),
            ("alice:AAAA", "not an SSH public key"),
        ] {
            let err = parse_ssh_users(bad).expect_err(bad);
            assert!(err.contains(says), "{bad}: {err}");
        }
    }
}

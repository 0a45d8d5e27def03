//! What an installation adds to every node of both operators: people's SSH users, the SSO CA
//! trusted for SSH user certificates, and Docker registry mirrors.
//!
//! kvm-operator takes the SSH users from the KVMConfig (`spec.cluster.kubernetes.ssh.userList`),
//! aws-operator from its `--ssh-users` setting (the original's `user:key,…` list); both take the
//! SSO key (`--sso-public-key`) and the mirrors (`--registry-mirrors`) from their settings. The
//! files and users are written here once, so a node of either provider gets the same ones.

use serde_json::json;

use crate::{File, User};

/// Where the SSO CA's public key lands on a node.
pub const SSO_CA_KEYS: &str = "/etc/ssh/trusted-user-ca-keys.pem";

/// The sshd drop-in that trusts [`SSO_CA_KEYS`] for user certificates.
pub const SSHD_TRUSTED_CA_DROPIN: &str = "/etc/ssh/sshd_config.d/10-trusted-user-ca-keys.conf";

/// Docker's daemon configuration, holding the registry mirrors.
pub const DOCKER_DAEMON_CONFIG: &str = "/etc/docker/daemon.json";

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
    /// Docker registry mirrors.
    pub registry_mirrors: Vec<String>,
}

impl NodeExtras {
    /// The files: Docker's mirrors, the SSO CA key and the sshd drop-in trusting it.
    pub fn files(&self) -> Vec<File> {
        let mut files = Vec::new();
        if !self.registry_mirrors.is_empty() {
            let daemon = json!({ "registry-mirrors": self.registry_mirrors });
            files.push(File::text(DOCKER_DAEMON_CONFIG, &format!("{daemon}\n")));
        }
        if !self.sso_public_key.trim().is_empty() {
            files.push(File::text(SSO_CA_KEYS, &format!("{}\n", self.sso_public_key.trim())));
            files.push(File::text(SSHD_TRUSTED_CA_DROPIN, &format!("TrustedUserCAKeys {SSO_CA_KEYS}\n")));
        }
        files
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

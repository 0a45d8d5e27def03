//! The API server's encryption key: an AES-CBC key that encrypts Secrets at rest in etcd.
//!
//! Generated once per cluster and never again while the cluster exists: a new key would make
//! every Secret already in etcd unreadable.

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

use crate::PkiError;

/// A 32-byte AES key, base64 as the `EncryptionConfiguration` carries it. `Debug` prints `***`.
#[derive(Clone, PartialEq, Eq)]
pub struct EncryptionKey(String);

impl EncryptionKey {
    /// A new key from the operating system's random source.
    pub fn generate() -> Result<Self, PkiError> {
        let mut bytes = [0u8; 32];
        ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes).map_err(|_| PkiError::Random)?;
        Ok(Self::from_bytes(bytes))
    }

    /// The key of these 32 bytes (tests).
    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(STANDARD.encode(bytes))
    }

    /// A key as stored (base64), e.g. read back from its Secret.
    pub fn from_base64(key: impl Into<String>) -> Self {
        Self(key.into())
    }

    /// The key, base64. For writing it to a Secret or a node config only; never log it.
    pub fn expose_base64(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for EncryptionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("EncryptionKey(***)")
    }
}

/// The API server's `--encryption-provider-config`: Secrets encrypted with `key` (AES-CBC, as
/// the original), and still readable when they were written before encryption was on.
pub fn encryption_configuration(key: &EncryptionKey) -> String {
    format!(
        "kind: EncryptionConfiguration
apiVersion: apiserver.config.k8s.io/v1
resources:
  - resources:
      - secrets
    providers:
      - aescbc:
          keys:
            - name: key1
              secret: {}
      - identity: {{}}
",
        key.expose_base64()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_key_is_32_random_bytes_and_never_printed() {
        let (a, b) = (EncryptionKey::generate().expect("key"), EncryptionKey::generate().expect("key"));
        assert_ne!(a, b);
        assert_eq!(STANDARD.decode(a.expose_base64()).expect("base64").len(), 32);
        assert_eq!(format!("{a:?}"), "EncryptionKey(***)");
        let config = encryption_configuration(&a);
        assert!(config.contains(&format!("              secret: {}\n", a.expose_base64())), "{config}");
        assert!(config.contains("- aescbc:"), "{config}");
    }
}

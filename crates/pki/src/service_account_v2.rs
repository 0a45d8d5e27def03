//! The service-account issuer of IAM roles for service accounts (IRSA): the signing key pair
//! `<id>-service-account-v2` and what a public OpenID Connect issuer serves from its public key.
//!
//! A cluster with IRSA signs its service-account tokens with this key pair, under an issuer URL
//! AWS can reach (the S3 bucket or CloudFront distribution that serves [`discovery_document`]
//! and [`jwks`]). AWS STS fetches the discovery document at
//! `<issuer>/.well-known/openid-configuration`, then the keys at its `jwks_uri`, and checks a
//! token's signature with them before `AssumeRoleWithWebIdentity` hands out credentials.
//!
//! The Secret has the original's format: `<id>-service-account-v2` with keys `key` (the private
//! key, PEM) and `pub` (the public key, PKIX PEM). A Secret written before (RSA keys, PKCS#1) is
//! read as it is and never replaced: a new key would invalidate every token in use. What this
//! crate generates is an ECDSA P-256 key (`ES256`; STS accepts RS256–RS512 and ES256–ES512), in
//! PKCS#8, which kube-apiserver reads for `--service-account-signing-key-file`.
//!
//! The key id of a key is the API server's own (`kid` of its tokens): the unpadded base64url
//! SHA-256 of the public key's PKIX DER, so the JWKS published here names the key the API
//! server's tokens name.

use k8s_openapi::api::core::v1::Secret;
use serde_json::{Value, json};

use crate::PkiError;
use crate::issue::PrivateKey;
use crate::secret::{CLUSTER_LABEL, ISSUED_BY, ISSUED_BY_LABEL};

/// The Secret key of the private key (PEM).
pub const PRIVATE_KEY: &str = "key";
/// The Secret key of the public key (PKIX PEM).
pub const PUBLIC_KEY: &str = "pub";
/// Where the discovery document is served, below the issuer URL.
pub const DISCOVERY_PATH: &str = ".well-known/openid-configuration";
/// Where the keys are served, below the issuer URL (the discovery document's `jwks_uri`).
pub const JWKS_PATH: &str = "keys.json";

/// `<cluster id>-service-account-v2`.
pub fn secret_name(cluster_id: &str) -> String {
    format!("{cluster_id}-service-account-v2")
}

/// A service-account signing key pair. `Debug` prints no key.
#[derive(Clone)]
pub struct SigningKeyPair {
    /// The private key, PKCS#8 PEM.
    pub private_key: PrivateKey,
    /// The public key, PKIX PEM.
    pub public_pem: String,
}

impl std::fmt::Debug for SigningKeyPair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningKeyPair").field("private_key", &self.private_key).finish_non_exhaustive()
    }
}

impl SigningKeyPair {
    /// A new ECDSA P-256 key pair from the operating system's random source.
    pub fn generate() -> Result<Self, PkiError> {
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)
            .map_err(|e| PkiError::Issue { what: "the service-account signing key".into(), reason: e.to_string() })?;
        Ok(Self { private_key: PrivateKey::from_pem(key.serialize_pem()), public_pem: key.public_key_pem() })
    }
}

/// The Secret `<cluster id>-service-account-v2` of `pair`, labelled as the operator's.
pub fn secret(namespace: &str, cluster_id: &str, pair: &SigningKeyPair) -> Secret {
    crate::secret::labelled_secret(
        namespace,
        secret_name(cluster_id),
        &[(CLUSTER_LABEL, cluster_id), (ISSUED_BY_LABEL, ISSUED_BY)],
        &[(PRIVATE_KEY, pair.private_key.expose_pem().as_bytes()), (PUBLIC_KEY, pair.public_pem.as_bytes())],
    )
}

/// Why a public key cannot be published. Names the problem, never key material.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PublicKeyError {
    /// The Secret has no such key, or it is empty.
    #[error("key {key:?} is missing or empty")]
    Missing {
        /// The Secret key.
        key: &'static str,
    },
    /// Not a PEM block, or not a PKIX public key in it.
    #[error("key {key:?} is not a PEM public key (-----BEGIN PUBLIC KEY-----): {reason}")]
    Unreadable {
        /// The Secret key.
        key: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// A key type or curve STS does not accept.
    #[error("key {key:?} holds a {what} key; STS accepts RSA and ECDSA P-256, P-384 and P-521 keys")]
    Unsupported {
        /// The Secret key.
        key: &'static str,
        /// The key type found.
        what: String,
    },
}

/// A public key as a JSON Web Key, with the signing algorithm its tokens use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicJwk {
    /// `RS256`, `ES256`, `ES384` or `ES512`.
    pub algorithm: &'static str,
    /// The key id ([module docs](self)).
    pub key_id: String,
    /// The JWK (RFC 7517), with `kid`, `alg` and `use: sig`.
    pub jwk: Value,
}

fn b64url(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// An unsigned big-endian integer without its leading zero bytes, as JWK wants `n` and `e`.
fn unsigned(bytes: &[u8]) -> &[u8] {
    let start = bytes.iter().position(|b| *b != 0).unwrap_or(bytes.len().saturating_sub(1));
    &bytes[start..]
}

/// The JWK of the PKIX PEM public key `pem` (the Secret's `pub`).
pub fn public_jwk(pem: &str) -> Result<PublicJwk, PublicKeyError> {
    use x509_parser::prelude::FromDer;
    use x509_parser::public_key::PublicKey;
    const KEY: &str = PUBLIC_KEY;
    let unreadable = |reason: String| PublicKeyError::Unreadable { key: KEY, reason };
    if pem.trim().is_empty() {
        return Err(PublicKeyError::Missing { key: KEY });
    }
    let (_, block) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).map_err(|e| unreadable(e.to_string()))?;
    if block.label != "PUBLIC KEY" {
        return Err(unreadable(format!("the PEM block is a {:?}", block.label)));
    }
    let (_, spki) =
        x509_parser::x509::SubjectPublicKeyInfo::from_der(&block.contents).map_err(|e| unreadable(e.to_string()))?;
    let key_id = b64url(ring::digest::digest(&ring::digest::SHA256, &block.contents).as_ref());
    let parsed = spki.parsed().map_err(|e| unreadable(e.to_string()))?;
    let (algorithm, mut jwk) = match parsed {
        PublicKey::RSA(rsa) => {
            ("RS256", json!({"kty": "RSA", "n": b64url(unsigned(rsa.modulus)), "e": b64url(unsigned(rsa.exponent))}))
        }
        PublicKey::EC(point) => {
            let curve = spki.algorithm.parameters.as_ref().and_then(|p| p.as_oid().ok()).map(|o| o.to_id_string());
            let (crv, algorithm, size) = match curve.as_deref() {
                Some("1.2.840.10045.3.1.7") => ("P-256", "ES256", 32),
                Some("1.3.132.0.34") => ("P-384", "ES384", 48),
                Some("1.3.132.0.35") => ("P-521", "ES512", 66),
                other => {
                    return Err(PublicKeyError::Unsupported {
                        key: KEY,
                        what: format!("ECDSA curve {}", other.unwrap_or("(none)")),
                    });
                }
            };
            let data = point.data();
            if data.len() != 1 + 2 * size || data[0] != 4 {
                return Err(unreadable("the ECDSA point is not an uncompressed point of its curve".into()));
            }
            (algorithm, json!({"kty": "EC", "crv": crv, "x": b64url(&data[1..=size]), "y": b64url(&data[1 + size..])}))
        }
        other => {
            let what = match other {
                PublicKey::DSA(_) => "DSA",
                PublicKey::GostR3410(_) | PublicKey::GostR3410_2012(_) => "GOST",
                _ => "unknown",
            };
            return Err(PublicKeyError::Unsupported { key: KEY, what: what.into() });
        }
    };
    jwk["kid"] = key_id.clone().into();
    jwk["alg"] = algorithm.into();
    jwk["use"] = "sig".into();
    Ok(PublicJwk { algorithm, key_id, jwk })
}

/// The JWKS document (`keys.json`) of `keys`.
pub fn jwks(keys: &[PublicJwk]) -> Value {
    json!({"keys": keys.iter().map(|k| k.jwk.clone()).collect::<Vec<_>>()})
}

/// The OpenID Connect discovery document of `issuer` (an `https://` URL without a trailing
/// slash) whose tokens are signed with `algorithms`, as the EKS pod identity webhook's
/// self-hosted setup and the original publish it.
pub fn discovery_document(issuer: &str, algorithms: &[&str]) -> Value {
    let issuer = issuer.trim_end_matches('/');
    json!({
        "issuer": issuer,
        "jwks_uri": format!("{issuer}/{JWKS_PATH}"),
        "authorization_endpoint": "urn:kubernetes:programmatic_authorization",
        "response_types_supported": ["id_token"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": algorithms,
        "claims_supported": ["sub", "iss"],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An RSA key as the original wrote it (2048 bits, PKIX public key).
    const RSA_PUB: &str = "-----BEGIN PUBLIC KEY-----
MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAvg4Mm3NXcWjyzcsDJ5+1
MBFBr7i59XDfSRGYYhaD8AUuonS2zVmxqUaaOaPSzWnxcf5iIR9vHsjbYXZl0+r8
ClxozKOHXGUSItidBJRN81sltHtwTkN6eJbawBbKYRvolb+jNfghY/uthinVOx34
J/iQ3qV66dSPqSX86F81EVX5ENH3U5QQtrMCmidUNayvXPM25kElYsq7zqE91JBm
Yp0SHX4rEPNrqWku8AYYMotavRYTuVEs5cTWcBP6QmgQqT+n4C6tA95R1IEVOCGM
d+H6XJNwSYZA4FQbIpIX0W3wkFciz58mwsmqy/9FJAzjbuzYmqU0J/6AgU/thMeI
ewIDAQAB
-----END PUBLIC KEY-----
";

    #[test]
    fn a_generated_pair_is_p256_in_pkcs8_and_its_jwk_is_es256() {
        let pair = SigningKeyPair::generate().expect("key");
        assert!(pair.private_key.expose_pem().starts_with("-----BEGIN PRIVATE KEY-----"));
        assert!(!format!("{pair:?}").contains("BEGIN"), "no key in Debug: {pair:?}");
        let jwk = public_jwk(&pair.public_pem).expect("jwk");
        assert_eq!(jwk.algorithm, "ES256");
        assert_eq!((jwk.jwk["kty"].as_str(), jwk.jwk["crv"].as_str()), (Some("EC"), Some("P-256")));
        assert_eq!(jwk.jwk["x"].as_str().map(str::len), Some(43), "32 bytes, unpadded base64url");
        assert_eq!(jwk.jwk["kid"].as_str(), Some(jwk.key_id.as_str()));
        assert_ne!(public_jwk(&SigningKeyPair::generate().expect("key").public_pem).expect("jwk").key_id, jwk.key_id);
    }

    #[test]
    fn an_rsa_key_of_the_original_is_published_as_rs256_with_the_api_servers_key_id() {
        let jwk = public_jwk(RSA_PUB).expect("jwk");
        assert_eq!(jwk.algorithm, "RS256");
        assert_eq!(jwk.jwk["e"], "AQAB");
        // The modulus without its DER sign byte, and the key id, as `openssl` computes them.
        assert!(jwk.jwk["n"].as_str().is_some_and(|n| n.starts_with("vg4Mm3NXcWjyzcsDJ5-1MBFBr7i59X")), "{}", jwk.jwk);
        assert_eq!(jwk.key_id, "fBsPSRyvB6ymxWdXoJ-7alk_Hguio4Dy7gO-52Z3Dyg");
        assert_eq!(jwks(std::slice::from_ref(&jwk))["keys"][0], jwk.jwk);
    }

    #[test]
    fn what_is_not_a_public_key_is_named_and_not_printed() {
        assert_eq!(public_jwk(" "), Err(PublicKeyError::Missing { key: "pub" }));
        let private = SigningKeyPair::generate().expect("key").private_key;
        let err = public_jwk(private.expose_pem()).expect_err("a private key is not a public key");
        assert!(err.to_string().contains("\"PRIVATE KEY\""), "{err}");
        assert!(!err.to_string().contains("MI"), "{err}");
        assert!(matches!(public_jwk("not pem"), Err(PublicKeyError::Unreadable { .. })));
    }

    #[test]
    fn the_discovery_document_names_the_issuer_and_its_keys() {
        let doc =
            discovery_document("https://s3.eu-west-1.amazonaws.com/123-g8s-a1b2c-oidc-pod-identity-v2/", &["ES256"]);
        assert_eq!(doc["issuer"], "https://s3.eu-west-1.amazonaws.com/123-g8s-a1b2c-oidc-pod-identity-v2");
        assert_eq!(doc["jwks_uri"], "https://s3.eu-west-1.amazonaws.com/123-g8s-a1b2c-oidc-pod-identity-v2/keys.json");
        assert_eq!(doc["id_token_signing_alg_values_supported"], json!(["ES256"]));
        assert_eq!(doc["response_types_supported"], json!(["id_token"]));
    }
}

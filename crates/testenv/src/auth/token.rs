//! ServiceAccount tokens: JWTs signed with an ECDSA P-256 key (ES256), with the claims
//! kube-apiserver's TokenRequest puts in them (`iss`, `sub`, `aud`, `exp`, `iat`, `nbf`, `jti`
//! and the private `kubernetes.io` claim naming the namespace and the ServiceAccount).
//!
//! Operators treat the token as opaque, but tools decode it (`kubectl create token | jwt
//! decode`), and the authenticator must be able to refuse a forged or expired one, so the
//! tokens are real signed JWTs rather than random strings.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::rand::SystemRandom;
use ring::signature::{ECDSA_P256_SHA256_FIXED, ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
use serde_json::{Value, json};

/// The issuer and default audience of kube-apiserver's tokens (`--service-account-issuer`,
/// `--api-audiences`).
pub const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

/// What a ServiceAccount token says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Claims {
    /// The ServiceAccount's namespace.
    pub namespace: String,
    /// The ServiceAccount's name.
    pub service_account: String,
    /// The ServiceAccount's uid: a token outlives neither its account nor a re-created one.
    pub service_account_uid: String,
    /// Audiences (`aud`).
    pub audiences: Vec<String>,
    /// Issued at, Unix seconds.
    pub issued_at: i64,
    /// Expires at, Unix seconds.
    pub expires_at: i64,
    /// The token's unique id (`jti`).
    pub id: String,
    /// The object the token is bound to (`kind`, `name`, `uid`), if any.
    pub bound_object: Option<(String, String, String)>,
}

/// Signs and verifies tokens with one key, generated when the server starts.
pub struct Issuer {
    key: EcdsaKeyPair,
    kid: String,
    rng: SystemRandom,
}

impl std::fmt::Debug for Issuer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Issuer").field("kid", &self.kid).field("key", &"***").finish()
    }
}

/// Tokens that cannot be issued.
#[derive(Debug, thiserror::Error)]
#[error("cannot sign a service account token: {0}")]
pub struct SignError(String);

impl Issuer {
    /// A new signing key.
    pub fn generate() -> Result<Issuer, SignError> {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .map_err(|e| SignError(e.to_string()))?;
        let key = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
            .map_err(|e| SignError(e.to_string()))?;
        // The key id is derived from the public key, as kube-apiserver derives it.
        let digest = ring::digest::digest(&ring::digest::SHA256, key.public_key().as_ref());
        let kid = URL_SAFE_NO_PAD.encode(digest.as_ref());
        Ok(Issuer { key, kid, rng })
    }

    /// Sign `claims` into a compact JWT.
    pub fn issue(&self, claims: &Claims) -> Result<String, SignError> {
        let header = json!({"alg": "ES256", "kid": self.kid});
        let mut k8s = json!({
            "namespace": claims.namespace,
            "serviceaccount": {"name": claims.service_account, "uid": claims.service_account_uid},
        });
        if let Some((kind, name, uid)) = &claims.bound_object {
            let key = match kind.as_str() {
                "Pod" => "pod",
                "Node" => "node",
                _ => "secret",
            };
            k8s[key] = json!({"name": name, "uid": uid});
        }
        let body = json!({
            "aud": claims.audiences,
            "exp": claims.expires_at,
            "iat": claims.issued_at,
            "iss": ISSUER,
            "jti": claims.id,
            "kubernetes.io": k8s,
            "nbf": claims.issued_at,
            "sub": format!("system:serviceaccount:{}:{}", claims.namespace, claims.service_account),
        });
        let signing_input =
            format!("{}.{}", URL_SAFE_NO_PAD.encode(header.to_string()), URL_SAFE_NO_PAD.encode(body.to_string()));
        let sig = self.key.sign(&self.rng, signing_input.as_bytes()).map_err(|e| SignError(e.to_string()))?;
        Ok(format!("{signing_input}.{}", URL_SAFE_NO_PAD.encode(sig.as_ref())))
    }

    /// The claims of a token this issuer signed, or `None` for anything else (a malformed
    /// token, another key's signature, another issuer). Expiry is the caller's to check: the
    /// server's clock can be moved by tests.
    pub fn verify(&self, token: &str) -> Option<Claims> {
        let mut parts = token.split('.');
        let (header, body, sig) = (parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() {
            return None;
        }
        let header: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(header).ok()?).ok()?;
        if header.get("alg").and_then(Value::as_str) != Some("ES256") {
            return None;
        }
        let sig = URL_SAFE_NO_PAD.decode(sig).ok()?;
        let signing_input = &token[..token.len() - token.rsplit('.').next()?.len() - 1];
        ring::signature::UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, self.key.public_key().as_ref())
            .verify(signing_input.as_bytes(), &sig)
            .ok()?;
        let body: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(body).ok()?).ok()?;
        if body.get("iss").and_then(Value::as_str) != Some(ISSUER) {
            return None;
        }
        let k8s = body.get("kubernetes.io")?;
        let str_at = |v: &Value, p: &str| v.pointer(p).and_then(Value::as_str).map(str::to_string);
        let bound_object = [("pod", "Pod"), ("secret", "Secret"), ("node", "Node")].iter().find_map(|(key, kind)| {
            let o = k8s.get(*key)?;
            Some((kind.to_string(), str_at(o, "/name")?, str_at(o, "/uid").unwrap_or_default()))
        });
        Some(Claims {
            namespace: str_at(k8s, "/namespace")?,
            service_account: str_at(k8s, "/serviceaccount/name")?,
            service_account_uid: str_at(k8s, "/serviceaccount/uid").unwrap_or_default(),
            audiences: match body.get("aud") {
                Some(Value::String(s)) => vec![s.clone()],
                Some(Value::Array(a)) => a.iter().filter_map(|v| v.as_str().map(str::to_string)).collect(),
                _ => Vec::new(),
            },
            issued_at: body.get("iat").and_then(Value::as_i64).unwrap_or(0),
            expires_at: body.get("exp").and_then(Value::as_i64)?,
            id: str_at(&body, "/jti").unwrap_or_default(),
            bound_object,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims() -> Claims {
        Claims {
            namespace: "ops".into(),
            service_account: "robot".into(),
            service_account_uid: "u-1".into(),
            audiences: vec![ISSUER.into()],
            issued_at: 1_000,
            expires_at: 4_600,
            id: "j-1".into(),
            bound_object: None,
        }
    }

    #[test]
    fn tokens_round_trip_and_forgeries_fail() {
        let issuer = Issuer::generate().unwrap();
        let token = issuer.issue(&claims()).unwrap();
        assert_eq!(issuer.verify(&token), Some(claims()));
        // Another key's token, a tampered body and garbage are all refused.
        let other = Issuer::generate().unwrap();
        assert_eq!(other.verify(&token), None);
        let mut parts: Vec<String> = token.split('.').map(str::to_string).collect();
        let mut body: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(&parts[1]).unwrap()).unwrap();
        body["kubernetes.io"]["serviceaccount"]["name"] = json!("admin");
        parts[1] = URL_SAFE_NO_PAD.encode(body.to_string());
        assert_eq!(issuer.verify(&parts.join(".")), None);
        assert_eq!(issuer.verify("not-a-token"), None);
    }

    #[test]
    fn claims_read_like_kube_apiserver_tokens() {
        let issuer = Issuer::generate().unwrap();
        let token = issuer.issue(&claims()).unwrap();
        let body: Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(token.split('.').nth(1).unwrap()).unwrap()).unwrap();
        assert_eq!(body["sub"], "system:serviceaccount:ops:robot");
        assert_eq!(body["iss"], ISSUER);
        assert_eq!(body["kubernetes.io"]["serviceaccount"]["uid"], "u-1");
    }
}

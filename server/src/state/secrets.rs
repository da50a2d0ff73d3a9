//! Secrets of the state store: passwords (argon2id), tool credentials sealed at rest
//! (ChaCha20-Poly1305 under a key from `TOOLGRAPH_SECRET_KEY(_FILE)`, the scope and name bound as
//! associated data so a sealed value cannot be moved to another scope), or only referenced
//! (`env:NAME`, `file:PATH`: the value never enters the database).

use super::CredentialRow;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{ChaCha20Poly1305, Key, Nonce};
use secrecy::{ExposeSecret, SecretString};
use sha2::{Digest, Sha256};
use toolgraph_engine::exec::credentials::{Credential, CredentialSet, Placement};

pub use toolgraph_schema::secrets::env_secret;

/// The key credentials are sealed with.
#[derive(Clone)]
pub struct SealingKey(Key);

impl std::fmt::Debug for SealingKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SealingKey(redacted)")
    }
}

impl SealingKey {
    /// From a passphrase of at least 32 characters (SHA-256 of it is the key).
    pub fn from_passphrase(p: &str) -> Result<Self, String> {
        if p.chars().count() < 32 {
            return Err("TOOLGRAPH_SECRET_KEY must be at least 32 characters (e.g. `openssl rand -hex 32`)".into());
        }
        let d = Sha256::digest(p.as_bytes());
        Ok(SealingKey(*Key::from_slice(&d)))
    }

    /// From `TOOLGRAPH_SECRET_KEY(_FILE)`; `None` when unset (credentials can then only be referenced).
    pub fn from_env() -> Result<Option<Self>, String> {
        env_secret("TOOLGRAPH_SECRET_KEY")?.map(|s| Self::from_passphrase(s.expose_secret())).transpose()
    }

    fn aad(scope: &str, name: &str) -> Vec<u8> {
        format!("toolgraph-credential\u{0}{scope}\u{0}{name}").into_bytes()
    }

    /// `v1:NONCE:CIPHERTEXT` (hex).
    pub fn seal(&self, scope: &str, name: &str, value: &str) -> Result<String, String> {
        let mut nonce = [0u8; 12];
        getrandom::fill(&mut nonce).map_err(|e| format!("no randomness: {e}"))?;
        let aad = Self::aad(scope, name);
        let ct = ChaCha20Poly1305::new(&self.0)
            .encrypt(Nonce::from_slice(&nonce), Payload { msg: value.as_bytes(), aad: &aad })
            .map_err(|_| "sealing failed".to_string())?;
        Ok(format!("v1:{}:{}", super::hex(&nonce), super::hex(&ct)))
    }

    pub fn open(&self, scope: &str, name: &str, sealed: &str) -> Result<SecretString, String> {
        let parts: Vec<&str> = sealed.split(':').collect();
        let (nonce, ct) = match parts.as_slice() {
            ["v1", n, c] => (unhex(n)?, unhex(c)?),
            _ => return Err("not a sealed value".into()),
        };
        if nonce.len() != 12 {
            return Err("bad nonce".into());
        }
        let aad = Self::aad(scope, name);
        let pt = ChaCha20Poly1305::new(&self.0)
            .decrypt(Nonce::from_slice(&nonce), Payload { msg: &ct, aad: &aad })
            .map_err(|_| {
                "cannot open it with this TOOLGRAPH_SECRET_KEY (another key sealed it, or it was altered)".to_string()
            })?;
        String::from_utf8(pt).map(SecretString::from).map_err(|_| "not text".into())
    }
}

fn unhex(s: &str) -> Result<Vec<u8>, String> {
    if !s.len().is_multiple_of(2) {
        return Err("bad hex".into());
    }
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).map_err(|_| "bad hex".to_string())).collect()
}

/// A reference's value: `env:NAME` or `file:PATH`.
pub fn resolve_reference(r: &str) -> Result<SecretString, String> {
    if let Some(name) = r.strip_prefix("env:") {
        return std::env::var(name)
            .map(|v| SecretString::from(v.trim().to_string()))
            .map_err(|_| format!("environment variable {name} is not set"));
    }
    if let Some(path) = r.strip_prefix("file:") {
        return std::fs::read_to_string(path)
            .map(|v| SecretString::from(v.trim().to_string()))
            .map_err(|e| format!("cannot read {path}: {e}"));
    }
    Err("a reference is env:NAME or file:PATH".into())
}

/// The credentials the executor injects, from the stored rows; rows that cannot be opened are
/// skipped and named (scope, name and why) in the second list.
pub fn credential_set(rows: &[CredentialRow], key: Option<&SealingKey>) -> (CredentialSet, Vec<String>) {
    let mut out = Vec::new();
    let mut problems = Vec::new();
    for r in rows {
        let value = match (&r.sealed, &r.reference, key) {
            (Some(s), _, Some(k)) => k.open(&r.scope, &r.name, s),
            (Some(_), _, None) => Err("sealed, but TOOLGRAPH_SECRET_KEY is not set".into()),
            (None, Some(reference), _) => resolve_reference(reference),
            (None, None, _) => Err("no value".into()),
        };
        let placement = Placement::parse(&r.placement);
        match (value, placement) {
            (Ok(value), Some(placement)) => out.push(Credential {
                scope: r.scope.clone(),
                host: r.host.clone(),
                placement,
                name: r.name.clone(),
                value,
            }),
            (Err(e), _) => problems.push(format!("{} {}: {e}", r.scope, r.name)),
            (_, None) => problems.push(format!("{} {}: unknown placement {}", r.scope, r.name, r.placement)),
        }
    }
    (CredentialSet::new(out), problems)
}

/// An argon2id PHC hash of a password.
pub fn hash_password(password: &str) -> Result<String, String> {
    use argon2::password_hash::{PasswordHasher, SaltString};
    if password.chars().count() < 8 {
        return Err("a password has at least 8 characters".into());
    }
    let mut salt = [0u8; 16];
    getrandom::fill(&mut salt).map_err(|e| format!("no randomness: {e}"))?;
    let salt = SaltString::encode_b64(&salt).map_err(|e| e.to_string())?;
    argon2::Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| e.to_string())
}

pub fn verify_password(password: &str, phc: &str) -> bool {
    use argon2::password_hash::{PasswordHash, PasswordVerifier};
    PasswordHash::new(phc).is_ok_and(|h| argon2::Argon2::default().verify_password(password.as_bytes(), &h).is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_values_open_only_with_their_key_scope_and_name() {
        let k = SealingKey::from_passphrase("0123456789abcdef0123456789abcdef").unwrap();
        let sealed = k.seal("tool:travel/booking", "X-RapidAPI-Key", "secret-value-1").unwrap();
        assert!(!sealed.contains("secret-value-1"));
        assert_eq!(k.open("tool:travel/booking", "X-RapidAPI-Key", &sealed).unwrap().expose_secret(), "secret-value-1");
        assert!(k.open("tool:travel/other", "X-RapidAPI-Key", &sealed).is_err(), "bound to its scope");
        let other = SealingKey::from_passphrase("fedcba9876543210fedcba9876543210").unwrap();
        assert!(other.open("tool:travel/booking", "X-RapidAPI-Key", &sealed).is_err());
        assert!(SealingKey::from_passphrase("short").is_err());
        assert!(!format!("{k:?}").contains("0123"));
    }

    #[test]
    fn passwords_hash_with_argon2id() {
        let h = hash_password("correct horse").unwrap();
        assert!(h.starts_with("$argon2id$"), "{h}");
        assert!(verify_password("correct horse", &h));
        assert!(!verify_password("wrong horse!", &h));
        assert!(hash_password("short").is_err());
    }
}

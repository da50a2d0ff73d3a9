//! Secrets of the state store: passwords (argon2id), tool credentials sealed at rest
//! (ChaCha20-Poly1305 under a key from `TOOLGRAPH_SECRET_KEY(_FILE)`, the scope and name bound as
//! associated data so a sealed value cannot be moved to another scope), or only referenced
//! (`env:NAME`, `file:PATH`: the value never enters the database).

use super::credentials::CredentialRow;
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
        Ok(format!("v1:{}:{}", super::store::hex(&nonce), super::store::hex(&ct)))
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

/// The variables the daemon reads its own secrets from: never a tool credential's.
const OWN_SECRETS: [&str; 6] = [
    "TOOLGRAPH_SECRET_KEY",
    "TOOLGRAPH_API_KEYS",
    "TOOLGRAPH_STATE_PASSWORD",
    "TOOLGRAPH_NEO4J_PASSWORD",
    "TOOLGRAPH_QDRANT_API_KEY",
    "TOOLGRAPH_LLM_API_KEY",
];

/// The most a referenced file may hold, bytes.
pub const MAX_REFERENCED_FILE: u64 = 64 * 1024;

/// Where a tool credential's reference may point (`server.credential_env_prefix`,
/// `server.credential_files_dir`): references name a configured place, they do not reach into
/// the daemon's environment or file system.
#[derive(Debug, Clone)]
pub struct References {
    env_prefix: String,
    /// Canonical (links resolved); `None`: `from_file` is off.
    files_dir: Option<std::path::PathBuf>,
    /// The files the daemon reads for itself (its secrets, its configuration, its state
    /// database), by device and inode: never a tool credential, whatever name or link reaches
    /// them.
    own: Vec<(u64, u64)>,
}

/// A file's identity (device, inode), links followed; `None` where it cannot be read.
fn identity(path: &std::path::Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

impl References {
    /// From the settings; a prefix that would reach the daemon's own secrets, or a folder that
    /// is not one (or is a system one: /proc, /dev, /sys), is a configuration error.
    pub fn new(env_prefix: &str, files_dir: &str) -> Result<Self, String> {
        let prefix = env_prefix.trim();
        if prefix.is_empty() || OWN_SECRETS.iter().any(|s| s.starts_with(prefix)) {
            return Err(format!(
                "server.credential_env_prefix `{prefix}` would let a tool credential read the daemon's own secrets: use a prefix of the tools' own (default TOOLGRAPH_TOOL_)"
            ));
        }
        let files_dir = match files_dir.trim() {
            "" => None,
            dir => {
                let canon = std::fs::canonicalize(dir)
                    .ok()
                    .filter(|d| d.is_dir())
                    .ok_or_else(|| format!("server.credential_files_dir `{dir}` is not a folder"))?;
                if ["/proc", "/dev", "/sys"].iter().any(|p| canon.starts_with(p)) || canon == std::path::Path::new("/")
                {
                    return Err(format!("server.credential_files_dir `{dir}` is a system folder"));
                }
                Some(canon)
            }
        };
        // The daemon's own secret files (`TOOLGRAPH_SECRET_KEY_FILE`, `TOOLGRAPH_API_KEYS_FILE`, …).
        let own = OWN_SECRETS
            .iter()
            .filter_map(|name| std::env::var(format!("{name}_FILE")).ok())
            .filter_map(|p| identity(std::path::Path::new(&p)))
            .collect();
        Ok(References { env_prefix: prefix.to_string(), files_dir, own })
    }

    /// These files too are the daemon's own (its configuration, the LLM key files it names, its
    /// state database): never read as a tool credential. A credential folder that holds the
    /// state database is a configuration error (a reference could open it, and SQLite's locks do
    /// not survive a second opener).
    pub fn refusing(
        mut self,
        paths: &[std::path::PathBuf],
        state_db: Option<&std::path::Path>,
    ) -> Result<Self, String> {
        self.own.extend(paths.iter().filter_map(|p| identity(p)));
        if let Some(db) = state_db {
            let canon = std::fs::canonicalize(db).ok().or_else(|| {
                let parent = std::fs::canonicalize(db.parent()?).ok()?;
                Some(parent.join(db.file_name()?))
            });
            if let (Some(dir), Some(db)) = (&self.files_dir, canon) {
                if db.starts_with(dir) {
                    return Err(format!(
                        "server.credential_files_dir {} holds the state database {}: keep tool credentials in a folder of their own",
                        dir.display(),
                        db.display()
                    ));
                }
            }
            self.own.extend(identity(db));
        }
        Ok(self)
    }

    /// The prefix `from_env` names must start with.
    pub fn env_prefix(&self) -> &str {
        &self.env_prefix
    }

    /// Whether `from_env` may name `name` (by its name alone: nothing is read).
    pub fn env_allowed(&self, name: &str) -> bool {
        name.len() > self.env_prefix.len()
            && name.starts_with(&self.env_prefix)
            && !OWN_SECRETS.iter().any(|s| name.starts_with(s))
    }

    /// Why `from_file` may not name `path`, by its text alone (nothing is read): `None` when it
    /// may.
    pub fn file_refused(&self, path: &str) -> Option<String> {
        match &self.files_dir {
            None => Some(
                "`from_file` is off: set server.credential_files_dir to the folder credential files live in".into(),
            ),
            Some(dir) if !std::path::Path::new(path).is_absolute() || !std::path::Path::new(path).starts_with(dir) => {
                Some(format!("`from_file` must be an absolute path under {}", dir.display()))
            }
            Some(_) => None,
        }
    }

    /// A reference's value: `env:NAME` (an allowed, set variable) or `file:PATH` (a regular file
    /// under the folder, links resolved, at most [`MAX_REFERENCED_FILE`] bytes). The error is the
    /// same whether the variable or file is missing or not allowed: it tells nothing of what exists.
    pub fn resolve(&self, r: &str) -> Result<SecretString, String> {
        if let Some(name) = r.strip_prefix("env:") {
            let refused = || format!("env:{name} is not a set variable starting with {}", self.env_prefix);
            if !self.env_allowed(name) {
                return Err(refused());
            }
            return std::env::var(name).map(|v| SecretString::from(v.trim().to_string())).map_err(|_| refused());
        }
        if let Some(path) = r.strip_prefix("file:") {
            return self.read_file(path).ok_or_else(|| {
                format!(
                    "file:{path} is not a readable regular file of at most {} KiB under server.credential_files_dir",
                    MAX_REFERENCED_FILE / 1024
                )
            });
        }
        Err("a reference is env:NAME or file:PATH".into())
    }

    fn read_file(&self, path: &str) -> Option<SecretString> {
        use std::io::Read;
        use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
        let dir = self.files_dir.as_ref()?;
        // Links resolved first: the file itself must be under the folder, not a link out of it.
        let canon = std::fs::canonicalize(path).ok()?;
        let name = canon.file_name()?.to_string_lossy().to_string();
        if !canon.starts_with(dir) || name.starts_with("state.db") {
            return None;
        }
        // Checked before it is opened (closing a descriptor of the state database would drop
        // SQLite's locks): a regular file, not one of the daemon's own.
        let before = std::fs::metadata(&canon).ok()?;
        let id = (before.dev(), before.ino());
        if !before.is_file() || self.own.contains(&id) {
            return None;
        }
        // Non-blocking: a FIFO swapped in after the check must not hold a worker; and the file
        // opened must be the one checked.
        let file = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(&canon).ok()?;
        let meta = file.metadata().ok()?;
        if !meta.is_file() || meta.len() > MAX_REFERENCED_FILE || (meta.dev(), meta.ino()) != id {
            return None;
        }
        let mut text = String::new();
        file.take(MAX_REFERENCED_FILE + 1).read_to_string(&mut text).ok()?;
        (text.len() as u64 <= MAX_REFERENCED_FILE).then(|| SecretString::from(text.trim().to_string()))
    }
}

/// The credentials the executor injects, from the stored rows; rows that cannot be opened are
/// skipped and named (scope, name and why) in the second list.
pub fn credential_set(
    rows: &[CredentialRow],
    key: Option<&SealingKey>,
    references: &References,
) -> (CredentialSet, Vec<String>) {
    let mut out = Vec::new();
    let mut problems = Vec::new();
    for r in rows {
        let value = match (&r.sealed, &r.reference, key) {
            (Some(s), _, Some(k)) => k.open(&r.scope, &r.name, s),
            (Some(_), _, None) => Err("sealed, but TOOLGRAPH_SECRET_KEY is not set".into()),
            (None, Some(reference), _) => references.resolve(reference),
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

    /// Finding 1 of the second hardening: a credential's reference named the master key, the
    /// daemon's environment (/proc/self/environ), an endless device or its own SQLite files, and
    /// its error told which existed. References now name a configured place only.
    #[test]
    fn references_name_a_configured_place_and_never_the_daemons_own_secrets() {
        let dir = tempfile::tempdir().unwrap();
        let refs = References::new("TOOLGRAPH_TOOL_", dir.path().to_str().unwrap()).unwrap();
        // Variables: only under the prefix, never the daemon's own, and a missing one reads like a refused one.
        std::env::set_var("TOOLGRAPH_TOOL_UNIT_KEY", "k-123");
        assert_eq!(refs.resolve("env:TOOLGRAPH_TOOL_UNIT_KEY").unwrap().expose_secret(), "k-123");
        for refused in
            ["env:TOOLGRAPH_SECRET_KEY", "env:HOME", "env:TOOLGRAPH_STATE_PASSWORD_FILE", "env:TOOLGRAPH_TOOL_"]
        {
            assert!(refs.resolve(refused).is_err(), "{refused}");
        }
        let missing = refs.resolve("env:TOOLGRAPH_TOOL_NOT_SET_ANYWHERE").unwrap_err();
        let forbidden = refs.resolve("env:PATH").unwrap_err();
        assert_eq!(missing.replace("TOOLGRAPH_TOOL_NOT_SET_ANYWHERE", "X"), forbidden.replace("PATH", "X"));
        // A prefix that reaches the daemon's secrets is a configuration error.
        for bad in ["", "TOOLGRAPH_", "TOOLGRAPH_SECRET", "TOOLGRAPH_S"] {
            assert!(References::new(bad, "").is_err(), "{bad}");
        }
        // Files: regular ones under the folder, bounded; links out of it, devices, /proc, the
        // daemon's SQLite files and big files are refused, all with the same words.
        let ok = dir.path().join("rapidapi.key");
        std::fs::write(&ok, "file-secret\n").unwrap();
        assert_eq!(refs.resolve(&format!("file:{}", ok.display())).unwrap().expose_secret(), "file-secret");
        let big = dir.path().join("big.key");
        std::fs::write(&big, vec![b'a'; (MAX_REFERENCED_FILE + 1) as usize]).unwrap();
        let db = dir.path().join("state.db");
        std::fs::write(&db, "not a secret").unwrap();
        let link = dir.path().join("environ.key");
        std::os::unix::fs::symlink("/proc/self/environ", &link).unwrap();
        let zero = dir.path().join("zero.key");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        let words = |p: &std::path::Path| {
            refs.resolve(&format!("file:{}", p.display())).unwrap_err().replace(&p.display().to_string(), "P")
        };
        let missing = words(&dir.path().join("absent.key"));
        for p in
            [big.as_path(), db.as_path(), link.as_path(), zero.as_path(), std::path::Path::new("/proc/self/environ")]
        {
            assert_eq!(words(p), missing, "{}", p.display());
        }
        assert!(refs.file_refused("/etc/passwd").is_some());
        assert!(refs.file_refused(ok.to_str().unwrap()).is_none());
        let off = References::new("TOOLGRAPH_TOOL_", "").unwrap();
        assert!(off.file_refused(ok.to_str().unwrap()).unwrap().contains("off"));
        assert!(off.resolve(&format!("file:{}", ok.display())).is_err());
        assert!(References::new("TOOLGRAPH_TOOL_", "/proc").is_err());
    }

    /// Third hardening, finding 2: laid out as Kubernetes mounts secrets (the files behind
    /// `..data` links), a credential folder holding the daemon's own key files let `from_file`
    /// send the sealing key to a tool host. The daemon's own files are refused whatever name or
    /// link reaches them; a folder holding the state database is refused at start; a FIFO does not
    /// block.
    #[test]
    fn the_daemons_own_files_are_never_a_tool_credential() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("..2026_11_27");
        std::fs::create_dir(&data).unwrap();
        std::fs::write(data.join("secret_key"), "ab".repeat(32)).unwrap();
        std::fs::write(data.join("api_keys"), "admin-key").unwrap();
        std::fs::write(data.join("rapidapi"), "tool-key").unwrap();
        std::os::unix::fs::symlink("..2026_11_27", dir.path().join("..data")).unwrap();
        for f in ["secret_key", "api_keys", "rapidapi"] {
            std::os::unix::fs::symlink(format!("..data/{f}"), dir.path().join(f)).unwrap();
        }
        // Another name for the sealing key, as a hard link.
        std::fs::hard_link(data.join("secret_key"), dir.path().join("innocent.key")).unwrap();
        // (As the daemon names them: `TOOLGRAPH_SECRET_KEY_FILE`, `TOOLGRAPH_API_KEYS_FILE`.)
        let refs = References::new("TOOLGRAPH_TOOL_", dir.path().to_str().unwrap())
            .unwrap()
            .refusing(&[dir.path().join("secret_key"), dir.path().join("api_keys")], None)
            .unwrap();
        let read = |name: &str| refs.resolve(&format!("file:{}", dir.path().join(name).display()));
        assert_eq!(read("rapidapi").unwrap().expose_secret(), "tool-key");
        for own in ["secret_key", "api_keys", "innocent.key", "..data/secret_key", "..2026_11_27/api_keys"] {
            assert!(read(own).is_err(), "{own}");
        }
        // A FIFO is refused at once (no reader blocks on it).
        let fifo = dir.path().join("pipe.key");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        let t = std::time::Instant::now();
        assert!(read("pipe.key").is_err());
        assert!(t.elapsed() < std::time::Duration::from_secs(2));
        // The state database inside the folder: refused at start.
        let refs = References::new("TOOLGRAPH_TOOL_", dir.path().to_str().unwrap()).unwrap();
        let e = refs.refusing(&[], Some(&dir.path().join("state.sqlite"))).unwrap_err();
        assert!(e.contains("holds the state database"), "{e}");
    }
}

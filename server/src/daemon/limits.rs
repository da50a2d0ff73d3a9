//! API keys and per-key rate limits.
//!
//! Keys come from `TOOLGRAPH_API_KEYS` (comma-separated) or the file named by
//! `TOOLGRAPH_API_KEYS_FILE` (one per line, `#` comments); only their SHA-256 digests are kept in
//! memory, and a presented key is compared by digest in constant time. Keys are never logged.

use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The accepted keys, as digests.
#[derive(Clone, Default)]
pub struct ApiKeys {
    digests: Vec<[u8; 32]>,
}

impl std::fmt::Debug for ApiKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ApiKeys({} keys)", self.digests.len())
    }
}

fn digest(key: &str) -> [u8; 32] {
    Sha256::digest(key.as_bytes()).into()
}

impl ApiKeys {
    pub fn new<I: IntoIterator<Item = S>, S: AsRef<str>>(keys: I) -> Self {
        let digests = keys
            .into_iter()
            .map(|k| k.as_ref().trim().to_string())
            .filter(|k| !k.is_empty() && !k.starts_with('#'))
            .map(|k| digest(&k))
            .collect();
        ApiKeys { digests }
    }

    /// From `TOOLGRAPH_API_KEYS` (comma-separated) and `TOOLGRAPH_API_KEYS_FILE` (one a line);
    /// an unreadable file is an error that names the variable, not the file's content.
    pub fn from_env() -> Result<Self, String> {
        use secrecy::ExposeSecret;
        let keys = toolgraph_schema::secrets::env_secret_list("TOOLGRAPH_API_KEYS")?;
        Ok(ApiKeys::new(keys.iter().map(|k| k.expose_secret())))
    }

    /// Whether a key whose SHA-256 digest (hex, as the state store keeps it) is `hex` is configured.
    pub fn has_digest(&self, hex: &str) -> bool {
        let hex = hex.to_ascii_lowercase();
        self.digests.iter().any(|d| d.iter().map(|b| format!("{b:02x}")).collect::<String>() == hex)
    }

    pub fn is_empty(&self) -> bool {
        self.digests.is_empty()
    }

    pub fn len(&self) -> usize {
        self.digests.len()
    }

    /// The identity of a valid key (a short digest prefix, safe to use as a map key or in
    /// metrics), or `None`.
    pub fn check(&self, presented: &str) -> Option<String> {
        let d = digest(presented.trim());
        let mut hit = false;
        for k in &self.digests {
            // Constant time per comparison; every key is compared.
            let diff = k.iter().zip(d.iter()).fold(0u8, |acc, (a, b)| acc | (a ^ b));
            hit |= diff == 0;
        }
        hit.then(|| d[..6].iter().map(|b| format!("{b:02x}")).collect())
    }
}

/// Token buckets per identity (key digest, or client address without keys).
pub struct RateLimiter {
    rate: f64,
    burst: f64,
    buckets: Mutex<HashMap<String, (f64, Instant)>>,
}

/// Identities kept before idle full buckets are dropped (bounds memory under many clients).
const MAX_BUCKETS: usize = 10_000;

impl RateLimiter {
    pub fn new(rate_per_s: f64, burst: f64) -> Self {
        RateLimiter { rate: rate_per_s.max(0.0), burst: burst.max(1.0), buckets: Mutex::new(HashMap::new()) }
    }

    /// Take one token for `who`; `Err(seconds)` until the next token when the bucket is empty.
    pub fn take(&self, who: &str) -> Result<(), u64> {
        if self.rate <= 0.0 {
            return Ok(());
        }
        let now = Instant::now();
        let mut b = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        if b.len() >= MAX_BUCKETS && !b.contains_key(who) {
            let (rate, burst) = (self.rate, self.burst);
            b.retain(|_, (tokens, at)| *tokens + now.duration_since(*at).as_secs_f64() * rate < burst);
        }
        let e = b.entry(who.to_string()).or_insert((self.burst, now));
        e.0 = (e.0 + now.duration_since(e.1).as_secs_f64() * self.rate).min(self.burst);
        e.1 = now;
        if e.0 >= 1.0 {
            e.0 -= 1.0;
            Ok(())
        } else {
            Err(((1.0 - e.0) / self.rate).ceil().max(1.0) as u64)
        }
    }
}

/// Failed console logins per name, in a row: past [`LoginBackoff::FREE`], each further failure
/// doubles the wait before that name may be tried again (6 s, 12 s, 24 s, … at most 15 min), on
/// top of the per-name token bucket (which alone lets a guesser try one password every 6 s
/// forever). A successful login clears the name. In memory, per daemon, like the buckets.
pub struct LoginBackoff {
    names: Mutex<HashMap<String, (u32, Instant)>>,
}

impl Default for LoginBackoff {
    fn default() -> Self {
        LoginBackoff { names: Mutex::new(HashMap::new()) }
    }
}

impl LoginBackoff {
    /// Failures in a row a name may have before its waits start (the bucket's burst).
    pub const FREE: u32 = 10;
    const FIRST_WAIT: Duration = Duration::from_secs(6);
    const MAX_WAIT: Duration = Duration::from_secs(15 * 60);

    /// `Err(seconds)` while `name` must wait.
    pub fn check(&self, name: &str, now: Instant) -> Result<(), u64> {
        let names = self.names.lock().unwrap_or_else(|p| p.into_inner());
        match names.get(name) {
            Some((_, until)) if *until > now => Err((*until - now).as_secs_f64().ceil().max(1.0) as u64),
            _ => Ok(()),
        }
    }

    /// One more failure for `name`.
    pub fn failed(&self, name: &str, now: Instant) {
        let mut names = self.names.lock().unwrap_or_else(|p| p.into_inner());
        if names.len() >= MAX_BUCKETS && !names.contains_key(name) {
            // Names whose last wait ended a full maximum ago have paid; past the bound a new name
            // is not followed (the address and name buckets still hold it).
            names.retain(|_, (_, until)| now.saturating_duration_since(*until) < Self::MAX_WAIT);
            if names.len() >= MAX_BUCKETS {
                return;
            }
        }
        let e = names.entry(name.to_string()).or_insert((0, now));
        e.0 = e.0.saturating_add(1);
        if e.0 > Self::FREE {
            let doublings = (e.0 - Self::FREE - 1).min(16);
            e.1 = now + (Self::FIRST_WAIT * 2u32.pow(doublings)).min(Self::MAX_WAIT);
        }
    }

    /// A successful login: `name` starts afresh.
    pub fn succeeded(&self, name: &str) {
        self.names.lock().unwrap_or_else(|p| p.into_inner()).remove(name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_logins_of_a_name_double_its_wait_until_one_succeeds() {
        let b = LoginBackoff::default();
        let t0 = Instant::now();
        for _ in 0..LoginBackoff::FREE {
            assert_eq!(b.check("ada", t0), Ok(()));
            b.failed("ada", t0);
        }
        assert_eq!(b.check("ada", t0), Ok(()), "the first ten failures cost nothing here (the bucket paces them)");
        let mut now = t0;
        for wait in [6, 12, 24, 48, 96, 192, 384, 768, 900, 900] {
            b.failed("ada", now);
            assert_eq!(b.check("ada", now), Err(wait));
            assert_eq!(b.check("bob", now), Ok(()), "other names are not held");
            now += Duration::from_secs(wait);
            assert_eq!(b.check("ada", now), Ok(()));
        }
        b.succeeded("ada");
        b.failed("ada", now);
        assert_eq!(b.check("ada", now), Ok(()), "a success starts the count afresh");
    }

    #[test]
    fn the_names_followed_are_bounded() {
        let b = LoginBackoff::default();
        let now = Instant::now();
        for i in 0..MAX_BUCKETS + 50 {
            b.failed(&format!("name {i}"), now);
        }
        assert_eq!(b.names.lock().unwrap().len(), MAX_BUCKETS);
    }

    #[test]
    fn keys_are_checked_by_digest() {
        let k = ApiKeys::new(["alpha-key", " beta-key ", "", "# comment"]);
        assert_eq!(k.len(), 2);
        assert!(k.check("alpha-key").is_some());
        assert!(k.check("beta-key").is_some());
        assert!(k.check("gamma").is_none());
        assert_ne!(k.check("alpha-key"), k.check("beta-key"));
        assert!(!format!("{k:?}").contains("alpha"));
    }

    #[test]
    fn buckets_refill_at_the_rate_and_answer_when_to_retry() {
        let r = RateLimiter::new(1.0, 2.0);
        assert!(r.take("a").is_ok());
        assert!(r.take("a").is_ok());
        assert_eq!(r.take("a"), Err(1));
        assert!(r.take("b").is_ok(), "buckets are per identity");
        let off = RateLimiter::new(0.0, 1.0);
        for _ in 0..100 {
            assert!(off.take("a").is_ok());
        }
    }
}

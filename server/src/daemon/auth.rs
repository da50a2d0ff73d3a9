//! Authentication: API keys and console logins become a [`Caller`] on every `/v1` request.
use super::console;
use super::error::ApiError;
use super::shared::Daemon;
use crate::state::{Caller, Role};
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a looked-up API key is trusted before the store is asked again (revocations on
/// another replica take effect within this; on the same replica at once).
pub(super) const KEY_CACHE_TTL: Duration = Duration::from_secs(5);
pub(super) const KEY_CACHE_MAX: usize = 10_000;
/// Who calls `/v1/*` (a [`Caller`] in the request's extensions) and their rate limit. Keys are
/// required once bootstrap keys are configured or any user has a key; before that (a fresh local
/// daemon on loopback) the caller is the local administrator.
pub(super) async fn authorize(
    State(d): State<Arc<Daemon>>,
    mut req: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let mut login = console::ConsoleLogin::default();
    let (caller, bucket) = if !d.auth_required.load(Ordering::Relaxed) {
        let ip = req
            .extensions()
            .get::<ConnectInfo<SocketAddr>>()
            .map(|c| c.0.ip().to_string())
            .unwrap_or_else(|| "anonymous".into());
        (Caller { user_id: "local".into(), name: "local".into(), role: Role::Admin }, ip)
    } else if let (None, Some(token)) = (presented_key(req.headers()), console::session_cookie(req.headers())) {
        // A console login: its state-changing requests must echo the login's CSRF token.
        let ended = || {
            ApiError::new(
                StatusCode::UNAUTHORIZED,
                "login_expired",
                "the console login has ended or expired: log in again",
            )
        };
        let l = d.state.login(token).await?.ok_or_else(ended)?;
        // Made with a bootstrap key: it ends when that key is no longer configured.
        if l.bootstrap_key.as_deref().is_some_and(|k| !d.keys.has_digest(k)) {
            return Err(ended());
        }
        let (c, csrf) = (l.caller, l.csrf);
        let safe =
            matches!(*req.method(), axum::http::Method::GET | axum::http::Method::HEAD | axum::http::Method::OPTIONS);
        let echoed = req.headers().get(console::CSRF_HEADER).and_then(|v| v.to_str().ok()).unwrap_or_default();
        if !safe && !console::same_token(echoed, &csrf) {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "csrf_failed",
                "this request needs the login's CSRF token in `X-CSRF-Token`",
            ));
        }
        login.csrf = Some(csrf);
        let bucket = c.user_id.clone();
        (c, bucket)
    } else {
        let presented = presented_key(req.headers()).ok_or_else(|| {
            ApiError::new(
                StatusCode::UNAUTHORIZED,
                "missing_api_key",
                "send an API key as `Authorization: Bearer KEY` or `X-API-Key: KEY` (or log in to the console)",
            )
        })?;
        // Key guessing: past ten failures in a row from one address, each further one waits
        // longer (doubling from 6 s, at most 15 min); a valid key starts the address afresh.
        let peer = req.extensions().get::<ConnectInfo<SocketAddr>>().map(|c| c.0.ip().to_string()).unwrap_or_default();
        let guesses = format!("ip:{peer}");
        if let Err(wait) = d.key_backoff.check(&guesses, Instant::now()) {
            return Err(d.rate_limited("too many invalid API keys from this address; retry later", wait));
        }
        let invalid = |why: &str| {
            d.key_backoff.failed(&guesses, Instant::now());
            ApiError::new(StatusCode::UNAUTHORIZED, "invalid_api_key", why)
        };
        if presented.is_empty() || presented.len() > 200 {
            return Err(invalid("the API key is not valid"));
        }
        let c = d
            .caller_of(presented)
            .await?
            .ok_or_else(|| invalid("the API key is not valid (unknown, revoked or expired)"))?;
        d.key_backoff.succeeded(&guesses);
        let bucket = c.user_id.clone();
        (c, bucket)
    };
    if let Err(wait) = d.limiter.take(&bucket) {
        return Err(d.rate_limited("too many requests for this key; retry later", wait));
    }
    req.extensions_mut().insert(caller);
    req.extensions_mut().insert(login);
    Ok(next.run(req).await)
}

/// Admins only: 403 with the error contract otherwise.
pub(super) fn require_admin(c: &Caller, what: &str) -> Result<(), ApiError> {
    if c.is_admin() {
        Ok(())
    } else {
        Err(ApiError::forbidden(format!("{what} is for administrators; this key belongs to user `{}`", c.name)))
    }
}

pub(super) fn presented_key(h: &HeaderMap) -> Option<&str> {
    if let Some(v) = h.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()) {
        return v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")).map(str::trim);
    }
    h.get("x-api-key").and_then(|v| v.to_str().ok()).map(str::trim)
}

impl Daemon {
    /// The caller a presented key belongs to (bootstrap keys are admins).
    pub(super) async fn caller_of(&self, presented: &str) -> Result<Option<Caller>, ApiError> {
        if let Some(id) = self.keys.check(presented) {
            return Ok(Some(Caller {
                user_id: "bootstrap".into(),
                name: format!("bootstrap key {id}"),
                role: Role::Admin,
            }));
        }
        let digest = crate::state::key_digest(presented);
        if let Some((c, at)) = self.key_cache.lock().unwrap_or_else(|p| p.into_inner()).get(&digest) {
            if at.elapsed() < KEY_CACHE_TTL {
                return Ok(c.clone());
            }
        }
        let c = self.state.caller_of_key(presented).await?;
        let mut cache = self.key_cache.lock().unwrap_or_else(|p| p.into_inner());
        if cache.len() >= KEY_CACHE_MAX {
            cache.retain(|_, (_, at)| at.elapsed() < KEY_CACHE_TTL);
            if cache.len() >= KEY_CACHE_MAX {
                cache.clear();
            }
        }
        cache.insert(digest, (c.clone(), Instant::now()));
        Ok(c)
    }

    /// Forget cached key lookups (after a revocation).
    pub(super) fn forget_keys(&self) {
        self.key_cache.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }
}

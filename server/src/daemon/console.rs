//! The web console at `/`: its assets (embedded at build time from `console/dist`) and the login
//! that turns a name + password (or an API key) into an HttpOnly, SameSite=Strict cookie session
//! whose state-changing requests must echo a CSRF token. Its read views are in [`super::views`].

use super::error::{ApiError, ApiJson};
use super::shared::Daemon;
use crate::state::{now_ms, random_id, Caller, Role};
use axum::extract::connect_info::ConnectInfo;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};

include!(concat!(env!("OUT_DIR"), "/console_assets.rs"));

/// The cookie of a console login.
pub const COOKIE: &str = "tg_session";
/// The header a console request echoes its CSRF token in.
pub const CSRF_HEADER: &str = "x-csrf-token";

/// How the caller of a `/v1/*` request was let in: by a console login (with its CSRF token).
#[derive(Debug, Clone, Default)]
pub struct ConsoleLogin {
    pub csrf: Option<String>,
}

/// Whether the console's assets were built into this binary.
pub fn built() -> bool {
    CONSOLE_ASSETS.iter().any(|(p, _, _)| *p == "index.html")
}

const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'";

fn page_headers(ty: &str, cache: &'static str) -> [(header::HeaderName, HeaderValue); 6] {
    [
        (
            header::CONTENT_TYPE,
            HeaderValue::from_str(ty).unwrap_or(HeaderValue::from_static("application/octet-stream")),
        ),
        (header::CACHE_CONTROL, HeaderValue::from_static(cache)),
        (header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP)),
        (header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff")),
        (header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY")),
        (header::REFERRER_POLICY, HeaderValue::from_static("no-referrer")),
    ]
}

/// The web console (built into the binary; 503 with how to build it otherwise).
#[utoipa::path(get, path = "/", tag = "console", security(()), responses((status = 200, description = "the console's page", body = String, content_type = "text/html"),
    (status = 503, description = "the console is not built into this binary", body = String, content_type = "text/html")))]
pub(super) async fn index() -> Response {
    match CONSOLE_ASSETS.iter().find(|(p, _, _)| *p == "index.html") {
        Some((_, ty, bytes)) => (page_headers(ty, "no-cache"), *bytes).into_response(),
        None => (
            StatusCode::SERVICE_UNAVAILABLE,
            page_headers("text/html; charset=utf-8", "no-store"),
            "<!doctype html><meta charset=utf-8><title>toolgraph</title><h1>The console is not built into this binary</h1>\
             <p>Build it with <code>bash scripts/console.sh build</code> (Node.js 20+ and npm; packages from the npm registry), \
             then rebuild toolgraph (<code>cargo build --release --bin toolgraph</code>). The HTTP API is served as usual: see <a href=\"/openapi.json\">/openapi.json</a>.</p>",
        )
            .into_response(),
    }
}

/// `GET /assets/{*path}`: a built asset (content-hashed names: cached for a year).
pub(super) async fn asset(Path(path): Path<String>) -> Response {
    let want = format!("assets/{path}");
    match CONSOLE_ASSETS.iter().find(|(p, _, _)| *p == want) {
        Some((_, ty, bytes)) => (page_headers(ty, "public, max-age=31536000, immutable"), *bytes).into_response(),
        None => ApiError::not_found(format!("no console asset {}", path.chars().take(100).collect::<String>()))
            .into_response(),
    }
}

/// The value of the console's cookie, if the request carries one.
pub fn session_cookie(h: &HeaderMap) -> Option<&str> {
    h.get_all(header::COOKIE).iter().filter_map(|v| v.to_str().ok()).flat_map(|v| v.split(';')).find_map(|kv| {
        let (k, v) = kv.trim().split_once('=')?;
        (k == COOKIE && !v.is_empty() && v.len() <= 200).then_some(v)
    })
}

/// Constant-time comparison of two tokens.
pub fn same_token(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn cookie(token: &str, max_age_s: u64, secure: bool) -> HeaderValue {
    let v = format!(
        "{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict; Max-Age={max_age_s}{}",
        if secure { "; Secure" } else { "" }
    );
    HeaderValue::from_str(&v).unwrap_or(HeaderValue::from_static("tg_session=; Max-Age=0"))
}

/// Whether the login cookie must be `Secure`: configured so (`server.console_cookie_secure`), or
/// the proxy says the browser used TLS (`X-Forwarded-Proto: https`).
fn behind_https(d: &Daemon, h: &HeaderMap) -> bool {
    d.settings().server.console_cookie_secure
        || h.get("x-forwarded-proto").and_then(|v| v.to_str().ok()).is_some_and(|v| v.eq_ignore_ascii_case("https"))
}

#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct Login {
    #[serde(default)]
    #[schema(min_length = 1, max_length = 200)]
    name: Option<String>,
    #[serde(default)]
    #[schema(write_only, min_length = 1, max_length = 200)]
    password: Option<String>,
    #[serde(default)]
    #[schema(write_only, min_length = 1, max_length = 200)]
    api_key: Option<String>,
}

/// A console login (or that none is needed).
#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct LoggedIn {
    /// False on a daemon that needs no keys: the console works without a login.
    login_required: bool,
    user: Me,
    /// Echo it in `X-CSRF-Token` on state-changing requests.
    #[serde(skip_serializing_if = "Option::is_none")]
    csrf_token: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    expires_ms: Option<i64>,
}

/// A hash that no password matches, verified for unknown names so that a login takes as long
/// whether or not the name exists.
fn decoy_hash() -> &'static str {
    static H: OnceLock<String> = OnceLock::new();
    H.get_or_init(|| crate::state::secrets::hash_password(&random_id("decoy", 16)).unwrap_or_default())
}

/// Console login: name + password (argon2id) or an API key.
///
/// The answer sets an HttpOnly, SameSite=Strict cookie `tg_session` and gives the CSRF token that
/// state-changing requests echo in `X-CSRF-Token`; rate-limited per address and per name. A daemon
/// that needs no keys (local, none configured) answers `login_required: false`.
#[utoipa::path(post, path = "/v1/login", tag = "console", security(()), request_body = Login,
    responses((status = 200, description = "logged in (Set-Cookie), or no login needed", body = LoggedIn)))]
pub(super) async fn login(
    State(d): State<Arc<Daemon>>,
    headers: HeaderMap,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    ApiJson(b): ApiJson<Login>,
) -> Result<Response, ApiError> {
    if !d.auth_required.load(Ordering::Relaxed) {
        let local = Caller { user_id: "local".into(), name: "local".into(), role: Role::Admin };
        return Ok(Json(LoggedIn { login_required: false, user: me_of(&local), csrf_token: None, expires_ms: None })
            .into_response());
    }
    let ip = peer
        .map(|c| super::client::client_ip(c.0 .0.ip(), &headers, &d.settings().server.trusted_proxies).to_string())
        .unwrap_or_else(|| "anonymous".into());
    // Password guessing: a slow bucket per address and per name (10 tries, then one every 6 s),
    // and per name a wait that doubles with each failure in a row past ten.
    let name_key = b.name.as_deref().map(|n| format!("name:{}", n.to_lowercase().chars().take(64).collect::<String>()));
    let now = std::time::Instant::now();
    let backoff = name_key.as_deref().map_or(Ok(()), |k| d.login_backoff.check(k, now));
    for key in std::iter::once(format!("ip:{ip}")).chain(name_key.clone()) {
        if let Err(wait) = backoff.and_then(|_| d.login_limiter.take(&key)) {
            return Err(d.rate_limited("too many login attempts; retry later", wait));
        }
    }
    let too_long = |s: &Option<String>| s.as_ref().is_some_and(|s| s.is_empty() || s.chars().count() > 200);
    if too_long(&b.name) || too_long(&b.password) || too_long(&b.api_key) {
        return Err(ApiError::invalid("name, password and api_key are 1 to 200 characters"));
    }
    let denied = || {
        ApiError::new(StatusCode::UNAUTHORIZED, "invalid_login", "the name and password (or the API key) are not valid")
    };
    let via_key = b.api_key.clone();
    let caller = match (&b.name, &b.password, &b.api_key) {
        (Some(name), Some(password), None) => {
            let found = d.state.password_hash(name).await?;
            let hash = found.as_ref().map(|(_, h)| h.clone()).unwrap_or_else(|| decoy_hash().to_string());
            let password = password.clone();
            let ok = tokio::task::spawn_blocking(move || crate::state::secrets::verify_password(&password, &hash))
                .await
                .unwrap_or(false);
            match (found, ok) {
                (Some((u, _)), true) => {
                    if let Some(k) = &name_key {
                        d.login_backoff.succeeded(k);
                    }
                    Caller { user_id: u.id, name: u.name, role: u.role }
                }
                _ => {
                    if let Some(k) = &name_key {
                        d.login_backoff.failed(k, std::time::Instant::now());
                    }
                    tracing::warn!(user = %name.chars().take(64).collect::<String>(), %ip, "console login refused");
                    return Err(denied());
                }
            }
        }
        (None, None, Some(key)) => d.caller_of(key).await?.ok_or_else(denied)?,
        _ => return Err(ApiError::invalid("give `name` and `password`, or `api_key`")),
    };
    let token = random_id("tgs", 32);
    let csrf = random_id("csrf", 16);
    let hours = d.settings().server.console_login_hours.max(1);
    let expires_ms = now_ms() + hours as i64 * 3_600_000;
    d.state.put_login(&token, &caller, &csrf, expires_ms, via_key.as_deref()).await?;
    d.audit(&caller, "console.login", &caller.user_id, json!({"ip": ip})).await;
    let mut r = Json(LoggedIn {
        login_required: true,
        user: me_of(&caller),
        csrf_token: Some(csrf),
        expires_ms: Some(expires_ms),
    })
    .into_response();
    r.headers_mut().insert(header::SET_COOKIE, cookie(&token, hours * 3600, behind_https(&d, &headers)));
    r.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(r)
}

/// End this browser's console login (idempotent; a live login echoes its CSRF token).
#[utoipa::path(post, path = "/v1/logout", tag = "console", security(()), responses((status = 204, description = "ended; the cookie is cleared")))]
pub(super) async fn logout(State(d): State<Arc<Daemon>>, headers: HeaderMap) -> Result<Response, ApiError> {
    if let Some(token) = session_cookie(&headers) {
        // Like every state-changing request of a login, logout echoes its CSRF token: another
        // site cannot end a person's login. A login that is gone already needs none.
        if let Some(login) = d.state.login(token).await? {
            let echoed = headers.get(CSRF_HEADER).and_then(|v| v.to_str().ok()).unwrap_or_default();
            if !same_token(echoed, &login.csrf) {
                return Err(ApiError::new(
                    StatusCode::FORBIDDEN,
                    "csrf_failed",
                    "logging out needs the login's CSRF token in `X-CSRF-Token`",
                ));
            }
        }
        d.state.delete_login(token).await?;
    }
    let mut r = StatusCode::NO_CONTENT.into_response();
    r.headers_mut().insert(header::SET_COOKIE, cookie("", 0, behind_https(&d, &headers)));
    Ok(r)
}

/// Who a caller is.
#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct Me {
    user_id: String,
    name: String,
    role: Role,
    /// For a console login: its CSRF token.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) csrf_token: Option<String>,
}

pub(super) fn me_of(c: &Caller) -> Me {
    Me { user_id: c.user_id.clone(), name: c.name.clone(), role: c.role, csrf_token: None }
}

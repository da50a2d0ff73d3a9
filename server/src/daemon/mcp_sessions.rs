//! MCP sessions belong to the key's user that opened them. The Streamable HTTP transport knows a
//! session by its `Mcp-Session-Id` alone, so another user who learns the id (a log, a shared
//! proxy) could call tools in it or end it. This layer, behind `authorize`, remembers which user
//! each session was opened by and answers 404 — as for a session that does not exist — when
//! anyone else names it.
//!
//! It also keeps one user from taking what the others need (issue 53): a user holds at most
//! `server.mcp_sessions_per_user` sessions (opening one more closes that user's oldest in the
//! session manager, so its memory is given back; another user's are never touched) and at most
//! `server.mcp_streams_per_user` event streams open at once (429 `too_many_streams` beyond).

use super::error::ApiError;
use crate::state::Caller;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::SessionManager;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use tokio_stream::StreamExt;

const SESSION_HEADER: &str = "mcp-session-id";

/// Sessions the daemon holds at most, all users together.
const MAX_SESSIONS: usize = 10_000;

/// Which user opened each MCP session, and how many event streams each user holds.
#[derive(Clone)]
pub struct SessionOwners {
    owners: Arc<Mutex<Owners>>,
    /// Where the sessions live: one closed here is gone (its worker ends, its memory is freed).
    manager: Option<Arc<LocalSessionManager>>,
    per_user: usize,
    streams_per_user: usize,
    /// The largest message read (`server.max_body_bytes`).
    max_body: usize,
}

#[derive(Default)]
struct Owners {
    by_session: HashMap<String, String>,
    /// Each user's sessions, oldest first.
    by_user: HashMap<String, VecDeque<String>>,
    streams: HashMap<String, usize>,
}

impl Owners {
    fn remove(&mut self, session: &str) -> bool {
        let Some(user) = self.by_session.remove(session) else { return false };
        if let Some(q) = self.by_user.get_mut(&user) {
            q.retain(|s| s != session);
            if q.is_empty() {
                self.by_user.remove(&user);
            }
        }
        true
    }
}

impl SessionOwners {
    /// Owners of the sessions `manager` holds, with the per-user caps of `[server]`.
    pub fn new(manager: Arc<LocalSessionManager>, s: &toolgraph_schema::settings::ServerSettings) -> Self {
        SessionOwners {
            owners: Arc::default(),
            manager: Some(manager),
            per_user: s.mcp_sessions_per_user.max(1),
            streams_per_user: s.mcp_streams_per_user.max(1),
            max_body: s.max_body_bytes,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Owners> {
        self.owners.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn owner(&self, session: &str) -> Option<String> {
        self.lock().by_session.get(session).cloned()
    }

    /// Whether a session may be opened for `user`: there is room, or `user` has one to give up.
    fn room_for(&self, user: &str) -> bool {
        let o = self.lock();
        o.by_session.len() < MAX_SESSIONS || o.by_user.contains_key(user)
    }

    /// Bind `session` to `user`; past the user's cap (or the daemon's) the user's oldest session
    /// is forgotten and closed.
    fn bind(&self, session: &str, user: &str) {
        let evicted = {
            let mut o = self.lock();
            if o.by_session.insert(session.to_string(), user.to_string()).is_none() {
                o.by_user.entry(user.to_string()).or_default().push_back(session.to_string());
            }
            let mut evicted = Vec::new();
            loop {
                let mine = o.by_user.get(user).map_or(0, VecDeque::len);
                if mine <= 1 || (mine <= self.per_user && o.by_session.len() <= MAX_SESSIONS) {
                    break;
                }
                let Some(old) = o.by_user.get_mut(user).and_then(VecDeque::pop_front) else { break };
                o.by_session.remove(&old);
                evicted.push(old);
            }
            evicted
        };
        self.close(evicted);
    }

    fn forget(&self, session: &str) {
        self.lock().remove(session);
    }

    /// Close sessions in the session manager (in the background: closing waits for the worker).
    fn close(&self, sessions: Vec<String>) {
        let Some(manager) = self.manager.clone() else { return };
        if sessions.is_empty() {
            return;
        }
        tracing::debug!(closed = sessions.len(), "MCP sessions over their user's cap closed");
        tokio::spawn(async move {
            for s in sessions {
                let _ = manager.close_session(&Arc::from(s.as_str())).await;
            }
        });
    }

    /// One more event stream for `user`, unless the user holds the cap already.
    fn open_stream(&self, user: &str) -> Option<StreamSlot> {
        let mut o = self.lock();
        let n = o.streams.entry(user.to_string()).or_insert(0);
        if *n >= self.streams_per_user {
            return None;
        }
        *n += 1;
        Some(StreamSlot { owners: self.owners.clone(), user: user.to_string() })
    }

    fn streams_full(&self, user: &str) -> bool {
        self.lock().streams.get(user).is_some_and(|n| *n >= self.streams_per_user)
    }
}

/// One open event stream of a user; given back when the stream's body is dropped.
struct StreamSlot {
    owners: Arc<Mutex<Owners>>,
    user: String,
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let mut o = self.owners.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = o.streams.get_mut(&self.user) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                o.streams.remove(&self.user);
            }
        }
    }
}

/// 400 with a JSON-RPC error: -32700 for text that is not JSON, -32600 for JSON that is not a
/// JSON-RPC message this server takes (the transport itself would answer 415).
fn malformed(bytes: &[u8], e: &serde_json::Error) -> Response {
    let (code, what) = match serde_json::from_slice::<serde_json::Value>(bytes) {
        Err(_) => (-32700, "Parse error: the body is not JSON"),
        Ok(_) => (-32600, "Invalid Request: not a JSON-RPC 2.0 request, notification or response"),
    };
    let mut detail = e.to_string();
    detail.truncate(200);
    let body = serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": {"code": code, "message": what, "data": {"detail": detail}},
    });
    (StatusCode::BAD_REQUEST, axum::Json(body)).into_response()
}

fn too_many_streams(cap: usize) -> Response {
    ApiError::new(
        StatusCode::TOO_MANY_REQUESTS,
        "too_many_streams",
        format!("this user holds {cap} MCP event streams open (server.mcp_streams_per_user); close one first"),
    )
    .with_retry_after(1)
    .into_response()
}

/// The layer: a request naming a session must come from the user who opened it; a response that
/// opens one binds it to the caller (closing the caller's oldest past the cap); a successful
/// DELETE forgets it; an event stream holds one of its user's stream slots while it is open.
pub async fn bind_session(State(owners): State<SessionOwners>, req: Request, next: Next) -> Response {
    let user = req.extensions().get::<Caller>().map(|c| c.user_id.clone()).unwrap_or_default();
    let named = req.headers().get(SESSION_HEADER).and_then(|v| v.to_str().ok()).map(str::to_string);
    if let Some(session) = &named {
        if owners.owner(session).as_deref() != Some(user.as_str()) {
            return ApiError::not_found("no such MCP session for this key (open one with initialize)").into_response();
        }
    } else if req.method() == Method::POST && !owners.room_for(&user) {
        return ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "mcp_sessions_full",
            format!("the daemon holds {MAX_SESSIONS} MCP sessions; try again shortly"),
        )
        .with_retry_after(5)
        .into_response();
    }
    let deleting = req.method() == Method::DELETE;
    let mut req = req;
    let json = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(';').next().unwrap_or("").trim().eq_ignore_ascii_case("application/json"));
    if req.method() == Method::POST && json {
        // Read here (bounded) so a message that is not JSON-RPC is answered 400 with a JSON-RPC
        // error, not the transport's 415, and a request can be told from a notification.
        let (parts, body) = req.into_parts();
        let Ok(bytes) = axum::body::to_bytes(body, owners.max_body).await else {
            return ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "too_large",
                format!("an MCP message may be at most {} bytes", owners.max_body),
            )
            .into_response();
        };
        let message = match serde_json::from_slice::<rmcp::model::ClientJsonRpcMessage>(&bytes) {
            Ok(m) => m,
            Err(e) => return malformed(&bytes, &e),
        };
        // At the stream cap only what would open a stream is refused: a GET, or a POST carrying
        // a request. Notifications and answers to the server's requests (an elicitation inside a
        // running call) still go through.
        if !deleting && owners.streams_full(&user) && matches!(message, rmcp::model::JsonRpcMessage::Request(_)) {
            return too_many_streams(owners.streams_per_user);
        }
        req = Request::from_parts(parts, Body::from(bytes));
    } else if req.method() == Method::GET && owners.streams_full(&user) {
        return too_many_streams(owners.streams_per_user);
    }
    let resp = next.run(req).await;
    if let Some(opened) = resp.headers().get(SESSION_HEADER).and_then(|v| v.to_str().ok()) {
        if named.is_none() && resp.status().is_success() {
            owners.bind(opened, &user);
        }
    }
    if let (true, Some(session)) = (deleting && resp.status().is_success(), &named) {
        owners.forget(session);
    }
    let streamed = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    if !streamed {
        return resp;
    }
    // Counted when it opens: two requests that passed the check together may not both hold one.
    let Some(slot) = owners.open_stream(&user) else { return too_many_streams(owners.streams_per_user) };
    resp.map(|body| {
        Body::from_stream(body.into_data_stream().map(move |chunk| {
            let _held = &slot;
            chunk
        }))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owners(per_user: usize) -> SessionOwners {
        SessionOwners { owners: Arc::default(), manager: None, per_user, streams_per_user: 2, max_body: 1 << 20 }
    }

    #[test]
    fn sessions_are_remembered_by_their_opener_and_only_the_openers_oldest_forgotten() {
        let o = owners(3);
        o.bind("s1", "ada");
        assert_eq!(o.owner("s1").as_deref(), Some("ada"));
        assert_eq!(o.owner("s2"), None);
        for i in 0..50 {
            o.bind(&format!("n{i}"), "ben");
        }
        assert_eq!(o.owner("s1").as_deref(), Some("ada"), "another user's sessions never evict ada's");
        assert_eq!(o.owner("n46"), None, "ben's oldest are forgotten past his cap");
        assert_eq!(o.owner("n47").as_deref(), Some("ben"));
        o.forget("n47");
        assert_eq!(o.owner("n47"), None);
        assert!(o.room_for("cleo"));
    }

    #[test]
    fn a_users_streams_are_counted_until_they_end() {
        let o = owners(3);
        let a = o.open_stream("ada").unwrap();
        let _b = o.open_stream("ada").unwrap();
        assert!(o.streams_full("ada"));
        assert!(o.open_stream("ada").is_none());
        assert!(o.open_stream("ben").is_some(), "ben's streams are his own");
        drop(a);
        assert!(!o.streams_full("ada"));
    }
}

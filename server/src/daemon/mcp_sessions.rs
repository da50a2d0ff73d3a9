//! MCP sessions belong to the key's user that opened them. The Streamable HTTP transport knows a
//! session by its `Mcp-Session-Id` alone, so another user who learns the id (a log, a shared
//! proxy) could call tools in it or end it. This layer, behind `authorize`, remembers which user
//! each session was opened by and answers 404 — as for a session that does not exist — when
//! anyone else names it.

use super::error::ApiError;
use crate::state::Caller;
use axum::extract::{Request, State};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

const SESSION_HEADER: &str = "mcp-session-id";

/// Sessions remembered at most (the oldest are forgotten first); a forgotten session is refused
/// to everyone, its opener included, who then opens a new one.
const MAX_SESSIONS: usize = 10_000;

/// Which user opened each MCP session.
#[derive(Clone, Default)]
pub struct SessionOwners(Arc<Mutex<Owners>>);

#[derive(Default)]
struct Owners {
    by_session: HashMap<String, String>,
    order: VecDeque<String>,
}

impl SessionOwners {
    fn owner(&self, session: &str) -> Option<String> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).by_session.get(session).cloned()
    }

    fn bind(&self, session: &str, user: &str) {
        let mut o = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if o.by_session.insert(session.to_string(), user.to_string()).is_none() {
            o.order.push_back(session.to_string());
        }
        while o.order.len() > MAX_SESSIONS {
            if let Some(old) = o.order.pop_front() {
                o.by_session.remove(&old);
            }
        }
    }

    fn forget(&self, session: &str) {
        let mut o = self.0.lock().unwrap_or_else(|e| e.into_inner());
        o.by_session.remove(session);
        o.order.retain(|s| s != session);
    }
}

/// The layer: a request naming a session must come from the user who opened it; a response that
/// opens one binds it to the caller; a successful DELETE forgets it.
pub async fn bind_session(State(owners): State<SessionOwners>, req: Request, next: Next) -> Response {
    let user = req.extensions().get::<Caller>().map(|c| c.user_id.clone()).unwrap_or_default();
    let named = req.headers().get(SESSION_HEADER).and_then(|v| v.to_str().ok()).map(str::to_string);
    if let Some(session) = &named {
        if owners.owner(session).as_deref() != Some(user.as_str()) {
            return ApiError::not_found("no such MCP session for this key (open one with initialize)").into_response();
        }
    }
    let deleting = req.method() == Method::DELETE;
    let resp = next.run(req).await;
    if let Some(opened) = resp.headers().get(SESSION_HEADER).and_then(|v| v.to_str().ok()) {
        if named.is_none() && resp.status().is_success() {
            owners.bind(opened, &user);
        }
    }
    if let (true, Some(session)) = (deleting && resp.status().is_success(), &named) {
        owners.forget(session);
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_are_remembered_by_their_opener_and_the_oldest_forgotten_first() {
        let o = SessionOwners::default();
        o.bind("s1", "ada");
        assert_eq!(o.owner("s1").as_deref(), Some("ada"));
        assert_eq!(o.owner("s2"), None);
        for i in 0..MAX_SESSIONS {
            o.bind(&format!("n{i}"), "ben");
        }
        assert_eq!(o.owner("s1"), None, "the oldest is forgotten past the bound");
        assert_eq!(o.owner("n0").as_deref(), Some("ben"));
        o.forget("n0");
        assert_eq!(o.owner("n0"), None);
    }
}

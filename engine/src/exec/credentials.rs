//! Tool credentials: headers, query parameters or bearer tokens that a tool's API needs (a RapidAPI
//! tool needs `X-RapidAPI-Key` and `X-RapidAPI-Host`), injected at execution time only.
//!
//! A credential belongs to a scope — a tool (`tool:CATEGORY/TOOL`, every API of that tool) or a host
//! (`host:api.example.com`) — and is **bound to a host**: it is attached only to a call whose API URL
//! (its documented URL with path parameters filled, before any deployment rewrite) is on that host,
//! so an argument or a registered URL template can never carry it elsewhere. The SSRF guard still
//! applies to every call. Values are [`SecretString`]s: never in `Debug`, traces, logs or errors;
//! a response or error text that echoes a value has it replaced by `[redacted]`.

use secrecy::{ExposeSecret, SecretString};
use std::collections::HashMap;

/// Where a credential goes in the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    Header,
    Query,
    /// `Authorization: Bearer VALUE`.
    Bearer,
}

impl Placement {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "header" => Some(Placement::Header),
            "query" => Some(Placement::Query),
            "bearer" => Some(Placement::Bearer),
            _ => None,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Placement::Header => "header",
            Placement::Query => "query",
            Placement::Bearer => "bearer",
        }
    }
}

/// One value to inject.
#[derive(Clone)]
pub struct Credential {
    /// `tool:CATEGORY/TOOL` or `host:HOST`.
    pub scope: String,
    /// The host it may be sent to (lower case, no port).
    pub host: String,
    pub placement: Placement,
    /// Header or query parameter name (`Authorization` for bearer).
    pub name: String,
    pub value: SecretString,
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Credential({} {} {} for {}, value redacted)", self.scope, self.placement.as_str(), self.name, self.host)
    }
}

/// A scope string checked: `tool:CAT/TOOL` or `host:HOST`.
pub fn check_scope(scope: &str) -> Result<(), String> {
    let ok = match scope.split_once(':') {
        Some(("tool", t)) => {
            let parts: Vec<&str> = t.split('/').collect();
            parts.len() == 2 && parts.iter().all(|p| !p.trim().is_empty())
        }
        Some(("host", h)) => valid_host(h),
        _ => false,
    };
    if ok && scope.len() <= 300 {
        Ok(())
    } else {
        Err(format!("scope `{}` is not `tool:CATEGORY/TOOL` or `host:HOSTNAME`", scope.chars().take(80).collect::<String>()))
    }
}

/// A host name or address as it appears in a URL (no scheme, port, path or user info).
pub fn valid_host(h: &str) -> bool {
    !h.is_empty() && h.len() <= 253 && h.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '[' | ']' | ':')) && !h.contains("::/")
}

/// The tool scope of an API id (`category/tool/api` → `tool:category/tool`).
pub fn tool_scope(api_id: &str) -> Option<String> {
    let mut it = api_id.splitn(3, '/');
    let (c, t) = (it.next()?, it.next()?);
    it.next()?;
    Some(format!("tool:{c}/{t}"))
}

/// Every credential the executor may inject, by scope.
#[derive(Debug, Clone, Default)]
pub struct CredentialSet {
    by_scope: HashMap<String, Vec<Credential>>,
}

impl CredentialSet {
    pub fn new(creds: Vec<Credential>) -> Self {
        let mut by_scope: HashMap<String, Vec<Credential>> = HashMap::new();
        for c in creds {
            by_scope.entry(c.scope.clone()).or_default().push(c);
        }
        CredentialSet { by_scope }
    }

    pub fn len(&self) -> usize {
        self.by_scope.values().map(Vec::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.by_scope.is_empty()
    }

    /// The credentials of a call to `api_id` whose URL is on `host`: the tool's, then the host's,
    /// each only when bound to that very host (a name set twice: the tool's wins).
    pub fn for_call(&self, api_id: &str, host: &str) -> Vec<&Credential> {
        let host = host.to_ascii_lowercase();
        let mut out: Vec<&Credential> = Vec::new();
        let scopes = [tool_scope(api_id), Some(format!("host:{host}"))];
        for scope in scopes.iter().flatten() {
            for c in self.by_scope.get(scope).into_iter().flatten() {
                if c.host == host && !out.iter().any(|o| o.placement == c.placement && o.name.eq_ignore_ascii_case(&c.name)) {
                    out.push(c);
                }
            }
        }
        out
    }
}

/// Replace every secret value in `text` by `[redacted]`.
pub fn scrub(text: &str, secrets: &[&Credential]) -> String {
    let mut s = text.to_string();
    for c in secrets {
        let v = c.value.expose_secret();
        if v.len() >= 4 && s.contains(v) {
            s = s.replace(v, "[redacted]");
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cred(scope: &str, host: &str, name: &str, v: &str) -> Credential {
        Credential { scope: scope.into(), host: host.into(), placement: Placement::Header, name: name.into(), value: SecretString::from(v.to_string()) }
    }

    #[test]
    fn credentials_go_only_to_their_tool_on_their_host() {
        let set = CredentialSet::new(vec![
            cred("tool:travel/booking", "booking.p.rapidapi.com", "X-RapidAPI-Key", "k-tool"),
            cred("host:booking.p.rapidapi.com", "booking.p.rapidapi.com", "X-RapidAPI-Key", "k-host"),
            cred("host:booking.p.rapidapi.com", "booking.p.rapidapi.com", "X-RapidAPI-Host", "booking.p.rapidapi.com"),
        ]);
        let got = set.for_call("travel/booking/Search_Hotels", "Booking.P.RapidAPI.com");
        let names: Vec<(&str, &str)> = got.iter().map(|c| (c.name.as_str(), c.value.expose_secret())).collect();
        assert_eq!(names, vec![("X-RapidAPI-Key", "k-tool"), ("X-RapidAPI-Host", "booking.p.rapidapi.com")]);
        // The same tool on another host (a URL template filled by an argument) gets nothing.
        assert!(set.for_call("travel/booking/Search_Hotels", "evil.example.com").is_empty());
        assert!(set.for_call("travel/other/x", "evil.example.com").is_empty());
        assert!(!format!("{:?}", set).contains("k-tool"));
        assert_eq!(scrub("echo k-tool and k-host", &got), "echo [redacted] and k-host");
    }

    #[test]
    fn scopes_are_checked() {
        assert!(check_scope("tool:travel/booking").is_ok());
        assert!(check_scope("host:api.example.com").is_ok());
        assert!(check_scope("tool:travel").is_err());
        assert!(check_scope("host:http://x/").is_err());
        assert!(check_scope("user:x").is_err());
        assert_eq!(tool_scope("a/b/c/d").as_deref(), Some("tool:a/b"));
        assert_eq!(tool_scope("a/b"), None);
    }
}

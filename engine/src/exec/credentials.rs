//! Tool credentials: headers, query parameters or bearer tokens that a tool's API needs (a RapidAPI
//! tool needs `X-RapidAPI-Key` and `X-RapidAPI-Host`), injected at execution time only.
//!
//! A credential belongs to a scope — a tool (`tool:CATEGORY/TOOL`, every API of that tool) or a host
//! (`host:api.example.com`) — and is **bound to a host**: it is attached only to a call whose API URL
//! (its documented URL with path parameters filled, before any deployment rewrite) is on that host,
//! so an argument or a registered URL template can never carry it elsewhere. The SSRF guard still
//! applies to every call. Values are [`SecretString`]s: never in `Debug`, traces, logs or errors;
//! a response or error text that echoes a value — plainly or in any usual encoding: form- or
//! percent-encoded, JSON- or HTML-escaped, hex, base64 at any alignment, two layers deep, any
//! ASCII case — has it replaced by `[redacted]`.

use secrecy::{ExposeSecret, SecretString};
use std::collections::HashMap;

/// Where a credential goes in the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Sent as an HTTP header.
    Header,
    /// Sent as a query parameter.
    Query,
    /// `Authorization: Bearer VALUE`.
    Bearer,
}

impl Placement {
    /// The placement a configuration names (`header` or `query`).
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "header" => Some(Placement::Header),
            "query" => Some(Placement::Query),
            "bearer" => Some(Placement::Bearer),
            _ => None,
        }
    }
    /// Its name in configurations.
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
    /// Where it goes in a request.
    pub placement: Placement,
    /// Header or query parameter name (`Authorization` for bearer).
    pub name: String,
    /// The secret itself, never logged or shown.
    pub value: SecretString,
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Credential({} {} {} for {}, value redacted)",
            self.scope,
            self.placement.as_str(),
            self.name,
            self.host
        )
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
        Err(format!(
            "scope `{}` is not `tool:CATEGORY/TOOL` or `host:HOSTNAME`",
            scope.chars().take(80).collect::<String>()
        ))
    }
}

/// A host name or address as it appears in a URL (no scheme, port, path or user info).
pub fn valid_host(h: &str) -> bool {
    !h.is_empty()
        && h.len() <= 253
        && h.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '[' | ']' | ':'))
        && !h.contains("::/")
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
    /// The credentials, each bound to its host.
    pub fn new(creds: Vec<Credential>) -> Self {
        let mut by_scope: HashMap<String, Vec<Credential>> = HashMap::new();
        for c in creds {
            by_scope.entry(c.scope.clone()).or_default().push(c);
        }
        CredentialSet { by_scope }
    }

    /// How many credentials there are.
    pub fn len(&self) -> usize {
        self.by_scope.values().map(Vec::len).sum()
    }

    /// Whether there are none.
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
                if c.host == host
                    && !out.iter().any(|o| o.placement == c.placement && o.name.eq_ignore_ascii_case(&c.name))
                {
                    out.push(c);
                }
            }
        }
        out
    }
}

/// One layer of encoding a server may put a value through.
fn encodings(v: &str) -> Vec<String> {
    fn percent(v: &str, form: bool) -> String {
        let mut out = String::new();
        for b in v.bytes() {
            match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' => out.push(b as char),
                b'~' if !form => out.push('~'),
                b'*' if form => out.push('*'),
                b' ' if form => out.push('+'),
                _ => out.push_str(&format!("%{b:02X}")),
            }
        }
        out
    }
    let json = serde_json::to_string(v).unwrap_or_default();
    let json = json.get(1..json.len().saturating_sub(1)).unwrap_or_default().to_string();
    let json_html =
        json.replace('<', "\\u003c").replace('>', "\\u003e").replace('&', "\\u0026").replace('\'', "\\u0027");
    let html =
        v.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;").replace('\'', "&#39;");
    let hex: String = v.bytes().map(|b| format!("{b:02x}")).collect();
    vec![percent(v, true), percent(v, false), json, json_html, html, hex]
}

/// `v` in base64 (standard and URL-safe) wherever it stands in a longer encoded blob: for each of
/// the three alignments, the characters that encode only `v`'s bytes (and the whole encoding,
/// padded or not, of `v` alone).
fn base64_cores(v: &str) -> Vec<String> {
    use base64::Engine as _;
    let mut out = Vec::new();
    for engine in [&base64::engine::general_purpose::STANDARD, &base64::engine::general_purpose::URL_SAFE] {
        out.push(engine.encode(v.as_bytes()));
        for k in 0..3usize {
            let mut bytes = vec![0u8; k];
            bytes.extend_from_slice(v.as_bytes());
            let enc = engine.encode(&bytes);
            let start = if k > 0 { 4 } else { 0 };
            let end = 4 * (bytes.len() / 3);
            if end >= start + 8 {
                out.push(enc[start..end].to_string());
            }
        }
    }
    out
}

/// Every form in which a server may echo `v`, to two layers deep: plain; form- and
/// percent-encoded; JSON-escaped (also with `<>&'` as `\u003c`…); HTML-escaped; hex; base64
/// (standard and URL-safe, at any alignment inside a longer blob) — and each of them through any
/// one of these again (a URL inside a callback URL, JSON inside a JSON string, base64 of a
/// percent-encoded query). Compared without regard to ASCII case ([`scrub`]); longest first; forms
/// shorter than 4 characters are left out (too short to tell from other text).
pub fn echo_forms(v: &str) -> Vec<String> {
    let mut one: Vec<String> = vec![v.to_string()];
    one.extend(encodings(v));
    one.extend(base64_cores(v));
    let mut out = one.clone();
    for f in &one[1..] {
        out.extend(encodings(f));
        out.extend(base64_cores(f));
    }
    out.retain(|f| f.chars().count() >= 4);
    out.sort_by_key(|f| f.to_ascii_lowercase());
    out.dedup_by_key(|f| f.to_ascii_lowercase());
    out.sort_by_key(|f| std::cmp::Reverse(f.len()));
    out
}

/// `text` with every occurrence of `pattern` in `lower` (`text` in ASCII lower case, so the byte
/// offsets are the same) replaced by `with`.
fn replace_at(text: &str, lower: &str, pattern: &str, with: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    while let Some(i) = lower[at..].find(pattern).map(|i| i + at) {
        out.push_str(&text[at..i]);
        out.push_str(with);
        at = i + pattern.len();
    }
    out.push_str(&text[at..]);
    out
}

/// Replace every form ([`echo_forms`]) of every secret value in `text`, in any ASCII case, by
/// `[redacted]`. The text is lower-cased once a secret and again only after a replacement. A text
/// that still holds a secret once decoded (compositions of encodings beyond those forms, see
/// [`super::decode`]) is withheld whole: `[redacted]`.
pub fn scrub(text: &str, secrets: &[&Credential]) -> String {
    let s = scrub_forms(text, secrets);
    if secrets.iter().any(|c| c.value.expose_secret().len() >= 4 && super::decode::leaks(&s, c.value.expose_secret())) {
        return "[redacted]".to_string();
    }
    s
}

fn scrub_forms(text: &str, secrets: &[&Credential]) -> String {
    let mut s = text.to_string();
    for c in secrets {
        let v = c.value.expose_secret();
        if v.len() < 4 {
            continue;
        }
        let mut lower = s.to_ascii_lowercase();
        for f in echo_forms(v) {
            let pattern = f.to_ascii_lowercase();
            if lower.contains(&pattern) {
                s = replace_at(&s, &lower, &pattern, "[redacted]");
                lower = s.to_ascii_lowercase();
            }
        }
    }
    s
}

/// [`scrub`] every string (and object key) of a JSON value, in place; whether anything changed.
pub fn scrub_value(v: &mut serde_json::Value, secrets: &[&Credential]) -> bool {
    use serde_json::Value;
    match v {
        Value::String(s) => {
            let clean = scrub(s, secrets);
            let changed = clean != *s;
            *s = clean;
            changed
        }
        Value::Array(a) => a.iter_mut().fold(false, |acc, x| scrub_value(x, secrets) | acc),
        Value::Object(m) => {
            let mut changed = false;
            let entries: Vec<(String, Value)> = std::mem::take(m).into_iter().collect();
            for (k, mut x) in entries {
                changed |= scrub_value(&mut x, secrets);
                let key = scrub(&k, secrets);
                changed |= key != k;
                m.insert(key, x);
            }
            changed
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_usual_encoding_of_a_secret_is_redacted() {
        let c = cred("host:127.0.0.1", "127.0.0.1", "apikey", "SEKRIT qry/+&=ENC");
        let h = cred("host:127.0.0.1", "127.0.0.1", "X-Token", "H\"dr <x>&y");
        let secrets = [&c, &h];
        for echoed in [
            "SEKRIT qry/+&=ENC",
            "apikey=SEKRIT+qry%2F%2B%26%3DENC",
            "SEKRIT%20qry%2F%2B%26%3DENC",
            "sekrit: SEKRIT%20qry%2f%2b%26%3dENC",
            r#"{"h": "H\"dr <x>&y"}"#,
            r#"{"h": "H\"dr \u003cx\u003e\u0026y"}"#,
            "H&quot;dr &lt;x&gt;&amp;y",
            "U0VLUklUIHFyeS8rJj1FTkM=",
            "U0VLUklUIHFyeS8rJj1FTkM",
            "SCJkciA8eD4meQ==",
            "SCJkciA8eD4meQ",
        ] {
            let out = scrub(echoed, &secrets);
            assert!(out.contains("[redacted]"), "{echoed} → {out}");
            for f in echo_forms("SEKRIT qry/+&=ENC").iter().chain(echo_forms("H\"dr <x>&y").iter()) {
                assert!(!out.contains(f.as_str()), "{echoed} → {out} still holds {f}");
            }
        }
        // Second hardening, finding 5: compositions, hex, upper case, base64 inside a longer blob.
        use base64::Engine as _;
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s.as_bytes());
        let hex = |s: &str| s.bytes().map(|b| format!("{b:02x}")).collect::<String>();
        let once = "SEKRIT%20qry%2F%2B%26%3DENC";
        for (what, echoed) in [
            ("double percent", "cb=https%3A%2F%2Fx%2F%3Fk%3DSEKRIT%2520qry%252F%252B%2526%253DENC".to_string()),
            ("double JSON", serde_json::to_string(&json_of("H\"dr <x>&y")).unwrap()),
            ("hex", hex("SEKRIT qry/+&=ENC")),
            ("HEX", hex("SEKRIT qry/+&=ENC").to_uppercase()),
            ("upper case", "SEKRIT QRY/+&=ENC".to_string()),
            ("lower case percent", once.to_lowercase()),
            ("base64 of a longer blob, offset 0", b64("SEKRIT qry/+&=ENC and more")),
            ("base64 of a longer blob, offset 1", b64("xSEKRIT qry/+&=ENC and more")),
            ("base64 of a longer blob, offset 2", b64("xySEKRIT qry/+&=ENC and more")),
            ("base64 of a percent-encoded query", b64(&format!("apikey={once}&n=1"))),
            ("hex of JSON", hex(&json_of("H\"dr <x>&y"))),
            ("HTML of percent", format!("<a href=\"/?k={}\">", once.replace('%', "%25"))),
        ] {
            let out = scrub(&echoed, &secrets);
            assert!(out.contains("[redacted]"), "{what}: {echoed} → {out}");
        }
        // Third hardening, finding 7: compositions beyond the encoded forms withhold the text.
        let entities: String = "SEKRIT qry/+&=ENC".chars().map(|c| format!("&#{};", c as u32)).collect();
        assert_eq!(scrub(&format!("echo: {}", entities.replace('&', "%26")), &secrets), "[redacted]");
        assert_eq!(scrub("nothing secret here", &secrets), "nothing secret here");
        let mut v = serde_json::json!({"query": "apikey=SEKRIT+qry%2F%2B%26%3DENC", "headers": {"x-token": "H\"dr <x>&y"}, "H\"dr <x>&y": 1, "n": 5});
        assert!(scrub_value(&mut v, &secrets));
        assert_eq!(
            v,
            serde_json::json!({"query": "apikey=[redacted]", "headers": {"x-token": "[redacted]"}, "[redacted]": 1, "n": 5})
        );
        let mut clean = serde_json::json!({"city": "Paris"});
        assert!(!scrub_value(&mut clean, &secrets));
    }

    /// `{"h": v}` as JSON text.
    fn json_of(v: &str) -> String {
        serde_json::json!({"h": v}).to_string()
    }

    fn cred(scope: &str, host: &str, name: &str, v: &str) -> Credential {
        Credential {
            scope: scope.into(),
            host: host.into(),
            placement: Placement::Header,
            name: name.into(),
            value: SecretString::from(v.to_string()),
        }
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

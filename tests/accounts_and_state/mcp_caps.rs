//! Issue 53, finding 5: one user with many keys opened 10,498 MCP sessions, evicting another
//! user's (one table for all) while the server's memory doubled, and held 250 of 256 event
//! streams. Sessions and streams are now capped per user: a user's new session closes that
//! user's oldest, never another's; a user at the stream cap is told to wait, others are not.

use super::*;

const ACCEPT: &str = "application/json, text/event-stream";

/// `initialize` then `notifications/initialized` as `key`: the new session's id.
async fn open_session(http: &reqwest::Client, url: &str, key: &str) -> String {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let r = http.post(url).bearer_auth(key).header("accept", ACCEPT).json(&init).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let sid = r.headers()["mcp-session-id"].to_str().unwrap().to_string();
    r.text().await.unwrap();
    let done = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let r = http
        .post(url)
        .bearer_auth(key)
        .header("mcp-session-id", &sid)
        .header("accept", ACCEPT)
        .json(&done)
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "initialized: {}", r.status());
    sid
}

/// A `ping` in session `sid` as `key`: the status.
async fn ping(http: &reqwest::Client, url: &str, key: &str, sid: &str) -> u16 {
    let ping = json!({"jsonrpc": "2.0", "id": 2, "method": "ping"});
    let r = http
        .post(url)
        .bearer_auth(key)
        .header("mcp-session-id", sid)
        .header("accept", ACCEPT)
        .json(&ping)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    r.text().await.unwrap();
    status
}

/// The session's standalone event stream (GET), held open by the caller.
async fn stream(http: &reqwest::Client, url: &str, key: &str, sid: &str) -> reqwest::Response {
    http.get(url)
        .bearer_auth(key)
        .header("mcp-session-id", sid)
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_users_mcp_sessions_and_streams_never_take_another_users() {
    let dir = tempfile::tempdir().unwrap();
    let st = Arc::new(StateStore::open(&format!("sqlite:{}", dir.path().join("s.db").display()), 2).await.unwrap());
    let k = users(&st).await;
    let (base, d, stop, server) = daemon_on(dir.path(), st, ApiKeys::default(), |s| {
        s.server.mcp_sessions_per_user = 3;
        s.server.mcp_streams_per_user = 2;
    })
    .await;
    let url = format!("{base}/mcp");
    let http = reqwest::Client::new();

    let ana = open_session(&http, &url, &k.ana).await;
    let mut bens = Vec::new();
    for _ in 0..40 {
        bens.push(open_session(&http, &url, &k.ben).await);
    }
    assert_eq!(ping(&http, &url, &k.ana, &ana).await, 200, "ben's sessions evicted ana's");
    assert_eq!(ping(&http, &url, &k.ben, &bens[0]).await, 404, "ben's oldest session is closed past his cap");
    for sid in &bens[37..] {
        assert_eq!(ping(&http, &url, &k.ben, sid).await, 200, "ben's newest sessions stay");
    }

    // Streams: ben holds two; a third is refused with Retry-After; ana opens hers; when one of
    // ben's ends, he may open another.
    let first = stream(&http, &url, &k.ben, &bens[37]).await;
    assert_eq!(first.status(), 200);
    let second = stream(&http, &url, &k.ben, &bens[38]).await;
    assert_eq!(second.status(), 200);
    let third = stream(&http, &url, &k.ben, &bens[39]).await;
    assert_eq!(third.status(), 429);
    assert!(third.headers().contains_key("retry-after"));
    let e: Value = third.json().await.unwrap();
    assert_eq!(e["code"], "too_many_streams", "{e}");
    // At his cap, a request (it would open a stream) is refused too; a notification is not.
    assert_eq!(ping(&http, &url, &k.ben, &bens[39]).await, 429);
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let r = http
        .post(&url)
        .bearer_auth(&k.ben)
        .header("mcp-session-id", &bens[39])
        .header("accept", ACCEPT)
        .json(&note)
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "a notification at the stream cap: {}", r.status());
    let hers = stream(&http, &url, &k.ana, &ana).await;
    assert_eq!(hers.status(), 200, "ben's streams took ana's");
    drop(first);
    let mut again = 0;
    for _ in 0..50 {
        let r = stream(&http, &url, &k.ben, &bens[39]).await;
        again = r.status().as_u16();
        if again == 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(again, 200, "a stream that ended gives its slot back");
    drop((second, hers));
    stop_daemon(d, stop, server).await;
}

/// Issue 53, Low: `/mcp` answered a malformed JSON-RPC message with 415 (as for a wrong media
/// type). Now it is 400 with a JSON-RPC error, and nothing of it reaches a session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_mcp_messages_are_answered_400_with_a_json_rpc_error() {
    let dir = tempfile::tempdir().unwrap();
    let st = Arc::new(StateStore::open(&format!("sqlite:{}", dir.path().join("s.db").display()), 2).await.unwrap());
    let k = users(&st).await;
    let (base, d, stop, server) = daemon_on(dir.path(), st, ApiKeys::default(), |_| {}).await;
    let url = format!("{base}/mcp");
    let http = reqwest::Client::new();
    let send = |body: &'static str, content_type: &'static str| {
        let (http, url, key) = (http.clone(), url.clone(), k.ana.clone());
        async move {
            let r = http
                .post(&url)
                .bearer_auth(&key)
                .header("accept", ACCEPT)
                .header("content-type", content_type)
                .body(body)
                .send()
                .await
                .unwrap();
            (r.status().as_u16(), r.text().await.unwrap())
        }
    };
    for (body, code) in [
        ("{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": ", -32700),
        ("{\"hello\": \"world\"}", -32600),
        ("[1, 2, 3]", -32600),
    ] {
        let (status, text) = send(body, "application/json").await;
        assert_eq!(status, 400, "{body}: {text}");
        let e: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(e["jsonrpc"], "2.0", "{e}");
        assert_eq!(e["error"]["code"], code, "{body}: {e}");
    }
    // A body of another media type is still the transport's 415.
    let (status, _) = send("{}", "text/plain").await;
    assert_eq!(status, 415);
    // A well-formed one opens a session as before.
    assert!(!open_session(&http, &url, &k.ana).await.is_empty());
    stop_daemon(d, stop, server).await;
}

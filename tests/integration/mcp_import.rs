//! MCP servers as a tool source, against the real reference server
//! `@modelcontextprotocol/server-everything` (npm, run with node; `scripts/test.sh` installs it
//! into tests/mcp with `npm ci`): imported over stdio by `toolgraph tools add-mcp` (its tools in
//! `toolgraph search`, one executed by `toolgraph ask`), and over Streamable HTTP by the daemon
//! (`POST /v1/mcp-servers`), including a server that goes away and comes back.

use serde_json::{json, Map, Value};
use std::process::{Command, Stdio};
use std::time::Duration;
use toolgraph_engine::exec::RemoteTools;
use toolgraph_server::daemon::limits::ApiKeys;
use toolgraph_server::mcp::{McpHub, McpServer};

use crate::common::{self, free_port, Proc};
use crate::daemon_common::*;

fn everything() -> std::path::PathBuf {
    let p = common::root().join("tests/mcp/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(p.exists(), "{} missing: (cd tests/mcp && npm ci) — scripts/test.sh does", p.display());
    p
}

fn http_server(port: u16) -> Proc {
    let p = Proc(
        Command::new("node")
            .arg(everything())
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("node runs"),
    );
    for _ in 0..300 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return p;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("server-everything did not listen on {port}");
}

#[test]
fn an_mcp_server_over_stdio_is_imported_searched_and_called_by_ask() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("embedded:{}", dir.path().join("graph.redb").display());
    let state = format!("sqlite:{}", dir.path().join("state.db").display());
    let cmd = |args: &[&str]| {
        let mut c = common::bin_in(dir.path());
        c.env("TOOLGRAPH__STATE__URL", &state).args(["--store", &store]).args(args);
        c
    };
    let command = format!("node '{}' stdio", everything().display());
    let out = common::run_ok(&mut cmd(&["tools", "add-mcp", "--name", "everything", "--command", &command]));
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    for id in ["mcp/everything/echo", "mcp/everything/get_sum", "mcp/everything/get_structured_content"] {
        assert!(text.contains(id), "{id} imported: {text}");
    }
    // Remembered in the state store.
    let listed = String::from_utf8_lossy(&common::run_ok(&mut cmd(&["tools", "mcp"])).stdout).to_string();
    assert!(listed.starts_with("everything\tnode "), "{listed}");

    // Its tools are APIs like any other: retrieval finds them.
    let found =
        String::from_utf8_lossy(&common::run_ok(&mut cmd(&["search", "echo back a message", "-k", "3"])).stdout)
            .to_string();
    let first = found.lines().nth(1).unwrap_or_default();
    assert!(first.contains("mcp/everything/echo"), "{found}");

    // `ask` plans with them and executes through tools/call (the quoted text is the message).
    let out = cmd(&["ask", "--json", "--no-learn", "Echo the message \"hello from toolgraph\""]).output().unwrap();
    let r: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(r["status"], "answered", "{}", r["answer"]);
    assert_eq!(r["chain"][0]["api"], "mcp/everything/echo");
    assert_eq!(r["chain"][0]["sent"]["message"], "hello from toolgraph");
    assert!(r["answer"].as_str().unwrap().contains("Echo: hello from toolgraph"), "{}", r["answer"]);

    // A bad command is refused with the reason; nothing is remembered.
    let bad = cmd(&["tools", "add-mcp", "--name", "broken", "--command", "no-such-program-here"]).output().unwrap();
    assert!(!bad.status.success());
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("no-such-program-here"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
    let listed = String::from_utf8_lossy(&common::run_ok(&mut cmd(&["tools", "mcp"])).stdout).to_string();
    assert!(!listed.contains("broken"), "{listed}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_server_gets_none_of_toolgraphs_environment_and_errors_fail_the_call() {
    let hub = McpHub::new(
        vec![McpServer {
            name: "everything".into(),
            command: Some(format!("node '{}' stdio", everything().display())),
            url: None,
        }],
        None,
    );
    // This test process has CARGO_* variables (and could hold secrets): the child sees none.
    let env = hub.call("everything", "get-env", Map::new(), Duration::from_secs(20)).await.unwrap();
    assert!(env.get("PATH").is_some(), "{env}");
    assert!(env.as_object().unwrap().keys().all(|k| !k.starts_with("CARGO") && !k.starts_with("TOOLGRAPH")), "{env}");
    // Structured content comes back as the response; invalid arguments fail the call.
    let weather = hub
        .call(
            "everything",
            "get-structured-content",
            json!({"location": "Chicago"}).as_object().unwrap().clone(),
            Duration::from_secs(20),
        )
        .await
        .unwrap();
    assert!(weather["temperature"].is_number(), "{weather}");
    let bad = hub
        .call(
            "everything",
            "get-structured-content",
            json!({"location": "Atlantis"}).as_object().unwrap().clone(),
            Duration::from_secs(20),
        )
        .await;
    assert!(matches!(bad, Err(toolgraph_engine::exec::RemoteError::Failed(_))), "{bad:?}");
    let unknown = hub.call("nowhere", "echo", Map::new(), Duration::from_secs(5)).await;
    assert!(matches!(unknown, Err(toolgraph_engine::exec::RemoteError::Unknown(_))), "{unknown:?}");
    assert_eq!(hub.status()[0]["connected"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_imports_a_streamable_http_server_and_reconnects_after_it_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let server = http_server(port);
    let b = empty_stack(dir.path(), embedder(), exec_to(None, true), |_| {}).await;
    let (url, _d, _stop, _h) = start(b, ApiKeys::default()).await;
    let http = crate::common::http_client(crate::common::REQUEST_LIMIT);
    let mcp_url = format!("http://127.0.0.1:{port}/mcp");

    // stdio servers (commands) are not taken over HTTP; bad names and URLs are refused.
    error_of(
        http.post(format!("{url}/v1/mcp-servers"))
            .json(&json!({"name": "x", "command": "sh -c id"}))
            .send()
            .await
            .unwrap(),
        400,
        "invalid_request",
    )
    .await;
    error_of(
        http.post(format!("{url}/v1/mcp-servers"))
            .json(&json!({"name": "bad name", "url": mcp_url}))
            .send()
            .await
            .unwrap(),
        400,
        "invalid_request",
    )
    .await;
    error_of(
        http.post(format!("{url}/v1/mcp-servers"))
            .json(&json!({"name": "nothing", "url": format!("http://127.0.0.1:{}/mcp", free_port())}))
            .send()
            .await
            .unwrap(),
        422,
        "mcp_unreachable",
    )
    .await;

    let r = http
        .post(format!("{url}/v1/mcp-servers"))
        .json(&json!({"name": "everything", "url": mcp_url}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let imported: Value = r.json().await.unwrap();
    assert!(imported["admitted"].as_array().unwrap().iter().any(|a| a == "mcp/everything/echo"), "{imported}");

    let hits: Value = http
        .get(format!("{url}/v1/tools/search?q=echo%20back%20a%20message&k=3"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(hits["results"][0]["id"], "mcp/everything/echo", "{hits}");
    let api: Value =
        http.get(format!("{url}/v1/tools/mcp/everything/echo")).send().await.unwrap().json().await.unwrap();
    assert_eq!(
        (api["category"].as_str(), api["method"].as_str(), api["url"].as_str()),
        (Some("mcp"), Some("MCP"), Some("mcp://everything/echo")),
        "{api}"
    );

    let ask = |text: &'static str| {
        let http = http.clone();
        let url = url.clone();
        async move {
            http.post(format!("{url}/v1/orchestrate"))
                .json(&json!({"request": text}))
                .send()
                .await
                .unwrap()
                .json::<Value>()
                .await
                .unwrap()
        }
    };
    let r = ask("Echo the message \"over streamable http\"").await;
    assert_eq!(r["status"], "answered", "{r}");
    assert_eq!(r["chain"][0]["api"], "mcp/everything/echo");
    assert!(r["answer"].as_str().unwrap().contains("Echo: over streamable http"), "{r}");
    let servers: Value = http.get(format!("{url}/v1/mcp-servers")).send().await.unwrap().json().await.unwrap();
    assert_eq!(servers["servers"][0]["connected"], true, "{servers}");
    let ready: Value = http.get(format!("{url}/readyz")).send().await.unwrap().json().await.unwrap();
    assert_eq!(ready["mcp"][0]["name"], "everything", "{ready}");

    // The server goes away: the call fails (the run says so, no HTTP error) …
    drop(server);
    let r = ask("Echo the message \"while it is down\"").await;
    assert_ne!(r["status"], "answered", "{r}");
    // … and comes back: the next call connects again (after the backoff).
    let _server = http_server(port);
    let mut last = Value::Null;
    for _ in 0..20 {
        last = ask("Echo the message \"after the restart\"").await;
        if last["status"] == "answered" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(last["status"], "answered", "{last}");
    assert!(last["answer"].as_str().unwrap().contains("Echo: after the restart"), "{last}");
}

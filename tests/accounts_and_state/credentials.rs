use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_are_injected_bound_to_their_host_and_never_shown() {
    let logs = logs();
    const SECRET: &str = "rk-3f9c2a7d51e8b046-live";
    const WRONG: &str = "rk-wrong-0a1b2c3d4e5f";
    std::env::set_var("TOOLGRAPH_SECRET_KEY", "test-sealing-passphrase-0123456789abcdef");
    std::env::set_var("TOOLGRAPH_TOOL_TEST_WRONG_KEY", WRONG);
    let sb = Sandbox::new(Library::new(weather_recordings()), Faults::default());
    let (sb_addr, sb_stop) = sandbox::spawn("127.0.0.1:0", sb.clone()).await.unwrap();
    let tmp = tempfile::tempdir().unwrap();
    for url in state_urls(tmp.path(), "credentials").await {
        let dir = tempfile::tempdir().unwrap();
        let st = Arc::new(StateStore::open(&url, 4).await.unwrap());
        let k = users(&st).await;
        let http = reqwest::Client::new();
        // Health tracking off: the failing calls below must not take the API out of the search.
        let (base, d, stop, server) =
            daemon_on(dir.path(), st.clone(), ApiKeys::default(), |s| s.health.enabled = false).await;
        sb.require_header(None);
        assert_eq!(
            post(&http, &format!("{base}/v1/tools"), &k.admin, weather_tool(&format!("http://{sb_addr}")))
                .await
                .status(),
            201
        );
        sb.require_header(Some(("X-RapidAPI-Key", SECRET)));
        let ask = json!({"request": "What is the current weather in Paris?"});

        // Without the key the tool answers 401: the run cannot answer.
        let r: Value = post(&http, &format!("{base}/v1/orchestrate"), &k.ana, ask.clone()).await.json().await.unwrap();
        assert_ne!(r["status"], "answered", "{r}");
        assert!(
            r.to_string().contains("401")
                || get(&http, &format!("{base}/v1/runs/{}", r["run_id"].as_str().unwrap()), &k.ana)
                    .await
                    .text()
                    .await
                    .unwrap()
                    .contains("401")
        );

        // A credential for the tool, bound to another host: still not sent.
        let scope = "tool:weather/weather_example";
        let put = |body: Value| {
            http.put(format!("{base}/v1/credentials/{scope}"))
                .header("authorization", bearer(&k.admin))
                .json(&body)
                .send()
        };
        let r = put(json!({"host": "weather.example.com", "entries": [{"placement": "header", "name": "X-RapidAPI-Key", "value": SECRET}]})).await.unwrap();
        assert_eq!(r.status(), 200);
        let r: Value = post(&http, &format!("{base}/v1/orchestrate"), &k.ana, ask.clone()).await.json().await.unwrap();
        assert_ne!(r["status"], "answered", "a credential bound to weather.example.com went to 127.0.0.1: {r}");

        refused_references(&http, &base, scope, &k.admin).await;

        // A wrong key (from the environment): the tool's 401 echoes it; the echo is scrubbed.
        let r = put(
            json!({"entries": [{"placement": "header", "name": "X-RapidAPI-Key", "from_env": "TOOLGRAPH_TOOL_TEST_WRONG_KEY"}]}),
        )
        .await
        .unwrap();
        let shown: Value = r.json().await.unwrap();
        assert_eq!(shown["host"], "127.0.0.1", "the tool's own host: {shown}");
        let r: Value = post(&http, &format!("{base}/v1/orchestrate"), &k.ana, ask.clone()).await.json().await.unwrap();
        let stored = get(&http, &format!("{base}/v1/runs/{}", r["run_id"].as_str().unwrap()), &k.ana)
            .await
            .text()
            .await
            .unwrap();
        assert!(stored.contains("Invalid API key") && stored.contains("[redacted]"), "{stored}");
        assert!(!stored.contains(WRONG), "the echoed key reached the run: {stored}");

        // The right key, sealed at rest: injected, the run answers.
        let r = put(json!({"entries": [{"placement": "header", "name": "X-RapidAPI-Key", "value": SECRET}, {"placement": "header", "name": "X-RapidAPI-Host", "value": "weather.example.com"}]})).await.unwrap();
        let body = r.text().await.unwrap();
        assert!(!body.contains(SECRET), "{body}");
        let r: Value = post(&http, &format!("{base}/v1/orchestrate"), &k.ana, ask.clone()).await.json().await.unwrap();
        assert_eq!(r["status"], "answered", "{r}");
        let stored = get(&http, &format!("{base}/v1/runs/{}", r["run_id"].as_str().unwrap()), &k.ana)
            .await
            .text()
            .await
            .unwrap();
        let listed = get(&http, &format!("{base}/v1/credentials"), &k.admin).await.text().await.unwrap();
        assert!(listed.contains("X-RapidAPI-Key") && listed.contains("sealed"), "{listed}");
        let metrics = http.get(format!("{base}/metrics")).send().await.unwrap().text().await.unwrap();
        let audit = get(&http, &format!("{base}/v1/audit"), &k.admin).await.text().await.unwrap();
        let bad = http
            .put(format!("{base}/v1/credentials/{scope}"))
            .header("authorization", bearer(&k.admin))
            .json(&json!({"entries": [{"placement": "cookie", "name": "x", "value": SECRET}]}))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let rows = st.credentials().await.unwrap();
        assert!(rows.iter().all(|r| r.sealed.as_deref().is_none_or(|s| !s.contains(SECRET))), "sealed at rest");
        let log_text = String::from_utf8_lossy(&logs.lock().unwrap()).to_string();
        assert!(log_text.contains("tool credentials loaded"), "debug logs are captured");
        for (what, text) in [
            ("run", &stored),
            ("credentials list", &listed),
            ("metrics", &metrics),
            ("audit", &audit),
            ("error body", &bad),
            ("logs", &log_text),
        ] {
            assert!(!text.contains(SECRET), "the key appears in the {what}");
        }
        // Credentials are administrators' business.
        error_of(get(&http, &format!("{base}/v1/credentials"), &k.ana).await, 403, "forbidden").await;
        stop_daemon(d, stop, server).await;
        eprintln!("credentials_are_injected_bound_to_their_host_and_never_shown: ok on {}", st.backend());
    }
    let _ = sb_stop.send(());
}

/// A reference names a configured place, never the daemon's own secrets or files
/// (second hardening, finding 1): the master key, the daemon's environment, a variable
/// outside the prefix, a file with `from_file` off — each refused before it is stored.
async fn refused_references(http: &reqwest::Client, base: &str, scope: &str, admin: &str) {
    for (entry, says) in [
        (json!({"from_env": "TOOLGRAPH_SECRET_KEY"}), "TOOLGRAPH_TOOL_"),
        (json!({"from_env": "HOME"}), "TOOLGRAPH_TOOL_"),
        (json!({"from_file": "/proc/self/environ"}), "`from_file` is off"),
        (json!({"from_file": "/dev/zero"}), "`from_file` is off"),
    ] {
        let mut e = json!({"placement": "header", "name": "X-RapidAPI-Key"});
        e.as_object_mut().unwrap().extend(entry.as_object().unwrap().clone());
        let r = http
            .put(format!("{base}/v1/credentials/{scope}"))
            .header("authorization", bearer(admin))
            .json(&json!({"entries": [e]}))
            .send()
            .await
            .unwrap();
        let body = error_of(r, 400, "invalid_request").await;
        assert!(body.to_string().contains(says), "{entry}: {body}");
        assert!(!body.to_string().contains("test-sealing-passphrase"), "{body}");
    }
}

/// A tool that echoes its request: the request line (with the query as sent), every header, and
/// the base64 of the `x-token` header, as JSON.
async fn echo_tool() -> std::net::SocketAddr {
    raw_http(|head| {
        let mut lines = head.split("\r\n");
        let request_line = lines.next().unwrap_or_default().to_string();
        let mut headers = serde_json::Map::new();
        for l in lines.take_while(|l| !l.is_empty()) {
            if let Some((k, v)) = l.split_once(": ") {
                headers.insert(k.to_ascii_lowercase(), json!(v));
            }
        }
        let token = headers.get("x-token").and_then(Value::as_str).unwrap_or_default().to_string();
        use base64::Engine as _;
        ("200 OK", "application/json", json!({"request_line": request_line, "headers": headers, "token_b64": base64::engine::general_purpose::STANDARD.encode(token.as_bytes()), "status": true}).to_string())
    })
    .await
}

/// Issue 27, finding 1: a user running an admin's tool saw the admin's credential URL-encoded and
/// JSON-escaped in the response, the trace and the stored run. No form of a secret — plain,
/// encoded, escaped, base64 — reaches a response, a stored run, the state database or the logs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_echoed_credential_never_reaches_a_user_in_any_encoding() {
    let logs = logs();
    const QUERY_SECRET: &str = "SEKRIT qry/+&=ENC";
    const HEADER_SECRET: &str = "H\"dr <x>&y-5ecret";
    // The same passphrase as the other credentials test (they share the process environment).
    std::env::set_var("TOOLGRAPH_SECRET_KEY", "test-sealing-passphrase-0123456789abcdef");
    let echo = echo_tool().await;
    let tmp = tempfile::tempdir().unwrap();
    for url in state_urls(tmp.path(), "echoed").await {
        let dir = tempfile::tempdir().unwrap();
        let st = Arc::new(StateStore::open(&url, 4).await.unwrap());
        let k = users(&st).await;
        let http = reqwest::Client::new();
        let (base, d, stop, server) =
            daemon_on(dir.path(), st.clone(), ApiKeys::default(), |s| s.health.enabled = false).await;
        let tool = json!({"name": "echo", "description": "Echoes the request it gets", "tool": "Echo", "category": "Testing", "method": "GET",
            "url": format!("http://{echo}/echo"), "parameters": [{"name": "q", "type": "string", "description": "anything", "required": true}], "example": {"q": "x"}});
        let r = post(&http, &format!("{base}/v1/tools"), &k.admin, tool).await;
        assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
        let r = http.put(format!("{base}/v1/credentials/host:127.0.0.1")).header("authorization", bearer(&k.admin))
            .json(&json!({"entries": [{"placement": "query", "name": "apikey", "value": QUERY_SECRET}, {"placement": "header", "name": "X-Token", "value": HEADER_SECRET}]})).send().await.unwrap();
        assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
        let r = post(
            &http,
            &format!("{base}/v1/chains/execute"),
            &k.ana,
            json!({"steps": [{"api": "testing/echo/echo", "arguments": {"q": "hello"}}]}),
        )
        .await;
        let response = r.text().await.unwrap();
        let run: Value = serde_json::from_str(&response).unwrap();
        assert_eq!(run["status"], "answered", "{response}");
        // The tool did get both credentials (its echo, redacted, is in the run).
        assert!(response.contains("apikey=[redacted]") && response.contains("[redacted]"), "{response}");
        let stored = get(&http, &format!("{base}/v1/runs/{}", run["run_id"].as_str().unwrap()), &k.ana)
            .await
            .text()
            .await
            .unwrap();
        let mut db = Vec::new();
        if let Some(path) = url.strip_prefix("sqlite:") {
            for f in [path.to_string(), format!("{path}-wal")] {
                db.extend(std::fs::read(f).unwrap_or_default());
            }
        }
        let db = String::from_utf8_lossy(&db).to_string();
        let log_text = String::from_utf8_lossy(&logs.lock().unwrap()).to_string();
        let forms: Vec<String> = toolgraph_engine::exec::credentials::echo_forms(QUERY_SECRET)
            .into_iter()
            .chain(toolgraph_engine::exec::credentials::echo_forms(HEADER_SECRET))
            .collect();
        for (what, text) in
            [("response", &response), ("stored run", &stored), ("state database", &db), ("logs", &log_text)]
        {
            for f in &forms {
                assert!(!text.contains(f.as_str()), "the {what} holds the secret as `{f}`");
            }
        }
        stop_daemon(d, stop, server).await;
    }
}

/// Issue 27, finding 7: five calls with junk arguments (answered "no result") marked an API
/// `degraded` for every user. A tool refusing a call for its arguments is not the API failing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn junk_arguments_from_one_user_do_not_degrade_an_api_for_everyone() {
    let sb = Sandbox::new(Library::new(weather_recordings()), Faults::default());
    let (sb_addr, sb_stop) = sandbox::spawn("127.0.0.1:0", sb.clone()).await.unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let url = state_urls(tmp.path(), "junk").await.remove(0);
    let st = Arc::new(StateStore::open(&url, 4).await.unwrap());
    let k = users(&st).await;
    let http = reqwest::Client::new();
    let (base, d, stop, server) = daemon_on(tmp.path(), st.clone(), ApiKeys::default(), |s| {
        s.health = toolgraph_schema::HealthSettings {
            enabled: true,
            consecutive_failures: 2,
            window: 10,
            min_availability: 0.5,
            probe_every_ms: 60_000,
            invalid_after_probes: 0,
        }
    })
    .await;
    assert_eq!(
        post(&http, &format!("{base}/v1/tools"), &k.admin, weather_tool(&format!("http://{sb_addr}"))).await.status(),
        201
    );
    let api = "weather/weather_example/current_weather";
    for junk in ["qqzz1", "qqzz2", "qqzz3", "qqzz4", "qqzz5"] {
        let r: Value = post(
            &http,
            &format!("{base}/v1/chains/execute"),
            &k.ben,
            json!({"steps": [{"api": api, "arguments": {"city": junk}}]}),
        )
        .await
        .json()
        .await
        .unwrap();
        assert_ne!(r["status"], "answered", "{r}");
        assert!(r.to_string().contains("no result"), "the tool refused the junk: {r}");
    }
    let tool: Value = get(&http, &format!("{base}/v1/tools/{api}"), &k.ana).await.json().await.unwrap();
    assert_eq!(tool["status"], "active", "{tool}");
    let r: Value = post(
        &http,
        &format!("{base}/v1/chains/execute"),
        &k.ana,
        json!({"steps": [{"api": api, "arguments": {"city": "Paris"}}]}),
    )
    .await
    .json()
    .await
    .unwrap();
    assert_eq!(r["status"], "answered", "another user still gets the API: {r}");
    stop_daemon(d, stop, server).await;
    let _ = sb_stop.send(());
}

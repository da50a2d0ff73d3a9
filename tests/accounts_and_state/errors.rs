use super::*;

/// A server that answers every request 500 with a body full of internals.
async fn leaky_server() -> std::net::SocketAddr {
    raw_http(|_| {
        ("500 Internal Server Error", "text/plain", "INTERNAL-TRACE-7731 at db.internal.corp:5432".to_string())
    })
    .await
}

/// Issue 27, finding 11: a 503 for `planner: llm` named the internal LLM URL; MCP import errors
/// echoed library internals and the target's response body. A client is told which backend failed
/// and a reference; the details are in the daemon's log under that reference.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_name_no_internals_but_a_reference_to_the_log() {
    let logs = logs();
    let leaky = leaky_server().await;
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let tmp = tempfile::tempdir().unwrap();
    let url = state_urls(tmp.path(), "internals").await.remove(0);
    let st = Arc::new(StateStore::open(&url, 4).await.unwrap());
    let k = users(&st).await;
    let http = reqwest::Client::new();
    let llm_url = format!("http://127.0.0.1:{dead}/secret-llm-path/v1");
    let (base, d, stop, server) = daemon_on(tmp.path(), st.clone(), ApiKeys::default(), |s| {
        s.llm.default = "local".into();
        // Deciding everything: the first decision asks the (dead) model.
        s.llm.models.insert(
            "local".into(),
            toolgraph_schema::ModelSettings {
                base_url: llm_url.clone(),
                model: "m".into(),
                retries: 0,
                timeout_ms: 500,
                decides: "all".into(),
                ..Default::default()
            },
        );
    })
    .await;
    assert_eq!(
        post(&http, &format!("{base}/v1/tools"), &k.admin, weather_tool(&format!("http://{leaky}")))
            .await
            .status()
            .as_u16()
            / 100,
        4,
        "the leaky tool fails its test call"
    );
    let r = post(
        &http,
        &format!("{base}/v1/orchestrate"),
        &k.ana,
        json!({"request": "What is the weather in Paris?", "planner": "llm"}),
    )
    .await;
    let (status, body) = (r.status().as_u16(), r.text().await.unwrap());
    assert!(status >= 400, "{status} {body}");
    for secret in ["secret-llm-path", &dead.to_string(), "127.0.0.1"] {
        assert!(!body.contains(secret), "the LLM error names `{secret}`: {body}");
    }
    let e: Value = serde_json::from_str(&body).unwrap();
    let reference =
        e["message"].as_str().unwrap().split("reference ").nth(1).unwrap().split(' ').next().unwrap().to_string();
    assert!(e["message"].as_str().unwrap().contains("the LLM"), "{e}");
    let r = post(
        &http,
        &format!("{base}/v1/mcp-servers"),
        &k.admin,
        json!({"name": "leaky", "url": format!("http://{leaky}/mcp")}),
    )
    .await;
    let (status, body) = (r.status().as_u16(), r.text().await.unwrap());
    assert_eq!(status, 422, "{body}");
    assert!(!body.contains("INTERNAL-TRACE") && !body.contains("db.internal") && body.contains("reference"), "{body}");
    let log_text = String::from_utf8_lossy(&logs.lock().unwrap()).to_string();
    assert!(
        log_text.contains(&reference) && log_text.contains("secret-llm-path"),
        "the details are in the log under the reference"
    );
    stop_daemon(d, stop, server).await;
}

/// Issue 27, finding 9 (the error contract): extractor rejections answered `text/plain`
/// (`{"reason": {}}` to approve, a body of the wrong shape to add a key, no content type) and
/// `/v1/audit?limit=1001` was accepted. Every error is `{message, code, type}` JSON.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_error_answers_in_the_json_contract() {
    let tmp = tempfile::tempdir().unwrap();
    let url = state_urls(tmp.path(), "contract").await.remove(0);
    let st = Arc::new(StateStore::open(&url, 4).await.unwrap());
    let k = users(&st).await;
    let http = reqwest::Client::new();
    let (base, d, stop, server) = daemon_on(tmp.path(), st.clone(), ApiKeys::default(), |_| {}).await;
    let ana = st.user_by_name("ana").await.unwrap().unwrap();
    let auth = bearer(&k.admin);
    let cases = [
        (
            http.post(format!("{base}/v1/runs/run_x/approve"))
                .header("authorization", &auth)
                .json(&json!({"reason": {}})),
            "approve with a reason of the wrong type",
        ),
        (
            http.post(format!("{base}/v1/runs/run_x/reject"))
                .header("authorization", &auth)
                .body("{not json")
                .header("content-type", "application/json"),
            "reject with broken JSON",
        ),
        (
            http.post(format!("{base}/v1/users/{}/keys", ana.id))
                .header("authorization", &auth)
                .json(&json!({"label": 5})),
            "a key with a label of the wrong type",
        ),
        (
            http.post(format!("{base}/v1/orchestrate")).header("authorization", &auth).body("{\"request\": \"x\"}"),
            "no content type",
        ),
        (http.get(format!("{base}/v1/audit?limit=1001")).header("authorization", &auth), "a limit over 1000"),
        (http.get(format!("{base}/v1/audit?limit=lots")).header("authorization", &auth), "a limit that is no number"),
        (http.put(format!("{base}/v1/me")).header("authorization", &auth), "a method the endpoint does not take"),
    ];
    for (req, what) in cases {
        let r = req.send().await.unwrap();
        let status = r.status().as_u16();
        let ct = r.headers().get("content-type").map(|v| v.to_str().unwrap().to_string()).unwrap_or_default();
        let body = r.text().await.unwrap();
        assert!((400..500).contains(&status), "{what}: {status} {body}");
        assert!(ct.starts_with("application/json"), "{what}: {status} answered `{ct}`: {body}");
        let e: Value = serde_json::from_str(&body).unwrap_or_else(|_| panic!("{what}: not JSON: {body}"));
        assert!(
            e["message"].as_str().is_some_and(|m| !m.is_empty()) && e["code"].is_string() && e["type"].is_string(),
            "{what}: {e}"
        );
    }
    stop_daemon(d, stop, server).await;
}

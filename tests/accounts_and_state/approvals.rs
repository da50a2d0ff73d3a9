use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approvals_pause_runs_durably_and_decisions_continue_them() {
    let sb = Sandbox::new(Library::new(weather_recordings()), Faults::default());
    let (sb_addr, sb_stop) = sandbox::spawn("127.0.0.1:0", sb.clone()).await.unwrap();
    let tmp = tempfile::tempdir().unwrap();
    for url in state_urls(tmp.path(), "approvals").await {
        let dir = tempfile::tempdir().unwrap();
        let st = Arc::new(StateStore::open(&url, 4).await.unwrap());
        let k = users(&st).await;
        let http = reqwest::Client::new();
        let lease = |s: &mut toolgraph_schema::Settings| s.server.approval_lease_ms = 600;
        let (base, d, stop, server) = daemon_on(dir.path(), st.clone(), ApiKeys::default(), lease).await;
        assert_eq!(
            post(&http, &format!("{base}/v1/tools"), &k.admin, weather_tool(&format!("http://{sb_addr}")))
                .await
                .status(),
            201
        );
        let api = "weather/weather_example/current_weather";
        let patch = |key: &str, body: Value| {
            http.patch(format!("{base}/v1/tools/{api}")).header("authorization", bearer(key)).json(&body).send()
        };
        error_of(patch(&k.ana, json!({"requires_approval": true})).await.unwrap(), 403, "forbidden").await;
        assert_eq!(patch(&k.admin, json!({"requires_approval": true})).await.unwrap().status(), 200);
        let served = sb.stats().served;
        let ask = json!({"request": "What is the current weather in Paris?"});

        // The run pauses on the exact call; nothing was sent.
        let r = post(&http, &format!("{base}/v1/orchestrate"), &k.ana, ask.clone()).await;
        assert_eq!(r.status(), 202);
        let paused: Value = r.json().await.unwrap();
        assert_eq!(paused["status"], "awaiting_approval", "{paused}");
        assert_eq!(
            (paused["pending"]["api"].clone(), paused["pending"]["arguments"]["city"].clone()),
            (json!(api), json!("Paris")),
            "{paused}"
        );
        let run = paused["run_id"].as_str().unwrap().to_string();
        assert_eq!(sb.stats().served, served, "nothing sent before approval");
        let listed: Value =
            get(&http, &format!("{base}/v1/runs?status=awaiting_approval"), &k.ana).await.json().await.unwrap();
        assert_eq!(listed["runs"][0]["run_id"], json!(run));
        // Another user cannot decide; the owner approves; the run completes.
        error_of(post(&http, &format!("{base}/v1/runs/{run}/approve"), &k.ben, json!({})).await, 404, "not_found")
            .await;
        let ok = post(&http, &format!("{base}/v1/runs/{run}/approve"), &k.ana, json!({})).await;
        assert_eq!(ok.status(), 200);
        let done = wait_for(&http, &base, &k.ana, &run, "answered").await;
        assert!(
            done["trace"]
                .as_array()
                .unwrap()
                .iter()
                .any(|e| e["type"] == "approval" && e["decision"]["decision"] == "approved"),
            "{done}"
        );
        error_of(
            post(&http, &format!("{base}/v1/runs/{run}/approve"), &k.ana, json!({})).await,
            409,
            "not_awaiting_approval",
        )
        .await;

        // Rejected: that branch fails, nothing is sent, the run ends without an answer.
        let paused: Value =
            post(&http, &format!("{base}/v1/orchestrate"), &k.ana, ask.clone()).await.json().await.unwrap();
        let run = paused["run_id"].as_str().unwrap().to_string();
        let served = sb.stats().served;
        assert_eq!(
            post(&http, &format!("{base}/v1/runs/{run}/reject"), &k.admin, json!({"reason": "no bookings today"}))
                .await
                .status(),
            200
        );
        let mut ended = Value::Null;
        for _ in 0..400 {
            ended = get(&http, &format!("{base}/v1/runs/{run}"), &k.ana).await.json().await.unwrap();
            if !matches!(ended["status"].as_str(), Some("running" | "awaiting_approval")) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_ne!(ended["status"], "answered", "{ended}");
        assert!(
            ended["trace"].as_array().unwrap().iter().any(|e| e["type"] == "call_failed"
                && e["error"]["kind"] == "not_approved"
                && e["error"]["reason"] == "no bookings today"),
            "{ended}"
        );
        assert_eq!(sb.stats().served, served, "a rejected call is not sent");

        // Durable: the daemon stops while a run waits; another daemon takes it over, and the
        // approval (given to the new daemon) completes it.
        let paused: Value =
            post(&http, &format!("{base}/v1/orchestrate"), &k.ana, ask.clone()).await.json().await.unwrap();
        let run = paused["run_id"].as_str().unwrap().to_string();
        stop_daemon(d, stop, server).await;
        let st2 = Arc::new(StateStore::open(&url, 4).await.unwrap());
        let (base2, d2, stop2, server2) = daemon_on(dir.path(), st2, ApiKeys::default(), lease).await;
        let still = wait_for(&http, &base2, &k.ana, &run, "awaiting_approval").await;
        assert_eq!(still["pending"]["arguments"]["city"], "Paris");
        assert_eq!(post(&http, &format!("{base2}/v1/runs/{run}/approve"), &k.ana, json!({})).await.status(), 200);
        let done = wait_for(&http, &base2, &k.ana, &run, "answered").await;
        assert_eq!(done["chain"][0]["api"], json!(api), "{done}");
        stop_daemon(d2, stop2, server2).await;
        eprintln!("approvals_pause_runs_durably_and_decisions_continue_them: ok on {}", st.backend());
    }
    let _ = sb_stop.send(());
}

/// Third hardening, finding 6: runs paused for approval counted toward no cap, and each polled
/// the store every 250 ms (970 parked cost 11.5 s of CPU per 30 s). Now one user may park at most
/// `server.max_parked_per_user` runs (beyond: the call is refused at once, other users unaffected),
/// and a parked run waits without polling: a decision taken on its daemon wakes it at once, long
/// before its next lease renewal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parked_runs_are_capped_per_user_and_woken_by_their_decision() {
    let sb = Sandbox::new(Library::new(weather_recordings()), Faults::default());
    let (sb_addr, sb_stop) = sandbox::spawn("127.0.0.1:0", sb.clone()).await.unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", tmp.path().join("state.db").display());
    let dir = tempfile::tempdir().unwrap();
    let st = Arc::new(StateStore::open(&url, 4).await.unwrap());
    let k = users(&st).await;
    let http = reqwest::Client::new();
    let settings = |s: &mut toolgraph_schema::Settings| {
        s.server.approval_lease_ms = 120_000;
        s.server.max_parked_per_user = 1;
    };
    let (base, d, stop, server) = daemon_on(dir.path(), st.clone(), ApiKeys::default(), settings).await;
    let tool = weather_tool(&format!("http://{sb_addr}"));
    assert_eq!(post(&http, &format!("{base}/v1/tools"), &k.admin, tool).await.status(), 201);
    let api = "weather/weather_example/current_weather";
    let approval = json!({"requires_approval": true});
    let r = http.patch(format!("{base}/v1/tools/{api}")).header("authorization", bearer(&k.admin)).json(&approval);
    assert_eq!(r.send().await.unwrap().status(), 200);
    let ask = json!({"request": "What is the current weather in Paris?"});
    let first = post(&http, &format!("{base}/v1/orchestrate"), &k.ana, ask.clone()).await;
    assert_eq!(first.status(), 202);
    let first: Value = first.json().await.unwrap();
    // Ana's second run would park a second run: its call is refused at once.
    let second: Value = post(&http, &format!("{base}/v1/orchestrate"), &k.ana, ask.clone()).await.json().await.unwrap();
    assert_ne!(second["status"], "awaiting_approval", "{second}");
    let run2 = second["run_id"].as_str().unwrap();
    let ended: Value = get(&http, &format!("{base}/v1/runs/{run2}"), &k.ana).await.json().await.unwrap();
    assert!(ended.to_string().contains("max_parked_per_user"), "{ended}");
    // Ben is not Ana: his run parks.
    let ben = post(&http, &format!("{base}/v1/orchestrate"), &k.ben, ask.clone()).await;
    assert_eq!(ben.status(), 202);
    // Approved: the run goes on at once (its next lease renewal is 40 s away).
    let run = first["run_id"].as_str().unwrap().to_string();
    let t = std::time::Instant::now();
    assert_eq!(post(&http, &format!("{base}/v1/runs/{run}/approve"), &k.ana, json!({})).await.status(), 200);
    wait_for(&http, &base, &k.ana, &run, "answered").await;
    assert!(t.elapsed() < Duration::from_secs(10), "woken by the decision: {:?}", t.elapsed());
    // Ana may park a run again.
    let again = post(&http, &format!("{base}/v1/orchestrate"), &k.ana, ask).await;
    assert_eq!(again.status(), 202);
    stop_daemon(d, stop, server).await;
    let _ = sb_stop.send(());
}

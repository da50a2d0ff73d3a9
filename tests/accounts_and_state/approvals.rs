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

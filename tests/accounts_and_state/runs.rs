use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_sessions_and_roles_survive_a_restart() {
    let sb = Sandbox::new(Library::new(weather_recordings()), Faults::default());
    let (sb_addr, sb_stop) = sandbox::spawn("127.0.0.1:0", sb).await.unwrap();
    let tmp = tempfile::tempdir().unwrap();
    for url in state_urls(tmp.path(), "history").await {
        let dir = tempfile::tempdir().unwrap();
        let st = Arc::new(StateStore::open(&url, 4).await.unwrap());
        let k = users(&st).await;
        let http = reqwest::Client::new();
        let (base, d, stop, server) =
            daemon_on(dir.path(), st.clone(), ApiKeys::new(["bootstrap-admin-key"]), |_| {}).await;

        let tool = weather_tool(&format!("http://{sb_addr}"));
        users_cannot_do_admin_work(&http, &base, &k, &tool).await;
        // The bootstrap key (TOOLGRAPH_API_KEYS) stays valid, as an administrator.
        let me: Value = get(&http, &format!("{base}/v1/me"), "bootstrap-admin-key").await.json().await.unwrap();
        assert_eq!(me["role"], "admin", "{me}");
        let r = post(&http, &format!("{base}/v1/tools"), &k.admin, tool).await;
        assert_eq!(r.status(), 201, "{}", r.text().await.unwrap());
        let api = "weather/weather_example/current_weather";

        // Ana asks; Ben sees none of it.
        let ran: Value = post(
            &http,
            &format!("{base}/v1/orchestrate"),
            &k.ana,
            json!({"request": "What is the current weather in Paris?"}),
        )
        .await
        .json()
        .await
        .unwrap();
        assert_eq!(ran["status"], "answered", "{ran}");
        let (run_id, session) =
            (ran["run_id"].as_str().unwrap().to_string(), ran["session_id"].as_str().unwrap().to_string());
        error_of(get(&http, &format!("{base}/v1/runs/{run_id}"), &k.ben).await, 404, "not_found").await;
        error_of(get(&http, &format!("{base}/v1/sessions/{session}"), &k.ben).await, 404, "not_found").await;
        error_of(
            post(
                &http,
                &format!("{base}/v1/orchestrate"),
                &k.ben,
                json!({"request": "and tomorrow?", "session_id": session}),
            )
            .await,
            404,
            "not_found",
        )
        .await;
        error_of(post(&http, &format!("{base}/v1/runs/{run_id}/rerun"), &k.ben, json!({})).await, 404, "not_found")
            .await;
        let theirs: Value = get(&http, &format!("{base}/v1/runs"), &k.ben).await.json().await.unwrap();
        assert_eq!(theirs["runs"], json!([]), "{theirs}");
        error_of(get(&http, &format!("{base}/v1/runs?user=*"), &k.ben).await, 403, "forbidden").await;
        // Administrators see every run.
        assert_eq!(get(&http, &format!("{base}/v1/runs/{run_id}"), &k.admin).await.status(), 200);
        let all: Value = get(&http, &format!("{base}/v1/runs?user=*"), &k.admin).await.json().await.unwrap();
        assert_eq!(all["runs"].as_array().unwrap().len(), 1, "{all}");

        // Restart: a new daemon over the same stores.
        stop_daemon(d, stop, server).await;
        drop(st);
        let st = Arc::new(StateStore::open(&url, 4).await.unwrap());
        let (base, d, stop, server) = daemon_on(dir.path(), st.clone(), ApiKeys::default(), |_| {}).await;
        let mine: Value = get(&http, &format!("{base}/v1/runs"), &k.ana).await.json().await.unwrap();
        assert_eq!(mine["runs"][0]["run_id"], json!(run_id), "{mine}");
        assert_eq!(mine["runs"][0]["status"], "answered");
        assert_eq!(mine["runs"][0]["tools"], json!([api]));
        let stored: Value = get(&http, &format!("{base}/v1/runs/{run_id}"), &k.ana).await.json().await.unwrap();
        assert!(stored["trace"].as_array().is_some_and(|t| t.iter().any(|e| e["type"] == "response")), "{stored}");
        let ses: Value = get(&http, &format!("{base}/v1/sessions/{session}"), &k.ana).await.json().await.unwrap();
        assert_eq!(ses["turns"].as_array().unwrap().len(), 1, "{ses}");
        // The conversation goes on after the restart.
        let turn2: Value = post(
            &http,
            &format!("{base}/v1/orchestrate"),
            &k.ana,
            json!({"request": "And the current weather in Paris now?", "session_id": session}),
        )
        .await
        .json()
        .await
        .unwrap();
        assert_eq!(turn2["session_id"], json!(session), "{turn2}");
        let ses: Value = get(&http, &format!("{base}/v1/sessions/{session}"), &k.ana).await.json().await.unwrap();
        assert_eq!(ses["turns"].as_array().unwrap().len(), 2, "{ses}");

        history_filters_and_pages(&http, &base, &k, &run_id).await;

        // Re-run: a new run of the same request.
        let again: Value =
            post(&http, &format!("{base}/v1/runs/{run_id}/rerun"), &k.ana, json!({})).await.json().await.unwrap();
        assert_eq!(again["status"], "answered", "{again}");
        assert_ne!(again["run_id"], json!(run_id));

        chains_as_written(&http, &base, &k, api).await;
        // The audit log has the registration.
        let audit: Value = get(&http, &format!("{base}/v1/audit"), &k.admin).await.json().await.unwrap();
        assert!(
            audit["entries"].as_array().unwrap().iter().all(|e| e["action"] != "user.add"),
            "users were added directly: {audit}"
        );

        a_revoked_key_stops_at_once(&http, &base, &st, &k).await;
        stop_daemon(d, stop, server).await;
        eprintln!("history_sessions_and_roles_survive_a_restart: ok on {}", st.backend());
    }
    let _ = sb_stop.send(());
}

/// History filters and paging (two runs of Ana's, `run_id` the older).
async fn history_filters_and_pages(http: &reqwest::Client, base: &str, k: &Keys, run_id: &str) {
    let q = |p: &str| format!("{base}/v1/runs?{p}");
    let n = |v: &Value| v["runs"].as_array().unwrap().len();
    assert_eq!(n(&get(http, &q("status=answered"), &k.ana).await.json().await.unwrap()), 2);
    assert_eq!(n(&get(http, &q("status=gave_up"), &k.ana).await.json().await.unwrap()), 0);
    assert_eq!(n(&get(http, &q("q=NOW"), &k.ana).await.json().await.unwrap()), 1);
    assert_eq!(n(&get(http, &q("tool=weather/weather_example"), &k.ana).await.json().await.unwrap()), 2);
    assert_eq!(n(&get(http, &q("tool=travel"), &k.ana).await.json().await.unwrap()), 0);
    let page1: Value = get(http, &q("limit=1"), &k.ana).await.json().await.unwrap();
    assert_eq!(n(&page1), 1);
    let next = page1["next"].as_str().expect("a next cursor").to_string();
    let page2: Value = get(http, &q(&format!("limit=1&before={next}")), &k.ana).await.json().await.unwrap();
    assert_eq!(page2["runs"][0]["run_id"], json!(run_id), "the older run on page 2: {page2}");
    assert!(page2["next"].is_null());
    error_of(get(http, &q("status=done"), &k.ana).await, 400, "invalid_request").await;
}

/// Roles: a user cannot register tools, query Cypher, manage users or credentials.
async fn users_cannot_do_admin_work(http: &reqwest::Client, base: &str, k: &Keys, tool: &Value) {
    let e = error_of(post(http, &format!("{base}/v1/tools"), &k.ana, tool.clone()).await, 403, "forbidden").await;
    assert_eq!(e["type"], "permission_error", "{e}");
    error_of(
        post(http, &format!("{base}/v1/graph/cypher"), &k.ben, json!({"query": "MATCH (n) RETURN n"})).await,
        403,
        "forbidden",
    )
    .await;
    error_of(get(http, &format!("{base}/v1/users"), &k.ben).await, 403, "forbidden").await;
    error_of(get(http, &format!("{base}/v1/audit"), &k.ana).await, 403, "forbidden").await;
    error_of(
        post(http, &format!("{base}/v1/users"), &k.ana, json!({"name": "eve", "role": "admin"})).await,
        403,
        "forbidden",
    )
    .await;
    let imp = http
        .post(format!("{base}/v1/tools/import-openapi"))
        .header("authorization", bearer(&k.ben))
        .json(&json!({"openapi": "3.0.0", "paths": {}}))
        .send()
        .await
        .unwrap();
    error_of(imp, 403, "forbidden").await;
    let put = http
        .put(format!("{base}/v1/credentials/host:example.com"))
        .header("authorization", bearer(&k.ana))
        .json(&json!({"entries": [{"placement": "header", "name": "X-Key", "from_env": "HOME"}]}))
        .send()
        .await
        .unwrap();
    error_of(put, 403, "forbidden").await;
    error_of(
        http.get(format!("{base}/v1/runs")).header("authorization", "Bearer tgk_forged").send().await.unwrap(),
        401,
        "invalid_api_key",
    )
    .await;
}

/// Developer mode: chains as written, checked before anything is sent, saved by their owner.
async fn chains_as_written(http: &reqwest::Client, base: &str, k: &Keys, api: &str) {
    let chain = json!({"steps": [{"api": api, "arguments": {"city": "Paris"}}], "request": "Paris weather by hand"});
    let ex: Value = post(http, &format!("{base}/v1/chains/execute"), &k.ana, chain).await.json().await.unwrap();
    assert_eq!(ex["status"], "answered", "{ex}");
    assert_eq!(ex["chain"][0]["sent"]["city"], "Paris");
    let bad = post(
        http,
        &format!("{base}/v1/chains/execute"),
        &k.ana,
        json!({"steps": [{"api": api, "arguments": {"town": "Paris"}}]}),
    )
    .await;
    assert!(error_of(bad, 422, "invalid_chain").await["message"].as_str().unwrap().contains("town"));
    let bad = post(http, &format!("{base}/v1/chains/execute"), &k.ana, json!({"steps": [{"api": api, "arguments": {"city": "$var2.data.city$"}}, {"api": api, "arguments": {"city": "Paris"}}]})).await;
    assert!(error_of(bad, 422, "invalid_chain").await["message"].as_str().unwrap().contains("var2"));
    let bad = post(
        http,
        &format!("{base}/v1/chains/execute"),
        &k.ana,
        json!({"steps": [{"api": "no/such/api", "arguments": {}}]}),
    )
    .await;
    error_of(bad, 422, "invalid_chain").await;
    // Two steps, the second fed by the first's output.
    let fed = json!({"steps": [{"api": api, "arguments": {"city": "Paris"}}, {"api": api, "arguments": {"city": "$var1.data.city$"}}]});
    let ex: Value = post(http, &format!("{base}/v1/chains/execute"), &k.ana, fed.clone()).await.json().await.unwrap();
    assert_eq!(ex["chain"][1]["sent"]["city"], "Paris", "{ex}");
    // Saved chains: the owner's only.
    let saved = post(
        http,
        &format!("{base}/v1/chains"),
        &k.ana,
        json!({"name": "Paris twice", "description": "weather, fed forward", "steps": fed["steps"]}),
    )
    .await;
    assert_eq!(saved.status(), 201);
    let saved: Value = saved.json().await.unwrap();
    let cid = saved["chain_id"].as_str().unwrap();
    let found: Value = get(http, &format!("{base}/v1/chains?q=twice"), &k.ana).await.json().await.unwrap();
    assert_eq!(found["chains"][0]["chain_id"], json!(cid));
    error_of(get(http, &format!("{base}/v1/chains/{cid}"), &k.ben).await, 404, "not_found").await;
    let ex: Value =
        post(http, &format!("{base}/v1/chains/execute"), &k.ana, json!({"chain_id": cid})).await.json().await.unwrap();
    assert_eq!(ex["status"], "answered", "{ex}");
    let del =
        http.delete(format!("{base}/v1/chains/{cid}")).header("authorization", bearer(&k.ana)).send().await.unwrap();
    assert_eq!(del.status(), 204);
}

/// A revoked key stops working at once on this daemon.
async fn a_revoked_key_stops_at_once(http: &reqwest::Client, base: &str, st: &StateStore, k: &Keys) {
    let ben_keys: Value =
        get(http, &format!("{base}/v1/users/{}/keys", st.user_by_name("ben").await.unwrap().unwrap().id), &k.admin)
            .await
            .json()
            .await
            .unwrap();
    let kid = ben_keys["keys"][0]["id"].as_str().unwrap();
    assert_eq!(get(http, &format!("{base}/v1/me"), &k.ben).await.status(), 200);
    assert_eq!(
        http.delete(format!("{base}/v1/keys/{kid}"))
            .header("authorization", bearer(&k.admin))
            .send()
            .await
            .unwrap()
            .status(),
        204
    );
    error_of(get(http, &format!("{base}/v1/me"), &k.ben).await, 401, "invalid_api_key").await;
}

/// One user cannot take every in-flight slot: beyond `server.max_in_flight_per_user` their next
/// run gets 429 `too_many_runs` with Retry-After, while another user's run is still served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_user_cannot_take_every_run_slot_from_the_others() {
    let slow = Sandbox::new(Library::new(weather_recordings()), Faults { latency_ms: 1500, ..Faults::default() });
    let (sb_addr, sb_stop) = sandbox::spawn("127.0.0.1:0", slow).await.unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let url = state_urls(tmp.path(), "share").await.remove(0);
    let st = Arc::new(StateStore::open(&url, 4).await.unwrap());
    let k = users(&st).await;
    let dir = tempfile::tempdir().unwrap();
    let (base, d, stop, server) = daemon_on(dir.path(), st.clone(), ApiKeys::new(["bootstrap-admin-key"]), |s| {
        s.server.max_in_flight = 4;
        s.server.max_in_flight_per_user = 2;
    })
    .await;
    let http = reqwest::Client::new();
    let tool = weather_tool(&format!("http://{sb_addr}"));
    assert_eq!(post(&http, &format!("{base}/v1/tools"), &k.admin, tool).await.status(), 201);
    let ask = json!({"request": "What is the current weather in Paris?"});
    // Ana's two runs take her share (each waits 1.5 s on the slow tool).
    let mut running = Vec::new();
    for _ in 0..2 {
        let (h, b, key, body) = (http.clone(), base.clone(), k.ana.clone(), ask.clone());
        running.push(tokio::spawn(async move { post(&h, &format!("{b}/v1/orchestrate"), &key, body).await.status() }));
    }
    for _ in 0..500 {
        if d.runs_in_flight() >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(d.runs_in_flight(), 2, "ana's two runs are executing");
    // A third of hers is refused with a retry hint; the daemon still has slots for ben.
    let r = post(&http, &format!("{base}/v1/orchestrate"), &k.ana, ask.clone()).await;
    assert!(r.headers().get("retry-after").is_some());
    let e = error_of(r, 429, "too_many_runs").await;
    assert!(e["message"].as_str().unwrap().contains("max_in_flight_per_user"), "{e}");
    let r = post(&http, &format!("{base}/v1/orchestrate"), &k.ben, ask.clone()).await;
    assert_eq!(r.status(), 200, "ben is served while ana holds her share");
    for h in running {
        assert_eq!(h.await.unwrap(), 200);
    }
    // Her share comes back when her runs end.
    assert_eq!(post(&http, &format!("{base}/v1/orchestrate"), &k.ana, ask).await.status(), 200);
    stop_daemon(d, stop, server).await;
    let _ = sb_stop.send(());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_daemons_share_sessions_through_the_state_store() {
    let sb = Sandbox::new(Library::new(weather_recordings()), Faults::default());
    let (sb_addr, sb_stop) = sandbox::spawn("127.0.0.1:0", sb).await.unwrap();
    let tmp = tempfile::tempdir().unwrap();
    for url in state_urls(tmp.path(), "replicas").await {
        let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let st = Arc::new(StateStore::open(&url, 4).await.unwrap());
        let k = users(&st).await;
        let http = reqwest::Client::new();
        // Two replicas: each its own graph (the same tool registered on both), one state store.
        let (a, da_d, stop_a, srv_a) =
            daemon_on(da.path(), Arc::new(StateStore::open(&url, 4).await.unwrap()), ApiKeys::default(), |_| {}).await;
        let (b, db_d, stop_b, srv_b) =
            daemon_on(db.path(), Arc::new(StateStore::open(&url, 4).await.unwrap()), ApiKeys::default(), |_| {}).await;
        for base in [&a, &b] {
            assert_eq!(
                post(&http, &format!("{base}/v1/tools"), &k.admin, weather_tool(&format!("http://{sb_addr}")))
                    .await
                    .status(),
                201
            );
        }
        let t1: Value = post(
            &http,
            &format!("{a}/v1/orchestrate"),
            &k.ana,
            json!({"request": "What is the current weather in Paris?"}),
        )
        .await
        .json()
        .await
        .unwrap();
        assert_eq!(t1["status"], "answered", "{t1}");
        let session = t1["session_id"].as_str().unwrap();
        let t2: Value = post(
            &http,
            &format!("{b}/v1/orchestrate"),
            &k.ana,
            json!({"request": "Is it still raining in Paris?", "session_id": session}),
        )
        .await
        .json()
        .await
        .unwrap();
        assert_eq!(t2["session_id"], json!(session), "turn 2 on the other replica: {t2}");
        // Turn 2 saw turn 1 (the earlier turn is in its context).
        let run2: Value =
            get(&http, &format!("{a}/v1/runs/{}", t2["run_id"].as_str().unwrap()), &k.ana).await.json().await.unwrap();
        assert_eq!(run2["session_id"], json!(session));
        let ses: Value = get(&http, &format!("{a}/v1/sessions/{session}"), &k.ana).await.json().await.unwrap();
        let turns: Vec<&str> = ses["turns"].as_array().unwrap().iter().map(|t| t["run_id"].as_str().unwrap()).collect();
        assert_eq!(turns, vec![t1["run_id"].as_str().unwrap(), t2["run_id"].as_str().unwrap()], "{ses}");
        // A key made on A works on B (within the key cache's 5 s; this one was never looked up on B).
        let uid = st.user_by_name("ben").await.unwrap().unwrap().id;
        let made: Value = post(&http, &format!("{a}/v1/users/{uid}/keys"), &k.admin, json!({"label": "new"}))
            .await
            .json()
            .await
            .unwrap();
        let me: Value = get(&http, &format!("{b}/v1/me"), made["key"].as_str().unwrap()).await.json().await.unwrap();
        assert_eq!(me["name"], "ben", "{me}");
        stop_daemon(da_d, stop_a, srv_a).await;
        stop_daemon(db_d, stop_b, srv_b).await;
        eprintln!("two_daemons_share_sessions_through_the_state_store: ok on {}", st.backend());
    }
    let _ = sb_stop.send(());
}

/// Issue 27, finding 8: a daemon killed mid-run left its runs `running` for ever (retention skips
/// them). What it leaves — a `running` record whose lease lapsed — becomes `interrupted` (finished,
/// listed by that status) once a daemon on the same state store is up; a run another live daemon
/// holds (its lease current) stays `running`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_left_running_by_a_stopped_daemon_becomes_interrupted() {
    use toolgraph_server::state::RunRecord;
    let dir = tempfile::tempdir().unwrap();
    for url in state_urls(dir.path(), "interrupted").await {
        let st = Arc::new(StateStore::open(&url, 4).await.unwrap());
        let keys = users(&st).await;
        let ana = st.user_by_name("ana").await.unwrap().unwrap();
        let now = toolgraph_server::state::now_ms();
        let record = |id: &str, lease: i64| RunRecord {
            id: id.into(),
            user_id: ana.id.clone(),
            session_id: format!("s_{id}"),
            request: "weather in Paris".into(),
            options: json!({}),
            status: "running".into(),
            tools: Vec::new(),
            body: json!({"run_id": id, "status": "running", "request": "weather in Paris"}),
            pending: None,
            lease_until_ms: Some(lease),
            created_ms: now - 60_000,
            finished_ms: None,
            duration_ms: None,
        };
        st.start_run(&record("run_crashed", now - 1_000), None).await.unwrap();
        st.start_run(&record("run_held", now + 600_000), None).await.unwrap();
        let sub = dir.path().join(format!("d{}", url.len()));
        std::fs::create_dir_all(&sub).unwrap();
        let (base, d, stop, server) = daemon_on(&sub, st.clone(), ApiKeys::default(), |_| {}).await;
        let http = reqwest::Client::new();
        let run = wait_for(&http, &base, &keys.ana, "run_crashed", "interrupted").await;
        assert!(run["answer"].as_str().unwrap().contains("interrupted"), "{run}");
        let listed: Value =
            get(&http, &format!("{base}/v1/runs?status=interrupted"), &keys.ana).await.json().await.unwrap();
        let ids: Vec<&str> = listed["runs"].as_array().unwrap().iter().filter_map(|r| r["run_id"].as_str()).collect();
        assert_eq!(ids, ["run_crashed"], "{listed}");
        let held: Value = get(&http, &format!("{base}/v1/runs/run_held"), &keys.ana).await.json().await.unwrap();
        assert_eq!(held["status"], "running", "a run a live daemon holds is left alone");
        assert!(st.run("run_crashed").await.unwrap().unwrap().finished_ms.is_some());
        stop_daemon(d, stop, server).await;
    }
}

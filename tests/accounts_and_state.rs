//! The multi-user service, on both state stores: SQLite (a file) and PostgreSQL (when
//! `TOOLGRAPH_TEST_POSTGRES_URL` is set — `scripts/test.sh` starts one — each test on a fresh
//! database). Users and roles, history that survives a restart, sessions shared by two daemons,
//! re-runs and user chains, tool credentials injected and never shown, approvals that pause runs
//! durably.

use serde_json::{json, Value};
use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use toolgraph_sandbox::{self as sandbox, Faults, Library, Sandbox};
use toolgraph_server::daemon::limits::ApiKeys;
use toolgraph_server::state::{Role, StateStore};

#[path = "common/daemon.rs"]
mod daemon_common;
use daemon_common::*;
mod common;

/// Every log line of this test binary at debug level (the credentials test reads them).
fn logs() -> Arc<Mutex<Vec<u8>>> {
    static LOGS: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LOGS.get_or_init(|| {
        let buf = Arc::new(Mutex::new(Vec::new()));
        #[derive(Clone)]
        struct W(Arc<Mutex<Vec<u8>>>);
        impl Write for W {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let w = W(buf.clone());
        let _ = tracing_subscriber::fmt()
            .with_env_filter("debug")
            .with_ansi(false)
            .with_writer(move || w.clone())
            .try_init();
        buf
    })
    .clone()
}

/// The state stores to test on: a SQLite file, and a fresh PostgreSQL database when one is given.
async fn state_urls(dir: &std::path::Path, name: &str) -> Vec<String> {
    let mut urls = vec![format!("sqlite:{}", dir.join(format!("{name}.db")).display())];
    if let Ok(base) = std::env::var("TOOLGRAPH_TEST_POSTGRES_URL") {
        urls.push(fresh_postgres(&base, name).await);
    } else {
        eprintln!(
            "TOOLGRAPH_TEST_POSTGRES_URL is not set: {name} runs on SQLite only (scripts/test.sh starts a PostgreSQL)"
        );
    }
    urls
}

/// A new database on the test server (password from TOOLGRAPH_STATE_PASSWORD_FILE).
async fn fresh_postgres(base: &str, name: &str) -> String {
    use sqlx::Connection;
    let pw = std::env::var("TOOLGRAPH_STATE_PASSWORD")
        .ok()
        .or_else(|| {
            std::env::var("TOOLGRAPH_STATE_PASSWORD_FILE")
                .ok()
                .map(|f| std::fs::read_to_string(f).unwrap().trim().to_string())
        })
        .expect("TOOLGRAPH_STATE_PASSWORD(_FILE) for the test PostgreSQL");
    let mut admin = reqwest::Url::parse(base).unwrap();
    admin.set_password(Some(&pw)).unwrap();
    let mut conn = sqlx::postgres::PgConnection::connect(admin.as_str()).await.expect("the test PostgreSQL answers");
    let db = format!(
        "tg_{name}_{}_{}",
        std::process::id(),
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis()
    );
    sqlx::query(&format!("CREATE DATABASE {db}")).execute(&mut conn).await.unwrap();
    let mut u = reqwest::Url::parse(base).unwrap();
    u.set_path(&format!("/{db}"));
    u.to_string()
}

/// An admin, two users; their keys.
struct Keys {
    admin: String,
    ana: String,
    ben: String,
}

async fn users(st: &StateStore) -> Keys {
    let mut out = Vec::new();
    for (name, role) in [("root", Role::Admin), ("ana", Role::User), ("ben", Role::User)] {
        let u = st.add_user(name, role, None).await.unwrap();
        out.push(st.add_key(&u.id, "test", None).await.unwrap().1);
    }
    Keys { admin: out[0].clone(), ana: out[1].clone(), ben: out[2].clone() }
}

fn bearer(k: &str) -> String {
    format!("Bearer {k}")
}

async fn daemon_on(
    dir: &std::path::Path,
    state: Arc<StateStore>,
    keys: ApiKeys,
    tweak: impl FnOnce(&mut toolgraph_schema::Settings),
) -> (
    String,
    Arc<toolgraph_server::daemon::Daemon>,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<std::io::Result<()>>,
) {
    let b = empty_stack(dir, embedder(), exec_to(None, true), tweak).await;
    start_on(b, Some(state), keys).await
}

async fn get(http: &reqwest::Client, url: &str, key: &str) -> reqwest::Response {
    http.get(url).header("authorization", bearer(key)).send().await.unwrap()
}

async fn post(http: &reqwest::Client, url: &str, key: &str, body: Value) -> reqwest::Response {
    http.post(url).header("authorization", bearer(key)).json(&body).send().await.unwrap()
}

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

        // Roles: a user cannot register tools, query Cypher, manage users or credentials.
        let tool = weather_tool(&format!("http://{sb_addr}"));
        let e = error_of(post(&http, &format!("{base}/v1/tools"), &k.ana, tool.clone()).await, 403, "forbidden").await;
        assert_eq!(e["type"], "permission_error", "{e}");
        error_of(
            post(&http, &format!("{base}/v1/graph/cypher"), &k.ben, json!({"query": "MATCH (n) RETURN n"})).await,
            403,
            "forbidden",
        )
        .await;
        error_of(get(&http, &format!("{base}/v1/users"), &k.ben).await, 403, "forbidden").await;
        error_of(get(&http, &format!("{base}/v1/audit"), &k.ana).await, 403, "forbidden").await;
        error_of(
            post(&http, &format!("{base}/v1/users"), &k.ana, json!({"name": "eve", "role": "admin"})).await,
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

        // History filters and paging.
        let q = |p: &str| format!("{base}/v1/runs?{p}");
        let n = |v: &Value| v["runs"].as_array().unwrap().len();
        assert_eq!(n(&get(&http, &q("status=answered"), &k.ana).await.json().await.unwrap()), 2);
        assert_eq!(n(&get(&http, &q("status=gave_up"), &k.ana).await.json().await.unwrap()), 0);
        assert_eq!(n(&get(&http, &q("q=NOW"), &k.ana).await.json().await.unwrap()), 1);
        assert_eq!(n(&get(&http, &q("tool=weather/weather_example"), &k.ana).await.json().await.unwrap()), 2);
        assert_eq!(n(&get(&http, &q("tool=travel"), &k.ana).await.json().await.unwrap()), 0);
        let page1: Value = get(&http, &q("limit=1"), &k.ana).await.json().await.unwrap();
        assert_eq!(n(&page1), 1);
        let next = page1["next"].as_str().expect("a next cursor").to_string();
        let page2: Value = get(&http, &q(&format!("limit=1&before={next}")), &k.ana).await.json().await.unwrap();
        assert_eq!(page2["runs"][0]["run_id"], json!(run_id), "the older run on page 2: {page2}");
        assert!(page2["next"].is_null());
        error_of(get(&http, &q("status=done"), &k.ana).await, 400, "invalid_request").await;

        // Re-run: a new run of the same request.
        let again: Value =
            post(&http, &format!("{base}/v1/runs/{run_id}/rerun"), &k.ana, json!({})).await.json().await.unwrap();
        assert_eq!(again["status"], "answered", "{again}");
        assert_ne!(again["run_id"], json!(run_id));

        // Developer mode: a chain as written, checked before anything is sent.
        let chain =
            json!({"steps": [{"api": api, "arguments": {"city": "Paris"}}], "request": "Paris weather by hand"});
        let ex: Value = post(&http, &format!("{base}/v1/chains/execute"), &k.ana, chain).await.json().await.unwrap();
        assert_eq!(ex["status"], "answered", "{ex}");
        assert_eq!(ex["chain"][0]["sent"]["city"], "Paris");
        let bad = post(
            &http,
            &format!("{base}/v1/chains/execute"),
            &k.ana,
            json!({"steps": [{"api": api, "arguments": {"town": "Paris"}}]}),
        )
        .await;
        assert!(error_of(bad, 422, "invalid_chain").await["message"].as_str().unwrap().contains("town"));
        let bad = post(&http, &format!("{base}/v1/chains/execute"), &k.ana, json!({"steps": [{"api": api, "arguments": {"city": "$var2.data.city$"}}, {"api": api, "arguments": {"city": "Paris"}}]})).await;
        assert!(error_of(bad, 422, "invalid_chain").await["message"].as_str().unwrap().contains("var2"));
        let bad = post(
            &http,
            &format!("{base}/v1/chains/execute"),
            &k.ana,
            json!({"steps": [{"api": "no/such/api", "arguments": {}}]}),
        )
        .await;
        error_of(bad, 422, "invalid_chain").await;
        // Two steps, the second fed by the first's output.
        let fed = json!({"steps": [{"api": api, "arguments": {"city": "Paris"}}, {"api": api, "arguments": {"city": "$var1.data.city$"}}]});
        let ex: Value =
            post(&http, &format!("{base}/v1/chains/execute"), &k.ana, fed.clone()).await.json().await.unwrap();
        assert_eq!(ex["chain"][1]["sent"]["city"], "Paris", "{ex}");
        // Saved chains: the owner's only.
        let saved = post(
            &http,
            &format!("{base}/v1/chains"),
            &k.ana,
            json!({"name": "Paris twice", "description": "weather, fed forward", "steps": fed["steps"]}),
        )
        .await;
        assert_eq!(saved.status(), 201);
        let saved: Value = saved.json().await.unwrap();
        let cid = saved["chain_id"].as_str().unwrap();
        let found: Value = get(&http, &format!("{base}/v1/chains?q=twice"), &k.ana).await.json().await.unwrap();
        assert_eq!(found["chains"][0]["chain_id"], json!(cid));
        error_of(get(&http, &format!("{base}/v1/chains/{cid}"), &k.ben).await, 404, "not_found").await;
        let ex: Value = post(&http, &format!("{base}/v1/chains/execute"), &k.ana, json!({"chain_id": cid}))
            .await
            .json()
            .await
            .unwrap();
        assert_eq!(ex["status"], "answered", "{ex}");
        let del = http
            .delete(format!("{base}/v1/chains/{cid}"))
            .header("authorization", bearer(&k.ana))
            .send()
            .await
            .unwrap();
        assert_eq!(del.status(), 204);
        // The audit log has the registration.
        let audit: Value = get(&http, &format!("{base}/v1/audit"), &k.admin).await.json().await.unwrap();
        assert!(
            audit["entries"].as_array().unwrap().iter().all(|e| e["action"] != "user.add"),
            "users were added directly: {audit}"
        );

        // A revoked key stops working at once on this daemon.
        let ben_keys: Value = get(
            &http,
            &format!("{base}/v1/users/{}/keys", st.user_by_name("ben").await.unwrap().unwrap().id),
            &k.admin,
        )
        .await
        .json()
        .await
        .unwrap();
        let kid = ben_keys["keys"][0]["id"].as_str().unwrap();
        assert_eq!(get(&http, &format!("{base}/v1/me"), &k.ben).await.status(), 200);
        assert_eq!(
            http.delete(format!("{base}/v1/keys/{kid}"))
                .header("authorization", bearer(&k.admin))
                .send()
                .await
                .unwrap()
                .status(),
            204
        );
        error_of(get(&http, &format!("{base}/v1/me"), &k.ben).await, 401, "invalid_api_key").await;
        stop_daemon(d, stop, server).await;
        eprintln!("history_sessions_and_roles_survive_a_restart: ok on {}", st.backend());
    }
    let _ = sb_stop.send(());
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

        // A reference names a configured place, never the daemon's own secrets or files
        // (second hardening, finding 1): the master key, the daemon's environment, a variable
        // outside the prefix, a file with `from_file` off — each refused before it is stored.
        for (entry, says) in [
            (json!({"from_env": "TOOLGRAPH_SECRET_KEY"}), "TOOLGRAPH_TOOL_"),
            (json!({"from_env": "HOME"}), "TOOLGRAPH_TOOL_"),
            (json!({"from_file": "/proc/self/environ"}), "`from_file` is off"),
            (json!({"from_file": "/dev/zero"}), "`from_file` is off"),
        ] {
            let mut e = json!({"placement": "header", "name": "X-RapidAPI-Key"});
            e.as_object_mut().unwrap().extend(entry.as_object().unwrap().clone());
            let r = put(json!({"entries": [e]})).await.unwrap();
            let body = error_of(r, 400, "invalid_request").await;
            assert!(body.to_string().contains(says), "{entry}: {body}");
            assert!(!body.to_string().contains("test-sealing-passphrase"), "{body}");
        }

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

/// Poll a run until its status is not `running` / `awaiting_approval` (or `want`).
async fn wait_for(http: &reqwest::Client, base: &str, key: &str, run: &str, want: &str) -> Value {
    for _ in 0..400 {
        let r: Value = get(http, &format!("{base}/v1/runs/{run}"), key).await.json().await.unwrap();
        if r["status"] == want {
            return r;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("run {run} never reached {want}");
}

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_users_command_manages_accounts_in_the_state_store() {
    let tmp = tempfile::tempdir().unwrap();
    for url in state_urls(tmp.path(), "cli").await {
        let users = |args: &[&str], stdin: Option<&str>| {
            let mut c = common::bin();
            c.env("TOOLGRAPH__STATE__URL", &url).arg("users").args(args);
            c.stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped());
            let mut child = c.spawn().unwrap();
            if let Some(text) = stdin {
                child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
            }
            drop(child.stdin.take());
            let out = child.wait_with_output().unwrap();
            (
                out.status.success(),
                String::from_utf8_lossy(&out.stdout).to_string(),
                String::from_utf8_lossy(&out.stderr).to_string(),
            )
        };
        let (ok, out, err) =
            users(&["add", "root", "--role", "admin", "--password-stdin"], Some("correct horse battery\n"));
        assert!(ok, "{out}{err}");
        let key = out.lines().last().unwrap().trim().to_string();
        assert!(key.starts_with("tgk_"), "{out}");
        let st = StateStore::open(&url, 2).await.unwrap();
        let caller = st.caller_of_key(&key).await.unwrap().expect("the printed key is valid");
        assert_eq!((caller.name.as_str(), caller.role), ("root", Role::Admin));
        let (_, hash) = st.password_hash("root").await.unwrap().unwrap();
        assert!(toolgraph_server::state::secrets::verify_password("correct horse battery", &hash));
        let (ok, out, _) = users(&["add-key", "root", "--label", "ci", "--expires-in-days", "30"], None);
        assert!(ok);
        let second = out.lines().last().unwrap().trim().to_string();
        let (ok, listed, _) = users(&["list"], None);
        assert!(ok && listed.contains("root") && listed.contains("ci"), "{listed}");
        assert!(!listed.contains(&key) && !listed.contains(&second), "keys are never listed: {listed}");
        let kid =
            listed.lines().find(|l| l.contains("\tci")).and_then(|l| l.split_whitespace().next()).unwrap().to_string();
        let (ok, _, _) = users(&["revoke-key", &kid], None);
        assert!(ok);
        assert!(st.caller_of_key(&second).await.unwrap().is_none(), "revoked");
        assert!(st.caller_of_key(&key).await.unwrap().is_some(), "the other key still works");
        let (ok, _, err) = users(&["add", "root"], None);
        assert!(!ok && err.contains("exists"), "{err}");
        let (ok, _, err) = users(&["add", "x", "--role", "owner"], None);
        assert!(!ok && err.contains("admin or user"), "{err}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_logins_are_digests_that_expire_and_end_with_their_key() {
    let dir = tempfile::tempdir().unwrap();
    for url in state_urls(dir.path(), "logins").await {
        let st = StateStore::open(&url, 4).await.unwrap();
        let u = st.add_user("cleo", Role::User, None).await.unwrap();
        let (info, key) = st.add_key(&u.id, "laptop", None).await.unwrap();
        let cleo = toolgraph_server::state::Caller { user_id: u.id.clone(), name: "cleo".into(), role: Role::User };
        let far = toolgraph_server::state::now_ms() + 3_600_000;
        st.put_login("tgs_password_login", &cleo, "csrf_a", far, None).await.unwrap();
        st.put_login("tgs_key_login", &cleo, "csrf_b", far, Some(&key)).await.unwrap();
        st.put_login("tgs_expired", &cleo, "csrf_c", toolgraph_server::state::now_ms() - 1, None).await.unwrap();
        let l = st.login("tgs_password_login").await.unwrap().expect("a live login");
        assert_eq!(
            (l.caller.name.as_str(), l.caller.role, l.csrf.as_str(), l.bootstrap_key),
            ("cleo", Role::User, "csrf_a", None),
            "{url}"
        );
        assert!(st.login("tgs_expired").await.unwrap().is_none(), "expired: {url}");
        assert!(st.login("tgs_unknown").await.unwrap().is_none());
        // Only digests are stored: the token itself appears nowhere.
        if url.starts_with("sqlite:") {
            let file = std::fs::read(url.trim_start_matches("sqlite:")).unwrap_or_default();
            let wal = std::fs::read(format!("{}-wal", url.trim_start_matches("sqlite:"))).unwrap_or_default();
            for bytes in [file, wal] {
                assert!(!bytes.windows(18).any(|w| w == b"tgs_password_login"), "the token is stored in clear");
            }
        }
        // Revoking the key ends the login made with it (whatever revoked it), not the password login.
        assert!(st.login("tgs_key_login").await.unwrap().is_some());
        assert!(st.revoke_key(&info.id).await.unwrap());
        assert!(st.login("tgs_key_login").await.unwrap().is_none(), "{url}");
        assert_eq!(st.delete_logins_of_key(&info.id).await.unwrap(), 1, "{url}");
        assert!(st.login("tgs_password_login").await.unwrap().is_some());
        // Retention removes expired ones; logout removes a live one.
        st.enforce_retention(0, 0, 0).await.unwrap();
        assert!(st.delete_login("tgs_password_login").await.unwrap());
        assert!(!st.delete_login("tgs_password_login").await.unwrap());
    }
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

/// Issue 27, finding 4: a console login made with a key revoked through the CLI kept working for
/// up to 12 h, and so did one made with a bootstrap key removed across a restart. A login lives only
/// as long as the key it was made with, whatever ends the key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_console_login_ends_with_its_key_whatever_revokes_it() {
    let tmp = tempfile::tempdir().unwrap();
    for url in state_urls(tmp.path(), "login_keys").await {
        let st = Arc::new(StateStore::open(&url, 4).await.unwrap());
        let keys = users(&st).await;
        let sub = tmp.path().join(format!("d{}", url.len()));
        std::fs::create_dir_all(&sub).unwrap();
        let (base, d, stop, server) = daemon_on(&sub, st.clone(), ApiKeys::new(["boot-key-1"]), |_| {}).await;
        let http = reqwest::Client::new();
        let login = |key: String| {
            let (http, base) = (http.clone(), base.clone());
            async move {
                let r = http.post(format!("{base}/v1/login")).json(&json!({"api_key": key})).send().await.unwrap();
                assert_eq!(r.status(), 200);
                let set = r.headers().get("set-cookie").unwrap().to_str().unwrap().to_string();
                set.split(';').next().unwrap().to_string()
            }
        };
        let me = |cookie: String, base: String| {
            let http = http.clone();
            async move { http.get(format!("{base}/v1/me")).header("cookie", cookie).send().await.unwrap().status().as_u16() }
        };
        let ana_login = login(keys.ana.clone()).await;
        let boot_login = login("boot-key-1".into()).await;
        let ben_login = login(keys.ben.clone()).await;
        assert_eq!(me(ana_login.clone(), base.clone()).await, 200);
        assert_eq!(me(boot_login.clone(), base.clone()).await, 200);
        // Ana's key revoked by the CLI (`toolgraph users revoke-key`), not through the daemon.
        let ana = st.user_by_name("ana").await.unwrap().unwrap();
        let kid = st.keys(Some(&ana.id)).await.unwrap()[0].id.clone();
        let out =
            common::bin().env("TOOLGRAPH__STATE__URL", &url).args(["users", "revoke-key", &kid]).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(me(ana_login.clone(), base.clone()).await, 401, "the login ends with its key");
        assert_eq!(me(ben_login.clone(), base.clone()).await, 200, "other logins go on");
        stop_daemon(d, stop, server).await;
        // Restarted without boot-key-1: the login made with it ends; with it kept, it would go on.
        let (base2, d2, stop2, server2) = daemon_on(&sub, st.clone(), ApiKeys::new(["boot-key-2"]), |_| {}).await;
        assert_eq!(me(boot_login.clone(), base2.clone()).await, 401, "a removed bootstrap key ends its logins");
        assert_eq!(me(ben_login.clone(), base2.clone()).await, 200);
        stop_daemon(d2, stop2, server2).await;
        let (base3, d3, stop3, server3) =
            daemon_on(&sub, st.clone(), ApiKeys::new(["boot-key-2", "boot-key-1"]), |_| {}).await;
        assert_eq!(me(boot_login, base3).await, 200, "a kept bootstrap key keeps its logins");
        stop_daemon(d3, stop3, server3).await;
    }
}

/// An HTTP/1.1 server on 127.0.0.1 for the tests' own tools: each request's head (request line and
/// headers, as text) goes to `answer`, which gives (status line, content type, body).
async fn raw_http(
    answer: impl Fn(&str) -> (&'static str, &'static str, String) + Send + Sync + 'static,
) -> std::net::SocketAddr {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let answer = Arc::new(answer);
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else { return };
            let answer = answer.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match sock.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let (status, content_type, body) = answer(&String::from_utf8_lossy(&buf));
                let resp = format!("HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}", body.len());
                let _ = sock.write_all(resp.as_bytes()).await;
            });
        }
    });
    addr
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

/// Issue 27, finding 12: user names took homoglyphs and case variants of existing names, tool
/// names zero-width and right-to-left characters, and logout needed no CSRF token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_people_read_cannot_impersonate_and_logout_needs_the_csrf_token() {
    let tmp = tempfile::tempdir().unwrap();
    let url = state_urls(tmp.path(), "names").await.remove(0);
    let st = Arc::new(StateStore::open(&url, 4).await.unwrap());
    let k = users(&st).await;
    let http = reqwest::Client::new();
    let (base, d, stop, server) = daemon_on(tmp.path(), st.clone(), ApiKeys::default(), |_| {}).await;
    for (name, want, code) in [
        ("adm\u{0456}n", "ASCII", 400),
        ("ROOT", "`root` exists already", 409),
        ("Ana", "`ana` exists already", 409),
        ("r\u{200B}oot", "ASCII", 400),
    ] {
        let r = post(&http, &format!("{base}/v1/users"), &k.admin, json!({"name": name, "role": "admin"})).await;
        let status = r.status().as_u16();
        let body = r.text().await.unwrap();
        assert!(status == code && body.contains(want), "{name:?}: {status} {body}");
    }
    assert_eq!(
        post(&http, &format!("{base}/v1/users"), &k.admin, json!({"name": "dora.k-2@ops", "role": "user"}))
            .await
            .status(),
        201
    );
    for (field, value) in
        [("name", "current\u{200B}weather"), ("tool", "\u{202E}rehtaeW"), ("description", "Weather\u{2066} for a city")]
    {
        let mut tool = weather_tool("http://127.0.0.1:9");
        tool[field] = json!(value);
        let r = post(&http, &format!("{base}/v1/tools"), &k.admin, tool).await;
        let status = r.status().as_u16();
        let body = r.text().await.unwrap();
        assert!(status == 400 || status == 422, "{field}: {status} {body}");
        assert!(body.contains(field) && body.contains("invisible or text-reordering"), "{field}: {body}");
    }
    // Logout is a state-changing request of the login: it needs the login's CSRF token.
    let r = http.post(format!("{base}/v1/login")).json(&json!({"api_key": k.ana})).send().await.unwrap();
    let cookie = r.headers().get("set-cookie").unwrap().to_str().unwrap().split(';').next().unwrap().to_string();
    let csrf = r.json::<Value>().await.unwrap()["csrf_token"].as_str().unwrap().to_string();
    let me = || http.get(format!("{base}/v1/me")).header("cookie", &cookie).send();
    let r = http.post(format!("{base}/v1/logout")).header("cookie", &cookie).send().await.unwrap();
    assert_eq!(r.status(), 403, "{}", r.text().await.unwrap());
    assert_eq!(me().await.unwrap().status(), 200, "a forged logout ends nothing");
    let r = http
        .post(format!("{base}/v1/logout"))
        .header("cookie", &cookie)
        .header("x-csrf-token", &csrf)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    assert_eq!(me().await.unwrap().status(), 401);
    stop_daemon(d, stop, server).await;
}

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

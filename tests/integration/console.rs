//! The web console: the page and its assets served by the daemon, the login that becomes an
//! HttpOnly / SameSite=Strict cookie with CSRF protection, the read views the console uses
//! (categories, API lists, graph neighbourhoods, memory, settings, chain checks, dry-run
//! registration and OpenAPI preview) — and, with `TOOLGRAPH_BROWSER_TESTS=1` (`scripts/test.sh`
//! sets it), the console in Debian's Chromium driven by playwright-core (console/e2e) against the
//! real binary, the replay sandbox over ComplexFuncBench and a user with a password.

use serde_json::{json, Value};
use std::process::{Command, Stdio};
use std::sync::Arc;
use toolgraph_sandbox::{self as sandbox, Faults, Library, Sandbox};
use toolgraph_server::daemon::limits::ApiKeys;
use toolgraph_server::state::{Role, StateStore};

use crate::common;
use crate::daemon_common::*;

fn session_cookie(r: &reqwest::Response) -> (String, String) {
    let set = r.headers().get("set-cookie").expect("a Set-Cookie header").to_str().unwrap().to_string();
    let token = set.split(';').next().unwrap().strip_prefix("tg_session=").expect("the console's cookie").to_string();
    (token, set)
}

/// The page: the built console (embedded in the binary), or a page that says how to build it;
/// everything the console calls is in the API's document.
async fn the_page_and_its_document(http: &reqwest::Client, url: &str) {
    let page = http.get(format!("{url}/")).send().await.unwrap();
    let csp =
        page.headers().get("content-security-policy").map(|v| v.to_str().unwrap().to_string()).unwrap_or_default();
    assert!(csp.contains("default-src 'self'") && csp.contains("frame-ancestors 'none'"), "{csp}");
    if toolgraph_server::daemon::console::built() {
        assert_eq!(page.status(), 200);
        let html = page.text().await.unwrap();
        assert!(html.contains("<div id=\"app\""), "{html}");
        assert!(!html.contains("http://") && !html.contains("https://"), "no outside URL in the page: {html}");
        let asset = html.split("src=\"").nth(1).and_then(|s| s.split('"').next()).expect("a script asset");
        let a = http.get(format!("{url}{asset}")).send().await.unwrap();
        assert_eq!(a.status(), 200, "{asset}");
        assert!(a.headers()["cache-control"].to_str().unwrap().contains("immutable"));
        assert!(a.headers()["content-type"].to_str().unwrap().starts_with("text/javascript"));
    } else {
        assert_eq!(page.status(), 503);
        assert!(page.text().await.unwrap().contains("bash scripts/console.sh build"));
    }
    error_of(http.get(format!("{url}/assets/nope.js")).send().await.unwrap(), 404, "not_found").await;
    // Everything the console calls is in the API's document.
    let doc: Value = http.get(format!("{url}/openapi.json")).send().await.unwrap().json().await.unwrap();
    for p in [
        "/",
        "/v1/login",
        "/v1/logout",
        "/v1/categories",
        "/v1/tools",
        "/v1/graph/neighborhood",
        "/v1/memory",
        "/v1/memory/{id}",
        "/v1/settings",
        "/v1/chains/check",
        "/v1/chains",
        "/v1/runs",
        "/v1/users",
    ] {
        assert!(doc["paths"][p].is_object(), "{p} is not documented");
    }
    assert!(
        doc["paths"]["/v1/tools"]["get"].is_object()
            && doc["components"]["securitySchemes"]["consoleCookie"]["in"] == "cookie"
    );
}

/// Register the weather API with a login: a dry run shows the test call and writes nothing, then
/// it is admitted and a chain of it saved.
async fn a_login_registers_a_tool_and_saves_a_chain(
    http: &reqwest::Client,
    url: &str,
    cookie: &str,
    csrf: &str,
    sb_addr: std::net::SocketAddr,
) {
    let tool = weather_tool(&format!("http://{sb_addr}"));
    let dry = http
        .post(format!("{url}/v1/tools?dry_run=true"))
        .header("cookie", cookie)
        .header("x-csrf-token", csrf)
        .json(&tool)
        .send()
        .await
        .unwrap();
    assert_eq!(dry.status(), 200);
    let dry: Value = dry.json().await.unwrap();
    assert_eq!(dry["test_call"]["status"], 200, "{dry}");
    assert_eq!(dry["test_call"]["response"]["data"]["city"], "Paris", "{dry}");
    error_of(
        http.get(format!("{url}/v1/tools/weather/weather_example/current_weather"))
            .header("cookie", cookie)
            .send()
            .await
            .unwrap(),
        404,
        "not_found",
    )
    .await;
    let admitted = http
        .post(format!("{url}/v1/tools"))
        .header("cookie", cookie)
        .header("x-csrf-token", csrf)
        .json(&tool)
        .send()
        .await
        .unwrap();
    assert_eq!(admitted.status(), 201);
    let id = admitted.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_string();
    let saved = http
        .post(format!("{url}/v1/chains"))
        .header("cookie", cookie)
        .header("x-csrf-token", csrf)
        .json(&json!({"name": "weather", "steps": [{"api": id, "arguments": {"city": "Paris"}}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(saved.status(), 201);
}

/// Guessing passwords: after ten tries from one address the daemon answers 429 with
/// Retry-After, even for the right password.
async fn guessing_passwords_is_limited(http: &reqwest::Client, url: &str) {
    let mut limited = None;
    for i in 0..12 {
        let r = http
            .post(format!("{url}/v1/login"))
            .json(&json!({"name": "ada", "password": format!("guess {i}")}))
            .send()
            .await
            .unwrap();
        if r.status() == 429 {
            limited = Some(r);
            break;
        }
        assert_eq!(r.status(), 401);
    }
    let r = limited.expect("429 after ten attempts");
    assert!(r.headers().get("retry-after").is_some());
    error_of(
        http.post(format!("{url}/v1/login"))
            .json(&json!({"name": "ada", "password": "correct horse battery"}))
            .send()
            .await
            .unwrap(),
        429,
        "rate_limited",
    )
    .await;
}

/// Wrong password, unknown user: the same refusal; a missing password is a bad request.
async fn wrong_logins_are_refused_alike(http: &reqwest::Client, url: &str) {
    error_of(
        http.post(format!("{url}/v1/login")).json(&json!({"name": "ada", "password": "wrong"})).send().await.unwrap(),
        401,
        "invalid_login",
    )
    .await;
    error_of(
        http.post(format!("{url}/v1/login"))
            .json(&json!({"name": "nobody", "password": "wrong"}))
            .send()
            .await
            .unwrap(),
        401,
        "invalid_login",
    )
    .await;
    error_of(
        http.post(format!("{url}/v1/login")).json(&json!({"name": "ada"})).send().await.unwrap(),
        400,
        "invalid_request",
    )
    .await;
}

/// State-changing requests need the token: none, or a wrong one, is 403.
async fn changes_need_the_csrf_token(http: &reqwest::Client, url: &str, cookie: &str, chain: &Value) {
    error_of(
        http.post(format!("{url}/v1/chains")).header("cookie", cookie).json(chain).send().await.unwrap(),
        403,
        "csrf_failed",
    )
    .await;
    error_of(
        http.post(format!("{url}/v1/chains"))
            .header("cookie", cookie)
            .header("x-csrf-token", "csrf_0000")
            .json(chain)
            .send()
            .await
            .unwrap(),
        403,
        "csrf_failed",
    )
    .await;
}

/// A login with a key has the user's own role (ben is no administrator); revoking that key ends
/// the logins made with it, and ben's password login stays.
async fn a_key_login_has_its_users_role_and_ends_with_the_key(
    http: &reqwest::Client,
    url: &str,
    state: &StateStore,
    ben: &toolgraph_server::state::User,
    ben_key: &str,
    cookie: &str,
    csrf: &str,
) {
    let kl = http.post(format!("{url}/v1/login")).json(&json!({"api_key": ben_key})).send().await.unwrap();
    assert_eq!(kl.status(), 200);
    let (ben_token, _) = session_cookie(&kl);
    error_of(
        http.get(format!("{url}/v1/settings"))
            .header("cookie", format!("tg_session={ben_token}"))
            .send()
            .await
            .unwrap(),
        403,
        "forbidden",
    )
    .await;
    error_of(
        http.get(format!("{url}/v1/memory")).header("cookie", format!("tg_session={ben_token}")).send().await.unwrap(),
        403,
        "forbidden",
    )
    .await;
    // Revoking that key ends the logins made with it; ben's password login stays.
    let pw = http
        .post(format!("{url}/v1/login"))
        .json(&json!({"name": "ben", "password": "ben's password"}))
        .send()
        .await
        .unwrap();
    let (ben_pw_token, _) = session_cookie(&pw);
    let key_id = state.keys(Some(&ben.id)).await.unwrap()[0].id.clone();
    assert_eq!(
        http.delete(format!("{url}/v1/keys/{key_id}"))
            .header("cookie", cookie)
            .header("x-csrf-token", csrf)
            .send()
            .await
            .unwrap()
            .status(),
        204
    );
    error_of(
        http.get(format!("{url}/v1/me")).header("cookie", format!("tg_session={ben_token}")).send().await.unwrap(),
        401,
        "login_expired",
    )
    .await;
    let me: Value = http
        .get(format!("{url}/v1/me"))
        .header("cookie", format!("tg_session={ben_pw_token}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(me["name"], "ben");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_is_served_and_its_login_is_a_csrf_protected_cookie_session() {
    let dir = tempfile::tempdir().unwrap();
    let sb = Sandbox::new(Library::new(weather_recordings()), Faults::default());
    let (sb_addr, _sb_stop) = sandbox::spawn("127.0.0.1:0", sb).await.unwrap();
    let state = Arc::new(StateStore::memory().await.unwrap());
    let b = empty_stack(dir.path(), embedder(), exec_to(None, true), |_| {}).await;
    let (url, _d, _stop, _h) = start_on(b, Some(state.clone()), ApiKeys::default()).await;
    let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();

    the_page_and_its_document(&http, &url).await;

    // No keys and no passwords: a local daemon needs no login.
    let r: Value = http
        .post(format!("{url}/v1/login"))
        .json(&json!({"name": "x", "password": "y"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(r["login_required"], false, "{r}");
    assert_eq!(r["user"]["role"], "admin");

    // A user with a password (over the API): from now on a login or a key is required.
    let made = http
        .post(format!("{url}/v1/users"))
        .json(&json!({"name": "ada", "role": "admin", "password": "correct horse battery"}))
        .send()
        .await
        .unwrap();
    assert_eq!(made.status(), 201);
    let ben = state
        .add_user("ben", Role::User, Some(toolgraph_server::state::secrets::hash_password("ben's password").unwrap()))
        .await
        .unwrap();
    let (_, ben_key) = state.add_key(&ben.id, "test", None).await.unwrap();
    error_of(http.get(format!("{url}/v1/me")).send().await.unwrap(), 401, "missing_api_key").await;

    wrong_logins_are_refused_alike(&http, &url).await;
    let ok = http
        .post(format!("{url}/v1/login"))
        .json(&json!({"name": "ada", "password": "correct horse battery"}))
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    let (token, set) = session_cookie(&ok);
    for attr in ["HttpOnly", "SameSite=Strict", "Path=/", "Max-Age=43200"] {
        assert!(set.contains(attr), "{set}");
    }
    assert!(!set.contains("Secure"), "plain HTTP on loopback: {set}");
    let body: Value = ok.json().await.unwrap();
    let csrf = body["csrf_token"].as_str().unwrap().to_string();
    assert_eq!(body["user"]["name"], "ada");
    let cookie = format!("tg_session={token}");

    // The cookie authenticates; /v1/me gives the CSRF token back to a reloaded page.
    let me: Value =
        http.get(format!("{url}/v1/me")).header("cookie", &cookie).send().await.unwrap().json().await.unwrap();
    assert_eq!((me["name"].as_str(), me["csrf_token"].as_str()), (Some("ada"), Some(csrf.as_str())));
    let chain = json!({"name": "weather", "steps": [{"api": "weather/weather_example/current_weather"}]});
    changes_need_the_csrf_token(&http, &url, &cookie, &chain).await;
    // With it, the request is handled (the API does not exist yet: the chain is refused by name).
    let e = error_of(
        http.post(format!("{url}/v1/chains"))
            .header("cookie", &cookie)
            .header("x-csrf-token", &csrf)
            .json(&chain)
            .send()
            .await
            .unwrap(),
        422,
        "invalid_chain",
    )
    .await;
    assert!(e["message"].as_str().unwrap().contains("current_weather"), "{e}");
    a_login_registers_a_tool_and_saves_a_chain(&http, &url, &cookie, &csrf, sb_addr).await;

    // A key still works without any token (API clients are not browsers).
    let mine: Value =
        http.get(format!("{url}/v1/chains")).bearer_auth(&ben_key).send().await.unwrap().json().await.unwrap();
    assert_eq!(mine["chains"].as_array().unwrap().len(), 0, "ben sees only his own");
    a_key_login_has_its_users_role_and_ends_with_the_key(&http, &url, &state, &ben, &ben_key, &cookie, &csrf).await;

    // Logout (with the login's CSRF token, like every state-changing request of a login) ends the
    // login everywhere (the row is gone, not just the cookie).
    let out = http
        .post(format!("{url}/v1/logout"))
        .header("cookie", &cookie)
        .header("x-csrf-token", &csrf)
        .send()
        .await
        .unwrap();
    assert_eq!(out.status(), 204);
    assert!(out.headers()["set-cookie"].to_str().unwrap().contains("Max-Age=0"));
    error_of(http.get(format!("{url}/v1/me")).header("cookie", &cookie).send().await.unwrap(), 401, "login_expired")
        .await;
    assert!(state.login(&token).await.unwrap().is_none());

    guessing_passwords_is_limited(&http, &url).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_views_list_apis_neighbourhoods_memory_and_check_chains() {
    let dir = tempfile::tempdir().unwrap();
    let sb = Sandbox::new(Library::new(weather_recordings()), Faults::default());
    let (sb_addr, _sb_stop) = sandbox::spawn("127.0.0.1:0", sb).await.unwrap();
    let mut b = empty_stack(dir.path(), embedder(), exec_to(None, true), |_| {}).await;
    b.settings.run.learn = true;
    b.settings.run.remember = true;
    let (url, d, _stop, _h) = start(b, ApiKeys::default()).await;
    let http = crate::common::http_client(crate::common::REQUEST_LIMIT);
    let base = format!("http://{sb_addr}");
    let current = http.post(format!("{url}/v1/tools")).json(&weather_tool(&base)).send().await.unwrap();
    assert_eq!(current.status(), 201);
    let forecast = json!({"name": "forecast", "description": "Weather forecast for the next days of a city", "tool": "Weather Example", "category": "Weather", "url": format!("{base}/weather.example.com/forecast"),
        "parameters": [{"name": "city", "type": "string", "required": true}, {"name": "days", "type": "integer", "required": true}], "example": {"city": "Oslo", "days": 2}});
    assert_eq!(http.post(format!("{url}/v1/tools")).json(&forecast).send().await.unwrap().status(), 201);

    let cats: Value = http.get(format!("{url}/v1/categories")).send().await.unwrap().json().await.unwrap();
    assert_eq!(cats["categories"], json!([{"id": "weather", "name": "Weather", "tools": 1, "apis": 2}]), "{cats}");
    let list: Value =
        http.get(format!("{url}/v1/tools?category=weather&limit=1")).send().await.unwrap().json().await.unwrap();
    assert_eq!((list["total"].as_u64(), list["apis"].as_array().unwrap().len()), (Some(2), 1), "{list}");
    assert_eq!(list["tools"], json!([{"id": "weather/weather_example", "name": "Weather Example", "apis": 2}]));
    let page2: Value = http
        .get(format!("{url}/v1/tools?tool=Weather%20Example&offset=1&limit=1"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(page2["apis"][0]["name"], "forecast", "{page2}");
    let q: Value = http.get(format!("{url}/v1/tools?q=next%20days")).send().await.unwrap().json().await.unwrap();
    assert_eq!(q["total"], 1, "{q}");
    error_of(http.get(format!("{url}/v1/tools?limit=0")).send().await.unwrap(), 400, "invalid_request").await;

    // Ask twice: the runs teach the graph; START's neighbourhood then has the weather API.
    let r: Value = orchestrate(&http, &url, None, &json!({"request": "What is the weather in Paris right now?"})).await;
    assert_eq!(r["status"], "answered", "{r}");
    // The conversation is listed with its first request and last status.
    let sessions: Value = http.get(format!("{url}/v1/sessions")).send().await.unwrap().json().await.unwrap();
    assert_eq!(sessions["sessions"].as_array().unwrap().len(), 1, "{sessions}");
    assert_eq!(sessions["sessions"][0]["title"], "What is the weather in Paris right now?");
    assert_eq!(sessions["sessions"][0]["last_status"], "answered");
    assert_eq!(sessions["sessions"][0]["session_id"], r["session_id"]);
    // Each call in the trace says where its arguments came from.
    let run: Value = http
        .get(format!("{url}/v1/runs/{}", r["run_id"].as_str().unwrap()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let call = run["trace"].as_array().unwrap().iter().find(|s| s["type"] == "call").expect("a call step").clone();
    assert_eq!(call["sources"]["city"]["from"], "request", "{call}");
    d.refresh_graph().await.unwrap();
    let n: Value =
        http.get(format!("{url}/v1/graph/neighborhood?id=START&k=5")).send().await.unwrap().json().await.unwrap();
    let to: Vec<&str> = n["edges"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "NEXT" && e["from"] == "START")
        .map(|e| e["to"].as_str().unwrap())
        .collect();
    assert!(to.contains(&"weather/weather_example/current_weather"), "{n}");
    let e =
        n["edges"].as_array().unwrap().iter().find(|e| e["to"] == "weather/weather_example/current_weather").unwrap();
    assert!(e["static_weight"].as_f64().unwrap() > 0.0 && e["dynamic_weight"].as_f64().is_some(), "{e}");
    assert!(n["nodes"].as_array().unwrap().iter().any(|x| x["id"] == "START" && x["kind"] == "terminal"));
    let api_n: Value = http
        .get(format!("{url}/v1/graph/neighborhood?id=weather/weather_example/current_weather"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(api_n["edges"].as_array().unwrap().iter().any(|e| e["from"] == "START"), "predecessors too: {api_n}");
    error_of(http.get(format!("{url}/v1/graph/neighborhood?id=no/such/api")).send().await.unwrap(), 404, "not_found")
        .await;

    // Memory: the judged-good run is stored; it can be found and deleted.
    let mem: Value = http.get(format!("{url}/v1/memory?q=paris")).send().await.unwrap().json().await.unwrap();
    assert_eq!(mem["total"], 1, "{mem}");
    assert_eq!(mem["entries"][0]["chain"][0]["api"], "weather/weather_example/current_weather");
    let none: Value = http.get(format!("{url}/v1/memory?q=oslo")).send().await.unwrap().json().await.unwrap();
    assert_eq!(none["total"], 0);
    let mid = mem["entries"][0]["id"].as_str().unwrap();
    assert_eq!(http.delete(format!("{url}/v1/memory/{mid}")).send().await.unwrap().status(), 204);
    error_of(http.delete(format!("{url}/v1/memory/{mid}")).send().await.unwrap(), 404, "not_found").await;
    let after: Value = http.get(format!("{url}/v1/memory")).send().await.unwrap().json().await.unwrap();
    assert_eq!(after["total"], 0);

    // Chain check: valid chains name their steps' outputs; a bad literal names its step.
    let ok: Value = http.post(format!("{url}/v1/chains/check")).json(&json!({"steps": [{"api": "weather/weather_example/current_weather", "arguments": {"city": "Paris"}}, {"api": "weather/weather_example/forecast", "arguments": {"city": "$var1.data.city$", "days": 2}}]})).send().await.unwrap().json().await.unwrap();
    assert_eq!(ok["valid"], true, "{ok}");
    assert!(ok["outputs"]["var1"].as_array().unwrap().iter().any(|f| f == "data.city"), "{ok}");
    let bad = error_of(http.post(format!("{url}/v1/chains/check")).json(&json!({"steps": [{"api": "weather/weather_example/forecast", "arguments": {"city": "Paris", "days": "two"}}]})).send().await.unwrap(), 422, "invalid_chain").await;
    assert!(bad["message"].as_str().unwrap().contains("step 1"), "{bad}");

    // Settings: run defaults and backends, no secrets.
    let s: Value = http.get(format!("{url}/v1/settings")).send().await.unwrap().json().await.unwrap();
    assert_eq!(s["graph"], "embedded");
    assert!(s["run"]["top_k"].as_u64().is_some(), "{s}");

    openapi_import_previews_then_admits(&http, &url, &base).await;
}

/// OpenAPI: a dry run lists the operations; `only` admits the chosen ones.
async fn openapi_import_previews_then_admits(http: &reqwest::Client, url: &str, base: &str) {
    let doc = json!({"openapi": "3.0.0", "info": {"title": "Weather Example", "version": "1"}, "servers": [{"url": format!("{base}/weather.example.com")}],
        "paths": {"/current": {"get": {"operationId": "now", "summary": "Current weather of a city", "parameters": [{"name": "city", "in": "query", "required": true, "schema": {"type": "string"}, "example": "Paris"}]}},
                  "/forecast": {"get": {"operationId": "days", "summary": "Forecast of a city", "parameters": [{"name": "city", "in": "query", "required": true, "schema": {"type": "string"}, "example": "Oslo"}, {"name": "days", "in": "query", "required": true, "schema": {"type": "integer"}, "example": 2}]}}}});
    let preview: Value = http
        .post(format!("{url}/v1/tools/import-openapi?dry_run=true&category=Imported"))
        .json(&doc)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let ops: Vec<&str> =
        preview["operations"].as_array().unwrap().iter().map(|o| o["operation"].as_str().unwrap()).collect();
    assert_eq!(ops.len(), 2, "{preview}");
    let cats: Value = http.get(format!("{url}/v1/categories")).send().await.unwrap().json().await.unwrap();
    assert_eq!(cats["categories"].as_array().unwrap().len(), 1, "a dry run writes nothing");
    let only = ops.iter().find(|o| o.contains("current")).unwrap();
    let imported: Value = http
        .post(format!("{url}/v1/tools/import-openapi?category=Imported&only={}", only.replace(' ', "%20")))
        .json(&doc)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(imported["admitted"].as_array().unwrap().len(), 1, "{imported}");
    assert!(imported["skipped"].as_array().unwrap().iter().any(|s| s["code"] == "not_selected"), "{imported}");
}

/// The console in a real browser (console/e2e/console.test.mjs). Runs when
/// `TOOLGRAPH_BROWSER_TESTS=1`; then Chromium, Node.js and the console's node_modules must be there
/// (`bash scripts/console.sh browser` and `bash scripts/console.sh build`) and the console built
/// into this binary.
#[test]
fn the_console_in_chromium_asks_answers_registers_edits_and_draws_the_graph() {
    if std::env::var("TOOLGRAPH_BROWSER_TESTS").as_deref() != Ok("1") {
        eprintln!("browser tests skipped: set TOOLGRAPH_BROWSER_TESTS=1 (scripts/test.sh does)");
        return;
    }
    let root = common::root();
    assert!(
        toolgraph_server::daemon::console::built(),
        "the console is not built into this binary: bash scripts/console.sh build, then rebuild"
    );
    assert!(
        root.join("console/node_modules/playwright-core").is_dir(),
        "console/node_modules missing: bash scripts/console.sh build"
    );
    let chromium = std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    assert!(std::path::Path::new(&chromium).exists(), "{chromium} missing: bash scripts/console.sh browser");

    let dir = tempfile::tempdir().unwrap();
    let d = common::data().join("complexfuncbench");
    let runs = dir.path().join("cfb.jsonl");
    let tools = dir.path().join("cfb-tools.jsonl");
    let store = format!("embedded:{}", dir.path().join("graph.redb").display());
    let state_url = format!("sqlite:{}", dir.path().join("state.db").display());
    let with_state = |mut c: Command| {
        c.env("TOOLGRAPH__STATE__URL", &state_url);
        c
    };
    common::run_ok(
        common::bin()
            .args(["convert", "complexfuncbench", "--data"])
            .arg(d.join("data.json.gz"))
            .arg("--spec")
            .arg(d.join("spec.json.gz"))
            .arg("--out")
            .arg(&runs)
            .arg("--tools-out")
            .arg(&tools),
    );
    common::run_ok(
        common::bin_in(dir.path())
            .args(["--store", &store, "ingest", "--tools"])
            .arg(&tools)
            .arg("--trajectories")
            .arg(&runs),
    );
    // An administrator with a password, made the way operators do it.
    let password = "console test password";
    let mut add = with_state(common::bin_in(dir.path()));
    let mut child = add
        .args(["users", "add", "ada", "--role", "admin", "--password-stdin"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        child.stdin.take().unwrap().write_all(format!("{password}\n").as_bytes()).unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "users add: {}", String::from_utf8_lossy(&out.stderr));

    // Each server picks its own port and says which (no port chosen before it is bound).
    let (_sandbox, sb_port) = common::sandbox_process();
    let mut serve = with_state(common::bin_in(dir.path()));
    serve
        .env("TOOLGRAPH_LOG", "info")
        .args(["--store", &store, "serve", "--port", "0", "--rewrite"])
        .arg(format!("https://=http://127.0.0.1:{sb_port}/"));
    let (_daemon, port) = common::spawn_listening(serve, "toolgraph daemon on", Some(&dir.path().join("daemon.log")));

    let shots = std::env::var("TOOLGRAPH_SHOTS_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| root.join("target/console-shots"));
    let status = Command::new("node")
        .args(["--test", "--test-concurrency=1", "--test-reporter=spec", "e2e/"])
        .current_dir(root.join("console"))
        .env("TG_URL", format!("http://127.0.0.1:{port}"))
        .env("TG_USER", "ada")
        .env("TG_PASSWORD", password)
        .env("TG_SHOTS", &shots)
        .env("CHROMIUM", &chromium)
        .status()
        .expect("node runs (Node.js 20+)");
    if !status.success() {
        let log = std::fs::read_to_string(dir.path().join("daemon.log")).unwrap_or_default();
        let tail: String =
            log.lines().rev().take(40).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("\n");
        panic!(
            "the browser tests failed ({status}); screenshots in {}; the daemon's last log lines:\n{tail}",
            shots.display()
        );
    }
    eprintln!("console screenshots: {}", shots.display());
}

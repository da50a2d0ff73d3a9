//! toolgraph as an MCP server, driven by a real client: the official Python SDK (`mcp` 2.3.0 from
//! PyPI, in tests/mcp/.venv — `scripts/test.sh` makes it) runs tests/mcp/client.py against
//! `toolgraph mcp` (stdio) and the daemon's `/mcp` (Streamable HTTP, with an API key): the five
//! tools, a ComplexFuncBench request orchestrated against the replay sandbox with a progress
//! notification per step, its chain executed again as written, runs as resources, and `needs_input` answered through elicitation —
//! as an `input_required` result (protocol 2026-07-28) and as `elicitation/create` (the
//! 2025-11-25 handshake) — or returned as a result to a client that cannot be asked.

use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::Command;

use crate::common::{self, Proc};

/// A request of ComplexFuncBench's (the replay sandbox has its calls) and one that lacks a value.
const REQUEST: &str = "Today is October 13th, 2024. I want to rent a car for a day at the San Diego Marriott La Jolla. Could you compare the price differences for picking up the car at 8 AM tomorrow and the day after tomorrow at the same place for a 24-hour rental?";
const NEEDS: &str = "Show me the policies of the hotel.";
const ANSWER: &str = "1202034";

fn python() -> PathBuf {
    let p = std::env::var_os("TOOLGRAPH_MCP_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| common::root().join("tests/mcp/.venv/bin/python"));
    assert!(p.exists(), "{} missing: python3 -m venv tests/mcp/.venv && tests/mcp/.venv/bin/pip install -r tests/mcp/requirements.txt — scripts/test.sh does", p.display());
    p
}

/// The ComplexFuncBench graph in `dir` and the replay sandbox over its recordings.
struct World {
    dir: tempfile::TempDir,
    store: String,
    state: String,
    sandbox_port: u16,
    _sandbox: Proc,
}

impl World {
    fn new() -> World {
        let dir = tempfile::tempdir().unwrap();
        let d = common::data().join("complexfuncbench");
        let (runs, tools) = (dir.path().join("cfb.jsonl"), dir.path().join("cfb-tools.jsonl"));
        let store = format!("embedded:{}", dir.path().join("graph.redb").display());
        let state = format!("sqlite:{}", dir.path().join("state.db").display());
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
        let (sandbox, sandbox_port) = common::sandbox_process();
        World { dir, store, state, sandbox_port, _sandbox: sandbox }
    }

    fn rewrite(&self) -> String {
        format!("https://=http://127.0.0.1:{}/", self.sandbox_port)
    }

    /// `toolgraph` with this world's stores.
    fn bin(&self) -> Command {
        let mut c = common::bin_in(self.dir.path());
        c.env("TOOLGRAPH__STATE__URL", &self.state).args(["--store", &self.store]);
        c
    }

    /// The environment `toolgraph mcp` gets from the client (only what it needs).
    fn env(&self) -> Value {
        let path = self.dir.path();
        json!({
            "PATH": std::env::var("PATH").unwrap_or_default(),
            "HOME": std::env::var("HOME").unwrap_or_default(),
            "TOOLGRAPH_LOG": "warn",
            "TOOLGRAPH__STATE__URL": self.state,
            "TOOLGRAPH__VECTORS__URI": format!("embedded:{}", path.join("vectors").display()),
            "TOOLGRAPH__EMBED__CACHE": path.join("embeddings.redb").display().to_string(),
        })
    }
}

fn drive(config: Value) -> Value {
    drive_logged(config).0
}

/// What the client saw, and its standard error (where a stdio server's log lines go too).
fn drive_logged(config: Value) -> (Value, String) {
    let out = Command::new(python())
        .arg(common::root().join("tests/mcp/client.py"))
        .arg(config.to_string())
        .current_dir(common::root())
        .output()
        .expect("python runs");
    let log = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "the MCP client failed ({}):\n{}", out.status, tail(&log, 60));
    (
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout))),
        log,
    )
}

fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.contains("qdrant_edge")).collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// What every full session must show: the tools, retrieval, a streamed run, its record, the graph
/// around it, runs as resources, and a tool error the model can read.
fn assert_session(o: &Value) {
    assert_eq!(o["server"], "toolgraph");
    assert_eq!(o["tools"], json!(["execute_chain", "get_run", "graph_neighbors", "orchestrate", "search_tools"]));
    let hits = o["search"]["results"].as_array().unwrap();
    assert!(
        hits.iter().take(3).any(|h| h["id"].as_str().unwrap().contains("car")),
        "car APIs found first: {}",
        o["search"]
    );
    assert_eq!(o["search"]["categories"][0]["category"], "Travel", "{}", o["search"]["categories"]);

    let run = &o["orchestrate"];
    assert_eq!(run["status"], "answered", "{run}");
    assert_eq!(o["orchestrate_is_error"], false);
    let chain: Vec<&str> = run["chain"].as_array().unwrap().iter().map(|c| c["api"].as_str().unwrap()).collect();
    assert_eq!(chain.first(), Some(&"travel/booking_com15/search_car_location"), "{chain:?}");
    assert!(chain.contains(&"travel/booking_com15/search_car_rentals"), "{chain:?}");
    // One progress notification per trace step, in order, naming the calls as they happen.
    let progress = o["progress"].as_array().unwrap();
    let messages: Vec<&str> = progress.iter().map(|p| p["message"].as_str().unwrap_or_default()).collect();
    assert!(messages.contains(&"call travel/booking_com15/search_car_location"), "{messages:?}");
    assert!(messages.contains(&"response travel/booking_com15/search_car_rentals HTTP 200"), "{messages:?}");
    let numbers: Vec<f64> = progress.iter().map(|p| p["progress"].as_f64().unwrap()).collect();
    assert!(numbers.windows(2).all(|w| w[0] < w[1]) && numbers.len() >= chain.len() * 2, "{numbers:?}");

    // The same chain, written out and executed as is.
    let replayed = &o["execute_chain"];
    assert_eq!(replayed["status"], "answered", "{replayed}");
    let again: Vec<&str> = replayed["chain"].as_array().unwrap().iter().map(|c| c["api"].as_str().unwrap()).collect();
    assert_eq!(again, chain);
    assert_ne!(replayed["run_id"], run["run_id"]);
    assert!(o["chain_progress"].as_array().unwrap().len() >= chain.len() * 2, "{}", o["chain_progress"]);

    assert_eq!(o["get_run"]["run_id"], run["run_id"]);
    assert_eq!(o["get_run"]["status"], "answered");
    assert_eq!(o["get_run"]["request"], REQUEST);
    assert_eq!(o["neighbors"]["center"], "travel/booking_com15/search_car_location");
    let uri = format!("toolgraph://runs/{}", run["run_id"].as_str().unwrap());
    assert!(o["resources"].as_array().unwrap().contains(&json!(uri)), "{}", o["resources"]);
    assert_eq!(o["resource_status"], "answered");
    assert_eq!(o["bad_is_error"], true);
    assert!(o["bad_text"].as_str().unwrap().starts_with("not_found (HTTP 404)"), "{}", o["bad_text"]);
}

/// The user was asked for exactly the missing values, and the run went on with the answer.
fn assert_elicited(o: &Value) {
    let asked = o["elicited"].as_array().unwrap();
    assert!(!asked.is_empty(), "the client was asked: {}", o["needs"]);
    let props = asked[0]["schema"]["properties"].as_object().unwrap();
    assert!(props.contains_key("hotel_id"), "{}", asked[0]);
    assert!(asked[0]["message"].as_str().unwrap().contains("hotel_id"), "{}", asked[0]);
    // The continued run (same session) used the value the user gave.
    assert_ne!(o["needs"]["status"], "needs_input", "{}", o["needs"]);
    assert!(o["needs_run"].to_string().contains(ANSWER), "the answer reached the calls: {}", o["needs_run"]);
}

#[test]
fn toolgraph_mcp_over_stdio_serves_a_real_client_with_progress_and_elicitation() {
    let w = World::new();
    let mut env = w.env();
    env["TOOLGRAPH_LOG"] = json!("warn,toolgraph_server::daemon=debug");
    let (o, log) = drive_logged(json!({
        "stdio": [env!("CARGO_BIN_EXE_toolgraph"), "--store", w.store, "mcp", "--rewrite", w.rewrite()],
        "env": env,
        "cwd": common::root(),
        "mode": "auto",
        "request": REQUEST, "needs": NEEDS, "answer": ANSWER,
        "linger": 6,
    }));
    // The current protocol: no handshake, elicitation as an input_required result.
    assert_eq!(o["protocol_version"], "2026-07-28");
    assert_session(&o);
    assert_elicited(&o);
    // A long-lived stdio server keeps the daemon's upkeep: the graph the answered runs taught (the
    // store's generation moved) is reloaded while it serves (every 5 s; the session lingers 6 s
    // after its last run).
    assert!(log.contains("reloaded the graph: the store changed"), "{}", tail(&log, 40));
}

#[test]
fn the_daemons_mcp_endpoint_needs_a_key_and_speaks_both_protocol_generations() {
    let w = World::new();
    let out = common::run_ok(w.bin().args(["users", "add", "ada", "--role", "user"]));
    let key = String::from_utf8_lossy(&out.stdout).lines().last().unwrap().trim().to_string();
    assert!(key.len() > 20, "a key was printed");
    let out = common::run_ok(w.bin().args(["users", "add", "ben", "--role", "user"]));
    let ben = String::from_utf8_lossy(&out.stdout).lines().last().unwrap().trim().to_string();
    let mut serve = w.bin();
    serve.args(["serve", "--port", "0", "--rewrite", &w.rewrite()]);
    let (_daemon, port) = common::spawn_listening(serve, "toolgraph daemon on", Some(&w.dir.path().join("daemon.log")));
    let url = format!("http://127.0.0.1:{port}/mcp");
    let log_tail = || tail(&std::fs::read_to_string(w.dir.path().join("daemon.log")).unwrap_or_default(), 30);

    // Without a key: refused before MCP sees anything; with a foreign Host: refused (DNS rebinding).
    let rt = common::runtime();
    rt.block_on(async {
        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
        let http = crate::common::http_client(crate::common::REQUEST_LIMIT);
        let r = http.post(&url).header("accept", "application/json, text/event-stream").json(&init).send().await.unwrap();
        assert_eq!(r.status(), 401);
        let r = http.post(&url).bearer_auth(&key).header("host", "attacker.example").header("accept", "application/json, text/event-stream").json(&init).send().await.unwrap();
        assert_eq!(r.status(), 403, "{}", r.text().await.unwrap_or_default());

        // A session belongs to the user whose key opened it: another user's key naming it gets
        // 404, as for a session that does not exist, and cannot end it.
        let r = http.post(&url).bearer_auth(&key).header("accept", "application/json, text/event-stream").json(&init).send().await.unwrap();
        assert_eq!(r.status(), 200, "{}", log_tail());
        let sid = r.headers().get("mcp-session-id").expect("a session id").to_str().unwrap().to_string();
        drop(r);
        let ping = json!({"jsonrpc": "2.0", "id": 2, "method": "ping"});
        let r = http.post(&url).bearer_auth(&ben).header("mcp-session-id", &sid).header("accept", "application/json, text/event-stream").json(&ping).send().await.unwrap();
        assert_eq!(r.status(), 404, "another user's key used the session");
        let r = http.delete(&url).bearer_auth(&ben).header("mcp-session-id", &sid).send().await.unwrap();
        assert_eq!(r.status(), 404, "another user's key ended the session");
        // Its opener still has it, and ends it.
        let r = http.delete(&url).bearer_auth(&key).header("mcp-session-id", &sid).send().await.unwrap();
        assert!(r.status().is_success(), "the opener could not end its session: {}", r.status());
    });

    // The 2025-11-25 handshake: elicitation/create is a request to the client.
    let o =
        drive(json!({"url": url, "key": key, "mode": "legacy", "request": REQUEST, "needs": NEEDS, "answer": ANSWER}));
    assert_eq!(o["protocol_version"], "2025-11-25", "{}", log_tail());
    assert_session(&o);
    assert_elicited(&o);

    // A client that cannot be asked gets needs_input as the result, to answer with `given`.
    let o = drive(
        json!({"url": url, "key": key, "mode": "auto", "elicit": false, "only_needs": true, "request": REQUEST, "needs": NEEDS, "answer": ANSWER}),
    );
    assert_eq!(o["protocol_version"], "2026-07-28");
    assert!(o["elicited"].as_array().unwrap().is_empty());
    assert_eq!(o["needs"]["status"], "needs_input", "{}", o["needs"]);
    assert!(o["needs"]["needs_input"]["missing"].as_array().unwrap().contains(&json!("hotel_id")), "{}", o["needs"]);
    assert!(o["needs"]["session_id"].as_str().unwrap().starts_with("ses_"));
}

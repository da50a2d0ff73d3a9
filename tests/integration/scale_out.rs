//! Scale-out as production runs it: two `toolgraph serve` processes on one PostgreSQL (the state:
//! runs, sessions, approvals) and one Neo4j (the graph, its counts and the argument model), each
//! with its own embedded vector copy, the replay sandbox as the tools. Learning runs, a session,
//! approvals and streamed runs go to both at once; one daemon is killed with SIGKILL mid-way.
//! Without `TOOLGRAPH_TEST_POSTGRES_URL` (scripts/test.sh sets it) the two share a SQLite file.

use crate::common::*;
use serde_json::{json, Value};
use std::path::Path;
use std::time::{Duration, Instant};

const RENT: &str = "Today is October 13th, 2024. I want to rent a car at the San Diego Marriott La Jolla at 8 AM tomorrow and the day after tomorrow. Show me the cheapest car for each day.";

/// Another domain's request (no car API in its chain).
const FLY: &str = "Find flights from New York to London on December 1st 2024 and hotels near the airport";

/// The argument model's example counter in the store.
const EXAMPLES: &str = r#"arguments/v2/["examples"]"#;

struct Replica {
    proc: Proc,
    url: String,
}

/// The warnings and errors both daemons logged (for a failed assertion's message).
fn logged(dirs: &[&Path]) -> String {
    let lines = |d: &&Path| std::fs::read_to_string(d.join("daemon.log")).unwrap_or_default();
    dirs.iter()
        .map(lines)
        .flat_map(|t| {
            t.lines().filter(|l| l.contains("WARN") || l.contains("ERROR")).map(str::to_string).collect::<Vec<_>>()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A daemon over the shared stores, with its own vectors under `dir`. The long-term memory is off
/// (`run.use_memory`: the ingest remembered the chains; `run.remember`), so every answered run is
/// planned by the search and teaches the argument model.
fn replica(dir: &Path, store: &str, neo: &Neo4jServer, sandbox: u16, state: &str) -> Replica {
    let mut cmd = bin_in(dir);
    neo.env(&mut cmd);
    cmd.env("TOOLGRAPH__STATE__URL", state)
        .env("TOOLGRAPH__SERVER__APPROVAL_LEASE_MS", "1500")
        .env("TOOLGRAPH__RUN__REMEMBER", "false")
        .env("TOOLGRAPH__RUN__USE_MEMORY", "false")
        .args(["--store", store, "serve", "--port", "0", "--rewrite"])
        .arg(format!("https://=http://127.0.0.1:{sandbox}/"));
    let (proc, port) = spawn_listening(cmd, "toolgraph daemon on", Some(&dir.join("daemon.log")));
    Replica { proc, url: format!("http://127.0.0.1:{port}") }
}

/// What the graph learned in all, read from Neo4j (through a daemon's read-only Cypher).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
struct Totals {
    runs: i64,
    calls: i64,
    next: i64,
    examples: i64,
}

async fn totals(http: &reqwest::Client, url: &str) -> Totals {
    let one = |query: &'static str| async move {
        let r: Value = http
            .post(format!("{url}/v1/graph/cypher"))
            .json(&json!({"query": query, "params": {"k": EXAMPLES}}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        r["rows"][0][0].as_i64().unwrap_or_else(|| panic!("{query}: {r}"))
    };
    Totals {
        runs: one("MATCH (r:IngestedRun) WHERE r.key STARTS WITH 'run:' RETURN count(r)").await,
        calls: one("MATCH (a:Api) RETURN sum(a.calls)").await,
        next: one("MATCH ()-[r:NEXT]->() RETURN sum(r.count)").await,
        examples: one("OPTIONAL MATCH (c:Count {key: $k}) RETURN coalesce(c.n, 0)").await,
    }
}

/// What an acknowledged run adds to [`Totals`], from its response.
fn adds(r: &Value) -> Totals {
    let answered = r["status"] == "answered";
    let chain = r["chain"].as_array().map_or(0, Vec::len) as i64;
    Totals {
        runs: 1,
        calls: r["stats"]["http_calls"].as_i64().unwrap(),
        next: if answered { chain + 1 } else { 0 },
        examples: i64::from(answered && !r["judgement"].is_null() && r["stats"]["recalled"] != true),
    }
}

fn sum(rs: &[Value]) -> Totals {
    rs.iter().map(adds).fold(Totals::default(), |t, a| Totals {
        runs: t.runs + a.runs,
        calls: t.calls + a.calls,
        next: t.next + a.next,
        examples: t.examples + a.examples,
    })
}

async fn post(http: &reqwest::Client, url: &str, body: Value) -> (u16, Value) {
    let r = http.post(url).json(&body).send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap())
}

async fn run_status(http: &reqwest::Client, base: &str, run: &str) -> Value {
    http.get(format!("{base}/v1/runs/{run}")).send().await.unwrap().json().await.unwrap()
}

/// Poll `base` for run `run` until `done` holds (at most `secs`).
async fn wait_run(http: &reqwest::Client, base: &str, run: &str, secs: u64, done: impl Fn(&Value) -> bool) -> Value {
    let until = Instant::now() + Duration::from_secs(secs);
    loop {
        let r = run_status(http, base, run).await;
        if done(&r) {
            return r;
        }
        assert!(Instant::now() < until, "run {run} on {base}: {r}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Learning runs sent to both daemons at once all count: the graph's counters and the argument
/// model's grow by the sum of what each run taught (no lost update), and each daemon sees what the
/// other learned within its refresh interval.
async fn learning_runs_on_both_at_once_all_count(
    http: &reqwest::Client,
    a: &str,
    b: &str,
    logs: &[&Path],
) -> Vec<Value> {
    let before = totals(http, a).await;
    let asks: Vec<_> = (0..6)
        .map(|i| {
            let (http, url) = (http.clone(), format!("{}/v1/orchestrate", if i % 2 == 0 { a } else { b }));
            tokio::spawn(async move { post(&http, &url, json!({"request": RENT})).await.1 })
        })
        .collect();
    let mut answers = Vec::new();
    for ask in asks {
        answers.push(ask.await.unwrap());
    }
    for r in &answers {
        assert_eq!(r["status"], "answered", "{r}");
    }
    let want = sum(&answers);
    assert!(want.examples >= 4, "most runs teach the argument model: {answers:?}");
    let after = totals(http, a).await;
    let grew = Totals {
        runs: after.runs - before.runs,
        calls: after.calls - before.calls,
        next: after.next - before.next,
        examples: after.examples - before.examples,
    };
    assert_eq!(grew, want, "the store holds the sum of what both daemons learned; they logged:\n{}", logged(logs));
    // Each daemon's engine reloads what the other learned (its graph and its argument model).
    let api = answers[0]["chain"][0]["api"].as_str().unwrap().to_string();
    let stored: Value = post(
        http,
        &format!("{a}/v1/graph/cypher"),
        json!({"query": "MATCH (x:Api {id: $id}) RETURN x.calls", "params": {"id": api}}),
    )
    .await
    .1;
    let calls = stored["rows"][0][0].as_u64().unwrap();
    for base in [a, b] {
        let until = Instant::now() + Duration::from_secs(10);
        loop {
            let t: Value = http.get(format!("{base}/v1/tools/{api}")).send().await.unwrap().json().await.unwrap();
            if t["calls"].as_u64() == Some(calls) {
                break;
            }
            assert!(Instant::now() < until, "{base} never saw the other daemon's counts: {} of {calls}", t["calls"]);
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    answers
}

/// A session opened on one daemon goes on on the other.
async fn a_session_moves_between_daemons(http: &reqwest::Client, a: &str, b: &str) -> Vec<Value> {
    let first = post(http, &format!("{a}/v1/orchestrate"), json!({"request": RENT})).await.1;
    let session = first["session_id"].as_str().unwrap().to_string();
    let (status, second) =
        post(http, &format!("{b}/v1/orchestrate"), json!({"request": RENT, "session_id": session})).await;
    assert_eq!(status, 200, "{second}");
    assert_eq!(second["session_id"], json!(session));
    let s: Value = http.get(format!("{a}/v1/sessions/{session}")).send().await.unwrap().json().await.unwrap();
    let turns = s["turns"].as_array().unwrap_or_else(|| panic!("{s}"));
    assert_eq!(turns.len(), 2, "both turns, whichever daemon served them: {s}");
    vec![first, second]
}

/// An approval asked for on one daemon and decided on the other takes effect; returns a run left
/// paused on `a` (for after `a` is killed).
async fn approvals_cross_daemons(http: &reqwest::Client, a: &str, b: &str, api: &str) -> (Value, String) {
    let r = http.patch(format!("{a}/v1/tools/{api}")).json(&json!({"requires_approval": true})).send().await.unwrap();
    assert_eq!(r.status(), 200);
    // The mark reaches `b` with its next look at the shared state.
    let mut paused = Value::Null;
    for _ in 0..20 {
        let (status, r) = post(http, &format!("{b}/v1/orchestrate"), json!({"request": RENT})).await;
        if status == 202 {
            paused = r;
            break;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    assert_eq!(paused["status"], "awaiting_approval", "{paused}");
    let on_b = paused["run_id"].as_str().unwrap().to_string();
    let (status, e) = post(http, &format!("{a}/v1/runs/{on_b}/approve"), json!({})).await;
    assert_eq!(status, 200, "{e}");
    let done = wait_run(http, b, &on_b, 30, |r| r["status"] == "answered").await;
    let (status, left) = post(http, &format!("{a}/v1/orchestrate"), json!({"request": RENT})).await;
    assert_eq!((status, &left["status"]), (202, &json!("awaiting_approval")), "{left}");
    (done, left["run_id"].as_str().unwrap().to_string())
}

/// A streamed run on `base` of a request that needs no approved API: its id, read from the first
/// event, and the stream left open.
async fn streamed(http: &reqwest::Client, base: &str) -> (String, reqwest::Response) {
    let mut r =
        http.post(format!("{base}/v1/orchestrate?stream=true")).json(&json!({"request": FLY})).send().await.unwrap();
    let mut text = String::new();
    while !text.contains("\n\n") {
        let chunk = r.chunk().await.unwrap().expect("the first event");
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    let data = text.lines().find_map(|l| l.strip_prefix("data: ")).unwrap();
    let run: Value = serde_json::from_str(data).unwrap();
    (run["run_id"].as_str().unwrap_or_else(|| panic!("{text}")).to_string(), r)
}

#[test]
fn two_daemons_on_one_postgresql_and_one_neo4j_keep_every_run_approval_and_count() {
    let neo = neo4j();
    let sandbox = Sandbox::start();
    let (a_dir, b_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let store = neo.uri();
    ingest_complexfuncbench_into(a_dir.path(), &store, Some(&neo));
    // The second daemon's own copy of the vectors (an embedded vector store is one process's).
    let copied =
        std::process::Command::new("cp").arg("-r").arg(a_dir.path().join("vectors")).arg(b_dir.path()).status();
    assert!(copied.unwrap().success());
    let rt = runtime();
    let state = match std::env::var("TOOLGRAPH_TEST_POSTGRES_URL") {
        Ok(base) => rt.block_on(fresh_postgres(&base, "scale_out")),
        Err(_) => {
            eprintln!("TOOLGRAPH_TEST_POSTGRES_URL is not set: the two daemons share a SQLite file");
            format!("sqlite:{}", a_dir.path().join("state.db").display())
        }
    };
    let a = replica(a_dir.path(), &store, &neo, sandbox.port, &state);
    let b = replica(b_dir.path(), &store, &neo, sandbox.port, &state);
    let http = http_client(REQUEST_LIMIT);
    let (ua, ub) = (a.url.clone(), b.url.clone());
    let (base, mut acknowledged, left_paused, in_flight) = rt.block_on(async {
        let base = totals(&http, &ua).await;
        let mut acked = learning_runs_on_both_at_once_all_count(&http, &ua, &ub, &[a_dir.path(), b_dir.path()]).await;
        acked.extend(a_session_moves_between_daemons(&http, &ua, &ub).await);
        let api = acked[0]["chain"][0]["api"].as_str().unwrap().to_string();
        let (approved, left) = approvals_cross_daemons(&http, &ua, &ub, &api).await;
        acked.push(approved);
        let streams = vec![streamed(&http, &ua).await, streamed(&http, &ua).await];
        (base, acked, left, streams)
    });
    // SIGKILL the first daemon while its streamed runs are in flight and a run of it waits for approval.
    let Replica { proc: mut killed, .. } = a;
    let _ = std::process::Command::new("kill").args(["-9", &killed.0.id().to_string()]).status();
    let _ = killed.0.wait();
    rt.block_on(async {
        // Every acknowledged run reads the same from the other daemon.
        for r in &acknowledged {
            let id = r["run_id"].as_str().unwrap();
            let got = run_status(&http, &ub, id).await;
            assert_eq!((&got["status"], &got["chain"]), (&r["status"], &r["chain"]), "run {id}: {got}");
        }
        // The runs cut off by the kill end `interrupted` (or as they ended, if they ended first).
        for (id, _) in &in_flight {
            let r = wait_run(&http, &ub, id, 30, |r| r["status"] != "running").await;
            assert!(r["status"] != "awaiting_approval" && r["status"].is_string(), "{r}");
        }
        // The run the killed daemon left paused is decided on the other, which takes it over.
        let (status, e) = post(&http, &format!("{ub}/v1/runs/{left_paused}/approve"), json!({})).await;
        assert_eq!(status, 200, "{e}");
        let done = wait_run(&http, &ub, &left_paused, 40, |r| r["status"] == "answered").await;
        acknowledged.push(done);
        // Nothing acknowledged is missing from the counts (runs cut off may add their own).
        let t = totals(&http, &ub).await;
        let want = sum(&acknowledged);
        assert!(
            t.runs - base.runs >= want.runs && t.examples - base.examples >= want.examples,
            "{t:?} - {base:?} < {want:?}"
        );
    });
    drop(b);
}

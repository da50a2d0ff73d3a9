//! An ingest killed mid-way (kill -9) and run again gives the same graph as one clean ingest, on
//! the embedded store, FalkorDB and Neo4j.

use crate::common::*;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

fn write_corpus(dir: &Path, runs: usize) -> (std::path::PathBuf, std::path::PathBuf) {
    let tools = dir.join("tools.jsonl");
    let apis: Vec<String> = (0..40).map(|i| format!("op{i}")).collect();
    // op{i} returns f{i} and takes f{i-1}: FEEDS edges op{i-1} → op{i}. Runs use op0..op19 only,
    // so the FEEDS among op20..op39 come from the tool docs alone.
    let api_list: Vec<serde_json::Value> = (0..apis.len())
        .map(|i| serde_json::json!({"name": apis[i], "method": "GET",
            "required_parameters": [{"name": format!("f{}", i.max(1) - 1), "type": "STRING"}], "optional_parameters": [],
            "template_response": {format!("f{i}"): "str"}}))
        .collect();
    std::fs::write(
        &tools,
        format!("{}\n", serde_json::json!({"tool_name": "Ops", "category": "Data", "api_list": api_list})),
    )
    .unwrap();
    let runs_path = dir.join("runs.jsonl");
    let mut f = std::io::BufWriter::new(std::fs::File::create(&runs_path).unwrap());
    let mut x: u64 = 0x9E3779B97F4A7C15;
    for i in 0..runs {
        let len = 2 + (i % 4);
        let calls: Vec<serde_json::Value> = (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                serde_json::json!({"tool": "Ops", "api": apis[(x % 20) as usize], "category": "Data", "status": if x.is_multiple_of(9) {"error"} else {"ok"}})
            })
            .collect();
        writeln!(f, "{}", serde_json::json!({"request": format!("r{i}"), "calls": calls, "outcome": "answered"}))
            .unwrap();
    }
    (tools, runs_path)
}

fn ingest_cmd(store: &str, graph: &str, tools: &Path, runs: &Path) -> std::process::Command {
    let mut c = bin();
    c.env("TOOLGRAPH__STORE__GRAPH", graph)
        .env("TOOLGRAPH__INGEST__BATCH_SIZE", "25")
        .arg("--store")
        .arg(store)
        .arg("ingest")
        .arg("--no-index")
        .arg("--tools")
        .arg(tools)
        .arg("--trajectories")
        .arg(runs);
    c
}

fn count_runs(uri: &str, graph: &str) -> u64 {
    count_runs_with(uri, graph, None).unwrap_or(0)
}

/// How many runs `graph` records, or why the count failed.
fn count_runs_with(uri: &str, graph: &str, neo: Option<&Neo4jServer>) -> Result<u64, String> {
    let mut c = bin();
    if let Some(n) = neo {
        n.env(&mut c);
    }
    let out = c
        .env("TOOLGRAPH__STORE__GRAPH", graph)
        .arg("--store")
        .arg(uri)
        .args(["graph", "cypher", "MATCH (r:IngestedRun) RETURN count(r) AS n"])
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(|e| e.to_string())?;
    v["rows"][0][0].as_u64().ok_or_else(|| format!("no count in {v}"))
}

const TOTAL: usize = 3000;

/// A corpus, a FalkorDB server, and the graph one clean ingest of the corpus gives (graph "clean").
struct FalkorSetup {
    _dir: tempfile::TempDir,
    _falkor: Falkor,
    uri: String,
    tools: std::path::PathBuf,
    runs: std::path::PathBuf,
    clean: toolgraph_schema::GraphSnapshot,
}

fn falkor_setup() -> FalkorSetup {
    let dir = tempfile::tempdir().unwrap();
    let (tools, runs) = write_corpus(dir.path(), TOTAL);
    let falkor = Falkor::start();
    let uri = falkor.uri();
    run_ok(&mut ingest_cmd(&uri, "clean", &tools, &runs));
    let clean = snapshot(&uri, "clean");
    assert!(clean.feeds.len() >= 39, "{}", clean.feeds.len());
    FalkorSetup { _dir: dir, _falkor: falkor, uri, tools, runs, clean }
}

/// Wait until `graph` has recorded some ingested runs while `child` ingests; returns how many.
/// Fails, saying why, when the ingest ends first or nothing is recorded within five minutes (a
/// loaded CI machine runs other suites beside this one).
fn wait_for_runs(child: &mut std::process::Child, uri: &str, graph: &str, neo: Option<&Neo4jServer>) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(300);
    let mut last = String::new();
    while Instant::now() < deadline {
        match count_runs_with(uri, graph, neo) {
            Ok(seen) if seen > 0 => return seen,
            Ok(_) => last = "0 runs".into(),
            Err(e) => last = e,
        }
        if let Some(status) = child.try_wait().unwrap() {
            let mut stderr = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = std::io::Read::read_to_string(&mut e, &mut stderr);
            }
            panic!("the ingest ended ({status}) before any run was seen (last count: {last}); stderr: {stderr}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("no ingested run seen in 300 s; last count: {last}");
}

#[test]
fn killed_falkordb_ingest_reruns_to_the_same_graph() {
    let FalkorSetup { uri, tools, runs, clean, .. } = &falkor_setup();
    let mut child = ingest_cmd(uri, "killed", tools, runs).spawn().unwrap();
    let seen = wait_for_runs(&mut child, uri, "killed", None);
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let after_kill = count_runs(uri, "killed");
    assert!(seen > 0 && after_kill < TOTAL as u64, "the kill did not land mid-way ({seen}, {after_kill})");

    run_ok(&mut ingest_cmd(uri, "killed", tools, runs));
    assert_same_graph(clean, &snapshot(uri, "killed"));
}

#[test]
fn killed_neo4j_ingest_reruns_to_the_same_graph() {
    let dir = tempfile::tempdir().unwrap();
    let (tools, runs) = write_corpus(dir.path(), TOTAL);
    let neo = neo4j();
    let uri = neo.uri();
    // Neo4j community holds one database: the clean graph first, then wipe, then the killed ingest.
    run_ok(neo.env(&mut ingest_cmd(&uri, "g", &tools, &runs)));
    let clean = snapshot_of(&uri, "g", Some(&neo));
    assert!(clean.feeds.len() >= 39, "{}", clean.feeds.len());
    neo.wipe();

    let mut child = neo.env(&mut ingest_cmd(&uri, "g", &tools, &runs)).spawn().unwrap();
    let seen = wait_for_runs(&mut child, &uri, "g", Some(&neo));
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let after_kill = count_runs_with(&uri, "g", Some(&neo)).unwrap();
    assert!(seen > 0 && after_kill < TOTAL as u64, "the kill did not land mid-way ({seen}, {after_kill})");

    run_ok(neo.env(&mut ingest_cmd(&uri, "g", &tools, &runs)));
    assert_same_graph(&clean, &snapshot_of(&uri, "g", Some(&neo)));
}

#[test]
fn killed_embedded_ingest_reruns_to_the_same_graph() {
    let dir = tempfile::tempdir().unwrap();
    let (tools, runs) = write_corpus(dir.path(), TOTAL);
    let clean_uri = format!("embedded:{}", dir.path().join("clean.redb").display());
    run_ok(&mut ingest_cmd(&clean_uri, "g", &tools, &runs));
    let clean = snapshot(&clean_uri, "g");

    let uri = format!("embedded:{}", dir.path().join("killed.redb").display());
    let db = dir.path().join("killed.redb");
    let mut child = ingest_cmd(&uri, "g", &tools, &runs).spawn().unwrap();
    // Kill once the store has grown past its empty size (some batches committed).
    let deadline = Instant::now() + Duration::from_secs(120);
    while Instant::now() < deadline {
        if std::fs::metadata(&db).map(|m| m.len() > 2 << 20).unwrap_or(false) {
            break;
        }
        if child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let _ = child.kill();
    child.wait().unwrap();
    run_ok(&mut ingest_cmd(&uri, "g", &tools, &runs));
    assert_eq!(clean, snapshot(&uri, "g"));
}

#[test]
fn ctrl_c_finishes_what_was_read_and_exits_130() {
    let FalkorSetup { uri, tools, runs, clean, .. } = &falkor_setup();
    let mut child = ingest_cmd(uri, "stopped", tools, runs).stderr(std::process::Stdio::piped()).spawn().unwrap();
    wait_for_runs(&mut child, uri, "stopped", None);
    let sent = std::process::Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    assert!(sent.success());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("stopped early"), "{stderr}");
    let partial = snapshot(uri, "stopped");
    assert!(partial.next.values().map(|e| e.count).sum::<u64>() < clean.next.values().map(|e| e.count).sum::<u64>());
    assert_weights_sum_to_one(&partial);

    run_ok(&mut ingest_cmd(uri, "stopped", tools, runs));
    assert_same_graph(clean, &snapshot(uri, "stopped"));
}

/// Users' Cypher beside an ingest on FalkorDB: each query runs on a copy of the graph, and in
/// FalkorDB 4.16 a copy forked while a write commits deadlocks the whole server (every command,
/// `PING` included, waited forever; three query loops beside an ingest hung it every time). Copies
/// and writes now take turns: every query is answered, the ingest ends with the graph one clean
/// ingest gives, and the server still answers.
#[test]
fn cypher_queries_beside_a_falkordb_ingest_are_answered_and_never_hang_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let (tools, runs) = write_corpus(dir.path(), TOTAL);
    let falkor = Falkor::start();
    let uri = falkor.uri();
    run_ok(&mut ingest_cmd(&uri, "clean", &tools, &runs));
    let mut ingest = ingest_cmd(&uri, "busy", &tools, &runs).spawn().unwrap();
    // Each loop stops at its first failure (a hung server fails every query after a minute).
    let counts: Result<Vec<u64>, String> = std::thread::scope(|s| {
        let loops: Vec<_> = (0..3)
            .map(|_| s.spawn(|| (0..25).map(|_| count_runs_with(&uri, "busy", None)).collect::<Result<Vec<_>, _>>()))
            .collect();
        loops.into_iter().map(|l| l.join().unwrap()).collect::<Result<Vec<_>, _>>().map(|v| v.concat())
    });
    let seen = counts.unwrap_or_else(|e| {
        let _ = ingest.kill();
        panic!("a query beside the ingest failed: {e}\nthe server's log:\n{}", falkor.log_tail())
    });
    let status = ingest.wait().unwrap();
    assert!(status.success(), "the ingest failed: {status}");
    assert!(seen.iter().any(|&n| n > 0 && n < TOTAL as u64), "no query saw the ingest mid-way: {seen:?}");
    assert_same_graph(&snapshot(&uri, "clean"), &snapshot(&uri, "busy"));
    assert_eq!(count_runs_with(&uri, "busy", None), count_runs_with(&uri, "clean", None));
}

//! What `toolgraph ingest` teaches, as a user gets it from the binary: the graph's counts, the
//! argument model, the long-term memory and the usage vectors, from ComplexFuncBench chains
//! (converted) and from chat transcripts; once per run however often a file is ingested; on Neo4j
//! as on the embedded store; and a daemon over the ingested stores answers a request it never saw
//! by recalling an ingested trajectory.

use crate::common::*;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use toolgraph_engine::graph::counts::ARGUMENT_COUNTS;
use toolgraph_engine::vector::{MEMORY, USAGE};

/// The ComplexFuncBench chains converted (runs, tool docs) under `dir`, and their requests.
fn converted(dir: &Path) -> (Vec<String>, PathBuf, Vec<String>) {
    let (runs, tools, _) = convert_complexfuncbench(dir);
    let lines: Vec<String> = std::fs::read_to_string(&runs).unwrap().lines().map(str::to_string).collect();
    let requests = lines
        .iter()
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["request"].as_str().unwrap().to_string())
        .collect();
    (lines, tools, requests)
}

/// Lines `which` of `lines` written to `path`.
fn subset(path: &Path, lines: &[String], which: &[usize]) -> PathBuf {
    let text: String = which.iter().map(|&i| format!("{}\n", lines[i])).collect();
    std::fs::write(path, text).unwrap();
    path.to_path_buf()
}

fn ingest(dir: &Path, store: &str, neo: Option<&Neo4jServer>, tools: &Path, runs: &Path) -> String {
    let mut c = bin_in(dir);
    if let Some(n) = neo {
        n.env(&mut c);
    }
    let out =
        run_ok(c.arg("--store").arg(store).arg("ingest").arg("--tools").arg(tools).arg("--trajectories").arg(runs));
    String::from_utf8_lossy(&out.stderr).to_string()
}

/// What the vector store under `dir` holds: the memory (request → chain) and the usage vectors
/// (API → count, sum).
fn vectors_of(dir: &Path) -> (BTreeMap<String, String>, BTreeMap<String, String>) {
    runtime().block_on(async {
        let mut s = toolgraph_engine::settings::load(None, &[]).unwrap().vectors;
        s.uri = format!("embedded:{}", dir.join("vectors").display());
        let v = toolgraph_engine::store::open_vectors(&s).unwrap();
        let memory = v.scan(MEMORY, &["request", "chain"]).await.unwrap();
        let usage = v.scan(USAGE, &["sum", "n"]).await.unwrap();
        let text = |rows: Vec<(String, serde_json::Map<String, Value>)>| {
            rows.into_iter().map(|(id, p)| (id, Value::Object(p).to_string())).collect::<BTreeMap<_, _>>()
        };
        (text(memory), text(usage))
    })
}

/// The argument model's counters in an embedded store.
fn model_of(store: &str) -> Vec<(String, i64)> {
    runtime().block_on(async {
        let mut s = toolgraph_engine::settings::load(None, &[]).unwrap().store;
        s.uri = store.to_string();
        let g = toolgraph_engine::store::open(&s).await.unwrap();
        g.model_counts(ARGUMENT_COUNTS).await.unwrap()
    })
}

/// Ingesting the same file again changes no count, no memory entry and no usage vector.
#[test]
fn reingesting_a_file_teaches_nothing_twice() {
    let dir = tempfile::tempdir().unwrap();
    let (lines, tools, requests) = converted(dir.path());
    let runs = subset(&dir.path().join("some.jsonl"), &lines, &(0..40).collect::<Vec<_>>());
    let store = format!("embedded:{}", dir.path().join("g.redb").display());
    let first = ingest(dir.path(), &store, None, &tools, &runs);
    assert!(first.contains("memory: 40 runs remembered"), "{first}");
    let graph = snapshot(&store, "");
    let model = model_of(&store);
    let (memory, usage) = vectors_of(dir.path());
    assert_eq!(memory.len(), requests[..40].iter().collect::<std::collections::BTreeSet<_>>().len());
    assert!(memory.values().any(|e| e.contains(&requests[0].replace('"', "\\\""))), "the memory holds the requests");
    assert!(!usage.is_empty() && !model.is_empty());

    let again = ingest(dir.path(), &store, None, &tools, &runs);
    assert!(again.contains("40 already ingested") && again.contains("memory: 0 runs remembered"), "{again}");
    assert_same_graph(&graph, &snapshot(&store, ""));
    assert_eq!(model, model_of(&store), "the argument model learned nothing twice");
    let (memory2, usage2) = vectors_of(dir.path());
    assert_eq!(memory, memory2, "the memory is unchanged");
    assert_eq!(usage, usage2, "the usage vectors are unchanged");
}

/// Two ingests of different files into one Neo4j store: the requests of both are recalled.
#[test]
fn two_ingests_into_one_neo4j_store_are_both_recalled() {
    let neo = neo4j();
    let dir = tempfile::tempdir().unwrap();
    let (lines, tools, requests) = converted(dir.path());
    let a = subset(&dir.path().join("a.jsonl"), &lines, &(0..12).collect::<Vec<_>>());
    let b = subset(&dir.path().join("b.jsonl"), &lines, &(300..312).collect::<Vec<_>>());
    let store = neo.uri();
    ingest(dir.path(), &store, Some(&neo), &tools, &a);
    ingest(dir.path(), &store, Some(&neo), &tools, &b);
    let graph = snapshot_of(&store, "", Some(&neo));
    let started: u64 = graph.next.iter().filter(|((from, _), _)| from == "START").map(|(_, e)| e.count).sum();
    assert_eq!(started, 24, "both files' chains are counted");
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    for request in [&requests[3], &requests[305]] {
        let mut c = bin_in(dir.path());
        neo.env(&mut c);
        let out = c
            .arg("--store")
            .arg(&store)
            .args([
                "ask",
                request,
                "--dry-run",
                "--json",
                "--no-learn",
                "--rewrite",
                &format!("https://=http://127.0.0.1:{dead}/"),
            ])
            .output()
            .unwrap();
        let r: Value =
            serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&out.stderr)));
        let recalled: Vec<&str> = r["trace"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["type"] == "recall")
            .filter_map(|t| t["request"].as_str())
            .collect();
        assert_eq!(recalled.first(), Some(&request.as_str()), "{:#}", r["trace"]);
    }
}

/// Chat transcripts (docs/examples/chat-transcripts.jsonl, three conversations) teach the graph,
/// the memory and the argument model; a malformed line is skipped with its line number and
/// reason, the rest ingested.
#[test]
fn chat_transcripts_teach_graph_memory_and_argument_model() {
    let dir = tempfile::tempdir().unwrap();
    let mut text = std::fs::read_to_string(root().join("docs/examples/chat-transcripts.jsonl")).unwrap();
    text.push_str("{\"messages\": [{\"role\": \"user\", \"content\": 7}, \n");
    let file = dir.path().join("chats.jsonl");
    std::fs::write(&file, text).unwrap();
    let store = format!("embedded:{}", dir.path().join("g.redb").display());
    let report = dir.path().join("report.json");
    run_ok(
        bin_in(dir.path())
            .arg("--store")
            .arg(&store)
            .arg("ingest")
            .arg("--trajectories")
            .arg(&file)
            .arg("--report")
            .arg(&report),
    );
    let r = read_json(&report);
    assert_eq!((r["runs_read"].as_u64(), r["runs_kept"].as_u64()), (Some(4), Some(3)), "{r:#}");
    assert_eq!((r["arg_examples"].as_u64(), r["memories"].as_u64()), (Some(3), Some(3)), "{r:#}");
    let error = &r["errors"][0];
    assert_eq!(error["record"], "line 4", "{r:#}");
    assert!(error["message"].as_str().unwrap().contains("EOF"), "{error}");

    let graph = snapshot(&store, "");
    let mut apis: Vec<&str> = graph.apis.keys().map(String::as_str).collect();
    apis.sort();
    assert_eq!(apis, ["food/recipes/ingredients", "food/recipes/nutrition", "food/recipes/search"]);
    let next: Vec<(&str, &str, u64)> = graph
        .next
        .iter()
        .map(|((from, to), e)| (from.as_str(), to.as_str(), e.count))
        .filter(|e| e.0 == "food/recipes/search")
        .collect();
    assert_eq!(next.len(), 3, "search is followed by ingredients, nutrition and END: {next:?}");

    let (memory, _) = vectors_of(dir.path());
    assert_eq!(memory.len(), 3);
    let lasagna = memory.values().find(|e| e.contains("lasagna")).unwrap();
    let entry: Value = serde_json::from_str(lasagna).unwrap();
    let chain: Value = serde_json::from_str(entry["chain"].as_str().unwrap()).unwrap();
    assert_eq!(
        chain[1]["arguments"]["recipe_id"], "$var1.results.0.id$",
        "an earlier result's value is a reference: {chain}"
    );
    assert!(!model_of(&store).is_empty(), "the argument model is stored with the graph");
}

/// The daemon over stores a user ingested answers a request no ingested chain holds, by recalling
/// and replaying an ingested trajectory of the same kind (against the replay sandbox).
#[test]
fn the_daemon_answers_from_what_ingest_taught() {
    let dir = tempfile::tempdir().unwrap();
    let (lines, tools, requests) = converted(dir.path());
    let kind = "Could you compare the price differences for picking up the car";
    let family: Vec<usize> = (0..requests.len()).filter(|&i| requests[i].contains(kind)).collect();
    assert!(family.len() >= 4, "{family:?}");
    let held_out = family.iter().copied().find(|&i| requests[i].contains("Los Angeles International Airport")).unwrap();
    let train: Vec<usize> = family.iter().copied().filter(|&i| i != held_out).collect();
    let runs = subset(&dir.path().join("train.jsonl"), &lines, &train);
    let store = format!("embedded:{}", dir.path().join("g.redb").display());
    ingest(dir.path(), &store, None, &tools, &runs);

    let sandbox = Sandbox::start();
    let mut cmd = bin_in(dir.path());
    cmd.args(["--store", &store, "serve", "--port", "0", "--rewrite"])
        .arg(format!("https://=http://127.0.0.1:{}/", sandbox.port));
    let (_daemon, port) = spawn_listening(cmd, "toolgraph daemon on", None);
    let r: Value = runtime().block_on(async {
        http_client(REQUEST_LIMIT)
            .post(format!("http://127.0.0.1:{port}/v1/orchestrate"))
            .json(&json!({"request": requests[held_out]}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    });
    assert_eq!(r["status"], "answered", "{r:#}");
    assert_eq!(r["stats"]["recalled"], true, "{r:#}");
    assert_eq!(r["chain"][0]["sent"]["query"], "Los Angeles International Airport", "{r:#}");
    assert_eq!(r["chain"][1]["sent"]["pick_up_date"], "2024-11-16", "{r:#}");
}

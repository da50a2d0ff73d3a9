//! The daemon learning from its own runs: each answered run's increments reach the graph once,
//! and an API that keeps failing is degraded, then restored.

use super::daemon_api::complexfuncbench_split;
use crate::daemon_common::*;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;
use toolgraph_engine::plan::DeterministicPlanner;
use toolgraph_engine::run::RunSettings;
use toolgraph_eval::chains::{gold_of, learn, recordings};
use toolgraph_ingest::complexfuncbench::Chain;
use toolgraph_sandbox::{self as sandbox, Faults, Library, Sandbox};
use toolgraph_schema::GraphSnapshot;
use toolgraph_server::daemon::limits::ApiKeys;
use toolgraph_server::daemon::Stack;

/// Expected graph increments of one stored run: per API (calls, successes), and NEXT edges of
/// its chain when it was answered.
fn expected_of(
    run: &Value,
    calls: &mut std::collections::BTreeMap<String, (u64, u64)>,
    edges: &mut std::collections::BTreeMap<(String, String), u64>,
) {
    for e in run["trace"].as_array().unwrap() {
        match e["type"].as_str().unwrap() {
            "response" => {
                let c = calls.entry(e["api"].as_str().unwrap().to_string()).or_default();
                c.0 += 1;
                c.1 += 1;
            }
            "call_failed" if matches!(e["error"]["kind"].as_str(), Some("exhausted" | "rejected")) => {
                calls.entry(e["api"].as_str().unwrap().to_string()).or_default().0 += 1
            }
            _ => {}
        }
    }
    if run["status"] == "answered" {
        let mut prev = "START".to_string();
        for c in run["chain"].as_array().unwrap() {
            let id = c["api"].as_str().unwrap().to_string();
            *edges.entry((prev, id.clone())).or_default() += 1;
            prev = id;
        }
        *edges.entry((prev, "END".to_string())).or_default() += 1;
    }
}

/// Waits (at most 10 s) for the background probe to bring `victim` back: its node then.
async fn restored_by_probe(store: &dyn toolgraph_engine::graph::GraphStore, victim: &str) -> toolgraph_schema::ApiNode {
    let mut restored = None;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let n = store.node_snapshot().await.unwrap().apis[victim].clone();
        if n.status == "active" {
            restored = Some(n);
            break;
        }
    }
    restored.unwrap_or_else(|| panic!("{victim} was not restored by the probe"))
}

type Counts = std::collections::BTreeMap<String, (u64, u64)>;
type Edges = std::collections::BTreeMap<(String, String), u64>;

/// The graph gained exactly what the runs' traces say they called, and the changed sources'
/// weights were recomputed.
fn assert_gained(before: &GraphSnapshot, after: &GraphSnapshot, calls: &Counts, edges: &Edges) {
    for (id, a) in &after.apis {
        let b = &before.apis[id];
        let (c, ok) = calls.get(id).copied().unwrap_or((0, 0));
        assert_eq!((a.calls - b.calls, a.successes - b.successes), (c, ok), "{id}");
    }
    for (k, e) in &after.next {
        let was = before.next.get(k).map(|e| e.count).unwrap_or(0);
        assert_eq!(e.count - was, edges.get(k).copied().unwrap_or(0), "NEXT {k:?}");
    }
    for k in edges.keys() {
        assert!(after.next.contains_key(k), "NEXT {k:?} was added");
    }
    // Weights of the sources whose edges changed were recomputed: a source's static weights sum to 1.
    for (from, _) in edges.keys() {
        let sum: f64 = after.next.iter().filter(|((f, _), _)| f == from).map(|(_, e)| e.static_weight).sum();
        assert!((sum - 1.0).abs() < 1e-9, "{from}: {sum}");
    }
}

/// Replayed runs moved no count.
fn assert_same_counts(after: &GraphSnapshot, again: &GraphSnapshot) {
    for (id, a) in &again.apis {
        assert_eq!(
            (a.calls, a.successes, a.score),
            (after.apis[id].calls, after.apis[id].successes, after.apis[id].score),
            "{id} changed on replay"
        );
    }
    assert_eq!(
        again.next.iter().map(|(k, e)| (k.clone(), e.count)).collect::<Vec<_>>(),
        after.next.iter().map(|(k, e)| (k.clone(), e.count)).collect::<Vec<_>>()
    );
}

/// Runs until `victim` is degraded (at most 40): its node then.
async fn degraded_after_failures(
    http: &reqwest::Client,
    url: &str,
    store: &dyn toolgraph_engine::graph::GraphStore,
    users: &[String],
    victim: &str,
) -> toolgraph_schema::ApiNode {
    let mut degraded = None;
    for req in users.iter().cycle().take(40) {
        let r: Value = orchestrate(http, url, None, &json!({"request": req})).await;
        let _ = r;
        let node = store.node_snapshot().await.unwrap().apis[victim].clone();
        if node.status == "degraded" {
            degraded = Some(node);
            break;
        }
    }
    degraded.unwrap_or_else(|| panic!("{victim} was not degraded"))
}

/// None of `users`' runs calls `victim`.
async fn never_called(http: &reqwest::Client, url: &str, users: &[String], victim: &str) {
    for req in users {
        let body: Value = orchestrate(http, url, None, &json!({"request": req})).await;
        let run: Value = http
            .get(format!("{url}/v1/runs/{}", body["run_id"].as_str().unwrap()))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert!(
            !run["trace"].as_array().unwrap().iter().any(|e| e["type"] == "call" && e["api"] == json!(victim)),
            "{victim} called while degraded"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_teach_the_graph_once_and_a_failing_api_is_degraded_then_restored() {
    let (specs, chains, test) = complexfuncbench_split();
    let train: Vec<&Chain> = chains.iter().collect();
    assert_eq!(test.len(), 20);
    let dir = tempfile::tempdir().unwrap();
    let emb = embedder();
    let mut s = settings();
    s.health = toolgraph_schema::HealthSettings {
        enabled: true,
        consecutive_failures: 2,
        window: 50,
        min_availability: 0.0,
        probe_every_ms: 200,
        invalid_after_probes: 0,
    };
    let learned = learn(dir.path(), &train, &specs, &s, emb.clone(), None).await.unwrap();
    let (recs, _) = recordings(&test, &specs);
    let sb = Sandbox::new(Library::new(recs), Faults::default());
    let (sb_addr, sb_stop) = sandbox::spawn("127.0.0.1:0", sb.clone()).await.unwrap();
    let run = RunSettings { use_memory: false, learn: true, remember: false, ..RunSettings::default() };
    s.run = run;
    let store = learned.stack.store.clone();
    let backends: Stack = learned.stack(&s, exec_to(Some(sb_addr), true), Arc::new(DeterministicPlanner::default()));
    let (url, d, stop, server) = start(backends, ApiKeys::default()).await;
    let http = crate::common::http_client(crate::common::REQUEST_LIMIT);

    // 20 requests; what each run's trace says it called is what the graph must gain.
    let before = store.snapshot().await.unwrap();
    let mut calls = std::collections::BTreeMap::new();
    let mut edges = std::collections::BTreeMap::new();
    let mut ids = Vec::new();
    let mut statuses = std::collections::BTreeMap::<String, usize>::new();
    for (i, c) in test.iter().enumerate() {
        let gold = gold_of(c).unwrap();
        let r = http
            .post(format!("{url}/v1/orchestrate"))
            .header("Idempotency-Key", format!("learn-{i}"))
            .json(&json!({"request": gold.request}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        let body: Value = r.json().await.unwrap();
        expected_of(&body, &mut calls, &mut edges);
        *statuses.entry(body["status"].as_str().unwrap().to_string()).or_default() += 1;
        ids.push(body["run_id"].as_str().unwrap().to_string());
    }
    assert!(statuses.get("answered").copied().unwrap_or(0) >= 1 && calls.len() >= 3, "{statuses:?} {calls:?}");
    let after = store.snapshot().await.unwrap();
    assert_gained(&before, &after, &calls, &edges);

    // Retention keeps the newest 5 runs: the first 15 are forgotten.
    let pruned = d.state.enforce_retention(0, 5, 0).await.unwrap();
    assert_eq!(pruned.runs, 15, "{pruned:?}");
    // The same 20 requests again with the same keys: 5 come back from the run store, 15 run again
    // under their old ids; the graph's counts do not move. (Newest first, so the kept runs are
    // asked for before the re-runs push them out.)
    for (i, c) in test.iter().enumerate().rev() {
        let gold = gold_of(c).unwrap();
        let r = http
            .post(format!("{url}/v1/orchestrate"))
            .header("Idempotency-Key", format!("learn-{i}"))
            .json(&json!({"request": gold.request}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        let replayed = r.headers().get("idempotent-replayed").is_some();
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["run_id"].as_str().unwrap(), ids[i]);
        assert_eq!(replayed, i >= 15, "run {i}");
    }
    assert_same_counts(&after, &store.snapshot().await.unwrap());
    let bad = http
        .post(format!("{url}/v1/orchestrate"))
        .header("Idempotency-Key", "x".repeat(201))
        .json(&json!({"request": "hotels in Rome"}))
        .send()
        .await
        .unwrap();
    error_of(bad, 400, "invalid_request").await;

    // An outage: the API that succeeded most on the chains goes down at the sandbox.
    let (victim, _) = calls
        .iter()
        .filter(|(id, _)| edges.keys().any(|(_, t)| t == *id))
        .max_by_key(|(_, (_, ok))| *ok)
        .map(|(id, v)| (id.clone(), *v))
        .unwrap();
    let route = format!("/{}", after.apis[&victim].url.trim_start_matches("https://"));
    sb.set_outage(&route, true);
    let users: Vec<String> = test.iter().map(|c| gold_of(c).unwrap().request).collect();
    let node = degraded_after_failures(&http, &url, store.as_ref(), &users, &victim).await;
    assert!(
        node.status_reason.contains("calls in a row failed")
            && !node.status_since.is_empty()
            && node.probe.starts_with('{'),
        "{node:?}"
    );
    let tool: Value = http.get(format!("{url}/v1/tools/{victim}")).send().await.unwrap().json().await.unwrap();
    assert_eq!(tool["degraded_now"], json!(true), "{tool}");
    // Left out of search: no run calls it while it is degraded.
    never_called(&http, &url, &users[..5], &victim).await;
    // The sandbox recovers: the background probe (every 200 ms) brings it back.
    sb.set_outage(&route, false);
    let n = restored_by_probe(store.as_ref(), &victim).await;
    assert!(n.status_reason.starts_with("probe succeeded"), "{n:?}");
    let tool: Value = http.get(format!("{url}/v1/tools/{victim}")).send().await.unwrap().json().await.unwrap();
    assert_eq!(tool["degraded_now"], json!(false), "{tool}");

    drop(stop);
    let _ = server.await;
    let _ = sb_stop.send(());
}

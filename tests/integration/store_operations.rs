//! The GraphStore operations the engine uses, on the embedded store, FalkorDB and Neo4j, with the
//! same results: contributions, top-K successors, the dynamic-weight update and status changes.

use crate::common::*;
use std::sync::Arc;
use toolgraph_engine::graph::{weights, ApiCountDelta, ApiUpsert, ContributionBatch, EdgeDelta, GraphStore};
use toolgraph_schema::{WeightSettings, STATUS_INVALID};

fn api(name: &str) -> ApiUpsert {
    ApiUpsert {
        id: format!("travel/maps/{name}"),
        name: name.into(),
        tool: "Maps".into(),
        tool_id: "travel/maps".into(),
        tool_description: "maps".into(),
        category: "Travel".into(),
        category_id: "travel".into(),
        description: format!("{name} things"),
        method: "GET".into(),
        url: format!("https://maps.example/{name}"),
        parameters: "[]".into(),
        required: vec!["q".into()],
        output_fields: vec![],
    }
}

fn id(name: &str) -> String {
    format!("travel/maps/{name}")
}

async fn exercise(store: Arc<dyn GraphStore>) -> toolgraph_schema::GraphSnapshot {
    store.setup().await.unwrap();
    store.upsert_apis(&["a", "b", "c"].map(api)).await.unwrap();
    // Runs: a→b→END ×3, a→c→END ×1, START→a ×4.
    let batch = ContributionBatch {
        keys: vec!["k1".into(), "k2".into()],
        api_counts: vec![
            ApiCountDelta { id: id("a"), calls: 5, successes: 4 },
            ApiCountDelta { id: id("b"), calls: 3, successes: 3 },
            ApiCountDelta { id: id("c"), calls: 1, successes: 1 },
        ],
        edges: vec![
            EdgeDelta { from: "START".into(), to: id("a"), n: 4 },
            EdgeDelta { from: id("a"), to: id("b"), n: 3 },
            EdgeDelta { from: id("a"), to: id("c"), n: 1 },
            EdgeDelta { from: id("b"), to: "END".into(), n: 3 },
            EdgeDelta { from: id("c"), to: "END".into(), n: 1 },
        ],
        counts: Vec::new(),
    };
    store.apply_contributions(&batch).await.unwrap();
    assert_eq!(store.ingested_keys(&["k1".into(), "k3".into()]).await.unwrap(), ["k1".to_string()].into());
    let params = WeightSettings { alpha: 0.5, beta: 0.6 };
    weights::recompute(store.as_ref(), None, params, 2).await.unwrap();

    let succ = store.successors(&id("a"), 5).await.unwrap();
    assert_eq!(succ.iter().map(|s| s.id.clone()).collect::<Vec<_>>(), vec![id("b"), id("c")]);
    assert!((succ[0].static_weight - 0.75).abs() < 1e-12);
    // Before any evaluation all scores are 0: w = 0.6·w0 + 0.4·(1/2).
    assert!((succ[0].dynamic_weight - (0.6 * 0.75 + 0.2)).abs() < 1e-9);

    // An evaluation: b +1, c -1 → the hand-worked numbers of weights::tests.
    weights::apply_evaluation(store.as_ref(), &[(id("b"), 1.0), (id("c"), -1.0)], params).await.unwrap();
    let succ = store.successors(&id("a"), 1).await.unwrap();
    assert_eq!(succ.len(), 1);
    assert!((succ[0].dynamic_weight - 0.7348285151861261).abs() < 1e-9, "{succ:?}");
    assert!(weights::apply_evaluation(store.as_ref(), &[(id("b"), 3.5)], params).await.is_err());

    // Invalidating an API takes it out of search.
    let change = |api: &str, status: &str, probe: Option<&str>| toolgraph_schema::StatusChange {
        id: api.into(),
        status: status.into(),
        reason: format!("{status} in a test"),
        since: "2026-11-23T12:00:00Z".into(),
        probe: probe.map(str::to_string),
    };
    // Degraded with a probe call, then invalid: the probe recorded before is kept.
    assert!(store.set_api_status(&change(&id("b"), "degraded", Some(r#"{"q":"x"}"#))).await.unwrap());
    assert!(store.set_api_status(&change(&id("b"), STATUS_INVALID, None)).await.unwrap());
    assert!(!store.set_api_status(&change("travel/maps/nope", STATUS_INVALID, None)).await.unwrap());
    let succ = store.successors(&id("a"), 5).await.unwrap();
    assert_eq!(succ.iter().map(|s| s.id.clone()).collect::<Vec<_>>(), vec![id("c")]);

    let stats = store.stats().await.unwrap();
    assert_eq!((stats.apis, stats.tools, stats.categories, stats.next_edges, stats.ingested_runs), (3, 1, 1, 5, 2));
    let snap = store.snapshot().await.unwrap();
    assert_eq!(snap.apis[&id("a")].availability(), Some(0.8));
    assert_eq!(snap.apis[&id("b")].score, 1.0);
    assert_eq!(snap.apis[&id("b")].status, STATUS_INVALID);
    assert_eq!(
        (
            snap.apis[&id("b")].status_reason.as_str(),
            snap.apis[&id("b")].status_since.as_str(),
            snap.apis[&id("b")].probe.as_str()
        ),
        ("invalid in a test", "2026-11-23T12:00:00Z", r#"{"q":"x"}"#)
    );
    assert_eq!((snap.apis[&id("a")].status_reason.as_str(), snap.apis[&id("a")].probe.as_str()), ("", ""));
    argument_model_lives_with_the_graph(store.as_ref()).await;
    snap
}

/// The argument model an ingest or a run trains is stored with the graph as counters the store
/// adds to, with the runs' ledger keys: continued by the next learner, read back whole (JSON text
/// with quotes and non-ASCII cue words in it), and two learners that started from the same stored
/// model (two daemons, or a daemon and an ingest) both count — neither overwrites the other.
async fn argument_model_lives_with_the_graph(store: &dyn GraphStore) {
    use toolgraph_engine::fill::{stored_model, ArgTrainer};
    use toolgraph_engine::graph::write::{ContributionWriter, ExampleSink};
    let rental = |key: &str, request: &str, pick: &str, drop: &str| toolgraph_schema::Contribution {
        key: key.into(),
        attempts: Vec::new(),
        chain: Vec::new(),
        example: Some(toolgraph_schema::Example {
            request: request.into(),
            calls: vec![toolgraph_schema::ExampleCall {
                api_id: id("a"),
                label: None,
                arguments: serde_json::json!({"pick_up_time": pick, "drop_off_time": drop, "note": "say \"hi\""})
                    .as_object()
                    .cloned()
                    .unwrap(),
                response: None,
            }],
        }),
    };
    assert_eq!(stored_model(store).await.unwrap(), None);
    let before = store.generation().await.unwrap();
    let trainer = ArgTrainer::open(store, toolgraph_engine::clock::Clock::system()).await.unwrap();
    let mut writer = ContributionWriter::new(store).with_sink(Some(&trainer));
    let runs = vec![
        rental(
            "m1",
            "Rent a car at the café at 9 AM on July 3rd, 2024 and return it at 6 PM on July 5th.",
            "09:00",
            "18:00",
        ),
        rental(
            "m2",
            "Return the car at 8 PM on August 9th, 2024; pick it up at 10 AM on August 2nd.",
            "10:00",
            "20:00",
        ),
    ];
    writer.write(runs).await.unwrap();
    assert_eq!(trainer.learned(), 2);
    assert!(store.generation().await.unwrap() > before, "a write that changes the model moves the generation");
    let model = stored_model(store).await.unwrap().expect("stored");
    assert_eq!(model.examples, 2);
    assert_eq!(model.slots[&id("a")]["drop_off_time"].support, 2);
    assert!(model.slots[&id("a")]["drop_off_time"].cues.values().any(|c| c.contains_key("return")), "{model:?}");
    // Two learners open the same stored model and each learns one run: both runs count.
    let (one, two) = (
        ArgTrainer::open(store, toolgraph_engine::clock::Clock::system()).await.unwrap(),
        ArgTrainer::open(store, toolgraph_engine::clock::Clock::system()).await.unwrap(),
    );
    let third =
        || rental("m3", "Pick up a car at 7 AM on May 1st, 2024, return it at 11 PM two days later.", "07:00", "23:00");
    let fourth = rental("m4", "Collect the car 8 AM June 2nd, 2024; bring it back 9 PM June 4th.", "08:00", "21:00");
    ContributionWriter::new(store).with_sink(Some(&one)).write(vec![third()]).await.unwrap();
    ContributionWriter::new(store).with_sink(Some(&two)).write(vec![fourth]).await.unwrap();
    let model = stored_model(store).await.unwrap().unwrap();
    assert_eq!((model.examples, model.slots[&id("a")]["drop_off_time"].support), (4, 4), "no lost update");
    // A run the ledger holds teaches nothing twice.
    ContributionWriter::new(store).with_sink(Some(&one)).write(vec![third()]).await.unwrap();
    let model = stored_model(store).await.unwrap().unwrap();
    assert_eq!(model.examples, 4);
    assert_eq!(model.slots[&id("a")]["note"].values.keys().next().map(String::as_str), Some(r#""say \"hi\"""#));
    assert!(store.model_counts("nothing/").await.unwrap().is_empty());
}

#[test]
fn embedded_and_falkordb_agree_on_every_operation() {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let embedded: Arc<dyn GraphStore> =
        Arc::new(toolgraph_engine::adapters::embedded::EmbeddedStore::open(&dir.path().join("g.redb")).unwrap());
    let a = rt.block_on(exercise(embedded));

    let falkor = Falkor::start();
    let b = rt.block_on(async {
        let store = toolgraph_engine::adapters::falkordb::connect(&format!("127.0.0.1:{}", falkor.port), "ops", 2)
            .await
            .unwrap();
        exercise(Arc::new(store)).await
    });
    assert_same_graph(&a, &b);
}

#[test]
fn the_embedded_store_survives_reopen() {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g.redb");
    let first = rt.block_on(async {
        let s: Arc<dyn GraphStore> =
            Arc::new(toolgraph_engine::adapters::embedded::EmbeddedStore::open(&path).unwrap());
        exercise(s).await
    });
    let again = rt.block_on(async {
        let s = toolgraph_engine::adapters::embedded::EmbeddedStore::open(&path).unwrap();
        s.snapshot().await.unwrap()
    });
    assert_eq!(first, again);
}

/// The same operations on a real Neo4j 5 (scripts/neo4j.sh; scripts/test.sh starts it for every run).
#[test]
fn embedded_and_neo4j_agree_on_every_operation() {
    let rt = runtime();
    let dir = tempfile::tempdir().unwrap();
    let embedded: Arc<dyn GraphStore> =
        Arc::new(toolgraph_engine::adapters::embedded::EmbeddedStore::open(&dir.path().join("g.redb")).unwrap());
    let a = rt.block_on(exercise(embedded));
    let neo = neo4j();
    let b = rt.block_on(async {
        let store =
            toolgraph_engine::adapters::neo4j::connect(&neo.uri(), "neo4j", &neo.password(), "neo4j", 2).await.unwrap();
        exercise(Arc::new(store)).await
    });
    assert_same_graph(&a, &b);
}

/// Read-only Cypher is enforced by the Neo4j server (READ access mode, server-side timeout), not
/// only by the word check in front of it, and row limits hold.
#[test]
fn neo4j_refuses_writes_itself_and_enforces_limits() {
    use toolgraph_engine::adapters::cypher::CypherRunner;
    use toolgraph_engine::graph::CypherLimits;
    let rt = runtime();
    let neo = neo4j();
    rt.block_on(async {
        let store =
            toolgraph_engine::adapters::neo4j::connect(&neo.uri(), "neo4j", &neo.password(), "neo4j", 2).await.unwrap();
        store.setup().await.unwrap();
        let limits = CypherLimits { max_rows: 10, timeout_ms: 5_000, max_bytes: 1 << 20 };
        // Straight to the server, past the word check: the server refuses each write.
        for q in [
            "CREATE (:Intruder {id: 'x'}) RETURN 1",
            "MERGE (:Intruder {id: 'x'})",
            "MATCH (s:Start) SET s.hacked = true RETURN s.id",
            "CREATE INDEX intruder_idx IF NOT EXISTS FOR (n:Intruder) ON (n.id)",
            "CALL db.createLabel('Intruder')",
        ] {
            let slot = std::sync::Arc::new(tokio::sync::Semaphore::new(1)).try_acquire_owned().unwrap();
            let e = store.runner().read_only(q, Default::default(), limits, slot).await.expect_err(q);
            assert_eq!(e.class(), toolgraph_engine::ErrorClass::BadInput, "{q}: {e}");
            assert!(e.to_string().contains("Neo4j refused"), "{q}: {e}");
        }
        // Nothing was written.
        let rows =
            store.cypher_read("MATCH (n:Intruder) RETURN count(n) AS n", Default::default(), limits).await.unwrap();
        assert_eq!(rows.rows, vec![vec![serde_json::json!(0)]]);
        let rows = store.cypher_read("MATCH (s:Start) RETURN s.hacked AS h", Default::default(), limits).await.unwrap();
        assert_eq!(rows.rows, vec![vec![serde_json::Value::Null]]);
        // Through the public entry point: a write procedure, dbms procedures and LOAD CSV, each with a clear error.
        let e = store.cypher_read("CALL db.createLabel('Intruder')", Default::default(), limits).await.unwrap_err();
        assert!(e.to_string().contains("read-only") || e.to_string().contains("refused"), "{e}");
        for q in [
            "CALL dbms.components()",
            "LOAD CSV FROM 'file:///etc/passwd' AS l RETURN l",
            "CALL apoc.create.node(['X'], {})",
        ] {
            let e = store.cypher_read(q, Default::default(), limits).await.unwrap_err();
            assert_eq!(e.class(), toolgraph_engine::ErrorClass::BadInput, "{q}: {e}");
        }
        // Row limit: 10 rows of 5000, marked truncated, columns in the query's order; the
        // connection is usable right after.
        let rows = store
            .cypher_read("UNWIND range(1, 5000) AS x RETURN x AS value, x * 2 AS double", Default::default(), limits)
            .await
            .unwrap();
        assert_eq!(rows.columns, vec!["value".to_string(), "double".to_string()]);
        assert_eq!(rows.rows.len(), 10);
        assert!(rows.truncated);
        assert_eq!(rows.rows[9], vec![serde_json::json!(10), serde_json::json!(20)]);
        // Time limit: the server stops a query that runs past it.
        let started = std::time::Instant::now();
        let slow = "UNWIND range(1, 2000000000) AS x WITH x WHERE x % 7 = 8 RETURN count(x) AS n";
        let e = store
            .cypher_read(slow, Default::default(), CypherLimits { max_rows: 10, timeout_ms: 300, max_bytes: 1 << 20 })
            .await
            .unwrap_err();
        assert!(e.to_string().contains("300 ms limit"), "{e}");
        assert!(started.elapsed() < std::time::Duration::from_secs(5), "{:?}", started.elapsed());
        for _ in 0..3 {
            let rows = store.cypher_read("RETURN 1 AS one", Default::default(), limits).await.unwrap();
            assert_eq!(rows.rows, vec![vec![serde_json::json!(1)]]);
        }
    });
}

/// This process's resident memory, bytes (Linux).
fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap_or(0)
        * 1024
}

/// What a user's query may cost, on both Cypher servers: a query that builds a huge value is
/// stopped by the server's per-query memory ceiling (our scripts start FalkorDB with
/// `QUERY_MEM_CAPACITY`, Neo4j with `db.memory.transaction.max`) within its time limit and without
/// growing this process; the result's bytes are bounded (cut, or a clear error for one row that
/// is too large); a slow query answers by its time limit; the store is usable right after.
#[test]
fn cypher_results_are_bounded_in_memory_bytes_and_time_on_falkordb_and_neo4j() {
    use toolgraph_engine::graph::CypherLimits;
    let rt = runtime();
    let falkor = Falkor::start();
    let neo = neo4j();
    rt.block_on(async {
        let falkor_store = toolgraph_engine::adapters::falkordb::connect(&format!("127.0.0.1:{}", falkor.port), "bounds", 2).await.unwrap();
        let neo_store = toolgraph_engine::adapters::neo4j::connect(&neo.uri(), "neo4j", &neo.password(), "neo4j", 2).await.unwrap();
        let stores: Vec<(&str, Arc<dyn GraphStore>)> = vec![("falkordb", Arc::new(falkor_store)), ("neo4j", Arc::new(neo_store))];
        for (name, store) in stores {
            store.setup().await.unwrap();
            let limits = CypherLimits { max_rows: 1000, timeout_ms: 5_000, max_bytes: 64 * 1024 };
            // The probe's query: 30 million values collected into one row.
            let before = rss_bytes();
            let started = std::time::Instant::now();
            let e = store.cypher_read("UNWIND range(1, 30000000) AS x RETURN collect(x) AS xs", Default::default(), limits).await.unwrap_err();
            assert_eq!(e.class(), toolgraph_engine::ErrorClass::BadInput, "{name}: {e}");
            assert!(started.elapsed() < std::time::Duration::from_secs(6), "{name}: answered after {:?}", started.elapsed());
            let grown = rss_bytes().saturating_sub(before);
            assert!(grown < 300 << 20, "{name}: the daemon's side grew by {} MiB", grown >> 20);
            // Bytes: many small rows are cut at the byte limit, before the row limit.
            let rows = store.cypher_read("UNWIND range(1, 900) AS x RETURN x AS n, 'abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyz' AS pad", Default::default(), limits).await.unwrap();
            assert!(rows.truncated && rows.rows.len() > 100 && rows.rows.len() < 900, "{name}: {} rows, truncated {}", rows.rows.len(), rows.truncated);
            assert!(serde_json::to_vec(&rows.rows).unwrap().len() <= 64 * 1024 + 1, "{name}");
            // One row larger than the limit: a clear error, not a cut row.
            let e = store.cypher_read("RETURN range(1, 100000) AS xs", Default::default(), limits).await.unwrap_err();
            assert!(e.to_string().contains("larger than the 65536 byte limit"), "{name}: {e}");
            // Time: a slow query answers by its limit. (FalkorDB 4 neither times out nor bounds the
            // memory of `range(1, 2000000000)`: it runs on for a minute and the server dies, so
            // its slow query here is one its own timeout stops: 100 million rows from two small
            // lists, seconds of work on any machine, never a large list — 5 million rows once
            // finished within the 300 ms on a fast day.)
            let started = std::time::Instant::now();
            let slow = if name == "falkordb" { "UNWIND range(1, 10000) AS x UNWIND range(1, 10000) AS y WITH x, y WHERE (x + y) % 7 = 8 RETURN count(x) AS n" } else { "UNWIND range(1, 2000000000) AS x WITH x WHERE x % 7 = 8 RETURN count(x) AS n" };
            let e = store.cypher_read(slow, Default::default(), CypherLimits { timeout_ms: 300, ..limits }).await.unwrap_err();
            assert!(e.to_string().contains("300 ms limit"), "{name}: {e}");
            assert!(started.elapsed() < std::time::Duration::from_secs(3), "{name}: answered after {:?}", started.elapsed());
            // The run path answers right after; users' queries once the server has stopped the
            // slow one (until then they are told to wait: `Busy`, 429 over HTTP).
            store.stats().await.unwrap();
            let mut waited = std::time::Duration::ZERO;
            let rows = loop {
                match store.cypher_read("RETURN 1 AS one", Default::default(), limits).await {
                    Err(toolgraph_engine::EngineError::Busy(_)) if waited < std::time::Duration::from_secs(30) => {
                        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                        waited += std::time::Duration::from_millis(100);
                    }
                    other => break other.unwrap(),
                }
            };
            assert_eq!(rows.rows, vec![vec![serde_json::json!(1)]], "{name}");
            println!("{name}: users' queries waited {waited:?} for the server to stop the slow one");
        }
    });
}

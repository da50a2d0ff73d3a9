//! `toolgraph eval retrieval` on a small real corpus: the APIs of one StableToolBench query file
//! plus distractor docs. Runs the real embedding model (scripts/setup.sh fetches it).

use crate::common::*;

#[test]
fn retrieval_eval_reports_every_method_and_reuses_the_embedding_cache() {
    let dir = tempfile::tempdir().unwrap();
    let tools = dir.path().join("tools.jsonl");
    std::fs::write(
        &tools,
        format!(
            "{}\n",
            serde_json::json!({"tool_name": "Distractor Kit", "category": "Other", "api_list": [
            {"name": "Ping", "description": "Returns pong"}, {"name": "Echo", "description": "Echoes its input"}]})
        ),
    )
    .unwrap();
    let queries = data().join("stabletoolbench/queries/G1_tool.json");
    let report = dir.path().join("eval/retrieval.json");
    let cache = dir.path().join("emb.redb");
    let run = || {
        run_ok(
            bin()
                .env("TOOLGRAPH__EMBED__MODEL_DIR", root().join(".assets/minilm"))
                .env("TOOLGRAPH__EMBED__ORT_LIBRARY", root().join(".assets/ort/libonnxruntime.so"))
                .args(["eval", "retrieval", "--tools"])
                .arg(&tools)
                .arg("--queries")
                .arg(&queries)
                .arg("--report")
                .arg(&report)
                .arg("--cache")
                .arg(&cache)
                .arg("--vectors")
                .arg(dir.path().join("eval-vectors")),
        )
    };
    run();
    let r = read_json(&report);
    assert!(r["corpus_apis"].as_u64().unwrap() > 100, "{}", r["corpus_apis"]);
    assert!(r["queries"].as_u64().unwrap() > 50);
    assert!(r["corpus_embedded_now"].as_u64().unwrap() > 100);
    assert_eq!(r["vector_backend"], "qdrant-edge");
    assert!(r["dense_recall_at_10_vs_exact"].as_f64().unwrap() >= 0.95, "{}", r["dense_recall_at_10_vs_exact"]);
    assert_eq!(r["index"]["embedded"], r["corpus_apis"]);
    assert!(r["groups"]["all"].get("hybrid+graph").is_none(), "no graph given, no graph method");
    for group in ["G1_tool", "all"] {
        for m in ["bm25", "dense", "hybrid"] {
            let s = &r["groups"][group][m];
            let ndcg5 = s["ndcg_at_5"].as_f64().unwrap_or(-1.0);
            assert!((0.3..=1.0).contains(&ndcg5), "{group}/{m}: NDCG@5 {ndcg5}");
            let curve: Vec<f64> = s["recall_curve"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
            assert_eq!(curve.len(), 20);
            assert!(curve.windows(2).all(|w| w[0] <= w[1] + 1e-12), "recall@k must not fall: {curve:?}");
            assert!(s["latency_ms_p99"].as_f64().unwrap() >= s["latency_ms_p50"].as_f64().unwrap());
        }
    }
    let md = std::fs::read_to_string(report.with_extension("md")).unwrap();
    assert!(md.contains("| group | method | NDCG@1 | NDCG@5 |") && md.contains("| all | hybrid |"));
    let svg = std::fs::read_to_string(report.with_extension("svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.matches("<polyline").count() == 3);

    // Second run: every corpus vector comes from the cache, and the scores are the same.
    run();
    let again = read_json(&report);
    assert_eq!(again["corpus_embedded_now"], 0);
    assert_eq!(again["index"]["embedded"], 0, "the vector collection is kept in step incrementally");
    assert_eq!(again["groups"]["all"]["dense"]["ndcg_at_5"], r["groups"]["all"]["dense"]["ndcg_at_5"]);
}

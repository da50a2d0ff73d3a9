//! Seed-tool retrieval through the binary: `ingest` indexes the APIs it stored, `search` ranks
//! them with filters, re-indexing embeds only what changed, and a missing model is a clear error.

use crate::common::*;

fn search(dir: &std::path::Path, store: &str, args: &[&str]) -> serde_json::Value {
    let out = run_ok(bin_in(dir).arg("--store").arg(store).arg("search").args(args).arg("--json"));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn ids(v: &serde_json::Value) -> Vec<String> {
    v.as_array().unwrap().iter().map(|h| h["id"].as_str().unwrap().to_string()).collect()
}

#[test]
fn ingest_indexes_and_search_ranks_real_apis() {
    let dir = tempfile::tempdir().unwrap();
    let (store, out) = ingest_complexfuncbench(dir.path());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("40 APIs, 40 embedded"), "{err}");

    // The ingest trained the argument model and stored it with the graph: no run was ever made
    // or remembered here, yet `graph args` shows what the recorded rentals teach.
    assert!(err.contains("argument model: 613 runs learned"), "{err}");
    let out = run_ok(bin_in(dir.path()).arg("--store").arg(&store).args([
        "graph",
        "args",
        "travel/booking_com15/search_car_rentals",
    ]));
    let learned: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(learned["examples"], 613, "{learned}");
    let drop_off = &learned["parameters"]["drop_off_time"]["kinds"]["time"];
    assert!(drop_off["times"].as_u64().unwrap() >= 20, "{learned}");
    // Coordinates come from the location search's response: references, not literals to learn
    // (but for the few the annotator rounded, which no response holds).
    let support = |p: &str| learned["parameters"][p]["support"].as_u64().unwrap_or(0);
    assert!(
        support("pick_up_latitude") * 5 < support("pick_up_time"),
        "{} of {}",
        support("pick_up_latitude"),
        support("pick_up_time")
    );
    // The second rental search of a run reads the same location; one call per hotel reads the
    // next hotel of the list, as many times as the request's count said.
    assert_eq!(learned["parameters"]["pick_up_latitude"]["on_repeat"]["usual"], "same", "{learned}");
    let out = run_ok(bin_in(dir.path()).arg("--store").arg(&store).args([
        "graph",
        "args",
        "travel/booking_com15/get_description_and_info",
    ]));
    let details: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(details["parameters"]["hotel_id"]["on_repeat"]["usual"], "next", "{details}");
    let calls = &details["parameters"]["#calls"];
    assert!(
        calls["kinds"]["number"]["times"].as_u64().unwrap_or(0) * 2 > calls["support"].as_u64().unwrap(),
        "{details}"
    );
    // A second ingest of the same runs learns nothing twice (the ledger skips them).
    let again = run_ok(
        bin_in(dir.path())
            .arg("--store")
            .arg(&store)
            .arg("ingest")
            .arg("--trajectories")
            .arg(dir.path().join("cfb.jsonl"))
            .arg("--no-index"),
    );
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("argument model: 0 runs learned"),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );

    // Real booking.com APIs (ComplexFuncBench spec): the request's words and meaning find them.
    let hits = search(dir.path(), &store, &["I need to rent a car at the airport", "-k", "3"]);
    let top = ids(&hits);
    assert!(top.iter().any(|id| id.contains("car")), "{top:?}");
    let flights = ids(&search(dir.path(), &store, &["search for flights from New York to London", "-k", "3"]));
    assert!(flights.iter().any(|id| id.ends_with("/search_flights")), "{flights:?}");
    for method in ["bm25", "dense"] {
        let m = ids(&search(
            dir.path(),
            &store,
            &["search for flights from New York to London", "-k", "3", "--method", method],
        ));
        assert!(m.iter().any(|id| id.contains("flight")), "{method}: {m:?}");
    }
    // Filters: category by name (any case), and a category with no APIs.
    assert_eq!(ids(&search(dir.path(), &store, &["hotels", "--category", "travel"])).len(), 10);
    assert!(ids(&search(dir.path(), &store, &["hotels", "--category", "Sports"])).is_empty());
    // Graph prior with a chosen API: its observed successor moves up.
    let rentals = "travel/booking_com15/search_car_rentals".to_string();
    let rank = |v: &serde_json::Value| ids(v).iter().position(|id| *id == rentals).expect("ranked");
    let plain = search(dir.path(), &store, &["search", "-k", "40"]);
    let after =
        search(dir.path(), &store, &["search", "-k", "40", "--after", "travel/booking_com15/search_car_location"]);
    assert!(rank(&after) + 3 <= rank(&plain), "{} → {}", rank(&plain), rank(&after));

    // Incremental: nothing changed, nothing embedded; a rebuild re-uses the cache.
    let out = run_ok(bin_in(dir.path()).arg("--store").arg(&store).arg("index"));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("40 APIs, 0 embedded (0 by the model), 0 payload updates, 40 unchanged"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = run_ok(bin_in(dir.path()).arg("--store").arg(&store).arg("index").arg("--rebuild"));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("40 embedded (0 by the model"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(ids(&search(dir.path(), &store, &["search for flights from New York to London", "-k", "3"])), flights);
}

#[test]
fn a_missing_model_names_the_setup_command_and_keeps_the_graph() {
    let dir = tempfile::tempdir().unwrap();
    let tools = dir.path().join("tools.jsonl");
    std::fs::write(
        &tools,
        r#"{"tool_name": "Weather Hub", "category": "Weather", "tool_description": "weather", "api_list": [{"name": "Forecast", "method": "GET", "required_parameters": [], "optional_parameters": []}]}"#,
    )
    .unwrap();
    let store = format!("embedded:{}", dir.path().join("g.redb").display());
    for (var, value) in [
        ("TOOLGRAPH__EMBED__MODEL_DIR", "/nonexistent/model"),
        ("TOOLGRAPH__EMBED__ORT_LIBRARY", "/nonexistent/libonnxruntime.so"),
    ] {
        let out = bin_in(dir.path())
            .env(var, value)
            .arg("--store")
            .arg(&store)
            .arg("ingest")
            .arg("--tools")
            .arg(&tools)
            .output()
            .unwrap();
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("scripts/setup.sh") && err.contains("toolgraph index"), "{var}: {err}");
    }
    let stats = run_ok(bin().arg("--store").arg(&store).args(["graph", "stats"]));
    assert!(String::from_utf8_lossy(&stats.stdout).contains("\"apis\": 1"), "the graph was kept");
    // Trajectories teach the memory, which needs the model: nothing is ingested, and the error
    // says why and what to run.
    let runs = dir.path().join("runs.jsonl");
    std::fs::write(&runs, r#"{"request": "weather in Oslo", "calls": [{"tool": "Weather Hub", "api": "Forecast", "category": "Weather"}], "outcome": "answered"}"#).unwrap();
    let out = bin_in(dir.path())
        .env("TOOLGRAPH__EMBED__MODEL_DIR", "/nonexistent/model")
        .arg("--store")
        .arg(&store)
        .args(["ingest", "--trajectories"])
        .arg(&runs)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("scripts/setup.sh") && err.contains("nothing was ingested"), "{err}");
    let stats = run_ok(bin().arg("--store").arg(&store).args(["graph", "stats"]));
    assert!(
        String::from_utf8_lossy(&stats.stdout).contains("\"ingested_runs\": 0"),
        "no run was counted: {}",
        String::from_utf8_lossy(&stats.stdout)
    );
}

//! Bad input gets an error naming the file and record (and field where known); everything else
//! is still ingested, and the report counts what was skipped and why.

use crate::common::*;
use serde_json::json;
use std::io::Write;
use std::path::Path;

fn good_run(i: usize) -> String {
    json!({
        "request": format!("find weather for city {i}"),
        "calls": [
            {"tool": "Weather Hub", "api": "Geocode", "category": "Weather", "arguments": {"q": format!("city {i}")}, "status": "ok", "response": {"lat": 1.0}},
            {"tool": "Weather Hub", "api": "Forecast", "category": "Weather", "arguments": {"lat": 1.0}, "status": "ok"}
        ],
        "outcome": "answered"
    })
    .to_string()
}

fn errors_of(report: &serde_json::Value) -> Vec<(String, String, Option<String>, String)> {
    report["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["file"].as_str().unwrap().to_string(),
                e["record"].as_str().unwrap().to_string(),
                e["field"].as_str().map(str::to_string),
                e["message"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn find<'a>(
    errs: &'a [(String, String, Option<String>, String)],
    file: &Path,
) -> Vec<&'a (String, String, Option<String>, String)> {
    errs.iter().filter(|e| e.0 == file.display().to_string()).collect()
}

/// JSONL runs: good lines 1 and 5 around a wrong type (2), truncated JSON (3) and a 200 MB line (4).
fn write_bad_runs(runs: &std::path::Path) {
    let mut f = std::io::BufWriter::new(std::fs::File::create(runs).unwrap());
    writeln!(f, "{}", good_run(1)).unwrap(); // line 1
    writeln!(f, "{}", json!({"request": "x", "calls": [{"tool": 7, "api": "A"}], "outcome": "answered"})).unwrap(); // line 2
    let g = good_run(3);
    writeln!(f, "{}", &g[..g.len() - 10]).unwrap(); // line 3: truncated
    let chunk = vec![b'x'; 1 << 20];
    f.write_all(b"{\"request\": \"").unwrap(); // line 4: 200 MB
    for _ in 0..200 {
        f.write_all(&chunk).unwrap();
    }
    f.write_all(b"\"}\n").unwrap();
    writeln!(f, "{}", good_run(5)).unwrap(); // line 5
    drop(f);
}

#[test]
fn every_kind_of_bad_record_is_named_and_the_rest_is_ingested() {
    let dir = tempfile::tempdir().unwrap();
    let answers = dir.path().join("answers");
    std::fs::create_dir_all(&answers).unwrap();

    // A real ToolBench answer, a truncated copy of it, and an empty file.
    let real = data().join("toolbench/answer/G1_answer/10_ChatGPT_DFS_woFilter_w2.json");
    let bytes = std::fs::read(&real).unwrap();
    std::fs::write(answers.join("good.json"), &bytes).unwrap();
    let truncated = answers.join("truncated.json");
    std::fs::write(&truncated, &bytes[..bytes.len() / 2]).unwrap();
    let empty_answer = answers.join("empty.json");
    std::fs::write(&empty_answer, b"").unwrap();
    // Wrong type in a ToolBench file: valid_data must be a boolean.
    let mut v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    v["answer_generation"]["valid_data"] = json!("yes");
    let wrong_type_answer = answers.join("wrong_type.json");
    std::fs::write(&wrong_type_answer, v.to_string()).unwrap();
    // An unknown function name on an answered path: no doc and no schema defines it.
    let mut v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    let msgs =
        v["answer_generation"]["train_messages"].as_array_mut().unwrap().last_mut().unwrap().as_array_mut().unwrap();
    for m in msgs.iter_mut() {
        if m["function_call"]["name"] == "transitaire_for_transitaires" {
            m["function_call"]["name"] = json!("teleport_for_nowhere_api");
        }
        if m["name"] == "transitaire_for_transitaires" {
            m["name"] = json!("teleport_for_nowhere_api");
        }
    }
    v["tree"] = json!(null);
    let unknown_fn = answers.join("unknown_function.json");
    std::fs::write(&unknown_fn, v.to_string()).unwrap();

    // JSONL runs: good lines around a wrong type, truncated JSON and a 200 MB line.
    let runs = dir.path().join("runs.jsonl");
    write_bad_runs(&runs);
    let empty_runs = dir.path().join("empty.jsonl");
    std::fs::write(&empty_runs, b"\n\n").unwrap();

    // Tool docs with one line of a wrong type.
    let tools = dir.path().join("tools.jsonl");
    std::fs::write(
        &tools,
        format!(
            "{}\n{}\n",
            json!({"tool_name": "Weather Hub", "category": "Weather", "tool_description": "weather", "api_list": [
                {"name": "Geocode", "method": "GET", "required_parameters": [{"name": "q", "type": "STRING"}], "optional_parameters": []},
                {"name": "Forecast", "method": "GET", "required_parameters": [{"name": "lat", "type": "NUMBER"}], "optional_parameters": []}]}),
            json!({"tool_name": "Broken", "category": "Weather", "api_list": "not a list"})
        ),
    )
    .unwrap();

    let store = format!("embedded:{}", dir.path().join("g.redb").display());
    let report_path = dir.path().join("report.json");
    run_ok(
        bin()
            .arg("--store")
            .arg(&store)
            .arg("ingest")
            .arg("--toolbench")
            .arg(&answers)
            .arg("--tools")
            .arg(&tools)
            .arg("--trajectories")
            .arg(&runs)
            .arg(&empty_runs)
            .arg("--report")
            .arg(&report_path),
    );
    let r = read_json(&report_path);
    let errs = errors_of(&r);

    let e = find(&errs, &truncated);
    assert!(e.len() == 1 && e[0].1 == "file" && e[0].3.contains("EOF"), "{e:?}");
    let e = find(&errs, &empty_answer);
    assert!(e.len() == 1 && e[0].3.contains("empty"), "{e:?}");
    let e = find(&errs, &wrong_type_answer);
    assert!(
        e.len() == 1 && e[0].2.as_deref() == Some("answer_generation.valid_data") && e[0].3.contains("invalid type"),
        "{e:?}"
    );
    let e = find(&errs, &unknown_fn);
    assert!(e.len() == 1 && e[0].1.starts_with("path call") && e[0].3.contains("teleport_for_nowhere_api"), "{e:?}");

    let e = find(&errs, &runs);
    assert_eq!(e.len(), 3, "{e:?}");
    assert!(
        e.iter().any(|x| x.1 == "line 2" && x.2.as_deref() == Some("calls[0].tool") && x.3.contains("invalid type")),
        "{e:?}"
    );
    assert!(e.iter().any(|x| x.1 == "line 3" && x.3.contains("EOF")), "{e:?}");
    assert!(e.iter().any(|x| x.1 == "line 4" && x.3.contains("over the")), "{e:?}");
    let e = find(&errs, &empty_runs);
    assert!(e.len() == 1 && e[0].3.contains("empty"), "{e:?}");
    let e = find(&errs, &tools);
    assert!(e.len() == 1 && e[0].1 == "line 2" && e[0].2.as_deref() == Some("api_list"), "{e:?}");
    assert_eq!(r["errors_total"], errs.len() as u64);

    // What was good is in: the real answer, the unknown-function answer's remaining call, and
    // JSONL lines 1 and 5; the skipped records are counted by reason.
    assert_eq!(r["runs_dropped"]["parse_error"], 4, "{r}");
    assert_eq!(r["runs_dropped"]["too_large"], 1);
    assert_eq!(r["runs_dropped"]["empty_record"], 1);
    assert_eq!(r["calls_dropped"]["unknown_function"], 1);
    assert_eq!(r["runs_kept"], 4, "{r}");
    let snap = snapshot(&store, "toolgraph");
    let geo = "weather/weather_hub/geocode".to_string();
    let fc = "weather/weather_hub/forecast".to_string();
    assert_eq!(snap.next[&(geo.clone(), fc.clone())].count, 2);
    assert_eq!(snap.apis[&geo].calls, 2);
    assert!(snap.feeds.is_empty() || !snap.feeds.contains_key(&(fc, geo)));
    assert!(snap.apis.keys().any(|k| k.ends_with("/transitaires/transitaires")));
}

#[test]
fn a_missing_input_path_is_refused_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("embedded:{}", dir.path().join("g.redb").display());
    let out = bin()
        .arg("--store")
        .arg(&store)
        .args(["ingest", "--trajectories", "/nonexistent/runs.jsonl"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/runs.jsonl does not exist"));
    let out = bin().arg("--store").arg(&store).arg("ingest").output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("nothing to ingest"));
}

//! `toolgraph sandbox`, `toolgraph ask` and `toolgraph eval chains` as a user runs them: the
//! binary learns ComplexFuncBench chains, the replay sandbox (a real HTTP server, started as its
//! own process) serves their recorded responses, and `ask` plans and executes a request over HTTP.

use crate::common::*;
use std::path::Path;

#[test]
fn ask_plans_and_executes_a_chain_through_the_sandbox() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = ingest_complexfuncbench(dir.path());

    let (_sb, port) = sandbox_process();
    // Unknown calls get the API's error shape, unknown routes a 404.
    let request = "Today is November 15th, 2024. I want to rent a car for a day at the Los Angeles International Airport. Could you compare the price differences for picking up the car at 8 AM tomorrow and the day after tomorrow at the same place for a 24-hour rental?";
    let rewrite = format!("https://=http://127.0.0.1:{port}/");
    let ask = |extra: &[&str], memory: bool| {
        let mut c = bin_in(dir.path());
        c.env("TOOLGRAPH__RUN__USE_MEMORY", memory.to_string());
        c.arg("--store").arg(&store).args(["ask", request, "--rewrite", &rewrite, "--json"]).args(extra);
        c.output().unwrap()
    };
    // The ingest remembered this very request: first the graph search alone (memory not used).
    let out = ask(&[], false);
    assert!(out.status.success(), "{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["status"], "answered");
    let names: Vec<&str> = r["chain"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names[..2], ["Search_Car_Location", "Search_Car_Rentals"], "{r:#}");
    assert_eq!(r["chain"][0]["sent"]["query"], "Los Angeles International Airport");
    assert_eq!(r["chain"][1]["arguments"]["pick_up_latitude"], "$var1.coordinates.latitude$");
    assert_eq!(r["chain"][1]["sent"]["pick_up_date"], "2024-11-16");
    let types: Vec<&str> = r["trace"].as_array().unwrap().iter().map(|t| t["type"].as_str().unwrap()).collect();
    for t in ["retrieve", "choose", "call", "response", "judge", "finish"] {
        assert!(types.contains(&t), "trace lacks {t}: {types:?}");
    }
    // The judged-good run was remembered (as the ingest remembered its trajectory): asked again,
    // it is replayed with no planner decision.
    let out = ask(&[], true);
    let r2: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r2["stats"]["recalled"], true, "{:#}", r2["trace"][0]);
    assert_eq!(r2["stats"]["planner_calls"], 0);
    assert_eq!(r2["chain"].as_array().unwrap().len(), names.len());

    // The human-readable form.
    let mut c = bin_in(dir.path());
    let out =
        c.arg("--store").arg(&store).args(["ask", request, "--rewrite", &rewrite, "--no-learn"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("status: answered") && text.contains("var1 = Search_Car_Location(") && text.contains("answer: "),
        "{text}"
    );

    // Plan only: the tools point at a port nothing listens on, and the plan still comes back
    // (nothing is sent), with its data flow as references.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let out = bin_in(dir.path())
        .arg("--store")
        .arg(&store)
        .args(["ask", request, "--dry-run", "--json", "--rewrite", &format!("https://=http://127.0.0.1:{dead}/")])
        .output()
        .unwrap();
    let d: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (d["stats"]["dry_run"].as_bool(), d["stats"]["http_calls"].as_u64(), d["stats"]["failed_calls"].as_u64()),
        (Some(true), Some(0), Some(0)),
        "{d:#}"
    );
    assert_eq!(d["chain"][0]["name"], "Search_Car_Location", "{d:#}");
    let out = bin_in(dir.path())
        .arg("--store")
        .arg(&store)
        .args(["ask", request, "--dry-run", "--no-learn"])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("(planned only: nothing was sent)"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );

    // The one clock: a request that does not say what day it is takes `run.today`'s, and a day
    // that is not one is refused at start, naming the setting.
    let undated = request.trim_start_matches("Today is November 15th, 2024. ");
    let dry = |today: &str| {
        bin_in(dir.path())
            .env("TOOLGRAPH__RUN__TODAY", today)
            .arg("--store")
            .arg(&store)
            .args(["ask", undated, "--dry-run", "--json", "--no-learn"])
            .output()
            .unwrap()
    };
    let d: serde_json::Value = serde_json::from_slice(&dry("2031-06-30").stdout).unwrap();
    let days: Vec<&str> =
        d["chain"].as_array().unwrap().iter().filter_map(|c| c["arguments"]["pick_up_date"].as_str()).collect();
    assert!(days.first() == Some(&"2031-07-01"), "tomorrow of run.today: {days:?}");
    let out = dry("30/06/2031");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("run.today"), "{}", String::from_utf8_lossy(&out.stderr));
    the_lexicon_setting_is_the_language_the_reader_knows(dir.path(), &store, undated);

    // Nothing to learn from yet: a clear message, not a crash.
    let empty = format!("embedded:{}", dir.path().join("empty.redb").display());
    let out = bin_in(dir.path()).arg("--store").arg(&empty).args(["ask", "hello"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("run `toolgraph ingest` first"));
}

/// `run.lexicon` names the table the reader reads with: a weekday of another language is read
/// with a table that has it (and not without), and a table that lacks a list is refused at start,
/// naming the setting.
fn the_lexicon_setting_is_the_language_the_reader_knows(dir: &Path, store: &str, undated: &str) {
    let english = std::fs::read_to_string(root().join("engine/src/read/lexicon/en.toml")).unwrap();
    let german_days = english.replace(
        r#"["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]"#,
        r#"["montag", "dienstag", "mittwoch", "donnerstag", "freitag", "samstag", "sonntag"]"#,
    );
    assert_ne!(german_days, english);
    let table = dir.join("de-days.toml");
    std::fs::write(&table, german_days).unwrap();
    let broken = dir.join("broken.toml");
    std::fs::write(&broken, english.replace("[months]", "[monthz]")).unwrap();
    // 2031-06-30 is a Monday: "Dienstag" is the next day.
    let request = undated.replacen("8 AM tomorrow", "8 AM on Dienstag", 1);
    let dry = |lexicon: &Path| {
        bin_in(dir)
            .env("TOOLGRAPH__RUN__TODAY", "2031-06-30")
            .env("TOOLGRAPH__RUN__LEXICON", lexicon)
            .arg("--store")
            .arg(store)
            .args(["ask", &request, "--dry-run", "--json", "--no-learn"])
            .output()
            .unwrap()
    };
    let first_day = |out: std::process::Output| {
        let d: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        d["chain"].as_array().unwrap().iter().find_map(|c| c["arguments"]["pick_up_date"].as_str().map(String::from))
    };
    assert_eq!(first_day(dry(&table)).as_deref(), Some("2031-07-01"), "Dienstag read with the table that has it");
    assert_ne!(first_day(dry(Path::new(""))).as_deref(), Some("2031-07-01"), "English does not read it");
    let out = dry(&broken);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("run.lexicon") && err.contains("months"), "{err}");
}

#[test]
fn eval_chains_reports_every_method_side_by_side() {
    let dir = tempfile::tempdir().unwrap();
    let d = data().join("complexfuncbench");
    let report = dir.path().join("chains.json");
    let out = run_ok(
        bin_in(dir.path())
            .args(["eval", "chains", "--train"])
            .arg(d.join("data.json.gz"))
            .arg("--spec")
            .arg(d.join("spec.json.gz"))
            .args(["--folds", "2", "--limit", "8", "--report"])
            .arg(&report),
    );
    let r = read_json(&report);
    assert_eq!(r["folds"], 2);
    let methods: Vec<&str> = r["methods"].as_array().unwrap().iter().map(|m| m["method"].as_str().unwrap()).collect();
    assert_eq!(methods, ["graph", "plan", "retrieve-greedy", "dfs-no-graph"]);
    // Plan mode decides the plan at once: a plan that completes (most are remembered chains
    // replayed by analogy) costs at most the plan and the answer, never a step-by-step search;
    // and every plan-mode run says whether (and where) its plan handed over to the search.
    let plan_runs: Vec<&serde_json::Value> =
        r["details"].as_array().unwrap().iter().filter(|d| d["method"] == "plan").collect();
    assert_eq!(plan_runs.len(), 16);
    let completed: Vec<&&serde_json::Value> = plan_runs
        .iter()
        .filter(|d| !d["plan"].as_array().unwrap().is_empty() && d["plan_fallback"].is_null())
        .collect();
    assert!(
        !completed.is_empty() && completed.iter().all(|d| d["planner_calls"].as_u64().unwrap() <= 2),
        "{completed:?}"
    );
    assert_eq!(r["methods"][1]["plans_completed"].as_u64(), Some(completed.len() as u64));
    assert!(
        plan_runs.iter().all(|d| d["recall"].as_array().is_some_and(|a| a[1] == true)
            || !d["plan"].as_array().unwrap().is_empty()
            || d["plan_fallback"].is_string()),
        "{plan_runs:?}"
    );
    for m in r["methods"].as_array().unwrap() {
        assert_eq!(m["chains"], 16, "{m}");
        for k in [
            "call_f1",
            "edge_f1",
            "argument_accuracy",
            "exact_match",
            "success",
            "answered_precision",
            "answered_recall",
            "overall_success_rate",
            "overall_call_acc",
        ] {
            let v = m[k].as_f64().unwrap();
            assert!((0.0..=1.0).contains(&v), "{k} = {v}");
        }
        let outcomes: u64 =
            ["answered", "partial", "gave_up", "needs_input"].iter().map(|k| m[k].as_u64().unwrap()).sum();
        assert_eq!(outcomes, 16, "every run has one outcome: {m}");
    }
    // Seed retrieval, plain hybrid next to hybrid with usage vectors, on the same requests.
    let seeds = r["seed_recall"].as_array().unwrap();
    assert_eq!(seeds.len(), 2, "{seeds:?}");
    assert_eq!((seeds[0]["usage_weight"].as_f64(), seeds[0]["requests"].as_u64()), (Some(0.0), Some(16)));
    assert!(seeds[1]["usage_weight"].as_f64().unwrap() > 0.0);
    assert!(seeds.iter().all(|s| (0.0..=1.0).contains(&s["recall_at_5"].as_f64().unwrap())));
    let md = std::fs::read_to_string(report.with_extension("md")).unwrap();
    assert!(md.contains("| graph |") && md.contains("| dfs-no-graph |"), "{md}");
    // ComplexFuncBench's own metrics, among the paper's published rows.
    assert!(
        md.contains("| model | Overall Success Rate | Overall Call Acc. |")
            && md.contains("| GPT-4o | 60.50 | 80.55 |")
            && md.contains("| **toolgraph `graph`** |"),
        "{md}"
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("call F1"));
}

/// `--reworded-only`: only the requests that have a rewording are run (as written and reworded),
/// `--limit` spreading through those.
#[test]
fn eval_complexfuncbench_can_run_only_the_reworded_requests() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("eval/cfb.json");
    let reworded = root().join("eval/data/reworded/complexfuncbench-dev.jsonl");
    run_ok(
        bin_in(dir.path())
            .args(["eval", "complexfuncbench", "--data"])
            .arg(data().join("complexfuncbench"))
            .args(["--folds", "2", "--limit", "2", "--methods", "graph", "--reworded-only", "--reworded"])
            .arg(&reworded)
            .arg("--report")
            .arg(&report),
    );
    let r = read_json(&report);
    let chains: Vec<(&str, u64)> = r["methods"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["method"].as_str().unwrap(), m["chains"].as_u64().unwrap()))
        .collect();
    // Every fourth chain has a rewording, so only the first of 2 folds holds any out: 2 of them
    // there (`--limit 2`), none in the other.
    assert_eq!(chains, [("graph", 2), ("graph · as written", 2), ("graph · reworded", 2)]);
    let out = bin_in(dir.path())
        .args(["eval", "complexfuncbench", "--reworded-only", "--report"])
        .arg(dir.path().join("x.json"))
        .output()
        .unwrap();
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("--reworded"), "{out:?}");
}

#[test]
fn eval_complexfuncbench_scores_the_papers_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("eval/cfb.json");
    let reworded = root().join("eval/data/reworded/complexfuncbench-dev.jsonl");
    run_ok(
        bin_in(dir.path())
            .args(["eval", "complexfuncbench", "--data"])
            .arg(data().join("complexfuncbench"))
            .args(["--folds", "2", "--limit", "6", "--methods", "graph", "retrieve-greedy", "--reworded"])
            .arg(&reworded)
            .arg("--report")
            .arg(&report),
    );
    let r = read_json(&report);
    // The reworded requests of the held-out chains (every fourth chain has one: 3 of these 12),
    // run beside the same requests as written, in their own rows.
    let names: Vec<&str> = r["methods"].as_array().unwrap().iter().map(|m| m["method"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "graph",
            "retrieve-greedy",
            "graph · as written",
            "graph · reworded",
            "retrieve-greedy · as written",
            "retrieve-greedy · reworded"
        ]
    );
    let lines: Vec<serde_json::Value> =
        std::fs::read_to_string(&reworded).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let texts: Vec<&str> = lines.iter().map(|l| l["reworded"].as_str().unwrap()).collect();
    let rows: Vec<&serde_json::Value> =
        r["details"].as_array().unwrap().iter().filter(|d| d["method"] == "graph · reworded").collect();
    assert_eq!(
        (rows.len(), r["methods"][3]["chains"].as_u64(), r["methods"][2]["chains"].as_u64()),
        (3, Some(3), Some(3))
    );
    assert!(
        rows.iter().all(|d| texts.iter().any(|t| t.starts_with(d["request"].as_str().unwrap()))),
        "the reworded words were asked"
    );
    let methods = r["methods"].as_array().unwrap().iter().take(2).cloned().collect::<Vec<_>>();
    for m in &methods {
        assert_eq!(m["chains"], 12, "{m}");
        let (sr, acc) = (m["overall_success_rate"].as_f64().unwrap(), m["overall_call_acc"].as_f64().unwrap());
        assert!((0.0..=1.0).contains(&sr) && (0.0..=1.0).contains(&acc), "{m}");
    }
    // The paper's success is its protocol's alone (every golden call matched; the engine's own
    // `answered` is not part of it): the figure is the share of samples it scored a success.
    for m in &methods {
        let method = m["method"].as_str().unwrap();
        let details: Vec<&serde_json::Value> =
            r["details"].as_array().unwrap().iter().filter(|d| d["method"] == method).collect();
        let successes = details.iter().filter(|d| d["paper_success"] == true).count();
        assert_eq!(successes as f64 / 12.0, m["overall_success_rate"].as_f64().unwrap(), "{m}");
        assert!(
            details.iter().all(|d| d["paper_success"] == false || d["paper_first_error"].is_null()),
            "a success has no error"
        );
    }
    // The graph search gets calls right that one greedy pass does not.
    assert!(r["methods"][0]["overall_call_acc"].as_f64().unwrap() > 0.0, "{}", r["methods"][0]);
    let md = std::fs::read_to_string(report.with_extension("md")).unwrap();
    assert!(
        md.contains("| Claude-3.5-Sonnet | 61.00 | 79.27 |") && md.contains("**toolgraph `retrieve-greedy`**"),
        "{md}"
    );
    // Ablation flags are checked before anything runs.
    let bad = bin_in(dir.path())
        .args(["eval", "complexfuncbench", "--beta", "1.5", "--report"])
        .arg(&report)
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--beta"), "{}", String::from_utf8_lossy(&bad.stderr));
}

#[test]
fn eval_all_writes_one_report_with_every_benchmarks_own_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("eval");
    run_ok(
        bin_in(dir.path())
            .args(["eval", "all", "--data"])
            .arg(data())
            .args(["--folds", "2", "--limit", "3", "--methods", "graph", "--out"])
            .arg(&out),
    );
    let md = std::fs::read_to_string(out.join("report.md")).unwrap();
    for section in ["## ComplexFuncBench", "## NESTFUL v1", "## TaskBench, Daily Life APIs", "## API-Bank level-3"] {
        assert!(md.contains(section), "{section} missing:\n{md}");
    }
    // The published rows stand next to toolgraph's.
    assert!(md.contains("| GPT-4o (3-shot, best published) | — | — | — | 28.00 | 60.00 |"), "{md}");
    assert!(md.contains("| GPT-4 (published, all records) | 96.91 | 80.53 | — | 71.14 |"), "{md}");
    assert!(md.contains("| Claude-3.5-Sonnet | 61.00 | 79.27 |"), "{md}");
    let svg = std::fs::read_to_string(out.join("report.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.matches("font-weight=\"bold\"").count() == 5, "{svg}");

    // NESTFUL: three sets, 2 folds × at most 3 held-out samples each, plans carry the data flow
    // as the benchmark writes it.
    let nf = read_json(&out.join("nestful.json"));
    assert_eq!(nf["samples"], 18, "{}", nf["methods"]);
    let m = &nf["methods"][0];
    for k in ["f1_func", "f1_param", "partial_sequence_accuracy", "full_sequence_accuracy"] {
        assert!((0.0..=1.0).contains(&m[k].as_f64().unwrap()), "{k}: {m}");
    }
    assert!(m["f1_func"].as_f64().unwrap() > 0.0, "some right API: {m}");
    assert!(m["win_rate"].is_null(), "no recorded responses: no win rate");
    let plans = nf["plans"].to_string();
    assert!(plans.contains("\"$var1."), "a planned call takes an earlier output");
    // TaskBench: 26 gold records at hand, 2 folds × 3.
    let tb = read_json(&out.join("taskbench.json"));
    assert_eq!((tb["samples"].as_u64(), tb["tools"].as_u64()), (Some(6), Some(40)));
    assert!(tb["methods"][0]["n_f1"].as_f64().unwrap() > 0.0, "{}", tb["methods"][0]);
    // API-Bank level-3: executed against the recorded outputs.
    let ab = read_json(&out.join("apibank.json"));
    let m = &ab["methods"][0];
    assert_eq!(m["chains"], 6, "{m}");
    let (correct, success) = (m["call_correctness"].as_f64().unwrap(), m["all_calls_correct"].as_f64().unwrap());
    assert!((0.0..=1.0).contains(&correct) && (0.0..=1.0).contains(&success), "{m}");
    assert!(m["http_calls_mean"].as_f64().unwrap() > 0.0, "calls were executed: {m}");
    // ToolBench answers: re-planned and executed against their recorded observations; the rows
    // say which judge made them.
    let tbx = read_json(&out.join("toolbench.json"));
    assert_eq!((tbx["files"].as_u64(), tbx["judge"].as_str()), (Some(26), Some("deterministic")));
    assert_eq!(tbx["methods"][0]["queries"], 6, "{}", tbx["methods"][0]);
    assert!(tbx["tools"].as_u64().unwrap() > 0, "the answers' tools were read from the docs");
    assert!(md.contains("judged by toolgraph's `deterministic` judge"), "{md}");
}

/// `toolgraph eval score` on the shared ComplexFuncBench data: the gold chains written as a
/// model's predictions (literal values) score 100 % / 100; the same with one optional argument
/// dropped from every call that has one fails those samples; a line the tool cannot read is
/// skipped by number and the rest is scored.
#[test]
fn eval_score_scores_anyones_predictions_and_the_gold_chains_score_full_marks() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let d = data().join("complexfuncbench");
    let chains = toolgraph_ingest::complexfuncbench::read_chains(&d.join("data.json.gz"), 1 << 30).unwrap();
    let specs = toolgraph_ingest::complexfuncbench::read_specs(&d.join("spec.json.gz"), 1 << 30).unwrap();
    let optional: std::collections::HashMap<&str, Vec<&str>> = specs
        .iter()
        .map(|s| {
            (s.name.as_str(), s.query_parameters.iter().filter(|(_, p)| !p.required).map(|(n, _)| n.as_str()).collect())
        })
        .collect();
    // A model that follows the specs sends each value in its declared type (a reference keeps
    // the response's: 3 golden values are a number where the spec says string, or the reverse).
    let types: std::collections::HashMap<(&str, &str), &str> = specs
        .iter()
        .flat_map(|s| s.query_parameters.iter().map(move |(n, p)| ((s.name.as_str(), n.as_str()), p.ty.as_str())))
        .collect();
    let typed =
        |api: &str, args: &serde_json::Map<String, serde_json::Value>| -> serde_json::Map<String, serde_json::Value> {
            args.iter()
                .map(|(k, v)| {
                    let v = match (v, types.get(&(api, k.as_str())).copied()) {
                        (serde_json::Value::Number(n), Some("string")) => serde_json::Value::String(n.to_string()),
                        (serde_json::Value::String(t), Some("number")) => {
                            t.parse::<i64>().map(serde_json::Value::from).unwrap_or_else(|_| v.clone())
                        }
                        _ => v.clone(),
                    };
                    (k.clone(), v)
                })
                .collect()
        };
    let (mut gold, mut dropped) = (Vec::new(), Vec::new());
    let mut with_optional = 0;
    for c in &chains {
        let g = toolgraph_eval::chains::gold_of(c).unwrap();
        let calls: Vec<serde_json::Value> = g
            .calls
            .iter()
            .map(|c| serde_json::json!({"name": c.name, "arguments": typed(&c.name, &c.resolved)}))
            .collect();
        gold.push(serde_json::json!({"request": g.request, "calls": calls}).to_string());
        let mut any = false;
        let calls: Vec<serde_json::Value> = g
            .calls
            .iter()
            .map(|c| {
                let mut args = typed(&c.name, &c.resolved);
                if let Some(k) = optional[c.name.as_str()].iter().find(|k| args.contains_key(**k)) {
                    args.remove(*k);
                    any = true;
                }
                serde_json::json!({"name": c.name, "arguments": args})
            })
            .collect();
        if any {
            with_optional += 1;
            dropped.push(serde_json::json!({"request": g.request, "calls": calls}).to_string());
        }
    }
    let score = |name: &str, lines: &[String]| {
        let file = dir.path().join(format!("{name}.jsonl"));
        let mut f = std::fs::File::create(&file).unwrap();
        for l in lines {
            writeln!(f, "{l}").unwrap();
        }
        let report = dir.path().join(format!("{name}.json"));
        let out = run_ok(
            bin_in(dir.path())
                .args(["eval", "score", "--chains"])
                .arg(d.join("data.json.gz"))
                .arg("--spec")
                .arg(d.join("spec.json.gz"))
                .arg("--predictions")
                .arg(&file)
                .arg("--report")
                .arg(&report),
        );
        (read_json(&report), String::from_utf8_lossy(&out.stdout).to_string())
    };
    let mut lines = gold.clone();
    lines.insert(3, "{\"request\": 1}".into());
    let (r, stdout) = score("gold", &lines);
    assert_eq!(
        r["overall_success"],
        100.0,
        "{}",
        r["requests"].as_array().unwrap().iter().find(|x| x["success"] == false).unwrap_or(&r["skipped"])
    );
    assert_eq!(r["overall_call_acc"], 100.0);
    assert!(stdout.contains("| 100.00 | 100.00 |"), "{stdout}");
    let skipped = r["skipped"].as_array().unwrap();
    assert_eq!(
        (skipped.len(), r["scored"].as_u64(), r["chains_without_prediction"].as_u64()),
        (1, Some(chains.len() as u64), Some(0)),
        "{skipped:?}"
    );
    assert!(skipped[0].as_str().unwrap().starts_with("line 4: not a prediction"), "{skipped:?}");
    let first = &r["requests"][0];
    assert_eq!((first["success"].as_bool(), first["first_error"].is_null()), (Some(true), true), "{first}");
    assert!(first["answers"].as_array().unwrap().iter().all(|a| a == "exact"), "{first}");
    assert!(with_optional > 100, "{with_optional} chains have a call with an optional argument");
    let (r, _) = score("dropped", &dropped);
    let successes = r["requests"].as_array().unwrap().iter().filter(|x| x["success"] == true).count();
    // A dropped optional argument only passes where another recording has exactly that call and
    // the golden response (the real API answered alike) — or the call was a free location search.
    assert!(
        successes * 10 < with_optional,
        "{successes} of {with_optional} still succeed with an optional argument dropped"
    );
}

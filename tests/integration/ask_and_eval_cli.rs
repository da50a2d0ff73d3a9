//! `toolgraph sandbox`, `toolgraph ask` and `toolgraph eval chains` as a user runs them: the
//! binary learns ComplexFuncBench chains, the replay sandbox (a real HTTP server, started as its
//! own process) serves their recorded responses, and `ask` plans and executes a request over HTTP.

use crate::common::*;
use std::process::{Child, Stdio};

struct Sandbox(Child);
impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_sandbox(port: u16) -> Sandbox {
    let d = data().join("complexfuncbench");
    let child = bin().args(["sandbox", "--chains"]).arg(d.join("data.json.gz")).arg("--spec").arg(d.join("spec.json.gz")).args(["--port", &port.to_string()]).stderr(Stdio::null()).spawn().unwrap();
    let sb = Sandbox(child);
    for _ in 0..200 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return sb;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!("the sandbox did not listen on {port}");
}

#[test]
fn ask_plans_and_executes_a_chain_through_the_sandbox() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = ingest_complexfuncbench(dir.path());

    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let _sb = start_sandbox(port);
    // Unknown calls get the API's error shape, unknown routes a 404.
    let request = "Today is November 15th, 2024. I want to rent a car for a day at the Los Angeles International Airport. Could you compare the price differences for picking up the car at 8 AM tomorrow and the day after tomorrow at the same place for a 24-hour rental?";
    let rewrite = format!("https://=http://127.0.0.1:{port}/");
    let ask = |extra: &[&str]| {
        let mut c = bin_in(dir.path());
        c.arg("--store").arg(&store).args(["ask", request, "--rewrite", &rewrite, "--json"]).args(extra);
        c.output().unwrap()
    };
    let out = ask(&[]);
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
    // The judged-good run was remembered: asked again, it is replayed with no planner decision.
    let out = ask(&[]);
    let r2: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r2["stats"]["recalled"], true, "{:#}", r2["trace"][0]);
    assert_eq!(r2["stats"]["planner_calls"], 0);
    assert_eq!(r2["chain"].as_array().unwrap().len(), names.len());

    // The human-readable form.
    let mut c = bin_in(dir.path());
    let out = c.arg("--store").arg(&store).args(["ask", request, "--rewrite", &rewrite, "--no-learn"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("status: answered") && text.contains("var1 = Search_Car_Location(") && text.contains("answer: "), "{text}");

    // Plan only: the tools point at a port nothing listens on, and the plan still comes back
    // (nothing is sent), with its data flow as references.
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let out = bin_in(dir.path()).arg("--store").arg(&store).args(["ask", request, "--dry-run", "--json", "--rewrite", &format!("https://=http://127.0.0.1:{dead}/")]).output().unwrap();
    let d: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!((d["stats"]["dry_run"].as_bool(), d["stats"]["http_calls"].as_u64(), d["stats"]["failed_calls"].as_u64()), (Some(true), Some(0), Some(0)), "{d:#}");
    assert_eq!(d["chain"][0]["name"], "Search_Car_Location", "{d:#}");
    let out = bin_in(dir.path()).arg("--store").arg(&store).args(["ask", request, "--dry-run", "--no-learn"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("(planned only: nothing was sent)"), "{}", String::from_utf8_lossy(&out.stdout));

    // Nothing to learn from yet: a clear message, not a crash.
    let empty = format!("embedded:{}", dir.path().join("empty.redb").display());
    let out = bin_in(dir.path()).arg("--store").arg(&empty).args(["ask", "hello"]).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("run `toolgraph ingest` first"));
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
    let plan_runs: Vec<&serde_json::Value> = r["details"].as_array().unwrap().iter().filter(|d| d["method"] == "plan").collect();
    assert_eq!(plan_runs.len(), 16);
    let completed: Vec<&&serde_json::Value> = plan_runs.iter().filter(|d| !d["plan"].as_array().unwrap().is_empty() && d["plan_fallback"].is_null()).collect();
    assert!(!completed.is_empty() && completed.iter().all(|d| d["planner_calls"].as_u64().unwrap() <= 2), "{completed:?}");
    assert_eq!(r["methods"][1]["plans_completed"].as_u64(), Some(completed.len() as u64));
    assert!(plan_runs.iter().all(|d| d["recall"].as_array().is_some_and(|a| a[1] == true) || !d["plan"].as_array().unwrap().is_empty() || d["plan_fallback"].is_string()), "{plan_runs:?}");
    for m in r["methods"].as_array().unwrap() {
        assert_eq!(m["chains"], 16, "{m}");
        for k in ["call_f1", "edge_f1", "argument_accuracy", "exact_match", "success", "answered_precision", "answered_recall", "overall_success_rate", "overall_call_acc"] {
            let v = m[k].as_f64().unwrap();
            assert!((0.0..=1.0).contains(&v), "{k} = {v}");
        }
        let outcomes: u64 = ["answered", "partial", "gave_up", "needs_input"].iter().map(|k| m[k].as_u64().unwrap()).sum();
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
    assert!(md.contains("| model | Overall Success Rate | Overall Call Acc. |") && md.contains("| GPT-4o | 60.50 | 80.55 |") && md.contains("| **toolgraph `graph`** |"), "{md}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("call F1"));
}

#[test]
fn eval_complexfuncbench_scores_the_papers_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("eval/cfb.json");
    run_ok(bin_in(dir.path()).args(["eval", "complexfuncbench", "--data"]).arg(data().join("complexfuncbench")).args(["--folds", "2", "--limit", "6", "--methods", "graph", "retrieve-greedy", "--report"]).arg(&report));
    let r = read_json(&report);
    for m in r["methods"].as_array().unwrap() {
        assert_eq!(m["chains"], 12, "{m}");
        let (sr, acc) = (m["overall_success_rate"].as_f64().unwrap(), m["overall_call_acc"].as_f64().unwrap());
        assert!((0.0..=1.0).contains(&sr) && (0.0..=1.0).contains(&acc), "{m}");
        // A success needs a complete answer: never more successes than answered runs.
        assert!(sr * 12.0 <= m["answered"].as_f64().unwrap() + 1e-9, "{m}");
    }
    // The graph search gets calls right that one greedy pass does not.
    assert!(r["methods"][0]["overall_call_acc"].as_f64().unwrap() > 0.0, "{}", r["methods"][0]);
    let md = std::fs::read_to_string(report.with_extension("md")).unwrap();
    assert!(md.contains("| Claude-3.5-Sonnet | 61.00 | 79.27 |") && md.contains("**toolgraph `retrieve-greedy`**"), "{md}");
    // Ablation flags are checked before anything runs.
    let bad = bin_in(dir.path()).args(["eval", "complexfuncbench", "--beta", "1.5", "--report"]).arg(&report).output().unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--beta"), "{}", String::from_utf8_lossy(&bad.stderr));
}

#[test]
fn eval_all_writes_one_report_with_every_benchmarks_own_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("eval");
    run_ok(bin_in(dir.path()).args(["eval", "all", "--data"]).arg(data()).args(["--folds", "2", "--limit", "3", "--methods", "graph", "--out"]).arg(&out));
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

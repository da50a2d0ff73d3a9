//! Load on the daemon: `POST /v1/orchestrate` over real HTTP on 127.0.0.1, deterministic planner,
//! ComplexFuncBench's learned graph, tool calls answered by the replay sandbox (real recorded
//! responses), at 1, 8 and 64 concurrent clients, with every run and session persisted in each
//! state store side by side: SQLite in memory (the baseline: no disk), a SQLite file (the embedded
//! default) and PostgreSQL (when `TOOLGRAPH_TEST_POSTGRES_URL` names one, e.g. from
//! `scripts/postgres.sh start`, with `TOOLGRAPH_STATE_PASSWORD_FILE`), with run records committed
//! without waiting for the WAL flush (the default) and waiting for it (`postgres-sync`). Stores take turns level by
//! level and round by round; the table shows each level's median over the rounds and the ratio of
//! requests/s to the in-memory store. Prints requests/s, p50/p99 latency, errors, run outcomes and
//! the process's resident memory.
//!
//! cargo bench --bench daemon_load -- [--seconds N] [--rounds R] [--clients 1,8,64] [--faults RATE] [--distinct]
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
use toolgraph_engine::plan::DeterministicPlanner;
use toolgraph_engine::run::RunSettings;
use toolgraph_eval::chains::{learn, recordings, Learned};
use toolgraph_ingest::complexfuncbench::{read_chains, read_specs, Chain};
use toolgraph_sandbox::{self as sandbox, Faults, Library, Sandbox};
use toolgraph_schema::Settings;
use toolgraph_server::daemon::limits::ApiKeys;
use toolgraph_server::daemon::{Daemon, Stack};
use toolgraph_server::state::StateStore;

/// One level's measurement.
#[derive(Clone, Copy, Default)]
struct Level {
    n: usize,
    rps: f64,
    p50: f64,
    p99: f64,
    errors: usize,
    /// answered, partial, gave up, needs input
    outcomes: [usize; 4],
}

fn median(mut v: Vec<f64>) -> f64 {
    quantile(&mut v, 0.5)
}

/// `clients` clients posting requests to `url` for `seconds`.
async fn level(
    http: &reqwest::Client,
    url: &str,
    requests: &Arc<Vec<String>>,
    counter: &Arc<AtomicUsize>,
    clients: usize,
    seconds: f64,
    distinct: bool,
) -> Level {
    let deadline = Instant::now() + Duration::from_secs_f64(seconds);
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let (http, url, requests, counter) = (http.clone(), url.to_string(), requests.clone(), counter.clone());
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            let (mut errors, mut outcomes) = (0usize, [0usize; 4]);
            while Instant::now() < deadline {
                let n = counter.fetch_add(1, Ordering::Relaxed);
                let base = &requests[n % requests.len()];
                let text = if distinct { format!("{base} (request {n})") } else { base.clone() };
                let t = Instant::now();
                match http.post(&url).json(&json!({"request": text})).send().await {
                    Ok(r) if r.status() == 200 => match r.json::<Value>().await {
                        Ok(v) => match v["status"].as_str() {
                            Some("answered") => outcomes[0] += 1,
                            Some("partial") => outcomes[1] += 1,
                            Some("gave_up") => outcomes[2] += 1,
                            Some("needs_input") => outcomes[3] += 1,
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
    let mut out = Level::default();
    for t in tasks {
        let (l, e, o) = t.await.unwrap();
        lat.extend(l);
        out.errors += e;
        for (total, n) in out.outcomes.iter_mut().zip(o) {
            *total += n;
        }
    }
    out.n = lat.len();
    out.rps = out.n as f64 / started.elapsed().as_secs_f64();
    out.p50 = quantile(&mut lat, 0.5);
    out.p99 = quantile(&mut lat, 0.99);
    out
}

fn rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<f64>().ok())
        })
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

/// The medians of every level and store, as a Markdown table.
fn print_table(levels: &[usize], names: &[&str], results: &[Vec<Vec<Level>>]) {
    println!("| clients | state store | requests | req/s | vs in-memory | p50 ms | p99 ms | errors | answered | partial | gave up | needs input |");
    println!("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (li, &clients) in levels.iter().enumerate() {
        let base = median(results[li][0].iter().map(|l| l.rps).collect());
        for (di, name) in names.iter().enumerate() {
            let r = &results[li][di];
            let rps = median(r.iter().map(|l| l.rps).collect());
            let sum = |f: &dyn Fn(&Level) -> usize| r.iter().map(f).sum::<usize>();
            println!(
                "| {clients} | {} | {} | {rps:.0} | {:.2} | {:.1} | {:.1} | {} | {} | {} | {} | {} |",
                name,
                sum(&|l| l.n),
                rps / base,
                median(r.iter().map(|l| l.p50).collect()),
                median(r.iter().map(|l| l.p99).collect()),
                sum(&|l| l.errors),
                sum(&|l| l.outcomes[0]),
                sum(&|l| l.outcomes[1]),
                sum(&|l| l.outcomes[2]),
                sum(&|l| l.outcomes[3]),
            );
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let flag = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned();
    let seconds: f64 = flag("--seconds").and_then(|s| s.parse().ok()).unwrap_or(10.0);
    let fault_rate: f64 = flag("--faults").and_then(|s| s.parse().ok()).unwrap_or(0.0);
    let distinct = args.iter().any(|a| a == "--distinct");
    let data = std::env::var_os("TOOLGRAPH_SHARED_DATA")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/data"));
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
        let learned: Learned = learn(dir.path(), &train, &specs, &s, emb.clone(), None).await.unwrap();
        let (recs, _) = recordings(&chains, &specs);
        let q = fault_rate / 4.0;
        let faults = Faults { timeout_rate: q, hang_ms: 400, server_error_rate: q, throttle_rate: q, retry_after_s: 1, garbage_rate: q, seed: 7, ..Faults::default() };
        let sb = Sandbox::new(Library::new(recs), faults);
        let (sb_addr, _sb_stop) = sandbox::spawn("127.0.0.1:0", sb.clone()).await.unwrap();
        let exec = Executor::new(ExecSettings { rewrites: vec![("https://".into(), format!("http://{sb_addr}/"))], allow_private: vec!["127.0.0.1/32".into()], timeout_ms: 300, retries: 2, backoff_ms: 10, max_retry_after_ms: 50, ..ExecSettings::default() }).unwrap();
        // Learning off so every level sees the same graph and memory.
        let run = RunSettings { learn: false, remember: false, ..RunSettings::default() };
        let rounds: usize = flag("--rounds").and_then(|s| s.parse().ok()).unwrap_or(3);
        let levels: Vec<usize> = flag("--clients").map(|s| s.split(',').filter_map(|x| x.trim().parse().ok()).collect()).unwrap_or_else(|| vec![1, 8, 64]);
        let mut stores: Vec<(String, String)> = vec![("sqlite-memory".into(), "sqlite::memory:".into()), ("sqlite-file".into(), format!("sqlite:{}", dir.path().join("state.db").display()))];
        match std::env::var("TOOLGRAPH_TEST_POSTGRES_URL") {
            Ok(u) => {
                stores.push(("postgres".into(), u.clone()));
                stores.push(("postgres-sync".into(), u));
            }
            Err(_) => println!("(no TOOLGRAPH_TEST_POSTGRES_URL: PostgreSQL left out; start one with scripts/postgres.sh start)"),
        }
        let requests: Arc<Vec<String>> = Arc::new(chains.iter().map(|c| c.input.trim().to_string()).collect());
        let counter = Arc::new(AtomicUsize::new(0));
        let http = reqwest::Client::builder().pool_max_idle_per_host(256).build().unwrap();
        // One daemon per state store over the same graph, memory and sandbox.
        let mut daemons = Vec::new();
        for (name, state_url) in &stores {
            // postgres-sync: run records wait for the WAL flush too (state.synchronous_runs).
            let state = Arc::new(StateStore::open(state_url, 16).await.unwrap().with_synchronous_runs(name == "postgres-sync"));
            let stack = Stack { settings: Settings { run: run.clone(), ..s.clone() }, ..learned.stack(&s, exec.clone(), Arc::new(DeterministicPlanner::default())) };
            let daemon = Daemon::new(stack, Some(state), ApiKeys::default()).await.unwrap();
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let url = format!("http://{}/v1/orchestrate", listener.local_addr().unwrap());
            let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
            let server = tokio::spawn(toolgraph_server::daemon::serve(listener, daemon.clone(), async move {
                let _ = stop_rx.await;
            }));
            // Warm-up: every request text once (8 at a time), so that repeated texts find their
            // embedding in the daemon's memo and the levels measure the daemon and its state store.
            if !distinct {
                let mut chunks = Vec::new();
                for part in requests.chunks(requests.len().div_ceil(8)) {
                    let (http, url, part) = (http.clone(), url.clone(), part.to_vec());
                    chunks.push(tokio::spawn(async move {
                        for r in part {
                            let _ = http.post(&url).json(&json!({"request": r})).send().await;
                        }
                    }));
                }
                for c in chunks {
                    let _ = c.await;
                }
            }
            daemons.push((name.clone(), url, daemon, stop_tx, server));
        }
        println!(
            "daemon load: {} requests (ComplexFuncBench), {seconds}s per level and store, {rounds} rounds (medians), tool faults {:.0}%, {} texts, every run persisted",
            requests.len(),
            fault_rate * 100.0,
            if distinct { "distinct" } else { "repeating" }
        );
        let mut results: Vec<Vec<Vec<Level>>> = vec![vec![Vec::new(); daemons.len()]; levels.len()];
        for round in 0..rounds {
            for (li, &clients) in levels.iter().enumerate() {
                // Alternate the order so that no store always goes first.
                let order: Vec<usize> = if round % 2 == 0 { (0..daemons.len()).collect() } else { (0..daemons.len()).rev().collect() };
                for di in order {
                    results[li][di].push(level(&http, &daemons[di].1, &requests, &counter, clients, seconds, distinct).await);
                }
            }
        }
        let names: Vec<&str> = daemons.iter().map(|d| d.0.as_str()).collect();
        print_table(&levels, &names, &results);
        println!("RSS at the end: {:.0} MiB", rss_mib());
        let st = sb.stats();
        println!("sandbox: {}", serde_json::to_string(&st).unwrap_or_default());
        // Stop the daemons (their stores flush) before their folder goes.
        for (_, _, daemon, stop_tx, server) in daemons {
            let _ = stop_tx.send(());
            let _ = server.await;
            drop(daemon);
        }
        drop(learned);
        drop(dir);
    });
}

//! Helpers for end-to-end tests of the `toolgraph` binary.
#![allow(dead_code)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use toolgraph_schema::GraphSnapshot;

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The shared public data, read in place (`../shared/data`, or `TOOLGRAPH_SHARED_DATA`).
pub fn data() -> PathBuf {
    std::env::var_os("TOOLGRAPH_SHARED_DATA").map(PathBuf::from).unwrap_or_else(|| root().join("../shared/data"))
}

/// The binary, with the vector store in a fresh temporary folder (so tests never share or touch
/// the repository's .tgdata) and no embedding cache; tests that want their own set the variables.
pub fn bin() -> Command {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let vectors = std::env::temp_dir().join(format!("toolgraph-test-vectors-{}-{n}", std::process::id()));
    let mut c = Command::new(env!("CARGO_BIN_EXE_toolgraph"));
    c.env("TOOLGRAPH_LOG", "warn");
    c.env_remove("TOOLGRAPH_CONFIG");
    c.env("TOOLGRAPH__VECTORS__URI", format!("embedded:{}", vectors.display()));
    c.env("TOOLGRAPH__EMBED__CACHE", "");
    c
}

/// The binary with its vector store and embedding cache under `dir` (shared by every call).
pub fn bin_in(dir: &Path) -> Command {
    let mut c = bin();
    c.env("TOOLGRAPH__VECTORS__URI", format!("embedded:{}", dir.join("vectors").display()));
    c.env("TOOLGRAPH__EMBED__CACHE", dir.join("embeddings.redb").display().to_string());
    c
}

pub fn run_ok(cmd: &mut Command) -> Output {
    let out = cmd.output().expect("toolgraph runs");
    assert!(
        out.status.success(),
        "toolgraph failed ({}):\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Arguments that ingest all of the shared ToolBench data and docs.
pub fn shared_ingest_args() -> Vec<String> {
    let d = data();
    // 47k APIs: embedding them all is `toolgraph index`'s job (minutes), not these tests'.
    let mut args = vec!["ingest".to_string(), "--no-index".into(), "--toolbench".into(), d.join("toolbench/answer").display().to_string()];
    args.push("--queries".into());
    let mut queries: Vec<PathBuf> = std::fs::read_dir(d.join("stabletoolbench/queries"))
        .expect("shared queries")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    queries.sort();
    args.extend(queries.iter().map(|p| p.display().to_string()));
    args.push("--tools".into());
    args.push(d.join("toolenv/tools.jsonl.gz").display().to_string());
    args
}

pub fn read_json(path: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

/// Open a store by URI and take its snapshot.
pub fn snapshot(uri: &str, graph: &str) -> GraphSnapshot {
    runtime().block_on(async {
        let mut s = toolgraph_engine::settings::load(None, &[]).unwrap().store;
        s.uri = uri.to_string();
        s.graph = graph.to_string();
        let store = toolgraph_engine::store::open(&s).await.unwrap();
        store.snapshot().await.unwrap()
    })
}

/// Equal up to the 15 significant digits FalkorDB returns floats with.
pub fn assert_same_graph(a: &GraphSnapshot, b: &GraphSnapshot) {
    assert_eq!(a.apis.len(), b.apis.len(), "API count");
    assert_eq!(a.tools, b.tools, "tools");
    assert_eq!(a.categories, b.categories, "categories");
    assert_eq!(a.feeds, b.feeds, "FEEDS edges");
    for (id, x) in &a.apis {
        let y = b.apis.get(id).unwrap_or_else(|| panic!("API {id} missing"));
        let mut y2 = y.clone();
        y2.score = x.score;
        assert_eq!(x, &y2, "API {id}");
        assert!((x.score - y.score).abs() < 1e-9, "score of {id}");
    }
    assert_eq!(a.next.len(), b.next.len(), "NEXT edge count");
    for (k, e) in &a.next {
        let f = b.next.get(k).unwrap_or_else(|| panic!("NEXT {k:?} missing"));
        assert_eq!(e.count, f.count, "count of {k:?}");
        assert!((e.static_weight - f.static_weight).abs() < 1e-9, "static weight of {k:?}");
        assert!((e.dynamic_weight - f.dynamic_weight).abs() < 1e-9, "dynamic weight of {k:?}");
    }
}

/// Successors' static and dynamic weights sum to 1 for every node with successors.
pub fn assert_weights_sum_to_one(s: &GraphSnapshot) {
    let mut sums: std::collections::BTreeMap<&str, (f64, f64)> = Default::default();
    for ((from, _), e) in &s.next {
        let x = sums.entry(from.as_str()).or_default();
        x.0 += e.static_weight;
        x.1 += e.dynamic_weight;
    }
    assert!(!sums.is_empty(), "no NEXT edges");
    for (from, (st, dy)) in sums {
        assert!((st - 1.0).abs() < 1e-9, "static weights of {from} sum to {st}");
        assert!((dy - 1.0).abs() < 1e-9, "dynamic weights of {from} sum to {dy}");
    }
}

/// A FalkorDB server of our own on a free loopback port, stopped when dropped.
pub struct Falkor {
    pub port: u16,
    dir: tempfile::TempDir,
}

impl Falkor {
    /// Start one. Needs `scripts/setup.sh` to have fetched the binaries (CI does).
    pub fn start() -> Falkor {
        let assets = std::env::var("TOOLGRAPH_ASSETS").map(PathBuf::from).unwrap_or_else(|_| root().join(".assets"));
        assert!(
            assets.join("falkordb/redis-server").exists(),
            "FalkorDB binaries missing under {}: run scripts/setup.sh (or set TOOLGRAPH_ASSETS)",
            assets.display()
        );
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new("bash")
            .arg(root().join("scripts/falkordb.sh"))
            .args(["start", &port.to_string()])
            .env("TOOLGRAPH_ASSETS", &assets)
            .env("TOOLGRAPH_FALKORDB_DATA", dir.path())
            .current_dir(root())
            .output()
            .unwrap();
        assert!(out.status.success(), "falkordb did not start: {}", String::from_utf8_lossy(&out.stderr));
        Falkor { port, dir }
    }
    pub fn uri(&self) -> String {
        format!("falkordb://127.0.0.1:{}", self.port)
    }
}

impl Drop for Falkor {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(root().join("scripts/falkordb.sh"))
            .args(["stop", &self.port.to_string()])
            .env("TOOLGRAPH_FALKORDB_DATA", self.dir.path())
            .current_dir(root())
            .output();
    }
}

/// Convert the ComplexFuncBench chains and ingest them (docs + runs, APIs embedded) into an
/// embedded store under `dir`, with the vectors and embedding cache of [`bin_in`]; returns the
/// store URI and the ingest's output.
pub fn ingest_complexfuncbench(dir: &Path) -> (String, Output) {
    let d = data().join("complexfuncbench");
    let runs = dir.join("cfb.jsonl");
    let tools = dir.join("cfb-tools.jsonl");
    run_ok(bin().args(["convert", "complexfuncbench", "--data"]).arg(d.join("data.json.gz")).arg("--spec").arg(d.join("spec.json.gz")).arg("--out").arg(&runs).arg("--tools-out").arg(&tools));
    let store = format!("embedded:{}", dir.join("g.redb").display());
    let out = run_ok(bin_in(dir).arg("--store").arg(&store).arg("ingest").arg("--tools").arg(&tools).arg("--trajectories").arg(&runs));
    (store, out)
}

//! Helpers for end-to-end tests of the `toolgraph` binary.
#![allow(dead_code)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use toolgraph_schema::GraphSnapshot;

mod scratch;
mod transcripts;
mod watch;
pub use scratch::*;
// Only the integration tests ingest chat transcripts; accounts_and_state shares this module.
#[allow(unused_imports)]
pub use transcripts::*;
pub use watch::*;

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
    let vectors = scratch().join(format!("vectors-{n}"));
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
    let mut args = vec![
        "ingest".to_string(),
        "--no-index".into(),
        "--toolbench".into(),
        d.join("toolbench/answer").display().to_string(),
    ];
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

/// The assets folder (`TOOLGRAPH_ASSETS`, else `.assets`), where `scripts/setup.sh` puts them.
pub fn assets() -> PathBuf {
    std::env::var("TOOLGRAPH_ASSETS").map(PathBuf::from).unwrap_or_else(|_| root().join(".assets"))
}

/// `scripts/falkordb.sh CMD PORT` with its data in `data`.
pub fn falkordb_script(cmd: &str, port: u16, data: &Path) -> Output {
    Command::new("bash")
        .arg(root().join("scripts/falkordb.sh"))
        .args([cmd, &port.to_string()])
        .env("TOOLGRAPH_ASSETS", assets())
        .env("TOOLGRAPH_FALKORDB_DATA", data)
        .current_dir(root())
        .output()
        .unwrap()
}

impl Falkor {
    /// Start one. Needs `scripts/setup.sh` to have fetched the binaries (CI does).
    pub fn start() -> Falkor {
        let assets = assets();
        assert!(
            assets.join("falkordb/redis-server").exists(),
            "FalkorDB binaries missing under {}: run scripts/setup.sh (or set TOOLGRAPH_ASSETS)",
            assets.display()
        );
        // redis-server takes its port from the command line: a port free a moment ago may be
        // taken by another test's server before it binds, so a start that fails is tried again
        // on another port.
        let mut errors = Vec::new();
        for _ in 0..3 {
            let port = steady_port();
            let dir = tempfile::tempdir().unwrap();
            let out = falkordb_script("start", port, dir.path());
            // Ours only when it wrote its pid file in our folder: the script also succeeds when
            // some other FalkorDB already answers on that port (another test's, started between
            // the pick and this start). A server of ours that lost the port to another one wrote
            // its pid file too before it aborted: the script refuses a server whose reported pid
            // is not ours (else two tests share one server, and the first to end stops it under
            // the other).
            if out.status.success() && dir.path().join("redis.pid").exists() {
                return Falkor { port, dir };
            }
            errors.push(format!("port {port}: {}", String::from_utf8_lossy(&out.stderr)));
            falkordb_script("stop", port, dir.path());
        }
        panic!("falkordb did not start: {}", errors.join("\n"))
    }
    pub fn uri(&self) -> String {
        format!("falkordb://127.0.0.1:{}", self.port)
    }

    /// The last lines of the server's log (for a failing test's message: a crash report, a
    /// shutdown, a refused fork).
    pub fn log_tail(&self) -> String {
        tail_of(&self.dir.path().join("redis.log"), 30)
    }

    /// Whether the server answers `PING` within 10 s, in words (never panics: for a hang's account).
    pub fn ping_text(&self) -> String {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.command(&["PING"]))) {
            Ok(reply) => format!("PING answered {reply:?}"),
            Err(_) => "PING not answered within 10 s (the server is stuck or gone)".to_string(),
        }
    }

    /// Stop the server now (SIGTERM, then SIGKILL after 5 s); dropping it later finds it stopped.
    pub fn stop(&self) {
        falkordb_script("stop", self.port, self.dir.path());
    }

    /// Send one command to the server (RESP over a plain socket) and return its first reply
    /// line (`+OK`, `-ERR …`, `:1`).
    pub fn command(&self, args: &[&str]) -> String {
        use std::io::{BufRead, Write};
        let mut out = format!("*{}\r\n", args.len());
        for a in args {
            out.push_str(&format!("${}\r\n{a}\r\n", a.len()));
        }
        let sock = std::net::TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        sock.set_read_timeout(Some(std::time::Duration::from_secs(10))).unwrap();
        (&sock).write_all(out.as_bytes()).unwrap();
        let mut line = String::new();
        std::io::BufReader::new(&sock).read_line(&mut line).unwrap();
        line.trim_end().to_string()
    }
}

impl Drop for Falkor {
    fn drop(&mut self) {
        falkordb_script("stop", self.port, self.dir.path());
    }
}

/// `toolgraph convert complexfuncbench` of the shared chains into `dir`: the runs (`cfb.jsonl`),
/// the tool docs (`cfb-tools.jsonl`) and the output of the conversion.
pub fn convert_complexfuncbench(dir: &Path) -> (PathBuf, PathBuf, Output) {
    let d = data().join("complexfuncbench");
    convert_chains(dir, &d.join("data.json.gz"), &d.join("spec.json.gz"))
}

/// `toolgraph convert complexfuncbench` of the chains `chains` (ComplexFuncBench's format) with
/// their API docs `spec` into `dir`: the runs (`cfb.jsonl`), the tool docs (`cfb-tools.jsonl`)
/// and the output of the conversion.
pub fn convert_chains(dir: &Path, chains: &Path, spec: &Path) -> (PathBuf, PathBuf, Output) {
    let runs = dir.join("cfb.jsonl");
    let tools = dir.join("cfb-tools.jsonl");
    let out = run_ok(
        bin()
            .args(["convert", "complexfuncbench", "--data"])
            .arg(chains)
            .arg("--spec")
            .arg(spec)
            .arg("--out")
            .arg(&runs)
            .arg("--tools-out")
            .arg(&tools),
    );
    (runs, tools, out)
}

/// Ingest the tool docs `tools` and the runs `runs` into `store`, with the vectors and embedding
/// cache of [`bin_in`] under `dir`; returns the ingest's output.
pub fn ingest_runs(dir: &Path, store: &str, tools: &Path, runs: &Path) -> Output {
    run_ok(
        bin_in(dir).arg("--store").arg(store).arg("ingest").arg("--tools").arg(tools).arg("--trajectories").arg(runs),
    )
}

/// Convert the ComplexFuncBench chains and ingest them (docs + runs, APIs embedded) into an
/// embedded store under `dir`, with the vectors and embedding cache of [`bin_in`]; returns the
/// store URI and the ingest's output.
pub fn ingest_complexfuncbench(dir: &Path) -> (String, Output) {
    let store = format!("embedded:{}", dir.join("g.redb").display());
    let out = ingest_complexfuncbench_into(dir, &store, None);
    (store, out)
}

/// [`ingest_complexfuncbench`] into the store `store` (on `neo`, a Neo4j server, with its
/// password), vectors and embedding cache under `dir`; returns the ingest's output.
pub fn ingest_complexfuncbench_into(dir: &Path, store: &str, neo: Option<&Neo4jServer>) -> Output {
    let (runs, tools, _) = convert_complexfuncbench(dir);
    let mut ingest = bin_in(dir);
    if let Some(n) = neo {
        n.env(&mut ingest);
    }
    run_ok(ingest.arg("--store").arg(store).arg("ingest").arg("--tools").arg(&tools).arg("--trajectories").arg(&runs))
}

/// A Neo4j server for tests: the real database engine (`scripts/neo4j.sh`, jars from Maven Central).
pub struct Neo4jServer {
    pub port: u16,
    password: String,
    /// Set for a server this process started: its data folder, and whether to stop it on drop.
    own: Option<tempfile::TempDir>,
}

impl Neo4jServer {
    pub fn uri(&self) -> String {
        format!("neo4j://127.0.0.1:{}", self.port)
    }
    pub fn password(&self) -> secrecy::SecretString {
        secrecy::SecretString::from(self.password.clone())
    }
    /// The password as text, to check that it appears nowhere.
    pub fn password_text(&self) -> String {
        self.password.clone()
    }
    /// Give `cmd` what it needs to reach this server (the password, through the environment).
    pub fn env<'a>(&self, cmd: &'a mut Command) -> &'a mut Command {
        cmd.env("TOOLGRAPH_NEO4J_PASSWORD", &self.password).env_remove("TOOLGRAPH_NEO4J_PASSWORD_FILE")
    }

    /// A server of this test's own on a free port, stopped when dropped (for tests that stop and
    /// start it). It stops by itself if this process dies.
    pub fn start_own() -> Neo4jServer {
        // The launcher takes its port from the command line: a port free a moment ago may be
        // taken before it binds, so a start that fails is tried again on another port.
        let mut errors = Vec::new();
        for _ in 0..3 {
            let port = steady_port();
            let dir = tempfile::tempdir().unwrap();
            let password = format!("test-{}-{}", std::process::id(), port);
            let s = Neo4jServer { port, password, own: Some(dir) };
            match s.try_script("start") {
                Ok(()) => return s,
                Err(e) => errors.push(format!("port {port}: {e}")),
            }
        }
        panic!("neo4j did not start: {}", errors.join("\n"))
    }

    fn script(&self, cmd: &str) {
        if let Err(e) = self.try_script(cmd) {
            panic!("neo4j {cmd} failed: {e}");
        }
    }

    fn try_script(&self, cmd: &str) -> Result<(), String> {
        let dir = self.own.as_ref().expect("only a server of our own is started or stopped here");
        let out = Command::new("bash")
            .arg(root().join("scripts/neo4j.sh"))
            .args([cmd, &self.port.to_string()])
            .env("TOOLGRAPH_NEO4J_DATA", dir.path())
            .env("TOOLGRAPH_NEO4J_PASSWORD", &self.password)
            .env_remove("TOOLGRAPH_NEO4J_PASSWORD_FILE")
            .env("TOOLGRAPH_NEO4J_PARENT_PID", std::process::id().to_string())
            .env("TOOLGRAPH_NEO4J_HEAP", "512m")
            .env("TOOLGRAPH_NEO4J_PAGECACHE_MB", "128")
            // Restarted beside the rest of the suite on a 2-core machine, the JVM may start slowly.
            .env("TOOLGRAPH_NEO4J_START_WAIT_S", "360")
            .current_dir(root())
            .output()
            .unwrap();
        if out.status.success() {
            Ok(())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }

    /// Stop a server of our own (its data stays for [`Neo4jServer::restart`]).
    pub fn stop(&self) {
        self.script("stop");
    }
    pub fn restart(&self) {
        self.script("start");
    }

    /// Delete every node and relationship (constraints stay: setup is idempotent).
    pub fn wipe(&self) {
        runtime().block_on(async {
            let g = neo4rs::Graph::new(self.uri(), "neo4j", self.password.clone()).unwrap();
            g.run(neo4rs::query("MATCH (n) CALL (n) { DETACH DELETE n } IN TRANSACTIONS OF 10000 ROWS")).await.unwrap();
        });
    }
}

impl Drop for Neo4jServer {
    fn drop(&mut self) {
        if self.own.is_some() {
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.stop()));
        }
    }
}

/// The shared Neo4j of this test run, held exclusively and wiped: `NEO4J_URI` with
/// `TOOLGRAPH_NEO4J_PASSWORD(_FILE)` (scripts/test.sh starts one and sets them), else one this test
/// process starts once (on a free port; it stops when the process ends). Neo4j community has one
/// database, so tests that use it take turns (a lock across threads and processes).
pub struct Neo4jLease {
    server: &'static Neo4jServer,
    _lock: std::fs::File,
    _guard: std::sync::MutexGuard<'static, ()>,
}

impl std::ops::Deref for Neo4jLease {
    type Target = Neo4jServer;
    fn deref(&self) -> &Neo4jServer {
        self.server
    }
}

pub fn neo4j() -> Neo4jLease {
    static SERVER: std::sync::OnceLock<Neo4jServer> = std::sync::OnceLock::new();
    static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let guard = TURN.lock().unwrap_or_else(|p| p.into_inner());
    let server = SERVER.get_or_init(|| match std::env::var("NEO4J_URI") {
        Ok(uri) => {
            let port = uri
                .rsplit(':')
                .next()
                .and_then(|p| p.trim_end_matches('/').parse().ok())
                .expect("NEO4J_URI is neo4j://127.0.0.1:PORT");
            let password = toolgraph_engine::store::neo4j_password()
                .expect("NEO4J_URI is set: set TOOLGRAPH_NEO4J_PASSWORD(_FILE) too");
            Neo4jServer { port, password: secrecy::ExposeSecret::expose_secret(&password).to_string(), own: None }
        }
        Err(_) => {
            let s = Neo4jServer::start_own();
            // Never dropped (a static): the server stops when this process ends (parent watch).
            eprintln!("NEO4J_URI is not set: started Neo4j on {} for this test process", s.uri());
            s
        }
    });
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(std::env::temp_dir().join(format!("toolgraph-neo4j-{}.lock", server.port)))
        .unwrap();
    lock.lock().unwrap();
    server.wipe();
    Neo4jLease { server, _lock: lock, _guard: guard }
}

/// Open a store by URI (Neo4j with `server`'s password) and take its snapshot.
pub fn snapshot_of(uri: &str, graph: &str, server: Option<&Neo4jServer>) -> GraphSnapshot {
    let Some(n) = server else { return snapshot(uri, graph) };
    runtime().block_on(async {
        let s = toolgraph_engine::settings::load(None, &[]).unwrap().store;
        let store =
            toolgraph_engine::adapters::neo4j::connect(uri, "neo4j", &n.password(), &s.neo4j_database, s.batch_rows)
                .await
                .unwrap();
        toolgraph_engine::graph::GraphStore::snapshot(&store).await.unwrap()
    })
}

/// A child process (a server the test started), killed and reaped when dropped.
pub struct Proc(pub std::process::Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The replay sandbox over ComplexFuncBench, as its own process.
pub struct Sandbox {
    pub port: u16,
    _proc: Proc,
}

impl Sandbox {
    pub fn start() -> Sandbox {
        let (p, port) = sandbox_process();
        Sandbox { port, _proc: p }
    }
}

/// Start `cmd`, which listens on a port of its own choosing (`--port 0`), and read that port
/// from the line of its stderr that holds `marker` followed by `http://127.0.0.1:PORT`: no port
/// is picked before the process binds it, so nothing else can take it in between (a port from
/// [`free_port`] can be taken by another test's process before the child binds it, and
/// [`wait_for`] would then greet the wrong server). The rest of stderr goes to `log` (dropped
/// when `None`). Panics with the lines read when the child exits first or prints nothing in 90 s.
pub fn spawn_listening(mut cmd: Command, marker: &str, log: Option<&Path>) -> (Proc, u16) {
    use std::io::{BufRead, Write};
    let mut child = cmd.stderr(std::process::Stdio::piped()).spawn().unwrap();
    let stderr = child.stderr.take().unwrap();
    let mut sink: Box<dyn Write + Send> = match log {
        Some(p) => Box::new(std::fs::File::create(p).unwrap()),
        None => Box::new(std::io::sink()),
    };
    let (tx, rx) = std::sync::mpsc::channel::<Result<u16, String>>();
    let wanted = marker.to_string();
    std::thread::spawn(move || {
        let mut seen = String::new();
        let mut tx = Some(tx);
        for line in std::io::BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            let _ = writeln!(sink, "{line}");
            let _ = sink.flush();
            if let Some(t) = &tx {
                let port = line.find(&wanted).and_then(|i| {
                    let rest = &line[i..];
                    let at = rest.find("http://127.0.0.1:")? + "http://127.0.0.1:".len();
                    rest[at..].chars().take_while(char::is_ascii_digit).collect::<String>().parse::<u16>().ok()
                });
                match port {
                    Some(p) => {
                        let _ = t.send(Ok(p));
                        tx = None;
                    }
                    None if seen.len() < 4000 => seen.push_str(&format!("{line}\n")),
                    None => {}
                }
            }
        }
        if let Some(t) = tx {
            let _ = t.send(Err(seen));
        }
    });
    let port = match rx.recv_timeout(std::time::Duration::from_secs(90)) {
        Ok(Ok(p)) => p,
        Ok(Err(lines)) => {
            let status = child.wait().ok();
            panic!("{cmd:?} ended ({status:?}) without printing `{marker} http://127.0.0.1:PORT`:\n{lines}")
        }
        Err(_) => {
            let _ = child.kill();
            panic!("{cmd:?} printed no `{marker} http://127.0.0.1:PORT` in 90 s")
        }
    };
    let p = Proc(child);
    wait_for(port, marker);
    (p, port)
}

/// The replay sandbox over ComplexFuncBench on a port of its own choosing, as its own process.
pub fn sandbox_process() -> (Proc, u16) {
    let d = data().join("complexfuncbench");
    let mut c = bin();
    c.args(["sandbox", "--chains"])
        .arg(d.join("data.json.gz"))
        .arg("--spec")
        .arg(d.join("spec.json.gz"))
        .args(["--port", "0"]);
    spawn_listening(c, "replay sandbox:", None)
}

/// A port nobody listens on now. Only for a port that must stay unanswered, or one a server of
/// ours is restarted on: a server a test starts picks its own ([`spawn_listening`]).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A free port below the kernel's ephemeral range, for a server a test stops and starts again on
/// the same port: while it is down, no outgoing connection and no `bind(0)` of the suite can
/// take a port outside that range (one of [`free_port`]'s could, and the restart then failed).
pub fn steady_port() -> u16 {
    let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").unwrap_or_default();
    let low = range.split_whitespace().next().and_then(|x| x.parse::<u32>().ok()).unwrap_or(32768);
    let (from, to) = (low.saturating_sub(12000).max(1024), low.max(1025));
    let mut seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos()
        ^ std::process::id().rotate_left(16);
    for _ in 0..200 {
        seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        let port = (from + (seed >> 8) % (to - from)) as u16;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    free_port()
}

/// Wait (up to 90 s) until something listens on 127.0.0.1:`port`.
pub fn wait_for(port: u16, what: &str) {
    for _ in 0..900 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!("{what} did not listen on {port}");
}

// ---- MockOpenAiServer: a test double of an OpenAI-compatible endpoint for the LLM planner ----

use axum::extract::State as AxState;
use axum::http::{HeaderMap, StatusCode};

#[derive(Default)]
pub struct Script {
    /// Answers to give, in order: (HTTP status, content of the message).
    pub answers: Vec<(u16, serde_json::Value)>,
    /// What the server received.
    pub requests: Vec<(serde_json::Value, Option<String>)>,
}

pub type Shared = std::sync::Arc<std::sync::Mutex<Script>>;

async fn completions(
    AxState(s): AxState<Shared>,
    headers: HeaderMap,
    axum::Json(body): axum::Json<serde_json::Value>,
) -> (StatusCode, axum::Json<serde_json::Value>) {
    let mut s = s.lock().unwrap();
    let auth = headers.get("authorization").and_then(|v| v.to_str().ok()).map(str::to_string);
    s.requests.push((body, auth));
    let (status, content) = if s.answers.is_empty() { (200, serde_json::json!({})) } else { s.answers.remove(0) };
    // A scripted answer with `tool_calls` is the whole message (tool calling); any other is the
    // message's content.
    let message = if content.get("tool_calls").is_some() {
        serde_json::json!({"role": "assistant", "content": null, "tool_calls": content["tool_calls"]})
    } else {
        serde_json::json!({"role": "assistant", "content": content.to_string()})
    };
    let reply =
        serde_json::json!({"choices": [{"message": message}], "usage": {"prompt_tokens": 100, "completion_tokens": 7}});
    (StatusCode::from_u16(status).unwrap(), axum::Json(reply))
}

/// A test double of an OpenAI-compatible chat-completions endpoint (127.0.0.1): answers from the
/// script in order (then `{}`), and keeps every request it received.
pub async fn mock_openai_server(answers: Vec<(u16, serde_json::Value)>) -> (String, Shared) {
    let shared: Shared = std::sync::Arc::new(std::sync::Mutex::new(Script { answers, requests: Vec::new() }));
    let app =
        axum::Router::new().route("/v1/chat/completions", axum::routing::post(completions)).with_state(shared.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}/v1"), shared)
}

/// A new database on the test PostgreSQL `base` (`TOOLGRAPH_TEST_POSTGRES_URL`; its password from
/// `TOOLGRAPH_STATE_PASSWORD(_FILE)`), named after `name`; its URL (without the password).
pub async fn fresh_postgres(base: &str, name: &str) -> String {
    use sqlx::Connection;
    let pw = std::env::var("TOOLGRAPH_STATE_PASSWORD")
        .ok()
        .or_else(|| {
            std::env::var("TOOLGRAPH_STATE_PASSWORD_FILE")
                .ok()
                .map(|f| std::fs::read_to_string(f).unwrap().trim().to_string())
        })
        .expect("TOOLGRAPH_STATE_PASSWORD(_FILE) for the test PostgreSQL");
    let mut admin = reqwest::Url::parse(base).unwrap();
    admin.set_password(Some(&pw)).unwrap();
    let mut conn = sqlx::postgres::PgConnection::connect(admin.as_str()).await.expect("the test PostgreSQL answers");
    let db = format!(
        "tg_{name}_{}_{}",
        std::process::id(),
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis()
    );
    sqlx::query(&format!("CREATE DATABASE {db}")).execute(&mut conn).await.unwrap();
    let mut u = reqwest::Url::parse(base).unwrap();
    u.set_path(&format!("/{db}"));
    u.to_string()
}

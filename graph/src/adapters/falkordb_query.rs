//! A user's read-only Cypher on FalkorDB, on a connection of its own, read as a stream within a
//! byte budget (issue 36, finding 4).
//!
//! Why not the `falkordb` crate's client the run path uses:
//! - Its connection is multiplexed and Redis answers in order, so a query that FalkorDB keeps
//!   computing past its limit (it looks at its `timeout` only between operations: one `reduce`
//!   over millions of elements runs on for minutes) holds every later command on that
//!   connection — runs and `/readyz` — behind it.
//! - It parses the whole reply before the first row can be looked at, so a 3-million-element
//!   `collect` grows the daemon by a gigabyte before the byte limit can cut it.
//!
//! Here each query opens its own connection and reads the reply row by row: at `max_rows` /
//! `max_bytes` (or in a row larger than the budget) it stops reading and closes the connection, so
//! nothing past the limits is kept; the caller has its answer at its time limit. The connection —
//! and the query's slot (`store.query_max_running`), which the caller moved in — stay until the
//! server has really finished: a query FalkorDB still computes holds one of its threads, and the
//! next user query is told to wait (`EngineError::Busy`) instead of taking another. (FalkorDB
//! replies only once a query has finished, so a reply that has begun frees the slot when cut.)

use super::falkordb_gate::{in_turn, removal_in_turn};
use crate::{CypherLimits, CypherRows, EngineError, ErrorClass, Result};
use serde_json::{Map, Number, Value};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::sync::{oneshot, OwnedSemaphorePermit};

const BACKEND: &str = "falkordb";
/// How long a connection waits for a server that goes on computing a query past its limit before
/// it gives up (and frees the query's slot).
const SERVER_GRACE: Duration = Duration::from_secs(600);
/// How long the copy of the graph a user query runs on may take (it grows with the graph, not
/// with the query: 47k APIs took over 5 s on a busy 2-core machine); the query's own limit counts
/// after it.
const VIEW_LIMIT: Duration = Duration::from_secs(60);
/// Nesting deeper than this is not kept (FalkorDB's own lists nest as deep as a query builds them).
const MAX_DEPTH: usize = 64;
/// Longest header or status line (`*N`, `$N`, `:N`, `+…`, `-…`) read.
const MAX_LINE: usize = 64 << 10;

/// Run `text` (the `CYPHER k=v …` preamble included) with `GRAPH.RO_QUERY` on a connection of its
/// own to `addr`. `slot` is released when the server has answered (or the connection broke).
pub(super) async fn read_only(
    addr: &str,
    graph: &str,
    text: String,
    limits: CypherLimits,
    slot: OwnedSemaphorePermit,
) -> Result<CypherRows> {
    let (tx, rx) = oneshot::channel();
    // Sent once the query's view is made: its limit counts from there (the copy takes as long
    // as the graph is large, whatever the query).
    let (viewed_tx, viewed) = oneshot::channel::<()>();
    let (addr, graph) = (addr.to_string(), graph.to_string());
    tokio::task::spawn_blocking(move || {
        // Every answer comes once the server has finished the query (its reply has begun, or the
        // connection broke): the slot is given back first, so the caller's next query finds it.
        let mut held = Some((slot, tx));
        let mut answer = |r: Result<CypherRows>| {
            if let Some((slot, tx)) = held.take() {
                drop(slot);
                let _ = tx.send(r);
            }
        };
        match Conn::open(&addr, limits.timeout_ms) {
            Ok(mut conn) => {
                // No write to the graph runs while its copy is made (FalkorDB 4.16 deadlocks).
                let made = in_turn(&addr, &graph, VIEW_LIMIT / 2, || conn.view(&graph));
                let _ = viewed_tx.send(());
                let on = match made {
                    Ok(view) => view.unwrap_or_else(|| graph.clone()),
                    Err(e) => return answer(Err(e)),
                };
                if let Err(e) = conn.query(&on, &text, limits, &mut answer) {
                    tracing::debug!(error = %e, "a user query's FalkorDB connection ended");
                    answer(Err(EngineError::store(BACKEND, ErrorClass::Transient, format!("query connection: {e}"))));
                }
                if on != graph {
                    unlink(&addr, &graph, &[on.to_string()]);
                }
            }
            Err(e) => answer(Err(e)),
        }
    });
    if tokio::time::timeout(VIEW_LIMIT, viewed).await.is_err() {
        return Err(EngineError::store(
            BACKEND,
            ErrorClass::Transient,
            format!("no copy of the graph to query within {} s (the server is busy)", VIEW_LIMIT.as_secs()),
        ));
    }
    // FalkorDB notices its own timeout late (a 0.5 s limit fired after 1.4 s, 5.6 s, …): the
    // answer comes back at the limit regardless; the connection waits for the server on its own.
    let grace = Duration::from_millis(limits.timeout_ms.saturating_add(500));
    match tokio::time::timeout(grace, rx).await {
        Err(_) => Err(EngineError::bad_input(format!(
            "query ran past its {} ms limit (FalkorDB goes on computing it until it notices; the next query waits for it to stop)",
            limits.timeout_ms
        ))),
        Ok(Err(_)) => Err(EngineError::store(BACKEND, ErrorClass::Transient, "the query's connection closed")),
        Ok(Ok(r)) => r,
    }
}

/// What names a user query's view of a graph: `{graph}:inspect:{unix ms}-{pid}-{n}`.
const VIEW_MARK: &str = ":inspect:";
/// A view older than this is an orphan (its daemon stopped before it could unlink it).
const VIEW_ORPHAN_MS: u64 = SERVER_GRACE.as_millis() as u64 + 300_000;

fn unix_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// `UNLINK` views of `graph` on a short connection of its own (at once, whatever still runs on
/// them), in a turn no copy of `graph` is made in ([`removal_in_turn`]).
fn unlink(addr: &str, graph: &str, views: &[String]) {
    let io = |e: io::Error| EngineError::store(BACKEND, ErrorClass::Transient, e);
    let now = || -> Result<()> {
        let mut c = Conn::open(addr, 3000)?;
        c.w.set_read_timeout(Some(Duration::from_secs(10))).ok();
        c.send(&[&["UNLINK"], &views.iter().map(String::as_str).collect::<Vec<_>>()[..]].concat()).map_err(io)?;
        c.r.value(&mut (1 << 10), 0).map_err(io).map(drop)
    };
    let done =
        if views.is_empty() { Ok(()) } else { removal_in_turn(addr, graph, VIEW_LIMIT / 2, now).and_then(|r| r) };
    if let Err(e) = done {
        tracing::warn!(error = %e, views = views.len(), "could not unlink user query views of the graph");
    }
}

/// Unlink the views of `graph` older than [`VIEW_ORPHAN_MS`] (left by a daemon that stopped while
/// one of its queries ran). Best effort, at connect.
pub(super) fn sweep_views(addr: &str, graph: &str) {
    let found = Conn::open(addr, 3000).and_then(|mut c| {
        let io = |e: io::Error| EngineError::store(BACKEND, ErrorClass::Transient, e);
        c.w.set_read_timeout(Some(Duration::from_secs(10))).ok();
        let pattern = format!("{}*", glob_escape(&format!("{graph}{VIEW_MARK}")));
        let (mut cursor, mut old) = (String::from("0"), Vec::new());
        for _ in 0..10_000 {
            c.send(&["SCAN", &cursor, "MATCH", &pattern, "COUNT", "1000"]).map_err(io)?;
            let mut budget = 4 << 20;
            let Some(Resp::Array(mut parts)) = c.r.value(&mut budget, 0).map_err(io)? else { break };
            let keys = if parts.len() == 2 { parts.pop() } else { None };
            cursor = parts.pop().map(text).unwrap_or_else(|| "0".into());
            for key in keys.map(|k| if let Resp::Array(k) = k { k } else { Vec::new() }).unwrap_or_default() {
                let key = text(key);
                let born = key.rsplit(VIEW_MARK).next().and_then(|t| t.split('-').next()?.parse::<u64>().ok());
                if born.is_some_and(|b| unix_ms().saturating_sub(b) > VIEW_ORPHAN_MS) {
                    old.push(key);
                }
            }
            if cursor == "0" {
                break;
            }
        }
        Ok(old)
    });
    match found {
        Ok(old) => unlink(addr, graph, &old),
        Err(e) => tracing::debug!(error = %e, "could not look for orphaned views of the graph"),
    }
}

/// `s` as a literal in a Redis glob pattern.
fn glob_escape(s: &str) -> String {
    s.chars().fold(String::new(), |mut out, c| {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
        out
    })
}

/// One RESP2 value as read (only as much of it as a budget allowed).
#[derive(Debug, Clone, PartialEq)]
enum Resp {
    Nil,
    Int(i64),
    Bytes(Vec<u8>),
    Array(Vec<Resp>),
    Error(String),
}

struct Conn {
    r: BufReader<TcpStream>,
    w: TcpStream,
}

impl Conn {
    fn open(addr: &str, timeout_ms: u64) -> Result<Conn> {
        use std::net::ToSocketAddrs;
        let unreachable = |e: &dyn std::fmt::Display| {
            EngineError::store(BACKEND, ErrorClass::Transient, format!("cannot connect to {addr}: {e}"))
        };
        let sock =
            addr.to_socket_addrs().map_err(|e| unreachable(&e))?.next().ok_or_else(|| unreachable(&"no address"))?;
        let w = TcpStream::connect_timeout(&sock, Duration::from_millis(timeout_ms.clamp(500, 3000)))
            .map_err(|e| unreachable(&e))?;
        w.set_read_timeout(Some(SERVER_GRACE)).map_err(|e| unreachable(&e))?;
        w.set_write_timeout(Some(Duration::from_secs(10))).map_err(|e| unreachable(&e))?;
        let r = BufReader::new(w.try_clone().map_err(|e| unreachable(&e))?);
        Ok(Conn { r, w })
    }

    /// A copy of `graph` for one user query (`GRAPH.COPY`, issue 53): FalkorDB's write to a graph
    /// waits for every read of it to end, and while it waits it holds Redis's main thread — so a
    /// query that runs on for minutes past its limit on the graph itself stops every run's write,
    /// then every read and `PING`. On a view of its own it holds only that view (which `UNLINK`
    /// frees at once, busy or not). `None` when the graph does not exist yet (the query then says
    /// so itself).
    fn view(&mut self, graph: &str) -> io::Result<Option<String>> {
        static VIEWS: AtomicU64 = AtomicU64::new(0);
        let name =
            format!("{graph}{VIEW_MARK}{}-{}-{}", unix_ms(), std::process::id(), VIEWS.fetch_add(1, Ordering::Relaxed));
        // Given up past the view's limit (a hung server held the process for SERVER_GRACE).
        self.w.set_read_timeout(Some(VIEW_LIMIT))?;
        self.send(&["GRAPH.COPY", graph, &name])?;
        let mut budget = 1 << 16;
        let reply = self.r.value(&mut budget, 0);
        self.w.set_read_timeout(Some(SERVER_GRACE))?;
        if let Some(Resp::Error(m)) = reply? {
            tracing::debug!(error = %m, "no view of the graph for a user query");
            return Ok(None);
        }
        Ok(Some(name))
    }

    fn send(&mut self, args: &[&str]) -> io::Result<()> {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            out.extend_from_slice(a.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        self.w.write_all(&out)
    }

    /// The graph's labels, property keys and relationship types, by id (compact replies name them
    /// by id). A graph that does not exist yet has none: the query itself then says so.
    fn schema(&mut self, graph: &str) -> io::Result<Schema> {
        let mut s = Schema::default();
        for (proc_, into) in [
            ("CALL db.labels()", &mut s.labels),
            ("CALL db.propertyKeys()", &mut s.keys),
            ("CALL db.relationshipTypes()", &mut s.types),
        ] {
            self.send(&["GRAPH.RO_QUERY", graph, proc_, "--compact"])?;
            let mut budget = 16 << 20;
            if let Some(Resp::Array(mut parts)) = self.r.value(&mut budget, 0)? {
                if parts.len() == 3 {
                    if let Resp::Array(rows) = parts.swap_remove(1) {
                        for row in rows {
                            let name = match row {
                                Resp::Array(mut cells) if !cells.is_empty() => match cells.swap_remove(0) {
                                    Resp::Array(mut tv) if tv.len() == 2 => text(tv.swap_remove(1)),
                                    _ => String::new(),
                                },
                                _ => String::new(),
                            };
                            into.push(name);
                        }
                    }
                }
            }
        }
        Ok(s)
    }

    /// Send the query and read its reply; `answer` gets the result as soon as it is known (the
    /// rest of the reply is then read and dropped).
    fn query(
        &mut self,
        graph: &str,
        query: &str,
        limits: CypherLimits,
        answer: &mut dyn FnMut(Result<CypherRows>),
    ) -> io::Result<()> {
        let schema = self.schema(graph)?;
        let timeout = limits.timeout_ms.to_string();
        self.send(&["GRAPH.RO_QUERY", graph, query, "--compact", "timeout", &timeout])?;
        let (t, n) = self.r.header()?;
        match t {
            b'-' => {
                answer(Err(refusal(&String::from_utf8_lossy(&n), limits)));
                return Ok(());
            }
            b'*' => {}
            _ => return Err(protocol("a reply that is not an array")),
        }
        let parts = count(&n)?;
        if parts < 3 {
            // Statistics only: a query that returns nothing.
            self.r.skip(parts)?;
            answer(Ok(CypherRows::default()));
            return Ok(());
        }
        let mut out = CypherRows::default();
        let mut budget = 1 << 20;
        match self.r.value(&mut budget, 0)? {
            Some(Resp::Array(cols)) => {
                out.columns = cols
                    .into_iter()
                    .map(|c| match c {
                        Resp::Array(mut tv) if tv.len() == 2 => text(tv.swap_remove(1)),
                        other => text(other),
                    })
                    .collect()
            }
            _ => return Err(protocol("a header that is not a list of columns")),
        }
        let (t, n) = self.r.header()?;
        if t != b'*' {
            return Err(protocol("rows that are not an array"));
        }
        let rows = count(&n)?;
        // The raw reply kept for one row: a compact value is a few times its JSON at most.
        let mut raw = limits.max_bytes.saturating_mul(4).max(64 << 10);
        let mut bytes = 0;
        for i in 0..rows {
            let (row, pending) = match self.r.cut(&mut raw, 0)? {
                Ok(Resp::Array(cells)) => {
                    (cells.into_iter().map(|c| decode(c, &schema)).collect::<Result<Vec<_>>>(), 0)
                }
                Ok(_) => return Err(protocol("a row that is not an array")),
                Err(pending) if out.rows.is_empty() => (Err(EngineError::bad_input(format!(
                    "one row of the result is larger than the {} byte limit (store.query_max_bytes); return less per row (aggregate, LIMIT inside collect, fewer columns)",
                    limits.max_bytes
                ))), pending),
                Err(pending) => {
                    out.truncated = true;
                    (Ok(Vec::new()), pending)
                }
            };
            let done =
                match row
                    .and_then(|row| if out.truncated { Ok(false) } else { out.push_within(row, limits, &mut bytes) })
                {
                    Ok(true) => None,
                    Ok(false) => Some(Ok(std::mem::take(&mut out))),
                    Err(e) => Some(Err(e)),
                };
            if let Some(r) = done {
                // FalkorDB replies once the query has finished: closing the connection drops the
                // rest of the reply, and the slot is free at once.
                answer(r);
                tracing::debug!(values_left = pending.saturating_add(rows - i - 1), "a user query's reply was cut");
                return Ok(());
            }
        }
        // The statistics, or the error a query met after its header.
        let mut budget = 1 << 20;
        match self.r.value(&mut budget, 0)? {
            Some(Resp::Error(m)) => answer(Err(refusal(&m, limits))),
            _ => answer(Ok(out)),
        }
        self.r.skip(parts - 3)
    }
}

/// FalkorDB's refusal of a query, as the caller's error.
fn refusal(m: &str, limits: CypherLimits) -> EngineError {
    if m.contains("timed out") {
        EngineError::bad_input(format!("query ran past its {} ms limit (stopped by FalkorDB)", limits.timeout_ms))
    } else if m.contains("mem consumption") {
        EngineError::bad_input(format!(
            "FalkorDB stopped the query: it needed more memory than one query may use ({m})"
        ))
    } else {
        EngineError::bad_input(format!("FalkorDB refused the query: {m}"))
    }
}

fn protocol(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("FalkorDB sent {what}"))
}

fn count(n: &[u8]) -> io::Result<u64> {
    std::str::from_utf8(n)
        .ok()
        .and_then(|s| s.parse::<i64>().ok())
        .map(|n| n.max(0) as u64)
        .ok_or_else(|| protocol("a bad length"))
}

/// RESP2 read from any buffered reader, within byte budgets.
trait RespRead: BufRead + Sized {
    /// A type byte and the rest of its line.
    fn header(&mut self) -> io::Result<(u8, Vec<u8>)> {
        let mut line = Vec::new();
        self.take(MAX_LINE as u64).read_until(b'\n', &mut line)?;
        if !line.ends_with(b"\r\n") {
            return Err(if line.is_empty() {
                io::ErrorKind::UnexpectedEof.into()
            } else {
                protocol("an overlong line")
            });
        }
        line.truncate(line.len() - 2);
        let t = line.first().copied().ok_or_else(|| protocol("an empty line"))?;
        Ok((t, line[1..].to_vec()))
    }

    /// One value, charged against `budget` (bytes as sent); a value over what is left (or nested
    /// deeper than [`MAX_DEPTH`]) is read to its end and dropped: `None`.
    fn value(&mut self, budget: &mut usize, depth: usize) -> io::Result<Option<Resp>> {
        match self.cut(budget, depth)? {
            Ok(v) => Ok(Some(v)),
            Err(pending) => self.skip(pending).map(|_| None),
        }
    }

    /// One value within `budget`, or — as soon as it passes the budget or [`MAX_DEPTH`] —
    /// `Err(pending)`: how many values are still to be read (see [`RespRead::skip`]) to its end.
    fn cut(&mut self, budget: &mut usize, depth: usize) -> io::Result<std::result::Result<Resp, u64>> {
        let (t, rest) = self.header()?;
        let over = !charge(budget, rest.len() + 3);
        let v = match t {
            b'+' => Resp::Bytes(rest),
            b'-' => Resp::Error(String::from_utf8_lossy(&rest).into_owned()),
            b':' => Resp::Int(
                std::str::from_utf8(&rest)
                    .ok()
                    .and_then(|s| s.parse().ok())
                    .ok_or_else(|| protocol("a bad integer"))?,
            ),
            b'$' if rest.starts_with(b"-") => Resp::Nil,
            b'$' => {
                let n = count(&rest)? as usize + 2;
                if over || !charge(budget, n) {
                    io::copy(&mut self.take(n as u64), &mut io::sink())?;
                    return Ok(Err(0));
                }
                let mut data = vec![0; n];
                self.read_exact(&mut data)?;
                data.truncate(n - 2);
                Resp::Bytes(data)
            }
            b'*' if rest.starts_with(b"-") => Resp::Nil,
            b'*' => {
                let n = count(&rest)?;
                if over || depth >= MAX_DEPTH {
                    return Ok(Err(n));
                }
                let mut items = Vec::with_capacity(n.min(1024) as usize);
                for i in 0..n {
                    match self.cut(budget, depth + 1)? {
                        Ok(v) => items.push(v),
                        Err(pending) => return Ok(Err(pending.saturating_add(n - i - 1))),
                    }
                }
                Resp::Array(items)
            }
            _ => return Err(protocol("an unknown type")),
        };
        Ok(if over { Err(0) } else { Ok(v) })
    }

    /// Read `n` values to their ends, keeping nothing (iteratively: any depth).
    fn skip(&mut self, mut n: u64) -> io::Result<()> {
        while n > 0 {
            n -= 1;
            let (t, rest) = self.header()?;
            match t {
                b'$' if !rest.starts_with(b"-") => {
                    io::copy(&mut self.take(count(&rest)? + 2), &mut io::sink())?;
                }
                b'*' if !rest.starts_with(b"-") => n = n.saturating_add(count(&rest)?),
                _ => {}
            }
        }
        Ok(())
    }
}

impl<R: BufRead> RespRead for R {}

fn charge(budget: &mut usize, n: usize) -> bool {
    match budget.checked_sub(n) {
        Some(left) => {
            *budget = left;
            true
        }
        None => false,
    }
}

#[derive(Debug, Default)]
struct Schema {
    labels: Vec<String>,
    keys: Vec<String>,
    types: Vec<String>,
}

fn text(v: Resp) -> String {
    match v {
        Resp::Bytes(b) => String::from_utf8_lossy(&b).into_owned(),
        Resp::Int(i) => i.to_string(),
        _ => String::new(),
    }
}

fn bad(what: &str) -> EngineError {
    EngineError::store(BACKEND, ErrorClass::Permanent, format!("unparseable {what} in a compact reply"))
}

fn int(v: &Resp) -> Result<i64> {
    match v {
        Resp::Int(i) => Ok(*i),
        _ => Err(bad("integer")),
    }
}

fn items(v: Resp) -> Result<Vec<Resp>> {
    match v {
        Resp::Array(a) => Ok(a),
        _ => Err(bad("list")),
    }
}

fn float(v: Resp) -> Value {
    text(v).parse::<f64>().ok().and_then(Number::from_f64).map(Value::Number).unwrap_or(Value::Null)
}

fn name(names: &[String], id: i64) -> Value {
    usize::try_from(id).ok().and_then(|i| names.get(i)).map(|s| Value::from(s.as_str())).unwrap_or(Value::Null)
}

/// A compact `[type, value]` as JSON: nodes and edges become maps of their properties (with
/// `_labels` / `_type`), a path `{nodes, edges}`, a point `{latitude, longitude}`, temporal values
/// ISO-8601 text.
fn decode(tv: Resp, s: &Schema) -> Result<Value> {
    let mut tv = items(tv)?;
    if tv.len() != 2 {
        return Err(bad("value"));
    }
    let v = tv.pop().unwrap_or(Resp::Nil);
    let t = int(&tv[0])?;
    Ok(match t {
        1 => Value::Null,
        2 => Value::String(text(v)),
        3 => Value::from(int(&v)?),
        4 => Value::Bool(text(v) == "true"),
        5 => float(v),
        6 => Value::Array(items(v)?.into_iter().map(|x| decode(x, s)).collect::<Result<_>>()?),
        7 => edge(v, s)?,
        8 => node(v, s)?,
        9 => {
            let mut parts = items(v)?.into_iter();
            let nodes = parts.next().map(|x| decode(x, s)).transpose()?.unwrap_or(Value::Null);
            let edges = parts.next().map(|x| decode(x, s)).transpose()?.unwrap_or(Value::Null);
            serde_json::json!({"nodes": nodes, "edges": edges})
        }
        10 => {
            let mut m = Map::new();
            let mut kv = items(v)?.into_iter();
            while let (Some(k), Some(x)) = (kv.next(), kv.next()) {
                m.insert(text(k), decode(x, s)?);
            }
            Value::Object(m)
        }
        11 => {
            let mut ll = items(v)?.into_iter();
            let (lat, lon) = (ll.next().map(float), ll.next().map(float));
            serde_json::json!({"latitude": lat, "longitude": lon})
        }
        12 => Value::Array(items(v)?.into_iter().map(float).collect()),
        13 => Value::String(datetime(int(&v)?)),
        14 => Value::String(datetime(int(&v)?)[..10].to_string()),
        15 => Value::String(datetime(int(&v)?)[11..].to_string()),
        16 => Value::String(format!("PT{}S", int(&v)?)),
        _ => Value::String(format!("{v:?}")),
    })
}

fn properties(v: Resp, s: &Schema, into: &mut Map<String, Value>) -> Result<()> {
    for p in items(v)? {
        let mut ktv = items(p)?;
        if ktv.len() != 3 {
            return Err(bad("property"));
        }
        let (val, t) = (ktv.pop().unwrap_or(Resp::Nil), ktv.pop().unwrap_or(Resp::Nil));
        let key = match name(&s.keys, int(&ktv[0])?) {
            Value::String(k) => k,
            _ => format!("#{}", int(&ktv[0])?),
        };
        into.insert(key, decode(Resp::Array(vec![t, val]), s)?);
    }
    Ok(())
}

fn node(v: Resp, s: &Schema) -> Result<Value> {
    let mut parts = items(v)?;
    if parts.len() != 3 {
        return Err(bad("node"));
    }
    let props = parts.pop().unwrap_or(Resp::Nil);
    let labels: Vec<Value> = items(parts.pop().unwrap_or(Resp::Nil))?
        .iter()
        .map(|l| int(l).map(|i| name(&s.labels, i)))
        .collect::<Result<_>>()?;
    let mut m = Map::new();
    properties(props, s, &mut m)?;
    m.insert("_labels".into(), Value::Array(labels));
    Ok(Value::Object(m))
}

fn edge(v: Resp, s: &Schema) -> Result<Value> {
    let mut parts = items(v)?;
    if parts.len() != 5 {
        return Err(bad("edge"));
    }
    let props = parts.pop().unwrap_or(Resp::Nil);
    let mut m = Map::new();
    properties(props, s, &mut m)?;
    m.insert("_type".into(), name(&s.types, int(&parts[1])?));
    Ok(Value::Object(m))
}

/// Seconds since 1970-01-01T00:00:00 as `YYYY-MM-DDTHH:MM:SS` (FalkorDB's compact temporal
/// values; a time of day is a datetime on 1900-01-01).
fn datetime(secs: i64) -> String {
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Howard Hinnant's civil-from-days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}", rem / 3600, rem % 3600 / 60, rem % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(bytes: &str, budget: usize) -> (Option<Resp>, usize) {
        let mut r = io::Cursor::new(bytes.as_bytes().to_vec());
        let mut b = budget;
        let v = r.value(&mut b, 0).unwrap();
        (v, r.position() as usize)
    }

    #[test]
    fn values_over_the_budget_are_read_to_their_end_and_dropped() {
        let reply = "*2\r\n*3\r\n:1\r\n$3\r\nabc\r\n*1\r\n:7\r\n:9\r\n+after\r\n";
        let (v, _) = read(reply, 1 << 10);
        assert_eq!(
            v,
            Some(Resp::Array(vec![
                Resp::Array(vec![Resp::Int(1), Resp::Bytes(b"abc".to_vec()), Resp::Array(vec![Resp::Int(7)])]),
                Resp::Int(9)
            ]))
        );
        // Over budget: nothing kept, and the reader stands right after the value.
        let (v, pos) = read(reply, 10);
        assert_eq!(v, None);
        assert_eq!(&reply[pos..], "+after\r\n");
        let mut r = io::Cursor::new(reply.as_bytes().to_vec());
        r.skip(1).unwrap();
        assert_eq!(&reply[r.position() as usize..], "+after\r\n");
    }

    #[test]
    fn nesting_past_the_bound_is_skipped_not_recursed() {
        let deep = "*1\r\n".repeat(100_000) + ":1\r\n+after\r\n";
        let (v, pos) = read(&deep, usize::MAX);
        assert_eq!(v, None);
        assert_eq!(&deep[pos..], "+after\r\n");
    }

    #[test]
    fn compact_values_decode_like_the_crate_did() {
        let s = Schema {
            labels: vec!["X".into(), "Api".into()],
            keys: vec!["a".into(), "id".into()],
            types: vec!["NEXT".into()],
        };
        let node = Resp::Array(vec![
            Resp::Int(8),
            Resp::Array(vec![
                Resp::Int(1),
                Resp::Array(vec![Resp::Int(1)]),
                Resp::Array(vec![Resp::Array(vec![Resp::Int(1), Resp::Int(2), Resp::Bytes(b"a".to_vec())])]),
            ]),
        ]);
        assert_eq!(decode(node, &s).unwrap(), serde_json::json!({"id": "a", "_labels": ["Api"]}));
        let day = Resp::Array(vec![Resp::Int(14), Resp::Int(1_704_153_600)]);
        assert_eq!(decode(day, &s).unwrap(), "2024-01-02");
        assert_eq!(datetime(1_704_164_645), "2024-01-02T03:04:05");
        assert_eq!(datetime(-2_208_977_755), "1900-01-01T03:04:05");
    }
}

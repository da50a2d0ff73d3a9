//! Embedded graph store: in-process, on disk, no server, built on redb (ACID, crash-safe,
//! copy-on-write B-trees). Each call is one redb transaction, so a batch of contributions and the
//! keys that record it commit together or not at all.

use crate::{ApiUpsert, ContributionBatch, CypherLimits, CypherRows, GraphStore};
use crate::{EngineError, ErrorClass, Result};
use async_trait::async_trait;
use redb::{Database, ReadableTable, ReadableTableMetadata, TableDefinition};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use toolgraph_schema::{
    sort_successors, ApiNode, CategoryNode, EdgeCountRow, FeedsRow, GraphSnapshot, GraphStats, NextEdge, StatusChange,
    Successor, ToolNode, WeightRow, END_ID, START_ID, STATUS_ACTIVE, STATUS_INVALID,
};

const BACKEND: &str = "embedded";

/// API id → JSON of [`ApiUpsert`].
const APIS: TableDefinition<&str, &[u8]> = TableDefinition::new("apis");
/// API id → (calls, successes, score).
const API_STATS: TableDefinition<&str, (u64, u64, f64)> = TableDefinition::new("api_stats");
/// API id → status.
const API_STATUS: TableDefinition<&str, &str> = TableDefinition::new("api_status");
/// API id → (status reason, since, probe arguments).
const API_STATUS_INFO: TableDefinition<&str, (&str, &str, &str)> = TableDefinition::new("api_status_info");
/// Tool id → JSON of [`ToolNode`].
const TOOLS: TableDefinition<&str, &[u8]> = TableDefinition::new("tools");
/// Category id → name.
const CATEGORIES: TableDefinition<&str, &str> = TableDefinition::new("categories");
/// (from, to) → (count, static weight, dynamic weight).
const NEXT: TableDefinition<(&str, &str), (u64, f64, f64)> = TableDefinition::new("next");
/// (to, from) → () — reverse index of NEXT.
const NEXT_REV: TableDefinition<(&str, &str), ()> = TableDefinition::new("next_rev");
/// (from, to) → JSON list of shared field names.
const FEEDS: TableDefinition<(&str, &str), &[u8]> = TableDefinition::new("feeds");
/// Keys of ingested runs.
const LEDGER: TableDefinition<&str, ()> = TableDefinition::new("ingested_runs");
/// Small flags.
const META: TableDefinition<&str, &str> = TableDefinition::new("meta");
/// Counter of a learned model ([`GraphStore::model_counts`]) → its count.
const MODEL_COUNTS: TableDefinition<&str, i64> = TableDefinition::new("model_counts");

fn err(e: impl std::fmt::Display) -> EngineError {
    EngineError::store(BACKEND, ErrorClass::Permanent, e)
}

pub struct EmbeddedStore {
    db: Arc<Database>,
    path: PathBuf,
    generation: std::sync::atomic::AtomicU64,
}

impl EmbeddedStore {
    /// Open (or create) the store file at `path`; its parent folder is created if missing.
    pub fn open(path: &Path) -> Result<Self> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)
                .map_err(|e| err(format!("cannot create folder {}: {e}", parent.display())))?;
        }
        let db = Database::create(path).map_err(|e| {
            let class = if matches!(e, redb::DatabaseError::DatabaseAlreadyOpen) {
                ErrorClass::Transient
            } else {
                ErrorClass::Permanent
            };
            EngineError::store(BACKEND, class, format!("cannot open {}: {e}", path.display()))
        })?;
        let store = EmbeddedStore { db: Arc::new(db), path: path.to_path_buf(), generation: Default::default() };
        store.create_tables()?;
        Ok(store)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn create_tables(&self) -> Result<()> {
        let tx = self.db.begin_write().map_err(err)?;
        {
            tx.open_table(APIS).map_err(err)?;
            tx.open_table(API_STATS).map_err(err)?;
            tx.open_table(API_STATUS).map_err(err)?;
            tx.open_table(TOOLS).map_err(err)?;
            tx.open_table(CATEGORIES).map_err(err)?;
            tx.open_table(NEXT).map_err(err)?;
            tx.open_table(NEXT_REV).map_err(err)?;
            tx.open_table(FEEDS).map_err(err)?;
            tx.open_table(LEDGER).map_err(err)?;
            tx.open_table(META).map_err(err)?;
            tx.open_table(MODEL_COUNTS).map_err(err)?;
        }
        tx.commit().map_err(err)
    }

    /// A write changed the graph: [`GraphStore::generation`] moves (the file is this process's
    /// alone, so a counter in memory sees every write).
    fn bump(&self) {
        self.generation.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    async fn blocking<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Database) -> Result<T> + Send + 'static,
    {
        let db = self.db.clone();
        tokio::task::spawn_blocking(move || f(&db)).await.map_err(|e| err(format!("worker failed: {e}")))?
    }
}

/// Read the graph in one read transaction; edges only when `edges`.
fn read_snapshot(db: &Database, edges: bool) -> Result<GraphSnapshot> {
    let tx = db.begin_read().map_err(err)?;
    let mut snap = GraphSnapshot::default();
    let t_apis = tx.open_table(APIS).map_err(err)?;
    let t_stats = tx.open_table(API_STATS).map_err(err)?;
    let t_status = tx.open_table(API_STATUS).map_err(err)?;
    // Absent in stores written before status reasons existed.
    let t_info = match tx.open_table(API_STATUS_INFO) {
        Ok(t) => Some(t),
        Err(redb::TableError::TableDoesNotExist(_)) => None,
        Err(e) => return Err(err(e)),
    };
    for item in t_apis.iter().map_err(err)? {
        let (k, v) = item.map_err(err)?;
        let id = k.value();
        let a: ApiUpsert = serde_json::from_slice(v.value()).map_err(err)?;
        let (calls, successes, score) = t_stats.get(id).map_err(err)?.map(|g| g.value()).unwrap_or((0, 0, 0.0));
        let status =
            t_status.get(id).map_err(err)?.map(|g| g.value().to_string()).unwrap_or_else(|| STATUS_ACTIVE.to_string());
        let (status_reason, status_since, probe) = match &t_info {
            Some(t) => t.get(id).map_err(err)?.map(|g| {
                let (r, s, p) = g.value();
                (r.to_string(), s.to_string(), p.to_string())
            }),
            None => None,
        }
        .unwrap_or_default();
        snap.apis.insert(
            id.to_string(),
            ApiNode {
                id: a.id,
                name: a.name,
                tool: a.tool_id,
                category: a.category_id,
                description: a.description,
                method: a.method,
                url: a.url,
                parameters: a.parameters,
                required: a.required,
                output_fields: a.output_fields,
                status,
                calls,
                successes,
                score,
                status_reason,
                status_since,
                probe,
            },
        );
    }
    for item in tx.open_table(TOOLS).map_err(err)?.iter().map_err(err)? {
        let (k, v) = item.map_err(err)?;
        let t: ToolNode = serde_json::from_slice(v.value()).map_err(err)?;
        snap.tools.insert(k.value().to_string(), t);
    }
    for item in tx.open_table(CATEGORIES).map_err(err)?.iter().map_err(err)? {
        let (k, v) = item.map_err(err)?;
        let id = k.value().to_string();
        snap.categories.insert(id.clone(), CategoryNode { id, name: v.value().to_string() });
    }
    if !edges {
        return Ok(snap);
    }
    for item in tx.open_table(NEXT).map_err(err)?.iter().map_err(err)? {
        let (k, v) = item.map_err(err)?;
        let (from, to) = k.value();
        let (count, static_weight, dynamic_weight) = v.value();
        snap.next.insert((from.to_string(), to.to_string()), NextEdge { count, static_weight, dynamic_weight });
    }
    for item in tx.open_table(FEEDS).map_err(err)?.iter().map_err(err)? {
        let (k, v) = item.map_err(err)?;
        let (from, to) = k.value();
        let fields: Vec<String> = serde_json::from_slice(v.value()).map_err(err)?;
        snap.feeds.insert((from.to_string(), to.to_string()), fields);
    }
    Ok(snap)
}

fn is_terminal(id: &str) -> bool {
    id == START_ID || id == END_ID
}

#[async_trait]
impl GraphStore for EmbeddedStore {
    fn backend(&self) -> &'static str {
        BACKEND
    }

    async fn setup(&self) -> Result<()> {
        // Tables are created on open; START and END need no rows of their own.
        Ok(())
    }

    async fn upsert_apis(&self, apis: &[ApiUpsert]) -> Result<()> {
        let apis = apis.to_vec();
        self.blocking(move |db| {
            let tx = db.begin_write().map_err(err)?;
            {
                let mut t_apis = tx.open_table(APIS).map_err(err)?;
                let mut t_stats = tx.open_table(API_STATS).map_err(err)?;
                let mut t_status = tx.open_table(API_STATUS).map_err(err)?;
                let mut t_tools = tx.open_table(TOOLS).map_err(err)?;
                let mut t_cats = tx.open_table(CATEGORIES).map_err(err)?;
                for a in &apis {
                    let json = serde_json::to_vec(a).map_err(err)?;
                    t_apis.insert(a.id.as_str(), json.as_slice()).map_err(err)?;
                    if t_stats.get(a.id.as_str()).map_err(err)?.is_none() {
                        t_stats.insert(a.id.as_str(), (0u64, 0u64, 0.0f64)).map_err(err)?;
                    }
                    if t_status.get(a.id.as_str()).map_err(err)?.is_none() {
                        t_status.insert(a.id.as_str(), STATUS_ACTIVE).map_err(err)?;
                    }
                    let tool = ToolNode {
                        id: a.tool_id.clone(),
                        name: a.tool.clone(),
                        description: a.tool_description.clone(),
                        category: a.category_id.clone(),
                    };
                    let tool_json = serde_json::to_vec(&tool).map_err(err)?;
                    t_tools.insert(a.tool_id.as_str(), tool_json.as_slice()).map_err(err)?;
                    t_cats.insert(a.category_id.as_str(), a.category.as_str()).map_err(err)?;
                }
            }
            tx.commit().map_err(err)
        })
        .await
        .inspect(|_| self.bump())
    }

    async fn ingested_keys(&self, keys: &[String]) -> Result<HashSet<String>> {
        let keys = keys.to_vec();
        self.blocking(move |db| {
            let tx = db.begin_read().map_err(err)?;
            let t = tx.open_table(LEDGER).map_err(err)?;
            let mut seen = HashSet::new();
            for k in keys {
                if t.get(k.as_str()).map_err(err)?.is_some() {
                    seen.insert(k);
                }
            }
            Ok(seen)
        })
        .await
    }

    async fn apply_contributions(&self, batch: &ContributionBatch) -> Result<()> {
        let batch = batch.clone();
        self.blocking(move |db| {
            let tx = db.begin_write().map_err(err)?;
            {
                let mut t_stats = tx.open_table(API_STATS).map_err(err)?;
                for d in &batch.api_counts {
                    let cur = t_stats.get(d.id.as_str()).map_err(err)?.map(|g| g.value());
                    // Like the Cypher stores' MATCH: counts of an API never upserted are dropped.
                    if let Some((calls, ok, score)) = cur {
                        t_stats.insert(d.id.as_str(), (calls + d.calls, ok + d.successes, score)).map_err(err)?;
                    }
                }
                let t_apis = tx.open_table(APIS).map_err(err)?;
                let mut t_next = tx.open_table(NEXT).map_err(err)?;
                let mut t_rev = tx.open_table(NEXT_REV).map_err(err)?;
                for e in &batch.edges {
                    let known =
                        |id: &str| -> Result<bool> { Ok(is_terminal(id) || t_apis.get(id).map_err(err)?.is_some()) };
                    if !known(&e.from)? || !known(&e.to)? {
                        continue;
                    }
                    let key = (e.from.as_str(), e.to.as_str());
                    let cur = t_next.get(key).map_err(err)?.map(|g| g.value());
                    let (count, w0, w) = cur.unwrap_or((0, 0.0, 0.0));
                    t_next.insert(key, (count + e.n, w0, w)).map_err(err)?;
                    t_rev.insert((e.to.as_str(), e.from.as_str()), ()).map_err(err)?;
                }
                let mut t_counts = tx.open_table(MODEL_COUNTS).map_err(err)?;
                for c in &batch.counts {
                    let cur = t_counts.get(c.key.as_str()).map_err(err)?.map(|g| g.value()).unwrap_or(0);
                    t_counts.insert(c.key.as_str(), cur + c.n).map_err(err)?;
                }
                let mut t_ledger = tx.open_table(LEDGER).map_err(err)?;
                for k in &batch.keys {
                    t_ledger.insert(k.as_str(), ()).map_err(err)?;
                }
            }
            tx.commit().map_err(err)
        })
        .await
        .inspect(|_| self.bump())
    }

    async fn edge_counts(&self, sources: Option<&[String]>) -> Result<Vec<EdgeCountRow>> {
        let sources = sources.map(|s| s.to_vec());
        self.blocking(move |db| {
            let tx = db.begin_read().map_err(err)?;
            let t_next = tx.open_table(NEXT).map_err(err)?;
            let t_stats = tx.open_table(API_STATS).map_err(err)?;
            let mut scores: HashMap<String, f64> = HashMap::new();
            let mut score = |id: &str| -> Result<f64> {
                if let Some(s) = scores.get(id) {
                    return Ok(*s);
                }
                let s = t_stats.get(id).map_err(err)?.map(|g| g.value().2).unwrap_or(0.0);
                scores.insert(id.to_string(), s);
                Ok(s)
            };
            let mut out = Vec::new();
            let mut push = |from: &str, to: &str, count: u64| -> Result<()> {
                let to_score = score(to)?;
                out.push(EdgeCountRow { from: from.into(), to: to.into(), count, to_score });
                Ok(())
            };
            match sources {
                None => {
                    for item in t_next.iter().map_err(err)? {
                        let (k, v) = item.map_err(err)?;
                        let (from, to) = k.value();
                        push(from, to, v.value().0)?;
                    }
                }
                Some(ids) => {
                    for id in ids {
                        for item in t_next.range((id.as_str(), "")..).map_err(err)? {
                            let (k, v) = item.map_err(err)?;
                            let (from, to) = k.value();
                            if from != id {
                                break;
                            }
                            push(from, to, v.value().0)?;
                        }
                    }
                }
            }
            Ok(out)
        })
        .await
    }

    async fn predecessors(&self, targets: &[String]) -> Result<Vec<String>> {
        let targets = targets.to_vec();
        self.blocking(move |db| {
            let tx = db.begin_read().map_err(err)?;
            let t_rev = tx.open_table(NEXT_REV).map_err(err)?;
            let mut out = BTreeSet::new();
            for id in targets {
                for item in t_rev.range((id.as_str(), "")..).map_err(err)? {
                    let (k, _) = item.map_err(err)?;
                    let (to, from) = k.value();
                    if to != id {
                        break;
                    }
                    out.insert(from.to_string());
                }
            }
            Ok(out.into_iter().collect())
        })
        .await
    }

    async fn set_weights(&self, rows: &[WeightRow]) -> Result<()> {
        let rows = rows.to_vec();
        self.blocking(move |db| {
            let tx = db.begin_write().map_err(err)?;
            {
                let mut t = tx.open_table(NEXT).map_err(err)?;
                for r in &rows {
                    let key = (r.from.as_str(), r.to.as_str());
                    let cur = t.get(key).map_err(err)?.map(|g| g.value());
                    if let Some((count, _, _)) = cur {
                        t.insert(key, (count, r.static_weight, r.dynamic_weight)).map_err(err)?;
                    }
                }
            }
            tx.commit().map_err(err)
        })
        .await
        .inspect(|_| self.bump())
    }

    async fn add_scores(&self, deltas: &[(String, f64)]) -> Result<()> {
        let deltas = deltas.to_vec();
        self.blocking(move |db| {
            let tx = db.begin_write().map_err(err)?;
            {
                let mut t = tx.open_table(API_STATS).map_err(err)?;
                for (id, d) in &deltas {
                    let cur = t.get(id.as_str()).map_err(err)?.map(|g| g.value());
                    if let Some((calls, ok, s)) = cur {
                        t.insert(id.as_str(), (calls, ok, s + d)).map_err(err)?;
                    }
                }
            }
            tx.commit().map_err(err)
        })
        .await
        .inspect(|_| self.bump())
    }

    async fn upsert_feeds(&self, rows: &[FeedsRow]) -> Result<()> {
        let rows = rows.to_vec();
        self.blocking(move |db| {
            let tx = db.begin_write().map_err(err)?;
            {
                let t_apis = tx.open_table(APIS).map_err(err)?;
                let mut t = tx.open_table(FEEDS).map_err(err)?;
                for r in &rows {
                    if t_apis.get(r.from.as_str()).map_err(err)?.is_none()
                        || t_apis.get(r.to.as_str()).map_err(err)?.is_none()
                    {
                        continue;
                    }
                    let json = serde_json::to_vec(&r.fields).map_err(err)?;
                    t.insert((r.from.as_str(), r.to.as_str()), json.as_slice()).map_err(err)?;
                }
            }
            tx.commit().map_err(err)
        })
        .await
        .inspect(|_| self.bump())
    }

    async fn set_api_status(&self, change: &StatusChange) -> Result<bool> {
        let c = change.clone();
        self.blocking(move |db| {
            let tx = db.begin_write().map_err(err)?;
            let found = {
                let mut t = tx.open_table(API_STATUS).map_err(err)?;
                let exists = t.get(c.id.as_str()).map_err(err)?.is_some();
                if exists {
                    t.insert(c.id.as_str(), c.status.as_str()).map_err(err)?;
                    let mut info = tx.open_table(API_STATUS_INFO).map_err(err)?;
                    let old_probe =
                        info.get(c.id.as_str()).map_err(err)?.map(|g| g.value().2.to_string()).unwrap_or_default();
                    let probe = c.probe.clone().unwrap_or(old_probe);
                    info.insert(c.id.as_str(), (c.reason.as_str(), c.since.as_str(), probe.as_str())).map_err(err)?;
                }
                exists
            };
            tx.commit().map_err(err)?;
            Ok(found)
        })
        .await
        .inspect(|_| self.bump())
    }

    async fn successors(&self, id: &str, k: usize) -> Result<Vec<Successor>> {
        let id = id.to_string();
        self.blocking(move |db| {
            let tx = db.begin_read().map_err(err)?;
            let t = tx.open_table(NEXT).map_err(err)?;
            let t_status = tx.open_table(API_STATUS).map_err(err)?;
            let mut out = Vec::new();
            for item in t.range((id.as_str(), "")..).map_err(err)? {
                let (key, v) = item.map_err(err)?;
                let (from, to) = key.value();
                if from != id {
                    break;
                }
                let status = t_status.get(to).map_err(err)?.map(|g| g.value().to_string());
                if status.as_deref() == Some(STATUS_INVALID) {
                    continue;
                }
                let (count, static_weight, dynamic_weight) = v.value();
                out.push(Successor { id: to.to_string(), count, static_weight, dynamic_weight });
            }
            sort_successors(&mut out);
            out.truncate(k);
            Ok(out)
        })
        .await
    }

    async fn snapshot(&self) -> Result<GraphSnapshot> {
        self.blocking(|db| read_snapshot(db, true)).await
    }

    async fn node_snapshot(&self) -> Result<GraphSnapshot> {
        self.blocking(|db| read_snapshot(db, false)).await
    }

    async fn stats(&self) -> Result<GraphStats> {
        self.blocking(|db| {
            let tx = db.begin_read().map_err(err)?;
            Ok(GraphStats {
                apis: tx.open_table(APIS).map_err(err)?.len().map_err(err)?,
                tools: tx.open_table(TOOLS).map_err(err)?.len().map_err(err)?,
                categories: tx.open_table(CATEGORIES).map_err(err)?.len().map_err(err)?,
                next_edges: tx.open_table(NEXT).map_err(err)?.len().map_err(err)?,
                feeds_edges: tx.open_table(FEEDS).map_err(err)?.len().map_err(err)?,
                ingested_runs: tx.open_table(LEDGER).map_err(err)?.len().map_err(err)?,
            })
        })
        .await
    }

    async fn set_weights_dirty(&self, dirty: bool) -> Result<()> {
        self.blocking(move |db| {
            let tx = db.begin_write().map_err(err)?;
            {
                let mut t = tx.open_table(META).map_err(err)?;
                if dirty {
                    t.insert("weights_dirty", "1").map_err(err)?;
                } else {
                    t.remove("weights_dirty").map_err(err)?;
                }
            }
            tx.commit().map_err(err)
        })
        .await
    }

    async fn weights_dirty(&self) -> Result<bool> {
        self.blocking(|db| {
            let tx = db.begin_read().map_err(err)?;
            let t = tx.open_table(META).map_err(err)?;
            Ok(t.get("weights_dirty").map_err(err)?.is_some())
        })
        .await
    }

    async fn model_counts(&self, prefix: &str) -> Result<Vec<(String, i64)>> {
        let from = prefix.to_string();
        self.blocking(move |db| {
            let tx = db.begin_read().map_err(err)?;
            let t = tx.open_table(MODEL_COUNTS).map_err(err)?;
            let mut out = Vec::new();
            for row in t.range(from.as_str()..).map_err(err)? {
                let (k, v) = row.map_err(err)?;
                if !k.value().starts_with(from.as_str()) {
                    break;
                }
                out.push((k.value().to_string(), v.value()));
            }
            Ok(out)
        })
        .await
    }

    async fn generation(&self) -> Result<u64> {
        Ok(self.generation.load(std::sync::atomic::Ordering::SeqCst))
    }

    async fn cypher_read(
        &self,
        _query: &str,
        _params: serde_json::Map<String, serde_json::Value>,
        _limits: CypherLimits,
    ) -> Result<CypherRows> {
        Err(EngineError::Unsupported {
            backend: BACKEND,
            what: "Cypher queries",
            hint: "the embedded store has no query language; use `toolgraph graph stats` / `graph neighbors`, \
                   or ingest into FalkorDB (--store falkordb://127.0.0.1:6380) or Neo4j (--store neo4j://HOST:7687) to query with Cypher",
        })
    }
}

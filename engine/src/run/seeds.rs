//! Seeds of a run: the request decomposed into subtasks (by the planner; by rule in plan mode) and
//! the APIs retrieval finds for the request and each subtask — similarity is the best
//! max-normalized score; per-subtask seeds when each subtask is searched on its own.

use super::engine::{Engine, Leads, RunHow, Trace};
use super::report::RunStats;
use super::trace::TraceEvent;
use crate::plan::decompose::subtasks_of;
use crate::plan::Context;
use crate::plan::Subtask;
use crate::retrieval::hybrid::Method;
use crate::retrieval::Filter;
use crate::Result;
use std::collections::HashMap;
use std::time::Instant;
use toolgraph_schema::Mode;

/// How many of the APIs retrieval finds for a subtask may serve it.
const SUBTASK_APIS: usize = 5;

impl Engine {
    /// Decompose the request and retrieve seeds for it and its subtasks (`vector`: the request's
    /// embedding): the subtasks and what serves each go into `ctx`; returns where the search
    /// looks (`hints` left empty: recall's) and whether each subtask is searched on its own.
    pub(crate) async fn retrieve_seeds(
        &self,
        ctx: &mut Context,
        how: &RunHow,
        stats: &mut RunStats,
        trace: &mut Trace<'_>,
        vector: &[f32],
    ) -> Result<(Leads, bool)> {
        let mut found = Leads::default();
        let request = ctx.request.clone();
        let plan_mode = how.mode == Mode::Plan;
        let subtasks: Vec<Subtask> = if plan_mode {
            // Plan mode spends no decision on decomposition: the plan is the decomposition.
            subtasks_of(&request)
        } else {
            stats.planner_calls += 1;
            how.planner.decompose(ctx).await?
        };
        ctx.subtasks = subtasks.clone();
        let split = subtasks.len() > 1;
        let per_subtask = self.settings.per_subtask && split && !plan_mode && how.mode != Mode::RetrieveGreedy;
        let mut texts = vec![request.to_string()];
        if split {
            texts.extend(subtasks.iter().map(|s| s.request.clone()));
        }
        let t = Instant::now();
        let mut vectors = vec![vector.to_vec()];
        if texts.len() > 1 {
            vectors.extend(self.retriever.embedder().embed(texts[1..].to_vec()).await?);
        }
        stats.embed_ms += t.elapsed().as_secs_f64() * 1000.0;
        let pool = self.settings.seeds.max(50);
        for (i, (text, v)) in texts.iter().zip(&vectors).enumerate() {
            let t = Instant::now();
            // A subtask's own APIs are what its words ask for (usage vectors left out: they pull
            // in the APIs of whole chains, which would let one call cover several subtasks).
            let usage = if i > 0 && !self.settings.retrieve_subtasks { 0.0 } else { self.retriever.usage_weight() };
            let mut hits = self
                .retriever
                .search_with_usage(text, v, pool, &Filter::default(), Method::Hybrid, None, usage)
                .await?;
            // A subtask that names its category prefers that category's APIs.
            if let Some(cat) = (i > 0).then(|| subtasks[i - 1].category.as_deref()).flatten().map(str::to_lowercase) {
                let mut boosted = false;
                for h in hits.iter_mut() {
                    if self.apis.get(&h.id).is_some_and(|a| a.category.to_lowercase() == cat) {
                        h.score *= 1.25;
                        boosted = true;
                    }
                }
                if boosted {
                    hits.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.id.cmp(&b.id)));
                }
            }
            stats.retrieve_ms += t.elapsed().as_secs_f64() * 1000.0;
            let top = hits.first().map(|h| h.score as f64).unwrap_or(1.0).max(1e-9);
            if i > 0 {
                // What serves this subtask, for the judge's coverage check.
                let ids: Vec<String> = hits
                    .iter()
                    .filter(|h| self.apis.contains_key(&h.id))
                    .take(SUBTASK_APIS)
                    .map(|h| h.id.clone())
                    .collect();
                ctx.subtask_apis.push((text.clone(), ids));
                if per_subtask {
                    let sims: HashMap<String, f64> =
                        hits.iter().map(|h| (h.id.clone(), h.score as f64 / top)).collect();
                    let seeds: Vec<(String, f64)> = hits
                        .iter()
                        .filter(|h| self.apis.contains_key(&h.id))
                        .take(self.settings.seeds)
                        .map(|h| (h.id.clone(), h.score as f64 / top))
                        .collect();
                    found.subtask_seeds.push(seeds.iter().map(|(id, _)| id.clone()).collect());
                    found.subtask_sims.push(sims);
                    trace.emit(TraceEvent::Retrieve { subtask: text.clone(), seeds }).await;
                }
                if !self.settings.retrieve_subtasks {
                    continue;
                }
            }
            let mut seeds = Vec::new();
            for h in &hits {
                let s = h.score as f64 / top;
                let e = found.sims.entry(h.id.clone()).or_insert(0.0);
                *e = e.max(s);
                if seeds.len() < self.settings.seeds && self.apis.contains_key(&h.id) {
                    seeds.push((h.id.clone(), s));
                    if !found.seeds.contains(&h.id) {
                        found.seeds.push(h.id.clone());
                    }
                }
            }
            trace.emit(TraceEvent::Retrieve { subtask: text.clone(), seeds }).await;
        }
        Ok((found, per_subtask))
    }
}

//! The depth-first search over the tool graph (thesis Algorithm 4.1): candidates at a node (the
//! seeds at the root; the top-K NEXT successors by blended weight, steps recalled memories made,
//! filled up to K from the retriever), the planner's choice, backtracking, budgets; target-first
//! (Reverse Chain) at the root; one search per subtask on a shared path.

use super::engine::{Ended, Engine, Here, Ledger, RunHow, RunState};
use super::trace::{Offered, TraceEvent};
use crate::fill::filler::{canonical, fill_arguments};
use crate::memory::legs::ROUTE;
use crate::plan::Context;
use crate::plan::{ApiView, ArgSource, Candidate, DeadEnd, Decision, Source};
use crate::run::report::RunStats;
use crate::Result;
use std::collections::{HashMap, HashSet};
use std::time::Duration;
use toolgraph_schema::{Mode, END_ID, START_ID};

/// Target-first (Reverse Chain): of the candidates at the root, the API most likely to produce
/// the answer — similar to the (sub)task and where observed chains end.
fn target(offered: &[Candidate]) -> Option<(usize, &Candidate)> {
    offered
        .iter()
        .enumerate()
        .filter(|(_, c)| !c.is_end())
        .map(|(i, c)| {
            let ends = c.api.as_ref().and_then(|a| a.ends).unwrap_or(0.0);
            (i, c, c.similarity + ends + if ends >= 0.05 { 0.25 } else { 0.0 })
        })
        .max_by(|a, b| a.2.total_cmp(&b.2).then(b.0.cmp(&a.0)))
        .map(|(i, c, _)| (i, c))
}

impl Engine {
    /// Why the run may spend nothing more (calls, failures, decisions, time), if it may not.
    pub(crate) fn out_of_budget(&self, how: &RunHow, ledger: &Ledger, stats: &RunStats) -> Option<String> {
        if ledger.calls_made >= self.settings.max_calls {
            return Some(format!("call budget of {} spent", self.settings.max_calls));
        }
        if stats.failed_calls as usize >= self.settings.max_failed_calls {
            return Some(format!("{} calls failed (run.max_failed_calls): no more guesses", stats.failed_calls));
        }
        if stats.planner_calls as usize >= self.settings.max_planner_calls {
            return Some(format!("planner budget of {} decisions spent", self.settings.max_planner_calls));
        }
        // LLM time and the rest are budgeted apart.
        let llm_ms = crate::plan::run_llm_ms();
        if how.started.elapsed().saturating_sub(Duration::from_millis(llm_ms))
            > Duration::from_millis(self.settings.wall_ms)
        {
            return Some(format!("time budget of {} ms spent", self.settings.wall_ms));
        }
        if llm_ms > self.settings.llm_wall_ms {
            return Some(format!("LLM time budget of {} ms spent", self.settings.llm_wall_ms));
        }
        None
    }

    /// `id` offered at the current node, with its similarity and the recalled memories' hint;
    /// `None` where it is excluded or degraded.
    pub(crate) fn candidate(
        &self,
        (ctx, leads, how): Here<'_>,
        id: &str,
        source: Source,
        weight: f64,
    ) -> Option<Candidate> {
        if id == END_ID {
            let from = ctx.path.last().map(|s| s.api.id.clone()).unwrap_or_else(|| START_ID.to_string());
            let hint = leads.hints.get(&(from, END_ID.to_string())).copied().unwrap_or(0.0);
            return Some(Candidate { id: END_ID.into(), source, weight, similarity: 0.0, hint, api: None });
        }
        let api = self.apis.get(id)?;
        if ctx.excluded_tools.contains(&api.tool) || ctx.excluded_apis.contains(&api.id) {
            return None;
        }
        if self.degraded(how, id) {
            return None;
        }
        let from = ctx.path.last().map(|s| s.api.id.clone()).unwrap_or_else(|| START_ID.to_string());
        let hint = leads.hints.get(&(from, id.to_string())).copied().unwrap_or(0.0);
        Some(Candidate {
            id: id.to_string(),
            source,
            weight,
            similarity: leads.sims(ctx.focus).get(id).copied().unwrap_or(0.0),
            hint,
            api: Some(api.clone()),
        })
    }

    /// The call `api` would be now (its id and the deterministic fill's arguments), or `None` when
    /// that repeats a call on the path or a dead end.
    pub(crate) fn variant(&self, ctx: &Context, failed: &HashMap<String, String>, api: &ApiView) -> Option<String> {
        // Only an API already on the path, at a dead end or with a failed call can repeat a call.
        let failed_before =
            failed.keys().any(|k| k.strip_prefix(api.id.as_str()).is_some_and(|rest| rest.starts_with('\u{0}')));
        if !failed_before
            && !ctx.path.iter().any(|s| s.api.id == api.id)
            && !ctx.dead_ends.iter().any(|d| d.api == api.id)
        {
            return Some(format!("{}|", api.id));
        }
        let mut f = fill_arguments(ctx, api);
        // A list of legs laid along the route (when the call is made, not by the filler) is the
        // one a call of it on the path sent.
        for s in ctx.path.iter().filter(|s| s.api.id == api.id) {
            for p in &f.missing {
                let routed = matches!(s.sources.get(p), Some(ArgSource::Request { kind }) if kind == ROUTE);
                if let Some(v) = s.arguments.get(p).filter(|_| routed) {
                    f.arguments.insert(p.clone(), v.clone());
                }
            }
        }
        let key = canonical(&f.arguments);
        let repeats = ctx.path.iter().any(|s| s.api.id == api.id && canonical(&s.arguments) == key)
            || ctx.dead_ends.iter().any(|d| d.api == api.id && canonical(&d.arguments) == key);
        // A call that failed with these very values (as they would be sent) is not offered again:
        // choosing it would cost a decision for a call that is never sent.
        let failed = failed_before && {
            let outputs: std::collections::HashMap<String, &serde_json::Value> =
                ctx.path.iter().map(|s| (s.label.clone(), s.response.as_ref())).collect();
            let resolved = crate::exec::refs::resolve(&f.arguments, &outputs).unwrap_or_else(|_| f.arguments.clone());
            failed.contains_key(&super::calls::call_key(&api.id, &resolved))
        };
        (!repeats && !failed).then(|| format!("{}|{key}", api.id))
    }

    /// The candidates at the current node (the root when the path is empty), each with the key of
    /// the call it would be (an API failed with some arguments may be offered with others).
    pub(crate) fn candidates(&self, here: Here<'_>, failed: &HashMap<String, String>) -> Vec<(Candidate, String)> {
        let (ctx, leads, how) = here;
        let k = self.settings.top_k.max(1);
        let mut out: Vec<Candidate> = Vec::new();
        let mut seen: HashSet<String> = HashSet::new();
        let at = ctx.path.last().map(|s| s.api.id.clone());
        let graph = matches!(how.mode, Mode::Graph | Mode::Plan);
        let push = |out: &mut Vec<Candidate>, seen: &mut HashSet<String>, c: Candidate| {
            if seen.insert(c.id.clone()) {
                out.push(c);
            }
        };
        // A subtask's search starts at its own seeds (after the path earlier subtasks made).
        let at_root = ctx.path.len() == ctx.root;
        match (&at, graph) {
            (_, _) if at_root => {
                // Root: the seeds, with the START edge as graph evidence (a subtask starts like a
                // request of its own; earlier subtasks' outputs still fill its arguments).
                for id in &leads.seeds {
                    let w = if graph {
                        self.graph
                            .next
                            .get(&(START_ID.to_string(), id.clone()))
                            .map(|e| e.dynamic_weight)
                            .unwrap_or(0.0)
                    } else {
                        0.0
                    };
                    let source = if w > 0.0 { Source::Graph } else { Source::Retriever };
                    if let Some(c) = self.candidate(here, id, source, w) {
                        if c.similarity >= self.settings.min_similarity || w > 0.0 {
                            push(&mut out, &mut seen, c);
                        }
                    }
                }
            }
            (Some(a), true) => {
                for s in self.graph.successors(a, k + 1) {
                    if let Some(c) = self.candidate(here, &s.id, Source::Graph, s.dynamic_weight) {
                        push(&mut out, &mut seen, c);
                    }
                }
            }
            (Some(_), false) => {}
            (None, _) => {}
        }
        // Steps recalled memories made from here join (as graph evidence: they are observed chains).
        let from = at.clone().unwrap_or_else(|| START_ID.to_string());
        let mut hinted: Vec<(&String, f64)> =
            leads.hints.iter().filter(|((f, _), _)| *f == from).map(|((_, t), s)| (t, *s)).collect();
        hinted.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(b.0)));
        for (to, _) in hinted {
            if to == END_ID && at.is_none() {
                continue;
            }
            let w = self.graph.next.get(&(from.clone(), to.clone())).map(|e| e.dynamic_weight).unwrap_or(0.0);
            if let Some(c) = self.candidate(here, to, Source::Graph, w) {
                push(&mut out, &mut seen, c);
            }
        }
        if at.is_some() {
            // The asks left, where no observed chain leads to them from here (see
            // `asked_and_fillable`).
            let asked = if graph { self.asked_and_fillable(ctx) } else { Vec::new() };
            for id in asked {
                let w = self.graph.next.get(&(from.clone(), id.clone())).map(|e| e.dynamic_weight).unwrap_or(0.0);
                if let Some(c) = self.candidate(here, &id, Source::Retriever, w) {
                    push(&mut out, &mut seen, c);
                }
            }
            // Fill up to K APIs from the retriever, by similarity.
            let mut ranked: Vec<(&String, &f64)> =
                leads.sims(ctx.focus).iter().filter(|(_, s)| **s >= self.settings.min_similarity).collect();
            ranked.sort_by(|a, b| b.1.total_cmp(a.1).then(a.0.cmp(b.0)));
            for (id, _) in ranked {
                if out.iter().filter(|c| !c.is_end()).count() >= k {
                    break;
                }
                if let Some(c) = self.candidate(here, id, Source::Retriever, 0.0) {
                    push(&mut out, &mut seen, c);
                }
            }
        }
        out.into_iter()
            .filter_map(|c| match &c.api {
                None => Some((c, END_ID.to_string())),
                Some(a) => self.variant(ctx, failed, a).map(|k| (c, k)),
            })
            .collect()
    }

    /// The APIs the request's words ask for that no call on the path serves yet, where the call
    /// can be made now along the data flow: its recorded calls read an output of an API on the
    /// path, and every required argument can be filled (from the request, the user's values or
    /// the path's outputs). Where no observed chain went from here to them, the new combination
    /// composes. Where an asked API cannot be filled yet, its providers (the APIs its recorded
    /// calls read) that can be, so.
    fn asked_and_fillable(&self, ctx: &Context) -> Vec<String> {
        let Some(m) = ctx.args.as_deref() else { return Vec::new() };
        let joins = |id: &str| {
            ctx.path.iter().any(|s| m.reads_from(id, &s.api.id))
                && self.apis.get(id).is_some_and(|a| fill_arguments(ctx, a).missing.is_empty())
        };
        let mut out: Vec<String> = Vec::new();
        for a in ctx.asks_left() {
            if joins(&a.api) {
                out.push(a.api.clone());
            } else {
                out.extend(m.producers(&a.api).into_iter().filter(|p| joins(p)).map(str::to_string));
            }
        }
        out.sort();
        out.dedup();
        out
    }

    /// Search each subtask in turn: its own seeds and its own depth-first search, continuing the
    /// shared path (a later subtask may use an earlier one's outputs). A subtask that finds
    /// nothing is noted and the next one goes on.
    pub(crate) async fn search_subtasks(&self, st: &mut RunState<'_>) -> Result<Ended> {
        let all_seeds = st.leads.seeds.clone();
        let n = st.ctx.subtasks.len().min(st.leads.subtask_seeds.len());
        let mut gave_up = Vec::new();
        for i in 0..n {
            if self.out_of_budget(&st.how, &st.ledger, &st.stats).is_some() {
                break;
            }
            st.ctx.focus = Some(i);
            st.ctx.root = st.ctx.path.len();
            st.leads.seeds = st.leads.subtask_seeds[i].clone();
            let sub = st.ctx.subtasks[i].clone();
            st.emit(TraceEvent::Subtask {
                index: i,
                name: sub.name.clone(),
                request: sub.request.clone(),
                category: sub.category.clone(),
            })
            .await;
            if let Ended::GaveUp(reason) = self.search(st).await? {
                st.ctx.notes.push(format!("subtask {} ({}) found nothing: {reason}", i + 1, sub.name));
                gave_up.push(reason);
            }
        }
        st.ctx.focus = None;
        st.ctx.root = 0;
        st.leads.seeds = all_seeds;
        Ok(if st.ctx.path.is_empty() {
            Ended::GaveUp(gave_up.first().cloned().unwrap_or_else(|| "no subtask found a usable call".into()))
        } else {
            Ended::Finished
        })
    }

    /// Depth-first search from the current path (empty, or the prefix a reflection resumes from;
    /// never below `ctx.root`, where the current subtask started).
    pub(crate) async fn search(&self, st: &mut RunState<'_>) -> Result<Ended> {
        // Candidates tried at each depth of the current path.
        let mut tried: Vec<HashSet<String>> = vec![HashSet::new(); st.ctx.path.len() + 1];
        let greedy = st.how.mode == Mode::RetrieveGreedy;
        let root = st.ctx.root;
        let mut backward = st.how.backward && st.ctx.path.len() == root;
        loop {
            if let Some(why) = self.out_of_budget(&st.how, &st.ledger, &st.stats) {
                return Ok(if st.ctx.path.len() <= root { Ended::GaveUp(why) } else { Ended::Finished });
            }
            let depth = st.ctx.path.len();
            tried.resize(depth + 1, HashSet::new());
            let (offered, keys): (Vec<Candidate>, Vec<String>) = if depth >= self.settings.max_depth {
                (Vec::new(), Vec::new())
            } else {
                self.candidates(st.here(), &st.ledger.failed)
                    .into_iter()
                    .filter(|(_, k)| !tried[depth].contains(k))
                    .unzip()
            };
            if offered.is_empty() && depth >= self.settings.max_depth {
                return Ok(Ended::Finished);
            }
            // Target-first: the first call is the API that answers; its inputs are completed
            // backwards by provider calls inserted before it.
            if backward {
                backward = false;
                if let Some((index, c)) = target(&offered) {
                    let api = c.api.clone().expect("not END");
                    let decision = Decision::Call {
                        index,
                        reason: format!(
                            "target first: {} produces what the request asks for; its inputs are completed backwards",
                            api.name
                        ),
                    };
                    st.emit(TraceEvent::Choose {
                        depth,
                        offered: offered
                            .iter()
                            .map(|c| Offered {
                                id: c.id.clone(),
                                source: c.source,
                                weight: c.weight,
                                similarity: c.similarity,
                            })
                            .collect(),
                        decision,
                    })
                    .await;
                    tried[depth].insert(keys[index].clone());
                    if self.call_api(st, &api, 0, false).await? {
                        tried.push(HashSet::new());
                    }
                    continue;
                }
            }
            st.stats.planner_calls += 1;
            let decision = st.how.planner.choose(&st.ctx, &offered).await?;
            st.emit(TraceEvent::Choose {
                depth,
                offered: offered
                    .iter()
                    .map(|c| Offered { id: c.id.clone(), source: c.source, weight: c.weight, similarity: c.similarity })
                    .collect(),
                decision: decision.clone(),
            })
            .await;
            let index = match decision {
                Decision::Finish { .. } if depth > root => return Ok(Ended::Finished),
                Decision::Finish { reason } | Decision::GiveUp { reason } if depth <= root => {
                    return Ok(Ended::GaveUp(reason))
                }
                Decision::GiveUp { reason } => return Ok(Ended::GaveUp(reason)),
                Decision::Backtrack { reason } => {
                    if depth <= root || greedy {
                        return Ok(if depth <= root { Ended::GaveUp(reason) } else { Ended::Finished });
                    }
                    self.backtrack(st, &mut tried, reason).await;
                    continue;
                }
                Decision::Call { index, .. } => index,
                Decision::Finish { .. } => unreachable!("handled above"),
            };
            let Some(chosen) = offered.get(index).cloned() else {
                continue;
            };
            tried[depth].insert(keys[index].clone());
            let Some(api) = chosen.api.clone() else {
                return Ok(Ended::Finished);
            };
            match self.call_api(st, &api, 0, false).await? {
                true => {
                    tried.push(HashSet::new());
                }
                false if greedy => {
                    return Ok(if st.ctx.path.len() <= root {
                        Ended::GaveUp("the first call failed".into())
                    } else {
                        Ended::Finished
                    })
                }
                false => {}
            }
        }
    }

    pub(crate) async fn backtrack(&self, st: &mut RunState<'_>, tried: &mut Vec<HashSet<String>>, reason: String) {
        if let Some(s) = st.ctx.path.pop() {
            st.ledger.sent.remove(&s.label);
            st.ctx.fields.remove(&s.label);
            st.ledger.next_label = st.ctx.path.len() + 1;
            st.stats.backtracks += 1;
            st.ctx.dead_ends.push(DeadEnd {
                api: s.api.id.clone(),
                arguments: s.arguments.clone(),
                reason: reason.clone(),
            });
            tried.truncate(st.ctx.path.len() + 1);
            st.emit(TraceEvent::Backtrack { api: s.api.id.clone(), reason }).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::target;
    use crate::plan::{ApiView, Candidate, Source};
    use std::sync::Arc;

    fn cand(id: &str, similarity: f64, ends: Option<f64>) -> Candidate {
        let api = ApiView {
            id: id.into(),
            name: id.into(),
            tool: "t".into(),
            category: "c".into(),
            description: String::new(),
            params: vec![],
            output_fields: vec![],
            availability: None,
            ends,
        };
        Candidate {
            id: id.into(),
            source: Source::Retriever,
            weight: 0.0,
            similarity,
            hint: 0.0,
            api: Some(Arc::new(api)),
        }
    }

    #[test]
    fn the_target_is_where_observed_chains_end_not_only_the_most_similar() {
        let end =
            Candidate { id: "END".into(), source: Source::Graph, weight: 1.0, similarity: 0.0, hint: 0.0, api: None };
        // A lookup that chains go on from (ends 0.0) against the API chains end with (0.6).
        let offered = vec![end, cand("lookup", 0.9, Some(0.0)), cand("book", 0.5, Some(0.6))];
        assert_eq!(target(&offered).map(|(i, c)| (i, c.id.as_str())), Some((2, "book")), "0.5 + 0.6 + 0.25 beats 0.9");
        assert_eq!(
            target(&[cand("a", 0.4, None), cand("b", 0.4, None)]).map(|(i, _)| i),
            Some(0),
            "ties keep the first offered"
        );
        assert!(target(&offered[..1]).is_none(), "END is never a target");
    }
}

//! Long-term memory at the start of a run: a recalled chain close enough to the request by meaning
//! — the two requests' embeddings with every place, date, time and number masked, so that the
//! same request worded another way is near — and fitting it (every value the remembered chain
//! took from its request has a counterpart here, aligned by the role it played, not by where it
//! stood) is replayed by analogy with zero planning calls (references kept, every value the
//! remembered request said replaced by this request's counterpart, the rest from the shared
//! filler); the memories below the replay threshold still vote for the steps their chains made.

use super::store::{MemoryStep, Recalled};
use crate::fill::filler::{fill_distinct, measured};
use crate::fill::learned::{normalized, Kind, Mention};
use crate::fill::vocabulary::{known_words, names_a_value};
use crate::memory::analogy::{Analogy, Transfer};
use crate::plan::judge::judge_path;
use crate::plan::{ApiView, ArgSource, Context, Filled, Judgement, MemoryView, Recollection};
use crate::read::reading::words;
use crate::run::engine::{Engine, RunState};
use crate::run::trace::TraceEvent;
use crate::Result;
use serde_json::Value;
use toolgraph_schema::{Mode, END_ID, START_ID};

/// A replay's judgement: every step must be usable, as always; of the request's requirements, one
/// the remembered request had too (a mention with a counterpart there, an asked-for quantity, a
/// completion, a subtask) is served as it was there — the remembered chain was judged good for it
/// — and counts as covered by the recalled example (`covered_by: "recalled"`); a mention only this
/// request makes, and a call per option it counts, must be covered by calls.
fn judged_by_analogy(
    mut j: Judgement,
    analogy: &Analogy,
    asked: &[crate::read::asks::Asked],
    old_words: &[String],
) -> Judgement {
    use crate::read::coverage::Kind as Req;
    if j.pass || j.first_bad_step.is_some() || j.coverage.is_empty() {
        return j;
    }
    for r in j.coverage.iter_mut().filter(|r| !r.covered() && r.kind != Req::Options) {
        let kind = match r.kind {
            Req::Date => Some(Kind::Date),
            Req::Time => Some(Kind::Time),
            Req::Name => Some(Kind::Name),
            Req::Count => Some(Kind::Number),
            _ => None,
        };
        if r.kind == Req::Api {
            // An API the words ask for, said in the remembered request too: its chain served
            // those words without the API.
            let said_there = asked
                .iter()
                .any(|a| crate::read::coverage::asked_value(&a.name, &a.word) == r.value && a.said_in(old_words));
            if said_there {
                r.covered_by = Some("recalled".into());
            }
            continue;
        }
        let value =
            if r.kind == Req::Count { crate::read::reading::first_word(&r.value).to_string() } else { r.value.clone() };
        let had_it = kind.is_none_or(|k| analogy.has_counterpart(k, &value) != Some(false));
        if had_it {
            r.covered_by = Some("recalled".into());
        }
    }
    if crate::read::coverage::complete(&j.coverage) {
        j.pass = true;
        j.reason = "replayed by analogy, every call with a usable response; what the calls do not cover the remembered request asked for too, and its chain served it".to_string();
    } else {
        j.reason = format!(
            "replayed by analogy, but this request also asks for {}",
            crate::read::coverage::missing_text(&j.coverage)
        );
    }
    j
}

/// The shared filler's value for `name` (with its source) into `f`, else `name` is missing.
fn take_filled(filled: &Filled, name: &str, f: &mut Filled) {
    match filled.arguments.get(name) {
        Some(v) => {
            f.arguments.insert(name.to_string(), v.clone());
            if let Some(s) = filled.sources.get(name) {
                f.sources.insert(name.to_string(), s.clone());
            }
        }
        None => f.missing.push(name.to_string()),
    }
}

/// Memories weighed for a replay: the nearest by meaning, of which the one that fits best wins.
const ANALOGY_POOL: usize = 8;
/// Memories weighed where none of the [`ANALOGY_POOL`] nearest serves every mention of this
/// request (a request of a shape its nearest wordings do not have: three cities, not two)…
const ANALOGY_WIDE: usize = 24;
/// … those of them at most this much less near by meaning than the nearest (on the dev folds
/// of `--split families`, 0.05 gained 1.0 Call Acc. by kind and 0.1 or no bound less: a memory
/// far by meaning that says as many things is often of another shape; the 5-fold and reworded
/// rows did not move).
const ANALOGY_MARGIN: f32 = 0.05;
/// The most remembered chains a planner is offered where the reading is unsure which.
const MEMORIES_OFFERED: usize = 3;

/// Where none of the memories weighed (nearest first) serves every mention of this request, the
/// similarity a farther one needs to be weighed too (at most [`ANALOGY_MARGIN`] less near than
/// the nearest); `None` where one serves them all, or none was recalled.
fn farther_bound<'a>(weighed: impl IntoIterator<Item = &'a Analogue>) -> Option<f32> {
    let mut nearest = None;
    for a in weighed {
        if a.fit.transferable && a.fit.unserved == 0 {
            return None;
        }
        nearest.get_or_insert(a.hit.score);
    }
    nearest.map(|s| s - ANALOGY_MARGIN)
}

/// This request's numbers counted by a unit some API's parameter takes ("within 20 kilometers":
/// a radius) that no API of `chain` takes: what this request asks that the chain cannot be
/// sent (a search by city for "a hotel within 20 km of the airport", where a search by
/// coordinates takes the distance).
fn untaken_quantities(ctx: &Context, chain: &[&MemoryStep]) -> usize {
    let Some(model) = ctx.args.as_deref() else { return 0 };
    let mut units: Vec<String> =
        ctx.values.numbers.iter().filter_map(|c| crate::read::slots::unit_word(&c.word)).collect();
    units.sort();
    units.dedup();
    units.iter().filter(|u| model.knows_unit(u) && !chain.iter().any(|s| model.takes_unit(&s.api, u))).count()
}

/// A recalled memory weighed for a replay: how it fits, and its analogy (for a close one).
struct Analogue {
    hit: Recalled,
    fit: Fit,
    analogy: Option<Analogy>,
    /// The steps of its chain this request wants ([`Engine::of_this_kind`]).
    kept: Vec<usize>,
}

/// How well a remembered request fits this one: whether every value its chain took from the
/// remembered request has a counterpart here, and how many of this request's dates, times and
/// names the remembered one had no counterpart for, and quantities no API of its chain takes
/// (each a thing this request asks that the remembered chain may not serve).
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
struct Fit {
    transferable: bool,
    unserved: usize,
}

/// The optional parameters a replayed call leaves unsent that this request asks for and the
/// remembered one did not: a known value named beside the parameter's own words ("first class"),
/// or a count of what the parameter counts ("my partner and I": 2 adults).
fn unasked(ctx: &Context, analogy: &Analogy, api: &ApiView, f: &Filled, filled: &Filled) -> Vec<String> {
    api.params
        .iter()
        .filter(|p| !p.required && !f.arguments.contains_key(&p.name))
        .filter(|p| match filled.sources.get(&p.name) {
            Some(ArgSource::Request { kind }) if kind == "named" || kind == "ordered" => {
                !names_a_value(analogy.old_words(), p, || known_words(ctx, api, &p.name))
            }
            Some(ArgSource::Request { kind }) if kind == "ages" => analogy.old.child_ages.is_empty(),
            Some(ArgSource::Request { kind }) if kind == "range" => analogy.old.ranges.is_empty(),
            Some(ArgSource::Request { kind }) if kind == "measure" => measured(&analogy.old, p).is_none(),
            Some(ArgSource::Request { kind }) if kind == "number" => {
                let counted = ctx.values.count_for(&p.name);
                counted.is_some()
                    && analogy.old.count_for(&p.name).is_none()
                    && filled.arguments.get(&p.name).and_then(Value::as_f64) == counted
            }
            _ => false,
        })
        .map(|p| p.name.clone())
        .collect()
}

impl Engine {
    /// Recall memories for the request's `meaning` (its embedding with mentions masked): record
    /// their votes, and replay the best fitting one when it is close enough. `true`: a replay
    /// passed (the run is concluded as recalled); a replay that failed leaves the calls that went
    /// through on the path for the search.
    pub(crate) async fn recall(&self, st: &mut RunState<'_>, meaning: &[f32]) -> Result<bool> {
        if !self.settings.use_memory {
            return Ok(false);
        }
        let Some(mem) = &self.memory else { return Ok(false) };
        let hints = self.settings.memory_hints.max(1);
        let hits = mem.recall(meaning, hints.max(ANALOGY_POOL)).await?;
        // Memories below the replay threshold still vote for the steps their chains made.
        for h in hits.iter().take(hints).filter(|h| h.score >= self.settings.hint_threshold) {
            let mut prev = START_ID.to_string();
            for step in &h.entry.chain {
                let e = st.leads.hints.entry((prev.clone(), step.api.clone())).or_insert(0.0);
                *e = e.max(h.score as f64);
                prev = step.api.clone();
            }
            let e = st.leads.hints.entry((prev, END_ID.to_string())).or_insert(0.0);
            *e = e.max(h.score as f64);
        }
        let Some(Analogue { hit, fit, analogy, kept }) = self.best_analogue(st, hits, meaning).await? else {
            return Ok(false);
        };
        let replay = hit.score >= self.settings.memory_threshold && fit.transferable;
        // The calls of the remembered chain this request wants (what only the remembered request
        // asked for left out).
        let kept = if replay { kept } else { Vec::new() };
        let left_out = if replay {
            let chain = &hit.entry.chain;
            (0..chain.len()).filter(|i| kept.binary_search(i).is_err()).map(|i| chain[i].api.clone()).collect()
        } else {
            Vec::new()
        };
        st.emit(TraceEvent::Recall {
            request: hit.entry.request.clone(),
            score: hit.score,
            unserved: fit.unserved,
            chain: hit.entry.chain.iter().map(|s| s.api.clone()).collect(),
            replayed: replay,
            left_out,
        })
        .await;
        let Some(analogy) = analogy.filter(|_| replay) else { return Ok(false) };
        // Plan mode: the remembered chain, its values transferred, is the whole plan (a solution
        // of the library of I/O-coupled paths that recorded runs made), fixed before any call.
        let plan_mode = st.how.mode == Mode::Plan;
        if plan_mode {
            st.stats.planned = true;
            let solution: Vec<String> = hit.entry.chain.iter().map(|s| s.api.clone()).collect();
            let steps: Vec<String> = kept.iter().map(|i| solution[*i].clone()).collect();
            st.emit(TraceEvent::Plan { source: "memory".into(), solution, steps }).await;
        }
        match self.replay(st, &hit.entry.request, analogy, (&hit.entry.chain, &kept), meaning).await {
            Ok(()) => {
                st.stats.recalled = true;
                Ok(true)
            }
            Err(reason) => {
                // The calls that went through stay: the search goes on from them (a failed call
                // is never sent again), where an analogous request went on from there.
                if plan_mode {
                    let step = st.ctx.path.len() + 1;
                    st.stats.plan_fallback_at = Some(step);
                    st.emit(TraceEvent::PlanFailed { step, reason: reason.clone() }).await;
                }
                st.emit(TraceEvent::RecallFailed { reason }).await;
                Ok(false)
            }
        }
    }

    /// Of the recalled memories close enough by meaning, the one that fits this request best: its
    /// chain's values all transferable, then the fewest of this request's mentions left unserved,
    /// then the nearer by meaning (where none of the nearest leaves no mention unserved, the
    /// memories almost as near are weighed too, see [`farther_bound`]). With none close enough:
    /// the nearest, for the trace. Where the
    /// reading is unsure — two or three of the first three close, transferable and with different
    /// chains — the planner is asked which (the deterministic planner leaves the order).
    async fn best_analogue(
        &self,
        st: &mut RunState<'_>,
        hits: Vec<Recalled>,
        meaning: &[f32],
    ) -> Result<Option<Analogue>> {
        let close = |h: &Recalled| h.score >= self.settings.memory_threshold;
        let weigh = |hit: Recalled| {
            if close(&hit) {
                let chain = &hit.entry.chain;
                let analogy = self.analogy(&st.ctx, &hit.entry.request, chain);
                // Only the calls this request wants must fit (what only the remembered request
                // asked for is left out of a replay).
                let kept = self.of_this_kind(&st.ctx, &hit.entry.request, chain, Some(&analogy));
                let steps: Vec<&MemoryStep> = kept.iter().map(|i| &chain[*i]).collect();
                let fit = self.fit(&st.ctx, &analogy, &steps);
                Analogue { hit, fit, analogy: Some(analogy), kept }
            } else {
                Analogue {
                    hit,
                    fit: Fit { transferable: false, unserved: usize::MAX },
                    analogy: None,
                    kept: Vec::new(),
                }
            }
        };
        let pool = hits.len();
        let mut scored: Vec<(usize, Analogue)> = hits.into_iter().enumerate().map(|(i, h)| (i, weigh(h))).collect();
        // (Only where the nearest is close enough to be replayed: a farther one is not.)
        let bound = farther_bound(scored.iter().map(|(_, a)| a))
            .filter(|b| b + ANALOGY_MARGIN >= self.settings.memory_threshold);
        if let (Some(mem), Some(bound)) = (&self.memory, bound) {
            let more = mem.recall(meaning, ANALOGY_WIDE).await?;
            scored.extend(
                more.into_iter().enumerate().skip(pool).filter(|(_, h)| h.score >= bound).map(|(i, h)| (i, weigh(h))),
            );
        }
        // Memories equally near by meaning (a family whose masked requests are one text): the
        // one worded most like this request first (the share of words the two have in common,
        // computed once a memory).
        let said: std::collections::HashSet<String> =
            crate::read::reading::word_list(&st.ctx.request).into_iter().collect();
        let overlap = |a: &Analogue| {
            let theirs: std::collections::HashSet<String> =
                crate::read::reading::word_list(&a.hit.entry.request).into_iter().collect();
            let shared = theirs.intersection(&said).count();
            shared as f64 / (theirs.len() + said.len() - shared).max(1) as f64
        };
        let level = |a: &Analogue| (f64::from(a.hit.score) * 1e5).round() as i64;
        let mut keyed: Vec<(usize, i64, f64, Analogue)> =
            scored.into_iter().map(|(i, a)| (i, level(&a), overlap(&a), a)).collect();
        keyed.sort_by(|(i, li, oi, a), (j, lj, oj, b)| {
            b.fit
                .transferable
                .cmp(&a.fit.transferable)
                .then(a.fit.unserved.cmp(&b.fit.unserved))
                .then(lj.cmp(li))
                .then(oj.total_cmp(oi))
                .then(i.cmp(j))
        });
        let scored: Vec<(usize, Analogue)> = keyed.into_iter().map(|(i, _, _, a)| (i, a)).collect();
        let mut ranked: Vec<Analogue> = scored.into_iter().map(|(_, a)| a).collect();
        let offered: Vec<usize> =
            (0..ranked.len().min(MEMORIES_OFFERED)).filter(|i| ranked[*i].fit.transferable).collect();
        let chains: std::collections::HashSet<Vec<&str>> =
            offered.iter().map(|i| ranked[*i].hit.entry.chain.iter().map(|s| s.api.as_str()).collect()).collect();
        if offered.len() >= 2 && chains.len() >= 2 {
            let views: Vec<MemoryView> = offered
                .iter()
                .map(|i| MemoryView {
                    request: ranked[*i].hit.entry.request.clone(),
                    chain: ranked[*i]
                        .hit
                        .entry
                        .chain
                        .iter()
                        .map(|s| self.apis.get(&s.api).map_or_else(|| s.api.clone(), |a| a.name.clone()))
                        .collect(),
                })
                .collect();
            let answer = st.how.planner.choose_memory(&st.ctx, &views).await?;
            let said = match answer {
                Some(Recollection::Replay(k)) if k < offered.len() => {
                    let chosen = ranked.remove(offered[k]);
                    ranked.insert(0, chosen);
                    format!("replay memory {} of {}", k + 1, offered.len())
                }
                Some(Recollection::Neither) => {
                    ranked.iter_mut().for_each(|a| a.fit.transferable = false);
                    "none of them: search".to_string()
                }
                _ => "rules".to_string(),
            };
            if answer.is_some() {
                st.emit(TraceEvent::Unsure { about: "memory".into(), answer: said }).await;
            }
        }
        Ok(ranked.into_iter().next())
    }

    /// Where the reading is unsure which of this request's mentions plays which role of the
    /// remembered request's (two or three of one kind that nothing learned or said tells apart),
    /// the planner is asked once; its answer, checked one-to-one, realigns them.
    async fn settle(&self, st: &mut RunState<'_>, old_request: &str, analogy: &mut Analogy) -> Result<()> {
        let Some((kind, unsure)) = analogy.unsure() else { return Ok(()) };
        let Some(map) = st.how.planner.align_mentions(&st.ctx, old_request, &unsure).await? else { return Ok(()) };
        let answer = if analogy.realign(kind, &map) {
            unsure.old.iter().zip(&map).map(|(o, j)| format!("{o} → {}", unsure.new[*j])).collect::<Vec<_>>().join("; ")
        } else {
            "rules (not a one-to-one answer)".to_string()
        };
        st.emit(TraceEvent::Unsure { about: "mentions".into(), answer }).await;
        Ok(())
    }

    /// The analogy between a remembered request and this one, mentions aligned by the roles they
    /// played in the remembered chain (what the argument model learned of each parameter).
    pub(crate) fn analogy(&self, ctx: &Context, old_request: &str, chain: &[MemoryStep]) -> Analogy {
        let model = ctx.args.clone();
        let roles = move |kind: Kind, old: &Mention, new: &[Mention]| -> Option<Vec<f64>> {
            let model = model.as_ref()?;
            for step in chain {
                for (param, v) in &step.arguments {
                    let took = match (kind, v) {
                        (Kind::Name, Value::String(s)) => {
                            old.value.len() >= 3 && crate::read::reading::says(&words(s), &old.value)
                        }
                        _ => normalized(v, kind).as_deref() == Some(old.value.as_str()),
                    };
                    if let Some((slot, _)) = took.then(|| model.slot(&step.api, param, kind)).flatten() {
                        return Some(slot.scores(kind, new));
                    }
                }
            }
            None
        };
        let old = self.read_old(old_request, self.clock.today());
        Analogy::of_read(old_request, old, &ctx.request, &ctx.values, Some(&roles))
    }

    /// Whether every value `steps` took from their remembered request has a counterpart here.
    pub(crate) fn fit_steps(&self, ctx: &Context, analogy: &Analogy, steps: &[MemoryStep]) -> bool {
        self.fit(ctx, analogy, &steps.iter().collect::<Vec<_>>()).transferable
    }

    /// How a remembered chain fits this request (see [`Fit`]), before anything is sent.
    fn fit(&self, ctx: &Context, analogy: &Analogy, chain: &[&MemoryStep]) -> Fit {
        let mut transferable = !chain.is_empty();
        for step in chain {
            for (name, recorded) in &step.arguments {
                let own = matches!(
                    step.sources.get(name),
                    Some(ArgSource::Output { .. } | ArgSource::Default | ArgSource::Given | ArgSource::Earlier { .. })
                ) || ArgSource::of_reference(recorded).is_some();
                if own {
                    continue;
                }
                let kinds = self.mention_kinds(ctx, &step.api, name);
                if analogy.transfer_deep(recorded, kinds.as_deref()).is_err() {
                    transferable = false;
                }
            }
        }
        Fit { transferable, unserved: analogy.unserved() + untaken_quantities(ctx, chain) }
    }

    /// Replay a remembered chain by analogy: references kept; every value the remembered request
    /// said replaced by this request's counterpart; values it never said kept as the constants
    /// they are, unless an earlier output of this run provides the parameter. Only the steps
    /// `kept` are replayed ([`Self::of_this_kind`]).
    pub(crate) async fn replay(
        &self,
        st: &mut RunState<'_>,
        old_request: &str,
        mut analogy: Analogy,
        (chain, kept): (&[MemoryStep], &[usize]),
        meaning: &[f32],
    ) -> std::result::Result<(), String> {
        if let Err(e) = self.settle(st, old_request, &mut analogy).await {
            // The model could not be asked: the rules' alignment stands.
            tracing::debug!(target: "run.recall", error = %e, "could not ask the planner about unsure mentions");
        }
        let old_words = crate::read::asks::ask_words(old_request);
        // The asks this request says before the first one the remembered chain serves are
        // composed first: the calls follow the order the request says its asks in.
        let made = st.ctx.path.len();
        let seq = crate::read::asks::ask_word_seq(&st.ctx.request);
        let replayed = kept.iter().map(|i| chain[*i].api.as_str());
        if let Some(first) = super::compose::first_served(&st.ctx, &seq, replayed) {
            // (Not an ask whose API reads what a sibling of a call the replay makes outputs: it
            // reads that call, once made — see `join`.)
            let said = crate::read::asks::ask_words(&st.ctx.request);
            let waiting: Vec<String> = st
                .ctx
                .asked_apis
                .iter()
                .filter(|a| kept.iter().any(|i| self.reads_a_sibling_of(&st.ctx, &said, &a.api, &chain[*i].api)))
                .map(|a| a.api.clone())
                .collect();
            let said_before = |a: &crate::read::asks::Asked| {
                super::compose::position(&seq, a).is_some_and(|p| p < first) && !waiting.contains(&a.api)
            };
            self.compose_missing(st, &old_words, meaning, &said_before).await;
        }
        let mut labels = std::collections::HashMap::new();
        // A call the composed calls made with the same arguments is not sent again.
        let composed_first = st.ctx.path.len() > made;
        let mut routed_apis = std::collections::HashSet::new();
        for (i, step) in chain.iter().enumerate().filter(|(i, _)| kept.binary_search(i).is_ok()) {
            // Legs go along this request's route; another list to that API is the old request's.
            let routed = self.routed_legs(st, (old_request, &analogy), (chain, step), false).await;
            if routed.is_none() && routed_apis.contains(&step.api) && super::legs::sends_legs(step) {
                continue;
            }
            if routed.is_some() {
                routed_apis.insert(step.api.clone());
            }
            let step = routed.as_ref().unwrap_or(step);
            let label = self.replay_step(st, &analogy, step, &labels, composed_first).await?;
            labels.insert(format!("var{}", i + 1), label);
        }
        // What this request's words ask for beyond the remembered request's: composed from the
        // fragments of other memories that served it.
        self.compose_missing(st, &old_words, meaning, &|_| true).await;
        let j = judged_by_analogy(judge_path(&st.ctx), &analogy, &st.ctx.asked_apis, &old_words);
        // Every call went through and all the request asks is served but an API its words ask
        // for that no memory served: the replay stands and the run ends partial, naming it (a
        // search from here would only add calls nothing remembered asks for).
        let only_asks = j.first_bad_step.is_none()
            && j.coverage.iter().filter(|r| !r.covered()).all(|r| r.kind == crate::read::coverage::Kind::Api);
        if !j.pass && !only_asks {
            return Err(j.reason);
        }
        st.recalled_judgement = Some(j);
        Ok(())
    }

    /// Replay one remembered step by analogy (its references relabelled by `labels`, the
    /// remembered chain's labels → this run's); a call this run already made with the same
    /// arguments is not sent again. The label of this run's call.
    pub(crate) async fn replay_step(
        &self,
        st: &mut RunState<'_>,
        analogy: &Analogy,
        step: &MemoryStep,
        labels: &std::collections::HashMap<String, String>,
        reuse: bool,
    ) -> std::result::Result<String, String> {
        let api = self
            .apis
            .get(&step.api)
            .filter(|_| !self.degraded(&st.how, &step.api))
            .cloned()
            .ok_or_else(|| format!("{} is no longer an active API", step.api))?;
        let filled = fill_distinct(&st.ctx, &api);
        let mut f = Filled::default();
        let moments = analogy.moments_after(&step.arguments);
        for (name, recorded) in &step.arguments {
            if let Some(ArgSource::Output { label, path }) =
                step.sources.get(name).cloned().or_else(|| ArgSource::of_reference(recorded))
            {
                // It read a remembered call this replay left out: this request's own value.
                let unreplayed = |l: &String| l.starts_with("var") && !labels.contains_key(l);
                if unreplayed(&label) || crate::exec::refs::labels_in(recorded).iter().any(unreplayed) {
                    take_filled(&filled, name, &mut f);
                    continue;
                }
                let reshifted = match recorded.as_str() {
                    Some(s) => Value::String(super::compose::relabel(&analogy.reshift(s), labels)),
                    None => recorded.clone(),
                };
                let label = labels.get(&label).cloned().unwrap_or(label);
                // The remembered request's option, read where it stood in that run's list: this
                // request's options of this run's list, where it says some.
                if let Some(v) = super::rechosen::chosen_instead(&st.ctx, &reshifted, &label) {
                    f.arguments.insert(name.clone(), Value::String(v));
                    f.sources.insert(name.clone(), ArgSource::Request { kind: "chosen".into() });
                    continue;
                }
                f.arguments.insert(name.clone(), reshifted);
                f.sources.insert(name.clone(), ArgSource::Output { label, path });
                continue;
            }
            // A value the user gave or an earlier turn's output is this conversation's, not
            // the remembered one's: this request must give its own.
            if matches!(step.sources.get(name), Some(ArgSource::Given | ArgSource::Earlier { .. })) {
                take_filled(&filled, name, &mut f);
                continue;
            }
            // A documented default or a constant stays what it was (unless it was a choice
            // among options an earlier output lists).
            if matches!(step.sources.get(name), Some(ArgSource::Default)) {
                if super::rechosen::rechosen(&st.ctx, analogy, name, recorded, &mut f) {
                    continue;
                }
                f.arguments.insert(name.clone(), recorded.clone());
                f.sources.insert(name.clone(), ArgSource::Default);
                continue;
            }
            if matches!(step.sources.get(name), Some(ArgSource::Request { kind }) if kind == super::legs::ROUTE) {
                f.arguments.insert(name.clone(), recorded.clone());
                f.sources.insert(name.clone(), ArgSource::Request { kind: super::legs::ROUTE.into() });
                continue;
            }
            let kinds = self.mention_kinds(&st.ctx, &api.id, name);
            // A moment said as another shifted by a span: the new moment by the new span.
            let transfer = if let Some(v) = moments.get(name) {
                Transfer::Mapped(v.clone())
            } else if recorded.is_array() || recorded.is_object() {
                analogy.transfer_deep(recorded, kinds.as_deref()).map_or_else(Transfer::Unmatched, Transfer::Mapped)
            } else {
                analogy.transfer(recorded, kinds.as_deref())
            };
            match transfer {
                Transfer::Mapped(v) => {
                    let v = crate::fill::filler::moved_out_value(&st.ctx.values, name, &v).unwrap_or(v);
                    f.arguments.insert(name.clone(), v);
                    f.sources.insert(name.clone(), ArgSource::Request { kind: "analogy".into() });
                }
                Transfer::Unmatched(kind) => {
                    return Err(format!("{} {name}: this request has no {} for it", api.name, kind.as_str()))
                }
                Transfer::Unsaid => self.unsaid(&st.ctx, analogy, &api, step, name, recorded, &filled, &mut f),
            }
        }
        // What the remembered call did not send but this API requires: the shared filler's.
        // (An optional one it did not send stays unsent: a chain that sorts its first search
        // and not the second did so on purpose.)
        let lacking: Vec<String> = api
            .params
            .iter()
            .filter(|p| p.required && !f.arguments.contains_key(&p.name))
            .map(|p| p.name.clone())
            .collect();
        for name in &lacking {
            take_filled(&filled, name, &mut f);
        }
        // What this request asks for and the remembered one did not (so its call did not send it).
        let unasked = unasked(&st.ctx, analogy, &api, &f, &filled);
        for name in &unasked {
            take_filled(&filled, name, &mut f);
        }
        if !f.missing.is_empty() {
            return Err(format!("{} needs {} for this request", api.name, f.missing.join(", ")));
        }
        let same = crate::fill::filler::canonical(&f.arguments);
        let done =
            st.ctx.path.iter().find(|s| s.api.id == api.id && crate::fill::filler::canonical(&s.arguments) == same);
        if let Some(done) = done.filter(|_| reuse) {
            return Ok(done.label.clone());
        }
        if !self.execute(st, &api, f).await {
            return Err(format!("the call to {} failed", api.name));
        }
        Ok(st.ctx.path.last().map(|s| s.label.clone()).unwrap_or_default())
    }

    /// A remembered value this request does not say: a choice among the options an earlier
    /// output of this run lists, made again by this request's words ([`super::rechosen`]); the
    /// known value this request says in words, else the one the words it says went with in
    /// recorded runs ("the quickest" → FASTEST); an
    /// earlier output of this run or the request itself (a quoted string, an email…) where the
    /// memory says it came from there, or a name of this request where the remembered value is
    /// a name only that run sent and its request never said (the hotel it had booked); else the
    /// constant it was.
    #[allow(clippy::too_many_arguments)]
    fn unsaid(
        &self,
        ctx: &Context,
        analogy: &Analogy,
        api: &ApiView,
        step: &MemoryStep,
        name: &str,
        recorded: &Value,
        filled: &Filled,
        f: &mut Filled,
    ) {
        if super::rechosen::rechosen(ctx, analogy, name, recorded, f) {
            return;
        }
        let word = super::rechosen::word_here(ctx, analogy, api, name, recorded);
        // A name of this request for a name the remembered request never said: what that run's
        // own earlier call found, or how it put a name its request said ("Los Angeles Airport"
        // sent as "Los Angeles International Airport") — anything but the call's constant.
        let one_off = || {
            ctx.args.as_deref().is_some_and(|m| m.constant(&api.id, name).as_ref() != Some(recorded))
                && recorded.as_str().is_some_and(|v| !crate::read::reading::says(analogy.old_words(), &words(v)))
        };
        let refill = matches!(filled.sources.get(name), Some(ArgSource::Output { .. }))
            || matches!(filled.sources.get(name), Some(ArgSource::Request { kind }) if kind == "ages")
            || matches!(step.sources.get(name), Some(ArgSource::Request { kind }) if kind != "recorded")
            || (matches!(filled.sources.get(name), Some(ArgSource::Request { kind }) if kind == "name") && one_off());
        if word.is_none() && !refill && super::rechosen::chosen_there_only(ctx, analogy, api, name, recorded) {
            return;
        }
        if let Some(word) = word {
            f.arguments.insert(name.to_string(), Value::String(word));
            f.sources.insert(name.to_string(), ArgSource::Request { kind: "analogy".into() });
        } else if refill {
            take_filled(filled, name, f);
        } else {
            f.arguments.insert(name.to_string(), recorded.clone());
            f.sources.insert(name.to_string(), ArgSource::Default);
        }
    }

    /// The kinds of request mention `api`'s `param` took in recorded runs (each in at least a
    /// third of them; none: a constant or an earlier output), or `None` when too little is known
    /// (fewer than three recorded values, or no model).
    pub(super) fn mention_kinds(&self, ctx: &Context, api: &str, param: &str) -> Option<Vec<Kind>> {
        let slot = ctx.args.as_ref()?.slots.get(api)?.get(param)?;
        (slot.support >= 3)
            .then(|| slot.kinds.iter().filter(|(_, n)| 3 * **n >= slot.support).map(|(k, _)| *k).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::store::MemoryEntry;

    fn weighed(score: f32, transferable: bool, unserved: usize) -> Analogue {
        Analogue {
            hit: Recalled { score, entry: MemoryEntry { request: String::new(), chain: Vec::new() } },
            fit: Fit { transferable, unserved },
            analogy: None,
            kept: Vec::new(),
        }
    }

    /// A three-song playlist request whose nearest memories are two-song ones (each leaves a song
    /// without a counterpart): the memories almost as near are weighed too; where one of the
    /// nearest serves every song, none farther is.
    #[test]
    fn farther_memories_are_weighed_only_where_the_nearest_leave_a_mention_unserved() {
        let short = [weighed(0.82, true, 1), weighed(0.80, true, 1), weighed(0.79, false, 0)];
        let bound = farther_bound(&short).expect("no near memory serves every song");
        assert!((bound - (0.82 - ANALOGY_MARGIN)).abs() < 1e-6, "{bound}");
        let one_serves = [weighed(0.82, true, 1), weighed(0.80, true, 0)];
        assert_eq!(farther_bound(&one_serves), None);
        assert_eq!(farther_bound(&[]), None);
    }
}

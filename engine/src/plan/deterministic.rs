//! The deterministic planner: no model, same input → same run.
//!
//! - choose: score = (graph weight + w₀) × (similarity + s₀) × (0.5 + 0.5·availability), halved per
//!   earlier call of the same API for retriever candidates; `END` scores its weight × (s₀ + 0.5).
//!   A step that recalled memories made scores × (1 + 2·recall score). `END` scores × 0.1 while
//!   a requirement is open; once none is (and the request's words asked for an API), so does an
//!   API no word asks for. A first call that is a lookup another candidate reads, where the
//!   request already fills that one, scores × 0.5 without a memory's vote. While the words of
//!   the (sub)task ask for an API no call serves yet, a candidate that neither serves such an ask
//!   nor is read by its API (its recorded calls) scores × 0.1 while one of the others does. The
//!   best wins; below
//!   `min_score` the run finishes (or gives up at the root).
//! - decompose, fill, judge and answer: the rules every planner shares
//!   ([`super::decompose`], [`crate::fill::filler`], [`super::judge`], [`super::answer`]).

use super::decompose::subtasks_of;
use super::judge::{judge_path, open_requirements, subtask_served};
use super::planner::{ApiView, Candidate, Context, Decision, Filled, Judgement, Planner, Usage};
use crate::fill::filler::fill_arguments;
use crate::Result;
use async_trait::async_trait;
use std::sync::atomic::{AtomicU64, Ordering};

// Tuning of the deterministic planner (fixed; measured on the dev folds, see docs/evaluation.md).
/// w₀: what a candidate without a graph edge weighs.
const WEIGHT_FLOOR: f64 = 0.05;
/// s₀: what a candidate the retriever did not rank is similar.
const SIMILARITY_FLOOR: f64 = 0.1;
/// Below this score nothing is worth calling.
const MIN_SCORE: f64 = 0.001;
/// How much a recalled memory's vote multiplies a candidate's score: × (1 + h·hint).
const HINT_WEIGHT: f64 = 2.0;
/// γ of the seed score (similarity + s₀)^γ · (1 + START weight).
const SEED_SHARPNESS: f64 = 4.0;
/// `END`'s score is multiplied by this while the request has an open requirement (a date, time,
/// count, compared option, asked-for quantity or completion no call covers yet); so is an API no
/// word of the request asks for once nothing is open.
const OPEN_END_FACTOR: f64 = 0.1;
/// A first call the shared filler cannot fill from the request (a required argument open: it can
/// only start after Reverse Chain's providers) is multiplied by this.
const UNFILLABLE_SEED_FACTOR: f64 = 0.5;

/// A first call that is a lookup whose output a fellow candidate reads, where that candidate can
/// already be filled from the request alone (the request gives what the lookup would find), is
/// multiplied by this, and no remembered chain's vote counts for it.
const NEEDLESS_LOOKUP_FACTOR: f64 = 0.5;

/// The candidates (indexes) that are lookups ([`ApiView::is_lookup`]) some other candidate's
/// recorded calls read from, where that other one is no lookup and the request fills all its
/// required arguments already: "rent a car at (latitude 35.77, longitude 140.39)" needs no search
/// of the place's coordinates before the rental search that reads them.
fn needless_lookups(ctx: &Context, candidates: &[Candidate]) -> Vec<usize> {
    let Some(model) = ctx.args.as_deref() else { return Vec::new() };
    let lookups: Vec<(usize, &ApiView)> = candidates
        .iter()
        .enumerate()
        .filter_map(|(i, c)| c.api.as_deref().filter(|a| a.is_lookup()).map(|a| (i, a)))
        .collect();
    if lookups.is_empty() {
        return Vec::new();
    }
    let mut needless = Vec::new();
    for reader in candidates.iter().filter_map(|c| c.api.as_deref()).filter(|a| !a.is_lookup()) {
        let read: Vec<usize> = lookups
            .iter()
            .filter(|(i, l)| !needless.contains(i) && model.reads_from(&reader.id, &l.id))
            .map(|(i, _)| *i)
            .collect();
        if !read.is_empty() && fill_arguments(ctx, reader).missing.is_empty() {
            needless.extend(read);
        }
    }
    needless
}

/// A call that neither serves an ask left nor provides what its API takes is multiplied by this
/// while one of the candidates does ([`aimless_calls`]).
const AIMLESS_CALL_FACTOR: f64 = 0.1;

/// The candidates (indexes) that neither serve an ask of the words of the part being searched
/// that no call on the path serves yet (its API, or one its word is about: [`Asked::served_by`],
/// the test that counts an ask served on the path) nor provide an input of such an ask's API (one
/// read back: [`ArgModel::producers`]; two let almost every lookup through) — where some
/// candidate does. At the root, "stay at a hotel within 20 km of the airport" starts with a hotel
/// search (or the geocoder it reads), not the airport's flight search its words are near; further
/// on, the reviews asked for are called after the hotel search, not the details the graph's
/// heaviest edge leads to. Empty where no ask is left or no candidate serves one.
///
/// [`Asked::served_by`]: crate::read::asks::Asked::served_by
/// [`ArgModel::producers`]: crate::fill::learned::ArgModel::producers
fn aimless_calls(ctx: &Context, candidates: &[Candidate]) -> Vec<usize> {
    let part = ctx.focus.and_then(|i| ctx.subtasks.get(i)).map(|s| crate::read::asks::ask_words(&s.request));
    let asks: Vec<&crate::read::asks::Asked> =
        ctx.asks_left().filter(|a| part.as_ref().is_none_or(|words| a.said_in(words))).collect();
    if asks.is_empty() {
        return Vec::new();
    }
    let providers: Vec<&str> = match ctx.args.as_deref() {
        Some(model) => asks.iter().flat_map(|a| model.producers(&a.api)).collect(),
        None => Vec::new(),
    };
    let serves = |c: &Candidate| {
        c.api.as_deref().is_some_and(|a| providers.contains(&a.id.as_str()) || asks.iter().any(|k| k.served_by(&a.id)))
    };
    if !candidates.iter().any(serves) {
        return Vec::new();
    }
    candidates.iter().enumerate().filter(|(_, c)| !c.is_end() && !serves(c)).map(|(i, _)| i).collect()
}

#[derive(Default)]
/// The default planner: rules and learned weights, no model; the same request gets the same run.
pub struct DeterministicPlanner {
    calls: AtomicU64,
}

impl DeterministicPlanner {
    /// The score of one candidate in `ctx` (public for the trace and tests).
    pub fn score(&self, ctx: &Context, c: &Candidate) -> f64 {
        let memory = 1.0 + HINT_WEIGHT * c.hint;
        memory
            * match &c.api {
                None => c.weight * (SIMILARITY_FLOOR + 0.5),
                Some(api) => {
                    let avail = 0.5 + 0.5 * api.availability.unwrap_or(1.0);
                    let repeats = ctx.calls_of(&api.id) as i32;
                    let repeat = if c.source == super::planner::Source::Graph { 1.0 } else { 0.5f64.powi(repeats) };
                    if ctx.path.is_empty() {
                        // The seed serves the request: similarity (sharpened) decides, the START edge
                        // — how often chains begin there, whatever they served — is a mild prior, and
                        // a first call the request cannot fill weighs less than one it can.
                        let fillable =
                            if fill_arguments(ctx, api).missing.is_empty() { 1.0 } else { UNFILLABLE_SEED_FACTOR };
                        return memory
                            * (c.similarity + SIMILARITY_FLOOR).powf(SEED_SHARPNESS)
                            * (1.0 + c.weight)
                            * avail
                            * fillable;
                    }
                    (c.weight + WEIGHT_FLOOR) * (c.similarity + SIMILARITY_FLOOR) * avail * repeat
                }
            }
    }
}

/// The deterministic plan: the best-ranked solution whose first API the request can start (its
/// required inputs all fillable from the request or the user's values), arguments filled as each
/// step runs.
pub(crate) fn best_plan(ctx: &Context, solutions: &[super::program::SolutionView]) -> Option<super::program::Plan> {
    let s = solutions.iter().find(|s| s.apis.first().is_some_and(|a| fill_arguments(ctx, a).missing.is_empty()))?;
    Some(super::program::Plan {
        steps: s
            .apis
            .iter()
            .map(|a| super::program::PlanStep { api: a.id.clone(), arguments: None, for_each: None, when: None })
            .collect(),
        solution: Some(s.index),
        source: "deterministic".into(),
    })
}

#[async_trait]
impl Planner for DeterministicPlanner {
    fn name(&self) -> &'static str {
        "deterministic"
    }

    async fn decompose(&self, ctx: &Context) -> Result<Vec<super::planner::Subtask>> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        Ok(subtasks_of(&ctx.request))
    }

    async fn plan(
        &self,
        ctx: &Context,
        solutions: &[super::program::SolutionView],
    ) -> Result<Option<super::program::Plan>> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        Ok(best_plan(ctx, solutions))
    }

    async fn choose(&self, ctx: &Context, candidates: &[Candidate]) -> Result<Decision> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        // Finishing while the request names something no call covered yet is worth little.
        // Where the current (sub)task's search began: nothing is complete before its first call.
        let at_root = ctx.path.len() <= ctx.root;
        let open = if !at_root && candidates.iter().any(Candidate::is_end) {
            match ctx.focus {
                // A subtask before the last one is open until one of its own APIs answered.
                Some(i) if i + 1 < ctx.subtasks.len() => usize::from(!subtask_served(ctx, i)),
                _ => open_requirements(ctx),
            }
        } else {
            0
        };
        // A subtask before the last one is done once served: the next subtask takes over.
        if let Some(i) = ctx.focus.filter(|i| i + 1 < ctx.subtasks.len() && !at_root) {
            if subtask_served(ctx, i) {
                return Ok(Decision::Finish { reason: format!("subtask {} is served", i + 1) });
            }
        }
        // No observed chain goes on from here (every candidate comes from retrieval alone, as for
        // tools no trajectory has used yet) and nothing the request asks for is open: done.
        if !at_root
            && !candidates.is_empty()
            && candidates.iter().all(|c| !c.is_end() && c.weight <= 0.0)
            && open_requirements(ctx) == 0
        {
            return Ok(Decision::Finish {
                reason: "every requirement is covered and no observed chain goes on".into(),
            });
        }
        // Symmetrically, once every ask the request's words make (one at least) has its call and
        // nothing else is open, going on to an API no word asks for is worth little: finishing is.
        let done = !at_root && open == 0 && !ctx.asked_apis.is_empty() && candidates.iter().any(Candidate::is_end);
        let asked = |c: &Candidate| c.api.as_ref().is_none_or(|a| ctx.asked_apis.iter().any(|k| k.api == a.id));
        let needless = if ctx.path.is_empty() { needless_lookups(ctx, candidates) } else { Vec::new() };
        let aimless = aimless_calls(ctx, candidates);
        let best = candidates
            .iter()
            .enumerate()
            .filter(|(_, c)| !(c.is_end() && at_root))
            .map(|(i, c)| {
                let factor = if c.is_end() && open > 0 || done && !asked(c) { OPEN_END_FACTOR } else { 1.0 };
                let factor = if aimless.contains(&i) { factor * AIMLESS_CALL_FACTOR } else { factor };
                // (A remembered chain's vote for the lookup counts for nothing: its request did
                // not give what this one gives.)
                if needless.contains(&i) {
                    let unvoted = Candidate { hint: 0.0, ..c.clone() };
                    return (i, self.score(ctx, &unvoted) * factor * NEEDLESS_LOOKUP_FACTOR);
                }
                (i, self.score(ctx, c) * factor)
            })
            .max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)));
        Ok(match best {
            None if at_root => Decision::GiveUp { reason: "no candidate API".into() },
            None => Decision::Finish { reason: "no candidate left".into() },
            Some((i, _)) if candidates[i].is_end() => Decision::Finish {
                reason: format!("END is the most likely successor (weight {:.3})", candidates[i].weight),
            },
            Some((_, s)) if s < MIN_SCORE && at_root => {
                Decision::GiveUp { reason: format!("best candidate scores {s:.3} < {MIN_SCORE}") }
            }
            Some((_, s)) if s < MIN_SCORE => {
                Decision::Finish { reason: format!("best candidate scores {s:.3} < {MIN_SCORE}") }
            }
            Some((i, s)) => Decision::Call {
                index: i,
                reason: format!(
                    "score {s:.3} (weight {:.3}, similarity {:.3})",
                    candidates[i].weight, candidates[i].similarity
                ),
            },
        })
    }

    async fn fill(&self, ctx: &Context, api: &ApiView, _offers: &[super::planner::Offer]) -> Result<Filled> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        Ok(fill_arguments(ctx, api))
    }

    async fn judge(&self, ctx: &Context) -> Result<Judgement> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        Ok(judge_path(ctx))
    }

    async fn answer(&self, ctx: &Context) -> Result<String> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        Ok(super::answer::compose(ctx))
    }

    fn composes_answers(&self) -> bool {
        true
    }

    fn fills_by_rules(&self) -> bool {
        true
    }

    fn usage(&self) -> Usage {
        Usage { calls: self.calls.load(Ordering::Relaxed), ..Usage::default() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::test_support::{api, ctx};
    use crate::plan::{Source, Step};
    use serde_json::{json, Map};
    use std::sync::Arc;

    #[tokio::test]
    async fn end_wins_when_heavier_and_repeats_are_damped() {
        let planner = DeterministicPlanner::default();
        let mut c = ctx("find hotels");
        let a = api("a", vec![]);
        let root = vec![
            Candidate { id: "END".into(), source: Source::Graph, weight: 0.9, similarity: 0.0, hint: 0.0, api: None },
            Candidate {
                id: "a".into(),
                source: Source::Retriever,
                weight: 0.0,
                similarity: 0.5,
                hint: 0.0,
                api: Some(a.clone()),
            },
        ];
        assert!(
            matches!(planner.choose(&c, &root).await.unwrap(), Decision::Call { index: 1, .. }),
            "END is never chosen before the first call"
        );
        c.path.push(Step {
            api: api("x", vec![]),
            label: "var1".into(),
            arguments: Map::new(),
            sources: Default::default(),
            observation: String::new(),
            response: json!({"a": 1}).into(),
            repeat: 0,
        });
        let cands = vec![
            Candidate {
                id: "a".into(),
                source: Source::Retriever,
                weight: 0.0,
                similarity: 0.5,
                hint: 0.0,
                api: Some(a.clone()),
            },
            Candidate { id: "END".into(), source: Source::Graph, weight: 0.9, similarity: 0.0, hint: 0.0, api: None },
        ];
        assert!(matches!(planner.choose(&c, &cands).await.unwrap(), Decision::Finish { .. }));
        let cands = vec![
            Candidate { id: "a".into(), source: Source::Graph, weight: 0.6, similarity: 0.5, hint: 0.0, api: Some(a) },
            Candidate { id: "END".into(), source: Source::Graph, weight: 0.4, similarity: 0.0, hint: 0.0, api: None },
        ];
        // a: (0.6 + 0.05) · (0.5 + 0.1) = 0.39 > END: 0.4 · 0.6 = 0.24
        assert_eq!(
            planner.choose(&c, &cands).await.unwrap(),
            Decision::Call { index: 0, reason: "score 0.390 (weight 0.600, similarity 0.500)".into() }
        );
        assert!(matches!(planner.choose(&c, &[]).await.unwrap(), Decision::Finish { .. }));
        assert!(matches!(planner.choose(&ctx("x"), &[]).await.unwrap(), Decision::GiveUp { .. }));
    }

    /// A music service: the request's words ask for the lyrics, and the lyrics call is made.
    /// Nothing is open, so the chords — a likely next step in recorded chains, but no word asks
    /// for them — lose to finishing; asked for too, they are called.
    #[tokio::test]
    async fn once_every_ask_is_served_an_unasked_api_loses_to_finishing() {
        use crate::read::asks::Asked;
        let planner = DeterministicPlanner::default();
        let lyrics = api("songs.lyrics", vec![]);
        let chords = api("songs.chords", vec![]);
        let ask = |a: &str, w: &str| Asked {
            api: a.into(),
            name: a.into(),
            word: w.into(),
            about: vec![a.into()],
            open: false,
        };
        let mut c = ctx("Show me the lyrics of Yesterday.");
        c.asked_apis = vec![ask("songs.lyrics", "lyric")];
        c.path.push(Step {
            api: lyrics,
            label: "var1".into(),
            arguments: Map::new(),
            sources: Default::default(),
            observation: String::new(),
            response: json!({"lyrics": "Yesterday, all my troubles seemed so far away"}).into(),
            repeat: 0,
        });
        let cands = vec![
            Candidate {
                id: "songs.chords".into(),
                source: Source::Graph,
                weight: 0.6,
                similarity: 0.5,
                hint: 0.0,
                api: Some(chords),
            },
            Candidate { id: "END".into(), source: Source::Graph, weight: 0.4, similarity: 0.0, hint: 0.0, api: None },
        ];
        assert!(matches!(planner.choose(&c, &cands).await.unwrap(), Decision::Finish { .. }));
        c.asked_apis.push(ask("songs.chords", "chord"));
        assert!(matches!(planner.choose(&c, &cands).await.unwrap(), Decision::Call { index: 0, .. }));
    }

    /// Of two equally similar first calls, the one the request can fill goes first: the rental
    /// search needs coordinates only a location search gives, the location search takes the
    /// airport's name from the request.
    #[tokio::test]
    async fn a_first_call_the_request_can_fill_goes_before_one_it_cannot() {
        use crate::plan::test_support::p;
        let planner = DeterministicPlanner::default();
        let c = ctx("Rent a car at \"Seattle-Tacoma International Airport\".");
        let rent = api("rent", vec![p("pick_up_latitude", "number", true), p("pick_up_longitude", "number", true)]);
        let locate = api("locate", vec![p("query", "string", true)]);
        let seeds = vec![
            Candidate {
                id: "rent".into(),
                source: Source::Retriever,
                weight: 0.0,
                similarity: 0.8,
                hint: 0.0,
                api: Some(rent),
            },
            Candidate {
                id: "locate".into(),
                source: Source::Retriever,
                weight: 0.0,
                similarity: 0.8,
                hint: 0.0,
                api: Some(locate),
            },
        ];
        assert!(planner.score(&c, &seeds[1]) > planner.score(&c, &seeds[0]));
        assert!(matches!(planner.choose(&c, &seeds).await.unwrap(), Decision::Call { index: 1, .. }));
        // A clearly better match still wins: the factor weighs, it does not exclude.
        let mut seeds = seeds;
        seeds[0].similarity = 1.0;
        seeds[1].similarity = 0.6;
        assert!(matches!(planner.choose(&c, &seeds).await.unwrap(), Decision::Call { index: 0, .. }));
    }

    #[tokio::test]
    async fn a_lookup_is_not_the_first_call_where_the_request_gives_what_it_finds() {
        let doc = |name: &str, ty: &str, description: &str| toolgraph_schema::ParamDoc {
            name: name.into(),
            ty: ty.into(),
            description: description.into(),
            required: true,
            default: None,
        };
        let with_ends = |a: Arc<ApiView>, ends: f64| Arc::new(ApiView { ends: Some(ends), ..(*a).clone() });
        // A geocoder that chains always go on after, and the forecast that reads its coordinates.
        let geocode = with_ends(api("geo/geocode", vec![doc("query", "string", "a place name")]), 0.0);
        let forecast = with_ends(
            api(
                "weather/forecast",
                vec![doc("latitude", "number", "the latitude"), doc("longitude", "number", "the longitude")],
            ),
            0.6,
        );
        let mut model = crate::fill::learned::ArgModel::default();
        let day = chrono::NaiveDate::from_ymd_opt(2024, 6, 1).unwrap();
        for place in ["Oslo", "Bergen", "Tromso"] {
            let (q, f) = (json!({"query": place}), json!({"latitude": "$var1.lat$", "longitude": "$var1.lon$"}));
            let (q, f) = (q.as_object().unwrap().clone(), f.as_object().unwrap().clone());
            model.learn(
                &format!("What is the weather forecast in {place}?"),
                [("geo/geocode", &q), ("weather/forecast", &f)],
                day,
            );
        }
        let model = Arc::new(model);
        let cand = |a: &Arc<ApiView>, similarity: f64, hint: f64| Candidate {
            id: a.id.clone(),
            source: Source::Retriever,
            weight: 0.0,
            similarity,
            hint,
            api: Some(a.clone()),
        };
        // The remembered chains (which named a place only) vote for the geocoder first.
        let offered = [cand(&geocode, 1.0, 0.6), cand(&forecast, 0.95, 0.0)];
        let planner = DeterministicPlanner::default();
        let mut given = ctx("What is the weather forecast in Lillehammer (latitude: 61.11, longitude: 10.46)?");
        given.args = Some(model.clone());
        assert!(fill_arguments(&given, &forecast).missing.is_empty(), "the request fills the forecast");
        assert!(
            matches!(planner.choose(&given, &offered).await.unwrap(), Decision::Call { index: 1, .. }),
            "the coordinates are given: the forecast first"
        );
        // Without the coordinates the geocoder is needed, and first.
        let mut named = ctx("What is the weather forecast in Lillehammer?");
        named.args = Some(model);
        assert!(matches!(planner.choose(&named, &offered).await.unwrap(), Decision::Call { index: 0, .. }));
    }

    /// A library: "renew my loan" asks for the renewal, which reads the loan a loan search finds.
    /// The catalog's book search is nearer the request's words ("the book Dune") but serves no
    /// ask: the first call is the loan search (the renewal's provider), and with no word asking
    /// for anything the nearest wins as before.
    #[tokio::test]
    async fn a_first_call_serves_what_the_request_asks_for() {
        use crate::plan::test_support::p;
        use crate::read::asks::Asked;
        let search = api("catalog/search_books", vec![p("title", "string", true)]);
        let find_loan = api("library/find_loan", vec![p("title", "string", true)]);
        let renew = api("library/renew", vec![p("loan_id", "string", true)]);
        let mut model = crate::fill::learned::ArgModel::default();
        let day = chrono::NaiveDate::from_ymd_opt(2024, 6, 1).unwrap();
        for title in ["Emma", "Ulysses", "Beloved"] {
            let (f, r) = (json!({"title": title}), json!({"loan_id": "$var1.loan_id$"}));
            let (f, r) = (f.as_object().unwrap().clone(), r.as_object().unwrap().clone());
            model.learn(&format!("Renew my loan of {title}."), [("library/find_loan", &f), ("library/renew", &r)], day);
        }
        let cand = |a: &Arc<ApiView>, similarity: f64| Candidate {
            id: a.id.clone(),
            source: Source::Retriever,
            weight: 0.0,
            similarity,
            hint: 0.0,
            api: Some(a.clone()),
        };
        let offered = [cand(&search, 1.0), cand(&renew, 0.8), cand(&find_loan, 0.7)];
        let planner = DeterministicPlanner::default();
        let mut c = ctx("Please renew my loan of the book Dune.");
        c.args = Some(Arc::new(model));
        assert!(
            matches!(planner.choose(&c, &offered).await.unwrap(), Decision::Call { index: 0, .. }),
            "no word asks for anything: the nearest first"
        );
        c.asked_apis = vec![Asked {
            api: renew.id.clone(),
            name: "renew".into(),
            word: "renew".into(),
            about: vec![renew.id.clone()],
            open: false,
        }];
        assert!(
            matches!(planner.choose(&c, &offered).await.unwrap(), Decision::Call { index: 2, .. }),
            "the renewal is asked for: the search of the loan it reads first"
        );
        // An API the asked word is about (its documentation says "renew") serves the ask as a
        // call of it would on the path: it keeps its score, and is the nearest of those left.
        let license = api("ebooks/renew_license", vec![p("title", "string", true)]);
        let offered = [cand(&search, 1.0), cand(&license, 0.95), cand(&renew, 0.8), cand(&find_loan, 0.7)];
        c.asked_apis[0].about = vec![license.id.clone(), renew.id.clone()];
        assert!(
            matches!(planner.choose(&c, &offered).await.unwrap(), Decision::Call { index: 1, .. }),
            "an API the asked word is about is not pushed down"
        );
    }
}

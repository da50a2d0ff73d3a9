//! Seeds of a run: the request decomposed into subtasks (by the planner; by rule in plan mode) and
//! the APIs retrieval finds for the request and each subtask — similarity is the best
//! max-normalized score; per-subtask seeds when each subtask is searched on its own.

use super::engine::{Engine, Leads, RunHow, Trace};
use super::report::RunStats;
use super::trace::TraceEvent;
use crate::plan::decompose::subtasks_of;
use crate::plan::Context;
use crate::plan::Subtask;
use crate::read::asks::Asked;
use crate::read::values::RequestValues;
use crate::retrieval::hybrid::Method;
use crate::retrieval::Filter;
use crate::Result;
use chrono::{Datelike, NaiveDate};
use std::collections::{HashMap, HashSet};
use std::time::Instant;
use toolgraph_schema::Mode;

/// How many of the APIs retrieval finds for a subtask may serve it.
const SUBTASK_APIS: usize = 5;

/// Whether a part of the request asks for something: it is a question, says a verb that asks
/// ("find", "book") or a word that asked for one of the request's APIs (`asked`).
fn asks_something(text: &str, asked: &[Asked]) -> bool {
    let verbs = &crate::read::lexicon().asking_verbs;
    if text.contains('?') || crate::read::reading::word_list(text).iter().any(|w| verbs.contains(w)) {
        return true;
    }
    let words = crate::read::asks::ask_words(text);
    asked.iter().any(|a| a.said_in(&words))
}

/// The subtasks that ask for something. A part that only states ("We are moving to Lyon in
/// March.") is context: its values are read with the whole request and serve the asks, and a
/// search of its own would call whatever its words are near. Where no part asks, all stay.
fn asking_parts(subtasks: Vec<Subtask>, asked: &[Asked]) -> Vec<Subtask> {
    if subtasks.len() < 2 {
        return subtasks;
    }
    let asking: Vec<Subtask> = subtasks.iter().filter(|s| asks_something(&s.request, asked)).cloned().collect();
    if asking.is_empty() {
        return subtasks;
    }
    // The rule's parts are named by their place ("subtask 2"): renumbered; a planner's names stay.
    let numbered = |s: &Subtask| s.name.strip_prefix("subtask ").is_some_and(|n| n.parse::<usize>().is_ok());
    asking
        .into_iter()
        .enumerate()
        .map(|(i, s)| if numbered(&s) { Subtask { name: format!("subtask {}", i + 1), ..s } } else { s })
        .collect()
}

/// The dates a request says only in parts that ask for nothing ("We are planning a family trip
/// to Rome from September 10 to September 20. Find the two highest-rated galleries …"): the
/// context of its asks. A call that takes a date still reads them (values are read with the
/// whole request); no call is owed to them. Dates are told apart by month and day (a part read
/// alone may infer another year). Empty where the request is one part, or no part states.
pub(crate) fn context_dates(
    request: &str,
    asked: &[Asked],
    values: &RequestValues,
    today: NaiveDate,
) -> Vec<NaiveDate> {
    let parts = subtasks_of(request);
    if parts.len() < 2 || values.dates.is_empty() {
        return Vec::new();
    }
    let (asking, stating): (Vec<&Subtask>, Vec<&Subtask>) =
        parts.iter().partition(|s| asks_something(&s.request, asked));
    if asking.is_empty() || stating.is_empty() {
        return Vec::new();
    }
    let days = |ps: &[&Subtask]| -> HashSet<(u32, u32)> {
        ps.iter().flat_map(|s| RequestValues::extract(&s.request, today).dates).map(|d| (d.month(), d.day())).collect()
    };
    let (asked_days, stated_days) = (days(&asking), days(&stating));
    values
        .dates
        .iter()
        .filter(|d| stated_days.contains(&(d.month(), d.day())) && !asked_days.contains(&(d.month(), d.day())))
        .copied()
        .collect()
}

impl Engine {
    /// [`context_dates`] of the run's request where what it asks for takes no date (the APIs
    /// its words ask for, none with a date parameter): an ask that takes one — or a request
    /// whose asks are not known — reads its days where they are said, and owes them a call.
    pub(crate) fn context_dates_of(&self, ctx: &Context, today: NaiveDate) -> Vec<NaiveDate> {
        let dated = |id: &str| {
            self.apis
                .get(id)
                .is_some_and(|a| a.params.iter().any(|p| crate::read::values::is_date_param(&p.name, &p.description)))
        };
        if ctx.asked_apis.is_empty() || ctx.asked_apis.iter().any(|a| dated(&a.api)) {
            return Vec::new();
        }
        context_dates(&ctx.request, &ctx.asked_apis, &ctx.values, today)
    }

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
        let subtasks = asking_parts(subtasks, &ctx.asked_apis);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn asked(api: &str, word: &str) -> Asked {
        Asked { api: api.into(), name: api.into(), word: word.into(), about: vec![api.into()], open: false }
    }

    fn texts(subtasks: &[Subtask]) -> Vec<(&str, &str)> {
        subtasks.iter().map(|s| (s.name.as_str(), s.request.as_str())).collect()
    }

    /// The days a request states as its asks' setting are context: the days of a move around an
    /// ask for meeting rooms; a day an ask says itself is not, nor any day of a one-part request.
    #[test]
    fn days_said_only_where_the_request_states_are_context() {
        let today = chrono::NaiveDate::from_ymd_opt(2025, 1, 10).unwrap();
        let context = |text: &str| {
            let values = RequestValues::extract(text, today);
            context_dates(text, &[], &values, today).iter().map(|d| d.to_string()).collect::<Vec<_>>()
        };
        assert_eq!(
            context(
                "Our lab moves to the new building from March 3 to March 7, 2025. List the three largest \
                 meeting rooms there and describe them."
            ),
            ["2025-03-03", "2025-03-07"]
        );
        assert_eq!(
            context("Our lab moves on March 3, 2025. Book a van for March 3 and list the movers free on March 5."),
            Vec::<String>::new(),
            "March 3 is asked for too; March 5 is said only where the request asks"
        );
        assert!(context("List the meeting rooms free from March 3 to March 7, 2025.").is_empty());
        assert!(context("Our lab moves on March 3, 2025. The rooms are small.").is_empty(), "no part asks");
    }

    /// A sentence that only states is context, not an ask of its own: the move's date and city
    /// serve the quotes the next sentences ask for.
    #[test]
    fn a_part_that_only_states_is_context() {
        let parts = crate::plan::decompose::subtasks_of(
            "We are moving from Leeds to Lyon on March 3rd. Find two removal firms for the piano. \
             I also need storage for the sofa.",
        );
        assert_eq!(parts.len(), 3);
        let kept = asking_parts(parts.clone(), &[asked("moving/storage_units", "storage")]);
        // "Find" asks; "storage" is a word that asked for an API; the first sentence says neither.
        assert_eq!(
            texts(&kept),
            vec![
                ("subtask 1", "Find two removal firms for the piano."),
                ("subtask 2", "I also need storage for the sofa.")
            ]
        );
        // Without the ask model's word, the third sentence states too.
        assert_eq!(
            texts(&asking_parts(parts.clone(), &[])),
            vec![("subtask 1", "Find two removal firms for the piano.")]
        );
        // A question asks; where no part asks, every part stays.
        assert!(asks_something("Is the van big enough for a piano?", &[]));
        let statements = crate::plan::decompose::subtasks_of("We are moving to Lyon. The piano is heavy.");
        assert_eq!(asking_parts(statements.clone(), &[]), statements);
    }
}

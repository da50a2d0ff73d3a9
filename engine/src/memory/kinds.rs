//! Which calls of a remembered chain a new request wants: a replayed memory may be of another
//! kind, or have asked for more; what only its own request asked for is left out.

use super::store::MemoryStep;
use crate::fill::learned::Kind;
use crate::memory::analogy::Analogy;
use crate::plan::Context;
use crate::run::engine::Engine;
use serde_json::Value;

impl Engine {
    /// The steps of a remembered chain (indexes, in order) this request wants. A call the
    /// remembered request's own words asked for (see [`crate::read::asks`]), by a word this
    /// request does not say, for an API no word of this one asks for, served that request, not
    /// this one: it is left out, with the calls only it read from (a memory of another kind, or
    /// one that asked for more: "which museums are trending" replaying "the trending museums and
    /// their tickets"). Where this request asks for no more than the remembered one, it may only
    /// word an ask otherwise ("an SUV, collected one hour after I land" for "pick up the car one
    /// hour after arriving"): a call that takes a value this request says stays (not a day or a
    /// time the calls this request asks for take too, nor a date only the remembered request's
    /// span gave, nor a day said only as the asks' context: [`Engine::takes_said`]). A last call only the remembered request's words point
    /// to, by its documentation, is left out too ([`Engine::said_only_there`]). Any other call
    /// stays; a name, day or time a kept call read from a call left out is this request's.
    pub(super) fn of_this_kind(
        &self,
        ctx: &Context,
        old_request: &str,
        chain: &[MemoryStep],
        analogy: Option<&Analogy>,
    ) -> Vec<usize> {
        let all: Vec<usize> = (0..chain.len()).collect();
        // Every ask of this request has its call in the chain: the memory is of this kind or
        // asked for more.
        let narrower = ctx.asked_apis.iter().all(|a| chain.iter().any(|s| a.served_by(&s.api)));
        let said_here = crate::read::asks::ask_words(&ctx.request);
        let asked_old = self.asked_in_old(ctx.args.as_ref(), old_request);
        // A word said here that gave way to a sibling's name ("flights for this multi-stop trip":
        // see `read::named::gives_way`) asks here for the named one, not for what it asked there.
        let reads = |a: &str, b: &str| ctx.args.as_deref().is_some_and(|m| m.reads_from(a, b));
        let gave_way = |a: &crate::read::asks::Asked| {
            ctx.asked_apis.iter().any(|h| {
                h.api != a.api
                    && h.word.split(' ').count() > 1
                    && h.word.split(' ').any(|w| w == a.word)
                    && a.about.contains(&h.api)
                    && !reads(&h.api, &a.api)
                    && !reads(&a.api, &h.api)
            })
        };
        let asked_there: Vec<&crate::read::asks::Asked> = asked_old
            .iter()
            .filter(|a| (!a.said_in(&said_here) || gave_way(a)) && !ctx.asked_apis.iter().any(|h| h.api == a.api))
            .collect();
        // Whether a step takes a value said here reads its arguments: asked at most once a step
        // (a step the first rule drops is no last call).
        // The days and times the calls this request asks for take (step index, value), read once.
        let asked_moments: Vec<(usize, &Value)> = chain
            .iter()
            .enumerate()
            .filter(|(_, s)| ctx.asked_apis.iter().any(|a| a.served_by(&s.api)))
            .flat_map(|(i, s)| s.arguments.values().flat_map(super::compose::leaves).map(move |v| (i, v)))
            .filter(|(_, v)| moment(v))
            .collect();
        let takes_said = |i: usize| analogy.is_some_and(|an| self.takes_said(ctx, an, chain, i, &asked_moments));
        let mut dropped: Vec<bool> = chain
            .iter()
            .enumerate()
            .map(|(i, step)| {
                let api = step.api.as_str();
                asked_there.iter().any(|a| a.served_by(api))
                    && !ctx.asked_apis.iter().any(|a| a.served_by(api))
                    && !(narrower && takes_said(i))
            })
            .collect();
        // Then the last calls of what is left that only the remembered words point to.
        let last = self.said_only_there(ctx, old_request, chain, &dropped, &said_here);
        for (i, d) in dropped.iter_mut().enumerate() {
            *d |= last[i] && !takes_said(i);
        }
        if !dropped.contains(&true) {
            return all;
        }
        let lookup = |api: &str| self.apis.get(api).is_some_and(|a| a.is_lookup());
        // A call left out is not pulled back in by one that read from it a name, a day or a time
        // (the place and day of a taxi to the hotel the remembered request booked) where the
        // parameter was mostly given what requests say, not an output: it takes this request's.
        // (An amount, or a text calls mostly pass on, is what the chain computes: that call stays.)
        let label = |j: usize| format!("var{}", j + 1);
        let reads_name = |i: usize, j: usize| {
            chain[i].arguments.iter().any(|(name, v)| {
                crate::exec::refs::labels_in(v).contains(&label(j))
                    && self
                        .mention_kinds(ctx, &chain[i].api, name)
                        .is_some_and(|k| k.iter().any(|k| matches!(k, Kind::Name | Kind::Date | Kind::Time)))
                    && ctx.args.as_deref().is_some_and(|m| m.mostly_literal(&chain[i].api, name))
            })
        };
        let pull = |i: usize, j: usize| !(dropped[j] && !lookup(&chain[j].api) && reads_name(i, j));
        let kept = super::compose::fragment_at(chain, |i| !lookup(&chain[i].api) && !dropped[i], pull);
        if !kept.is_empty() {
            return kept;
        }
        // Nothing is left but calls observed chains go on from (a search the remembered chain
        // went on from to what only its request asked for): the first call left that serves
        // each ask of this request, with what it reads; the search goes on from there.
        let first: std::collections::BTreeSet<usize> = ctx
            .asked_apis
            .iter()
            .filter_map(|a| (0..chain.len()).find(|&i| !dropped[i] && a.served_by(&chain[i].api)))
            .collect();
        let kept = super::compose::fragment_at(chain, |i| first.contains(&i), pull);
        if kept.is_empty() {
            return all;
        }
        kept
    }

    /// Whether the remembered step `i` takes a value this request says itself
    /// ([`Analogy::says_own`]), whatever the recorded source (an earlier output may hold the same
    /// date). A day or a time that another of the calls this request asks for takes too
    /// (`asked_moments`: step index, value) does not count: the moments of a request are every
    /// call's context — a hotel search that took the flight's day is no sign that a request saying
    /// that day for its flight wants a hotel — where a name or an amount a call takes is what it
    /// is about.
    fn takes_said(
        &self,
        ctx: &Context,
        analogy: &Analogy,
        chain: &[MemoryStep],
        i: usize,
        asked_moments: &[(usize, &Value)],
    ) -> bool {
        let step = &chain[i];
        let theirs = |v: &Value| asked_moments.iter().any(|(j, w)| *j != i && *w == v);
        // Where every date this request says is its asks' context, a day is no sign of an ask.
        let stated = !ctx.values.dates.is_empty() && ctx.values.dates.iter().all(|d| ctx.context_dates.contains(d));
        let day = |v: &Value| v.as_str().and_then(|s| s.get(..10)).and_then(crate::read::stamps::date).is_some();
        step.arguments.iter().any(|(name, recorded)| {
            let kinds = self.mention_kinds(ctx, &step.api, name);
            super::compose::leaves(recorded)
                .filter(|v| !(stated && day(v)))
                .any(|v| !theirs(v) && analogy.says_own(v, kinds.as_deref()))
        })
    }
}

/// A recorded day or time (`2024-11-10`, `2024-11-10T…`, `16:51`).
fn moment(v: &Value) -> bool {
    v.as_str().is_some_and(|s| {
        s.get(..10).and_then(crate::read::stamps::date).is_some() || crate::read::stamps::time(s).is_some()
    })
}

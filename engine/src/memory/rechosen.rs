//! The remembered request's choices a replayed call meets: one among the options an earlier
//! output of this run lists (the filters a search takes, a shop's categories), made again by this
//! request's words ([`crate::fill::options`]), and an optional value the remembered request chose
//! in words this request does not say ([`chosen_there_only`]).

use crate::fill::vocabulary::{known_words, ordered_value};
use crate::memory::analogy::Analogy;
use crate::plan::{ApiView, ArgSource, Context, Filled};
use crate::read::reading::words;
use serde_json::Value;

/// Where `recorded` was the remembered request's choice among the options an earlier output of
/// this run lists ([`crate::fill::options`]): the ids this request's words choose, into `f`
/// (none said: not sent). `false`: it was no such choice.
pub(super) fn rechosen(ctx: &Context, analogy: &Analogy, name: &str, recorded: &Value, f: &mut Filled) -> bool {
    let outputs = ctx.path.iter().map(|s| s.response.as_ref());
    let old = analogy.old_words();
    let Some(again) = crate::fill::options::rechoose(recorded, outputs, &ctx.request, old) else { return false };
    if let crate::fill::options::Rechosen::Value(v) = again {
        f.arguments.insert(name.to_string(), Value::String(v));
        f.sources.insert(name.to_string(), ArgSource::Request { kind: "chosen".into() });
    }
    true
}

/// The ids of the options this request says, of the option list a remembered reference
/// (`reference`, relabelled; `label` its call here) reads an id from in this run's output
/// ([`crate::fill::options::rechoose_read`]).
pub(super) fn chosen_instead(ctx: &Context, reference: &Value, label: &str) -> Option<String> {
    let r = crate::exec::refs::Reference::whole(reference.as_str()?).filter(|r| r.derive.is_none())?;
    let output = ctx.path.iter().find(|s| s.label == label)?.response.clone();
    let read = crate::exec::refs::lookup(&output, &r.segments())?;
    crate::fill::options::rechoose_read(read, &output, &ctx.request)
}

/// The known word of this request for a remembered word value `recorded`: its counterpart in
/// this request ([`Analogy::transfer_word`]), else another value the words this request says
/// went with in recorded runs ("the quickest" → `FASTEST`), else another value its ordering
/// words name ([`ordered_value`]: "the cheapest" → `lowest_price` where "the most trending"
/// sent `trending`).
pub(super) fn word_here(
    ctx: &Context,
    analogy: &Analogy,
    api: &ApiView,
    name: &str,
    recorded: &Value,
) -> Option<String> {
    let v = recorded.as_str()?;
    let known = known_words(ctx, api, name);
    let other = |w: Value| w.as_str().filter(|w| *w != v).map(str::to_string);
    analogy
        .transfer_word(v, &known)
        .or_else(|| ctx.args.as_deref().and_then(|m| m.cued_value(&api.id, name, &ctx.request)).and_then(other))
        // Only for a value chosen among the known ones (an order, not a name or a date).
        .or_else(|| {
            known
                .iter()
                .any(|k| k == v)
                .then(|| ordered_value(&ctx.request, || known.clone()))
                .flatten()
                .and_then(other)
        })
}

/// Whether `recorded`, one of the values an optional parameter is known to take, was a choice the remembered
/// request made in words that this request makes in none: it said the value ("the most
/// trending", "economy class") or words that went with it in recorded runs, and this request
/// says no value of the parameter nor any such word (nor, for a choice made by an ordering
/// word, any ordering word). Such a value is not this request's and is not sent ("find some
/// tour routes" sorts nothing; the request that said "trending" did).
pub(super) fn chosen_there_only(ctx: &Context, analogy: &Analogy, api: &ApiView, name: &str, recorded: &Value) -> bool {
    let (Some(value), Some(m)) = (recorded.as_str(), ctx.args.as_deref()) else { return false };
    if api.params.iter().all(|p| p.name != name || p.required) {
        return false;
    }
    // A word chosen among the values the parameter is known to take (not a free text, a
    // date, a number or a name), and a word of its own: "any" said in passing chooses no
    // catch-all `ANY`.
    let word = |v: &str| !v.is_empty() && v.chars().all(|c| c.is_ascii_alphabetic() || c == '_');
    let known = known_words(ctx, api, name);
    let function_word = crate::read::lexicon::lexicon().function_words.contains(&value.to_lowercase());
    if !word(value)
        || function_word
        || known.iter().filter(|v| word(v)).count() < 2
        || !known.iter().any(|v| v == value)
    {
        return false;
    }
    let chose_there = crate::read::reading::says(analogy.old_words(), value)
        || m.cued_value(&api.id, name, analogy.old_words()).as_ref() == Some(recorded);
    let request = words(&ctx.request);
    // A choice made by an ordering word ("the most trending") stands where this request
    // orders too, in words no run taught ("the highest-rated"): which order is its guess.
    let ordering = crate::read::reading::ordering_words;
    let ordered_there = m
        .value_cues(&api.id, name)
        .get(&recorded.to_string())
        .is_some_and(|cues| cues.iter().any(|(w, _)| ordering(analogy.old_words()).contains(w)));
    let chooses_here = m.cued_value(&api.id, name, &ctx.request).is_some()
        || known.iter().any(|v| crate::read::reading::says(&request, v))
        || (ordered_there && !ordering(&ctx.request).is_empty());
    chose_there && !chooses_here
}

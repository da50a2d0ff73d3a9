//! Argument filling every planner shares (SoAy's I/O coupling first): a parameter takes a field of
//! an earlier output with its name (or whose name it ends with: `pick_up_latitude` ← `latitude`),
//! else a typed value of the request (dates in order, start/end aware; times; counted numbers;
//! names; quoted strings; emails; URLs), else an earlier turn's output, else its documented
//! default. The deterministic planner fills with it; the LLM planner falls back to it and the engine
//! uses it to tell which calls are possible (Reverse Chain offers, plan validity, memory replays).

use super::learned::{mentions, ArgModel, Kind, Repeat};
use super::vocabulary::{known_words, named_value, ordered_value};
use crate::exec::refs::Reference;
use crate::plan::planner::{ApiView, ArgSource, Context, Filled};
use crate::read::slots::unit_word;
use crate::read::stamps;
use crate::read::values::{is_date_param, is_end_param, is_numeric, is_time_param, RequestValues};
use chrono::Duration;
use serde_json::{Map, Value};
use std::collections::HashSet;
use toolgraph_schema::fields::name_key;

pub(crate) use super::fields::FieldIndex;
pub(crate) use super::outputs::option_count;
use super::outputs::{find_field, newest_producer, next_item};

/// Whether a parameter names the start or the end of a trip or span (`fromId`, `pick_up_*` /
/// `toId`, `drop_off_*`, `destination`): with two producers, the start takes the earlier one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    Start,
    End,
    Neutral,
}

pub(crate) fn role(name: &str) -> Role {
    let n = name.to_ascii_lowercase();
    let to_prefix = name.starts_with("to") && name[2..].chars().next().is_some_and(|c| c.is_uppercase() || c == '_');
    let lex = crate::read::lexicon();
    if lex.start_params.starts(&n) {
        Role::Start
    } else if to_prefix || lex.end_params.starts(&n) {
        Role::End
    } else {
        Role::Neutral
    }
}

fn is_name_param(name: &str, description: &str) -> bool {
    let n = name.to_ascii_lowercase();
    let d = description.to_ascii_lowercase();
    crate::read::lexicon().name_params.any_in(&n) || n == "q" || d.contains("name of") && !n.ends_with("id")
}

/// Strings already used as argument values on the path.
fn used_strings(ctx: &Context) -> HashSet<String> {
    ctx.path
        .iter()
        .flat_map(|s| s.arguments.values())
        .filter_map(|v| v.as_str().map(|s| s.to_ascii_lowercase()))
        .collect()
}

/// Fill one parameter from the request's typed values; `repeat` = earlier calls of the same API.
/// A value the request labels with the parameter's name ("latitude: 35.77" for
/// `pick_up_latitude`); the start of a span takes the first, the end the second.
fn labelled(values: &RequestValues, p: &toolgraph_schema::ParamDoc, repeat: usize) -> Option<String> {
    let want = name_key(&p.name);
    let hits: Vec<&String> = values
        .labelled
        .iter()
        .filter(|(l, _)| l.len() >= 2 && (want == *l || want.ends_with(l.as_str())))
        .map(|(_, v)| v)
        .collect();
    let mut dedup: Vec<&String> = Vec::new();
    for h in hits {
        if dedup.last() != Some(&h) {
            dedup.push(h);
        }
    }
    let i = match role(&p.name) {
        Role::End => 1 + 2 * repeat,
        Role::Start => 2 * repeat,
        Role::Neutral => repeat,
    };
    dedup.get(i).or(dedup.last()).map(|v| v.to_string())
}

/// The mention of `kind` the learned filler picks for `api`'s parameter (first calls only: a
/// repeated call's values follow the rules' per-call order).
fn learned_pick(
    learned: Option<(&ArgModel, &str)>,
    values: &RequestValues,
    p: &toolgraph_schema::ParamDoc,
    kind: Kind,
    repeat: usize,
) -> Option<usize> {
    let (model, api) = learned.filter(|_| repeat == 0)?;
    model.choose(api, &p.name, kind, &mentions(values, kind)).map(|c| c.index)
}

/// The date the request moves the picked one `i` to, outwards: said as a span before it for a
/// start ("a conference from May 10 to 12; I arrive the day before": May 9), after it for an end
/// ("leave the day after it ends"). The user's own dates said from an event's; `None` unless one
/// span counts from `i` that way.
fn moved_out(values: &RequestValues, i: usize, end: bool) -> Option<usize> {
    let mut moved = (0..values.dates.len()).filter(|j| values.date_from.get(*j) == Some(&Some((i, !end))));
    let j = moved.next()?;
    moved.next().is_none().then_some(j)
}

/// A date put in `param` by another reading (a remembered run's date mapped to this request's)
/// moved out as [`moved_out`] moves a picked one.
pub(crate) fn moved_out_value(values: &RequestValues, param: &str, v: &Value) -> Option<Value> {
    let text = v.as_str()?;
    let i = values.dates.iter().position(|d| stamps::date_text(*d) == text)?;
    let j = moved_out(values, i, is_end_param(param))?;
    Some(Value::String(stamps::date_text(values.dates[j])))
}

/// The number the learned order picks for `api`'s numeric parameter, unless it is counted by a
/// unit foreign to the parameter ([`foreign_unit`]: "a five-day trip" for a count of travellers
/// that took "2 adults", "3 people", …): then the one other mention, or the learned order's
/// choice among the others, else the first of them no word counts (`None` where none is).
fn learned_number(
    learned: Option<(&ArgModel, &str)>,
    values: &RequestValues,
    p: &toolgraph_schema::ParamDoc,
    repeat: usize,
) -> Option<usize> {
    let chosen = learned_pick(learned, values, p, Kind::Number, repeat)?;
    let (model, api) = learned?;
    let ms = mentions(values, Kind::Number);
    let foreign = |i: usize| {
        values.numbers.get(i).and_then(|c| unit_word(&c.word)).is_some_and(|u| foreign_unit(model, api, &p.name, &u))
    };
    if !foreign(chosen) {
        return Some(chosen);
    }
    let left: Vec<usize> = (0..ms.len()).filter(|i| !foreign(*i)).collect();
    let uncounted =
        || left.iter().copied().find(|i| values.numbers.get(*i).is_some_and(|c| unit_word(&c.word).is_none()));
    match left.as_slice() {
        [one] => Some(*one),
        _ => model
            .choose_among(api, &p.name, Kind::Number, &ms, |i| left.contains(&i))
            .map(|c| c.index)
            .or_else(uncounted),
    }
}

/// Whether a number counted by `unit` is foreign to `api`'s own `param` (its own API's examples
/// decide, not the name's back-off): it took three or more of the request's numbers and none was
/// counted by a word (a coordinate, not "a 24-hour rental"); or it counts a few things, often
/// (four or more counted numbers, each unit twice on average), never this one, and some
/// parameter took this one twice or more (a count of something else).
fn foreign_unit(model: &ArgModel, api: &str, param: &str, unit: &str) -> bool {
    let Some(own) = model.slots.get(api).and_then(|s| s.get(param)) else { return false };
    let counted: u32 = own.units.values().sum();
    if counted == 0 {
        return own.kinds.get(&Kind::Number).is_some_and(|n| *n >= 3);
    }
    counted >= 4 && counted as usize >= 2 * own.units.len() && !own.units.contains_key(unit) && model.knows_unit(unit)
}

fn from_request(
    values: &RequestValues,
    p: &toolgraph_schema::ParamDoc,
    repeat: usize,
    used: &HashSet<String>,
    avoid: &HashSet<String>,
    learned: Option<(&ArgModel, &str)>,
) -> Option<(Value, &'static str)> {
    if let Some(v) = labelled(values, p, repeat) {
        return Some((Value::String(v), "labelled"));
    }
    if is_date_param(&p.name, &p.description) {
        if values.dates.is_empty() {
            return None;
        }
        let end = is_end_param(&p.name);
        let at = |i: usize| Value::String(stamps::date_text(values.dates[moved_out(values, i, end).unwrap_or(i)]));
        if let Some(i) = learned_pick(learned, values, p, Kind::Date, repeat) {
            return Some((at(i), "date"));
        }
        let start = repeat.min(values.dates.len() - 1);
        return match values.dates.get(repeat + 1) {
            _ if !end => Some((at(start), "date")),
            Some(_) => Some((at(repeat + 1), "date")),
            // One date said: an optional end is not made up (a one-way flight has no return),
            // a required one is the day after.
            None if !p.required => None,
            None => Some((Value::String(stamps::date_text(values.dates[start] + Duration::days(1))), "date")),
        };
    }
    if is_time_param(&p.name) {
        if let Some(i) = learned_pick(learned, values, p, Kind::Time, repeat) {
            return Some((Value::String(values.times[i].clone()), "time"));
        }
        let t = values.times.get(repeat).or(values.times.last())?;
        return Some((Value::String(t.clone()), "time"));
    }
    if let Some(v) = ages_value(values, p) {
        return Some((v, "ages"));
    }
    if is_numeric(&p.ty) {
        // The number the request counts with the parameter's word ("2 adults"), else the one
        // recorded runs point at.
        // (Each read once: the kind says which reading gave the number.)
        let (n, kind) = match range_end(values, p) {
            Some(n) => (Some(n), "range"),
            None => match values.count_for(&p.name) {
                Some(n) => (Some(n), "number"),
                None => match measured(values, p) {
                    Some(n) => (Some(n), "measure"),
                    None => (learned_number(learned, values, p, repeat).map(|i| values.numbers[i].value), "number"),
                },
            },
        };
        return n.and_then(serde_json::Number::from_f64).map(|n| (Value::Number(n), kind));
    }
    let n = p.name.to_ascii_lowercase();
    if n.contains("email") {
        return values.emails.first().map(|e| (Value::String(e.clone()), "email"));
    }
    if n.contains("url") || n.contains("link") {
        return values.urls.first().map(|e| (Value::String(e.clone()), "url"));
    }
    if n.contains("phone") || n.contains("mobile") || n == "tel" || n == "telephone" {
        return values.phones.get(repeat).or(values.phones.first()).map(|e| (Value::String(e.clone()), "phone"));
    }
    if crate::read::lexicon().file_params.any_in(&n) {
        if let Some(f) = values.files.first() {
            return Some((Value::String(f.clone()), "file"));
        }
    }
    if is_name_param(&p.name, &p.description) {
        // The first name not used yet (nor failed with this API), else the call's turn. (The
        // learned choice among names, even among unused ones only, lowered argument accuracy on
        // ComplexFuncBench's folds: 0.292 → 0.276; see docs/evaluation.md.)
        let fresh = |s: &&String| !avoid.contains(&s.to_ascii_lowercase());
        let pick = values
            .names
            .iter()
            .filter(fresh)
            .find(|s| !used.contains(&s.to_ascii_lowercase()))
            .or_else(|| {
                let left: Vec<&String> = values.names.iter().filter(fresh).collect();
                (!left.is_empty()).then(|| left[repeat % left.len()])
            })
            .or_else(|| values.quoted.iter().find(fresh))?;
        return Some((Value::String(pick.clone()), "name"));
    }
    if is_text_param(&n) {
        // Free text (a message, a prompt, a search term): what the user quoted.
        return values
            .quoted
            .iter()
            .find(|q| !avoid.contains(&q.to_ascii_lowercase()))
            .map(|q| (Value::String(q.clone()), "quoted"));
    }
    None
}

/// The end of the one range the request says ([`RequestValues::ranges`]) a numeric parameter
/// names by a word of its name (`price_min` ← 600, `price_max` ← 900 for "between 600 and 900
/// USD"); `None` where the request says no range or several.
fn range_end(values: &RequestValues, p: &toolgraph_schema::ParamDoc) -> Option<f64> {
    let [(low, high)] = values.ranges.as_slice() else { return None };
    let lex = crate::read::lexicon();
    let words = super::vocabulary::name_words(&p.name);
    if words.iter().any(|w| lex.range_low_params.contains(w)) {
        Some(*low)
    } else if words.iter().any(|w| lex.range_high_params.contains(w)) {
        Some(*high)
    } else {
        None
    }
}

/// The number the request counts in a unit of measure (the lexicon's `measure_units`) that a
/// numeric parameter's description measures in: "within 30 kilometers" for a radius "measured in
/// kilometers". `None` where no such number is said, or two different ones are.
pub(crate) fn measured(values: &RequestValues, p: &toolgraph_schema::ParamDoc) -> Option<f64> {
    let units = &crate::read::lexicon().measure_units;
    let in_units: Vec<(f64, String)> = values
        .numbers
        .iter()
        .filter_map(|c| unit_word(&c.word).filter(|u| units.contains(u)).map(|u| (c.value, u)))
        .collect();
    // Most requests count nothing in a unit of measure: the description is not read for them.
    if in_units.is_empty() {
        return None;
    }
    let described: Vec<String> =
        crate::read::reading::word_list(&p.description).iter().filter_map(|w| unit_word(w)).collect();
    let mut said = in_units.iter().filter(|(_, u)| described.contains(u));
    let first = said.next()?.0;
    said.all(|(n, _)| *n == first).then_some(first)
}

/// The children's ages the request says ([`RequestValues::child_ages`]) for a parameter that
/// takes them: its name says children and its name or description says ages (`children_age`;
/// `children`, documented "… children_age: 0,1,17"). Joined by commas for a string (as such
/// parameters document), a list for an array; `None` for a number (a count of children).
fn ages_value(values: &RequestValues, p: &toolgraph_schema::ParamDoc) -> Option<Value> {
    if values.child_ages.is_empty() || is_numeric(&p.ty) {
        return None;
    }
    let lex = crate::read::lexicon();
    let name = p.name.to_ascii_lowercase();
    let child = lex.party_children.iter().any(|w| name.contains(w.trim_end_matches('s')));
    let said = |w: &str| w == "age" || w == "ages";
    let ages = name.contains("age") || crate::read::reading::word_list(&p.description).iter().any(|w| said(w));
    if !(child && ages) {
        return None;
    }
    let whole = |a: &f64| serde_json::Number::from_f64(a.round());
    if p.ty.to_ascii_lowercase().starts_with("array") {
        return Some(Value::Array(values.child_ages.iter().filter_map(whole).map(Value::Number).collect()));
    }
    Some(Value::String(values.child_ages.iter().map(|a| format!("{}", a.round() as i64)).collect::<Vec<_>>().join(",")))
}

/// The end of a span said as a length after its start ("book the studio at 10 PM on March 3rd
/// and keep it 5 hours", "return it 30 hours later"): for an API that takes its end as a date
/// and a time, where the request says one date, one time and one span after, the end parameter
/// takes the moment said plus the span.
fn spanned_end(values: &RequestValues, api: &ApiView, p: &toolgraph_schema::ParamDoc) -> Option<Value> {
    let end_date = |q: &toolgraph_schema::ParamDoc| is_date_param(&q.name, &q.description) && is_end_param(&q.name);
    let end_time = |q: &toolgraph_schema::ParamDoc| is_time_param(&q.name) && is_end_param(&q.name);
    let (date, time) = (end_date(p), end_time(p));
    if !(date || time) || !api.params.iter().any(end_date) || !api.params.iter().any(end_time) {
        return None;
    }
    let ([d], [t], [span]) = (values.dates.as_slice(), values.times.as_slice(), values.shifts.as_slice()) else {
        return None;
    };
    let start = stamps::moment(&stamps::date_text(*d), t).filter(|_| *span > 0)?;
    let end = start + Duration::minutes(*span);
    Some(Value::String(if date { stamps::date_text(end.date()) } else { stamps::time_text(end.time()) }))
}

/// Parameters that take free text as the user wrote it.
fn is_text_param(lower_name: &str) -> bool {
    crate::read::lexicon().text_params.contains(lower_name)
}

/// A repeated call takes a parameter from where the earlier call of that API took it (the
/// second rental search reads the same location as the first) — or, one call per option,
/// from the next element of the list it read (the second hotel's id), or from the newest
/// producer no call of it read yet (the second hotel's details call).
fn repeated_source(ctx: &Context, api: &ApiView, param: &str, options: Option<usize>) -> Option<(String, String)> {
    let earlier = ctx.path.iter().rev().filter(|s| s.api.id == api.id).find_map(|s| match s.sources.get(param) {
        Some(ArgSource::Output { label, path }) if ctx.path.iter().any(|x| &x.label == label) => {
            Some((label.clone(), path.clone()))
        }
        _ => None,
    });
    let repeat_kind = options.and_then(|_| ctx.args.as_deref()?.repeat_of(&api.id, param));
    match (earlier, repeat_kind) {
        (Some((label, path)), Some(Repeat::Next)) => {
            let next = next_item(ctx, api, param, &label, &path).unwrap_or(path);
            Some((label, next))
        }
        (Some((label, path)), Some(Repeat::Newest)) => Some(newest_producer(ctx, api, param).unwrap_or((label, path))),
        (earlier, _) => earlier,
    }
}

/// Fill `api`'s parameters in `ctx` the deterministic way.
pub(crate) fn fill_arguments(ctx: &Context, api: &ApiView) -> Filled {
    fill_with(ctx, api, true)
}

/// [`fill_arguments`] for a replayed call of a remembered chain, which made each of its calls
/// for something: a call again of an API this run made, where reading every parameter from
/// where the earlier call read it would send the same arguments (the same lookup twice), fills
/// as a first call would — the request's values no call took yet come first.
pub(crate) fn fill_distinct(ctx: &Context, api: &ApiView) -> Filled {
    let first = fill_with(ctx, api, true);
    let same = |f: &Filled| {
        let mine = canonical(&f.arguments);
        ctx.path.iter().any(|s| s.api.id == api.id && canonical(&s.arguments) == mine)
    };
    if ctx.calls_of(&api.id) == 0 || !same(&first) {
        return first;
    }
    let fresh = fill_with(ctx, api, false);
    if same(&fresh) || !fresh.missing.is_empty() {
        return first;
    }
    fresh
}

/// [`fill_arguments`]; `repeats`: a repeated call reads where the earlier one read.
fn fill_with(ctx: &Context, api: &ApiView, repeats: bool) -> Filled {
    let mut out = Filled::default();
    let repeat = ctx.calls_of(&api.id);
    let used = used_strings(ctx);
    // A repeated call may be one more option: while the request's count of options (learned)
    // is not reached, or, where it names none, when it compares.
    let options = (repeat > 0).then(|| option_count(ctx, api)).flatten().filter(|n| repeat < *n);
    for p in &api.params {
        if let Some(v) = ctx.given.get(&p.name) {
            out.arguments.insert(p.name.clone(), v.clone());
            out.sources.insert(p.name.clone(), ArgSource::Given);
            continue;
        }
        let earlier = repeated_source(ctx, api, &p.name, options).filter(|_| repeats);
        if let Some((label, path)) = earlier {
            out.arguments.insert(p.name.clone(), Reference::new(&label, &path).into());
            out.sources.insert(p.name.clone(), ArgSource::Output { label, path });
            continue;
        }
        // Earlier outputs: exact names before suffix matches; of several producers, a start
        // parameter takes the earliest, others the most recent.
        let matches: Vec<(String, String, bool)> = ctx
            .path
            .iter()
            .filter_map(|step| find_field(ctx, step, &p.name).map(|(path, exact)| (step.label.clone(), path, exact)))
            .collect();
        let any_exact = matches.iter().any(|m| m.2);
        let pool: Vec<&(String, String, bool)> = matches.iter().filter(|m| m.2 == any_exact).collect();
        let found = match role(&p.name) {
            Role::Start => pool.first(),
            _ => pool.last(),
        }
        .map(|m| (*m).clone());
        // Values the user gave (dates, times, labelled values) win over fields of earlier outputs.
        let literal_first = (is_date_param(&p.name, &p.description) && !ctx.values.dates.is_empty())
            || (is_time_param(&p.name) && !ctx.values.times.is_empty())
            || labelled(&ctx.values, p, repeat).is_some();
        if let Some((label, path, _)) = found.filter(|_| !literal_first) {
            out.arguments.insert(p.name.clone(), Reference::new(&label, &path).into());
            out.sources.insert(p.name.clone(), ArgSource::Output { label, path });
            continue;
        }
        let avoid: HashSet<String> = ctx
            .dead_ends
            .iter()
            .filter(|d| d.api == api.id)
            .filter_map(|d| d.arguments.get(&p.name)?.as_str().map(str::to_ascii_lowercase))
            .collect();
        if let Some(v) = spanned_end(&ctx.values, api, p) {
            out.arguments.insert(p.name.clone(), v);
            out.sources.insert(p.name.clone(), ArgSource::Request { kind: "span".into() });
            continue;
        }
        let learned = ctx.args.as_deref().map(|m| (m, api.id.as_str()));
        if let Some((v, kind)) = from_request(&ctx.values, p, repeat, &used, &avoid, learned) {
            if p.required || kind != "name" {
                out.arguments.insert(p.name.clone(), v);
                out.sources.insert(p.name.clone(), ArgSource::Request { kind: kind.to_string() });
                continue;
            }
        }
        // A value recorded runs sent it with that the request says in words (an enumeration),
        // else the one the words said with it in recorded runs choose (an ordering: "the
        // cheapest", "top-rated"), else a known one said beside the parameter's own words (for
        // an optional parameter only the last two: a known word said alone is an ordinary word).
        let model = ctx.args.as_deref();
        let said = model.filter(|_| p.required).and_then(|m| m.said_value(&api.id, &p.name, &ctx.request));
        let (said, kind) = match said {
            Some(v) => (Some(v), "word"),
            None => match model.and_then(|m| m.cued_value(&api.id, &p.name, &ctx.request)) {
                Some(v) => (Some(v), "cue"),
                // A known value an ordering word names ("the most popular"), else one named beside
                // the parameter's own words ("first class").
                None => match ordered_value(&ctx.request, || known_words(ctx, api, &p.name)) {
                    Some(v) => (Some(v), "ordered"),
                    None => (named_value(&ctx.request, p, || known_words(ctx, api, &p.name)), "named"),
                },
            },
        };
        if let Some(v) = said {
            out.arguments.insert(p.name.clone(), v);
            out.sources.insert(p.name.clone(), ArgSource::Request { kind: kind.into() });
            continue;
        }
        if !p.required {
            continue;
        }
        // A value recorded runs always send it with.
        if let Some(v) = ctx.args.as_deref().and_then(|m| m.constant(&api.id, &p.name)) {
            out.arguments.insert(p.name.clone(), v);
            out.sources.insert(p.name.clone(), ArgSource::Default);
            continue;
        }
        // An earlier turn of the conversation (most recent first): "book the first one".
        let from_earlier = ctx.earlier.iter().rev().find_map(|e| {
            let (path, _) = e.fields.find(&p.name)?;
            let parts: Vec<&str> = path.split('.').collect();
            crate::exec::refs::lookup(&e.response, &parts)
                .filter(|v| !v.is_null())
                .map(|v| (e, path.clone(), v.clone()))
        });
        if let Some((e, path, v)) = from_earlier {
            out.arguments.insert(p.name.clone(), v);
            out.sources.insert(p.name.clone(), ArgSource::Earlier { turn: e.turn, api: e.api.clone(), path });
            continue;
        }
        if let Some(d) = p.default.as_ref().filter(|d| !d.is_null() && d.as_str() != Some("")) {
            out.arguments.insert(p.name.clone(), d.clone());
            out.sources.insert(p.name.clone(), ArgSource::Default);
            continue;
        }
        out.missing.push(p.name.clone());
    }
    out
}

/// The one canonical form of a call's arguments: keys sorted at every depth, so two calls are the
/// same call whatever order their objects were built in (what comparisons of calls and the
/// approval of one exact call key on; stored with approvals, so its text must not change).
pub(crate) fn canonical(m: &Map<String, Value>) -> String {
    fn write(v: &Value, out: &mut String) {
        match v {
            Value::Object(m) => write_map(m, out),
            Value::Array(a) => {
                out.push('[');
                for x in a {
                    write(x, out);
                    out.push(',');
                }
                out.push(']');
            }
            other => out.push_str(&other.to_string()),
        }
    }
    fn write_map(m: &Map<String, Value>, out: &mut String) {
        let mut keys: Vec<&String> = m.keys().collect();
        keys.sort();
        out.push('{');
        for k in keys {
            out.push_str(&Value::String(k.clone()).to_string());
            out.push(':');
            write(&m[k], out);
            out.push(',');
        }
        out.push('}');
    }
    let mut out = String::new();
    write_map(m, &mut out);
    out
}

#[cfg(test)]
#[path = "filler_tests.rs"]
mod tests;

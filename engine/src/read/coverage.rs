//! Coverage of a request by a path: is every part of what was asked served by some call?
//!
//! A path whose calls all returned something is not necessarily done: it may stop after the
//! location lookup of "compare the prices of renting a car tomorrow and the day after". The
//! requirements a request names are checked one by one:
//!
//! - every **date**, **time** and **name** of the request is used by some call (an argument, as
//!   sent, holds it), or — for names — appears in a response (a supplier named in the request
//!   shows up among the results); dates the request only implies relative to an unstated today
//!   are guesses and not required;
//! - every **count** of people or rooms ("2 adults", "three rooms") is sent;
//! - "compare", "both", "each", "respectively", "difference", "versus" need **a call per option**:
//!   the final API called at least twice with different arguments;
//! - "for each of them", "every result", "all of the options" need **a call per item**: the last
//!   API once for each item of the list it reads from (up to the 5 items a plan loops over), so a
//!   run that looked at the first result only is `partial`, naming what is missing;
//! - the asked-for **quantity** (price, duration, rating, distance, availability) appears as a field
//!   of some response;
//! - every API the request's words **ask for** (learned from recorded runs, see
//!   [`super::asks`]) is called;
//! - the path **ends where chains end**: the graph has seen chains stop after the last API (its
//!   static `END` weight), when the graph knows the API at all.
//!
//! The judge (deterministic, and the LLM judge beside its own verdict) passes a path only when
//! every requirement is covered; the deterministic planner does not finish while one is open.

use super::lexicon::lexicon;
use super::reading::{compares, word_list as words};
pub(crate) use super::requirement::{complete, missing_text, Kind, Requirement};
use crate::exec::refs::{self, Reference};
use crate::plan::planner::Context;
use serde_json::{Map, Value};
use std::collections::HashMap;
use toolgraph_schema::fields::name_key;

/// Strings and numbers a response or argument holds (lower-cased), bounded.
fn scalars(v: &Value, out: &mut Vec<String>, budget: &mut usize) {
    if *budget == 0 {
        return;
    }
    *budget -= 1;
    match v {
        Value::String(s) => out.push(s.to_lowercase()),
        Value::Number(n) => out.push(n.to_string()),
        Value::Array(a) => a.iter().for_each(|x| scalars(x, out, budget)),
        Value::Object(m) => m.values().for_each(|x| scalars(x, out, budget)),
        _ => {}
    }
}

/// Normalized keys of a response (letters and digits, lower-cased), bounded.
fn keys(v: &Value, out: &mut Vec<String>, budget: &mut usize) {
    if *budget == 0 {
        return;
    }
    *budget -= 1;
    match v {
        Value::Array(a) => a.iter().take(3).for_each(|x| keys(x, out, budget)),
        Value::Object(m) => {
            for (k, x) in m {
                out.push(name_key(k));
                keys(x, out, budget);
            }
        }
        _ => {}
    }
}

/// The quantities `request` asks for: (name, field keys).
pub(crate) fn asked_quantities(request: &str) -> Vec<(&'static str, &'static [String])> {
    let lower = request.to_lowercase();
    let ws = words(request);
    lexicon()
        .quantities
        .iter()
        .filter(|q| {
            q.cues.iter().any(|c| {
                if c.contains(' ') {
                    lower.contains(c.as_str())
                } else {
                    ws.iter().any(|w| w.starts_with(c.as_str()))
                }
            })
        })
        .map(|q| (q.name.as_str(), q.fields.as_slice()))
        .collect()
}

/// Whether the request asks about every item of a list ("for each of them", "every result", "all
/// of the options"): then the last API must be called once per item of the list it reads from.
pub(crate) fn asks_for_every_item(request: &str) -> bool {
    let lex = lexicon();
    let w = words(request);
    let at = |i: usize| w.get(i).map(String::as_str).unwrap_or_default();
    (0..w.len()).any(|i| {
        lex.every_words.contains(at(i))
            && (lex.item_words.contains(at(i + 1))
                || at(i + 1) == "of"
                    && (lex.them_words.contains(at(i + 2)) || at(i + 2) == "the" && lex.item_words.contains(at(i + 3))))
    })
}

/// The list an argument of `step` reads one item of (`$var2.result.0.hotel_id$` → producer
/// `var2`, list path `result`), and that item's index.
fn item_reference(step: &crate::plan::planner::Step) -> Option<(String, Vec<String>, usize)> {
    step.arguments.values().filter_map(Value::as_str).flat_map(Reference::all_in).find_map(|r| {
        let mut path = Vec::new();
        for p in r.segments() {
            if let Ok(i) = p.parse::<usize>() {
                return Some((r.label, path, i));
            }
            path.push(p.to_string());
        }
        None
    })
}

/// The arguments of each step as sent: references resolved against earlier responses (the
/// planned value when a reference cannot be resolved).
pub(crate) fn sent_arguments(ctx: &Context) -> Vec<Map<String, Value>> {
    let mut outputs: HashMap<String, &Value> = HashMap::new();
    let mut out = Vec::with_capacity(ctx.path.len());
    for s in &ctx.path {
        out.push(refs::resolve(&s.arguments, &outputs).unwrap_or_else(|_| s.arguments.clone()));
        outputs.insert(s.label.clone(), s.response.as_ref());
    }
    out
}

fn push(out: &mut Vec<Requirement>, kind: Kind, value: String, covered_by: Option<String>) {
    if !out.iter().any(|r| r.kind == kind && r.value == value) {
        out.push(Requirement { kind, value, covered_by });
    }
}

/// Requirements of one call per item: per compared option, for each item of a list the request
/// asks about, and as many calls as the options it counts.
fn each_requirements(ctx: &Context, sent: &[Map<String, Value>], out: &mut Vec<Requirement>) {
    if let Some(last) = ctx.path.last() {
        if compares(&ctx.request) {
            let calls: Vec<usize> =
                ctx.path.iter().enumerate().filter(|(_, s)| s.api.id == last.api.id).map(|(i, _)| i).collect();
            let distinct = calls
                .iter()
                .map(|i| crate::fill::filler::canonical(&sent[*i]))
                .collect::<std::collections::HashSet<_>>()
                .len();
            let by = (distinct >= 2).then(|| last.label.clone());
            push(out, Kind::Each, format!("a call of {} per compared option", last.api.name), by);
        }
    } else if compares(&ctx.request) {
        push(out, Kind::Each, "a call per compared option".into(), None);
    }
    // "For each of them": the last API once per item of the list it reads from (at most as many
    // items as a plan may loop over).
    if let (true, Some(last)) = (asks_for_every_item(&ctx.request), ctx.path.last()) {
        if let Some((label, path, _)) = item_reference(last) {
            let parts: Vec<&str> = path.iter().map(String::as_str).collect();
            let list = ctx.path.iter().find(|s| s.label == label).and_then(|s| refs::lookup(&s.response, &parts));
            if let Some(Value::Array(items)) = list {
                let want = items.len().min(crate::plan::program::MAX_ITEMS);
                let read: std::collections::HashSet<usize> = ctx
                    .path
                    .iter()
                    .filter(|s| s.api.id == last.api.id)
                    .filter_map(item_reference)
                    .filter(|(l, p, _)| *l == label && *p == path)
                    .map(|(_, _, i)| i)
                    .collect();
                let by = (read.len() >= want).then(|| last.label.clone());
                push(
                    out,
                    Kind::Each,
                    format!("a call of {} for each of the {want} items asked about", last.api.name),
                    by,
                );
            }
        }
    }
    // A count of options the request names for an API recorded runs call once per option ("find
    // three hotels … the details of each"): that many calls of it.
    if ctx.args.is_some() {
        let mut seen = std::collections::HashSet::new();
        for s in &ctx.path {
            if !seen.insert(s.api.id.as_str()) {
                continue;
            }
            // The learned count is a call per option as a comparison's is; a count the request
            // points back at is its own (a replay of a request that asked about one owes it).
            let (n, kind) = match crate::fill::outputs::learned_options(ctx, &s.api) {
                Some(n) => (n, Kind::Each),
                None => match crate::fill::outputs::pointed_options(ctx, &s.api) {
                    Some(n) => (n, Kind::Options),
                    None => continue,
                },
            };
            let calls: Vec<&crate::plan::planner::Step> = ctx.path.iter().filter(|x| x.api.id == s.api.id).collect();
            let by = (calls.len() >= n).then(|| calls[calls.len() - 1].label.clone());
            push(out, kind, format!("{n} calls of {}, one per option", s.api.name), by);
        }
    }
}

/// How an asked API's requirement reads: `Vehicle_Details (for "vehicle")`.
pub(crate) fn asked_value(name: &str, word: &str) -> String {
    format!("{name} (for \"{word}\")")
}

/// The requirements of `ctx.request` and which call of the path covers each.
pub(crate) fn assess(ctx: &Context) -> Vec<Requirement> {
    let sent = sent_arguments(ctx);
    let labels: Vec<&str> = ctx.path.iter().map(|s| s.label.as_str()).collect();
    // Per step: the scalar values it sent, the strings its response holds, its response's keys.
    let args: Vec<Vec<String>> = sent
        .iter()
        .map(|m| {
            let mut v = Vec::new();
            let mut budget = 200;
            m.values().for_each(|x| scalars(x, &mut v, &mut budget));
            v
        })
        .collect();
    let responses: Vec<Vec<String>> = ctx
        .path
        .iter()
        .map(|s| {
            let mut v = Vec::new();
            let mut budget = 3000;
            scalars(&s.response, &mut v, &mut budget);
            v
        })
        .collect();
    let covered_in = |pred: &dyn Fn(&str) -> bool, pool: &[Vec<String>]| -> Option<String> {
        pool.iter().position(|vals| vals.iter().any(|v| pred(v))).map(|i| labels[i].to_string())
    };
    let mut out: Vec<Requirement> = Vec::new();
    let v = &ctx.values;
    // A date said only as the asks' context is no call's due.
    for d in v.dates.iter().filter(|d| !v.unanchored.contains(d) && !ctx.context_dates.contains(d)) {
        let iso = super::stamps::date_text(*d);
        push(&mut out, Kind::Date, iso.clone(), covered_in(&|s| s.contains(&iso), &args));
    }
    for t in &v.times {
        push(&mut out, Kind::Time, t.clone(), covered_in(&|s| s.contains(t.as_str()), &args));
    }
    for name in &v.names {
        if name.chars().any(|c| c.is_ascii_digit()) {
            continue;
        }
        let n = name.to_lowercase();
        // An argument holding the name, or held by it ("London" for "London Heathrow Airport").
        let in_args = covered_in(
            &|s| s.contains(&n) || (s.len() >= 4 && s.chars().any(char::is_alphabetic) && n.contains(s)),
            &args,
        );
        let by = in_args.or_else(|| covered_in(&|s| s.contains(&n), &responses));
        push(&mut out, Kind::Name, name.clone(), by);
    }
    // Quoted text is what the user wants used as it is ("echo 'hello'"): a call must take it.
    for q in v.quoted.iter().filter(|q| {
        !q.trim().is_empty() && q.chars().count() <= 200 && !v.names.iter().any(|n| n.eq_ignore_ascii_case(q))
    }) {
        let n = q.to_lowercase();
        let by = covered_in(&|s| s.contains(&n), &args).or_else(|| covered_in(&|s| s.contains(&n), &responses));
        push(&mut out, Kind::Name, q.clone(), by);
    }
    for c in &v.numbers {
        let w = c.word.trim_end_matches('s');
        if !(lexicon().counted.contains(w) || lexicon().counted.contains(&c.word)) || c.value.fract() != 0.0 {
            continue;
        }
        let n = format!("{}", c.value as i64);
        push(&mut out, Kind::Count, format!("{n} {}", c.word), covered_in(&|s| s == n || s == format!("{n}.0"), &args));
    }
    // A subtask is served by a call of one of its APIs, or by a count it names being sent
    // ("We need one room." is served by the hotel search that sent room_qty = 1).
    for (sub, ids) in &ctx.subtask_apis {
        if ids.is_empty() {
            continue;
        }
        let lower = sub.to_lowercase();
        let by = ctx.path.iter().find(|s| ids.contains(&s.api.id)).map(|s| s.label.clone()).or_else(|| {
            out.iter()
                .filter(|r| r.kind == Kind::Count)
                .find(|r| r.covered() && r.value.split_once(' ').is_some_and(|(_, w)| lower.contains(w)))
                .and_then(|r| r.covered_by.clone())
        });
        push(&mut out, Kind::Subtask, sub.clone(), by);
    }
    // An API the request's words ask for is served by a call of it, or of another API about
    // the same word (its name or description uses it: one hotel search for another).
    for a in &ctx.asked_apis {
        let by = ctx.path.iter().find(|s| a.served_by(&s.api.id)).map(|s| s.label.clone());
        push(&mut out, Kind::Api, asked_value(&a.name, &a.word), by);
    }
    // A step whose output feeds nothing later must be one observed chains stop after (a location
    // lookup nobody used is an unfinished branch).
    let fed: std::collections::HashSet<String> =
        ctx.path.iter().flat_map(|s| s.arguments.values()).flat_map(refs::labels_in).collect();
    for s in &ctx.path {
        if !fed.contains(s.label.as_str()) && s.api.is_lookup() {
            push(&mut out, Kind::Completion, format!("observed chains go on after {}", s.api.name), None);
        }
    }
    each_requirements(ctx, &sent, &mut out);
    for (name, fields) in asked_quantities(&ctx.request) {
        let by = ctx.path.iter().rev().find(|s| {
            let mut ks = Vec::new();
            let mut budget = 2000;
            keys(&s.response, &mut ks, &mut budget);
            ks.iter().any(|k| fields.iter().any(|f| k.contains(f.as_str())))
        });
        push(&mut out, Kind::Quantity, name.to_string(), by.map(|s| s.label.clone()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{ApiView, Step};
    use crate::read::values::RequestValues;
    use chrono::NaiveDate;
    use serde_json::json;
    use std::sync::Arc;

    fn api(id: &str, ends: Option<f64>) -> Arc<ApiView> {
        Arc::new(ApiView {
            id: id.into(),
            name: id.into(),
            tool: "t".into(),
            category: "c".into(),
            description: String::new(),
            params: vec![],
            output_fields: vec![],
            availability: None,
            ends,
        })
    }

    fn step(c: &mut Context, a: &Arc<ApiView>, args: Value, response: Value) {
        let label = format!("var{}", c.path.len() + 1);
        c.path.push(Step {
            api: a.clone(),
            label,
            arguments: args.as_object().cloned().unwrap_or_default(),
            sources: Default::default(),
            observation: String::new(),
            response: Arc::new(response),
            repeat: 0,
        });
    }

    const RENT: &str = "Today is October 13th, 2024. I want to rent a car for a day at the San Diego Marriott La Jolla. Could you compare the price differences for picking up the car at 8 AM tomorrow and the day after tomorrow at the same place for a 24-hour rental?";

    #[test]
    fn for_every_result_needs_a_call_per_result_else_the_run_is_partial() {
        assert!(asks_for_every_item("Find hotels near the Louvre and show me the reviews for each of them."));
        assert!(asks_for_every_item("Check availability for every result."));
        assert!(!asks_for_every_item("Two accessible hotels for all of November 2024."));
        assert!(!asks_for_every_item("Stay two days in each city."));
        let text = "Find hotels near the Louvre and show me the reviews for each of them.";
        let mut c = Context::new(text, RequestValues::extract(text, NaiveDate::from_ymd_opt(2030, 1, 1).unwrap()));
        let search = api("search", Some(0.0));
        let reviews = api("reviews", Some(0.9));
        step(
            &mut c,
            &search,
            json!({"query": "Louvre"}),
            json!({"result": [{"hotel_id": 1, "score": 8}, {"hotel_id": 2, "score": 9}, {"hotel_id": 3, "score": 7}]}),
        );
        step(&mut c, &reviews, json!({"hotel_id": "$var1.result.0.hotel_id$"}), json!({"reviews": [{"text": "fine"}]}));
        let items = assess(&c);
        assert!(!complete(&items));
        assert!(missing_text(&items).contains("a call of reviews for each of the 3 items"), "{}", missing_text(&items));
        // The same item twice is still one of three.
        step(&mut c, &reviews, json!({"hotel_id": "$var1.result.0.hotel_id$"}), json!({"reviews": [{"text": "ok"}]}));
        assert!(!assess(&c).iter().all(|r| r.kind != Kind::Each || r.covered()));
        for i in [1, 2] {
            let r = format!("$var1.result.{i}.hotel_id$");
            step(&mut c, &reviews, json!({ "hotel_id": r }), json!({"reviews": [{"text": "good"}]}));
        }
        let items = assess(&c);
        assert!(items.iter().filter(|r| r.kind == Kind::Each).all(|r| r.covered()), "{}", missing_text(&items));
    }

    /// A day said only as the asks' setting is no call's due: the run that served the asks is
    /// complete; the same day said where it asks is owed a call.
    #[test]
    fn a_context_day_is_owed_no_call() {
        let text = "Our choir tours Norway from June 2 to June 9, 2025. Show the largest concert halls in Bergen.";
        let mut c = Context::new(text, RequestValues::extract(text, NaiveDate::from_ymd_opt(2025, 1, 1).unwrap()));
        step(&mut c, &api("halls", Some(0.9)), json!({"city": "Bergen"}), json!({"halls": [{"name": "Grieghallen"}]}));
        assert!(missing_text(&assess(&c)).contains("2025-06-02"), "{}", missing_text(&assess(&c)));
        c.context_dates = c.values.dates.clone();
        let items = assess(&c);
        assert!(items.iter().all(|r| r.kind != Kind::Date), "{}", missing_text(&items));
    }

    #[test]
    fn a_reference_inside_an_array_argument_feeds_its_producer() {
        let text = "Fly from Tokyo to Los Angeles via London on January 10, 2025 and get the seat map.";
        let mut c = Context::new(text, RequestValues::extract(text, NaiveDate::from_ymd_opt(2024, 12, 1).unwrap()));
        let (loc, multi) = (api("loc", Some(0.0)), api("multi", Some(0.0)));
        for q in ["Tokyo", "Los Angeles", "London"] {
            step(&mut c, &loc, json!({ "query": q }), json!({"data": [{"id": format!("{q}.CITY")}]}));
        }
        // The legs take the three lookups inside an array: each is fed.
        let legs = json!({"legs": [{"fromId": "$var1.data.0.id$", "toId": "$var3.data.0.id$"},
                                   {"fromId": "$var3.data.0.id$", "toId": "$var2.data.0.id$"}]});
        step(&mut c, &multi, legs, json!({"data": {"flightOffers": [{"token": "t1"}]}}));
        assert!(!missing_text(&assess(&c)).contains("go on after loc"), "{}", missing_text(&assess(&c)));
    }

    #[test]
    fn a_correct_prefix_is_not_complete_and_the_full_chain_is() {
        let mut c = Context::new(RENT, RequestValues::extract(RENT, NaiveDate::from_ymd_opt(2030, 1, 1).unwrap()));
        let loc = api("loc", Some(0.0));
        let rent = api("rent", Some(0.6));
        step(
            &mut c,
            &loc,
            json!({"query": "San Diego Marriott La Jolla"}),
            json!([{"name": "San Diego Marriott La Jolla", "coordinates": {"latitude": 32.87, "longitude": -117.2}}]),
        );
        let items = assess(&c);
        assert!(!complete(&items));
        let missing = missing_text(&items);
        for m in ["2024-10-14", "2024-10-15", "08:00", "price", "per compared option", "go on after loc"] {
            assert!(missing.contains(m), "{m} should be missing: {missing}");
        }
        assert!(!missing.contains("Marriott"), "the name is covered: {missing}");
        step(
            &mut c,
            &rent,
            json!({"latitude": "$var1.coordinates.latitude$", "pick_up_date": "2024-10-14", "drop_off_date": "2024-10-15", "pick_up_time": "08:00"}),
            json!({"data": {"search_results": [{"pricing_info": {"price": 45.3}}]}}),
        );
        let missing = missing_text(&assess(&c));
        assert_eq!(missing, "a call of rent per compared option", "one rental search does not compare: {missing}");
        step(
            &mut c,
            &rent,
            json!({"latitude": "$var1.coordinates.latitude$", "pick_up_date": "2024-10-15", "drop_off_date": "2024-10-16", "pick_up_time": "08:00"}),
            json!({"data": {"search_results": [{"pricing_info": {"price": 52.1}}]}}),
        );
        let items = assess(&c);
        assert!(complete(&items), "{}", missing_text(&items));
        assert_eq!(
            items.iter().find(|r| r.kind == Kind::Quantity).and_then(|r| r.covered_by.clone()).as_deref(),
            Some("var3")
        );
    }

    #[test]
    fn guessed_dates_and_unasked_things_are_not_required() {
        let text = "Find hotels in Rome starting tomorrow";
        let c = Context::new(text, RequestValues::extract(text, NaiveDate::from_ymd_opt(2030, 1, 1).unwrap()));
        assert!(assess(&c).iter().all(|r| r.kind == Kind::Name), "{:?}", assess(&c));
        assert_eq!(asked_quantities("What is the cheapest flight?")[0].0, "price");
        assert!(asked_quantities("Find a hotel in Paris").is_empty());
        assert!(compares("Which is cheaper, A or B? Compare both.") && !compares("Book a flight"));
    }

    #[test]
    fn counts_must_be_sent() {
        let text = "Today is May 1st, 2025. Find a hotel in Tokyo for 2 adults on May 3rd, 2025.";
        let mut c = Context::new(text, RequestValues::extract(text, NaiveDate::from_ymd_opt(2030, 1, 1).unwrap()));
        step(
            &mut c,
            &api("h", None),
            json!({"city": "Tokyo", "date": "2025-05-03"}),
            json!({"hotels": [{"name": "X"}]}),
        );
        assert_eq!(missing_text(&assess(&c)), "the count 2 adults");
        c.path.clear();
        step(
            &mut c,
            &api("h", None),
            json!({"city": "Tokyo", "date": "2025-05-03", "adults": 2}),
            json!({"hotels": [{"name": "X"}]}),
        );
        assert!(complete(&assess(&c)));
    }
}

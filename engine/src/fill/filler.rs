//! Argument filling every planner shares (SoAy's I/O coupling first): a parameter takes a field of
//! an earlier output with its name (or whose name it ends with: `pick_up_latitude` ← `latitude`),
//! else a typed value of the request (dates in order, start/end aware; times; counted numbers;
//! names; quoted strings; emails; URLs), else an earlier turn's output, else its documented
//! default. The deterministic planner fills with it; the LLM planner falls back to it and the engine
//! uses it to tell which calls are possible (Reverse Chain offers, plan validity, memory replays).

use super::learned::{mentions, ArgModel, Kind, Repeat};
use super::vocabulary::{known_words, named_value};
use crate::exec::refs::Reference;
use crate::plan::planner::{ApiView, ArgSource, Context, Filled};
use crate::read::stamps;
use crate::read::values::{is_date_param, is_end_param, is_time_param, RequestValues};
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
enum Role {
    Start,
    End,
    Neutral,
}

fn role(name: &str) -> Role {
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

fn is_numeric(ty: &str) -> bool {
    let t = ty.to_ascii_lowercase();
    t.starts_with("int") || t.starts_with("number") || t.starts_with("float") || t.starts_with("double")
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
        if let Some(i) = learned_pick(learned, values, p, Kind::Date, repeat) {
            return Some((Value::String(stamps::date_text(values.dates[i])), "date"));
        }
        let start = values.dates.get(repeat).or(values.dates.last()).copied()?;
        let d = if is_end_param(&p.name) {
            values.dates.get(repeat + 1).copied().unwrap_or(start + Duration::days(1))
        } else {
            start
        };
        return Some((Value::String(stamps::date_text(d)), "date"));
    }
    if is_time_param(&p.name) {
        if let Some(i) = learned_pick(learned, values, p, Kind::Time, repeat) {
            return Some((Value::String(values.times[i].clone()), "time"));
        }
        let t = values.times.get(repeat).or(values.times.last())?;
        return Some((Value::String(t.clone()), "time"));
    }
    if is_numeric(&p.ty) {
        // The number the request counts with the parameter's word ("2 adults"), else the one
        // recorded runs point at.
        let n = values
            .count_for(&p.name)
            .or_else(|| learned_pick(learned, values, p, Kind::Number, repeat).map(|i| values.numbers[i].value));
        return n.and_then(serde_json::Number::from_f64).map(|n| (Value::Number(n), "number"));
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

/// Fill `api`'s parameters in `ctx` the deterministic way (also used to re-fill replayed memories).
pub(crate) fn fill_arguments(ctx: &Context, api: &ApiView) -> Filled {
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
        let earlier = repeated_source(ctx, api, &p.name, options);
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
                // A known value named beside the parameter's own words ("first class").
                None => (named_value(&ctx.request, p, || known_words(ctx, api, &p.name)), "named"),
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
mod tests {
    use super::*;

    #[test]
    fn one_canonical_form_at_every_depth() {
        let a = json!({"ingredients": {"flour": 2, "eggs": 3}, "servings": 4});
        let b = json!({"servings": 4, "ingredients": {"eggs": 3, "flour": 2}});
        let (a, b) = (a.as_object().unwrap(), b.as_object().unwrap());
        assert_eq!(canonical(a), canonical(b));
        assert_eq!(canonical(a), r#"{"ingredients":{"eggs":3,"flour":2,},"servings":4,}"#);
        assert_ne!(canonical(a), canonical(json!({"servings": 5}).as_object().unwrap()));
    }
    use crate::plan::test_support::{api, ctx, p};
    use crate::plan::Step;
    use serde_json::json;
    use std::sync::Arc;

    #[test]
    fn a_later_turn_takes_what_the_request_lacks_from_earlier_turns() {
        let mut c = ctx("Book the first one for me");
        let book = api("book", vec![p("hotel_id", "number", true), p("currency", "string", false)]);
        assert_eq!(fill_arguments(&c, &book).missing, vec!["hotel_id".to_string()]);
        let older = Arc::new(json!({"data": [{"hotel_id": 7}]}));
        let newer = Arc::new(json!({"data": {"hotels": [{"hotel_id": 42, "name": "Ritz"}]}}));
        c.earlier = vec![
            crate::plan::Earlier::new(1, "hotels in Rome", "search", older),
            crate::plan::Earlier::new(2, "hotels in Paris", "search", newer),
        ];
        let f = fill_arguments(&c, &book);
        assert_eq!(f.arguments["hotel_id"], json!(42), "the most recent turn wins");
        assert!(matches!(&f.sources["hotel_id"], ArgSource::Earlier { turn: 2, .. }));
        assert!(!f.arguments.contains_key("currency"), "optional parameters are not filled from earlier turns");
    }

    /// The learned filler in the fill: without it both times take the first mention (the
    /// issue's rental: drop-off at the pick-up time); learned from three recorded rentals, the
    /// drop-off takes the time said with "return", and a required parameter nothing fills takes
    /// the constant those runs always sent.
    #[test]
    fn learned_cues_choose_the_mention_and_constants_fill_what_nothing_else_does() {
        let rent = api(
            "car/rent",
            vec![
                p("pick_up_time", "string", true),
                p("drop_off_time", "string", true),
                p("currency_code", "string", true),
            ],
        );
        let request = "Rent a car at Seattle-Tacoma International Airport at 11 AM on December 25th, 2024, and return it at the same place at 5 PM seven days later.";
        let mut c = ctx(request);
        let f = fill_arguments(&c, &rent);
        assert_eq!(
            (f.arguments["pick_up_time"].as_str(), f.arguments["drop_off_time"].as_str()),
            (Some("11:00"), Some("11:00")),
            "the rules alone"
        );
        assert_eq!(f.missing, vec!["currency_code".to_string()]);
        let mut model = crate::fill::learned::ArgModel::default();
        let day = chrono::NaiveDate::from_ymd_opt(2024, 6, 1).unwrap();
        for (req, pick, drop) in [
            (
                "Rent a car at Miami airport at 9 AM on July 3rd, 2024 and return it there at 6 PM on July 5th.",
                "09:00",
                "18:00",
            ),
            (
                "I want to return the car at 8 PM on August 9th, 2024; pick it up at LAX at 10 AM on August 2nd.",
                "10:00",
                "20:00",
            ),
            ("Pick up a car in Denver at 7 AM on May 1st, 2024, return it at 11 PM two days later.", "07:00", "23:00"),
        ] {
            let args = json!({"pick_up_time": pick, "drop_off_time": drop, "currency_code": "USD"});
            model.learn(req, [("car/rent", args.as_object().unwrap())], day);
        }
        c.args = Some(Arc::new(model));
        let f = fill_arguments(&c, &rent);
        assert_eq!(f.arguments["pick_up_time"], json!("11:00"));
        assert_eq!(f.arguments["drop_off_time"], json!("17:00"));
        assert_eq!(f.arguments["currency_code"], json!("USD"));
        assert!(f.missing.is_empty());
    }

    /// A booking's end said as a length after its start: the end date and time are the start
    /// plus the span (here past midnight); a request that says its end leaves them to the rules.
    #[test]
    fn an_end_said_as_a_span_after_the_start_is_the_start_plus_the_span() {
        let book = api(
            "studio/book",
            vec![
                p("start_date", "string", true),
                p("start_time", "string", true),
                p("end_date", "string", true),
                p("end_time", "string", true),
            ],
        );
        let c = ctx("Book the recording studio on March 3rd, 2025 at 10 PM and keep it until 5 hours later.");
        let f = fill_arguments(&c, &book);
        let got: Vec<&str> = ["start_date", "start_time", "end_date", "end_time"]
            .iter()
            .map(|k| f.arguments[*k].as_str().unwrap())
            .collect();
        assert_eq!(got, ["2025-03-03", "22:00", "2025-03-04", "03:00"]);
        let c = ctx("Book the recording studio on March 3rd, 2025 from 10 PM to 11 PM.");
        let f = fill_arguments(&c, &book);
        assert!(
            !matches!(&f.sources["end_time"], ArgSource::Request { kind } if kind == "span"),
            "an end said is not a span: {:?}",
            f.sources["end_time"]
        );
    }

    /// A number no word ties to the parameter ("2 adults" would): recorded runs point at the
    /// mention (the rules alone leave it out).
    #[test]
    fn learned_numbers_follow_the_recorded_runs_where_no_word_ties_them() {
        let day = chrono::NaiveDate::from_ymd_opt(2024, 6, 1).unwrap();
        let mut model = crate::fill::learned::ArgModel::default();
        for (req, rooms, city) in [
            ("Book 3 nights in Rome for 2 of us in Milan style, we need 1 please", 1, "Rome"),
            ("In Paris, for 4 days, 2 guests, need 1 in the Paris Hilton area please", 1, "Paris"),
            ("Five nights, 2 people, need 3 please, near Berlin or Hamburg", 3, "Berlin"),
        ] {
            let args = json!({"room_qty": rooms, "city": city});
            model.learn(req, [("h/book", args.as_object().unwrap())], day);
        }
        let book = api("h/book", vec![p("room_qty", "integer", true), p("city", "string", true)]);
        let mut c = ctx("Stay 6 nights, 3 travellers, we need 2 please, in Lisbon or Porto");
        assert_eq!(fill_arguments(&c, &book).arguments.get("room_qty"), None, "no word ties a number to room_qty");
        c.args = Some(Arc::new(model));
        let f = fill_arguments(&c, &book);
        assert_eq!(f.arguments["room_qty"], json!(2.0), "the number said before `please`");
    }

    #[test]
    fn fills_from_outputs_then_request_then_defaults() {
        let mut c = ctx("Today is October 13th, 2024. I want to rent a car at the San Diego Marriott La Jolla at 8 AM tomorrow and the day after tomorrow.");
        let loc = api("loc", vec![p("query", "string", true)]);
        let f = fill_arguments(&c, &loc);
        assert_eq!(f.arguments["query"], json!("San Diego Marriott La Jolla"));
        assert!(f.missing.is_empty());
        c.path.push(Step {
            api: loc,
            label: "var1".into(),
            arguments: f.arguments,
            sources: f.sources,
            observation: String::new(),
            response: json!([{"city": "San Diego", "coordinates": {"latitude": 32.87, "longitude": -117.2}}]).into(),
            repeat: 0,
        });
        let mut with_default = p("currency", "string", true);
        with_default.default = Some(json!("USD"));
        let rent = api(
            "rent",
            vec![
                p("pick_up_latitude", "number", true),
                p("pick_up_date", "string", true),
                p("drop_off_date", "string", true),
                p("pick_up_time", "string", true),
                with_default,
                p("driver_id", "string", true),
                p("adults", "number", false),
            ],
        );
        let f = fill_arguments(&c, &rent);
        assert_eq!(f.arguments["pick_up_latitude"], json!("$var1.coordinates.latitude$"));
        assert_eq!(f.arguments["pick_up_date"], json!("2024-10-14"));
        assert_eq!(f.arguments["drop_off_date"], json!("2024-10-15"));
        assert_eq!(f.arguments["pick_up_time"], json!("08:00"));
        assert_eq!(f.arguments["currency"], json!("USD"));
        assert_eq!(f.missing, vec!["driver_id"]);
        assert!(!f.arguments.contains_key("adults"), "optional with no value stays out");
    }

    /// One call per option, learned: recorded runs called the details API once per hotel of the
    /// search's list, as many times as the request's count said. An unseen request ("two
    /// hotels") gets the first, then the second hotel's id, and no third call; without the model
    /// the repeat takes the first hotel again (a call the search never repeats).
    #[test]
    fn a_call_per_option_takes_the_next_element_as_many_times_as_the_request_counts() {
        let day = chrono::NaiveDate::from_ymd_opt(2024, 6, 1).unwrap();
        let mut model = crate::fill::learned::ArgModel::default();
        for (req, n) in [
            ("Find three hotels in Rome near the Colosseum and tell me about each.", 3),
            ("I want the two cheapest hotels in Paris for 4 nights and their details.", 2),
            ("Show me 3 hotels in Berlin for 2 adults with their descriptions.", 3),
        ] {
            let search = json!({"city": "x"});
            let details: Vec<Map<String, Value>> = (0..n)
                .map(|i| json!({"hotel_id": format!("$var1.result.{i}.hotel_id$")}).as_object().cloned().unwrap())
                .collect();
            let calls = std::iter::once(("h/search", search.as_object().unwrap()))
                .chain(details.iter().map(|d| ("h/details", d)));
            model.learn(req, calls, day);
        }
        assert!(model.advances("h/details", "hotel_id"));
        assert!(model.advances("other/details", "hotel_id"), "backed off to the parameter name");
        let details = api("h/details", vec![p("hotel_id", "string", true)]);
        let search = api("h/search", vec![p("city", "string", true)]);
        let mut c = ctx("Find two hotels in Lisbon for 5 nights and describe them.");
        let push = |c: &mut Context, a: &Arc<ApiView>, f: Filled, response: Value| {
            let label = format!("var{}", c.path.len() + 1);
            c.path.push(Step {
                api: a.clone(),
                label,
                arguments: f.arguments,
                sources: f.sources,
                observation: String::new(),
                response: response.into(),
                repeat: 0,
            });
        };
        let f = fill_arguments(&c, &search);
        push(&mut c, &search, f, json!({"result": [{"hotel_id": 11}, {"hotel_id": 12}, {"hotel_id": 13}]}));
        let first = fill_arguments(&c, &details);
        assert_eq!(first.arguments["hotel_id"], json!("$var1.result.hotel_id$"));
        push(&mut c, &details, first, json!({"description": "a"}));
        // Without the model: the same hotel again.
        let plain = Context { args: None, ..c.clone() };
        assert_eq!(fill_arguments(&plain, &details).arguments["hotel_id"], json!("$var1.result.hotel_id$"));
        assert_eq!(option_count(&plain, &details), None);
        c.args = Some(Arc::new(model));
        assert_eq!(option_count(&c, &details), Some(2), "`two hotels`");
        let second = fill_arguments(&c, &details);
        assert_eq!(second.arguments["hotel_id"], json!("$var1.result.1.hotel_id$"));
        push(&mut c, &details, second, json!({"description": "b"}));
        assert_eq!(
            fill_arguments(&c, &details).arguments["hotel_id"],
            json!("$var1.result.1.hotel_id$"),
            "two options, two calls: a third repeats"
        );
        // A request that compares and names no count: as many as the list holds.
        let mut all = c.clone();
        all.request = "Compare the hotels in Lisbon and describe each.".into();
        all.values = RequestValues::extract(&all.request, day);
        assert_eq!(fill_arguments(&all, &details).arguments["hotel_id"], json!("$var1.result.2.hotel_id$"));
        let f = fill_arguments(&all, &details);
        push(&mut all, &details, f, json!({"description": "c"}));
        assert_eq!(
            fill_arguments(&all, &details).arguments["hotel_id"],
            json!("$var1.result.2.hotel_id$"),
            "the list holds no fourth"
        );
    }

    /// Interleaved options: recorded runs called the payment API after each hotel's details call,
    /// with the id the newest details call returned. The second payment call reads the second
    /// details call, not the first one's output again.
    #[test]
    fn a_call_per_option_reads_the_newest_producer_where_recorded_runs_did() {
        let repeat = |a: &str, b: &str| Repeat::of(&Reference::whole(a).unwrap(), &Reference::whole(b).unwrap());
        assert_eq!(repeat("$var4.hotel_id$", "$var6.hotel_id$"), Repeat::Newest);
        assert_eq!(repeat("$var2.result.0.id$", "$var2.result.1.id$"), Repeat::Next);
        assert_eq!(repeat("$var2.result.id$", "$var2.result.1.id$"), Repeat::Next, "a left-out index is the first");
        assert_eq!(repeat("$var1.lat$", "$var1.lat$"), Repeat::Same);
        assert_eq!(repeat("$var1.lat$", "$var1.lon$"), Repeat::Other);
        let day = chrono::NaiveDate::from_ymd_opt(2024, 6, 1).unwrap();
        let mut model = crate::fill::learned::ArgModel::default();
        for req in [
            "Find two hotels in Rome and their details and payment methods.",
            "Check 2 hotels in Oslo: details and how to pay.",
            "Two hotels in Bergen, please: details, then payment.",
        ] {
            let a = |v: Value| v.as_object().cloned().unwrap();
            let calls = [
                ("h/search", a(json!({"city": "x"}))),
                ("h/details", a(json!({"hotel_id": "$var1.result.0.hotel_id$"}))),
                ("h/pay", a(json!({"hotel_id": "$var2.hotel_id$"}))),
                ("h/details", a(json!({"hotel_id": "$var1.result.1.hotel_id$"}))),
                ("h/pay", a(json!({"hotel_id": "$var4.hotel_id$"}))),
            ];
            model.learn(req, calls.iter().map(|(api, m)| (*api, m)), day);
        }
        assert_eq!(model.repeat_of("h/pay", "hotel_id"), Some(Repeat::Newest));
        assert_eq!(model.repeat_of("h/details", "hotel_id"), Some(Repeat::Next));
        let (search, details, pay) = (
            api("h/search", vec![p("city", "string", true)]),
            api("h/details", vec![p("hotel_id", "string", true)]),
            api("h/pay", vec![p("hotel_id", "string", true)]),
        );
        let mut c = ctx("Find two hotels in Lisbon with their details and payment options.");
        c.args = Some(Arc::new(model));
        let call = |c: &mut Context, a: &Arc<ApiView>, response: Value| -> Value {
            let f = fill_arguments(c, a);
            let sent = f.arguments.get("hotel_id").cloned().unwrap_or(Value::Null);
            let label = format!("var{}", c.path.len() + 1);
            c.path.push(Step {
                api: a.clone(),
                label,
                arguments: f.arguments,
                sources: f.sources,
                observation: String::new(),
                response: response.into(),
                repeat: 0,
            });
            sent
        };
        call(&mut c, &search, json!({"result": [{"hotel_id": 11}, {"hotel_id": 12}]}));
        assert_eq!(call(&mut c, &details, json!({"hotel_id": 11, "name": "A"})), json!("$var1.result.hotel_id$"));
        assert_eq!(call(&mut c, &pay, json!({"cards": ["visa"]})), json!("$var2.hotel_id$"));
        assert_eq!(call(&mut c, &details, json!({"hotel_id": 12, "name": "B"})), json!("$var1.result.1.hotel_id$"));
        assert_eq!(fill_arguments(&c, &pay).arguments["hotel_id"], json!("$var4.hotel_id$"), "the newest details call");
    }
}

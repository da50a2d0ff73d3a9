//! A value chosen among the options an earlier output lists, by what the request says of them.
//!
//! Some APIs list what a later call may ask for — the filters a search takes, the categories of a
//! shop, the tags of a catalogue — each option an id and a text (`{"title": "Pets allowed",
//! "genericId": "facility::4"}`), and the later call sends the ids of the options the request
//! asks for, joined by commas (`categories_filter: "facility::4,facility::28"` for "family rooms
//! that allow pets"). A remembered call's such value is the remembered request's choice: replayed
//! as it was, another request's hotels get the other request's pets. Where the remembered value's
//! ids are ids of an option list an earlier call of *this* run returned, the value is chosen
//! again from this run's list: the ids of the options whose every word this request says close
//! together ("allow pets" says "Pets allowed"; "three-star" says "3 stars").

use crate::read::lexicon::lexicon;
use crate::read::reading::{tokens, word_parts};
use crate::read::scan::small_number;
use serde_json::Value;
use std::collections::HashMap;

/// The most ids a chosen value holds, and the most a remembered one may hold to be chosen again.
const MAX_CHOSEN: usize = 12;

/// What a remembered value becomes where it is a choice among an earlier output's options.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Rechosen {
    /// The ids of the options this request says, joined as the remembered value was.
    Value(String),
    /// The value was a choice of several options, and this request says none of them.
    Nothing,
}

/// An option list: which field of each element holds the id, which its text.
#[derive(Debug, Clone, PartialEq)]
struct Fields {
    id: String,
    text: String,
}

/// `recorded` chosen again from the newest of `outputs` (earlier responses of this run, oldest
/// first) whose option lists hold one of its ids (or one of the same make, [`Makes::holds`]), by what
/// `request` says. The remembered request (`old_request`) is a worked example: an option it said
/// too and did not choose is no choice here either ("hotels" said, the "Hotels" property type
/// passed over). `None`: the value is no such choice (no output lists its ids with a text beside
/// them), or it is one id and this request says no option (then it stays what the remembered
/// call sent, as any constant does).
pub(crate) fn rechoose<'a>(
    recorded: &Value,
    outputs: impl DoubleEndedIterator<Item = &'a Value>,
    request: &str,
    old_request: &str,
) -> Option<Rechosen> {
    let text = recorded.as_str()?.trim();
    let ids: Vec<&str> = text.split(',').map(str::trim).collect();
    if ids.len() > MAX_CHOSEN || ids.iter().any(|i| i.is_empty() || i.contains(char::is_whitespace)) {
        return None;
    }
    let makes = Makes::of(&ids);
    let options = outputs.rev().find_map(|output| options_in(output, &makes))?;
    // The two requests are read only where a list was found (most values are no such choice).
    let said_there = Said::of(old_request);
    let chosen: Vec<String> = choose(&options, &Said::of(request))
        .into_iter()
        .filter(|(id, words)| ids.contains(&id.as_str()) || !said_there.says_close(words))
        .map(|(id, _)| id)
        .collect();
    match (chosen.is_empty(), ids.len()) {
        (false, _) => Some(Rechosen::Value(chosen.join(","))),
        (true, 1) => None,
        (true, _) => Some(Rechosen::Nothing),
    }
}

/// Where a remembered reference reads an option's id from an earlier output of this run
/// (`$var2.filters.6.options.9.genericId$`: the remembered request's one option stood there) and
/// this request says options of that list: the one it says in the most words ("wheelchair
/// accessible" before "hotels"). `None`: the value read is no option's id of a make ([`make`]),
/// or this request says no option of its list (the reference stands).
pub(crate) fn rechoose_read(read: &Value, output: &Value, request: &str) -> Option<String> {
    let id = read.as_str()?;
    make(id)?;
    let options = options_in(output, &Makes::of(&[id]))?;
    let chosen = choose(&options, &Said::of(request));
    // The first of the most worded.
    let most = chosen.iter().map(|(_, w)| w.len()).max()?;
    chosen.into_iter().find(|(_, w)| w.len() == most).map(|(id, _)| id)
}

/// Remembered ids with their makes ([`make`]), read once for a whole response.
struct Makes<'a> {
    ids: &'a [&'a str],
    makes: Vec<String>,
}

impl<'a> Makes<'a> {
    fn of(ids: &'a [&'a str]) -> Self {
        Makes { ids, makes: ids.iter().filter_map(|i| make(i)).collect() }
    }

    /// Whether `id` is one of the ids, or of the same make as one: the same letters and signs
    /// around other digits (`facility::17` beside a remembered `facility::8`: this run's list need
    /// not hold the remembered request's options). Plain numbers and words only as themselves.
    fn holds(&self, id: &str) -> bool {
        self.ids.contains(&id) || (!self.makes.is_empty() && make(id).is_some_and(|m| self.makes.contains(&m)))
    }
}

/// Every (id, text) of the option lists in `output` that hold one of `ids` ([`option_fields`]).
fn options_in(output: &Value, ids: &Makes<'_>) -> Option<Vec<(String, String)>> {
    let fields = option_fields(output, ids)?;
    let mut options = Vec::new();
    collect_options(output, &fields, &mut options);
    Some(options)
}

/// The id and text fields of the option lists in `v` that hold one of `ids`: an array of objects,
/// one of which has `ids`'s value in a scalar field, and beside it a field of words in most
/// elements (the first such in key order).
fn option_fields(v: &Value, ids: &Makes<'_>) -> Option<Fields> {
    match v {
        Value::Array(items) => {
            let objects: Vec<&serde_json::Map<String, Value>> = items.iter().filter_map(Value::as_object).collect();
            if objects.len() >= 2 {
                let id = objects.iter().find_map(|o| {
                    o.iter().find(|(_, x)| scalar_text(x).is_some_and(|s| ids.holds(&s))).map(|(k, _)| k)
                });
                if let Some(id) = id {
                    let texts = objects.iter().flat_map(|o| o.iter()).filter(|(k, x)| *k != id && worded(x));
                    let mut count: HashMap<&String, usize> = HashMap::new();
                    texts.for_each(|(k, _)| *count.entry(k).or_default() += 1);
                    let text = objects[0].keys().find(|k| count.get(k).is_some_and(|n| 2 * n >= objects.len()));
                    if let Some(text) = text {
                        return Some(Fields { id: id.clone(), text: text.clone() });
                    }
                }
            }
            items.iter().find_map(|x| option_fields(x, ids))
        }
        Value::Object(m) => m.values().find_map(|x| option_fields(x, ids)),
        _ => None,
    }
}

/// An id's make: its letters and signs, each run of digits as `#` (`room_facility::86` →
/// `room_facility::#`); `None` for an id without a word (two letters or more), a sign or digits
/// (a date-time's `T` is no word).
fn make(s: &str) -> Option<String> {
    let mut out = String::new();
    for c in s.chars() {
        if !c.is_ascii_digit() {
            out.push(c);
        } else if !out.ends_with('#') {
            out.push('#');
        }
    }
    let signed = s.chars().any(|c| !c.is_alphanumeric());
    let worded = s.split(|c: char| !c.is_alphabetic()).any(|w| w.chars().count() >= 2);
    (signed && worded && out.contains('#')).then_some(out)
}

/// A string or a number, as text.
fn scalar_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.trim().to_string()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// A text of words: letters in most of its characters, not an id (`facility::4`).
fn worded(v: &Value) -> bool {
    let Some(s) = v.as_str() else { return false };
    let letters = s.chars().filter(|c| c.is_alphabetic()).count();
    let signs = s.chars().filter(|c| !c.is_whitespace()).count();
    letters >= 2 && 2 * letters >= signs && !s.contains("::") && !s.contains('_')
}

/// Every (id, text) of the option lists in `v` with `fields`, in order, each id once.
fn collect_options(v: &Value, fields: &Fields, out: &mut Vec<(String, String)>) {
    match v {
        Value::Array(items) => {
            for x in items {
                if let Some(o) = x.as_object() {
                    let id = o.get(&fields.id).and_then(scalar_text);
                    let text = o.get(&fields.text).and_then(Value::as_str);
                    if let (Some(id), Some(text)) = (id, text) {
                        if !out.iter().any(|(i, _)| *i == id) {
                            out.push((id, text.to_string()));
                        }
                        continue;
                    }
                }
                collect_options(x, fields, out);
            }
        }
        Value::Object(m) => m.values().for_each(|x| collect_options(x, fields, out)),
        _ => {}
    }
}

/// A word as options and requests are compared: lower-case, a number spelled out as digits.
fn normal(w: &str) -> String {
    let w = w.to_lowercase();
    match small_number(&w) {
        Some(n) if w.chars().count() >= 3 && w.chars().all(char::is_alphabetic) => format!("{n}"),
        _ => w,
    }
}

/// Whether two words are forms of one ("allowed" / "allow", "rooms" / "room", "facilities" /
/// "facility"): equal, or the longer is the shorter (three letters or more) and an ending of the
/// lexicon's forms. "Barceloneta" is no form of "Barcelona".
fn same_word(a: &str, b: &str) -> bool {
    if a == b {
        return true;
    }
    let (short, long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    if short.chars().count() < 3 || short.chars().any(|c| c.is_ascii_digit()) {
        return false;
    }
    let endings = &lexicon().form_endings;
    let ends = |stem: &str| long.strip_prefix(stem).is_some_and(|rest| endings.contains(rest));
    ends(short) || short.strip_suffix('y').is_some_and(|stem| long.strip_prefix(stem) == Some("ies"))
}

/// The words of a text, each with its position; a word joined by signs is its parts
/// ("three-star": `3`, `star`), and, in a request, also the whole ("wi-fi" says `wifi` too). An
/// option's word of short parts is only the whole ("Wi-Fi": `wifi`), and an option's function
/// words are left out but for those that change what it means (the lexicon's
/// `option_meaning_words`: "Adult only").
fn text_words(text: &str, request: bool) -> Vec<(usize, String)> {
    let lex = lexicon();
    let mut out = Vec::new();
    for (at, t) in tokens(text).iter().enumerate() {
        let parts = word_parts(t.text);
        let whole = parts.len() > 1 && (request || parts.iter().all(|p| p.chars().count() <= 2));
        if whole {
            out.push((at, normal(&parts.concat())));
        }
        if whole && !request {
            continue;
        }
        for p in &parts {
            let w = normal(p);
            if request || !lex.function_words.contains(&w) || lex.option_meaning_words.contains(&w) {
                out.push((at, w));
            }
        }
    }
    out
}

/// A request's words with where each stands.
struct Said(Vec<(usize, String)>);

impl Said {
    fn of(request: &str) -> Self {
        Said(text_words(request, true))
    }

    /// Where the request says `word` (in any of its forms).
    fn places(&self, word: &str) -> Vec<usize> {
        self.0.iter().filter(|(_, w)| same_word(w, word)).map(|(p, _)| *p).collect()
    }

    /// Whether the request says `words` close together (within twice as many words, and two
    /// more): every one of them, or every one but one of three or more.
    fn says_close(&self, words: &[String]) -> bool {
        if words.is_empty() {
            return false;
        }
        let places: Vec<Vec<usize>> = words.iter().map(|w| self.places(w)).collect();
        let found: Vec<&Vec<usize>> = places.iter().filter(|p| !p.is_empty()).collect();
        let enough = if words.len() >= 3 { words.len() - 1 } else { words.len() };
        if found.len() < enough {
            return false;
        }
        let reach = 2 * words.len() + 2;
        found[0].iter().any(|p| found.iter().all(|ps| ps.iter().any(|q| q.abs_diff(*p) <= reach)))
    }
}

/// The ids of the options whose words the request says close together, with their words; an
/// option whose words are all another chosen one's is left out ("Parking" where "Free parking"
/// is chosen).
fn choose(options: &[(String, String)], said: &Said) -> Vec<(String, Vec<String>)> {
    let worded: Vec<(&String, Vec<String>)> = options
        .iter()
        .map(|(id, text)| {
            let mut w: Vec<String> = text_words(text, false).into_iter().map(|(_, s)| s).collect();
            w.sort();
            w.dedup();
            (id, w)
        })
        .filter(|(_, w)| said.says_close(w))
        .collect();
    let within = |a: &[String], b: &[String]| a.len() < b.len() && a.iter().all(|w| b.contains(w));
    worded
        .iter()
        .filter(|(_, w)| !worded.iter().any(|(_, other)| within(w, other)))
        .map(|(id, w)| ((*id).clone(), w.clone()))
        .take(MAX_CHOSEN)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A recipe site lists the diets and cuisines its search filters by; a remembered search sent
    /// the vegan and Thai ones. Another request's own words choose from this run's list.
    fn catalogue() -> Value {
        json!({"groups": [
            {"name": "Diet", "choices": [
                {"label": "Vegan", "key": "diet::3"},
                {"label": "Gluten free", "key": "diet::7"},
                {"label": "Dairy free", "key": "diet::8"}
            ]},
            {"name": "Cuisine", "choices": [
                {"label": "Thai", "key": "cuisine::12"},
                {"label": "Italian", "key": "cuisine::4"},
                {"label": "3 ingredients", "key": "effort::3"}
            ]}
        ]})
    }

    #[test]
    fn a_remembered_choice_of_options_is_made_again_by_this_requests_words() {
        let list = catalogue();
        let outputs = [json!({"unrelated": [1, 2]}), list.clone()];
        let pick = |request: &str, recorded: Value| rechoose(&recorded, outputs.iter(), request, "");
        assert_eq!(
            pick(
                "Find Italian dinners that are free of gluten… no, just gluten free ones",
                json!("diet::3,cuisine::12")
            ),
            Some(Rechosen::Value("diet::7,cuisine::4".into())),
            "every word of an option said, close together, in the list's order"
        );
        assert_eq!(
            pick("Quick Thai recipes with three ingredients", json!("diet::3,cuisine::12")),
            Some(Rechosen::Value("cuisine::12,effort::3".into())),
            "a number spelled out says the option's digit"
        );
        assert_eq!(
            pick("Something free for my family dinner tonight, with no dairy", json!("diet::3,cuisine::12")),
            Some(Rechosen::Nothing),
            "the words of an option said far apart do not choose it: the remembered choice is not this one's"
        );
        assert_eq!(pick("Something for dinner", json!("diet::3")), None, "one id, nothing said: kept as it was");
        assert_eq!(
            pick("Vegan dinners", json!("diet::99")),
            Some(Rechosen::Value("diet::3".into())),
            "an id of the same make: this run's list need not hold the remembered one"
        );
        assert_eq!(pick("Vegan dinners", json!("tag-99")), None, "no output lists an id of its make: no choice");
        assert_eq!(pick("Vegan dinners", json!("vegan recipes")), None, "a free text is no list of ids");
    }

    /// The remembered request is a worked example: an option it said and passed over is no
    /// choice here either; a reference to one option of a list takes the option said in the
    /// most words.
    #[test]
    fn what_the_remembered_request_said_and_passed_over_is_not_chosen() {
        let list = json!({"amenities": [
            {"name": "Desks", "code": "kind-1"},
            {"name": "Standing desks", "code": "desk-14"},
            {"name": "Phone booths", "code": "room-3"}
        ]});
        let old = "two standing desks for our team in March";
        let got = rechoose(&json!("desk-14"), std::iter::once(&list), "desks with phone booths", old);
        assert_eq!(got, Some(Rechosen::Value("room-3".into())), "\"desks\" was said there and not chosen");
        let got = rechoose(&json!("desk-14"), std::iter::once(&list), "desks with phone booths", "");
        assert_eq!(got, Some(Rechosen::Value("kind-1,room-3".into())));
        let read = json!("kind-1");
        assert_eq!(rechoose_read(&read, &list, "standing desks for two").as_deref(), Some("desk-14"));
        assert_eq!(rechoose_read(&read, &list, "a quiet corner"), None, "nothing said: the reference stands");
        assert_eq!(rechoose_read(&json!("2024-11-05T10:00"), &list, "desks"), None, "a date-time is no id");
    }

    /// A coworking space's amenities: the longer option said wins over the shorter it holds, a
    /// word's forms say it ("quiet rooms" says "Quiet room") but a longer name is no form of a
    /// shorter one, and an option's "only" must be said too.
    #[test]
    fn options_are_said_by_their_words_forms_and_limits() {
        let list = json!([
            {"title": "Parking", "id": 2},
            {"title": "Free parking", "id": 46},
            {"title": "Wi-Fi", "id": 107},
            {"title": "Quiet room", "id": 9},
            {"title": "Members only", "id": 31},
            {"title": "Portland Centre", "id": 5}
        ]);
        let pick = |request: &str| rechoose(&json!("2,107"), std::iter::once(&list), request, "");
        assert_eq!(pick("a desk with free parking and wifi"), Some(Rechosen::Value("46,107".into())));
        assert_eq!(
            pick("desks for our members near the Port centre, with quiet rooms"),
            Some(Rechosen::Value("9".into()))
        );
        assert_eq!(pick("members only, quiet rooms"), Some(Rechosen::Value("9,31".into())));
    }
}

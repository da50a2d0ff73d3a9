//! Joining a remembered fragment to the calls a run made: a fragment brings the calls its API
//! reads from (the hours of a gym read the gym search's id), but where this run already made a
//! call that may stand in for such a producer — of another API a word this request says
//! documents with it (the search for gyms near coordinates, where the fragment's chain searched
//! a city; the hotel search by coordinates, for the hotel-name lookup a fragment's reviews read)
//! — whose response holds every field the fragment reads from it (or, failing that, the field
//! named as the parameter the read fills), that call stands in: the producer is not sent, and its
//! readers read the call made (the data-flow link between the two parts). A call of the
//! producer's own API this run made stands in the same way, unless it is a lookup (the
//! fragment's lookup is of its own name): the flight search made serves the flight details a
//! fragment brings with its own search.
use super::store::MemoryStep;
use crate::exec::refs::{lookup, Reference};
use crate::plan::Context;
use std::collections::{BTreeSet, HashMap};
use toolgraph_schema::fields::field_key;

/// A fragment joined to the calls made: its steps (indexes of the chain) still to send, the
/// labels of the stood-in producers mapped to the calls made, and the steps to send in place of
/// the chain's (their references to a stood-in producer's output rewritten to where the call made
/// holds that field).
pub(crate) struct Joined {
    pub part: Vec<usize>,
    pub labels: HashMap<String, String>,
    pub steps: HashMap<usize, MemoryStep>,
}

/// Where `response` (of the call labelled `label`) holds the field `path` names: the path
/// itself, else the first path to a field of the same key (compared as parameters and outputs
/// are linked, [`field_key`]; four letters or more, so a bare `id` links nothing). A dry run's
/// response is a skeleton of the API's documented outputs (each leaf a reference to its own
/// call): it holds the path where the documentation has the field, and every path where the API
/// documents no output.
fn held_at(response: &serde_json::Value, label: &str, path: &str) -> Option<String> {
    let segments: Vec<&str> = if path.is_empty() { Vec::new() } else { path.split('.').collect() };
    if response.is_null() || lookup(response, &segments).is_some() {
        return Some(path.to_string());
    }
    if skeleton(response, label) {
        let named: Vec<&str> = segments.iter().copied().filter(|s| s.parse::<usize>().is_err()).collect();
        let bare = response.as_object().is_some_and(|m| m.len() == 1 && m.contains_key("result"));
        return (bare || lookup(response, &named).is_some()).then(|| path.to_string());
    }
    let key = segments.iter().rev().find(|s| s.parse::<usize>().is_err()).map(|s| field_key(s))?;
    (key.len() >= 4).then(|| find_key(response, &key, 0)).flatten().map(|p| p.join("."))
}

/// Whether every leaf of `v` is a reference to the call `label` itself (a dry run's response).
fn skeleton(v: &serde_json::Value, label: &str) -> bool {
    leaves(v).all(|x| x.as_str().and_then(Reference::whole).is_some_and(|r| r.label == label))
}

/// The scalars of a recorded value, inside arrays and objects.
pub(crate) fn leaves(v: &serde_json::Value) -> Box<dyn Iterator<Item = &serde_json::Value> + '_> {
    match v {
        serde_json::Value::Array(items) => Box::new(items.iter().flat_map(leaves)),
        serde_json::Value::Object(m) => Box::new(m.values().flat_map(leaves)),
        x => Box::new(std::iter::once(x)),
    }
}

/// The first path (arrays through their first item) to a key whose [`field_key`] is `key`.
fn find_key(v: &serde_json::Value, key: &str, depth: usize) -> Option<Vec<String>> {
    if depth > 6 {
        return None;
    }
    match v {
        serde_json::Value::Object(m) => {
            m.iter().find(|(k, _)| field_key(k) == key).map(|(k, _)| vec![k.clone()]).or_else(|| {
                m.iter().find_map(|(k, x)| {
                    find_key(x, key, depth + 1).map(|mut p| {
                        p.insert(0, k.clone());
                        p
                    })
                })
            })
        }
        serde_json::Value::Array(items) => items.first().and_then(|x| find_key(x, key, depth + 1)).map(|mut p| {
            p.insert(0, "0".to_string());
            p
        }),
        _ => None,
    }
}

/// `part` (indexes of `chain`, serving `wanted`) joined to the calls `ctx` made (see the
/// [module](self)).
/// `siblings(a, b)`: whether a word of this request documents both APIs; `without(stood)`: the
/// fragment again, its calls reading none of the steps `stood` in for.
pub(crate) fn join(
    ctx: &Context,
    chain: &[MemoryStep],
    part: &[usize],
    wanted: &str,
    siblings: impl Fn(&str, &str) -> bool,
    without: impl FnOnce(&BTreeSet<usize>) -> Vec<usize>,
) -> Joined {
    let mut stood: HashMap<usize, (String, Vec<(Reference, String)>)> = HashMap::new();
    for &j in part {
        let producer = &chain[j].api;
        // A lookup made already is sent again for the fragment's own name (the same name is
        // not sent twice, see `recall`); a search made already is this request's search.
        let made_lookup = ctx.path.iter().any(|s| &s.api.id == producer && s.api.is_lookup());
        if producer == wanted || made_lookup {
            continue;
        }
        let label = format!("var{}", j + 1);
        // Each reference to the producer, with the parameter it fills.
        let reads: Vec<(Reference, &str)> = part
            .iter()
            .filter(|i| **i > j)
            .flat_map(|i| chain[*i].arguments.iter())
            .filter_map(|(name, v)| v.as_str().map(|v| (name.as_str(), v)))
            .flat_map(|(name, v)| Reference::all_in(v).into_iter().map(move |r| (r, name)))
            .filter(|(r, _)| r.label == label)
            .collect();
        if reads.is_empty() {
            continue;
        }
        // Where the call made holds the field read, else a field named as the parameter it fills
        // (the hotel search's `hotel_id` for the reviews' `hotel_id`, where the fragment read a
        // destination lookup's `dest_id`).
        let made =
            ctx.path.iter().rev().filter(|s| &s.api.id == producer || siblings(&s.api.id, producer)).find_map(|s| {
                let moved: Option<Vec<(Reference, String)>> = reads
                    .iter()
                    .map(|(r, param)| {
                        held_at(&s.response, &s.label, &r.path)
                            .or_else(|| held_at(&s.response, &s.label, param))
                            .map(|p| (r.clone(), p))
                    })
                    .collect();
                moved.map(|m| (s.label.clone(), m))
            });
        if let Some(m) = made {
            stood.insert(j, m);
        }
    }
    if stood.is_empty() {
        return Joined { part: part.to_vec(), labels: HashMap::new(), steps: HashMap::new() };
    }
    let part = without(&stood.keys().copied().collect());
    let labels = stood.iter().map(|(j, (made, _))| (format!("var{}", j + 1), made.clone())).collect();
    let mut steps = HashMap::new();
    for &i in &part {
        let mut step = chain[i].clone();
        let mut changed = false;
        for (name, v) in step.arguments.iter_mut() {
            let Some(s) = v.as_str() else { continue };
            let mut text = s.to_string();
            for (old, new_path) in stood.values().flat_map(|(_, m)| m).filter(|(r, p)| r.path != *p) {
                let mut new = old.clone();
                new.path = new_path.clone();
                if text.contains(&old.to_string()) {
                    text = text.replace(&old.to_string(), &new.to_string());
                    step.sources.remove(name);
                    changed = true;
                }
            }
            *v = serde_json::Value::String(text);
        }
        if changed {
            steps.insert(i, step);
        }
    }
    Joined { part, labels, steps }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A remembered step of `api` with `args`.
    fn step(api: &str, args: serde_json::Value) -> MemoryStep {
        MemoryStep {
            api: api.into(),
            arguments: args.as_object().cloned().unwrap_or_default(),
            sources: HashMap::new(),
        }
    }

    /// A call this run made of `a`, labelled `label`, answering `response`; `ends`: the share of
    /// observed chains that ended after it (0: a lookup).
    fn made(a: &str, label: &str, response: serde_json::Value, ends: Option<f64>) -> crate::plan::Step {
        let mut view = (*crate::plan::test_support::api(a, vec![])).clone();
        view.ends = ends;
        crate::plan::Step {
            api: std::sync::Arc::new(view),
            label: label.into(),
            arguments: Default::default(),
            sources: Default::default(),
            observation: String::new(),
            response: response.into(),
            repeat: 0,
        }
    }

    /// A sibling gym search's response holds the gym id the hours read, under its own path; a
    /// bare `id` links nothing; a dry run's skeleton holds what its API documents (all of it
    /// where it documents nothing).
    #[test]
    fn a_field_read_from_a_producer_is_found_in_the_sibling_calls_response() {
        let nearby = json!({"data": {"items": [{"gym_id": "n-1", "name": "Core"}]}});
        assert_eq!(held_at(&nearby, "var2", "gyms.0.gym_id").as_deref(), Some("data.items.0.gym_id"));
        assert_eq!(held_at(&nearby, "var2", "data.items.0.name").as_deref(), Some("data.items.0.name"));
        assert_eq!(held_at(&json!({"results": [{"id": 4}]}), "var2", "gyms.0.id"), None);
        assert_eq!(held_at(&nearby, "var2", "gyms.0.opening"), None);
        let bare = json!({"result": "$var2.result$"});
        assert_eq!(held_at(&bare, "var2", "gyms.0.gym_id").as_deref(), Some("gyms.0.gym_id"));
        let documented = json!({"gyms": {"gym_id": "$var2.gyms.gym_id$"}});
        assert_eq!(held_at(&documented, "var2", "gyms.0.gym_id").as_deref(), Some("gyms.0.gym_id"));
        assert_eq!(held_at(&documented, "var2", "gyms.0.hours"), None);
    }

    /// A concert run searched the shows already; a fragment bringing the seat plan with its own
    /// show search (and the venue lookup before it) reads the search made, not a second one —
    /// but the lookup made, a lookup, is the fragment's own name's and is sent again.
    #[test]
    fn a_call_of_the_producers_own_api_stands_in_unless_a_lookup() {
        use crate::plan::test_support::ctx;
        let chain = vec![
            step("venue/lookup", json!({"query": "Royal Albert Hall"})),
            step("shows/search", json!({"venue_id": "$var1.id$", "date": "2025-05-02"})),
            step("shows/seat_plan", json!({"show_id": "$var2.shows.0.show_id$", "venue_id": "$var1.id$"})),
        ];
        let mut c = ctx("Find the concerts at the Barbican on May 3 and show me the seat plan.");
        c.path.push(made("venue/lookup", "var1", json!([{"id": "v-9"}]), Some(0.0)));
        c.path.push(made("shows/search", "var2", json!({"shows": [{"show_id": "s-42"}]}), Some(0.4)));
        let part = [0, 1, 2];
        let without = |stood: &BTreeSet<usize>| part.iter().copied().filter(|i| !stood.contains(i)).collect();
        let joined = join(&c, &chain, &part, "shows/seat_plan", |_, _| false, without);
        assert_eq!(joined.part, vec![0, 2], "the search made stands in; the lookup is sent");
        assert_eq!(joined.labels.get("var2").map(String::as_str), Some("var2"));
        assert!(!joined.labels.contains_key("var1"), "a lookup made does not stand in: {:?}", joined.labels);
        // Without the search made, the fragment sends its own.
        c.path.pop();
        assert_eq!(join(&c, &chain, &part, "shows/seat_plan", |_, _| false, without).part, vec![0, 1, 2]);
    }

    /// A library run searched a branch's shelf already; a fragment bringing reader reviews read
    /// its own catalog lookup's `item_id` for the reviews' `book_id`: the shelf search made holds
    /// no `item_id`, but it holds the `book_id` the parameter names, so it stands in and the
    /// reviews read it. A response holding neither field stands in for nothing.
    #[test]
    fn a_call_made_stands_in_through_the_field_the_readers_parameter_names() {
        use crate::plan::test_support::ctx;
        let chain = vec![
            step("library/catalog", json!({"title": "Emma"})),
            step("library/reviews", json!({"book_id": "$var1.0.item_id$"})),
        ];
        let shelf = |response: serde_json::Value| made("library/shelf", "var1", response, None);
        let part = [0, 1];
        let without = |stood: &BTreeSet<usize>| part.iter().copied().filter(|i| !stood.contains(i)).collect();
        let mut c = ctx("Find books about cooking at the Oak Road branch, with their reader reviews.");
        c.path.push(shelf(json!({"books": [{"book_id": "bk-7", "title": "Salt"}]})));
        let joined = join(&c, &chain, &part, "library/reviews", |_, _| true, without);
        assert_eq!(joined.part, vec![1], "the shelf search made stands in for the catalog lookup");
        assert_eq!(joined.labels.get("var1").map(String::as_str), Some("var1"));
        assert_eq!(joined.steps[&1].arguments["book_id"], json!("$var1.books.0.book_id$"));
        c.path[0] = shelf(json!({"shelves": [{"title": "Salt"}]}));
        assert_eq!(join(&c, &chain, &part, "library/reviews", |_, _| true, without).part, vec![0, 1]);
    }
}
